/**
 * The runtime FFI's wider surface (src/runtime/ffi.ts) and the modules moved onto it from bun:ffi:
 * i64 / u64 as numbers, reading a pointer-sized value, C strings, private file mappings (mapped
 * under Bun, read under Deno, whose FFI cannot unmap on collection), LAPACK's SVD (i64
 * arguments), GGUF loading, and loading Open MPI. Run by `deno test` and by `bun test` (harness.ts),
 * so each runtime checks its own implementation against the same hand-derived values.
 * `deno test` runs the files in name order in one process, each in its own worker, and closes a
 * worker's `Deno.dlopen` handles when its file ends. With this file first (a native kernel ran
 * here, then in core.test.ts), webgpu.test.ts's GPT + LoRA test hung (4 runs of 4; once
 * `double free or corruption`): libloom was unmapped while the pool and executor threads that
 * loom_init started still slept inside it, and the next load started a second pool on fresh
 * statics that the stale threads' futexes shared (gdb: three "loom-exec" threads, one blocked in
 * pthread_cond_broadcast(pool_cv) under k_fused_attention). libloom is now linked with
 * `-z nodelete` (src/backends/native/build.ts LDFLAGS), so the order no longer matters; this
 * file running before webgpu.test.ts is the regression check.
 */
import { closeSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { loadLapack } from "../../src/backends/native/lapack.ts";
import { loadMpi } from "../../src/distributed/mpi.ts";
import { openRegularFile } from "../../src/io/files.ts";
import { map_fd_private } from "../../src/io/mmap.ts";
import { ffi } from "../../src/runtime/ffi.ts";
import { moduleDir } from "../../src/runtime/files.ts";
import { load_gguf } from "../../src/weights/index.ts";
import { RUNNER, assert, assertClose, assertEqual, test } from "./harness.ts";

const F = ffi();
const LIBC = "libc.so.6";
const onLinux = process.platform === "linux";

test(`${RUNNER} FFI: i64 / u64 as numbers, readPointer, cstring (libc llabs, strlen)`, () => {
  const f = F!;
  const c = f.dlopen(LIBC, {
    llabs: { args: ["i64"], returns: "i64" },
    strlen: { args: ["ptr"], returns: "u64" },
  } as const);
  try {
    // 2^40 + 3 needs more than 32 bits: an i64 both ways, and a plain number back
    const r = c.symbols.llabs(-(2 ** 40 + 3));
    assertEqual(typeof r, "number", "llabs result type");
    assertEqual(r, 2 ** 40 + 3, "llabs(-(2^40 + 3))");
    const hello = new TextEncoder().encode("hello, loom\0");
    const n = c.symbols.strlen(hello);
    assertEqual(typeof n, "number", "strlen result type");
    assertEqual(n, 11, "strlen");
    assertEqual(f.cstring(f.ptr(hello)), "hello, loom", "cstring");
    assertEqual(f.cstring(null), "", "cstring(NULL)");
    const words = new BigUint64Array([0x123456789abcn, 42n]);
    assertEqual(f.readPointer(f.ptr(words)), 0x123456789abc, "readPointer");
    assertEqual(f.readPointer(f.ptr(words), 8), 42, "readPointer at offset 8");
  } finally {
    c.close();
  }
}, F === null || !onLinux);

test(`${RUNNER}: a private file mapping where the FFI can unmap on collection (Bun), else null (Deno reads)`, () => {
  const dir = mkdtempSync(join(tmpdir(), "loom-rt-"));
  const path = join(dir, "bytes.bin");
  const bytes = Uint8Array.from({ length: 4096 + 7 }, (_, i) => (i * 31) & 255);
  writeFileSync(path, bytes);
  const { fd, size } = openRegularFile(path, (r) => new Error(r));
  try {
    const m = map_fd_private(fd, size);
    if (F?.adopts) {
      assert(m !== null, "Bun maps the file");
      assertEqual(m.length, bytes.length, "mapped length");
      assertEqual([...m.subarray(4090)], [...bytes.subarray(4090)], "mapped tail");
    } else {
      assertEqual(m, null, "no mapping without a finalizer");
    }
  } finally {
    closeSync(fd);
  }
  // the public loader works either way (mapped or read)
  loom.io.save_file({ w: { dtype: "float32", shape: [3], data: new Float32Array([1, -2, 0.5]) } }, join(dir, "w.safetensors"));
  assertClose(loom.io.load_file(join(dir, "w.safetensors")).tensors.get("w")!.data as Float32Array, [1, -2, 0.5]);
});

const lapack = loadLapack();
if ("error" in lapack) console.warn(`[skip] LAPACK under ${RUNNER}: ${lapack.error}`);
test(`${RUNNER}: svdvals through LAPACK (i64 m, n): diag(3, -4) has singular values [4, 3]`, () => {
  const S = loom.linalg.svdvals(loom.tensor([[3, 0], [0, -4]], { dtype: "float64" }));
  assertClose(S.dataSync() as Float64Array, [4, 3], 1e-12);
}, "error" in lapack);

test(`${RUNNER}: tests/weights/tiny.gguf loads (mapped under Bun, read under Deno)`, async () => {
  const f = await load_gguf(join(moduleDir(import.meta), "../weights/tiny.gguf"));
  assertEqual(f.version, 3, "version");
  assertEqual(f.metadata["general.name"], "loom tiny", "general.name");
  assertEqual(f.tensors[0]!.name, "blk.0.attn_q.weight", "first tensor");
  assertEqual(f.tensors[0]!.shape, [4, 64], "first tensor's shape");
});

test(`${RUNNER}: Open MPI loads through the runtime FFI (handles are addresses), or says why not`, () => {
  const lib = loadMpi();
  if ("error" in lib) {
    console.warn(`[skip] Open MPI under ${RUNNER}: ${lib.error}`);
    return;
  }
  for (const [name, p] of Object.entries(lib.handles)) assert(typeof p === "number" && p > 0, `${name} is an address`);
  assertEqual(typeof lib.sym.MPI_Test, "function", "MPI_Test bound");
}, !onLinux);
