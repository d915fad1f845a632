/*
 * Indexing and data movement: gather, scatter_add, index_select, index_add, tri (tril/triu),
 * cat and slice_backward. Semantics and error messages follow src/graph/ops/linalg_index.ts and
 * movement.ts; every kernel writes its whole (dense) output, so outputs may live in a reused
 * workspace.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

/*
 * Index bounds errors, worded as the reference's indexError (linalg_index.ts): attr[1] is the
 * composite the index came from (INDEX_CALLERS order, from 1; 0 = the op itself). Negative
 * indices are out of bounds (PyTorch does not wrap them in these ops).
 */
enum { CALLER_NONE, CALLER_EMBEDDING, CALLER_CROSS_ENTROPY, CALLER_ONE_HOT, CALLER_NLL_LOSS };

/** Check index v for a dim of `size`, or record the reference's error and return -1. */
static int64_t check_index(const char *op, int caller, double v, int64_t size, int dim) {
  if (v >= 0 && v < (double)size) return (int64_t)v;
  if (caller == CALLER_CROSS_ENTROPY) loom_set_error("[cross_entropy] Target %.17g is out of bounds.", v);
  else if (caller == CALLER_NLL_LOSS) loom_set_error("[nll_loss] Target %.17g is out of bounds.", v);
  else if (caller == CALLER_ONE_HOT && v < 0) loom_set_error("[one_hot] class values must be non-negative");
  else if (caller == CALLER_ONE_HOT) loom_set_error("[one_hot] class values must be smaller than num_classes (%lld), got %.17g", (long long)size, v);
  else loom_set_error("[%s] index %.17g is out of bounds for dimension %d with size %lld", caller == CALLER_EMBEDDING ? "embedding" : op, v, dim, (long long)size);
  return -1;
}

/** PyTorch treats a 0-d operand of these ops as 1-D of size 1 (ensure_nonempty_dim/size). */
static tdesc as1d(const tdesc *t) {
  tdesc v = *t;
  if (v.nd == 0) {
    v.nd = 1;
    v.shape[0] = 1;
    v.st[0] = 1;
  }
  return v;
}

/** Storage offset of the k-th row-major element of shape `sh` under strides `st`. */
static inline int64_t offset_of(int nd, const int64_t *sh, const int64_t *st, int64_t base, int64_t k) {
  for (int d = nd - 1; d >= 0; d--) {
    base += (k % sh[d]) * st[d];
    k /= sh[d];
  }
  return base;
}

/** A view of t with dim `dim` narrowed to [start, start+len). */
static tdesc narrow(const tdesc *t, int dim, int64_t start, int64_t len) {
  tdesc v = *t;
  v.shape[dim] = len;
  v.off += start * t->st[dim];
  return v;
}

/** The reference accumulates with `+=` into the storage array: bool wraps as a byte there. */
static inline int raw_dt(int dt) { return dt == DT_BOOL ? DT_U8 : dt; }

static void zero_dense(const tdesc *o) {
  memset(o->p + o->off * dt_size(o->dt), 0, (size_t)(t_numel(o) * dt_size(o->dt)));
}

/** out[i] = x[... index[i] at dim ...] over the index's elements (out dense, shaped as index). */
int k_gather(const loom_instr *I) {
  const tdesc X = as1d(&I->in[0]), IX = as1d(&I->in[1]), *o = &I->out;
  const tdesc *x = &X, *ix = &IX;
  int dim = (int)I->attr[0], caller = (int)I->attr[1];
  int64_t n = t_numel(ix), size = x->shape[dim];
  int64_t xs[LOOM_MAXD];
  for (int d = 0; d < x->nd; d++) xs[d] = d == dim ? 0 : x->st[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t k = check_index("gather", caller, load1(ix->p, ix->dt, offset_of(ix->nd, ix->shape, ix->st, ix->off, i)), size, dim);
    if (k < 0) return 1;
    int64_t xo = offset_of(ix->nd, ix->shape, xs, x->off, i) + k * x->st[dim];
    store1(o->p, o->dt, o->off + i, load1(x->p, x->dt, xo));
  }
  return 0;
}

/** out = x; out[... index[i] at dim ...] += src[i] over the index's elements. */
int k_scatter_add(const loom_instr *I) {
  const tdesc X = as1d(&I->in[0]), IX = as1d(&I->in[1]), SRC = as1d(&I->in[2]), O = as1d(&I->out);
  const tdesc *x = &X, *ix = &IX, *src = &SRC, *o = &O;
  int dim = (int)I->attr[0], caller = (int)I->attr[1];
  copy_strided(o, x);
  int64_t n = t_numel(ix), size = o->shape[dim];
  int64_t os[LOOM_MAXD];
  for (int d = 0; d < o->nd; d++) os[d] = d == dim ? 0 : o->st[d];
  for (int64_t i = 0; i < n; i++) {
    int64_t k = check_index("scatter_add", caller, load1(ix->p, ix->dt, offset_of(ix->nd, ix->shape, ix->st, ix->off, i)), size, dim);
    if (k < 0) return 1;
    int64_t oo = offset_of(ix->nd, ix->shape, os, o->off, i) + k * o->st[dim];
    double v = load1(src->p, src->dt, offset_of(ix->nd, ix->shape, src->st, src->off, i));
    store1(o->p, raw_dt(o->dt), oo, load1(o->p, o->dt, oo) + v);
  }
  return 0;
}

/** Read and check a 1-D (or 0-d) index into ks; returns 0 on success. */
static int read_indices(const char *op, int caller, const tdesc *ix, int64_t size, int dim, int64_t *ks, int64_t n) {
  int64_t s = ix->nd > 0 ? ix->st[0] : 0;
  for (int64_t j = 0; j < n; j++) {
    ks[j] = check_index(op, caller, load1(ix->p, ix->dt, ix->off + j * s), size, dim);
    if (ks[j] < 0) return 1;
  }
  return 0;
}

int k_index_select(const loom_instr *I) {
  const tdesc X = as1d(&I->in[0]), O = as1d(&I->out), *ix = &I->in[1];
  int dim = (int)I->attr[0], caller = (int)I->attr[1];
  int64_t n = t_numel(ix);
  int64_t *ks = malloc(sizeof(int64_t) * (n > 0 ? n : 1));
  int bad = read_indices("index_select", caller, ix, X.shape[dim], dim, ks, n);
  for (int64_t j = 0; j < n && !bad; j++) {
    tdesc s = narrow(&X, dim, ks[j], 1), d = narrow(&O, dim, j, 1);
    copy_strided(&d, &s);
  }
  free(ks);
  return bad;
}

int k_index_add(const loom_instr *I) {
  const tdesc X = as1d(&I->in[0]), SRC = as1d(&I->in[2]), O = as1d(&I->out), *ix = &I->in[1];
  int dim = (int)I->attr[0], caller = (int)I->attr[1];
  int64_t n = t_numel(ix);
  int64_t *ks = malloc(sizeof(int64_t) * (n > 0 ? n : 1));
  int bad = read_indices("index_add", caller, ix, X.shape[dim], dim, ks, n);
  if (!bad) copy_strided(&O, &X);
  for (int64_t j = 0; j < n && !bad; j++) {
    loom_instr A;
    memset(&A, 0, sizeof A);
    A.op = OP_add;
    A.nin = 2;
    A.out = narrow(&O, dim, ks[j], 1);
    A.out.dt = raw_dt(O.dt);
    A.in[0] = A.out;
    A.in[1] = narrow(&SRC, dim, j, 1);
    k_elementwise(&A);
  }
  free(ks);
  return bad;
}

/** tril/triu over the last two dims: attrs = [diagonal, upper]. */
int k_tri(const loom_instr *I) {
  const tdesc *x = &I->in[0], *o = &I->out;
  int64_t diag = (int64_t)I->attr[0];
  int upper = I->attr[1] != 0;
  int64_t R = x->shape[x->nd - 2], C = x->shape[x->nd - 1], n = t_numel(x);
  if (n == 0) return 0;
  double row[LOOM_BLOCK];
  for (int64_t r0 = 0; r0 < n / C; r0++) {
    int64_t r = r0 % R;
    int64_t xo = offset_of(x->nd - 1, x->shape, x->st, x->off, r0);
    for (int64_t c0 = 0; c0 < C; c0 += LOOM_BLOCK) {
      int m = (int)(C - c0 < LOOM_BLOCK ? C - c0 : LOOM_BLOCK);
      load_block(row, x->p, x->dt, xo + c0 * x->st[x->nd - 1], x->st[x->nd - 1], m);
      for (int j = 0; j < m; j++) {
        int64_t c = c0 + j;
        int keep = upper ? c - r >= diag : c - r <= diag;
        if (!keep) row[j] = 0;
      }
      store_block(o->p, o->dt, o->off + r0 * C + c0, 1, row, m);
    }
  }
  return 0;
}

/** One input of a cat as blocks: `outer` blocks of `block` bytes, the i-th at src(i), to dst + i·ostride. */
typedef struct {
  const tdesc *in;
  int dim;
  int64_t block, ostride;
  char *dst;
} cat_ctx;

static void cat_blocks(void *vc, int64_t i0, int64_t i1) {
  const cat_ctx *C = vc;
  const tdesc *x = C->in;
  size_t es = (size_t)dt_size(x->dt);
  for (int64_t i = i0; i < i1; i++) {
    int64_t off = offset_of(C->dim, x->shape, x->st, x->off, i); /* the outer dims' index i */
    memcpy(C->dst + i * C->ostride, x->p + (size_t)off * es, (size_t)C->block);
  }
}

/**
 * attrs = [dim]: inputs copied side by side along dim (with dtype conversion). Into a dense
 * output, an input of the output's dtype whose dims from `dim` on are dense is copied block by
 * block with memcpy over the pool; others go through the strided copy (W7u's q/k/v gradient, a cat of three
 * [2048, 384] row views into [2048, 1152]: 1.4 ms through the interpreter).
 */
int k_cat(const loom_instr *I) {
  int dim = (int)I->attr[0];
  const tdesc *o = &I->out;
  int64_t start = 0, outer = 1, inner = 1;
  for (int d = 0; d < dim; d++) outer *= o->shape[d];
  for (int d = dim + 1; d < o->nd; d++) inner *= o->shape[d];
  size_t es = (size_t)dt_size(o->dt);
  int odense = t_dense_from(o, 0);
  for (int k = 0; k < I->nin; k++) {
    const tdesc *x = &I->in[k];
    int64_t len = x->shape[dim];
    if (odense && x->dt == o->dt && t_dense_from(x, dim) && len * inner > 0) {
      cat_ctx C = {x, dim, len * inner * (int64_t)es, o->shape[dim] * inner * (int64_t)es,
                   o->p + (size_t)(o->off + start * inner) * es};
      loom_parallel_for(outer, 1 + (int64_t)(65536 / (len * inner * (int64_t)es + 1)), cat_blocks, &C);
    } else {
      tdesc d = narrow(o, dim, start, len);
      copy_strided(&d, x);
    }
    start += len;
  }
  return 0;
}

/** attrs = [dim, start, end, step]: zeros with g written at the sliced positions. */
int k_slice_backward(const loom_instr *I) {
  const tdesc *o = &I->out;
  int dim = (int)I->attr[0];
  int64_t start = (int64_t)I->attr[1], step = (int64_t)I->attr[3];
  zero_dense(o);
  tdesc d = *o;
  d.shape[dim] = I->in[0].shape[dim];
  d.st[dim] = o->st[dim] * step;
  d.off = o->off + start * o->st[dim];
  copy_strided(&d, &I->in[0]);
  return 0;
}
