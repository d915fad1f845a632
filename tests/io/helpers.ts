/** Byte-level builders for safetensors tests, independent of src/io's writer. */
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, renameSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A file from a header (object or raw JSON text) and a data buffer, with an optional raw N. */
export function build(header: unknown, data: ArrayLike<number> = [], n?: bigint): Uint8Array {
  const text = typeof header === "string" ? header : JSON.stringify(header);
  const json = new TextEncoder().encode(text);
  const out = new Uint8Array(8 + json.length + data.length);
  new DataView(out.buffer).setBigUint64(0, n ?? BigInt(json.length), true);
  out.set(json, 8);
  out.set(Array.from(data), 8 + json.length);
  return out;
}

/** Little-endian bytes of float32 values. */
export function f32Bytes(values: number[]): number[] {
  return Array.from(new Uint8Array(new Float32Array(values).buffer));
}

/** Little-endian bytes of int64 values (exact, via BigInt). */
export function i64Bytes(values: bigint[]): number[] {
  return Array.from(new Uint8Array(new BigInt64Array(values).buffer));
}

export function tempDir(prefix = "loom-io-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export { thrown } from "../thrown.ts";

/**
 * A Hugging Face hub cache (huggingface_hub file_download.py) holding the files `write` puts in
 * the folder it is given: every file of the revision is a relative symlink
 * snapshots/<rev>/<name> -> ../../blobs/<sha256 of the content>.
 * @returns the snapshot directory and the models--* folder (real paths: messages name real paths)
 */
export function hubCache(write: (staging: string) => void): { snapshot: string; repo: string } {
  const repo = join(realpathSync(tempDir("loom-hub-")), "models--org--tiny");
  const snapshot = join(repo, "snapshots", "0123abcd");
  mkdirSync(join(repo, "blobs"), { recursive: true });
  mkdirSync(snapshot, { recursive: true });
  const staging = tempDir();
  write(staging);
  for (const name of readdirSync(staging)) {
    const sha = createHash("sha256").update(readFileSync(join(staging, name))).digest("hex");
    renameSync(join(staging, name), join(repo, "blobs", sha));
    symlinkSync(join("..", "..", "blobs", sha), join(snapshot, name));
  }
  return { snapshot, repo };
}

/**
 * Runs `code` (a module body; import with absolute paths, see srcPath) in a fresh bun process,
 * for calls that could block forever, such as opening a FIFO: a hang then fails the test after
 * `timeout_ms` instead of hanging the whole run.
 * @returns the child's stdout, trimmed
 */
export function runIsolated(code: string, timeout_ms = 20_000): string {
  const r = Bun.spawnSync({ cmd: [process.execPath, "-e", code], timeout: timeout_ms, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) {
    throw new Error(`child process ${r.exitCode === null ? `killed (${r.signalCode}) after ${timeout_ms} ms: it hung` : `exited with ${r.exitCode}`}\n${r.stderr.toString()}`);
  }
  return r.stdout.toString().trim();
}

/** Absolute path of a file under src/, for runIsolated's imports. */
export function srcPath(rel: string): string {
  return join(import.meta.dir, "../../src", rel);
}

/**
 * Module-body text that runs each probe and prints `[[label, error name, message], ...]` as JSON
 * ("none" and "" when a probe does not throw). `probes` is `label: "expression"` pairs.
 */
export function probeScript(imports: string, probes: Readonly<Record<string, string>>): string {
  const calls = Object.entries(probes).map(([label, expr]) =>
    `try { ${expr}; out.push([${JSON.stringify(label)}, "none", ""]); } catch (e) { out.push([${JSON.stringify(label)}, e.name, e.message]); }`);
  return `${imports}\nconst out = [];\n${calls.join("\n")}\nconsole.log(JSON.stringify(out));\n`;
}
