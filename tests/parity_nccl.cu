/* parity_nccl.cu - the device trainer's NCCL all-reduce (examples/common/dpnccl.{h,c}, issue
   44 item 2). In the CPU simulation (`make test`): the stub NCCL of tests/nccl_stub.h, two
   and three ranks as forked processes, each with its own simulated device buffers; the
   result on every rank must be the rank-ordered sum (((x_0 + x_1) + x_2) ...) bit for bit,
   the sum dist.h's CPU all-reduce gives and a single process accumulating the same
   micro-batches gives; the reverse order must differ somewhere (so the check can fail).
   Sizes 1, 2, 5 (fewer elements than ranks on some chunks), 1000, 4099 with segments of
   1000 elements (DPN_SEGMENT is made small here, so several segments and a short last one
   run). Also: one rank (nothing sent, unchanged), the traffic of a ring all-reduce (each
   rank sends 2 (N - 1) / N of the buffer), a failing ncclSend reported with NCCL's message,
   a bad id refused at the join, and dpn_load's sentence when libnccl cannot be loaded.
   Built by nvcc, the stub cases are skipped (the stub copies host memory) and, on a GPU
   with libnccl.so.2, one real rank joins and all-reduces (N = 1: unchanged): the part of
   the path a one-GPU lease can run. */
#include "tests/cuda_test.h"
#define TENSOR_IMPLEMENTATION
#include "tensor.h"
#define DPN_SEGMENT ((size_t)1000)
#include "examples/common/dpnccl.c"
#ifdef ATTNKIT_CUDA_SIM
#include "tests/nccl_stub.h"
#include <signal.h>
#include <sys/wait.h>
#endif
#include "tests/attnkit_test.h"

#include <string>

static int g_gpu = 0;

/* rank r's buffer: normal values of mixed scale, seeded by (r, n) */
static std::vector<float> rank_data(int r, size_t n)
{
    tt_seed(0x5EEDull * (unsigned long long)(r + 1) + n);
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++) x[i] = (float)(tt_normal() * (i % 7 == 0 ? 1e3 : 1.0));
    return x;
}

static void test_load_missing(void)
{
    dpn_api api;
    char err[512] = "";
    CHECK_INT_EQ(dpn_load(&api, "libnccl-attnkit-missing.so.2", err, sizeof err), DPN_ENOLIB);
    CHECK(strstr(err, "cannot load NCCL") != NULL);
    CHECK(strstr(err, "libnccl-attnkit-missing.so.2") != NULL);
    CHECK(strstr(err, "more than one process needs NCCL") != NULL);
    CHECK(api.Send == NULL && api.handle == NULL);
    /* a library without NCCL's functions */
    err[0] = 0;
    CHECK_INT_EQ(dpn_load(&api, "libm.so.6", err, sizeof err), DPN_ENOLIB);
    CHECK(strstr(err, "has no ncclGetVersion") != NULL);
    CHECK_INT_EQ(dpn_load(NULL, NULL, err, sizeof err), DPN_EINVAL);
    dpn_unload(&api); /* nothing loaded: a no-op */
}

#ifdef ATTNKIT_CUDA_SIM
/* run fn(rank) in nranks processes (this one is rank 0): 1 when every rank returned 0 */
static int run_ranks(int nranks, size_t cap, int (*fn)(int rank, void *arg), void *arg)
{
    pid_t kids[NSTUB_MAXR];
    int r, ok = 1, st = 0;
    if (nstub_setup(nranks, cap) != 0) return 0;
    fflush(NULL);
    for (r = 1; r < nranks; r++) {
        kids[r] = fork();
        if (kids[r] == 0) {
            alarm(120); /* a rank left waiting in a barrier does not hang the suite */
            _exit(fn(r, arg) ? 1 : 0);
        }
        if (kids[r] < 0) ok = 0;
    }
    if (fn(0, arg)) ok = 0;
    for (r = 1; r < nranks; r++) {
        if (kids[r] > 0 && (waitpid(kids[r], &st, 0) != kids[r] || !WIFEXITED(st) || WEXITSTATUS(st))) {
            fprintf(stderr, "rank %d: %s %d\n", r, WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            ok = 0;
        }
    }
    nstub_teardown();
    return ok;
}

struct ar_arg { int nranks; size_t n; };

/* one rank: all-reduce its buffer, compare with the rank-ordered sum of every rank's data */
static int ar_rank(int rank, void *vp)
{
    const ar_arg *a = (const ar_arg *)vp;
    const int N = a->nranks;
    const size_t n = a->n;
    dpn_api api;
    dpn_comm *c = NULL;
    char err[256] = "";
    int bad = 0, rc;
    size_t i, differ = 0;
    std::vector<float> ref = rank_data(0, n), rev = rank_data(N - 1, n);
    for (int r = 1; r < N; r++) {
        std::vector<float> x = rank_data(r, n), y = rank_data(N - 1 - r, n);
        for (i = 0; i < n; i++) { ref[i] += x[i]; rev[i] += y[i]; }
    }
    nstub_api(&api);
    int me = rank;
    rc = dpn_create(&c, &api, rank, N, nstub_bcast, &me, err, sizeof err);
    if (rc != DPN_OK) { fprintf(stderr, "rank %d: dpn_create: %s\n", rank, err); return 1; }
    float *d = dput(rank_data(rank, n));
    long long sends0 = nstub_sends, floats0 = nstub_floats;
    rc = dpn_allreduce_f32(c, d, n, NULL);
    if (rc != DPN_OK) { fprintf(stderr, "rank %d: %s\n", rank, dpn_last_error(c)); bad = 1; }
    std::vector<float> got = dget(d, n);
    for (i = 0; i < n; i++) {
        if (memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
            if (!bad) fprintf(stderr, "rank %d of %d, n %zu: [%zu] %.9g, rank order %.9g\n", rank, N, n, i, got[i], ref[i]);
            bad = 1;
        }
        if (memcmp(&rev[i], &ref[i], sizeof(float)) != 0) differ++;
    }
    /* the traffic, per segment: the other ranks' chunks to them (len - mine), then the
       reduced own chunk to each of them ((N - 1) mine): about 2 (N - 1) / N of the buffer */
    long long want = 0;
    for (size_t off = 0; off < n; off += DPN_SEGMENT) {
        size_t len = n - off < DPN_SEGMENT ? n - off : DPN_SEGMENT;
        size_t mine = dpn__cut(len, rank + 1, N) - dpn__cut(len, rank, N);
        want += (long long)(len - mine) + (long long)(N - 1) * (long long)mine;
    }
    if (nstub_floats - floats0 != want) {
        fprintf(stderr, "rank %d: sent %lld floats in %lld sends, want %lld\n", rank, nstub_floats - floats0,
                nstub_sends - sends0, want);
        bad = 1;
    }
    if (rank == 0 && n >= 1000 && N > 2 && !differ) {
        fprintf(stderr, "the reverse order gives the same bits: the check cannot fail\n");
        bad = 1;
    }
    dfree(d);
    dpn_destroy(c);
    return bad;
}

static void test_allreduce_ranks(void)
{
    static const size_t sizes[] = {1, 2, 5, 1000, 4099};
    for (int N = 2; N <= 3; N++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            ar_arg a = {N, sizes[k]};
            if (!run_ranks(N, DPN_SEGMENT, ar_rank, &a)) {
                fprintf(stderr, "FAIL at %d ranks, n %zu\n", N, sizes[k]);
                CHECK(0);
            }
        }
}

static void test_one_rank(void)
{
    ar_arg a = {1, 4099};
    CHECK(run_ranks(1, DPN_SEGMENT, ar_rank, &a));
    CHECK(nstub_sends == 0); /* nothing sent */
}

/* a failing ncclSend (on every rank): DPN_ENCCL with the call and NCCL's message; the
   communicator still works afterwards */
static int fail_rank(int rank, void *vp)
{
    (void)vp;
    dpn_api api;
    dpn_comm *c = NULL;
    char err[256] = "";
    int me = rank, bad = 0;
    nstub_api(&api);
    if (dpn_create(&c, &api, rank, 2, nstub_bcast, &me, err, sizeof err) != DPN_OK) return 1;
    float *d = dput(rank_data(rank, 10));
    nstub_fail_next_send = 1;
    if (dpn_allreduce_f32(c, d, 10, NULL) != DPN_ENCCL) bad = 1;
    if (!strstr(dpn_last_error(c), "ncclSend/ncclRecv (reduce-scatter) failed: unhandled system error")) {
        fprintf(stderr, "rank %d: message '%s'\n", rank, dpn_last_error(c));
        bad = 1;
    }
    dfree(d);
    d = dput(rank_data(rank, 10));
    if (dpn_allreduce_f32(c, d, 10, NULL) != DPN_OK) bad = 1;
    /* a host buffer: NCCL refuses it (the stub checks as NCCL does, by the pointer) */
    std::vector<float> h(10, 1.0f);
    if (dpn_allreduce_f32(c, h.data(), 10, NULL) != DPN_ENCCL || !strstr(dpn_last_error(c), "invalid argument")) {
        fprintf(stderr, "rank %d: host buffer: '%s'\n", rank, dpn_last_error(c));
        bad = 1;
    }
    if (dpn_allreduce_f32(c, NULL, 10, NULL) != DPN_EINVAL) bad = 1;
    dfree(d);
    dpn_destroy(c);
    return bad;
}

static void test_failures(void)
{
    CHECK(run_ranks(2, DPN_SEGMENT, fail_rank, NULL));
}

/* a broadcast that hands rank 1 a wrong id: ncclCommInitRank refuses it there */
static int badid_bcast(void *ctx, void *buf, size_t bytes, int root)
{
    int rc = nstub_bcast(ctx, buf, bytes, root);
    if (*(const int *)ctx == 1) memset(buf, 0, bytes);
    return rc;
}
static int badid_rank(int rank, void *vp)
{
    (void)vp;
    dpn_api api;
    dpn_comm *c = NULL;
    char err[256] = "";
    int me = rank, rc;
    nstub_api(&api);
    if (rank == 0) return 0; /* rank 0 would wait for rank 1 at the join: it only broadcasts */
    rc = dpn_create(&c, &api, rank, 2, badid_bcast, &me, err, sizeof err);
    return !(rc == DPN_ENCCL && c == NULL && strstr(err, "ncclCommInitRank failed"));
}
static int badid_root(int rank, void *vp)
{
    dpn_unique_id id;
    int me = rank;
    if (rank == 1) return badid_rank(rank, vp);
    nstub_GetUniqueId(&id);
    return nstub_bcast(&me, &id, sizeof id, 0) != 0;
}

static void test_bad_id(void)
{
    CHECK(run_ranks(2, DPN_SEGMENT, badid_root, NULL));
    dpn_api api;
    dpn_comm *c = NULL;
    char err[256] = "";
    nstub_api(&api);
    CHECK_INT_EQ(dpn_create(&c, &api, 1, 2, NULL, NULL, err, sizeof err), DPN_EINVAL);
    CHECK_INT_EQ(dpn_create(&c, &api, 2, 2, nstub_bcast, NULL, err, sizeof err), DPN_EINVAL);
    api.Send = NULL;
    CHECK_INT_EQ(dpn_create(&c, &api, 0, 1, NULL, NULL, err, sizeof err), DPN_EINVAL);
    CHECK(strstr(err, "not loaded") != NULL);
}
#else
static void test_allreduce_ranks(void) { TEST_SKIP("the stub NCCL runs in the simulation only"); }
#endif

/* on a GPU with libnccl.so.2: one real rank joins; its all-reduce leaves the buffer as it is */
static void test_real_one_rank(void)
{
    dpn_api api;
    dpn_comm *c = NULL;
    char err[512] = "";
#ifdef ATTNKIT_CUDA_SIM
    TEST_SKIP("the simulation has no NCCL library (the stub cases run instead)");
#endif
    if (!g_gpu) TEST_SKIP("no GPU");
    if (dpn_load(&api, NULL, err, sizeof err) != DPN_OK) TEST_SKIP(err);
    CHECK_INT_EQ(dpn_create(&c, &api, 0, 1, NULL, NULL, err, sizeof err), DPN_OK);
    if (c) {
        std::vector<float> x = rank_data(0, 4099);
        float *d = dput(x);
        CHECK_INT_EQ(dpn_allreduce_f32(c, d, x.size(), NULL), DPN_OK);
        std::vector<float> got = dget(d, x.size());
        CHECK(memcmp(got.data(), x.data(), x.size() * sizeof(float)) == 0);
        dfree(d);
        dpn_destroy(c);
    }
    dpn_unload(&api);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    g_gpu = parity_device_ok();
    if (!g_gpu) printf("SKIP: no GPU\n");
    else parity_print_device();
    TEST_RUN(test_load_missing);
    TEST_RUN(test_allreduce_ranks);
#ifdef ATTNKIT_CUDA_SIM
    TEST_RUN(test_one_rank);
    TEST_RUN(test_failures);
    TEST_RUN(test_bad_id);
#endif
    TEST_RUN(test_real_one_rank);
    return TEST_END();
}
