/**
 * WGSL dequantize-matmul for the registry's `quantized_linear` (src/graph/ops/quantized.ts):
 * out = x · dequant(W)ᵀ + b, or the transposed form x · dequant(W), W decoded element by element
 * from its packed bytes as it is read (never a dense weight). One 64-thread workgroup per output
 * element: thread t takes the reduced indices t, t+64, ... (coalesced), accumulating in f32 with
 * fma, then a shared-memory tree of 6 levels; the bound is quantized.ts's QUANT_ERROR_BOUND.
 *
 * Every element of a WebGPU buffer is 4 bytes (dtype.ts): uint8/int8 packed bytes arrive as one
 * i32 per byte (4× the packed size); the int32 word form (`packed_words`) keeps 4 bytes per
 * element, the packed size, and the kernel shifts each byte out of its word. fp16 block scales are decoded with
 * `unpack2x16float`, which may flush fp16 subnormals to zero (WGSL spec); normal scales are exact.
 */
import { NF4_CODE, QUANT_FORMATS, type QuantizedLinearAttrs } from "../../graph/ops/quantized.ts";
import { WGSL_COMMON } from "./dtype.ts";
import { contiguous, numelOf, type Ctx, type View } from "./context.ts";
import { launchElementwise } from "./elementwise.ts";
import { PARAMS_WGSL } from "./queue.ts";

/** Whether v is dense row-major (offset allowed). */
function isDense(v: View): boolean {
  const c = contiguous(v.shape);
  return v.shape.every((s, d) => s === 1 || v.strides[d] === c[d]);
}

/** v itself when dense, else a dense copy (released by the caller through `temps`); spmm.ts uses it too. */
export function dense(ctx: Ctx, v: View, temps: View[]): View {
  if (isDense(v)) return v;
  const t = ctx.temp(v.dtype, v.shape, "quantized_linear");
  launchElementwise(ctx, "contiguous", [{ kind: "buf", view: v }], v.shape, { view: t, dense: true });
  temps.push(t);
  return t;
}

/** WGSL returning W[n, k] (f32) for a format; `qb(i)` reads packed byte i of the weight as 0..255. */
function weightFn(format: QuantizedLinearAttrs["format"]): string {
  const half = (i: string) => `unpack2x16float(qb(${i}) | (qb(${i} + 1u) << 8u)).x`;
  switch (format) {
    case "q8_0": return `fn wt(n: u32, k: u32) -> f32 {
  let b = n * p(3u) + (k / 32u) * 34u;
  let v = i32(qb(b + 2u + k % 32u));
  return ${half("b")} * f32(select(v, v - 256, v >= 128));
}`;
    case "q4_0": return `fn wt(n: u32, k: u32) -> f32 {
  let b = n * p(3u) + (k / 32u) * 18u;
  let i = k % 32u;
  let v = qb(b + 2u + (i & 15u));
  let nib = select(v >> 4u, v & 15u, i < 16u);
  return ${half("b")} * (f32(nib) - 8.0);
}`;
    case "nf4": return `const NF4 = array<f32, 16>(${NF4_CODE.map((c) => c.toPrecision(17)).join(", ")});
fn wt(n: u32, k: u32) -> f32 {
  let v = qb(n * p(3u) + k / 2u);
  let nib = select(v & 15u, v >> 4u, (k & 1u) == 0u);
  return NF4[nib] * sc[p(8u) + (n * p(2u) + k) / 64u];
}`;
    case "int8": return `fn wt(n: u32, k: u32) -> f32 {
  let v = i32(qb(n * p(3u) + k));
  return sc[p(8u) + n] * f32(select(v, v - 256, v >= 128));
}`;
  }
}

/**
 * params: [outputs, kout, K, row bytes, kin, x offset, q offset, N, scales offset, bias offset, out offset].
 * @param ins - [x, qweight, scales?, bias?] as the op takes them
 */
export function launchQuantizedLinear(ctx: Ctx, ins: readonly View[], a: QuantizedLinearAttrs, out: View): void {
  const f = QUANT_FORMATS[a.format];
  const total = numelOf(out.shape);
  if (total === 0) return; // before any temporary copy, which would not be released
  const temps: View[] = [];
  const x = dense(ctx, ins[0]!, temps), q = dense(ctx, ins[1]!, temps);
  const sc = f.scales ? dense(ctx, ins[2]!, temps) : null;
  const bias = a.has_bias ? dense(ctx, ins[ins.length - 1]!, temps) : null;
  const N = q.shape[0]!, rb = q.shape[1]! * (q.dtype === "int32" ? 4 : 1), K = (rb / f.bytes) * f.block;
  const kin = a.transposed ? N : K, kout = a.transposed ? K : N;
  const wIndex = a.transposed ? "wt(i, j)" : "wt(j, i)";
  const source = `${PARAMS_WGSL}${WGSL_COMMON}
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> q: array<i32>;
${sc ? "@group(0) @binding(4) var<storage, read> sc: array<f32>;" : ""}
${bias ? `@group(0) @binding(${sc ? 5 : 4}) var<storage, read> bias: array<f32>;` : ""}
var<workgroup> part: array<f32, 64>;
${q.dtype === "int32" ? "fn qb(i: u32) -> u32 { return (u32(q[p(6u) + i / 4u]) >> ((i % 4u) * 8u)) & 255u; }" : "fn qb(i: u32) -> u32 { return u32(q[p(6u) + i]) & 255u; }"}
${weightFn(a.format)}
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let o = wid.x + wid.y * nw.x;
  if (o >= p(0u)) { return; }
  let kin = p(4u);
  let m = o / p(1u);
  let j = o % p(1u);
  let xb = p(5u) + m * kin;
  var acc = 0.0;
  for (var i = lid.x; i < kin; i += 64u) { acc = fma(x[xb + i], ${wIndex}, acc); }
  part[lid.x] = acc;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid.x < s) { part[lid.x] += part[lid.x + s]; }
    workgroupBarrier();
  }
  if (lid.x == 0u) { out[p(10u) + o] = part[0]${bias ? " + bias[p(9u) + j]" : ""}; }
}`;
  const buffers = [out.buf, x.buf, q.buf, ...(sc ? [sc.buf] : []), ...(bias ? [bias.buf] : [])];
  const access = ["rw", ...buffers.slice(1).map(() => "r")] as ("rw" | "r")[];
  const params = [total, kout, K, rb, kin, x.offset, q.offset, N, sc?.offset ?? 0, bias?.offset ?? 0, out.offset];
  ctx.q.dispatch({ source, access }, params, buffers, total);
  for (const t of temps) ctx.q.pool.release(t.buf);
}
