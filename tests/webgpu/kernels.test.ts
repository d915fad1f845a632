/**
 * Kernel variants the small op tests do not reach: the three GEMMs (thread-per-output for small
 * products, the 64×64 shared-memory tile, and the register-blocked vec4 kernel used on CPU
 * adapters), batched/broadcast/transposed operands and fused epilogues; workgroup reductions over
 * long rows; >65535 workgroups. Compared with the js backend in float32: |Δ| <= atol + rtol·|ref|
 * with rtol 1e-5 and atol scaled by the reduction length (float32 sums in another order).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { WEBGPU } from "../backends.ts";

function close(got: loom.Tensor, want: loom.Tensor, atol: number, rtol = 1e-5): void {
  expect([...got.shape]).toEqual([...want.shape]);
  const g = got.dataSync(), w = want.dataSync();
  let worst = 0, at = -1;
  for (let i = 0; i < w.length; i++) {
    const e = Math.abs(g[i]! - w[i]!) - (atol + rtol * Math.abs(w[i]!));
    if (e > worst) { worst = e; at = i; }
  }
  expect(at < 0 ? "ok" : `[${at}] ${g[at]} vs ${w[at]}`).toBe("ok");
}

describe.if(WEBGPU)("webgpu kernel variants", () => {
  loom.manual_seed(11);
  const T = (...s: number[]) => loom.randn(s);
  const G = (t: loom.Tensor) => t.to("webgpu");

  test("matmul: small, tiled (transposed B), register-blocked, batched with broadcast, int", () => {
    const cases: [loom.Tensor, loom.Tensor][] = [
      [T(5, 7), T(7, 3)], // thread per output
      [T(96, 72), T(80, 72).t()], // B transposed: tiled, edges not multiples of 64
      [T(96, 72), T(72, 80)], // B dense: register-blocked on CPU adapters
      [T(3, 1, 40, 32), T(2, 32, 48)], // broadcast batch
      [T(40, 64).t(), T(40, 36)], // A transposed
    ];
    for (const [a, b] of cases) close(G(a).matmul(G(b)), a.matmul(b), 1e-5 * a.shape[a.shape.length - 1]!);
    const ai = loom.randint(-5, 5, [33, 20]), bi = loom.randint(-5, 5, [20, 17]);
    expect(G(ai).matmul(G(bi)).tolist()).toEqual(ai.matmul(bi).tolist());
  }, 120_000);

  test("fused matmul epilogues on the large kernels: linear + bias + GELU, + residual (lazy)", () => {
    const x = T(64, 96), W = T(80, 96), b = T(80), W2 = T(96, 80), r = T(64, 80);
    const f = (xx: any, WW: any, bb: any, rr: any, W22: any) => [loom.linear(xx, WW, bb).gelu(), rr.add(xx.matmul(W22))];
    const want = f(x, W, b, r, W2) as loom.Tensor[];
    const got = loom.realizeAll(f(...[x, W, b, r, W2].map((t) => G(t).lazy()) as [any, any, any, any, any]) as loom.LazyTensor[]);
    got.forEach((t, i) => close(t, want[i]!, 1e-3));
  }, 120_000);

  test("reductions over long rows use workgroup trees; amax/amin/argmax keep NaN and first-index rules", () => {
    const x = T(6, 1000);
    close(G(x).sum(1), x.sum(1), 1e-3);
    close(G(x).sum(), x.sum(), 1e-2);
    close(G(x).amax(1), x.amax(1), 0);
    close(G(x).amin(0), x.amin(0), 0);
    close(G(x).t().sum(0), x.t().sum(0), 1e-3); // strided rows
    expect(G(x).argmax(1).tolist()).toEqual(x.argmax(1).tolist());
    const xn = x.clone();
    loom.no_grad(() => xn.index(2, 500).fill_(NaN));
    expect(G(xn).amax(1).isnan().tolist()).toEqual([false, false, true, false, false, false]);
    close(G(x).softmax(-1), x.softmax(-1), 1e-6);
    close(G(x).lazy().softmax(-1).eval(), x.softmax(-1), 1e-6);
    close(G(x).cumsum(1), x.cumsum(1), 1e-3);
  }, 120_000);

  test("more than 65535 workgroups split over two grid dimensions", () => {
    const n = 256 * 70000;
    const x = loom.ones(n);
    const y = G(x).mul(3).add(1);
    expect(y.sum().item()).toBe(4 * n);
  }, 120_000);
});
