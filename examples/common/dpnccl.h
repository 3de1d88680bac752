/* dpnccl.h - NCCL for the data-parallel device trainer (issue 44 item 2), loaded at run time:
   a CUDA build of the examples does not link NCCL and runs without it until more than one
   process trains on the device. examples/common only (not a mechanism header). License: MIT.

   LOADING. dpn_load dlopen()s "libnccl.so.2" (or a path given) and looks up the few NCCL
   functions this file uses, declared here by hand (NCCL's ABI since 2.7: ncclGetVersion,
   ncclGetErrorString, ncclGetUniqueId, ncclCommInitRank, ncclCommDestroy, ncclGroupStart,
   ncclGroupEnd, ncclSend, ncclRecv). Missing library, missing function or NCCL older than
   2.7: DPN_ENOLIB with a sentence that says which and what to install. A dpn_api can also
   be filled by hand (tests/nccl_stub.h fills it with a stub NCCL for the CPU simulation).

   COMMUNICATOR. dpn_create: rank 0 asks NCCL for a unique id, the caller's broadcast
   (MPI_Bcast through dist.h's dp_bcast in wt2_train) gives it to every rank, then every
   rank joins (ncclCommInitRank). One device per process, the one current when it is called.

   DETERMINISM. dpn_allreduce_f32 does not call ncclAllReduce: NCCL's sum order depends on
   the algorithm it picks (ring or tree), the channels, the protocol and the topology, so
   its result is repeatable only for a fixed machine, NCCL version and NCCL_ALGO /
   NCCL_PROTO, and is not the order of a single process that accumulates the micro-batches.
   Instead it sums in RANK ORDER, as dist.h's dp_allreduce_f32 does on the CPU: after the
   call, on every rank, buf[i] = (((x_0[i] + x_1[i]) + x_2[i]) + ...) + x_{N-1}[i]. How: a
   reduce-scatter by point-to-point copies (one ncclGroupStart/End of ncclSend/ncclRecv:
   rank r receives chunk r of every rank's buffer), the chunks added in rank order on the
   stream by tensor.h's tk_residual_forward_cuda (out = a + b, one fp32 rounding per add,
   as the CPU's s += x), then an all-gather by the same copies. Copies are exact, so the
   result is bit-identical on every rank, from run to run, for any topology or NCCL
   version, and equal to one process that adds the same N buffers in rank order (the
   device trainer's --grad-accum N: see train.h). Each rank sends and receives 2 (N-1)/N
   of the buffer, as a ring all-reduce does (N-1 peers at a time instead of one
   neighbour). With N = 1 nothing is sent and nothing changes. Buffers of any size: the
   exchange runs in segments of at most DPN_SEGMENT elements. Scratch on the device: one
   segment (about DPN_SEGMENT x 4 bytes at most), allocated on the first call.

   STREAMS. Everything is queued on the caller's stream (the model's): no host wait.

   Errors: DPN_OK 0; DPN_EINVAL (NULL argument, bad rank or size); DPN_ENOMEM; DPN_ENOLIB
   (NCCL could not be loaded); DPN_ENCCL (an NCCL call failed: its name and NCCL's message
   in dpn_last_error); DPN_EDEVICE (a device op failed: tensor.h's message). */
#ifndef ATTNKIT_DPNCCL_H
#define ATTNKIT_DPNCCL_H

#include <stddef.h>

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { DPN_OK = 0, DPN_EINVAL = -1, DPN_ENOMEM = -2, DPN_ENOLIB = -3, DPN_ENCCL = -4, DPN_EDEVICE = -5 };

#ifndef DPN_SEGMENT /* elements per exchange segment (a test may make it small) */
#define DPN_SEGMENT ((size_t)1 << 24)
#endif
#define DPN_LIBNAME "libnccl.so.2"

/* NCCL's types, as its nccl.h defines them (ABI), under our own names */
typedef struct { char internal[128]; } dpn_unique_id;       /* ncclUniqueId */
typedef struct dpn_nccl_comm *dpn_nccl_comm_t;              /* ncclComm_t */
enum { DPN_NCCL_SUCCESS = 0, DPN_NCCL_FLOAT32 = 7 };        /* ncclSuccess, ncclFloat32 */

/* The NCCL functions used (ncclResult_t is an int-sized enum) */
typedef struct dpn_api {
    int (*GetVersion)(int *version);
    const char *(*GetErrorString)(int result);
    int (*GetUniqueId)(dpn_unique_id *id);
    int (*CommInitRank)(dpn_nccl_comm_t *comm, int nranks, dpn_unique_id id, int rank);
    int (*CommDestroy)(dpn_nccl_comm_t comm);
    int (*GroupStart)(void);
    int (*GroupEnd)(void);
    int (*Send)(const void *buf, size_t count, int datatype, int peer, dpn_nccl_comm_t comm, tk_stream stream);
    int (*Recv)(void *buf, size_t count, int datatype, int peer, dpn_nccl_comm_t comm, tk_stream stream);
    void *handle; /* dlopen's (dpn_unload closes it); NULL for a table filled by hand */
} dpn_api;

/* dlopen path (NULL: DPN_LIBNAME) and fill *api. DPN_ENOLIB with a sentence in err. */
int dpn_load(dpn_api *api, const char *path, char *err, size_t errlen);
void dpn_unload(dpn_api *api); /* dlclose; NULL or a hand-filled table: no-op */

typedef struct dpn_comm dpn_comm;
/* Rank `rank` of `size` joins a communicator. bcast(ctx, buf, bytes, root) must give root's
   bytes to every rank (collective; 0 on success). size 1 needs no bcast (may be NULL). The
   api table is copied. *out NULL on failure, with a sentence in err. Collective. */
int dpn_create(dpn_comm **out, const dpn_api *api, int rank, int size,
               int (*bcast)(void *ctx, void *buf, size_t bytes, int root), void *ctx, char *err, size_t errlen);
void dpn_destroy(dpn_comm *c); /* ncclCommDestroy, frees the scratch; NULL: no-op */
int dpn_rank(const dpn_comm *c);
int dpn_size(const dpn_comm *c);
const char *dpn_last_error(const dpn_comm *c);
const char *dpn_strerror(int err);
/* In place, the rank-ordered sum over the ranks of buf (device memory, n floats), queued
   on stream (see DETERMINISM). buf may be NULL only when n == 0. Collective. */
int dpn_allreduce_f32(dpn_comm *c, float *buf, size_t n, tk_stream stream);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_DPNCCL_H */
