#!/usr/bin/env bun
/**
 * The package test (CI: `npm run test:package`): Loom as users get it. Packs this checkout with
 * `npm pack`, then
 *   1. checks that the production dependency closure holds none of the examples' or CLI's
 *      packages (datasets, commander, cli-progress, vega, tinybench) and prints its size;
 *   2. makes a fresh Bun project and a fresh Deno project in a temporary folder whose
 *      node_modules hold the unpacked tarball and its production dependencies only (linked from
 *      this checkout's node_modules: no network), and runs one LoRA step in each with
 *      `import * as loom from "loom-tensor"` — the losses must equal this checkout's bit for bit;
 *   3. type-checks the Bun project with the tsconfig.json `bun init` writes (strict,
 *      noUncheckedIndexedAccess, verbatimModuleSyntax, module Preserve) and with a plain `strict`
 *      one: users' `tsc --noEmit` compiles Loom's own .ts files under their settings;
 *   4. bundles a page that imports the package with `bun build --target browser` and checks that
 *      no Bun-only module (bun:ffi, bun:sqlite, bun-webgpu) is imported by it.
 * Bun loads the package's TypeScript (`exports` condition "bun"); Deno and Node do not strip types
 * under node_modules, so they load dist/index.js, which `npm pack` builds (`prepack`).
 * `--skip-tsc` leaves out step 3 (the slow one: ~20 s per configuration on 2 cores).
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import * as loomHere from "../../src/index.ts";
import { loraStep } from "../deno/lora_step.ts";

const ROOT = resolve(import.meta.dir, "../..");
const NM = join(ROOT, "node_modules");
const BIN = join(NM, ".bin");
const NAME = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).name as string;
/** Packages a user of Loom must not get by installing it. */
const FORBIDDEN = [/^@stdlib\/datasets-/, /^commander$/, /^cli-progress$/, /^vega(-lite)?$/, /^tinybench$/];

let failures = 0;
function check(ok: boolean, what: string, detail = ""): void {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}${detail ? `: ${detail}` : ""}`);
  if (!ok) failures++;
}

function run(argv: string[], cwd: string, env: Record<string, string> = {}): { ok: boolean; out: string; err: string } {
  const r = Bun.spawnSync(argv, { cwd, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  return { ok: r.success, out: r.stdout.toString(), err: r.stderr.toString() };
}

/** The production dependencies of `pkg`, transitively, as found in this checkout's node_modules. */
function closure(deps: Record<string, string>): Map<string, string> {
  const found = new Map<string, string>(); // name -> folder
  const visit = (name: string, from: string, optional: boolean) => {
    if (found.has(name)) return;
    // node's lookup: the nearest node_modules up from the dependent's folder
    let dir = from, path = "";
    for (;;) {
      const p = join(dir, "node_modules", name);
      if (existsSync(join(p, "package.json"))) { path = p; break; }
      const up = dirname(dir);
      if (up === dir) break;
      dir = up;
    }
    if (!path) {
      if (!optional) throw new Error(`dependency ${name} (needed by ${from}) is not installed`);
      return; // an optional dependency for another platform
    }
    found.set(name, path);
    const pj = JSON.parse(readFileSync(join(path, "package.json"), "utf8"));
    for (const d of Object.keys(pj.dependencies ?? {})) visit(d, path, false);
    for (const d of Object.keys(pj.optionalDependencies ?? {})) visit(d, path, true);
  };
  for (const d of Object.keys(deps)) visit(d, ROOT, false);
  return found;
}

/** [package, importing file] of every bare import reachable from `entry` through relative imports (static and literal dynamic). */
function reachablePackages(entry: string): [string, string][] {
  const seen = new Set<string>(), out: [string, string][] = [];
  const forms = [/^\s*(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']/gm, /^\s*import\s*["']([^"']+)["']/gm, /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g, /\brequire\s*\(\s*["']([^"']+)["']\s*\)/g];
  const visit = (f: string) => {
    if (seen.has(f)) return;
    seen.add(f);
    const text = readFileSync(f, "utf8");
    for (const re of forms) for (const m of text.matchAll(re)) {
      const spec = m[1]!;
      if (spec.startsWith(".")) visit(resolve(dirname(f), spec));
      else if (!/^\s*(?:import|export)\s+type\b/.test(m[0])) out.push([spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!, f.slice(ROOT.length + 1)]);
    }
  };
  visit(entry);
  return out;
}

function du(path: string): number {
  const s = statSync(path);
  if (!s.isDirectory()) return s.size;
  return readdirSync(path).reduce((n, f) => n + du(join(path, f)), 0);
}

const work = mkdtempSync(join(tmpdir(), "loom-package-"));
try {
  // ---- the tarball ---------------------------------------------------------------------------
  // what `prepack` runs, done here so that npm's JSON report is not mixed with the bundler's output
  const dist = run(["npm", "run", "--silent", "build:dist"], ROOT);
  if (!dist.ok) throw new Error(`npm run build:dist failed: ${dist.err}`);
  const packed = run(["npm", "pack", "--json", "--ignore-scripts", "--pack-destination", work], ROOT);
  if (!packed.ok) throw new Error(`npm pack failed: ${packed.err}`);
  const info = JSON.parse(packed.out)[0] as { filename: string; size: number; files: { path: string }[] };
  const tarball = join(work, info.filename);
  const files = info.files.map((f) => f.path);
  check(files.includes("src/index.ts") && files.includes("native/shim.c") && files.includes("dist/index.js") && !files.some((f) => f.startsWith("native/build/") || f.startsWith("tests/") || f.startsWith("examples/")),
    "the tarball holds src/, dist/index.js and the native sources, not native builds, tests or examples", `${files.length} files, ${(info.size / 1e6).toFixed(2)} MB packed`);

  // ---- 1. dependency closure -----------------------------------------------------------------
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  const deps = closure(pkg.dependencies ?? {});
  const bad = [...deps.keys()].filter((n) => FORBIDDEN.some((re) => re.test(n)));
  const mb = [...deps.values()].reduce((n, p) => n + du(p), 0) / 1e6;
  check(bad.length === 0, "installing the package pulls no example, benchmark or CLI package", `${deps.size} packages, ${mb.toFixed(1)} MB on disk${bad.length ? `; but: ${bad.join(", ")}` : ""}`);
  const devImports = reachablePackages(join(ROOT, "src", "index.ts")).filter(([p]) => !deps.has(p) && !p.startsWith("node:"));
  check(devImports.length === 0, "the package's modules import only its dependencies (and node: builtins)", devImports.map(([p, f]) => `${p} (${f})`).join(", "));

  // ---- 2. fresh projects -----------------------------------------------------------------------
  const project = (name: string, tooling: string[]): string => {
    const dir = join(work, name);
    const nm = join(dir, "node_modules");
    mkdirSync(join(nm, NAME), { recursive: true });
    const x = run(["tar", "xzf", tarball, "-C", join(nm, NAME), "--strip-components=1"], dir);
    if (!x.ok) throw new Error(`unpacking failed: ${x.err}`);
    for (const [n, p] of [...deps, ...tooling.map((t) => [t, join(NM, t)] as const)]) {
      mkdirSync(dirname(join(nm, n)), { recursive: true });
      if (!existsSync(join(nm, n))) symlinkSync(p, join(nm, n));
    }
    // the native library this checkout built for the same sources (its name is their hash): no second compile
    const built = join(ROOT, "native", "build");
    if (existsSync(built)) {
      mkdirSync(join(nm, NAME, "native", "build"), { recursive: true });
      for (const f of readdirSync(built).filter((f) => f.startsWith("libloom-") && f.endsWith(".so"))) copyFileSync(join(built, f), join(nm, NAME, "native", "build", f));
    }
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `${name}-app`, private: true, type: "module", dependencies: { [NAME]: `file:${tarball}` } }, null, 2));
    const step = readFileSync(join(ROOT, "tests", "deno", "lora_step.ts"), "utf8").replaceAll(`"../../src/index.ts"`, `"${NAME}"`);
    writeFileSync(join(dir, "lora_step.ts"), step);
    writeFileSync(join(dir, "main.ts"), `import * as loom from "${NAME}";\nimport { loraStep } from "./lora_step.ts";\nconsole.log(JSON.stringify({ info: loom.runtime_info(), step: loraStep(loom) }));\n`);
    return dir;
  };
  const want = loraStep(loomHere);
  const compare = (label: string, r: { ok: boolean; out: string; err: string }, runtime: string) => {
    if (!r.ok) return check(false, label, r.err.trim().split("\n").slice(-8).join("\n"));
    const got = JSON.parse(r.out.trim().split("\n").pop()!) as { info: loomHere.RuntimeInfo; step: typeof want };
    check(got.info.runtime === runtime && got.info.cpu_backend === "native" && got.step.loss0 === want.loss0 && got.step.loss1 === want.loss1 && got.step.loraBAbs === want.loraBAbs,
      label, `${got.info.version}, ${got.info.cpu_backend} backend, loss ${got.step.loss0.toFixed(6)} -> ${got.step.loss1.toFixed(6)} (this checkout: ${want.loss0.toFixed(6)} -> ${want.loss1.toFixed(6)})${got.info.native_unavailable_reason ? `; native: ${got.info.native_unavailable_reason}` : ""}`);
  };

  const bunApp = project("bun", ["@types/bun", "bun-types", "@types/node", "undici-types"].filter((t) => existsSync(join(NM, t))));
  compare("a fresh Bun project imports the package and runs a LoRA step", run([join(BIN, "bun"), "main.ts"], bunApp), "bun");

  const denoApp = project("deno", []);
  writeFileSync(join(denoApp, "deno.json"), JSON.stringify({ nodeModulesDir: "manual" }, null, 2));
  compare("a fresh Deno project imports the package and runs a LoRA step",
    run([join(BIN, "deno"), "run", "--no-check", "--allow-ffi", "--allow-read", "--allow-write", "--allow-env", "--allow-run", "--allow-sys", "main.ts"], denoApp), "deno");

  // ---- 3. users' tsc ---------------------------------------------------------------------------
  if (!process.argv.includes("--skip-tsc")) {
    for (const cfg of ["bun-init-tsconfig.json", "strict-tsconfig.json"]) {
      copyFileSync(join(import.meta.dir, cfg), join(bunApp, "tsconfig.json"));
      const r = run([join(BIN, "tsc"), "--noEmit", "-p", "."], bunApp);
      const errs = (r.out + r.err).split("\n").filter((l) => /error TS/.test(l));
      check(r.ok, `tsc --noEmit in the Bun project with ${cfg}`, r.ok ? "no errors" : `${errs.length} errors:\n${errs.slice(0, 15).join("\n")}`);
    }
  }

  // ---- 4. a bundled page -----------------------------------------------------------------------
  writeFileSync(join(bunApp, "page.ts"), `import * as loom from "${NAME}";\nconst y = loom.tensor([[1, 2], [3, 4]], { dtype: "float32" }).matmul(loom.ones([2, 1]));\ndocument.body.textContent = JSON.stringify({ y: [...y.dataSync()], info: loom.runtime_info() });\n`);
  const b = run([join(BIN, "bun"), "build", "page.ts", "--target", "browser", "--outfile", "page.js"], bunApp);
  const js = b.ok ? readFileSync(join(bunApp, "page.js"), "utf8") : "";
  // an import of a Bun-only module, or the Bun FFI implementation itself (its dlopen wrapper)
  const leaked = [...js.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\brequire\s*\(\s*)["'](bun:[a-z]+|bun-webgpu)["']/g)].map((m) => m[1]!);
  if (js.includes("function bunFfi(")) leaked.push("src/runtime/ffi_bun.ts");
  check(b.ok && leaked.length === 0, "a page importing the package bundles for the browser (bun build --target browser)", b.ok ? `${(js.length / 1e6).toFixed(2)} MB${leaked.length ? `, but it contains ${leaked.join(", ")}` : ""}` : b.err.trim().split("\n").slice(0, 10).join("\n"));
  // ... and runs in a browser tab (headless Chromium, when installed): js backend, no FFI
  const chromium = Bun.which("chromium") ?? Bun.which("chromium-browser") ?? Bun.which("google-chrome");
  if (b.ok && chromium) {
    writeFileSync(join(bunApp, "page.html"), `<html><body>pending<script type="module" src="page.js"></script></body></html>`);
    const server = Bun.serve({ port: 0, fetch: (req) => new Response(Bun.file(join(bunApp, new URL(req.url).pathname === "/page.js" ? "page.js" : "page.html"))) });
    // async: the server answers from this process's event loop while Chromium runs
    const p = Bun.spawn([chromium, "--headless=new", "--no-sandbox", "--no-first-run", `--user-data-dir=${join(work, "profile")}`, "--enable-logging=stderr", "--v=0", "--dump-dom", `http://127.0.0.1:${server.port}/page.html`], { stdout: "pipe", stderr: "pipe" });
    const timer = setTimeout(() => p.kill(), 60_000);
    const r = { out: await new Response(p.stdout).text(), err: await new Response(p.stderr).text() };
    await p.exited;
    clearTimeout(timer);
    server.stop(true);
    const m = /<body>(\{.*\})<\/body>/.exec(r.out);
    const got = m ? (JSON.parse(m[1]!) as { y: number[]; info: loomHere.RuntimeInfo }) : null;
    check(got !== null && got.y.join() === "3,7" && got.info.runtime === "browser" && got.info.cpu_backend === "js", "the bundled page runs in headless Chromium",
      got ? `y = [${got.y}], ${got.info.runtime}, ${got.info.cpu_backend} backend (${got.info.native_unavailable_reason})` : r.out.slice(0, 300) + r.err.split("\n").filter((l) => /CONSOLE|Uncaught/.test(l)).join("\n"));
  } else if (b.ok) console.log("skip the bundled page in a browser: no chromium on PATH");
} finally {
  rmSync(work, { recursive: true, force: true });
}
if (failures) {
  console.error(`${failures} package check(s) failed`);
  process.exit(1);
}
console.log("package checks passed");
