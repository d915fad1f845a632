import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LoomFormatError, LoomValueError } from "../../src/tensor/errors.ts";
import {
  SAFE_WEIGHTS_INDEX_NAME, SAFE_WEIGHTS_NAME, ShardedCheckpoint, type TensorLike, load_file, load_sharded,
  open_sharded, parse_size_to_int, save_file, save_sharded, split_state_dict_into_shards,
} from "../../src/io/index.ts";
import { tempDir, thrown } from "./helpers.ts";

// 6 float32 tensors of 100 bytes each (25 elements), values tagged by tensor index.
function model(): Map<string, TensorLike> {
  const m = new Map<string, TensorLike>();
  for (let i = 0; i < 6; i++) {
    m.set(`h.${i}.weight`, { dtype: "float32", shape: [5, 5], data: new Float32Array(25).map((_, j) => i * 100 + j) });
  }
  return m;
}

function expectFormatError(fn: () => unknown, ...fragments: string[]): void {
  const e = thrown(fn);
  expect(e).toBeInstanceOf(LoomFormatError);
  for (const f of fragments) expect(e.message).toContain(f);
}

describe("split_state_dict_into_shards", () => {
  const sized = (sizes: number[]) =>
    new Map(sizes.map((s, i) => [`t${i}`, { dtype: "uint8", shape: [s], data: new Uint8Array(s) } as TensorLike]));

  test("greedy in key order (the huggingface_hub docstring example: [6,6,2,6,2,2] at 10)", () => {
    const split = split_state_dict_into_shards(sized([6, 6, 2, 6, 2, 2]), { max_shard_size: 10 });
    expect([...split.filename_to_tensors.values()]).toEqual([["t0"], ["t1", "t2"], ["t3", "t4", "t5"]]);
    expect([...split.filename_to_tensors.keys()]).toEqual([
      "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
    ]);
    expect(split.metadata.total_size).toBe(24);
    expect(split.is_sharded).toBe(true);
  });

  test("a tensor larger than the limit gets its own shard", () => {
    const split = split_state_dict_into_shards(sized([3, 20, 3, 3]), { max_shard_size: 8 });
    expect([...split.filename_to_tensors.values()]).toEqual([["t1"], ["t0", "t2"], ["t3"]]);
  });

  test("one shard is model.safetensors; an empty dict is one empty shard", () => {
    const one = split_state_dict_into_shards(sized([3, 3]), { max_shard_size: "1KB" });
    expect([...one.filename_to_tensors.keys()]).toEqual([SAFE_WEIGHTS_NAME]);
    expect(one.is_sharded).toBe(false);
    expect([...split_state_dict_into_shards(new Map()).filename_to_tensors]).toEqual([[SAFE_WEIGHTS_NAME, []]]);
  });

  test("filename_pattern must contain {suffix}", () => {
    expect(thrown(() => split_state_dict_into_shards(sized([1]), { filename_pattern: "x.safetensors" }))).toBeInstanceOf(LoomValueError);
  });

  test("parse_size_to_int", () => {
    expect(parse_size_to_int("5GB")).toBe(5_000_000_000);
    expect(parse_size_to_int("200MB")).toBe(200_000_000);
    expect(parse_size_to_int("2GiB")).toBe(2 * 2 ** 30);
    expect(parse_size_to_int("1.5kb")).toBe(1500);
    expect(parse_size_to_int("64")).toBe(64);
    expect(parse_size_to_int(1234)).toBe(1234);
    for (const bad of ["5 parsecs", "GB", "-1MB", "0"]) expect(thrown(() => parse_size_to_int(bad))).toBeInstanceOf(LoomValueError);
  });
});

describe("save_sharded + ShardedCheckpoint", () => {
  test("3 shards round trip, index in the Hugging Face layout", () => {
    const dir = tempDir();
    const m = model();
    const split = save_sharded(m, dir, { max_shard_size: 200, metadata: { note: "loom" } });
    expect(split.filename_to_tensors.size).toBe(3);
    expect(readdirSync(dir).sort()).toEqual([
      "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors",
      SAFE_WEIGHTS_INDEX_NAME,
    ]);

    const index = JSON.parse(readFileSync(join(dir, SAFE_WEIGHTS_INDEX_NAME), "utf8"));
    expect(index.metadata).toEqual({ total_size: 600, note: "loom" });
    expect(Object.keys(index.weight_map)).toEqual([...m.keys()].sort());
    expect(index.weight_map["h.2.weight"]).toBe("model-00002-of-00003.safetensors");
    expect(load_file(join(dir, "model-00001-of-00003.safetensors")).metadata).toEqual({ format: "pt", note: "loom" });

    const ckpt = ShardedCheckpoint.open(dir);
    expect(ckpt.keys().sort()).toEqual([...m.keys()].sort());
    expect(ckpt.shard_files()).toEqual([...split.filename_to_tensors.keys()]);
    expect(ckpt.tensors_in("model-00003-of-00003.safetensors")).toEqual(["h.4.weight", "h.5.weight"]);
    expect(ckpt.metadata).toEqual({ total_size: 600, note: "loom" });
    ckpt.verify();
    // Random access across shards.
    for (const name of ["h.5.weight", "h.0.weight", "h.1.weight"]) {
      const t = ckpt.get_tensor(name);
      expect(t.shape).toEqual([5, 5]);
      expect(Array.from(t.data)).toEqual(Array.from(m.get(name)!.data));
    }
    ckpt.close();

    const loaded = load_sharded(dir);
    expect([...loaded.keys()]).toEqual(ckpt.keys());
    for (const [name, t] of m) expect(Array.from(loaded.get(name)!.data)).toEqual(Array.from(t.data));
  });

  test("shards() visits one shard at a time, each with its own tensors", () => {
    const dir = tempDir();
    save_sharded(model(), dir, { max_shard_size: 200 });
    const ckpt = open_sharded(join(dir, SAFE_WEIGHTS_INDEX_NAME));
    const seen: [string, string[]][] = [];
    for (const [shard, tensors] of ckpt.shards()) seen.push([shard, [...tensors.keys()]]);
    expect(seen).toEqual([
      ["model-00001-of-00003.safetensors", ["h.0.weight", "h.1.weight"]],
      ["model-00002-of-00003.safetensors", ["h.2.weight", "h.3.weight"]],
      ["model-00003-of-00003.safetensors", ["h.4.weight", "h.5.weight"]],
    ]);
  });

  test("a checkpoint that fits one shard is a single model.safetensors, no index; stale index removed", () => {
    const dir = tempDir();
    save_sharded(model(), dir, { max_shard_size: 200 });
    save_sharded(model(), dir); // default 5GB: one shard
    expect(readdirSync(dir)).toEqual([SAFE_WEIGHTS_NAME]);
    const ckpt = ShardedCheckpoint.open(dir);
    expect(ckpt.shard_files()).toEqual([SAFE_WEIGHTS_NAME]);
    expect(ckpt.metadata).toEqual({ format: "pt" });
    expect(Array.from(ckpt.get_tensor("h.3.weight").data.subarray(0, 2))).toEqual([300, 301]);
    expect(load_sharded(join(dir, SAFE_WEIGHTS_NAME)).size).toBe(6);
  });

  test("a directory with neither file", () => {
    expectFormatError(() => ShardedCheckpoint.open(tempDir()), `no ${SAFE_WEIGHTS_INDEX_NAME} or ${SAFE_WEIGHTS_NAME}`);
  });
});

describe("untrusted index", () => {
  function withIndex(index: unknown): string {
    const dir = tempDir();
    save_sharded(model(), dir, { max_shard_size: 200 });
    writeFileSync(join(dir, SAFE_WEIGHTS_INDEX_NAME), typeof index === "string" ? index : JSON.stringify(index));
    return dir;
  }

  test.each([
    ["../evil.safetensors"],
    ["/etc/passwd"],
    ["sub/../../evil.safetensors"],
    ["sub\\..\\evil.safetensors"],
    ["./model.safetensors"],
    ["C:evil.safetensors"],
    [""],
  ])("shard name %p escaping the directory is rejected at open", (shard) => {
    const dir = withIndex({ metadata: {}, weight_map: { "h.0.weight": shard } });
    expectFormatError(() => ShardedCheckpoint.open(dir), 'weight_map["h.0.weight"]', "escapes the checkpoint directory");
  });

  test("a symlinked shard pointing outside the directory is rejected when opened", () => {
    const outside = tempDir();
    save_file({ x: { dtype: "uint8", shape: [1], data: new Uint8Array([1]) } }, join(outside, "x.safetensors"));
    const dir = withIndex({ weight_map: { x: "link.safetensors" } });
    symlinkSync(join(outside, "x.safetensors"), join(dir, "link.safetensors"));
    const ckpt = ShardedCheckpoint.open(dir);
    expectFormatError(() => ckpt.get_tensor("x"), 'shard "link.safetensors"', "outside the checkpoint directory");
  });

  test("a tensor missing from the shard the index names", () => {
    const dir = tempDir();
    save_sharded(model(), dir, { max_shard_size: 200 });
    const path = join(dir, SAFE_WEIGHTS_INDEX_NAME);
    const index = JSON.parse(readFileSync(path, "utf8"));
    index.weight_map["h.5.weight"] = "model-00001-of-00003.safetensors"; // really in shard 3
    writeFileSync(path, JSON.stringify(index));
    const ckpt = ShardedCheckpoint.open(dir);
    const fragments = ['tensor "h.5.weight"', 'the index maps it to shard "model-00001-of-00003.safetensors", which does not contain it', path];
    expectFormatError(() => ckpt.get_tensor("h.5.weight"), ...fragments);
    expectFormatError(() => ckpt.get_tensor("h.0.weight"), ...fragments); // checked when the shard is opened
    expectFormatError(() => ckpt.verify(), ...fragments);
    expectFormatError(() => [...ckpt.shards()], ...fragments);
  });

  test("a missing shard file", () => {
    const dir = withIndex({ weight_map: { "h.0.weight": "model-00009-of-00009.safetensors" } });
    const ckpt = ShardedCheckpoint.open(dir);
    expectFormatError(() => ckpt.get_tensor("h.0.weight"), 'shard "model-00009-of-00009.safetensors"', "file not found", 'tensor "h.0.weight"');
  });

  test("malformed index files", () => {
    expectFormatError(() => ShardedCheckpoint.open(withIndex("{oops")), "index: is not valid UTF-8 JSON");
    expectFormatError(() => ShardedCheckpoint.open(withIndex("[]")), "must be a JSON object");
    expectFormatError(() => ShardedCheckpoint.open(withIndex({ metadata: {} })), '"weight_map" must be an object');
    expectFormatError(() => ShardedCheckpoint.open(withIndex({ weight_map: { a: 3 } })), 'weight_map["a"]: shard is number');
    expectFormatError(() => ShardedCheckpoint.open(withIndex({ metadata: 1, weight_map: {} })), '"metadata" must be an object');
  });

  test("a name the index does not have", () => {
    const dir = tempDir();
    save_sharded(model(), dir, { max_shard_size: 200 });
    const e = thrown(() => ShardedCheckpoint.open(dir).get_tensor("lm_head.weight"));
    expect(e).toBeInstanceOf(LoomValueError);
    expect(e.message).toContain('no tensor named "lm_head.weight"');
  });

  test("shards in a subdirectory are allowed", () => {
    const dir = tempDir();
    mkdirSync(join(dir, "shards"));
    save_file({ a: { dtype: "int32", shape: [1], data: new Int32Array([3]) } }, join(dir, "shards", "a.safetensors"));
    writeFileSync(join(dir, SAFE_WEIGHTS_INDEX_NAME), JSON.stringify({ weight_map: { a: "shards/a.safetensors" } }));
    expect(Array.from(load_sharded(dir).get("a")!.data)).toEqual([3]);
    expect(existsSync(join(dir, "shards", "a.safetensors"))).toBe(true);
  });
});
