/**
 * Sharded safetensors checkpoints, in the Hugging Face layout:
 *   model.safetensors.index.json = {"metadata": {"total_size": <bytes>, ...}, "weight_map": {<tensor>: <shard file>}}
 *   model-00001-of-00003.safetensors, model-00002-of-00003.safetensors, ...
 * A checkpoint small enough for one shard is a single `model.safetensors` with no index.
 *
 * Reading is lazy: `ShardedCheckpoint` holds the index, opens a shard only when a tensor in it is
 * asked for (keeping at most one open), and `shards()` visits shards one at a time so a model
 * can be loaded without holding every shard at once. The index is untrusted: shard names must
 * stay inside the checkpoint directory, and every tensor must be in the shard the index names.
 * Every file read (index, single file, shards) must be a regular file that, symlinks followed,
 * lies inside the directory, or inside the `models--*` folder of a Hugging Face cache snapshot
 * (whose files link to ../../blobs/); see files.ts.
 *
 * Source: huggingface_hub/serialization/_base.py (split_state_dict_into_shards_factory: greedy
 * split in key order, a tensor larger than max_shard_size gets its own shard, shard names
 * "model{suffix}.safetensors" with suffix "-00001-of-00003"); transformers save_pretrained writes
 * the index with sorted keys and indent 2.
 */
import { existsSync, mkdirSync, readdirSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { LoomFormatError, LoomValueError } from "../tensor/errors.ts";
import {
  type LoadOptions, type SafetensorsFile, type TensorData, type TensorDict, type TensorLike,
  entriesOf, read_header_file, safe_open, save_file,
} from "./safetensors.ts";
import { DTYPE_TO_SAFETENSORS, FILE_ITEMSIZE, type SafetensorsHeader, type TensorInfo, compareNames, formatError } from "./safetensors_header.ts";
import { checkpointRoot, readRegularFile, resolveCheckpointFile } from "./files.ts";

/** File name of a single-file checkpoint. */
export const SAFE_WEIGHTS_NAME = "model.safetensors";
/** File name of the index of a sharded checkpoint. */
export const SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json";
/** Default max_shard_size in bytes (huggingface_hub MAX_SHARD_SIZE, "5GB"). */
export const MAX_SHARD_SIZE = 5_000_000_000;
/** Default shard file name pattern; `{suffix}` becomes "" or "-00001-of-00003". */
export const FILENAME_PATTERN = "model{suffix}.safetensors";
/** Largest index file read, in bytes (the header limit of the format). */
export const MAX_INDEX_SIZE = 100_000_000;

const UNITS: Readonly<Record<string, number>> = {
  B: 1, KB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, KIB: 2 ** 10, MIB: 2 ** 20, GIB: 2 ** 30, TIB: 2 ** 40,
};

/**
 * A shard size in bytes: an integer, or a string such as "5GB" (10^9), "200MB", "2GiB" (2^30).
 * Units are case-insensitive; no unit means bytes.
 * @throws LoomValueError for anything else, or a size below 1 byte
 */
export function parse_size_to_int(size: number | string): number {
  let bytes: number;
  if (typeof size === "number") {
    bytes = size;
  } else {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(size);
    const unit = m ? (m[2] || "B").toUpperCase() : "";
    if (!m || !Object.hasOwn(UNITS, unit)) {
      throw new LoomValueError(`[save_sharded] max_shard_size ${JSON.stringify(size)}: expected bytes or a size like "5GB", "200MB", "2GiB"`);
    }
    bytes = Math.floor(Number(m[1]) * UNITS[unit]!);
  }
  if (!Number.isSafeInteger(bytes) || bytes < 1) throw new LoomValueError(`[save_sharded] max_shard_size ${JSON.stringify(size)}: expected a positive whole number of bytes`);
  return bytes;
}

/** How tensors are split across shard files (huggingface_hub StateDictSplit). */
export interface StateDictSplit {
  /** More than one shard, so an index is written. */
  is_sharded: boolean;
  /** `total_size`: the summed tensor data size in bytes (headers excluded). */
  metadata: { total_size: number };
  /** Shard file name -> tensor names, in shard order. */
  filename_to_tensors: Map<string, string[]>;
  tensor_to_filename: Map<string, string>;
}

export interface SplitOptions {
  /** Bytes per shard, or "5GB"-style; default 5,000,000,000. A bigger tensor gets its own shard. */
  max_shard_size?: number | string;
  /** Must contain "{suffix}"; default "model{suffix}.safetensors". */
  filename_pattern?: string;
}

function nbytesOf(name: string, t: TensorLike): number {
  if (!Object.hasOwn(DTYPE_TO_SAFETENSORS, t?.dtype)) throw new LoomValueError(`[save_sharded] tensor ${JSON.stringify(name)}: unknown dtype ${JSON.stringify(t?.dtype)}`);
  let n = FILE_ITEMSIZE[DTYPE_TO_SAFETENSORS[t.dtype]];
  for (const d of t.shape) n *= d;
  return n;
}

/**
 * Splits tensors into shards of at most `max_shard_size` bytes of data, greedily in key order
 * (no bin packing: [6, 6, 2, 6, 2, 2] GB at 10 GB gives [6], [6+2], [6+2+2]).
 * @throws LoomValueError for a bad max_shard_size or filename_pattern, or an unknown dtype
 */
export function split_state_dict_into_shards(tensors: TensorDict, options: SplitOptions = {}): StateDictSplit {
  const max = parse_size_to_int(options.max_shard_size ?? MAX_SHARD_SIZE);
  const pattern = options.filename_pattern ?? FILENAME_PATTERN;
  if (!pattern.includes("{suffix}")) throw new LoomValueError(`[save_sharded] filename_pattern ${JSON.stringify(pattern)} must contain "{suffix}"`);
  const shards: string[][] = [];
  let current: string[] = [];
  let current_size = 0;
  let total_size = 0;
  for (const [name, t] of entriesOf(tensors)) {
    const size = nbytesOf(name, t);
    total_size += size;
    if (size > max) {
      shards.push([name]);
      continue;
    }
    if (current_size + size > max) {
      shards.push(current);
      current = [];
      current_size = 0;
    }
    current.push(name);
    current_size += size;
  }
  if (current.length > 0 || shards.length === 0) shards.push(current);

  const n = shards.length;
  const pad = (i: number) => String(i).padStart(5, "0");
  const filename_to_tensors = new Map<string, string[]>();
  const tensor_to_filename = new Map<string, string>();
  shards.forEach((names, i) => {
    const file = pattern.replace("{suffix}", n === 1 ? "" : `-${pad(i + 1)}-of-${pad(n)}`);
    filename_to_tensors.set(file, names);
    for (const name of names) tensor_to_filename.set(name, file);
  });
  return { is_sharded: n > 1, metadata: { total_size }, filename_to_tensors, tensor_to_filename };
}

export interface SaveShardedOptions extends SplitOptions {
  /** Added to every shard's `__metadata__` (after {"format": "pt"}) and to the index's metadata. */
  metadata?: Readonly<Record<string, string>>;
}

// Indented JSON with sorted keys (json.dumps(indent=2, sort_keys=True)), written by hand because JS objects move integer-like keys first.
function sortedJson(obj: ReadonlyMap<string, unknown>, indent: string): string {
  const keys = [...obj.keys()].sort(compareNames);
  if (keys.length === 0) return "{}";
  const inner = indent + "  ";
  const lines = keys.map((k) => {
    const v = obj.get(k);
    const text = v instanceof Map ? sortedJson(v, inner) : JSON.stringify(v);
    return `${inner}${JSON.stringify(k)}: ${text}`;
  });
  return `{\n${lines.join(",\n")}\n${indent}}`;
}

/**
 * Saves tensors as a checkpoint in `save_directory`: one `model.safetensors` if it fits in one
 * shard, else shards plus `model.safetensors.index.json`. Shards carry {"format": "pt"} metadata,
 * which transformers requires to load them. Stale shards and index from an earlier save with the
 * same pattern are removed, so the directory never mixes two checkpoints.
 * @returns the split that was written
 * @throws LoomValueError as `save` and `split_state_dict_into_shards`; fs errors as thrown by node:fs
 */
export function save_sharded(tensors: TensorDict, save_directory: string, options: SaveShardedOptions = {}): StateDictSplit {
  const split = split_state_dict_into_shards(tensors, options);
  const all = new Map(entriesOf(tensors));
  const shard_metadata = { format: "pt", ...options.metadata };
  mkdirSync(save_directory, { recursive: true });
  for (const [file, names] of split.filename_to_tensors) {
    save_file(new Map(names.map((n) => [n, all.get(n)!])), join(save_directory, file), shard_metadata);
  }
  removeStale(save_directory, options.filename_pattern ?? FILENAME_PATTERN, split);
  if (split.is_sharded) {
    const metadata = new Map<string, unknown>([["total_size", split.metadata.total_size], ...Object.entries(options.metadata ?? {})]);
    const index = new Map<string, unknown>([["metadata", metadata], ["weight_map", split.tensor_to_filename]]);
    writeFileSync(join(save_directory, indexNameFor(options.filename_pattern ?? FILENAME_PATTERN)), sortedJson(index, "") + "\n");
  }
  return split;
}

// "model{suffix}.safetensors" -> "model.safetensors.index.json" (transformers' naming).
function indexNameFor(pattern: string): string {
  return `${pattern.replace("{suffix}", "")}.index.json`;
}

function removeStale(dir: string, pattern: string, split: StateDictSplit): void {
  const escaped = pattern.split("{suffix}").map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const shard_re = new RegExp(`^${escaped.join("(-\\d{5}-of-\\d{5})?")}$`);
  for (const f of readdirSync(dir)) {
    if (shard_re.test(f) && !split.filename_to_tensors.has(f)) unlinkSync(join(dir, f));
  }
  const index = join(dir, indexNameFor(pattern));
  if (!split.is_sharded && existsSync(index)) unlinkSync(index);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Rejects shard names that could leave the checkpoint directory: absolute paths, drive letters,
 * backslashes, NUL, and "..", "." or empty path segments.
 */
function checkShardName(shard: string, tensor: string, source: string): void {
  const bad = shard === "" || shard.includes("\0") || shard.includes("\\") || isAbsolute(shard) || /^[A-Za-z]:/.test(shard)
    || shard.split("/").some((seg) => seg === "" || seg === "." || seg === "..");
  if (bad) {
    throw formatError(source, `weight_map[${JSON.stringify(tensor)}]`, `shard file name ${JSON.stringify(shard)} escapes the checkpoint directory: it must be a relative path without "..", "." or empty segments`);
  }
}

function readIndex(path: string): { metadata: Record<string, unknown>; weight_map: Map<string, string> } {
  const bytes = readRegularFile(path, (reason) => formatError(path, "index", reason), MAX_INDEX_SIZE);
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    throw formatError(path, "index", `is not valid UTF-8 JSON (${(e as Error).message})`);
  }
  if (!isObject(json)) throw formatError(path, "index", "must be a JSON object with \"weight_map\"");
  const meta = json.metadata ?? {};
  if (!isObject(meta)) throw formatError(path, "index", "\"metadata\" must be an object");
  const wm = json.weight_map;
  if (!isObject(wm)) throw formatError(path, "index", "\"weight_map\" must be an object of tensor name -> shard file");
  const weight_map = new Map<string, string>();
  for (const [tensor, shard] of Object.entries(wm)) {
    if (typeof shard !== "string") throw formatError(path, `weight_map[${JSON.stringify(tensor)}]`, `shard is ${shard === null ? "null" : typeof shard}, expected a file name`);
    checkShardName(shard, tensor, path);
    weight_map.set(tensor, shard);
  }
  return { metadata: { ...meta }, weight_map };
}

/**
 * A checkpoint opened for lazy reading, sharded (index + shards) or a single file.
 * Errors name the index (or single file), the shard and the tensor.
 */
export class ShardedCheckpoint {
  /** Directory the shard names are relative to. */
  readonly directory: string;
  /** The index file, or the single safetensors file when there is no index. */
  readonly source: string;
  /** Index "metadata" (e.g. total_size), or the single file's `__metadata__`. */
  readonly metadata: Readonly<Record<string, unknown>>;
  /** Tensor name -> shard file name (relative to `directory`). */
  readonly weight_map: ReadonlyMap<string, string>;
  private readonly by_shard = new Map<string, string[]>();
  // Where files may resolve to: realpath(directory), or its Hugging Face cache models--* folder.
  private readonly root: string;
  private open_shard: { shard: string; file: SafetensorsFile } | null = null;
  private readonly headers = new Map<string, SafetensorsHeader>();

  private constructor(directory: string, source: string, metadata: Record<string, unknown>, weight_map: Map<string, string>) {
    this.directory = directory;
    this.source = source;
    this.metadata = metadata;
    this.weight_map = weight_map;
    this.root = checkpointRoot(directory);
    for (const [tensor, shard] of weight_map) {
      const list = this.by_shard.get(shard);
      if (list) list.push(tensor);
      else this.by_shard.set(shard, [tensor]);
    }
  }

  /**
   * Opens a checkpoint from a directory (its `model.safetensors.index.json`, else its
   * `model.safetensors`), an index file, or a single .safetensors file. Reads the index only
   * (or, for a single file, its header).
   * @throws LoomFormatError for a malformed index, a shard name escaping the directory, a
   *   directory holding neither file, an index or single file that is not a regular file (a
   *   directory, a FIFO...), or one that is a symlink resolving outside the directory (or outside
   *   the models--* folder of a Hugging Face cache snapshot)
   */
  static open(path: string): ShardedCheckpoint {
    const isDir = statSync(path).isDirectory();
    const directory = resolve(isDir ? path : dirname(path));
    // null when absent; throws for a dangling link or one resolving out of the directory
    const member = (name: string, file: string) => resolveCheckpointFile(directory, name, (reason) => formatError(file, "file", reason));
    let file = path;
    if (isDir) {
      const found = [SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME].find((name) => member(name, join(path, name)) !== null);
      if (found === undefined) throw new LoomFormatError(`[safetensors] ${path}: no ${SAFE_WEIGHTS_INDEX_NAME} or ${SAFE_WEIGHTS_NAME} in this directory`);
      file = join(path, found);
    } else {
      member(basename(path), path);
    }
    if (file.endsWith(".json")) {
      const { metadata, weight_map } = readIndex(file);
      return new ShardedCheckpoint(directory, file, metadata, weight_map);
    }
    const header = read_header_file(file);
    const shard = basename(file);
    return new ShardedCheckpoint(directory, file, header.metadata, new Map([...header.tensors.keys()].map((k) => [k, shard])));
  }

  /** Tensor names in index order. */
  keys(): string[] {
    return [...this.weight_map.keys()];
  }

  has(name: string): boolean {
    return this.weight_map.has(name);
  }

  /**
   * dtype, shape and data_offsets of one tensor, from its shard's header (the data is not read;
   * headers are read once per shard).
   * @throws LoomValueError if the index has no such tensor; LoomFormatError as verify()
   */
  info(name: string): TensorInfo {
    const shard = this.weight_map.get(name);
    if (shard === undefined) throw new LoomValueError(`[safetensors] ${this.source}: no tensor named ${JSON.stringify(name)} in the index`);
    let header = this.headers.get(shard);
    if (!header) {
      header = read_header_file(this.resolveShard(shard));
      this.checkPresence(shard, header);
      this.headers.set(shard, header);
    }
    return header.tensors.get(name)!;
  }

  /** Shard file names, in the order their first tensor appears in the index. */
  shard_files(): string[] {
    return [...this.by_shard.keys()];
  }

  /** Names the index maps to `shard`. */
  tensors_in(shard: string): string[] {
    return (this.by_shard.get(shard) ?? []).slice();
  }

  // The shard's path, checked to exist and, symlinks followed, to lie inside the directory (or
  // the Hugging Face cache folder); safe_open / read_header_file then refuse a non-regular file.
  private resolveShard(shard: string): string {
    const first = this.by_shard.get(shard)?.[0] ?? "?";
    const what = `shard ${JSON.stringify(shard)}`;
    const full = resolveCheckpointFile(this.directory, shard, (reason) => formatError(this.source, what, reason), this.root);
    if (full === null) throw formatError(this.source, what, `file not found in ${this.directory} (it should hold tensor ${JSON.stringify(first)})`);
    return full;
  }

  private openShard(shard: string): SafetensorsFile {
    const file = safe_open(this.resolveShard(shard));
    this.checkPresence(shard, file.header);
    return file;
  }

  private checkPresence(shard: string, header: SafetensorsHeader): void {
    for (const name of this.by_shard.get(shard) ?? []) {
      if (!header.tensors.has(name)) {
        throw formatError(this.source, `tensor ${JSON.stringify(name)}`, `the index maps it to shard ${JSON.stringify(shard)}, which does not contain it`);
      }
    }
  }

  /**
   * One tensor, opening its shard if it is not the one currently open (the previous one is
   * released). Views alias the shard's private mapping unless `options.copy`.
   * @throws LoomValueError if the index has no such tensor; LoomFormatError for a missing or
   *   malformed shard, or a shard that lacks a tensor the index maps to it
   */
  get_tensor(name: string, options: LoadOptions = {}): TensorData {
    const shard = this.weight_map.get(name);
    if (shard === undefined) throw new LoomValueError(`[safetensors] ${this.source}: no tensor named ${JSON.stringify(name)} in the index`);
    if (this.open_shard?.shard !== shard) {
      this.close();
      this.open_shard = { shard, file: this.openShard(shard) };
    }
    return this.open_shard!.file.get_tensor(name, options);
  }

  /**
   * Visits shards one at a time: yields each shard's file name and its tensors (those the index
   * maps to it), then drops them before opening the next, so at most one shard is referenced by
   * the iterator at any time.
   * @throws LoomFormatError as get_tensor, when the shard is reached
   */
  *shards(options: LoadOptions = {}): Generator<[string, Map<string, TensorData>]> {
    for (const shard of this.shard_files()) {
      let file: SafetensorsFile | null = this.openShard(shard);
      const tensors = new Map<string, TensorData>();
      for (const name of this.by_shard.get(shard)!) tensors.set(name, file.get_tensor(name, options));
      file.close();
      file = null;
      yield [shard, tensors];
    }
  }

  /** Every (name, tensor), shard by shard (see shards()). */
  *items(options: LoadOptions = {}): Generator<[string, TensorData]> {
    for (const [, tensors] of this.shards(options)) yield* tensors;
  }

  /**
   * Checks every shard's header (never its data): the file exists inside the directory, is a
   * valid safetensors file, and holds every tensor the index maps to it.
   * @throws LoomFormatError naming the first problem
   */
  verify(): void {
    for (const shard of this.shard_files()) this.checkPresence(shard, read_header_file(this.resolveShard(shard)));
  }

  /** Releases the shard opened by get_tensor (views already returned keep their mapping). */
  close(): void {
    this.open_shard?.file.close();
    this.open_shard = null;
  }
}

/** Opens a checkpoint lazily; see ShardedCheckpoint.open. */
export function open_sharded(path: string): ShardedCheckpoint {
  return ShardedCheckpoint.open(path);
}

/**
 * Loads every tensor of a checkpoint (sharded or single file), shard by shard.
 * @returns name -> tensor, in index order
 * @throws LoomFormatError as ShardedCheckpoint
 */
export function load_sharded(path: string, options: LoadOptions = {}): Map<string, TensorData> {
  const ckpt = ShardedCheckpoint.open(path);
  const out = new Map<string, TensorData>();
  for (const [name, t] of ckpt.items(options)) out.set(name, t);
  return new Map(ckpt.keys().map((k) => [k, out.get(k)!]));
}
