/**
 * safetensors <-> typed arrays.
 *
 * - `load(bytes)` / `save(tensors, metadata)`: in memory.
 * - `load_file(path)` / `save_file(tensors, path, metadata)`: on disk. Reading maps the file
 *   (`Bun.mmap` through src/runtime/files.ts, MAP_PRIVATE, so writes to a loaded array never reach the file) and returns
 *   typed-array views on the mapping when the data is aligned; it copies only when it must:
 *   misaligned data, and I64 (Loom keeps int64 as integer values in a Float64Array).
 * - `safe_open(path)`: header now, each tensor on demand.
 * - `read_header(bytes)` / `read_header_file(path)`: names, dtypes and shapes without the data;
 *   the file variant reads only the first 8 + N bytes.
 *
 * Every file is treated as untrusted: see `parseHeader` for what is checked. Names follow the
 * safetensors Python package (safetensors.torch.load / save / load_file / save_file / safe_open).
 * Source: the safetensors spec, huggingface/safetensors README "Format" and safetensors/src/tensor.rs.
 */
import { closeSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import type { DType, TypedArray } from "../tensor/dtype.ts";
import { LoomFormatError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import {
  DTYPE_TO_SAFETENSORS, FILE_ITEMSIZE, type HeaderEntry, type SafetensorsHeader, type TensorInfo,
  formatError, headerSizePrefix, layoutEntries, parseHeader, readHeaderSize, serializeHeader,
} from "./safetensors_header.ts";
import { openRegularFile, readAt } from "./files.ts";
import { map_private } from "./mmap.ts";

/** A tensor as loaded: Loom dtype, shape, and its storage array (see src/tensor/dtype.ts). */
export interface TensorData {
  dtype: DType;
  shape: number[];
  data: TypedArray;
}

/** Anything with a dtype, a shape and a storage array of the matching class can be saved. */
export interface TensorLike {
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly data: TypedArray;
}

/** Named tensors to save: a plain record or a Map (a Map keeps names like "__proto__" safe). */
export type TensorDict = Readonly<Record<string, TensorLike>> | ReadonlyMap<string, TensorLike>;

/** The contents of a safetensors file. */
export interface Safetensors {
  /** In data-offset order. */
  tensors: Map<string, TensorData>;
  /** `__metadata__`, or {} when absent. */
  metadata: Record<string, string>;
}

export interface LoadOptions {
  /**
   * Always copy into fresh arrays. Default false: aligned data is returned as views that alias
   * the input bytes (for `load`) or the private file mapping (for `load_file`).
   */
  copy?: boolean;
}

type ArrayCtor =
  | Float32ArrayConstructor | Float64ArrayConstructor | Uint16ArrayConstructor
  | Int32ArrayConstructor | Int8ArrayConstructor | Uint8ArrayConstructor;

// Storage class per dtype, as in src/tensor/dtype.ts allocArray.
const STORAGE: Readonly<Record<DType, ArrayCtor>> = {
  float32: Float32Array, float64: Float64Array, int64: Float64Array, float16: Uint16Array,
  bfloat16: Uint16Array, int32: Int32Array, int8: Int8Array, uint8: Uint8Array, bool: Uint8Array,
};

// The format is little-endian; typed-array views are only correct on a little-endian host.
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
function assertLittleEndian(): void {
  if (!LITTLE_ENDIAN) throw new LoomFormatError("[safetensors] big-endian hosts are not supported");
}

const TWO_32 = 4294967296;
const INT64_LIMIT_HI = 0x200000; // 2^53 = 0x200000 * 2^32

// ---- reading --------------------------------------------------------------------------------

/**
 * I64 bytes -> Float64Array of the same integers.
 * @throws LoomFormatError naming the tensor and element if |v| > 2^53, the range where every
 *   integer is exact in a float64 (Loom's int64 storage).
 */
function decodeInt64(bytes: Uint8Array, numel: number, name: string, source?: string): Float64Array {
  let words: Int32Array;
  if (bytes.byteOffset % 4 === 0) {
    words = new Int32Array(bytes.buffer, bytes.byteOffset, numel * 2);
  } else {
    const aligned = new Uint8Array(numel * 8);
    aligned.set(bytes);
    words = new Int32Array(aligned.buffer);
  }
  const out = new Float64Array(numel);
  for (let i = 0; i < numel; i++) {
    const lo = words[2 * i]! >>> 0;
    const hi = words[2 * i + 1]!;
    if (hi > INT64_LIMIT_HI || hi < -INT64_LIMIT_HI || (hi === INT64_LIMIT_HI && lo !== 0)) {
      const exact = (BigInt(hi) << 32n) + BigInt(lo);
      throw formatError(source, `tensor ${JSON.stringify(name)}`, `I64 element ${i} is ${exact}, outside ±2^53: Loom stores int64 as float64 and cannot hold it exactly`);
    }
    out[i] = hi * TWO_32 + lo;
  }
  return out;
}

function checkBool(a: Uint8Array, name: string, source?: string): void {
  for (let i = 0; i < a.length; i++) {
    if (a[i]! > 1) throw formatError(source, `tensor ${JSON.stringify(name)}`, `BOOL element ${i} is byte ${a[i]}, expected 0 or 1`);
  }
}

function numelOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * The storage array for one validated header entry of `file` (the whole file's bytes).
 * A view when aligned and `copy` is false; else a copy. Never reads outside the entry's range.
 */
function extract(file: Uint8Array, header: SafetensorsHeader, name: string, info: TensorInfo, copy: boolean, source?: string): TypedArray {
  const start = header.data_start + info.data_offsets[0];
  const end = header.data_start + info.data_offsets[1];
  const numel = numelOf(info.shape);
  const bytes = file.subarray(start, end);
  if (bytes.length !== end - start) throw formatError(source, `tensor ${JSON.stringify(name)}`, "data lies outside the buffer");
  if (info.dtype === "int64") return decodeInt64(bytes, numel, name, source);
  const Ctor = STORAGE[info.dtype];
  let out: TypedArray;
  if (!copy && numel > 0 && bytes.byteOffset % Ctor.BYTES_PER_ELEMENT === 0) {
    out = new Ctor(bytes.buffer as ArrayBuffer, bytes.byteOffset, numel);
  } else {
    out = new Ctor(numel);
    new Uint8Array(out.buffer).set(bytes);
  }
  if (info.dtype === "bool") checkBool(out as Uint8Array, name, source);
  return out;
}

function loadFrom(file: Uint8Array, source: string | undefined, options: LoadOptions): Safetensors {
  assertLittleEndian();
  const header = headerOf(file, source);
  const tensors = new Map<string, TensorData>();
  for (const [name, info] of header.tensors) {
    tensors.set(name, { dtype: info.dtype, shape: info.shape.slice(), data: extract(file, header, name, info, options.copy ?? false, source) });
  }
  return { tensors, metadata: header.metadata };
}

function headerOf(file: Uint8Array, source?: string): SafetensorsHeader {
  const n = readHeaderSize(file, file.length, source);
  return parseHeader(file.subarray(8, 8 + n), file.length, source);
}

/**
 * Parses and validates the header of an in-memory file, without decoding any tensor.
 * @returns entries (dtype, shape, data_offsets) in offset order and `__metadata__`
 * @throws LoomFormatError for any malformed header (see parseHeader)
 */
export function read_header(bytes: Uint8Array): SafetensorsHeader {
  return headerOf(bytes);
}

/**
 * Reads only the header of a file on disk: the first 8 + N bytes; the data is never read.
 * @throws LoomFormatError naming `path` for any malformed header, or for a path that is a
 *   directory, FIFO, socket or device (never opened for a blocking read); fs errors (ENOENT...)
 *   as thrown by node:fs
 */
export function read_header_file(path: string): SafetensorsHeader {
  const { fd, size } = openFile(path);
  try {
    const prefix = readAt(fd, 0, Math.min(8, size));
    const n = readHeaderSize(prefix, size, path);
    return parseHeader(readAt(fd, 8, n), size, path);
  } finally {
    closeSync(fd);
  }
}

// A regular file, opened; anything else is a LoomFormatError naming the path (see files.ts).
function openFile(path: string): { fd: number; size: number } {
  return openRegularFile(path, (reason) => formatError(path, "file", reason));
}

/**
 * Loads every tensor of an in-memory safetensors file.
 * @param bytes - the whole file
 * @returns tensors (float16/bfloat16 as raw bits in Uint16Array, int64 as Float64Array, bool as
 *   Uint8Array of 0/1) in offset order, and the metadata. Aligned data is a view on `bytes`
 *   unless `options.copy`.
 * @throws LoomFormatError for a malformed file, an I64 value beyond ±2^53, or a BOOL byte not 0/1
 */
export function load(bytes: Uint8Array, options: LoadOptions = {}): Safetensors {
  return loadFrom(bytes, undefined, options);
}

/**
 * Maps a regular file read-only-to-disk (MAP_PRIVATE, see mmap.ts: files this process may not
 * write are mapped too); reads it when mmap is unavailable or fails.
 * @throws LoomFormatError naming `path` if it is a directory, FIFO, socket or device
 */
function mapFile(path: string): Uint8Array {
  const { fd, size } = openFile(path);
  try {
    // mmap rejects empty files (EINVAL); anything shorter than the length field is read and rejected.
    return (size >= 8 ? map_private(path, fd, size) : null) ?? readAt(fd, 0, size);
  } finally {
    closeSync(fd);
  }
}

/**
 * Loads every tensor of a file, zero-copy where possible (see module doc).
 * The mapping lives as long as any returned view; replacing the file with `save_file` is safe
 * (it writes a new file and renames), truncating it in place while mapped is not.
 * @throws LoomFormatError naming `path` (see `load`), or for a path that is not a regular file
 *   (a directory, a FIFO...); fs errors as thrown by node:fs
 */
export function load_file(path: string, options: LoadOptions = {}): Safetensors {
  return loadFrom(mapFile(path), path, options);
}

/**
 * A file opened for lazy access: the header is parsed and validated now, each tensor is
 * decoded (and, for I64/BOOL, range-checked) when asked for.
 */
export class SafetensorsFile {
  readonly path: string;
  readonly header: SafetensorsHeader;
  private bytes: Uint8Array | null;

  constructor(path: string, bytes: Uint8Array) {
    assertLittleEndian();
    this.path = path;
    this.bytes = bytes;
    this.header = headerOf(bytes, path);
  }

  /** Tensor names in offset order. */
  keys(): string[] {
    return [...this.header.tensors.keys()];
  }

  /** `__metadata__`, or {} when absent. */
  metadata(): Record<string, string> {
    return this.header.metadata;
  }

  has(name: string): boolean {
    return this.header.tensors.has(name);
  }

  /** dtype, shape and data_offsets of one tensor. @throws LoomValueError if absent */
  info(name: string): TensorInfo {
    const info = this.header.tensors.get(name);
    if (!info) {
      const some = this.keys().slice(0, 5).map((k) => JSON.stringify(k)).join(", ");
      throw new LoomValueError(`[safetensors] ${this.path}: no tensor named ${JSON.stringify(name)} (${this.header.tensors.size} tensors: ${some}${this.header.tensors.size > 5 ? ", ..." : ""})`);
    }
    return info;
  }

  /**
   * One tensor; a view on the mapping when aligned (see LoadOptions).
   * @throws LoomValueError if absent; LoomFormatError for I64 beyond ±2^53 or BOOL bytes not 0/1;
   *   LoomValueError after close()
   */
  get_tensor(name: string, options: LoadOptions = {}): TensorData {
    const info = this.info(name);
    if (!this.bytes) throw new LoomValueError(`[safetensors] ${this.path}: get_tensor(${JSON.stringify(name)}) after close()`);
    return { dtype: info.dtype, shape: info.shape.slice(), data: extract(this.bytes, this.header, name, info, options.copy ?? false, this.path) };
  }

  /** Drops this handle's reference to the mapping (views already returned keep it alive). */
  close(): void {
    this.bytes = null;
  }
}

/**
 * Opens a file for lazy access (safetensors.safe_open).
 * @throws LoomFormatError naming `path` for a malformed header or a path that is not a regular
 *   file; fs errors as thrown by node:fs
 */
export function safe_open(path: string): SafetensorsFile {
  return new SafetensorsFile(path, mapFile(path));
}

// ---- writing --------------------------------------------------------------------------------

interface Prepared extends HeaderEntry {
  bytes: () => Uint8Array;
}

/** The (name, tensor) pairs of a TensorDict, in insertion order. */
export function entriesOf(tensors: TensorDict): [string, TensorLike][] {
  return tensors instanceof Map ? [...tensors.entries()] : Object.entries(tensors as Record<string, TensorLike>);
}

/** Float64Array of integers -> I64 bytes. @throws LoomValueError on a non-integer or |v| > 2^53 */
function encodeInt64(data: Float64Array, name: string): Uint8Array {
  const words = new Int32Array(data.length * 2);
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    if (!Number.isInteger(v) || Math.abs(v) > 2 ** 53) {
      throw new LoomValueError(`[safetensors.save] tensor ${JSON.stringify(name)}: int64 element ${i} is ${v}, expected an integer within ±2^53`);
    }
    const hi = Math.floor(v / TWO_32);
    words[2 * i] = (v - hi * TWO_32) | 0;
    words[2 * i + 1] = hi;
  }
  return new Uint8Array(words.buffer);
}

function rawBytes(a: TypedArray): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** Checks one tensor to save and returns its header entry and a byte producer. */
function prepare(name: string, t: TensorLike): Prepared {
  const what = `[safetensors.save] tensor ${JSON.stringify(name)}`;
  if (typeof t !== "object" || t === null) throw new LoomValueError(`${what}: expected {dtype, shape, data}, got ${t === null ? "null" : typeof t}`);
  const dtype = t.dtype;
  if (typeof dtype !== "string" || !Object.hasOwn(DTYPE_TO_SAFETENSORS, dtype)) {
    throw new LoomValueError(`${what}: unknown dtype ${JSON.stringify(dtype)} (expected one of ${Object.keys(DTYPE_TO_SAFETENSORS).join(", ")})`);
  }
  const shape = t.shape;
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw new LoomValueError(`${what}: shape ${JSON.stringify(shape)} must be an array of non-negative integers`);
  }
  const numel = numelOf(shape);
  const Ctor = STORAGE[dtype];
  if (!(t.data instanceof Ctor)) {
    throw new LoomValueError(`${what}: ${dtype} data must be a ${Ctor.name}, got ${(t.data as object)?.constructor?.name ?? typeof t.data}`);
  }
  if (t.data.length !== numel) {
    throw new LoomValueError(`${what}: shape ${fmtShape(shape)} has ${numel} elements but data has ${t.data.length}`);
  }
  const data = t.data;
  let bytes: () => Uint8Array;
  if (dtype === "int64") bytes = () => encodeInt64(data as Float64Array, name);
  else if (dtype === "bool") bytes = () => ((data as Uint8Array).every((b) => b <= 1) ? rawBytes(data) : (data as Uint8Array).map((b) => (b ? 1 : 0)));
  else bytes = () => rawBytes(data);
  return { name, dtype, shape: shape.slice(), nbytes: numel * FILE_ITEMSIZE[DTYPE_TO_SAFETENSORS[dtype]], bytes };
}

function plan(tensors: TensorDict, metadata?: Readonly<Record<string, string>>) {
  assertLittleEndian();
  const { order, data_size } = layoutEntries(entriesOf(tensors).map(([name, t]) => prepare(name, t)));
  const header = serializeHeader(order, metadata ?? {});
  return { order, data_size, header };
}

/**
 * Serializes tensors to safetensors bytes, byte-identical to the reference writer: tensors
 * ordered by descending dtype alignment then name, header space-padded to 8 bytes.
 * @param tensors - float16/bfloat16 as Uint16Array bits, int64 as Float64Array integers (|v| <= 2^53),
 *   bool as Uint8Array (nonzero is written as 1)
 * @param metadata - string -> string, stored as `__metadata__` (omitted when empty)
 * @throws LoomValueError for an unknown dtype, a bad shape, data of the wrong class or length, a
 *   non-integer or out-of-range int64, a non-string metadata value, or a tensor named `__metadata__`
 */
export function save(tensors: TensorDict, metadata?: Readonly<Record<string, string>>): Uint8Array {
  const { order, data_size, header } = plan(tensors, metadata);
  const out = new Uint8Array(8 + header.length + data_size);
  out.set(headerSizePrefix(header.length), 0);
  out.set(header, 8);
  const data_start = 8 + header.length;
  for (const e of order) out.set(e.bytes(), data_start + e.begin);
  return out;
}

function writeAll(fd: number, bytes: Uint8Array): void {
  const CHUNK = 1 << 30;
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, Math.min(CHUNK, bytes.length - done));
}

/**
 * Writes tensors to `path` (same bytes as `save`), tensor by tensor, without building the whole
 * file in memory. It writes a temporary file beside `path` and renames it over `path`, so a file
 * that is currently memory-mapped by `load_file` is replaced, never truncated under its readers.
 * @throws LoomValueError as `save`; fs errors as thrown by node:fs
 */
export function save_file(tensors: TensorDict, path: string, metadata?: Readonly<Record<string, string>>): void {
  const { order, header } = plan(tensors, metadata);
  const tmp = `${path}.tmp-${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  const fd = openSync(tmp, "w");
  let written = false;
  try {
    writeAll(fd, headerSizePrefix(header.length));
    writeAll(fd, header);
    for (const e of order) writeAll(fd, e.bytes());
    written = true;
  } finally {
    closeSync(fd);
    if (!written) unlinkSync(tmp);
  }
  renameSync(tmp, path);
}
