/**
 * Mixed precision (loom.autocast, loom.amp.GradScaler) on js and native, eager and lazy.
 * - autocast policy: output dtypes of the lower-precision and fp32 ops, ops that follow their
 *   inputs, nesting, enabled:false, restoring after the block and on a throw (lazy/autocast.ts);
 * - a small MLP under bfloat16 autocast against PyTorch 1.13 (amp_goldens.json from
 *   gen_amp_goldens.py): hidden, logits, loss and the float32 gradients of float32 master weights;
 * - GradScaler: scaling, unscale_, a skipped step on inf/NaN, backoff/growth over steps against
 *   hand-derived scales, state_dict round trip (torch 1.13 disables GradScaler without CUDA, so
 *   these are hand-derived);
 * - why fp16 training needs it: float32 master weights, float16 autocast and a loss small enough
 *   that every float16 activation gradient underflows to 0 (the loss never moves) trains with the
 *   scaler; and pure float16 AdamW (model.half()) turns parameters non-finite in one step.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { amp, nn, optim } from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";
import { expectClose, fromArr, readGolden, type Arr } from "../nn/helpers.ts";

const F = nn.functional;
const BF16 = { device_type: "cpu", dtype: "bfloat16" } as const;
const FP16 = { device_type: "cpu", dtype: "float16" } as const;
type Mode = "eager" | "lazy";
const MODES: Mode[] = ["eager", "lazy"];

interface Golden {
  x: Arr; w1: Arr; b1: Arr; w2: Arr; b2: Arr; target: Arr; hidden: Arr; logits: Arr; loss: Arr;
  grads: Record<"w1" | "b1" | "w2" | "b2", Arr>;
}
const golden = readGolden<Golden>(new URL("./amp_goldens.json", import.meta.url));

function mlp<S extends loom.TensorOps<S>>(x: S, w1: S, b1: S, w2: S, b2: S): { hidden: S; logits: S } {
  const hidden = F.relu(F.linear(x, w1, b1));
  return { hidden, logits: F.linear(hidden, w2, b2) };
}

/** x in the mode: an eager tensor, or a LazyTensor over it (gradients come back to x). */
function inMode(t: loom.Tensor, mode: Mode): any {
  return mode === "lazy" ? t.lazy() : t;
}

for (const backend of BACKENDS) {
  describe(`autocast policy [${backend}]`, () => {
    useBackend(backend);
    for (const mode of MODES) {
      test(`lower-precision ops run in the region's dtype, fp32 ops in float32 (${mode})`, () => {
        const a = inMode(loom.randn([3, 4]), mode), b = inMode(loom.randn([4, 5]), mode);
        const w = inMode(loom.randn([5, 4]), mode), bias = inMode(loom.randn([5]), mode);
        const a16 = inMode(loom.randn([3, 4]).to("bfloat16"), mode);
        {
          using _ = loom.autocast(BF16);
          expect(a.matmul(b).dtype).toBe("bfloat16");
          expect(a.mm(b).dtype).toBe("bfloat16");
          expect(a.unsqueeze(0).bmm(b.unsqueeze(0)).dtype).toBe("bfloat16");
          expect(F.linear(a, w, bias).dtype).toBe("bfloat16"); // the bias is cast too (torch)
          expect(F.linear(a, w).dtype).toBe("bfloat16");
          expect(a.to("float64").matmul(b.to("float64")).dtype).toBe("float64"); // float64 is not cast
          // fp32 list: composites of exp/log/sum/rsqrt compute and return float32
          expect(a16.softmax(1).dtype).toBe("float32");
          expect(a16.log_softmax(1).dtype).toBe("float32");
          expect(F.layer_norm(a16, [4]).dtype).toBe("float32");
          expect(F.cross_entropy(a16, inMode(loom.tensor([0, 3, 1]), mode)).dtype).toBe("float32");
          expect(F.mse_loss(a16, a16).dtype).toBe("float32");
          expect(a16.sum().dtype).toBe("float32");
          expect(a16.exp().dtype).toBe("float32");
          expect(a.to("float64").sum().dtype).toBe("float64");
          // others follow their inputs
          expect(a16.relu().dtype).toBe("bfloat16");
          expect(a16.add(a).dtype).toBe("float32");
          expect(a16.mul(2).dtype).toBe("bfloat16");
        }
        expect(a.matmul(b).dtype).toBe("float32");
        expect(a16.sum().dtype).toBe("bfloat16");
        loom.autocast(FP16, () => expect(F.linear(a, w, bias).dtype).toBe("float16"));
      });

      test(`matmul values: the float32 inputs rounded to bfloat16, the product rounded once (${mode})`, () => {
        // [1 + 2^-9] rounds to 1 in bfloat16 (8 significant bits): (1 + 2^-9) · 3 = 3 exactly
        const a = inMode(loom.tensor([[1 + 2 ** -9, 1]], { dtype: "float32" }), mode);
        const b = inMode(loom.tensor([[3], [5]], { dtype: "float32" }), mode);
        const y = loom.autocast(BF16, () => a.matmul(b));
        expect(y.dtype).toBe("bfloat16");
        expect(Array.from(y.dataSync())).toEqual([8]);
        expect(Array.from(a.matmul(b).dataSync())).toEqual([8 + 3 * 2 ** -9]);
      });
    }

    test("nesting, enabled:false, restored after the block, on throw and after an async callback", async () => {
      const a = loom.randn([2, 2]);
      expect(loom.is_autocast_enabled()).toBe(false);
      {
        using _outer = loom.autocast(BF16);
        expect(loom.get_autocast_dtype("cpu")).toBe("bfloat16");
        {
          using _off = loom.autocast({ device_type: "cpu", enabled: false });
          expect(loom.is_autocast_enabled()).toBe(false);
          expect(a.matmul(a).dtype).toBe("float32");
        }
        expect(amp.autocast(FP16, () => a.matmul(a).dtype)).toBe("float16");
        expect(a.matmul(a).dtype).toBe("bfloat16");
        expect(() => loom.autocast(FP16, () => { throw new Error("boom"); })).toThrow("boom");
        expect(a.matmul(a).dtype).toBe("bfloat16");
      }
      expect(a.matmul(a).dtype).toBe("float32");
      const p = loom.autocast(BF16, async () => {
        await Promise.resolve();
        return a.matmul(a).dtype;
      });
      expect(await p).toBe("bfloat16");
      expect(loom.is_autocast_enabled()).toBe(false);
      // a webgpu region does not touch cpu tensors; the default cpu dtype is bfloat16
      loom.autocast({ device_type: "webgpu" }, () => expect(a.matmul(a).dtype).toBe("float32"));
      loom.autocast({ device_type: "cpu" }, () => expect(a.matmul(a).dtype).toBe("bfloat16"));
      expect(() => loom.autocast({ device_type: "cuda" as never })).toThrow(loom.LoomValueError);
      expect(() => loom.autocast({ device_type: "cpu", dtype: "float32" as never })).toThrow(loom.LoomValueError);
      expect(loom.is_autocast_enabled()).toBe(false);
    });

    test("gradient rules run without autocast: a float32 graph's backward inside a region stays float32", () => {
      // (an autocast graph's backward is unaffected either way: the engine rounds each gradient to
      // its input's dtype; a float32 graph's matmul gradients would run in bfloat16 without the rule)
      const grads = (inside: boolean): Float64Array[] => {
        const leaves = (["w1", "b1", "w2", "b2"] as const).map((k) => fromArr(golden[k]).requires_grad_());
        const [w1, b1, w2, b2] = leaves as [loom.Tensor, loom.Tensor, loom.Tensor, loom.Tensor];
        const loss = F.cross_entropy(mlp(fromArr(golden.x), w1, b1, w2, b2).logits, fromArr(golden.target));
        if (inside) loom.autocast(BF16, () => loss.backward());
        else loss.backward();
        return leaves.map((l) => {
          expect(l.grad!.dtype).toBe("float32");
          return l.grad!.dataSync();
        });
      };
      expect(grads(true)).toEqual(grads(false));
    });

    for (const mode of MODES) {
      test(`MLP under bfloat16 autocast matches torch; float32 master weights get float32 gradients (${mode})`, () => {
        const leaves = (["w1", "b1", "w2", "b2"] as const).map((k) => fromArr(golden[k]).requires_grad_());
        const [w1, b1, w2, b2] = leaves.map((t) => inMode(t, mode));
        const x = inMode(fromArr(golden.x), mode), target = inMode(fromArr(golden.target), mode);
        const { hidden, logits, loss } = loom.autocast(BF16, () => {
          const r = mlp(x, w1, b1, w2, b2);
          return { ...r, loss: F.cross_entropy(r.logits, target) };
        });
        expect([hidden.dtype, logits.dtype, loss.dtype]).toEqual(["bfloat16", "bfloat16", "float32"]);
        // torch rounds x·Wᵀ + b once (addmm); Loom rounds the product, then the sum: <= 2 bf16 ulps
        const BF = { rtol: 2 ** -6, atol: 2 ** -7 };
        expectClose(hidden, golden.hidden, { ...BF, what: "hidden" });
        expectClose(logits, golden.logits, { ...BF, what: "logits" });
        expectClose(loss, golden.loss, { rtol: 2 ** -7, atol: 0, what: "loss" });
        loss.backward(); // outside the region, as torch recommends
        (["w1", "b1", "w2", "b2"] as const).forEach((k, i) => {
          const g = leaves[i]!.grad!;
          expect(g.dtype).toBe("float32");
          expectClose(g, golden.grads[k], { rtol: 2 ** -5, atol: 2 ** -8, what: `grad ${k}` });
        });
      });
    }
  });

  describe(`GradScaler [${backend}]`, () => {
    useBackend(backend);

    function setup(grads: number[][]): { params: loom.Tensor[]; opt: optim.Adam } {
      const params = grads.map((g) => loom.ones([g.length]).requires_grad_());
      params.forEach((p, i) => { p.grad = loom.tensor(grads[i]!, { dtype: "float32" }); });
      return { params, opt: new optim.Adam(params, { lr: 0.1 }) };
    }

    test("scale multiplies in float32; unscale_ divides the gradients; disabled is a pass-through", () => {
      const s = new amp.GradScaler();
      expect(s.get_scale()).toBe(65536);
      const loss = loom.tensor(0.5, { dtype: "float32" });
      expect(s.scale(loss).item()).toBe(32768);
      const h = s.scale(loom.tensor(2, { dtype: "float16" })); // 2^17 would overflow float16
      expect([h.dtype, h.item()]).toEqual(["float32", 131072]);
      expect(s.scale([loss, loss]).map((t) => t.item())).toEqual([32768, 32768]);
      const { params, opt } = setup([[65536, -131072], [3 * 65536]]);
      s.unscale_(opt);
      expect(Array.from(params[0]!.grad!.dataSync())).toEqual([1, -2]);
      expect(Array.from(params[1]!.grad!.dataSync())).toEqual([3]);
      expect(() => s.unscale_(opt)).toThrow("unscale_() has already been called");
      s.step(opt); // uses the unscaled gradients: Adam's first step moves each parameter by lr·sign(g)
      expectClose(params[0]!, [0.9, 1.1], { rtol: 1e-6, what: "stepped" });
      expect(() => s.step(opt)).toThrow("step() has already been called");
      s.update();
      expect(s.get_scale()).toBe(65536);

      const off = new amp.GradScaler({ enabled: false });
      expect(off.scale(loss)).toBe(loss);
      expect(off.get_scale()).toBe(1);
      expect(off.state_dict()).toEqual({});
    });

    test("an inf or NaN gradient skips the step (parameters and optimizer state untouched) and backs off", () => {
      for (const bad of [Infinity, -Infinity, NaN]) {
        const s = new amp.GradScaler({ init_scale: 1024 });
        const { params, opt } = setup([[1, 2], [3, bad]]);
        expect(s.step(opt)).toBeUndefined();
        params.forEach((p) => expect(Array.from(p.dataSync())).toEqual(Array(p.numel()).fill(1)));
        expect(opt.state.size).toBe(0);
        s.update();
        expect(s.get_scale()).toBe(512);
      }
    });

    test("each optimizer is skipped on its own inf; update backs off if any had one; unscale_ then clip_grad_norm_", () => {
      const s = new amp.GradScaler({ init_scale: 4 });
      const a = setup([[4, 8]]), b = setup([[NaN, 4]]);
      s.unscale_(a.opt);
      // torch's recipe: clip the unscaled gradients; [1, 2] has norm √5, clipped to norm 1
      const total = nn.clip_grad_norm_(a.params, 1);
      expect(total.item()).toBeCloseTo(Math.sqrt(5), 6);
      expectClose(a.params[0]!.grad!, [1 / Math.sqrt(5), 2 / Math.sqrt(5)], { rtol: 1e-6, what: "clipped" });
      s.step(a.opt);
      s.step(b.opt);
      expectClose(a.params[0]!, [0.9, 0.9], { rtol: 1e-6, what: "a stepped" });
      expect(Array.from(b.params[0]!.dataSync())).toEqual([1, 1]);
      s.update();
      expect(s.get_scale()).toBe(2);
    });

    test("unscale_ refuses float16 gradients; step refuses a closure; update needs a recorded check", () => {
      const s = new amp.GradScaler();
      const p = loom.ones([2], { dtype: "float16" }).requires_grad_();
      p.grad = loom.ones([2], { dtype: "float16" });
      const opt = new optim.SGD([p], { lr: 0.1 });
      expect(() => s.unscale_(opt)).toThrow(loom.LoomDtypeError);
      expect(() => s.step(opt, () => 0)).toThrow("Closure use is not currently supported");
      expect(() => new amp.GradScaler().update()).toThrow("No inf checks were recorded");
      expect(() => new amp.GradScaler({ growth_factor: 1 })).toThrow(loom.LoomValueError);
      expect(() => new amp.GradScaler({ backoff_factor: 1.5 })).toThrow(loom.LoomValueError);
      expect(() => new amp.GradScaler({ growth_interval: 0 })).toThrow(loom.LoomValueError);
    });

    test("scale over steps (hand-derived) and state_dict round trip", () => {
      // growth_interval 3: ok ok ok -> 8·2 = 16 (tracker 0); inf -> 16·0.5 = 8; ok ok -> 8 (tracker 2)
      const s = new amp.GradScaler({ init_scale: 8, growth_interval: 3 });
      const pattern = [false, false, false, true, false, false];
      const want = [8, 8, 16, 8, 8, 8];
      const got: number[] = [];
      const run = (sc: amp.GradScaler, inf: boolean): number => {
        const { opt } = setup([[1, inf ? Infinity : 2]]);
        sc.scale(loom.tensor(1, { dtype: "float32" }));
        sc.step(opt);
        sc.update();
        return sc.get_scale();
      };
      for (const inf of pattern) got.push(run(s, inf));
      expect(got).toEqual(want);
      const sd = s.state_dict();
      expect(sd).toEqual({ scale: 8, growth_factor: 2, backoff_factor: 0.5, growth_interval: 3, _growth_tracker: 2 });
      const t = new amp.GradScaler();
      t.load_state_dict(JSON.parse(JSON.stringify(sd)));
      expect(t.state_dict()).toEqual(sd);
      expect([run(s, false), run(t, false)]).toEqual([16, 16]); // the third success grows both
      expect(() => t.load_state_dict({})).toThrow("saved from a disabled instance");
      t.update(1000);
      expect(t.get_scale()).toBe(1000);
    });
  });

  describe(`float16 training [${backend}]`, () => {
    useBackend(backend);

    /**
     * 6 Adam steps of Linear(6, 12) -> ReLU -> Linear(12, 4) with float32 master weights under
     * float16 autocast. The loss is weighted by 2^-24: the logits' gradients are at most
     * 2^-24 / 8 < 2^-25, which float16 (smallest subnormal 2^-24) rounds to 0, so without the
     * scaler every gradient is exactly 0; scaled by 2^16 they are representable, and Adam's update
     * does not depend on the loss weight.
     */
    function train(mode: nn.ExecutionMode, scaler: amp.GradScaler | null): { losses: number[]; gradZero: boolean; plans: number[] } {
      loom.manual_seed(0);
      const model = new nn.Sequential(new nn.Linear(6, 12), new nn.ReLU(), new nn.Linear(12, 4));
      const opt = new optim.Adam(model.parameters(), { lr: 0.05 });
      const x = loom.randn([8, 6]), y = loom.randint(0, 4, [8]);
      const losses: number[] = [];
      let gradZero = true;
      const plans: number[] = [];
      nn.with_execution_mode(mode, () => {
        for (let step = 0; step < 6; step++) {
          const r0 = loom.realizeStats.realizes;
          opt.zero_grad();
          const loss = loom.autocast(FP16, () => F.cross_entropy(model.call(x), y).mul(2 ** -24));
          (scaler ? scaler.scale(loss) : loss).backward();
          if (scaler) {
            scaler.step(opt);
            scaler.update();
          } else opt.step();
          losses.push(loss.item() * 2 ** 24);
          plans.push(loom.realizeStats.realizes - r0);
          for (const p of model.parameters()) {
            expect(p.dtype).toBe("float32");
            if (p.grad!.dataSync().some((v) => v !== 0)) gradZero = false;
          }
        }
      });
      return { losses, gradZero, plans };
    }

    test("without GradScaler float16 gradients underflow to 0 and the loss never moves; with it the loss decreases, eager == lazy", () => {
      const plain = train("eager", null);
      expect(plain.gradZero).toBe(true);
      expect(new Set(plain.losses).size).toBe(1);
      const runs = MODES.map((m) => train(m, new amp.GradScaler()));
      for (const r of runs) {
        expect(r.gradZero).toBe(false);
        expect(r.losses.every(Number.isFinite)).toBe(true);
        expect(r.losses[5]!).toBeLessThan(r.losses[0]! * 0.8);
      }
      // lazy: the inf-check read in step() runs forward, backward and the loss as one plan, the
      // update a second one (the skip decision is a host read, as torch's found_inf.item())
      expect(runs[1]!.plans.slice(1)).toEqual([2, 2, 2, 2, 2]);
      if (backend === "js") expect(runs[1]!.losses).toEqual(runs[0]!.losses);
      else expectClose(runs[1]!.losses, runs[0]!.losses, { rtol: 1e-3, atol: 1e-4, what: "lazy vs eager losses" });
    });

    test("a scale too large overflows float16 gradients: the step is skipped and the scale backs off", () => {
      loom.manual_seed(0);
      const model = new nn.Linear(6, 4);
      const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
      const before = model.weight.dataSync().slice();
      const s = new amp.GradScaler({ init_scale: 2 ** 40 });
      const loss = loom.autocast(FP16, () => F.cross_entropy(model.call(loom.randn([8, 6])), loom.randint(0, 4, [8])));
      s.scale(loss).backward();
      s.step(opt);
      s.update();
      expect(Array.from(model.weight.dataSync())).toEqual(Array.from(before));
      expect(s.get_scale()).toBe(2 ** 39);
    });

    test("pure float16 AdamW (model.half()) makes parameters non-finite in one step: eps = 1e-8 and (1-β2)·g² round to 0", () => {
      loom.manual_seed(0);
      const model = new nn.Sequential(new nn.Linear(16, 32), new nn.ReLU(), new nn.Linear(32, 4)).half();
      const opt = new optim.AdamW(model.parameters(), { lr: 1e-3 });
      const loss = F.cross_entropy(model.call(loom.randn([8, 16]).half()), loom.randint(0, 4, [8]));
      expect(Number.isFinite(loss.item())).toBe(true);
      loss.backward();
      opt.step();
      const w = model.parameters()[0]!.dataSync();
      expect(w.some((v) => !Number.isFinite(v))).toBe(true);
      expect(loom.tensor([1e-8], { dtype: "float32" }).half().item()).toBe(0);
    });
  });
}
