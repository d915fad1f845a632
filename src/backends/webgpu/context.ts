/**
 * What kernel launchers share: the queue, operand views (GPU buffers with strides, CPU data
 * uploaded on use), output allocation, and dimension collapsing.
 */
import type { OPS } from "../../graph/registry.ts";
import type { DType } from "../../tensor/dtype.ts";
import type { TensorData } from "../../tensor/storage.ts";
import type { Wgsl } from "./dtype.ts";
import type { PBuf } from "./memory.ts";
import type { CommandQueue } from "./queue.ts";
import type { GpuData } from "./storage.ts";

/** Registry op names of one kind, so kernel tables are checked against the registry by tsc. */
export type OpsOfKind<K extends string> = { [N in keyof typeof OPS]: (typeof OPS)[N] extends { kind: K } ? N : never }[keyof typeof OPS];

/** An operand as a kernel sees it: a buffer, its WGSL element type and the element view. */
export interface View {
  readonly buf: PBuf;
  readonly t: Wgsl;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
  readonly offset: number;
}

export interface Ctx {
  readonly q: CommandQueue;
  /** The operand on the GPU (CPU data is uploaded into a temporary). */
  gpuView(t: TensorData, op: string): View;
  /** An operand for fused kernels: 1-element host data as an immediate, else a buffer view. */
  operand(t: TensorData, op: string): import("./elementwise.ts").Operand;
  /** Give back an operand's temporary upload, if it made one (call after its last dispatch). */
  release(v: View): void;
  /** A new contiguous GPU tensor. */
  alloc(dtype: DType, shape: readonly number[], op: string): GpuData;
  /** A temporary contiguous buffer (release with q.pool.release after its last use). */
  temp(dtype: DType, shape: readonly number[], op: string): View;
}

export const numelOf = (s: readonly number[]): number => s.reduce((p, x) => p * x, 1);
export const contiguous = (s: readonly number[]): number[] => {
  const st = new Array<number>(s.length);
  let acc = 1;
  for (let i = s.length - 1; i >= 0; i--) { st[i] = acc; acc *= s[i]!; }
  return st;
};

/**
 * Drop size-1 dims and merge neighbours that are contiguous in every stride list, so kernels do
 * less index arithmetic and fewer pipeline variants exist (dense tensors become 1-D).
 */
export function collapse(shape: readonly number[], strides: readonly (readonly number[])[]): { shape: number[]; strides: number[][] } {
  const keep = shape.map((s, i) => i).filter((i) => shape[i] !== 1);
  const outShape: number[] = [];
  const outStrides: number[][] = strides.map(() => []);
  for (const d of keep) {
    const n = outShape.length;
    if (n > 0 && strides.every((st, k) => outStrides[k]![n - 1] === st[d]! * shape[d]!)) {
      outShape[n - 1]! *= shape[d]!;
      strides.forEach((st, k) => { outStrides[k]![n - 1] = st[d]!; });
    } else {
      outShape.push(shape[d]!);
      strides.forEach((st, k) => outStrides[k]!.push(st[d]!));
    }
  }
  return { shape: outShape, strides: outStrides };
}

/**
 * Pad a collapsed rank to 0, 1, 4, 8 or 12 dims (leading size-1 dims with stride 0), so that
 * kernels are compiled for few ranks: each WGSL variant costs a compile (~0.1-0.3 s on lavapipe).
 */
export function padRank(shape: number[], strides: number[][]): number {
  const nd = shape.length;
  const want = nd <= 1 ? nd : nd <= 4 ? 4 : nd <= 8 ? 8 : 12;
  while (shape.length < want) {
    shape.unshift(1);
    for (const s of strides) s.unshift(0);
  }
  return want;
}

/** Workgroups of `size` threads covering n items. */
export const groupsFor = (n: number, size = 256): number => Math.ceil(n / size);

/** WGSL for the linear invocation index across a 2-D grid of workgroups of `size` threads. */
export const linearIndex = (size = 256) => `gid.x + gid.y * nw.x * ${size}u`;
