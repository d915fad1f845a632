/**
 * Builds the native shim (native/shim.c + native/kernels/*.c) with the system C compiler into
 * a shared library, cached by a hash of the sources, flags, compiler and CPU in a gitignored
 * folder (native/build/). Called lazily by the native backend on first use and by
 * `scripts/build-native.ts` (npm's postinstall); a missing compiler yields a message, not a throw.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { moduleDir } from "../../runtime/files.ts";
import { spawnSync } from "../../runtime/process.ts";
import { opTableHeader } from "./optable.ts";

/**
 * The package's native/ folder: three levels up from this file in the sources, one up from the
 * bundled dist/index.js (what Deno and Node load from an installed package); "" in a browser
 * bundle (no files: the path is never used there, since there is no FFI either).
 */
export const NATIVE_DIR = ((): string => {
  const here = moduleDir(import.meta);
  if (!here) return "";
  for (const up of ["../../../native", "../native"]) if (existsSync(join(resolve(here, up), "shim.c"))) return resolve(here, up);
  return resolve(here, "../../../native");
})();
export const BUILD_DIR = NATIVE_DIR && join(NATIVE_DIR, "build");
/**
 * Flags: -O3 -march=native for this CPU's vectors, pthreads for the pool, no OpenMP;
 * -ffp-contract=off so a·b + c is never fused into an FMA (the js reference rounds twice);
 * -fopenmp-simd (no OpenMP runtime) so block loops call libmvec's SIMD exp/log/tanh/...
 */
export const CFLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fPIC", "-pthread", "-fno-math-errno", "-ffp-contract=off", "-fopenmp-simd", "-Wall"];
/**
 * Link flags. `-z nodelete`: the library is never unmapped once loaded, because loom_init starts
 * threads (the pool's workers, the executor) that live in its code and wait on its static mutexes
 * and condition variables. Deno runs each test file in its own worker and closes the worker's
 * `Deno.dlopen` handles when it ends (dlclose); without the flag the next file's dlopen mapped a
 * fresh copy (statics reset, `started` = 0) while the old threads still slept in the old copy's
 * futexes, at the same addresses when the copy landed there again: a second executor and pool
 * then shared pool_cv with the stale waiters, and pthread_cond_broadcast blocked forever
 * (webgpu.test.ts's GPT + LoRA hung in k_fused_attention -> loom_parallel_for), or freed memory
 * was touched (`double free or corruption`). With it, later loads return the same copy and
 * loom_init finds the pool started.
 */
export const LDFLAGS = ["-shared", "-pthread", "-Wl,-z,nodelete"];

/** Where the generated header (ops.gen.h: the opcode table, from the registry) is written. */
export const GEN_DIR = BUILD_DIR && join(BUILD_DIR, "gen");

/** Write ops.gen.h when its text changed (tmp + rename: a concurrent build never reads half a file). */
function writeOpTable(): string {
  const path = join(GEN_DIR, "ops.gen.h");
  const text = opTableHeader();
  if (existsSync(path) && readFileSync(path, "utf8") === text) return path;
  mkdirSync(GEN_DIR, { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, path);
  return path;
}

export type BuildResult = { ok: true; path: string; cached: boolean } | { ok: false; reason: string };

function sources(): string[] {
  const k = join(NATIVE_DIR, "kernels");
  return [join(NATIVE_DIR, "shim.c"), ...readdirSync(k).filter((f) => f.endsWith(".c") || f.endsWith(".h")).sort().map((f) => join(k, f)), writeOpTable()];
}

/** The system C compiler: `CC`, else `cc`. */
export function compiler(): string {
  return process.env.CC || "cc";
}

/** Hash of everything that changes the library: sources, flags, compiler, CPU model. */
function buildHash(files: readonly string[]): string {
  const h = createHash("sha256");
  for (const f of files) h.update(f.slice(NATIVE_DIR.length)).update(readFileSync(f));
  h.update(CFLAGS.join(" ")).update(LDFLAGS.join(" ")).update(compiler()).update(cpus()[0]?.model ?? "").update(process.arch);
  return h.digest("hex").slice(0, 16);
}

/** Path of the built library, building it if the cached one is missing or stale. */
export function buildNative(opts: { quiet?: boolean } = {}): BuildResult {
  if (!NATIVE_DIR || !existsSync(join(NATIVE_DIR, "shim.c"))) return { ok: false, reason: `native sources not found in ${NATIVE_DIR}` };
  const files = sources();
  const lib = join(BUILD_DIR, `libloom-${buildHash(files)}.so`);
  if (existsSync(lib)) return { ok: true, path: lib, cached: true };
  const cc = compiler();
  const probe = spawnSync([cc, "--version"], { output: "ignore" });
  if (!probe.success) {
    return { ok: false, reason: `no C compiler ('${cc}' not found; install gcc or set CC) — Loom uses its js backend` };
  }
  mkdirSync(BUILD_DIR, { recursive: true });
  const tmp = join(BUILD_DIR, `tmp-${process.pid}-${Date.now()}`);
  mkdirSync(tmp, { recursive: true });
  if (!opts.quiet) console.error(`[loom] building the native backend (${cc} ${CFLAGS.join(" ")})...`);
  // compile the files in parallel (one job per file), then link
  const cfiles = files.filter((f) => f.endsWith(".c"));
  const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  const objs = cfiles.map((f, i) => join(tmp, `${i}.o`));
  const script = [
    ...cfiles.map((f, i) => `${q(cc)} ${CFLAGS.join(" ")} -I${q(GEN_DIR)} -c ${q(f)} -o ${q(objs[i]!)} &`),
    "wait",
    `${q(cc)} ${LDFLAGS.join(" ")} -o ${q(join(tmp, "lib.so"))} ${objs.map(q).join(" ")} -lmvec -lm -ldl`,
  ].join("\n");
  // `wait` loses the compile jobs' statuses; a missing object then fails the link with the compiler's message
  const r = spawnSync(["sh", "-c", script]);
  if (!r.success || !existsSync(join(tmp, "lib.so"))) {
    const msg = r.stderr.trim().split("\n").slice(0, 20).join("\n");
    rmSync(tmp, { recursive: true, force: true });
    return { ok: false, reason: `native build failed (${cc}):\n${msg}` };
  }
  renameSync(join(tmp, "lib.so"), lib); // atomic: concurrent builders never load a half-written file
  rmSync(tmp, { recursive: true, force: true });
  return { ok: true, path: lib, cached: false };
}
