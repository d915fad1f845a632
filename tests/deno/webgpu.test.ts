/**
 * WebGPU under the runtime's own implementation: Deno's built-in `navigator.gpu` (wgpu; lavapipe
 * without a GPU), bun-webgpu (Dawn) under Bun. Opened with `await loom.init_webgpu()` and read with
 * `await t.data()`, the only ways Deno and browsers can wait for the GPU. The browser demo's model
 * code (examples/browser/demo.ts, fetching file: URLs here) must give the CPU's logits and tokens
 * (under Deno only: ~3 s on lavapipe, ~20 s under Bun's bun-webgpu, which tests/webgpu covers).
 * Skipped with the reason when no adapter opens (a failure when LOOM_REQUIRE_WEBGPU=1).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import * as loom from "../../src/index.ts";
import { generate, loadModel, logitsOf } from "../../examples/browser/demo.ts";
import { writeDemoCheckpoint } from "../browser/checkpoint.ts";
import { RUNNER, assert, assertClose, assertEqual, env, test } from "./harness.ts";

const status = await loom.init_webgpu();
if (!status.available) {
  if (env("LOOM_REQUIRE_WEBGPU") === "1") throw new Error(`LOOM_REQUIRE_WEBGPU=1 but WebGPU is unavailable under ${RUNNER}: ${status.reason}`);
  console.warn(`[skip] webgpu under ${RUNNER}: ${status.reason}`);
}
const skip = !status.available;

test(`webgpu (${RUNNER}): matmul and softmax, read asynchronously (hand values)`, async () => {
  const a = loom.tensor([[1, 2], [3, 4]], { dtype: "float32" }).to("webgpu");
  assertClose(await a.matmul(a).data(), [7, 10, 15, 22]);
  // softmax([0, ln 3]) = [1/4, 3/4]
  assertClose(await loom.tensor([0, Math.log(3)], { dtype: "float32" }).to("webgpu").softmax(0).data(), [0.25, 0.75], 1e-7, 1e-6);
}, skip);

test(`webgpu (${RUNNER}): the browser demo's GPT + LoRA gives the CPU's logits and greedy tokens`, async () => {
  const dir = mkdtempSync(join(tmpdir(), "loom-webgpu-demo-"));
  try {
    const { vocab_size } = writeDemoCheckpoint(loom, dir);
    const url = (p: string) => `${pathToFileURL(join(dir, p)).href}/`;
    const cpu = await loadModel(url("model"), url("adapter"), false);
    const gpu = await loadModel(url("model"), url("adapter"), true);
    assertEqual(gpu.device, "webgpu", "device");
    const ids = cpu.tokenizer!.encode("Anna\n");
    const want = await logitsOf(cpu, ids);
    assertEqual(want.length, ids.length * vocab_size, "logits size");
    assertClose(await logitsOf(gpu, ids), want, 2e-5, 1e-4, "webgpu logits");
    const [g, c] = [await generate(gpu, ids, 3), await generate(cpu, ids, 3)];
    assertEqual(g.ids, c.ids, "greedy tokens");
    assert(g.tokensPerSecond > 0, "tokens/s");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, skip || RUNNER === "bun"); // under bun test: tests/webgpu covers bun-webgpu, and this model takes ~20 s there on lavapipe
