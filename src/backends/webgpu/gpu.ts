/// <reference types="@webgpu/types" />
/**
 * Opening the WebGPU device through `bun-webgpu` (Dawn). Opening is synchronous: Dawn's
 * callbacks fire inside `wgpuInstanceProcessEvents`, so we pump it until the adapter/device
 * promise has settled (`Bun.peek`), which lets `x.to("webgpu")` work without an `await`.
 *
 * On Linux without a GPU, Mesa's lavapipe (`mesa-vulkan-drivers` from Debian bookworm-backports)
 * gives a real Vulkan device on the CPU. Without any adapter, `openGpu()` returns the reason and
 * the "webgpu" device is unavailable.
 */

/** What the backend needs from the opened device. */
export interface GpuContext {
  readonly device: GPUDevice;
  /** e.g. "llvmpipe (LLVM 15.0.6, 256 bits) — vulkan, software" */
  readonly description: string;
  /** True for a CPU implementation (lavapipe/SwiftShader): tests keep their shapes small there. */
  readonly software: boolean;
  /** Run Dawn's pending callbacks (map, work-done) now. */
  processEvents(): void;
  /** Errors Dawn reported (validation, out-of-memory), collected until the next sync point. */
  readonly errors: string[];
}

let opened: { ctx: GpuContext | null; reason: string } | null = null;

/**
 * Pump Dawn's events until `p` settles and return its value (throws its rejection).
 * Spins briefly, then sleeps in 20 µs steps so a software device's worker threads get the CPU.
 */
export function waitSync<T>(p: Promise<T>, processEvents: () => void): T {
  let spins = 0;
  while (Bun.peek.status(p) === "pending") {
    processEvents();
    if (++spins > 64) Bun.sleepSync(0.02);
  }
  const v = Bun.peek(p);
  if (Bun.peek.status(p) === "rejected") {
    p.catch(() => {}); // handled here: keep it from being reported as unhandled
    throw v;
  }
  return v as T;
}

function describe(info: GPUAdapterInfo): string {
  const parts = [info.device, info.description].filter((s) => s && s.length > 0);
  return `${parts.join(" — ") || "unknown adapter"}${(info as { architecture?: string }).architecture === "software" ? " (software)" : ""}`;
}

type BunWebGpu = typeof import("bun-webgpu");
let loaded: BunWebGpu | null = null;
let loadError = "";

/**
 * Load bun-webgpu. Its module uses top-level await, so it cannot be `require`d before something
 * has imported it: `initGpu()` imports it; `openGpu()` alone works once it is loaded.
 */
export async function initGpu(): Promise<{ ctx: GpuContext | null; reason: string }> {
  if (!loaded && typeof Bun !== "undefined") {
    try {
      loaded = (await import("bun-webgpu")) as BunWebGpu;
    } catch (e) {
      loadError = `bun-webgpu could not be loaded (npm install bun-webgpu): ${(e as Error).message}`;
    }
  }
  return openGpu();
}

/**
 * Open the WebGPU device once per process (synchronously). Returns `{ctx: null, reason}` when
 * bun-webgpu is not installed or not loaded yet, the runtime is not Bun, or no adapter is found.
 */
export function openGpu(): { ctx: GpuContext | null; reason: string } {
  if (opened) return opened;
  if (typeof Bun === "undefined") return (opened = { ctx: null, reason: "the webgpu backend needs Bun (bun-webgpu loads Dawn through bun:ffi)" });
  if (!loaded) {
    try {
      loaded = import.meta.require("bun-webgpu") as BunWebGpu; // works once anything imported it
    } catch {
      return { ctx: null, reason: loadError || "bun-webgpu is not loaded yet: `await loom.init_webgpu()` once first (or import \"bun-webgpu\" before using the device)" };
    }
  }
  opened = tryOpen(loaded);
  return opened;
}

function tryOpen(mod: BunWebGpu): { ctx: GpuContext | null; reason: string } {
  try {
    mod.globals(); // GPUBufferUsage, GPUMapMode, ... as globals
    const gpu = mod.createGPUInstance();
    const ticker = (gpu as unknown as { _ticker?: { processEvents(): void } })._ticker;
    if (!ticker) return { ctx: null, reason: "bun-webgpu changed: no instance event pump (GPUImpl._ticker)" };
    const pump = () => ticker.processEvents();
    const adapter = waitSync(gpu.requestAdapter(), pump);
    // Dawn answers with its "null" backend (which computes nothing) when no real one exists
    const isNull = adapter && ((adapter.info as unknown as { backendType?: number }).backendType === 1 || adapter.info.device === "null-backend");
    if (!adapter || isNull) {
      return {
        ctx: null,
        reason: "no WebGPU adapter found (no GPU, and no Vulkan driver: on Debian install lavapipe with `apt-get install -t bookworm-backports mesa-vulkan-drivers libvulkan1`)",
      };
    }
    const info = adapter.info;
    // The adapter's limits (more storage buffers per stage for fused kernels, larger bindings).
    // All of them are passed: bun-webgpu validates every field against the adapter once any is set.
    const requiredLimits: Record<string, number> = {};
    for (const k in adapter.limits) {
      const v = (adapter.limits as unknown as Record<string, unknown>)[k];
      if (typeof v === "number" && k !== "nextInChain") requiredLimits[k] = v;
    }
    const device = waitSync(adapter.requestDevice({ requiredLimits } as GPUDeviceDescriptor), pump);
    const errors: string[] = [];
    device.onuncapturederror = (ev: GPUUncapturedErrorEvent) => { errors.push(ev.error.message); };
    const description = describe(info);
    return {
      ctx: { device, description, software: (info as { architecture?: string }).architecture === "software" || /llvmpipe|swiftshader|lavapipe/i.test(description), processEvents: pump, errors },
      reason: "",
    };
  } catch (e) {
    return { ctx: null, reason: `opening the WebGPU device failed: ${(e as Error).message}` };
  }
}
