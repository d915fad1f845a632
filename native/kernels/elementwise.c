/*
 * Elementwise ops and fused elementwise chains: a vectorized interpreter over blocks.
 *
 * Operands are broadcast and strided; dims that are contiguous in every operand are merged,
 * then the output is cut into tiles of up to LOOM_BLOCK elements along its last dim. Each tile
 * loads its inputs into double blocks, applies the op (a tight loop the compiler vectorizes) and
 * stores with the js backend's conversions. Tiles are spread over the pool.
 *
 * Scalar semantics are the registry's `ref` functions (src/graph/ops/elementwise.ts) in double:
 * NaN is falsy for logical ops, maximum/minimum propagate NaN and order signed zeros as
 * Math.max/Math.min, pow follows Math.pow's NaN cases, round is half-to-even.
 */
#include "common.h"

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
/* glibc's libmvec has SIMD variants of these (max 4 ulp in double, so float32 results round the
 * same as the scalar functions nearly always); -fopenmp-simd lets the block loops call them. */
#pragma omp declare simd notinbranch
double exp(double);
#pragma omp declare simd notinbranch
double log(double);
#pragma omp declare simd notinbranch
double log1p(double);
#pragma omp declare simd notinbranch
double sin(double);
#pragma omp declare simd notinbranch
double cos(double);
#pragma omp declare simd notinbranch
double tanh(double);

/* W. J. Cody's rational approximations, the same expressions as the registry's erf. Written
 * branch-free (every range computed, one selected) so the block loop vectorizes. */
#pragma omp declare simd notinbranch
static inline double erf_cody(double x) {
  double ax = fabs(x), t = x * x;
  double p0 = (((0.185777706184603153 * t + 3.16112374387056560) * t + 113.864154151050156) * t + 377.485237685302021) * t + 3209.37758913846947;
  double q0 = (((t + 23.6012909523441209) * t + 244.024637934444173) * t + 1282.61652607737228) * t + 2844.23683343917062;
  double small = (x * p0) / q0;
  double e = exp(-ax * ax);
  double p1 = (((((((5.64188496988670089e-1 * ax + 8.88314979438837594) * ax + 66.1191906371416295) * ax + 298.635138197400131) * ax + 881.952221241769090) * ax + 1712.04761263407058) * ax + 2051.07837782607147) * ax + 1230.33935479799725);
  double q1 = (((((((ax + 15.7449261107098347) * ax + 117.693950891312499) * ax + 537.181101862009858) * ax + 1621.38957456669019) * ax + 3290.79923573345963) * ax + 4362.61909014324716) * ax + 3439.36767414372164) * ax + 1230.33935480374942;
  double mid = 1 - (e * p1) / q1;
  double z = 1 / (ax * ax);
  double p2 = ((((1.63153871373020978e-2 * z + 3.05326634961232344e-1) * z + 3.60344899949804439e-1) * z + 1.25781726111229246e-1) * z + 1.60837851487422766e-2) * z + 6.58749161529837803e-4;
  double q2 = ((((z + 2.56852019228982242) * z + 1.87295284992346725) * z + 5.27905102951428412e-1) * z + 6.05183413124413191e-2) * z + 2.33520497626869185e-3;
  double tail = 1 - (e / ax) * (0.564189583547756287 - (z * p2) / q2);
  double r = ax < 4 ? mid : ax < 27 ? tail : 1;
  r = x < 0 ? -r : r;
  r = ax < 0.5 ? small : r;
  return x != x ? x : r; /* NaN propagates (torch.erf), selected branch-free */
}

static inline int truthy(double v) { return v != 0 && !isnan(v); }

static inline double js_sign(double x) { return isnan(x) ? x : x > 0 ? 1 : x < 0 ? -1 : x; }

static inline double js_pow(double a, double b) {
  if (isnan(b)) return NAN;
  if (isinf(b) && fabs(a) == 1) return NAN;
  return pow(a, b);
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

/** o[i] = op(a[i], b[i], c[i]) for one block. */
static void ew_apply(int op, double *restrict o, const double *restrict a, const double *restrict b,
                     const double *restrict c, int n) {
#define MAP(expr) _Pragma("omp simd") for (int i = 0; i < n; i++) { double x = a[i]; (void)x; o[i] = (expr); } break;
#define MAP2(expr) _Pragma("omp simd") for (int i = 0; i < n; i++) { double x = a[i], y = b[i]; o[i] = (expr); } break;
  switch (op) {
    case OP_neg: MAP(-x)
    case OP_abs: MAP(fabs(x))
    case OP_sign: MAP(js_sign(x))
    case OP_exp: MAP(exp(x))
    case OP_log: MAP(log(x))
    case OP_log1p: MAP(log1p(x))
    case OP_sqrt: MAP(sqrt(x))
    case OP_rsqrt: MAP(1 / sqrt(x))
    case OP_reciprocal: MAP(1 / x)
    case OP_sin: MAP(sin(x))
    case OP_cos: MAP(cos(x))
    case OP_tanh: MAP(tanh(x))
    case OP_sigmoid: MAP(1 / (1 + exp(-x)))
    case OP_relu: MAP(x > 0 || isnan(x) ? x : 0)
    case OP_erf: MAP(erf_cody(x))
    case OP_floor: MAP(floor(x))
    case OP_ceil: MAP(ceil(x))
    case OP_round: MAP(rint(x))
    case OP_isnan: MAP(isnan(x) ? 1 : 0)
    case OP_logical_not: MAP(truthy(x) ? 0 : 1)
    case OP_contiguous: case OP_cast: if (o != a) memcpy(o, a, (size_t)n * 8); break;
    case OP_add: MAP2(x + y)
    case OP_sub: MAP2(x - y)
    case OP_mul: MAP2(x * y)
    case OP_div: MAP2(x / y)
    case OP_floor_divide: MAP2(floor(x / y))
    case OP_remainder: MAP2(x - floor(x / y) * y)
    case OP_pow: MAP2(js_pow(x, y))
    case OP_maximum: MAP2(js_max(x, y))
    case OP_minimum: MAP2(js_min(x, y))
    case OP_eq: MAP2(x == y)
    case OP_ne: MAP2(x != y)
    case OP_lt: MAP2(x < y)
    case OP_le: MAP2(x <= y)
    case OP_gt: MAP2(x > y)
    case OP_ge: MAP2(x >= y)
    case OP_logical_and: MAP2(truthy(x) && truthy(y))
    case OP_logical_or: MAP2(truthy(x) || truthy(y))
    case OP_where: for (int i = 0; i < n; i++) o[i] = a[i] != 0 ? b[i] : c[i]; break;
    default: loom_set_error("opcode %d is not elementwise", op);
  }
#undef MAP
#undef MAP2
}

/** Round a block to what storing it as `dt` and loading it back gives (fused intermediates). */
static void round_block(double *v, int dt, int n) {
  switch (dt) {
    case DT_F64: return;
    case DT_F32: for (int i = 0; i < n; i++) v[i] = (float)v[i]; return;
    default: {
      char tmp[8];
      for (int i = 0; i < n; i++) { store1(tmp, dt, 0, v[i]); v[i] = load1(tmp, dt, 0); }
    }
  }
}

/* ---- the strided tile loop ------------------------------------------------------------------- */
typedef struct {
  const loom_instr *I;
  int nd;
  int64_t shape[LOOM_MAXD];
  int64_t st[LOOM_EW_MAXIN + 1][LOOM_MAXD]; /* [0] output, [1..] inputs (broadcast) */
  int64_t base[LOOM_EW_MAXIN + 1];
  int64_t tiles_per_row;
  /* fused: program of (op, dtype, a, b, c) steps over registers; inputs are registers 0..nin-1 */
  int nsteps;
  const double *steps;
} ew_ctx;

static void ew_tiles(void *vc, int64_t t0, int64_t t1) {
  ew_ctx *C = vc;
  const loom_instr *I = C->I;
  int nin = I->nin, nd = C->nd;
  int64_t inner = C->shape[nd - 1];
  int nregs = nin + (C->nsteps > 0 ? C->nsteps : 1);
  double regs[nregs][LOOM_BLOCK];
  for (int64_t t = t0; t < t1; t++) {
    int64_t row = t / C->tiles_per_row, j0 = (t % C->tiles_per_row) * LOOM_BLOCK;
    int n = (int)(inner - j0 < LOOM_BLOCK ? inner - j0 : LOOM_BLOCK);
    int64_t pos[LOOM_EW_MAXIN + 1];
    for (int k = 0; k <= nin; k++) pos[k] = C->base[k] + j0 * C->st[k][nd - 1];
    int64_t r = row;
    for (int d = nd - 2; d >= 0; d--) {
      int64_t i = r % C->shape[d];
      r /= C->shape[d];
      for (int k = 0; k <= nin; k++) pos[k] += i * C->st[k][d];
    }
    for (int k = 0; k < nin; k++) load_block(regs[k], I->in[k].p, I->in[k].dt, pos[k + 1], C->st[k + 1][nd - 1], n);
    double *res;
    if (C->nsteps == 0) {
      res = regs[nin];
      ew_apply(I->op, res, regs[0], nin > 1 ? regs[1] : regs[0], nin > 2 ? regs[2] : regs[0], n);
    } else {
      for (int s = 0; s < C->nsteps; s++) {
        const double *w = C->steps + 5 * s;
        double *o = regs[nin + s];
        ew_apply((int)w[0], o, regs[(int)w[2]], regs[(int)w[3]], regs[(int)w[4]], n);
        round_block(o, (int)w[1], n);
      }
      res = regs[nin + C->nsteps - 1];
    }
    store_block(I->out.p, I->out.dt, pos[0], C->st[0][nd - 1], res, n);
  }
}

static int run_tiles(const loom_instr *I, int nsteps, const double *steps) {
  ew_ctx C;
  C.I = I;
  C.nsteps = nsteps;
  C.steps = steps;
  const tdesc *o = &I->out;
  int nd = o->nd;
  if (I->nin > LOOM_EW_MAXIN) { loom_set_error("elementwise: more than %d inputs", LOOM_EW_MAXIN); return 1; }
  for (int d = 0; d < nd; d++) { C.shape[d] = o->shape[d]; C.st[0][d] = o->st[d]; }
  C.base[0] = o->off;
  for (int k = 0; k < I->nin; k++) {
    const tdesc *x = &I->in[k];
    int off = nd - x->nd;
    for (int d = 0; d < nd; d++) {
      int xd = d - off;
      C.st[k + 1][d] = (xd < 0 || (x->shape[xd] == 1 && o->shape[d] != 1)) ? 0 : x->st[xd];
    }
    C.base[k + 1] = x->off;
  }
  int64_t n = t_numel(o);
  if (n == 0) return 0;
  int64_t *sts[LOOM_EW_MAXIN + 1];
  for (int k = 0; k <= I->nin; k++) sts[k] = C.st[k];
  C.nd = collapse_dims(nd, C.shape, I->nin + 1, sts);
  int64_t inner = C.shape[C.nd - 1];
  C.tiles_per_row = (inner + LOOM_BLOCK - 1) / LOOM_BLOCK;
  int64_t tiles = (n / inner) * C.tiles_per_row;
  int64_t per_tile = n / tiles;
  loom_parallel_for(tiles, (32768 + per_tile - 1) / per_tile, ew_tiles, &C);
  return 0;
}

int k_elementwise(const loom_instr *I) { return run_tiles(I, 0, NULL); }

/**
 * A fused elementwise chain: attrs = [nsteps, (op, dtype, a, b, c) × nsteps]; registers
 * 0..nin-1 hold the inputs, step s writes register nin+s rounded to its dtype (so the chain
 * equals the unfused ops), the last step is the output.
 */
int k_fused(const loom_instr *I) {
  int nsteps = (int)I->attr[0];
  if (nsteps < 1 || I->nattr != 1 + 5 * nsteps) { loom_set_error("fused: bad program"); return 1; }
  return run_tiles(I, nsteps, I->attr + 1);
}

/** dst = src with the js backend's conversions (both strided; shapes equal). */
void copy_strided(const tdesc *dst, const tdesc *src) {
  loom_instr I;
  memset(&I, 0, sizeof(I));
  I.op = OP_contiguous;
  I.nin = 1;
  I.out = *dst;
  I.in[0] = *src;
  run_tiles(&I, 0, NULL);
}
