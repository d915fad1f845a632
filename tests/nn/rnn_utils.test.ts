/**
 * nn.utils.rnn.pad_sequence (torch.nn.utils.rnn.pad_sequence): values and gradients hand-derived
 * below, batch_first / padding_value / padding_side, eager and lazy, on every backend.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";
import { BACKENDS, useBackend } from "../backends.ts";

// a: L=3, b: L=1, c: L=2, each [L, 2]; padded to T=3 with -1
const A = [[1, 2], [3, 4], [5, 6]], B = [[7, 8]], C = [[9, 10], [11, 12]];
const P = [-1, -1];
const RIGHT = [A, [B[0]!, P, P], [C[0]!, C[1]!, P]]; // [B=3, T=3, 2]
const LEFT = [A, [P, P, B[0]!], [P, C[0]!, C[1]!]];
const transpose01 = (x: number[][][]): number[][][] => x[0]!.map((_, t) => x.map((row) => row[t]!));

function run(lazy: boolean, opts: nn.PadSequenceOptions) {
  const seqs = [A, B, C].map((s) => loom.tensor(s).to("float32").requires_grad_(true));
  const ins = lazy ? seqs.map((s) => s.lazy()) : seqs;
  const out = nn.utils.rnn.pad_sequence(ins as loom.Tensor[], opts);
  const w = loom.arange(out.numel()).to("float32").reshape(out.shape as number[]);
  out.mul(lazy ? (w.lazy() as unknown as loom.Tensor) : w).sum().backward();
  return { out: (lazy ? (out as unknown as loom.LazyTensor).eval() : out).tolist(), shape: out.shape, grads: seqs.map((s) => s.grad!.tolist()) };
}

for (const backend of BACKENDS) {
  describe(`pad_sequence (${backend})`, () => {
    useBackend(backend);
    for (const lazy of [false, true]) {
      const mode = lazy ? "lazy" : "eager";
      test(`${mode}: batch_first, right padding`, () => {
        const r = run(lazy, { batch_first: true, padding_value: -1 });
        expect(r.shape).toEqual([3, 3, 2]);
        expect(r.out).toEqual(RIGHT);
        // grad = w at each sequence's positions, w = arange(18) over [3, 3, 2]
        expect(r.grads).toEqual([[[0, 1], [2, 3], [4, 5]], [[6, 7]], [[12, 13], [14, 15]]]);
      });
      test(`${mode}: time first (default), right padding`, () => {
        const r = run(lazy, { padding_value: -1 });
        expect(r.shape).toEqual([3, 3, 2]);
        expect(r.out).toEqual(transpose01(RIGHT));
        // w over [T, B, 2]: sequence b sits at [t, b] -> w index (t·3 + b)·2
        expect(r.grads).toEqual([[[0, 1], [6, 7], [12, 13]], [[2, 3]], [[4, 5], [10, 11]]]);
      });
      test(`${mode}: left padding`, () => {
        const r = run(lazy, { batch_first: true, padding_value: -1, padding_side: "left" });
        expect(r.out).toEqual(LEFT);
        expect(r.grads).toEqual([[[0, 1], [2, 3], [4, 5]], [[10, 11]], [[14, 15], [16, 17]]]);
      });
    }
    test("default padding value 0, int64 sequences, one sequence", () => {
      const a = loom.tensor([1, 2, 3], { dtype: "int64" }), b = loom.tensor([4], { dtype: "int64" });
      const out = nn.utils.rnn.pad_sequence([a, b], { batch_first: true });
      expect(out.dtype).toBe("int64");
      expect(out.tolist()).toEqual([[1, 2, 3], [4, 0, 0]]);
      expect(nn.utils.rnn.pad_sequence([a]).tolist()).toEqual([[1], [2], [3]]);
    });
  });
}

describe("pad_sequence: errors and nn.utils", () => {
  test("typed errors", () => {
    expect(() => nn.pad_sequence([])).toThrow(loom.LoomValueError);
    expect(() => nn.pad_sequence([loom.zeros([2, 3]), loom.zeros([2, 4])])).toThrow("[pad_sequence] sequences must share their trailing dims: [2, 3] at entry 0 and [2, 4] at entry 1");
    expect(() => nn.pad_sequence([loom.zeros([2]), loom.zeros([2], { dtype: "int64" })])).toThrow(loom.LoomDtypeError);
    expect(() => nn.pad_sequence([loom.zeros([])])).toThrow(loom.LoomShapeError);
    expect(() => nn.pad_sequence([loom.zeros([2])], { padding_side: "up" as "left" })).toThrow(loom.LoomValueError);
  });
  test("nn.utils.clip_grad_norm_ is nn.clip_grad_norm_", () => {
    expect(nn.utils.clip_grad_norm_).toBe(nn.clip_grad_norm_);
    expect(nn.utils.clip_grad_value_).toBe(nn.clip_grad_value_);
  });
});
