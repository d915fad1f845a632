/**
 * In-place ops. Eager: the storage is written, so every view of it sees the change (torch).
 * Lazy: the LazyTensor is rebound to the new value; other lazy tensors keep the old one.
 * Both refuse to modify a tensor that requires grad while grad mode is on.
 */
import { describe, expect, test } from "bun:test";
import {
  LazyTensor, LoomAutogradError, LoomDtypeError, LoomShapeError, LoomValueError, Tensor, arange, no_grad, tensor,
  zeros, type TensorOps,
} from "../../src/index.ts";
import { readerCount } from "../../src/lazy/readers.ts";
import { BACKENDS, useBackend } from "../backends.ts";

type T = TensorOps<any>;
const MODES: [string, (t: Tensor) => T][] = [
  ["eager", (t) => t],
  ["lazy", (t) => t.lazy()],
];
const f32 = (v: number[] | number[][]) => tensor(v, { dtype: "float32" });

describe.each(MODES)("%s values", (_mode, lift) => {
  test("add_ / sub_ / mul_ / div_ / clamp_ compute like their out-of-place forms", () => {
    const x = lift(f32([1, 2, 3]));
    expect(x.add_(1)).toBe(x); // returns this
    expect(x.tolist()).toEqual([2, 3, 4]);
    x.mul_(lift(f32([1, 10, 100])));
    expect(x.tolist()).toEqual([2, 30, 400]);
    x.sub_(lift(f32([1, 1, 1])), { alpha: 2 }); // x - 2·1
    expect(x.tolist()).toEqual([0, 28, 398]);
    x.div_(2);
    expect(x.tolist()).toEqual([0, 14, 199]);
    x.clamp_(1, 100);
    expect(x.tolist()).toEqual([1, 14, 100]);
    x.add_(1).mul_(2); // chaining
    expect(x.tolist()).toEqual([4, 30, 202]);
  });

  test("copy_ / zero_ / fill_ / masked_fill_ with broadcasting and dtype conversion", () => {
    const x = lift(zeros(2, 3));
    x.copy_(lift(f32([1, 2, 3]))); // broadcast over rows
    expect(x.tolist()).toEqual([[1, 2, 3], [1, 2, 3]]);
    x.fill_(7.5);
    expect(x.tolist()).toEqual([[7.5, 7.5, 7.5], [7.5, 7.5, 7.5]]);
    x.masked_fill_(lift(tensor([[true, false, false], [false, false, true]])), -1);
    expect(x.tolist()).toEqual([[-1, 7.5, 7.5], [7.5, 7.5, -1]]);
    x.zero_();
    expect(x.tolist()).toEqual([[0, 0, 0], [0, 0, 0]]);
    x.copy_(3);
    expect(x.tolist()).toEqual([[3, 3, 3], [3, 3, 3]]);
    // copy_ converts: float -> int truncates toward zero, int -> float exact
    const i = lift(tensor([0, 0, 0]));
    i.copy_(lift(f32([1.7, -1.7, 2.5])));
    expect(i.dtype).toBe("int64");
    expect(i.tolist()).toEqual([1, -1, 2]);
    i.fill_(2.9); // fill_ converts like copy_ (torch: tensor([2, 2, 2]))
    expect(i.tolist()).toEqual([2, 2, 2]);
    const h = lift(zeros([2], { dtype: "float16" }));
    h.copy_(lift(f32([0.1, 65519])));
    expect(h.tolist()).toEqual([0.0999755859375, 65504]);
  });

  test("dtype is kept; results that cannot be cast back are refused (torch canCast)", () => {
    const i = lift(tensor([1, 2]));
    i.add_(lift(tensor([1, 1], { dtype: "int32" }))); // int64 result: fine
    expect(i.dtype).toBe("int64");
    expect(i.tolist()).toEqual([2, 3]);
    // torch: "result type Float can't be cast to the desired output type Long"
    expect(() => i.add_(1.5)).toThrow(LoomDtypeError);
    expect(() => i.div_(2)).toThrow("[div_] result type float32 can't be cast to the desired output type int64");
    expect(() => lift(tensor([true])).add_(1)).toThrow(LoomDtypeError);
    expect(i.tolist()).toEqual([2, 3]); // unchanged by the refused ops
    const f = lift(f32([1, 2]));
    f.mul_(lift(tensor([2, 3]))); // int operand into a float tensor: fine
    expect(f.tolist()).toEqual([2, 6]);
  });

  test("an operand that broadcasts past this shape is refused", () => {
    const x = lift(zeros(3));
    expect(() => x.add_(lift(zeros(2, 3)))).toThrow(LoomShapeError);
  });
});

describe("eager: views see in-place changes", () => {
  test("writes through the base reach views, writes through views reach the base", () => {
    const base = arange(6).float().reshape(2, 3); // [[0,1,2],[3,4,5]]
    const row = base.index(1);
    const col = base.t().index(0); // column 0: [0, 3]
    const flat = base.view(6);
    base.add_(10);
    expect(row.tolist()).toEqual([13, 14, 15]);
    expect(col.tolist()).toEqual([10, 13]);
    row.zero_();
    expect(base.tolist()).toEqual([[10, 11, 12], [0, 0, 0]]);
    col.fill_(-1);
    expect(flat.tolist()).toEqual([-1, 11, 12, -1, 0, 0]);
    base.index(":", "1:").mul_(2);
    expect(base.tolist()).toEqual([[-1, 22, 24], [-1, 0, 0]]);
    base.index(0, "::2").copy_(f32([5, 6]));
    expect(flat.tolist()).toEqual([5, 22, 6, -1, 0, 0]);
  });

  test("copy_ between overlapping views reads the source before writing", () => {
    const a = f32([[1, 2], [3, 4]]);
    a.copy_(a.t());
    expect(a.tolist()).toEqual([[1, 3], [2, 4]]);
    const b = f32([[1, 2], [3, 4]]);
    b.t().copy_(b); // writes bᵀ := b, i.e. b := bᵀ
    expect(b.tolist()).toEqual([[1, 3], [2, 4]]);
    const c = arange(5).float();
    c.index("1:").copy_(c.index(":4")); // shift right by one
    expect(c.tolist()).toEqual([0, 0, 1, 2, 3]);
  });

  test("writing into a broadcast (stride-0) view is refused", () => {
    const x = zeros(3);
    const e = x.expand(2, 3);
    expect(() => e.add_(1)).toThrow(LoomValueError);
    expect(() => e.copy_(f32([[1, 2, 3], [4, 5, 6]]))).toThrow(/more than one element of the written-to tensor refers to a single memory location/);
    expect(x.tolist()).toEqual([0, 0, 0]);
    x.unsqueeze(0).add_(1); // size-1 dims are fine
    expect(x.tolist()).toEqual([1, 1, 1]);
  });

  test("detach shares storage", () => {
    const x = f32([1, 2]).requires_grad_();
    const d = x.detach();
    d.add_(1); // d does not require grad: allowed, and x sees it (torch)
    expect(x.tolist()).toEqual([2, 3]);
  });
});

describe("lazy: in-place rebinds", () => {
  test("other lazy tensors keep the old value; the eager source is written (a deferred write, as through a view)", () => {
    const src = f32([1, 2, 3]);
    const x = src.lazy();
    const before = x.mul(1);
    const view = x.index("1:");
    const node = (x as LazyTensor).node;
    x.add_(10);
    expect((x as LazyTensor).node).not.toBe(node);
    expect(x.tolist()).toEqual([11, 12, 13]);
    expect(before.tolist()).toEqual([1, 2, 3]);
    expect(view.tolist()).toEqual([2, 3]);
    expect(src.tolist()).toEqual([11, 12, 13]);
  });

  test("a rebound tensor keeps working in later graphs", () => {
    const y = f32([1, 2]).lazy().mul(2); // pending [2, 4]
    y.add_(1);
    y.mul_(y);
    expect(y.sum().item()).toBe(9 + 25);
  });
});

describe.each(BACKENDS)("copy on write: pending lazy graphs keep the values they read (%s)", (backend) => {
  useBackend(backend);

  test("a lazy-eval output written in place: graphs recorded before the write see the old values", () => {
    // x = [1,2,3] + 1 = [2,3,4] (a compiled plan's output: pending native storage)
    const x = f32([1, 2, 3]).lazy().add(1).eval();
    const y = x.lazy().mul(2); // recorded: 2·[2,3,4] = [4,6,8]
    x.add_(100); // x = [102,103,104]; y read x before the write
    expect(y.eval().tolist()).toEqual([4, 6, 8]);
    expect(x.tolist()).toEqual([102, 103, 104]);
    expect(x.lazy().mul(2).tolist()).toEqual([204, 206, 208]); // recorded after: the new values
  });

  test("pooled buffers, views and several readers share one copy of the old values", () => {
    // 8192 float32 = 32 KiB: native pooled memory. x[i] = i + 1 (computed lazily: pending)
    const x = arange(8192).float().lazy().add(1).eval();
    const whole = x.lazy().sum(); // Σ(i+1), i < 8192 = 8192·8193/2 = 33,558,528 (exact in float32)
    const tail = x.index("8190:").lazy().mul(-1); // -[8191, 8192]
    const head = x.index(":2").lazy().mul(1); // [1, 2]
    x.fill_(0);
    expect(whole.item()).toBe(33558528);
    expect(tail.tolist()).toEqual([-8191, -8192]);
    expect(head.tolist()).toEqual([1, 2]);
    expect(x.lazy().sum().item()).toBe(0);
  });

  test("a source's reader list stays bounded over many realizes of one buffer", () => {
    const x = f32([1, 2, 3]);
    const storage = (x as Tensor)._d;
    for (let i = 0; i < 5000; i++) {
      x.lazy().mul(2).eval();
      x.index("1:").lazy().add(1).eval(); // a new view object each time, one layout
    }
    // one source node per layout (whole buffer, x[1:]); before: one per lazy() call (10,000)
    expect(readerCount(storage)).toBeLessThanOrEqual(2);
    const y = x.lazy().mul(2);
    x.add_(1);
    expect(y.tolist()).toEqual([2, 4, 6]); // copy on write still applies to the shared node
    expect(readerCount(storage)).toBe(0);
  });
});

describe.each(MODES)("%s: in-place on tensors that require grad", (_mode, lift) => {
  test("a leaf that requires grad cannot be modified under grad mode", () => {
    const w = lift(f32([1, 2])).requires_grad_();
    for (const op of [() => w.add_(1), () => w.zero_(), () => w.copy_(lift(f32([0, 0]))), () => w.mul_(2), () => w.fill_(0)]) {
      expect(op).toThrow(LoomAutogradError);
    }
    // torch: "a leaf Variable that requires grad is being used in an in-place operation."
    expect(() => w.sub_(1)).toThrow("[sub_] a leaf Variable that requires grad is being used in an in-place operation; wrap the update in no_grad()");
    expect(w.tolist()).toEqual([1, 2]);
  });

  test("under no_grad the update is allowed and the leaf stays a leaf", () => {
    const w = lift(f32([1, 2])).requires_grad_();
    w.mul(w).sum().backward(); // grad = 2w = [2, 4]
    no_grad(() => w.sub_(w.grad!.mul(0.5))); // an SGD step with lr 0.5: w - w = 0
    expect(w.tolist()).toEqual([0, 0]);
    expect(w.requires_grad).toBe(true);
    expect(w.is_leaf).toBe(true);
    // the next graph sees the new value: d/dw sum((w + 1)²) = 2(w + 1) = [2, 2]
    w.grad = null;
    w.add(1).mul(w.add(1)).sum().backward();
    expect(w.grad!.tolist()).toEqual([2, 2]);
  });

  test("a non-leaf that requires grad is refused too", () => {
    const w = lift(f32([1, 2])).requires_grad_();
    const h = w.mul(2);
    expect(() => h.add_(1)).toThrow(/in-place operations on tensors that require grad are not supported/);
    expect(() => w.index(0).zero_()).toThrow(LoomAutogradError);
  });
});

describe("known issue", () => {
  // eval() hands out the lazy node's cached buffer without a copy, so writing into the eager
  // result changes the value that later uses of the (supposedly immutable) lazy tensor see.
  // Documented semantics (docs/ARCHITECTURE.md): eval() returns a tensor sharing storage with the
  // realized lazy value (no copy, like torch's detach()), so in-place writes are visible to both.
  test("an eval() result shares storage with the realized lazy tensor, like detach()", () => {
    const a = f32([1, 2]).lazy().mul(2); // [2, 4]
    const e = a.eval();
    e.add_(1);
    expect(e.tolist()).toEqual([3, 5]);
    expect(a.tolist()).toEqual([3, 5]);
  });
});

// Values from torch 1.13:
//   x = tensor([1.,2,3]); y = tensor([2.,2,2], requires_grad=True); x.mul_(y); x.sum().backward()
//   -> x.grad_fn MulBackward0, y.grad [1, 2, 3] (the ORIGINAL x, not the overwritten one)
//   x.copy_(y * 3); x.sum().backward() -> y.grad [3, 3, 3]
describe.each(MODES)("%s: an in-place write of a value that requires grad", (_mode, lift) => {
  test("x.mul_(y): x becomes a non-leaf and y gets d(x·y)/dy = the original x", () => {
    const x = lift(f32([1, 2, 3]));
    const y = f32([2, 2, 2]).requires_grad_();
    x.mul_(lift(y));
    expect(x.requires_grad).toBe(true);
    expect(x.is_leaf).toBe(false);
    expect(x.tolist()).toEqual([2, 4, 6]);
    x.sum().backward();
    expect(y.grad!.tolist()).toEqual([1, 2, 3]);
  });
  test("x.copy_(y * 3) passes the gradient on (torch: CopyBackwards)", () => {
    const x = lift(zeros(3));
    const y = f32([1, 1, 1]).requires_grad_();
    x.copy_(lift(y).mul(3));
    x.sum().backward();
    expect(y.grad!.tolist()).toEqual([3, 3, 3]);
  });
});

test("an eager tensor written from a lazy value realizes it (was a raw TypeError)", () => {
  const x = f32([0, 0, 0]);
  x.copy_(f32([1, 2, 3]).lazy().mul(2) as never);
  expect(x.tolist()).toEqual([2, 4, 6]);
  x.add_(f32([1, 1, 1]).lazy() as never);
  expect(x.tolist()).toEqual([3, 5, 7]);
});
