/**
 * Loading the native shim through the runtime's FFI (bun:ffi or Deno.dlopen, src/runtime/ffi.ts):
 * build (or reuse) the library, dlopen it, start its pool,
 * and derive the opcode of every op from the names the shim exports (one table, in C).
 */
import { ffi, ffiUnavailableReason, type FfiLibrary } from "../../runtime/ffi.ts";
import { buildNative } from "./build.ts";

const SYMBOLS = {
  loom_abi_version: { args: [], returns: "i32" },
  loom_op_names: { args: [], returns: "ptr" },
  loom_init: { args: ["i32"], returns: "i32" },
  loom_exec: { args: ["ptr", "f64"], returns: "i32" },
  loom_error: { args: [], returns: "ptr" },
  loom_submit: { args: ["ptr", "f64", "ptr", "i32"], returns: "ptr" },
  loom_done: { args: ["ptr"], returns: "i32" },
  loom_wait: { args: ["ptr"], returns: "i32" },
  loom_cmd_error: { args: ["ptr"], returns: "ptr" },
  loom_release: { args: ["ptr"], returns: "void" },
  loom_counters: { args: ["ptr"], returns: "void" },
  loom_profile_buffer: { args: ["ptr", "f64"], returns: "void" },
  loom_blas_available: { args: [], returns: "i32" },
  loom_blas_name: { args: [], returns: "ptr" },
  loom_alloc: { args: ["f64"], returns: "ptr" },
  loom_free_fn: { args: [], returns: "ptr" },
  loom_pool_stats: { args: ["ptr"], returns: "void" },
  loom_pool_release: { args: [], returns: "void" },
  // native/kernels/nccl_init.c: ncclCommInitRank through a function pointer (its id is by value)
  loom_nccl_comm_init_rank: { args: ["ptr", "ptr", "i32", "ptr", "i32"], returns: "i32" },
  loom_nccl_fake_init_rank_fn: { args: [], returns: "ptr" },
} as const;

export type NativeSymbols = FfiLibrary<typeof SYMBOLS>["symbols"];

export interface NativeLib {
  readonly sym: NativeSymbols;
  readonly path: string;
  /** Opcode of each op name the shim implements (elementwise ops, kernels, "fused"). */
  readonly opcodes: ReadonlyMap<string, number>;
  /** Number of opcodes (the shim's OP_END), kernels or not. */
  readonly opEnd: number;
  readonly threads: number;
}

export const ABI_VERSION = 2;

/** Read a NUL-terminated C string returned by the shim. */
export function cstr(p: number | null): string {
  return ffi()!.cstring(p);
}

let cached: NativeLib | { error: string } | undefined;

/**
 * The loaded library, or the reason it is unavailable (built on first call; cached).
 * `LOOM_NATIVE_THREADS` sets the pool size (default: all online CPUs).
 */
export function loadNative(): NativeLib | { error: string } {
  if (cached) return cached;
  const f = ffi();
  if (!f) return (cached = { error: ffiUnavailableReason() });
  const b = buildNative({ quiet: true });
  if (!b.ok) return (cached = { error: b.reason });
  try {
    const lib = f.dlopen(b.path, SYMBOLS);
    const sym = lib.symbols;
    if (sym.loom_abi_version() !== ABI_VERSION) return (cached = { error: `native ABI ${sym.loom_abi_version()} != ${ABI_VERSION}` });
    // one name per opcode ("" where the op has no native kernel), then the trailing comma's ""
    const names = cstr(sym.loom_op_names()).split(",").slice(0, -1);
    const threads = sym.loom_init(Number(process.env.LOOM_NATIVE_THREADS ?? 0));
    const opcodes = new Map<string, number>();
    names.forEach((n, i) => { if (n) opcodes.set(n, i); });
    return (cached = { sym, path: b.path, opcodes, opEnd: names.length, threads });
  } catch (e) {
    return (cached = { error: `loading ${b.path} failed: ${(e as Error).message}` });
  }
}
