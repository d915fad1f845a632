/*
 * Loom's own float32 GEMM for row-major C = A·B (neither operand transposed), AVX-512.
 *
 * Why: on the dev machine (Zen 4, AVX-512 on 256-bit units) OpenBLAS 0.3.21's SkylakeX sgemm
 * reaches 84-100 GFLOP/s per core on the products of the W-workloads (bench/roofline.c: the
 * fmadd peak is 116), and 72-84 with few rows (64×1024×1024). This kernel keeps an 8×32 tile of C
 * in 16 zmm registers and streams B's rows through it, one k at a time: 64×1024×1024 on two
 * threads in 0.70 ms against OpenBLAS's 0.88, and at parity or faster on the other shapes
 * measured (C harness, bench/native_results.md "session 9").
 *
 * Its numerics are fixed per element, whatever the shapes, tiles, blocks and threads: C[i][j]
 * is c = fl(A[i][0]·B[0][j]), then the fused multiply-add chain c = fma(A[i][k], B[k][j], c) over
 * k = 1, ..., K-1: the same chain as blas.c's one-row sgemv (the same bits, −0 included). A
 * product split into row or column blocks (the pool's chunks, a fused kernel's row blocks)
 * therefore gives the same bits as one call, as OpenBLAS's does. The error is the usual
 * recursive-summation bound, |C − A·B| ≤ K·2^-24·Σ_k|A[i][k]·B[k][j]| (first order).
 *
 * Blocking: k in blocks of KC (the partial sums are stored in C and reloaded, which rounds
 * nothing: they are float32 already); for each block, 32-column panels of B, copied to a packed
 * [KC][32] panel when B's rows are far apart (every k row on its own page otherwise: TLB misses
 * at 64×4096×4096 halved the speed), and for each panel every 8-row tile of A. Tails: a masked
 * last panel (N % 32 columns), and a last tile of fewer rows (M % 8).
 */
#include "common.h"

#ifdef __AVX512F__
#include <immintrin.h>

#define MR 8
#define NR 32
#define KC 512

/**
 * C[0..mr)[0..32) (masks m0/m1 for the two 16-column halves) for k in [0, kc): A rows at lda,
 * B panel rows at ldb. first: start the chain (else continue it from C's stored values).
 */
static inline __attribute__((always_inline)) void tile(int mr, int64_t kc, const float *A, int64_t lda, const float *B, int64_t ldb,
                                                       float *C, int64_t ldc, __mmask16 m0, __mmask16 m1, int first) {
  __m512 c0[MR], c1[MR];
  int64_t k = 0;
  if (first) { /* the chain starts with the rounded product (a mul, as the gemv: −0 stays −0) */
    __m512 w0 = _mm512_maskz_loadu_ps(m0, B), w1 = _mm512_maskz_loadu_ps(m1, B + 16);
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
      __m512 a = _mm512_set1_ps(A[i * lda]);
      c0[i] = _mm512_mul_ps(a, w0);
      c1[i] = _mm512_mul_ps(a, w1);
    }
    k = 1;
  } else {
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
      c0[i] = _mm512_maskz_loadu_ps(m0, C + i * ldc);
      c1[i] = _mm512_maskz_loadu_ps(m1, C + i * ldc + 16);
    }
  }
  for (; k < kc; k++) {
    __m512 w0 = _mm512_maskz_loadu_ps(m0, B + k * ldb), w1 = _mm512_maskz_loadu_ps(m1, B + k * ldb + 16);
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
      __m512 a = _mm512_set1_ps(A[i * lda + k]);
      c0[i] = _mm512_fmadd_ps(a, w0, c0[i]);
      c1[i] = _mm512_fmadd_ps(a, w1, c1[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < mr; i++) {
    _mm512_mask_storeu_ps(C + i * ldc, m0, c0[i]);
    _mm512_mask_storeu_ps(C + i * ldc + 16, m1, c1[i]);
  }
}

/** tile() with mr a compile-time constant (the row loops unrolled, no spills). */
static void tile_rows(int mr, int64_t kc, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc,
                      __mmask16 m0, __mmask16 m1, int first) {
  switch (mr) {
#define ROWS(r) case r: tile(r, kc, A, lda, B, ldb, C, ldc, m0, m1, first); break;
    ROWS(8) ROWS(7) ROWS(6) ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
#undef ROWS
    default: break;
  }
}

int loom_sgemm_nn(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 1;
  if (K <= 0) {
    for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
    return 1;
  }
  /* far-apart rows of B: copy each panel block to contiguous rows of 32 (rows 4 KiB apart or
   * more share cache sets). Measured: it pays from 8 KiB, and from 4 KiB with 128 rows or more
   * (64×1024×1024: 0.70 ms unpacked, 0.80 packed; 64×2048×2048: 4.2 and 3.3; 1024³: 11.8 and 10.7) */
  int64_t stride = ldb * (int64_t)sizeof(float);
  int pack = stride >= 8192 || (stride >= 4096 && M >= 128);
  float *panel = pack ? loom_scratch(SCR_GEMM, sizeof(float) * KC * NR) : NULL;
  for (int64_t k0 = 0; k0 < K; k0 += KC) {
    int64_t kc = K - k0 < KC ? K - k0 : KC;
    for (int64_t j = 0; j < N; j += NR) {
      int64_t nr = N - j < NR ? N - j : NR;
      __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1u);
      __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xFFFF : nr > 16 ? (1u << (nr - 16)) - 1u : 0);
      const float *Bp = B + k0 * ldb + j;
      int64_t lb = ldb;
      if (pack) {
        for (int64_t k = 0; k < kc; k++) {
          _mm512_storeu_ps(panel + k * NR, _mm512_maskz_loadu_ps(m0, Bp + k * ldb));
          _mm512_storeu_ps(panel + k * NR + 16, _mm512_maskz_loadu_ps(m1, Bp + k * ldb + 16));
        }
        Bp = panel;
        lb = NR;
      }
      for (int64_t i = 0; i < M; i += MR) {
        int mr = (int)(M - i < MR ? M - i : MR);
        tile_rows(mr, kc, A + i * lda + k0, lda, Bp, lb, C + i * ldc + j, ldc, m0, m1, k0 == 0);
      }
    }
  }
  return 1;
}
#else
int loom_sgemm_nn(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc) {
  (void)M; (void)N; (void)K; (void)A; (void)lda; (void)B; (void)ldb; (void)C; (void)ldc;
  return 0; /* no AVX-512: the caller uses BLAS */
}
#endif
