/**
 * DataLoader (torch.utils.data.DataLoader): batches of a dataset, in sampler order, collated.
 *
 * Both `for (const b of loader)` and `for await (const b of loader)` work. The async form
 * prefetches: once a batch is handed out, the next one is made in a macrotask (setImmediate),
 * which runs while the caller awaits something, typically the step's result
 * (`await loss.data()`): the native backend runs the step's plan on its own thread, so reading
 * and collating the next batch overlaps the step (`prefetched` counts the batches made that way).
 * JavaScript has one thread, so the sync form cannot overlap: it makes each batch when asked.
 */
import { LoomValueError } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import { Collated, Dataset, IterableDataset, RandomSampler, SequentialSampler, default_collate, type Sampler } from "./dataset.ts";

export interface DataLoaderOptions<T, B> {
  /** Samples per batch (default 1). */
  batch_size?: number;
  /** A fresh random order every epoch (default false). */
  shuffle?: boolean;
  /** Indices to read instead of 0..n-1 or a shuffle (exclusive with shuffle). */
  sampler?: Sampler;
  /** Drop the last batch when it is smaller than batch_size (default false). */
  drop_last?: boolean;
  /** Samples -> batch (default `default_collate`). */
  collate_fn?: (samples: T[]) => B;
  /** The generator of the shuffle (default: the default generator). */
  generator?: Generator;
  /** Make the next batch while the caller awaits (async iteration only; default true). */
  prefetch?: boolean;
}

/**
 * T: the sample type; B: the batch type (what collate_fn returns); D: the dataset's own type, so
 * `loader.dataset` keeps it (`loader.dataset.length` on a map-style dataset, its own fields).
 */
export class DataLoader<T = unknown, B = any, D extends Dataset<T> | IterableDataset<T> = Dataset<T> | IterableDataset<T>> implements Iterable<B>, AsyncIterable<B> {
  readonly batch_size: number;
  readonly drop_last: boolean;
  readonly sampler: Sampler | null;
  private readonly collate: (samples: T[]) => B;
  private readonly custom: boolean;
  private readonly prefetchOn: boolean;
  /** Batches made ahead in a macrotask while the caller awaited (async iteration). */
  prefetched = 0;

  /**
   * @throws LoomValueError for a batch_size that is not a positive integer, shuffle together with
   *   a sampler, or shuffle/sampler with an IterableDataset (as torch)
   */
  constructor(readonly dataset: D & (Dataset<T> | IterableDataset<T>), opts: DataLoaderOptions<T, B> = {}) {
    const bs = opts.batch_size ?? 1;
    if (!Number.isInteger(bs) || bs <= 0) throw new LoomValueError(`[DataLoader] batch_size should be a positive integer value, but got batch_size=${bs}`);
    if (opts.shuffle && opts.sampler) throw new LoomValueError("[DataLoader] sampler option is mutually exclusive with shuffle");
    const iterable = dataset instanceof IterableDataset;
    if (iterable && (opts.shuffle || opts.sampler)) throw new LoomValueError("[DataLoader] with an IterableDataset, shuffle and sampler are not allowed (the dataset decides its order)");
    this.batch_size = bs;
    this.drop_last = opts.drop_last ?? false;
    this.sampler = iterable ? null : opts.sampler ?? (opts.shuffle
      ? new RandomSampler((dataset as Dataset<T>).length, { generator: opts.generator })
      : new SequentialSampler((dataset as Dataset<T>).length));
    this.custom = opts.collate_fn !== undefined;
    this.collate = opts.collate_fn ?? (default_collate as (s: T[]) => B);
    this.prefetchOn = opts.prefetch ?? true;
  }

  /** Batches per epoch (torch's len(loader)). @throws LoomValueError for an IterableDataset */
  get length(): number {
    if (!this.sampler) throw new LoomValueError("[DataLoader] an IterableDataset has no length");
    const n = this.sampler.length;
    return this.drop_last ? Math.floor(n / this.batch_size) : Math.ceil(n / this.batch_size);
  }

  /** Index lists of the batches of one epoch (the sampler is read once per epoch). */
  private *indexBatches(): IterableIterator<number[]> {
    let cur: number[] = [];
    for (const i of this.sampler!) {
      cur.push(i);
      if (cur.length === this.batch_size) {
        yield cur;
        cur = [];
      }
    }
    if (cur.length && !this.drop_last) yield cur;
  }

  /** Sample lists of an IterableDataset, batch_size at a time. */
  private *streamBatches(): IterableIterator<T[]> {
    let cur: T[] = [];
    for (const s of this.dataset as IterableDataset<T>) {
      cur.push(s);
      if (cur.length === this.batch_size) {
        yield cur;
        cur = [];
      }
    }
    if (cur.length && !this.drop_last) yield cur;
  }

  private make(indices: number[]): B {
    const d = this.dataset as Dataset<T>;
    if (d.getitems) {
      const got = d.getitems(indices);
      if (got instanceof Collated) return this.custom ? this.collate(indices.map((i) => d.get(i))) : (got.batch as B);
      return this.collate(got as T[]);
    }
    return this.collate(indices.map((i) => d.get(i)));
  }

  /** The batches of one epoch, each made when asked. */
  *[Symbol.iterator](): Iterator<B> {
    if (!this.sampler) {
      for (const s of this.streamBatches()) yield this.collate(s);
      return;
    }
    for (const idx of this.indexBatches()) yield this.make(idx);
  }

  /** The batches of one epoch; the next one is made while the caller awaits (see the file comment). */
  async *[Symbol.asyncIterator](): AsyncIterator<B> {
    const it = this[Symbol.iterator]();
    let next = it.next();
    while (!next.done) {
      const batch = next.value;
      const ahead: { next: IteratorResult<B> | null; failure: unknown } = { next: null, failure: null };
      const timer = this.prefetchOn
        ? setImmediate(() => {
          try {
            ahead.next = it.next();
            if (!ahead.next.done) this.prefetched++;
          } catch (e) {
            ahead.failure = e ?? new Error("prefetch failed");
          }
        })
        : null;
      yield batch;
      if (timer) clearImmediate(timer);
      if (ahead.failure) throw ahead.failure;
      next = ahead.next ?? it.next();
    }
  }
}
