/**
 * Generic fusion: groups of ops become one kernel each.
 * - Any tree of elementwise ops (through broadcasts and stride-only views) is one
 *   `fused_elementwise`; a value used by several members is computed once per distinct mapping,
 *   and a cheap value read by several groups is recomputed in each rather than stored.
 * - A reduction absorbs its elementwise prologue (`sum(x*x)` reads x once) and, when its result is
 *   consumed element for element, its elementwise epilogue (`sum(...) / n + eps`).
 * - A matmul absorbs an elementwise epilogue consumed element for element (bias, GELU, residual).
 * Nothing that is an output, or that is used outside its group, is fused away.
 *
 * Groups are formed consumers-first (reverse topological order): a node joins its consumers'
 * group when all of them are in one group and read it in the same index space, and the group
 * then still reads at most `caps.maxInputs` distinct buffers.
 */
import { numel } from "../../tensor/shape.ts";
import { isFloating } from "../../tensor/dtype.ts";
import type { OpDef } from "../op.ts";
import { fused_elementwise, fused_matmul, fused_reduce } from "./fused_ops.ts";
import { makeGraph, mkNode, usersOf, withInputs, type GNode, type Graph } from "./ir.ts";
import { layouts, type Layout } from "./layout.ts";
import { buildProgram, isIdentityMapping, safeView, stepsKey, viewChain, type Step } from "./program_builder.ts";

/** What the backend can run: names of fused ops it has kernels for, and how many inputs one kernel may read. */
export interface FusionCaps {
  readonly fused: ReadonlySet<string>;
  /**
   * Most distinct input buffers one fused kernel may bind (webgpu: the adapter's
   * maxStorageBuffersPerShaderStage less the output). Absent: unbounded.
   */
  readonly maxInputs?: number;
}

/** Largest number of members of one group (bounds generated code and recursion). */
const MAX_MEMBERS = 192;
/** Distinct mappings one member may be recomputed under. */
const MAX_INSTANCES = 4;
/** Ops not worth recomputing per element of a larger (broadcast) space. */
const EXPENSIVE = new Set(["exp", "log", "log1p", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf", "pow"]);

type Kind = "ew" | "reduce" | "matmul" | "single";

interface Group {
  kind: Kind;
  /** The node whose value the group's kernel writes. */
  root: GNode;
  /** The reduction or matmul the group is built around. */
  core: GNode | null;
  /** Elementwise members -> "main" (ew group / epilogue) or "pro" (prologue), with their mappings. */
  members: Map<GNode, { space: "main" | "pro"; maps: Map<string, Step[]> }>;
}

interface Use {
  consumer: GNode;
  /** Views between the value and the consumer's input slot, in the order they apply. */
  views: GNode[];
}

/** Uses of `n` through view chains; null when a view chain or `n` is an output. */
function usesOf(n: GNode, users: Map<GNode, GNode[]>, outputs: ReadonlySet<GNode>): Use[] | null {
  if (outputs.has(n)) return null;
  const out: Use[] = [];
  const stack: [GNode, GNode[]][] = [[n, []]];
  while (stack.length) {
    const [v, chain] = stack.pop()!;
    for (const u of users.get(v)!) {
      if (u.op?.kind === "view") {
        if (outputs.has(u)) return null;
        stack.push([u, [...chain, u]]);
      } else out.push({ consumer: u, views: chain });
    }
  }
  return out;
}

/** Marks a node recomputed inside several groups (it belongs to none of them alone). */
const DUP: Group = { kind: "single", root: null as never, core: null, members: new Map() };

export function fuse(g: Graph, caps: FusionCaps): Graph {
  const users = usersOf(g);
  const outputs = new Set(g.outputs);
  const lay = layouts(g);
  const groupOf = new Map<GNode, Group>();
  const can = (name: string) => caps.fused.has(name);

  const newGroup = (n: GNode, kind: Kind, core: GNode | null = null): Group => {
    const grp: Group = { kind, root: n, core, members: new Map() };
    if (kind === "ew") grp.members.set(n, { space: "main", maps: new Map([["", []]]) });
    groupOf.set(n, grp);
    return grp;
  };

  /** Mappings of `n` into a group when each use is in it, or null. */
  const mappingsInto = (n: GNode, uses: Use[]): { grp: Group; space: "main" | "pro"; maps: Map<string, Step[]> } | null => {
    let grp: Group | null = null;
    let space: "main" | "pro" | null = null;
    const maps = new Map<string, Step[]>();
    for (const u of uses) {
      const cg = groupOf.get(u.consumer);
      if (!cg || (grp && cg !== grp) || !u.views.every(safeView)) return null;
      grp = cg;
      const vsteps: Step[] = u.views.map((v) => ({ kind: "view", node: v }));
      let s: "main" | "pro";
      if (cg.members.has(u.consumer)) {
        const m = cg.members.get(u.consumer)!;
        s = m.space;
        for (const cm of m.maps.values()) {
          const st: Step[] = [...vsteps, { kind: "bcast", to: u.consumer.shape }, ...cm];
          maps.set(stepsKey(st), st);
        }
      } else if (cg.core === u.consumer && cg.kind === "reduce" && u.consumer.inputs[0] === (u.views[u.views.length - 1] ?? n)) {
        s = "pro";
        maps.set(stepsKey(vsteps), vsteps);
      } else return null;
      if (space && s !== space) return null;
      space = s;
    }
    return grp && space ? { grp, space, maps } : null;
  };

  /** Distinct buffers the group's kernel would read with `extra` added as a member (or core). */
  const inputCount = (grp: Group, extra: GNode): number => {
    const inside = (x: GNode) => x === extra || x === grp.core || grp.members.has(x);
    const bases = new Set<GNode>();
    for (const m of [...grp.members.keys(), ...(grp.core ? [grp.core] : []), extra]) {
      for (const c of m.inputs) {
        const b = viewChain(c).base;
        if (!inside(b)) bases.add(lay.get(c)?.base ?? b);
      }
    }
    return bases.size;
  };
  const fits = (grp: Group, extra: GNode) => caps.maxInputs === undefined || inputCount(grp, extra) <= caps.maxInputs;

  const spaceShape = (grp: Group, space: "main" | "pro") =>
    space === "main" ? grp.root.shape : grp.core!.inputs[0]!.shape;

  const tryJoin = (n: GNode): boolean => {
    if (!can("fused_elementwise")) return false;
    const uses = usesOf(n, users, outputs);
    if (!uses || uses.length === 0) return false;
    const m = mappingsInto(n, uses);
    if (!m || m.maps.size > MAX_INSTANCES || m.grp.members.size >= MAX_MEMBERS || !fits(m.grp, n)) return false;
    if (EXPENSIVE.has(n.op!.name) && numel(spaceShape(m.grp, m.space)) > numel(n.shape)) return false;
    m.grp.members.set(n, { space: m.space, maps: m.maps });
    groupOf.set(n, m.grp);
    return true;
  };

  /**
   * A cheap elementwise value read by several groups is recomputed inside each of them instead of
   * being written and read back (its own producers are then materialized: one level only).
   */
  const tryDuplicate = (n: GNode): boolean => {
    if (!can("fused_elementwise") || EXPENSIVE.has(n.op!.name)) return false;
    const uses = usesOf(n, users, outputs);
    if (!uses || uses.length === 0) return false;
    const per = new Map<Group, Use[]>();
    for (const u of uses) {
      const cg = groupOf.get(u.consumer);
      if (!cg || cg === DUP) return false;
      per.set(cg, [...(per.get(cg) ?? []), u]);
    }
    if (per.size < 2 || per.size > 4) return false;
    const joins = [...per.values()].map((us) => mappingsInto(n, us));
    if (joins.some((m) => !m || m.maps.size > MAX_INSTANCES || m.grp.members.size >= MAX_MEMBERS || !fits(m.grp, n))) return false;
    for (const m of joins) m!.grp.members.set(n, { space: m!.space, maps: m!.maps });
    groupOf.set(n, DUP);
    return true;
  };

  /** Attach a reduction/matmul as the core of the one elementwise group consuming it element for element. */
  const tryAttach = (n: GNode, kind: "reduce" | "matmul"): boolean => {
    const uses = usesOf(n, users, outputs);
    if (!uses || uses.length === 0) return false;
    const grp = groupOf.get(uses[0]!.consumer);
    if (!grp || grp.kind !== "ew" || grp.members.size >= MAX_MEMBERS || !fits(grp, n)) return false;
    for (const u of uses) {
      const m = grp.members.get(u.consumer);
      if (groupOf.get(u.consumer) !== grp || !m || !u.views.every(safeView)) return false;
      for (const cm of m.maps.values()) {
        const st: Step[] = [...u.views.map((v): Step => ({ kind: "view", node: v })), { kind: "bcast", to: u.consumer.shape }, ...cm];
        if (!isIdentityMapping(n.shape, st, grp.root.shape)) return false;
      }
    }
    grp.kind = kind;
    grp.core = n;
    groupOf.set(n, grp);
    return true;
  };

  for (let i = g.nodes.length - 1; i >= 0; i--) {
    const n = g.nodes[i]!;
    if (!n.op || n.op.kind === "view") continue;
    switch (n.op.kind) {
      case "elementwise":
        if (!tryJoin(n) && !tryDuplicate(n)) newGroup(n, can("fused_elementwise") ? "ew" : "single");
        break;
      case "reduce":
        if (!can("fused_reduce")) newGroup(n, "single");
        else if (!tryAttach(n, "reduce")) newGroup(n, "reduce", n);
        break;
      default:
        if (n.op.name === "matmul" && can("fused_matmul") && isFloating(n.dtype) && n.dtype !== "float16" && n.dtype !== "bfloat16" && tryAttach(n, "matmul")) break;
        newGroup(n, "single", n);
    }
  }
  return materialize(g, groupOf, lay);
}

/** Replace every group by its fused node; leaves, views of materialized values and single ops stay. */
function materialize(g: Graph, groupOf: Map<GNode, Group>, lay: Map<GNode, Layout | null>): Graph {
  const done = new Map<GNode, GNode>();
  const layout = (n: GNode) => lay.get(n)!;
  const map = (n: GNode): GNode => done.get(n)!;
  for (const n of g.nodes) {
    if (!n.op) { done.set(n, n); continue; }
    if (n.op.kind === "view") {
      // kept only if something still reads it (a single op or an output); rebuilt over the new input
      const x = done.get(n.inputs[0]!);
      if (x) done.set(n, x === n.inputs[0] ? n : withInputs(n, [x]));
      continue;
    }
    const grp = groupOf.get(n)!;
    if (grp.root !== n) continue; // fused away
    const bases: GNode[] = [];
    const inputOf = (b: GNode) => {
      let i = bases.indexOf(b);
      if (i < 0) i = bases.push(b) - 1;
      return i;
    };
    const ctx = (shape: readonly number[], space: "main" | "pro") => ({
      shape, layout, inputOf, acc: grp.core,
      member: (m: GNode) => grp.members.get(m)?.space === space,
    });
    const mk = (op: OpDef, ins: GNode[], attrs: unknown) => mkNode(op, ins.map(map), attrs, n.shape, n.dtype, n.origins, n.retain);
    switch (grp.kind) {
      case "single":
        done.set(n, n.inputs.every((c) => map(c) === c) ? n : withInputs(n, n.inputs.map(map)));
        break;
      case "ew": {
        const program = buildProgram(ctx(n.shape, "main"), n);
        done.set(n, mk(fused_elementwise, bases, { program }));
        break;
      }
      case "reduce": {
        const r = grp.core!;
        const a = r.attrs as { dim: readonly number[]; keepdim: boolean };
        const prologue = buildProgram(ctx(r.inputs[0]!.shape, "pro"), r.inputs[0]!);
        const epilogue = r === n ? null : buildProgram(ctx(n.shape, "main"), n);
        done.set(n, mk(fused_reduce, bases, { prologue, reduce: r.op, dim: a.dim, keepdim: a.keepdim, dtype: r.dtype, epilogue }));
        break;
      }
      case "matmul": {
        const m = grp.core!;
        inputOf(m.inputs[0]!);
        inputOf(m.inputs[1]!);
        const epilogue = buildProgram(ctx(n.shape, "main"), n);
        done.set(n, mk(fused_matmul, bases, { epilogue, dtype: m.dtype, shape: m.shape }));
        break;
      }
    }
  }
  return makeGraph(g.outputs.map(map));
}
