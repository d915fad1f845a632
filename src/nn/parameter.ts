/**
 * Parameter: a Tensor that a Module registers as a learnable weight (torch.nn.Parameter).
 * It shares the given tensor's buffer (no copy) and requires grad by default. Ops on a
 * Parameter return plain Tensors, as in PyTorch.
 */
import { Tensor } from "../lazy/tensor.ts";
import { LoomValueError } from "../tensor/errors.ts";

export class Parameter extends Tensor {
  /**
   * @param data - the tensor whose buffer the parameter views (any shape; floating dtype when
   *   `requires_grad`). A LazyTensor is realized first.
   * @param requires_grad - default true (torch.nn.Parameter(data, requires_grad=True))
   * @throws LoomAutogradError if requires_grad is set on a non-floating dtype
   */
  constructor(data: Tensor | { eval(): Tensor }, requires_grad = true) {
    const t = data instanceof Tensor ? data : data.eval();
    if (!(t instanceof Tensor)) throw new LoomValueError("[Parameter] data must be a Tensor");
    super(t._d, t.device);
    this._vc = t._version_counter(); // same storage, same version counter (torch)
    if (requires_grad) this.requires_grad = true;
  }

  /** "Parameter containing:\n" + the tensor's repr, as torch prints parameters. */
  override toString(): string {
    return `Parameter containing:\n${super.toString()}`;
  }
}

/** True for Parameter instances (torch: isinstance(x, nn.Parameter)). */
export function is_parameter(x: unknown): x is Parameter {
  return x instanceof Parameter;
}
