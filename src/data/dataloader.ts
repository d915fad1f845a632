/**
 * DataLoader (torch.utils.data.DataLoader): batches of a dataset, in sampler order, collated.
 *
 * Both `for (const b of loader)` and `for await (const b of loader)` work. The async form
 * prefetches: once a batch is handed out, the next one is made in a macrotask (setImmediate),
 * which runs while the caller awaits something, typically the step's result
 * (`await loss.data()`): the native backend runs the step's plan on its own thread, so reading
 * and collating the next batch overlaps the step (`prefetched` counts the batches made that way).
 * JavaScript has one thread, so the sync form cannot overlap: it makes each batch when asked.
 *
 * Resuming mid-epoch (torchdata's StatefulDataLoader): `state_dict()` is a plain JSON-able object
 * (it round-trips through loom.save / loom.load) saying where iteration stands: the sampler's
 * state at the start of the epoch in progress (for a RandomSampler its generator's state, from
 * which the epoch's permutation is drawn again), the sampler's state now (what later epochs draw
 * from), and `num_yielded`, the batches of that epoch handed out (a prefetched batch not yet handed
 * out does not count). After `load_state_dict(sd)`, the next iteration is the rest of the
 * interrupted epoch, starting with the batch that would have come next (empty when the state was
 * taken after the epoch's last batch but before the loop ended), and later epochs shuffle as the
 * uninterrupted run. Skipped batches are not read. An IterableDataset with its own
 * `state_dict`/`load_state_dict` is asked for its state after each batch and restored from the
 * state after the last batch handed out; one without them is iterated again and its first
 * `num_yielded` batches dropped, which is exact only if it yields the same stream each time. A
 * sampler without state is resumed the same way (its order iterated again and skipped).
 */
import { LoomValueError } from "../tensor/errors.ts";
import type { Generator } from "../tensor/rng.ts";
import {
  Collated, Dataset, IterableDataset, RandomSampler, SequentialSampler, default_collate, expectState, isStateful,
  type Sampler, type StateDict, type StateValue,
} from "./dataset.ts";

/** The `format` of a DataLoader state dict, and its version. */
const FORMAT = "loom.DataLoader";
const VERSION = 1;
/** A batch as made, with a stateful IterableDataset's state after it and whether its stream had ended. */
type Item<B> = { batch: B; state: StateValue; ended: boolean };

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
  /** An epoch was started and not finished (the iterator has not said done). */
  private inProgress = false;
  /** Batches of the epoch in progress handed out to the caller. */
  private numYielded = 0;
  /** The sampler's state at the start of the epoch in progress (null: a sampler without state). */
  private epochStart: StateValue = null;
  /** An IterableDataset's state after the last batch handed out. */
  private datasetState: StateValue = null;
  /** The IterableDataset's stream had ended when the last batch handed out was made. */
  private datasetEnded = false;
  /** Set by load_state_dict until the next iteration starts: the state loaded and what it resumes. */
  private resume: { sd: StateDict; order: number[] | null; skip: number; ended: boolean } | null = null;

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

  /** Index lists of batches, batch_size indices each (the last one short unless drop_last). */
  private *indexBatches(order: Iterable<number>): IterableIterator<number[]> {
    let cur: number[] = [];
    for (const i of order) {
      cur.push(i);
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

  /**
   * Start an epoch (on the iterator's first `next`, before the sampler draws) and make its batches,
   * each with the dataset's state after it (stateful IterableDataset) or null. Counting what is
   * handed out is the callers' job: the async one makes a batch before handing it out.
   */
  private *epoch(): IterableIterator<Item<B>> {
    const resume = this.resume;
    this.resume = null;
    this.inProgress = true;
    this.numYielded = resume ? (resume.sd.num_yielded as number) : 0;
    if (this.sampler) {
      this.epochStart = resume ? resume.sd.sampler_epoch_start! : isStateful(this.sampler) ? this.sampler.state_dict() : null;
      for (const idx of this.indexBatches(resume?.order ?? this.sampler)) yield { batch: this.make(idx), state: null, ended: false };
      return;
    }
    const ds = this.dataset as IterableDataset<T>;
    const stateful = isStateful(ds);
    this.datasetState = stateful ? ds.state_dict() : null;
    this.datasetEnded = !!resume?.ended;
    if (resume?.ended) return;
    let skip = resume?.skip ?? 0;
    let cur: T[] = [];
    for (const s of ds) {
      cur.push(s);
      if (cur.length < this.batch_size) continue;
      if (skip > 0) skip--;
      else yield { batch: this.collate(cur), state: stateful ? ds.state_dict() : null, ended: false };
      cur = [];
    }
    // the stream has ended: a state taken after this batch resumes with nothing left of the epoch
    if (cur.length && !this.drop_last && skip === 0) yield { batch: this.collate(cur), state: stateful ? ds.state_dict() : null, ended: true };
  }

  /** Record a batch as handed out. */
  private handOut(item: Item<B>): void {
    this.numYielded++;
    this.datasetState = item.state;
    this.datasetEnded = item.ended;
  }

  /** The epoch ended (the iterator said done). */
  private finish(): void {
    this.inProgress = false;
    this.numYielded = 0;
  }

  /** The batches of one epoch, each made when asked. */
  *[Symbol.iterator](): Iterator<B> {
    for (const item of this.epoch()) {
      this.handOut(item);
      yield item.batch;
    }
    this.finish();
  }

  /** The batches of one epoch; the next one is made while the caller awaits (see the file comment). */
  async *[Symbol.asyncIterator](): AsyncIterator<B> {
    const it = this.epoch();
    let next = it.next();
    let timer: ReturnType<typeof setImmediate> | null = null;
    try {
      while (!next.done) {
        const item = next.value;
        const ahead: { next: IteratorResult<Item<B>> | null; failure: unknown } = { next: null, failure: null };
        timer = this.prefetchOn
          ? setImmediate(() => {
            try {
              ahead.next = it.next();
              if (!ahead.next.done) this.prefetched++;
            } catch (e) {
              ahead.failure = e ?? new Error("prefetch failed");
            }
          })
          : null;
        this.handOut(item);
        yield item.batch;
        clearImmediate(timer ?? undefined);
        timer = null;
        if (ahead.failure) throw ahead.failure;
        next = ahead.next ?? it.next();
      }
      this.finish();
    } finally {
      // the caller left early (break): no batch is made for nobody
      if (timer) clearImmediate(timer);
    }
  }

  /** The configuration a state dict must match: [key, this loader's value]. */
  private config(): [string, StateValue][] {
    const ds = this.dataset;
    return [
      ["format", FORMAT],
      ["version", VERSION],
      ["dataset", ds instanceof IterableDataset ? "iterable" : "map"],
      ["dataset_length", ds instanceof IterableDataset ? null : ds.length],
      ["batch_size", this.batch_size],
      ["drop_last", this.drop_last],
      ["sampler", this.sampler ? this.sampler.constructor.name : null],
      ["sampler_length", this.sampler ? this.sampler.length : null],
    ];
  }

  /**
   * Where iteration stands (torchdata StatefulDataLoader.state_dict), as a plain JSON-able object:
   * the configuration (format, version, dataset kind and length, batch_size, drop_last, `sampler`
   * class name and sampler_length), `iterator_finished` (no epoch in progress), `num_yielded`
   * (batches of the epoch in progress handed out), `sampler_epoch_start` (the sampler's state when
   * that epoch began, or now when none is in progress), `sampler_state` (now), `dataset_state` (a
   * stateful IterableDataset's state after the last batch handed out), `dataset_exhausted` (the
   * IterableDataset's stream ended before the last batch handed out was made: nothing is left of
   * the epoch). Take it between batches: the batch the caller holds counts as consumed.
   */
  state_dict(): StateDict {
    if (this.resume) return structuredClone(this.resume.sd);
    const sd: StateDict = Object.fromEntries(this.config());
    const now = this.sampler && isStateful(this.sampler) ? this.sampler.state_dict() : null;
    sd.iterator_finished = !this.inProgress;
    sd.num_yielded = this.inProgress ? this.numYielded : 0;
    sd.sampler_epoch_start = this.inProgress && this.sampler ? this.epochStart : now;
    sd.sampler_state = now;
    const ds = this.dataset;
    sd.dataset_state = ds instanceof IterableDataset && isStateful(ds) ? (this.inProgress ? this.datasetState : ds.state_dict()) : null;
    sd.dataset_exhausted = this.inProgress && this.datasetEnded;
    return sd;
  }

  /**
   * Continue from a `state_dict()` (torchdata StatefulDataLoader.load_state_dict): the next
   * iteration is the rest of the interrupted epoch, from the batch that would have come next; the
   * sampler (and its generator) and a stateful IterableDataset are restored.
   * @throws LoomValueError for a state dict of a loader with another configuration (dataset kind
   *   or length, batch_size, drop_last, sampler class or length), a malformed one (naming the
   *   field), or a sampler / dataset state its `load_state_dict` rejects
   */
  load_state_dict(sd: StateDict): void {
    for (const [k, v] of this.config()) expectState("DataLoader", sd, k, v);
    const bad = (k: string, want: string) => new LoomValueError(`[DataLoader.load_state_dict] ${k}: expected ${want}, got ${JSON.stringify(sd[k])}`);
    if (typeof sd.iterator_finished !== "boolean") throw bad("iterator_finished", "a boolean");
    if (typeof sd.dataset_exhausted !== "boolean") throw bad("dataset_exhausted", "a boolean");
    const finished = sd.iterator_finished;
    const n = sd.num_yielded;
    const most = this.sampler ? this.length : Infinity;
    if (!Number.isInteger(n) || (n as number) < 0 || (n as number) > most || (finished && n !== 0)) {
      throw bad("num_yielded", finished ? "0 (the epoch was finished)" : `an integer in [0, ${most}] (batches of the epoch handed out)`);
    }
    const plain = (v: StateValue | undefined) => !!v && typeof v === "object" && !Array.isArray(v);
    let order: number[] | null = null;
    if (this.sampler) {
      if (isStateful(this.sampler)) {
        if (!plain(sd.sampler_state)) throw bad("sampler_state", `the ${sd.sampler}'s state dict`);
        if (!plain(sd.sampler_epoch_start)) throw bad("sampler_epoch_start", `the ${sd.sampler}'s state dict`);
        this.sampler.load_state_dict(sd.sampler_state as StateDict); // validates before the draw below
        if (!finished) {
          // draw the interrupted epoch's order again, then put the sampler where it was at state_dict()
          this.sampler.load_state_dict(sd.sampler_epoch_start as StateDict);
          order = [...this.sampler];
          this.sampler.load_state_dict(sd.sampler_state as StateDict);
        }
      } else {
        if (sd.sampler_state !== null) throw bad("sampler_state", `null (this loader's ${sd.sampler} has no state)`);
        if (!finished) order = [...this.sampler];
      }
      if (order) order = order.slice((n as number) * this.batch_size);
    } else {
      const ds = this.dataset as IterableDataset<T>;
      if (isStateful(ds)) {
        if (!plain(sd.dataset_state)) throw bad("dataset_state", "the IterableDataset's state dict");
        ds.load_state_dict(sd.dataset_state as StateDict);
      } else if (sd.dataset_state !== null) throw bad("dataset_state", "null (this loader's IterableDataset has no state_dict)");
    }
    const keep = structuredClone(sd);
    // an IterableDataset with state continues where it stood; one without is read again and skipped
    const skip = this.sampler || isStateful(this.dataset) || finished ? 0 : (n as number);
    this.resume = finished ? null : { sd: keep, order, skip, ended: !this.sampler && sd.dataset_exhausted };
    this.inProgress = false;
    this.numYielded = 0;
  }
}
