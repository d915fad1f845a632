/**
 * Tensor-parallel linear layers (Megatron-LM's ColumnParallelLinear and RowParallelLinear,
 * megatron/core/tensor_parallel/layers.py). The weight of y = x Wᵀ + b, W: [out, in], is split
 * over the world's ranks:
 * - ColumnParallelLinear splits W by rows (output features): rank r holds W[r·out/N : (r+1)·out/N]
 *   and b's matching slice and computes its slice of y. The input enters through
 *   copy_to_parallel_region (identity; its gradient is all-reduced, since every rank's slice
 *   depends on the whole x). `gather_output` all-gathers the slices into the full y.
 * - RowParallelLinear splits W by columns (input features): rank r holds W[:, r·in/N : (r+1)·in/N]
 *   and multiplies its slice of x (`input_is_parallel`: the slice a ColumnParallelLinear produced;
 *   else the layer takes its slice of a full x); reduce_from_parallel_region sums the partial
 *   products over ranks, then the full bias is added once.
 * Column then row (MLP: c_fc, act, c_proj; attention: q/k/v by heads, then the output projection)
 * costs one all-reduce of [B, T, C] per block half in forward and one in backward (Shoeybi et al.
 * 2019, "Megatron-LM", sec. 3). The loss is replicated over the ranks: gradients of replicated
 * parameters (LayerNorm, the row-parallel bias) are already equal on every rank.
 *
 * Initialization follows Megatron's CPU path (`_initialize_affine_weight_cpu`): the full weight is
 * drawn as nn.Linear draws it (same generator state on every rank), then each rank keeps its
 * slice, so a tensor-parallel layer equals the nn.Linear of the same seed. `from_weight` takes
 * the full weight of an existing layer instead.
 */
import { linear } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { lift } from "../nn/execution.ts";
import { Linear, type LinearOptions } from "../nn/linear.ts";
import { TensorModule } from "../nn/module.ts";
import { Parameter } from "../nn/parameter.ts";
import { no_grad } from "../autograd/grad_mode.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { CHECK_SHAPES } from "./collectives.ts";
import { collectiveTransport } from "./nccl_tensor.ts";
import * as ops from "./ops.ts";
import { default_group } from "./process_group.ts";

export interface ParallelLinearOptions extends LinearOptions {
  /** ColumnParallelLinear: all-gather the output slices into the full output (default false). */
  gather_output?: boolean;
  /** RowParallelLinear: the input is already this rank's slice (default false: take it from a full input). */
  input_is_parallel?: boolean;
  /** @internal The full weight [out, in] and bias [out] to take this rank's part of (from_weight). */
  _full?: { weight: Tensor; bias: Tensor | null };
}

/** Region-op attributes for a tensor on `device` ("cuda": NCCL; LoomDistributedError under backend "mpi"). */
const ATTRS = (device: string): ops.CollectiveAttrs =>
  collectiveTransport(default_group("tensor parallel").backend, device, "tensor parallel") === "nccl"
    ? { op: "sum", src: 0, check: CHECK_SHAPES, device }
    : { op: "sum", src: 0, check: CHECK_SHAPES };

function split(what: string, n: number, world: number, name: string): number {
  if (n % world !== 0) throw new LoomValueError(`[${what}] ${name}=${n} is not divisible by the world size ${world}`);
  return n / world;
}

/** Weight [out, in] and bias [out] of a full layer, as eager tensors (copied: the slices own their data). */
/** An existing layer's weight [out, in] and bias [out], detached. @throws LoomShapeError for other shapes */
function givenFull(what: string, weight: Tensor, bias: Tensor | null): { weight: Tensor; bias: Tensor | null } {
  if (weight.ndim !== 2 || (bias && (bias.ndim !== 1 || bias.shape[0] !== weight.shape[0]))) {
    throw new LoomShapeError(`[${what}] weight ${fmtShape(weight.shape)} and bias ${bias ? fmtShape(bias.shape) : "None"} must be [out, in] and [out]`);
  }
  return { weight: weight.detach(), bias: bias?.detach() ?? null };
}

function fullOf(l: Linear): { weight: Tensor; bias: Tensor | null } {
  return { weight: l.weight.detach(), bias: l.bias ? l.bias.detach() : null };
}

/**
 * y_r = x W_rᵀ + b_r on rank r (W split by output features).
 * Input [*, in_features]; output [*, out_features / world] (or [*, out_features] with gather_output).
 */
export class ColumnParallelLinear extends TensorModule {
  /** [out_features / world, in_features] */
  weight: Parameter;
  /** [out_features / world] or null */
  bias: Parameter | null;
  readonly in_features: number;
  readonly out_features: number;
  readonly output_size_per_partition: number;
  readonly gather_output: boolean;
  readonly rank: number;
  readonly world_size: number;

  /** @throws LoomValueError when out_features does not divide by the world size */
  constructor(in_features: number, out_features: number, opts: ParallelLinearOptions = {}) {
    super();
    const g = default_group("ColumnParallelLinear");
    this.rank = g.rank;
    this.world_size = g.size;
    this.in_features = in_features;
    this.out_features = out_features;
    this.output_size_per_partition = split("ColumnParallelLinear", out_features, g.size, "out_features");
    this.gather_output = opts.gather_output ?? false;
    const full = opts._full ?? fullOf(new Linear(in_features, out_features, opts));
    const n = this.output_size_per_partition, at = this.rank * n;
    this.weight = new Parameter(no_grad(() => full.weight.narrow(0, at, n).clone()));
    this.bias = full.bias ? new Parameter(no_grad(() => full.bias!.narrow(0, at, n).clone())) : null;
  }

  /**
   * This rank's part of an existing layer's weight [out, in] and bias [out].
   * @throws LoomShapeError when the weight is not [out, in]
   */
  static from_weight(weight: Tensor, bias: Tensor | null, opts: ParallelLinearOptions = {}): ColumnParallelLinear {
    return new ColumnParallelLinear(weight.shape[1]!, weight.shape[0]!, { ...opts, _full: givenFull("ColumnParallelLinear", weight, bias) });
  }

  /** @param x - [*, in_features] @returns [*, out_features / world], or [*, out_features] with gather_output */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    if (x.ndim === 0 || x.shape[x.ndim - 1] !== this.in_features) {
      throw new LoomShapeError(`[ColumnParallelLinear] input ${fmtShape(x.shape)} does not end in in_features=${this.in_features}`);
    }
    const xp = x._apply(ops.copy_to_parallel_region, [], ATTRS(x.device));
    const y = linear(xp, lift(this.weight, x), lift(this.bias, x)); // [*, out / N]
    if (!this.gather_output) return y;
    const all = y._apply(ops.gather_from_parallel_region, [], ATTRS(y.device)); // [N, *, out / N]
    const nd = all.ndim;
    const perm = [...Array.from({ length: nd - 2 }, (_, i) => i + 1), 0, nd - 1];
    return all.permute(perm).reshape([...x.shape.slice(0, -1), this.out_features]); // slices side by side
  }

  override extra_repr(): string {
    return `in_features=${this.in_features}, out_features=${this.out_features} (${this.output_size_per_partition} on rank ${this.rank}), bias=${this.bias ? "True" : "False"}, gather_output=${this.gather_output ? "True" : "False"}`;
  }
}

/**
 * y = Σ_r x_r W_rᵀ + b (W split by input features; the sum is an all-reduce).
 * Input [*, in_features / world] (input_is_parallel) or [*, in_features]; output [*, out_features].
 */
export class RowParallelLinear extends TensorModule {
  /** [out_features, in_features / world] */
  weight: Parameter;
  /** [out_features] (whole on every rank: added after the reduction) or null */
  bias: Parameter | null;
  readonly in_features: number;
  readonly out_features: number;
  readonly input_size_per_partition: number;
  readonly input_is_parallel: boolean;
  readonly rank: number;
  readonly world_size: number;

  /** @throws LoomValueError when in_features does not divide by the world size */
  constructor(in_features: number, out_features: number, opts: ParallelLinearOptions = {}) {
    super();
    const g = default_group("RowParallelLinear");
    this.rank = g.rank;
    this.world_size = g.size;
    this.in_features = in_features;
    this.out_features = out_features;
    this.input_size_per_partition = split("RowParallelLinear", in_features, g.size, "in_features");
    this.input_is_parallel = opts.input_is_parallel ?? false;
    const full = opts._full ?? fullOf(new Linear(in_features, out_features, opts));
    const n = this.input_size_per_partition;
    this.weight = new Parameter(no_grad(() => full.weight.narrow(1, this.rank * n, n).clone()));
    this.bias = full.bias ? new Parameter(no_grad(() => full.bias!.clone())) : null;
  }

  /** This rank's part of an existing layer's weight [out, in] and bias [out]. */
  static from_weight(weight: Tensor, bias: Tensor | null, opts: ParallelLinearOptions = {}): RowParallelLinear {
    return new RowParallelLinear(weight.shape[1]!, weight.shape[0]!, { ...opts, _full: givenFull("RowParallelLinear", weight, bias) });
  }

  /** @param x - [*, in_features / world] (input_is_parallel) or [*, in_features] @returns [*, out_features] */
  forward_lazy<S extends TensorOps<S>>(x: S): S {
    const n = this.input_size_per_partition;
    const want = this.input_is_parallel ? n : this.in_features;
    if (x.ndim === 0 || x.shape[x.ndim - 1] !== want) {
      throw new LoomShapeError(`[RowParallelLinear] input ${fmtShape(x.shape)} does not end in ${this.input_is_parallel ? `in_features / world = ${n}` : `in_features = ${this.in_features}`}`);
    }
    // Megatron's scatter_to_tensor_model_parallel_region: this rank's slice of the last dim. Its
    // backward must give every rank the whole gradient of the replicated x: each rank's gradient
    // is zero outside its slice, so copy_to_parallel_region's all-reduce assembles it.
    const xr = this.input_is_parallel ? x : x._apply(ops.copy_to_parallel_region, [], ATTRS(x.device)).narrow(x.ndim - 1, this.rank * n, n);
    const partial = linear(xr, lift(this.weight, x)); // [*, out], this rank's share of the sum
    const y = partial._apply(ops.reduce_from_parallel_region, [], ATTRS(partial.device));
    return this.bias ? y.add(lift(this.bias, x)) : y;
  }

  override extra_repr(): string {
    return `in_features=${this.in_features} (${this.input_size_per_partition} on rank ${this.rank}), out_features=${this.out_features}, bias=${this.bias ? "True" : "False"}, input_is_parallel=${this.input_is_parallel ? "True" : "False"}`;
  }
}
