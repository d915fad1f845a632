/*
 * A plain MPI_Allreduce loop (float32, MPI_SUM, in place), the reference for bench/ddp.ts's
 * all-reduce bandwidth through Loom's bun:ffi binding (osu_allreduce style: a warm-up, then the
 * mean over `iters` calls, timed between barriers).
 *
 *   mpicc -O2 -o /tmp/mpi_allreduce bench/mpi_allreduce.c
 *   mpirun -np 2 /tmp/mpi_allreduce [bytes...]
 *
 * Prints one JSON line per size: {"bytes", "iters", "us" (per call), "algbw" and "busbw" (GB/s)}.
 * algbw = bytes / time; busbw = algbw * 2 (n - 1) / n, the bytes each rank sends and receives in
 * a ring all-reduce (NCCL's tests report the same two figures).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long defaults[] = {4096, 442368, 4194304, 67108864};
  int n = argc > 1 ? argc - 1 : 4;
  for (int s = 0; s < n; s++) {
    long bytes = argc > 1 ? atol(argv[s + 1]) : defaults[s];
    long count = bytes / 4;
    float *buf = malloc(count * sizeof(float));
    for (long i = 0; i < count; i++) buf[i] = (float)(rank + 1);
    int iters = bytes <= 65536 ? 2000 : bytes <= 4194304 ? 100 : 10;
    for (int w = 0; w < 3; w++) MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) / iters * 1e6;
    double algbw = bytes / us / 1e3;
    if (rank == 0) printf("{\"bytes\": %ld, \"iters\": %d, \"us\": %.2f, \"algbw\": %.3f, \"busbw\": %.3f}\n", bytes, iters, us, algbw, algbw * 2.0 * (size - 1) / size);
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
