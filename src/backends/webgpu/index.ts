/**
 * The "webgpu" device: opened on first use (synchronously), shared by every tensor on it.
 */
import { LoomValueError } from "../../tensor/errors.ts";
import { WebGpuBackend } from "./backend.ts";
import { initGpu, openGpu } from "./gpu.ts";

export { WebGpuBackend } from "./backend.ts";

let backend: WebGpuBackend | null = null;

/** Whether the webgpu device can be used here, why not, and what it runs on. */
export function webgpuStatus(): { available: boolean; reason: string; device: string; software: boolean } {
  const { ctx, reason } = openGpu();
  return { available: ctx !== null, reason, device: ctx?.description ?? "", software: ctx?.software ?? false };
}

/**
 * The webgpu backend (opening the device on first call).
 * @throws LoomValueError naming the reason when no WebGPU adapter is available
 */
export function webgpuBackend(): WebGpuBackend {
  if (backend) return backend;
  const { ctx, reason } = openGpu();
  if (!ctx) throw new LoomValueError(`device 'webgpu' is unavailable: ${reason}`);
  backend = new WebGpuBackend(ctx);
  return backend;
}

/**
 * Load bun-webgpu and open the device (call once before using device "webgpu": the package
 * loads asynchronously). Resolves to the status; never throws.
 */
export async function init_webgpu(): Promise<ReturnType<typeof webgpuStatus>> {
  await initGpu();
  return webgpuStatus();
}
