/*
 * matmul (batched, broadcast batch dims) and lora_linear (x Wᵀ + b + s·(x Aᵀ)Bᵀ as two GEMMs
 * into the same output, no W + s·B·A and no full-size intermediate).
 *
 * float32/float64 operands go to sgemm/dgemm directly when their strides are a (possibly
 * transposed) row-major matrix, else they are packed first. Other dtypes (integers, halves) are
 * converted to double, multiplied in double (exact for integers below 2^53, as the reference)
 * and rounded on store. GEMM accumulates in the operands' precision, so float32 results agree
 * with the reference (double accumulation) within float32 rounding of the dot products.
 */
#include <stdlib.h>

#include "common.h"

/** A matrix operand as BLAS sees it. */
typedef struct {
  const char *p;   /* first element */
  int64_t ld;
  int trans;
  void *owned;     /* packed copy to free */
} mat;

/** View rows×cols at element offset `off` with strides (rs, cs) as a BLAS operand, packing if needed. */
static mat as_mat(const tdesc *t, int64_t off, int64_t rows, int64_t cols, int64_t rs, int64_t cs, int dt) {
  mat m = {0};
  int es = dt_size(dt);
  if (t->dt == dt) {
    if (cs == 1 && (rs >= cols || rows <= 1)) {
      m.p = t->p + off * es; m.ld = rows <= 1 ? (cols > 1 ? cols : 1) : rs; return m;
    }
    if (rs == 1 && (cs >= rows || cols <= 1)) {
      m.p = t->p + off * es; m.ld = cols <= 1 ? (rows > 1 ? rows : 1) : cs; m.trans = 1; return m;
    }
  }
  char *buf = malloc((size_t)(rows * cols > 0 ? rows * cols : 1) * es);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) store1(buf, dt, i * cols + j, load1(t->p, t->dt, off + i * rs + j * cs));
  m.p = buf; m.ld = cols > 1 ? cols : 1; m.owned = buf;
  return m;
}

static void gemm_dt(int dt, const mat *a, const mat *b, int64_t M, int64_t N, int64_t K, double alpha, double beta,
                    char *c, int64_t ldc) {
  if (dt == DT_F32)
    loom_gemm_f32(a->trans, b->trans, M, N, K, (float)alpha, (const float *)a->p, a->ld, (const float *)b->p, b->ld,
                  (float)beta, (float *)c, ldc);
  else
    loom_gemm_f64(a->trans, b->trans, M, N, K, alpha, (const double *)a->p, a->ld, (const double *)b->p, b->ld, beta,
                  (double *)c, ldc);
}

/** Offset of a column block j0 (or row block i0) inside a BLAS operand. */
static mat shift(mat m, int64_t row0, int64_t col0, int es) {
  m.p += (m.trans ? row0 + col0 * m.ld : row0 * m.ld + col0) * es;
  m.owned = NULL;
  return m;
}

typedef struct {
  const loom_instr *I;
  int64_t M, N, K, nbatch, chunks, csize;
  int split_n, dt; /* compute dtype: F32 or F64 */
  int nbd;
  int64_t bshape[LOOM_MAXD], sa[LOOM_MAXD], sb[LOOM_MAXD];
} mm_ctx;

static void mm_tasks(void *vc, int64_t t0, int64_t t1) {
  mm_ctx *C = vc;
  const loom_instr *I = C->I;
  const tdesc *a = &I->in[0], *b = &I->in[1], *o = &I->out;
  int es = dt_size(C->dt);
  int direct = o->dt == C->dt;
  for (int64_t t = t0; t < t1; t++) {
    int64_t bi = t / C->chunks, ch = t % C->chunks;
    int64_t ao = a->off, bo = b->off, q = bi;
    for (int d = C->nbd - 1; d >= 0; d--) {
      int64_t i = q % C->bshape[d];
      q /= C->bshape[d];
      ao += i * C->sa[d];
      bo += i * C->sb[d];
    }
    int64_t M = C->M, N = C->N, K = C->K;
    mat A = as_mat(a, ao, M, K, a->st[a->nd - 2], a->st[a->nd - 1], C->dt);
    mat B = as_mat(b, bo, K, N, b->st[b->nd - 2], b->st[b->nd - 1], C->dt);
    int64_t c0 = ch * C->csize, c1 = c0 + C->csize;
    int64_t lim = C->split_n ? N : M;
    if (c1 > lim) c1 = lim;
    int64_t m = C->split_n ? M : c1 - c0, n = C->split_n ? c1 - c0 : N;
    mat As = C->split_n ? A : shift(A, c0, 0, es);
    mat Bs = C->split_n ? shift(B, 0, c0, es) : B;
    int64_t coff = bi * M * N + (C->split_n ? c0 : c0 * N);
    if (direct) {
      gemm_dt(C->dt, &As, &Bs, m, n, K, 1, 0, o->p + (o->off + coff) * es, N);
    } else {
      double *tmp = malloc(sizeof(double) * (m * n > 0 ? m * n : 1));
      gemm_dt(DT_F64, &As, &Bs, m, n, K, 1, 0, (char *)tmp, n);
      for (int64_t i = 0; i < m; i++) store_block(o->p, o->dt, o->off + coff + i * N, 1, tmp + i * n, (int)n);
      free(tmp);
    }
    free(A.owned);
    free(B.owned);
  }
}

/** a [..., M, K] @ b [..., K, N] -> out [..., M, N] (dense). */
int k_matmul(const loom_instr *I) {
  const tdesc *a = &I->in[0], *b = &I->in[1], *o = &I->out;
  mm_ctx C;
  C.I = I;
  C.M = o->shape[o->nd - 2];
  C.N = o->shape[o->nd - 1];
  C.K = a->shape[a->nd - 1];
  C.dt = (a->dt == DT_F32 && b->dt == DT_F32 && o->dt == DT_F32) ? DT_F32 : DT_F64;
  C.nbd = o->nd - 2;
  C.nbatch = 1;
  for (int d = 0; d < C.nbd; d++) {
    C.bshape[d] = o->shape[d];
    C.nbatch *= o->shape[d];
    int da = d - (o->nd - a->nd), db = d - (o->nd - b->nd);
    C.sa[d] = (da < 0 || a->shape[da] == 1) ? 0 : a->st[da];
    C.sb[d] = (db < 0 || b->shape[db] == 1) ? 0 : b->st[db];
  }
  if (C.nbatch == 0 || C.M == 0 || C.N == 0) return 0;
  /* split one big product over the pool by columns (or rows when N is small) */
  double flops = 2.0 * C.M * C.N * C.K;
  int nt = loom_nthreads();
  C.split_n = C.N >= C.M;
  int64_t len = C.split_n ? C.N : C.M;
  C.chunks = 1;
  if (C.nbatch < nt && flops * C.nbatch > 4e6) C.chunks = (nt + C.nbatch - 1) / C.nbatch;
  C.csize = (len + C.chunks - 1) / C.chunks;
  if (C.chunks > 1 && C.csize >= 16) C.csize = (C.csize + 15) / 16 * 16; /* keep SIMD-width column blocks */
  C.chunks = (len + C.csize - 1) / C.csize;
  int64_t tasks = C.nbatch * C.chunks;
  loom_parallel_for(tasks, flops < 4e6 ? (int64_t)(4e6 / (flops + 1)) + 1 : 1, mm_tasks, &C);
  return 0;
}

/* ---- lora_linear ------------------------------------------------------------------------------ */
typedef struct {
  const loom_instr *I;
  int64_t M, fin, fout, r, rows;
  int dt, has_bias;
  double scaling;
  mat X, W, A, B;
  char *H; /* [M, r] in dt */
} lora_ctx;

static void lora_rows(void *vc, int64_t i0, int64_t i1) {
  lora_ctx *C = vc;
  const loom_instr *I = C->I;
  const tdesc *o = &I->out;
  int es = dt_size(C->dt);
  int64_t m = i1 - i0;
  mat Xs = shift(C->X, i0, 0, es);
  int direct = o->dt == C->dt;
  char *Y = direct ? o->p + (o->off + i0 * C->fout) * es : malloc((size_t)(m * C->fout) * es);
  char *H = C->H + i0 * C->r * es;
  mat Hm = {H, C->r > 0 ? C->r : 1, 0, NULL};
  gemm_dt(C->dt, &Xs, &C->W, m, C->fout, C->fin, 1, 0, Y, C->fout);        /* Y = x Wᵀ */
  gemm_dt(C->dt, &Xs, &C->A, m, C->r, C->fin, 1, 0, H, C->r);              /* H = x Aᵀ */
  gemm_dt(C->dt, &Hm, &C->B, m, C->fout, C->r, C->scaling, 1, Y, C->fout); /* Y += s H Bᵀ */
  if (C->has_bias) {
    const tdesc *b = &I->in[4];
    double bias[LOOM_BLOCK];
    for (int64_t j0 = 0; j0 < C->fout; j0 += LOOM_BLOCK) {
      int n = (int)(C->fout - j0 < LOOM_BLOCK ? C->fout - j0 : LOOM_BLOCK);
      load_block(bias, b->p, b->dt, b->off + j0 * b->st[0], b->st[0], n);
      for (int64_t i = 0; i < m; i++) {
        if (C->dt == DT_F32) { float *y = (float *)Y + i * C->fout + j0; for (int j = 0; j < n; j++) y[j] += (float)bias[j]; }
        else { double *y = (double *)Y + i * C->fout + j0; for (int j = 0; j < n; j++) y[j] += bias[j]; }
      }
    }
  }
  if (!direct) {
    double row[LOOM_BLOCK];
    for (int64_t i = 0; i < m; i++)
      for (int64_t j0 = 0; j0 < C->fout; j0 += LOOM_BLOCK) {
        int n = (int)(C->fout - j0 < LOOM_BLOCK ? C->fout - j0 : LOOM_BLOCK);
        load_block(row, Y, C->dt, i * C->fout + j0, 1, n);
        store_block(o->p, o->dt, o->off + (i0 + i) * C->fout + j0, 1, row, n);
      }
    free(Y);
  }
}

/** inputs [x, W, A, B(, b)]; attrs = [scaling, has_bias]. */
int k_lora_linear(const loom_instr *I) {
  const tdesc *x = &I->in[0], *W = &I->in[1], *A = &I->in[2], *B = &I->in[3];
  lora_ctx C;
  C.I = I;
  C.scaling = I->attr[0];
  C.has_bias = I->attr[1] != 0;
  C.fin = x->shape[x->nd - 1];
  C.fout = W->shape[0];
  C.r = A->shape[0];
  C.M = C.fin > 0 ? t_numel(x) / C.fin : t_numel(&I->out) / (C.fout > 0 ? C.fout : 1);
  if (C.M == 0 || C.fout == 0) return 0;
  C.dt = x->dt == DT_F32 ? DT_F32 : DT_F64;
  int es = dt_size(C.dt);
  /* x as [M, fin]: dense rows when its leading dims collapse, else packed */
  tdesc xf = *x;
  int64_t *sp[1] = {xf.st};
  int nd = collapse_dims(x->nd - 1, xf.shape, 1, sp);
  int64_t xrs = nd == 1 ? xf.st[0] : -1;
  if (xrs < 0 || (C.M > 1 && x->nd > 1 && xf.shape[0] != C.M)) {
    /* leading dims not expressible with one row stride: pack x densely */
    char *buf = malloc((size_t)(C.M * C.fin > 0 ? C.M * C.fin : 1) * es);
    tdesc d = {buf, C.dt, x->nd, 0, {0}, {0}};
    int64_t s = 1;
    for (int i = x->nd - 1; i >= 0; i--) { d.shape[i] = x->shape[i]; d.st[i] = s; s *= x->shape[i]; }
    copy_strided(&d, x);
    C.X = (mat){buf, C.fin > 0 ? C.fin : 1, 0, buf};
  } else {
    C.X = as_mat(x, x->off, C.M, C.fin, xrs, x->st[x->nd - 1], C.dt);
  }
  C.W = as_mat(W, W->off, C.fin, C.fout, W->st[1], W->st[0], C.dt); /* Wᵀ [in, out] */
  C.A = as_mat(A, A->off, C.fin, C.r, A->st[1], A->st[0], C.dt);    /* Aᵀ [in, r] */
  C.B = as_mat(B, B->off, C.r, C.fout, B->st[1], B->st[0], C.dt);   /* Bᵀ [r, out] */
  C.H = malloc((size_t)(C.M * (C.r > 0 ? C.r : 1)) * es);
  double flops = 2.0 * C.M * C.fout * (C.fin + C.r);
  int nt = loom_nthreads();
  int64_t grain = flops < 4e6 ? C.M : (C.M + nt - 1) / nt;
  loom_parallel_for(C.M, grain, lora_rows, &C);
  free(C.H);
  free(C.X.owned);
  free(C.W.owned);
  free(C.A.owned);
  free(C.B.owned);
  return 0;
}
