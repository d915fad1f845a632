/*
 * LAPACK's divide-and-conquer SVD (?gesdd) from the OpenBLAS that kernels/blas.c loads (OpenBLAS
 * ships LAPACK): Loom does not write its own SVD. Called from TypeScript through bun:ffi
 * (src/backends/native/lapack.ts), outside the command-buffer interpreter: an SVD is a host-side
 * decomposition (torch.linalg.svd), not a graph op.
 *
 * Row-major A [m, n] is, read column-major, Aᵀ [n, m]. LAPACK factors Aᵀ = U'·S·VT', so
 * A = VT'ᵀ·S·U'ᵀ: the column-major U' (n × k, ld n) read row-major is Vh [k, n] and the
 * column-major VT' (k × m, ld k) read row-major is U [m, k]. No transposes are copied.
 */
#include <stdint.h>
#include <stdlib.h>

void *loom_blas_symbol(const char *name);

/* Fortran ABI: every argument by pointer, column-major, plus gfortran's hidden length of the
 * CHARACTER argument jobz (a size_t after the others). */
typedef void (*sgesdd_t)(const char *, const int *, const int *, float *, const int *, float *, float *, const int *,
                         float *, const int *, float *, const int *, int *, int *, size_t);
typedef void (*dgesdd_t)(const char *, const int *, const int *, double *, const int *, double *, double *, const int *,
                         double *, const int *, double *, const int *, int *, int *, size_t);

/** 1 when LAPACK's sgesdd_ and dgesdd_ can be called. */
int loom_lapack_available(void) {
  return loom_blas_symbol("sgesdd_") != NULL && loom_blas_symbol("dgesdd_") != NULL;
}

/**
 * SVD of the row-major matrix A [m, n] (overwritten), float32 (f64 = 0) or float64 (f64 = 1).
 * job: 0 singular values only, 1 reduced (U [m, k], Vh [k, n]), 2 full (U [m, m], Vh [n, n]),
 * k = min(m, n). S gets k values, descending. U and Vh are row-major (unused for job 0).
 * Returns LAPACK's info (0 ok, > 0 the iteration did not converge, < 0 a bad argument), -1000
 * when no LAPACK is loaded, -1001 when workspace cannot be allocated, -1002 for a dimension
 * beyond 32-bit LAPACK integers.
 */
int loom_svd(int f64, int64_t m, int64_t n, void *A, int job, void *S, void *U, void *Vh) {
  if (m > 0x7fffffff || n > 0x7fffffff || m * n > 0x7fffffff) return -1002;
  int M = (int)n, N = (int)m; /* the column-major problem is Aᵀ [n, m] */
  int k = M < N ? M : N;
  const char jobz = job == 0 ? 'N' : job == 1 ? 'S' : 'A';
  int lda = M > 1 ? M : 1;
  int ldu = M > 1 ? M : 1;                             /* U' is M × (k or M) */
  int ldvt = job == 2 ? (N > 1 ? N : 1) : (k > 1 ? k : 1); /* VT' is (k or N) × N */
  int info = 0, lwork = -1;
  int *iwork = malloc(sizeof(int) * (size_t)(8 * (k > 0 ? k : 1)));
  if (!iwork) return -1001;
  if (f64) {
    dgesdd_t f = (dgesdd_t)loom_blas_symbol("dgesdd_");
    if (!f) { free(iwork); return -1000; }
    double q = 0, dummy = 0;
    double *u = job ? (double *)Vh : &dummy, *vt = job ? (double *)U : &dummy;
    f(&jobz, &M, &N, (double *)A, &lda, (double *)S, u, &ldu, vt, &ldvt, &q, &lwork, iwork, &info, 1);
    lwork = (int)q;
    double *work = info == 0 ? malloc(sizeof(double) * (size_t)(lwork > 1 ? lwork : 1)) : NULL;
    if (info == 0 && !work) info = -1001;
    if (work) f(&jobz, &M, &N, (double *)A, &lda, (double *)S, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    free(work);
  } else {
    sgesdd_t f = (sgesdd_t)loom_blas_symbol("sgesdd_");
    if (!f) { free(iwork); return -1000; }
    float q = 0, dummy = 0;
    float *u = job ? (float *)Vh : &dummy, *vt = job ? (float *)U : &dummy;
    f(&jobz, &M, &N, (float *)A, &lda, (float *)S, u, &ldu, vt, &ldvt, &q, &lwork, iwork, &info, 1);
    lwork = (int)(q * 1.0001f) + 1; /* a float query may round the size down (LAPACK < 3.10) */
    float *work = info == 0 ? malloc(sizeof(float) * (size_t)(lwork > 1 ? lwork : 1)) : NULL;
    if (info == 0 && !work) info = -1001;
    if (work) f(&jobz, &M, &N, (float *)A, &lda, (float *)S, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    free(work);
  }
  free(iwork);
  return info;
}
