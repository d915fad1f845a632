/**
 * Worker for nccl_routing.test.ts (a world of one, backend "mpi", no GPU needed): a tensor that
 * says it is on "cuda" is refused by every collective entry point with LoomDistributedError
 * before any data moves (eager, lazy, functional, DDP, tensor parallel), while host tensors
 * still reduce over MPI.
 */
import * as dist from "../../../src/distributed/index.ts";
import { tensor } from "../../../src/lazy/creation.ts";
import { Tensor } from "../../../src/lazy/tensor.ts";
import { Module } from "../../../src/nn/module.ts";
import { Parameter } from "../../../src/nn/parameter.ts";
import { report } from "../helpers.ts";

dist.init_process_group({ backend: "mpi" });
const rank = dist.get_rank();
const f32 = { dtype: "float32" } as const;
// A Tensor labelled "cuda" over host data: what routing sees of a cuda tensor (device name),
// without a GPU. Nothing below may read it through MPI.
const fakeCuda = () => new Tensor(tensor([1, 2, 3], f32)._data(), "cuda");

function err(fn: () => unknown): { name: string; message: string } | null {
  try {
    fn();
  } catch (e) {
    return { name: (e as Error).constructor.name, message: (e as Error).message };
  }
  return null;
}

class Tiny extends Module {
  w = new Parameter(fakeCuda());
  override forward(x: Tensor): Tensor {
    return x.mul(this.w);
  }
}

report(rank, {
  host_sum: dist.all_reduce(tensor([1, 2, 3], f32)).tolist(),
  all_reduce: err(() => dist.all_reduce(fakeCuda())),
  broadcast: err(() => dist.broadcast(fakeCuda(), 0)),
  all_gather: err(() => dist.all_gather([tensor([0, 0, 0], f32)], fakeCuda())),
  reduce_scatter_tensor: err(() => dist.reduce_scatter_tensor(tensor([0, 0, 0], f32), fakeCuda())),
  functional: err(() => dist.functional.all_reduce(fakeCuda())),
  reduce_scatter: err(() => dist.reduce_scatter(tensor([0, 0, 0], f32), [fakeCuda()])),
  ddp: err(() => new dist.DistributedDataParallel(new Tiny())),
});
