/**
 * Shared by the native tests: the backend, or a skip with the printed reason (a failure when
 * LOOM_REQUIRE_NATIVE=1, as CI sets).
 */
import { nativeBackend, nativeUnavailableReason, type NativeBackend } from "../../src/backends/native/backend.ts";

export const NATIVE = nativeBackend();
if (!NATIVE) {
  const why = nativeUnavailableReason();
  if (process.env.LOOM_REQUIRE_NATIVE === "1") throw new Error(`LOOM_REQUIRE_NATIVE=1 but the native backend is unavailable: ${why}`);
  console.warn(`[skip] native backend tests: ${why}`);
}

export function nativeOrSkip(): NativeBackend {
  return NATIVE as NativeBackend;
}
