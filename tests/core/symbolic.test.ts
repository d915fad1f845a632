/**
 * Symbolic dimensions (issue 11): an input's sequence length marked dynamic (mark_dynamic, Dim)
 * makes lazy graphs of every length share one plan template (scheduler/symbolic.ts).
 * - a GPT-2 forward and a whole training step (forward, backward, AdamW: one plan per step) over
 *   10 lengths compile once (counter), each length's instance equal to the plan the passes build
 *   for it (symbolicOptions.check), and lazy == eager (bit-equal on js at "exact");
 * - a Conv1d with padding (an expanded fill constant among the leaves) over 6 lengths: one template;
 * - a first guess that a constant is the symbol is corrected from the second length;
 * - the workspace is planned once, at the maximum;
 * - bad input: a size beyond the maximum, two sizes for one symbol, marking a computed value or
 *   a dim out of range raise typed errors naming the symbol, before anything runs.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { models, nn, optim } from "../../src/index.ts";
import { FLOAT32_TOLERANCE, type Contract } from "../../src/backends/catalog.ts";
import { clear_plan_cache, planCacheStats } from "../../src/scheduler/compile.ts";
import { workspaceBytes } from "../../src/scheduler/plan.ts";
import { symbolicOptions, symbolicStats } from "../../src/scheduler/symbolic.ts";
import { BACKENDS, useBackend, WEBGPU } from "../backends.ts";
import { expectWithinContract } from "../catalog/helpers.ts";

const FLOAT32: Contract = { kind: "bound", ...(FLOAT32_TOLERANCE as { atol: number; rtol: number }), source: "torch.testing float32" };
const LENGTHS = [7, 12, 9, 20, 33, 5, 40, 17, 64, 26];

function gpt2(n_embd = 24): models.GPT2LMHeadModel {
  loom.manual_seed(0);
  return new models.GPT2LMHeadModel(new models.GPT2Config({
    vocab_size: 23, n_positions: 64, n_embd, n_layer: 2, n_head: 2, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0,
  }));
}

beforeEach(() => {
  clear_plan_cache();
  symbolicOptions.check = true; // every new length: the instance must equal the plan compiled for it
});
afterEach(() => { symbolicOptions.check = false; });

describe.each(BACKENDS)("symbolic sequence length on %s", (backend) => {
  useBackend(backend);
  const exact = backend === "js";
  const within = <R>(fn: () => R): R => (exact ? loom.with_compiler_options({ tolerance: "exact" }, fn) : fn());
  const same = (a: ArrayLike<number>, b: ArrayLike<number>, what: string) => {
    if (exact) expect(Array.from(a)).toEqual(Array.from(b));
    else expectWithinContract(a, b, FLOAT32, { what });
  };

  test("a GPT-2 forward over 10 lengths compiles once; logits equal eager at each length", () => within(() => {
    const model = gpt2();
    model.eval();
    const seq = new loom.Dim("seq", { max: 64 });
    for (const T of LENGTHS) {
      const x = loom.randint(0, 23, [2, T]);
      const eager = nn.with_execution_mode("eager", () => model.call(x).logits.dataSync());
      loom.mark_dynamic(x, 1, seq);
      const lazy = nn.with_execution_mode("lazy", () => model.call(x).logits.dataSync());
      same(lazy, eager, `logits T=${T}`);
    }
    expect(planCacheStats.misses).toBe(1);
    expect(symbolicStats.templates).toBe(1);
    expect(symbolicStats.instances).toBe(LENGTHS.length);
    expect(symbolicStats.fixed).toBe(0);
  }));

  test("a training step (forward, backward, AdamW) over 10 lengths: one plan per step, compiled once, lazy == eager", () => within(() => {
    const train = (mode: nn.ExecutionMode) => {
      const model = gpt2();
      const opt = new optim.AdamW(model.parameters(), { lr: 1e-2, weight_decay: 0.05 });
      const seq = new loom.Dim("seq", { max: 64 });
      const losses: number[] = [], plans: number[] = [];
      loom.manual_seed(1);
      nn.with_execution_mode(mode, () => {
        for (const T of LENGTHS) {
          const x = loom.randint(0, 23, [2, T]), y = loom.randint(0, 23, [2, T]);
          loom.mark_dynamic(x, 1, seq);
          loom.mark_dynamic(y, 1, seq);
          const r0 = loom.realizeStats.realizes;
          opt.zero_grad();
          const { loss } = model.call(x, { targets: y });
          loss!.backward();
          opt.step();
          losses.push(loss!.item());
          plans.push(loom.realizeStats.realizes - r0);
        }
      });
      return { losses, plans, params: model.parameters().map((p) => p.dataSync()) };
    };
    const eager = train("eager");
    const m0 = planCacheStats.misses;
    const lazy = train("lazy");
    expect(planCacheStats.misses - m0).toBe(1);
    expect(lazy.plans).toEqual(LENGTHS.map(() => 1));
    same(lazy.losses, eager.losses, "losses");
    lazy.params.forEach((p, i) => same(p, eager.params[i]!, `param ${i}`));
  }), 30_000); // check mode compiles each length on its own too: slow on a loaded machine

  // conv lowering (lazy/conv.ts) cats a fill constant expanded to [N, C, 1] from [1, 1, 1]: its
  // size-1 dim keeps stride 1, which the plan's input layouts keep, so the probes must too
  test.each([[3, 1], [5, 2]])("a Conv1d (kernel %d, padding %d) over 6 lengths shares one template; values equal eager", (k, pad) => within(() => {
    loom.manual_seed(0);
    const emb = new nn.Embedding(50, 8), conv = new nn.Conv1d(8, 6, k, { padding: pad });
    const seq = new loom.Dim("seq", { max: 64 });
    const forward = (x: loom.Tensor) => conv.call(emb.call(x).transpose(1, 2)).amax(2).dataSync();
    for (const T of [20, 27, 33, 41, 15, 50]) {
      const x = loom.randint(0, 50, [4, T]);
      const eager = nn.with_execution_mode("eager", () => forward(x));
      loom.mark_dynamic(x, 1, seq);
      same(nn.with_execution_mode("lazy", () => forward(x)), eager, `conv k=${k} T=${T}`);
    }
    expect(planCacheStats.misses).toBe(1);
    expect(symbolicStats.templates).toBe(1);
    expect(symbolicStats.instances).toBe(6);
  }), 30_000);
});

describe.each(WEBGPU ? ["webgpu"] : [])("symbolic length on %s", (device) => {
  test("reductions over the symbolic dim (mean, softmax, a product) over 5 lengths compile once and equal the eager js values", () => {
    loom.manual_seed(0);
    const w = loom.randn([8, 6]);
    const n = new loom.Dim("n", { max: 32 });
    const f = <T extends loom.TensorOps<T>>(x: T, wd: T): T => {
      const h = x.matmul(wd).softmax(-1); // [T, 6]
      return h.mean(0).add(x.transpose(0, 1).matmul(x).sum(1).div(x.shape[0]).narrow(0, 0, 6)); // [6]
    };
    for (const T of [5, 9, 17, 30, 12]) {
      const x = loom.randn([T, 8]);
      const ref = f(x, w).dataSync();
      const xd = loom.mark_dynamic(x.to(device), 0, n);
      const got = f(xd.lazy(), w.to(device).lazy()).dataSync();
      expectWithinContract(got, ref, { kind: "bound", atol: 1e-4, rtol: 1e-4, source: "float32 on the device" }, { what: `T=${T}` });
    }
    expect(planCacheStats.misses).toBe(1);
    expect(symbolicStats.instances).toBe(5);
  });
});

describe("templates", () => {
  test("a weight dim equal to the first length (12) is guessed to be the symbol; the second length solves it", () => {
    loom.manual_seed(0);
    const w = loom.randn([12]);
    const n = new loom.Dim("n", { max: 64 });
    const misses: number[] = [];
    for (const T of [12, 20, 9, 33, 12]) {
      const x = loom.randn([T]);
      const ref = x.sum().mul(w).add(x.narrow(0, 0, 4).sum()).dataSync();
      const m0 = planCacheStats.misses;
      const got = loom.mark_dynamic(x, 0, n).lazy().sum().mul(w.lazy()).add(x.lazy().narrow(0, 0, 4).sum()).dataSync();
      misses.push(planCacheStats.misses - m0);
      expectWithinContract(got, ref, FLOAT32, { what: `T=${T}` });
    }
    // 12: w [12] is taken for [T] (a template that 20 does not match); 20: solved from 12 and 20
    expect(misses).toEqual([1, 1, 0, 0, 0]);
    expect(symbolicStats.templates).toBe(2);
  });

  test("a head dim equal to the first length (GPT-2, head_dim 12, T 12) is told apart by shape inference: one compile", () => {
    const model = gpt2(24);
    model.eval();
    const seq = new loom.Dim("seq", { max: 64 });
    for (const T of [12, 20, 9, 33]) {
      const x = loom.randint(0, 23, [1, T]);
      const eager = nn.with_execution_mode("eager", () => model.call(x).logits.dataSync());
      loom.mark_dynamic(x, 1, seq);
      expectWithinContract(nn.with_execution_mode("lazy", () => model.call(x).logits.dataSync()), eager, FLOAT32, { what: `T=${T}` });
    }
    expect(planCacheStats.misses).toBe(1);
  });

  test("the workspace is planned once, for the maximum; explain() names the symbol and its value", () => {
    const model = gpt2();
    model.eval();
    const seq = new loom.Dim("seq", { max: 64 });
    const sizes: number[] = [];
    const plans: loom.CompiledPlan[] = [];
    for (const T of [9, 40, 17]) {
      const x = loom.mark_dynamic(loom.randint(0, 23, [2, T]), 1, seq);
      const logits = model.call(x.lazy()).logits as unknown as loom.LazyTensor;
      plans.push(loom.compile_plan([logits]));
      logits.dataSync();
      sizes.push(workspaceBytes());
    }
    expect(new Set(plans.map((p) => p.workspaceBytes)).size).toBe(1);
    expect(sizes[0]).toBeGreaterThanOrEqual(plans[0]!.workspaceBytes);
    expect(new Set(sizes).size).toBe(1); // the workspace never grows after the first length
    expect(plans.map((p) => p.symbolic?.value)).toEqual([9, 40, 17]);
    expect(plans[1]!.explain()).toContain("symbolic: seq = 40, one template for seq in [4, 64]");
  });

  test("lengths below the template's range (2, 3) compile on their own and are right", () => {
    const model = gpt2();
    model.eval();
    const seq = new loom.Dim("seq", { max: 64 });
    for (const T of [9, 2, 3]) {
      const x = loom.randint(0, 23, [1, T]);
      const eager = nn.with_execution_mode("eager", () => model.call(x).logits.dataSync());
      loom.mark_dynamic(x, 1, seq);
      expectWithinContract(nn.with_execution_mode("lazy", () => model.call(x).logits.dataSync()), eager, FLOAT32, { what: `T=${T}` });
    }
    expect(symbolicStats.fixed).toBe(2);
  });

  test("the symbolic option off: each length compiles on its own", () => {
    const model = gpt2();
    model.eval();
    loom.with_compiler_options({ symbolic: false }, () => {
      for (const T of [9, 10, 11]) {
        const x = loom.mark_dynamic(loom.randint(0, 23, [1, T]), 1, { max: 64 });
        nn.with_execution_mode("lazy", () => model.call(x).logits.dataSync());
      }
    });
    expect(planCacheStats.misses).toBe(3);
    expect(symbolicStats.templates).toBe(0);
  });
});

describe.each(BACKENDS)("generation with a prompt length marked dynamic on %s", (backend) => {
  useBackend(backend);
  test("prefill plans are shared across prompt lengths (cached decoding), and full recomputation compiles once", () => {
    const model = gpt2();
    const seq = new loom.Dim("prompt", { max: 64 });
    const prompts = [5, 9, 13].map((T) => loom.randint(0, 23, [1, T]));
    const run = (marked: boolean, use_cache: boolean) => prompts.map((p) => {
      const idx = marked ? loom.mark_dynamic(p.clone(), 1, seq) : p;
      return model.generate(idx, 6, { temperature: 0, use_cache }).tolist();
    });
    clear_plan_cache();
    const plain = run(false, true);
    const plainMisses = planCacheStats.misses;
    clear_plan_cache();
    expect(run(true, true)).toEqual(plain);
    // unmarked: a prefill plan per prompt length and one decode plan; marked: one prefill template
    expect(plainMisses).toBe(4);
    expect(planCacheStats.misses).toBe(2);
    clear_plan_cache();
    expect(run(true, false)).toEqual(plain);
    expect(planCacheStats.misses).toBe(1); // contexts of 5..18 tokens: one template
  });
});

describe("bad input", () => {
  test("a size beyond the maximum raises naming the symbol, the size and the maximum, before anything runs", () => {
    const seq = new loom.Dim("seq", { max: 16 });
    const r0 = loom.realizeStats.realizes;
    expect(() => loom.mark_dynamic(loom.zeros([1, 17]), 1, seq)).toThrow(/seq is bound to 17 .* but its maximum is 16/);
    expect(() => loom.mark_dynamic(loom.zeros([1, 17]), 1, seq)).toThrow(loom.LoomConstraintViolationError);
    expect(loom.realizeStats.realizes).toBe(r0);
  });

  test("one symbol bound to two sizes in one graph raises", () => {
    const seq = new loom.Dim("seq", { max: 64 });
    const a = loom.mark_dynamic(loom.ones([8]), 0, seq), b = loom.mark_dynamic(loom.ones([10]), 0, seq);
    const r0 = loom.realizeStats.realizes;
    const z = a.lazy().sum().add(b.lazy().sum());
    expect(() => z.dataSync()).toThrow(/seq is bound to 8 .* and to 10/);
    expect(loom.realizeStats.realizes).toBe(r0);
  });

  test("marking a computed lazy value, a dim out of range, or a bad range raises", () => {
    expect(() => loom.mark_dynamic(loom.ones([4]).lazy().mul(2), 0, { max: 8 })).toThrow(loom.LoomValueError);
    expect(() => loom.mark_dynamic(loom.ones([4]), 1, { max: 8 })).toThrow(loom.LoomIndexError);
    expect(() => new loom.Dim("seq", { min: 9, max: 8 })).toThrow(/min 9, max 8/);
    expect(() => loom.mark_dynamic(loom.ones([1]), 0, { max: 8 })).toThrow(/its minimum is 2/);
  });
});
