/**
 * StaticCache: a key/value cache of fixed size for autoregressive decoding (Hugging Face
 * transformers `StaticCache`, cache_utils.py). Per layer it holds two eager tensors
 * `key_cache[l]`, `value_cache[l]` of shape [B, n_head, T_max, head_dim], zero-filled when made,
 * and the number of positions written so far.
 *
 * Storage: per layer and kind one slot-major buffer [T_max, B, n_head, head_dim]; `key_cache[l]`
 * and `value_cache[l]` are its permuted views [B, n_head, T_max, head_dim] (HF's shape and
 * values). Slot-major, the rows of consecutive positions are ONE dense block of the buffer, so a
 * write of the new positions is a dense assign into a slice (offset = position · B·H·D): lazy
 * plans write only the new rows (1.5 KB per layer and kind at W7's decode), at an offset bound
 * when the plan runs, so the plan is the same at every position.
 *
 * What attention reads, with the positions as tensor VALUES: `update` returns
 * `where(slot ∈ cache_position, new keys, old cache)` over all T_max slots (lazy), because a
 * plan's writes come after every read of the old values. The token position never enters an op
 * attribute, a slice or a shape of the graph, so every decode step (input [B, 1], attention over
 * all T_max slots with a mask) records the same graph: lazy decoding compiles one plan for the
 * prefill and one for all decode steps, whatever the position. Masked slots get weight exactly 0
 * (see `attention_mask`), so the unfilled zero slots change nothing. Eager states without grad
 * record no graph: the new slots are written (HF's index_copy_) and the cache views returned.
 * Before the slot-major buffers, the lazy write copied the whole where() result back into the
 * cache: 2 × T_max rows per layer and kind per step instead of the new row.
 *
 * Bounds are checked on JS numbers before anything is written (`check_positions`, also inside
 * `update` for eager positions and those made by `cache_positions`): decoding past T_max raises
 * LoomIndexError and never wraps or overwrites. Layer 0's update counts the positions written
 * (HF's get_seq_length counts layer 0), so a port that forgets `advance` still moves on.
 * Config: GPT-2 names, HF Llama names (num_key_value_heads, head_dim) or the shape itself.
 * Source: https://github.com/huggingface/transformers/blob/main/src/transformers/cache_utils.py
 * (StaticCache.update: `k_out.index_copy_(2, cache_position, key_states)`).
 * Also here: `padding_keep` / `causal_padding_mask`, HF's 2-D attention_mask (left padding) turned
 * into the masks attention uses, with and without the cache (shared by the decoders).
 */
import { arange, zeros } from "../lazy/creation.ts";
import { cat } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { lift } from "../nn/execution.ts";
import { isFloating, type DType } from "../tensor/dtype.ts";
import { fromValues } from "../tensor/storage.ts";
import { LoomDtypeError, LoomIndexError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";

/** GPT-2's config names (GPT2Config has these fields): head_dim = n_embd / n_head, all heads cached. */
export interface CacheConfig {
  n_layer: number;
  n_head: number;
  n_embd: number;
  n_positions: number;
}

/**
 * Hugging Face's Llama-style config names (LlamaConfig, as HF StaticCache reads them):
 * num_key_value_heads defaults to num_attention_heads, head_dim to hidden_size / num_attention_heads.
 */
export interface HFCacheConfig {
  num_hidden_layers: number;
  num_attention_heads: number;
  hidden_size: number;
  num_key_value_heads?: number;
  head_dim?: number;
  max_position_embeddings: number;
}

/** The cache's own shape: layers, cached (KV) heads, head size and optionally T_max. */
export interface ExplicitCacheConfig {
  num_layers: number;
  num_kv_heads: number;
  head_dim: number;
  max_cache_len?: number;
}

export interface StaticCacheOptions {
  /**
   * The model's config, GPT-2 names (CacheConfig) or HF Llama names (HFCacheConfig); T_max
   * defaults to n_positions / max_position_embeddings. Leave it out to give the shape directly
   * (num_layers, num_kv_heads, head_dim, max_cache_len).
   */
  config?: CacheConfig | HFCacheConfig | ExplicitCacheConfig;
  /** Explicit form: layers (with num_kv_heads, head_dim instead of config). */
  num_layers?: number;
  /** Explicit form: KV heads cached per layer. */
  num_kv_heads?: number;
  /** Explicit form: size of one head. */
  head_dim?: number;
  /** Batch size B the cache holds (HF max_batch_size; inputs must have exactly this batch). Default 1. */
  max_batch_size?: number;
  /** T_max, positions per sequence (HF max_cache_len). Default the config's maximum positions (required in the explicit form). */
  max_cache_len?: number;
  /** Device of the cache tensors (default "cpu"); put it on the model's device. */
  device?: string;
  /** Floating dtype of keys and values (default float32); must equal the model's activations. */
  dtype?: DType;
}

/** Layers, KV heads, head_dim and T_max from any of the three config forms; every key checked. */
function resolveShape(opts: StaticCacheOptions): { num_layers: number; num_kv_heads: number; head_dim: number; max_cache_len: number | undefined } {
  const c = (opts.config ?? opts) as Partial<CacheConfig & HFCacheConfig & ExplicitCacheConfig>;
  const int = (k: string, v: unknown): number => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new LoomValueError(`[StaticCache] ${k} must be a positive integer, got ${v}`);
    return v;
  };
  if (c.n_layer !== undefined) {
    const n_head = int("n_head", c.n_head), n_embd = int("n_embd", c.n_embd);
    if (n_embd % n_head !== 0) throw new LoomValueError(`[StaticCache] n_embd=${n_embd} is not divisible by n_head=${n_head}`);
    return { num_layers: int("n_layer", c.n_layer), num_kv_heads: n_head, head_dim: n_embd / n_head, max_cache_len: c.n_positions };
  }
  if (c.num_hidden_layers !== undefined) {
    const heads = int("num_attention_heads", c.num_attention_heads), hidden = int("hidden_size", c.hidden_size);
    const kv = int("num_key_value_heads", c.num_key_value_heads ?? heads);
    if (heads % kv !== 0) throw new LoomValueError(`[StaticCache] num_attention_heads=${heads} is not divisible by num_key_value_heads=${kv}`);
    if (c.head_dim === undefined && hidden % heads !== 0) throw new LoomValueError(`[StaticCache] hidden_size=${hidden} is not divisible by num_attention_heads=${heads} (and no head_dim is given)`);
    return { num_layers: int("num_hidden_layers", c.num_hidden_layers), num_kv_heads: kv, head_dim: int("head_dim", c.head_dim ?? hidden / heads), max_cache_len: c.max_position_embeddings };
  }
  if (c.num_layers !== undefined) {
    return { num_layers: int("num_layers", c.num_layers), num_kv_heads: int("num_kv_heads", c.num_kv_heads), head_dim: int("head_dim", c.head_dim), max_cache_len: c.max_cache_len };
  }
  throw new LoomValueError("[StaticCache] needs a config with GPT-2 names (n_layer, n_head, n_embd, n_positions), HF names (num_hidden_layers, num_attention_heads, hidden_size, max_position_embeddings), or num_layers, num_kv_heads, head_dim, max_cache_len");
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

/**
 * JS values of the cache_position tensors made by `StaticCache.cache_positions` (lazy ones
 * included): facts about the tensor, so shared by all caches.
 */
const KNOWN_POSITIONS = new WeakMap<object, number[]>();

/**
 * The JS values of int positions without realizing a graph: an eager tensor's, or those of the
 * eager tensor a lazy one was lifted from (a forward's inputs); null for other lazy tensors.
 */
function hostPositions(pos: TensorOps<any>): number[] | null {
  if (!pos.isLazy) return Array.from(pos.dataSync());
  const origin = (pos as unknown as { _origin: Tensor | null })._origin;
  return origin && !origin.is_pending ? Array.from(origin.dataSync()) : null;
}

/** Positions as runs of consecutive slots: [first index in the input, first slot, length]. */
function runs(positions: readonly number[]): [number, number, number][] {
  const out: [number, number, number][] = [];
  for (let t = 0; t < positions.length;) {
    let n = 1;
    while (t + n < positions.length && positions[t + n] === positions[t]! + n) n++;
    out.push([t, positions[t]!, n]);
    t += n;
  }
  return out;
}

export class StaticCache {
  readonly max_batch_size: number;
  readonly max_cache_len: number;
  readonly num_heads: number;
  readonly head_dim: number;
  readonly num_layers: number;
  readonly dtype: DType;
  readonly device: string;
  /** Per layer: keys [B, n_head, T_max, head_dim] (a permuted view of the slot-major buffer), written in place by `update`. */
  readonly key_cache: Tensor[];
  /** Per layer: values [B, n_head, T_max, head_dim] (a permuted view of the slot-major buffer), written in place by `update`. */
  readonly value_cache: Tensor[];
  /** Per layer: the buffers behind key_cache / value_cache, slot-major [T_max, B, n_head, head_dim]. */
  private readonly key_slots: Tensor[];
  private readonly value_slots: Tensor[];
  /** Slot numbers 0..T_max-1 (int64 [T_max]): compared with cache_position as tensor values. */
  private readonly slots: Tensor;
  /** Positions 0..seen-1 have been written (HF get_seq_length). */
  private seen = 0;
  /**
   * Per lazy cache_position value (its graph node: an in-place op on the tensor makes a new one):
   * its host positions (or null) and the one-hot slot matrix update builds from it, shared by the
   * layers of one forward (read and recorded once instead of once per layer).
   */
  private readonly perPosition = new WeakMap<object, { known: number[] | null; onehot: unknown }>();

  /**
   * @throws LoomValueError for a missing or non-positive size (naming the key), n_embd not divisible
   *   by n_head, hidden_size not divisible by num_attention_heads (without head_dim), or
   *   num_attention_heads not divisible by num_key_value_heads; LoomDtypeError for a non-floating dtype
   */
  constructor(opts: StaticCacheOptions) {
    const shape = resolveShape(opts);
    const { max_batch_size = 1, max_cache_len = shape.max_cache_len, device = "cpu", dtype = "float32" } = opts;
    for (const [k, v] of [["max_batch_size", max_batch_size], ["max_cache_len", max_cache_len]] as const) {
      if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new LoomValueError(`[StaticCache] ${k} must be a positive integer, got ${v}`);
    }
    if (!isFloating(dtype)) throw new LoomDtypeError(`[StaticCache] keys and values must have a floating dtype, got ${dtype}`);
    this.max_batch_size = max_batch_size;
    this.max_cache_len = max_cache_len!;
    this.num_heads = shape.num_kv_heads;
    this.head_dim = shape.head_dim;
    this.num_layers = shape.num_layers;
    this.dtype = dtype;
    this.device = device;
    const [B, H, T, D] = this.shape;
    const buffer = () => zeros([T!, B!, H!, D!], { dtype, device }); // slot-major: see the file comment
    this.key_slots = Array.from({ length: this.num_layers }, buffer);
    this.value_slots = Array.from({ length: this.num_layers }, buffer);
    this.key_cache = this.key_slots.map((t) => t.permute(1, 2, 0, 3));
    this.value_cache = this.value_slots.map((t) => t.permute(1, 2, 0, 3));
    this.slots = arange(this.max_cache_len, undefined, 1, { dtype: "int64", device });
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

  /**
   * The int64 [T] slots start..start+T-1 (default start: get_seq_length()), of the same kind as
   * `like` (eager or lazy). The cache keeps their JS values, so `update` bounds-checks and counts
   * them even when the tensor is lazy (reading a lazy tensor mid-forward would realize its graph).
   * @throws LoomIndexError when a slot is outside [0, T_max), before anything is written
   */
  cache_positions<S extends TensorOps<S>>(T: number, like: S, start = this.seen): S {
    const positions = Array.from({ length: T }, (_, i) => start + i);
    this.check_positions(positions);
    const t = lift(arange(start, start + T, 1, { dtype: "int64", device: this.device }), like);
    KNOWN_POSITIONS.set(t, positions);
    return t;
  }

  /** Zero every tensor and forget the written positions (HF reset), keeping the allocation. */
  reset(): void {
    for (const t of [...this.key_slots, ...this.value_slots]) t.zero_();
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
   * grad): the returned tensors are `where(written, scattered, cache)` over all T_max slots,
   * positions entering only as tensor values, so the graph is the same at every position; the
   * buffer gets only the new rows when their slots are known on the host and consecutive (an
   * assign into a dense slice of the slot-major buffer), else the whole where() result. Eager
   * states without grad: only the new slots are written (index_copy_), the same values.
   * The write stores values without autograd history (a buffer, as HF's cache under generate):
   * gradients flow through the returned tensors within one call, not across calls.
   * @param key_states - [B, n_head, T, head_dim], the cache's dtype
   * @param value_states - same shape as key_states
   * @param cache_kwargs.cache_position - int64 [T]: the slot of each of the T new positions, distinct.
   *   Bounds-checked here (before any write) when its values are known on the host: an eager
   *   tensor, or one made by `cache_positions` (lazy too). Another lazy one must be checked by the
   *   caller (check_positions), as GPT2Model does, and counted with `advance`.
   *   Layer 0's update records the positions written (HF counts layer 0's filled slots), so
   *   get_seq_length() moves on without `advance`.
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
    // eager positions, and lazy ones the cache made, are checked here; other lazy ones were checked
    // by the caller on their JS values (reading them here would realize the graph mid-forward)
    // (eager positions are read at every call: an in-place write may have changed them)
    const node = pos.isLazy ? (pos as unknown as { node: object }).node : null;
    let memo = node ? this.perPosition.get(node) : undefined;
    if (node && !memo) this.perPosition.set(node, (memo = { known: KNOWN_POSITIONS.get(pos) ?? hostPositions(pos), onehot: null }));
    const known = memo ? memo.known : KNOWN_POSITIONS.get(pos) ?? hostPositions(pos);
    if (known) {
      this.check_positions(known);
      // HF get_seq_length counts layer 0's written slots: the same count, kept as a number
      if (layer_idx === 0) this.advance(known.reduce((m, p) => Math.max(m, p + 1), 0)); // no spread: V8 overflows on a long prefill
    }
    const positions = pos.isLazy ? null : known;
    if (positions && !key_states.requires_grad && !value_states.requires_grad) {
      // eager, no gradient wanted: write only the new slots (HF's index_copy_) and return the
      // cache tensors themselves; no graph is recorded, so nothing asks for a constant structure
      // here, and rewriting all T_max slots per layer cost about a third of an eager decode step
      const k = this.key_cache[layer_idx]!, v = this.value_cache[layer_idx]!;
      for (const [t, p, n] of runs(positions)) { // a run of consecutive slots is one dense copy (a prefill is a single run)
        this.key_slots[layer_idx]!.narrow(0, p, n).copy_(key_states.narrow(2, t, n).permute(2, 0, 1, 3) as unknown as Tensor);
        this.value_slots[layer_idx]!.narrow(0, p, n).copy_(value_states.narrow(2, t, n).permute(2, 0, 1, 3) as unknown as Tensor);
      }
      return [k as unknown as S, v as unknown as S];
    }
    let onehot = memo?.onehot as S | null | undefined;
    if (!onehot) {
      onehot = pos.unsqueeze(1).eq(lift(this.slots, key_states).unsqueeze(0)); // bool [T, T_max]: slot s takes position t
      if (memo) memo.onehot = onehot;
    }
    const out: S[] = [];
    // known positions in one run: write only the new rows, a dense slice of the slot-major buffer
    // (one assign per layer and kind; two writes to one buffer before a flush would flush mid-forward)
    const run = known ? runs(known) : [];
    for (const [cache, slots, states] of [[this.key_cache[layer_idx]!, this.key_slots[layer_idx]!, key_states], [this.value_cache[layer_idx]!, this.value_slots[layer_idx]!, value_states]] as const) {
      let full: S;
      if (T === 1) {
        // decode: the one new row broadcast over the slots, kept only where slot == position;
        // computed slot-major (dense rows of B·H·D, no strided read of the permuted view) and
        // viewed as [B, H, T_max, D]: the same values, a copy at memory speed
        const rows = states.permute(2, 0, 1, 3); // [1, B, H, D]
        full = rows.where(onehot.view(this.max_cache_len, 1, 1, 1), lift(slots, states)).permute(1, 2, 0, 3);
      } else {
        const old = lift(cache, states); // [B, H, T_max, D]
        // prefill: scatter the T rows to their slots with a one-hot [T_max, T] matmul (exact: one
        // 1·k term plus zeros per slot), then keep the old value at slots not written
        const written = onehot.to("int32").sum(0).gt(0).view(this.max_cache_len, 1); // [T_max, 1]
        full = onehot.to(this.dtype).transpose(0, 1).matmul(states).where(written, old);
      }
      // in place; private: the value written is the cache's own (a later write marks it stale
      // instead of copying the cache for it)
      if (run.length === 1) {
        const [t, p, n] = run[0]!;
        slots.narrow(0, p, n)._write_private(states.narrow(2, t, n).permute(2, 0, 1, 3).detach() as never);
      } else {
        slots._write_private(full.permute(2, 0, 1, 3).detach() as never); // every slot (positions unknown on the host)
      }
      out.push(full);
    }
    return [out[0]!, out[1]!];
  }

  /**
   * Record that positions up to `end` (exclusive) are now written. Idempotent (the count only
   * grows), and needed only for lazy cache_position tensors the cache did not make: layer 0's
   * `update` counts the others itself.
   */
  advance(end: number): void {
    this.seen = Math.max(this.seen, end);
  }

  /**
   * The additive attention mask of HF's static-cache path: 0 where slot s may be attended from
   * query t (s <= cache_position[t]), dtype min elsewhere (unfilled slots and the future). After
   * softmax the masked slots weigh exactly 0 (exp of about -3.4e38 underflows to 0), also where a
   * slot still holds zeros. With `keep` (HF's 2-D padding mask over the slots, as bool) a slot
   * must also be kept for that row (HF `_prepare_4d_causal_attention_mask_with_cache_position`).
   * @param cache_position - int64 [T], same kind as the result
   * @param keep - bool [B, T_max]: slot s of row b holds a token (not padding); default all
   * @returns [1, 1, T, T_max] (or [B, 1, T, T_max] with keep) in the cache dtype
   * @throws LoomShapeError for keep of another shape
   */
  attention_mask<S extends TensorOps<S>>(cache_position: S, keep: S | null = null): S {
    const slots = lift(this.slots, cache_position).unsqueeze(0); // [1, T_max]
    let allowed = slots.le(cache_position.unsqueeze(1)); // bool [T, T_max]
    const T = cache_position.shape[0]!;
    if (!keep) return allowed.to(this.dtype).zeros_like().masked_fill(allowed.logical_not(), finfo_min(this.dtype)).view(1, 1, T, this.max_cache_len);
    const B = keep.shape[0]!;
    if (keep.ndim !== 2 || keep.shape[1] !== this.max_cache_len || keep.dtype !== "bool") {
      throw new LoomShapeError(`[StaticCache.attention_mask] keep must be bool [B, ${this.max_cache_len}], got ${keep.dtype} ${fmtShape(keep.shape)}`);
    }
    allowed = allowed.unsqueeze(0).logical_and(keep.unsqueeze(1)); // [B, T, T_max]
    return allowed.to(this.dtype).zeros_like().masked_fill(allowed.logical_not(), finfo_min(this.dtype)).view(B, 1, T, this.max_cache_len);
  }
}

/**
 * HF's 2-D attention_mask as bool "attend" [B, T] (no cache) or [B, T_max] (with a cache,
 * zero-padded): what a model's forward gives `StaticCache.attention_mask` or `causal_padding_mask`
 * (GPT2Model; any decoder taking HF's attention_mask).
 * Masks whose values are on the host (eager, or lifted from eager) are checked to hold only 0 and 1.
 * @param op - the caller, for messages
 * @param cache - with a KV cache: `end` (last slot written by this call + 1) and T_max
 * @throws LoomShapeError for a shape other than [B, T] / [B, end..T_max]; LoomValueError for other values
 */
export function padding_keep<S extends TensorOps<S>>(op: string, attention_mask: S, input_ids: S, cache: { end: number; T_max: number } | null): S {
  const [B, T] = input_ids.shape as [number, number];
  const L = attention_mask.shape[1]!;
  const ok = attention_mask.ndim === 2 && attention_mask.shape[0] === B && (cache ? L >= cache.end && L <= cache.T_max : L === T);
  if (!ok) {
    const want = cache ? `[${B}, L] with ${cache.end} <= L <= T_max=${cache.T_max} (it covers the cache slots)` : `[${B}, ${T}]`;
    throw new LoomShapeError(`[${op}] attention_mask ${fmtShape(attention_mask.shape)} must be ${want} for input_ids ${fmtShape(input_ids.shape)}`);
  }
  // its values are checked when they are on the host already: an eager mask, or the lift of one
  // (a lazy forward's inputs); reading another lazy mask would realize its graph mid-forward
  const known = attention_mask.isLazy ? (attention_mask as unknown as { _origin: Tensor | null })._origin : attention_mask;
  if (known) {
    const v = known.dataSync();
    for (let i = 0; i < v.length; i++) if (v[i] !== 0 && v[i] !== 1) throw new LoomValueError(`[${op}] attention_mask must hold 0 (padding) and 1 (token), got ${v[i]} at flat index ${i}`);
  }
  let keep = lift(attention_mask, input_ids).ne(0); // bool [B, L]
  if (cache && L < cache.T_max) keep = cat([keep, keep._constant(fromValues("bool", [B, cache.T_max - L], new Uint8Array(B * (cache.T_max - L))))], 1);
  return keep;
}

/**
 * Causal mask and padding mask as one additive float mask: 0 where query t may attend key s
 * (s <= t and keep[b, s]), dtype min elsewhere (HF's eager/sdpa GPT-2 mask value).
 * @param keep - bool [B, T] @returns [B, 1, T, T] in dtype
 */
export function causal_padding_mask<S extends TensorOps<S>>(keep: S, dtype: DType): S {
  const [B, T] = keep.shape as [number, number];
  const causal = keep._constant(fromValues("bool", [T, T], Array.from({ length: T * T }, (_, i) => (i % T <= Math.floor(i / T) ? 1 : 0))));
  const allowed = causal.unsqueeze(0).logical_and(keep.unsqueeze(1)); // [B, T, T]
  return allowed.to(dtype).zeros_like().masked_fill(allowed.logical_not(), finfo_min(dtype)).view(B, 1, T, T);
}
