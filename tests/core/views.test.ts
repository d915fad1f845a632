/**
 * Views: shape ops share storage when strides allow (eager), copy when they cannot, and give the
 * same values eagerly and lazily; gradients flow back through every view.
 * Expected values are derived by hand from x = arange(24).reshape(2, 3, 4), where
 * x[i][j][k] = 12i + 4j + k.
 */
import { describe, expect, test } from "bun:test";
import {
  LazyTensor, LoomShapeError, Tensor, arange, no_grad, tensor, zeros, type TensorOps,
} from "../../src/index.ts";

type T = TensorOps<any>;
const MODES: [string, (t: Tensor) => T][] = [
  ["eager", (t) => t],
  ["lazy", (t) => t.lazy()],
];

/** x[i][j][k] = 12i + 4j + k, float32. */
const x3 = () => arange(24).float().reshape(2, 3, 4);

describe("storage sharing (eager)", () => {
  test("view and reshape of a contiguous tensor alias it", () => {
    const x = arange(6).float(); // [0..5]
    const v = x.view(2, 3);
    const r = x.reshape(3, 2);
    no_grad(() => x.add_(10));
    expect(v.tolist()).toEqual([[10, 11, 12], [13, 14, 15]]);
    expect(r.tolist()).toEqual([[10, 11], [12, 13], [14, 15]]);
    // and writing through the view reaches the base
    no_grad(() => v.mul_(0));
    expect(x.tolist()).toEqual([0, 0, 0, 0, 0, 0]);
  });

  test("transpose, permute, expand, narrow, index and split are views", () => {
    const x = zeros(2, 3);
    const views = [x.t(), x.permute(1, 0), x.index(1), x.narrow(1, 1, 2), x.split(1, 0)[0]!, x.unsqueeze(0), x.index(0).expand(4, 3)];
    no_grad(() => x.add_(7));
    for (const v of views) expect((v.dataSync() as Float64Array).every((e) => e === 7)).toBe(true);
    // a view of a view writes into the base: x[1][2] is element 5 of the storage
    x.t().index(2).index(1).fill_(-1);
    expect(x.tolist()).toEqual([[7, 7, 7], [7, 7, -1]]);
  });

  test("reshape of a transposed tensor copies and reads in logical order", () => {
    const x = arange(6).float().reshape(2, 3); // [[0,1,2],[3,4,5]]
    const y = x.t().reshape(6); // x.t() = [[0,3],[1,4],[2,5]] flattened
    expect(y.tolist()).toEqual([0, 3, 1, 4, 2, 5]);
    no_grad(() => x.add_(100));
    expect(y.tolist()).toEqual([0, 3, 1, 4, 2, 5]); // a copy: unaffected
    // reshape that keeps the transposed dims together stays a view
    const z = x.t().reshape(3, 1, 2);
    no_grad(() => x.sub_(100));
    expect(z.tolist()).toEqual([[[0, 3]], [[1, 4]], [[2, 5]]]);
  });

  test("view of a non-viewable tensor throws LoomShapeError mentioning reshape", () => {
    const x = arange(6).float().reshape(2, 3);
    expect(() => x.t().view(6)).toThrow(LoomShapeError);
    expect(() => x.t().view(6)).toThrow(/reshape/);
    expect(() => x.t().view(-1)).toThrow(/\[view\] view size \[6\] is not compatible with input tensor's size \[3, 2\] and stride \[1, 3\]/);
    // splitting a dim of the transposed tensor is viewable: [3, 2] -> [3, 2, 1]
    expect(x.t().view(3, 2, 1).tolist()).toEqual([[[0], [3]], [[1], [4]], [[2], [5]]]);
  });

  test("contiguous() of a transposed tensor is a dense copy", () => {
    const x = arange(6).float().reshape(2, 3);
    const c = x.t().contiguous() as Tensor;
    expect(c._d.strides).toEqual([2, 1]);
    expect(c.tolist()).toEqual([[0, 3], [1, 4], [2, 5]]);
    no_grad(() => x.add_(1));
    expect(c.tolist()).toEqual([[0, 3], [1, 4], [2, 5]]);
    expect(c.view(6).tolist()).toEqual([0, 3, 1, 4, 2, 5]);
  });

  test("expand gives stride 0 on broadcast dims", () => {
    const e = tensor([[1], [2]]).float().expand(2, 3) as Tensor;
    expect(e._d.strides).toEqual([1, 0]);
    const f = tensor([1, 2, 3]).float().expand(4, 3) as Tensor;
    expect(f._d.strides).toEqual([0, 1]);
  });
});

describe.each(MODES)("%s views", (_mode, lift) => {
  test("permute / transpose / t / mT", () => {
    const x = lift(x3());
    const p = x.permute(2, 0, 1); // p[k][i][j] = x[i][j][k]
    expect(p.shape).toEqual([4, 2, 3]);
    expect(p.index(3, 1, 2).item()).toBe(23); // 12 + 8 + 3
    expect(p.index(1, 0, 2).item()).toBe(9); // 0 + 8 + 1
    const tr = x.transpose(0, 2); // tr[k][j][i]
    expect(tr.shape).toEqual([4, 3, 2]);
    expect(tr.index(3, 0).tolist()).toEqual([3, 15]); // x[0][0][3], x[1][0][3]
    expect(tr.index(1, 2).tolist()).toEqual([9, 21]); // x[0][2][1], x[1][2][1]
    expect(x.index(0).t().tolist()).toEqual([[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]);
    expect(x.mT.shape).toEqual([2, 4, 3]);
    expect(x.mT.index(1, 3).tolist()).toEqual([15, 19, 23]);
    expect(x.permute(-1, -3, -2).shape).toEqual([4, 2, 3]);
  });

  test("expand and expand_as", () => {
    const c = lift(tensor([[1], [2]]).float());
    expect(c.expand(2, 3).tolist()).toEqual([[1, 1, 1], [2, 2, 2]]);
    expect(c.expand(-1, 3).tolist()).toEqual([[1, 1, 1], [2, 2, 2]]);
    expect(c.expand([2, 2, 2]).tolist()).toEqual([[[1, 1], [2, 2]], [[1, 1], [2, 2]]]);
    expect(c.expand_as(lift(zeros(3, 2, 4))).shape).toEqual([3, 2, 4]);
  });

  test("squeeze / unsqueeze / flatten / unflatten", () => {
    const z = lift(zeros(1, 3, 1));
    expect(z.squeeze().shape).toEqual([3]);
    expect(z.squeeze(0).shape).toEqual([3, 1]);
    expect(z.squeeze(1).shape).toEqual([1, 3, 1]); // size 3: unchanged
    expect(z.squeeze([0, 2]).shape).toEqual([3]);
    const x = lift(x3());
    expect(x.unsqueeze(0).shape).toEqual([1, 2, 3, 4]);
    expect(x.unsqueeze(-1).shape).toEqual([2, 3, 4, 1]);
    expect(x.unsqueeze(2).shape).toEqual([2, 3, 1, 4]);
    expect(x.flatten().shape).toEqual([24]);
    expect(x.flatten(1).shape).toEqual([2, 12]);
    expect(x.flatten(0, 1).shape).toEqual([6, 4]);
    expect(x.flatten(0, 1).index(4).tolist()).toEqual([16, 17, 18, 19]); // row 4 = x[1][1]
    expect(x.unflatten(2, [2, 2]).shape).toEqual([2, 3, 2, 2]);
    expect(x.unflatten(2, [-1, 2]).index(1, 2, 1).tolist()).toEqual([22, 23]); // x[1][2][2:4]
    expect(lift(tensor(5)).flatten().shape).toEqual([1]);
  });

  test("0-d tensors: dim 0 / -1 are accepted and reduce nothing (torch)", () => {
    const s = lift(tensor(1.5, { dtype: "float32" }));
    expect(s.sum(0).item()).toBe(1.5);
    expect(s.sum(-1, true).shape).toEqual([]);
    expect(s.mean(0).item()).toBe(1.5);
    expect(s.amax(0).item()).toBe(1.5);
    expect(s.softmax(0).item()).toBe(1);
    expect(s.squeeze().shape).toEqual([]);
    expect(s.squeeze(0).shape).toEqual([]);
    expect(s.unsqueeze(0).tolist()).toEqual([1.5]);
    expect(s.unsqueeze(-1).shape).toEqual([1]);
    expect(() => s.sum(1)).toThrow(/dim 1 is out of range/);
    const x = lift(tensor(2, { dtype: "float32" })).requires_grad_();
    x.mul(x).sum(0).backward(); // d/dx x² = 2x
    expect(x.grad!.item()).toBe(4);
  });

  test("narrow", () => {
    const x = lift(x3());
    expect(x.narrow(1, 1, 2).tolist()).toEqual([
      [[4, 5, 6, 7], [8, 9, 10, 11]],
      [[16, 17, 18, 19], [20, 21, 22, 23]],
    ]);
    expect(x.narrow(-1, -2, 2).index(0, 0).tolist()).toEqual([2, 3]);
  });

  test("index: integers, negative integers, slices, null, ellipsis", () => {
    const x = lift(x3());
    expect(x.index(1).shape).toEqual([3, 4]);
    expect(x.index(1).index(0).tolist()).toEqual([12, 13, 14, 15]);
    expect(x.index(-1, 0).tolist()).toEqual([12, 13, 14, 15]);
    expect(x.index(0, -1, -1).item()).toBe(11);
    expect(x.index(0, "1:3", "::2").tolist()).toEqual([[4, 6], [8, 10]]);
    expect(x.index(0, 0, "1:5:2").tolist()).toEqual([1, 3]); // stop 5 clamps to 4
    expect(x.index(0, 0, "-3:-1").tolist()).toEqual([1, 2]);
    expect(x.index(0, 0, "2:").tolist()).toEqual([2, 3]);
    expect(x.index(0, 0, ":1").tolist()).toEqual([0]);
    expect(x.index(0, 0, "3:1").shape).toEqual([0]); // empty slice
    expect(x.index(1, { start: -2 }).tolist()).toEqual([[16, 17, 18, 19], [20, 21, 22, 23]]);
    expect(x.index({ start: 0, stop: 2, step: 1 }, { step: 2 }, 0).tolist()).toEqual([[0, 8], [12, 20]]);
    expect(x.index(null).shape).toEqual([1, 2, 3, 4]);
    expect(x.index("...", null).shape).toEqual([2, 3, 4, 1]);
    expect(x.index(":", null, 1).shape).toEqual([2, 1, 4]);
    expect(x.index("...", 1).tolist()).toEqual([[1, 5, 9], [13, 17, 21]]); // x[..., 1]
    expect(x.index(0, null, "...", -1).tolist()).toEqual([[3, 7, 11]]); // x[0, None, ..., -1]
    expect(x.index("...").shape).toEqual([2, 3, 4]);
    expect(x.index(1, "...", 2, 3).item()).toBe(23);
  });

  test("split and chunk sizes and values", () => {
    const a = lift(arange(10).float());
    expect(a.split(3).map((p) => p.tolist())).toEqual([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]);
    expect(a.split([2, 3, 5]).map((p) => p.shape[0])).toEqual([2, 3, 5]);
    expect(a.split([2, 3, 5])[1]!.tolist()).toEqual([2, 3, 4]);
    // chunk(3) of 10: pieces of ceil(10 / 3) = 4 -> [4, 4, 2] (torch.chunk)
    expect(a.chunk(3).map((p) => p.shape[0])).toEqual([4, 4, 2]);
    // chunk(4) of 6: pieces of 2 -> only 3 chunks (torch.chunk returns fewer)
    expect(lift(arange(6)).chunk(4).map((p) => p.shape[0])).toEqual([2, 2, 2]);
    const x = lift(x3());
    const cols = x.split([1, 3], -1);
    expect(cols[0]!.shape).toEqual([2, 3, 1]);
    expect(cols[1]!.index(1, 2).tolist()).toEqual([21, 22, 23]);
    expect(x.chunk(2, 1).map((p) => p.shape)).toEqual([[2, 2, 4], [2, 1, 4]]);
  });

  test("ops on non-contiguous inputs", () => {
    const a = lift(tensor([[1, 2], [3, 4]]).float());
    // aᵀa = [[1·1+3·3, 1·2+3·4], [2·1+4·3, 2·2+4·4]]
    expect(a.t().matmul(a).tolist()).toEqual([[10, 14], [14, 20]]);
    // a aᵀ = [[1+4, 3+8], [3+8, 9+16]]
    expect(a.matmul(a.t()).tolist()).toEqual([[5, 11], [11, 25]]);
    expect(a.t().add(a).tolist()).toEqual([[2, 5], [5, 8]]);
    expect(a.t().sum(1).tolist()).toEqual([4, 6]); // column sums of a
    expect(a.t().exp().log().round().tolist()).toEqual([[1, 3], [2, 4]]);
    const x = lift(x3());
    const s = x.index(":", "::2", "1::2"); // x[:, [0, 2], [1, 3]]
    expect(s.tolist()).toEqual([[[1, 3], [9, 11]], [[13, 15], [21, 23]]]);
    expect(s.mul(2).sum().item()).toBe(2 * (1 + 3 + 9 + 11 + 13 + 15 + 21 + 23));
    expect(x.permute(2, 1, 0).contiguous().sum([1, 2]).tolist()).toEqual([60, 66, 72, 78]); // sum over i,j of 12i+4j+k = 60 + 6k
    expect(x.permute(2, 1, 0).amax(0).tolist()).toEqual([[3, 15], [7, 19], [11, 23]]);
  });

  test("ops on broadcast (stride-0) inputs", () => {
    const e = lift(tensor([1, 2, 3]).float()).expand(2, 3);
    expect(e.add(lift(tensor([[10], [20]]).float())).tolist()).toEqual([[11, 12, 13], [21, 22, 23]]);
    expect(e.sum(0).tolist()).toEqual([2, 4, 6]);
    expect(e.sum(1).tolist()).toEqual([6, 6]);
    expect(e.mul(e).tolist()).toEqual([[1, 4, 9], [1, 4, 9]]);
    // e (2x3, rows [1,2,3]) @ ones(3x1) = row sums = 6
    expect(e.matmul(lift(tensor([[1], [1], [1]]).float())).tolist()).toEqual([[6], [6]]);
    expect(e.t().contiguous().tolist()).toEqual([[1, 1], [2, 2], [3, 3]]);
    expect(e.reshape(6).tolist()).toEqual([1, 2, 3, 1, 2, 3]); // needs a copy
  });

  test("gradient through x.t()[1:, 0] reaches the right elements", () => {
    const x = tensor([[1, 2, 3], [4, 5, 6]], { dtype: "float32" });
    const xl = lift(x.detach()).requires_grad_();
    // x.t() = [[x00, x10], [x01, x11], [x02, x12]]; [1:, 0] = [x01, x02]
    const loss = xl.t().index("1:", 0).mul(lift(tensor([10, 20]).float())).sum();
    loss.backward();
    expect(xl.grad!.tolist()).toEqual([[0, 10, 20], [0, 0, 0]]);
  });

  test("gradients through reshape, transpose, expand, split and index", () => {
    const w = lift(arange(6).float().reshape(3, 2)); // [[0,1],[2,3],[4,5]]
    const mk = () => lift(zeros(2, 3)).requires_grad_();
    // d/dx sum(x.reshape(3,2) * w) = w reshaped back to [2, 3]
    let x = mk();
    x.reshape(3, 2).mul(w).sum().backward();
    expect(x.grad!.tolist()).toEqual([[0, 1, 2], [3, 4, 5]]);
    // d/dx sum(x.t() * w) = wᵀ
    x = mk();
    x.t().mul(w).sum().backward();
    expect(x.grad!.tolist()).toEqual([[0, 2, 4], [1, 3, 5]]);
    // expand: d/dv sum(v.expand(2,3) * m) = column sums of m
    const v = lift(zeros(3)).requires_grad_();
    v.expand(2, 3).mul(lift(tensor([[1, 2, 3], [10, 20, 30]]).float())).sum().backward();
    expect(v.grad!.tolist()).toEqual([11, 22, 33]);
    // split: 2·(first column) + 3·(other columns)
    x = mk();
    const [a, b] = x.split([1, 2], 1);
    a!.sum().mul(2).add(b!.sum().mul(3)).backward();
    expect(x.grad!.tolist()).toEqual([[2, 3, 3], [2, 3, 3]]);
    // strided index with a new axis: x[None, :, ::2] picks columns 0 and 2
    x = mk();
    x.index(null, ":", "::2").sum().backward();
    expect(x.grad!.tolist()).toEqual([[1, 0, 1], [1, 0, 1]]);
    // permute + narrow + unsqueeze + flatten chain
    x = mk();
    x.unsqueeze(0).permute(2, 0, 1).narrow(0, 1, 2).flatten().mul(lift(tensor([1, 2, 3, 4]).float())).sum().backward();
    // permute(2,0,1) of [1,2,3] -> [3,1,2]; narrow rows 1..2 -> columns 1,2 of x; flatten order
    // (col1,row0), (col1,row1), (col2,row0), (col2,row1) -> weights 1,2,3,4
    expect(x.grad!.tolist()).toEqual([[0, 1, 3], [0, 2, 4]]);
  });
});

describe("lazy views are graph nodes", () => {
  test("a lazy view does not touch the eager source", () => {
    const x = arange(6).float().reshape(2, 3);
    const l = x.lazy().t().reshape(6);
    expect(l).toBeInstanceOf(LazyTensor);
    expect(l.eval().tolist()).toEqual([0, 3, 1, 4, 2, 5]);
    expect(x.tolist()).toEqual([[0, 1, 2], [3, 4, 5]]);
  });
});
