#!/usr/bin/env bun
/**
 * The browser test (CI: `npm run test:browser`): the demo page (examples/browser/) in a real
 * headless Chromium on WebGPU. It
 *   1. writes a small char GPT checkpoint and a LoRA adapter in the main job's format
 *      (config.json, model.safetensors, vocab.json; adapter_config.json, adapter_model.safetensors),
 *   2. bundles the page with Bun's bundler (`--target browser`) and serves it with Bun.serve,
 *   3. runs the very same demo code in Bun (native backend) for the reference logits and tokens,
 *   4. opens the page in `chromium --headless` with WebGPU on (no GPU here: Chromium's own
 *      SwiftShader Vulkan), which POSTs its result back: the logits of a fixed input must match
 *      Bun's within float32 tolerance, the text must be generated and tokens/s reported.
 * Without chromium it prints why and skips (fails when LOOM_REQUIRE_BROWSER=1).
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, normalize } from "node:path";
import * as loom from "../../src/index.ts";
import { buildDemo } from "../../examples/browser/build.ts";
import { generate, loadModel, logitsOf } from "../../examples/browser/demo.ts";
import { writeDemoCheckpoint } from "./checkpoint.ts";

const REQUIRE = process.env.LOOM_REQUIRE_BROWSER === "1";
const TOKENS = 24;
const PROMPT = "Anna\n";

function findChromium(): string | null {
  for (const name of [process.env.CHROMIUM, "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]) {
    if (!name) continue;
    const p = Bun.which(name);
    if (p) return p;
  }
  return null;
}

const chromium = findChromium();
if (!chromium) {
  const msg = "[skip] browser test: no chromium on PATH (Debian: apt-get install chromium; or set CHROMIUM)";
  if (REQUIRE) throw new Error(`LOOM_REQUIRE_BROWSER=1 but ${msg}`);
  console.log(msg);
  process.exit(0);
}

const work = mkdtempSync(join(tmpdir(), "loom-browser-"));
let browser: ReturnType<typeof Bun.spawn> | null = null;
let server: ReturnType<typeof Bun.serve> | null = null;
try {
  // ---- 1. a checkpoint and an adapter, as the main job writes them --------------------------
  const config = writeDemoCheckpoint(loom, work);

  // ---- 2. the bundle, served -----------------------------------------------------------------
  const t0 = performance.now();
  const bundle = await buildDemo(join(work, "site"));
  const bundleMs = performance.now() - t0;
  let resolveResult!: (v: Record<string, unknown>) => void;
  const result = new Promise<Record<string, unknown>>((r) => { resolveResult = r; });
  server = Bun.serve({
    port: 0,
    async fetch(req) {
      const path = decodeURIComponent(new URL(req.url).pathname);
      if (req.method === "POST" && path === "/result") {
        resolveResult(await req.json() as Record<string, unknown>);
        return new Response("ok");
      }
      const file = path === "/" ? join(work, "site", "index.html") : join(work, normalize(path.startsWith("/files/") ? path.slice(7) : `site/${path.slice(1)}`));
      if (!file.startsWith(work) || !existsSync(file)) return new Response("not found", { status: 404 });
      return new Response(Bun.file(file));
    },
  });
  const origin = `http://127.0.0.1:${server.port}`;

  // ---- 3. the reference: the same demo code in Bun, on the native backend ---------------------
  const ref = await loadModel(`${origin}/files/model/`, `${origin}/files/adapter/`, false);
  const promptIds = ref.tokenizer!.encode(PROMPT);
  const refLogits = await logitsOf(ref, promptIds);
  const refGen = await generate(ref, promptIds, TOKENS);

  // ---- 4. Chromium -----------------------------------------------------------------------------
  const url = `${origin}/?model=/files/model/&adapter=/files/adapter/&tokens=${TOKENS}&prompt=${encodeURIComponent(PROMPT)}&report=/result`;
  const flags = [
    "--headless=new", "--no-sandbox", "--disable-gpu-sandbox", "--no-first-run", "--disable-dev-shm-usage", `--user-data-dir=${join(work, "profile")}`,
    // WebGPU without a GPU: Chromium's bundled SwiftShader (software Vulkan)
    "--enable-unsafe-webgpu", "--enable-features=Vulkan", "--use-webgpu-adapter=swiftshader",
  ];
  const t1 = performance.now();
  browser = Bun.spawn([chromium, ...flags, url], { stdout: "ignore", stderr: "pipe" });
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<Record<string, unknown>>((r) => { timer = setTimeout(() => r({ ok: false, error: "timed out after 120 s waiting for the page's result" }), 120_000); });
  const got = await Promise.race([result, timeout]);
  clearTimeout(timer);
  const pageMs = performance.now() - t1;

  const fails: string[] = [];
  if (!got.ok) fails.push(`the page failed: ${got.error}`);
  else {
    const logits = got.logits as number[];
    let maxDiff = 0;
    for (let i = 0; i < refLogits.length; i++) maxDiff = Math.max(maxDiff, Math.abs(logits[i]! - refLogits[i]!));
    const scale = Math.max(...Array.from(refLogits, Math.abs));
    console.log(`page: ${got.description}`);
    console.log(`generated: ${JSON.stringify(got.text)} (${(got.tokensPerSecond as number).toFixed(1)} tokens/s in the tab; Bun ${ref.description}: ${refGen.tokensPerSecond.toFixed(1)} tokens/s)`);
    console.log(`logits of ${JSON.stringify(PROMPT)} [${promptIds.length} × ${config.vocab_size}]: max |chromium − bun| = ${maxDiff.toExponential(2)} (max |logit| ${scale.toFixed(2)})`);
    if (got.device !== "webgpu") fails.push(`the page did not get WebGPU: ${got.description}`);
    if (logits.length !== refLogits.length) fails.push(`logits length ${logits.length} != ${refLogits.length}`);
    // float32 on both sides, different summation orders: a few ulps of the largest logit
    if (!(maxDiff <= 1e-4 * Math.max(1, scale))) fails.push(`logits differ from Bun's by ${maxDiff}`);
    const ids = got.ids as number[];
    if (ids.length !== TOKENS) fails.push(`${ids.length} tokens generated, expected ${TOKENS}`);
    const same = ids.filter((v, i) => v === refGen.ids[i]).length;
    console.log(`greedy tokens equal to Bun's: ${same}/${TOKENS}`);
    if (ids[0] !== refGen.ids[0]) fails.push(`first greedy token ${ids[0]} != Bun's ${refGen.ids[0]}`);
    if (!((got.tokensPerSecond as number) > 0)) fails.push("no tokens/s reported");
  }
  console.log(`bundle ${(readFileSync(bundle).length / 1e6).toFixed(2)} MB in ${bundleMs.toFixed(0)} ms; page ran in ${(pageMs / 1000).toFixed(1)} s`);
  if (fails.length) {
    console.error(`FAIL browser test:\n  ${fails.join("\n  ")}`);
    process.exitCode = 1;
  } else console.log("ok   the demo page generates on WebGPU in headless Chromium, and its logits match Bun's");
} finally {
  browser?.kill();
  await browser?.exited;
  server?.stop(true);
  rmSync(work, { recursive: true, force: true });
}
