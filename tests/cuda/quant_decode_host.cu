/*
 * Host driver for tests/cuda/quant_decode.test.ts: runs the CUDA library's weight decoder
 * (native/cuda/quant.cuh lq_weight, the function quant.cu's dequantize kernel calls on the device)
 * on the host, over packed weights the test wrote, in four operand layouts, and writes the
 * decoded float32 values for the test to compare bit for bit with the CPU kernel (quant.c) and
 * an independent decoding.
 *
 *   quant_decode_host IN OUT
 * IN:  int64 [fmt, N, K, rb, nscales], then N·rb bytes (row-major), then nscales float32,
 *      then int64 M (≤ LQ_GEMV_M), M·K float32 x (row-major), N float32 bias.
 * OUT: 4 × N·K float32, W[n, k] row-major, for the layouts:
 *   0 the byte tensor (uint8; int8 for the int8 format), dense;
 *   1 the same bytes as little-endian int32 words [N, rb/4], dense;
 *   2 the bytes column-major at offset 7 (strides [1, N]); scales at offset 3, stride 2;
 *   3 int32 words at offset 5 with padded rows (stride rb/4 + 3); scales at offset 3, stride 2.
 * then 2 × M·N float32: quant.cu's k_quant_gemv emulated on the host (every thread's
 * lq_gemv_share, the same tree over the shares, + bias) with layout 0 and dense x, and with
 * layout 3 and x stored column-major (strides [1, M]): the same arithmetic, so the same bits.
 * Compiled with nvcc (-x cu: the functions are __host__ __device__) or a plain C++ compiler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "../../native/cuda/quant.cuh"

/** k_quant_gemv's arithmetic for every row n: LQ_GEMV_T shares, the tree, then + bias. */
static void gemv_host(int fmt, const lq_view *q, const lq_view *sc, int64_t K, int64_t N, const float *x, int64_t xs0, int64_t xs1, int M,
                      const float *bias, float *out) {
  static float part[LQ_GEMV_M][LQ_GEMV_T];
  for (int64_t n = 0; n < N; n++) {
    for (int t = 0; t < LQ_GEMV_T; t++) {
      float acc[LQ_GEMV_M];
      lq_gemv_share(fmt, q, sc, K, n, x, xs0, xs1, M, t, LQ_GEMV_T, acc);
      for (int m = 0; m < M; m++) part[m][t] = acc[m];
    }
    /* a level's writes (t < h) and reads (t + h >= h) never overlap: any thread order is the device's */
    for (int h = LQ_GEMV_T / 2; h > 0; h >>= 1)
      for (int t = 0; t < h; t++)
        for (int m = 0; m < M; m++) part[m][t] += part[m][t + h];
    for (int m = 0; m < M; m++) out[m * N + n] = part[m][0] + bias[n];
  }
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: %s IN OUT\n", argv[0]); return 2; }
  FILE *f = fopen(argv[1], "rb");
  if (!f) { perror(argv[1]); return 2; }
  int64_t h[5];
  if (fread(h, sizeof h, 1, f) != 1) { fprintf(stderr, "short header\n"); return 2; }
  const int fmt = (int)h[0];
  const int64_t N = h[1], K = h[2], rb = h[3], ns = h[4];
  if (rb % 4 != 0 || lq_block(fmt) == 0 || rb != K / lq_block(fmt) * lq_block_bytes(fmt)) { fprintf(stderr, "bad layout\n"); return 2; }
  std::vector<uint8_t> bytes((size_t)(N * rb));
  std::vector<float> sc((size_t)(ns > 0 ? ns : 1));
  if (fread(bytes.data(), 1, bytes.size(), f) != bytes.size() || (ns && fread(sc.data(), sizeof(float), (size_t)ns, f) != (size_t)ns)) {
    fprintf(stderr, "short data\n");
    return 2;
  }
  int64_t M = 0;
  if (fread(&M, sizeof M, 1, f) != 1 || M < 1 || M > LQ_GEMV_M) { fprintf(stderr, "bad M\n"); return 2; }
  std::vector<float> x((size_t)(M * K)), bias((size_t)N);
  if (fread(x.data(), sizeof(float), x.size(), f) != x.size() || fread(bias.data(), sizeof(float), bias.size(), f) != bias.size()) {
    fprintf(stderr, "short x/bias\n");
    return 2;
  }
  fclose(f);
  const int bdt = fmt == LQ_INT8 ? DT_I8 : DT_U8;
  const int64_t wpr = rb / 4; /* words per row */

  /* layout 1: words, dense; layout 2: column-major bytes; layout 3: padded words; strided scales */
  std::vector<int32_t> words((size_t)(N * wpr));
  memcpy(words.data(), bytes.data(), bytes.size()); /* little-endian host: byte j of a row is byte j & 3 of word j >> 2 */
  std::vector<uint8_t> colmajor((size_t)(7 + N * rb));
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < rb; j++) colmajor[(size_t)(7 + n + j * N)] = bytes[(size_t)(n * rb + j)];
  const int64_t pad = wpr + 3;
  std::vector<int32_t> padded((size_t)(5 + N * pad), -1);
  for (int64_t n = 0; n < N; n++)
    for (int64_t w = 0; w < wpr; w++) padded[(size_t)(5 + n * pad + w)] = words[(size_t)(n * wpr + w)];
  std::vector<float> scs((size_t)(3 + 2 * (ns > 0 ? ns : 1)), -7.0f);
  for (int64_t i = 0; i < ns; i++) scs[(size_t)(3 + 2 * i)] = sc[(size_t)i];

  const lq_view qs[4] = {
    {(uint64_t)(uintptr_t)bytes.data(), bdt, 0, rb, 1},
    {(uint64_t)(uintptr_t)words.data(), DT_I32, 0, wpr, 1},
    {(uint64_t)(uintptr_t)colmajor.data(), bdt, 7, 1, N},
    {(uint64_t)(uintptr_t)padded.data(), DT_I32, 5, pad, 1},
  };
  const lq_view ss[4] = {
    {(uint64_t)(uintptr_t)sc.data(), DT_F32, 0, 1, 0},
    {(uint64_t)(uintptr_t)sc.data(), DT_F32, 0, 1, 0},
    {(uint64_t)(uintptr_t)scs.data(), DT_F32, 3, 2, 0},
    {(uint64_t)(uintptr_t)scs.data(), DT_F32, 3, 2, 0},
  };
  std::vector<float> out((size_t)(4 * N * K + 2 * M * N));
  for (int l = 0; l < 4; l++)
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < K; k++) out[(size_t)(l * N * K + n * K + k)] = lq_weight(fmt, &qs[l], &ss[l], K, n, k);
  std::vector<float> xcol((size_t)(M * K));
  for (int64_t m = 0; m < M; m++)
    for (int64_t k = 0; k < K; k++) xcol[(size_t)(m + k * M)] = x[(size_t)(m * K + k)];
  gemv_host(fmt, &qs[0], &ss[0], K, N, x.data(), K, 1, (int)M, bias.data(), out.data() + 4 * N * K);
  gemv_host(fmt, &qs[3], &ss[3], K, N, xcol.data(), 1, M, (int)M, bias.data(), out.data() + 4 * N * K + M * N);
  FILE *o = fopen(argv[2], "wb");
  if (!o || fwrite(out.data(), sizeof(float), out.size(), o) != out.size()) { fprintf(stderr, "cannot write %s\n", argv[2]); return 2; }
  fclose(o);
  return 0;
}
