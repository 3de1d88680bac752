/* dist.c - see dist.h. */
#include "dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errf.h"

#ifdef ATTNKIT_MPI
#include <mpi.h>
#endif

struct dp_comm {
    int rank, size;
    int own_mpi;          /* 1: dp_init called MPI_Init, dp_finalize calls MPI_Finalize */
    void *scratch;        /* one segment of the reduce-scatter (N chunks of this rank) */
    size_t scratch_bytes;
    int *counts, *displs; /* N each, per exchange */
    int *rcounts, *rdispls;
    char err[256];
};

const char *dp_strerror(int err)
{
    switch (err) {
    case DP_OK: return "ok";
    case DP_EINVAL: return "invalid argument";
    case DP_ENOMEM: return "out of memory";
    case DP_EFAIL: return "the communication library failed";
    default: return "unknown error";
    }
}

int dp_rank(const dp_comm *c) { return c ? c->rank : 0; }
int dp_size(const dp_comm *c) { return c ? c->size : 1; }
const char *dp_last_error(const dp_comm *c) { return c ? c->err : "no communicator"; }

const char *dp_backend(const dp_comm *c)
{
    (void)c;
#ifdef ATTNKIT_MPI
    return "mpi";
#else
    return "none";
#endif
}

#ifdef ATTNKIT_MPI
static int dp__mpi_fail(dp_comm *c, int mrc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mrc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", mrc);
    return ex_errf(c->err, sizeof c->err, DP_EFAIL, "%s: %s", what, msg);
}
#endif

int dp_init(dp_comm **out, int *argc, char ***argv, char *err, size_t errlen)
{
    dp_comm *c;
    if (!out) return ex_errf(err, errlen, DP_EINVAL, "dp_init: out is NULL");
    *out = NULL;
    c = (dp_comm *)calloc(1, sizeof *c);
    if (!c) return ex_errf(err, errlen, DP_ENOMEM, "dp_init: out of memory");
    c->rank = 0;
    c->size = 1;
#ifdef ATTNKIT_MPI
    {
        int inited = 0, mrc;
        if (MPI_Initialized(&inited) != MPI_SUCCESS) inited = 0;
        if (!inited) {
            mrc = MPI_Init(argc, argv);
            if (mrc != MPI_SUCCESS) {
                free(c);
                return ex_errf(err, errlen, DP_EFAIL, "dp_init: MPI_Init failed (%d)", mrc);
            }
            c->own_mpi = 1;
        }
        /* errors come back as codes (the default handler aborts the job) */
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        if (MPI_Comm_rank(MPI_COMM_WORLD, &c->rank) != MPI_SUCCESS ||
            MPI_Comm_size(MPI_COMM_WORLD, &c->size) != MPI_SUCCESS || c->size < 1) {
            if (c->own_mpi) MPI_Finalize();
            free(c);
            return ex_errf(err, errlen, DP_EFAIL, "dp_init: cannot read the MPI rank and size");
        }
        c->counts = (int *)calloc((size_t)c->size * 4, sizeof(int));
        if (!c->counts) {
            if (c->own_mpi) MPI_Finalize();
            free(c);
            return ex_errf(err, errlen, DP_ENOMEM, "dp_init: out of memory");
        }
        c->displs = c->counts + c->size;
        c->rcounts = c->displs + c->size;
        c->rdispls = c->rcounts + c->size;
    }
#else
    (void)argc;
    (void)argv;
#endif
    *out = c;
    return DP_OK;
}

void dp_finalize(dp_comm *c)
{
    if (!c) return;
#ifdef ATTNKIT_MPI
    if (c->own_mpi) {
        int fin = 0;
        if (MPI_Finalized(&fin) == MPI_SUCCESS && !fin) MPI_Finalize();
    }
#endif
    free(c->scratch);
    free(c->counts);
    free(c);
}

#ifdef ATTNKIT_MPI
/* chunk r of a segment of len elements: [r len / N, (r + 1) len / N) */
static size_t dp__cut(size_t len, int r, int n) { return len / (size_t)n * (size_t)r + len % (size_t)n * (size_t)r / (size_t)n; }

/* one segment: reduce-scatter by rank order, then all-gather. esize 4 (float) or 8. */
static int dp__allreduce_seg(dp_comm *c, void *seg, size_t len, size_t esize)
{
    const int N = c->size, me = c->rank;
    MPI_Datatype dt = esize == 4 ? MPI_FLOAT : MPI_DOUBLE;
    size_t lo = dp__cut(len, me, N), mine = dp__cut(len, me + 1, N) - lo, need;
    int r, mrc;
    need = (size_t)N * mine * esize;
    if (need > c->scratch_bytes) {
        void *p = realloc(c->scratch, need);
        if (!p) return ex_errf(c->err, sizeof c->err, DP_ENOMEM, "dp_allreduce: out of memory (%zu bytes)", need);
        c->scratch = p;
        c->scratch_bytes = need;
    }
    for (r = 0; r < N; r++) {
        size_t a = dp__cut(len, r, N), b = dp__cut(len, r + 1, N);
        c->counts[r] = (int)(b - a);  /* my chunk r goes to rank r */
        c->displs[r] = (int)a;
        c->rcounts[r] = (int)mine;    /* rank r's chunk `me` comes here */
        c->rdispls[r] = (int)((size_t)r * mine);
    }
    mrc = MPI_Alltoallv(seg, c->counts, c->displs, dt, c->scratch, c->rcounts, c->rdispls, dt,
                        MPI_COMM_WORLD);
    if (mrc != MPI_SUCCESS) return dp__mpi_fail(c, mrc, "dp_allreduce (reduce-scatter)");
    /* rank order: (((x_0 + x_1) + x_2) + ...) */
    if (esize == 4) {
        const float *in = (const float *)c->scratch;
        float *o = (float *)seg + lo;
        size_t j;
        for (j = 0; j < mine; j++) {
            float s = in[j];
            for (r = 1; r < N; r++) s += in[(size_t)r * mine + j];
            o[j] = s;
        }
    } else {
        const double *in = (const double *)c->scratch;
        double *o = (double *)seg + lo;
        size_t j;
        for (j = 0; j < mine; j++) {
            double s = in[j];
            for (r = 1; r < N; r++) s += in[(size_t)r * mine + j];
            o[j] = s;
        }
    }
    mrc = MPI_Allgatherv(MPI_IN_PLACE, 0, dt, seg, c->counts, c->displs, dt, MPI_COMM_WORLD);
    if (mrc != MPI_SUCCESS) return dp__mpi_fail(c, mrc, "dp_allreduce (all-gather)");
    return DP_OK;
}
#endif

static int dp__allreduce(dp_comm *c, void *buf, size_t n, size_t esize, const char *fn)
{
    if (!c) return DP_EINVAL;
    if (!buf && n) return ex_errf(c->err, sizeof c->err, DP_EINVAL, "%s: buf is NULL", fn);
#ifdef ATTNKIT_MPI
    if (c->size > 1) {
        size_t off;
        for (off = 0; off < n; off += DP_SEGMENT) {
            size_t len = n - off < DP_SEGMENT ? n - off : DP_SEGMENT;
            int rc = dp__allreduce_seg(c, (char *)buf + off * esize, len, esize);
            if (rc != DP_OK) return rc;
        }
    }
#else
    (void)esize;
#endif
    return DP_OK;
}

int dp_allreduce_f32(dp_comm *c, float *buf, size_t n) { return dp__allreduce(c, buf, n, 4, "dp_allreduce_f32"); }
int dp_allreduce_f64(dp_comm *c, double *buf, size_t n) { return dp__allreduce(c, buf, n, 8, "dp_allreduce_f64"); }

size_t dp_shard_lo(size_t n, int r, int size)
{
    if (size < 1) size = 1;
    if (r <= 0) return 0;
    if (r >= size) return n;
    return n / (size_t)size * (size_t)r + n % (size_t)size * (size_t)r / (size_t)size;
}

int dp_allgather_f32(dp_comm *c, float *buf, size_t n)
{
    if (!c) return DP_EINVAL;
    if (!buf && n) return ex_errf(c->err, sizeof c->err, DP_EINVAL, "dp_allgather_f32: buf is NULL");
    if (n > (size_t)INT_MAX)
        return ex_errf(c->err, sizeof c->err, DP_EINVAL, "dp_allgather_f32: %zu elements (at most %d)", n, INT_MAX);
#ifdef ATTNKIT_MPI
    if (c->size > 1) {
        int r, mrc;
        for (r = 0; r < c->size; r++) {
            size_t a = dp_shard_lo(n, r, c->size), b = dp_shard_lo(n, r + 1, c->size);
            c->counts[r] = (int)(b - a);
            c->displs[r] = (int)a;
        }
        mrc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf, c->counts, c->displs, MPI_FLOAT, MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) return dp__mpi_fail(c, mrc, "dp_allgather_f32");
    }
#endif
    return DP_OK;
}

int dp_bcast(dp_comm *c, void *buf, size_t bytes, int root)
{
    if (!c) return DP_EINVAL;
    if (!buf && bytes) return ex_errf(c->err, sizeof c->err, DP_EINVAL, "dp_bcast: buf is NULL");
    if (root < 0 || root >= c->size)
        return ex_errf(c->err, sizeof c->err, DP_EINVAL, "dp_bcast: root %d is not a rank (0..%d)", root, c->size - 1);
#ifdef ATTNKIT_MPI
    if (c->size > 1) {
        size_t off;
        for (off = 0; off < bytes; off += (size_t)1 << 30) {
            size_t len = bytes - off < ((size_t)1 << 30) ? bytes - off : ((size_t)1 << 30);
            int mrc = MPI_Bcast((char *)buf + off, (int)len, MPI_BYTE, root, MPI_COMM_WORLD);
            if (mrc != MPI_SUCCESS) return dp__mpi_fail(c, mrc, "dp_bcast");
        }
    }
#endif
    return DP_OK;
}

int dp_any(dp_comm *c, int flag, int *out)
{
    int v = flag != 0;
    if (!c || !out) return DP_EINVAL;
#ifdef ATTNKIT_MPI
    if (c->size > 1) {
        int mrc = MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) return dp__mpi_fail(c, mrc, "dp_any");
    }
#endif
    *out = v;
    return DP_OK;
}

int dp_barrier(dp_comm *c)
{
    if (!c) return DP_EINVAL;
#ifdef ATTNKIT_MPI
    if (c->size > 1) {
        int mrc = MPI_Barrier(MPI_COMM_WORLD);
        if (mrc != MPI_SUCCESS) return dp__mpi_fail(c, mrc, "dp_barrier");
    }
#endif
    return DP_OK;
}

int dp_fail(dp_comm *c, int code, const char *msg)
{
    if (code < 1 || code > 255) code = 1;
    if (msg) fprintf(stderr, "[rank %d] %s\n", dp_rank(c), msg);
#ifdef ATTNKIT_MPI
    if (c && c->size > 1) {
        fflush(NULL);
        MPI_Abort(MPI_COMM_WORLD, code); /* does not return */
    }
#endif
    return code;
}
