/*
 * The machine's two roofs, for the targets' feasibility (bench/native_results.md, "roofs"):
 * - float32 FMA peak: 12 independent fmadd chains per thread (AVX-512, else AVX2; latency 4, two
 *   FMA pipes: enough to fill them), on 1 and 2 threads, in GFLOP/s (2 FLOP per lane);
 * - memory: y = 2·x over 16 MiB (read 16 MiB, write 16 MiB: the compulsory traffic of W3's
 *   softmax and W4's RMSNorm) and y = x·a + b over 4M floats (48 MiB read, 16 MiB written: W2's),
 *   best of 15, on 1 and 2 threads, in GB/s of that compulsory traffic.
 *
 *   gcc -O2 -march=native bench/roofline.c -o /tmp/roofline -lpthread && /tmp/roofline
 *
 * Needs AVX-512F (Zen 4, the Xeons) or AVX2 with FMA (Zen 3). The threads are created per measurement,
 * so the memory figures include one thread start (about 50 µs), as a pool's wake-up would.
 */
#include "../native/kernels/vec.h" /* vf: the widest float vector (AVX-512 or AVX2) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

volatile float vb = 1.0000001f, vc = 1e-9f; /* volatile: the compiler cannot fold the chains */
float sink[16];

static void *fma_chains(void *p) {
  long n = (long)p;
  vf b = vf_set1(vb), c = vf_set1(vc), a[12];
  for (int i = 0; i < 12; i++) a[i] = vf_set1(vc * (float)(i + 1)); /* distinct: no CSE */
  for (long it = 0; it < n; it++) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = vf_fma(a[i], b, c);
  }
  vf s = a[0];
  for (int i = 1; i < 12; i++) s = vf_add(s, a[i]);
  vf_storeu(sink, s); /* read by main: the chains are live */
  return NULL;
}

#define N (4L * 1024 * 1024)
static float *x, *a, *b, *y;
typedef struct { long lo, hi; int triad; } span;

static void *stream(void *p) {
  span *s = p;
  if (s->triad) for (long i = s->lo; i < s->hi; i++) y[i] = x[i] * a[i] + b[i];
  else for (long i = s->lo; i < s->hi; i++) y[i] = 2.0f * x[i];
  return NULL;
}

/** Seconds of fn over T threads (the work split in T equal parts). */
static double on_threads(int T, void *(*fn)(void *), void **args) {
  pthread_t th[2];
  double t0 = now();
  for (int t = 0; t < T; t++) pthread_create(&th[t], NULL, fn, args[t]);
  for (int t = 0; t < T; t++) pthread_join(th[t], NULL);
  return now() - t0;
}

int main(void) {
  long n = 400000000L / 12;
  for (int T = 1; T <= 2; T++) {
    void *args[2] = {(void *)n, (void *)n};
    double dt = on_threads(T, fma_chains, args);
    printf("fma peak, %d thread%s: %.1f GFLOP/s (%g)\n", T, T > 1 ? "s" : "", T * (double)n * 12 * VEC_W * 2 / dt / 1e9, sink[0]);
  }
  x = aligned_alloc(64, N * 4); a = aligned_alloc(64, N * 4); b = aligned_alloc(64, N * 4); y = aligned_alloc(64, N * 4);
  for (long i = 0; i < N; i++) { x[i] = (float)i; a[i] = 1; b[i] = 2; y[i] = 0; } /* pages touched: no faults timed */
  for (int triad = 0; triad <= 1; triad++) {
    for (int T = 1; T <= 2; T++) {
      span s[2];
      void *args[2] = {&s[0], &s[1]};
      for (int t = 0; t < T; t++) s[t] = (span){N / T * t, N / T * (t + 1), triad};
      double best = 1e9;
      for (int r = 0; r < 15; r++) { double dt = on_threads(T, stream, args); if (dt < best) best = dt; }
      double bytes = (triad ? 4.0 : 2.0) * N * 4;
      printf("%s, %d thread%s: %.3f ms, %.1f GB/s\n", triad ? "y = x*a + b (64 MiB)" : "y = 2x (32 MiB)", T, T > 1 ? "s" : "", best * 1e3, bytes / best / 1e9);
    }
  }
  return 0;
}
