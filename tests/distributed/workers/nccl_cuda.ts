/**
 * Worker for nccl.test.ts: init_process_group({ backend: "nccl" }) and every collective on
 * tensors on device "cuda" (eager in place: NCCL on the tensor's buffer; functional and lazy: the
 * op's staged path), rank r holding x_r = (r+1)·[1, 2, 3]. Needs a GPU, libnccl and libmpi.
 */
import { isCuda } from "../../../src/backends/cuda/storage.ts";
import * as dist from "../../../src/distributed/index.ts";
import { tensor } from "../../../src/lazy/creation.ts";
import type { Tensor } from "../../../src/lazy/tensor.ts";
import { report } from "../helpers.ts";

const g = dist.init_process_group({ backend: "nccl" });
const rank = dist.get_rank(), world = dist.get_world_size();
const cu = (v: number[] | number[][], dtype: "float32" | "int64" = "float32"): Tensor => tensor(v, { dtype }).to("cuda");
const x = () => cu([1, 2, 3]).mul(rank + 1);
const r: Record<string, unknown> = { world, backend: dist.get_backend(), device: g.nccl?.device };

const s = dist.all_reduce(x());
r.sum = s.tolist();
r.sum_on_device = s.device === "cuda" && isCuda(s._data());
r.avg = dist.all_reduce(x(), dist.ReduceOp.AVG).tolist();
r.max = dist.all_reduce(x(), dist.ReduceOp.MAX).tolist();
r.int_sum = dist.all_reduce(cu([rank, 10], "int64")).tolist();
r.bcast = dist.broadcast(x(), world - 1).tolist();
r.gather = dist.all_gather(Array.from({ length: world }, () => cu([0, 0])), cu([rank, -rank])).map((t) => t.tolist());
// reduce_scatter_tensor: input [0, 1, ..., 2W-1] + rank on every rank; rank r keeps block r summed
r.rs_tensor = dist.reduce_scatter_tensor(cu([0, 0]), cu(Array.from({ length: 2 * world }, (_, i) => i + rank))).tolist();
// a strided view (transpose): NCCL gets a dense copy; the in-place write goes back into the view
const m = cu([[1, 2], [3, 4]]).mul(rank + 1);
dist.all_reduce(m.t());
r.strided = m.tolist();
// the differentiable form, eager and lazy (the lazy plan runs the op's reference: staged through the host)
r.functional = dist.functional.all_reduce(x()).tolist();
r.lazy = dist.functional.all_reduce(x().lazy().mul(2)).eval().tolist();
const w = cu([1, 2, 3]).requires_grad_();
dist.functional.all_reduce(w).mul(cu([1, 1, 2])).sum().backward();
r.grad = w.grad!.tolist(); // all_reduce of the gradient [1, 1, 2]
dist.barrier();
dist.destroy_process_group();
report(rank, r);
