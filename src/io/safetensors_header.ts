/**
 * The safetensors header: dtype names, the validating parser for untrusted headers, and the
 * canonical header writer.
 *
 * Layout of a file (little-endian):
 *   [8 bytes: u64 N] [N bytes: UTF-8 JSON header, space-padded] [data buffer]
 *   header = {"__metadata__"?: {str: str}, "<name>": {"dtype", "shape", "data_offsets": [begin, end]}}
 * Offsets are relative to the start of the data buffer. A valid file's offsets, sorted, tile the
 * data buffer exactly: contiguous from 0, no overlap, no hole, ending at the end of the file.
 *
 * Source: the safetensors spec (huggingface/safetensors README, "Format") and its reference
 * implementation safetensors/src/tensor.rs (MAX_HEADER_SIZE = 100_000_000, Metadata::validate,
 * and `prepare`, which orders tensors by descending dtype alignment then name and pads the header
 * with spaces to a multiple of 8 bytes).
 */
import type { DType } from "../tensor/dtype.ts";
import { LoomFormatError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { findDuplicateKey, formatJsonPath } from "./json.ts";

/** The safetensors dtype strings Loom reads and writes. */
export type SafetensorsDtype = "F64" | "F32" | "F16" | "BF16" | "I64" | "I32" | "I8" | "U8" | "BOOL";

/** safetensors dtype -> Loom dtype. */
export const SAFETENSORS_TO_DTYPE: Readonly<Record<SafetensorsDtype, DType>> = {
  F64: "float64", F32: "float32", F16: "float16", BF16: "bfloat16",
  I64: "int64", I32: "int32", I8: "int8", U8: "uint8", BOOL: "bool",
};

/** Loom dtype -> safetensors dtype. */
export const DTYPE_TO_SAFETENSORS: Readonly<Record<DType, SafetensorsDtype>> = {
  float64: "F64", float32: "F32", float16: "F16", bfloat16: "BF16",
  int64: "I64", int32: "I32", int8: "I8", uint8: "U8", bool: "BOOL",
};

/** Bytes per element in the file (not in Loom's storage: I64 is 8 here either way). */
export const FILE_ITEMSIZE: Readonly<Record<SafetensorsDtype, number>> = {
  F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I8: 1, U8: 1, BOOL: 1,
};

// Dtypes the spec defines that Loom has no storage for; named so the error says "unsupported"
// rather than "unknown".
const UNSUPPORTED = new Set([
  "U16", "I16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64",
]);

// Write order of the reference writer: descending position in its `Dtype` enum (which is in
// increasing alignment), so every tensor of a padded file starts aligned to its item size.
const WRITE_RANK: Readonly<Record<SafetensorsDtype, number>> = {
  BOOL: 0, U8: 1, I8: 2, F16: 3, BF16: 4, I32: 5, F32: 6, F64: 7, I64: 8,
};

/** Largest header accepted, in bytes (the reference implementation's limit). */
export const MAX_HEADER_SIZE = 100_000_000;
/** Smallest possible header: `{}`. */
export const MIN_HEADER_SIZE = 2;
/** The reserved header key for the string -> string metadata map. */
export const METADATA_KEY = "__metadata__";

/** One header entry, checked against the file it came from. */
export interface TensorInfo {
  dtype: DType;
  shape: number[];
  /** [begin, end) in bytes, relative to the start of the data buffer. */
  data_offsets: [number, number];
}

/** A parsed, validated header. */
export interface SafetensorsHeader {
  /** Entries in data-offset order (the order of the bytes in the file). */
  tensors: Map<string, TensorInfo>;
  /** `__metadata__`, or {} when absent. */
  metadata: Record<string, string>;
  /** N, the JSON header length in bytes (padding included). */
  header_size: number;
  /** Absolute file offset of the data buffer: 8 + N. */
  data_start: number;
  /** Length of the data buffer in bytes. */
  data_size: number;
}

/** `[safetensors] <source>: <what>: <reason>`; source is the file path when there is one. */
export function formatError(source: string | undefined, what: string, reason: string): LoomFormatError {
  const where = source ? ` ${source}:` : "";
  return new LoomFormatError(`[safetensors]${where} ${what}: ${reason}`);
}

function describe(v: unknown): string {
  if (v === undefined) return "missing";
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return `a ${typeof v}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * Reads and checks the 8-byte little-endian header length.
 * @param prefix - at least the first 8 bytes of the file (fewer is an error)
 * @param file_size - total file size in bytes
 * @returns N, with 2 <= N <= 100,000,000 and 8 + N <= file_size
 * @throws LoomFormatError if the file is shorter than 8 bytes or N is out of bounds
 */
export function readHeaderSize(prefix: Uint8Array, file_size: number, source?: string): number {
  if (prefix.length < 8 || file_size < 8) {
    throw formatError(source, "file", `${file_size} bytes is too small: a safetensors file starts with an 8-byte header length`);
  }
  const view = new DataView(prefix.buffer, prefix.byteOffset, 8);
  const n = view.getBigUint64(0, true);
  if (n > BigInt(MAX_HEADER_SIZE)) {
    throw formatError(source, "header", `header length ${n} exceeds the maximum of ${MAX_HEADER_SIZE} bytes`);
  }
  const size = Number(n);
  if (size < MIN_HEADER_SIZE) {
    throw formatError(source, "header", `header length ${size} is too small (at least ${MIN_HEADER_SIZE}, "{}")`);
  }
  if (size > file_size - 8) {
    throw formatError(source, "header", `header length ${size} exceeds the ${file_size - 8} bytes after the length field (file size ${file_size}); the file may be truncated`);
  }
  return size;
}

/**
 * Parses and validates the JSON header of an untrusted file.
 * @param header_bytes - exactly the N header bytes (file bytes [8, 8 + N))
 * @param file_size - total file size; the data buffer is file_size - 8 - N bytes
 * @returns the header with entries in offset order
 * @throws LoomFormatError naming the source, the tensor and the reason for: invalid UTF-8,
 *   invalid JSON, a repeated key at any level (a tensor name, a field of an entry, a metadata
 *   key: JSON.parse would silently keep the last one), a non-object header, a bad `__metadata__`, an unknown or unsupported dtype, a
 *   bad shape, bad or out-of-bounds offsets, a size that disagrees with dtype and shape, and
 *   offsets that overlap, leave a gap, or do not cover the data buffer.
 */
export function parseHeader(header_bytes: Uint8Array, file_size: number, source?: string): SafetensorsHeader {
  const header_size = header_bytes.length;
  const data_start = 8 + header_size;
  const data_size = file_size - data_start;
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(header_bytes);
  } catch {
    throw formatError(source, "header", "is not valid UTF-8");
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw formatError(source, "header", `is not valid JSON (${(e as Error).message})`);
  }
  checkDuplicates(text, source);
  if (!isObject(json)) throw formatError(source, "header", `JSON is ${describe(json)}, expected an object`);

  const metadata = parseMetadata(json[METADATA_KEY], source);
  const entries: [string, TensorInfo][] = [];
  for (const name of Object.keys(json)) {
    if (name === METADATA_KEY) continue;
    entries.push([name, parseEntry(name, json[name], data_size, source)]);
  }
  entries.sort(([, a], [, b]) => a.data_offsets[0] - b.data_offsets[0] || a.data_offsets[1] - b.data_offsets[1]);
  checkTiling(entries, data_size, source);
  return { tensors: new Map(entries), metadata, header_size, data_start, data_size };
}

// serde rejects a repeated field of an entry; a repeated tensor name is rejected too (the
// reference keeps the last and then fails on the hole the first one's bytes leave).
function checkDuplicates(text: string, source?: string): void {
  const dup = findDuplicateKey(text);
  if (dup === null) return;
  const { key, path } = dup;
  const name = (k: string | number) => (k === METADATA_KEY ? METADATA_KEY : `tensor ${JSON.stringify(k)}`);
  if (path.length === 0) throw formatError(source, name(key), "appears twice in the header; every key must be unique");
  if (path.length === 1) throw formatError(source, name(path[0]!), `duplicate ${path[0] === METADATA_KEY ? "key" : "field"} ${JSON.stringify(key)}`);
  throw formatError(source, "header", `duplicate key ${JSON.stringify(key)} in ${formatJsonPath(path)}`);
}

function parseMetadata(raw: unknown, source?: string): Record<string, string> {
  if (raw === undefined || raw === null) return {};
  if (!isObject(raw)) throw formatError(source, METADATA_KEY, `is ${describe(raw)}, expected an object of strings`);
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v !== "string") throw formatError(source, METADATA_KEY, `value of key ${JSON.stringify(k)} is ${describe(v)}, expected a string`);
  }
  // fromEntries defines own properties, so a key like "__proto__" survives as data.
  return Object.fromEntries(Object.entries(raw)) as Record<string, string>;
}

function parseEntry(name: string, raw: unknown, data_size: number, source?: string): TensorInfo {
  const what = `tensor ${JSON.stringify(name)}`;
  if (!isObject(raw)) throw formatError(source, what, `entry is ${describe(raw)}, expected an object with dtype, shape and data_offsets`);
  const st = raw.dtype;
  if (typeof st !== "string") throw formatError(source, what, `dtype is ${describe(st)}, expected a string`);
  if (UNSUPPORTED.has(st)) throw formatError(source, what, `dtype ${st} is not supported by Loom (supported: ${Object.keys(SAFETENSORS_TO_DTYPE).join(", ")})`);
  if (!Object.hasOwn(SAFETENSORS_TO_DTYPE, st)) throw formatError(source, what, `unknown dtype ${JSON.stringify(st)} (expected one of ${Object.keys(SAFETENSORS_TO_DTYPE).join(", ")})`);
  const sdtype = st as SafetensorsDtype;

  const shape = raw.shape;
  if (!Array.isArray(shape)) throw formatError(source, what, `shape is ${describe(shape)}, expected an array of non-negative integers`);
  let numel = 1;
  for (let i = 0; i < shape.length; i++) {
    const d: unknown = shape[i];
    if (typeof d !== "number" || !Number.isSafeInteger(d) || d < 0) {
      throw formatError(source, what, `shape dim ${i} is ${JSON.stringify(d)}, expected a non-negative integer`);
    }
    numel *= d;
    if (numel > Number.MAX_SAFE_INTEGER) throw formatError(source, what, `shape ${fmtShape(shape as number[])} overflows: the element count exceeds 2^53 - 1`);
  }
  const nbytes = numel * FILE_ITEMSIZE[sdtype];
  if (nbytes > Number.MAX_SAFE_INTEGER) throw formatError(source, what, `shape ${fmtShape(shape as number[])} of ${sdtype} overflows: the byte size exceeds 2^53 - 1`);

  const off = raw.data_offsets;
  if (!Array.isArray(off) || off.length !== 2 || !off.every((x) => typeof x === "number" && Number.isSafeInteger(x) && x >= 0)) {
    throw formatError(source, what, `data_offsets ${JSON.stringify(off)} must be two non-negative integers [begin, end]`);
  }
  const [begin, end] = off as [number, number];
  if (begin > end) throw formatError(source, what, `data_offsets [${begin}, ${end}]: begin > end`);
  if (end > data_size) throw formatError(source, what, `data_offsets [${begin}, ${end}] run past the end of the ${data_size}-byte data buffer`);
  if (end - begin !== nbytes) {
    throw formatError(source, what, `data_offsets [${begin}, ${end}] hold ${end - begin} bytes but ${sdtype} ${fmtShape(shape as number[])} needs ${nbytes}`);
  }
  return { dtype: SAFETENSORS_TO_DTYPE[sdtype], shape: (shape as number[]).slice(), data_offsets: [begin, end] };
}

// Sorted entries must tile [0, data_size) exactly: each begins where the previous one ended.
function checkTiling(sorted: [string, TensorInfo][], data_size: number, source?: string): void {
  let expected = 0;
  let prev: string | null = null;
  for (const [name, info] of sorted) {
    const [begin, end] = info.data_offsets;
    const what = `tensor ${JSON.stringify(name)}`;
    if (begin < expected) {
      throw formatError(source, what, `data_offsets [${begin}, ${end}] overlap tensor ${JSON.stringify(prev)}, which ends at ${expected}`);
    }
    if (begin > expected) {
      const after = prev === null ? "the start of the data buffer" : `tensor ${JSON.stringify(prev)} (ends at ${expected})`;
      throw formatError(source, what, `data_offsets [${begin}, ${end}] leave a gap of ${begin - expected} bytes after ${after}`);
    }
    expected = end;
    prev = name;
  }
  if (expected !== data_size) {
    throw formatError(source, "data", `${data_size - expected} trailing bytes after the last tensor are not covered by any data_offsets (data buffer is ${data_size} bytes)`);
  }
}

/** Code-point (= UTF-8 byte) order, the order of Rust's `str::cmp` used by the reference writer. */
export function compareNames(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

/** An entry to be written: dtype, shape and byte length. */
export interface HeaderEntry {
  name: string;
  dtype: DType;
  shape: readonly number[];
  nbytes: number;
}

/**
 * Orders entries the way the reference writer does (descending dtype alignment, then name) and
 * assigns contiguous data_offsets.
 * @returns the entries in write order with their [begin, end) offsets, and the data size
 */
export function layoutEntries<E extends HeaderEntry>(entries: readonly E[]): { order: (E & { begin: number; end: number })[]; data_size: number } {
  const sorted = entries.slice().sort((a, b) =>
    WRITE_RANK[DTYPE_TO_SAFETENSORS[b.dtype]] - WRITE_RANK[DTYPE_TO_SAFETENSORS[a.dtype]] || compareNames(a.name, b.name));
  let offset = 0;
  const order = sorted.map((e) => {
    const begin = offset;
    offset += e.nbytes;
    return { ...e, begin, end: offset };
  });
  return { order, data_size: offset };
}

/**
 * Serializes a header: `{"__metadata__":{...},"<name>":{"dtype":..,"shape":[..],"data_offsets":[b,e]},...}`
 * in the given order, compact JSON, space-padded to a multiple of 8 bytes (so data starts 8-aligned).
 * Keys are written by hand, not via an object, because JS objects move integer-like keys first.
 * @param metadata - omitted from the header when empty
 * @throws LoomValueError if a metadata value is not a string, a tensor is named `__metadata__`,
 *   or the header would exceed MAX_HEADER_SIZE
 */
export function serializeHeader(
  order: readonly (HeaderEntry & { begin: number; end: number })[],
  metadata: Readonly<Record<string, string>> = {},
): Uint8Array {
  const parts: string[] = [];
  const metaKeys = Object.keys(metadata).sort(compareNames);
  if (metaKeys.length > 0) {
    const kv = metaKeys.map((k) => {
      const v: unknown = metadata[k];
      if (typeof v !== "string") throw new LoomValueError(`[safetensors.save] metadata value of key ${JSON.stringify(k)} is ${describe(v)}, expected a string`);
      return `${JSON.stringify(k)}:${JSON.stringify(v)}`;
    });
    parts.push(`${JSON.stringify(METADATA_KEY)}:{${kv.join(",")}}`);
  }
  for (const e of order) {
    if (e.name === METADATA_KEY) throw new LoomValueError(`[safetensors.save] a tensor cannot be named ${METADATA_KEY}, the key reserved for metadata`);
    parts.push(`${JSON.stringify(e.name)}:{"dtype":"${DTYPE_TO_SAFETENSORS[e.dtype]}","shape":[${e.shape.join(",")}],"data_offsets":[${e.begin},${e.end}]}`);
  }
  const json = new TextEncoder().encode(`{${parts.join(",")}}`);
  if (json.length > MAX_HEADER_SIZE) {
    throw new LoomValueError(`[safetensors.save] header of ${json.length} bytes exceeds the ${MAX_HEADER_SIZE}-byte limit readers enforce (${order.length} tensors)`);
  }
  const padded = new Uint8Array(Math.ceil(json.length / 8) * 8).fill(0x20);
  padded.set(json);
  return padded;
}

/** The 8-byte little-endian length prefix for a header of `n` bytes. */
export function headerSizePrefix(n: number): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(n), true);
  return out;
}
