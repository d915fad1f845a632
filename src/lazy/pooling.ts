/**
 * Pooling (torch.nn.functional.max_pool1d/2d, avg_pool1d/2d, adaptive_avg_pool1d/2d,
 * adaptive_max_pool1d/2d) on the window gather of conv.ts: the windows [N, C, K, L] are reduced
 * over K. Max pooling reads -inf outside the input and takes `max(dim)` (argmax + gather, so the
 * gradient goes to the first maximum of each window in row-major window order, as torch's
 * kernels scan it); average pooling reads 0 there and divides each window's sum by torch's
 * divisor, a per-output constant computed on the host.
 * Source: torch.nn.functional; aten/src/ATen/native/Pool.h (pooling_output_shape),
 * AveragePool2d.cpp (divide_factor), AdaptiveAveragePooling.cpp (start_index / end_index).
 */
import { isFloating } from "../tensor/dtype.ts";
import { LoomDtypeError, LoomShapeError, LoomValueError, fmtShape } from "../tensor/errors.ts";
import { fromValues } from "../tensor/storage.ts";
import { adaptiveAxis, ntuple, slidingAxis, windowIndex, windows, type AxisMap, type IntOrTuple } from "./conv.ts";
import type { TensorOps } from "./surface.ts";

/** [N, C, ...spatial] from a batched or unbatched pooling input, checked. */
function batched<S extends TensorOps<S>>(op: string, input: S, n: number): { x: S; unbatched: boolean } {
  if (input.ndim !== n + 1 && input.ndim !== n + 2) {
    throw new LoomShapeError(`[${op}] Expected ${n + 1}D or ${n + 2}D (batch mode) tensor for input, but got input of size: ${fmtShape(input.shape)}`);
  }
  if (!isFloating(input.dtype)) throw new LoomDtypeError(`[${op}] expected a floating point input, got ${input.dtype}`);
  // only the batch dim may be empty: [C, *] unbatched, [N, C, *] batched (torch's check)
  if (input.shape.slice(input.ndim - n - 1).some((s) => s === 0)) {
    throw new LoomShapeError(`[${op}] Expected input's non-batch dimensions to have positive length, but input has a shape of ${fmtShape(input.shape)}`);
  }
  const unbatched = input.ndim === n + 1;
  return { x: unbatched ? input.unsqueeze(0) : input, unbatched };
}

/** [N, C, L] reduced windows back to [N, C, ...out] (without the batch dim when unbatched). */
function unflat<S extends TensorOps<S>>(y: S, outs: readonly number[], unbatched: boolean): S {
  const r = y.reshape([y.shape[0]!, y.shape[1]!, ...outs]);
  return unbatched ? r.squeeze(0) : r;
}

/**
 * torch's pooling_output_shape: floor or ceil of (I + 2p - d(k-1) - 1)/s, plus 1; with ceil_mode
 * the last window must start inside the input or its left padding.
 */
function poolOut(I: number, k: number, s: number, p: number, d: number, ceil: boolean): number {
  let o = Math.floor((I + 2 * p - d * (k - 1) - 1 + (ceil ? s - 1 : 0)) / s) + 1;
  if (ceil && (o - 1) * s >= I + p) o--;
  return o;
}

interface Pool {
  k: number[];
  s: number[];
  p: number[];
  d: number[];
  outs: number[];
  axes: AxisMap[];
}

/** Kernel, stride (default kernel), padding, dilation and output sizes of a pooling op, checked as torch's pool2d_shape_check. */
function poolParams(op: string, x: TensorOps<any>, n: number, kernel_size: IntOrTuple, stride: IntOrTuple | null | undefined, padding: IntOrTuple, dilation: IntOrTuple, ceil: boolean): Pool {
  const k = ntuple(op, "kernel_size", kernel_size, n);
  const s = stride === null || stride === undefined || (Array.isArray(stride) && stride.length === 0) ? k : ntuple(op, "stride", stride, n);
  const p = ntuple(op, "padding", padding, n), d = ntuple(op, "dilation", dilation, n);
  if (k.some((v) => v <= 0)) throw new LoomValueError(`[${op}] kernel_size should be greater than zero, but got ${fmtShape(k)}`);
  if (s.some((v) => v <= 0)) throw new LoomValueError(`[${op}] stride should be greater than zero, but got ${fmtShape(s)}`);
  if (d.some((v) => v <= 0)) throw new LoomValueError(`[${op}] dilation should be greater than zero, but got ${fmtShape(d)}`);
  if (p.some((v, i) => v < 0 || v > Math.floor(k[i]! / 2))) {
    throw new LoomValueError(`[${op}] pad should be at most half of kernel size, but got pad=${fmtShape(p)} and kernel_size=${fmtShape(k)}`);
  }
  const is = x.shape.slice(2);
  const outs = is.map((I, i) => poolOut(I, k[i]!, s[i]!, p[i]!, d[i]!, ceil));
  if (outs.some((o) => o < 1)) {
    throw new LoomShapeError(`[${op}] Given input size: (${x.shape.slice(1).join("x")}). Calculated output size: (${[x.shape[1], ...outs].join("x")}). Output size is too small (kernel_size=${fmtShape(k)}, stride=${fmtShape(s)}, padding=${fmtShape(p)}, dilation=${fmtShape(d)})`);
  }
  const axes = is.map((I, i) => slidingAxis(I, k[i]!, s[i]!, p[i]!, d[i]!, outs[i]!));
  return { k, s, p, d, outs, axes };
}

/**
 * Max over each window with the flat input index of the maximum (torch's return_indices: an index
 * into the input's flattened spatial dims; a window whose values are all -inf names its first
 * element inside the input, as torch's kernel initializes maxindex).
 */
function maxWindows<S extends TensorOps<S>>(x: S, axes: AxisMap[], outs: number[], unbatched: boolean, withIndices: boolean): S | [S, S] {
  const cols = windows(x, axes, -Infinity); // [N, C, K, L]
  const { values, indices } = cols.max(2);
  const out = unflat(values, outs, unbatched);
  if (!withIndices) return out;
  const w = windowIndex(axes);
  const firstValid = new Array<number>(w.L).fill(-1);
  const idx = w.index.data;
  for (let j = 0; j < w.K * w.L; j++) if (idx[j] !== w.P && firstValid[j % w.L] === -1) firstValid[j % w.L] = idx[j] as number;
  const map = Array.from({ length: w.K * w.L }, (_, j) => (idx[j] === w.P ? firstValid[j % w.L]! : (idx[j] as number)));
  const [N, C] = x.shape as [number, number];
  const table = x._constant(fromValues("int64", [1, 1, w.K, w.L], map)).expand([N, C, w.K, w.L]);
  return [out, unflat(table.gather(2, indices.unsqueeze(2)).squeeze(2), outs, unbatched)];
}

export interface MaxPoolOptions {
  /** Window step (default kernel_size). */
  stride?: IntOrTuple | null;
  /** -inf padding on both sides, at most half the kernel (default 0). */
  padding?: IntOrTuple;
  /** Spacing between window elements (default 1). */
  dilation?: IntOrTuple;
  /** Round the output size up: a last partial window that starts inside the input counts. */
  ceil_mode?: boolean;
  /** Also return the flat spatial index of each maximum (int64). */
  return_indices?: boolean;
}

function maxPoolNd<S extends TensorOps<S>>(op: string, n: number, input: S, kernel_size: IntOrTuple, opts: MaxPoolOptions): S | [S, S] {
  const { x, unbatched } = batched(op, input, n);
  const pp = poolParams(op, x, n, kernel_size, opts.stride, opts.padding ?? 0, opts.dilation ?? 1, opts.ceil_mode ?? false);
  return maxWindows(x, pp.axes, pp.outs, unbatched, opts.return_indices ?? false);
}

/**
 * 1-D max pooling over [N, C, L] (or unbatched [C, L]).
 * @returns [N, C, L_out]; with return_indices [values, int64 indices into L]
 * @throws LoomShapeError for another rank or an output size below 1; LoomValueError for a bad
 *   kernel/stride/dilation or padding above half the kernel; LoomDtypeError for integer input
 * Source: torch.nn.functional.max_pool1d
 */
export function max_pool1d<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts: MaxPoolOptions & { return_indices: true }): [S, S];
export function max_pool1d<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts?: MaxPoolOptions & { return_indices?: false }): S;
export function max_pool1d<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts: MaxPoolOptions = {}): S | [S, S] {
  return maxPoolNd("max_pool1d", 1, input, kernel_size, opts);
}

/**
 * 2-D max pooling over [N, C, H, W] (or unbatched [C, H, W]).
 * @returns [N, C, H_out, W_out]; with return_indices [values, int64 indices into H·W]
 * @throws as max_pool1d
 * Source: torch.nn.functional.max_pool2d
 */
export function max_pool2d<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts: MaxPoolOptions & { return_indices: true }): [S, S];
export function max_pool2d<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts?: MaxPoolOptions & { return_indices?: false }): S;
export function max_pool2d<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts: MaxPoolOptions = {}): S | [S, S] {
  return maxPoolNd("max_pool2d", 2, input, kernel_size, opts);
}

export interface AvgPoolOptions {
  /** Window step (default kernel_size). */
  stride?: IntOrTuple | null;
  /** Zero padding on both sides, at most half the kernel (default 0). */
  padding?: IntOrTuple;
  /** Round the output size up (see MaxPoolOptions.ceil_mode). */
  ceil_mode?: boolean;
  /** Count the padding zeros in the divisor (default true); never the part past the padding. */
  count_include_pad?: boolean;
  /** (2-D) Divide every window's sum by this instead. */
  divisor_override?: number | null;
}

/** Per output position (row-major over `outs`), the product over dims i of per[i][o_i]: an average's divisor. */
function windowProducts(per: readonly (readonly number[])[], outs: readonly number[]): number[] {
  const L = outs.reduce((a, b) => a * b, 1);
  return Array.from({ length: L }, (_, l) => {
    let r = l, prod = 1;
    for (let i = outs.length - 1; i >= 0; i--) {
      prod *= per[i]![r % outs[i]!]!;
      r = Math.floor(r / outs[i]!);
    }
    return prod;
  });
}

/** Window sums [N, C, L] divided by `div` (one per window; a scalar when all are equal). */
function divideWindows<S extends TensorOps<S>>(x: S, sum: S, div: readonly number[]): S {
  return div.every((v) => v === div[0]) ? sum.div(div[0]!) : sum.div(x._constant(fromValues(x.dtype, [div.length], div)));
}

function avgPoolNd<S extends TensorOps<S>>(op: string, n: number, input: S, kernel_size: IntOrTuple, opts: AvgPoolOptions): S {
  const { x, unbatched } = batched(op, input, n);
  const ceil = opts.ceil_mode ?? false, includePad = opts.count_include_pad ?? true;
  const pp = poolParams(op, x, n, kernel_size, opts.stride, opts.padding ?? 0, 1, ceil);
  const override = opts.divisor_override ?? null;
  if (override !== null && (!Number.isInteger(override) || override === 0)) throw new LoomValueError(`[${op}] divisor must be a non-zero integer, got ${override}`);
  // torch's divide_factor per output position: the window clipped to the padded input (count_include_pad)
  // or to the input itself; a product over the spatial dims
  const perDim = x.shape.slice(2).map((I, i) => Array.from({ length: pp.outs[i]! }, (_, o) => {
    const start = o * pp.s[i]! - pp.p[i]!;
    const end = Math.min(start + pp.k[i]!, I + pp.p[i]!);
    return includePad ? end - start : Math.min(end, I) - Math.max(start, 0);
  }));
  const div = override === null ? windowProducts(perDim, pp.outs) : [override];
  return unflat(divideWindows(x, windows(x, pp.axes, 0).sum(2), div), pp.outs, unbatched);
}

/**
 * 1-D average pooling over [N, C, L] (or unbatched [C, L]).
 * @returns [N, C, L_out]
 * @throws as max_pool1d
 * Source: torch.nn.functional.avg_pool1d
 */
export function avg_pool1d<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts: Omit<AvgPoolOptions, "divisor_override"> = {}): S {
  return avgPoolNd("avg_pool1d", 1, input, kernel_size, opts);
}

/**
 * 2-D average pooling over [N, C, H, W] (or unbatched [C, H, W]).
 * @returns [N, C, H_out, W_out]
 * @throws as max_pool1d; LoomValueError for a zero or non-integer divisor_override
 * Source: torch.nn.functional.avg_pool2d
 */
export function avg_pool2d<S extends TensorOps<S>>(input: S, kernel_size: IntOrTuple, opts: AvgPoolOptions = {}): S {
  return avgPoolNd("avg_pool2d", 2, input, kernel_size, opts);
}

/** Output sizes of adaptive pooling: an int or a tuple whose nulls keep the input size. */
function adaptiveOut(op: string, x: TensorOps<any>, n: number, output_size: number | readonly (number | null)[]): number[] {
  const is = x.shape.slice(2);
  const raw = typeof output_size === "number" ? new Array<number>(n).fill(output_size) : output_size.map((o, i) => o ?? is[i]!);
  if (raw.length !== n || raw.some((o) => !Number.isInteger(o) || o <= 0)) {
    throw new LoomValueError(`[${op}] output_size must be ${n} positive integer(s) (null keeps the input size), got ${JSON.stringify(output_size)}`);
  }
  return raw;
}

/**
 * 1-D adaptive average pooling: output o averages input [floor(o·L/out), ceil((o+1)·L/out)).
 * @param input - [N, C, L] or unbatched [C, L]
 * @returns [N, C, output_size]
 * @throws LoomShapeError for another rank or an empty dim; LoomValueError for a bad output_size
 * Source: torch.nn.functional.adaptive_avg_pool1d
 */
export function adaptive_avg_pool1d<S extends TensorOps<S>>(input: S, output_size: number | readonly [number | null]): S {
  return adaptiveAvg("adaptive_avg_pool1d", 1, input, output_size);
}

/**
 * 2-D adaptive average pooling (the windows of adaptive_avg_pool1d along H and W).
 * @param input - [N, C, H, W] or unbatched [C, H, W]
 * @param output_size - an int, or [H_out, W_out] with null keeping the input's size
 * @returns [N, C, H_out, W_out]
 * @throws as adaptive_avg_pool1d
 * Source: torch.nn.functional.adaptive_avg_pool2d
 */
export function adaptive_avg_pool2d<S extends TensorOps<S>>(input: S, output_size: number | readonly [number | null, number | null]): S {
  return adaptiveAvg("adaptive_avg_pool2d", 2, input, output_size);
}

function adaptiveAvg<S extends TensorOps<S>>(op: string, n: number, input: S, output_size: number | readonly (number | null)[]): S {
  const { x, unbatched } = batched(op, input, n);
  const outs = adaptiveOut(op, x, n, output_size);
  const axes = x.shape.slice(2).map((I, i) => adaptiveAxis(I, outs[i]!));
  // window lengths: the count of valid coordinates per output along each axis
  const len = axes.map((a) => Array.from({ length: a.out }, (_, o) => {
    let c = 0;
    for (let j = 0; j < a.k; j++) if (a.coord[j * a.out + o]! >= 0) c++;
    return c;
  }));
  return unflat(divideWindows(x, windows(x, axes, 0).sum(2), windowProducts(len, outs)), outs, unbatched);
}

function adaptiveMax<S extends TensorOps<S>>(op: string, n: number, input: S, output_size: number | readonly (number | null)[], withIndices: boolean): S | [S, S] {
  const { x, unbatched } = batched(op, input, n);
  const outs = adaptiveOut(op, x, n, output_size);
  const axes = x.shape.slice(2).map((I, i) => adaptiveAxis(I, outs[i]!));
  return maxWindows(x, axes, outs, unbatched, withIndices);
}

/**
 * 1-D adaptive max pooling (adaptive_avg_pool1d's windows, max instead of mean).
 * @returns [N, C, output_size]; with return_indices [values, int64 indices into L]
 * Source: torch.nn.functional.adaptive_max_pool1d
 */
export function adaptive_max_pool1d<S extends TensorOps<S>>(input: S, output_size: number | readonly [number | null], return_indices: true): [S, S];
export function adaptive_max_pool1d<S extends TensorOps<S>>(input: S, output_size: number | readonly [number | null], return_indices?: false): S;
export function adaptive_max_pool1d<S extends TensorOps<S>>(input: S, output_size: number | readonly [number | null], return_indices = false): S | [S, S] {
  return adaptiveMax("adaptive_max_pool1d", 1, input, output_size, return_indices);
}

/**
 * 2-D adaptive max pooling.
 * @returns [N, C, H_out, W_out]; with return_indices [values, int64 indices into H·W]
 * Source: torch.nn.functional.adaptive_max_pool2d
 */
export function adaptive_max_pool2d<S extends TensorOps<S>>(input: S, output_size: number | readonly [number | null, number | null], return_indices: true): [S, S];
export function adaptive_max_pool2d<S extends TensorOps<S>>(input: S, output_size: number | readonly [number | null, number | null], return_indices?: false): S;
export function adaptive_max_pool2d<S extends TensorOps<S>>(input: S, output_size: number | readonly [number | null, number | null], return_indices = false): S | [S, S] {
  return adaptiveMax("adaptive_max_pool2d", 2, input, output_size, return_indices);
}
