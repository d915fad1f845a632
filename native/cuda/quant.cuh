/*
 * Decoding of quantized_linear's packed weights (src/graph/ops/quantized.ts) for the CUDA
 * library, written once as __host__ __device__ functions: quant.cu's dequantize kernel calls them
 * on the device, and tests/cuda/quant_decode.test.ts compiles them for the host (nvcc, or a plain
 * C++ compiler: no CUDA header is needed) and checks every format bit for bit against the CPU
 * kernel (native/kernels/quant.c decode_chunk) on random packed blocks.
 *
 * The value of W[n, k] is quant.c's float32 product, one IEEE multiplication (the library is
 * built with --fmad=false, and nothing here is added):
 *   q8_0  d·(float)q,        d the block's fp16 scale (little endian), q int8
 *   q4_0  d·(float)(q − 8),  q byte j's low nibble for element j < 16, its high nibble for j + 16
 *   nf4   NF4[q]·absmax[(n·K + k) / 64], q the high nibble for even k, the low one for odd k
 *   int8  scale[n]·(float)q
 * Exact for q8_0/q4_0 (an fp16 times a small integer); one rounding for nf4 and int8, as the
 * CPU kernel's (the js reference multiplies in float64: QUANT_ERROR_BOUND's `extra` covers it).
 *
 * Operands are strided views (the command buffer's tensors): qweight uint8/int8 [N, row bytes]
 * or the same bytes as little-endian int32 words [N, row bytes / 4]; scales float32 1-D.
 */
#ifndef LOOM_CUDA_QUANT_CUH
#define LOOM_CUDA_QUANT_CUH

#include <math.h>
#include <stdint.h>

#include "../kernels/scalar_bits.h"

/* quantized_linear's format codes (src/backends/native/program.ts QUANT_FORMAT_CODE, quant.c) */
enum { LQ_Q8_0 = 0, LQ_Q4_0 = 1, LQ_NF4 = 2, LQ_INT8 = 3 };

/** Elements per block of a format (0 for an unknown code). */
static inline LOOM_HD int lq_block(int fmt) { return fmt == LQ_Q8_0 || fmt == LQ_Q4_0 ? 32 : fmt == LQ_NF4 ? 64 : fmt == LQ_INT8 ? 1 : 0; }
/** Bytes per block of a format in qweight (0 for an unknown code). */
static inline LOOM_HD int lq_block_bytes(int fmt) { return fmt == LQ_Q8_0 ? 34 : fmt == LQ_Q4_0 ? 18 : fmt == LQ_NF4 ? 32 : fmt == LQ_INT8 ? 1 : 0; }
/** Whether a format takes a scales operand (nf4 absmax, int8 per-row scale). */
static inline LOOM_HD int lq_has_scales(int fmt) { return fmt == LQ_NF4 || fmt == LQ_INT8; }

/** bitsandbytes' NF4 code book (csrc/kernels.cu dDequantizeNF4), the float32 values quant.c holds. */
static inline LOOM_HD float lq_nf4(int q) {
  switch (q & 15) {
    case 0: return -1.0f;
    case 1: return -0.6961928009986877f;
    case 2: return -0.5250730514526367f;
    case 3: return -0.39491748809814453f;
    case 4: return -0.28444138169288635f;
    case 5: return -0.18477343022823334f;
    case 6: return -0.09105003625154495f;
    case 7: return 0.0f;
    case 8: return 0.07958029955625534f;
    case 9: return 0.16093020141124725f;
    case 10: return 0.24611230194568634f;
    case 11: return 0.33791524171829224f;
    case 12: return 0.44070982933044434f;
    case 13: return 0.5626170039176941f;
    case 14: return 0.7229568362236023f;
    default: return 1.0f;
  }
}

/** A strided view as the decoder reads it: element (i, j) at p + (off + i·s0 + j·s1)·size(dt). */
typedef struct {
  uint64_t p; /* address (device or host) */
  int dt;     /* DT_U8, DT_I8, DT_I32 (qweight); DT_F32 (scales) */
  int64_t off, s0, s1;
} lq_view;

/** Byte j (0..255) of packed row n: a byte element, or byte j & 3 of a little-endian int32 word. */
static inline LOOM_HD uint32_t lq_byte(const lq_view *q, int64_t n, int64_t j) {
  if (q->dt == DT_I32) {
    uint32_t w = (uint32_t)((const int32_t *)q->p)[q->off + n * q->s0 + (j >> 2) * q->s1];
    return (w >> ((j & 3) * 8)) & 255u;
  }
  return ((const uint8_t *)q->p)[q->off + n * q->s0 + j * q->s1];
}

/** Scale element i of a float32 1-D view. */
static inline LOOM_HD float lq_scale(const lq_view *s, int64_t i) { return ((const float *)s->p)[s->off + i * s->s0]; }

/** The fp16 block scale at bytes j, j + 1 of row n (little endian), as quant.c's half_at. */
static inline LOOM_HD float lq_half(const lq_view *q, int64_t n, int64_t j) {
  return f16_to_f32((uint16_t)(lq_byte(q, n, j) | (lq_byte(q, n, j + 1) << 8)));
}

/** W[n, k] of the format `fmt` for a weight of K columns (see the header comment). */
static inline LOOM_HD float lq_weight(int fmt, const lq_view *q, const lq_view *sc, int64_t K, int64_t n, int64_t k) {
  switch (fmt) {
    case LQ_Q8_0: {
      int64_t b = (k / 32) * 34;
      float d = lq_half(q, n, b);
      return d * (float)(int8_t)(uint8_t)lq_byte(q, n, b + 2 + k % 32);
    }
    case LQ_Q4_0: {
      int64_t b = (k / 32) * 18;
      int i = (int)(k % 32);
      uint32_t v = lq_byte(q, n, b + 2 + (i & 15));
      float d = lq_half(q, n, b);
      return d * (float)((int)(i < 16 ? v & 15u : v >> 4) - 8);
    }
    case LQ_NF4: {
      uint32_t v = lq_byte(q, n, k >> 1);
      return lq_nf4((int)((k & 1) == 0 ? v >> 4 : v & 15u)) * lq_scale(sc, (n * K + k) / 64);
    }
    default:
      return lq_scale(sc, n) * (float)(int8_t)(uint8_t)lq_byte(q, n, k);
  }
}

/** x rows at or below which the forward decodes W in registers (quant.cu k_quant_gemv: no dense W). */
#define LQ_GEMV_M 4
/** Threads per weight row in that kernel. */
#define LQ_GEMV_T 128

/**
 * Thread t's share of the GEMV: acc[m] = Σ x[m, k]·W[n, k] over k = t, t + T, ... < K in that
 * order (one fused multiply-add each), for M ≤ LQ_GEMV_M rows of x at x + m·xs0 + k·xs1. The
 * kernel adds the T shares in a tree (h = T/2, T/4, ..., 1: part[t] += part[t + h]) and the bias.
 */
static inline LOOM_HD void lq_gemv_share(int fmt, const lq_view *q, const lq_view *sc, int64_t K, int64_t n, const float *x, int64_t xs0,
                                         int64_t xs1, int M, int t, int T, float *acc) {
  for (int m = 0; m < M; m++) acc[m] = 0.0f;
  for (int64_t k = t; k < K; k += T) {
    const float w = lq_weight(fmt, q, sc, K, n, k);
    for (int m = 0; m < M; m++) acc[m] = fmaf(x[m * xs0 + k * xs1], w, acc[m]);
  }
}

#endif
