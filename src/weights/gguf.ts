/**
 * GGUF import (llama.cpp's model format, ggml/docs/gguf.md): F32, F16, Q8_0 and Q4_0 tensors
 * become weight nodes over views of the memory-mapped file (nothing is copied or dequantized).
 *
 * - The header (metadata key/values and tensor infos) is parsed by `@huggingface/gguf`. Its
 *   parser is built for remote files (ranged HTTP fetches); it is given a `fetch` that serves
 *   ranges of the mapped bytes, so the header and the data come from one read of the file. Any
 *   error it raises on a corrupt header becomes a LoomFormatError naming the file.
 * - Every tensor info is then checked here before a view is made: a supported type, a dims
 *   product that is a safe integer, the row length ne[0] a multiple of the block size, the offset
 *   aligned, and the whole block stream inside the file. So a corrupt file never reads out of
 *   bounds: it fails with a typed error naming the tensor and the value.
 *
 * Layout: GGUF dims are reversed (ne[0] is the row length), so ne = [K, N] is the weight [N, K].
 * A Q8_0 / Q4_0 row is K/32 blocks, exactly Quantized's packed layout (quantize.ts), so the node's
 * qweight is the file's bytes.
 */
import { GGMLQuantizationType, gguf } from "@huggingface/gguf";
import { closeSync } from "node:fs";
import { openRegularFile, readAt } from "../io/files.ts";
import { mmapFile } from "../runtime/files.ts";
import { LoomFormatError } from "../tensor/errors.ts";
import { Dense } from "./dense.ts";
import { raw_tensor, type WeightNode } from "./node.ts";
import { Quantized } from "./quantized.ts";

/** The GGML tensor types imported, by their GGUF type id (ggml.h enum ggml_type). */
const SUPPORTED: Readonly<Record<number, { name: string; block: number; bytes: number }>> = {
  [GGMLQuantizationType.F32]: { name: "F32", block: 1, bytes: 4 },
  [GGMLQuantizationType.F16]: { name: "F16", block: 1, bytes: 2 },
  [GGMLQuantizationType.Q8_0]: { name: "Q8_0", block: 32, bytes: 34 },
  [GGMLQuantizationType.Q4_0]: { name: "Q4_0", block: 32, bytes: 18 },
};

/** One tensor as listed in the file. */
export interface GGUFTensorEntry {
  name: string;
  /** Torch order (reversed GGUF ne): [N, K] for a weight. */
  shape: number[];
  /** GGML type name ("Q8_0", ...). */
  type: string;
  /** Absolute byte offset of the tensor data in the file. */
  offset: number;
  nbytes: number;
}

/** A loaded GGUF file. */
export interface GGUFFile {
  path: string;
  version: number;
  /** Header key/values (bigint values as numbers when safe, else as bigint). */
  metadata: Record<string, unknown>;
  tensors: GGUFTensorEntry[];
  /** A weight node per tensor, by name: Quantized for Q8_0/Q4_0, Dense (float32/float16) otherwise. */
  nodes: Map<string, WeightNode>;
}

function fail(path: string, msg: string): LoomFormatError {
  return new LoomFormatError(`[load_gguf] ${path}: ${msg}`);
}

/** The file's bytes: a private read-only mapping where mmap works, else one read. */
function mapFile(path: string): Uint8Array {
  const { fd, size } = openRegularFile(path, (r) => fail(path, r));
  try {
    // null under Deno, in a browser, or on a filesystem without mmap: read instead
    const m = size > 0 ? mmapFile(path) : null;
    if (m !== null && m.length === size) return m;
    return readAt(fd, 0, size);
  } finally {
    closeSync(fd);
  }
}

/** A fetch that answers the parser's Range requests from `bytes`. */
function rangeFetch(bytes: Uint8Array): typeof fetch {
  const f = async (_url: unknown, init?: { headers?: Record<string, string> }) => {
    const m = /bytes=(\d+)-(\d+)/.exec(init?.headers?.Range ?? "");
    const a = m ? Math.min(Number(m[1]), bytes.length) : 0;
    const b = m ? Math.min(Number(m[2]) + 1, bytes.length) : bytes.length;
    return new Response(bytes.slice(a, b), { status: 206, headers: { "content-range": `bytes ${a}-${Math.max(a, b - 1)}/${bytes.length}` } });
  };
  return f as unknown as typeof fetch;
}

function num(v: bigint | number, what: () => string): number {
  const n = typeof v === "bigint" ? Number(v) : v;
  if (!Number.isSafeInteger(n) || n < 0) throw new LoomFormatError(`${what()} is ${String(v)}, not a non-negative safe integer`);
  return n;
}

/**
 * Load a GGUF file's header and make a weight node per tensor (views of the mapping).
 * @throws LoomFormatError naming the file (and the tensor and value where one is at fault) for a
 *   corrupt header, an unsupported or unknown tensor type, a row length that is not a multiple of
 *   the block size, a misaligned offset, or a block stream that runs past the end of the file
 */
export async function load_gguf(path: string): Promise<GGUFFile> {
  return load_gguf_bytes(mapFile(path), path);
}

/**
 * `load_gguf` on bytes already in memory (the nodes view `bytes`).
 * @param path - the name errors give
 */
export async function load_gguf_bytes(bytes: Uint8Array, path = "<bytes>"): Promise<GGUFFile> {
  let header: Awaited<ReturnType<typeof gguf>>;
  try {
    header = await gguf("https://loom.invalid/file.gguf", { fetch: rangeFetch(bytes) });
  } catch (e) {
    throw fail(path, `corrupt GGUF header: ${(e as Error).message}`);
  }
  const { metadata: rawMeta, tensorInfos } = header;
  if (!header.littleEndian) throw fail(path, "big-endian GGUF files are not supported");
  const metadata: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(rawMeta)) metadata[k] = typeof v === "bigint" && Number.isSafeInteger(Number(v)) ? Number(v) : v;
  const align = metadata["general.alignment"] ?? 32;
  if (typeof align !== "number" || !Number.isInteger(align) || align <= 0 || (align & (align - 1)) !== 0) {
    throw fail(path, `general.alignment must be a power of two, got ${String(align)}`);
  }
  const dataStart = num(header.tensorDataOffset, () => `${path}: tensor data offset`);
  if (dataStart > bytes.length) throw fail(path, `tensor data starts at byte ${dataStart}, past the end of the file (${bytes.length} bytes)`);

  const tensors: GGUFTensorEntry[] = [];
  const nodes = new Map<string, WeightNode>();
  for (const info of tensorInfos) {
    const name = info.name;
    const where = (s: string) => `[load_gguf] ${path}: tensor "${name}": ${s}`;
    const bad = (s: string) => new LoomFormatError(where(s));
    const t = SUPPORTED[info.dtype];
    if (!t) {
      const known = (GGMLQuantizationType as unknown as Record<number, string>)[info.dtype];
      throw bad(known ? `unsupported GGML type ${known} (${info.dtype}); supported: F32, F16, Q8_0, Q4_0` : `unknown GGML type ${info.dtype}`);
    }
    if (nodes.has(name)) throw bad("appears twice");
    if (info.shape.length < 1 || info.shape.length > 4) throw bad(`has ${info.shape.length} dims (GGML allows 1 to 4)`);
    const ne = info.shape.map((d, i) => num(d, () => where(`ne[${i}]`)));
    const count = ne.reduce((a, b) => a * b, 1);
    if (!Number.isSafeInteger(count)) throw bad(`element count ${ne.join(" × ")} is too large`);
    if (ne[0]! % t.block !== 0) throw bad(`block-size mismatch: row length ne[0] = ${ne[0]} is not a multiple of the ${t.name} block size ${t.block}`);
    const nbytes = (count / t.block) * t.bytes;
    const rel = num(info.offset, () => where("offset"));
    if (rel % align !== 0) throw bad(`offset ${rel} is not a multiple of the alignment ${align}`);
    const start = dataStart + rel;
    if (start + nbytes > bytes.length) {
      throw bad(`truncated block stream: needs bytes [${start}, ${start + nbytes}) (${nbytes} bytes of ${t.name}) but the file has ${bytes.length}`);
    }
    const shape = [...ne].reverse();
    const slice = bytes.subarray(start, start + nbytes);
    let node: WeightNode;
    if (t.block === 32) {
      if (shape.length !== 2) throw bad(`${t.name} tensors are imported as 2-D weights [N, K], got ${shape.length} dims`);
      const fmt = t.name === "Q8_0" ? "q8_0" : "q4_0";
      const q = raw_tensor("uint8", [shape[0]!, nbytes / shape[0]!], slice);
      node = new Quantized(fmt, shape, q, null, name);
    } else {
      const aligned = (slice.byteOffset % t.bytes) === 0; // a view needs element alignment; else copy
      const buf = aligned ? slice : slice.slice();
      const data = t.name === "F32" ? new Float32Array(buf.buffer, buf.byteOffset, count) : new Uint16Array(buf.buffer, buf.byteOffset, count);
      node = new Dense(raw_tensor(t.name === "F32" ? "float32" : "float16", shape, data));
    }
    nodes.set(name, node);
    tensors.push({ name, shape, type: t.name, offset: start, nbytes });
  }
  return { path, version: Number(rawMeta.version), metadata, tensors, nodes };
}
