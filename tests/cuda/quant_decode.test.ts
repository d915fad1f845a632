/**
 * The CUDA library's decoding of quantized_linear's packed weights, run on the host (no GPU):
 * native/cuda/quant.cuh's lq_weight is __host__ __device__, and quant.cu's dequantize kernel is
 * one call of it per element, so compiling it for the host (tests/cuda/quant_decode_host.cu,
 * with nvcc -x cu, else a plain C++ compiler) checks the device's arithmetic and byte addressing.
 *
 * On random packed blocks (every fp16 block scale that is not inf/NaN: zeros, subnormals, the
 * largest; random NF4 absmax and int8 scales of both signs over a wide range), in four operand
 * layouts (bytes, int32 words, column-major bytes at an offset, padded words; strided scales),
 * the decoded float32 values must equal bit for bit:
 *   - an independent decoding from the format descriptions (tests/quantized/helpers.ts weightAt,
 *     exact in float64) rounded once to float32: the IEEE float32 product d·q that quant.c and
 *     the device compute (a product of two float32 values is exact in float64);
 *   - the CPU kernel itself (native/kernels/quant.c through the native backend) where it builds:
 *     W is read back as x = I (K × K) times Wᵀ, which is exact (one 1·w and zeros per output).
 * And the small-M forward kernel's arithmetic (quant.cu k_quant_gemv: each thread's
 * lq_gemv_share, the tree, + bias), emulated on the host for M = 3, is within QUANT_ERROR_BOUND of
 * the float64 reference and of the CPU kernel, the same bits for two operand layouts.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { OPS } from "../../src/graph/registry.ts";
import type { QuantFormat } from "../../src/graph/ops/quantized.ts";
import { nativeBackend } from "../../src/backends/native/backend.ts";
import { spawnSync } from "../../src/runtime/process.ts";
import { fromValues, toFloat64 } from "../../src/tensor/storage.ts";
import { QUANT_ERROR_BOUND } from "../../src/graph/ops/quantized.ts";
import { dense, outOfBound, reference, rng, weightAt, type Packed } from "../quantized/helpers.ts";
import { NVCC } from "./device.ts";

const SRC = join(import.meta.dir, "quant_decode_host.cu");
const FMT: Record<QuantFormat, number> = { q8_0: 0, q4_0: 1, nf4: 2, int8: 3 };
const GEOM: Record<QuantFormat, { block: number; bytes: number }> = {
  q8_0: { block: 32, bytes: 34 }, q4_0: { block: 32, bytes: 18 }, nf4: { block: 64, bytes: 32 }, int8: { block: 1, bytes: 1 },
};
/** x rows of the emulated small-M kernel (≤ LQ_GEMV_M = 4 in quant.cuh). */
const M = 3;
const LAYOUTS = ["bytes", "int32 words", "column-major bytes at an offset", "padded int32 words"];

/** Compile the host driver: nvcc (the device compiler: __host__ __device__ as built) else c++/g++/clang++. */
function compile(dir: string): { bin: string; compiler: string } | { reason: string } {
  const bin = join(dir, "quant_decode_host");
  const tries: string[][] = [
    ...(NVCC ? [[NVCC, "-std=c++17", "-O1", "-x", "cu", SRC, "-o", bin]] : []),
    ...["c++", "g++", "clang++"].map((cc) => [cc, "-std=c++17", "-O1", "-Wall", "-x", "c++", SRC, "-o", bin]),
  ];
  const errs: string[] = [];
  for (const argv of tries) {
    const r = spawnSync(argv);
    if (r.success) return { bin, compiler: argv[0]! };
    if (r.started && argv[0] === NVCC) return { reason: `${argv[0]} failed:\n${r.stderr}` }; // a compile error is a failure, not a skip
    errs.push(`${argv[0]}: ${r.stderr.trim().split("\n")[0]}`);
  }
  return { reason: `no compiler for the host decode test (${errs.join("; ")})` };
}

/** Random packed weight: random bytes; each block's fp16 scale any finite half; scales of both signs. */
function adversarial(format: QuantFormat, N: number, K: number, seed: number): Packed {
  const r = rng(seed), g = GEOM[format], rb = (K / g.block) * g.bytes;
  const bytes = Uint8Array.from({ length: N * rb }, () => Math.floor(r() * 256));
  if (format === "q8_0" || format === "q4_0") {
    for (let n = 0; n < N; n++) {
      for (let b = 0; b < K / 32; b++) {
        const pick = r();
        // zeros, subnormals, the largest half, else any finite half (exponent field < 31)
        let h = pick < 0.05 ? 0 : pick < 0.1 ? Math.floor(r() * 1024) : pick < 0.13 ? 0x7bff : Math.floor(r() * 31) << 10 | Math.floor(r() * 1024);
        if (r() < 0.5) h |= 0x8000;
        bytes[n * rb + b * g.bytes] = h & 255;
        bytes[n * rb + b * g.bytes + 1] = h >> 8;
      }
    }
  }
  const scale = () => Math.fround((r() < 0.5 ? -1 : 1) * (0.5 + r()) * 2 ** (Math.floor(r() * 40) - 20));
  const scales = format === "nf4" ? Float32Array.from({ length: (N * K) / 64 }, scale) : format === "int8" ? Float32Array.from({ length: N }, scale) : null;
  return { format, N, K, bytes, scales };
}

/** W [N, K] decoded by the CPU kernel (quant.c): out = I · Wᵀ, exact. */
function cpuDecode(p: Packed): Float32Array | null {
  const nb = nativeBackend();
  if (!nb) return null;
  const rb = p.bytes.length / p.N;
  const eye = new Float32Array(p.K * p.K);
  for (let i = 0; i < p.K; i++) eye[i * p.K + i] = 1;
  const q = p.format === "int8" ? fromValues("int8", [p.N, rb], new Int8Array(p.bytes.buffer.slice(0))) : fromValues("uint8", [p.N, rb], p.bytes);
  const ins = [fromValues("float32", [p.K, p.K], eye), q, ...(p.scales ? [fromValues("float32", [p.scales.length], p.scales)] : [])];
  const out = nb.run(OPS.quantized_linear, ins, { format: p.format, has_bias: false, transposed: false }, [p.K, p.N], "float32");
  const o = toFloat64(out); // float32 values, exactly
  const w = new Float32Array(p.N * p.K);
  for (let k = 0; k < p.K; k++) for (let n = 0; n < p.N; n++) w[n * p.K + k] = o[k * p.N + n]!;
  return w;
}

/** y = x · Wᵀ + b by the CPU kernel (quant.c), M rows; null without the native backend. */
function cpuLinear(p: Packed, xs: Float32Array, M: number, bias: Float32Array): Float64Array | null {
  const nb = nativeBackend();
  if (!nb) return null;
  const rb = p.bytes.length / p.N;
  const q = p.format === "int8" ? fromValues("int8", [p.N, rb], new Int8Array(p.bytes.buffer.slice(0))) : fromValues("uint8", [p.N, rb], p.bytes);
  const ins = [fromValues("float32", [M, p.K], xs), q, ...(p.scales ? [fromValues("float32", [p.scales.length], p.scales)] : []), fromValues("float32", [p.N], bias)];
  return toFloat64(nb.run(OPS.quantized_linear, ins, { format: p.format, has_bias: true, transposed: false }, [M, p.N], "float32"));
}

/** The first few differences, as text: bitwise (`bits`) or as numbers (±0 equal). */
function differences(got: Float32Array, want: Float32Array, K: number, bits: boolean): string[] {
  const gb = new Uint32Array(got.buffer, got.byteOffset, got.length), wb = new Uint32Array(want.buffer, want.byteOffset, want.length);
  const bad: string[] = [];
  for (let i = 0; i < want.length && bad.length < 5; i++) {
    if (bits ? gb[i] !== wb[i] : got[i] !== want[i]) bad.push(`W[${Math.floor(i / K)}, ${i % K}] = ${got[i]} (0x${gb[i]!.toString(16)}), expected ${want[i]} (0x${wb[i]!.toString(16)})`);
  }
  return bad;
}

describe("CUDA weight decoding (quant.cuh) on the host against quant.c", () => {
  const dir = mkdtempSync(join(tmpdir(), "loom-quant-decode-"));
  const built = compile(dir);
  if ("reason" in built) console.warn(`[quant decode] ${built.reason}`);
  else console.warn(`[quant decode] host driver compiled with ${built.compiler}`);

  // K > LQ_GEMV_T (128): each emulated thread takes several k
  const cases: [QuantFormat, number, number][] = [["q8_0", 7, 320], ["q4_0", 7, 320], ["nf4", 5, 384], ["int8", 6, 300]];
  for (const [format, N, K] of cases) {
    test(`${format} W [${N}, ${K}]: every layout bit-equal to the independent decoding and to the CPU kernel; the small-M kernel's arithmetic within the bound`, () => {
      if ("reason" in built) {
        if (NVCC) throw new Error(built.reason); // nvcc exists: a compile error must fail
        console.warn(`[skip] ${built.reason}`);
        return;
      }
      const p = adversarial(format, N, K, 1000 + FMT[format]);
      const rb = p.bytes.length / N;
      const head = new BigInt64Array([BigInt(FMT[format]), BigInt(N), BigInt(K), BigInt(rb), BigInt(p.scales?.length ?? 0)]);
      const r0 = rng(77 + FMT[format]);
      const xs = Float32Array.from({ length: M * K }, () => Math.fround(r0() * 4 - 2)), bias = Float32Array.from({ length: N }, () => Math.fround(r0() * 2 - 1));
      const parts = [new Uint8Array(head.buffer), p.bytes, new Uint8Array(p.scales?.buffer ?? new ArrayBuffer(0)), new Uint8Array(new BigInt64Array([BigInt(M)]).buffer),
        new Uint8Array(xs.buffer), new Uint8Array(bias.buffer)];
      const input = new Uint8Array(parts.reduce((a, b) => a + b.length, 0));
      parts.reduce((at, b) => (input.set(b, at), at + b.length), 0);
      const inPath = join(dir, `${format}.in`), outPath = join(dir, `${format}.out`);
      writeFileSync(inPath, input);
      const r = spawnSync([built.bin, inPath, outPath]);
      if (!r.success) throw new Error(`host decode failed: ${r.stderr}`);
      const raw = readFileSync(outPath);
      const all = new Float32Array(raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.byteLength));
      expect(all.length).toBe(4 * N * K + 2 * M * N);

      const want = new Float32Array(N * K);
      for (let n = 0; n < N; n++) for (let k = 0; k < K; k++) want[n * K + k] = Math.fround(weightAt(p, n, k));
      expect(want.some((v) => v !== 0)).toBe(true);
      const cpu = cpuDecode(p);
      if (!cpu) console.warn("[skip] quant.c comparison: the native backend is unavailable");
      LAYOUTS.forEach((layout, l) => {
        const got = all.subarray(l * N * K, (l + 1) * N * K);
        const bad = differences(got, want, K, true);
        if (bad.length) throw new Error(`${format}, ${layout}: vs the independent decoding\n${bad.join("\n")}`);
        if (cpu) {
          const badCpu = differences(got, cpu, K, false);
          if (badCpu.length) throw new Error(`${format}, ${layout}: vs quant.c\n${badCpu.join("\n")}`);
        }
      });
      // the small-M kernel's arithmetic: within the bound of the float64 reference (and of quant.c's result)
      const g0 = all.subarray(4 * N * K, 4 * N * K + M * N), g1 = all.subarray(4 * N * K + M * N);
      expect(differences(g1, g0, N, true)).toEqual([]);
      const { ref, S } = reference(xs, M, dense(p), N, K, bias);
      expect(outOfBound(g0, ref, S, K)).toEqual([]);
      const cpuY = cpuLinear(p, xs, M, bias);
      if (cpuY) {
        const u = 2 ** -24, far: string[] = [];
        for (let i = 0; i < ref.length && far.length < 5; i++) {
          const bound = 2 * (QUANT_ERROR_BOUND.rtol * Math.abs(ref[i]!) + (K + QUANT_ERROR_BOUND.extra) * u * S[i]!);
          if (!(Math.abs(g0[i]! - cpuY[i]!) <= bound)) far.push(`[${i}] ${g0[i]} vs quant.c ${cpuY[i]} (bound ${bound})`);
        }
        expect(far).toEqual([]);
      }
    }, 120_000);
  }

  test("cleanup", () => {
    rmSync(dir, { recursive: true, force: true });
  });
});
