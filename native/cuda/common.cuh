/*
 * Shared definitions of Loom's CUDA library (native/cuda/): opcodes (the same generated table as
 * the CPU shim, native/kernels/common.h), the device-side forms of the command buffer's tensors
 * and expression programs, and the value conversions of src/tensor/dtype.ts for device code.
 *
 * Kernels compute in double, as the js reference and the CPU shim do, and round once on store
 * (an intermediate of a program is rounded to its dtype as storing it would). Storage follows
 * src/tensor/dtype.ts: int64 lives in a double array holding integers, float16/bfloat16 are raw
 * bits, bool is a byte 0/1.
 */
#ifndef LOOM_CUDA_COMMON_CUH
#define LOOM_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <math_constants.h>
#include <math.h>
#include <stdint.h>

#include "ops.gen.h"
#include "../kernels/scalar_bits.h"
#include "../kernels/wire.h"

/* DT_* codes, dt_size, load1/store1 and the half conversions: ../kernels/scalar_bits.h */

#define LC_MAXD 16
#define LC_MAXIN 64
/** Registers of one program evaluated per thread (local memory); larger programs run on the CPU. */
#define LC_MAXREGS 32
#define LC_MAXCODE 2048

#define LOOM_ENUM_EW(n) OP_##n,
enum { LOOM_REGISTRY_EW_OPS(LOOM_ENUM_EW) OP_EW_END, OP_K_BEGIN = OP_EW_END - 1, LOOM_REGISTRY_KERNEL_OPS(LOOM_ENUM_EW) OP_END };

/** A strided view on a device buffer (the command buffer's tensor, parsed on the host). */
typedef struct {
  uint64_t p; /* device address */
  int dt, nd;
  int64_t off;
  int64_t shape[LC_MAXD];
  int64_t st[LC_MAXD];
} ctensor;

/*
 * A program (src/backends/native/program.ts encodeProgram), parsed on the host into fixed-size
 * codes that kernels read from device memory:
 *   LOAD/CONST: reg[dst] = input[off + in.off + Σ idx[d]·strides[st + d]]
 *   OP:         reg[dst] = round(dt, op(reg[a], reg[b], reg[c]))
 *   ACC:        reg[dst] = acc[linear index]
 */
enum { PC_LOAD = 0, PC_OP = 1, PC_ACC = 2, PC_CONST = 3 };
typedef struct {
  int kind, dst, input, op, dt, a, b, c;
  int64_t off;
  int st; /* LOAD/CONST: index of its nd strides in the program's stride array */
} ccode;
typedef struct {
  int nd, nregs, ncode, out;
  int64_t shape[LC_MAXD];
} cprog;

/** Reduction kinds (fused_reduce attrs). */
enum { RED_SUM = 0, RED_MAX = 1, RED_MIN = 2 };


/* ---- half precision and the integer wrap: native/kernels/scalar_bits.h, shared with the CPU
 * kernels (f16_to_f32, f32_to_f16, bf16_to_f32, f32_to_bf16, js_wrap; __host__ __device__) -- */

/** Element i of a buffer of dtype dt at device address p, as a double (scalar_bits.h load1). */
static inline __device__ double lc_load(uint64_t p, int dt, int64_t i) { return load1((const char *)p, dt, i); }

/** Store v as element i with the js backend's conversions (scalar_bits.h store1). */
static inline __device__ void lc_store(uint64_t p, int dt, int64_t i, double v) { store1((char *)p, dt, i, v); }



/** v rounded as storing it as dt and loading it back gives (a program's intermediates). */
static inline __device__ double lc_round(int dt, double v) {
  switch (dt) {
    case DT_F64: return v;
    case DT_F32: return (double)(float)v;
    case DT_F16: return f16_to_f32(f32_to_f16((float)v));
    case DT_BF16: return bf16_to_f32(f32_to_bf16((float)v));
    case DT_I64: return isnan(v) ? 0.0 : trunc(v) + 0.0;
    case DT_I32: return (double)(int32_t)js_wrap(v, 4294967296.0);
    case DT_I8: return (double)(int8_t)(uint8_t)js_wrap(v, 256.0);
    case DT_U8: return (double)(uint8_t)js_wrap(v, 256.0);
    default: return v != 0 ? 1.0 : 0.0;
  }
}

/* ---- host launchers (kernels.cu, matmul.cu), called by the command interpreter (loom_cuda.cu) ---- */
/**
 * Evaluate program P over its shape and store into `out` (out.nd == P.nd: strided over P's
 * shape, as the CPU shim's prog_run). Device pointers: codes, strides, ins (nin ctensors);
 * acc (may be 0): dense doubles over P's shape read by ACC codes.
 */
cudaError_t lc_launch_prog(cudaStream_t s, const cprog *P, const ccode *codes, const int64_t *strides, const ctensor *ins,
                           const ctensor *out, const double *acc);
/**
 * Fold program P over the dims flagged in `isred` (kind RED_*), rounding each result to `dt`.
 * Results go to `acc` (dense doubles over the kept dims) when non-null, else to `out`.
 */
cudaError_t lc_launch_reduce(cudaStream_t s, const cprog *P, const ccode *codes, const int64_t *strides, const ctensor *ins,
                             int kind, int dt, const unsigned char *isred, double *acc, const ctensor *out);
/** out = a @ b with matmul's broadcasting (cuBLAS when loaded and the layouts allow, else the tiled kernel). */
cudaError_t lc_matmul(cudaStream_t s, const ctensor *a, const ctensor *b, const ctensor *out);
/** out[i] = R(R(y[i] + bias[i % n]) + R(d[i]·s)) (no bias: R(y[i] + R(d[i]·s))), y and d dense; lora.ts loraDecomposed. */
cudaError_t lc_launch_lora_combine(cudaStream_t s, const ctensor *out, uint64_t y, uint64_t d, const ctensor *bias, double scale);
/**
 * quantized_linear (quant.cu): out = x · dequant(W)ᵀ (+ b), or x · dequant(W) when `transposed`;
 * ins (host copies of the descriptors) = [x, qweight, scales (nf4, int8), bias (has_bias)], as the
 * parser checked them; fmt a LQ_* code (quant.cuh).
 */
cudaError_t lc_quantized_linear(cudaStream_t s, int fmt, int transposed, int has_bias, const ctensor *out, const ctensor *ins);
/** A 2-D view [rows, last dim] of x whose leading dims collapse into one stride; 0 if they do not (loom_cuda.cu). */
int lc_as_rows(const ctensor *x, ctensor *r);
/** A dense row-major [rows, cols] tensor of dtype dt at device address p (loom_cuda.cu). */
ctensor lc_dense2(uint64_t p, int dt, int64_t rows, int64_t cols);
/** 1 when cuBLAS was loaded (dlopen libcublas.so.13 / .12), its soname in *name. */
int lc_cublas_load(cudaStream_t s, const char **name);
/** Counters of matmul paths: [cuBLAS calls, tiled kernel launches]. */
void lc_matmul_counters(double *out);
/** The first device fault since the last call (0: none), and clear it; kernels.cu. */
int lc_take_fault(cudaStream_t s, int *op, int *dt);

#endif
