/**
 * WGSL from the graph compiler's expression programs (src/graph/passes/program.ts): the loads,
 * elementwise ops (through the same op table as unfused kernels, elementwise.ts) and the
 * accumulated value of a fused reduction/matmul, each step rounded to its dtype as the unfused
 * op's store would. Shapes and strides are baked into the source (plans are cached by structure,
 * so a training loop compiles each program once); input base offsets are parameters.
 */
import type { Program } from "../../graph/passes/program.ts";
import type { DType } from "../../tensor/dtype.ts";
import { LoomValueError } from "../../tensor/errors.ts";
import { convertExpr, gpuType, scalarBits, storeExpr, type Wgsl } from "./dtype.ts";
import { computeType, EW_WGSL, intFaults } from "./elementwise.ts";
import type { Operand } from "./elementwise.ts";
import { ERR_WGSL, type CommandQueue, type ErrSite } from "./queue.ts";

/**
 * The fault sites of one kernel's programs (integer division by 0, ...: elementwise.ts intFaults),
 * numbered from 1 as they are added. A kernel with any binds the error ring (`slot`); kernels
 * whose programs cannot fault bind nothing more.
 */
export class ErrSink {
  readonly sites: ErrSite[] = [];
  readonly add = (s: ErrSite): number => this.sites.push(s);
  /**
   * What the kernel adds when a program can fault: the ring's declaration at `binding` (its cell's
   * word is parameter `word`), the ring as a `null` buffer, its access and the cell's word.
   */
  slot(q: CommandQueue, binding: number, word: number): { decls: string[]; bufs: null[]; access: "rw"[]; params: number[] } {
    if (!this.sites.length) return { decls: [], bufs: [], access: [], params: [] };
    return { decls: [ERR_WGSL(binding, word)], bufs: [null], access: ["rw"], params: [q.errorCell(this.sites).word] };
  }
}

/** How a kernel reads input k of a fused op. */
export interface InputAccess {
  /** A buffer (read as `name[...]`, element type `t`) or an immediate scalar (param word). */
  kind: "buf" | "imm";
  name: string;
  t: Wgsl;
  /** Base element offset expression (a param word read). */
  base: string;
  /** Immediate: the value expression. */
  value?: string;
  /** Aliased with the output buffer of a different element type: reinterpret the bits. */
  bitcastFrom?: Wgsl;
}

/** WGSL type of a value of dtype `d` inside kernels. */
export const classOf = (d: DType): Wgsl => gpuType(d);

/**
 * `fn <name>(c: array<u32, N>, acc: <accT>) -> <out class>` evaluating `p` at multi-index `c`.
 * `acc` must already hold the accumulated value rounded to the program's acc dtype. Steps that can
 * fault (integer division by 0, a cast of inf to an integer...) report to `sink`'s sites.
 */
export function programFn(name: string, p: Program, inputs: readonly InputAccess[], sink: ErrSink, accT: Wgsl = "f32"): { fn: string; outT: Wgsl } {
  const N = Math.max(p.shape.length, 1);
  const lines: string[] = [];
  const cls: Wgsl[] = [];
  p.code.forEach((c, i) => {
    if (c.k === "load") {
      const inp = inputs[c.input];
      if (!inp) throw new LoomValueError(`[fused] program loads input ${c.input} of ${inputs.length}`);
      const t = classOf(c.dtype);
      cls.push(t);
      if (inp.kind === "imm") {
        lines.push(`let t${i} = ${convertExpr(inp.t, t, inp.value!)};`);
        return;
      }
      const terms = [inp.base, ...(c.offset ? [`${c.offset}u`] : []), ...c.strides.flatMap((s, d) => (s === 0 || p.shape[d] === 1 ? [] : [`c[${d}] * ${s}u`]))];
      let v = `${inp.name}[${terms.join(" + ")}]`;
      if (inp.bitcastFrom) v = `bitcast<${inp.t}>(${v})`;
      lines.push(`let t${i} = ${convertExpr(inp.t, t, v)};`);
    } else if (c.k === "acc") {
      const t = classOf(c.dtype);
      cls.push(t);
      lines.push(`let t${i} = ${convertExpr(accT, t, "acc")};`);
    } else {
      const t = classOf(c.dtype);
      cls.push(t);
      const argDtypes = c.args.map((a) => ({ dtype: dtypeOf(p, a) }));
      const ct = computeType(c.dtype, argDtypes);
      const table = (EW_WGSL as Record<string, { f: (a: string, b: string, c: string) => string; i?: (a: string, b: string, c: string) => string }>)[c.op.name];
      if (!table) throw new LoomValueError(`[fused] elementwise op ${c.op.name} has no WGSL`);
      const useT: Wgsl = ct === "i32" && !table.i ? "f32" : ct;
      const args = c.args.map((a) => convertExpr(cls[a]!, useT, `t${a}`));
      while (args.length < 3) args.push("0");
      const e = (useT === "f32" ? table.f : table.i!)(args[0]!, args[1]!, args[2]!);
      const chk = intFaults(c.op.name, c.dtype, useT, args[0]!, args[1]!, e, `r${i}`, sink.add);
      if (chk.pre) lines.push(chk.pre);
      lines.push(`let t${i} = ${storeExpr(c.dtype, useT, chk.value)};`);
    }
  });
  const outT = cls[p.out]!;
  return { fn: `fn ${name}(c: array<u32, ${N}>, acc: ${accT}) -> ${outT} {\n  ${lines.join("\n  ")}\n  return t${p.out};\n}`, outT };
}

function dtypeOf(p: Program, i: number): DType {
  return p.code[i]!.dtype;
}

/** WGSL lines setting `c[d]` from flat row-major index `flat` over `shape` (baked). */
export function unravelInto(c: string, flat: string, shape: readonly number[]): string {
  const nd = shape.length;
  if (nd === 0) return `var ${c}: array<u32, 1>;`;
  const lines = [`var ${c}: array<u32, ${nd}>;`, `var r_${c} = ${flat};`];
  for (let d = nd - 1; d > 0; d--) lines.push(`${c}[${d}] = r_${c} % ${shape[d]}u; r_${c} = r_${c} / ${shape[d]}u;`);
  lines.push(`${c}[0] = r_${c};`);
  return lines.join("\n  ");
}

/**
 * Bindings and accesses for a fused op's inputs: buffers bind from `first` on (deduplicated by
 * GPU buffer; one aliased with the output is read through `out`), 1-element host scalars become
 * parameter words starting at `paramWord`. Returns declarations, accesses, the buffers to bind,
 * and the parameter values (base offsets, then immediates).
 */
export function bindInputs(ops: readonly Operand[], out: { buf: unknown; t: Wgsl }, first: number, paramWord: number, prebound?: ReadonlyMap<unknown, string>) {
  const decls: string[] = [];
  const access: InputAccess[] = [];
  const bufs: Extract<Operand, { kind: "buf" }>["view"]["buf"][] = [];
  const params: number[] = [];
  const bound = new Map<unknown, { name: string; t: Wgsl }>();
  // buffers the kernel already binds (a GEMM's A and B), read with their own element type
  for (const o of ops) if (o.kind === "buf" && prebound?.has(o.view.buf)) bound.set(o.view.buf, { name: prebound.get(o.view.buf)!, t: o.view.t });
  let w = paramWord;
  for (const o of ops) {
    if (o.kind === "imm") {
      access.push({ kind: "imm", name: "", t: o.t, base: "", value: o.t === "f32" ? `pf(${w}u)` : `pi(${w}u)` });
      params.push(scalarBits(o.t, o.value, "fused"));
      w++;
      continue;
    }
    const v = o.view;
    let b = bound.get(v.buf);
    if (!b) {
      if (v.buf === out.buf) b = { name: "out", t: out.t };
      else {
        const binding = first + bufs.length;
        b = { name: `in${binding}`, t: v.t };
        decls.push(`@group(0) @binding(${binding}) var<storage, read> in${binding}: array<${v.t}>;`);
        bufs.push(v.buf);
      }
      bound.set(v.buf, b);
    }
    access.push({ kind: "buf", name: b.name, t: v.t, base: `p(${w}u)`, bitcastFrom: b.t !== v.t ? b.t : undefined });
    params.push(v.offset);
    w++;
  }
  return { decls, access, bufs, params, nextWord: w };
}
