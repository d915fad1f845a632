/**
 * What Loom runs on here: the JavaScript runtime, its FFI, and the backend of device "cpu"
 * (with the reason when the native backend is unavailable). `loom.runtime_info()`.
 */
import { nativeUnavailableReason } from "../backends/native/backend.ts";
import { RUNTIME, runtimeDescription, type RuntimeName } from "../runtime/detect.ts";
import { ffi } from "../runtime/ffi.ts";
import { backendFor } from "./device.ts";

/** The runtime Loom runs on and what it gives Loom. */
export interface RuntimeInfo {
  /** "bun" | "deno" | "node" | "browser" */
  runtime: RuntimeName;
  /** e.g. "deno 2.9.6" */
  version: string;
  /** "bun:ffi", "Deno.dlopen", or null without an FFI (Node, browsers). */
  ffi: string | null;
  /** The backend running device "cpu": "native" or "js". */
  cpu_backend: string;
  /** Why the native backend is unavailable ("" when it runs). */
  native_unavailable_reason: string;
}

/** Describe the runtime and the "cpu" backend (builds the native backend if it was not yet). */
export function runtime_info(): RuntimeInfo {
  const cpu = backendFor("cpu").name;
  return {
    runtime: RUNTIME,
    version: runtimeDescription(),
    ffi: ffi()?.name ?? null,
    cpu_backend: cpu,
    native_unavailable_reason: cpu === "native" ? "" : nativeUnavailableReason(),
  };
}
