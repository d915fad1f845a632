#!/usr/bin/env bun
/**
 * The `loom` command (package.json `bin`): checks that the command line's own tools are installed,
 * then runs src/cli/loom.ts. `commander` (argument parsing) and `tinybench` (timings of `loom
 * tune`) are development dependencies, so a project that only depends on loom-tensor does not
 * install them; there the command says so instead of failing on an unresolved import.
 */
const missing: string[] = [];
for (const m of ["commander", "tinybench"]) {
  try {
    await import(m);
  } catch {
    missing.push(m);
  }
}
if (missing.length) {
  console.error(`loom: the command line needs ${missing.join(" and ")}, which installing loom-tensor as a dependency does not pull in; run \`bun add -d ${missing.join(" ")}\` (or npm install -D) and try again`);
  process.exit(2);
}
await import("./loom.ts");
export {};
