/**
 * The memo of materialized weights: dense tensors computed from weight nodes, kept under a byte
 * budget and evicted least-recently-used first. A node's pieces never change after construction
 * (a weight graph is immutable: `optimize()` and `compress` build new nodes), so an entry never
 * goes stale; it is only evicted.
 */
import type { Tensor } from "../lazy/tensor.ts";
import { itemsize } from "../tensor/dtype.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { numel } from "../tensor/shape.ts";

/** Counters of one cache since it was made or last `clear()`ed. */
export interface CacheStats {
  hits: number;
  misses: number;
  evictions: number;
  /** Bytes held now. */
  bytes: number;
  /** Entries held now. */
  entries: number;
  budget: number;
}

/** Bytes of a dense tensor as stored (numel × itemsize). */
export function tensor_bytes(t: { shape: readonly number[]; dtype: Tensor["dtype"] }): number {
  return numel(t.shape) * itemsize[t.dtype];
}

/**
 * An LRU map from a key (a weight node) to its materialized dense tensor, holding at most
 * `budget` bytes. An entry larger than the budget is computed but not kept.
 */
export class WeightCache<K extends object = object> {
  private readonly map = new Map<K, Tensor>(); // insertion order = recency order (oldest first)
  private _bytes = 0;
  private _budget: number;
  private hits = 0;
  private misses = 0;
  private evictions = 0;

  /**
   * @param budget - bytes (a non-negative number; Infinity keeps everything)
   * @throws LoomValueError if budget is negative or NaN
   */
  constructor(budget: number) {
    this._budget = checkBudget(budget);
  }

  get budget(): number {
    return this._budget;
  }

  /** Change the budget, evicting least-recently-used entries until the held bytes fit. */
  set_budget(budget: number): void {
    this._budget = checkBudget(budget);
    this.evictTo(this._budget);
  }

  /** The cached tensor for `key` (marking it most recently used), or undefined. */
  get(key: K): Tensor | undefined {
    const t = this.map.get(key);
    if (t === undefined) return undefined;
    this.map.delete(key);
    this.map.set(key, t);
    return t;
  }

  has(key: K): boolean {
    return this.map.has(key);
  }

  /** Keep `value` for `key` if it fits the budget, evicting older entries to make room. */
  put(key: K, value: Tensor): void {
    this.delete(key);
    const b = tensor_bytes(value);
    if (b > this._budget) return;
    this.evictTo(this._budget - b);
    this.map.set(key, value);
    this._bytes += b;
  }

  /**
   * The cached value for `key`, or `compute()` stored under the budget (counted as a miss).
   */
  get_or_compute(key: K, compute: () => Tensor): Tensor {
    const hit = this.get(key);
    if (hit !== undefined) {
      this.hits++;
      return hit;
    }
    this.misses++;
    const v = compute();
    this.put(key, v);
    return v;
  }

  delete(key: K): boolean {
    const t = this.map.get(key);
    if (t === undefined) return false;
    this.map.delete(key);
    this._bytes -= tensor_bytes(t);
    return true;
  }

  /** Drop every entry and reset the counters. */
  clear(): void {
    this.map.clear();
    this._bytes = 0;
    this.hits = this.misses = this.evictions = 0;
  }

  stats(): CacheStats {
    return { hits: this.hits, misses: this.misses, evictions: this.evictions, bytes: this._bytes, entries: this.map.size, budget: this._budget };
  }

  private evictTo(limit: number): void {
    for (const [k, t] of this.map) {
      if (this._bytes <= limit) break;
      this.map.delete(k);
      this._bytes -= tensor_bytes(t);
      this.evictions++;
    }
  }
}

function checkBudget(b: number): number {
  if (typeof b !== "number" || Number.isNaN(b) || b < 0) throw new LoomValueError(`[WeightCache] budget must be a non-negative number of bytes, got ${b}`);
  return b;
}

/** Default budget of the process-wide cache: 256 MiB of materialized weights. */
export const DEFAULT_CACHE_BUDGET = 256 * 1024 * 1024;

let defaultCache = new WeightCache<object>(DEFAULT_CACHE_BUDGET);

/** The process-wide cache `WeightNode.materialize()` uses unless given another. */
export function default_weight_cache(): WeightCache<object> {
  return defaultCache;
}

/** Set the process-wide cache's budget in bytes (0 disables memoization). */
export function set_weight_cache_budget(bytes: number): void {
  defaultCache.set_budget(bytes);
}

/** Replace the process-wide cache (tests use a fresh one). @returns the previous cache */
export function set_default_weight_cache(c: WeightCache<object>): WeightCache<object> {
  const prev = defaultCache;
  defaultCache = c;
  return prev;
}
