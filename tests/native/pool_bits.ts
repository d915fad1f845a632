/**
 * Run in fresh processes by runtime.test.ts with different LOOM_NATIVE_THREADS: kernels whose
 * work the pool splits into chunks (matmul column blocks, reductions, row-wise softmax and
 * layer_norm, elementwise tiles) and one lazy training step. Prints a checksum of the result
 * bits on the last line; every thread count (and every claim order) must give the same one.
 */
import * as loom from "../../src/index.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { set_default_backend } from "../../src/lazy/device.ts";

if (!nativeBackend()) throw new Error("native backend unavailable");
set_default_backend("native");
loom.manual_seed(0);
const x = loom.randn([384, 512]), w = loom.randn([512, 256]);
const outs: loom.Tensor[] = [
  x.matmul(w),
  loom.softmax(x, -1) as loom.Tensor,
  loom.layer_norm(x, [512]) as loom.Tensor,
  x.sum(0), x.sum(), x.exp().mul(x).add(1),
];
// a small lazy training step (forward, backward, AdamW): the plans of a real loop
const W = loom.randn([512, 64]).mul(0.05).requires_grad_(true);
const opt = new loom.optim.AdamW([W], { lr: 1e-2 });
for (let i = 0; i < 3; i++) {
  const loss = loom.gelu(x.lazy().matmul(W.lazy())).pow(2).mean();
  opt.zero_grad();
  loss.backward();
  opt.step();
}
outs.push(W.detach());
let h = 0;
for (const t of outs) {
  const b = new Uint32Array(Float32Array.from(t.dataSync() as ArrayLike<number>).buffer);
  for (let i = 0; i < b.length; i++) h = (Math.imul(h, 31) + b[i]!) | 0;
}
console.log(JSON.stringify({ checksum: h }));
