/**
 * LowRank: a weight W [N, K] stored as its rank-r truncated SVD, W ≈ U_r·diag(S_r)·Vh_r
 * (Eckart–Young: the best rank-r approximation in the Frobenius and spectral norms). The factors
 * come from LAPACK's gesdd (linalg.svd, src/lazy/linalg.ts): Loom writes no SVD.
 *
 * Pieces: U [N, r], S [r], Vh [r, K], float32: (N + K + 1)·r values instead of N·K, a saving
 * when r < N·K / (N + K + 1).
 *
 * `linear(x)` is two GEMMs, x·Vhᵀ scaled by S, then ·Uᵀ (+ b): [*, K] -> [*, r] -> [*, N], never
 * building W (2·M·r·(N + K) flops instead of 2·M·N·K). When a factor requires grad (trainable
 * factors) the same ops are recorded, so gradients reach U, S and Vh.
 */
import { linear as F_linear } from "../lazy/functional.ts";
import { svd } from "../lazy/linalg.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { WeightNode, expect_piece, register_weight_kind, type JsonValue, type WeightSpec } from "./node.ts";

export class LowRank extends WeightNode {
  readonly kind = "lowrank";
  /** Left singular vectors [N, r]. */
  readonly U: Tensor;
  /** Singular values [r], descending. */
  readonly S: Tensor;
  /** Right singular vectors, transposed [r, K]. */
  readonly Vh: Tensor;

  /**
   * Wrap factors (use `LowRank.from_dense` to factor a dense weight).
   * @param U - [N, r] float32; S - [r] float32; Vh - [r, K] float32
   * @throws LoomShapeError if the factors do not chain to [N, K]
   */
  constructor(U: Tensor, S: Tensor, Vh: Tensor, name = "weight") {
    const r = S.shape[0];
    if (U.ndim !== 2 || S.ndim !== 1 || Vh.ndim !== 2 || U.shape[1] !== r || Vh.shape[0] !== r) {
      throw new LoomShapeError(`[LowRank] ${name}: factors U ${fmtShape(U.shape)}, S ${fmtShape(S.shape)}, Vh ${fmtShape(Vh.shape)} do not fit U [N, r], S [r], Vh [r, K]`);
    }
    super([U.shape[0]!, Vh.shape[1]!], U.dtype);
    this.U = U;
    this.S = S;
    this.Vh = Vh;
  }

  /** The kept rank r. */
  get rank(): number {
    return this.S.shape[0]!;
  }

  /**
   * The rank-`rank` truncated SVD of a dense weight.
   * @param w - [N, K] float32|float64 (eager, or lazy: realized)
   * @param rank - integer in [1, min(N, K)]
   * @param name - named in errors (e.g. the module path)
   * @returns factors in w's dtype
   * @throws LoomValueError for a rank outside [1, min(N, K)] (naming the tensor and the value);
   *   LoomShapeError unless w is 2-D; as linalg.svd otherwise
   */
  static from_dense(w: TensorOps<any>, rank: number, name = "weight"): LowRank {
    if (w.ndim !== 2) throw new LoomShapeError(`[LowRank] ${name}: weight must be 2-D [out, in], got ${fmtShape(w.shape)}`);
    const k = Math.min(w.shape[0]!, w.shape[1]!);
    if (!Number.isInteger(rank) || rank < 1 || rank > k) {
      throw new LoomValueError(`[LowRank] ${name}: rank ${rank} is out of range [1, ${k}] for weight ${fmtShape(w.shape)}`);
    }
    const e = (w instanceof Tensor ? w : (w as unknown as { eval(): Tensor }).eval()).detach();
    const { U, S, Vh } = svd(e, { full_matrices: false });
    // contiguous copies: a narrowed view would keep (and count) the full factors
    return new LowRank(U.narrow(1, 0, rank).contiguous(), S.narrow(0, 0, rank).contiguous(), Vh.narrow(0, 0, rank).contiguous(), name);
  }

  pieces(): Record<string, Tensor> {
    return { U: this.U, S: this.S, Vh: this.Vh };
  }

  override attrs(): Record<string, JsonValue> {
    return { rank: this.rank };
  }

  /** U·diag(S)·Vh with registry ops. @returns [N, K] */
  decompose<S extends TensorOps<S>>(like: S): S {
    return this.piece_as(this.U, like).mul(this.piece_as(this.S, like)).matmul(this.piece_as(this.Vh, like));
  }

  /**
   * y = ((x·Vhᵀ)·diag(S))·Uᵀ + b: two GEMMs through rank r, W never built.
   * @param x - [*, K]; bias - [N] or null
   * @returns [*, N]
   * @throws LoomShapeError if x does not end in K
   */
  override linear<S extends TensorOps<S>>(x: S, bias: S | null = null): S {
    this.check_linear_input(x);
    const h = F_linear(x, this.piece_as(this.Vh, x)).mul(this.piece_as(this.S, x)); // [*, r]
    return F_linear(h, this.piece_as(this.U, x), bias); // [*, N]
  }
}

register_weight_kind("lowrank", (spec: WeightSpec) => {
  const [N, K] = spec.shape as [number, number];
  const r = spec.attrs.rank;
  if (spec.shape.length !== 2 || typeof r !== "number" || !Number.isInteger(r) || r < 0) {
    throw new LoomValueError(`[lowrank] graph needs a 2-D shape and an integer attrs.rank, got shape ${fmtShape(spec.shape)}, rank ${JSON.stringify(r)}`);
  }
  return new LowRank(
    expect_piece("lowrank", spec, "U", spec.dtype, [N, r]),
    expect_piece("lowrank", spec, "S", spec.dtype, [r]),
    expect_piece("lowrank", spec, "Vh", spec.dtype, [r, K]),
  );
});
