/**
 * gradcheck: compare autograd gradients with central finite differences in float64
 * (torch.autograd.gradcheck, using a random projection of the outputs: the vector-Jacobian
 * product vᵀJ must equal the finite differences of vᵀf(x) for every input element).
 */
import { LoomValueError } from "../tensor/errors.ts";
import { Generator } from "../tensor/rng.ts";
import { fromValues } from "../tensor/storage.ts";
import { grad } from "./autograd_api.ts";
import type { TensorOps } from "./surface.ts";

export interface GradcheckOptions {
  /** Finite-difference step (absolute). */
  eps?: number;
  atol?: number;
  rtol?: number;
  /** Also check second derivatives (torch.autograd.gradgradcheck). */
  check_grad_grad?: boolean;
  seed?: number;
}

export interface GradcheckFailure {
  input: number;
  element: number;
  analytic: number;
  numeric: number;
  order: 1 | 2;
}

/** Scalar vᵀ f(x) for a fixed random v per output. */
function project<S extends TensorOps<S>>(outs: S[], vs: S[]): S {
  let acc: S | null = null;
  outs.forEach((o, i) => {
    const s = o.mul(vs[i]!).sum();
    acc = acc ? acc.add(s) : s;
  });
  return acc!;
}

function fdCheck<S extends TensorOps<S>>(
  f: (...xs: S[]) => S,
  inputs: S[],
  analytic: Float64Array[],
  o: Required<Omit<GradcheckOptions, "check_grad_grad" | "seed">>,
  order: 1 | 2,
): GradcheckFailure[] {
  const failures: GradcheckFailure[] = [];
  inputs.forEach((x, i) => {
    const base = x.dataSync();
    for (let e = 0; e < base.length; e++) {
      const at = (delta: number) => {
        const v = Float64Array.from(base);
        v[e]! += delta;
        const xs = inputs.map((y, j) => (j === i ? y._constant(fromValues("float64", y.shape, v)) : y.detach()));
        return f(...xs).item();
      };
      const numeric = (at(o.eps) - at(-o.eps)) / (2 * o.eps);
      const a = analytic[i]![e]!;
      if (!(Math.abs(a - numeric) <= o.atol + o.rtol * Math.abs(numeric))) failures.push({ input: i, element: e, analytic: a, numeric, order });
    }
  });
  return failures;
}

/**
 * Check d f / d inputs against finite differences. `fn` maps float64 tensors that require grad
 * to one tensor or a list. Returns the failures (empty when the check passes).
 * @throws LoomValueError unless every input is float64
 */
export function gradcheck<S extends TensorOps<S>>(fn: (...xs: S[]) => S | S[], inputs: S[], opts: GradcheckOptions = {}): GradcheckFailure[] {
  const o = { eps: opts.eps ?? 1e-6, atol: opts.atol ?? 1e-5, rtol: opts.rtol ?? 1e-3 };
  for (const x of inputs) {
    if (x.dtype !== "float64") throw new LoomValueError(`[gradcheck] inputs must be float64 for precise finite differences, got ${x.dtype}`);
  }
  const g = new Generator(opts.seed ?? 0);
  const outs0 = [fn(...inputs)].flat() as S[];
  const vs = outs0.map((y) => y._constant(fromValues("float64", y.shape, Array.from({ length: y.numel() }, () => g.normal()))));
  const scalar = (...xs: S[]) => project([fn(...xs)].flat() as S[], vs);
  const leaves = () => inputs.map((x) => x.detach().requires_grad_(true));

  const xs1 = leaves();
  const g1 = grad(scalar(...xs1), xs1, { allow_unused: true });
  const analytic1 = g1.map((gi, i) => gi?.dataSync() ?? new Float64Array(inputs[i]!.numel()));
  const failures = fdCheck(scalar, inputs, analytic1, o, 1);
  if (!opts.check_grad_grad) return failures;

  // second order: h(x) = wᵀ ∇(vᵀ f)(x); its gradient must match finite differences of h
  const ws = inputs.map((x) => x._constant(fromValues("float64", x.shape, Array.from({ length: x.numel() }, () => g.normal()))));
  const h = (...xs: S[]) => {
    const ls = xs.map((x) => (x.requires_grad ? x : x.detach().requires_grad_(true)));
    const gs = grad(scalar(...ls), ls, { create_graph: true, allow_unused: true });
    let acc: S | null = null;
    gs.forEach((gi, i) => {
      if (!gi) return;
      const s = gi.mul(ws[i]!).sum();
      acc = acc ? acc.add(s) : s;
    });
    return acc ?? ls[0]!.mul(0).sum();
  };
  const xs2 = leaves();
  const hv = h(...xs2);
  const g2 = hv.requires_grad ? grad(hv, xs2, { allow_unused: true }) : xs2.map(() => null);
  const analytic2 = g2.map((gi, i) => gi?.dataSync() ?? new Float64Array(inputs[i]!.numel()));
  return failures.concat(fdCheck(h, inputs, analytic2, o, 2));
}
