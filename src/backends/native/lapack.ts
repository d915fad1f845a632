/**
 * LAPACK through the native shim: `loom_svd` (native/kernels/lapack.c) calls OpenBLAS's ?gesdd,
 * found in the library kernels/blas.c loaded. The shim is opened a second time here with these
 * symbols only (dlopen of a loaded library returns the same instance), so the op-table FFI in
 * ffi.ts stays as it is. Through the runtime's FFI (src/runtime/ffi.ts): Bun and Deno alike.
 */
import { ffi, type FfiFunctions } from "../../runtime/ffi.ts";
import { loadNative } from "./ffi.ts";

const SYMBOLS = {
  loom_lapack_available: { args: [], returns: "i32" },
  // (is_f64, m, n, a, job, s, u, vh) -> info
  loom_svd: { args: ["i32", "i64", "i64", "ptr", "i32", "ptr", "ptr", "ptr"], returns: "i32" },
} as const;

type LapackSymbols = FfiFunctions<typeof SYMBOLS>;
let cached: LapackSymbols | { error: string } | undefined;

/** The LAPACK entry points, or why there are none (no native build, no OpenBLAS, LOOM_BLAS=0). */
export function loadLapack(): LapackSymbols | { error: string } {
  if (cached) return cached;
  const lib = loadNative();
  if ("error" in lib) return (cached = { error: `the native library is unavailable (${lib.error})` });
  try {
    const f = ffi();
    if (f === null) return (cached = { error: "the runtime has no FFI" });
    const sym = f.dlopen(lib.path, SYMBOLS).symbols;
    if (!sym.loom_lapack_available()) return (cached = { error: "no LAPACK: OpenBLAS (libopenblas.so.0) was not loaded (is it installed? LOOM_BLAS=0?)" });
    return (cached = sym);
  } catch (e) {
    return (cached = { error: `loading LAPACK symbols from ${lib.path} failed: ${(e as Error).message}` });
  }
}

/** What the SVD of one matrix gives; U and Vh are empty for `job` "N". */
export interface SvdResult<A extends Float32Array | Float64Array> {
  readonly S: A;
  readonly U: A;
  readonly Vh: A;
  /** LAPACK's info: 0 ok, > 0 no convergence. */
  readonly info: number;
}

/**
 * SVD of one row-major matrix [m, n] with LAPACK ?gesdd (values only "N", reduced "S", full "A").
 * @param a - m·n values, row-major; not modified (LAPACK works on a copy)
 * @returns S [k] descending, U [m, k or m], Vh [k or n, n], all row-major; k = min(m, n)
 * @throws Error when LAPACK is unavailable or an argument is rejected (callers wrap it in a typed error)
 */
export function gesdd<A extends Float32Array | Float64Array>(a: A, m: number, n: number, job: "N" | "S" | "A"): SvdResult<A> {
  const lp = loadLapack();
  if ("error" in lp) throw new Error(lp.error);
  const Ctor = (a instanceof Float64Array ? Float64Array : Float32Array) as unknown as new (n: number) => A;
  const k = Math.min(m, n);
  const S = new Ctor(Math.max(k, 1));
  const U = new Ctor(job === "N" ? 1 : Math.max(m * (job === "A" ? m : k), 1));
  const Vh = new Ctor(job === "N" ? 1 : Math.max((job === "A" ? n : k) * n, 1));
  const work = new Ctor(Math.max(a.length, 1));
  work.set(a);
  const info = lp.loom_svd(a instanceof Float64Array ? 1 : 0, m, n, work, job === "N" ? 0 : job === "S" ? 1 : 2, S, U, Vh);
  if (info === -1000) throw new Error("no LAPACK loaded");
  if (info === -1001) throw new Error("out of memory for the LAPACK workspace");
  if (info === -1002) throw new Error(`matrix [${m}, ${n}] exceeds 32-bit LAPACK indexing`);
  if (info < 0) throw new Error(`?gesdd rejected argument ${-info}`);
  return {
    S: S.subarray(0, k) as A,
    U: (job === "N" ? U.subarray(0, 0) : U.subarray(0, m * (job === "A" ? m : k))) as A,
    Vh: (job === "N" ? Vh.subarray(0, 0) : Vh.subarray(0, (job === "A" ? n : k) * n)) as A,
    info,
  };
}
