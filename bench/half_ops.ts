/**
 * Single native kernels in float32, bfloat16 and float16 (matmul [64,256]x[256,256], add [64,256],
 * casts 256x256): median and min µs of 7 rounds of 50 calls through `Backend.run`. Half-precision
 * loads and stores use the vectorized conversions of native/kernels/common.h; half matmul is a
 * float64 GEMM (the reference's contract). Run on a quiet machine (load average < 0.5).
 *
 *   bun bench/half_ops.ts
 */
import { nativeBackend } from "../src/backends/native/backend.ts";
import { OPS } from "../src/graph/registry.ts";
import { fromValues } from "../src/tensor/storage.ts";
const nb = nativeBackend()!;
function t(name: string, op: any, ins: any[], attrs: any) {
  const shape = op.shape(ins, attrs), dtype = op.dtype(ins, attrs);
  for (let i = 0; i < 20; i++) nb.run(op, ins, attrs, shape, dtype);
  const N = 50, r: number[] = [];
  for (let k = 0; k < 7; k++) { const t0 = performance.now(); for (let i = 0; i < N; i++) nb.run(op, ins, attrs, shape, dtype); r.push((performance.now() - t0) / N * 1000); }
  r.sort((a, b) => a - b);
  console.log(name.padEnd(36), "median", r[3]!.toFixed(0), "us  min", r[0]!.toFixed(0), "us");
}
const vals = (n: number) => Array.from({ length: n }, (_, i) => Math.sin(i) * 3);
for (const d of ["float32", "bfloat16", "float16"] as const) {
  const a = fromValues(d, [64, 256], vals(64 * 256)), b = fromValues(d, [256, 256], vals(256 * 256)), c = fromValues(d, [64, 256], vals(64 * 256).reverse());
  t(`matmul ${d} [64,256]x[256,256]`, OPS.matmul, [a, b], {});
  t(`add ${d} [64,256]`, OPS.add, [a, c], {});
}
const x = fromValues("float32", [256, 256], vals(65536));
for (const d of ["bfloat16", "float16"] as const) t(`cast f32->${d} 256x256`, OPS.cast, [x], { dtype: d });
const h = fromValues("float16", [256, 256], vals(65536));
t(`cast f16->f32 256x256`, OPS.cast, [h], { dtype: "float32" });
