import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { LoomFormatError } from "../../src/tensor/errors.ts";
import { mulberry32 } from "../../src/tensor/rng.ts";
import { load, load_file, read_header, read_header_file, save } from "../../src/io/index.ts";
import { build, f32Bytes, i64Bytes, tempDir, thrown } from "./helpers.ts";

function expectFormatError(bytes: Uint8Array, ...fragments: string[]): void {
  const e = thrown(() => load(bytes));
  expect(e).toBeInstanceOf(LoomFormatError);
  for (const f of fragments) expect(e.message).toContain(f);
}

const F32x4 = f32Bytes([1, 2, 3, 4]);
const entry = (dtype: unknown, shape: unknown, data_offsets: unknown) => ({ dtype, shape, data_offsets });
const valid = build({ w: entry("F32", [2, 2], [0, 16]) }, F32x4);

describe("header length", () => {
  test("file shorter than the 8-byte length field", () => {
    expectFormatError(valid.subarray(0, 5), "5 bytes is too small");
    expectFormatError(new Uint8Array(0), "0 bytes is too small");
  });

  test("header length larger than the file", () => {
    expectFormatError(build({ w: entry("F32", [2, 2], [0, 16]) }, F32x4, 5000n), "header length 5000 exceeds the", "truncated");
  });

  test("truncated in the middle of the header", () => {
    expectFormatError(valid.subarray(0, 20), "exceeds the 12 bytes after the length field");
  });

  test("huge header length, including u64 max", () => {
    expectFormatError(build({}, [], 100_000_001n), "header length 100000001 exceeds the maximum of 100000000");
    expectFormatError(build({}, [], 2n ** 64n - 1n), "header length 18446744073709551615 exceeds the maximum");
  });

  test("header length below 2", () => {
    expectFormatError(build("{}", [], 1n), "header length 1 is too small");
    expectFormatError(build("{}", [], 0n), "header length 0 is too small");
  });
});

describe("header JSON", () => {
  test("invalid UTF-8", () => {
    const bytes = build('{"w":1}');
    bytes[9] = 0xff;
    expectFormatError(bytes, "header: is not valid UTF-8");
  });

  test("not JSON", () => {
    expectFormatError(build("{not json}"), "header: is not valid JSON");
    expectFormatError(build('{"w": {}'), "is not valid JSON");
  });

  test.each([["[1,2]", "an array"], ["42", "a number"], ["null", "null"], ['"s"', "a string"]])("not an object: %s", (text, kind) => {
    expectFormatError(build(text), `JSON is ${kind}, expected an object`);
  });

  test("__metadata__ not an object, or with a non-string value", () => {
    expectFormatError(build({ __metadata__: [1] }), "__metadata__: is an array");
    expectFormatError(build({ __metadata__: { version: 2 } }), '__metadata__: value of key "version" is a number, expected a string');
  });

  test("entry not an object", () => {
    expectFormatError(build({ w: [1, 2] }), 'tensor "w": entry is an array');
  });
});

describe("entries", () => {
  test("unknown and unsupported dtypes, missing dtype", () => {
    expectFormatError(build({ w: entry("F33", [2, 2], [0, 16]) }, F32x4), 'tensor "w"', 'unknown dtype "F33"');
    expectFormatError(build({ w: entry("float32", [2, 2], [0, 16]) }, F32x4), 'unknown dtype "float32"');
    expectFormatError(build({ w: entry("U16", [8], [0, 16]) }, F32x4), "dtype U16 is not supported by Loom");
    expectFormatError(build({ w: { shape: [4], data_offsets: [0, 16] } }, F32x4), 'tensor "w": dtype is missing');
  });

  test("negative, non-integer and non-numeric dims", () => {
    expectFormatError(build({ w: entry("F32", [2, -2], [0, 16]) }, F32x4), 'tensor "w"', "shape dim 1 is -2");
    expectFormatError(build({ w: entry("F32", [1.5], [0, 16]) }, F32x4), "shape dim 0 is 1.5");
    expectFormatError(build({ w: entry("F32", ["4"], [0, 16]) }, F32x4), 'shape dim 0 is "4"');
    expectFormatError(build({ w: entry("F32", 4, [0, 16]) }, F32x4), "shape is a number");
  });

  test("shape whose element count overflows", () => {
    expectFormatError(build({ w: entry("F32", [2 ** 30, 2 ** 30, 2 ** 30], [0, 16]) }, F32x4), 'tensor "w"', "overflows");
  });

  test("shape / size mismatch", () => {
    expectFormatError(build({ w: entry("F32", [2, 3], [0, 16]) }, F32x4), 'tensor "w": data_offsets [0, 16] hold 16 bytes but F32 [2, 3] needs 24');
    expectFormatError(build({ w: entry("F64", [2, 2], [0, 16]) }, F32x4), "F64 [2, 2] needs 32");
  });

  test("malformed data_offsets", () => {
    expectFormatError(build({ w: entry("F32", [2, 2], [0]) }, F32x4), "must be two non-negative integers");
    expectFormatError(build({ w: entry("F32", [2, 2], [-16, 0]) }, F32x4), "must be two non-negative integers");
    expectFormatError(build({ w: entry("F32", [2, 2], [0, 16.5]) }, F32x4), "must be two non-negative integers");
    expectFormatError(build({ w: entry("F32", [2, 2], [16, 0]) }, F32x4), "begin > end");
  });

  test("out-of-bounds offsets", () => {
    expectFormatError(build({ w: entry("F32", [2, 2], [4, 20]) }, F32x4), 'tensor "w": data_offsets [4, 20] run past the end of the 16-byte data buffer');
    expectFormatError(build({ w: entry("F32", [2, 2], [2 ** 50, 2 ** 50 + 16]) }, F32x4), "run past the end");
  });

  test("truncated data", () => {
    expectFormatError(valid.subarray(0, valid.length - 4), "run past the end of the 12-byte data buffer");
  });
});

describe("layout of the data buffer", () => {
  test("overlapping offsets", () => {
    const h = { a: entry("F32", [2], [0, 8]), b: entry("F32", [2], [4, 12]), c: entry("F32", [1], [12, 16]) };
    expectFormatError(build(h, F32x4), 'tensor "b": data_offsets [4, 12] overlap tensor "a", which ends at 8');
  });

  test("two tensors on the same bytes", () => {
    const h = { a: entry("F32", [4], [0, 16]), b: entry("I32", [4], [0, 16]) };
    expectFormatError(build(h, F32x4), "overlap tensor");
  });

  test("gap between tensors", () => {
    const h = { a: entry("F32", [1], [0, 4]), b: entry("F32", [2], [8, 16]) };
    expectFormatError(build(h, F32x4), 'tensor "b": data_offsets [8, 16] leave a gap of 4 bytes after tensor "a" (ends at 4)');
  });

  test("gap before the first tensor", () => {
    expectFormatError(build({ a: entry("F32", [3], [4, 16]) }, F32x4), "gap of 4 bytes after the start of the data buffer");
  });

  test("trailing bytes not covered by any tensor", () => {
    expectFormatError(build({ a: entry("F32", [3], [0, 12]) }, F32x4), "4 trailing bytes after the last tensor");
    expectFormatError(build({}, [0]), "1 trailing bytes");
  });

  test("entries listed out of offset order are fine", () => {
    const h = { b: entry("F32", [2], [8, 16]), a: entry("F32", [2], [0, 8]) };
    const { tensors } = load(build(h, F32x4));
    expect([...tensors.keys()]).toEqual(["a", "b"]);
    expect(Array.from(tensors.get("b")!.data)).toEqual([3, 4]);
  });
});

describe("repeated keys (JSON.parse would silently keep the last one)", () => {
  const F32 = '"dtype":"F32","shape":[4],"data_offsets":[0,16]';
  const I32 = '"dtype":"I32","shape":[4],"data_offsets":[0,16]';

  test("a tensor name twice: the same bytes as F32 and as I32", () => {
    const bytes = build(`{"a":{${F32}},"a":{${I32}}}`, F32x4);
    expectFormatError(bytes, 'tensor "a": appears twice in the header; every key must be unique');
    expect(thrown(() => read_header(bytes)).message).toBe('[safetensors] tensor "a": appears twice in the header; every key must be unique');
  });

  test("a tensor name twice with different ranges (the reference then fails on the first one's hole)", () => {
    const h = '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}';
    expectFormatError(build(h, F32x4), 'tensor "a": appears twice in the header');
  });

  test("a field twice inside one entry (serde: duplicate field), also when spelled with an escape", () => {
    expectFormatError(build(`{"w":{"dtype":"F32",${I32}}}`, F32x4), 'tensor "w": duplicate field "dtype"');
    expectFormatError(build(`{"w":{"d\\u0074ype":"F32",${I32}}}`, F32x4), 'tensor "w": duplicate field "dtype"');
    expectFormatError(build(`{"w":{${F32},"shape":[2,2]}}`, F32x4), 'tensor "w": duplicate field "shape"');
  });

  test("__metadata__ twice, a metadata key twice, a key repeated deeper", () => {
    expectFormatError(build(`{"__metadata__":{},"__metadata__":{"k":"v"},"w":{${F32}}}`, F32x4), "__metadata__: appears twice in the header");
    expectFormatError(build(`{"__metadata__":{"k":"v","k":"w"},"w":{${F32}}}`, F32x4), '__metadata__: duplicate key "k"');
    expectFormatError(build('{"w":{"dtype":"F32","shape":[{"a":1,"a":2}],"data_offsets":[0,16]}}', F32x4), 'header: duplicate key "a" in ["w"]["shape"][0]');
  });

  test("on disk, read_header_file and load_file name the file", () => {
    const path = join(tempDir(), "dup.safetensors");
    writeFileSync(path, build(`{"a":{${F32}},"a":{${I32}}}`, F32x4));
    for (const fn of [() => load_file(path), () => read_header_file(path)]) {
      const e = thrown(fn);
      expect(e).toBeInstanceOf(LoomFormatError);
      expect(e.message).toBe(`[safetensors] ${path}: tensor "a": appears twice in the header; every key must be unique`);
    }
  });

  test("empty tensors may share an offset, as in the reference's validate (each begins where the last ended)", () => {
    const h = { e1: entry("F32", [0], [0, 0]), e2: entry("I32", [0, 3], [0, 0]), w: entry("F32", [4], [0, 16]) };
    const { tensors } = load(build(h, F32x4));
    expect([...tensors.keys()]).toEqual(["e1", "e2", "w"]);
    expect(Array.from(tensors.get("w")!.data)).toEqual([1, 2, 3, 4]);
  });
});

describe("data values", () => {
  test.each([
    [2n ** 53n + 1n, "9007199254740993"],
    [-(2n ** 53n) - 1n, "-9007199254740993"],
    [2n ** 63n - 1n, "9223372036854775807"],
    [-(2n ** 63n), "-9223372036854775808"],
  ])("int64 %p is outside the float64-exact range", (v, text) => {
    const bytes = build({ ids: entry("I64", [2], [0, 16]) }, i64Bytes([0n, v]));
    expectFormatError(bytes, 'tensor "ids": I64 element 1 is ' + text, "outside ±2^53");
  });

  test("int64 at exactly ±2^53 is accepted", () => {
    const bytes = build({ ids: entry("I64", [2], [0, 16]) }, i64Bytes([2n ** 53n, -(2n ** 53n)]));
    expect(Array.from(load(bytes).tensors.get("ids")!.data)).toEqual([2 ** 53, -(2 ** 53)]);
  });

  test("BOOL bytes must be 0 or 1", () => {
    expectFormatError(build({ m: entry("BOOL", [3], [0, 3]) }, [0, 1, 2]), 'tensor "m": BOOL element 2 is byte 2');
  });
});

describe("file errors name the file", () => {
  test("load_file and read_header_file", () => {
    const path = join(tempDir(), "bad.safetensors");
    writeFileSync(path, build({ w: entry("F32", [2, 3], [0, 16]) }, F32x4));
    for (const fn of [() => load_file(path), () => read_header_file(path)]) {
      const e = thrown(fn);
      expect(e).toBeInstanceOf(LoomFormatError);
      expect(e.message).toStartWith(`[safetensors] ${path}: tensor "w": `);
    }
  });

  test("a file shorter than 8 bytes on disk", () => {
    const path = join(tempDir(), "tiny.safetensors");
    writeFileSync(path, new Uint8Array([1, 2, 3]));
    expect(thrown(() => load_file(path)).message).toContain(`${path}: file: 3 bytes is too small`);
    expect(thrown(() => read_header_file(path)).message).toContain("3 bytes is too small");
    writeFileSync(path, new Uint8Array(0));
    expect(thrown(() => load_file(path)).message).toContain("0 bytes is too small");
  });
});

describe("random corruption", () => {
  // Mulberry32: a small seeded generator so failures reproduce.
  const rng = mulberry32;

  test("every corrupted or truncated file either loads or throws LoomFormatError", () => {
    const good = save({
      a: { dtype: "int64", shape: [2], data: new Float64Array([1, -1]) },
      b: { dtype: "float16", shape: [3], data: new Uint16Array([1, 2, 3]) },
      c: { dtype: "bool", shape: [2], data: new Uint8Array([1, 0]) },
    }, { k: "v" });
    const rand = rng(1234);
    let rejected = 0;
    for (let trial = 0; trial < 3000; trial++) {
      const bytes = good.slice(0, trial % 10 === 0 ? Math.floor(rand() * good.length) : good.length);
      const flips = 1 + Math.floor(rand() * 3);
      for (let k = 0; k < flips && bytes.length > 0; k++) {
        // Mostly hit the header, where the structure lives.
        const i = rand() < 0.8 ? Math.floor(rand() * Math.min(bytes.length, 8 + 140)) : Math.floor(rand() * bytes.length);
        bytes[i] = rand() < 0.5 ? Math.floor(rand() * 256) : "0123456789[]{},:\"-. e".charCodeAt(Math.floor(rand() * 21));
      }
      try {
        load(bytes);
        read_header(bytes);
      } catch (e) {
        if (!(e instanceof LoomFormatError)) throw new Error(`trial ${trial}: ${(e as Error).name}: ${(e as Error).message}`);
        rejected++;
      }
    }
    expect(rejected).toBeGreaterThan(1000);
  });
});
