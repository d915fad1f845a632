/**
 * The FFI interface over `Deno.dlopen` (Deno ≥ 1.38 / 2.x, `--allow-ffi`). Only the `Deno` global is
 * used, and only when called, so this module is inert in every other runtime.
 *
 * Conventions match bun:ffi (src/runtime/ffi.ts): `ptr` arguments and results are declared as
 * `usize` (Deno passes numbers, returns number | bigint) and converted to plain numbers; a typed
 * array passed for a `ptr` argument becomes its address. Symbol addresses come from libc's dlsym,
 * since Deno's bound functions do not expose theirs.
 * Source: https://docs.deno.com/api/deno/~/Deno.dlopen, Deno.UnsafePointer, Deno.UnsafePointerView.
 */
import type { Ffi, FfiLibrary, FfiSymbol, FfiType, PointerArg } from "./ffi.ts";

/** The part of Deno's FFI API used here (declared locally: Loom type-checks against Bun's types). */
interface DenoPointerStatics {
  of(a: ArrayBufferView): object | null;
  value(p: object | null): bigint | number;
  create(v: bigint): object | null;
}
interface DenoApi {
  dlopen(path: string, symbols: Record<string, { parameters: string[]; result: string }>): { symbols: Record<string, (...a: unknown[]) => unknown>; close(): void };
  UnsafePointer: DenoPointerStatics;
  UnsafePointerView: { getCString(p: object, offset?: number): string; new (p: object): { getBigUint64(offset?: number): bigint } };
  build: { os: string };
}

const DENO_TYPE: Record<FfiType, string> = { void: "void", i32: "i32", u32: "u32", i64: "i64", u64: "u64", f64: "f64", f32: "f32", ptr: "usize" };

/** The Deno implementation of `Ffi` (throws when the `Deno` global is missing). */
export function denoFfi(): Ffi {
  const D = (globalThis as unknown as { Deno?: DenoApi }).Deno;
  if (!D || typeof D.dlopen !== "function") throw new Error("Deno.dlopen is not available");

  const ptrOf = (a: ArrayBufferView): number => {
    // V8 keeps typed arrays of up to 64 bytes inside the JS heap, where the collector may move
    // them; reading `.buffer` moves such an array to a fixed off-heap store first.
    void a.buffer;
    return Number(D.UnsafePointer.value(D.UnsafePointer.of(a)));
  };
  const toAddr = (v: PointerArg): number => (v === null || v === undefined ? 0 : typeof v === "number" ? v : ptrOf(v));

  let libc: { dlopen(path: string, mode: number): number | null; dlsym(h: number, name: string): number | null } | null = null;
  const dl = () => {
    if (libc) return libc;
    const enc = new TextEncoder();
    const cstr = (s: string) => enc.encode(`${s}\0`);
    let l: ReturnType<DenoApi["dlopen"]> | null = null;
    for (const name of ["libc.so.6", "libdl.so.2", "libSystem.B.dylib"]) {
      try {
        l = D.dlopen(name, { dlopen: { parameters: ["buffer", "i32"], result: "usize" }, dlsym: { parameters: ["usize", "buffer"], result: "usize" } });
        break;
      } catch {
        // try the next name
      }
    }
    if (!l) throw new Error("no libc with dlopen/dlsym found");
    const s = l.symbols;
    libc = {
      dlopen: (path, mode) => Number(s.dlopen!(cstr(path), mode)) || null,
      dlsym: (h, name) => Number(s.dlsym!(h, cstr(name))) || null,
    };
    return libc;
  };

  return {
    name: "Deno.dlopen",
    dlopen<S extends Record<string, FfiSymbol>>(path: string, symbols: S): FfiLibrary<S> {
      const spec: Record<string, { parameters: string[]; result: string }> = {};
      for (const [k, v] of Object.entries(symbols)) spec[k] = { parameters: v.args.map((t) => DENO_TYPE[t]), result: DENO_TYPE[v.returns] };
      const lib = D.dlopen(path, spec);
      const bound: Record<string, (...a: unknown[]) => unknown> = {};
      for (const [k, v] of Object.entries(symbols)) {
        const f = lib.symbols[k]!;
        const ptrArgs = v.args.map((t) => t === "ptr");
        const anyPtr = ptrArgs.some(Boolean);
        // usize / i64 / u64 results come back as number | bigint: numbers (NULL as null) here
        const ret = v.returns === "ptr" ? (r: unknown) => Number(r) || null : v.returns === "i64" || v.returns === "u64" ? (r: unknown) => Number(r) : null;
        bound[k] = (...a: unknown[]) => {
          if (anyPtr) for (let i = 0; i < a.length; i++) if (ptrArgs[i]) a[i] = toAddr(a[i] as PointerArg);
          const r = f(...a);
          return ret ? ret(r) : r;
        };
      }
      let handle: number | null = null;
      return {
        symbols: bound as unknown as FfiLibrary<S>["symbols"],
        address: (name) => {
          // RTLD_NOW | RTLD_NOLOAD (Linux 2|4): the library Deno already opened, not a second copy
          handle ??= dl().dlopen(path, 2 | 4) ?? dl().dlopen(path, 2);
          const a = handle ? dl().dlsym(handle, name) : null;
          if (!a) throw new Error(`symbol ${name} not found in ${path}`);
          return a;
        },
        close: () => lib.close(),
      };
    },
    ptr: ptrOf,
    cstring: (p) => (p ? D.UnsafePointerView.getCString(D.UnsafePointer.create(BigInt(p))!) : ""),
    readPointer: (p, offset = 0) => Number(new D.UnsafePointerView(D.UnsafePointer.create(BigInt(p))!).getBigUint64(offset)),
    // V8 offers no ArrayBuffer over foreign memory with a finalizer (Deno.UnsafePointerView.getArrayBuffer has none)
    adopts: false,
    adopt: () => null,
  };
}
