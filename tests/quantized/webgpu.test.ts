/**
 * quantized_linear on the webgpu device: every format against the float64
 * dequantize-then-matmul (helpers.ts) within QUANT_ERROR_BOUND, M = 1 and M > 1, odd N, the
 * transposed kernel through the gradient to x, eager == lazy, and a strided x.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import type { QuantFormat } from "../../src/graph/ops/quantized.ts";
import { quantized_linear } from "../../src/lazy/quantized_ops.ts";
import { WEBGPU } from "../backends.ts";
import { dense, operands, outOfBound, randomPacked, reference, rng } from "./helpers.ts";

const G = (t: loom.Tensor) => t.to("webgpu");
const FORMATS: readonly [QuantFormat, number][] = [["q8_0", 96], ["q4_0", 96], ["nf4", 128], ["int8", 45]];

function randomX(M: number, K: number, seed: number): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: M * K }, () => Math.fround(r() * 4 - 2));
}

describe.if(WEBGPU)("quantized_linear on webgpu", () => {
  for (const [format, K] of FORMATS) {
    test(`${format} K=${K}: forward (M = 1, 5; bias), gradient to x, eager == lazy, within the bound`, () => {
      const N = 19;
      const p = randomPacked(format, N, K, 31);
      const W = dense(p);
      const ops = operands(p);
      const qweight = G(ops.qweight), scales = ops.scales ? G(ops.scales) : null;
      const b = randomX(1, N, 2);
      for (const M of [1, 5]) {
        const xs = randomX(M, K, M);
        const x = G(loom.tensor(xs).reshape([M, K])).requires_grad_(true);
        const bias = G(loom.tensor(b));
        const y = quantized_linear(x, qweight, { format, scales, bias });
        expect(String(y.device)).toBe("webgpu");
        const { ref, S } = reference(xs, M, W, N, K, b);
        expect(outOfBound(y.dataSync(), ref, S, K)).toEqual([]);
        const yl = quantized_linear(G(loom.tensor(xs).reshape([M, K])).lazy(), qweight, { format, scales, bias });
        expect(outOfBound(yl.eval().dataSync(), ref, S, K)).toEqual([]);
        const gs = randomX(M, N, 7);
        y.mul(G(loom.tensor(gs).reshape([M, N]))).sum().backward();
        const t = reference(gs, M, W, N, K, null, true);
        expect(outOfBound(x.grad!.dataSync(), t.ref, t.S, N)).toEqual([]);
      }
    }, 60_000);
  }

  test("qweight as int32 words (4 bytes per element on the GPU, the packed size) equals the byte form", () => {
    for (const [format] of FORMATS) {
      const K = 128, N = 6;
      const p = randomPacked(format, N, K, 9);
      const ops = operands(p);
      const scales = ops.scales ? G(ops.scales) : null;
      const x = G(loom.tensor(randomX(2, K, 4)).reshape([2, K]));
      const words = loom.packed_words(ops.qweight).to("webgpu");
      const { ref, S } = reference(Array.from(x.dataSync()), 2, dense(p), N, K, null);
      expect(outOfBound(quantized_linear(x, words, { format, scales }).dataSync(), ref, S, K)).toEqual([]);
    }
  }, 60_000);

  test("a transposed (strided) x is read through a dense copy", () => {
    const K = 64, N = 5, M = 3;
    const p = randomPacked("q4_0", N, K, 8);
    const xs = randomX(K, M, 1); // x = xsᵀ, [M, K] with strides [1, M]
    const x = G(loom.tensor(xs).reshape([K, M])).transpose(0, 1);
    const y = quantized_linear(x, G(operands(p).qweight), { format: "q4_0" });
    const xt = Float32Array.from({ length: M * K }, (_, i) => xs[(i % K) * M + Math.floor(i / K)]!);
    const { ref, S } = reference(xt, M, dense(p), N, K, null);
    expect(outOfBound(y.dataSync(), ref, S, K)).toEqual([]);
  }, 60_000);
});
