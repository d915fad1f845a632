/**
 * torch.distributed's collectives over the default group, on eager Tensors and LazyTensors
 * alike: the in-place forms (`all_reduce(t)` writes t, as torch does) and, in `functional`, the
 * differentiable forms that return new tensors (torch.distributed.nn.functional). All of them
 * apply one op of ops.ts, so a LazyTensor gets a node that its plan runs as one instruction.
 *
 * Shapes and dtypes are compared across ranks before data moves (ops.ts), unless
 * `LOOM_DIST_CHECK=0`.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { stack } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import * as ops from "./ops.ts";
import { default_group, ReduceOp, type ReduceOpName } from "./process_group.ts";

/** Whether collectives compare shapes across ranks first (`LOOM_DIST_CHECK=0` turns it off). */
export const CHECK_SHAPES = process.env.LOOM_DIST_CHECK !== "0";

function attrs(op: ReduceOpName = ReduceOp.SUM, src = 0): ops.CollectiveAttrs {
  if (!Object.values(ReduceOp).includes(op)) throw new LoomValueError(`[collective] unknown ReduceOp '${op}' (sum, avg, max, min)`);
  return { op, src, check: CHECK_SHAPES };
}

/** Write `v` into `t` (no autograd: torch's in-place collectives are not differentiable). */
function writeInto<S extends TensorOps<S>>(t: S, v: S): S {
  no_grad(() => t.copy_(v));
  return t;
}

/**
 * In place: tensor ← op over all ranks of tensor (torch.distributed.all_reduce).
 * @param tensor - float32/float64/int32/int64/int8/uint8 (AVG: float only); eager or lazy
 * @returns tensor
 * @throws LoomShapeError when ranks pass different shapes, LoomRankFailedError / LoomCollectiveTimeoutError
 */
export function all_reduce<S extends TensorOps<S>>(tensor: S, op: ReduceOpName = ReduceOp.SUM): S {
  default_group("all_reduce");
  return writeInto(tensor, tensor.detach()._apply(ops.all_reduce, [], attrs(op)));
}

/** In place: tensor ← rank `src`'s tensor (torch.distributed.broadcast). */
export function broadcast<S extends TensorOps<S>>(tensor: S, src = 0): S {
  default_group("broadcast");
  return writeInto(tensor, tensor.detach()._apply(ops.broadcast, [], attrs(ReduceOp.SUM, src)));
}

/**
 * Fill `tensor_list[r]` with rank r's `tensor` (torch.distributed.all_gather).
 * @throws LoomValueError when the list's length is not the world size
 */
export function all_gather<S extends TensorOps<S>>(tensor_list: S[], tensor: S): S[] {
  const n = default_group("all_gather").size;
  if (tensor_list.length !== n) throw new LoomValueError(`[all_gather] tensor_list has ${tensor_list.length} tensors for a world of ${n}`);
  const all = tensor.detach()._apply(ops.all_gather, [], attrs()); // [n, ...]
  tensor_list.forEach((t, r) => writeInto(t, all.select(0, r)));
  return tensor_list;
}

/**
 * output ← every rank's input concatenated on dim 0 (torch.distributed.all_gather_into_tensor).
 * @param output - [world_size * d0, ...]; input - [d0, ...]
 */
export function all_gather_into_tensor<S extends TensorOps<S>>(output: S, input: S): S {
  const n = default_group("all_gather_into_tensor").size;
  const want = [n * (input.shape[0] ?? 1), ...input.shape.slice(1)];
  if (input.shape.length === 0 || output.shape.join() !== want.join()) {
    throw new LoomShapeError(`[all_gather_into_tensor] output ${fmtShape(output.shape)} must be ${fmtShape(want)} for input ${fmtShape(input.shape)} and world size ${n}`);
  }
  return writeInto(output, input.detach()._apply(ops.all_gather, [], attrs()).reshape(want));
}

/**
 * output ← op over ranks of input_list[rank] (torch.distributed.reduce_scatter).
 * @throws LoomValueError when the list's length is not the world size
 */
export function reduce_scatter<S extends TensorOps<S>>(output: S, input_list: S[], op: ReduceOpName = ReduceOp.SUM): S {
  const n = default_group("reduce_scatter").size;
  if (input_list.length !== n) throw new LoomValueError(`[reduce_scatter] input_list has ${input_list.length} tensors for a world of ${n}`);
  const stacked = stack(input_list.map((t) => t.detach()), 0);
  return writeInto(output, stacked._apply(ops.reduce_scatter, [], attrs(op)));
}

/**
 * output ← this rank's block (dim 0) of op over ranks of input (torch.distributed.reduce_scatter_tensor).
 * @param input - [world_size * d0, ...]; output - [d0, ...]
 */
export function reduce_scatter_tensor<S extends TensorOps<S>>(output: S, input: S, op: ReduceOpName = ReduceOp.SUM): S {
  const n = default_group("reduce_scatter_tensor").size;
  if (input.shape.length === 0 || input.shape[0]! % n !== 0) throw new LoomShapeError(`[reduce_scatter_tensor] input ${fmtShape(input.shape)}: dim 0 must be a multiple of the world size ${n}`);
  const blocks = input.detach().reshape([n, input.shape[0]! / n, ...input.shape.slice(1)]);
  return writeInto(output, blocks._apply(ops.reduce_scatter, [], attrs(op)));
}

/**
 * Wait until every rank has called barrier (torch.distributed.barrier). Pending lazy work is not
 * flushed by it.
 */
export function barrier(): void {
  const g = default_group("barrier");
  if (g.size > 1) g.mpi.wait(g.mpi.ibarrier());
}

/**
 * Differentiable collectives returning new tensors (torch.distributed.nn.functional), eager or
 * lazy; gradients as in ops.ts.
 */
export const functional = {
  /** op over ranks of x; x's shape. */
  all_reduce<S extends TensorOps<S>>(x: S, op: ReduceOpName = ReduceOp.SUM): S {
    return x._apply(ops.all_reduce, [], attrs(op));
  },
  /** rank src's x on every rank. */
  broadcast<S extends TensorOps<S>>(x: S, src = 0): S {
    return x._apply(ops.broadcast, [], attrs(ReduceOp.SUM, src));
  },
  /** Every rank's x stacked on a new leading dim: shape `[world_size, ...x.shape]`. */
  all_gather<S extends TensorOps<S>>(x: S): S {
    return x._apply(ops.all_gather, [], attrs());
  },
  /** This rank's block of op over ranks: x `[world_size, ...]` gives `[...]`. */
  reduce_scatter<S extends TensorOps<S>>(x: S, op: ReduceOpName = ReduceOp.SUM): S {
    return x._apply(ops.reduce_scatter, [], attrs(op));
  },
};
