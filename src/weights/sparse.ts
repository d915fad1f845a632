/**
 * Sparse: a weight W [N, K] with most entries zero, stored in CSR or COO (torch's sparse layouts)
 * and multiplied without building W: `linear(x)` is the registry's spmm op (a native C kernel,
 * a WGSL kernel, and the js reference: src/graph/ops/spmm.ts).
 *
 * Pieces (indices int32, values float32):
 * - CSR: crow_indices [N + 1], col_indices [nnz], values [nnz] (torch.sparse_csr_tensor);
 * - COO: indices [2, nnz] (rows, cols), values [nnz], sorted row-major without duplicates, as
 *   torch's coalesced COO (torch.sparse_coo_tensor(...).coalesce()).
 * Bytes: CSR 8·nnz + 4·(N + 1), COO 12·nnz, against 4·N·K dense: CSR saves memory only above
 * 50% sparsity (the report of loom.compress shows it).
 *
 * `Sparse.prune` makes one by magnitude pruning, as torch.nn.utils.prune.l1_unstructured: the
 * round(sparsity·N·K) entries of smallest |w| are dropped (ties: lower flat index first).
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { OPS } from "../graph/registry.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { LoomFormatError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { rint } from "./quantize.ts";
import { WeightNode, raw_tensor, expect_piece, register_weight_kind, type JsonValue, type WeightSpec } from "./node.ts";

export type SparseFormat = "csr" | "coo";
export const SPARSE_FORMATS: readonly SparseFormat[] = ["csr", "coo"];

const ints = (t: Tensor): Int32Array => Int32Array.from(t.contiguous().dataSync());

export class Sparse extends WeightNode {
  readonly kind = "sparse";
  readonly format: SparseFormat;
  /** Non-zero values [nnz], row-major order. */
  readonly values: Tensor;
  /** CSR: row pointers [N + 1] int32 (null for COO). */
  readonly crow_indices: Tensor | null;
  /** CSR: column of each value [nnz] int32 (null for COO). */
  readonly col_indices: Tensor | null;
  /** COO: [2, nnz] int32 rows and columns (null for CSR). */
  readonly indices: Tensor | null;
  /** The CSR arrays spmm reads, plus each value's row (the gradient's): derived once. */
  private _csr: { crow: Tensor; col: Tensor; row: Tensor } | null = null;

  /**
   * Wrap sparse pieces (use `Sparse.prune` to sparsify a dense weight). The structure is checked.
   * @param shape - logical [N, K]
   * @param idx - CSR: { crow_indices, col_indices }; COO: { indices }
   * @throws LoomFormatError for a malformed structure (naming the tensor, the piece and the value)
   */
  constructor(format: SparseFormat, shape: readonly number[], values: Tensor, idx: { crow_indices?: Tensor; col_indices?: Tensor; indices?: Tensor }, name = "weight") {
    super(shape, values.dtype);
    if (!SPARSE_FORMATS.includes(format)) throw new LoomValueError(`[Sparse] ${name}: unknown format ${JSON.stringify(format)} (expected csr or coo)`);
    if (shape.length !== 2) throw new LoomShapeError(`[Sparse] ${name}: weight must be 2-D [out, in], got ${fmtShape(shape)}`);
    this.format = format;
    this.values = values;
    this.crow_indices = format === "csr" ? idx.crow_indices ?? null : null;
    this.col_indices = format === "csr" ? idx.col_indices ?? null : null;
    this.indices = format === "coo" ? idx.indices ?? null : null;
    this.check(name);
  }

  /** @throws LoomFormatError unless the pieces describe a valid sparse [N, K] matrix */
  private check(name: string): void {
    const [N, K] = this.shape as [number, number];
    const nnz = this.values.shape[0]!;
    const bad = (msg: string) => new LoomFormatError(`[Sparse ${this.format}] ${name}: ${msg}`);
    if (this.values.ndim !== 1 || this.values.dtype !== "float32") throw bad(`values must be float32 [nnz], got ${this.values.dtype} ${fmtShape(this.values.shape)}`);
    let rows: Int32Array, cols: Int32Array;
    if (this.format === "csr") {
      const cr = this.crow_indices, cc = this.col_indices;
      if (!cr || !cc) throw bad("needs crow_indices and col_indices");
      if (cr.dtype !== "int32" || cr.ndim !== 1 || cr.shape[0] !== N + 1) throw bad(`crow_indices must be int32 [${N + 1}], got ${cr.dtype} ${fmtShape(cr.shape)}`);
      if (cc.dtype !== "int32" || cc.ndim !== 1 || cc.shape[0] !== nnz) throw bad(`col_indices must be int32 [${nnz}], got ${cc.dtype} ${fmtShape(cc.shape)}`);
      const crow = ints(cr);
      cols = ints(cc);
      rows = new Int32Array(nnz);
      for (let n = 0; n <= N; n++) {
        const ok = n === 0 ? crow[0] === 0 : crow[n]! >= crow[n - 1]! && crow[n]! <= nnz;
        if (!ok || (n === N && crow[N] !== nnz)) throw bad(`crow_indices[${n}] = ${crow[n]} (must rise from 0 to nnz = ${nnz})`);
        if (n < N) rows.fill(n, crow[n]!, crow[n + 1]!);
      }
    } else {
      const ix = this.indices;
      if (!ix) throw bad("needs indices");
      if (ix.dtype !== "int32" || ix.ndim !== 2 || ix.shape[0] !== 2 || ix.shape[1] !== nnz) throw bad(`indices must be int32 [2, ${nnz}], got ${ix.dtype} ${fmtShape(ix.shape)}`);
      const all = ints(ix);
      rows = all.slice(0, nnz);
      cols = all.slice(nnz);
    }
    for (let p = 0; p < nnz; p++) {
      const r = rows[p]!, c = cols[p]!;
      if (r < 0 || r >= N) throw bad(`row ${r} of entry ${p} is outside [0, ${N})`);
      if (c < 0 || c >= K) throw bad(`column ${c} of entry ${p} is outside [0, ${K})`);
      if (p > 0 && (r < rows[p - 1]! || (r === rows[p - 1]! && c <= cols[p - 1]!))) {
        throw bad(`entry ${p} (${r}, ${c}) is not after entry ${p - 1} (${rows[p - 1]}, ${cols[p - 1]}): entries must be sorted row-major without duplicates`);
      }
    }
    const crow = new Int32Array(N + 1);
    for (let p = 0; p < nnz; p++) crow[rows[p]! + 1]!++;
    for (let n = 0; n < N; n++) crow[n + 1]! += crow[n]!;
    this._csr = { crow: this.crow_indices ?? raw_tensor("int32", [N + 1], crow), col: this.col_indices ?? raw_tensor("int32", [nnz], cols), row: raw_tensor("int32", [nnz], rows) };
  }

  /** Number of stored values. */
  get nnz(): number {
    return this.values.shape[0]!;
  }

  /** Fraction of zero entries, 1 - nnz / (N·K). */
  get sparsity(): number {
    return this.numel() === 0 ? 0 : 1 - this.nnz / this.numel();
  }

  /**
   * Magnitude pruning of a dense weight (torch.nn.utils.prune.l1_unstructured(amount=sparsity)):
   * the round(sparsity·N·K) entries of smallest |w| are dropped, the rest kept exactly.
   * @param w - [N, K] float32 (eager, or lazy: realized)
   * @param sparsity - fraction of entries to drop, in [0, 1)
   * @param opts.format - "csr" (default) or "coo"; opts.name - named in errors
   * @throws LoomValueError for a sparsity outside [0, 1) (naming the tensor and the value);
   *   LoomShapeError unless w is 2-D; LoomDtypeError unless float32
   */
  static prune(w: TensorOps<any>, sparsity: number, opts: { format?: SparseFormat; name?: string } = {}): Sparse {
    const name = opts.name ?? "weight", format = opts.format ?? "csr";
    if (typeof sparsity !== "number" || !(sparsity >= 0 && sparsity < 1)) {
      throw new LoomValueError(`[Sparse] ${name}: sparsity ${sparsity} is outside [0, 1)`);
    }
    if (w.ndim !== 2) throw new LoomShapeError(`[Sparse] ${name}: weight must be 2-D [out, in], got ${fmtShape(w.shape)}`);
    const e = no_grad(() => (w instanceof Tensor ? w : (w as unknown as { eval(): Tensor }).eval()).detach().float());
    const [N, K] = e.shape as [number, number];
    const v = e.contiguous().dataSync(); // float64 copies of the float32 values
    const drop = rint(sparsity * N * K); // Python's round(), as torch.nn.utils.prune._compute_nparams_toprune
    // the first `drop` entries in ascending |w| (NaN as the largest), ties by flat index: every
    // |w| below the drop-th smallest magnitude t, then the lowest-index entries equal to t
    const mag = new Float64Array(N * K);
    for (let i = 0; i < mag.length; i++) mag[i] = Number.isNaN(v[i]!) ? Infinity : Math.abs(v[i]!);
    const keep = new Uint8Array(N * K).fill(1);
    if (drop > 0) {
      const t = Float64Array.from(mag).sort()[drop - 1]!; // numeric typed-array sort
      let left = drop;
      for (let i = 0; i < mag.length; i++) if (mag[i]! < t) { keep[i] = 0; left--; }
      for (let i = 0; i < mag.length && left > 0; i++) if (mag[i] === t) { keep[i] = 0; left--; }
    }
    const nnz = N * K - drop;
    const rows = new Int32Array(nnz), cols = new Int32Array(nnz), vals = new Float32Array(nnz);
    const crow = new Int32Array(N + 1);
    let p = 0;
    for (let n = 0; n < N; n++) {
      for (let k = 0; k < K; k++) {
        if (!keep[n * K + k]) continue;
        rows[p] = n;
        cols[p] = k;
        vals[p++] = v[n * K + k]!;
      }
      crow[n + 1] = p;
    }
    const values = raw_tensor("float32", [nnz], vals);
    if (format === "csr") return new Sparse("csr", [N, K], values, { crow_indices: raw_tensor("int32", [N + 1], crow), col_indices: raw_tensor("int32", [nnz], cols) }, name);
    const ix = new Int32Array(2 * nnz);
    ix.set(rows, 0);
    ix.set(cols, nnz);
    return new Sparse(format, [N, K], values, { indices: raw_tensor("int32", [2, nnz], ix) }, name);
  }

  pieces(): Record<string, Tensor> {
    return this.format === "csr"
      ? { crow_indices: this.crow_indices!, col_indices: this.col_indices!, values: this.values }
      : { indices: this.indices!, values: this.values };
  }

  override attrs(): Record<string, JsonValue> {
    return { format: this.format };
  }

  /**
   * The dense weight with registry ops: the values scattered (index_add) into zeros at flat
   * positions row·K + col.
   * @returns [N, K] float32
   */
  decompose<S extends TensorOps<S>>(like: S): S {
    const [N, K] = this.shape as [number, number];
    const c = this._csr!;
    const flat = this.piece_as(c.row, like).long().mul(K).add(this.piece_as(c.col, like).long()); // [nnz] int64
    const zeros = this.piece_as(raw_tensor("float32", [N * K], new Float32Array(N * K)), like);
    return zeros.index_add(0, flat, this.piece_as(this.values, like)).reshape([N, K]);
  }

  /**
   * y = x Wᵀ + b through spmm (W never built).
   * @param x - [*, K] float32; bias - [N] or null
   * @returns [*, N] float32
   * @throws LoomShapeError if x does not end in K; LoomDtypeError unless x is float32
   */
  override linear<S extends TensorOps<S>>(x: S, bias: S | null = null): S {
    this.check_linear_input(x);
    const c = this._csr!;
    const y = x._apply(OPS.spmm, [this.piece_as(c.crow, x), this.piece_as(c.col, x), this.piece_as(this.values, x), this.piece_as(c.row, x)], {});
    return bias ? y.add(bias) : y;
  }
}

register_weight_kind("sparse", (spec: WeightSpec) => {
  const f = spec.attrs.format;
  if (f !== "csr" && f !== "coo") throw new LoomFormatError(`[sparse] attrs.format must be "csr" or "coo", got ${JSON.stringify(f)}`);
  if (spec.shape.length !== 2) throw new LoomFormatError(`[sparse] graph shape must be 2-D, got ${fmtShape(spec.shape)}`);
  const values = spec.pieces.values;
  if (!values) throw new LoomFormatError(`[sparse] missing piece "values"`);
  const nnz = values.shape[0] ?? 0;
  if (f === "csr") {
    return new Sparse("csr", spec.shape, values, {
      crow_indices: expect_piece("sparse", spec, "crow_indices", "int32", [spec.shape[0]! + 1]),
      col_indices: expect_piece("sparse", spec, "col_indices", "int32", [nnz]),
    });
  }
  return new Sparse("coo", spec.shape, values, { indices: expect_piece("sparse", spec, "indices", "int32", [2, nnz]) });
});
