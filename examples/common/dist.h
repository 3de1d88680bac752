/* dist.h - the data-parallel communicator of the attnkit examples (issue 44): ranks, a
   deterministic all-reduce, broadcast, agreement on failure. examples/common only (not a
   mechanism header). License: MIT.

   Two builds of the same file:
     - with ATTNKIT_MPI defined (compiled by mpicc: `make build/mpi/...`): MPI underneath
       (OpenMPI, MPICH). dp_init calls MPI_Init unless MPI is already initialised; started
       without mpirun the program is an MPI singleton, one rank.
     - without it: always one rank, no MPI anywhere (every call below is then a checked
       no-op that returns DP_OK), so the examples build and run as before.

   DETERMINISM. dp_allreduce_f32 / _f64 do not use MPI_Allreduce, whose summation order
   depends on the library, its tuning and the message size. They sum in RANK ORDER on every
   rank: after the call, on every rank,
       buf[i] = (((x_0[i] + x_1[i]) + x_2[i]) + ... ) + x_{N-1}[i]
   where x_r is rank r's buffer before the call: bit-identical on all ranks and from run to
   run for a given N, and equal to a single process that adds the N buffers in rank order
   (one exception: -0 + -0 stays -0 here, and a process that starts from a zeroed
   accumulator gets +0; no other value differs). How: a reduce-scatter (MPI_Alltoallv:
   rank r receives chunk r of every rank's buffer and adds them in rank order), then an
   all-gather of the reduced chunks (MPI_Allgatherv). Each rank sends and receives
   2 (N-1)/N of the buffer, as a ring all-reduce does. Buffers of any size: the exchange
   runs in segments of at most DP_SEGMENT elements (MPI counts are ints). Scratch: one
   segment, allocated on the first call and kept until dp_finalize.

   FAILURE. Collective calls must be made by every rank in the same order. A rank that
   cannot go on calls dp_fail: with more than one rank it prints its message and takes the
   whole job down (MPI_Abort with the code: mpirun exits non-zero within seconds); with one
   rank it returns the code for the caller to exit with. dp_any lets ranks agree on a
   condition (a stop signal, a non-finite loss) before acting on it.

   Errors: DP_OK 0; DP_EINVAL (NULL argument, bad root, sizes); DP_ENOMEM; DP_EFAIL (the
   MPI library reported an error: its message is in dp_last_error). */
#ifndef ATTNKIT_DIST_H
#define ATTNKIT_DIST_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { DP_OK = 0, DP_EINVAL = -1, DP_ENOMEM = -2, DP_EFAIL = -4 };

#define DP_SEGMENT ((size_t)1 << 24) /* elements per exchange segment */

typedef struct dp_comm dp_comm;

/* Start (MPI_Init with argc/argv, which may be NULL) and describe this process. *out is
   NULL on failure, with a sentence in err. */
int dp_init(dp_comm **out, int *argc, char ***argv, char *err, size_t errlen);
/* MPI_Finalize (when dp_init initialised MPI) and free. NULL: no-op. */
void dp_finalize(dp_comm *c);

int dp_rank(const dp_comm *c);          /* 0 for NULL */
int dp_size(const dp_comm *c);          /* 1 for NULL */
const char *dp_backend(const dp_comm *c); /* "mpi" or "none" */
const char *dp_last_error(const dp_comm *c);
const char *dp_strerror(int err);

/* In place, rank-ordered sum over ranks (see DETERMINISM). buf may be NULL only when
   n == 0. Collective. */
int dp_allreduce_f32(dp_comm *c, float *buf, size_t n);
int dp_allreduce_f64(dp_comm *c, double *buf, size_t n);
/* ZeRO-1's partition of a flat vector of n elements over size ranks: rank r owns the
   contiguous slice [dp_shard_lo(n, r, size), dp_shard_lo(n, r + 1, size)), about n / size
   elements (dp_shard_lo(n, size, size) == n). Pure arithmetic, no communicator. */
size_t dp_shard_lo(size_t n, int r, int size);
/* In place: every rank's own slice of buf (dp_shard_lo above, over dp_size ranks) to every
   rank, so that afterwards buf holds on every rank what each owner held in its slice
   (copies of bytes: exact). The other elements' values before the call do not matter.
   n <= INT_MAX (MPI counts; DP_EINVAL above). Collective. */
int dp_allgather_f32(dp_comm *c, float *buf, size_t n);
/* Rank root's bytes to every rank. Collective. */
int dp_bcast(dp_comm *c, void *buf, size_t bytes, int root);
/* *out = 1 on every rank if any rank passed flag != 0, else 0. Collective. */
int dp_any(dp_comm *c, int flag, int *out);
int dp_barrier(dp_comm *c);
/* This rank cannot go on: see FAILURE. code: the exit status (1..255) the job ends with.
   msg (may be NULL) goes to stderr prefixed with the rank. Returns code (one rank only). */
int dp_fail(dp_comm *c, int code, const char *msg);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_DIST_H */
