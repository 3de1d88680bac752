/* parity_guardian.cu - guardian.h's device averaging (cuda/guardian.cuh: the weight EMA
   and the SWA running mean) against its CPU path. Built by g++/clang++ against the CPU
   simulation (tests/cuda_sim.h; `make test`) and by nvcc for the GPU (device cases
   skipped without one).
   Tolerance: none. The device must give the CPU's bits element by element (the top of
   cuda/guardian.cuh; these builds target no FMA on the host, so the CPU expressions are
   not contracted). Finite data only (NaN payloads may differ), subnormals included.
   Sizes: n in {1, 1000, 65537, 200003} (none a multiple of the 256-thread block),
   decay in {0, 0.5, 0.999, 1}, three updates each; an SWA sequence that takes and
   refuses snapshots; the plain entry points with device pointers; mixed host/device
   pointers; bad input; one n past one launch's threads (the grid-stride loop). */
#include "tests/cuda_test.h"
#define GUARDIAN_IMPLEMENTATION
#include "guardian.h"
#include "tests/attnkit_test.h"

#include <string>

static int g_gpu = 0;

#define NEED_GPU()                                                             \
    do {                                                                       \
        if (!g_gpu) TEST_SKIP("no GPU");                                       \
    } while (0)

/* the log callback: the last message, and how many came */
static std::string g_msg;
static int g_nmsg = 0;
static void on_log(const char *m, void *user)
{
    (void)user;
    g_msg = m;
    g_nmsg++;
}

static int same_bits(const std::vector<float> &a, const std::vector<float> &b)
{
    return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

/* the first element whose bits differ (-1: none), for the failure message */
static long first_diff(const std::vector<float> &a, const std::vector<float> &b)
{
    for (size_t i = 0; i < a.size() && i < b.size(); i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return (long)i;
    return -1;
}

static unsigned bits_of(float x)
{
    unsigned u;
    memcpy(&u, &x, sizeof u);
    return u;
}

#define CHECK_BITS(dev, cpu)                                                   \
    do {                                                                       \
        long d_ = first_diff(dev, cpu);                                        \
        CHECK(same_bits(dev, cpu));                                            \
        if (d_ >= 0)                                                           \
            fprintf(stderr, "    first difference at [%ld]: %.9g (0x%08x) vs %.9g\n", d_, \
                    (double)(dev)[(size_t)d_], bits_of((dev)[(size_t)d_]), (double)(cpu)[(size_t)d_]); \
    } while (0)

/* weights: normal with a spread of scales, plus zeros, -0, subnormals and large values
   sprinkled in (finite only) */
static std::vector<float> weights(size_t n, double scale)
{
    std::vector<float> v = randn(n, scale);
    for (size_t i = 0; i < n; i += 7) {
        switch ((i / 7) % 6) {
        case 0: v[i] = 0.0f; break;
        case 1: v[i] = -0.0f; break;
        case 2: v[i] = 1e-40f * (float)(1 + i % 5); break;  /* subnormal */
        case 3: v[i] = -3e-39f; break;                      /* subnormal */
        case 4: v[i] = 3e37f * (i % 2 ? 1.0f : -1.0f); break;
        default: v[i] *= 1e-3f; break;
        }
    }
    return v;
}

/* K updates of the EMA from the same start on the host and on the device (a stream, or
   the default stream), compared after every update */
static void run_ema(size_t n, float decay, cudaStream_t stream, int K = 3)
{
    std::vector<float> ema = weights(n, 1.0);
    float *d_ema = dput(ema), *d_w = NULL;
    for (int k = 0; k < K && !tt__case_failed; k++) {
        std::vector<float> w = weights(n, 0.5 + k);
        d_w = dput(w);
        CHECK_INT_EQ(guardian_ema_update(ema.data(), w.data(), (int64_t)n, decay), GUARDIAN_OK);
        CHECK_INT_EQ(guardian_ema_update_cuda(d_ema, d_w, (int64_t)n, decay, (guardian_stream)stream), GUARDIAN_OK);
        if (stream) cudaStreamSynchronize(stream);
        std::vector<float> g = dget(d_ema, n);
        CHECK_BITS(g, ema);
        if (tt__case_failed) fprintf(stderr, "    n %zu decay %g update %d\n", n, (double)decay, k);
        dfree(d_w);
    }
    dfree(d_ema);
}

static void test_ema_parity(void)
{
    static const size_t ns[] = {1, 1000, 65537, 200003};
    static const float decays[] = {0.0f, 0.5f, 0.999f, 1.0f};
    NEED_GPU();
    tt_seed(71);
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof decays / sizeof decays[0]; j++) run_ema(ns[i], decays[j], NULL);
}

/* past one launch's threads (4096 blocks of 256): the grid-stride loop goes round */
static void test_ema_grid_stride(void)
{
    NEED_GPU();
    tt_seed(77);
    run_ema((size_t)4096 * 256 + 777, 0.75f, NULL, 1);
}

/* on a stream of its own, and ema == w (allowed: elementwise) */
static void test_ema_stream_alias(void)
{
    cudaStream_t st = NULL;
    NEED_GPU();
    tt_seed(72);
    CHECK(cudaStreamCreate(&st) == cudaSuccess);
    run_ema(4099, 0.9f, st);
    run_ema(1000, 0.999f, st);
    {
        const size_t n = 3001;
        std::vector<float> e = weights(n, 2.0);
        float *d_e = dput(e);
        CHECK_INT_EQ(guardian_ema_update(e.data(), e.data(), (int64_t)n, 0.3f), GUARDIAN_OK);
        CHECK_INT_EQ(guardian_ema_update_cuda(d_e, d_e, (int64_t)n, 0.3f, (guardian_stream)st), GUARDIAN_OK);
        cudaStreamSynchronize(st);
        std::vector<float> g = dget(d_e, n);
        CHECK_BITS(g, e);
        dfree(d_e);
    }
    cudaStreamDestroy(st);
}

/* The SWA sequence: zone [4, 6], min relative gain 1%, from epoch 2.
   epoch 0-1 before start (refused), 2 taken (first: copied), 3 ce above the zone
   (refused), 4 taken (k 1/2), 5 gain 0.17% (refused), 6 taken (k 1/3, inexact in
   float), 7 taken (1/4), 8 below the zone (refused), 9, 10 taken (1/5, 1/6). */
enum { SWA_E = 11 };
static const float swa_entry[SWA_E] = {9.0f, 8.0f, 6.5f, 6.4f, 6.2f, 5.80f, 5.79f, 5.6f, 5.5f, 5.4f, 5.2f};
static const float swa_ce[SWA_E]    = {8.0f, 7.0f, 5.9f, 6.3f, 5.8f, 5.79f, 5.60f, 5.5f, 3.9f, 5.2f, 5.0f};
static const int swa_take[SWA_E]    = {0, 0, 1, 0, 1, 0, 1, 1, 0, 1, 1};

static guardian_swa_config swa_cfg(void)
{
    guardian_swa_config c = guardian_swa_config_default();
    c.start_epoch = 2; c.ce_lo = 4.0f; c.ce_hi = 6.0f; c.min_rel_gain = 0.01f;
    return c;
}

/* the same offers on the host and on the device (through the _cuda entry point, or
   through the plain one with device pointers): avg bits, taken and the state after
   every offer, and the saved state bytes at the end */
static void run_swa(size_t n, int plain)
{
    guardian_swa_config c = swa_cfg();
    guardian_swa sc, sg;
    std::vector<float> avg(n, 1234.0f); /* garbage the first snapshot must overwrite */
    float *d_avg = dput(std::vector<float>(n, NAN)), *d_w = NULL;
    CHECK_INT_EQ(guardian_swa_init(&sc, &c), GUARDIAN_OK);
    CHECK_INT_EQ(guardian_swa_init(&sg, &c), GUARDIAN_OK);
    for (int e = 0; e < SWA_E && !tt__case_failed; e++) {
        std::vector<float> w = weights(n, 1.0 + 0.25 * e);
        int tc = -1, tg = -1, rc;
        d_w = dput(w);
        CHECK_INT_EQ(guardian_swa_offer(&sc, avg.data(), w.data(), (int64_t)n, e, swa_entry[e], swa_ce[e], &tc),
                     GUARDIAN_OK);
        rc = plain ? guardian_swa_offer(&sg, d_avg, d_w, (int64_t)n, e, swa_entry[e], swa_ce[e], &tg)
                   : guardian_swa_offer_cuda(&sg, d_avg, d_w, (int64_t)n, e, swa_entry[e], swa_ce[e], &tg, NULL);
        CHECK_INT_EQ(rc, GUARDIAN_OK);
        CHECK_INT_EQ(tc, swa_take[e]);
        CHECK_INT_EQ(tg, tc);
        CHECK_INT_EQ(sg.n_averaged, sc.n_averaged);
        CHECK_INT_EQ(sg.n_offered, sc.n_offered);
        if (sc.n_averaged > 0) { /* before the first snapshot avg is the caller's garbage */
            std::vector<float> g = dget(d_avg, n);
            CHECK_BITS(g, avg);
        }
        if (tt__case_failed) fprintf(stderr, "    n %zu epoch %d plain %d\n", n, e, plain);
        dfree(d_w);
    }
    CHECK_INT_EQ(sc.n_averaged, 6);
    CHECK_INT_EQ(sc.n_offered, SWA_E);
    {
        unsigned char bc[256], bg[256];
        size_t nc = 0, ng = 0;
        CHECK_INT_EQ(guardian_swa_save(&sc, bc, sizeof bc, &nc), GUARDIAN_OK);
        CHECK_INT_EQ(guardian_swa_save(&sg, bg, sizeof bg, &ng), GUARDIAN_OK);
        CHECK(nc == ng && memcmp(bc, bg, nc) == 0);
    }
    dfree(d_avg);
}

static void test_swa_parity(void)
{
    static const size_t ns[] = {1, 1000, 65537};
    NEED_GPU();
    tt_seed(73);
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) run_swa(ns[i], 0);
}

/* avg == w on the first snapshot (a copy onto itself) and then a refused offer on a
   stream: nothing changes */
static void test_swa_alias_stream(void)
{
    const size_t n = 517;
    guardian_swa_config c = swa_cfg();
    guardian_swa s;
    cudaStream_t st = NULL;
    int taken = -1;
    NEED_GPU();
    tt_seed(74);
    CHECK(cudaStreamCreate(&st) == cudaSuccess);
    std::vector<float> w = weights(n, 1.0);
    float *d_w = dput(w);
    CHECK_INT_EQ(guardian_swa_init(&s, &c), GUARDIAN_OK);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, d_w, d_w, (int64_t)n, 2, 6.5f, 5.9f, &taken, (guardian_stream)st),
                 GUARDIAN_OK);
    CHECK_INT_EQ(taken, 1);
    CHECK_INT_EQ(s.n_averaged, 1);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, d_w, d_w, (int64_t)n, 3, 6.4f, 6.3f, &taken, (guardian_stream)st),
                 GUARDIAN_OK);
    CHECK_INT_EQ(taken, 0);
    CHECK_INT_EQ(s.n_averaged, 1);
    CHECK_INT_EQ(s.n_offered, 2);
    cudaStreamSynchronize(st);
    std::vector<float> g = dget(d_w, n);
    CHECK_BITS(g, w);
    dfree(d_w);
    cudaStreamDestroy(st);
}

/* the plain calls with device pointers: the _cuda results, hence the CPU's bits */
static void test_plain_routing(void)
{
    const size_t n = 2053;
    NEED_GPU();
    tt_seed(75);
    {
        std::vector<float> e = weights(n, 1.0), w = weights(n, 2.0);
        float *d_e1 = dput(e), *d_e2 = dput(e), *d_w = dput(w);
        CHECK_INT_EQ(guardian_ema_update(d_e1, d_w, (int64_t)n, 0.999f), GUARDIAN_OK);
        CHECK_INT_EQ(guardian_ema_update_cuda(d_e2, d_w, (int64_t)n, 0.999f, NULL), GUARDIAN_OK);
        CHECK_INT_EQ(guardian_ema_update(e.data(), w.data(), (int64_t)n, 0.999f), GUARDIAN_OK);
        std::vector<float> g1 = dget(d_e1, n), g2 = dget(d_e2, n);
        CHECK_BITS(g1, g2);
        CHECK_BITS(g1, e);
        /* the plain call validates on the device path as on the host */
        CHECK_INT_EQ(guardian_ema_update(d_e1, d_w, (int64_t)n, 1.5f), GUARDIAN_EINVAL);
        CHECK_INT_EQ(guardian_ema_update(d_e1, d_w, 0, 0.5f), GUARDIAN_EINVAL);
        std::vector<float> g3 = dget(d_e1, n);
        CHECK_BITS(g3, g1);
        dfree(d_e1); dfree(d_e2); dfree(d_w);
    }
    run_swa(1000, 1);
    run_swa(65537, 1);
}

/* one device and one host buffer: refused by the plain and the _cuda calls, with a
   message, nothing written on either side and the SWA state unchanged */
static void test_mixed_pointers(void)
{
    const size_t n = 300;
    guardian_swa_config c = swa_cfg();
    guardian_swa s;
    int taken = 7;
    NEED_GPU();
    tt_seed(76);
    std::vector<float> he = weights(n, 1.0), hw = weights(n, 1.0), he0 = he, hw0 = hw;
    float *d_e = dput(he), *d_w = dput(hw);
    guardian_set_log(on_log, NULL);
    g_nmsg = 0;
    CHECK_INT_EQ(guardian_ema_update(d_e, hw.data(), (int64_t)n, 0.5f), GUARDIAN_EINVAL);
    CHECK_INT_EQ(g_nmsg, 1);
    CHECK(g_msg.find("guardian_ema_update") != std::string::npos && g_msg.find("device") != std::string::npos);
    CHECK_INT_EQ(guardian_ema_update(he.data(), d_w, (int64_t)n, 0.5f), GUARDIAN_EINVAL);
    CHECK_INT_EQ(g_nmsg, 2);
    CHECK_INT_EQ(guardian_ema_update_cuda(d_e, hw.data(), (int64_t)n, 0.5f, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(he.data(), d_w, (int64_t)n, 0.5f, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(he.data(), hw.data(), (int64_t)n, 0.5f, NULL), GUARDIAN_EINVAL);
    CHECK(g_msg.find("device pointers") != std::string::npos);
    CHECK_INT_EQ(g_nmsg, 5);
    CHECK_INT_EQ(guardian_swa_init(&s, &c), GUARDIAN_OK);
    /* an offer that would be taken */
    CHECK_INT_EQ(guardian_swa_offer(&s, d_e, hw.data(), (int64_t)n, 2, 6.5f, 5.9f, &taken), GUARDIAN_EINVAL);
    CHECK(g_msg.find("guardian_swa_offer") != std::string::npos);
    CHECK_INT_EQ(guardian_swa_offer(&s, he.data(), d_w, (int64_t)n, 2, 6.5f, 5.9f, &taken), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, d_e, hw.data(), (int64_t)n, 2, 6.5f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, he.data(), d_w, (int64_t)n, 2, 6.5f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    /* host buffers to the _cuda call, also for an offer it refuses */
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, he.data(), hw.data(), (int64_t)n, 2, 6.5f, 5.9f, &taken, NULL),
                 GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, he.data(), hw.data(), (int64_t)n, 0, 6.5f, 5.9f, &taken, NULL),
                 GUARDIAN_EINVAL);
    CHECK_INT_EQ(g_nmsg, 11);
    CHECK_INT_EQ(s.n_offered, 0);
    CHECK_INT_EQ(s.n_averaged, 0);
    CHECK_INT_EQ(taken, 7);
    CHECK_BITS(he, he0);
    CHECK_BITS(hw, hw0);
    std::vector<float> ge = dget(d_e, n), gw = dget(d_w, n);
    CHECK_BITS(ge, he0);
    CHECK_BITS(gw, hw0);
    guardian_set_log(NULL, NULL);
    dfree(d_e); dfree(d_w);
}

/* refused before any pointer is looked at: runs without a device too */
static void test_bad_input(void)
{
    float x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8};
    guardian_swa_config c = swa_cfg();
    guardian_swa s;
    int taken = 7;
    CHECK_INT_EQ(guardian_ema_update_cuda(NULL, y, 4, 0.5f, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(x, NULL, 4, 0.5f, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(x, y, 0, 0.5f, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(x, y, -3, 0.5f, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(x, y, 4, -0.01f, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(x, y, 4, 1.01f, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(x, y, 4, NAN, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_ema_update_cuda(x, y, 4, INFINITY, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_init(&s, &c), GUARDIAN_OK);
    CHECK_INT_EQ(guardian_swa_offer_cuda(NULL, x, y, 4, 2, 6.5f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, NULL, y, 4, 2, 6.5f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, x, NULL, 4, 2, 6.5f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, x, y, 0, 2, 6.5f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, x, y, 4, -1, 6.5f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, x, y, 4, 2, 0.0f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, x, y, 4, 2, 6.5f, NAN, &taken, NULL), GUARDIAN_EINVAL);
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, x, y, 4, 2, INFINITY, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    s.cfg.ce_lo = 7.0f; /* an inverted zone in the state */
    CHECK_INT_EQ(guardian_swa_offer_cuda(&s, x, y, 4, 2, 6.5f, 5.9f, &taken, NULL), GUARDIAN_EINVAL);
    s.cfg.ce_lo = 4.0f;
    CHECK_INT_EQ(s.n_offered, 0);
    CHECK_INT_EQ(taken, 7);
    CHECK(x[0] == 1 && x[3] == 4 && y[0] == 5 && y[3] == 8);
    CHECK(strcmp(guardian_strerror(GUARDIAN_ENOCUDA), guardian_strerror(GUARDIAN_EINVAL)) != 0);
    CHECK(strcmp(guardian_strerror(GUARDIAN_ECUDA), "unknown error") != 0);
    if (g_gpu) {
        /* bad scalars with device buffers: refused, the buffers untouched */
        std::vector<float> h(4, 1.5f);
        float *d_a = dput(h), *d_b = dput(std::vector<float>(4, 2.5f));
        CHECK_INT_EQ(guardian_ema_update_cuda(d_a, d_b, 4, 2.0f, NULL), GUARDIAN_EINVAL);
        CHECK_INT_EQ(guardian_swa_offer_cuda(&s, d_a, d_b, 4, 2, 6.5f, -NAN, &taken, NULL), GUARDIAN_EINVAL);
        CHECK_INT_EQ(guardian_swa_offer(&s, d_a, d_b, 4, 2, 0.0f, 5.9f, &taken), GUARDIAN_EINVAL);
        std::vector<float> g = dget(d_a, 4);
        CHECK_BITS(g, h);
        CHECK_INT_EQ(s.n_offered, 0);
        dfree(d_a); dfree(d_b);
    }
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    g_gpu = guardian_cuda_available();
    if (!g_gpu) printf("SKIP: no GPU\n");
    else parity_print_device();
    TEST_RUN(test_bad_input);
    TEST_RUN(test_ema_parity);
    TEST_RUN(test_ema_grid_stride);
    TEST_RUN(test_ema_stream_alias);
    TEST_RUN(test_swa_parity);
    TEST_RUN(test_swa_alias_stream);
    TEST_RUN(test_plain_routing);
    TEST_RUN(test_mixed_pointers);
    return TEST_END();
}
