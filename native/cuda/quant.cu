/*
 * quantized_linear (src/graph/ops/quantized.ts) on the CUDA device: y = x · dequant(W)ᵀ (+ b), or
 * the transposed form y = x · dequant(W), for W [N, K] packed as ggml Q8_0 / Q4_0, bitsandbytes
 * NF4 or per-channel int8 (bytes, or the same bytes as int32 words).
 *
 * Two paths, both decoding with quant.cuh's lq_weight (quant.c's float32 values bit for bit):
 * - forward with M ≤ LQ_GEMV_M rows of x (a token at a time): k_quant_gemv decodes W in
 *   registers, a block per weight row, and never stores it;
 * - otherwise (larger M, the transposed form): a kernel decodes the whole weight into a
 *   stream-ordered float32 temporary W [N, K] (N·K·4 bytes for the duration of the instruction),
 *   the product runs through the library's matmul (lc_matmul: cuBLAS SGEMM when loaded, else the
 *   tiled kernel), and a store kernel writes the output's layout.
 * Both add the bias in float32 once, as quant.c does (sum + b).
 *
 * Arithmetic, against QUANT_ERROR_BOUND (quantized.ts): the decode is quant.c's (exact for
 * Q8_0/Q4_0, one rounding for NF4 and int8); the GEMV accumulates in float32 (a fused
 * multiply-add chain per thread, then a tree of 7 levels), SGEMM in float32 in its own order (any
 * order of n float32 additions is within γ_n·S), the tiled kernel in double with one rounding;
 * the bias adds one rounding. The same shapes always take the same path, so eager and lazy runs
 * of one instruction agree bit for bit.
 */
#include "common.cuh"
#include "quant.cuh"

static int64_t numel_of(const ctensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->nd; d++) n *= t->shape[d];
  return n;
}

static unsigned blocks_for(int64_t n) {
  int64_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

/** Position in t's buffer of element i in row-major order over t's shape. */
static inline __device__ int64_t pos_of(const ctensor &t, int64_t i) {
  int64_t pos = t.off;
  for (int d = t.nd - 1; d >= 0; d--) {
    pos += (i % t.shape[d]) * t.st[d];
    i /= t.shape[d];
  }
  return pos;
}

/** W[i / K, i % K] for every i < N·K into the dense float32 w. */
__global__ void k_dequant(int fmt, lq_view q, lq_view sc, int64_t K, int64_t total, float *w) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
    w[i] = lq_weight(fmt, &q, &sc, K, i / K, i % K);
}

/** x (any float32 layout) gathered into dense rows (row-major over its shape). */
__global__ void k_gather_f32(ctensor x, float *dst, int64_t total) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = (float)lc_load(x.p, x.dt, pos_of(x, i));
}

/** out (any layout, row-major element order) = y[i] (+ bias[i % kout], one float32 addition). */
__global__ void k_quant_store(ctensor out, const float *y, ctensor bias, int has_bias, int64_t kout, int64_t total) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    float v = y[i];
    if (has_bias) v = v + (float)lc_load(bias.p, bias.dt, bias.off + (i % kout) * bias.st[0]);
    lc_store(out.p, out.dt, pos_of(out, i), v);
  }
}

/**
 * The forward for M ≤ LQ_GEMV_M rows of x, W decoded in registers (no dense W): a block of
 * LQ_GEMV_T threads per weight row n, each thread's share (quant.cuh lq_gemv_share), a tree over
 * the shares in shared memory, then out[m, n] = sum + b (one float32 addition).
 */
__global__ void k_quant_gemv(int fmt, lq_view q, lq_view sc, int64_t K, int64_t N, const float *x, int64_t xs0, int64_t xs1, int M,
                             ctensor out, ctensor bias, int has_bias) {
  __shared__ float part[LQ_GEMV_M][LQ_GEMV_T];
  const int t = threadIdx.x;
  for (int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    float acc[LQ_GEMV_M];
    lq_gemv_share(fmt, &q, &sc, K, n, x, xs0, xs1, M, t, LQ_GEMV_T, acc);
    for (int m = 0; m < M; m++) part[m][t] = acc[m];
    __syncthreads();
    for (int h = LQ_GEMV_T / 2; h > 0; h >>= 1) {
      if (t < h)
        for (int m = 0; m < M; m++) part[m][t] += part[m][t + h];
      __syncthreads();
    }
    if (t == 0) {
      const float b = has_bias ? (float)lc_load(bias.p, bias.dt, bias.off + n * bias.st[0]) : 0.0f;
      for (int m = 0; m < M; m++) {
        const float v = has_bias ? part[m][0] + b : part[m][0];
        lc_store(out.p, out.dt, pos_of(out, m * N + n), v);
      }
    }
    __syncthreads(); /* part is rewritten for the next row */
  }
}

cudaError_t lc_quantized_linear(cudaStream_t s, int fmt, int transposed, int has_bias, const ctensor *out, const ctensor *ins) {
  const ctensor *x = &ins[0], *qw = &ins[1];
  const int scales = lq_has_scales(fmt);
  const ctensor none = {}, *bias = has_bias ? &ins[2 + scales] : &none;
  const int64_t N = qw->shape[0], rb = qw->shape[1] * (qw->dt == DT_I32 ? 4 : 1);
  const int64_t K = rb / lq_block_bytes(fmt) * lq_block(fmt);
  const int64_t kin = transposed ? N : K, kout = transposed ? K : N;
  const int64_t total = numel_of(out), M = kout ? total / kout : 0;
  if (total == 0) return cudaSuccess;
  lq_view q = {qw->p, qw->dt, qw->off, qw->st[0], qw->st[1]};
  lq_view sc = {0, DT_F32, 0, 0, 0};
  if (scales) sc = lq_view{ins[2].p, ins[2].dt, ins[2].off, ins[2].st[0], 0};
  float *W = nullptr, *Y = nullptr, *X = nullptr;
  cudaError_t e = cudaSuccess;
  /* x as rows [M, kin]: in place when its leading dims collapse into one stride, else a dense copy */
  ctensor x2;
  if (!lc_as_rows(x, &x2)) {
    e = cudaMallocAsync((void **)&X, (size_t)(M * kin > 0 ? M * kin : 1) * sizeof(float), s);
    if (e == cudaSuccess && M * kin > 0) {
      k_gather_f32<<<blocks_for(M * kin), 256, 0, s>>>(*x, X, M * kin);
      e = cudaGetLastError();
    }
    x2 = lc_dense2((uint64_t)(uintptr_t)X, DT_F32, M, kin);
  }
  if (e == cudaSuccess && !transposed && M <= LQ_GEMV_M) {
    /* small M (decoding a token): W decoded in registers, never stored */
    const int64_t grid = N < 65535 * 16 ? N : 65535 * 16;
    k_quant_gemv<<<(unsigned)(grid > 0 ? grid : 1), LQ_GEMV_T, 0, s>>>(fmt, q, sc, K, N, (const float *)(uintptr_t)x2.p + x2.off, x2.st[0],
                                                                         x2.st[1], (int)M, *out, *bias, has_bias);
    e = cudaGetLastError();
  } else if (e == cudaSuccess) {
    /* W decoded into a temporary, then the library's matmul and the store (with the bias) */
    e = cudaMallocAsync((void **)&W, (size_t)(N * K > 0 ? N * K : 1) * sizeof(float), s);
    if (e == cudaSuccess) e = cudaMallocAsync((void **)&Y, (size_t)total * sizeof(float), s);
    if (e == cudaSuccess && N * K > 0) {
      k_dequant<<<blocks_for(N * K), 256, 0, s>>>(fmt, q, sc, K, N * K, W);
      e = cudaGetLastError();
    }
    if (e == cudaSuccess) {
      /* forward: x [M, K] · Wᵀ (W's transpose as a view: strides [1, K]); transposed: x [M, N] · W */
      ctensor w = lc_dense2((uint64_t)(uintptr_t)W, DT_F32, N, K), yt = lc_dense2((uint64_t)(uintptr_t)Y, DT_F32, M, kout);
      if (!transposed) {
        w.shape[0] = K; w.shape[1] = N;
        w.st[0] = 1; w.st[1] = K;
      }
      e = lc_matmul(s, &x2, &w, &yt);
    }
    if (e == cudaSuccess) {
      k_quant_store<<<blocks_for(total), 256, 0, s>>>(*out, Y, *bias, has_bias, kout, total);
      e = cudaGetLastError();
    }
  }
  if (W) cudaFreeAsync(W, s);
  if (Y) cudaFreeAsync(Y, s);
  if (X) cudaFreeAsync(X, s);
  return e;
}
