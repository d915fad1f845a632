/*
 * Fast float32 row kernels for the graph compiler's named patterns: fused_softmax (over the
 * last dim, with a simple elementwise prologue), fused_rms_norm and fused_layer_norm. They are
 * the bounded implementations of the kernel catalog (src/backends/native/rows.ts states and
 * justifies their bounds); fused.c's exact kernels stay the tolerance-0 implementations.
 *
 * Why they are fast and still within ~1 float32 ulp of the float64 reference: each row is read
 * as float32 straight from the input (no 512-element double blocks, no rounding after every op),
 * and everything after the prologue runs in double lanes: exact float→double conversions,
 * double sums (8 lanes), a branch-free double exp (exp_neg, relative error < 1e-11), double
 * division and sqrt; the result is rounded to float32 once. Rows are split over Loom's pool.
 * fused_softmax_f32x is the same kernel with exp in float32 lanes (expf_row: twice the lanes,
 * within 2.5 float ulps) and two float roundings at the end: a looser bound (rows.ts) for speed.
 *
 * The softmax prologue (scale, additive or `where` mask) is evaluated in float32 arithmetic, one
 * op at a time over the whole row: + - · / of float32 values rounded to float32 equal the exact
 * kernel's double-then-round (double has more than 2·24+2 bits), so the softmax input has the
 * exact kernel's bits.
 */
#include "common.h"

/**
 * exp(d) for d <= 0 (or NaN) in double: Cody–Waite reduction d = k·ln2 + r, |r| <= ln2/2
 * (fdlibm's split ln2, k·ln2_hi exact), a degree-9 Taylor polynomial (remainder
 * |r|^10/10!·e^|r| < 9.7e-12, Horner rounding < 2e-15) and 2^k put in the exponent bits:
 * relative error < 1e-11 (float32 results need 6e-8). d below -700 is taken as -700
 * (exp(-700) ≈ 1e-304, far below anything a float32 probability keeps); NaN stays NaN. Branch-free, so the row loop vectorizes
 * (8 double lanes with AVX-512) without libmvec, whose double exp costs ~4x more here.
 */
static inline double exp_neg(double d) {
  d = d < -700 ? -700 : d;
  double t = d * 1.4426950408889634 + 0x1.8p52; /* round(d·log2 e) in the low bits */
  double k = t - 0x1.8p52;
  double r = fma(k, -6.93147180369123816490e-01, d);
  r = fma(k, -1.90821492927058770002e-10, r);
  double p = 2.75573192239858906526e-06; /* 1/9! ... 1/0! */
  p = fma(p, r, 2.48015873015873015873e-05);
  p = fma(p, r, 1.98412698412698412698e-04);
  p = fma(p, r, 1.38888888888888888889e-03);
  p = fma(p, r, 8.33333333333333333333e-03);
  p = fma(p, r, 4.16666666666666666667e-02);
  p = fma(p, r, 1.66666666666666666667e-01);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  uint64_t bits; /* t's bits are those of 1.5·2^52 plus k (two's complement) */
  memcpy(&bits, &t, 8);
  bits = (bits + 1023) << 52; /* 2^k: k in [-1010, 0] */
  double s;
  memcpy(&s, &bits, 8);
  return p * s;
}

/** e[j] = exp(v[j] - m) in double for j < n (v float32); returns Σ e[j] (double lanes). */
static double exp_row(const float *v, double m, double *e, int64_t n) {
  double z = 0;
#pragma omp simd reduction(+ : z)
  for (int64_t j = 0; j < n; j++) {
    double x = exp_neg((double)v[j] - m);
    e[j] = x;
    z += x;
  }
  return z;
}

/**
 * softmax of one float32 row v[0..n) into out: exp(v - max v) / Σ exp(v - max v) in double,
 * rounded once. NaN or -inf-only rows give NaN, as the decomposition (NaN - m or -inf - -inf).
 */
static void softmax_row_f32(const float *v, float *out, double *e, int64_t n) {
  float mf = -INFINITY;
#pragma omp simd reduction(max : mf)
  for (int64_t j = 0; j < n; j++) mf = v[j] > mf ? v[j] : mf;
  double z = exp_row(v, (double)mf, e, n);
  double r = 1.0 / z;
#pragma omp simd
  for (int64_t j = 0; j < n; j++) out[j] = (float)(e[j] * r);
}

/**
 * e[j] = exp(v[j] - m) in FLOAT32 lanes (16 per AVX-512 vector) for j < n, m = max v (float32);
 * returns Σ e[j] summed in double. The error analysis is rows.ts's SOFTMAX_X_CONTRACT; in short:
 * - d + c = v − m exactly (Knuth's TwoSum, 6 float ops; c carries fl(v − m)'s rounding, so the
 *   argument of exp is not off by |v − m|·2^-24);
 * - k = round(d·log2 e) by the 1.5·2^23 trick (one fma: the exact product rounded to an integer);
 *   r = d − k·C1 − k·C2 + c with Cephes' split C1 = 355/512 (9 bits: k·C1 is exact, and d − k·C1 is
 *   a multiple of ulp(d) below 2·2^⌊log2|d|⌋, so the first fma is exact), |r| ≤ 0.3466;
 * - e^r by the degree-7 Taylor polynomial in float Horner form (7 fmas), times 2^k made in the
 *   exponent bits (exact: k ∈ [-126, 0] for d ≥ -87);
 * - d < -87 gives 0 (exp(-87) < 1.7e-38, below the contract's atol); NaN stays NaN (the select
 *   is false for it), -inf gives 0. Branch-free, so the loop vectorizes without libmvec.
 * Relative error of each e[j] where it is normal: < 1.5e-7 (2.5 float ulps; rows.ts derives it).
 */
static double expf_row(const float *v, float m, float *e, int64_t n) {
  double z = 0;
  const float nm = -m;
#pragma omp simd reduction(+ : z)
  for (int64_t j = 0; j < n; j++) {
    float a = v[j];
    float d = a + nm; /* TwoSum(a, -m): d + c == a - m exactly */
    float a1 = d - nm, b1 = d - a1;
    float c = (a - a1) + (nm - b1);
    /* below -87 (or -inf) the value is computed anyway (garbage) and its bits are cleared: an
       AND of computed values, not a ternary on p·s, which gcc turns into a branch (it will not
       speculate float ops) and then cannot vectorize */
    uint32_t keep = d < -87.0f ? 0u : ~0u; /* NaN: kept, and NaN all through */
    float t = fmaf(d, 1.44269504088896341f, 0x1.8p23f); /* 1.5·2^23 + round(d·log2 e) */
    float k = t - 0x1.8p23f;
    float r = fmaf(k, -0.693359375f, d);
    r = fmaf(k, 2.12194440e-4f, r);
    r = r + c;
    float p = 1.98412698e-4f; /* 1/7! ... 1/0! */
    p = fmaf(p, r, 1.38888889e-3f);
    p = fmaf(p, r, 8.33333333e-3f);
    p = fmaf(p, r, 4.16666667e-2f);
    p = fmaf(p, r, 1.66666667e-1f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    /* t's low bits hold k (two's complement): 2^k = (k + 127) << 23 */
    float s = f32_from_bits((f32_bits(t) + 127u) << 23);
    float x = f32_from_bits(f32_bits(p * s) & keep);
    e[j] = x;
    z += (double)x;
  }
  return z;
}

/**
 * softmax of one float32 row with float32 exponentials (fused_softmax_f32x): max in float,
 * e = expf_row, Z = Σ e in double, y = e · fl32(1/Z) in float. NaN rows as softmax_row_f32.
 * (Non-temporal stores of y for large outputs were tried: no gain measurable on W3.)
 */
void softmax_row_f32x(const float *v, float *out, float *e, int64_t n) {
  float mf = -INFINITY;
#pragma omp simd reduction(max : mf)
  for (int64_t j = 0; j < n; j++) mf = v[j] > mf ? v[j] : mf;
  float r = (float)(1.0 / expf_row(v, mf, e, n));
#pragma omp simd
  for (int64_t j = 0; j < n; j++) out[j] = e[j] * r;
}

/**
 * A row of n values of input t from element `at` with element stride st, as float32: the row in
 * place when it is contiguous float32, else copied into `own` (bools as 0/1; rows.ts admits no
 * other load dtype). Returns where the row is.
 */
const float *load_row_f32(const tdesc *t, int64_t at, int64_t st, float *own, int64_t n) {
  if (t->dt == DT_F32) {
    const float *p = (const float *)t->p + at;
    if (st == 1) return p;
    if (st == 0) { float x = p[0]; for (int64_t j = 0; j < n; j++) own[j] = x; }
    else for (int64_t j = 0; j < n; j++) own[j] = p[j * st];
  } else {
    const uint8_t *p = (const uint8_t *)t->p + at;
    for (int64_t j = 0; j < n; j++) own[j] = p[j * st] != 0;
  }
  return own;
}

/**
 * One prologue op of the float32 row kernels (fused_softmax.f32/.f32x and fused_attention.f32x)
 * over n values: float32 add, sub, mul, div, neg, where (cond NaN counts as true, as `v !== 0`);
 * bool logical_not (bools are 0/1 floats); cast/contiguous to bool or float32. + − · / of float32
 * values rounded to float32 equal the exact kernels' double-then-round.
 */
void prologue_op_f32(const pcode *c, const float *a, const float *b, const float *w, float *own, int64_t n) {
  if (c->op == OP_add) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = a[j] + b[j];
  } else if (c->op == OP_sub) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = a[j] - b[j];
  } else if (c->op == OP_mul) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = a[j] * b[j];
  } else if (c->op == OP_div) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = a[j] / b[j];
  } else if (c->op == OP_neg) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = -a[j];
  } else if (c->op == OP_where) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = a[j] != 0 ? b[j] : w[j];
  } else if (c->op == OP_logical_not) {
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = a[j] == 0;
  } else if (c->dt == DT_BOOL) { /* cast / contiguous to bool */
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = a[j] != 0;
  } else { /* cast / contiguous to float32 of a float32 or bool value: a copy (a's register may be reused) */
#pragma omp simd
    for (int64_t j = 0; j < n; j++) own[j] = a[j];
  }
}

/* ---- fused_softmax.f32: attrs [dim, prologue program]; dim is the last; out dense ---------- */
typedef struct {
  const prog_t *P;
  const tdesc *ins;
  float *out;
  int64_t n, os[LOOM_MAXD]; /* row length; sizes of the outer dims */
  int no, fast; /* fast: fused_softmax_f32x (float32 exp) */
} smf_ctx;

static void smf_rows(void *vc, int64_t r0, int64_t r1) {
  smf_ctx *C = vc;
  const prog_t *P = C->P;
  int64_t n = C->n, pad = LOOM_PAD(n);
  float *regs = loom_scratch(SCR_T0, (size_t)P->nregs * pad * 4);
  double *e = loom_scratch(SCR_T5, (size_t)pad * 8);
  const float *rp[LOOM_MAXCODE > 64 ? 64 : LOOM_MAXCODE];
  int64_t idx[LOOM_MAXD];
  for (int64_t r = r0; r < r1; r++) {
    int64_t q = r;
    for (int d = C->no - 1; d >= 0; d--) { idx[d] = q % C->os[d]; q /= C->os[d]; }
    for (int k = 0; k < P->ncode; k++) {
      const pcode *c = &P->code[k];
      float *own = regs + (size_t)c->dst * pad;
      if (c->kind == PC_LOAD || c->kind == PC_CONST) {
        const tdesc *t = &C->ins[c->input];
        int64_t base = t->off + c->off, s = (int64_t)c->st[C->no];
        for (int d = 0; d < C->no; d++) base += idx[d] * (int64_t)c->st[d];
        rp[c->dst] = load_row_f32(t, base, s, own, n);
        continue;
      }
      /* PC_OP: float32 add, sub, mul, div, neg, where; bool logical_not; cast/contiguous to either */
      prologue_op_f32(c, rp[c->a], rp[c->b], rp[c->c], own, n);
      rp[c->dst] = own;
    }
    if (C->fast) softmax_row_f32x(rp[P->code[P->out].dst], C->out + r * n, (float *)e, n);
    else softmax_row_f32(rp[P->code[P->out].dst], C->out + r * n, e, n);
  }
}

int k_softmax_f32(const loom_instr *I) {
  pcode *S = loom_scratch(SCR_K0, sizeof(pcode) * LOOM_MAXCODE);
  smf_ctx C;
  prog_t P;
  int dim = (int)I->attr[0];
  if (!prog_parse(I->attr + 1, I->attr + I->nattr, &P, S, I->nin) || P.nd < 1 || dim != P.nd - 1 ||
      I->out.dt != DT_F32 || P.nregs > 64) {
    loom_set_error("fused_softmax_f32: bad attrs");
    return 1;
  }
  for (int k = 0; k < P.ncode; k++) {
    const pcode *c = &P.code[k];
    int any = c->op == OP_cast || c->op == OP_contiguous;
    int ok = c->kind == PC_LOAD || c->kind == PC_CONST
                 ? (I->in[c->input].dt == DT_F32 || I->in[c->input].dt == DT_BOOL)
                 : c->kind == PC_OP && ((c->dt == DT_F32 && (any || c->op == OP_add || c->op == OP_sub || c->op == OP_mul ||
                                                             c->op == OP_div || c->op == OP_neg || c->op == OP_where)) ||
                                        (c->dt == DT_BOOL && (any || c->op == OP_logical_not)));
    if (!ok) { loom_set_error("fused_softmax_f32: prologue code %d not supported", k); return 1; }
  }
  C.P = &P;
  C.fast = I->op == OP_fused_softmax_f32x;
  C.ins = I->in;
  C.out = (float *)I->out.p + I->out.off;
  C.n = P.shape[dim];
  C.no = P.nd - 1;
  int64_t rows = 1;
  for (int d = 0; d < C.no; d++) { C.os[d] = P.shape[d]; rows *= P.shape[d]; }
  if (rows == 0 || C.n == 0) return 0;
  loom_parallel_for(rows, 32768 / (C.n * (P.ncode + 4)) + 1, smf_rows, &C);
  return 0;
}

/* ---- fused_rms_norm.f32(x) / fused_layer_norm.f32 ------------------------------------------ */
typedef struct {
  const float *x, *w, *b;
  float *out;
  int rms;
  int64_t N, os[LOOM_MAXD], ost[LOOM_MAXD]; /* row length; outer dims of x: sizes, strides */
  int no;
  double c1, c2, c3, eps;
  /* fused_rms_norm_f32x: a row whose fl32(rsqrt) lies in [rf_lo, rf_hi] is scaled in float32
     lanes (an empty range, rf_lo > rf_hi, where the call's weight does not admit it) */
  float rf_lo, rf_hi;
  int stream; /* f32x output of at least STREAM_BYTES: non-temporal stores (scale_row_f32) */
} nf_ctx;

/* Outputs from a quarter of a typical last-level cache on are streamed past it (scale_row_f32). */
#define STREAM_BYTES ((int64_t)8 << 20)

#ifdef __AVX512F__
#include <immintrin.h>
#endif

/**
 * y[j] = x[j]·(rf·w[j]) (w NULL: x[j]·rf) for j < n: fused_rms_norm_f32x's scaling in float32
 * lanes. With `stream` (and AVX-512), the aligned part is written with non-temporal stores: the
 * output of a large norm then does not evict its input from the last-level cache, nor is it read
 * before being written (W4 [4096, 1024]: x stays in L3 across calls); the caller fences. The same
 * two float products either way, so the same bits.
 */
static void scale_row_f32(const float *x, const float *w, float rf, float *y, int64_t n, int stream) {
  int64_t j = 0;
#ifdef __AVX512F__
  if (stream) {
    for (; j < n && ((uintptr_t)(y + j) & 63) != 0; j++) y[j] = w ? x[j] * (rf * w[j]) : x[j] * rf;
    const __m512 r = _mm512_set1_ps(rf);
    if (w)
      for (; j + 16 <= n; j += 16) _mm512_stream_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), _mm512_mul_ps(r, _mm512_loadu_ps(w + j))));
    else
      for (; j + 16 <= n; j += 16) _mm512_stream_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), r));
  }
#endif
  if (w) {
#pragma omp simd
    for (int64_t k = j; k < n; k++) y[k] = x[k] * (rf * w[k]);
  } else {
#pragma omp simd
    for (int64_t k = j; k < n; k++) y[k] = x[k] * rf;
  }
}

static void nf_rows(void *vc, int64_t r0, int64_t r1) {
  const nf_ctx *C = vc;
  int64_t N = C->N;
  const float *w = C->w, *bb = C->b;
  for (int64_t r = r0; r < r1; r++) {
    int64_t q = r, off = 0;
    for (int d = C->no - 1; d >= 0; d--) { off += (q % C->os[d]) * C->ost[d]; q /= C->os[d]; }
    const float *x = C->x + off;
    float *y = C->out + r * N;
    if (C->rms) {
      double s = 0; /* x·x is exact in double (48 bits) */
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < N; j++) s += (double)x[j] * (double)x[j];
      double rs = 1.0 / sqrt(s / C->c1 + C->eps);
      /* f32x: y = fl32(x·fl32(fl32(rs)·w)) in float32 lanes (16 per vector, no conversions),
         where fl32(rs) and every nonzero fl32(rs)·w are normal and finite (k_norm_f32 sets the
         range; NaN fails it): four float roundings counting the reference's, rows.ts's
         RMS_NORM_X_CONTRACT */
      float rf = (float)rs;
      if (rf >= C->rf_lo && rf <= C->rf_hi) {
        scale_row_f32(x, w, rf, y, N, C->stream);
        continue;
      }
      if (w) {
#pragma omp simd
        for (int64_t j = 0; j < N; j++) y[j] = (float)((double)x[j] * rs * (double)w[j]);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < N; j++) y[j] = (float)((double)x[j] * rs);
      }
      continue;
    }
    /* the corrected two pass of functional.ts layer_norm, in double, re-reading the row from cache */
    double s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s1)
    for (int64_t j = 0; j < N; j++) s1 += (double)x[j];
    double m0 = s1 / C->c1;
#pragma omp simd reduction(+ : s2)
    for (int64_t j = 0; j < N; j++) s2 += (double)x[j] - m0;
    double cm = s2 / C->c2;
#pragma omp simd reduction(+ : s3)
    for (int64_t j = 0; j < N; j++) { double d = ((double)x[j] - m0) - cm; s3 += d * d; }
    double rs = 1.0 / sqrt(s3 / C->c3 + C->eps);
#pragma omp simd
    for (int64_t j = 0; j < N; j++) {
      double t = (((double)x[j] - m0) - cm) * rs;
      if (w) t *= (double)w[j];
      if (bb) t += (double)bb[j];
      y[j] = (float)t;
    }
  }
#ifdef __AVX512F__
  if (C->stream) _mm_sfence(); /* the streamed stores are visible before the job is marked done */
#endif
}

/** Dense float32 data of a contiguous tensor (rows.ts admits only those for w and b). */
static const float *dense_f32(const tdesc *t) {
  return (const float *)t->p + t->off;
}

/**
 * fused_layer_norm_f32: inputs [x, n, n, n, eps, w?, b?]; fused_rms_norm_f32: inputs
 * [x, n, eps, w?]; attrs [dims, has_weight, has_bias]. x float32 with its normalized trailing
 * dims contiguous (outer dims any strides); w, b contiguous float32; out dense float32.
 */
int k_norm_f32(const loom_instr *I) {
  nf_ctx C;
  C.rms = I->op == OP_fused_rms_norm_f32 || I->op == OP_fused_rms_norm_f32x;
  int dims = (int)I->attr[0], has_w = I->attr[1] != 0, has_b = I->attr[2] != 0;
  const tdesc *x = &I->in[0];
  if (dims < 1 || dims > x->nd || x->dt != DT_F32 || I->out.dt != DT_F32) { loom_set_error("fused norm f32: bad operands"); return 1; }
  C.N = 1;
  int64_t inner = 1;
  for (int d = x->nd - 1; d >= x->nd - dims; d--) {
    if (x->shape[d] != 1 && x->st[d] != inner) { loom_set_error("fused norm f32: normalized dims not contiguous"); return 1; }
    inner *= x->shape[d];
  }
  C.N = inner;
  C.no = x->nd - dims;
  for (int d = 0; d < C.no; d++) { C.os[d] = x->shape[d]; C.ost[d] = x->st[d]; }
  int k = 1;
  C.c1 = load1(I->in[k].p, I->in[k].dt, I->in[k].off), k++;
  if (!C.rms) {
    C.c2 = load1(I->in[k].p, I->in[k].dt, I->in[k].off), k++;
    C.c3 = load1(I->in[k].p, I->in[k].dt, I->in[k].off), k++;
  }
  C.eps = load1(I->in[k].p, I->in[k].dt, I->in[k].off), k++;
  C.w = has_w ? dense_f32(&I->in[k++]) : NULL;
  C.b = has_b ? dense_f32(&I->in[k++]) : NULL;
  /* value conditions of rows.ts's bounds (eps >= 0; layer_norm: |w| <= 2^10, |b| <= 2^20):
     otherwise the exact kernel runs, which takes the same operands and attrs */
  int exact = !(C.eps >= 0);
  if (!C.rms && !exact) {
    float mw = 0, mb = 0;
    for (int64_t j = 0; C.w && j < C.N; j++) mw = fabsf(C.w[j]) > mw ? fabsf(C.w[j]) : mw;
    for (int64_t j = 0; C.b && j < C.N; j++) mb = fabsf(C.b[j]) > mb ? fabsf(C.b[j]) : mb;
    exact = mw > 0x1p10f || mb > 0x1p20f;
  }
  C.rf_lo = 1, C.rf_hi = 0; /* empty: the double lanes */
  C.stream = I->op == OP_fused_rms_norm_f32x && t_numel(x) * 4 >= STREAM_BYTES;
  if (I->op == OP_fused_rms_norm_f32x && !exact) {
    /* fl32(rs) normal and finite; every nonzero |t| = fl32(rs)·|w_j| in [2^-126, 2^127] (no
       subnormal factor, no overflow); and |y| = |x_j|·rs·|w_j| <= sqrt(N)·max|w| (x_j² <= s and
       eps >= 0) at most 2^126, so y cannot overflow where the reference does not */
    float wmin = 1, wmax = 1;
    int finite = 1;
    if (C.w) {
      wmin = INFINITY, wmax = 0;
      for (int64_t j = 0; j < C.N; j++) {
        float a = fabsf(C.w[j]);
        finite &= isfinite(a);
        if (a > wmax) wmax = a;
        if (a != 0 && a < wmin) wmin = a;
      }
    }
    if (finite && sqrt((double)C.N) * wmax <= 0x1p126) {
      /* wmin = inf (all weights 0): every t is 0, exact */
      double lo = fmax(0x1p-126, 0x1p-126 / (double)wmin * (1 + 0x1p-20));
      double hi = wmax > 0 ? fmin(0x1.fffffep127, 0x1p127 / (double)wmax) : 0x1.fffffep127;
      if (lo <= hi) { C.rf_lo = (float)lo * (1 + 0x1p-20f); C.rf_hi = (float)hi * (1 - 0x1p-20f); }
    }
  }
  if (exact) {
    loom_instr J = *I;
    J.op = C.rms ? OP_fused_rms_norm : OP_fused_layer_norm;
    return k_fused_norm(&J);
  }
  C.x = (const float *)x->p + x->off;
  C.out = (float *)I->out.p + I->out.off;
  int64_t total = t_numel(x);
  if (total == 0 || C.N == 0) return 0;
  loom_parallel_for(total / C.N, 32768 / C.N + 1, nf_rows, &C);
  return 0;
}
