/*
 * The widest vectors this CPU has, under one set of names, for kernels whose arithmetic is the
 * same at any width (the one-row GEMV, the LoRA epilogue): AVX-512 (16 float / 8 double lanes)
 * or AVX2 with FMA (8 / 4). Each operation maps to one intrinsic, so a kernel written with these
 * does the same operations in the same order at either width and gives the same bits; VEC_W is
 * undefined on a CPU with neither (the callers then have scalar code).
 *
 * Masks select the first n lanes of a float vector: a __mmask16 with AVX-512, a lane mask for
 * vmaskmov with AVX2 (masked-off lanes are neither read nor written, so a masked load past the
 * end of an array does not fault).
 */
#ifndef LOOM_VEC_H
#define LOOM_VEC_H
#include <stdint.h>
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

#ifdef __AVX512F__
#define VEC_W 16 /* float lanes */
typedef __m512 vf;
typedef __mmask16 vf_mask;
#define vf_loadu _mm512_loadu_ps
#define vf_storeu _mm512_storeu_ps
#define vf_set1 _mm512_set1_ps
#define vf_mul _mm512_mul_ps
#define vf_add _mm512_add_ps
#define vf_fma _mm512_fmadd_ps
/** The first n lanes, 0 <= n <= 16. */
static inline vf_mask vf_first(int64_t n) { return (vf_mask)((1u << n) - 1u); }
#define vf_maskload(m, p) _mm512_maskz_loadu_ps((m), (p))
#define vf_maskstore(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))

#define VD_W 8 /* double lanes */
typedef __m512d vd;
#define vd_load_ps(p) _mm512_cvtps_pd(_mm256_loadu_ps(p)) /* VD_W floats, widened */
#define vd_store_ps(p, v) _mm256_storeu_ps((p), _mm512_cvtpd_ps(v))
#define vd_loadu _mm512_loadu_pd
#define vd_set1 _mm512_set1_pd
#define vd_add _mm512_add_pd
#define vd_fma _mm512_fmadd_pd
#elif defined(__AVX2__) && defined(__FMA__)
#define VEC_W 8
typedef __m256 vf;
typedef __m256i vf_mask;
#define vf_loadu _mm256_loadu_ps
#define vf_storeu _mm256_storeu_ps
#define vf_set1 _mm256_set1_ps
#define vf_mul _mm256_mul_ps
#define vf_add _mm256_add_ps
#define vf_fma _mm256_fmadd_ps
/** The first n lanes (n clamped to [0, 8]). */
static inline vf_mask vf_first(int64_t n) {
  int m = n < 0 ? 0 : n > 8 ? 8 : (int)n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define vf_maskload(m, p) _mm256_maskload_ps((p), (m))
#define vf_maskstore(p, m, v) _mm256_maskstore_ps((p), (m), (v))

#define VD_W 4
typedef __m256d vd;
#define vd_load_ps(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
#define vd_store_ps(p, v) _mm_storeu_ps((p), _mm256_cvtpd_ps(v))
#define vd_loadu _mm256_loadu_pd
#define vd_set1 _mm256_set1_pd
#define vd_add _mm256_add_pd
#define vd_fma _mm256_fmadd_pd
#endif

#endif
