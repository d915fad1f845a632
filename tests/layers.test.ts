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
  tensor: 0, runtime: 0.5, graph: 1, io: 1, backends: 2, autograd: 2, scheduler: 3, lazy: 4, nn: 5, optim: 5, data: 5, tokenizers: 5, lora: 6, distributed: 6, weights: 7, models: 8, ".": 9, cli: 10,
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

/**
 * `src` without its comments (block, JSDoc and line comments; a `//` inside a string such as a
 * URL is kept), so the runtime rule below judges code, not prose about Bun.
 */
export function stripComments(src: string): string {
  return src.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

/** Why `src` breaks the runtime rule (a static bun:ffi import, a `Bun.` call), one line each. */
export function runtimeViolations(src: string): string[] {
  const code = stripComments(src);
  const bad: string[] = [];
  if (specifiers(code).includes("bun:ffi")) bad.push('imports "bun:ffi"');
  for (const m of code.matchAll(/(?<![\w$.])Bun\s*\.\s*[A-Za-z_$][\w$]*/g)) bad.push(`calls ${m[0].replace(/\s/g, "")}`);
  return bad;
}

test("the runtime rule's scanner finds bun:ffi imports and Bun.* calls, and ignores comments", () => {
  expect(runtimeViolations(`import { dlopen } from "bun:ffi";`)).toEqual(['imports "bun:ffi"']);
  expect(runtimeViolations(`import type { Pointer } from 'bun:ffi';`)).toEqual(['imports "bun:ffi"']);
  expect(runtimeViolations(`const f = require("bun:ffi");`)).toEqual(['imports "bun:ffi"']);
  expect(runtimeViolations(`const m = Bun.mmap(p, { shared: false });\nBun .sleepSync(1);`)).toEqual(["calls Bun.mmap", "calls Bun.sleepSync"]);
  expect(runtimeViolations(`/** Bun.mmap maps it; bun:ffi's toArrayBuffer */\n// Bun.gc(true)\nconst x = 1; // Bun.peek`)).toEqual([]);
  expect(runtimeViolations(`if (typeof Bun !== "undefined") go(); const u = "https://x//Bun.y"; myBun.z(); a.Bun.b();`)).toEqual([]);
});

test("only src/runtime names bun:ffi or Bun.*: Deno and a browser bundle load every other file", () => {
  const bad: string[] = [];
  for (const f of files(SRC)) {
    if (topFolder(f) === "runtime") continue;
    for (const why of runtimeViolations(readFileSync(f, "utf8"))) bad.push(`${relative(SRC, f)} ${why} (use src/runtime/: ffi.ts, files.ts, sync.ts, process.ts)`);
  }
  expect(bad).toEqual([]);
});
