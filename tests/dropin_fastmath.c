/* dropin_fastmath.c - the headers' input validation under -ffast-math / -Ofast.

   Built and run by tests/dropin_check.sh with gcc and clang, each with -Ofast and with
   -O2 -ffast-math (finite-math-only: the compiler may assume no value is NaN or Inf and
   folds x == x, x - x == 0 and comparisons with +-HUGE_VAL). Every call below hands a
   header a NaN or an Inf where its docs refuse one and checks the error code; a few
   valid calls around them check that nothing valid is refused. NaN and Inf are made at
   run time from their bit patterns (through a volatile), so the compiler cannot see
   them coming; all checks compare integers or bits, which fast-math leaves alone. */
#define TENSOR_IMPLEMENTATION
#define POLAR_IMPLEMENTATION
#define ERA_IMPLEMENTATION
#define GDELTA_IMPLEMENTATION
#define GUARDIAN_IMPLEMENTATION
#define CEAS_IMPLEMENTATION
#include "attnkit_test.h"

#include <stdint.h>

#include "ceas.h"
#include "era.h"
#include "gdelta.h"
#include "guardian.h"
#include "polar.h"
#include "tensor.h"

static float from_bits(uint32_t bits)
{
    volatile uint32_t vb = bits;
    uint32_t b = vb;
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}
static float nan_f(void) { return from_bits(0x7FC00000u); }
static float inf_f(void) { return from_bits(0x7F800000u); }
static float ninf_f(void) { return from_bits(0xFF800000u); }
static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static int bits_finite(float f) { return (bits_of(f) & 0x7F800000u) != 0x7F800000u; }

/* the bad values each check is run with */
static float bad_value(int i) { return i == 0 ? nan_f() : (i == 1 ? inf_f() : ninf_f()); }

static void test_polar(void)
{
    enum { B = 1, H = 2, T = 9, D = 4 };
    polar_config cfg = polar_config_default();
    float lg[H], nb[H], ns[H], mb[H], vn[H * D];
    float q[B * H * T * D], k[B * H * T * D], v[B * H * T * D], c[B * H * T * D];
    float mag[B * H * T], stats[B * H * T * POLAR_NSTAT];
    polar_params prm;
    polar_state st;
    int i;
    tt_seed(1);
    tt_fill_normal(q, B * H * T * D, 1.0);
    tt_fill_normal(k, B * H * T * D, 1.0);
    tt_fill_normal(v, B * H * T * D, 1.0);
    CHECK_INT_EQ(polar_params_init(&cfg, H, D, lg, nb, ns, mb, vn), POLAR_OK);
    prm.len_gain_raw = lg; prm.null_base = nb; prm.null_slope_raw = ns;
    prm.mag_beta_raw = mb; prm.v_null = vn;
    st.stats = stats; st.probs = NULL;
    CHECK_INT_EQ(polar_forward(&cfg, c, mag, &st, q, k, v, &prm, B, H, H, T, D, NULL),
                 POLAR_OK);
    for (i = 0; i < 3; i++) {
        float x = bad_value(i), keep;
        keep = lg[1]; lg[1] = x;
        CHECK_INT_EQ(polar_forward(&cfg, c, mag, &st, q, k, v, &prm, B, H, H, T, D, NULL),
                     POLAR_EINVAL);
        lg[1] = keep;
        keep = nb[0]; nb[0] = x;
        CHECK_INT_EQ(polar_forward(&cfg, c, mag, &st, q, k, v, &prm, B, H, H, T, D, NULL),
                     POLAR_EINVAL);
        nb[0] = keep;
        keep = vn[5]; vn[5] = x;
        CHECK_INT_EQ(polar_forward(&cfg, c, mag, &st, q, k, v, &prm, B, H, H, T, D, NULL),
                     POLAR_EINVAL);
        vn[5] = keep;
        {
            polar_config bad = cfg;
            bad.norm_eps = x;
            CHECK_INT_EQ(polar_forward(&bad, c, mag, &st, q, k, v, &prm, B, H, H, T, D, NULL),
                         POLAR_EINVAL);
        }
    }
    CHECK_INT_EQ(polar_forward(&cfg, c, mag, &st, q, k, v, &prm, B, H, H, T, D, NULL),
                 POLAR_OK);
    for (i = 0; i < B * H * T * D; i++) CHECK(bits_finite(c[i]));
}

static void test_era(void)
{
    enum { R = 4, P = 3, Dm = 5, Bm = 2, Tm = 6 };
    era_era_config ec = era_era_config_default();
    float centers[32], bias[16 * 16];
    era_era_params ep;
    era_era_state es = era_era_state_init();
    era_rpa_config rc = era_rpa_config_default(R);
    era_rpa_params rp = era_rpa_params_default();
    era_rpa_state rs = era_rpa_state_init();
    float W[P * Dm], cen[R * P], ls[R], h[Bm * Tm * Dm], mu[Bm * Tm * R], z[Bm * Tm * P];
    era_mu_stats ms;
    int i, r;
    memset(&ms, 0, sizeof ms);
    era_era_init_centers(ec.R, centers);
    ep = era_era_params_default(centers);
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 16, bias, &es, NULL), ERA_OK);
    for (i = 0; i < 3; i++) {
        float keep = centers[7];
        centers[7] = bad_value(i);
        CHECK_INT_EQ(era_era_forward(&ec, &ep, 16, bias, &es, NULL), ERA_EINVAL);
        centers[7] = keep;
        ep.sigma = bad_value(i);
        CHECK_INT_EQ(era_era_forward(&ec, &ep, 16, bias, &es, NULL), ERA_EINVAL);
        ep.sigma = 0.1f;
    }
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 16, bias, &es, NULL), ERA_OK);
    era_era_state_free(&es);

    /* memberships: a NaN hidden state gives the 1/R row (bit for bit) and is counted */
    tt_seed(2);
    tt_fill_normal(W, P * Dm, 0.5);
    tt_fill_normal(cen, R * P, 1.0);
    tt_fill_normal(ls, R, 0.2);
    tt_fill_normal(h, Bm * Tm * Dm, 1.0);
    rp.D = Dm; rp.P = P; rp.W = W; rp.b = NULL; rp.centers = cen; rp.log_sigma = ls;
    h[3 * Dm + 2] = nan_f();
    CHECK_INT_EQ(era_membership_forward(&rc, &rp, mu, z, &ms, h, Bm, Tm), ERA_OK);
    CHECK_INT_EQ(ms.nan_rows, 1);
    for (r = 0; r < R; r++) CHECK_INT_EQ(bits_of(mu[3 * R + r]), bits_of(1.0f / (float)R));
    for (i = 0; i < Bm * Tm * R; i++) CHECK(bits_finite(mu[i]));
    /* the RPA prior from them is finite; NaN/Inf scalars are refused */
    CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mu, Bm, Tm, bias, &rs, NULL), ERA_OK);
    for (i = 0; i < Tm * Tm; i++) CHECK(bits_finite(bias[i]));
    /* a NaN membership entry counts as 1/R in the batch mean: still finite */
    mu[5] = nan_f();
    CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mu, Bm, Tm, bias, &rs, NULL), ERA_OK);
    for (i = 0; i < Tm * Tm; i++) CHECK(bits_finite(bias[i]));
    for (i = 0; i < 3; i++) {
        rp.tau_att = bad_value(i);
        CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mu, Bm, Tm, bias, &rs, NULL), ERA_EINVAL);
        rp.tau_att = 1.0f;
        rc.tau_align = bad_value(i);
        CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mu, Bm, Tm, bias, &rs, NULL), ERA_EINVAL);
        rc.tau_align = 0.7f;
    }
    era_rpa_state_free(&rs);
}

static void test_gdelta(void)
{
    enum { B = 1, H = 1, T = 8, Dk = 4, Dv = 3 };
    gd_config cfg = gd_config_default();
    float q[T * Dk], k[T * Dk], v[T * Dv], g[T], be[T], r[T * Dv], s0[Dk * Dv];
    int i;
    tt_seed(3);
    tt_fill_normal(q, T * Dk, 1.0);
    tt_fill_normal(k, T * Dk, 1.0);
    tt_fill_normal(v, T * Dv, 1.0);
    tt_fill_uniform(g, T, 0.5, 1.0);
    tt_fill_uniform(be, T, 0.1, 0.9);
    tt_fill_normal(s0, Dk * Dv, 0.1);
    CHECK_INT_EQ(gd_forward(&cfg, r, NULL, q, k, v, g, be, s0, B, H, T, Dk, Dv, NULL, NULL),
                 GD_OK);
    for (i = 0; i < 3; i++) {
        float x = bad_value(i), keep;
        keep = q[6]; q[6] = x;
        CHECK(gd_forward(&cfg, r, NULL, q, k, v, g, be, s0, B, H, T, Dk, Dv, NULL, NULL) != GD_OK);
        q[6] = keep;
        keep = v[2]; v[2] = x;
        CHECK(gd_forward(&cfg, r, NULL, q, k, v, g, be, s0, B, H, T, Dk, Dv, NULL, NULL) != GD_OK);
        v[2] = keep;
        keep = s0[1]; s0[1] = x;
        CHECK(gd_forward(&cfg, r, NULL, q, k, v, g, be, s0, B, H, T, Dk, Dv, NULL, NULL) != GD_OK);
        s0[1] = keep;
        keep = g[4]; g[4] = x;
        CHECK(gd_forward(&cfg, r, NULL, q, k, v, g, be, s0, B, H, T, Dk, Dv, NULL, NULL) != GD_OK);
        g[4] = keep;
        keep = be[4]; be[4] = x;
        CHECK(gd_forward(&cfg, r, NULL, q, k, v, g, be, s0, B, H, T, Dk, Dv, NULL, NULL) != GD_OK);
        be[4] = keep;
    }
    {
        gd_config bad = cfg;
        bad.scale = nan_f();
        CHECK(gd_forward(&bad, r, NULL, q, k, v, g, be, s0, B, H, T, Dk, Dv, NULL, NULL) != GD_OK);
    }
    CHECK_INT_EQ(gd_forward(&cfg, r, NULL, q, k, v, g, be, s0, B, H, T, Dk, Dv, NULL, NULL),
                 GD_OK);
    for (i = 0; i < T * Dv; i++) CHECK(bits_finite(r[i]));
}

static void test_tensor(void)
{
    enum { B = 1, H = 2, T = 7, D = 4 };
    float q[B * H * T * D], k[B * H * T * D], v[B * H * T * D], out[B * H * T * D];
    float probs[B * H * T * T], bias[T * T], temp[H] = {1.0f, 1.5f};
    float a[12], c[9], x[12], mean[3], rstd[3];
    tk_adamw_config ac = tk_adamw_config_default();
    int i;
    tt_seed(4);
    tt_fill_normal(q, B * H * T * D, 1.0);
    tt_fill_normal(k, B * H * T * D, 1.0);
    tt_fill_normal(v, B * H * T * D, 1.0);
    tt_fill_normal(bias, T * T, 1.0);
    tt_fill_normal(a, 12, 1.0);
    tt_fill_normal(x, 12, 1.0);
    CHECK_INT_EQ(tk_attention_forward(out, probs, q, k, v, bias, 0, temp, B, H, T, D), TK_OK);
    for (i = 0; i < 2; i++) { /* NaN, +Inf in a visible bias entry */
        bias[4 * T + 2] = bad_value(i);
        CHECK_INT_EQ(tk_attention_forward(out, probs, q, k, v, bias, 0, temp, B, H, T, D),
                     TK_EINVAL);
        bias[4 * T + 2] = 0.5f;
    }
    for (i = 0; i <= 3; i++) bias[3 * T + i] = ninf_f(); /* a row of -inf */
    CHECK_INT_EQ(tk_attention_forward(out, probs, q, k, v, bias, 0, temp, B, H, T, D),
                 TK_EINVAL);
    bias[3 * T + 3] = 0.0f;
    CHECK_INT_EQ(tk_attention_forward(out, probs, q, k, v, bias, 0, temp, B, H, T, D), TK_OK);
    for (i = 0; i < 3; i++) {
        float keep = temp[1];
        temp[1] = bad_value(i);
        CHECK_INT_EQ(tk_attention_forward(out, probs, q, k, v, bias, 0, temp, B, H, T, D),
                     TK_EINVAL);
        temp[1] = keep;
        CHECK_INT_EQ(tk_sgemm(0, 0, 3, 3, 4, bad_value(i), a, 4, a, 3, 0.0f, c, 3), TK_EINVAL);
        CHECK_INT_EQ(tk_sgemm(0, 0, 3, 3, 4, 1.0f, a, 4, a, 3, bad_value(i), c, 3), TK_EINVAL);
        CHECK_INT_EQ(tk_layernorm_forward(x, mean, rstd, x, NULL, NULL, 3, 4, bad_value(i)),
                     TK_EINVAL);
        ac.lr = bad_value(i);
        CHECK_INT_EQ(tk_adamw_update(a, a, c, c, 9, &ac, 1), TK_EINVAL);
        ac.lr = 1e-3f;
    }
    CHECK_INT_EQ(tk_sgemm(0, 0, 3, 3, 4, 1.0f, a, 4, a, 3, 0.0f, c, 3), TK_OK);
}

static void test_guardian_ceas(void)
{
    enum { N = 3, V = 5, T = 6 };
    float logits[N * V], lg[2 * T * T], beta[2] = {1.0f, 0.5f};
    int targets[N] = {1, 0, 4}, i;
    double ps = 0, ss = 0;
    int64_t nt = 0;
    ceas_obs rows[2 * T * T];
    tt_seed(5);
    tt_fill_normal(logits, N * V, 1.0);
    tt_fill_normal(lg, 2 * T * T, 1.0);
    CHECK_INT_EQ(guardian_ce_smoothed(logits, targets, N, V, 0.1f, &ps, &ss, &nt, NULL, 1.0f),
                 GUARDIAN_OK);
    for (i = 0; i < 3; i++) {
        float keep = logits[7];
        logits[7] = bad_value(i);
        CHECK_INT_EQ(guardian_ce_smoothed(logits, targets, N, V, 0.1f, &ps, &ss, &nt, NULL,
                                          1.0f), GUARDIAN_EINVAL);
        logits[7] = keep;
        CHECK_INT_EQ(guardian_ce_smoothed(logits, targets, N, V, bad_value(i), &ps, &ss, &nt,
                                          NULL, 1.0f), GUARDIAN_EINVAL);
        beta[1] = bad_value(i);
        CHECK_INT_EQ(ceas_attention_observables(lg, 1, 2, T, 1, beta, rows, NULL, NULL),
                     CEAS_EINVAL);
        beta[1] = 0.5f;
        CHECK_INT_EQ(bits_of(ceas_beta_to_temp(bad_value(i), 16)), bits_of(0.0f));
    }
    CHECK_INT_EQ(ceas_attention_observables(lg, 1, 2, T, 1, beta, rows, NULL, NULL), CEAS_OK);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
#if defined(__FAST_MATH__) || defined(__FINITE_MATH_ONLY__)
    fprintf(stderr, "built with fast math (finite-math-only %d)\n",
#ifdef __FINITE_MATH_ONLY__
            __FINITE_MATH_ONLY__
#else
            -1
#endif
    );
#endif
    TEST_RUN(test_polar);
    TEST_RUN(test_era);
    TEST_RUN(test_gdelta);
    TEST_RUN(test_tensor);
    TEST_RUN(test_guardian_ceas);
    return TEST_END();
}
