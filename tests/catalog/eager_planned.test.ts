/**
 * Eager elementwise work that runs as a plan (src/lazy/eager_fused.ts `plannedElementwise`, Tensor
 * `_elementwisePlan`): a large float32 elementwise op of native eager tensors runs the catalog's
 * generated float32 kernel (jit_call) as a lazy plan would, and an eager gelu / silu without a
 * gradient to record is ONE plan instead of 4–6 eager kernels. Checked against a float64
 * reference (the native double kernels on float64 inputs) within the generated kernel's contract
 * (FAST_CONTRACT), bit-equal to the lazy result, and not taken where it must not be: at
 * "exact", below PLANNED_MIN_ELEMENTS, for float64, and (composites) with a gradient to record.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { FAST_CONTRACT } from "../../src/backends/native/jit.ts";
import { PLANNED_MIN_ELEMENTS, PLANNED_MIN_ELEMENTS_SIMPLE } from "../../src/lazy/eager_fused.ts";
import { realizeStats } from "../../src/scheduler/realize.ts";
import { NATIVE } from "../native/helpers.ts";
import { expectWithinContract as within, t, useNative, values } from "./helpers.ts";

type T = loom.Tensor;
const bits = (a: ArrayLike<number>) => Array.from(new Uint32Array(Float32Array.from(a).buffer));
const jitCalls = () => NATIVE!.shimCounters().byOp.get("jit_call") ?? 0;
const N = PLANNED_MIN_ELEMENTS * 2;

const UNARY: [string, (x: T) => T, number, number][] = [
  // name, op, input scale, shift (log/log1p get positive inputs)
  ["exp", (x) => x.exp(), 3, 0],
  ["log", (x) => x.log(), 1, 4],
  ["log1p", (x) => x.log1p(), 0.3, 0.5],
  ["sin", (x) => x.sin(), 4, 0],
  ["cos", (x) => x.cos(), 4, 0],
  ["tanh", (x) => x.tanh(), 2, 0],
  ["sigmoid", (x) => x.sigmoid(), 3, 0],
  ["erf", (x) => x.erf(), 1.5, 0],
];

describe.skipIf(!NATIVE)("eager transcendentals run the generated float32 kernel (native)", () => {
  useNative();

  for (const [name, f, scale, shift] of UNARY) {
    test(`${name}: the generated kernel ran, within its contract of float64, equal to lazy bit for bit`, () => {
      const v = values(N, scale, shift, 11);
      const x = t(v, [N / 256, 256]);
      const j0 = jitCalls();
      const y = f(x).dataSync();
      expect(jitCalls() - j0).toBe(1);
      within(y, f(x.to("float64")).dataSync(), FAST_CONTRACT, { what: name });
      expect(bits(y)).toEqual(bits((f(x.lazy() as never) as unknown as loom.LazyTensor).eval().dataSync()));
    });
  }

  test("simple ops and reductions from PLANNED_MIN_ELEMENTS_SIMPLE input elements: broadcast mul, a scalar add, pow(x, 2) (the literal folded), sum, amax; as lazy", () => {
    const M = PLANNED_MIN_ELEMENTS_SIMPLE;
    const v = values(M, 2, 0, 21), w = values(M / 512, 1, 0.5, 22);
    const x = t(v, [512, M / 512]), col = t(w, [M / 512]);
    const cases: [string, (a: T) => T][] = [
      ["mul", (a) => a.mul(col)], ["add 1.5", (a) => a.add(1.5)], ["pow 2", (a) => a.pow(2)],
      ["sum(-1)", (a) => a.sum(-1)], ["amax(0)", (a) => a.amax(0)],
    ];
    for (const [name, f] of cases) {
      const r0 = realizeStats.realizes;
      const y = f(x).dataSync();
      expect(realizeStats.realizes - r0).toBe(1);
      within(y, f(x.to("float64")).dataSync(), FAST_CONTRACT, { what: name });
      expect(bits(y)).toEqual(bits((f(x.lazy() as never) as unknown as loom.LazyTensor).eval().dataSync()));
    }
    // below the threshold: the eager kernel (no realize)
    const r1 = realizeStats.realizes;
    x.narrow(0, 0, 511).mul(2);
    expect(realizeStats.realizes).toBe(r1);
  });

  test('not at "exact" (the exact kernel\'s bits: equal to lazy at "exact"), nor below the size threshold, nor for float64', () => {
    const v = values(N, 2, 0, 5);
    const x = t(v, [N]);
    const j0 = jitCalls();
    loom.set_compiler_options({ tolerance: "exact" });
    try {
      const y = x.tanh().dataSync();
      expect(jitCalls()).toBe(j0);
      expect(bits(y)).toEqual(bits(x.lazy().tanh().eval().dataSync()));
    } finally {
      loom.set_compiler_options({}, true);
    }
    x.narrow(0, 0, PLANNED_MIN_ELEMENTS - 1).tanh().dataSync();
    x.to("float64").tanh().dataSync();
    expect(jitCalls()).toBe(j0);
  });

  test("with a gradient to record the op still runs planned, and autograd is the op's own", () => {
    const v = values(N, 2, 0, 9);
    const x = t(v, [N]).requires_grad_(true);
    const j0 = jitCalls();
    const y = x.tanh();
    const yv = y.dataSync(); // the plan may run asynchronously: its count is seen once it has run
    expect(jitCalls() - j0).toBe(1);
    y.sum().backward();
    // d tanh = 1 − tanh², from the forward's float32 values
    const g = x.grad!.dataSync();
    for (const i of [0, 1, 777, N - 1]) expect(g[i]!).toBeCloseTo(1 - yv[i]! * yv[i]!, 6);
  });
});

describe.skipIf(!NATIVE)("eager gelu and silu without a gradient are one plan (native)", () => {
  useNative();
  const COMPOSITES: [string, (x: T) => T][] = [
    ["gelu", (x) => loom.gelu(x) as T],
    ["gelu tanh", (x) => loom.gelu(x, "tanh") as T],
    ["silu", (x) => loom.silu(x) as T],
  ];

  for (const [name, f] of COMPOSITES) {
    test(`${name}: one realize of one kernel, within the contract of float64, equal to lazy bit for bit`, () => {
      const v = values(N, 3, 0, 3);
      const x = t(v, [N / 128, 128]);
      const r0 = realizeStats.realizes, k0 = realizeStats.nodes;
      const y = f(x);
      expect(realizeStats.realizes - r0).toBe(1);
      expect(realizeStats.nodes - k0).toBe(1); // one kernel: the whole chain fused
      const yv = y.dataSync();
      within(yv, f(x.to("float64")).dataSync(), FAST_CONTRACT, { what: name });
      expect(bits(yv)).toEqual(bits((f(x.lazy() as never) as unknown as loom.LazyTensor).eval().dataSync()));
    });
  }

  test("with a gradient to record gelu runs op by op (only its erf planned), at \"exact\" with no plan; its gradient is right", () => {
    const v = values(N, 3, 0, 4);
    const x = t(v, [N]).requires_grad_(true);
    const r0 = realizeStats.realizes, k0 = realizeStats.nodes;
    const y = loom.gelu(x) as T;
    expect([realizeStats.realizes - r0, realizeStats.nodes - k0]).toEqual([1, 1]); // the erf alone
    expect(y.grad_fn).not.toBeNull();
    y.sum().backward();
    // d/dx x·Φ(x) = Φ(x) + x·φ(x), from the float32 input in double
    const g = x.grad!.dataSync();
    const ref = (z: number) => {
      const e = (loom.tensor([z / Math.SQRT2], { dtype: "float64" }).erf().item());
      return 0.5 * (1 + e) + z * Math.exp(-z * z / 2) / Math.sqrt(2 * Math.PI);
    };
    for (const i of [0, 5, 1000, N - 1]) expect(Math.abs(g[i]! - ref(v[i]!))).toBeLessThan(2e-6);
    loom.set_compiler_options({ tolerance: "exact" });
    try {
      const xs = t(v, [N]);
      const r1 = realizeStats.realizes;
      loom.gelu(xs);
      expect(realizeStats.realizes).toBe(r1);
    } finally {
      loom.set_compiler_options({}, true);
    }
  });
});
