/*
 * Loom's native shim: the FFI ABI that src/backends/native/ loads with bun:ffi.
 *
 * A command buffer is a flat array of doubles (pointers and integers are exact below 2^53):
 *   instruction = [opcode, nwords, nin, nattr, attr[nattr], out tensor, in tensor × nin]
 *   tensor      = [address, dtype, ndim, offset, shape[ndim], strides[ndim]]
 * `loom_exec` runs one on the calling thread (eager ops, synchronous reads); `loom_submit`
 * queues one for the executor thread and returns at once, so JavaScript keeps building the
 * next graph; completion is a flag JavaScript polls (`loom_done`), an optional threadsafe
 * callback, or a blocking `loom_wait`. One thread pool serves every kernel (the executor or
 * the calling thread is worker 0); BLAS runs single-threaded inside it, so two pools never
 * compete for the cores.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels/common.h"

/* ---- op table ------------------------------------------------------------------------------ */
typedef int (*kernel_fn)(const loom_instr *);
#define NAME_1(n) #n,
#define NAME_2(n, k) #n,
static const char *const OP_NAME[OP_END] = {LOOM_REGISTRY_EW_OPS(NAME_1) LOOM_REGISTRY_KERNEL_OPS(NAME_1) LOOM_NATIVE_OPS(NAME_2)};
#define KERNEL_AT(n, k) [OP_##n] = k,
static const kernel_fn KERNELS[OP_END] = {[0 ... OP_EW_END - 1] = k_elementwise, LOOM_KERNEL_IMPLS(KERNEL_AT) LOOM_NATIVE_OPS(KERNEL_AT)};

/**
 * Comma-separated op names in opcode order, an empty name where an op has no kernel:
 * TypeScript derives its opcode map from this.
 */
static int has_cpu_kernel(int op) { return KERNELS[op] != NULL; }

const char *loom_op_names(void) {
  static char buf[8192];
  static atomic_int made;
  if (atomic_load(&made)) return buf;
  wire_op_names(buf, sizeof buf, OP_NAME, OP_END, has_cpu_kernel);
  atomic_store(&made, 1);
  return buf;
}
int loom_abi_version(void) { return 2; }

/* ---- errors ---------------------------------------------------------------------------------- */
static _Thread_local char *err_slot; /* the error buffer of the command being run */
static char sync_err[512];

void loom_set_error(const char *fmt, ...) {
  char *e = err_slot ? err_slot : sync_err;
  if (e[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e, 512, fmt, ap);
  va_end(ap);
}

/* ---- waiting: spin briefly while we own the cores, sleep when the machine is oversubscribed ---- */
/*
 * Spinning between kernels saves the microseconds of a sleep/wake, but only while every thread of
 * ours has a core. Next to another busy process a spinning thread takes the core from the thread
 * it waits for (or from the competitor), and time slices are milliseconds: a 2-thread run then
 * went 4-5x slower than a 1-thread one. So: a spin loop that sees a gap of more than PREEMPT_US
 * between two of its clock reads was descheduled while runnable, and so was a thread whose share
 * of a parallel job took PREEMPT_US more wall time than CPU time: more runnable threads than
 * cores, when /proc/loadavg also counts more runnable threads than cores (runnable_now). Every
 * wait then sleeps at once (no spinning) for the next CONTENDED_US. (Large products are split
 * in this pool too, matmul.c: no other pool, e.g. OpenBLAS's threads, ever shares the cores.)
 */
#include <time.h>
static inline double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
enum { PREEMPT_US = 1000, CONTENDED_US = 250000 };
static atomic_llong contended_until; /* µs (now_us); spinning is off before then */
static atomic_llong preemptions;     /* descheduled spins seen (loom_counters) */

/** 1 while the machine looks oversubscribed (a spinning thread of ours was descheduled recently). */
int loom_pool_contended(void) {
  return now_us() < (double)atomic_load_explicit(&contended_until, memory_order_relaxed);
}

/*
 * Runnable threads on the machine now (the 4th field of /proc/loadavg, "running/total"), or -1.
 * A gap in a spin is also what a hypervisor's steal or a one-off kernel thread looks like; only
 * more runnable threads than cores means that spinning takes a core someone needs.
 */
static int runnable_now(void) {
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f) return -1;
  double l1, l5, l15;
  int running = -1, total;
  if (fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) running = -1;
  fclose(f);
  return running;
}

static void note_preempted(double t) {
  static long ncpu = 0;
  if (!ncpu) ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int r = runnable_now();
  if (r >= 0 && r <= ncpu) return; /* descheduled, but the cores are not oversubscribed now */
  atomic_store_explicit(&contended_until, (long long)(t + CONTENDED_US), memory_order_relaxed);
  atomic_fetch_add_explicit(&preemptions, 1, memory_order_relaxed);
}

/** CPU time of the calling thread, µs. */
static inline double thread_cpu_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

/** A span of work on one thread: wall time beyond its CPU time means it was descheduled. */
loom_span loom_span_start(void) { loom_span s = {now_us(), thread_cpu_us()}; return s; }
void loom_span_check(loom_span s) {
  double t = now_us();
  if ((t - s.wall) - (thread_cpu_us() - s.cpu) > PREEMPT_US) note_preempted(t);
}

/** A bounded spin: call spin_more() once per iteration; 0 means stop spinning and sleep. */
typedef struct { double end, last; unsigned i; } spinner;

static inline int spin_more(spinner *s, double us) {
  __builtin_ia32_pause();
  if ((++s->i & 63) != 0) return 1;
  double t = now_us();
  if (s->end == 0) {
    if (t < (double)atomic_load_explicit(&contended_until, memory_order_relaxed)) return 0;
    s->end = t + us;
  } else if (t - s->last > PREEMPT_US) {
    note_preempted(t);
    return 0;
  }
  s->last = t;
  return t <= s->end;
}

/* ---- thread pool ----------------------------------------------------------------------------- */
/*
 * A parallel_for is cut into chunks (up to CHUNKS_PER_THREAD per thread, never below the grain)
 * that threads claim one at a time from one atomic ticket; the caller claims too. A worker that
 * is descheduled, or wakes late, holds up at most the one chunk it claimed: the running threads
 * take the rest. Kernels give the same bits for any split (a task inside a task runs serially),
 * so which thread runs which chunk changes no result.
 */
enum { CHUNKS_PER_THREAD = 4 };
static int nthreads = 1;
static pthread_t workers[64];
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;  /* a job was published */
static pthread_cond_t job_done_cv = PTHREAD_COND_INITIALIZER; /* the last chunk finished (caller_sleeping) */
static atomic_long pool_gen;      /* bumped once per parallel job */
static atomic_int pool_sleepers;  /* workers waiting on pool_cv */
/* [chunks:32 | next:32]: claiming is one fetch_add; a claim i < chunks pins the job (its fields
 * stay valid until that chunk is counted done), a claim past the end claims nothing */
static atomic_ullong ticket;
static atomic_long chunks_done;
static atomic_int caller_sleeping;
static struct { loom_task fn; void *ctx; int64_t n; } job;
/* the job is long enough (about a millisecond of work or more, by its grain) that the threads
 * check whether they were descheduled during it (two thread-CPU-clock reads, ~1 µs); atomic:
 * a late worker reads it while the next job may be published */
static atomic_int job_timed;

int loom_nthreads(void) { return nthreads; }

/* Set on threads running a part of a parallel job: a parallel_for inside runs serially there
 * (the pool has one job at a time). */
static _Thread_local int in_task;

/** Claim and run chunks of the current job until none is left. */
static void run_chunks(void) {
  for (;;) {
    unsigned long long t = atomic_fetch_add_explicit(&ticket, 1, memory_order_acq_rel);
    int64_t i = (int64_t)(t & 0xffffffffu), lim = (int64_t)(t >> 32);
    if (i >= lim) return;
    int64_t b = job.n * i / lim, e = job.n * (i + 1) / lim;
    if (b < e) job.fn(job.ctx, b, e);
    if (atomic_fetch_add_explicit(&chunks_done, 1, memory_order_seq_cst) + 1 == lim &&
        atomic_load_explicit(&caller_sleeping, memory_order_seq_cst)) {
      pthread_mutex_lock(&pool_mu);
      pthread_cond_broadcast(&job_done_cv);
      pthread_mutex_unlock(&pool_mu);
    }
  }
}

static void *worker_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "loom-worker"); /* tests count the pool's threads by name */
  long seen = 0;
  in_task = 1;
  for (;;) {
    /* spin briefly (the next kernel of a plan usually follows at once), then sleep */
    spinner sp = {0};
    while (atomic_load_explicit(&pool_gen, memory_order_acquire) == seen && spin_more(&sp, 200)) {}
    if (atomic_load(&pool_gen) == seen) {
      pthread_mutex_lock(&pool_mu);
      atomic_fetch_add(&pool_sleepers, 1);
      while (atomic_load(&pool_gen) == seen) pthread_cond_wait(&pool_cv, &pool_mu);
      atomic_fetch_sub(&pool_sleepers, 1);
      pthread_mutex_unlock(&pool_mu);
    }
    seen = atomic_load(&pool_gen);
    if (!atomic_load_explicit(&job_timed, memory_order_relaxed)) run_chunks();
    else {
      loom_span w = loom_span_start();
      run_chunks();
      loom_span_check(w); /* descheduled while holding a chunk: everyone waited for it */
    }
  }
  return NULL;
}

void loom_parallel_for(int64_t n, int64_t grain, loom_task fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t chunks = (int64_t)nthreads * CHUNKS_PER_THREAD;
  if (n / grain < chunks) chunks = n / grain;
  if (chunks <= 1 || nthreads <= 1 || in_task) { fn(ctx, 0, n); return; }
  job.fn = fn; job.ctx = ctx; job.n = n;
  int timed = n / grain >= 64;
  atomic_store_explicit(&job_timed, timed, memory_order_relaxed);
  atomic_store_explicit(&chunks_done, 0, memory_order_relaxed);
  atomic_store_explicit(&ticket, (unsigned long long)chunks << 32, memory_order_release);
  atomic_fetch_add(&pool_gen, 1);
  if (atomic_load(&pool_sleepers) > 0) {
    pthread_mutex_lock(&pool_mu);
    pthread_cond_broadcast(&pool_cv);
    pthread_mutex_unlock(&pool_mu);
  }
  in_task = 1;
  if (!timed) run_chunks();
  else {
    loom_span w = loom_span_start();
    run_chunks();
    loom_span_check(w);
  }
  in_task = 0;
  /* wait for chunks other threads claimed: spin while that pays, else sleep (the core may be
   * what the thread holding the last chunk needs) */
  spinner sp = {0};
  while (atomic_load_explicit(&chunks_done, memory_order_acquire) != chunks && spin_more(&sp, 50)) {}
  if (atomic_load_explicit(&chunks_done, memory_order_acquire) == chunks) return;
  pthread_mutex_lock(&pool_mu);
  atomic_store_explicit(&caller_sleeping, 1, memory_order_seq_cst);
  while (atomic_load_explicit(&chunks_done, memory_order_seq_cst) != chunks) pthread_cond_wait(&job_done_cv, &pool_mu);
  atomic_store_explicit(&caller_sleeping, 0, memory_order_relaxed);
  pthread_mutex_unlock(&pool_mu);
}

/* ---- scratch: per-thread grow-only buffers ------------------------------------------------------ */
static _Thread_local struct { void *p; size_t cap; } scratch[SCR_NSLOTS];

void *loom_scratch(int slot, size_t bytes) {
  if (bytes <= scratch[slot].cap) return scratch[slot].p;
  free(scratch[slot].p);
  size_t cap = bytes + bytes / 2;
  cap = (cap + 63) & ~(size_t)63;
  scratch[slot].p = aligned_alloc(64, cap);
  scratch[slot].cap = scratch[slot].p ? cap : 0;
  if (!scratch[slot].p) { loom_set_error("out of memory (%zu bytes of scratch)", bytes); abort(); }
  return scratch[slot].p;
}

/* ---- host buffers: a pool of 64-byte aligned blocks handed to JavaScript ---------------------- */
/*
 * loom_alloc returns uninitialized memory for tensors (no zeroing, no fresh pages once warm);
 * JavaScript wraps it in an ArrayBuffer whose deallocator (loom_free) returns the block to a
 * size-class free list when the garbage collector frees the buffer. Cached bytes are capped at
 * the bytes in use (at least POOL_FLOOR, at most LOOM_POOL_MAX, default 1 GiB): the garbage of
 * one collection cycle, which the next cycle reuses; beyond that blocks go back to the system.
 */
#define POOL_CLASSES 160
typedef struct block { struct block *next; } block;
static block *pool_free[POOL_CLASSES];
static size_t pool_cached, pool_live, pool_max = (size_t)1 << 30;
static uint64_t pool_hits, pool_misses;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
#define POOL_HDR 64
/* The cache's floor: twice the bytes JavaScript allocates between the collections it asks for
 * (GC_MIN_BYTES in src/backends/native/memory.ts), so that a cycle's garbage, plus what the
 * runtime's own collections return in between, is all kept. With 32 MiB, a loop producing one
 * 16 MiB result per call (W3) missed the pool on 1 call in 2: every miss is a fresh block whose
 * first write faults each page in (~1.5 µs per 4 KiB page on this VM: +5 ms on a 1.2 ms kernel). */
#define POOL_FLOOR ((size_t)256 << 20)

/** Size class: powers of two up to 64 KiB, then quarter steps between powers of two. */
static int size_class(size_t n, size_t *rounded) {
  if (n <= 64) { *rounded = 64; return 0; }
  int lg = 64 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^lg >= n > 2^(lg-1) */
  if (lg <= 16) { *rounded = (size_t)1 << lg; return lg - 6; }
  size_t lo = (size_t)1 << (lg - 1), step = lo / 4;
  size_t k = (n - lo + step - 1) / step; /* 1..4 */
  *rounded = lo + k * step;
  return 10 + (lg - 17) * 4 + (int)k;
}

void *loom_alloc(double bytes) {
  size_t r;
  int c = size_class((size_t)bytes, &r);
  if (c >= POOL_CLASSES) return NULL;
  pthread_mutex_lock(&pool_lock);
  block *b = pool_free[c];
  if (b) { pool_free[c] = b->next; pool_cached -= r; pool_hits++; }
  else pool_misses++;
  pool_live += r;
  pthread_mutex_unlock(&pool_lock);
  if (!b) {
    char *m = aligned_alloc(64, r + POOL_HDR);
    if (!m) { pthread_mutex_lock(&pool_lock); pool_live -= r; pthread_mutex_unlock(&pool_lock); return NULL; }
    ((size_t *)m)[0] = (size_t)c;
    ((size_t *)m)[1] = r;
    b = (block *)(m + POOL_HDR);
  }
  return b;
}

/** The ArrayBuffer deallocator: (bytes, context). */
void loom_free(void *bytes, void *ctx) {
  (void)ctx;
  if (!bytes) return;
  char *m = (char *)bytes - POOL_HDR;
  int c = (int)((size_t *)m)[0];
  size_t r = ((size_t *)m)[1];
  pthread_mutex_lock(&pool_lock);
  pool_live -= r;
  /* keep about as much as is in use (at least POOL_FLOOR): what the next steps will ask for again */
  size_t cap = pool_live > POOL_FLOOR ? pool_live : POOL_FLOOR;
  if (cap > pool_max) cap = pool_max;
  if (pool_cached + r <= cap) {
    block *b = (block *)bytes;
    b->next = pool_free[c];
    pool_free[c] = b;
    pool_cached += r;
    m = NULL;
  }
  pthread_mutex_unlock(&pool_lock);
  free(m);
}

void *loom_free_fn(void) { return (void *)loom_free; }

/** Give every cached block back to the system (torch.cuda.empty_cache's counterpart for host memory). */
void loom_pool_release(void) {
  pthread_mutex_lock(&pool_lock);
  for (int c = 0; c < POOL_CLASSES; c++) {
    block *b = pool_free[c];
    pool_free[c] = NULL;
    while (b) {
      block *next = b->next;
      char *m = (char *)b - POOL_HDR;
      pool_cached -= ((size_t *)m)[1];
      free(m);
      b = next;
    }
  }
  pthread_mutex_unlock(&pool_lock);
}

/** [live bytes, cached bytes, hits, misses]. */
void loom_pool_stats(double *out) {
  pthread_mutex_lock(&pool_lock);
  out[0] = (double)pool_live;
  out[1] = (double)pool_cached;
  out[2] = (double)pool_hits;
  out[3] = (double)pool_misses;
  pthread_mutex_unlock(&pool_lock);
}

/* ---- parsing and running a command buffer ------------------------------------------------------ */
static const double *parse_tensor(const double *w, tdesc *t) {
  t->p = (char *)(uintptr_t)w[0];
  t->dt = (int)w[1];
  t->nd = (int)w[2];
  t->off = (int64_t)w[3];
  for (int i = 0; i < t->nd; i++) t->shape[i] = (int64_t)w[4 + i];
  for (int i = 0; i < t->nd; i++) t->st[i] = (int64_t)w[4 + t->nd + i];
  return w + 4 + 2 * t->nd;
}

static uint64_t op_counts[OP_END];
/* Nanoseconds spent per opcode (clock_gettime around each kernel: ~40 ns per instruction), the
   profile that `NativeBackend.shimCounters().nsByOp` reports. */
static double op_ns[OP_END];

/* Per-instruction profile (loom_profile_buffer): [ns, opcode, output elements] per instruction
   index of each command buffer run while set, accumulated (for tools: which kernels of a plan
   take the time). */
static double *prof_buf;
static int64_t prof_cap;

/** Set (or clear, with a null buffer) the per-instruction profile buffer of `cap` instructions. */
void loom_profile_buffer(double *buf, double cap) {
  prof_buf = buf;
  prof_cap = (int64_t)cap;
}


/** Runs every instruction in order; returns the index of a failed one, or -1. */
static int run_program(const double *w, int64_t nwords, char *err) {
  err_slot = err;
  err[0] = 0;
  const double *end = w + nwords;
  int k = 0;
  while (w < end) {
    loom_instr I;
    I.op = (int)w[0];
    int64_t len = (int64_t)w[1];
    I.nin = (int)w[2];
    I.nattr = (int)w[3];
    I.attr = w + 4;
    if (I.op < 0 || I.op >= OP_END || !KERNELS[I.op] || I.nin > LOOM_MAXIN) { loom_set_error("bad instruction %d (opcode %d)", k, I.op); return k; }
    const double *t = parse_tensor(w + 4 + I.nattr, &I.out);
    for (int i = 0; i < I.nin; i++) t = parse_tensor(t, &I.in[i]);
    op_counts[I.op]++;
    double t0 = now_us();
    int rc = KERNELS[I.op](&I);
    double dt = (now_us() - t0) * 1e3; /* ns */
    op_ns[I.op] += dt;
    if (prof_buf && k < prof_cap) {
      prof_buf[3 * k] += dt;
      prof_buf[3 * k + 1] = I.op;
      prof_buf[3 * k + 2] = (double)t_numel(&I.out);
    }
    loom_int_fault_report(); /* integer division by zero etc., seen by any pool thread */
    if (rc != 0 || err[0]) {
      if (!err[0]) loom_set_error("kernel %d failed", I.op);
      return k;
    }
    w += len;
    k++;
  }
  return -1;
}

/* ---- the executor: queued command buffers run in order on their own thread ------------------------ */
typedef struct cmd {
  const double *prog;
  int64_t nwords;
  atomic_int done;       /* 0 pending, 1 finished; JavaScript polls it */
  int taken;             /* started, by the executor or by loom_wait's caller (under q_mu) */
  int failed;            /* instruction index that failed, -1 if none */
  void (*callback)(int32_t id);
  int32_t id;
  char err[512];
  struct cmd *next;
} cmd;

static pthread_t executor;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;    /* work queued */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* a command finished */
static cmd *q_head, *q_tail;
static int in_flight; /* queued or running */
static uint64_t submits;
static uint64_t inline_runs; /* queued commands run by loom_wait's caller (under q_mu) */

static atomic_long q_seq; /* bumped by every submit: the idle executor spins on it briefly */

/**
 * Run `c`, the queue's head, already marked taken (q_mu not held), then dequeue it and wake its
 * waiters (q_mu held on return, so the caller can look at the queue before unlocking).
 */
static void run_head(cmd *c) {
  c->failed = run_program(c->prog, c->nwords, c->err);
  pthread_mutex_lock(&q_mu);
  q_head = c->next;
  if (!q_head) q_tail = NULL;
  in_flight--;
  atomic_store_explicit(&c->done, 1, memory_order_release);
  pthread_cond_broadcast(&done_cv);
}

static void *executor_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "loom-exec");
  for (;;) {
    pthread_mutex_lock(&q_mu);
    /* idle (or the head is running on the thread that waits for it: see loom_wait). The workers
     * are left to spin their ~200 µs and then sleep, as between eager kernels, so a realize that
     * follows soon (a loop of small plans) finds them awake. Making them sleep at once here (and
     * after an inline run) cost about 20-40 µs per realize (W5 lazy 0.76/0.83/0.78 against
     * 0.75/0.76/0.76 ms, alternating processes); W7u, whose JavaScript records for tens of
     * milliseconds between plans, did not change (563/566 against 569/561 ms), nor did W5 next
     * to a busy process (bench/oversubscribed.ts: the spin stops when a thread is descheduled). */
    while (!q_head || q_head->taken) pthread_cond_wait(&q_cv, &q_mu);
    cmd *c = q_head;
    c->taken = 1;
    pthread_mutex_unlock(&q_mu);
    void (*callback)(int32_t) = c->callback; /* c may be freed once done is set */
    int32_t id = c->id;
    run_head(c);
    pthread_mutex_unlock(&q_mu);
    if (callback) callback(id);
  }
  return NULL;
}

static int started;

/** Start the pool (n threads in all, the caller included) and the executor; idempotent. */
int loom_init(int n) {
  if (started) return nthreads;
  /* Tensor blocks the pool does not keep go back to glibc: with its default thresholds, blocks of
   * a few MiB and more are fresh mmaps (or trimmed heap) every time, and every page of a new
   * output then faults (about 3 µs per page here: 10 ms for a 12 MiB matmul output, a third of
   * the product itself). Keep freed memory in the process instead, as the PyTorch reference is
   * run (shared/bench/README.md: MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_). Not when the
   * environment sets them itself, nor with LOOM_NO_MALLOPT=1. Measured (W2/W3/W4 lazy, fresh
   * outputs): 3.7/3.7/3.6 ms -> 3.3/2.6/1.7 ms. */
  if (!getenv("LOOM_NO_MALLOPT") && !getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's maximum (64-bit) */
  if (!getenv("LOOM_NO_MALLOPT") && !getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, (int)((1u << 31) - 1));
  if (n < 1) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > 64) n = 64;
  nthreads = n;
  const char *pm = getenv("LOOM_POOL_MAX");
  if (pm) pool_max = (size_t)strtoull(pm, NULL, 10);
  for (int i = 1; i < n; i++) pthread_create(&workers[i], NULL, worker_main, (void *)(intptr_t)i);
  pthread_create(&executor, NULL, executor_main, NULL);
  started = 1;
  return n;
}

/** Wait until every queued command has finished (the pool is then free for the caller). */
static void drain(void) {
  pthread_mutex_lock(&q_mu);
  while (in_flight > 0) pthread_cond_wait(&done_cv, &q_mu);
  pthread_mutex_unlock(&q_mu);
}

/**
 * Run a command buffer now on the calling thread, after any queued ones (they may write its
 * inputs). Returns -1 on success or the failing instruction's index (message: loom_error()).
 */
int loom_exec(const double *prog, double nwords) {
  if (in_flight) drain();
  return run_program(prog, (int64_t)nwords, sync_err);
}

/** The message of the last failed loom_exec. */
const char *loom_error(void) { return sync_err; }

/**
 * Queue a command buffer and return at once with a handle. `prog` and every buffer it names
 * must stay alive until loom_done(handle) (JavaScript holds them). `callback` (may be null) is
 * called with `id` from the executor thread when it finishes.
 */
void *loom_submit(const double *prog, double nwords, void (*callback)(int32_t), int32_t id) {
  cmd *c = calloc(1, sizeof(cmd));
  c->prog = prog;
  c->nwords = (int64_t)nwords;
  c->callback = callback;
  c->id = id;
  pthread_mutex_lock(&q_mu);
  if (q_tail) q_tail->next = c; else q_head = c;
  q_tail = c;
  in_flight++;
  submits++;
  atomic_fetch_add_explicit(&q_seq, 1, memory_order_release);
  pthread_cond_signal(&q_cv);
  pthread_mutex_unlock(&q_mu);
  return c;
}

/** 1 once the command has finished (a plain load: cheap to poll). */
int loom_done(void *h) { return atomic_load_explicit(&((cmd *)h)->done, memory_order_acquire); }

/** Block until the command has finished; returns its failed instruction index or -1. */
int loom_wait(void *h) {
  cmd *c = h;
  /* Not started, and first in line (nothing queued or running before it): run it here. Waking
   * the executor and then sleeping until it signals are two thread hand-offs, 50-150 µs per
   * realize that is read at once (a 512² matmul: 1.60 ms lazy against 1.41 eager). It stays at
   * the head while it runs, so a command queued meanwhile still waits for it. */
  pthread_mutex_lock(&q_mu);
  if (q_head == c && !c->taken && !c->callback) {
    c->taken = 1;
    inline_runs++;
    pthread_mutex_unlock(&q_mu);
    run_head(c);
    if (q_head) pthread_cond_signal(&q_cv); /* queued meanwhile: the executor's turn */
    pthread_mutex_unlock(&q_mu);
    return c->failed;
  }
  pthread_mutex_unlock(&q_mu);
  /* spin for a short command before sleeping on the condition variable */
  spinner sp = {0};
  while (!atomic_load_explicit(&c->done, memory_order_acquire) && spin_more(&sp, 20)) {}
  if (!atomic_load(&c->done)) {
    pthread_mutex_lock(&q_mu);
    while (!atomic_load(&c->done)) pthread_cond_wait(&done_cv, &q_mu);
    pthread_mutex_unlock(&q_mu);
  }
  return c->failed;
}

/** The error message of a finished command ("" if it succeeded). */
const char *loom_cmd_error(void *h) { return ((cmd *)h)->err; }

/** Free a finished command's record. */
void loom_release(void *h) { free(h); }

/**
 * Counters: [0] submits, then one count per opcode, then the pool's descheduled spins seen, then
 * the nanoseconds spent per opcode, then the queued commands their waiter ran itself (loom_wait).
 */
void loom_counters(double *out) {
  out[0] = (double)submits;
  for (int i = 0; i < OP_END; i++) out[1 + i] = (double)op_counts[i];
  out[1 + OP_END] = (double)atomic_load(&preemptions);
  for (int i = 0; i < OP_END; i++) out[2 + OP_END + i] = op_ns[i];
  out[2 + 2 * OP_END] = (double)inline_runs;
}
