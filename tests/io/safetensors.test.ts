import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DType, TypedArray } from "../../src/tensor/dtype.ts";
import { LoomFormatError, LoomValueError } from "../../src/tensor/errors.ts";
import { load, load_file, read_header, read_header_file, safe_open, save, save_file, type TensorLike } from "../../src/io/index.ts";
import { build, f32Bytes, i64Bytes, tempDir, thrown } from "./helpers.ts";

// One tensor per dtype, with the edge values of each; floats are compared bit for bit.
const CASES: [DType, number[], TypedArray][] = [
  ["float32", [2, 3], new Float32Array([0, -1.5, 3.4028234663852886e38, 1.401298464324817e-45, NaN, -0])],
  ["float64", [3, 2], new Float64Array([Math.PI, -0, 5e-324, Number.MAX_VALUE, NaN, -Infinity])],
  // 1.0, -2.0, max 65504, min subnormal, NaN, -0
  ["float16", [6], new Uint16Array([0x3c00, 0xc000, 0x7bff, 0x0001, 0x7e00, 0x8000])],
  // 1.0, -3.5, max finite, min subnormal, NaN, -0
  ["bfloat16", [2, 3], new Uint16Array([0x3f80, 0xc060, 0x7f7f, 0x0001, 0x7fc0, 0x8000])],
  ["int64", [6], new Float64Array([0, -1, 2 ** 53, -(2 ** 53), 123456789012, -42])],
  ["int32", [4], new Int32Array([-(2 ** 31), 2 ** 31 - 1, 0, -7])],
  ["int8", [2, 2], new Int8Array([-128, 127, 0, -1])],
  ["uint8", [4], new Uint8Array([0, 255, 1, 128])],
  ["bool", [2, 2, 1], new Uint8Array([1, 0, 0, 1])],
];

function bitsEqual(a: TypedArray, b: TypedArray): void {
  expect(a.constructor).toBe(b.constructor);
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Object.is(a[i], b[i])).toBe(true);
}

describe("round trip", () => {
  test.each(CASES)("%s", (dtype, shape, data) => {
    const bytes = save({ t: { dtype, shape, data } });
    const { tensors } = load(bytes);
    const t = tensors.get("t")!;
    expect(t.dtype).toBe(dtype);
    expect(t.shape).toEqual(shape);
    bitsEqual(t.data, data);
  });

  test("all dtypes in one file, each at an aligned offset", () => {
    const dict = Object.fromEntries(CASES.map(([dtype, shape, data]) => [`t.${dtype}`, { dtype, shape, data }]));
    const bytes = save(dict);
    const { tensors } = load(bytes);
    expect(tensors.size).toBe(CASES.length);
    for (const [dtype, shape, data] of CASES) {
      const t = tensors.get(`t.${dtype}`)!;
      expect([t.dtype, t.shape]).toEqual([dtype, shape]);
      bitsEqual(t.data, data);
      if (dtype !== "int64") expect(t.data.buffer).toBe(bytes.buffer); // zero-copy view
    }
  });

  test("int64 negatives are written as two's complement", () => {
    const bytes = save({ i: { dtype: "int64", shape: [3], data: new Float64Array([-1, -(2 ** 53), 2 ** 40]) } });
    const header = read_header(bytes);
    const data = Array.from(bytes.subarray(header.data_start));
    expect(data).toEqual(i64Bytes([-1n, -(2n ** 53n), 2n ** 40n]));
  });

  test("empty and scalar tensors", () => {
    const bytes = save({
      empty: { dtype: "float32", shape: [0, 4], data: new Float32Array(0) },
      scalar: { dtype: "float64", shape: [], data: new Float64Array([7]) },
    });
    const { tensors } = load(bytes);
    expect(tensors.get("empty")!.shape).toEqual([0, 4]);
    expect(tensors.get("empty")!.data.length).toBe(0);
    expect(tensors.get("scalar")!.shape).toEqual([]);
    expect(Array.from(tensors.get("scalar")!.data)).toEqual([7]);
  });

  test("metadata round trip, including escapes and non-ASCII", () => {
    const metadata = { format: "pt", "quote\"key": "line\nbreak", "ключ": "値 ✓", __proto__x: "" };
    const bytes = save({ w: { dtype: "float32", shape: [1], data: new Float32Array([1]) } }, metadata);
    expect(load(bytes).metadata).toEqual(metadata);
  });

  test("no metadata writes no __metadata__ and loads as {}", () => {
    const bytes = save({ w: { dtype: "uint8", shape: [1], data: new Uint8Array([1]) } });
    expect(new TextDecoder().decode(bytes)).not.toContain("__metadata__");
    expect(load(bytes).metadata).toEqual({});
  });

  test("a Map keeps names that are special on plain objects", () => {
    const bytes = save(new Map([["__proto__", { dtype: "int8", shape: [1], data: new Int8Array([5]) } as TensorLike]]));
    expect(Array.from(load(bytes).tensors.get("__proto__")!.data)).toEqual([5]);
  });

  test("copy: true returns arrays that do not alias the input", () => {
    const bytes = save({ w: { dtype: "float32", shape: [2], data: new Float32Array([1, 2]) } });
    const w = load(bytes, { copy: true }).tensors.get("w")!;
    expect(w.data.buffer).not.toBe(bytes.buffer);
    bytes.fill(0);
    expect(Array.from(w.data)).toEqual([1, 2]);
  });
});

describe("writer layout matches the reference implementation", () => {
  // Byte vectors from huggingface/safetensors safetensors/src/tensor.rs tests
  // (test_serialization, test_empty, test_serialization_forced_alignement).
  const f32 = new Float32Array([0, 1, 2, 3, 4, 5]);
  test("attn.0 F32 [1,2,3]: a 64-byte header needs no padding", () => {
    const out = save({ "attn.0": { dtype: "float32", shape: [1, 2, 3], data: f32 } });
    const header = '{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}';
    expect(header.length).toBe(64);
    expect(Array.from(out)).toEqual(Array.from(build(header, f32Bytes([0, 1, 2, 3, 4, 5]))));
    expect(out[0]).toBe(64);
  });

  test("attn0 F32 [1,1,2,3]: a 65-byte header is padded with 7 spaces to 72", () => {
    const out = save({ attn0: { dtype: "float32", shape: [1, 1, 2, 3], data: f32 } });
    expect(out[0]).toBe(72);
    expect(new TextDecoder().decode(out.subarray(8, 80))).toBe('{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       ');
  });

  test("empty file: {} padded to 8 bytes, and with metadata", () => {
    expect(Array.from(save({}))).toEqual([8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32]);
    const withMeta = save({}, { framework: "pt" });
    expect(withMeta[0]).toBe(40);
    expect(new TextDecoder().decode(withMeta.subarray(8))).toBe('{"__metadata__":{"framework":"pt"}}     ');
  });

  test("tensors are ordered by descending dtype alignment, then name", () => {
    const bytes = save({
      b: { dtype: "bool", shape: [1], data: new Uint8Array([1]) },
      h: { dtype: "float16", shape: [1], data: new Uint16Array([1]) },
      z: { dtype: "int64", shape: [1], data: new Float64Array([1]) },
      a: { dtype: "float32", shape: [1], data: new Float32Array([1]) },
      c: { dtype: "float32", shape: [1], data: new Float32Array([1]) },
    });
    const order = [...read_header(bytes).tensors.entries()].map(([n, i]) => [n, i.data_offsets]);
    expect(order).toEqual([["z", [0, 8]], ["a", [8, 12]], ["c", [12, 16]], ["h", [16, 18]], ["b", [18, 19]]]);
  });
});

describe("hand-built golden", () => {
  // I64 [2] = [-2, 2^40] then F16 [2] = [1.0 (0x3c00), -0.5 (0xb800)], header written by hand.
  const header = '{"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},"b":{"dtype":"F16","shape":[2],"data_offsets":[16,20]},"__metadata__":{"k":"v"}}';
  const data = [
    0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // -2
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, // 2^40
    0x00, 0x3c, 0x00, 0xb8, // 1.0, -0.5 as float16 bits
  ];
  test("parses to the expected values", () => {
    const { tensors, metadata } = load(build(header, data));
    expect(metadata).toEqual({ k: "v" });
    expect(tensors.get("a")).toEqual({ dtype: "int64", shape: [2], data: new Float64Array([-2, 2 ** 40]) });
    expect(tensors.get("b")).toEqual({ dtype: "float16", shape: [2], data: new Uint16Array([0x3c00, 0xb800]) });
  });

  test("header only: names, dtypes, shapes, offsets", () => {
    const h = read_header(build(header, data));
    expect([...h.tensors.keys()]).toEqual(["a", "b"]);
    expect(h.tensors.get("b")).toEqual({ dtype: "float16", shape: [2], data_offsets: [16, 20] });
    expect(h.header_size).toBe(header.length);
    expect(h.data_start).toBe(8 + header.length);
    expect(h.data_size).toBe(20);
  });

  test("header padded with trailing spaces is accepted", () => {
    const { tensors } = load(build(header + "    ", data));
    expect(Array.from(tensors.get("a")!.data)).toEqual([-2, 2 ** 40]);
  });

  test("misaligned data (odd header length) is copied, values intact", () => {
    const odd = (8 + header.length) % 2 === 1 ? header : header + " "; // 8 + N odd: every multi-byte tensor misaligned
    expect((8 + odd.length) % 2).toBe(1);
    const bytes = build(odd, data);
    const b = load(bytes).tensors.get("b")!;
    expect(Array.from(b.data)).toEqual([0x3c00, 0xb800]);
    expect(b.data.buffer).not.toBe(bytes.buffer);
  });
});

describe("files", () => {
  const dict = Object.fromEntries(CASES.map(([dtype, shape, data]) => [dtype, { dtype, shape, data }]));

  test("save_file / load_file round trip; aligned tensors are views on one mapping", () => {
    const path = join(tempDir(), "model.safetensors");
    save_file(dict, path, { format: "pt" });
    expect(readFileSync(path)).toEqual(Buffer.from(save(dict, { format: "pt" })));
    const { tensors, metadata } = load_file(path);
    expect(metadata).toEqual({ format: "pt" });
    for (const [dtype, , data] of CASES) bitsEqual(tensors.get(dtype)!.data, data);
    const f32 = tensors.get("float32")!.data;
    expect(f32.buffer).toBe(tensors.get("int32")!.data.buffer);
    expect(f32.buffer.byteLength).toBeGreaterThanOrEqual(readFileSync(path).length);
  });

  test("writing to a loaded array does not modify the file (private mapping)", () => {
    const path = join(tempDir(), "m.safetensors");
    save_file({ w: { dtype: "float32", shape: [2], data: new Float32Array([1, 2]) } }, path);
    const before = readFileSync(path);
    load_file(path).tensors.get("w")!.data[0] = 99;
    expect(readFileSync(path)).toEqual(before);
  });

  test("save_file replaces a mapped file without disturbing its views", () => {
    const path = join(tempDir(), "m.safetensors");
    save_file({ w: { dtype: "float32", shape: [2], data: new Float32Array([1, 2]) } }, path);
    const old = load_file(path).tensors.get("w")!;
    save_file({ w: { dtype: "float32", shape: [3], data: new Float32Array([7, 8, 9]) } }, path);
    expect(Array.from(old.data)).toEqual([1, 2]);
    expect(Array.from(load_file(path).tensors.get("w")!.data)).toEqual([7, 8, 9]);
  });

  test("read_header_file reads the header without decoding data", () => {
    const path = join(tempDir(), "h.safetensors");
    // A BOOL byte of 7 is invalid data: loading fails, reading the header does not.
    writeFileSync(path, build({ m: { dtype: "BOOL", shape: [2], data_offsets: [0, 2] } }, [1, 7]));
    const h = read_header_file(path);
    expect(h.tensors.get("m")).toEqual({ dtype: "bool", shape: [2], data_offsets: [0, 2] });
    expect(thrown(() => load_file(path)).message).toContain("BOOL element 1 is byte 7");
  });

  test("safe_open: keys, metadata, info, get_tensor, missing name", () => {
    const path = join(tempDir(), "s.safetensors");
    save_file(dict, path, { a: "b" });
    const f = safe_open(path);
    expect(f.keys().sort()).toEqual(CASES.map(([d]) => d).sort());
    expect(f.metadata()).toEqual({ a: "b" });
    expect(f.info("int8")).toEqual({ dtype: "int8", shape: [2, 2], data_offsets: f.info("int8").data_offsets });
    bitsEqual(f.get_tensor("bfloat16").data, CASES[3]![2]);
    const e = thrown(() => f.get_tensor("nope"));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toContain('no tensor named "nope"');
    f.close();
    expect(thrown(() => f.get_tensor("int8")).message).toContain("after close()");
  });
});

describe("save rejects bad input", () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ["wrong array class", { w: { dtype: "float32", shape: [2], data: new Float64Array(2) } }, "float32 data must be a Float32Array, got Float64Array"],
    ["length mismatch", { w: { dtype: "int32", shape: [2, 2], data: new Int32Array(3) } }, "shape [2, 2] has 4 elements but data has 3"],
    ["unknown dtype", { w: { dtype: "complex64", shape: [1], data: new Float32Array(1) } }, 'unknown dtype "complex64"'],
    ["negative shape", { w: { dtype: "uint8", shape: [-1], data: new Uint8Array(0) } }, "non-negative integers"],
    ["reserved name", { __metadata__: { dtype: "uint8", shape: [1], data: new Uint8Array(1) } }, "cannot be named __metadata__"],
    ["fractional int64", { w: { dtype: "int64", shape: [2], data: new Float64Array([1, 2.5]) } }, "int64 element 1 is 2.5"],
    ["int64 beyond 2^53", { w: { dtype: "int64", shape: [1], data: new Float64Array([2 ** 60]) } }, "within ±2^53"],
  ];
  test.each(cases)("%s", (_label, dict, fragment) => {
    const e = thrown(() => save(dict as Record<string, TensorLike>));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toContain(fragment);
  });

  test("non-string metadata value", () => {
    const e = thrown(() => save({}, { n: 3 as unknown as string }));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toContain('metadata value of key "n" is a number');
  });

  test("bool bytes other than 0/1 are written as 1", () => {
    const bytes = save({ m: { dtype: "bool", shape: [3], data: new Uint8Array([0, 2, 255]) } });
    expect(Array.from(load(bytes).tensors.get("m")!.data)).toEqual([0, 1, 1]);
  });

  test("a file error is a LoomFormatError, an input error a LoomValueError", () => {
    expect(thrown(() => load(new Uint8Array(3)))).toBeInstanceOf(LoomFormatError);
  });
});
