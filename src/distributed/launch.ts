/**
 * Start a script on N ranks with Open MPI's mpirun, as users would type it, plus what this
 * machine needs: `--oversubscribe` when N exceeds the cores, and as root Open MPI's consent
 * variables (OMPI_ALLOW_RUN_AS_ROOT, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM; the containers here run as
 * root), so users do not pass `--allow-run-as-root` themselves.
 *
 *   bun src/distributed/launch.ts -np 2 examples/lora_finetune.ts --ddp
 *   (= mpirun -np 2 bun examples/lora_finetune.ts --ddp, with the flags above)
 */
import { spawn, spawnSync, type SpawnSyncReturns } from "node:child_process";
import { cpus } from "node:os"; // not availableParallelism: the browser build's node:os polyfill lacks it
import { LoomValueError } from "../tensor/errors.ts";

export interface LaunchOptions {
  /** Extra environment for every rank (added to this process's). */
  env?: Record<string, string>;
  /** Kill mpirun after this many milliseconds (tests). */
  timeout_ms?: number;
  /** Extra mpirun arguments (e.g. ["--bind-to", "none"]). */
  mpirun_args?: string[];
}

/** Whether mpirun is on PATH. */
export function has_mpirun(): boolean {
  return spawnSync("mpirun", ["--version"], { stdio: "ignore" }).status === 0;
}

/** The mpirun argv and environment that run `bun script args` on `np` ranks. */
export function mpirun_command(np: number, script: string, args: readonly string[] = [], opts: LaunchOptions = {}): { argv: string[]; env: Record<string, string> } {
  if (!(Number.isInteger(np) && np >= 1)) throw new LoomValueError(`[launch] -np must be a positive integer, got ${np}`);
  const env: Record<string, string> = { ...(process.env as Record<string, string>), ...opts.env };
  if (process.getuid?.() === 0) {
    env.OMPI_ALLOW_RUN_AS_ROOT = "1";
    env.OMPI_ALLOW_RUN_AS_ROOT_CONFIRM = "1";
  }
  const argv = ["mpirun", "-np", String(np)];
  if (np > cpus().length) argv.push("--oversubscribe");
  argv.push(...(opts.mpirun_args ?? []), process.execPath, script, ...args);
  return { argv, env };
}

/** Run to completion; stdout/stderr captured (tests). */
export function launch(np: number, script: string, args: readonly string[] = [], opts: LaunchOptions = {}): SpawnSyncReturns<string> {
  const { argv, env } = mpirun_command(np, script, args, opts);
  return spawnSync(argv[0]!, argv.slice(1), { env, encoding: "utf8", timeout: opts.timeout_ms, killSignal: "SIGKILL" });
}

if (import.meta.main) {
  const a = process.argv.slice(2);
  const i = a.indexOf("-np");
  if (i < 0 || !a[i + 1] || !a[i + 2]) {
    console.error("usage: bun src/distributed/launch.ts -np N script.ts [args...]");
    process.exit(2);
  }
  const np = Number(a[i + 1]);
  const { argv, env } = mpirun_command(np, a[i + 2]!, a.slice(i + 3));
  const child = spawn(argv[0]!, argv.slice(1), { env, stdio: "inherit" });
  child.on("exit", (code, sig) => process.exit(code ?? (sig ? 128 : 1)));
}
