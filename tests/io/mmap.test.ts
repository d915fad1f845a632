/**
 * Private file mappings (src/io/mmap.ts): libc's mmap through bun:ffi maps a descriptor opened
 * read-only, writes stay private (the file is unchanged), the finalizer unmaps, and a file the
 * process may read but not write is still loaded zero-copy (Bun.mmap alone opens O_RDWR and fails).
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, closeSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { load_file, save_file } from "../../src/io/index.ts";
import { map_fd_private } from "../../src/io/mmap.ts";
import { srcPath, tempDir } from "./helpers.ts";

const linux = process.platform === "linux";

describe.if(linux)("map_fd_private", () => {
  test("maps a read-only descriptor; writes are private copies; the file keeps its bytes", () => {
    const path = join(tempDir(), "bytes.bin");
    const content = Uint8Array.from({ length: 10000 }, (_, i) => (i * 7) & 255);
    writeFileSync(path, content);
    const fd = openSync(path, "r");
    const m = map_fd_private(fd, content.length)!;
    closeSync(fd); // the mapping outlives the descriptor
    expect(m).not.toBeNull();
    expect(m.length).toBe(content.length);
    expect(Array.from(m)).toEqual(Array.from(content));
    m[0] = 200;
    m[9999] = 1;
    expect([m[0], m[9999]]).toEqual([200, 1]);
    expect(Array.from(readFileSync(path))).toEqual(Array.from(content));
  });

  test("dropped mappings are unmapped by the buffer's finalizer", async () => {
    const path = join(tempDir(), "finalized.bin");
    writeFileSync(path, new Uint8Array(1 << 20));
    const mapped = () => readFileSync("/proc/self/maps", "utf8").split("\n").filter((l) => l.endsWith(path)).length;
    (() => {
      const fd = openSync(path, "r");
      for (let i = 0; i < 20; i++) expect(map_fd_private(fd, 1 << 20)![i]).toBe(0);
      closeSync(fd);
    })();
    for (let i = 0; i < 5 && mapped() > 0; i++) {
      Bun.gc(true);
      await Bun.sleep(5);
    }
    expect(mapped()).toBe(0);
  });
});

// Needs a user who may read but not write the file: run as root, drop to nobody with setpriv.
const canDrop = linux && process.getuid?.() === 0 && Bun.which("setpriv") !== null;
test.if(canDrop)("a file this process may not write still loads as views on a private mapping", () => {
  const dir = tempDir();
  chmodSync(dir, 0o755);
  const path = join(dir, "w.safetensors");
  save_file({ w: { dtype: "float32", shape: [4, 256], data: Float32Array.from({ length: 1024 }, (_, i) => i / 4) } }, path);
  chmodSync(path, 0o644); // owned by root: nobody may read it, not write it
  const before = readFileSync(path);
  const code = `
    import { readFileSync, statSync } from "node:fs";
    import { load_file } from "${srcPath("io/index.ts")}";
    const t = load_file(${JSON.stringify(path)}).tensors.get("w");
    // views the whole file's buffer, and that file is mapped (a plain read would pass the first check only)
    const viewsFile = t.data.buffer.byteLength === statSync(${JSON.stringify(path)}).size
      && readFileSync("/proc/self/maps", "utf8").split("\\n").some((l) => l.endsWith(${JSON.stringify(path)}));
    t.data[3] = -1;
    console.log(JSON.stringify({ viewsFile, v: [t.data[2], t.data[3]] }));`;
  const r = Bun.spawnSync({ cmd: ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "-e", code], stdout: "pipe", stderr: "pipe" });
  expect(r.stderr.toString()).toBe("");
  expect(JSON.parse(r.stdout.toString())).toEqual({ viewsFile: true, v: [0.5, -1] });
  expect(readFileSync(path).equals(before)).toBe(true);
  // as the owner, the same file loads on Bun.mmap's mapping
  expect(load_file(path).tensors.get("w")!.data.buffer.byteLength).toBe(before.length);
});
