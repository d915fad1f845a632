/**
 * Index ops at their edges, on every backend (js, native, webgpu when available), eager and lazy:
 * - gather / index_select / scatter_add / index_add with 0-d operands: PyTorch's shapes, values
 *   and gradients (goldens from gen_index_ops.py, torch 1.13); native used to read shape[dim] and
 *   stride[dim] of a 0-d tensor, i.e. uninitialized memory;
 * - negative indices are out of bounds (they used to wrap around), with typed errors naming the op,
 *   the index and the size; cross_entropy targets and one_hot values likewise;
 * - lazy view() rejects strides it cannot view, as eager does (it used to copy silently).
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { LoomIndexError, LoomShapeError, LoomValueError, type TensorOps } from "../../src/index.ts";
import { BACKENDS, WEBGPU, useBackend, type BackendName } from "../backends.ts";
import golden from "./index_ops.json";
import { thrown } from "../thrown.ts";

type T = TensorOps<any>;
interface Target { readonly name: string; readonly backend: BackendName; readonly device: "cpu" | "webgpu" }
const TARGETS: [string, Target][] = [
  ...BACKENDS.map((b): [string, Target] => [b, { name: b, backend: b, device: "cpu" }]),
  ...(WEBGPU ? [["webgpu", { name: "webgpu", backend: "js", device: "webgpu" }] as [string, Target]] : []),
];
const MODES = ["eager", "lazy"] as const;


/** `fn` throws `type` with exactly `message` (webgpu adds where it detected a bad index). */
function expectError(fn: () => unknown, type: new (...a: any[]) => Error, message: string): void {
  const e = thrown(fn);
  expect(e.message.replace(/ \(detected on the webgpu device\)$/, "")).toBe(message);
  expect(e).toBeInstanceOf(type);
}

interface Rec { shape: number[]; data: number[] }
interface Case { op: string; dim: number; x: Rec; index: Rec; src: Rec | null; out: Rec; grad_x: Rec; grad_src: Rec | null }
const CASES = Object.entries((golden as { cases: Record<string, Case> }).cases);

function applyOp(op: string, x: T, dim: number, index: T, src: T | null): T {
  if (op === "gather") return x.gather(dim, index);
  if (op === "index_select") return x.index_select(dim, index);
  if (op === "scatter_add") return x.scatter_add(dim, index, src!);
  return x.index_add(dim, index, src!);
}

describe.each(TARGETS)("%s", (_name, target) => {
  useBackend(target.backend);
  const dev = (t: loom.Tensor) => (target.device === "cpu" ? t : t.to("webgpu"));
  const floats = (r: Rec) => dev(loom.tensor(r.data, { dtype: "float32" }).reshape(r.shape));
  const ints = (r: Rec) => dev(loom.tensor(r.data, { dtype: "int64" }).reshape(r.shape));
  const values = (t: T) => Array.from(t.dataSync() as ArrayLike<number>);

  for (const mode of MODES) {
    const lift = (t: loom.Tensor): T => (mode === "lazy" ? t.lazy() : t);

    describe(`${mode}: 0-d operands as PyTorch`, () => {
      for (const [name, c] of CASES) {
        test(name, () => {
          const x = floats(c.x).requires_grad_();
          const src = c.src ? floats(c.src).requires_grad_() : null;
          const out = applyOp(c.op, lift(x), c.dim, lift(ints(c.index)), src ? lift(src) : null);
          expect([...out.shape]).toEqual(c.out.shape);
          expect(values(out)).toEqual(c.out.data);
          // upstream gradient 1, 2, ..., numel (as the generator's)
          const g = dev(loom.arange(1, out.numel() + 1).float().reshape([...out.shape]));
          out.mul(lift(g)).sum().backward();
          expect([...x.grad!.shape]).toEqual(c.grad_x.shape);
          expect(values(x.grad!)).toEqual(c.grad_x.data);
          if (src) {
            expect([...src.grad!.shape]).toEqual(c.grad_src!.shape);
            expect(values(src.grad!)).toEqual(c.grad_src!.data);
          }
        });
      }

      test("scatter_add: src larger than index gets zero gradient where it is not read", () => {
        // out = x + src[0] at index 0 (0-d index = [1]); d out/d src = [1, 0] times upstream 1
        const x = floats({ shape: [], data: [5] }).requires_grad_();
        const src = floats({ shape: [2], data: [7, 8] }).requires_grad_();
        const out = lift(x).scatter_add(0, lift(ints({ shape: [], data: [0] })), lift(src));
        expect(values(out)).toEqual([12]);
        out.backward();
        expect(values(src.grad!)).toEqual([1, 0]);
        // [1, 2, 3] + 10 at position 2; upstream [1, 2, 3]: grad src = [g[2], 0] = [3, 0]
        const y = floats({ shape: [3], data: [1, 2, 3] });
        const s2 = floats({ shape: [2], data: [10, 20] }).requires_grad_();
        const o2 = lift(y).scatter_add(0, lift(ints({ shape: [], data: [2] })), lift(s2));
        expect(values(o2)).toEqual([1, 2, 13]);
        o2.mul(lift(dev(loom.tensor([1, 2, 3], { dtype: "float32" })))).sum().backward();
        expect(values(s2.grad!)).toEqual([3, 0]);
      });

      test("shape errors with 0-d operands (at record time)", () => {
        const x0 = lift(floats({ shape: [], data: [5] }));
        // torch: "Index tensor must have the same number of dimensions as input tensor"
        expectError(() => lift(dev(loom.ones([2, 3]))).gather(0, lift(ints({ shape: [], data: [1] }))), LoomShapeError,
          "[gather] index [] does not fit input [2, 3] at dim 0: same number of dims, sizes must be <= except at dim");
        // torch 2: "index_select(): Index to scalar can have only 1 value, got 2 value(s)"
        expectError(() => x0.index_select(0, lift(ints({ shape: [2], data: [0, 0] }))), LoomIndexError,
          "[index_select] index to a 0-d tensor can have only 1 value, got 2");
        // torch: "index_add_(): Indexing dim 1 is out of bounds of the source tensor with dim 1"
        expectError(() => lift(dev(loom.zeros([2, 3]))).index_add(1, lift(ints({ shape: [], data: [2] })), lift(dev(loom.ones([2])))), LoomShapeError,
          "[index_add] source [2] does not match input [2, 3] with 1 indices at dim 1");
      });

      test("a 0-d input has one position: index 1 and -1 are out of bounds", () => {
        const x0 = lift(floats({ shape: [], data: [5] }));
        const i0 = (v: number) => lift(ints({ shape: [], data: [v] }));
        // torch: "index 1 is out of bounds for dimension 0 with size 1"
        expectError(() => x0.gather(0, i0(1)).tolist(), LoomIndexError, "[gather] index 1 is out of bounds for dimension 0 with size 1");
        expectError(() => x0.gather(-1, i0(-1)).tolist(), LoomIndexError, "[gather] index -1 is out of bounds for dimension 0 with size 1");
        expectError(() => x0.index_select(0, i0(1)).tolist(), LoomIndexError, "[index_select] index 1 is out of bounds for dimension 0 with size 1");
        expectError(() => x0.scatter_add(0, i0(1), x0).tolist(), LoomIndexError, "[scatter_add] index 1 is out of bounds for dimension 0 with size 1");
        expectError(() => x0.index_add(0, i0(-1), x0).tolist(), LoomIndexError, "[index_add] index -1 is out of bounds for dimension 0 with size 1");
      });
    });

    describe(`${mode}: negative indices do not wrap`, () => {
      const x = () => lift(floats({ shape: [3], data: [10, 20, 30] }));
      const neg = () => lift(ints({ shape: [2], data: [0, -1] }));
      // torch: gather/scatter_add "index -1 is out of bounds for dimension 0 with size 3",
      // index_select/index_add/embedding "index out of range in self"
      test("gather", () => {
        expectError(() => x().gather(0, neg()).tolist(), LoomIndexError, "[gather] index -1 is out of bounds for dimension 0 with size 3");
      });
      test("index_select", () => {
        expectError(() => x().index_select(0, neg()).tolist(), LoomIndexError, "[index_select] index -1 is out of bounds for dimension 0 with size 3");
      });
      test("embedding", () => {
        const w = lift(floats({ shape: [3, 2], data: [1, 2, 3, 4, 5, 6] }));
        expectError(() => loom.embedding(neg(), w).tolist(), LoomIndexError, "[embedding] index -1 is out of bounds for dimension 0 with size 3");
        expectError(() => loom.embedding(lift(ints({ shape: [1], data: [3] })), w).tolist(), LoomIndexError, "[embedding] index 3 is out of bounds for dimension 0 with size 3");
      });
      test("scatter_add and index_add", () => {
        const src = () => lift(floats({ shape: [2], data: [1, 1] }));
        expectError(() => x().scatter_add(0, neg(), src()).tolist(), LoomIndexError, "[scatter_add] index -1 is out of bounds for dimension 0 with size 3");
        expectError(() => x().index_add(0, neg(), src()).tolist(), LoomIndexError, "[index_add] index -1 is out of bounds for dimension 0 with size 3");
      });
    });

    describe(`${mode}: cross_entropy targets outside [0, C)`, () => {
      const logits = () => lift(dev(loom.zeros([2, 3])));
      const tgt = (...v: number[]) => lift(ints({ shape: [v.length], data: v }));
      // torch: IndexError "Target -1 is out of bounds." (ignore_index defaults to -100)
      test("target -1 is not ignore_index: raises", () => {
        expectError(() => loom.cross_entropy(logits(), tgt(0, -1)).item(), LoomIndexError, "[cross_entropy] Target -1 is out of bounds.");
        expectError(() => loom.cross_entropy(logits(), tgt(0, -1), { reduction: "none" }).tolist(), LoomIndexError, "[cross_entropy] Target -1 is out of bounds.");
        const w = lift(floats({ shape: [3], data: [1, 2, 3] }));
        expectError(() => loom.cross_entropy(logits(), tgt(0, -1), { weight: w }).item(), LoomIndexError, "[cross_entropy] Target -1 is out of bounds.");
        expectError(() => loom.cross_entropy(logits(), tgt(3, 0)).item(), LoomIndexError, "[cross_entropy] Target 3 is out of bounds.");
        expectError(() => loom.cross_entropy(lift(dev(loom.zeros([3]))), lift(ints({ shape: [], data: [-1] }))).item(), LoomIndexError, "[cross_entropy] Target -1 is out of bounds.");
      });
      test("the ignore_index itself is ignored", () => {
        // uniform logits over 3 classes: every counted target costs -log(1/3) = log 3
        expect(loom.cross_entropy(logits(), tgt(0, -1), { ignore_index: -1 }).item()).toBeCloseTo(Math.log(3), 6);
        expect(loom.cross_entropy(logits(), tgt(0, -100)).item()).toBeCloseTo(Math.log(3), 6);
      });
    });

    describe(`${mode}: one_hot values outside [0, num_classes)`, () => {
      const v = (...a: number[]) => lift(ints({ shape: [a.length], data: a }));
      // torch: "Class values must be smaller than num_classes." / "Class values must be non-negative."
      test("raise, as eager always did", () => {
        expectError(() => loom.one_hot(v(0, 3), 3).tolist(), LoomValueError, "[one_hot] class values must be smaller than num_classes (3), got 3");
        expectError(() => loom.one_hot(v(0, -1), 3).tolist(), LoomValueError, "[one_hot] class values must be non-negative");
        expectError(() => loom.one_hot(v(0, -1)).tolist(), LoomValueError, "[one_hot] class values must be non-negative");
      });
      test("valid values", () => {
        expect(loom.one_hot(v(2, 0), 3).tolist()).toEqual([[0, 0, 1], [1, 0, 0]]);
        expect(loom.one_hot(v(1, 0)).tolist()).toEqual([[0, 1], [1, 0]]);
      });
    });
  }
});

describe.each(TARGETS)("lazy view() checks strides as eager does (%s)", (_name, target) => {
  useBackend(target.backend);
  const dev = (t: loom.Tensor) => (target.device === "cpu" ? t : t.to("webgpu"));
  const x = () => dev(loom.arange(6).float().reshape(2, 3));
  // torch: "view size is not compatible with input tensor's size and stride (at least one dimension
  // spans across two contiguous subspaces). Use .reshape(...) instead."
  const msg = (shape: string, size: string, stride: string) =>
    `[view] view size ${shape} is not compatible with input tensor's size ${size} and stride [${stride}] (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.`;

  test("views over an eager buffer and over an op result", () => {
    for (const [name, make] of [["eager", () => x()], ["lazy source", () => x().lazy()], ["op result", () => x().lazy().add(1)]] as const) {
      const base = make() as T;
      const e = thrown(() => base.t().view(6));
      expect([name, e.message]).toEqual([name, msg("[6]", "[3, 2]", "1, 3")]);
      expect(e).toBeInstanceOf(LoomShapeError);
      expectError(() => base.unsqueeze(-1).expand(2, 3, 2).view(12), LoomShapeError, msg("[12]", "[2, 3, 2]", "3, 1, 0"));
      expectError(() => base.narrow(1, 0, 2).view(4), LoomShapeError, msg("[4]", "[2, 2]", "3, 1"));
      // possible views still work: x = [[0, 1, 2], [3, 4, 5]] (+1 for the op result)
      const k = name === "op result" ? 1 : 0;
      const plus = (a: number[]) => a.map((v) => v + k);
      expect(base.t().view(3, 1, 2).tolist()).toEqual([[plus([0, 3])], [plus([1, 4])], [plus([2, 5])]]);
      expect(base.narrow(0, 1, 1).view(3).tolist()).toEqual(plus([3, 4, 5]));
      // reshape copies what it cannot view, so the copy is contiguous and views freely
      expect(base.t().reshape(6).view(2, 3).tolist()).toEqual([plus([0, 3, 1]), plus([4, 2, 5])]);
    }
  });

  test("a lazy view of an eager transposed buffer", () => {
    expectError(() => x().t().lazy().view(6), LoomShapeError, msg("[6]", "[3, 2]", "1, 3"));
    expectError(() => x().t().lazy().permute(1, 0).t().view(6), LoomShapeError, msg("[6]", "[3, 2]", "1, 3"));
    expect(x().t().lazy().t().view(6).tolist()).toEqual([0, 1, 2, 3, 4, 5]);
  });
});
