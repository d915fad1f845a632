/**
 * The CUDA device pool's accounting without a GPU: the pool is plain TypeScript over an allocator
 * of two functions (memory.ts), here a counter of addresses with a byte budget standing for the
 * device's memory. Bucket sizes, reuse, release through collection of the owning object, and
 * the out-of-memory path (sweep, trim, retry, then a typed error) are checked by hand-derived
 * numbers.
 */
import { describe, expect, test } from "bun:test";
import { bucket, DevicePool, type DeviceAllocator } from "../../src/backends/cuda/memory.ts";
import { LoomValueError } from "../../src/tensor/errors.ts";

/** An allocator with `budget` bytes: addresses count up from 2^40; 0 when the budget is spent. */
function budgetAllocator(budget: number): DeviceAllocator & { used: number; calls: number; freed: number[] } {
  let next = 2 ** 40;
  const sizes = new Map<number, number>();
  const a = {
    used: 0, calls: 0, freed: [] as number[],
    malloc(bytes: number): number {
      a.calls++;
      if (a.used + bytes > budget) return 0;
      a.used += bytes;
      const addr = next;
      next += bytes;
      sizes.set(addr, bytes);
      return addr;
    },
    free(addr: number): void {
      a.used -= sizes.get(addr)!;
      sizes.delete(addr);
      a.freed.push(addr);
    },
  };
  return a;
}

describe("CUDA device pool", () => {
  test("buckets: 256-byte steps to 64 KiB, then eighths of a power of two", () => {
    expect([bucket(1), bucket(256), bucket(257), bucket(65536)]).toEqual([256, 256, 512, 65536]);
    // 100000 lies in [2^16, 2^17): steps of 2^16/8 = 8192, ceil(100000/8192) = 13 → 106496
    expect(bucket(100000)).toBe(106496);
    expect(bucket(2 ** 20)).toBe(2 ** 20);
    expect(bucket(2 ** 20 + 1)).toBe(2 ** 20 + 2 ** 17);
  });

  test("a released buffer is reused for the same bucket; live and pooled bytes follow", () => {
    const al = budgetAllocator(1 << 20);
    const pool = new DevicePool(al);
    const a = pool.acquire(1000); // bucket 1024
    expect(a.size).toBe(1024);
    const b = pool.acquire(3000); // bucket 3072
    expect(pool.stats).toMatchObject({ created: 2, reused: 0, liveBytes: 4096, pooledBytes: 4096 });
    pool.release(a);
    expect(pool.stats.liveBytes).toBe(3072);
    expect(pool.freeBytes).toBe(1024);
    const c = pool.acquire(900); // same bucket as a
    expect(c.addr).toBe(a.addr);
    expect(pool.stats).toMatchObject({ created: 2, reused: 1, released: 1, liveBytes: 4096 });
    expect(al.calls).toBe(2);
    pool.release(b);
    pool.release(c);
    expect(pool.stats.liveBytes).toBe(0);
  });

  test("a buffer owned by an object returns to the pool once the object is collected (sweep)", () => {
    const pool = new DevicePool(budgetAllocator(1 << 20), () => Bun.gc(true));
    (() => {
      const holder = { name: "tensor storage" };
      pool.own(holder, pool.acquire(4096));
    })();
    expect(pool.stats.liveBytes).toBe(4096);
    pool.sweep(); // a full collection clears the WeakRef of the dropped holder
    expect(pool.stats.liveBytes).toBe(0);
    expect(pool.stats.released).toBe(1);
    pool.sweep(); // returned once only
    expect(pool.stats.released).toBe(1);
    const kept = { name: "alive" };
    pool.own(kept, pool.acquire(4096));
    pool.sweep();
    expect(pool.stats.liveBytes).toBe(4096); // still referenced
    expect(kept.name).toBe("alive");
  });

  test("out of device memory: free buffers go back to the driver and the allocation is retried; then a typed error", () => {
    const al = budgetAllocator(8192);
    const pool = new DevicePool(al);
    const a = pool.acquire(4096), b = pool.acquire(4096);
    pool.release(a); // 4096 free in the pool, none left on the device
    // a different bucket: malloc fails, the sweep finds nothing, the trim frees a, the retry fits
    const c = pool.acquire(2048);
    expect(pool.stats.trims).toBe(1);
    expect(al.freed).toEqual([a.addr]);
    expect(pool.stats).toMatchObject({ liveBytes: 4096 + 2048, pooledBytes: 4096 + 2048 });
    expect(() => pool.acquire(4096)).toThrow(LoomValueError);
    expect(() => pool.acquire(4096)).toThrow("[cuda] out of device memory allocating 4096 bytes (6144 bytes live in tensors)");
    pool.release(b);
    pool.release(c);
  });
});
