/**
 * The kernel catalog's selection, the kernel database and `tune`, on a test backend (the js
 * reference backend with a catalog of three `exp` implementations):
 * - exact: the js kernel, made deliberately slower (it runs twice);
 * - sloppy: fast and inaccurate on purpose (a degree-3 Taylor polynomial of exp about 0 on
 *   inputs in [-2, 2): relative error up to ~1.4e-1 at |x| = 2), declaring a loose contract;
 * - liar: as fast and as inaccurate, but declaring a tight contract: tune measures it out of
 *   contract and selection never picks it afterwards.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import type { Backend } from "../../src/backends/backend.ts";
import { admits, FLOAT32_TOLERANCE, type Application, type Implementation } from "../../src/backends/catalog.ts";
import { jsBackend } from "../../src/backends/js/backend.ts";
import { compile } from "../../src/scheduler/compile.ts";
import { closeKernelDb, lookupTimings, readRecords, signatureOf, writeRecords } from "../../src/scheduler/kernel_db.ts";
import { candidates } from "../../src/scheduler/select.ts";
import { errorAgainst, executionPaths, measurePath, reference64, sampleInputs, tune } from "../../src/scheduler/tune.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { backendFor } from "../../src/lazy/device.ts";
import { WEBGPU } from "../backends.ts";
import { allocData, toFloat64, type TensorData } from "../../src/tensor/storage.ts";
import { thrown } from "../thrown.ts";

let dir = "";
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "loom-kdb-"));
  process.env.LOOM_KERNEL_DB = join(dir, "kernels.sqlite");
  closeKernelDb();
});
afterAll(() => {
  closeKernelDb();
  delete process.env.LOOM_KERNEL_DB;
  rmSync(dir, { recursive: true, force: true });
});

/** exp through a cubic Taylor polynomial: cheap and wrong by design. */
function taylorExp(x: number): number {
  return 1 + x + (x * x) / 2 + (x * x * x) / 6;
}

function implementations(): Implementation[] {
  const js = (a: Application) => jsBackend.prepare(a.op, a.inputs, a.attrs, a.shape, a.dtype);
  const poly = (a: Application) => (ins: readonly TensorData[], out: TensorData) => {
    const x = toFloat64(ins[0]!), o = out.data as Float32Array;
    for (let i = 0; i < x.length; i++) o[i] = taylorExp(x[i]!);
    void a;
  };
  const dense = (a: Application) => a.inputs[0]!.strides.every((s, d, st) => s === (d === st.length - 1 ? 1 : st[d + 1]! * a.inputs[0]!.shape[d + 1]!));
  return [
    {
      id: "tunetest.exp.exact", op: "exp", contract: { kind: "exact" }, rank: 100, doc: "js exp, twice",
      applies: () => true,
      prepare: (a) => { const k = js(a); return (ins, out) => { k(ins, out); k(ins, out); }; },
    },
    {
      id: "tunetest.exp.sloppy", op: "exp", contract: { kind: "bound", atol: 1, rtol: 0.2, source: "cubic Taylor series, |x| < 2" }, rank: 10, doc: "cubic Taylor exp",
      applies: (a) => a.dtype === "float32" && dense(a), prepare: poly,
    },
    {
      id: "tunetest.exp.liar", op: "exp", contract: { kind: "bound", atol: 1e-7, rtol: 1e-7, source: "(false)" }, rank: 5, doc: "cubic Taylor exp, claiming 1e-7",
      applies: (a) => a.dtype === "float32" && dense(a), prepare: poly,
    },
  ];
}

const impls = implementations();
const testBackend: Backend = {
  name: "tunetest",
  run: jsBackend.run.bind(jsBackend),
  prepare: jsBackend.prepare.bind(jsBackend),
  implementations: (op) => impls.filter((i) => i.op === op),
};

function expPlan() {
  const x = loom.randn([256, 256]).lazy().exp();
  return compile([x.node], testBackend, "cpu").plan;
}

describe("tolerance option", () => {
  test("validates its value", () => {
    expect((thrown(() => loom.set_compiler_options({ tolerance: { atol: -1, rtol: 0 } }))).message).toContain("[set_compiler_options] tolerance must be");
    expect((thrown(() => loom.set_compiler_options({ tolerance: "loose" as never }))).message).toContain("[set_compiler_options] tolerance must be");
  });
  test("admits: exact admits only exact contracts, a bound admits contracts within it", () => {
    const bound = { kind: "bound" as const, atol: 1e-6, rtol: 1e-6, source: "" };
    expect(admits("exact", { kind: "exact" })).toBe(true);
    expect(admits("exact", bound)).toBe(false);
    expect(admits(FLOAT32_TOLERANCE, bound)).toBe(true);
    expect(admits({ atol: 1e-7, rtol: 1 }, bound)).toBe(false);
  });
  test("plans compiled under different tolerances are different plans", () => {
    const before = loom.planCacheStats.misses;
    loom.with_compiler_options({ tolerance: "exact" }, () => compile([loom.ones(3).lazy().exp().node], testBackend));
    loom.with_compiler_options({ tolerance: { atol: 1, rtol: 1 } }, () => compile([loom.ones(3).lazy().exp().node], testBackend));
    expect(loom.planCacheStats.misses - before).toBe(2);
  });
});

describe("selection without records: by rank among admitted implementations", () => {
  test("exact tolerance picks the exact kernel; a loose one the lowest rank that admits it", () => {
    const plan = loom.with_compiler_options({ tolerance: "exact" }, expPlan);
    expect(plan.instructions.map((i) => i.impl)).toEqual(["tunetest.exp.exact"]);
    const loose = loom.with_compiler_options({ tolerance: { atol: 1, rtol: 1 } }, expPlan);
    expect(loose.instructions[0]!.impl).toBe("tunetest.exp.liar"); // rank 5: its claim is all we know yet
    const tight = loom.with_compiler_options({ tolerance: FLOAT32_TOLERANCE }, expPlan);
    expect(tight.instructions[0]!.impl).toBe("tunetest.exp.liar"); // it claims 1e-7
  });
  test("an implementation that does not apply is never chosen (strided input)", () => {
    const x = loom.randn([64, 32]).lazy().transpose(0, 1).exp();
    const plan = loom.with_compiler_options({ tolerance: { atol: 1, rtol: 1 }, simplify: false }, () => compile([x.node], testBackend).plan);
    expect(plan.instructions.at(-1)!.impl).toBe("tunetest.exp.exact");
  });
});

describe("tune and the database", () => {
  test("enumerates every path, measures errors against float64, and selection follows the records", () => {
    const plan = expPlan();
    const paths = [...executionPaths([plan], testBackend)];
    expect(paths.map((p) => p.impl).sort()).toEqual(["tunetest.exp.exact", "tunetest.exp.liar", "tunetest.exp.sloppy"]);
    const rows = tune(paths, { timeMs: 20, iterations: 5 });
    const by = new Map(rows.map((r) => [r.impl, r]));
    expect(by.get("tunetest.exp.exact")!.max_rel_err).toBeLessThan(1.2e-7); // float32 rounding of exp
    // cubic Taylor at x = -2: 1 - 2 + 2 - 4/3 = -1/3 against e^-2 = 0.1353: relative error ~3.5
    expect(by.get("tunetest.exp.sloppy")!.max_rel_err).toBeGreaterThan(1e-2);
    // its contract (atol 1) holds: |−1/3 − e^−2| = 0.47 is the largest error on [−2, 2)
    expect(by.get("tunetest.exp.sloppy")!.within_contract).toBe(1);
    expect(by.get("tunetest.exp.liar")!.within_contract).toBe(0);
    expect(by.get("tunetest.exp.exact")!.within_contract).toBe(1);
    for (const r of rows) expect(r.n).toBeGreaterThanOrEqual(5); // timed (which is faster is the machine's business: no timing asserted)
    // a second tune finds everything in the database
    expect(tune(paths, { timeMs: 20 }).every((r) => !r.fresh)).toBe(true);
    // the liar (rank 5, claiming 1e-7) measured out of contract is never chosen again: at a
    // loose tolerance the admitted one the database measured faster runs, at float32 the exact one
    const loose = loom.with_compiler_options({ tolerance: { atol: 10, rtol: 10 } }, expPlan);
    const faster = by.get("tunetest.exp.exact")!.median_ms < by.get("tunetest.exp.sloppy")!.median_ms ? "tunetest.exp.exact" : "tunetest.exp.sloppy";
    expect(loose.instructions[0]!.impl).toBe(faster);
    expect(loom.with_compiler_options({ tolerance: FLOAT32_TOLERANCE }, expPlan).instructions[0]!.impl).toBe("tunetest.exp.exact");
  });

  test("a faster inaccurate implementation is refused at a tight tolerance and chosen at a loose one", () => {
    // records as tune writes them for a signature where the sloppy kernel is within its contract
    const app = expPlan().instructions[0]!;
    const sig = signatureOf({ op: app.op, inputs: app.layouts, attrs: app.attrs, shape: app.shape, dtype: app.dtype });
    const rec = (impl: string, ms: number, abs: number, rel: number) => ({
      device: "tunetest", signature: sig, impl, n: 10, median_ms: ms, min_ms: ms, max_abs_err: abs, max_rel_err: rel, within_contract: 1, measured_at: Date.now(),
    });
    writeRecords([rec("tunetest.exp.exact", 2, 1e-7, 6e-8), rec("tunetest.exp.sloppy", 0.5, 0.3, 0.15), rec("tunetest.exp.liar", 0.4, 0.3, 0.15)].map((r) => r.impl === "tunetest.exp.liar" ? { ...r, within_contract: 0 } : r));
    const chosen = (tol: loom.CompilerOptions["tolerance"]) => loom.with_compiler_options({ tolerance: tol }, expPlan).instructions[0]!.impl;
    expect(chosen(FLOAT32_TOLERANCE)).toBe("tunetest.exp.exact");
    expect(chosen({ atol: 0.01, rtol: 0.01 })).toBe("tunetest.exp.exact");
    expect(chosen({ atol: 1, rtol: 0.2 })).toBe("tunetest.exp.sloppy");
    // the database's timing decides between admitted ones: make exact the faster one
    writeRecords([rec("tunetest.exp.exact", 0.1, 1e-7, 6e-8)]);
    expect(chosen({ atol: 1, rtol: 0.2 })).toBe("tunetest.exp.exact");
  });

  test("signatures: different fused programs never share a record; sizes of one class and one program do", () => {
    const sig = (y: loom.LazyTensor, name = "fused_elementwise") => {
      const I = compile([y.node], jsBackend).plan.instructions.find((i) => i.op.name === name)!;
      return signatureOf({ op: I.op, inputs: I.layouts, attrs: I.attrs, shape: I.shape, dtype: I.dtype });
    };
    const x = (n: number) => loom.randn([n, 64]).lazy();
    const ex = (n: number) => x(n).mul(2).exp().add(1), th = (n: number) => x(n).mul(2).tanh().add(1);
    expect(sig(ex(100))).not.toBe(sig(th(100))); // same inputs, shapes and dtypes; other ops
    expect(sig(ex(100))).toBe(sig(ex(120))); // 100 and 120 are both in the class 128
    expect(sig(ex(100))).not.toBe(sig(ex(200)));
    // an unfused op on a strided view is another layout than on a dense input
    const unfused = (y: () => loom.LazyTensor) => loom.with_compiler_options({ fuse: false, patterns: false, simplify: false }, () => sig(y(), "exp"));
    expect(unfused(() => loom.randn([64, 100]).lazy().transpose(0, 1).exp())).not.toBe(unfused(() => x(100).exp()));
  });

  test("round trip: records survive closing and reopening the file", () => {
    const r = { device: "rt", signature: "x:float32[4](float32[4])", impl: "rt.x.a", n: 7, median_ms: 1.25, min_ms: 1, max_abs_err: 2e-7, max_rel_err: 3e-7, within_contract: 1, measured_at: 1700000000000 };
    writeRecords([r]);
    closeKernelDb();
    expect(readRecords("rt")).toEqual([r]);
    expect(lookupTimings("rt", r.signature)!.get("rt.x.a")!.median_ms).toBe(1.25);
    writeRecords([{ ...r, median_ms: 0.5 }]); // replaces, and the in-memory copy follows
    expect(lookupTimings("rt", r.signature)!.get("rt.x.a")!.median_ms).toBe(0.5);
    expect(readRecords("rt").length).toBe(1);
  });

  test("LOOM_KERNEL_DB=off: no records, selection by rank", () => {
    const prev = process.env.LOOM_KERNEL_DB;
    process.env.LOOM_KERNEL_DB = "off";
    try {
      expect(readRecords()).toEqual([]);
      writeRecords([{ device: "off", signature: "s", impl: "i", n: 1, median_ms: 1, min_ms: 1, max_abs_err: 0, max_rel_err: 0, within_contract: 1, measured_at: 0 }]);
      const a = expPlan().instructions[0]!;
      expect(candidates(testBackend, { op: a.op, inputs: a.layouts, attrs: a.attrs, shape: a.shape, dtype: a.dtype }, { atol: 1, rtol: 1 })[0]!.id).toBe("tunetest.exp.liar");
    } finally {
      process.env.LOOM_KERNEL_DB = prev;
    }
  });
});

describe("the float64 reference", () => {
  test("a fused program's intermediates are evaluated in float64", () => {
    // exp(x*a + b) fused: the reference keeps every intermediate in float64, so the exact
    // float32 kernel differs from it by float32 roundings only (a few ulp of the result)
    const x = loom.randn([33, 17]).lazy(), a = loom.randn([33, 1]).lazy(), b = loom.randn([17]).lazy();
    const plan = compile([x.mul(a).add(b).exp().node], jsBackend).plan;
    const I = plan.instructions.find((i) => i.op.name === "fused_elementwise")!;
    const app = { op: I.op, inputs: I.layouts, attrs: I.attrs, shape: I.shape, dtype: I.dtype };
    const ins = sampleInputs(app, 7);
    const ref = reference64(app, ins)!;
    // the last element by hand in float64: exp(x·a + b) (inputs told apart by their shapes)
    const byShape = (s: string) => ins.find((t) => t.shape.join() === s)!;
    const at = (t: TensorData, i: number, j: number) => toFloat64(t)[i * (t.shape.length === 2 && t.shape[1] === 17 ? 17 : 1) + (t.shape.length === 2 && t.shape[1] === 1 ? 0 : j)]!;
    const [i, j] = [32, 16];
    const v = at(byShape("33,17"), i, j) * toFloat64(byShape("33,1"))[i]! + toFloat64(byShape("17"))[j]!;
    expect(ref[i * 17 + j]).toBe(Math.fround(Math.exp(v)));
    const out = allocData("float32", I.shape);
    jsBackend.prepare(I.op, I.layouts, I.attrs, I.shape, I.dtype)(ins, out);
    const e = errorAgainst(toFloat64(out), ref);
    expect(e.abs).toBeGreaterThan(0); // float32 intermediates do round
    expect(e.rel).toBeLessThan(1e-6); // a few float32 ulp (2^-24 ≈ 6e-8 each)
  });
});

describe.skipIf(!WEBGPU || !nativeBackend())("cross-device paths (webgpu plan, native implementation)", () => {
  test("a strided webgpu input: the host implementation runs on the downloaded dense buffer, within its contract", () => {
    const gpu = backendFor("webgpu"), host = nativeBackend()!;
    const x = loom.randn([48, 40]).to("webgpu").lazy().transpose(0, 1); // [40, 48], strided
    const plan = loom.with_compiler_options({ fuse: false, patterns: false }, () => compile([x.exp().node], gpu, "webgpu").plan);
    const paths = [...executionPaths([plan], gpu, host)].filter((p) => p.kind === "cross-device");
    expect(paths.map((p) => p.impl)).toContain("native.exp.exact@host");
    const p = paths.find((q) => q.impl === "native.exp.exact@host")!;
    expect(p.app.inputs[0]!.strides).toEqual([48, 1]); // dense, as a download gives it
    expect(plan.instructions.at(-1)!.layouts[0]!.strides).toEqual([1, 40]); // the plan's own view
    const rec = measurePath(p, { timeMs: 5, iterations: 2 });
    expect(rec.device).toBe("webgpu");
    expect(rec.within_contract).toBe(1);
    expect(rec.max_rel_err).toBeLessThan(2e-7); // exp rounded once to float32
  });
});

