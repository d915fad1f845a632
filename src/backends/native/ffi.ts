/**
 * Loading the native shim with bun:ffi: build (or reuse) the library, dlopen it, start its pool,
 * and derive the opcode of every op from the names the shim exports (one table, in C).
 */
import { CString, dlopen, FFIType, type Pointer } from "bun:ffi";
import { buildNative } from "./build.ts";

const SYMBOLS = {
  loom_abi_version: { args: [], returns: FFIType.i32 },
  loom_op_names: { args: [], returns: FFIType.ptr },
  loom_init: { args: [FFIType.i32], returns: FFIType.i32 },
  loom_exec: { args: [FFIType.ptr, FFIType.f64], returns: FFIType.i32 },
  loom_error: { args: [], returns: FFIType.ptr },
  loom_submit: { args: [FFIType.ptr, FFIType.f64, FFIType.ptr, FFIType.i32], returns: FFIType.ptr },
  loom_done: { args: [FFIType.ptr], returns: FFIType.i32 },
  loom_wait: { args: [FFIType.ptr], returns: FFIType.i32 },
  loom_cmd_error: { args: [FFIType.ptr], returns: FFIType.ptr },
  loom_release: { args: [FFIType.ptr], returns: FFIType.void },
  loom_counters: { args: [FFIType.ptr], returns: FFIType.void },
  loom_profile_buffer: { args: [FFIType.ptr, FFIType.f64], returns: FFIType.void },
  loom_blas_available: { args: [], returns: FFIType.i32 },
  loom_blas_name: { args: [], returns: FFIType.ptr },
  loom_alloc: { args: [FFIType.f64], returns: FFIType.ptr },
  loom_free_fn: { args: [], returns: FFIType.ptr },
  loom_pool_stats: { args: [FFIType.ptr], returns: FFIType.void },
} as const;

export type NativeSymbols = ReturnType<typeof dlopen<typeof SYMBOLS>>["symbols"];

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
export function cstr(p: Pointer | bigint | null): string {
  return p ? new CString(p as Pointer).toString() : "";
}

let cached: NativeLib | { error: string } | undefined;

/**
 * The loaded library, or the reason it is unavailable (built on first call; cached).
 * `LOOM_NATIVE_THREADS` sets the pool size (default: all online CPUs).
 */
export function loadNative(): NativeLib | { error: string } {
  if (cached) return cached;
  const b = buildNative({ quiet: true });
  if (!b.ok) return (cached = { error: b.reason });
  try {
    const lib = dlopen(b.path, SYMBOLS);
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
