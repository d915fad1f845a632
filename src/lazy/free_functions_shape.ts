/**
 * Top-level functions with PyTorch's signatures for the shape, indexing and matrix methods
 * (`loom.split(x, 2, 1)`, `loom.transpose(x, 0, 1)`, `loom.gather(x, 1, idx)`), generic over
 * Tensor and LazyTensor; each calls the method. Options objects bind as in py_args.ts.
 */
import { bindArgs, type PyArgs } from "./py_args.ts";
import type { IndexList, IndexTensor } from "./indexing.ts";
import type { DimArg, Scalar, TensorOps } from "./surface.ts";

/** The number of elements (torch.numel). */
export function numel<S extends TensorOps<S>>(input: S): number { return input.numel(); }
/** Whether the dtype is floating point (torch.is_floating_point). */
export function is_floating_point<S extends TensorOps<S>>(input: S): boolean { return input.is_floating_point(); }

/** Same data, new shape; one dim may be -1 (torch.reshape(input, shape)). */
export function reshape<S extends TensorOps<S>>(input: S, shape: readonly number[]): S { return input.reshape(shape); }
/** Flatten dims start_dim..end_dim into one (torch.flatten(input, start_dim=0, end_dim=-1)). */
export function flatten<S extends TensorOps<S>>(input: S, ...args: PyArgs<[start_dim: number, end_dim: number], { start_dim?: number; end_dim?: number }>): S {
  const a = bindArgs("flatten", ["start_dim", "end_dim"], args);
  return input.flatten((a.start_dim as number) ?? 0, (a.end_dim as number) ?? -1);
}
/** Split `dim` into `sizes` (torch.unflatten(input, dim, sizes)). */
export function unflatten<S extends TensorOps<S>>(input: S, dim: number, sizes: readonly number[]): S { return input.unflatten(dim, sizes); }
/** Remove size-1 dims: all, or those of `dim` (torch.squeeze(input, dim=None)). */
export function squeeze<S extends TensorOps<S>>(input: S, ...args: PyArgs<[dim: DimArg], { dim?: DimArg }>): S {
  const a = bindArgs("squeeze", ["dim"], args);
  return input.squeeze(a.dim as DimArg);
}
/** Insert a size-1 dim at `dim` (torch.unsqueeze). */
export function unsqueeze<S extends TensorOps<S>>(input: S, dim: number): S { return input.unsqueeze(dim); }
/** Reorder dims (torch.permute(input, dims)). */
export function permute<S extends TensorOps<S>>(input: S, dims: readonly number[]): S { return input.permute(dims); }
/** Swap two dims (torch.transpose). */
export function transpose<S extends TensorOps<S>>(input: S, dim0: number, dim1: number): S { return input.transpose(dim0, dim1); }
export function swapaxes<S extends TensorOps<S>>(input: S, axis0: number, axis1: number): S { return input.swapaxes(axis0, axis1); }
/** Transpose of a <= 2-D tensor (torch.t). */
export function t<S extends TensorOps<S>>(input: S): S { return input.t(); }
/** `length` elements of `dim` from `start`: a view (torch.narrow). */
export function narrow<S extends TensorOps<S>>(input: S, dim: number, start: number, length: number): S { return input.narrow(dim, start, length); }
/** A differentiable copy with its own storage (torch.clone). */
export function clone<S extends TensorOps<S>>(input: S): S { return input.clone(); }

/** Pieces of `split_size_or_sections` along `dim` (torch.split(tensor, split_size_or_sections, dim=0)): views. */
export function split<S extends TensorOps<S>>(tensor: S, split_size_or_sections: number | readonly number[], ...args: PyArgs<[dim: number], { dim?: number }>): S[] {
  const a = bindArgs("split", ["dim"], args);
  return tensor.split(split_size_or_sections, (a.dim as number) ?? 0);
}
/** `chunks` pieces along `dim` (torch.chunk(input, chunks, dim=0)). */
export function chunk<S extends TensorOps<S>>(input: S, chunks: number, ...args: PyArgs<[dim: number], { dim?: number }>): S[] {
  const a = bindArgs("chunk", ["dim"], args);
  return input.chunk(chunks, (a.dim as number) ?? 0);
}

/** out[i][j] = input[index[i][j]][j] for dim 0 (torch.gather(input, dim, index)). */
export function gather<S extends TensorOps<S>>(input: S, dim: number, index: S): S { return input.gather(dim, index); }
/** A copy of input with src added at index along dim (torch.scatter_add). */
export function scatter_add<S extends TensorOps<S>>(input: S, dim: number, index: S, src: S): S { return input.scatter_add(dim, index, src); }
/** Slices along `dim` picked by a 1-D index (torch.index_select). */
export function index_select<S extends TensorOps<S>>(input: S, dim: number, index: S): S { return input.index_select(dim, index); }
/** A copy of input with alpha·source added at index along dim (torch.index_add(..., *, alpha=1)). */
export function index_add<S extends TensorOps<S>>(input: S, dim: number, index: S, source: S, opts?: { alpha?: number }): S {
  return input.index_add(dim, index, source, opts);
}
type Indices = readonly (IndexList | IndexTensor | null)[];
/** A copy of input with input[indices] = values, or += with accumulate (torch.index_put(input, indices, values, accumulate=False)). */
export function index_put<S extends TensorOps<S>>(input: S, indices: Indices, values: S | Scalar, ...args: PyArgs<[accumulate: boolean], { accumulate?: boolean }>): S {
  const a = bindArgs("index_put", ["accumulate"], args);
  return input.index_put(indices, values, (a.accumulate as boolean) ?? false);
}
/** In-place index_put (torch.index_put_); returns input. */
export function index_put_<S extends TensorOps<S>>(input: S, indices: Indices, values: S | Scalar, ...args: PyArgs<[accumulate: boolean], { accumulate?: boolean }>): S {
  const a = bindArgs("index_put_", ["accumulate"], args);
  return input.index_put_(indices, values, (a.accumulate as boolean) ?? false);
}

/** 2-D matrix product (torch.mm(input, mat2)). */
export function mm<S extends TensorOps<S>>(input: S, mat2: S): S { return input.mm(mat2); }
/** Batched 3-D matrix product (torch.bmm(input, mat2)). */
export function bmm<S extends TensorOps<S>>(input: S, mat2: S): S { return input.bmm(mat2); }

