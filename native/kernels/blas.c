/*
 * GEMM: OpenBLAS when it can be loaded (dlopen, no link-time dependency), else a blocked SIMD
 * GEMM written here. Both are called single-threaded from Loom's own pool (kernels split the
 * work), so OpenBLAS never starts a second pool that would fight ours for the cores.
 *
 * OPENBLAS_CORETYPE is chosen here before the library loads (the environment may export a
 * slower one): SkylakeX (AVX-512 kernels) when the CPU has AVX-512, else Haswell.
 * LOOM_OPENBLAS_CORETYPE overrides the choice, LOOM_BLAS=0 disables BLAS, LOOM_BLAS=path loads
 * that library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "vec.h"

enum { RowMajor = 101, NoTrans = 111, Trans = 112 };
typedef void (*sgemm_t)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
typedef void (*dgemm_t)(int, int, int, int, int, int, double, const double *, int, const double *, int, double, double *, int);
static sgemm_t p_sgemm;
static dgemm_t p_dgemm;
/* cblas_?gemv (order, trans, M, N, alpha, A, lda, x, incx, beta, y, incy): products with one row
 * or one column. OpenBLAS 0.3.21's ?gemm packs the whole matrix operand even then (a decode
 * step's x·W reads W twice and writes a packed copy); gemv streams it once. */
typedef void (*sgemv_t)(int, int, int, int, float, const float *, int, const float *, int, float, float *, int);
typedef void (*dgemv_t)(int, int, int, int, double, const double *, int, const double *, int, double, double *, int);
static sgemv_t p_sgemv;
static dgemv_t p_dgemv;
static void (*p_omp_set_num_threads)(int);
/* this thread has set its OpenMP thread count to 1 (see blas_open) */
static _Thread_local int omp_single;
/* -1 not loaded yet, 0 absent, 1 loaded. Workers of the first multithreaded product ask at the
 * same time: the library is loaded once (pthread_once) and the state published last, with
 * release order, so no worker sees "absent" or a half-set function table while another loads
 * it (one product would mix the built-in GEMM and OpenBLAS: results that differ run to run). */
static int blas_state = -1;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char blas_name[256];
/* the loaded library's handle (LAPACK symbols are looked up in it: kernels/lapack.c) */
static void *blas_handle;

static int blas_open(void);
static void blas_load(void) { __atomic_store_n(&blas_state, blas_open(), __ATOMIC_RELEASE); }

/** Find and open the library; returns the state (1 loaded, 0 absent). */
static int blas_open(void) {
  const char *want = getenv("LOOM_BLAS");
  if (want && strcmp(want, "0") == 0) return 0;
  const char *ct = getenv("LOOM_OPENBLAS_CORETYPE");
  if (!ct) ct = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
  if (ct) setenv("OPENBLAS_CORETYPE", ct, 1);
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  /* Loom calls OpenBLAS single-threaded from its own pool only. Should anything still call it
   * threaded (another library sharing the process), the OpenMP build's libgomp threads must sleep
   * after the call instead of spinning against Loom's pool: OMP_WAIT_POLICY (read when libgomp
   * loads, i.e. by the dlopen below); OPENBLAS_THREAD_TIMEOUT is the pthread build's equivalent. */
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  /* The OpenMP build takes its thread count from omp_get_max_threads() of the CALLING thread, and
   * openblas_set_num_threads(1) sets only the loading thread's OpenMP value: every other pool
   * thread called a 2-thread OpenBLAS, which started a libgomp team per worker (spinning against
   * the pool) and gave bits that depended on which thread ran which block. OMP_NUM_THREADS is
   * every thread's initial value; loom_gemm_* also set it per thread (libgomp loaded earlier). */
  setenv("OMP_NUM_THREADS", "1", 1);
  if (!getenv("OPENBLAS_THREAD_TIMEOUT")) setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
  const char *cands[] = {want, "libopenblas.so.0", "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0",
                         "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", "libopenblas.so", NULL};
  for (int i = 0; i < 5; i++) {
    if (!cands[i]) continue;
    void *h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    p_sgemm = (sgemm_t)dlsym(h, "cblas_sgemm");
    p_dgemm = (dgemm_t)dlsym(h, "cblas_dgemm");
    p_sgemv = (sgemv_t)dlsym(h, "cblas_sgemv");
    p_dgemv = (dgemv_t)dlsym(h, "cblas_dgemv");
    void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    if (!p_sgemm || !p_dgemm) { dlclose(h); continue; }
    if (set_threads) set_threads(1);
    p_omp_set_num_threads = (void (*)(int))dlsym(h, "omp_set_num_threads"); /* OpenMP build only */
    blas_handle = h;
    snprintf(blas_name, sizeof blas_name, "%s (OPENBLAS_CORETYPE=%s)", cands[i], ct ? ct : "auto");
    return 1;
  }
  return 0;
}

/** 1 when OpenBLAS is in use. Loads it on first call (once; concurrent callers wait for it). */
int loom_blas_available(void) {
  int s = __atomic_load_n(&blas_state, __ATOMIC_ACQUIRE);
  if (s < 0) {
    pthread_once(&blas_once, blas_load);
    s = __atomic_load_n(&blas_state, __ATOMIC_ACQUIRE);
  }
  if (s == 1 && !omp_single) {
    if (p_omp_set_num_threads) p_omp_set_num_threads(1);
    omp_single = 1;
  }
  return s;
}

/** The loaded BLAS library ("" when the built-in GEMM is used). */
const char *loom_blas_name(void) {
  loom_blas_available();
  return blas_name;
}

/** A symbol of the loaded BLAS library (its LAPACK routines: sgesdd_), NULL when none is loaded. */
void *loom_blas_symbol(const char *name) {
  return loom_blas_available() == 1 ? dlsym(blas_handle, name) : NULL;
}

/* ---- built-in blocked GEMM -------------------------------------------------------------------- */
/* C[M,N] = alpha·A·B + beta·C with A(i,k) = A[i*ars + k*acs], B(k,j) = B[k*brs + j*bcs].
 * Panels of A (MC×KC) and B (KC×NC) are packed densely; the inner kernel updates a 4×NB tile
 * held in a local array with unit-stride loops the compiler turns into FMA vectors. */
#define GEMM_FALLBACK(NAME, T)                                                                           \
  static void NAME(int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t ars, int64_t acs,           \
                   const T *B, int64_t brs, int64_t bcs, T beta, T *C, int64_t ldc) {                        \
    enum { MC = 64, KC = 256, NC = 512, NB = 64 };                                                       \
    for (int64_t i = 0; i < M; i++)                                                                          \
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];              \
    if (K == 0 || alpha == 0) return;                                                                         \
    T *Bp = malloc(sizeof(T) * KC * NC), *Ap = malloc(sizeof(T) * MC * KC);                                  \
    for (int64_t j0 = 0; j0 < N; j0 += NC) {                                                                 \
      int64_t nc = N - j0 < NC ? N - j0 : NC;                                                                \
      for (int64_t k0 = 0; k0 < K; k0 += KC) {                                                               \
        int64_t kc = K - k0 < KC ? K - k0 : KC;                                                              \
        for (int64_t k = 0; k < kc; k++)                                                                     \
          for (int64_t j = 0; j < nc; j++) Bp[k * nc + j] = B[(k0 + k) * brs + (j0 + j) * bcs];              \
        for (int64_t i0 = 0; i0 < M; i0 += MC) {                                                             \
          int64_t mc = M - i0 < MC ? M - i0 : MC;                                                            \
          for (int64_t i = 0; i < mc; i++)                                                                   \
            for (int64_t k = 0; k < kc; k++) Ap[i * kc + k] = alpha * A[(i0 + i) * ars + (k0 + k) * acs];   \
          for (int64_t jb = 0; jb < nc; jb += NB) {                                                          \
            int64_t nb = nc - jb < NB ? nc - jb : NB;                                                        \
            for (int64_t i = 0; i < mc; i += 4) {                                                            \
              int rows = mc - i < 4 ? (int)(mc - i) : 4;                                                     \
              T acc[4][NB];                                                                                  \
              memset(acc, 0, sizeof acc);                                                                    \
              for (int64_t k = 0; k < kc; k++) {                                                             \
                const T *b = Bp + k * nc + jb;                                                               \
                T a0 = Ap[i * kc + k], a1 = rows > 1 ? Ap[(i + 1) * kc + k] : 0;                              \
                T a2 = rows > 2 ? Ap[(i + 2) * kc + k] : 0, a3 = rows > 3 ? Ap[(i + 3) * kc + k] : 0;         \
                if (nb == NB) {                                                                              \
                  for (int j = 0; j < NB; j++) {                                                             \
                    acc[0][j] += a0 * b[j]; acc[1][j] += a1 * b[j];                                          \
                    acc[2][j] += a2 * b[j]; acc[3][j] += a3 * b[j];                                          \
                  }                                                                                          \
                } else {                                                                                     \
                  for (int j = 0; j < nb; j++) {                                                             \
                    acc[0][j] += a0 * b[j]; acc[1][j] += a1 * b[j];                                          \
                    acc[2][j] += a2 * b[j]; acc[3][j] += a3 * b[j];                                          \
                  }                                                                                          \
                }                                                                                            \
              }                                                                                              \
              for (int r = 0; r < rows; r++) {                                                               \
                T *c = C + (i0 + i + r) * ldc + j0 + jb;                                                     \
                for (int j = 0; j < nb; j++) c[j] += acc[r][j];                                              \
              }                                                                                              \
            }                                                                                                \
          }                                                                                                  \
        }                                                                                                    \
      }                                                                                                      \
    }                                                                                                        \
    free(Bp);                                                                                                \
    free(Ap);                                                                                                \
  }

GEMM_FALLBACK(gemm_builtin_f32, float)
GEMM_FALLBACK(gemm_builtin_f64, double)

#ifdef LOOM_OWN_SGEMM
/*
 * y[j] = Σ_k x[k·incx]·B[k·ldb + j], j < N: the one-row product a·B of decoding (float32, B
 * row-major [K, N], alpha 1, beta 0). OpenBLAS 0.3.21's sgemv_t walks B in column tiles (a
 * strided stream per tile): 2.1 ms for the 24 W7 decode matrices (42.5 MB) on one thread here,
 * where a plain read of them takes 1.5 ms. This kernel streams B row after row, accumulating
 * into y itself (it stays in L1: N <= a few thousand): 1.5 ms, the speed of the read. Register
 * tiles over all k (8 to 24 vectors wide, with and without prefetch) took 2.7-3.6 ms, and
 * accumulating four rows at a time into a stack buffer 2.7 ms. Each y[j] is the fused
 * multiply-add chain over k in order 0..K-1, so the result does not depend on how the pool
 * splits the columns (and AVX-512 and AVX2 give the same bits).
 */
static void sgemv_rows_f32(int64_t K, int64_t N, const float *x, int64_t incx, const float *B, int64_t ldb, float *y) {
  int64_t full = N - N % VEC_W;
  int nt = (int)(N - full);
  vf_mask tail = vf_first(nt);
  vf x0 = vf_set1(x[0]);
  for (int64_t j = 0; j < full; j += VEC_W) vf_storeu(y + j, vf_mul(x0, vf_loadu(B + j)));
  if (nt) vf_maskstore(y + full, tail, vf_mul(x0, vf_maskload(tail, B + full)));
  for (int64_t k = 1; k < K; k++) {
    const float *r = B + k * ldb;
    vf xk = vf_set1(x[k * incx]);
    for (int64_t j = 0; j < full; j += VEC_W) vf_storeu(y + j, vf_fma(xk, vf_loadu(r + j), vf_loadu(y + j)));
    if (nt) vf_maskstore(y + full, tail, vf_fma(xk, vf_maskload(tail, r + full), vf_maskload(tail, y + full)));
  }
}

/** Whether the environment variable `var` leaves Loom's own kernel on (anything but "blas"). */
static int use_own(const char *var) {
  const char *e = getenv(var);
  return !(e && strcmp(e, "blas") == 0);
}
/* LOOM_GEMV=blas: one-row float32 products through OpenBLAS's sgemv instead (A/B timing; read at
 * each product, so a benchmark can switch it within one process). */
static int use_own_sgemv(void) { return use_own("LOOM_GEMV"); }

/* LOOM_SGEMM=blas: products C = op(A)·op(B) through OpenBLAS's sgemm instead of sgemm.c (A/B timing,
 * read at each product like LOOM_GEMV). */
static int use_own_sgemm(void) { return use_own("LOOM_SGEMM"); }
#endif

int loom_sgemv_rows(int64_t K, int64_t N, const float *x, int64_t incx, const float *B, int64_t ldb, float *y) {
#ifdef LOOM_OWN_SGEMM
  if (!use_own_sgemv()) return 0;
  if (K > 0) sgemv_rows_f32(K, N, x, incx, B, ldb, y);
  return 1;
#else
  (void)K; (void)N; (void)x; (void)incx; (void)B; (void)ldb; (void)y;
  return 0;
#endif
}

/*
 * One row (M = 1: y = a·B) or one column (N = 1: y = A·b) as a gemv. Row-major operands: B [K, N]
 * (ldb) is the matrix of y = Bᵀa, a transposed B stored [N, K] that of y = B·a; the vector's
 * stride is 1 for a row of A, lda for a transposed A (a column of the stored matrix).
 */
#define GEMV_FORWARD(p_gemv)                                                                                       \
  if (M == 1 && p_gemv) {                                                                                          \
    if (tb) p_gemv(RowMajor, NoTrans, (int)N, (int)K, alpha, B, (int)ldb, A, ta ? (int)lda : 1, beta, C, 1);      \
    else p_gemv(RowMajor, Trans, (int)K, (int)N, alpha, B, (int)ldb, A, ta ? (int)lda : 1, beta, C, 1);            \
    return;                                                                                                        \
  }                                                                                                                \
  if (N == 1 && p_gemv) {                                                                                          \
    if (ta) p_gemv(RowMajor, Trans, (int)K, (int)M, alpha, A, (int)lda, B, tb ? 1 : (int)ldb, beta, C, (int)ldc);  \
    else p_gemv(RowMajor, NoTrans, (int)M, (int)K, alpha, A, (int)lda, B, tb ? 1 : (int)ldb, beta, C, (int)ldc);   \
    return;                                                                                                        \
  }

void loom_gemm_f32(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
#ifdef LOOM_OWN_SGEMM
  if (M == 1 && !tb && K > 0 && alpha == 1.0f && beta == 0.0f && use_own_sgemv()) {
    sgemv_rows_f32(K, N, A, ta ? lda : 1, B, ldb, C);
    return;
  }
  /* C = op(A)·op(B) with 16 columns or more (sgemm.c): the same fma chain per element as the gemv
   * above, so every split of a product into row or column blocks gives the same bits (matmul.c
   * never cuts a block of fewer than 16 rows or columns off a larger product). Narrower products
   * keep BLAS: the kernel's 16-lane rows would run mostly empty (N = 1..3: 2-4x slower than
   * OpenBLAS). So does one row times a transposed B (decoding's x·Wᵀ): packing all of W for one
   * row doubles the traffic of a memory-bound product, where OpenBLAS's dot-product gemv streams W
   * once. And a transposed A with rows 4 KiB apart or more (a weight gradient xᵀ·dy over 1024
   * features or more): the tile's 8 elements of each k then sit on a page of their own, 1024³
   * took 13.2-15.8 ms against OpenBLAS's 11.3-12.5 (sgemm.c does not pack A). */
  if (N >= 16 && !(M == 1 && tb) && !(ta && lda >= 1024) && alpha == 1.0f && beta == 0.0f && use_own_sgemm() &&
      loom_sgemm(ta, tb, M, N, K, A, lda, B, ldb, C, ldc))
    return;
#endif
  if (loom_blas_available() && K > 0) {
    GEMV_FORWARD(p_sgemv)
    p_sgemm(RowMajor, ta ? Trans : NoTrans, tb ? Trans : NoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb,
            beta, C, (int)ldc);
    return;
  }
  gemm_builtin_f32(M, N, K, alpha, A, ta ? 1 : lda, ta ? lda : 1, B, tb ? 1 : ldb, tb ? ldb : 1, beta, C, ldc);
}

void loom_gemm_f64(int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
                   const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (loom_blas_available() && K > 0) {
    GEMV_FORWARD(p_dgemv)
    p_dgemm(RowMajor, ta ? Trans : NoTrans, tb ? Trans : NoTrans, (int)M, (int)N, (int)K, alpha, A, (int)lda, B, (int)ldb,
            beta, C, (int)ldc);
    return;
  }
  gemm_builtin_f64(M, N, K, alpha, A, ta ? 1 : lda, ta ? lda : 1, B, tb ? 1 : ldb, tb ? ldb : 1, beta, C, ldc);
}
