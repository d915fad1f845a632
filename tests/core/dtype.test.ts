/**
 * Dtypes: PyTorch's promotion rules (torch.promote_types and torch.result_type with 0-d tensors
 * and Python scalars), float16/bfloat16 storage bit patterns, half arithmetic rounding, and
 * conversions with .to(). Bit patterns are IEEE 754 binary16 and bfloat16 (top half of binary32).
 */
import { describe, expect, test } from "bun:test";
import { Tensor, promote_types, tensor, zeros, type DType, type TensorOps } from "../../src/index.ts";

type T = TensorOps<any>;
const MODES: [string, (t: Tensor) => T][] = [
  ["eager", (t) => t],
  ["lazy", (t) => t.lazy()],
];

/** Raw stored bits of a float16/bfloat16 eager tensor. */
const bits = (t: Tensor) => Array.from(t._d.data as Uint16Array);
const h = (v: number[], dtype: DType = "float16") => tensor(v, { dtype });

describe("torch.promote_types table", () => {
  // Each row is a torch.promote_types(a, b) result in PyTorch.
  const TABLE: [DType, DType, DType][] = [
    ["int64", "float32", "float32"],
    ["int32", "int64", "int64"],
    ["bool", "bool", "bool"],
    ["bool", "int8", "int8"],
    ["bool", "float16", "float16"],
    ["uint8", "int32", "int32"],
    ["int8", "int64", "int64"],
    ["int32", "float16", "float16"],
    ["int64", "bfloat16", "bfloat16"],
    ["float16", "bfloat16", "float32"],
    ["float16", "float32", "float32"],
    ["bfloat16", "float64", "float64"],
    ["float32", "float64", "float64"],
    ["uint8", "uint8", "uint8"],
  ];
  test.each(TABLE)("%s, %s -> %s", (a, b, want) => {
    expect(promote_types(a, b)).toBe(want);
    expect(promote_types(b, a)).toBe(want);
  });
});

describe.each(MODES)("%s promotion in ops", (_mode, lift) => {
  const t = (v: number[] | number, dtype: DType) => lift(tensor(v, { dtype }));

  test("tensor and Python scalar", () => {
    const r = t([1, 2], "int64").add(2.5); // float scalar lifts an int tensor to the default float
    expect(r.dtype).toBe("float32");
    expect(r.tolist()).toEqual([3.5, 4.5]);
    expect(t([1, 2], "int32").add(5).dtype).toBe("int32"); // same category: tensor wins
    expect(t([1, 2], "int32").mul(5).tolist()).toEqual([5, 10]);
    expect(t([1], "float16").add(2.5).dtype).toBe("float16");
    expect(t([1], "bfloat16").mul(3).dtype).toBe("bfloat16");
    expect(t([1], "float64").add(0.1).dtype).toBe("float64");
    expect(t([1, 0], "bool").add(1).dtype).toBe("int64");
    expect(t([1, 0], "bool").add(1).tolist()).toEqual([2, 1]);
    expect(t([1, 0], "bool").mul(0.5).dtype).toBe("float32");
    expect(t([1, 2], "uint8").add(true).dtype).toBe("uint8");
  });

  test("tensor and tensor", () => {
    expect(t([1], "int32").add(t([2], "int64")).dtype).toBe("int64");
    expect(t([1], "uint8").add(t([2], "int32")).dtype).toBe("int32");
    expect(t([1], "float16").add(t([2], "bfloat16")).dtype).toBe("float32");
    expect(t([1], "int64").mul(t([2], "float16")).dtype).toBe("float16");
    expect(t([1], "float32").sub(t([2], "float64")).dtype).toBe("float64");
    // bool + bool stays bool (True + True = True)
    const b = t([1, 1, 0], "bool").add(t([1, 0, 0], "bool"));
    expect(b.dtype).toBe("bool");
    expect(b.tolist()).toEqual([true, true, false]);
  });

  test("0-d tensors only win when of a higher category", () => {
    expect(t([1, 2], "float32").add(t(1.5, "float64")).dtype).toBe("float32");
    expect(t([1, 2], "int64").add(t(1.5, "float64")).dtype).toBe("float64");
    expect(t([1, 2], "int64").add(t(1.5, "float64")).tolist()).toEqual([2.5, 3.5]);
    expect(t([1, 2], "int32").add(t(7, "int64")).dtype).toBe("int32");
    expect(t([1], "float16").mul(t(2, "float32")).dtype).toBe("float16");
    expect(t([1, 0], "bool").add(t(3, "int32")).dtype).toBe("int32");
    expect(t(1, "int32").add(t(2, "int64")).dtype).toBe("int64"); // both 0-d: ordinary promotion
  });

  test("true division of integers gives float32; floor division keeps int", () => {
    const q = t([1, 7, -7], "int64").div(t([2, 2, 2], "int64"));
    expect(q.dtype).toBe("float32");
    expect(q.tolist()).toEqual([0.5, 3.5, -3.5]);
    expect(t([3], "int32").div(2).dtype).toBe("float32");
    const f = t([7, -7], "int64").floor_divide(2);
    expect(f.dtype).toBe("int64");
    expect(f.tolist()).toEqual([3, -4]); // floor(-3.5) = -4
    const tr = t([7, -7], "int64").div(2, { rounding_mode: "trunc" });
    expect(tr.dtype).toBe("int64");
    expect(tr.tolist()).toEqual([3, -3]);
    expect(t([7, -7], "int64").remainder(3).tolist()).toEqual([1, 2]); // sign of the divisor
  });

  test("float-only ops on integers give float32", () => {
    expect(t([4], "int64").sqrt().dtype).toBe("float32");
    expect(t([4], "int64").sqrt().tolist()).toEqual([2]);
    expect(t([0], "int32").exp().tolist()).toEqual([1]);
  });

  test("sum of int32 / bool is int64; sum of float16 stays float16", () => {
    const s = t([2147483647, 1], "int32").sum(); // would overflow in int32
    expect(s.dtype).toBe("int64");
    expect(s.item()).toBe(2147483648);
    const b = t([1, 0, 1, 1], "bool").sum();
    expect(b.dtype).toBe("int64");
    expect(b.item()).toBe(3);
    expect(t([1, 2], "float16").sum().dtype).toBe("float16");
    expect(t([1, 2], "int8").cumsum(0).dtype).toBe("int64");
  });

  test("comparisons give bool", () => {
    const c = t([1, 2, 3], "int64").gt(t(1.5, "float32"));
    expect(c.dtype).toBe("bool");
    expect(c.tolist()).toEqual([false, true, true]);
  });

  test("integer results are stored without a signed zero", () => {
    const z = t([0, 3], "int64").neg();
    expect(Object.is((z.tolist() as number[])[0], -0)).toBe(false);
    expect(Object.is((t([-0.5], "float32").to("int64").tolist() as number[])[0], -0)).toBe(false);
    // so 1 / (int zero) is +inf as in torch
    expect(t([1], "int64").div(z.index("0:1")).tolist()).toEqual([Infinity]);
  });
});

describe("float16 storage bit patterns", () => {
  test("exact values", () => {
    // 1.0 = 0 01111 0000000000; -2 = 1 10000 0000000000; 0.5 = 0 01110 ...
    expect(bits(h([1, -2, 0.5, 0, -0, 65504]))).toEqual([0x3c00, 0xc000, 0x3800, 0x0000, 0x8000, 0x7bff]);
    expect(bits(h([2 ** -14]))).toEqual([0x0400]); // smallest normal
    expect(bits(h([1 + 2 ** -10]))).toEqual([0x3c01]); // 1 + ulp
  });

  test("0.1 rounds to 0x2E66 (0.0999755859375)", () => {
    const t = h([0.1]);
    expect(bits(t)).toEqual([0x2e66]);
    expect(t.tolist()).toEqual([0.0999755859375]);
  });

  test("round to nearest, ties to even", () => {
    // 1 + 2^-11 is halfway between 0x3C00 (even) and 0x3C01: -> 0x3C00
    // 1 + 3·2^-11 is halfway between 0x3C01 and 0x3C02 (even): -> 0x3C02
    // 1 + 2^-11 + 2^-20 is above halfway: -> 0x3C01
    expect(bits(h([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -20]))).toEqual([0x3c00, 0x3c02, 0x3c01]);
    // 2049 (halfway between 2048 and 2050, mantissa of 2048 even) -> 2048; 2051 -> 2052
    expect(h([2049, 2051]).tolist()).toEqual([2048, 2052]);
  });

  test("overflow: 65519 rounds down to 65504, 65520 and above become inf", () => {
    // the gap above 65504 is 32; 65520 is the halfway point and 65504 is odd (0x3FF) -> up to inf
    expect(bits(h([65519, 65520, 1e6, -1e6]))).toEqual([0x7bff, 0x7c00, 0x7c00, 0xfc00]);
  });

  test("subnormals", () => {
    // smallest subnormal 2^-24 = 0x0001; 2^-25 ties to even (0); 3·2^-25 = 1.5·2^-24 ties to 2·2^-24
    expect(bits(h([2 ** -24, 2 ** -25, 3 * 2 ** -25, 2 ** -26, 1023 * 2 ** -24]))).toEqual([0x0001, 0x0000, 0x0002, 0x0000, 0x03ff]);
    expect(h([2 ** -24, 1023 * 2 ** -24]).tolist()).toEqual([2 ** -24, 1023 * 2 ** -24]);
    // just above half of the smallest subnormal rounds up
    expect(bits(h([2 ** -25 + 2 ** -35]))).toEqual([0x0001]);
    // largest subnormal (0x03FF, odd) + half an ulp ties to the smallest normal 0x0400 (even)
    expect(bits(h([1023.5 * 2 ** -24]))).toEqual([0x0400]);
  });

  test("inf and NaN", () => {
    const [pi, ni, nan] = bits(h([Infinity, -Infinity, NaN]));
    expect(pi).toBe(0x7c00);
    expect(ni).toBe(0xfc00);
    expect(nan! & 0x7c00).toBe(0x7c00); // exponent all ones
    expect(nan! & 0x03ff).not.toBe(0); // non-zero mantissa
    const back = h([Infinity, -Infinity, NaN]).tolist() as number[];
    expect(back[0]).toBe(Infinity);
    expect(back[1]).toBe(-Infinity);
    expect(Number.isNaN(back[2])).toBe(true);
  });
});

describe("bfloat16 storage bit patterns", () => {
  test("exact values", () => {
    // bfloat16 is the top 16 bits of float32: 1.0 = 0x3F800000 -> 0x3F80
    expect(bits(h([1, -2, 0.5, 3.140625, 0, -0], "bfloat16"))).toEqual([0x3f80, 0xc000, 0x3f00, 0x4049, 0x0000, 0x8000]);
  });

  test("round to nearest, ties to even", () => {
    // bf16 ulp at 1 is 2^-7: 1 + 2^-8 ties to 1 (even); 1 + 3·2^-8 ties to 1 + 2^-6 (0x3F82)
    expect(bits(h([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -16], "bfloat16"))).toEqual([0x3f80, 0x3f82, 0x3f81]);
    // 0.1 = 0x3DCCCCCD as float32 -> 0x3DCD
    expect(bits(h([0.1], "bfloat16"))).toEqual([0x3dcd]);
  });

  test("range: float32's exponent range, so 1e38 is finite; inf and NaN", () => {
    const [big, pi, ni, nan] = bits(h([1e38, Infinity, -Infinity, NaN], "bfloat16"));
    expect(big! & 0x7f80).not.toBe(0x7f80);
    expect([pi, ni]).toEqual([0x7f80, 0xff80]);
    expect(nan! & 0x7f80).toBe(0x7f80);
    expect(nan! & 0x007f).not.toBe(0);
    // largest finite bf16: 0x7F7F = (2 - 2^-7) · 2^127
    expect(h([(2 - 2 ** -7) * 2 ** 127], "bfloat16").tolist()).toEqual([(2 - 2 ** -7) * 2 ** 127]);
    expect(bits(h([(2 - 2 ** -7) * 2 ** 127], "bfloat16"))).toEqual([0x7f7f]);
  });
});

describe.each(MODES)("%s half arithmetic", (_mode, lift) => {
  test("float16 ops return float16 with results rounded on store", () => {
    const one = lift(h([1, 1, 300]));
    const r = one.add(lift(h([2 ** -11, 3 * 2 ** -11, 300])));
    expect(r.dtype).toBe("float16");
    // 1 + 2^-11 -> 1 (tie to even); 1 + 3·2^-11 -> 1 + 2^-9; 600 exact
    expect(r.tolist()).toEqual([1, 1 + 2 ** -9, 600]);
    const sq = lift(h([300, 256])).mul(lift(h([300, 256])));
    expect(sq.tolist()).toEqual([Infinity, Infinity]); // 90000 and 65536 are past the 65520 rounding edge
    const third = lift(h([1])).div(3);
    expect(third.dtype).toBe("float16");
    // 1/3 in binary16: 0x3555 = 1365 / 4096
    expect(third.tolist()).toEqual([1365 / 4096]);
    expect(lift(h([2])).sqrt().tolist()).toEqual([1.4140625]); // 0x3DA8 = 1 + 424/1024
  });

  test("bfloat16 ops return bfloat16", () => {
    const r = lift(h([1, 1], "bfloat16")).add(lift(h([2 ** -8, 3 * 2 ** -8], "bfloat16")));
    expect(r.dtype).toBe("bfloat16");
    expect(r.tolist()).toEqual([1, 1 + 2 ** -6]);
    expect(lift(h([1], "bfloat16")).div(3).tolist()).toEqual([0.333984375]); // 0x3EAB = 171/512
  });

  test("half matmul and reductions stay half", () => {
    const a = lift(h([1, 2, 3, 4])).reshape(2, 2);
    const m = a.matmul(a);
    expect(m.dtype).toBe("float16");
    expect(m.tolist()).toEqual([[7, 10], [15, 22]]);
    expect(a.sum().dtype).toBe("float16");
    // 2048 + 1 + 1 computed in float32 = 2050, stored exactly (2050 is even in fp16's 2-spacing)
    expect(lift(h([2048, 1, 1])).sum().item()).toBe(2050);
  });
});

describe.each(MODES)("%s .to() conversions", (_mode, lift) => {
  test("float -> int truncates toward zero", () => {
    const f = lift(tensor([2.7, -2.7, -0.5, 0.99, -3], { dtype: "float32" }));
    for (const d of ["int64", "int32", "int8"] as DType[]) {
      const r = f.to(d);
      expect(r.dtype).toBe(d);
      expect(r.tolist()).toEqual([2, -2, 0, 0, -3]);
    }
    expect(lift(tensor([3.99, 255.5], { dtype: "float64" })).to("uint8").tolist()).toEqual([3, 255]);
    expect(f.long().dtype).toBe("int64");
    expect(f.int().dtype).toBe("int32");
  });

  test("int64 values are exact up to 2^53", () => {
    const big = lift(tensor([2 ** 53, -(2 ** 53), 2 ** 53 - 1, 123456789012345]));
    expect(big.dtype).toBe("int64");
    expect(big.tolist()).toEqual([2 ** 53, -(2 ** 53), 2 ** 53 - 1, 123456789012345]);
    expect(lift(tensor([2 ** 53 - 2])).add(1).tolist()).toEqual([2 ** 53 - 1]);
    expect(big.to("float64").tolist()).toEqual([2 ** 53, -(2 ** 53), 2 ** 53 - 1, 123456789012345]);
    // float32 has 24 bits: 2^24 + 1 rounds to 2^24 (tie to even)
    expect(lift(tensor([2 ** 24 + 1, 2 ** 24 + 3])).to("float32").tolist()).toEqual([2 ** 24, 2 ** 24 + 4]);
    expect(lift(tensor([2 ** 31])).to("int64").tolist()).toEqual([2 ** 31]);
  });

  test("bool conversion: non-zero (and NaN) is true", () => {
    const b = lift(tensor([0, 0.5, -1, NaN, -0], { dtype: "float32" })).to("bool");
    expect(b.dtype).toBe("bool");
    expect(b.tolist()).toEqual([false, true, true, true, false]);
    expect(lift(tensor([true, false])).to("float32").tolist()).toEqual([1, 0]);
    expect(lift(tensor([true, false])).long().tolist()).toEqual([1, 0]);
    expect(lift(tensor([3, 0])).bool().tolist()).toEqual([true, false]);
  });

  test("float32 <-> float16 <-> bfloat16", () => {
    const x = lift(tensor([0.1, 65519, 1e-8], { dtype: "float32" }));
    expect(x.half().tolist()).toEqual([0.0999755859375, 65504, 0]); // 1e-8 < 2^-25: underflows to 0
    // bf16: 0.1 -> 0x3DCD; 65519 = 0x477FEF00 rounds up to 0x4780 = 65536; 1e-8 = 0x322BCC77 -> 0x322C
    expect(x.bfloat16().to("float32").tolist()).toEqual([0.10009765625, 65536, 1.0011717677116394e-8]);
    expect(lift(h([0.1])).float().dtype).toBe("float32");
    expect(lift(h([0.1])).double().tolist()).toEqual([0.0999755859375]);
  });

  test("to() the same dtype returns the tensor itself", () => {
    const x = lift(zeros(2));
    expect(x.to("float32")).toBe(x);
    expect(x.to("cpu")).toBe(x);
  });
});
