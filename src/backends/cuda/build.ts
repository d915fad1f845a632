/**
 * Builds Loom's CUDA library (native/cuda/*.cu) with nvcc into a shared library, cached by a hash
 * of the sources, the generated opcode table and the flags in the gitignored native/build/ (next
 * to the CPU shim's). The compiler's version is not hashed, so a library built on a machine with
 * nvcc can be carried to a GPU machine without one (docs/CUDA.md). A missing nvcc yields a
 * reason, not a throw; a compile error yields the compiler's message (CI fails on it).
 *
 * cudart is linked statically (nvcc's default): the library needs only the driver (libcuda.so)
 * at run time; cuBLAS is opened with dlopen when present (matmul.cu).
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "../../runtime/process.ts";
import { BUILD_DIR, NATIVE_DIR } from "../native/build.ts";
import { opTableHeader } from "../native/optable.ts";

export const CUDA_DIR = NATIVE_DIR && join(NATIVE_DIR, "cuda");
/** Where the generated opcode table for the CUDA build is written. */
export const CUDA_GEN_DIR = BUILD_DIR && join(BUILD_DIR, "gen-cuda");

/**
 * Device code for sm_80 (A100) and sm_90 (H100) plus sm_90 PTX, which the driver compiles for
 * newer GPUs at load time. `--fmad=false`: a·b + c is never fused into an FMA, since the js
 * reference rounds twice (as the CPU shim's -ffp-contract=off).
 */
export const GENCODE = ["-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=[sm_90,compute_90]"];
export const NVCC_FLAGS = ["-O3", "--fmad=false", "-std=c++17", "-Xcompiler", "-fPIC,-fvisibility=hidden,-Wall", ...GENCODE];

/** The nvcc to use: `NVCC`, else nvcc on PATH, else /usr/local/cuda/bin/nvcc. */
export function nvcc(): string | null {
  const candidates = [process.env.NVCC, "nvcc", "/usr/local/cuda/bin/nvcc"].filter((c): c is string => !!c);
  for (const c of candidates) {
    if (spawnSync([c, "--version"], { output: "ignore" }).success) return c;
  }
  return null;
}

export type CudaBuildResult = { ok: true; path: string; cached: boolean } | { ok: false; reason: string };

function sources(): string[] {
  const own = readdirSync(CUDA_DIR).filter((f) => f.endsWith(".cu") || f.endsWith(".cuh")).sort().map((f) => join(CUDA_DIR, f));
  // shared with the CPU kernels (common.cuh includes them)
  return [...own, join(NATIVE_DIR, "kernels", "scalar_bits.h"), join(NATIVE_DIR, "kernels", "wire.h")];
}

/** Hash of what changes the library: sources, the opcode table, flags. */
export function cudaBuildHash(files: readonly string[], table: string): string {
  const h = createHash("sha256");
  for (const f of files) h.update(f.slice(NATIVE_DIR.length)).update(readFileSync(f));
  h.update(table).update(NVCC_FLAGS.join(" ")).update(process.arch);
  return h.digest("hex").slice(0, 16);
}

/** The library's path for the current sources (whether or not it is built). */
export function cudaLibPath(): string {
  return join(BUILD_DIR, `libloom_cuda-${cudaBuildHash(sources(), opTableHeader())}.so`);
}

/**
 * Path of the built library, building it when the cached one is missing or stale.
 * `force`: compile even when a cached library exists (the CI build check).
 */
export function buildCuda(opts: { quiet?: boolean; force?: boolean } = {}): CudaBuildResult {
  if (!CUDA_DIR || !existsSync(join(CUDA_DIR, "loom_cuda.cu"))) return { ok: false, reason: `CUDA sources not found in ${CUDA_DIR}` };
  const files = sources();
  const table = opTableHeader();
  const lib = join(BUILD_DIR, `libloom_cuda-${cudaBuildHash(files, table)}.so`);
  if (existsSync(lib) && !opts.force) return { ok: true, path: lib, cached: true };
  const cc = nvcc();
  if (!cc) return { ok: false, reason: "nvcc not found (set NVCC or install the CUDA toolkit); the cuda device is unavailable" };
  const tmp = join(BUILD_DIR, `tmp-cuda-${process.pid}-${Date.now()}`);
  mkdirSync(tmp, { recursive: true });
  writeFileSync(join(tmp, "ops.gen.h"), table);
  mkdirSync(CUDA_GEN_DIR, { recursive: true });
  writeFileSync(join(CUDA_GEN_DIR, "ops.gen.h"), table); // for editors and tools; the build reads tmp's copy
  if (!opts.quiet) console.error(`[loom] building the CUDA library (${cc} ${NVCC_FLAGS.join(" ")})...`);
  const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  const cus = files.filter((f) => f.endsWith(".cu"));
  const objs = cus.map((_f, i) => join(tmp, `${i}.o`));
  // one compile job per file, then a link that refuses undefined symbols (a missing kernel fails here)
  const script = [
    "st=0",
    ...cus.map((f, i) => `${q(cc)} ${NVCC_FLAGS.map(q).join(" ")} -I${q(tmp)} -c ${q(f)} -o ${q(objs[i]!)} & p${i}=$!`),
    ...cus.map((_f, i) => `wait $p${i} || st=1`), // every job finishes before tmp is removed
    `[ $st = 0 ] && ${q(cc)} -shared -Xlinker -z,defs -o ${q(join(tmp, "lib.so"))} ${objs.map(q).join(" ")} -ldl`,
  ].join("\n");
  const r = spawnSync(["sh", "-c", script]);
  if (!r.success || !existsSync(join(tmp, "lib.so"))) {
    const msg = r.stderr.trim().split("\n").filter((l) => l.trim()).slice(0, 30).join("\n");
    rmSync(tmp, { recursive: true, force: true });
    return { ok: false, reason: `CUDA build failed (${cc}):\n${msg}` };
  }
  renameSync(join(tmp, "lib.so"), lib); // atomic: concurrent builders never load a half-written file
  rmSync(tmp, { recursive: true, force: true });
  return { ok: true, path: lib, cached: false };
}
