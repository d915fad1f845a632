/**
 * Hugging Face checkpoint directories <-> a Module's state dict: `model.safetensors` or a
 * sharded `model.safetensors.index.json` + shards, with transformers' loading rules:
 * - keys saved from the bare body (`h.0.attn.c_attn.weight`, as OpenAI's `gpt2` checkpoint) get
 *   the model's `base_model_prefix` (`transformer.`) added;
 * - keys the model declares ignorable (GPT-2's non-persistent `attn.bias` / `attn.masked_bias`
 *   causal-mask buffers) are skipped;
 * - tied weights (`lm_head.weight`) may be absent from the file, and are not written on save.
 * Shards are read one at a time (loom.io ShardedCheckpoint), so peak memory is one shard.
 * With `assign` (what from_pretrained uses) the parameters become the loaded tensors themselves:
 * views on the file's private mapping (MAP_PRIVATE, copy-on-write: training them never writes
 * the file) wherever the dtype matches and the data is aligned, so nothing is copied and pages are
 * read from disk when first used. Saving over the same directory is safe (save_file writes a new
 * file and renames it; the mapping keeps the old one); truncating the file in place while a model
 * maps it is not (reads past the new end fault, as with any mmap). The Hugging Face cache layout loads: a
 * `models--org--name/snapshots/<rev>/` directory whose files link into `../../blobs/`, or the
 * `models--org--name` folder itself (its `refs/main` names the snapshot).
 * Source: transformers modeling_utils.PreTrainedModel.from_pretrained / save_pretrained (torch_dtype,
 * "auto"); torch.nn.Module.load_state_dict(assign=True).
 */
import {
  SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, type ShardedCheckpoint, open_sharded, readCheckpointFile, resolve_pretrained_dir, save_sharded,
  type TensorLike,
} from "../io/index.ts";
import { lstatSync } from "node:fs";
import { join } from "node:path";
import { no_grad } from "../autograd/grad_mode.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { tensor_from_io, tensor_to_io } from "../lora/tensor_io.ts";
import type { IncompatibleKeys, Module } from "../nn/module.ts";
import { Parameter } from "../nn/parameter.ts";
import { type DType, isFloating } from "../tensor/dtype.ts";
import { LoomValueError, fmtShape } from "../tensor/errors.ts";

export interface LoadCheckpointOptions {
  /** The attribute holding the body (GPT-2: "transformer"), added to keys saved without it. */
  base_model_prefix?: string;
  /** Checkpoint keys to skip without complaint (matched with RegExp.test). */
  ignore_unexpected?: readonly RegExp[];
  /** Model keys that may be absent from the checkpoint (tied weights). */
  allow_missing?: readonly string[];
  /** Throw on missing or unexpected keys (default true); false returns them instead. */
  strict?: boolean;
  /**
   * Replace each parameter by the loaded tensor (converted to the parameter's dtype when they
   * differ) instead of copying into it, as torch's load_state_dict(assign=True). Tied parameters
   * stay tied (every module attribute holding the old Parameter gets the new one). Default false:
   * an optimizer holding the old Parameters would no longer see the model's, so use it on a model
   * just built (from_pretrained). Buffers are always copied.
   */
  assign?: boolean;
  /**
   * Keep parameters on the file's private mapping (default true; used with `assign`). false
   * copies the data into fresh arrays and lets the mapping go.
   */
  mmap?: boolean;
  /**
   * Called with the missing keys (when there are any and strict is false) before any weight is
   * loaded, e.g. to initialize a model built under nn.init_empty_weights (HF initializes the
   * weights a checkpoint lacks).
   */
  on_missing?: (missing_keys: string[]) => void;
  /** For a `models--*` cache folder: the branch, tag or commit to load (default "main"). */
  revision?: string;
}

/** The options every `from_pretrained` takes (HF names). */
export interface FromPretrainedOptions {
  /** Floating dtype of the model: HF's name (also "torch.float16", "half"...) or "auto" (default: the checkpoint's). */
  torch_dtype?: TorchDtype;
  /** Loom's spelling of torch_dtype; both may be given when they agree. */
  dtype?: TorchDtype;
  /** Throw on missing or unexpected keys (default true). */
  strict?: boolean;
  /** For a `models--*` cache folder: the branch, tag or commit to load (default "main"). */
  revision?: string;
  /** Keep weights on the file's private mapping where the dtype matches (default true); false copies them. */
  mmap?: boolean;
}

/**
 * Load `dir`'s safetensors checkpoint (single or sharded) into `model` in place.
 * @param dir - a checkpoint directory, a Hugging Face cache snapshot, or a `models--org--name`
 *   cache folder (its refs/main snapshot; see loom.io resolve_pretrained_dir)
 * @returns the missing and unexpected keys that were tolerated (strict = false) or allowed
 * @throws LoomValueError naming missing/unexpected keys (strict), a shape mismatch (the key, both
 *   shapes and the file), or a directory without model.safetensors / model.safetensors.index.json;
 *   LoomFormatError for a malformed file, a file that is not a regular file (a directory, a FIFO),
 *   or a symlink that resolves outside `dir` (a Hugging Face cache snapshot may link into its
 *   models--* folder's blobs/) or to nothing (see loom.io ShardedCheckpoint)
 */
export function load_checkpoint(model: Module, dir: string, opts: LoadCheckpointOptions = {}): IncompatibleKeys {
  dir = resolve_pretrained_dir(dir, opts.revision);
  const ckpt = openCheckpoint(dir);
  const own = model.state_dict({ keep_vars: true });
  const ownKeys = Object.keys(own);
  const prefix = opts.base_model_prefix ? `${opts.base_model_prefix}.` : "";
  // transformers: if the model has the prefix but no checkpoint key does, the file holds the bare body
  const addPrefix = prefix !== "" && ownKeys.some((k) => k.startsWith(prefix)) && !ckpt.keys().some((k) => k.startsWith(prefix));
  const rename = (k: string) => (addPrefix ? prefix + k : k);
  const ignored = (k: string) => (opts.ignore_unexpected ?? []).some((re) => re.test(k));
  const isOwn = (k: string) => Object.hasOwn(own, k);
  // hasOwn, not own[k]: a file's "constructor" or "__proto__" key must not find Object's
  const ownAt = (k: string) => (isOwn(k) ? own[k] : undefined);

  const present = new Set(ckpt.keys().map(rename));
  const allow = new Set(opts.allow_missing ?? []);
  const missing_keys = ownKeys.filter((k) => !present.has(k) && !allow.has(k));
  const unexpected_keys = ckpt.keys().map(rename).filter((k) => !isOwn(k) && !ignored(k));
  if ((opts.strict ?? true) && (missing_keys.length || unexpected_keys.length)) {
    const parts = [];
    if (missing_keys.length) parts.push(`missing keys: ${missing_keys.join(", ")}`);
    if (unexpected_keys.length) parts.push(`unexpected keys: ${unexpected_keys.join(", ")}`);
    throw new LoomValueError(`[from_pretrained] ${dir} does not match ${model._get_name()}: ${parts.join("; ")}`);
  }
  // every shape is checked against the headers before anything is loaded, so a mismatch leaves the model untouched
  for (const k of ckpt.keys()) {
    const dst = ownAt(rename(k));
    if (dst === undefined) continue;
    const shape = ckpt.info(k).shape;
    if (shape.length !== dst.shape.length || shape.some((d, i) => d !== dst.shape[i])) {
      throw new LoomValueError(`[from_pretrained] size mismatch for ${rename(k)}: ${fmtShape(shape)} in ${shardPath(ckpt, k)}, ${fmtShape(dst.shape)} in ${model._get_name()}`);
    }
  }
  if (missing_keys.length && opts.on_missing) opts.on_missing(missing_keys);
  const assign = opts.assign ?? false;
  const holders = assign ? parameterHolders(model) : null;
  for (const [, tensors] of ckpt.shards({ copy: opts.mmap === false })) {
    const sd = new Map<string, Tensor>();
    for (const [k, t] of tensors) {
      const key = rename(k);
      const dst = ownAt(key);
      if (dst === undefined) continue;
      const src = tensor_from_io(t);
      if (holders && dst instanceof Parameter) assignParameter(holders, dst, src);
      else sd.set(key, src);
    }
    if (sd.size) model.load_state_dict(sd, false); // copies (converting dtype)
  }
  ckpt.close();
  return { missing_keys, unexpected_keys };
}

function openCheckpoint(dir: string): ShardedCheckpoint {
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
  return open_sharded(dir);
}

function shardPath(ckpt: ShardedCheckpoint, key: string): string {
  return join(ckpt.directory, ckpt.weight_map.get(key)!);
}

type Holders = Map<Parameter, [Module, string][]>;

// Every (module, attribute) holding each Parameter, tied ones included, so assignment keeps ties.
function parameterHolders(model: Module): Holders {
  const out: Holders = new Map();
  for (const [, m] of model.named_modules("", false)) {
    for (const [name, p] of m.named_parameters("", false, false)) {
      const list = out.get(p);
      if (list) list.push([m, name]);
      else out.set(p, [[m, name]]);
    }
  }
  return out;
}

// Makes `src` (converted to dst's dtype when it differs) the parameter wherever `dst` is held.
function assignParameter(holders: Holders, dst: Parameter, src: Tensor): void {
  const data = src.dtype === dst.dtype ? src : no_grad(() => src.to(dst.dtype));
  const p = new Parameter(data, dst.requires_grad);
  const list = holders.get(dst) ?? [];
  for (const [m, name] of list) m.register_parameter(name, p);
  holders.set(p, list); // a later key naming the same (tied) parameter finds the holders under the old object still
}

/** A floating dtype by Loom or torch name: "float16", "torch.float16", "half", "bfloat16", "float", "double"... */
export type TorchDtype = DType | "auto" | (string & {});

const TORCH_ALIASES: Readonly<Record<string, DType>> = { half: "float16", float: "float32", double: "float64" };

function parseDtype(what: string, v: string): DType | "auto" {
  const name = v.startsWith("torch.") ? v.slice("torch.".length) : v;
  if (name === "auto") return "auto";
  const d = (Object.hasOwn(TORCH_ALIASES, name) ? TORCH_ALIASES[name] : name) as DType;
  if (!["float16", "bfloat16", "float32", "float64"].includes(d)) {
    throw new LoomValueError(`[from_pretrained] ${what} ${JSON.stringify(v)}: expected "auto" or a floating dtype (float16, bfloat16, float32, float64)`);
  }
  return d;
}

/**
 * The dtype a model loaded from `dir` gets: `torch_dtype` (HF's name) or `dtype` (Loom's); they
 * must agree when both are given. Unset or "auto": the dtype of the checkpoint's first floating
 * weight (float32 when it has none), so a float16/bfloat16 checkpoint loads in its own dtype and
 * its weights stay on the file mapping. transformers defaults to float32 and uses the same rule
 * only for torch_dtype="auto"; Loom makes "auto" the default, which never converts.
 * @throws LoomValueError for a non-floating or unknown dtype, or dtype and torch_dtype disagreeing;
 *   errors of load_checkpoint for an unreadable checkpoint (auto reads the index and one header)
 */
export function resolve_torch_dtype(dir: string, opts: { dtype?: TorchDtype; torch_dtype?: TorchDtype } = {}): DType {
  const a = opts.dtype === undefined ? undefined : parseDtype("dtype", opts.dtype);
  const b = opts.torch_dtype === undefined ? undefined : parseDtype("torch_dtype", opts.torch_dtype);
  if (a !== undefined && b !== undefined && a !== b) {
    throw new LoomValueError(`[from_pretrained] dtype ${JSON.stringify(opts.dtype)} and torch_dtype ${JSON.stringify(opts.torch_dtype)} disagree: pass one`);
  }
  const want = b ?? a ?? "auto";
  return want === "auto" ? checkpoint_dtype(dir) : want;
}

/**
 * The dtype of the first floating tensor of `dir`'s checkpoint, in index order (transformers'
 * "auto" rule without config.json), read from headers only; float32 when there is none.
 */
export function checkpoint_dtype(dir: string): DType {
  const ckpt = openCheckpoint(resolve_pretrained_dir(dir));
  try {
    for (const k of ckpt.keys()) {
      const d = ckpt.info(k).dtype;
      if (isFloating(d)) return d;
    }
    return "float32";
  } finally {
    ckpt.close();
  }
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

/**
 * `dir/config.json` as an object, and its path.
 * @throws LoomValueError for a missing file, invalid JSON or a non-object; LoomFormatError for a
 *   non-regular file or an escaping symlink (Hugging Face cache links into blobs/ are fine)
 */
export function read_config_json(dir: string, tag: string): [Record<string, unknown>, string] {
  const path = join(dir, "config.json");
  const bytes = readCheckpointFile(dir, "config.json", tag);
  if (bytes === null) throw new LoomValueError(`${tag} no config.json in ${dir}`);
  let d: unknown;
  try {
    d = JSON.parse(new TextDecoder().decode(bytes));
  } catch (e) {
    throw new LoomValueError(`${tag} ${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (typeof d !== "object" || d === null || Array.isArray(d)) throw new LoomValueError(`${tag} ${path} must hold a JSON object`);
  return [d as Record<string, unknown>, path];
}
