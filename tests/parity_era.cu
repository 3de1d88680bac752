/* parity_era.cu - era.h's CUDA path (cuda/era.cuh) against its CPU path.
   Built by g++/clang++ against the CPU simulation (tests/cuda_sim.h; `make test`) and by
   nvcc for the GPU. Under nvcc without a usable GPU the device cases are skipped.
   Tolerances (the top of cuda/era.cuh): forward rtol 1e-5 / atol 1e-5; gradients rtol 1e-4,
   atol 1e-4 x the largest reference entry; z-score mean and std 1e-6 relative.
   Sizes (kept small for the simulation, ~20 s per compiler): memberships B 2, T 17;
   RPA forward T in {1, 17, 128} over several configs and T = 768 once (forward only);
   RPA backward T in {1, 17, 128}; ERA forward T in {1, 17, 128, 1000 (default R = nb = 32,
   once: ragged blocks)}, backward T in {1, 17, 128}; era_apply / era_reduce_grad B 2, H 3, T 17; the
   device cache T in {5, 17, 64} for ERA and RPA (1e-6 against the CPU cache).
   RPA at T = 1000 is not run here (its (T,T) passes cost ~1.7x the 768 case in the
   simulation); ERA's is cheap (a gather). */
#include "tests/cuda_test.h"
#define ERA_IMPLEMENTATION
#include "era.h"
#include "tests/attnkit_test.h"
#include "tests/ref64.h"

static int g_gpu = 0;

#define NEED_GPU()                                                             \
    do {                                                                       \
        if (!g_gpu) TEST_SKIP("no GPU");                                       \
    } while (0)

/* memberships with structure over t: softmax of a smooth drift plus noise, (B,T,R) */
static std::vector<float> make_mu(int B, int T, int R)
{
    std::vector<float> mu((size_t)B * T * R);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            double s = 0.0, l[64];
            for (int r = 0; r < R; r++) {
                double c = (r + 0.5) / R, x = T > 1 ? (double)t / (T - 1) : 0.0;
                l[r] = -8.0 * (x - c) * (x - c) + 0.7 * tt_normal();
                s += exp(l[r]);
            }
            for (int r = 0; r < R; r++) mu[((size_t)b * T + t) * R + r] = (float)(exp(l[r]) / s);
        }
    return mu;
}

/* ---------------------------------------------------------------- bad input */
static void test_bad_input(void)
{
    era_rpa_config rc = era_rpa_config_default(4);
    era_rpa_params rp = era_rpa_params_default();
    era_rpa_cuda_state st = era_rpa_cuda_state_init();
    era_era_config ec = era_era_config_default();
    float hc[32];
    era_era_init_centers(32, hc);
    era_era_params ep = era_era_params_default(hc);
    era_era_cuda_state es = era_era_cuda_state_init();
    std::vector<float> host_mu = make_mu(1, 8, 4), host_bias(64, 7.0f);
    float *d_mu = dput(host_mu), *d_bias = dput(host_bias);
    /* NULL, bad sizes, bad scalars: refused before any pointer check (host buffers here),
       so these run without a device too */
    float *hm = host_mu.data(), *hbias = host_bias.data();
    CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, NULL, 1, 8, hbias, &st, NULL, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, hm, 0, 8, hbias, &st, NULL, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, hm, 1, 0, hbias, &st, NULL, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, hm, 1, 70000, hbias, &st, NULL, NULL), ERA_ERANGE);
    rp.tau_att = NAN;
    CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, hm, 1, 8, hbias, &st, NULL, NULL), ERA_EINVAL);
    rp = era_rpa_params_default();
    rc.legacy = 1; /* no CUDA path for the legacy mixture */
    CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, hm, 1, 8, hbias, &st, NULL, NULL), ERA_EINVAL);
    rc.legacy = 0;
    rc.tau_align = 0.0f;
    CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, hm, 1, 8, hbias, &st, NULL, NULL), ERA_EINVAL);
    rc = era_rpa_config_default(4);
    CHECK_INT_EQ(era_rpa_rows_cuda(&st, 0, 1, hbias, NULL), ERA_EINVAL); /* state not valid */
    CHECK_INT_EQ(era_apply_cuda(NULL, hbias, 0, 1, 1, 8, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_apply_cuda(hbias, hbias, 0, 1, 0, 8, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_reduce_grad_cuda(hbias, NULL, 0, 1, 1, 8, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_era_forward_cuda(&ec, NULL, 8, hbias, &es, NULL, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_era_forward_cuda(&ec, &ep, 0, hbias, &es, NULL, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_era_forward_cuda(&ec, &ep, 70000, hbias, &es, NULL, NULL), ERA_ERANGE);
    if (g_gpu) {
        /* host pointers: ERA_EINVAL, nothing written */
        std::vector<float> hb(64, 7.0f);
        CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, host_mu.data(), 1, 8, d_bias, &st, NULL, NULL), ERA_EINVAL);
        CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, d_mu, 1, 8, hb.data(), &st, NULL, NULL), ERA_EINVAL);
        CHECK_INT_EQ(era_era_forward_cuda(&ec, &ep, 8, d_bias, &es, NULL, NULL), ERA_EINVAL); /* host centres */
        CHECK_INT_EQ(era_apply_cuda(hb.data(), d_bias, 0, 1, 1, 8, NULL), ERA_EINVAL);
        CHECK_INT_EQ(era_reduce_grad_cuda(d_bias, hb.data(), 0, 1, 1, 8, NULL), ERA_EINVAL);
        std::vector<float> got = dget(d_bias, 64);
        CHECK_ALL_CLOSE(got.data(), host_bias.data(), 64L, 0.0, 0.0);
        for (int i = 0; i < 64; i++) CHECK(hb[i] == 7.0f);
        /* backward with a state that does not match */
        CHECK_INT_EQ(era_rpa_forward_cuda(&rc, &rp, d_mu, 1, 8, d_bias, &st, NULL, NULL), ERA_OK);
        era_rpa_grads g;
        memset(&g, 0, sizeof g);
        era_rpa_config rc2 = era_rpa_config_default(3);
        CHECK_INT_EQ(era_rpa_backward_cuda(&rc2, &rp, &st, d_bias, NULL, &g, NULL, NULL), ERA_ESTATE);
        CHECK_INT_EQ(era_rpa_backward_cuda(&rc, &rp, &st, hb.data(), NULL, &g, NULL, NULL), ERA_EINVAL);
        CHECK_INT_EQ(era_rpa_rows_cuda(&st, 7, 2, d_bias, NULL), ERA_EINVAL);
    }
    era_rpa_cuda_state_free(&st);
    era_era_cuda_state_free(&es);
    dfree(d_mu);
    dfree(d_bias);
}

/* ---------------------------------------------------------------- memberships */
static void test_membership(void)
{
    const int B = 2, T = 17, D = 12, P = 6, R = 4;
    NEED_GPU();
    tt_seed(11);
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    std::vector<float> h = randn((size_t)B * T * D, 1.0), W = randn((size_t)P * D, 0.3), b = randn(P, 0.2);
    std::vector<float> cen = randn((size_t)R * P, 0.6), ls = randn(R, 0.3);
    ls[2] = 5.0f; /* clamped scale: no log_sigma gradient for regime 2 */
    std::vector<float> mu((size_t)B * T * R), z((size_t)B * T * P);
    float *d_h = dput(h), *d_W = dput(W), *d_b = dput(b), *d_c = dput(cen), *d_ls = dput(ls);
    float *d_mu = dput(mu), *d_z = dput(z);
    era_mu_stats sc, sg;
    p.D = D; p.P = P; p.W = W.data(); p.b = b.data(); p.centers = cen.data(); p.log_sigma = ls.data();
    CHECK_INT_EQ(era_membership_forward(&cfg, &p, mu.data(), z.data(), &sc, h.data(), B, T), ERA_OK);
    era_rpa_params dp = p;
    dp.W = d_W; dp.b = d_b; dp.centers = d_c; dp.log_sigma = d_ls;
    CHECK_INT_EQ(era_membership_forward_cuda(&cfg, &dp, d_mu, d_z, &sg, d_h, B, T, NULL), ERA_OK);
    std::vector<float> g = dget(d_z, z.size());
    CHECK_ALL_CLOSE(g.data(), z.data(), (long)z.size(), 1e-5, 1e-5);
    g = dget(d_mu, mu.size());
    CHECK_ALL_CLOSE(g.data(), mu.data(), (long)mu.size(), 1e-5, 1e-6);
    CHECK_CLOSE(sg.entropy, sc.entropy, 1e-5, 1e-6);
    CHECK_CLOSE(sg.sat_frac, sc.sat_frac, 0.0, 1e-7);
    CHECK_INT_EQ(sg.nan_rows, sc.nan_rows);
    {   /* the statistics' partials come from the cached scratch: a second call allocates
           nothing and gives the same statistics */
        era_mu_stats s2;
#ifdef ATTNKIT_CUDA_SIM
        ak_sim_counts_reset();
#endif
        CHECK_INT_EQ(era_membership_forward_cuda(&cfg, &dp, d_mu, d_z, &s2, d_h, B, T, NULL), ERA_OK);
#ifdef ATTNKIT_CUDA_SIM
        CHECK(ak_sim_counts_get().allocs == 0);
#endif
        CHECK(s2.entropy == sg.entropy && s2.sat_frac == sg.sat_frac && s2.nan_rows == sg.nan_rows);
    }
    {   /* the statistics as device sums (era_membership_forward_sums_cuda): added on the
           stream, no wait, no allocation; /(B T) the same bits as the device's stats; twice
           accumulates; host sums or h refused */
        std::vector<double> s0 = {0.0, 0.0, 0.0};
        double *d_s = dput(s0), hs0[3] = {0, 0, 0};
#ifdef ATTNKIT_CUDA_SIM
        ak_sim_counts_reset();
#endif
        CHECK_INT_EQ(era_membership_forward_sums_cuda(&cfg, &dp, d_mu, d_z, d_s, d_h, B, T, NULL), ERA_OK);
#ifdef ATTNKIT_CUDA_SIM
        CHECK(ak_sim_counts_get().allocs == 0);
        CHECK(ak_sim_counts_get().syncs == 0);
        CHECK(ak_sim_counts_get().d2h == 0);
#endif
        std::vector<double> hs = dget(d_s, 3);
        CHECK((float)(hs[0] / (double)(B * T)) == sg.entropy);
        CHECK((float)(hs[1] / (double)(B * T)) == sg.sat_frac);
        CHECK(hs[2] == (double)sg.nan_rows);
        CHECK_INT_EQ(era_membership_forward_sums_cuda(&cfg, &dp, d_mu, d_z, d_s, d_h, B, T, NULL), ERA_OK);
        std::vector<double> h2 = dget(d_s, 3);
        CHECK(h2[0] == hs[0] + hs[0] && h2[1] == hs[1] + hs[1]);
        CHECK_INT_EQ(era_membership_forward_sums_cuda(&cfg, &dp, d_mu, d_z, hs0, d_h, B, T, NULL), ERA_EINVAL);
        CHECK_INT_EQ(era_membership_forward_sums_cuda(&cfg, &dp, d_mu, d_z, NULL, d_h, B, T, NULL), ERA_EINVAL);
        CHECK_INT_EQ(era_membership_forward_sums_cuda(&cfg, &dp, d_mu, d_z, d_s, h.data(), B, T, NULL), ERA_EINVAL);
        CHECK(hs0[0] == 0.0 && hs0[1] == 0.0 && hs0[2] == 0.0);
        dfree(d_s);
    }
    /* backward, accumulating into non-zero buffers */
    std::vector<float> dmu = randn(mu.size(), 1.0), dh = randn(h.size(), 1.0), dW = randn(W.size(), 1.0);
    std::vector<float> db = randn(P, 1.0), dc = randn(cen.size(), 1.0), dls = randn(R, 1.0);
    float *d_dmu = dput(dmu), *d_dh = dput(dh), *d_dW = dput(dW), *d_db = dput(db), *d_dc = dput(dc), *d_dls = dput(dls);
    era_rpa_grads gc, gg;
    memset(&gc, 0, sizeof gc);
    gc.dW = dW.data(); gc.db = db.data(); gc.dcenters = dc.data(); gc.dlog_sigma = dls.data();
    memset(&gg, 0, sizeof gg);
    gg.dW = d_dW; gg.db = d_db; gg.dcenters = d_dc; gg.dlog_sigma = d_dls;
    CHECK_INT_EQ(era_membership_backward(&cfg, &p, dh.data(), &gc, dmu.data(), 0.3f, h.data(), z.data(), mu.data(), B, T, NULL), ERA_OK);
    CHECK_INT_EQ(era_membership_backward_cuda(&cfg, &dp, d_dh, &gg, d_dmu, 0.3f, d_h, d_z, d_mu, B, T, NULL, NULL), ERA_OK);
    g = dget(d_dh, dh.size());
    CHECK_ALL_CLOSE(g.data(), dh.data(), (long)dh.size(), 1e-4, 1e-4 * maxabs(dh));
    g = dget(d_dW, dW.size());
    CHECK_ALL_CLOSE(g.data(), dW.data(), (long)dW.size(), 1e-4, 1e-4 * maxabs(dW));
    g = dget(d_db, db.size());
    CHECK_ALL_CLOSE(g.data(), db.data(), (long)db.size(), 1e-4, 1e-4 * maxabs(db));
    g = dget(d_dc, dc.size());
    CHECK_ALL_CLOSE(g.data(), dc.data(), (long)dc.size(), 1e-4, 1e-4 * maxabs(dc));
    g = dget(d_dls, dls.size());
    CHECK_ALL_CLOSE(g.data(), dls.data(), (long)dls.size(), 1e-4, 1e-4 * maxabs(dls));
    /* host h: refused */
    CHECK_INT_EQ(era_membership_forward_cuda(&cfg, &dp, d_mu, d_z, NULL, h.data(), B, T, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_membership_forward_cuda(&cfg, &p, d_mu, d_z, NULL, d_h, B, T, NULL), ERA_EINVAL);
    dfree(d_h); dfree(d_W); dfree(d_b); dfree(d_c); dfree(d_ls); dfree(d_mu); dfree(d_z);
    dfree(d_dmu); dfree(d_dh); dfree(d_dW); dfree(d_db); dfree(d_dc); dfree(d_dls);
}

/* the projection's 32 x 32 tiles (D, P past one tile, ragged) and the dlog_sigma shares,
   gradients from zero so the tolerance is on what the call added */
static void test_membership_tiles(void)
{
    const int B = 1, T = 37, D = 70, P = 45, R = 3;
    NEED_GPU();
    tt_seed(12);
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    std::vector<float> h = randn((size_t)B * T * D, 1.0), W = randn((size_t)P * D, 0.1), b = randn(P, 0.2);
    std::vector<float> cen = randn((size_t)R * P, 0.3), ls = randn(R, 0.2);
    std::vector<float> mu((size_t)B * T * R), z((size_t)B * T * P), dmu = randn(mu.size(), 1.0);
    std::vector<float> dc(cen.size(), 0.0f), dls((size_t)R, 0.0f), dW(W.size(), 0.0f), db((size_t)P, 0.0f);
    float *d_h = dput(h), *d_W = dput(W), *d_b = dput(b), *d_c = dput(cen), *d_ls = dput(ls);
    float *d_mu = dput(mu), *d_z = dput(z), *d_dmu = dput(dmu), *d_dc = dput(dc), *d_dls = dput(dls);
    float *d_dW = dput(dW), *d_db = dput(db);
    p.D = D; p.P = P; p.W = W.data(); p.b = b.data(); p.centers = cen.data(); p.log_sigma = ls.data();
    CHECK_INT_EQ(era_membership_forward(&cfg, &p, mu.data(), z.data(), NULL, h.data(), B, T), ERA_OK);
    era_rpa_params dp = p;
    dp.W = d_W; dp.b = d_b; dp.centers = d_c; dp.log_sigma = d_ls;
    CHECK_INT_EQ(era_membership_forward_cuda(&cfg, &dp, d_mu, d_z, NULL, d_h, B, T, NULL), ERA_OK);
    std::vector<float> g = dget(d_z, z.size());
    CHECK_ALL_CLOSE(g.data(), z.data(), (long)z.size(), 1e-5, 1e-5);
    g = dget(d_mu, mu.size());
    CHECK_ALL_CLOSE(g.data(), mu.data(), (long)mu.size(), 1e-5, 1e-6);
    era_rpa_grads gc, gg;
    memset(&gc, 0, sizeof gc);
    gc.dcenters = dc.data(); gc.dlog_sigma = dls.data(); gc.dW = dW.data(); gc.db = db.data();
    memset(&gg, 0, sizeof gg);
    gg.dcenters = d_dc; gg.dlog_sigma = d_dls; gg.dW = d_dW; gg.db = d_db;
    CHECK_INT_EQ(era_membership_backward(&cfg, &p, NULL, &gc, dmu.data(), 0.0f, h.data(), z.data(), mu.data(), B, T, NULL), ERA_OK);
    CHECK_INT_EQ(era_membership_backward_cuda(&cfg, &dp, NULL, &gg, d_dmu, 0.0f, d_h, d_z, d_mu, B, T, NULL, NULL), ERA_OK);
    CHECK(maxabs(dls) > 0.0);
    g = dget(d_dc, dc.size());
    CHECK_ALL_CLOSE(g.data(), dc.data(), (long)dc.size(), 1e-4, 1e-4 * maxabs(dc));
    g = dget(d_dls, dls.size());
    CHECK_ALL_CLOSE(g.data(), dls.data(), (long)dls.size(), 1e-4, 1e-4 * maxabs(dls));
    CHECK(maxabs(dW) > 0.0 && maxabs(db) > 0.0);
    g = dget(d_dW, dW.size());
    CHECK_ALL_CLOSE(g.data(), dW.data(), (long)dW.size(), 1e-4, 1e-4 * maxabs(dW));
    g = dget(d_db, db.size());
    CHECK_ALL_CLOSE(g.data(), db.data(), (long)db.size(), 1e-4, 1e-4 * maxabs(db));
    /* db alone (one d tile) */
    std::vector<float> db1((size_t)P, 0.0f);
    float *d_db1 = dput(db1);
    memset(&gc, 0, sizeof gc);
    gc.db = db1.data();
    memset(&gg, 0, sizeof gg);
    gg.db = d_db1;
    CHECK_INT_EQ(era_membership_backward(&cfg, &p, NULL, &gc, dmu.data(), 0.0f, h.data(), z.data(), mu.data(), B, T, NULL), ERA_OK);
    CHECK_INT_EQ(era_membership_backward_cuda(&cfg, &dp, NULL, &gg, d_dmu, 0.0f, d_h, d_z, d_mu, B, T, NULL, NULL), ERA_OK);
    g = dget(d_db1, db1.size());
    CHECK_ALL_CLOSE(g.data(), db1.data(), (long)db1.size(), 1e-4, 1e-4 * maxabs(db1));
    dfree(d_h); dfree(d_W); dfree(d_b); dfree(d_c); dfree(d_ls); dfree(d_mu); dfree(d_z);
    dfree(d_dmu); dfree(d_dc); dfree(d_dls); dfree(d_dW); dfree(d_db); dfree(d_db1);
}

/* ---------------------------------------------------------------- RPA prior */
struct rpa_case { int T, B, R, K, causal, detach, backward; float posmix, tau, scale; };

static void run_rpa(const rpa_case &c)
{
    era_rpa_config cfg = era_rpa_config_default(c.R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state cs = era_rpa_state_init();
    era_rpa_cuda_state gs = era_rpa_cuda_state_init();
    era_cuda_diag dg;
    const int T = c.T;
    cfg.K = c.K;
    cfg.zscore_causal = c.causal;
    cfg.detach = c.detach;
    cfg.posmix = c.posmix;
    cfg.scale = c.scale;
    p.tau_att = c.tau;
    p.pos_beta = 0.3f;
    std::vector<float> mu = make_mu(c.B, T, c.R), bias((size_t)T * T);
    mu[1] = NAN; /* a non-finite membership counts as 1/R (and gets no gradient) */
    float *d_mu = dput(mu), *d_bias = dput(bias);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu.data(), c.B, T, bias.data(), &cs, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_forward_cuda(&cfg, &p, d_mu, c.B, T, d_bias, &gs, NULL, NULL), ERA_OK);
    std::vector<float> g = dget(d_bias, bias.size());
    CHECK_ALL_CLOSE(g.data(), bias.data(), (long)bias.size(), 1e-5, 1e-5);
    CHECK_INT_EQ(era_rpa_cuda_diag(&gs, &dg, NULL), ERA_OK);
    CHECK_CLOSE(dg.mean, cs.mean, 1e-6, 1e-12);
    CHECK_CLOSE(dg.std, cs.std, 1e-6, 1e-12);
    CHECK_CLOSE(dg.std_post, cs.std_post, 1e-5, 1e-6);
    CHECK_CLOSE(dg.marginal_err, cs.marginal_err, 1e-5, 1e-6);
    CHECK_CLOSE(dg.clamp_frac, cs.clamp_frac, 0.0, 0.0);
    {
        /* factored rows: a band in the middle */
        int r0 = T / 3, nr = T - r0 > 5 ? 5 : T - r0;
        std::vector<float> rows((size_t)nr * T);
        float *d_rows = dput(rows);
        CHECK_INT_EQ(era_rpa_rows(&cs, r0, nr, rows.data()), ERA_OK);
        CHECK_INT_EQ(era_rpa_rows_cuda(&gs, r0, nr, d_rows, NULL), ERA_OK);
        g = dget(d_rows, rows.size());
        CHECK_ALL_CLOSE(g.data(), rows.data(), (long)rows.size(), 1e-5, 1e-5);
        dfree(d_rows);
    }
    if (c.backward) {
        std::vector<float> dbias = randn((size_t)T * T, 1.0), dmu = randn(mu.size(), 0.1);
        float *d_dbias = dput(dbias), *d_dmu = dput(dmu);
        era_rpa_grads gc, gg;
        memset(&gc, 0, sizeof gc);
        memset(&gg, 0, sizeof gg);
        gc.dtau_att = gg.dtau_att = 0.25f;
        CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &cs, dbias.data(), dmu.data(), &gc, NULL), ERA_OK);
        CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &p, &gs, d_dbias, d_dmu, &gg, NULL, NULL), ERA_OK);
        g = dget(d_dmu, dmu.size());
        CHECK_ALL_CLOSE(g.data(), dmu.data(), (long)dmu.size(), 1e-4, 1e-4 * maxabs(dmu));
        CHECK_CLOSE(gg.dtau_att, gc.dtau_att, 1e-4, 1e-6);
        CHECK_CLOSE(gg.dtau_att_abs, gc.dtau_att_abs, 1e-5, 1e-7); /* a sum of magnitudes: no cancellation */
        CHECK(gc.dtau_att_abs >= fabsf(gc.dtau_att - 0.25f));
        CHECK_CLOSE(gg.dpos_beta, gc.dpos_beta, 1e-4, 1e-6);
        dfree(d_dbias); dfree(d_dmu);
    }
    era_rpa_state_free(&cs);
    era_rpa_cuda_state_free(&gs);
    dfree(d_mu); dfree(d_bias);
}

static void test_rpa_small(void)
{
    /* T, B, R, K, causal, detach, backward, posmix, tau, scale */
    static const rpa_case cases[] = {
        {1, 2, 4, 4, 0, 1, 1, 0.0f, 1.0f, 1.0f},
        {1, 1, 3, 5, 1, 0, 1, 0.1f, 0.8f, 0.5f},
        {17, 3, 4, 4, 0, 1, 1, 0.0f, 1.0f, 1.0f},
        {17, 2, 4, 4, 1, 0, 1, 0.1f, 1.3f, 0.7f},
        {17, 2, 3, 6, 0, 0, 1, 0.25f, 2.0f, 1.0f},  /* tau clamped: no dtau */
        {17, 1, 5, 18, 1, 1, 1, 0.1f, 0.9f, 1.0f},  /* K > 16: two register chunks */
    };
    NEED_GPU();
    tt_seed(21);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_rpa(cases[i]);
}

static void test_rpa_128(void)
{
    static const rpa_case cases[] = {
        {128, 2, 4, 4, 0, 0, 1, 0.1f, 1.1f, 1.0f},
        {128, 2, 4, 8, 1, 1, 1, 0.0f, 0.7f, 0.3f},
    };
    NEED_GPU();
    tt_seed(22);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_rpa(cases[i]);
}

static void test_rpa_768(void)
{
    /* the seed 000 WikiText-2 setting: R = K = 4, posmix 0.10, forward only */
    rpa_case c = {768, 2, 4, 4, 0, 1, 0, 0.1f, 1.0f, 1.0f};
    NEED_GPU();
    tt_seed(23);
    run_rpa(c);
}

static void test_rpa_deterministic(void)
{
    const int T = 33, B = 2, R = 4;
    NEED_GPU();
    tt_seed(24);
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_cuda_state gs = era_rpa_cuda_state_init();
    cfg.posmix = 0.1f;
    std::vector<float> mu = make_mu(B, T, R), dbias = randn((size_t)T * T, 1.0);
    float *d_mu = dput(mu), *d_b1 = dput(std::vector<float>((size_t)T * T)), *d_b2 = dput(std::vector<float>((size_t)T * T));
    float *d_db = dput(dbias), *d_m1 = dput(std::vector<float>(mu.size())), *d_m2 = dput(std::vector<float>(mu.size()));
    era_rpa_grads g1, g2;
    memset(&g1, 0, sizeof g1);
    memset(&g2, 0, sizeof g2);
    CHECK_INT_EQ(era_rpa_forward_cuda(&cfg, &p, d_mu, B, T, d_b1, &gs, NULL, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &p, &gs, d_db, d_m1, &g1, NULL, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_forward_cuda(&cfg, &p, d_mu, B, T, d_b2, &gs, NULL, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &p, &gs, d_db, d_m2, &g2, NULL, NULL), ERA_OK);
    std::vector<float> a = dget(d_b1, (size_t)T * T), b = dget(d_b2, (size_t)T * T);
    CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    a = dget(d_m1, mu.size());
    b = dget(d_m2, mu.size());
    CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    CHECK(g1.dtau_att == g2.dtau_att && g1.dpos_beta == g2.dpos_beta);
    era_rpa_cuda_state_free(&gs);
    dfree(d_mu); dfree(d_b1); dfree(d_b2); dfree(d_db); dfree(d_m1); dfree(d_m2);
}

/* era_rpa_grads' *_to destinations on the device: the backward adds the scalar gradients
   to device floats on the stream (no read-back), the same bits as the host fields of the
   same call (both (float) of the same sums, added to the same start values); host fields
   untouched; a host destination is refused before anything runs */
static void test_rpa_scalars_to(void)
{
    const int T = 29, B = 2, R = 4;
    NEED_GPU();
    tt_seed(25);
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_cuda_state gs = era_rpa_cuda_state_init();
    cfg.posmix = 0.1f;
    std::vector<float> mu = make_mu(B, T, R), dbias = randn((size_t)T * T, 1.0);
    std::vector<float> start = {0.25f, 1.0f, -0.5f};
    float *d_mu = dput(mu), *d_b = dput(std::vector<float>((size_t)T * T)), *d_db = dput(dbias);
    float *d_sc = dput(start), host_to = 3.0f;
    era_rpa_grads gh, gt;
    memset(&gh, 0, sizeof gh);
    memset(&gt, 0, sizeof gt);
    gh.dtau_att = start[0]; gh.dtau_att_abs = start[1]; gh.dpos_beta = start[2];
    CHECK_INT_EQ(era_rpa_forward_cuda(&cfg, &p, d_mu, B, T, d_b, &gs, NULL, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &p, &gs, d_db, NULL, &gh, NULL, NULL), ERA_OK);
    gt.dtau_att_to = d_sc;
    gt.dtau_att_abs_to = d_sc + 1;
    gt.dpos_beta_to = d_sc + 2;
    CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &p, &gs, d_db, NULL, &gt, NULL, NULL), ERA_OK);
    std::vector<float> got = dget(d_sc, 3);
    CHECK(gh.dtau_att != start[0] && gh.dpos_beta != start[2]);
    CHECK(memcmp(&got[0], &gh.dtau_att, sizeof(float)) == 0);
    CHECK(memcmp(&got[1], &gh.dtau_att_abs, sizeof(float)) == 0);
    CHECK(memcmp(&got[2], &gh.dpos_beta, sizeof(float)) == 0);
    CHECK(gt.dtau_att == 0.0f && gt.dtau_att_abs == 0.0f && gt.dpos_beta == 0.0f);
    /* a host destination, or dtau_att_to alone: refused, nothing written */
    gt.dpos_beta_to = &host_to;
    CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &p, &gs, d_db, NULL, &gt, NULL, NULL), ERA_EINVAL);
    gt.dpos_beta_to = NULL;
    CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &p, &gs, d_db, NULL, &gt, NULL, NULL), ERA_EINVAL);
    std::vector<float> again = dget(d_sc, 3);
    CHECK(memcmp(again.data(), got.data(), 3 * sizeof(float)) == 0);
    CHECK(host_to == 3.0f);
    era_rpa_cuda_state_free(&gs);
    dfree(d_mu); dfree(d_b); dfree(d_db); dfree(d_sc);
}

/* era_era_grads' *_to and era_era_config.status on the device (issue 39 item 2): the
   backward adds d log sigma = (float)dsigma * sigma and dalpha to device floats on the
   stream, the same bits as the host fields of the same call give that way, without a
   wait; the host fields untouched; one destination alone or a host one refused. The
   forward with a status word checks the centres there, without a wait: 0 for finite
   centres (the same bias as the checked path), 1 OR-ed in for a NaN centre (the call
   itself returns ERA_OK); a host status refused. */
static void test_era_scalars_to(void)
{
    const int T = 23, R = 5, nb = 4;
    NEED_GPU();
    tt_seed(26);
    era_era_config cfg = era_era_config_default();
    cfg.R = R;
    cfg.nb = nb;
    std::vector<float> cen(R);
    era_era_init_centers(R, cen.data());
    era_era_params p = era_era_params_default(NULL);
    p.sigma = 0.13f;
    p.alpha = 0.8f;
    era_era_cuda_state gs = era_era_cuda_state_init();
    std::vector<float> dbias = randn((size_t)T * T, 1.0), start = {0.25f, -0.5f};
    float *d_cen = dput(cen), *d_b = dput(std::vector<float>((size_t)T * T)), *d_db = dput(dbias);
    float *d_b2 = dput(std::vector<float>((size_t)T * T)), *d_sc = dput(start), host_to = 3.0f;
    std::vector<int> z1 = {0};
    int *d_st = dput(z1), host_st = 0;
    era_era_grads gh, gt;
    p.centers = d_cen;
    memset(&gh, 0, sizeof gh);
    memset(&gt, 0, sizeof gt);
    CHECK_INT_EQ(era_era_forward_cuda(&cfg, &p, T, d_b, &gs, NULL, NULL), ERA_OK);
    CHECK_INT_EQ(era_era_backward_cuda(&cfg, &p, &gs, d_db, &gh, NULL, NULL), ERA_OK);
    gt.dlog_sigma_to = d_sc;
    gt.dalpha_to = d_sc + 1;
#ifdef ATTNKIT_CUDA_SIM
    ak_sim_counts_reset();
#endif
    CHECK_INT_EQ(era_era_backward_cuda(&cfg, &p, &gs, d_db, &gt, NULL, NULL), ERA_OK);
#ifdef ATTNKIT_CUDA_SIM
    CHECK(ak_sim_counts_get().syncs == 0 && ak_sim_counts_get().d2h == 0);
#endif
    std::vector<float> got = dget(d_sc, 2);
    {
        volatile float prod = gh.dsigma * p.sigma;
        const float want0 = start[0] + prod, want1 = start[1] + gh.dalpha;
        CHECK(gh.dsigma != 0.0f && gh.dalpha != 0.0f);
        CHECK(memcmp(&got[0], &want0, sizeof(float)) == 0);
        CHECK(memcmp(&got[1], &want1, sizeof(float)) == 0);
    }
    CHECK(gt.dsigma == 0.0f && gt.dalpha == 0.0f);
    gt.dalpha_to = &host_to; /* a host destination, or one alone: refused, nothing written */
    CHECK_INT_EQ(era_era_backward_cuda(&cfg, &p, &gs, d_db, &gt, NULL, NULL), ERA_EINVAL);
    gt.dalpha_to = NULL;
    CHECK_INT_EQ(era_era_backward_cuda(&cfg, &p, &gs, d_db, &gt, NULL, NULL), ERA_EINVAL);
    CHECK(memcmp(dget(d_sc, 2).data(), got.data(), 2 * sizeof(float)) == 0 && host_to == 3.0f);
    /* the forward's deferred check */
    cfg.status = d_st;
#ifdef ATTNKIT_CUDA_SIM
    ak_sim_counts_reset();
#endif
    CHECK_INT_EQ(era_era_forward_cuda(&cfg, &p, T, d_b2, &gs, NULL, NULL), ERA_OK);
#ifdef ATTNKIT_CUDA_SIM
    CHECK(ak_sim_counts_get().syncs == 0 && ak_sim_counts_get().d2h == 0);
#endif
    CHECK_INT_EQ(dget(d_st, 1)[0], 0);
    CHECK(memcmp(dget(d_b, (size_t)T * T).data(), dget(d_b2, (size_t)T * T).data(), sizeof(float) * T * T) == 0);
    cen[2] = NAN;
    dfree(d_cen);
    d_cen = dput(cen);
    p.centers = d_cen;
    CHECK_INT_EQ(era_era_forward_cuda(&cfg, &p, T, d_b2, &gs, NULL, NULL), ERA_OK);
    CHECK_INT_EQ(dget(d_st, 1)[0], 1);
    cfg.status = NULL; /* the checked path refuses the same centres */
    CHECK_INT_EQ(era_era_forward_cuda(&cfg, &p, T, d_b2, &gs, NULL, NULL), ERA_EINVAL);
    cfg.status = &host_st;
    cen[2] = 0.5f;
    dfree(d_cen);
    d_cen = dput(cen);
    p.centers = d_cen;
    CHECK_INT_EQ(era_era_forward_cuda(&cfg, &p, T, d_b2, &gs, NULL, NULL), ERA_EINVAL);
    CHECK_INT_EQ(host_st, 0);
    era_era_cuda_state_free(&gs);
    dfree(d_cen); dfree(d_b); dfree(d_b2); dfree(d_db); dfree(d_sc); dfree(d_st);
}

/* ---------------------------------------------------------------- ERA prior */
static void run_era(int T, int R, int nb, int causal, int backward, float alpha)
{
    era_era_config cfg = era_era_config_default();
    cfg.R = R;
    cfg.nb = nb;
    cfg.zscore_causal = causal;
    std::vector<float> cen(R);
    era_era_init_centers(R, cen.data());
    for (int r = 0; r < R; r++) cen[r] += (float)(0.02 * tt_normal());
    era_era_params p = era_era_params_default(cen.data());
    p.alpha = alpha;
    p.sigma = 0.12f;
    era_era_state cs = era_era_state_init();
    era_era_cuda_state gs = era_era_cuda_state_init();
    std::vector<float> bias((size_t)T * T);
    float *d_cen = dput(cen), *d_bias = dput(bias);
    era_era_params dp = p;
    dp.centers = d_cen;
    CHECK_INT_EQ(era_era_forward(&cfg, &p, T, bias.data(), &cs, NULL), ERA_OK);
    CHECK_INT_EQ(era_era_forward_cuda(&cfg, &dp, T, d_bias, &gs, NULL, NULL), ERA_OK);
    std::vector<float> g = dget(d_bias, bias.size());
    CHECK_ALL_CLOSE(g.data(), bias.data(), (long)bias.size(), 1e-5, 1e-5);
    {
        era_cuda_diag dg;
        CHECK_INT_EQ(era_era_cuda_diag(&gs, &dg, NULL), ERA_OK);
        CHECK_CLOSE(dg.std_pre, cs.std_pre, 1e-5, 1e-7);
        CHECK_CLOSE(dg.std_post, cs.std_post, 1e-5, 1e-7);
        CHECK_CLOSE(dg.marginal_err, cs.marginal_err, 1e-3, 1e-7);
        std::vector<float> pl = dget(gs.plan, (size_t)R * nb);
        CHECK_ALL_CLOSE(pl.data(), cs.plan, (long)R * nb, 1e-5, 1e-8);
    }
    if (backward) {
        std::vector<float> dbias = randn((size_t)T * T, 1.0), dc = randn(R, 0.1);
        float *d_dbias = dput(dbias), *d_dc = dput(dc);
        era_era_grads gc, gg;
        memset(&gc, 0, sizeof gc);
        memset(&gg, 0, sizeof gg);
        gc.dcenters = dc.data();
        gg.dcenters = d_dc;
        gc.dsigma = gg.dsigma = 0.5f;
        gc.dalpha = gg.dalpha = -0.5f;
        CHECK_INT_EQ(era_era_backward(&cfg, &p, &cs, dbias.data(), &gc, NULL), ERA_OK);
        CHECK_INT_EQ(era_era_backward_cuda(&cfg, &dp, &gs, d_dbias, &gg, NULL, NULL), ERA_OK);
        g = dget(d_dc, dc.size());
        CHECK_ALL_CLOSE(g.data(), dc.data(), (long)dc.size(), 1e-4, 1e-4 * maxabs(dc));
        CHECK_CLOSE(gg.dsigma, gc.dsigma, 1e-4, 1e-6);
        CHECK_CLOSE(gg.dalpha, gc.dalpha, 1e-4, 1e-6);
        dfree(d_dbias); dfree(d_dc);
    }
    era_era_state_free(&cs);
    era_era_cuda_state_free(&gs);
    dfree(d_cen); dfree(d_bias);
}

static void test_era_small(void)
{
    NEED_GPU();
    tt_seed(31);
    run_era(1, 32, 32, 0, 1, 1.0f);
    run_era(17, 32, 32, 0, 1, 1.0f);
    run_era(17, 8, 5, 1, 1, 0.7f);   /* causal, nb != R, blocks of 3-4 positions */
    run_era(17, 6, 24, 0, 1, -1.3f); /* nb > T: empty blocks */
    run_era(128, 32, 32, 1, 1, 1.0f);
}

static void test_era_1000(void)
{
    /* default R = nb = 32: blocks of 31 or 32 positions */
    NEED_GPU();
    tt_seed(32);
    run_era(1000, 32, 32, 0, 0, 1.0f);
}

/* ---------------------------------------------------------------- apply / reduce */
static void test_apply_reduce(void)
{
    const int B = 2, H = 3, T = 17;
    const size_t TT = (size_t)T * T, n = (size_t)B * H * TT;
    NEED_GPU();
    tt_seed(41);
    for (int ph = 0; ph < 2; ph++) {
        std::vector<float> sc = randn(n, 1.0), bias = randn(ph ? H * TT : TT, 1.0), db = randn(ph ? H * TT : TT, 1.0);
        float *d_sc = dput(sc), *d_bias = dput(bias), *d_db = dput(db);
        CHECK_INT_EQ(era_apply(sc.data(), bias.data(), ph, B, H, T), ERA_OK);
        CHECK_INT_EQ(era_apply_cuda(d_sc, d_bias, ph, B, H, T, NULL), ERA_OK);
        std::vector<float> g = dget(d_sc, n);
        CHECK_ALL_CLOSE(g.data(), sc.data(), (long)n, 0.0, 0.0); /* same single addition */
        CHECK_INT_EQ(era_reduce_grad(db.data(), sc.data(), ph, B, H, T), ERA_OK);
        CHECK_INT_EQ(era_reduce_grad_cuda(d_db, d_sc, ph, B, H, T, NULL), ERA_OK);
        g = dget(d_db, db.size());
        CHECK_ALL_CLOSE(g.data(), db.data(), (long)db.size(), 0.0, 0.0); /* same order, double */
        dfree(d_sc); dfree(d_bias); dfree(d_db);
    }
}

/* ---------------------------------------------------------------- plain entry points */
/* Under nvcc / the simulation the plain calls take device pointers too (DESIGN.md: one
   model for both devices). Each routed call must give the same bits as its _cuda twin;
   the prior states follow the side of their last forward, and device buffers given to a
   state whose last forward ran on the host are refused. */
static void test_plain_routing(void)
{
    const int B = 2, T = 17, R = 4, H = 3;
    const size_t TT = (size_t)T * T;
    NEED_GPU();
    tt_seed(51);
    /* RPA prior: forward, rows, backward */
    {
        era_rpa_config cfg = era_rpa_config_default(R);
        era_rpa_params p = era_rpa_params_default();
        era_rpa_state st = era_rpa_state_init();
        era_rpa_cuda_state gs = era_rpa_cuda_state_init();
        cfg.posmix = 0.1f;
        std::vector<float> mu = make_mu(B, T, R), dbias = randn(TT, 1.0), hb(TT), hrows(5 * (size_t)T);
        float *d_mu = dput(mu), *d_b1 = dput(std::vector<float>(TT)), *d_b2 = dput(std::vector<float>(TT));
        float *d_db = dput(dbias), *d_m1 = dput(std::vector<float>(mu.size())), *d_m2 = dput(std::vector<float>(mu.size()));
        float *d_r1 = dput(std::vector<float>(5 * (size_t)T)), *d_r2 = dput(std::vector<float>(5 * (size_t)T));
        era_rpa_grads g1, g2;
        memset(&g1, 0, sizeof g1);
        memset(&g2, 0, sizeof g2);
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, d_mu, B, T, d_b1, &st, NULL), ERA_OK);
        CHECK(st.cuda != NULL);
        CHECK_INT_EQ(era_rpa_forward_cuda(&cfg, &p, d_mu, B, T, d_b2, &gs, NULL, NULL), ERA_OK);
        CHECK(memcmp(dget(d_b1, TT).data(), dget(d_b2, TT).data(), TT * sizeof(float)) == 0);
        CHECK_INT_EQ(era_rpa_rows(&st, 3, 5, d_r1), ERA_OK);
        CHECK_INT_EQ(era_rpa_rows_cuda(&gs, 3, 5, d_r2, NULL), ERA_OK);
        CHECK(memcmp(dget(d_r1, 5 * (size_t)T).data(), dget(d_r2, 5 * (size_t)T).data(), 5 * T * sizeof(float)) == 0);
        CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, d_db, d_m1, &g1, NULL), ERA_OK);
        CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &p, &gs, d_db, d_m2, &g2, NULL, NULL), ERA_OK);
        CHECK(memcmp(dget(d_m1, mu.size()).data(), dget(d_m2, mu.size()).data(), mu.size() * sizeof(float)) == 0);
        CHECK(g1.dtau_att == g2.dtau_att && g1.dpos_beta == g2.dpos_beta);
        /* the same state, now a host forward: host rows work, device buffers are refused */
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu.data(), B, T, hb.data(), &st, NULL), ERA_OK);
        CHECK_ALL_CLOSE(hb.data(), dget(d_b1, TT).data(), (long)TT, 1e-5, 1e-5);
        CHECK_INT_EQ(era_rpa_rows(&st, 3, 5, hrows.data()), ERA_OK);
        CHECK_INT_EQ(era_rpa_rows(&st, 3, 5, d_r1), ERA_EINVAL);
        CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, d_db, d_m1, &g1, NULL), ERA_EINVAL);
        /* and back to the device */
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, d_mu, B, T, d_b1, &st, NULL), ERA_OK);
        CHECK_INT_EQ(era_rpa_rows(&st, 3, 5, hrows.data()), ERA_EINVAL); /* host out, device state */
        era_rpa_state_free(&st); /* frees the device twin (LeakSanitizer watches) */
        CHECK(st.cuda == NULL);
        era_rpa_cuda_state_free(&gs);
        dfree(d_mu); dfree(d_b1); dfree(d_b2); dfree(d_db); dfree(d_m1); dfree(d_m2); dfree(d_r1); dfree(d_r2);
    }
    /* ERA prior: forward (routed by the device centers, bias NULL: factored), rows, backward */
    {
        era_era_config cfg = era_era_config_default();
        std::vector<float> cen(8);
        cfg.R = 8;
        cfg.nb = 5;
        era_era_init_centers(8, cen.data());
        float *d_cen = dput(cen), *d_r1 = dput(std::vector<float>(TT)), *d_r2 = dput(std::vector<float>(TT));
        std::vector<float> dbias = randn(TT, 1.0), dc(8, 0.0f);
        float *d_db = dput(dbias), *d_c1 = dput(dc), *d_c2 = dput(dc);
        era_era_params dp = era_era_params_default(d_cen);
        era_era_state st = era_era_state_init();
        era_era_cuda_state gs = era_era_cuda_state_init();
        era_era_grads g1, g2;
        CHECK_INT_EQ(era_era_forward(&cfg, &dp, T, NULL, &st, NULL), ERA_OK);
        CHECK(st.cuda != NULL);
        CHECK_INT_EQ(era_era_forward_cuda(&cfg, &dp, T, NULL, &gs, NULL, NULL), ERA_OK);
        CHECK_INT_EQ(era_era_rows(&st, 0, T, d_r1), ERA_OK);
        CHECK_INT_EQ(era_era_rows_cuda(&gs, 0, T, d_r2, NULL), ERA_OK);
        CHECK(memcmp(dget(d_r1, TT).data(), dget(d_r2, TT).data(), TT * sizeof(float)) == 0);
        memset(&g1, 0, sizeof g1);
        memset(&g2, 0, sizeof g2);
        g1.dcenters = d_c1;
        g2.dcenters = d_c2;
        g1.dsigma = g2.dsigma = g1.dalpha = g2.dalpha = 0.0f;
        CHECK_INT_EQ(era_era_backward(&cfg, &dp, &st, d_db, &g1, NULL), ERA_OK);
        CHECK_INT_EQ(era_era_backward_cuda(&cfg, &dp, &gs, d_db, &g2, NULL, NULL), ERA_OK);
        CHECK(memcmp(dget(d_c1, 8).data(), dget(d_c2, 8).data(), 8 * sizeof(float)) == 0);
        CHECK(g1.dsigma == g2.dsigma && g1.dalpha == g2.dalpha);
        {
            /* a host forward on the same state: device buffers refused */
            era_era_params hp = era_era_params_default(cen.data());
            CHECK_INT_EQ(era_era_forward(&cfg, &hp, T, NULL, &st, NULL), ERA_OK);
            CHECK_INT_EQ(era_era_rows(&st, 0, T, d_r1), ERA_EINVAL);
            CHECK_INT_EQ(era_era_backward(&cfg, &hp, &st, d_db, &g1, NULL), ERA_EINVAL);
        }
        era_era_state_free(&st);
        era_era_cuda_state_free(&gs);
        dfree(d_cen); dfree(d_r1); dfree(d_r2); dfree(d_db); dfree(d_c1); dfree(d_c2);
    }
    /* memberships, forward and backward */
    {
        const int D = 12, P = 6;
        era_rpa_config cfg = era_rpa_config_default(R);
        era_rpa_params dp = era_rpa_params_default();
        std::vector<float> h = randn((size_t)B * T * D, 1.0), W = randn((size_t)P * D, 0.3), b = randn(P, 0.2);
        std::vector<float> cen = randn((size_t)R * P, 0.6), ls = randn(R, 0.3), dmu = randn((size_t)B * T * R, 1.0);
        float *d_h = dput(h), *d_dmu = dput(dmu);
        float *d_mu1 = dput(std::vector<float>((size_t)B * T * R)), *d_mu2 = dput(std::vector<float>((size_t)B * T * R));
        float *d_z1 = dput(std::vector<float>((size_t)B * T * P)), *d_z2 = dput(std::vector<float>((size_t)B * T * P));
        float *d_dh1 = dput(std::vector<float>(h.size())), *d_dh2 = dput(std::vector<float>(h.size()));
        era_mu_stats s1, s2;
        dp.D = D; dp.P = P; dp.W = dput(W); dp.b = dput(b); dp.centers = dput(cen); dp.log_sigma = dput(ls);
        CHECK_INT_EQ(era_membership_forward(&cfg, &dp, d_mu1, d_z1, &s1, d_h, B, T), ERA_OK);
        CHECK_INT_EQ(era_membership_forward_cuda(&cfg, &dp, d_mu2, d_z2, &s2, d_h, B, T, NULL), ERA_OK);
        CHECK(memcmp(dget(d_mu1, dmu.size()).data(), dget(d_mu2, dmu.size()).data(), dmu.size() * sizeof(float)) == 0);
        CHECK(s1.entropy == s2.entropy && s1.sat_frac == s2.sat_frac);
        CHECK_INT_EQ(era_membership_backward(&cfg, &dp, d_dh1, NULL, d_dmu, 0.2f, d_h, d_z1, d_mu1, B, T, NULL), ERA_OK);
        CHECK_INT_EQ(era_membership_backward_cuda(&cfg, &dp, d_dh2, NULL, d_dmu, 0.2f, d_h, d_z1, d_mu1, B, T, NULL, NULL), ERA_OK);
        CHECK(memcmp(dget(d_dh1, h.size()).data(), dget(d_dh2, h.size()).data(), h.size() * sizeof(float)) == 0);
        dfree(d_h); dfree(d_dmu); dfree(d_mu1); dfree(d_mu2); dfree(d_z1); dfree(d_z2); dfree(d_dh1); dfree(d_dh2);
        dfree((float *)dp.W); dfree((float *)dp.b); dfree((float *)dp.centers); dfree((float *)dp.log_sigma);
    }
    /* apply / reduce */
    {
        std::vector<float> sc = randn((size_t)B * H * TT, 1.0), bias = randn(TT, 1.0), db(TT, 0.0f);
        float *d_s1 = dput(sc), *d_s2 = dput(sc), *d_bias = dput(bias), *d_d1 = dput(db), *d_d2 = dput(db);
        CHECK_INT_EQ(era_apply(d_s1, d_bias, 0, B, H, T), ERA_OK);
        CHECK_INT_EQ(era_apply_cuda(d_s2, d_bias, 0, B, H, T, NULL), ERA_OK);
        CHECK(memcmp(dget(d_s1, sc.size()).data(), dget(d_s2, sc.size()).data(), sc.size() * sizeof(float)) == 0);
        CHECK_INT_EQ(era_reduce_grad(d_d1, d_s1, 0, B, H, T), ERA_OK);
        CHECK_INT_EQ(era_reduce_grad_cuda(d_d2, d_s1, 0, B, H, T, NULL), ERA_OK);
        CHECK(memcmp(dget(d_d1, TT).data(), dget(d_d2, TT).data(), TT * sizeof(float)) == 0);
        dfree(d_s1); dfree(d_s2); dfree(d_bias); dfree(d_d1); dfree(d_d2);
    }
}

/* ---------------------------------------------------------------- device cache */
/* mean memberships for a length: a smooth deterministic assignment, (T,R) */
static int cache_mu(void *user, int T, float *mbar)
{
    const int R = *(const int *)user;
    for (int t = 0; t < T; t++) {
        double s = 0.0, l[16];
        for (int r = 0; r < R; r++) {
            double x = T > 1 ? (double)t / (T - 1) : 0.0, c = (r + 0.5) / R;
            l[r] = -6.0 * (x - c) * (x - c) + 0.3 * sin(1.7 * t + r);
            s += exp(l[r]);
        }
        for (int r = 0; r < R; r++) mbar[(size_t)t * R + r] = (float)(exp(l[r]) / s);
    }
    return ERA_OK;
}

static void test_cache(void)
{
    static const int Ts[] = {17, 64, 17, 5, 64, 17};
    NEED_GPU();
    tt_seed(61);
    for (int kind = 1; kind <= 2; kind++) {
        era_cache cc;
        era_cuda_cache gc;
        int R = 4;
        const size_t budget = sizeof(float) * (64 * 64 + 17 * 17); /* 5 evicts 64, and so on */
        era_era_config ec = era_era_config_default();
        float cen[32];
        era_era_init_centers(32, cen);
        era_era_params ep = era_era_params_default(cen);
        era_rpa_config rc = era_rpa_config_default(R);
        era_rpa_params rp = era_rpa_params_default();
        rc.posmix = 0.1f;
        rp.tau_att = 1.2f;
        if (kind == 1) {
            CHECK_INT_EQ(era_cache_init_era(&cc, budget, &ec, &ep), ERA_OK);
            CHECK_INT_EQ(era_cuda_cache_init_era(&gc, budget, &ec, &ep), ERA_OK);
        } else {
            CHECK_INT_EQ(era_cache_init_rpa(&cc, budget, &rc, &rp, cache_mu, &R), ERA_OK);
            CHECK_INT_EQ(era_cuda_cache_init_rpa(&gc, budget, &rc, &rp, cache_mu, &R), ERA_OK);
        }
        for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
            const float *cb = NULL, *gb = NULL;
            int T = Ts[i];
            CHECK_INT_EQ(era_cache_get(&cc, T, &cb), ERA_OK);
            CHECK_INT_EQ(era_cuda_cache_get(&gc, T, &gb, NULL), ERA_OK);
            if (!cb || !gb) continue;
            std::vector<float> g = dget(gb, (size_t)T * T);
            /* the issue's bound for a reduced B(T): 1e-6 */
            CHECK_ALL_CLOSE(g.data(), cb, (long)T * T, 1e-6, 1e-6);
        }
        CHECK_INT_EQ((int)gc.builds, (int)cc.builds);
        CHECK_INT_EQ((int)gc.hits, (int)cc.hits);
        CHECK_INT_EQ((int)gc.evictions, (int)cc.evictions);
        CHECK(gc.hits > 0 && gc.evictions > 0);
        {
            const float *gb = NULL;
            CHECK_INT_EQ(era_cuda_cache_get(&gc, 200, &gb, NULL), ERA_ERANGE); /* over budget */
            CHECK(gb == NULL);
        }
        era_cache_free(&cc);
        era_cuda_cache_free(&gc);
    }
}

/* ------------------------------------------------------------ issue 38: float64 sweep */
/* The device ERA and RPA priors and backwards against tests/ref64.h's float64
   transcriptions in test_era.c's regimes (ERA: defaults, tiny sigma, one regime, a sharp
   plan; RPA: defaults, the clamp regime, tau_att on / below its bounds, one regime;
   memberships: defaults, sharp, tiny sigma).
   1e-4 forward, 2e-3 gradients relative to each tensor's max-norm (absolute where the
   exact value is 0: ERA with R = 1), RPA's dpos_beta at R = 1 against the
   condition-aware bound test_era.c states. */
static void test_sweep_float64(void)
{
    r64_report rep;
    int reg, t;
    NEED_GPU();
    memset(&rep, 0, sizeof rep);
    for (reg = 0; reg < R64_ERA_NREGIMES; reg++) {
        r64_era_case c;
        era_era_config cfg = era_era_config_default();
        era_era_params par;
        era_era_cuda_state st = era_era_cuda_state_init();
        era_era_grads gr;
        size_t TT;
        double e[4], ea[4], ref2[2];
        float got2[2];
        static const char *nm[4] = {"ERA bias", "ERA dcenters", "ERA dsigma", "ERA dalpha"};
        r64_era_make(&c, reg);
        TT = (size_t)c.T * c.T;
        cfg.R = c.R; cfg.nb = c.nb; cfg.iters = c.iters; cfg.eps = (float)c.eps;
        cfg.delta = (float)c.delta; cfg.zscore_eps = (float)c.zeps;
        {
            std::vector<float> hc(c.centers, c.centers + c.R), hdb(c.dbias, c.dbias + TT), zb(TT, 0.0f), zc(c.R, 0.0f);
            float *dcen = dput(hc), *ddb = dput(hdb), *dbias = dput(zb), *ddc = dput(zc);
            par = era_era_params_default(dcen);
            par.sigma = c.sigma;
            par.alpha = c.alpha;
            memset(&gr, 0, sizeof gr);
            gr.dcenters = ddc;
            CHECK_INT_EQ(era_era_forward_cuda(&cfg, &par, c.T, dbias, &st, NULL, NULL), ERA_OK);
            CHECK_INT_EQ(era_era_backward_cuda(&cfg, &par, &st, ddb, &gr, NULL, NULL), ERA_OK);
            e[0] = r64_relerr_f(dget(dbias, TT).data(), c.bias, (long)TT);
            e[1] = r64_relerr_f(dget(ddc, (size_t)c.R).data(), c.dcenters, c.R);
            dfree(dcen); dfree(ddb); dfree(dbias); dfree(ddc);
        }
        got2[0] = gr.dsigma; ref2[0] = c.dsigma;
        got2[1] = gr.dalpha; ref2[1] = c.dalpha;
        e[2] = r64_relerr_f(got2, ref2, 1);
        e[3] = r64_relerr_f(got2 + 1, ref2 + 1, 1);
        ea[0] = e[0] * r64_maxabs(c.bias, (long)TT);
        ea[1] = e[1] * r64_maxabs(c.dcenters, c.R);
        ea[2] = fabs((double)got2[0] - ref2[0]);
        ea[3] = fabs((double)got2[1] - ref2[1]);
        for (t = 0; t < 4; t++) {
            if (c.R == 1) { /* the exact value is 0: absolute errors (see test_era.c) */
                printf("  ERA sweep, %s, %s: absolute error %.3e (exact value 0)\n", c.name, nm[t], ea[t]);
                CHECK(ea[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD));
                continue;
            }
            r64_note(&rep, nm[t], c.name, e[t]);
            if (!(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD))) {
                fprintf(stderr, "  %s, %s: relative error %.3e\n", c.name, nm[t], e[t]);
                CHECK(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD));
            }
        }
        era_era_cuda_state_free(&st);
        r64_era_free(&c);
    }
    for (reg = 0; reg < R64_RPA_NREGIMES; reg++) {
        r64_rpa_case c;
        era_rpa_config cfg;
        era_rpa_params par = era_rpa_params_default();
        era_rpa_cuda_state st = era_rpa_cuda_state_init();
        era_rpa_grads gr;
        size_t TT, nmu;
        double e[4], ref2[2];
        float got2[2];
        static const char *nm[4] = {"RPA bias", "RPA dmu", "RPA dtau_att", "RPA dpos_beta"};
        r64_rpa_make(&c, reg);
        TT = (size_t)c.T * c.T;
        nmu = (size_t)c.B * c.T * c.R;
        cfg = era_rpa_config_default(c.R);
        cfg.K = c.K; cfg.sinkhorn_iters = c.iters; cfg.detach = c.detach;
        cfg.tau_align = (float)c.tau_align; cfg.posmix = (float)c.posmix;
        cfg.bias_clip = (float)c.clip; cfg.tau_min = (float)c.tau_min; cfg.tau_max = (float)c.tau_max;
        cfg.scale = (float)c.scale; cfg.zscore_eps = (float)c.zeps;
        par.tau_att = c.tau_att;
        par.pos_beta = c.pos_beta;
        memset(&gr, 0, sizeof gr);
        {
            std::vector<float> hmu(c.mu, c.mu + nmu), hdb(c.dbias, c.dbias + TT), zb(TT, 0.0f), zm(nmu, 0.0f);
            float *dmu_in = dput(hmu), *ddb = dput(hdb), *dbias = dput(zb), *ddmu = dput(zm);
            CHECK_INT_EQ(era_rpa_forward_cuda(&cfg, &par, dmu_in, c.B, c.T, dbias, &st, NULL, NULL), ERA_OK);
            CHECK_INT_EQ(era_rpa_backward_cuda(&cfg, &par, &st, ddb, ddmu, &gr, NULL, NULL), ERA_OK);
            e[0] = r64_relerr_f(dget(dbias, TT).data(), c.bias, (long)TT);
            e[1] = r64_relerr_f(dget(ddmu, nmu).data(), c.dmu, (long)nmu);
            dfree(dmu_in); dfree(ddb); dfree(dbias); dfree(ddmu);
        }
        got2[0] = gr.dtau_att; ref2[0] = c.dtau;
        got2[1] = gr.dpos_beta; ref2[1] = c.dbeta;
        e[2] = r64_relerr_f(got2, ref2, 1);
        e[3] = r64_relerr_f(got2 + 1, ref2 + 1, 1);
        for (t = 0; t < 4; t++) {
            if (t == 3 && c.R == 1) { /* the scale invariance of the z-score: see test_era.c */
                double cb = 16.0 * R64_EPS32 * c.abs_dbeta, ea = fabs((double)got2[1] - ref2[1]);
                printf("  RPA sweep, %s, %s: absolute error %.3e (bound %.3e)\n", c.name, nm[t], ea, cb);
                CHECK(ea <= cb);
                continue;
            }
            r64_note(&rep, nm[t], c.name, e[t]);
            if (!(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD))) {
                fprintf(stderr, "  %s, %s: relative error %.3e\n", c.name, nm[t], e[t]);
                CHECK(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD));
            }
        }
        era_rpa_cuda_state_free(&st);
        r64_rpa_free(&c);
    }
    for (reg = 0; reg < R64_MEM_NREGIMES; reg++) { /* memberships */
        r64_mem_case c;
        era_rpa_config cfg;
        era_rpa_params par = era_rpa_params_default();
        era_rpa_grads gr;
        int n;
        double e[6];
        static const char *nm[6] = {"memb mu", "memb dh", "memb dW", "memb db", "memb dcenters", "memb dlog_sigma"};
        r64_mem_make(&c, reg);
        n = c.B * c.T;
        cfg = era_rpa_config_default(c.R);
        {
            std::vector<float> hh(c.h, c.h + (size_t)n * c.D), hW(c.W, c.W + (size_t)c.P * c.D), hb(c.b, c.b + c.P);
            std::vector<float> hc(c.c, c.c + (size_t)c.R * c.P), hl(c.ls, c.ls + c.R), hdm(c.dmu, c.dmu + (size_t)n * c.R);
            std::vector<float> zm((size_t)n * c.R, 0.0f), zz((size_t)n * c.P, 0.0f), zh((size_t)n * c.D, 0.0f);
            std::vector<float> zW((size_t)c.P * c.D, 0.0f), zb(c.P, 0.0f), zc((size_t)c.R * c.P, 0.0f), zl(c.R, 0.0f);
            float *dh_in = dput(hh), *dW_in = dput(hW), *db_in = dput(hb), *dc_in = dput(hc), *dl_in = dput(hl);
            float *ddm = dput(hdm), *dmu = dput(zm), *dz = dput(zz), *gdh = dput(zh), *gdW = dput(zW);
            float *gdb = dput(zb), *gdc = dput(zc), *gdl = dput(zl);
            par.D = c.D; par.P = c.P; par.W = dW_in; par.b = db_in; par.centers = dc_in; par.log_sigma = dl_in;
            memset(&gr, 0, sizeof gr);
            gr.dW = gdW; gr.db = gdb; gr.dcenters = gdc; gr.dlog_sigma = gdl;
            CHECK_INT_EQ(era_membership_forward_cuda(&cfg, &par, dmu, dz, NULL, dh_in, c.B, c.T, NULL), ERA_OK);
            CHECK_INT_EQ(era_membership_backward_cuda(&cfg, &par, gdh, &gr, ddm, 0.0f, dh_in, dz, dmu, c.B, c.T,
                                                      NULL, NULL), ERA_OK);
            e[0] = r64_relerr_f(dget(dmu, (size_t)n * c.R).data(), c.mu, (long)n * c.R);
            e[1] = r64_relerr_f(dget(gdh, (size_t)n * c.D).data(), c.dh, (long)n * c.D);
            e[2] = r64_relerr_f(dget(gdW, (size_t)c.P * c.D).data(), c.dW, (long)c.P * c.D);
            e[3] = r64_relerr_f(dget(gdb, (size_t)c.P).data(), c.db, c.P);
            e[4] = r64_relerr_f(dget(gdc, (size_t)c.R * c.P).data(), c.dc, (long)c.R * c.P);
            e[5] = r64_relerr_f(dget(gdl, (size_t)c.R).data(), c.dls, c.R);
            dfree(dh_in); dfree(dW_in); dfree(db_in); dfree(dc_in); dfree(dl_in); dfree(ddm); dfree(dmu);
            dfree(dz); dfree(gdh); dfree(gdW); dfree(gdb); dfree(gdc); dfree(gdl);
        }
        for (t = 0; t < 6; t++) {
            r64_note(&rep, nm[t], c.name, e[t]);
            if (!(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD))) {
                fprintf(stderr, "  %s, %s: relative error %.3e\n", c.name, nm[t], e[t]);
                CHECK(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD));
            }
        }
        r64_mem_free(&c);
    }
    r64_print(&rep, "ERA and RPA device vs float64");
}

/* Issue 37 rule 4 on the device entry points: per_head outside {0,1} is ERA_EINVAL with
   nothing launched (it read / wrote an (H,T,T) buffer where (T,T) was given) */
static void test_flags_range_checked(void)
{
    std::vector<float> hs(2 * 3 * 16, 1.0f), hb(16, 0.5f);
    float *ds, *db;
    int bad[3] = {-1, 2, 1 << 20}, i;
    NEED_GPU();
    ds = dput(hs);
    db = dput(hb);
    for (i = 0; i < 3; i++) {
        CHECK_INT_EQ(era_apply_cuda(ds, db, bad[i], 2, 3, 4, NULL), ERA_EINVAL);
        CHECK_INT_EQ(era_reduce_grad_cuda(db, ds, bad[i], 2, 3, 4, NULL), ERA_EINVAL);
        CHECK_INT_EQ(era_apply(ds, db, bad[i], 2, 3, 4), ERA_EINVAL); /* the routed plain call */
    }
    CHECK(dget(ds, hs.size()) == hs);
    CHECK(dget(db, hb.size()) == hb);
    CHECK_INT_EQ(era_apply_cuda(ds, db, 0, 2, 3, 4, NULL), ERA_OK);
    dfree(ds);
    dfree(db);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    g_gpu = era_cuda_available();
    if (!g_gpu) printf("SKIP: no GPU\n");
    else parity_print_device();
    TEST_RUN(test_bad_input);
    TEST_RUN(test_membership);
    TEST_RUN(test_membership_tiles);
    TEST_RUN(test_rpa_small);
    TEST_RUN(test_rpa_128);
    TEST_RUN(test_rpa_768);
    TEST_RUN(test_rpa_deterministic);
    TEST_RUN(test_rpa_scalars_to);
    TEST_RUN(test_era_scalars_to);
    TEST_RUN(test_era_small);
    TEST_RUN(test_era_1000);
    TEST_RUN(test_apply_reduce);
    TEST_RUN(test_plain_routing);
    TEST_RUN(test_cache);
    TEST_RUN(test_sweep_float64);
    TEST_RUN(test_flags_range_checked);
    CHECK_INT_EQ(era_cuda_release(), ERA_OK); /* the membership scratch: nothing left for --leak-check */
    return TEST_END();
}
