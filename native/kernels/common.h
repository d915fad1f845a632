/*
 * Shared definitions of Loom's native kernels: dtype codes, tensor descriptors, value loads and
 * stores that reproduce the js backend's conversions bit for bit, and the thread pool's
 * parallel_for (implemented in shim.c).
 *
 * Kernels compute in double, as the js reference does (its values are JS numbers), and round
 * once on store. Storage follows src/tensor/dtype.ts: int64 lives in a double array holding
 * integers, float16/bfloat16 are raw bits, bool is a byte 0/1.
 */
#ifndef LOOM_COMMON_H
#define LOOM_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "scalar_bits.h"
#include "wire.h"

/* DT_* codes, dt_size, the half conversions, js_wrap, load1/store1: scalar_bits.h */

#define LOOM_MAXD 16
/** Most inputs of one instruction (cat is variadic); elementwise/fused take at most LOOM_EW_MAXIN. */
#define LOOM_MAXIN 64
#define LOOM_EW_MAXIN 16
/** Elements per block of the vectorized interpreters (fits L1 as doubles for a few operands). */
#define LOOM_BLOCK 512

/** A strided view on a buffer: element strides and offset, as TensorData in TypeScript. */
typedef struct {
  char *p;
  int dt;
  int nd;
  int64_t off;
  int64_t shape[LOOM_MAXD];
  int64_t st[LOOM_MAXD];
} tdesc;


static inline int64_t t_numel(const tdesc *t) {
  int64_t n = 1;
  for (int i = 0; i < t->nd; i++) n *= t->shape[i];
  return n;
}

/**
 * Whether t's dims from `dim` on are one dense row-major run (size-1 dims may have any stride):
 * each index of the dims before `dim` is then one contiguous block. dim 0: the whole tensor.
 */
static inline int t_dense_from(const tdesc *t, int dim) {
  int64_t inner = 1;
  for (int d = t->nd - 1; d >= dim; d--) {
    if (t->shape[d] != 1 && t->st[d] != inner) return 0;
    inner *= t->shape[d];
  }
  return 1;
}

/* ---- half precision: f16_to_f32, f32_to_f16, bf16_to_f32, f32_to_bf16 and js_wrap are in
 * scalar_bits.h (shared with the CUDA kernels) -------------------------------------------- */

/*
 * Branch-free forms of the conversions above, for the block loops (load_block/store_block): the
 * compiler vectorizes them, where the branchy scalar forms run one element at a time. Same bits
 * as f16_to_f32 / f32_to_f16 / f32_to_bf16 for every input (checked over all 2^32 floats when
 * they were written; tests/native/half.test.ts checks them against the js reference).
 * f32_to_f16_bf is the float-arithmetic rounding of Maratyszcza's FP16 library (MIT): scaling by
 * 2^112 then 2^-110 and adding a power of two makes the FPU round to nearest even at the half's
 * precision (subnormals included); it needs round-to-nearest and no contraction (CFLAGS
 * -ffp-contract=off), as the rest of the kernels do.
 */
static inline float f16_to_f32_bf(uint16_t h) {
  /* exponent and mantissa moved into place and rebiased (+112); infinities/NaN rebiased once
   * more to 255; subnormals (and zero) as 2^-14 · (1 + m/1024) - 2^-14, exact in float */
  uint32_t o = (uint32_t)(h & 0x7fff) << 13, e = o & 0x0f800000u;
  uint32_t inf = 0u - (uint32_t)(e == 0x0f800000u), sub = 0u - (uint32_t)(e == 0);
  o += 0x38000000u + (inf & 0x38000000u) + (sub & 0x00800000u);
  uint32_t sb = f32_bits(f32_from_bits(o) - 6.103515625e-05f);
  return f32_from_bits(((sb & sub) | (o & ~sub)) | ((uint32_t)(h & 0x8000) << 16));
}

static inline uint16_t f32_to_f16_bf(float v) {
  uint32_t w = f32_bits(v);
  uint32_t shl1 = w + w, sign = w & 0x80000000u, bias = shl1 & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  float base = (fabsf(v) * 0x1.0p+112f) * 0x1.0p-110f;
  uint32_t b = f32_bits(f32_from_bits((bias >> 1) + 0x07800000u) + base);
  uint32_t nonsign = ((b >> 13) & 0x7c00u) + (b & 0x0fffu);
  return (uint16_t)((sign >> 16) | (shl1 > 0xff000000u ? 0x7e00u : nonsign));
}

static inline uint16_t f32_to_bf16_bf(float v) {
  uint32_t x = f32_bits(v);
  uint32_t nan = ((x >> 16) | 0x40) & 0xffff, r = ((x + 0x7fff + ((x >> 16) & 1)) >> 16) & 0xffff;
  return (uint16_t)((x & 0x7fffffff) > 0x7f800000 ? nan : r);
}

/** Load n elements with element stride s (0 = broadcast) starting at element i0 into doubles. */
void load_block(double *dst, const char *p, int dt, int64_t i0, int64_t s, int n);
/** Store n doubles with element stride s starting at element i0, converting as the js backend. */
void store_block(char *p, int dt, int64_t i0, int64_t s, const double *src, int n);
/** Round a block to what storing it as `dt` and loading it back gives (fused intermediates). */
void round_block(double *v, int dt, int n);

/* ---- thread pool and scratch memory (shim.c) ------------------------------------------------- */
typedef void (*loom_task)(void *ctx, int64_t begin, int64_t end);
/** Run fn over [0, n) split into contiguous chunks on the pool; serial below `grain` items or when nested. */
void loom_parallel_for(int64_t n, int64_t grain, loom_task fn, void *ctx);
int loom_nthreads(void);
/** Record an error for the current command (first one wins); kernels then return. */
void loom_set_error(const char *fmt, ...);
/**
 * A per-thread, grow-only, 64-byte aligned scratch buffer (never freed while the thread lives:
 * kernels reuse it instead of calling malloc). Slots 0..3 are for kernel bodies (outside
 * parallel regions; SCR_K3 belongs to prog_run, SCR_K2 and SCR_K4 to reductions), SCR_T*
 * for code running inside parallel tasks (T0/T1: program registers and positions), SCR_GEMM and
 * SCR_GEMM_A for sgemm.c's packed panels of B and A alone (its callers hold T* slots across the call).
 */
void *loom_scratch(int slot, size_t bytes);
enum { SCR_K0 = 0, SCR_K1, SCR_K2, SCR_K3, SCR_K4, SCR_K5, SCR_T0, SCR_T1, SCR_T2, SCR_T3, SCR_T4, SCR_T5, SCR_T6, SCR_T7, SCR_GEMM, SCR_GEMM_A, SCR_NSLOTS };

/* ---- the op table ----------------------------------------------------------------------------
 * Opcodes come from the op registry: ops.gen.h is generated from src/graph/registry.ts at build
 * time (src/backends/native/optable.ts) with the elementwise ops first (their index is the
 * opcode), then the other non-view ops and the fused ops. Here only which kernel runs each
 * kernel op, by name (a name that is not a registry op does not compile; an op without a line
 * has no native kernel and runs on the js backend), and the native-only instructions. */
#include "ops.gen.h"
#define LOOM_KERNEL_IMPLS(X) \
  X(sum, k_reduce) X(amax, k_reduce) X(amin, k_reduce) X(argmax, k_arg) X(argmin, k_arg) \
  X(cumsum, k_cumsum) X(slice_backward, k_slice_backward) X(cat, k_cat) X(matmul, k_matmul) \
  X(gather, k_gather) X(scatter_add, k_scatter_add) X(index_select, k_index_select) \
  X(index_add, k_index_add) X(tri, k_tri) X(lora_linear, k_lora_linear) X(spmm, k_spmm) \
  X(fused_elementwise, k_fused_elementwise) X(fused_reduce, k_fused_reduce) X(fused_matmul, k_fused_matmul) \
  X(fused_softmax, k_fused_softmax) X(fused_layer_norm, k_fused_norm) X(fused_rms_norm, k_fused_norm) \
  X(fused_lora_linear, k_lora_linear) X(fused_attention, k_fused_attention) \
  X(quantized_linear, k_quantized_linear) X(rotary_embedding, k_rotary_embedding)
/* Native-only instructions (no registry op): catalog variants. */
#define LOOM_NATIVE_OPS(X) X(fused_softmax_f32, k_softmax_f32) X(fused_layer_norm_f32, k_norm_f32) X(fused_rms_norm_f32, k_norm_f32) \
  X(fused_softmax_f32x, k_softmax_f32) X(matmul_f32acc, k_matmul_f32acc) X(fused_attention_f32x, k_fused_attention_f32x) \
  X(lora_linear_f32, k_lora_linear) X(fused_lora_linear_f32, k_lora_linear) X(jit_call, k_jit_call) \
  X(fused_rms_norm_f32x, k_norm_f32)

#define LOOM_ENUM_EW(n) OP_##n,
#define LOOM_ENUM_K(n, k) OP_##n,
enum { LOOM_REGISTRY_EW_OPS(LOOM_ENUM_EW) OP_EW_END, OP_K_BEGIN = OP_EW_END - 1, LOOM_REGISTRY_KERNEL_OPS(LOOM_ENUM_EW) LOOM_NATIVE_OPS(LOOM_ENUM_K) OP_END };

/* ---- the kernels (kernels/), called by the interpreter with parsed operands --------------- */
typedef struct {
  int op;
  int nin;
  int nattr;
  const double *attr;
  tdesc out;
  tdesc in[LOOM_MAXIN];
} loom_instr;

int k_elementwise(const loom_instr *I);
int k_reduce(const loom_instr *I);
int k_arg(const loom_instr *I);
int k_cumsum(const loom_instr *I);
int k_matmul(const loom_instr *I);
int k_matmul_f32acc(const loom_instr *I);
int k_lora_linear(const loom_instr *I);
/** sparse.c: CSR weight × dense input (registry spmm). */
int k_spmm(const loom_instr *I);
/** quant.c: dequantize-matmul over packed Q8_0/Q4_0/NF4/int8 weights (src/graph/ops/quantized.ts). */
int k_quantized_linear(const loom_instr *I);
/** rope.c: x·cos + rotate_half(x)·sin and its adjoint (src/graph/ops/rope.ts). */
int k_rotary_embedding(const loom_instr *I);
int k_gather(const loom_instr *I);
int k_scatter_add(const loom_instr *I);
int k_index_select(const loom_instr *I);
int k_index_add(const loom_instr *I);
int k_tri(const loom_instr *I);
int k_cat(const loom_instr *I);
int k_slice_backward(const loom_instr *I);
int k_fused_elementwise(const loom_instr *I);
int k_fused_reduce(const loom_instr *I);
int k_fused_matmul(const loom_instr *I);
int k_fused_softmax(const loom_instr *I);
int k_fused_norm(const loom_instr *I);
int k_fused_attention(const loom_instr *I);
/* rows_f32.c: the bounded float32 row kernels (catalog implementations, src/backends/native/rows.ts) */
int k_softmax_f32(const loom_instr *I);
/** rows_f32.c: softmax of one float32 row with float32 exponentials (e: n floats of scratch). */
void softmax_row_f32x(const float *v, float *out, float *e, int64_t n);
/** fused.c: fused_attention in float32 (catalog native.fused_attention.f32x, src/backends/native/rows.ts). */
int k_fused_attention_f32x(const loom_instr *I);
int k_norm_f32(const loom_instr *I);
/** A generated kernel (kernels/jit.c). */
int k_jit_call(const loom_instr *I);

/** Copy src (strided, any dtype) into dst (strided, any dtype) with the js conversions. */
void copy_strided(const tdesc *dst, const tdesc *src);
/** Drop size-1 dims and merge dims that are contiguous in every operand; returns the new ndim. */
int collapse_dims(int nd, int64_t *shape, int nops, int64_t **strides);
/**
 * o[i] = op(a[i], b[i], c[i]) for i < n (elementwise opcode); dt is the dtype the result is
 * stored as (float32 results may use faster approximations accurate to far below a float32 ulp).
 */
void ew_apply(int op, int dt, double *o, const double *a, const double *b, const double *c, int n);
/**
 * Report (as the current command's error) the first integer-result fault ew_apply saw since the
 * last call, and clear it: integer division by zero, integer pow with a negative exponent, a
 * non-finite value stored as an integer. Returns 1 if there was one. Called after every kernel.
 */
int loom_int_fault_report(void);
/** Padding of block buffers: transcendental ops run whole SIMD vectors (position-independent bits). */
#define LOOM_VEC 8
#define LOOM_PAD(n) (((n) + LOOM_VEC - 1) / LOOM_VEC * LOOM_VEC)

/* ---- expression programs (the fused ops' attrs; see src/backends/native/program.ts) -------- */
/*
 * program = [nd, shape[nd], nregs, ncode, out, code...]
 *   LOAD: [0, dst, input, offset, strides[nd]]   input's element off + offset + Σ idx·strides
 *   OP:   [1, dst, opcode, dtype, a, b, c]       registers of the operands, rounded to dtype
 *   ACC:  [2, dst]                               the accumulated value at this index
 *   CONST:[3, dst, input, offset, strides[nd]]   a LOAD whose strides are all 0 (a broadcast
 *                                                scalar): its register is dedicated and filled
 *                                                once per task
 * Every code writes register `dst` (a block of LOOM_BLOCK doubles); registers are reused once
 * their value is dead (allocated in TypeScript).
 */
enum { PC_LOAD = 0, PC_OP = 1, PC_ACC = 2, PC_CONST = 3 };
typedef struct {
  int kind, dst, input, op, dt, a, b, c;
  int64_t off;
  const double *st; /* LOAD: nd strides */
} pcode;
typedef struct {
  int nd, nregs, ncode, out;
  int64_t shape[LOOM_MAXD];
  const pcode *code;
} prog_t;
#define LOOM_MAXCODE 2048
/** Parse a program at w into P (codes stored in `storage`, LOOM_MAXCODE entries); returns the word after it or NULL. */
const double *prog_parse(const double *w, const double *end, prog_t *P, pcode *storage, int nin);
/**
 * Evaluate P over a block of n elements: LOAD code k reads its input at pos[k] + i·dir[k];
 * ACC reads `accp` (dtype accdt) at accpos + i. regs: nregs × LOOM_BLOCK doubles, private to the
 * calling task; *cinit (0 at the task's first call) tells whether CONST registers are filled.
 * Returns the result.
 */
const double *prog_eval(const prog_t *P, const tdesc *ins, const int64_t *pos, const int64_t *dir, int n,
                        const char *accp, int accdt, int64_t accpos, double *regs, int *cinit);
/** rows_f32.c: a row of n values of t (element `at`, stride st) as float32: in place when contiguous float32, else copied into own. */
const float *load_row_f32(const tdesc *t, int64_t at, int64_t st, float *own, int64_t n);
/** rows_f32.c: one float32 prologue op of the row kernels over n values (registers a, b, w -> own). */
void prologue_op_f32(const pcode *c, const float *a, const float *b, const float *w, float *own, int64_t n);
/**
 * Evaluate P at every index of its shape and store the result into `out` (strided over P's
 * shape), in parallel tiles. acc (may be NULL): a dense buffer over P's shape read by ACC codes.
 */
int prog_run(const prog_t *P, const tdesc *ins, const tdesc *out, const char *accp, int accdt);

/* ---- reductions (reduce.c): the one summation order every native kernel uses ----------------- */
/*
 * A reduction folds its values in row-major order over the reduced dims, in blocks of
 * LOOM_BLOCK: a block sums its first floor(m/8)·8 values in 8 interleaved lanes, combines them as
 * ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), adds the rest in order, and is added to the running total.
 * amax/amin give the sequential fold's result (NaN wins; of equal zeros, the first). Eager
 * reductions and every fused kernel use this, so their results are equal bit for bit.
 */
enum { RED_SUM = 0, RED_MAX = 1, RED_MIN = 2 };
/** Fold one block of m values into the running state (acc, first zero seen: fz, 0/1 seen flag). */
typedef struct { double acc, fz; int zseen; } fold_t;
void fold_init(fold_t *f, int kind);
void fold_block(fold_t *f, int kind, const double *v, int m);
double fold_result(const fold_t *f, int kind);
/** The canonical fold of n contiguous values. */
double fold_values(int kind, const double *v, int64_t n);

/* ---- matmul (matmul.c) ------------------------------------------------------------------------ */
/** o = a @ b with matmul's broadcasting; o dense. Exactly the eager matmul's GEMM calls. */
int matmul_into(const tdesc *a, const tdesc *b, const tdesc *o);
/**
 * One batch entry of a batched product (a, b 2-D views; o dense 2-D) on the calling thread, cut
 * into the same GEMM calls matmul_into makes for a batch of `nbatch` such entries (so the bits
 * equal the batched matmul's). Uses task scratch SCR_T2..T4.
 */
void matmul_entry(const tdesc *a, const tdesc *b, const tdesc *o, int64_t nbatch);

/* blas.c */
int loom_blas_available(void);
/* 1 while the machine looks oversubscribed (shim.c: a spinning pool thread was descheduled) */
int loom_pool_contended(void);
/* a span of work on the calling thread; the check marks the machine oversubscribed when the span
 * took PREEMPT_US more wall time than CPU time (the thread was descheduled) */
typedef struct { double wall, cpu; } loom_span;
loom_span loom_span_start(void);
void loom_span_check(loom_span s);
void loom_gemm_f32(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
void loom_gemm_f64(int transA, int transB, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
                   const double *B, int64_t ldb, double beta, double *C, int64_t ldc);
/* Loom's own float32 GEMM and one-row GEMV (sgemm.c, blas.c): AVX-512, or AVX2 with FMA. */
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#define LOOM_OWN_SGEMM 1
#endif
/**
 * y[0..N) = x·B for one float32 row x (stride incx) and B row-major [K, N] (ldb), streamed row
 * after row (blas.c); returns 0 when unavailable (no LOOM_OWN_SGEMM, or LOOM_GEMV=blas) and writes nothing
 * (K = 0: only asks whether it is available).
 */
int loom_sgemv_rows(int64_t K, int64_t N, const float *x, int64_t incx, const float *B, int64_t ldb, float *y);
/**
 * C = op(A)·op(B), float32, row-major, op the transpose when ta / tb (sgemm.c): C[i][j] is
 * fl(A[i][0]·B[0][j]) followed by the fma chain over k = 1..K-1, whatever M, N, the transposes
 * and the blocking (the one-row gemv's chain). Returns 0 without AVX-512 or AVX2 + FMA (use BLAS then).
 */
int loom_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B, int64_t ldb,
               float *C, int64_t ldc);

/** A dense descriptor over `p` with shape `shape[nd]`. */
static inline tdesc dense_desc(void *p, int dt, int nd, const int64_t *shape) {
  tdesc t;
  t.p = (char *)p;
  t.dt = dt;
  t.nd = nd;
  t.off = 0;
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; i--) { t.shape[i] = shape[i]; t.st[i] = s; s *= shape[i]; }
  return t;
}

#endif
