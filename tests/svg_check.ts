/**
 * A minimal structural check of a loss-curve SVG written by examples/plot.ts (Vega's SVG
 * renderer): one root <svg> element, and per series one line-mark <path> whose aria-label names
 * the series and whose path data has one vertex per point.
 */
import { expect } from "bun:test";

/** Vertices of an SVG path's "d" made of M/L commands (what Vega writes for a linear line). */
function vertices(d: string): number {
  return (d.match(/[ML]/g) ?? []).length;
}

/**
 * @param svg - the document
 * @param series - the legend names expected, one line each
 * @param points - the number of points of each series, in the same order
 */
export function check_loss_svg(svg: string, series: string[], points: number[]): void {
  const doc = svg.trim();
  expect(doc.startsWith("<svg ")).toBe(true);
  expect(doc.endsWith("</svg>")).toBe(true);
  expect(doc.match(/<svg[ >]/g)!.length).toBe(1);
  expect(doc).toContain('xmlns="http://www.w3.org/2000/svg"');
  const lines = [...doc.matchAll(/<path aria-label="([^"]*)"[^>]*aria-roledescription="line mark"[^>]*\sd="([^"]*)"/g)];
  expect(lines.length).toBe(series.length);
  series.forEach((name, i) => {
    const line = lines.find((m) => m[1]!.endsWith(`series: ${name}`));
    expect(line).toBeDefined();
    expect(vertices(line![2]!)).toBe(points[i]!);
  });
}
