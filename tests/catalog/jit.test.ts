/**
 * Generated native kernels (src/backends/native/jit.ts): every supported op and a set of real
 * programs against a float64 reference of their decomposition (the js backend on float64 inputs,
 * rounded once to float32), within JIT_CONTRACT, on inputs that stress it (large/small/negative
 * values, NaN/±inf, sizes off the vector width and across tiles, broadcast, transposed and sliced
 * inputs, an output written over its input); the disk cache round trip (a second process
 * compiles nothing); a failed compile runs the exact kernel; tolerance "exact" never selects them.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { FAST_CONTRACT, JIT_CONTRACT, jitEnabled, jitStats } from "../../src/backends/native/jit.ts";
import { FLOAT32_TOLERANCE, type Contract } from "../../src/backends/catalog.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract } from "./helpers.ts";

type T = loom.Tensor;
type Fn = (...xs: any[]) => any;

/** Environment for this file's tests, restored afterwards (other files share the process). */
const ENV = {
  LOOM_CACHE_DIR: "", // a fresh kernel cache (set in beforeAll): compiles are counted from zero
  LOOM_JIT_MIN_ELEMENTS: "0", // small test tensors get generated kernels too
};
const ENABLED = NATIVE !== null && jitEnabled();
if (NATIVE && !ENABLED) console.warn("[skip] generated kernels: no C compiler (or LOOM_JIT=0)");

/** Values that stress a float program: zeros of both signs, tiny/huge, overflow edges, NaN, ±inf, halves. */
const SPECIAL = [0, -0, 1e-30, -1e-30, 1e30, -1e30, 88.5, -88.5, 104, -104, NaN, Infinity, -Infinity, 0.5, 2.5, -2.5, 1, -1, 3e-39, 2, -2, 4 / 3, 1 / 3, 89.5];

/** n float32 values: SPECIAL first, then normals at scales 1e-3..30. */
function stress(n: number, seed: number, reversed = false): T {
  loom.manual_seed(seed);
  const r = loom.randn([n]).dataSync();
  const v = new Float32Array(n);
  for (let i = 0; i < n; i++) v[i] = i < SPECIAL.length ? SPECIAL[i]! : r[i]! * [1, 10, 1e-3, 30][i % 4]!;
  return loom.tensor(reversed ? v.reverse() : v);
}

/** The decomposition in float64 on the js backend, rounded once to float32. */
function reference(fn: Fn, xs: readonly T[]): Float32Array {
  const prev = set_default_backend("js");
  try {
    const y = fn(...xs.map((x) => (x.dtype === "float32" ? x.to("float64") : x))) as T;
    return Float32Array.from(y.dataSync() as ArrayLike<number>);
  } finally {
    set_default_backend(prev as "js" | "native");
  }
}

const EW = "native.fused_elementwise.jit", FAST = "native.fused_elementwise.jit_f32";
const RED = "native.fused_reduce.jit", RED_FAST = "native.fused_reduce.jit_f32";
const CONTRACTS: Record<string, Contract> = { [EW]: JIT_CONTRACT, [FAST]: FAST_CONTRACT, [RED]: JIT_CONTRACT, [RED_FAST]: FAST_CONTRACT };
/** The library's default tolerance (set here: other files may change it): admits every generated kernel. */
const DEFAULT = { tolerance: FLOAT32_TOLERANCE };
/** A tolerance that admits the double kernels but not the float32 one (its contract is looser). */
const TIGHT = { tolerance: { atol: 1e-9, rtol: 2.4e-7 } };

/**
 * Run fn lazily on native; the plan must use one of `impls` (the generated kernel ids); the
 * values must meet that implementation's contract. Returns the id used.
 */
function check(name: string, fn: Fn, xs: readonly T[], impls: readonly string[], options: Partial<loom.CompilerOptions> = {}): string {
  const opts = { ...DEFAULT, ...options };
  const y = loom.with_compiler_options(opts, () => fn(...xs.map((x) => x.lazy())));
  const plan = loom.with_compiler_options(opts, () => y.plan());
  const used = plan.instructions.map((i: { impl: string }) => i.impl).filter((id: string) => id in CONTRACTS);
  if (used.length === 0 || !used.every((id: string) => impls.includes(id))) throw new Error(`${name}: expected ${impls.join(" or ")} in the plan, got ${used.join(", ") || "none"}\n${plan.explain()}`);
  const got = loom.with_compiler_options(opts, () => y.eval() as T).dataSync();
  expect(jitStats.failures).toBe(0); // a compile error would fall back to exact kernels silently
  // several generated kernels in a row (amax then sum): the loosest contract (the tests' programs do not amplify)
  const cs: { atol: number; rtol: number }[] = used.map((id: string) => CONTRACTS[id] as { atol: number; rtol: number });
  const c: Contract = { kind: "bound", atol: Math.max(...cs.map((k) => k.atol)), rtol: Math.max(...cs.map((k) => k.rtol)), source: "" };
  expectWithinContract(got as ArrayLike<number>, reference(fn, xs), c, { what: `${name} (${used.join(", ")})` });
  return used[0]!;
}

/** check() with the default tolerance (the float32 kernel where it applies) and with TIGHT (the double kernel). */
function checkBoth(name: string, fn: Fn, xs: readonly T[], opts: Partial<loom.CompilerOptions> = {}): void {
  check(name, fn, xs, [EW, FAST], opts);
  check(name, fn, xs, [EW], { ...opts, ...TIGHT });
}


/**
 * gelu's decompositions (lazy/surface.ts) with their constants rounded to float32 as the float32
 * graph holds them, so the float64 reference evaluates the same decomposition.
 */
const F = Math.fround;
const geluErf = (t: any) => t.mul(0.5).mul(t.mul(F(Math.SQRT1_2)).erf().add(1));
const geluTanh = (t: any) => t.mul(0.5).mul(t.add(t.mul(t).mul(t).mul(F(0.044715))).mul(F(Math.sqrt(2 / Math.PI))).tanh().add(1));

describe.skipIf(!ENABLED)("generated native kernels", () => {
  let prev = "";
  const tol = loom.get_compiler_options().tolerance;
  const saved: Record<string, string | undefined> = {};
  beforeAll(() => {
    prev = set_default_backend("native");
    loom.set_compiler_options(DEFAULT);
    ENV.LOOM_CACHE_DIR = mkdtempSync(join(tmpdir(), "loom-jit-test-"));
    for (const [k, v] of Object.entries(ENV)) { saved[k] = process.env[k]; process.env[k] = v; }
  });
  afterAll(() => {
    set_default_backend(prev as "js" | "native");
    loom.set_compiler_options({ tolerance: tol });
    for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    rmSync(ENV.LOOM_CACHE_DIR, { recursive: true, force: true });
  });

  // each op after a multiply (a lone op is not a fused program)
  const UNARY = ["neg", "abs", "sign", "exp", "log", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tanh", "sigmoid", "relu", "erf", "floor", "ceil", "round"];
  for (const op of UNARY) {
    test(`${op}: within the contract on stressed values (1031 elements)`, () => {
      const discontinuous = ["sign", "floor", "ceil", "round"].includes(op);
      // discontinuous ops read x·1.5 (exact in double and in the reference); the others x·0.75
      checkBoth(op, (x) => (x.mul(discontinuous ? 1.5 : 0.75) as any)[op](), [stress(1031, 1)]);
    });
  }

  const BINARY: [string, Fn][] = [
    ["add", (x, y) => x.mul(0.5).add(y)], ["sub", (x, y) => x.mul(0.5).sub(y)], ["mul", (x, y) => x.add(1).mul(y)],
    ["div", (x, y) => x.add(1).div(y)], ["pow", (x, y) => x.abs().pow(y.mul(0.25))], ["maximum", (x, y) => x.mul(2).maximum(y)],
    ["minimum", (x, y) => x.mul(2).minimum(y)], ["floor_divide", (x, y) => x.mul(3).floor_divide(y.add(0.5))],
    ["comparisons and where", (x, y) => x.where(x.mul(2).gt(y).logical_or(x.le(y.neg())), y.mul(x))],
    ["eq/ne/lt/ge and logical ops", (x, y) => x.add(y).where(x.eq(y).logical_or(x.ne(y).logical_and(x.lt(y))).logical_or(x.ge(1)).logical_not(), y)],
    ["isnan and cast", (x, y) => x.add(y).isnan().to("float32").mul(y)],
  ];
  for (const [name, fn] of BINARY) {
    test(`${name}: within the contract on stressed values`, () => checkBoth(name, fn, [stress(1029, 2), stress(1029, 3, true)]));
  }

  test("cancellation after a transcendental: exp(x) − fl32(exp(x)) is recomputed in double, not certified", () => {
    // the float32 exp is off by up to 4 ulp of e^x (up to ~1e3 here), far more than the result
    // (at most half an ulp): only a bound of the right size sends these elements to the double kernel
    loom.manual_seed(21);
    const x = loom.rand([2053]).mul(7);
    const y = x.to("float64").exp().to("float32");
    check("exp(x) − fl32(exp(x))", (a, b) => a.exp().sub(b), [x, y], [FAST]);
  });

  test("masked softmax numerators: exp(where(mask, −inf, x) − m) and exp(x + finfo.min − m), overflow of finite operands", () => {
    // −inf − m is exactly −inf in float32 and in the reference, and exp of an argument below −104 is 0 in
    // both: the float32 kernel certifies them (no double recomputation); an overflow of finite operands
    // (3e38 + 3e38 in float32, 6e38 in the reference) is never certified
    const x = stress(1031, 4), m = stress(1031, 5).abs();
    const mask = loom.tensor(Array.from({ length: 1031 }, (_, i) => i % 3 !== 0), { dtype: "bool" });
    const minF32 = -3.4028234663852886e38;
    checkBoth("masked -inf", (a, b, c) => (a.masked_fill(c.logical_not(), -Infinity) as any).sub(b).exp(), [x, m, mask]);
    checkBoth("masked finfo.min", (a, b, c) => (a.masked_fill(c.logical_not(), minF32) as any).sub(b).exp(), [x, m, mask]);
    const big = (seed: number) => stress(1031, seed).abs().mul(1e36).add(3e38); // [3e38, 3.4e38]: sums overflow float32
    checkBoth("overflow", (a, b, c) => (a.add(b) as any).sub(c).mul(2 ** -123).exp(), [big(6), big(7), big(8)]);
  });

  test("the infinity rule of + and − is generated only where a later op can certify the infinity", () => {
    // the rule (an exactly known ±inf operand adds no rounding) is what certifies a masked
    // softmax numerator without the double recomputation; elsewhere it only costs time
    const dir = join(ENV.LOOM_CACHE_DIR, "kernels");
    const sources = () => new Set(existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".c")) : []);
    /** The generated C of the units compiled while running fn on fresh inputs. */
    const newSource = (fn: Fn, xs: readonly T[]): string => {
      const before = sources();
      check("rule", fn, xs, [FAST]);
      return [...sources()].filter((f) => !before.has(f)).map((f) => readFileSync(join(dir, f), "utf8")).join("\n");
    };
    const mask = loom.tensor(Array.from({ length: 1033 }, (_, i) => i % 3 !== 0), { dtype: "bool" });
    const mask1039 = loom.tensor(Array.from({ length: 1039 }, (_, i) => i % 3 !== 0), { dtype: "bool" });
    const masked = newSource((a, b, c) => (a.masked_fill(c.logical_not(), -Infinity) as any).sub(b).add(0.5).exp().mul(b), [stress(1033, 9), stress(1033, 10), mask]);
    // the sub and the add, three isinf tests each, in the vector loop and in the per-element pass
    expect(masked.match(/__builtin_isinf/g)?.length).toBe(2 * 3 * 2);
    // tanh(−inf) = −1 and a comparison certify it too; a product never does
    const tanh = newSource((a, b, c) => (a.masked_fill(c.logical_not(), -Infinity) as any).add(b).tanh().add(b.gt(a.add(b))).add(a.sub(b).mul(2)), [stress(1039, 14), stress(1039, 15), mask1039]);
    expect(tanh.match(/__builtin_isinf/g)?.length).toBe(2 * 3 * 2); // + → tanh and + → gt; not − → mul, nor the sums into the result
    const gelu = newSource((x, a, b) => geluErf(x.mul(a).add(b)), [stress(1037, 11), stress(1037, 12), stress(1037, 13)]);
    expect(gelu).toContain("loom_jit_");
    expect(gelu).not.toContain("__builtin_isinf");
  });

  test("gelu(x·a + b), erf and tanh forms, 8200 elements (two tiles plus a tail)", () => {
    const xs = [stress(8200, 4), stress(8200, 5), stress(8200, 6)];
    checkBoth("gelu erf", (x, a, b) => geluErf(x.mul(a).add(b)), xs);
    checkBoth("gelu tanh", (x, a, b) => geluTanh(x.mul(a).add(b)), xs);
    // loom.gelu is that program (its constants are float32 in a float32 graph)
    const [x, a, b] = xs.map((t) => t.lazy());
    const bitsOf = (t: any) => Array.from(t.eval().dataSync());
    expect(bitsOf(loom.gelu(x!.mul(a!).add(b!)))).toEqual(bitsOf(geluErf(x!.mul(a!).add(b!))));
    expect(bitsOf(loom.gelu(x!.mul(a!).add(b!), "tanh"))).toEqual(bitsOf(geluTanh(x!.mul(a!).add(b!))));
  });

  test("broadcast inputs ([300,1] and [50]) and a transposed input", () => {
    loom.manual_seed(8);
    const x = loom.randn([300, 50]), a = loom.randn([50]), b = loom.randn([300, 1]), t = loom.randn([50, 300]);
    checkBoth("broadcast", (x, a, b) => geluErf(x.mul(a).add(b)).sub(x.sigmoid()), [x, a, b]);
    checkBoth("transposed", (x, t) => x.mul(t.transpose(0, 1)).tanh().add(x), [x, t]);
  });

  test("sliced and permuted 3-d inputs, odd sizes (1, 7, 13)", () => {
    loom.manual_seed(9);
    const x = loom.randn([7, 13, 9]), w = loom.randn([9, 13, 1]);
    checkBoth("3-d", (x, w) => x.narrow(2, 1, 7).mul(w.permute(2, 1, 0).narrow(2, 0, 7)).exp().add(1).log(), [x, w]);
    checkBoth("one element", (s) => s.mul(3).exp().add(1), [loom.tensor([0.25])]);
  });

  test("float64 programs are generated too, within the same contract", () => {
    loom.manual_seed(10);
    const x = loom.randn([257]).to("float64"), a = loom.randn([257]).to("float64");
    const y = geluErf(x.lazy().mul(a.lazy()).add(1));
    expect(y.plan().instructions.map((i: { impl: string }) => i.impl)).toContain(EW);
    const prev = set_default_backend("js");
    const ref = geluErf(x.mul(a).add(1)).dataSync();
    set_default_backend(prev as "js" | "native");
    expectWithinContract(y.eval().dataSync() as ArrayLike<number>, ref as ArrayLike<number>, JIT_CONTRACT, { what: "float64 gelu", float64: true });
  });

  test("an output written over its input (in-place reuse) reads every element before writing it", () => {
    loom.manual_seed(11);
    const x = stress(64 * 129, 11).reshape([64, 129]), idx = loom.tensor(Array.from({ length: 129 }, (_, i) => 128 - i), { dtype: "int64" });
    // index_select (exact copies, not fusable) makes the program's input and output workspace buffers
    const fn = (x: any, idx: any) => { const c = x.index_select(1, idx); return c.tanh().mul(c).add(c.exp().mul(0.125)).index_select(1, idx); };
    for (const opts of [DEFAULT, TIGHT]) {
      const y = loom.with_compiler_options(opts, () => fn(x.lazy(), idx.lazy()));
      const I = loom.with_compiler_options(opts, () => y.plan()).instructions.find((i: { impl: string }) => i.impl in CONTRACTS);
      expect(I?.impl).toBe(opts === TIGHT ? EW : FAST);
      expect(I?.inplace).toBe(true);
      const got = loom.with_compiler_options(opts, () => y.eval().dataSync());
      expectWithinContract(got as ArrayLike<number>, reference(fn, [x, idx]), CONTRACTS[I!.impl]!, { what: `in place (${I!.impl})` });
    }
  });

  test("reductions: sum/amax/amin with prologue and epilogue (softmax-style, layer-norm prologue), NaN/inf, both kernels", () => {
    loom.manual_seed(12);
    const v = Float32Array.from(loom.randn([33 * 1025]).dataSync() as ArrayLike<number>, (e) => e * 4);
    v[5] = NaN; v[1025 * 3 + 7] = Infinity; v[1025 * 4 + 9] = -Infinity;
    const x = loom.tensor(v).reshape([33, 1025]), off = { patterns: false };
    for (const [opts, ids] of [[{}, [RED, RED_FAST]], [TIGHT, [RED]]] as const) {
      check("exp-sum", (x) => x.sub(x.amax(-1, true)).exp().sum(-1).log(), [x], ids, { ...off, ...opts });
      check("amax", (x) => x.mul(2).amax(-1).mul(3), [x], ids, { ...off, ...opts });
      check("amin", (x) => x.abs().amin(-1), [x], ids, { ...off, ...opts });
      check("amax of tanh", (x) => x.mul(0.25).tanh().amax(-1), [x], ids, { ...off, ...opts });
      const y = loom.randn([40, 3, 257]), w = loom.randn([257]);
      check("variance", (y, w) => y.sub(y.mean(-1, true)).mul(w).pow(2).mean(-1), [y, w], ids, { ...off, ...opts });
      check("sum over dims 0, 2", (y) => y.exp().sum([0, 2]).sqrt(), [y], ids, { ...off, ...opts });
      check("logsumexp-style epilogue", (y) => y.mul(3).exp().sum(-1).log().sub(y.narrow(2, 0, 1).squeeze(-1)), [y], ids, { ...off, ...opts });
    }
  });

  test("column reductions and integer programs are left to the exact kernels", () => {
    const x = loom.randn([300, 40]);
    const impls = x.lazy().exp().sum(0).plan().instructions.map((i: { impl: string }) => i.impl);
    expect(impls).not.toContain(RED);
    const k = loom.arange(0, 100);
    expect(k.lazy().mul(3).add(1).plan().instructions.map((i: { impl: string }) => i.impl)).not.toContain(EW);
  });

  test("programs under LOOM_JIT_MIN_ELEMENTS elements keep the exact kernel", () => {
    const x = loom.randn([1000]);
    process.env.LOOM_JIT_MIN_ELEMENTS = "1001";
    try {
      expect(x.lazy().mul(3).tanh().plan().instructions.map((i: { impl: string }) => i.impl)).not.toContain(FAST);
    } finally {
      process.env.LOOM_JIT_MIN_ELEMENTS = "0";
    }
    // another program (the plan cache keeps the first plan's choice)
    expect(x.lazy().mul(3).sin().plan().instructions.map((i: { impl: string }) => i.impl)).toContain(FAST);
  });

  test("a comparison of a transcendental result is refused (it could flip)", () => {
    const x = loom.randn([100]);
    const impls = x.lazy().where(x.lazy().exp().gt(1.5), 0).plan().instructions.map((i: { impl: string }) => i.impl);
    expect(impls).not.toContain(EW);
  });

  test('tolerance "exact" never selects a generated kernel, and keeps eager bits', () => {
    loom.manual_seed(13);
    const x = loom.randn([1000]), a = loom.randn([1000]), b = loom.randn([1000]);
    loom.with_compiler_options({ tolerance: "exact" }, () => {
      const y = loom.gelu(x.lazy().mul(a.lazy()).add(b.lazy()));
      const impls = y.plan().instructions.map((i: { impl: string }) => i.impl);
      expect(impls.some((s: string) => s.endsWith(".jit"))).toBe(false);
      expect(Array.from(y.eval().dataSync())).toEqual(Array.from(loom.gelu(x.mul(a).add(b)).dataSync()));
    });
  });

  test("one compiler invocation per plan: a plan with several programs compiles once", () => {
    const before = jitStats.compiles;
    loom.manual_seed(14);
    const x = loom.randn([77, 31]);
    const lx = x.lazy();
    const y = lx.mul(1.25).tanh().cumsum(-1).mul(0.5).sin().cumsum(0).add(lx).erf();
    expect(y.plan().instructions.filter((i: { impl: string }) => i.impl in CONTRACTS).length).toBeGreaterThanOrEqual(2);
    y.eval().dataSync();
    expect(jitStats.compiles - before).toBe(1);
  });

  test("shapes are parameters: the same program on other sizes and offsets compiles nothing new", () => {
    const f = (x: any, a: any) => x.mul(a).tanh().add(x.mul(0.5).erf());
    loom.manual_seed(15);
    const big = loom.randn([3000]), a = loom.randn([3000]);
    check("first size", f, [big.narrow(0, 0, 1000), a.narrow(0, 0, 1000)], [FAST]);
    const before = jitStats.compiles;
    for (const [start, n] of [[0, 777], [5, 2993], [100, 64]] as const) {
      check(`size ${n} at ${start}`, f, [big.narrow(0, start, n), a.narrow(0, start, n)], [FAST]);
    }
    expect(jitStats.compiles).toBe(before);
  });

  const child = (env: Record<string, string>, n: number) => {
    const r = Bun.spawnSync([process.execPath, join(import.meta.dir, "jit_child.ts"), String(n)], { env: { ...process.env, ...env }, stderr: "pipe" });
    if (!r.success) throw new Error(`child failed: ${r.stderr.toString()}`);
    return { out: JSON.parse(r.stdout.toString().trim().split("\n").pop()!), stderr: r.stderr.toString() };
  };

  test("disk cache round trip: a second process loads the library and compiles nothing", () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-jit-cache-"));
    try {
      const first = child({ LOOM_CACHE_DIR: dir }, 41).out, second = child({ LOOM_CACHE_DIR: dir }, 41).out;
      expect(first.impls).toContain(FAST);
      expect(first.stats.compiles).toBe(1);
      expect(second.stats.compiles).toBe(0);
      expect(second.stats.diskHits).toBe(1);
      expect(second.values).toEqual(first.values);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a missing compiler: one message, no generated kernel in the plan, exact values", () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-jit-nocc-"));
    try {
      const r = child({ LOOM_CACHE_DIR: dir, LOOM_JIT_CC: join(dir, "no-such-cc") }, 47);
      expect(r.stderr).toContain("no C compiler");
      expect(r.stderr.split("generated kernels:").length).toBe(2); // once
      expect(r.out.impls.some((id: string) => id in CONTRACTS)).toBe(false);
      expect(r.out.stats.compiles).toBe(0);
      const exact = child({ LOOM_CACHE_DIR: dir, LOOM_JIT: "0" }, 47);
      expect(r.out.values).toEqual(exact.out.values);
      expect(exact.stderr).not.toContain("generated kernels:"); // LOOM_JIT=0 is silent
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a failed compile prints one message and runs the exact kernel (same bits as exact)", () => {
    const dir = mkdtempSync(join(tmpdir(), "loom-jit-bad-"));
    try {
      // a "compiler" that answers --version but fails every compile
      const cc = join(dir, "badcc");
      writeFileSync(cc, "#!/bin/sh\n[ \"$1\" = \"--version\" ] && exit 0\necho 'badcc: cannot compile' >&2\nexit 1\n");
      chmodSync(cc, 0o755);
      const r = child({ LOOM_CACHE_DIR: dir, LOOM_JIT_CC: cc }, 43);
      expect(r.out.stats.failures).toBe(1);
      expect(r.stderr).toContain("exact kernels run instead");
      const exact = child({ LOOM_CACHE_DIR: dir, LOOM_JIT: "0" }, 43).out;
      expect(exact.impls.some((id: string) => id in CONTRACTS)).toBe(false);
      expect(r.out.values).toEqual(exact.values);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
