/**
 * The FFI interface over `bun:ffi`. Loaded only under Bun (src/runtime/ffi.ts requires it through
 * a computed specifier), so no other runtime or bundle resolves `bun:ffi`. bun:ffi already speaks
 * the interface's conventions (numbers for pointers, typed arrays for `ptr` arguments, null for
 * NULL), so the bound functions are bun:ffi's own: no wrapper on the native backend's hot path.
 */
import { CString, dlopen, ptr, toArrayBuffer, type Pointer } from "bun:ffi";
import type { Ffi, FfiLibrary, FfiSymbol } from "./ffi.ts";

/** The Bun implementation of `Ffi`. */
export function bunFfi(): Ffi {
  return {
    name: "bun:ffi",
    dlopen<S extends Record<string, FfiSymbol>>(path: string, symbols: S): FfiLibrary<S> {
      const spec = Object.fromEntries(Object.entries(symbols).map(([k, v]) => [k, { args: [...v.args], returns: v.returns }]));
      const lib = dlopen(path, spec);
      return {
        symbols: lib.symbols as unknown as FfiLibrary<S>["symbols"],
        address: (name) => Number((lib.symbols[name] as unknown as { ptr: number }).ptr),
        close: () => lib.close(),
      };
    },
    ptr: ptr as unknown as Ffi["ptr"], // bun:ffi's own: no wrapper on the command-buffer hot path
    cstring: (p) => (p ? new CString(p as Pointer).toString() : ""),
    adopt: (p, bytes, freeFn) =>
      // bun:ffi's undocumented 5-argument form: the deallocator gets (bytes, context) when the buffer is collected
      (toArrayBuffer as unknown as (p: Pointer, off: number, len: number, ctx: Pointer, fn: Pointer) => ArrayBuffer)(p as Pointer, 0, bytes, p as Pointer, freeFn as Pointer),
  };
}
