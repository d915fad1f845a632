/**
 * The backends every parameterized suite runs on: js always, native when it builds. A backend
 * that is unavailable is skipped with a printed reason, and is a failure when CI sets
 * LOOM_REQUIRE_NATIVE=1. `useBackend(name)` makes "cpu" run on it for the enclosing describe.
 */
import { afterAll, beforeAll } from "bun:test";
import { nativeBackend, nativeUnavailableReason } from "../src/backends/native/backend.ts";
import { init_webgpu } from "../src/backends/webgpu/index.ts";
import { set_default_backend } from "../src/lazy/device.ts";

export type BackendName = "js" | "native";

function available(): BackendName[] {
  if (nativeBackend()) return ["js", "native"];
  const why = nativeUnavailableReason();
  if (process.env.LOOM_REQUIRE_NATIVE === "1") throw new Error(`LOOM_REQUIRE_NATIVE=1 but the native backend is unavailable: ${why}`);
  console.warn(`[skip] native backend: ${why}`);
  return ["js"];
}

export const BACKENDS: readonly BackendName[] = available();

/** Run the enclosing describe's tests with "cpu" on `name`, restoring the default afterwards. */
export function useBackend(name: BackendName): void {
  let prev = "";
  beforeAll(() => { prev = set_default_backend(name); });
  afterAll(() => { set_default_backend(prev as BackendName); });
}

/**
 * Whether suites also run on the "webgpu" device (bun-webgpu with an adapter: a GPU, or lavapipe
 * on the CPU). Unavailable: skipped with a printed reason, a failure when LOOM_REQUIRE_WEBGPU=1.
 * On webgpu, float64 inputs run as float32 (WGSL has no f64) and are compared with the js
 * reference within float32 tolerances.
 */
export const WEBGPU: boolean = await (async () => {
  const s = await init_webgpu();
  if (s.available) return true;
  if (process.env.LOOM_REQUIRE_WEBGPU === "1") throw new Error(`LOOM_REQUIRE_WEBGPU=1 but the webgpu device is unavailable: ${s.reason}`);
  console.warn(`[skip] webgpu device: ${s.reason}`);
  return false;
})();
