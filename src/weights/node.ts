/**
 * WeightNode: a weight that is a computation over compact pieces instead of a dense array
 * (issue 12). A node has
 * - a logical `shape` and `dtype`: those of the dense tensor it stands for (a Linear weight is
 *   [out_features, in_features] = [N, K]);
 * - `pieces()`: its own named tensors (packed blocks, scales, factors...), and `children()`: the
 *   nodes it is built from (a Delta's base and delta), so nodes compose;
 * - `decompose(like)`: the reference decomposition, written with registry ops on the pieces, that
 *   gives the dense tensor. It is the spec every fused kernel is tested against;
 * - `materialize()`: `decompose` run eagerly and memoized in a byte-budgeted LRU cache (cache.ts);
 * - `linear(x, bias)`: x @ Wᵀ + b. The default materializes; subclasses override it with a fused
 *   kernel that never builds the dense weight;
 * - `nbytes()` (compressed, pieces as stored) vs `dense_nbytes()`;
 * - `to_json()` / `weight_from_json()`: the graph as JSON plus its pieces as named tensors
 *   (serialize.ts writes them to safetensors). Each kind registers its builder with
 *   `register_weight_kind`.
 *
 * Nodes are immutable: a node's pieces are never written after construction (optimize passes and
 * compression build new nodes), which is what makes memoizing `materialize()` safe.
 */
import { is_grad_enabled, no_grad } from "../autograd/grad_mode.ts";
import { linear as F_linear } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { lift } from "../nn/execution.ts";
import { itemsize, type DType, type TypedArray } from "../tensor/dtype.ts";
import { LoomError, LoomFormatError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { contiguousStrides, numel } from "../tensor/shape.ts";
import { default_weight_cache, tensor_bytes, type WeightCache } from "./cache.ts";

/** JSON values allowed in a node's attrs. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [k: string]: JsonValue };

/**
 * A weight graph as JSON (the `__metadata__` of a weights safetensors file).
 * `pieces` maps a piece name to the key of its tensor in the file; `children` nests nodes.
 */
export interface WeightJSON {
  kind: string;
  shape: number[];
  dtype: DType;
  attrs: Record<string, JsonValue>;
  pieces: Record<string, string>;
  children: Record<string, WeightJSON>;
}

/** What a kind's builder gets: the node's spec with its pieces and children resolved. */
export interface WeightSpec {
  shape: readonly number[];
  dtype: DType;
  attrs: Record<string, JsonValue>;
  pieces: Record<string, Tensor>;
  children: Record<string, WeightNode>;
}

/** Builds a node of one kind from its spec; validates it (typed errors on bad input). */
export type WeightBuilder = (spec: WeightSpec) => WeightNode;

const KINDS = new Map<string, WeightBuilder>();

/**
 * Register the builder of a node kind (each node file registers its own at import).
 * @throws LoomValueError if the kind is already registered to another builder
 */
export function register_weight_kind(kind: string, build: WeightBuilder): void {
  const prev = KINDS.get(kind);
  if (prev && prev !== build) throw new LoomValueError(`[register_weight_kind] kind "${kind}" is already registered`);
  KINDS.set(kind, build);
}

/** The registered kinds, sorted. */
export function weight_kinds(): string[] {
  return [...KINDS.keys()].sort();
}

/**
 * Build a node of `kind` from its spec (used by from_json and by optimize passes).
 * @throws LoomFormatError for an unregistered kind
 */
export function build_weight(kind: string, spec: WeightSpec): WeightNode {
  const b = KINDS.get(kind);
  if (!b) throw new LoomFormatError(`[weights] unknown weight node kind "${kind}" (known: ${weight_kinds().join(", ") || "none"})`);
  return b(spec);
}

let nextId = 1;
let eagerLike: Tensor | null = null;

/** A node's dense stand-in: base class of Dense, Quantized, Delta, LowRank, Sparse, ... */
export abstract class WeightNode {
  /** The registry name of this node's kind ("dense", "quantized", "delta", ...). */
  abstract readonly kind: string;
  /** Logical dense shape ([N, K] for a Linear weight). */
  readonly shape: readonly number[];
  /** Dtype of the dense tensor `materialize()` returns. */
  readonly dtype: DType;
  /** A process-unique id (for reprs and debugging; the cache keys on the node itself). */
  readonly id = nextId++;

  constructor(shape: readonly number[], dtype: DType = "float32") {
    for (const d of shape) {
      if (!Number.isInteger(d) || d < 0) throw new LoomShapeError(`[weights] shape ${fmtShape(shape)} must hold non-negative integers`);
    }
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
  }

  /** This node's own tensors by name (not its children's). */
  abstract pieces(): Record<string, Tensor>;

  /** Kind-specific JSON attributes (format, block size, rank, ...). */
  attrs(): Record<string, JsonValue> {
    return {};
  }

  /** The nodes this one is computed from, by role name. */
  children(): Record<string, WeightNode> {
    return {};
  }

  /**
   * The reference decomposition: the dense weight written with registry ops on this node's
   * pieces (and its children's decompositions), lifted to the kind of `like` (a LazyTensor records
   * the ops into the current graph; a Tensor runs them).
   * @returns `shape`, `dtype`
   */
  abstract decompose<S extends TensorOps<S>>(like: S): S;

  /** A piece as a tensor of the kind of `like` (lifted once per lazy forward). */
  protected piece_as<S extends TensorOps<S>>(t: Tensor, like: S): S {
    return lift(t, like);
  }

  get ndim(): number {
    return this.shape.length;
  }

  /** Element count of the dense weight. */
  numel(): number {
    return numel(this.shape);
  }

  /**
   * Bytes of the stored pieces of this node and its children (a tensor shared between pieces,
   * or a node used twice, is counted once).
   */
  nbytes(seen: Set<Tensor> = new Set()): number {
    let b = 0;
    for (const t of Object.values(this.pieces())) {
      if (seen.has(t)) continue;
      seen.add(t);
      b += tensor_bytes(t);
    }
    for (const c of Object.values(this.children())) b += c.nbytes(seen);
    return b;
  }

  /** Bytes of the dense weight this node stands for (numel × itemsize of `dtype`). */
  dense_nbytes(): number {
    return this.numel() * itemsize[this.dtype];
  }

  /** Whether any piece (here or below) requires grad: then `linear` decomposes instead of memoizing. */
  requires_grad(): boolean {
    if (Object.values(this.pieces()).some((t) => t.requires_grad)) return true;
    return Object.values(this.children()).some((c) => c.requires_grad());
  }

  /**
   * The dense weight as an eager Tensor, memoized in `cache` (the process-wide one by default;
   * see set_weight_cache_budget). Computed under no_grad from the reference decomposition.
   * @returns `shape`, `dtype`
   */
  materialize(cache: WeightCache<object> = default_weight_cache()): Tensor {
    return cache.get_or_compute(this, () => no_grad(() => {
      eagerLike ??= scalarLike();
      return this.decompose(eagerLike);
    }));
  }

  /**
   * The dense weight as a tensor of the kind of `like`: the memoized materialization lifted, or,
   * when a piece requires grad (trainable factors), the decomposition recorded so gradients reach
   * the pieces.
   */
  dense_as<S extends TensorOps<S>>(like: S): S {
    if (is_grad_enabled() && this.requires_grad()) return this.decompose(like);
    return lift(this.materialize(), like);
  }

  /**
   * y = x Wᵀ + b with W this node's dense weight [N, K] (torch.nn.functional.linear).
   * The default materializes W (memoized); subclasses override with fused kernels.
   * @param x - [*, K] float
   * @param bias - [N] or null
   * @returns [*, N]
   * @throws LoomShapeError if the node is not 2-D or x does not end in K
   */
  linear<S extends TensorOps<S>>(x: S, bias: S | null = null): S {
    this.check_linear_input(x);
    return F_linear(x, this.dense_as(x), bias);
  }

  /** @throws LoomShapeError unless this node is [N, K] and x is [*, K] */
  protected check_linear_input(x: { shape: readonly number[]; ndim: number }): void {
    if (this.ndim !== 2) throw new LoomShapeError(`[${this.kind}.linear] weight must be 2-D [out, in], got ${fmtShape(this.shape)}`);
    if (x.ndim === 0 || x.shape[x.ndim - 1] !== this.shape[1]) {
      throw new LoomShapeError(`[${this.kind}.linear] input ${fmtShape(x.shape)} does not end in in_features=${this.shape[1]} (weight ${fmtShape(this.shape)})`);
    }
  }

  /**
   * The graph as JSON and its pieces as named tensors. Piece keys are `prefix` + the node's path
   * + piece name, joined by "."; a tensor object used twice is stored once under its first key.
   */
  to_json(prefix = "weight", tensors: Map<string, Tensor> = new Map()): { graph: WeightJSON; tensors: Map<string, Tensor> } {
    const byTensor = new Map<Tensor, string>();
    for (const [k, t] of tensors) byTensor.set(t, k);
    const walk = (n: WeightNode, path: string): WeightJSON => {
      const pieces: Record<string, string> = {};
      for (const [name, t] of Object.entries(n.pieces())) {
        let key = byTensor.get(t);
        if (key === undefined) {
          key = `${path}.${name}`;
          if (tensors.has(key)) throw new LoomValueError(`[weights.to_json] duplicate tensor key "${key}"`);
          tensors.set(key, t);
          byTensor.set(t, key);
        }
        pieces[name] = key;
      }
      const children: Record<string, WeightJSON> = {};
      for (const [name, c] of Object.entries(n.children())) children[name] = walk(c, `${path}.${name}`);
      return { kind: n.kind, shape: [...n.shape], dtype: n.dtype, attrs: n.attrs(), pieces, children };
    };
    return { graph: walk(this, prefix), tensors };
  }

  /** A node of the same kind with other children (for optimize passes). */
  with_children(children: Record<string, WeightNode>): WeightNode {
    return build_weight(this.kind, { shape: this.shape, dtype: this.dtype, attrs: this.attrs(), pieces: this.pieces(), children });
  }

  toString(): string {
    const a = Object.entries(this.attrs()).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
    const c = Object.entries(this.children()).map(([k, v]) => `${k}=${v.toString()}`);
    return `${this.kind}(${[fmtShape(this.shape), ...a, ...c].join(", ")})`;
  }
}

function scalarLike(): Tensor {
  // any eager tensor tells decompose "run the ops now"; its values are never read
  return new Tensor({ dtype: "float32", shape: [], strides: [], offset: 0, data: new Float32Array(1) });
}

/**
 * Rebuild a node from its JSON graph, reading pieces with `get` (no piece is materialized).
 * @throws LoomFormatError for an unknown kind, a malformed node, a missing piece, or pieces and
 *   attrs a kind's builder rejects
 */
export function weight_from_json(graph: unknown, get: (key: string) => Tensor | undefined, where = "graph"): WeightNode {
  if (graph === null || typeof graph !== "object" || Array.isArray(graph)) throw new LoomFormatError(`[weights.from_json] ${where}: expected an object, got ${JSON.stringify(graph)?.slice(0, 80)}`);
  const g = graph as Partial<WeightJSON>;
  if (typeof g.kind !== "string") throw new LoomFormatError(`[weights.from_json] ${where}: "kind" must be a string`);
  if (!Array.isArray(g.shape) || !g.shape.every((d) => Number.isInteger(d) && d >= 0)) throw new LoomFormatError(`[weights.from_json] ${where} (${g.kind}): "shape" must be a list of non-negative integers, got ${JSON.stringify(g.shape)}`);
  if (typeof g.dtype !== "string" || !(g.dtype in itemsize)) throw new LoomFormatError(`[weights.from_json] ${where} (${g.kind}): unknown dtype ${JSON.stringify(g.dtype)}`);
  const obj = (v: unknown, name: string): Record<string, unknown> => {
    if (v === undefined) return {};
    if (v === null || typeof v !== "object" || Array.isArray(v)) throw new LoomFormatError(`[weights.from_json] ${where} (${g.kind}): "${name}" must be an object`);
    return v as Record<string, unknown>;
  };
  const pieces: Record<string, Tensor> = {};
  for (const [name, key] of Object.entries(obj(g.pieces, "pieces"))) {
    if (typeof key !== "string") throw new LoomFormatError(`[weights.from_json] ${where} (${g.kind}): piece "${name}" must name a tensor key`);
    const t = get(key);
    if (!t) throw new LoomFormatError(`[weights.from_json] ${where} (${g.kind}): piece "${name}" names tensor "${key}", which is not in the file`);
    pieces[name] = t;
  }
  const children: Record<string, WeightNode> = {};
  for (const [name, c] of Object.entries(obj(g.children, "children"))) children[name] = weight_from_json(c, get, `${where}.${name}`);
  try {
    const n = build_weight(g.kind, { shape: g.shape, dtype: g.dtype as DType, attrs: obj(g.attrs, "attrs") as Record<string, JsonValue>, pieces, children });
    if (n.shape.length !== g.shape.length || n.shape.some((d, i) => d !== g.shape![i]) || n.dtype !== g.dtype) {
      throw new LoomFormatError(`[weights.from_json] ${where} (${g.kind}): the graph says ${g.dtype} ${fmtShape(g.shape)}, its pieces and children make ${n.dtype} ${fmtShape(n.shape)}`);
    }
    return n;
  } catch (e) {
    // a builder's shape or value check failing on file contents is a malformed file
    if (e instanceof LoomError && !(e instanceof LoomFormatError)) throw new LoomFormatError(`[weights.from_json] ${where} (${g.kind}): ${e.message}`);
    throw e;
  }
}

/**
 * Check a spec's piece against an expected dtype and shape.
 * @throws LoomFormatError naming the node kind, the piece, and the value found
 */
export function expect_piece(kind: string, spec: WeightSpec, name: string, dtype: DType, shape: readonly number[]): Tensor {
  const t = spec.pieces[name];
  if (!t) throw new LoomFormatError(`[${kind}] missing piece "${name}"`);
  if (t.dtype !== dtype) throw new LoomFormatError(`[${kind}] piece "${name}" must be ${dtype}, got ${t.dtype}`);
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new LoomFormatError(`[${kind}] piece "${name}" must have shape ${fmtShape(shape)} for weight ${fmtShape(spec.shape)}, got ${fmtShape(t.shape)}`);
  }
  return t;
}

/** A child of a spec, or a LoomFormatError naming the kind and the role. */
export function expect_child(kind: string, spec: WeightSpec, name: string): WeightNode {
  const c = spec.children[name];
  if (!c) throw new LoomFormatError(`[${kind}] missing child node "${name}"`);
  return c;
}

/**
 * A contiguous eager cpu tensor that takes `data` as its storage (no copy): the packed pieces the
 * weight kinds build. `data` must be `dtype`'s storage array (int64: Float64Array) of numel(shape).
 */
export function raw_tensor(dtype: DType, shape: readonly number[], data: TypedArray): Tensor {
  return new Tensor({ dtype, shape: [...shape], strides: contiguousStrides(shape), offset: 0, data });
}
