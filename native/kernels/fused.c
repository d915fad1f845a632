/*
 * The graph compiler's named patterns (src/graph/passes/patterns.ts) as single kernels:
 * fused_softmax, fused_layer_norm, fused_rms_norm and fused_attention.
 *
 * Each replays its decomposition op by op on one row at a time, rounding every intermediate to
 * the dtype as the unfused op stores it (R below) and folding its sums with the one native
 * summation order (reduce.c), so a pattern kernel gives the same bits as the ops it replaces run
 * eagerly on this backend. Rows run in parallel; per-row buffers live in per-thread scratch.
 */
#include "common.h"

static inline double R(int dt, double v) {
  if (dt == DT_F64) return v;
  if (dt == DT_F32) return (float)v;
  char tmp[8];
  store1(tmp, dt, 0, v);
  return load1(tmp, dt, 0);
}

/**
 * softmax of v[0..n) (values already rounded to D) as exp(v - amax(v)) / sum(exp(v - amax(v))),
 * each op rounded to D; the probabilities go to p (may not alias v).
 */
static void softmax_row(const double *v, double *p, int64_t n, int D) {
  double m = R(D, fold_values(RED_MAX, v, n));
  for (int64_t j = 0; j < n; j += LOOM_BLOCK) {
    int w = (int)(n - j < LOOM_BLOCK ? n - j : LOOM_BLOCK);
    double *e = p + j;
    const double *x = v + j;
    /* float32 values: float arithmetic rounds as double arithmetic rounded to float (53 >= 2·24+2) */
    if (D == DT_F32) { float mf = (float)m; for (int i = 0; i < w; i++) e[i] = (float)x[i] - mf; }
    else if (D == DT_F64) for (int i = 0; i < w; i++) e[i] = x[i] - m;
    else { for (int i = 0; i < w; i++) e[i] = x[i] - m; round_block(e, D, w); }
    ew_apply(OP_exp, D, e, e, e, e, w);
    if (D != DT_F32 && D != DT_F64) round_block(e, D, w);
  }
  double z = R(D, fold_values(RED_SUM, p, n));
  for (int64_t j = 0; j < n; j += LOOM_BLOCK) {
    int w = (int)(n - j < LOOM_BLOCK ? n - j : LOOM_BLOCK);
    double *e = p + j;
    if (D == DT_F32) { float zf = (float)z; for (int i = 0; i < w; i++) e[i] = (float)e[i] / zf; }
    else if (D == DT_F64) for (int i = 0; i < w; i++) e[i] = e[i] / z;
    else { for (int i = 0; i < w; i++) e[i] = e[i] / z; round_block(e, D, w); }
  }
}

/* ---- fused_softmax ------------------------------------------------------------------------------ */
typedef struct {
  const prog_t *P;
  const tdesc *ins, *out;
  int dim, D, nl, no;
  int lcode[LOOM_MAXCODE];
  int64_t n, os[LOOM_MAXD], ost[LOOM_MAXD], odim; /* other dims: sizes, out strides; out stride along dim */
  const double *lst[LOOM_MAXCODE];                /* each load's strides */
  int od[LOOM_MAXD];                              /* program dim of each other dim */
} sm_ctx;

static void sm_rows(void *vc, int64_t r0, int64_t r1) {
  sm_ctx *C = vc;
  const prog_t *P = C->P;
  double *regs = loom_scratch(SCR_T0, (size_t)P->nregs * LOOM_BLOCK * 8);
  int64_t *pos = loom_scratch(SCR_T1, (size_t)(2 * P->ncode) * 8), *dir = pos + P->ncode;
  double *v = loom_scratch(SCR_T5, (size_t)LOOM_PAD(C->n) * 8);
  double *p = loom_scratch(SCR_T6, (size_t)LOOM_PAD(C->n) * 8);
  for (int k = 0; k < C->nl; k++) dir[C->lcode[k]] = (int64_t)C->lst[k][C->dim];
  int cinit = 0;
  for (int64_t r = r0; r < r1; r++) {
    int64_t q = r, ob = C->out->off;
    int64_t base[256];
    for (int k = 0; k < C->nl; k++) base[k] = C->ins[P->code[C->lcode[k]].input].off + P->code[C->lcode[k]].off;
    for (int d = C->no - 1; d >= 0; d--) {
      int64_t i = q % C->os[d];
      q /= C->os[d];
      if (!i) continue;
      ob += i * C->ost[d];
      for (int k = 0; k < C->nl; k++) base[k] += i * (int64_t)C->lst[k][C->od[d]];
    }
    for (int64_t j = 0; j < C->n; j += LOOM_BLOCK) {
      int w = (int)(C->n - j < LOOM_BLOCK ? C->n - j : LOOM_BLOCK);
      for (int k = 0; k < C->nl; k++) pos[C->lcode[k]] = base[k] + j * dir[C->lcode[k]];
      memcpy(v + j, prog_eval(P, C->ins, pos, dir, w, NULL, 0, 0, regs, &cinit), (size_t)w * 8);
    }
    softmax_row(v, p, C->n, C->D);
    for (int64_t j = 0; j < C->n; j += LOOM_BLOCK) {
      int w = (int)(C->n - j < LOOM_BLOCK ? C->n - j : LOOM_BLOCK);
      store_block(C->out->p, C->out->dt, ob + j * C->odim, C->odim, p + j, w);
    }
  }
}

/** fused_softmax: attrs = [dim, prologue]; inputs = the prologue's base buffers. */
int k_fused_softmax(const loom_instr *I) {
  pcode *S = loom_scratch(SCR_K0, sizeof(pcode) * LOOM_MAXCODE);
  sm_ctx *C = loom_scratch(SCR_K1, sizeof(sm_ctx));
  prog_t P;
  C->dim = (int)I->attr[0];
  if (!prog_parse(I->attr + 1, I->attr + I->nattr, &P, S, I->nin) || C->dim < 0 || C->dim >= P.nd || I->out.nd != P.nd) {
    loom_set_error("fused_softmax: bad attrs");
    return 1;
  }
  C->P = &P;
  C->ins = I->in;
  C->out = &I->out;
  C->D = I->out.dt;
  C->nl = 0;
  for (int k = 0; k < P.ncode; k++) {
    if (P.code[k].kind != PC_LOAD && P.code[k].kind != PC_CONST) continue;
    if (C->nl == 256) { loom_set_error("fused_softmax: too many loads"); return 1; }
    C->lst[C->nl] = P.code[k].st;
    C->lcode[C->nl++] = k;
  }
  C->n = P.shape[C->dim];
  C->odim = I->out.st[C->dim];
  C->no = 0;
  int64_t rows = 1;
  for (int d = 0; d < P.nd; d++) {
    if (d == C->dim) continue;
    C->os[C->no] = P.shape[d];
    C->ost[C->no] = I->out.st[d];
    C->od[C->no++] = d;
    rows *= P.shape[d];
  }
  if (rows == 0 || C->n == 0) return 0;
  loom_parallel_for(rows, 16384 / (C->n * (P.ncode + 4)) + 1, sm_rows, C);
  return 0;
}

/* ---- layer_norm / rms_norm ---------------------------------------------------------------------- */
/** A row reader: the last `dims` dims of a tensor (collapsed), and its outer dims. */
typedef struct {
  int ni, no;
  int64_t is[LOOM_MAXD], ist[LOOM_MAXD], os[LOOM_MAXD], ost[LOOM_MAXD];
} rows_t;

static void rows_of(const tdesc *t, int dims, rows_t *R) {
  int nd = t->nd, first = nd - dims;
  R->ni = 0;
  R->no = 0;
  for (int d = 0; d < nd; d++) {
    if (d < first) { R->os[R->no] = t->shape[d]; R->ost[R->no++] = t->st[d]; }
    else { R->is[R->ni] = t->shape[d]; R->ist[R->ni++] = t->st[d]; }
  }
  int64_t *sp[1] = {R->ist};
  R->ni = collapse_dims(R->ni, R->is, 1, sp);
}

/** Row `r` (row-major over the outer dims) of t, N values in row-major order, into v. */
static void read_row(const tdesc *t, const rows_t *R, int64_t r, int64_t N, double *v) {
  int64_t base = t->off;
  for (int d = R->no - 1; d >= 0 && r > 0; d--) {
    base += (r % R->os[d]) * R->ost[d];
    r /= R->os[d];
  }
  int64_t run = R->is[R->ni - 1], rs = R->ist[R->ni - 1];
  for (int64_t j = 0; j < N; j += run) {
    int64_t off = base, q = j / run;
    for (int d = R->ni - 2; d >= 0 && q > 0; d--) {
      off += (q % R->is[d]) * R->ist[d];
      q /= R->is[d];
    }
    for (int64_t k = 0; k < run; k += LOOM_BLOCK) {
      int w = (int)(run - k < LOOM_BLOCK ? run - k : LOOM_BLOCK);
      load_block(v + j + k, t->p, t->dt, off + k * rs, rs, w);
    }
  }
}

typedef struct {
  const loom_instr *I;
  int rms, D, has_w, has_b;
  int64_t N;
  double c1, c2, c3, eps;
  rows_t rx;
  const double *w, *b; /* dense copies of the weight and bias */
} norm_ctx;

/** y = R(a op b) over a row (R: the dtype's rounding); float32 in float arithmetic (same bits). */
#define ROW_OP(D, n, dst, expr) do { \
    if ((D) == DT_F32) { for (int64_t j = 0; j < (n); j++) dst[j] = (float)(expr); } \
    else if ((D) == DT_F64) { for (int64_t j = 0; j < (n); j++) dst[j] = (expr); } \
    else { for (int64_t j = 0; j < (n); j++) dst[j] = R(D, (expr)); } \
  } while (0)

static void norm_rows(void *vc, int64_t r0, int64_t r1) {
  norm_ctx *C = vc;
  int64_t N = C->N;
  int D = C->D;
  double *v = loom_scratch(SCR_T5, (size_t)LOOM_PAD(N) * 8);
  double *q = loom_scratch(SCR_T6, (size_t)LOOM_PAD(N) * 8);
  const double *W = C->w, *Bv = C->b;
  const tdesc *o = &C->I->out;
  for (int64_t r = r0; r < r1; r++) {
    read_row(&C->I->in[0], &C->rx, r, N, v);
    double rs;
    if (C->rms) {
      ROW_OP(D, N, q, v[j] * v[j]);
      double s = R(D, fold_values(RED_SUM, q, N));
      rs = R(D, 1 / sqrt(R(D, R(D, s / C->c1) + C->eps)));
    } else {
      /* the corrected two pass of functional.ts layer_norm: centre, then centre again by the mean
         of the centred row (a constant row becomes exactly 0) */
      double m0 = R(D, R(D, fold_values(RED_SUM, v, N)) / C->c1);
      ROW_OP(D, N, v, v[j] - m0);
      double cm = R(D, R(D, fold_values(RED_SUM, v, N)) / C->c2);
      ROW_OP(D, N, v, v[j] - cm);
      ROW_OP(D, N, q, v[j] * v[j]);
      double s = R(D, fold_values(RED_SUM, q, N));
      rs = R(D, 1 / sqrt(R(D, R(D, s / C->c3) + C->eps)));
    }
    ROW_OP(D, N, q, v[j] * rs);
    if (C->has_w) ROW_OP(D, N, q, q[j] * W[j]);
    if (C->has_b) ROW_OP(D, N, q, q[j] + Bv[j]);
    for (int64_t j = 0; j < N; j += LOOM_BLOCK) {
      int w = (int)(N - j < LOOM_BLOCK ? N - j : LOOM_BLOCK);
      store_block(o->p, o->dt, o->off + r * N + j, 1, q + j, w);
    }
  }
}

/**
 * fused_layer_norm: inputs [x, n, n, n, eps, w?, b?]; fused_rms_norm: inputs [x, n, eps, w?];
 * attrs [dims, has_weight, has_bias]. x may be strided; the output is dense.
 */
int k_fused_norm(const loom_instr *I) {
  norm_ctx C;
  C.I = I;
  C.rms = I->op == OP_fused_rms_norm;
  C.D = I->out.dt;
  int dims = (int)I->attr[0];
  C.has_w = I->attr[1] != 0;
  C.has_b = I->attr[2] != 0;
  const tdesc *x = &I->in[0];
  if (dims < 1 || dims > x->nd) { loom_set_error("fused norm: bad dims"); return 1; }
  C.N = 1;
  for (int d = x->nd - dims; d < x->nd; d++) C.N *= x->shape[d];
  int k = 1;
  C.c1 = load1(I->in[k].p, I->in[k].dt, I->in[k].off);
  k++;
  if (!C.rms) {
    C.c2 = load1(I->in[k].p, I->in[k].dt, I->in[k].off);
    k++;
    C.c3 = load1(I->in[k].p, I->in[k].dt, I->in[k].off);
    k++;
  }
  C.eps = load1(I->in[k].p, I->in[k].dt, I->in[k].off);
  k++;
  int64_t total = t_numel(x);
  if (total == 0 || C.N == 0) return 0;
  double *wb = loom_scratch(SCR_K1, (size_t)(2 * C.N) * 8);
  rows_t rw;
  if (C.has_w) { rows_of(&I->in[k], I->in[k].nd, &rw); read_row(&I->in[k], &rw, 0, C.N, wb); k++; }
  if (C.has_b) { rows_of(&I->in[k], I->in[k].nd, &rw); read_row(&I->in[k], &rw, 0, C.N, wb + C.N); k++; }
  C.w = wb;
  C.b = wb + C.N;
  rows_of(x, dims, &C.rx);
  loom_parallel_for(total / C.N, 16384 / C.N + 1, norm_rows, &C);
  return 0;
}

/* ---- fused_attention ------------------------------------------------------------------------------ */
typedef struct {
  const loom_instr *I;
  const prog_t *P;
  int D, nb, nl;
  int64_t L, S, E, Ev, nbatch;
  int64_t bshape[LOOM_MAXD], sq[LOOM_MAXD], sk[LOOM_MAXD], sv[LOOM_MAXD];
  int lcode[256];
  int64_t lbase[256];
} att_ctx;

/** Batch strides of t broadcast to the scores' batch dims. */
static void batch_strides(const tdesc *t, int nb, const int64_t *bshape, int64_t *st) {
  int tb = t->nd - 2;
  for (int d = 0; d < nb; d++) {
    int td = d - (nb - tb);
    st[d] = (td < 0 || t->shape[td] == 1) ? 0 : t->st[td];
    (void)bshape;
  }
}

/** The last two dims of t at element offset off, as a 2-D view. */
static tdesc mat2(const tdesc *t, int64_t off) {
  tdesc m = *t;
  m.nd = 2;
  m.off = off;
  m.shape[0] = t->shape[t->nd - 2]; m.shape[1] = t->shape[t->nd - 1];
  m.st[0] = t->st[t->nd - 2]; m.st[1] = t->st[t->nd - 1];
  return m;
}

/** Batch entry bi: its q, kᵀ, v matrices and each load's element offset (base[k], loads in C->lcode order). */
static void att_entry(const att_ctx *C, int64_t bi, tdesc *qm, tdesc *km, tdesc *vm, int64_t *base) {
  const loom_instr *I = C->I;
  const prog_t *P = C->P;
  int64_t q = bi, qo = I->in[0].off, ko = I->in[1].off, vo = I->in[2].off;
  for (int k = 0; k < C->nl; k++) base[k] = C->lbase[k];
  for (int d = C->nb - 1; d >= 0; d--) {
    int64_t i = q % C->bshape[d];
    q /= C->bshape[d];
    if (!i) continue;
    qo += i * C->sq[d]; ko += i * C->sk[d]; vo += i * C->sv[d];
    for (int k = 0; k < C->nl; k++) base[k] += i * (int64_t)P->code[C->lcode[k]].st[d];
  }
  *qm = mat2(&I->in[0], qo);
  *km = mat2(&I->in[1], ko);
  *vm = mat2(&I->in[2], vo);
}

/** Entry bi: its load bases, its v (*vm), and scores = q kᵀ into sc (dense [L, S] of dtype D), as the batched matmul computes this entry. */
static void att_scores(const att_ctx *C, int64_t bi, int D, void *sc, tdesc *vm, int64_t *base) {
  tdesc qm, km;
  att_entry(C, bi, &qm, &km, vm, base);
  int64_t two[2] = {C->L, C->S};
  tdesc scd = dense_desc(sc, D, 2, two);
  matmul_entry(&qm, &km, &scd, C->nbatch);
}

/** Entry bi's rows of the dense output = P v (P dense [L, S] of dtype D). */
static void att_output(const att_ctx *C, int64_t bi, int D, void *pm, const tdesc *vm) {
  const loom_instr *I = C->I;
  int64_t two[2] = {C->L, C->S}, lo[2] = {C->L, C->Ev};
  tdesc pmd = dense_desc(pm, D, 2, two);
  tdesc od = dense_desc(I->out.p + (size_t)(I->out.off + bi * C->L * C->Ev) * dt_size(I->out.dt), I->out.dt, 2, lo);
  matmul_entry(&pmd, vm, &od, C->nbatch);
}

static void att_entries(void *vc, int64_t b0, int64_t b1) {
  att_ctx *C = vc;
  const loom_instr *I = C->I;
  const prog_t *P = C->P;
  int D = C->D, es = dt_size(D);
  int64_t L = C->L, S = C->S;
  double *regs = loom_scratch(SCR_T0, (size_t)P->nregs * LOOM_BLOCK * 8);
  int64_t *pos = loom_scratch(SCR_T1, (size_t)(2 * P->ncode) * 8), *dir = pos + P->ncode;
  char *sc = loom_scratch(SCR_T5, (size_t)(2 * L * S > 0 ? 2 * L * S : 1) * es), *pm = sc + (size_t)L * S * es;
  double *v = loom_scratch(SCR_T6, (size_t)LOOM_PAD(S) * 8);
  double *p = loom_scratch(SCR_T7, (size_t)LOOM_PAD(S) * 8);
  int nd = P->nd;
  for (int k = 0; k < C->nl; k++) dir[C->lcode[k]] = (int64_t)P->code[C->lcode[k]].st[nd - 1];
  int cinit = 0;
  for (int64_t bi = b0; bi < b1; bi++) {
    int64_t base[256];
    tdesc vm;
    att_scores(C, bi, D, sc, &vm, base);
    for (int64_t i = 0; i < L; i++) {
      for (int64_t j = 0; j < S; j += LOOM_BLOCK) {
        int w = (int)(S - j < LOOM_BLOCK ? S - j : LOOM_BLOCK);
        for (int k = 0; k < C->nl; k++) {
          int c = C->lcode[k];
          pos[c] = base[k] + i * (int64_t)P->code[c].st[nd - 2] + j * dir[c];
        }
        memcpy(v + j, prog_eval(P, I->in, pos, dir, w, sc, D, i * S + j, regs, &cinit), (size_t)w * 8);
      }
      softmax_row(v, p, S, D);
      for (int64_t j = 0; j < S; j += LOOM_BLOCK) {
        int w = (int)(S - j < LOOM_BLOCK ? S - j : LOOM_BLOCK);
        store_block(pm, D, i * S + j, 1, p + j, w);
      }
    }
    att_output(C, bi, D, pm, &vm);
  }
}

/*
 * fused_attention_f32x (catalog native.fused_attention.f32x, bound in src/backends/native/rows.ts):
 * float32 q, kᵀ, v and output, a prologue of float32 add/sub/mul/div/neg/where/cast and bool
 * logical_not/cast over the scores and float32/bool loads. The products are the exact kernel's
 * (matmul_entry, the same bits); the prologue runs in float32 one op at a time over a whole row
 * (+ − · / of float32 values rounded to float32 equal the exact kernel's double-then-round, so the
 * softmax input has its bits); the softmax is rows_f32.c's softmax_row_f32x (float32
 * exponentials, SOFTMAX_X_CONTRACT) instead of the exact kernel's double rows and libm exp.
 */
static void att_entries_f32x(void *vc, int64_t b0, int64_t b1) {
  att_ctx *C = vc;
  const loom_instr *I = C->I;
  const prog_t *P = C->P;
  int64_t L = C->L, S = C->S, pad = LOOM_PAD(S);
  float *regs = loom_scratch(SCR_T0, (size_t)P->nregs * pad * 4);
  float *sc = loom_scratch(SCR_T5, (size_t)(2 * L * S) * 4), *pm = sc + L * S;
  float *e = loom_scratch(SCR_T6, (size_t)pad * 4);
  const float *rp[64];
  int lk[LOOM_MAXCODE > 2048 ? 2048 : LOOM_MAXCODE]; /* code index -> load index (C->lcode) */
  for (int k = 0; k < C->nl; k++) lk[C->lcode[k]] = k;
  int nd = P->nd;
  for (int64_t bi = b0; bi < b1; bi++) {
    int64_t base[256];
    tdesc vm;
    att_scores(C, bi, DT_F32, sc, &vm, base);
    for (int64_t i = 0; i < L; i++) {
      for (int k = 0; k < P->ncode; k++) {
        const pcode *c = &P->code[k];
        float *own = regs + (size_t)c->dst * pad;
        if (c->kind == PC_ACC) { rp[c->dst] = sc + i * S; continue; }
        if (c->kind == PC_LOAD || c->kind == PC_CONST) {
          int64_t at = base[lk[k]] + i * (int64_t)c->st[nd - 2];
          rp[c->dst] = load_row_f32(&I->in[c->input], at, (int64_t)c->st[nd - 1], own, S);
          continue;
        }
        prologue_op_f32(c, rp[c->a], rp[c->b], rp[c->c], own, S);
        rp[c->dst] = own;
      }
      softmax_row_f32x(rp[P->code[P->out].dst], pm + i * S, e, S);
    }
    att_output(C, bi, DT_F32, pm, &vm);
  }
}

/** Set up C for program P of instruction I (both kernels); 0 with the error set when it does not fit. */
static int att_setup(const loom_instr *I, att_ctx *C, const prog_t *P);

int k_fused_attention_f32x(const loom_instr *I) {
  pcode *S = loom_scratch(SCR_K0, sizeof(pcode) * LOOM_MAXCODE);
  att_ctx *C = loom_scratch(SCR_K1, sizeof(att_ctx));
  prog_t P;
  if (!prog_parse(I->attr, I->attr + I->nattr, &P, S, I->nin) || P.nd < 2 || P.nregs > 64 || P.ncode > 2048) {
    loom_set_error("fused_attention_f32x: bad program");
    return 1;
  }
  if (I->out.dt != DT_F32 || I->in[0].dt != DT_F32 || I->in[1].dt != DT_F32 || I->in[2].dt != DT_F32) {
    loom_set_error("fused_attention_f32x: float32 operands only");
    return 1;
  }
  for (int k = 0; k < P.ncode; k++) {
    const pcode *c = &P.code[k];
    int any = c->op == OP_cast || c->op == OP_contiguous;
    int ok = c->kind == PC_ACC ||
             (c->kind == PC_LOAD || c->kind == PC_CONST
                  ? (I->in[c->input].dt == DT_F32 || I->in[c->input].dt == DT_BOOL)
                  : c->kind == PC_OP && ((c->dt == DT_F32 && (any || c->op == OP_add || c->op == OP_sub || c->op == OP_mul ||
                                                              c->op == OP_div || c->op == OP_neg || c->op == OP_where)) ||
                                         (c->dt == DT_BOOL && (any || c->op == OP_logical_not))));
    if (!ok) { loom_set_error("fused_attention_f32x: prologue code %d not supported", k); return 1; }
  }
  if (!att_setup(I, C, &P)) return 1;
  if (C->nbatch == 0 || C->L == 0) return 0;
  if (C->S == 0) { /* softmax over nothing, then an empty product: zeros */
    memset((float *)I->out.p + I->out.off, 0, (size_t)t_numel(&I->out) * 4);
    return 0;
  }
  loom_parallel_for(C->nbatch, 1, att_entries_f32x, C);
  return 0;
}

/**
 * fused_attention: inputs [q, kᵀ, v, ...loads]; attrs = prologue over the scores [..., L, S]
 * (ACC = q·kᵀ). Per batch entry: scores by GEMM, the prologue and softmax per row, P·v by GEMM.
 */
int k_fused_attention(const loom_instr *I) {
  pcode *S = loom_scratch(SCR_K0, sizeof(pcode) * LOOM_MAXCODE);
  att_ctx *C = loom_scratch(SCR_K1, sizeof(att_ctx));
  prog_t P;
  if (!prog_parse(I->attr, I->attr + I->nattr, &P, S, I->nin) || P.nd < 2) { loom_set_error("fused_attention: bad program"); return 1; }
  if (!att_setup(I, C, &P)) return 1;
  if (C->nbatch == 0 || C->L == 0) return 0;
  if (C->S == 0) { /* softmax over nothing, then an empty product: zeros */
    tdesc o = I->out;
    double z[LOOM_BLOCK] = {0};
    int64_t n = t_numel(&o);
    for (int64_t j = 0; j < n; j += LOOM_BLOCK) store_block(o.p, o.dt, o.off + j, 1, z, (int)(n - j < LOOM_BLOCK ? n - j : LOOM_BLOCK));
    return 0;
  }
  loom_parallel_for(C->nbatch, 1, att_entries, C);
  return 0;
}

static int att_setup(const loom_instr *I, att_ctx *C, const prog_t *P) {
  const tdesc *q = &I->in[0], *kt = &I->in[1], *v = &I->in[2];
  C->I = I;
  C->P = P;
  C->D = I->out.dt;
  C->nb = P->nd - 2;
  C->L = P->shape[P->nd - 2];
  C->S = P->shape[P->nd - 1];
  C->E = q->shape[q->nd - 1];
  C->Ev = v->shape[v->nd - 1];
  C->nbatch = 1;
  for (int d = 0; d < C->nb; d++) { C->bshape[d] = P->shape[d]; C->nbatch *= P->shape[d]; }
  batch_strides(q, C->nb, C->bshape, C->sq);
  batch_strides(kt, C->nb, C->bshape, C->sk);
  batch_strides(v, C->nb, C->bshape, C->sv);
  C->nl = 0;
  for (int k = 0; k < P->ncode; k++) {
    if (P->code[k].kind != PC_LOAD && P->code[k].kind != PC_CONST) continue;
    if (C->nl == 256) { loom_set_error("fused_attention: too many loads"); return 0; }
    C->lbase[C->nl] = I->in[P->code[k].input].off + P->code[k].off;
    C->lcode[C->nl++] = k;
  }
  return 1;
}
