/**
 * Generated native kernels: C per fused program (jit_codegen.ts), compiled with the system C
 * compiler into a shared library, loaded with the runtime's dlopen (src/runtime/ffi.ts), and run by the shim's `jit_call`
 * instruction (native/kernels/jit.c) on Loom's pool, in the plan's command buffer.
 *
 * Catalog entries (backends/catalog.ts), each with its contract against the float64 reference:
 * - `native.fused_elementwise.jit_f32` (rank 40): float32 evaluation, libmvec float32 functions,
 *   a per-element running error bound, uncertified elements recomputed in double (jit_fast.ts);
 *   FAST_CONTRACT = torch.testing's float32 tolerance (atol 1e-5, rtol 1.3e-6), the default;
 * - `native.fused_reduce.jit_f32` (rank 40): the same for a reduction's prologue (and epilogue),
 *   folded in double with the bounds, each output certified or recomputed in double;
 * - `native.fused_elementwise.jit` and `native.fused_reduce.jit` (rank 50): double evaluation,
 *   +−·/ and sqrt exactly as the reference, libmvec double functions (jit_codegen.ts);
 *   JIT_CONTRACT (atol 1e-9, rtol 2.4e-7: one float32 ulp and margin).
 * The exact kernels (rank 100) stay the only choice under tolerance "exact".
 *
 * Compiling: `prepare` only generates the source; the first run of any generated kernel compiles
 * every source still pending in ONE compiler invocation (a plan's prepares all come before its
 * first run, so a plan compiles once). The library is cached on disk by a hash of (sources,
 * flags, compiler, CPU model) under `$LOOM_CACHE_DIR` (else `$XDG_CACHE_HOME/loom`, else
 * `~/.cache/loom`), folder `kernels/`: `u-<hash>.so` per compiled unit and `p-<hash>` per
 * program naming the unit that holds it, both written to a temporary name and renamed (atomic:
 * concurrent processes never load a half-written file). A later process finds every program by
 * its hash and compiles nothing.
 *
 * Never a crash: no compiler, `LOOM_JIT=0`, or a program we cannot generate make `applies` false
 * (so do programs under LOOM_JIT_MIN_ELEMENTS elements, where a compile would not pay);
 * a compile that fails prints one message on stderr and its kernels run the exact kernel instead.
 * `LOOM_JIT_CC` names the compiler (default `CC`, else `cc`).
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import type { FusedElementwiseAttrs, FusedReduceAttrs } from "../../graph/passes/fused_ops.ts";
import { isContiguous, numel } from "../../tensor/shape.ts";
import type { PreparedKernel } from "../backend.ts";
import type { Application, Contract, Implementation } from "../catalog.ts";
import { loomCacheDir } from "../../io/files.ts";
import { ffi } from "../../runtime/ffi.ts";
import { spawnSync, type SpawnResult } from "../../runtime/process.ts";
import type { NativeBackend } from "./backend.ts";
import { compiler as systemCompiler } from "./build.ts";
import { genElementwise, genReduce, unsupported, unsupportedReduce, type Generated } from "./jit_codegen.ts";
import { FAST_PRELUDE, genElementwiseFast, genReduceFast, unsupportedFast, unsupportedReduceFast } from "./jit_fast.ts";

/**
 * |y − ref| ≤ atol + rtol·|ref|, ref = the decomposition in float64 rounded once to the output
 * dtype. Without a transcendental function the kernel computes ref's double value exactly, so
 * y = ref (float64 results) or one rounding away (float32: 2^-23, within rtol). With them:
 * libmvec's ≤ 4 double ulps, amplified by the program's condition, move the double value; rtol
 * leaves another float32 ulp for that (condition up to ~2^25) and atol covers cancellation near
 * zero (4 double ulps of intermediates up to ~10^6) — an assumption about the program, not a
 * per-element check (jit_fast.ts's kernels check theirs). Source: glibc manual, "Errors in Math
 * Functions" (libmvec).
 */
export const JIT_CONTRACT: Contract = {
  kind: "bound", atol: 1e-9, rtol: 2.4e-7,
  source: "double evaluation, +−·/ and sqrt as the float64 reference, glibc libmvec ≤ 4 ulp (double) for exp/log/log1p/sin/cos/tanh/erf/pow, one rounding to the output dtype",
};

/**
 * The fast elementwise kernel's contract (jit_fast.ts): float32 transcendental functions, every
 * element certified by a running error bound or recomputed in double. torch.testing's float32
 * tolerance, the default (FLOAT32_TOLERANCE).
 */
export const FAST_CONTRACT: Contract = {
  kind: "bound", atol: 1e-5, rtol: 1.3e-6,
  source: "glibc libmvec float32 variants ≤ 4 ulp and Loom's erf (jit_fast.ts ERF_ABS_BOUND, measured), a per-element running error bound (≤ 9.5e-6 + 1e-6·|v|) or the double kernel's value",
};

/** Flags: the native build's, plus -fno-trapping-math so floor/ceil/rint vectorize (no FP traps are used). */
export const JIT_CFLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fopenmp-simd", "-w"];

/** Declarations so `#pragma omp simd` loops call libmvec's SIMD variants (glibc's math.h declares them only with -ffast-math). */
const PRELUDE = [
  "#include <stddef.h>",
  "#include <stdint.h>",
  "#define LOOM_SIMD __attribute__((simd(\"notinbranch\")))",
  ...["exp", "log", "log1p", "sin", "cos", "tanh", "erf"].map((f) => `LOOM_SIMD double ${f}(double);`),
  "LOOM_SIMD double pow(double, double);",
  FAST_PRELUDE,
].join("\n");

/** Counters for tests and benchmarks. */
export const jitStats = { compiles: 0, compileMs: 0, programs: 0, diskHits: 0, failures: 0 };

function compiler(): string {
  return process.env.LOOM_JIT_CC || systemCompiler();
}

/** The kernel cache folder (created on demand). */
export function jitCacheDir(): string {
  return join(loomCacheDir(), "kernels");
}

const probes = new Map<string, boolean>();
/** Whether the compiler runs (probed once per compiler name). */
function haveCompiler(): boolean {
  const cc = compiler();
  let ok = probes.get(cc);
  if (ok === undefined) {
    ok = ffi() !== null && spawnSync([cc, "--version"], { output: "ignore" }).success;
    probes.set(cc, ok);
    if (!ok) warnOnce(`no C compiler ('${cc} --version' failed; set CC or LOOM_JIT_CC)`);
  }
  return ok;
}

let warned = false;
/** One message per process on stderr: why generated kernels do not run. */
function warnOnce(msg: string): void {
  if (!warned) console.error(`[loom] generated kernels: ${msg} — the exact kernels run instead`);
  warned = true;
}

/** Whether generated kernels may be used at all (LOOM_JIT=0 turns them off). */
export function jitEnabled(): boolean {
  return process.env.LOOM_JIT !== "0" && haveCompiler();
}

/** One generated function: `slot[0]` holds its address once loaded (read by jit_call at run time). */
interface Entry {
  readonly hash: string;
  readonly name: string;
  readonly source: string;
  readonly slot: Float64Array;
  state: "pending" | "ok" | "failed";
}

const entries = new Map<string, Entry>();
let pending: Entry[] = [];
const libs: unknown[] = []; // dlopen handles, kept for the life of the process

function hashOf(text: string): string {
  return createHash("sha256").update(PRELUDE).update(text).update(JIT_CFLAGS.join(" ")).update(compiler()).update(cpus()[0]?.model ?? "").update(process.arch).digest("hex").slice(0, 20);
}

/** Load `names` from the library at `path` into their entries; false when that fails. */
function load(path: string, es: readonly Entry[]): boolean {
  try {
    const spec = Object.fromEntries(es.map((e) => [e.name, { args: [], returns: "void" } as const]));
    const lib = ffi()!.dlopen(path, spec);
    libs.push(lib);
    for (const e of es) {
      const p = lib.address(e.name);
      if (!p) return false;
      e.slot[0] = Number(p);
      e.state = "ok";
    }
    return true;
  } catch {
    return false;
  }
}

/** Atomic write: a temporary file renamed over the target. */
function writeAtomic(path: string, data: string): void {
  const tmp = `${path}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
  writeFileSync(tmp, data);
  renameSync(tmp, path);
}

/** The entry of a generated function: found in memory, on disk (loaded at once), or pending. */
function entryFor(g: Generated): Entry {
  const hash = hashOf(g.source);
  let e = entries.get(hash);
  if (e) return e;
  const name = `loom_jit_${hash}`;
  e = { hash, name, source: g.source.replaceAll("NAME", name), slot: new Float64Array(1), state: "pending" };
  entries.set(hash, e);
  const dir = jitCacheDir();
  const index = join(dir, `p-${hash}`);
  if (existsSync(index)) {
    const unit = join(dir, readFileSync(index, "utf8").trim());
    if (existsSync(unit) && load(unit, [e])) {
      jitStats.diskHits++;
      return e;
    }
  }
  pending.push(e);
  return e;
}

/** Compile every pending source in one compiler invocation and load the library. */
function compilePending(): void {
  const es = pending.filter((e) => e.state === "pending");
  pending = [];
  if (es.length === 0) return;
  const fail = (msg: string) => {
    for (const e of es) e.state = "failed";
    jitStats.failures++;
    warnOnce(msg);
  };
  const src = PRELUDE + es.map((e) => e.source).join("\n\n") + "\n";
  const unitHash = hashOf(src);
  const dir = jitCacheDir();
  const so = join(dir, `u-${unitHash}.so`);
  try {
    mkdirSync(dir, { recursive: true });
    if (!existsSync(so)) {
      const t0 = performance.now();
      const tmp = `${so}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`;
      const cfile = `${tmp}.c`;
      writeFileSync(cfile, src);
      const cc = compiler();
      const r: SpawnResult = spawnSync([cc, ...JIT_CFLAGS, "-o", tmp, cfile, "-lmvec", "-lm"]);
      if (!r.started) {
        rmSync(cfile, { force: true });
        return fail(`'${cc}' could not run (${r.stderr})`);
      }
      jitStats.compiles++;
      jitStats.compileMs += performance.now() - t0;
      if (!r.success || !existsSync(tmp)) {
        rmSync(tmp, { force: true });
        rmSync(cfile, { force: true });
        const msg = r.stderr.trim().split("\n").slice(0, 5).join("\n");
        return fail(`${cc} failed (exit ${r.exitCode})${msg ? `:\n${msg}` : ""}`);
      }
      renameSync(cfile, so.replace(/\.so$/, ".c")); // kept beside the library, for reading
      renameSync(tmp, so);
    }
    if (!load(so, es)) return fail(`loading ${so} failed`);
    for (const e of es) writeAtomic(join(dir, `p-${e.hash}`), `u-${unitHash}.so\n`);
    jitStats.programs += es.length;
  } catch (err) {
    fail((err as Error).message);
  }
}

/** A kernel running `g` once compiled, else (compile failed, output not dense) the exact kernel. */
export function jitKernel(b: NativeBackend, a: Application, g: Generated): PreparedKernel {
  const e = entryFor(g);
  const exact = b.prepare(a.op, a.inputs, a.attrs, a.shape, a.dtype);
  const run = b.instruction("jit_call", [ffi()!.ptr(e.slot), g.tasks, g.grain, ...g.params]);
  return (ins, out) => {
    if (e.state === "pending") compilePending();
    if (e.state !== "ok" || !isContiguous(out.shape, out.strides)) return exact(ins, out);
    run(ins, out);
  };
}

/**
 * Fewest elements (of the program's index space) for which a generated kernel is used
 * (`LOOM_JIT_MIN_ELEMENTS`, default 16384): below, the exact kernel is about as fast and a first
 * compile (~0.1 s) would not pay for itself.
 */
function minElements(): number {
  const v = Number(process.env.LOOM_JIT_MIN_ELEMENTS ?? 16384);
  return Number.isFinite(v) ? v : 16384;
}

const spaceOf = (a: Application): readonly number[] =>
  a.op.name === "fused_reduce" ? (a.attrs as FusedReduceAttrs).prologue.shape : a.shape;

/** Whether a generated kernel may run `a` at all: compiler, size, dtypes, dims and inputs within the shim's limits. */
export const common = (b: NativeBackend, a: Application): boolean =>
  b.lib.opcodes.has("jit_call") && a.shape.length <= 16 && numel(a.shape) > 0 && numel(spaceOf(a)) >= minElements() && jitEnabled() &&
  (a.dtype === "float32" || a.dtype === "float64") && a.inputs.length <= 64 && a.inputs.every((l) => l.shape.length <= 16);

/** The generated-kernel implementations of the native backend's catalog. */
export function jitImplementations(b: NativeBackend): Implementation[] {
  return [
    {
      id: "native.fused_elementwise.jit_f32", op: "fused_elementwise", contract: FAST_CONTRACT, rank: 40,
      doc: "generated C per program: float32 libmvec exp/log/tanh/erf/sin/cos, the rest in double, each element certified by a running error bound (else recomputed in double); float32 results with a transcendental, no pow",
      applies: (a) => common(b, a) && a.dtype === "float32" && unsupportedFast((a.attrs as FusedElementwiseAttrs).program) === null,
      prepare: (a) => jitKernel(b, a, genElementwiseFast((a.attrs as FusedElementwiseAttrs).program)),
    },
    {
      id: "native.fused_elementwise.jit", op: "fused_elementwise", contract: JIT_CONTRACT, rank: 50,
      doc: "generated C per program, vectorized, evaluated in double and rounded once (float32/float64 results; no integer ops, no comparison of a transcendental result)",
      applies: (a) => common(b, a) && unsupported((a.attrs as FusedElementwiseAttrs).program, false) === null,
      prepare: (a) => jitKernel(b, a, genElementwise((a.attrs as FusedElementwiseAttrs).program)),
    },
    {
      id: "native.fused_reduce.jit_f32", op: "fused_reduce", contract: FAST_CONTRACT, rank: 40,
      doc: "generated C per reduction: a float32 prologue with libmvec float32 functions and its error bound, folded in double lanes, each output certified (else recomputed in double); float32 results with a transcendental prologue",
      applies: (a) => common(b, a) && a.dtype === "float32" && unsupportedReduceFast(a.attrs as FusedReduceAttrs) === null,
      prepare: (a) => jitKernel(b, a, genReduceFast(a.attrs as FusedReduceAttrs)),
    },
    {
      id: "native.fused_reduce.jit", op: "fused_reduce", contract: JIT_CONTRACT, rank: 50,
      doc: "generated C per reduction (sum/amax/amin folded in 8 double lanes, prologue and epilogue inline); not for column reductions",
      applies: (a) => common(b, a) && unsupportedReduce(a.attrs as FusedReduceAttrs) === null,
      prepare: (a) => jitKernel(b, a, genReduce(a.attrs as FusedReduceAttrs)),
    },
  ];
}
