/**
 * PyTorch's OpInfo samples (tests/opinfo/goldens/, written by gen_opinfo_goldens.py from torch
 * 1.13's op_db) run on Loom, eagerly and lazily, on js, native and webgpu.
 *
 * Each sample ends in one status per backend:
 * - pass: outputs (shape, dtype, values) and the gradients of sum(out * cot) match torch;
 *   lazy matches too, and on js lazy is bit-equal to eager. An error sample ("e") passes when
 *   Loom throws.
 * - unsupported: the call throws (the adapter has no Loom spelling, or Loom refuses with a typed
 *   error). Every such sample is listed, with its reason, in unsupported.json; a listed sample
 *   that stops throwing fails the suite, so the list only shrinks.
 * - anything else is a mismatch (wrong value, dtype or gradient, or a missing error). A known one
 *   is listed in known_failures.json with a one-line diagnosis; a listed one that passes fails
 *   the suite, so fixes shrink the list.
 * - differences.json lists samples where torch 1.13 is the inexact side (its result is an artifact
 *   of its kernel), each with the reason; they are checked like known failures.
 * update_lists.py rewrites the lists (it holds the reasons and diagnoses). Keys are sample ids;
 * "id@backend" limits an entry to one backend; a known failure whose key ends in "?" is
 * nondeterministic (uninitialized memory): it may pass, and is not asserted.
 * Error samples (torch raises) run on js and native; webgpu runs no error samples.
 *
 * Tolerances (|got - want| <= atol + rtol |want|, NaN equals NaN, infinities exact):
 * torch.testing.assert_close's defaults, float64 rtol 1e-7 atol 1e-7, float32 rtol 1.3e-6
 * atol 1e-5; gradients of float32 samples (sums of float32 products, in a different order than
 * torch) rtol 1e-5 atol 1e-5. webgpu runs float32, int and bool samples (WGSL has no f64, and
 * the float64 samples cover the same calls) with rtol 1e-4 atol 1e-5 (lavapipe's transcendental
 * functions are a few ulp off), at most WEBGPU_CAP per op and dtype to bound shader compiles.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import * as loom from "../../src/index.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";
import { mismatch, num } from "../golden/compare.ts";
import { ADAPTERS, DT, Unsupported, type Call } from "./adapters.ts";

interface Arr { shape: number[]; dtype: loom.DType; data: (number | string)[]; rg?: 1 }
interface Sample {
  id: string; dtype: string; tensors: Arr[]; input: any; args: any[]; kwargs: Record<string, any>;
  outs?: Arr[]; cots?: (Arr | null)[]; grads?: (Arr | null)[]; error?: string;
}
interface Golden { op: string; torch_version: string; samples: Sample[] }

const DIR = new URL("./goldens/", import.meta.url);
const GOLDENS: Golden[] = readdirSync(DIR).filter((f) => f.endsWith(".json")).sort()
  .map((f) => JSON.parse(readFileSync(new URL(f, DIR), "utf8")));
const UNSUPPORTED: Record<string, string[]> = JSON.parse(readFileSync(new URL("./unsupported.json", import.meta.url), "utf8"));
const KNOWN_BUGS: Record<string, string> = JSON.parse(readFileSync(new URL("./known_failures.json", import.meta.url), "utf8"));
/** Samples where torch 1.13 itself is off and Loom gives the exact value (checked as known failures). */
const DIFFERENCES: Record<string, string> = JSON.parse(readFileSync(new URL("./differences.json", import.meta.url), "utf8"));
const KNOWN: Record<string, string> = { ...KNOWN_BUGS, ...DIFFERENCES };
const WEBGPU_CAP = 4;

type Backend = "js" | "native" | "webgpu";
type Status = { kind: "pass" } | { kind: "unsupported"; why: string } | { kind: "mismatch"; why: string };

// ---- decoding -------------------------------------------------------------------------------

function makeTensor(a: Arr, gpu: boolean): loom.Tensor {
  let t = loom.tensor(Float64Array.from(a.data, num), { dtype: a.dtype }).reshape(a.shape);
  if (gpu) t = t.to("webgpu");
  return a.rg ? t.requires_grad_(true) : t;
}

/** The sample's call with Loom values; `leaves` are the tensors that require grad, in table order. */
function decode(s: Sample, lazy: boolean, gpu: boolean): { call: Call; leaves: (loom.Tensor | null)[] } {
  const eager = s.tensors.map((a) => makeTensor(a, gpu));
  const used = eager.map((t) => (lazy ? t.lazy() : t));
  const anyFloat = s.tensors.some((a) => a.dtype.startsWith("float"));
  const value = (v: any): any => {
    if (Array.isArray(v)) return v.map(value);
    if (v === null || typeof v !== "object") return v;
    if ("t" in v) return used[v.t];
    if ("f" in v) {
      // an integral Python float: its type matters where no float tensor sets the result dtype
      if (!anyFloat && !("dtype" in s.kwargs)) throw new Unsupported("integral Python float scalar where no float tensor sets the result dtype (a JS number cannot carry Python's float type)");
      return num(v.f);
    }
    if ("dtype" in v) return new DT(v.dtype);
    if ("py" in v) throw new Unsupported(`Python argument ${v.py}`);
    throw new Error(`undecodable value ${JSON.stringify(v)}`);
  };
  const call: Call = {
    input: value(s.input), args: s.args.map(value),
    kwargs: Object.fromEntries(Object.entries(s.kwargs).map(([k, v]) => {
      if (k === "memory_format") throw new Unsupported("keyword memory_format=");
      return [k, value(v)];
    })),
    device: gpu ? "webgpu" : undefined,
  };
  return { call, leaves: eager.map((t, i) => (s.tensors[i]!.rg ? t : null)) };
}

// ---- running --------------------------------------------------------------------------------
interface Result { outs: loom.Tensor[]; grads: (loom.Tensor | null)[] }
/** Thrown when the forward call worked but its backward failed: a bug, never "unsupported". */
class BackwardError extends Error {}

function run(op: string, s: Sample, lazy: boolean, gpu: boolean): Result {
  const adapter = ADAPTERS[op]!;
  const { call, leaves } = decode(s, lazy, gpu);
  const r = adapter.run(call);
  const raw = Array.isArray(r) ? r : [r];
  if (s.cots && s.cots.some((c) => c)) {
    const pairs = raw.map((o, i) => [o, s.cots![i]] as const).filter(([, c]) => c);
    const cots = pairs.map(([, c]) => { const t = makeTensor(c!, gpu); return lazy ? t.lazy() : t; });
    try {
      loom.autograd.backward(pairs.map(([o]) => o) as any[], cots as any[]);
    } catch (e) {
      throw new BackwardError(`backward throws: ${errText(e)}`);
    }
  }
  const outs = raw.map((t) => t.eval());
  if (s.error !== undefined) for (const o of outs) o.dataSync(); // index errors raise on read
  return { outs, grads: leaves.map((t) => (t?.grad ? t.grad.eval() : null)) };
}

// ---- comparing ------------------------------------------------------------------------------
interface Tol { rtol: number; atol: number }
const TOL: Record<string, Tol> = { float64: { rtol: 1e-7, atol: 1e-7 }, float32: { rtol: 1.3e-6, atol: 1e-5 } };
const GRAD_TOL32: Tol = { rtol: 1e-5, atol: 1e-5 };
const GPU_TOL: Tol = { rtol: 1e-4, atol: 1e-5 };
const fmt = (v: ArrayLike<number>) => `[${Array.from(v).slice(0, 12).map((x) => +x.toPrecision(8)).join(", ")}${v.length > 12 ? ", ..." : ""}]`;


/** compareValues, with an error raised on reading the results (webgpu index errors) as a mismatch. */
function compare(s: Sample, r: Result, gpu: boolean): string | null {
  try {
    return compareValues(s, r, gpu);
  } catch (e) {
    return `reading the results throws: ${errText(e)}`;
  }
}

function compareValues(s: Sample, r: Result, gpu: boolean): string | null {
  const outs = s.outs!;
  if (r.outs.length !== outs.length) return `${r.outs.length} outputs, expected ${outs.length}`;
  for (let i = 0; i < outs.length; i++) {
    const m = mismatch(`out[${i}]`, r.outs[i]!, outs[i]!, gpu ? GPU_TOL : TOL[outs[i]!.dtype] ?? TOL.float64!);
    if (m) return m;
  }
  const grads = s.grads ?? [];
  for (let i = 0; i < s.tensors.length; i++) {
    if (!s.tensors[i]!.rg || !s.cots) continue;
    const want = grads[i] ?? null;
    const got = r.grads[i] ?? null;
    if (want === null) {
      // torch: not reached; Loom may still give zeros
      if (got !== null && got.dataSync().some((v) => v !== 0)) return `grad[${i}]: expected none, got ${fmt(got.dataSync())}`;
      continue;
    }
    if (got === null) return `grad[${i}]: missing`;
    const m = mismatch(`grad[${i}]`, got, want, gpu ? GPU_TOL : want.dtype === "float32" ? GRAD_TOL32 : TOL.float64!);
    if (m) return m;
  }
  return null;
}

/** Bit-equality of two results (NaN equals NaN). */
function sameBits(e: Result, l: Result): string | null {
  const pairs = [...e.outs.map((t, i) => [`out[${i}]`, t, l.outs[i]] as const),
    ...e.grads.map((t, i) => [`grad[${i}]`, t, l.grads[i]] as const)];
  for (const [what, a, b] of pairs) {
    if (!a || !b) { if (a !== b) return `${what}: eager and lazy differ in having it`; continue; }
    const x = a.dataSync(), y = b.dataSync();
    const i = x.findIndex((v, k) => !Object.is(v, y[k]) && !(Number.isNaN(v) && Number.isNaN(y[k]!)));
    if (i >= 0) return `${what}[${i}]: eager ${x[i]} vs lazy ${y[i]}`;
  }
  return null;
}

const errText = (e: unknown) => (e instanceof Error ? `${e.constructor.name}: ${e.message}` : String(e)).split("\n")[0]!.slice(0, 200);

/** One sample on one backend: eager, then lazy (creation ops have no lazy form). */
function status(op: string, s: Sample, backend: Backend): Status {
  const gpu = backend === "webgpu";
  const lazyToo = !ADAPTERS[op]!.creation;
  if (s.error !== undefined) {
    for (const lazy of lazyToo ? [false, true] : [false]) {
      try {
        run(op, s, lazy, gpu);
      } catch (e) {
        if (e instanceof Unsupported) return { kind: "unsupported", why: e.message };
        continue;
      }
      return { kind: "mismatch", why: `${lazy ? "lazy" : "eager"}: no error, torch raises ${s.error}` };
    }
    return { kind: "pass" };
  }
  let eager: Result;
  try {
    eager = run(op, s, false, gpu);
  } catch (e) {
    if (e instanceof BackwardError) return { kind: "mismatch", why: `eager: ${e.message}` };
    return { kind: "unsupported", why: e instanceof Unsupported ? e.message : errText(e) };
  }
  const m = compare(s, eager, gpu);
  if (m) return { kind: "mismatch", why: `eager: ${m}` };
  if (!lazyToo) return { kind: "pass" };
  let lazy: Result;
  try {
    lazy = run(op, s, true, gpu);
  } catch (e) {
    return { kind: "mismatch", why: `lazy throws where eager does not: ${errText(e)}` };
  }
  const ml = compare(s, lazy, gpu);
  if (ml) return { kind: "mismatch", why: `lazy: ${ml}` };
  if (backend === "js") {
    const b = sameBits(eager, lazy); // both were read without error by compare
    if (b) return { kind: "mismatch", why: `lazy is not bit-equal to eager on js: ${b}` };
  }
  return { kind: "pass" };
}

// ---- expectations ---------------------------------------------------------------------------
const unsupportedReason = new Map<string, string>();
for (const [why, ids] of Object.entries(UNSUPPORTED)) for (const id of ids) unsupportedReason.set(id, why);
const lookup = <V>(m: Map<string, V> | Record<string, V>, id: string, b: Backend): V | undefined => {
  const get = (k: string) => (m instanceof Map ? m.get(k) : m[k]);
  return get(`${id}@${b}`) ?? get(id);
};

const SAMPLE_IDS = new Set(GOLDENS.flatMap((g) => g.samples.map((s) => s.id)));
const COUNTS: Record<string, Record<string, number>> = {};
const REPORT: Record<string, Record<string, string>> = {};

/** The samples a backend runs: all on js/native; on webgpu no float64 and WEBGPU_CAP per dtype. */
function samplesFor(g: Golden, backend: Backend): Sample[] {
  if (backend !== "webgpu") return g.samples;
  const per = new Map<string, number>();
  return g.samples.filter((s) => {
    if (s.dtype === "float64" || s.dtype === "error") return false;
    const n = per.get(s.dtype) ?? 0;
    per.set(s.dtype, n + 1);
    return n < WEBGPU_CAP;
  });
}

function checkOp(g: Golden, backend: Backend): string[] {
  const problems: string[] = [];
  const c = (COUNTS[backend] ??= { pass: 0, unsupported: 0, known_failure: 0, torch_differs: 0, flaky: 0, run: 0 });
  for (const s of samplesFor(g, backend)) {
    const st = status(g.op, s, backend);
    c.run!++;
    const listedU = lookup(unsupportedReason, s.id, backend);
    const listedK = lookup(KNOWN, s.id, backend);
    const flaky = lookup(KNOWN, `${s.id}?`, backend) ?? KNOWN[`${s.id}@${backend}?`];
    (REPORT[backend] ??= {})[s.id] = st.kind === "pass" ? "pass" : `${st.kind}: ${st.why}`;
    if (flaky) {
      c.flaky!++;
    } else if (st.kind === "pass") {
      c.pass!++;
      if (listedU) problems.push(`${s.id}: listed unsupported (${listedU}) but passes: remove it from unsupported.json`);
      if (listedK) problems.push(`${s.id}: listed in known_failures.json or differences.json but passes: remove it`);
    } else if (listedK) {
      // a known bug may show as a throw (a refused valid input) or a mismatch
      if (lookup(DIFFERENCES, s.id, backend)) c.torch_differs!++;
      else c.known_failure!++;
    } else if (st.kind === "unsupported") {
      c.unsupported!++;
      if (!listedU) problems.push(`${s.id}: throws (${st.why}): list it in unsupported.json with its reason, or fix it`);
    } else {
      problems.push(`${s.id}: MISMATCH ${st.why}${listedU ? ` (listed unsupported, but it does not throw)` : ""}`);
    }
  }
  return problems;
}

test("unsupported.json and known_failures.json name existing samples, each once", () => {
  const ids = [...Object.values(UNSUPPORTED).flat(), ...Object.keys(KNOWN_BUGS), ...Object.keys(DIFFERENCES)];
  expect(ids.filter((k) => !SAMPLE_IDS.has(k.split("@")[0]!.replace(/\?$/, "")))).toEqual([]);
  expect(ids.filter((k, i) => ids.indexOf(k) !== i)).toEqual([]);
  expect(GOLDENS.map((g) => g.op).filter((op) => !ADAPTERS[op])).toEqual([]);
});

function suite(backend: Backend) {
  for (const g of GOLDENS) {
    test(`${g.op} (torch ${g.torch_version})`, () => {
      expect(checkOp(g, backend)).toEqual([]);
    }, 120_000);
  }
}

describe.each(BACKENDS)("opinfo on %s", (backend) => {
  useBackend(backend);
  suite(backend);
});

describe.if(WEBGPU)("opinfo on webgpu", () => {
  suite("webgpu");
});

afterAll(() => {
  for (const [b, c] of Object.entries(COUNTS)) {
    console.log(`[opinfo] ${b}: ${c.pass}/${c.run} pass, ${c.unsupported} unsupported (listed), ${c.known_failure} known failures, ${c.torch_differs} where torch 1.13 is inexact (differences.json), ${c.flaky} nondeterministic (not asserted)`);
  }
  // LOOM_OPINFO_REPORT=path writes every sample's status per backend (to curate the two lists)
  if (process.env.LOOM_OPINFO_REPORT) writeFileSync(process.env.LOOM_OPINFO_REPORT, JSON.stringify(REPORT, null, 1));
});
