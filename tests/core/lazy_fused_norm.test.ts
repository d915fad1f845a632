/**
 * Lazy layer_norm / rms_norm where no gradient is recorded are recorded as ONE fused node
 * (LazyTensor._fusedNorm): the node the compiler's pattern pass makes of the decomposition. The
 * plan is the same, so the values are the same bits as the recorded decomposition at "exact"
 * (and as eager op by op on js); a gradient, `patterns: false` or a weight of another shape keeps
 * the decomposition, whose gradient is checked against finite differences. The same for softmax
 * of a buffer (LazyTensor._fusedSoftmax): one fused_softmax node, other inputs op by op.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import type { Node } from "../../src/graph/node.ts";
import { BACKENDS, useBackend } from "../backends.ts";

type L = loom.LazyTensor;
/** Op nodes (not leaves) reachable from a lazy tensor's node. */
function opNodes(t: L): string[] {
  const seen = new Set<Node>(), out: string[] = [];
  const walk = (n: Node) => {
    if (seen.has(n)) return;
    seen.add(n);
    if (n.op) out.push(n.op.name);
    n.inputs.forEach(walk);
  };
  walk((t as unknown as { node: Node }).node);
  return out;
}
const bits = (a: ArrayLike<number>) => Array.from(new Uint32Array(Float32Array.from(a).buffer));

describe.each(BACKENDS)("lazy norms recorded fused on %s", (backend) => {
  useBackend(backend);
  loom.manual_seed(0);
  const x = loom.randn([5, 7, 12]), w = loom.randn([12]), b = loom.randn([12]);

  for (const kind of ["layer_norm", "rms_norm"] as const) {
    const f = (t: any, wt: any, bt: any) => (kind === "layer_norm" ? loom.layer_norm(t, [12], wt, bt, 1e-5) : loom.rms_norm(t, [12], wt, 1e-5));
    const fused = kind === "layer_norm" ? "fused_layer_norm" : "fused_rms_norm";

    test(`${kind}: one ${fused} node under no_grad, the same bits as the recorded decomposition at "exact"`, () => {
      loom.with_compiler_options({ tolerance: "exact" }, () => {
        const y = loom.no_grad(() => f(x.lazy(), w.lazy(), b.lazy()) as L);
        expect(opNodes(y)).toEqual([fused]);
        const dec = loom.with_compiler_options({ patterns: false }, () => loom.no_grad(() => f(x.lazy(), w.lazy(), b.lazy()) as L));
        expect(opNodes(dec).length).toBeGreaterThan(5); // the decomposition, op by op
        const yv = y.eval().dataSync();
        expect(bits(yv)).toEqual(bits(dec.eval().dataSync()));
        if (backend === "js") expect(bits(yv)).toEqual(bits(loom.no_grad(() => f(x, w, b) as loom.Tensor).dataSync()));
        // eager weight and bias with a lazy x (a plain forward using its parameters directly): lifted
        const mixed = loom.no_grad(() => f(x.lazy(), w, b) as L);
        expect(opNodes(mixed)).toEqual([fused]);
        expect(bits(mixed.eval().dataSync())).toEqual(bits(yv));
      });
    });

    test(`${kind}: a gradient to record, or a weight of another shape, keeps the decomposition`, () => {
      const xg = x.clone().requires_grad_();
      const y = f(xg.lazy(), w.lazy(), b.lazy()) as L;
      expect(opNodes(y)).not.toContain(fused);
      const wide = loom.no_grad(() => f(x.lazy(), w.view(1, 12).expand(7, 12).lazy(), b.lazy()) as L);
      expect(opNodes(wide)).not.toContain(fused);
      // the gradient of Σ y·c against a central difference in float64
      const c = loom.randn([5, 7, 12]);
      y.mul(c.lazy()).sum().backward();
      const g = xg.grad!.dataSync();
      const x64 = x.to("float64"), h = 1e-6;
      const at = (i: number, s: number) => {
        const v = x64.clone().view(-1);
        v.index_put_([loom.tensor([i])], loom.tensor([x64.view(-1).dataSync()[i]! + s], { dtype: "float64" }));
        return loom.no_grad(() => (f(v.view(5, 7, 12), w.to("float64"), b.to("float64")) as loom.Tensor).mul(c.to("float64")).sum().item());
      };
      for (const i of [0, 100, 419]) expect(g[i]!).toBeCloseTo((at(i, h) - at(i, -h)) / (2 * h), 3);
    });
  }
});

describe.each(BACKENDS)("lazy softmax of a buffer recorded fused on %s", (backend) => {
  useBackend(backend);
  loom.manual_seed(1);
  const x = loom.randn([6, 9, 10]).mul(4);

  test('one fused_softmax node for a leaf (any dim, a strided leaf), the same bits as the recorded decomposition at "exact" and as eager', () => {
    loom.with_compiler_options({ tolerance: "exact" }, () => {
      for (const [leaf, d] of [[x, -1], [x, 1], [x, 0], [x.transpose(0, 2), -1]] as const) {
        const y = (leaf.lazy() as L).softmax(d);
        expect(opNodes(y)).toEqual(["fused_softmax"]);
        const dec = loom.with_compiler_options({ patterns: false }, () => (leaf.lazy() as L).softmax(d));
        expect(opNodes(dec)).toContain("amax"); // the decomposition, op by op
        const yv = y.eval().dataSync();
        expect(bits(yv)).toEqual(bits(dec.eval().dataSync()));
        expect(bits(yv)).toEqual(bits(leaf.softmax(d).dataSync()));
      }
    });
    // the default tolerance: the kernel the eager softmax runs too
    expect(bits((x.lazy() as L).softmax(-1).eval().dataSync())).toEqual(bits(x.softmax(-1).dataSync()));
  });

  test("an op result (a prologue or attention for the pattern pass) or a gradient to record keeps the decomposition", () => {
    expect(opNodes((x.lazy() as L).mul(2).softmax(-1))).toContain("amax");
    const xg = x.clone().requires_grad_();
    const y = (xg.lazy() as L).softmax(-1);
    expect(opNodes(y)).toContain("amax");
    y.mul(loom.randn([6, 9, 10]).lazy()).sum().backward(); // and its gradient reaches the leaf
    expect(xg.grad).not.toBeNull();
    expect(opNodes(loom.no_grad(() => (xg.lazy() as L).softmax(-1)))).toEqual(["fused_softmax"]);
  });
});
