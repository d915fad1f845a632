/**
 * The backends every parameterized suite runs on: js always, native when it builds. A backend
 * that is unavailable is skipped with a printed reason, and is a failure when CI sets
 * LOOM_REQUIRE_NATIVE=1. `useBackend(name)` makes "cpu" run on it for the enclosing describe.
 */
import { afterAll, beforeAll } from "bun:test";
import { nativeBackend, nativeUnavailableReason } from "../src/backends/native/backend.ts";
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
