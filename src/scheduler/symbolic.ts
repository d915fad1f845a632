/**
 * Symbolic dimensions: an input's dimension (a sequence length, say) declared dynamic with a
 * range, so that graphs differing only in that size share one compiled plan.
 *
 * Names follow PyTorch: `Dim(name, {min, max})` as torch.export.Dim, `mark_dynamic(t, dim, ...)`
 * as torch._dynamo.mark_dynamic. A mark is on the input's storage (as the lazy leaves reading it
 * see it), and binds the symbol to that dimension's size whenever a graph reads the input.
 *
 * How a graph becomes symbolic, without symbolic ints in user code (shapes stay numbers):
 * - the simplified graph is split into a skeleton (ops, wiring, dtypes, everything that is not an
 *   integer) and its integers (leaf shapes and non-dense strides, integer attrs: reshape sizes,
 *   narrow starts...), in a fixed order (`graphSplit`);
 * - each integer is an affine function a·S + b of the symbol's value S. At the first value seen
 *   they are guessed (`guess`: marked dims, and per op the attrs whose shapes infer at other
 *   values); from a second value they are solved exactly from the two. Every later graph is
 *   checked integer by integer against the functions: a graph that does not match is never given
 *   the template's plan, so a wrong guess costs a compile, never a wrong result;
 * - the graph is rebuilt at probe values of S (leaf layouts from the functions, op shapes by the
 *   registry's shape inference) and compiled there, and the plans fitted into a PlanTemplate
 *   (plan_template.ts); each value then gets an instance of it, without running a pass.
 * Plan compiles per symbol: one template (a few probe compiles), a second only when the guess
 * was wrong; after that a graph that still does not fit is compiled per value, as any graph.
 *
 * One symbol per plan: marks of other symbols in the same graph are treated as fixed sizes.
 * Values below 4 (and below the template's range) are compiled on their own, like any fixed
 * shape; values outside [min, max] throw before anything runs.
 */
import type { Backend } from "../backends/backend.ts";
import { mkLeaf, mkNode, type GNode, type Graph } from "../graph/passes/ir.ts";
import { allocArray } from "../tensor/dtype.ts";
import { fmtShape, LoomConstraintViolationError, LoomIndexError, LoomValueError } from "../tensor/errors.ts";
import { contiguousStrides } from "../tensor/shape.ts";
import type { TensorData } from "../tensor/storage.ts";
import { storageOf } from "./fingerprint.ts";
import type { CompiledPlan } from "./plan.ts";
import { PlanTemplate, samePlan, splitNumbers, withNumbers } from "./plan_template.ts";
import type { Tolerance } from "../backends/catalog.ts";

/** Smallest value a template is fitted from: sizes 0..3 are where passes special-case (size 1, S−1...). */
const PROBE_MIN = 4;
/** Probe values need room: a range narrower than this is compiled per value. */
const PROBE_SPAN = 8;

/** A symbolic dimension: a name and the inclusive range of sizes it may take (torch.export.Dim). */
export class Dim {
  readonly name: string;
  readonly min: number;
  readonly max: number;
  /**
   * @param name - names the symbol in plans (explain) and errors
   * @param range.min - smallest size (default 2; sizes 0 and 1 are special cases, as in torch)
   * @param range.max - largest size: memory is planned for it
   * @throws LoomValueError unless 0 <= min <= max are integers
   */
  constructor(name: string, range: { min?: number; max: number }) {
    const min = range.min ?? 2, max = range.max;
    if (!Number.isInteger(min) || !Number.isInteger(max) || min < 0 || max < min) {
      throw new LoomValueError(`[Dim] ${name}: expected integers 0 <= min <= max, got min ${min}, max ${max}`);
    }
    this.name = name;
    this.min = min;
    this.max = max;
  }

  /** What identifies the symbol in plan keys: its name and range (equal Dims share templates). */
  get key(): string {
    return `${this.name}[${this.min},${this.max}]`;
  }

  toString(): string {
    return `Dim(${this.name}, min=${this.min}, max=${this.max})`;
  }
}

// ---- marks ------------------------------------------------------------------------------------

interface Marks {
  readonly shape: readonly number[];
  readonly dims: Map<number, Dim>;
}
const marks = new WeakMap<object, Marks>();

function checkBound(sym: Dim, value: number, what: () => string): void {
  if (value < sym.min || value > sym.max) {
    const side = value > sym.max ? `its maximum is ${sym.max}` : `its minimum is ${sym.min}`;
    throw new LoomConstraintViolationError(`[symbolic] ${sym.name} is bound to ${value} (${what()}) but ${side}; nothing was run`);
  }
}

/**
 * Declare dimension `dim` of buffer `d` symbolic (lazy graphs reading the buffer with this shape
 * bind `sym` to the size). Marking again replaces the dim's symbol; a buffer marked with another
 * shape starts over.
 * @throws LoomIndexError for a dim outside the rank; LoomConstraintViolationError
 *   when the size is outside the symbol's range
 */
export function markDynamic(d: TensorData, dim: number, sym: Dim): void {
  const nd = d.shape.length;
  const k = dim < 0 ? dim + nd : dim;
  if (!Number.isInteger(k) || k < 0 || k >= nd) throw new LoomIndexError(`[mark_dynamic] dim ${dim} is out of range for a tensor of shape ${fmtShape(d.shape)}`);
  checkBound(sym, d.shape[k]!, () => `dim ${k} of a tensor of shape ${fmtShape(d.shape)}`);
  const key = storageOf(d) as object;
  let m = marks.get(key);
  if (!m || m.shape.length !== nd || m.shape.some((s, i) => s !== d.shape[i])) marks.set(key, (m = { shape: [...d.shape], dims: new Map() }));
  m.dims.set(k, sym);
}

/** The symbols marked on `d`'s dims (empty when none, or when marked with another shape). */
export function dynamicDims(d: TensorData): ReadonlyMap<number, Dim> {
  const m = marks.get(storageOf(d) as object);
  if (!m || m.shape.length !== d.shape.length || m.shape.some((s, i) => s !== d.shape[i])) return new Map();
  return m.dims;
}

/**
 * The symbol a graph is compiled over, and its value: the first marked dim among the leaves
 * (marks of other symbols are fixed sizes here). Null when no leaf is marked.
 * @throws LoomConstraintViolationError when a marked size is outside its symbol's range, or two
 *   leaves bind the symbol to different sizes; before any kernel runs
 */
export function symbolBinding(g: Graph): { sym: Dim; value: number } | null {
  let found: { sym: Dim; value: number; shape: readonly number[] } | null = null;
  for (const n of g.nodes) {
    if (n.op) continue;
    const dims = dynamicDims(n.leaf!);
    for (const [dim, sym] of dims) {
      const value = n.shape[dim]!;
      checkBound(sym, value, () => `dim ${dim} of an input of shape ${fmtShape(n.shape)}`);
      if (!found) found = { sym, value, shape: n.shape };
      else if (sym.key === found.sym.key && value !== found.value) {
        throw new LoomConstraintViolationError(`[symbolic] ${sym.name} is bound to ${found.value} (an input of shape ${fmtShape(found.shape)}) and to ${value} (dim ${dim} of an input of shape ${fmtShape(n.shape)}) in one graph; nothing was run`);
      }
    }
  }
  return found && { sym: found.sym, value: found.value };
}

// ---- graphs as skeleton and integers -----------------------------------------------------------

/**
 * Whether `d` has exactly the contiguous strides graphAt gives a dense leaf. Strict, size-1 dims
 * included: plans keep a leaf's strides in their input layouts, so a size-1 dim's stride (an
 * expanded [N, C, 1] constant keeps its source's 1) must be reproduced at the probes too.
 */
function isDense(d: TensorData): boolean {
  const c = contiguousStrides(d.shape);
  return d.shape.every((_, k) => d.strides[k] === c[k]);
}

/**
 * What a graph integer may be, for the first guess: the symbol itself (a marked dim); a dim of an
 * input (a weight, an arange made during the forward): fixed, or the symbol when equal to it; or
 * anything (attrs, constants' dims, strides).
 */
const SYMBOL = 1, DIM = 2, FREE = 3;

/**
 * The skeleton text of `g` (what must be equal for two graphs to share a template) and its
 * integers in order: per leaf its shape (and its strides unless exactly contiguous),
 * per op node its integer attrs. Op nodes' shapes follow from these. `roles` says what each
 * integer may be (SYMBOL, DIM, FREE above) for the first guess. Null when attrs hold values the
 * split cannot take apart.
 */
function graphSplit(g: Graph, sym: Dim): Split | null {
  const index = new Map<GNode, number>();
  const text: string[] = [];
  const nums: number[] = [];
  const roles: number[] = [];
  const starts: number[] = [];
  for (let i = 0; i < g.nodes.length; i++) {
    const n = g.nodes[i]!;
    index.set(n, i);
    starts.push(nums.length);
    if (!n.op) {
      const d = n.leaf!, dense = isDense(d);
      const marked = dynamicDims(d);
      text.push(`;L${n.constant ? "c" : ""}${d.dtype}${d.shape.length}${dense ? "d" : "s"}`);
      d.shape.forEach((s, k) => {
        nums.push(s);
        roles.push(marked.get(k)?.key === sym.key ? SYMBOL : n.constant ? FREE : DIM);
      });
      if (!dense) d.strides.forEach((st) => { nums.push(st); roles.push(FREE); });
      continue;
    }
    text.push(`;${n.op.name}(${n.inputs.map((c) => index.get(c)).join(",")})${n.retain ? "!" : ""}`);
    if (!splitNumbers(n.attrs, nums, text)) return null;
    while (roles.length < nums.length) roles.push(FREE);
  }
  text.push(`->${g.outputs.map((o) => index.get(o)).join(",")}`);
  starts.push(nums.length);
  return { text: text.join(""), nums, roles, starts };
}

/** A graph as skeleton and integers (graphSplit). */
interface Split {
  readonly text: string;
  readonly nums: number[];
  readonly roles: number[];
  /** Node i's integers are nums[starts[i]] up to nums[starts[i + 1]]. */
  readonly starts: number[];
}

/** Integers as affine functions a[i]·S + b[i] of the symbol. */
interface Affine {
  readonly a: readonly number[];
  readonly b: readonly number[];
}

const valueAt = (f: Affine, i: number, s: number) => f.a[i]! * s + f.b[i]!;

/**
 * First value seen: a marked dim is the symbol; an input's dim equal to the value is the symbol
 * (an arange of positions), its other dims fixed (a weight's 384 = 6·64 is); an op's integer
 * attrs take the first of these choices whose shapes infer at the probe values `at` without
 * emptying a dim:
 *   1. those equal to the value are S (an expand to [B, T, T] from size 1 infers either way);
 *   2. none (a slice end that is a multiple of the value by chance would slice nothing);
 *   3. all equal ones but one, the last first (a reshape to [B, T, H, hd] with hd = T);
 *   4. those within 1 of the value are S − 1, S, S + 1 (the last position: a slice [T−1, T));
 *   5. multiples k·S (a reshape to [B·T, C]); 6. all multiples but one.
 * A node no choice fits retries once with its inputs' multiples (an index over B·T made during
 * the step, an expand to B·T from a scalar). A wrong guess is never used: it fails at a probe, or
 * the next value does not match it, and the functions are then solved from two values.
 */
function guess(g: Graph, split: Split, s: number, at: readonly number[]): Affine {
  const { nums, roles, starts } = split;
  const multiples = nums.map((v, i) => (roles[i] === SYMBOL || (roles[i] === DIM && v === s) ? 1 : roles[i] === FREE && v !== 0 && v % s === 0 ? v / s : 0));
  const index = new Map(g.nodes.map((n, i) => [n, i]));
  const a = [...multiples];
  const b = nums.map((v, i) => v - a[i]! * s);
  const f: Affine = { a, b };
  const shapes = at.map(() => new Map<GNode, readonly number[]>());
  const set = (p: number, k: number) => { a[p] = k; b[p] = nums[p]! - k * s; };
  const leafShapes = (n: GNode, lo: number) => at.forEach((v, k) => shapes[k]!.set(n, n.shape.map((_, d) => valueAt(f, lo + d, v))));
  /** Whether op node n's shapes infer at every probe value with the current functions (and record them). */
  const infers = (n: GNode, lo: number): boolean => {
    try {
      const out = at.map((v, k) => {
        let pos = lo;
        const attrs = withNumbers(n.attrs, () => valueAt(f, pos++, v));
        const shape = n.op!.shape(n.inputs.map((c) => ({ shape: shapes[k]!.get(c)!, dtype: c.dtype })), attrs as never);
        return shape.some((d, j) => d < 1 && n.shape[j]! >= 1) ? null : shape;
      });
      if (out.some((x) => x === null)) return false;
      out.forEach((shape, k) => shapes[k]!.set(n, shape!));
      return true;
    } catch {
      return false;
    }
  };
  /** Choices 1–6 for op node n's attrs (or only 5–6: `multiplesFirst`); false when none infers. */
  const choose = (n: GNode, lo: number, hi: number, multiplesFirst = false): boolean => {
    const exact: number[] = [], near: number[] = [], multiple: number[] = [];
    for (let p = lo; p < hi; p++) {
      exact.push(nums[p] === s ? 1 : 0);
      near.push(Math.abs(nums[p]! - s) <= 1 ? 1 : 0);
      multiple.push(multiples[p]!);
    }
    const butOne = (c: number[]) => c.flatMap((k, j) => (k === 0 ? [] : [c.map((x, q) => (q === j ? 0 : x))])).reverse();
    const choices = multiplesFirst ? [multiple, ...butOne(multiple)] : [exact, exact.map(() => 0), ...butOne(exact), near, multiple, ...butOne(multiple)];
    for (const c of choices) {
      c.forEach((k, j) => set(lo + j, k));
      if (infers(n, lo)) return true;
    }
    return false;
  };
  g.nodes.forEach((n, i) => {
    const lo = starts[i]!, hi = starts[i + 1]!;
    if (!n.op) return leafShapes(n, lo);
    if (choose(n, lo, hi)) return;
    let retry = false;
    for (const c of n.inputs) {
      const ci = index.get(c)!, cl = starts[ci]!;
      if (!c.op) {
        let changed = false;
        c.shape.forEach((v, d) => {
          if (roles[cl + d] === DIM && a[cl + d] === 0 && v !== 0 && v % s === 0) { set(cl + d, v / s); changed = true; }
        });
        if (changed) leafShapes(c, cl);
        retry ||= changed;
      } else if (multiples.slice(cl, starts[ci + 1]!).some((k, j) => k !== a[cl + j])) retry = choose(c, cl, starts[ci + 1]!, true) || retry;
    }
    if (retry && choose(n, lo, hi)) return;
    at.forEach((_, k) => shapes[k]!.set(n, n.shape)); // no choice infers: the template fails at its probes
  });
  return f;
}

/** Two values seen: each integer's line through both (null when one is not integral). */
function solve(n1: readonly number[], s1: number, n2: readonly number[], s2: number): Affine | null {
  const a: number[] = [], b: number[] = [];
  for (let i = 0; i < n1.length; i++) {
    const slope = (n2[i]! - n1[i]!) / (s2 - s1);
    if (!Number.isInteger(slope)) return null;
    a.push(slope);
    b.push(n1[i]! - slope * s1);
  }
  return { a, b };
}

const matches = (f: Affine, nums: readonly number[], s: number) =>
  f.a.length === nums.length && nums.every((v, i) => valueAt(f, i, s) === v);

/**
 * `g` rebuilt at symbol value `s`: leaves with the functions' layouts (and no data: compiling
 * never reads leaf values), op nodes with the functions' attrs and their shapes inferred by the
 * registry. Throws (shape inference) when the functions do not describe a valid graph at `s`.
 */
function graphAt(g: Graph, f: Affine, s: number): Graph {
  let pos = 0;
  const next = () => valueAt(f, pos++, s);
  const map = new Map<GNode, GNode>();
  for (const n of g.nodes) {
    if (!n.op) {
      const d = n.leaf!, dense = isDense(d);
      const shape = d.shape.map(() => next());
      const strides = dense ? contiguousStrides(shape) : d.strides.map(() => next());
      map.set(n, mkLeaf({ dtype: d.dtype, shape, strides, offset: 0, data: allocArray(d.dtype, 0) }, n.constant, n.origins));
      continue;
    }
    const inputs = n.inputs.map((c) => map.get(c)!);
    const attrs = withNumbers(n.attrs, next);
    const shape = n.op.shape(inputs, attrs as never);
    map.set(n, mkNode(n.op, inputs, attrs, shape, n.dtype, n.origins, n.retain));
  }
  return { nodes: g.nodes.map((n) => map.get(n)!), outputs: g.outputs.map((o) => map.get(o)!) };
}

// ---- families: graphs sharing a skeleton ------------------------------------------------------

interface Family {
  /** The last value seen and its integers (to solve the functions from a second value). */
  last: { s: number; nums: number[] } | null;
  affine: Affine | null;
  template: PlanTemplate | null;
  /** Templates made so far (at most 2: the guess, then the solved functions). */
  builds: number;
  /** No template will be made: each value compiles on its own. */
  dead: boolean;
  instances: Map<number, CompiledPlan>;
}

const MAX_FAMILIES = 64;
const MAX_INSTANCES = 32;
const families = new Map<string, Family>();

/**
 * Counters: templates made (each one plan compile of several probes), probe compiles, instances
 * made (a new value: kernels prepared, no pass), values compiled on their own instead (`fixed`).
 */
export const symbolicStats = { templates: 0, probes: 0, instances: 0, fixed: 0 };

/**
 * `check`: also compile every new value's graph on its own and throw unless the instance equals
 * that plan (kernels and workspace offsets apart). For tests: it costs a compile per value.
 */
export const symbolicOptions = { check: false };

export function clearSymbolic(): void {
  families.clear();
  symbolicStats.templates = symbolicStats.probes = symbolicStats.instances = symbolicStats.fixed = 0;
}

/** Distinct probe values in the symbol's range: three to fit (the maximum among them), the rest to check. */
function probeValues(sym: Dim, s: number): number[] | null {
  const lo = Math.max(sym.min, PROBE_MIN), hi = sym.max;
  if (hi - lo < PROBE_SPAN) return null;
  const mid = Math.floor((lo + hi) / 2);
  const pts = [lo, mid, hi, Math.floor((lo + mid) / 2), Math.floor((mid + hi) / 2)];
  if (s >= lo && !pts.includes(s)) pts.push(s);
  return pts;
}

/** Builds a plan from a simplified graph (compile.ts buildPlan, passed in: it imports this file). */
export type PlanBuilder = (g: Graph, key: string) => CompiledPlan;

/**
 * The plan for simplified graph `g` over its symbol, from its family's template (made now if
 * needed). Null when `g` has no symbol, the value is outside the template's range, or no
 * template fits: the caller compiles `g` for its fixed shapes.
 * @returns the plan, and whether a template was made for it (a plan compile)
 * @throws LoomConstraintViolationError for a symbol bound outside its range
 */
export function symbolicPlan(g: Graph, context: string, backend: Backend, tolerance: Tolerance, build: PlanBuilder): { plan: CompiledPlan; compiled: boolean } | null {
  const bound = symbolBinding(g);
  if (!bound) return null;
  const split = graphSplit(g, bound.sym);
  if (!split) return null;
  const { sym, value: s } = bound;
  // sizes below the probes' range are special cases for the passes: compiled as fixed shapes
  if (s < Math.max(sym.min, PROBE_MIN)) return fixed();
  const key = `${context}|${sym.key}|${split.text}`;
  let fam = families.get(key);
  if (!fam) {
    fam = { last: null, affine: null, template: null, builds: 0, dead: false, instances: new Map() };
    families.set(key, fam);
    if (families.size > MAX_FAMILIES) families.delete(families.keys().next().value!);
  }
  if (fam.dead) return fixed();
  if (fam.template && fam.affine && matches(fam.affine, split.nums, s)) {
    const plan = instanceOf(fam, s, g, backend, tolerance, build);
    return plan ? { plan, compiled: false } : fixed();
  }
  // learn the functions: solved exactly from an earlier value, else guessed from this one
  const prev = fam.last;
  fam.last = { s, nums: split.nums };
  const pts = probeValues(sym, s);
  const affine = prev && prev.s !== s && prev.nums.length === split.nums.length ? solve(prev.nums, prev.s, split.nums, s) : pts && guess(g, split, s, [pts[0]!, pts[2]!]);
  if (!affine || !pts || fam.builds >= 2) {
    fam.dead = !affine || !pts || fam.builds >= 2;
    return fixed();
  }
  fam.builds++;
  fam.template = null;
  fam.instances.clear();
  symbolicStats.templates++;
  let template: PlanTemplate | null = null;
  try {
    const probes = pts.map((p) => {
      symbolicStats.probes++;
      return { s: p, plan: build(p === s ? g : graphAt(g, affine, p), `${key}|${sym.name}=${p}`) };
    });
    template = PlanTemplate.fit({ name: sym.name, lo: pts[0]!, hi: sym.max }, probes);
  } catch {
    template = null; // the guessed functions do not make a valid graph at some probe value
  }
  if (!template) return fixed();
  fam.affine = affine;
  fam.template = template;
  const plan = instanceOf(fam, s, g, backend, tolerance, build);
  return plan ? { plan, compiled: true } : fixed();
}

function fixed(): null {
  symbolicStats.fixed++;
  return null;
}

function instanceOf(fam: Family, s: number, g: Graph, backend: Backend, tolerance: Tolerance, build: PlanBuilder): CompiledPlan | null {
  let plan = fam.instances.get(s);
  if (plan) return plan;
  plan = fam.template!.instance(s, backend, tolerance) ?? undefined;
  if (!plan) return null;
  if (symbolicOptions.check && !samePlan(plan, build(g, "check"))) {
    throw new Error(`[symbolic] the template's plan at ${plan.symbolic!.name} = ${s} differs from the plan compiled for that value`);
  }
  symbolicStats.instances++;
  fam.instances.set(s, plan);
  if (fam.instances.size > MAX_INSTANCES) fam.instances.delete(fam.instances.keys().next().value!);
  return plan;
}
