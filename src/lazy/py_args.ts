/**
 * Python's argument binding for the free functions: positional values, then an optional trailing
 * options object of keyword arguments (`loom.sum(x, 1, {keepdim: true})` is
 * `torch.sum(x, 1, keepdim=True)`). Not exported from the package index.
 */
import { LoomValueError } from "../tensor/errors.ts";
import { TensorOps } from "./surface.ts";

type Init<T extends unknown[]> = T extends [...infer H, unknown] ? H : [];
/** T and each of its prefixes: the positional forms of a Python call. */
type Prefixes<T extends unknown[]> = T extends [] ? [] : T | Prefixes<Init<T>>;
type WithKw<P, K> = P extends unknown[] ? P | [...P, K] : never;
/**
 * The arguments after `input` of a Python signature: a prefix of the positional parameters `T`,
 * optionally followed by an options object `K` of keyword arguments.
 */
export type PyArgs<T extends unknown[], K> = WithKw<Prefixes<T>, K>;

type Kw = Record<string, unknown>;
/** An options object: a plain object, not a tensor, an array (dims, sizes) or a typed array. */
function isKw(v: unknown): v is Kw {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof TensorOps) && !ArrayBuffer.isView(v);
}

/**
 * Bind `args` (positional values, then an optional options object) to the parameter `names`, as
 * Python binds a call; `kwOnly` are keyword-only names (after torch's `*`).
 * @throws LoomValueError for too many positional values, an unknown keyword, or a parameter given twice
 */
export function bindArgs(op: string, names: readonly string[], args: readonly unknown[], kwOnly: readonly string[] = []): Kw {
  let pos = args;
  let kw: Kw = {};
  const last = args[args.length - 1];
  if (args.length > 0 && isKw(last)) {
    kw = last;
    pos = args.slice(0, -1);
  }
  if (pos.length > names.length) {
    throw new LoomValueError(`[${op}] takes ${names.length} positional arguments after input but ${pos.length} were given`);
  }
  const out: Kw = {};
  pos.forEach((v, i) => { out[names[i]!] = v; });
  for (const [k, v] of Object.entries(kw)) {
    if (!names.includes(k) && !kwOnly.includes(k)) {
      throw new LoomValueError(`[${op}] got an unexpected keyword argument '${k}' (parameters: ${[...names, ...kwOnly].join(", ")})`);
    }
    if (k in out && out[k] !== undefined) throw new LoomValueError(`[${op}] got multiple values for argument '${k}'`);
    out[k] = v;
  }
  return out;
}
