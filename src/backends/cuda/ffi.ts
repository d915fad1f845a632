/**
 * Loading Loom's CUDA library (native/cuda/) through the runtime's FFI (src/runtime/ffi.ts):
 * build (or reuse) it, dlopen it, open device 0, and derive each op's opcode from the names the
 * library exports (the same generated table as the CPU shim). Every failure is a reason string:
 * no FFI, no nvcc and no cached build, no driver, no device.
 */
import { ffi, ffiUnavailableReason, type FfiLibrary } from "../../runtime/ffi.ts";
import { buildCuda } from "./build.ts";

const SYMBOLS = {
  loom_cuda_abi_version: { args: [], returns: "i32" },
  loom_cuda_op_names: { args: [], returns: "ptr" },
  loom_cuda_error: { args: [], returns: "ptr" },
  loom_cuda_device_count: { args: [], returns: "i32" },
  loom_cuda_init: { args: ["i32"], returns: "i32" },
  loom_cuda_device_name: { args: [], returns: "ptr" },
  loom_cuda_cublas: { args: [], returns: "i32" },
  loom_cuda_cublas_name: { args: [], returns: "ptr" },
  loom_cuda_mem_info: { args: ["ptr"], returns: "i32" },
  loom_cuda_malloc: { args: ["f64"], returns: "f64" },
  loom_cuda_free: { args: ["f64"], returns: "i32" },
  loom_cuda_upload: { args: ["f64", "ptr", "f64"], returns: "i32" },
  loom_cuda_download: { args: ["ptr", "f64", "f64"], returns: "i32" },
  loom_cuda_read_start: { args: ["f64", "f64"], returns: "ptr" },
  loom_cuda_read_done: { args: ["ptr"], returns: "i32" },
  loom_cuda_read_finish: { args: ["ptr", "ptr"], returns: "i32" },
  loom_cuda_submit: { args: ["ptr", "f64"], returns: "i32" },
  loom_cuda_sync: { args: [], returns: "i32" },
  loom_cuda_counters: { args: ["ptr"], returns: "void" },
} as const;

export type CudaSymbols = FfiLibrary<typeof SYMBOLS>["symbols"];

export const CUDA_ABI_VERSION = 1;
/** Leading words of loom_cuda_counters before the per-opcode counts. */
export const COUNTER_HEAD = 10;

export interface CudaLib {
  readonly sym: CudaSymbols;
  readonly path: string;
  /** Opcode of each op the library has a kernel for. */
  readonly opcodes: ReadonlyMap<string, number>;
  /** Number of opcodes (OP_END). */
  readonly opEnd: number;
  /** "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)". */
  readonly device: string;
  /** The cuBLAS soname loaded, or why none was. */
  readonly cublas: string;
  readonly hasCublas: boolean;
  /** The message of the library's last error. */
  lastError(): string;
  /** Address of a typed array's first element. */
  ptr(a: ArrayBufferView): number;
}

/** Parse loom_cuda_op_names: one name per opcode ("" where the op has no CUDA kernel), comma-terminated. */
export function parseOpNames(text: string): { opcodes: Map<string, number>; opEnd: number } {
  const names = text.split(",").slice(0, -1);
  const opcodes = new Map<string, number>();
  names.forEach((n, i) => { if (n) opcodes.set(n, i); });
  return { opcodes, opEnd: names.length };
}

let cached: CudaLib | { error: string } | undefined;

/**
 * The loaded library with device 0 open, or the reason it is unavailable (built on first call;
 * cached). `LOOM_CUDA_DEVICE` picks another device index.
 */
export function loadCuda(): CudaLib | { error: string } {
  if (cached) return cached;
  const f = ffi();
  if (!f) return (cached = { error: ffiUnavailableReason() });
  const b = buildCuda({ quiet: true });
  if (!b.ok) return (cached = { error: b.reason });
  let lib: FfiLibrary<typeof SYMBOLS>;
  try {
    lib = f.dlopen(b.path, SYMBOLS);
  } catch (e) {
    return (cached = { error: `loading ${b.path} failed: ${(e as Error).message}` });
  }
  const sym = lib.symbols;
  const error = () => f.cstring(sym.loom_cuda_error());
  if (sym.loom_cuda_abi_version() !== CUDA_ABI_VERSION) return (cached = { error: `CUDA library ABI ${sym.loom_cuda_abi_version()} != ${CUDA_ABI_VERSION}` });
  const n = sym.loom_cuda_device_count();
  if (n < 0) return (cached = { error: `no usable CUDA driver: ${error()}` });
  if (n === 0) return (cached = { error: "no CUDA device (cudaGetDeviceCount returned 0)" });
  if (sym.loom_cuda_init(Number(process.env.LOOM_CUDA_DEVICE ?? 0)) !== 0) return (cached = { error: `CUDA device init failed: ${error()}` });
  const { opcodes, opEnd } = parseOpNames(f.cstring(sym.loom_cuda_op_names()));
  return (cached = {
    sym, path: b.path, opcodes, opEnd, lastError: error, ptr: (a) => f.ptr(a),
    device: f.cstring(sym.loom_cuda_device_name()),
    cublas: f.cstring(sym.loom_cuda_cublas_name()),
    hasCublas: sym.loom_cuda_cublas() === 1,
  });
}
