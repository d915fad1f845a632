/**
 * Weight-graph passes (`optimize`) and memory accounting (`memory_usage`).
 *
 * Passes, applied bottom-up until nothing changes:
 * - fuse_scales: Scaled(Scaled(W, a), b) → Scaled(W, a·b); Scaled(W, 1) → W; Scaled over a
 *   per-block-scaled Quantized (int8 scales, nf4 absmax) → the Quantized with its scales times α
 *   (no extra multiply per element at run time). The product is rounded once instead of twice,
 *   so results may differ from the unfused graph in the last float32 bit.
 * - fold_dense (drops Dense wrappers): a composite whose children are all Dense (Delta(Dense,
 *   Dense), Scaled(Dense)) → one Dense of the materialized result. Never grows memory.
 * - fold_deltas (opt-in, `{ fold_deltas: true }`: "the fine-tune is merged"): Delta(base, delta)
 *   → Dense(base + delta), trading the compact pieces for one dense weight.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import type { Module } from "../nn/module.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { Dense } from "./dense.ts";
import { Delta, Scaled } from "./delta.ts";
import { CompressedLinear } from "./linear.ts";
import type { WeightNode } from "./node.ts";
import { Quantized } from "./quantized.ts";

export interface OptimizeOptions {
  /** Replace every Delta by its dense sum (default false). */
  fold_deltas?: boolean;
  /** Fuse consecutive scales (default true). */
  fuse_scales?: boolean;
  /** Fold composites of Dense children into one Dense (default true). */
  fold_dense?: boolean;
}

function dense_of(n: WeightNode): Dense {
  return new Dense(no_grad(() => n.materialize().detach().contiguous()) as Tensor);
}

function rewrite(n: WeightNode, o: Required<OptimizeOptions>): WeightNode {
  const ch = n.children();
  const names = Object.keys(ch);
  if (names.length === 0) return n;
  const newCh: Record<string, WeightNode> = {};
  let changed = false;
  for (const k of names) {
    newCh[k] = rewrite(ch[k]!, o);
    if (newCh[k] !== ch[k]) changed = true;
  }
  const node = changed ? n.with_children(newCh) : n;
  if (o.fuse_scales && node instanceof Scaled) {
    const c = node.child;
    if (node.alpha === 1) return c;
    if (c instanceof Scaled) return rewrite(new Scaled(c.child, c.alpha * node.alpha), o);
    if (c instanceof Quantized && c.scales) {
      return new Quantized(c.format, c.shape, c.qweight, no_grad(() => c.scales!.mul(node.alpha).contiguous()));
    }
  }
  if (o.fold_deltas && node instanceof Delta) return dense_of(node);
  if (o.fold_dense && Object.keys(node.pieces()).length === 0 && Object.values(node.children()).every((c) => c instanceof Dense)) {
    return dense_of(node);
  }
  return node;
}

/**
 * Apply the passes to a node (returns a new node; the input is unchanged) or to every
 * CompressedLinear of a module, in place (returns the module).
 */
export function optimize(node: WeightNode, opts?: OptimizeOptions): WeightNode;
export function optimize<M extends Module>(model: M, opts?: OptimizeOptions): M;
export function optimize(x: WeightNode | Module, opts: OptimizeOptions = {}): WeightNode | Module {
  const o: Required<OptimizeOptions> = { fold_deltas: opts.fold_deltas ?? false, fuse_scales: opts.fuse_scales ?? true, fold_dense: opts.fold_dense ?? true };
  if (!("named_modules" in x)) return rewrite(x, o);
  for (const [, m] of x.named_modules()) if (m instanceof CompressedLinear) m.weight = rewrite(m.weight, o);
  return x;
}

/** One weight's bytes: as stored, and as a dense tensor of its logical shape. */
export interface WeightUsage {
  name: string;
  /** "parameter" for a plain dense parameter, else the node's repr (kind, shape, format...). */
  kind: string;
  shape: number[];
  nbytes: number;
  dense_nbytes: number;
}

export interface MemoryUsage {
  weights: WeightUsage[];
  /** Sums over `weights` (shared tensors counted once). */
  nbytes: number;
  dense_nbytes: number;
  /** nbytes / dense_nbytes. */
  ratio: number;
}

/**
 * Compressed vs dense bytes per weight and for the whole model: each CompressedLinear's weight
 * node (named `<module path>.weight`), each plain parameter as itself. Buffers are left out.
 */
export function memory_usage(model: Module | WeightNode): MemoryUsage {
  const weights: WeightUsage[] = [];
  const seen = new Set<Tensor>();
  let nbytes = 0;
  const add = (name: string, n: WeightNode, kind: string) => {
    const own = n.nbytes(); // this weight's bytes on its own
    nbytes += n.nbytes(seen); // the model total counts a shared tensor once
    weights.push({ name, kind, shape: [...n.shape], nbytes: own, dense_nbytes: n.dense_nbytes() });
  };
  if (!("named_modules" in model)) {
    add("weight", model, model.toString());
  } else {
    for (const [path, m] of model.named_modules()) {
      if (m instanceof CompressedLinear) add(path ? `${path}.weight` : "weight", m.weight, m.weight.toString());
    }
    for (const [name, p] of model.named_parameters()) add(name, new Dense(p), "parameter");
  }
  const dense = weights.reduce((s, w) => s + w.dense_nbytes, 0);
  return { weights, nbytes, dense_nbytes: dense, ratio: dense ? nbytes / dense : 1 };
}
