/**
 * torch.einsum, lowered to registry ops so it runs eagerly and lazily (and fuses) with gradients
 * from their rules: a label repeated within an operand takes its diagonal (diagonal(): permute,
 * reshape, strided slice); a label used by one operand only and not in the output is summed at
 * once; operands are then combined left to right, each pair as one batched matmul
 * ([batch, a-only, contracted] x [batch, contracted, b-only], the labels both share and still need
 * kept as batch) or, with nothing to contract, a broadcast mul; what is left is summed and
 * permuted to the output order. torch contracts left to right too (without opt_einsum).
 *
 * Equation syntax as torch: letters a-z and A-Z, "..." for broadcast dims (right-aligned across
 * operands), explicit output after "->" or the implicit one (the "..." dims, then the letters used
 * exactly once, in alphabetical order with upper case first). Size-1 dims broadcast.
 */
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { diagonal } from "./shape_ops.ts";
import type { TensorOps } from "./surface.ts";

const ELL = "...";

/** Split one subscript term into letters and "...", validating characters. */
function parseTerm(term: string, where: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < term.length; ) {
    if (term.startsWith(ELL, i)) {
      if (out.includes(ELL)) throw new LoomValueError(`[einsum] einsum(): found more than one ellipsis ("...") in ${where} '${term}'`);
      out.push(ELL);
      i += 3;
      continue;
    }
    const c = term[i]!;
    if (!/[a-zA-Z]/.test(c)) throw new LoomValueError(`[einsum] einsum(): invalid subscript given at index ${i} in ${where} '${term}': subscripts must be letters a-z or A-Z, or "..."`);
    out.push(c);
    i++;
  }
  return out;
}

/**
 * torch.einsum(equation, ...operands): sums of products of the operands' elements over the
 * labels the equation does not keep.
 * @example einsum("bij,bjk->bik", a, b) is a batched matmul; einsum("ii", m) the trace;
 *   einsum("i,j->ij", u, v) the outer product; einsum("...ij->...ji", x) a transpose
 * @param operands - tensors of one dtype, one per comma-separated term
 * @returns the output labels' sizes, operands' dtype
 * @throws LoomValueError for a malformed equation or an operand count that differs from it;
 *   LoomShapeError when a term's labels do not match its operand's dims or sizes do not
 *   broadcast; LoomDtypeError for mixed dtypes
 */
export function einsum<S extends TensorOps<S>>(equation: string, ...operands: (S | readonly S[])[]): S {
  const ops: S[] = operands.length === 1 && Array.isArray(operands[0]) ? [...(operands[0] as readonly S[])] : (operands as S[]);
  const eq = equation.replace(/\s+/g, "");
  const arrow = eq.indexOf("->");
  const lhs = arrow >= 0 ? eq.slice(0, arrow) : eq;
  const terms = lhs.split(",");
  if (ops.length === 0) throw new LoomValueError("[einsum] einsum(): must provide at least one operand");
  if (terms.length !== ops.length) {
    throw new LoomValueError(`[einsum] einsum(): ${terms.length > ops.length ? "fewer" : "more"} operands were provided than specified in the equation '${equation}' (${ops.length} operands, ${terms.length} terms)`);
  }
  ops.forEach((o) => {
    if (o.dtype !== ops[0]!.dtype) throw new LoomDtypeError(`[einsum] einsum(): expected all operands to have the same dtype, got ${ops.map((t) => t.dtype).join(", ")}`);
  });
  const parsed = terms.map((t, i) => parseTerm(t, `the subscripts of operand ${i}`));
  // ellipsis dims: labels ".0" .. ".E-1", right-aligned across operands
  let E = 0;
  const labels: string[][] = parsed.map((p, i) => {
    const letters = p.filter((l) => l !== ELL).length;
    const nd = ops[i]!.ndim;
    if (p.includes(ELL) ? nd < letters : nd !== letters) {
      throw new LoomShapeError(`[einsum] einsum(): the number of subscripts in the equation (${letters}) does not match the number of dimensions (${nd}) for operand ${i}${p.includes(ELL) ? "" : " and no ellipsis was given"}`);
    }
    E = Math.max(E, nd - letters);
    return p;
  }).map((p, i) => {
    const e = ops[i]!.ndim - (p.length - (p.includes(ELL) ? 1 : 0));
    return p.flatMap((l) => (l === ELL ? Array.from({ length: e }, (_, k) => `.${E - e + k}`) : [l]));
  });
  const ellLabels = Array.from({ length: E }, (_, k) => `.${k}`);
  const count = new Map<string, number>();
  for (const ls of labels) for (const l of ls) count.set(l, (count.get(l) ?? 0) + 1);
  let out: string[];
  if (arrow >= 0) {
    const rhs = parseTerm(eq.slice(arrow + 2), "the output");
    out = rhs.flatMap((l) => (l === ELL ? ellLabels : [l]));
    for (const l of rhs) {
      if (l === ELL) continue;
      if (rhs.indexOf(l) !== rhs.lastIndexOf(l)) throw new LoomValueError(`[einsum] einsum(): output subscript ${l} appears more than once in the output`);
      if (!count.has(l)) throw new LoomValueError(`[einsum] einsum(): output subscript ${l} does not appear in the equation for any input operand`);
    }
  } else {
    const once = [...count.entries()].filter(([l, c]) => c === 1 && !l.startsWith(".")).map(([l]) => l).sort();
    out = [...ellLabels, ...once];
  }
  labels.forEach((ls, i) => ls.forEach((l, d) => {
    const first = ls.indexOf(l), a = ops[i]!.shape[first]!, b = ops[i]!.shape[d]!;
    if (a !== b) throw new LoomShapeError(`[einsum] einsum(): subscript ${l} is repeated for operand ${i} but the sizes don't match, ${a} != ${b}`);
  }));
  // sizes per label; size 1 broadcasts
  const size = new Map<string, number>();
  labels.forEach((ls, i) => ls.forEach((l, d) => {
    const s = ops[i]!.shape[d]!;
    const have = size.get(l);
    if (have === undefined || have === 1) size.set(l, s);
    else if (s !== 1 && s !== have) {
      throw new LoomShapeError(`[einsum] einsum(): operands do not broadcast: subscript ${l.startsWith(".") ? "..." : l} has size ${have} and ${s} (operand ${i} of shape ${fmtShape(ops[i]!.shape)})`);
    }
  }));

  // per operand: diagonals of repeated labels, then sum labels nobody else needs
  const items = ops.map((x, i) => {
    let t = x;
    let ls = [...labels[i]!];
    for (;;) {
      const dup = ls.findIndex((l, k) => ls.indexOf(l) !== k);
      if (dup < 0) break;
      const first = ls.indexOf(ls[dup]!);
      t = diagonal(t, 0, first, dup);
      const l = ls[dup]!;
      ls = [...ls.filter((_, k) => k !== first && k !== dup), l];
    }
    return { t, ls };
  });
  const neededElsewhere = (l: string, skip: number) => out.includes(l) || items.some((it, j) => j !== skip && it.ls.includes(l));
  items.forEach((it, i) => {
    const drop = it.ls.map((l, d) => (neededElsewhere(l, i) ? -1 : d)).filter((d) => d >= 0);
    if (drop.length) {
      it.t = it.t.sum(drop);
      it.ls = it.ls.filter((_, d) => !drop.includes(d));
    }
  });

  let acc = items[0]!;
  for (let i = 1; i < items.length; i++) {
    const b = items[i]!;
    const later = (l: string) => out.includes(l) || items.slice(i + 1).some((it) => it.ls.includes(l));
    const batch = acc.ls.filter((l) => b.ls.includes(l) && later(l));
    const contract = acc.ls.filter((l) => b.ls.includes(l) && !later(l));
    const aonly = acc.ls.filter((l) => !b.ls.includes(l));
    const bonly = b.ls.filter((l) => !acc.ls.includes(l));
    const sz = (ls: string[]) => ls.map((l) => size.get(l)!);
    const arrange = (it: { t: S; ls: string[] }, order: string[]): S => {
      const p = it.t.permute(order.map((l) => it.ls.indexOf(l)));
      const shared = order.filter((l) => batch.includes(l) || contract.includes(l));
      // broadcast size-1 shared dims to the label's size
      return shared.some((l) => p.shape[order.indexOf(l)] !== size.get(l)) ? p.expand(order.map((l, d) => (shared.includes(l) ? size.get(l)! : p.shape[d]!))) : p;
    };
    const prod = (ls: string[]) => sz(ls).reduce((x, y) => x * y, 1);
    let t: S;
    if (contract.length === 0) {
      const A = arrange(acc, [...batch, ...aonly]).reshape([...sz(batch), ...sz(aonly), ...bonly.map(() => 1)]);
      const B = arrange(b, [...batch, ...bonly]).reshape([...sz(batch), ...aonly.map(() => 1), ...sz(bonly)]);
      t = A.mul(B);
    } else {
      const A = arrange(acc, [...batch, ...aonly, ...contract]).reshape([prod(batch), prod(aonly), prod(contract)]); // [B, M, K]
      const B = arrange(b, [...batch, ...contract, ...bonly]).reshape([prod(batch), prod(contract), prod(bonly)]); // [B, K, N]
      t = A.matmul(B).reshape([...sz(batch), ...sz(aonly), ...sz(bonly)]);
    }
    acc = { t, ls: [...batch, ...aonly, ...bonly] };
  }
  let { t, ls } = acc;
  const drop = ls.map((l, d) => (out.includes(l) ? -1 : d)).filter((d) => d >= 0);
  if (drop.length) {
    t = t.sum(drop);
    ls = ls.filter((_, d) => !drop.includes(d));
  }
  // a size-1 broadcast label of a single operand keeps its size 1 (torch gives the broadcast size
  // only where another operand has it, which the products above already produced)
  return t.permute(out.map((l) => ls.indexOf(l)));
}
