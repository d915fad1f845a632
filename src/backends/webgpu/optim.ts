/**
 * A fused AdamW update: one kernel reads p, g, m, v once and writes p, m, v in place, instead of
 * the ~10 elementwise kernels and temporaries of the op-by-op update. It follows PyTorch 1.13's
 * single-tensor AdamW (src/optim/adam.ts), each step rounded to float32 as those ops round:
 *   p ← p·(1 − lr·λ);  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 − β2)·g²
 *   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
 * Source: Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization"; torch.optim.AdamW.
 */
import { LoomDtypeError, LoomShapeError } from "../../tensor/errors.ts";
import { isContiguous, numel } from "../../tensor/shape.ts";
import type { TensorData } from "../../tensor/storage.ts";
import { scalarBits, WGSL_COMMON } from "./dtype.ts";
import { groupsFor, linearIndex, type Ctx } from "./context.ts";
import { PARAMS_WGSL } from "./queue.ts";

export interface AdamWArgs {
  /** Parameter, gradient, first and second moments: float32, same shape; p, m, v dense. */
  p: TensorData; g: TensorData; m: TensorData; v: TensorData;
  /** Learning rate per step, decay rates, eps (absolute), decoupled weight decay rate. */
  lr: number; beta1: number; beta2: number; eps: number; weight_decay: number;
  /** 1-based step count (after incrementing), for the bias corrections. */
  step: number;
  /** Negate the gradient (maximize the objective). */
  maximize?: boolean;
}

const SOURCE = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> Pa: array<f32>;
@group(0) @binding(2) var<storage, read_write> Mo: array<f32>;
@group(0) @binding(3) var<storage, read_write> Vo: array<f32>;
@group(0) @binding(4) var<storage, read> G: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex()};
  if (i >= p(0u)) { return; }
  let g = G[p(2u) + i] * pf(13u);
  let pi_ = p(1u) + i; let mi = p(3u) + i; let vi = p(4u) + i;
  let pd = Pa[pi_] * pf(5u);
  let m = Mo[mi] * pf(6u) + g * pf(7u);
  let v = Vo[vi] * pf(8u) + (g * g) * pf(9u);
  let denom = sqrt(v) / pf(10u) + pf(11u);
  Pa[pi_] = pd + (m / denom) * pf(12u);
  Mo[mi] = m;
  Vo[vi] = v;
}`;

/** Record the update (ctx.view gives the buffers; p, m, v must already be GPU tensors). */
export function adamwStep(ctx: Ctx, a: AdamWArgs): void {
  const shape = a.p.shape;
  for (const [name, t] of [["p", a.p], ["g", a.g], ["m", a.m], ["v", a.v]] as const) {
    if (t.dtype !== "float32") throw new LoomDtypeError(`[adamw] ${name} must be float32 on webgpu, got ${t.dtype}`);
    if (t.shape.length !== shape.length || t.shape.some((s, i) => s !== shape[i]) || !isContiguous(t.shape, t.strides)) {
      throw new LoomShapeError(`[adamw] ${name} must be dense with the parameter's shape [${shape.join(", ")}]`);
    }
  }
  const n = numel(shape);
  if (n === 0) return;
  const [p, g, m, v] = [a.p, a.g, a.m, a.v].map((t) => ctx.gpuView(t, "adamw"));
  const f = (x: number) => scalarBits("f32", x);
  const bc1 = 1 - a.beta1 ** a.step, bc2 = 1 - a.beta2 ** a.step;
  const params = [
    n, p!.offset, g!.offset, m!.offset, v!.offset,
    f(1 - a.lr * a.weight_decay), f(a.beta1), f(1 - a.beta1), f(a.beta2), f(1 - a.beta2),
    f(Math.sqrt(bc2)), f(a.eps), f(-(a.lr / bc1)), f(a.maximize ? -1 : 1),
  ];
  ctx.q.dispatch({ source: SOURCE, access: ["rw", "rw", "rw", "r"] }, params, [p!.buf, m!.buf, v!.buf, g!.buf], groupsFor(n));
  for (const x of [p, g, m, v]) ctx.release(x!);
}
