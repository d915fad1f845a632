/**
 * The plan-cache fast path: a numeric fingerprint of the pending lazy graph, and a recipe that
 * turns a graph with a known fingerprint into a plan's inputs without running the passes.
 *
 * Compiling a graph (compile.ts) snapshots it (fromLazy), simplifies it and hashes the result
 * structurally; for a training loop or a small op read at once that costs more than running the
 * plan (µs per node). Everything simplification decides is a function of what the fingerprint
 * holds, so two graphs with equal fingerprints simplify to the same graph:
 * - per op node: op, attrs (as words: numbers, flags, interned texts), input wiring, whether it is kept;
 * - per leaf: dtype, shape, strides, the constant flag, a constant's value class (the value
 *   itself when identity elimination or CSE may look at it: multiples of 1/8, -0 apart; else only
 *   "uniform" or not), and which earlier leaf shares its storage, at what offset difference (CSE
 *   merges leaves over the same storage and layout);
 * - the roots, retainAll, and the backend/device/options context.
 * Constant folding computes values, and later rewrites may look at them: the recipe replays the
 * folds (the same ops on this graph's constants) and checks that each result has the value class,
 * layout and storage sharing it had when the recipe was made; any difference falls back to the
 * full path. Leaf values never enter the fingerprint: they are bound when the plan runs.
 */
import type { TensorData } from "../tensor/storage.ts";
import { staleError, type Node } from "../graph/node.ts";
import type { OpDef } from "../graph/op.ts";
import { canon, type Graph } from "../graph/passes/ir.ts";
import { uniformValue, type Evaluate } from "../graph/passes/simplify.ts";
import type { CompiledPlan } from "./plan.ts";
import { rawData } from "../backends/native/program.ts";

/** The pending graph below some roots, walked once: its nodes (post-order) and fingerprint. */
export interface Walk {
  readonly nodes: Node[];
  /** Fingerprint words (a shared scratch buffer: valid until the next walk). */
  readonly words: Float64Array;
  readonly length: number;
  readonly hash: number;
}

// ---- scratch ----------------------------------------------------------------------------------
let words = new Float64Array(1024);
let epoch = 0;
const stackN: Node[] = [];
const stackI: number[] = [];
/**
 * Storages of the current walk's leaves and the first leaf over each: a short list scanned while
 * it is short (most graphs have few leaves), a Map beyond SCAN_MAX (a training step has hundreds).
 */
const leafStorages: unknown[] = [];
const leafFirst: Node[] = [];
const leafMap = new Map<unknown, Node>();
const SCAN_MAX = 16;

/** The first leaf of this walk over storage `s`, or undefined (and `x` becomes that leaf). */
function firstOver(s: unknown, x: Node): Node | undefined {
  const n = leafStorages.length;
  if (n < SCAN_MAX) {
    for (let k = 0; k < n; k++) if (leafStorages[k] === s) return leafFirst[k];
    leafStorages.push(s);
    leafFirst.push(x);
    if (n + 1 === SCAN_MAX) for (let k = 0; k <= n; k++) leafMap.set(leafStorages[k], leafFirst[k]!);
    return undefined;
  }
  const f = leafMap.get(s);
  if (f === undefined) leafMap.set(s, x);
  return f;
}

function clearLeaves(): void {
  leafStorages.length = 0;
  leafFirst.length = 0;
  if (leafMap.size) leafMap.clear();
}

function grow(need: number): void {
  let n = words.length;
  while (n < need) n *= 2;
  const w = new Float64Array(n);
  w.set(words);
  words = w;
}

// ---- interning and attrs ----------------------------------------------------------------------
/** Ops and texts (attr keys, strings, canonical text of other values) as small integers. */
const opIds = new Map<OpDef, number>();
const texts = new Map<string, number>();
/** Interned texts before the tables (and the recipes using their numbers) are reset. */
const MAX_TEXTS = 1 << 16;

function opId(op: OpDef): number {
  let id = opIds.get(op);
  if (id === undefined) opIds.set(op, (id = opIds.size));
  return id;
}

function textId(t: string): number {
  let id = texts.get(t);
  if (id === undefined) texts.set(t, (id = texts.size));
  return id;
}

// attrs words: a tag, then its payload; every value is self-delimiting, so equal words mean equal attrs
const T_NUM = 1, T_NEG0 = 2, T_NAN = 3, T_TRUE = 4, T_FALSE = 5, T_NULL = 6, T_UNDEF = 7, T_STR = 8, T_TEXT = 9, T_ARR = 10, T_OBJ = 11;

/** Words of one attrs value at `n` (as canon() tells values apart: -0, NaN, key order); returns the new end. */
function attrWords(v: unknown, n: number): number {
  if (n + 3 > words.length) grow(n + 3);
  switch (typeof v) {
    case "number":
      if (v !== v) words[n++] = T_NAN;
      else if (v === 0 && 1 / v < 0) words[n++] = T_NEG0;
      else { words[n++] = T_NUM; words[n++] = v; }
      return n;
    case "boolean":
      words[n++] = v ? T_TRUE : T_FALSE;
      return n;
    case "undefined":
      words[n++] = T_UNDEF;
      return n;
    case "string":
      words[n++] = T_STR;
      words[n++] = textId(v);
      return n;
    case "object": {
      if (v === null) { words[n++] = T_NULL; return n; }
      if (Array.isArray(v)) {
        words[n++] = T_ARR;
        words[n++] = v.length;
        for (let i = 0; i < v.length; i++) n = attrWords(v[i], n);
        return n;
      }
      if ("name" in v && "kind" in v) break; // an op in attrs: its canonical text names it
      words[n++] = T_OBJ;
      const count = n++;
      let k = 0;
      for (const key in v) {
        if (n + 1 > words.length) grow(n + 1);
        words[n++] = textId(key);
        n = attrWords((v as Record<string, unknown>)[key], n);
        k++;
      }
      words[count] = k;
      return n;
    }
  }
  words[n++] = T_TEXT;
  words[n++] = textId(canon(v, false));
  return n;
}

const DTYPE_CODE: Record<string, number> = {
  float32: 0, float64: 1, float16: 2, bfloat16: 3, int32: 4, int64: 5, int8: 6, uint8: 7, bool: 8,
};
/** Word opening the roots section (leaves open with -1 - dtype code, op nodes with their op's number >= 0). */
const ROOTS = -100;

/** The storage a buffer views (device buffers name theirs: reading `.data` would copy to the host). */
export function storageOf(d: TensorData): unknown {
  // webgpu views name their GpuStorage; a native output still being written names its array
  // under RAW (reading `data` would wait for the command buffer: consecutive plans would not overlap)
  return (d as { storage?: unknown }).storage ?? rawData(d);
}

// ---- walking ----------------------------------------------------------------------------------

/** Value class words of a constant leaf: [0, 0] not uniform, [1, 0] uniform, [2, v] a structural value, [3, 0] -0. */
function valueClass(d: TensorData, at: number): void {
  const v = uniformValue(d);
  if (v === null) { words[at] = 0; words[at + 1] = 0; }
  else if (Object.is(v, -0)) { words[at] = 3; words[at + 1] = 0; }
  else if (Number.isInteger(v * 8)) { words[at] = 2; words[at + 1] = v; }
  else { words[at] = 1; words[at + 1] = 0; }
}


/**
 * Walk the pending graph below `roots` (realized nodes are leaves; as fromLazy) and fingerprint it.
 * @param context - a number naming backend, device and compiler options (see contextId)
 */
export function walk(roots: readonly Node[], context: number, retainAll: boolean): Walk {
  if (texts.size > MAX_TEXTS) clearRecipes(); // attrs with ever new values (texts): start the numbering again
  const ep = ++epoch;
  const nodes: Node[] = [];
  stackN.length = 0;
  stackI.length = 0;
  clearLeaves();
  let n = 0;
  let h = 0x811c9dc5 ^ context;
  if (words.length < 64) grow(64);
  words[n++] = context;
  for (const r of roots) {
    if (r.walk === ep) continue;
    r.walk = ep;
    stackN.push(r);
    stackI.push(0);
    while (stackN.length) {
      const top = stackN.length - 1;
      const x = stackN[top]!;
      const i = stackI[top]!;
      if (!x.realized && i < x.inputs.length) {
        stackI[top] = i + 1;
        const c = x.inputs[i]!;
        if (c.walk !== ep) {
          c.walk = ep;
          stackN.push(c);
          stackI.push(0);
        }
        continue;
      }
      stackN.pop();
      stackI.pop();
      x.index = nodes.length;
      nodes.push(x);
      const d = x.realized;
      if (x.stale) throw staleError(x);
      if (d) {
        const nd = d.shape.length;
        if (n + 12 + 2 * nd > words.length) grow(n + 12 + 2 * nd);
        const start = n;
        words[n++] = -1 - DTYPE_CODE[d.dtype]!;
        words[n++] = nd;
        for (let k = 0; k < nd; k++) words[n++] = d.shape[k]!;
        // a size-1 dimension's stride addresses nothing: it never enters a key (issue 11)
        for (let k = 0; k < nd; k++) words[n++] = d.shape[k] === 1 ? 0 : d.strides[k]!;
        words[n++] = x.constant ? 1 : 0;
        if (x.constant) valueClass(d, n);
        else { words[n] = 0; words[n + 1] = 0; }
        n += 2;
        const first = firstOver(storageOf(d), x);
        if (first === undefined) {
          words[n++] = -1;
          words[n++] = 0;
        } else {
          words[n++] = first.index;
          words[n++] = d.offset - first.realized!.offset;
        }
        for (let k = start; k < n; k++) h = Math.imul(h ^ (words[k]! | 0), 0x01000193);
      } else {
        const ins = x.inputs;
        const ni = ins.length;
        const start = n;
        if (n + 1 > words.length) grow(n + 1);
        words[n++] = opId(x.op!);
        n = attrWords(x.attrs, n);
        if (n + 2 + ni > words.length) grow(n + 2 + ni);
        words[n++] = retainAll || (x.tracked !== null && !x.tracked.released) ? 1 : 0;
        words[n++] = ni;
        for (let k = 0; k < ni; k++) words[n++] = ins[k]!.index;
        for (let k = start; k < n; k++) h = Math.imul(h ^ (words[k]! | 0), 0x01000193);
      }
    }
  }
  clearLeaves(); // hold no buffers between walks
  if (n + 3 + roots.length > words.length) grow(n + 3 + roots.length);
  words[n++] = ROOTS;
  words[n++] = retainAll ? 1 : 0;
  for (const r of roots) {
    words[n++] = r.index;
    h = Math.imul(h ^ r.index, 0x01000193);
  }
  return { nodes, words, length: n, hash: h >>> 0 };
}

const contexts = new Map<string, number>();
/** A number for a backend/device/options text (the fingerprint's first word). */
export function contextId(text: string): number {
  let c = contexts.get(text);
  if (c === undefined) contexts.set(text, (c = contexts.size));
  return c;
}

// ---- recipes ----------------------------------------------------------------------------------
/** A buffer a recipe binds: a raw leaf (walk index >= 0) or a fold's result (-1 - fold index). */
type Ref = number;

interface Fold {
  readonly op: OpDef;
  readonly attrs: unknown;
  readonly shape: readonly number[];
  readonly dtype: TensorData["dtype"];
  readonly inputs: readonly Ref[];
  /** What the result was when recorded: value class, strides, offset from input 0 if it shares its storage (else NaN). */
  readonly cls: readonly [number, number];
  readonly strides: readonly number[];
  readonly sharedOffset: number;
}

/** What a plan's run needs from the lazy graph: input buffers, and the nodes each output and kept value belongs to. */
export interface Binding {
  /** The plan's leaf buffers, in order. */
  readonly leaves: readonly TensorData[];
  /** Per plan output: the lazy nodes whose value it is. */
  readonly outputs: readonly (readonly Node[])[];
  /** Per kept value (plan.keep): the lazy nodes whose value it is. */
  readonly kept: readonly (readonly Node[])[];
}

const NO_FOLDS: TensorData[] = [];

export class Recipe {
  private constructor(
    readonly plan: CompiledPlan,
    readonly words: Float64Array,
    private readonly folds: readonly Fold[],
    private readonly leaves: readonly Ref[],
    private readonly outputs: readonly (readonly number[])[],
    private readonly kept: readonly (readonly number[])[],
  ) {}

  /** Whether `w` has this recipe's fingerprint. */
  matches(w: Walk): boolean {
    const a = this.words, b = w.words;
    if (a.length !== w.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  /**
   * The plan's inputs for walked graph `w` (which matches): folds replayed with `evaluate`.
   * Null when a fold's result differs in a way simplification looks at (use the full path).
   */
  bind(w: Walk, evaluate: Evaluate | undefined): Binding | null {
    const nodes = w.nodes;
    const folded: TensorData[] = this.folds.length ? [] : NO_FOLDS;
    if (this.folds.length) {
      if (!evaluate) return null;
      const at = (r: Ref) => (r >= 0 ? nodes[r]!.realized! : folded[-1 - r]!);
      for (const f of this.folds) {
        const ins = f.inputs.map(at);
        const out = evaluate(f.op, ins, f.attrs, f.shape, f.dtype);
        const cls = foldClass(out);
        if (cls[0] !== f.cls[0] || !Object.is(cls[1], f.cls[1]) || !sameNumbers(out.strides, f.strides) || out.dtype !== f.dtype) return null;
        const shared = storageOf(out) === storageOf(ins[0]!) ? out.offset - ins[0]!.offset : NaN;
        if (!Object.is(shared, f.sharedOffset)) return null;
        folded.push(out);
      }
    }
    const leaves = new Array<TensorData>(this.leaves.length);
    for (let i = 0; i < leaves.length; i++) {
      const r = this.leaves[i]!;
      leaves[i] = r >= 0 ? nodes[r]!.realized! : folded[-1 - r]!;
    }
    const pick = (ix: readonly number[]) => {
      const out = new Array<Node>(ix.length);
      for (let i = 0; i < ix.length; i++) out[i] = nodes[ix[i]!]!;
      return out;
    };
    return { leaves, outputs: this.outputs.map(pick), kept: this.kept.map(pick) };
  }

  /**
   * The recipe for walked graph `w`, compiled to `plan` over simplified `graph` whose folds
   * `recorder` saw; null when some buffer of `graph` cannot be traced to `w` (not cached then).
   */
  static make(w: Walk, plan: CompiledPlan, graph: Graph, recorder: FoldRecorder): Recipe | null {
    if (!recorder.ok) return null;
    const index = new Map<Node, number>();
    w.nodes.forEach((n, i) => index.set(n, i));
    const leaves: Ref[] = [];
    for (const n of graph.nodes) {
      if (n.op) continue;
      const r = recorder.refs.get(n.leaf!);
      if (r === undefined) return null;
      leaves.push(r);
    }
    const origins = (ns: readonly Node[]) => ns.map((n) => index.get(n) ?? -1);
    const outputs = graph.outputs.map((o) => origins(o.origins));
    const kept = plan.keep.map((k) => origins(graph.nodes[k.node]!.origins));
    if ([...outputs, ...kept].some((l) => l.includes(-1))) return null;
    return new Recipe(plan, w.words.length === w.length ? w.words : w.words.slice(0, w.length), recorder.folds, leaves, outputs, kept);
  }
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function foldClass(d: TensorData): [number, number] {
  const v = uniformValue(d);
  if (v === null) return [0, 0];
  if (Object.is(v, -0)) return [3, 0];
  return Number.isInteger(v * 8) ? [2, v] : [1, 0];
}

/**
 * Wraps the constant folder's `evaluate` during a full compile: records each fold with the
 * buffers it read (raw leaves of the walk, or earlier folds), so a recipe can replay them.
 */
export class FoldRecorder {
  readonly folds: Fold[] = [];
  /** Buffer -> where it comes from (first raw leaf holding it, or a fold). */
  readonly refs = new Map<TensorData, Ref>();
  ok = true;
  readonly evaluate: Evaluate | undefined;

  constructor(w: Walk, inner: Evaluate | undefined) {
    w.nodes.forEach((n, i) => { if (n.realized && !this.refs.has(n.realized)) this.refs.set(n.realized, i); });
    this.evaluate = inner && ((op, inputs, attrs, shape, dtype) => {
      const out = inner(op, inputs, attrs, shape, dtype);
      const refs = inputs.map((d) => this.refs.get(d));
      if (refs.some((r) => r === undefined) || inputs.length === 0) this.ok = false;
      else {
        const shared = storageOf(out) === storageOf(inputs[0]!) ? out.offset - inputs[0]!.offset : NaN;
        this.folds.push({ op, attrs, shape, dtype, inputs: refs as Ref[], cls: foldClass(out), strides: out.strides.slice(), sharedOffset: shared });
        if (!this.refs.has(out)) this.refs.set(out, -this.folds.length);
      }
      return out;
    });
  }
}

// ---- the recipe cache --------------------------------------------------------------------------
const MAX_RECIPES = 256;
/** Fingerprint words held by all recipes together, at most (a 10k-op graph takes ~60k). */
const MAX_WORDS = 1 << 22;
const byHash = new Map<number, Recipe[]>();
const order: { hash: number; recipe: Recipe }[] = [];
let heldWords = 0;

/** The recipe for walked graph `w`, if one was made. */
export function findRecipe(w: Walk): Recipe | null {
  const list = byHash.get(w.hash);
  if (!list) return null;
  for (const r of list) if (r.matches(w)) return r;
  return null;
}

/** Keep `r` (the oldest recipes go when there are too many). */
export function addRecipe(w: Walk, r: Recipe): void {
  const list = byHash.get(w.hash);
  if (list) list.push(r);
  else byHash.set(w.hash, [r]);
  order.push({ hash: w.hash, recipe: r });
  heldWords += r.words.length;
  while (order.length > MAX_RECIPES || heldWords > MAX_WORDS) {
    const old = order.shift()!;
    heldWords -= old.recipe.words.length;
    const l = byHash.get(old.hash)!;
    l.splice(l.indexOf(old.recipe), 1);
    if (l.length === 0) byHash.delete(old.hash);
  }
}

/** Forget recipe `r` of walked graph `w`. */
export function removeRecipe(w: Walk, r: Recipe): void {
  const l = byHash.get(w.hash);
  const i = l ? l.indexOf(r) : -1;
  if (i < 0) return;
  l!.splice(i, 1);
  if (l!.length === 0) byHash.delete(w.hash);
  const k = order.findIndex((o) => o.recipe === r);
  if (k >= 0) order.splice(k, 1);
  heldWords -= r.words.length;
}

/** Forget every recipe (and the interned texts their fingerprints use). */
export function clearRecipes(): void {
  byHash.clear();
  order.length = 0;
  heldWords = 0;
  texts.clear();
}
