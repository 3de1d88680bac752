/* dpnccl.c - see dpnccl.h. */
#include "dpnccl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"

struct dpn_comm {
    dpn_api api;
    dpn_nccl_comm_t nc;
    int rank, size;
    float *scratch; /* device: size x one chunk of a segment */
    size_t scratch_n;
    float **send, **recv; /* size each: one exchange's buffers per peer */
    size_t *scount, *rcount;
    char err[256];
};

const char *dpn_strerror(int err)
{
    switch (err) {
    case DPN_OK: return "ok";
    case DPN_EINVAL: return "invalid argument";
    case DPN_ENOMEM: return "out of memory";
    case DPN_ENOLIB: return "NCCL could not be loaded";
    case DPN_ENCCL: return "an NCCL call failed";
    case DPN_EDEVICE: return "a device operation failed";
    default: return "unknown error";
    }
}

int dpn_rank(const dpn_comm *c) { return c ? c->rank : 0; }
int dpn_size(const dpn_comm *c) { return c ? c->size : 1; }
const char *dpn_last_error(const dpn_comm *c) { return c ? c->err : "no communicator"; }

/* dlsym into a function pointer without ISO C's object-to-function pointer cast */
static int dpn__sym(void *h, const char *name, void *fp, size_t fpsize)
{
    void *s = dlsym(h, name);
    if (!s || fpsize != sizeof s) return 0;
    memcpy(fp, &s, sizeof s);
    return 1;
}

int dpn_load(dpn_api *api, const char *path, char *err, size_t errlen)
{
    void *h;
    int v = 0;
    const char *missing = NULL;
    if (!api) return ex_errf(err, errlen, DPN_EINVAL, "dpn_load: api is NULL");
    memset(api, 0, sizeof *api);
    if (!path) path = DPN_LIBNAME;
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return ex_errf(err, errlen, DPN_ENOLIB,
                       "cannot load NCCL (%s: %s): --device cuda with more than one process needs NCCL 2.7 or newer "
                       "(the nvidia-nccl-cu13 wheel or the distribution's libnccl2; its lib folder on LD_LIBRARY_PATH)",
                       path, why ? why : "not found");
    }
#define DPN__SYM(field, name) \
    if (!missing && !dpn__sym(h, name, &api->field, sizeof api->field)) missing = name
    DPN__SYM(GetVersion, "ncclGetVersion");
    DPN__SYM(GetErrorString, "ncclGetErrorString");
    DPN__SYM(GetUniqueId, "ncclGetUniqueId");
    DPN__SYM(CommInitRank, "ncclCommInitRank");
    DPN__SYM(CommDestroy, "ncclCommDestroy");
    DPN__SYM(GroupStart, "ncclGroupStart");
    DPN__SYM(GroupEnd, "ncclGroupEnd");
    DPN__SYM(Send, "ncclSend");
    DPN__SYM(Recv, "ncclRecv");
#undef DPN__SYM
    if (missing) {
        dlclose(h);
        memset(api, 0, sizeof *api);
        return ex_errf(err, errlen, DPN_ENOLIB, "%s has no %s (NCCL 2.7 or newer is needed)", path, missing);
    }
    /* version codes: major * 1000 + minor * 100 + patch before 2.9, major * 10000 + ... since */
    if (api->GetVersion(&v) != DPN_NCCL_SUCCESS || v < 2700) {
        dlclose(h);
        memset(api, 0, sizeof *api);
        return ex_errf(err, errlen, DPN_ENOLIB, "%s is NCCL version code %d (2.7 or newer is needed)", path, v);
    }
    api->handle = h;
    return DPN_OK;
}

void dpn_unload(dpn_api *api)
{
    if (!api || !api->handle) return;
    dlclose(api->handle);
    memset(api, 0, sizeof *api);
}

static int dpn__nccl(dpn_comm *c, int rc, const char *what)
{
    const char *msg = c->api.GetErrorString ? c->api.GetErrorString(rc) : NULL;
    return ex_errf(c->err, sizeof c->err, DPN_ENCCL, "%s failed: %s (ncclResult %d)", what, msg ? msg : "?", rc);
}

int dpn_create(dpn_comm **out, const dpn_api *api, int rank, int size,
               int (*bcast)(void *ctx, void *buf, size_t bytes, int root), void *ctx, char *err, size_t errlen)
{
    dpn_comm *c;
    dpn_unique_id id;
    int rc = DPN_NCCL_SUCCESS;
    if (!out) return ex_errf(err, errlen, DPN_EINVAL, "dpn_create: out is NULL");
    *out = NULL;
    if (!api || !api->GetUniqueId || !api->CommInitRank || !api->CommDestroy || !api->GroupStart || !api->GroupEnd ||
        !api->Send || !api->Recv)
        return ex_errf(err, errlen, DPN_EINVAL, "dpn_create: the NCCL table is not loaded");
    if (size < 1 || rank < 0 || rank >= size || (size > 1 && !bcast))
        return ex_errf(err, errlen, DPN_EINVAL, "dpn_create: rank %d of %d (a broadcast is needed above 1)", rank, size);
    c = (dpn_comm *)calloc(1, sizeof *c);
    if (!c) return ex_errf(err, errlen, DPN_ENOMEM, "dpn_create: out of memory");
    c->send = (float **)calloc((size_t)size * 2, sizeof(float *));
    c->scount = (size_t *)calloc((size_t)size * 2, sizeof(size_t));
    if (!c->send || !c->scount) {
        free(c->send);
        free(c->scount);
        free(c);
        return ex_errf(err, errlen, DPN_ENOMEM, "dpn_create: out of memory");
    }
    c->recv = c->send + size;
    c->rcount = c->scount + size;
    c->api = *api;
    c->rank = rank;
    c->size = size;
    memset(&id, 0, sizeof id);
    if (rank == 0 && (rc = api->GetUniqueId(&id)) != DPN_NCCL_SUCCESS) {
        dpn__nccl(c, rc, "ncclGetUniqueId");
        /* the others wait in the broadcast: they get a zero id, and fail to join */
    }
    if (size > 1 && bcast(ctx, &id, sizeof id, 0) != 0) {
        free(c->send);
        free(c->scount);
        free(c);
        return ex_errf(err, errlen, DPN_EINVAL, "dpn_create: the broadcast of the NCCL id failed");
    }
    if (c->err[0] || (rc = api->CommInitRank(&c->nc, size, id, rank)) != DPN_NCCL_SUCCESS) {
        if (!c->err[0]) dpn__nccl(c, rc, "ncclCommInitRank");
        ex_errf(err, errlen, DPN_ENCCL, "%s", c->err);
        free(c->send);
        free(c->scount);
        free(c);
        return DPN_ENCCL;
    }
    *out = c;
    return DPN_OK;
}

void dpn_destroy(dpn_comm *c)
{
    if (!c) return;
    if (c->nc && c->api.CommDestroy) c->api.CommDestroy(c->nc);
    tk_device_free(c->scratch);
    free(c->send);
    free(c->scount);
    free(c);
}

/* chunk r of a segment of len elements: [r len / N, (r + 1) len / N) (dist.c's partition) */
static size_t dpn__cut(size_t len, int r, int n)
{
    return len / (size_t)n * (size_t)r + len % (size_t)n * (size_t)r / (size_t)n;
}

static int dpn__tk(dpn_comm *c, int rc, const char *what)
{
    return ex_errf(c->err, sizeof c->err, DPN_EDEVICE, "dpn_allreduce_f32 (%s): %s", what, tk_strerror(rc));
}

/* one point-to-point round: to every other rank r, send[r] (scount[r] floats); from it,
   recv[r] (rcount[r]); sizes agree pairwise (what r sends here is what is received) */
static int dpn__exchange(dpn_comm *c, float *const *send, const size_t *scount, float *const *recv,
                         const size_t *rcount, tk_stream s, const char *what)
{
    int r, rc;
    if ((rc = c->api.GroupStart()) != DPN_NCCL_SUCCESS) return dpn__nccl(c, rc, "ncclGroupStart");
    for (r = 0; r < c->size; r++) {
        if (r == c->rank) continue;
        if (scount[r] && (rc = c->api.Send(send[r], scount[r], DPN_NCCL_FLOAT32, r, c->nc, s)) != DPN_NCCL_SUCCESS) {
            c->api.GroupEnd();
            return dpn__nccl(c, rc, what);
        }
        if (rcount[r] && (rc = c->api.Recv(recv[r], rcount[r], DPN_NCCL_FLOAT32, r, c->nc, s)) != DPN_NCCL_SUCCESS) {
            c->api.GroupEnd();
            return dpn__nccl(c, rc, what);
        }
    }
    if ((rc = c->api.GroupEnd()) != DPN_NCCL_SUCCESS) return dpn__nccl(c, rc, what);
    return DPN_OK;
}

static int dpn__seg(dpn_comm *c, float *seg, size_t len, tk_stream s)
{
    const int N = c->size, me = c->rank;
    float **send = c->send, **recv = c->recv;
    size_t *scount = c->scount, *rcount = c->rcount;
    size_t lo = dpn__cut(len, me, N), mine = dpn__cut(len, me + 1, N) - lo;
    float *acc = c->scratch;
    int r, rc;
    /* 1. reduce-scatter: chunk r of this buffer to rank r; chunk `me` of rank r's into slot r */
    for (r = 0; r < N; r++) {
        size_t a = dpn__cut(len, r, N), b = dpn__cut(len, r + 1, N);
        send[r] = seg + a;
        scount[r] = b - a;
        recv[r] = c->scratch + (size_t)r * mine;
        rcount[r] = mine;
    }
    if (mine && (rc = tk_copy_async(c->scratch + (size_t)me * mine, seg + lo, mine * sizeof(float), s)) != TK_OK)
        return dpn__tk(c, rc, "copy");
    if ((rc = dpn__exchange(c, send, scount, recv, rcount, s, "ncclSend/ncclRecv (reduce-scatter)")) != DPN_OK)
        return rc;
    /* 2. rank order: (((x_0 + x_1) + x_2) + ...), one rounding per add, into slot 0 */
    if (mine) {
        for (r = 1; r < N; r++)
            if ((rc = tk_residual_forward_cuda(acc, acc, c->scratch + (size_t)r * mine, mine, s)) != TK_OK)
                return dpn__tk(c, rc, "sum");
        if ((rc = tk_copy_async(seg + lo, acc, mine * sizeof(float), s)) != TK_OK) return dpn__tk(c, rc, "copy");
    }
    /* 3. all-gather: this rank's reduced chunk to every rank, theirs into place */
    for (r = 0; r < N; r++) {
        send[r] = seg + lo;
        scount[r] = mine;
        recv[r] = seg + dpn__cut(len, r, N);
        rcount[r] = dpn__cut(len, r + 1, N) - dpn__cut(len, r, N);
    }
    return dpn__exchange(c, send, scount, recv, rcount, s, "ncclSend/ncclRecv (all-gather)");
}

int dpn_allreduce_f32(dpn_comm *c, float *buf, size_t n, tk_stream stream)
{
    size_t off, seg_n, need;
    if (!c) return DPN_EINVAL;
    c->err[0] = 0;
    if (!buf && n) return ex_errf(c->err, sizeof c->err, DPN_EINVAL, "dpn_allreduce_f32: buf is NULL");
    if (c->size == 1 || !n) return DPN_OK;
    seg_n = n < DPN_SEGMENT ? n : DPN_SEGMENT;
    need = (size_t)c->size * (seg_n / (size_t)c->size + 1); /* N chunks of the largest segment */
    if (need > c->scratch_n) {
        void *p = NULL;
        int rc = tk_device_alloc(&p, need * sizeof(float));
        if (rc != TK_OK)
            return ex_errf(c->err, sizeof c->err, rc == TK_ENOMEM ? DPN_ENOMEM : DPN_EDEVICE,
                           "dpn_allreduce_f32: %zu bytes of device scratch: %s", need * sizeof(float), tk_strerror(rc));
        tk_device_free(c->scratch);
        c->scratch = (float *)p;
        c->scratch_n = need;
    }
    for (off = 0; off < n; off += DPN_SEGMENT) {
        size_t len = n - off < DPN_SEGMENT ? n - off : DPN_SEGMENT;
        int rc = dpn__seg(c, buf + off, len, stream);
        if (rc != DPN_OK) return rc;
    }
    return DPN_OK;
}
