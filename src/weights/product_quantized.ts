/**
 * ProductQuantized: product quantization of a weight W [N, K] (Jégou, Douze, Schmid 2011,
 * "Product quantization for nearest neighbor search", sec. II). Each row is cut into J = K / d
 * sub-vectors of d values; sub-space j has its own codebook of C centroids (k-means over the N
 * sub-vectors of that sub-space), and each sub-vector is stored as the uint8 code of its nearest
 * centroid.
 *
 * Pieces: codebooks [J, C, d] float32, codes [N, J] uint8: N·J bytes + 4·J·C·d instead of 4·N·K.
 *
 * k-means is deterministic for a seed: k-means++ seeding (Arthur & Vassilvitskii 2007) drawn
 * from Loom's Generator, then Lloyd iterations (nearest centroid by squared distance, ties to
 * the lower index; an empty cluster keeps its centroid) until no assignment changes or `n_iter`.
 *
 * `linear(x)` for few rows of x (M ≤ d) uses look-up tables (the paper's asymmetric distance
 * computation, here for inner products): T[m, j, c] = x_j·codebook[j, c], then
 * y[m, n] = Σ_j T[m, j, codes[n, j]], M·K·C + M·N·J work and no dense W. More rows go through
 * the memoized dense weight, which is then cheaper.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import type { TensorOps } from "../lazy/surface.ts";
import { Tensor } from "../lazy/tensor.ts";
import { Generator } from "../tensor/rng.ts";
import { LoomFormatError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { WeightNode, raw_tensor, expect_piece, register_weight_kind, type JsonValue, type WeightSpec } from "./node.ts";


/** Options of ProductQuantized.fit. */
export interface PQOptions {
  /** Sub-vector length d (must divide K; default 4). */
  sub_dim?: number;
  /** Codebook size C = 2^bits, 1..8 bits (default 8: 256 centroids), at most N. */
  bits?: number;
  /** Most Lloyd iterations (default 25). */
  n_iter?: number;
  /** Seed of the k-means++ draws (default 0). */
  seed?: number;
  /** Named in errors (e.g. the module path). */
  name?: string;
}

/**
 * k-means of n points of dimension d (row-major `pts`) into c clusters.
 * @returns centroids [c, d] and each point's cluster
 */
export function kmeans(pts: Float64Array, n: number, d: number, c: number, n_iter: number, gen: Generator): { centroids: Float64Array; assign: Uint8Array } {
  const cent = new Float64Array(c * d);
  const dist = (p: number, q: Float64Array, qo: number) => {
    let s = 0;
    for (let t = 0; t < d; t++) {
      const u = pts[p * d + t]! - q[qo + t]!;
      s += u * u;
    }
    return s;
  };
  // k-means++: the first centroid uniform, each next one with probability ∝ D(x)²
  const first = gen.randint(0, n);
  cent.set(pts.subarray(first * d, first * d + d), 0);
  const best = new Float64Array(n);
  for (let p = 0; p < n; p++) best[p] = dist(p, cent, 0);
  for (let k = 1; k < c; k++) {
    let total = 0;
    for (let p = 0; p < n; p++) total += best[p]!;
    let pick = n - 1;
    if (total > 0) {
      let r = gen.uniform53() * total;
      for (let p = 0; p < n; p++) {
        r -= best[p]!;
        if (r < 0) { pick = p; break; }
      }
    } else pick = gen.randint(0, n); // every point is already a centroid: duplicates are harmless
    cent.set(pts.subarray(pick * d, pick * d + d), k * d);
    for (let p = 0; p < n; p++) best[p] = Math.min(best[p]!, dist(p, cent, k * d));
  }
  const assign = new Uint8Array(n);
  const sums = new Float64Array(c * d), counts = new Float64Array(c);
  for (let it = 0; it < n_iter; it++) {
    let changed = it === 0;
    for (let p = 0; p < n; p++) {
      let a = 0, bd = Infinity;
      for (let k = 0; k < c; k++) {
        const dd = dist(p, cent, k * d);
        if (dd < bd) { bd = dd; a = k; }
      }
      if (assign[p] !== a) { assign[p] = a; changed = true; }
    }
    if (!changed) break;
    sums.fill(0);
    counts.fill(0);
    for (let p = 0; p < n; p++) {
      const a = assign[p]!;
      counts[a]!++;
      for (let t = 0; t < d; t++) sums[a * d + t]! += pts[p * d + t]!;
    }
    for (let k = 0; k < c; k++) {
      if (counts[k] === 0) continue; // an empty cluster keeps its centroid
      for (let t = 0; t < d; t++) cent[k * d + t] = sums[k * d + t]! / counts[k]!;
    }
  }
  return { centroids: cent, assign };
}

export class ProductQuantized extends WeightNode {
  readonly kind = "pq";
  /** Centroids [J, C, d] float32. */
  readonly codebooks: Tensor;
  /** Centroid index of each sub-vector [N, J] uint8. */
  readonly codes: Tensor;
  private _offsets: Tensor | null = null;

  /**
   * Wrap fitted pieces (use `ProductQuantized.fit` to quantize a dense weight).
   * @param shape - logical [N, K] with K = J·d
   * @throws LoomFormatError if the pieces do not fit [N, K]
   */
  constructor(shape: readonly number[], codebooks: Tensor, codes: Tensor, name = "weight") {
    super(shape, "float32");
    const [N, K] = shape as [number, number];
    const [J, C, d] = codebooks.shape as [number, number, number];
    const ok = shape.length === 2 && codebooks.ndim === 3 && codebooks.dtype === "float32" && codes.dtype === "uint8" &&
      codes.ndim === 2 && codes.shape[0] === N && codes.shape[1] === J && J * d === K && C >= 1 && C <= 256;
    if (!ok) {
      throw new LoomFormatError(`[ProductQuantized] ${name}: codebooks ${codebooks.dtype} ${fmtShape(codebooks.shape)} and codes ${codes.dtype} ${fmtShape(codes.shape)} do not fit weight ${fmtShape(shape)} (codebooks float32 [J, C ≤ 256, d], codes uint8 [N, J], J·d = K)`);
    }
    const cv = codes.contiguous().dataSync();
    for (let i = 0; i < cv.length; i++) {
      if (cv[i]! >= C) throw new LoomFormatError(`[ProductQuantized] ${name}: code ${cv[i]} at ${i} is outside the codebook size ${C}`);
    }
    this.codebooks = codebooks;
    this.codes = codes;
  }

  /** Sub-vector length d. */
  get sub_dim(): number {
    return this.codebooks.shape[2]!;
  }
  /** Centroids per codebook C. */
  get n_centroids(): number {
    return this.codebooks.shape[1]!;
  }

  /**
   * Product-quantize a dense weight with per-sub-space k-means.
   * @param w - [N, K] float (eager, or lazy: realized)
   * @returns a node with C = min(2^bits, N) centroids per sub-space
   * @throws LoomShapeError if w is not 2-D or d does not divide K; LoomValueError for bits
   *   outside 1..8 or a sub_dim/n_iter that is not a positive integer (naming the tensor)
   */
  static fit(w: TensorOps<any>, opts: PQOptions = {}): ProductQuantized {
    const name = opts.name ?? "weight", d = opts.sub_dim ?? 4, bits = opts.bits ?? 8, n_iter = opts.n_iter ?? 25;
    if (w.ndim !== 2) throw new LoomShapeError(`[ProductQuantized] ${name}: weight must be 2-D [out, in], got ${fmtShape(w.shape)}`);
    if (!Number.isInteger(bits) || bits < 1 || bits > 8) throw new LoomValueError(`[ProductQuantized] ${name}: bits ${bits} is outside 1..8 (codes are uint8)`);
    if (!Number.isInteger(d) || d < 1) throw new LoomValueError(`[ProductQuantized] ${name}: sub_dim ${d} must be a positive integer`);
    if (!Number.isInteger(n_iter) || n_iter < 1) throw new LoomValueError(`[ProductQuantized] ${name}: n_iter ${n_iter} must be a positive integer`);
    const [N, K] = w.shape as [number, number];
    if (K % d !== 0) throw new LoomShapeError(`[ProductQuantized] ${name}: sub_dim ${d} does not divide in_features K=${K}`);
    if (N === 0) throw new LoomShapeError(`[ProductQuantized] ${name}: weight ${fmtShape(w.shape)} has no rows to cluster`);
    const e = no_grad(() => (w instanceof Tensor ? w : (w as unknown as { eval(): Tensor }).eval()).detach().float());
    const v = e.contiguous().dataSync();
    const J = K / d, C = Math.min(1 << bits, N);
    const gen = new Generator(opts.seed ?? 0);
    const cb = new Float32Array(J * C * d), codes = new Uint8Array(N * J);
    const pts = new Float64Array(N * d);
    for (let j = 0; j < J; j++) {
      for (let n = 0; n < N; n++) for (let t = 0; t < d; t++) pts[n * d + t] = v[n * K + j * d + t]!;
      const { centroids, assign } = kmeans(pts, N, d, C, n_iter, gen);
      cb.set(centroids, j * C * d); // rounded to float32 once
      for (let n = 0; n < N; n++) codes[n * J + j] = assign[n]!;
    }
    return new ProductQuantized([N, K], raw_tensor("float32", [J, C, d], cb), raw_tensor("uint8", [N, J], codes), name);
  }

  pieces(): Record<string, Tensor> {
    return { codebooks: this.codebooks, codes: this.codes };
  }

  override attrs(): Record<string, JsonValue> {
    return { sub_dim: this.sub_dim, n_centroids: this.n_centroids };
  }

  /** j·C for each sub-space j, int64 [J]: codes + offsets index the flattened codebooks. */
  private offsets(): Tensor {
    const J = this.codes.shape[1]!, C = this.n_centroids;
    return (this._offsets ??= raw_tensor("int64", [J], Float64Array.from({ length: J }, (_, j) => j * C)));
  }

  /** Flat codebook row of every sub-vector, int64 [N·J]. */
  private flat_codes<S extends TensorOps<S>>(like: S): S {
    return this.piece_as(this.codes, like).long().add(this.piece_as(this.offsets(), like)).reshape([-1]);
  }

  /** codebooks[j, codes[n, j]] laid out as rows, with registry ops. @returns [N, K] float32 */
  decompose<S extends TensorOps<S>>(like: S): S {
    const [N, K] = this.shape as [number, number];
    const J = this.codes.shape[1]!, C = this.n_centroids, d = this.sub_dim;
    const table = this.piece_as(this.codebooks, like).reshape([J * C, d]);
    return table.index_select(0, this.flat_codes(like)).reshape([N, K]);
  }

  /**
   * y = x Wᵀ + b: look-up tables for M ≤ d rows of x (W never built), else the memoized dense W.
   * @param x - [*, K] float32; bias - [N] or null
   * @returns [*, N]
   */
  override linear<S extends TensorOps<S>>(x: S, bias: S | null = null): S {
    this.check_linear_input(x);
    const [N, K] = this.shape as [number, number];
    const M = x.numel() / K;
    if (M > this.sub_dim) return super.linear(x, bias);
    const J = this.codes.shape[1]!, C = this.n_centroids, d = this.sub_dim;
    const xs = x.reshape([M, J, d]).transpose(0, 1); // [J, M, d]
    const T = xs.matmul(this.piece_as(this.codebooks, x).transpose(1, 2)); // [J, M, C]
    const lut = T.transpose(0, 1).reshape([M, J * C]); // [M, J·C]: row m, entry j·C + c
    const y = lut.index_select(1, this.flat_codes(x)).reshape([M, N, J]).sum(2); // [M, N]
    const out = y.reshape([...x.shape.slice(0, -1), N]);
    return bias ? out.add(bias) : out;
  }
}

register_weight_kind("pq", (spec: WeightSpec) => {
  if (spec.shape.length !== 2) throw new LoomFormatError(`[pq] graph shape must be 2-D, got ${fmtShape(spec.shape)}`);
  const [N, K] = spec.shape as [number, number];
  const d = spec.attrs.sub_dim, C = spec.attrs.n_centroids;
  if (typeof d !== "number" || typeof C !== "number" || !Number.isInteger(d) || d < 1 || K % d !== 0) {
    throw new LoomFormatError(`[pq] attrs sub_dim ${JSON.stringify(d)} / n_centroids ${JSON.stringify(C)} do not fit weight ${fmtShape(spec.shape)}`);
  }
  return new ProductQuantized(spec.shape, expect_piece("pq", spec, "codebooks", "float32", [K / d, C, d]), expect_piece("pq", spec, "codes", "uint8", [N, K / d]));
});
