/**
 * The examples' pieces: the MLP example trains to the same losses eagerly and lazily; the
 * progress helper prints readable plain lines when stdout is not a terminal; the loss-curve
 * plot is a valid SVG with a line per series.
 */
import { expect, test } from "bun:test";
import { train } from "../examples/mlp_regression.ts";
import { loss_curve_svg } from "../examples/plot.ts";
import { format_eta, Progress } from "../examples/progress.ts";
import { with_compiler_options } from "../src/index.ts";
import { check_loss_svg } from "./svg_check.ts";

test("MLP regression: eager and lazy losses are identical and fall", () => {
  const eager = train("eager", 60);
  const lazy = with_compiler_options({ tolerance: "exact" }, () => train("lazy", 60)); // eager's bits
  expect(lazy).toEqual(eager);
  expect(eager.at(-1)!).toBeLessThan(eager[0]! * 0.5);
});

test("Progress without a terminal: throttled plain lines with rate and ETA, no escape codes", () => {
  const out: string[] = [];
  const stream = { write: (s: string) => out.push(s), isTTY: false } as unknown as NodeJS.WriteStream;
  const p = new Progress("train", { stream, unit: "tok", plain_every_s: 3600 });
  p.start(4);
  p.log("train: step 0/4  val loss 4.0000");
  for (let s = 1; s <= 4; s++) p.tick(s, 4 - s / 2, 512);
  p.stop();
  // the hour-long throttle leaves only the final line after the log line
  expect(out.length).toBe(2);
  expect(out[0]).toBe("train: step 0/4  val loss 4.0000\n");
  expect(out[1]).toMatch(/^train: 4\/4 steps \(100%\) \| loss 2\.0000 \| [\d,]+ tok\/s \| ETA 0s\n$/);
  expect(out.join("")).not.toMatch(/[\r\x1b]/);
  // disabled: silent
  const quiet: string[] = [];
  const q = new Progress("q", { enabled: false, stream: { write: (s: string) => quiet.push(s) } as unknown as NodeJS.WriteStream });
  q.start(2); q.tick(1, 1, 1); q.log("x"); q.stop();
  expect(quiet).toEqual([]);
});

test("format_eta: seconds, minutes, hours", () => {
  expect([format_eta(0), format_eta(59.4), format_eta(61), format_eta(3599), format_eta(3720), format_eta(NaN)]).toEqual(["0s", "59s", "1m01s", "59m59s", "1h02m", "-"]);
});

test("loss curve: an SVG with one line per series, one vertex per point; NaN losses refused", async () => {
  const train_losses = [4, 3.5, 3.1, 2.9, 2.8, 2.75];
  const svg = await loss_curve_svg(train_losses, [[0, 4.2], [3, 3.0], [6, 2.7]], { title: "a <title> & more" });
  check_loss_svg(svg, ["train (smoothed)", "validation"], [6, 3]);
  expect(svg).toContain("a &lt;title&gt; &amp; more");
  const raw = await loss_curve_svg(train_losses, [[0, 4.2]], { smoothing: 1 });
  check_loss_svg(raw, ["train", "validation"], [6, 1]);
  await expect(loss_curve_svg([1, NaN], [])).rejects.toThrow("train loss at step 2 is NaN");
});
