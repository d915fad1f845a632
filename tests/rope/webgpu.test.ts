/**
 * rotary_embedding's WGSL kernel (src/backends/webgpu/rope.ts) against the decomposition on the
 * CPU (js reference, float32): forward and transposed, broadcast and strided operands, within one
 * float32 rounding of the larger term (WGSL may contract x·c + t into an fma); the gradient to x
 * through the transposed kernel; eager == lazy; a Llama layer's plan has the two rope kernels;
 * float16 stored rounded once as on the CPU.
 * Run with GALLIVM_PERF=nopt XDG_RUNTIME_DIR=/tmp/xdg-root on lavapipe.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { rotary_embedding, rotary_embedding_decomposed } from "../../src/graph/ops/rope.ts";
import type { LazyTensor } from "../../src/lazy/lazy_tensor.ts";
import { LlamaConfig } from "../../src/models/llama_config.ts";
import { LlamaDecoderLayer, LlamaRotaryEmbedding } from "../../src/models/llama_layers.ts";
import type { DType } from "../../src/tensor/dtype.ts";
import { WEBGPU } from "../backends.ts";

const G = (t: loom.Tensor) => t.to("webgpu");
const rope = <T extends loom.Tensor | LazyTensor>(x: T, c: T, s: T, transposed = false): T =>
  (x as loom.Tensor)._apply(rotary_embedding, [c as loom.Tensor, s as loom.Tensor], { transposed }) as T;

let seed = 101;
const rand = (shape: number[], dtype: DType = "float32") => loom.randn(shape, { generator: new loom.Generator(seed++) }).to(dtype);

/** Elements of y outside |y − dec| ≤ 2^-24·(|x·c| + |x_p·s|) + tiny (one extra float32 rounding). */
function outside(y: ArrayLike<number>, x: loom.Tensor, c: loom.Tensor, s: loom.Tensor, tr: boolean): number[] {
  const dec = rotary_embedding_decomposed(x, c, s, tr).dataSync();
  const [x6, c6, s6] = [x, c, s].map((t) => t.double());
  const mag = x6.mul(c6).abs().add(rotary_embedding_decomposed(x6, c6.mul(0), s6, tr).abs()).dataSync();
  const bad: number[] = [];
  for (let i = 0; i < dec.length; i++) if (!(Math.abs(y[i]! - dec[i]!) <= 2 ** -24 * mag[i]! + 1e-30)) bad.push(i);
  return bad;
}

describe.if(WEBGPU)("rotary_embedding on webgpu", () => {
  test("forward and transposed, [B, 1, T, D] and [T, D] cos/sin, strided x: within one float32 rounding of the decomposition; eager == lazy", () => {
    for (const cs of [[2, 1, 3, 8], [3, 8]]) {
      const x = rand([2, 3, 5, 8]).transpose(1, 2), c = rand(cs), s = rand(cs); // x [2, 5, 3, 8] strided
      for (const tr of [false, true]) {
        const y = rope(G(x), G(c), G(s), tr);
        expect(String(y.device)).toBe("webgpu");
        const yv = y.dataSync();
        expect(outside(yv, x, c, s, tr)).toEqual([]);
        expect(Array.from(rope(G(x).lazy(), G(c).lazy(), G(s).lazy(), tr).eval().dataSync())).toEqual(Array.from(yv));
      }
    }
  }, 60_000);

  test("the gradient to x runs the transposed kernel, within one float32 rounding of the decomposed adjoint", () => {
    const x = rand([1, 2, 4, 6]), c = rand([4, 6]), s = rand([4, 6]), w = rand([1, 2, 4, 6]);
    const xg = G(x).requires_grad_(true);
    rope(xg, G(c), G(s)).mul(G(w)).sum().backward();
    expect(outside(xg.grad!.dataSync(), w, c, s, true)).toEqual([]);
  }, 60_000);

  test("float16: float32 steps, one rounding at the store (the CPU's bits)", () => {
    const x = rand([2, 3, 8], "float16"), c = rand([3, 8], "float16"), s = rand([3, 8], "float16");
    expect(Array.from(rope(G(x), G(c), G(s)).to("cpu").dataSync())).toEqual(Array.from(rope(x, c, s).dataSync()));
  }, 60_000);

  test("a Llama layer on webgpu: two rotary_embedding kernels; silu(gate)·up in one fused_matmul", () => {
    const cfg = LlamaConfig.from_dict({ model_type: "llama", hidden_size: 32, intermediate_size: 64, num_attention_heads: 2, num_key_value_heads: 1, num_hidden_layers: 1, vocab_size: 16 });
    const layer = new LlamaDecoderLayer(cfg, 0).to("webgpu"), rot = new LlamaRotaryEmbedding(cfg).to("webgpu");
    const x = G(loom.randn([1, 4, 32], { generator: new loom.Generator(5) })).lazy();
    const pos = G(loom.arange(0, 4, 1, { dtype: "int64" }).unsqueeze(0)).lazy();
    const [c, s] = rot.forward_lazy(x, pos);
    const plan = layer.forward_lazy(x, { position_embeddings: [c, s], attention_mask: null }).plan();
    expect(plan.instructions.filter((i) => i.op.name === "rotary_embedding").length).toBe(2);
    expect(plan.explain()).toMatch(/fused_matmul \[matmul sigmoid mul mul\]/);
  }, 60_000);
});
