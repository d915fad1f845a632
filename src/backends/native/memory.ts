/**
 * Host buffers of the native backend and the outputs of command buffers still running.
 *
 * Buffers: tensors of at least POOL_MIN_BYTES get pooled native memory (the shim's loom_alloc:
 * uninitialized, 64-byte aligned, reused across steps: no zeroing and no fresh page faults),
 * wrapped in an ArrayBuffer whose deallocator returns the block to the pool when the garbage
 * collector frees it. Small tensors are plain (zeroed) typed arrays: allocating those is cheaper
 * than a call into the shim. Either way a tensor's `data` is an ordinary typed array.
 *
 * Pending outputs: a compiled plan's outputs are written by a command buffer that may still be
 * running. Their TensorData has a `data` getter that waits for it (flushing the batch first if
 * it was not submitted yet) and then becomes a plain property; the native backend itself reads
 * the storage through `RAW` without waiting, since the shim runs command buffers in order.
 */
import { ffi } from "../../runtime/ffi.ts";
import { gc } from "../../runtime/sync.ts";
import type { DType, TypedArray } from "../../tensor/dtype.ts";
import { allocArray, itemsize } from "../../tensor/dtype.ts";
import type { TensorData } from "../../tensor/storage.ts";
import type { NativeLib } from "./ffi.ts";
import { RAW } from "./program.ts";

/** Tensors from this many bytes on live in pooled native memory. */
export const POOL_MIN_BYTES = 16384;
/**
 * Pooled bytes allocated between collections requested by the pool, at least. The shim's pool
 * keeps twice this (POOL_FLOOR in native/shim.c) so that a cycle's garbage is reused; a full
 * collection costs ~2.5 ms here, so with 64 MiB a loop making 16 MiB results paid one every 4 calls.
 */
const GC_MIN_BYTES = 128 * 2 ** 20;

type ArrayCtor = new (b: ArrayBuffer, offset: number, length: number) => TypedArray;
const CTORS: Record<DType, ArrayCtor> = {
  float32: Float32Array, float64: Float64Array, int64: Float64Array, float16: Uint16Array, bfloat16: Uint16Array,
  int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};

/** Whether the runtime's FFI can hand native memory to the collector (bun:ffi can, Deno cannot). */
const ADOPTS = ffi()?.adopts ?? false;

/** Pooled native allocations for host tensors (plain arrays where the runtime cannot adopt native memory). */
export class HostMemory {
  private readonly freeFn: number;

  constructor(private readonly lib: NativeLib) {
    this.freeFn = lib.sym.loom_free_fn() ?? 0;
  }

  /** An uninitialized storage array of n elements (zeroed when small). */
  array(dtype: DType, n: number): TypedArray {
    const bytes = n * itemsize[dtype];
    if (bytes < POOL_MIN_BYTES) return allocArray(dtype, n);
    if (!ADOPTS) return allocArray(dtype, n); // the runtime cannot free native memory on collection (Deno)
    const p = this.lib.sym.loom_alloc(bytes);
    if (!p) return allocArray(dtype, n); // the pool refused (too large): a plain array
    this.pressure(bytes);
    // the deallocator (loom_free) gets (bytes, context) when the ArrayBuffer is collected
    const ab = ffi()!.adopt(p, bytes, this.freeFn)!;
    return new CTORS[dtype](ab, 0, n);
  }

  /** A dense TensorData over a new (uninitialized) array. */
  alloc(dtype: DType, shape: readonly number[]): TensorData {
    const nd = shape.length;
    const strides = new Array<number>(nd);
    let n = 1;
    for (let i = nd - 1; i >= 0; i--) {
      strides[i] = n;
      n *= shape[i]!;
    }
    return { dtype, shape: shape.slice(), strides, offset: 0, data: this.array(dtype, n) };
  }

  private sinceGc = 0;
  private budget = GC_MIN_BYTES;
  /** Pooled bytes in use after the last collection the pool asked for. */
  private liveAfterGc = 0;
  /** Full collections the pool has asked for (see pressure). */
  forcedCollections = 0;

  /**
   * The runtime's own collections (it is told each adopted buffer's size) reclaim buffers that
   * die young, but not those that lived long enough to be promoted (autograd's saved activations):
   * eager code could outrun it by gigabytes. So after allocating `budget` bytes the pool looks at
   * the bytes in use: when at least half of what was allocated since the last collection it asked
   * for has come back (the runtime's collections keep up), nothing more; otherwise it asks for a
   * full collection (about 2 ms here), which returns dead buffers to the pool, and the budget
   * becomes the bytes then in use, at least GC_MIN_BYTES. A loop making one dropped 16 MiB result
   * per call (W3) paid a forced collection every 8 calls, 0.3 ms per call, on top of the
   * runtime's own.
   */
  private pressure(bytes: number): void {
    this.sinceGc += bytes;
    if (this.sinceGc < this.budget) return;
    this.sinceGc = 0;
    if (this.stats().live - this.liveAfterGc < this.budget / 2) return;
    gc();
    this.forcedCollections++;
    this.liveAfterGc = this.stats().live;
    this.budget = Math.max(GC_MIN_BYTES, this.liveAfterGc);
  }

  /** Give the cached blocks back to the system (torch.cuda.empty_cache for host memory); live buffers stay. */
  emptyCache(): void {
    this.lib.sym.loom_pool_release();
  }

  /** [live bytes handed out, bytes cached for reuse, pool hits, pool misses]. */
  stats(): { live: number; cached: number; hits: number; misses: number } {
    const s = new Float64Array(4);
    this.lib.sym.loom_pool_stats(s);
    return { live: s[0]!, cached: s[1]!, hits: s[2]!, misses: s[3]! };
  }
}

/** What a pending output waits for: set when its batch is submitted. */
export interface PendingState {
  /** The batch has not been submitted yet. */
  open: boolean;
  /** Blocks until the command buffer that writes the output has run (throws its error). */
  wait(): void;
  /** Settles when it has run. */
  done(): Promise<void>;
}

export const PENDING = Symbol("loom.native.pending");

/**
 * A TensorData over `raw` whose `data` waits for `state` on first read.
 * RAW and PENDING are not enumerable, so a spread (`{ ...t, data: copy }`, which the layers
 * above use to put a TensorData over other storage) does not carry them along: the native
 * backend would otherwise keep reading `raw` through RAW instead of the new `data`.
 */
export function pendingData(dtype: DType, shape: readonly number[], strides: readonly number[], offset: number, raw: TypedArray, state: PendingState): TensorData {
  const t = { dtype, shape, strides, offset } as TensorData;
  Object.defineProperty(t, RAW, { value: raw, enumerable: false });
  Object.defineProperty(t, PENDING, { value: state, enumerable: false });
  Object.defineProperty(t, "data", {
    enumerable: true,
    configurable: true,
    get() {
      state.wait();
      Object.defineProperty(t, "data", { value: raw, enumerable: true, configurable: true, writable: false });
      return raw;
    },
  });
  return t;
}

/** The pending state of `t`'s storage, if a command buffer may still be writing it. */
export function pendingOf(t: TensorData): PendingState | undefined {
  const s = (t as { [PENDING]?: PendingState })[PENDING];
  if (!s) return undefined;
  // once read, `data` is a plain value: nothing is pending any more
  return Object.getOwnPropertyDescriptor(t, "data")?.get ? s : undefined;
}
