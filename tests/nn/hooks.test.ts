/**
 * Hooks and grad-mode scopes (issue 16): Tensor.register_hook, Module forward / backward hooks,
 * and no_grad / enable_grad / inference_mode as `using` guards. Gradients are checked against
 * hand-derived values: for y = x Wᵀ + b and L = Σ y·c + Σ x·e, dL/dy = c, the part of dL/dx that
 * comes through the Linear is c W, and dL/dx = c W + e. Eager and lazy execution, js and native.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";

const close = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(1e-5 + 1e-5 * Math.abs(b[i]!));
};

/** c W ([4, 2] @ [2, 3]) on the host, in float64. */
function cW(c: loom.Tensor, w: loom.Tensor): number[] {
  const C = c.dataSync(), W = w.dataSync(), out: number[] = [];
  for (let i = 0; i < 4; i++) for (let j = 0; j < 3; j++) out.push(C[i * 2]! * W[j]! + C[i * 2 + 1]! * W[3 + j]!);
  return out;
}

describe("grad-mode guards for `using`", () => {
  test("no_grad(), enable_grad() and inference_mode() set the mode for the block and restore it, also on a throw", () => {
    const w = loom.ones([2]).requires_grad_();
    {
      using _ = loom.no_grad();
      expect(loom.is_grad_enabled()).toBe(false);
      expect(w.mul(2).requires_grad).toBe(false);
      {
        using _e = loom.enable_grad();
        expect(w.mul(2).requires_grad).toBe(true);
      }
      expect(loom.is_grad_enabled()).toBe(false);
    }
    expect(loom.is_grad_enabled()).toBe(true);
    expect(() => {
      using _ = loom.inference_mode();
      expect(loom.is_grad_enabled()).toBe(false);
      throw new Error("inside");
    }).toThrow("inside");
    expect(loom.is_grad_enabled()).toBe(true);
    expect(loom.inference_mode(() => w.mul(2)).requires_grad).toBe(false);
  });
});

describe.each(BACKENDS)("hooks on %s", (backend) => {
  useBackend(backend);
  for (const mode of ["eager", "lazy"] as const) {
    test(`${mode}: a tensor hook sees the gradient and may replace it; hooks run in order; remove() unregisters`, () => {
      loom.manual_seed(0);
      const lin = new nn.Linear(3, 2);
      const x = loom.randn([4, 3]), c = loom.randn([4, 2]);
      const seen: string[] = [];
      nn.with_execution_mode(mode, () => {
        const y = lin.call(x);
        y.register_hook((g) => { seen.push("first"); close(g.dataSync(), c.dataSync()); return g.mul(2); });
        y.register_hook((g) => { seen.push("second"); close(g.dataSync(), c.mul(2).dataSync()); });
        const h = lin.bias!.register_hook(() => { seen.push("removed"); });
        h.remove();
        y.mul(c).sum().backward();
      });
      expect(seen).toEqual(["first", "second"]);
      // dL/db = Σ_rows 2c (the replaced gradient flows on)
      close(lin.bias!.grad!.dataSync(), c.mul(2).sum(0).dataSync());
      expect(() => loom.ones([2]).register_hook(() => {})).toThrow(loom.LoomAutogradError);
    });

    test(`${mode}: a hook on a leaf changes what accumulates into .grad`, () => {
      const w = loom.tensor([1, 2, 3], { dtype: "float32" }).requires_grad_();
      w.register_hook((g) => g.add(10));
      nn.with_execution_mode(mode, () => w.mul(w).sum().backward());
      expect(Array.from(w.grad!.dataSync())).toEqual([12, 14, 16]);
    });

    test(`${mode}: forward pre-hooks replace the arguments, forward hooks the output, on inner modules too`, () => {
      loom.manual_seed(0);
      const inner = new nn.Linear(3, 3);
      const model = new nn.Sequential(inner, new nn.ReLU());
      const calls: string[] = [];
      const pre = inner.register_forward_pre_hook((_m, args) => { calls.push("pre"); return [(args[0] as loom.Tensor).mul(0)]; });
      const post = model.register_forward_hook((_m, _a, out) => { calls.push("post"); return (out as loom.Tensor).add(1); });
      const x = loom.randn([2, 3]);
      const y = nn.with_execution_mode(mode, () => model.call(x));
      // inner sees zeros: relu(b) + 1
      close(y.dataSync(), inner.bias!.relu().add(1).expand([2, 3]).contiguous().dataSync());
      expect(calls).toEqual(["pre", "post"]);
      pre.remove();
      post.remove();
      close(nn.with_execution_mode(mode, () => model.call(x)).dataSync(), inner.forward_eager(x).relu().dataSync());
    });

    test(`${mode}: backward hooks see grad_output and this module's grad_input, and may replace them`, () => {
      loom.manual_seed(0);
      const lin = new nn.Linear(3, 2);
      const x = loom.randn([4, 3]).requires_grad_(), c = loom.randn([4, 2]), e = loom.randn([4, 3]);
      const got: { go?: number[]; gi?: number[] } = {};
      lin.register_full_backward_pre_hook((_m, go) => { got.go = Array.from(go[0]!.dataSync()); });
      lin.register_full_backward_hook((_m, gi, go) => {
        got.gi = Array.from(gi[0]!.dataSync());
        close(go[0]!.dataSync(), c.dataSync());
        return [gi[0]!.mul(3)];
      });
      nn.with_execution_mode(mode, () => lin.call(x).mul(c).add(0).sum().add(x.mul(e).sum()).backward());
      close(got.go!, c.dataSync());
      close(got.gi!, cW(c, lin.weight.detach())); // the Linear's part alone, without e
      // x.grad = 3 · c W + e: the replaced grad_input flows on
      close(x.grad!.dataSync(), loom.tensor(cW(c, lin.weight.detach()), { dtype: "float32" }).reshape([4, 3]).mul(3).add(e).dataSync());
    });
  }
});

describe("backward hooks on other signatures", () => {
  test("a module called with two arguments raises instead of a partial grad tuple", () => {
    class Two extends nn.Module {
      override forward_lazy<S extends loom.TensorOps<S>>(a: S, b: S): S { return a.add(b); }
    }
    const m = new Two();
    m.register_full_backward_hook(() => {});
    expect(() => m.call(loom.ones([2]), loom.ones([2]))).toThrow(/backward hooks take a module called with one tensor; got 2/);
  });
});
