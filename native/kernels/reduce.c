/*
 * Reductions (sum, amax, amin over a set of dims, with or without a fused elementwise prologue
 * and epilogue), argmax/argmin and cumsum.
 *
 * Every native reduction folds in one order (common.h): row-major over the reduced dims, in
 * blocks of LOOM_BLOCK values with 8 interleaved lanes, blocks added to a running double total.
 * The order depends only on the logical index space, never on strides, tiling or threads, so
 * an eager `sum` and a fused reduction or pattern kernel give the same bits. Two schedules
 * compute it: each output folding its own values (the reduced run contiguous, or few outputs:
 * then blocks are folded in parallel and combined in order), or, when the kept dim is the
 * contiguous one, a row of outputs streaming the reduced rows with per-output lanes.
 * amax/amin propagate NaN and return the first of equal signed zeros, as the sequential fold.
 */
#include "common.h"
#ifdef __AVX512F__
#include <immintrin.h>
#endif

static inline double fold1(int kind, double acc, double x) {
  if (kind == RED_MAX) return (x > acc || isnan(x)) ? x : acc;
  return (x < acc || isnan(x)) ? x : acc;
}

static inline double red_init(int kind) { return kind == RED_SUM ? 0 : kind == RED_MAX ? -INFINITY : INFINITY; }

void fold_init(fold_t *f, int kind) {
  f->acc = red_init(kind);
  f->fz = 0;
  f->zseen = 0;
}

/** The block's own contribution: its lane sum (sum) or its extreme (amax/amin). */
static double block_part(int kind, const double *v, int m) {
  double l[8];
  int i = 0;
  if (kind == RED_SUM) {
    for (int q = 0; q < 8; q++) l[q] = 0;
    for (; i + 8 <= m; i += 8)
      for (int q = 0; q < 8; q++) l[q] += v[i + q];
    double t = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    for (; i < m; i++) t += v[i];
    return t;
  }
  /* lanes, branch-free so they vectorize: NaN wins (x != x), else the larger (smaller) */
  double init = red_init(kind);
  for (int q = 0; q < 8; q++) l[q] = init;
#ifdef __AVX512F__
  __m512d L = _mm512_set1_pd(init);
  if (kind == RED_MAX) {
    for (; i + 8 <= m; i += 8) {
      __m512d x = _mm512_loadu_pd(v + i);
      L = _mm512_mask_mov_pd(L, _mm512_cmp_pd_mask(x, L, _CMP_GT_OQ) | _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), x);
    }
  } else {
    for (; i + 8 <= m; i += 8) {
      __m512d x = _mm512_loadu_pd(v + i);
      L = _mm512_mask_mov_pd(L, _mm512_cmp_pd_mask(x, L, _CMP_LT_OQ) | _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), x);
    }
  }
  _mm512_storeu_pd(l, L);
#else
  for (; i + 8 <= m; i += 8)
    for (int q = 0; q < 8; q++) l[q] = fold1(kind, l[q], v[i + q]);
#endif
  double t = init;
  for (int q = 0; q < 8; q++) t = fold1(kind, t, l[q]);
  for (; i < m; i++) t = fold1(kind, t, v[i]);
  return t;
}

static inline void first_zero(fold_t *f, const double *v, int m) {
  if (f->zseen) return;
  int any = 0;
  for (int i = 0; i < m; i++) any |= v[i] == 0;
  if (!any) return;
  for (int i = 0; i < m; i++)
    if (v[i] == 0) { f->fz = v[i]; f->zseen = 1; return; }
}

/** Combine a block's part into the running state, in block order. */
static inline void fold_part(fold_t *f, int kind, double part) {
  f->acc = kind == RED_SUM ? f->acc + part : fold1(kind, f->acc, part);
}

void fold_block(fold_t *f, int kind, const double *v, int m) {
  fold_part(f, kind, block_part(kind, v, m));
  if (kind != RED_SUM) first_zero(f, v, m);
}

double fold_result(const fold_t *f, int kind) {
  if (kind != RED_SUM && f->acc == 0 && f->zseen) return f->fz;
  return f->acc;
}

double fold_values(int kind, const double *v, int64_t n) {
  fold_t f;
  fold_init(&f, kind);
  for (int64_t j = 0; j < n; j += LOOM_BLOCK) fold_block(&f, kind, v + j, (int)(n - j < LOOM_BLOCK ? n - j : LOOM_BLOCK));
  return fold_result(&f, kind);
}

/* ---- the reduction engine: a prologue program folded over some of its dims -------------------- */
#define RED_MAXL 256 /* loads of a reduction prologue */
typedef struct {
  const prog_t *P;
  const tdesc *ins;
  int kind, dt, nk, nr, nl;
  int64_t ks[LOOM_MAXD], rs[LOOM_MAXD];
  int lcode[RED_MAXL];
  int64_t lbase[RED_MAXL], lk[RED_MAXL][LOOM_MAXD], lr[RED_MAXL][LOOM_MAXD];
  int64_t nout, rtotal, nblocks, width, tiles;
  fold_t *parts; /* block-parallel: one per (output, block) */
  double *accs;  /* results, rounded to dt */
} red_ctx;

static inline double round1(int dt, double v) {
  if (dt == DT_F64) return v;
  if (dt == DT_F32) return (float)v;
  char tmp[8];
  store1(tmp, dt, 0, v);
  return load1(tmp, dt, 0);
}

/** Positions of every load at kept index o (row-major over the kept dims). */
static void kept_pos(const red_ctx *C, int64_t o, int64_t *pos) {
  for (int k = 0; k < C->nl; k++) pos[k] = C->lbase[k];
  for (int d = C->nk - 1; d >= 0 && o > 0; d--) {
    int64_t i = o % C->ks[d];
    o /= C->ks[d];
    if (i) for (int k = 0; k < C->nl; k++) pos[k] += i * C->lk[k][d];
  }
}

/**
 * Values of the reduced elements [j, j + m) of the output whose load positions are `base`, into
 * v (pieces along the innermost reduced dim).
 */
static void reduced_values(const red_ctx *C, const int64_t *base, int64_t j, int m, double *v, double *regs, int64_t *pos, int64_t *dir, int *cinit) {
  int nr = C->nr;
  int64_t run = C->rs[nr - 1];
  for (int k = 0; k < C->nl; k++) dir[C->lcode[k]] = C->lr[k][nr - 1];
  int filled = 0;
  while (filled < m) {
    int64_t jj = j + filled, q = jj / run, in = jj % run;
    int n = (int)(run - in < m - filled ? run - in : m - filled);
    for (int k = 0; k < C->nl; k++) pos[C->lcode[k]] = base[k] + in * C->lr[k][nr - 1];
    for (int d = nr - 2; d >= 0 && q > 0; d--) {
      int64_t i = q % C->rs[d];
      q /= C->rs[d];
      if (i) for (int k = 0; k < C->nl; k++) pos[C->lcode[k]] += i * C->lr[k][d];
    }
    const double *r = prog_eval(C->P, C->ins, pos, dir, n, NULL, 0, 0, regs, cinit);
    memcpy(v + filled, r, (size_t)n * 8);
    filled += n;
  }
}

/** Schedule 1: each output folds its values. */
static void red_outputs(void *vc, int64_t o0, int64_t o1) {
  red_ctx *C = vc;
  double *regs = loom_scratch(SCR_T0, (size_t)C->P->nregs * LOOM_BLOCK * 8);
  int64_t *pos = loom_scratch(SCR_T1, (size_t)(2 * C->P->ncode + C->nl) * 8);
  int64_t *dir = pos + C->P->ncode, *base = dir + C->P->ncode;
  double v[LOOM_BLOCK];
  int cinit = 0;
  for (int64_t o = o0; o < o1; o++) {
    kept_pos(C, o, base);
    fold_t f;
    fold_init(&f, C->kind);
    for (int64_t j = 0; j < C->rtotal; j += LOOM_BLOCK) {
      int m = (int)(C->rtotal - j < LOOM_BLOCK ? C->rtotal - j : LOOM_BLOCK);
      reduced_values(C, base, j, m, v, regs, pos, dir, &cinit);
      fold_block(&f, C->kind, v, m);
    }
    C->accs[o] = round1(C->dt, fold_result(&f, C->kind));
  }
}

/** Schedule 1 with few outputs: task = (output, block); blocks are combined in order afterwards. */
static void red_blocks(void *vc, int64_t t0, int64_t t1) {
  red_ctx *C = vc;
  double *regs = loom_scratch(SCR_T0, (size_t)C->P->nregs * LOOM_BLOCK * 8);
  int64_t *pos = loom_scratch(SCR_T1, (size_t)(2 * C->P->ncode + C->nl) * 8);
  int64_t *dir = pos + C->P->ncode, *base = dir + C->P->ncode;
  double v[LOOM_BLOCK];
  int cinit = 0;
  for (int64_t t = t0; t < t1; t++) {
    int64_t o = t / C->nblocks, b = t % C->nblocks, j = b * LOOM_BLOCK;
    int m = (int)(C->rtotal - j < LOOM_BLOCK ? C->rtotal - j : LOOM_BLOCK);
    kept_pos(C, o, base);
    reduced_values(C, base, j, m, v, regs, pos, dir, &cinit);
    fold_t *f = &C->parts[t];
    f->acc = block_part(C->kind, v, m);
    f->zseen = 0;
    if (C->kind != RED_SUM) first_zero(f, v, m);
  }
}

/**
 * Schedule 2: the innermost kept dim is contiguous; a tile of up to `width` outputs streams the
 * reduced elements in order, each output keeping its own 8 lanes (the same arithmetic as
 * fold_block per output).
 */
static void red_rows(void *vc, int64_t t0, int64_t t1) {
  red_ctx *C = vc;
  int W = (int)C->width;
  double *regs = loom_scratch(SCR_T0, (size_t)C->P->nregs * LOOM_BLOCK * 8);
  int64_t *pos = loom_scratch(SCR_T1, (size_t)(2 * C->P->ncode + C->nl) * 8);
  int64_t *dir = pos + C->P->ncode, *base = dir + C->P->ncode;
  double *lanes = loom_scratch(SCR_T2, (size_t)(11 * W) * 8);
  double *T = lanes + 8 * W, *A = T + W, *Z = A + W;
  char zs[LOOM_BLOCK];
  int64_t inner = C->ks[C->nk - 1];
  int nr = C->nr;
  for (int k = 0; k < C->nl; k++) dir[C->lcode[k]] = C->lk[k][C->nk - 1];
  int cinit = 0;
  for (int64_t t = t0; t < t1; t++) {
    int64_t row = t / C->tiles, j0 = (t % C->tiles) * W;
    int n = (int)(inner - j0 < W ? inner - j0 : W);
    kept_pos(C, row * inner + j0, base);
    for (int i = 0; i < n; i++) { A[i] = red_init(C->kind); zs[i] = 0; Z[i] = 0; }
    for (int64_t j = 0; j < C->rtotal; j += LOOM_BLOCK) {
      int m = (int)(C->rtotal - j < LOOM_BLOCK ? C->rtotal - j : LOOM_BLOCK), m8 = m & ~7;
      if (C->kind == RED_SUM) memset(lanes, 0, (size_t)8 * W * 8);
      for (int k = 0; k < m; k++) {
        int64_t r = j + k, q = r;
        for (int l = 0; l < C->nl; l++) pos[C->lcode[l]] = base[l];
        for (int d = nr - 1; d >= 0 && q > 0; d--) {
          int64_t i = q % C->rs[d];
          q /= C->rs[d];
          if (i) for (int l = 0; l < C->nl; l++) pos[C->lcode[l]] += i * C->lr[l][d];
        }
        const double *v = prog_eval(C->P, C->ins, pos, dir, n, NULL, 0, 0, regs, &cinit);
        if (C->kind == RED_SUM) {
          if (k == m8) {
            for (int i = 0; i < n; i++) {
              const double *L = lanes + i;
              T[i] = ((L[0] + L[W]) + (L[2 * W] + L[3 * W])) + ((L[4 * W] + L[5 * W]) + (L[6 * W] + L[7 * W]));
            }
          }
          if (k < m8) {
            double *L = lanes + (k & 7) * W;
            for (int i = 0; i < n; i++) L[i] += v[i];
          } else {
            for (int i = 0; i < n; i++) T[i] += v[i];
          }
        } else {
          for (int i = 0; i < n; i++) {
            A[i] = fold1(C->kind, A[i], v[i]);
            if (!zs[i] && v[i] == 0) { zs[i] = 1; Z[i] = v[i]; }
          }
        }
      }
      if (C->kind == RED_SUM) {
        if (m8 == m) {
          for (int i = 0; i < n; i++) {
            const double *L = lanes + i;
            T[i] = ((L[0] + L[W]) + (L[2 * W] + L[3 * W])) + ((L[4 * W] + L[5 * W]) + (L[6 * W] + L[7 * W]));
          }
        }
        for (int i = 0; i < n; i++) A[i] += T[i];
      }
    }
    for (int i = 0; i < n; i++) {
      double a = A[i];
      if (C->kind != RED_SUM && a == 0 && zs[i]) a = Z[i];
      C->accs[row * inner + j0 + i] = round1(C->dt, a);
    }
  }
}

/**
 * Fold P's values over the dims marked in `isred` into accs (one per kept index, row-major),
 * rounded to dt.
 */
static int reduce_prog(const prog_t *P, const tdesc *ins, int kind, int dt, const char *isred, double *accs) {
  red_ctx *C = loom_scratch(SCR_K2, sizeof(red_ctx));
  C->P = P;
  C->ins = ins;
  C->kind = kind;
  C->dt = dt;
  C->nl = 0;
  for (int k = 0; k < P->ncode; k++) {
    if (P->code[k].kind != PC_LOAD && P->code[k].kind != PC_CONST) continue;
    if (C->nl == RED_MAXL) { loom_set_error("reduction: more than %d loads", RED_MAXL); return 1; }
    C->lcode[C->nl++] = k;
  }
  C->nk = C->nr = 0;
  for (int d = 0; d < P->nd; d++) {
    int red = isred[d];
    int slot = red ? C->nr++ : C->nk++;
    (red ? C->rs : C->ks)[slot] = P->shape[d];
    for (int k = 0; k < C->nl; k++) (red ? C->lr : C->lk)[k][slot] = (int64_t)P->code[C->lcode[k]].st[d];
  }
  for (int k = 0; k < C->nl; k++) C->lbase[k] = ins[P->code[C->lcode[k]].input].off + P->code[C->lcode[k]].off;
  int64_t *kp[RED_MAXL], *rp[RED_MAXL];
  for (int k = 0; k < C->nl; k++) { kp[k] = C->lk[k]; rp[k] = C->lr[k]; }
  C->nk = collapse_dims(C->nk, C->ks, C->nl, kp);
  C->nr = collapse_dims(C->nr, C->rs, C->nl, rp);
  C->rtotal = 1;
  for (int d = 0; d < C->nr; d++) C->rtotal *= C->rs[d];
  C->nout = 1;
  for (int d = 0; d < C->nk; d++) C->nout *= C->ks[d];
  C->accs = accs;
  if (C->nout == 0) return 0;
  if (C->rtotal == 0) {
    for (int64_t o = 0; o < C->nout; o++) accs[o] = round1(dt, red_init(kind));
    return 0;
  }
  int nt = loom_nthreads();
  int64_t work = C->rtotal * (P->ncode + 1);
  int64_t inner = C->ks[C->nk - 1];
  int rows = C->nl > 0 && inner >= 16 && C->lk[0][C->nk - 1] == 1 && C->lr[0][C->nr - 1] != 1;
  if (rows) {
    C->width = inner < 256 ? inner : 256;
    C->tiles = (inner + C->width - 1) / C->width;
    int64_t tasks = (C->nout / inner) * C->tiles;
    loom_parallel_for(tasks, 65536 / (work * C->width) + 1, red_rows, C);
  } else if (C->nout < 2 * nt && C->rtotal >= 8 * LOOM_BLOCK) {
    C->nblocks = (C->rtotal + LOOM_BLOCK - 1) / LOOM_BLOCK;
    C->parts = loom_scratch(SCR_K4, sizeof(fold_t) * (size_t)(C->nout * C->nblocks));
    loom_parallel_for(C->nout * C->nblocks, 64 / (P->ncode + 1) + 1, red_blocks, C);
    for (int64_t o = 0; o < C->nout; o++) {
      fold_t f;
      fold_init(&f, kind);
      for (int64_t b = 0; b < C->nblocks; b++) {
        const fold_t *p = &C->parts[o * C->nblocks + b];
        fold_part(&f, kind, p->acc);
        if (!f.zseen && p->zseen) { f.zseen = 1; f.fz = p->fz; }
      }
      accs[o] = round1(dt, fold_result(&f, kind));
    }
  } else {
    loom_parallel_for(C->nout, 65536 / work + 1, red_outputs, C);
  }
  return 0;
}

/** sum/amax/amin: attrs = [ndims, dim...] (normalized); the output is dense over the kept dims. */
int k_reduce(const loom_instr *I) {
  const tdesc *x = &I->in[0];
  double st[LOOM_MAXD];
  for (int d = 0; d < x->nd; d++) st[d] = (double)x->st[d];
  pcode code[1] = {{PC_LOAD, 0, 0, 0, 0, 0, 0, 0, 0, st}};
  prog_t P;
  P.nd = x->nd;
  for (int d = 0; d < x->nd; d++) P.shape[d] = x->shape[d];
  P.nregs = 1;
  P.ncode = 1;
  P.out = 0;
  P.code = code;
  char isred[LOOM_MAXD] = {0};
  int nred = (int)I->attr[0];
  for (int i = 0; i < nred; i++) isred[(int)I->attr[1 + i]] = 1;
  int64_t nout = t_numel(&I->out);
  double *accs = loom_scratch(SCR_K0, (size_t)(nout > 0 ? nout : 1) * 8);
  int kind = I->op == OP_sum ? RED_SUM : I->op == OP_amax ? RED_MAX : RED_MIN;
  if (reduce_prog(&P, I->in, kind, I->out.dt, isred, accs)) return 1;
  for (int64_t j = 0; j < nout; j += LOOM_BLOCK) {
    int n = (int)(nout - j < LOOM_BLOCK ? nout - j : LOOM_BLOCK);
    store_block(I->out.p, I->out.dt, I->out.off + j, 1, accs + j, n);
  }
  return 0;
}

/**
 * fused_reduce: attrs = [kind, dtype, ndims, dim..., has_epilogue, prologue, epilogue?]; the
 * prologue is folded over dims (accumulators rounded to dtype), then the epilogue (an
 * elementwise program reading them through ACC) or a plain store.
 */
int k_fused_reduce(const loom_instr *I) {
  const double *w = I->attr, *end = I->attr + I->nattr;
  int kind = (int)w[0], dt = (int)w[1], nred = (int)w[2];
  char isred[LOOM_MAXD] = {0};
  for (int i = 0; i < nred; i++) isred[(int)w[3 + i]] = 1;
  int has_epi = (int)w[3 + nred];
  w += 4 + nred;
  pcode *S1 = loom_scratch(SCR_K0, sizeof(pcode) * LOOM_MAXCODE * 2), *S2 = S1 + LOOM_MAXCODE;
  prog_t pro, epi;
  w = prog_parse(w, end, &pro, S1, I->nin);
  if (!w || (has_epi && !prog_parse(w, end, &epi, S2, I->nin))) { loom_set_error("fused_reduce: bad program"); return 1; }
  int64_t nout = 1;
  for (int d = 0; d < pro.nd; d++) if (!isred[d]) nout *= pro.shape[d];
  double *accs = loom_scratch(SCR_K1, (size_t)(nout > 0 ? nout : 1) * 8);
  if (reduce_prog(&pro, I->in, kind, dt, isred, accs)) return 1;
  if (has_epi) return prog_run(&epi, I->in, &I->out, (const char *)accs, DT_F64);
  for (int64_t j = 0; j < nout; j += LOOM_BLOCK) {
    int n = (int)(nout - j < LOOM_BLOCK ? nout - j : LOOM_BLOCK);
    store_block(I->out.p, I->out.dt, I->out.off + j, 1, accs + j, n);
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
