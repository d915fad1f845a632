/**
 * A minimal `process` for a browser tab, installed before any other Loom module runs (src/index.ts
 * imports this first). Loom reads `process.env.LOOM_*` settings and `process.pid` in many places;
 * in a browser these read as unset, exactly as under Bun with no variable set. Listeners
 * (`process.on("exit", ...)`, registered at import by loom.distributed) are accepted and never
 * called: a tab does not exit. Bun, Deno 2 and Node have a real `process`, which is left alone.
 */
const g = globalThis as unknown as { process?: unknown };
if (typeof g.process === "undefined") {
  const stub: Record<string, unknown> = {
    env: {} as Record<string, string | undefined>,
    pid: 0,
    platform: "browser",
    arch: "",
    argv: [] as string[],
    versions: {} as Record<string, string>,
    cwd: () => "/",
    on: () => stub,
    once: () => stub,
    off: () => stub,
  };
  g.process = stub;
}
export {};
