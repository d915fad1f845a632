/**
 * The runtime interface: what Loom needs from Bun, Deno or a browser, one concept per file.
 */
export { HAS_FILES, RUNTIME, runtimeDescription, type RuntimeName } from "./detect.ts";
export { ffi, ffiUnavailableReason, type Ffi, type FfiLibrary, type FfiSymbol, type FfiType } from "./ffi.ts";
export { spawnSync, type SpawnResult } from "./process.ts";
export { CAN_WAIT_SYNC, gc, sleepSync, waitSync } from "./sync.ts";
export { mmapFile, moduleDir } from "./files.ts";
