/**
 * Layouts: where a view reads its base's storage. Leaves keep the strides of their buffer (part of
 * the plan's key), computed nodes are dense row-major, and views apply their op's own stride
 * arithmetic (`ViewOp.ref`) to that, so a plan resolves every view at compile time and runs no
 * view op at all.
 */
import { contiguousStrides } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";
import { contiguous } from "../ops/elementwise.ts";
import { mkNode, rewrite, withInputs, type GNode, type Graph } from "./ir.ts";

/** A strided window on the storage of `base`: element (i...) is at base.offset + offset + Σ i·strides. */
export interface Layout {
  readonly base: GNode;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  /** Element offset relative to the base buffer's own offset. */
  readonly offset: number;
}

const NO_DATA = new Float32Array(0);

/** Apply a view op's stride arithmetic to a layout; null when it cannot be a view (needs a copy). */
export function applyView(n: GNode, l: Layout): Layout | null {
  if (n.op?.kind !== "view") throw new Error(`[layout] ${n.op?.name ?? "leaf"} is not a view`);
  const fake: TensorData = { dtype: n.dtype, shape: l.shape, strides: l.strides, offset: l.offset, data: NO_DATA };
  const v = n.op.ref(fake, n.attrs as never);
  return v ? { base: l.base, shape: v.shape, strides: v.strides, offset: v.offset } : null;
}

/** The layout a node's value has when read: its own (dense) buffer, a leaf's, or a view of one. */
export function baseLayout(n: GNode): Layout {
  if (n.leaf) return { base: n, shape: n.shape, strides: n.leaf.strides, offset: 0 };
  return { base: n, shape: n.shape, strides: contiguousStrides(n.shape), offset: 0 };
}

/** Layouts of every node of `g` (null for views that cannot be expressed over their base). */
export function layouts(g: Graph): Map<GNode, Layout | null> {
  const out = new Map<GNode, Layout | null>();
  for (const n of g.nodes) {
    if (n.op?.kind !== "view") out.set(n, baseLayout(n));
    else {
      const inner = out.get(n.inputs[0]!)!;
      out.set(n, inner ? applyView(n, inner) : null);
    }
  }
  return out;
}

/**
 * Insert a `contiguous` copy under every view that cannot be expressed as strides over its base
 * (e.g. flattening a transposed matrix), so that afterwards every view resolves.
 */
export function legalizeViews(g: Graph): Graph {
  const lay = new Map<GNode, Layout>();
  const record = (n: GNode, l: Layout) => { lay.set(n, l); return n; };
  return rewrite(g, (n, ins) => {
    const same = ins.every((c, i) => c === n.inputs[i]);
    if (n.op?.kind !== "view") {
      const res = same ? n : withInputs(n, ins);
      record(res, baseLayout(res));
      return same ? null : res;
    }
    const l = applyView(n, lay.get(ins[0]!)!);
    if (l) {
      const res = same ? n : withInputs(n, ins);
      record(res, l);
      return same ? null : res;
    }
    const x = ins[0]!;
    const node = mkNode(contiguous, [x], {}, x.shape, x.dtype);
    const copy = record(node, baseLayout(node));
    const res = withInputs(n, [copy]);
    return record(res, applyView(res, lay.get(copy)!)!);
  });
}
