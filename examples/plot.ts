/**
 * Loss curves as SVG: training loss per step (smoothed as the progress log smooths it) and
 * validation loss at each evaluation, drawn with Vega-Lite, rendered by Vega headlessly
 * (`renderer: "none"`: no DOM, no canvas, no native module).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

export interface LossCurveOptions {
  /** Title above the plot. */
  title?: string;
  /** Weight of the newest step in the train loss's exponential moving average (default 0.1, as in training.ts; 1: raw). */
  smoothing?: number;
  width?: number;
  height?: number;
}

/** One point of the plot: a loss at a step in one series. */
interface Point {
  step: number;
  loss: number;
  series: string;
}

/**
 * The Vega-Lite spec of a loss-curve plot.
 * @param train_losses - loss of steps 1..n
 * @param val_history - [step, validation loss] pairs (step 0: before training)
 * @throws Error if a loss is not finite (a NaN would silently vanish from the line)
 */
export function loss_curve_spec(train_losses: readonly number[], val_history: readonly (readonly [number, number])[], o: LossCurveOptions = {}): TopLevelSpec {
  const a = o.smoothing ?? 0.1;
  const values: Point[] = [];
  let ema = 0;
  train_losses.forEach((l, i) => {
    if (!Number.isFinite(l)) throw new Error(`loss_curve: train loss at step ${i + 1} is ${l}`);
    ema = i === 0 ? l : (1 - a) * ema + a * l;
    values.push({ step: i + 1, loss: ema, series: a === 1 ? "train" : "train (smoothed)" });
  });
  for (const [step, l] of val_history) {
    if (!Number.isFinite(l)) throw new Error(`loss_curve: validation loss at step ${step} is ${l}`);
    values.push({ step, loss: l, series: "validation" });
  }
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    ...(o.title ? { title: o.title } : {}),
    width: o.width ?? 480,
    height: o.height ?? 260,
    background: "white",
    data: { values },
    mark: { type: "line", point: false, strokeWidth: 2 },
    encoding: {
      x: { field: "step", type: "quantitative", title: "step" },
      y: { field: "loss", type: "quantitative", title: "cross-entropy loss (nats)", scale: { zero: false } },
      color: { field: "series", type: "nominal", title: null, legend: { orient: "top-right" } },
    },
  };
}

/** The loss-curve plot as an SVG document (see loss_curve_spec). */
export async function loss_curve_svg(train_losses: readonly number[], val_history: readonly (readonly [number, number])[], o: LossCurveOptions = {}): Promise<string> {
  const view = new vega.View(vega.parse(compile(loss_curve_spec(train_losses, val_history, o)).spec), { renderer: "none" });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Write the loss-curve SVG to `path` (creating its folder). */
export async function write_loss_curve(path: string, train_losses: readonly number[], val_history: readonly (readonly [number, number])[], o: LossCurveOptions = {}): Promise<void> {
  const svg = await loss_curve_svg(train_losses, val_history, o);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, svg);
}
