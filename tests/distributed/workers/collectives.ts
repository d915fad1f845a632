/** Worker for collectives.test.ts: every collective, eager and lazy, on js and native. */
import { nativeBackend } from "../../../src/backends/native/backend.ts";
import * as dist from "../../../src/distributed/index.ts";
import { compile_plan } from "../../../src/lazy/lazy_tensor.ts";
import { arange, tensor } from "../../../src/lazy/creation.ts";
import { set_default_backend } from "../../../src/lazy/device.ts";
import { DistributedSampler } from "../../../src/data/index.ts";
import { report } from "../helpers.ts";

dist.init_process_group();
const rank = dist.get_rank(), world = dist.get_world_size();
const out: Record<string, unknown> = { world };
for (const bk of nativeBackend() ? ["js", "native"] as const : ["js"] as const) {
  set_default_backend(bk);
  const r: Record<string, unknown> = {};
  // x_r = [r+1, 2(r+1), 3(r+1)] (float32)
  const f32 = { dtype: "float32" } as const;
  const x = () => tensor([1, 2, 3], f32).mul(rank + 1);
  r.sum = dist.all_reduce(x()).tolist();
  r.avg = dist.all_reduce(x(), dist.ReduceOp.AVG).tolist();
  r.max = dist.all_reduce(x(), dist.ReduceOp.MAX).tolist();
  r.int_sum = dist.all_reduce(tensor([rank, 10], { dtype: "int64" })).tolist();
  r.bcast = dist.broadcast(x(), 1 % world).tolist();
  const list = Array.from({ length: world }, () => tensor([0, 0], f32));
  r.gather = dist.all_gather(list, tensor([rank, -rank], f32)).map((t) => t.tolist());
  const out2 = tensor([0, 0], f32);
  r.rs = dist.reduce_scatter(out2, Array.from({ length: world }, (_, k) => tensor([k, 10 * k], f32).add(rank)), dist.ReduceOp.SUM).tolist();
  const big = arange(0, 2 * world).to("float32").reshape([2 * world]);
  r.rs_tensor = dist.reduce_scatter_tensor(tensor([0, 0], f32), big).tolist();
  const agt = tensor([0, 0, 0, 0].slice(0, 2 * world), f32);
  r.ag_tensor = dist.all_gather_into_tensor(agt, tensor([rank, rank + 0.5], f32)).tolist();
  dist.barrier();
  // lazy: y = all_reduce(2x, avg) + 1 is one plan whose instructions include the collective
  const lx = x().lazy();
  const y = dist.functional.all_reduce(lx.mul(2), dist.ReduceOp.AVG).add(1);
  r.lazy_instructions = compile_plan([y]).instructions.map((i: { op: { name: string } }) => i.op.name);
  r.lazy = y.tolist();
  // in-place on a LazyTensor
  const lz = x().lazy().add(0);
  dist.all_reduce(lz);
  r.lazy_inplace = lz.tolist();
  // gradient of the functional all_reduce: d/dx_r sum_r' (sum_k c_k * allreduce(x)_k) = sum over ranks of c = world * c
  const xg = x().requires_grad_(true);
  dist.functional.all_reduce(xg).mul(tensor([1, 2, 3], f32)).sum().backward();
  r.grad = xg.grad!.tolist();
  // all_gather's gradient is reduce_scatter: d/dx_r sum_{r'} sum(all_gather(x) * w_{r'}) with w_{r'} = r'+1 everywhere
  const xa = tensor([1, 2], f32).requires_grad_(true);
  dist.functional.all_gather(xa).mul(rank + 1).sum().backward();
  r.gather_grad = xa.grad!.tolist();
  // shape mismatch: rank r passes r+2 elements
  try {
    dist.all_reduce(tensor(Array.from({ length: rank + 2 }, () => 1), f32));
    r.mismatch = "no error";
  } catch (e) {
    r.mismatch = { name: (e as Error).name, message: (e as Error).message };
  }
  try {
    dist.all_reduce(tensor([1], { dtype: "int32" }), dist.ReduceOp.AVG);
  } catch (e) {
    r.avg_int = { name: (e as Error).name, message: (e as Error).message };
  }
  out[bk] = r;
}
// DistributedSampler takes num_replicas and rank from mpirun's environment
const sampler = new DistributedSampler(7, { seed: 3 });
out.sampler = { num_replicas: sampler.num_replicas, rank: sampler.rank, indices: [...sampler] };
report(rank, out);
