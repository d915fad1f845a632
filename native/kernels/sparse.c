/*
 * spmm (src/graph/ops/spmm.ts): y = x Wᵀ, W [N, K] in CSR (crow [N + 1], col [nnz], values
 * [nnz]; row [nnz] is the gradient's, unread here). y[m, n] = Σ_p values[p]·x[m, col[p]] over
 * row n's non-zeros, summed in double in p order and rounded once, as the reference does, so the
 * two give the same bits. The pool splits the N rows of W; each task reads its rows' non-zeros
 * once per row of x (a decode step has one).
 */
#include "common.h"

typedef struct {
  const tdesc *x, *col, *val;
  const int64_t *crow; /* N + 1 entries, checked */
  tdesc out;
  int64_t M, N, K;
  int fast; /* float32 x/values/out with unit strides, int32 col, contiguous */
} spmm_ctx;

/** Storage offset of row m of x [..., K] (the first nd - 1 dims flattened). */
static inline int64_t row_offset(const tdesc *x, int64_t m) {
  int64_t base = x->off;
  for (int d = x->nd - 2; d >= 0; d--) {
    base += (m % x->shape[d]) * x->st[d];
    m /= x->shape[d];
  }
  return base;
}

static inline int64_t idx_at(const tdesc *t, int64_t i) {
  return (int64_t)load1(t->p, t->dt, t->off + i * t->st[0]);
}

static void spmm_rows(void *vctx, int64_t n0, int64_t n1) {
  const spmm_ctx *C = vctx;
  const tdesc *x = C->x;
  int64_t K = C->K, N = C->N;
  /* columns in range: checked for this task's rows before any product */
  for (int64_t p = C->crow[n0]; p < C->crow[n1]; p++) {
    int64_t c = idx_at(C->col, p);
    if (c < 0 || c >= K) { loom_set_error("[spmm] col_indices[%lld] = %lld is out of bounds for K = %lld", (long long)p, (long long)c, (long long)K); return; }
  }
  for (int64_t m = 0; m < C->M; m++) {
    int64_t xo = row_offset(x, m), xs = x->st[x->nd - 1];
    if (C->fast) {
      const float *xr = (const float *)x->p + xo;
      const int32_t *cc = (const int32_t *)C->col->p + C->col->off;
      const float *vv = (const float *)C->val->p + C->val->off;
      float *yr = (float *)C->out.p + C->out.off + m * N;
      for (int64_t n = n0; n < n1; n++) {
        double s = 0;
        for (int64_t p = C->crow[n]; p < C->crow[n + 1]; p++) s += (double)vv[p] * (double)xr[cc[p]];
        yr[n] = (float)s;
      }
    } else {
      for (int64_t n = n0; n < n1; n++) {
        double s = 0;
        for (int64_t p = C->crow[n]; p < C->crow[n + 1]; p++) {
          double v = load1(C->val->p, C->val->dt, C->val->off + p * C->val->st[0]);
          s += v * load1(x->p, x->dt, xo + idx_at(C->col, p) * xs);
        }
        store1(C->out.p, C->out.dt, C->out.off + m * N + n, s);
      }
    }
  }
}

/** inputs [x [..., K], crow [N + 1], col [nnz], values [nnz], row [nnz]]; out [..., N]. */
int k_spmm(const loom_instr *I) {
  const tdesc *x = &I->in[0], *cr = &I->in[1], *col = &I->in[2], *val = &I->in[3];
  int64_t K = x->shape[x->nd - 1], N = cr->shape[0] - 1, nnz = col->shape[0];
  int64_t M = N > 0 ? t_numel(&I->out) / N : 0;
  int64_t *crow = loom_scratch(SCR_K0, sizeof(int64_t) * (size_t)(N + 1));
  for (int64_t n = 0; n <= N; n++) {
    crow[n] = idx_at(cr, n);
    int bad = (n == 0 && crow[0] != 0) || (n > 0 && crow[n] < crow[n - 1]) || crow[n] > nnz || (n == N && crow[N] != nnz);
    if (bad) { loom_set_error("[spmm] crow_indices[%lld] = %lld is out of bounds: crow_indices must rise from 0 to nnz = %lld", (long long)n, (long long)crow[n], (long long)nnz); return 1; }
  }
  if (M == 0 || N == 0) return 0;
  spmm_ctx C = {x, col, val, crow, I->out, M, N, K, 0};
  C.fast = x->dt == DT_F32 && val->dt == DT_F32 && I->out.dt == DT_F32 && col->dt == DT_I32 &&
           x->st[x->nd - 1] == 1 && val->st[0] == 1 && col->st[0] == 1;
  /* grain: about 16k multiply-adds per task */
  int64_t per_row = (nnz / N + 1) * M;
  loom_parallel_for(N, 16384 / per_row + 1, spmm_rows, &C);
  return 0;
}
