/**
 * Checkpoints of nested objects of tensors (torch.save / torch.load): a model's and an
 * optimizer's `state_dict`, a scheduler's state, step counters, the random generator's state.
 *
 * Stored as ONE safetensors file (never executable code, unlike pickle): the tensors under the
 * names "0", "1"... and the object tree as JSON in the header metadata (`loom.tree`), where each
 * node is a JSON string, boolean, null or number, an array of nodes, or an object with one tag:
 *   {"$tensor": name, "requires_grad"?: true} · {"$dict": {key: node}} · {"$map": [[key, node]...]}
 *   · {"$number": "NaN" | "Infinity" | "-Infinity" | "-0"} · {"$undefined": true}
 *   · {"$bytes": name} (a Uint8Array such as Generator.get_state(), stored as a 1-D uint8 tensor)
 * A tensor object that appears twice is stored once and loads as one tensor (torch keeps such
 * sharing too); distinct tensors that view one storage are stored, and load, separately.
 * Loading validates the file as untrusted input: the safetensors header and data (io), then the
 * tree (every tag, every tensor name, the depth); anything else raises LoomFormatError.
 */
import { load_file, save_file, type TensorData as StoredTensor } from "../io/safetensors.ts";
import { LoomFormatError, LoomValueError } from "../tensor/errors.ts";
import { default_generator, type Generator } from "../tensor/rng.ts";
import { contiguousStrides } from "../tensor/shape.ts";
import { toContiguous, type TensorData } from "../tensor/storage.ts";
import { LazyTensor } from "./lazy_tensor.ts";
import { Tensor } from "./tensor.ts";

const FORMAT = "loom";
/** Deepest object tree a file may hold (a guard against a crafted, deeply nested header). */
const MAX_DEPTH = 256;

type Node = null | boolean | string | number | Node[] | { [tag: string]: unknown };

/**
 * Write `obj` to `path` (torch.save): plain objects, arrays, Maps with string or number keys,
 * tensors (eager, or lazy: computed first), Uint8Arrays (loaded back as Uint8Arrays, e.g.
 * `Generator.get_state()`), numbers, strings, booleans, null and undefined.
 * @throws LoomValueError naming the path inside `obj` of a value that cannot be stored (a
 *   function, a class instance other than a tensor or Map, a bigint, a cycle)
 */
export function save(obj: unknown, path: string): void {
  const tensors = new Map<string, { dtype: TensorData["dtype"]; shape: readonly number[]; data: TensorData["data"] }>();
  const names = new Map<object, string>();
  const open = new Set<object>();
  const encode = (v: unknown, at: string): Node => {
    if (v === null || typeof v === "boolean" || typeof v === "string") return v;
    if (v === undefined) return { $undefined: true };
    if (typeof v === "number") {
      if (Number.isNaN(v)) return { $number: "NaN" };
      if (!Number.isFinite(v)) return { $number: v > 0 ? "Infinity" : "-Infinity" };
      return Object.is(v, -0) ? { $number: "-0" } : v;
    }
    if (v instanceof Tensor || v instanceof LazyTensor) {
      let name = names.get(v);
      if (name === undefined) {
        const t = v instanceof LazyTensor ? v.eval() : v;
        const host = t.device === "cpu" ? t : t.to("cpu");
        const d = toContiguous(host._d);
        name = String(tensors.size);
        tensors.set(name, { dtype: d.dtype, shape: d.shape, data: d.data });
        names.set(v, name);
      }
      return v.requires_grad ? { $tensor: name, requires_grad: true } : { $tensor: name };
    }
    if (v instanceof Uint8Array) {
      let name = names.get(v);
      if (name === undefined) {
        name = String(tensors.size);
        tensors.set(name, { dtype: "uint8", shape: [v.length], data: v.slice() }); // a copy: v may view a larger buffer
        names.set(v, name);
      }
      return { $bytes: name };
    }
    if (typeof v !== "object") throw new LoomValueError(`[save] ${at}: cannot save a value of type ${typeof v}`);
    if (open.has(v)) throw new LoomValueError(`[save] ${at}: the object contains itself (a cycle)`);
    open.add(v);
    let out: Node;
    if (Array.isArray(v)) out = v.map((x, i) => encode(x, `${at}[${i}]`));
    else if (v instanceof Map) {
      out = { $map: [...v].map(([k, x]) => {
        if (typeof k !== "string" && typeof k !== "number") throw new LoomValueError(`[save] ${at}: a Map key of type ${typeof k} cannot be saved (string or number keys only)`);
        return [k, encode(x, `${at}.get(${JSON.stringify(k)})`)];
      }) };
    } else {
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) throw new LoomValueError(`[save] ${at}: cannot save an instance of ${proto?.constructor?.name ?? "a class"} (plain objects, arrays, Maps and tensors only)`);
      const dict: Record<string, Node> = {};
      for (const k of Object.keys(v)) define(dict, k, encode((v as Record<string, unknown>)[k], `${at}.${k}`));
      out = { $dict: dict };
    }
    open.delete(v);
    return out;
  };
  const tree = encode(obj, "obj");
  save_file(tensors, path, { format: FORMAT, "loom.tree": JSON.stringify(tree) });
}

/** Set an own property, also for the key "__proto__" (an assignment would change the prototype). */
function define(o: object, k: string, v: unknown): void {
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

/**
 * Read a file written by `save` (torch.load; only data, never code).
 * @param opts.map_location - device for the tensors (default "cpu")
 * @typeParam T - the saved object's type, as the caller knows it (`load<Checkpoint>(path)`); not
 *   checked at run time
 * @returns the object as saved: tensors as eager Tensors (requires_grad as saved), Uint8Arrays as
 *   Uint8Arrays
 * @throws LoomFormatError for a file that is not a Loom checkpoint or whose tree is malformed
 *   (naming the place in it); the safetensors reader's errors for a malformed file
 */
export function load<T = any>(path: string, opts: { map_location?: string } = {}): T {
  const st = load_file(path, { copy: true });
  const fail = (msg: string) => new LoomFormatError(`[load] ${path}: ${msg}`);
  if (st.metadata.format !== FORMAT || typeof st.metadata["loom.tree"] !== "string") throw fail("not a Loom checkpoint (no loom.tree in the safetensors metadata)");
  let tree: unknown;
  try {
    tree = JSON.parse(st.metadata["loom.tree"]);
  } catch (e) {
    throw fail(`the object tree is not valid JSON (${(e as Error).message})`);
  }
  const made = new Map<string, Tensor>();
  const bytes = new Map<string, Uint8Array>();
  const device = opts.map_location ?? "cpu";
  const decode = (n: unknown, at: string, depth: number): unknown => {
    if (depth > MAX_DEPTH) throw fail(`${at}: nested deeper than ${MAX_DEPTH}`);
    if (n === null || typeof n === "boolean" || typeof n === "string" || typeof n === "number") return n;
    if (Array.isArray(n)) return n.map((x, i) => decode(x, `${at}[${i}]`, depth + 1));
    if (typeof n !== "object") throw fail(`${at}: unexpected ${typeof n}`);
    const o = n as Record<string, unknown>;
    /** The stored tensor a `$tensor` / `$bytes` node names. */
    const stored = (name: unknown, what: string): [string, StoredTensor] => {
      if (typeof name !== "string" || !st.tensors.has(name)) throw fail(`${at}: ${what} ${JSON.stringify(name)} ${what === "bytes" ? "are" : "is"} not in the file`);
      return [name, st.tensors.get(name)!];
    };
    if ("$tensor" in o) {
      const [name, d] = stored(o.$tensor, "tensor");
      let t = made.get(name);
      if (!t) {
        t = new Tensor({ dtype: d.dtype, shape: d.shape, strides: contiguousStrides(d.shape), offset: 0, data: d.data }, "cpu");
        if (device !== "cpu") t = t.to(device);
        made.set(name, t);
      }
      if (o.requires_grad === true) t.requires_grad_(true);
      return t;
    }
    if ("$bytes" in o) {
      const [name, d] = stored(o.$bytes, "bytes");
      let b = bytes.get(name);
      if (!b) {
        if (d.dtype !== "uint8" || d.shape.length !== 1) throw fail(`${at}: bytes ${JSON.stringify(name)} must be a 1-D uint8 tensor, got ${d.dtype} [${d.shape.join(", ")}]`);
        b = new Uint8Array(d.data as Uint8Array); // own copy, independent of the file's buffer
        bytes.set(name, b);
      }
      return b;
    }
    if ("$dict" in o) {
      const src = o.$dict;
      if (typeof src !== "object" || src === null || Array.isArray(src)) throw fail(`${at}: $dict must hold an object`);
      const out: Record<string, unknown> = {};
      for (const k of Object.keys(src)) define(out, k, decode((src as Record<string, unknown>)[k], `${at}.${k}`, depth + 1));
      return out;
    }
    if ("$map" in o) {
      if (!Array.isArray(o.$map)) throw fail(`${at}: $map must hold [key, value] pairs`);
      return new Map(o.$map.map((p, i) => {
        if (!Array.isArray(p) || p.length !== 2 || (typeof p[0] !== "string" && typeof p[0] !== "number")) throw fail(`${at}: $map entry ${i} is not a [key, value] pair`);
        return [p[0], decode(p[1], `${at}.get(${JSON.stringify(p[0])})`, depth + 1)];
      }));
    }
    if ("$number" in o) {
      const v = ({ NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity, "-0": -0 } as Record<string, number>)[String(o.$number)];
      if (v === undefined) throw fail(`${at}: unknown $number ${JSON.stringify(o.$number)}`);
      return v;
    }
    if (o.$undefined === true) return undefined;
    throw fail(`${at}: unknown node with keys ${JSON.stringify(Object.keys(o))}`);
  };
  return decode(tree, "obj", 0) as T;
}

/** The default generator's state as a uint8 tensor (torch.get_rng_state); `set_rng_state` restores it. */
export function get_rng_state(generator: Generator = default_generator): Tensor {
  const s = generator.get_state();
  return new Tensor({ dtype: "uint8", shape: [s.length], strides: [1], offset: 0, data: s }, "cpu");
}

/**
 * Restore the generator's state from `get_rng_state` (torch.set_rng_state).
 * @throws LoomValueError for a tensor that is not uint8 or has the wrong length
 */
export function set_rng_state(state: Tensor, generator: Generator = default_generator): void {
  if (state.dtype !== "uint8") throw new LoomValueError(`[set_rng_state] expected a uint8 tensor, got ${state.dtype}`);
  generator.set_state(Uint8Array.from(state.contiguous().dataSync() as ArrayLike<number>));
}
