/** Data loading (torch.utils.data): datasets, samplers, collation, the DataLoader, token files. */
export {
  Dataset, IterableDataset, TensorDataset, Subset, ConcatDataset, random_split, randperm,
  SequentialSampler, RandomSampler, default_collate, isStateful, type Sampler, type StateDict, type StateValue, type Stateful,
} from "./dataset.ts";
export { DataLoader, type DataLoaderOptions } from "./dataloader.ts";
export { TokenFileDataset, type TokenFileOptions } from "./token_file.ts";
export { DistributedSampler, type DistributedSamplerOptions } from "./distributed_sampler.ts";
