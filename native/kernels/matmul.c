/*
 * matmul (batched, broadcast batch dims), matmul with a fused elementwise epilogue, and LoRA
 * linear (registry lora_linear and the compiler's fused_lora_linear: one kernel).
 *
 * float32/float64 operands go to sgemm/dgemm directly when their strides are a (possibly
 * transposed) row-major matrix, else they are packed first (into per-thread scratch). Other dtypes
 * (integers, halves) are converted to double, multiplied in double (exact for integers below
 * 2^53, as the reference) and rounded on store. GEMM accumulates in the operands' precision, so
 * float32 results agree with the reference (double accumulation) within float32 rounding of the
 * dot products. Every product here goes through `matmul_into`, the eager matmul's own schedule,
 * so fused kernels reproduce the unfused matmuls bit for bit.
 */
#include <stdlib.h>

#include "common.h"
#include "vec.h"

/** A matrix operand as BLAS sees it. */
typedef struct {
  const char *p;   /* first element */
  int64_t ld;
  int trans;
} mat;

/** View rows×cols at element offset `off` with strides (rs, cs) as a BLAS operand, packing into scratch `slot` if needed. */
static mat as_mat(const tdesc *t, int64_t off, int64_t rows, int64_t cols, int64_t rs, int64_t cs, int dt, int slot) {
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
  char *buf = loom_scratch(slot, (size_t)(rows * cols > 0 ? rows * cols : 1) * es);
  if (dt == DT_F32 && (t->dt == DT_BF16 || t->dt == DT_F16)) {
    /* halves widened straight to float32 (exact; the branch-free conversion vectorizes) */
    const uint16_t *h = (const uint16_t *)t->p;
    float *f = (float *)buf;
    for (int64_t i = 0; i < rows; i++) {
      const uint16_t *r = h + off + i * rs;
      float *d = f + i * cols;
      if (t->dt == DT_BF16)
        for (int64_t j = 0; j < cols; j++) d[j] = bf16_to_f32(r[j * cs]);
      else
        for (int64_t j = 0; j < cols; j++) d[j] = f16_to_f32_bf(r[j * cs]);
    }
    m.p = buf; m.ld = cols > 1 ? cols : 1;
    return m;
  }
  double row[LOOM_BLOCK];
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j += LOOM_BLOCK) {
      int n = (int)(cols - j < LOOM_BLOCK ? cols - j : LOOM_BLOCK);
      load_block(row, t->p, t->dt, off + i * rs + j * cs, cs, n);
      store_block(buf, dt, i * cols + j, 1, row, n);
    }
  m.p = buf; m.ld = cols > 1 ? cols : 1;
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

/*
 * Threading: every product is cut into blocks of C by mm_setup from its shape and the pool's
 * thread count alone (never from timing or load), and each block is one single-threaded GEMM
 * call on a Loom pool thread: OpenBLAS never starts threads of its own, so no second pool spins
 * against Loom's. Column (or row) blocks give the same bits as one call: each element's K loop,
 * and OpenBLAS's K blocking, are the same.
 */
typedef struct {
  const tdesc *a, *b, *o;
  int64_t M, N, K, nbatch, chunks, csize;
  int split_n, dt; /* compute dtype: F32 or F64 */
  int nbd;
  int64_t bshape[LOOM_MAXD], sa[LOOM_MAXD], sb[LOOM_MAXD];
} mm_ctx;

static void mm_tasks(void *vc, int64_t t0, int64_t t1) {
  mm_ctx *C = vc;
  const tdesc *a = C->a, *b = C->b, *o = C->o;
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
    int64_t c0 = ch * C->csize, c1 = c0 + C->csize;
    int64_t lim = C->split_n ? N : M;
    if (c1 > lim) c1 = lim;
    int64_t m = C->split_n ? M : c1 - c0, n = C->split_n ? c1 - c0 : N;
    /* this block's rows of A (or columns of B) only: an operand that must be packed is packed
     * block by block, not whole in every task */
    int64_t ars = a->st[a->nd - 2], acs = a->st[a->nd - 1], brs = b->st[b->nd - 2], bcs = b->st[b->nd - 1];
    mat As = as_mat(a, ao + (C->split_n ? 0 : c0 * ars), m, K, ars, acs, C->dt, SCR_T2);
    mat Bs = as_mat(b, bo + (C->split_n ? c0 * bcs : 0), K, n, brs, bcs, C->dt, SCR_T3);
    int64_t coff = bi * M * N + (C->split_n ? c0 : c0 * N);
    if (direct) {
      /* a block of a millisecond or more checks whether its thread was descheduled meanwhile
       * (the pool's own check covers only jobs of many chunks): the oversubscription signal
       * that makes the pool's waits sleep instead of spin (shim.c) */
      int timed = 2.0 * m * n * K >= 1e7;
      loom_span w = timed ? loom_span_start() : (loom_span){0, 0};
      gemm_dt(C->dt, &As, &Bs, m, n, K, 1, 0, o->p + (o->off + coff) * es, N);
      if (timed) loom_span_check(w);
    } else if (C->dt == DT_F32) {
      /* half operands accumulated in float32 (matmul_f32acc): products of halves are exact in
       * float32, one rounding to the output dtype per element */
      float *tmp = loom_scratch(SCR_T4, sizeof(float) * (size_t)(m * n > 0 ? m * n : 1));
      gemm_dt(DT_F32, &As, &Bs, m, n, K, 1, 0, (char *)tmp, n);
      uint16_t *y = (uint16_t *)o->p + o->off + coff;
      for (int64_t i = 0; i < m; i++) {
        const float *r = tmp + i * n;
        uint16_t *d = y + i * N;
        if (o->dt == DT_BF16)
          for (int64_t j = 0; j < n; j++) d[j] = f32_to_bf16_bf(r[j]);
        else
          for (int64_t j = 0; j < n; j++) d[j] = f32_to_f16_bf(r[j]);
      }
    } else {
      double *tmp = loom_scratch(SCR_T4, sizeof(double) * (size_t)(m * n > 0 ? m * n : 1));
      gemm_dt(DT_F64, &As, &Bs, m, n, K, 1, 0, (char *)tmp, n);
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j += LOOM_BLOCK) {
          int w = (int)(n - j < LOOM_BLOCK ? n - j : LOOM_BLOCK);
          store_block(o->p, o->dt, o->off + coff + i * N + j, 1, tmp + i * n + j, w);
        }
    }
  }
}

/**
 * A product with one row or one column (decoding's x·W) streams its matrix once, 2 flops per
 * element read: memory-bound, so it is split across the pool from this many matrix bytes on, far
 * below the flop threshold of real GEMMs. 24 decode-size GEMVs (57 MB): 16.7 -> 20.6 GB/s.
 */
#define GEMV_SPLIT_BYTES 262144.0

/** Matrix bytes a one-row / one-column product streams (0 for other products). */
static double mm_streams(const mm_ctx *C) {
  if (C->M != 1 && C->N != 1) return 0;
  return (double)C->K * (double)(C->M == 1 ? C->N : C->M) * dt_size(C->dt);
}

/** Batch layout and the column/row chunking of a product (the same for every caller). */
static void mm_setup(mm_ctx *C, const tdesc *a, const tdesc *b, const tdesc *o, int64_t nbatch_sched) {
  C->a = a;
  C->b = b;
  C->o = o;
  C->M = o->shape[o->nd - 2];
  C->N = o->shape[o->nd - 1];
  C->K = a->shape[a->nd - 1];
  C->dt = (a->dt == DT_F32 && b->dt == DT_F32 && o->dt == DT_F32) ? DT_F32 : DT_F64;
  C->nbd = o->nd - 2;
  C->nbatch = 1;
  for (int d = 0; d < C->nbd; d++) {
    C->bshape[d] = o->shape[d];
    C->nbatch *= o->shape[d];
    int da = d - (o->nd - a->nd), db = d - (o->nd - b->nd);
    C->sa[d] = (da < 0 || a->shape[da] == 1) ? 0 : a->st[da];
    C->sb[d] = (db < 0 || b->shape[db] == 1) ? 0 : b->st[db];
  }
  if (nbatch_sched < 0) nbatch_sched = C->nbatch;
  double flops = 2.0 * C->M * C->N * C->K;
  int nt = loom_nthreads();
  C->split_n = C->N >= C->M;
  int64_t len = C->split_n ? C->N : C->M;
  C->chunks = 1;
  /* one block per thread: as fast as OpenBLAS's own 2-thread split on [512]², [1024]² and
   * 64×4096×4096 (2 blocks per thread were up to 5% slower: each block packs all of A again) */
  if (nbatch_sched < nt && (flops * nbatch_sched > 4e6 || mm_streams(C) * nbatch_sched >= GEMV_SPLIT_BYTES))
    C->chunks = (nt + nbatch_sched - 1) / nbatch_sched;
  C->csize = (len + C->chunks - 1) / C->chunks;
  /* blocks of whole SIMD/micro-kernel widths: OpenBLAS's row-major N is its column-major M,
   * packed and computed in panels of 16 (SkylakeX/Haswell sgemm unroll) */
  if (C->chunks > 1 && C->csize >= 16) C->csize = (C->csize + 15) / 16 * 16;
  if (C->csize < 1) C->csize = 1;
  C->chunks = (len + C->csize - 1) / C->csize;
  /* no block of fewer than 16 columns (or rows) cut off a larger product: blas.c gives products
   * of 16 columns or more to sgemm.c and narrower ones to BLAS, and one row times a transposed B
   * to BLAS's gemv, whose orders differ, so such a block would make the bits depend on the
   * thread count */
  while (C->chunks > 1 && len - (C->chunks - 1) * C->csize < 16) {
    C->chunks--;
    C->csize = (len + C->chunks - 1) / C->chunks;
    if (C->chunks > 1) C->csize = (C->csize + 15) / 16 * 16;
    C->chunks = (len + C->csize - 1) / C->csize;
  }
}

void matmul_entry(const tdesc *a, const tdesc *b, const tdesc *o, int64_t nbatch) {
  mm_ctx C;
  mm_setup(&C, a, b, o, nbatch);
  if (C.nbatch == 0 || C.M == 0 || C.N == 0) return;
  mm_tasks(&C, 0, C.nbatch * C.chunks);
}

/*
 * A float32 one-row product x·B (decoding) split over K instead of N: each task streams a block of
 * GEMV_KB whole rows of B (sequential memory, the fastest read) into its own partial row, and the
 * partials are added in block order. Splitting the columns instead had each thread read half of
 * every row: on the W7 decode matrices with 2 threads that was slower than one thread. The blocks
 * are fixed by K alone, so the bits do not depend on the thread count; eager and lazy products
 * both come here (matmul_into), so they agree.
 */
/* 64 rows: W7's K = 384 (18 of its 24 decode matrices) is 6 blocks, an even share for 2, 3 or 6
 * threads (128 gave 3 blocks: 2 on one thread, 1 on the other); the partial rows stay in L2 */
#define GEMV_KB 64
typedef struct {
  const float *x, *B;
  int64_t incx, ldb, K, N;
  float *parts;
} gemv_ctx;

static void gemv_blocks(void *vc, int64_t b0, int64_t b1) {
  gemv_ctx *G = vc;
  for (int64_t b = b0; b < b1; b++) {
    int64_t k0 = b * GEMV_KB, kn = G->K - k0 < GEMV_KB ? G->K - k0 : GEMV_KB;
    loom_sgemv_rows(kn, G->N, G->x + k0 * G->incx, G->incx, G->B + k0 * G->ldb, G->ldb, G->parts + b * G->N);
  }
}

/** The partial rows of gemv_krows (the kernel thread's, grow-only: no malloc per product). */
static _Thread_local float *gemv_parts;
static _Thread_local size_t gemv_cap;

/** x·B as above when the operands allow it (float32, one row, B with unit column stride); 1 when done. */
static int gemv_krows(const mm_ctx *C) {
  const tdesc *a = C->a, *b = C->b, *o = C->o;
  if (C->M != 1 || C->nbatch != 1 || C->K < 1 || a->dt != DT_F32 || b->dt != DT_F32 || o->dt != DT_F32) return 0;
  if (b->st[b->nd - 1] != 1 || b->st[b->nd - 2] < C->N || o->st[o->nd - 1] != 1) return 0;
  if (!loom_sgemv_rows(0, 0, NULL, 0, NULL, 0, NULL)) return 0;
  int64_t nblk = (C->K + GEMV_KB - 1) / GEMV_KB;
  size_t need = (size_t)(nblk * C->N) * sizeof(float);
  if (need > gemv_cap) {
    float *p = realloc(gemv_parts, need);
    if (!p) return 0;
    gemv_parts = p;
    gemv_cap = need;
  }
  gemv_ctx G = {(const float *)a->p + a->off, (const float *)b->p + b->off, a->st[a->nd - 1], b->st[b->nd - 2], C->K, C->N, gemv_parts};
  int64_t grain = mm_streams(C) >= GEMV_SPLIT_BYTES ? 1 : nblk;
  loom_parallel_for(nblk, grain, gemv_blocks, &G);
  float *y = (float *)o->p + o->off;
  const float *p = gemv_parts;
  memcpy(y, p, (size_t)C->N * sizeof(float));
  for (int64_t q = 1; q < nblk; q++) /* y[j] = ((p0 + p1) + p2) + ...: block order, per element */
    for (int64_t j = 0; j < C->N; j++) y[j] += p[q * C->N + j];
  return 1;
}

/** o = a @ b; `f32acc`: half operands and output multiplied in float32 (matmul_f32acc) instead of double. */
static int matmul_run(const tdesc *a, const tdesc *b, const tdesc *o, int f32acc) {
  mm_ctx C;
  mm_setup(&C, a, b, o, -1);
  if (f32acc) C.dt = DT_F32;
  if (C.nbatch == 0 || C.M == 0 || C.N == 0) return 0;
  if (gemv_krows(&C)) return 0;
  double flops = 2.0 * C.M * C.N * C.K;
  int64_t tasks = C.nbatch * C.chunks;
  int64_t grain = flops < 4e6 ? (int64_t)(4e6 / (flops + 1)) + 1 : 1;
  if (mm_streams(&C) >= GEMV_SPLIT_BYTES) grain = 1;
  loom_parallel_for(tasks, grain, mm_tasks, &C);
  return 0;
}

int matmul_into(const tdesc *a, const tdesc *b, const tdesc *o) { return matmul_run(a, b, o, 0); }

/** a [..., M, K] @ b [..., K, N] -> out [..., M, N] (dense). */
int k_matmul(const loom_instr *I) { return matmul_into(&I->in[0], &I->in[1], &I->out); }

/**
 * matmul_f32acc (native-only, catalog implementation native.matmul.f32acc): float16/bfloat16
 * operands and output, products accumulated by sgemm in float32 and rounded once to the output
 * dtype, as torch's CPU half matmul (oneDNN) accumulates, instead of the exact kernel's dgemm.
 * Its error bound is derived in src/backends/native/half_matmul.ts.
 */
int k_matmul_f32acc(const loom_instr *I) {
  int dt = I->out.dt;
  if ((dt != DT_F16 && dt != DT_BF16) || I->in[0].dt != dt || I->in[1].dt != dt) {
    loom_set_error("matmul_f32acc: operands and output must share one half dtype");
    return 1;
  }
  return matmul_run(&I->in[0], &I->in[1], &I->out, 1);
}

/**
 * fused_matmul: attrs = [product dtype, nd, product shape..., epilogue]; inputs [a, b, ...loads].
 * The product goes into the output itself when the dtypes agree (the epilogue reads each element
 * before its tile overwrites it), else into scratch.
 */
int k_fused_matmul(const loom_instr *I) {
  const double *w = I->attr, *end = I->attr + I->nattr;
  int pdt = (int)w[0], nd = (int)w[1];
  if (nd < 2 || nd > LOOM_MAXD) { loom_set_error("fused_matmul: bad attrs"); return 1; }
  int64_t shape[LOOM_MAXD], n = 1;
  for (int d = 0; d < nd; d++) { shape[d] = (int64_t)w[2 + d]; n *= shape[d]; }
  w += 2 + nd;
  pcode *S = loom_scratch(SCR_K0, sizeof(pcode) * LOOM_MAXCODE);
  prog_t epi;
  if (!prog_parse(w, end, &epi, S, I->nin)) { loom_set_error("fused_matmul: bad program"); return 1; }
  int inplace = pdt == I->out.dt && I->out.off == 0;
  void *p = inplace ? I->out.p : loom_scratch(SCR_K1, (size_t)(n > 0 ? n : 1) * dt_size(pdt));
  tdesc prod = dense_desc(p, pdt, nd, shape);
  if (matmul_into(&I->in[0], &I->in[1], &prod)) return 1;
  return prog_run(&epi, I->in, &I->out, (const char *)p, pdt);
}

/* ---- LoRA linear -------------------------------------------------------------------------------- */
/** The transposed view of a 2-D operand (W [out, in] -> Wᵀ [in, out]). */
static tdesc transposed(const tdesc *t) {
  tdesc v = *t;
  v.shape[0] = t->shape[1]; v.shape[1] = t->shape[0];
  v.st[0] = t->st[1]; v.st[1] = t->st[0];
  return v;
}

typedef struct {
  const char *Y, *Dl, *bias;
  int dt, bdt;
  int64_t N, bst;
  double s;
  char *out;
  int odt;
  int has_bias;
} lora_ctx;

/** out = R(R(Y + b) + R(Dl · s)) row by row (R: rounding to the dtype, as the unfused ops store). */
static void lora_rows(void *vc, int64_t r0, int64_t r1) {
  lora_ctx *C = vc;
  double y[LOOM_BLOCK], d[LOOM_BLOCK], b[LOOM_BLOCK];
  for (int64_t r = r0; r < r1; r++) {
    for (int64_t j = 0; j < C->N; j += LOOM_BLOCK) {
      int n = (int)(C->N - j < LOOM_BLOCK ? C->N - j : LOOM_BLOCK);
      int64_t at = r * C->N + j;
      load_block(y, C->Y, C->dt, at, 1, n);
      load_block(d, C->Dl, C->dt, at, 1, n);
      for (int i = 0; i < n; i++) d[i] = d[i] * C->s;
      round_block(d, C->dt, n);
      if (C->has_bias) {
        load_block(b, C->bias, C->bdt, j * C->bst, C->bst, n);
        for (int i = 0; i < n; i++) y[i] = y[i] + b[i];
        round_block(y, C->dt, n);
      }
      for (int i = 0; i < n; i++) y[i] = y[i] + d[i];
      store_block(C->out, C->odt, at, 1, y, n);
    }
  }
}

/* ---- lora_linear_f32 / fused_lora_linear_f32: the bounded float32 epilogue ------------------------- */
typedef struct {
  float *out;        /* dense [rows, N]: holds Y = x·Wᵀ on entry */
  const float *H;    /* dense [rows, r]: x·Aᵀ */
  const double *Bs;  /* dense [r, N]: Bᵀ·s in double */
  const float *bias; /* [N] with stride bst, or NULL */
  int64_t N, r, bst;
} lorafast_ctx;

/** One output element: fl32(y + b + Σ_t h[t]·Bs[t·N]) in double (the vector code's tail and fallback). */
static inline float lorafast_one(float y, const float *b, const float *h, const double *Bs, int64_t N, int64_t r) {
  double a = (double)y + (b ? (double)*b : 0.0);
  for (int64_t t = 0; t < r; t++) a = fma((double)h[t], Bs[t * N], a);
  return (float)a;
}

/**
 * out[i, j] = fl32(Y[i, j] + b[j] + Σ_t H[i, t]·Bs[t, j]) in double, rows r0..r1. The sum over t
 * stays in registers, four vectors of VD_W columns at a time (independent chains hide the FMA
 * latency). A row of accumulators in memory updated once per t, as the compiler vectorizes the
 * plain loops, took 1.4 ms on a [2048, 1152] output; the outer-vectorized plain loop 6 ms.
 */
static void lorafast_rows(void *vc, int64_t r0, int64_t r1) {
  const lorafast_ctx *C = vc;
  const int64_t N = C->N, r = C->r, bst = C->bst;
  const double *Bs = C->Bs;
  for (int64_t i = r0; i < r1; i++) {
    float *y = C->out + i * N;
    const float *h = C->H + i * r;
    int64_t j = 0;
#ifdef VD_W /* VD_W-lane double vectors: the same operations at either width (vec.h), the same bits */
    if (!C->bias || bst == 1) {
      for (; j + 4 * VD_W <= N; j += 4 * VD_W) {
        vd a[4];
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
          a[q] = vd_load_ps(y + j + q * VD_W);
          if (C->bias) a[q] = vd_add(a[q], vd_load_ps(C->bias + j + q * VD_W));
        }
        for (int64_t t = 0; t < r; t++) {
          const double *bs = Bs + t * N + j;
          const vd ht = vd_set1((double)h[t]);
#pragma GCC unroll 4
          for (int q = 0; q < 4; q++) a[q] = vd_fma(ht, vd_loadu(bs + q * VD_W), a[q]);
        }
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) vd_store_ps(y + j + q * VD_W, a[q]);
      }
    }
#endif
    for (; j < N; j++) y[j] = lorafast_one(y[j], C->bias ? C->bias + j * bst : NULL, h, Bs + j, N, r);
  }
}

/**
 * The float32 epilogue of lora_linear_f32 (catalog native.lora_linear.f32, contract derived in
 * src/backends/native/lora.ts): with Y = x·Wᵀ already in `out` and H = x·Aᵀ (both the exact
 * kernel's products), out = fl32(Y + b + Σ_t H[:, t]·(Bᵀ[t, :]·s)) evaluated in double and rounded
 * once, in one pass over out. The exact kernel instead writes the rank-r product H·Bᵀ to a scratch
 * matrix (a K = r GEMM, memory-bound) and adds it in a second pass with the unfused ops' roundings:
 * on [2048, 384]·[1152, 384]ᵀ with r 8 and a bias, 11.2 ms in all against 10.5 ms with this.
 */
static void lora_fast_epilogue(const tdesc *out, const tdesc *H, const tdesc *Bt, const tdesc *bias, double s) {
  int64_t N = out->shape[out->nd - 1], r = H->shape[H->nd - 1], rows = t_numel(out) / N;
  double *Bs = loom_scratch(SCR_K2, (size_t)(r * N > 0 ? r * N : 1) * 8);
  const float *bp = (const float *)Bt->p + Bt->off;
  for (int64_t t = 0; t < r; t++)
    for (int64_t j = 0; j < N; j++) Bs[t * N + j] = (double)bp[t * Bt->st[0] + j * Bt->st[1]] * s;
  lorafast_ctx C = {(float *)out->p + out->off, (const float *)H->p, Bs,
                    bias ? (const float *)bias->p + bias->off : NULL, N, r, bias ? bias->st[0] : 0};
  loom_parallel_for(rows, 16384 / (N * (r + 2)) + 1, lorafast_rows, &C);
}

/**
 * lora_linear: inputs [x, W, A, B(, b)], attrs [scaling, has_bias];
 * fused_lora_linear: inputs [x, Wᵀ, Aᵀ, Bᵀ, s(, b)], attrs [has_bias] (s a 0-d tensor).
 * Both compute the decomposition (x Wᵀ [+ b]) + ((x Aᵀ) Bᵀ)·s with each product and sum rounded
 * as its own op (src/graph/ops/lora.ts): the three products through matmul_into (x Wᵀ straight
 * into the output), then one pass adding the bias and the scaled low-rank update.
 * lora_linear_f32 / fused_lora_linear_f32 (float32 only): the first two products, then
 * lora_fast_epilogue instead of the third product and the rounding pass.
 */
int k_lora_linear(const loom_instr *I) {
  int fast = I->op == OP_lora_linear_f32 || I->op == OP_fused_lora_linear_f32;
  int fused = I->op == OP_fused_lora_linear || I->op == OP_fused_lora_linear_f32;
  const tdesc *o = &I->out;
  tdesc x = I->in[0];
  tdesc Wt = fused ? I->in[1] : transposed(&I->in[1]);
  tdesc At = fused ? I->in[2] : transposed(&I->in[2]);
  tdesc Bt = fused ? I->in[3] : transposed(&I->in[3]);
  int has_bias = fused ? I->attr[0] != 0 : I->attr[1] != 0;
  const tdesc *bias = has_bias ? &I->in[fused ? 5 : 4] : NULL;
  int D = o->dt;
  double s = fused ? load1(I->in[4].p, I->in[4].dt, I->in[4].off) : I->attr[0];
  if (!fused) { double t[1] = {s}; round_block(t, D, 1); s = t[0]; }
  if (fast) {
    int ok = D == DT_F32 && x.dt == DT_F32 && Wt.dt == DT_F32 && At.dt == DT_F32 && Bt.dt == DT_F32 && Bt.nd == 2 &&
             (!bias || (bias->dt == DT_F32 && bias->nd == 1));
    if (!ok) { loom_set_error("lora_linear_f32: operands, bias and output must be float32"); return 1; }
  }
  tdesc out = *o;
  if (x.nd == 1) { /* x [in] as [1, in] */
    x.nd = 2; x.shape[1] = x.shape[0]; x.st[1] = x.st[0]; x.shape[0] = 1; x.st[0] = 0;
    out.nd = 2; out.shape[1] = out.shape[0]; out.st[1] = out.st[0]; out.shape[0] = 1; out.st[0] = 0;
  }
  int64_t N = out.shape[out.nd - 1], r = At.shape[At.nd - 1], n = t_numel(&out);
  if (n == 0) return 0;
  int64_t hshape[LOOM_MAXD];
  for (int d = 0; d < out.nd; d++) hshape[d] = out.shape[d];
  hshape[out.nd - 1] = r;
  void *hp = loom_scratch(SCR_K1, (size_t)((n / N) * (r > 0 ? r : 1)) * dt_size(D));
  tdesc H = dense_desc(hp, D, out.nd, hshape);
  if (matmul_into(&x, &Wt, &out)) return 1;   /* Y = x Wᵀ, in the output */
  if (matmul_into(&x, &At, &H)) return 1;     /* H = x Aᵀ */
  if (fast) {
    lora_fast_epilogue(&out, &H, &Bt, bias, s);
    return 0;
  }
  void *dp = loom_scratch(SCR_K5, (size_t)n * dt_size(D));
  tdesc Dl = dense_desc(dp, D, out.nd, out.shape);
  if (matmul_into(&H, &Bt, &Dl)) return 1;    /* Dl = H Bᵀ */
  lora_ctx C = {o->p + (size_t)o->off * dt_size(D), dp, bias ? bias->p : NULL, D, bias ? bias->dt : 0, N,
                bias ? bias->st[0] : 0, s, o->p + (size_t)o->off * dt_size(o->dt), o->dt, has_bias};
  if (bias) C.bias = bias->p + (size_t)bias->off * dt_size(bias->dt);
  loom_parallel_for(n / N, 16384 / N + 1, lora_rows, &C);
  return 0;
}
