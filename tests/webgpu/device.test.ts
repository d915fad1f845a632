/**
 * The webgpu device itself: moving tensors, dtypes on the GPU, in-place writes, deferred index
 * errors, async readback, one queue submit per realize, and flat GPU memory over a long loop.
 * Skipped (with the reason printed by tests/backends.ts) where no WebGPU adapter exists.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { webgpuBackend } from "../../src/backends/webgpu/index.ts";
import { WEBGPU } from "../backends.ts";

const gpu = () => webgpuBackend();

describe.if(WEBGPU)("webgpu device", () => {
  test("status names the adapter", () => {
    const s = loom.webgpu_status();
    expect(s.available).toBe(true);
    expect(s.device.length).toBeGreaterThan(0);
  });

  test(".to('webgpu') / .to('cpu') round-trips every dtype it supports", () => {
    const vals = [0, 1, -2, 3.5, -0.25, 100];
    for (const dtype of ["float32", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool"] as const) {
      const c = loom.tensor(vals, { dtype });
      const g = c.to("webgpu");
      expect(g.device).toBe("webgpu");
      expect(g.dtype).toBe(dtype);
      const back = g.to("cpu");
      expect(back.device).toBe("cpu");
      expect(back.tolist()).toEqual(c.tolist());
      expect(g.tolist()).toEqual(c.tolist()); // direct readback of a GPU tensor
    }
  });

  test("float64 and out-of-range int64 are refused with LoomDtypeError", () => {
    expect(() => loom.tensor([1, 2], { dtype: "float64" }).to("webgpu")).toThrow("[to] float64 is not supported on the webgpu device");
    expect(() => loom.tensor([2 ** 40], { dtype: "int64" }).to("webgpu")).toThrow("does not fit the webgpu device's 32-bit integers");
    const x = loom.tensor([1, 2]).float().to("webgpu");
    expect(() => x.double()).toThrow(loom.LoomDtypeError);
  });

  test("half types round to nearest even on every store, as the js backend", () => {
    const a = loom.tensor([1.0009765625, 3.14159, -65519, 1e-7, 0.1], { dtype: "float32" });
    const b = loom.tensor([0.00048828125, 2.5, -17, 3e-6, 0.2], { dtype: "float32" });
    for (const dtype of ["float16", "bfloat16"] as const) {
      const [x, y] = [a.to(dtype), b.to(dtype)];
      const want = [x.add(y), x.mul(y), x.div(y), x.exp()].map((t) => t.tolist());
      const [gx, gy] = [x.to("webgpu"), y.to("webgpu")];
      const got = [gx.add(gy), gx.mul(gy), gx.div(gy), gx.exp()].map((t) => t.tolist());
      expect(got.slice(0, 2)).toEqual(want.slice(0, 2)); // exact in f32, so bit-equal after rounding
      expect((got[3] as number[]).map((v, i) => Math.abs(v - (want[3] as number[])[i]!) <= Math.abs((want[3] as number[])[i]!) * 2 ** -7)).toEqual([true, true, true, true, true]);
    }
  });

  test("integer and bool ops compute in i32 with torch's semantics", () => {
    const a = loom.tensor([7, -7, 5, -3, 0, 9]).to("webgpu");
    expect(a.floor_divide(2).tolist()).toEqual([3, -4, 2, -2, 0, 4]);
    expect(a.remainder(-4).tolist()).toEqual([-1, -3, -3, -3, 0, -3]);
    expect(a.pow(2).tolist()).toEqual([49, 49, 25, 9, 0, 81]);
    expect(a.sum().item()).toBe(11);
    expect(a.gt(0).logical_and(a.lt(8)).tolist()).toEqual([true, false, true, false, false, false]);
    expect(a.to("int8").mul(40).tolist()).toEqual([24, -24, -56, -120, 0, 104]); // wraps like Int8Array
    expect(a.to("float32").div(2).tolist()).toEqual([3.5, -3.5, 2.5, -1.5, 0, 4.5]);
  });

  test("NaN and infinities follow the js reference", () => {
    const x = loom.tensor([NaN, Infinity, -Infinity, 0, -1, 2]).to("webgpu");
    expect(x.isnan().tolist()).toEqual([true, false, false, false, false, false]);
    expect(x.relu().tolist()).toEqual([NaN, Infinity, 0, 0, 0, 2]);
    expect(x.maximum(loom.tensor([0, 0, 0, 0, 0, 0]).to("webgpu")).tolist()).toEqual([NaN, Infinity, 0, 0, 0, 2]);
    expect(x.log().tolist()).toEqual([NaN, Infinity, NaN, -Infinity, NaN, Math.fround(Math.log(2))]);
    expect(x.amax().item()).toBeNaN();
    expect(x.argmax().item()).toBe(0);
    expect(x.tanh().tolist()).toEqual([NaN, 1, -1, 0, Math.fround(Math.tanh(-1)), Math.fround(Math.tanh(2))].map((v) => (Number.isNaN(v) ? NaN : expect.closeTo(v, 6))) as never);
  });

  test("in-place ops write the GPU buffer; views see the change; aliasing copies are safe", () => {
    const x = loom.arange(6).float().reshape(2, 3).to("webgpu");
    const row = x.index(1);
    x.add_(1);
    expect(row.tolist()).toEqual([4, 5, 6]);
    row.mul_(10);
    expect(x.tolist()).toEqual([[1, 2, 3], [40, 50, 60]]);
    const sq = loom.arange(4).float().reshape(2, 2).to("webgpu");
    sq.copy_(sq.t());
    expect(sq.tolist()).toEqual([[0, 2], [1, 3]]);
    sq.zero_();
    expect(sq.tolist()).toEqual([[0, 0], [0, 0]]);
  });

  test("an out-of-range index is reported at the readback of its result as LoomIndexError", () => {
    const x = loom.randn([3, 4]).to("webgpu");
    const bad = x.gather(1, loom.tensor([[0], [4], [1]]).to("webgpu"));
    expect(() => bad.tolist()).toThrow("[gather] index 4 is out of bounds for dimension 1 with size 4 (detected on the webgpu device)");
    expect(x.gather(1, loom.tensor([[0], [3], [1]]).to("webgpu")).shape).toEqual([3, 1]); // other results are fine
    expect(() => x.index_select(0, loom.tensor([3]).to("webgpu")).dataSync()).toThrow("[index_select] index 3 is out of bounds");
  });

  test("gradients flow back across .to(device)", () => {
    const x = loom.tensor([1, 2, 3], { dtype: "float32" }).requires_grad_();
    const y = x.to("webgpu").mul(x.to("webgpu")).sum();
    y.backward();
    expect(x.grad!.device).toBe("cpu");
    expect(x.grad!.tolist()).toEqual([2, 4, 6]);
  });

  test("await t.data() reads back without blocking and sees pending work", async () => {
    const x = loom.randn([64, 32]);
    const g = x.to("webgpu").mul(2).add(1);
    const pending = g.data();
    let ticked = false;
    setTimeout(() => { ticked = true; }, 0);
    const v = await pending;
    const want = x.mul(2).add(1).dataSync();
    expect(Array.from(v)).toEqual(Array.from(want));
    expect(typeof ticked).toBe("boolean");
  });

  test("one realize is one queue submit, whatever the number of kernels", () => {
    const b = gpu();
    const a = loom.randn([8, 16]).to("webgpu").lazy();
    const w = loom.randn([16, 4]).to("webgpu").lazy();
    let y = a.matmul(w).relu();
    for (let i = 0; i < 10; i++) y = y.mul(1.01).add(0.5).tanh();
    const loss = y.softmax(-1).sum();
    b.flush();
    const s0 = b.stats();
    const t = loss.eval();
    const s1 = b.stats();
    expect(s1.submits - s0.submits).toBe(1);
    expect(s1.dispatches - s0.dispatches).toBeGreaterThan(0); // fused: fewer kernels than ops
    expect(s1.readbacks).toBe(s0.readbacks);
    t.item(); // the readback is one more submit (the copy) and one map
    expect(b.stats().submits - s1.submits).toBe(1);
    expect(b.stats().readbacks - s1.readbacks).toBe(1);
  });

  test("GPU memory stays flat over a long training loop (buffers return to the pool)", () => {
    const b = gpu();
    const pool = b.q.pool;
    const prevSweep = pool.sweepFloor;
    pool.sweepFloor = 2 ** 20; // sweep often so the test needs few steps
    try {
      loom.manual_seed(0);
      const W = loom.randn([32, 16]).mul(0.1).to("webgpu").requires_grad_();
      const x = loom.randn([64, 32]).to("webgpu");
      const target = loom.randn([64, 16]).to("webgpu");
      const step = () => {
        const loss = x.matmul(W).tanh().sub(target).pow(2).mean();
        loss.backward();
        loom.no_grad(() => W.sub_(W.grad!.mul(0.1)));
        W.grad = null;
        return loss;
      };
      let first = 0;
      for (let i = 0; i < 100; i++) first = step().item();
      const created = b.stats().memory.created;
      const pooled = b.stats().memory.pooledBytes;
      let last = 0;
      for (let i = 0; i < 300; i++) last = step().item();
      expect(last).toBeLessThan(first);
      // each step allocates ~20 buffers: 300 steps without reuse would create ~6000
      expect(b.stats().memory.created - created).toBeLessThan(20);
      expect(b.stats().memory.pooledBytes).toBeLessThan(pooled * 1.1);
    } finally {
      pool.sweepFloor = prevSweep;
    }
  }, 60_000);
});
