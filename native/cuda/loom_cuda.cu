/*
 * Loom's CUDA library: the FFI ABI that src/backends/cuda/ loads, with the CPU shim's command
 * buffer format (native/shim.c):
 *   instruction = [opcode, nwords, nin, nattr, attr[nattr], out tensor, in tensor × nin]
 *   tensor      = [address, dtype, ndim, offset, shape[ndim], strides[ndim]]
 * where an address is a device address (loom_cuda_malloc). Opcodes come from the same generated
 * table (ops.gen.h, from src/graph/registry.ts).
 *
 * `loom_cuda_submit` is one stream submission: it parses the whole buffer on the host (a bad
 * instruction launches nothing), packs every parsed descriptor and program into one arena that
 * one asynchronous copy (from pinned staging) moves to the device, then launches the kernels in
 * order on the library's one stream and returns without waiting. Every piece of work (uploads,
 * kernels, readbacks) goes through that stream, so a buffer's last reader always runs before
 * its next writer: the TypeScript pool may hand a released buffer out again at once.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "common.cuh"
#include "quant.cuh"

#define LC_EXPORT extern "C" __attribute__((visibility("default")))

/* ---- errors --------------------------------------------------------------------------------- */
static char err_buf[1024];

static void set_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_buf, sizeof err_buf, fmt, ap);
  va_end(ap);
}

static int cuda_ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 1;
  set_error("%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
  return 0;
}

LC_EXPORT const char *loom_cuda_error(void) { return err_buf; }
LC_EXPORT int loom_cuda_abi_version(void) { return 1; }

/* ---- op table ------------------------------------------------------------------------------ */
#define NAME_1(n) #n,
static const char *const OP_NAME[OP_END] = {LOOM_REGISTRY_EW_OPS(NAME_1) LOOM_REGISTRY_KERNEL_OPS(NAME_1)};

/** Whether this library runs opcode op (every elementwise op, and the kernels below). */
static int has_kernel(int op) {
  if (op < OP_EW_END) return 1;
  switch (op) {
    case OP_sum: case OP_amax: case OP_amin: case OP_matmul: case OP_lora_linear: case OP_quantized_linear:
    case OP_fused_elementwise: case OP_fused_reduce: return 1;
    default: return 0;
  }
}

/** Comma-separated op names in opcode order, empty where an op has no CUDA kernel (as loom_op_names). */
LC_EXPORT const char *loom_cuda_op_names(void) {
  static char buf[8192];
  if (!buf[0]) wire_op_names(buf, sizeof buf, OP_NAME, OP_END, has_kernel);
  return buf;
}

/* ---- device, stream --------------------------------------------------------------------------- */
static cudaStream_t stream;
static int started;
static char device_name[256];
static const char *cublas_name = "";
static int cublas_loaded;

/** Number of CUDA devices, or -1 when the runtime cannot tell (no driver: loom_cuda_error says why). */
LC_EXPORT int loom_cuda_device_count(void) {
  int n = 0;
  if (!cuda_ok(cudaGetDeviceCount(&n), "cudaGetDeviceCount")) {
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) { /* the usual reason on a machine without a GPU: say it plainly */
      size_t l = strlen(err_buf);
      snprintf(err_buf + l, sizeof err_buf - l, "; libcuda.so.1 (the NVIDIA driver) is not installed");
    } else dlclose(drv);
    return -1;
  }
  return n;
}

/** Open device `dev` and the library's stream; idempotent. 0 on success, -1 (loom_cuda_error). */
LC_EXPORT int loom_cuda_init(int dev) {
  if (started) return 0;
  int n = loom_cuda_device_count();
  if (n < 0) return -1;
  if (n == 0) { set_error("no CUDA device (cudaGetDeviceCount returned 0)"); return -1; }
  if (dev < 0 || dev >= n) { set_error("CUDA device %d does not exist (%d present)", dev, n); return -1; }
  if (!cuda_ok(cudaSetDevice(dev), "cudaSetDevice")) return -1;
  cudaDeviceProp p;
  if (!cuda_ok(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties")) return -1;
  snprintf(device_name, sizeof device_name, "%.200s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor, p.totalGlobalMem / 1073741824.0);
  if (!cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) return -1;
  cublas_loaded = lc_cublas_load(stream, &cublas_name);
  started = 1;
  return 0;
}

LC_EXPORT const char *loom_cuda_device_name(void) { return device_name; }
LC_EXPORT int loom_cuda_cublas(void) { return cublas_loaded; }
LC_EXPORT const char *loom_cuda_cublas_name(void) { return cublas_name; }

/** [free bytes, total bytes] of the device. */
LC_EXPORT int loom_cuda_mem_info(double *out) {
  size_t f = 0, t = 0;
  if (!cuda_ok(cudaMemGetInfo(&f, &t), "cudaMemGetInfo")) return -1;
  out[0] = (double)f;
  out[1] = (double)t;
  return 0;
}

/* ---- device memory: TypeScript pools the buffers (src/backends/cuda/memory.ts) ---------------- */
static double n_mallocs, n_frees, n_uploads, up_bytes, n_downloads, down_bytes, n_submits, n_launches;

/** A new device buffer of `bytes` (its address), or 0 (loom_cuda_error). */
LC_EXPORT double loom_cuda_malloc(double bytes) {
  void *p = nullptr;
  if (!cuda_ok(cudaMalloc(&p, (size_t)bytes), "cudaMalloc")) return 0;
  n_mallocs++;
  return (double)(uintptr_t)p;
}

/** Free a device buffer (synchronizes the device, as cudaFree does: the pool trims rarely). */
LC_EXPORT int loom_cuda_free(double p) {
  n_frees++;
  return cuda_ok(cudaFree((void *)(uintptr_t)p), "cudaFree") ? 0 : -1;
}

/* ---- pinned staging: a ring of page-locked buffers, each reused once its last copy finished ---- */
enum { RING = 8, CHUNK = 16 << 20 };
typedef struct {
  char *host;
  size_t cap;
  int pinned, used;
  cudaEvent_t ev;
} slot_t;
static slot_t ring[RING];
static int ring_next;

/** A staging buffer of at least `bytes` (pinned when cudaHostAlloc succeeds), free to overwrite; NULL with the error. */
static slot_t *stage(size_t bytes) {
  slot_t *s = &ring[ring_next];
  ring_next = (ring_next + 1) % RING;
  if (!s->ev) cudaEventCreateWithFlags(&s->ev, cudaEventDisableTiming);
  if (s->used) cudaEventSynchronize(s->ev); /* its previous copy has read it */
  s->used = 0;
  if (s->cap < bytes) {
    if (s->host) { if (s->pinned) cudaFreeHost(s->host); else free(s->host); }
    size_t cap = bytes < 65536 ? 65536 : bytes + bytes / 2;
    s->pinned = cudaHostAlloc((void **)&s->host, cap, cudaHostAllocDefault) == cudaSuccess;
    if (!s->pinned) s->host = (char *)malloc(cap); /* then the copy is staged by the driver */
    s->cap = s->host ? cap : 0;
    if (!s->host) { set_error("out of host memory for staging (%zu bytes)", bytes); return nullptr; }
  }
  return s;
}

/** Mark a slot's copy as queued: it is reused after the event. */
static void staged(slot_t *s) {
  cudaEventRecord(s->ev, stream);
  s->used = 1;
}

/** Host to device through the staging ring, CHUNK bytes at a time; 0, or -1 with the error (`what` names the copy). */
static int upload_staged(void *dst, const void *src, size_t n, const char *what) {
  for (size_t o = 0; o < n; o += CHUNK) {
    size_t m = n - o < (size_t)CHUNK ? n - o : (size_t)CHUNK;
    slot_t *s = stage(m);
    if (!s) return -1;
    memcpy(s->host, (const char *)src + o, m);
    if (!cuda_ok(cudaMemcpyAsync((char *)dst + o, s->host, m, cudaMemcpyHostToDevice, stream), what)) return -1;
    staged(s);
  }
  return 0;
}

/**
 * Copy `bytes` of host memory to device address dst, asynchronously: the host bytes are copied
 * into pinned staging before this returns, so the caller may reuse them at once.
 */
LC_EXPORT int loom_cuda_upload(double dst, const void *src, double bytes) {
  n_uploads++;
  up_bytes += bytes;
  return upload_staged((void *)(uintptr_t)dst, src, (size_t)bytes, "upload");
}

/** Reported after a synchronization: a device fault (integer results), as the CPU shim words it. */
static int check_fault(void) {
  int op, dt;
  if (!lc_take_fault(stream, &op, &dt)) return 0;
  static const char *const DT[] = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "int8", "uint8", "bool"};
  const char *name = op >= 0 && op < OP_END ? OP_NAME[op] : "?";
  if (op == OP_floor_divide || op == OP_remainder) set_error("[%s] ZeroDivisionError: integer division by zero (%s)", name, DT[dt % 9]);
  else set_error("[%s] a result cannot be stored in a %s tensor (non-finite), computed on the CUDA device", name, DT[dt % 9]);
  return 1;
}

/** Wait for all queued work; 0, or -1 with the error (a kernel's launch failure or a device fault). */
LC_EXPORT int loom_cuda_sync(void) {
  if (!cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return -1;
  return check_fault() ? -1 : 0;
}

/** Copy `bytes` from device address src to host memory dst, waiting for everything queued before. */
LC_EXPORT int loom_cuda_download(void *dst, double src, double bytes) {
  size_t n = (size_t)bytes;
  n_downloads++;
  down_bytes += bytes;
  for (size_t o = 0; o < n; o += CHUNK) {
    size_t m = n - o < (size_t)CHUNK ? n - o : (size_t)CHUNK;
    slot_t *s = stage(m);
    if (!s) return -1;
    if (!cuda_ok(cudaMemcpyAsync(s->host, (const void *)((uintptr_t)src + o), m, cudaMemcpyDeviceToHost, stream), "download")) return -1;
    if (!cuda_ok(cudaStreamSynchronize(stream), "download")) return -1;
    memcpy((char *)dst + o, s->host, m);
  }
  return check_fault() ? -1 : 0;
}

/* An asynchronous readback: its own pinned buffer and an event JavaScript polls. */
typedef struct {
  char *host;
  size_t bytes;
  int pinned;
  cudaEvent_t ev;
} readback_t;

/** Queue a copy of `bytes` from src into a new pinned buffer; poll loom_cuda_read_done, then loom_cuda_read_finish. */
LC_EXPORT void *loom_cuda_read_start(double src, double bytes) {
  readback_t *r = (readback_t *)calloc(1, sizeof(readback_t));
  r->bytes = (size_t)bytes;
  size_t cap = r->bytes ? r->bytes : 1;
  r->pinned = cudaHostAlloc((void **)&r->host, cap, cudaHostAllocDefault) == cudaSuccess;
  if (!r->pinned) r->host = (char *)malloc(cap);
  n_downloads++;
  down_bytes += bytes;
  if (!r->host || !cuda_ok(cudaEventCreateWithFlags(&r->ev, cudaEventDisableTiming), "cudaEventCreate") ||
      (r->bytes && !cuda_ok(cudaMemcpyAsync(r->host, (const void *)(uintptr_t)src, r->bytes, cudaMemcpyDeviceToHost, stream), "read")) ||
      !cuda_ok(cudaEventRecord(r->ev, stream), "cudaEventRecord")) {
    if (r->host) { if (r->pinned) cudaFreeHost(r->host); else free(r->host); }
    free(r);
    return nullptr;
  }
  return r;
}

/** 1 when the readback's copy has finished (cheap: an event query), else 0. */
LC_EXPORT int loom_cuda_read_done(void *h) { return cudaEventQuery(((readback_t *)h)->ev) == cudaSuccess; }

/** Wait for the readback, copy it into dst and free it; 0 or -1 (loom_cuda_error). */
LC_EXPORT int loom_cuda_read_finish(void *h, void *dst) {
  readback_t *r = (readback_t *)h;
  int ok = cuda_ok(cudaEventSynchronize(r->ev), "read");
  if (ok && r->bytes) memcpy(dst, r->host, r->bytes);
  cudaEventDestroy(r->ev);
  if (r->pinned) cudaFreeHost(r->host); else free(r->host);
  free(r);
  if (!ok) return -1;
  return check_fault() ? -1 : 0;
}

/* ---- command buffers ------------------------------------------------------------------------ */
/* The arena: every descriptor and program of one submission, copied to the device at once. */
static std::vector<char> arena;
static char *arena_dev;
static size_t arena_cap;

static size_t push(const void *p, size_t bytes) {
  size_t at = (arena.size() + 15) & ~(size_t)15;
  arena.resize(at + bytes);
  memcpy(arena.data() + at, p, bytes);
  return at;
}

/** A parsed program: its header and where its codes and strides are in the arena. */
typedef struct {
  cprog P;
  size_t codes, strides;
} aprog;

/** What one instruction launches (device pointers are arena offsets until the arena is copied). */
typedef struct {
  int op;
  ctensor out;
  ctensor in[3]; /* matmul, lora_linear: operands by value */
  int nin;
  size_t ins;    /* arena offset of the ctensor inputs (programs) */
  aprog pro, epi;
  int has_epi, red_kind, red_dt;
  unsigned char isred[LC_MAXD];
  double scale;
  int has_bias;
  int qfmt, qtrans; /* quantized_linear: format (LQ_*), transposed */
} launch_t;

static const double *parse_tensor(const double *w, const double *end, ctensor *t) {
  if (w + 4 > end) return nullptr;
  t->p = (uint64_t)w[0];
  t->dt = (int)w[1];
  t->nd = (int)w[2];
  t->off = (int64_t)w[3];
  if (t->nd < 0 || t->nd > LC_MAXD || t->dt < 0 || t->dt > DT_BOOL || w + 4 + 2 * t->nd > end) return nullptr;
  for (int i = 0; i < t->nd; i++) t->shape[i] = (int64_t)w[4 + i];
  for (int i = 0; i < t->nd; i++) t->st[i] = (int64_t)w[4 + t->nd + i];
  return w + 4 + 2 * t->nd;
}

/** Parse program words (program.ts encodeProgram) into the arena; returns the word after it or NULL. */
static const double *parse_prog(const double *w, const double *end, aprog *A, int nin) {
  cprog *P = &A->P;
  w = wire_prog_header(w, end, LC_MAXD, &P->nd, P->shape, &P->nregs, &P->ncode, &P->out);
  if (!w) return nullptr;
  if (P->ncode < 1 || P->ncode > LC_MAXCODE || P->nregs < 1) return nullptr;
  if (P->nregs > LC_MAXREGS) { set_error("program of %d registers (the CUDA interpreter holds %d)", P->nregs, LC_MAXREGS); return nullptr; }
  std::vector<ccode> codes(P->ncode);
  std::vector<int64_t> st;
  for (int k = 0; k < P->ncode; k++) {
    ccode *c = &codes[k];
    memset(c, 0, sizeof *c);
    if (w + 2 > end) return nullptr;
    c->kind = (int)w[0];
    c->dst = (int)w[1];
    if (c->dst < 0 || c->dst >= P->nregs) return nullptr;
    if (c->kind == PC_LOAD || c->kind == PC_CONST) {
      if (w + 4 + P->nd > end) return nullptr;
      c->input = (int)w[2];
      c->off = (int64_t)w[3];
      c->st = (int)st.size();
      for (int d = 0; d < P->nd; d++) st.push_back((int64_t)w[4 + d]);
      if (c->input < 0 || c->input >= nin) return nullptr;
      w += 4 + P->nd;
    } else if (c->kind == PC_OP) {
      if (w + 7 > end) return nullptr;
      c->op = (int)w[2];
      c->dt = (int)w[3];
      c->a = (int)w[4];
      c->b = (int)w[5];
      c->c = (int)w[6];
      if (c->op < 0 || c->op >= OP_EW_END || c->dt < 0 || c->dt > DT_BOOL) return nullptr;
      if (c->a < 0 || c->a >= P->nregs || c->b < 0 || c->b >= P->nregs || c->c < 0 || c->c >= P->nregs) return nullptr;
      w += 7;
    } else if (c->kind == PC_ACC) {
      w += 2;
    } else return nullptr;
  }
  if (P->out < 0 || P->out >= P->ncode) return nullptr;
  A->codes = push(codes.data(), codes.size() * sizeof(ccode));
  st.push_back(0); /* never empty */
  A->strides = push(st.data(), st.size() * sizeof(int64_t));
  return w;
}

/** A program of one load per input (right-aligned broadcast to out's shape) and op `op` (elementwise instructions). */
static void ew_prog(aprog *A, int op, const ctensor *out, const ctensor *in, int nin) {
  cprog *P = &A->P;
  int nd = out->nd;
  P->nd = nd;
  for (int d = 0; d < nd; d++) P->shape[d] = out->shape[d];
  P->nregs = nin + 1;
  P->ncode = nin + 1;
  P->out = nin;
  ccode codes[4];
  int64_t st[3 * LC_MAXD + 1] = {0};
  for (int k = 0; k < nin; k++) {
    const ctensor *x = &in[k];
    int lead = nd - x->nd;
    for (int d = 0; d < nd; d++) {
      int xd = d - lead;
      st[k * nd + d] = (xd < 0 || (x->shape[xd] == 1 && out->shape[d] != 1)) ? 0 : x->st[xd];
    }
    codes[k] = ccode{PC_LOAD, k, k, 0, 0, 0, 0, 0, 0, k * nd};
  }
  codes[nin] = ccode{PC_OP, nin, 0, op, out->dt, 0, nin > 1 ? 1 : 0, nin > 2 ? 2 : 0, 0, 0};
  A->codes = push(codes, (size_t)(nin + 1) * sizeof(ccode));
  A->strides = push(st, sizeof st);
}

/** A program of one load of x over its own shape (plain reductions). */
static void load_prog(aprog *A, const ctensor *x) {
  cprog *P = &A->P;
  P->nd = x->nd;
  for (int d = 0; d < x->nd; d++) P->shape[d] = x->shape[d];
  P->nregs = 1;
  P->ncode = 1;
  P->out = 0;
  ccode c = {PC_LOAD, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t st[LC_MAXD + 1] = {0};
  for (int d = 0; d < x->nd; d++) st[d] = x->st[d];
  A->codes = push(&c, sizeof c);
  A->strides = push(st, sizeof st);
}

/**
 * quantized_linear's attrs [format, transposed, has_bias] and operands [x, qweight, scales?, bias?]
 * checked as the op's shape/dtype rules (src/graph/ops/quantized.ts), so a malformed instruction
 * is refused before anything launches; 0 with the error set.
 */
static int parse_quant(int k, const double *attr, int nin, const ctensor *ins, const ctensor *out, launch_t *L) {
#define QBAD(...) do { char m_[512]; snprintf(m_, sizeof m_, __VA_ARGS__); set_error("instruction %d (quantized_linear): %s", k, m_); return 0; } while (0)
  int fmt = (int)attr[0], tr = attr[1] != 0, hb = attr[2] != 0;
  if (attr[0] != fmt || fmt < LQ_Q8_0 || fmt > LQ_INT8) QBAD("unknown format code %g", attr[0]);
  if (tr && hb) QBAD("the transposed form takes no bias");
  int sc = lq_has_scales(fmt);
  if (nin != 2 + sc + hb) QBAD("%d operands, expected %d", nin, 2 + sc + hb);
  const ctensor *x = &ins[0], *q = &ins[1];
  int qdt = fmt == LQ_INT8 ? DT_I8 : DT_U8;
  if (x->dt != DT_F32 || out->dt != DT_F32 || (q->dt != qdt && q->dt != DT_I32)) QBAD("dtypes x %d, qweight %d, out %d", x->dt, q->dt, out->dt);
  if (q->nd != 2 || x->nd < 1 || out->nd != x->nd) QBAD("ranks x %d, qweight %d, out %d", x->nd, q->nd, out->nd);
  int64_t N = q->shape[0], rb = q->shape[1] * (q->dt == DT_I32 ? 4 : 1), bb = lq_block_bytes(fmt);
  if (rb % bb != 0) QBAD("row of %lld bytes is not a whole number of %lld-byte blocks", (long long)rb, (long long)bb);
  int64_t K = rb / bb * lq_block(fmt), kin = tr ? N : K, kout = tr ? K : N;
  if (x->shape[x->nd - 1] != kin || out->shape[out->nd - 1] != kout) QBAD("x's last dim %lld, out's %lld for W [%lld, %lld]", (long long)x->shape[x->nd - 1], (long long)out->shape[out->nd - 1], (long long)N, (long long)K);
  for (int d = 0; d + 1 < x->nd; d++) if (x->shape[d] != out->shape[d]) QBAD("x and out differ in dim %d", d);
  if (sc) {
    const ctensor *s = &ins[2];
    int64_t want = fmt == LQ_NF4 ? N * K / 64 : N;
    if (s->dt != DT_F32 || s->nd != 1 || s->shape[0] != want) QBAD("scales must be float32 [%lld]", (long long)want);
  }
  if (hb) {
    const ctensor *b = &ins[2 + sc];
    if (b->dt != DT_F32 || b->nd != 1 || b->shape[0] != N) QBAD("bias must be float32 [%lld]", (long long)N);
  }
#undef QBAD
  L->qfmt = fmt;
  L->qtrans = tr;
  L->has_bias = hb;
  return 1;
}

static double op_counts[OP_END];

/** Parse instruction k at w into L (descriptors and programs into the arena); NULL when malformed. */
static const double *parse_instr(const double *w, const double *end, launch_t *L, int k) {
  if (w + 4 > end) { set_error("instruction %d: truncated", k); return nullptr; }
  const double *next = w + (int64_t)w[1];
  L->op = (int)w[0];
  int nin = (int)w[2], nattr = (int)w[3];
  if (L->op < 0 || L->op >= OP_END || !has_kernel(L->op) || nin < 0 || nin > LC_MAXIN || next > end || next <= w) {
    set_error("bad instruction %d (opcode %d: %s)", k, L->op, L->op >= 0 && L->op < OP_END && has_kernel(L->op) ? "malformed" : "no CUDA kernel");
    return nullptr;
  }
  const double *attr = w + 4, *aend = attr + nattr;
  const double *t = parse_tensor(aend, next, &L->out);
  std::vector<ctensor> ins(nin > 0 ? nin : 1);
  for (int i = 0; i < nin && t; i++) t = parse_tensor(t, next, &ins[i]);
  if (!t) { set_error("instruction %d (%s): malformed tensor", k, OP_NAME[L->op]); return nullptr; }
  L->nin = nin;
  for (int i = 0; i < nin && i < 3; i++) L->in[i] = ins[i];
  L->ins = push(ins.data(), ins.size() * sizeof(ctensor));
  L->has_epi = 0;
  if (L->op < OP_EW_END) {
    if (nin < 1 || nin > 3) { set_error("instruction %d (%s): %d inputs", k, OP_NAME[L->op], nin); return nullptr; }
    ew_prog(&L->pro, L->op, &L->out, ins.data(), nin);
  } else if (L->op == OP_fused_elementwise) {
    if (!parse_prog(attr, aend, &L->pro, nin)) goto bad_prog;
    if (L->pro.P.nd != L->out.nd) { set_error("instruction %d: program rank %d != output rank %d", k, L->pro.P.nd, L->out.nd); return nullptr; }
  } else if (L->op == OP_sum || L->op == OP_amax || L->op == OP_amin) {
    if (nin != 1 || nattr < 1) { set_error("instruction %d (%s): malformed", k, OP_NAME[L->op]); return nullptr; }
    load_prog(&L->pro, &ins[0]);
    L->red_kind = L->op == OP_sum ? RED_SUM : L->op == OP_amax ? RED_MAX : RED_MIN;
    L->red_dt = L->out.dt;
    memset(L->isred, 0, sizeof L->isred);
    for (int i = 0; i < (int)attr[0]; i++) {
      int d = (int)attr[1 + i];
      if (d < 0 || d >= ins[0].nd) { set_error("instruction %d (%s): bad dim %d", k, OP_NAME[L->op], d); return nullptr; }
      L->isred[d] = 1;
    }
  } else if (L->op == OP_fused_reduce) {
    /* [kind, dtype, ndims, dim..., has_epilogue, prologue, epilogue?] */
    L->red_kind = (int)attr[0];
    L->red_dt = (int)attr[1];
    int nred = (int)attr[2];
    if (nred < 0 || nred > LC_MAXD || 4 + nred > nattr) goto bad_prog;
    memset(L->isred, 0, sizeof L->isred);
    for (int i = 0; i < nred; i++) {
      int d = (int)attr[3 + i];
      if (d < 0 || d >= LC_MAXD) goto bad_prog;
      L->isred[d] = 1;
    }
    L->has_epi = (int)attr[3 + nred];
    const double *p = parse_prog(attr + 4 + nred, aend, &L->pro, nin);
    if (!p || (L->has_epi && !parse_prog(p, aend, &L->epi, nin))) goto bad_prog;
    if (L->has_epi && L->epi.P.nd != L->out.nd) { set_error("instruction %d: epilogue rank %d != output rank %d", k, L->epi.P.nd, L->out.nd); return nullptr; }
  } else if (L->op == OP_matmul) {
    if (nin != 2 || ins[0].nd < 2 || ins[1].nd < 2 || L->out.nd < 2) { set_error("instruction %d (matmul): malformed", k); return nullptr; }
  } else if (L->op == OP_lora_linear) {
    /* [scaling, has_bias]; inputs [x, W, A, B, b?] */
    if (nattr < 2 || nin < 4) { set_error("instruction %d (lora_linear): malformed", k); return nullptr; }
    L->scale = attr[0];
    L->has_bias = (int)attr[1];
    if (L->has_bias && nin < 5) { set_error("instruction %d (lora_linear): no bias operand", k); return nullptr; }
  } else if (L->op == OP_quantized_linear) {
    if (nattr < 3) { set_error("instruction %d (quantized_linear): %d attrs, expected 3", k, nattr); return nullptr; }
    if (!parse_quant(k, attr, nin, ins.data(), &L->out, L)) return nullptr;
  }
  return next;
bad_prog:
  if (!err_buf[0]) set_error("instruction %d (%s): bad program", k, OP_NAME[L->op]);
  return nullptr;
}

/** A 2-D view [rows, cols] of a dense-rowed tensor's last dim (x [..., in] -> [M, in]); 0 if not expressible. */
int lc_as_rows(const ctensor *x, ctensor *r) {
  *r = *x;
  int64_t last = x->shape[x->nd - 1], lst = x->st[x->nd - 1];
  int64_t rows = 1, rst = last * (lst ? lst : 1);
  /* leading dims must collapse into one stride */
  int64_t expect = -1;
  for (int d = x->nd - 2; d >= 0; d--) {
    if (x->shape[d] == 1) continue;
    if (expect < 0) { rst = x->st[d]; expect = x->st[d] * x->shape[d]; }
    else if (x->st[d] != expect) return 0;
    else expect = x->st[d] * x->shape[d];
    rows *= x->shape[d];
  }
  r->nd = 2;
  r->shape[0] = rows;
  r->shape[1] = last;
  r->st[0] = rst;
  r->st[1] = lst;
  return 1;
}

static ctensor transposed(const ctensor *m) {
  ctensor t = *m;
  t.shape[0] = m->shape[1];
  t.shape[1] = m->shape[0];
  t.st[0] = m->st[1];
  t.st[1] = m->st[0];
  return t;
}

ctensor lc_dense2(uint64_t p, int dt, int64_t rows, int64_t cols) {
  ctensor t = {};
  t.p = p;
  t.dt = dt;
  t.nd = 2;
  t.shape[0] = rows;
  t.shape[1] = cols;
  t.st[0] = cols;
  t.st[1] = 1;
  return t;
}

/** lora_linear: out = R(R(x Wᵀ + b) + R((x Aᵀ) Bᵀ · s)) through three matmuls into stream-ordered temporaries. */
static cudaError_t run_lora(const launch_t *L) {
  const ctensor *x = &L->in[0], *out = &L->out;
  std::vector<ctensor> ins(L->nin);
  memcpy(ins.data(), arena.data() + L->ins, L->nin * sizeof(ctensor)); /* the host copy of the arena */
  cudaError_t e = cudaSuccess;
  ctensor x2, o2;
  if (!lc_as_rows(x, &x2) || !lc_as_rows(out, &o2)) return cudaErrorInvalidValue;
  int64_t M = x2.shape[0], N = ins[1].shape[0], r = ins[2].shape[0];
  int dt = out->dt, es = dt_size(dt);
  void *Y = nullptr, *H = nullptr, *D = nullptr;
  size_t ny = (size_t)(M * N > 0 ? M * N : 1) * es, nh = (size_t)(M * r > 0 ? M * r : 1) * es;
  if ((e = cudaMallocAsync(&Y, ny, stream)) != cudaSuccess) return e;
  if ((e = cudaMallocAsync(&H, nh, stream)) != cudaSuccess) return e;
  if ((e = cudaMallocAsync(&D, ny, stream)) != cudaSuccess) return e;
  ctensor Yt = lc_dense2((uint64_t)Y, dt, M, N), Ht = lc_dense2((uint64_t)H, dt, M, r), Dt = lc_dense2((uint64_t)D, dt, M, N);
  ctensor Wt = transposed(&ins[1]), At = transposed(&ins[2]), Bt = transposed(&ins[3]);
  if (e == cudaSuccess) e = lc_matmul(stream, &x2, &Wt, &Yt);
  if (e == cudaSuccess) e = lc_matmul(stream, &x2, &At, &Ht);
  if (e == cudaSuccess) e = lc_matmul(stream, &Ht, &Bt, &Dt);
  if (e == cudaSuccess) e = lc_launch_lora_combine(stream, &o2, (uint64_t)Y, (uint64_t)D, L->has_bias ? &ins[4] : nullptr, L->scale);
  cudaFreeAsync(Y, stream);
  cudaFreeAsync(H, stream);
  cudaFreeAsync(D, stream);
  return e;
}

/** quantized_linear through quant.cu, with the host copies of its operand descriptors. */
static cudaError_t run_quant(const launch_t *L) {
  std::vector<ctensor> ins(L->nin);
  memcpy(ins.data(), arena.data() + L->ins, L->nin * sizeof(ctensor));
  return lc_quantized_linear(stream, L->qfmt, L->qtrans, L->has_bias, &L->out, ins.data());
}

static cudaError_t launch(const launch_t *L) {
  const char *base = arena_dev;
  const ctensor *ins = (const ctensor *)(base + L->ins);
#define PROG(A) &(A).P, (const ccode *)(base + (A).codes), (const int64_t *)(base + (A).strides), ins
  switch (L->op) {
    case OP_matmul: return lc_matmul(stream, &L->in[0], &L->in[1], &L->out);
    case OP_lora_linear: return run_lora(L);
    case OP_quantized_linear: return run_quant(L);
    case OP_sum: case OP_amax: case OP_amin:
      return lc_launch_reduce(stream, PROG(L->pro), L->red_kind, L->red_dt, L->isred, nullptr, &L->out);
    case OP_fused_reduce: {
      if (!L->has_epi) return lc_launch_reduce(stream, PROG(L->pro), L->red_kind, L->red_dt, L->isred, nullptr, &L->out);
      int64_t nout = 1;
      for (int d = 0; d < L->pro.P.nd; d++) if (!L->isred[d]) nout *= L->pro.P.shape[d];
      double *acc = nullptr;
      cudaError_t e = cudaMallocAsync((void **)&acc, (size_t)(nout > 0 ? nout : 1) * sizeof(double), stream);
      if (e != cudaSuccess) return e;
      e = lc_launch_reduce(stream, PROG(L->pro), L->red_kind, L->red_dt, L->isred, acc, &L->out);
      if (e == cudaSuccess) e = lc_launch_prog(stream, PROG(L->epi), &L->out, acc);
      cudaFreeAsync(acc, stream);
      return e;
    }
    default: /* elementwise ops and fused_elementwise */
      return lc_launch_prog(stream, PROG(L->pro), &L->out, nullptr);
  }
#undef PROG
}

/**
 * Run a command buffer: parse it all, copy its arena to the device (one asynchronous copy from
 * pinned staging), launch every instruction in order on the stream, and return without waiting.
 * Returns -1 on success, the index of the instruction that failed (nothing of a malformed buffer
 * is launched; a launch failure stops at that instruction), or -2 when nothing could be launched
 * (no device opened, the arena could not be allocated). Message: loom_cuda_error().
 */
LC_EXPORT int loom_cuda_submit(const double *prog, double nwords) {
  err_buf[0] = 0;
  arena.clear();
  std::vector<launch_t> ls;
  const double *w = prog, *end = prog + (int64_t)nwords;
  for (int k = 0; w < end; k++) {
    launch_t L;
    memset(&L, 0, sizeof L);
    w = parse_instr(w, end, &L, k);
    if (!w) return k;
    ls.push_back(L);
  }
  /* parsing needs no device (tests/cuda/library.test.ts runs it on machines without one) */
  if (!started) { set_error("parsed %zu instructions; loom_cuda_init was not called", ls.size()); return -2; }
  size_t bytes = arena.size() ? arena.size() : 16;
  if (bytes > arena_cap) {
    /* the old arena may still be read by queued kernels: free it in stream order */
    if (arena_dev) cudaFreeAsync(arena_dev, stream);
    size_t cap = bytes + bytes / 2;
    if (!cuda_ok(cudaMallocAsync((void **)&arena_dev, cap, stream), "arena")) { arena_dev = nullptr; arena_cap = 0; return -2; }
    arena_cap = cap;
  }
  if (upload_staged(arena_dev, arena.data(), arena.size(), "command upload")) return -2;
  n_submits++;
  for (size_t k = 0; k < ls.size(); k++) {
    op_counts[ls[k].op]++;
    n_launches++;
    cudaError_t e = launch(&ls[k]);
    if (e != cudaSuccess) {
      set_error("instruction %zu (%s): %s", k, OP_NAME[ls[k].op], cudaGetErrorString(e));
      return (int)k;
    }
  }
  return -1;
}

/**
 * Counters: [0] submits, [1] instructions launched, [2] uploads, [3] upload bytes, [4] downloads,
 * [5] download bytes, [6] cudaMalloc calls, [7] cudaFree calls, [8] cuBLAS gemm calls,
 * [9] tiled matmul launches, then one count per opcode.
 */
LC_EXPORT void loom_cuda_counters(double *out) {
  out[0] = n_submits;
  out[1] = n_launches;
  out[2] = n_uploads;
  out[3] = up_bytes;
  out[4] = n_downloads;
  out[5] = down_bytes;
  out[6] = n_mallocs;
  out[7] = n_frees;
  lc_matmul_counters(out + 8);
  for (int i = 0; i < OP_END; i++) out[10 + i] = op_counts[i];
}
