/**
 * Simplification passes, each a function from graph to graph: view folding, identity and no-op
 * elimination, constant folding, common-subexpression elimination; dead nodes vanish in every
 * rebuild. Every rewrite is exact: the simplified graph computes the same bits as the original
 * on the js backend (so `x + 0` is only removed for integers: -0 + 0 is +0 in IEEE 754).
 *
 * Contract with the plan cache's fast path (scheduler/fingerprint.ts): a rule may look at a
 * constant's value only through `constantValue`, and only to compare it with a multiple of 1/8
 * or -0 (0, 1, 2, 0.5, ...). The fingerprint records exactly those values; a rule that looks at
 * other values (or at values of non-constant leaves) must extend it, or graphs that simplify
 * differently would share a plan.
 */
import { decoder, isFloating, type DType } from "../../tensor/dtype.ts";
import { numel, shapesEqual } from "../../tensor/shape.ts";
import { forEachStrided, scalarData, type TensorData } from "../../tensor/storage.ts";
import type { OpDef } from "../op.ts";
import { add, contiguous, mul } from "../ops/elementwise.ts";
import { cat, slice_backward, type SliceBackwardAttrs } from "../ops/movement.ts";
import { baseOf, canon, makeGraph, mkLeaf, mkNode, rewrite, usersOf, withInputs, type GNode, type Graph } from "./ir.ts";

/** Runs one op over buffers (the scheduler passes its backend's `run`). */
export type Evaluate = (op: OpDef, inputs: readonly TensorData[], attrs: unknown, shape: readonly number[], dtype: DType) => TensorData;

const same = (n: GNode, x: GNode) => x.dtype === n.dtype && shapesEqual(x.shape, n.shape);

// ---- view folding ---------------------------------------------------------------------------
/**
 * reshape/expand/permute/slice that do nothing disappear, chains of the same view collapse into
 * one (reshape∘reshape, expand∘expand, permute∘permute), and `contiguous` is dropped (it only
 * changes layout: the plan re-inserts a copy where a later view or an output needs one).
 */
export function foldViews(g: Graph): Graph {
  return rewrite(g, (n, ins) => {
    if (!n.op) return null;
    const x = ins[0]!;
    switch (n.op.name) {
      case "contiguous":
        return x.dtype === n.dtype ? x : null;
      case "reshape":
      case "expand": {
        if (shapesEqual(x.shape, n.shape)) return x;
        if (x.op !== n.op) return null;
        const inner = x.inputs[0]!;
        return shapesEqual(inner.shape, n.shape) ? inner : mkNode(n.op, x.inputs, n.attrs, n.shape, n.dtype, n.origins, n.retain);
      }
      case "permute": {
        const dims = (n.attrs as { dims: readonly number[] }).dims;
        if (dims.every((d, i) => d === i)) return x;
        if (x.op === n.op) {
          const inner = (x.attrs as { dims: readonly number[] }).dims;
          const composed = dims.map((d) => inner[d]!);
          if (composed.every((d, i) => d === i)) return x.inputs[0]!;
          return mkNode(n.op, x.inputs, { dims: composed }, n.shape, n.dtype, n.origins, n.retain);
        }
        return null;
      }
      case "slice": {
        const a = n.attrs as { dim: number; start: number; end: number; step: number };
        return a.start === 0 && a.step === 1 && a.end >= x.shape[a.dim]! ? x : null;
      }
      default:
        return null;
    }
  });
}

// ---- identities -----------------------------------------------------------------------------
/** The single value of a constant leaf whose elements are all equal (a broadcast scalar, a folded fill), else null. */
export function constantValue(n: GNode): number | null {
  return n.leaf && n.constant ? uniformValue(n.leaf) : null;
}

/** The single value of a buffer whose elements are all equal (checked up to 4096 elements), else null. */
export function uniformValue(d: TensorData): number | null {
  if (numel(d.shape) === 0) return null;
  const dec = decoder(d.dtype);
  const first = dec ? dec(d.data, d.offset) : d.data[d.offset]!;
  if (numel(d.shape) === 1 || d.strides.every((s, i) => s === 0 || d.shape[i] === 1)) return first;
  if (numel(d.shape) > 4096) return null;
  let same = true;
  forEachStrided(d.shape, [d], (_i, idx) => {
    const v = dec ? dec(d.data, idx[0]!) : d.data[idx[0]!]!;
    if (!Object.is(v, first)) same = false;
  });
  return same ? first : null;
}

const is = (n: GNode, v: number) => {
  const c = constantValue(n);
  return c !== null && Object.is(c, v);
};
const integral = (d: DType) => !isFloating(d);

/**
 * x·1, 1·x, x/1, x^1, x-0, x+(-0), integer x+0, -(-x), !!x and where(c, x, x) become x, when
 * that keeps the result's shape and dtype (so no broadcast or promotion is lost); float32 x^2
 * becomes x·x (the same bits).
 */
export function eliminateIdentities(g: Graph): Graph {
  return rewrite(g, (n, ins) => {
    if (!n.op || n.op.kind !== "elementwise") return null;
    const [a, b, c] = ins;
    const pick = (x: GNode | undefined) => (x && same(n, x) ? x : null);
    switch (n.op.name) {
      case "mul":
        return (is(b!, 1) && pick(a)) || (is(a!, 1) && pick(b)) || null;
      case "div":
        return is(b!, 1) ? pick(a) : null;
      case "pow":
        if (is(b!, 1)) return pick(a);
        // float32 x^2 is x·x bit for bit (x² of a float32 is exact in double, so any pow within
        // 1 ulp returns it) and lets the norm patterns see x·x
        if (is(b!, 2) && n.dtype === "float32" && a!.dtype === "float32" && shapesEqual(a!.shape, n.shape)) return mkNode(mul, [a!, a!], {}, n.shape, n.dtype, n.origins, n.retain);
        return null;
      case "add": {
        const zeroB = is(b!, -0) || (integral(n.dtype) && is(b!, 0));
        const zeroA = is(a!, -0) || (integral(n.dtype) && is(a!, 0));
        return (zeroB && pick(a)) || (zeroA && pick(b)) || null;
      }
      case "sub":
        return is(b!, 0) || (integral(n.dtype) && is(b!, -0)) ? pick(a) : null;
      case "neg":
      case "logical_not":
        return a!.op === n.op ? pick(a!.inputs[0]) : null;
      case "where":
        return b === c ? pick(b) : null;
      default:
        return null;
    }
  });
}

// ---- sums of slice_backward ------------------------------------------------------------------
/** One slice_backward of a sum: g written at [start, end) of `dim` in zeros of `shape`. */
interface Piece { start: number; end: number; sb: GNode }

/**
 * A gradient split into pieces (q, k, v of a fused qkv projection: each piece's gradient is a
 * slice_backward, then the engine adds them) becomes one `cat` of the pieces:
 * sb(g₁, r₁) + sb(g₂, r₂) + … over ranges of one dim that together form one run [s, e) →
 * sb(cat(g₁, g₂, …), s:e) + 0 (the cat alone when [s, e) is the whole dim, then + 0).
 * Exact: each position of the sum is one piece's value plus zeros, which is the value with −0
 * made +0, and `+ 0` does the same; positions outside [s, e) are +0 either way. It applies only
 * where every slice_backward and inner sum is used by the sum alone (no output, no retained
 * value): then the pieces' full-size zero buffers and the sums' passes are no longer computed
 * (W7u: 3 slice_backwards and an add of [2048, 1152] per layer become a cat and an add).
 */
export function mergeSliceBackwards(g: Graph): Graph {
  if (!g.nodes.some((n) => n.op === slice_backward)) return g;
  const users = usersOf(g);
  const outputs = new Set(g.outputs);
  const inner = (n: GNode) => !outputs.has(n) && !n.retain && users.get(n)!.length === 1;
  const pieces = new Map<GNode, Piece[] | null>();
  const piecesOf = (n: GNode): Piece[] | null => {
    if (pieces.has(n)) return pieces.get(n)!;
    let r: Piece[] | null = null;
    if (n.op === slice_backward && isFloating(n.dtype)) {
      const a = n.attrs as SliceBackwardAttrs;
      if (a.step === 1 && a.end > a.start) r = [{ start: a.start, end: a.end, sb: n }];
    } else if (n.op === add && isFloating(n.dtype) && n.inputs.every((x) => x.dtype === n.dtype && shapesEqual(x.shape, n.shape) && inner(x))) {
      const [p, q] = n.inputs.map(piecesOf);
      if (p && q) {
        const a = p[0]!.sb.attrs as SliceBackwardAttrs, b = q[0]!.sb.attrs as SliceBackwardAttrs;
        if (a.dim === b.dim && shapesEqual(a.input_shape, b.input_shape)) r = [...p, ...q];
      }
    }
    pieces.set(n, r);
    return r;
  };
  /** The sum's pieces sorted into one run without overlap or gap, else null. */
  const run = (n: GNode): Piece[] | null => {
    const p = piecesOf(n);
    if (!p || p.length < 2) return null;
    const sorted = [...p].sort((x, y) => x.start - y.start);
    for (let i = 1; i < sorted.length; i++) if (sorted[i]!.start !== sorted[i - 1]!.end) return null;
    return sorted;
  };
  const tops = new Set(g.nodes.filter((n) => n.op === add && run(n) && !(users.get(n)!.some((u) => u.op === add && inner(n) && run(u)))));
  if (tops.size === 0) return g;
  return rewrite(g, (n, _ins, rewritten) => {
    if (!tops.has(n)) return null;
    const ps = run(n)!;
    const a = ps[0]!.sb.attrs as SliceBackwardAttrs;
    const gs = ps.map((p) => rewritten(p.sb.inputs[0]!)); // the pieces' gradients precede n
    const s = ps[0]!.start, e = ps[ps.length - 1]!.end;
    const shape = [...a.input_shape];
    shape[a.dim] = e - s;
    let y = mkNode(cat, gs, { dim: a.dim }, shape, n.dtype, n.origins);
    if (e - s !== a.input_shape[a.dim]) {
      y = mkNode(slice_backward, [y], { dim: a.dim, start: s, end: e, step: 1, input_shape: a.input_shape }, a.input_shape, n.dtype, n.origins);
    }
    return mkNode(add, [y, mkLeaf(scalarData(n.dtype, 0), true)], {}, n.shape, n.dtype, n.origins, n.retain);
  });
}

// ---- constant folding -------------------------------------------------------------------------
/**
 * Ops whose inputs are all constant leaves are computed now (with `evaluate`) and become
 * constant leaves. Results larger than `limit` elements are left alone (folding runs on every
 * realize, the plan does not: a big constant op is better fused into a kernel); views are always
 * folded (they cost nothing). Folded values are plan inputs, never baked into a cached plan.
 */
export function foldConstants(g: Graph, evaluate: Evaluate, limit = 4096): Graph {
  return rewrite(g, (n, ins) => {
    if (!n.op || ins.length === 0 || !ins.every((x) => x.constant)) return null;
    if (n.op.kind !== "view" && numel(n.shape) > limit) return null;
    const out = evaluate(n.op, ins.map((x) => x.leaf!), n.attrs, n.shape, n.dtype);
    return mkLeaf(out, true, n.origins);
  });
}

// ---- common subexpressions ----------------------------------------------------------------------
/**
 * Equal constants are merged only for "structural" values (multiples of 1/8: 0, 1, 0.5, 2, n...).
 * Merging by arbitrary value would make the graph's structure depend on values that change from
 * step to step (Adam's 1 - β₁ᵗ equals 1 - β₁ at t = 1), and miss the plan cache.
 */
function leafKey(n: GNode): string | null {
  const d = n.leaf!;
  const v = constantValue(n);
  if (v === null || !Number.isInteger(v * 8)) return null;
  return `c${d.dtype}[${d.shape.join(",")}]${Object.is(v, -0) ? "-0" : String(v)}`;
}

/**
 * Nodes with the same op, attrs and inputs are one node; leaves over the same storage with the
 * same layout are one leaf, and equal scalar constants are one constant. The survivor (the first
 * in topological order) takes over the others' origins and keep flags.
 */
export function cse(g: Graph): Graph {
  const byKey = new Map<string, GNode>();
  const byData = new Map<unknown, GNode[]>();
  const rep = new Map<GNode, GNode>(); // node -> its representative (in the input graph)
  const merged = new Map<GNode, GNode[]>(); // representative -> all nodes it stands for
  for (const n of g.nodes) {
    let r: GNode | undefined;
    if (!n.op) {
      const ck = leafKey(n);
      if (ck !== null) {
        r = byKey.get(ck);
        if (!r) byKey.set(ck, n);
      } else {
        const d = n.leaf!;
        // device buffers (webgpu GpuData) name their storage: reading .data would copy it to the host
        const store: unknown = (d as { storage?: unknown }).storage ?? d.data;
        const list = byData.get(store) ?? [];
        r = list.find((m) => m.leaf!.offset === d.offset && m.dtype === d.dtype &&
          shapesEqual(m.shape, d.shape) && shapesEqual(m.leaf!.strides, d.strides));
        if (!r) {
          list.push(n);
          byData.set(store, list);
        }
      }
    } else {
      let key = n.op.name + canon(n.attrs) + "(";
      for (const x of n.inputs) key += rep.get(x)!.id + ",";
      r = byKey.get(key);
      if (!r) byKey.set(key, n);
    }
    r = r ?? n;
    rep.set(n, r);
    const list = merged.get(r);
    if (list) list.push(n);
    else merged.set(r, [n]);
  }
  let changed = false;
  for (const [r, all] of merged) if (all.length > 1 || r.inputs.some((c) => rep.get(c) !== c)) changed = true;
  if (!changed) return g;
  const out = new Map<GNode, GNode>();
  for (const n of g.nodes) {
    if (rep.get(n) !== n) continue;
    const all = merged.get(n)!;
    const ins = n.inputs.map((c) => out.get(rep.get(c)!)!);
    if (all.length === 1 && ins.every((c, i) => c === n.inputs[i])) {
      out.set(n, n);
      continue;
    }
    out.set(n, {
      ...withInputs(n, ins),
      origins: all.flatMap((m) => m.origins),
      retain: all.some((m) => m.retain),
    });
  }
  return makeGraph(g.outputs.map((o) => out.get(rep.get(o)!)!));
}

// ---- outputs ----------------------------------------------------------------------------------
/**
 * An output that was computed by an op (not a view of an existing buffer) must not become an
 * alias of an input after simplification (`x * 1` is a new tensor in eager mode): such outputs
 * get a copy.
 */
export function protectOutputs(before: Graph, after: Graph): Graph {
  let changed = false;
  const outs = after.outputs.map((o, i) => {
    if (baseOf(before.outputs[i]!).op === null || baseOf(o).op !== null) return o;
    changed = true;
    return mkNode(contiguous, [o], {}, o.shape, o.dtype, o.origins);
  });
  return changed ? makeGraph(outs) : after;
}

export interface SimplifyOptions {
  /** Computes constant subgraphs; constant folding is skipped without it. */
  evaluate?: Evaluate;
  /** Largest constant result (elements) that is folded. */
  foldLimit?: number;
}

/**
 * All simplification passes, repeated while CSE merges something (a merge can enable another
 * rewrite, e.g. where(c, x, x)); at most a few rounds. Outputs are protected at the end.
 */
export function simplify(g: Graph, opts: SimplifyOptions = {}): Graph {
  let cur = g;
  for (let round = 0; round < 4; round++) {
    if (opts.evaluate) cur = foldConstants(cur, opts.evaluate, opts.foldLimit);
    cur = foldViews(cur);
    cur = mergeSliceBackwards(cur);
    // identities and merges can expose more (adjacent views, where(c, x, x)): then another round
    const a = cur;
    cur = eliminateIdentities(cur);
    const b = cur;
    cur = cse(cur);
    if (cur === b && b === a) break;
  }
  return protectOutputs(g, cur);
}
