/**
 * from_pretrained speed and memory on full-size checkpoints (issue 13: at most 2 s, and RSS at
 * most 1.3× the checkpoint size). Not a timed test: the machine is shared, so print the load
 * average with the numbers.
 *
 *   bun bench/from_pretrained.ts [case=gpt2-124m] [--runs=3] [--keep]
 *
 * Each case writes a checkpoint with random weights once (to $TMPDIR/loom-bench-<case>, reused
 * while its files are there; --keep leaves it for the next run), then loads it in fresh child
 * processes (one per run, so neither the writer's memory nor an earlier load's pages count)
 * and reports: load wall time; RSS after the load, its peak (VmHWM) and the runtime's own RSS
 * before the load; RSS after one forward pass of 8 tokens (which reads every weight page); and
 * the checkpoint size.
 *
 * Cases are generic over a `(dir) => model` loader: add one to CASES with its writer and loader.
 * "gpt2-124m-copy" is the pre-issue-13 path for comparison: a model built with its random init,
 * then weights copied in (load_checkpoint without assign). "llama-100m" is a Llama-2-style config
 * scaled to 100M parameters (vocab 32000, hidden 768, 12 layers, 12 query / 4 KV heads, SwiGLU
 * 2048, tied embeddings), loaded through AutoModelForCausalLM; "llama-100m-sharded" is the same
 * model saved in 200 MB shards with model.safetensors.index.json.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import * as loom from "../src/index.ts";
import { GPT2Config } from "../src/models/gpt2_config.ts";
import { GPT2LMHeadModel } from "../src/models/gpt2.ts";
import { load_checkpoint } from "../src/models/hf_checkpoint.ts";
import { LlamaForCausalLM } from "../src/models/llama.ts";
import { LlamaConfig } from "../src/models/llama_config.ts";
import type { Module } from "../src/nn/module.ts";

/** A benchmark case: how to write a checkpoint directory, and how to load one. */
export interface LoaderCase {
  /** Writes config.json + weights to `dir` (random values are fine). */
  write(dir: string): void;
  /** Loads `dir`, as a user would. */
  load(dir: string): Module;
  /** Runs one small forward pass over the loaded model (touches every weight). */
  forward(model: Module): void;
  /** Share another case's checkpoint directory (default: this case's own). */
  checkpoint?: string;
}

// Fast random fill (xorshift32, U(-0.02, 0.02)): the model's own init is what we avoid timing.
function fillRandom(model: Module, seed = 1): void {
  let s = seed >>> 0 || 1;
  for (const p of model.parameters()) {
    const d = p._d.data as Float32Array;
    for (let i = 0; i < d.length; i++) {
      s ^= s << 13; s ^= s >>> 17; s ^= s << 5;
      d[i] = ((s >>> 0) / 4294967296 - 0.5) * 0.04;
    }
  }
}

const gpt2Forward = (model: Module) => {
  const ids = loom.tensor([[464, 2068, 7586, 21831, 18045, 625, 262, 16931]], { dtype: "int64" });
  loom.no_grad(() => (model as GPT2LMHeadModel).call(ids).logits.sum().item());
};

// ~100M parameters: 32000·768 (tied embedding) + 12 · (4·768² GQA-sized attention + 3·768·2048 MLP)
const llama100m = () => new LlamaConfig({
  model_type: "llama", vocab_size: 32000, hidden_size: 768, intermediate_size: 2048, num_hidden_layers: 12, num_attention_heads: 12,
  num_key_value_heads: 4, max_position_embeddings: 2048, rms_norm_eps: 1e-5, rope_theta: 10000, tie_word_embeddings: true,
  bos_token_id: 1, eos_token_id: 2, architectures: ["LlamaForCausalLM"], torch_dtype: "float32",
});

function writeLlama(dir: string, max_shard_size?: string): void {
  const model = loom.nn.init_empty_weights(() => new LlamaForCausalLM(llama100m(), { init: false }));
  fillRandom(model);
  model.save_pretrained(dir, { max_shard_size });
}

const llamaForward = (model: Module) => {
  const ids = loom.tensor([[1, 450, 4996, 17354, 1701, 29916, 432, 17204]], { dtype: "int64" });
  loom.no_grad(() => (model as LlamaForCausalLM).call(ids).logits.sum().item());
};

export const CASES: Record<string, LoaderCase> = {
  // GPT-2 124M, the real config (n_embd 768, 12 layers, vocab 50257, 1024 positions), tied head
  "gpt2-124m": {
    write(dir) {
      const model = loom.nn.init_empty_weights(() => new GPT2LMHeadModel(new GPT2Config(), { init: false }));
      fillRandom(model);
      model.save_pretrained(dir);
    },
    load: (dir) => GPT2LMHeadModel.from_pretrained(dir),
    forward: gpt2Forward,
  },
  // the same weights stored as float16: loaded as float16 on the mapping ("auto"), or converted to float32 on request
  "gpt2-124m-f16": {
    write(dir) {
      const f32 = join(tmpdir(), `loom-bench-gpt2-124m-f16-src-${process.pid}`);
      CASES["gpt2-124m"]!.write(f32);
      GPT2LMHeadModel.from_pretrained(f32, { torch_dtype: "float16" }).save_pretrained(dir);
      rmSync(f32, { recursive: true, force: true });
    },
    load: (dir) => GPT2LMHeadModel.from_pretrained(dir),
    forward: gpt2Forward,
  },
  "gpt2-124m-f16-to-f32": {
    checkpoint: "gpt2-124m-f16",
    write: (dir) => CASES["gpt2-124m-f16"]!.write(dir),
    load: (dir) => GPT2LMHeadModel.from_pretrained(dir, { torch_dtype: "float32" }),
    forward: gpt2Forward,
  },
  "gpt2-124m-copy": {
    checkpoint: "gpt2-124m",
    write: (dir) => CASES["gpt2-124m"]!.write(dir),
    load(dir) {
      const model = new GPT2LMHeadModel(GPT2Config.from_pretrained(dir));
      load_checkpoint(model, dir, { base_model_prefix: "transformer", allow_missing: ["lm_head.weight"] });
      return model.eval();
    },
    forward: gpt2Forward,
  },
  "llama-100m": {
    write: (dir) => writeLlama(dir),
    load: (dir) => loom.models.AutoModelForCausalLM.from_pretrained(dir),
    forward: llamaForward,
  },
  "llama-100m-sharded": {
    write: (dir) => writeLlama(dir, "200MB"),
    load: (dir) => loom.models.AutoModelForCausalLM.from_pretrained(dir),
    forward: llamaForward,
  },
};

function procStatus(key: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${key}:\\s+(\\d+) kB`, "m").exec(readFileSync("/proc/self/status", "utf8"));
  return m ? Number(m[1]) * 1024 : process.memoryUsage().rss;
}

const MiB = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;

function dirSize(dir: string): number {
  return readdirSync(dir).reduce((n, f) => n + statSync(join(dir, f)).size, 0);
}

// Child: load once, print one JSON line.
function child(name: string, dir: string): void {
  const c = CASES[name]!;
  Bun.gc(true);
  const before = procStatus("VmRSS");
  const t0 = performance.now();
  const model = c.load(dir);
  const load_s = (performance.now() - t0) / 1000;
  const after = procStatus("VmRSS");
  const t1 = performance.now();
  c.forward(model);
  const forward_s = (performance.now() - t1) / 1000;
  Bun.gc(true);
  console.log(JSON.stringify({ load_s, before, after, peak: procStatus("VmHWM"), after_forward: procStatus("VmRSS"), forward_s }));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const childAt = args.indexOf("--child");
  if (childAt >= 0) return child(args[childAt + 1]!, args[childAt + 2]!);
  const name = args.find((a) => !a.startsWith("--")) ?? "gpt2-124m";
  const runs = Number(args.find((a) => a.startsWith("--runs="))?.slice(7) ?? 3);
  const c = CASES[name];
  if (!c) throw new Error(`unknown case ${name}; one of ${Object.keys(CASES).join(", ")}`);
  const dir = join(tmpdir(), `loom-bench-${c.checkpoint ?? name}`);
  if (!existsSync(join(dir, "config.json"))) {
    mkdirSync(dir, { recursive: true });
    const t = performance.now();
    c.write(dir);
    console.log(`wrote ${dir} in ${((performance.now() - t) / 1000).toFixed(1)} s`);
  }
  const size = dirSize(dir);
  console.log(`${name}: checkpoint ${MiB(size)} (${dir}); load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  for (let i = 0; i < runs; i++) {
    const p = Bun.spawnSync([process.execPath, import.meta.path, "--child", name, dir], { stderr: "inherit" });
    const line = p.stdout.toString().trim().split("\n").pop()!;
    const r = JSON.parse(line);
    console.log(
      `  run ${i + 1}: load ${r.load_s.toFixed(2)} s; RSS ${MiB(r.before)} before, ${MiB(r.after)} after load (${(r.after / size).toFixed(2)}× checkpoint), `
      + `peak ${MiB(r.peak)} (${(r.peak / size).toFixed(2)}×); after one forward ${MiB(r.after_forward)} (${(r.after_forward / size).toFixed(2)}×, forward ${r.forward_s.toFixed(2)} s)`,
    );
  }
  console.log(`load average after: ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
  if (!args.includes("--keep")) rmSync(dir, { recursive: true, force: true });
}

await main();
