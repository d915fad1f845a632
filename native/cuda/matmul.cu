/*
 * Matmul for the CUDA library: cuBLAS when it can be loaded (dlopen $LOOM_CUBLAS, libcublas.so.13, then .12:
 * no link-time dependency, so the library builds and loads without it), Loom's own tiled kernel
 * otherwise, and for layouts or dtypes cuBLAS does not take.
 *
 * out = a @ b with matmul's broadcasting: a [..., M, K], b [..., K, N], out [..., M, N] (batch
 * dims right-aligned, size 1 broadcast). Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ, so cuBLAS
 * is called as gemm(opB, opA, N, M, K, B, A, C): an operand whose rows are contiguous is its own
 * transpose in column-major order (op N), one whose columns are contiguous takes op T.
 * cuBLAS SGEMM accumulates in float32 (CUBLAS_DEFAULT_MATH: no TF32 unless the environment sets
 * NVIDIA_TF32_OVERRIDE); the tiled kernel accumulates in double and rounds once, as the js
 * reference does.
 */
#include <dlfcn.h>
#include <stdio.h>

#include "common.cuh"

/* ---- cuBLAS, declared here (no header needed at build time) ----------------------------------- */
typedef void *cublasHandle_t;
typedef int (*cublasCreate_t)(cublasHandle_t *);
typedef int (*cublasSetStream_t)(cublasHandle_t, cudaStream_t);
typedef int (*cublasSgemmStridedBatched_t)(cublasHandle_t, int, int, int, int, int, const float *, const float *, int, long long,
                                           const float *, int, long long, const float *, float *, int, long long, int);
typedef int (*cublasDgemmStridedBatched_t)(cublasHandle_t, int, int, int, int, int, const double *, const double *, int, long long,
                                           const double *, int, long long, const double *, double *, int, long long, int);
enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };

static cublasHandle_t blas;
static cublasSgemmStridedBatched_t sgemm;
static cublasDgemmStridedBatched_t dgemm;
static double n_cublas, n_tiled;

int lc_cublas_load(cudaStream_t s, const char **name) {
  if (getenv("LOOM_CUDA_NO_CUBLAS")) { *name = "disabled by LOOM_CUDA_NO_CUBLAS"; return 0; }
  /* LOOM_CUBLAS: a full path (e.g. pip's nvidia/cublas/lib/libcublas.so.12 beside PyTorch) */
  const char *names[] = {getenv("LOOM_CUBLAS"), "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  for (const char *n : names) {
    if (!n || !n[0]) continue;
    void *h = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    cublasCreate_t create = (cublasCreate_t)dlsym(h, "cublasCreate_v2");
    cublasSetStream_t set_stream = (cublasSetStream_t)dlsym(h, "cublasSetStream_v2");
    sgemm = (cublasSgemmStridedBatched_t)dlsym(h, "cublasSgemmStridedBatched");
    dgemm = (cublasDgemmStridedBatched_t)dlsym(h, "cublasDgemmStridedBatched");
    if (!create || !set_stream || !sgemm || !dgemm || create(&blas) != 0 || set_stream(blas, s) != 0) {
      blas = nullptr;
      dlclose(h);
      continue;
    }
    *name = n;
    return 1;
  }
  *name = "libcublas.so.13/.12 not found (LOOM_CUBLAS may name one): Loom's tiled kernel runs every matmul";
  return 0;
}

void lc_matmul_counters(double *out) {
  out[0] = n_cublas;
  out[1] = n_tiled;
}

/* ---- the tiled kernel ------------------------------------------------------------------------- */
#define TILE 16
typedef struct {
  ctensor a, b, o;
  int64_t M, N, K, nbatch;
  int nb;                                   /* batch dims of o */
  int64_t bshape[LC_MAXD], ast[LC_MAXD], bst[LC_MAXD];
} mmargs;

__global__ void k_matmul_tiled(mmargs g) {
  __shared__ double As[TILE][TILE], Bs[TILE][TILE];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t am = g.a.st[g.a.nd - 2], ak = g.a.st[g.a.nd - 1], bk = g.b.st[g.b.nd - 2], bn = g.b.st[g.b.nd - 1];
  const int64_t om = g.o.st[g.o.nd - 2], on = g.o.st[g.o.nd - 1];
  const int64_t rowTiles = (g.M + TILE - 1) / TILE;
  for (int64_t z = blockIdx.z; z < g.nbatch; z += gridDim.z) {
    int64_t ao = g.a.off, bo = g.b.off, oo = g.o.off, q = z;
    for (int d = g.nb - 1; d >= 0; d--) {
      int64_t i = q % g.bshape[d];
      q /= g.bshape[d];
      ao += i * g.ast[d];
      bo += i * g.bst[d];
      oo += i * g.o.st[d];
    }
    for (int64_t rt = blockIdx.y; rt < rowTiles; rt += gridDim.y) {
      const int64_t row = rt * TILE + ty, col = (int64_t)blockIdx.x * TILE + tx;
      double acc = 0;
      for (int64_t k0 = 0; k0 < g.K; k0 += TILE) {
        As[ty][tx] = row < g.M && k0 + tx < g.K ? lc_load(g.a.p, g.a.dt, ao + row * am + (k0 + tx) * ak) : 0.0;
        Bs[ty][tx] = k0 + ty < g.K && col < g.N ? lc_load(g.b.p, g.b.dt, bo + (k0 + ty) * bk + col * bn) : 0.0;
        __syncthreads();
        for (int kk = 0; kk < TILE; kk++) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
      }
      if (row < g.M && col < g.N) lc_store(g.o.p, g.o.dt, oo + row * om + col * on, acc);
    }
  }
}

/* ---- dispatch --------------------------------------------------------------------------------- */
/**
 * Column-major form of a row-major R×C operand with strides (rs, cs): op N with ld = rs when its
 * rows are contiguous (ld ≥ C), op T with ld = cs when its columns are (ld ≥ R); 0 if neither.
 */
static int blas_layout(int64_t R, int64_t C, int64_t rs, int64_t cs, int *op, int64_t *ld) {
  if (cs == 1 || C == 1) {
    *op = CUBLAS_OP_N;
    *ld = R == 1 ? C : rs;
    if (*ld >= C && *ld >= 1) return 1;
  }
  if (rs == 1 || R == 1) {
    *op = CUBLAS_OP_T;
    *ld = C == 1 ? R : cs;
    if (*ld >= R && *ld >= 1) return 1;
  }
  return 0;
}

static const int64_t INT_LIM = 2147483647;

/** cuBLAS over every batch entry (strided-batched over the last batch dim); 0 when it does not apply. */
static int try_cublas(const mmargs *g) {
  const ctensor *a = &g->a, *b = &g->b, *o = &g->o;
  if (!blas || a->dt != b->dt || a->dt != o->dt || (o->dt != DT_F32 && o->dt != DT_F64)) return 0;
  if (g->K == 0 || g->M > INT_LIM || g->N > INT_LIM || g->K > INT_LIM) return 0;
  int64_t om = o->st[o->nd - 2], on = o->st[o->nd - 1];
  if (!(on == 1 || g->N == 1) || (g->M > 1 && om < g->N)) return 0;
  int64_t ldc = g->M == 1 ? g->N : om;
  int opA, opB;
  int64_t lda, ldb;
  if (!blas_layout(g->M, g->K, a->st[a->nd - 2], a->st[a->nd - 1], &opA, &lda)) return 0;
  if (!blas_layout(g->K, g->N, b->st[b->nd - 2], b->st[b->nd - 1], &opB, &ldb)) return 0;
  if (lda > INT_LIM || ldb > INT_LIM || ldc > INT_LIM) return 0;
  /* batch: the last batch dim is cuBLAS's batch, the others a host loop */
  int nb = g->nb;
  int64_t L = nb ? g->bshape[nb - 1] : 1;
  int64_t sA = nb ? g->ast[nb - 1] : 0, sB = nb ? g->bst[nb - 1] : 0, sC = nb ? o->st[nb - 1] : 0;
  if (L > 65535) return 0;
  int64_t outer = g->nbatch / (L ? L : 1);
  const int es = dt_size(o->dt);
  for (int64_t z = 0; z < outer; z++) {
    int64_t ao = a->off, bo = b->off, oo = o->off, q = z;
    for (int d = nb - 2; d >= 0; d--) {
      int64_t i = q % g->bshape[d];
      q /= g->bshape[d];
      ao += i * g->ast[d];
      bo += i * g->bst[d];
      oo += i * o->st[d];
    }
    int rc;
    if (o->dt == DT_F32) {
      const float one = 1, zero = 0;
      rc = sgemm(blas, opB, opA, (int)g->N, (int)g->M, (int)g->K, &one, (const float *)(b->p + bo * es), (int)ldb, sB,
                 (const float *)(a->p + ao * es), (int)lda, sA, &zero, (float *)(o->p + oo * es), (int)ldc, sC, (int)L);
    } else {
      const double one = 1, zero = 0;
      rc = dgemm(blas, opB, opA, (int)g->N, (int)g->M, (int)g->K, &one, (const double *)(b->p + bo * es), (int)ldb, sB,
                 (const double *)(a->p + ao * es), (int)lda, sA, &zero, (double *)(o->p + oo * es), (int)ldc, sC, (int)L);
    }
    if (rc != 0) return -rc;
    n_cublas++;
  }
  return 1;
}

cudaError_t lc_matmul(cudaStream_t s, const ctensor *a, const ctensor *b, const ctensor *o) {
  mmargs g;
  g.a = *a;
  g.b = *b;
  g.o = *o;
  g.M = o->shape[o->nd - 2];
  g.N = o->shape[o->nd - 1];
  g.K = a->shape[a->nd - 1];
  g.nb = o->nd - 2;
  g.nbatch = 1;
  for (int d = 0; d < g.nb; d++) {
    g.bshape[d] = o->shape[d];
    g.nbatch *= o->shape[d];
    /* right-aligned broadcast: a missing or size-1 dim of an operand has stride 0 */
    int da = d - (g.nb - (a->nd - 2)), db = d - (g.nb - (b->nd - 2));
    g.ast[d] = da < 0 || a->shape[da] == 1 ? 0 : a->st[da];
    g.bst[d] = db < 0 || b->shape[db] == 1 ? 0 : b->st[db];
  }
  if (g.M == 0 || g.N == 0 || g.nbatch == 0) return cudaSuccess;
  int r = try_cublas(&g);
  if (r < 0) {
    fprintf(stderr, "[loom cuda] cuBLAS gemm failed with status %d\n", -r);
    return cudaErrorUnknown;
  }
  if (r == 1) return cudaGetLastError();
  n_tiled++;
  int64_t colTiles = (g.N + TILE - 1) / TILE, rowTiles = (g.M + TILE - 1) / TILE;
  if (colTiles > 2147483647) return cudaErrorInvalidValue;
  dim3 grid((unsigned)colTiles, (unsigned)(rowTiles < 65535 ? rowTiles : 65535), (unsigned)(g.nbatch < 65535 ? g.nbatch : 65535));
  k_matmul_tiled<<<grid, dim3(TILE, TILE), 0, s>>>(g);
  return cudaGetLastError();
}
