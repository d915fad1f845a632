/**
 * Files of an untrusted checkpoint: a FIFO or a directory where a safetensors file or an index
 * should be is refused with a LoomFormatError naming the path (never a hang on open(), never a
 * bare EISDIR), and the Hugging Face cache layout (snapshots/<rev>/ links into ../../blobs/)
 * loads while links escaping the models--* folder are still refused.
 */
import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, ShardedCheckpoint, type TensorLike, load_file, load_sharded,
  read_header_file, safe_open, save_file, save_sharded,
} from "../../src/io/index.ts";
import { LoomFormatError } from "../../src/tensor/errors.ts";
import { hubCache, probeScript, runIsolated, srcPath, tempDir, thrown } from "./helpers.ts";

// 6 float32 tensors of 100 bytes (25 elements), element j of tensor i is i*100 + j.
function model(): Map<string, TensorLike> {
  const m = new Map<string, TensorLike>();
  for (let i = 0; i < 6; i++) m.set(`h.${i}.weight`, { dtype: "float32", shape: [5, 5], data: new Float32Array(25).map((_, j) => i * 100 + j) });
  return m;
}

function expectModel(loaded: Map<string, { data: ArrayLike<number> }>): void {
  expect([...loaded.keys()]).toEqual([...model().keys()]);
  for (const [k, t] of model()) expect(Array.from(loaded.get(k)!.data)).toEqual(Array.from(t.data));
}

function expectFormatError(fn: () => unknown, message: string): void {
  const e = thrown(fn);
  expect(e).toBeInstanceOf(LoomFormatError);
  expect(e.message).toBe(message);
}

const notRegular = (path: string, what: string, kind: string) => `[safetensors] ${path}: ${what}: is ${kind}, expected a regular file`;

describe("a FIFO or a directory named as a checkpoint file", () => {
  test("FIFOs are refused without blocking: load_file, read_header_file, safe_open, single file, index, shard", () => {
    const single = tempDir();
    execFileSync("mkfifo", [join(single, SAFE_WEIGHTS_NAME)]);
    const indexed = tempDir();
    execFileSync("mkfifo", [join(indexed, SAFE_WEIGHTS_INDEX_NAME)]);
    const sharded = tempDir();
    writeFileSync(join(sharded, SAFE_WEIGHTS_INDEX_NAME), JSON.stringify({ weight_map: { a: "a.safetensors" } }));
    execFileSync("mkfifo", [join(sharded, "a.safetensors")]);
    const fifo = join(single, SAFE_WEIGHTS_NAME);

    // In a child process: on a FIFO, open(2) without O_NONBLOCK waits for a writer forever.
    const out = runIsolated(probeScript(`import * as io from ${JSON.stringify(srcPath("io/index.ts"))};`, {
      load_file: `io.load_file(${JSON.stringify(fifo)})`,
      read_header_file: `io.read_header_file(${JSON.stringify(fifo)})`,
      safe_open: `io.safe_open(${JSON.stringify(fifo)})`,
      single: `io.load_sharded(${JSON.stringify(single)})`,
      index: `io.ShardedCheckpoint.open(${JSON.stringify(indexed)})`,
      shard: `io.ShardedCheckpoint.open(${JSON.stringify(sharded)}).get_tensor("a")`,
      verify: `io.ShardedCheckpoint.open(${JSON.stringify(sharded)}).verify()`,
    }));
    const kind = "a FIFO (named pipe)";
    expect(JSON.parse(out)).toEqual([
      ["load_file", "LoomFormatError", notRegular(fifo, "file", kind)],
      ["read_header_file", "LoomFormatError", notRegular(fifo, "file", kind)],
      ["safe_open", "LoomFormatError", notRegular(fifo, "file", kind)],
      ["single", "LoomFormatError", notRegular(fifo, "file", kind)],
      ["index", "LoomFormatError", notRegular(join(indexed, SAFE_WEIGHTS_INDEX_NAME), "index", kind)],
      ["shard", "LoomFormatError", notRegular(join(sharded, "a.safetensors"), "file", kind)],
      ["verify", "LoomFormatError", notRegular(join(sharded, "a.safetensors"), "file", kind)],
    ]);
  }, 60_000); // the child process may be slow to start on a loaded machine; it is killed after 20 s

  test("directories are refused with the path and what it is, not a bare EISDIR", () => {
    const single = tempDir();
    const dirFile = join(single, SAFE_WEIGHTS_NAME);
    mkdirSync(dirFile);
    for (const fn of [() => load_file(dirFile), () => read_header_file(dirFile), () => safe_open(dirFile), () => load_sharded(single)]) {
      expectFormatError(fn, notRegular(dirFile, "file", "a directory"));
    }
    const indexed = tempDir();
    mkdirSync(join(indexed, SAFE_WEIGHTS_INDEX_NAME));
    expectFormatError(() => ShardedCheckpoint.open(indexed), notRegular(join(indexed, SAFE_WEIGHTS_INDEX_NAME), "index", "a directory"));
    const sharded = tempDir();
    writeFileSync(join(sharded, SAFE_WEIGHTS_INDEX_NAME), JSON.stringify({ weight_map: { a: "a.safetensors" } }));
    mkdirSync(join(sharded, "a.safetensors"));
    const ckpt = ShardedCheckpoint.open(sharded);
    expectFormatError(() => ckpt.get_tensor("a"), notRegular(join(sharded, "a.safetensors"), "file", "a directory"));
    expectFormatError(() => ckpt.verify(), notRegular(join(sharded, "a.safetensors"), "file", "a directory"));
  });
});


describe("Hugging Face cache layout", () => {
  test("a single model.safetensors linked into ../../blobs/ loads", () => {
    const { snapshot } = hubCache((d) => save_sharded(model(), d));
    expectModel(load_sharded(snapshot));
    expectModel(load_sharded(join(snapshot, SAFE_WEIGHTS_NAME)));
  });

  test("an index and its shards linked into ../../blobs/ load; verify() passes", () => {
    const { snapshot } = hubCache((d) => save_sharded(model(), d, { max_shard_size: 200 }));
    expect(readdirSync(snapshot).length).toBe(4); // index + 3 shards
    const ckpt = ShardedCheckpoint.open(snapshot);
    ckpt.verify();
    expectModel(load_sharded(snapshot));
  });

  test("a link escaping the models--* folder is still refused", () => {
    const { snapshot, repo } = hubCache((d) => save_sharded(model(), d, { max_shard_size: 200 }));
    const outside = realpathSync(tempDir());
    save_file(new Map([...model()].slice(2, 4)), join(outside, "evil.safetensors"));
    const shard = "model-00002-of-00003.safetensors";
    execFileSync("ln", ["-sfn", join(outside, "evil.safetensors"), join(snapshot, shard)]);
    const ckpt = ShardedCheckpoint.open(snapshot);
    const msg = `[safetensors] ${join(snapshot, SAFE_WEIGHTS_INDEX_NAME)}: shard "${shard}": resolves to ${join(outside, "evil.safetensors")}, outside the Hugging Face cache folder ${repo}`;
    expectFormatError(() => ckpt.get_tensor("h.2.weight"), msg);
    expectFormatError(() => ckpt.verify(), msg);

    // a single file linking out of the cache, and an index doing so, are refused the same way
    const single = hubCache((d) => save_sharded(model(), d));
    execFileSync("ln", ["-sfn", join(outside, "evil.safetensors"), join(single.snapshot, SAFE_WEIGHTS_NAME)]);
    expectFormatError(() => load_sharded(single.snapshot),
      `[safetensors] ${join(single.snapshot, SAFE_WEIGHTS_NAME)}: file: resolves to ${join(outside, "evil.safetensors")}, outside the Hugging Face cache folder ${single.repo}`);
  });

  test("outside a snapshot, links into a blobs/ folder escape the checkpoint directory as before", () => {
    const { repo } = hubCache((d) => save_sharded(model(), d));
    const other = join(repo, "not-a-snapshot");
    mkdirSync(other);
    const blob = readdirSync(join(repo, "blobs"))[0]!;
    symlinkSync(join("..", "blobs", blob), join(other, SAFE_WEIGHTS_NAME));
    expectFormatError(() => load_sharded(other),
      `[safetensors] ${join(other, SAFE_WEIGHTS_NAME)}: file: resolves to ${join(repo, "blobs", blob)}, outside the checkpoint directory ${other}`);
  });

  test("a link whose blob is missing (an incomplete download) is named as such", () => {
    const { snapshot } = hubCache(() => {});
    symlinkSync(join("..", "..", "blobs", "0".repeat(64)), join(snapshot, SAFE_WEIGHTS_NAME));
    expectFormatError(() => load_sharded(snapshot),
      `[safetensors] ${join(snapshot, SAFE_WEIGHTS_NAME)}: file: is a symbolic link whose target does not exist (an incomplete download?)`);
  });
});
