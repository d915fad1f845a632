/**
 * Declaring an input's dimension dynamic (torch._dynamo.mark_dynamic, torch.export.Dim): lazy
 * graphs that read the input then share one plan across the sizes that dimension takes, up to
 * its maximum (scheduler/symbolic.ts). Eager execution is unaffected.
 */
import { Dim, dynamicDims, markDynamic } from "../scheduler/symbolic.ts";
import { LoomValueError } from "../tensor/errors.ts";
import type { LazyTensor } from "./lazy_tensor.ts";
import { Tensor } from "./tensor.ts";

export { Dim };

/**
 * The symbols marked on `t`'s dims (dim -> Dim; empty when none). For code that feeds a model new
 * tensors made from a marked one (generate's prefill from the prompt), with `carry_dynamic`.
 */
export function dynamic_dims(t: Tensor): ReadonlyMap<number, Dim> {
  return dynamicDims(t._d);
}

/**
 * Mark `dst`'s dims with the symbols marked on `src`'s (same dim numbers), each where `dst`'s size
 * is inside the symbol's range; a size outside it stays a fixed size (no error: the plan for
 * that size is compiled on its own). Returns `dst`.
 */
export function carry_dynamic(src: Tensor, dst: Tensor): Tensor {
  for (const [dim, sym] of dynamic_dims(src)) {
    const n = dst.shape[dim];
    if (n !== undefined && n >= sym.min && n <= sym.max) markDynamic(dst._d, dim, sym);
  }
  return dst;
}

/**
 * Mark dimension `dim` of input `t` dynamic: a symbol with a range (`Dim`), or a range for an
 * anonymous symbol named `s<dim>` (inputs marked with the same name and range share plans).
 * Mark each new input (each batch), as with torch._dynamo.mark_dynamic.
 * @param t - an eager tensor, or a lazy tensor over an existing buffer (`x.lazy()`)
 * @param dim - the dimension (negative counts from the end)
 * @param range - `Dim`, or `{ min?, max, name? }` (min defaults to 2; memory is planned for max)
 * @returns `t`
 * @throws LoomValueError for a lazy tensor that is not an input (a computed value); LoomIndexError
 *   for a dim outside the rank; LoomConstraintViolationError when the size is outside the range
 * @example
 *   const seq = new Dim("seq", { max: 128 });
 *   mark_dynamic(input_ids, 1, seq); // [B, T]: every T in [4, 128] shares the step's plan (2, 3: their own)
 */
export function mark_dynamic<T extends Tensor | LazyTensor>(t: T, dim: number, range: Dim | { min?: number; max: number; name?: string }): T {
  const sym = range instanceof Dim ? range : new Dim(range.name ?? `s${dim < 0 ? dim + t.shape.length : dim}`, range);
  let d;
  if (t instanceof Tensor) d = t._d;
  else {
    const lt = t as LazyTensor;
    d = lt.node.realized ?? lt._origin?._d;
    if (!d) throw new LoomValueError(`[mark_dynamic] expected an input tensor (eager, or lazy over an existing buffer), got a computed lazy value of shape [${t.shape.join(", ")}]`);
  }
  markDynamic(d, dim, sym);
  return t;
}
