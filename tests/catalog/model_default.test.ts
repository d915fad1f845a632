/**
 * A LoRA training step of a GPT-2 at the DEFAULT tolerance on native, where the planner picks the
 * bounded implementations (generated kernels, row kernels), against the same step run eagerly
 * (exact kernels) and lazily at tolerance "exact": the loss and every LoRA gradient agree within
 * float32 rounding of the reordered arithmetic, and the plans really used bounded kernels.
 * Sizes are chosen so that the generated kernels apply (programs of >= 16384 elements).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nativeBackend, nativeUnavailableReason } from "../../src/backends/native/backend.ts";
import { selectionStats } from "../../src/scheduler/select.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";

const nb = nativeBackend();

function step(mode: "lazy" | "eager", tolerance: loom.CompilerOptions["tolerance"]) {
  loom.manual_seed(3);
  const config = new loom.models.GPT2Config({ vocab_size: 50, n_positions: 64, n_embd: 64, n_layer: 2, n_head: 4, activation_function: "gelu" });
  const model = new loom.models.GPT2LMHeadModel(config);
  loom.lora.get_peft_model(model, new loom.lora.LoraConfig({ r: 4, lora_alpha: 8, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true, init_lora_weights: "gaussian" }));
  const x = loom.randint(0, 50, [4, 64]), y = loom.randint(0, 50, [4, 64]);
  return loom.with_compiler_options({ tolerance }, () => with_execution_mode(mode, () => {
    const { loss } = model.call(x, { targets: y }) as { loss: loom.Tensor };
    loss.backward();
    const grads = model.named_parameters().filter(([, p]) => p.requires_grad).map(([n, p]) => [n, p.grad!.dataSync()] as const);
    return { loss: loss.item(), grads };
  }));
}

describe.skipIf(!nb)(`default tolerance on native (${nb ? "loaded" : nativeUnavailableReason()})`, () => {
  test("a LoRA GPT-2 step at the default tolerance matches eager and exact lazy within float32 rounding, using bounded kernels", () => {
    const prev = set_default_backend("native");
    try {
      const eager = step("eager", "exact");
      const exact = step("lazy", "exact");
      selectionStats.chosen.clear();
      const fast = step("lazy", loom.get_compiler_options().tolerance);
      const used = [...selectionStats.chosen.keys()].filter((id) => !id.endsWith(".exact"));
      expect(used.length).toBeGreaterThan(0); // e.g. native.fused_layer_norm.f32, native.fused_elementwise.jit_f32
      expect(exact.loss).toBe(eager.loss); // exact mode: bit for bit
      expect(Math.abs(fast.loss - eager.loss)).toBeLessThan(1e-5 * Math.abs(eager.loss));
      expect(fast.grads.length).toBe(eager.grads.length);
      fast.grads.forEach(([name, g], k) => {
        const e = eager.grads[k]![1];
        let scale = 0, err = 0;
        for (let i = 0; i < e.length; i++) { scale = Math.max(scale, Math.abs(e[i]!)); err = Math.max(err, Math.abs(g[i]! - e[i]!)); }
        // gradients through 2 layers: float32 reorderings accumulate; 1e-4 of the gradient's scale
        if (err > 1e-4 * scale + 1e-7) throw new Error(`${name}: max |Δ| ${err} vs scale ${scale}`);
      });
    } finally {
      set_default_backend(prev as "js" | "native");
    }
  });
});
