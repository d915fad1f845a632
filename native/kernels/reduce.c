/*
 * Reductions (sum, amax, amin over a set of dims), argmax/argmin and cumsum.
 *
 * Sums accumulate in double like the js reference. When the reduced run is contiguous they use
 * eight interleaved accumulators (vectorized; the order differs from the js fold, so results
 * agree within double rounding, i.e. bit-exact after rounding to float32 in nearly all cases);
 * when the kept dim is the contiguous one, rows are folded in the reference's order. amax/amin
 * propagate NaN and return the first of equal signed zeros, as the sequential fold does.
 */
#include "common.h"

typedef struct {
  const loom_instr *I;
  int nk, nr;                      /* kept and reduced dims */
  int64_t ks[LOOM_MAXD], kst[LOOM_MAXD];
  int64_t rs[LOOM_MAXD], rst[LOOM_MAXD];
  int64_t rtotal;
  int kind;                        /* 0 sum, 1 amax, 2 amin */
} red_ctx;

static inline double fold(int kind, double acc, double x) {
  if (kind == 0) return acc + x;
  if (kind == 1) return (x > acc || isnan(x)) ? x : acc;
  return (x < acc || isnan(x)) ? x : acc;
}

/** Offset in x of kept index `o` (row-major over the kept dims). */
static int64_t kept_offset(const red_ctx *C, int64_t o) {
  int64_t off = C->I->in[0].off;
  for (int d = C->nk - 1; d >= 0; d--) {
    off += (o % C->ks[d]) * C->kst[d];
    o /= C->ks[d];
  }
  return off;
}

/** Fold a contiguous or strided run of n elements into acc (lanes for contiguous sums). */
static double fold_run(int kind, const tdesc *x, int64_t i0, int64_t s, int64_t n, double acc) {
  double buf[LOOM_BLOCK];
  for (int64_t j = 0; j < n; j += LOOM_BLOCK) {
    int m = (int)(n - j < LOOM_BLOCK ? n - j : LOOM_BLOCK);
    load_block(buf, x->p, x->dt, i0 + j * s, s, m);
    if (kind == 0) {
      double l[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int i = 0;
      for (; i + 8 <= m; i += 8)
        for (int q = 0; q < 8; q++) l[q] += buf[i + q];
      double t = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
      for (; i < m; i++) t += buf[i];
      acc += t;
    } else {
      for (int i = 0; i < m; i++) acc = fold(kind, acc, buf[i]);
    }
  }
  return acc;
}

/** Path A: each output folds its reduced elements (innermost reduced dim as the run). */
static void red_inner(void *vc, int64_t o0, int64_t o1) {
  red_ctx *C = vc;
  const tdesc *x = &C->I->in[0];
  int nr = C->nr;
  int64_t run = C->rs[nr - 1], rstride = C->rst[nr - 1], nruns = C->rtotal / run;
  double init = C->kind == 0 ? 0 : C->kind == 1 ? -INFINITY : INFINITY;
  for (int64_t o = o0; o < o1; o++) {
    int64_t base = kept_offset(C, o);
    double acc = init;
    for (int64_t r = 0; r < nruns; r++) {
      int64_t off = base, q = r;
      for (int d = nr - 2; d >= 0; d--) { off += (q % C->rs[d]) * C->rst[d]; q /= C->rs[d]; }
      acc = fold_run(C->kind, x, off, rstride, run, acc);
    }
    if (C->kind != 0 && acc == 0 && C->rtotal > 0) {
      /* the sequential fold keeps the first of equal zeros: find its sign */
      for (int64_t r = 0; r < C->rtotal; r++) {
        int64_t off = base, q = r;
        for (int d = nr - 1; d >= 0; d--) { off += (q % C->rs[d]) * C->rst[d]; q /= C->rs[d]; }
        double v = load1(x->p, x->dt, off);
        if (v == 0) { acc = v; break; }
      }
    }
    store1(C->I->out.p, C->I->out.dt, C->I->out.off + o, acc);
  }
}

/** Path B: the last kept dim is contiguous; fold whole rows of outputs in the reference order. */
static void red_outer(void *vc, int64_t t0, int64_t t1) {
  red_ctx *C = vc;
  const tdesc *x = &C->I->in[0];
  int64_t inner = C->ks[C->nk - 1], tiles = (inner + LOOM_BLOCK - 1) / LOOM_BLOCK;
  double acc[LOOM_BLOCK], buf[LOOM_BLOCK];
  double init = C->kind == 0 ? 0 : C->kind == 1 ? -INFINITY : INFINITY;
  for (int64_t t = t0; t < t1; t++) {
    int64_t row = t / tiles, j0 = (t % tiles) * LOOM_BLOCK;
    int m = (int)(inner - j0 < LOOM_BLOCK ? inner - j0 : LOOM_BLOCK);
    int64_t base = kept_offset(C, row * inner) + j0 * C->kst[C->nk - 1];
    for (int i = 0; i < m; i++) acc[i] = init;
    for (int64_t r = 0; r < C->rtotal; r++) {
      int64_t off = base, q = r;
      for (int d = C->nr - 1; d >= 0; d--) { off += (q % C->rs[d]) * C->rst[d]; q /= C->rs[d]; }
      load_block(buf, x->p, x->dt, off, C->kst[C->nk - 1], m);
      if (C->kind == 0) for (int i = 0; i < m; i++) acc[i] += buf[i];
      else for (int i = 0; i < m; i++) acc[i] = fold(C->kind, acc[i], buf[i]);
    }
    store_block(C->I->out.p, C->I->out.dt, C->I->out.off + row * inner + j0, 1, acc, m);
  }
}

/** attrs = [ndims, dim...] (sorted, normalized); the output is dense over the kept dims. */
int k_reduce(const loom_instr *I) {
  red_ctx C;
  memset(&C, 0, sizeof(C));
  C.I = I;
  C.kind = I->op == OP_sum ? 0 : I->op == OP_amax ? 1 : 2;
  const tdesc *x = &I->in[0];
  int nred = (int)I->attr[0];
  char isred[LOOM_MAXD] = {0};
  for (int i = 0; i < nred; i++) isred[(int)I->attr[1 + i]] = 1;
  for (int d = 0; d < x->nd; d++) {
    if (isred[d]) { C.rs[C.nr] = x->shape[d]; C.rst[C.nr++] = x->st[d]; }
    else { C.ks[C.nk] = x->shape[d]; C.kst[C.nk++] = x->st[d]; }
  }
  int64_t *kp[1] = {C.kst}, *rp[1] = {C.rst};
  C.nk = collapse_dims(C.nk, C.ks, 1, kp);
  C.nr = collapse_dims(C.nr, C.rs, 1, rp);
  C.rtotal = 1;
  for (int d = 0; d < C.nr; d++) C.rtotal *= C.rs[d];
  int64_t nout = 1;
  for (int d = 0; d < C.nk; d++) nout *= C.ks[d];
  if (nout == 0) return 0;
  if (C.rtotal == 0) {
    double init = C.kind == 0 ? 0 : C.kind == 1 ? -INFINITY : INFINITY;
    for (int64_t o = 0; o < nout; o++) store1(I->out.p, I->out.dt, I->out.off + o, init);
    return 0;
  }
  int64_t inner = C.ks[C.nk - 1];
  if (C.kst[C.nk - 1] == 1 && C.rst[C.nr - 1] != 1 && inner > 1) {
    int64_t tiles = (nout / inner) * ((inner + LOOM_BLOCK - 1) / LOOM_BLOCK);
    int64_t work = C.rtotal * (inner < LOOM_BLOCK ? inner : LOOM_BLOCK);
    loom_parallel_for(tiles, 32768 / work + 1, red_outer, &C);
  } else {
    loom_parallel_for(nout, 32768 / C.rtotal + 1, red_inner, &C);
  }
  return 0;
}

/* ---- lanes: iterate a tensor as [others..., n] around one dim --------------------------------- */
typedef struct {
  const loom_instr *I;
  int dim, no;
  int64_t os[LOOM_MAXD], ost[LOOM_MAXD], oost[LOOM_MAXD]; /* other dims: shape, x strides, out strides */
  int64_t n, st, ost_dim;
  int flag; /* argmax: largest; cumsum: reverse */
} lane_ctx;

static void lane_setup(lane_ctx *L, const loom_instr *I, int dim) {
  const tdesc *x = &I->in[0];
  L->I = I;
  L->dim = dim;
  L->no = 0;
  for (int d = 0; d < x->nd; d++) {
    if (d == dim) continue;
    L->os[L->no] = x->shape[d];
    L->ost[L->no] = x->st[d];
    L->oost[L->no++] = I->out.nd == x->nd ? I->out.st[d] : 0;
  }
  L->n = x->shape[dim];
  L->st = x->st[dim];
  L->ost_dim = I->out.nd == x->nd ? I->out.st[dim] : 0;
}

static void lane_base(const lane_ctx *L, int64_t lane, int64_t *xb, int64_t *ob) {
  int64_t a = L->I->in[0].off, b = L->I->out.off;
  for (int d = L->no - 1; d >= 0; d--) {
    int64_t i = lane % L->os[d];
    lane /= L->os[d];
    a += i * L->ost[d];
    b += i * L->oost[d];
  }
  *xb = a;
  *ob = b;
}

static void arg_lanes(void *vc, int64_t l0, int64_t l1) {
  lane_ctx *L = vc;
  const tdesc *x = &L->I->in[0];
  for (int64_t lane = l0; lane < l1; lane++) {
    int64_t xb, ob;
    lane_base(L, lane, &xb, &ob);
    int64_t best = 0;
    double bv = load1(x->p, x->dt, xb);
    for (int64_t k = 1; k < L->n && !isnan(bv); k++) {
      double v = load1(x->p, x->dt, xb + k * L->st);
      if (isnan(v) || (L->flag ? v > bv : v < bv)) { bv = v; best = k; }
    }
    store1(L->I->out.p, L->I->out.dt, L->I->out.off + lane, (double)best);
  }
}

/** attrs = [dim] (-1: over the flattened input). First index of the extreme; NaN wins. */
int k_arg(const loom_instr *I) {
  const tdesc *x = &I->in[0];
  int dim = (int)I->attr[0];
  const char *name = I->op == OP_argmax ? "argmax" : "argmin";
  lane_ctx L;
  L.flag = I->op == OP_argmax;
  if (dim < 0 || x->nd == 0) {
    /* flattened: the elements in row-major order */
    int64_t n = t_numel(x);
    if (n == 0) { loom_set_error("[%s] expected reduction dim 0 to have non-zero size", name); return 1; }
    int64_t best = 0;
    double bv = NAN;
    for (int64_t k = 0; k < n; k++) {
      int64_t off = x->off, q = k;
      for (int d = x->nd - 1; d >= 0; d--) { off += (q % x->shape[d]) * x->st[d]; q /= x->shape[d]; }
      double v = load1(x->p, x->dt, off);
      if (k == 0 || isnan(v) || (L.flag ? v > bv : v < bv)) { bv = v; best = k; }
      if (isnan(bv)) break;
    }
    store1(I->out.p, I->out.dt, I->out.off, (double)best);
    return 0;
  }
  if (x->shape[dim] == 0) { loom_set_error("[%s] expected reduction dim %d to have non-zero size", name, dim); return 1; }
  lane_setup(&L, I, dim);
  int64_t lanes = t_numel(x) / L.n;
  loom_parallel_for(lanes, 16384 / L.n + 1, arg_lanes, &L);
  return 0;
}

static void cumsum_lanes(void *vc, int64_t l0, int64_t l1) {
  lane_ctx *L = vc;
  const tdesc *x = &L->I->in[0];
  const tdesc *o = &L->I->out;
  for (int64_t lane = l0; lane < l1; lane++) {
    int64_t xb, ob;
    lane_base(L, lane, &xb, &ob);
    double acc = 0;
    for (int64_t s = 0; s < L->n; s++) {
      int64_t k = L->flag ? L->n - 1 - s : s;
      acc += load1(x->p, x->dt, xb + k * L->st);
      store1(o->p, o->dt, ob + k * L->ost_dim, acc);
    }
  }
}

/** attrs = [dim, reverse]; accumulates in double in index order (the reference's order). */
int k_cumsum(const loom_instr *I) {
  const tdesc *x = &I->in[0];
  if (x->nd == 0) { store1(I->out.p, I->out.dt, I->out.off, load1(x->p, x->dt, x->off)); return 0; }
  lane_ctx L;
  lane_setup(&L, I, (int)I->attr[0]);
  L.flag = I->attr[1] != 0;
  if (L.n == 0) return 0;
  int64_t lanes = t_numel(x) / L.n;
  loom_parallel_for(lanes, 16384 / L.n + 1, cumsum_lanes, &L);
  return 0;
}
