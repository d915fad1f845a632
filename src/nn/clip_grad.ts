/**
 * Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_), applied to the `.grad`
 * of eager parameters under no_grad.
 */
import { no_grad } from "../autograd/grad_mode.ts";
import { tensor } from "../lazy/creation.ts";
import { stack } from "../lazy/functional.ts";
import { LazyTensor } from "../lazy/lazy_tensor.ts";
import type { Tensor } from "../lazy/tensor.ts";
import { LoomValueError } from "../tensor/errors.ts";

type Params = Tensor | Iterable<Tensor>;

function listParams(parameters: Params): Tensor[] {
  return Symbol.iterator in (parameters as object) ? [...(parameters as Iterable<Tensor>)] : [parameters as Tensor];
}

function gradOf(p: Tensor): Tensor | null {
  const g = p.grad as Tensor | LazyTensor | null;
  if (!g) return null;
  return g instanceof LazyTensor ? g.eval() : g;
}

/** The p-norm of all elements of g, 0-d: (Σ|g|^p)^(1/p); max |g| for p = Infinity. */
function norm(g: Tensor, p: number): Tensor {
  if (p === Infinity) return g.abs().amax();
  if (p === 2) return g.mul(g).sum().sqrt();
  if (p === 1) return g.abs().sum();
  return g.abs().pow(p).sum().pow(1 / p);
}

/**
 * Scale all gradients together so their joint `norm_type`-norm is at most `max_norm`:
 * total = ‖(‖g₁‖, …, ‖gₙ‖)‖, clip_coef = max_norm / (total + 1e-6), and every grad is multiplied
 * by min(clip_coef, 1). Parameters without a gradient are skipped.
 * Each `.grad` is replaced by the scaled tensor (a new tensor: gradients can share buffers).
 * @param parameters - a tensor or an iterable of tensors (e.g. model.parameters())
 * @param max_norm - the largest allowed total norm (same units as the gradients)
 * @param norm_type - p of the p-norm; Infinity for the max norm
 * @returns the total norm before clipping, a 0-d float32 tensor (0 when there are no grads)
 * @throws LoomValueError with error_if_nonfinite when the total norm is nan or inf
 * Source: torch.nn.utils.clip_grad_norm_ (PyTorch 1.13); Pascanu et al. 2013.
 */
export function clip_grad_norm_(parameters: Params, max_norm: number, norm_type = 2, opts: { error_if_nonfinite?: boolean } = {}): Tensor {
  const params = listParams(parameters).filter((p) => p.grad);
  if (params.length === 0) return tensor(0);
  return no_grad(() => {
    const grads = params.map((p) => gradOf(p)!);
    const dt = grads.every((g) => g.dtype === grads[0]!.dtype) ? grads[0]!.dtype : "float32";
    const norms = grads.map((g) => norm(g, norm_type).to(dt));
    const total = norms.length === 1 ? norms[0]! : norm(stack(norms), norm_type);
    if (opts.error_if_nonfinite) {
      const v = total.item();
      if (!Number.isFinite(v)) {
        throw new LoomValueError(`[clip_grad_norm_] The total norm of order ${norm_type} for gradients from \`parameters\` is non-finite, so it cannot be clipped. To disable this error and scale the gradients by the non-finite norm anyway, set error_if_nonfinite: false`);
      }
    }
    const coef = total.full_like(max_norm).div(total.add(1e-6)).clamp(null, 1);
    params.forEach((p, i) => { p.grad = grads[i]!.mul(coef.to(grads[i]!.dtype)); });
    return total;
  });
}

/**
 * Clamp every gradient element into [-clip_value, clip_value] (torch.nn.utils.clip_grad_value_).
 * Each `.grad` is replaced by the clamped tensor.
 */
export function clip_grad_value_(parameters: Params, clip_value: number): void {
  no_grad(() => {
    for (const p of listParams(parameters)) {
      const g = gradOf(p);
      if (g) p.grad = g.clamp(-clip_value, clip_value);
    }
  });
}
