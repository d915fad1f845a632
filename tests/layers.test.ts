/**
 * Imports point down the layers of docs/ARCHITECTURE.md: a file in src/ imports only from its own
 * folder or from folders of a lower rank, and folders of the same rank do not import each other.
 * Every way TypeScript can name another file counts: `import`/`export ... from`, side-effect
 * imports, `import("...")` in types and dynamic imports, and `require("...")`.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir, "../src");
const RANK: Record<string, number> = {
  tensor: 0, graph: 1, io: 1, backends: 2, autograd: 2, scheduler: 3, lazy: 4, nn: 5, optim: 5, data: 5, tokenizers: 5, lora: 6, distributed: 6, weights: 7, models: 8, ".": 9, cli: 10,
};

const IMPORT_FORMS: readonly RegExp[] = [
  /^\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/gm, // static import/export ... from
  /^\s*import\s*["']([^"']+)["']/gm, // side-effect import
  /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g, // import("...") in a type or a dynamic import
  /\b(?:require|import\.meta\.require)\s*\(\s*["']([^"']+)["']\s*\)/g,
];

/** Every module specifier `src` names, in any of the forms above. */
export function specifiers(src: string): string[] {
  return IMPORT_FORMS.flatMap((re) => [...src.matchAll(re)].map((m) => m[1]!));
}

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

test("the import scanner sees every form of import", () => {
  const src = [
    `import { a } from "../lazy/a.ts";`,
    `import {\n  b,\n  c,\n} from '../nn/b.ts';`,
    `export * from "../models/c.ts";`,
    `import type { D } from "../lora/d.ts";`,
    `import "../optim/side.ts";`,
    `function f(x: import("../scheduler/e.ts").E) {}`,
    `const m = await import("../lazy/dyn.ts");`,
    `const r = require("../io/r.ts");`,
  ].join("\n");
  expect(specifiers(src).sort()).toEqual([
    "../io/r.ts", "../lazy/a.ts", "../lazy/dyn.ts", "../lora/d.ts", "../models/c.ts", "../nn/b.ts", "../optim/side.ts", "../scheduler/e.ts",
  ]);
});

test("src imports point down the layers", () => {
  const bad: string[] = [];
  for (const f of files(SRC)) {
    const from = topFolder(f);
    for (const spec of new Set(specifiers(readFileSync(f, "utf8")))) {
      if (!spec.startsWith(".")) continue; // packages (bun-webgpu, node:fs) are not layers
      const to = topFolder(resolve(dirname(f), spec));
      if (to === from) continue;
      if (!(to in RANK) || !(from in RANK)) { bad.push(`${relative(SRC, f)}: unknown folder ${to}`); continue; }
      if (RANK[to]! >= RANK[from]!) bad.push(`${relative(SRC, f)} (${from}, rank ${RANK[from]}) imports ${spec} (${to}, rank ${RANK[to]})`);
    }
  }
  expect(bad).toEqual([]);
});
