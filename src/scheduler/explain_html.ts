/**
 * `CompiledPlan.explain_html()`: the plan as one self-contained HTML page (inline CSS and SVG, no
 * scripts, nothing fetched), for reading a plan in a browser instead of `explain()`'s text:
 * - the instruction list, fused kernels marked with the ops they fuse (the op's `describe`);
 * - the buffer table: every slot's kind, shape, dtype, bytes and, for workspace buffers, the
 *   byte offset and the lifetime (defining instruction to last use) the memory plan gave it;
 * - the memory timeline: an SVG with instructions along x and workspace bytes along y, one bar
 *   per workspace buffer from its def to its last use at its offset, so reuse is visible as
 *   bars stacked at the same height one after another (in-place writes hatched).
 * Every name that comes from the graph (op names, describe text, dtypes) is HTML-escaped.
 */
import { fmtShape } from "../tensor/errors.ts";
import { denseBytes, shortHash, type Arg, type CompiledPlan, type Slot } from "./plan.ts";

/** Escape text for HTML element content and double-quoted attributes. */
export function escape_html(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

function fmtBytes(b: number): string {
  if (b < 1024) return `${b} B`;
  if (b < 1 << 20) return `${(b / 1024).toFixed(1)} KiB`;
  return `${(b / (1 << 20)).toFixed(2)} MiB`;
}

/** Slot names as explain() writes them: in<k> (leaf), dest<k>, out<slot>, ws<slot>. */
function slotNamer(plan: CompiledPlan): (s: number) => string {
  return (s) => {
    const sl = plan.slots[s]!;
    if (sl.kind === "dest") return `dest${plan.destSlots.indexOf(s)}`;
    return sl.kind === "leaf" ? `in${plan.leafSlots.indexOf(s)}` : sl.kind === "own" ? `out${s}` : `ws${s}`;
  };
}

/** Fill colours per slot kind (the buffer table's badges and the timeline's bars). */
const KIND_COLOR: Record<Slot["kind"], string> = { leaf: "#9ecae1", own: "#a1d99b", ws: "#fdae6b", dest: "#bcbddc" };

const STYLE = `
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, monospace; font-size: 12.5px; }
tr.fused td.op { font-weight: 600; } .group { color: #555; font-family: ui-monospace, monospace; font-size: 12px; }
.kind { padding: 0 6px; border-radius: 3px; font-size: 12px; }
.summary td { border: none; padding: 1px 12px 1px 0; }
`;

/** The instruction table's rows. */
function instructionRows(plan: CompiledPlan, name: (s: number) => string): string {
  const argText = (a: Arg) => `${name(a.slot)}${a.view ? fmtShape(a.view.shape) : ""}`;
  return plan.instructions.map((I, i) => {
    const group = I.op.describe?.(I.attrs as never) ?? "";
    const out = plan.slots[I.out]!;
    const fused = I.op.name.startsWith("fused_");
    const flags = [I.inplace ? "in-place" : "", I.impl ? `impl ${I.impl}` : ""].filter(Boolean).join(", ");
    return `<tr id="i${i}" class="${fused ? "fused" : ""}"><td class="num">#${i}</td><td class="op"><code>${escape_html(I.op.name)}</code>` +
      `${group ? `<div class="group">${escape_html(group)}</div>` : ""}</td>` +
      `<td class="mono">${escape_html(I.args.map(argText).join(", "))}</td>` +
      `<td class="mono">${escape_html(name(I.out))}${out.kind === "ws" ? ` @${out.offset}` : ""}</td>` +
      `<td class="mono">${escape_html(fmtShape(I.shape))}</td><td>${escape_html(I.dtype)}</td>` +
      `<td class="num">${fmtBytes(out.bytes)}</td><td>${escape_html(flags)}</td></tr>`;
  }).join("\n");
}

/** The buffer table's rows: every slot, with the memory plan's offset and lifetime for ws slots. */
function bufferRows(plan: CompiledPlan, name: (s: number) => string): string {
  const wsIndex = new Map<number, number>();
  plan.slots.forEach((s, i) => { if (s.kind === "ws") wsIndex.set(i, wsIndex.size); });
  return plan.slots.map((s, i) => {
    const k = wsIndex.get(i);
    const t = k === undefined ? undefined : plan.transients[k];
    const life = t ? `#${t.def} – #${t.last}${t.inplaceOf !== null ? " (in place)" : ""}` : "";
    return `<tr><td class="mono">${escape_html(name(i))}</td><td><span class="kind" style="background:${KIND_COLOR[s.kind]}">${s.kind}</span></td>` +
      `<td class="mono">${escape_html(fmtShape(s.shape))}</td><td>${escape_html(s.dtype)}</td>` +
      `<td class="num">${s.kind === "leaf" || s.kind === "dest" ? `${fmtBytes(denseBytes(s.shape, s.dtype))}, bound per run` : fmtBytes(s.bytes)}</td>` +
      `<td class="num">${s.kind === "ws" ? s.offset : ""}</td><td>${life}</td></tr>`;
  }).join("\n");
}

/**
 * The memory timeline as inline SVG: x = instruction index (one column each), y = workspace
 * offset (bytes, 0 at the top); one <rect class="transient"> per workspace buffer.
 */
export function memory_timeline_svg(plan: CompiledPlan): string {
  const n = Math.max(plan.instructions.length, 1);
  const peak = Math.max(plan.memory.peak, 1);
  const W = Math.min(1000, Math.max(360, n * 28)), H = 260, left = 70, top = 10, bottom = 30;
  const cw = W / n, yScale = H / peak;
  const name = slotNamer(plan);
  const ws = plan.slots.map((s, i) => [s, i] as const).filter(([s]) => s.kind === "ws");
  const bars = plan.transients.map((t, k) => {
    const [slot, si] = ws[k]!;
    const x = left + t.def * cw, w = (t.last - t.def + 1) * cw;
    const y = top + slot.offset * yScale, h = Math.max(slot.bytes * yScale, 1);
    const label = `${name(si)} ${fmtShape(slot.shape)} ${slot.dtype} ${fmtBytes(slot.bytes)} @${slot.offset}, #${t.def}–#${t.last}${t.inplaceOf !== null ? ", in place" : ""}`;
    const text = w > 40 && h > 12 ? `<text x="${(x + 4).toFixed(1)}" y="${(y + Math.min(h, 24) / 2 + 4).toFixed(1)}" font-size="11">${escape_html(name(si))}</text>` : "";
    return `<g><title>${escape_html(label)}</title><rect class="transient" x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" ` +
      `fill="${t.inplaceOf !== null ? "url(#hatch)" : KIND_COLOR.ws}" stroke="#c4661f" stroke-width="0.8"/>${text}</g>`;
  }).join("\n");
  const ticks = Array.from({ length: n }, (_, i) => i).filter((i) => n <= 40 || i % Math.ceil(n / 40) === 0)
    .map((i) => `<text x="${(left + (i + 0.5) * cw).toFixed(1)}" y="${top + H + 16}" font-size="10" text-anchor="middle">${i}</text>`).join("");
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${left + W + 10}" height="${top + H + bottom}" font-family="sans-serif">` +
    `<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
    `<rect width="6" height="6" fill="${KIND_COLOR.ws}"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c4661f" stroke-width="2"/></pattern></defs>` +
    `<rect x="${left}" y="${top}" width="${W}" height="${H}" fill="#fafafa" stroke="#ccc"/>` +
    `<text x="${left - 6}" y="${top + 10}" font-size="10" text-anchor="end">0</text>` +
    `<text x="${left - 6}" y="${top + H}" font-size="10" text-anchor="end">${escape_html(fmtBytes(plan.memory.peak))}</text>` +
    `<text x="12" y="${top + H / 2}" font-size="11" transform="rotate(-90 12 ${top + H / 2})" text-anchor="middle">workspace offset</text>` +
    `${ticks}<text x="${left + W / 2}" y="${top + H + 28}" font-size="11" text-anchor="middle">instruction</text>\n${bars}</svg>`;
}

/**
 * A CompiledPlan as a self-contained HTML page: summary, instructions (fused groups),
 * buffers (kind, shape, dtype, bytes, workspace offset, lifetime) and the memory timeline.
 * @param plan - a compiled plan (`lazy.plan()`, or `compile_plan([...])`)
 * @param title - page title (default: "CompiledPlan <hash>")
 * @returns an HTML5 document as a string; write it to a .html file and open it in a browser
 */
export function explain_html(plan: CompiledPlan, title?: string): string {
  const name = slotNamer(plan);
  const m = plan.memory;
  const heading = title ?? `CompiledPlan ${shortHash(plan.key)}`;
  const sy = plan.symbolic;
  const summary: [string, string][] = [
    ["device", plan.device],
    ["kernels", `${plan.kernelCount} (${plan.unfusedKernels} without patterns and fusion)`],
    ["workspace", `${fmtBytes(plan.workspaceBytes)} (naive ${fmtBytes(m.naive)}, live bound ${fmtBytes(m.liveBound)})${plan.planned ? "" : "; not used: this backend allocates per kernel"}`],
    ["outputs", `${plan.outputs.map((a) => name(a.slot)).join(", ")} (${fmtBytes(plan.outputBytes)})`],
    ["inputs", `${plan.leafSlots.filter((s) => s >= 0).length} leaves, bound by reference per run`],
  ];
  if (plan.destSlots.length) summary.push(["assigns", `${plan.destSlots.length} destination buffers written in place, after every read of their old values`]);
  if (sy) summary.push(["symbolic", `${sy.name} = ${sy.value}; one template for ${sy.name} in [${sy.lo}, ${sy.hi}] (workspace planned at ${sy.hi})`]);
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>${escape_html(heading)}</title><style>${STYLE}</style></head>
<body>
<h1>${escape_html(heading)}</h1>
<table class="summary">${summary.map(([k, v]) => `<tr><td>${k}</td><td>${escape_html(v)}</td></tr>`).join("")}</table>
<h2>Instructions</h2>
<table class="instructions"><thead><tr><th>#</th><th>kernel (fused ops)</th><th>inputs</th><th>output</th><th>shape</th><th>dtype</th><th>bytes</th><th></th></tr></thead>
<tbody>
${instructionRows(plan, name)}
</tbody></table>
<h2>Buffers</h2>
<p>leaf: an input bound per run (in&lt;k&gt;); own: an output or kept value, fresh per run; ws: a transient in the shared workspace at a fixed offset; dest: a persistent buffer written in place.</p>
<table class="buffers"><thead><tr><th>buffer</th><th>kind</th><th>shape</th><th>dtype</th><th>bytes</th><th>workspace offset</th><th>lifetime</th></tr></thead>
<tbody>
${bufferRows(plan, name)}
</tbody></table>
<h2>Memory timeline</h2>
<p>One bar per workspace buffer, from the instruction that writes it to the last one that reads it, at its byte offset (hover for details; hatched: written in place over a dying input).</p>
${plan.transients.length ? memory_timeline_svg(plan) : "<p>No workspace buffers: every value is an input or an output.</p>"}
</body></html>
`;
}
