/**
 * nn.init: bounds and sample statistics of every initializer (torch's formulas for gains and
 * fans), reproducibility with a generator, and the layers' default initialization.
 * Sample statistics use 20000 draws: the standard error of a mean is σ/√n ≈ 0.007σ, so the
 * 0.03–0.05 tolerances below are > 4 standard errors.
 */
import { describe, expect, test } from "bun:test";
import * as loom from "../../src/index.ts";
import { nn } from "../../src/index.ts";

const { init } = nn;

function stats(t: loom.Tensor): { min: number; max: number; mean: number; std: number } {
  const v = Array.from(t.dataSync());
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const variance = v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length;
  return { min: Math.min(...v), max: Math.max(...v), mean, std: Math.sqrt(variance) };
}

describe("gains and fans (torch formulas)", () => {
  test("calculate_gain", () => {
    expect(init.calculate_gain("linear")).toBe(1);
    expect(init.calculate_gain("conv2d")).toBe(1);
    expect(init.calculate_gain("sigmoid")).toBe(1);
    expect(init.calculate_gain("tanh")).toBe(5 / 3);
    expect(init.calculate_gain("relu")).toBe(Math.SQRT2);
    expect(init.calculate_gain("leaky_relu")).toBeCloseTo(Math.sqrt(2 / (1 + 0.01 ** 2)), 15);
    expect(init.calculate_gain("leaky_relu", 0.2)).toBeCloseTo(Math.sqrt(2 / 1.04), 15);
    expect(init.calculate_gain("leaky_relu", Math.sqrt(5))).toBeCloseTo(Math.sqrt(1 / 3), 15); // Linear's a=√5
    expect(init.calculate_gain("selu")).toBe(0.75);
    expect(() => init.calculate_gain("swish" as never)).toThrow("[calculate_gain] Unsupported nonlinearity swish");
  });
  test("fan_in / fan_out include the receptive field", () => {
    expect(init.calculate_fan_in_and_fan_out(loom.zeros(3, 4, 5, 5))).toEqual({ fan_in: 100, fan_out: 75 });
    expect(init.calculate_fan_in_and_fan_out(loom.zeros(7, 2))).toEqual({ fan_in: 2, fan_out: 7 });
    expect(() => init.calculate_fan_in_and_fan_out(loom.zeros(4))).toThrow(
      "[init] Fan in and fan out can not be computed for tensor with fewer than 2 dimensions",
    );
    expect(() => init.kaiming_uniform_(loom.zeros(2, 2), 0, "fan_avg" as never)).toThrow("[init] Mode fan_avg not supported, please use one of fan_in, fan_out");
  });
});

describe("distributions", () => {
  test("uniform_(a, b): in [a, b), mean (a+b)/2, std (b-a)/√12", () => {
    const s = stats(init.uniform_(loom.zeros(20000), -2, 3));
    expect(s.min).toBeGreaterThanOrEqual(-2);
    expect(s.max).toBeLessThan(3);
    expect(Math.abs(s.mean - 0.5)).toBeLessThan(0.05);
    expect(Math.abs(s.std - 5 / Math.sqrt(12))).toBeLessThan(0.03);
  });
  test("normal_(mean, std)", () => {
    const s = stats(init.normal_(loom.zeros(20000), 1, 2));
    expect(Math.abs(s.mean - 1)).toBeLessThan(0.06);
    expect(Math.abs(s.std - 2)).toBeLessThan(0.05);
  });
  test("constant_, zeros_, ones_", () => {
    expect(init.constant_(loom.zeros(2), 0.5).tolist()).toEqual([0.5, 0.5]);
    expect(init.zeros_(loom.ones(2)).tolist()).toEqual([0, 0]);
    expect(init.ones_(loom.zeros(1, 2)).tolist()).toEqual([[1, 1]]);
  });
  test("kaiming_uniform_: bound = gain·√(3/fan)", () => {
    // relu, fan_out = 200: bound = √2·√(3/200) = √(6/200)
    const t = init.kaiming_uniform_(loom.zeros(200, 100), 0, "fan_out", "relu");
    const s = stats(t);
    const bound = Math.sqrt(6 / 200);
    expect(Math.max(s.max, -s.min)).toBeLessThanOrEqual(bound);
    expect(Math.max(s.max, -s.min)).toBeGreaterThan(0.99 * bound);
    expect(Math.abs(s.std - bound / Math.sqrt(3)) / (bound / Math.sqrt(3))).toBeLessThan(0.03);
  });
  test("kaiming_normal_: std = gain/√fan", () => {
    const s = stats(init.kaiming_normal_(loom.zeros(100, 200), 0, "fan_in", "relu"));
    expect(Math.abs(s.std - Math.sqrt(2 / 200)) / Math.sqrt(2 / 200)).toBeLessThan(0.03);
    expect(Math.abs(s.mean)).toBeLessThan(0.005);
  });
  test("xavier_uniform_ and xavier_normal_: √(6/(fan_in+fan_out)) and √(2/(fan_in+fan_out))", () => {
    const u = stats(init.xavier_uniform_(loom.zeros(150, 50), 2));
    const bound = 2 * Math.sqrt(6 / 200);
    expect(Math.max(u.max, -u.min)).toBeLessThanOrEqual(bound);
    expect(Math.max(u.max, -u.min)).toBeGreaterThan(0.99 * bound);
    const n = stats(init.xavier_normal_(loom.zeros(150, 50)));
    expect(Math.abs(n.std - Math.sqrt(2 / 200)) / Math.sqrt(2 / 200)).toBeLessThan(0.03);
  });
  test("trunc_normal_: inside [a, b] with the truncated normal's moments", () => {
    // Standard normal truncated to [-2, 2]: Var = 1 - 2·2·φ(2)/(2Φ(2) - 1) = 1 - 4·0.053991/0.954500 = 0.773741
    const s = stats(init.trunc_normal_(loom.zeros(20000)));
    expect(s.min).toBeGreaterThanOrEqual(-2);
    expect(s.max).toBeLessThanOrEqual(2);
    expect(Math.abs(s.mean)).toBeLessThan(0.03);
    expect(Math.abs(s.std - Math.sqrt(0.773741))).toBeLessThan(0.02);
    // GPT-style: std 0.02 with bounds ±2 (100 std): effectively an untruncated N(0, 0.02²)
    const g = stats(init.trunc_normal_(loom.zeros(20000), 0, 0.02, -2, 2));
    expect(Math.abs(g.std - 0.02)).toBeLessThan(0.001);
    // one-sided: bounds [0.5, 1] with mean 0, std 1 put everything inside
    const o = stats(init.trunc_normal_(loom.zeros(5000), 0, 1, 0.5, 1));
    expect(o.min).toBeGreaterThanOrEqual(0.5);
    expect(o.max).toBeLessThanOrEqual(1);
  });
  test("special functions: erf and erfinv agree with known values", () => {
    expect(init.erf(0.5)).toBeCloseTo(0.5204998778130465, 14); // math.erf(0.5)
    expect(init.erf(-3)).toBeCloseTo(-0.9999779095030014, 14);
    expect(init.erfinv(0.5)).toBeCloseTo(0.4769362762044699, 12); // torch.erfinv (float64)
    expect(init.erfinv(init.erf(1.7))).toBeCloseTo(1.7, 12);
    expect(init.erfinv(1)).toBe(Infinity);
  });
});

describe("in place, under no_grad, reproducible", () => {
  test("a Parameter keeps its identity, requires_grad and leaf status while grad mode is on", () => {
    const p = new nn.Parameter(loom.zeros(3, 3));
    const r = init.kaiming_uniform_(p, Math.sqrt(5));
    expect(r).toBe(p);
    expect(p.requires_grad && p.is_leaf).toBe(true);
    expect(p.grad_fn).toBeNull();
  });
  test("the same generator seed gives the same values; the default generator follows manual_seed", () => {
    const a = init.normal_(loom.zeros(5), 0, 1, { generator: new loom.Generator(7) });
    const b = init.normal_(loom.zeros(5), 0, 1, { generator: new loom.Generator(7) });
    expect(a.tolist()).toEqual(b.tolist());
    loom.manual_seed(3);
    const c = new nn.Linear(4, 4);
    loom.manual_seed(3);
    const d = new nn.Linear(4, 4);
    expect(c.weight.tolist()).toEqual(d.weight.tolist());
    expect(c.bias!.tolist()).toEqual(d.bias!.tolist());
  });
  test("integer tensors are refused", () => {
    expect(() => init.uniform_(loom.zeros(2, { dtype: "int32" }))).toThrow("[uniform_] expected a floating point tensor, got int32");
  });
});

describe("layer defaults", () => {
  test("Linear: weight and bias in ±1/√in_features (kaiming_uniform_(a=√5))", () => {
    const lin = new nn.Linear(50, 400);
    const bound = 1 / Math.sqrt(50);
    for (const t of [lin.weight, lin.bias!]) {
      const s = stats(t);
      expect(Math.max(s.max, -s.min)).toBeLessThanOrEqual(bound);
      expect(Math.max(s.max, -s.min)).toBeGreaterThan(0.98 * bound);
    }
    expect(Math.abs(stats(lin.weight).std - bound / Math.sqrt(3)) / (bound / Math.sqrt(3))).toBeLessThan(0.03);
  });
  test("Embedding: N(0, 1) with the padding row zero", () => {
    const e = new nn.Embedding(1000, 20, { padding_idx: -1 });
    expect(e.padding_idx).toBe(999);
    const rows = e.weight.tolist() as number[][];
    expect(rows[999]).toEqual(Array(20).fill(0));
    const s = stats(e.weight.narrow(0, 0, 999).contiguous());
    expect(Math.abs(s.mean)).toBeLessThan(0.03);
    expect(Math.abs(s.std - 1)).toBeLessThan(0.03);
    expect(() => new nn.Embedding(4, 2, { padding_idx: 4 })).toThrow("[Embedding] padding_idx must be within num_embeddings (4), got 4");
  });
  test("Embedding.from_pretrained shares the weight and freezes by default", () => {
    const w = loom.tensor([[1, 2], [3, 4]]).float();
    const e = nn.Embedding.from_pretrained(w);
    expect(e.weight.requires_grad).toBe(false);
    expect(e.call(loom.tensor([1, 0])).tolist()).toEqual([[3, 4], [1, 2]]);
    expect(nn.Embedding.from_pretrained(w, { freeze: false }).weight.requires_grad).toBe(true);
  });
  test("LayerNorm and RMSNorm start at weight 1, bias 0", () => {
    const ln = new nn.LayerNorm(3);
    expect(ln.weight!.tolist()).toEqual([1, 1, 1]);
    expect(ln.bias!.tolist()).toEqual([0, 0, 0]);
    expect(new nn.LayerNorm(3, { bias: false }).bias).toBeNull();
    expect(new nn.RMSNorm([2, 2]).weight!.tolist()).toEqual([[1, 1], [1, 1]]);
    expect(new nn.RMSNorm(2, { elementwise_affine: false }).parameters()).toEqual([]);
  });
});
