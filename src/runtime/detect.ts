/**
 * Which JavaScript runtime Loom runs on, decided once at load time. Everything that differs between
 * Bun, Deno and a browser tab (FFI, processes, mmap, garbage collection, blocking on a promise) is
 * reached through src/runtime/ and chooses its implementation from this value, so the rest of the
 * source never names `Bun` or `Deno` and a browser bundle never sees `bun:ffi`.
 */

/** "bun" and "deno" run the native backend through FFI; "node" has no FFI; "browser" has neither files nor FFI. */
export type RuntimeName = "bun" | "deno" | "node" | "browser";

type Globals = { Bun?: unknown; Deno?: { version?: { deno?: string } }; process?: { versions?: { node?: string } }; window?: unknown; document?: unknown };
const g = globalThis as unknown as Globals;

function detect(): RuntimeName {
  if (typeof g.Bun !== "undefined") return "bun";
  if (typeof g.Deno !== "undefined" && g.Deno?.version?.deno) return "deno";
  // a browser (or a worker in one): no Deno, no Node process (a bundle may define a stub `process`)
  if (typeof g.document !== "undefined" || typeof (globalThis as { importScripts?: unknown }).importScripts === "function") return "browser";
  if (g.process?.versions?.node) return "node";
  return "browser";
}

/** The runtime Loom is running on. */
export const RUNTIME: RuntimeName = detect();

/** Whether files, processes and environment variables exist (every runtime but a browser). */
export const HAS_FILES = RUNTIME !== "browser";

/** A one-line description, e.g. "deno 2.9.6" or "bun 1.4.4". */
export function runtimeDescription(): string {
  if (RUNTIME === "bun") return `bun ${(g.Bun as { version: string }).version}`;
  if (RUNTIME === "deno") return `deno ${g.Deno!.version!.deno}`;
  if (RUNTIME === "node") return `node ${g.process!.versions!.node}`;
  return typeof navigator !== "undefined" ? `browser (${navigator.userAgent})` : "browser";
}
