/**
 * StaticCache: a key/value cache of fixed size for autoregressive decoding (Hugging Face
 * transformers `StaticCache`, cache_utils.py). Per layer it holds two eager tensors
 * `key_cache[l]`, `value_cache[l]` of shape [B, n_head, T_max, head_dim], zero-filled when made,
 * and the number of positions written so far.
 *
 * Why every write rewrites the whole tensor, with the positions as tensor VALUES:
 * `update` computes `where(slot ∈ cache_position, new keys, old cache)` over all T_max slots and
 * writes it with one `copy_` of the full cache tensor. The token position never enters an op
 * attribute, a slice or a shape, so every decode step (input [B, 1], attention over all T_max
 * slots with a mask) records the same graph: lazy decoding compiles one plan for the prefill and
 * one for all decode steps, whatever the position. Masked slots get weight exactly 0 (see
 * `attention_mask`), so the unfilled zero slots change nothing. Eager states without grad record
 * no graph, so there only the new slots are written (HF's index_copy_): the same values, cheaper.
 *
 * Bounds are checked on JS numbers before anything is written (`check_positions`): decoding past
 * T_max raises LoomIndexError and never wraps or overwrites.
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/cache_utils.py
 * (StaticCache.update: `k_out.index_copy_(2, cache_position, key_states)`).
 */
import { arange, zeros } from "../lazy/creation.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { lift } from "../nn/execution.ts";
import { isFloating, type DType } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";

/** What the cache needs from a model config (GPT2Config has these fields). */
export interface CacheConfig {
  n_layer: number;
  n_head: number;
  n_embd: number;
  n_positions: number;
}

export interface StaticCacheOptions {
  /** The model's config: layers, heads, head_dim = n_embd / n_head; T_max defaults to n_positions. */
  config: CacheConfig;
  /** Batch size B the cache holds (HF max_batch_size; inputs must have exactly this batch). Default 1. */
  max_batch_size?: number;
  /** T_max, positions per sequence (HF max_cache_len). Default config.n_positions. */
  max_cache_len?: number;
  /** Device of the cache tensors (default "cpu"); put it on the model's device. */
  device?: string;
  /** Floating dtype of keys and values (default float32); must equal the model's activations. */
  dtype?: DType;
}

/** The most negative finite value of a float dtype (torch.finfo(dtype).min): HF's mask value. */
export function finfo_min(dtype: DType): number {
  switch (dtype) {
    case "float16": return -65504;
    case "bfloat16": return -3.3895313892515355e38;
    case "float64": return -Number.MAX_VALUE;
    default: return -3.4028234663852886e38; // float32
  }
}

export class StaticCache {
  readonly max_batch_size: number;
  readonly max_cache_len: number;
  readonly num_heads: number;
  readonly head_dim: number;
  readonly num_layers: number;
  readonly dtype: DType;
  readonly device: string;
  /** Per layer: keys [B, n_head, T_max, head_dim], written in place by `update`. */
  readonly key_cache: Tensor[];
  /** Per layer: values [B, n_head, T_max, head_dim], written in place by `update`. */
  readonly value_cache: Tensor[];
  /** Slot numbers 0..T_max-1 (int64 [T_max]): compared with cache_position as tensor values. */
  private readonly slots: Tensor;
  /** Positions 0..seen-1 have been written (HF get_seq_length). */
  private seen = 0;

  /**
   * @throws LoomValueError for a non-positive batch or length, or a head count that does not divide n_embd;
   *   LoomDtypeError for a non-floating dtype
   */
  constructor(opts: StaticCacheOptions) {
    const { config, max_batch_size = 1, max_cache_len = config.n_positions, device = "cpu", dtype = "float32" } = opts;
    for (const [k, v] of [["max_batch_size", max_batch_size], ["max_cache_len", max_cache_len], ["n_layer", config.n_layer], ["n_head", config.n_head]] as const) {
      if (!Number.isInteger(v) || v < 1) throw new LoomValueError(`[StaticCache] ${k} must be a positive integer, got ${v}`);
    }
    if (config.n_embd % config.n_head !== 0) throw new LoomValueError(`[StaticCache] n_embd=${config.n_embd} is not divisible by n_head=${config.n_head}`);
    if (!isFloating(dtype)) throw new LoomDtypeError(`[StaticCache] keys and values must have a floating dtype, got ${dtype}`);
    this.max_batch_size = max_batch_size;
    this.max_cache_len = max_cache_len;
    this.num_heads = config.n_head;
    this.head_dim = config.n_embd / config.n_head;
    this.num_layers = config.n_layer;
    this.dtype = dtype;
    this.device = device;
    const shape = [max_batch_size, this.num_heads, max_cache_len, this.head_dim];
    this.key_cache = Array.from({ length: this.num_layers }, () => zeros(shape, { dtype, device }));
    this.value_cache = Array.from({ length: this.num_layers }, () => zeros(shape, { dtype, device }));
    this.slots = arange(max_cache_len, undefined, 1, { dtype: "int64", device });
  }

  /** Positions written so far (HF get_seq_length): the next token goes to this position. */
  get_seq_length(): number {
    return this.seen;
  }

  /** T_max (HF get_max_cache_shape). */
  get_max_cache_shape(): number {
    return this.max_cache_len;
  }

  /** The shape of every key/value tensor: [B, n_head, T_max, head_dim]. */
  get shape(): number[] {
    return [this.max_batch_size, this.num_heads, this.max_cache_len, this.head_dim];
  }

  /** Zero every tensor and forget the written positions (HF reset), keeping the allocation. */
  reset(): void {
    for (const t of [...this.key_cache, ...this.value_cache]) t.zero_();
    this.seen = 0;
  }

  /**
   * Check positions about to be written, before anything is: each must be an integer in
   * [0, T_max). Call with the JS values of cache_position.
   * @throws LoomIndexError naming the position and T_max (decoding past the end never wraps)
   */
  check_positions(positions: readonly number[]): void {
    for (const p of positions) {
      if (!Number.isInteger(p) || p < 0 || p >= this.max_cache_len) {
        throw new LoomIndexError(`[StaticCache] cannot write position ${p}: the cache holds T_max=${this.max_cache_len} positions (0..${this.max_cache_len - 1}); decoding past T_max is an error, the cache never wraps`);
      }
    }
  }

  /**
   * Check that key/value states of `layer_idx` fit this cache.
   * @throws LoomIndexError for a bad layer; LoomShapeError / LoomDtypeError naming both operands
   */
  check_states(key: { shape: readonly number[]; dtype: DType }, value: { shape: readonly number[]; dtype: DType }, layer_idx: number): void {
    if (!Number.isInteger(layer_idx) || layer_idx < 0 || layer_idx >= this.num_layers) {
      throw new LoomIndexError(`[StaticCache.update] layer_idx ${layer_idx} out of range for a cache of ${this.num_layers} layers`);
    }
    const [B, H, , D] = this.shape;
    for (const [name, s] of [["key_states", key], ["value_states", value]] as const) {
      if (s.shape.length !== 4 || s.shape[0] !== B || s.shape[1] !== H || s.shape[3] !== D || s.shape[2]! > this.max_cache_len) {
        throw new LoomShapeError(`[StaticCache.update] ${name} ${fmtShape(s.shape)} does not fit the cache ${fmtShape(this.shape)}: expected [${B}, ${H}, T <= ${this.max_cache_len}, ${D}]`);
      }
      if (s.dtype !== this.dtype) throw new LoomDtypeError(`[StaticCache.update] ${name} has dtype ${s.dtype} but the cache holds ${this.dtype}`);
    }
    if (key.shape[2] !== value.shape[2]) throw new LoomShapeError(`[StaticCache.update] key_states ${fmtShape(key.shape)} and value_states ${fmtShape(value.shape)} differ in length`);
  }

  /**
   * Write keys/values for the positions `cache_position` of layer `layer_idx` and return the whole
   * cache content after the write (HF StaticCache.update). Lazy states (and states that require
   * grad): each cache tensor is rewritten whole, `cache.copy_(where(written, scattered, cache))`,
   * positions entering only as tensor values, so the graph is the same at every position. Eager
   * states without grad: only the new slots are written (index_copy_), the same values.
   * The write stores values without autograd history (a buffer, as HF's cache under generate):
   * gradients flow through the returned tensors within one call, not across calls.
   * @param key_states - [B, n_head, T, head_dim], the cache's dtype
   * @param value_states - same shape as key_states
   * @param cache_kwargs.cache_position - int64 [T]: the slot of each of the T new positions, distinct; an eager
   *   one is bounds-checked here, a lazy one must be checked by the caller (check_positions), as
   *   GPT2Model does
   * @returns [keys, values], each [B, n_head, T_max, head_dim]; the same kind (eager or lazy) as key_states
   * @throws LoomShapeError / LoomDtypeError / LoomIndexError for states or positions that do not fit
   */
  update<S extends TensorOps<S>>(key_states: S, value_states: S, layer_idx: number, cache_kwargs: { cache_position: S }): [S, S] {
    this.check_states(key_states, value_states, layer_idx);
    const pos = cache_kwargs.cache_position;
    const T = key_states.shape[2]!;
    if (pos.ndim !== 1 || pos.shape[0] !== T || (pos.dtype !== "int64" && pos.dtype !== "int32")) {
      throw new LoomShapeError(`[StaticCache.update] cache_position must be int64 [${T}] (one slot per new position), got ${pos.dtype} ${fmtShape(pos.shape)}`);
    }
    // eager positions are checked here; lazy ones were checked by the caller on their JS values
    // (reading them here would realize the graph mid-forward)
    const positions = pos.isLazy ? null : Array.from(pos.dataSync());
    if (positions) this.check_positions(positions);
    if (positions && !key_states.requires_grad && !value_states.requires_grad) {
      // eager, no gradient wanted: write only the new slots (HF's index_copy_) and return the
      // cache tensors themselves; no graph is recorded, so nothing asks for a constant structure
      // here, and rewriting all T_max slots per layer cost about a third of an eager decode step
      const k = this.key_cache[layer_idx]!, v = this.value_cache[layer_idx]!;
      for (let t = 0; t < T;) {
        let n = 1; // a run of consecutive slots is one copy (a prefill is a single run)
        while (t + n < T && positions[t + n] === positions[t]! + n) n++;
        k.narrow(2, positions[t]!, n).copy_(key_states.narrow(2, t, n) as unknown as Tensor);
        v.narrow(2, positions[t]!, n).copy_(value_states.narrow(2, t, n) as unknown as Tensor);
        t += n;
      }
      return [k as unknown as S, v as unknown as S];
    }
    const onehot = pos.unsqueeze(1).eq(lift(this.slots, key_states).unsqueeze(0)); // bool [T, T_max]: slot s takes position t
    const out: S[] = [];
    for (const [cache, states] of [[this.key_cache[layer_idx]!, key_states], [this.value_cache[layer_idx]!, value_states]] as const) {
      const old = lift(cache, states); // [B, H, T_max, D]
      let full: S;
      if (T === 1) {
        // decode: the one new row broadcast over the slots, kept only where slot == position
        full = states.where(onehot.view(this.max_cache_len, 1), old);
      } else {
        // prefill: scatter the T rows to their slots with a one-hot [T_max, T] matmul (exact: one
        // 1·k term plus zeros per slot), then keep the old value at slots not written
        const written = onehot.to("int32").sum(0).gt(0).view(this.max_cache_len, 1); // [T_max, 1]
        full = onehot.to(this.dtype).transpose(0, 1).matmul(states).where(written, old);
      }
      // in place, the whole tensor: one write per layer and kind; private: the value written is the
      // cache's own (a later write marks it stale instead of copying the cache for it)
      cache._write_private(full.detach() as never);
      out.push(full);
    }
    return [out[0]!, out[1]!];
  }

  /**
   * Record that positions up to `end` (exclusive) are now written (called by the model after all
   * layers' updates of one forward).
   */
  advance(end: number): void {
    this.seen = Math.max(this.seen, end);
  }

  /**
   * The additive attention mask of HF's static-cache path: 0 where slot s may be attended from
   * query t (s <= cache_position[t]), dtype min elsewhere (unfilled slots and the future). After
   * softmax the masked slots weigh exactly 0 (exp of about -3.4e38 underflows to 0), also where a
   * slot still holds zeros.
   * @param cache_position - int64 [T], same kind as the result
   * @returns [1, 1, T, T_max] in the cache dtype
   */
  attention_mask<S extends TensorOps<S>>(cache_position: S): S {
    const slots = lift(this.slots, cache_position).unsqueeze(0); // [1, T_max]
    const allowed = slots.le(cache_position.unsqueeze(1)); // bool [T, T_max]
    const T = cache_position.shape[0]!;
    return allowed.to(this.dtype).zeros_like().masked_fill(allowed.logical_not(), finfo_min(this.dtype)).view(1, 1, T, this.max_cache_len);
  }
}
