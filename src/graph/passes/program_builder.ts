/**
 * Building a fused kernel's Program from graph nodes. A member of a fused group is evaluated in
 * the group's index space through a *mapping*: the views and broadcasts between it and the
 * group's output, kept as steps and applied to the strides of every load below it. Only views
 * that work on any strides (permute, expand, slice, size-1 reshapes) may sit between members, so
 * a mapping never fails; other views end the group.
 */
import { contiguousStrides, broadcastStrides, numel, shapesEqual } from "../../tensor/shape.ts";
import type { ElementwiseOp } from "../op.ts";
import { canon, type GNode } from "./ir.ts";
import { applyView, type Layout } from "./layout.ts";
import type { Instr, Program } from "./program.ts";

/** One step from a node's index space towards the group's: a view, or a broadcast to `to`. */
export type Step = { readonly kind: "view"; readonly node: GNode } | { readonly kind: "bcast"; readonly to: readonly number[] };

export function stepsKey(steps: readonly Step[]): string {
  return steps.map((s) => (s.kind === "view" ? `${s.node.op!.name}${canon(s.node.attrs)}` : `b${s.to.join(",")}`)).join("|");
}

/** A view that can be applied to any strides (no reshape that merges or splits real dims). */
export function safeView(v: GNode): boolean {
  if (v.op?.name !== "reshape") return v.op?.kind === "view";
  const a = v.inputs[0]!.shape.filter((s) => s !== 1);
  const b = v.shape.filter((s) => s !== 1);
  return shapesEqual(a, b);
}

export function applySteps(l: Layout, steps: readonly Step[]): Layout {
  let cur = l;
  for (const s of steps) {
    if (s.kind === "bcast") cur = { base: cur.base, shape: s.to, strides: broadcastStrides(cur.shape, cur.strides, s.to), offset: cur.offset };
    else {
      const r = applyView(s.node, cur);
      if (!r) throw new Error(`[fusion] internal: view ${s.node.op!.name} failed on a mapped load`);
      cur = r;
    }
  }
  return cur;
}

/** True when `steps` read a dense tensor of `shape` as the dense space `space`, element for element. */
export function isIdentityMapping(shape: readonly number[], steps: readonly Step[], space: readonly number[]): boolean {
  if (numel(shape) !== numel(space)) return false;
  const l = applySteps({ base: null as never, shape, strides: contiguousStrides(shape), offset: 0 }, steps);
  const want = contiguousStrides(space);
  return l.offset === 0 && space.every((s, i) => s === 1 || l.strides[i] === want[i]);
}

/** Views from `n` down to its base, returned base-first (the order they apply). */
export function viewChain(n: GNode): { base: GNode; views: GNode[] } {
  const views: GNode[] = [];
  let b = n;
  while (b.op?.kind === "view") {
    views.push(b);
    b = b.inputs[0]!;
  }
  return { base: b, views: views.reverse() };
}

export interface BuildContext {
  /** The index space of the program. */
  readonly shape: readonly number[];
  /** Is this node computed inside the program (else it is loaded)? */
  readonly member: (n: GNode) => boolean;
  /** The node whose value is the accumulator (a reduction or matmul), if any. */
  readonly acc: GNode | null;
  /** Layout of every node (for loads). */
  readonly layout: (n: GNode) => Layout;
  /** Input slot of a base buffer (assigned on first use). */
  readonly inputOf: (base: GNode) => number;
}

/** Emit the program computing `root` over ctx.shape (root is read through `steps`). */
export function buildProgram(ctx: BuildContext, root: GNode, steps: readonly Step[] = []): Program {
  const code: Instr[] = [];
  const memo = new Map<string, number>();
  const emitInput = (inp: GNode, consumer: GNode | null, tail: readonly Step[]): number => {
    const { base, views } = viewChain(inp);
    const toConsumer: Step[] = consumer ? [{ kind: "bcast", to: consumer.shape }] : [];
    if (base === ctx.acc) {
      const key = "acc";
      let i = memo.get(key);
      if (i === undefined) {
        i = code.push({ k: "acc", dtype: base.dtype }) - 1;
        memo.set(key, i);
      }
      return i;
    }
    if (ctx.member(base)) return emit(base, [...views.map((v): Step => ({ kind: "view", node: v })), ...toConsumer, ...tail]);
    const l = applySteps(ctx.layout(inp), [...toConsumer, ...tail]);
    const input = ctx.inputOf(l.base);
    const key = `L${input}:${l.strides.join(",")}@${l.offset}`;
    let i = memo.get(key);
    if (i === undefined) {
      i = code.push({ k: "load", input, strides: l.strides, offset: l.offset, dtype: l.base.dtype }) - 1;
      memo.set(key, i);
    }
    return i;
  };
  // recursive: depth is bounded by the fusion pass's group size limit
  const emit = (n: GNode, st: readonly Step[]): number => {
    const key = `${n.id}#${stepsKey(st)}`;
    const hit = memo.get(key);
    if (hit !== undefined) return hit;
    const args = n.inputs.map((c) => emitInput(c, n, st));
    const i = code.push({ k: "op", op: n.op as ElementwiseOp<any>, args, dtype: n.dtype }) - 1;
    memo.set(key, i);
    return i;
  };
  const out = ctx.member(root) ? emit(root, steps) : emitInput(root, null, steps);
  return { shape: ctx.shape, code, out };
}
