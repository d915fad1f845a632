/**
 * loom.save / loom.load (torch.save / torch.load as safetensors + a JSON object tree) and the
 * generator state: round trips of every kind of value, typed errors for what cannot be saved and
 * for malformed or foreign files, and a training run resumed from a checkpoint that ends bit-equal
 * to the uninterrupted run (model, AdamW, LR scheduler, RNG for dropout and batches), lazy mode,
 * on js and native.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { models, nn, optim } from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-ckpt-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string) => join(dir, name);

describe("round trip", () => {
  test("nested objects, Maps, special numbers, undefined, dtypes, requires_grad and shared tensors", () => {
    const w = loom.randn([2, 3]).requires_grad_();
    const obj = {
      w, again: w,
      ints: loom.tensor([[1, -2], [3, 2 ** 40]], { dtype: "int64" }),
      mask: loom.tensor([true, false, true]),
      half: loom.tensor([1.5, -2], { dtype: "bfloat16" }),
      lazy: loom.ones([2]).lazy().mul(3),
      view: loom.arange(6).reshape([2, 3]).transpose(0, 1),
      nums: [1, -0, NaN, Infinity, -Infinity, 0.1, "text", null, true, undefined],
      map: new Map<string | number, unknown>([["a", 1], [2, { deep: [loom.zeros([1])] }]]),
      ["__proto__"]: { safe: 1 },
    };
    loom.save(obj, file("round.safetensors"));
    const back = loom.load(file("round.safetensors"));
    expect(back.w.tolist()).toEqual(w.tolist());
    expect(back.w.requires_grad).toBe(true);
    expect(back.again).toBe(back.w); // one tensor, stored once
    expect(back.ints.dtype).toBe("int64");
    expect(back.ints.tolist()).toEqual([[1, -2], [3, 2 ** 40]]);
    expect(back.mask.tolist()).toEqual([true, false, true]);
    expect(back.half.dtype).toBe("bfloat16");
    expect(back.half.tolist()).toEqual([1.5, -2]);
    expect(back.lazy.tolist()).toEqual([3, 3]);
    expect(back.view.tolist()).toEqual([[0, 3], [1, 4], [2, 5]]);
    expect(Object.is(back.nums[1], -0)).toBe(true);
    expect(back.nums.slice(2, 5)).toEqual([NaN, Infinity, -Infinity]);
    expect(back.nums.slice(5)).toEqual([0.1, "text", null, true, undefined]);
    expect(back.map.get("a")).toBe(1);
    expect(back.map.get(2).deep[0].tolist()).toEqual([0]);
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(back, "__proto__")!.value).toEqual({ safe: 1 });
  });

  test("the generator state restores the same draws", () => {
    loom.manual_seed(3);
    loom.randn([5]);
    const s = loom.get_rng_state();
    expect(s.dtype).toBe("uint8");
    const a = loom.randn([7]).tolist(); // an odd count leaves a Box-Muller value kept
    const b = loom.randn([3]).tolist();
    loom.set_rng_state(s);
    expect(loom.randn([7]).tolist()).toEqual(a);
    expect(loom.randn([3]).tolist()).toEqual(b);
    expect(() => loom.set_rng_state(loom.zeros([4], { dtype: "uint8" }))).toThrow(/expected 2517 bytes, got 4/);
  });
});

describe("Uint8Array and typed load", () => {
  test("Generator.get_state() saves as bytes and loads back as a Uint8Array that restores the draws", () => {
    const g = new loom.Generator(11);
    loom.randn([3], { generator: g });
    const state = g.get_state();
    const big = new Uint8Array([9, 9, 1, 2, 3, 9]);
    const view = big.subarray(2, 5); // a view into a larger buffer: only its 3 bytes are stored
    interface Ckpt { step: number; rng: Uint8Array; again: Uint8Array; view: Uint8Array; empty: Uint8Array }
    loom.save({ step: 4, rng: state, again: state, view, empty: new Uint8Array(0) } satisfies Ckpt, file("bytes.safetensors"));
    const back = loom.load<Ckpt>(file("bytes.safetensors")); // typed: back.rng is a Uint8Array
    expect(back.rng).toBeInstanceOf(Uint8Array);
    expect(Array.from(back.rng)).toEqual(Array.from(state));
    expect(back.again).toBe(back.rng); // one object, stored once
    expect(Array.from(back.view)).toEqual([1, 2, 3]);
    expect(back.empty).toEqual(new Uint8Array(0));
    expect(back.step).toBe(4);
    const want = loom.randn([5], { generator: g }).tolist();
    expect(loom.randn([5], { generator: new loom.Generator(0).set_state(back.rng) }).tolist()).toEqual(want);
    const untyped = loom.load(file("bytes.safetensors")); // any, as before
    expect(untyped.step).toBe(4);
  });

  test("a $bytes node must name a 1-D uint8 tensor", () => {
    loom.io.save_file({ "0": { dtype: "float32", shape: [1], data: new Float32Array([1]) } }, file("badbytes.safetensors"), { format: "loom", "loom.tree": '{"$bytes": "0"}' });
    expect(() => loom.load(file("badbytes.safetensors"))).toThrow(/obj: bytes "0" must be a 1-D uint8 tensor, got float32 \[1\]/);
    loom.io.save_file({ "0": { dtype: "uint8", shape: [1], data: new Uint8Array([1]) } }, file("badbytes.safetensors"), { format: "loom", "loom.tree": '{"$bytes": "3"}' });
    expect(() => loom.load(file("badbytes.safetensors"))).toThrow(loom.LoomFormatError);
  });
});

describe("bad input", () => {
  test("values that cannot be saved raise naming where they are", () => {
    expect(() => loom.save({ a: [1, () => 2] }, file("x.safetensors"))).toThrow(/\[save\] obj\.a\[1\]: cannot save a value of type function/);
    expect(() => loom.save({ d: new Date() }, file("x.safetensors"))).toThrow(/obj\.d: cannot save an instance of Date/);
    const cyc: Record<string, unknown> = {};
    cyc.self = cyc;
    expect(() => loom.save(cyc, file("x.safetensors"))).toThrow(/a cycle/);
    expect(() => loom.save({ n: 1n }, file("x.safetensors"))).toThrow(loom.LoomValueError);
  });

  test("a foreign or malformed file raises LoomFormatError naming the problem", () => {
    loom.io.save_file({ w: { dtype: "float32", shape: [1], data: new Float32Array([1]) } }, file("plain.safetensors"));
    expect(() => loom.load(file("plain.safetensors"))).toThrow(/not a Loom checkpoint/);
    const bad = (tree: string) => {
      loom.io.save_file({ "0": { dtype: "float32", shape: [1], data: new Float32Array([1]) } }, file("bad.safetensors"), { format: "loom", "loom.tree": tree });
      return () => loom.load(file("bad.safetensors"));
    };
    expect(bad('{"$tensor": "7"}')).toThrow(/obj: tensor "7" is not in the file/);
    expect(bad('{"$dict": {"a": {"$what": 1}}}')).toThrow(/obj\.a: unknown node with keys \["\$what"\]/);
    expect(bad('{"$number": "1e999"}')).toThrow(/unknown \$number/);
    expect(bad("{not json")).toThrow(/not valid JSON/);
    expect(bad("[".repeat(300) + "]".repeat(300))).toThrow(/nested deeper than 256/);
    expect(bad('{"$map": [[{}, 1]]}')).toThrow(/\$map entry 0 is not a \[key, value\] pair/);
    expect(bad('{"$dict": {"ok": {"$tensor": "0"}}}')().ok.tolist()).toEqual([1]);
  });
});

describe.each(BACKENDS)("resuming training on %s", (backend) => {
  useBackend(backend);
  test("3 steps, save, a fresh model and optimizer load it, 3 more steps: bit-equal to 6 steps in a row", () => {
    const config = () => new models.GPT2Config({ vocab_size: 23, n_positions: 8, n_embd: 16, n_layer: 2, n_head: 2, resid_pdrop: 0.1, embd_pdrop: 0.1, attn_pdrop: 0.1 });
    const setup = (seed: number) => {
      loom.manual_seed(seed);
      const model = new models.GPT2LMHeadModel(config());
      const opt = new optim.AdamW(model.parameters(), { lr: 1e-2, weight_decay: 0.1 });
      const sched = new optim.lr_scheduler.StepLR(opt, 2, 0.5);
      model.train();
      return { model, opt, sched };
    };
    const step = (s: ReturnType<typeof setup>) => {
      const x = loom.randint(0, 23, [2, 8]), y = loom.randint(0, 23, [2, 8]); // batches from the generator
      const { loss } = s.model.call(x, { targets: y });
      s.opt.zero_grad();
      loss!.backward();
      s.opt.step();
      s.sched.step();
      return loss!.item();
    };
    const params = (s: ReturnType<typeof setup>) => s.model.parameters().map((p) => Array.from(p.dataSync()));
    const straight = setup(0);
    const losses = Array.from({ length: 6 }, () => step(straight));

    const first = setup(0);
    const resumed: number[] = [];
    for (let i = 0; i < 3; i++) resumed.push(step(first));
    loom.save({ model: first.model.state_dict(), optimizer: first.opt.state_dict(), scheduler: first.sched.state_dict(), rng: loom.get_rng_state(), step: 3 }, file(`resume-${backend}.safetensors`));

    const second = setup(1); // other weights and another generator position until the load
    const ckpt = loom.load(file(`resume-${backend}.safetensors`));
    second.model.load_state_dict(ckpt.model);
    second.opt.load_state_dict(ckpt.optimizer);
    second.sched.load_state_dict(ckpt.scheduler);
    loom.set_rng_state(ckpt.rng);
    expect(ckpt.step).toBe(3);
    for (let i = 0; i < 3; i++) resumed.push(step(second));
    expect(resumed).toEqual(losses);
    expect(params(second)).toEqual(params(straight));
    expect(second.opt.param_groups[0]!.lr).toBe(straight.opt.param_groups[0]!.lr);
    expect(straight.opt.param_groups[0]!.lr).toBeCloseTo(0.01 * 0.5 ** 3, 12); // the schedule ran
  });
});
