/**
 * Loom's own float32 GEMM for C = op(A)·op(B) (native/kernels/sgemm.c): every element must be the
 * chain c = fl(a₀·b₀), c = fma(aₖ, bₖ, c) for k = 1..K-1, bit for bit, whatever the shape takes
 * from the kernel (AVX-512 or AVX2, whichever this CPU runs): row tails (M % 8, M % 6), masked
 * column tails (N % 32, N % 16), k blocks (K > 512, partial sums stored and reloaded), packed
 * panels (AVX-512: rows of B 4 KiB apart with 128 rows or more, or 8 KiB apart; AVX2: always, in
 * blocks of 512 columns, and A in blocks of 240 rows), transposed operands (B transposed into its
 * panels 16×16 or 8×8 at a time). The
 * reference is that chain computed here with an exact fmaf (below), so a kernel that reorders,
 * splits or skips a step fails. Also: a product cut into column blocks
 * (of 16 columns or more, as the pool's chunks) gives the columns of the whole product (narrower
 * products stay on BLAS), −0 products stay −0 as in the
 * one-row gemv, eager equals lazy, and the result is within the float32 dot-product bound of a
 * float64 reference.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { NATIVE, nativeOrSkip } from "./helpers.ts";

/**
 * fmaf(a, b, c) of float32 values, correctly rounded: a·b is exact in double (48 bits), the sum
 * s = fl64(a·b + c) has the error e (TwoSum); rounding s to float32 is then correct except when s
 * is a midpoint between two float32 values and e ≠ 0, where e decides the side.
 */
function fmaf(a: number, b: number, c: number): number {
  const p = a * b;
  const s = p + c;
  const bb = s - p;
  const e = (p - (s - bb)) + (c - bb);
  const r = Math.fround(s);
  if (e === 0 || r === s || !Number.isFinite(s)) return r;
  const d = s - r; // exact: r is the float32 nearest s
  const other = r + 2 * d;
  if (Math.fround(other) !== other) return r; // s is not a midpoint: r is right
  return Math.sign(e) === Math.sign(d) ? other : r;
}

/** The sequential chain for C = A·B, A [M, K], B [K, N] row-major values. */
function chain(av: ArrayLike<number>, bv: ArrayLike<number>, M: number, N: number, K: number): Float32Array {
  const out = new Float32Array(M * N);
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let c = Math.fround(av[i * K]! * bv[j]!);
      for (let k = 1; k < K; k++) c = fmaf(av[i * K + k]!, bv[k * N + j]!, c);
      out[i * N + j] = c;
    }
  }
  return out;
}

const bitsOf = (v: ArrayLike<number>) => Array.from(new Uint32Array(Float32Array.from(v).buffer));

describe.skipIf(!NATIVE)("sgemm: C = A·B in float32, the fma chain per element", () => {
  nativeOrSkip();

  test("fmaf reference: double rounding cases are decided by the exact sum", () => {
    // 1 + 2^-24 is a float32 midpoint; + 2^-60 must round up, − 2^-60 down (fl64 alone gives the midpoint)
    const a = Math.fround(1 + 2 ** -23), b = Math.fround(1 - 2 ** -23); // a·b = 1 − 2^-46
    expect(fmaf(a, b, Math.fround(2 ** -24))).toBe(Math.fround(1)); // 1 − 2^-46 + 2^-24 rounds to 1
    expect(fmaf(1, 1, Math.fround(2 ** -24))).toBe(1); // the tie 1 + 2^-24 goes to even: 1
    expect(fmaf(Math.fround(1 + 2 ** -12), Math.fround(1 + 2 ** -12), 0)).toBe(Math.fround(1 + 2 ** -11)); // 1 + 2^-11 + 2^-24 (tie, exact): even
  });

  const shapes: [string, number, number, number][] = [
    ["K = 1, 16 columns", 2, 16, 1],
    ["tails in every dim", 9, 33, 17],
    ["two k blocks (K 600)", 13, 70, 600],
    ["packed panels, 4 KiB rows and 130 rows", 130, 1030, 40],
    ["packed panels, 8 KiB rows, two k blocks", 20, 2100, 530],
    ["W5's shape, unpacked", 64, 1024, 96],
    ["rows in three A blocks (AVX2), column tails", 500, 45, 24],
  ];
  for (const [name, M, N, K] of shapes) {
    test(`${name}: [${M}, ${K}]·[${K}, ${N}] equals the chain bit for bit, eager and lazy`, () => {
      loom.manual_seed(M * 7 + N + K);
      const a = loom.randn([M, K]), b = loom.randn([K, N]);
      const eager = a.matmul(b);
      const lazy = a.lazy().matmul(b.lazy()).eval();
      const want = bitsOf(chain(a.dataSync(), b.dataSync(), M, N, K));
      expect(bitsOf(eager.dataSync())).toEqual(want);
      expect(bitsOf(lazy.dataSync())).toEqual(want);
    });
  }

  // transposed operands (x·Wᵀ, xᵀ·dy): the same chain over the logical A and B, so the same bits
  // as the product of the contiguous copies; tails in every dim, k tails that are not a multiple
  // of the 16×16 transposes, two k blocks
  const transposed: [string, boolean, boolean, number, number, number][] = [
    ["a·bᵀ, tails everywhere", false, true, 9, 33, 17],
    ["a·bᵀ, two k blocks, K % 16 = 8", false, true, 13, 70, 600],
    ["a·bᵀ, W5's shape", false, true, 64, 1024, 96],
    ["aᵀ·b, tails everywhere", true, false, 11, 47, 19],
    ["aᵀ·b, two k blocks", true, false, 20, 40, 530],
    ["aᵀ·bᵀ", true, true, 10, 18, 35],
  ];
  for (const [name, ta, tb, M, N, K] of transposed) {
    test(`${name}: [${M}, ${K}]·[${K}, ${N}] equals the chain and the contiguous product, eager and lazy`, () => {
      loom.manual_seed(M * 5 + N + K);
      const a = ta ? loom.randn([K, M]).t() : loom.randn([M, K]), b = tb ? loom.randn([N, K]).t() : loom.randn([K, N]);
      const want = bitsOf(chain(a.contiguous().dataSync(), b.contiguous().dataSync(), M, N, K));
      expect(bitsOf(a.matmul(b).dataSync())).toEqual(want);
      expect(bitsOf(a.contiguous().matmul(b.contiguous()).dataSync())).toEqual(want);
      expect(bitsOf(a.lazy().matmul(b.lazy()).eval().dataSync())).toEqual(want);
    });
  }

  test("linear (x·Wᵀ + b) takes the transposed path: the bits of the chain, then + b", () => {
    loom.manual_seed(11);
    const x = loom.randn([24, 70]), w = loom.randn([40, 70]), bias = loom.randn([40]);
    const prod = chain(x.dataSync(), w.t().contiguous().dataSync(), 24, 40, 70);
    const bv = bias.dataSync();
    const want = bitsOf(prod.map((v, i) => Math.fround(v + bv[i % 40]!)));
    expect(bitsOf(loom.linear(x, w, bias).dataSync())).toEqual(want);
    expect(bitsOf((loom.linear(x.lazy(), w.lazy(), bias.lazy()) as loom.LazyTensor).eval().dataSync())).toEqual(want);
  });

  test("column blocks give the columns of the whole product; −0 products stay −0", () => {
    loom.manual_seed(3);
    const M = 40, N = 100, K = 77;
    const a = loom.randn([M, K]), b = loom.randn([K, N]);
    const whole = Array.from(a.matmul(b).dataSync());
    for (const [j0, n] of [[0, 37], [37, 16], [53, 47]] as const) { // blocks of 16 columns or more, as matmul.c cuts them
      const part = a.matmul(b.narrow(1, j0, n)).dataSync(); // b's columns in place: ldb stays N
      for (let i = 0; i < M; i++) for (let j = 0; j < n; j++) expect(Object.is(part[i * n + j], whole[i * N + j0 + j])).toBe(true);
    }
    // a row of −0 times anything positive: every product is −0, so the chain ends in −0 (a mul
    // first, as the one-row gemv; fma(−0, x, +0) would give +0)
    const f32 = { dtype: "float32" as const };
    const z = loom.tensor([[-0, -0, -0], [1, 2, 3]], f32), p = loom.tensor([[1, 2], [3, 4], [5, 6]], f32).repeat([1, 8]); // 16 columns
    const y = z.matmul(p).dataSync();
    expect(Array.from(y.slice(0, 16)).every((v) => Object.is(v, -0))).toBe(true);
    expect(Array.from(y.slice(16, 18))).toEqual([22, 28]);
    const one = z.narrow(0, 0, 1).matmul(p).dataSync(); // M = 1: the gemv, the same bits
    expect(Array.from(one).every((v) => Object.is(v, -0))).toBe(true);
  });

  test("within the float32 dot-product bound of a float64 reference (K 1100, packed)", () => {
    loom.manual_seed(5);
    const M = 17, N = 2050, K = 1100;
    const a = loom.randn([M, K]), b = loom.randn([K, N]);
    const got = a.matmul(b).dataSync();
    const av = a.dataSync(), bv = b.dataSync();
    let worst = 0;
    for (let i = 0; i < M; i++) {
      for (let j = 0; j < N; j += 7) {
        let s = 0, m = 0;
        for (let k = 0; k < K; k++) { const q = av[i * K + k]! * bv[k * N + j]!; s += q; m += Math.abs(q); }
        // |Σ fl − Σ| ≤ K·2^-24·Σ|a·b| (Higham, Accuracy and Stability, eq. 3.5)
        worst = Math.max(worst, Math.abs(got[i * N + j]! - s) / (K * 2 ** -24 * m));
      }
    }
    expect(worst).toBeLessThan(1);
    expect(worst).toBeGreaterThan(0); // not the float64 value: float32 arithmetic ran
  });
});
