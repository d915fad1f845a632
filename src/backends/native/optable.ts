/**
 * The native opcode table, generated from the op registry (src/graph/registry.ts) so that it
 * cannot drift from it: `build.ts` writes this header (ops.gen.h) next to the sources it
 * compiles, and native/kernels/common.h numbers the opcodes from it. The C side then only says,
 * by name, which kernel runs each op (`LOOM_KERNEL_IMPLS` in common.h, designated initializers in
 * shim.c): a name that is not a registry op does not compile, and a registry op without a native
 * kernel is listed with an empty name (TypeScript then runs it on the js backend).
 *
 * Order: the elementwise ops first, in registry order (their opcodes index the interpreter's
 * tables; unary ops must precede binary and ternary ones, which elementwise.c relies on), then
 * every other non-view op and the FUSED_OPS.
 */
import type { OpDef } from "../../graph/op.ts";
import { FUSED_OPS, OPS } from "../../graph/registry.ts";

/** Registry elementwise op names (opcode order) and the other kernel ops (their opcodes follow). */
export function registryOpcodes(all: readonly OpDef[] = Object.values(OPS), fused: readonly OpDef[] = Object.values(FUSED_OPS)): { elementwise: string[]; kernels: string[] } {
  const ew = all.filter((o) => o.kind === "elementwise");
  const firstMulti = ew.findIndex((o) => (o as { arity: number }).arity > 1);
  const late = ew.slice(firstMulti).find((o) => (o as { arity: number }).arity === 1);
  if (firstMulti >= 0 && late) {
    throw new Error(`native op table: unary elementwise op '${late.name}' follows a binary one in OPS; the interpreter numbers unary ops first`);
  }
  const kernels = [...all.filter((o) => o.kind !== "elementwise" && o.kind !== "view"), ...fused];
  return { elementwise: ew.map((o) => o.name), kernels: kernels.map((o) => o.name) };
}

/** The text of ops.gen.h. */
export function opTableHeader(): string {
  const { elementwise, kernels } = registryOpcodes();
  const x = (names: string[]) => names.map((n) => `X(${n})`).join(" ");
  return [
    "/* Generated from src/graph/registry.ts by src/backends/native/optable.ts at build time: do not edit. */",
    "#pragma once",
    `#define LOOM_REGISTRY_EW_OPS(X) ${x(elementwise)}`,
    `#define LOOM_REGISTRY_KERNEL_OPS(X) ${x(kernels)}`,
    "",
  ].join("\n");
}
