/*
 * Loom's own float32 GEMM for row-major C = op(A)·op(B), op = identity or transpose: AVX-512, and
 * AVX2 with FMA (the second half of this file) where the CPU has no AVX-512.
 *
 * Why: on the dev machine (Zen 4, AVX-512 on 256-bit units) OpenBLAS 0.3.21's SkylakeX sgemm
 * reaches 84-100 GFLOP/s per core on the products of the W-workloads (bench/roofline.c: the
 * fmadd peak is 116), and 72-84 with few rows (64×1024×1024). This kernel keeps an 8×32 tile of C
 * in 16 zmm registers and streams B's rows through it, one k at a time: 64×1024×1024 on two
 * threads in 0.70 ms against OpenBLAS's 0.88, and at parity or faster on the other shapes
 * measured (C harness, bench/native_results.md "session 9"). A transposed B (x·Wᵀ, the linear
 * layer) is transposed into the packed panels 16×16 at a time; a transposed A (xᵀ·dy, weight
 * gradients) only changes which A elements the tile broadcasts (blas.c keeps a transposed A with
 * rows 4 KiB apart or more on OpenBLAS: A is not packed here).
 *
 * Its numerics are fixed per element, whatever the shapes, transposes, tiles, blocks and threads:
 * C[i][j] is c = fl(A[i][0]·B[0][j]), then the fused multiply-add chain c = fma(A[i][k], B[k][j], c)
 * over k = 1, ..., K-1: the same chain as blas.c's one-row sgemv (the same bits, −0 included). A
 * product split into row or column blocks (the pool's chunks, a fused kernel's row blocks)
 * therefore gives the same bits as one call, and x·Wᵀ gives the bits of x·(Wᵀ made contiguous).
 * The error is the usual recursive-summation bound, |C − A·B| ≤ K·2^-24·Σ_k|A[i][k]·B[k][j]|
 * (first order; Higham, Accuracy and Stability of Numerical Algorithms, eq. 3.5).
 *
 * Blocking: k in blocks of KC (the partial sums are stored in C and reloaded, which rounds
 * nothing: they are float32 already); for each block, 32-column panels of B, copied to a packed
 * [KC][32] panel when B is transposed or its rows are far apart (every k row on its own page
 * otherwise: TLB misses at 64×4096×4096 halved the speed), and for each panel every 8-row tile of
 * A. Tails: a masked last panel (N % 32 columns), and a last tile of fewer rows (M % 8).
 */
#include "common.h"

#ifdef __AVX512F__
#include <immintrin.h>

#define MR 8
#define NR 32
#define KC 512

/**
 * C[0..mr)[0..32) (masks m0/m1 for the two 16-column halves) for k in [0, kc): A's element (i, k)
 * at A[i·ars + k·aks], B panel rows at ldb. first: start the chain (else continue it from C's
 * stored values).
 */
static inline __attribute__((always_inline)) void tile(int mr, int64_t kc, const float *A, int64_t ars, int64_t aks,
                                                       const float *B, int64_t ldb, float *C, int64_t ldc, __mmask16 m0,
                                                       __mmask16 m1, int first) {
  __m512 c0[MR], c1[MR];
  int64_t k = 0;
  if (first) { /* the chain starts with the rounded product (a mul, as the gemv: −0 stays −0) */
    __m512 w0 = _mm512_maskz_loadu_ps(m0, B), w1 = _mm512_maskz_loadu_ps(m1, B + 16);
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
      __m512 a = _mm512_set1_ps(A[i * ars]);
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
    const float *Ak = A + k * aks;
#pragma GCC unroll 8
    for (int i = 0; i < mr; i++) {
      __m512 a = _mm512_set1_ps(Ak[i * ars]);
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

/** tile() with mr and A's layout compile-time constants (the row loops unrolled, no spills). */
static void tile_rows(int ta, int mr, int64_t kc, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                      int64_t ldc, __mmask16 m0, __mmask16 m1, int first) {
  if (ta) {
    switch (mr) {
#define ROWS(r) case r: tile(r, kc, A, 1, lda, B, ldb, C, ldc, m0, m1, first); break;
      ROWS(8) ROWS(7) ROWS(6) ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
#undef ROWS
      default: break;
    }
  } else {
    switch (mr) {
#define ROWS(r) case r: tile(r, kc, A, lda, 1, B, ldb, C, ldc, m0, m1, first); break;
      ROWS(8) ROWS(7) ROWS(6) ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
#undef ROWS
      default: break;
    }
  }
}

/**
 * In-register transpose of a 16×16 block: r[i] holds row i on entry, column i on return
 * (unpack pairs, then 4×4 within 128-bit lanes, then the lanes).
 */
static inline __attribute__((always_inline)) void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) { /* r[4i+q], lane L: column 4L+q of rows 4i..4i+3 */
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int q = 0; q < 4; q++) {
    t[q] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0x88);
    t[q + 4] = _mm512_shuffle_f32x4(r[q], r[4 + q], 0xDD);
    t[q + 8] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0x88);
    t[q + 12] = _mm512_shuffle_f32x4(r[8 + q], r[12 + q], 0xDD);
  }
  for (int q = 0; q < 4; q++) {
    r[q] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0x88);
    r[q + 8] = _mm512_shuffle_f32x4(t[q], t[q + 8], 0xDD);
    r[q + 4] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0x88);
    r[q + 12] = _mm512_shuffle_f32x4(t[q + 4], t[q + 12], 0xDD);
  }
}

/**
 * panel[k][c] = B[k][c] for k < kc, c < nr (zeros past nr) where B is given transposed: Bt[c][k]
 * at Bt + c·ldb + k. 16×16 blocks through registers; the k tail with masked loads. One half of
 * the panel (16 rows of Bt) at a time along k: 16 streams of rows, which the hardware prefetchers
 * follow better than 32 (x·Wᵀ, one thread: 64×1024×1024 1.50 -> 1.43 ms, 64×4096×4096 31.1 -> 26.0).
 */
static void pack_transposed(int64_t kc, int64_t nr, const float *Bt, int64_t ldb, float *panel) {
  for (int h = 0; h < 2; h++) {
    for (int64_t k = 0; k < kc; k += 16) {
      int64_t kn = kc - k < 16 ? kc - k : 16;
      __mmask16 km = (__mmask16)(kn >= 16 ? 0xFFFF : (1u << kn) - 1u);
      __m512 r[16];
      for (int c = 0; c < 16; c++) {
        int64_t col = h * 16 + c;
        r[c] = col < nr ? _mm512_maskz_loadu_ps(km, Bt + col * ldb + k) : _mm512_setzero_ps();
      }
      transpose16(r);
      for (int64_t q = 0; q < kn; q++) _mm512_storeu_ps(panel + (k + q) * NR + h * 16, r[q]);
    }
  }
}

int loom_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
               float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 1;
  if (K <= 0) {
    for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
    return 1;
  }
  /* far-apart rows of B: copy each panel block to contiguous rows of 32 (rows 4 KiB apart or
   * more share cache sets). Measured: it pays from 8 KiB, and from 4 KiB with 128 rows or more
   * (64×1024×1024: 0.70 ms unpacked, 0.80 packed; 64×2048×2048: 4.2 and 3.3; 1024³: 11.8 and 10.7).
   * A transposed B is always packed: its k runs along rows. */
  int64_t stride = ldb * (int64_t)sizeof(float);
  int pack = tb || stride >= 8192 || (stride >= 4096 && M >= 128);
  float *panel = pack ? loom_scratch(SCR_GEMM, sizeof(float) * KC * NR) : NULL;
  int64_t ars = ta ? 1 : lda, aks = ta ? lda : 1;
  for (int64_t k0 = 0; k0 < K; k0 += KC) {
    int64_t kc = K - k0 < KC ? K - k0 : KC;
    for (int64_t j = 0; j < N; j += NR) {
      int64_t nr = N - j < NR ? N - j : NR;
      __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1u);
      __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xFFFF : nr > 16 ? (1u << (nr - 16)) - 1u : 0);
      const float *Bp;
      int64_t lb = NR;
      if (tb) {
        pack_transposed(kc, nr, B + j * ldb + k0, ldb, panel);
        Bp = panel;
      } else if (pack) {
        const float *Bs = B + k0 * ldb + j;
        for (int64_t k = 0; k < kc; k++) {
          _mm512_storeu_ps(panel + k * NR, _mm512_maskz_loadu_ps(m0, Bs + k * ldb));
          _mm512_storeu_ps(panel + k * NR + 16, _mm512_maskz_loadu_ps(m1, Bs + k * ldb + 16));
        }
        Bp = panel;
      } else {
        Bp = B + k0 * ldb + j;
        lb = ldb;
      }
      for (int64_t i = 0; i < M; i += MR) {
        int mr = (int)(M - i < MR ? M - i : MR);
        tile_rows(ta, mr, kc, A + i * ars + k0 * aks, lda, Bp, lb, C + i * ldc + j, ldc, m0, m1, k0 == 0);
      }
    }
  }
  return 1;
}
#elif defined(__AVX2__) && defined(__FMA__)
#include "vec.h" /* vf_first: the lane masks */
/*
 * The AVX2 + FMA kernel (Zen 3, Haswell and later without AVX-512): the same chain per element as
 * the AVX-512 kernel above, so both give the same bits and CPUs of either kind agree. The tile is
 * 6×16: 12 ymm accumulators, two B vectors and a broadcast fill 15 of the 16 registers (an 8-row
 * tile would spill); per k, 12 fmas for 8 loads.
 *
 * Blocking (GotoBLAS's, Goto & van de Geijn, ACM TOMS 34(3), 2008): for each block of NC columns
 * and KC k's, B's block is packed once into 16-column panels (kc·64 bytes, walked by every tile);
 * for each MCB rows, A's block is packed into 6-row tiles (each tile one contiguous stream); the
 * next tile's C rows are prefetched. Measured on one Zen 3 thread against OpenBLAS 0.3.21's
 * Haswell sgemm (session 13, C harness): 512³ 0.95-1.00x its time, 1024³ 1.07-1.12x, W5's x·Wᵀ
 * and W7's x·Wᵀ, dy·W, xᵀ·dy 0.98-1.14x, W7's attention scores 0.84x; 64×4096×4096 1.2-1.26x (B's
 * 64 MiB come from memory while nothing else runs: packing is not overlapped with the tiles).
 * KC 512 over 256: fewer reloads of C (1024³ 1.17 -> 1.07x); unpacked A (broadcasts from six rows
 * lda apart, which share L1 sets when lda is a multiple of 1 KiB): 1024³ 1.3x.
 */
#define MR 6
#define NR 16
#define KC 512
#define NC 512 /* B's packed block: KC·NC floats, 1 MiB */
#define MCB 240 /* A's packed block: MCB·KC floats, 480 KiB (a multiple of MR) */

/**
 * C[0..mr)[0..16) for k in [0, kc), from a packed A tile (A[k·MR + i]) and a packed B panel
 * (B[k·NR + c], zeros past the last column), as the AVX-512 tile. full: all 16 columns of C
 * (plain loads and stores), else the masks m0/m1 of its two 8-column halves. first: start the
 * chain (else continue it from C's stored values).
 */
static inline __attribute__((always_inline)) void tile(int mr, int full, int64_t kc, const float *A, const float *B, float *C,
                                                       int64_t ldc, __m256i m0, __m256i m1, int first) {
#define LD(p, m) (full ? _mm256_loadu_ps(p) : _mm256_maskload_ps((p), (m)))
  __m256 c0[MR], c1[MR];
  int64_t k = 0;
  if (first) { /* the rounded product starts the chain (a mul, as the gemv: −0 stays −0) */
    __m256 w0 = _mm256_loadu_ps(B), w1 = _mm256_loadu_ps(B + 8);
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
      __m256 a = _mm256_broadcast_ss(A + i);
      c0[i] = _mm256_mul_ps(a, w0);
      c1[i] = _mm256_mul_ps(a, w1);
    }
    k = 1;
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
      c0[i] = LD(C + i * ldc, m0);
      c1[i] = LD(C + i * ldc + 8, m1);
    }
  }
  for (; k < kc; k++) {
    __m256 w0 = _mm256_loadu_ps(B + k * NR), w1 = _mm256_loadu_ps(B + k * NR + 8);
    const float *Ak = A + k * MR;
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
      __m256 a = _mm256_broadcast_ss(Ak + i);
      c0[i] = _mm256_fmadd_ps(a, w0, c0[i]);
      c1[i] = _mm256_fmadd_ps(a, w1, c1[i]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++) {
    if (full) {
      _mm256_storeu_ps(C + i * ldc, c0[i]);
      _mm256_storeu_ps(C + i * ldc + 8, c1[i]);
    } else {
      _mm256_maskstore_ps(C + i * ldc, m0, c0[i]);
      _mm256_maskstore_ps(C + i * ldc + 8, m1, c1[i]);
    }
  }
#undef LD
}

/** tile() with mr and full compile-time constants (the row loops unrolled, no spills). */
static void tile_rows(int full, int mr, int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc, __m256i m0,
                      __m256i m1, int first) {
#define ROWS(r)                                                  \
  case r:                                                        \
    if (full) tile(r, 1, kc, Ap, Bp, C, ldc, m0, m1, first);     \
    else tile(r, 0, kc, Ap, Bp, C, ldc, m0, m1, first);          \
    break;
  switch (mr) {
    ROWS(6) ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
    default: break;
  }
#undef ROWS
}

/** In-register transpose of an 8×8 block: r[i] holds row i on entry, column i on return. */
static inline __attribute__((always_inline)) void transpose8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; i++) { /* s[4i+q]: column q | column q+4 of rows 4i..4i+3 */
    s[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int q = 0; q < 4; q++) {
    r[q] = _mm256_permute2f128_ps(s[q], s[4 + q], 0x20);
    r[q + 4] = _mm256_permute2f128_ps(s[q], s[4 + q], 0x31);
  }
}

/**
 * panel[k][c] = B[k][c] for k < kc, c < nr (zeros past nr) where B is given transposed: Bt[c][k]
 * at Bt + c·ldb + k. 8×8 blocks through registers, the k tail with masked loads; one 8-column
 * half of the panel at a time along k (8 row streams for the prefetchers, as the AVX-512 kernel).
 */
static void pack_transposed(int64_t kc, int64_t nr, const float *Bt, int64_t ldb, float *panel) {
  for (int h = 0; h < 2; h++) {
    for (int64_t k = 0; k < kc; k += 8) {
      int64_t kn = kc - k < 8 ? kc - k : 8;
      __m256i km = vf_first(kn);
      __m256 r[8];
      for (int c = 0; c < 8; c++) {
        int64_t col = h * 8 + c;
        r[c] = col >= nr ? _mm256_setzero_ps()
               : kn == 8 ? _mm256_loadu_ps(Bt + col * ldb + k)
                         : _mm256_maskload_ps(Bt + col * ldb + k, km);
      }
      transpose8(r);
      for (int64_t q = 0; q < kn; q++) _mm256_storeu_ps(panel + (k + q) * NR + h * 8, r[q]);
    }
  }
}

/**
 * B's block of kc rows and nc columns as panels Bp[p][k][16] (zeros past nc): from Bt[c][k] (tb,
 * 8×8 transposes) or from B's rows, each row's nc columns read in one sequential run (a 16-column
 * panel at a time reads one line from each of kc rows).
 */
static void pack_b(int tb, int64_t kc, int64_t nc, const float *B, int64_t ldb, float *Bp) {
  if (tb) {
    for (int64_t j = 0; j < nc; j += NR) pack_transposed(kc, nc - j < NR ? nc - j : NR, B + j * ldb, ldb, Bp + j * kc);
    return;
  }
  int64_t full = nc & ~(int64_t)(NR - 1);
  __m256i m0 = vf_first(nc - full), m1 = vf_first(nc - full - 8);
  for (int64_t k = 0; k < kc; k++) {
    const float *r = B + k * ldb;
    for (int64_t j = 0; j < full; j += NR) {
      float *d = Bp + j * kc + k * NR;
      _mm256_storeu_ps(d, _mm256_loadu_ps(r + j));
      _mm256_storeu_ps(d + 8, _mm256_loadu_ps(r + j + 8));
    }
    if (full < nc) {
      float *d = Bp + full * kc + k * NR;
      _mm256_storeu_ps(d, _mm256_maskload_ps(r + full, m0));
      _mm256_storeu_ps(d + 8, _mm256_maskload_ps(r + full + 8, m1));
    }
  }
}

/**
 * Ap[t][k][i] = A's element (row i0 + 6t + i, column k0 + k) for k < kc, i < 6 (zeros past the
 * last row): each 6-row tile's A as one contiguous stream.
 */
static void pack_a(int ta, int64_t mc, int64_t kc, const float *A, int64_t lda, float *Ap) {
  for (int64_t t = 0; t * MR < mc; t++) {
    int64_t mr = mc - t * MR < MR ? mc - t * MR : MR;
    float *d = Ap + t * kc * MR;
    if (ta) { /* element (i, k) at A[i + k·lda]: the tile's rows are contiguous */
      for (int64_t k = 0; k < kc; k++) {
        const float *s = A + t * MR + k * lda;
        for (int64_t i = 0; i < MR; i++) d[k * MR + i] = i < mr ? s[i] : 0.0f;
      }
    } else {
      for (int64_t i = 0; i < MR; i++) {
        const float *s = A + (t * MR + i) * lda;
        if (i < mr) for (int64_t k = 0; k < kc; k++) d[k * MR + i] = s[k];
        else for (int64_t k = 0; k < kc; k++) d[k * MR + i] = 0.0f;
      }
    }
  }
}

int loom_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
               float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 1;
  if (K <= 0) {
    for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
    return 1;
  }
  float *Bp = loom_scratch(SCR_GEMM, sizeof(float) * KC * NC);
  float *Ap = loom_scratch(SCR_GEMM_A, sizeof(float) * MCB * KC);
  for (int64_t j0 = 0; j0 < N; j0 += NC) {
    int64_t nc = N - j0 < NC ? N - j0 : NC;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
      int64_t kc = K - k0 < KC ? K - k0 : KC;
      pack_b(tb, kc, nc, tb ? B + j0 * ldb + k0 : B + k0 * ldb + j0, ldb, Bp);
      for (int64_t i0 = 0; i0 < M; i0 += MCB) {
        int64_t mc = M - i0 < MCB ? M - i0 : MCB;
        pack_a(ta, mc, kc, ta ? A + k0 * lda + i0 : A + i0 * lda + k0, lda, Ap);
        for (int64_t j = 0; j < nc; j += NR) {
          int64_t nr = nc - j < NR ? nc - j : NR;
          __m256i m0 = vf_first(nr), m1 = vf_first(nr - 8);
          float *Cj = C + i0 * ldc + j0 + j;
          for (int64_t i = 0; i < mc; i += MR) {
            int mr = (int)(mc - i < MR ? mc - i : MR);
            /* the next tile's C rows, fetched while this tile runs (k0 > 0 reloads them; a store
               to a line not in cache stalls the tile's end): W7's x·Wᵀ 1.2-1.4x -> ~1.0x OpenBLAS */
            for (int64_t q = i + MR; q < i + 2 * MR && q < mc; q++) {
              __builtin_prefetch(Cj + q * ldc, 1, 3);
              __builtin_prefetch(Cj + q * ldc + 15, 1, 3);
            }
            tile_rows(nr == NR, mr, kc, Ap + i * kc, Bp + j * kc, Cj + i * ldc, ldc, m0, m1, k0 == 0);
          }
        }
      }
    }
  }
  return 1;
}
#else
int loom_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
               float *C, int64_t ldc) {
  (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)A; (void)lda; (void)B; (void)ldb; (void)C; (void)ldc;
  return 0; /* neither AVX-512 nor AVX2 with FMA: the caller uses BLAS */
}
#endif
