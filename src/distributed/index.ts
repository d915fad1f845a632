/**
 * loom.distributed (torch.distributed's names): the process group on Open MPI or NCCL, collectives
 * on eager and lazy tensors, DistributedDataParallel, Megatron-style tensor-parallel linears.
 */
export {
  init_process_group, is_initialized, is_mpi_available, get_rank, get_world_size, get_backend, destroy_process_group,
  ReduceOp, type ReduceOpName, type DistBackend, type InitOptions, type ProcessGroup,
} from "./process_group.ts";
export {
  all_reduce, broadcast, all_gather, all_gather_into_tensor, reduce_scatter, reduce_scatter_tensor, barrier, functional,
} from "./collectives.ts";
export { LoomDistributedError, LoomRankFailedError, LoomCollectiveTimeoutError } from "./errors.ts";
export { launch, mpirun_command, has_mpirun } from "./launch.ts";
export { loadNccl, NcclComm, NcclWorld, nccl_smoke } from "./nccl.ts";
export { collectiveTransport } from "./nccl_tensor.ts";
export { DistributedDataParallel, type DDPOptions, type DDPStepStats } from "./ddp.ts";
export { ColumnParallelLinear, RowParallelLinear, type ParallelLinearOptions } from "./tensor_parallel.ts";
