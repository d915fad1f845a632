/**
 * Plan templates: one compiled plan for every value of a symbolic dimension (see symbolic.ts).
 *
 * The compiler's passes work on concrete shapes. A template is made from plans the passes built
 * for the same graph at several values of the symbol (probes): when every probe has the same
 * structure (ops, wiring, slot kinds, in-place choices, attrs other than integers), each integer
 * of the plan (shapes, strides, view offsets, program strides, buffer sizes) is a function of the
 * symbol, fitted as the quadratic through three probes and checked at the others. Shapes and
 * strides are products of at most two symbolic sizes (an attention score is [.., S, S]), so a
 * quadratic is exact; anything else (a pass choosing by a threshold, a float derived from a
 * size) fails the check or the structure comparison, and the graph is compiled per value
 * instead.
 *
 * An instance at value s evaluates the integers and prepares each instruction's kernel for its
 * shapes (kernel selection is per shape, as in any plan); no pass runs. The workspace is the one
 * planned at the maximum, so every instance fits in it and the memory check of the maximum holds
 * for all of them.
 */
import type { Backend } from "../backends/backend.ts";
import type { Tolerance } from "../backends/catalog.ts";
import type { InputLayout } from "../backends/backend.ts";
import type { OpDef } from "../graph/op.ts";
import type { DType } from "../tensor/dtype.ts";
import { CompiledPlan, type Arg, type Instruction, type Slot } from "./plan.ts";
import { prepareKernel } from "./select.ts";

// ---- integers in a tree of plain values --------------------------------------------------------

/** An op definition or another registry object inside attrs: kept by reference, named by its name. */
function isAtom(v: object): v is { name: string } {
  return "name" in v && "kind" in v && typeof (v as { kind: unknown }).kind === "string";
}

/**
 * Append the integers of `v` to `nums` (in a fixed traversal order) and its structure, with `#`
 * for each integer, to `text`. Non-integer numbers (scales, eps) are structure: they must be
 * equal wherever the template applies. Returns false for values it cannot take apart (typed
 * arrays, class instances other than registry objects).
 */
export function splitNumbers(v: unknown, nums: number[], text: string[]): boolean {
  switch (typeof v) {
    case "number":
      if (Number.isInteger(v) && !Object.is(v, -0)) {
        nums.push(v);
        text.push("#");
      } else text.push(Object.is(v, -0) ? "-0" : String(v));
      return true;
    case "string": text.push(JSON.stringify(v)); return true;
    case "boolean": text.push(v ? "T" : "F"); return true;
    case "undefined": text.push("u"); return true;
    case "object": {
      if (v === null) { text.push("_"); return true; }
      if (Array.isArray(v)) {
        text.push("[");
        for (const x of v) if (!splitNumbers(x, nums, text)) return false;
        text.push("]");
        return true;
      }
      if (isAtom(v)) { text.push(`@${v.name}`); return true; }
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return false;
      text.push("{");
      for (const k in v) {
        text.push(k, ":");
        if (!splitNumbers((v as Record<string, unknown>)[k], nums, text)) return false;
      }
      text.push("}");
      return true;
    }
    default: return false;
  }
}

/** A copy of `v` (as splitNumbers walks it) with its integers taken from `next()` in order. */
export function withNumbers<T>(v: T, next: () => number): T {
  if (typeof v === "number") return (Number.isInteger(v) && !Object.is(v, -0) ? next() : v) as T;
  if (typeof v !== "object" || v === null) return v;
  if (Array.isArray(v)) return v.map((x) => withNumbers(x, next)) as T;
  if (isAtom(v)) return v;
  const out: Record<string, unknown> = {};
  for (const k in v) out[k] = withNumbers((v as Record<string, unknown>)[k], next);
  return out as T;
}

// ---- integers as functions of the symbol -------------------------------------------------------

/** Constant, or the quadratic through three samples (x, y), evaluated exactly. */
type Form = number | { readonly x: readonly [number, number, number]; readonly y: readonly [number, number, number] };

/**
 * The value at `s` of the quadratic through (x0,y0), (x1,y1), (x2,y2) (Newton form over a common
 * denominator, in BigInt: products of sizes exceed 2^53), or null when it is not an integer.
 */
function quadratic(f: Exclude<Form, number>, s: number): number | null {
  const [x0, x1, x2] = f.x.map(BigInt) as [bigint, bigint, bigint];
  const [y0, y1, y2] = f.y.map(BigInt) as [bigint, bigint, bigint];
  const S = BigInt(s);
  const d = (x1 - x0) * (x2 - x1) * (x2 - x0);
  const n = y0 * d + (S - x0) * (y1 - y0) * (x2 - x1) * (x2 - x0) + (S - x0) * (S - x1) * ((y2 - y1) * (x1 - x0) - (y1 - y0) * (x2 - x1));
  return n % d === 0n ? Number(n / d) : null;
}

// ---- plans as data -----------------------------------------------------------------------------

/** What of a plan the template fits: everything but kernels, workspace offsets and the memory plan. */
interface PlanData {
  ins: { op: OpDef; attrs: unknown; args: readonly Arg[]; layouts: readonly InputLayout[]; out: number; shape: readonly number[]; dtype: DType; inplace: boolean }[];
  slots: { kind: Slot["kind"]; dtype: DType; shape: readonly number[]; bytes: number }[];
  leafSlots: readonly number[];
  outputs: readonly Arg[];
  destSlots: readonly number[];
  keep: readonly { slot: number; node: number }[];
  unfused: number;
}

function dataOf(p: CompiledPlan): PlanData {
  return {
    ins: p.instructions.map((I) => ({ op: I.op, attrs: I.attrs, args: I.args, layouts: I.layouts, out: I.out, shape: I.shape, dtype: I.dtype, inplace: I.inplace })),
    slots: p.slots.map((s) => ({ kind: s.kind, dtype: s.dtype, shape: s.shape, bytes: s.bytes })),
    leafSlots: p.leafSlots, outputs: p.outputs, destSlots: p.destSlots, keep: p.keep, unfused: p.unfusedKernels,
  };
}

/**
 * Whether two plans are the same but for kernels and workspace offsets (tests: an instance
 * against the plan the passes build for the same graph).
 */
export function samePlan(a: CompiledPlan, b: CompiledPlan): boolean {
  const na: number[] = [], ta: string[] = [], nb: number[] = [], tb: string[] = [];
  const ok = splitNumbers(dataOf(a), na, ta) && splitNumbers(dataOf(b), nb, tb);
  return ok && ta.join(" ") === tb.join(" ") && na.length === nb.length && na.every((v, i) => v === nb[i]);
}

/** The symbol a template is over: its name, the range it was fitted for, and where memory was planned. */
export interface TemplateSymbol {
  readonly name: string;
  /** Smallest and largest value the template applies to (the probes' range). */
  readonly lo: number;
  readonly hi: number;
}

/** A plan for every value of one symbol in [lo, hi] (see the file comment). */
export class PlanTemplate {
  /** Positions of the integers that change with the symbol (the others are constants of `base`). */
  private readonly varying: number[];
  /** Whether each varying integer was at least 2 in absolute value at every probe (a size-1 or empty case is not covered). */
  private readonly large: boolean[];

  private constructor(
    readonly symbol: TemplateSymbol,
    private readonly forms: readonly Form[],
    private readonly base: PlanData,
    /** The probe at the maximum: its workspace offsets and memory plan serve every instance. */
    private readonly atMax: CompiledPlan,
  ) {
    this.varying = [];
    forms.forEach((f, i) => { if (typeof f !== "number") this.varying.push(i); });
    this.large = this.varying.map((i) => {
      const f = forms[i] as Exclude<Form, number>;
      return f.y.every((y) => Math.abs(y) >= 2);
    });
  }

  /** Integers whose value depends on the symbol (for tests and explain). */
  get varyingCount(): number {
    return this.varying.length;
  }

  /**
   * Fit a template from plans compiled at distinct values of the symbol (`probes`, the maximum
   * among them): the first three are fitted, the rest check the fit. Null when the plans differ in
   * structure or an integer is not the fitted quadratic at a checking probe.
   */
  static fit(symbol: TemplateSymbol, probes: readonly { s: number; plan: CompiledPlan }[]): PlanTemplate | null {
    if (probes.length < 4) return null;
    const split = probes.map((p) => {
      const nums: number[] = [], text: string[] = [];
      return splitNumbers(dataOf(p.plan), nums, text) ? { nums, text: text.join(" ") } : null;
    });
    if (split.some((x) => x === null || x.text !== split[0]!.text || x.nums.length !== split[0]!.nums.length)) return null;
    const ns = split.map((x) => x!.nums);
    const xs = [probes[0]!.s, probes[1]!.s, probes[2]!.s] as const;
    const forms: Form[] = new Array(ns[0]!.length);
    for (let i = 0; i < forms.length; i++) {
      const y0 = ns[0]![i]!;
      if (ns.every((n) => n[i] === y0)) { forms[i] = y0; continue; }
      const f = { x: xs, y: [y0, ns[1]![i]!, ns[2]![i]!] as const };
      for (let k = 3; k < probes.length; k++) if (quadratic(f, probes[k]!.s) !== ns[k]![i]) return null;
      forms[i] = f;
    }
    const atMax = probes.reduce((m, p) => (p.s > m.s ? p : m)).plan;
    return new PlanTemplate(symbol, forms, dataOf(atMax), atMax);
  }

  /**
   * The plan at value `s`: integers evaluated, kernels prepared for its shapes, workspace offsets
   * of the maximum. Null when `s` is outside the fitted range or a size that was at least 2 at
   * every probe would be 0 or 1 here (size-1 and empty dims are special cases for the passes,
   * as in torch's 0/1 specialization): the caller compiles that value on its own.
   */
  instance(s: number, backend: Backend, tolerance: Tolerance): CompiledPlan | null {
    if (s < this.symbol.lo || s > this.symbol.hi) return null;
    const values = new Map<number, number>();
    for (let k = 0; k < this.varying.length; k++) {
      const i = this.varying[k]!;
      const v = quadratic(this.forms[i] as Exclude<Form, number>, s);
      if (v === null || (this.large[k] && Math.abs(v) < 2)) return null;
      values.set(i, v);
    }
    let pos = 0;
    const next = () => {
      const i = pos++;
      return values.get(i) ?? (this.forms[i] as number);
    };
    const d = withNumbers(this.base, next);
    const maxSlots = this.atMax.slots;
    const slots: Slot[] = d.slots.map((sl, i) => ({ ...sl, offset: maxSlots[i]!.offset }));
    // every workspace buffer must fit the region planned for it at the maximum
    if (slots.some((sl, i) => sl.kind === "ws" && sl.bytes > maxSlots[i]!.bytes)) return null;
    const instructions: Instruction[] = d.ins.map((I) => {
      const prepared = prepareKernel(backend, { op: I.op, inputs: I.layouts, attrs: I.attrs, shape: I.shape, dtype: I.dtype }, tolerance);
      return { ...I, kernel: prepared?.kernel ?? null, impl: prepared?.impl ?? "" };
    });
    return new CompiledPlan({
      key: `${this.atMax.key}|${this.symbol.name}=${s}`, device: this.atMax.device, backend, instructions, slots,
      leafSlots: [...d.leafSlots], outputs: [...d.outputs], destSlots: [...d.destSlots], keep: [...d.keep],
      memory: this.atMax.memory, transients: [...this.atMax.transients], unfusedKernels: d.unfused,
      symbolic: { name: this.symbol.name, value: s, lo: this.symbol.lo, hi: this.symbol.hi },
    });
  }
}
