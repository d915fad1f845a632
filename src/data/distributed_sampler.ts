/**
 * DistributedSampler (torch.utils.data.distributed.DistributedSampler): each of `num_replicas`
 * processes reads its own `1/num_replicas` of the dataset. Indices (shuffled by a generator seeded
 * with `seed + epoch`, so every rank draws the same permutation) are padded by repeating the first
 * ones to a multiple of num_replicas (or, with drop_last, cut to one), then rank r takes every
 * num_replicas-th index from r.
 *
 * The permutation is Loom's `randperm` (a Fisher–Yates shuffle over Loom's Generator), not torch's
 * randperm: with shuffle the order differs from PyTorch's; the split, padding, lengths and
 * non-shuffled order are PyTorch's (tests/data/distributed_sampler.test.ts compares with goldens).
 * Defaults for num_replicas and rank come from the launcher's environment (WORLD_SIZE/RANK as
 * torchrun sets them, or OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK as mpirun does), so this file
 * needs no process group; a process started alone is a world of one.
 */
import { Generator } from "../tensor/rng.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { expectState, randperm, type Sampler, type StateDict, type Stateful } from "./dataset.ts";

export interface DistributedSamplerOptions {
  /** Number of processes (default: WORLD_SIZE or OMPI_COMM_WORLD_SIZE, else 1). */
  num_replicas?: number;
  /** This process's rank (default: RANK or OMPI_COMM_WORLD_RANK, else 0). */
  rank?: number;
  /** Shuffle each epoch (default true). */
  shuffle?: boolean;
  /** Seed of the shuffle, the same on every rank (default 0). */
  seed?: number;
  /** Drop the tail that does not divide evenly instead of padding with repeated indices (default false). */
  drop_last?: boolean;
}

function envInt(...names: string[]): number | undefined {
  for (const n of names) {
    const v = process.env[n];
    if (v !== undefined && v !== "") return Number(v);
  }
  return undefined;
}

export class DistributedSampler implements Sampler, Stateful {
  readonly num_replicas: number;
  readonly rank: number;
  readonly shuffle: boolean;
  readonly seed: number;
  readonly drop_last: boolean;
  /** Indices this rank yields per epoch (torch's num_samples). */
  readonly num_samples: number;
  /** num_samples × num_replicas. */
  readonly total_size: number;
  epoch = 0;

  /**
   * @param dataset - anything with a `length` (a Dataset), or the length itself
   * @throws LoomValueError for num_replicas < 1, a rank outside [0, num_replicas - 1], or a negative length
   */
  constructor(readonly dataset: { readonly length: number } | number, opts: DistributedSamplerOptions = {}) {
    this.num_replicas = opts.num_replicas ?? envInt("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE") ?? 1;
    this.rank = opts.rank ?? envInt("RANK", "OMPI_COMM_WORLD_RANK") ?? 0;
    this.shuffle = opts.shuffle ?? true;
    this.seed = opts.seed ?? 0;
    this.drop_last = opts.drop_last ?? false;
    if (!(Number.isInteger(this.num_replicas) && this.num_replicas >= 1)) throw new LoomValueError(`[DistributedSampler] num_replicas must be a positive integer, got ${this.num_replicas}`);
    if (!(Number.isInteger(this.rank) && this.rank >= 0 && this.rank < this.num_replicas)) {
      throw new LoomValueError(`[DistributedSampler] Invalid rank ${this.rank}, rank should be in the interval [0, ${this.num_replicas - 1}]`);
    }
    const n = this.n;
    if (!(Number.isInteger(n) && n >= 0)) throw new LoomValueError(`[DistributedSampler] dataset length must be a non-negative integer, got ${n}`);
    // torch: with drop_last and a ragged tail, ceil((n - R) / R) = floor(n / R) samples each
    this.num_samples = this.drop_last && n % this.num_replicas !== 0
      ? Math.ceil((n - this.num_replicas) / this.num_replicas) || 0 // -0 when n < R
      : Math.ceil(n / this.num_replicas);
    this.total_size = this.num_samples * this.num_replicas;
  }

  private get n(): number {
    return typeof this.dataset === "number" ? this.dataset : this.dataset.length;
  }

  /** Samples per epoch on this rank (torch's __len__). */
  get length(): number {
    return this.num_samples;
  }

  /** Make the next epoch's shuffle differ (call before each epoch, on every rank, with the same value). */
  set_epoch(epoch: number): void {
    this.epoch = epoch;
  }

  /** This rank's indices for the current epoch. */
  indices(): number[] {
    const n = this.n;
    let idx = this.shuffle ? randperm(n, new Generator(this.seed + this.epoch)) : Array.from({ length: n }, (_, i) => i);
    if (!this.drop_last) {
      // repeat the first indices (the whole list as often as needed) to reach total_size
      for (let i = 0; idx.length < this.total_size; i++) idx.push(idx[i]!);
    } else idx = idx.slice(0, this.total_size);
    const mine: number[] = [];
    for (let i = this.rank; i < this.total_size; i += this.num_replicas) mine.push(idx[i]!);
    return mine;
  }

  *[Symbol.iterator](): Iterator<number> {
    yield* this.indices();
  }

  /** {epoch, and the configuration it was taken under: num_replicas, rank, shuffle, seed, drop_last, dataset_length}. */
  state_dict(): StateDict {
    return { epoch: this.epoch, num_replicas: this.num_replicas, rank: this.rank, shuffle: this.shuffle, seed: this.seed, drop_last: this.drop_last, dataset_length: this.n };
  }

  /**
   * Restore the epoch (what set_epoch set), so the next iteration has that epoch's order.
   * @throws LoomValueError when the configuration differs from this sampler's (naming the field)
   *   or the epoch is not an integer
   */
  load_state_dict(sd: StateDict): void {
    for (const [k, v] of [["num_replicas", this.num_replicas], ["rank", this.rank], ["shuffle", this.shuffle], ["seed", this.seed], ["drop_last", this.drop_last], ["dataset_length", this.n]] as const) {
      expectState("DistributedSampler", sd, k, v);
    }
    if (!Number.isInteger(sd.epoch)) throw new LoomValueError(`[DistributedSampler.load_state_dict] epoch: expected an integer, got ${JSON.stringify(sd.epoch)}`);
    this.epoch = sd.epoch as number;
  }
}
