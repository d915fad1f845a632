/*
 * The parts of the command wire format that both libraries read, written once: the CPU shim
 * (native/shim.c, native/kernels/) and the CUDA library (native/cuda/, built with nvcc, which
 * hashes this file with its own sources). Host code only.
 * - the op-name list TypeScript derives its opcode map from (loom_op_names / loom_cuda_op_names);
 * - the header of an expression program (src/backends/native/program.ts encodeProgram):
 *   [nd, shape[nd], nregs, ncode, out, code...].
 */
#pragma once
#include <stdint.h>
#include <string.h>

/**
 * Write the comma-separated names of ops 0..n-1 into buf (cap bytes), an empty name where
 * has(i) is 0; stops early (truncated, still terminated) rather than overflow.
 */
static inline void wire_op_names(char *buf, size_t cap, const char *const *names, int n, int (*has)(int)) {
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    const char *s = has(i) ? names[i] : "";
    size_t l = strlen(s);
    if (k + l + 2 > cap) break;
    memcpy(buf + k, s, l);
    k += l;
    buf[k++] = ',';
  }
  buf[k] = 0;
}

/**
 * Read a program header from w (not past end): nd (0..maxd), the shape, nregs, ncode, out.
 * Returns the word after the header, or NULL when it does not fit (ranges of nregs and ncode
 * are the caller's: each library holds programs of its own size).
 */
static inline const double *wire_prog_header(const double *w, const double *end, int maxd, int *nd, int64_t *shape, int *nregs,
                                             int *ncode, int *out) {
  if (w >= end) return 0;
  *nd = (int)w[0];
  if (*nd < 0 || *nd > maxd || w + 1 + *nd + 3 > end) return 0;
  for (int d = 0; d < *nd; d++) shape[d] = (int64_t)w[1 + d];
  w += 1 + *nd;
  *nregs = (int)w[0];
  *ncode = (int)w[1];
  *out = (int)w[2];
  return w + 3;
}
