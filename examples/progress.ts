/**
 * The progress bar every long loop of the examples uses: steps done, loss, throughput
 * (tokens/s, or another unit) and ETA.
 *
 * On a terminal it is a cli-progress bar redrawn on every tick (synchronously: the training
 * loops never yield to the event loop, so cli-progress's timer-driven redraw would never fire).
 * Piped or in CI (stdout is not a TTY) it prints a plain line at most every `plain_every_s`
 * seconds and one at the end, so logs stay readable: no carriage returns, no escape codes.
 */
import cliProgress from "cli-progress";

export interface ProgressOptions {
  /** Print anything at all (default true; the tests pass false). */
  enabled?: boolean;
  /** What the throughput counts, e.g. "tok" (tokens) or "samples" (default "tok"). */
  unit?: string;
  /** Seconds between plain lines when stdout is not a terminal (default 10). */
  plain_every_s?: number;
  /** Force terminal (true) or plain (false) output; default: process.stdout.isTTY. */
  tty?: boolean;
  /** Where to write (default process.stdout). */
  stream?: NodeJS.WriteStream;
}

/** Seconds as "42s", "3m05s" or "1h02m". */
export function format_eta(s: number): string {
  if (!Number.isFinite(s) || s < 0) return "-";
  const t = Math.round(s);
  if (t < 60) return `${t}s`;
  if (t < 3600) return `${Math.floor(t / 60)}m${String(t % 60).padStart(2, "0")}s`;
  return `${Math.floor(t / 3600)}h${String(Math.floor((t % 3600) / 60)).padStart(2, "0")}m`;
}

/** A progress bar on a terminal, throttled plain lines otherwise. */
export class Progress {
  private bar: cliProgress.SingleBar | null = null;
  private readonly enabled: boolean;
  private readonly tty: boolean;
  private readonly unit: string;
  private readonly plain_every_s: number;
  private readonly stream: NodeJS.WriteStream;
  private total = 0;
  private items = 0;
  private t0 = 0;
  private last_plain = 0;

  constructor(private readonly label: string, opts: ProgressOptions = {}) {
    this.enabled = opts.enabled ?? true;
    this.stream = opts.stream ?? process.stdout;
    this.tty = opts.tty ?? Boolean(this.stream.isTTY);
    this.unit = opts.unit ?? "tok";
    this.plain_every_s = opts.plain_every_s ?? 10;
  }

  /** Begin a loop of `total` steps. */
  start(total: number): void {
    this.total = total;
    this.items = 0;
    this.t0 = this.last_plain = performance.now();
    if (!this.enabled || !this.tty) return;
    this.bar = new cliProgress.SingleBar({
      format: `${this.label} |{bar}| {value}/{total} steps | loss {loss} | {rate} ${this.unit}/s | ETA {eta_formatted}`,
      barsize: 24, hideCursor: true, synchronousUpdate: true, etaBuffer: 20, stream: this.stream,
    }, cliProgress.Presets.shades_classic);
    this.bar.start(total, 0, { loss: "-", rate: "-" });
  }

  /** Step `step` (1-based) is done; it processed `items` tokens (or samples). */
  tick(step: number, loss: number, items: number): void {
    this.items += items;
    if (!this.enabled) return;
    const now = performance.now();
    const secs = (now - this.t0) / 1000;
    const rate = secs > 0 ? Math.round(this.items / secs) : 0;
    if (this.bar) {
      this.bar.update(step, { loss: loss.toFixed(4), rate: rate.toLocaleString("en-US") });
      return;
    }
    if (step < this.total && now - this.last_plain < this.plain_every_s * 1000) return;
    this.last_plain = now;
    const eta = step > 0 ? ((this.total - step) * secs) / step : NaN;
    const pct = this.total > 0 ? Math.floor((100 * step) / this.total) : 100;
    this.stream.write(`${this.label}: ${step}/${this.total} steps (${pct}%) | loss ${loss.toFixed(4)} | ${rate.toLocaleString("en-US")} ${this.unit}/s | ETA ${format_eta(eta)}\n`);
  }

  /** A line above the bar (or a plain line when there is no bar). */
  log(line: string): void {
    if (!this.enabled) return;
    if (this.bar) {
      this.stream.write(`\r\x1b[2K${line}\n`);
      this.bar.render();
    } else {
      this.stream.write(`${line}\n`);
    }
  }

  /** End the loop (leaves the finished bar on screen). */
  stop(): void {
    this.bar?.stop();
    this.bar = null;
  }
}
