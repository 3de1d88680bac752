/* tests/test_ceas.c - CEAS attention-temperature controller (ceas.h). */
#define CEAS_IMPLEMENTATION
#include "../ceas.h"
#include "attnkit_test.h"
#include "ref64.h"

#include <float.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- double-precision references ---- */

typedef struct { double H, var_s, sigma, mean; } ref_obs;

static ref_obs ref_row(const float *logits, int n, double beta)
{
    ref_obs o;
    double m = -DBL_MAX, z = 0, e1 = 0, e2 = 0, mu = 0, v = 0;
    int j;
    for (j = 0; j < n; j++) if (logits[j] > m) m = logits[j];
    for (j = 0; j < n; j++) z += exp(logits[j] - m);
    for (j = 0; j < n; j++) {
        double p = exp(logits[j] - m) / z, s = logits[j] / beta;
        e1 += p * s;
        e2 += p * s * s;
    }
    o.H = 0;
    for (j = 0; j < n; j++) {
        double p = exp(logits[j] - m) / z;
        if (p > 0) o.H -= p * log(p);
    }
    o.var_s = e2 - e1 * e1;
    for (j = 0; j < n; j++) mu += logits[j] / beta;
    mu /= n;
    for (j = 0; j < n; j++) v += (logits[j] / beta - mu) * (logits[j] / beta - mu);
    o.sigma = sqrt(v / n);
    o.mean = mu;
    return o;
}

/* entropy of softmax(beta * s) in double */
static double ref_H(const float *s, int n, double beta)
{
    double m = -DBL_MAX, z = 0, a = 0;
    int j;
    for (j = 0; j < n; j++) if (beta * s[j] > m) m = beta * s[j];
    for (j = 0; j < n; j++) {
        double e = exp(beta * s[j] - m);
        z += e;
        a += e * (beta * s[j] - m);
    }
    return log(z) - a / z;
}

static float *scaled(const float *s, int n, float beta, float *out)
{
    int j;
    for (j = 0; j < n; j++) out[j] = beta * s[j];
    return out;
}

/* ---- observables ---- */

static void test_row_observables_match_double(void)
{
    static const int lens[] = {1, 2, 5, 15, 16, 17, 31, 127, 128, 129, 130, 255, 300, 1000};
    static const double scales[] = {0.01, 1.0, 4.0, 30.0};
    float x[1000];
    size_t a, b;
    tt_seed(1);
    for (a = 0; a < sizeof lens / sizeof lens[0]; a++)
        for (b = 0; b < sizeof scales / sizeof scales[0]; b++) {
            int n = lens[a], j;
            float beta = 0.37f;
            ceas_obs o;
            ref_obs r;
            for (j = 0; j < n; j++) x[j] = (float)(scales[b] * tt_normal() + 3.0);
            /* a late maximum exercises the lane rescaling */
            if (n > 20) x[n - 3] = (float)(3.0 + 4.0 * scales[b]);
            CHECK_INT_EQ(ceas_row_observables(&o, x, n, beta), CEAS_OK);
            r = ref_row(x, n, beta);
            CHECK_NEAR(o.H, r.H, 2e-5 + 2e-6 * r.H);
            CHECK_CLOSE(o.n_eff, exp(r.H), 3e-5, 0);
            /* Var_p[s]: atol from fp32 cancellation of E[t^2] - E[t]^2 */
            CHECK_CLOSE(o.var_s, r.var_s, 1e-4, 1e-5 * r.sigma * r.sigma + 1e-9);
            CHECK_CLOSE(o.sigma_qk, r.sigma, 1e-4, 1e-6);
            CHECK_CLOSE(o.mean_s, r.mean, 1e-5, 1e-5 * r.sigma + 1e-6);
            CHECK_NEAR(o.log_n, log((double)n), 1e-6);
            CHECK_INT_EQ(o.n, n);
        }
    /* uniform logits: H = ln n, Var = sigma = 0 */
    for (a = 0; a < 100; a++) x[a] = 2.5f;
    {
        ceas_obs o;
        CHECK_INT_EQ(ceas_row_observables(&o, x, 100, 1.0f), CEAS_OK);
        CHECK_NEAR(o.H, log(100.0), 1e-5);
        CHECK_NEAR(o.var_s, 0.0, 1e-9);
        CHECK_NEAR(o.sigma_qk, 0.0, 1e-9);
    }
    /* one dominant logit: H ~ 0 */
    for (a = 0; a < 100; a++) x[a] = 0.0f;
    x[40] = 200.0f;
    {
        ceas_obs o;
        CHECK_INT_EQ(ceas_row_observables(&o, x, 100, 1.0f), CEAS_OK);
        CHECK_NEAR(o.H, 0.0, 1e-6);
        CHECK_NEAR(o.n_eff, 1.0, 1e-5);
    }
}

static void test_attention_observables_batched(void)
{
    enum { B = 2, H = 3, T = 37 };
    static float logits[B * H * T * T];
    static ceas_obs rows[B * H * T], heads[H], one;
    float beta[H] = {0.5f, 1.0f, 0.125f};
    int causal, b, h, i;
    tt_seed(2);
    tt_fill_normal(logits, B * H * T * T, 2.0);
    for (causal = 0; causal <= 1; causal++) {
        CHECK_INT_EQ(ceas_attention_observables(logits, B, H, T, causal, beta, rows, heads, NULL),
                     CEAS_OK);
        for (b = 0; b < B; b++)
            for (h = 0; h < H; h++)
                for (i = 0; i < T; i++) {
                    size_t r = ((size_t)b * H + h) * T + i;
                    int n = causal ? i + 1 : T;
                    CHECK_INT_EQ(ceas_row_observables(&one, logits + r * T, n, beta[h]), CEAS_OK);
                    CHECK(memcmp(&one, rows + r, sizeof one) == 0);
                }
        for (h = 0; h < H; h++) { /* pooled per head, against double */
            double sh = 0, sv = 0, sl = 0, nn = 0, sm = 0, ss = 0, mu;
            int cnt = 0;
            for (b = 0; b < B; b++)
                for (i = 0; i < T; i++) {
                    size_t r = ((size_t)b * H + h) * T + i;
                    int n = causal ? i + 1 : T, j;
                    ref_obs o = ref_row(logits + r * T, n, beta[h]);
                    sh += o.H; sv += o.var_s; sl += log((double)n); cnt++;
                    for (j = 0; j < n; j++) { nn += 1; sm += logits[r * T + j] / beta[h]; }
                }
            mu = sm / nn;
            for (b = 0; b < B; b++)
                for (i = 0; i < T; i++) {
                    size_t r = ((size_t)b * H + h) * T + i;
                    int n = causal ? i + 1 : T, j;
                    for (j = 0; j < n; j++) {
                        double d = logits[r * T + j] / beta[h] - mu;
                        ss += d * d;
                    }
                }
            CHECK_NEAR(heads[h].H, sh / cnt, 2e-5);
            CHECK_CLOSE(heads[h].var_s, sv / cnt, 1e-4, 1e-6);
            CHECK_CLOSE(heads[h].sigma_qk, sqrt(ss / nn), 1e-4, 0);
            CHECK_NEAR(heads[h].mean_s, mu, 1e-4 * sqrt(ss / nn));
            CHECK_NEAR(heads[h].log_n, sl / cnt, 1e-5);
            CHECK_INT_EQ(heads[h].n, (long long)nn);
        }
    }
    /* heads only, with and without a caller workspace: same numbers */
    {
        ceas_obs h2[H];
        size_t ws = ceas_attention_observables_workspace_size(B, H, T);
        void *w = malloc(ws);
        CHECK(ws == (size_t)B * H * T * sizeof(ceas_obs));
        CHECK_INT_EQ(ceas_attention_observables(logits, B, H, T, 1, beta, NULL, h2, w), CEAS_OK);
        CHECK(memcmp(h2, heads, sizeof h2) == 0);
        CHECK_INT_EQ(ceas_attention_observables(logits, B, H, T, 1, beta, NULL, h2, NULL), CEAS_OK);
        CHECK(memcmp(h2, heads, sizeof h2) == 0);
        free(w);
    }
    /* rows + pool == attention heads for a non-causal single head */
    {
        ceas_obs p;
        CHECK_INT_EQ(ceas_rows_observables(rows, logits, T, T, 1.0f), CEAS_OK);
        CHECK_INT_EQ(ceas_pool_observables(&p, rows, T), CEAS_OK);
        CHECK_INT_EQ(ceas_attention_observables(logits, 1, 1, T, 0, NULL, NULL, &one, NULL),
                     CEAS_OK);
        CHECK(memcmp(&p, &one, sizeof p) == 0);
    }
}

/* observables from per-row moments (the layout tensor.h's tk_attention_forward_stats
   writes), computed here in double from causal logits with a stride of 7, against
   ceas_attention_observables on the same logits: rows and pooled heads */
static void test_observables_from_moments(void)
{
    enum { B = 2, H = 3, T = 41, S = 7 };
    static float logits[B * H * T * T], mom[B * H * T * S];
    static ceas_obs r1[B * H * T], r2[B * H * T], h1[H], h2[H];
    float beta[H] = {0.5f, 1.0f, 0.125f};
    size_t r;
    int f;
    tt_seed(5);
    tt_fill_normal(logits, B * H * T * T, 2.0);
    for (r = 0; r < (size_t)B * H * T; r++) {
        const float *x = logits + r * T;
        int n = (int)(r % T) + 1, j;
        double mx = -HUGE_VAL, z = 0, e1 = 0, e2 = 0, mu = 0, m2 = 0;
        for (j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
        for (j = 0; j < n; j++) {
            double e = exp(x[j] - mx);
            z += e; e1 += e * x[j]; e2 += e * x[j] * x[j]; mu += x[j]; m2 += (double)x[j] * x[j];
        }
        e1 /= z;
        mu /= n;
        mom[r * S + 0] = (float)(log(z) + mx - e1);
        mom[r * S + 1] = (float)e1;
        mom[r * S + 2] = (float)(e2 / z - e1 * e1);
        mom[r * S + 3] = (float)mu;
        mom[r * S + 4] = (float)(m2 / n - mu * mu);
        mom[r * S + 5] = (float)n;
        mom[r * S + 6] = 12345.0f; /* beyond the six fields: ignored */
    }
    CHECK_INT_EQ(ceas_attention_observables(logits, B, H, T, 1, beta, r1, h1, NULL), CEAS_OK);
    CHECK_INT_EQ(ceas_attention_observables_from_moments(mom, B, H, T, S, beta, r2, h2, NULL), CEAS_OK);
    for (r = 0; r < (size_t)B * H * T; r++) {
        CHECK_NEAR(r2[r].H, r1[r].H, 2e-5);
        CHECK_CLOSE(r2[r].n_eff, r1[r].n_eff, 2e-5, 0);
        CHECK_CLOSE(r2[r].var_s, r1[r].var_s, 1e-4, 1e-5 * r1[r].sigma_qk * r1[r].sigma_qk);
        CHECK_CLOSE(r2[r].sigma_qk, r1[r].sigma_qk, 1e-4, 1e-6);
        CHECK_NEAR(r2[r].mean_s, r1[r].mean_s, 1e-4 * (1.0 + r1[r].sigma_qk));
        CHECK_NEAR(r2[r].log_n, r1[r].log_n, 1e-6);
        CHECK_INT_EQ(r2[r].n, r1[r].n);
    }
    for (f = 0; f < H; f++) {
        CHECK_NEAR(h2[f].H, h1[f].H, 2e-5);
        CHECK_CLOSE(h2[f].var_s, h1[f].var_s, 1e-4, 1e-6);
        CHECK_CLOSE(h2[f].sigma_qk, h1[f].sigma_qk, 1e-4, 0);
        CHECK_NEAR(h2[f].mean_s, h1[f].mean_s, 1e-4 * h1[f].sigma_qk);
        CHECK_INT_EQ(h2[f].n, h1[f].n);
    }
    /* heads only (own workspace) gives the same heads */
    CHECK_INT_EQ(ceas_attention_observables_from_moments(mom, B, H, T, S, beta, NULL, h1, NULL), CEAS_OK);
    CHECK(memcmp(h1, h2, sizeof h1) == 0);
    /* bad input */
    CHECK_INT_EQ(ceas_attention_observables_from_moments(mom, B, H, T, 5, beta, r2, NULL, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables_from_moments(NULL, B, H, T, S, beta, r2, NULL, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables_from_moments(mom, B, H, T, S, beta, NULL, NULL, NULL), CEAS_EINVAL);
    beta[1] = 0.0f;
    CHECK_INT_EQ(ceas_attention_observables_from_moments(mom, B, H, T, S, beta, r2, NULL, NULL), CEAS_EINVAL);
    beta[1] = 1.0f;
    mom[5 * S + 5] = 0.0f; /* a row with no keys */
    CHECK_INT_EQ(ceas_attention_observables_from_moments(mom, B, H, T, S, beta, r2, NULL, NULL), CEAS_EINVAL);
    CHECK(r2[5].H != r2[5].H);
    mom[5 * S + 5] = 6.0f;
    mom[9 * S + 2] = (float)NAN;
    CHECK_INT_EQ(ceas_attention_observables_from_moments(mom, B, H, T, S, beta, r2, h2, NULL), CEAS_EINVAL);
}

static void test_observables_thread_invariant(void)
{
#ifdef _OPENMP
    enum { B = 2, H = 4, T = 64 };
    static float logits[B * H * T * T];
    static ceas_obs r1[B * H * T], r2[B * H * T], h1[H], h2[H];
    int nt = omp_get_max_threads();
    tt_seed(3);
    tt_fill_normal(logits, B * H * T * T, 1.5);
    omp_set_num_threads(1);
    CHECK_INT_EQ(ceas_attention_observables(logits, B, H, T, 1, NULL, r1, h1, NULL), CEAS_OK);
    omp_set_num_threads(3);
    CHECK_INT_EQ(ceas_attention_observables(logits, B, H, T, 1, NULL, r2, h2, NULL), CEAS_OK);
    omp_set_num_threads(nt);
    CHECK(memcmp(r1, r2, sizeof r1) == 0);
    CHECK(memcmp(h1, h2, sizeof h1) == 0);
#else
    TEST_SKIP("built without OpenMP");
#endif
}

/* ---- beta: Newton, closed form, clip, margin ---- */

static ceas_config newton_cfg(void)
{
    ceas_config c = ceas_config_default();
    c.dbeta_max = 1e3f; /* no clip */
    c.u_min = 0.0f;     /* no margin */
    return c;
}

static void test_newton_reaches_target_quadratically(void)
{
    enum { R = 8, N = 256 };
    static float s[R * N], l[R * N];
    static ceas_obs rows[R];
    ceas_config c = newton_cfg();
    int trial;
    for (trial = 0; trial < 3; trial++) {
        double err[12];
        float beta = ceas_beta_init(64), h_target = (float)(log((double)N) - 1.1);
        int k, reached = -1;
        ceas_obs hd;
        tt_seed(10 + trial);
        tt_fill_normal(s, R * N, 8.0 * (1 + trial)); /* sigma_qk ~ sqrt(d_k) */
        for (k = 0; k < 12; k++) {
            int r;
            for (r = 0; r < R; r++) scaled(s + r * N, N, beta, l + r * N);
            CHECK_INT_EQ(ceas_rows_observables(rows, l, R, N, beta), CEAS_OK);
            CHECK_INT_EQ(ceas_pool_observables(&hd, rows, R), CEAS_OK);
            {   /* the measured H against double: the error is the controller's */
                double hr = 0;
                for (r = 0; r < R; r++) hr += ref_H(s + r * N, N, beta);
                CHECK_NEAR(hd.H, hr / R, 3e-5);
                err[k] = fabs(hr / R - h_target);
            }
            if (reached < 0 && err[k] < 1e-4) reached = k;
            CHECK_INT_EQ(ceas_newton_update(&c, beta, hd.H, hd.var_s, h_target, 1.0f, 0.0f,
                                            &beta),
                         CEAS_OK);
        }
        CHECK(reached >= 0 && reached <= 6);
        /* quadratic: while the error is above the fp32 floor, e_{k+1} <= C e_k^2 */
        for (k = 0; k + 1 < 12; k++)
            if (err[k] > 1e-3 && err[k] < 0.5) CHECK(err[k + 1] <= 1.0 * err[k] * err[k]);
        CHECK(err[11] < 2e-5);
    }
}

static double ref_H_rows(const float *s, int R, int N, double beta)
{
    double h = 0;
    int r;
    for (r = 0; r < R; r++) h += ref_H(s + (size_t)r * N, N, beta);
    return h / R;
}

static void test_beta_star_gaussian(void)
{
    /* Gaussian scores: beta* = sqrt(2 * drop) / sigma solves H(beta) = ln N - drop
       in the large-N limit. Sampling noise of H at N keys is about
       beta sigma exp(beta^2 sigma^2 / 2) / sqrt(N) per row; with 16 rows of 4096
       keys beta* is within 3% of the solution (seen: <= 2.2%). */
    enum { R = 16, N = 4096 };
    static float s[R * N];
    static ceas_obs rows[R];
    static const double sig[] = {0.5, 2.0, 8.0};
    static const double drops[] = {0.5, 1.1, 1.3};
    size_t a, d;
    tt_seed(4);
    for (a = 0; a < sizeof sig / sizeof sig[0]; a++)
        for (d = 0; d < sizeof drops / sizeof drops[0]; d++) {
            double target = log((double)N) - drops[d], lo = 0.5 / sig[a], hi = 3.0 / sig[a];
            float bs;
            ceas_obs o;
            int it;
            tt_fill_normal(s, R * N, sig[a]);
            CHECK_INT_EQ(ceas_rows_observables(rows, s, R, N, 1.0f), CEAS_OK);
            CHECK_INT_EQ(ceas_pool_observables(&o, rows, R), CEAS_OK);
            CHECK_CLOSE(o.sigma_qk, sig[a], 0.01, 0);
            for (it = 0; it < 40; it++) { /* H decreases in beta: bisection */
                double mid = 0.5 * (lo + hi);
                if (ref_H_rows(s, R, N, mid) > target) lo = mid; else hi = mid;
            }
            CHECK_INT_EQ(ceas_beta_star(o.sigma_qk, (float)drops[d], &bs), CEAS_OK);
            CHECK_CLOSE(bs, 0.5 * (lo + hi), 0.03, 0);
            /* |dH| ~ beta^2 sigma^2 |dbeta / beta| = 2 drop * 0.03 */
            CHECK_NEAR(ref_H_rows(s, R, N, bs), target, 2.0 * drops[d] * 0.03);
        }
    {
        float b = 7.0f;
        CHECK_INT_EQ(ceas_beta_star(2.0f, 2.0f, &b), CEAS_OK);
        CHECK_CLOSE(b, 1.0, 1e-6, 0);
        CHECK_NEAR(ceas_beta_init(64), 0.125, 1e-7);
        CHECK_NEAR(ceas_beta_to_temp(0.125f, 64), 1.0, 1e-6);
    }
}

static void test_newton_clip_margin_bounds(void)
{
    ceas_config c = ceas_config_default();
    float b = 0;
    /* clip: huge entropy excess -> step = +dbeta_max exactly */
    c.u_min = 0.0f;
    CHECK_INT_EQ(ceas_newton_update(&c, 1.0f, 5.0f, 0.01f, 1.0f, 1.0f, 0.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 1.0 + c.dbeta_max, 1e-6);
    CHECK_INT_EQ(ceas_newton_update(&c, 1.0f, 0.0f, 0.01f, 5.0f, 1.0f, 0.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 1.0 - c.dbeta_max, 1e-6);
    /* unclipped step equals the formula, kappa scales it */
    CHECK_INT_EQ(ceas_newton_update(&c, 2.0f, 3.0f, 4.0f, 2.9f, 1.5f, 0.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 2.0 + 1.5 * 0.1 / (2.0 * 4.0 + 1e-6), 1e-6);
    /* margin about beta_c = 1 with u_min = 0.05 */
    c.u_min = 0.05f;
    /* from below, landing inside: held at 0.95 */
    CHECK_INT_EQ(ceas_newton_update(&c, 0.9f, 1.0f, 1.0f, 0.88f, 1.0f, 1.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 0.95, 1e-6);
    /* from above, landing inside: held at 1.05 */
    CHECK_INT_EQ(ceas_newton_update(&c, 1.1f, 1.0f, 1.0f, 1.0f + 0.11f * 1.1f, 1.0f, 1.0f, &b),
                 CEAS_OK);
    CHECK_NEAR(b, 1.05, 1e-6);
    /* landing outside the band: untouched; crossing the whole band: allowed */
    CHECK_INT_EQ(ceas_newton_update(&c, 0.8f, 1.0f, 1.0f, 0.9f, 1.0f, 1.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 0.8 + 0.1 / (0.8 + 1e-6), 1e-6);
    CHECK_INT_EQ(ceas_newton_update(&c, 0.9f, 1.0f, 1.0f, 0.82f, 1.0f, 1.0f, &b), CEAS_OK);
    CHECK(b >= 1.05f);
    /* u >= u_min holds for any landing point */
    {
        int k;
        for (k = 0; k < 200; k++) {
            float beta = 0.5f + 0.005f * k, ht = 1.0f + 0.002f * (k % 50 - 25);
            CHECK_INT_EQ(ceas_newton_update(&c, beta, 1.0f, 1.0f, ht, 1.0f, 1.0f, &b), CEAS_OK);
            CHECK(fabs(b - 1.0) >= 0.05 * (1 - 1e-6));
            CHECK(fabs(b - beta) <= c.dbeta_max + 0.05f + 1e-6);
        }
    }
    /* hard bounds */
    c.u_min = 0.0f;
    c.beta_min = 0.5f;
    c.beta_max = 0.6f;
    CHECK_INT_EQ(ceas_newton_update(&c, 0.55f, 0.0f, 1.0f, 5.0f, 1.0f, 0.0f, &b), CEAS_OK);
    CHECK(b == 0.5f);
    CHECK_INT_EQ(ceas_newton_update(&c, 0.55f, 5.0f, 1.0f, 0.0f, 1.0f, 0.0f, &b), CEAS_OK);
    CHECK(b == 0.6f);
    /* trust region: at most a factor max_ratio per update */
    c.beta_min = 1e-4f;
    c.beta_max = 1e4f;
    c.dbeta_max = 100.0f;
    CHECK_INT_EQ(ceas_newton_update(&c, 0.1f, 0.0f, 0.01f, 5.0f, 1.0f, 0.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 0.05, 1e-7);
    CHECK_INT_EQ(ceas_newton_update(&c, 0.1f, 5.0f, 0.01f, 0.0f, 1.0f, 0.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 0.2, 1e-7);
    c.max_ratio = 0.0f; /* off: the clip alone */
    CHECK_INT_EQ(ceas_newton_update(&c, 0.1f, 5.0f, 0.01f, 0.0f, 1.0f, 0.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 100.1, 1e-4);
    c.max_ratio = 0.5f;
    CHECK_INT_EQ(ceas_config_validate(&c), CEAS_EINVAL);
    /* zeta */
    CHECK_CLOSE(ceas_zeta(0.01f, 0.05f, 1.0f), 20.0, 1e-6, 0);
    CHECK_CLOSE(ceas_zeta(0.25f, 0.05f, 0.5f), 2.0, 1e-6, 0);
}

static void test_schedules_and_presets(void)
{
    ceas_config c;
    CHECK_INT_EQ(ceas_config_preset(CEAS_PRESET_9K, &c), CEAS_OK);
    CHECK_NEAR(c.kappa_max, 2.2, 1e-6);
    CHECK_NEAR(c.dbeta_max, 0.75, 1e-6);
    CHECK_NEAR(c.u_min, 0.06, 1e-6);
    CHECK_NEAR(c.t_max, 1.8, 1e-6);
    CHECK_NEAR(c.t_inf, 1.05, 1e-6);
    CHECK_NEAR(c.tau_t, 600, 0);
    CHECK_INT_EQ(c.freeze_window, 50);
    CHECK_NEAR(ceas_kappa_at(&c, 0), 2.2, 1e-6);
    CHECK_NEAR(ceas_kappa_at(&c, (long long)c.tau_kappa), 1.0 + 1.2 * exp(-1.0), 1e-6);
    CHECK_NEAR(ceas_kappa_at(&c, 1000000), 1.0, 1e-6);
    CHECK_NEAR(ceas_t_gate_at(&c, 0), 1.8, 1e-6);
    CHECK_NEAR(ceas_t_gate_at(&c, 600), 1.05 + 0.75 * exp(-1.0), 1e-6);
    CHECK_NEAR(ceas_keep_q_at(&c, 0), 0.55, 1e-6);
    CHECK_NEAR(ceas_keep_q_at(&c, 1000), 0.65, 1e-6);
    CHECK_NEAR(ceas_keep_q_at(&c, 2000), 0.75, 1e-6);
    CHECK_NEAR(ceas_keep_q_at(&c, 99999), 0.75, 1e-6);
    CHECK_INT_EQ(ceas_config_preset(CEAS_PRESET_14M, &c), CEAS_OK);
    CHECK(c.kappa_max == 1.8f && c.dbeta_max == 0.5f && c.u_min == 0.05f && c.t_max == 1.6f &&
          c.t_inf == 1.02f && c.freeze_window == 100);
    CHECK_INT_EQ(ceas_config_preset(CEAS_PRESET_GPT, &c), CEAS_OK);
    CHECK(c.kappa_max == 1.5f && c.dbeta_max == 0.3f && c.u_min == 0.04f && c.t_max == 1.5f &&
          c.t_inf == 1.0f && c.freeze_window == 200);
    CHECK(c.ema_h == 64 && c.ema_sigma == 128);
    CHECK_INT_EQ(ceas_config_preset(7, &c), CEAS_EINVAL);
    c = ceas_config_default();
    CHECK_INT_EQ(ceas_config_validate(&c), CEAS_OK);
    CHECK(c.kappa_max == 1.8f);
}

/* ---- the controller ---- */

/* head observables of a synthetic model: scores s (L*H heads, R rows of N) */
static void synth_heads(ceas_obs *heads, const float *s, int LH, int R, int N,
                        const float *beta, float *scratch, ceas_obs *rows)
{
    int i, r;
    for (i = 0; i < LH; i++) {
        for (r = 0; r < R; r++)
            scaled(s + ((size_t)i * R + r) * N, N, beta[i], scratch + (size_t)r * N);
        ceas_rows_observables(rows, scratch, R, N, beta[i]);
        ceas_pool_observables(heads + i, rows, R);
    }
}

static void test_controller_converges(void)
{
    enum { L = 2, H = 3, R = 4, N = 128 };
    static float s[L * H * R * N], scratch[R * N];
    static ceas_obs rows[R], heads[L * H];
    ceas_config c = ceas_config_default();
    ceas_state st;
    int i, k, pass;
    for (pass = 0; pass < 2; pass++) {
        c = ceas_config_default();
        if (pass == 0) c.ema_h = c.ema_sigma = 1; /* raw observables */
        tt_seed(5);
        for (i = 0; i < L * H; i++) tt_fill_normal(s + (size_t)i * R * N, R * N, 2.0 + 3.0 * i);
        CHECK_INT_EQ(ceas_init(&st, &c, L, H, 16), CEAS_OK);
        for (i = 0; i < L * H; i++) CHECK_NEAR(st.beta[i], 0.25, 1e-7);
        for (k = 0; k < (pass == 0 ? 80 : 600); k++) {
            synth_heads(heads, s, L * H, R, N, st.beta, scratch, rows);
            CHECK_INT_EQ(ceas_step(&st, heads), CEAS_OK);
        }
        CHECK_INT_EQ(st.step, pass == 0 ? 80 : 600);
        synth_heads(heads, s, L * H, R, N, st.beta, scratch, rows);
        for (i = 0; i < L * H; i++) {
            float bc = ceas_beta_c(&st, i / H, i % H);
            CHECK(st.beta[i] > 0 && ceas__finite(st.beta[i]));
            CHECK_NEAR(heads[i].H, ceas_h_target(&st, i / H, i % H), pass == 0 ? 1e-4 : 2e-3);
            CHECK_NEAR(ceas_h_target(&st, i / H, i % H), log((double)N) - 1.1, 1e-5);
            CHECK(bc > 0 && fabs(st.beta[i] - bc) >= c.u_min * bc);
        }
        ceas_free(&st);
        CHECK(st.beta == NULL);
    }
    /* beta* initialiser lands near the target from the first step */
    CHECK_INT_EQ(ceas_init(&st, NULL, L, H, 16), CEAS_OK);
    synth_heads(heads, s, L * H, R, N, st.beta, scratch, rows);
    CHECK_INT_EQ(ceas_set_beta_star(&st, heads), CEAS_OK);
    synth_heads(heads, s, L * H, R, N, st.beta, scratch, rows);
    for (i = 0; i < L * H; i++) CHECK_NEAR(heads[i].H, log((double)N) - 1.1, 0.3);
    ceas_free(&st);
}

static ceas_obs mk_obs(float H, float log_n)
{
    ceas_obs o;
    o.H = H;
    o.n_eff = (float)exp(H);
    o.var_s = 1.0f;
    o.sigma_qk = 1.0f;
    o.mean_s = 0.0f;
    o.log_n = log_n;
    o.n = 100;
    return o;
}

static void test_head_freezing(void)
{
    enum { H = 4 };
    ceas_config c = ceas_config_default();
    ceas_state st;
    ceas_obs hd[H];
    int k;
    c.ema_h = c.ema_sigma = 1;
    c.freeze_window = 5;
    c.h_min = 3;
    CHECK_INT_EQ(ceas_init(&st, &c, 1, H, 64), CEAS_OK);
    /* mean H = 2.0125, freeze line 1.1125: heads 0 and 1 below */
    hd[0] = mk_obs(1.0f, 4.6f); hd[1] = mk_obs(1.05f, 4.6f);
    hd[2] = mk_obs(3.0f, 4.6f); hd[3] = mk_obs(3.0f, 4.6f);
    for (k = 1; k <= 5; k++) {
        CHECK_INT_EQ(ceas_step(&st, hd), CEAS_OK);
        CHECK_INT_EQ(st.below[0], k);
        /* frozen exactly at the w-th consecutive step, and the floor (3 active)
           lets only the sharpest head go */
        CHECK_INT_EQ(st.frozen[0], k >= 5);
        CHECK_INT_EQ(st.frozen[1], 0);
        CHECK_INT_EQ(st.frozen[2] + st.frozen[3], 0);
    }
    CHECK_NEAR(ceas_h_freeze(&st, 0, 0), 2.0125 - 0.9, 1e-6);
    /* head 0 exits the band: unfrozen at once; head 1 takes the free slot */
    hd[0] = mk_obs(2.5f, 4.6f);
    CHECK_INT_EQ(ceas_step(&st, hd), CEAS_OK);
    CHECK_INT_EQ(st.frozen[0], 0);
    CHECK_INT_EQ(st.below[0], 0);
    CHECK_INT_EQ(st.frozen[1], 1);
    /* a dip shorter than w never freezes */
    hd[1] = mk_obs(3.0f, 4.6f);
    CHECK_INT_EQ(ceas_step(&st, hd), CEAS_OK);
    CHECK_INT_EQ(st.frozen[1], 0);
    for (k = 0; k < 20; k++) {
        hd[0] = mk_obs(k % 4 == 3 ? 3.0f : 0.5f, 4.6f);
        CHECK_INT_EQ(ceas_step(&st, hd), CEAS_OK);
        CHECK_INT_EQ(st.frozen[0], 0);
    }
    ceas_free(&st);
    /* floor h_min across many random steps, and h_min >= H never freezes */
    c.h_min = 2;
    CHECK_INT_EQ(ceas_init(&st, &c, 2, H, 64), CEAS_OK);
    {
        ceas_obs h8[2 * H];
        int i, l, h;
        tt_seed(6);
        for (k = 0; k < 300; k++) {
            for (i = 0; i < 2 * H; i++) h8[i] = mk_obs((float)(0.3 + 3.0 * tt_uniform()), 4.6f);
            if (k > 100) for (i = 0; i < 2 * H; i++) h8[i].H = i % 2 ? 3.0f : 0.5f + 0.1f * i;
            CHECK_INT_EQ(ceas_step(&st, h8), CEAS_OK);
            for (l = 0; l < 2; l++) {
                int active = 0;
                for (h = 0; h < H; h++) active += !st.frozen[l * H + h];
                CHECK(active >= 2);
            }
        }
        /* steady pattern: heads 0 and 2 of each layer sit 1.25 nats below
           their layer's mean for > w steps: both frozen, floor 2 allows it */
        CHECK(st.frozen[0] && st.frozen[2] && !st.frozen[1] && !st.frozen[3]);
        CHECK(st.frozen[4] && st.frozen[6] && !st.frozen[5] && !st.frozen[7]);
    }
    ceas_free(&st);
}

/* feeds the same prefix of validation losses to a fresh state */
static void backoff_prefix(ceas_state *st, const ceas_config *c)
{
    static const float v[] = {3.0f, 2.9f, 2.86f, 2.75f, 2.72f, 2.6f};
    size_t i;
    int f;
    ceas_init(st, c, 1, 2, 64);
    for (i = 0; i < sizeof v / sizeof v[0]; i++) {
        CHECK_INT_EQ(ceas_report_val_loss(st, v[i], &f), CEAS_OK);
        CHECK_INT_EQ(f, 0);
    }
}

static void test_backoff_fires_exactly(void)
{
    ceas_config c = ceas_config_default();
    ceas_state st;
    ceas_obs hd[2];
    double a = 2.0 / (c.val_window + 1.0), m, v, xstar;
    int f, k;
    float k0;
    backoff_prefix(&st, &c);
    m = st.val_ema;
    v = st.val_var;
    CHECK(v > 0);
    /* rise of the short EMA > 0.2 sigma  <=>  loss > m + 0.2 sqrt(v) / a */
    xstar = m + c.backoff_sigma * sqrt(v) / a;
    CHECK_INT_EQ(ceas_report_val_loss(&st, (float)(xstar * (1 - 1e-5)), &f), CEAS_OK);
    CHECK_INT_EQ(f, 0);
    CHECK_INT_EQ(st.n_backoffs, 0);
    ceas_free(&st);
    backoff_prefix(&st, &c);
    k0 = ceas_kappa(&st);
    CHECK_NEAR(ceas_t_gate(&st), c.t_max, 1e-6);
    CHECK_INT_EQ(ceas_report_val_loss(&st, (float)(xstar * (1 + 1e-5)), &f), CEAS_OK);
    CHECK_INT_EQ(f, 1);
    CHECK_INT_EQ(st.n_backoffs, 1);
    CHECK_NEAR(ceas_t_gate(&st), c.t_max - 0.05, 1e-6);
    CHECK_NEAR(ceas_kappa(&st), 0.5 * k0, 1e-6);
    /* kappa halved for exactly 200 steps */
    hd[0] = mk_obs(2.0f, 4.0f);
    hd[1] = mk_obs(2.0f, 4.0f);
    for (k = 0; k < 200; k++) {
        CHECK(fabs(ceas_kappa(&st) - 0.5 * ceas_kappa_at(&c, st.step)) < 1e-6);
        CHECK_INT_EQ(ceas_step(&st, hd), CEAS_OK);
    }
    CHECK_NEAR(ceas_kappa(&st), ceas_kappa_at(&c, 200), 1e-6);
    CHECK_NEAR(ceas_t_gate(&st), ceas_t_gate_at(&c, 200) - 0.05, 1e-6);
    /* a falling loss never fires */
    for (k = 0; k < 20; k++) {
        CHECK_INT_EQ(ceas_report_val_loss(&st, 2.0f - 0.01f * k, &f), CEAS_OK);
        CHECK_INT_EQ(f, 0);
    }
    ceas_free(&st);
    /* too few reports: no sigma yet, never fires */
    CHECK_INT_EQ(ceas_init(&st, &c, 1, 2, 64), CEAS_OK);
    CHECK_INT_EQ(ceas_report_val_loss(&st, 1.0f, &f), CEAS_OK);
    CHECK_INT_EQ(ceas_report_val_loss(&st, 5.0f, &f), CEAS_OK);
    CHECK_INT_EQ(f, 0);
    ceas_free(&st);
}

/* ---- gating ---- */

static void test_token_mask(void)
{
    enum { B = 2, H = 3, T = 40 };
    static float score[B * H * T];
    static unsigned char keep[B * H * T];
    static const float qs[] = {0.0f, 0.3f, 0.55f, 1.0f};
    static const int mins[] = {0, 5, 16, 100};
    size_t a, b;
    tt_seed(7);
    for (a = 0; a < (size_t)(B * H * T); a++) score[a] = (float)(int)(10 * tt_uniform()) / 5.0f;
    for (a = 0; a < sizeof qs / sizeof qs[0]; a++)
        for (b = 0; b < sizeof mins / sizeof mins[0]; b++) {
            long long kept = 0, tot = 0;
            int bh, i, j, k = (int)ceil((double)qs[a] * T - 1e-4);
            float tg = 1.3f;
            if (k < (mins[b] < T ? mins[b] : T)) k = mins[b] < T ? mins[b] : T;
            CHECK_INT_EQ(ceas_token_mask(keep, score, B, H, T, tg, qs[a], mins[b], &kept, NULL),
                         CEAS_OK);
            for (bh = 0; bh < B * H; bh++) {
                const float *s = score + bh * T;
                int cnt = 0;
                for (i = 0; i < T; i++) {
                    /* rank of i: tokens with a higher score, or equal and earlier */
                    int rank = 0, want;
                    for (j = 0; j < T; j++)
                        rank += s[j] > s[i] || (s[j] == s[i] && j < i);
                    want = s[i] >= tg || rank < k;
                    CHECK_INT_EQ(keep[bh * T + i], want);
                    cnt += keep[bh * T + i];
                }
                CHECK(cnt >= k); /* top-q and the m_min floor */
            if (qs[a] == 0.55f && mins[b] == 0) CHECK_INT_EQ(k, 22);
                tot += cnt;
            }
            CHECK_INT_EQ(kept, tot);
        }
    /* gate scores */
    {
        ceas_obs rows[2];
        float bt[1] = {0.5f}, sc[2];
        rows[0] = mk_obs(2.0f, 4.0f);
        rows[0].sigma_qk = 3.0f;
        rows[1] = mk_obs(0.0f, 4.0f);
        /* the literal reading */
        CHECK_INT_EQ(ceas_gate_scores_mode(sc, rows, bt, 1, 1, 2, CEAS_GATE_RAW), CEAS_OK);
        CHECK_CLOSE(sc[0], 0.5 * 3.0 * sqrt(2.0 * 2.0), 1e-5, 0);
        CHECK_NEAR(sc[1], 0.0, 1e-6);
        /* the default is the normalised reading beta / beta* = beta sigma / sqrt(2 ln N) */
        CHECK_INT_EQ(ceas_gate_scores(sc, rows, bt, 1, 1, 2), CEAS_OK);
        CHECK_CLOSE(sc[0], 0.5 * 3.0 / sqrt(2.0 * 2.0), 1e-5, 0);
        /* N_eff = 1 (ln 0, floored at 1e-6): a one-key row scores high, so it is kept */
        CHECK_CLOSE(sc[1], 0.5 * 1.0 / sqrt(2.0 * 1e-6), 1e-5, 0);
        CHECK_INT_EQ(ceas_gate_scores_mode(sc, rows, bt, 1, 1, 2, 7), CEAS_EINVAL);
        CHECK_CLOSE(ceas_gate_score(0.25f, 4.0f, (float)exp(0.5)), 1.0, 1e-5, 0);
        rows[1].sigma_qk = (float)NAN;
        CHECK_INT_EQ(ceas_gate_scores(sc, rows, bt, 1, 1, 2), CEAS_EINVAL);
    }
}

/* ---- save / load ---- */

static void run_steps(ceas_state *st, int n, unsigned long long seed)
{
    enum { MAXLH = 16 };
    ceas_obs hd[MAXLH];
    int k, i, LH = st->n_layers * st->n_heads;
    tt_seed(seed);
    for (k = 0; k < n; k++) {
        for (i = 0; i < LH; i++) {
            hd[i] = mk_obs((float)(1.0 + 3.0 * tt_uniform()), 4.6f);
            hd[i].var_s = (float)(0.5 + tt_uniform());
            hd[i].sigma_qk = (float)(1.0 + tt_uniform());
        }
        CHECK_INT_EQ(ceas_step(st, hd), CEAS_OK);
        if (k % 7 == 0) ceas_report_val_loss(st, (float)(3.0 + 0.3 * tt_normal()), NULL);
    }
}

static void test_state_roundtrip(void)
{
    ceas_config c;
    ceas_state a, b;
    unsigned char *buf, *buf2;
    size_t n, w = 0, i;
    ceas_config_preset(CEAS_PRESET_9K, &c);
    c.freeze_window = 3;
    c.h_min = 1;
    CHECK_INT_EQ(ceas_init(&a, &c, 2, 4, 32), CEAS_OK);
    CHECK_INT_EQ(ceas_init(&b, NULL, 2, 4, 64), CEAS_OK);
    run_steps(&a, 60, 8);
    n = ceas_state_size(&a);
    CHECK(n > 0);
    buf = (unsigned char *)malloc(n);
    buf2 = (unsigned char *)malloc(n);
    CHECK_INT_EQ(ceas_state_save(&a, buf, n - 1, &w), CEAS_ERANGE);
    CHECK_INT_EQ(ceas_state_save(&a, buf, n, &w), CEAS_OK);
    CHECK(w == n);
    CHECK_INT_EQ(ceas_state_load(&b, buf, n), CEAS_OK);
    CHECK_INT_EQ(ceas_state_save(&b, buf2, n, &w), CEAS_OK);
    CHECK(memcmp(buf, buf2, n) == 0);
    CHECK(memcmp(&a.cfg, &b.cfg, sizeof a.cfg) == 0);
    CHECK(memcmp(a.beta, b.beta, 8 * sizeof(float)) == 0);
    CHECK(memcmp(a.frozen, b.frozen, 8) == 0);
    CHECK(a.step == b.step && a.d_k == b.d_k && a.val_ema == b.val_ema &&
          a.t_gate_offset == b.t_gate_offset && a.backoff_left == b.backoff_left);
    /* a resumed controller continues bit-exactly */
    run_steps(&a, 40, 9);
    run_steps(&b, 40, 9);
    CHECK_INT_EQ(ceas_state_save(&a, buf, n, &w), CEAS_OK);
    CHECK_INT_EQ(ceas_state_save(&b, buf2, n, &w), CEAS_OK);
    CHECK(memcmp(buf, buf2, n) == 0);
    /* every single-byte corruption and every truncation is rejected, and a
       rejected load leaves the state unchanged */
    for (i = 0; i < n; i++) {
        buf2[i] ^= 0x5A;
        CHECK_INT_EQ(ceas_state_load(&b, buf2, n), CEAS_EFORMAT);
        buf2[i] ^= 0x5A;
    }
    for (i = 0; i < n; i += 3) CHECK_INT_EQ(ceas_state_load(&b, buf2, i), CEAS_EFORMAT);
    CHECK_INT_EQ(ceas_state_save(&b, buf2, n, &w), CEAS_OK);
    CHECK(memcmp(buf, buf2, n) == 0);
    /* a buffer with a valid checksum but an invalid field (NaN beta) */
    {
        size_t off = n - 8 - (size_t)8 * (5 * 4 + 4 + 1); /* first beta */
        unsigned long long h = 1469598103934665603ULL;
        float nanv = (float)NAN;
        int j;
        memcpy(buf2 + off, &nanv, 4);
        for (i = 0; i < n - 8; i++) { h ^= buf2[i]; h *= 1099511628211ULL; }
        for (j = 0; j < 8; j++) buf2[n - 8 + j] = (unsigned char)(h >> (8 * j));
        CHECK_INT_EQ(ceas_state_load(&b, buf2, n), CEAS_EFORMAT);
    }
    /* another shape */
    ceas_free(&b);
    CHECK_INT_EQ(ceas_init(&b, NULL, 4, 2, 32), CEAS_OK);
    CHECK_INT_EQ(ceas_state_load(&b, buf, n), CEAS_EFORMAT);
    CHECK_INT_EQ(ceas_state_load(&b, NULL, n), CEAS_EINVAL);
    ceas_free(&a);
    ceas_free(&b);
    free(buf);
    free(buf2);
}

/* ---- bad input ---- */

static void test_bad_input(void)
{
    ceas_config c = ceas_config_default(), c2;
    ceas_state st;
    ceas_obs o, hd[2], rows[4];
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b = 42.0f, before[2];
    unsigned char keep[8];
    int k;
    /* observables */
    CHECK_INT_EQ(ceas_row_observables(NULL, x, 8, 1.0f), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_row_observables(&o, NULL, 8, 1.0f), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_row_observables(&o, x, 0, 1.0f), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_row_observables(&o, x, 8, 0.0f), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_row_observables(&o, x, 8, (float)NAN), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_rows_observables(rows, x, 0, 8, 1.0f), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_pool_observables(&o, rows, 0), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables(x, 1, 1, 0, 1, NULL, rows, NULL, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables(x, 1, 1, 2, 1, NULL, NULL, NULL, NULL), CEAS_EINVAL);
    for (k = 0; k < 3; k++) {
        float bad = k == 0 ? (float)NAN : (k == 1 ? (float)HUGE_VAL : -(float)HUGE_VAL);
        x[3] = bad;
        CHECK_INT_EQ(ceas_row_observables(&o, x, 8, 1.0f), CEAS_EINVAL);
        CHECK(o.H != o.H);
        CHECK_INT_EQ(ceas_attention_observables(x, 1, 1, 2, 0, NULL, rows, hd, NULL), CEAS_EINVAL);
        CHECK(rows[0].H == rows[0].H);      /* row 0 is fine */
        CHECK(rows[1].H != rows[1].H);      /* row 1 holds the bad value */
        CHECK(hd[0].H != hd[0].H);
    }
    x[3] = 4;
    CHECK_INT_EQ(ceas_logit_entropy(x, 1, 1, &b), CEAS_EINVAL);
    /* configs: inverted bounds, NaN knobs */
    c2 = c; c2.beta_min = 2.0f; c2.beta_max = 1.0f;
    CHECK_INT_EQ(ceas_config_validate(&c2), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_init(&st, &c2, 1, 2, 64), CEAS_EINVAL);
    c2 = c; c2.kappa_max = (float)NAN;
    CHECK_INT_EQ(ceas_config_validate(&c2), CEAS_EINVAL);
    c2 = c; c2.q_init = 1.5f;
    CHECK_INT_EQ(ceas_config_validate(&c2), CEAS_EINVAL);
    c2 = c; c2.u_min = 1.0f;
    CHECK_INT_EQ(ceas_config_validate(&c2), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_config_validate(NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_init(&st, &c, 0, 2, 64), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_init(&st, &c, 1, 2, 0), CEAS_EINVAL);
    /* Newton with NaN / Inf: error, output untouched */
    CHECK_INT_EQ(ceas_newton_update(&c, 1.0f, (float)NAN, 1.0f, 1.0f, 1.0f, 0.0f, &b),
                 CEAS_EINVAL);
    CHECK_INT_EQ(ceas_newton_update(&c, 1.0f, 1.0f, (float)HUGE_VAL, 1.0f, 1.0f, 0.0f, &b),
                 CEAS_EINVAL);
    CHECK_INT_EQ(ceas_newton_update(&c, -1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f, &b), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_newton_update(&c, 1.0f, 1.0f, -1.0f, 1.0f, 1.0f, 0.0f, &b), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_newton_update(&c2, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f, &b), CEAS_EINVAL);
    CHECK(b == 42.0f);
    /* var_s = 0 (uniform row): finite step, bounded by the clip */
    CHECK_INT_EQ(ceas_newton_update(&c, 1.0f, 3.0f, 0.0f, 1.0f, 1.0f, 0.0f, &b), CEAS_OK);
    CHECK_NEAR(b, 1.0 + c.dbeta_max, 1e-6);
    CHECK_INT_EQ(ceas_beta_star(0.0f, 1.0f, &b), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_beta_star(1.0f, (float)NAN, &b), CEAS_EINVAL);
    /* controller: a NaN/Inf/negative observable changes nothing */
    CHECK_INT_EQ(ceas_init(&st, &c, 1, 2, 64), CEAS_OK);
    hd[0] = mk_obs(2.0f, 4.0f);
    hd[1] = mk_obs(2.0f, 4.0f);
    CHECK_INT_EQ(ceas_step(&st, hd), CEAS_OK);
    memcpy(before, st.beta, sizeof before);
    for (k = 0; k < 5; k++) {
        ceas_obs h2[2];
        h2[0] = hd[0];
        h2[1] = hd[1];
        if (k == 0) h2[1].H = (float)NAN;
        if (k == 1) h2[0].var_s = (float)HUGE_VAL;
        if (k == 2) h2[1].sigma_qk = -(float)HUGE_VAL;
        if (k == 3) h2[0].log_n = (float)NAN;
        if (k == 4) h2[0].var_s = -1.0f;
        CHECK_INT_EQ(ceas_step(&st, h2), CEAS_EINVAL);
        CHECK(memcmp(before, st.beta, sizeof before) == 0);
        CHECK_INT_EQ(st.step, 1);
    }
    CHECK_INT_EQ(ceas_step(&st, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_set_beta_star(&st, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_report_val_loss(&st, (float)NAN, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_report_val_loss(&st, (float)HUGE_VAL, NULL), CEAS_EINVAL);
    CHECK(st.n_val == 0);
    /* extreme but finite observables: knobs stay finite and in bounds */
    for (k = 0; k < 50; k++) {
        ceas_obs h2[2];
        h2[0] = mk_obs(k % 2 ? 1e30f : 0.0f, 1e30f);
        h2[1] = mk_obs(1e-30f, 0.0f);
        h2[0].var_s = k % 3 ? 0.0f : 1e30f;
        h2[1].sigma_qk = k % 2 ? 0.0f : 1e-30f;
        CHECK_INT_EQ(ceas_step(&st, h2), CEAS_OK);
        CHECK(ceas__finite(st.beta[0]) && ceas__finite(st.beta[1]));
        CHECK(st.beta[0] >= c.beta_min && st.beta[0] <= c.beta_max);
        CHECK(st.beta[1] >= c.beta_min && st.beta[1] <= c.beta_max);
    }
    ceas_free(&st);
    CHECK_INT_EQ(ceas_step(&st, hd), CEAS_EINVAL); /* freed state */
    /* gating */
    CHECK_INT_EQ(ceas_token_mask(keep, x, 1, 1, 8, 1.0f, 1.5f, 0, NULL, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_token_mask(keep, x, 1, 1, 8, (float)NAN, 0.5f, 0, NULL, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_token_mask(keep, x, 1, 1, 0, 1.0f, 0.5f, 0, NULL, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_token_mask(keep, x, 1, 1, 8, 1.0f, 0.5f, -1, NULL, NULL), CEAS_EINVAL);
    x[3] = (float)NAN;
    CHECK_INT_EQ(ceas_token_mask(keep, x, 1, 1, 8, 1.0f, 0.5f, 0, NULL, NULL), CEAS_EINVAL);
    x[3] = 4;
    CHECK(strcmp(ceas_strerror(CEAS_EFORMAT), ceas_strerror(CEAS_OK)) != 0);
}

/* ---- multi-knob ---- */

static void test_multiknob(void)
{
    ceas_knob_config k = ceas_knob_config_default(), kb;
    float lr = 1.0f, out = -1.0f, g = 0;
    int i;
    CHECK_INT_EQ(ceas_knob_config_validate(&k), CEAS_OK);
    /* learning rate: inside the band nothing moves */
    CHECK_INT_EQ(ceas_lr_update(&k, 0.01f, 5.0f, &out), CEAS_OK); /* rho = 0.05 */
    CHECK(out == 0.01f);
    CHECK_INT_EQ(ceas_lr_update(&k, 0.01f, 7.9f, &out), CEAS_OK);  /* rho = 0.079 */
    CHECK(out == 0.01f);
    /* above: the formula (rho = 0.1, step 10 * (0.05 - 0.1) = -0.5) */
    CHECK_INT_EQ(ceas_lr_update(&k, 0.01f, 10.0f, &out), CEAS_OK);
    CHECK_CLOSE(out, 0.01 * exp(-0.5), 1e-6, 0);
    /* far above: capped at 1/max_factor per update; iterates into the band */
    lr = 1.0f;
    for (i = 0; i < 30; i++) {
        float prev = lr;
        CHECK_INT_EQ(ceas_lr_update(&k, lr, 10.0f, &lr), CEAS_OK);
        CHECK(lr >= prev / 2.0f * (1 - 1e-6) && lr <= prev * 2.0f * (1 + 1e-6));
    }
    CHECK(lr * 10.0f >= 0.02f && lr * 10.0f <= 0.08f);
    lr = 1e-6f;
    for (i = 0; i < 60; i++) CHECK_INT_EQ(ceas_lr_update(&k, lr, 10.0f, &lr), CEAS_OK);
    CHECK(lr * 10.0f >= 0.02f && lr * 10.0f <= 0.08f);
    /* gradient-noise scale: |G|^2 = 4, tr(Sigma) = 100 -> B_simple = 25 */
    CHECK_INT_EQ(ceas_gns(4.0f + 100.0f / 8.0f, 4.0f + 100.0f / 128.0f, 8.0f, 128.0f, &g), CEAS_OK);
    CHECK_CLOSE(g, 25.0, 1e-5, 0);
    CHECK_INT_EQ(ceas_gns(1.0f, 2.0f, 8.0f, 8.0f, &g), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_gns(1.0f, 2.0f, 8.0f, 16.0f, &g), CEAS_ERANGE); /* tr < 0: noise */
    /* batch: tracks the noise scale (g* = batch), capped by hardware */
    {
        float bsz = 32.0f;
        for (i = 0; i < 100; i++) CHECK_INT_EQ(ceas_batch_update(&k, bsz, 500.0f, &bsz), CEAS_OK);
        CHECK_CLOSE(bsz, 500.0, 0.01, 0);
        CHECK_INT_EQ(ceas_batch_update(&k, 64.0f, 64.0f, &bsz), CEAS_OK);
        CHECK(bsz == 64.0f);
        kb = k;
        kb.gns_target = 100.0f;
        CHECK_INT_EQ(ceas_batch_update(&kb, 64.0f, 150.0f, &bsz), CEAS_OK);
        CHECK_CLOSE(bsz, 64.0 * exp(0.5 * 0.5), 1e-6, 0);
        kb.batch_max = 128.0f;
        CHECK_INT_EQ(ceas_batch_update(&kb, 120.0f, 1e6f, &bsz), CEAS_OK);
        CHECK(bsz == 128.0f);
        kb.batch_min = 256.0f;
        CHECK_INT_EQ(ceas_batch_update(&kb, 120.0f, 1e6f, &bsz), CEAS_EINVAL); /* inverted */
    }
    /* parameter entropy and weight decay */
    {
        float w[64], H, Hn, wd;
        for (i = 0; i < 64; i++) w[i] = i % 2 ? 0.5f : -0.5f;
        CHECK_INT_EQ(ceas_param_entropy(w, 64, &H, &Hn), CEAS_OK);
        CHECK_NEAR(H, log(64.0), 1e-6);
        CHECK_NEAR(Hn, 1.0, 1e-6);
        for (i = 0; i < 64; i++) w[i] = i == 9 ? 3.0f : 0.0f;
        CHECK_INT_EQ(ceas_param_entropy(w, 64, &H, &Hn), CEAS_OK);
        CHECK_NEAR(H, 0.0, 1e-7);
        for (i = 0; i < 64; i++) w[i] = 0.0f;
        CHECK_INT_EQ(ceas_param_entropy(w, 64, &H, &Hn), CEAS_EINVAL);
        CHECK_INT_EQ(ceas_wd_update(&k, 0.1f, 0.9f, &wd), CEAS_OK);
        CHECK(wd == 0.1f);
        CHECK_INT_EQ(ceas_wd_update(&k, 0.1f, 0.5f, &wd), CEAS_OK);
        CHECK_CLOSE(wd, 0.1 + 0.01 * (0.875 - 0.5), 1e-6, 0);
        CHECK_INT_EQ(ceas_wd_update(&k, 0.0f, 1.0f, &wd), CEAS_OK);
        CHECK(wd == 0.0f); /* floor */
        kb = k;
        kb.wd_h_lo = 0.9f;
        kb.wd_h_hi = 0.8f;
        CHECK_INT_EQ(ceas_wd_update(&kb, 0.1f, 0.5f, &wd), CEAS_EINVAL);
        CHECK_INT_EQ(ceas_wd_update(&k, 0.1f, (float)NAN, &wd), CEAS_EINVAL);
    }
    /* label smoothing from logit entropy */
    {
        float lg[3 * 50], hn, p;
        for (i = 0; i < 150; i++) lg[i] = 1.0f;
        CHECK_INT_EQ(ceas_logit_entropy(lg, 3, 50, &hn), CEAS_OK);
        CHECK_NEAR(hn, 1.0, 1e-5);
        CHECK_NEAR(ceas_ls_target_at(&k, 0), 0.6, 1e-6);
        CHECK_NEAR(ceas_ls_target_at(&k, 100000), 0.3, 1e-6);
        CHECK_INT_EQ(ceas_ls_update(&k, 0, 0.1f, 0.62f, &p), CEAS_OK); /* in band */
        CHECK(p == 0.1f);
        CHECK_INT_EQ(ceas_ls_update(&k, 0, 0.1f, 0.4f, &p), CEAS_OK);  /* too sharp */
        CHECK_CLOSE(p, 0.1 + 0.1 * 0.2, 1e-6, 0);
        CHECK_INT_EQ(ceas_ls_update(&k, 100000, 0.1f, 0.9f, &p), CEAS_OK); /* too flat */
        CHECK_CLOSE(p, 0.1 - 0.1 * 0.6, 1e-5, 0);
        CHECK_INT_EQ(ceas_ls_update(&k, 100000, 0.01f, 0.9f, &p), CEAS_OK);
        CHECK(p == 0.0f);
        CHECK_INT_EQ(ceas_ls_update(&k, 0, 0.1f, (float)HUGE_VAL, &p), CEAS_EINVAL);
    }
    /* NaN never reaches a knob */
    out = 3.0f;
    CHECK_INT_EQ(ceas_lr_update(&k, 0.01f, (float)NAN, &out), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_lr_update(&k, (float)HUGE_VAL, 1.0f, &out), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_batch_update(&k, 32.0f, (float)NAN, &out), CEAS_EINVAL);
    CHECK(out == 3.0f);
    kb = k;
    kb.rho_min = 0.1f;
    kb.rho_max = 0.05f;
    CHECK_INT_EQ(ceas_lr_update(&kb, 0.01f, 1.0f, &out), CEAS_EINVAL);
    kb = k;
    kb.kappa_lr = (float)NAN;
    CHECK_INT_EQ(ceas_knob_config_validate(&kb), CEAS_EINVAL);
    CHECK(out == 3.0f);
}

/* ---- the doc block's usage example, verbatim ---- */

int ceas_example(const float *logits, int L, int B, int H, int T, int D, int steps);
int ceas_example(const float *logits, int L, int B, int H, int T, int D, int steps)
{
    ceas_config cfg = ceas_config_default();      // the 14.4M preset
    ceas_state st;
    ceas_obs *heads = (ceas_obs *)malloc(sizeof(ceas_obs) * (size_t)L * H);
    int l, t, rc = heads ? ceas_init(&st, &cfg, L, H, D) : CEAS_ENOMEM;
    if (rc != CEAS_OK) { free(heads); return rc; }
    for (t = 0; t < steps && rc == CEAS_OK; t++) {
        for (l = 0; l < L && rc == CEAS_OK; l++)   // per-head observables
            rc = ceas_attention_observables(logits + (size_t)l * B * H * T * T,
                                            B, H, T, 1, st.beta + l * H,
                                            NULL, heads + l * H, NULL);
        if (rc == CEAS_OK) rc = ceas_step(&st, heads); // new st.beta, st.frozen
    }
    ceas_free(&st);
    free(heads);
    return rc;
}

static void test_doc_example(void)
{
    enum { L = 2, B = 1, H = 2, T = 20 };
    static float lg[L * B * H * T * T];
    tt_seed(11);
    tt_fill_normal(lg, L * B * H * T * T, 1.0);
    CHECK_INT_EQ(ceas_example(lg, L, B, H, T, 16, 3), CEAS_OK);
    lg[T * T - 1] = (float)NAN; /* last key of the last row of layer 0, head 0 */
    CHECK_INT_EQ(ceas_example(lg, L, B, H, T, 16, 3), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_example(lg, L, B, H, T, 0, 3), CEAS_EINVAL);
}

/* ------------------------------------------------------------ issue 38: float64 sweep */
/* The row observables (ceas_attention_observables, one head, causal or not) against
   tests/ref64.h's float64 two-pass transcription, in: plain rows, beta at its clip
   bounds (1e-4: s ~ 1e4; 1e4: s ~ 1e-4), logits of zero variance, N = 1, sharp rows (one
   key 12..40 above the rest); and the Newton step (ceas_newton_update) against its own
   transcription at the bounds. 1e-4 relative to each tensor's max-norm (the observables
   are forward quantities; Var_p[s] = -dH/dbeta / beta is held to 1e-4 too). */
static void ceas_sweep_one(r64_report *rep, r64_ceas_case *c)
{
    ceas_obs *rows = (ceas_obs *)malloc(sizeof(ceas_obs) * (size_t)c->T), head;
    float *f = (float *)malloc(sizeof(float) * (size_t)c->T);
    static const char *nm[6] = {"CEAS H", "CEAS n_eff", "CEAS var_s", "CEAS sigma_qk", "CEAS mean_s", "CEAS log_n"};
    const double *ref[6];
    int k, i;
    ref[0] = c->H; ref[1] = c->neff; ref[2] = c->var; ref[3] = c->sig; ref[4] = c->mean; ref[5] = c->logn;
    CHECK_INT_EQ(ceas_attention_observables(c->logits, 1, 1, c->T, c->causal, &c->beta, rows, &head, NULL), CEAS_OK);
    for (k = 0; k < 6; k++) {
        double e;
        for (i = 0; i < c->T; i++)
            f[i] = k == 0 ? rows[i].H : k == 1 ? rows[i].n_eff : k == 2 ? rows[i].var_s
                 : k == 3 ? rows[i].sigma_qk : k == 4 ? rows[i].mean_s : rows[i].log_n;
        e = r64_relerr_f(f, ref[k], c->T);
        r64_note(rep, nm[k], c->name, e);
        if (!(e <= R64_TOL_FWD)) {
            fprintf(stderr, "  %s, %s: relative error %.3e\n", c->name, nm[k], e);
            CHECK(e <= R64_TOL_FWD);
        }
    }
    free(rows); free(f);
}

/* the documented Newton rule, in double (margin off: u_min 0) */
static double ceas_newton_ref(const ceas_config *c, double beta, double H, double var, double ht, double kappa)
{
    double step = kappa * (H - ht) / (beta * var + c->eps), b;
    if (step > c->dbeta_max) step = c->dbeta_max;
    if (step < -c->dbeta_max) step = -c->dbeta_max;
    b = beta + step;
    if (c->max_ratio > 1) {
        double lo = beta / c->max_ratio, hi = beta * c->max_ratio;
        b = b < lo ? lo : (b > hi ? hi : b);
    }
    return b < c->beta_min ? c->beta_min : (b > c->beta_max ? c->beta_max : b);
}

static void test_sweep_float64(void)
{
    r64_report rep;
    ceas_config cfg = ceas_config_default();
    int reg, i;
    double worst = 0.0;
    memset(&rep, 0, sizeof rep);
    for (reg = 0; reg < R64_CEAS_NREGIMES; reg++) {
        r64_ceas_case c;
        r64_ceas_make(&c, reg);
        ceas_sweep_one(&rep, &c);
        r64_ceas_free(&c);
    }
    /* Newton steps that end at, start at or cross the clip bounds */
    cfg.u_min = 0.0f;
    {
        static const float cases[][5] = { /* beta, H, var_s, h_target, kappa */
            {1e-4f, 3.0f, 0.5f, 1.0f, 1.0f},   {1e-4f, 0.5f, 2.0f, 3.0f, 1.8f},
            {1e4f, 3.0f, 1e-9f, 1.0f, 1.0f},   {1e4f, 0.5f, 0.0f, 3.0f, 1.0f},
            {0.3f, 4.0f, 0.0f, 1.0f, 1.0f},    {0.3f, 0.0f, 1e-3f, 4.0f, 1.8f},
            {2e-4f, 0.1f, 1e3f, 0.2f, 1.0f},   {5e3f, 2.0f, 1e-8f, 1.0f, 1.0f}};
        for (i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
            float got = 0.0f;
            double ref = ceas_newton_ref(&cfg, cases[i][0], cases[i][1], cases[i][2], cases[i][3], cases[i][4]), e;
            CHECK_INT_EQ(ceas_newton_update(&cfg, cases[i][0], cases[i][1], cases[i][2], cases[i][3],
                                            cases[i][4], 0.0f, &got), CEAS_OK);
            e = fabs((double)got - ref) / fabs(ref);
            if (e > worst) worst = e;
            CHECK(e <= R64_TOL_FWD);
            CHECK(got >= cfg.beta_min && got <= cfg.beta_max);
        }
    }
    r64_note(&rep, "CEAS Newton beta", "at the clip bounds", worst);
    r64_print(&rep, "CEAS CPU vs float64 (seed 004)");
}

/* Issue 37 rule 4: causal is a boolean; 2 or -1 was read as causal */
static void test_flags_range_checked(void)
{
    float logits[4 * 4];
    ceas_obs rows[4], head;
    float beta = 1.0f;
    int i;
    for (i = 0; i < 16; i++) logits[i] = 0.1f * (float)i;
    CHECK_INT_EQ(ceas_attention_observables(logits, 1, 1, 4, 2, &beta, rows, &head, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables(logits, 1, 1, 4, -1, &beta, rows, &head, NULL), CEAS_EINVAL);
    CHECK_INT_EQ(ceas_attention_observables(logits, 1, 1, 4, 1, &beta, rows, &head, NULL), CEAS_OK);
    CHECK_INT_EQ(ceas_attention_observables(logits, 1, 1, 4, 0, &beta, rows, &head, NULL), CEAS_OK);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_row_observables_match_double);
    TEST_RUN(test_attention_observables_batched);
    TEST_RUN(test_observables_thread_invariant);
    TEST_RUN(test_observables_from_moments);
    TEST_RUN(test_newton_reaches_target_quadratically);
    TEST_RUN(test_beta_star_gaussian);
    TEST_RUN(test_newton_clip_margin_bounds);
    TEST_RUN(test_schedules_and_presets);
    TEST_RUN(test_controller_converges);
    TEST_RUN(test_head_freezing);
    TEST_RUN(test_backoff_fires_exactly);
    TEST_RUN(test_token_mask);
    TEST_RUN(test_state_roundtrip);
    TEST_RUN(test_bad_input);
    TEST_RUN(test_multiknob);
    TEST_RUN(test_doc_example);
    TEST_RUN(test_sweep_float64);
    TEST_RUN(test_flags_range_checked);
    return TEST_END();
}
