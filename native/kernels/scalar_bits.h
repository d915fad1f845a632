/*
 * Scalars shared by the CPU kernels (cc) and the CUDA kernels (nvcc): the dtype codes, float16 and
 * bfloat16 to and from float32 (bit-identical to src/tensor/dtype.ts), JavaScript's ToInt32-style
 * wrap, and one element's load/store with the js backend's conversions. Written once here so the
 * two builds cannot drift; under nvcc they are __host__ __device__.
 * Bit casts go through memcpy (both compilers turn it into a register move).
 */
#ifndef LOOM_SCALAR_BITS_H
#define LOOM_SCALAR_BITS_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define LOOM_HD __host__ __device__
#else
#define LOOM_HD
#endif

/* dtype codes (the order of the command ABI's dtype field, src/backends/native/program.ts) */
enum { DT_F32 = 0, DT_F64, DT_F16, DT_BF16, DT_I32, DT_I64, DT_I8, DT_U8, DT_BOOL };

static inline LOOM_HD int dt_size(int dt) {
  switch (dt) {
    case DT_F32: case DT_I32: return 4;
    case DT_F64: case DT_I64: return 8;
    case DT_F16: case DT_BF16: return 2;
    default: return 1;
  }
}

/* float32 <-> its bits */
static inline LOOM_HD uint32_t f32_bits(float v) {
  uint32_t x;
  memcpy(&x, &v, 4);
  return x;
}
static inline LOOM_HD float f32_from_bits(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline LOOM_HD float f16_to_f32(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
  if (e == 0) {
    float v = (float)m * 5.9604644775390625e-8f; /* 2^-24 */
    return (h & 0x8000) ? -v : v;
  }
  if (e == 31) x = s | 0x7f800000u | (m << 13);
  else x = s | ((e + 112) << 23) | (m << 13);
  return f32_from_bits(x);
}

static inline LOOM_HD uint16_t f32_to_f16(float v) {
  uint32_t x = f32_bits(v);
  uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
  if (exp == 0xff) return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000;
    int shift = 14 - e;
    uint32_t half = 1u << (shift - 1), r = mant >> shift, rem = mant & ((1u << shift) - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = mant >> 13, rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) {
    r++;
    if (r == 0x400) { r = 0; e++; if (e >= 31) return (uint16_t)(sign | 0x7c00); }
  }
  return (uint16_t)(sign | ((uint32_t)e << 10) | r);
}

static inline LOOM_HD float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

static inline LOOM_HD uint16_t f32_to_bf16(float v) {
  uint32_t x = f32_bits(v);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)(((x >> 16) | 0x40) & 0xffff);
  uint32_t lsb = (x >> 16) & 1;
  return (uint16_t)(((x + 0x7fff + lsb) >> 16) & 0xffff);
}

/** JavaScript's ToInt32-style wrap of a double into [0, mod) (NaN and infinities give 0). */
static inline LOOM_HD uint32_t js_wrap(double d, double mod) {
  if (!isfinite(d)) return 0;
  double t = trunc(d);
  if (t >= 0 && t < mod) return (uint32_t)t;
  double m = fmod(t, mod);
  if (m < 0) m += mod;
  return (uint32_t)m;
}

/** Element i of a buffer of dtype dt at p, as a double (int64 is stored as double: the ABI's rule). */
static inline LOOM_HD double load1(const char *p, int dt, int64_t i) {
  switch (dt) {
    case DT_F32: return ((const float *)p)[i];
    case DT_F64: case DT_I64: return ((const double *)p)[i];
    case DT_F16: return f16_to_f32(((const uint16_t *)p)[i]);
    case DT_BF16: return bf16_to_f32(((const uint16_t *)p)[i]);
    case DT_I32: return ((const int32_t *)p)[i];
    case DT_I8: return ((const int8_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
  }
}

/** Store v as element i with the js backend's conversions (JavaScript's typed-array rules). */
static inline LOOM_HD void store1(char *p, int dt, int64_t i, double v) {
  switch (dt) {
    case DT_F32: ((float *)p)[i] = (float)v; break;
    case DT_F64: ((double *)p)[i] = v; break;
    case DT_I64: { double t = isnan(v) ? 0 : trunc(v); ((double *)p)[i] = t + 0.0; break; }
    case DT_F16: ((uint16_t *)p)[i] = f32_to_f16((float)v); break;
    case DT_BF16: ((uint16_t *)p)[i] = f32_to_bf16((float)v); break;
    case DT_I32: ((int32_t *)p)[i] = (int32_t)js_wrap(v, 4294967296.0); break;
    case DT_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)js_wrap(v, 256.0); break;
    case DT_U8: ((uint8_t *)p)[i] = (uint8_t)js_wrap(v, 256.0); break;
    default: ((uint8_t *)p)[i] = v != 0; break; /* bool: NaN is truthy here, as `v !== 0` */
  }
}

#endif
