/**
 * The Deno subset (`deno task test`, CI): core ops, autograd, the native backend through
 * Deno.dlopen (the same libloom .so, built with the compiler run by Deno.Command), generated
 * kernels, safetensors files, and one LoRA step whose losses must equal Bun's bit for bit.
 * Values are hand-derived; the harness also runs these tests under `bun test`.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { jitStats } from "../../src/backends/native/jit.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { spawnSync } from "../../src/runtime/process.ts";
import { RUNNER, assert, assertClose, assertEqual, assertThrows, env, test } from "./harness.ts";
import { loraStep, type LoraStepResult } from "./lora_step.ts";

const info = loom.runtime_info();
const NATIVE = info.cpu_backend === "native";
if (!NATIVE) {
  if (env("LOOM_REQUIRE_NATIVE") === "1") throw new Error(`LOOM_REQUIRE_NATIVE=1 but the native backend is unavailable under ${info.version}: ${info.native_unavailable_reason}`);
  console.warn(`[skip] native backend under ${info.version}: ${info.native_unavailable_reason}`);
}
const BACKENDS = NATIVE ? (["js", "native"] as const) : (["js"] as const);

/** Run `fn` with device "cpu" on `name`, restoring the default. */
function on<T>(name: "js" | "native", fn: () => T): T {
  const prev = set_default_backend(name);
  try {
    return fn();
  } finally {
    set_default_backend(prev as "js" | "native");
  }
}

test(`runtime: ${info.version} uses its own FFI`, () => {
  assertEqual(info.runtime, RUNNER, "runtime");
  if (NATIVE) assertEqual(info.ffi, RUNNER === "deno" ? "Deno.dlopen" : "bun:ffi", "ffi");
});

for (const b of BACKENDS) {
  test(`core ops on ${b}: matmul, broadcasting, reductions, softmax (hand values)`, () => on(b, () => {
    const f32 = { dtype: "float32" } as const;
    const a = loom.tensor([[1, 2], [3, 4]], f32);
    const c = loom.tensor([[5, 6], [7, 8]], f32);
    assertClose(a.matmul(c).dataSync(), [19, 22, 43, 50]);
    assertClose(a.add(loom.tensor([10, 20], f32)).dataSync(), [11, 22, 13, 24]);
    assertClose(a.sum(1).dataSync(), [3, 7]);
    assertClose(a.mean().dataSync(), [2.5]);
    // softmax([0, ln 3]) = [1/4, 3/4]
    assertClose(loom.tensor([0, Math.log(3)]).softmax(0).dataSync(), [0.25, 0.75], 1e-7);
    assertEqual([...a.transpose(0, 1).contiguous().dataSync()], [1, 3, 2, 4], "transpose");
    assertEqual(loom.tensor([[1, 2, 3]], { dtype: "int64" }).sum().item(), 6, "int64 sum");
    assertThrows(() => loom.ones([2, 3]).matmul(loom.ones([2, 3])), loom.LoomShapeError, "[2, 3]");
  }));

  test(`autograd on ${b}: d/dx sum(x²·y) = 2xy, d/dy = x²; tanh' = 1 − tanh²`, () => on(b, () => {
    const x = loom.tensor([1, -2, 3], { dtype: "float32", requires_grad: true });
    const y = loom.tensor([4, 5, -6], { dtype: "float32", requires_grad: true });
    x.mul(x).mul(y).sum().backward();
    assertClose(x.grad!.dataSync(), [8, -20, -36]);
    assertClose(y.grad!.dataSync(), [1, 4, 9]);
    const z = loom.tensor([0.5, -1.5], { requires_grad: true });
    z.tanh().sum().backward();
    assertClose(z.grad!.dataSync(), [0.5, -1.5].map((v) => 1 - Math.tanh(v) ** 2), 1e-7, 1e-6);
  }));
}

test("native == js: a 33×17 @ 17×5 matmul + gelu, and its gradient", () => {
  const g = new loom.Generator(3);
  const a0 = loom.randn([33, 17], { generator: g }), w0 = loom.randn([17, 5], { generator: g });
  const run = () => {
    const a = a0.clone().requires_grad_(true);
    const w = w0.clone().requires_grad_(true);
    const y = loom.nn.functional.gelu(a.matmul(w));
    y.sum().backward();
    return [y.dataSync(), a.grad!.dataSync(), w.grad!.dataSync()] as const;
  };
  const ref = on("js", run);
  const got = on("native", run);
  for (let i = 0; i < 3; i++) assertClose(got[i]!, ref[i]!, 1e-5, 1e-5, ["y", "a.grad", "w.grad"][i]);
}, !NATIVE);

test("native: a lazy program runs as one generated C kernel (compiled by cc, loaded by the runtime's dlopen)", () => {
  const before = { ...jitStats };
  const old = { min: process.env.LOOM_JIT_MIN_ELEMENTS, cache: process.env.LOOM_CACHE_DIR };
  process.env.LOOM_JIT_MIN_ELEMENTS = "1";
  // an empty kernel cache: the compiler must run (through the runtime's spawnSync)
  process.env.LOOM_CACHE_DIR = mkdtempSync(join(tmpdir(), "loom-deno-cache-"));
  try {
    on("native", () => {
      const x = loom.linspace(-3, 3, 4096).reshape([64, 64]);
      const k = 1.5;
      const y = x.lazy().mul(k).tanh().add(x.lazy().exp().mul(0.5)).realize();
      const want = Float64Array.from(x.dataSync(), (v) => Math.fround(Math.fround(Math.tanh(Math.fround(v * Math.fround(k)))) + Math.fround(Math.fround(Math.exp(v)) * 0.5)));
      assertClose(y.dataSync(), want, 1e-5, 1e-5, "tanh(k·x) + exp(x)/2");
    });
  } finally {
    for (const [k, v] of [["LOOM_JIT_MIN_ELEMENTS", old.min], ["LOOM_CACHE_DIR", old.cache]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
  assert(jitStats.failures === before.failures, `a generated kernel failed to compile or load (${jitStats.failures - before.failures} failures)`);
  // the program may already be in this process's memory (an earlier test of the same run), else it was compiled now
  assert(jitStats.compiles > before.compiles || jitStats.programs > 0, `no generated kernel was compiled (${JSON.stringify(jitStats)})`);
}, !NATIVE);

test("safetensors: save_file then load_file (the runtime's file I/O)", () => {
  const dir = mkdtempSync(join(tmpdir(), "loom-deno-")); // node:fs works under both runtimes
  const path = `${dir}/t.safetensors`;
  loom.io.save_file({ w: { dtype: "float32", shape: [2, 2], data: new Float32Array([1, 2, 3, 4.5]) } }, path);
  const back = loom.io.load_file(path).tensors;
  assertEqual(back.get("w")!.shape, [2, 2], "shape");
  assertClose(back.get("w")!.data as Float32Array, [1, 2, 3, 4.5]);
});

/** One LoRA step in the other runtime (bun ⇄ deno), as JSON; null when it is not installed. */
function otherRuntime(): { name: string; result: LoraStepResult } | null {
  const bin = RUNNER === "deno" ? "./node_modules/.bin/bun" : "./node_modules/.bin/deno";
  const argv = RUNNER === "deno" ? [bin, "tests/deno/lora_step.ts"] : [bin, "run", "-A", "tests/deno/lora_step.ts"];
  const r = spawnSync(argv);
  if (!r.success) {
    console.warn(`[skip] comparison with ${bin}: ${r.stderr.trim().split("\n").slice(-3).join(" ")}`);
    return null;
  }
  return { name: bin, result: JSON.parse(r.stdout.trim().split("\n").pop()!) as LoraStepResult };
}

test("LoRA: one AdamW step lowers the loss, trains only the adapter, and equals the other runtime's step bit for bit", () => {
  const r = loraStep(loom);
  assertEqual(r.backend, info.cpu_backend, "backend");
  assertEqual(r.trainable, 352, "trainable parameters"); // c_attn: 2·16 + 48·2, c_proj: 2·16 + 16·2 (r = 2)
  assert(r.loss1 < r.loss0, `loss did not decrease: ${r.loss0} -> ${r.loss1}`);
  assert(r.loraBAbs > 0, "lora_B stayed zero");
  // the untrained loss is near ln(vocab) = ln 32 for a freshly initialized model
  assert(Math.abs(r.loss0 - Math.log(32)) < 0.2, `initial loss ${r.loss0} far from ln 32`);
  const lazy = loraStep(loom, "lazy");
  assertClose([lazy.loss0, lazy.loss1], [r.loss0, r.loss1], 1e-6, 1e-6, "lazy vs eager losses");
  const other = otherRuntime();
  if (other) assertEqual([other.result.loss0, other.result.loss1, other.result.loraBAbs], [r.loss0, r.loss1, r.loraBAbs], `${RUNNER} vs ${other.name}`);
});
