/**
 * The browser demo page's entry (bundled by build.ts with `bun build --target browser`; served
 * by serve.ts). Query parameters: model (default /checkpoints/char-gpt/, what the main job
 * writes), adapter (default /checkpoints/char-gpt-lora-names/, "none" for the base model),
 * prompt, tokens (default 64),
 * device ("webgpu" default, or "cpu"), report (a URL: the result is POSTed there as JSON, for
 * tests/browser/run.ts).
 */
import { generate, loadModel, logitsOf } from "./demo.ts";

const q = new URLSearchParams(location.search);
const $ = (id: string) => document.getElementById(id)!;
const status = (s: string) => { $("status").textContent = s; };

async function main(): Promise<void> {
  const modelUrl = q.get("model") ?? "/checkpoints/char-gpt/";
  const adapterParam = q.get("adapter") ?? "/checkpoints/char-gpt-lora-names/";
  const adapterUrl = adapterParam === "none" ? null : adapterParam;
  const n = Number(q.get("tokens") ?? 64);
  status(`loading ${modelUrl}${adapterUrl ? ` + ${adapterUrl}` : ""}...`);
  const m = await loadModel(modelUrl, adapterUrl, q.get("device") !== "cpu");
  $("device").textContent = m.description;
  const tok = m.tokenizer;
  const prompt = q.get("prompt") ?? "\n";
  const promptIds = tok ? tok.encode(prompt, { unknown: "skip" }) : [0];
  // the logits of the prompt, for comparison with Bun's (tests/browser/run.ts)
  const logits = await logitsOf(m, promptIds);
  status("generating...");
  const out = $("out");
  out.textContent = prompt;
  const g = await generate(m, promptIds, n, (id) => { out.textContent += tok ? tok.decode([id]) : ` ${id}`; });
  $("speed").textContent = `${g.ids.length} tokens in ${g.seconds.toFixed(2)} s: ${g.tokensPerSecond.toFixed(1)} tokens/s`;
  status("done");
  const report = q.get("report");
  if (report) {
    await fetch(report, {
      method: "POST",
      body: JSON.stringify({ ok: true, device: m.device, description: m.description, promptIds, logits: [...logits], ids: g.ids, text: out.textContent, tokensPerSecond: g.tokensPerSecond }),
    });
  }
}

main().catch(async (e: Error) => {
  status(`error: ${e.message}`);
  const report = q.get("report");
  if (report) await fetch(report, { method: "POST", body: JSON.stringify({ ok: false, error: `${e.name}: ${e.message}\n${e.stack ?? ""}` }) });
});
