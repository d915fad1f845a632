/**
 * A character-level tokenizer (nanoGPT's shakespeare_char): one id per distinct character of a
 * corpus, ids in sorted character order. Saved beside a checkpoint as `vocab.json`
 * ({character: id}, the shape of Hugging Face tokenizers' vocab files).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LoomValueError } from "../tensor/errors.ts";

/** File name of the vocabulary in a checkpoint directory. */
export const VOCAB_NAME = "vocab.json";

export interface EncodeOptions {
  /** What to do with a character outside the vocabulary: "error" (default) or "skip" it. */
  unknown?: "error" | "skip";
}

export class CharTokenizer {
  /** Characters by id. */
  readonly itos: readonly string[];
  /** Id of each character. */
  readonly stoi: ReadonlyMap<string, number>;

  /** @throws LoomValueError for an empty vocabulary or a repeated character */
  constructor(chars: readonly string[]) {
    if (chars.length === 0) throw new LoomValueError("[CharTokenizer] the vocabulary is empty");
    this.itos = chars.slice();
    this.stoi = new Map(chars.map((c, i) => [c, i]));
    if (this.stoi.size !== chars.length) throw new LoomValueError("[CharTokenizer] the vocabulary repeats a character");
  }

  /** The vocabulary of `text`: its distinct characters (code points), sorted by code point. */
  static from_text(text: string): CharTokenizer {
    const set = new Set(Array.from(text));
    return new CharTokenizer([...set].sort((a, b) => a.codePointAt(0)! - b.codePointAt(0)!));
  }

  get vocab_size(): number {
    return this.itos.length;
  }

  /**
   * @returns one id per character (code point) of `text`
   * @throws LoomValueError naming the first unknown character, unless opts.unknown is "skip"
   */
  encode(text: string, opts: EncodeOptions = {}): number[] {
    const out: number[] = [];
    for (const c of text) {
      const id = this.stoi.get(c);
      if (id !== undefined) out.push(id);
      else if (opts.unknown !== "skip") throw new LoomValueError(`[CharTokenizer.encode] character ${JSON.stringify(c)} is not in the vocabulary`);
    }
    return out;
  }

  /** @throws LoomValueError for an id outside [0, vocab_size) */
  decode(ids: Iterable<number>): string {
    let s = "";
    for (const id of ids) {
      const c = this.itos[id];
      if (c === undefined) throw new LoomValueError(`[CharTokenizer.decode] id ${id} is outside [0, ${this.vocab_size})`);
      s += c;
    }
    return s;
  }

  /** Write `dir/vocab.json` ({character: id}). */
  save_pretrained(dir: string): void {
    mkdirSync(dir, { recursive: true });
    const vocab = Object.fromEntries(this.itos.map((c, i) => [c, i]));
    writeFileSync(join(dir, VOCAB_NAME), JSON.stringify(vocab, null, 2) + "\n");
  }

  /** Read `dir/vocab.json`. @throws LoomValueError if missing, or unless ids are exactly 0..n-1 */
  static from_pretrained(dir: string): CharTokenizer {
    const path = join(dir, VOCAB_NAME);
    if (!existsSync(path)) throw new LoomValueError(`[CharTokenizer.from_pretrained] no ${VOCAB_NAME} in ${dir}`);
    const vocab = JSON.parse(readFileSync(path, "utf8")) as Record<string, number>;
    const chars: string[] = [];
    for (const [c, id] of Object.entries(vocab)) {
      if (!Number.isInteger(id) || id < 0 || chars[id] !== undefined) throw new LoomValueError(`[CharTokenizer.from_pretrained] ${path}: bad or repeated id ${id} for ${JSON.stringify(c)}`);
      chars[id] = c;
    }
    if (chars.length !== Object.keys(vocab).length) throw new LoomValueError(`[CharTokenizer.from_pretrained] ${path}: ids must be 0..${Object.keys(vocab).length - 1}`);
    return new CharTokenizer(chars);
  }
}
