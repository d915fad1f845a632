/**
 * File access that differs between runtimes: memory-mapping a file (Bun.mmap; Deno and browsers
 * have none, and callers read the file instead) and the folder of a source module (for files
 * shipped beside the sources, such as native/).
 */
import { RUNTIME } from "./detect.ts";

/**
 * Map the file at `path` read-only-to-disk (MAP_PRIVATE: writes to the array never reach the
 * file), or null where the runtime cannot map files or the mapping fails (then read it).
 */
export function mmapFile(path: string): Uint8Array | null {
  if (RUNTIME !== "bun") return null;
  try {
    return Bun.mmap(path, { shared: false });
  } catch {
    return null; // e.g. a filesystem without mmap support
  }
}

/**
 * The folder of the module whose `import.meta` is passed (Bun's `import.meta.dir`, Deno's and
 * Node's `import.meta.dirname`); "" in a browser bundle, which has no file system.
 */
export function moduleDir(meta: ImportMeta): string {
  const m = meta as ImportMeta & { dir?: string; dirname?: string };
  return m.dir ?? m.dirname ?? "";
}
