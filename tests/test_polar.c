/* tests for polar.h: both paths against a double-precision re-implementation and
   against each other, every gradient against central finite differences of the double
   forward, the paper's properties, paged decode, output assembly, distractor loss and
   bad input. */
#define POLAR_IMPLEMENTATION
#include "../polar.h"
#include "attnkit_test.h"
#include "polar_ref64.h"

/* ------------------------------------------------------------------ problem */
typedef struct prob {
    int B, H, Hkv, T, D, window, bq, bk;
    float *q, *k, *v;                     /* inputs */
    float *lg, *nb, *ns, *mb, *vn;        /* params */
    float *wc, *wm;                       /* loss weights: L = sum c*wc + sum mag*wm */
} prob;

static double *to_d(const float *x, long n)
{
    double *y = (double *)malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    long i;
    for (i = 0; i < n; i++) y[i] = x[i];
    return y;
}
static long nq(const prob *P) { return (long)P->B * P->H * P->T * P->D; }
static long nkv(const prob *P) { return (long)P->B * P->Hkv * P->T * P->D; }
static long nrow(const prob *P) { return (long)P->B * P->H * P->T; }

static void prob_init(prob *P, int B, int H, int Hkv, int T, int D, int window, int bq,
                      int bk, double qk_scale, unsigned long long seed)
{
    int h;
    P->B = B; P->H = H; P->Hkv = Hkv; P->T = T; P->D = D; P->window = window;
    P->bq = bq; P->bk = bk;
    tt_seed(seed);
    P->q = (float *)malloc(sizeof(float) * nq(P));
    P->k = (float *)malloc(sizeof(float) * nkv(P));
    P->v = (float *)malloc(sizeof(float) * nkv(P));
    tt_fill_normal(P->q, nq(P), qk_scale);
    tt_fill_normal(P->k, nkv(P), qk_scale);
    tt_fill_normal(P->v, nkv(P), 1.0);
    P->lg = (float *)malloc(sizeof(float) * H);
    P->nb = (float *)malloc(sizeof(float) * H);
    P->ns = (float *)malloc(sizeof(float) * H);
    P->mb = (float *)malloc(sizeof(float) * H);
    P->vn = (float *)malloc(sizeof(float) * H * D);
    for (h = 0; h < H; h++) {
        P->lg[h] = (float)(-1.0 + 0.5 * tt_normal());
        P->nb[h] = (float)(1.0 + 0.5 * tt_normal());
        P->ns[h] = (float)(0.5 + 0.3 * tt_normal());
        P->mb[h] = (float)(-1.0 + 0.3 * tt_normal());
    }
    tt_fill_normal(P->vn, (long)H * D, 0.5);
    P->wc = (float *)malloc(sizeof(float) * nq(P));
    P->wm = (float *)malloc(sizeof(float) * nrow(P));
    tt_fill_normal(P->wc, nq(P), 1.0);
    tt_fill_normal(P->wm, nrow(P), 1.0);
}
static void prob_free(prob *P)
{
    free(P->q); free(P->k); free(P->v); free(P->lg); free(P->nb); free(P->ns); free(P->mb);
    free(P->vn); free(P->wc); free(P->wm);
}
static polar_config prob_cfg(const prob *P)
{
    polar_config cfg = polar_config_default();
    cfg.window = P->window;
    cfg.block_q = P->bq;
    cfg.block_k = P->bk;
    return cfg;
}
static polar_params prob_params(const prob *P)
{
    polar_params p;
    p.len_gain_raw = P->lg; p.null_base = P->nb; p.null_slope_raw = P->ns;
    p.mag_beta_raw = P->mb; p.v_null = P->vn;
    return p;
}

/* ------------------------------------------------------------------ double oracle */
static double dsp(double x) { return x > 30 ? x : log1p(exp(x)); }

/* straight from the equations, in double; returns the loss sum c*wc + mag*wm */
static double dforward(const prob *P, const double *q, const double *k, const double *v,
                       const double *lg, const double *nb, const double *ns,
                       const double *mb, const double *vn, double *c, double *mag)
{
    int B = P->B, H = P->H, T = P->T, D = P->D, G = P->H / P->Hkv, b, h, i, j, d;
    double loss = 0, sc = 1.0 / sqrt((double)D);
    double *a = (double *)malloc(sizeof(double) * (T + 1));
    double *s = (double *)malloc(sizeof(double) * D);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (i = 0; i < T; i++) {
                long row = ((long)b * H + h) * T + i;
                const double *qi = q + row * D;
                const double *kb = k + ((long)b * P->Hkv + h / G) * T * D;
                const double *vb = v + ((long)b * P->Hkv + h / G) * T * D;
                int n = (P->window > 0 && i + 1 > P->window) ? P->window : i + 1;
                int lo = i + 1 - n;
                double temp = 1 + dsp(lg[h]) * log((double)n);
                double nul = nb[h] + dsp(ns[h]) * sqrt(log(n + 1.0));
                double M = temp * nul, Z, sw = 0, sw2 = 0, wN, r = 0, neff, meff, mg;
                for (j = lo; j <= i; j++) {
                    double dot = 0;
                    for (d = 0; d < D; d++) dot += qi[d] * kb[(long)j * D + d];
                    a[j] = temp * dot * sc;
                    if (a[j] > M) M = a[j];
                }
                Z = exp(temp * nul - M);
                for (j = lo; j <= i; j++) Z += exp(a[j] - M);
                wN = exp(temp * nul - M) / Z;
                for (d = 0; d < D; d++) s[d] = wN * vn[h * D + d];
                for (j = lo; j <= i; j++) {
                    double w = exp(a[j] - M) / Z;
                    sw += w;
                    sw2 += w * w;
                    for (d = 0; d < D; d++) s[d] += w * vb[(long)j * D + d];
                }
                for (d = 0; d < D; d++) r += s[d] * s[d];
                r = sqrt(r);
                neff = sw * sw / sw2;
                meff = neff * (1 - wN);
                mg = tanh(dsp(mb[h]) * log1p(meff));
                for (d = 0; d < D; d++) {
                    double cd = s[d] / (r > 1e-6 ? r : 1e-6);
                    if (c) c[row * D + d] = cd;
                    loss += cd * P->wc[row * D + d];
                }
                if (mag) mag[row] = mg;
                loss += mg * P->wm[row];
            }
    free(a);
    free(s);
    return loss;
}

typedef struct dstate {
    double *q, *k, *v, *lg, *nb, *ns, *mb, *vn;
} dstate;
static void dstate_init(dstate *S, const prob *P)
{
    S->q = to_d(P->q, nq(P)); S->k = to_d(P->k, nkv(P)); S->v = to_d(P->v, nkv(P));
    S->lg = to_d(P->lg, P->H); S->nb = to_d(P->nb, P->H); S->ns = to_d(P->ns, P->H);
    S->mb = to_d(P->mb, P->H); S->vn = to_d(P->vn, (long)P->H * P->D);
}
static void dstate_free(dstate *S)
{
    free(S->q); free(S->k); free(S->v); free(S->lg); free(S->nb); free(S->ns); free(S->mb);
    free(S->vn);
}
static double dloss(const prob *P, const dstate *S)
{
    return dforward(P, S->q, S->k, S->v, S->lg, S->nb, S->ns, S->mb, S->vn, NULL, NULL);
}

/* central difference of the double loss wrt x[idx] */
static double fd(const prob *P, const dstate *S, double *x, long idx)
{
    double h = 1e-5, old = x[idx], lp, lm;
    x[idx] = old + h;
    lp = dloss(P, S);
    x[idx] = old - h;
    lm = dloss(P, S);
    x[idx] = old;
    return (lp - lm) / (2 * h);
}

/* Gradients: analytic (float) against FD of the double oracle, on every element when
   there are few, else on `nsample` spread elements. Tolerance: rtol 1e-3, atol 2e-4
   (float forward/backward against exact double FD). */
static void check_grad(const char *what, const prob *P, const dstate *S, double *x,
                       const float *g, long n, int nsample)
{
    long i, step = (nsample <= 0 || n <= nsample) ? 1 : n / nsample;
    int bad = 0;
    for (i = 0; i < n; i += step) {
        double ref = fd(P, S, x, i);
        if (!(fabs(g[i] - ref) <= 2e-4 + 1e-3 * fabs(ref))) {
            if (bad < 3)
                fprintf(stderr, "  %s[%ld]: analytic %.8g fd %.8g\n", what, i, g[i], ref);
            bad++;
        }
    }
    CHECK_INT_EQ(bad, 0);
}

/* everything the two paths produce */
typedef struct result {
    float *c, *mag, *stats, *probs;
    float *dq, *dk, *dv, *dlg, *dnb, *dns, *dmb, *dvn;
} result;

static void result_alloc(result *R, const prob *P, int with_probs)
{
    R->c = (float *)calloc((size_t)nq(P), sizeof(float));
    R->mag = (float *)calloc((size_t)nrow(P), sizeof(float));
    R->stats = (float *)calloc((size_t)nrow(P) * POLAR_NSTAT, sizeof(float));
    R->probs = with_probs ? (float *)calloc((size_t)nrow(P) * (P->T + 1), sizeof(float)) : NULL;
    R->dq = (float *)calloc((size_t)nq(P), sizeof(float));
    R->dk = (float *)calloc((size_t)nkv(P), sizeof(float));
    R->dv = (float *)calloc((size_t)nkv(P), sizeof(float));
    R->dlg = (float *)calloc((size_t)P->H, sizeof(float));
    R->dnb = (float *)calloc((size_t)P->H, sizeof(float));
    R->dns = (float *)calloc((size_t)P->H, sizeof(float));
    R->dmb = (float *)calloc((size_t)P->H, sizeof(float));
    R->dvn = (float *)calloc((size_t)P->H * P->D, sizeof(float));
}
static void result_free(result *R)
{
    free(R->c); free(R->mag); free(R->stats); free(R->probs); free(R->dq); free(R->dk);
    free(R->dv); free(R->dlg); free(R->dnb); free(R->dns); free(R->dmb); free(R->dvn);
}
static polar_grads result_grads(result *R)
{
    polar_grads g;
    g.len_gain_raw = R->dlg; g.null_base = R->dnb; g.null_slope_raw = R->dns;
    g.mag_beta_raw = R->dmb; g.v_null = R->dvn;
    return g;
}

/* run one path: forward then backward with dc = wc, dmag = wm */
static int run_path(const prob *P, result *R, int ref)
{
    polar_config cfg = prob_cfg(P);
    polar_params prm = prob_params(P);
    polar_grads gr = result_grads(R);
    polar_state st;
    int rc;
    st.stats = R->stats;
    st.probs = R->probs;
    if (ref) {
        rc = polar_forward_ref(&cfg, R->c, R->mag, &st, P->q, P->k, P->v, &prm, P->B, P->H,
                               P->Hkv, P->T, P->D);
        if (rc) return rc;
        return polar_backward_ref(&cfg, R->dq, R->dk, R->dv, &gr, P->wc, P->wm, R->c, R->mag,
                                  &st, P->q, P->k, P->v, &prm, P->B, P->H, P->Hkv, P->T,
                                  P->D, NULL);
    }
    rc = polar_forward(&cfg, R->c, R->mag, &st, P->q, P->k, P->v, &prm, P->B, P->H, P->Hkv,
                       P->T, P->D, NULL);
    if (rc) return rc;
    return polar_backward(&cfg, R->dq, R->dk, R->dv, &gr, P->wc, P->wm, R->c, R->mag, &st,
                          P->q, P->k, P->v, &prm, P->B, P->H, P->Hkv, P->T, P->D, NULL);
}

/* the full check on one configuration */
static void check_config(int B, int H, int Hkv, int T, int D, int window, int bq, int bk,
                         int nsample, unsigned long long seed)
{
    prob P;
    dstate S;
    result Rr, Rs;
    double *cd, *magd;
    float *cf, *mf;
    long i;
    prob_init(&P, B, H, Hkv, T, D, window, bq, bk, 1.3, seed);
    dstate_init(&S, &P);
    result_alloc(&Rr, &P, 1);
    result_alloc(&Rs, &P, 0);
    CHECK_INT_EQ(run_path(&P, &Rr, 1), POLAR_OK);
    CHECK_INT_EQ(run_path(&P, &Rs, 0), POLAR_OK);
    /* forward: materialised vs double oracle, streaming vs materialised (1e-5 relative) */
    cd = (double *)malloc(sizeof(double) * nq(&P));
    magd = (double *)malloc(sizeof(double) * nrow(&P));
    dforward(&P, S.q, S.k, S.v, S.lg, S.nb, S.ns, S.mb, S.vn, cd, magd);
    cf = (float *)malloc(sizeof(float) * nq(&P));
    mf = (float *)malloc(sizeof(float) * nrow(&P));
    for (i = 0; i < nq(&P); i++) cf[i] = (float)cd[i];
    for (i = 0; i < nrow(&P); i++) mf[i] = (float)magd[i];
    /* c is a unit vector: "1e-5 relative" is relative to its norm (1), so atol 1e-5 on
       each component; mag is compared element-wise */
    CHECK_ALL_CLOSE(Rr.c, cf, nq(&P), 1e-5, 1e-5);
    CHECK_ALL_CLOSE(Rr.mag, mf, nrow(&P), 1e-5, 1e-6);
    CHECK_ALL_CLOSE(Rs.c, Rr.c, nq(&P), 1e-5, 1e-5);
    CHECK_ALL_CLOSE(Rs.mag, Rr.mag, nrow(&P), 1e-5, 1e-6);
    /* backward: streaming equals materialised */
    CHECK_ALL_CLOSE(Rs.dq, Rr.dq, nq(&P), 1e-4, 1e-5);
    CHECK_ALL_CLOSE(Rs.dk, Rr.dk, nkv(&P), 1e-4, 1e-5);
    CHECK_ALL_CLOSE(Rs.dv, Rr.dv, nkv(&P), 1e-4, 1e-5);
    CHECK_ALL_CLOSE(Rs.dvn, Rr.dvn, (long)H * D, 1e-4, 1e-5);
    CHECK_ALL_CLOSE(Rs.dlg, Rr.dlg, H, 1e-4, 1e-5);
    CHECK_ALL_CLOSE(Rs.dnb, Rr.dnb, H, 1e-4, 1e-5);
    CHECK_ALL_CLOSE(Rs.dns, Rr.dns, H, 1e-4, 1e-5);
    CHECK_ALL_CLOSE(Rs.dmb, Rr.dmb, H, 1e-4, 1e-5);
    /* gradients of the streaming path against finite differences of the double oracle */
    check_grad("dq", &P, &S, S.q, Rs.dq, nq(&P), nsample);
    check_grad("dk", &P, &S, S.k, Rs.dk, nkv(&P), nsample);
    check_grad("dv", &P, &S, S.v, Rs.dv, nkv(&P), nsample);
    check_grad("dv_null", &P, &S, S.vn, Rs.dvn, (long)H * D, nsample);
    check_grad("dlen_gain", &P, &S, S.lg, Rs.dlg, H, 0);
    check_grad("dnull_base", &P, &S, S.nb, Rs.dnb, H, 0);
    check_grad("dnull_slope", &P, &S, S.ns, Rs.dns, H, 0);
    check_grad("dmag_beta", &P, &S, S.mb, Rs.dmb, H, 0);
    free(cd); free(magd); free(cf); free(mf);
    result_free(&Rr);
    result_free(&Rs);
    dstate_free(&S);
    prob_free(&P);
}

/* ------------------------------------------------------------------ cases */
static void test_tiny_t1(void) { check_config(1, 1, 1, 1, 4, -1, 64, 64, 0, 11); }
static void test_small_blocks(void) { check_config(2, 2, 1, 5, 3, -1, 2, 3, 0, 12); }
static void test_window_gqa2(void) { check_config(1, 4, 2, 17, 8, 5, 4, 16, 0, 13); }
static void test_odd_blocks_gqa4(void) { check_config(1, 4, 1, 33, 5, -1, 7, 5, 60, 14); }
static void test_window_one(void) { check_config(1, 2, 2, 9, 4, 1, 3, 4, 0, 15); }
static void test_t300(void) { check_config(1, 2, 2, 300, 8, -1, 64, 64, 24, 16); }
static void test_t300_window_gqa4(void) { check_config(1, 4, 1, 300, 16, 37, 48, 80, 16, 17); }

/* the length-dependent quantities on their own: scores far below the null, then far above */
static void test_extremes_finite(void)
{
    prob P;
    result R;
    long i;
    int bad = 0, h;
    prob_init(&P, 1, 2, 1, 40, 8, -1, 16, 16, 1.0, 21);
    for (h = 0; h < 2; h++) P.nb[h] = h ? 120.0f : -120.0f; /* null dominates / vanishes */
    result_alloc(&R, &P, 1);
    CHECK_INT_EQ(run_path(&P, &R, 0), POLAR_OK);
    for (i = 0; i < nq(&P); i++) bad += !(R.c[i] == R.c[i]) || !(R.dq[i] == R.dq[i]);
    for (i = 0; i < nkv(&P); i++) bad += !(R.dk[i] == R.dk[i]) || !(R.dv[i] == R.dv[i]);
    for (i = 0; i < nrow(&P); i++) bad += !(R.mag[i] >= 0.0f && R.mag[i] < 1.0f);
    for (h = 0; h < 2; h++)
        bad += !(R.dlg[h] == R.dlg[h]) || !(R.dnb[h] == R.dnb[h]) || !(R.dns[h] == R.dns[h]);
    CHECK_INT_EQ(bad, 0);
    /* null dominating head: c is the null direction, mag ~ 0 */
    {
        double r = 0;
        int d;
        for (d = 0; d < 8; d++) r += (double)P.vn[8 + d] * P.vn[8 + d];
        for (d = 0; d < 8; d++)
            CHECK_CLOSE(R.c[(long)(1 * 40 + 39) * 8 + d], P.vn[8 + d] / sqrt(r), 1e-5, 1e-6);
        CHECK(R.mag[40 + 39] < 1e-6f);
    }
    result_free(&R);
    prob_free(&P);
}

/* |c| = 1 and mag in [0, 1) on random data, both paths */
static void test_unit_direction_and_bounded_mag(void)
{
    prob P;
    result R;
    long r;
    int d, bad = 0;
    prob_init(&P, 2, 3, 3, 70, 12, -1, 16, 32, 1.5, 22);
    result_alloc(&R, &P, 0);
    CHECK_INT_EQ(run_path(&P, &R, 0), POLAR_OK);
    for (r = 0; r < nrow(&P); r++) {
        double n2 = 0;
        for (d = 0; d < 12; d++) n2 += (double)R.c[r * 12 + d] * R.c[r * 12 + d];
        if (fabs(sqrt(n2) - 1.0) > 1e-5) bad++;
        if (!(R.mag[r] >= 0.0f && R.mag[r] < 1.0f)) bad++;
    }
    CHECK_INT_EQ(bad, 0);
    result_free(&R);
    prob_free(&P);
}

/* duplicating the matched key: direction unchanged, magnitude strictly increasing */
static void test_duplication(void)
{
    enum { T = 64, D = 16 };
    float q[T * D], k[T * D], v[T * D], c[T * D], mag[T], stats[T * POLAR_NSTAT];
    float lg = -1.0f, nb = 2.0f, ns = 0.5f, mb = -1.5f, vn[D];
    float vstar[D], prev = -1.0f;
    polar_config cfg = polar_config_default();
    polar_params prm;
    polar_state st;
    int copies, i, d;
    tt_seed(31);
    tt_fill_normal(vstar, D, 1.0);
    memset(vn, 0, sizeof vn);
    prm.len_gain_raw = &lg; prm.null_base = &nb; prm.null_slope_raw = &ns;
    prm.mag_beta_raw = &mb; prm.v_null = vn;
    st.stats = stats; st.probs = NULL;
    for (copies = 1; copies <= 32; copies *= 2) {
        double r = 0;
        tt_seed(32);
        /* the last query matches direction e0 strongly; matched keys are +e0 * 12,
           noise keys point away (-e0 * 12 plus noise) so their weight is ~0 */
        tt_fill_normal(q, T * D, 0.1);
        tt_fill_normal(k, T * D, 0.3);
        tt_fill_normal(v, T * D, 1.0);
        for (d = 0; d < D; d++) q[(T - 1) * D + d] = d == 0 ? 12.0f : 0.0f;
        for (i = 0; i < T; i++) k[i * D] = -12.0f;
        for (i = 0; i < copies; i++) { /* matched keys spread over the sequence */
            int j = (i * 5 + 3) % (T - 1); /* 5 is coprime with 63: distinct */
            for (d = 0; d < D; d++) {
                k[j * D + d] = d == 0 ? 12.0f : 0.0f;
                v[j * D + d] = vstar[d];
            }
        }
        CHECK_INT_EQ(polar_forward(&cfg, c, mag, &st, q, k, v, &prm, 1, 1, 1, T, D, NULL),
                     POLAR_OK);
        for (d = 0; d < D; d++) r += (double)vstar[d] * vstar[d];
        r = sqrt(r);
        for (d = 0; d < D; d++) CHECK_CLOSE(c[(T - 1) * D + d], vstar[d] / r, 1e-5, 1e-6);
        CHECK(mag[T - 1] > prev);
        prev = mag[T - 1];
    }
}

/* pure-noise keys: the null sink's share grows with n, so mag stays bounded from 1K to
   64K keys; one query row per length through polar_decode (O(T D) work each). Without
   the length temperature and the null floor the same data drives mag towards 1. */
static void test_noise_bounded_mag(void)
{
    enum { D = 64, TMAX = 65536, BS = 256 };
    float *kc = (float *)malloc(sizeof(float) * TMAX * D);
    float *vc = (float *)malloc(sizeof(float) * TMAX * D);
    int *table = (int *)malloc(sizeof(int) * (TMAX / BS));
    float q[D], c[D], mag, lg = -1.0f, nb = 2.0f, ns = 0.5f, mb = -1.5f, vn[D];
    float lg0 = -40.0f, nb0 = -1000.0f, mags[4], mags0[4];
    polar_config cfg = polar_config_default();
    polar_params prm;
    int Ts[4] = {1024, 4096, 16384, 65536}, x, i, d;
    tt_seed(41);
    /* RMS-normalised rows, as the paper applies to q and k */
    for (i = 0; i < TMAX; i++) {
        double s2 = 0;
        for (d = 0; d < D; d++) {
            kc[(long)i * D + d] = (float)tt_normal();
            s2 += (double)kc[(long)i * D + d] * kc[(long)i * D + d];
        }
        for (d = 0; d < D; d++) kc[(long)i * D + d] = (float)(kc[(long)i * D + d] / sqrt(s2 / D));
    }
    tt_fill_normal(vc, (long)TMAX * D, 1.0);
    for (d = 0; d < D; d++) q[d] = (float)tt_normal();
    memset(vn, 0, sizeof vn);
    for (x = 0; x < TMAX / BS; x++) table[x] = x;
    prm.mag_beta_raw = &mb; prm.v_null = vn;
    for (x = 0; x < 4; x++) {
        int len = Ts[x];
        prm.len_gain_raw = &lg; prm.null_base = &nb; prm.null_slope_raw = &ns;
        CHECK_INT_EQ(polar_decode(&cfg, c, &mag, q, kc, vc, table, &len, &prm, 1, 1, 1, D,
                                  BS, TMAX / BS, TMAX / BS), POLAR_OK);
        mags[x] = mag;
        prm.len_gain_raw = &lg0; prm.null_base = &nb0; prm.null_slope_raw = &lg0;
        CHECK_INT_EQ(polar_decode(&cfg, c, &mag, q, kc, vc, table, &len, &prm, 1, 1, 1, D,
                                  BS, TMAX / BS, TMAX / BS), POLAR_OK);
        mags0[x] = mag;
    }
    if (tt__case_failed) fprintf(stderr, "  mags %g %g %g %g\n", mags[0], mags[1], mags[2], mags[3]);
    for (x = 0; x < 4; x++) {
        CHECK(mags[x] >= 0.0f && mags[x] < 0.5f);
        CHECK(mags[x] <= mags[0] + 0.05f);
    }
    /* the control: plain softmax participation grows with T */
    CHECK(mags0[3] > mags0[0] + 0.1f);
    CHECK(mags0[3] > mags[3] + 0.3f);
    free(kc);
    free(vc);
    free(table);
}

/* decode over a shuffled paged cache equals the last row of the full forward */
static void check_decode(int window)
{
    enum { B = 3, H = 4, HKV = 2, D = 8, BS = 5, MAXB = 8, NBLK = 30 };
    int lens[B] = {1, 23, 40}, table[B * MAXB], b, x, h, t, d, used = 0;
    int perm[NBLK];
    float *kc = (float *)calloc((size_t)NBLK * HKV * BS * D, sizeof(float));
    float *vc = (float *)calloc((size_t)NBLK * HKV * BS * D, sizeof(float));
    float qd[B * H * D], c[B * H * D], mag[B * H];
    polar_config cfg = polar_config_default();
    prob P;
    polar_params prm;
    cfg.window = window;
    prob_init(&P, 1, H, HKV, 1, D, window, 64, 64, 1.3, 51); /* for params only */
    prm = prob_params(&P);
    tt_seed(52);
    for (x = 0; x < NBLK; x++) perm[x] = x;
    for (x = NBLK - 1; x > 0; x--) {
        int y = (int)(tt_uniform() * (x + 1)), tmp = perm[x];
        perm[x] = perm[y]; perm[y] = tmp;
    }
    for (x = 0; x < B * MAXB; x++) table[x] = -7; /* unused entries are never read */
    for (b = 0; b < B; b++) {
        int len = lens[b], T = len;
        float *q = (float *)malloc(sizeof(float) * H * T * D);
        float *k = (float *)malloc(sizeof(float) * HKV * T * D);
        float *v = (float *)malloc(sizeof(float) * HKV * T * D);
        float *cf = (float *)malloc(sizeof(float) * H * T * D);
        float *mf = (float *)malloc(sizeof(float) * H * T);
        float *stf = (float *)malloc(sizeof(float) * H * T * POLAR_NSTAT);
        polar_state st;
        tt_fill_normal(q, (long)H * T * D, 1.3);
        tt_fill_normal(k, (long)HKV * T * D, 1.3);
        tt_fill_normal(v, (long)HKV * T * D, 1.0);
        for (x = 0; x < (len + BS - 1) / BS; x++) table[b * MAXB + x] = perm[used++];
        for (h = 0; h < HKV; h++)
            for (t = 0; t < T; t++) {
                int blk = table[b * MAXB + t / BS];
                for (d = 0; d < D; d++) {
                    long o = (((long)blk * HKV + h) * BS + t % BS) * D + d;
                    kc[o] = k[((long)h * T + t) * D + d];
                    vc[o] = v[((long)h * T + t) * D + d];
                }
            }
        for (h = 0; h < H; h++)
            for (d = 0; d < D; d++) qd[(b * H + h) * D + d] = q[((long)h * T + T - 1) * D + d];
        st.stats = stf; st.probs = NULL;
        CHECK_INT_EQ(polar_forward(&cfg, cf, mf, &st, q, k, v, &prm, 1, H, HKV, T, D, NULL),
                     POLAR_OK);
        /* stash the reference last rows in q's buffer tail: compare after decode */
        for (h = 0; h < H; h++) {
            for (d = 0; d < D; d++) c[(b * H + h) * D + d] = cf[((long)h * T + T - 1) * D + d];
            mag[b * H + h] = mf[(long)h * T + T - 1];
        }
        free(q); free(k); free(v); free(cf); free(mf); free(stf);
    }
    {
        float c2[B * H * D], m2[B * H];
        CHECK_INT_EQ(polar_decode(&cfg, c2, m2, qd, kc, vc, table, lens, &prm, B, H, HKV, D,
                                  BS, NBLK, MAXB), POLAR_OK);
        CHECK_ALL_CLOSE(c2, c, B * H * D, 1e-5, 1e-6);
        CHECK_ALL_CLOSE(m2, mag, B * H, 1e-5, 1e-6);
        /* a table entry outside the cache, and a length beyond the table */
        table[2 * MAXB + 3] = NBLK;
        CHECK_INT_EQ(polar_decode(&cfg, c2, m2, qd, kc, vc, table, lens, &prm, B, H, HKV, D,
                                  BS, NBLK, MAXB), POLAR_ERANGE);
        table[2 * MAXB + 3] = -1;
        CHECK_INT_EQ(polar_decode(&cfg, c2, m2, qd, kc, vc, table, lens, &prm, B, H, HKV, D,
                                  BS, NBLK, MAXB), POLAR_ERANGE);
        table[2 * MAXB + 3] = perm[0];
        lens[0] = MAXB * BS + 1;
        CHECK_INT_EQ(polar_decode(&cfg, c2, m2, qd, kc, vc, table, lens, &prm, B, H, HKV, D,
                                  BS, NBLK, MAXB), POLAR_ERANGE);
        lens[0] = -1;
        CHECK_INT_EQ(polar_decode(&cfg, c2, m2, qd, kc, vc, table, lens, &prm, B, H, HKV, D,
                                  BS, NBLK, MAXB), POLAR_ERANGE);
        /* an empty sequence drains to the null sink */
        lens[0] = 0;
        CHECK_INT_EQ(polar_decode(&cfg, c2, m2, qd, kc, vc, table, lens, &prm, B, H, HKV, D,
                                  BS, NBLK, MAXB), POLAR_OK);
        for (h = 0; h < H; h++) {
            double r = 0;
            for (d = 0; d < D; d++) r += (double)P.vn[h * D + d] * P.vn[h * D + d];
            for (d = 0; d < D; d++) CHECK_CLOSE(c2[h * D + d], P.vn[h * D + d] / sqrt(r), 1e-5, 1e-6);
            CHECK_NEAR(m2[h], 0.0, 1e-7);
        }
    }
    prob_free(&P);
    free(kc);
    free(vc);
}
static void test_decode_paged(void) { check_decode(-1); }
static void test_decode_paged_window(void) { check_decode(7); }

/* repeated runs are bit-identical; backward accumulates */
static void test_deterministic_and_accumulates(void)
{
    prob P;
    result R1, R2;
    long i;
    prob_init(&P, 1, 4, 2, 130, 16, -1, 32, 48, 1.3, 61);
    result_alloc(&R1, &P, 0);
    result_alloc(&R2, &P, 0);
    CHECK_INT_EQ(run_path(&P, &R1, 0), POLAR_OK);
    CHECK_INT_EQ(run_path(&P, &R2, 0), POLAR_OK);
    CHECK(memcmp(R1.c, R2.c, sizeof(float) * nq(&P)) == 0);
    CHECK(memcmp(R1.dq, R2.dq, sizeof(float) * nq(&P)) == 0);
    CHECK(memcmp(R1.dk, R2.dk, sizeof(float) * nkv(&P)) == 0);
    CHECK(memcmp(R1.dlg, R2.dlg, sizeof(float) * 4) == 0);
    /* second backward on the same buffers doubles every gradient */
    CHECK_INT_EQ(run_path(&P, &R2, 0), POLAR_OK);
    for (i = 0; i < nq(&P); i++) R1.dq[i] *= 2;
    for (i = 0; i < nkv(&P); i++) R1.dv[i] *= 2;
    for (i = 0; i < 4; i++) R1.dnb[i] *= 2;
    CHECK_ALL_CLOSE(R2.dq, R1.dq, nq(&P), 1e-6, 1e-7);
    CHECK_ALL_CLOSE(R2.dv, R1.dv, nkv(&P), 1e-6, 1e-7);
    CHECK_ALL_CLOSE(R2.dnb, R1.dnb, 4, 1e-6, 1e-7);
    result_free(&R1);
    result_free(&R2);
    prob_free(&P);
}

/* the backward's two schedules (one pass per kv group when the groups fill the threads,
   two passes otherwise) give the same bits: the same inputs run with 1 thread (one pass)
   and with more threads than groups (two passes); GQA, a window, ragged blocks */
static void check_schedules(int B, int H, int Hkv, int T, int D, int window, int bq, int bk,
                            unsigned long long seed)
{
#ifdef _OPENMP
    prob P;
    result R[2];
    int x;
    prob_init(&P, B, H, Hkv, T, D, window, bq, bk, 1.3, seed);
    for (x = 0; x < 2; x++) {
        polar_config cfg = prob_cfg(&P);
        polar_params prm = prob_params(&P);
        polar_grads gr;
        polar_state st;
        result_alloc(&R[x], &P, 0);
        gr = result_grads(&R[x]);
        st.stats = R[x].stats; st.probs = NULL;
        cfg.num_threads = x == 0 ? 1 : B * Hkv + 1;
        CHECK_INT_EQ(polar_forward(&cfg, R[x].c, R[x].mag, &st, P.q, P.k, P.v, &prm, B, H, Hkv,
                                   T, D, NULL), POLAR_OK);
        CHECK_INT_EQ(polar_backward(&cfg, R[x].dq, R[x].dk, R[x].dv, &gr, P.wc, P.wm, R[x].c,
                                    R[x].mag, &st, P.q, P.k, P.v, &prm, B, H, Hkv, T, D, NULL),
                     POLAR_OK);
    }
    /* the two runs did take different schedules (the header's internal choice) */
    {
        polar__geom g1, g2;
        polar_config c1 = prob_cfg(&P), c2 = prob_cfg(&P);
        c1.num_threads = 1;
        c2.num_threads = B * Hkv + 1;
        polar__geometry(&g1, &c1, B, H, Hkv, T, D);
        polar__geometry(&g2, &c2, B, H, Hkv, T, D);
        CHECK_INT_EQ(g1.fused, 1);
        CHECK_INT_EQ(g2.fused, 0);
    }
    CHECK(memcmp(R[0].c, R[1].c, sizeof(float) * nq(&P)) == 0);
    CHECK(memcmp(R[0].dq, R[1].dq, sizeof(float) * nq(&P)) == 0);
    CHECK(memcmp(R[0].dk, R[1].dk, sizeof(float) * nkv(&P)) == 0);
    CHECK(memcmp(R[0].dv, R[1].dv, sizeof(float) * nkv(&P)) == 0);
    CHECK(memcmp(R[0].dlg, R[1].dlg, sizeof(float) * H) == 0);
    CHECK(memcmp(R[0].dnb, R[1].dnb, sizeof(float) * H) == 0);
    CHECK(memcmp(R[0].dns, R[1].dns, sizeof(float) * H) == 0);
    CHECK(memcmp(R[0].dmb, R[1].dmb, sizeof(float) * H) == 0);
    CHECK(memcmp(R[0].dvn, R[1].dvn, sizeof(float) * H * D) == 0);
    result_free(&R[0]);
    result_free(&R[1]);
    prob_free(&P);
#else
    (void)B; (void)H; (void)Hkv; (void)T; (void)D; (void)window; (void)bq; (void)bk; (void)seed;
    TEST_SKIP("needs OpenMP: without it one thread runs both problems the same way");
#endif
}
static void test_schedules_gqa(void) { check_schedules(1, 4, 1, 131, 16, -1, 32, 48, 81); }
static void test_schedules_window(void) { check_schedules(1, 3, 1, 97, 8, 21, 16, 32, 82); }
static void test_schedules_blocks(void) { check_schedules(2, 2, 1, 70, 5, -1, 7, 5, 83); }

/* the one-pass backward's dq accumulators (threads x G x T x Dp doubles) are bounded: no
   larger than the row buffers or 64 MiB, else the two-pass schedule (geometry only) */
static void test_schedule_memory_cap(void)
{
    polar_config cfg = polar_config_default();
    polar__geom g;
    cfg.num_threads = 1;
    polar__geometry(&g, &cfg, 1, 64, 1, 1024, 1); /* 64 x 1024 x 32 doubles = 16 MiB */
    CHECK_INT_EQ(g.fused, 1);
    polar__geometry(&g, &cfg, 1, 64, 1, 8192, 1); /* 128 MiB, row buffers 23 MiB */
    CHECK_INT_EQ(g.fused, 0);
    CHECK(polar_workspace_size(&cfg, 1, 64, 1, 8192, 1) < ((size_t)64 << 20));
    polar__geometry(&g, &cfg, 1, 64, 64, 8192, 1); /* no GQA: 2 MiB per group */
    CHECK_INT_EQ(g.fused, 1);
}

/* a caller-provided workspace of polar_workspace_size() bytes gives the same result */
static void test_workspace(void)
{
    prob P;
    result R1, R2;
    polar_config cfg;
    polar_params prm;
    polar_grads gr;
    polar_state st;
    size_t n;
    void *ws;
    prob_init(&P, 2, 2, 1, 50, 6, 20, 16, 16, 1.3, 71);
    cfg = prob_cfg(&P);
    prm = prob_params(&P);
    result_alloc(&R1, &P, 0);
    result_alloc(&R2, &P, 0);
    CHECK_INT_EQ(run_path(&P, &R1, 0), POLAR_OK);
    n = polar_workspace_size(&cfg, 2, 2, 1, 50, 6);
    CHECK(n > 0);
    ws = malloc(n);
    st.stats = R2.stats; st.probs = NULL;
    gr = result_grads(&R2);
    CHECK_INT_EQ(polar_forward(&cfg, R2.c, R2.mag, &st, P.q, P.k, P.v, &prm, 2, 2, 1, 50, 6, ws),
                 POLAR_OK);
    CHECK_INT_EQ(polar_backward(&cfg, R2.dq, R2.dk, R2.dv, &gr, P.wc, P.wm, R2.c, R2.mag, &st,
                                P.q, P.k, P.v, &prm, 2, 2, 1, 50, 6, ws), POLAR_OK);
    CHECK(memcmp(R1.c, R2.c, sizeof(float) * nq(&P)) == 0);
    CHECK(memcmp(R1.dk, R2.dk, sizeof(float) * nkv(&P)) == 0);
    free(ws);
    result_free(&R1);
    result_free(&R2);
    prob_free(&P);
}

/* ------------------------------------------------------------------ assembly */
static double dsig(double x) { return 1.0 / (1.0 + exp(-x)); }
static double dassemble(const double *c, const double *mag, const double *gate,
                        const double *Wo, const double *Wm, const double *wout, int B, int H,
                        int T, int D, int C)
{
    int b, t, o, h, d;
    double loss = 0;
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++)
            for (o = 0; o < C; o++) {
                double acc = 0;
                for (h = 0; h < H; h++) {
                    long row = ((long)b * H + h) * T + t;
                    double gs = gate ? dsig(gate[((long)b * T + t) * H + h]) : 1.0;
                    for (d = 0; d < D; d++) acc += Wo[(long)o * H * D + h * D + d] * c[row * D + d] * gs;
                    acc += Wm[(long)o * H + h] * mag[row];
                }
                loss += acc * wout[((long)b * T + t) * C + o];
            }
    return loss;
}

static void test_assemble(void)
{
    enum { B = 2, H = 3, T = 4, D = 5, C = 6 };
    float c[B * H * T * D], mag[B * H * T], gate[B * T * H], Wo[C * H * D], Wm[C * H];
    float out[B * T * C], dout[B * T * C];
    float dc[B * H * T * D], dmag[B * H * T], dgate[B * T * H], dWo[C * H * D], dWm[C * H];
    double cd[B * H * T * D], md[B * H * T], gd[B * T * H], Wod[C * H * D], Wmd[C * H];
    double wd[B * T * C];
    int i, bad = 0;
    double *arrs[5];
    float *grads[5];
    int lens[5] = {B * H * T * D, B * H * T, B * T * H, C * H * D, C * H};
    tt_seed(81);
    tt_fill_normal(c, B * H * T * D, 1.0);
    tt_fill_uniform(mag, B * H * T, 0.0, 1.0);
    tt_fill_normal(gate, B * T * H, 1.0);
    tt_fill_normal(Wo, C * H * D, 0.5);
    tt_fill_normal(Wm, C * H, 0.5);
    tt_fill_normal(dout, B * T * C, 1.0);
    for (i = 0; i < B * H * T * D; i++) cd[i] = c[i];
    for (i = 0; i < B * H * T; i++) md[i] = mag[i];
    for (i = 0; i < B * T * H; i++) gd[i] = gate[i];
    for (i = 0; i < C * H * D; i++) Wod[i] = Wo[i];
    for (i = 0; i < C * H; i++) Wmd[i] = Wm[i];
    for (i = 0; i < B * T * C; i++) wd[i] = dout[i];
    CHECK_INT_EQ(polar_assemble_forward(out, c, mag, gate, Wo, Wm, B, H, T, D, C), POLAR_OK);
    /* forward: out . dout equals the double loss */
    {
        double l = 0;
        for (i = 0; i < B * T * C; i++) l += (double)out[i] * dout[i];
        CHECK_CLOSE(l, dassemble(cd, md, gd, Wod, Wmd, wd, B, H, T, D, C), 1e-5, 1e-5);
    }
    memset(dc, 0, sizeof dc); memset(dmag, 0, sizeof dmag); memset(dgate, 0, sizeof dgate);
    memset(dWo, 0, sizeof dWo); memset(dWm, 0, sizeof dWm);
    CHECK_INT_EQ(polar_assemble_backward(dc, dmag, dgate, dWo, dWm, dout, c, mag, gate, Wo, Wm,
                                         B, H, T, D, C), POLAR_OK);
    arrs[0] = cd; arrs[1] = md; arrs[2] = gd; arrs[3] = Wod; arrs[4] = Wmd;
    grads[0] = dc; grads[1] = dmag; grads[2] = dgate; grads[3] = dWo; grads[4] = dWm;
    for (i = 0; i < 5; i++) {
        int j;
        for (j = 0; j < lens[i]; j++) {
            double old = arrs[i][j], lp, lm, ref;
            arrs[i][j] = old + 1e-5;
            lp = dassemble(cd, md, gd, Wod, Wmd, wd, B, H, T, D, C);
            arrs[i][j] = old - 1e-5;
            lm = dassemble(cd, md, gd, Wod, Wmd, wd, B, H, T, D, C);
            arrs[i][j] = old;
            ref = (lp - lm) / 2e-5;
            if (!(fabs(grads[i][j] - ref) <= 1e-4 + 1e-4 * fabs(ref))) bad++;
        }
    }
    CHECK_INT_EQ(bad, 0);
    /* no gate: plain W_o c */
    CHECK_INT_EQ(polar_assemble_forward(out, c, mag, NULL, Wo, Wm, B, H, T, D, C), POLAR_OK);
    memset(wd, 0, sizeof wd);
    wd[0] = 1.0; /* picks out[0] */
    CHECK_CLOSE(out[0], dassemble(cd, md, NULL, Wod, Wmd, wd, B, H, T, D, C), 1e-5, 1e-5);
    CHECK_INT_EQ(polar_assemble_backward(dc, dmag, dgate, dWo, dWm, dout, c, mag, NULL, Wo, Wm,
                                         B, H, T, D, C), POLAR_EINVAL);
    CHECK_INT_EQ(polar_assemble_forward(out, c, mag, gate, Wo, Wm, B, H, T, D, 0), POLAR_EINVAL);
    CHECK_INT_EQ(polar_assemble_forward(NULL, c, mag, gate, Wo, Wm, B, H, T, D, C), POLAR_EINVAL);
}

/* ------------------------------------------------------------------ distractor */
/* seed: POLAR_DISTRACTOR_SEED's normalisation (sum over r, n = i + 1 under a window) */
static double ddistractor(const prob *P, const dstate *S, const double *kr, int R,
                          double weight, int seed)
{
    int b, h, i, r, d, G = P->H / P->Hkv, D = P->D, T = P->T;
    double tot = 0, sc = 1.0 / sqrt((double)D);
    for (b = 0; b < P->B; b++)
        for (h = 0; h < P->H; h++)
            for (i = 0; i < T; i++) {
                const double *qi = S->q + (((long)b * P->H + h) * T + i) * D;
                const double *kb = kr + ((long)b * P->Hkv + h / G) * R * D;
                int n = (!seed && P->window > 0 && i + 1 > P->window) ? P->window : i + 1;
                double temp = 1 + dsp(S->lg[h]) * log((double)n);
                double nul = S->nb[h] + dsp(S->ns[h]) * sqrt(log(n + 1.0));
                double Z = exp(temp * nul), num = 0;
                for (r = 0; r < R; r++) {
                    double dot = 0, e;
                    for (d = 0; d < D; d++) dot += qi[d] * kb[(long)r * D + d];
                    e = exp(temp * dot * sc);
                    Z += e;
                    num += e;
                }
                tot += num / Z;
            }
    return weight * tot / ((double)P->B * P->H * T * (seed ? 1 : R));
}

static void distractor_case(int mode)
{
    enum { R = 6 };
    prob P;
    dstate S;
    polar_config cfg;
    polar_params prm;
    polar_grads gr;
    float *kr, *dkr, *dq, loss = 1.0f, dlg[2] = {0, 0}, dnb[2] = {0, 0}, dns[2] = {0, 0};
    double *krd, *xs[5];
    float *gs[5];
    long ns_[5], i;
    int a, bad = 0, seed = mode == POLAR_DISTRACTOR_SEED;
    prob_init(&P, 2, 2, 1, 9, 4, 4, 64, 64, 1.0, 91); /* window 4: the modes' n differ */
    dstate_init(&S, &P);
    cfg = prob_cfg(&P);
    prm = prob_params(&P);
    kr = (float *)malloc(sizeof(float) * 2 * 1 * R * 4);
    dkr = (float *)calloc(2 * R * 4, sizeof(float));
    dq = (float *)calloc((size_t)nq(&P), sizeof(float));
    tt_fill_normal(kr, 2 * R * 4, 1.5);
    krd = to_d(kr, 2 * R * 4);
    /* off by default: loss 0, nothing touched */
    CHECK_INT_EQ(polar_distractor_forward(&cfg, &loss, P.q, NULL, &prm, 2, 2, 1, 9, 4), POLAR_OK);
    CHECK(loss == 0.0f);
    cfg.distractor_keys = R;
    cfg.distractor_weight = 0.5f;
    cfg.distractor_mode = mode;
    CHECK_INT_EQ(polar_distractor_forward(&cfg, &loss, P.q, NULL, &prm, 2, 2, 1, 9, 4), POLAR_EINVAL);
    CHECK_INT_EQ(polar_distractor_forward(&cfg, &loss, P.q, kr, &prm, 2, 2, 1, 9, 4), POLAR_OK);
    CHECK_CLOSE(loss, ddistractor(&P, &S, krd, R, 0.5, seed), 1e-5, 1e-7);
    /* the two normalisations really differ here (a factor ~R and the window's n) */
    CHECK(fabs(ddistractor(&P, &S, krd, R, 0.5, !seed) - loss) > 0.5 * loss);
    gr.len_gain_raw = dlg; gr.null_base = dnb; gr.null_slope_raw = dns;
    gr.mag_beta_raw = NULL; gr.v_null = NULL;
    CHECK_INT_EQ(polar_distractor_backward(&cfg, dq, dkr, &gr, 1.0f, P.q, kr, &prm, 2, 2, 1, 9, 4),
                 POLAR_OK);
    xs[0] = S.q; gs[0] = dq; ns_[0] = nq(&P);
    xs[1] = krd; gs[1] = dkr; ns_[1] = 2 * R * 4;
    xs[2] = S.lg; gs[2] = dlg; ns_[2] = 2;
    xs[3] = S.nb; gs[3] = dnb; ns_[3] = 2;
    xs[4] = S.ns; gs[4] = dns; ns_[4] = 2;
    for (a = 0; a < 5; a++)
        for (i = 0; i < ns_[a]; i++) {
            double old = xs[a][i], lp, lm, ref;
            xs[a][i] = old + 1e-6;
            lp = ddistractor(&P, &S, krd, R, 0.5, seed);
            xs[a][i] = old - 1e-6;
            lm = ddistractor(&P, &S, krd, R, 0.5, seed);
            xs[a][i] = old;
            ref = (lp - lm) / 2e-6;
            if (seed && a == 1) ref = 0; /* the random keys are detached: dk_rand untouched */
            if (!(fabs(gs[a][i] - ref) <= 1e-6 + 1e-3 * fabs(ref))) {
                if (bad < 3) fprintf(stderr, "  distractor grad %d[%ld]: %g vs %g\n", a, i, gs[a][i], ref);
                bad++;
            }
        }
    CHECK_INT_EQ(bad, 0);
    cfg.distractor_mode = 2; /* neither mode */
    CHECK_INT_EQ(polar_distractor_forward(&cfg, &loss, P.q, kr, &prm, 2, 2, 1, 9, 4), POLAR_EINVAL);
    cfg.distractor_mode = -1;
    CHECK_INT_EQ(polar_distractor_backward(&cfg, dq, dkr, &gr, 1.0f, P.q, kr, &prm, 2, 2, 1, 9, 4),
                 POLAR_EINVAL);
    cfg.distractor_mode = mode;
    cfg.distractor_keys = POLAR_MAX_DISTRACTOR_KEYS + 1;
    CHECK_INT_EQ(polar_distractor_forward(&cfg, &loss, P.q, kr, &prm, 2, 2, 1, 9, 4), POLAR_EINVAL);
    CHECK(polar_workspace_size(&cfg, 2, 2, 1, 9, 4) == 0); /* the config check bounds R */
    cfg.distractor_keys = POLAR_MAX_DISTRACTOR_KEYS;
    CHECK(polar_workspace_size(&cfg, 2, 2, 1, 9, 4) > 0);
    free(kr); free(dkr); free(dq); free(krd);
    dstate_free(&S);
    prob_free(&P);
}
static void test_distractor(void) { distractor_case(POLAR_DISTRACTOR_MEAN); }
/* seed 002's normalisation, offered to reproduce the authors' runs */
static void test_distractor_seed_mode(void) { distractor_case(POLAR_DISTRACTOR_SEED); }

/* ------------------------------------------------------------------ bad input */
/* Strided entry points (issue 22): q, k, v read straight from an llm.c-style
   interleaved (B,T,3C) qkv buffer, c written into (B,T,C), gradients accumulated into
   an interleaved dqkv. Must equal the contiguous calls bit for bit (same arithmetic,
   only the addressing differs), leave the bytes between and around the strided rows
   untouched, and match finite differences of the double oracle. */
static void check_strided(int B, int H, int T, int D, int window, int bq, int bk,
                          unsigned long long seed)
{
    const long C = (long)H * D, pad = 7;
    prob P;
    dstate S;
    result Rc;
    polar_config cfg;
    polar_params prm;
    polar_grads gr;
    polar_state st;
    polar_layout lay = polar_layout_qkv(H, T, D);
    float *qkv, *dqkv, *dqkv0, *c, *stats, *mag, *dc, *g;
    void *ws;
    size_t wsb;
    float dlg[8] = {0}, dnb[8] = {0}, dns[8] = {0}, dmb[8] = {0}, dvn[8 * 16] = {0};
    long n3 = (long)B * T * 3 * C, nc = (long)B * T * C, i;
    int b, h, t, d, w;
    prob_init(&P, B, H, H, T, D, window, bq, bk, 1.3, seed);
    dstate_init(&S, &P);
    result_alloc(&Rc, &P, 0);
    cfg = prob_cfg(&P);
    prm = prob_params(&P);
    /* padded buffers: a guard of `pad` sentinel floats before and after */
    qkv = (float *)malloc(sizeof(float) * (size_t)(n3 + 2 * pad));
    dqkv = (float *)malloc(sizeof(float) * (size_t)(n3 + 2 * pad));
    dqkv0 = (float *)malloc(sizeof(float) * (size_t)(n3 + 2 * pad));
    c = (float *)malloc(sizeof(float) * (size_t)(nc + 2 * pad));
    dc = (float *)malloc(sizeof(float) * (size_t)nc);
    mag = (float *)malloc(sizeof(float) * (size_t)nrow(&P));
    stats = (float *)malloc(sizeof(float) * (size_t)nrow(&P) * POLAR_NSTAT);
    g = (float *)malloc(sizeof(float) * (size_t)nq(&P));
    for (i = 0; i < n3 + 2 * pad; i++) qkv[i] = 1e30f;
    for (i = 0; i < nc + 2 * pad; i++) c[i] = 1e30f;
    tt_fill_normal(dqkv0, n3 + 2 * pad, 1.0); /* gradients accumulate onto these */
    memcpy(dqkv, dqkv0, sizeof(float) * (size_t)(n3 + 2 * pad));
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++)
            for (h = 0; h < H; h++)
                for (d = 0; d < D; d++) {
                    long src = (((long)b * H + h) * T + t) * D + d;
                    long dst = pad + ((long)b * T + t) * 3 * C + (long)h * D + d;
                    qkv[dst] = P.q[src];
                    qkv[dst + C] = P.k[src];
                    qkv[dst + 2 * C] = P.v[src];
                    dc[((long)b * T + t) * C + (long)h * D + d] = P.wc[src];
                    /* the contiguous gradients start from the same values */
                    Rc.dq[src] = dqkv0[dst];
                    Rc.dk[src] = dqkv0[dst + C];
                    Rc.dv[src] = dqkv0[dst + 2 * C];
                }
    /* within each token's 3C floats the three parts tile it exactly; leave a hole to
       see that untouched floats stay untouched: none here, so the guards do that */
    CHECK_INT_EQ(run_path(&P, &Rc, 0), POLAR_OK);
    st.stats = stats;
    st.probs = NULL;
    gr.len_gain_raw = dlg; gr.null_base = dnb; gr.null_slope_raw = dns; gr.mag_beta_raw = dmb;
    gr.v_null = dvn;
    wsb = polar_workspace_size(&cfg, B, H, H, T, D);
    ws = malloc(wsb);
    CHECK_INT_EQ(polar_forward_strided(&cfg, &lay, c + pad, mag, &st, qkv + pad, qkv + pad + C,
                                       qkv + pad + 2 * C, &prm, B, H, H, T, D, NULL, 0),
                 POLAR_OK);
    /* a workspace below what the call needs is refused before anything is written */
    CHECK_INT_EQ(polar_backward_strided(&cfg, &lay, dqkv + pad, dqkv + pad + C,
                                        dqkv + pad + 2 * C, &gr, dc, P.wm, c + pad, mag, &st,
                                        qkv + pad, qkv + pad + C, qkv + pad + 2 * C, &prm, B,
                                        H, H, T, D, ws, wsb / 2),
                 POLAR_ERANGE);
    CHECK_INT_EQ(polar_forward_strided(&cfg, &lay, c + pad, mag, &st, qkv + pad, qkv + pad + C,
                                       qkv + pad + 2 * C, &prm, B, H, H, T, D, ws, 64),
                 POLAR_ERANGE);
    CHECK_INT_EQ(polar_backward_strided(&cfg, &lay, dqkv + pad, dqkv + pad + C,
                                        dqkv + pad + 2 * C, &gr, dc, P.wm, c + pad, mag, &st,
                                        qkv + pad, qkv + pad + C, qkv + pad + 2 * C, &prm, B,
                                        H, H, T, D, ws, wsb),
                 POLAR_OK);
    free(ws);
    /* bit for bit */
    CHECK(memcmp(mag, Rc.mag, sizeof(float) * (size_t)nrow(&P)) == 0);
    CHECK(memcmp(stats, Rc.stats, sizeof(float) * (size_t)nrow(&P) * POLAR_NSTAT) == 0);
    CHECK(memcmp(dlg, Rc.dlg, sizeof(float) * (size_t)H) == 0);
    CHECK(memcmp(dnb, Rc.dnb, sizeof(float) * (size_t)H) == 0);
    CHECK(memcmp(dns, Rc.dns, sizeof(float) * (size_t)H) == 0);
    CHECK(memcmp(dmb, Rc.dmb, sizeof(float) * (size_t)H) == 0);
    CHECK(memcmp(dvn, Rc.dvn, sizeof(float) * (size_t)C) == 0);
    for (w = 0; w < 4; w++) {
        const float *ref = w == 0 ? Rc.c : w == 1 ? Rc.dq : w == 2 ? Rc.dk : Rc.dv;
        long bad = 0;
        for (b = 0; b < B; b++)
            for (t = 0; t < T; t++)
                for (h = 0; h < H; h++)
                    for (d = 0; d < D; d++) {
                        long src = (((long)b * H + h) * T + t) * D + d;
                        long x = ((long)b * T + t) * 3 * C + (long)(w - 1) * C + (long)h * D + d;
                        float got = w == 0 ? c[pad + ((long)b * T + t) * C + (long)h * D + d]
                                           : dqkv[pad + x];
                        bad += memcmp(&got, ref + src, sizeof got) != 0;
                    }
        CHECK_INT_EQ(bad, 0);
    }
    for (i = 0; i < pad; i++) { /* guards untouched */
        CHECK(c[i] == 1e30f && c[pad + nc + i] == 1e30f);
        CHECK(dqkv[i] == dqkv0[i] && dqkv[pad + n3 + i] == dqkv0[pad + n3 + i]);
    }
    /* finite differences of the double oracle on the (gathered) strided gradients */
    for (w = 0; w < 3; w++) {
        double *x = w == 0 ? S.q : w == 1 ? S.k : S.v;
        for (b = 0; b < B; b++)
            for (t = 0; t < T; t++)
                for (h = 0; h < H; h++)
                    for (d = 0; d < D; d++) {
                        long src = (((long)b * H + h) * T + t) * D + d;
                        long x3 = pad + ((long)b * T + t) * 3 * C + (long)w * C + (long)h * D + d;
                        g[src] = dqkv[x3] - dqkv0[x3];
                    }
        check_grad(w == 0 ? "strided dq" : w == 1 ? "strided dk" : "strided dv", &P, &S, x, g,
                   nq(&P), 40);
    }
    /* a bad layout is refused */
    lay.q[2] = -1;
    CHECK_INT_EQ(polar_forward_strided(&cfg, &lay, c + pad, mag, &st, qkv + pad, qkv + pad + C,
                                       qkv + pad + 2 * C, &prm, B, H, H, T, D, NULL, 0),
                 POLAR_EINVAL);
    CHECK_INT_EQ(polar_forward_strided(&cfg, NULL, c + pad, mag, &st, qkv + pad, qkv + pad + C,
                                       qkv + pad + 2 * C, &prm, B, H, H, T, D, NULL, 0),
                 POLAR_EINVAL);
    free(qkv); free(dqkv); free(dqkv0); free(c); free(dc); free(mag); free(stats); free(g);
    result_free(&Rc);
    dstate_free(&S);
    prob_free(&P);
}
static void test_strided_qkv(void) { check_strided(2, 3, 37, 8, -1, 8, 16, 31); }
static void test_strided_qkv_window(void) { check_strided(1, 2, 70, 16, 9, 32, 16, 32); }


/* ------------------------------------------------------------------ float64 sweep */
/* Every path (materialised; streaming with one thread and with four, i.e. both backward
   schedules under OpenMP) against the long-double reference of tests/polar_ref64.h, in
   each regime of pr64_regimes (null-dominated rows down to 1 - w_N = 1e-8, the paper's
   initial parameters at 64K keys, one-hot and uniform rows, a window of 1, GQA groups of
   1 and 8, T = 2048). Errors are max|err| / max|ref| per tensor: 1e-4 for c and mag,
   2e-3 for every gradient, the per-head scalars included (max over heads). Measured on
   AVX-512 and AVX2 builds: worst 1.8e-6 (c), 6.6e-6 (the per-head scalars, one-hot rows);
   before the zero-sum form of the null's logit gradient (POLAR__NULL_SUM in polar.h),
   d len_gain_raw was off by 1.2e-3 / 1.3e-2 / 1.2e-2 at 1 - w_N = 1e-5 / 1e-6 / 3e-7 and
   by 1.8 at 1e-8 (streaming path). */
static const char *sweep_names[12] = {"c", "mag", "dq", "dk", "dv", "dv_null", "dlen_gain",
                                      "dnull_base", "dnull_slope", "dmag_beta", "", ""};

static void sweep_regime(int ri)
{
    const pr64_regime *R = &pr64_regimes[ri];
    pr64_prob P;
    pr64_out o;
    int path, t;
    polar_config cfg = polar_config_default();
    pr64_regime_build(&P, R, 1000 + (unsigned)ri);
    pr64_out_alloc(&o, &P);
    pr64_run(&P, cfg.norm_eps, &o);
    cfg.window = P.window;
    for (path = 0; path < 3; path++) {
        polar_params prm;
        polar_grads gr;
        polar_state st;
        long nq_ = pr64_nq(&P), nkv_ = pr64_nkv(&P), nr_ = pr64_nrow(&P);
        float *c = (float *)calloc((size_t)nq_, sizeof(float));
        float *mag = (float *)calloc((size_t)nr_, sizeof(float));
        float *stats = (float *)calloc((size_t)nr_ * POLAR_NSTAT, sizeof(float));
        float *probs = path == 0 ? (float *)calloc((size_t)nr_ * (P.T + 1), sizeof(float)) : NULL;
        float *dq = (float *)calloc((size_t)nq_, sizeof(float));
        float *dk = (float *)calloc((size_t)nkv_, sizeof(float));
        float *dv = (float *)calloc((size_t)nkv_, sizeof(float));
        float *dvn = (float *)calloc((size_t)P.H * P.D, sizeof(float));
        float dlg[64] = {0}, dnb[64] = {0}, dns[64] = {0}, dmb[64] = {0};
        double e[10];
        prm.len_gain_raw = P.lg; prm.null_base = P.nb; prm.null_slope_raw = P.ns;
        prm.mag_beta_raw = P.mb; prm.v_null = P.vn;
        gr.len_gain_raw = dlg; gr.null_base = dnb; gr.null_slope_raw = dns;
        gr.mag_beta_raw = dmb; gr.v_null = dvn;
        st.stats = stats;
        st.probs = probs;
        cfg.num_threads = path == 2 ? 4 : 1;
        cfg.block_q = cfg.block_k = R->T > 100 ? 64 : 16;
        if (path == 0) {
            CHECK_INT_EQ(polar_forward_ref(&cfg, c, mag, &st, P.q, P.k, P.v, &prm, P.B, P.H,
                                           P.Hkv, P.T, P.D), POLAR_OK);
            CHECK_INT_EQ(polar_backward_ref(&cfg, dq, dk, dv, &gr, P.dc, P.dmag, c, mag, &st,
                                            P.q, P.k, P.v, &prm, P.B, P.H, P.Hkv, P.T, P.D,
                                            NULL), POLAR_OK);
        } else {
            CHECK_INT_EQ(polar_forward(&cfg, c, mag, &st, P.q, P.k, P.v, &prm, P.B, P.H, P.Hkv,
                                       P.T, P.D, NULL), POLAR_OK);
            CHECK_INT_EQ(polar_backward(&cfg, dq, dk, dv, &gr, P.dc, P.dmag, c, mag, &st, P.q,
                                        P.k, P.v, &prm, P.B, P.H, P.Hkv, P.T, P.D, NULL),
                         POLAR_OK);
        }
        e[0] = pr64_rel_err(c, o.c, nq_);
        e[1] = pr64_rel_err(mag, o.mag, nr_);
        e[2] = pr64_rel_err(dq, o.dq, nq_);
        e[3] = pr64_rel_err(dk, o.dk, nkv_);
        e[4] = pr64_rel_err(dv, o.dv, nkv_);
        e[5] = pr64_rel_err(dvn, o.dvn, (long)P.H * P.D);
        e[6] = pr64_rel_err(dlg, o.dlg, P.H);
        e[7] = pr64_rel_err(dnb, o.dnb, P.H);
        e[8] = pr64_rel_err(dns, o.dns, P.H);
        e[9] = pr64_rel_err(dmb, o.dmb, P.H);
        fprintf(stderr, "  %-34s %-13s 1-wN %.1e..%.1e |", R->name,
                path == 0 ? "materialised" : path == 1 ? "stream 1 thr" : "stream 4 thr",
                o.min_real, o.max_real);
        for (t = 0; t < 10; t++) {
            fprintf(stderr, " %s %.1e", sweep_names[t], e[t]);
        }
        fprintf(stderr, "\n");
        CHECK(e[0] <= 1e-4);
        CHECK(e[1] <= 1e-4);
        for (t = 2; t < 10; t++) {
            if (!(e[t] <= 2e-3))
                fprintf(stderr, "    %s: %s relative error %.3g > 2e-3\n", R->name,
                        sweep_names[t], e[t]);
            CHECK(e[t] <= 2e-3);
        }
        free(c); free(mag); free(stats); free(probs); free(dq); free(dk); free(dv); free(dvn);
    }
    pr64_out_free(&o);
    pr64_prob_free(&P);
}

static void test_sweep_null(void)
{
    int ri;
    for (ri = 0; ri < 6; ri++) sweep_regime(ri);
    sweep_regime(12);
}
static void test_sweep_paper64k(void) { sweep_regime(6); }
static void test_sweep_rows(void)
{
    sweep_regime(7);
    sweep_regime(8);
}
static void test_sweep_window_gqa(void)
{
    sweep_regime(9);
    sweep_regime(10);
    sweep_regime(11);
}
static void test_sweep_long(void) { sweep_regime(13); }

static void test_bad_input(void)
{
    prob P;
    result R;
    polar_config cfg;
    polar_params prm;
    polar_grads gr;
    polar_state st;
    float nanv = (float)NAN;
    prob_init(&P, 1, 4, 2, 8, 4, -1, 4, 4, 1.0, 99);
    result_alloc(&R, &P, 1);
    prm = prob_params(&P);
    gr = result_grads(&R);
    st.stats = R.stats; st.probs = R.probs;
    cfg = prob_cfg(&P);
#define FWD(Hh, Hk, Tt, Dd) polar_forward(&cfg, R.c, R.mag, &st, P.q, P.k, P.v, &prm, 1, Hh, Hk, Tt, Dd, NULL)
#define FWDR(Hh, Hk, Tt, Dd) polar_forward_ref(&cfg, R.c, R.mag, &st, P.q, P.k, P.v, &prm, 1, Hh, Hk, Tt, Dd)
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_OK);
    CHECK_INT_EQ(FWD(4, 2, 8, 0), POLAR_EINVAL);  /* D = 0 */
    CHECK_INT_EQ(FWD(4, 3, 8, 4), POLAR_EINVAL);  /* Hkv does not divide H */
    CHECK_INT_EQ(FWD(4, 2, 0, 4), POLAR_EINVAL);  /* T = 0 */
    CHECK_INT_EQ(FWD(0, 2, 8, 4), POLAR_EINVAL);
    CHECK_INT_EQ(FWDR(4, 2, 0, 4), POLAR_EINVAL);
    CHECK_INT_EQ(FWDR(4, 3, 8, 4), POLAR_EINVAL);
    cfg.window = 0;                                /* window 0 */
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_EINVAL);
    CHECK_INT_EQ(FWDR(4, 2, 8, 4), POLAR_EINVAL);
    cfg.window = -5;
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_EINVAL);
    cfg = prob_cfg(&P);
    cfg.block_q = 0;
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_EINVAL);
    cfg = prob_cfg(&P);
    cfg.norm_eps = nanv;
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_EINVAL);
    cfg = prob_cfg(&P);
    P.nb[2] = nanv;                                /* NaN parameter */
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_EINVAL);
    CHECK_INT_EQ(FWDR(4, 2, 8, 4), POLAR_EINVAL);
    P.nb[2] = 1.0f;
    P.lg[0] = (float)INFINITY;
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_EINVAL);
    P.lg[0] = -1.0f;
    P.vn[5] = nanv;
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_EINVAL);
    P.vn[5] = 0.0f;
    CHECK_INT_EQ(polar_forward(&cfg, R.c, R.mag, &st, NULL, P.k, P.v, &prm, 1, 4, 2, 8, 4, NULL),
                 POLAR_EINVAL);
    CHECK_INT_EQ(polar_forward(NULL, R.c, R.mag, &st, P.q, P.k, P.v, &prm, 1, 4, 2, 8, 4, NULL),
                 POLAR_EINVAL);
    CHECK_INT_EQ(polar_forward(&cfg, R.c, R.mag, &st, P.q, P.k, P.v, NULL, 1, 4, 2, 8, 4, NULL),
                 POLAR_EINVAL);
    st.probs = NULL;
    CHECK_INT_EQ(FWDR(4, 2, 8, 4), POLAR_EINVAL); /* materialised needs probs */
    st.stats = NULL;
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_EINVAL);
    st.stats = R.stats; st.probs = R.probs;
    CHECK_INT_EQ(FWD(4, 2, 8, 4), POLAR_OK);
    CHECK_INT_EQ(polar_backward(&cfg, R.dq, R.dk, R.dv, &gr, P.wc, P.wm, R.c, R.mag, &st, P.q,
                                P.k, P.v, &prm, 1, 4, 3, 8, 4, NULL), POLAR_EINVAL);
    CHECK_INT_EQ(polar_backward(&cfg, R.dq, R.dk, R.dv, &gr, NULL, P.wm, R.c, R.mag, &st, P.q,
                                P.k, P.v, &prm, 1, 4, 2, 8, 4, NULL), POLAR_EINVAL);
    CHECK_INT_EQ(polar_backward_ref(&cfg, R.dq, R.dk, R.dv, &gr, P.wc, P.wm, R.c, R.mag, &st, P.q,
                                    P.k, P.v, &prm, 1, 4, 2, 0, 4, NULL), POLAR_EINVAL);
    CHECK(polar_workspace_size(&cfg, 1, 4, 3, 8, 4) == 0);
    CHECK(polar_workspace_size(&cfg, 1, 4, 2, 8, 0) == 0);
    CHECK_INT_EQ(polar_params_init(&cfg, 0, 4, NULL, NULL, NULL, NULL, NULL), POLAR_EINVAL);
    CHECK(strcmp(polar_strerror(POLAR_ERANGE), polar_strerror(POLAR_EINVAL)) != 0);
    CHECK(polar_strerror(12345) != NULL);
#undef FWD
#undef FWDR
    result_free(&R);
    prob_free(&P);
}

/* paper initial values */
static void test_params_init(void)
{
    polar_config cfg = polar_config_default();
    float lg[2], nb[2], ns[2], mb[2], vn[6] = {1, 1, 1, 1, 1, 1};
    CHECK_INT_EQ(polar_params_init(&cfg, 2, 3, lg, nb, ns, mb, vn), POLAR_OK);
    CHECK(lg[1] == -1.0f && nb[1] == 2.0f && ns[1] == 0.5f && mb[1] == -1.5f && vn[5] == 0.0f);
    CHECK(cfg.window == POLAR_NO_WINDOW && cfg.distractor_keys == 0);
    CHECK_NEAR(cfg.distractor_weight, 0.01, 1e-9);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_params_init);
    TEST_RUN(test_tiny_t1);
    TEST_RUN(test_small_blocks);
    TEST_RUN(test_window_gqa2);
    TEST_RUN(test_odd_blocks_gqa4);
    TEST_RUN(test_window_one);
    TEST_RUN(test_t300);
    TEST_RUN(test_t300_window_gqa4);
    TEST_RUN(test_extremes_finite);
    TEST_RUN(test_unit_direction_and_bounded_mag);
    TEST_RUN(test_duplication);
    TEST_RUN(test_noise_bounded_mag);
    TEST_RUN(test_decode_paged);
    TEST_RUN(test_decode_paged_window);
    TEST_RUN(test_deterministic_and_accumulates);
    TEST_RUN(test_schedules_gqa);
    TEST_RUN(test_schedules_window);
    TEST_RUN(test_schedules_blocks);
    TEST_RUN(test_schedule_memory_cap);
    TEST_RUN(test_workspace);
    TEST_RUN(test_assemble);
    TEST_RUN(test_distractor);
    TEST_RUN(test_distractor_seed_mode);
    TEST_RUN(test_strided_qkv);
    TEST_RUN(test_strided_qkv_window);
    TEST_RUN(test_sweep_null);
    TEST_RUN(test_sweep_paper64k);
    TEST_RUN(test_sweep_rows);
    TEST_RUN(test_sweep_window_gqa);
    TEST_RUN(test_sweep_long);
    TEST_RUN(test_bad_input);
    return TEST_END();
}
