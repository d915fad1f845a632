/**
 * The native opcode table is generated from the registry (src/backends/native/optable.ts): the
 * shim's opcodes are the registry's order, every registry op with a native kernel has its
 * registry name, and nothing the registry lacks gets an opcode except the native-only
 * instructions.
 */
import { describe, expect, test } from "bun:test";
import { nativeBackend, nativeUnavailableReason } from "../../src/backends/native/backend.ts";
import { opTableHeader, registryOpcodes } from "../../src/backends/native/optable.ts";
import { FUSED_OPS, OPS } from "../../src/graph/registry.ts";
import { thrown } from "../thrown.ts";

describe("generated native op table", () => {
  test("lists every non-view registry op: elementwise first, in registry order", () => {
    const { elementwise, kernels } = registryOpcodes();
    const ops = Object.values(OPS);
    expect(elementwise).toEqual(ops.filter((o) => o.kind === "elementwise").map((o) => o.name));
    expect(kernels).toEqual([...ops.filter((o) => o.kind !== "elementwise" && o.kind !== "view").map((o) => o.name), ...Object.keys(FUSED_OPS)]);
    const h = opTableHeader();
    expect(h).toContain(`#define LOOM_REGISTRY_EW_OPS(X) X(neg) X(abs)`);
    expect(h).toContain(`X(fused_attention)`);
  });

  test("a unary elementwise op after a binary one is refused (the interpreter numbers unary ops first)", () => {
    expect(thrown(() => registryOpcodes([OPS.add, OPS.neg], [])).message).toContain("unary elementwise op 'neg' follows a binary one");
  });

  const nb = nativeBackend();
  test.skipIf(!nb)(`the loaded shim's opcodes are the registry's (${nb ? "native loaded" : nativeUnavailableReason()})`, () => {
    const { elementwise, kernels } = registryOpcodes();
    const order = [...elementwise, ...kernels];
    for (const [name, code] of nb!.lib.opcodes) {
      if (code < order.length) expect(order[code]).toBe(name);
      else expect(order).not.toContain(name); // native-only instructions (adamw, catalog variants) follow
    }
    // every registry op has a native kernel today but argsort (sort/topk: the js reference runs it)
    for (const name of order) expect(nb!.lib.opcodes.has(name)).toBe(name !== "argsort");
  });
});
