/**
 * A token file as a dataset (nanoGPT's `train.bin`: token ids as little-endian uint16, or uint32
 * for vocabularies over 65,536, one after another). Sample i is the window starting at token i:
 * x = tokens[i, i + block_size), y = tokens[i + 1, i + 1 + block_size) (next-token targets), both
 * int64 [block_size]. Only the bytes of the windows asked for are read (positioned reads of the
 * open file), so a corpus larger than memory works; nanoGPT's random windows are a
 * `RandomSampler(ds.length, { replacement: true, num_samples })`.
 */
import { closeSync } from "node:fs";
import { openRegularFile, readAt } from "../io/files.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomFormatError, LoomValueError } from "../tensor/errors.ts";
import { Collated, Dataset, checkIndex } from "./dataset.ts";

export interface TokenFileOptions {
  /** Tokens per window. */
  block_size: number;
  /** Token width in the file (default "uint16", nanoGPT's). */
  dtype?: "uint16" | "uint32";
}

export class TokenFileDataset extends Dataset<{ x: Tensor; y: Tensor }> {
  readonly block_size: number;
  /** Tokens in the file. */
  readonly num_tokens: number;
  private readonly fd: number;
  private readonly width: 2 | 4;

  /**
   * @throws LoomValueError for a block_size that is not a positive integer; LoomFormatError for
   *   a path that is not a regular file, a size that is not a whole number of tokens, or fewer
   *   than block_size + 1 tokens
   */
  constructor(readonly path: string, opts: TokenFileOptions) {
    super();
    const bs = opts.block_size;
    if (!Number.isInteger(bs) || bs <= 0) throw new LoomValueError(`[TokenFileDataset] block_size should be a positive integer, got ${bs}`);
    this.width = (opts.dtype ?? "uint16") === "uint16" ? 2 : 4;
    const { fd, size } = openRegularFile(path, (why) => new LoomFormatError(`[TokenFileDataset] ${path} ${why}`));
    if (size % this.width !== 0) throw new LoomFormatError(`[TokenFileDataset] ${path}: ${size} bytes is not a whole number of ${this.width * 8}-bit tokens`);
    this.num_tokens = size / this.width;
    if (this.num_tokens < bs + 1) throw new LoomFormatError(`[TokenFileDataset] ${path}: ${this.num_tokens} tokens, fewer than block_size + 1 = ${bs + 1}`);
    this.fd = fd;
    this.block_size = bs;
  }

  /** Close the file (later reads raise). */
  close(): void {
    closeSync(this.fd);
  }

  /** Windows that fit: every start from 0 to num_tokens - block_size - 1. */
  get length(): number {
    return this.num_tokens - this.block_size;
  }

  /** block_size + 1 tokens from `start` (x and y overlap by all but one). */
  private window(start: number): Float64Array {
    const n = this.block_size + 1;
    const bytes = readAt(this.fd, start * this.width, n * this.width);
    if (bytes.length !== n * this.width) throw new LoomFormatError(`[TokenFileDataset] ${this.path}: the file shrank while reading (window at token ${start})`);
    const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const out = new Float64Array(n);
    for (let k = 0; k < n; k++) out[k] = this.width === 2 ? v.getUint16(2 * k, true) : v.getUint32(4 * k, true);
    return out;
  }

  get(index: number): { x: Tensor; y: Tensor } {
    checkIndex("TokenFileDataset", index, this.length);
    const w = this.window(index), T = this.block_size;
    const mk = (a: Float64Array) => new Tensor({ dtype: "int64", shape: [T], strides: [1], offset: 0, data: a }, "cpu");
    return { x: mk(w.slice(0, T)), y: mk(w.slice(1)) };
  }

  /** A batch read straight into x, y int64 [B, block_size] (no per-sample tensors). */
  override getitems(indices: readonly number[]): Collated {
    const T = this.block_size, B = indices.length;
    const x = new Float64Array(B * T), y = new Float64Array(B * T);
    indices.forEach((i, b) => {
      checkIndex("TokenFileDataset", i, this.length);
      const w = this.window(i);
      x.set(w.subarray(0, T), b * T);
      y.set(w.subarray(1), b * T);
    });
    const mk = (a: Float64Array) => new Tensor({ dtype: "int64", shape: [B, T], strides: [T, 1], offset: 0, data: a }, "cpu");
    return new Collated({ x: mk(x), y: mk(y) });
  }
}
