/// <reference types="@webgpu/types" />
/**
 * Opening the WebGPU device. Under Bun through `bun-webgpu` (Dawn), synchronously: Dawn's
 * callbacks fire inside `wgpuInstanceProcessEvents`, so we pump it until the adapter/device
 * promise has settled (`Bun.peek`), which lets `x.to("webgpu")` work without an `await`.
 * Under Deno and in a browser through the built-in `navigator.gpu` (Dawn in Chromium, wgpu in
 * Deno; Metal on macOS either way), which only opens asynchronously: `await loom.init_webgpu()`
 * first, and read results with `await t.data()`.
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

import { RUNTIME } from "../../runtime/detect.ts";
import { waitSync } from "../../runtime/sync.ts";

let opened: { ctx: GpuContext | null; reason: string } | null = null;

/** Pump events until `p` settles and return its value (Bun only: src/runtime/sync.ts). */
export { waitSync };

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
  if (RUNTIME !== "bun") return (opened ??= await openNavigatorGpu());
  if (!loaded) {
    try {
      const spec = "bun-" + "webgpu";
      loaded = (await import(spec)) as BunWebGpu;
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
  if (RUNTIME !== "bun") {
    const has = typeof navigator !== "undefined" && "gpu" in navigator && navigator.gpu;
    return { ctx: null, reason: has ? `on ${RUNTIME} the WebGPU device opens asynchronously: \`await loom.init_webgpu()\` once first` : `no WebGPU on ${RUNTIME} (navigator.gpu is missing)` };
  }
  if (!loaded) {
    try {
      const spec = "bun-" + "webgpu"; // computed: a browser bundle must not pull in bun-webgpu (Dawn through bun:ffi)
      loaded = import.meta.require(spec) as BunWebGpu; // works once anything imported it
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

/**
 * Open the runtime's own WebGPU (`navigator.gpu`: Deno, browsers). Events need no pumping there:
 * promises settle on the event loop, so every read must be awaited.
 */
async function openNavigatorGpu(): Promise<{ ctx: GpuContext | null; reason: string }> {
  const gpu = typeof navigator !== "undefined" ? (navigator as Navigator & { gpu?: GPU }).gpu : undefined;
  if (!gpu) return { ctx: null, reason: `no WebGPU on ${RUNTIME} (navigator.gpu is missing${RUNTIME === "deno" ? "; Deno 2 has it on Linux/macOS/Windows with a GPU or a Vulkan driver" : ": enable WebGPU in the browser"})` };
  try {
    const adapter = await gpu.requestAdapter();
    if (!adapter) return { ctx: null, reason: `no WebGPU adapter on ${RUNTIME} (navigator.gpu.requestAdapter() returned null)` };
    const requiredLimits: Record<string, number> = {};
    for (const k of ["maxStorageBuffersPerShaderStage", "maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup"]) {
      const v = (adapter.limits as unknown as Record<string, unknown>)[k];
      if (typeof v === "number") requiredLimits[k] = v;
    }
    const device = await adapter.requestDevice({ requiredLimits });
    const errors: string[] = [];
    device.addEventListener("uncapturederror", (ev) => { errors.push((ev as GPUUncapturedErrorEvent).error.message); });
    const info = (adapter as GPUAdapter & { info?: GPUAdapterInfo }).info;
    // browsers fill vendor/architecture (e.g. "google swiftshader") and often leave device/description empty
    const description = info ? [info.vendor, info.architecture, info.device, info.description].filter((x) => x).join(" ") || "WebGPU adapter" : "WebGPU adapter";
    return {
      ctx: { device, description, software: (info as { architecture?: string } | undefined)?.architecture === "software" || /llvmpipe|swiftshader|lavapipe/i.test(description), processEvents: () => {}, errors },
      reason: "",
    };
  } catch (e) {
    return { ctx: null, reason: `opening the WebGPU device failed: ${(e as Error).message}` };
  }
}
