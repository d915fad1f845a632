/**
 * Weight graphs in safetensors files: every piece is a named tensor, and the graphs are JSON in
 * `__metadata__["loom.weights"]`:
 *   {"format": "loom.weights", "version": 1, "weights": {"<name>": <WeightJSON>, ...}}
 * (node.ts WeightJSON: kind, shape, dtype, attrs, pieces → tensor keys, children). Loading
 * rebuilds the graphs over the loaded pieces (views of the mapped file where aligned) without
 * materializing any dense weight. A round trip is exact: same kinds, attrs and piece bytes.
 */
import { load, load_file, save, save_file, type Safetensors, type TensorLike } from "../io/safetensors.ts";
import type { Module } from "../nn/module.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomFormatError, LoomValueError } from "../tensor/errors.ts";
import { contiguousStrides } from "../tensor/shape.ts";
import { toContiguous } from "../tensor/storage.ts";
import { CompressedLinear } from "./linear.ts";
import { type WeightJSON, WeightNode, weight_from_json } from "./node.ts";

export const WEIGHTS_METADATA_KEY = "loom.weights";

function toIo(t: Tensor): TensorLike {
  const e = t.device === "cpu" ? t : t.to("cpu");
  const d = toContiguous(e._d);
  return { dtype: d.dtype, shape: d.shape, data: d.data };
}

function fromIo(t: { dtype: Tensor["dtype"]; shape: number[]; data: Tensor["_d"]["data"] }): Tensor {
  return new Tensor({ dtype: t.dtype, shape: t.shape.slice(), strides: contiguousStrides(t.shape), offset: 0, data: t.data });
}

/** Named weight nodes, or a module (its CompressedLinear weights, keyed `<path>.weight`). */
export type WeightsSource = Readonly<Record<string, WeightNode>> | Module;

/** The CompressedLinear weights of a module by `<module path>.weight`. */
export function model_weights(model: Module): Record<string, WeightNode> {
  const out: Record<string, WeightNode> = {};
  for (const [p, m] of model.named_modules()) if (m instanceof CompressedLinear) out[p ? `${p}.weight` : "weight"] = m.weight;
  return out;
}

function collect(src: WeightsSource, extra: Readonly<Record<string, string>>): { tensors: Map<string, TensorLike>; metadata: Record<string, string> } {
  const nodes = src instanceof WeightNode ? { weight: src } : "named_modules" in src ? model_weights(src as Module) : src;
  const pieces = new Map<string, Tensor>();
  const graphs: Record<string, WeightJSON> = {};
  for (const [name, n] of Object.entries(nodes)) {
    if (!(n instanceof WeightNode)) throw new LoomValueError(`[save_weights] "${name}" is not a weight node`);
    graphs[name] = n.to_json(name, pieces).graph;
  }
  if (WEIGHTS_METADATA_KEY in extra) throw new LoomValueError(`[save_weights] metadata key "${WEIGHTS_METADATA_KEY}" is reserved`);
  const tensors = new Map<string, TensorLike>();
  for (const [k, t] of pieces) tensors.set(k, toIo(t));
  return { tensors, metadata: { ...extra, [WEIGHTS_METADATA_KEY]: JSON.stringify({ format: "loom.weights", version: 1, weights: graphs }) } };
}

/** Serialize weight graphs to safetensors bytes. */
export function save_weights(src: WeightsSource, metadata: Readonly<Record<string, string>> = {}): Uint8Array {
  const c = collect(src, metadata);
  return save(c.tensors, c.metadata);
}

/** Write weight graphs to a safetensors file (written to a temporary name, then renamed). */
export function save_weights_file(src: WeightsSource, path: string, metadata: Readonly<Record<string, string>> = {}): void {
  const c = collect(src, metadata);
  save_file(c.tensors, path, c.metadata);
}

function rebuild(st: Safetensors, where: string): Record<string, WeightNode> {
  const raw = st.metadata[WEIGHTS_METADATA_KEY];
  if (raw === undefined) throw new LoomFormatError(`[load_weights] ${where}: no "${WEIGHTS_METADATA_KEY}" entry in __metadata__ (not a weights file)`);
  let doc: unknown;
  try {
    doc = JSON.parse(raw);
  } catch (e) {
    throw new LoomFormatError(`[load_weights] ${where}: "${WEIGHTS_METADATA_KEY}" is not JSON: ${(e as Error).message}`);
  }
  const d = doc as { format?: unknown; version?: unknown; weights?: unknown };
  if (d === null || typeof d !== "object" || d.format !== "loom.weights" || d.version !== 1 || d.weights === null || typeof d.weights !== "object" || Array.isArray(d.weights)) {
    throw new LoomFormatError(`[load_weights] ${where}: expected {"format": "loom.weights", "version": 1, "weights": {...}}`);
  }
  const tensors = new Map<string, Tensor>();
  const get = (k: string) => {
    let t = tensors.get(k);
    if (!t) {
      const io = st.tensors.get(k);
      if (!io) return undefined;
      t = fromIo(io);
      tensors.set(k, t); // a piece shared by two nodes stays one tensor
    }
    return t;
  };
  const out: Record<string, WeightNode> = {};
  for (const [name, g] of Object.entries(d.weights as Record<string, unknown>)) out[name] = weight_from_json(g, get, `${where}: ${name}`);
  return out;
}

/**
 * Rebuild the weight graphs of safetensors bytes (pieces alias `bytes` where aligned).
 * @throws LoomFormatError for a file that is not a weights file, or a malformed graph
 */
export function load_weights(bytes: Uint8Array): Record<string, WeightNode> {
  return rebuild(load(bytes), "<bytes>");
}

/** Rebuild the weight graphs of a file (pieces are views of its private mapping). */
export function load_weights_file(path: string): Record<string, WeightNode> {
  return rebuild(load_file(path), path);
}

/**
 * Put loaded nodes into a module's CompressedLinear layers by `<path>.weight`.
 * @returns the names that matched no CompressedLinear, and the layers no name matched
 * @throws LoomValueError if a node's shape differs from its layer's
 */
export function load_model_weights(model: Module, nodes: Readonly<Record<string, WeightNode>>): { missing_keys: string[]; unexpected_keys: string[] } {
  const layers = new Map<string, CompressedLinear>();
  for (const [p, m] of model.named_modules()) if (m instanceof CompressedLinear) layers.set(p ? `${p}.weight` : "weight", m);
  const unexpected: string[] = [];
  for (const [k, n] of Object.entries(nodes)) {
    const l = layers.get(k);
    if (!l) { unexpected.push(k); continue; }
    if (n.shape[0] !== l.out_features || n.shape[1] !== l.in_features) {
      throw new LoomValueError(`[load_model_weights] ${k}: node [${n.shape.join(", ")}] does not fit the layer [${l.out_features}, ${l.in_features}]`);
    }
    l.weight = n;
  }
  return { missing_keys: [...layers.keys()].filter((k) => !(k in nodes)), unexpected_keys: unexpected };
}
