/*
 * quantized_linear (src/graph/ops/quantized.ts): y = x · dequant(W)ᵀ (+ b), or the transposed
 * form y = x · dequant(W), for W [N, K] packed as ggml Q8_0 / Q4_0, bitsandbytes NF4 or
 * per-channel int8. The dense weight is never built: rows are decoded 32 elements at a time into
 * registers (GEMV, small M) or, for M ≥ PANEL_M, a panel of PANEL_N rows at a time into per-thread
 * scratch that a float32 GEMM consumes.
 *
 * Arithmetic (the bound in quantized.ts): each decoded weight is d·q in float32 (exact for
 * Q8_0/Q4_0: an fp16 d times a small integer; one rounding for NF4 and int8, as bitsandbytes'
 * float product), products accumulate in 2×16 float32 lanes with fused multiply-adds, the lanes
 * are added in a tree and the bias once (the transposed kernel: one fma chain per output over n;
 * the panel paths: sgemm's order). Every path is a fixed function of the shapes (the thread
 * split never changes an element's order), so eager and lazy runs agree bit for bit.
 *
 * attrs: [format (0 q8_0, 1 q4_0, 2 nf4, 3 int8), transposed, has_bias]
 * inputs: x float32 [..., kin], qweight uint8/int8 [N, row bytes] or int32 words [N, row bytes / 4], scales float32 (nf4, int8), bias float32 [N]
 */
#include "common.h"
#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

enum { QF_Q8_0 = 0, QF_Q4_0 = 1, QF_NF4 = 2, QF_INT8 = 3 };
/** Rows of x at or above which the panel + GEMM path runs (below: decode in registers per row tile). */
#define PANEL_M 16
/** Weight rows (forward) or columns (transposed) decoded per panel. */
#define PANEL_N 128
/** x rows sharing one decoded chunk in the register path. */
#define MR 4

/* bitsandbytes' NF4 code book (csrc/kernels.cu dDequantizeNF4), as float32 */
static const float NF4[16] = {
  -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f, -0.18477343022823334f,
  -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
  0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

typedef struct {
  int fmt, has_bias;
  int64_t M, N, K, rb;      /* x rows, W rows, W cols, bytes per packed row */
  const uint8_t *q;         /* dense [N, rb] */
  const float *sc;          /* dense scales (nf4 absmax, int8 per-row) or NULL */
  const float *x;           /* dense [M, kin] */
  float *out;               /* dense [M, kout] */
  const char *bias; int64_t bst; int bdt;
} qctx;

static inline float half_at(const uint8_t *p) {
  uint16_t h = (uint16_t)(p[0] | (p[1] << 8));
#ifdef __F16C__
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

/** Elements [32c, 32c + len) of row n, decoded into w (len ≤ 32; the rest of w untouched). Portable form. */
static inline void decode_chunk(const qctx *C, int64_t n, int64_t c, int len, float *w) {
  const uint8_t *row = C->q + n * C->rb;
  switch (C->fmt) {
    case QF_Q8_0: {
      const uint8_t *b = row + c * 34;
      float d = half_at(b);
      for (int i = 0; i < 32; i++) w[i] = d * (float)(int8_t)b[2 + i];
      break;
    }
    case QF_Q4_0: {
      const uint8_t *b = row + c * 18;
      float d = half_at(b);
      for (int i = 0; i < 16; i++) {
        w[i] = d * (float)((int)(b[2 + i] & 15) - 8);
        w[i + 16] = d * (float)((int)(b[2 + i] >> 4) - 8);
      }
      break;
    }
    case QF_NF4: {
      const uint8_t *b = row + c * 16;
      float a = C->sc[(n * C->K + c * 32) / 64];
      for (int i = 0; i < 16; i++) {
        w[2 * i] = NF4[b[i] >> 4] * a;
        w[2 * i + 1] = NF4[b[i] & 15] * a;
      }
      break;
    }
    default: {
      const int8_t *b = (const int8_t *)row + c * 32;
      float s = C->sc[n];
      for (int i = 0; i < len; i++) w[i] = s * (float)b[i];
    }
  }
}

#ifdef __AVX512F__
/** A full 32-element chunk as two vectors (elements 0..15, 16..31). */
static inline void decode_chunk_v(const qctx *C, int64_t n, int64_t c, __m512 *w0, __m512 *w1) {
  const uint8_t *row = C->q + n * C->rb;
  switch (C->fmt) {
    case QF_Q8_0: {
      const uint8_t *b = row + c * 34;
      __m512 d = _mm512_set1_ps(half_at(b));
      *w0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2)))));
      *w1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 18)))));
      break;
    }
    case QF_Q4_0: {
      const uint8_t *b = row + c * 18;
      __m512 d = _mm512_set1_ps(half_at(b)), eight = _mm512_set1_ps(8.0f);
      __m128i v = _mm_loadu_si128((const __m128i *)(b + 2)), m = _mm_set1_epi8(15);
      __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
      *w0 = _mm512_mul_ps(d, _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(lo)), eight));
      *w1 = _mm512_mul_ps(d, _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(hi)), eight));
      break;
    }
    case QF_NF4: {
      const uint8_t *b = row + c * 16;
      __m512 a = _mm512_set1_ps(C->sc[(n * C->K + c * 32) / 64]), t = _mm512_loadu_ps(NF4);
      __m128i v = _mm_loadu_si128((const __m128i *)b), m = _mm_set1_epi8(15);
      __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
      /* element 2j is byte j's high nibble, 2j+1 its low one */
      __m128i e0 = _mm_unpacklo_epi8(hi, lo), e1 = _mm_unpackhi_epi8(hi, lo);
      *w0 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(e0), t), a);
      *w1 = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_cvtepu8_epi32(e1), t), a);
      break;
    }
    default: {
      const int8_t *b = (const int8_t *)row + c * 32;
      __m512 s = _mm512_set1_ps(C->sc[n]);
      *w0 = _mm512_mul_ps(s, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)b))));
      *w1 = _mm512_mul_ps(s, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 16)))));
    }
  }
}
#endif

/** Row n of W decoded into w[K] (the panel path). */
static void decode_row(const qctx *C, int64_t n, int64_t k0, int64_t k1, float *w) {
  for (int64_t c = k0 / 32; c * 32 < k1; c++) {
    int len = (int)(C->K - c * 32 < 32 ? C->K - c * 32 : 32);
#ifdef __AVX512F__
    if (len == 32) {
      __m512 w0, w1;
      decode_chunk_v(C, n, c, &w0, &w1);
      _mm512_storeu_ps(w + c * 32 - k0, w0);
      _mm512_storeu_ps(w + c * 32 - k0 + 16, w1);
      continue;
    }
#endif
    decode_chunk(C, n, c, len, w + c * 32 - k0);
  }
}

static inline float bias_at(const qctx *C, int64_t n) {
  return C->has_bias ? (float)load1(C->bias, C->bdt, n * C->bst) : 0.0f;
}

/* ---- forward, register path: rows [n0, n1) of W against every x row, MR rows at a time ---- */
static void fwd_rows(void *vc, int64_t n0, int64_t n1) {
  const qctx *C = vc;
  int64_t K = C->K, full = K / 32;
  for (int64_t n = n0; n < n1; n++) {
    for (int64_t m0 = 0; m0 < C->M; m0 += MR) {
      int mr = (int)(C->M - m0 < MR ? C->M - m0 : MR);
      float sum[MR];
#ifdef __AVX512F__
      /* two accumulators per x row (elements 0..15 and 16..31 of each chunk): two independent
       * fma chains instead of one, so the fma latency does not bound a row */
      __m512 acc0[MR], acc1[MR];
      for (int i = 0; i < MR; i++) acc0[i] = acc1[i] = _mm512_setzero_ps();
      for (int64_t c = 0; c < full; c++) {
        __m512 w0, w1;
        decode_chunk_v(C, n, c, &w0, &w1);
        for (int i = 0; i < mr; i++) {
          const float *xr = C->x + (m0 + i) * K + c * 32;
          acc0[i] = _mm512_fmadd_ps(_mm512_loadu_ps(xr), w0, acc0[i]);
          acc1[i] = _mm512_fmadd_ps(_mm512_loadu_ps(xr + 16), w1, acc1[i]);
        }
      }
      for (int i = 0; i < mr; i++) sum[i] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[i], acc1[i]));
#else
      float acc[MR][16];
      memset(acc, 0, sizeof acc);
      float w[32];
      for (int64_t c = 0; c < full; c++) {
        decode_chunk(C, n, c, 32, w);
        for (int i = 0; i < mr; i++) {
          const float *xr = C->x + (m0 + i) * K + c * 32;
          for (int j = 0; j < 32; j++) acc[i][j & 15] += xr[j] * w[j];
        }
      }
      for (int i = 0; i < mr; i++) {
        float t[16];
        memcpy(t, acc[i], sizeof t);
        for (int h = 8; h >= 1; h /= 2)
          for (int j = 0; j < h; j++) t[j] += t[j + h];
        sum[i] = t[0];
      }
#endif
      if (full * 32 < K) { /* int8's partial last chunk */
        float w[32];
        int len = (int)(K - full * 32);
        decode_chunk(C, n, full, len, w);
        for (int i = 0; i < mr; i++) {
          const float *xr = C->x + (m0 + i) * K + full * 32;
          float t = 0;
          for (int j = 0; j < len; j++) t = fmaf(xr[j], w[j], t);
          sum[i] += t;
        }
      }
      float b = bias_at(C, n);
      for (int i = 0; i < mr; i++) C->out[(m0 + i) * C->N + n] = sum[i] + b;
    }
  }
}

/* ---- forward, panel path: PANEL_N rows of W per task decoded into scratch, one GEMM ---- */
static void fwd_panels(void *vc, int64_t p0, int64_t p1) {
  const qctx *C = vc;
  for (int64_t p = p0; p < p1; p++) {
    int64_t n0 = p * PANEL_N, nb = C->N - n0 < PANEL_N ? C->N - n0 : PANEL_N;
    float *w = loom_scratch(SCR_T5, (size_t)(nb * C->K) * sizeof(float));
    for (int64_t i = 0; i < nb; i++) decode_row(C, n0 + i, 0, C->K, w + i * C->K);
    loom_gemm_f32(0, 1, C->M, nb, C->K, 1.0f, C->x, C->K, w, C->K, 0.0f, C->out + n0, C->N);
    if (C->has_bias)
      for (int64_t m = 0; m < C->M; m++)
        for (int64_t i = 0; i < nb; i++) C->out[m * C->N + n0 + i] += bias_at(C, n0 + i);
  }
}

/* ---- transposed: out[m, k] = Σ_n x[m, n]·W[n, k]; tasks own column ranges of PANEL_N ---- */
static void bwd_cols(void *vc, int64_t p0, int64_t p1) {
  const qctx *C = vc;
  int64_t N = C->N, K = C->K;
  for (int64_t p = p0; p < p1; p++) {
    int64_t k0 = p * PANEL_N, kc = K - k0 < PANEL_N ? K - k0 : PANEL_N;
    if (C->M < PANEL_M) {
      float *w = loom_scratch(SCR_T5, PANEL_N * sizeof(float));
      for (int64_t m = 0; m < C->M; m++) memset(C->out + m * K + k0, 0, (size_t)kc * sizeof(float));
      for (int64_t n = 0; n < N; n++) {
        decode_row(C, n, k0, k0 + kc, w);
        for (int64_t m = 0; m < C->M; m++) {
          float g = C->x[m * N + n];
          float *o = C->out + m * K + k0;
          int64_t j = 0;
#ifdef __AVX512F__
          __m512 gv = _mm512_set1_ps(g);
          for (; j + 16 <= kc; j += 16) _mm512_storeu_ps(o + j, _mm512_fmadd_ps(gv, _mm512_loadu_ps(w + j), _mm512_loadu_ps(o + j)));
#endif
          for (; j < kc; j++) o[j] = fmaf(g, w[j], o[j]);
        }
      }
    } else {
      float *w = loom_scratch(SCR_T5, (size_t)(PANEL_N * kc) * sizeof(float));
      for (int64_t n0 = 0; n0 < N; n0 += PANEL_N) {
        int64_t nb = N - n0 < PANEL_N ? N - n0 : PANEL_N;
        for (int64_t i = 0; i < nb; i++) decode_row(C, n0 + i, k0, k0 + kc, w + i * kc);
        loom_gemm_f32(0, 0, C->M, kc, nb, 1.0f, C->x + n0, N, w, kc, n0 ? 1.0f : 0.0f, C->out + k0, K);
      }
    }
  }
}

/** `src` as a dense row-major buffer of its dtype (itself when it already is one), in kernel scratch `slot`. */
static const char *dense_or_copy(const tdesc *t, int slot) {
  int64_t s = 1;
  int dense = 1;
  for (int d = t->nd - 1; d >= 0; d--) {
    if (t->shape[d] != 1 && t->st[d] != s) dense = 0;
    s *= t->shape[d];
  }
  if (dense) return t->p + (size_t)t->off * dt_size(t->dt);
  char *buf = loom_scratch(slot, (size_t)(s > 0 ? s : 1) * dt_size(t->dt));
  tdesc d = dense_desc(buf, t->dt, t->nd, t->shape);
  copy_strided(&d, t);
  return buf;
}

int k_quantized_linear(const loom_instr *I) {
  qctx C;
  C.fmt = (int)I->attr[0];
  int transposed = I->attr[1] != 0;
  C.has_bias = I->attr[2] != 0;
  const tdesc *x = &I->in[0], *qw = &I->in[1], *o = &I->out;
  int has_scales = C.fmt == QF_NF4 || C.fmt == QF_INT8;
  static const int BLOCK[4] = {32, 32, 64, 1}, BYTES[4] = {34, 18, 32, 1};
  C.N = qw->shape[0];
  C.rb = qw->shape[1] * (qw->dt == DT_I32 ? 4 : 1); /* int32 words: the same bytes, little endian */
  C.K = C.rb / BYTES[C.fmt] * BLOCK[C.fmt];
  int64_t kin = transposed ? C.N : C.K, kout = transposed ? C.K : C.N;
  int64_t total = t_numel(o);
  C.M = kout ? total / kout : 0;
  if (total == 0) return 0;
  C.x = (const float *)dense_or_copy(x, SCR_K0);
  C.q = (const uint8_t *)dense_or_copy(qw, SCR_K1);
  C.sc = has_scales ? (const float *)dense_or_copy(&I->in[2], SCR_K2) : NULL;
  if (C.has_bias) {
    const tdesc *b = &I->in[2 + has_scales];
    C.bias = b->p + (size_t)b->off * dt_size(b->dt); C.bst = b->st[0]; C.bdt = b->dt;
  } else { C.bias = NULL; C.bst = 0; C.bdt = 0; }
  C.out = (float *)(o->p + (size_t)o->off * dt_size(o->dt));
  if (kin == 0) { memset(C.out, 0, (size_t)total * sizeof(float)); if (!transposed && C.has_bias) for (int64_t i = 0; i < total; i++) C.out[i] = bias_at(&C, i % C.N); return 0; }
  if (transposed) {
    loom_parallel_for((C.K + PANEL_N - 1) / PANEL_N, 1, bwd_cols, &C);
  } else if (C.M >= PANEL_M) {
    loom_parallel_for((C.N + PANEL_N - 1) / PANEL_N, 1, fwd_panels, &C);
  } else {
    /* memory-bound: ~64 KiB of packed weight per chunk keeps every thread streaming */
    int64_t grain = 65536 / (C.rb > 0 ? C.rb : 1) + 1;
    loom_parallel_for(C.N, grain, fwd_rows, &C);
  }
  return 0;
}
