/**
 * The "cuda" device: Loom's CUDA library (native/cuda/, built with nvcc, loaded through the
 * runtime's FFI) on device 0, opened on first use and shared by every tensor on it.
 */
import { LoomValueError } from "../../tensor/errors.ts";
import { CudaBackend } from "./backend.ts";
import { loadCuda } from "./ffi.ts";

export { CudaBackend } from "./backend.ts";

let backend: CudaBackend | null = null;

/** Whether the cuda device can be used here, why not, what it is, and which matmul library it uses. */
export function cudaStatus(): { available: boolean; reason: string; device: string; cublas: string } {
  const lib = loadCuda();
  if ("error" in lib) return { available: false, reason: lib.error, device: "", cublas: "" };
  return { available: true, reason: "", device: lib.device, cublas: lib.cublas };
}

/**
 * The cuda backend (loading the library and opening the device on first call).
 * @throws LoomValueError naming the reason when no CUDA device can be used
 */
export function cudaBackend(): CudaBackend {
  if (backend) return backend;
  const lib = loadCuda();
  if ("error" in lib) throw new LoomValueError(`device 'cuda' is unavailable: ${lib.error}`);
  backend = new CudaBackend(lib);
  return backend;
}

/**
 * Build (or reuse) the CUDA library and open the device; resolves to the status, never throws.
 * Synchronous underneath (device "cuda" also opens on first use); async to match init_webgpu.
 */
export async function init_cuda(): Promise<ReturnType<typeof cudaStatus>> {
  return cudaStatus();
}
