/**
 * Hugging Face checkpoint directories <-> a Module's state dict: `model.safetensors` or a
 * sharded `model.safetensors.index.json` + shards, with transformers' loading rules:
 * - keys saved from the bare body (`h.0.attn.c_attn.weight`, as OpenAI's `gpt2` checkpoint) get
 *   the model's `base_model_prefix` (`transformer.`) added;
 * - keys the model declares ignorable (GPT-2's non-persistent `attn.bias` / `attn.masked_bias`
 *   causal-mask buffers) are skipped;
 * - tied weights (`lm_head.weight`) may be absent from the file, and are not written on save.
 * Shards are read one at a time (loom.io ShardedCheckpoint), so peak memory is one shard.
 * The Hugging Face cache layout loads as it is: a `models--org--name/snapshots/<rev>/` directory
 * whose files link into `../../blobs/`.
 * Source: transformers modeling_utils.PreTrainedModel.from_pretrained / save_pretrained.
 */
import { SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, open_sharded, save_sharded, type TensorLike } from "../io/index.ts";
import { lstatSync } from "node:fs";
import { join } from "node:path";
import type { Tensor } from "../lazy/tensor.ts";
import { tensor_from_io, tensor_to_io } from "../lora/tensor_io.ts";
import type { IncompatibleKeys, Module } from "../nn/module.ts";
import { LoomValueError } from "../tensor/errors.ts";

export interface LoadCheckpointOptions {
  /** The attribute holding the body (GPT-2: "transformer"), added to keys saved without it. */
  base_model_prefix?: string;
  /** Checkpoint keys to skip without complaint (matched with RegExp.test). */
  ignore_unexpected?: readonly RegExp[];
  /** Model keys that may be absent from the checkpoint (tied weights). */
  allow_missing?: readonly string[];
  /** Throw on missing or unexpected keys (default true); false returns them instead. */
  strict?: boolean;
}

/**
 * Load `dir`'s safetensors checkpoint (single or sharded) into `model` in place.
 * @returns the missing and unexpected keys that were tolerated (strict = false) or allowed
 * @throws LoomValueError naming missing/unexpected keys (strict), shape mismatches, or a
 *   directory without model.safetensors / model.safetensors.index.json; LoomFormatError for a
 *   malformed file, a file that is not a regular file (a directory, a FIFO), or a symlink that
 *   resolves outside `dir` (a Hugging Face cache snapshot may link into its models--* folder)
 *   or to nothing (see loom.io ShardedCheckpoint)
 */
export function load_checkpoint(model: Module, dir: string, opts: LoadCheckpointOptions = {}): IncompatibleKeys {
  // lstat, not existsSync: a dangling link (an unfinished Hugging Face cache download) is named as such by open_sharded
  const exists = (name: string) => {
    try {
      lstatSync(join(dir, name));
      return true;
    } catch {
      return false;
    }
  };
  if (!exists(SAFE_WEIGHTS_NAME) && !exists(SAFE_WEIGHTS_INDEX_NAME)) {
    throw new LoomValueError(`[from_pretrained] ${dir} holds neither ${SAFE_WEIGHTS_NAME} nor ${SAFE_WEIGHTS_INDEX_NAME}`);
  }
  const ckpt = open_sharded(dir);
  const own = new Set(Object.keys(model.state_dict()));
  const prefix = opts.base_model_prefix ? `${opts.base_model_prefix}.` : "";
  // transformers: if the model has the prefix but no checkpoint key does, the file holds the bare body
  const addPrefix = prefix !== "" && [...own].some((k) => k.startsWith(prefix)) && !ckpt.keys().some((k) => k.startsWith(prefix));
  const rename = (k: string) => (addPrefix ? prefix + k : k);
  const ignored = (k: string) => (opts.ignore_unexpected ?? []).some((re) => re.test(k));

  const present = new Set(ckpt.keys().map(rename));
  const allow = new Set(opts.allow_missing ?? []);
  const missing_keys = [...own].filter((k) => !present.has(k) && !allow.has(k));
  const unexpected_keys = ckpt.keys().map(rename).filter((k) => !own.has(k) && !ignored(k));
  if ((opts.strict ?? true) && (missing_keys.length || unexpected_keys.length)) {
    const parts = [];
    if (missing_keys.length) parts.push(`missing keys: ${missing_keys.join(", ")}`);
    if (unexpected_keys.length) parts.push(`unexpected keys: ${unexpected_keys.join(", ")}`);
    throw new LoomValueError(`[from_pretrained] ${dir} does not match ${model._get_name()}: ${parts.join("; ")}`);
  }
  for (const [, tensors] of ckpt.shards()) {
    const sd = new Map<string, Tensor>();
    for (const [k, t] of tensors) if (own.has(rename(k))) sd.set(rename(k), tensor_from_io(t));
    model.load_state_dict(sd, false); // copies (converting dtype); shape mismatches throw
  }
  ckpt.close();
  return { missing_keys, unexpected_keys };
}

export interface SaveCheckpointOptions {
  /** State-dict keys not to write (tied weights). */
  skip?: readonly string[];
  /** Largest shard in bytes or "200MB"-style text (default 5 GB, as transformers). */
  max_shard_size?: number | string;
}

/**
 * Write `model`'s state dict (parameters and persistent buffers) to `dir` as `model.safetensors`,
 * or shards plus `model.safetensors.index.json` when larger than max_shard_size; every file's
 * metadata is {"format": "pt"}.
 * @returns the keys written
 */
export function save_checkpoint(model: Module, dir: string, opts: SaveCheckpointOptions = {}): string[] {
  const skip = new Set(opts.skip ?? []);
  const tensors = new Map<string, TensorLike>();
  for (const [k, t] of Object.entries(model.state_dict())) if (!skip.has(k)) tensors.set(k, tensor_to_io(t));
  save_sharded(tensors, dir, { max_shard_size: opts.max_shard_size });
  return [...tensors.keys()];
}
