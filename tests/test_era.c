/* tests/test_era.c - RPA and ERA priors (era.h): forward against double-precision
   re-implementations, every gradient against central finite differences of those
   re-implementations, the papers' properties (Theorem 1 / Proposition 1 of seed 003,
   Sinkhorn marginals, Proposition 1 of seed 000, length calibration), the inference
   cache, and edge / bad input. Issue 45: seed 000's fixed comparison priors (sinusoidal
   basis, relative distance) against hand-computed values and an entry-by-entry double
   reference, their shape, and refused input. */
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#define ERA_IMPLEMENTATION
#include "era.h"
#include "attnkit_test.h"
#include "ref64.h"

#include <float.h>

/* ------------------------------------------------------------ references ----- */

static double *dalloc(size_t n) { return (double *)calloc(n ? n : 1, sizeof(double)); }
static float *falloc(size_t n) { return (float *)calloc(n ? n : 1, sizeof(float)); }

static double dclamp(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

/* memberships (Listing 1 + projection), double */
static void ref_membership(const double *h, const double *W, const double *bv, const double *C,
                           const double *ls, int B, int T, int D, int P, int R, double *mu)
{
    int i, p, d, r;
    double *z = dalloc((size_t)P);
    for (i = 0; i < B * T; i++) {
        double mx = -HUGE_VAL, s = 0.0;
        for (p = 0; p < P; p++) {
            double a = bv ? bv[p] : 0.0;
            for (d = 0; d < D; d++) a += W[p * D + d] * h[i * D + d];
            z[p] = a;
        }
        for (r = 0; r < R; r++) {
            double d2 = 0.0, s2 = dclamp(exp(-2.0 * ls[r]), 1e-3, 1e3), lg;
            for (p = 0; p < P; p++) d2 += (z[p] - C[r * P + p]) * (z[p] - C[r * P + p]);
            lg = dclamp(-0.5 * d2 * s2, -30.0, 30.0);
            mu[i * R + r] = lg;
            if (lg > mx) mx = lg;
        }
        for (r = 0; r < R; r++) { mu[i * R + r] = exp(mu[i * R + r] - mx); s += mu[i * R + r]; }
        for (r = 0; r < R; r++) mu[i * R + r] /= s;
    }
    free(z);
}

static double ref_entropy(const double *mu, int n, int R)
{
    double H = 0.0;
    int i, r;
    for (i = 0; i < n; i++)
        for (r = 0; r < R; r++) {
            double v = mu[i * R + r];
            H -= v * log(v > 1e-8 ? v : 1e-8);
        }
    return H / n;
}

typedef struct {
    int R, K, iters, causal, legacy;
    double tau_align, posmix, pos_beta, tau_att, tau_min, tau_max, clip, scale, zeps, kappa;
} rpa_ref_cfg;

static void ref_phi(int T, int K, double *phi)
{
    int t, k;
    double w = 1.5 * T / K;
    if (w < 1.0) w = 1.0;
    for (t = 0; t < T; t++) {
        double s = 0.0;
        for (k = 0; k < K; k++) {
            double c = K > 1 ? (double)k * (T - 1) / (K - 1) : 0.0;
            double d = fabs(t - c) / w;
            phi[t * K + k] = d <= 1.0 ? 0.5 * (1.0 + cos(3.14159265358979323846 * d)) : 0.0;
            s += phi[t * K + k];
        }
        for (k = 0; k < K; k++) phi[t * K + k] /= s + 1e-6;
    }
}

/* z-score over the statistics set (unbiased std), applied to all entries */
static void ref_zscore(const double *x, int T, int causal, double zeps, double *y)
{
    double s = 0.0, n = 0.0, m, v = 0.0, sd;
    int i, j;
    for (i = 0; i < T; i++)
        for (j = 0; j < (causal ? i + 1 : T); j++) { s += x[i * T + j]; n += 1.0; }
    m = s / n;
    for (i = 0; i < T; i++)
        for (j = 0; j < (causal ? i + 1 : T); j++) v += (x[i * T + j] - m) * (x[i * T + j] - m);
    if (n < 2) {
        for (i = 0; i < T * T; i++) y[i] = 0.0;
        return;
    }
    sd = sqrt(v / (n - 1.0));
    for (i = 0; i < T * T; i++) y[i] = (x[i] - m) / (sd + zeps);
}

/* RPA bias (Listing 2 / 4), double. Pfix: (R,K) plan to use instead of Sinkhorn (the
   detached path), or NULL. Pout: (R,K) the plan used, or NULL. */
static void ref_rpa_bias(const rpa_ref_cfg *c, const double *mu, int B, int T, const double *Pfix,
                         double *Pout, double *bias)
{
    int R = c->R, K = c->K, t, r, k, j, it, b;
    double *mbar = dalloc((size_t)T * R), *phi = dalloc((size_t)T * K), *X = dalloc((size_t)R * K);
    double *M = dalloc((size_t)T * K), *x = dalloc((size_t)T * T), *y = dalloc((size_t)T * T);
    double tau = dclamp(c->tau_att, c->tau_min, c->tau_max), den = T - 1 > 1 ? T - 1 : 1;
    double beta = c->pos_beta > 0 ? c->pos_beta : 0;
    for (t = 0; t < T; t++)
        for (r = 0; r < R; r++) {
            double s = 0;
            for (b = 0; b < B; b++) s += mu[((size_t)b * T + t) * R + r];
            mbar[t * R + r] = s / B;
        }
    ref_phi(T, K, phi);
    if (Pfix) {
        memcpy(X, Pfix, sizeof(double) * R * K);
    } else {
        for (r = 0; r < R; r++)
            for (k = 0; k < K; k++) {
                double s = 0;
                for (t = 0; t < T; t++) s += mbar[t * R + r] * phi[t * K + k];
                X[r * K + k] = dclamp(exp(s / c->tau_align), 1e-9, 1e9);
            }
        for (it = 0; it < c->iters; it++) {
            for (r = 0; r < R; r++) {
                double s = 0;
                for (k = 0; k < K; k++) s += X[r * K + k];
                for (k = 0; k < K; k++) X[r * K + k] /= s + 1e-9;
            }
            for (k = 0; k < K; k++) {
                double s = 0;
                for (r = 0; r < R; r++) s += X[r * K + k];
                for (r = 0; r < R; r++) X[r * K + k] /= s + 1e-9;
            }
        }
    }
    if (Pout) memcpy(Pout, X, sizeof(double) * R * K);
    for (t = 0; t < T; t++)
        for (k = 0; k < K; k++) {
            double s = 0;
            for (r = 0; r < R; r++) s += mbar[t * R + r] * X[r * K + k];
            M[t * K + k] = s;
        }
    if (!c->legacy) {
        for (t = 0; t < T; t++)
            for (j = 0; j < T; j++) {
                double s = 0;
                for (k = 0; k < K; k++) s += M[t * K + k] * phi[j * K + k];
                if (c->posmix > 0)
                    s = (1 - c->posmix) * s + c->posmix * (-beta * abs(t - j) / den);
                x[t * T + j] = s;
            }
        ref_zscore(x, T, c->causal, c->zeps, y);
    } else {
        double sk = 1.0 / (1.0 + exp(-c->kappa));
        for (t = 0; t < T; t++)
            for (j = 0; j < T; j++) {
                double s = 0;
                for (b = 0; b < B; b++)
                    for (r = 0; r < R; r++)
                        s += mu[((size_t)b * T + t) * R + r] * mu[((size_t)b * T + j) * R + r];
                x[t * T + j] = s / B;
            }
        ref_zscore(x, T, c->causal, c->zeps, y);
        for (t = 0; t < T; t++)
            for (j = 0; j < T; j++)
                y[t * T + j] = sk * y[t * T + j] + (1 - sk) * (-beta * abs(t - j) / den);
    }
    for (t = 0; t < T * T; t++) bias[t] = dclamp(y[t] / tau, -c->clip, c->clip) * dclamp(c->scale, 0, 1);
    free(mbar); free(phi); free(X); free(M); free(x); free(y);
}

typedef struct {
    int R, nb, iters, causal;
    double eps, delta, zeps, sigma, alpha;
} era_ref_cfg;

static double ref_lse(const double *v, int n)
{
    double m = -HUGE_VAL, s = 0;
    int i;
    for (i = 0; i < n; i++) if (v[i] > m) m = v[i];
    for (i = 0; i < n; i++) s += exp(v[i] - m);
    return m + log(s);
}

/* ERA bias (Algorithm 1 of seed 003), double; plan_out (R,nb) optional */
static void ref_era_bias(const era_ref_cfg *c, const double *cen, int T, double *bias, double *plan_out)
{
    int R = c->R, nb = c->nb, t, r, b, it, s;
    double *mu = dalloc((size_t)T * R), *C = dalloc((size_t)R * nb), *f = dalloc((size_t)R), *g = dalloc((size_t)nb);
    double *buf = dalloc((size_t)(R > nb ? R : nb) + 1), *Pl = dalloc((size_t)R * nb), *row = dalloc((size_t)T);
    for (t = 0; t < T; t++) {
        double ph = (double)t / T, mx = -HUGE_VAL, sum = 0;
        for (r = 0; r < R; r++) {
            double d = ph - cen[r];
            mu[t * R + r] = -d * d / (2 * c->sigma * c->sigma);
            if (mu[t * R + r] > mx) mx = mu[t * R + r];
        }
        for (r = 0; r < R; r++) { mu[t * R + r] = exp(mu[t * R + r] - mx); sum += mu[t * R + r]; }
        for (r = 0; r < R; r++) mu[t * R + r] /= sum;
    }
    for (r = 0; r < R; r++)
        for (b = 0; b < nb; b++) {
            double d = cen[r] - (b + 0.5) / nb;
            C[r * nb + b] = d * d;
        }
    for (b = 0; b < nb; b++) g[b] = 0;
    for (it = 0; it < c->iters; it++) {
        for (r = 0; r < R; r++) {
            for (b = 0; b < nb; b++) buf[b] = (g[b] - C[r * nb + b]) / c->eps;
            f[r] = c->eps * log(1.0 / R) - c->eps * ref_lse(buf, nb);
        }
        for (b = 0; b < nb; b++) {
            for (r = 0; r < R; r++) buf[r] = (f[r] - C[r * nb + b]) / c->eps;
            g[b] = c->eps * log(1.0 / nb) - c->eps * ref_lse(buf, R);
        }
    }
    for (r = 0; r < R; r++)
        for (b = 0; b < nb; b++) Pl[r * nb + b] = exp((f[r] + g[b] - C[r * nb + b]) / c->eps);
    if (plan_out) memcpy(plan_out, Pl, sizeof(double) * R * nb);
    for (t = 0; t < T; t++) {
        double m = 0, v = 0, n = 0, sd;
        for (s = 0; s < T; s++) {
            int bl = (int)((long long)s * nb / T);
            double p = 0;
            for (r = 0; r < R; r++) p += mu[t * R + r] * Pl[r * nb + bl];
            row[s] = log(p + c->delta);
        }
        for (s = 0; s < (c->causal ? t + 1 : T); s++) { m += row[s]; n += 1; }
        m /= n;
        for (s = 0; s < (c->causal ? t + 1 : T); s++) v += (row[s] - m) * (row[s] - m);
        sd = sqrt(v / n);
        for (s = 0; s < T; s++) bias[t * T + s] = c->causal && s > t ? 0.0 : c->alpha * (row[s] - m) / (sd + c->zeps);
    }
    free(mu); free(C); free(f); free(g); free(buf); free(Pl); free(row);
}

/* ------------------------------------------------------------ helpers -------- */

static double maxabs_d(const double *x, int n)
{
    double m = 0;
    int i;
    for (i = 0; i < n; i++) if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

static double dotd(const double *a, const double *b, size_t n)
{
    double s = 0;
    size_t i;
    for (i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static void random_mu(float *mu, double *mud, int n, int R, double spread)
{
    int i, r;
    for (i = 0; i < n; i++) {
        double s = 0, v[64];
        for (r = 0; r < R; r++) { v[r] = exp(spread * tt_normal()); s += v[r]; }
        for (r = 0; r < R; r++) {
            mu[i * R + r] = (float)(v[r] / s);
            mud[i * R + r] = mu[i * R + r];
        }
    }
}

static rpa_ref_cfg ref_from_cfg(const era_rpa_config *c, const era_rpa_params *p)
{
    rpa_ref_cfg r;
    r.R = c->R; r.K = c->K > 0 ? c->K : c->R; r.iters = c->sinkhorn_iters;
    r.causal = c->zscore_causal; r.legacy = c->legacy;
    r.tau_align = c->tau_align; r.posmix = c->posmix; r.pos_beta = p->pos_beta;
    r.tau_att = p->tau_att; r.tau_min = c->tau_min; r.tau_max = c->tau_max;
    r.clip = c->bias_clip; r.scale = c->scale; r.zeps = c->zscore_eps; r.kappa = p->kappa;
    return r;
}

static era_ref_cfg eref_from_cfg(const era_era_config *c, const era_era_params *p)
{
    era_ref_cfg r;
    r.R = c->R; r.nb = c->nb; r.iters = c->iters; r.causal = c->zscore_causal;
    r.eps = c->eps; r.delta = c->delta; r.zeps = c->zscore_eps; r.sigma = p->sigma; r.alpha = p->alpha;
    return r;
}

/* ------------------------------------------------------------ forward -------- */

static void check_rpa_forward(int legacy, int causal, double posmix)
{
    int B = 3, T = 9, R = 3, n;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    float *mu, *bias, *rows;
    double *mud, *ref;
    rpa_ref_cfg rc;
    cfg.K = 4;
    cfg.legacy = legacy;
    cfg.zscore_causal = causal;
    cfg.posmix = (float)posmix;
    cfg.scale = 0.8f;
    p.tau_att = 0.9f;
    tt_seed(11 + legacy + 2 * causal);
    n = B * T;
    mu = falloc((size_t)n * R); mud = dalloc((size_t)n * R);
    bias = falloc((size_t)T * T); rows = falloc((size_t)T * T); ref = dalloc((size_t)T * T);
    random_mu(mu, mud, n, R, 1.0);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    rc = ref_from_cfg(&cfg, &p);
    ref_rpa_bias(&rc, mud, B, T, NULL, NULL, ref);
    CHECK_ALL_CLOSE(bias, ref, T * T, 1e-4, 1e-4);
    /* the row accessor reproduces the matrix bit for bit */
    CHECK_INT_EQ(era_rpa_rows(&st, 2, 5, rows), ERA_OK);
    CHECK(memcmp(rows, bias + 2 * T, sizeof(float) * 5 * T) == 0);
    era_rpa_state_free(&st);
    free(mu); free(mud); free(bias); free(rows); free(ref);
}

static void test_rpa_forward_matches_reference(void)
{
    check_rpa_forward(0, 0, 0.0);
    check_rpa_forward(0, 1, 0.0);
    check_rpa_forward(0, 0, 0.25);
    check_rpa_forward(1, 0, 0.0);
    check_rpa_forward(1, 1, 0.0);
}

static void test_rpa_bias_is_linear_in_batch_mean(void)
{
    /* B(T) from a batch equals B(T) from its mean membership with B = 1 */
    int B = 4, T = 16, R = 4, t, r, b;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    float *mu = falloc((size_t)B * T * R), *mb = falloc((size_t)T * R);
    float *b1 = falloc((size_t)T * T), *b2 = falloc((size_t)T * T);
    double *mud = dalloc((size_t)B * T * R);
    tt_seed(5);
    random_mu(mu, mud, B * T, R, 1.0);
    for (t = 0; t < T; t++)
        for (r = 0; r < R; r++) {
            double s = 0;
            for (b = 0; b < B; b++) s += mu[((size_t)b * T + t) * R + r];
            mb[t * R + r] = (float)(s / B);
        }
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, b1, &st, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mb, 1, T, b2, &st, NULL), ERA_OK);
    CHECK_ALL_CLOSE(b1, b2, T * T, 1e-4, 1e-5);
    era_rpa_state_free(&st);
    free(mu); free(mb); free(b1); free(b2); free(mud);
}

static void test_era_forward_matches_reference(void)
{
    int causal, T;
    for (causal = 0; causal < 2; causal++)
        for (T = 5; T <= 37; T += 16) {
            era_era_config cfg = era_era_config_default();
            float cen[8];
            era_era_params p;
            era_era_state st = era_era_state_init();
            float *bias = falloc((size_t)T * T), *rows = falloc((size_t)T * T);
            double *ref = dalloc((size_t)T * T), cd[8];
            era_ref_cfg rc;
            int r;
            cfg.R = 6; cfg.nb = 7; cfg.zscore_causal = causal;
            tt_seed(3 + T);
            for (r = 0; r < cfg.R; r++) { cen[r] = (float)tt_uniform(); cd[r] = cen[r]; }
            p = era_era_params_default(cen);
            p.alpha = 1.3f;
            CHECK_INT_EQ(era_era_forward(&cfg, &p, T, bias, &st, NULL), ERA_OK);
            rc = eref_from_cfg(&cfg, &p);
            ref_era_bias(&rc, cd, T, ref, NULL);
            CHECK_ALL_CLOSE(bias, ref, T * T, 1e-4, 2e-4);
            CHECK_INT_EQ(era_era_rows(&st, 1, T - 2, rows), ERA_OK);
            CHECK(memcmp(rows, bias + T, sizeof(float) * (size_t)(T - 2) * T) == 0);
            era_era_state_free(&st);
            free(bias); free(rows); free(ref);
        }
}

static void test_era_log_domain_no_underflow(void)
{
    /* eps = 0.05 (paper), nb = R = 32: a probability-domain Sinkhorn would need
       exp(-C/eps) ~ exp(-20); far centres push it to exp(-400) (underflow). The log
       domain keeps every entry finite and the marginals close. */
    era_era_config cfg = era_era_config_default();
    float cen[32];
    era_era_params p;
    era_era_state st = era_era_state_init();
    int T = 64, i, finite = 1, r;
    float *bias = falloc((size_t)T * T);
    for (r = 0; r < 32; r++) cen[r] = (float)(r < 16 ? -3.0 : 4.0); /* far from [0,1] */
    p = era_era_params_default(cen);
    cfg.eps = 0.01f;
    CHECK_INT_EQ(era_era_forward(&cfg, &p, T, bias, &st, NULL), ERA_OK);
    for (i = 0; i < T * T; i++) finite &= bias[i] == bias[i] && fabsf(bias[i]) < 1e30f;
    CHECK(finite);
    for (i = 0; i < 32 * 32; i++) finite &= st.plan[i] == st.plan[i];
    CHECK(finite);
    era_era_state_free(&st);
    free(bias);
}

/* ------------------------------------------------------------ gradients ------ */

/* analytic (fp32) gradient of L = sum G . bias against central differences of the
   double reference. */
static void check_rpa_grads(int legacy, int detach, int causal, double posmix)
{
    int B = 2, T = 7, R = 3, n, i;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    float *mu, *bias, *G, *dmu;
    double *mud, *Gd, *b0, *Pfix, *fd, h = 1e-6;
    rpa_ref_cfg rc;
    cfg.K = 4;
    cfg.sinkhorn_iters = 4;
    cfg.legacy = legacy;
    cfg.detach = detach;
    cfg.zscore_causal = causal;
    cfg.posmix = (float)posmix;
    cfg.bias_clip = 50.0f; /* no clipping inside the finite-difference steps */
    cfg.scale = 0.7f;
    cfg.tau_align = 0.3f;
    p.tau_att = 0.85f;
    p.pos_beta = 0.4f;
    p.kappa = 0.3f;
    tt_seed(100 + 8 * legacy + 4 * detach + 2 * causal + (posmix > 0));
    n = B * T;
    mu = falloc((size_t)n * R); mud = dalloc((size_t)n * R);
    bias = falloc((size_t)T * T); G = falloc((size_t)T * T); Gd = dalloc((size_t)T * T);
    dmu = falloc((size_t)n * R); fd = dalloc((size_t)n * R); b0 = dalloc((size_t)T * T);
    Pfix = dalloc((size_t)R * 4);
    random_mu(mu, mud, n, R, 1.5);
    tt_fill_normal(G, T * T, 1.0);
    for (i = 0; i < T * T; i++) Gd[i] = G[i];
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    memset(&g, 0, sizeof g);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu, &g, NULL), ERA_OK);
    rc = ref_from_cfg(&cfg, &p);
    ref_rpa_bias(&rc, mud, B, T, NULL, Pfix, b0); /* the plan at the base point */
    for (i = 0; i < n * R; i++) {
        double keep = mud[i], lp, lm;
        mud[i] = keep + h;
        ref_rpa_bias(&rc, mud, B, T, detach ? Pfix : NULL, NULL, b0);
        lp = dotd(b0, Gd, (size_t)T * T);
        mud[i] = keep - h;
        ref_rpa_bias(&rc, mud, B, T, detach ? Pfix : NULL, NULL, b0);
        lm = dotd(b0, Gd, (size_t)T * T);
        mud[i] = keep;
        fd[i] = (lp - lm) / (2 * h);
    }
    CHECK_ALL_CLOSE(dmu, fd, n * R, 2e-3, 2e-3 * maxabs_d(fd, n * R));
    /* scalars: tau_att, pos_beta (when used), kappa (legacy) */
    {
        double *ps[3];
        double base[3], fds[3], an[3];
        int k, used[3];
        ps[0] = &rc.tau_att; ps[1] = &rc.pos_beta; ps[2] = &rc.kappa;
        an[0] = g.dtau_att; an[1] = g.dpos_beta; an[2] = g.dkappa;
        used[0] = 1; used[1] = legacy || posmix > 0; used[2] = legacy;
        for (k = 0; k < 3; k++) {
            double lp, lm;
            base[k] = *ps[k];
            *ps[k] = base[k] + h;
            ref_rpa_bias(&rc, mud, B, T, NULL, NULL, b0);
            lp = dotd(b0, Gd, (size_t)T * T);
            *ps[k] = base[k] - h;
            ref_rpa_bias(&rc, mud, B, T, NULL, NULL, b0);
            lm = dotd(b0, Gd, (size_t)T * T);
            *ps[k] = base[k];
            fds[k] = (lp - lm) / (2 * h);
            if (used[k]) {
                CHECK(fabs(fds[k]) > 1e-3); /* the case exercises it */
                CHECK_CLOSE(an[k], fds[k], 2e-3, 1e-4);
            } else {
                CHECK_NEAR(an[k], 0.0, 1e-6);
                CHECK_NEAR(fds[k], 0.0, 1e-6);
            }
        }
    }
    era_rpa_state_free(&st);
    free(mu); free(mud); free(bias); free(G); free(Gd); free(dmu); free(fd); free(b0); free(Pfix);
}

static void test_rpa_grad_detach(void)
{
    check_rpa_grads(0, 1, 0, 0.0);
    check_rpa_grads(0, 1, 1, 0.0);
    check_rpa_grads(0, 1, 0, 0.3);
}

static void test_rpa_grad_through_sinkhorn(void)
{
    check_rpa_grads(0, 0, 0, 0.0);
    check_rpa_grads(0, 0, 1, 0.3);
}

static void test_rpa_grad_legacy(void)
{
    check_rpa_grads(1, 1, 0, 0.0);
    check_rpa_grads(1, 1, 1, 0.0);
}

static void test_rpa_grad_tau_clamped_and_clip(void)
{
    /* tau_att outside [tau_min, tau_max] is clamped: no gradient. Clipped entries pass
       no gradient: with a tiny clip every entry saturates and dmu is zero. */
    int B = 1, T = 6, R = 2, i, allzero = 1;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    float mu[12], G[36], dmu[12], bias[36];
    double mud[12];
    tt_seed(9);
    random_mu(mu, mud, B * T, R, 1.0);
    tt_fill_normal(G, 36, 1.0);
    p.tau_att = 5.0f;
    cfg.bias_clip = 50.0f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    memset(&g, 0, sizeof g);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, NULL, &g, NULL), ERA_OK);
    CHECK_NEAR(g.dtau_att, 0.0, 0.0);
    cfg.bias_clip = 1e-4f;
    p.tau_att = 1.0f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    memset(dmu, 0, sizeof dmu);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu, &g, NULL), ERA_OK);
    for (i = 0; i < 12; i++) allzero &= dmu[i] == 0.0f;
    CHECK(allzero);
    era_rpa_state_free(&st);
}

/* dtau_att_abs is the sum of |dtau_att's terms|: bias = scale y / tau where unclipped, so
   each term is -dbias bias / tau and the sum is sum |dbias bias| / tau; it bounds
   |dtau_att|, accumulates, and is 0 when tau is pinned */
static void test_rpa_dtau_abs(void)
{
    int B = 2, T = 6, R = 3, i;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    float mu[36], G[36], bias[36];
    double mud[36], ref = 0.0, refabs = 0.0;
    tt_seed(31);
    random_mu(mu, mud, B * T, R, 1.0);
    tt_fill_normal(G, 36, 1.0);
    p.tau_att = 0.7f;
    cfg.bias_clip = 1e6f; /* nothing clipped */
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    for (i = 0; i < T * T; i++) {
        ref -= (double)G[i] * bias[i] / st.tau;
        refabs += fabs((double)G[i] * bias[i]) / st.tau;
    }
    memset(&g, 0, sizeof g);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, NULL, &g, NULL), ERA_OK);
    CHECK(refabs > 0.0);
    CHECK_CLOSE(g.dtau_att_abs, refabs, 1e-5, 0.0);
    CHECK_CLOSE(g.dtau_att, ref, 0.0, 1e-5 * refabs);
    CHECK(g.dtau_att_abs >= fabsf(g.dtau_att));
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, NULL, &g, NULL), ERA_OK); /* accumulates */
    CHECK_CLOSE(g.dtau_att_abs, 2.0 * refabs, 1e-5, 0.0);
    era_rpa_state_free(&st);
    /* tau at its floor is pinned: no tau gradient, no magnitude */
    p.tau_att = cfg.tau_min * 0.5f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    memset(&g, 0, sizeof g);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, NULL, &g, NULL), ERA_OK);
    CHECK(g.dtau_att == 0.0f && g.dtau_att_abs == 0.0f);
    era_rpa_state_free(&st);
}

/* era_rpa_grads' *_to destinations: the same values, bit for bit, as the host fields
   (each *to += (float)sum, where the host path does field += (float)sum), the host fields
   untouched, dtau_att_abs_to optional; dtau_att_to without dpos_beta_to is refused */
static void test_rpa_scalars_to(void)
{
    int B = 2, T = 7, R = 3;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads gh, gt;
    float mu[42], G[49], bias[49], dmu_h[42], dmu_t[42];
    float tau_to = 0.25f, beta_to = -0.5f, abs_to = 1.0f;
    double mud[42];
    tt_seed(41);
    random_mu(mu, mud, B * T, R, 1.0);
    tt_fill_normal(G, 49, 1.0);
    cfg.posmix = 0.1f; /* a pos_beta gradient */
    p.tau_att = 0.9f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    memset(&gh, 0, sizeof gh);
    memset(dmu_h, 0, sizeof dmu_h);
    memset(dmu_t, 0, sizeof dmu_t);
    gh.dtau_att = 0.25f; gh.dpos_beta = -0.5f; gh.dtau_att_abs = 1.0f;
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu_h, &gh, NULL), ERA_OK);
    memset(&gt, 0, sizeof gt);
    gt.dtau_att_to = &tau_to;
    gt.dpos_beta_to = &beta_to;
    gt.dtau_att_abs_to = &abs_to;
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu_t, &gt, NULL), ERA_OK);
    CHECK(gh.dpos_beta != -0.5f && gh.dtau_att != 0.25f); /* both gradients are there */
    CHECK(memcmp(&tau_to, &gh.dtau_att, sizeof(float)) == 0);
    CHECK(memcmp(&beta_to, &gh.dpos_beta, sizeof(float)) == 0);
    CHECK(memcmp(&abs_to, &gh.dtau_att_abs, sizeof(float)) == 0);
    CHECK(gt.dtau_att == 0.0f && gt.dpos_beta == 0.0f && gt.dtau_att_abs == 0.0f);
    CHECK(memcmp(dmu_h, dmu_t, sizeof dmu_h) == 0);
    /* without dtau_att_abs_to: the others alike, nothing else written */
    gt.dtau_att_abs_to = NULL;
    tau_to = 0.25f; beta_to = -0.5f;
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, NULL, &gt, NULL), ERA_OK);
    CHECK(memcmp(&tau_to, &gh.dtau_att, sizeof(float)) == 0);
    CHECK(memcmp(&beta_to, &gh.dpos_beta, sizeof(float)) == 0);
    CHECK(gt.dtau_att_abs == 0.0f);
    /* dtau_att_to without dpos_beta_to */
    gt.dpos_beta_to = NULL;
    tau_to = 0.25f;
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, NULL, &gt, NULL), ERA_EINVAL);
    CHECK(tau_to == 0.25f);
    era_rpa_state_free(&st);
}

static void test_rpa_backward_accumulates(void)
{
    int B = 2, T = 5, R = 3, i;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g1, g2;
    float mu[30], G[25], d1[30], d2[30], bias[25], twice[30];
    double mud[30];
    tt_seed(21);
    random_mu(mu, mud, B * T, R, 1.0);
    tt_fill_normal(G, 25, 1.0);
    cfg.detach = 0;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    memset(&g1, 0, sizeof g1); memset(&g2, 0, sizeof g2);
    memset(d1, 0, sizeof d1); memset(d2, 0, sizeof d2);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, d1, &g1, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, d2, &g2, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, d2, &g2, NULL), ERA_OK);
    for (i = 0; i < 30; i++) twice[i] = 2.0f * d1[i];
    CHECK_ALL_CLOSE(d2, twice, 30, 1e-6, 1e-7);
    CHECK_CLOSE(g2.dtau_att, 2.0f * g1.dtau_att, 1e-6, 1e-7);
    era_rpa_state_free(&st);
}

static void test_membership_grads(void)
{
    int B = 2, T = 3, D = 5, P = 4, R = 3, n = B * T, i;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_grads g;
    era_mu_stats ms;
    float h[30], W[20], bv[4], C[12], ls[3], mu[18], z[24], Gm[18];
    float dh[30], dW[20], db[4], dC[12], dls[3];
    double hd[30], Wd[20], bd[4], Cd[12], lsd[3], mud[18], Gmd[18], dH = 0.37, hstep = 1e-6;
    double *params[5];
    float *grads[5];
    int sizes[5], k;
    tt_seed(77);
    tt_fill_normal(h, 30, 1.0);
    tt_fill_normal(W, 20, 0.5);
    tt_fill_normal(bv, 4, 0.2);
    tt_fill_normal(C, 12, 0.7);
    tt_fill_uniform(ls, 3, -0.2, 0.4);
    tt_fill_normal(Gm, 18, 1.0);
    for (i = 0; i < 30; i++) hd[i] = h[i];
    for (i = 0; i < 20; i++) Wd[i] = W[i];
    for (i = 0; i < 4; i++) bd[i] = bv[i];
    for (i = 0; i < 12; i++) Cd[i] = C[i];
    for (i = 0; i < 3; i++) lsd[i] = ls[i];
    for (i = 0; i < 18; i++) Gmd[i] = Gm[i];
    p.D = D; p.P = P; p.W = W; p.b = bv; p.centers = C; p.log_sigma = ls;
    CHECK_INT_EQ(era_membership_forward(&cfg, &p, mu, z, &ms, h, B, T), ERA_OK);
    ref_membership(hd, Wd, bd, Cd, lsd, B, T, D, P, R, mud);
    CHECK_ALL_CLOSE(mu, mud, 18, 1e-4, 1e-6);
    CHECK_CLOSE(ms.entropy, ref_entropy(mud, n, R), 1e-4, 1e-6);
    {   /* the statistics as sums (era_membership_forward_sums): added, /(B T) the same bits
           as era_mu_stats', the same memberships; NULL sums refused */
        double sums[3] = {0.0, 0.0, 0.0};
        float mu2[18], z2[24];
        CHECK_INT_EQ(era_membership_forward_sums(&cfg, &p, mu2, z2, sums, h, B, T), ERA_OK);
        CHECK(memcmp(mu2, mu, sizeof mu2) == 0 && memcmp(z2, z, sizeof z2) == 0);
        CHECK((float)(sums[0] / (double)(B * T)) == ms.entropy);
        CHECK((float)(sums[1] / (double)(B * T)) == ms.sat_frac);
        CHECK(sums[2] == (double)ms.nan_rows);
        CHECK(sums[0] > 0.0);
        CHECK_INT_EQ(era_membership_forward_sums(&cfg, &p, mu2, z2, sums, h, B, T), ERA_OK);
        CHECK((float)(sums[0] / (double)(2 * B * T)) == ms.entropy);
        CHECK_INT_EQ(era_membership_forward_sums(&cfg, &p, mu2, z2, NULL, h, B, T), ERA_EINVAL);
    }
    memset(dh, 0, sizeof dh); memset(dW, 0, sizeof dW); memset(db, 0, sizeof db);
    memset(dC, 0, sizeof dC); memset(dls, 0, sizeof dls);
    memset(&g, 0, sizeof g);
    g.dW = dW; g.db = db; g.dcenters = dC; g.dlog_sigma = dls;
    CHECK_INT_EQ(era_membership_backward(&cfg, &p, dh, &g, Gm, (float)dH, h, z, mu, B, T, NULL), ERA_OK);
    params[0] = hd; grads[0] = dh; sizes[0] = 30;
    params[1] = Wd; grads[1] = dW; sizes[1] = 20;
    params[2] = bd; grads[2] = db; sizes[2] = 4;
    params[3] = Cd; grads[3] = dC; sizes[3] = 12;
    params[4] = lsd; grads[4] = dls; sizes[4] = 3;
    for (k = 0; k < 5; k++) {
        double fd[32];
        for (i = 0; i < sizes[k]; i++) {
            double keep = params[k][i], lp, lm;
            params[k][i] = keep + hstep;
            ref_membership(hd, Wd, bd, Cd, lsd, B, T, D, P, R, mud);
            lp = dotd(mud, Gmd, 18) + dH * ref_entropy(mud, n, R);
            params[k][i] = keep - hstep;
            ref_membership(hd, Wd, bd, Cd, lsd, B, T, D, P, R, mud);
            lm = dotd(mud, Gmd, 18) + dH * ref_entropy(mud, n, R);
            params[k][i] = keep;
            fd[i] = (lp - lm) / (2 * hstep);
        }
        CHECK_ALL_CLOSE(grads[k], fd, sizes[k], 2e-3, 1e-3 * maxabs_d(fd, sizes[k]) + 1e-7);
    }
}

static void test_rpa_end_to_end_grad_h(void)
{
    /* h -> mu -> B(T), without detach: chain the two backward stages */
    int B = 2, T = 5, D = 4, P = 3, R = 3, n = B * T, i;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    float h[40], W[12], C[9], ls[3], mu[30], z[30], G[25], bias[25], dmu[30], dh[40];
    double hd[40], Wd[12], Cd[9], lsd[3], mud[30], Gd[25], b0[25], fd[40], hs = 1e-6;
    rpa_ref_cfg rc;
    tt_seed(31);
    tt_fill_normal(h, 40, 1.0);
    tt_fill_normal(W, 12, 0.6);
    tt_fill_normal(C, 9, 0.6);
    tt_fill_uniform(ls, 3, 0.0, 0.3);
    tt_fill_normal(G, 25, 1.0);
    for (i = 0; i < 40; i++) hd[i] = h[i];
    for (i = 0; i < 12; i++) Wd[i] = W[i];
    for (i = 0; i < 9; i++) Cd[i] = C[i];
    for (i = 0; i < 3; i++) lsd[i] = ls[i];
    for (i = 0; i < 25; i++) Gd[i] = G[i];
    p.D = D; p.P = P; p.W = W; p.b = NULL; p.centers = C; p.log_sigma = ls;
    cfg.detach = 0;
    cfg.bias_clip = 50.0f;
    cfg.posmix = 0.1f;
    CHECK_INT_EQ(era_membership_forward(&cfg, &p, mu, z, NULL, h, B, T), ERA_OK);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    memset(dmu, 0, sizeof dmu); memset(dh, 0, sizeof dh); memset(&g, 0, sizeof g);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu, &g, NULL), ERA_OK);
    CHECK_INT_EQ(era_membership_backward(&cfg, &p, dh, &g, dmu, 0.0f, h, z, mu, B, T, NULL), ERA_OK);
    rc = ref_from_cfg(&cfg, &p);
    for (i = 0; i < 40; i++) {
        double keep = hd[i], lp, lm;
        hd[i] = keep + hs;
        ref_membership(hd, Wd, NULL, Cd, lsd, B, T, D, P, R, mud);
        ref_rpa_bias(&rc, mud, B, T, NULL, NULL, b0);
        lp = dotd(b0, Gd, 25);
        hd[i] = keep - hs;
        ref_membership(hd, Wd, NULL, Cd, lsd, B, T, D, P, R, mud);
        ref_rpa_bias(&rc, mud, B, T, NULL, NULL, b0);
        lm = dotd(b0, Gd, 25);
        hd[i] = keep;
        fd[i] = (lp - lm) / (2 * hs);
    }
    (void)n;
    CHECK(maxabs_d(fd, 40) > 1e-3);
    CHECK_ALL_CLOSE(dh, fd, 40, 3e-3, 2e-3 * maxabs_d(fd, 40));
    era_rpa_state_free(&st);
}

static void check_era_grads(int causal, int T)
{
    era_era_config cfg = era_era_config_default();
    float cen[6], G[64 * 64], dcen[6], *bias;
    era_era_params p;
    era_era_state st = era_era_state_init();
    era_era_grads g;
    double cd[6], *Gd, *b0, fd[6], hs = 1e-6, lp, lm, keep;
    era_ref_cfg rc;
    int r, i, R = 6;
    cfg.R = R; cfg.nb = 5; cfg.zscore_causal = causal;
    tt_seed(50 + causal + T);
    for (r = 0; r < R; r++) { cen[r] = (float)(0.1 + 0.8 * tt_uniform()); cd[r] = cen[r]; }
    p = era_era_params_default(cen);
    p.sigma = 0.15f;
    p.alpha = 0.9f;
    bias = falloc((size_t)T * T);
    Gd = dalloc((size_t)T * T); b0 = dalloc((size_t)T * T);
    tt_fill_normal(G, T * T, 1.0);
    for (i = 0; i < T * T; i++) Gd[i] = G[i];
    CHECK_INT_EQ(era_era_forward(&cfg, &p, T, bias, &st, NULL), ERA_OK);
    memset(dcen, 0, sizeof dcen);
    memset(&g, 0, sizeof g);
    g.dcenters = dcen;
    CHECK_INT_EQ(era_era_backward(&cfg, &p, &st, G, &g, NULL), ERA_OK);
    rc = eref_from_cfg(&cfg, &p);
    for (r = 0; r < R; r++) {
        keep = cd[r];
        cd[r] = keep + hs; ref_era_bias(&rc, cd, T, b0, NULL); lp = dotd(b0, Gd, (size_t)T * T);
        cd[r] = keep - hs; ref_era_bias(&rc, cd, T, b0, NULL); lm = dotd(b0, Gd, (size_t)T * T);
        cd[r] = keep;
        fd[r] = (lp - lm) / (2 * hs);
    }
    CHECK(maxabs_d(fd, R) > 1e-2);
    CHECK_ALL_CLOSE(dcen, fd, R, 5e-3, 2e-3 * maxabs_d(fd, R));
    /* alpha and sigma */
    rc.alpha += hs; ref_era_bias(&rc, cd, T, b0, NULL); lp = dotd(b0, Gd, (size_t)T * T);
    rc.alpha -= 2 * hs; ref_era_bias(&rc, cd, T, b0, NULL); lm = dotd(b0, Gd, (size_t)T * T);
    rc.alpha += hs;
    CHECK_CLOSE(g.dalpha, (lp - lm) / (2 * hs), 1e-3, 1e-4);
    rc.sigma += hs; ref_era_bias(&rc, cd, T, b0, NULL); lp = dotd(b0, Gd, (size_t)T * T);
    rc.sigma -= 2 * hs; ref_era_bias(&rc, cd, T, b0, NULL); lm = dotd(b0, Gd, (size_t)T * T);
    rc.sigma += hs;
    CHECK_CLOSE(g.dsigma, (lp - lm) / (2 * hs), 5e-3, 1e-3 * fabs((lp - lm) / (2 * hs)) + 1e-4);
    era_era_state_free(&st);
    free(bias); free(Gd); free(b0);
}

/* era_era_grads' *_to on the CPU: *dlog_sigma_to += (float)dsigma * sigma and
   *dalpha_to += (float)dalpha, the same bits as the host fields of the same call give that
   way (what the model added before, from those fields); the host fields untouched; one
   destination alone refused, nothing written; config.status ignored by the CPU */
static void test_era_scalars_to(void)
{
    era_era_config cfg = era_era_config_default();
    float cen[5], G[64], bias[64], to[2] = {0.25f, -0.5f};
    era_era_params p;
    era_era_state st = era_era_state_init();
    era_era_grads gh, gt;
    int status = 7;
    cfg.R = 5; cfg.nb = 3;
    tt_seed(77);
    era_era_init_centers(5, cen);
    p = era_era_params_default(cen);
    p.sigma = 0.17f;
    tt_fill_normal(G, 64, 1.0);
    cfg.status = &status;
    CHECK_INT_EQ(era_era_forward(&cfg, &p, 8, bias, &st, NULL), ERA_OK);
    CHECK_INT_EQ(status, 7);
    memset(&gh, 0, sizeof gh);
    memset(&gt, 0, sizeof gt);
    CHECK_INT_EQ(era_era_backward(&cfg, &p, &st, G, &gh, NULL), ERA_OK);
    gt.dlog_sigma_to = &to[0];
    gt.dalpha_to = &to[1];
    CHECK_INT_EQ(era_era_backward(&cfg, &p, &st, G, &gt, NULL), ERA_OK);
    {
        volatile float prod = gh.dsigma * p.sigma;
        const float want0 = 0.25f + prod, want1 = -0.5f + gh.dalpha;
        CHECK(gh.dsigma != 0.0f && gh.dalpha != 0.0f);
        CHECK(memcmp(&to[0], &want0, sizeof(float)) == 0 && memcmp(&to[1], &want1, sizeof(float)) == 0);
    }
    CHECK(gt.dsigma == 0.0f && gt.dalpha == 0.0f);
    gt.dalpha_to = NULL;
    CHECK_INT_EQ(era_era_backward(&cfg, &p, &st, G, &gt, NULL), ERA_EINVAL);
    gt.dalpha_to = &to[1];
    gt.dlog_sigma_to = NULL;
    CHECK_INT_EQ(era_era_backward(&cfg, &p, &st, G, &gt, NULL), ERA_EINVAL);
    era_era_state_free(&st);
}

static void test_era_grads(void)
{
    check_era_grads(0, 11);
    check_era_grads(1, 11);
    check_era_grads(0, 16);
    check_era_grads(1, 3);
}

static void test_era_grad_paper_eps(void)
{
    /* the paper's eps = 0.05 and 5 iterations, through the log-domain Sinkhorn */
    era_era_config cfg = era_era_config_default();
    float cen[4], dcen[4], G[100], bias[100];
    era_era_params p;
    era_era_state st = era_era_state_init();
    era_era_grads g;
    double cd[4], Gd[100], b0[100], fd[4], hs = 1e-6;
    era_ref_cfg rc;
    int r, i, T = 10;
    cfg.R = 4; cfg.nb = 4;
    tt_seed(8);
    for (r = 0; r < 4; r++) { cen[r] = (float)(0.15 + 0.2 * r + 0.05 * tt_uniform()); cd[r] = cen[r]; }
    p = era_era_params_default(cen);
    p.sigma = 0.2f;
    tt_fill_normal(G, 100, 1.0);
    for (i = 0; i < 100; i++) Gd[i] = G[i];
    CHECK_INT_EQ(era_era_forward(&cfg, &p, T, bias, &st, NULL), ERA_OK);
    memset(dcen, 0, sizeof dcen); memset(&g, 0, sizeof g); g.dcenters = dcen;
    CHECK_INT_EQ(era_era_backward(&cfg, &p, &st, G, &g, NULL), ERA_OK);
    rc = eref_from_cfg(&cfg, &p);
    for (r = 0; r < 4; r++) {
        double keep = cd[r], lp, lm;
        cd[r] = keep + hs; ref_era_bias(&rc, cd, T, b0, NULL); lp = dotd(b0, Gd, 100);
        cd[r] = keep - hs; ref_era_bias(&rc, cd, T, b0, NULL); lm = dotd(b0, Gd, 100);
        cd[r] = keep;
        fd[r] = (lp - lm) / (2 * hs);
    }
    CHECK_ALL_CLOSE(dcen, fd, 4, 5e-3, 2e-3 * maxabs_d(fd, 4));
    era_era_state_free(&st);
}

/* ------------------------------------------------------------ properties ----- */

static void softmax_d(const double *x, int n, double *out)
{
    double m = -HUGE_VAL, s = 0;
    int i;
    for (i = 0; i < n; i++) if (x[i] > m) m = x[i];
    for (i = 0; i < n; i++) { out[i] = exp(x[i] - m); s += out[i]; }
    for (i = 0; i < n; i++) out[i] /= s;
}

static double kl_objective(const double *a, const double *z, const double *pi, int n, double tau)
{
    double v = 0;
    int i;
    for (i = 0; i < n; i++) {
        v += a[i] * z[i];
        if (a[i] > 0) v -= tau * a[i] * log(a[i] / pi[i]);
    }
    return v;
}

static void test_theorem1_kl_map(void)
{
    /* softmax(z + log pi) maximises a.z - KL(a || pi) on the simplex (seed 000
       Theorem 1); with a temperature, softmax((z + tau log pi)/tau) maximises
       a.z - tau KL(a || pi) (seed 003 Proposition 1). Random feasible perturbations
       never do better, and the optimum value is tau * logsumexp(z/tau + log pi). */
    int trial, L = 7, i, k, never_better = 1;
    double z[7], pi[7], a[7], b[7], x[7], w[7];
    tt_seed(1234);
    for (trial = 0; trial < 60; trial++) {
        double s = 0, tau = trial % 2 ? 1.0 : 0.3 + 2.0 * tt_uniform(), best, lse;
        for (i = 0; i < L; i++) { z[i] = 2.0 * tt_normal(); pi[i] = 0.05 + tt_uniform(); s += pi[i]; }
        for (i = 0; i < L; i++) pi[i] /= s;
        for (i = 0; i < L; i++) x[i] = (z[i] + tau * log(pi[i])) / tau;
        softmax_d(x, L, a);
        best = kl_objective(a, z, pi, L, tau);
        for (i = 0; i < L; i++) w[i] = z[i] / tau + log(pi[i]);
        lse = -HUGE_VAL;
        {
            double m = -HUGE_VAL, ss = 0;
            for (i = 0; i < L; i++) if (w[i] > m) m = w[i];
            for (i = 0; i < L; i++) ss += exp(w[i] - m);
            lse = m + log(ss);
        }
        CHECK_CLOSE(best, tau * lse, 1e-12, 1e-12);
        for (k = 0; k < 200; k++) {
            double amp = k < 100 ? 1e-3 : 1.0, ss = 0, v;
            for (i = 0; i < L; i++) { b[i] = a[i] * exp(amp * tt_normal()); ss += b[i]; }
            for (i = 0; i < L; i++) b[i] /= ss;
            if (k % 50 == 7) { /* a vertex of the simplex */
                for (i = 0; i < L; i++) b[i] = 0;
                b[k % L] = 1;
            }
            v = kl_objective(b, z, pi, L, tau);
            if (v > best + 1e-12) never_better = 0;
        }
    }
    CHECK(never_better);
}

static void test_row_shift_invariance(void)
{
    /* adding any per-row constant (and therefore the global mean of the z-score) to
       biased scores leaves the causal softmax unchanged */
    int T = 12, i, j;
    era_era_config cfg = era_era_config_default();
    float cen[32];
    era_era_params p;
    era_era_state st = era_era_state_init();
    float *bias = falloc((size_t)T * T);
    double s1[12], s2[12], a1[12], a2[12], maxd = 0;
    era_era_init_centers(32, cen);
    p = era_era_params_default(cen);
    CHECK_INT_EQ(era_era_forward(&cfg, &p, T, bias, &st, NULL), ERA_OK);
    tt_seed(4);
    for (i = 0; i < T; i++) {
        double c = 10.0 * tt_normal();
        for (j = 0; j <= i; j++) {
            double q = tt_normal();
            s1[j] = q + bias[i * T + j];
            s2[j] = q + bias[i * T + j] + c;
        }
        softmax_d(s1, i + 1, a1);
        softmax_d(s2, i + 1, a2);
        for (j = 0; j <= i; j++) if (fabs(a1[j] - a2[j]) > maxd) maxd = fabs(a1[j] - a2[j]);
    }
    CHECK(maxd < 1e-12);
    era_era_state_free(&st);
    free(bias);
}

static void test_sinkhorn_marginals_converge(void)
{
    /* RPA: max marginal error shrinks as the iteration count grows (R != K: row sums
       go to K/R); ERA: same for the log-domain plan */
    int its[6] = {1, 2, 4, 16, 64, 400}, i, T = 24, R = 3;
    float err[6], eerr[6];
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    float *mu = falloc((size_t)T * R);
    double *mud = dalloc((size_t)T * R);
    era_era_config ec = era_era_config_default();
    float cen[5] = {0.1f, 0.2f, 0.25f, 0.7f, 0.9f};
    era_era_params ep = era_era_params_default(cen);
    era_era_state es = era_era_state_init();
    tt_seed(2);
    random_mu(mu, mud, T, R, 2.0);
    cfg.K = 5;
    cfg.tau_align = 0.05f;
    ec.R = 5; ec.nb = 4; ec.eps = 0.1f;
    for (i = 0; i < 6; i++) {
        cfg.sinkhorn_iters = its[i];
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, T, NULL, &st, NULL), ERA_OK);
        err[i] = st.marginal_err;
        ec.iters = its[i];
        CHECK_INT_EQ(era_era_forward(&ec, &ep, T, NULL, &es, NULL), ERA_OK);
        eerr[i] = es.marginal_err;
    }
    for (i = 1; i < 6; i++) {
        CHECK(err[i] <= err[i - 1] * 1.0001f + 1e-7f);
        CHECK(eerr[i] <= eerr[i - 1] * 1.0001f + 1e-7f);
    }
    CHECK(err[0] > 1e-3f);
    CHECK(err[5] < 1e-4f);
    CHECK(eerr[0] > 1e-3f);
    CHECK(eerr[5] < 1e-5f);
    era_rpa_state_free(&st);
    era_era_state_free(&es);
    free(mu); free(mud);
}

static void test_proposition1_row_sum(void)
{
    /* seed 000 Proposition 1: A (N,K) with A 1 = 1/N, A^T 1 = 1/K; B = A A^T has row
       sums 1/(N K). A = a converged entropic plan (ERA, many iterations). */
    era_era_config ec = era_era_config_default();
    float cen[6] = {0.05f, 0.3f, 0.33f, 0.5f, 0.8f, 0.95f};
    era_era_params ep = era_era_params_default(cen);
    era_era_state es = era_era_state_init();
    int N = 6, K = 4, i, j, k;
    double rs[6], target = 1.0 / (N * K);
    ec.R = N; ec.nb = K; ec.eps = 0.2f; ec.iters = 500;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 8, NULL, &es, NULL), ERA_OK);
    CHECK(es.marginal_err < 1e-6f);
    for (i = 0; i < N; i++) {
        rs[i] = 0;
        for (j = 0; j < N; j++)
            for (k = 0; k < K; k++) rs[i] += (double)es.plan[i * K + k] * es.plan[j * K + k];
        CHECK_CLOSE(rs[i], target, 1e-4, 0.0);
    }
    era_era_state_free(&es);
}

/* smooth memberships as a function of t/T (the same "shape" at every length) */
static void smooth_mu(float *mu, int T, int R)
{
    int t, r;
    for (t = 0; t < T; t++) {
        double s = 0, v[16], x = (t + 0.5) / T;
        for (r = 0; r < R; r++) {
            double c = (r + 0.5) / R, d = x - c;
            v[r] = exp(-d * d / (2 * 0.04));
            s += v[r];
        }
        for (r = 0; r < R; r++) mu[t * R + r] = (float)(v[r] / s);
    }
}

static void stats_over(const float *b, int T, int causal, double *m, double *sd)
{
    double s = 0, s2 = 0, n = 0;
    int i, j;
    for (i = 0; i < T; i++)
        for (j = 0; j < (causal ? i + 1 : T); j++) { s += b[i * T + j]; s2 += (double)b[i * T + j] * b[i * T + j]; n += 1; }
    *m = s / n;
    *sd = sqrt((s2 - s * s / n) / (n - 1));
}

static void test_length_calibration(void)
{
    /* RPA: after the z-score the bias has mean 0 and std 1/tau at T and 2T (over the
       statistics set chosen), and its shape at 2T matches T (correlation); ERA: every
       row has mean 0 and std alpha at both lengths. Both z-score coverages. */
    int causal, T = 48, R = 4;
    for (causal = 0; causal < 2; causal++) {
        era_rpa_config cfg = era_rpa_config_default(R);
        era_rpa_params p = era_rpa_params_default();
        era_rpa_state st = era_rpa_state_init();
        float *mu1 = falloc((size_t)T * R), *mu2 = falloc((size_t)2 * T * R);
        float *b1 = falloc((size_t)T * T), *b2 = falloc((size_t)4 * T * T);
        double m1, s1, m2, s2, ma, sa, sxy = 0, sxx = 0, syy = 0, mx = 0, my = 0;
        int i, j, n = T * T;
        cfg.zscore_causal = causal;
        cfg.bias_clip = 100.0f;
        p.tau_att = 0.8f;
        smooth_mu(mu1, T, R);
        smooth_mu(mu2, 2 * T, R);
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu1, 1, T, b1, &st, NULL), ERA_OK);
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu2, 1, 2 * T, b2, &st, NULL), ERA_OK);
        stats_over(b1, T, causal, &m1, &s1);
        stats_over(b2, 2 * T, causal, &m2, &s2);
        CHECK_NEAR(m1, 0.0, 1e-4);
        CHECK_NEAR(m2, 0.0, 1e-4);
        CHECK_CLOSE(s1, 1.0 / 0.8, 1e-3, 0.0);
        CHECK_CLOSE(s2, 1.0 / 0.8, 1e-3, 0.0);
        /* the other coverage is not standardised in general (the option matters) */
        stats_over(b1, T, !causal, &ma, &sa);
        CHECK(fabs(ma) > 1e-3 || fabs(sa - 1.25) > 1e-3);
        for (i = 0; i < T; i++)
            for (j = 0; j < T; j++) { mx += b1[i * T + j]; my += b2[(2 * i) * 2 * T + 2 * j]; }
        mx /= n; my /= n;
        for (i = 0; i < T; i++)
            for (j = 0; j < T; j++) {
                double x = b1[i * T + j] - mx, y = b2[(2 * i) * 2 * T + 2 * j] - my;
                sxy += x * y; sxx += x * x; syy += y * y;
            }
        CHECK(sxy / sqrt(sxx * syy) > 0.95);
        era_rpa_state_free(&st);
        free(mu1); free(mu2); free(b1); free(b2);
    }
    for (causal = 0; causal < 2; causal++) {
        era_era_config ec = era_era_config_default();
        float cen[32];
        era_era_params ep;
        era_era_state es = era_era_state_init();
        int Ts[2], k, t, s;
        era_era_init_centers(32, cen);
        ep = era_era_params_default(cen);
        ep.alpha = 1.5f;
        ec.zscore_causal = causal;
        Ts[0] = 64; Ts[1] = 128;
        for (k = 0; k < 2; k++) {
            int TT = Ts[k], bad = 0;
            float *b = falloc((size_t)TT * TT);
            CHECK_INT_EQ(era_era_forward(&ec, &ep, TT, b, &es, NULL), ERA_OK);
            for (t = 1; t < TT; t++) { /* row 0 of a causal z-score has one entry */
                double m = 0, v = 0;
                int nn = causal ? t + 1 : TT;
                for (s = 0; s < nn; s++) m += b[t * TT + s];
                m /= nn;
                for (s = 0; s < nn; s++) v += (b[t * TT + s] - m) * (b[t * TT + s] - m);
                v = sqrt(v / nn);
                if (fabs(m) > 1e-4) bad++;
                if (v > 1e-3 && fabs(v - 1.5) > 2e-3) bad++; /* constant rows stay 0 */
            }
            CHECK_INT_EQ(bad, 0);
            free(b);
        }
        era_era_state_free(&es);
    }
}

/* ------------------------------------------------------------ apply / cache -- */

static void test_apply_and_reduce(void)
{
    int B = 2, H = 3, T = 5, i, b, h;
    size_t TT = 25;
    float *s = falloc(B * H * TT), *s0 = falloc(B * H * TT), *bias = falloc(H * TT);
    float *db = falloc(H * TT), *ds = falloc(B * H * TT);
    tt_seed(6);
    tt_fill_normal(s, (long)(B * H * TT), 1.0);
    memcpy(s0, s, sizeof(float) * B * H * TT);
    tt_fill_normal(bias, (long)(H * TT), 1.0);
    CHECK_INT_EQ(era_apply(s, bias, 0, B, H, T), ERA_OK);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (i = 0; i < (int)TT; i++)
                CHECK_NEAR(s[(b * H + h) * TT + i], s0[(b * H + h) * TT + i] + bias[i], 1e-6);
    memcpy(s, s0, sizeof(float) * B * H * TT);
    CHECK_INT_EQ(era_apply(s, bias, 1, B, H, T), ERA_OK);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (i = 0; i < (int)TT; i++)
                CHECK_NEAR(s[(b * H + h) * TT + i], s0[(b * H + h) * TT + i] + bias[h * TT + i], 1e-6);
    tt_fill_normal(ds, (long)(B * H * TT), 1.0);
    memset(db, 0, sizeof(float) * H * TT);
    CHECK_INT_EQ(era_reduce_grad(db, ds, 1, B, H, T), ERA_OK);
    for (h = 0; h < H; h++)
        for (i = 0; i < (int)TT; i++) {
            double e = 0;
            for (b = 0; b < B; b++) e += ds[(b * H + h) * TT + i];
            CHECK_NEAR(db[h * TT + i], e, 1e-5);
        }
    memset(db, 0, sizeof(float) * TT);
    CHECK_INT_EQ(era_reduce_grad(db, ds, 0, B, H, T), ERA_OK);
    {
        double e = 0;
        for (b = 0; b < B; b++) for (h = 0; h < H; h++) e += ds[(b * H + h) * TT + 7];
        CHECK_NEAR(db[7], e, 1e-5);
    }
    CHECK_INT_EQ(era_apply(NULL, bias, 0, B, H, T), ERA_EINVAL);
    CHECK_INT_EQ(era_apply(s, bias, 0, B, 0, T), ERA_EINVAL);
    free(s); free(s0); free(bias); free(db); free(ds);
}

static int mu_calls = 0;
static int calib_mu(void *user, int T, float *mbar)
{
    int R = *(int *)user;
    mu_calls++;
    smooth_mu(mbar, T, R);
    return ERA_OK;
}

static void test_cache(void)
{
    era_era_config ec = era_era_config_default();
    float cen[32];
    era_era_params ep;
    era_era_state es = era_era_state_init();
    era_cache c;
    const float *b1, *b2, *b3;
    float *fresh;
    int T = 40, R = 4;
    era_era_init_centers(32, cen);
    ep = era_era_params_default(cen);
    /* ERA: bit-identical to a fresh build; a hit returns the same buffer */
    CHECK_INT_EQ(era_cache_init_era(&c, 3 * sizeof(float) * 40 * 40, &ec, &ep), ERA_OK);
    cen[0] = 123.0f; /* parameters are frozen at init */
    CHECK_INT_EQ(era_cache_get(&c, T, &b1), ERA_OK);
    cen[0] = 0.5f / 32;
    fresh = falloc((size_t)T * T);
    CHECK_INT_EQ(era_era_forward(&ec, &ep, T, fresh, &es, NULL), ERA_OK);
    CHECK(b1 && memcmp(b1, fresh, sizeof(float) * T * T) == 0);
    CHECK_INT_EQ(era_cache_get(&c, T, &b2), ERA_OK);
    CHECK(b1 == b2);
    CHECK_INT_EQ(c.builds, 1);
    CHECK_INT_EQ(c.hits, 1);
    /* byte budget: 3 entries of T = 40 fit; T = 39, 38 fill it; 37 evicts the LRU */
    CHECK_INT_EQ(era_cache_get(&c, 39, &b3), ERA_OK);
    CHECK_INT_EQ(era_cache_get(&c, 38, &b3), ERA_OK);
    CHECK_INT_EQ(era_cache_get(&c, 40, &b3), ERA_OK); /* touch 40: 39 becomes LRU */
    CHECK_INT_EQ(era_cache_get(&c, 37, &b3), ERA_OK);
    CHECK(c.bytes <= c.budget);
    CHECK_INT_EQ(c.evictions, 1);
    CHECK_INT_EQ(era_cache_get(&c, 40, &b3), ERA_OK);
    CHECK_INT_EQ(c.builds, 4); /* 40 stayed */
    CHECK(memcmp(b3, fresh, sizeof(float) * T * T) == 0);
    /* an entry larger than the whole budget */
    CHECK_INT_EQ(era_cache_get(&c, 100, &b3), ERA_ERANGE);
    CHECK(b3 == NULL);
    CHECK_INT_EQ(era_cache_get(&c, 0, &b3), ERA_EINVAL);
    CHECK_INT_EQ(era_cache_get(&c, 1 << 20, &b3), ERA_ERANGE);
    era_cache_free(&c);
    free(fresh);
    era_era_state_free(&es);
    /* RPA: calibration memberships per length, frozen scalars */
    {
        era_rpa_config rc = era_rpa_config_default(R);
        era_rpa_params rp = era_rpa_params_default();
        era_rpa_state rs = era_rpa_state_init();
        float *mb = falloc((size_t)T * R), *fb = falloc((size_t)T * T);
        rc.posmix = 0.1f;
        rp.tau_att = 0.7f;
        mu_calls = 0;
        CHECK_INT_EQ(era_cache_init_rpa(&c, 1u << 20, &rc, &rp, calib_mu, &R), ERA_OK);
        rp.tau_att = 1.5f;
        CHECK_INT_EQ(era_cache_get(&c, T, &b1), ERA_OK);
        CHECK_INT_EQ(era_cache_get(&c, T, &b2), ERA_OK);
        CHECK_INT_EQ(mu_calls, 1);
        rp.tau_att = 0.7f;
        smooth_mu(mb, T, R);
        CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mb, 1, T, fb, &rs, NULL), ERA_OK);
        CHECK(b1 && memcmp(b1, fb, sizeof(float) * T * T) == 0);
        era_cache_free(&c);
        era_rpa_state_free(&rs);
        free(mb); free(fb);
        rc.legacy = 1;
        CHECK_INT_EQ(era_cache_init_rpa(&c, 1u << 20, &rc, &rp, calib_mu, &R), ERA_EINVAL);
    }
}

static void test_determinism(void)
{
    int T = 64, R = 4, B = 3;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g1, g2;
    float *mu = falloc((size_t)B * T * R), *b1 = falloc((size_t)T * T), *b2 = falloc((size_t)T * T);
    float *G = falloc((size_t)T * T), *d1 = falloc((size_t)B * T * R), *d2 = falloc((size_t)B * T * R);
    double *mud = dalloc((size_t)B * T * R);
    tt_seed(3);
    random_mu(mu, mud, B * T, R, 1.0);
    tt_fill_normal(G, T * T, 1.0);
    cfg.detach = 0;
    cfg.posmix = 0.1f;
    memset(&g1, 0, sizeof g1); memset(&g2, 0, sizeof g2);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, b1, &st, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, d1, &g1, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, b2, &st, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, d2, &g2, NULL), ERA_OK);
    CHECK(memcmp(b1, b2, sizeof(float) * T * T) == 0);
    CHECK(memcmp(d1, d2, sizeof(float) * B * T * R) == 0);
    CHECK(g1.dtau_att == g2.dtau_att && g1.dpos_beta == g2.dpos_beta);
    era_rpa_state_free(&st);
    free(mu); free(b1); free(b2); free(G); free(d1); free(d2); free(mud);
}

static void test_diagnostics(void)
{
    int T = 32, R = 4;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    float *mu = falloc((size_t)T * R);
    era_mu_stats ms;
    smooth_mu(mu, T, R);
    cfg.bias_clip = 100.0f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, T, NULL, &st, NULL), ERA_OK);
    CHECK(st.std_pre > 0.0f && st.std_pre < 1.0f); /* raw B(T) is small */
    CHECK_CLOSE(st.std_post, 1.0, 1e-3, 0.0);       /* z-scored, tau 1, no clip */
    CHECK(st.marginal_err >= 0.0f);
    CHECK_INT_EQ(era_mu_statistics(&ms, mu, 1, T, R, 1e-8f, 0.9f), ERA_OK);
    CHECK(ms.entropy > 0.0f && ms.entropy < (float)log(4.0) + 1e-6f);
    {
        float one[8] = {1, 0, 0, 0, 0.25f, 0.25f, 0.25f, 0.25f};
        CHECK_INT_EQ(era_mu_statistics(&ms, one, 1, 2, 4, 1e-8f, 0.9f), ERA_OK);
        CHECK_CLOSE(ms.sat_frac, 0.5, 0, 1e-7);
        CHECK_CLOSE(ms.entropy, 0.5 * log(4.0), 1e-6, 1e-7);
    }
    CHECK(era_warmin_scale(0, 100) == 0.0f);
    CHECK(era_warmin_scale(50, 100) == 0.5f);
    CHECK(era_warmin_scale(500, 100) == 1.0f);
    era_rpa_state_free(&st);
    free(mu);
}

/* ------------------------------------------------------------ edge cases ----- */

static int all_finite(const float *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) if (!(x[i] == x[i]) || fabsf(x[i]) > 1e30f) return 0;
    return 1;
}

static void test_edge_T1_and_small(void)
{
    era_rpa_config cfg = era_rpa_config_default(3);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    float mu[3 * 4] = {0.2f, 0.3f, 0.5f, 0.1f, 0.1f, 0.8f, 0.3f, 0.3f, 0.4f, 0.6f, 0.2f, 0.2f};
    float b[16], G[16], dmu[12];
    era_era_config ec = era_era_config_default();
    float cen[32];
    era_era_params ep;
    era_era_state es = era_era_state_init();
    era_era_grads eg;
    int causal;
    for (causal = 0; causal < 2; causal++) {
        /* T = 1: the std of one entry is undefined; the bias is 0, no NaN */
        cfg.zscore_causal = causal;
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 1, b, &st, NULL), ERA_OK);
        CHECK(b[0] == 0.0f);
        G[0] = 1.0f; dmu[0] = dmu[1] = dmu[2] = 0.0f;
        memset(&g, 0, sizeof g);
        CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu, &g, NULL), ERA_OK);
        CHECK(all_finite(dmu, 3) && g.dtau_att == 0.0f);
        cfg.legacy = 1;
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 1, b, &st, NULL), ERA_OK);
        CHECK(b[0] == 0.0f);
        cfg.legacy = 0;
    }
    /* K > T, R = 1 */
    cfg = era_rpa_config_default(3);
    cfg.K = 10;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_OK);
    CHECK(all_finite(b, 16));
    cfg = era_rpa_config_default(1);
    {
        float one[4] = {1, 1, 1, 1};
        CHECK_INT_EQ(era_rpa_forward(&cfg, &p, one, 1, 4, b, &st, NULL), ERA_OK);
        CHECK(all_finite(b, 16));
    }
    /* ERA: T = 1, R = 1, more blocks than positions */
    era_era_init_centers(32, cen);
    ep = era_era_params_default(cen);
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 1, b, &es, NULL), ERA_OK);
    CHECK(b[0] == 0.0f);
    memset(&eg, 0, sizeof eg);
    G[0] = 1.0f;
    CHECK_INT_EQ(era_era_backward(&ec, &ep, &es, G, &eg, NULL), ERA_OK);
    CHECK(eg.dalpha == 0.0f && eg.dsigma == eg.dsigma);
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_OK); /* nb = 32 > T = 4 */
    CHECK(all_finite(b, 16));
    ec.R = 1;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_OK);
    CHECK(all_finite(b, 16));
    era_rpa_state_free(&st);
    era_era_state_free(&es);
}

static void test_edge_bad_input(void)
{
    era_rpa_config cfg = era_rpa_config_default(2);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    float mu[8] = {0.5f, 0.5f, 0.1f, 0.9f, 0.3f, 0.7f, 0.6f, 0.4f}, b[16], b2[16], G[16];
    era_era_config ec = era_era_config_default();
    float cen[32];
    era_era_params ep;
    era_era_state es = era_era_state_init();
    float nanv = (float)NAN;
    memset(&g, 0, sizeof g);
    memset(G, 0, sizeof G);
    /* NULLs and dimensions */
    CHECK_INT_EQ(era_rpa_forward(NULL, &p, mu, 1, 4, b, &st, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, NULL, 1, 4, b, &st, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 0, 4, b, &st, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 0, b, &st, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, -3, b, &st, NULL), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, NULL, &g, NULL), ERA_ESTATE);
    /* temperatures: tau_align <= 0 / NaN is an error; tau_att <= 0 is clamped */
    cfg.tau_align = 0.0f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_EINVAL);
    cfg.tau_align = -1.0f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_EINVAL);
    cfg.tau_align = nanv;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_EINVAL);
    cfg = era_rpa_config_default(2);
    cfg.tau_min = 0.0f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_EINVAL);
    cfg = era_rpa_config_default(2);
    cfg.tau_min = 2.0f; cfg.tau_max = 1.0f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_EINVAL);
    cfg = era_rpa_config_default(2);
    cfg.posmix = 1.5f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_EINVAL);
    cfg = era_rpa_config_default(2);
    p.tau_att = nanv;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_EINVAL);
    p.tau_att = -2.0f;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_OK);
    p.tau_att = cfg.tau_min;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b2, &st, NULL), ERA_OK);
    CHECK(memcmp(b, b2, sizeof b) == 0);
    /* NaN memberships: treated as 1/R, output finite */
    mu[3] = nanv;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_OK);
    CHECK(all_finite(b, 16));
    mu[3] = 0.9f;
    /* state mismatch between forward and backward */
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_OK);
    cfg.sinkhorn_iters = 3;
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, NULL, &g, NULL), ERA_ESTATE);
    cfg = era_rpa_config_default(2);
    /* huge T: refused before any allocation */
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 1 << 20, NULL, &st, NULL), ERA_ERANGE);
    cfg.max_T = 0x7fffffff;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 0x7fffffff, NULL, &st, NULL) != ERA_OK, 1);
    /* mu (B,T,R) beyond addressable memory with an allowed T: ERA_ERANGE from the
       size_t checks, before mu is read or the state allocated (issue 23) */
    cfg = era_rpa_config_default(4096);
    cfg.max_T = 1 << 30;
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1 << 20, 1 << 30, NULL, &st, NULL), ERA_ERANGE);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 0x7fffffff, 1 << 29, NULL, &st, NULL),
                 ERA_ERANGE);
    /* rows out of range */
    cfg = era_rpa_config_default(2);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, 4, b, &st, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_rows(&st, 3, 2, b2), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_rows(&st, -1, 1, b2), ERA_EINVAL);
    CHECK_INT_EQ(era_rpa_rows(&st, 0, 1, NULL), ERA_EINVAL);

    era_era_init_centers(32, cen);
    ep = era_era_params_default(cen);
    ec.eps = 0.0f;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_EINVAL);
    ec.eps = -0.05f;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_EINVAL);
    ec = era_era_config_default();
    ep.sigma = 0.0f;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_EINVAL);
    ep.sigma = nanv;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_EINVAL);
    ep.sigma = 0.1f;
    cen[3] = nanv;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_EINVAL);
    cen[3] = 0.1f;
    ec.delta = 0.0f;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_EINVAL);
    ec = era_era_config_default();
    ec.iters = 0;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 4, b, &es, NULL), ERA_EINVAL);
    ec = era_era_config_default();
    CHECK_INT_EQ(era_era_forward(&ec, &ep, 1 << 20, NULL, &es, NULL), ERA_ERANGE);
    /* NULL grads are accepted (issue 22, as in polar.h); the stale state is still refused */
    CHECK_INT_EQ(era_era_backward(&ec, &ep, &es, G, NULL, NULL), ERA_ESTATE);
    CHECK_INT_EQ(era_era_backward(&ec, &ep, &es, NULL, NULL, NULL), ERA_EINVAL);
    CHECK(strcmp(era_strerror(ERA_ERANGE), "size out of range") == 0);
    CHECK(era_strerror(12345) != NULL);
    era_rpa_state_free(&st);
    era_era_state_free(&es);
}

static void test_nan_hidden_states(void)
{
    int B = 1, T = 4, D = 3, P = 2, R = 3, i;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    era_mu_stats ms;
    float h[12], W[6], C[6], ls[3] = {0, 0, 0}, mu[12], z[8], bias[16], G[16], dmu[12], dh[12];
    float dW[6];
    tt_seed(1);
    tt_fill_normal(h, 12, 1.0);
    tt_fill_normal(W, 6, 1.0);
    tt_fill_normal(C, 6, 1.0);
    h[4] = (float)NAN;
    h[9] = (float)INFINITY;
    p.D = D; p.P = P; p.W = W; p.centers = C; p.log_sigma = ls;
    CHECK_INT_EQ(era_membership_forward(&cfg, &p, mu, z, &ms, h, B, T), ERA_OK);
    CHECK(all_finite(mu, 12));
    CHECK(ms.nan_rows >= 1);
    for (i = 0; i < 3; i++) CHECK_NEAR(mu[3 + i], 1.0 / 3, 1e-7);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    CHECK(all_finite(bias, 16));
    tt_fill_normal(G, 16, 1.0);
    memset(dmu, 0, sizeof dmu); memset(dh, 0, sizeof dh); memset(dW, 0, sizeof dW);
    memset(&g, 0, sizeof g);
    g.dW = dW;
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu, &g, NULL), ERA_OK);
    CHECK_INT_EQ(era_membership_backward(&cfg, &p, dh, &g, dmu, 0.1f, h, z, mu, B, T, NULL), ERA_OK);
    CHECK(all_finite(dh, 3) && all_finite(dh + 6, 3)); /* finite rows keep finite grads */
    CHECK(dh[3] == 0.0f && dh[4] == 0.0f && dh[5] == 0.0f);
    CHECK_INT_EQ(era_membership_forward(&cfg, &p, mu, z, &ms, NULL, B, T), ERA_EINVAL);
    CHECK_INT_EQ(era_membership_backward(&cfg, &p, dh, &g, dmu, (float)NAN, h, z, mu, B, T, NULL), ERA_EINVAL);
    era_rpa_state_free(&st);
}

static void test_streaming_rows_large_T(void)
{
    /* the factored state needs O(T (R + K)) memory: T = 8192 without a T x T matrix;
       a row block agrees with a small full build on the shared rows' statistics */
    int T = 8192, R = 4, i;
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_era_config ec = era_era_config_default();
    float cen[32];
    era_era_params ep;
    era_era_state es = era_era_state_init();
    float *mu = falloc((size_t)T * R), *rows = falloc((size_t)4 * T);
    smooth_mu(mu, T, R);
    era_era_init_centers(32, cen);
    ep = era_era_params_default(cen);
    CHECK_INT_EQ(era_era_forward(&ec, &ep, T, NULL, &es, NULL), ERA_OK);
    CHECK(es.cap < (size_t)T * 100 * sizeof(float));
    CHECK_INT_EQ(era_era_rows(&es, T - 4, 4, rows), ERA_OK);
    CHECK(all_finite(rows, (size_t)4 * T));
    {
        double m = 0;
        for (i = 0; i < T; i++) m += rows[i];
        CHECK_NEAR(m / T, 0.0, 1e-3);
    }
    if (T > 4096) {
        /* the RPA statistics pass is O(T^2 K): keep it cheap under sanitizers */
        T = 2048;
        smooth_mu(mu, T, R);
    }
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, 1, T, NULL, &st, NULL), ERA_OK);
    CHECK(st.cap < (size_t)T * 64 * sizeof(float));
    CHECK_INT_EQ(era_rpa_rows(&st, 100, 4, rows), ERA_OK);
    CHECK(all_finite(rows, (size_t)4 * T));
    era_rpa_state_free(&st);
    era_era_state_free(&es);
    free(mu); free(rows);
}

static void test_type2(void)
{
    float h[6] = {1, -1, 0.5f, 0, 2, NAN}, U1[6] = {1, 0, 0, 0, 1, 0}, U2[2] = {1, -1}, u[2];
    CHECK_INT_EQ(era_type2_forward(u, h, U1, NULL, U2, 0.0f, 1, 2, 3, 2), ERA_OK);
    /* token 0: hidden = relu(1, -1) = (1, 0) -> sigmoid(1) */
    CHECK_CLOSE(u[0], 1.0 / (1.0 + exp(-1.0)), 1e-6, 0);
    CHECK(u[1] >= 0.0f && u[1] <= 1.0f);
    CHECK_INT_EQ(era_type2_forward(u, h, U1, NULL, NULL, 0.0f, 1, 2, 3, 2), ERA_EINVAL);
}

/* The z-score statistics of a row whose mean is far above its spread (a prior's rows
   are all positive, near 1/K): the partial sums must not cancel. Against a two-pass
   double variance, at several lengths (tails of the 8-lane / 256-block loop too). */
static void test_zscore_sums_no_cancellation(void)
{
    static const int ns[] = {1, 7, 8, 255, 256, 257, 1000, 4099};
    int k;
    for (k = 0; k < (int)(sizeof ns / sizeof ns[0]); k++) {
        int n = ns[k], i;
        float *x = (float *)malloc(sizeof(float) * (size_t)n);
        double s, s2, m = 0.0, v = 0.0, var;
        tt_seed(100 + (unsigned long long)n);
        for (i = 0; i < n; i++) x[i] = (float)(1000.0 + 1e-2 * tt_normal());
        era__sum_sq(x, n, &s, &s2);
        for (i = 0; i < n; i++) m += x[i];
        m /= n;
        for (i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
        v /= n;
        CHECK_CLOSE(s / n, m, 1e-9, 1e-9);
        var = s2 / n - (s / n) * (s / n);
        if (n > 1) CHECK_CLOSE(var, v, 1e-3, 1e-12);
        free(x);
    }
}

/* NULL grads are accepted by every backward (issue 22): the other outputs are the same
   as with a grads struct, and nothing else changes. */
static void test_null_grads_accepted(void)
{
    enum { B = 2, T = 9, R = 3 };
    era_rpa_config cfg = era_rpa_config_default(R);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    era_era_config ec = era_era_config_default();
    float cen[32], bias[T * T], G[T * T], mu[B * T * R], dmu1[B * T * R], dmu2[B * T * R];
    era_era_params ep;
    era_era_state es = era_era_state_init();
    int i;
    tt_seed(77);
    tt_fill_uniform(mu, B * T * R, 0.05, 1.0);
    tt_fill_normal(G, T * T, 1.0);
    memset(&g, 0, sizeof g);
    memset(dmu1, 0, sizeof dmu1);
    memset(dmu2, 0, sizeof dmu2);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu1, &g, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &p, &st, G, dmu2, NULL, NULL), ERA_OK);
    CHECK(memcmp(dmu1, dmu2, sizeof dmu1) == 0);
    CHECK(g.dtau_att != 0.0f);
    for (i = 0; i < B * T * R; i++) CHECK(dmu1[i] == dmu1[i]);
    era_era_init_centers(ec.R, cen);
    ep = era_era_params_default(cen);
    CHECK_INT_EQ(era_era_forward(&ec, &ep, T, bias, &es, NULL), ERA_OK);
    CHECK_INT_EQ(era_era_backward(&ec, &ep, &es, G, NULL, NULL), ERA_OK);
    era_rpa_state_free(&st);
    era_era_state_free(&es);
}

/* ------------------------------------------------------------ issue 38: float64 sweep */
/* ERA prior and its backward against tests/ref64.h's float64 transcription of seed 003
   (memberships, cost, log-domain Sinkhorn, p_t(s), RowZ; tape gradients) in: the
   defaults, tiny sigma (1e-3: one-hot memberships, logits down to -1e5), one regime
   (R = 1), a sharp plan (eps 0.01, 8 iterations, nb 16, T 100). 1e-4 forward (bias),
   2e-3 gradients (centres, sigma, alpha), relative to each tensor's max-norm.
   One regime (R = 1): every p_t(s) is 1/nb in exact arithmetic, each row of log(p + delta)
   is constant and RowZ's y - mean(y) cancels completely: the exact bias and every exact
   gradient are 0, so there the errors are absolute, against the same tolerances. (Before
   issue 38 the plan was formed from fp32-rounded potentials and the row z-score
   amplified that rounding by 1/zscore_eps: a bias of 0.15 alpha of noise, dalpha 4.3.)
*/
static void era_sweep_one(r64_report *rep, r64_era_case *c)
{
    era_era_config cfg = era_era_config_default();
    era_era_params par;
    era_era_state st = era_era_state_init();
    era_era_grads gr;
    const size_t TT = (size_t)c->T * c->T;
    float *bias = (float *)malloc(sizeof(float) * TT), *dc = (float *)calloc((size_t)c->R, sizeof(float));
    const int constant_rows = c->R == 1;
    double e[4], ea[4], ref2[2];
    float got2[2];
    static const char *nm[4] = {"ERA bias", "ERA dcenters", "ERA dsigma", "ERA dalpha"};
    int t;
    cfg.R = c->R; cfg.nb = c->nb; cfg.iters = c->iters; cfg.eps = (float)c->eps;
    cfg.delta = (float)c->delta; cfg.zscore_eps = (float)c->zeps;
    par = era_era_params_default(c->centers);
    par.sigma = c->sigma;
    par.alpha = c->alpha;
    memset(&gr, 0, sizeof gr);
    gr.dcenters = dc;
    CHECK_INT_EQ(era_era_forward(&cfg, &par, c->T, bias, &st, NULL), ERA_OK);
    CHECK_INT_EQ(era_era_backward(&cfg, &par, &st, c->dbias, &gr, NULL), ERA_OK);
    got2[0] = gr.dsigma; ref2[0] = c->dsigma;
    got2[1] = gr.dalpha; ref2[1] = c->dalpha;
    e[0] = r64_relerr_f(bias, c->bias, (long)TT);
    e[1] = r64_relerr_f(dc, c->dcenters, c->R);
    e[2] = r64_relerr_f(got2, ref2, 1);
    e[3] = r64_relerr_f(got2 + 1, ref2 + 1, 1);
    ea[0] = e[0] * r64_maxabs(c->bias, (long)TT);
    ea[1] = e[1] * r64_maxabs(c->dcenters, c->R);
    ea[2] = fabs((double)got2[0] - ref2[0]);
    ea[3] = fabs((double)got2[1] - ref2[1]);
    for (t = 0; t < 4; t++) {
        if (constant_rows) { /* the exact value is 0: absolute errors */
            printf("  ERA sweep, %s, %s: absolute error %.3e (exact value 0)\n", c->name, nm[t], ea[t]);
            CHECK(ea[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD));
            continue;
        }
        r64_note(rep, nm[t], c->name, e[t]);
        if (!(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD))) {
            fprintf(stderr, "  %s, %s: relative error %.3e\n", c->name, nm[t], e[t]);
            CHECK(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD));
        }
    }
    era_era_state_free(&st);
    free(bias); free(dc);
}

/* RPA prior and its backward against ref64.h's float64 transcription of seed 000's
   prior (batch mean, raised-cosine basis, clamped exp(S / tau_align), Sinkhorn, position
   mix, global z-score, temperature clamp, clip; tape gradients): the defaults (exact
   gradient through Sinkhorn), the clamp regime (exp(S / tau_align) above 1e9 for the
   matched pairs, found at T = 768 with the defaults, reached here at T = 96), tau_att on
   tau_min and tau_max and below tau_min, one regime (R = 1). 1e-4 forward, 2e-3
   gradients (dmu, dtau_att, dpos_beta) relative to each tensor's max-norm. */
static void rpa_sweep_one(r64_report *rep, r64_rpa_case *c)
{
    era_rpa_config cfg = era_rpa_config_default(c->R);
    era_rpa_params par = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads gr;
    const size_t TT = (size_t)c->T * c->T, nmu = (size_t)c->B * c->T * c->R;
    float *bias = (float *)malloc(sizeof(float) * TT), *dmu = (float *)calloc(nmu, sizeof(float));
    double e[4], ref2[2];
    float got2[2];
    static const char *nm[4] = {"RPA bias", "RPA dmu", "RPA dtau_att", "RPA dpos_beta"};
    int t;
    cfg.K = c->K; cfg.sinkhorn_iters = c->iters; cfg.detach = c->detach;
    cfg.tau_align = (float)c->tau_align; cfg.posmix = (float)c->posmix;
    cfg.bias_clip = (float)c->clip; cfg.tau_min = (float)c->tau_min; cfg.tau_max = (float)c->tau_max;
    cfg.scale = (float)c->scale; cfg.zscore_eps = (float)c->zeps;
    par.tau_att = c->tau_att;
    par.pos_beta = c->pos_beta;
    memset(&gr, 0, sizeof gr);
    CHECK_INT_EQ(era_rpa_forward(&cfg, &par, c->mu, c->B, c->T, bias, &st, NULL), ERA_OK);
    CHECK_INT_EQ(era_rpa_backward(&cfg, &par, &st, c->dbias, dmu, &gr, NULL), ERA_OK);
    if (c->clamp_frac > 0.0) {
        CHECK(st.clamp_frac > 0.0f); /* the regime really is the clamp regime */
        printf("  RPA sweep, %s: %.0f%% of exp(S / tau_align) at the clamp\n", c->name, 100.0 * c->clamp_frac);
    }
    got2[0] = gr.dtau_att; ref2[0] = c->dtau;
    got2[1] = gr.dpos_beta; ref2[1] = c->dbeta;
    e[0] = r64_relerr_f(bias, c->bias, (long)TT);
    e[1] = r64_relerr_f(dmu, c->dmu, (long)nmu);
    e[2] = r64_relerr_f(got2, ref2, 1);
    e[3] = r64_relerr_f(got2 + 1, ref2 + 1, 1);
    for (t = 0; t < 4; t++) {
        if (t == 3 && c->R == 1) {
            /* One regime: mbar = 1, so x = const + pos_beta v (the basis rows sum to 1 up
               to their 1e-6 guard) and the z-score removes pos_beta exactly but for zeps:
               dpos_beta is the residue of terms that cancel in exact arithmetic too.
               Held to its condition-aware bound 16 eps32 sum|terms| (tape's abs sweep). */
            double cb = 16.0 * R64_EPS32 * c->abs_dbeta, ea = fabs((double)got2[1] - ref2[1]);
            printf("  RPA sweep, %s, %s: absolute error %.3e (value %.3e, sum|terms| %.3e, bound %.3e)\n",
                   c->name, nm[t], ea, ref2[1], c->abs_dbeta, cb);
            CHECK(ea <= cb);
            continue;
        }
        r64_note(rep, nm[t], c->name, e[t]);
        if (!(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD))) {
            fprintf(stderr, "  %s, %s: relative error %.3e\n", c->name, nm[t], e[t]);
            CHECK(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD));
        }
    }
    era_rpa_state_free(&st);
    free(bias); free(dmu);
}

/* RPA memberships (era_membership_forward / _backward) against ref64.h's transcription
   of Listing 1: defaults, sharp (1/sigma^2 = 20, some logits at the -30 clamp) and tiny sigma
   (exp(-2 log_sigma) clamped at 1e3: no log_sigma gradient). 1e-4 forward (mu), 2e-3
   gradients (dh, dW, db, dcenters, dlog_sigma). Tiny sigma found that the backward
   lost a near-one-hot token's whole (1e-11) gradient to fp32 mu summing to 1 + 1e-11. */
static void mem_sweep_one(r64_report *rep, r64_mem_case *c)
{
    era_rpa_config cfg = era_rpa_config_default(c->R);
    era_rpa_params par = era_rpa_params_default();
    era_rpa_grads gr;
    const int n = c->B * c->T;
    float *mu = (float *)malloc(sizeof(float) * (size_t)n * c->R), *zp = (float *)malloc(sizeof(float) * (size_t)n * c->P);
    float *dh = (float *)calloc((size_t)n * c->D, sizeof(float)), *dW = (float *)calloc((size_t)c->P * c->D, sizeof(float));
    float *db = (float *)calloc((size_t)c->P, sizeof(float)), *dc = (float *)calloc((size_t)c->R * c->P, sizeof(float));
    float *dls = (float *)calloc((size_t)c->R, sizeof(float));
    static const char *nm[6] = {"memb mu", "memb dh", "memb dW", "memb db", "memb dcenters", "memb dlog_sigma"};
    double e[6];
    int t;
    par.D = c->D; par.P = c->P; par.W = c->W; par.b = c->b; par.centers = c->c; par.log_sigma = c->ls;
    memset(&gr, 0, sizeof gr);
    gr.dW = dW; gr.db = db; gr.dcenters = dc; gr.dlog_sigma = dls;
    CHECK_INT_EQ(era_membership_forward(&cfg, &par, mu, zp, NULL, c->h, c->B, c->T), ERA_OK);
    CHECK_INT_EQ(era_membership_backward(&cfg, &par, dh, &gr, c->dmu, 0.0f, c->h, zp, mu, c->B, c->T, NULL), ERA_OK);
    e[0] = r64_relerr_f(mu, c->mu, (long)n * c->R);
    e[1] = r64_relerr_f(dh, c->dh, (long)n * c->D);
    e[2] = r64_relerr_f(dW, c->dW, (long)c->P * c->D);
    e[3] = r64_relerr_f(db, c->db, c->P);
    e[4] = r64_relerr_f(dc, c->dc, (long)c->R * c->P);
    e[5] = r64_relerr_f(dls, c->dls, c->R);
    for (t = 0; t < 6; t++) {
        r64_note(rep, nm[t], c->name, e[t]);
        if (!(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD))) {
            fprintf(stderr, "  %s, %s: relative error %.3e\n", c->name, nm[t], e[t]);
            CHECK(e[t] <= (t == 0 ? R64_TOL_FWD : R64_TOL_GRAD));
        }
    }
    free(mu); free(zp); free(dh); free(dW); free(db); free(dc); free(dls);
}

static void test_sweep_float64(void)
{
    r64_report rep;
    int reg;
    memset(&rep, 0, sizeof rep);
    for (reg = 0; reg < R64_ERA_NREGIMES; reg++) {
        r64_era_case c;
        r64_era_make(&c, reg);
        era_sweep_one(&rep, &c);
        r64_era_free(&c);
    }
    for (reg = 0; reg < R64_RPA_NREGIMES; reg++) {
        r64_rpa_case c;
        r64_rpa_make(&c, reg);
        rpa_sweep_one(&rep, &c);
        r64_rpa_free(&c);
    }
    for (reg = 0; reg < R64_MEM_NREGIMES; reg++) {
        r64_mem_case c;
        r64_mem_make(&c, reg);
        mem_sweep_one(&rep, &c);
        r64_mem_free(&c);
    }
    r64_print(&rep, "ERA (seed 003) and RPA (seed 000) CPU vs float64");
}

/* Issue 37 rule 4: boolean flags are 0 or 1. era_apply / era_reduce_grad with per_head -1
   or 2 read / wrote an (H,T,T) buffer where a (T,T) one was given; the RPA config's
   detach, zscore_causal and legacy and the ERA config's zscore_causal ran any non-zero
   value as 1. All are ERA_EINVAL now, with nothing written. */
static void test_flags_range_checked(void)
{
    enum { B = 2, H = 3, T = 4 };
    float scores[B * H * T * T], bias[T * T], before[B * H * T * T];
    float centers[4], mu[1 * T * 4], out[T * T];
    int bad[3] = {-1, 2, 1 << 20}, i;
    era_era_config ec;
    era_era_params ep;
    era_era_state es = era_era_state_init();
    era_rpa_config rc;
    era_rpa_params rp = era_rpa_params_default();
    era_rpa_state rs = era_rpa_state_init();
    tt_seed(37);
    tt_fill_normal(scores, B * H * T * T, 1.0);
    tt_fill_normal(bias, T * T, 1.0);
    memcpy(before, scores, sizeof scores);
    for (i = 0; i < 3; i++) {
        CHECK_INT_EQ(era_apply(scores, bias, bad[i], B, H, T), ERA_EINVAL);
        CHECK_INT_EQ(era_reduce_grad(bias, scores, bad[i], B, H, T), ERA_EINVAL);
    }
    CHECK(memcmp(before, scores, sizeof scores) == 0);
    CHECK_INT_EQ(era_apply(scores, bias, 0, B, H, T), ERA_OK);
    era_era_init_centers(4, centers);
    for (i = 0; i < T * 4; i++) mu[i] = 0.25f;
    for (i = 0; i < 3; i++) {
        ec = era_era_config_default();
        ec.R = 4; ec.nb = 4;
        ep = era_era_params_default(centers);
        ec.zscore_causal = bad[i];
        CHECK_INT_EQ(era_era_forward(&ec, &ep, T, out, &es, NULL), ERA_EINVAL);
        rc = era_rpa_config_default(4);
        rc.detach = bad[i];
        CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mu, 1, T, out, &rs, NULL), ERA_EINVAL);
        rc = era_rpa_config_default(4);
        rc.zscore_causal = bad[i];
        CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mu, 1, T, out, &rs, NULL), ERA_EINVAL);
        rc = era_rpa_config_default(4);
        rc.legacy = bad[i];
        CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mu, 1, T, out, &rs, NULL), ERA_EINVAL);
    }
    ec = era_era_config_default();
    ec.R = 4; ec.nb = 4; ec.zscore_causal = 1;
    CHECK_INT_EQ(era_era_forward(&ec, &ep, T, out, &es, NULL), ERA_OK);
    rc = era_rpa_config_default(4);
    rc.detach = 0; rc.zscore_causal = 1;
    CHECK_INT_EQ(era_rpa_forward(&rc, &rp, mu, 1, T, out, &rs, NULL), ERA_OK);
    era_era_state_free(&es);
    era_rpa_state_free(&rs);
}

/* ------------------------------------------------- fixed priors (issue 45) ----- */

/* double reference of era_sinusoid_bias / era_relative_bias straight from the formulas:
   every (i,j) entry, statistics over the T*T entries (or j <= i), no closed form */
static void ref_pos_bias(const era_pos_config *c, int kind, int T, double *out)
{
    double n = 0.0, mean = 0.0, ss = 0.0, sd, scale = dclamp(c->scale, 0.0, 1.0);
    int i, j, k;
    for (i = 0; i < T; i++)
        for (j = 0; j < T; j++) {
            double x = 0.0;
            if (kind == 0) {
                for (k = 0; k < c->dims / 2; k++) {
                    double w = pow(c->base, -2.0 * k / c->dims); /* Phi Phi^T / (D/2) */
                    x += sin(i * w) * sin(j * w) + cos(i * w) * cos(j * w);
                }
                x /= c->dims / 2;
            } else {
                x = -c->slope * fabs((double)(i - j));
            }
            out[i * T + j] = x;
        }
    if (!c->zscore) {
        for (i = 0; i < T; i++)
            for (j = 0; j < T; j++) out[i * T + j] = c->zscore_causal && j > i ? 0.0 : out[i * T + j] * scale;
        return;
    }
    for (i = 0; i < T; i++)
        for (j = 0; j < T; j++)
            if (!c->zscore_causal || j <= i) { mean += out[i * T + j]; n += 1.0; }
    mean /= n;
    for (i = 0; i < T; i++)
        for (j = 0; j < T; j++)
            if (!c->zscore_causal || j <= i) ss += (out[i * T + j] - mean) * (out[i * T + j] - mean);
    sd = n > 1.0 ? sqrt(ss / (n - 1.0)) : 0.0;
    for (i = 0; i < T; i++)
        for (j = 0; j < T; j++) {
            double y = n > 1.0 ? (out[i * T + j] - mean) / (sd + c->zscore_eps) : 0.0;
            y = dclamp(y, -c->bias_clip, c->bias_clip) * scale;
            out[i * T + j] = c->zscore_causal && j > i ? 0.0 : y;
        }
}

static int pos_build(const era_pos_config *c, int kind, int T, float *b)
{
    return kind == 0 ? era_sinusoid_bias(c, T, b) : era_relative_bias(c, T, b);
}

/* hand-computed values at T = 3 */
static void test_pos_closed_form(void)
{
    era_pos_config c = era_pos_config_default();
    float b[25];
    double m, sd, y[3];
    int i, j, d;
    /* relative, z-scored over all 9 entries: values -|i-j| = 0 (x3), -1 (x4), -2 (x2) */
    CHECK_INT_EQ(era_relative_bias(&c, 3, b), ERA_OK);
    m = -8.0 / 9.0;
    sd = sqrt((3 * (0 - m) * (0 - m) + 4 * (-1 - m) * (-1 - m) + 2 * (-2 - m) * (-2 - m)) / 8.0);
    for (d = 0; d < 3; d++) y[d] = (-d - m) / (sd + 1e-6);
    CHECK_NEAR(y[0], 8.0 / 9.0 / sqrt(396.0 / 648.0), 1e-5); /* the numbers written out */
    for (i = 0; i < 3; i++)
        for (j = 0; j < 3; j++) CHECK_NEAR(b[i * 3 + j], y[abs(i - j)], 1e-6);
    /* the slope cancels in the z-score (exactly with zscore_eps 0: the eps does not scale) */
    c.zscore_eps = 0.0f;
    {
        float b1[9], b2[9];
        CHECK_INT_EQ(era_relative_bias(&c, 3, b1), ERA_OK);
        c.slope = 7.5f;
        CHECK_INT_EQ(era_relative_bias(&c, 3, b2), ERA_OK);
        for (i = 0; i < 9; i++) CHECK_NEAR(b2[i], b1[i], 1e-6);
        for (i = 0; i < 9; i++) CHECK_NEAR(b1[i], b[i], 2e-6); /* eps 1e-6 against a std of 0.78 */
    }
    c.zscore_eps = 1e-6f;
    /* relative, raw: -slope |i-j| times the scale, exactly */
    c.zscore = 0;
    c.slope = 0.5f;
    c.scale = 0.5f;
    CHECK_INT_EQ(era_relative_bias(&c, 5, b), ERA_OK);
    for (i = 0; i < 5; i++)
        for (j = 0; j < 5; j++) CHECK(b[i * 5 + j] == (float)(-0.25 * abs(i - j)));
    /* sinusoid, D = 2, raw: cos(i - j); D = 4, base 100: (cos d + cos(d / 10)) / 2 */
    c = era_pos_config_default();
    c.zscore = 0;
    c.dims = 2;
    CHECK_INT_EQ(era_sinusoid_bias(&c, 3, b), ERA_OK);
    for (i = 0; i < 3; i++)
        for (j = 0; j < 3; j++) CHECK_NEAR(b[i * 3 + j], cos((double)(i - j)), 1e-7);
    c.dims = 4;
    c.base = 100.0f;
    CHECK_INT_EQ(era_sinusoid_bias(&c, 3, b), ERA_OK);
    for (i = 0; i < 3; i++)
        for (j = 0; j < 3; j++) CHECK_NEAR(b[i * 3 + j], 0.5 * (cos(i - j) + cos((i - j) / 10.0)), 1e-7);
    /* sinusoid D = 2, causal z-score at T = 3: 1 (x3), cos 1 (x2), cos 2 (x1); 0 above */
    c.dims = 2;
    c.base = 10000.0f;
    c.zscore = 1;
    c.zscore_causal = 1;
    CHECK_INT_EQ(era_sinusoid_bias(&c, 3, b), ERA_OK);
    m = (3.0 + 2.0 * cos(1.0) + cos(2.0)) / 6.0;
    sd = sqrt((3 * (1 - m) * (1 - m) + 2 * (cos(1.0) - m) * (cos(1.0) - m) + (cos(2.0) - m) * (cos(2.0) - m)) / 5.0);
    for (i = 0; i < 3; i++)
        for (j = 0; j < 3; j++) {
            if (j > i) CHECK(b[i * 3 + j] == 0.0f);
            else CHECK_NEAR(b[i * 3 + j], (cos((double)(i - j)) - m) / (sd + 1e-6), 1e-6);
        }
    /* T = 1: no standard deviation, the z-scored bias is 0; raw it is x(0) */
    c = era_pos_config_default();
    b[0] = 5.0f;
    CHECK_INT_EQ(era_sinusoid_bias(&c, 1, b), ERA_OK);
    CHECK(b[0] == 0.0f);
    b[0] = 5.0f;
    CHECK_INT_EQ(era_relative_bias(&c, 1, b), ERA_OK);
    CHECK(b[0] == 0.0f);
    c.zscore = 0;
    CHECK_INT_EQ(era_sinusoid_bias(&c, 1, b), ERA_OK);
    CHECK_NEAR(b[0], 1.0, 1e-7);
}

/* against the entry-by-entry reference, both kinds, both statistics sets, several T */
static void test_pos_reference(void)
{
    static const int Ts[4] = {2, 7, 64, 300};
    int t, kind, causal, zs, i;
    for (t = 0; t < 4; t++)
        for (kind = 0; kind < 2; kind++)
            for (causal = 0; causal < 2; causal++)
                for (zs = 0; zs < 2; zs++) {
                    int T = Ts[t];
                    era_pos_config c = era_pos_config_default();
                    float *b = falloc((size_t)T * T);
                    double *r = dalloc((size_t)T * T), worst = 0.0;
                    c.zscore = zs;
                    c.zscore_causal = causal;
                    c.dims = kind == 0 && T == 7 ? 6 : 64;
                    c.slope = 0.25f;
                    c.scale = 0.75f;
                    if (T == 300) c.bias_clip = 2.0f; /* the clip is reached */
                    CHECK_INT_EQ(pos_build(&c, kind, T, b), ERA_OK);
                    ref_pos_bias(&c, kind, T, r);
                    for (i = 0; i < T * T; i++) {
                        double e = fabs(b[i] - r[i]) / (1.0 + fabs(r[i]));
                        if (e > worst) worst = e;
                    }
                    if (worst > 2e-6) printf("  T %d kind %d causal %d zscore %d: %g\n", T, kind, causal, zs, worst);
                    CHECK(worst <= 2e-6);
                    free(b);
                    free(r);
                }
}

/* shape: Toeplitz, symmetric (full statistics), zero above the diagonal (causal), the
   diagonal is the row maximum, the relative prior decreases with the distance, the
   z-scored bias has mean 0 and std 1 over its statistics set, the clip and the scale */
static void test_pos_properties(void)
{
    const int T = 96;
    float *b = falloc((size_t)T * T), *b2 = falloc((size_t)T * T);
    int kind, causal, i, j;
    for (kind = 0; kind < 2; kind++)
        for (causal = 0; causal < 2; causal++) {
            era_pos_config c = era_pos_config_default();
            double s = 0.0, s2 = 0.0, n = 0.0, mx = 0.0;
            c.zscore_causal = causal;
            c.bias_clip = 100.0f; /* no clipping: the moments are exact */
            CHECK_INT_EQ(pos_build(&c, kind, T, b), ERA_OK);
            for (i = 0; i < T; i++)
                for (j = 0; j < T; j++) {
                    float v = b[i * T + j];
                    if (i + 1 < T && j + 1 < T && (!causal || j <= i)) CHECK(v == b[(i + 1) * T + j + 1]);
                    if (!causal) CHECK(v == b[j * T + i]);
                    if (causal && j > i) { CHECK(v == 0.0f); continue; }
                    CHECK(v <= b[i * T + i]);
                    if (kind == 1 && j < i) CHECK(v < b[i * T + j + 1]);
                    s += v;
                    s2 += (double)v * v;
                    n += 1.0;
                    if (fabs(v) > mx) mx = fabs(v);
                }
            CHECK_NEAR(s / n, 0.0, 1e-5);
            CHECK_NEAR(sqrt((s2 - s * s / n) / (n - 1.0)), 1.0, 1e-4);
            /* the default clip 4 bounds it; a clip of 0.5 is reached on both sides */
            c.bias_clip = 0.5f;
            CHECK_INT_EQ(pos_build(&c, kind, T, b2), ERA_OK);
            {
                int lo = 0, hi = 0;
                for (i = 0; i < T; i++)
                    for (j = 0; j <= i; j++) {
                        float v = b2[i * T + j];
                        CHECK(v >= -0.5f && v <= 0.5f);
                        lo += v == -0.5f;
                        hi += v == 0.5f;
                        if (fabs(b[i * T + j]) < 0.5) CHECK(v == b[i * T + j]);
                    }
                CHECK(lo > 0 && hi > 0);
            }
            CHECK(mx > 1.0);
            /* scale: clamped to [0, 1] (2 is 1, -1 is 0), multiplies the result */
            c.bias_clip = 100.0f;
            c.scale = 2.0f;
            CHECK_INT_EQ(pos_build(&c, kind, T, b2), ERA_OK);
            CHECK(memcmp(b, b2, sizeof(float) * (size_t)T * T) == 0);
            c.scale = 0.25f;
            CHECK_INT_EQ(pos_build(&c, kind, T, b2), ERA_OK);
            for (i = 0; i < T * T; i++) CHECK_NEAR(b2[i], 0.25 * b[i], 1e-6);
            c.scale = -1.0f;
            CHECK_INT_EQ(pos_build(&c, kind, T, b2), ERA_OK);
            for (i = 0; i < T * T; i++) CHECK(b2[i] == 0.0f);
        }
    free(b);
    free(b2);
}

/* bad input: refused with ERA_EINVAL / ERA_ERANGE, the output untouched */
static void test_pos_bad_input(void)
{
    float b[16];
    int kind, k, i;
    for (kind = 0; kind < 2; kind++) {
        era_pos_config c = era_pos_config_default();
        CHECK_INT_EQ(pos_build(NULL, kind, 4, b), ERA_EINVAL);
        CHECK_INT_EQ(pos_build(&c, kind, 4, NULL), ERA_EINVAL);
        for (k = 0; k < 17; k++) {
            int want = ERA_EINVAL, T = 4;
            c = era_pos_config_default();
            switch (k) {
            case 0: T = 0; break;
            case 1: T = -3; break;
            case 2: c.max_T = 3; want = ERA_ERANGE; break;
            case 3: c.max_T = 0; break;
            case 4: c.zscore = 2; break;
            case 5: c.zscore_causal = -1; break;
            case 6: c.zscore_eps = -1e-6f; break;
            case 7: c.zscore_eps = NAN; break;
            case 8: c.bias_clip = 0.0f; break;
            case 9: c.bias_clip = NAN; break;
            case 10: c.scale = NAN; break;
            case 11: c.scale = INFINITY; break;
            case 12: if (kind == 0) c.dims = 3; else c.slope = 0.0f; break;
            case 13: if (kind == 0) c.dims = 0; else c.slope = -1.0f; break;
            case 14: if (kind == 0) c.dims = 65538; else c.slope = NAN; break;
            case 15: if (kind == 0) c.base = 1.0f; else c.slope = INFINITY; break;
            case 16: if (kind == 0) c.base = NAN; else c.slope = -INFINITY; break;
            }
            for (i = 0; i < 16; i++) b[i] = 42.0f;
            CHECK_INT_EQ(pos_build(&c, kind, T, b), want);
            for (i = 0; i < 16; i++) CHECK(b[i] == 42.0f);
        }
    }
    /* T * T that overflows the address space: ERA_ERANGE before any write */
    {
        era_pos_config c = era_pos_config_default();
        c.max_T = 2147483647;
        CHECK_INT_EQ(era_relative_bias(&c, 2147483647, b), ERA_ERANGE);
    }
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_rpa_forward_matches_reference);
    TEST_RUN(test_rpa_bias_is_linear_in_batch_mean);
    TEST_RUN(test_era_forward_matches_reference);
    TEST_RUN(test_era_log_domain_no_underflow);
    TEST_RUN(test_rpa_grad_detach);
    TEST_RUN(test_rpa_grad_through_sinkhorn);
    TEST_RUN(test_rpa_grad_legacy);
    TEST_RUN(test_rpa_grad_tau_clamped_and_clip);
    TEST_RUN(test_rpa_backward_accumulates);
    TEST_RUN(test_rpa_dtau_abs);
    TEST_RUN(test_rpa_scalars_to);
    TEST_RUN(test_era_scalars_to);
    TEST_RUN(test_membership_grads);
    TEST_RUN(test_rpa_end_to_end_grad_h);
    TEST_RUN(test_era_grads);
    TEST_RUN(test_era_grad_paper_eps);
    TEST_RUN(test_theorem1_kl_map);
    TEST_RUN(test_row_shift_invariance);
    TEST_RUN(test_sinkhorn_marginals_converge);
    TEST_RUN(test_proposition1_row_sum);
    TEST_RUN(test_length_calibration);
    TEST_RUN(test_apply_and_reduce);
    TEST_RUN(test_cache);
    TEST_RUN(test_determinism);
    TEST_RUN(test_diagnostics);
    TEST_RUN(test_edge_T1_and_small);
    TEST_RUN(test_edge_bad_input);
    TEST_RUN(test_null_grads_accepted);
    TEST_RUN(test_nan_hidden_states);
    TEST_RUN(test_streaming_rows_large_T);
    TEST_RUN(test_type2);
    TEST_RUN(test_zscore_sums_no_cancellation);
    TEST_RUN(test_sweep_float64);
    TEST_RUN(test_flags_range_checked);
    TEST_RUN(test_pos_closed_form);
    TEST_RUN(test_pos_reference);
    TEST_RUN(test_pos_properties);
    TEST_RUN(test_pos_bad_input);
    return TEST_END();
}
