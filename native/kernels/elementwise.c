/*
 * Elementwise ops and expression programs: a vectorized interpreter over blocks.
 *
 * Every elementwise kernel is a program (common.h): loads of strided, broadcast inputs and
 * registry ops, each rounded to its dtype as storing it would (so a fused program equals the
 * unfused ops bit for bit). The output index space is collapsed (dims contiguous in every operand
 * merge), cut into tiles of up to LOOM_BLOCK elements along its last dim, and the tiles are
 * spread over the pool; a tile loads its inputs into double blocks, applies the ops (tight loops
 * the compiler vectorizes) and stores with the js backend's conversions.
 *
 * Scalar semantics are the registry's `ref` functions (src/graph/ops/elementwise.ts) in double:
 * NaN is true for logical ops (only 0 is false, as torch), sign(NaN) and sign(-0) are 0,
 * integer results are checked (int_check_args/int_check_result), maximum/minimum propagate NaN
 * and order signed zeros as Math.max/Math.min, pow follows Math.pow's NaN cases, round is
 * half-to-even. Transcendental
 * functions run through libmvec's SIMD variants on whole vectors only (a partial last vector goes
 * through a padded temporary), so an element's bits never depend on its position in a block: a
 * fused kernel and the unfused ops agree however their blocks are cut.
 */
#include <stdatomic.h>

#include "common.h"

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512d vd;
#define VW 8
#define VLOAD _mm512_loadu_pd
#define VSTORE _mm512_storeu_pd
#define VM(f) _ZGVeN8v_##f
#elif defined(__AVX2__)
#include <immintrin.h>
typedef __m256d vd;
#define VW 4
#define VLOAD _mm256_loadu_pd
#define VSTORE _mm256_storeu_pd
#define VM(f) _ZGVdN4v_##f
#endif

#ifdef VW
vd VM(exp)(vd);
vd VM(log)(vd);
vd VM(log1p)(vd);
vd VM(sin)(vd);
vd VM(cos)(vd);
vd VM(tanh)(vd);
typedef vd (*vfn)(vd);
/** o[i] = f(a[i]) with the SIMD variant for every element (the tail through a padded temporary). */
static void vmap(vfn f, double *o, const double *a, int n) {
  int i = 0;
  for (; i + VW <= n; i += VW) VSTORE(o + i, f(VLOAD(a + i)));
  if (i < n) {
    double t[VW] = {0};
    for (int k = 0; k < n - i; k++) t[k] = a[i + k];
    VSTORE(t, f(VLOAD(t)));
    for (int k = 0; k < n - i; k++) o[i + k] = t[k];
  }
}
#define V_EXP VM(exp)
#define V_LOG VM(log)
#define V_LOG1P VM(log1p)
#define V_SIN VM(sin)
#define V_COS VM(cos)
#define V_TANH VM(tanh)
#else
typedef double (*vfn)(double);
static void vmap(vfn f, double *o, const double *a, int n) {
  for (int i = 0; i < n; i++) o[i] = f(a[i]);
}
#define V_EXP exp
#define V_LOG log
#define V_LOG1P log1p
#define V_SIN sin
#define V_COS cos
#define V_TANH tanh
#endif

void load_block(double *d, const char *p, int dt, int64_t i0, int64_t s, int n) {
  if (s == 0) {
    double v = load1(p, dt, i0);
    for (int i = 0; i < n; i++) d[i] = v;
    return;
  }
#define LOADS(T) { const T *q = (const T *)p + i0; if (s == 1) for (int i = 0; i < n; i++) d[i] = q[i]; \
                   else for (int i = 0; i < n; i++) d[i] = q[i * s]; } break;
  switch (dt) {
    case DT_F32: LOADS(float)
    case DT_F64: case DT_I64: LOADS(double)
    case DT_I32: LOADS(int32_t)
    case DT_I8: LOADS(int8_t)
    case DT_U8: case DT_BOOL: LOADS(uint8_t)
#define LOADH(CVT) { const uint16_t *q = (const uint16_t *)p + i0; if (s == 1) for (int i = 0; i < n; i++) d[i] = CVT(q[i]); \
                     else for (int i = 0; i < n; i++) d[i] = CVT(q[i * s]); } break;
    case DT_F16: LOADH(f16_to_f32_bf)
    case DT_BF16: LOADH(bf16_to_f32)
#undef LOADH
    default: for (int i = 0; i < n; i++) d[i] = load1(p, dt, i0 + i * s);
  }
#undef LOADS
}

void store_block(char *p, int dt, int64_t i0, int64_t s, const double *v, int n) {
  switch (dt) {
    case DT_F32: {
      float *q = (float *)p + i0;
      if (s == 1) for (int i = 0; i < n; i++) q[i] = (float)v[i];
      else for (int i = 0; i < n; i++) q[i * s] = (float)v[i];
      break;
    }
    case DT_F64: {
      double *q = (double *)p + i0;
      if (s == 1) memcpy(q, v, (size_t)n * 8);
      else for (int i = 0; i < n; i++) q[i * s] = v[i];
      break;
    }
    case DT_BOOL: {
      uint8_t *q = (uint8_t *)p + i0;
      for (int i = 0; i < n; i++) q[i * s] = v[i] != 0;
      break;
    }
    /* halves: double -> float -> half, each rounded to nearest even, as store1 */
#define STOREH(CVT) { uint16_t *q = (uint16_t *)p + i0; if (s == 1) for (int i = 0; i < n; i++) q[i] = CVT((float)v[i]); \
                      else for (int i = 0; i < n; i++) q[i * s] = CVT((float)v[i]); } break;
    case DT_F16: STOREH(f32_to_f16_bf)
    case DT_BF16: STOREH(f32_to_bf16_bf)
#undef STOREH
    default: for (int i = 0; i < n; i++) store1(p, dt, i0 + i * s, v[i]);
  }
}

int collapse_dims(int nd, int64_t *shape, int nops, int64_t **st) {
  int m = 0;
  for (int d = 0; d < nd; d++) {
    if (shape[d] == 1) continue;
    if (m > 0) {
      int ok = 1;
      for (int k = 0; k < nops && ok; k++) ok = st[k][m - 1] == st[k][d] * shape[d];
      if (ok) {
        shape[m - 1] *= shape[d];
        for (int k = 0; k < nops; k++) st[k][m - 1] = st[k][d];
        continue;
      }
    }
    shape[m] = shape[d];
    for (int k = 0; k < nops; k++) st[k][m] = st[k][d];
    m++;
  }
  if (m == 0) {
    shape[0] = 1;
    for (int k = 0; k < nops; k++) st[k][0] = 0;
    m = 1;
  }
  return m;
}

/* ---- scalar definitions ---------------------------------------------------------------------- */
/* W. J. Cody's rational approximations, the same expressions as the registry's erf, evaluated
 * branch-free over a block (every range computed, one selected); exp through vmap. */
static void erf_block(double *o, const double *a, int n) {
  double e[LOOM_BLOCK];
  for (int i = 0; i < n; i++) e[i] = -fabs(a[i]) * fabs(a[i]);
  vmap(V_EXP, e, e, n);
#pragma omp simd
  for (int i = 0; i < n; i++) {
    double x = a[i], ax = fabs(x), t = x * x, ex = e[i];
    double p0 = (((0.185777706184603153 * t + 3.16112374387056560) * t + 113.864154151050156) * t + 377.485237685302021) * t + 3209.37758913846947;
    double q0 = (((t + 23.6012909523441209) * t + 244.024637934444173) * t + 1282.61652607737228) * t + 2844.23683343917062;
    double small = (x * p0) / q0;
    double p1 = (((((((5.64188496988670089e-1 * ax + 8.88314979438837594) * ax + 66.1191906371416295) * ax + 298.635138197400131) * ax + 881.952221241769090) * ax + 1712.04761263407058) * ax + 2051.07837782607147) * ax + 1230.33935479799725);
    double q1 = (((((((ax + 15.7449261107098347) * ax + 117.693950891312499) * ax + 537.181101862009858) * ax + 1621.38957456669019) * ax + 3290.79923573345963) * ax + 4362.61909014324716) * ax + 3439.36767414372164) * ax + 1230.33935480374942;
    double mid = 1 - (ex * p1) / q1;
    double z = 1 / (ax * ax);
    double p2 = ((((1.63153871373020978e-2 * z + 3.05326634961232344e-1) * z + 3.60344899949804439e-1) * z + 1.25781726111229246e-1) * z + 1.60837851487422766e-2) * z + 6.58749161529837803e-4;
    double q2 = ((((z + 2.56852019228982242) * z + 1.87295284992346725) * z + 5.27905102951428412e-1) * z + 6.05183413124413191e-2) * z + 2.33520497626869185e-3;
    double tail = 1 - (ex / ax) * (0.564189583547756287 - (z * p2) / q2);
    double r = ax < 4 ? mid : ax < 27 ? tail : 1;
    r = x < 0 ? -r : r;
    r = ax < 0.5 ? small : r;
    o[i] = x != x ? x : r; /* NaN propagates (torch.erf), selected branch-free */
  }
}

/*
 * erf for results stored as float32 or a half type: erf(x) = x·P(x²/8 - 1) on |x| < 4 (P of
 * degree 22, a Chebyshev fit of erf(√t)/√t on t in [0, 16], relative error < 5e-13: the stored
 * float32 is the correctly rounded erf except within 5e-13 of a rounding boundary), ±1 beyond.
 * No division and no exp: ~6x faster than the rational form float64 results use.
 */
static const double ERF_P[23] = {1.5260534111077161e-06, -4.5894408098153986e-06, 4.8622188794146762e-06, -1.2619502067684155e-05, 5.1008513488243174e-05, -0.00012652977172519726, 0.0002724272449038478, -0.00060481830795274015, 0.0012946190620117129, -0.0025830637228818976, 0.0048526931400746124, -0.0086043429326982269, 0.014349839505881685, -0.022474034647311632, 0.033060590030532327, -0.045765039879792621, 0.059886909436404553, -0.074727871666185913, 0.090208993871826806, -0.10771044229937757, 0.13167511689977915, -0.17657623330399153, 0.35353099564338775};

static void erf_fast_block(double *o, const double *a, int n) {
#pragma omp simd
  for (int i = 0; i < n; i++) {
    double x = a[i], u = x * x * 0.125 - 1, h = ERF_P[0];
    /* Horner, written out so the loop over i vectorizes */
    h = fma(h, u, ERF_P[1]);
    h = fma(h, u, ERF_P[2]);
    h = fma(h, u, ERF_P[3]);
    h = fma(h, u, ERF_P[4]);
    h = fma(h, u, ERF_P[5]);
    h = fma(h, u, ERF_P[6]);
    h = fma(h, u, ERF_P[7]);
    h = fma(h, u, ERF_P[8]);
    h = fma(h, u, ERF_P[9]);
    h = fma(h, u, ERF_P[10]);
    h = fma(h, u, ERF_P[11]);
    h = fma(h, u, ERF_P[12]);
    h = fma(h, u, ERF_P[13]);
    h = fma(h, u, ERF_P[14]);
    h = fma(h, u, ERF_P[15]);
    h = fma(h, u, ERF_P[16]);
    h = fma(h, u, ERF_P[17]);
    h = fma(h, u, ERF_P[18]);
    h = fma(h, u, ERF_P[19]);
    h = fma(h, u, ERF_P[20]);
    h = fma(h, u, ERF_P[21]);
    h = fma(h, u, ERF_P[22]);
    o[i] = fabs(x) >= 4 ? copysign(1.0, x) : x * h;
  }
}

static void sigmoid_block(double *o, const double *a, int n) {
  double e[LOOM_BLOCK];
  for (int i = 0; i < n; i++) e[i] = -a[i];
  vmap(V_EXP, e, e, n);
  for (int i = 0; i < n; i++) o[i] = 1 / (1 + e[i]);
}

static inline int truthy(double v) { return v != 0; }

static inline double js_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }

/* ---- integer results (src/graph/ops/elementwise.ts intResultCheck) ------------------------------ */
/*
 * Integer tensors hold integers only: integer floor_divide/remainder by 0 and any non-finite
 * integer result (a cast of inf/NaN) are errors (integer pow follows torch's rule: int_pow). Pool threads
 * record the first fault here; loom_int_fault_report (after each kernel, on the command's thread)
 * turns it into the command's error with the reference's message.
 */
static atomic_int int_fault; /* 0: none; else 1 + opcode */
static int int_fault_dt, int_fault_arg; /* arg: an operand was refused (else a result) */
static double int_fault_v;

static void int_fault_set(int op, int dt, int arg, double v) {
  int none = 0;
  if (atomic_compare_exchange_strong(&int_fault, &none, 1 + op)) { int_fault_dt = dt; int_fault_arg = arg; int_fault_v = v; }
}

static inline int is_int_dt(int dt) { return dt == DT_I32 || dt == DT_I64 || dt == DT_I8 || dt == DT_U8; }

/** Checks on the operands (before the op: its output may overwrite them). */
static void int_check_args(int op, int dt, const double *b, int n) {
  if (op == OP_floor_divide || op == OP_remainder) {
    for (int i = 0; i < n; i++) if (b[i] == 0) { int_fault_set(op, dt, 1, b[i]); return; }
  }
}

static void int_check_result(int op, int dt, const double *o, int n) {
  for (int i = 0; i < n; i++) if (!isfinite(o[i])) { int_fault_set(op, dt, 0, o[i]); return; }
}

static const char *const EW_NAMES[] = {
#define LOOM_EW_NAME(n) #n,
  LOOM_REGISTRY_EW_OPS(LOOM_EW_NAME)
#undef LOOM_EW_NAME
};
static const char *const DT_NAMES[] = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool"};

int loom_int_fault_report(void) {
  int f = atomic_exchange(&int_fault, 0);
  if (!f) return 0;
  int op = f - 1;
  const char *name = EW_NAMES[op], *dt = DT_NAMES[int_fault_dt];
  double v = int_fault_v;
  const char *vs = isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity"; /* as JavaScript prints them */
  if (int_fault_arg) loom_set_error("[%s] ZeroDivisionError: integer division by zero (%s)", name, dt);
  else if (op == OP_cast) loom_set_error("[cast] cannot convert %s to %s: integer tensors hold integers only", vs, dt);
  else loom_set_error("[%s] result %s cannot be stored in a %s tensor", name, vs, dt);
  return 1;
}

/* torch.remainder: fmod (exact), moved to the divisor's sign; x - floor(x/y)*y loses large x */
static inline double py_rem(double x, double y) {
  double m = fmod(x, y);
  return (m != 0 && ((y < 0) != (m < 0))) ? m + y : m;
}

static inline double js_pow(double a, double b) {
  if (isnan(b)) return NAN;
  if (isinf(b) && fabs(a) == 1) return NAN;
  return pow(a, b);
}

/* torch's integer pow (intResultCheck): a negative exponent gives 1 for base 1, ±1 for base -1, else 0 */
static inline double int_pow(double x, double y) {
  if (!(y < 0)) return js_pow(x, y);
  if (x == 1) return 1;
  if (x == -1) return fmod(y, 2) == 0 ? 1 : -1;
  return 0;
}

static inline double js_max(double a, double b) {
  if (isnan(a) || isnan(b)) return NAN;
  if (a > b) return a;
  if (b > a) return b;
  return signbit(a) ? b : a; /* equal: +0 wins over -0 */
}

static inline double js_min(double a, double b) {
  if (isnan(a) || isnan(b)) return NAN;
  if (a < b) return a;
  if (b < a) return b;
  return signbit(a) ? a : b; /* equal: -0 wins over +0 */
}

/*
 * The op loops round float32 results in the same pass (MAP/MAP2 with f32 set); other dtypes
 * are rounded by the caller (round_block).
 */
#define LOOP1(expr) { if (f32) { _Pragma("omp simd") for (int i = 0; i < n; i++) { double x = a[i]; (void)x; o[i] = (float)(expr); } } \
                      else { _Pragma("omp simd") for (int i = 0; i < n; i++) { double x = a[i]; (void)x; o[i] = (expr); } } } break;
#define LOOP2(expr) { if (f32) { _Pragma("omp simd") for (int i = 0; i < n; i++) { double x = a[i], y = b[i]; o[i] = (float)(expr); } } \
                      else { _Pragma("omp simd") for (int i = 0; i < n; i++) { double x = a[i], y = b[i]; o[i] = (expr); } } } break;

static void ew_apply_op(int op, int dt, double *o, const double *a, const double *b, const double *c, int n) {
  int f32 = dt == DT_F32;
  switch (op) {
    case OP_neg: LOOP1(-x)
    case OP_abs: LOOP1(fabs(x))
    case OP_sign: LOOP1(js_sign(x))
    case OP_exp: vmap(V_EXP, o, a, n); goto round;
    case OP_log: vmap(V_LOG, o, a, n); goto round;
    case OP_log1p: vmap(V_LOG1P, o, a, n); goto round;
    case OP_sqrt: LOOP1(sqrt(x))
    case OP_rsqrt: LOOP1(1 / sqrt(x))
    case OP_reciprocal: LOOP1(1 / x)
    case OP_sin: vmap(V_SIN, o, a, n); goto round;
    case OP_cos: vmap(V_COS, o, a, n); goto round;
    case OP_tanh: vmap(V_TANH, o, a, n); goto round;
    case OP_sigmoid: sigmoid_block(o, a, n); goto round;
    case OP_relu: LOOP1(x > 0 || isnan(x) ? x : 0)
    case OP_erf: if (dt == DT_F64) erf_block(o, a, n); else erf_fast_block(o, a, n); goto round;
    case OP_floor: LOOP1(floor(x))
    case OP_ceil: LOOP1(ceil(x))
    case OP_round: LOOP1(rint(x))
    case OP_isnan: LOOP1(isnan(x) ? 1 : 0)
    case OP_logical_not: LOOP1(truthy(x) ? 0 : 1)
    case OP_contiguous: case OP_cast: if (o != a) memmove(o, a, (size_t)n * 8); goto round;
    case OP_add: LOOP2(x + y)
    case OP_sub: LOOP2(x - y)
    case OP_mul: LOOP2(x * y)
    case OP_div: LOOP2(x / y)
    case OP_floor_divide: LOOP2(floor(x / y))
    case OP_remainder: LOOP2(py_rem(x, y))
    case OP_pow: {
      /* x² is the common case (pow(x, 2) is correctly rounded: it equals x·x) */
      int sq = 1;
      for (int i = 0; i < n; i++) sq &= b[i] == 2;
      if (sq) { LOOP2(x * x + 0 * y) }
      LOOP2(js_pow(x, y))
    }
    case OP_maximum: LOOP2(js_max(x, y))
    case OP_minimum: LOOP2(js_min(x, y))
    case OP_eq: LOOP2(x == y)
    case OP_ne: LOOP2(x != y)
    case OP_lt: LOOP2(x < y)
    case OP_le: LOOP2(x <= y)
    case OP_gt: LOOP2(x > y)
    case OP_ge: LOOP2(x >= y)
    case OP_logical_and: LOOP2(truthy(x) && truthy(y))
    case OP_logical_or: LOOP2(truthy(x) || truthy(y))
    case OP_where: for (int i = 0; i < n; i++) o[i] = a[i] != 0 ? b[i] : c[i]; goto round;
    default: loom_set_error("opcode %d is not elementwise", op);
  }
  return;
round:
  if (f32) for (int i = 0; i < n; i++) o[i] = (float)o[i];
}

void ew_apply(int op, int dt, double *o, const double *a, const double *b, const double *c, int n) {
  if (!is_int_dt(dt)) {
    ew_apply_op(op, dt, o, a, b, c, n);
    return;
  }
  int_check_args(op, dt, b, n);
  if (op == OP_pow) {
    for (int i = 0; i < n; i++) o[i] = int_pow(a[i], b[i]);
  } else {
    ew_apply_op(op, dt, o, a, b, c, n);
  }
  int_check_result(op, dt, o, n);
}
#undef LOOP1
#undef LOOP2

void round_block(double *v, int dt, int n) {
  switch (dt) {
    case DT_F64: return;
    case DT_F32: for (int i = 0; i < n; i++) v[i] = (float)v[i]; return;
    case DT_F16: for (int i = 0; i < n; i++) v[i] = f16_to_f32_bf(f32_to_f16_bf((float)v[i])); return;
    case DT_BF16: for (int i = 0; i < n; i++) v[i] = bf16_to_f32(f32_to_bf16_bf((float)v[i])); return;
    default: {
      char tmp[8];
      for (int i = 0; i < n; i++) { store1(tmp, dt, 0, v[i]); v[i] = load1(tmp, dt, 0); }
    }
  }
}

/* ---- programs -------------------------------------------------------------------------------- */
const double *prog_parse(const double *w, const double *end, prog_t *P, pcode *S, int nin) {
  w = wire_prog_header(w, end, LOOM_MAXD, &P->nd, P->shape, &P->nregs, &P->ncode, &P->out);
  if (!w) return NULL;
  if (P->ncode < 1 || P->ncode > LOOM_MAXCODE || P->nregs < 1 || P->nregs > LOOM_MAXCODE) return NULL;
  for (int k = 0; k < P->ncode; k++) {
    pcode *c = &S[k];
    if (w + 2 > end) return NULL;
    c->kind = (int)w[0];
    c->dst = (int)w[1];
    if (c->dst < 0 || c->dst >= P->nregs) return NULL;
    if (c->kind == PC_LOAD || c->kind == PC_CONST) {
      if (w + 4 + P->nd > end) return NULL;
      c->input = (int)w[2];
      c->off = (int64_t)w[3];
      c->st = w + 4;
      if (c->input < 0 || c->input >= nin) return NULL;
      w += 4 + P->nd;
    } else if (c->kind == PC_OP) {
      if (w + 7 > end) return NULL;
      c->op = (int)w[2];
      c->dt = (int)w[3];
      c->a = (int)w[4];
      c->b = (int)w[5];
      c->c = (int)w[6];
      if (c->op < 0 || c->op >= OP_EW_END) return NULL;
      if (c->a < 0 || c->a >= P->nregs || c->b < 0 || c->b >= P->nregs || c->c < 0 || c->c >= P->nregs) return NULL;
      w += 7;
    } else if (c->kind == PC_ACC) {
      w += 2;
    } else return NULL;
  }
  if (P->out < 0 || P->out >= P->ncode) return NULL;
  P->code = S;
  return w;
}

const double *prog_eval(const prog_t *P, const tdesc *ins, const int64_t *pos, const int64_t *dir, int n,
                        const char *accp, int accdt, int64_t accpos, double *regs, int *cinit) {
  for (int k = 0; k < P->ncode; k++) {
    const pcode *c = &P->code[k];
    double *o = regs + (size_t)c->dst * LOOM_BLOCK;
    if (c->kind == PC_LOAD) {
      const tdesc *t = &ins[c->input];
      load_block(o, t->p, t->dt, pos[k], dir[k], n);
    } else if (c->kind == PC_CONST) {
      /* a broadcast scalar: its register is filled once per task (see prog_t.nconst) */
      if (!*cinit) { const tdesc *t = &ins[c->input]; load_block(o, t->p, t->dt, pos[k], 0, LOOM_BLOCK); }
    } else if (c->kind == PC_OP) {
      ew_apply(c->op, c->dt, o, regs + (size_t)c->a * LOOM_BLOCK, regs + (size_t)c->b * LOOM_BLOCK, regs + (size_t)c->c * LOOM_BLOCK, n);
      if (c->dt != DT_F32 && c->dt != DT_F64) round_block(o, c->dt, n);
    } else {
      load_block(o, accp, accdt, accpos, 1, n);
    }
  }
  *cinit = 1;
  return regs + (size_t)P->code[P->out].dst * LOOM_BLOCK;
}


/* ---- float32 programs ------------------------------------------------------------------------- */
/*
 * A program whose every load, op and accumulator is float32 keeps its registers as floats:
 * twice the SIMD width and half the traffic. Ops whose double result rounded to float equals the
 * float operation (+ - * / sqrt 1/x, since 53 >= 2·24 + 2; and the exact ones: neg, abs, min, max,
 * relu, sign, floor, ceil, round) run in float; every other op converts the block to double and
 * runs the double kernel, so the bits are the double path's in every case.
 */
static int prog_is_f32(const prog_t *P, const tdesc *ins, const char *accp, int accdt) {
  for (int k = 0; k < P->ncode; k++) {
    const pcode *c = &P->code[k];
    if ((c->kind == PC_LOAD || c->kind == PC_CONST) && ins[c->input].dt != DT_F32) return 0;
    if (c->kind == PC_OP && (c->dt != DT_F32 || c->op == OP_where)) return 0;
    if (c->kind == PC_ACC && (!accp || accdt != DT_F32)) return 0;
  }
  return 1;
}

static inline float js_maxf(float a, float b) {
  if (a != a || b != b) return NAN;
  if (a > b) return a;
  if (b > a) return b;
  return signbit(a) ? b : a;
}

static inline float js_minf(float a, float b) {
  if (a != a || b != b) return NAN;
  if (a < b) return a;
  if (b < a) return b;
  return signbit(a) ? a : b;
}

static void ew_apply_f32(int op, float *o, const float *a, const float *b, const float *c, int n) {
#define F1(expr) _Pragma("omp simd") for (int i = 0; i < n; i++) { float x = a[i]; o[i] = (expr); } return;
#define F2(expr) _Pragma("omp simd") for (int i = 0; i < n; i++) { float x = a[i], y = b[i]; o[i] = (expr); } return;
  switch (op) {
    case OP_neg: F1(-x)
    case OP_abs: F1(fabsf(x))
    case OP_sqrt: F1(sqrtf(x))
    case OP_reciprocal: F1(1.0f / x)
    case OP_relu: F1(x > 0 || x != x ? x : 0.0f)
    case OP_floor: F1(floorf(x))
    case OP_ceil: F1(ceilf(x))
    case OP_round: F1(rintf(x))
    case OP_sign: F1(x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f)
    case OP_contiguous: case OP_cast: if (o != a) memmove(o, a, (size_t)n * 4); return;
    case OP_add: F2(x + y)
    case OP_sub: F2(x - y)
    case OP_mul: F2(x * y)
    case OP_div: F2(x / y)
    case OP_maximum: F2(js_maxf(x, y))
    case OP_minimum: F2(js_minf(x, y))
    default: break;
  }
#undef F1
#undef F2
  /* through double: unary ops (before OP_add in the table) read a, binary ones a and b */
  double da[LOOM_BLOCK], db[LOOM_BLOCK];
  for (int i = 0; i < n; i++) da[i] = a[i];
  if (op >= OP_add) for (int i = 0; i < n; i++) db[i] = b[i];
  ew_apply(op, DT_F32, da, da, op >= OP_add ? db : da, da, n);
  for (int i = 0; i < n; i++) o[i] = (float)da[i];
}

static void load_block_f32(float *d, const float *p, int64_t i0, int64_t s, int n) {
  if (s == 1) memcpy(d, p + i0, (size_t)n * 4);
  else if (s == 0) { float v = p[i0]; for (int i = 0; i < n; i++) d[i] = v; }
  else for (int i = 0; i < n; i++) d[i] = p[i0 + i * s];
}

static const float *prog_eval_f32(const prog_t *P, const tdesc *ins, const int64_t *pos, const int64_t *dir, int n,
                                  const char *accp, int64_t accpos, float *regs, int *cinit) {
  for (int k = 0; k < P->ncode; k++) {
    const pcode *c = &P->code[k];
    float *o = regs + (size_t)c->dst * LOOM_BLOCK;
    if (c->kind == PC_LOAD) load_block_f32(o, (const float *)ins[c->input].p, pos[k], dir[k], n);
    else if (c->kind == PC_CONST) { if (!*cinit) load_block_f32(o, (const float *)ins[c->input].p, pos[k], 0, LOOM_BLOCK); }
    else if (c->kind == PC_OP)
      ew_apply_f32(c->op, o, regs + (size_t)c->a * LOOM_BLOCK, regs + (size_t)c->b * LOOM_BLOCK, regs + (size_t)c->c * LOOM_BLOCK, n);
    else load_block_f32(o, (const float *)accp, accpos, 1, n);
  }
  *cinit = 1;
  return regs + (size_t)P->code[P->out].dst * LOOM_BLOCK;
}

/* ---- running a program over its index space ---------------------------------------------------- */
typedef struct {
  const prog_t *P;
  const tdesc *ins, *out;
  const char *accp;
  int accdt;
  int nd, nops, nl;       /* operands: 0 out, 1..nl loads, nl+1 acc (when accp) */
  int lcode[LOOM_MAXCODE];
  int64_t shape[LOOM_MAXD];
  int64_t st[LOOM_MAXCODE + 2][LOOM_MAXD];
  int64_t base[LOOM_MAXCODE + 2];
  int64_t tiles_per_row;
  int f32; /* every value float32: registers hold floats (prog_eval_f32) */
} run_ctx;

static void run_tiles(void *vc, int64_t t0, int64_t t1) {
  run_ctx *C = vc;
  const prog_t *P = C->P;
  int nd = C->nd, nops = C->nops;
  double *regs = loom_scratch(SCR_T0, (size_t)P->nregs * LOOM_BLOCK * 8);
  int64_t *pos = loom_scratch(SCR_T1, (size_t)(2 * P->ncode + nops) * 8);
  int64_t *dir = pos + P->ncode, *opos = dir + P->ncode;
  int64_t inner = C->shape[nd - 1];
  for (int k = 0; k < C->nl; k++) dir[C->lcode[k]] = C->st[1 + k][nd - 1];
  int cinit = 0;
  for (int64_t t = t0; t < t1; t++) {
    int64_t row = t / C->tiles_per_row, j0 = (t % C->tiles_per_row) * LOOM_BLOCK;
    int n = (int)(inner - j0 < LOOM_BLOCK ? inner - j0 : LOOM_BLOCK);
    for (int k = 0; k < nops; k++) opos[k] = C->base[k] + j0 * C->st[k][nd - 1];
    int64_t r = row;
    for (int d = nd - 2; d >= 0 && r > 0; d--) {
      int64_t i = r % C->shape[d];
      r /= C->shape[d];
      if (i) for (int k = 0; k < nops; k++) opos[k] += i * C->st[k][d];
    }
    for (int k = 0; k < C->nl; k++) pos[C->lcode[k]] = opos[1 + k];
    if (C->f32) {
      const float *res = prog_eval_f32(P, C->ins, pos, dir, n, C->accp, C->accp ? opos[nops - 1] : 0, (float *)regs, &cinit);
      float *q = (float *)C->out->p + opos[0];
      int64_t os = C->st[0][nd - 1];
      if (os == 1) memcpy(q, res, (size_t)n * 4);
      else for (int i = 0; i < n; i++) q[i * os] = res[i];
      continue;
    }
    const double *res = prog_eval(P, C->ins, pos, dir, n, C->accp, C->accdt, C->accp ? opos[nops - 1] : 0, regs, &cinit);
    store_block(C->out->p, C->out->dt, opos[0], C->st[0][nd - 1], res, n);
  }
}

int prog_run(const prog_t *P, const tdesc *ins, const tdesc *out, const char *accp, int accdt) {
  int64_t total = 1;
  for (int d = 0; d < P->nd; d++) total *= P->shape[d];
  if (total == 0) return 0;
  if (out->nd != P->nd) { loom_set_error("program: output rank %d != program rank %d", out->nd, P->nd); return 1; }
  run_ctx *C = loom_scratch(SCR_K3, sizeof(run_ctx));
  C->P = P;
  C->ins = ins;
  C->out = out;
  C->accp = accp;
  C->accdt = accdt;
  C->f32 = out->dt == DT_F32 && prog_is_f32(P, ins, accp, accdt);
  int nl = 0;
  for (int k = 0; k < P->ncode; k++) if (P->code[k].kind == PC_LOAD || P->code[k].kind == PC_CONST) C->lcode[nl++] = k;
  C->nl = nl;
  C->nops = 1 + nl + (accp ? 1 : 0);
  int nd = P->nd;
  for (int d = 0; d < nd; d++) { C->shape[d] = P->shape[d]; C->st[0][d] = out->st[d]; }
  C->base[0] = out->off;
  for (int k = 0; k < nl; k++) {
    const pcode *c = &P->code[C->lcode[k]];
    for (int d = 0; d < nd; d++) C->st[1 + k][d] = (int64_t)c->st[d];
    C->base[1 + k] = ins[c->input].off + c->off;
  }
  if (accp) {
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) { C->st[nl + 1][d] = s; s *= P->shape[d]; }
    C->base[nl + 1] = 0;
  }
  if (nd == 0) {
    /* a 0-d program: one element */
    C->shape[0] = 1;
    for (int k = 0; k < C->nops; k++) C->st[k][0] = 0;
    nd = 1;
  } else {
    int64_t *sts[LOOM_MAXCODE + 2];
    for (int k = 0; k < C->nops; k++) sts[k] = C->st[k];
    nd = collapse_dims(nd, C->shape, C->nops, sts);
  }
  C->nd = nd;
  int64_t inner = C->shape[nd - 1];
  C->tiles_per_row = (inner + LOOM_BLOCK - 1) / LOOM_BLOCK;
  int64_t tiles = (total / inner) * C->tiles_per_row;
  int64_t work = (total / tiles) * (P->ncode + 1);
  loom_parallel_for(tiles, (65536 + work - 1) / work, run_tiles, C);
  return 0;
}

/* ---- kernels ------------------------------------------------------------------------------------ */

/**
 * Small dense operands (the common eager case: one block, inputs of the output's shape or
 * single elements): one block without the tiling machinery. Same arithmetic as the program path.
 */
static int small_elementwise(const loom_instr *I, int64_t n) {
  const tdesc *o = &I->out;
  if (n > LOOM_BLOCK || !t_dense_from(o, 0)) return 0;
  double r[4][LOOM_BLOCK];
  for (int k = 0; k < I->nin; k++) {
    const tdesc *x = &I->in[k];
    int64_t m = t_numel(x);
    if (m == 1) load_block(r[k], x->p, x->dt, x->off, 0, (int)n);
    else if (m == n && t_dense_from(x, 0)) load_block(r[k], x->p, x->dt, x->off, 1, (int)n);
    else return 0;
  }
  int nin = I->nin;
  ew_apply(I->op, o->dt, r[3], r[0], nin > 1 ? r[1] : r[0], nin > 2 ? r[2] : r[0], (int)n);
  store_block(o->p, o->dt, o->off, 1, r[3], (int)n);
  return 1;
}

/** One registry elementwise op as a program: a load per input (broadcast to the output), the op. */
int k_elementwise(const loom_instr *I) {
  if (I->nin > 3) { loom_set_error("elementwise: %d inputs", I->nin); return 1; }
  const tdesc *o = &I->out;
  int64_t total = t_numel(o);
  /* a dense copy of one dtype (a plan's assign into its destination, clone): memmove */
  if (I->op == OP_contiguous && I->nin == 1 && I->in[0].dt == o->dt && I->in[0].nd == o->nd && t_dense_from(&I->in[0], 0) && t_dense_from(o, 0)) {
    int same = 1;
    for (int d = 0; d < o->nd; d++) same &= I->in[0].shape[d] == o->shape[d];
    if (same) {
      size_t es = (size_t)dt_size(o->dt);
      memmove(o->p + o->off * (int64_t)es, I->in[0].p + I->in[0].off * (int64_t)es, (size_t)total * es);
      return 0;
    }
  }
  if (total <= LOOM_BLOCK && small_elementwise(I, total)) return 0;
  int nd = o->nd;
  double st[3][LOOM_MAXD];
  pcode code[4];
  for (int k = 0; k < I->nin; k++) {
    const tdesc *x = &I->in[k];
    int off = nd - x->nd;
    for (int d = 0; d < nd; d++) {
      int xd = d - off;
      st[k][d] = (xd < 0 || (x->shape[xd] == 1 && o->shape[d] != 1)) ? 0 : (double)x->st[xd];
    }
    int bc = 1;
    for (int d = 0; d < nd; d++) bc &= st[k][d] == 0;
    code[k] = (pcode){bc ? PC_CONST : PC_LOAD, k, k, 0, 0, 0, 0, 0, 0, st[k]};
  }
  int n = I->nin;
  code[n] = (pcode){PC_OP, n, 0, I->op, o->dt, 0, n > 1 ? 1 : 0, n > 2 ? 2 : 0, 0, NULL};
  prog_t P;
  P.nd = nd;
  for (int d = 0; d < nd; d++) P.shape[d] = o->shape[d];
  P.nregs = n + 1;
  P.ncode = n + 1;
  P.out = n;
  P.code = code;
  return prog_run(&P, I->in, o, NULL, 0);
}

/** fused_elementwise: attrs = program over the output's shape; inputs = its base buffers. */
int k_fused_elementwise(const loom_instr *I) {
  pcode *S = loom_scratch(SCR_K0, sizeof(pcode) * LOOM_MAXCODE);
  prog_t P;
  if (!prog_parse(I->attr, I->attr + I->nattr, &P, S, I->nin)) { loom_set_error("fused_elementwise: bad program"); return 1; }
  return prog_run(&P, I->in, &I->out, NULL, 0);
}

/** dst = src with the js backend's conversions (both strided; shapes equal). */
void copy_strided(const tdesc *dst, const tdesc *src) {
  double st[LOOM_MAXD];
  for (int d = 0; d < src->nd; d++) st[d] = (double)src->st[d];
  pcode code[1] = {{PC_LOAD, 0, 0, 0, 0, 0, 0, 0, 0, st}};
  prog_t P;
  P.nd = src->nd;
  for (int d = 0; d < P.nd; d++) P.shape[d] = src->shape[d];
  P.nregs = 1;
  P.ncode = 1;
  P.out = 0;
  P.code = code;
  prog_run(&P, src, dst, NULL, 0);
}
