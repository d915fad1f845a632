/**
 * A runtime-neutral test harness for the Deno subset: `Deno.test` under Deno (`deno task test`),
 * `bun:test`'s `test` under `bun test`, so both runtimes run the same assertions. Plain
 * asserts (no jsr:@std/assert: CI reaches only the npm registry).
 */
type Fn = () => void | Promise<void>;
interface DenoTest { test(o: { name: string; fn: Fn; sanitizeOps: boolean; sanitizeResources: boolean; ignore?: boolean }): void }
const D = (globalThis as unknown as { Deno?: DenoTest & { env: { get(k: string): string | undefined } } }).Deno;

/** "deno" or "bun": the runtime running these tests. */
export const RUNNER: "deno" | "bun" = D ? "deno" : "bun";

/** Register a test (`ignore` skips it; the caller prints why). */
export function test(name: string, fn: Fn, ignore = false): void {
  if (D) D.test({ name, fn, sanitizeOps: false, sanitizeResources: false, ignore });
  else {
    // computed specifier: Deno never resolves bun:test
    const t = (import.meta.require("bun" + ":test") as { test: ((n: string, f: Fn, timeoutMs?: number) => void) & { skip(n: string, f: Fn): void } }).test;
    if (ignore) t.skip(name, fn);
    else t(name, fn, 120_000); // software WebGPU compiles its shaders slowly
  }
}

/** An environment variable (works under both runtimes; `--allow-env` under Deno). */
export function env(k: string): string | undefined {
  return D ? D.env.get(k) : process.env[k];
}

export function assert(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Error(`assertion failed: ${msg}`);
}

export function assertEqual<T>(got: T, want: T, what = "value"): void {
  const g = JSON.stringify(got), w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}: got ${g}, want ${w}`);
}

/** |got − want| ≤ atol + rtol·|want| elementwise. */
export function assertClose(got: ArrayLike<number>, want: ArrayLike<number>, atol = 1e-6, rtol = 1e-5, what = "values"): void {
  assertEqual(got.length, want.length, `${what} length`);
  for (let i = 0; i < want.length; i++) {
    if (!(Math.abs(got[i]! - want[i]!) <= atol + rtol * Math.abs(want[i]!))) throw new Error(`${what}[${i}]: got ${got[i]}, want ${want[i]} (atol ${atol}, rtol ${rtol})`);
  }
}

/** `fn` throws an instance of `E` whose message contains `text`. */
export function assertThrows(fn: () => unknown, E: new (...a: never[]) => Error, text = ""): void {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof E)) throw new Error(`expected ${E.name}, got ${(e as Error)?.constructor?.name}: ${(e as Error)?.message}`);
    if (!(e as Error).message.includes(text)) throw new Error(`expected a message containing ${JSON.stringify(text)}, got ${JSON.stringify((e as Error).message)}`);
    return;
  }
  throw new Error(`expected ${E.name}, nothing was thrown`);
}
