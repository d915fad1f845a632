/**
 * loom.io: safetensors files and Hugging Face-style sharded checkpoints <-> typed arrays.
 * Tensors are plain {dtype, shape, data} records using Loom's storage arrays
 * (src/tensor/dtype.ts); wrapping them in Tensor objects is the caller's (a higher rank's) job.
 */
export {
  type LoadOptions, type Safetensors, SafetensorsFile, type TensorData, type TensorDict, type TensorLike,
  load, load_file, read_header, read_header_file, safe_open, save, save_file,
} from "./safetensors.ts";
export {
  DTYPE_TO_SAFETENSORS, MAX_HEADER_SIZE, SAFETENSORS_TO_DTYPE, type SafetensorsDtype,
  type SafetensorsHeader, type TensorInfo,
} from "./safetensors_header.ts";
export {
  FILENAME_PATTERN, MAX_SHARD_SIZE, SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, type SaveShardedOptions,
  ShardedCheckpoint, type SplitOptions, type StateDictSplit, load_sharded, open_sharded, parse_size_to_int,
  save_sharded, split_state_dict_into_shards,
} from "./sharded.ts";
export {
  type FileError, checkpointRoot, fileKind, openRegularFile, readCheckpointFile, readRegularFile, resolveCheckpointFile,
  resolve_pretrained_dir,
} from "./files.ts";
export { type DuplicateKey, findDuplicateKey, formatJsonPath } from "./json.ts";
