/**
 * Worker for tensor_parallel.test.ts: a GPT-2 block split over the ranks Megatron-style
 * (attention by heads: q/k/v column-parallel, output projection row-parallel; MLP: c_fc
 * column-parallel, c_proj row-parallel) against the single-rank GPT2Block of the same weights,
 * forward and backward; and the two layers alone against nn.Linear of the same seed. Reports the
 * largest differences, on js and native, eager and lazy.
 */
import { nativeBackend } from "../../../src/backends/native/backend.ts";
import * as dist from "../../../src/distributed/index.ts";
import * as loom from "../../../src/index.ts";
import { models, nn } from "../../../src/index.ts";
import { set_default_backend } from "../../../src/lazy/device.ts";
import { report } from "../helpers.ts";

dist.init_process_group();
const rank = dist.get_rank(), N = dist.get_world_size();
type T = loom.Tensor;
const diff = (a: T, b: T) => {
  const x = a.dataSync(), y = b.dataSync();
  if (x.length !== y.length) return Infinity;
  let m = 0;
  for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i]! - y[i]!));
  return m;
};
const C = 16, H = 4, hd = C / H;

/** The GPT-2 block with its weights split over the ranks (from the full block's weights). */
class TensorParallelGPT2Block extends nn.Module {
  c_attn: dist.ColumnParallelLinear;
  attn_proj: dist.RowParallelLinear;
  c_fc: dist.ColumnParallelLinear;
  mlp_proj: dist.RowParallelLinear;
  constructor(readonly full: models.GPT2Block) {
    super();
    const W = (m: nn.Module) => (m as nn.Conv1D).weight.detach().t().contiguous(); // Conv1D [in, out] -> Linear [out, in]
    const b = (m: nn.Module) => (m as nn.Conv1D).bias.detach();
    // q, k, v rows of c_attn regrouped per rank: [q_0 k_0 v_0 | q_1 k_1 v_1 | ...] (heads r·H/N ...)
    const c = C / N, wqkv = W(full.attn.c_attn), bqkv = b(full.attn.c_attn);
    const per = (t: T) => loom.cat(Array.from({ length: N }, (_, r) => loom.cat([0, 1, 2].map((j) => t.narrow(0, j * C + r * c, c)), 0)), 0);
    this.c_attn = dist.ColumnParallelLinear.from_weight(per(wqkv), per(bqkv));
    this.attn_proj = dist.RowParallelLinear.from_weight(W(full.attn.c_proj), b(full.attn.c_proj), { input_is_parallel: true });
    this.c_fc = dist.ColumnParallelLinear.from_weight(W(full.mlp.c_fc), b(full.mlp.c_fc));
    this.mlp_proj = dist.RowParallelLinear.from_weight(W(full.mlp.c_proj), b(full.mlp.c_proj), { input_is_parallel: true });
  }
  override forward(x: T): T {
    const [B, Tn] = x.shape as [number, number];
    const h_local = H / N, c = C / N;
    const [q, k, v] = this.c_attn.call(this.full.ln_1.call(x)).split(c, 2) as [T, T, T]; // 3 × [B, T, C/N]: this rank's heads
    const heads = (t: T) => t.view(B, Tn, h_local, hd).transpose(1, 2);
    const y = loom.scaled_dot_product_attention(heads(q), heads(k), heads(v), { is_causal: true, scale: 1 / Math.sqrt(hd) });
    const h = x.add(this.attn_proj.call(y.transpose(1, 2).contiguous().view(B, Tn, c)));
    return h.add(this.mlp_proj.call(this.full.mlp.act.call(this.c_fc.call(this.full.ln_2.call(h)))));
  }
}

function blockCase() {
  loom.manual_seed(3);
  const block = new models.GPT2Block(new models.GPT2Config({ n_embd: C, n_head: H, n_layer: 1, n_positions: 8, vocab_size: 11, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0, activation_function: "gelu" }));
  for (const p of block.parameters()) loom.no_grad(() => p.add_(loom.randn(p.shape as number[]).mul(0.05))); // non-zero biases too
  const x0 = loom.randn([2, 5, C]), w = loom.randn([2, 5, C]);
  const run = (f: (x: T) => T) => {
    const x = x0.clone().requires_grad_(true);
    for (const p of block.parameters()) p.grad = null;
    const y = f(x);
    y.mul(w).sum().backward();
    return { y: y.detach(), gx: x.grad! };
  };
  const ref = run((x) => block.call(x));
  const refGrad = new Map(block.named_parameters().map(([n, p]) => [n, p.grad!.clone()]));
  const tp = new TensorParallelGPT2Block(block);
  const out = run((x) => tp.call(x));
  const fc = C * 4 / N;
  return {
    y: diff(out.y, ref.y),
    x_grad: diff(out.gx, ref.gx),
    ln_1_grad: diff(block.ln_1.weight!.grad!, refGrad.get("ln_1.weight")!),
    // the column-parallel c_fc's rows are rows r·4C/N.. of the full layer's [out, in] gradient
    c_fc_grad: diff(tp.c_fc.weight.grad!, refGrad.get("mlp.c_fc.weight")!.t().narrow(0, rank * fc, fc)),
    c_fc_bias_grad: diff(tp.c_fc.bias!.grad!, refGrad.get("mlp.c_fc.bias")!.narrow(0, rank * fc, fc)),
    mlp_proj_grad: diff(tp.mlp_proj.weight.grad!, refGrad.get("mlp.c_proj.weight")!.t().narrow(1, rank * fc, fc)),
    mlp_proj_bias_grad: diff(tp.mlp_proj.bias!.grad!, refGrad.get("mlp.c_proj.bias")!),
    attn_proj_grad: diff(tp.attn_proj.weight.grad!, refGrad.get("attn.c_proj.weight")!.t().narrow(1, rank * (C / N), C / N)),
    shapes: [tp.c_attn.weight.shape, tp.attn_proj.weight.shape, tp.c_fc.weight.shape, tp.mlp_proj.weight.shape],
  };
}

/** The layers alone, initialized from the same seed as nn.Linear (Megatron's CPU initialization). */
function layerCase() {
  loom.manual_seed(9);
  const l1 = new nn.Linear(6, 4), l2 = new nn.Linear(6, 4);
  loom.manual_seed(9);
  const col = new dist.ColumnParallelLinear(6, 4, { gather_output: true });
  const row = new dist.RowParallelLinear(6, 4);
  const x0 = loom.randn([3, 6]);
  const go = (f: (x: T) => T) => {
    const x = x0.clone().requires_grad_(true);
    const y = f(x);
    y.mul(y).sum().backward();
    return [y.detach(), x.grad!] as const;
  };
  const [yc, gc] = go((x) => col.call(x)), [yc0, gc0] = go((x) => l1.call(x));
  const [yr, gr] = go((x) => row.call(x)), [yr0, gr0] = go((x) => l2.call(x));
  return { col_y: diff(yc, yc0), col_gx: diff(gc, gc0), row_y: diff(yr, yr0), row_gx: diff(gr, gr0), col_shape: col.weight.shape, row_shape: row.weight.shape };
}

const out: Record<string, unknown> = { world: N };
for (const bk of nativeBackend() ? ["js", "native"] as const : ["js"] as const) {
  set_default_backend(bk);
  for (const mode of ["eager", "lazy"] as const) nn.with_execution_mode(mode, () => { out[`${bk}/${mode}`] = { block: blockCase(), layers: layerCase() }; });
}
report(rank, out);
