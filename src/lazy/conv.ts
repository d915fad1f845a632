/**
 * Convolution (torch.nn.functional.conv1d / conv2d) on a GEMM lowering, and the sliding-window
 * gather it stands on (F.unfold / F.fold), which pooling (pooling.ts) shares.
 *
 * im2col with existing ops: the input's spatial dims are flattened to P positions and, where a
 * window reaches outside the input, one fill slot P is appended (0 for convolution and average
 * pooling, -inf for max pooling). ONE index_select with an int64 index built on the host from the
 * shapes ([K·L]: kernel offset k, output position l -> the flat input position read, or P) gives
 * the columns [N, C, K, L]. A convolution is then one batched matmul per group:
 * weight [g, O/g, C/g·K] @ cols [N, g, C/g·K, L] -> [N, O, L]. Gradients come from autograd
 * (index_select's rule is index_add, i.e. col2im; matmul's are matmuls), so every backend runs it
 * with its existing kernels and lazy results equal eager ones.
 * Source: Chellapilla, Puri & Simard 2006, "High Performance Convolutional Neural Networks for
 * Document Processing" (im2col + GEMM); torch.nn.functional.conv2d / unfold / fold.
 */
import { OPS } from "../graph/registry.ts";
import { isFloating } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { allocData, fromValues, type TensorData } from "../tensor/storage.ts";
import { padIndex } from "./shape_ops.ts";
import type { TensorOps } from "./surface.ts";

/** An int for every spatial dim, or one int for all of them (torch's `_pair`). */
export type IntOrTuple = number | readonly number[];
/** How a convolution reads outside its input (torch.nn.Conv2d's padding_mode). */
export type PaddingMode = "zeros" | "reflect" | "replicate" | "circular";

/**
 * `v` as `n` ints (torch `_single` / `_pair`). A one-element tuple stands for all `n` dims, as
 * ATen's convolution and pooling read it (avg_pool2d(x, 3, padding=[1])); `oneForAll` false
 * refuses it, as torch's unfold/fold (im2col) do.
 * @throws LoomValueError for a tuple of another length or a non-integer
 */
export function ntuple(op: string, name: string, v: IntOrTuple, n: number, oneForAll = true): number[] {
  const out = typeof v === "number" ? new Array<number>(n).fill(v) : v.length === 1 && oneForAll ? new Array<number>(n).fill(v[0]!) : [...v];
  if (out.length !== n || out.some((x) => !Number.isInteger(x))) {
    throw new LoomValueError(`[${op}] ${name} must be an int or a tuple of ${n} ints, got ${JSON.stringify(v)}`);
  }
  return out;
}

/**
 * One spatial dim of a window gather: `coord[k·out + o]` is the input coordinate that kernel
 * offset k reads at output position o, or -1 for the fill slot (padding, or past a short window).
 */
export interface AxisMap {
  readonly size: number;
  readonly k: number;
  readonly out: number;
  readonly coord: Int32Array;
  /** Identifies the map in the index cache. */
  readonly key: string;
}

/** A coordinate of the padded input in [0, size), or -1 for the fill slot (zeros); F.pad's map otherwise. */
function remap(c: number, size: number, mode: PaddingMode): number {
  return mode === "zeros" ? (c >= 0 && c < size ? c : -1) : padIndex(c, size, mode);
}

/**
 * A regular sliding window: offset k at output o reads o·stride - pad_before + k·dilation.
 * @param mode - what a coordinate outside the input reads (zeros: the fill slot)
 */
export function slidingAxis(size: number, k: number, stride: number, padBefore: number, dilation: number, out: number, mode: PaddingMode = "zeros"): AxisMap {
  const coord = new Int32Array(k * out);
  for (let j = 0; j < k; j++) {
    for (let o = 0; o < out; o++) coord[j * out + o] = remap(o * stride - padBefore + j * dilation, size, mode);
  }
  return { size, k, out, coord, key: `s${size},${k},${stride},${padBefore},${dilation},${out},${mode}` };
}

/**
 * Adaptive pooling's windows: output o covers [floor(o·size/out), ceil((o+1)·size/out)), so
 * k is the longest window and shorter ones read the fill slot past their end (torch's
 * start_index / end_index in AdaptiveAveragePooling.cpp).
 */
export function adaptiveAxis(size: number, out: number): AxisMap {
  const start = (o: number) => Math.floor((o * size) / out);
  const end = (o: number) => Math.ceil(((o + 1) * size) / out);
  let k = 0;
  for (let o = 0; o < out; o++) k = Math.max(k, end(o) - start(o));
  const coord = new Int32Array(k * out);
  for (let j = 0; j < k; j++) {
    for (let o = 0; o < out; o++) coord[j * out + o] = start(o) + j < end(o) ? start(o) + j : -1;
  }
  return { size, k, out, coord, key: `a${size},${out}` };
}

/** The combined gather of several axes over the flattened spatial dims. */
export interface WindowIndex {
  /** int64 [K·L]: entry k·L + l is the flat input position kernel offset k reads at output l, or P (fill). */
  readonly index: TensorData;
  /** Some entry reads the fill slot. */
  readonly filled: boolean;
  /** The index is 0..P-1 in order (a 1x1 window with stride 1): the gather is the input itself. */
  readonly identity: boolean;
  /** Kernel positions, output positions, input positions. */
  readonly K: number;
  readonly L: number;
  readonly P: number;
}

// Index tensors are rebuilt from shapes only; a training loop reuses a handful (bounded).
const INDEX_CACHE = new Map<string, WindowIndex>();
const INDEX_CACHE_MAX = 128;

/** Strides of a row-major shape. */
function rowMajor(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length).fill(1);
  for (let i = shape.length - 2; i >= 0; i--) s[i] = s[i + 1]! * shape[i + 1]!;
  return s;
}

/** Kernel positions k (row-major over the axes' k) by output positions l (row-major over out). */
export function windowIndex(axes: readonly AxisMap[]): WindowIndex {
  const key = axes.map((a) => a.key).join("|");
  const hit = INDEX_CACHE.get(key);
  if (hit) return hit;
  const ks = axes.map((a) => a.k), os = axes.map((a) => a.out), is = axes.map((a) => a.size);
  const K = ks.reduce((a, b) => a * b, 1), L = os.reduce((a, b) => a * b, 1), P = is.reduce((a, b) => a * b, 1);
  const kStr = rowMajor(ks), oStr = rowMajor(os), iStr = rowMajor(is);
  const index = new Float64Array(K * L);
  let filled = false, identity = K * L === P;
  for (let k = 0; k < K; k++) {
    for (let l = 0; l < L; l++) {
      let flat = 0;
      for (let d = 0; d < axes.length && flat >= 0; d++) {
        const kd = Math.floor(k / kStr[d]!) % ks[d]!, od = Math.floor(l / oStr[d]!) % os[d]!;
        const c = axes[d]!.coord[kd * os[d]! + od]!;
        flat = c < 0 ? -1 : flat + c * iStr[d]!;
      }
      const i = k * L + l;
      if (flat < 0) filled = true;
      index[i] = flat < 0 ? P : flat;
      if (index[i] !== i) identity = false;
    }
  }
  const w: WindowIndex = { index: fromValues("int64", [K * L], index), filled, identity, K, L, P };
  if (INDEX_CACHE.size >= INDEX_CACHE_MAX) INDEX_CACHE.clear();
  INDEX_CACHE.set(key, w);
  return w;
}

/**
 * The windows of x read through `axes` (im2col).
 * @param x - [N, C, ...spatial] with spatial = the axes' sizes
 * @param fill - the value read outside the input (0 or -inf)
 * @returns [N, C, K, L]
 */
export function windows<S extends TensorOps<S>>(x: S, axes: readonly AxisMap[], fill: number): S {
  const [N, C] = x.shape as [number, number];
  const w = windowIndex(axes);
  let flat = x.reshape([N, C, w.P]);
  if (w.identity) return flat.reshape([N, C, w.K, w.L]);
  if (w.filled) flat = flat._apply(OPS.cat, [x._constant(fromValues(x.dtype, [1, 1, 1], [fill])).expand([N, C, 1])], { dim: 2 });
  return flat.index_select(2, x._constant(w.index)).reshape([N, C, w.K, w.L]);
}

/** Spatial sizes as torch prints them in conv errors: (5 x 4). */
function dimsText(v: readonly number[]): string {
  return `(${v.join(" x ")})`;
}

/** Output size of a convolution along one dim: floor((I + pads - d(k-1) - 1) / s) + 1 (below 1 when the dilated kernel does not fit). */
function convOut(I: number, padTotal: number, k: number, s: number, d: number): number {
  return Math.floor((I + padTotal - d * (k - 1) - 1) / s) + 1;
}

export interface ConvOptions {
  /** Step between windows, per spatial dim (default 1). */
  stride?: IntOrTuple;
  /**
   * Implicit padding on both sides per spatial dim (default 0); "valid" is 0; "same" pads so the
   * output has the input's size (stride 1 only), total d·(k-1) with the odd element on the right.
   */
  padding?: IntOrTuple | "same" | "valid";
  /** Spacing between kernel elements (default 1). */
  dilation?: IntOrTuple;
  /** Input and output channels are split into `groups` independent blocks (default 1). */
  groups?: number;
  /**
   * What the padding reads (default "zeros"). torch.nn.Conv2d's padding_mode; torch's functional
   * form has no such argument (the module pads with F.pad first), Loom reads the padded
   * positions straight from the input.
   */
  padding_mode?: PaddingMode;
}

/** Shared by conv1d / conv2d: n spatial dims. */
function convNd<S extends TensorOps<S>>(op: string, n: number, input: S, weight: S, bias: S | null | undefined, opts: ConvOptions): S {
  if (input.ndim !== n + 1 && input.ndim !== n + 2) {
    throw new LoomShapeError(`[${op}] Expected ${n + 1}D (unbatched) or ${n + 2}D (batched) input to ${op}, but got input of size: ${fmtShape(input.shape)}`);
  }
  if (weight.ndim !== n + 2) throw new LoomShapeError(`[${op}] weight must be ${n + 2}-D [out_channels, in_channels/groups, ${n === 1 ? "kW" : "kH, kW"}], got ${fmtShape(weight.shape)}`);
  if (!isFloating(input.dtype) || weight.dtype !== input.dtype || (bias && bias.dtype !== input.dtype)) {
    throw new LoomDtypeError(`[${op}] expected floating input, weight and bias of one dtype, got input ${input.dtype}, weight ${weight.dtype}${bias ? `, bias ${bias.dtype}` : ""}`);
  }
  const unbatched = input.ndim === n + 1;
  const x = unbatched ? input.unsqueeze(0) : input;
  const groups = opts.groups ?? 1;
  if (!Number.isInteger(groups) || groups <= 0) throw new LoomValueError(`[${op}] non-positive groups is not supported (groups=${groups})`);
  const [N, C] = x.shape as [number, number];
  const [O, Cg] = weight.shape as [number, number];
  if (O % groups !== 0) {
    throw new LoomShapeError(`[${op}] Given groups=${groups}, expected weight to be divisible by ${groups} at dimension 0, but got weight of size ${fmtShape(weight.shape)} instead`);
  }
  if (Cg * groups !== C) {
    throw new LoomShapeError(`[${op}] Given groups=${groups}, weight of size ${fmtShape(weight.shape)}, expected input${fmtShape(x.shape)} to have ${Cg * groups} channels, but got ${C} channels instead`);
  }
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== O)) {
    throw new LoomShapeError(`[${op}] Given weight of size ${fmtShape(weight.shape)}, expected bias to be 1-dimensional with ${O} elements, but got bias of size ${fmtShape(bias.shape)} instead`);
  }
  const ks = weight.shape.slice(2), is = x.shape.slice(2);
  const stride = ntuple(op, "stride", opts.stride ?? 1, n);
  const dilation = ntuple(op, "dilation", opts.dilation ?? 1, n);
  if (stride.some((s) => s <= 0)) throw new LoomValueError(`[${op}] non-positive stride is not supported (stride=${fmtShape(stride)})`);
  if (dilation.some((d) => d <= 0)) throw new LoomValueError(`[${op}] dilation should be greater than zero (dilation=${fmtShape(dilation)})`);
  const padOpt = opts.padding ?? 0;
  let before: number[], total: number[];
  if (padOpt === "same") {
    if (stride.some((s) => s !== 1)) throw new LoomValueError(`[${op}] padding='same' is not supported for strided convolutions (stride=${fmtShape(stride)})`);
    total = ks.map((k, i) => dilation[i]! * (k - 1));
    before = total.map((t) => Math.floor(t / 2)); // torch puts the odd element on the right
  } else {
    before = padOpt === "valid" ? new Array<number>(n).fill(0) : ntuple(op, "padding", padOpt, n);
    if (before.some((p) => p < 0)) throw new LoomValueError(`[${op}] negative padding is not supported (padding=${fmtShape(before)})`);
    total = before.map((p) => 2 * p);
  }
  const mode = opts.padding_mode ?? "zeros";
  if (!["zeros", "reflect", "replicate", "circular"].includes(mode)) {
    throw new LoomValueError(`[${op}] padding_mode must be one of "zeros", "reflect", "replicate", "circular", got ${JSON.stringify(mode)}`);
  }
  if (mode !== "zeros") {
    is.forEach((I, i) => {
      const p = Math.max(before[i]!, total[i]! - before[i]!);
      if (mode === "reflect" ? p >= I : p > I) {
        throw new LoomValueError(`[${op}] padding_mode="${mode}": padding ${p} at spatial dim ${i} must be ${mode === "reflect" ? "less than" : "at most"} the input size ${I} (input ${fmtShape(x.shape)})`);
      }
    });
  }
  const padded = is.map((I, i) => I + total[i]!);
  if (ks.some((k, i) => dilation[i]! * (k - 1) + 1 > padded[i]!)) {
    throw new LoomShapeError(`[${op}] Calculated padded input size per channel: ${dimsText(padded)}. Kernel size: ${dimsText(ks.map((k, i) => dilation[i]! * (k - 1) + 1))}. Kernel size can't be greater than actual input size (input ${fmtShape(x.shape)}, weight ${fmtShape(weight.shape)})`);
  }
  const outs = is.map((I, i) => convOut(I, total[i]!, ks[i]!, stride[i]!, dilation[i]!));
  const axes = is.map((I, i) => slidingAxis(I, ks[i]!, stride[i]!, before[i]!, dilation[i]!, outs[i]!, mode));
  const K = ks.reduce((a, b) => a * b, 1), L = outs.reduce((a, b) => a * b, 1);
  const cols = windows(x, axes, 0).reshape([N, groups, Cg * K, L]); // [N, g, C/g·K, L]
  const w = weight.reshape([groups, O / groups, Cg * K]); // [g, O/g, C/g·K]
  let y = w.matmul(cols).reshape([N, O, ...outs]); // [N, g, O/g, L] -> [N, O, ...out]
  if (bias) y = y.add(bias.reshape([O, ...new Array<number>(n).fill(1)]));
  return unbatched ? y.squeeze(0) : y;
}

/**
 * 1-D convolution (cross-correlation, as torch) over [N, C_in, L].
 * @param input - [N, C_in, L] or unbatched [C_in, L], float
 * @param weight - [C_out, C_in/groups, kW], same dtype
 * @param bias - [C_out] or null
 * @returns [N, C_out, L_out] (unbatched: [C_out, L_out]), L_out = floor((L + 2p - d(kW-1) - 1)/s) + 1
 * @throws LoomShapeError for a channel mismatch, groups not dividing C_out, a bias of the wrong
 *   size, or a kernel larger than the padded input; LoomValueError for bad stride/padding/
 *   dilation/groups or "same" with a stride; LoomDtypeError for mixed or integer dtypes
 * Source: torch.nn.functional.conv1d
 */
export function conv1d<S extends TensorOps<S>>(input: S, weight: S, bias?: S | null, opts: ConvOptions = {}): S {
  return convNd("conv1d", 1, input, weight, bias, opts);
}

/**
 * 2-D convolution (cross-correlation, as torch) over [N, C_in, H, W].
 * @param input - [N, C_in, H, W] or unbatched [C_in, H, W], float
 * @param weight - [C_out, C_in/groups, kH, kW], same dtype
 * @param bias - [C_out] or null
 * @returns [N, C_out, H_out, W_out], each size floor((I + 2p - d(k-1) - 1)/s) + 1
 * @throws as conv1d
 * Source: torch.nn.functional.conv2d
 */
export function conv2d<S extends TensorOps<S>>(input: S, weight: S, bias?: S | null, opts: ConvOptions = {}): S {
  return convNd("conv2d", 2, input, weight, bias, opts);
}

export interface UnfoldOptions {
  dilation?: IntOrTuple;
  padding?: IntOrTuple;
  stride?: IntOrTuple;
}

/** The sliding windows of unfold/fold over a spatial size, checked as torch's im2col/col2im shape checks. */
function foldAxes(op: string, spatial: readonly number[], kernel_size: IntOrTuple, opts: UnfoldOptions, what: string): AxisMap[] {
  const k = ntuple(op, "kernel_size", kernel_size, 2, false), d = ntuple(op, "dilation", opts.dilation ?? 1, 2, false);
  const p = ntuple(op, "padding", opts.padding ?? 0, 2, false), s = ntuple(op, "stride", opts.stride ?? 1, 2, false);
  if (k.some((v) => v <= 0) || d.some((v) => v <= 0) || s.some((v) => v <= 0) || p.some((v) => v < 0)) {
    throw new LoomValueError(`[${op}] kernel_size, dilation and stride must be positive and padding non-negative, got kernel_size=${fmtShape(k)}, dilation=${fmtShape(d)}, padding=${fmtShape(p)}, stride=${fmtShape(s)}`);
  }
  const outs = spatial.map((I, i) => convOut(I, 2 * p[i]!, k[i]!, s[i]!, d[i]!));
  if (outs.some((o) => o < 1)) {
    throw new LoomShapeError(`[${op}] Given ${what} ${dimsText(spatial)}, kernel_size=${fmtShape(k)}, dilation=${fmtShape(d)}, padding=${fmtShape(p)}, stride=${fmtShape(s)}, calculated shape of the array of sliding blocks as ${dimsText(outs)}, which is too small (non-positive)`);
  }
  return spatial.map((I, i) => slidingAxis(I, k[i]!, s[i]!, p[i]!, d[i]!, outs[i]!));
}

/**
 * Extract sliding local blocks (im2col): [N, C, H, W] -> [N, C·kH·kW, L], L the number of
 * windows; channel-major, then kernel row, then kernel column (torch's order).
 * @param input - [N, C, H, W] or unbatched [C, H, W]
 * @throws LoomShapeError for another rank or no complete window
 * Source: torch.nn.functional.unfold
 */
export function unfold<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts: UnfoldOptions = {}): S {
  if (input.ndim !== 3 && input.ndim !== 4) throw new LoomShapeError(`[unfold] Expected 3D or 4D (batch mode) tensor for input, but got ${fmtShape(input.shape)}`);
  const x = input.ndim === 3 ? input.unsqueeze(0) : input;
  const axes = foldAxes("unfold", x.shape.slice(2), kernel_size, opts, "input with spatial size");
  const [N, C] = x.shape as [number, number];
  const cols = windows(x, axes, 0);
  const out = cols.reshape([N, C * cols.shape[2]!, cols.shape[3]!]);
  return input.ndim === 3 ? out.squeeze(0) : out;
}

/**
 * Combine sliding local blocks into a tensor, summing overlaps (col2im; the adjoint of unfold):
 * [N, C·kH·kW, L] -> [N, C, H, W] with [H, W] = output_size.
 * @param input - [N, C·kH·kW, L] or unbatched [C·kH·kW, L]
 * @throws LoomShapeError when dim 1 is not divisible by kH·kW or L is not the number of windows
 * Source: torch.nn.functional.fold
 */
export function fold<S extends TensorOps<S>>(input: S, output_size: IntOrTuple, kernel_size: IntOrTuple, opts: UnfoldOptions = {}): S {
  if (input.ndim !== 2 && input.ndim !== 3) throw new LoomShapeError(`[fold] Expected 2D or 3D (batch mode) tensor for input, but got ${fmtShape(input.shape)}`);
  const x = input.ndim === 2 ? input.unsqueeze(0) : input;
  const size = ntuple("fold", "output_size", output_size, 2, false);
  const axes = foldAxes("fold", size, kernel_size, opts, "output_size");
  const w = windowIndex(axes);
  const [N, CK, L] = x.shape as [number, number, number];
  if (CK % w.K !== 0) {
    throw new LoomShapeError(`[fold] Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)=${CK} and kernel_size=${fmtShape(ntuple("fold", "kernel_size", kernel_size, 2))} (input ${fmtShape(input.shape)})`);
  }
  if (L !== w.L) {
    throw new LoomShapeError(`[fold] Given output_size=${fmtShape(size)}, kernel_size=${fmtShape(ntuple("fold", "kernel_size", kernel_size, 2))}, expected size of input's dimension 2 to match the calculated number of sliding blocks ${w.L}, but got input.size(2)=${L} (input ${fmtShape(input.shape)})`);
  }
  const C = CK / w.K;
  const src = x.reshape([N, C, w.K * L]);
  const zeros = x._constant(allocData(x.dtype, [N, C, w.P + 1])); // slot P collects what padding read
  const out = zeros.index_add(2, x._constant(w.index), src).narrow(2, 0, w.P).reshape([N, C, ...size]);
  return input.ndim === 2 ? out.squeeze(0) : out;
}
