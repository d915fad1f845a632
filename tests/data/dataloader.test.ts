/**
 * loom.data (torch.utils.data): TensorDataset + DataLoader batching, shuffling per seed, drop_last,
 * collate functions, samplers, splits, IterableDataset, a token file read window by window (a
 * sparse 1 GiB file shows that only the windows asked for are read), and the async iteration that
 * makes the next batch while the caller awaits the step.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { data } from "../../src/index.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-data-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("DataLoader over a TensorDataset", () => {
  const X = loom.arange(10).reshape([10, 1]).mul(10), Y = loom.arange(10);
  const ds = new data.TensorDataset(X, Y);

  test("sequential batches, the last one short; drop_last drops it; length", () => {
    const dl = new data.DataLoader(ds, { batch_size: 4 });
    const batches = [...dl].map(([x, y]: loom.Tensor[]) => [x!.tolist(), y!.tolist()]);
    expect(batches).toEqual([
      [[[0], [10], [20], [30]], [0, 1, 2, 3]],
      [[[40], [50], [60], [70]], [4, 5, 6, 7]],
      [[[80], [90]], [8, 9]],
    ]);
    expect(dl.length).toBe(3);
    expect(new data.DataLoader(ds, { batch_size: 4, drop_last: true }).length).toBe(2);
    expect([...new data.DataLoader(ds, { batch_size: 4, drop_last: true })].length).toBe(2);
  });

  test("shuffle: every sample once per epoch, a new order each epoch, the same orders for the same seed", () => {
    const epochs = (seed: number) => {
      const dl = new data.DataLoader(ds, { batch_size: 3, shuffle: true, generator: new loom.Generator(seed) });
      return [0, 1].map(() => [...dl].flatMap(([, y]: loom.Tensor[]) => y!.tolist() as number[]));
    };
    const [a, b] = epochs(7);
    expect([...a!].sort((p, q) => p - q)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(a).not.toEqual(b);
    expect(epochs(7)).toEqual([a, b]);
    expect(epochs(8)[0]).not.toEqual(a);
  });

  test("collate_fn, dict samples through default_collate, numbers to int64 / float64", () => {
    class Pairs extends data.Dataset<{ id: number; w: number; t: loom.Tensor; name: string }> {
      get length() { return 4; }
      get(i: number) { return { id: i, w: i / 2, t: loom.full([2], i), name: `s${i}` }; }
    }
    const b = [...new data.DataLoader(new Pairs(), { batch_size: 4 })][0];
    expect(b.id.dtype).toBe("int64");
    expect(b.w.dtype).toBe("float64");
    expect(b.w.tolist()).toEqual([0, 0.5, 1, 1.5]);
    expect(b.t.shape).toEqual([4, 2]);
    expect(b.name).toEqual(["s0", "s1", "s2", "s3"]);
    const sums = [...new data.DataLoader(new Pairs(), { batch_size: 2, collate_fn: (s) => s.reduce((a, x) => a + x.id, 0) })];
    expect(sums).toEqual([1, 5]);
    const viaGet = [...new data.DataLoader(ds, { batch_size: 5, collate_fn: (s) => s.length })];
    expect(viaGet).toEqual([5, 5]); // a custom collate_fn gets the samples, not getitems' batch
  });

  test("samplers, random_split, Subset, ConcatDataset", () => {
    const g = new loom.Generator(1);
    const draws = [...new data.RandomSampler(10, { replacement: true, num_samples: 25, generator: g })];
    expect(draws).toHaveLength(25);
    expect(draws.every((i) => Number.isInteger(i) && i >= 0 && i < 10)).toBe(true);
    const [tr, va] = data.random_split(ds, [0.7, 0.3], new loom.Generator(2));
    expect([tr!.length, va!.length]).toEqual([7, 3]);
    const all = [...tr!.indices, ...va!.indices].sort((p, q) => p - q);
    expect(all).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const cat = new data.ConcatDataset([va!, tr!]);
    expect(cat.length).toBe(10);
    expect((cat.get(3) as loom.Tensor[])[1]!.item()).toBe(tr!.indices[0]);
    expect(() => data.random_split(ds, [5, 4])).toThrow(/does not equal the length of the input dataset \(10\)/);
  });

  test("bad arguments raise as torch does", () => {
    expect(() => new data.DataLoader(ds, { batch_size: 0 })).toThrow(/batch_size should be a positive integer value/);
    expect(() => new data.DataLoader(ds, { shuffle: true, sampler: new data.SequentialSampler(10) })).toThrow(/mutually exclusive/);
    expect(() => new data.TensorDataset(loom.zeros([3]), loom.zeros([4]))).toThrow(/size mismatch between tensors: \[3\], \[4\]/);
    expect(() => ds.get(10)).toThrow(loom.LoomIndexError);
    expect(() => new data.RandomSampler(10, { num_samples: 5 })).toThrow(/needs replacement: true/);
  });
});

describe("DataLoader.dataset keeps the dataset's type", () => {
  test("loader.dataset.length and the dataset's own fields type-check on a map-style dataset", () => {
    const ds = new data.TensorDataset(loom.arange(6), loom.arange(6));
    const dl = new data.DataLoader(ds, { batch_size: 4, collate_fn: (s) => s.length });
    const n: number = dl.dataset.length; // a type error if dataset were Dataset | IterableDataset
    const same: data.TensorDataset = dl.dataset;
    expect(n).toBe(6);
    expect(same.tensors).toHaveLength(2);
    const counts: number[] = [...dl]; // B from collate_fn
    expect(counts).toEqual([4, 2]);
    class Counter extends data.IterableDataset<number> {
      *[Symbol.iterator]() { yield 1; }
    }
    const it = new data.DataLoader(new Counter());
    // @ts-expect-error an IterableDataset has no length
    expect(it.dataset.length).toBeUndefined();
    const loose: data.DataLoader<number, unknown> = it; // two type arguments still name a loader
    expect(loose.batch_size).toBe(1);
  });
});

describe("IterableDataset", () => {
  test("a stream is batched in order; shuffle is refused", () => {
    class Counter extends data.IterableDataset<number> {
      *[Symbol.iterator]() { for (let i = 0; i < 5; i++) yield i; }
    }
    expect([...new data.DataLoader(new Counter(), { batch_size: 2 })].map((t: loom.Tensor) => t.tolist())).toEqual([[0, 1], [2, 3], [4]]);
    expect(() => new data.DataLoader(new Counter(), { shuffle: true })).toThrow(/IterableDataset/);
    expect(() => new data.DataLoader(new Counter()).length).toThrow(/has no length/);
  });
});

describe("TokenFileDataset", () => {
  test("windows x = tokens[i, i+T), y = tokens[i+1, i+1+T), as int64; a batch read directly", () => {
    const tokens = Uint16Array.from({ length: 50 }, (_, i) => (i * 7919) % 65536);
    const p = join(dir, "train.bin");
    writeFileSync(p, new Uint8Array(tokens.buffer));
    const ds = new data.TokenFileDataset(p, { block_size: 8 });
    expect(ds.length).toBe(42);
    const s = ds.get(5);
    expect(s.x.dtype).toBe("int64");
    expect(s.x.tolist()).toEqual(Array.from(tokens.slice(5, 13)));
    expect(s.y.tolist()).toEqual(Array.from(tokens.slice(6, 14)));
    const [b] = [...new data.DataLoader(ds, { batch_size: 3, sampler: new data.SequentialSampler(3) })];
    expect(b.x.shape).toEqual([3, 8]);
    expect(b.y.tolist()[2]).toEqual(Array.from(tokens.slice(3, 11)));
    expect(() => ds.get(42)).toThrow(loom.LoomIndexError);
    ds.close();
  });

  test("uint32 tokens, and a sparse 1 GiB file read only where asked", () => {
    const p = join(dir, "big.bin");
    const fd = openSync(p, "w");
    ftruncateSync(fd, 1 << 30);
    const at = (1 << 29) / 4; // a token in the middle
    writeSync(fd, new Uint8Array(Uint32Array.from([70000, 70001, 70002]).buffer), 0, 12, at * 4);
    closeSync(fd);
    const ds = new data.TokenFileDataset(p, { block_size: 2, dtype: "uint32" });
    expect(ds.num_tokens).toBe(1 << 28);
    expect(ds.get(at).x.tolist()).toEqual([70000, 70001]);
    expect(ds.get(at).y.tolist()).toEqual([70001, 70002]);
    ds.close();
  });

  test("a file that is not whole tokens, or too short, raises LoomFormatError", () => {
    writeFileSync(join(dir, "odd.bin"), new Uint8Array(5));
    expect(() => new data.TokenFileDataset(join(dir, "odd.bin"), { block_size: 1 })).toThrow(/5 bytes is not a whole number of 16-bit tokens/);
    writeFileSync(join(dir, "short.bin"), new Uint8Array(8));
    expect(() => new data.TokenFileDataset(join(dir, "short.bin"), { block_size: 4 })).toThrow(/4 tokens, fewer than block_size \+ 1 = 5/);
    expect(() => new data.TokenFileDataset(dir, { block_size: 4 })).toThrow(loom.LoomFormatError);
  });
});

describe("async iteration", () => {
  test("the next batch is made while the caller awaits; the batches equal the sync iteration's", async () => {
    const X = loom.randn([12, 3]);
    const made: number[] = [];
    class Logged extends data.Dataset<loom.Tensor> {
      get length() { return 12; }
      get(i: number) { made.push(i); return X.narrow(0, i, 1).squeeze(0); }
    }
    const dl = new data.DataLoader(new Logged(), { batch_size: 4 });
    const sync = [...dl].map((b: loom.Tensor) => b.tolist());
    made.length = 0;
    const got: unknown[] = [];
    for await (const b of dl) {
      const before = made.length;
      await new Promise((r) => setTimeout(r, 5)); // the step, awaited (a plan running elsewhere)
      if (got.length < 2) expect(made.length).toBe(before + 4); // the next batch was made meanwhile
      got.push((b as loom.Tensor).tolist());
    }
    expect(got).toEqual(sync);
    expect(dl.prefetched).toBe(2);
  });
});
