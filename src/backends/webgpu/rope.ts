/**
 * WGSL kernel of the registry's `rotary_embedding` (src/graph/ops/rope.ts): one thread per output
 * element j of a row of D = 2h, y_j = x_j·c_j + σ·x_p·s_q with p = j ± h its partner (forward:
 * q = j, σ = −1 below h; transposed: q = p, σ = −1 above h). cos and sin are read through their
 * broadcast strides, x through its own (the transposed view of a projection needs no copy).
 *
 * Each product and the sum are rounded to f32; half dtypes are rounded once at the store, as the
 * js reference computes kernel ops on halves in float32. WGSL does not forbid contracting
 * x·c + t into an fma, so on a GPU the float32 result is within one extra rounding of the
 * decomposition: |y − dec| ≤ 2^-24·(|x·c| + |x_p·s_q|) (one float32 ulp of the larger term);
 * tests/rope compares within that.
 */
import type { RotaryAttrs } from "../../graph/ops/rope.ts";
import { storeExpr, WGSL_COMMON } from "./dtype.ts";
import { collapse, groupsFor, linearIndex, numelOf, padRank, type Ctx, type View } from "./context.ts";
import { PARAMS_WGSL } from "./queue.ts";
import { unravel } from "./reduce.ts";
import { broadcastStrides } from "../../tensor/shape.ts";

/**
 * params: [n, D, h, x off, c off, s off, out off, x/c/s last-dim strides, then the collapsed
 * leading dims: shape, x strides, c strides, s strides].
 */
export function launchRotaryEmbedding(ctx: Ctx, [x, c, s]: readonly View[], a: RotaryAttrs, out: View): void {
  const nd = x!.shape.length, D = x!.shape[nd - 1]!, h = D / 2;
  const n = numelOf(out.shape);
  if (n === 0) return;
  const xs = x!.strides, cs = broadcastStrides(c!.shape, c!.strides, x!.shape), ss = broadcastStrides(s!.shape, s!.strides, x!.shape);
  const lead = collapse(x!.shape.slice(0, -1), [xs.slice(0, -1), cs.slice(0, -1), ss.slice(0, -1)]);
  const no = padRank(lead.shape, lead.strides);
  const S = 10, XS = S + no, CS = XS + no, SS = CS + no;
  const ct = "f32";
  const R = (v: string) => storeExpr(out.dtype, ct, v);
  const lo = a.transposed ? "j >= h" : "j < h"; // where σ = −1
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<${out.t}>;
@group(0) @binding(2) var<storage, read> x: array<${x!.t}>;
@group(0) @binding(3) var<storage, read> cs: array<${c!.t}>;
@group(0) @binding(4) var<storage, read> sn: array<${s!.t}>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(64)};
  if (i >= p(0u)) { return; }
  let D = p(1u);
  let h = p(2u);
  let row = i / D;
  let j = i % D;
  var ox = p(3u);
  var oc = p(4u);
  var os = p(5u);
  ${unravel("row", no, (d) => S + d, [{ v: "ox", stride: (d) => XS + d }, { v: "oc", stride: (d) => CS + d }, { v: "os", stride: (d) => SS + d }])}
  let pj = select(j - h, j + h, j < h);
  let q = ${a.transposed ? "pj" : "j"};
  let sg = select(1.0, -1.0, ${lo});
  let ac = f32(x[ox + j * p(7u)]) * f32(cs[oc + j * p(8u)]);
  let bs = sg * f32(x[ox + pj * p(7u)]) * f32(sn[os + q * p(9u)]);
  out[p(6u) + i] = ${R("ac + bs")};
}`;
  const params = [n, D, h, x!.offset, c!.offset, s!.offset, out.offset, xs[nd - 1]!, cs[nd - 1]!, ss[nd - 1]!, ...lead.shape, ...lead.strides.flat()];
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r"] }, params, [out.buf, x!.buf, c!.buf, s!.buf], groupsFor(n, 64));
}
