/**
 * WGSL launcher of the registry's spmm (src/graph/ops/spmm.ts): y = x Wᵀ with W [N, K] in CSR.
 * One thread per output element (m, n) walks row n's non-zeros in order, summing in f32 (WGSL
 * has no f64: the result is within float32 rounding of the js reference, not bit-equal). A
 * column outside [0, K) or a crow that does not rise from 0 to nnz is reported through the
 * dispatch's error cell and raised on readback as the reference's LoomIndexError.
 */
import { LoomIndexError } from "../../tensor/errors.ts";
import { groupsFor, linearIndex, numelOf, type Ctx, type View } from "./context.ts";
import { dense } from "./quantized.ts";
import { ERR_WGSL, PARAMS_WGSL } from "./queue.ts";

export function launchSpmm(ctx: Ctx, [x0, crow, col, val]: readonly View[], _a: unknown, out: View): void {
  const total = numelOf(out.shape);
  if (total === 0) return;
  const temps: View[] = [];
  const x = dense(ctx, x0!, temps); // x with unit strides in row-major order
  const K = x.shape[x.shape.length - 1]!, N = crow!.shape[0]! - 1, nnz = col!.shape[0]!;
  const source = `${PARAMS_WGSL}
@group(0) @binding(1) var<storage, read_write> out: array<${out.t}>;
@group(0) @binding(2) var<storage, read> x: array<${x.t}>;
@group(0) @binding(3) var<storage, read> crow: array<i32>;
@group(0) @binding(4) var<storage, read> col: array<i32>;
@group(0) @binding(5) var<storage, read> val: array<${val!.t}>;
${ERR_WGSL(6, 11)}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = ${linearIndex(64)};
  if (i >= p(0u)) { return; }
  let n = i % p(1u);
  let m = i / p(1u);
  let a = crow[p(4u) + n * p(5u)];
  let b = crow[p(4u) + (n + 1u) * p(5u)];
  if (a < 0 || b < a || b > i32(p(12u)) || (n == 0u && a != 0) || (n + 1u == p(1u) && b != i32(p(12u)))) { report(2u, i32(n)); return; }
  var s: f32 = 0.0;
  for (var q = u32(a); q < u32(b); q++) {
    let c = col[p(6u) + q * p(7u)];
    if (c < 0 || c >= i32(p(2u))) { report(1u, i32(q)); return; }
    s += f32(val[p(8u) + q * p(9u)]) * f32(x[p(3u) + m * p(2u) + u32(c)]);
  }
  out[i] = s;
}`;
  const cell = ctx.q.errorCell([
    (q) => new LoomIndexError(`[spmm] col_indices[${q}] is out of bounds for K = ${K}`),
    (n) => new LoomIndexError(`[spmm] crow_indices[${n}] is out of bounds: crow_indices must rise from 0 to nnz = ${nnz}`),
  ]);
  const params = [total, N, K, x.offset, crow!.offset, crow!.strides[0] ?? 1, col!.offset, col!.strides[0] ?? 1, val!.offset, val!.strides[0] ?? 1, 0, cell.word, nnz];
  ctx.q.dispatch({ source, access: ["rw", "r", "r", "r", "r", "rw"] }, params, [out.buf, x.buf, crow!.buf, col!.buf, val!.buf, null], groupsFor(total, 64));
  for (const t of temps) ctx.q.pool.release(t.buf);
}
