/**
 * The compiler's graph IR. A `Graph` is a snapshot of the pending lazy graph below some roots:
 * nodes in topological order (inputs first), only those reachable from the outputs. Already
 * realized lazy nodes become leaves holding their buffer. GNodes are immutable, so every pass is
 * a pure function from graph to graph (`rewrite` rebuilds only what changed) and the lazy `Node`s
 * the user holds are never touched by a pass.
 */
import type { DType } from "../../tensor/dtype.ts";
import { numel } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";
import { staleError, type Node } from "../node.ts";
import type { OpDef } from "../op.ts";

let nextId = 0;

export interface GNode {
  readonly id: number;
  /** null for a leaf (an existing buffer). */
  readonly op: OpDef | null;
  readonly inputs: readonly GNode[];
  readonly attrs: unknown;
  readonly shape: readonly number[];
  readonly dtype: DType;
  /** Leaves: the buffer (its values are bound when a plan runs, never baked into the plan). */
  readonly leaf: TensorData | null;
  /** Leaves: a literal constant (wrapped scalar, mask) that constant folding may compute with. */
  readonly constant: boolean;
  /** The lazy nodes whose value this node computes (several after CSE). */
  readonly origins: readonly Node[];
  /** Keep this value in its own buffer when it is materialized (a later backward may read it). */
  readonly retain: boolean;
}

export interface Graph {
  /** Topological order, inputs before users; exactly the nodes reachable from `outputs`. */
  readonly nodes: readonly GNode[];
  readonly outputs: readonly GNode[];
  /** Set by `rewrite`: whether any node was replaced. */
  readonly changed?: boolean;
}

export function mkNode(
  op: OpDef, inputs: readonly GNode[], attrs: unknown, shape: readonly number[], dtype: DType,
  origins: readonly Node[] = [], retain = false,
): GNode {
  return { id: nextId++, op, inputs, attrs, shape, dtype, leaf: null, constant: false, origins, retain };
}

export function mkLeaf(data: TensorData, constant: boolean, origins: readonly Node[] = []): GNode {
  return { id: nextId++, op: null, inputs: [], attrs: null, shape: data.shape, dtype: data.dtype, leaf: data, constant, origins, retain: false };
}

/** A copy of `n` with other inputs (and optionally more origins). */
export function withInputs(n: GNode, inputs: readonly GNode[]): GNode {
  return { ...n, id: nextId++, inputs };
}

/** Nodes reachable from `outputs`, inputs first (iterative DFS: graphs can be thousands deep). */
export function topo(outputs: readonly GNode[]): GNode[] {
  const order: GNode[] = [];
  const seen = new Set<GNode>();
  const stack: [GNode, number][] = [];
  for (const r of outputs) {
    if (seen.has(r)) continue;
    seen.add(r);
    stack.push([r, 0]);
    while (stack.length) {
      const top = stack[stack.length - 1]!;
      const n = top[0];
      if (top[1] < n.inputs.length) {
        const c = n.inputs[top[1]++]!;
        if (!seen.has(c)) {
          seen.add(c);
          stack.push([c, 0]);
        }
      } else {
        stack.pop();
        order.push(n);
      }
    }
  }
  return order;
}

export function makeGraph(outputs: readonly GNode[]): Graph {
  return { nodes: topo(outputs), outputs };
}

/**
 * The pending graph below `roots` as IR. Realized lazy nodes become leaves; `retainAll` marks
 * every op node for keeping (evaluations during backward share their intermediates).
 */
export function fromLazy(roots: readonly Node[], retainAll = false): Graph {
  const map = new Map<Node, GNode>();
  const stack: [Node, number][] = [];
  const visit = (r: Node) => {
    if (map.has(r)) return;
    stack.push([r, 0]);
    while (stack.length) {
      const top = stack[stack.length - 1]!;
      const n = top[0];
      if (!n.realized && top[1] < n.inputs.length) {
        const c = n.inputs[top[1]++]!;
        if (!map.has(c)) stack.push([c, 0]);
        continue;
      }
      stack.pop();
      if (map.has(n)) continue;
      if (n.stale) throw staleError(n);
      if (n.realized) map.set(n, mkLeaf(n.realized, n.constant, [n]));
      else {
        const keep = retainAll || (n.tracked !== null && !n.tracked.released);
        map.set(n, mkNode(n.op!, n.inputs.map((c) => map.get(c)!), n.attrs, n.shape, n.dtype, [n], keep));
      }
    }
  };
  for (const r of roots) visit(r);
  return makeGraph(roots.map((r) => map.get(r)!));
}

/**
 * Rebuild `g` bottom-up: `rule(n, inputs, rewritten)` sees each node with its already rewritten
 * inputs and returns a replacement, or null to keep it (copied only when an input changed);
 * `rewritten(m)` is the new form of any node m before n in `g.nodes` (a rule that reaches past
 * n's inputs, as mergeSliceBackwards does). Unreachable nodes disappear (dead-node elimination is
 * the rebuild itself).
 */
export function rewrite(g: Graph, rule: (n: GNode, inputs: readonly GNode[], rewritten: (m: GNode) => GNode) => GNode | null): Graph {
  const map = new Map<GNode, GNode>();
  const rewritten = (m: GNode) => map.get(m)!;
  let changed = false;
  for (const n of g.nodes) {
    const ins = n.inputs.map(rewritten);
    const r = rule(n, ins, rewritten);
    if (r) {
      map.set(n, r);
      if (r !== n) changed = true;
    } else map.set(n, ins.every((c, i) => c === n.inputs[i]) ? n : withInputs(n, ins));
  }
  if (!changed) return g;
  return { ...makeGraph(g.outputs.map((o) => map.get(o)!)), changed };
}

/** Users of every node, in topological order of the users (a user appears once per input slot). */
export function usersOf(g: Graph): Map<GNode, GNode[]> {
  const users = new Map<GNode, GNode[]>();
  for (const n of g.nodes) users.set(n, []);
  for (const n of g.nodes) for (const c of n.inputs) users.get(c)!.push(n);
  return users;
}

const canonCache = new WeakMap<object, string>();

/**
 * Canonical text of attrs for hashing and CSE (-0, NaN and Infinity kept distinct).
 * @param cache - remember the text of objects (attrs seen again by later passes); false for a one-off
 */
export function canon(v: unknown, cache = true): string {
  if (v === null || v === undefined) return "_";
  if (typeof v === "number") return Object.is(v, -0) ? "-0" : String(v);
  if (typeof v === "string") return JSON.stringify(v);
  if (typeof v === "boolean") return v ? "T" : "F";
  if (typeof v !== "object") return String(v);
  if (!Array.isArray(v)) {
    let empty = true;
    for (const _k in v) { empty = false; break; }
    if (empty) return "{}";
  }
  const hit = canonCache.get(v);
  if (hit !== undefined) return hit;
  let s: string;
  if (Array.isArray(v)) {
    s = "[";
    for (let i = 0; i < v.length; i++) s += (i ? "," : "") + canon(v[i], cache);
    s += "]";
  } else if ("name" in v && "kind" in v && typeof (v as { kind: unknown }).kind === "string") s = `@${(v as { name: string }).name}`;
  else {
    s = "{";
    for (const k in v) s += `${k}:${canon((v as Record<string, unknown>)[k], cache)},`;
    s += "}";
  }
  if (cache) canonCache.set(v, s);
  return s;
}

/**
 * Leaf layout text: shape, strides (the plan bakes strides into loads) and dtype. A size-1
 * dimension's stride addresses nothing, so it is left out (0): layouts differing only there share
 * a plan.
 */
function leafKey(d: TensorData): string {
  return `${d.dtype}[${d.shape.join(",")}]/[${d.strides.map((s, k) => (d.shape[k] === 1 ? 0 : s)).join(",")}]`;
}

/**
 * The structural key of a graph: ops, attrs, dtypes, leaf layouts, wiring, which nodes are kept
 * and which are outputs, but never the values of leaves. Equal keys compile to the same plan, so
 * a training loop that builds the same graph every step plans once.
 */
export function structuralKey(g: Graph, extra = ""): string {
  const index = new Map<GNode, number>();
  const parts: string[] = [extra];
  g.nodes.forEach((n, i) => {
    index.set(n, i);
    if (!n.op) parts.push(`L${n.constant ? "c" : ""}${leafKey(n.leaf!)}`);
    else parts.push(`${n.op.name}${canon(n.attrs)}(${n.inputs.map((c) => index.get(c)).join(",")})${n.retain ? "!" : ""}`);
  });
  parts.push(`->${g.outputs.map((o) => index.get(o)).join(",")}`);
  return parts.join(";");
}

/** The leaves of `g` in topological order: the order a plan binds its input buffers. */
export function leavesOf(g: Graph): GNode[] {
  return g.nodes.filter((n) => !n.op);
}

export function isView(n: GNode): boolean {
  return n.op?.kind === "view";
}

/** Storage bytes of a node's dense buffer. */
export function nodeBytes(n: { shape: readonly number[]; dtype: DType }, itemsize: (d: DType) => number): number {
  return numel(n.shape) * itemsize(n.dtype);
}

/** Follow views down to the node that owns the storage (a leaf or a computed node). */
export function baseOf(n: GNode): GNode {
  let b = n;
  while (b.op?.kind === "view") b = b.inputs[0]!;
  return b;
}
