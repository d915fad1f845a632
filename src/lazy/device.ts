/**
 * Devices and the backend that runs each. "cpu" runs on the native backend (C kernels through
 * bun:ffi) whenever it builds, else on the js reference backend. `LOOM_BACKEND=js` selects js;
 * `LOOM_REQUIRE_NATIVE=1` makes an unavailable native backend an error instead of a fallback;
 * `set_default_backend("js" | "native")` switches at run time.
 */
import type { Backend } from "../backends/backend.ts";
import { jsBackend } from "../backends/js/backend.ts";
import { nativeBackend, nativeUnavailableReason } from "../backends/native/backend.ts";
import { webgpuBackend } from "../backends/webgpu/index.ts";
import { cudaBackend } from "../backends/cuda/index.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { toContiguous, type TensorData } from "../tensor/storage.ts";

function defaultCpu(): Backend {
  const env = typeof process !== "undefined" ? process.env : {};
  if (env.LOOM_BACKEND === "js") return jsBackend;
  const native = nativeBackend();
  if (native) return native;
  if (env.LOOM_REQUIRE_NATIVE === "1" || env.LOOM_BACKEND === "native") {
    throw new LoomValueError(`the native backend is required but unavailable: ${nativeUnavailableReason()}`);
  }
  return jsBackend;
}

const backends = new Map<string, Backend>([["cpu", defaultCpu()]]);

/**
 * Devices opened on first use: "webgpu" (bun-webgpu; throws with the reason when no adapter) and
 * "cuda" (native/cuda/ through the FFI; throws with the reason when no CUDA device).
 */
const lazyDevices: Record<string, () => Backend> = { webgpu: webgpuBackend, cuda: cudaBackend };

export function backendFor(device: string): Backend {
  let b = backends.get(device);
  if (!b && lazyDevices[device]) backends.set(device, (b = lazyDevices[device]!()));
  if (!b) throw new LoomValueError(`unknown or unavailable device '${device}'; available: ${[...backends.keys()].join(", ")}`);
  return b;
}

/** `d` (data of a tensor on device `from`) as data of device `to`: a copy through host memory. */
export function moveData(d: TensorData, from: string, to: string): TensorData {
  const host = backendFor(from).download?.(d) ?? d;
  const dst = backendFor(to);
  return dst.upload ? dst.upload(host) : host === d ? toContiguous(d) : host;
}

/** Make `device` run on `backend` (used by backends that load at run time). */
export function registerBackend(device: string, backend: Backend): void {
  backends.set(device, backend);
}

/** Run "cpu" tensors on the named backend ("native" throws if it cannot be built). Returns the previous name. */
export function set_default_backend(name: "js" | "native"): string {
  const prev = backendFor("cpu").name;
  if (name === "js") backends.set("cpu", jsBackend);
  else {
    const n = nativeBackend();
    if (!n) throw new LoomValueError(`the native backend is unavailable: ${nativeUnavailableReason()}`);
    backends.set("cpu", n);
  }
  return prev;
}
