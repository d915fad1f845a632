/**
 * torch.distributed's collectives over the default group, on eager Tensors and LazyTensors
 * alike: the in-place forms (`all_reduce(t)` writes t, as torch does) and, in `functional`, the
 * differentiable forms that return new tensors (torch.distributed.nn.functional). All of them
 * apply one op of ops.ts, so a LazyTensor gets a node that its plan runs as one instruction.
 *
 * Shapes and dtypes are compared across ranks before data moves (ops.ts), unless
 * `LOOM_DIST_CHECK=0`.
 *
 * Transport per tensor (nccl_tensor.ts collectiveTransport): tensors on device "cuda" go over NCCL
 * (backend "nccl"; backend "mpi" refuses them with LoomDistributedError), host tensors over MPI.
 * The in-place forms on an eager cuda tensor run NCCL on the tensor's own device buffer
 * (`onDevice`); lazy cuda tensors and the differentiable forms go through the op (ops.ts).
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { stack } from "../lazy/functional.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { collectiveTransport, ncclCollective, type NcclCollective } from "./nccl_tensor.ts";
import * as ops from "./ops.ts";
import { default_group, ReduceOp, type ReduceOpName } from "./process_group.ts";

/** Whether collectives compare shapes across ranks first (`LOOM_DIST_CHECK=0` turns it off). */
export const CHECK_SHAPES = process.env.LOOM_DIST_CHECK !== "0";

/**
 * The op's attributes for a tensor on `device`.
 * @throws LoomDistributedError for a "cuda" tensor under backend "mpi" (at record time, before a plan runs)
 */
function attrs(device: string, what: string, op: ReduceOpName = ReduceOp.SUM, src = 0): ops.CollectiveAttrs {
  if (!Object.values(ReduceOp).includes(op)) throw new LoomValueError(`[collective] unknown ReduceOp '${op}' (sum, avg, max, min)`);
  const g = default_group(what);
  return collectiveTransport(g.backend, device, what) === "nccl" ? { op, src, check: CHECK_SHAPES, device } : { op, src, check: CHECK_SHAPES };
}

/**
 * An eager tensor on "cuda" under NCCL (a pending value is computed first): the collective on its device buffer, as a
 * new eager cuda tensor (shapes checked across ranks first, as ops.ts does); null otherwise.
 */
export function onDevice<S extends TensorOps<S>>(x: S, kind: NcclCollective, a: ops.CollectiveAttrs): S | null {
  if (a.device !== "cuda" || !(x instanceof Tensor)) return null;
  const g = default_group(kind);
  ops.checkCall(g, kind, x, a);
  return new Tensor(ncclCollective(g.nccl!, kind, x._data(), a), "cuda") as unknown as S;
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
  const a = attrs(tensor.device, "all_reduce", op);
  const x = tensor.detach();
  return writeInto(tensor, onDevice(x, "all_reduce", a) ?? x._apply(ops.all_reduce, [], a));
}

/** In place: tensor ← rank `src`'s tensor (torch.distributed.broadcast). */
export function broadcast<S extends TensorOps<S>>(tensor: S, src = 0): S {
  const a = attrs(tensor.device, "broadcast", ReduceOp.SUM, src);
  const n = default_group("broadcast").size;
  if (!(Number.isInteger(src) && src >= 0 && src < n)) throw new LoomValueError(`[broadcast] src ${src} is not a rank of a world of ${n}`);
  const x = tensor.detach();
  return writeInto(tensor, onDevice(x, "broadcast", a) ?? x._apply(ops.broadcast, [], a));
}

/**
 * Fill `tensor_list[r]` with rank r's `tensor` (torch.distributed.all_gather).
 * @throws LoomValueError when the list's length is not the world size
 */
export function all_gather<S extends TensorOps<S>>(tensor_list: S[], tensor: S): S[] {
  const n = default_group("all_gather").size;
  if (tensor_list.length !== n) throw new LoomValueError(`[all_gather] tensor_list has ${tensor_list.length} tensors for a world of ${n}`);
  const a = attrs(tensor.device, "all_gather");
  const x = tensor.detach();
  const all = onDevice(x, "all_gather", a) ?? x._apply(ops.all_gather, [], a); // [n, ...]
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
  const a = attrs(input.device, "all_gather_into_tensor");
  const x = input.detach();
  return writeInto(output, (onDevice(x, "all_gather", a) ?? x._apply(ops.all_gather, [], a)).reshape(want));
}

/**
 * output ← op over ranks of input_list[rank] (torch.distributed.reduce_scatter).
 * @throws LoomValueError when the list's length is not the world size
 */
export function reduce_scatter<S extends TensorOps<S>>(output: S, input_list: S[], op: ReduceOpName = ReduceOp.SUM): S {
  const n = default_group("reduce_scatter").size;
  if (input_list.length !== n) throw new LoomValueError(`[reduce_scatter] input_list has ${input_list.length} tensors for a world of ${n}`);
  const a = attrs(input_list[0]?.device ?? output.device, "reduce_scatter", op);
  const stacked = stack(input_list.map((t) => t.detach()), 0);
  return writeInto(output, onDevice(stacked, "reduce_scatter", a) ?? stacked._apply(ops.reduce_scatter, [], a));
}

/**
 * output ← this rank's block (dim 0) of op over ranks of input (torch.distributed.reduce_scatter_tensor).
 * @param input - [world_size * d0, ...]; output - [d0, ...]
 */
export function reduce_scatter_tensor<S extends TensorOps<S>>(output: S, input: S, op: ReduceOpName = ReduceOp.SUM): S {
  const n = default_group("reduce_scatter_tensor").size;
  if (input.shape.length === 0 || input.shape[0]! % n !== 0) throw new LoomShapeError(`[reduce_scatter_tensor] input ${fmtShape(input.shape)}: dim 0 must be a multiple of the world size ${n}`);
  const a = attrs(input.device, "reduce_scatter_tensor", op);
  const blocks = input.detach().reshape([n, input.shape[0]! / n, ...input.shape.slice(1)]);
  return writeInto(output, onDevice(blocks, "reduce_scatter", a) ?? blocks._apply(ops.reduce_scatter, [], a));
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
    return x._apply(ops.all_reduce, [], attrs(x.device, "all_reduce", op));
  },
  /** rank src's x on every rank. */
  broadcast<S extends TensorOps<S>>(x: S, src = 0): S {
    return x._apply(ops.broadcast, [], attrs(x.device, "broadcast", ReduceOp.SUM, src));
  },
  /** Every rank's x stacked on a new leading dim: shape `[world_size, ...x.shape]`. */
  all_gather<S extends TensorOps<S>>(x: S): S {
    return x._apply(ops.all_gather, [], attrs(x.device, "all_gather"));
  },
  /** This rank's block of op over ranks: x `[world_size, ...]` gives `[...]`. */
  reduce_scatter<S extends TensorOps<S>>(x: S, op: ReduceOpName = ReduceOp.SUM): S {
    return x._apply(ops.reduce_scatter, [], attrs(x.device, "reduce_scatter", op));
  },
};
