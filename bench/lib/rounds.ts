/**
 * The alternating-rounds harness of bench/rope.ts and bench/w12.ts: every round times each Loom
 * line once (the order reversed every other round, so drift and warm caches hit every line
 * alike), then asks the PyTorch reference server for its lines, so both run under the same load;
 * the tables give medians over the rounds. The reference is a python line-protocol server
 * (bench/lib/torch_server.py): one JSON line on start, then one JSON line per command.
 */
import { readFileSync } from "node:fs";
import { TORCH_ENV } from "./torch_ref.ts";

/** The 1, 5 and 15 minute load averages, as /proc/loadavg gives them. */
export const loadavg = (): string => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

/** PyTorch as a line-protocol server (a python script), so its calls interleave with Loom's. */
export class TorchServer {
  private proc: ReturnType<typeof spawnServer>;
  private reader: ReadableStreamDefaultReader<Uint8Array>;
  private buf = "";

  /** @param script - the server script's path; `tag` names the bench in errors */
  constructor(script: string, private readonly tag: string) {
    this.proc = spawnServer(script);
    this.reader = this.proc.stdout.getReader();
  }

  /** The next JSON line the server writes. @throws Error when the server exited */
  async line(): Promise<any> {
    for (;;) {
      const i = this.buf.indexOf("\n");
      if (i >= 0) {
        const l = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        return JSON.parse(l);
      }
      const { value, done } = await this.reader.read();
      if (done) throw new Error(`[${this.tag}] PyTorch reference exited`);
      this.buf += new TextDecoder().decode(value);
    }
  }

  /** Send one command line and return its JSON answer. */
  async ask(cmd: string): Promise<any> {
    this.proc.stdin.write(`${cmd}\n`);
    this.proc.stdin.flush();
    return this.line();
  }

  quit(): void { this.proc.stdin.write("quit\n"); this.proc.stdin.end(); }
}

function spawnServer(script: string) {
  return Bun.spawn(["/usr/bin/python3", script], {
    env: { ...process.env, ...TORCH_ENV }, stdin: "pipe", stdout: "pipe", stderr: "inherit",
  });
}

/** One timed line: `run` is called `iters` times per round (each call ends with its result read on the host). */
export interface RoundLine { name: string; iters: number; run: () => void }

/**
 * Times `lines` over `rounds` alternating rounds; after each round's Loom lines, `after(put)`
 * (the PyTorch server's lines) adds its own ms with `put(name, ms)`.
 * @returns ms per call for each line name, one entry per round, in first-timed order
 */
export async function alternatingRounds(lines: readonly RoundLine[], rounds: number,
  after?: (put: (name: string, ms: number) => void) => Promise<void>): Promise<Map<string, number[]>> {
  const times = new Map<string, number[]>();
  const put = (k: string, v: number) => {
    let l = times.get(k);
    if (!l) times.set(k, (l = []));
    l.push(v);
  };
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 ? [...lines].reverse() : lines;
    for (const { name, iters, run } of order) {
      const t0 = performance.now();
      for (let i = 0; i < iters; i++) run();
      put(name, (performance.now() - t0) / iters);
    }
    if (after) await after(put);
  }
  return times;
}
