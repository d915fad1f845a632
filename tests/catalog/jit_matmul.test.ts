/**
 * Generated epilogues for products (src/backends/native/jit_matmul.ts): `fused_matmul` runs the
 * exact GEMM into its output and then a generated elementwise epilogue in place. The product keeps
 * the exact kernel's bits, so the reference here is that product (the native float32 matmul, run
 * eagerly) with the epilogue evaluated in float64 on the js backend and rounded once. The values
 * must be within the chosen kernel's contract, for linear + bias + GELU (erf), a residual add, and
 * a batched product with a transposed weight, at sizes off the vector width. Tolerance "exact"
 * keeps the exact kernel.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { FLOAT32_TOLERANCE, type Contract } from "../../src/backends/catalog.ts";
import { FAST_CONTRACT, JIT_CONTRACT, jitEnabled, jitStats } from "../../src/backends/native/jit.ts";
import { set_default_backend } from "../../src/lazy/device.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract } from "./helpers.ts";

type T = loom.Tensor;
const ENABLED = NATIVE !== null && jitEnabled();
const FAST = "native.fused_matmul.jit_f32", DOUBLE = "native.fused_matmul.jit";
const CONTRACTS: Record<string, Contract> = { [FAST]: FAST_CONTRACT, [DOUBLE]: JIT_CONTRACT };
const F = Math.fround;
const geluErf = (t: any) => t.mul(0.5).mul(t.mul(F(Math.SQRT1_2)).erf().add(1));

/** The epilogue `epi(product, ...rest)` in float64 on js, from the native float32 product, rounded once. */
function reference(product: T, epi: (p: any, ...r: any[]) => any, rest: readonly T[]): Float32Array {
  const prev = set_default_backend("js");
  try {
    const y = epi(product.to("float64"), ...rest.map((r) => r.to("float64"))) as T;
    return Float32Array.from(y.dataSync() as ArrayLike<number>);
  } finally {
    set_default_backend(prev as "js" | "native");
  }
}

/** Lazily on native: the plan's fused_matmul implementation, and the values against the reference within its contract. */
function check(name: string, a: T, b: T, epi: (p: any, ...r: any[]) => any, rest: readonly T[], tolerance: loom.CompilerOptions["tolerance"]): string {
  const y = loom.with_compiler_options({ tolerance }, () => epi(a.lazy().matmul(b.lazy()), ...rest.map((r) => r.lazy()))) as loom.LazyTensor;
  const plan = loom.with_compiler_options({ tolerance }, () => y.plan());
  const used = plan.instructions.filter((i) => i.op.name === "fused_matmul").map((i) => i.impl);
  expect(used.length).toBe(1);
  const got = loom.with_compiler_options({ tolerance }, () => y.eval()).dataSync();
  const c = CONTRACTS[used[0]!];
  if (c) {
    expect(jitStats.failures).toBe(0);
    expectWithinContract(got as ArrayLike<number>, reference(a.matmul(b), epi, rest), c, { what: `${name} (${used[0]})` });
  }
  return used[0]!;
}

describe.skipIf(!ENABLED)("generated fused_matmul epilogues", () => {
  let prev = "";
  const saved = process.env.LOOM_JIT_MIN_ELEMENTS;
  const tol = loom.get_compiler_options().tolerance;
  beforeAll(() => {
    prev = set_default_backend("native");
    process.env.LOOM_JIT_MIN_ELEMENTS = "0";
  });
  afterAll(() => {
    set_default_backend(prev as "js" | "native");
    loom.set_compiler_options({ tolerance: tol });
    if (saved === undefined) delete process.env.LOOM_JIT_MIN_ELEMENTS;
    else process.env.LOOM_JIT_MIN_ELEMENTS = saved;
  });

  const cases: [string, () => [T, T, (p: any, ...r: any[]) => any, T[]]][] = [
    ["linear + bias + GELU", () => [loom.randn([37, 50]).mul(3), loom.randn([70, 50]).t(), (p, bias) => geluErf(p.add(bias)), [loom.randn([70])]]],
    ["residual add", () => [loom.randn([33, 65]), loom.randn([65, 31]), (p, r) => p.add(r), [loom.randn([33, 31]).mul(10)]]],
    ["batched, transposed weight, scale", () => [loom.randn([3, 17, 40]), loom.randn([23, 40]).t(), (p, r) => p.mul(0.125).add(r), [loom.randn([23])]]],
  ];
  for (const [name, make] of cases) {
    test(`${name}: within the contract of the kernel chosen (default and tight tolerance); exact keeps the exact kernel`, () => {
      loom.manual_seed(3);
      const [a, b, epi, rest] = make();
      expect([FAST, DOUBLE]).toContain(check(name, a, b, epi, rest, FLOAT32_TOLERANCE));
      expect(check(name, a, b, epi, rest, { atol: 1e-9, rtol: 2.4e-7 })).toBe(DOUBLE);
      expect(check(name, a, b, epi, rest, "exact")).toBe("native.fused_matmul.exact");
    });
  }
});
