/**
 * loom.compress(model, { method, bits | rank | sparsity, target_modules, validation }): replace
 * the weights of the selected Linear (and HF Conv1D) layers by weight nodes, in place, and
 * report what it cost: bytes before and after per layer, the relative Frobenius reconstruction
 * error ‖W − Ŵ‖_F / ‖W‖_F, and the loss on a validation batch before and after.
 *
 * Each selected layer becomes a CompressedLinear (linear.ts) holding the node; its bias stays
 * the same Parameter. A Conv1D (weight [in, out], y = x·W + b) becomes the CompressedLinear of
 * Wᵀ, which computes the same function.
 *
 * Methods: "q8_0", "q4_0", "nf4", "int8" (Quantized, quantized.ts), "lowrank" (LowRank, needs
 * `rank`), "sparse" (Sparse magnitude pruning, needs `sparsity`), "pq" (ProductQuantized, `bits`
 * per code, default 8).
 *
 * Target selection follows PEFT's check_target_module_exists (a string is a regular expression
 * matching the whole module path; a list matches a path equal to an entry or ending in "." +
 * entry): src/lora/config.ts's matches_target_modules. Without target_modules every Linear/Conv1D whose weight no other module
 * shares (tied embeddings stay dense) is compressed.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { matches_target_modules } from "../lora/config.ts";
import { Conv1D } from "../nn/conv1d.ts";
import { Linear } from "../nn/linear.ts";
import type { Module } from "../nn/module.ts";
import { LoomValueError } from "../tensor/errors.ts";
import { CompressedLinear } from "./linear.ts";
import { LowRank } from "./lowrank.ts";
import type { WeightNode } from "./node.ts";
import { ProductQuantized } from "./product_quantized.ts";
import { Quantized } from "./quantized.ts";
import type { QuantFormat } from "../graph/ops/quantized.ts";
import { Sparse, type SparseFormat } from "./sparse.ts";

export type CompressMethod = QuantFormat | "lowrank" | "sparse" | "pq";
const METHODS: readonly CompressMethod[] = ["q8_0", "q4_0", "nf4", "int8", "lowrank", "sparse", "pq"];
/** Bits per weight each quantized format stores (its `bits`, when given, must agree). */
const QUANT_BITS: Record<QuantFormat, number> = { q8_0: 8, int8: 8, q4_0: 4, nf4: 4 };

/** A validation batch: loss_fn(forward(model, input), target) is evaluated before and after. */
export interface CompressValidation<M extends Module = Module> {
  input: Tensor;
  target: Tensor;
  loss_fn: (output: Tensor, target: Tensor) => Tensor;
  /** How to run the model (default `model.call(input)`). */
  forward?: (model: M, input: Tensor) => Tensor;
}

export interface CompressOptions<M extends Module = Module> {
  method: CompressMethod;
  /** Bits per code: "pq" (codebook of 2^bits, default 8); for quantized formats it must match the format. */
  bits?: number;
  /** "lowrank": the kept rank, clipped to nothing (out of range is an error). */
  rank?: number;
  /** "sparse": fraction of entries dropped, in [0, 1). */
  sparsity?: number;
  /** "sparse": "csr" (default) or "coo". */
  format?: SparseFormat;
  /** "pq": sub-vector length (default 4), k-means seed (default 0) and iterations (default 25). */
  sub_dim?: number;
  seed?: number;
  n_iter?: number;
  /** PEFT-style: a regex over the whole module path, or names matched at the end of paths. */
  target_modules?: string | readonly string[];
  validation?: CompressValidation<M>;
}

export interface LayerReport {
  /** Module path (e.g. "transformer.h.0.mlp.c_fc"). */
  name: string;
  kind: string;
  /** Logical [out, in]. */
  shape: number[];
  bytes_before: number;
  bytes_after: number;
  /** ‖W − Ŵ‖_F / ‖W‖_F (0 for an all-zero W reproduced exactly). */
  rel_error: number;
}

export interface CompressReport {
  method: CompressMethod;
  layers: LayerReport[];
  bytes_before: number;
  bytes_after: number;
  /** bytes_after / bytes_before over the compressed layers. */
  ratio: number;
  /** Validation loss before and after (null without `validation`). */
  loss_before: number | null;
  loss_after: number | null;
}

/** PEFT's target_modules rule (src/lora/config.ts): a string is a full regex match, a list an equal or "." + entry suffix. */
export function matches_target(key: string, target_modules: string | readonly string[]): boolean {
  return matches_target_modules(key, target_modules, "compress");
}

/** Build the node of one weight [N, K] for the options. */
function convert(w: Tensor, o: CompressOptions<any>, name: string): WeightNode {
  switch (o.method) {
    case "q8_0": case "q4_0": case "nf4": case "int8":
      return Quantized.quantize(w, o.method, name);
    case "lowrank":
      return LowRank.from_dense(w, o.rank!, name);
    case "sparse":
      return Sparse.prune(w, o.sparsity!, { format: o.format, name });
    case "pq":
      return ProductQuantized.fit(w, { bits: o.bits, sub_dim: o.sub_dim, seed: o.seed, n_iter: o.n_iter, name });
  }
}

/** @throws LoomValueError for an unknown method or a missing/mismatching parameter */
function checkOptions(o: CompressOptions<any>): void {
  if (!METHODS.includes(o.method)) throw new LoomValueError(`[compress] unknown method ${JSON.stringify(o.method)} (expected one of ${METHODS.join(", ")})`);
  if (o.method === "lowrank" && o.rank === undefined) throw new LoomValueError(`[compress] method "lowrank" needs a rank`);
  if (o.method === "sparse" && o.sparsity === undefined) throw new LoomValueError(`[compress] method "sparse" needs a sparsity in [0, 1)`);
  if (o.method in QUANT_BITS && o.bits !== undefined && o.bits !== QUANT_BITS[o.method as QuantFormat]) {
    throw new LoomValueError(`[compress] method "${o.method}" stores ${QUANT_BITS[o.method as QuantFormat]} bits per weight, got bits=${o.bits}`);
  }
}

/** ‖a − b‖_F / ‖a‖_F in float64. */
function relError(a: Tensor, b: Tensor): number {
  const x = a.contiguous().dataSync(), y = b.contiguous().dataSync();
  let num = 0, den = 0;
  for (let i = 0; i < x.length; i++) {
    const d = x[i]! - y[i]!;
    num += d * d;
    den += x[i]! * x[i]!;
  }
  return den === 0 ? (num === 0 ? 0 : Infinity) : Math.sqrt(num / den);
}

function validationLoss<M extends Module>(model: M, v: CompressValidation<M>): number {
  return no_grad(() => {
    const out = v.forward ? v.forward(model, v.input) : (model as unknown as { call(x: Tensor): Tensor }).call(v.input);
    return v.loss_fn(out, v.target).item();
  });
}

/**
 * Compress the selected layers of `model` in place.
 * @returns the report (per-layer bytes and reconstruction error, totals, validation losses)
 * @throws LoomValueError for a bad method or parameter, targets that match nothing, a matched
 *   module that is not Linear/Conv1D (or is already compressed); the nodes' own errors
 *   (rank/sparsity out of range, block-size mismatch...) name the module path
 */
export function compress<M extends Module>(model: M, opts: CompressOptions<M>): CompressReport {
  checkOptions(opts);
  const loss_before = opts.validation ? validationLoss(model, opts.validation) : null;
  // weights used by more than one module (tied embeddings) are left alone unless targeted by name
  const owners = new Map<unknown, number>();
  for (const [, m] of model.named_modules()) for (const [, p] of m.named_parameters("", false)) owners.set(p, (owners.get(p) ?? 0) + 1);
  const selected: [string, Linear | Conv1D][] = [];
  for (const [path, m] of model.named_modules()) {
    if (path === "") continue;
    if (opts.target_modules !== undefined) {
      if (!matches_target(path, opts.target_modules)) continue;
      if (m instanceof CompressedLinear) throw new LoomValueError(`[compress] module "${path}" is already compressed (${m.weight.toString()})`);
      if (!(m instanceof Linear) && !(m instanceof Conv1D)) {
        throw new LoomValueError(`[compress] target module ${m._get_name()} at "${path}" is not supported; only Linear and Conv1D are`);
      }
      selected.push([path, m]);
    } else if ((m instanceof Linear || m instanceof Conv1D) && owners.get(m.weight) === 1) {
      selected.push([path, m]);
    }
  }
  if (selected.length === 0) {
    throw new LoomValueError(`[compress] target modules ${JSON.stringify(opts.target_modules ?? "all Linear/Conv1D")} not found in the model`);
  }
  const layers: LayerReport[] = [];
  for (const [path, m] of selected) {
    const w = no_grad(() => (m instanceof Conv1D ? m.weight.detach().t().contiguous() : m.weight.detach())); // [out, in]
    const node = convert(w, opts, path);
    const approx = no_grad(() => node.decompose(w));
    layers.push({
      name: path, kind: node.kind, shape: [...node.shape],
      bytes_before: node.dense_nbytes(), bytes_after: node.nbytes(), rel_error: relError(w, approx),
    });
    const layer = new CompressedLinear(node, m.bias);
    layer.train(m.training);
    const i = path.lastIndexOf(".");
    model.get_submodule(i < 0 ? "" : path.slice(0, i)).add_module(path.slice(i + 1), layer);
  }
  const bytes_before = layers.reduce((s, l) => s + l.bytes_before, 0);
  const bytes_after = layers.reduce((s, l) => s + l.bytes_after, 0);
  return {
    method: opts.method, layers, bytes_before, bytes_after, ratio: bytes_before === 0 ? 1 : bytes_after / bytes_before,
    loss_before, loss_after: opts.validation ? validationLoss(model, opts.validation) : null,
  };
}
