/**
 * torch.autograd's functional API: grad() and backward() over several tensors.
 */
import { runBackward } from "../autograd/engine.ts";
import { LoomAutogradError } from "../tensor/errors.ts";
import type { TensorOps } from "./surface.ts";

export interface GradOptions<S> {
  grad_outputs?: readonly (S | null)[] | null;
  retain_graph?: boolean;
  create_graph?: boolean;
  /** Return null for inputs the outputs do not depend on instead of throwing. */
  allow_unused?: boolean;
}

/**
 * Gradients of `outputs` with respect to `inputs`, without touching `.grad`
 * (torch.autograd.grad). With `create_graph` the results are differentiable again.
 * @throws LoomAutogradError for a non-scalar output without grad_outputs, or an unused input
 */
export function grad<S extends TensorOps<S>>(outputs: S | readonly S[], inputs: S | readonly S[], opts: GradOptions<S> = {}): (S | null)[] {
  const outs = Array.isArray(outputs) ? (outputs as S[]) : [outputs as S];
  const ins = Array.isArray(inputs) ? (inputs as S[]) : [inputs as S];
  const gouts = outs.map((o, i) => {
    const g = opts.grad_outputs?.[i];
    if (g) return g;
    if (o.numel() !== 1) throw new LoomAutogradError("grad can be implicitly created only for scalar outputs");
    return o.ones_like().contiguous();
  });
  for (const x of ins) {
    if (!x.requires_grad) throw new LoomAutogradError("One of the differentiated Tensors does not require grad");
  }
  const found = runBackward(outs, gouts, { ...opts, accumulate: false, wanted: ins });
  return ins.map((x, i) => {
    const g = found.get(x);
    if (!g && !opts.allow_unused) {
      throw new LoomAutogradError(`One of the differentiated Tensors (input ${i}) appears to not have been used in the graph. Set allow_unused: true if this is the desired behavior.`);
    }
    return g ?? null;
  });
}

/** Backward from several tensors at once (torch.autograd.backward). */
export function backward<S extends TensorOps<S>>(tensors: readonly S[], grad_tensors?: readonly (S | null)[], opts: { retain_graph?: boolean; create_graph?: boolean } = {}): void {
  const gs = tensors.map((t, i) => {
    const g = grad_tensors?.[i];
    if (g) return g;
    if (t.numel() !== 1) throw new LoomAutogradError("grad can be implicitly created only for scalar outputs");
    return t.ones_like().contiguous();
  });
  runBackward(tensors, gs, { ...opts, accumulate: true });
}
