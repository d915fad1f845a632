/**
 * Sorting and sampling (src/lazy/sort_ops.ts, src/graph/ops/sort.ts): sort/argsort/msort/topk/
 * kthvalue values, int64 indices and value gradients against torch 1.13 goldens
 * (gen_sort_goldens.py -> sort_goldens.json) on every backend, eager == lazy, float64 finite
 * differences; multinomial's frequencies within binomial bounds for a fixed seed (not torch's
 * sequence: the generators differ), distinctness without replacement, and the errors.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as loom from "../../src/index.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";
import { expectClose, fromArr, type Arr } from "../nn/helpers.ts";
import { thrown } from "../thrown.ts";

interface Case { name: string; op: string; args: Record<string, any>; input: Arr; values?: Arr; indices: Arr; grad_output?: Arr; grad?: Arr }
const NONFINITE: Record<string, number> = { inf: Infinity, "-inf": -Infinity, nan: NaN };
const golden = JSON.parse(readFileSync(new URL("./sort_goldens.json", import.meta.url), "utf8"), (_k, v) => (typeof v === "string" && v in NONFINITE ? NONFINITE[v] : v)) as { cases: Case[] };

/** The loom call for a golden case: [values | null, indices]; methods and free functions both exercised. */
function call<S extends loom.TensorOps<S>>(c: Case, x: S): [S | null, S] {
  const a = c.args;
  switch (c.op) {
    case "sort": return c.name.includes("desc=True") ? x.sort(a.dim, true, { stable: true }) : loom.sort(x, { dim: a.dim, stable: true });
    case "argsort": return [null, c.name.includes("ties") ? x.argsort({ dim: a.dim, descending: a.descending, stable: true }) : loom.argsort(x, a.dim, a.descending)];
    case "msort": return [loom.msort(x), x.sort(0).indices];
    case "topk": {
      const r = a.largest ? x.topk(a.k, a.dim) : loom.topk(x, a.k, { dim: a.dim, largest: false, sorted: false });
      return [r.values, r.indices];
    }
    case "kthvalue": return a.keepdim ? x.kthvalue(a.k, a.dim, true) : loom.kthvalue(x, a.k, { dim: a.dim });
  }
  throw new Error(`no op ${c.op}`);
}

const list = (t: { shape: readonly number[]; dtype: string; dataSync(): Float64Array }) => ({ shape: [...t.shape], dtype: t.dtype, data: Array.from(t.dataSync()) });

/** Values, indices and the input's gradient (backward of sum(values * grad_output)). */
function run(c: Case, lazy: boolean, device = "cpu") {
  const leaf = fromArr(c.input).to(device);
  if (leaf.is_floating_point()) leaf.requires_grad_(true);
  const [v, i] = call(c, (lazy ? leaf.lazy() : leaf) as any) as [loom.Tensor | null, loom.Tensor];
  let grad: number[] | null = null;
  if (v && c.grad_output) {
    const g = fromArr(c.grad_output).to(device);
    (v as any).mul(lazy ? g.lazy() : g).sum().backward();
    grad = Array.from(leaf.grad!.dataSync());
  }
  return { values: v ? list(v) : null, indices: list(i), grad };
}

describe.each(BACKENDS)("sort, argsort, msort, topk, kthvalue match torch on %s", (backend) => {
  useBackend(backend);
  for (const c of golden.cases) {
    test(c.name, () => {
      const e = run(c, false);
      expect(e.indices).toEqual(c.indices);
      if (c.values) {
        expect(e.values!.dtype).toBe(c.values.dtype);
        expect(e.values!.shape).toEqual(c.values.shape);
        expectClose(e.values!.data, c.values, { rtol: 0, atol: 0, what: `${c.name} values` }); // a permutation: exact
      }
      if (c.grad) expectClose(e.grad!, c.grad, { rtol: 0, atol: 0, what: `${c.name} grad` }); // scattered, not summed: exact
      const l = loom.with_compiler_options({ tolerance: "exact" }, () => run(c, true));
      expect(l).toEqual(e);
    });
  }
});

// WGSL has no f64 (float64 cases are left to js/native); the argsort kernel ranks by counting
describe.if(WEBGPU)("sort, argsort, msort, topk, kthvalue match torch on webgpu", () => {
  for (const c of golden.cases.filter((k) => k.input.dtype !== "float64")) {
    test(c.name, () => {
      const e = run(c, false, "webgpu");
      expect(e.indices).toEqual(c.indices);
      if (c.values) expectClose(e.values!.data, c.values, { rtol: 0, atol: 0, what: `${c.name} values` });
      if (c.grad) expectClose(e.grad!, c.grad, { rtol: 0, atol: 0, what: `${c.name} grad` });
      expect(run(c, true, "webgpu")).toEqual(e);
    });
  }
});

describe("finite differences (float64, js)", () => {
  const r = (...shape: number[]) => loom.randn(shape, { dtype: "float64", generator: new loom.Generator(shape.reduce((a, b) => a * 7 + b, 5)) });
  const cases: [string, (x: loom.Tensor) => loom.Tensor][] = [
    ["sort values then a nonlinearity", (x) => x.sort(1, true).values.mul(loom.tensor([0, 1, 2, 3, 4], { dtype: "float64" })).tanh()],
    ["topk of a product", (x) => x.mul(x).topk(2, 0).values],
    ["kthvalue keepdim", (x) => x.kthvalue(3, -1, true).values.exp()],
    ["msort", (x) => loom.msort(x).cumsum(0)],
  ];
  for (const [name, f] of cases) test(name, () => { expect(loom.gradcheck(f, [r(3, 5)])).toEqual([]); });
});

describe.each(BACKENDS)("semantics on %s", (backend) => {
  useBackend(backend);
  test("results read as a tuple and as torch.return_types (.values / .indices)", () => {
    const x = loom.tensor([[0.5, 2, -1, 2, 1]]);
    const r = x.topk(3);
    const [v, i] = r;
    expect(v).toBe(r.values);
    expect(i).toBe(r.indices);
    expect(v!.tolist()).toEqual([[2, 2, 1]]); // ties: lowest index first (documented)
    expect(i!.tolist()).toEqual([[1, 3, 4]]);
    expect(i!.dtype).toBe("int64");
    expect(r.indices.requires_grad).toBe(false);
  });
  test("stable sort keeps index order among equal values in both directions; stable: false returns the same", () => {
    const x = loom.tensor([1, 0, 1, 0, 1]);
    expect(x.argsort().tolist()).toEqual([1, 3, 0, 2, 4]);
    expect(x.argsort(0, true).tolist()).toEqual([0, 2, 4, 1, 3]);
    expect(x.argsort({ stable: false }).tolist()).toEqual([1, 3, 0, 2, 4]);
  });
  test("topk of long rows (bounded-heap path) equals the first k of the full sort, ties and NaN included", () => {
    const g = new loom.Generator(4);
    const vals = Array.from({ length: 3 * 400 }, () => { const u = g.uniform53(); return u < 0.02 ? NaN : Math.floor(u * 30) - 15; });
    const x = loom.tensor(vals, { dtype: "float32" }).reshape([3, 400]);
    for (const largest of [true, false]) {
      for (const k of [1, 7, 24]) {
        const [v, i] = x.topk(k, -1, largest);
        const full = x.sort(-1, largest);
        expect(i.tolist()).toEqual(full.indices.narrow(1, 0, k).tolist());
        expect(v.tolist()).toEqual(full.values.narrow(1, 0, k).tolist());
      }
    }
    const t = x.transpose(0, 1); // strided input, topk over dim 0
    expect(t.topk(5, 0).indices.tolist()).toEqual(t.sort(0, true).indices.narrow(0, 0, 5).tolist());
  });
  test("float16 and bfloat16 sort by value (decoded), not by their bits", () => {
    for (const dtype of ["float16", "bfloat16"] as const) {
      const x = loom.tensor([1.5, -2, 0.25, -0.5], { dtype });
      expect(x.sort().values.tolist()).toEqual([-2, -0.5, 0.25, 1.5]);
      expect(x.sort().indices.tolist()).toEqual([1, 3, 2, 0]);
    }
  });
  test("a lazy sort inside a larger graph equals the eager one, and its gradient too", () => {
    const x = loom.randn([3, 7], { generator: new loom.Generator(3) });
    const f = (t: any) => t.mul(2).topk(3, 1).values.softmax(-1).mul(t.topk(3, 1).values).sum();
    const xe = x.clone().requires_grad_(), xl = x.clone().requires_grad_();
    const ye = f(xe), yl = f(xl.lazy());
    ye.backward();
    yl.backward();
    expectClose(yl, Array.from(ye.dataSync()), { rtol: 1e-6, atol: 1e-7, what: "lazy value" });
    expectClose(xl.grad!, Array.from(xe.grad!.dataSync()), { rtol: 1e-6, atol: 1e-7, what: "lazy grad" });
  });
  test.skipIf(backend !== "native")("native has no argsort kernel: the op runs on the js reference, eagerly and inside a plan", () => {
    const nb = nativeBackend()!;
    const x = loom.tensor([[3, 1, 2], [0, 5, 4]]).float();
    const f0 = nb.stats.fallbacks;
    expect(x.sort(1).indices.tolist()).toEqual([[1, 2, 0], [0, 2, 1]]);
    const f1 = nb.stats.fallbacks;
    expect(f1).toBeGreaterThan(f0);
    expect(x.lazy().add(1).topk(1, 1).values.mul(2).tolist()).toEqual([[8], [12]]);
    expect(nb.stats.fallbacks).toBeGreaterThan(f1);
  });
  test("errors name the op and the shapes", () => {
    const x = loom.tensor([[1, 2, 3]]).float();
    const e1 = thrown(() => x.topk(4));
    expect(e1).toBeInstanceOf(loom.LoomIndexError);
    expect(e1.message).toContain("[topk] selected index k out of range");
    expect(e1.message).toContain("[1, 3]");
    expect(thrown(() => x.sort(2))).toBeInstanceOf(loom.LoomIndexError);
    expect(thrown(() => x.kthvalue(0)).message).toContain("[kthvalue] selected number k out of range");
    expect(thrown(() => x.kthvalue(4)).message).toContain("[kthvalue] selected number k out of range");
    expect(thrown(() => (x as any).topk()).message).toContain("[topk] missing required argument 'k'");
    expect(thrown(() => x.sort({ dim: 0, order: 1 } as any)).message).toContain("unexpected keyword argument 'order'");
  });
});

/** |count - n·p| <= 5·sqrt(n·p·(1 - p)): a 5-sigma binomial bound (fails by chance ~1e-6 per check). */
function expectBinomial(count: number, n: number, p: number, what: string): void {
  const sd = Math.sqrt(n * p * (1 - p));
  if (Math.abs(count - n * p) > 5 * sd) throw new Error(`${what}: ${count} draws of ${n}, expected ${n * p} ± ${5 * sd}`);
}

describe.each(BACKENDS)("multinomial on %s", (backend) => {
  useBackend(backend);
  test("with replacement: frequencies within a binomial bound, zero weights never drawn, unnormalized weights", () => {
    const w = [1, 2, 0, 3, 4]; // sums to 10
    const n = 20000;
    const s = loom.multinomial(loom.tensor(w).float(), n, true, { generator: new loom.Generator(7) });
    expect(s.shape).toEqual([n]);
    expect(s.dtype).toBe("int64");
    const counts = new Array<number>(w.length).fill(0);
    for (const c of s.dataSync()) counts[c]!++;
    expect(counts[2]).toBe(0);
    w.forEach((wi, c) => expectBinomial(counts[c]!, n, wi / 10, `category ${c}`));
  });
  test("without replacement: distinct per row; first and second draws follow sequential sampling", () => {
    const p = [0.1, 0.2, 0.3, 0.4];
    const B = 6000;
    const probs = loom.tensor([p]).float().expand([B, 4]);
    const s = probs.multinomial(2, { generator: new loom.Generator(11) });
    expect(s.shape).toEqual([B, 2]);
    const d = s.dataSync();
    const pairs = new Map<string, number>();
    for (let b = 0; b < B; b++) {
      expect(d[2 * b]).not.toBe(d[2 * b + 1]);
      const k = `${d[2 * b]},${d[2 * b + 1]}`;
      pairs.set(k, (pairs.get(k) ?? 0) + 1);
    }
    // P(first = i, second = j) = p_i · p_j / (1 - p_i)
    for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) {
      if (i !== j) expectBinomial(pairs.get(`${i},${j}`) ?? 0, B, (p[i]! * p[j]!) / (1 - p[i]!), `pair ${i},${j}`);
    }
    const all = loom.multinomial(loom.tensor([[0, 5, 0, 1]]).float(), 4, { generator: new loom.Generator(1) }).tolist() as number[][];
    expect(all[0]!.slice(0, 2).sort()).toEqual([1, 3]); // positive weights first
    expect(all[0]!.slice(2)).toEqual([0, 2]); // then the zero weights, lowest index first (as torch's CPU)
  });
  test("a fixed generator gives the same draws eagerly and on a lazy probs (which is realized)", () => {
    const logits = loom.randn([3, 9], { generator: new loom.Generator(2) });
    const e = logits.softmax(-1).multinomial(4, true, { generator: new loom.Generator(5) });
    const l = logits.lazy().softmax(-1).multinomial(4, true, { generator: new loom.Generator(5) });
    expect(l.tolist()).toEqual(e.tolist());
    loom.manual_seed(9);
    const a = loom.multinomial(logits.softmax(-1), 1).tolist();
    loom.manual_seed(9);
    expect(loom.multinomial(logits.softmax(-1), 1).tolist()).toEqual(a);
  });
  test("errors as torch", () => {
    const f = (w: number[] | number[][], n: number, replacement = false) => thrown(() => loom.multinomial(loom.tensor(w).float(), n, replacement));
    expect(f([1, -1], 1, true).message).toContain("encountering probability entry < 0");
    expect(f([1, NaN], 1, true).message).toContain("infinity or NaN");
    expect(f([1, Infinity], 1, true).message).toContain("infinity or NaN");
    expect(f([[1, 1], [0, 0]], 1, true).message).toContain("sum of probabilities <= 0");
    expect(f([1, 2], 3).message).toContain("cannot sample n_sample > prob_dist.size(-1) samples without replacement");
    expect(f([1, 2], 0, true).message).toContain("cannot sample n_sample <= 0 samples");
    expect(f([1, 2], 0, true)).toBeInstanceOf(loom.LoomValueError);
    const e = thrown(() => loom.multinomial(loom.tensor([1, 2]), 1));
    expect(e).toBeInstanceOf(loom.LoomDtypeError);
    expect(e.message).toContain("only supports floating-point dtypes for input, got int64");
    expect(thrown(() => loom.multinomial(loom.zeros([2, 2, 2]), 1, true))).toBeInstanceOf(loom.LoomShapeError);
  });
});
