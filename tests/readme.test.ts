/**
 * Every TypeScript snippet of README.md is a file under examples/readme/ that runs here. Each
 * ```ts block follows a marker `<!-- example: examples/readme/NAME.ts -->` and must equal that
 * file, except for the import path: the README imports "./src/index.ts" (from the repository
 * root), the file "../../src/index.ts" (from its folder).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { pretrain } from "../examples/pretrain_char_gpt.ts";
import { WEBGPU } from "./backends.ts";
import { tmp } from "./models/helpers.ts";

const ROOT = resolve(import.meta.dir, "..");
const MARKER = /^<!-- example: (examples\/readme\/[\w.-]+\.ts) -->$/;

/** The README's ```ts blocks with the file named by the marker line just above each (null: none). */
function readmeBlocks(): { file: string | null; code: string; line: number }[] {
  const lines = readFileSync(join(ROOT, "README.md"), "utf8").split("\n");
  const blocks: { file: string | null; code: string; line: number }[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== "```ts") continue;
    const end = lines.indexOf("```", i + 1);
    if (end < 0) throw new Error(`README.md:${i + 1}: unclosed code block`);
    const m = MARKER.exec(lines[i - 1] ?? "");
    blocks.push({ file: m ? m[1]! : null, code: lines.slice(i + 1, end).join("\n") + "\n", line: i + 1 });
    i = end;
  }
  return blocks;
}

/** The snippet as the README shows it. */
function asInReadme(file: string): string {
  return readFileSync(join(ROOT, file), "utf8").replaceAll('"../../src/index.ts"', '"./src/index.ts"');
}

/** Run a snippet file with bun in `cwd`; its output, or a thrown error with its stderr. */
function run(file: string, cwd = ROOT): string {
  const p = Bun.spawnSync([process.execPath, join(ROOT, file)], { cwd, env: process.env, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`${file} exited with ${p.exitCode}:\n${p.stderr.toString()}`);
  return p.stdout.toString();
}

describe("README snippets", () => {
  test("every ts block has a marker and equals its file; every file is in the README", () => {
    const blocks = readmeBlocks();
    expect(blocks.length).toBeGreaterThanOrEqual(3);
    for (const b of blocks) {
      if (!b.file) throw new Error(`README.md:${b.line}: a ts block without an <!-- example: examples/readme/NAME.ts --> line above it`);
      expect(existsSync(join(ROOT, b.file))).toBe(true);
      expect({ file: b.file, code: b.code }).toEqual({ file: b.file, code: asInReadme(b.file) });
    }
    const files = readdirSync(join(ROOT, "examples/readme")).filter((f) => f.endsWith(".ts")).map((f) => `examples/readme/${f}`);
    expect(files.sort()).toEqual(blocks.map((b) => b.file!).sort());
  });

  test("quickstart runs and prints the pending graph", () => {
    expect(run("examples/readme/quickstart.ts")).toContain("digraph loom {");
  });

  test("LoRA: the training loop runs on a (tiny) pretrained checkpoint and saves a PEFT adapter", () => {
    const dir = tmp("readme-lora");
    pretrain({ steps: 4, batch_size: 4, block_size: 16, n_embd: 16, n_layer: 1, n_head: 2, eval_every: 4, eval_batches: 1, out: join(dir, "checkpoints/char-gpt"), verbose: false });
    run("examples/readme/lora.ts", dir);
    for (const f of ["adapter_model.safetensors", "adapter_config.json"]) expect(existsSync(join(dir, "out/adapter", f))).toBe(true);
    rmSync(dir, { recursive: true });
  }, 30_000);

  test.skipIf(!WEBGPU)("WebGPU snippet runs (skipped without a webgpu adapter)", () => {
    const out = run("examples/readme/webgpu.ts");
    expect(out).toMatch(/^Float(32|64)Array\(4096\) \[ /); // softmax(x xᵀ): [64, 64], read back as a typed array
  }, 60_000);
});
