/* polar_ref64.h - an extended-precision reference of Polar Attention (seed 002, eqs. 5-13)
   and the regimes of its float64 sweep, shared by tests/test_polar.c (the CPU paths) and
   tests/parity_polar.cu (the CUDA kernels, in the simulation and on a GPU). Not part of the
   library.

   The reference is the paper's forward written out in long double (64-bit mantissa on
   x86) and its backward by the plain chain rule through the same steps, in the order a
   textbook would (softmax over the T+1 logits, s, |s|, c, n_eff, m_eff, mag); it shares no
   code and no rearrangement with polar.h (no zero-sum identity, no streaming, no stats).

   pr64_regime builds the inputs of one regime of the sweep; pr64_rel_err measures a
   float32 tensor against the reference as max|got - ref| / max|ref|. */
#ifndef ATTNKIT_POLAR_REF64_H
#define ATTNKIT_POLAR_REF64_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* not every includer calls every helper */
#if defined(__GNUC__) || defined(__clang__)
#define PR64__API static __attribute__((unused))
#else
#define PR64__API static
#endif

typedef long double pr64_t;

typedef struct pr64_prob {
    int B, H, Hkv, T, D, window;
    float *q, *k, *v;                /* (B,H,T,D), (B,Hkv,T,D) x2 */
    float *lg, *nb, *ns, *mb, *vn;   /* (H) x4, (H,D) */
    float *dc, *dmag;                /* upstream gradients (B,H,T,D), (B,H,T) */
} pr64_prob;

typedef struct pr64_out {
    double *c, *mag;                 /* forward */
    double *dq, *dk, *dv, *dvn;      /* backward */
    double dlg[64], dnb[64], dns[64], dmb[64];      /* per head (H <= 64) */
    double terms[4][64]; /* sum over rows of |row term| of dlg, dnb, dns, dmb: the scale a
                            path that rounds each row's term (tensor cores) is judged by */
    double min_real; /* the smallest 1 - w_N over rows with n >= 2 (real keys' share) */
    double max_real;
} pr64_out;

PR64__API pr64_t pr64__sp(pr64_t x) { return x > 40 ? x : log1pl(expl(x)); }
PR64__API pr64_t pr64__sig(pr64_t x) { return 1.0L / (1.0L + expl(-x)); }

PR64__API long pr64_nq(const pr64_prob *P) { return (long)P->B * P->H * P->T * P->D; }
PR64__API long pr64_nkv(const pr64_prob *P) { return (long)P->B * P->Hkv * P->T * P->D; }
PR64__API long pr64_nrow(const pr64_prob *P) { return (long)P->B * P->H * P->T; }

PR64__API void pr64_out_alloc(pr64_out *o, const pr64_prob *P)
{
    memset(o, 0, sizeof *o);
    o->c = (double *)calloc((size_t)pr64_nq(P), sizeof(double));
    o->mag = (double *)calloc((size_t)pr64_nrow(P), sizeof(double));
    o->dq = (double *)calloc((size_t)pr64_nq(P), sizeof(double));
    o->dk = (double *)calloc((size_t)pr64_nkv(P), sizeof(double));
    o->dv = (double *)calloc((size_t)pr64_nkv(P), sizeof(double));
    o->dvn = (double *)calloc((size_t)P->H * P->D, sizeof(double));
}

PR64__API void pr64_out_free(pr64_out *o)
{
    free(o->c); free(o->mag); free(o->dq); free(o->dk); free(o->dv); free(o->dvn);
}

/* forward and backward of every row, in long double; norm_eps as polar_config's */
PR64__API void pr64_run(const pr64_prob *P, double norm_eps, pr64_out *o)
{
    int B = P->B, H = P->H, T = P->T, D = P->D, G = P->H / P->Hkv, b, h, i, j, d;
    pr64_t *a = (pr64_t *)malloc(sizeof(pr64_t) * (size_t)(T + 1) * 3 + sizeof(pr64_t) * (size_t)D * 3);
    pr64_t *w = a + (T + 1), *dw = w + (T + 1), *s = dw + (T + 1), *cc = s + D, *ds = cc + D;
    pr64_t *dvnacc = (pr64_t *)calloc((size_t)H * D, sizeof(pr64_t));
    pr64_t *dkacc = (pr64_t *)calloc((size_t)pr64_nkv(P), sizeof(pr64_t));
    pr64_t *dvacc = (pr64_t *)calloc((size_t)pr64_nkv(P), sizeof(pr64_t));
    pr64_t sc = 1.0L / sqrtl((pr64_t)D);
    pr64_t dlg[64], dnb[64], dns[64], dmb[64];
    long x;
    for (h = 0; h < H && h < 64; h++)
        dlg[h] = dnb[h] = dns[h] = dmb[h] = 0;
    o->min_real = 1.0;
    o->max_real = 0.0;
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            int hk = h / G;
            const float *kb = P->k + ((size_t)b * P->Hkv + hk) * T * D;
            const float *vb = P->v + ((size_t)b * P->Hkv + hk) * T * D;
            const float *vn = P->vn + (size_t)h * D;
            for (i = 0; i < T; i++) {
                size_t row = ((size_t)b * H + h) * T + i;
                const float *qi = P->q + row * D, *dci = P->dc + row * D;
                int n = (P->window > 0 && i + 1 > P->window) ? P->window : i + 1, lo = i + 1 - n;
                pr64_t logn = logl((pr64_t)n), sq = sqrtl(logl((pr64_t)n + 1.0L));
                pr64_t temp = 1.0L + pr64__sp(P->lg[h]) * logn;
                pr64_t nul = P->nb[h] + pr64__sp(P->ns[h]) * sq;
                pr64_t M, Z = 0, r = 0, rr, Lw = 0, Qw = 0, meff, bsp, mag, cdc = 0;
                pr64_t dmag, dmeff, dLw, dQw, sw, dtemp, dnul, t;
                /* forward: logits, softmax over T+1, s, c, n_eff, m_eff, mag */
                M = temp * nul;
                for (j = lo; j <= i; j++) {
                    pr64_t dot = 0;
                    for (d = 0; d < D; d++) dot += (pr64_t)qi[d] * kb[(size_t)j * D + d];
                    a[j] = temp * dot * sc;
                    if (a[j] > M) M = a[j];
                }
                a[T] = temp * nul;
                for (j = lo; j <= i; j++) Z += expl(a[j] - M);
                Z += expl(a[T] - M);
                for (j = lo; j <= i; j++) {
                    w[j] = expl(a[j] - M) / Z;
                    Lw += w[j];
                    Qw += w[j] * w[j];
                }
                w[T] = expl(a[T] - M) / Z;
                if (n >= 2) {
                    if ((double)Lw < o->min_real) o->min_real = (double)Lw;
                    if ((double)Lw > o->max_real) o->max_real = (double)Lw;
                }
                for (d = 0; d < D; d++) {
                    pr64_t sd = w[T] * vn[d];
                    for (j = lo; j <= i; j++) sd += w[j] * vb[(size_t)j * D + d];
                    s[d] = sd;
                    r += sd * sd;
                }
                r = sqrtl(r);
                rr = r > norm_eps ? r : (pr64_t)norm_eps;
                for (d = 0; d < D; d++) {
                    cc[d] = s[d] / rr;
                    o->c[row * D + d] = (double)cc[d];
                }
                meff = Lw * Lw / Qw * Lw; /* n_eff (1 - w_N), 1 - w_N = sum of real w */
                bsp = pr64__sp(P->mb[h]);
                mag = tanhl(bsp * log1pl(meff));
                o->mag[row] = (double)mag;
                /* backward, chain rule: c = s / max(|s|, eps) */
                if (r > norm_eps)
                    for (d = 0; d < D; d++) cdc += cc[d] * dci[d];
                for (d = 0; d < D; d++) ds[d] = (dci[d] - cc[d] * cdc) / rr;
                /* mag = tanh(bsp log1p(meff)), meff = Lw^3 / Qw */
                dmag = P->dmag[row];
                t = dmag * (1.0L - mag * mag);
                dmb[h] += t * log1pl(meff) * pr64__sig(P->mb[h]);
                if (h < 64) o->terms[3][h] += (double)fabsl(t * log1pl(meff) * pr64__sig(P->mb[h]));
                dmeff = t * bsp / (1.0L + meff);
                dLw = dmeff * 3.0L * Lw * Lw / Qw;
                dQw = -dmeff * Lw * Lw * Lw / (Qw * Qw);
                /* dL/dw_j (s, Lw, Qw) and dL/dw_N (s only) */
                for (j = lo; j <= i; j++) {
                    pr64_t dsv = 0;
                    for (d = 0; d < D; d++) dsv += ds[d] * vb[(size_t)j * D + d];
                    dw[j] = dsv + dLw + 2.0L * w[j] * dQw;
                }
                dw[T] = 0;
                for (d = 0; d < D; d++) dw[T] += ds[d] * vn[d];
                /* softmax: da_k = w_k (dw_k - sum_m w_m dw_m) */
                sw = w[T] * dw[T];
                for (j = lo; j <= i; j++) sw += w[j] * dw[j];
                dtemp = 0;
                for (j = lo; j <= i; j++) {
                    pr64_t da = w[j] * (dw[j] - sw), dsig = da * temp;
                    dtemp += da * a[j] / temp;
                    for (d = 0; d < D; d++) {
                        o->dq[row * D + d] += (double)(dsig * sc * kb[(size_t)j * D + d]);
                        dkacc[(((size_t)b * P->Hkv + hk) * T + j) * D + d] += dsig * sc * qi[d];
                        dvacc[(((size_t)b * P->Hkv + hk) * T + j) * D + d] += w[j] * ds[d];
                    }
                }
                {
                    pr64_t daN = w[T] * (dw[T] - sw);
                    dtemp += daN * nul;
                    dnul = daN * temp;
                }
                for (d = 0; d < D; d++) dvnacc[(size_t)h * D + d] += w[T] * ds[d];
                dlg[h] += dtemp * logn * pr64__sig(P->lg[h]);
                if (h < 64) {
                    o->terms[0][h] += (double)fabsl(dtemp * logn * pr64__sig(P->lg[h]));
                    o->terms[1][h] += (double)fabsl(dnul);
                    o->terms[2][h] += (double)fabsl(dnul * sq * pr64__sig(P->ns[h]));
                }
                dnb[h] += dnul;
                dns[h] += dnul * sq * pr64__sig(P->ns[h]);
            }
        }
    for (x = 0; x < pr64_nkv(P); x++) {
        o->dk[x] = (double)dkacc[x];
        o->dv[x] = (double)dvacc[x];
    }
    for (x = 0; x < (long)H * D; x++) o->dvn[x] = (double)dvnacc[x];
    for (h = 0; h < H && h < 64; h++) {
        o->dlg[h] = (double)dlg[h]; o->dnb[h] = (double)dnb[h];
        o->dns[h] = (double)dns[h]; o->dmb[h] = (double)dmb[h];
    }
    free(a); free(dvnacc); free(dkacc); free(dvacc);
}

/* per-head scalars judged by their terms: max_h |got - ref| / max_h sum_rows |term| */
PR64__API double pr64_term_err(const float *got, const double *ref, const double *terms, int H)
{
    double e = 0, m = 0;
    int h;
    for (h = 0; h < H; h++) {
        double d = fabs((double)got[h] - ref[h]);
        if (!(d == d)) return HUGE_VAL;
        if (d > e) e = d;
        if (terms[h] > m) m = terms[h];
    }
    return m > 0 ? e / m : (e > 0 ? 1.0 : 0.0);
}

/* max|got - ref| / max|ref| (0 when both vanish; 1 when ref does and got does not) */
PR64__API double pr64_rel_err(const float *got, const double *ref, long n)
{
    double e = 0, m = 0;
    long i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d == d)) return HUGE_VAL;
        if (d > e) e = d;
        if (fabs(ref[i]) > m) m = fabs(ref[i]);
    }
    return m > 0 ? e / m : (e > 0 ? 1.0 : 0.0);
}

/* ------------------------------------------------------------------ the regimes */
/* a small deterministic generator, so the C test and the CUDA test build the same inputs */
PR64__API unsigned long long pr64__s;
PR64__API double pr64__u(void)
{
    pr64__s = pr64__s * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((pr64__s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}
PR64__API double pr64__n(void)
{
    double u1 = pr64__u(), u2 = pr64__u();
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
PR64__API double pr64__spinv(double y) { return y > 30 ? y : log(expm1(y)); }

typedef struct pr64_regime {
    const char *name;
    int kind;        /* PR64_NULL, _PAPER64K, _ONEHOT, _UNIFORM, _PLAIN */
    double target;   /* PR64_NULL: 1 - w_N wanted at the last row */
    int B, H, Hkv, T, D, window;
} pr64_regime;

enum { PR64_NULL, PR64_PAPER64K, PR64_ONEHOT, PR64_UNIFORM, PR64_PLAIN };

#define PR64_NREGIMES 14
static const pr64_regime pr64_regimes[PR64_NREGIMES] = {
    {"null 1-wN=1e-2", PR64_NULL, 1e-2, 1, 2, 1, 40, 16, 8},
    {"null 1-wN=1e-4", PR64_NULL, 1e-4, 1, 2, 1, 40, 16, 8},
    {"null 1-wN=1e-5", PR64_NULL, 1e-5, 1, 2, 1, 40, 16, 8},
    {"null 1-wN=1e-6", PR64_NULL, 1e-6, 1, 2, 1, 40, 16, 8},
    {"null 1-wN=3e-7", PR64_NULL, 3e-7, 1, 2, 1, 40, 16, 8},
    {"null 1-wN=1e-8", PR64_NULL, 1e-8, 1, 2, 1, 40, 16, 8},
    {"paper init at T=64K (synthetic)", PR64_PAPER64K, 0, 1, 2, 2, 64, 16, -1},
    {"one-hot sharp rows", PR64_ONEHOT, 0, 1, 2, 2, 48, 16, -1},
    {"uniform rows", PR64_UNIFORM, 0, 1, 2, 1, 48, 16, -1},
    {"window of 1", PR64_PLAIN, 0, 2, 2, 2, 33, 8, 1},
    {"GQA group of 8", PR64_PLAIN, 0, 1, 8, 1, 37, 16, 9},
    {"GQA group of 1", PR64_PLAIN, 0, 1, 2, 2, 37, 32, -1},
    {"null 1-wN=1e-6, window 16, GQA 4", PR64_NULL, 1e-6, 1, 4, 1, 70, 16, 16},
    {"long T = 2048", PR64_PLAIN, 0, 1, 1, 1, 2048, 8, -1},
};

PR64__API void pr64_prob_free(pr64_prob *P)
{
    free(P->q); free(P->k); free(P->v); free(P->lg); free(P->nb); free(P->ns); free(P->mb);
    free(P->vn); free(P->dc); free(P->dmag);
}

/* the inputs of regime R (deterministic in seed) */
PR64__API void pr64_regime_build(pr64_prob *P, const pr64_regime *R, unsigned long long seed)
{
    long x;
    int h, H = R->H, D = R->D;
    double qs = 1.0, vs = 1.0;
    P->B = R->B; P->H = H; P->Hkv = R->Hkv; P->T = R->T; P->D = D; P->window = R->window;
    pr64__s = seed * 0x9E3779B97F4A7C15ULL + 1;
    P->q = (float *)malloc(sizeof(float) * (size_t)pr64_nq(P));
    P->k = (float *)malloc(sizeof(float) * (size_t)pr64_nkv(P));
    P->v = (float *)malloc(sizeof(float) * (size_t)pr64_nkv(P));
    P->lg = (float *)malloc(sizeof(float) * (size_t)H);
    P->nb = (float *)malloc(sizeof(float) * (size_t)H);
    P->ns = (float *)malloc(sizeof(float) * (size_t)H);
    P->mb = (float *)malloc(sizeof(float) * (size_t)H);
    P->vn = (float *)malloc(sizeof(float) * (size_t)H * D);
    P->dc = (float *)malloc(sizeof(float) * (size_t)pr64_nq(P));
    P->dmag = (float *)malloc(sizeof(float) * (size_t)pr64_nrow(P));
    if (R->kind == PR64_NULL) qs = 0.3;
    if (R->kind == PR64_ONEHOT) qs = 3.0;
    if (R->kind == PR64_PAPER64K) qs = 0.05;
    if (R->kind == PR64_UNIFORM) qs = 0.0;
    for (x = 0; x < pr64_nq(P); x++) P->q[x] = (float)(qs * pr64__n());
    for (x = 0; x < pr64_nkv(P); x++) {
        P->k[x] = (float)(qs * pr64__n());
        P->v[x] = (float)(vs * pr64__n());
    }
    for (x = 0; x < pr64_nq(P); x++) P->dc[x] = (float)pr64__n();
    for (x = 0; x < pr64_nrow(P); x++) P->dmag[x] = (float)pr64__n();
    for (x = 0; x < (long)H * D; x++) P->vn[x] = (float)(0.5 * pr64__n());
    for (h = 0; h < H; h++) { /* the paper's initial values, jittered per head */
        P->lg[h] = (float)(-1.0 + 0.1 * pr64__n());
        P->nb[h] = (float)(2.0 + 0.1 * pr64__n());
        P->ns[h] = (float)(0.5 + 0.1 * pr64__n());
        P->mb[h] = (float)(-1.5 + 0.1 * pr64__n());
    }
    if (R->kind == PR64_NULL) {
        /* null_base so that the last row's real keys (scores ~0) hold `target` of the
           weight: n e^{-temp null} ~ target */
        int n = (R->window > 0 && R->T > R->window) ? R->window : R->T;
        for (h = 0; h < H; h++) {
            double temp = 1.0 + log1p(exp((double)P->lg[h])) * log((double)n);
            double nul = log(n / R->target) / temp;
            P->nb[h] = (float)(nul - log1p(exp((double)P->ns[h])) * sqrt(log(n + 1.0)));
        }
    } else if (R->kind == PR64_PAPER64K) {
        /* the paper's initial parameters at n = 65536 keys of score ~0 give temp 4.475,
           null 5.24 and 1 - w_N ~ 4e-6. Here n = T = 64: the same temp and null at the
           last row (len_gain_raw, null_slope_raw chosen for n = 64), and each key
           standing for 1024 of them (score log(1024) / temp along the first axis). */
        double t64k = 1.0 + log1p(exp(-1.0)) * log(65536.0);
        double n64k = 2.0 + log1p(exp(0.5)) * sqrt(log(65537.0));
        double a = sqrt(log(1024.0) / t64k * sqrt((double)D));
        long r;
        for (h = 0; h < H; h++) {
            P->lg[h] = (float)pr64__spinv((t64k - 1.0) / log((double)R->T));
            P->nb[h] = 2.0f;
            P->ns[h] = (float)pr64__spinv((n64k - 2.0) / sqrt(log(R->T + 1.0)));
            P->mb[h] = -1.5f; /* v_null stays random: as after some training (at 0 the
                                 null sink's value gradient has nothing to cancel) */
        }
        for (r = 0; r < pr64_nq(P) / D; r++) P->q[r * D] = (float)a;
        for (r = 0; r < pr64_nkv(P) / D; r++) P->k[r * D] = (float)a;
    } else if (R->kind == PR64_ONEHOT || R->kind == PR64_UNIFORM) {
        for (h = 0; h < H; h++) P->nb[h] = R->kind == PR64_ONEHOT ? 0.0f : -1.0f;
    } else {
        for (h = 0; h < H; h++) P->nb[h] = (float)(0.5 * pr64__n());
    }
}

#endif
