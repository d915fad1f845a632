/**
 * Running a program to completion (the C compiler of the native backend and of generated kernels):
 * `Bun.spawnSync` under Bun, `Deno.Command(...).outputSync()` under Deno (`--allow-run`). Never
 * throws: a program that cannot be started reads as a failed run whose stderr says why.
 */
import { RUNTIME } from "./detect.ts";

/** The outcome of `spawnSync`. */
export interface SpawnResult {
  readonly success: boolean;
  /** Whether the program started (false: not found, not executable, no processes here; `stderr` says why). */
  readonly started: boolean;
  /** Exit status (-1 when it did not start or was killed by a signal). */
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

interface DenoCommand {
  new (cmd: string, opts: { args: string[]; stdout: "piped" | "null"; stderr: "piped" | "null" }): {
    outputSync(): { success: boolean; code: number; stdout: Uint8Array; stderr: Uint8Array };
  };
}

/**
 * Run `argv` and wait for it. `output: "ignore"` discards stdout and stderr (a probe).
 * In a browser (no processes) every run fails with the reason in `stderr`.
 */
export function spawnSync(argv: readonly string[], opts: { output?: "pipe" | "ignore" } = {}): SpawnResult {
  const io = opts.output ?? "pipe";
  const failed = (why: string): SpawnResult => ({ success: false, started: false, exitCode: -1, stdout: "", stderr: why });
  try {
    if (RUNTIME === "bun") {
      const r = Bun.spawnSync([...argv], { stdout: io, stderr: io });
      return { success: r.success, started: true, exitCode: r.exitCode ?? -1, stdout: r.stdout?.toString() ?? "", stderr: r.stderr?.toString() ?? "" };
    }
    if (RUNTIME === "deno") {
      const Command = (globalThis as unknown as { Deno: { Command: DenoCommand } }).Deno.Command;
      const mode = io === "pipe" ? "piped" : "null";
      const r = new Command(argv[0]!, { args: argv.slice(1), stdout: mode, stderr: mode }).outputSync();
      const dec = new TextDecoder();
      return { success: r.success, started: true, exitCode: r.code, stdout: io === "pipe" ? dec.decode(r.stdout) : "", stderr: io === "pipe" ? dec.decode(r.stderr) : "" };
    }
    return failed(`cannot run '${argv[0]}': ${RUNTIME === "browser" ? "a browser has no processes" : "spawnSync needs Bun or Deno"}`);
  } catch (e) {
    return failed(`cannot run '${argv[0]}': ${(e as Error).message}`);
  }
}
