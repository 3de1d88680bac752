/* nccl_stub.h - a stub NCCL for the CPU simulation (tests/cuda_sim.h): the functions
   examples/common/dpnccl.h loads, with NCCL's semantics for what dpnccl uses, ranks as
   PROCESSES (fork) that share one anonymous mapping. Test-only; simulation builds only
   (it copies device buffers with memcpy: in the simulation device memory is host memory).

   Use: nstub_setup(nranks, cap) before forking the ranks (cap: floats per sender/receiver
   mailbox, the largest single ncclSend), then nstub_api(&api) fills a dpn_api, and
   nstub_bcast is a broadcast for dpn_create (ctx: a pointer to this process's rank).
   nstub_teardown() after the ranks ended.

   Semantics kept: ncclGetUniqueId's id must reach every rank (ncclCommInitRank refuses an
   id the stub did not make, as NCCL fails to join a bad one) and every rank of the
   communicator must join (a barrier); ncclSend / ncclRecv inside ncclGroupStart / End are
   queued and run at the outermost ncclGroupEnd (all sends, a barrier, all receives, a
   barrier), a lone one as its own group; a receive must match the sender's count and
   datatype (else ncclInvalidUsage); the buffers must be device memory (the simulation's
   cudaPointerGetAttributes; else ncclInvalidArgument); peers outside [0, nranks) and a
   datatype other than ncclFloat32 are ncclInvalidArgument. The stream is accepted and,
   as every simulated stream, complete at the call. Counters: the sends and the floats
   sent by this process (nstub_sends, nstub_floats). nstub_fail_next_send = 1 makes the
   next ncclSend return ncclSystemError (set on every rank: nobody waits for the others). */
#ifndef ATTNKIT_NCCL_STUB_H
#define ATTNKIT_NCCL_STUB_H
#ifndef ATTNKIT_CUDA_SIM
#error "tests/nccl_stub.h is for the CPU simulation only"
#endif

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "examples/common/dpnccl.h"

#define NSTUB_MAXR 4
struct nstub_shared {
    pthread_barrier_t bar;
    int nranks;
    size_t cap;
    size_t count[NSTUB_MAXR][NSTUB_MAXR]; /* [src][dst] floats in the mailbox */
    int dtype[NSTUB_MAXR][NSTUB_MAXR];
    float data[1]; /* [src][dst][cap] */
};
struct dpn_nccl_comm { int rank, nranks; };

static nstub_shared *nstub_sh = NULL;
static size_t nstub_sh_bytes = 0;
static long long nstub_sends = 0, nstub_floats = 0;
static int nstub_fail_next_send = 0;
static const char nstub_magic[] = "attnkit-nccl-stub";

struct nstub_op { int send; void *buf; size_t count; int dtype, peer; };
static nstub_op nstub_q[64];
static int nstub_nq = 0, nstub_depth = 0, nstub_qerr = 0;

static int nstub_setup(int nranks, size_t cap)
{
    pthread_barrierattr_t a;
    if (nranks < 1 || nranks > NSTUB_MAXR) return -1;
    nstub_sh_bytes = sizeof(nstub_shared) + (size_t)nranks * nranks * cap * sizeof(float);
    void *p = mmap(NULL, nstub_sh_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    nstub_sh = (nstub_shared *)p;
    memset((void *)nstub_sh, 0, sizeof(nstub_shared));
    nstub_sh->nranks = nranks;
    nstub_sh->cap = cap;
    pthread_barrierattr_init(&a);
    pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_barrier_init(&nstub_sh->bar, &a, (unsigned)nranks);
    pthread_barrierattr_destroy(&a);
    nstub_sends = nstub_floats = 0;
    nstub_fail_next_send = 0;
    nstub_nq = nstub_depth = nstub_qerr = 0;
    return 0;
}
static void nstub_teardown(void)
{
    if (!nstub_sh) return;
    pthread_barrier_destroy(&nstub_sh->bar);
    munmap((void *)nstub_sh, nstub_sh_bytes);
    nstub_sh = NULL;
}
static void nstub_wait(void) { pthread_barrier_wait(&nstub_sh->bar); }
static float *nstub_box(int src, int dst) { return nstub_sh->data + ((size_t)src * nstub_sh->nranks + dst) * nstub_sh->cap; }

/* broadcast for dpn_create (MPI_Bcast's part): root's bytes through the mailbox [root][root] */
static int nstub_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    int me = *(const int *)ctx;
    if (!nstub_sh || bytes > nstub_sh->cap * sizeof(float) || root < 0 || root >= nstub_sh->nranks) return -1;
    if (me == root) memcpy(nstub_box(root, root), buf, bytes);
    nstub_wait();
    if (me != root) memcpy(buf, nstub_box(root, root), bytes);
    nstub_wait();
    return 0;
}

static int nstub_is_dev(const void *p)
{
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) { (void)cudaGetLastError(); return 0; }
    return at.type == cudaMemoryTypeDevice;
}

static int nstub_GetVersion(int *v) { if (!v) return 4; *v = 21903; return 0; }
static const char *nstub_GetErrorString(int r)
{
    switch (r) {
    case 0: return "no error";
    case 2: return "unhandled system error (stub)";
    case 4: return "invalid argument (stub)";
    case 5: return "invalid usage (stub)";
    default: return "stub error";
    }
}
static int nstub_GetUniqueId(dpn_unique_id *id)
{
    if (!id) return 4;
    memset(id, 0, sizeof *id);
    memcpy(id->internal, nstub_magic, sizeof nstub_magic);
    return 0;
}
static int nstub_CommInitRank(dpn_nccl_comm_t *comm, int nranks, dpn_unique_id id, int rank)
{
    if (!comm || !nstub_sh || nranks != nstub_sh->nranks || rank < 0 || rank >= nranks) return 4;
    if (memcmp(id.internal, nstub_magic, sizeof nstub_magic) != 0) return 4;
    *comm = new dpn_nccl_comm();
    (*comm)->rank = rank;
    (*comm)->nranks = nranks;
    if (nranks > 1) nstub_wait(); /* every rank joins */
    return 0;
}
static int nstub_CommDestroy(dpn_nccl_comm_t comm) { delete comm; return 0; }
static int nstub_flush(dpn_nccl_comm_t comm)
{
    int i, rc = 0;
    const int me = comm ? comm->rank : 0;
    for (i = 0; i < nstub_nq; i++) {
        const nstub_op *o = nstub_q + i;
        if (!o->send) continue;
        if (o->count > nstub_sh->cap) { rc = 5; continue; }
        memcpy(nstub_box(me, o->peer), o->buf, o->count * sizeof(float));
        nstub_sh->count[me][o->peer] = o->count;
        nstub_sh->dtype[me][o->peer] = o->dtype;
        nstub_sends++;
        nstub_floats += (long long)o->count;
    }
    nstub_wait();
    for (i = 0; i < nstub_nq; i++) {
        const nstub_op *o = nstub_q + i;
        if (o->send) continue;
        if (nstub_sh->count[o->peer][me] != o->count || nstub_sh->dtype[o->peer][me] != o->dtype) { rc = 5; continue; }
        memcpy(o->buf, nstub_box(o->peer, me), o->count * sizeof(float));
    }
    nstub_wait();
    nstub_nq = 0;
    return rc;
}
static dpn_nccl_comm_t nstub_qcomm = NULL;
static int nstub_GroupStart(void) { nstub_depth++; return 0; }
static int nstub_GroupEnd(void)
{
    int rc;
    if (nstub_depth < 1) return 5;
    if (--nstub_depth) return 0;
    if (nstub_qerr) { /* an op of the group was refused: nothing runs (on every rank) */
        rc = nstub_qerr;
        nstub_qerr = 0;
        nstub_nq = 0;
        return rc;
    }
    return nstub_nq ? nstub_flush(nstub_qcomm) : 0;
}
static int nstub_queue(int send, const void *buf, size_t count, int dtype, int peer, dpn_nccl_comm_t comm)
{
    int rc = 0;
    if (!comm || peer < 0 || peer >= comm->nranks || dtype != DPN_NCCL_FLOAT32 || (count && !nstub_is_dev(buf)) ||
        nstub_nq >= 64)
        rc = 4;
    else if (send && nstub_fail_next_send) {
        nstub_fail_next_send = 0;
        rc = 2;
    }
    if (rc) {
        if (nstub_depth) nstub_qerr = rc;
        return rc;
    }
    nstub_op o;
    o.send = send;
    o.buf = (void *)buf;
    o.count = count;
    o.dtype = dtype;
    o.peer = peer;
    nstub_q[nstub_nq++] = o;
    nstub_qcomm = comm;
    if (!nstub_depth) return nstub_flush(comm);
    return 0;
}
static int nstub_Send(const void *buf, size_t count, int dtype, int peer, dpn_nccl_comm_t comm, tk_stream s)
{
    (void)s;
    return nstub_queue(1, buf, count, dtype, peer, comm);
}
static int nstub_Recv(void *buf, size_t count, int dtype, int peer, dpn_nccl_comm_t comm, tk_stream s)
{
    (void)s;
    return nstub_queue(0, buf, count, dtype, peer, comm);
}
static void nstub_api(dpn_api *api)
{
    memset(api, 0, sizeof *api);
    api->GetVersion = nstub_GetVersion;
    api->GetErrorString = nstub_GetErrorString;
    api->GetUniqueId = nstub_GetUniqueId;
    api->CommInitRank = nstub_CommInitRank;
    api->CommDestroy = nstub_CommDestroy;
    api->GroupStart = nstub_GroupStart;
    api->GroupEnd = nstub_GroupEnd;
    api->Send = nstub_Send;
    api->Recv = nstub_Recv;
}

#endif /* ATTNKIT_NCCL_STUB_H */
