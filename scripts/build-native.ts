/**
 * Build the native backend now (npm's postinstall runs this; first use builds it too).
 * Never fails the install: without a C compiler Loom runs on its js backend and says so.
 *   bun scripts/build-native.ts
 */
import { buildNative } from "../src/backends/native/build.ts";

const r = buildNative();
if (r.ok) console.log(`[loom] native backend ${r.cached ? "up to date" : "built"}: ${r.path}`);
else console.warn(`[loom] native backend not built: ${r.reason}`);
