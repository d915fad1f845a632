/**
 * The bounded float32 LoRA linear (src/backends/native/lora.ts): at the default tolerance eager
 * and lazy lora_linear run `lora_linear_f32`, bit-equal to each other, within LORA_F32_CONTRACT of
 * the epilogue Y + b + s·(H·Bᵀ) evaluated in float64 on the exact kernel's products Y = x·Wᵀ and
 * H = x·Aᵀ (read back from eager matmuls, the same GEMM calls); at "exact" the exact kernel runs
 * (the decomposition's bits, compared with the reference op by op). The pattern pass's
 * fused_lora_linear (the decomposition written out) gets the same kernel.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { DEFAULT_TOLERANCE, admits } from "../../src/backends/catalog.ts";
import { LORA_F32_CONTRACT } from "../../src/backends/native/lora.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract, impls, t, useNative, values } from "./helpers.ts";

type T = loom.Tensor;
const exact = <R>(fn: () => R) => loom.with_compiler_options({ tolerance: "exact" }, fn);
const count = (op: string) => NATIVE!.shimCounters().byOp.get(op) ?? 0;

/** x [rows, in] (or [2, rows/2, in]), W [out, in], A [r, in], B [out, r], b [out] | null. */
function operands(rows: number, fin: number, fout: number, r: number, bias: boolean, seed: number, batched = false) {
  const v = (n: number, s: number, scale = 1) => values(n, scale, 0, seed * 10 + s);
  const x = t(v(rows * fin, 1), batched ? [2, rows / 2, fin] : [rows, fin]);
  return {
    x, W: t(v(fout * fin, 2, 0.2), [fout, fin]), A: t(v(r * fin, 3, 0.2), [r, fin]),
    B: t(v(fout * r, 4, 0.5), [fout, r]), b: bias ? t(v(fout, 5), [fout]) : null,
  };
}

/** The epilogue in float64 on the exact kernel's float32 products (see the file comment). */
function reference(o: ReturnType<typeof operands>, s: number): Float64Array {
  const fin = o.W.shape[1]!;
  const x2 = o.x.reshape([-1, fin]);
  const Y = exact(() => x2.matmul(o.W.transpose(0, 1))).dataSync(), H = exact(() => x2.matmul(o.A.transpose(0, 1))).dataSync();
  const B = o.B.dataSync(), b = o.b?.dataSync() ?? null;
  const N = o.W.shape[0]!, r = o.A.shape[0]!, rows = Y.length / N;
  const ref = new Float64Array(Y.length);
  for (let i = 0; i < rows; i++)
    for (let j = 0; j < N; j++) {
      let d = 0;
      for (let q = 0; q < r; q++) d += H[i * r + q]! * B[j * r + q]!;
      ref[i * N + j] = Y[i * N + j]! + (b ? b[j]! : 0) + s * d;
    }
  return ref;
}

const CASES: [string, ReturnType<typeof operands>, number][] = [
  ["[64,96]·[80,96]ᵀ r 8, bias", operands(64, 96, 80, 8, true, 1), 2],
  ["[37,40]·[70,40]ᵀ r 3 (column tails)", operands(37, 40, 70, 3, false, 2), 0.5],
  ["[2,16,48]·[33,48]ᵀ r 4, bias (batched x)", operands(32, 48, 33, 4, true, 3, true), 4],
];

describe.skipIf(!NATIVE)("lora_linear with the one-pass float32 epilogue (native)", () => {
  useNative();

  test("the default tolerance admits the contract, \"exact\" does not", () => {
    expect(admits(DEFAULT_TOLERANCE, LORA_F32_CONTRACT, "float32")).toBe(true);
    expect(admits("exact", LORA_F32_CONTRACT, "float32")).toBe(false);
  });

  for (const [name, o, s] of CASES) {
    test(`${name}: eager and lazy run lora_linear_f32, bit-equal, within the contract; "exact" runs the exact kernel`, () => {
      const ref = reference(o, s);
      const run = (x: T | loom.LazyTensor, lz: boolean) => {
        const L = (m: T | null) => (m && lz ? m.lazy() : m);
        return loom.lora_linear(x as T, L(o.W) as T, L(o.A) as T, L(o.B) as T, s, L(o.b) as T | null) as T | loom.LazyTensor;
      };
      const c0 = count("lora_linear_f32");
      const ye = run(o.x, false) as T;
      const yl = run(o.x.lazy(), true) as loom.LazyTensor;
      expect(impls(yl)).toContain("lora_linear:native.lora_linear.f32");
      const lv = yl.dataSync(), ev = ye.dataSync();
      expect(count("lora_linear_f32") - c0).toBe(2);
      expect(Array.from(lv)).toEqual(Array.from(ev));
      expectWithinContract(ev, ref, LORA_F32_CONTRACT, { what: name });
      // "exact": the exact kernel, the decomposition's bits (matmuls, scale and adds op by op)
      const e0 = count("lora_linear"), f0 = count("lora_linear_f32");
      const yx = exact(() => run(o.x, false) as T).dataSync();
      expect(count("lora_linear") - e0).toBe(1);
      expect(count("lora_linear_f32") - f0).toBe(0);
      const x2 = o.x.reshape([-1, o.W.shape[1]!]);
      const dec = exact(() => {
        const y = x2.matmul(o.W.transpose(0, 1));
        const yb = o.b ? y.add(o.b) : y;
        return yb.add(x2.matmul(o.A.transpose(0, 1)).matmul(o.B.transpose(0, 1)).mul(s));
      }).dataSync();
      expect(Array.from(yx)).toEqual(Array.from(dec));
    });
  }

  test("the pattern pass's fused_lora_linear (the decomposition written out, lazy) runs fused_lora_linear_f32 within the contract", () => {
    const [, o, s] = CASES[0]!;
    const ref = reference(o, s);
    const x = o.x.lazy(), W = o.W.lazy(), A = o.A.lazy(), B = o.B.lazy(), b = o.b!.lazy();
    const y = x.matmul(W.transpose(0, 1)).add(b).add(x.matmul(A.transpose(0, 1)).matmul(B.transpose(0, 1)).mul(s));
    const c0 = count("fused_lora_linear_f32");
    expect(impls(y)).toContain("fused_lora_linear:native.fused_lora_linear.f32");
    expectWithinContract(y.dataSync(), ref, LORA_F32_CONTRACT, { what: "fused_lora_linear" });
    expect(count("fused_lora_linear_f32") - c0).toBe(1);
  });

  test("the gradient of the eager lora_linear is unchanged (the op's own rule) and matches finite differences of the fast forward", () => {
    const o = operands(6, 8, 5, 2, true, 4);
    const A = o.A.clone().requires_grad_(true);
    const lossAt = (a: T) => loom.no_grad(() => (loom.lora_linear(o.x, o.W, a, o.B, 2, o.b) as T).sum().item());
    const y = loom.lora_linear(o.x, o.W, A, o.B, 2, o.b) as T;
    y.sum().backward();
    const g = A.grad!.dataSync(), a0 = o.A.dataSync();
    const eps = 1e-2;
    const c0 = count("lora_linear_f32");
    for (const k of [0, 5, 11]) {
      const p = Float32Array.from(a0), m = Float32Array.from(a0);
      p[k]! += eps; m[k]! -= eps;
      const fd = (lossAt(t(p, [...o.A.shape])) - lossAt(t(m, [...o.A.shape]))) / (2 * eps);
      expect(Math.abs(fd - g[k]!)).toBeLessThan(2e-3 * Math.max(1, Math.abs(g[k]!)));
    }
    expect(count("lora_linear_f32") - c0).toBe(6); // the finite differences ran the fast forward
  });
});
