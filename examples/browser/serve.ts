#!/usr/bin/env bun
/**
 * Serve the browser demo: bundles it (build.ts) and serves the page at http://localhost:8000/
 * (PORT to change), with the main job's checkpoints under /checkpoints/ (npm start writes
 * checkpoints/char-gpt and checkpoints/char-gpt-lora-names). Open the page in a browser with
 * WebGPU (Chrome/Edge; Firefox/Safari recent versions); without it the demo runs on the CPU.
 */
import { existsSync } from "node:fs";
import { join, normalize, resolve } from "node:path";
import { buildDemo } from "./build.ts";

const ROOT = resolve(import.meta.dir, "../..");
const site = join(import.meta.dir, "dist");
await buildDemo(site);
const server = Bun.serve({
  port: Number(process.env.PORT ?? 8000),
  fetch(req) {
    const path = normalize(decodeURIComponent(new URL(req.url).pathname));
    const file = path === "/" ? join(site, "index.html") : path.startsWith("/checkpoints/") ? join(ROOT, path) : join(site, path);
    if (!(file.startsWith(site) || file.startsWith(join(ROOT, "checkpoints"))) || !existsSync(file)) return new Response("not found", { status: 404 });
    return new Response(Bun.file(file));
  },
});
console.log(`Loom browser demo: http://localhost:${server.port}/ (checkpoints from ${join(ROOT, "checkpoints")}${existsSync(join(ROOT, "checkpoints", "char-gpt")) ? "" : ": none yet, run npm start first"})`);
