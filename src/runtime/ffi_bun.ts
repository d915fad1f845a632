/**
 * The FFI interface over `bun:ffi`. Loaded only under Bun (src/runtime/ffi.ts requires it through
 * a computed specifier), so no other runtime or bundle resolves `bun:ffi`. bun:ffi already speaks
 * the interface's conventions (numbers for pointers, typed arrays for `ptr` arguments, null for
 * NULL), so the bound functions are bun:ffi's own: no wrapper on the native backend's hot path.
 */
import { CString, dlopen, ptr, read, toArrayBuffer, type Pointer } from "bun:ffi";
import type { Ffi, FfiLibrary, FfiSymbol } from "./ffi.ts";

/** The Bun implementation of `Ffi`. */
export function bunFfi(): Ffi {
  return {
    name: "bun:ffi",
    dlopen<S extends Record<string, FfiSymbol>>(path: string, symbols: S): FfiLibrary<S> {
      const spec = Object.fromEntries(Object.entries(symbols).map(([k, v]) => [k, { args: [...v.args], returns: v.returns }]));
      const lib = dlopen(path, spec);
      // bun:ffi returns i64 / u64 results as bigint; the interface promises numbers, so those few
      // symbols (none on a hot path) are wrapped; every other function is bun:ffi's own
      const bound: Record<string, unknown> = { ...lib.symbols };
      for (const [k, v] of Object.entries(symbols)) {
        if (v.returns !== "i64" && v.returns !== "u64") continue;
        const f = lib.symbols[k] as unknown as (...a: unknown[]) => bigint | number;
        bound[k] = (...a: unknown[]) => Number(f(...a));
      }
      return {
        symbols: bound as unknown as FfiLibrary<S>["symbols"],
        address: (name) => Number((lib.symbols[name] as unknown as { ptr: number }).ptr),
        close: () => lib.close(),
      };
    },
    ptr: ptr as unknown as Ffi["ptr"], // bun:ffi's own: no wrapper on the command-buffer hot path
    cstring: (p) => (p ? new CString(p as Pointer).toString() : ""),
    readPointer: (p, offset = 0) => Number(read.ptr(p as Pointer, offset)),
    adopts: true,
    adopt: (p, bytes, freeFn, context = p) =>
      // bun:ffi's undocumented 5-argument form: the deallocator gets (bytes, context) when the buffer is collected
      (toArrayBuffer as unknown as (p: Pointer, off: number, len: number, ctx: Pointer, fn: Pointer) => ArrayBuffer)(p as Pointer, 0, bytes, context as Pointer, freeFn as Pointer),
  };
}
