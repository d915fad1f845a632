/**
 * Devices and the backend that runs each. Today "cpu" runs on the js reference backend; the
 * native and WebGPU issues register theirs here.
 */
import type { Backend } from "../backends/backend.ts";
import { jsBackend } from "../backends/js/backend.ts";
import { LoomValueError } from "../tensor/errors.ts";

const backends = new Map<string, Backend>([["cpu", jsBackend]]);

export function backendFor(device: string): Backend {
  const b = backends.get(device);
  if (!b) throw new LoomValueError(`unknown or unavailable device '${device}'; available: ${[...backends.keys()].join(", ")}`);
  return b;
}

/** Make `device` run on `backend` (used by backends that load at run time). */
export function registerBackend(device: string, backend: Backend): void {
  backends.set(device, backend);
}
