/**
 * Named patterns: subgraphs the surface and functional.ts build, replaced by one fused op each.
 * A pattern matches only when it is exactly the decomposition below and none of its
 * intermediates is used elsewhere (an output, or read by a backward pass): then nothing but the
 * pattern's result is lost by fusing. Each fused op's `ref` replays the decomposition with the
 * same rounding (fused_ops.ts), so results are bit-identical on the js backend.
 *
 * - softmax:   m = amax(v, d, keepdim); e = exp(v - m); e / sum(e, d, keepdim)   (TensorOps.softmax),
 *              v may be an elementwise prologue of x (scale, mask: x·s, where(mask, -inf, ·), x + m)
 * - attention: softmax(prologue(q @ kᵀ)) @ v                                     (scaled_dot_product_attention)
 * - layer_norm: m0 = sum(x)/n; d0 = x - m0; d = d0 - sum(d0)/n; d · rsqrt(sum(d·d)/n + eps) [· w] [+ b]
 *              (F.layer_norm, a corrected two pass)
 * - rms_norm:  x · rsqrt(sum(x·x)/n + eps) [· w]                                  (F.rms_norm)
 * - lora_linear: (x @ Wᵀ [+ b]) + (x @ Aᵀ @ Bᵀ) · s                                (PEFT's forward)
 * linear+bias+GELU and linear+residual need no pattern: they are matmuls with an elementwise
 * epilogue, which generic fusion (fuse.ts) handles.
 */
import { numel, shapesEqual } from "../../tensor/shape.ts";
import {
  fused_attention, fused_layer_norm, fused_lora_linear, fused_rms_norm, fused_softmax, patternDtype,
} from "./fused_ops.ts";
import { makeGraph, mkNode, usersOf, withInputs, type GNode, type Graph } from "./ir.ts";
import { layouts, type Layout } from "./layout.ts";
import type { FusionCaps } from "./fuse.ts";
import { buildProgram, safeView, viewChain } from "./program_builder.ts";

interface Ctx {
  users: Map<GNode, GNode[]>;
  outputs: Set<GNode>;
  order: Map<GNode, number>;
  layout: (n: GNode) => Layout;
  /** Nodes already replaced by an earlier match. */
  taken: Set<GNode>;
}

const op = (n: GNode | undefined, name: string): n is GNode => n?.op?.name === name;
const isScalar = (n: GNode) => numel(n.shape) === 1 && n.shape.length === 0;
const dimsOf = (n: GNode) => n.attrs as { dim: readonly number[]; keepdim: boolean };

/** Every use of `n` is by one of `allowed` (counted per input slot), and n is no output. */
function onlyUsedBy(c: Ctx, n: GNode, allowed: readonly GNode[]): boolean {
  if (c.outputs.has(n) || c.taken.has(n)) return false;
  return c.users.get(n)!.every((u) => allowed.includes(u));
}

/** The other operand of a commutative binary op `n` when one operand is `x`. */
function other(n: GNode, x: GNode): GNode | null {
  if (n.inputs[0] === x) return n.inputs[1]!;
  if (n.inputs[1] === x) return n.inputs[0]!;
  return null;
}

/**
 * Elementwise producers of `x` used only inside the pattern (`inside`) or by each other: they
 * become the fused op's prologue program. `acc` (if given) is where the prologue stops.
 */
function absorb(c: Ctx, x: GNode, inside: readonly GNode[], acc: GNode | null): Set<GNode> {
  const members = new Set<GNode>();
  const cand = new Set<GNode>();
  const push = (n: GNode) => {
    const { base, views } = viewChain(n);
    if (views.every(safeView) && base.op?.kind === "elementwise" && base !== acc) cand.add(base);
  };
  push(x);
  const seen = new Set<GNode>();
  while (true) {
    const next = [...cand].filter((n) => !seen.has(n)).sort((a, b) => c.order.get(b)! - c.order.get(a)!);
    if (next.length === 0) break;
    const n = next[0]!;
    seen.add(n);
    if (c.outputs.has(n) || c.taken.has(n) || !shapesEqual(n.shape, x.shape) && numel(n.shape) > numel(x.shape)) continue;
    const ok = c.users.get(n)!.every((u) => {
      if (inside.includes(u) || members.has(u)) return true;
      // through views: every view on the way is safe and used only toward members
      let v = u;
      while (v.op?.kind === "view" && safeView(v) && !c.outputs.has(v)) {
        const us = c.users.get(v)!;
        if (us.length !== 1) return false;
        v = us[0]!;
      }
      return v !== u && (members.has(v) || inside.includes(v));
    });
    if (!ok) continue;
    members.add(n);
    n.inputs.forEach(push);
  }
  return members;
}

interface Match { root: GNode; node: GNode; internal: GNode[] }

function prologueProgram(c: Ctx, x: GNode, members: Set<GNode>, acc: GNode | null, bases: GNode[]) {
  return buildProgram({
    shape: x.shape, layout: c.layout, acc,
    member: (m) => members.has(m),
    inputOf: (b) => {
      let i = bases.indexOf(b);
      if (i < 0) i = bases.push(b) - 1;
      return i;
    },
  }, x);
}

/** The softmax decomposition ending at `div`: returns its pieces or null. */
function softmaxAt(c: Ctx, dv: GNode) {
  if (!op(dv, "div")) return null;
  const [e, z] = dv.inputs as [GNode, GNode];
  if (!op(e, "exp") || !op(z, "sum") || z.inputs[0] !== e) return null;
  const s = e.inputs[0]!;
  if (!op(s, "sub")) return null;
  const [x, m] = s.inputs as [GNode, GNode];
  if (!op(m, "amax") || m.inputs[0] !== x) return null;
  const dz = dimsOf(z), dm = dimsOf(m);
  if (dz.dim.length !== 1 || dm.dim.length !== 1 || dz.dim[0] !== dm.dim[0] || !dz.keepdim || !dm.keepdim) return null;
  if (![dv, e, z, s, x, m].every((n) => n.dtype === dv.dtype) || !patternDtype(dv.dtype)) return null;
  if (!onlyUsedBy(c, m, [s]) || !onlyUsedBy(c, s, [e]) || !onlyUsedBy(c, e, [z, dv]) || !onlyUsedBy(c, z, [dv])) return null;
  return { x, dim: dz.dim[0]!, internal: [m, s, e, z] };
}

function matchSoftmax(c: Ctx, dv: GNode): Match | null {
  const sm = softmaxAt(c, dv);
  if (!sm) return null;
  const members = absorb(c, sm.x, [sm.internal[0]!, sm.internal[1]!], null);
  const bases: GNode[] = [];
  const prologue = prologueProgram(c, sm.x, members, null, bases);
  const node = mkNode(fused_softmax, bases, { dim: sm.dim, prologue }, dv.shape, dv.dtype, dv.origins, dv.retain);
  return { root: dv, node, internal: [...sm.internal, ...members] };
}

function matchAttention(c: Ctx, out: GNode): Match | null {
  if (!op(out, "matmul")) return null;
  const [p, v] = out.inputs as [GNode, GNode];
  const sm = softmaxAt(c, p);
  if (!sm || sm.dim !== p.shape.length - 1 || !onlyUsedBy(c, p, [out]) || out.dtype !== p.dtype) return null;
  const inside = [sm.internal[0]!, sm.internal[1]!];
  const members = absorb(c, sm.x, inside, null);
  // the scores q @ kᵀ: x itself, or the prologue's one matmul leaf, used only inside
  const scores = op(sm.x, "matmul") ? sm.x : [...members].flatMap((m) => m.inputs).find((i) => op(i, "matmul") && shapesEqual(i.shape, p.shape));
  if (!scores || scores.dtype !== p.dtype || !onlyUsedBy(c, scores, [...inside, ...members])) return null;
  // the scores are read element for element: members on the path from the scores to the softmax
  // input have the full shape and no views between them (masks and scales may broadcast freely)
  const onPath = new Set<GNode>();
  for (const m of [...members].sort((a, b) => c.order.get(a)! - c.order.get(b)!)) {
    if (m.inputs.some((i) => i === scores || onPath.has(i))) onPath.add(m);
  }
  for (const m of onPath) {
    if (!shapesEqual(m.shape, p.shape) || c.users.get(m)!.some((u) => u.op?.kind === "view")) return null;
  }
  if (c.users.get(scores)!.some((u) => u.op?.kind === "view")) return null;
  if (!shapesEqual(out.shape.slice(0, -2), p.shape.slice(0, -2))) return null;
  const bases: GNode[] = [scores.inputs[0]!, scores.inputs[1]!, v];
  const prologue = prologueProgram(c, sm.x, members, scores, bases);
  const node = mkNode(fused_attention, bases, { prologue }, out.shape, out.dtype, out.origins, out.retain);
  return { root: out, node, internal: [p, scores, ...sm.internal, ...members] };
}

/** mean over trailing `dims` as sum(keepdim)/n: returns [sum, n] or null. */
function meanOf(n: GNode, x: GNode): [GNode, GNode] | null {
  if (!op(n, "div")) return null;
  const [s, k] = n.inputs as [GNode, GNode];
  if (!op(s, "sum") || s.inputs[0] !== x || !isScalar(k) || !dimsOf(s).keepdim) return null;
  const d = dimsOf(s).dim;
  const nd = x.shape.length;
  if (d.length === 0 || !d.every((v, i) => v === nd - d.length + i)) return null;
  return [s, k];
}

/** rsqrt(mean + eps): its mean (a div), eps and the add, or null. */
function rsqrtEps(r: GNode): { mean: GNode; eps: GNode; add: GNode } | null {
  if (!op(r, "rsqrt")) return null;
  const a = r.inputs[0]!;
  if (!op(a, "add")) return null;
  const [p, q] = a.inputs as [GNode, GNode];
  if (isScalar(q) && op(p, "div")) return { mean: p, eps: q, add: a };
  if (isScalar(p) && op(q, "div")) return { mean: q, eps: p, add: a };
  return null;
}

/** Optional `· w` then `+ b` after y, with w/b shaped like the normalized dims. */
function affineTail(c: Ctx, y: GNode, normShape: readonly number[], withBias: boolean) {
  let last = y;
  let w: GNode | null = null, b: GNode | null = null;
  const nodes: GNode[] = [];
  const step = (name: string): GNode | null => {
    const us = c.users.get(last)!;
    const u = us[0];
    if (us.length !== 1 || c.outputs.has(last) || !op(u, name) || u.dtype !== y.dtype) return null;
    const o = other(u, last);
    if (!o || o === last || !shapesEqual(o.shape, normShape) || o.dtype !== y.dtype) return null;
    nodes.push(u);
    last = u;
    return o;
  };
  w = step("mul");
  if (withBias) b = step("add");
  return { last, w, b, nodes };
}

function matchLayerNorm(c: Ctx, r: GNode): Match | null {
  const re = rsqrtEps(r);
  if (!re) return null;
  const vr = re.mean;
  const q = vr.inputs[0]!.inputs[0];
  if (!op(q, "mul") || q.inputs[0] !== q.inputs[1]) return null;
  const d = q.inputs[0]!;
  if (!op(d, "sub")) return null;
  const [d0, cm] = d.inputs as [GNode, GNode];
  if (!op(d0, "sub")) return null;
  const [x, m0] = d0.inputs as [GNode, GNode];
  const m1 = meanOf(m0, x), m2 = meanOf(cm, d0), m3 = meanOf(vr, q);
  if (!m1 || !m2 || !m3 || !shapesEqual(dimsOf(m1[0]).dim, dimsOf(m3[0]).dim) || !shapesEqual(dimsOf(m2[0]).dim, dimsOf(m3[0]).dim)) return null;
  const ry = c.users.get(r)!;
  const y = ry.length === 1 ? ry[0]! : null;
  if (!y || !op(y, "mul") || other(y, r) !== d) return null;
  const D = x.dtype;
  if (!patternDtype(D) || ![m0, d0, cm, d, q, vr, re.add, r, y].every((n) => n.dtype === D)) return null;
  if (!onlyUsedBy(c, m1[0], [m0]) || !onlyUsedBy(c, m0, [d0]) || !onlyUsedBy(c, d0, [m2[0], d]) || !onlyUsedBy(c, m2[0], [cm]) ||
    !onlyUsedBy(c, cm, [d]) || !onlyUsedBy(c, d, [q, y]) || !onlyUsedBy(c, q, [m3[0]]) ||
    !onlyUsedBy(c, m3[0], [vr]) || !onlyUsedBy(c, vr, [re.add]) || !onlyUsedBy(c, re.add, [r]) || !onlyUsedBy(c, r, [y])) return null;
  const nd = dimsOf(m1[0]).dim.length;
  const tail = affineTail(c, y, x.shape.slice(x.shape.length - nd), true);
  const ins = [x, m1[1], m2[1], m3[1], re.eps, ...(tail.w ? [tail.w] : []), ...(tail.b ? [tail.b] : [])];
  const node = mkNode(fused_layer_norm, ins, { dims: nd, has_weight: !!tail.w, has_bias: !!tail.b }, x.shape, D, tail.last.origins, tail.last.retain);
  return { root: tail.last, node, internal: [m1[0], m0, d0, m2[0], cm, d, q, m3[0], vr, re.add, r, y, ...tail.nodes] };
}

function matchRmsNorm(c: Ctx, r: GNode): Match | null {
  const re = rsqrtEps(r);
  if (!re) return null;
  const ms = re.mean;
  const q = ms.inputs[0]!.inputs[0];
  if (!op(q, "mul") || q.inputs[0] !== q.inputs[1]) return null;
  const x = q.inputs[0]!;
  const m = meanOf(ms, q);
  const ry = c.users.get(r)!;
  const y = ry.length === 1 ? ry[0]! : null;
  if (!m || !y || !op(y, "mul") || other(y, r) !== x) return null;
  const D = x.dtype;
  if (!patternDtype(D) || ![q, ms, re.add, r, y].every((n) => n.dtype === D)) return null;
  if (!onlyUsedBy(c, q, [m[0]]) || !onlyUsedBy(c, m[0], [ms]) || !onlyUsedBy(c, ms, [re.add]) || !onlyUsedBy(c, re.add, [r]) || !onlyUsedBy(c, r, [y])) return null;
  const nd = dimsOf(m[0]).dim.length;
  const tail = affineTail(c, y, x.shape.slice(x.shape.length - nd), false);
  const ins = [x, m[1], re.eps, ...(tail.w ? [tail.w] : [])];
  const node = mkNode(fused_rms_norm, ins, { dims: nd, has_weight: !!tail.w, has_bias: false }, x.shape, D, tail.last.origins, tail.last.retain);
  return { root: tail.last, node, internal: [q, m[0], ms, re.add, r, y, ...tail.nodes] };
}

function matchLora(c: Ctx, out: GNode): Match | null {
  if (!op(out, "add") || !patternDtype(out.dtype)) return null;
  for (const [base, lora] of [[out.inputs[0]!, out.inputs[1]!], [out.inputs[1]!, out.inputs[0]!]] as const) {
    if (!op(lora, "mul")) continue;
    const dl = op(lora.inputs[0], "matmul") ? lora.inputs[0]! : lora.inputs[1]!;
    const s = other(lora, dl);
    if (!op(dl, "matmul") || !s || !isScalar(s)) continue;
    const h = dl.inputs[0]!;
    if (!op(h, "matmul")) continue;
    const x = h.inputs[0]!;
    let y = base, bias: GNode | null = null;
    if (op(base, "add")) {
      y = op(base.inputs[0], "matmul") ? base.inputs[0]! : base.inputs[1]!;
      bias = other(base, y);
      if (!bias || bias.shape.length !== 1 || bias.shape[0] !== out.shape[out.shape.length - 1]) continue;
    }
    if (!op(y, "matmul") || y.inputs[0] !== x || !shapesEqual(y.shape, out.shape) || !shapesEqual(dl.shape, out.shape)) continue;
    const nodes = bias ? [lora, dl, h, y, base] : [lora, dl, h, y];
    if (!nodes.every((n) => n.dtype === out.dtype) || (bias && bias.dtype !== out.dtype) || s.dtype !== out.dtype) continue;
    if (!onlyUsedBy(c, lora, [out]) || !onlyUsedBy(c, dl, [lora]) || !onlyUsedBy(c, h, [dl]) || !onlyUsedBy(c, y, [bias ? base : out]) || (bias && !onlyUsedBy(c, base, [out]))) continue;
    const ins = [x, y.inputs[1]!, h.inputs[1]!, dl.inputs[1]!, s, ...(bias ? [bias] : [])];
    const node = mkNode(fused_lora_linear, ins, { has_bias: !!bias }, out.shape, out.dtype, out.origins, out.retain);
    return { root: out, node, internal: nodes };
  }
  return null;
}

const MATCHERS: [string, (c: Ctx, n: GNode) => Match | null][] = [
  ["fused_attention", matchAttention],
  ["fused_softmax", matchSoftmax],
  ["fused_layer_norm", matchLayerNorm],
  ["fused_rms_norm", matchRmsNorm],
  ["fused_lora_linear", matchLora],
];

/** Replace every matched pattern (largest first: attention before its softmax) by its fused op. */
export function matchPatterns(g: Graph, caps: FusionCaps): Graph {
  const lay = layouts(g);
  const c: Ctx = {
    users: usersOf(g), outputs: new Set(g.outputs), order: new Map(g.nodes.map((n, i) => [n, i])),
    layout: (n) => lay.get(n)!, taken: new Set(),
  };
  const replace = new Map<GNode, GNode>();
  for (const [name, match] of MATCHERS) {
    if (!caps.fused.has(name)) continue;
    for (let i = g.nodes.length - 1; i >= 0; i--) {
      const n = g.nodes[i]!;
      if (c.taken.has(n) || !n.op) continue;
      const m = match(c, n);
      if (!m || m.internal.some((x) => c.taken.has(x))) continue;
      for (const x of [m.root, ...m.internal]) c.taken.add(x);
      replace.set(m.root, m.node);
    }
  }
  if (replace.size === 0) return g;
  const map = new Map<GNode, GNode>();
  for (const n of g.nodes) {
    const r = replace.get(n);
    if (r) {
      map.set(n, withInputs(r, r.inputs.map((x) => map.get(x) ?? x)));
      continue;
    }
    const ins = n.inputs.map((x) => map.get(x) ?? x);
    map.set(n, ins.every((x, k) => x === n.inputs[k]) ? n : withInputs(n, ins));
  }
  return makeGraph(g.outputs.map((o) => map.get(o)!));
}
