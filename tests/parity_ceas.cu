/* parity_ceas.cu - ceas.h's CUDA observables and reductions (cuda/ceas.cuh) against its
   CPU path. Built by g++/clang++ against the CPU simulation (tests/cuda_sim.h; `make
   test`) and by nvcc for the GPU (device cases skipped without one).
   Tolerances (the top of cuda/ceas.cuh): rtol 1e-5 with an absolute floor of 1e-5 x the
   quantity's scale (H: ln N; var_s, sigma_qk, mean_s: the scale of s).
   Sizes: B 2, H 3, T in {1, 37, 200} causal and not (one block per row: 1.4K rows at most
   in the simulation), plus a NaN row, pooling of device rows, gate scores, bad input. */
#include "tests/cuda_test.h"
#define CEAS_IMPLEMENTATION
#include "ceas.h"
#include "tests/attnkit_test.h"
#include "tests/ref64.h"

static int g_gpu = 0;

#define NEED_GPU()                                                             \
    do {                                                                       \
        if (!g_gpu) TEST_SKIP("no GPU");                                       \
    } while (0)

/* logits (B,H,T,T) = beta_h * s, s with a per-row offset (so mean_s matters) and
   head-dependent spread */
static std::vector<float> make_logits(int B, int H, int T, const std::vector<float> &beta)
{
    std::vector<float> l((size_t)B * H * T * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                double off = 2.0 * tt_normal(), sd = 0.5 + 1.5 * h;
                for (int j = 0; j < T; j++)
                    l[(((size_t)b * H + h) * T + i) * T + j] = (float)(beta[h] * (off + sd * tt_normal()));
            }
    return l;
}

static void check_obs(const ceas_obs *g, const ceas_obs *c, long n, double sscale)
{
    for (long r = 0; r < n; r++) {
        double hs = c[r].log_n > 1.0 ? c[r].log_n : 1.0;
        CHECK_CLOSE(g[r].H, c[r].H, 1e-5, 1e-5 * hs);
        CHECK_CLOSE(g[r].n_eff, c[r].n_eff, 1e-5, 1e-5 * exp(hs));
        CHECK_CLOSE(g[r].var_s, c[r].var_s, 1e-5, 1e-5 * sscale * sscale);
        CHECK_CLOSE(g[r].sigma_qk, c[r].sigma_qk, 1e-5, 1e-5 * sscale);
        CHECK_CLOSE(g[r].mean_s, c[r].mean_s, 1e-5, 1e-5 * sscale);
        CHECK_CLOSE(g[r].log_n, c[r].log_n, 1e-6, 0.0);
        CHECK_INT_EQ(g[r].n, c[r].n);
        if (tt__case_failed) return; /* one bad row is enough output */
    }
}

static void run_obs(int B, int H, int T, int causal, int with_beta)
{
    std::vector<float> beta(H);
    for (int h = 0; h < H; h++) beta[h] = (float)(0.125 * (1.0 + 0.5 * h));
    std::vector<float> lg = make_logits(B, H, T, beta);
    const size_t nr = (size_t)B * H * T;
    std::vector<ceas_obs> rc(nr), hc(H), hg(H);
    float *d_l = dput(lg);
    ceas_obs *d_rows = dput(std::vector<ceas_obs>(nr));
    const float *bp = with_beta ? beta.data() : NULL;
    if (!with_beta) /* logits are then read as s directly */
        for (int h = 0; h < H; h++) beta[h] = 1.0f;
    CHECK_INT_EQ(ceas_attention_observables(lg.data(), B, H, T, causal, bp, rc.data(), hc.data(), NULL), CEAS_OK);
    CHECK_INT_EQ(ceas_attention_observables_cuda(d_l, B, H, T, causal, bp, d_rows, hg.data(), NULL, NULL), CEAS_OK);
    std::vector<ceas_obs> rg = dget(d_rows, nr);
    check_obs(rg.data(), rc.data(), (long)nr, with_beta ? 4.0 : 0.5);
    check_obs(hg.data(), hc.data(), (long)H, with_beta ? 4.0 : 0.5);
    /* heads only (rows in the workspace) */
    std::vector<ceas_obs> hg2(H);
    CHECK_INT_EQ(ceas_attention_observables_cuda(d_l, B, H, T, causal, bp, NULL, hg2.data(), NULL, NULL), CEAS_OK);
    CHECK(memcmp(hg2.data(), hg.data(), sizeof(ceas_obs) * (size_t)H) == 0);
    /* pooling device rows: head 0 of batch 0 */
    {
        ceas_obs pc, pg;
        CHECK_INT_EQ(ceas_pool_observables(&pc, rc.data(), T), CEAS_OK);
        CHECK_INT_EQ(ceas_pool_observables_cuda(&pg, d_rows, T, NULL), CEAS_OK);
        check_obs(&pg, &pc, 1, with_beta ? 4.0 : 0.5);
    }
    /* gate scores from the device rows */
    {
        std::vector<float> sc(nr);
        float *d_sc = dput(sc);
        CHECK_INT_EQ(ceas_gate_scores(sc.data(), rc.data(), bp, B, H, T), CEAS_OK);
        CHECK_INT_EQ(ceas_gate_scores_cuda(d_sc, d_rows, bp, B, H, T, NULL), CEAS_OK);
        std::vector<float> g = dget(d_sc, nr);
        CHECK_ALL_CLOSE(g.data(), sc.data(), (long)nr, 1e-4, 1e-5);
        /* the literal reading */
        CHECK_INT_EQ(ceas_gate_scores_mode(sc.data(), rc.data(), bp, B, H, T, CEAS_GATE_RAW), CEAS_OK);
        CHECK_INT_EQ(ceas_gate_scores_mode_cuda(d_sc, d_rows, bp, B, H, T, CEAS_GATE_RAW, NULL), CEAS_OK);
        g = dget(d_sc, nr);
        CHECK_ALL_CLOSE(g.data(), sc.data(), (long)nr, 1e-4, 1e-5);
        CHECK_INT_EQ(ceas_gate_scores_mode_cuda(d_sc, d_rows, bp, B, H, T, 9, NULL), CEAS_EINVAL);
        cudaFree(d_sc);
    }
    cudaFree(d_l);
    cudaFree(d_rows);
}

static void test_obs_small(void)
{
    NEED_GPU();
    tt_seed(51);
    run_obs(2, 3, 1, 0, 1);
    run_obs(2, 3, 1, 1, 0);
    run_obs(2, 3, 37, 0, 1);
    run_obs(2, 3, 37, 1, 1);
    run_obs(1, 2, 37, 1, 0);
}

static void test_obs_200(void)
{
    NEED_GPU();
    tt_seed(52);
    run_obs(2, 3, 200, 1, 1);
    run_obs(1, 2, 200, 0, 1);
}

static void test_nan_row(void)
{
    const int B = 1, H = 2, T = 9;
    NEED_GPU();
    tt_seed(53);
    std::vector<float> beta(H, 0.25f);
    std::vector<float> lg = make_logits(B, H, T, beta);
    lg[(size_t)(1 * T + 4) * T + 2] = NAN; /* head 1, row 4 */
    std::vector<ceas_obs> rc((size_t)B * H * T), hc(H), hg(H);
    float *d_l = dput(lg);
    ceas_obs *d_rows = dput(std::vector<ceas_obs>(rc.size()));
    CHECK_INT_EQ(ceas_attention_observables(lg.data(), B, H, T, 1, beta.data(), rc.data(), hc.data(), NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables_cuda(d_l, B, H, T, 1, beta.data(), d_rows, hg.data(), NULL, NULL), CEAS_EINVAL);
    std::vector<ceas_obs> rg = dget(d_rows, rc.size());
    CHECK(rg[T + 4].H != rg[T + 4].H);      /* the bad row is NaN */
    CHECK(hg[1].H != hg[1].H);              /* so is its head */
    CHECK_CLOSE(hg[0].H, hc[0].H, 1e-5, 1e-5); /* the other head is fine */
    /* gate scores refuse the bad rows and write nothing */
    std::vector<float> sc(rc.size(), 3.0f);
    float *d_sc = dput(sc);
    CHECK_INT_EQ(ceas_gate_scores_cuda(d_sc, d_rows, beta.data(), B, H, T, NULL), CEAS_EINVAL);
    std::vector<float> g = dget(d_sc, sc.size());
    CHECK_ALL_CLOSE(g.data(), sc.data(), (long)sc.size(), 0.0, 0.0);
    cudaFree(d_l); cudaFree(d_rows); cudaFree(d_sc);
}

/* observables from per-row moments (tensor.h's tk_attention_forward_stats layout) on the
   device against the CPU's ceas_attention_observables_from_moments: rows and heads, a
   stride above 6, a row with no keys (its head NaN, CEAS_EINVAL), host moments refused */
static void test_from_moments(void)
{
    const int B = 2, H = 3, T = 23, S = 7;
    const size_t nr = (size_t)B * H * T;
    std::vector<float> mom(nr * S), beta(H);
    NEED_GPU();
    tt_seed(61);
    for (int h = 0; h < H; h++) beta[h] = (float)(0.2 + 0.1 * h);
    for (size_t r = 0; r < nr; r++) {
        float *m = &mom[r * S];
        double n = (double)(r % T) + 1.0, H_ = log(n) * (0.3 + 0.6 * tt_uniform());
        m[0] = (float)H_;
        m[1] = (float)tt_normal();
        m[2] = (float)(0.5 + tt_uniform());
        m[3] = (float)tt_normal();
        m[4] = (float)(1.0 + 2.0 * tt_uniform());
        m[5] = (float)n;
        m[6] = -7.0f;
    }
    std::vector<ceas_obs> rc(nr), hc(H), hg(H);
    float *d_m = dput(mom);
    ceas_obs *d_rows = dput(std::vector<ceas_obs>(nr));
    CHECK_INT_EQ(ceas_attention_observables_from_moments(mom.data(), B, H, T, S, beta.data(), rc.data(), hc.data(), NULL),
                 CEAS_OK);
    CHECK_INT_EQ(ceas_attention_observables_from_moments_cuda(d_m, B, H, T, S, beta.data(), d_rows, hg.data(), NULL, NULL),
                 CEAS_OK);
    std::vector<ceas_obs> rg = dget(d_rows, nr);
    check_obs(rg.data(), rc.data(), (long)nr, 10.0);
    check_obs(hg.data(), hc.data(), (long)H, 10.0);
    /* host moments: refused; a row with no keys: its head is NaN */
    CHECK_INT_EQ(ceas_attention_observables_from_moments_cuda(mom.data(), B, H, T, S, beta.data(), d_rows, hg.data(), NULL, NULL),
                 CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables_from_moments_cuda(d_m, B, H, T, 5, beta.data(), d_rows, hg.data(), NULL, NULL),
                 CEAS_EINVAL);
    mom[4 * S + 5] = 0.0f;
    cudaMemcpy(d_m, mom.data(), mom.size() * sizeof(float), cudaMemcpyHostToDevice);
    CHECK_INT_EQ(ceas_attention_observables_from_moments_cuda(d_m, B, H, T, S, beta.data(), NULL, hg.data(), NULL, NULL),
                 CEAS_EINVAL);
    CHECK(hg[0].H != hg[0].H);
    cudaFree(d_m);
    cudaFree(d_rows);
}

/* the plain calls route device inputs to the _cuda paths: the same bits */
static void test_plain_routing(void)
{
    const int B = 2, H = 2, T = 19;
    const size_t nr = (size_t)B * H * T;
    std::vector<float> beta(H, 0.25f);
    NEED_GPU();
    tt_seed(62);
    std::vector<float> lg = make_logits(B, H, T, beta);
    float *d_l = dput(lg), *d_s1 = dput(std::vector<float>(nr)), *d_s2 = dput(std::vector<float>(nr));
    ceas_obs *d_r1 = dput(std::vector<ceas_obs>(nr)), *d_r2 = dput(std::vector<ceas_obs>(nr));
    std::vector<ceas_obs> h1(H), h2(H);
    ceas_obs p1, p2;
    CHECK_INT_EQ(ceas_attention_observables(d_l, B, H, T, 1, beta.data(), d_r1, h1.data(), NULL), CEAS_OK);
    CHECK_INT_EQ(ceas_attention_observables_cuda(d_l, B, H, T, 1, beta.data(), d_r2, h2.data(), NULL, NULL), CEAS_OK);
    CHECK(memcmp(dget(d_r1, nr).data(), dget(d_r2, nr).data(), nr * sizeof(ceas_obs)) == 0);
    CHECK(memcmp(h1.data(), h2.data(), H * sizeof(ceas_obs)) == 0);
    CHECK_INT_EQ(ceas_pool_observables(&p1, d_r1, T), CEAS_OK);
    CHECK_INT_EQ(ceas_pool_observables_cuda(&p2, d_r1, T, NULL), CEAS_OK);
    CHECK(memcmp(&p1, &p2, sizeof p1) == 0);
    CHECK_INT_EQ(ceas_gate_scores(d_s1, d_r1, beta.data(), B, H, T), CEAS_OK);
    CHECK_INT_EQ(ceas_gate_scores_cuda(d_s2, d_r1, beta.data(), B, H, T, NULL), CEAS_OK);
    CHECK(memcmp(dget(d_s1, nr).data(), dget(d_s2, nr).data(), nr * sizeof(float)) == 0);
    {
        std::vector<float> mom(nr * 6);
        for (size_t r = 0; r < nr; r++) {
            mom[r * 6 + 0] = 1.0f; mom[r * 6 + 1] = 0.5f; mom[r * 6 + 2] = 0.7f;
            mom[r * 6 + 3] = -0.2f; mom[r * 6 + 4] = 1.5f; mom[r * 6 + 5] = (float)(r % T + 1);
        }
        float *d_m = dput(mom);
        CHECK_INT_EQ(ceas_attention_observables_from_moments(d_m, B, H, T, 6, beta.data(), d_r1, h1.data(), NULL), CEAS_OK);
        CHECK_INT_EQ(ceas_attention_observables_from_moments_cuda(d_m, B, H, T, 6, beta.data(), d_r2, h2.data(), NULL, NULL),
                     CEAS_OK);
        CHECK(memcmp(dget(d_r1, nr).data(), dget(d_r2, nr).data(), nr * sizeof(ceas_obs)) == 0);
        CHECK(memcmp(h1.data(), h2.data(), H * sizeof(ceas_obs)) == 0);
        cudaFree(d_m);
    }
    cudaFree(d_l); cudaFree(d_s1); cudaFree(d_s2); cudaFree(d_r1); cudaFree(d_r2);
}

static void test_bad_input(void)
{
    std::vector<float> hl(64, 0.0f), beta(2, 0.5f);
    std::vector<ceas_obs> heads(2);
    ceas_obs one;
    /* refused before any pointer is looked at: runs without a device too */
    CHECK_INT_EQ(ceas_attention_observables_cuda(NULL, 1, 2, 4, 1, NULL, NULL, heads.data(), NULL, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables_cuda(hl.data(), 1, 2, 0, 1, NULL, NULL, heads.data(), NULL, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables_cuda(hl.data(), 1, 2, 4, 1, NULL, NULL, NULL, NULL, NULL), CEAS_EINVAL);
    beta[1] = -1.0f;
    CHECK_INT_EQ(ceas_attention_observables_cuda(hl.data(), 1, 2, 4, 1, beta.data(), NULL, heads.data(), NULL, NULL), CEAS_EINVAL);
    beta[1] = NAN;
    CHECK_INT_EQ(ceas_gate_scores_cuda(hl.data(), heads.data(), beta.data(), 1, 2, 1, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_pool_observables_cuda(&one, heads.data(), 0, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_pool_observables_cuda(NULL, heads.data(), 2, NULL), CEAS_EINVAL);
    if (g_gpu) {
        /* host logits / rows: refused, nothing launched */
        beta[1] = 0.5f;
        CHECK_INT_EQ(ceas_attention_observables_cuda(hl.data(), 1, 2, 4, 1, beta.data(), NULL, heads.data(), NULL, NULL), CEAS_EINVAL);
        CHECK_INT_EQ(ceas_pool_observables_cuda(&one, heads.data(), 2, NULL), CEAS_EINVAL);
        float *d_l = dput(hl);
        CHECK_INT_EQ(ceas_attention_observables_cuda(d_l, 1, 2, 4, 1, beta.data(), heads.data(), NULL, NULL, NULL), CEAS_EINVAL);
        cudaFree(d_l);
    }
}

/* ------------------------------------------------------------ issue 38: float64 sweep */
/* ceas_attention_observables_cuda (one head) against tests/ref64.h's float64
   transcription in test_ceas.c's regimes (plain, beta at 1e-4 and 1e4, zero-variance
   logits, N = 1, sharp rows): 1e-4 relative to each observable's max-norm. */
static void test_sweep_float64(void)
{
    r64_report rep;
    int reg, k, i;
    NEED_GPU();
    memset(&rep, 0, sizeof rep);
    for (reg = 0; reg < R64_CEAS_NREGIMES; reg++) {
        r64_ceas_case c;
        static const char *nm[6] = {"CEAS H", "CEAS n_eff", "CEAS var_s", "CEAS sigma_qk", "CEAS mean_s", "CEAS log_n"};
        const double *ref[6];
        std::vector<ceas_obs> rows;
        ceas_obs head;
        r64_ceas_make(&c, reg);
        ref[0] = c.H; ref[1] = c.neff; ref[2] = c.var; ref[3] = c.sig; ref[4] = c.mean; ref[5] = c.logn;
        {
            std::vector<float> hl(c.logits, c.logits + (size_t)c.T * c.T);
            std::vector<ceas_obs> zr((size_t)c.T);
            float *dl = dput(hl);
            ceas_obs *dr = dput(zr);
            CHECK_INT_EQ(ceas_attention_observables_cuda(dl, 1, 1, c.T, c.causal, &c.beta, dr, &head, NULL, NULL),
                         CEAS_OK);
            rows = dget(dr, (size_t)c.T);
            dfree(dl);
            dfree(dr);
        }
        for (k = 0; k < 6; k++) {
            std::vector<float> f((size_t)c.T);
            double e;
            for (i = 0; i < c.T; i++)
                f[i] = k == 0 ? rows[i].H : k == 1 ? rows[i].n_eff : k == 2 ? rows[i].var_s
                     : k == 3 ? rows[i].sigma_qk : k == 4 ? rows[i].mean_s : rows[i].log_n;
            e = r64_relerr_f(f.data(), ref[k], c.T);
            r64_note(&rep, nm[k], c.name, e);
            if (!(e <= R64_TOL_FWD)) {
                fprintf(stderr, "  %s, %s: relative error %.3e\n", c.name, nm[k], e);
                CHECK(e <= R64_TOL_FWD);
            }
        }
        r64_ceas_free(&c);
    }
    r64_print(&rep, "CEAS device vs float64 (seed 004)");
    {   /* issue 37 rule 4: causal is a boolean on the device too */
        std::vector<float> hl(16, 0.5f);
        float *dl = dput(hl), beta = 1.0f;
        ceas_obs h1;
        CHECK_INT_EQ(ceas_attention_observables_cuda(dl, 1, 1, 4, 2, &beta, NULL, &h1, NULL, NULL), CEAS_EINVAL);
        CHECK_INT_EQ(ceas_attention_observables_cuda(dl, 1, 1, 4, -1, &beta, NULL, &h1, NULL, NULL), CEAS_EINVAL);
        dfree(dl);
    }
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    g_gpu = ceas_cuda_available();
    if (!g_gpu) printf("SKIP: no GPU\n");
    else parity_print_device();
    TEST_RUN(test_bad_input);
    TEST_RUN(test_obs_small);
    TEST_RUN(test_obs_200);
    TEST_RUN(test_nan_row);
    TEST_RUN(test_from_moments);
    TEST_RUN(test_plain_routing);
    TEST_RUN(test_sweep_float64);
    return TEST_END();
}
