/**
 * The graph compiler: pending lazy graph -> simplified graph -> (plan cache) -> named patterns ->
 * fusion -> schedule (slots, views resolved to strides, liveness, in-place, workspace offsets)
 * -> CompiledPlan.
 *
 * Simplification runs on every realize (it is linear and it may use constant values); its result
 * is hashed structurally (ops, attrs, dtypes, leaf layouts, wiring; never leaf values) and the
 * rest is cached by that key, so a training loop that builds the same graph each step compiles
 * once. Leaf values (weights, folded constants, scalars like a learning rate) are plan inputs.
 */
import type { Backend, InputLayout } from "../backends/backend.ts";
import type { Tolerance } from "../backends/catalog.ts";
import { jsBackend } from "../backends/js/backend.ts";
import type { Node } from "../graph/node.ts";
import { fuse, type FusionCaps } from "../graph/passes/fuse.ts";
import { OPS } from "../graph/registry.ts";
import { fromLazy, leavesOf, structuralKey, type GNode, type Graph } from "../graph/passes/ir.ts";
import { layouts, legalizeViews } from "../graph/passes/layout.ts";
import { matchPatterns } from "../graph/passes/patterns.ts";
import type { Program } from "../graph/passes/program.ts";
import { simplify, type Evaluate } from "../graph/passes/simplify.ts";
import { itemsize } from "../tensor/dtype.ts";
import { contiguousStrides, numel } from "../tensor/shape.ts";
import { planMemory, type TransientBuffer } from "./memory.ts";
import { clearSymbolic, symbolBinding, symbolicPlan } from "./symbolic.ts";
import { addRecipe, clearRecipes, contextId, findRecipe, FoldRecorder, Recipe, removeRecipe, walk, type Binding, type Walk } from "./fingerprint.ts";
import { compilerOptions, explainEnabled, optionsKey } from "./options.ts";
import { CompiledPlan, denseBytes, type Arg, type Instruction, type Slot } from "./plan.ts";
import { kernelDbGeneration } from "./kernel_db.ts";
import { prepareKernel } from "./select.ts";

// ---- plan cache ----------------------------------------------------------------------------------
const MAX_PLANS = 256;
const plans = new Map<string, CompiledPlan>();
/**
 * Plan cache counters: hits (a graph seen before), misses (compiled), entries held; `fastHits`:
 * the hits whose lazy graph had a known fingerprint, so no pass ran (fingerprint.ts).
 */
export const planCacheStats = { hits: 0, misses: 0, fastHits: 0, get size() { return plans.size; } };

export function clear_plan_cache(): void {
  plans.clear();
  clearRecipes();
  clearSymbolic();
  planCacheStats.hits = 0;
  planCacheStats.misses = 0;
  planCacheStats.fastHits = 0;
}

/** The plans in the cache, least recently used first (`loom tune` walks them). */
export function cachedPlans(): CompiledPlan[] {
  return [...plans.values()];
}

export interface Compiled {
  plan: CompiledPlan;
  /** The plan's input buffers and the lazy nodes its outputs belong to. */
  binding: Binding;
  hit: boolean;
}

/** Fused ops the backend can run (none for backends that cannot prepare kernels), and its kernels' input limit. */
function capsOf(backend: Backend): FusionCaps {
  return { fused: new Set(backend.prepare ? backend.fusedOps ?? [] : []), maxInputs: backend.maxKernelInputs };
}

const evaluators = new WeakMap<Backend, Evaluate | undefined>();
/**
 * How constant folding computes on `backend`: with the backend now; constants are host data, so
 * device-memory backends (webgpu) fold them on the host with the js reference backend.
 */
function evaluatorOf(backend: Backend): Evaluate | undefined {
  if (evaluators.has(backend)) return evaluators.get(backend);
  const e = !backend.prepare ? undefined : backend.deviceMemory ? jsBackend.run.bind(jsBackend) : backend.run.bind(backend);
  evaluators.set(backend, e);
  return e;
}

/**
 * The binding of a compiled simplified graph: its leaves' buffers and its values' lazy nodes
 * (the assigned values among the outputs too: their nodes take the destination buffers).
 */
function bindingOf(graph: Graph, plan: CompiledPlan): Binding {
  return {
    leaves: leavesOf(graph).map((n) => n.leaf!),
    outputs: graph.outputs.map((o) => o.origins),
    kept: plan.keep.map((k) => graph.nodes[k.node]!.origins),
  };
}

/** The last context text and its number: asked for on every realize, it rarely changes. */
const last = { backend: null as Backend | null, device: "", options: "", generation: -1, text: "", id: -1 };

/**
 * What a plan depends on besides its graph: backend, device, compiler options and the kernel
 * database's generation (kernel selection reads it).
 */
function contextOf(backend: Backend, device: string): string {
  const o = optionsKey(), g = kernelDbGeneration();
  if (backend !== last.backend || device !== last.device || o !== last.options || g !== last.generation) {
    last.text = `${backend.name}:${device}:${o}:${g}`;
    Object.assign(last, { backend, device, options: o, generation: g, id: contextId(last.text) });
  }
  return last.text;
}

/**
 * Compile (or fetch from the cache) the plan computing `roots` on `backend`. A graph seen before
 * (same fingerprint, see fingerprint.ts) skips the passes: its recipe binds the cached plan's
 * inputs directly; otherwise the graph is simplified and the plan looked up by structural key.
 * @param retainAll - keep every materialized value (for evaluations that share intermediates)
 * @param writes - the last `writes` roots are assigned values: the plan writes each into a
 *   destination buffer given to `run` (CompiledPlan.destSlots) instead of a fresh output
 */
export function compile(roots: readonly Node[], backend: Backend, device = "cpu", retainAll = false, writes = 0): Compiled {
  const opts = compilerOptions();
  const evaluate = opts.simplify ? evaluatorOf(backend) : undefined;
  let context = contextOf(backend, device);
  let ctxId = last.id;
  if (writes > 0) {
    context += `|assigns ${writes}`;
    ctxId = contextId(context);
  }
  let w: Walk | null = null;
  if (opts.cache) {
    w = walk(roots, ctxId, retainAll);
    const r = findRecipe(w);
    if (r) {
      const binding = r.bind(w, evaluate);
      if (binding) {
        planCacheStats.hits++;
        planCacheStats.fastHits++;
        return { plan: r.plan, binding, hit: true };
      }
      removeRecipe(w, r); // a folded value now simplifies differently: the full path makes a new one
    }
    w = { ...w, words: w.words.slice(0, w.length) }; // the scratch words are reused by any later walk
  }
  const recorder = w ? new FoldRecorder(w, evaluate) : null;
  const raw = fromLazy(roots, retainAll);
  const graph = opts.simplify ? simplify(raw, { evaluate: recorder ? recorder.evaluate : evaluate }) : raw;
  // a graph over a symbolic dimension: an instance of its template (symbolic.ts)
  if (opts.cache && opts.symbolic) {
    const sym = symbolicPlan(graph, context, backend, opts.tolerance, (g, k) => buildPlan(g, backend, device, k, writes));
    if (sym) {
      if (sym.compiled) planCacheStats.misses++;
      else planCacheStats.hits++;
      if (sym.compiled && explainEnabled()) console.error(sym.plan.explain());
      if (w && recorder) remember(w, recorder, sym.plan, graph);
      return { plan: sym.plan, binding: bindingOf(graph, sym.plan), hit: !sym.compiled };
    }
  } else symbolBinding(graph); // the range check alone
  const key = structuralKey(graph, context);
  let plan = opts.cache ? plans.get(key) : undefined;
  const hit = plan !== undefined;
  if (plan) {
    planCacheStats.hits++;
    plans.delete(key);
    plans.set(key, plan); // most recently used last
  } else {
    planCacheStats.misses++;
    plan = buildPlan(graph, backend, device, key, writes);
    if (opts.cache) {
      plans.set(key, plan);
      if (plans.size > MAX_PLANS) plans.delete(plans.keys().next().value!);
    }
    if (explainEnabled()) console.error(plan.explain());
  }
  if (w && recorder) remember(w, recorder, plan, graph);
  return { plan, binding: bindingOf(graph, plan), hit };
}

/** A recipe for the walked graph's fingerprint, so the next graph like it skips the passes. */
function remember(w: Walk, recorder: FoldRecorder, plan: CompiledPlan, graph: Graph): void {
  const recipe = Recipe.make(w, plan, graph, recorder);
  if (recipe) addRecipe(w, recipe);
}

/** Passes after the cache lookup: view legalization, patterns, fusion; then scheduling. */
export function buildPlan(graph: Graph, backend: Backend, device: string, key: string, writes = 0): CompiledPlan {
  const opts = compilerOptions();
  const caps = capsOf(backend);
  const legal = legalizeViews(graph);
  const unfused = legal.nodes.filter((n) => n.op && n.op.kind !== "view").length;
  let g = legal;
  if (opts.patterns) g = matchPatterns(g, caps);
  if (opts.fuse) g = fuse(g, caps);
  return schedule(g, graph, backend, device, key, unfused, opts.inplace, opts.tolerance, writes);
}

/** Whether instruction `I` reads slot `b` only element for element at the output's index. */
function readsInPlace(I: { op: { name: string; kind: string }; attrs: unknown; args: readonly Arg[]; shape: readonly number[] }, b: number, slots: readonly Slot[]): boolean {
  const dense = contiguousStrides(I.shape);
  const identity = (strides: readonly number[], offset: number) =>
    offset === 0 && I.shape.every((s, d) => s === 1 || strides[d] === dense[d]);
  if (numel(slots[b]!.shape) !== numel(I.shape)) return false;
  if (I.op.name === "fused_elementwise") {
    const p = (I.attrs as { program: Program }).program;
    return I.args.every((a, k) => a.slot !== b || (a.view === null &&
      p.code.every((c) => c.k !== "load" || c.input !== k || identity(c.strides, c.offset))));
  }
  if (I.op.kind === "elementwise") {
    return I.args.every((a) => a.slot !== b || (a.view === null ? slots[b]!.shape.length === I.shape.length && slots[b]!.shape.every((s, d) => s === I.shape[d]) : a.view.shape.length === I.shape.length && identity(a.view.strides, a.view.offset)));
  }
  return false;
}

/** Slots, instructions, liveness, in-place choices and workspace offsets for a fused graph. */
function schedule(g: Graph, simplified: Graph, backend: Backend, device: string, key: string, unfused: number, inplace: boolean, tolerance: Tolerance, writes: number): CompiledPlan {
  const lay = layouts(g);
  const slots: Slot[] = [];
  const slotOf = new Map<GNode, number>();
  const leafIndex = new Map(leavesOf(simplified).map((n, i) => [n, i]));
  const leafSlots = new Array<number>(leafIndex.size).fill(-1);
  const sIndex = new Map<Node, number>();
  simplified.nodes.forEach((n, i) => { for (const o of n.origins) sIndex.set(o, i); });
  // assigned values (the last `writes` outputs) are written into their destinations, not returned
  const nOut = g.outputs.length - writes;
  const escapes = new Set(g.outputs.slice(0, nOut).map((o) => lay.get(o)!.base));
  const arg = (x: GNode): Arg => {
    const l = lay.get(x)!;
    const slot = slotOf.get(l.base)!;
    return { slot, view: x === l.base ? null : { shape: l.shape, strides: l.strides, offset: l.offset } };
  };
  const leafStrides = new Map<number, readonly number[]>();
  /** An operand's layout as its kernel reads it: the view, else the leaf's strides or a dense slot. */
  const layoutOf = (a: Arg): InputLayout => {
    const sl = slots[a.slot]!;
    if (a.view) return { shape: a.view.shape, strides: a.view.strides, dtype: sl.dtype };
    return { shape: sl.shape, strides: sl.kind === "leaf" ? leafStrides.get(a.slot)! : contiguousStrides(sl.shape), dtype: sl.dtype };
  };
  const instructions: Instruction[] = [];
  const keep: { slot: number; node: number }[] = [];
  const def: number[] = [];
  const last: number[] = [];
  for (const n of g.nodes) {
    if (!n.op) {
      const s = slots.push({ kind: "leaf", dtype: n.dtype, shape: n.shape, bytes: 0, offset: 0 }) - 1;
      slotOf.set(n, s);
      leafStrides.set(s, n.leaf!.strides);
      leafSlots[leafIndex.get(n)!] = s;
      continue;
    }
    if (n.op.kind === "view") continue;
    const own = escapes.has(n) || n.retain;
    const s = slots.push({ kind: own ? "own" : "ws", dtype: n.dtype, shape: n.shape, bytes: backend.deviceMemory ? numel(n.shape) * backend.deviceMemory.elementBytes(n.dtype) : denseBytes(n.shape, n.dtype), offset: 0 }) - 1;
    slotOf.set(n, s);
    const args = n.inputs.map(arg);
    const i = instructions.length;
    for (const a of args) last[a.slot] = i;
    def[s] = i;
    last[s] = i;
    const layouts = args.map(layoutOf);
    const prepared = prepareKernel(backend, { op: n.op, inputs: layouts, attrs: n.attrs, shape: n.shape, dtype: n.dtype }, tolerance);
    instructions.push({ op: n.op, attrs: n.attrs, args, layouts, out: s, shape: n.shape, dtype: n.dtype, kernel: prepared?.kernel ?? null, impl: prepared?.impl ?? "", inplace: false });
    if (n.retain) {
      const idx = n.origins.length ? sIndex.get(n.origins[0]!) : undefined;
      if (idx !== undefined) keep.push({ slot: s, node: idx });
    }
  }
  const outputs = g.outputs.slice(0, nOut).map(arg);
  // assigns: one copy into each destination after every other instruction, so every read of a
  // destination's old value (a leaf over the same storage) has happened before it is overwritten
  const destSlots: number[] = [];
  for (const o of g.outputs.slice(nOut)) {
    const a = arg(o);
    const s = slots.push({ kind: "dest", dtype: o.dtype, shape: o.shape, bytes: 0, offset: 0 }) - 1;
    destSlots.push(s);
    const layout = layoutOf(a);
    const i = instructions.length;
    last[a.slot] = i;
    const prepared = prepareKernel(backend, { op: OPS.contiguous, inputs: [layout], attrs: {}, shape: o.shape, dtype: o.dtype }, tolerance);
    instructions.push({ op: OPS.contiguous, attrs: {}, args: [a], layouts: [layout], out: s, shape: o.shape, dtype: o.dtype, kernel: prepared?.kernel ?? null, impl: prepared?.impl ?? "", inplace: false });
  }
  // in-place: an elementwise kernel may write over a transient input that dies at it
  const inplaceOf = new Map<number, number>();
  const taken = new Set<number>();
  if (inplace && backend.prepare) {
    instructions.forEach((I, i) => {
      if (slots[I.out]!.kind !== "ws") return;
      for (const a of I.args) {
        const b = a.slot, sb = slots[b]!;
        if (sb.kind !== "ws" || last[b] !== i || taken.has(b)) continue;
        if (sb.bytes !== slots[I.out]!.bytes || itemsize[sb.dtype] !== itemsize[I.dtype]) continue;
        if (!readsInPlace(I, b, slots)) continue;
        inplaceOf.set(I.out, b);
        taken.add(b);
        instructions[i] = { ...I, inplace: true };
        break;
      }
    });
  }
  const wsSlots = slots.map((s, i) => (s.kind === "ws" ? i : -1)).filter((i) => i >= 0);
  const wsIndex = new Map(wsSlots.map((s, k) => [s, k]));
  const bufs: TransientBuffer[] = wsSlots.map((s) => ({
    bytes: slots[s]!.bytes, def: def[s]!, last: last[s]!,
    inplaceOf: inplaceOf.has(s) ? wsIndex.get(inplaceOf.get(s)!)! : null,
  }));
  const memory = planMemory(bufs);
  wsSlots.forEach((s, k) => { slots[s] = { ...slots[s]!, offset: memory.offsets[k]! }; });
  return new CompiledPlan({ key, device, backend, instructions, slots, leafSlots, outputs, destSlots, keep, memory, transients: bufs, unfusedKernels: unfused });
}
