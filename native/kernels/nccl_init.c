/*
 * ncclCommInitRank takes its ncclUniqueId (128 bytes) by value, which neither bun:ffi nor
 * Deno.dlopen can pass. This wrapper takes the id by address and calls NCCL through a function
 * pointer that src/distributed/nccl.ts obtains from the FFI's own dlopen of libnccl
 * (FfiLibrary.address), so libloom neither links nor dlopens NCCL: machines without NCCL build
 * and load it as usual.
 *
 * Source: NCCL 2.x nccl.h:
 *   #define NCCL_UNIQUE_ID_BYTES 128
 *   typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
 *   ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
 * ncclResult_t is an int enum (ncclSuccess = 0, ncclInvalidArgument = 4).
 */
#include <string.h>

#define LOOM_NCCL_UNIQUE_ID_BYTES 128

typedef struct {
  char internal[LOOM_NCCL_UNIQUE_ID_BYTES];
} loom_nccl_unique_id;

typedef int (*loom_nccl_comm_init_rank_fn)(void **comm, int nranks, loom_nccl_unique_id id, int rank);

/** ncclInvalidArgument: what NCCL itself returns for a bad argument. */
#define LOOM_NCCL_INVALID_ARGUMENT 4

/**
 * *comm ← ncclCommInitRank(comm, nranks, *id128, rank) through `fn_ptr`.
 * Returns NCCL's ncclResult_t, or ncclInvalidArgument (4) without calling anything when fn_ptr,
 * comm or id128 is NULL, or rank is not in [0, nranks).
 */
int loom_nccl_comm_init_rank(void *fn_ptr, void **comm, int nranks, const void *id128, int rank) {
  if (!fn_ptr || !comm || !id128 || nranks < 1 || rank < 0 || rank >= nranks) return LOOM_NCCL_INVALID_ARGUMENT;
  loom_nccl_unique_id id;
  memcpy(id.internal, id128, sizeof id.internal);
  loom_nccl_comm_init_rank_fn fn;
  memcpy(&fn, &fn_ptr, sizeof fn); /* object pointer -> function pointer without a pedantic warning */
  return fn(comm, nranks, id, rank);
}

/**
 * A stand-in for ncclCommInitRank that tests call through the wrapper (the id arrives by value):
 * writes id[0] + 256·id[127] + 65536·rank + 2^24·nranks into *comm, returns 0. No NCCL needed.
 */
static int loom_nccl_fake_init_rank(void **comm, int nranks, loom_nccl_unique_id id, int rank) {
  unsigned long v = (unsigned char)id.internal[0] + 256ul * (unsigned char)id.internal[LOOM_NCCL_UNIQUE_ID_BYTES - 1] + 65536ul * (unsigned)rank + 16777216ul * (unsigned)nranks;
  *comm = (void *)v;
  return 0;
}

/** Address of loom_nccl_fake_init_rank (tests of the by-value call). */
void *loom_nccl_fake_init_rank_fn(void) {
  loom_nccl_comm_init_rank_fn f = loom_nccl_fake_init_rank;
  void *p;
  memcpy(&p, &f, sizeof p);
  return p;
}
