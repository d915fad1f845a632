/**
 * Worker for ddp.test.ts. Each rank trains the DDP model on its half of every batch and, on the
 * side, a plain copy on the whole batch (the single-process run DDP must equal); it reports the
 * largest difference of the parameters. Runs on js and native, eager and lazy.
 */
import { nativeBackend } from "../../../src/backends/native/backend.ts";
import * as dist from "../../../src/distributed/index.ts";
import * as loom from "../../../src/index.ts";
import { lora, models, nn, optim } from "../../../src/index.ts";
import { set_default_backend } from "../../../src/lazy/device.ts";
import { realizeStats } from "../../../src/scheduler/realize.ts";
import { report } from "../helpers.ts";

dist.init_process_group();
const rank = dist.get_rank(), world = dist.get_world_size();

const maxDiff = (a: nn.Module, b: nn.Module) => {
  let m = 0;
  const pa = a.parameters(), pb = b.parameters();
  pa.forEach((p, i) => {
    const x = p.dataSync(), y = pb[i]!.dataSync();
    for (let k = 0; k < x.length; k++) m = Math.max(m, Math.abs(x[k]! - y[k]!));
  });
  return m;
};
/** Rank r != 0 starts from other weights: DDP's broadcast must replace them with rank 0's. */
const perturb = (m: nn.Module) => loom.no_grad(() => { if (rank !== 0) for (const p of m.parameters()) p.add_(0.5); });

function mlp(): nn.Sequential {
  loom.manual_seed(1);
  return new nn.Sequential(new nn.Linear(5, 16), new nn.Tanh(), new nn.Linear(16, 3));
}

/** SGD on an MLP, 3 steps; `micro` micro-batches per step (the first ones under no_sync). */
function mlpRun(micro: number) {
  loom.manual_seed(0);
  const B = 8, x = loom.randn([B, 5]), y = loom.randn([B, 3]);
  const ref = mlp(), model = mlp();
  perturb(model);
  const ddp = new dist.DistributedDataParallel(model, { bucket_cap_mb: 256 / 2 ** 20 }); // 256 bytes: several buckets
  const o1 = new optim.SGD(ref.parameters(), { lr: 0.1 }), o2 = new optim.SGD(model.parameters(), { lr: 0.1 });
  const per = B / world / micro;
  for (let s = 0; s < 3; s++) {
    o1.zero_grad();
    ref.call(x).sub(y).pow(2).mean().backward();
    o1.step();
    o2.zero_grad();
    for (let k = 0; k < micro; k++) {
      const at = (rank * micro + k) * per;
      const step = () => ddp.call(x.narrow(0, at, per)).sub(y.narrow(0, at, per)).pow(2).mean().div(micro).backward();
      if (k < micro - 1) {
        using _ = ddp.no_sync();
        step();
      } else step();
    }
    o2.step();
  }
  return { diff: maxDiff(ref, model), buckets: ddp.bucket_names.length, stats: ddp.last_stats };
}

/** A module with a layer its forward never uses. */
class UsesOne extends nn.Module {
  used = new nn.Linear(3, 2);
  unused = new nn.Linear(3, 2);
  override forward(x: loom.Tensor): loom.Tensor {
    return this.used.call(x);
  }
}

/** A parameter that gets no gradient leaves its bucket unreduced: the next forward says so. */
function unusedRun(): { name: string; message: string } | null {
  loom.manual_seed(1);
  const ddp = new dist.DistributedDataParallel(new UsesOne(), { bucket_cap_mb: 1 });
  try {
    for (let s = 0; s < 2; s++) ddp.call(loom.randn([2, 3])).sum().backward();
    return null;
  } catch (e) {
    return { name: (e as Error).name, message: (e as Error).message };
  }
}

const gptConfig = () => new models.GPT2Config({
  vocab_size: 23, n_positions: 8, n_embd: 16, n_layer: 2, n_head: 2, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0, activation_function: "gelu",
});
function loraModel(): models.GPT2LMHeadModel {
  loom.manual_seed(0);
  const model = new models.GPT2LMHeadModel(gptConfig());
  lora.get_peft_model(model, new lora.LoraConfig({ r: 4, lora_alpha: 8, lora_dropout: 0, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true }));
  for (const [name, p] of model.named_parameters()) if (name.includes("lora_B")) loom.no_grad(() => p.copy_(loom.randn(p.shape as number[]).mul(0.1)));
  return model;
}

/** The main job's step (AdamW, grad clip 1) on a LoRA GPT-2: 2 ranks × batch 2 vs one process × batch 4, 4 steps. */
function loraRun() {
  loom.manual_seed(5);
  const B = 4, steps = 4;
  const data = Array.from({ length: steps }, () => [loom.randint(0, 23, [B, 8]), loom.randint(0, 23, [B, 8])] as const);
  const ref = loraModel(), model = loraModel();
  const ddp = new dist.DistributedDataParallel(model);
  const train = (m: models.GPT2LMHeadModel, call: (x: loom.Tensor, y: loom.Tensor) => loom.Tensor, lo: number, n: number) => {
    const params = m.parameters().filter((p) => p.requires_grad);
    const opt = new optim.AdamW(params, { lr: 1e-2, weight_decay: 0 });
    const plans: number[] = [];
    for (const [x, y] of data) {
      const r0 = realizeStats.realizes;
      opt.zero_grad();
      const loss = call(x.narrow(0, lo, n), y.narrow(0, lo, n));
      loss.backward();
      nn.clip_grad_norm_(params, 1);
      opt.step();
      loss.item();
      plans.push(realizeStats.realizes - r0);
    }
    return plans;
  };
  train(ref, (x, y) => ref.call(x, { targets: y }).loss!, 0, B);
  const plans = train(model, (x, y) => ddp.call(x, { targets: y }).loss!, rank * (B / world), B / world);
  const lora_diff = (() => {
    let m = 0;
    const a = ref.named_parameters().filter(([n]) => n.includes("lora_")), b = new Map(model.named_parameters());
    for (const [n, p] of a) {
      const x = p.dataSync(), y = b.get(n)!.dataSync();
      for (let k = 0; k < x.length; k++) m = Math.max(m, Math.abs(x[k]! - y[k]!));
    }
    return m;
  })();
  return { diff: lora_diff, plans_per_step: plans.slice(1) };
}

const out: Record<string, unknown> = { world };
for (const bk of nativeBackend() ? ["js", "native"] as const : ["js"] as const) {
  set_default_backend(bk);
  for (const mode of ["eager", "lazy"] as const) {
    nn.with_execution_mode(mode, () => {
      out[`${bk}/${mode}`] = { mlp: mlpRun(1), accumulate: mlpRun(2), lora: loraRun() };
    });
  }
}
out.unused = unusedRun();
report(rank, out);
