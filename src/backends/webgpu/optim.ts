/**
 * A fused AdamW update: one kernel reads p, g, m, v once and writes p, m, v in place, instead of
 * the ~10 elementwise kernels and temporaries of the op-by-op update. It follows PyTorch 1.13's
 * single-tensor AdamW (src/optim/adam.ts), each step rounded to float32 as those ops round:
 *   p ← p·(1 − lr·λ);  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 − β2)·g²
 *   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + eps)
 * Source: Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization"; torch.optim.AdamW.
 */
import { LoomDtypeError } from "../../tensor/errors.ts";
import { isContiguous, numel } from "../../tensor/shape.ts";
import type { AdamWStep } from "../backend.ts";
import { scalarBits, WGSL_COMMON } from "./dtype.ts";
import { groupsFor, linearIndex, type Ctx } from "./context.ts";
import { PARAMS_WGSL } from "./queue.ts";

export type AdamWArgs = AdamWStep;

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

/** Whether the fused kernel takes these tensors: float32, dense, one shape. */
export function adamwApplies(a: AdamWArgs): boolean {
  const shape = a.p.shape;
  return [a.p, a.g, a.m, a.v].every((t) => t.dtype === "float32" && t.shape.length === shape.length &&
    t.shape.every((s, i) => s === shape[i]) && isContiguous(t.shape, t.strides));
}

/** Record the update (p, m and v must be GPU tensors: they are written in place). */
export function adamwStep(ctx: Ctx, a: AdamWArgs): void {
  if (!adamwApplies(a)) throw new LoomDtypeError(`[adamw] p, g, m, v must be dense float32 tensors of one shape [${a.p.shape.join(", ")}]`);
  const n = numel(a.p.shape);
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
