/**
 * DistributedSampler: the split, padding and lengths against torch 1.13 (goldens from
 * gen_distributed_sampler_goldens.py, non-shuffled); with shuffle, the properties torch's has:
 * the same permutation on every rank for a seed and epoch (so ranks are disjoint and cover the
 * dataset), a new one after set_epoch, and Loom's randperm seeded with seed + epoch as the order.
 */
import { describe, expect, test } from "bun:test";
import { DistributedSampler, randperm } from "../../src/data/index.ts";
import { DataLoader, TensorDataset } from "../../src/data/index.ts";
import { arange } from "../../src/lazy/creation.ts";
import { Generator } from "../../src/tensor/rng.ts";
import { thrown } from "../thrown.ts";
import goldens from "./distributed_sampler_goldens.json";

describe("DistributedSampler", () => {
  test("non-shuffled split, padding (including a list repeated several times) and drop_last equal torch's", () => {
    expect(goldens.length).toBe(48);
    for (const c of goldens) {
      c.ranks.forEach((want, rank) => {
        const s = new DistributedSampler(c.n, { num_replicas: c.num_replicas, rank, shuffle: false, drop_last: c.drop_last });
        expect({ n: c.n, R: c.num_replicas, d: c.drop_last, rank, len: s.length, indices: [...s] }).toEqual({ n: c.n, R: c.num_replicas, d: c.drop_last, rank, len: want.len, indices: want.indices });
      });
    }
  });

  test("shuffled: one permutation (randperm seeded with seed + epoch) split across ranks; set_epoch changes it", () => {
    const n = 11, R = 3;
    const epoch = (e: number) => Array.from({ length: R }, (_, rank) => {
      const s = new DistributedSampler(n, { num_replicas: R, rank, seed: 4 });
      s.set_epoch(e);
      return [...s];
    });
    const e0 = epoch(0), e1 = epoch(1);
    const perm = randperm(n, new Generator(4));
    const padded = [...perm, perm[0]!]; // 11 → 12 = 3 × 4
    expect(e0).toEqual([0, 1, 2].map((r) => padded.filter((_, i) => i % R === r)));
    expect(new Set(e0.flat())).toEqual(new Set(Array.from({ length: n }, (_, i) => i)));
    expect(e1).not.toEqual(e0);
    expect(new Set(e1.flat())).toEqual(new Set(Array.from({ length: n }, (_, i) => i)));
    expect(epoch(0)).toEqual(e0); // deterministic
  });

  test("defaults from the launcher's environment; a DataLoader reads this rank's share", () => {
    const save = { ...process.env };
    try {
      process.env.OMPI_COMM_WORLD_SIZE = "2";
      process.env.OMPI_COMM_WORLD_RANK = "1";
      delete process.env.WORLD_SIZE;
      delete process.env.RANK;
      const s = new DistributedSampler(6, { shuffle: false });
      expect([s.num_replicas, s.rank, [...s]]).toEqual([2, 1, [1, 3, 5]]);
      const dl = new DataLoader(new TensorDataset(arange(0, 6)), { batch_size: 2, sampler: s });
      expect([...dl].map((b) => (b as unknown as [{ tolist(): number[] }])[0].tolist())).toEqual([[1, 3], [5]]);
    } finally {
      process.env = save;
    }
  });

  test("bad arguments are LoomValueErrors with torch's message", () => {
    expect(thrown(() => new DistributedSampler(4, { num_replicas: 2, rank: 2 })).message).toBe("[DistributedSampler] Invalid rank 2, rank should be in the interval [0, 1]");
    expect(thrown(() => new DistributedSampler(4, { num_replicas: 0, rank: 0 })).name).toBe("LoomValueError");
    expect(thrown(() => new DistributedSampler(-1, { num_replicas: 2, rank: 0 })).message).toBe("[DistributedSampler] dataset length must be a non-negative integer, got -1");
  });
});
