// Parses files written by an independent writer: tests/fixtures/safetensors/make_reference.py
// (Python standard library only; struct for the bytes, json for the header). Expected values are
// in reference.json, produced by the same script.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { load, load_file, read_header_file, save, type TensorData } from "../../src/io/index.ts";

const DIR = join(import.meta.dir, "../fixtures/safetensors");

interface Expected {
  dtype: string;
  shape: number[];
  bits?: number[];
  values?: (number | null)[];
}
const ref = JSON.parse(readFileSync(join(DIR, "reference.json"), "utf8")) as {
  metadata: Record<string, string>;
  unaligned_metadata: Record<string, string>;
  aligned_order: string[];
  tensors: Record<string, Expected>;
};

function check(name: string, t: TensorData): void {
  const e = ref.tensors[name]!;
  expect(t.dtype).toBe(e.dtype as TensorData["dtype"]);
  expect(t.shape).toEqual(e.shape);
  if (e.bits) {
    // float32 bits through a Uint32Array view; float16/bfloat16 are already bits.
    const bits = t.data instanceof Float32Array ? new Uint32Array(t.data.slice().buffer) : t.data;
    expect(Array.from(bits)).toEqual(e.bits);
  } else {
    expect(Array.from(t.data)).toEqual(e.values as number[]);
  }
}

describe.each([["reference.safetensors"], ["unaligned.safetensors"]])("%s", (file) => {
  const path = join(DIR, file);

  test("every tensor matches reference.json", () => {
    const { tensors, metadata } = load_file(path);
    expect([...tensors.keys()].sort()).toEqual(Object.keys(ref.tensors).sort());
    expect(metadata).toEqual(file === "reference.safetensors" ? ref.metadata : ref.unaligned_metadata);
    for (const [name, t] of tensors) check(name, t);
  });

  test("float16 / bfloat16 bits decode to the reference values", () => {
    const { tensors } = load_file(path);
    const half = tensors.get("half")!.data as Uint16Array;
    const bf = tensors.get("brain")!.data as Uint16Array;
    // Decoded by hand: sign * 2^(e - bias) * (1 + m / 2^mbits), or subnormal m * 2^(1 - bias - mbits).
    const decode = (h: number, ebits: number, mbits: number) => {
      const bias = 2 ** (ebits - 1) - 1;
      const e = (h >> mbits) & (2 ** ebits - 1);
      const m = h & (2 ** mbits - 1);
      const s = h >> (ebits + mbits) ? -1 : 1;
      return e === 0 ? s * m * 2 ** (1 - bias - mbits) : s * (1 + m / 2 ** mbits) * 2 ** (e - bias);
    };
    expect(Array.from(half, (h) => decode(h, 5, 10))).toEqual(ref.tensors.half!.values as number[]);
    expect(Array.from(bf, (h) => decode(h, 8, 7))).toEqual(ref.tensors.brain!.values as number[]);
  });

  test("header-only read agrees with the full load", () => {
    const h = read_header_file(path);
    for (const [name, info] of h.tensors) {
      expect(info.dtype).toBe(ref.tensors[name]!.dtype as TensorData["dtype"]);
      expect(info.shape).toEqual(ref.tensors[name]!.shape);
    }
  });
});

test("the aligned fixture's tensors are views; the unaligned one's multi-byte tensors are copies", () => {
  const aligned = load_file(join(DIR, "reference.safetensors")).tensors;
  expect(aligned.get("weight")!.data.buffer).toBe(aligned.get("counts")!.data.buffer);
  const unaligned = load_file(join(DIR, "unaligned.safetensors")).tensors;
  expect(unaligned.get("weight")!.data.buffer).not.toBe(unaligned.get("counts")!.data.buffer);
  expect(unaligned.get("weight")!.data.buffer.byteLength).toBe(6 * 4);
});

test("re-saving the reference file reproduces it byte for byte (same order, padding, JSON)", () => {
  const original = new Uint8Array(readFileSync(join(DIR, "reference.safetensors")));
  const { tensors, metadata } = load(original);
  expect([...tensors.keys()]).toEqual(ref.aligned_order);
  expect(Array.from(save(tensors, metadata))).toEqual(Array.from(original));
});
