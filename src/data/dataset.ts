/**
 * Datasets (torch.utils.data): map-style (`Dataset`: `get(i)` and `length`, torch's
 * `__getitem__` / `__len__`, with an optional batched `getitems(indices)`, torch's
 * `__getitems__`), iterable (`IterableDataset`), and the helpers `TensorDataset`, `Subset`,
 * `random_split`, `ConcatDataset`. Samplers (which indices, in what order) and `default_collate`
 * (a list of samples -> one batch) live here too, so `DataLoader` (dataloader.ts) only drives them.
 */
import { stack } from "../lazy/functional.ts";
import { tensor } from "../lazy/creation.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomIndexError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { STATE_BYTES, default_generator, type Generator } from "../tensor/rng.ts";

/** A map-style dataset: samples by index in [0, length). */
export abstract class Dataset<T = unknown> {
  /** Sample `index` (torch's `__getitem__`). @throws LoomIndexError outside [0, length) */
  abstract get(index: number): T;
  /** Number of samples (torch's `__len__`). */
  abstract get length(): number;
  /** Several samples at once (torch's `__getitems__`), when a dataset can fetch them faster together. */
  getitems?(indices: readonly number[]): T[] | unknown;
}

/** A stream of samples (torch's IterableDataset): the DataLoader batches them in order. */
export abstract class IterableDataset<T = unknown> {
  abstract [Symbol.iterator](): Iterator<T>;
}

/** Throws LoomIndexError unless 0 <= i < n (an integer). */
export function checkIndex(what: string, i: number, n: number): void {
  if (!Number.isInteger(i) || i < 0 || i >= n) throw new LoomIndexError(`[${what}] index ${i} is out of range for a dataset of ${n} samples`);
}

/**
 * Rows of tensors that share their first dim (torch.utils.data.TensorDataset): sample i is the
 * tuple of row i of each. `getitems` picks a whole batch with one index_select per tensor.
 * @throws LoomValueError when the first dims differ
 */
export class TensorDataset extends Dataset<Tensor[]> {
  readonly tensors: readonly Tensor[];
  constructor(...tensors: Tensor[]) {
    super();
    const n = tensors[0]?.shape[0];
    if (n === undefined || tensors.some((t) => t.shape[0] !== n)) {
      throw new LoomValueError(`[TensorDataset] size mismatch between tensors: ${tensors.map((t) => fmtShape(t.shape)).join(", ")}`);
    }
    this.tensors = tensors;
  }
  get length(): number {
    return this.tensors[0]!.shape[0]!;
  }
  get(index: number): Tensor[] {
    checkIndex("TensorDataset", index, this.length);
    return this.tensors.map((t) => t.narrow(0, index, 1).squeeze(0));
  }
  /** The batch already collated: each tensor's rows `indices` ([B, ...]). */
  override getitems(indices: readonly number[]): Collated {
    for (const i of indices) checkIndex("TensorDataset", i, this.length);
    const idx = tensor([...indices], { dtype: "int64" });
    return new Collated(this.tensors.map((t) => t.index_select(0, idx)));
  }
}

/** A batch that `getitems` already collated (default_collate passes it through). */
export class Collated {
  constructor(readonly batch: unknown) {}
}

/** The samples of `dataset` at `indices` (torch.utils.data.Subset). */
export class Subset<T> extends Dataset<T> {
  constructor(readonly dataset: Dataset<T>, readonly indices: readonly number[]) {
    super();
  }
  get length(): number {
    return this.indices.length;
  }
  get(index: number): T {
    checkIndex("Subset", index, this.length);
    return this.dataset.get(this.indices[index]!);
  }
}

/** Datasets one after another (torch.utils.data.ConcatDataset). */
export class ConcatDataset<T> extends Dataset<T> {
  private readonly ends: number[] = [];
  constructor(readonly datasets: readonly Dataset<T>[]) {
    super();
    let n = 0;
    for (const d of datasets) this.ends.push((n += d.length));
  }
  get length(): number {
    return this.ends.at(-1) ?? 0;
  }
  get(index: number): T {
    checkIndex("ConcatDataset", index, this.length);
    const k = this.ends.findIndex((e) => index < e);
    return this.datasets[k]!.get(index - (k ? this.ends[k - 1]! : 0));
  }
}

/** A permutation of 0..n-1 (Fisher–Yates with `generator`): deterministic per seed. */
export function randperm(n: number, generator: Generator = default_generator): number[] {
  const p = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = generator.randint(0, i + 1);
    const t = p[i]!;
    p[i] = p[j]!;
    p[j] = t;
  }
  return p;
}

/**
 * Split a dataset into non-overlapping subsets of the given lengths (torch random_split); lengths
 * may be fractions summing to 1 (remainders go to the first subsets, as torch).
 * @throws LoomValueError when the lengths do not add up to the dataset's length (or to 1)
 */
export function random_split<T>(dataset: Dataset<T>, lengths: readonly number[], generator: Generator = default_generator): Subset<T>[] {
  const n = dataset.length;
  let sizes = [...lengths];
  if (sizes.every((l) => l >= 0 && l <= 1) && Math.abs(sizes.reduce((a, b) => a + b, 0) - 1) < 1e-9 && sizes.some((l) => !Number.isInteger(l))) {
    sizes = lengths.map((f) => Math.floor(n * f));
    let rest = n - sizes.reduce((a, b) => a + b, 0);
    for (let i = 0; rest > 0; i = (i + 1) % sizes.length, rest--) sizes[i]!++;
  }
  if (sizes.reduce((a, b) => a + b, 0) !== n || sizes.some((l) => !Number.isInteger(l) || l < 0)) {
    throw new LoomValueError(`[random_split] sum of input lengths [${lengths.join(", ")}] does not equal the length of the input dataset (${n})`);
  }
  const perm = randperm(n, generator);
  let at = 0;
  return sizes.map((l) => new Subset(dataset, perm.slice(at, (at += l))));
}

/**
 * Which indices a DataLoader reads, in order (torch.utils.data.Sampler): SequentialSampler
 * 0..n-1; RandomSampler a fresh permutation per epoch, or `num_samples` draws with replacement.
 */
export interface Sampler extends Iterable<number> {
  readonly length: number;
}

/** A JSON-able value of a saved state: numbers, strings, booleans, null, arrays and plain objects of them. */
export type StateValue = number | string | boolean | null | StateValue[] | { [key: string]: StateValue };
/** A state dict of a sampler, a dataset or a DataLoader (a plain object of StateValues). */
export type StateDict = { [key: string]: StateValue };

/**
 * Something whose position can be saved and restored (torchdata's Stateful protocol): a sampler
 * or an IterableDataset that implements it lets `DataLoader.state_dict` delegate to it.
 * - A sampler's `state_dict()` is what its NEXT iteration draws from (RandomSampler: the
 *   generator's state; DistributedSampler: the epoch); `load_state_dict(sd)` makes the next
 *   iteration yield the same order as the one that followed `state_dict()`.
 * - An IterableDataset's `state_dict()` says where its stream stands; after
 *   `load_state_dict(sd)`, a new iterator continues with the sample that would have come next.
 */
export interface Stateful {
  state_dict(): StateDict;
  load_state_dict(sd: StateDict): void;
}

/** Whether `x` implements `state_dict` and `load_state_dict`. */
export function isStateful(x: unknown): x is Stateful {
  return !!x && typeof (x as Stateful).state_dict === "function" && typeof (x as Stateful).load_state_dict === "function";
}

/**
 * Throws LoomValueError naming `what` and `key` unless `sd[key]` equals `expected` (a state dict
 * made by a differently configured sampler or loader).
 */
export function expectState(what: string, sd: StateDict, key: string, expected: StateValue): void {
  if (!sd || typeof sd !== "object" || Array.isArray(sd)) throw new LoomValueError(`[${what}.load_state_dict] the state dict must be a plain object, got ${Array.isArray(sd) ? "an array" : sd === null ? "null" : typeof sd}`);
  if (sd[key] !== expected) throw new LoomValueError(`[${what}.load_state_dict] ${key}: the state dict has ${JSON.stringify(sd[key])}, this ${what} has ${JSON.stringify(expected)}`);
}

/** A generator's state (`Generator.get_state()`, STATE_BYTES bytes) as base64 text, JSON-able. */
export function generator_state_to_string(g: Generator): string {
  return Buffer.from(g.get_state()).toString("base64");
}

/**
 * Restore `g` from `generator_state_to_string`'s text.
 * @throws LoomValueError for text that is not base64 or not a generator's state (wrong length)
 */
export function generator_state_from_string(what: string, g: Generator, s: StateValue): void {
  if (typeof s !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) throw new LoomValueError(`[${what}.load_state_dict] generator: expected the generator's state as base64 text, got ${typeof s === "string" ? "other text" : JSON.stringify(s)}`);
  const bytes = new Uint8Array(Buffer.from(s, "base64"));
  if (bytes.length !== STATE_BYTES) throw new LoomValueError(`[${what}.load_state_dict] generator: the state has ${bytes.length} bytes, a generator's state has ${STATE_BYTES}`);
  g.set_state(bytes);
}

export class SequentialSampler implements Sampler {
  constructor(readonly length: number) {}
  *[Symbol.iterator](): Iterator<number> {
    for (let i = 0; i < this.length; i++) yield i;
  }
}

/**
 * A fresh random order every epoch. Stateful: `state_dict()` holds its generator's state (the
 * default generator when none is given), so a restored sampler draws the same next order.
 */
export class RandomSampler implements Sampler, Stateful {
  readonly length: number;
  /**
   * @param n - dataset length
   * @param opts.replacement - draw with replacement (nanoGPT's random windows); default false
   * @param opts.num_samples - samples per epoch (default n); only with replacement may it differ
   * @throws LoomValueError for num_samples without replacement other than n, or not positive
   */
  constructor(readonly n: number, readonly opts: { replacement?: boolean; num_samples?: number; generator?: Generator } = {}) {
    this.length = opts.num_samples ?? n;
    if (!Number.isInteger(this.length) || this.length <= 0) throw new LoomValueError(`[RandomSampler] num_samples should be a positive integer value, but got num_samples=${this.length}`);
    if (!opts.replacement && this.length !== n) throw new LoomValueError(`[RandomSampler] num_samples (${this.length}) other than the dataset length (${n}) needs replacement: true`);
  }
  private get generator(): Generator {
    return this.opts.generator ?? default_generator;
  }
  /** The epoch's indices, all drawn when the first is asked for (so a state taken before is the whole epoch's). */
  *[Symbol.iterator](): Iterator<number> {
    const g = this.generator;
    if (this.opts.replacement) yield* Array.from({ length: this.length }, () => g.randint(0, this.n));
    else yield* randperm(this.n, g);
  }
  /** {n, replacement, num_samples, generator: the generator's state as base64 (STATE_BYTES bytes)}. */
  state_dict(): StateDict {
    return { n: this.n, replacement: !!this.opts.replacement, num_samples: this.length, generator: generator_state_to_string(this.generator) };
  }
  /**
   * Restore the generator's state (the default generator's, when this sampler has none: as
   * torch.set_rng_state would).
   * @throws LoomValueError when n, replacement or num_samples differ from this sampler's, or the
   *   generator state is malformed
   */
  load_state_dict(sd: StateDict): void {
    expectState("RandomSampler", sd, "n", this.n);
    expectState("RandomSampler", sd, "replacement", !!this.opts.replacement);
    expectState("RandomSampler", sd, "num_samples", this.length);
    generator_state_from_string("RandomSampler", this.generator, sd.generator!);
  }
}

/**
 * A list of samples as one batch (torch.utils.data.default_collate): tensors are stacked on a new
 * dim 0; numbers become a tensor (int64 when all are integers, float64 otherwise, as Python ints
 * and floats do); booleans a bool tensor; strings stay a list; arrays (tuples) and plain objects
 * are collated position by position / key by key.
 * @throws LoomValueError for samples of different structure or shapes that cannot be stacked
 */
export function default_collate(samples: readonly unknown[]): unknown {
  if (samples.length === 1 && samples[0] instanceof Collated) return samples[0].batch;
  const first = samples[0];
  if (first instanceof Tensor) {
    if (!samples.every((s) => s instanceof Tensor)) throw new LoomValueError("[default_collate] a batch mixes tensors and other values");
    return stack(samples as Tensor[], 0);
  }
  if (typeof first === "number") return tensor(samples as number[], { dtype: (samples as number[]).every(Number.isInteger) ? "int64" : "float64" });
  if (typeof first === "boolean") return tensor(samples as boolean[]);
  if (typeof first === "string") return [...samples];
  if (Array.isArray(first)) {
    if (!samples.every((s) => Array.isArray(s) && s.length === first.length)) throw new LoomValueError("[default_collate] each element in list of batch should be of equal size");
    return first.map((_, k) => default_collate(samples.map((s) => (s as unknown[])[k])));
  }
  if (first && typeof first === "object" && Object.getPrototypeOf(first) === Object.prototype) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(first)) out[k] = default_collate(samples.map((s) => (s as Record<string, unknown>)[k]));
    return out;
  }
  throw new LoomValueError(`[default_collate] cannot collate samples of type ${first === null ? "null" : typeof first}; pass a collate_fn`);
}
