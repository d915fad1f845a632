/**
 * Quantizers and dequantizers bit-exact with the reference implementations (goldens from
 * gen_quant_goldens.py, which implements ggml's and bitsandbytes' formulas in numpy and checks
 * int8 against torch.quantize_per_channel), on js and native, eager and lazy.
 */
import { describe, expect, test } from "bun:test";
import { tensor } from "../../src/lazy/creation.ts";
import { linear as F_linear } from "../../src/lazy/functional.ts";
import { Tensor } from "../../src/lazy/tensor.ts";
import { LoomFormatError, LoomShapeError, LoomValueError } from "../../src/tensor/errors.ts";
import { WeightCache, Quantized, type QuantFormat } from "../../src/weights/index.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";
import goldens from "./quant_goldens.json";

interface Golden { qweight: number[]; scales: number[] | null; dequant_bits: number[] }
const CASES = goldens.cases as { name: string; shape: number[]; input: number[]; formats: Record<QuantFormat, Golden> }[];
const FORMATS: QuantFormat[] = ["q8_0", "q4_0", "nf4", "int8"];

function bits(t: Tensor): number[] {
  const f = Float32Array.from(t.contiguous().dataSync());
  return [...new Uint32Array(f.buffer)];
}

describe("quantizers (pure, no backend)", () => {
  for (const c of CASES) {
    for (const fmt of FORMATS) {
      test(`${c.name} ${fmt}: packed bytes and scales`, () => {
        const w = tensor(new Float32Array(c.input)).reshape(c.shape);
        const q = Quantized.quantize(w, fmt, c.name);
        const g = c.formats[fmt];
        expect([...(q.qweight._d.data as Uint8Array)]).toEqual(g.qweight);
        if (g.scales) expect([...(q.scales!._d.data as Float32Array)]).toEqual(g.scales);
        else expect(q.scales).toBeNull();
      });
    }
  }
});

for (const backend of BACKENDS) {
  describe(`dequantize on ${backend}`, () => {
    useBackend(backend);
    for (const c of CASES) {
      for (const fmt of FORMATS) {
        test(`${c.name} ${fmt}: eager and lazy decompose are bit-exact`, () => {
          const w = tensor(new Float32Array(c.input)).reshape(c.shape);
          const q = Quantized.quantize(w, fmt, c.name);
          const want = c.formats[fmt].dequant_bits;
          expect(bits(q.materialize(new WeightCache(0)))).toEqual(want);
          const lazy = q.decompose(w.lazy()).eval();
          expect(bits(lazy)).toEqual(want);
        });
      }
    }
  });
}

for (const backend of BACKENDS) {
  describe(`fused Quantized.linear (quantized_linear) on ${backend}`, () => {
    useBackend(backend);
    test("matches dequantize-then-matmul for every format and golden case, eager and lazy", () => {
      for (const c of CASES) {
        const w = tensor(new Float32Array(c.input)).reshape(c.shape);
        const K = c.shape[1]!;
        for (const fmt of FORMATS) {
          const q = Quantized.quantize(w, fmt, c.name);
          const dense = q.materialize(new WeightCache(0));
          for (const M of [1, 3]) {
            const x = tensor(Float32Array.from({ length: M * K }, (_, i) => Math.sin(i * 0.7 + M))).reshape([M, K]);
            const bias = tensor(Float32Array.from({ length: c.shape[0]! }, (_, i) => i * 0.25 - 1));
            const want = F_linear(x, dense, bias).dataSync();
            const eager = q.linear(x, bias).dataSync();
            const lazy = q.linear(x.lazy(), bias.lazy()).eval().dataSync();
            // float32 sums of K products in another order: relative to the sum of |terms|
            const mag = F_linear(x.abs(), dense.abs()).dataSync();
            for (let i = 0; i < want.length; i++) {
              const tol = 1e-6 * (mag[i]! + 1);
              expect(Math.abs(eager[i]! - want[i]!)).toBeLessThanOrEqual(tol);
              expect(Math.abs(lazy[i]! - want[i]!)).toBeLessThanOrEqual(tol);
            }
          }
        }
      }
    });
  });
}

describe.if(WEBGPU)("Quantized on webgpu", () => {
  test("pieces on the device: decompose is bit-exact, the fused linear matches it", () => {
    const c = CASES[1]!;
    const w = tensor(new Float32Array(c.input)).reshape(c.shape);
    for (const fmt of FORMATS) {
      const cpu = Quantized.quantize(w, fmt, c.name);
      const q = new Quantized(fmt, c.shape, cpu.qweight.to("webgpu"), cpu.scales ? cpu.scales.to("webgpu") : null);
      const d = q.materialize(new WeightCache(0));
      expect(String(d.device)).toBe("webgpu");
      expect(bits(d)).toEqual(c.formats[fmt].dequant_bits);
      const x = tensor(Float32Array.from({ length: 2 * c.shape[1]! }, (_, i) => Math.cos(i))).reshape([2, c.shape[1]!]);
      const want = F_linear(x, d.to("cpu")).dataSync();
      const got = q.linear(x.to("webgpu")).dataSync();
      const mag = F_linear(x.abs(), d.to("cpu").abs()).dataSync();
      for (let i = 0; i < want.length; i++) expect(Math.abs(got[i]! - want[i]!)).toBeLessThanOrEqual(1e-6 * (mag[i]! + 1));
    }
  }, 60_000);
});

describe("bad input", () => {
  test("block-size mismatch, non-finite values, wrong pieces", () => {
    const w = tensor(new Float32Array(4 * 48)).reshape([4, 48]);
    expect(() => Quantized.quantize(w, "q4_0", "layers.0.w")).toThrow(/layers\.0\.w.*K=48 is not a multiple of the block size 32/);
    expect(() => Quantized.quantize(w, "nf4")).toThrow(LoomShapeError);
    expect(() => Quantized.quantize(tensor(new Float32Array(64)), "q8_0")).toThrow(LoomShapeError);
    const bad = new Float32Array(64); bad[37] = NaN;
    expect(() => Quantized.quantize(tensor(bad).reshape([2, 32]), "q8_0", "w")).toThrow(LoomValueError);
    expect(() => Quantized.quantize(tensor(bad).reshape([2, 32]), "q8_0", "w")).toThrow(/w: element \[1, 5\] is NaN/);
    const ok = Quantized.quantize(tensor(new Float32Array(64)).reshape([2, 32]), "q8_0");
    expect(() => new Quantized("q8_0", [2, 32], ok.qweight.narrow(1, 0, 33).contiguous())).toThrow(LoomFormatError);
    expect(() => new Quantized("q4_0", [2, 32], ok.qweight)).toThrow(/qweight must be \[2, 18\]/);
    expect(() => new Quantized("q8_0", [2, 32], ok.qweight, tensor(new Float32Array(2)))).toThrow(LoomFormatError);
    expect(() => new Quantized("q5_0" as QuantFormat, [2, 32], ok.qweight)).toThrow(LoomValueError);
  });
});

describe("memory", () => {
  test("nbytes of each format against dense", () => {
    const w = tensor(new Float32Array(64 * 128)).reshape([64, 128]);
    const dense = 64 * 128 * 4;
    const nb = (f: QuantFormat) => Quantized.quantize(w, f).nbytes();
    expect(nb("q8_0")).toBe(64 * 4 * 34);
    expect(nb("q4_0")).toBe(64 * 4 * 18);
    expect(nb("nf4")).toBe(64 * 64 + (64 * 128 / 64) * 4);
    expect(nb("int8")).toBe(64 * 128 + 64 * 4);
    expect(Quantized.quantize(w, "nf4").dense_nbytes()).toBe(dense);
    expect(nb("nf4") / dense).toBeLessThan(0.3);
  });
});
