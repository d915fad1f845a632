/**
 * Normalization over the batch and over channel groups: batch_norm (torch.nn.functional.batch_norm)
 * with its running-statistics update, and group_norm (torch.nn.functional.group_norm).
 *
 * The running statistics are written in place under no_grad with `copy_`: an eager buffer is
 * written now; a LazyTensor lifted from an eager buffer (`Tensor.lazy()`) records a deferred
 * write of that buffer (deferred.ts), so a lazy training step with batch_norm is still one plan.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { isFloating } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import type { TensorOps } from "./surface.ts";

/** [1, C, 1, ...] so a per-channel vector broadcasts over [N, C, *]. */
function perChannel<S extends TensorOps<S>>(v: S, ndim: number): S {
  return v.reshape([1, v.numel(), ...new Array<number>(ndim - 2).fill(1)]);
}

/** Check a per-channel tensor (running stat, weight, bias) has C elements. */
function checkChannels(op: string, name: string, v: TensorOps<any> | null | undefined, input: TensorOps<any>): void {
  if (!v) return;
  const C = input.shape[1]!;
  if (v.numel() !== C) throw new LoomShapeError(`[${op}] ${name} should contain ${C} elements not ${v.numel()} (${name} ${fmtShape(v.shape)}, input ${fmtShape(input.shape)})`);
  if (v.dtype !== input.dtype) throw new LoomDtypeError(`[${op}] ${name} has dtype ${v.dtype} but input has dtype ${input.dtype}`);
}

/**
 * Batch normalization over dim 1 of [N, C, *]: y = (x - E[x]) / √(Var[x] + eps) · weight + bias.
 * Training (or without running stats): E and Var are the batch's per-channel mean and biased
 * variance; with running stats, under no_grad,
 *   running_mean ← (1 - momentum)·running_mean + momentum·mean
 *   running_var  ← (1 - momentum)·running_var + momentum·Var_unbiased (n/(n-1) · biased)
 * Evaluation: E and Var are running_mean and running_var.
 * @param input - [N, C, *] float
 * @param running_mean - [C] or null (written in place when training)
 * @param running_var - [C] or null (written in place when training)
 * @param weight - [C] or null
 * @param bias - [C] or null
 * @param momentum - the update weight (a number, or a 0-d tensor: the module's cumulative
 *   average passes 1/num_batches_tracked without reading the counter on the host)
 * @param eps - added to the variance (absolute)
 * @returns input's shape
 * @throws LoomShapeError for an input below 2-D or a per-channel tensor without C elements;
 *   LoomValueError when training on one value per channel; LoomDtypeError for non-float input
 * Source: Ioffe & Szegedy 2015, "Batch Normalization"; torch.nn.functional.batch_norm
 */
export function batch_norm<S extends TensorOps<S>>(
  input: S, running_mean: S | null, running_var: S | null, weight?: S | null, bias?: S | null,
  training = false, momentum: number | S = 0.1, eps = 1e-5,
): S {
  return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps, (t, v) => no_grad(() => t.copy_(v)));
}

/**
 * batch_norm with the running-statistic write given: `write(target, value)` stores value (no
 * grad) into running_mean / running_var. (BatchNorm modules write their eager buffers privately,
 * as optimizers write parameters: no copy-on-write copy per step.)
 */
export function _batch_norm<S extends TensorOps<S>>(
  input: S, running_mean: S | null, running_var: S | null, weight: S | null | undefined, bias: S | null | undefined,
  training: boolean, momentum: number | S, eps: number, write: (target: S, value: S) => void,
): S {
  if (input.ndim < 2) throw new LoomShapeError(`[batch_norm] expected an input of at least 2 dims [N, C, *], got ${fmtShape(input.shape)}`);
  if (!isFloating(input.dtype)) throw new LoomDtypeError(`[batch_norm] expected a floating point input, got ${input.dtype}`);
  for (const [name, v] of [["running_mean", running_mean], ["running_var", running_var], ["weight", weight], ["bias", bias]] as const) {
    checkChannels("batch_norm", name, v, input);
  }
  if (!training && (!running_mean || !running_var)) {
    throw new LoomValueError("[batch_norm] running_mean and running_var must be defined in evaluation mode");
  }
  const nd = input.ndim;
  let y: S;
  if (training) {
    const dims = [0, ...Array.from({ length: nd - 2 }, (_, i) => i + 2)];
    const n = input.numel() / input.shape[1]!;
    if (n <= 1) throw new LoomValueError(`[batch_norm] Expected more than 1 value per channel when training, got input size ${fmtShape(input.shape)}`);
    const mean = input.mean(dims, true); // [1, C, 1...]
    const d = input.sub(mean);
    const v = d.mul(d).mean(dims, true); // biased
    y = d.mul(v.add(eps).rsqrt());
    if (running_mean && running_var) {
      no_grad(() => {
        const m = momentum;
        const keep = typeof m === "number" ? 1 - m : m.rsub(1);
        write(running_mean, running_mean.mul(keep).add(mean.detach().reshape(running_mean.shape as number[]).mul(m)));
        const unbiased = v.detach().mul(n / (n - 1)).reshape(running_var.shape as number[]);
        write(running_var, running_var.mul(keep).add(unbiased.mul(m)));
      });
    }
  } else {
    const rm = perChannel(running_mean!, nd), rv = perChannel(running_var!, nd);
    y = input.sub(rm).mul(rv.add(eps).rsqrt());
  }
  if (weight) y = y.mul(perChannel(weight, nd));
  if (bias) y = y.add(perChannel(bias, nd));
  return y;
}

/**
 * Group normalization: the C channels of [N, C, *] are split into num_groups groups, each
 * normalized over its channels and spatial positions with the biased variance, then scaled and
 * shifted per channel: y = (x - E[x]) / √(Var[x] + eps) · weight + bias.
 * @param input - [N, C, *] float
 * @param weight - [C] or null
 * @param bias - [C] or null
 * @param eps - added to the variance (absolute)
 * @returns input's shape
 * @throws LoomShapeError when C is not divisible by num_groups or weight/bias lack C elements
 * Source: Wu & He 2018, "Group Normalization"; torch.nn.functional.group_norm
 */
export function group_norm<S extends TensorOps<S>>(input: S, num_groups: number, weight?: S | null, bias?: S | null, eps = 1e-5): S {
  if (input.ndim < 2) throw new LoomShapeError(`[group_norm] expected an input of at least 2 dims [N, C, *], got ${fmtShape(input.shape)}`);
  if (!isFloating(input.dtype)) throw new LoomDtypeError(`[group_norm] expected a floating point input, got ${input.dtype}`);
  const [N, C] = input.shape as [number, number];
  if (!Number.isInteger(num_groups) || num_groups <= 0 || C % num_groups !== 0) {
    throw new LoomShapeError(`[group_norm] Expected number of channels in input to be divisible by num_groups, but got input of shape ${fmtShape(input.shape)} and num_groups=${num_groups}`);
  }
  checkChannels("group_norm", "weight", weight, input);
  checkChannels("group_norm", "bias", bias, input);
  const per = input.shape.slice(1).reduce((a, b) => a * b, 1) / num_groups; // not -1: N may be 0
  const g = input.reshape([N, num_groups, per]); // [N, G, C/G·*]
  const d = g.sub(g.mean(2, true));
  let y = d.mul(d.mul(d).mean(2, true).add(eps).rsqrt()).reshape(input.shape as number[]);
  if (weight) y = y.mul(perChannel(weight, input.ndim));
  if (bias) y = y.add(perChannel(bias, input.ndim));
  return y;
}
