/**
 * loom.compress (src/weights/compress.ts): every method replaces the targeted layers in place by
 * CompressedLinear, the report's bytes are the nodes' (checked against the layouts by hand), its
 * relative Frobenius errors and validation losses equal values computed independently from the
 * saved dense weights, PEFT-style target matching, HF Conv1D layers, tied weights left dense, the
 * compressed model runs eager and lazy, and the errors.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { with_execution_mode } from "../../src/nn/execution.ts";
import { CompressedLinear, load_weights, matches_target, memory_usage, save_weights, type CompressMethod } from "../../src/weights/index.ts";
import { loadLapack } from "../../src/backends/native/lapack.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { thrown } from "../thrown.ts";

class MLP extends nn.Module {
  fc1: nn.Linear;
  act = new nn.ReLU();
  fc2: nn.Linear;
  proj: nn.Conv1D;
  constructor() {
    super();
    loom.manual_seed(12);
    this.fc1 = new nn.Linear(64, 64);
    this.fc2 = new nn.Linear(64, 64);
    this.proj = new nn.Conv1D(32, 64); // HF Conv1D: weight [in=64, out=32]
    nn.init.normal_(this.proj.weight, 0, 0.2);
  }
  override forward(x: loom.Tensor): loom.Tensor {
    return this.proj.call(this.fc2.call(this.act.call(this.fc1.call(x))));
  }
}

const input = loom.randn([5, 64], { generator: new loom.Generator(1) });
const target = loom.randn([5, 32], { generator: new loom.Generator(2) });
const validation = { input, target, loss_fn: (o: loom.Tensor, t: loom.Tensor) => loom.mse_loss(o, t) };
const vals = (t: loom.Tensor) => Array.from(t.dataSync());

/** ‖a − b‖_F / ‖a‖_F in float64, written out. */
function relErr(a: number[], b: number[]): number {
  let n = 0, d = 0;
  a.forEach((v, i) => { n += (v - b[i]!) ** 2; d += v * v; });
  return Math.sqrt(n / d);
}

const hasLapack = !("error" in loadLapack());
const METHODS: { method: CompressMethod; opts: Record<string, number>; bytes: (N: number, K: number) => number }[] = [
  { method: "q8_0", opts: {}, bytes: (N, K) => N * (K / 32) * 34 }, // ggml block_q8_0: fp16 d + 32 int8
  { method: "q4_0", opts: {}, bytes: (N, K) => N * (K / 32) * 18 }, // block_q4_0: fp16 d + 16 bytes
  { method: "nf4", opts: {}, bytes: (N, K) => (N * K) / 2 + ((N * K) / 64) * 4 }, // 2 codes a byte + float32 absmax per 64
  { method: "int8", opts: {}, bytes: (N, K) => N * K + N * 4 },
  ...(hasLapack ? [{ method: "lowrank" as const, opts: { rank: 8 }, bytes: (N: number, K: number) => (N + K + 1) * 8 * 4 }] : []),
  { method: "sparse", opts: { sparsity: 0.75 }, bytes: (N, K) => 8 * Math.round(N * K * 0.25) + 4 * (N + 1) },
  { method: "pq", opts: { bits: 4, sub_dim: 8 }, bytes: (N, K) => N * (K / 8) + (K / 8) * 16 * 8 * 4 },
];

describe.each(BACKENDS)("loom.compress on %s", (backend) => {
  useBackend(backend);
  for (const { method, opts, bytes } of METHODS) {
    test(`${method}: in-place replacement, bytes, errors and losses computed independently`, () => {
      const model = new MLP();
      const dense = { fc1: vals(model.fc1.weight), fc2: vals(model.fc2.weight), proj: vals(model.proj.weight.t().contiguous()) };
      const want_before = loom.no_grad(() => loom.mse_loss(model.call(input), target).item());
      const report = loom.compress(model, { method, ...opts, validation });
      expect(report.layers.map((l) => l.name)).toEqual(["fc1", "fc2", "proj"]);
      expect(report.loss_before).toBe(want_before);
      for (const l of report.layers) {
        const layer = model.get_submodule(l.name) as CompressedLinear;
        expect(layer).toBeInstanceOf(CompressedLinear);
        const [N, K] = l.shape as [number, number];
        expect(l.bytes_before).toBe(N * K * 4);
        expect(l.bytes_after).toBe(bytes(N, K));
        const got = relErr(dense[l.name as keyof typeof dense], vals(layer.weight.materialize()));
        expect(Math.abs(l.rel_error - got)).toBeLessThanOrEqual(1e-12 + 1e-9 * got);
        expect(l.rel_error).toBeLessThan(method === "sparse" || method === "lowrank" || method === "pq" ? 0.9 : 0.2);
      }
      expect(report.bytes_after).toBe(report.layers.reduce((s, l) => s + l.bytes_after, 0));
      expect(report.ratio).toBeCloseTo(report.bytes_after / report.bytes_before, 12);
      // the loss after is the compressed model's, eager and lazy
      const after = loom.no_grad(() => loom.mse_loss(model.call(input), target).item());
      expect(report.loss_after).toBe(after);
      const lazy = with_execution_mode("lazy", () => loom.no_grad(() => loom.mse_loss(model.call(input), target).item()));
      expect(Math.abs(lazy - after)).toBeLessThanOrEqual(1e-5 * Math.abs(after));
      expect(Number.isFinite(report.loss_after!)).toBe(true);
    });
  }
  test("a Conv1D layer compresses to the same function: x·W + b == x·(Wᵀ)ᵀ + b", () => {
    const model = new MLP();
    const h = loom.randn([3, 64], { generator: new loom.Generator(4) });
    const want = vals(model.proj.call(h));
    loom.compress(model, { method: "sparse", sparsity: 0, target_modules: ["proj"] });
    const got = vals(model.proj.call(h));
    got.forEach((v, i) => expect(Math.abs(v - want[i]!)).toBeLessThanOrEqual(1e-5));
  });
});

describe("compressed models save, load and account memory", () => {
  for (const { method, opts } of METHODS) {
    test(`${method}: save_weights/load_weights round-trips every node; memory_usage agrees with the report`, () => {
      const model = new MLP();
      const report = loom.compress(model, { method, ...opts });
      const back = load_weights(save_weights(model));
      expect(Object.keys(back)).toEqual(["fc1.weight", "fc2.weight", "proj.weight"]);
      for (const l of report.layers) {
        const node = (model.get_submodule(l.name) as CompressedLinear).weight;
        const b = back[`${l.name}.weight`]!;
        expect(b.kind).toBe(node.kind);
        expect(b.nbytes()).toBe(l.bytes_after);
        expect(vals(b.materialize())).toEqual(vals(node.materialize()));
      }
      const mu = memory_usage(model);
      for (const l of report.layers) expect(mu.weights.find((w) => w.name === `${l.name}.weight`)).toMatchObject({ nbytes: l.bytes_after, dense_nbytes: l.bytes_before });
    });
  }
});

describe("loom.compress targets and errors", () => {
  test("PEFT-style target_modules: list suffixes and whole-path regexes", () => {
    expect(matches_target("h.0.mlp.c_fc", ["c_fc"])).toBe(true);
    expect(matches_target("h.0.mlp.c_fc", ["mlp.c_fc"])).toBe(true);
    expect(matches_target("h.0.mlp.c_fc", ["fc"])).toBe(false);
    expect(matches_target("h.0.mlp.c_fc", ".*mlp.*")).toBe(true);
    expect(matches_target("h.0.mlp.c_fc", "mlp")).toBe(false);
    const model = new MLP();
    const r = loom.compress(model, { method: "int8", target_modules: "fc[12]" });
    expect(r.layers.map((l) => l.name)).toEqual(["fc1", "fc2"]);
    expect(model.proj).toBeInstanceOf(nn.Conv1D);
    expect(r.loss_before).toBeNull();
  });
  test("tied weights stay dense unless named", () => {
    class Tied extends nn.Module {
      a = new nn.Linear(32, 32);
      b = new nn.Linear(32, 32);
      c = new nn.Linear(32, 32);
      constructor() { super(); this.b.weight = this.a.weight; }
    }
    const m = new Tied();
    expect(loom.compress(m, { method: "q8_0" }).layers.map((l) => l.name)).toEqual(["c"]);
  });
  test("bad options and targets get typed errors", () => {
    const m = new MLP();
    const err = (o: Parameters<typeof loom.compress>[1]) => thrown(() => loom.compress(m, o));
    expect(err({ method: "q3" as CompressMethod }).message).toContain('unknown method "q3"');
    expect(err({ method: "lowrank" }).message).toContain("needs a rank");
    expect(err({ method: "sparse" }).message).toContain("needs a sparsity");
    expect(err({ method: "q4_0", bits: 8 }).message).toContain("stores 4 bits per weight, got bits=8");
    expect(err({ method: "int8", target_modules: ["nothing"] }).message).toContain("not found");
    expect(err({ method: "int8", target_modules: ["act"] }).message).toContain('target module ReLU at "act" is not supported');
    const e = err({ method: "sparse", sparsity: 1.2, target_modules: ["fc1"] });
    expect(e).toBeInstanceOf(loom.LoomValueError);
    expect(e.message).toBe("[Sparse] fc1: sparsity 1.2 is outside [0, 1)");
    if (hasLapack) expect(err({ method: "lowrank", rank: 65, target_modules: ["fc1"] }).message).toBe("[LowRank] fc1: rank 65 is out of range [1, 64] for weight [64, 64]");
    loom.compress(m, { method: "int8", target_modules: ["fc1"] });
    expect(err({ method: "int8", target_modules: ["fc1"] }).message).toContain('"fc1" is already compressed');
    const small = new nn.Linear(48, 8);
    class One extends nn.Module { l = small; }
    expect(thrown(() => loom.compress(new One(), { method: "q4_0" }))).toBeInstanceOf(loom.LoomShapeError); // K=48 not a multiple of 32
  });
});
