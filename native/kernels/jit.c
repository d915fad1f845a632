/*
 * Running generated kernels (src/backends/native/jit.ts): C compiled per fused program into its
 * own shared library, called here as one instruction of a command buffer, so it stays ordered
 * with the plan's other instructions and runs on Loom's pool.
 *
 *   attrs = [slot, ntasks, grain, params...]
 *   slot: address of a double holding the generated function's address (filled by TypeScript
 *         once the library is loaded, before the instruction is submitted)
 *   the function: void f(char *const *P, const double *A, int64_t begin, int64_t end), A = the
 *   params (sizes, strides, offsets: one compiled kernel serves every shape), P[0] = the output's first
 *   element, P[1 + k] = input k's element at its tensor offset; [begin, end) a range of the
 *   kernel's tasks (tiles of rows for elementwise programs, output elements for reductions);
 *   P[JIT_ALIAS] is non-null when the output shares a buffer with an input (in-place reuse: a
 *   kernel that reads an input again after storing must then stage its stores)
 * Every task writes only its own output elements, so any split over the pool gives the same bits.
 */
#include "common.h"

typedef void (*jit_fn)(char *const *P, const double *A, int64_t begin, int64_t end);
#define JIT_ALIAS (LOOM_MAXIN + 1)
typedef struct {
  jit_fn fn;
  const double *params;
  char *ptrs[LOOM_MAXIN + 2];
} jit_ctx;

static void jit_task(void *c, int64_t b, int64_t e) {
  jit_ctx *x = c;
  x->fn(x->ptrs, x->params, b, e);
}

int k_jit_call(const loom_instr *I) {
  if (I->nattr < 3) { loom_set_error("jit_call: expected 3 attributes, got %d", I->nattr); return 1; }
  double a = *(const double *)(uintptr_t)I->attr[0];
  jit_ctx c;
  c.fn = (jit_fn)(uintptr_t)a;
  if (!c.fn) { loom_set_error("jit_call: kernel not loaded"); return 1; }
  c.params = I->attr + 3;
  c.ptrs[0] = I->out.p + I->out.off * dt_size(I->out.dt);
  c.ptrs[JIT_ALIAS] = NULL;
  for (int i = 0; i < I->nin; i++) {
    c.ptrs[1 + i] = I->in[i].p + I->in[i].off * dt_size(I->in[i].dt);
    if (I->in[i].p == I->out.p || c.ptrs[1 + i] == c.ptrs[0]) c.ptrs[JIT_ALIAS] = I->out.p;
  }
  loom_parallel_for((int64_t)I->attr[1], (int64_t)I->attr[2], jit_task, &c);
  return 0;
}
