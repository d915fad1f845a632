/**
 * CompiledPlan.explain_html(): a self-contained page with every instruction, the buffer table
 * and one timeline bar per workspace buffer placed at its offset and lifetime; text from the
 * graph and the title is HTML-escaped.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { escape_html, explain_html } from "../../src/scheduler/explain_html.ts";
import { planOf, useJs } from "./helpers.ts";

useJs();

/** matmul -> (gelu, +1, *2, softmax fused) -> column sum: 3 kernels, 2 workspace buffers. */
function smallPlan() {
  const g = new loom.Generator(3);
  const x = loom.randn([8, 16], { generator: g }).lazy(), w = loom.randn([32, 16], { generator: g }).lazy();
  const y = x.matmul(w.t()).gelu().add(1).mul(2).softmax(-1).sum(0);
  return planOf([y]);
}

/** The <rect class="transient"> elements of the page as numbers. */
function bars(html: string): { x: number; y: number; width: number; height: number }[] {
  return [...html.matchAll(/<rect class="transient" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"/g)]
    .map((m) => ({ x: +m[1]!, y: +m[2]!, width: +m[3]!, height: +m[4]! }));
}

describe("explain_html", () => {
  test("every instruction, every buffer, a rect per transient at its offset and lifetime", () => {
    const plan = smallPlan();
    const html = plan.explain_html();
    expect(html.startsWith("<!DOCTYPE html>")).toBe(true);
    expect(html.trimEnd().endsWith("</html>")).toBe(true);
    expect(html).not.toContain("<script"); // self-contained and inert
    expect(html).not.toMatch(/(src|href)="http/);
    // the instruction list: one row per instruction, in order, with its kernel name
    expect(plan.instructions.length).toBe(3);
    const rows = [...html.matchAll(/<tr id="i(\d+)"[^>]*>.*?<code>([^<]*)<\/code>/g)];
    expect(rows.map((r) => +r[1]!)).toEqual([0, 1, 2]);
    expect(rows.map((r) => r[2])).toEqual(plan.instructions.map((I) => I.op.name));
    expect(html).toContain("fused_softmax");
    expect(html).toContain("erf(t4)"); // the fused group's ops (gelu's erf) are listed
    // the buffer table: one row per slot; workspace buffers show their offsets
    const bufferRows = html.split('<table class="buffers">')[1]!.split("</table>")[0]!.match(/<tr><td class="mono">/g)!;
    expect(bufferRows.length).toBe(plan.slots.length);
    // the timeline: one bar per transient; y follows the offset, x the [def, last] interval
    expect(plan.transients.length).toBe(2);
    const b = bars(html);
    expect(b.length).toBe(plan.transients.length);
    const ws = plan.slots.filter((s) => s.kind === "ws");
    const cw = b[0]!.width / (plan.transients[0]!.last - plan.transients[0]!.def + 1);
    plan.transients.forEach((t, k) => {
      expect(b[k]!.width).toBeCloseTo((t.last - t.def + 1) * cw, 0);
      expect(b[k]!.x - b[0]!.x).toBeCloseTo((t.def - plan.transients[0]!.def) * cw, 0);
    });
    // ws2 at offset 0 and ws7 at offset 1024 (equal sizes, overlapping lifetimes): stacked
    expect(ws.map((s) => s.offset)).toEqual([0, 1024]);
    expect(b[1]!.y - b[0]!.y).toBeCloseTo(b[0]!.height, 0);
  });

  test("names are HTML-escaped: the title and the fused group's text", () => {
    const plan = smallPlan();
    const html = explain_html(plan, `<img src=x onerror="alert('&')">`);
    expect(html).toContain("<title>&lt;img src=x onerror=&quot;alert(&#39;&amp;&#39;)&quot;&gt;</title>");
    expect(html).not.toContain("<img");
    // describe() writes "-> t11": escaped in the page
    expect(html).toContain("-&gt; t11");
    expect(escape_html(`a<b>&"c"'`)).toBe("a&lt;b&gt;&amp;&quot;c&quot;&#39;");
  });

  test("a plan without workspace buffers says so instead of drawing an empty timeline", () => {
    const plan = planOf([loom.randn([4]).lazy().exp()]);
    expect(plan.transients.length).toBe(0);
    const html = plan.explain_html();
    expect(bars(html)).toEqual([]);
    expect(html).toContain("No workspace buffers");
  });
});
