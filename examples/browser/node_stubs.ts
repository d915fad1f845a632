/**
 * A Bun bundler plugin for browser builds of Loom: every `node:` builtin becomes a module whose
 * exports (the same names as Bun's own module, so named imports resolve) throw a clear error
 * when called. Loom's file-system paths (from_pretrained(dir), save_file) are never reached in a
 * tab: the demo fetches files over HTTP and parses bytes.
 */
import type { BunPlugin } from "bun";

export function nodeStubs(): BunPlugin {
  return {
    name: "loom-node-stubs",
    setup(build) {
      build.onResolve({ filter: /^node:/ }, (a) => ({ path: a.path, namespace: "loom-node-stub" }));
      build.onLoad({ filter: /.*/, namespace: "loom-node-stub" }, (a) => {
        const names = Object.keys(require(a.path) as object).filter((k) => /^[A-Za-z_$][\w$]*$/.test(k) && k !== "default");
        const body = [
          `const no = (n) => () => { throw new Error(\`\${n}: ${a.path} is not available in a browser (Loom reads files only under Bun, Deno or Node)\`); };`,
          ...names.map((k) => `export const ${k} = no(${JSON.stringify(`${a.path.slice(5)}.${k}`)});`),
          `export default {};`,
        ].join("\n");
        return { contents: body, loader: "js" };
      });
    },
  };
}
