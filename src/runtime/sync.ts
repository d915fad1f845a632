/**
 * Blocking the JavaScript thread, where the runtime allows it: a full garbage collection, a short
 * sleep, and reading a promise that has already settled. The webgpu backend uses these to open its
 * device and read results synchronously under Bun (`Bun.peek`); Deno and browsers can only await,
 * so there `waitSync` throws and callers use the async path (`await loom.init_webgpu()`,
 * `await t.data()`).
 */
import { RUNTIME } from "./detect.ts";
import { LoomValueError } from "../tensor/errors.ts";

/**
 * Run a full garbage collection when the runtime offers one (Bun always; Deno and Node with
 * `--v8-flags=--expose-gc` / `--expose-gc`). Returns whether one ran.
 */
export function gc(): boolean {
  if (RUNTIME === "bun") {
    Bun.gc(true);
    return true;
  }
  const f = (globalThis as { gc?: () => void }).gc;
  if (typeof f !== "function") return false;
  f();
  return true;
}

const sleeper = typeof SharedArrayBuffer !== "undefined" ? new Int32Array(new SharedArrayBuffer(4)) : null;
/** Sleep `ms` milliseconds, blocking (Bun.sleepSync; Atomics.wait elsewhere; no-op where neither may block). */
export function sleepSync(ms: number): void {
  if (RUNTIME === "bun") return Bun.sleepSync(ms);
  try {
    if (sleeper) Atomics.wait(sleeper, 0, 0, ms);
  } catch {
    // a browser's main thread may not block
  }
}

/** Whether `waitSync` can block on a promise here (Bun only). */
export const CAN_WAIT_SYNC = RUNTIME === "bun";

/**
 * Call `pump` until `p` settles, then return its value or throw its rejection (Bun: `Bun.peek`).
 * Spins briefly, then sleeps in 20 µs steps so worker threads (a software GPU) get the CPU.
 * @throws LoomValueError on Deno and in browsers, which cannot read a promise synchronously
 */
export function waitSync<T>(p: Promise<T>, pump: () => void, what = "a GPU result"): T {
  if (RUNTIME !== "bun") {
    p.catch(() => {});
    throw new LoomValueError(`waiting synchronously for ${what} needs Bun; on ${RUNTIME} use the async API (await loom.init_webgpu(), await tensor.data())`);
  }
  let spins = 0;
  while (Bun.peek.status(p) === "pending") {
    pump();
    if (++spins > 64) Bun.sleepSync(0.02);
  }
  const v = Bun.peek(p);
  if (Bun.peek.status(p) === "rejected") {
    p.catch(() => {}); // handled here: keep it from being reported as unhandled
    throw v;
  }
  return v as T;
}
