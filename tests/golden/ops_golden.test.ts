/**
 * Loom ops against PyTorch goldens (tests/golden/ops.json, made by gen_torch_goldens.py with
 * torch 1.13). Each case runs eagerly and lazily on every backend (tests/backends.ts): values, shapes, dtypes and input gradients of
 * sum(out * grad_output) must match torch, and the lazy results must equal the eager ones.
 * The op ids and args format are documented at the top of gen_torch_goldens.py.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import * as loom from "../../src/index.ts";
import { BACKENDS, WEBGPU, useBackend } from "../backends.ts";
import { decodeNonFinite, mismatch, num } from "./compare.ts";

type Json = number | string | boolean | null | Json[] | { [k: string]: Json };
interface Arr { shape: number[]; dtype: loom.DType; data: (number | string | boolean)[]; requires_grad?: boolean }
interface Step { op: string; args: Record<string, any>; inputs: number[] }
interface Case {
  name: string; op: string; inputs: Arr[]; args: Record<string, any>;
  op_inputs?: number; then?: Step[];
  out?: Arr; outs?: Arr[]; grad_output?: Arr; grads?: (Arr | null)[];
}

const golden = JSON.parse(readFileSync(new URL("./ops.json", import.meta.url), "utf8")) as { torch_version: string; cases: Case[] };

// ---- decoding ---------------------------------------------------------------------------------
/** Args with "nan"/"inf"/"-inf" strings turned back into numbers (other strings kept). */
function decodeArgs(a: Json): any {
  if (typeof a === "string") return decodeNonFinite(a);
  if (Array.isArray(a)) return a.map(decodeArgs);
  if (a && typeof a === "object") return Object.fromEntries(Object.entries(a).map(([k, v]) => [k, decodeArgs(v)]));
  return a;
}
function makeTensor(a: Arr, gpu = false): loom.Tensor {
  let t = loom.tensor(Float64Array.from(a.data, num), { dtype: a.dtype }).reshape(a.shape);
  if (gpu) t = (t.dtype === "float64" ? t.float() : t).to("webgpu"); // WGSL has no f64
  return a.requires_grad ? t.requires_grad_(true) : t;
}

// ---- op id -> Loom call (same methods on Tensor and LazyTensor) --------------------------------
type T = loom.Tensor | loom.LazyTensor;
type Adapter = (xs: any[], a: Record<string, any>) => T | T[];
const binary = (m: string): Adapter => ([x, y], a) => x[m](y ?? a.other);
const unary = (m: string): Adapter => ([x]) => x[m]();
const reduce = (m: string): Adapter => ([x], a) => x[m](a.dim, a.keepdim ?? false);
const extreme = (m: "max" | "min"): Adapter => ([x], a) => {
  if (a.dim === undefined) return x[m]();
  const r = x[m](a.dim, a.keepdim ?? false);
  return [r.values, r.indices];
};
const INDEX_ENTRY = (e: Json) => (e === null ? ":" : e); // golden null = ":" (Loom's null is a new axis)

const ADAPTERS: Record<string, Adapter> = {
  ...Object.fromEntries(["add", "sub", "mul", "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum",
    "floor_divide", "remainder"].map((m) => [m, binary(m)])),
  ...Object.fromEntries(["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu"]
    .map((m) => [m, unary(m)])),
  ...Object.fromEntries(["sum", "mean", "amax", "amin", "argmax", "argmin", "logsumexp"].map((m) => [m, reduce(m)])),
  div: ([x, y], a) => x.div(y ?? a.other, a.rounding_mode ? { rounding_mode: a.rounding_mode } : undefined),
  pow: ([x, y], a) => x.pow(y ?? a.exponent),
  gelu: ([x], a) => loom.gelu(x, a.approximate),
  clamp: ([x], a) => x.clamp(a.min ?? null, a.max ?? null),
  where: ([c, x, y]) => loom.where(c, x, y),
  masked_fill: ([x, m], a) => x.masked_fill(m, a.value),
  max: extreme("max"),
  min: extreme("min"),
  var: ([x], a) => x.var(a.dim, { unbiased: a.unbiased, keepdim: a.keepdim ?? false }),
  std: ([x], a) => x.std(a.dim, { unbiased: a.unbiased, keepdim: a.keepdim ?? false }),
  cumsum: ([x], a) => x.cumsum(a.dim),
  matmul: ([x, y]) => loom.matmul(x, y),
  softmax: ([x], a) => loom.softmax(x, a.dim),
  log_softmax: ([x], a) => loom.log_softmax(x, a.dim),
  layer_norm: ([x, w, b], a) => loom.layer_norm(x, a.normalized_shape, w ?? null, b ?? null, a.eps),
  rms_norm: ([x, w], a) => loom.rms_norm(x, a.normalized_shape, w ?? null, a.eps),
  embedding: ([i, w], a) => loom.embedding(i, w, a.padding_idx),
  cross_entropy: ([x, t, w], a) => loom.cross_entropy(x, t, { ...a, weight: w ?? null }),
  scaled_dot_product_attention: ([q, k, v, m], a) =>
    loom.scaled_dot_product_attention(q, k, v, { attn_mask: m ?? null, is_causal: a.is_causal, scale: a.scale }),
  cat: (xs, a) => loom.cat(xs, a.dim),
  stack: (xs, a) => loom.stack(xs, a.dim),
  split: ([x], a) => x.split(a.split_size_or_sections, a.dim),
  chunk: ([x], a) => x.chunk(a.chunks, a.dim),
  tril: ([x], a) => loom.tril(x, a.diagonal),
  triu: ([x], a) => loom.triu(x, a.diagonal),
  gather: ([x, i], a) => x.gather(a.dim, i),
  one_hot: ([x], a) => loom.one_hot(x, a.num_classes),
  transpose: ([x], a) => x.transpose(a.dim0, a.dim1),
  permute: ([x], a) => x.permute(a.dims),
  expand: ([x], a) => x.expand(a.size),
  narrow: ([x], a) => x.narrow(a.dim, a.start, a.length),
  reshape: ([x], a) => x.reshape(a.shape),
  getitem: ([x], a) => x.index(...a.index.map(INDEX_ENTRY)),
};

// ---- running a case --------------------------------------------------------------------------
interface Result { outs: loom.Tensor[]; grads: (loom.Tensor | null)[] }

function run(c: Case, lazy: boolean, gpu = false): Result {
  const leaves = c.inputs.map((a) => makeTensor(a, gpu));
  const xs: T[] = leaves.map((t) => (lazy ? t.lazy() : t));
  const n = c.op_inputs ?? xs.length;
  let res = ADAPTERS[c.op]!(xs.slice(0, n), decodeArgs(c.args));
  for (const s of c.then ?? []) {
    res = ADAPTERS[s.op]!([res as T, ...s.inputs.map((k) => xs[k]!)], decodeArgs(s.args));
  }
  const raw = Array.isArray(res) ? res : [res];
  if (c.grad_output) {
    const go = makeTensor(c.grad_output, gpu);
    const first = raw[0]!;
    (first as any).backward(lazy ? go.lazy() : go);
  }
  return { outs: raw.map((t) => t.eval()), grads: leaves.map((t) => (t.grad ? t.grad.eval() : null)) };
}

// ---- comparing -------------------------------------------------------------------------------
/** float32 tolerances when any tensor of the case is float32 (its grads may be rounded there). */
function tolerance(c: Case): { rtol: number; atol: number } {
  const arrs = [...c.inputs, ...(c.outs ?? [c.out!])];
  return arrs.some((a) => a.dtype === "float32") ? { rtol: 1e-5, atol: 1e-6 } : { rtol: 1e-9, atol: 1e-10 };
}


/** On webgpu float64 runs as float32: expect float32 and float32 tolerances (vs float64 goldens). */
const GPU_TOL = { rtol: 1e-4, atol: 1e-5 };
const asGpu = (a: Arr): Arr => (a.dtype === "float64" ? { ...a, dtype: "float32" } : a);

function check(c: Case, r: Result, gpu = false): string[] {
  if (gpu) {
    const g = { ...c, out: c.out && asGpu(c.out), outs: c.outs?.map(asGpu), grads: c.grads?.map((x) => x && asGpu(x)) };
    return checkWith(g, r, GPU_TOL);
  }
  return checkWith(c, r, tolerance(c));
}
function checkWith(c: Case, r: Result, tol: { rtol: number; atol: number }): string[] {
  const errs: string[] = [];
  const wantOuts = c.outs ?? [c.out!];
  if (r.outs.length !== wantOuts.length) errs.push(`${r.outs.length} outputs, expected ${wantOuts.length}`);
  wantOuts.forEach((w, i) => { if (r.outs[i]) errs.push(mismatch(`out[${i}]`, r.outs[i]!, w, tol) ?? ""); });
  (c.grads ?? c.inputs.map(() => null)).forEach((w, i) => {
    const g = r.grads[i] ?? null;
    if (w === null) errs.push(g === null ? "" : `grad[${i}]: expected none, got one`);
    else errs.push(g === null ? `grad[${i}]: missing` : mismatch(`grad[${i}]`, g, w, tol) ?? "");
  });
  return errs.filter((e) => e !== "");
}

/** Lazy must reproduce eager: same shapes and dtypes, bit-equal values (NaN equals NaN). */
function sameResults(e: Result, l: Result): string[] {
  const pairs: [string, loom.Tensor | null, loom.Tensor | null][] = [
    ...e.outs.map((t, i): [string, loom.Tensor, loom.Tensor | null] => [`out[${i}]`, t, l.outs[i] ?? null]),
    ...e.grads.map((t, i): [string, loom.Tensor | null, loom.Tensor | null] => [`grad[${i}]`, t, l.grads[i] ?? null]),
  ];
  const errs: string[] = [];
  for (const [what, a, b] of pairs) {
    if (a === null || b === null) { if (a !== b) errs.push(`${what}: eager ${a ? "has" : "lacks"} it, lazy ${b ? "has" : "lacks"} it`); continue; }
    if (a.dtype !== b.dtype || JSON.stringify(a.shape) !== JSON.stringify(b.shape)) {
      errs.push(`${what}: eager ${a.dtype}${JSON.stringify(a.shape)} vs lazy ${b.dtype}${JSON.stringify(b.shape)}`);
      continue;
    }
    const x = a.dataSync(), y = b.dataSync();
    const i = x.findIndex((v, k) => !Object.is(v, y[k]) && !(Number.isNaN(v) && Number.isNaN(y[k]!)));
    if (i >= 0) errs.push(`${what}[${i}]: eager ${x[i]} vs lazy ${y[i]}`);
  }
  return errs;
}

// ---- the suite ---------------------------------------------------------------------------------
const byOp = new Map<string, Case[]>();
for (const c of golden.cases) byOp.set(c.op, [...(byOp.get(c.op) ?? []), c]);

test("every golden op id has an adapter", () => {
  const ids = new Set(golden.cases.flatMap((c) => [c.op, ...(c.then ?? []).map((s) => s.op)]));
  expect([...ids].filter((id) => !ADAPTERS[id])).toEqual([]);
});

describe.each(BACKENDS)("on %s", (backend) => {
useBackend(backend);
for (const [op, cases] of byOp) {
  describe(`golden ${op} (torch ${golden.torch_version})`, () => {
    for (const c of cases) {
      test(`${c.name} eager`, () => {
        expect(check(c, run(c, false))).toEqual([]);
      });
      test(`${c.name} lazy`, () => {
        // tolerance "exact": lazy must give eager's bits (bounded kernels are tested in tests/catalog/)
        const lazy = loom.with_compiler_options({ tolerance: "exact" }, () => run(c, true));
        expect(check(c, lazy)).toEqual([]);
        expect(sameResults(run(c, false), lazy)).toEqual([]);
      });
    }
  });
}
});

/** float64 inputs that float32 cannot hold (1e-300 underflows to 0) make a different case. */
const fitsF32 = (c: Case) => c.inputs.every((a) => a.dtype !== "float64" || a.data.every((v) => {
  const x = num(v);
  return !Number.isFinite(x) || x === 0 || (Math.fround(x) !== 0 && Number.isFinite(Math.fround(x)));
}));

describe.if(WEBGPU)("on webgpu (float32 kernels vs float64 goldens)", () => {
  for (const [op, cases] of byOp) {
    describe(`golden ${op}`, () => {
      for (const c of cases.filter(fitsF32)) {
        test(`${c.name} eager and lazy`, () => {
          const eager = run(c, false, true);
          expect(check(c, eager, true)).toEqual([]);
          const lazy = run(c, true, true); // fused kernels: checked against the goldens too
          expect(check(c, lazy, true)).toEqual([]);
        }, 60_000); // first use of a kernel compiles it (lavapipe: up to seconds)
      }
    });
  }
});
