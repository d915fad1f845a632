/*
 * Rotary position embedding (registry op rotary_embedding, src/graph/ops/rope.ts):
 *   forward     y = x·cos + rotate_half(x)·sin,   rotate_half(x)  = cat(−x2, x1)
 *   transposed  y = x·cos + rotate_halfᵀ(x·sin),  rotate_halfᵀ(z) = cat(z2, −z1)
 * over rows of D = 2h elements; cos and sin broadcast to x (stride 0 where they do).
 *
 * Exact: each product and the sum are rounded to the dtype as the decomposition's mul, mul and
 * add store them (negation is exact, and a + (−b) is a − b in IEEE arithmetic), so the result
 * equals the unfused ops bit for bit. The float32 path computes in float (the build passes
 * -ffp-contract=off: no fma), which rounds like the double kernels' store to float32 does
 * (a float product or sum computed in double and rounded once is the correctly rounded float).
 * Its inner loops are unit-stride over halves, which the compiler vectorizes.
 * Other dtypes and strided rows compute in double and round each step as storing it would;
 * float16/bfloat16 compute in float32 and round once to the half type (the js reference runs
 * kernel ops on halves through float32), within one half ulp of the decomposition's per-op
 * rounding (tests/rope bound it).
 */
#include "common.h"

typedef struct {
  const tdesc *x, *c, *s;
  tdesc *out;
  int nd, tr;
  int64_t D, h;
  int64_t xs[LOOM_MAXD], cs[LOOM_MAXD], ss[LOOM_MAXD];
} rope_ctx;

/** v rounded as the step stores it: float64 keeps it, float32 rounds, and half dtypes compute in
 * float32 (as the js backend runs every kernel op on halves), rounded to the half type once at the
 * store. */
static inline double rnd(double v, int dt) {
  return dt == DT_F64 ? v : (double)(float)v;
}

/* float32, unit stride: y1 = x1·c1 − x2·s1, y2 = x2·c2 + x1·s2 (transposed: + x2·s2, − x1·s1) */
static void row_f32(const float *restrict x, const float *restrict c, const float *restrict s, float *restrict y, int64_t h, int tr) {
  const float *x1 = x, *x2 = x + h, *c1 = c, *c2 = c + h, *s1 = s, *s2 = s + h;
  float *y1 = y, *y2 = y + h;
  if (!tr) {
    for (int64_t j = 0; j < h; j++) y1[j] = x1[j] * c1[j] - x2[j] * s1[j];
    for (int64_t j = 0; j < h; j++) y2[j] = x2[j] * c2[j] + x1[j] * s2[j];
  } else {
    for (int64_t j = 0; j < h; j++) y1[j] = x1[j] * c1[j] + x2[j] * s2[j];
    for (int64_t j = 0; j < h; j++) y2[j] = x2[j] * c2[j] - x1[j] * s1[j];
  }
}

/* any dtype, any strides: the decomposition in double, each step rounded to dt */
static void row_any(const rope_ctx *C, int64_t ox, int64_t oc, int64_t os, int64_t oy) {
  const tdesc *x = C->x, *c = C->c, *s = C->s;
  int dt = C->out->dt, L = C->nd - 1;
  int64_t sx = C->xs[L], sc = C->cs[L], sn = C->ss[L];
  for (int64_t j = 0; j < C->D; j++) {
    int lo = j < C->h;
    int64_t p = lo ? j + C->h : j - C->h, sj = C->tr ? p : j;
    double sign = lo == C->tr ? 1.0 : -1.0;
    double a = rnd(load1(x->p, x->dt, ox + j * sx) * load1(c->p, c->dt, oc + j * sc), dt);
    double b = rnd(sign * load1(x->p, x->dt, ox + p * sx) * load1(s->p, s->dt, os + sj * sn), dt);
    store1(C->out->p, dt, oy + j, a + b);
  }
}

static void rope_rows(void *ctx, int64_t begin, int64_t end) {
  const rope_ctx *C = ctx;
  int L = C->nd - 1;
  int fast = C->out->dt == DT_F32 && C->xs[L] == 1 && C->cs[L] == 1 && C->ss[L] == 1;
  for (int64_t r = begin; r < end; r++) {
    int64_t ox = C->x->off, oc = C->c->off, os = C->s->off, rem = r;
    for (int d = L - 1; d >= 0; d--) {
      int64_t i = rem % C->x->shape[d];
      rem /= C->x->shape[d];
      ox += i * C->xs[d];
      oc += i * C->cs[d];
      os += i * C->ss[d];
    }
    int64_t oy = C->out->off + r * C->D;
    if (fast) row_f32((const float *)C->x->p + ox, (const float *)C->c->p + oc, (const float *)C->s->p + os, (float *)C->out->p + oy, C->h, C->tr);
    else row_any(C, ox, oc, os, oy);
  }
}

/** Strides of t read as a tensor of x's shape (right-aligned; 0 where t broadcasts). */
static void bstrides(const tdesc *t, const tdesc *x, int64_t *st) {
  for (int d = 0; d < x->nd; d++) {
    int k = d - (x->nd - t->nd);
    st[d] = k < 0 || (t->shape[k] == 1 && x->shape[d] != 1) ? 0 : t->st[k];
  }
}

int k_rotary_embedding(const loom_instr *I) {
  rope_ctx C;
  C.x = &I->in[0];
  C.c = &I->in[1];
  C.s = &I->in[2];
  C.out = (tdesc *)&I->out;
  C.nd = C.x->nd;
  C.tr = I->nattr > 0 && I->attr[0] != 0;
  if (I->nin != 3 || C.nd < 1 || C.c->nd > C.nd || C.s->nd > C.nd) { loom_set_error("rotary_embedding: bad operands"); return 1; }
  C.D = C.x->shape[C.nd - 1];
  C.h = C.D / 2;
  if (C.D % 2 != 0) { loom_set_error("rotary_embedding: odd last dim %lld", (long long)C.D); return 1; }
  for (int d = 0; d < C.nd; d++) {
    if (I->out.shape[d] != C.x->shape[d]) { loom_set_error("rotary_embedding: output shape"); return 1; }
    C.xs[d] = C.x->st[d];
  }
  /* the output is dense row-major (rows of D at off + r·D) */
  int64_t inner = 1;
  for (int d = C.nd - 1; d >= 0; d--) {
    if (I->out.shape[d] != 1 && I->out.st[d] != inner) { loom_set_error("rotary_embedding: output not dense"); return 1; }
    inner *= I->out.shape[d];
  }
  bstrides(C.c, C.x, C.cs);
  bstrides(C.s, C.x, C.ss);
  int64_t total = t_numel(C.x);
  if (total == 0 || C.D == 0) return 0;
  loom_parallel_for(total / C.D, 32768 / C.D + 1, rope_rows, &C);
  return 0;
}
