/*
 * The fused AdamW update (src/optim/adam.ts, Backend.adamw): one pass over p, g, m, v instead of
 * ~10 eager ops, with the same operations in the same order and every intermediate rounded to the
 * parameter's dtype as those ops store it, so it equals the eager update bit for bit:
 *   p = p·(1-lr·λ); m = m·β1 + g·(1-β1); v = v·β2 + (g·g)·(1-β2);
 *   d = √v / √bc2 + eps; p = p + (m / d)·(-lr/bc1)
 * The scalar factors come from TypeScript (computed there as the optimizer computes them) and are
 * rounded to the dtype here, as wrapping them in 0-d tensors does.
 */
#include "common.h"

typedef struct {
  char *p, *g, *m, *v;
  int dt, maximize;
  double decay, b1, c1, b2, c2, bc2s, eps, step;
} adamw_ctx;

#define RD(x) (dt == DT_F32 ? (double)(float)(x) : (x))

typedef struct {
  adamw_ctx c;
  int64_t n;
} adamw_job;

static void adamw_range(void *vc, int64_t e0, int64_t e1) {
  adamw_job *J = vc;
  adamw_ctx *C = &J->c;
  int dt = C->dt;
  double p[LOOM_BLOCK], g[LOOM_BLOCK], m[LOOM_BLOCK], v[LOOM_BLOCK];
  for (int64_t i0 = e0; i0 < e1; i0 += LOOM_BLOCK) {
    int n = (int)(e1 - i0 < LOOM_BLOCK ? e1 - i0 : LOOM_BLOCK);
    load_block(p, C->p, dt, i0, 1, n);
    load_block(g, C->g, dt, i0, 1, n);
    load_block(m, C->m, dt, i0, 1, n);
    load_block(v, C->v, dt, i0, 1, n);
    for (int i = 0; i < n; i++) {
      double gi = C->maximize ? -g[i] : g[i];
      double pi = RD(p[i] * C->decay);
      double mi = RD(RD(m[i] * C->b1) + RD(gi * C->c1));
      double vi = RD(RD(v[i] * C->b2) + RD(RD(gi * gi) * C->c2));
      double d = RD(RD(RD(sqrt(vi)) / C->bc2s) + C->eps);
      p[i] = RD(pi + RD(RD(mi / d) * C->step));
      m[i] = mi;
      v[i] = vi;
    }
    store_block(C->p, dt, i0, 1, p, n);
    store_block(C->m, dt, i0, 1, m, n);
    store_block(C->v, dt, i0, 1, v, n);
  }
}

/**
 * adamw: out = p (updated in place), inputs [g, m, v] (m, v updated in place), all dense and of
 * one float32/float64 dtype; attrs [1-lr·λ, β1, 1-β1, β2, 1-β2, √bc2, eps, -lr/bc1, maximize].
 */
int k_adamw(const loom_instr *I) {
  const tdesc *P = &I->out, *G = &I->in[0], *M = &I->in[1], *V = &I->in[2];
  int dt = P->dt;
  if ((dt != DT_F32 && dt != DT_F64) || G->dt != dt || M->dt != dt || V->dt != dt || I->nattr != 9) {
    loom_set_error("[adamw] p, g, m, v must be float32 or float64 tensors of one dtype");
    return 1;
  }
  int es = dt_size(dt);
  adamw_job J;
  J.c.p = P->p + P->off * es;
  J.c.g = G->p + G->off * es;
  J.c.m = M->p + M->off * es;
  J.c.v = V->p + V->off * es;
  J.c.dt = dt;
  const double *a = I->attr;
  J.c.decay = RD(a[0]);
  J.c.b1 = RD(a[1]);
  J.c.c1 = RD(a[2]);
  J.c.b2 = RD(a[3]);
  J.c.c2 = RD(a[4]);
  J.c.bc2s = RD(a[5]);
  J.c.eps = RD(a[6]);
  J.c.step = RD(a[7]);
  J.c.maximize = a[8] != 0;
  J.n = t_numel(P);
  loom_parallel_for(J.n, 16384, adamw_range, &J);
  return 0;
}
