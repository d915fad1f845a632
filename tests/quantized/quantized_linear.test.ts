/**
 * quantized_linear on js and native: every format against an independent float64
 * dequantize-then-matmul (helpers.ts) within the stated bound (QUANT_ERROR_BOUND; js: one
 * rounding), M = 1 (GEMV), M = 3 (register tiles) and M = 20 (native's panel + GEMM path), odd N;
 * the gradient to x (the transposed fused kernel) against float64 finite differences of the js
 * reference forward; eager == lazy bit for bit; typed errors.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { quantized_linear as qlOp, type QuantFormat } from "../../src/graph/ops/quantized.ts";
import { quantized_linear } from "../../src/lazy/quantized_ops.ts";
import { allocData, fromValues } from "../../src/tensor/storage.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { dense, operands, outOfBound, randomPacked, reference, rng } from "./helpers.ts";

const FORMATS: readonly QuantFormat[] = ["q8_0", "q4_0", "nf4", "int8"];
/** K per format: two or more blocks; int8 also an odd K (no blocks). */
const KS: Record<QuantFormat, number[]> = { q8_0: [96], q4_0: [96], nf4: [128], int8: [96, 45] };

function randomX(M: number, K: number, seed: number): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: M * K }, () => Math.fround(r() * 4 - 2));
}

describe.each(BACKENDS)("quantized_linear on %s", (backend) => {
  useBackend(backend);
  const exact = backend === "js";

  for (const format of FORMATS) {
    for (const K of KS[format]) {
      test(`${format} K=${K}: M = 1, 3, 20, odd N, with and without bias, within the bound`, () => {
        const N = 37;
        const p = randomPacked(format, N, K, 11 + K);
        const W = dense(p);
        const { qweight, scales } = operands(p);
        const b = randomX(1, N, 5);
        for (const M of [1, 3, 20]) {
          const xs = randomX(M, K, M * 7 + 1);
          const x = loom.tensor(xs).reshape(M === 1 ? [K] : [M, K]);
          for (const withBias of [false, true]) {
            const y = quantized_linear(x, qweight, { format, scales, bias: withBias ? loom.tensor(b) : null });
            expect(y.shape).toEqual(M === 1 ? [N] : [M, N]);
            expect(y.dtype).toBe("float32");
            const { ref, S } = reference(xs, M, W, N, K, withBias ? b : null);
            expect(outOfBound(y.dataSync(), ref, S, K, exact)).toEqual([]);
          }
        }
      });
    }

    test(`${format}: gradient to x is g·dequant(W) (transposed kernel), = float64 finite differences of the js forward`, () => {
      const K = KS[format][0]!, N = 9, M = 2;
      const p = randomPacked(format, N, K, 3);
      const { qweight, scales } = operands(p);
      const xs = randomX(M, K, 4), gs = randomX(M, N, 6);
      const x = loom.tensor(xs).reshape([M, K]).requires_grad_(true);
      const y = quantized_linear(x, qweight, { format, scales, bias: loom.ones([N]) });
      y.mul(loom.tensor(gs).reshape([M, N])).sum().backward();
      const got = x.grad!.dataSync();
      // finite differences of L(x) = Σ g·y through the op's js reference evaluated in float64
      // (L is linear in x, so the central difference is exact up to float64 rounding)
      const qd = { dtype: qweight.dtype, shape: qweight.shape, strides: [qweight.shape[1]!, 1], offset: 0, data: qweight.dataSync() } as any;
      const sd = scales ? fromValues("float64", [scales.shape[0]!], Array.from(scales.dataSync())) : null;
      const L = (xv: Float64Array) => {
        const out = allocData("float64", [M, N]);
        qlOp.ref([fromValues("float64", [M, K], xv), qd, ...(sd ? [sd] : [])], { format, has_bias: false, transposed: false }, out);
        let s = 0;
        for (let i = 0; i < M * N; i++) s += gs[i]! * out.data[i]!;
        return s;
      };
      const h = 0.5, fd = new Float64Array(M * K), xv = Float64Array.from(xs);
      for (let i = 0; i < M * K; i++) {
        const o = xv[i]!;
        xv[i] = o + h; const lp = L(xv);
        xv[i] = o - h; const lm = L(xv);
        xv[i] = o;
        fd[i] = (lp - lm) / (2 * h);
      }
      const { S } = reference(gs, M, dense(p), N, K, null, true);
      // the FD values carry float64 rounding of L (≈ 1e-15·Σ|g·y| / h): far inside the float32 bound
      expect(outOfBound(got, fd, S, N, false)).toEqual([]);
    });

    test(`${format}: eager == lazy bit for bit (forward and gradient to x)`, () => {
      const K = KS[format][0]!, N = 13;
      const p = randomPacked(format, N, K, 21);
      const { qweight, scales } = operands(p);
      for (const M of [1, 20]) {
        const xs = randomX(M, K, 8);
        const bias = loom.tensor(randomX(1, N, 9));
        const xe = loom.tensor(xs).reshape([M, K]).requires_grad_(true);
        const ye = quantized_linear(xe, qweight, { format, scales, bias });
        ye.sum().backward();
        const xl = loom.tensor(xs).reshape([M, K]).lazy().requires_grad_(true);
        const yl = quantized_linear(xl, qweight, { format, scales, bias });
        yl.sum().backward();
        expect(Array.from(yl.eval().dataSync())).toEqual(Array.from(ye.dataSync()));
        expect(Array.from(xl.grad!.eval().dataSync())).toEqual(Array.from(xe.grad!.dataSync()));
      }
    });
  }

  for (const format of FORMATS) {
    test(`${format}: M = 20 (panel paths): gradient to x = float64 g·dequant(W); strided x forward`, () => {
      const K = KS[format][0]!, N = 23, M = 20;
      const p = randomPacked(format, N, K, 13);
      const W = dense(p);
      const { qweight, scales } = operands(p);
      const xs = randomX(M, K, 1), gs = randomX(M, N, 2);
      const x = loom.tensor(xs).reshape([M, K]).requires_grad_(true);
      quantized_linear(x, qweight, { format, scales }).mul(loom.tensor(gs).reshape([M, N])).sum().backward();
      const t = reference(gs, M, W, N, K, null, true);
      expect(outOfBound(x.grad!.dataSync(), t.ref, t.S, N, exact)).toEqual([]);
      // x as the transpose of a [K, M] tensor (strides [1, M]), eager and lazy
      const xt = Float32Array.from({ length: M * K }, (_, i) => xs[(i % M) * K + Math.floor(i / M)]!); // [K, M] = xsᵀ
      const xv = loom.tensor(xt).reshape([K, M]).transpose(0, 1);
      const { ref, S } = reference(xs, M, W, N, K, null);
      expect(outOfBound(quantized_linear(xv, qweight, { format, scales }).dataSync(), ref, S, K, exact)).toEqual([]);
      expect(outOfBound(quantized_linear(xv.lazy(), qweight, { format, scales }).eval().dataSync(), ref, S, K, exact)).toEqual([]);
    });
  }

  test("under autocast a bfloat16 x is cast to float32 (the kernels' dtype); the output is float32", () => {
    const p = randomPacked("q8_0", 3, 32, 5);
    const { qweight } = operands(p);
    const xs = randomX(1, 32, 3).map((v) => Math.round(v * 4) / 4); // exact in bfloat16
    const y = loom.autocast({ device_type: "cpu" }, () => quantized_linear(loom.tensor(xs).to("bfloat16"), qweight, { format: "q8_0" }));
    expect(y.dtype).toBe("float32");
    expect(Array.from(y.dataSync())).toEqual(Array.from(quantized_linear(loom.tensor(xs), qweight, { format: "q8_0" }).dataSync()));
  });

  test("qweight as int32 words (packed_words) gives the same bits as the bytes, every format", () => {
    for (const format of FORMATS) {
      const K = 128, N = 7;
      const p = randomPacked(format, N, K, 17);
      const { qweight, scales } = operands(p);
      const words = loom.packed_words(qweight);
      expect(words.dtype).toBe("int32");
      expect(words.shape).toEqual([N, qweight.shape[1]! / 4]);
      // little endian: word 0 of row 0 holds bytes 0..3
      const b = p.bytes;
      expect(words.dataSync()[0]).toBe((b[0]! | (b[1]! << 8) | (b[2]! << 16) | (b[3]! << 24)));
      const x = loom.tensor(randomX(3, K, 1)).reshape([3, K]);
      const want = Array.from(quantized_linear(x, qweight, { format, scales }).dataSync());
      expect(Array.from(quantized_linear(x, words, { format, scales }).dataSync())).toEqual(want);
      expect(Array.from(quantized_linear(x.lazy(), words, { format, scales }).eval().dataSync())).toEqual(want);
    }
    expect(() => quantized_linear(loom.ones([1, 64]), loom.zeros([4, 16], { dtype: "int32" }), { format: "q8_0" }))
      .toThrow(/q8_0 qweight \[4, 16\] \(int32 words\) does not fit K = 64: expected \[N, 17\]/);
  });

  test("the bias gradient is Σ over rows of g", () => {
    const p = randomPacked("q4_0", 5, 64, 2);
    const { qweight } = operands(p);
    const x = loom.tensor(randomX(3, 64, 1)).reshape([3, 64]).requires_grad_(true);
    const b = loom.zeros([5]).requires_grad_(true);
    quantized_linear(x, qweight, { format: "q4_0", bias: b }).sum().backward();
    expect(Array.from(b.grad!.dataSync())).toEqual([3, 3, 3, 3, 3]);
  });

  test("second derivative: the transposed form's gradient is the forward op (x.grad = 2·(r·Wᵀ)·W)", () => {
    // L = Σ r ⊙ ∂/∂x Σ y², y = x·Wᵀ: ∂/∂x Σ y² = 2·y·W, so L = 2·Σ_m (r_m·Wᵀ)·y_mᵀ and dL/dx = 2·(r·Wᵀ)·W
    const N = 7, K = 64, M = 2;
    const p = randomPacked("nf4", N, K, 4);
    const { qweight, scales } = operands(p);
    const rs = randomX(M, K, 3);
    const x = loom.tensor(randomX(M, K, 2)).reshape([M, K]).requires_grad_(true);
    const y = quantized_linear(x, qweight, { format: "nf4", scales });
    const [gx] = loom.autograd.grad([y.mul(y).sum()], [x], { create_graph: true });
    gx!.mul(loom.tensor(rs).reshape([M, K])).sum().backward();
    const W = dense(p);
    const { ref: rw } = reference(rs, M, W, N, K, null); // r·Wᵀ [M, N]
    const { ref, S } = reference(rw.map((v) => 2 * v), M, W, N, K, null, true); // 2·(r·Wᵀ)·W [M, K]
    // two float32 products in sequence: the first one's bound carried through |W| (loose: 1e-5 of S)
    const got = x.grad!.dataSync();
    for (let i = 0; i < ref.length; i++) expect(Math.abs(got[i]! - ref[i]!)).toBeLessThanOrEqual(1e-5 * S[i]! + 1e-6);
  });
});

describe.if(!!nativeBackend())("quantized_linear in the native catalog", () => {
  useBackend("native");
  test("a lazy plan runs native.quantized_linear.exact (the fused kernel), documented with its bound", () => {
    const impls = nativeBackend()!.implementations("quantized_linear");
    expect(impls.map((i) => i.id)).toEqual(["native.quantized_linear.exact"]);
    expect(impls[0]!.doc).toContain("(n + 16)·2^-24·Σ|x·w|");
    const p = randomPacked("q4_0", 8, 64, 1);
    const y = quantized_linear(loom.tensor(randomX(2, 64, 1)).reshape([2, 64]).lazy(), operands(p).qweight, { format: "q4_0" });
    expect(y.plan().instructions.map((i) => i.impl)).toEqual(["native.quantized_linear.exact"]);
  });
});

describe("quantized_linear errors name the op, shapes and dtypes", () => {
  const p = randomPacked("q8_0", 4, 64, 1);
  const { qweight } = operands(p);
  test("K not a multiple of the block size", () => {
    expect(() => quantized_linear(loom.ones([2, 40]), loom.zeros([4, 34], { dtype: "uint8" }), { format: "q8_0" }))
      .toThrow(new loom.LoomShapeError("[quantized_linear] q8_0: in_features K = 40 is not a multiple of the block size 32"));
    expect(() => quantized_linear(loom.ones([2, 96]), loom.zeros([4, 48], { dtype: "uint8" }), { format: "nf4", scales: loom.ones([6]) }))
      .toThrow(/\[quantized_linear\] nf4: in_features K = 96 is not a multiple of the block size 64/);
  });
  test("row length mismatch: truncated stream or another block size", () => {
    expect(() => quantized_linear(loom.ones([2, 64]), loom.zeros([4, 67], { dtype: "uint8" }), { format: "q8_0" }))
      .toThrow(/q8_0 qweight \[4, 67\] does not fit K = 64: expected \[N, 68\]/);
    // Q4_0 bytes (18 per block) read as Q8_0 (34 per block)
    expect(() => quantized_linear(loom.ones([1, 64]), loom.zeros([4, 36], { dtype: "uint8" }), { format: "q8_0" })).toThrow(loom.LoomShapeError);
  });
  test("wrong dtypes and scales", () => {
    expect(() => quantized_linear(loom.ones([2, 64], { dtype: "float64" }), qweight, { format: "q8_0" }))
      .toThrow(new loom.LoomDtypeError("[quantized_linear] q8_0: x float64, qweight uint8; expected x float32, qweight uint8 (or int32 words)"));
    expect(() => quantized_linear(loom.ones([2, 64]), qweight.to("int8"), { format: "q8_0" })).toThrow(loom.LoomDtypeError);
    expect(() => quantized_linear(loom.ones([2, 64]), loom.zeros([4, 32], { dtype: "uint8" }), { format: "nf4" })).toThrow(loom.LoomValueError);
    expect(() => quantized_linear(loom.ones([2, 64]), loom.zeros([4, 32], { dtype: "uint8" }), { format: "nf4", scales: loom.ones([3]) }))
      .toThrow(/nf4 scales \[3\] for W \[4, 64\]: expected \[4\]/);
    expect(() => quantized_linear(loom.ones([2, 64]), qweight, { format: "q8_0", bias: loom.ones([5]) })).toThrow(/bias \[5\] for W \[4, 64\]: expected \[4\]/);
  });
  test("no gradient to the quantized weight: its scales requiring grad is refused", () => {
    const s = loom.ones([4]).requires_grad_(true);
    expect(() => quantized_linear(loom.ones([2, 64]), loom.zeros([4, 64], { dtype: "int8" }), { format: "int8", scales: s }))
      .toThrow(loom.LoomAutogradError);
    // the op applied directly (past the function's check): backward asks the rule, which refuses
    const y = loom.ones([2, 64])._apply(loom.OPS.quantized_linear, [loom.zeros([4, 64], { dtype: "int8" }), s], { format: "int8", has_bias: false, transposed: false });
    expect(() => y.sum().backward()).toThrow(/\[quantized_linear\] no gradient to the quantized weight or its scales \(int8\): it is frozen/);
  });
});
