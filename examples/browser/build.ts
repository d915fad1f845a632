#!/usr/bin/env bun
/**
 * Bundle the browser demo: examples/browser/main.ts -> examples/browser/dist/main.js with Bun's
 * bundler (`--target browser`), plus index.html beside it. The node: builtins Loom's file-based
 * code imports (node:fs, node:path, ...) become stubs that throw when called: in a tab the model
 * is fetched over HTTP, and the native backend is never loaded (no FFI: src/runtime/ffi.ts).
 *
 *   bun examples/browser/build.ts && bun examples/browser/serve.ts   # then open http://localhost:8000/
 */
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { nodeStubs } from "./node_stubs.ts";

/** Build the bundle into `outdir`; returns the path of main.js. @throws Error with the bundler's messages */
export async function buildDemo(outdir = join(import.meta.dir, "dist")): Promise<string> {
  mkdirSync(outdir, { recursive: true });
  const r = await Bun.build({ entrypoints: [join(import.meta.dir, "main.ts")], outdir, target: "browser", format: "esm", minify: false, plugins: [nodeStubs()] });
  if (!r.success) throw new Error(`bundling the browser demo failed:\n${r.logs.map(String).join("\n")}`);
  copyFileSync(join(import.meta.dir, "index.html"), join(outdir, "index.html"));
  return join(outdir, "main.js");
}

if (import.meta.main) console.log(`wrote ${await buildDemo()}`);
