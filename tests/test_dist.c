/* test_dist.c - examples/common/dist.c: the rank-ordered all-reduce, the ZeRO all-gather, broadcast,
   agreement and failure, on one process (built without MPI, or an MPI singleton) and under
   `mpirun -np N` (built with mpicc -DATTNKIT_MPI; tests/dist_check.sh runs both).

   Every rank builds every rank's input from (rank, i) alone, so each can compute the
   expected rank-ordered sum itself and compare bit for bit.
     test_dist                 the checks; prints "test_dist: N passed, N failed" and the runner's RESULT line
     test_dist --fail-rank R   rank R calls dp_fail(3) while the others wait in a
                               collective: the job must end non-zero (dist_check.sh times it) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the unit under test, compiled in (its white-box test; nothing else of examples/common) */
#include "../examples/common/dist.c"

static int passed, failed, rank0 = 1;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (cond) passed++;                                                                   \
        else {                                                                                \
            failed++;                                                                         \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fputc('\n', stderr);                                                              \
        }                                                                                     \
    } while (0)

/* rank r's value i: magnitudes from 2^-20 to 2^20 and both signs, so the summation order
   changes the rounded result (a test that a different order could not fail is no test) */
static double val(int r, size_t i)
{
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)(r + 1) * 0xD1B54A32D192ED03ULL);
    double u;
    int e;
    x ^= x >> 31; x *= 0x94D049BB133111EBULL; x ^= x >> 29;
    u = (double)(x >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
    e = (int)((x >> 3) % 41) - 20;
    if (i % 97 == 5) return -0.0; /* signed zeros */
    return ldexp(u + 0.5, e) * ((x & 1) ? -1.0 : 1.0);
}

static int same_bits_f(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }
static int same_bits_d(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void test_allreduce(dp_comm *c, size_t n)
{
    const int N = dp_size(c), me = dp_rank(c);
    float *xf = (float *)malloc((n ? n : 1) * sizeof(float));
    double *xd = (double *)malloc((n ? n : 1) * sizeof(double));
    size_t i, badf = 0, badd = 0, order_matters = 0;
    int r, rc;
    if (!xf || !xd) { CHECK(0, "out of memory"); free(xf); free(xd); return; }
    for (i = 0; i < n; i++) {
        xf[i] = (float)val(me, i);
        xd[i] = val(me, i);
    }
    rc = dp_allreduce_f32(c, xf, n);
    CHECK(rc == DP_OK, "dp_allreduce_f32(n=%zu): %s", n, dp_last_error(c));
    rc = dp_allreduce_f64(c, xd, n);
    CHECK(rc == DP_OK, "dp_allreduce_f64(n=%zu): %s", n, dp_last_error(c));
    for (i = 0; i < n; i++) {
        float sf = (float)val(0, i), rf = (float)val(N - 1, i);
        double sd = val(0, i);
        for (r = 1; r < N; r++) {
            sf += (float)val(r, i);
            sd += val(r, i);
        }
        for (r = N - 2; r >= 0; r--) rf += (float)val(r, i); /* the reverse order */
        if (!same_bits_f(xf[i], sf)) {
            if (!badf && rank0) fprintf(stderr, "  f32 i=%zu: got %a, rank order %a\n", i, xf[i], sf);
            badf++;
        }
        if (!same_bits_d(xd[i], sd)) badd++;
        if (!same_bits_f(rf, sf)) order_matters++;
    }
    CHECK(badf == 0, "f32 all-reduce n=%zu on %d ranks: %zu values differ from the rank-ordered sum", n, N, badf);
    CHECK(badd == 0, "f64 all-reduce n=%zu on %d ranks: %zu values differ from the rank-ordered sum", n, N, badd);
    if (N >= 3 && n >= 1000)
        CHECK(order_matters > 0, "n=%zu: the reverse order gave the same sums: the inputs do not test the order", n);
    free(xf);
    free(xd);
}

/* dp_allgather_f32: each rank fills only its own slice (dp_shard_lo), the rest with junk;
   afterwards every element holds its owner's value, bit for bit. The partition covers
   [0, n) without gaps or overlaps and its slices differ in length by at most one. */
static void test_allgather(dp_comm *c, size_t n)
{
    const int N = dp_size(c), me = dp_rank(c);
    float *x = (float *)malloc((n ? n : 1) * sizeof(float));
    size_t i, bad = 0, lo = dp_shard_lo(n, me, N), hi = dp_shard_lo(n, me + 1, N), mn = (size_t)-1, mx = 0;
    int r, owner, rc;
    if (!x) { CHECK(0, "out of memory"); return; }
    CHECK(dp_shard_lo(n, 0, N) == 0 && dp_shard_lo(n, N, N) == n, "dp_shard_lo(%zu) does not cover [0, n)", n);
    for (r = 0; r < N; r++) {
        size_t len = dp_shard_lo(n, r + 1, N) - dp_shard_lo(n, r, N);
        if (len < mn) mn = len;
        if (len > mx) mx = len;
    }
    CHECK(mx - mn <= 1, "dp_shard_lo(%zu) over %d ranks: slices of %zu..%zu elements", n, N, mn, mx);
    for (i = 0; i < n; i++) x[i] = (i >= lo && i < hi) ? (float)val(me, i) : (float)(1e30 * (me + 1));
    rc = dp_allgather_f32(c, x, n);
    CHECK(rc == DP_OK, "dp_allgather_f32(n=%zu): %s", n, dp_last_error(c));
    for (i = 0, owner = 0; i < n; i++) {
        while (i >= dp_shard_lo(n, owner + 1, N)) owner++;
        if (!same_bits_f(x[i], (float)val(owner, i))) bad++;
    }
    CHECK(bad == 0, "all-gather n=%zu on %d ranks: %zu values are not their owner's", n, N, bad);
    free(x);
}

static void test_misc(dp_comm *c)
{
    const int N = dp_size(c), me = dp_rank(c);
    char msg[64];
    int any = -1, rc, root;
    /* broadcast from each root */
    for (root = 0; root < N; root++) {
        memset(msg, 0, sizeof msg);
        if (me == root) snprintf(msg, sizeof msg, "hello from rank %d", root);
        rc = dp_bcast(c, msg, sizeof msg, root);
        CHECK(rc == DP_OK, "dp_bcast root %d: %s", root, dp_last_error(c));
        {
            char want[64];
            memset(want, 0, sizeof want);
            snprintf(want, sizeof want, "hello from rank %d", root);
            CHECK(!memcmp(msg, want, sizeof msg), "dp_bcast root %d: rank %d got '%s'", root, me, msg);
        }
    }
    /* agreement */
    rc = dp_any(c, 0, &any);
    CHECK(rc == DP_OK && any == 0, "dp_any(0) = %d (rc %d)", any, rc);
    rc = dp_any(c, me == N - 1, &any);
    CHECK(rc == DP_OK && any == 1, "dp_any(last rank only) = %d (rc %d)", any, rc);
    CHECK(dp_barrier(c) == DP_OK, "dp_barrier: %s", dp_last_error(c));
    /* argument checks: local, no communication happens (every rank gets the same error) */
    CHECK(dp_allreduce_f32(c, NULL, 3) == DP_EINVAL, "NULL buffer with n = 3 accepted");
    CHECK(dp_allreduce_f64(c, NULL, 3) == DP_EINVAL, "NULL f64 buffer with n = 3 accepted");
    CHECK(dp_allreduce_f32(NULL, NULL, 0) == DP_EINVAL, "NULL communicator accepted");
    CHECK(dp_bcast(c, msg, sizeof msg, N) == DP_EINVAL, "root N accepted");
    CHECK(dp_bcast(c, msg, sizeof msg, -1) == DP_EINVAL, "root -1 accepted");
    CHECK(dp_bcast(c, NULL, 4, 0) == DP_EINVAL, "NULL broadcast buffer accepted");
    CHECK(dp_allgather_f32(c, NULL, 3) == DP_EINVAL, "NULL all-gather buffer accepted");
    CHECK(dp_any(c, 1, NULL) == DP_EINVAL, "dp_any with NULL out accepted");
    CHECK(dp_init(NULL, NULL, NULL, NULL, 0) == DP_EINVAL, "dp_init(NULL) accepted");
    CHECK(dp_rank(NULL) == 0 && dp_size(NULL) == 1, "NULL communicator's rank/size");
    CHECK(strcmp(dp_strerror(DP_EFAIL), "unknown error") != 0, "dp_strerror");
}

int main(int argc, char **argv)
{
    dp_comm *c = NULL;
    char err[256];
    int fail_rank = -1, rc, total_failed;
    static const size_t sizes[] = {0, 1, 2, 3, 5, 7, 64, 1000, 4099, 100003};
    size_t k;
    if (argc == 3 && !strcmp(argv[1], "--fail-rank")) fail_rank = atoi(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: test_dist [--fail-rank R]\n");
        return 2;
    }
    rc = dp_init(&c, &argc, &argv, err, sizeof err);
    if (rc != DP_OK) {
        fprintf(stderr, "test_dist: %s\n", err);
        return 1;
    }
    rank0 = dp_rank(c) == 0;
    if (fail_rank >= 0) {
        float x[4] = {1, 2, 3, 4};
        if (dp_rank(c) == fail_rank) return dp_fail(c, 3, "test_dist: failing on purpose");
        /* the others wait for the failed rank in a collective that never completes */
        dp_allreduce_f32(c, x, 4);
        dp_finalize(c);
        return 0; /* only one rank (nothing to wait for): the caller checks the status */
    }
    for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) test_allreduce(c, sizes[k]);
    for (k = 0; k < sizeof sizes / sizeof sizes[0]; k++) test_allgather(c, sizes[k]);
    test_misc(c);
    /* every rank's verdict: the job passes only if all did */
    rc = dp_any(c, failed != 0, &total_failed);
    if (rc != DP_OK) total_failed = 1;
    if (rank0)
        printf("test_dist: %d rank(s) (%s): %d passed, %d failed%s\n", dp_size(c), dp_backend(c),
               passed, failed, total_failed && !failed ? " (another rank failed)" : "");
    if (rank0) printf("RESULT test_dist passed=%d failed=%d skipped=0\n", passed, failed);
    dp_finalize(c);
    return total_failed ? 1 : 0;
}
