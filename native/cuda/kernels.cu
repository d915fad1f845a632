/*
 * Device kernels of Loom's CUDA library: the expression-program interpreter (every elementwise
 * op and fused elementwise program), reductions over a program (sum/amax/amin and fused_reduce),
 * and LoRA's final combination. Simple before fast: one thread per output element for programs,
 * one block per output element for reductions, every value in double.
 *
 * Scalar semantics are the registry's `ref` functions (src/graph/ops/elementwise.ts) as the CPU
 * shim implements them (native/kernels/elementwise.c): NaN is true for logical ops, sign(NaN)
 * and sign(-0) are 0, maximum/minimum propagate NaN and order signed zeros as Math.max/Math.min,
 * pow follows Math.pow's NaN cases, round is half-to-even, remainder takes the divisor's sign.
 * Transcendental functions are CUDA's double-precision ones (at most 1-2 ulp of double from the
 * correctly rounded value, CUDA C Programming Guide, "Mathematical Functions"), so float32
 * results almost always equal the CPU shim's bits, and always within a float32 ulp.
 * Integer results that would be faults on the CPU (integer division by zero, a non-finite value
 * stored as an integer) set a device fault word that the host reads at the next synchronization.
 * The TypeScript side sends integer-result elementwise ops to the CPU instead, so the fault word
 * is a second line of defence, never the first.
 */
#include <stdio.h>

#include "common.cuh"

__device__ int g_fault;    /* 0: none; else 1 + opcode */
__device__ int g_fault_dt; /* dtype of the faulting result */

static inline __device__ void fault(int op, int dt) {
  if (atomicCAS(&g_fault, 0, 1 + op) == 0) g_fault_dt = dt;
}

int lc_take_fault(cudaStream_t s, int *op, int *dt) {
  int f = 0, d = 0, zero = 0;
  if (cudaMemcpyFromSymbolAsync(&f, g_fault, sizeof f, 0, cudaMemcpyDeviceToHost, s) != cudaSuccess) return 0;
  if (cudaMemcpyFromSymbolAsync(&d, g_fault_dt, sizeof d, 0, cudaMemcpyDeviceToHost, s) != cudaSuccess) return 0;
  cudaStreamSynchronize(s);
  if (!f) return 0;
  cudaMemcpyToSymbolAsync(g_fault, &zero, sizeof zero, 0, cudaMemcpyHostToDevice, s);
  cudaStreamSynchronize(s);
  *op = f - 1;
  *dt = d;
  return 1;
}

static inline __device__ int is_int_dt(int dt) { return dt == DT_I32 || dt == DT_I64 || dt == DT_I8 || dt == DT_U8; }

/* torch.remainder: fmod (exact), moved to the divisor's sign */
static inline __device__ double py_rem(double x, double y) {
  double m = fmod(x, y);
  return (m != 0 && ((y < 0) != (m < 0))) ? m + y : m;
}

static inline __device__ double js_pow(double a, double b) {
  if (isnan(b)) return CUDART_NAN;
  if (isinf(b) && fabs(a) == 1) return CUDART_NAN;
  if (b == 2) return a * a; /* correctly rounded, as the CPU shim's x² case */
  return pow(a, b);
}

/* torch's integer pow: a negative exponent gives 1 for base 1, ±1 for base -1, else 0 */
static inline __device__ double int_pow(double x, double y) {
  if (!(y < 0)) return js_pow(x, y);
  if (x == 1) return 1;
  if (x == -1) return fmod(y, 2.0) == 0 ? 1 : -1;
  return 0;
}

static inline __device__ double js_max(double a, double b) {
  if (isnan(a) || isnan(b)) return CUDART_NAN;
  if (a > b) return a;
  if (b > a) return b;
  return signbit(a) ? b : a; /* equal: +0 wins over -0 */
}

static inline __device__ double js_min(double a, double b) {
  if (isnan(a) || isnan(b)) return CUDART_NAN;
  if (a < b) return a;
  if (b < a) return b;
  return signbit(a) ? a : b; /* equal: -0 wins over +0 */
}

/** One registry elementwise op on doubles, rounded to its result dtype `dt`. */
static __device__ double lc_op(int op, int dt, double x, double y, double z) {
  int in = is_int_dt(dt);
  if (in && (op == OP_floor_divide || op == OP_remainder) && y == 0) { fault(op, dt); return 0; }
  double r;
  switch (op) {
    case OP_neg: r = -x; break;
    case OP_abs: r = fabs(x); break;
    case OP_sign: r = x > 0 ? 1 : x < 0 ? -1 : 0; break;
    case OP_exp: r = exp(x); break;
    case OP_log: r = log(x); break;
    case OP_log1p: r = log1p(x); break;
    case OP_sqrt: r = sqrt(x); break;
    case OP_rsqrt: r = 1 / sqrt(x); break;
    case OP_reciprocal: r = 1 / x; break;
    case OP_sin: r = sin(x); break;
    case OP_cos: r = cos(x); break;
    case OP_tanh: r = tanh(x); break;
    case OP_sigmoid: r = 1 / (1 + exp(-x)); break;
    case OP_relu: r = x > 0 || isnan(x) ? x : 0; break;
    case OP_erf: r = erf(x); break;
    case OP_floor: r = floor(x); break;
    case OP_ceil: r = ceil(x); break;
    case OP_round: r = rint(x); break;
    case OP_isnan: r = isnan(x) ? 1 : 0; break;
    case OP_logical_not: r = x != 0 ? 0 : 1; break;
    case OP_contiguous: case OP_cast: r = x; break;
    case OP_add: r = x + y; break;
    case OP_sub: r = x - y; break;
    case OP_mul: r = x * y; break;
    case OP_div: r = x / y; break;
    case OP_floor_divide: r = floor(x / y); break;
    case OP_remainder: r = py_rem(x, y); break;
    case OP_pow: r = in ? int_pow(x, y) : js_pow(x, y); break;
    case OP_maximum: r = js_max(x, y); break;
    case OP_minimum: r = js_min(x, y); break;
    case OP_eq: r = x == y; break;
    case OP_ne: r = x != y; break;
    case OP_lt: r = x < y; break;
    case OP_le: r = x <= y; break;
    case OP_gt: r = x > y; break;
    case OP_ge: r = x >= y; break;
    case OP_logical_and: r = x != 0 && y != 0; break;
    case OP_logical_or: r = x != 0 || y != 0; break;
    case OP_where: r = x != 0 ? y : z; break;
    default: r = CUDART_NAN; fault(op, dt); break;
  }
  if (in && !isfinite(r)) { fault(op, dt); return 0; }
  return lc_round(dt, r);
}

/** Evaluate program P at the index idx (linear index lin, for ACC codes); returns the result. */
static __device__ double eval_prog(const cprog &P, const ccode *codes, const int64_t *st, const ctensor *ins,
                                   const int64_t *idx, const double *acc, int64_t lin, double *regs) {
  for (int k = 0; k < P.ncode; k++) {
    const ccode c = codes[k];
    if (c.kind == PC_LOAD || c.kind == PC_CONST) {
      const ctensor *t = &ins[c.input];
      int64_t pos = t->off + c.off;
      for (int d = 0; d < P.nd; d++) pos += idx[d] * st[c.st + d];
      regs[c.dst] = lc_load(t->p, t->dt, pos);
    } else if (c.kind == PC_OP) {
      regs[c.dst] = lc_op(c.op, c.dt, regs[c.a], regs[c.b], regs[c.c]);
    } else {
      regs[c.dst] = acc[lin];
    }
  }
  return regs[codes[P.out].dst];
}

/** Row-major multi-index of `lin` over shape[nd]. */
static inline __device__ void unravel(int64_t lin, int nd, const int64_t *shape, int64_t *idx) {
  for (int d = nd - 1; d >= 0; d--) {
    idx[d] = lin % shape[d];
    lin /= shape[d];
  }
}

__global__ void k_prog(cprog P, const ccode *codes, const int64_t *st, const ctensor *ins, ctensor out, const double *acc, int64_t n) {
  double regs[LC_MAXREGS];
  int64_t idx[LC_MAXD];
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    unravel(i, P.nd, P.shape, idx);
    double v = eval_prog(P, codes, st, ins, idx, acc, i, regs);
    int64_t pos = out.off; /* out.nd == P.nd (checked by the parser) */
    for (int d = 0; d < P.nd; d++) pos += idx[d] * out.st[d];
    lc_store(out.p, out.dt, pos, v);
  }
}

static int64_t numel(int nd, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  return n;
}

static unsigned grid_for(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  return (unsigned)(b < 1 ? 1 : b > 65535 * 16 ? 65535 * 16 : b);
}

cudaError_t lc_launch_prog(cudaStream_t s, const cprog *P, const ccode *codes, const int64_t *strides, const ctensor *ins,
                           const ctensor *out, const double *acc) {
  int64_t n = numel(P->nd, P->shape);
  if (n == 0) return cudaSuccess;
  k_prog<<<grid_for(n, 256), 256, 0, s>>>(*P, codes, strides, ins, *out, acc, n);
  return cudaGetLastError();
}

/* ---- reductions ------------------------------------------------------------------------------ */
/** Kept and reduced dims of a reduction (host-computed). */
typedef struct {
  int nk, nr;
  int kd[LC_MAXD], rd[LC_MAXD];
  int64_t nout, nred;
} redinfo;

/* amax/amin as the sequential fold (src/graph/ops/reduce.ts nanMax/nanMin) gives them: NaN wins,
 * of equal values the first; a (value, index) pair makes the parallel tree choose the same one */
typedef struct { double v; int64_t i; } vi;
#define NONE_I INT64_MAX

static inline __device__ int replaces(int kind, vi a, vi b) {
  if (b.i == NONE_I) return 0;
  if (a.i == NONE_I) return 1;
  if (isnan(a.v)) return isnan(b.v) && b.i < a.i;
  if (isnan(b.v)) return 1;
  if (kind == RED_MAX ? b.v > a.v : b.v < a.v) return 1;
  return b.v == a.v && b.i < a.i;
}

#define RED_THREADS 256

__global__ void k_reduce(cprog P, const ccode *codes, const int64_t *st, const ctensor *ins, redinfo R, int kind, int dt,
                         double *acc, ctensor out) {
  __shared__ double sv[RED_THREADS];
  __shared__ int64_t si[RED_THREADS];
  double regs[LC_MAXREGS];
  int64_t idx[LC_MAXD];
  const int T = blockDim.x, t = threadIdx.x;
  for (int64_t o = blockIdx.x; o < R.nout; o += gridDim.x) {
    int64_t rem = o;
    for (int j = R.nk - 1; j >= 0; j--) {
      int d = R.kd[j];
      idx[d] = rem % P.shape[d];
      rem /= P.shape[d];
    }
    vi best = {kind == RED_SUM ? 0.0 : (kind == RED_MAX ? -CUDART_INF : CUDART_INF), NONE_I};
    double sum = 0;
    for (int64_t r = t; r < R.nred; r += T) {
      int64_t q = r;
      for (int j = R.nr - 1; j >= 0; j--) {
        int d = R.rd[j];
        idx[d] = q % P.shape[d];
        q /= P.shape[d];
      }
      double v = eval_prog(P, codes, st, ins, idx, nullptr, 0, regs);
      if (kind == RED_SUM) sum += v;
      else {
        vi c = {v, r};
        if (replaces(kind, best, c)) best = c;
      }
    }
    sv[t] = kind == RED_SUM ? sum : best.v;
    si[t] = best.i;
    __syncthreads();
    for (int h = T / 2; h > 0; h >>= 1) {
      if (t < h) {
        if (kind == RED_SUM) sv[t] += sv[t + h];
        else {
          vi a = {sv[t], si[t]}, b = {sv[t + h], si[t + h]};
          if (replaces(kind, a, b)) { sv[t] = b.v; si[t] = b.i; }
        }
      }
      __syncthreads();
    }
    if (t == 0) {
      double v = lc_round(dt, sv[0]);
      if (acc) acc[o] = v;
      else {
        int64_t pos = out.off, q = o;
        for (int d = out.nd - 1; d >= 0; d--) {
          pos += (q % out.shape[d]) * out.st[d];
          q /= out.shape[d];
        }
        lc_store(out.p, out.dt, pos, v);
      }
    }
    __syncthreads(); /* sv/si are rewritten by the next output */
  }
}

cudaError_t lc_launch_reduce(cudaStream_t s, const cprog *P, const ccode *codes, const int64_t *strides, const ctensor *ins,
                             int kind, int dt, const unsigned char *isred, double *acc, const ctensor *out) {
  redinfo R;
  R.nk = R.nr = 0;
  R.nout = R.nred = 1;
  for (int d = 0; d < P->nd; d++) {
    if (isred[d]) { R.rd[R.nr++] = d; R.nred *= P->shape[d]; }
    else { R.kd[R.nk++] = d; R.nout *= P->shape[d]; }
  }
  if (R.nout == 0) return cudaSuccess;
  int T = 32;
  while (T < RED_THREADS && T < R.nred) T *= 2;
  unsigned blocks = (unsigned)(R.nout < 65535 * 16 ? R.nout : 65535 * 16);
  k_reduce<<<blocks, T, 0, s>>>(*P, codes, strides, ins, R, kind, dt, acc, *out);
  return cudaGetLastError();
}

/* ---- LoRA -------------------------------------------------------------------------------------- */
__global__ void k_lora_combine(ctensor out, uint64_t y, uint64_t d, ctensor bias, int has_bias, double scale, int64_t n) {
  const int dt = out.dt;
  const int64_t N = out.shape[out.nd - 1];
  const double sc = lc_round(dt, scale); /* lora.ts: s = roundTo(out.dtype)(scaling) */
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    double yv = lc_load(y, dt, i), dl = lc_round(dt, lc_load(d, dt, i) * sc);
    double base = has_bias ? lc_round(dt, yv + lc_load(bias.p, bias.dt, bias.off + (i % N) * bias.st[0])) : yv;
    int64_t pos = out.off, q = i;
    for (int k = out.nd - 1; k >= 0; k--) {
      pos += (q % out.shape[k]) * out.st[k];
      q /= out.shape[k];
    }
    lc_store(out.p, dt, pos, lc_round(dt, base + dl));
  }
}

cudaError_t lc_launch_lora_combine(cudaStream_t s, const ctensor *out, uint64_t y, uint64_t d, const ctensor *bias, double scale) {
  int64_t n = numel(out->nd, out->shape);
  if (n == 0) return cudaSuccess;
  ctensor none = {};
  k_lora_combine<<<grid_for(n, 256), 256, 0, s>>>(*out, y, d, bias ? *bias : none, bias != nullptr, scale, n);
  return cudaGetLastError();
}
