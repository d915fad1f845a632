/**
 * Imports point down the layers of docs/ARCHITECTURE.md: a file in src/ imports only from its own
 * folder or from folders of a lower rank, and folders of the same rank do not import each other.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir, "../src");
const RANK: Record<string, number> = {
  tensor: 0, graph: 1, io: 1, backends: 2, autograd: 2, scheduler: 3, lazy: 4, nn: 5, optim: 5, lora: 6, models: 7, ".": 8,
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? files(p) : p.endsWith(".ts") ? [p] : [];
  });
}
const topFolder = (p: string) => {
  const r = relative(SRC, p).split("/");
  return r.length === 1 ? "." : r[0]!;
};

test("src imports point down the layers", () => {
  const bad: string[] = [];
  for (const f of files(SRC)) {
    const from = topFolder(f);
    const src = readFileSync(f, "utf8");
    for (const m of src.matchAll(/^\s*(?:import|export)[^;]*?from\s+["'](\.[^"']+)["']/gm)) {
      const to = topFolder(resolve(dirname(f), m[1]!));
      if (to === from) continue;
      if (!(to in RANK) || !(from in RANK)) { bad.push(`${relative(SRC, f)}: unknown folder ${to}`); continue; }
      if (RANK[to]! >= RANK[from]!) bad.push(`${relative(SRC, f)} (${from}, rank ${RANK[from]}) imports ${m[1]} (${to}, rank ${RANK[to]})`);
    }
  }
  expect(bad).toEqual([]);
});
