/**
 * Compiled plans on the native backend: one realize = ONE FFI call (a queued submit, counted in
 * TypeScript and in the shim, or for a small plan one synchronous run on the calling thread),
 * JavaScript runs while a long plan executes, outputs wait for their command buffer
 * when read, every fused op runs as its own native kernel and equals the unfused ops run eagerly
 * on native bit for bit (same kernels, same summation order) and the js reference within float
 * tolerance, the fused AdamW update equals the optimizer's eager ops bit for bit, and buffers are
 * reused across runs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { workspaceBytes } from "../../src/scheduler/plan.ts";
import { NATIVE, nativeOrSkip } from "./helpers.ts";

type T = loom.Tensor;
type Fn = (...xs: any[]) => any;

/** Values as numbers (toEqual tells -0 from 0 and compares NaN as equal). */
const bits = (t: T) => Array.from(t.dataSync());

function maxRel(a: number[], b: number[]): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) {
    if (Object.is(a[i], b[i]) || (Number.isNaN(a[i]!) && Number.isNaN(b[i]!))) continue;
    m = Math.max(m, Math.abs(a[i]! - b[i]!) / Math.max(1, Math.abs(b[i]!)));
  }
  return m;
}

describe.skipIf(!NATIVE)("native compiled plans", () => {
  const nb = nativeOrSkip();
  let prev = "";
  // the exact kernels: bounded catalog implementations (tests/catalog/) would change the bits
  beforeAll(() => { prev = set_default_backend("native"); loom.set_compiler_options({ tolerance: "exact" }); });
  afterAll(() => { set_default_backend(prev as "js" | "native"); loom.set_compiler_options({}, true); });

  /** A pre-norm transformer block with LoRA on q and v: every named pattern and generic fusion. */
  function block(x: any, p: Record<string, T>, lazy: boolean): any {
    const P = (t: T): any => (lazy ? t.lazy() : t);
    const [B, L, C] = x.shape as number[];
    const h = loom.layer_norm(x, [C!], P(p.ln_w), P(p.ln_b)) as any;
    const heads = (t: any) => t.view([B, L, 2, C! / 2]).transpose(1, 2);
    const q = heads(loom.lora_linear(h, P(p.wq), P(p.aq), P(p.bq), 2, P(p.bias)));
    const k = heads(loom.linear(h, P(p.wk)));
    const v = heads(loom.linear(h, P(p.wv)).add(loom.linear(loom.linear(h, P(p.aq)), P(p.bq)).mul(0.5)));
    const a = (loom.scaled_dot_product_attention(q, k, v, { is_causal: true }) as any).transpose(1, 2).reshape([B, L, C]);
    const y = x.add(a);
    const m = loom.linear(loom.gelu(loom.linear(loom.rms_norm(y, [C!], P(p.ln_w)) as any, P(p.w1), P(p.b1)) as any) as any, P(p.w2));
    return loom.softmax(y.add(m).mul(0.7), -1);
  }
  function params(C: number, dtype: "float32" | "float64" = "float32"): Record<string, T> {
    loom.manual_seed(3);
    const r = (...s: number[]) => loom.randn(s).mul(0.2).to(dtype);
    return {
      ln_w: r(C).add(1), ln_b: r(C), wq: r(C, C), wk: r(C, C), wv: r(C, C), aq: r(4, C), bq: r(C, 4), bias: r(C),
      w1: r(2 * C, C), b1: r(2 * C), w2: r(C, 2 * C),
    };
  }

  test("a realize is ONE FFI call (no eager calls but the compiler's constant folding, no js fallback)", () => {
    const p = params(16);
    const x = loom.randn([2, 8, 16]);
    block(x.lazy(), p, true).eval().dataSync(); // compile once
    const y = block(x.lazy(), p, true);
    const e0 = nb.stats.execs;
    const names = y.plan().instructions.map((i: any) => i.op.name); // compiles (a cache hit): folds constants
    const folding = nb.stats.execs - e0;
    for (const k of ["fused_layer_norm", "lora_linear", "fused_lora_linear", "fused_attention", "fused_matmul", "fused_softmax"]) expect(names).toContain(k);
    const s0 = nb.shimCounters().submits, t0 = nb.stats.submits, e1 = nb.stats.execs, f0 = nb.stats.fallbacks, y0 = nb.stats.syncs;
    y.eval().dataSync();
    // this block is small: it ran on the calling thread (one loom_exec) rather than queued
    expect(nb.stats.syncs - y0).toBe(1);
    expect(nb.shimCounters().submits - s0).toBe(0);
    expect(nb.stats.submits - t0).toBe(1);
    expect(nb.stats.execs - e1).toBe(folding); // the plan itself makes no synchronous call
    expect(nb.stats.fallbacks - f0).toBe(0);
  });

  test("JavaScript runs while a long plan executes; reading waits for it", async () => {
    const S = 512;
    const eye = loom.eye(S);
    const x0 = loom.arange(0, S * S).remainder(7).sub(3).reshape([S, S]).float();
    let y: any = x0.lazy();
    for (let i = 0; i < 40; i++) y = y.matmul(eye.lazy());
    const t = y.eval(); // submits and returns
    const done = t.data(); // the completion promise
    let settled = false;
    done.then(() => { settled = true; });
    expect(nb.inFlight).toBeGreaterThan(0);
    let spins = 0;
    const start = performance.now();
    while (performance.now() - start < 5) spins++;
    expect(spins).toBeGreaterThan(100);
    expect(settled).toBe(false);
    const values = await done;
    expect(settled).toBe(true);
    expect(Array.from(values.subarray(0, 8))).toEqual([-3, -2, -1, 0, 1, 2, 3, -3]);
    // a synchronous read (item/tolist) of a pending output blocks until the plan has run
    const z = x0.lazy().matmul(eye.lazy()).sum().eval();
    expect(z.item()).toBe(bits(x0).reduce((a, b) => a + b, 0));
  });

  test("a small plan runs at once on the calling thread (nothing queued) with the bits of the eager ops", () => {
    const x = loom.randn([8, 64]), w = loom.randn([64]);
    const f = (t: any, u: any) => loom.rms_norm(loom.softmax(t.mul(1.5), -1), [64], u);
    f(x.lazy(), w.lazy()).eval().dataSync(); // compile once
    const y0 = nb.stats.syncs, s0 = nb.shimCounters().submits;
    const t = f(x.lazy(), w.lazy()).eval();
    expect(nb.stats.syncs - y0).toBe(1);
    expect(nb.shimCounters().submits - s0).toBe(0);
    expect(nb.inFlight).toBe(0);
    expect(bits(t)).toEqual(bits(f(x, w)));
  });

  test("a queued plan that has not started when its output is read runs on the reading thread; one queued behind another waits its turn", () => {
    const x = loom.randn([512, 512]);
    const f = (t: any) => t.mul(1.5).exp().sum(-1);
    const want = bits(f(x));
    bits(f(x.lazy()).eval()); // compile once
    const i0 = nb.shimCounters().inlineRuns;
    for (let i = 0; i < 20; i++) expect(bits(f(x.lazy()).eval())).toEqual(want); // queued, then read at once
    // the waiting thread takes the command unless the executor woke first: a race it wins nearly always
    expect(nb.shimCounters().inlineRuns - i0).toBeGreaterThan(0);
    // B reads A's output and is queued behind it: waiting for B must not run B before A
    const S = 512, eye = loom.eye(S), x0 = loom.arange(0, S * S).remainder(7).sub(3).reshape([S, S]).float();
    let a: any = x0.lazy();
    for (let i = 0; i < 20; i++) a = a.matmul(eye.lazy());
    const A = a.eval();
    const B = A.lazy().add(1).sum().eval();
    expect(B.item()).toBe(bits(x0).reduce((p, q) => p + q, 0) + S * S);
    expect(bits(A)).toEqual(bits(x0));
  });

  test("a large plan read at once (dataSync, item, a pending eager value) runs on the calling thread; eval() queues it", () => {
    const x = loom.randn([512, 512]); // 262144 elements: above SYNC_MAX_WORK
    const f = (t: any) => t.mul(1.5).exp().sum(-1);
    const want = bits(f(x));
    f(x.lazy()).dataSync(); // compile once
    let y0 = nb.stats.syncs, s0 = nb.shimCounters().submits;
    const read = f(x.lazy()).dataSync();
    expect([nb.stats.syncs - y0, nb.shimCounters().submits - s0]).toEqual([1, 0]);
    expect(Array.from(read)).toEqual(want);
    y0 = nb.stats.syncs; s0 = nb.shimCounters().submits;
    const queued = f(x.lazy()).eval();
    expect([nb.stats.syncs - y0, nb.shimCounters().submits - s0]).toEqual([0, 1]);
    expect(bits(queued)).toEqual(want);
    // a pending eager value (lazy execution mode's module outputs are these) read at once
    y0 = nb.stats.syncs;
    const pend = loom.Tensor._pending(f(x.lazy()).node, "cpu");
    expect(bits(pend)).toEqual(want);
    expect(nb.stats.syncs - y0).toBe(1);
  });

  test("a small plan after a queued one is queued behind it (JavaScript does not wait for the long one)", () => {
    const S = 512; // 40 products of 512³: ~11 GFLOP, far longer than recording the small plan below
    const eye = loom.eye(S);
    let big: any = loom.randn([S, S]).lazy();
    for (let i = 0; i < 40; i++) big = big.matmul(eye.lazy());
    const b = big.eval(); // queued
    const y0 = nb.stats.syncs;
    const x = loom.randn([16]);
    const small = x.lazy().mul(2).add(1).eval();
    expect(nb.stats.syncs - y0).toBe(0);
    expect(bits(small)).toEqual(bits(x.mul(2).add(1)));
    expect(b.dataSync().length).toBe(S * S);
  });

  /**
   * A plan with a js kernel in its middle: ops on a 17-dim tensor (beyond the shim's 16 dims) run
   * on the js backend inside the plan, then `products` products of 512³, whose output is written
   * long after the js kernel ran. `want`: the eager values; `run(read)`: read(the lazy result)
   * under the options that keep the ops apart.
   */
  const jsKernelMidPlan = (products: number) => {
    const S = 512;
    const a = loom.randn([S, S]), eye = loom.eye(S), t17 = loom.randn([...Array(16).fill(1), 2, 3]);
    const f = (x: any, t: any, e: any) => {
      let y = x.mul(t.neg().sum());
      for (let i = 0; i < products; i++) y = y.matmul(e);
      return y;
    };
    return {
      want: bits(f(a, t17, eye)),
      run: <R>(read: (y: any) => R): R => loom.with_compiler_options({ fuse: false, patterns: false }, () => read(f(a.lazy(), t17.lazy(), eye.lazy()))),
    };
  };
  /** x [200000] (enough work to be queued: SYNC_MAX_WORK) and a lazy graph reading index 200009 of it. */
  const outOfBounds = () => {
    const x = loom.randn([200_000]);
    return { x, y: x.lazy().mul(2).exp().index_select(0, loom.tensor([0, 200_009], { dtype: "int64" }).lazy()) };
  };
  const OUT_OF_BOUNDS = "[index_select] index 200009 is out of bounds for dimension 0 with size 200000";

  test("a js kernel in the middle of a queued plan: outputs written after it wait for those instructions too", () => {
    // the plan is queued, and its output is written after the js kernel (it used to wait only for
    // the instructions before it and read unwritten memory)
    const { want, run } = jsKernelMidPlan(20);
    const fb0 = nb.stats.fallbacks, sy0 = nb.stats.syncs;
    const got = run((y) => y.eval());
    expect(nb.stats.fallbacks - fb0).toBeGreaterThan(0);
    expect(nb.stats.syncs - sy0).toBe(0); // queued, not a small plan
    expect(bits(got)).toEqual(want);
  });

  test("an in-place write waits for queued plans reading the buffer; later plans see the new values", () => {
    const x = loom.randn([64, 64]);
    const before = bits(x);
    const y = x.lazy().mul(2).exp().eval(); // queued, reads x
    x.add_(1);
    const want = before.map((v) => Math.fround(Math.exp(Math.fround(v * 2))));
    expect(maxRel(bits(y), want)).toBeLessThan(3e-7);
    expect(bits(x.lazy().sub(1).eval())).toEqual(bits(x.sub(1)));
  });

  test("an error inside a queued plan surfaces when its result is read", () => {
    const { x, y } = outOfBounds();
    const queued = y.eval();
    expect(() => queued.tolist()).toThrow(OUT_OF_BOUNDS);
    expect(x.lazy().add(1).eval().dataSync().length).toBe(200_000); // the backend goes on
  });

  test("read at once (on the calling thread): a js kernel mid-plan and an index error behave as when queued", () => {
    const { want, run } = jsKernelMidPlan(5);
    const y0 = nb.stats.syncs, fb0 = nb.stats.fallbacks;
    const got = run((y) => Array.from(y.dataSync() as Float64Array));
    expect(nb.stats.fallbacks - fb0).toBeGreaterThan(0);
    expect(nb.stats.syncs - y0).toBeGreaterThan(0);
    expect(got).toEqual(want);
    const { x, y } = outOfBounds();
    expect(() => y.tolist()).toThrow(OUT_OF_BOUNDS);
    expect(x.lazy().add(1).dataSync().length).toBe(200_000); // the backend goes on
  });

  test("an error inside a small plan (run at once) is thrown by eval, and the tensor stays unrealized", () => {
    const x = loom.randn([5]);
    const idx = loom.tensor([0, 9], { dtype: "int64" });
    const y = x.lazy().mul(2).index_select(0, idx.lazy());
    const msg = "[index_select] index 9 is out of bounds for dimension 0 with size 5";
    expect(() => y.eval()).toThrow(msg);
    expect(() => y.tolist()).toThrow(msg); // computed again, failing again: never a garbage value
    expect(x.lazy().add(1).eval().dataSync().length).toBe(5); // the backend goes on
  });

  const CASES: [string, Fn, (d: "float32" | "float64") => T[], string][] = [
    ["softmax(x·s)", (x) => loom.softmax(x.mul(0.3), -1), (d) => [loom.randn([33, 700]).to(d)], "fused_softmax"],
    ["softmax dim 0", (x) => loom.softmax(x, 0), (d) => [loom.randn([600, 9]).to(d)], "fused_softmax"],
    ["layer_norm", (x, w, b) => loom.layer_norm(x, [600], w, b), (d) => [loom.randn([5, 600]).to(d), loom.randn([600]).to(d), loom.randn([600]).to(d)], "fused_layer_norm"],
    ["rms_norm", (x, w) => loom.rms_norm(x, [1100], w), (d) => [loom.randn([6, 1100]).to(d), loom.randn([1100]).to(d)], "fused_rms_norm"],
    ["sum of squares, all", (x) => x.mul(x).sum(), (d) => [loom.randn([70, 777]).to(d)], "fused_reduce"],
    ["exp sum over dim 0 (streamed rows)", (x) => x.exp().sum(0).mul(3), (d) => [loom.randn([1300, 70]).to(d)], "fused_reduce"],
    ["sum over dims 0, 2", (x) => x.exp().sum([0, 2]), (d) => [loom.randn([9, 4, 600]).to(d)], "fused_reduce"],
    ["amax of |x|", (x) => x.abs().amax(-1), (d) => [loom.randn([7, 2100]).to(d)], "fused_reduce"],
    ["linear + bias + GELU", (x, w, b) => loom.gelu(loom.linear(x, w, b)), (d) => [loom.randn([3, 20, 96]).to(d), loom.randn([80, 96]).to(d), loom.randn([80]).to(d)], "fused_matmul"],
    ["causal attention", (q, k, v) => loom.scaled_dot_product_attention(q, k, v, { is_causal: true }), (d) => [0, 1, 2].map(() => loom.randn([2, 3, 40, 16]).to(d)), "fused_attention"],
    ["LoRA pattern", (x, W, b, A, B) => loom.linear(x, W, b).add(loom.linear(loom.linear(x, A), B).mul(2)), (d) => [loom.randn([4, 10, 64]), loom.randn([48, 64]), loom.randn([48]), loom.randn([8, 64]), loom.randn([48, 8])].map((t) => t.to(d)), "fused_lora_linear"],
    ["elementwise chain with broadcasts", (x, a, b) => loom.gelu(x.mul(a).add(b)).sub(x.sigmoid()), (d) => [loom.randn([300, 50]).to(d), loom.randn([50]).to(d), loom.randn([300, 1]).to(d)], "fused_elementwise"],
  ];

  for (const dtype of ["float32", "float64"] as const) {
    for (const [name, fn, inputs, kernel] of CASES) {
      test(`${name} (${dtype}): ${kernel} equals the eager ops bit for bit and js within tolerance`, () => {
        loom.manual_seed(7);
        const xs = inputs(dtype);
        const eager = fn(...xs) as T;
        const y = fn(...xs.map((t) => t.lazy()));
        expect(y.plan().instructions.map((i: any) => i.op.name)).toContain(kernel);
        const f0 = nb.stats.fallbacks;
        const lazy = y.eval() as T;
        expect(bits(lazy)).toEqual(bits(eager));
        expect(nb.stats.fallbacks).toBe(f0);
        set_default_backend("js");
        try {
          const ref = (fn(...xs.map((t) => t.lazy())) as any).eval() as T;
          expect(maxRel(bits(lazy), bits(ref))).toBeLessThan(dtype === "float32" ? 2e-5 : 1e-12);
        } finally {
          set_default_backend("native");
        }
      });
    }
  }

  test("a whole transformer block: lazy (fused) equals eager bit for bit (float32 and float64)", () => {
    for (const d of ["float32", "float64"] as const) {
      const p = params(16, d);
      const x = loom.randn([2, 8, 16]).to(d);
      expect(bits(block(x.lazy(), p, true).eval())).toEqual(bits(block(x, p, false)));
    }
  });

  test("AdamW's step is one plan of fused kernels, equal to the eager ops bit for bit (tolerance exact)", () => {
    const prev = loom.get_compiler_options().tolerance;
    loom.set_compiler_options({ tolerance: "exact" });
    try {
      for (const d of ["float32", "float64"] as const) {
        for (const opts of [{ lr: 1e-2 }, { lr: 3e-3, weight_decay: 0.1, maximize: true, betas: [0.8, 0.95] as [number, number] }]) {
          const { lr, weight_decay = 1e-2, maximize = false } = opts;
          const [b1, b2] = opts.betas ?? [0.9, 0.999];
          loom.manual_seed(11);
          const p = loom.randn([37, 29]).to(d).requires_grad_(true);
          const q = p.detach().clone(), m = loom.zeros_like(q), v = loom.zeros_like(q);
          const opt = new loom.optim.AdamW([p], opts);
          for (let s = 1; s <= 5; s++) {
            opt.zero_grad();
            p.mul(p).sin().sum().backward();
            const r0 = loom.realizeStats.realizes, x0 = nb.stats.execs;
            opt.step();
            expect(loom.realizeStats.realizes - r0).toBe(1);
            expect(nb.stats.execs - x0).toBe(0); // no eager op: the update ran as the plan
            // torch 1.13's single-tensor AdamW, op by op on eager tensors
            loom.no_grad(() => {
              let g = q.mul(q).cos().mul(q.mul(2));
              if (maximize) g = g.neg();
              q.mul_(1 - lr * weight_decay);
              m.mul_(b1).add_(g, { alpha: 1 - b1 });
              v.mul_(b2).add_(g.mul(g), { alpha: 1 - b2 });
              const denom = v.sqrt().div(Math.sqrt(1 - b2 ** s)).add(1e-8);
              q.add_(m.div(denom), { alpha: -(lr / (1 - b1 ** s)) });
            });
          }
          const st = opt.state.get(p) as unknown as Record<string, T>;
          expect([bits(p), bits(st.exp_avg!), bits(st.exp_avg_sq!)]).toEqual([bits(q), bits(m), bits(v)]);
        }
      }
    } finally {
      loom.set_compiler_options({ tolerance: prev });
    }
  });

  test("profile(): per-instruction kernel time of a plan, with the opcode and output size", () => {
    const x = loom.randn([256, 256]), w = loom.randn([256, 256]);
    const rows = nb.profile(() => { x.lazy().matmul(w.lazy()).exp().sum(0).eval(); });
    const ops = rows.map((r) => r.op);
    expect(ops).toContain("matmul");
    expect(rows.every((r) => r.ms >= 0 && r.elements > 0)).toBe(true);
    expect(rows.find((r) => r.op === "matmul")!.elements).toBe(256 * 256);
    // off again: a later plan records nothing
    expect(nb.profile(() => {}).length).toBe(0);
  });

  test("the workspace and pooled output buffers are reused across runs", () => {
    const x = loom.randn([256, 512]), w = loom.randn([512]);
    const f = () => loom.rms_norm(x.lazy().mul(1.5), [512], w.lazy()).add(x.lazy()).eval();
    for (let i = 0; i < 5; i++) f().dataSync();
    const ws = workspaceBytes("cpu");
    // the pool caches at most max(bytes in use, 256 MiB); earlier tests in the same process may have
    // filled that with other sizes, and then freed outputs go back to the system: their dead
    // buffers go back first (freed later, inside the loop, they would fill the cache before this
    // test's outputs), then the cache is emptied, whatever ran before
    Bun.gc(true);
    nb.memory.emptyCache();
    const m0 = nb.memory.stats().misses;
    for (let i = 0; i < 40; i++) {
      f().dataSync();
      // the collector returns dead outputs to the pool; how soon it runs on its own depends on the
      // JS garbage a realize makes (little since the plan cache's fast path), so ask for it here
      if (i % 10 === 9) Bun.gc(true);
    }
    expect(workspaceBytes("cpu")).toBe(ws);
    // outputs come from the pool once the collector has returned earlier ones
    expect(nb.memory.stats().misses - m0).toBeLessThan(40);
  });

  test("a loop making a 16 MiB result per call reuses pooled blocks without being told to collect", () => {
    // W3's shape: each result dies at once and comes back at a collection (the runtime's own, or
    // one the pool asks for every 128 MiB when those fall behind). With a 32 MiB cache floor every
    // other call missed the pool and paid for a fresh block's page faults (about 5 ms here
    // against a 1.2 ms kernel).
    const x = loom.randn([4096, 1024]);
    const f = () => loom.softmax(x.lazy(), -1).eval().dataSync().length;
    // earlier tests' cached blocks of other sizes would fill the cache: start from an empty one
    Bun.gc(true);
    nb.memory.emptyCache();
    expect(nb.memory.stats().cached).toBe(0);
    // one whole collection cycle first (the pool collects every max(128 MiB, bytes in use)): the
    // cache then holds its garbage
    const cycle = Math.ceil(Math.max(128 << 20, nb.memory.stats().live) / (16 << 20)) + 2;
    for (let i = 0; i < cycle; i++) f();
    const m0 = nb.memory.stats().misses;
    for (let i = 0; i < 32; i++) f();
    // a few misses where a collection of the runtime's own comes late (3 seen after the whole
    // suite); the 32 MiB floor missed 8 of 32 even alone
    expect(nb.memory.stats().misses - m0).toBeLessThanOrEqual(4);
  });

  test("results kept alive make the pool ask for full collections (its memory bound), counted", () => {
    // nothing allocated here comes back, so the runtime's own collections cannot be keeping up:
    // every budget's worth (max(128 MiB, bytes in use)) asks for one (384 MiB: at least 2)
    const x = loom.randn([1024, 1024]);
    const keep: loom.Tensor[] = [];
    const f0 = nb.memory.forcedCollections;
    for (let i = 0; i < 96; i++) keep.push(x.neg());
    expect(nb.memory.forcedCollections - f0).toBeGreaterThanOrEqual(2);
    expect(nb.memory.stats().live).toBeGreaterThanOrEqual(96 * (4 << 20));
    expect(keep[95]!.dataSync()[7]).toBe(-x.dataSync()[7]!);
  });
});
