/**
 * Rotary position embedding (RoPE) as one op: y = x·cos + rotate_half(x)·sin, Hugging Face's
 * `apply_rotary_pos_emb` for one of q or k, with HF's halves convention (`rotate_half(x) =
 * cat(−x2, x1)` over the two halves of the last dim, not interleaved pairs).
 * Source: Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding";
 * transformers/models/llama/modeling_llama.py `rotate_half`, `apply_rotary_pos_emb`.
 *
 * The decomposition is written once, `rotary_embedding_decomposed` below, with registry ops
 * (narrow, neg, cat, mul, add); it is the reference every kernel is held to. The op's js `ref`
 * computes it element by element with the same roundings (each product and the sum rounded to
 * the dtype, the negation exact), so the op gives the decomposition's bits on js; the native
 * float32 kernel (native/kernels/rope.c) rounds the same way (no contraction), so it is exact too.
 * float16/bfloat16: like every kernel op on the js backend (and torch's CPU kernels), the op
 * computes in float32 and rounds once to the half type; the decomposition rounds every op to it,
 * so the two differ by at most a half ulp of |x·c| + |x_p·s| (tests/rope bound it).
 *
 * With `transposed` the op is the adjoint: y = x·cos + rotate_halfᵀ(x·sin), rotate_halfᵀ(z) =
 * cat(z2, −z1). It is the gradient to x of the forward (and the forward is the gradient of it),
 * so backward runs one fused kernel too. When the two halves of sin are equal (HF's
 * `cat(freqs, freqs)`), the adjoint is the rotation by −sin.
 */
import { decoder, encoder, isFloating } from "../../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, fmtShape } from "../../tensor/errors.ts";
import { broadcastStrides } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";
import { defineOp, type Diff, type KernelOp, type Meta } from "../op.ts";
import { roundTo } from "../passes/program.ts";
import { cat } from "./movement.ts";

export interface RotaryAttrs {
  /** false: x·cos + rotate_half(x)·sin; true: the adjoint x·cos + rotate_halfᵀ(x·sin). */
  readonly transposed: boolean;
}

/** cat(−x2, x1) over the halves of the last dim (HF rotate_half). */
export function rotate_half<T extends Diff<T>>(x: T): T {
  const nd = x.shape.length, half = x.shape[nd - 1]! / 2;
  return x.narrow(-1, half, half).neg()._apply(cat, [x.narrow(-1, 0, half)], { dim: nd - 1 });
}

/** cat(x2, −x1): the transpose of rotate_half (rotate_halfᵀ·rotate_half = identity). */
export function rotate_half_t<T extends Diff<T>>(x: T): T {
  const nd = x.shape.length, half = x.shape[nd - 1]! / 2;
  return x.narrow(-1, half, half)._apply(cat, [x.narrow(-1, 0, half).neg()], { dim: nd - 1 });
}

/**
 * The decomposition, written once: x·cos + rotate_half(x)·sin (or, transposed,
 * x·cos + rotate_halfᵀ(x·sin)), every op a registry op. Eager on eager tensors, recorded on
 * lazy ones; fused kernels are tested against it.
 */
export function rotary_embedding_decomposed<T extends Diff<T>>(x: T, cos: T, sin: T, transposed = false): T {
  return transposed ? x.mul(cos).add(rotate_half_t(x.mul(sin))) : x.mul(cos).add(rotate_half(x).mul(sin));
}

function check(ins: readonly Meta[]): void {
  const [x, c, s] = ins as [Meta, Meta, Meta];
  const nd = x.shape.length, D = x.shape[nd - 1] ?? 0;
  const fits = (m: Meta) => m.shape.length >= 1 && m.shape.length <= nd && m.shape[m.shape.length - 1] === D &&
    m.shape.every((n, i) => n === 1 || n === x.shape[nd - m.shape.length + i]);
  const same = c.shape.length === s.shape.length && c.shape.every((n, i) => n === s.shape[i]);
  if (nd < 1 || D % 2 !== 0 || !fits(c) || !same) {
    throw new LoomShapeError(`[rotary_embedding] shapes x ${fmtShape(x.shape)}, cos ${fmtShape(c.shape)}, sin ${fmtShape(s.shape)}: expected x [..., D] with D even and cos, sin of one shape [..., D] broadcastable to x`);
  }
}

/**
 * y = x·cos + rotate_half(x)·sin (attrs.transposed: the adjoint).
 * @param inputs - x [..., D] (D even); cos, sin [..., D], one shape, broadcastable to x (HF passes
 *   [B, 1, T, D] against [B, H, T, D], or [T, D]); one floating dtype
 * @returns the shape and dtype of x
 * @throws LoomShapeError for an odd D or cos/sin that do not broadcast to x; LoomDtypeError for
 *   non-floating or mixed dtypes
 */
export const rotary_embedding: KernelOp<RotaryAttrs> = defineOp<RotaryAttrs, KernelOp<RotaryAttrs>>({
  kind: "kernel", arity: 3, name: "rotary_embedding",
  shape: (ins) => {
    check(ins);
    return [...ins[0]!.shape];
  },
  dtype: ([x, c, s]) => {
    const d = x!.dtype;
    if (!isFloating(d) || c!.dtype !== d || s!.dtype !== d) {
      throw new LoomDtypeError(`[rotary_embedding] x, cos, sin must share one floating dtype, got ${x!.dtype}, ${c!.dtype}, ${s!.dtype}`);
    }
    return d;
  },
  ref: ([x, c, s], a, out) => rotaryReference(x!, c!, s!, a.transposed, out),
  grad: (g, [x, c, s], _o, a, needs) => [
    needs[0] ? g._apply(rotary_embedding, [c!, s!], { transposed: !a.transposed }) : null,
    needs[1] ? g.mul(x!).sum_to_size(c!.shape) : null,
    // d/dsin: forward g·rotate_half(x); transposed x·rotate_half(g) (the same pairing, read the other way)
    needs[2] ? (a.transposed ? x!.mul(rotate_half(g)) : g.mul(rotate_half(x!))).sum_to_size(s!.shape) : null,
  ],
  describe: (a) => (a.transposed ? "transposed" : ""),
});

/**
 * The decomposition element by element: with h = D/2 and j the position in the last dim,
 *   forward:    y_j = R(R(x_j·c_j) + R(σ_j·x_p·s_j)),  σ = −1 for j < h, +1 above
 *   transposed: y_j = R(R(x_j·c_j) + R(σ_j·x_p·s_p)),  σ = +1 for j < h, −1 above
 * where p = j ± h is j's partner and R rounds to the dtype (neg and cat are exact; half dtypes
 * arrive here as float32, the js backend rounding the result to the half type once).
 * @param out - dense, x's shape
 */
function rotaryReference(x: TensorData, c: TensorData, s: TensorData, transposed: boolean, out: TensorData): void {
  const nd = x.shape.length, D = x.shape[nd - 1]!, h = D / 2;
  const R = roundTo(out.dtype);
  const rd = (t: TensorData) => { const dec = decoder(t.dtype); return dec ? (i: number) => dec(t.data, i) : (i: number) => t.data[i]!; };
  const rx = rd(x), rc = rd(c), rs = rd(s);
  const enc = encoder(out.dtype);
  // operand strides right-aligned to x's dims, 0 where cos/sin broadcast
  const xs = x.strides, cs = broadcastStrides(c.shape, c.strides, x.shape), ss = broadcastStrides(s.shape, s.strides, x.shape);
  const rows = D === 0 ? 0 : out.data.length / D;
  const idx = new Array<number>(nd).fill(0);
  for (let r = 0; r < rows; r++) {
    let ox = x.offset, oc = c.offset, os = s.offset;
    for (let d = 0; d < nd - 1; d++) { ox += idx[d]! * xs[d]!; oc += idx[d]! * cs[d]!; os += idx[d]! * ss[d]!; }
    for (let j = 0; j < D; j++) {
      const lo = j < h, p = lo ? j + h : j - h;
      const sign = lo === transposed ? 1 : -1;
      const sj = transposed ? p : j;
      const a = R(rx(ox + j * xs[nd - 1]!) * rc(oc + j * cs[nd - 1]!));
      const b = R(sign * rx(ox + p * xs[nd - 1]!) * rs(os + sj * ss[nd - 1]!));
      const y = R(a + b);
      out.data[r * D + j] = enc ? enc(y) : y;
    }
    for (let d = nd - 2; d >= 0; d--) {
      if (++idx[d]! < x.shape[d]!) break;
      idx[d] = 0;
    }
  }
}

/**
 * x·cos + rotate_half(x)·sin as the fused op: one kernel forward, one (the adjoint) backward.
 * @param x - [..., D] floating (D even); cos, sin - [..., D] of x's dtype, broadcastable to x
 * @returns x's shape and dtype
 * (cos/sin of another dtype than x: the decomposition, which promotes as the unfused ops do)
 * @throws LoomShapeError / LoomDtypeError (see rotary_embedding)
 */
export function apply_rotary<T extends Diff<T>>(x: T, cos: T, sin: T): T {
  // mixed dtypes (autocast: bf16 q with float32 cos) keep the decomposition's type promotion
  if (cos.dtype !== x.dtype || sin.dtype !== x.dtype) return rotary_embedding_decomposed(x, cos, sin);
  return x._apply(rotary_embedding, [cos, sin], { transposed: false });
}
