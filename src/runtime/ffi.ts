/**
 * The foreign-function interface the native backend uses: one small surface over `bun:ffi`
 * (ffi_bun.ts) and `Deno.dlopen` (ffi_deno.ts), chosen at run time. The Bun module is `require`d
 * under Bun only, through a computed specifier, so Deno and a browser bundle never see `bun:ffi`;
 * the Deno one only touches the `Deno` global when called.
 *
 * Pointers are plain numbers (addresses below 2^53, exact as doubles: the native command buffers
 * store them in Float64Arrays); a NULL result reads as `null`, as in bun:ffi.
 */
import { RUNTIME } from "./detect.ts";
import { denoFfi } from "./ffi_deno.ts";

/**
 * C types of a symbol's arguments and result (bun:ffi's names). `ptr` arguments also accept typed
 * arrays. `i64` / `u64` (int64_t, uint64_t, size_t) are plain numbers both ways: exact below 2^53,
 * which covers every length and offset Loom passes; a result above 2^53 is rounded.
 */
export type FfiType = "void" | "i32" | "u32" | "i64" | "u64" | "f64" | "f32" | "ptr";

/** One C function: its argument types and result type. */
export interface FfiSymbol {
  readonly args: readonly FfiType[];
  readonly returns: FfiType;
}

/** An address, a typed array (its first element's address), or NULL. */
export type PointerArg = number | ArrayBufferView | null;

type ArgOf<T> = T extends "ptr" ? PointerArg : number;
type ResultOf<T> = T extends "void" ? void : T extends "ptr" ? number | null : number;
type ArgsOf<A> = { -readonly [I in keyof A]: ArgOf<A[I]> };

/** The callable functions of a library opened with the symbol table `S`. */
export type FfiFunctions<S extends Record<string, FfiSymbol>> = {
  [K in keyof S]: (...args: ArgsOf<S[K]["args"]> & unknown[]) => ResultOf<S[K]["returns"]>;
};

/** A shared library opened with a symbol table. */
export interface FfiLibrary<S extends Record<string, FfiSymbol>> {
  readonly symbols: FfiFunctions<S>;
  /** The address of symbol `name` (for C code that calls it through a function pointer). */
  address(name: keyof S & string): number;
  close(): void;
}

/** What the native backend needs from the runtime's FFI. */
export interface Ffi {
  /** "bun:ffi" or "Deno.dlopen". */
  readonly name: string;
  /**
   * Open the shared library at `path` and bind `symbols`.
   * @throws Error from the runtime when the file or a symbol cannot be loaded
   */
  dlopen<S extends Record<string, FfiSymbol>>(path: string, symbols: S): FfiLibrary<S>;
  /** Address of a typed array's first element (stable: neither runtime moves a buffer it gave out). */
  ptr(a: ArrayBufferView): number;
  /** The NUL-terminated UTF-8 string at `p` ("" for NULL). */
  cstring(p: number | null): string;
  /** The pointer-sized value (a `void *`, `size_t`) stored at address `p + offset`, as a number. */
  readPointer(p: number, offset?: number): number;
  /** Whether `adopt` can hand native memory to the collector (Bun); false under Deno. */
  readonly adopts: boolean;
  /**
   * An ArrayBuffer over `bytes` of native memory at `p` that calls the C function
   * `free(p, context)` at `freeFn` when the collector frees it (`context` defaults to `p`); null
   * where the runtime cannot attach a deallocator (Deno: check `adopts` first), so the caller
   * allocates a plain array or reads a file instead.
   */
  adopt(p: number, bytes: number, freeFn: number, context?: number): ArrayBuffer | null;
}

let loaded: Ffi | null | undefined;
let why = "";

/** The runtime's FFI, or null (see `ffiUnavailableReason`) under Node or in a browser. */
export function ffi(): Ffi | null {
  if (loaded !== undefined) return loaded;
  try {
    if (RUNTIME === "bun") {
      // a computed specifier: bundlers (and Deno) never follow it to bun:ffi
      const spec = "./ffi_" + "bun.ts";
      loaded = (import.meta.require(spec) as { bunFfi: () => Ffi }).bunFfi();
    } else if (RUNTIME === "deno") {
      loaded = denoFfi();
    } else {
      why = RUNTIME === "browser" ? "a browser has no FFI (the native backend needs Bun or Deno)" : "Node has no built-in FFI (the native backend needs Bun or Deno)";
      loaded = null;
    }
  } catch (e) {
    why = `the ${RUNTIME} FFI could not be loaded: ${(e as Error).message}`;
    loaded = null;
  }
  return loaded;
}

/** Why `ffi()` is null ("" when it is not). */
export function ffiUnavailableReason(): string {
  ffi();
  return why;
}
