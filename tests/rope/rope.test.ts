/**
 * The registry's rotary_embedding (src/graph/ops/rope.ts) and its kernels against the
 * decomposition it replaces (x·cos + rotate_half(x)·sin, registry ops one by one):
 * - hand-derived values for one row (HF's halves convention, not interleaved pairs);
 * - js and native: the op equals the decomposition bit for bit (float32, float64, float16,
 *   bfloat16; broadcast [B, 1, T, D] and [T, D] cos/sin; a transposed view of x as attention
 *   passes it), forward and transposed; eager == lazy bit for bit;
 * - gradients by central differences in float64 (x, cos and sin; second order), and the
 *   gradient to x is one kernel (the transposed form);
 * - the native catalog: native.rotary_embedding.exact at tolerance "exact" and at the default;
 * - kernel counts: a Llama decoder layer forward has 20 kernels on native (23 with the
 *   decomposition: neg, cat and mul/add per q and per k), and silu(gate)·up is one kernel (the
 *   epilogue of gate_proj's matmul);
 * - typed errors naming the op, shapes and dtypes.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { FLOAT32_TOLERANCE } from "../../src/backends/catalog.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { apply_rotary, rotary_embedding, rotary_embedding_decomposed } from "../../src/graph/ops/rope.ts";
import { gradcheck } from "../../src/lazy/gradcheck.ts";
import type { LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { LlamaConfig } from "../../src/models/llama_config.ts";
import { LlamaDecoderLayer, LlamaRotaryEmbedding } from "../../src/models/llama_layers.ts";
import { with_compiler_options } from "../../src/scheduler/options.ts";
import type { CompiledPlan } from "../../src/scheduler/plan.ts";
import { LoomDtypeError, LoomShapeError } from "../../src/tensor/errors.ts";
import type { DType } from "../../src/tensor/dtype.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { thrown } from "../thrown.ts";

const rope = <T extends loom.Tensor | LazyTensor>(x: T, c: T, s: T, transposed = false): T =>
  (x as loom.Tensor)._apply(rotary_embedding, [c as loom.Tensor, s as loom.Tensor], { transposed }) as T;
const bits = (t: loom.Tensor | LazyTensor) => Array.from(t.dataSync());

let seed = 11;
function rand(shape: number[], dtype: DType = "float32"): loom.Tensor {
  return loom.randn(shape, { generator: new loom.Generator(seed++), dtype: "float64" }).to(dtype);
}

/** [x, cos, sin] in the layouts attention passes: x a transposed view [B, H, T, D] of [B, T, H, D]. */
function operands(dtype: DType, cosShape: number[]): [loom.Tensor, loom.Tensor, loom.Tensor] {
  const x = rand([2, 3, 5, 8], dtype).transpose(1, 2); // [B, H, T, D] = [2, 5, 3, 8], strided
  return [x, rand(cosShape, dtype), rand(cosShape, dtype)];
}

const kernels = (plan: CompiledPlan, name: string) => plan.instructions.filter((i) => i.op.name === name).length;

test("hand-derived: one row of D = 4 (halves: x1 pairs with x3, x2 with x4)", () => {
  // rotate_half([1, 2, 3, 4]) = [-3, -4, 1, 2]; y = x·c + rotate_half(x)·s
  const x = loom.tensor([1, 2, 3, 4], { dtype: "float64" });
  const c = loom.tensor([0.5, 0.25, 0.5, 0.25], { dtype: "float64" }), s = loom.tensor([2, 3, 2, 3], { dtype: "float64" });
  expect(bits(rope(x, c, s))).toEqual([0.5 - 6, 0.5 - 12, 1.5 + 2, 1 + 6]);
  // transposed: x·c + cat((x·s)2, −(x·s)1) = [0.5 + 6, 0.5 + 12, 1.5 − 2, 1 − 6]
  expect(bits(rope(x, c, s, true))).toEqual([6.5, 12.5, -0.5, -5]);
  // interleaved pairs (x1 with x2) would give −1.5 first: the convention is halves
  expect(bits(rope(x, c, s))[0]).not.toBe(0.5 - 2 * 2);
});

describe.each(BACKENDS)("rotary_embedding on %s", (backend) => {
  useBackend(backend);
  const cases: [DType, number[]][] = [["float32", [2, 1, 3, 8]], ["float32", [3, 8]], ["float64", [2, 1, 3, 8]]];
  for (const [dtype, cs] of cases) {
    test(`${dtype}, cos/sin [${cs}]: the op equals the decomposition bit for bit, forward and transposed; eager == lazy`, () => {
      const [x, c, s] = operands(dtype, cs);
      for (const tr of [false, true]) {
        const ref = bits(rotary_embedding_decomposed(x, c, s, tr));
        expect(bits(rope(x, c, s, tr))).toEqual(ref);
        const lazy = rope(x.lazy(), c.lazy(), s.lazy(), tr);
        expect(bits(lazy.eval())).toEqual(ref);
        expect(bits(with_compiler_options({ tolerance: "exact" }, () => rope(x.lazy(), c.lazy(), s.lazy(), tr).eval()))).toEqual(ref);
      }
    });
  }

  // half dtypes: float32 steps, one rounding (the js backend's rule for kernel ops on halves)
  for (const [dtype, cs, uh] of [["float16", [3, 8], 2 ** -11], ["bfloat16", [2, 1, 3, 8], 2 ** -8]] as const) {
    test(`${dtype}: the op is the float32 op rounded once; within 2 half ulps of |x·c| + |x_p·s| of the per-op-rounded decomposition; eager == lazy`, () => {
      const [x, c, s] = operands(dtype, [...cs]);
      for (const tr of [false, true]) {
        const y = rope(x, c, s, tr);
        expect(bits(y)).toEqual(bits(rope(x.float(), c.float(), s.float(), tr).to(dtype)));
        expect(bits(rope(x.lazy(), c.lazy(), s.lazy(), tr).eval())).toEqual(bits(y));
        const dec = rotary_embedding_decomposed(x, c, s, tr).dataSync();
        const [x6, c6, s6] = [x, c, s].map((t) => t.double());
        const mag = x6.mul(c6).abs().add((tr ? rotary_embedding_decomposed(x6, c6.mul(0), s6, true) : rotary_embedding_decomposed(x6, c6.mul(0), s6)).abs()).dataSync();
        const yv = y.dataSync();
        const over = Array.from(yv).filter((v, i) => !(Math.abs(v - dec[i]!) <= 2 * uh * mag[i]! + 2 ** -24));
        expect(over).toEqual([]);
      }
    });
  }

  test("a dense x and long rows (the vectorized float32 path: D = 128, 1024 rows)", () => {
    const x = rand([2, 8, 64, 128]), c = rand([64, 128]), s = rand([64, 128]);
    for (const tr of [false, true]) expect(bits(rope(x, c, s, tr))).toEqual(bits(rotary_embedding_decomposed(x, c, s, tr)));
  });

  test("the gradient to x is the transposed op (one kernel), equal to the decomposition's gradient", () => {
    const [x0, c, s] = operands("float32", [2, 1, 3, 8]);
    const w = rand([...x0.shape]);
    const x1 = x0.detach().requires_grad_(true), x2 = x0.detach().requires_grad_(true);
    rope(x1, c, s).mul(w).sum().backward();
    rotary_embedding_decomposed(x2, c, s).mul(w).sum().backward();
    expect(bits(x1.grad!)).toEqual(bits(x2.grad!));
    const xl = x0.lazy().requires_grad_(true);
    const [g] = loom.autograd.grad(rope(xl, c.lazy(), s.lazy()).mul(w.lazy()).sum(), [xl]);
    const plan = (g as LazyTensor).plan();
    expect(kernels(plan, "rotary_embedding")).toBe(1);
    expect(kernels(plan, "cat")).toBe(0);
    expect(bits(g!.eval())).toEqual(bits(x1.grad!));
  });
});

test("gradients by central differences (float64, js): x, cos, sin, broadcast, second order; forward and transposed", () => {
  for (const tr of [false, true]) {
    for (const cs of [[2, 1, 3, 4], [3, 4]]) {
      const x = rand([2, 2, 3, 4], "float64"), c = rand(cs, "float64"), s = rand(cs, "float64");
      const f = (a: loom.Tensor, b: loom.Tensor, d: loom.Tensor) => rope(a, b, d, tr);
      expect(gradcheck(f, [x, c, s], { check_grad_grad: true })).toEqual([]);
    }
  }
});

test("apply_rotary with cos/sin of another dtype promotes as the decomposition (autocast)", () => {
  const x = rand([1, 2, 3, 4], "bfloat16"), c = rand([3, 4]), s = rand([3, 4]);
  const y = apply_rotary(x, c, s);
  expect(y.dtype).toBe("float32");
  expect(bits(y)).toEqual(bits(rotary_embedding_decomposed(x, c, s)));
});

test("errors name the op, the shapes and the dtypes", () => {
  const x = rand([2, 3, 6]);
  let e = thrown(() => rope(rand([2, 3, 5]), rand([3, 5]), rand([3, 5])));
  expect(e).toBeInstanceOf(LoomShapeError);
  expect(e.message).toContain("[rotary_embedding] shapes x [2, 3, 5], cos [3, 5], sin [3, 5]");
  expect(e.message).toContain("D even");
  e = thrown(() => rope(x, rand([4, 6]), rand([4, 6])));
  expect(e).toBeInstanceOf(LoomShapeError);
  expect(e.message).toContain("cos [4, 6]");
  expect(thrown(() => rope(x, rand([3, 6]), rand([1, 6])))).toBeInstanceOf(LoomShapeError);
  expect(thrown(() => rope(x, rand([3, 4]), rand([3, 4])))).toBeInstanceOf(LoomShapeError);
  e = thrown(() => rope(x, rand([3, 6], "float64"), rand([3, 6])));
  expect(e).toBeInstanceOf(LoomDtypeError);
  expect(e.message).toBe("[rotary_embedding] x, cos, sin must share one floating dtype, got float32, float64, float32");
  expect(thrown(() => rope(x.lazy(), rand([3, 4]).lazy(), rand([3, 4]).lazy()))).toBeInstanceOf(LoomShapeError); // at record time
  expect(thrown(() => rope(loom.ones([2, 4], { dtype: "int32" }), loom.ones([4], { dtype: "int32" }), loom.ones([4], { dtype: "int32" })))).toBeInstanceOf(LoomDtypeError);
});

/** A Llama decoder layer forward (hidden 64, 4 heads of 16, 2 KV heads, MLP 128) with its cos/sin, as a lazy plan. */
function llamaLayerPlan(): CompiledPlan {
  const cfg = LlamaConfig.from_dict({ model_type: "llama", hidden_size: 64, intermediate_size: 128, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 1, vocab_size: 32 });
  const layer = new LlamaDecoderLayer(cfg, 0), rot = new LlamaRotaryEmbedding(cfg);
  const x = loom.randn([2, 16, 64], { generator: new loom.Generator(3) }).lazy();
  const pos = loom.arange(0, 16, 1, { dtype: "int64" }).unsqueeze(0).lazy();
  const [c, s] = rot.forward_lazy(x, pos);
  return layer.forward_lazy(x, { position_embeddings: [c, s], attention_mask: null }).plan();
}

describe.if(!!nativeBackend())("native: catalog and kernel counts", () => {
  useBackend("native");
  test('native.rotary_embedding.exact is the one implementation, chosen at tolerance "exact" and at the default', () => {
    const impls = nativeBackend()!.implementations("rotary_embedding");
    expect(impls.map((i) => i.id)).toEqual(["native.rotary_embedding.exact"]);
    expect(impls[0]!.doc).toContain("rope.c");
    expect(nativeBackend()!.lib.opcodes.has("rotary_embedding")).toBe(true);
    const [x, c, s] = operands("float32", [2, 1, 3, 8]);
    for (const tolerance of ["exact", FLOAT32_TOLERANCE] as const) {
      const plan = with_compiler_options({ tolerance }, () => rope(x.lazy(), c.lazy(), s.lazy()).plan());
      expect(plan.instructions.map((i) => i.impl)).toEqual(["native.rotary_embedding.exact"]);
    }
  });

  test("a Llama layer forward: 20 kernels, one rotary_embedding each for q and k, no cat on their path; silu(gate)·up in one matmul epilogue", () => {
    const plan = llamaLayerPlan();
    expect(plan.kernelCount).toBe(20); // the decomposition gave 23: neg, cat, mul·mul·add for each of q and k
    expect(kernels(plan, "rotary_embedding")).toBe(2);
    expect(kernels(plan, "cat")).toBe(1); // cat(freqs, freqs) of the rotary embedding, [1, T, D/2] twice
    // SwiGLU: gate_proj's GEMM with silu(acc)·up as its epilogue (silu = x·sigmoid(x)): generic fusion, no swiglu op
    const mlp = plan.instructions.filter((i) => i.op.name === "fused_matmul" && plan.explain().includes("sigmoid"));
    expect(mlp.length).toBeGreaterThan(0);
    expect(plan.explain()).toMatch(/fused_matmul \[matmul sigmoid mul mul\]/);
    expect(kernels(plan, "fused_elementwise") + kernels(plan, "matmul")).toBe(11);
  });
});
