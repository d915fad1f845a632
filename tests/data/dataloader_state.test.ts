/**
 * DataLoader.state_dict / load_state_dict (torchdata's StatefulDataLoader): a run stopped mid-epoch,
 * its state saved with loom.save and loaded with loom.load into a NEW loader (a new generator with
 * the same seed) yields exactly the batches of an uninterrupted run: the rest of the interrupted
 * epoch and the next epochs (their shuffles too). Sync and async (prefetch on: a prefetched batch
 * not handed out is not consumed), shuffle, drop_last, DistributedSampler, IterableDatasets with
 * and without state; and state dicts of other configurations raise LoomValueError.
 *
 * Expected values are the uninterrupted run's batches (the same code path only up to the stop; a
 * fresh loader without load_state_dict gives other batches, checked, so these tests can fail).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../../src/index.ts";
import { data } from "../../src/index.ts";
import { LoomValueError } from "../../src/tensor/errors.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-dlstate-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const N = 23;
const X = loom.arange(N).reshape([N, 1]).mul(0.5), Y = loom.arange(N);
const ds = new data.TensorDataset(X, Y);
type Vals = unknown[];
/** A batch's values (x as floats, y as ints): what "bit-equal" compares. */
const vals = (b: loom.Tensor[] | loom.Tensor): Vals => (b instanceof loom.Tensor ? (b.tolist() as Vals) : b.map((t) => t.tolist()));

/** Through a file, as a checkpoint would carry it. */
let files = 0;
function roundTrip<T>(obj: T): T {
  const path = join(dir, `state-${files++}.safetensors`);
  loom.save({ loader: obj }, path);
  return loom.load(path).loader as T;
}

type Make = () => data.DataLoader<any, any, any>;
/** The first `k` batches of one epoch, then leave the loop (the epoch stays in progress). */
async function take(loader: data.DataLoader<any, any, any>, k: number, async: boolean): Promise<Vals[]> {
  const out: Vals[] = [];
  if (k === 0) return out;
  if (async) {
    for await (const b of loader) {
      out.push(vals(b));
      await new Promise((r) => setImmediate(r)); // let the prefetch of the next batch run
      if (out.length === k) break;
    }
  } else {
    for (const b of loader) {
      out.push(vals(b));
      if (out.length === k) break;
    }
  }
  return out;
}
async function epoch(loader: data.DataLoader<any, any, any>, async: boolean): Promise<Vals[]> {
  return take(loader, Infinity, async);
}

/** 3 epochs uninterrupted. */
async function straight(make: Make, async: boolean): Promise<Vals[][]> {
  const l = make();
  return [await epoch(l, async), await epoch(l, async), await epoch(l, async)];
}

/**
 * Epoch 1, then `k` batches of epoch 2 (k = "end": all of epoch 2, finished), state through a
 * file into a new loader, then the rest of epoch 2 and epoch 3.
 */
async function resumed(make: Make, k: number | "end", async: boolean, load = true): Promise<Vals[][]> {
  const a = make();
  const e1 = await epoch(a, async);
  const head = k === "end" ? await epoch(a, async) : await take(a, k, async);
  const state = a.state_dict();
  expect(JSON.parse(JSON.stringify(state))).toEqual(state); // plain JSON
  const sd = roundTrip(state);
  const b = make();
  if (load) b.load_state_dict(sd);
  const rest = k === "end" ? [] : await epoch(b, async);
  return [e1, [...head, ...rest], await epoch(b, async)];
}

const configs: [string, Make][] = [
  ["shuffle", () => new data.DataLoader(ds, { batch_size: 4, shuffle: true, generator: new loom.Generator(11) })],
  ["shuffle + drop_last", () => new data.DataLoader(ds, { batch_size: 4, shuffle: true, drop_last: true, generator: new loom.Generator(11) })],
  ["sequential", () => new data.DataLoader(ds, { batch_size: 5 })],
  ["RandomSampler with replacement", () => new data.DataLoader(ds, { batch_size: 3, sampler: new data.RandomSampler(N, { replacement: true, num_samples: 10, generator: new loom.Generator(3) }) })],
];

for (const async of [false, true]) {
  describe(`resume mid-epoch, ${async ? "async (for await, prefetch on)" : "sync"}`, () => {
    for (const [name, make] of configs) {
      test(`${name}: stopped at several points of epoch 2, the batches equal an uninterrupted run's`, async () => {
        const want = await straight(make, async);
        const len = make().length;
        expect(want[1]).not.toEqual(name === "sequential" ? [] : want[2]); // epochs differ when shuffled
        for (const k of [1, 2, len - 1, len, "end"] as const) {
          expect(await resumed(make, k, async)).toEqual(want);
        }
      });
    }

    test("without load_state_dict the sequence differs (the test can fail)", async () => {
      const make = configs[0]![1];
      const want = await straight(make, async);
      expect(await resumed(make, 2, async, false)).not.toEqual(want);
      expect(await resumed(make, "end", async, false)).not.toEqual(want);
    });
  });
}

test("a prefetched batch that was not handed out is not consumed", async () => {
  const l = new data.DataLoader(ds, { batch_size: 4 });
  let n = 0;
  for await (const _ of l) {
    await new Promise((r) => setImmediate(r));
    if (++n === 2) {
      expect(l.prefetched).toBeGreaterThan(0); // batch 3 was made ahead
      expect(l.state_dict().num_yielded).toBe(2);
      break;
    }
  }
  expect(l.state_dict()).toMatchObject({ iterator_finished: false, num_yielded: 2 });
});

test("the generator shared with other draws (dropout's): later epochs and the draws match too", () => {
  const run = (resumeAt: number | null) => {
    let g = new loom.Generator(5);
    let l = new data.DataLoader(ds, { batch_size: 4, shuffle: true, generator: g });
    const seen: unknown[] = [];
    for (let e = 0; e < 3; e++) {
      let i = 0;
      for (const b of l) {
        seen.push(vals(b), g.randint(0, 1000)); // a draw after each step
        if (e === 1 && ++i === resumeAt) {
          const sd = roundTrip(l.state_dict());
          g = new loom.Generator(5);
          g.randint(0, 7); // elsewhere: the new process's generator is not where the old one was
          l = new data.DataLoader(ds, { batch_size: 4, shuffle: true, generator: g });
          l.load_state_dict(sd);
          break;
        }
      }
      if (e === 1 && resumeAt !== null) for (const b of l) seen.push(vals(b), g.randint(0, 1000));
    }
    return seen;
  };
  const want = run(null);
  expect(run(2)).toEqual(want);
  expect(run(6)).toEqual(want);
});

test("DistributedSampler (set_epoch each epoch): resumed rank 1 of 2 sees the same batches", () => {
  const make = () => new data.DataLoader(ds, { batch_size: 3, sampler: new data.DistributedSampler(ds, { num_replicas: 2, rank: 1, seed: 4 }) });
  const epochs = (l: data.DataLoader<any, any>, from: number, stop: number | null) => {
    const out: unknown[] = [];
    for (let e = from; e < 3; e++) {
      (l.sampler as data.DistributedSampler).set_epoch(e);
      let i = 0;
      for (const b of l) {
        out.push(vals(b));
        if (stop !== null && e === 1 && ++i === stop) return { out, sd: roundTrip(l.state_dict()) };
      }
    }
    return { out, sd: null };
  };
  const want = epochs(make(), 0, null).out;
  for (const stop of [1, 3]) {
    const { out, sd } = epochs(make(), 0, stop);
    const l = make();
    l.load_state_dict(sd!);
    expect((l.sampler as data.DistributedSampler).epoch).toBe(1);
    expect([...out, ...epochs(l, 1, null).out]).toEqual(want);
  }
});

/** 0..9 as a stream whose position is its state (restarts after the end). */
class Counter extends data.IterableDataset<number> {
  pos = 0;
  *[Symbol.iterator](): Iterator<number> {
    while (this.pos < 10) yield this.pos++;
    this.pos = 0;
  }
  state_dict(): data.StateDict {
    return { pos: this.pos };
  }
  load_state_dict(sd: data.StateDict): void {
    this.pos = sd.pos as number;
  }
}
/** The same stream without state. */
class Plain extends data.IterableDataset<number> {
  *[Symbol.iterator](): Iterator<number> {
    for (let i = 0; i < 10; i++) yield i;
  }
}

for (const [name, Ds] of [["with its own state_dict (delegated)", Counter], ["without state (batches skipped)", Plain]] as const) {
  test(`IterableDataset ${name}: sync and async resume`, async () => {
    const make = () => new data.DataLoader(new Ds(), { batch_size: 3 });
    for (const async of [false, true]) {
      const want = await straight(make, async);
      expect(want[1]).toEqual([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]);
      for (const k of [1, 2, 3, 4, "end"] as const) expect([k, async, await resumed(make, k, async)]).toEqual([k, async, want]);
    }
    if (Ds === Counter) {
      // async with prefetch: the stream is read one batch ahead, the state is the handed-out one's
      const l = make();
      await take(l, 2, true);
      expect(l.state_dict().dataset_state).toEqual({ pos: 6 });
    }
  });
}

describe("a state dict of another loader, or a malformed one, raises LoomValueError naming what differs", () => {
  const make = (n = N, batch_size = 4, shuffle = true) =>
    new data.DataLoader(new data.TensorDataset(X.narrow(0, 0, n), Y.narrow(0, 0, n)), { batch_size, shuffle, generator: new loom.Generator(1) });
  const mid = () => {
    const l = make();
    take(l, 2, false);
    return roundTrip(l.state_dict());
  };
  const bad = (sd: unknown, re: RegExp, l: data.DataLoader<any, any, any> = make()) => {
    expect(() => l.load_state_dict(sd as data.StateDict)).toThrow(LoomValueError);
    expect(() => l.load_state_dict(sd as data.StateDict)).toThrow(re);
  };

  test("other dataset length, batch_size, drop_last, sampler", () => {
    bad(mid(), /dataset_length: the state dict has 23, this DataLoader has 22/, make(22));
    bad(mid(), /batch_size: the state dict has 4, this DataLoader has 5/, make(N, 5));
    bad(mid(), /sampler: the state dict has "RandomSampler", this DataLoader has "SequentialSampler"/, make(N, 4, false));
    bad(mid(), /drop_last/, new data.DataLoader(ds, { batch_size: 4, shuffle: true, drop_last: true }));
    bad(mid(), /dataset: the state dict has "map", this DataLoader has "iterable"/, new data.DataLoader(new Plain(), { batch_size: 4 }));
    const dist = (rank: number) => new data.DataLoader(ds, { batch_size: 4, sampler: new data.DistributedSampler(ds, { num_replicas: 2, rank }) });
    const l = dist(0);
    take(l, 1, false);
    bad(roundTrip(l.state_dict()), /\[DistributedSampler.load_state_dict\] rank: the state dict has 0, this DistributedSampler has 1/, dist(1));
  });

  test("malformed: not an object, missing fields, a bad count, a bad generator state", () => {
    bad(null, /must be a plain object, got null/);
    bad([], /must be a plain object, got an array/);
    bad({}, /format: the state dict has undefined, this DataLoader has "loom.DataLoader"/);
    bad({ ...mid(), num_yielded: 99 }, /num_yielded: expected an integer in \[0, 6\]/);
    bad({ ...mid(), num_yielded: 1.5 }, /num_yielded/);
    bad({ ...mid(), iterator_finished: "no" }, /iterator_finished: expected a boolean/);
    bad({ ...mid(), sampler_state: null }, /sampler_state: expected the RandomSampler's state dict/);
    const sd = mid();
    bad({ ...sd, sampler_state: { ...(sd.sampler_state as data.StateDict), generator: "AAAA" } }, /generator: the state has 3 bytes/);
    bad({ ...sd, sampler_state: { ...(sd.sampler_state as data.StateDict), generator: "%%" } }, /base64/);
    bad({ ...sd, sampler_state: { ...(sd.sampler_state as data.StateDict), n: 5 } }, /\[RandomSampler.load_state_dict\] n: the state dict has 5, this RandomSampler has 23/);
    // a valid one still loads after the failures, and state_dict gives it back before iterating
    const l = make();
    l.load_state_dict(sd);
    expect(l.state_dict()).toEqual(sd);
  });
});
