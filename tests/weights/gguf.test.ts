/**
 * GGUF import: tiny.gguf (written by gen_gguf.py per the GGUF spec, Q8_0 / Q4_0 quantized with
 * ggml's reference formulas) loads with the expected values; bad input gives typed errors naming
 * the tensor and the value; random corruption never escapes as anything but LoomFormatError.
 */
import { describe, expect, test } from "bun:test";
import { gguf } from "@huggingface/gguf";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Tensor } from "../../src/lazy/tensor.ts";
import { LoomFormatError } from "../../src/tensor/errors.ts";
import { Dense, Quantized, WeightCache, load_gguf, load_gguf_bytes } from "../../src/weights/index.ts";
import expected from "./gguf_expected.json";

const PATH = join(import.meta.dir, "tiny.gguf");
const bitsOf = (t: Tensor) => [...new Uint32Array(Float32Array.from(t.float().contiguous().dataSync()).buffer)];

async function reject(bytes: Uint8Array): Promise<string> {
  try {
    await load_gguf_bytes(bytes, "bad.gguf");
  } catch (e) {
    expect(e).toBeInstanceOf(LoomFormatError);
    return (e as Error).message;
  }
  throw new Error("expected a LoomFormatError");
}

/** The byte offset of tensor info field `field` (0 = n_dims) of tensor `name` in the header. */
function infoAt(bytes: Uint8Array, name: string): number {
  const i = Buffer.from(bytes).indexOf(Buffer.from(name));
  return i + name.length; // n_dims (u32), ne (u64 × n_dims), type (u32), offset (u64)
}

describe("load_gguf", () => {
  test("tiny.gguf: metadata, shapes (ne reversed), node kinds and values", async () => {
    const f = await load_gguf(PATH);
    expect(f.version).toBe(3);
    for (const [k, v] of Object.entries(expected.metadata)) expect(f.metadata[k]).toEqual(v);
    expect(f.tensors.map((t) => [t.name, t.shape, t.type])).toEqual(expected.tensors.map((t) => [t.name, t.shape, t.type]));
    expect(f.tensors[0]!.offset).toBe(expected.data_offset);
    for (const t of expected.tensors) {
      const n = f.nodes.get(t.name)!;
      expect(n).toBeInstanceOf(t.type.startsWith("Q") ? Quantized : Dense);
      expect(bitsOf(n.materialize(new WeightCache(0)))).toEqual(t.bits);
    }
    const q = f.nodes.get("blk.0.attn_q.weight") as Quantized;
    expect(q.format).toBe("q8_0");
    expect(q.qweight.shape).toEqual([4, 2 * 34]);
    expect(f.nodes.get("blk.0.ffn_down.weight")!.nbytes()).toBe(3 * 3 * 18);
    expect(f.nodes.get("token_embd.weight")!.dtype).toBe("float16");
  });

  test("the header agrees with @huggingface/gguf reading the file itself", async () => {
    const lib = await gguf(PATH, { allowLocalFile: true });
    const f = await load_gguf(PATH);
    expect(f.tensors.map((t) => t.shape)).toEqual(lib.tensorInfos.map((i) => i.shape.map(Number).reverse()));
    expect(f.tensors.map((t) => t.offset)).toEqual(lib.tensorInfos.map((i) => Number(lib.tensorDataOffset + i.offset)));
  });

  test("bad input: typed errors naming the tensor and the value", async () => {
    const good = new Uint8Array(readFileSync(PATH));
    const dv = (b: Uint8Array) => new DataView(b.buffer, b.byteOffset, b.byteLength);
    // unknown type, and a known but unsupported one
    let b = good.slice();
    let at = infoAt(b, "blk.0.ffn_down.weight");
    dv(b).setUint32(at + 4 + 16, 99, true);
    expect(await reject(b)).toMatch(/tensor "blk.0.ffn_down.weight": unknown GGML type 99/);
    dv(b).setUint32(at + 4 + 16, 3, true);
    expect(await reject(b)).toMatch(/unsupported GGML type Q4_1 \(3\)/);
    // block-size mismatch: ne[0] = 48 for a Q8_0 tensor
    b = good.slice();
    at = infoAt(b, "blk.0.attn_q.weight");
    dv(b).setBigUint64(at + 4, 48n, true);
    expect(await reject(b)).toMatch(/tensor "blk.0.attn_q.weight": block-size mismatch: row length ne\[0\] = 48 is not a multiple of the Q8_0 block size 32/);
    // truncated block stream
    expect(await reject(good.slice(0, good.length - 40))).toMatch(/tensor "blk.0.extra": truncated block stream: needs bytes \[\d+, \d+\)/);
    b = good.slice();
    at = infoAt(b, "blk.0.ffn_down.weight");
    dv(b).setBigUint64(at + 4, 96n * 1000n, true); // ne[0] grows: the rows run past the end
    expect(await reject(b)).toMatch(/blk.0.ffn_down.weight": truncated block stream/);
    // misaligned offset
    b = good.slice();
    at = infoAt(b, "output_norm.weight");
    dv(b).setBigUint64(at + 4 + 8 + 4, 577n, true);
    expect(await reject(b)).toMatch(/offset 577 is not a multiple of the alignment 32/);
    // not a GGUF file at all
    expect(await reject(new TextEncoder().encode("not a gguf file at all, no"))).toMatch(/corrupt GGUF header/);
  });

  test("random corruption: loads or throws LoomFormatError, never reads out of bounds", async () => {
    const good = new Uint8Array(readFileSync(PATH));
    let seed = 1212;
    const rand = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    let rejected = 0, loaded = 0;
    for (let trial = 0; trial < 800; trial++) {
      const bytes = good.slice(0, trial % 8 === 0 ? Math.floor(rand() * good.length) : good.length);
      const flips = 1 + Math.floor(rand() * 3);
      for (let k = 0; k < flips && bytes.length > 0; k++) {
        // mostly the header (metadata and tensor infos end at data_offset)
        const i = rand() < 0.85 ? Math.floor(rand() * Math.min(bytes.length, expected.data_offset)) : Math.floor(rand() * bytes.length);
        bytes[i] = rand() < 0.5 ? Math.floor(rand() * 256) : [0, 1, 2, 8, 32, 255][Math.floor(rand() * 6)]!;
      }
      try {
        const f = await load_gguf_bytes(bytes, `trial ${trial}`);
        loaded++;
        for (const t of f.tensors) {
          // every view lies inside the buffer it was cut from
          expect(t.offset + t.nbytes).toBeLessThanOrEqual(bytes.length);
          if (loaded % 16 === 0) f.nodes.get(t.name)!.materialize(new WeightCache(0));
        }
      } catch (e) {
        if (!(e instanceof LoomFormatError)) throw new Error(`trial ${trial}: ${(e as Error).name}: ${(e as Error).message}`);
        rejected++;
      }
    }
    expect(rejected).toBeGreaterThan(200);
    expect(loaded).toBeGreaterThan(50);
  });
});
