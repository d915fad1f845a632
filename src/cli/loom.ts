#!/usr/bin/env bun
/**
 * `loom`, the command line (package.json `bin`):
 *
 *   loom tune --ops softmax,rms_norm,gelu --shape 4096,1024   # ops on one shape
 *   loom tune --model gpt2                                     # every plan of a LoRA training step
 *   loom tune ... --dry-run                                    # enumerate and count only
 *   loom kernels                                               # the kernel database's records
 *
 * `tune` compiles the workload's lazy graphs fused (patterns and fusion on) and unfused, walks
 * every execution path of every instruction (each catalog implementation that applies, and the
 * cross-device paths of a webgpu plan: copy to the host, run natively, copy back), measures the
 * paths the kernel database lacks (time, and error against a float64 reference), writes the
 * records and prints one row per path, with the implementation the planner now picks at the
 * current tolerance marked. Whole-plan timings (fused vs unfused) follow.
 */
import { Command } from "commander";
import { Bench } from "tinybench";
import * as loom from "../index.ts";
import { nativeBackend } from "../backends/native/backend.ts";
import { DEFAULT_TOLERANCE, type Tolerance } from "../backends/catalog.ts";
import { backendFor, set_default_backend } from "../lazy/device.ts";
import { clear_plan_cache, cachedPlans } from "../scheduler/compile.ts";
import { kernelDbPath, readRecords } from "../scheduler/kernel_db.ts";
import { candidates } from "../scheduler/select.ts";
import { executionPaths, tune, type ExecutionPath, type TuneRow } from "../scheduler/tune.ts";
import type { CompiledPlan } from "../scheduler/plan.ts";
import type { Backend } from "../backends/backend.ts";

type L = loom.LazyTensor;

/** Moves a new tensor to the tuned device (`.to("webgpu")` for --device webgpu). */
let place = (t: loom.Tensor): loom.Tensor => t;
const P = (t: loom.Tensor): L => place(t).lazy();
const operands = new Map<string, loom.Tensor>();
/** A workload's second operand, made once per name and shape (so timed calls do not create it). */
const A = (name: string, shape: readonly number[], make: () => loom.Tensor): L => {
  const k = `${name}:${shape.join("x")}`;
  let t = operands.get(k);
  if (!t) operands.set(k, (t = place(make())));
  return t.lazy();
};

/** The op workloads `--ops` knows: each builds a lazy graph over inputs of `shape` ([rows, n]). */
const OP_WORKLOADS: Record<string, (x: L, shape: number[]) => L> = {
  softmax: (x) => x.softmax(-1),
  log_softmax: (x) => x.log_softmax(-1),
  rms_norm: (x, s) => loom.rms_norm(x, [s.at(-1)!], A("w", [s.at(-1)!], () => loom.ones(s.at(-1)!)), 1e-5),
  layer_norm: (x, s) => loom.layer_norm(x, [s.at(-1)!], A("w", [s.at(-1)!], () => loom.ones(s.at(-1)!)), A("b", [s.at(-1)!], () => loom.zeros(s.at(-1)!))),
  gelu: (x, s) => x.mul(A("a", s, () => loom.randn(s))).add(A("b", s, () => loom.randn(s))).gelu(),
  gelu_tanh: (x) => x.gelu("tanh"),
  silu: (x) => x.silu(),
  exp: (x) => x.exp(),
  tanh: (x) => x.tanh(),
  sum: (x) => x.sum(-1),
  matmul: (x, s) => x.matmul(A("w", [s.at(-1)!, s.at(-1)!], () => loom.randn([s.at(-1)!, s.at(-1)!]))),
  cross_entropy: (x, s) => loom.cross_entropy(x, A("target", [s[0]!], () => loom.zeros([s[0]!], { dtype: "int64" }))),
};

/** Plans compiled while `fn` runs (the plan cache is cleared first, so all of them are new). */
function plansOf(fn: () => void): CompiledPlan[] {
  clear_plan_cache();
  fn();
  return cachedPlans();
}

/** Plans of a LoRA training step of a GPT-2 written as users write it (lazy modules, backward, AdamW). */
function modelPlans(o: { vocab: number; embd: number; layers: number; heads: number; ctx: number; batch: number }): CompiledPlan[] {
  loom.manual_seed(0);
  const config = new loom.models.GPT2Config({ vocab_size: o.vocab, n_embd: o.embd, n_layer: o.layers, n_head: o.heads, n_positions: o.ctx, resid_pdrop: 0, embd_pdrop: 0, attn_pdrop: 0 });
  const model = new loom.models.GPT2LMHeadModel(config);
  if (place(loom.zeros(1)).device !== "cpu") model.to(place(loom.zeros(1)).device);
  loom.lora.get_peft_model(model, new loom.lora.LoraConfig({ r: 8, lora_alpha: 16, target_modules: ["attn.c_attn", "attn.c_proj"], fan_in_fan_out: true }));
  const opt = new loom.optim.AdamW(model.parameters().filter((p) => p.requires_grad), { lr: 1e-3 });
  const x = place(loom.randint(0, o.vocab, [o.batch, o.ctx])), y = place(loom.randint(0, o.vocab, [o.batch, o.ctx]));
  return plansOf(() => {
    const { loss } = model.call(x, { targets: y }) as { loss: loom.Tensor };
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss.item();
  });
}

function opPlans(names: readonly string[], shape: number[]): CompiledPlan[] {
  const plans: CompiledPlan[] = [];
  for (const name of names) {
    const f = OP_WORKLOADS[name];
    if (!f) throw new loom.LoomValueError(`[loom tune] unknown op workload '${name}'; known: ${Object.keys(OP_WORKLOADS).join(", ")}`);
    for (const fused of [true, false]) {
      loom.with_compiler_options({ patterns: fused, fuse: fused }, () => {
        plans.push(...plansOf(() => { f(P(loom.randn(shape)), shape).eval(); }));
      });
    }
  }
  return plans;
}

function parseTolerance(s: string | undefined): Tolerance {
  if (!s || s === "default") return DEFAULT_TOLERANCE;
  if (s === "exact") return "exact";
  const [atol, rtol] = s.split(",").map(Number);
  if (!(atol! >= 0 && rtol! >= 0)) throw new loom.LoomValueError(`[loom tune] --tolerance expects exact, default or ATOL,RTOL; got '${s}'`);
  return { atol: atol!, rtol: rtol! };
}

const fmt = (v: number) => (v === 0 ? "0" : v < 1e-3 || v >= 1e4 ? v.toExponential(2) : v.toPrecision(3));

function printRows(rows: readonly TuneRow[], paths: readonly ExecutionPath[], backend: Backend, tol: Tolerance): void {
  const chosen = new Map<string, string>();
  for (const p of paths) if (!chosen.has(p.signature) && p.kind === "impl") chosen.set(p.signature, candidates(backend, p.app, tol)[0]?.id ?? "");
  console.log("| signature | implementation | contract | median ms | min ms | max abs err | max rel err | within contract | chosen |");
  console.log("|---|---|---|---:|---:|---:|---:|---|---|");
  rows.forEach((r) => {
    const c = r.contract.kind === "exact" ? "exact" : `atol ${fmt(r.contract.atol)}, rtol ${fmt(r.contract.rtol)}`;
    const sig = r.signature.length > 70 ? r.signature.slice(0, 67) + "..." : r.signature;
    console.log(`| ${sig} | ${r.impl}${r.fresh ? "" : " (db)"} | ${c} | ${fmt(r.median_ms)} | ${fmt(r.min_ms)} | ${fmt(r.max_abs_err)} | ${fmt(r.max_rel_err)} | ${r.within_contract ? "yes" : "NO"} | ${chosen.get(r.signature) === r.impl ? "←" : ""} |`);
  });
}

/** End-to-end time of each op workload's plan, fused vs unfused (a realize, waited for). */
function planTimings(names: readonly string[], shape: number[], b: Backend): void {
  console.log("\n| workload | fused ms | unfused ms |");
  console.log("|---|---:|---:|");
  for (const name of names) {
    const x = place(loom.randn(shape));
    const t = (fused: boolean) => loom.with_compiler_options({ patterns: fused, fuse: fused }, () => {
      const bench = new Bench({ time: 200, iterations: 10, warmupIterations: 2, warmupTime: 0, throws: true });
      bench.add(name, () => {
        OP_WORKLOADS[name]!(x.lazy(), shape).eval();
        (b as { synchronize?: () => void }).synchronize?.();
      });
      bench.runSync();
      return (bench.tasks[0]!.result as { latency: { p50: number } }).latency.p50;
    });
    console.log(`| ${name} | ${fmt(t(true))} | ${fmt(t(false))} |`);
  }
}

const program = new Command().name("loom").description("Loom's command line");

program.command("tune")
  .description("enumerate every execution path of some ops or of a model's training step, measure the unmeasured ones, write the kernel database")
  .option("--ops <list>", `op workloads, comma-separated (${Object.keys(OP_WORKLOADS).join(", ")})`)
  .option("--shape <dims>", "input shape for --ops", "4096,1024")
  .option("--model <name>", "gpt2: the plans of one LoRA training step (W7u's model unless sized by the options below)")
  .option("--vocab <n>", "gpt2 vocabulary", "96").option("--embd <n>", "gpt2 n_embd", "384").option("--layers <n>", "gpt2 n_layer", "6")
  .option("--heads <n>", "gpt2 n_head", "6").option("--ctx <n>", "gpt2 context and sequence length", "128").option("--batch <n>", "gpt2 batch", "16")
  .option("--device <name>", "native, js or webgpu", "native")
  .option("--tolerance <t>", "exact, default, or ATOL,RTOL: which implementation the table marks as chosen", "default")
  .option("--time <ms>", "minimum timed milliseconds per path", "200")
  .option("--force", "re-measure paths already in the database")
  .option("--dry-run", "enumerate and count the paths only")
  .action(async (o) => {
    let host: Backend | null = null;
    if (o.device === "webgpu") {
      const s = await loom.init_webgpu();
      if (!s.available) throw new Error(`--device webgpu: ${s.reason}`);
      host = nativeBackend();
      place = (t) => t.to("webgpu");
    } else set_default_backend(o.device);
    const backend = backendFor(o.device === "webgpu" ? "webgpu" : "cpu");
    const tol = parseTolerance(o.tolerance);
    const shape = String(o.shape).split(",").map(Number);
    const names = o.ops ? String(o.ops).split(",") : [];
    if (!names.length && !o.model) throw new loom.LoomValueError("[loom tune] give --ops or --model");
    const plans = [
      ...(names.length ? opPlans(names, shape) : []),
      ...(o.model === "gpt2" ? modelPlans({ vocab: +o.vocab, embd: +o.embd, layers: +o.layers, heads: +o.heads, ctx: +o.ctx, batch: +o.batch }) : []),
    ];
    if (o.model && o.model !== "gpt2") throw new loom.LoomValueError(`[loom tune] unknown --model '${o.model}' (gpt2)`);
    const paths: ExecutionPath[] = [];
    for (const p of executionPaths(plans, backend, host)) paths.push(p);
    console.log(`${plans.length} plans, ${plans.reduce((s, p) => s + p.instructions.length, 0)} instructions, ${paths.length} execution paths on ${backend.name}; database ${kernelDbPath() || "(off)"}`);
    if (o.dryRun) {
      for (const p of paths) console.log(`  ${p.kind} ${p.impl} ${p.signature}`);
      return;
    }
    const rows = tune(paths, { timeMs: +o.time, force: !!o.force, onPath: (p, i) => process.stderr.write(`\r[loom tune] ${i + 1}/${paths.length} ${p.impl}`.padEnd(100).slice(0, 100)) });
    process.stderr.write("\n");
    printRows(rows, paths, backend, tol);
    if (names.length) planTimings(names, shape, backend);
  });

program.command("kernels")
  .description("list the kernel database's records")
  .option("--device <name>", "only this device")
  .action((o) => {
    const recs = readRecords(o.device);
    console.log(`${recs.length} records in ${kernelDbPath() || "(database off)"}`);
    for (const r of recs) console.log(`${r.device}\t${r.impl}\t${fmt(r.median_ms)} ms\terr ${fmt(r.max_abs_err)}/${fmt(r.max_rel_err)}\t${r.within_contract ? "ok" : "OUT OF CONTRACT"}\t${r.signature}`);
  });

await program.parseAsync();
