/** Byte-level builders for safetensors tests, independent of src/io's writer. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A file from a header (object or raw JSON text) and a data buffer, with an optional raw N. */
export function build(header: unknown, data: ArrayLike<number> = [], n?: bigint): Uint8Array {
  const text = typeof header === "string" ? header : JSON.stringify(header);
  const json = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, n ?? BigInt(json.length), true);
  out.set(json, 8);
  out.set(Array.from(data), 8 + json.length);
  return out;
}

/** Little-endian bytes of float32 values. */
export function f32Bytes(values: number[]): number[] {
  return Array.from(new Uint8Array(new Float32Array(values).buffer));
}

/** Little-endian bytes of int64 values (exact, via BigInt). */
export function i64Bytes(values: bigint[]): number[] {
  return Array.from(new Uint8Array(new BigInt64Array(values).buffer));
}

export function tempDir(prefix = "loom-io-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** The error thrown by `fn`, failing the test if nothing is thrown. */
export function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  throw new Error("expected an error, none was thrown");
}
