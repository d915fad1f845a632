/**
 * Random numbers: MT19937 against the C++ standard's reference values, seeding and determinism,
 * and the distributions of rand / randn / randint checked with statistical bounds (5 standard
 * errors on 100k samples, so a correct generator fails with probability < 1e-6 per check).
 */
import { describe, expect, test } from "bun:test";
import { Generator, default_generator, manual_seed, rand, randint, randn } from "../../src/index.ts";

const N = 100_000;
const mean = (v: Float64Array) => v.reduce((a, b) => a + b, 0) / v.length;
const variance = (v: Float64Array) => {
  const m = mean(v);
  return v.reduce((a, b) => a + (b - m) ** 2, 0) / (v.length - 1);
};

describe("MT19937", () => {
  test("seeded with 5489, the 10000th output is 4123659995 (C++ [rand.predef])", () => {
    const g = new Generator(5489);
    let last = 0;
    for (let i = 0; i < 10000; i++) last = g.random();
    expect(last).toBe(4123659995);
  });

  test("first outputs for the default seed 5489 and for seed 0", () => {
    // std::mt19937{}() == 3499211612; std::mt19937{0}() == 2357136044
    expect(new Generator(5489).random()).toBe(3499211612);
    expect(new Generator().random()).toBe(3499211612);
    const g0 = new Generator(0);
    expect([g0.random(), g0.random()]).toEqual([2357136044, 2546248239]);
  });

  test("outputs are 32-bit unsigned integers", () => {
    const g = new Generator(123);
    for (let i = 0; i < 2000; i++) {
      const v = g.random();
      expect(Number.isInteger(v) && v >= 0 && v < 2 ** 32).toBe(true);
    }
  });

  test("seeds are taken modulo 2^32", () => {
    expect(new Generator(2 ** 32 + 7).random()).toBe(new Generator(7).random());
  });
});

describe("torch compatibility", () => {
  test("torch.manual_seed(0); torch.rand(3) = [0.4963, 0.7682, 0.0885]", () => {
    // float32 uniform = (mt() & (2^24 - 1)) · 2^-24: 2357136044 & 0xFFFFFF = 8325804 -> 0.49625...
    manual_seed(0);
    const v = Array.from(rand(3).dataSync());
    expect(v[0]).toBe(8325804 / 2 ** 24);
    expect(v.map((x) => Number(x.toFixed(4)))).toEqual([0.4963, 0.7682, 0.0885]);
  });
});

describe("seeding", () => {
  test("manual_seed makes rand, randn and randint repeat", () => {
    const draw = () => [Array.from(rand(5).dataSync()), Array.from(randn(5).dataSync()), Array.from(randint(0, 100, [5]).dataSync())];
    manual_seed(42);
    const a = draw();
    manual_seed(42);
    const b = draw();
    expect(b).toEqual(a);
    manual_seed(43);
    const c = draw();
    expect(c[0]).not.toEqual(a[0]);
    expect(c[1]).not.toEqual(a[1]);
  });

  test("manual_seed discards a cached Box-Muller value", () => {
    manual_seed(7);
    const first = randn(1).item(); // draws a pair, caches the second
    manual_seed(7);
    expect(randn(1).item()).toBe(first);
  });

  test("a Generator given as option is independent of the default generator", () => {
    const g1 = new Generator(99);
    const g2 = new Generator(99);
    manual_seed(1);
    const a = rand(4, { generator: g1 }).tolist();
    rand(10); // advances the default generator only
    const b = rand(4, { generator: g2 }).tolist();
    expect(a).toEqual(b);
    expect(rand(4, { generator: g1 }).tolist()).not.toEqual(a); // g1 advanced
  });

  test("manual_seed returns the default generator; initial_seed reports the seed", () => {
    expect(manual_seed(5)).toBe(default_generator);
    expect(default_generator.initial_seed()).toBe(5);
    expect(new Generator(11).manual_seed(12).initial_seed()).toBe(12);
  });

  test("different seeds give different streams", () => {
    const seqs = new Set<string>();
    for (let s = 0; s < 20; s++) seqs.add(rand(4, { generator: new Generator(s) }).tolist().toString());
    expect(seqs.size).toBe(20);
  });
});

describe("distributions", () => {
  test("rand: in [0, 1), 24-bit grid, mean 1/2 and variance 1/12", () => {
    const v = rand(N, { generator: new Generator(1) }).dataSync();
    expect(v.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(v.every((x) => Number.isInteger(x * 2 ** 24))).toBe(true); // float32 draws use 24 bits
    // standard error of the mean: sqrt(1/12 / N) ≈ 0.00091
    expect(Math.abs(mean(v) - 0.5)).toBeLessThan(5 * Math.sqrt(1 / 12 / N));
    // variance of U(0,1) is 1/12; standard error of the sample variance: sqrt(1/180 / N) ≈ 0.00024
    expect(Math.abs(variance(v) - 1 / 12)).toBeLessThan(5 * Math.sqrt(1 / 180 / N));
    // each decile holds 10% ± 5 standard errors (sqrt(0.09 / N) ≈ 0.00095)
    const bins = new Array(10).fill(0);
    for (const x of v) bins[Math.floor(x * 10)]++;
    for (const b of bins) expect(Math.abs(b / N - 0.1)).toBeLessThan(5 * Math.sqrt(0.09 / N));
  });

  test("rand float64 uses 53 bits", () => {
    const v = rand(1000, { dtype: "float64", generator: new Generator(2) }).dataSync();
    expect(v.every((x) => x >= 0 && x < 1 && Number.isInteger(x * 2 ** 53))).toBe(true);
    expect(v.some((x) => !Number.isInteger(x * 2 ** 24))).toBe(true); // finer than float32's grid
  });

  test("randn: mean 0, std 1, 68.27% within one std, symmetric", () => {
    const v = randn(N, { dtype: "float64", generator: new Generator(3) }).dataSync();
    expect(Math.abs(mean(v))).toBeLessThan(5 / Math.sqrt(N)); // SE of the mean: 1/sqrt(N)
    // SE of the sample std of a normal: 1/sqrt(2N) ≈ 0.0022
    expect(Math.abs(Math.sqrt(variance(v)) - 1)).toBeLessThan(5 / Math.sqrt(2 * N));
    const within1 = v.filter((x) => Math.abs(x) < 1).length / N; // P(|Z| < 1) = 0.682689
    expect(Math.abs(within1 - 0.682689)).toBeLessThan(5 * Math.sqrt(0.682689 * 0.317311 / N));
    const within2 = v.filter((x) => Math.abs(x) < 2).length / N; // P(|Z| < 2) = 0.954500
    expect(Math.abs(within2 - 0.9545)).toBeLessThan(5 * Math.sqrt(0.9545 * 0.0455 / N));
    const pos = v.filter((x) => x > 0).length / N;
    expect(Math.abs(pos - 0.5)).toBeLessThan(5 * Math.sqrt(0.25 / N));
    expect(v.every(Number.isFinite)).toBe(true);
    // float32 randn has the same distribution
    const f = randn(N, { generator: new Generator(4) }).dataSync();
    expect(Math.abs(mean(f))).toBeLessThan(5 / Math.sqrt(N));
  });

  test("randint: bounds and uniform counts", () => {
    const v = randint(0, 10, [N], { generator: new Generator(5) }).dataSync();
    expect(v.every((x) => Number.isInteger(x) && x >= 0 && x < 10)).toBe(true);
    const counts = new Array(10).fill(0);
    for (const x of v) counts[x]++;
    // each count is Binomial(N, 0.1): sd = sqrt(N · 0.1 · 0.9) ≈ 95
    for (const c of counts) expect(Math.abs(c - N / 10)).toBeLessThan(5 * Math.sqrt(N * 0.09));
    const big = randint(-(2 ** 40), 2 ** 40, [1000], { generator: new Generator(6) }).dataSync();
    expect(big.every((x) => Number.isInteger(x) && x >= -(2 ** 40) && x < 2 ** 40)).toBe(true);
    expect(big.some((x) => Math.abs(x) > 2 ** 32)).toBe(true); // spans more than 32 bits
  });
});

describe("fill_normal (bulk)", () => {
  test("the same values, order and state afterwards as calls of normal(), across twists and an odd count with a spare", () => {
    for (const [seed, pre, n] of [[1, 0, 1], [2, 1, 7], [3, 0, 1250], [4, 3, 1001]] as const) {
      const a = new Generator(seed), b = new Generator(seed);
      for (let i = 0; i < pre; i++) { a.normal(); b.normal(); } // an odd pre leaves a spare to be used first
      const bulk = new Float64Array(n);
      a.fill_normal(bulk, 0.5, 2);
      const calls = Float64Array.from({ length: n }, () => 0.5 + 2 * b.normal());
      expect(Array.from(bulk)).toEqual(Array.from(calls));
      // the generators continue identically (state, position and the spare)
      expect([a.normal(), a.normal(), a.random()]).toEqual([b.normal(), b.normal(), b.random()]);
    }
  });
  test("randn and nn.init.normal_ draw the values of per-element normal() calls", () => {
    manual_seed(11);
    const x = randn([3, 5], { dtype: "float64" }).dataSync();
    const g = new Generator(11);
    expect(Array.from(x)).toEqual(Array.from({ length: 15 }, () => g.normal()));
  });
});
