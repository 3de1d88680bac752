/* test_layers.c - examples/common/layers.c: the fuzzy MoE FFN, the polar attention mixer,
   the gated-delta memory channel, the MLP FFNs (GELU, squared-ReLU gated) and the LFM2 gated
   short convolution (the last two through the
   device context, ex_ctx on the CPU, and the generic lyr_kind table). Every parameter gradient and the input gradients
   (dx, and dmu for the MoE) against central finite differences of the fp32 forward on the
   scalar loss sum(out * Rw) (+ the MoE load-balance term, + the polar distractor loss),
   central differences with eps 1e-3, tolerance |analytic - fd| <= 1e-3 + 2e-2 |fd|; an entry
   outside it is measured again with the five-point stencil at eps 2e-3 (less fp32 rounding
   noise), which must then pass (at most 10% of the entries may need it; a corrupted
   gradient is shown to fail the comparison). MoE finite differences skip the coordinates
   whose perturbation changes the top-k selection (a piecewise-constant choice; at most 5%
   may). Also: the +=
   contract, determinism, the MoE against a dense double-precision reference (top_k = E,
   top_k < E, with and without noise, both renorm modes), the MoE's CPU path with and
   without a host buffer (bit-identical), refused arguments, and the documented parameter
   and memory counts (polar and gdelta memory linear in T). The MoE's device path:
   tests/parity_layers.cu. */
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
/* the unit under test, compiled in for its internals (lyr__*); the headers' bodies are
   linked (impl.o; Makefile: TEST_OBJS_test_layers) */
#include "../examples/common/layers.c"
#include "attnkit_test.h"

#include <stdlib.h>

#ifndef FD_EPS
#define FD_EPS 1e-3f
#endif
#define FD_RTOL 2e-2
#define FD_ATOL 1e-3

enum { K_MOE = 0, K_POLAR = 1, K_GD = 2, K_MLP = 3, K_LFM = 4,
       K_PGS = 5 /* polar attention + the gated-delta channel on its q, k, v (qkv_shared):
                    out = polar(x) + mem(x, q, k, v); P = polar's list, then the memory's */ };

typedef struct fx {
    int kind;
    lyr_moe_dims moe;
    lyr_polar_dims pol;
    lyr_gdelta_dims gd;
    lyr_mlp_dims mlp;
    lyr_lfm_dims lfm;
    int B, T, C, R;
    int np;
    lyr_pspec spec[2 * LYR_MAX_PARAMS];
    float *P[2 * LYR_MAX_PARAMS], *G[2 * LYR_MAX_PARAMS]; /* (K_PGS: two lists) */
    float *x, *mu, *out, *Rw, *dx, *dmu, *saved, *work;
    float *host;            /* MoE host buffer, or NULL (CPU path) */
    size_t nsaved, nwork;
    int train;
    uint64_t seed;
    float lb_coef;
    int npol;               /* K_PGS: polar's tensors (the memory's follow) */
    size_t nsaved_p;        /* K_PGS: polar's saved floats (the memory's follow) */
    float *gq, *gk, *gv, *tmp; /* K_PGS: the memory's q/k/v gradients, its output */
} fx;

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static int fx_params(fx *f, lyr_pspec *spec)
{
    if (f->kind == K_MOE) return lyr_moe_params(&f->moe, spec, LYR_MAX_PARAMS);
    if (f->kind == K_POLAR) return lyr_polar_params(&f->pol, spec, LYR_MAX_PARAMS);
    if (f->kind == K_MLP) return lyr_mlp_params(&f->mlp, spec, LYR_MAX_PARAMS);
    if (f->kind == K_LFM) return lyr_lfm_params(&f->lfm, spec, LYR_MAX_PARAMS);
    if (f->kind == K_PGS) {
        int a = lyr_polar_params(&f->pol, spec, LYR_MAX_PARAMS), b;
        if (a < 0) return a;
        f->npol = a;
        b = lyr_gdelta_params(&f->gd, spec + a, LYR_MAX_PARAMS);
        return b < 0 ? b : a + b;
    }
    return lyr_gdelta_params(&f->gd, spec, LYR_MAX_PARAMS);
}

/* allocate everything; params from the layer's init, then randomised (pstd > 0) */
static void fx_setup(fx *f, int B, int T, double pstd, unsigned long long seed)
{
    int i;
    size_t N = (size_t)B * T;
    tk_rng rng;
    f->B = B;
    f->T = T;
    f->np = fx_params(f, f->spec);
    CHECK(f->np > 0);
    for (i = 0; i < f->np; i++) {
        size_t n = lyr_pspec_numel(&f->spec[i]);
        f->P[i] = (float *)xcalloc(n, sizeof(float));
        f->G[i] = (float *)xcalloc(n, sizeof(float));
    }
    tk_rng_seed(&rng, 7, 1);
    tt_seed(seed);
    if (f->kind == K_MOE) {
        f->C = f->moe.C;
        f->R = f->moe.R;
        CHECK_INT_EQ(lyr_moe_init(&f->moe, f->P, &rng, 0.02f), LYR_OK);
        f->nsaved = lyr_moe_saved_floats(&f->moe, B, T);
        f->nwork = lyr_moe_work_floats(&f->moe, B, T);
    } else if (f->kind == K_POLAR) {
        f->C = f->pol.C;
        f->R = 1;
        CHECK_INT_EQ(lyr_polar_init(&f->pol, f->P, &rng, 0.02f), LYR_OK);
        f->nsaved = lyr_polar_saved_floats(&f->pol, B, T);
        f->nwork = lyr_polar_work_floats(&f->pol, B, T);
    } else if (f->kind == K_MLP) {
        f->C = f->mlp.C;
        f->R = 1;
        CHECK_INT_EQ(lyr_mlp_init(&f->mlp, f->P, &rng, 0.02f), LYR_OK);
        f->nsaved = lyr_mlp_saved_floats(&f->mlp, B, T);
        f->nwork = lyr_mlp_work_floats(&f->mlp, B, T);
    } else if (f->kind == K_LFM) {
        f->C = f->lfm.C;
        f->R = 1;
        CHECK_INT_EQ(lyr_lfm_init(&f->lfm, f->P, &rng, 0.02f), LYR_OK);
        f->nsaved = lyr_lfm_saved_floats(&f->lfm, B, T);
        f->nwork = lyr_lfm_work_floats(&f->lfm, B, T);
    } else if (f->kind == K_PGS) {
        size_t wp, wg, Dh = (size_t)(f->pol.C / f->pol.H);
        f->C = f->pol.C;
        f->R = 1;
        CHECK_INT_EQ(lyr_polar_init(&f->pol, f->P, &rng, 0.02f), LYR_OK);
        CHECK_INT_EQ(lyr_gdelta_init(&f->gd, f->P + f->npol, &rng, 0.02f), LYR_OK);
        f->nsaved_p = lyr_polar_saved_floats(&f->pol, B, T);
        f->nsaved = f->nsaved_p + lyr_gdelta_saved_floats(&f->gd, B, T);
        wp = lyr_polar_work_floats(&f->pol, B, T);
        wg = lyr_gdelta_work_floats(&f->gd, B, T);
        f->nwork = wp > wg ? wp : wg;
        f->gq = (float *)xcalloc(N * f->pol.H * Dh, sizeof(float));
        f->gk = (float *)xcalloc(N * f->pol.Hkv * Dh, sizeof(float));
        f->gv = (float *)xcalloc(N * f->pol.Hkv * Dh, sizeof(float));
        f->tmp = (float *)xcalloc(N * f->C, sizeof(float));
    } else {
        f->C = f->gd.C;
        f->R = 1;
        CHECK_INT_EQ(lyr_gdelta_init(&f->gd, f->P, &rng, 0.02f), LYR_OK);
        f->nsaved = lyr_gdelta_saved_floats(&f->gd, B, T);
        f->nwork = lyr_gdelta_work_floats(&f->gd, B, T);
    }
    CHECK(f->nsaved > 0 && f->nwork > 0);
    if (pstd > 0)
        for (i = 0; i < f->np; i++) {
            size_t n = lyr_pspec_numel(&f->spec[i]), j;
            for (j = 0; j < n; j++) f->P[i][j] += (float)(pstd * tt_normal());
        }
    f->x = (float *)xcalloc(N * f->C, sizeof(float));
    f->mu = (float *)xcalloc(N * f->R, sizeof(float));
    f->out = (float *)xcalloc(N * f->C, sizeof(float));
    f->Rw = (float *)xcalloc(N * f->C, sizeof(float));
    f->dx = (float *)xcalloc(N * f->C, sizeof(float));
    f->dmu = (float *)xcalloc(N * f->R, sizeof(float));
    f->saved = (float *)xcalloc(f->nsaved, sizeof(float));
    f->work = (float *)xcalloc(f->nwork, sizeof(float));
    tt_fill_normal(f->x, (long)(N * f->C), 1.0);
    tt_fill_normal(f->Rw, (long)(N * f->C), 1.0);
    if (f->kind == K_MOE) { /* memberships: a softmax of random logits */
        size_t n, r;
        for (n = 0; n < N; n++) {
            double s = 0, e[64];
            for (r = 0; r < (size_t)f->R; r++) s += (e[r] = exp(1.5 * tt_normal()));
            for (r = 0; r < (size_t)f->R; r++) f->mu[n * f->R + r] = (float)(e[r] / s);
        }
    }
}

static void fx_free(fx *f)
{
    int i;
    for (i = 0; i < f->np; i++) {
        free(f->P[i]);
        free(f->G[i]);
    }
    free(f->x);
    free(f->mu);
    free(f->out);
    free(f->Rw);
    free(f->dx);
    free(f->dmu);
    free(f->saved);
    free(f->work);
    free(f->gq);
    free(f->gk);
    free(f->gv);
    free(f->tmp);
}

/* forward; *extra receives the scalar the objective adds (lb_coef * lb, align loss) */
static int fx_forward(fx *f, double *extra)
{
    int rc;
    double ex = 0;
    if (f->kind == K_MOE) {
        float lb = 0;
        rc = lyr_moe_forward(&f->moe, (const float *const *)f->P, f->x, f->mu, f->out, f->saved,
                             f->work, f->B, f->T, f->train, f->seed, f->host, &lb);
        ex = (double)f->lb_coef * lb;
    } else if (f->kind == K_POLAR) {
        lyr_polar_stats st;
        rc = lyr_polar_forward(&f->pol, (const float *const *)f->P, f->x, f->out, f->saved,
                               f->work, f->B, f->T, f->train, f->seed, &st);
        ex = st.align_loss;
    } else if (f->kind == K_MLP) {
        ex_ctx cx = ex_ctx_make(EX_CPU);
        rc = lyr_mlp_fwd(&cx, &f->mlp, (const float *const *)f->P, f->x, f->out, f->saved, f->B, f->T);
    } else if (f->kind == K_LFM) {
        ex_ctx cx = ex_ctx_make(EX_CPU);
        rc = lyr_lfm_fwd(&cx, &f->lfm, (const float *const *)f->P, f->x, f->out, f->saved, f->work, f->B, f->T);
    } else if (f->kind == K_PGS) {
        ex_ctx cx = ex_ctx_make(EX_CPU);
        const float *q, *k, *v;
        size_t i, n = (size_t)f->B * f->T * f->C;
        rc = lyr_polar_fwd(&cx, &f->pol, (const float *const *)f->P, f->x, f->out, f->saved, f->work, f->B, f->T,
                           f->train, f->seed, NULL);
        if (rc == LYR_OK) rc = lyr_polar_qkv(&f->pol, f->saved, f->B, f->T, &q, &k, &v);
        if (rc == LYR_OK)
            rc = lyr_gdelta_fwd_qkv(&cx, &f->gd, (const float *const *)f->P + f->npol, f->x, q, k, v, f->tmp,
                                    f->saved + f->nsaved_p, f->work, f->B, f->T, f->train, f->seed, NULL);
        if (rc == LYR_OK)
            for (i = 0; i < n; i++) f->out[i] += f->tmp[i];
    } else {
        rc = lyr_gdelta_forward(&f->gd, (const float *const *)f->P, f->x, f->out, f->saved,
                                f->work, f->B, f->T, f->train, f->seed, NULL);
    }
    if (extra) *extra = ex;
    return rc;
}

static int fx_backward(fx *f)
{
    if (f->kind == K_MOE)
        return lyr_moe_backward(&f->moe, (const float *const *)f->P, f->G, f->Rw, f->dx, f->dmu,
                                f->saved, f->work, f->B, f->T, f->host, f->lb_coef);
    if (f->kind == K_POLAR)
        return lyr_polar_backward(&f->pol, (const float *const *)f->P, f->G, f->Rw, f->dx,
                                  f->saved, f->work, f->B, f->T);
    if (f->kind == K_MLP) {
        ex_ctx cx = ex_ctx_make(EX_CPU);
        return lyr_mlp_bwd(&cx, &f->mlp, (const float *const *)f->P, f->G, f->x, f->Rw, f->dx, f->saved,
                           f->work, f->B, f->T);
    }
    if (f->kind == K_LFM) {
        ex_ctx cx = ex_ctx_make(EX_CPU);
        return lyr_lfm_bwd(&cx, &f->lfm, (const float *const *)f->P, f->G, f->x, f->Rw, f->dx, f->saved,
                           f->work, f->B, f->T);
    }
    if (f->kind == K_PGS) { /* the memory first: its q/k/v gradients join the attention's */
        ex_ctx cx = ex_ctx_make(EX_CPU);
        size_t Dh = (size_t)(f->pol.C / f->pol.H), N = (size_t)f->B * f->T;
        int rc;
        memset(f->gq, 0, N * f->pol.H * Dh * sizeof(float));
        memset(f->gk, 0, N * f->pol.Hkv * Dh * sizeof(float));
        memset(f->gv, 0, N * f->pol.Hkv * Dh * sizeof(float));
        rc = lyr_gdelta_bwd_qkv(&cx, &f->gd, (const float *const *)f->P + f->npol, f->G + f->npol, f->Rw, f->dx,
                                f->gq, f->gk, f->gv, f->saved + f->nsaved_p, f->work, f->B, f->T);
        if (rc != LYR_OK) return rc;
        return lyr_polar_bwd_qkv(&cx, &f->pol, (const float *const *)f->P, f->G, f->Rw, f->dx, f->saved, f->work,
                                 f->B, f->T, f->gq, f->gk, f->gv);
    }
    return lyr_gdelta_backward(&f->gd, (const float *const *)f->P, f->G, f->Rw, f->dx, f->saved,
                               f->work, f->B, f->T);
}

static double fx_loss(fx *f)
{
    double ex = 0, s = 0;
    size_t i, n = (size_t)f->B * f->T * f->C;
    if (fx_forward(f, &ex) != LYR_OK) return NAN;
    for (i = 0; i < n; i++) s += (double)f->out[i] * f->Rw[i];
    return s + ex;
}

static void fx_zero_grads(fx *f)
{
    int i;
    for (i = 0; i < f->np; i++) memset(f->G[i], 0, lyr_pspec_numel(&f->spec[i]) * sizeof(float));
    memset(f->dx, 0, (size_t)f->B * f->T * f->C * sizeof(float));
    memset(f->dmu, 0, (size_t)f->B * f->T * f->R * sizeof(float));
}

/* the MoE top-k selection of the last forward (N*K floats) */
static void moe_selection(fx *f, float *sel)
{
    lyr__moe_saved s;
    lyr__moe_rt rt;
    size_t N = (size_t)f->B * f->T, i;
    lyr__moe_carve(&f->moe, f->saved, N, &s);
    lyr__moe_carve_rt(&f->moe, s.rt, N, &rt);
    for (i = 0; i < N * (size_t)f->moe.top_k; i++) sel[i] = (float)rt.idx[i];
}

/* number of entries with |a - fd| > atol + rtol |fd| */
static long n_bad(const float *a, const double *fd, long n, const unsigned char *skip,
                  double *worst)
{
    long i, bad = 0;
    *worst = 0;
    for (i = 0; i < n; i++) {
        double dd, tol;
        if (skip && skip[i]) continue;
        dd = fabs((double)a[i] - fd[i]);
        tol = FD_ATOL + FD_RTOL * fabs(fd[i]);
        if (!(dd <= tol)) bad++;
        if (dd / tol > *worst || dd != dd) *worst = dd / tol;
    }
    return bad;
}

/* derivative of fx_loss w.r.t. v[i]: central difference with step eps (npt 2) or the
   fourth-order five-point stencil (npt 4); *moved = 1 when the MoE top-k selection
   differs from sel0 at any evaluation */
static double fd_one(fx *f, float *v, long i, float eps, int npt, const float *sel0,
                     float *sel, size_t NK, int *moved)
{
    static const double off2[2] = {1, -1}, w2[2] = {0.5, -0.5};
    static const double off4[4] = {2, 1, -1, -2}, w4[4] = {-1.0 / 12, 8.0 / 12, -8.0 / 12, 1.0 / 12};
    const double *off = npt == 4 ? off4 : off2, *w = npt == 4 ? w4 : w2;
    float v0 = v[i];
    double acc = 0;
    int j;
    *moved = 0;
    for (j = 0; j < npt; j++) {
        v[i] = (float)(v0 + off[j] * eps);
        acc += w[j] * fx_loss(f);
        if (NK) {
            moe_selection(f, sel);
            if (memcmp(sel, sel0, NK * sizeof(float)) != 0) *moved = 1;
        }
    }
    v[i] = v0;
    return acc / (double)eps;
}

/* finite differences of fx_loss w.r.t. v[0..n) into fd; skip[i] = 1 where the MoE
   selection moved. Double-checked: an entry outside tolerance with the central
   difference at FD_EPS (where fp32 rounding of the forward dominates the error) is
   measured again with the five-point stencil at FD_EPS2 (less rounding noise,
   O(eps^4) truncation), which then stands; a wrong gradient is off with both. */
#define FD_EPS2 2e-3f
static void fd_grad(fx *f, float *v, const float *g, long n, double *fd, unsigned char *skip,
                    long *nskip, long *nretry)
{
    long i;
    size_t NK = f->kind == K_MOE ? (size_t)f->B * f->T * f->moe.top_k : 0;
    float *sel0 = NULL, *sel = NULL;
    if (NK) {
        sel0 = (float *)xcalloc(NK, sizeof(float));
        sel = (float *)xcalloc(NK, sizeof(float));
        fx_loss(f);
        moe_selection(f, sel0);
    }
    for (i = 0; i < n; i++) {
        int moved;
        double tol;
        fd[i] = fd_one(f, v, i, FD_EPS, 2, sel0, sel, NK, &moved);
        skip[i] = (unsigned char)moved;
        tol = FD_ATOL + FD_RTOL * fabs(fd[i]);
        if (!moved && !(fabs((double)g[i] - fd[i]) <= tol)) {
            fd[i] = fd_one(f, v, i, FD_EPS2, 4, sel0, sel, NK, &moved);
            (*nretry)++;
            if (moved) skip[i] = 1;
        }
        if (skip[i]) (*nskip)++;
    }
    free(sel0);
    free(sel);
}

/* check every parameter gradient and dx (and dmu for the MoE) against finite
   differences; also that a corrupted gradient fails the same comparison */
static void fd_check_all(fx *f, const char *what)
{
    int i, tensors = f->np + 1 + (f->kind == K_MOE);
    long nskip = 0, ntot = 0, nretry = 0;
    int control_done = 0;
    fx_zero_grads(f);
    CHECK_INT_EQ(fx_forward(f, NULL), LYR_OK);
    CHECK_INT_EQ(fx_backward(f), LYR_OK);
    for (i = 0; i < tensors; i++) {
        float *v, *g;
        long n;
        double *fd, worst;
        unsigned char *skip;
        long bad;
        const char *name;
        if (i < f->np) {
            v = f->P[i];
            g = f->G[i];
            n = (long)lyr_pspec_numel(&f->spec[i]);
            name = f->spec[i].suffix;
        } else if (i == f->np) {
            v = f->x;
            g = f->dx;
            n = (long)f->B * f->T * f->C;
            name = "input x";
        } else {
            v = f->mu;
            g = f->dmu;
            n = (long)f->B * f->T * f->R;
            name = "input mu";
        }
        fd = (double *)xcalloc((size_t)n, sizeof(double));
        skip = (unsigned char *)xcalloc((size_t)n, 1);
        fd_grad(f, v, g, n, fd, skip, &nskip, &nretry);
        ntot += n;
        bad = n_bad(g, fd, n, skip, &worst);
        if (bad) {
            long j;
            fprintf(stderr, "  %s: gradient of %s: %ld of %ld bad (worst %.2f x tol)\n", what,
                    name, bad, n, worst);
            for (j = 0; j < n && j < 12; j++)
                fprintf(stderr, "    [%ld] analytic %.6g fd %.6g%s\n", j, g[j], fd[j],
                        skip[j] ? " (skipped)" : "");
        }
        CHECK_INT_EQ(bad, 0);
        /* the gradient must not be trivially zero, and a wrong one must fail */
        if (!control_done) {
            long j, big = -1;
            for (j = 0; j < n; j++)
                if (!skip[j] && (big < 0 || fabs(fd[j]) > fabs(fd[big]))) big = j;
            if (big >= 0 && fabs(fd[big]) > 0.05) {
                float keep = g[big];
                g[big] = (float)(keep * 1.1 + 0.01);
                CHECK(n_bad(g, fd, n, skip, &worst) > 0);
                g[big] = keep;
                control_done = 1;
            }
        }
        free(fd);
        free(skip);
    }
    CHECK(control_done);
    /* the selection moved for a small minority of the coordinates only */
    CHECK(nskip * 20 <= ntot);
    /* the second step size is the exception, not the rule */
    CHECK(nretry * 10 <= ntot);
    fprintf(stderr, "  %s: %ld coordinates, %ld skipped (top-k moved), %ld re-measured at eps %g\n",
            what, ntot, nskip, nretry, (double)FD_EPS2);
}

/* backward accumulates: a second call adds the same amount again */
static void check_accumulates(fx *f)
{
    int i;
    float **g1 = (float **)xcalloc((size_t)f->np, sizeof(float *));
    size_t nx = (size_t)f->B * f->T * f->C;
    float *dx1 = (float *)xcalloc(nx, sizeof(float)), *dx2;
    fx_zero_grads(f);
    CHECK_INT_EQ(fx_forward(f, NULL), LYR_OK);
    CHECK_INT_EQ(fx_backward(f), LYR_OK);
    for (i = 0; i < f->np; i++) {
        size_t n = lyr_pspec_numel(&f->spec[i]);
        g1[i] = (float *)xcalloc(n, sizeof(float));
        memcpy(g1[i], f->G[i], n * sizeof(float));
    }
    memcpy(dx1, f->dx, nx * sizeof(float));
    CHECK_INT_EQ(fx_backward(f), LYR_OK);
    for (i = 0; i < f->np; i++) {
        size_t n = lyr_pspec_numel(&f->spec[i]), j;
        float *twice = (float *)xcalloc(n, sizeof(float));
        for (j = 0; j < n; j++) twice[j] = 2.0f * g1[i][j];
        CHECK_ALL_CLOSE(f->G[i], twice, n, 1e-5, 1e-7);
        free(twice);
        free(g1[i]);
    }
    dx2 = (float *)xcalloc(nx, sizeof(float));
    for (i = 0; i < (int)nx; i++) dx2[i] = 2.0f * dx1[i];
    CHECK_ALL_CLOSE(f->dx, dx2, nx, 1e-5, 1e-7);
    free(dx1);
    free(dx2);
    free(g1);
}

/* two forwards and two backwards give bit-identical results */
static void check_deterministic(fx *f)
{
    size_t nx = (size_t)f->B * f->T * f->C;
    float *o1 = (float *)xcalloc(nx, sizeof(float)), *s1 = (float *)xcalloc(f->nsaved, sizeof(float));
    float *d1 = (float *)xcalloc(nx, sizeof(float));
    float *g1 = (float *)xcalloc(lyr_pspec_numel(&f->spec[0]), sizeof(float));
    size_t n0 = lyr_pspec_numel(&f->spec[0]);
    fx_zero_grads(f);
    CHECK_INT_EQ(fx_forward(f, NULL), LYR_OK);
    memcpy(o1, f->out, nx * sizeof(float));
    memcpy(s1, f->saved, f->nsaved * sizeof(float));
    CHECK_INT_EQ(fx_backward(f), LYR_OK);
    memcpy(d1, f->dx, nx * sizeof(float));
    memcpy(g1, f->G[0], n0 * sizeof(float));
    memset(f->out, 0, nx * sizeof(float));
    memset(f->work, 0xff, f->nwork * sizeof(float)); /* scratch content must not matter */
    fx_zero_grads(f);
    CHECK_INT_EQ(fx_forward(f, NULL), LYR_OK);
    CHECK(memcmp(o1, f->out, nx * sizeof(float)) == 0);
    CHECK(memcmp(s1, f->saved, f->nsaved * sizeof(float)) == 0);
    CHECK_INT_EQ(fx_backward(f), LYR_OK);
    CHECK(memcmp(d1, f->dx, nx * sizeof(float)) == 0);
    CHECK(memcmp(g1, f->G[0], n0 * sizeof(float)) == 0);
    free(o1);
    free(s1);
    free(d1);
    free(g1);
}

/* =================================================================== MoE */
static fx moe_fx(int C, int F, int E, int K, int R, int renorm, int train, float lb)
{
    fx f;
    memset(&f, 0, sizeof f);
    f.kind = K_MOE;
    f.moe = lyr_moe_dims_make(C, F, E, K, R);
    f.moe.renorm = renorm;
    f.train = train;
    f.seed = 1234;
    f.lb_coef = lb;
    return f;
}

static void test_moe_grad_topk(void)
{
    fx f = moe_fx(8, 12, 4, 2, 3, 1, 1, 0.0f);
    fx_setup(&f, 2, 6, 0.4, 11);
    fd_check_all(&f, "moe top2 renorm");
    fx_free(&f);
}

static void test_moe_grad_listing_lb(void)
{
    fx f = moe_fx(8, 10, 5, 3, 4, 0, 1, 0.7f);
    fx_setup(&f, 2, 5, 0.4, 12);
    fd_check_all(&f, "moe top3 listing-norm lb");
    fx_free(&f);
}

static void test_moe_grad_top1_eval(void)
{
    fx f = moe_fx(8, 8, 3, 1, 2, 1, 0, 0.3f);
    fx_setup(&f, 2, 7, 0.5, 13);
    fd_check_all(&f, "moe top1 eval lb");
    fx_free(&f);
}

/* two experts' logits beyond the clamp (all 40): they share the top-2 by the noise
   alone and their gate rows get no gradient (the loss is flat there) */
static void test_moe_grad_clamped(void)
{
    fx f = moe_fx(8, 8, 4, 2, 3, 1, 1, 0.0f);
    int r;
    fx_setup(&f, 2, 6, 0.3, 16);
    for (r = 0; r < 2 * 3; r++) f.P[LYR_MOE_GATE][r] = 40.0f + 0.1f * (float)r;
    fd_check_all(&f, "moe clamped logits");
    for (r = 0; r < 2 * 3; r++) CHECK(f.G[LYR_MOE_GATE][r] == 0.0f);
    fx_free(&f);
}

/* the load-balance term alone (Rw = 0): its gradient reaches the gate and mu */
static void test_moe_grad_lb_only(void)
{
    fx f = moe_fx(8, 8, 4, 2, 3, 1, 1, 20.0f);
    fx_setup(&f, 2, 6, 0.8, 15);
    memset(f.Rw, 0, (size_t)f.B * f.T * f.C * sizeof(float));
    fd_check_all(&f, "moe load-balance only");
    fx_free(&f);
}

static void test_moe_accumulates_deterministic(void)
{
    fx f = moe_fx(16, 24, 4, 2, 3, 1, 1, 0.2f);
    fx_setup(&f, 2, 8, 0.3, 14);
    check_accumulates(&f);
    check_deterministic(&f);
    fx_free(&f);
}

static double gelu_d(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* dense double reference of the whole layer (noise from the layer's counter RNG) */
static void moe_reference(fx *f, double *ref, double *lb_out)
{
    const lyr_moe_dims *d = &f->moe;
    size_t N = (size_t)f->B * f->T, n;
    int E = d->E, K = d->top_k, C = d->C, F = d->F, R = d->R, e, c, j, r, k;
    double *p = (double *)xcalloc((size_t)E, sizeof(double)), lb = 0;
    for (n = 0; n < N; n++) {
        double z[64], y[64], w[64], mx = -1e300, s = 0, kept = 0, all = 0;
        int sel[64];
        for (e = 0; e < E; e++) {
            double l = 0;
            for (r = 0; r < R; r++) l += (double)f->mu[n * R + r] * f->P[LYR_MOE_GATE][e * R + r];
            l = l > 30 ? 30 : l < -30 ? -30 : l;
            l = (double)(float)l;
            if (f->train) l += lyr__gumbel(f->seed, n, e, E);
            z[e] = l / d->gumbel_tau;
            if (z[e] > mx) mx = z[e];
        }
        for (e = 0; e < E; e++) s += (y[e] = exp(z[e] - mx));
        for (e = 0; e < E; e++) {
            y[e] /= s;
            all += y[e];
            w[e] = 0;
            sel[e] = 0;
        }
        for (k = 0; k < K; k++) {
            int best = -1;
            for (e = 0; e < E; e++)
                if (!sel[e] && (best < 0 || y[e] > y[best])) best = e;
            sel[best] = 1;
            kept += y[best];
        }
        for (e = 0; e < E; e++)
            if (sel[e]) w[e] = d->renorm ? y[e] / kept : y[e] / (all + 1e-6);
        for (c = 0; c < C; c++) ref[n * C + c] = 0;
        for (e = 0; e < E; e++) {
            const float *W1 = f->P[LYR_MOE_W1] + (size_t)e * F * C, *W2 = f->P[LYR_MOE_W2] + (size_t)e * C * F;
            double h[256];
            p[e] += w[e] / (double)N;
            if (!sel[e]) continue;
            for (j = 0; j < F; j++) {
                double a = f->P[LYR_MOE_B1][e * F + j];
                for (c = 0; c < C; c++) a += (double)W1[j * C + c] * f->x[n * C + c];
                h[j] = gelu_d(a);
            }
            for (c = 0; c < C; c++) {
                double o = f->P[LYR_MOE_B2][e * C + c];
                for (j = 0; j < F; j++) o += (double)W2[c * F + j] * h[j];
                ref[n * C + c] += w[e] * o;
            }
        }
    }
    for (e = 0; e < E; e++) lb += (p[e] - 1.0 / E) * (p[e] - 1.0 / E);
    *lb_out = lb / E;
    free(p);
}

static void moe_ref_case(int E, int K, int renorm, int train)
{
    fx f = moe_fx(16, 20, E, K, 3, renorm, train, 0.0f);
    size_t n;
    double *ref, lbr;
    float lb = -1;
    fx_setup(&f, 2, 7, 0.3, 20 + E * 7 + K);
    n = (size_t)f.B * f.T * f.C;
    ref = (double *)xcalloc(n, sizeof(double));
    CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, f.x, f.mu, f.out, f.saved,
                                 f.work, f.B, f.T, f.train, f.seed, NULL, &lb),
                 LYR_OK);
    moe_reference(&f, ref, &lbr);
    CHECK_ALL_CLOSE(f.out, ref, n, 1e-4, 1e-5);
    CHECK_CLOSE(lb, lbr, 1e-4, 1e-7);
    if (K == E) CHECK_NEAR(lbr, 0.0, 1.0); /* defined; the value itself is checked above */
    free(ref);
    fx_free(&f);
}

static void test_moe_dense_equivalence(void)
{
    /* top_k = E: the sparse path equals the dense mixture */
    moe_ref_case(4, 4, 1, 0);
    moe_ref_case(4, 4, 1, 1);
    moe_ref_case(3, 3, 0, 1);
    /* top_k < E: the kept experts only */
    moe_ref_case(5, 2, 1, 0);
    moe_ref_case(5, 2, 1, 1);
    moe_ref_case(6, 3, 0, 1);
    moe_ref_case(4, 1, 1, 1);
}

/* every token routed to expert 0 (the others get no rows): still the reference, and
   the idle experts get exactly zero gradient */
static void test_moe_idle_experts(void)
{
    fx f = moe_fx(8, 12, 4, 1, 3, 1, 0, 0.0f);
    size_t n, i;
    double *ref, lbr;
    float lb;
    int e, r;
    fx_setup(&f, 2, 5, 0.3, 25);
    for (e = 0; e < 4; e++)
        for (r = 0; r < 3; r++) f.P[LYR_MOE_GATE][e * 3 + r] = e == 0 ? 5.0f : -5.0f;
    n = (size_t)f.B * f.T * f.C;
    ref = (double *)xcalloc(n, sizeof(double));
    CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, f.x, f.mu, f.out, f.saved,
                                 f.work, f.B, f.T, 0, 0, NULL, &lb), LYR_OK);
    moe_reference(&f, ref, &lbr);
    CHECK_ALL_CLOSE(f.out, ref, n, 1e-4, 1e-5);
    CHECK_CLOSE(lb, (0.75 * 0.75 + 3 * 0.0625) / 4, 1e-5, 1e-7); /* p = (1, 0, 0, 0) */
    fx_zero_grads(&f);
    CHECK_INT_EQ(fx_backward(&f), LYR_OK);
    for (i = (size_t)12 * 8; i < (size_t)4 * 12 * 8; i++) CHECK(f.G[LYR_MOE_W1][i] == 0.0f);
    CHECK(f.G[LYR_MOE_W1][0] != 0.0f);
    free(ref);
    fx_free(&f);
}

static void test_moe_noise(void)
{
    fx f = moe_fx(8, 8, 4, 1, 3, 1, 1, 0.0f);
    size_t nx;
    float *o1, *sel1, *sel2;
    int differs;
    lyr__moe_saved s;
    lyr__moe_rt rt;
    fx_setup(&f, 2, 8, 0.3, 30);
    nx = (size_t)f.B * f.T * f.C;
    o1 = (float *)xcalloc(nx, sizeof(float));
    sel1 = (float *)xcalloc((size_t)f.B * f.T, sizeof(float));
    sel2 = (float *)xcalloc((size_t)f.B * f.T, sizeof(float));
    /* same seed: bit-identical; another seed: other routing somewhere */
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    memcpy(o1, f.out, nx * sizeof(float));
    moe_selection(&f, sel1);
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    CHECK(memcmp(o1, f.out, nx * sizeof(float)) == 0);
    f.seed = 99;
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    moe_selection(&f, sel2);
    differs = memcmp(sel1, sel2, (size_t)f.B * f.T * sizeof(float)) != 0;
    CHECK(differs);
    /* eval (no noise) ignores the seed */
    f.train = 0;
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    memcpy(o1, f.out, nx * sizeof(float));
    f.seed = 5;
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    CHECK(memcmp(o1, f.out, nx * sizeof(float)) == 0);
    /* kept weights of every token sum to 1 (renorm) */
    lyr__moe_carve(&f.moe, f.saved, (size_t)f.B * f.T, &s);
    lyr__moe_carve_rt(&f.moe, s.rt, (size_t)f.B * f.T, &rt);
    CHECK_NEAR(rt.w[0], 1.0, 1e-6);
    /* the Gumbel draws look like Gumbel(0,1): mean ~ 0.5772 */
    {
        double m = 0;
        int i;
        for (i = 0; i < 20000; i++) m += lyr__gumbel(77, (size_t)i, 1, 4);
        CHECK_NEAR(m / 20000, 0.5772, 0.03);
    }
    free(o1);
    free(sel1);
    free(sel2);
    fx_free(&f);
}

static void test_moe_bad_args(void)
{
    fx f = moe_fx(8, 8, 4, 2, 3, 1, 1, 0.0f);
    lyr_moe_dims d;
    lyr_pspec sp[LYR_MAX_PARAMS];
    float lb;
    fx_setup(&f, 2, 4, 0.1, 40);
    d = f.moe;
    d.top_k = 5;
    CHECK_INT_EQ(lyr_moe_validate(&d), LYR_EINVAL);
    CHECK_INT_EQ(lyr_moe_params(&d, sp, LYR_MAX_PARAMS), LYR_EINVAL);
    CHECK(lyr_moe_saved_floats(&d, 2, 4) == 0);
    d.top_k = 0;
    CHECK_INT_EQ(lyr_moe_validate(&d), LYR_EINVAL);
    d = f.moe;
    d.gumbel_tau = 0;
    CHECK_INT_EQ(lyr_moe_validate(&d), LYR_EINVAL);
    d.gumbel_tau = NAN;
    CHECK_INT_EQ(lyr_moe_validate(&d), LYR_EINVAL);
    d = f.moe;
    d.renorm = 2;
    CHECK_INT_EQ(lyr_moe_validate(&d), LYR_EINVAL);
    d = f.moe;
    d.C = 0;
    CHECK_INT_EQ(lyr_moe_validate(&d), LYR_EINVAL);
    CHECK_INT_EQ(lyr_moe_params(&f.moe, sp, 3), LYR_EINVAL);
    CHECK_INT_EQ(lyr_moe_params(&f.moe, NULL, 8), LYR_EINVAL);
    CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, NULL, f.mu, f.out, f.saved,
                                 f.work, 2, 4, 1, 1, NULL, &lb), LYR_EINVAL);
    CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, f.x, f.mu, f.out, f.saved,
                                 f.work, 0, 4, 1, 1, NULL, &lb), LYR_EINVAL);
    CHECK_INT_EQ(lyr_moe_forward(&f.moe, NULL, f.x, f.mu, f.out, f.saved, f.work, 2, 4, 1, 1,
                                 NULL, &lb), LYR_EINVAL);
    {
        float *keep = f.P[LYR_MOE_W2];
        f.P[LYR_MOE_W2] = NULL;
        CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, f.x, f.mu, f.out,
                                     f.saved, f.work, 2, 4, 1, 1, NULL, &lb), LYR_EINVAL);
        f.P[LYR_MOE_W2] = keep;
    }
    f.mu[3] = NAN;
    CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, f.x, f.mu, f.out, f.saved,
                                 f.work, 2, 4, 1, 1, NULL, &lb), LYR_EINVAL);
    f.mu[3] = 0.5f;
    CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, f.x, f.mu, f.out, f.saved,
                                 f.work, 2, 4, 1, 1, NULL, &lb), LYR_OK);
    CHECK_INT_EQ(lyr_moe_backward(&f.moe, (const float *const *)f.P, f.G, f.Rw, f.dx, f.dmu,
                                  f.saved, f.work, 2, 4, NULL, NAN), LYR_EINVAL);
    CHECK_INT_EQ(lyr_moe_backward(&f.moe, (const float *const *)f.P, NULL, f.Rw, f.dx, f.dmu,
                                  f.saved, f.work, 2, 4, NULL, 0), LYR_EINVAL);
    CHECK_INT_EQ(lyr_moe_backward(&f.moe, (const float *const *)f.P, f.G, f.Rw, NULL, NULL,
                                  f.saved, f.work, 2, 4, NULL, 0), LYR_OK); /* input grads optional */
    CHECK(strcmp(lyr_strerror(LYR_EINVAL), lyr_strerror(LYR_OK)) != 0);
    fx_free(&f);
}

static void test_moe_counts(void)
{
    lyr_moe_dims d = lyr_moe_dims_make(128, 512, 4, 2, 4);
    lyr_pspec sp[LYR_MAX_PARAMS];
    int n = lyr_moe_params(&d, sp, LYR_MAX_PARAMS), i;
    size_t tot = 0, s1, s2;
    CHECK_INT_EQ(n, LYR_MOE_NPARAMS);
    for (i = 0; i < n; i++) tot += lyr_pspec_numel(&sp[i]);
    CHECK(tot == (size_t)4 * 4 + 2 * (size_t)4 * 512 * 128 + 4 * 512 + 4 * 128);
    CHECK(strcmp(sp[LYR_MOE_W1].suffix, "w1") == 0 && sp[LYR_MOE_GATE].decay == 1 &&
          sp[LYR_MOE_B1].decay == 0);
    /* sparse: the saved activations scale with top_k, not with E */
    s1 = lyr_moe_saved_floats(&d, 4, 64);
    d.E = 16;
    s2 = lyr_moe_saved_floats(&d, 4, 64);
    CHECK(s2 < s1 + (size_t)4 * 64 * 16 * 2 + 64);
    CHECK(s1 >= (size_t)4 * 64 * 2 * (2 * 128 + 512));
}

/* the CPU path with a host buffer (filled with NaN bytes: its content must not matter)
   gives the bits of the path without one; the host count grows with B*T and is 0 for bad
   dimensions */
static void test_moe_host_buffer(void)
{
    static const int cfg[3][4] = {{2, 1, 1, 1}, {1, 0, 1, 0}, {3, 0, 0, 1}}; /* K, renorm, train, lb */
    int c;
    for (c = 0; c < 3; c++) {
        fx f = moe_fx(12, 20, 5, cfg[c][0], 3, cfg[c][1], cfg[c][2], cfg[c][3] ? 0.5f : 0.0f);
        size_t N, nx, nh, i;
        float *o1, *dx1, *dmu1, *g1[LYR_MOE_NPARAMS];
        float lb1 = -1, lb2 = -2;
        fx_setup(&f, 2, 9, 0.4, 50 + (unsigned long long)c);
        N = (size_t)f.B * f.T;
        nx = N * (size_t)f.C;
        nh = lyr_moe_host_floats(&f.moe, f.B, f.T);
        CHECK(nh > 0);
        CHECK(lyr_moe_host_floats(&f.moe, f.B, 2 * f.T) > nh);
        o1 = (float *)xcalloc(nx, sizeof(float));
        dx1 = (float *)xcalloc(nx, sizeof(float));
        dmu1 = (float *)xcalloc(N * (size_t)f.R, sizeof(float));
        fx_zero_grads(&f);
        CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, f.x, f.mu, f.out, f.saved,
                                     f.work, f.B, f.T, f.train, f.seed, NULL, &lb1), LYR_OK);
        CHECK_INT_EQ(fx_backward(&f), LYR_OK);
        memcpy(o1, f.out, nx * sizeof(float));
        memcpy(dx1, f.dx, nx * sizeof(float));
        memcpy(dmu1, f.dmu, N * (size_t)f.R * sizeof(float));
        for (i = 0; i < LYR_MOE_NPARAMS; i++) {
            size_t n = lyr_pspec_numel(&f.spec[i]);
            g1[i] = (float *)xcalloc(n, sizeof(float));
            memcpy(g1[i], f.G[i], n * sizeof(float));
        }
        f.host = (float *)xcalloc(nh, sizeof(float));
        memset(f.host, 0xff, nh * sizeof(float));
        memset(f.out, 0, nx * sizeof(float));
        fx_zero_grads(&f);
        CHECK_INT_EQ(lyr_moe_forward(&f.moe, (const float *const *)f.P, f.x, f.mu, f.out, f.saved,
                                     f.work, f.B, f.T, f.train, f.seed, f.host, &lb2), LYR_OK);
        CHECK_INT_EQ(fx_backward(&f), LYR_OK);
        CHECK(memcmp(&lb1, &lb2, sizeof lb1) == 0);
        CHECK(memcmp(o1, f.out, nx * sizeof(float)) == 0);
        CHECK(memcmp(dx1, f.dx, nx * sizeof(float)) == 0);
        CHECK(memcmp(dmu1, f.dmu, N * (size_t)f.R * sizeof(float)) == 0);
        for (i = 0; i < LYR_MOE_NPARAMS; i++) {
            CHECK(memcmp(g1[i], f.G[i], lyr_pspec_numel(&f.spec[i]) * sizeof(float)) == 0);
            free(g1[i]);
        }
        free(f.host);
        f.host = NULL;
        free(o1);
        free(dx1);
        free(dmu1);
        fx_free(&f);
    }
    {
        lyr_moe_dims d = lyr_moe_dims_make(8, 8, 4, 5, 3); /* top_k > E */
        CHECK(lyr_moe_host_floats(&d, 2, 4) == 0);
        d.top_k = 2;
        CHECK(lyr_moe_host_floats(&d, 0, 4) == 0);
        CHECK(lyr_moe_host_floats(NULL, 2, 4) == 0);
    }
}

/* =================================================================== polar */
static fx polar_fx(int C, int H, int Hkv, int qkn, int R, int train)
{
    fx f;
    memset(&f, 0, sizeof f);
    f.kind = K_POLAR;
    f.pol = lyr_polar_dims_make(C, H);
    f.pol.Hkv = Hkv;
    f.pol.qk_norm = qkn;
    f.pol.cfg.block_q = 4;
    f.pol.cfg.block_k = 3;
    f.pol.cfg.distractor_keys = R;
    f.pol.cfg.distractor_weight = 0.5f;
    f.train = train;
    f.seed = 77;
    return f;
}

static void test_polar_grad(void)
{
    fx f = polar_fx(8, 2, 2, 1, 0, 1);
    fx_setup(&f, 2, 7, 0.3, 50);
    fd_check_all(&f, "polar");
    fx_free(&f);
}

static void test_polar_grad_gqa_noqknorm(void)
{
    fx f = polar_fx(12, 4, 2, 0, 0, 1);
    fx_setup(&f, 2, 6, 0.3, 51);
    fd_check_all(&f, "polar gqa no-qknorm");
    fx_free(&f);
}

static void test_polar_grad_window(void)
{
    fx f = polar_fx(8, 2, 1, 1, 0, 1);
    f.pol.cfg.window = 3;
    fx_setup(&f, 2, 8, 0.3, 52);
    fd_check_all(&f, "polar window");
    fx_free(&f);
}

static void test_polar_grad_distractor(void)
{
    fx f = polar_fx(8, 2, 2, 1, 3, 1);
    lyr_polar_stats st;
    fx_setup(&f, 2, 5, 0.3, 53);
    CHECK_INT_EQ(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, f.saved, f.work,
                                   f.B, f.T, 1, f.seed, &st), LYR_OK);
    CHECK(st.align_loss > 0);
    CHECK_INT_EQ(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, f.saved, f.work,
                                   f.B, f.T, 0, f.seed, &st), LYR_OK);
    CHECK(st.align_loss == 0); /* eval: off */
    fd_check_all(&f, "polar distractor");
    fx_free(&f);
}

static void test_polar_accumulates_deterministic_stats(void)
{
    fx f = polar_fx(16, 4, 2, 1, 0, 1);
    lyr_polar_stats st;
    lyr__polar_saved s;
    fx_setup(&f, 2, 9, 0.2, 54);
    check_accumulates(&f);
    check_deterministic(&f);
    /* statistics against the materialised reference's weights */
    CHECK_INT_EQ(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, f.saved, f.work,
                                   f.B, f.T, 1, f.seed, &st), LYR_OK);
    lyr__polar_carve(&f.pol, f.saved, f.B, f.T, &s);
    {
        int B = f.B, T = f.T, H = 4, Hkv = 2, D = 4;
        size_t nr = (size_t)B * H * T;
        float *c = (float *)xcalloc(nr * D, sizeof(float)), *mag = (float *)xcalloc(nr, sizeof(float));
        float *stt = (float *)xcalloc(nr * POLAR_NSTAT, sizeof(float));
        float *pr = (float *)xcalloc(nr * (T + 1), sizeof(float));
        polar_state ps;
        polar_params prm = lyr__polar_prm((const float *const *)f.P);
        double nm = 0, mm = 0;
        size_t i;
        ps.stats = stt;
        ps.probs = pr;
        CHECK_INT_EQ(polar_forward_ref(&f.pol.cfg, c, mag, &ps, s.q, s.k, s.v, &prm, B, H, Hkv, T,
                                       D), POLAR_OK);
        for (i = 0; i < nr; i++) {
            nm += pr[i * (T + 1) + T];
            mm += mag[i];
        }
        CHECK_CLOSE(st.null_mean, nm / nr, 1e-4, 1e-6);
        CHECK_CLOSE(st.mag_mean, mm / nr, 1e-4, 1e-6);
        CHECK_ALL_CLOSE(s.c, c, nr * D, 1e-4, 1e-5);
        /* the GEMM assembly equals polar.h's per-token polar_assemble_forward */
        {
            float *o2 = (float *)xcalloc((size_t)B * T * f.C, sizeof(float));
            CHECK_INT_EQ(polar_assemble_forward(o2, s.c, s.mag, s.gl, f.P[LYR_POLAR_O],
                                                f.P[LYR_POLAR_MU], B, H, T, D, f.C), POLAR_OK);
            CHECK_ALL_CLOSE(f.out, o2, (size_t)B * T * f.C, 1e-4, 1e-6);
            free(o2);
        }
        free(c);
        free(mag);
        free(stt);
        free(pr);
    }
    fx_free(&f);
}

/* issue 43 item 4: the output gate per channel (B,T,H,D) from the q projection and the
   biases on the output projections (the authors' code): finite differences for every
   tensor (with and without biases, GQA, qk-norm on and off, a window), accumulation and
   determinism, and eq. 14 against a direct double transcription from the saved c, mag and
   gate logits */
static void test_polar_channel_gate(void)
{
    {
        fx f = polar_fx(12, 4, 2, 1, 0, 1);
        f.pol.gate = LYR_POLAR_GATE_CHANNEL;
        f.pol.bias = 1;
        fx_setup(&f, 2, 6, 0.3, 56);
        CHECK_INT_EQ(f.np, LYR_POLAR_NPARAMS_MAX);
        fd_check_all(&f, "polar channel gate + biases, gqa");
        check_accumulates(&f);
        check_deterministic(&f);
        { /* eq. 14 per channel, with the biases, in double */
            lyr__polar_saved s;
            int B = f.B, T = f.T, H = 4, D = 3, C = 12, b, t, h, j, o;
            double worst = 0;
            CHECK_INT_EQ(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, f.saved, f.work, B, T, 1,
                                           f.seed, NULL), LYR_OK);
            lyr__polar_carve(&f.pol, f.saved, B, T, &s);
            for (b = 0; b < B; b++)
                for (t = 0; t < T; t++)
                    for (o = 0; o < C; o++) {
                        size_t n = (size_t)b * T + t;
                        double acc = (double)f.P[LYR_POLAR_O_BIAS][o] + f.P[LYR_POLAR_MU_BIAS][o], e;
                        for (h = 0; h < H; h++) {
                            size_t row = ((size_t)b * H + h) * T + t;
                            for (j = 0; j < D; j++) {
                                double g = s.gl[(n * H + h) * D + j];
                                acc += (double)f.P[LYR_POLAR_O][(size_t)o * H * D + h * D + j] * s.c[row * D + j] /
                                       (1.0 + exp(-g));
                            }
                            acc += (double)f.P[LYR_POLAR_MU][(size_t)o * H + h] * s.mag[row];
                        }
                        e = fabs(acc - f.out[n * C + o]);
                        if (e > worst) worst = e;
                    }
            CHECK(worst < 1e-5);
        }
        fx_free(&f);
    }
    {
        fx f = polar_fx(8, 2, 1, 0, 0, 1);
        f.pol.gate = LYR_POLAR_GATE_CHANNEL;
        f.pol.cfg.window = 3;
        fx_setup(&f, 2, 7, 0.3, 57);
        CHECK_INT_EQ(f.np, LYR_POLAR_NPARAMS);
        fd_check_all(&f, "polar channel gate, no biases, no qk-norm, window 3");
        fx_free(&f);
    }
    {
        fx f = polar_fx(8, 2, 2, 1, 0, 1);
        f.pol.bias = 1; /* the biases with the gate per head */
        fx_setup(&f, 2, 5, 0.3, 58);
        fd_check_all(&f, "polar head gate + biases");
        fx_free(&f);
    }
    { /* counts and refusals */
        lyr_polar_dims d = lyr_polar_dims_make(128, 4);
        lyr_pspec sp[LYR_MAX_PARAMS];
        size_t s0, s1, w0, w1;
        d.Hkv = 2;
        s0 = lyr_polar_saved_floats(&d, 2, 64);
        w0 = lyr_polar_work_floats(&d, 2, 64);
        d.gate = LYR_POLAR_GATE_CHANNEL;
        d.bias = 1;
        CHECK_INT_EQ(lyr_polar_params(&d, sp, LYR_MAX_PARAMS), LYR_POLAR_NPARAMS_MAX);
        CHECK_INT_EQ(lyr_polar_params(&d, sp, LYR_POLAR_NPARAMS), LYR_EINVAL);
        CHECK(sp[LYR_POLAR_QKV].shape[0] == (4 + 2 * 2) * 32 + 4 * 32 && sp[LYR_POLAR_QKV].shape[1] == 128);
        CHECK(!strcmp(sp[LYR_POLAR_O_BIAS].suffix, "o.bias") && !strcmp(sp[LYR_POLAR_MU_BIAS].suffix, "mu.bias"));
        CHECK(sp[LYR_POLAR_O_BIAS].shape[0] == 128 && sp[LYR_POLAR_MU_BIAS].decay == 0 &&
              sp[LYR_POLAR_MU_BIAS].init == LYR_INIT_ZERO);
        s1 = lyr_polar_saved_floats(&d, 2, 64);
        w1 = lyr_polar_work_floats(&d, 2, 64);
        CHECK(s1 >= s0 + (size_t)2 * 64 * 4 * 31 && w1 >= w0 + (size_t)2 * 64 * 4 * 31 * 2);
        d.gate = 2;
        CHECK_INT_EQ(lyr_polar_validate(&d), LYR_EINVAL);
        d.gate = LYR_POLAR_GATE_CHANNEL;
        d.bias = 2;
        CHECK_INT_EQ(lyr_polar_validate(&d), LYR_EINVAL);
    }
}

/* issue 43 item 2: Canon layers (x + causal depthwise conv(x) on q, k, v, per channel):
   finite differences of every tensor (K 3 with GQA; K 4 longer than some prefixes, with
   the gate per channel, biases, no qk-norm and a window), accumulation and determinism, the
   convolution against a direct transcription from the saved inputs, the counts */
static void test_polar_canon(void)
{
    {
        fx f = polar_fx(12, 4, 2, 1, 0, 1);
        lyr__polar_saved s;
        int ci, part, b, h, t, j, i, K = 3, D = 3, B = 2, T = 6;
        double worst = 0;
        f.pol.canon_k = K;
        fx_setup(&f, B, T, 0.3, 59);
        ci = lyr_polar_canon_index(&f.pol);
        CHECK_INT_EQ(ci, LYR_POLAR_NPARAMS);
        CHECK_INT_EQ(f.np, LYR_POLAR_NPARAMS + 3);
        CHECK(!strcmp(f.spec[ci].suffix, "canon_q.weight") && f.spec[ci + 2].shape[0] == 2 &&
              f.spec[ci + 1].shape[1] == K && f.spec[ci + 1].shape[2] == D && f.spec[ci].decay == 0);
        fd_check_all(&f, "polar canon K 3, gqa");
        check_accumulates(&f);
        check_deterministic(&f);
        CHECK_INT_EQ(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, f.saved, f.work, B, T, 1,
                                       f.seed, NULL), LYR_OK);
        lyr__polar_carve(&f.pol, f.saved, B, T, &s);
        for (part = 0; part < 3; part++) {
            int hh = part == 0 ? 4 : 2;
            const float *y = part == 0 ? s.q : part == 1 ? s.k : s.v, *x = part == 0 ? s.qp : part == 1 ? s.kp : s.vp;
            const float *w = f.P[ci + part];
            for (b = 0; b < B; b++)
                for (h = 0; h < hh; h++)
                    for (t = 0; t < T; t++)
                        for (j = 0; j < D; j++) {
                            const float *xb = x + ((size_t)b * hh + h) * T * D;
                            double acc = xb[t * D + j], e;
                            for (i = 0; i < K && i <= t; i++) acc += (double)w[(h * K + i) * D + j] * xb[(t - i) * D + j];
                            e = fabs(acc - y[(((size_t)b * hh + h) * T + t) * D + j]);
                            if (e > worst) worst = e;
                        }
        }
        CHECK(worst < 1e-5);
        fx_free(&f);
    }
    {
        fx f = polar_fx(8, 2, 1, 0, 0, 1);
        f.pol.canon_k = 4;
        f.pol.gate = LYR_POLAR_GATE_CHANNEL;
        f.pol.bias = 1;
        f.pol.cfg.window = 3;
        fx_setup(&f, 2, 5, 0.3, 60);
        CHECK_INT_EQ(lyr_polar_canon_index(&f.pol), LYR_POLAR_NPARAMS_MAX);
        CHECK_INT_EQ(f.np, LYR_POLAR_NPARAMS_MAX + 3);
        fd_check_all(&f, "polar canon K 4, channel gate + biases, no qk-norm, window 3");
        fx_free(&f);
    }
    { /* the distractor loss (eq. 15) reads the convolved queries */
        fx f = polar_fx(8, 2, 2, 1, 3, 1);
        f.pol.canon_k = 2;
        fx_setup(&f, 2, 5, 0.3, 61);
        fd_check_all(&f, "polar canon K 2, distractor loss");
        fx_free(&f);
    }
    {
        lyr_polar_dims d = lyr_polar_dims_make(8, 2);
        CHECK_INT_EQ(lyr_polar_canon_index(&d), -1);
        d.canon_k = 65;
        CHECK_INT_EQ(lyr_polar_validate(&d), LYR_EINVAL);
        d.canon_k = -1;
        CHECK_INT_EQ(lyr_polar_validate(&d), LYR_EINVAL);
    }
}

static void test_polar_bad_args(void)
{
    fx f = polar_fx(8, 2, 2, 1, 0, 1);
    lyr_polar_dims d;
    fx_setup(&f, 1, 4, 0.1, 55);
    d = f.pol;
    d.H = 3; /* 8 % 3 != 0 */
    CHECK_INT_EQ(lyr_polar_validate(&d), LYR_EINVAL);
    d = f.pol;
    d.Hkv = 3;
    CHECK_INT_EQ(lyr_polar_validate(&d), LYR_EINVAL);
    d = f.pol;
    d.cfg.window = 0;
    CHECK_INT_EQ(lyr_polar_validate(&d), LYR_EINVAL);
    d = f.pol;
    d.qk_norm_eps = NAN;
    CHECK_INT_EQ(lyr_polar_validate(&d), LYR_EINVAL);
    CHECK(lyr_polar_work_floats(&d, 1, 4) == 0);
    CHECK_INT_EQ(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, NULL, f.work,
                                   1, 4, 1, 0, NULL), LYR_EINVAL);
    CHECK_INT_EQ(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, f.saved, f.work,
                                   1, -1, 1, 0, NULL), LYR_EINVAL);
    f.P[LYR_POLAR_LEN_GAIN][0] = NAN; /* polar.h refuses a NaN parameter */
    CHECK(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, f.saved, f.work, 1, 4,
                            1, 0, NULL) != LYR_OK);
    f.P[LYR_POLAR_LEN_GAIN][0] = -1.0f;
    CHECK_INT_EQ(lyr_polar_forward(&f.pol, (const float *const *)f.P, f.x, f.out, f.saved, f.work,
                                   1, 4, 1, 0, NULL), LYR_OK);
    CHECK_INT_EQ(lyr_polar_backward(&f.pol, (const float *const *)f.P, f.G, NULL, f.dx, f.saved,
                                    f.work, 1, 4), LYR_EINVAL);
    CHECK_INT_EQ(lyr_polar_backward(&f.pol, (const float *const *)f.P, f.G, f.Rw, NULL, f.saved,
                                    f.work, 1, 4), LYR_OK);
    fx_free(&f);
}

static void test_polar_counts(void)
{
    lyr_polar_dims d = lyr_polar_dims_make(128, 4);
    lyr_pspec sp[LYR_MAX_PARAMS];
    int n, i, D = 32, H = 4, Hkv = 2, C = 128;
    size_t tot = 0, s1, s2, w1, w2, N;
    d.Hkv = Hkv;
    n = lyr_polar_params(&d, sp, LYR_MAX_PARAMS);
    CHECK_INT_EQ(n, LYR_POLAR_NPARAMS);
    for (i = 0; i < n; i++) tot += lyr_pspec_numel(&sp[i]);
    CHECK(tot == (size_t)((H + 2 * Hkv) * D + H) * C + 4 * H + H * D + (size_t)C * H * D + C * H);
    CHECK(sp[LYR_POLAR_V_NULL].decay == 0 && sp[LYR_POLAR_O].decay == 1);
    /* saved: what the doc lists, per row: C + 2 H D + 2 Hkv D + 3 H + Hkv + 4 H (+ padding) */
    N = (size_t)2 * 512;
    s1 = lyr_polar_saved_floats(&d, 2, 512);
    CHECK(s1 >= N * (C + 2 * H * D + 2 * Hkv * D + 3 * H + Hkv + 4 * H));
    CHECK(s1 <= N * (C + 2 * H * D + 2 * Hkv * D + 3 * H + Hkv + 4 * H) + 16 * 13);
    /* streaming: memory linear in T (no T^2 term) */
    s2 = lyr_polar_saved_floats(&d, 2, 1024);
    w1 = lyr_polar_work_floats(&d, 2, 512);
    w2 = lyr_polar_work_floats(&d, 2, 1024);
    CHECK(s2 <= 2 * s1);
    CHECK(w2 <= 2 * w1);
    CHECK(w2 < (size_t)2 * 1024 * 1024); /* far below B*H*T^2 = 8.4M */
}

/* =================================================================== gdelta */
static fx gd_fx(int C, int Hm, int Dk, int algo, int chunk, int logg)
{
    fx f;
    memset(&f, 0, sizeof f);
    f.kind = K_GD;
    f.gd = lyr_gdelta_dims_make(C, Hm, Dk);
    f.gd.cfg.algo = algo;
    f.gd.cfg.chunk_size = chunk;
    f.gd.cfg.checkpoint = 3;
    f.gd.cfg.gate_is_log = logg;
    f.train = 1;
    return f;
}

static void test_gdelta_grad_chunked(void)
{
    fx f = gd_fx(8, 2, 4, GD_ALGO_CHUNKED, 4, 0);
    fx_setup(&f, 2, 7, 0.3, 60);
    fd_check_all(&f, "gdelta chunked");
    fx_free(&f);
}

static void test_gdelta_grad_recurrent_log(void)
{
    fx f = gd_fx(12, 3, 4, GD_ALGO_RECURRENT, 4, 1);
    fx_setup(&f, 2, 6, 0.3, 61);
    fd_check_all(&f, "gdelta recurrent log-gates");
    fx_free(&f);
}

static void test_gdelta_accumulates_deterministic(void)
{
    fx f = gd_fx(16, 2, 8, GD_ALGO_CHUNKED, 4, 0);
    lyr_gdelta_stats st;
    fx_setup(&f, 2, 9, 0.2, 62);
    check_accumulates(&f);
    check_deterministic(&f);
    CHECK_INT_EQ(lyr_gdelta_forward(&f.gd, (const float *const *)f.P, f.x, f.out, f.saved, f.work,
                                    f.B, f.T, 1, 0, &st), LYR_OK);
    CHECK(st.gamma_mean > 0 && st.gamma_mean < 1 && st.beta_mean > 0 && st.beta_mean < 1);
    /* the GEMM readout equals gdelta.h's gd_readout_forward */
    {
        lyr__gd_saved s;
        float *o2 = (float *)xcalloc((size_t)f.B * f.T * f.C, sizeof(float));
        lyr__gd_carve(&f.gd, f.saved, f.B, f.T, &s);
        CHECK_INT_EQ(gd_readout_forward(&f.gd.cfg, o2, s.r, f.x, f.P[LYR_GD_NORM], f.P[LYR_GD_G_W],
                                        f.P[LYR_GD_G_B], f.P[LYR_GD_PROJ], f.B, f.T, f.gd.Hm,
                                        f.gd.Dk, f.C, f.C, NULL), GD_OK);
        CHECK_ALL_CLOSE(f.out, o2, (size_t)f.B * f.T * f.C, 1e-4, 1e-6);
        free(o2);
    }
    fx_free(&f);
}

/* the kind's host floats (a device model's per-layer host memory): its forward keeps a copy
   of the saved header there and its backward reads it there, with the same results as the
   read from saved; a header copy from a forward of other sizes is refused */
static void test_gdelta_host_header(void)
{
    fx f = gd_fx(8, 2, 4, GD_ALGO_CHUNKED, 4, 0);
    ex_ctx cx = ex_ctx_make(EX_CPU);
    const size_t nh = lyr_kind_gdelta.host_floats(&f.gd, 2, 7);
    float *host, *G1[LYR_MAX_PARAMS], *dx1;
    lyr_io io;
    size_t n, i, k;
    int bad = 0;
    fx_setup(&f, 2, 7, 0.3, 65);
    CHECK(nh * sizeof(float) >= sizeof(gd_saved));
    host = (float *)xcalloc(nh, sizeof(float));
    n = (size_t)f.B * f.T * f.C;
    dx1 = (float *)xcalloc(n, sizeof(float));
    for (k = 0; k < (size_t)f.np; k++) G1[k] = (float *)xcalloc(lyr_pspec_numel(&f.spec[k]), sizeof(float));
    /* the reference: the typed functions (the header from saved) */
    CHECK_INT_EQ(lyr_gdelta_fwd(&cx, &f.gd, (const float *const *)f.P, f.x, f.out, f.saved, f.work, f.B, f.T, 1, 0,
                                NULL), LYR_OK);
    CHECK_INT_EQ(lyr_gdelta_bwd(&cx, &f.gd, (const float *const *)f.P, G1, f.Rw, dx1, f.saved, f.work, f.B, f.T),
                 LYR_OK);
    memset(&io, 0, sizeof io);
    io.P = (const float *const *)f.P;
    io.G = f.G;
    io.x = f.x;
    io.out = f.out;
    io.dout = f.Rw;
    io.dx = f.dx;
    io.saved = f.saved;
    io.work = f.work;
    io.host = host;
    io.B = f.B;
    io.T = f.T;
    CHECK_INT_EQ(lyr_kind_gdelta.forward(&cx, &f.gd, &io), LYR_OK);
    memset(f.saved, 0, sizeof(float) * 4); /* a header in saved that would not pass: not read */
    for (k = 0; k < (size_t)f.np; k++) memset(f.G[k], 0, sizeof(float) * lyr_pspec_numel(&f.spec[k]));
    memset(f.dx, 0, sizeof(float) * n);
    CHECK_INT_EQ(lyr_kind_gdelta.backward(&cx, &f.gd, &io), LYR_OK);
    for (i = 0; i < n; i++) bad += f.dx[i] != dx1[i];
    for (k = 0; k < (size_t)f.np; k++)
        for (i = 0; i < lyr_pspec_numel(&f.spec[k]); i++) bad += f.G[k][i] != G1[k][i];
    CHECK_INT_EQ(bad, 0);
    CHECK_INT_EQ(lyr_kind_gdelta.forward(&cx, &f.gd, &io), LYR_OK);
    io.T = 6; /* the copy says T 7 */
    CHECK_INT_EQ(lyr_kind_gdelta.backward(&cx, &f.gd, &io), LYR_EINVAL);
    for (k = 0; k < (size_t)f.np; k++) free(G1[k]);
    free(dx1);
    free(host);
    fx_free(&f);
}

static void test_gdelta_init_noop(void)
{
    /* at init (proj.weight = 0) the channel adds exactly nothing */
    fx f = gd_fx(8, 2, 4, GD_ALGO_CHUNKED, 32, 0);
    size_t i, n;
    int nz = 0;
    fx_setup(&f, 1, 5, 0.0, 63);
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    n = (size_t)f.B * f.T * f.C;
    for (i = 0; i < n; i++) nz += f.out[i] != 0.0f;
    CHECK_INT_EQ(nz, 0);
    CHECK_CLOSE(f.P[LYR_GD_B_GAMMA][0], 3.9, 1e-6, 0);
    CHECK(f.P[LYR_GD_NORM][0] == 1.0f);
    fx_free(&f);
}

static void test_gdelta_bad_args(void)
{
    fx f = gd_fx(8, 2, 4, GD_ALGO_CHUNKED, 4, 0);
    lyr_gdelta_dims d;
    fx_setup(&f, 1, 5, 0.1, 64);
    d = f.gd;
    d.Dk = 0;
    CHECK_INT_EQ(lyr_gdelta_validate(&d), LYR_EINVAL);
    d = f.gd;
    d.cfg.chunk_size = 0;
    CHECK_INT_EQ(lyr_gdelta_validate(&d), LYR_EINVAL);
    CHECK(lyr_gdelta_saved_floats(&d, 1, 5) == 0);
    CHECK_INT_EQ(lyr_gdelta_forward(&f.gd, (const float *const *)f.P, f.x, NULL, f.saved, f.work,
                                    1, 5, 1, 0, NULL), LYR_EINVAL);
    f.x[2] = INFINITY; /* gdelta.h refuses non-finite activations */
    CHECK(lyr_gdelta_forward(&f.gd, (const float *const *)f.P, f.x, f.out, f.saved, f.work, 1, 5,
                             1, 0, NULL) != LYR_OK);
    f.x[2] = 0.1f;
    CHECK_INT_EQ(lyr_gdelta_forward(&f.gd, (const float *const *)f.P, f.x, f.out, f.saved, f.work,
                                    1, 5, 1, 0, NULL), LYR_OK);
    /* backward with other sizes than the forward's is refused */
    CHECK_INT_EQ(lyr_gdelta_backward(&f.gd, (const float *const *)f.P, f.G, f.Rw, f.dx, f.saved,
                                     f.work, 1, 4), LYR_EINVAL);
    CHECK_INT_EQ(lyr_gdelta_backward(&f.gd, (const float *const *)f.P, f.G, f.Rw, f.dx, f.saved,
                                     f.work, 1, 5), LYR_OK);
    fx_free(&f);
}

static void test_gdelta_counts(void)
{
    lyr_gdelta_dims d = lyr_gdelta_dims_make(128, 4, 32);
    lyr_pspec sp[LYR_MAX_PARAMS];
    int n = lyr_gdelta_params(&d, sp, LYR_MAX_PARAMS), i;
    size_t tot = 0, HD = 128, C = 128, s1, s2, w1, w2;
    CHECK_INT_EQ(n, LYR_GD_NPARAMS);
    for (i = 0; i < n; i++) tot += lyr_pspec_numel(&sp[i]);
    CHECK(tot == 3 * HD * C + 2 * 4 * C + 2 * 4 + 32 + HD * C + HD + C * HD);
    /* linear in T: states per chunk, 5 (chunk x chunk) matrices per chunk */
    s1 = lyr_gdelta_saved_floats(&d, 2, 512);
    s2 = lyr_gdelta_saved_floats(&d, 2, 1024);
    w1 = lyr_gdelta_work_floats(&d, 2, 512);
    w2 = lyr_gdelta_work_floats(&d, 2, 1024);
    CHECK(s2 <= 2 * s1 && s2 > s1);
    CHECK(w2 <= 2 * w1);
    /* per token: xn, q, k, v, r, readout gate, u (C + 6 HD), 2 gates + rstd, 5 chunk (32)
       floats per head */
    CHECK(s1 <= (size_t)2 * 512 * (C + 6 * HD + 3 * 4 + 4 * 5 * 32) +
                    (size_t)2 * 4 * 16 * 32 * 32 + 4096);
}

/* issue 43 item 5: the memory on the polar attention's own q, k, v (qkv_shared, seed 002
   §3.3): every gradient of out = polar(x) + mem(x, q, k, v) against finite differences,
   through the GQA repeat, the q/k norm and Canon into the attention's projections */
static fx pgs_fx(int C, int H, int Hkv, int canon, int chan)
{
    fx f;
    memset(&f, 0, sizeof f);
    f.kind = K_PGS;
    f.pol = lyr_polar_dims_make(C, H);
    f.pol.Hkv = Hkv;
    f.pol.canon_k = canon;
    if (chan) {
        f.pol.gate = LYR_POLAR_GATE_CHANNEL;
        f.pol.bias = 1;
    }
    f.gd = lyr_gdelta_dims_make(C, H, C / H);
    f.gd.cfg.chunk_size = 4;
    f.gd.qkv_shared = 1;
    f.gd.kv_heads = Hkv;
    f.train = 1;
    return f;
}

static void test_gdelta_shared_grad(void)
{
    lyr_pspec sp[LYR_MAX_PARAMS];
    { /* no GQA, no Canon */
        fx f = pgs_fx(8, 2, 2, 0, 0);
        fx_setup(&f, 2, 7, 0.3, 70);
        CHECK_INT_EQ(f.np, LYR_POLAR_NPARAMS + LYR_GD_NPARAMS - 1);
        CHECK(!strcmp(f.spec[f.npol].suffix, "w_gamma"));
        fd_check_all(&f, "polar + shared memory");
        check_accumulates(&f);
        check_deterministic(&f);
        fx_free(&f);
    }
    { /* GQA (2 query heads per kv head), Canon K 3, the gate per channel */
        fx f = pgs_fx(16, 4, 2, 3, 1);
        fx_setup(&f, 2, 6, 0.3, 71);
        fd_check_all(&f, "polar + shared memory, gqa, canon 3, channel gate");
        fx_free(&f);
    }
    { /* the list without qkv.weight; the forms refuse the other mode */
        fx f = pgs_fx(8, 2, 1, 0, 0);
        lyr_gdelta_dims own;
        ex_ctx cx = ex_ctx_make(EX_CPU);
        const float *q, *k, *v;
        fx_setup(&f, 1, 5, 0.1, 72);
        CHECK_INT_EQ(lyr_gdelta_param_base(&f.gd), 0);
        CHECK_INT_EQ(lyr_gdelta_params(&f.gd, sp, LYR_MAX_PARAMS), LYR_GD_NPARAMS - 1);
        CHECK(!strcmp(sp[0].suffix, "w_gamma") && !strcmp(sp[LYR_GD_NPARAMS - 2].suffix, "proj.weight"));
        CHECK_INT_EQ(lyr_gdelta_params(&f.gd, sp, LYR_GD_NPARAMS - 2), LYR_EINVAL);
        own = f.gd;
        own.qkv_shared = 0;
        CHECK_INT_EQ(lyr_gdelta_param_base(&own), 1);
        CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
        CHECK_INT_EQ(lyr_polar_qkv(&f.pol, f.saved, f.B, f.T, &q, &k, &v), LYR_OK);
        CHECK_INT_EQ(lyr_polar_qkv(&f.pol, NULL, f.B, f.T, &q, &k, &v), LYR_EINVAL);
        CHECK_INT_EQ(lyr_polar_qkv(&f.pol, f.saved, f.B, f.T, &q, NULL, &v), LYR_EINVAL);
        /* the plain forms need the own projection; the _qkv forms the shared mode */
        CHECK_INT_EQ(lyr_gdelta_fwd(&cx, &f.gd, (const float *const *)f.P + f.npol, f.x, f.tmp,
                                    f.saved + f.nsaved_p, f.work, f.B, f.T, 1, 0, NULL), LYR_EINVAL);
        CHECK_INT_EQ(lyr_gdelta_forward(&f.gd, (const float *const *)f.P + f.npol, f.x, f.tmp,
                                        f.saved + f.nsaved_p, f.work, f.B, f.T, 1, 0, NULL), LYR_EINVAL);
        CHECK_INT_EQ(lyr_gdelta_backward(&f.gd, (const float *const *)f.P + f.npol, f.G + f.npol, f.Rw, f.dx,
                                         f.saved + f.nsaved_p, f.work, f.B, f.T), LYR_EINVAL);
        CHECK_INT_EQ(lyr_gdelta_fwd_qkv(&cx, &f.gd, (const float *const *)f.P + f.npol, f.x, q, NULL, v, f.tmp,
                                        f.saved + f.nsaved_p, f.work, f.B, f.T, 1, 0, NULL), LYR_EINVAL);
        CHECK_INT_EQ(lyr_gdelta_fwd_qkv(&cx, &own, (const float *const *)f.P + f.npol, f.x, q, k, v, f.tmp,
                                        f.saved + f.nsaved_p, f.work, f.B, f.T, 1, 0, NULL), LYR_EINVAL);
        CHECK_INT_EQ(lyr_gdelta_bwd_qkv(&cx, &own, (const float *const *)f.P + f.npol, f.G + f.npol, f.Rw, f.dx,
                                        f.gq, f.gk, f.gv, f.saved + f.nsaved_p, f.work, f.B, f.T), LYR_EINVAL);
        /* kv_heads must divide Hm */
        own = f.gd;
        own.kv_heads = 0;
        CHECK_INT_EQ(lyr_gdelta_validate(&own), LYR_EINVAL);
        own.kv_heads = 3;
        CHECK_INT_EQ(lyr_gdelta_validate(&own), LYR_EINVAL);
        own.kv_heads = 2;
        own.qkv_shared = 2;
        CHECK_INT_EQ(lyr_gdelta_validate(&own), LYR_EINVAL);
        /* with no memory gradients wanted the backward still runs */
        CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
        CHECK_INT_EQ(lyr_gdelta_bwd_qkv(&cx, &f.gd, (const float *const *)f.P + f.npol, f.G + f.npol, f.Rw,
                                        NULL, NULL, NULL, NULL, f.saved + f.nsaved_p, f.work, f.B, f.T), LYR_OK);
        fx_free(&f);
    }
}

/* ------------------------------------------------------------ MLP FFNs */
static fx mlp_fx(int C, int F, int act)
{
    fx f;
    memset(&f, 0, sizeof f);
    f.kind = K_MLP;
    f.mlp.C = C;
    f.mlp.F = F;
    f.mlp.act = act;
    f.mlp.std = 0.02f;
    f.mlp.proj_std = 0.01f;
    return f;
}

static void test_mlp_grad(void)
{
    int act, n = 0;
    for (act = 0; act < lyr_ffn_count(); act++) { /* every MLP row of the FFN table */
        fx f;
        char what[48];
        if (!lyr_ffn_is_mlp(act)) continue;
        n++;
        f = mlp_fx(8, 12, act);
        fx_setup(&f, 2, 5, 0.3, 70 + act);
        snprintf(what, sizeof what, "mlp %s", lyr_ffn_get(act)->name);
        fd_check_all(&f, what);
        check_accumulates(&f);
        check_deterministic(&f);
        fx_free(&f);
    }
    CHECK(n >= 2);
}

/* the FFN table (layers.h, lyr_ffn): names, lookups, the rows' fields, widths */
static void test_ffn_table(void)
{
    int i, n = lyr_ffn_count();
    CHECK(n >= 3);
    CHECK(!strcmp(lyr_ffn_get(LYR_MLP_GELU)->name, "gelu") && !strcmp(lyr_ffn_get(LYR_MLP_RELU2)->name, "relu2"));
    CHECK(lyr_ffn_get(2)->kind == &lyr_kind_moe && !lyr_ffn_is_mlp(2)); /* MDL_FFN_MOE */
    for (i = 0; i < n; i++) {
        const lyr_ffn *e = lyr_ffn_get(i);
        CHECK(e != NULL && lyr_ffn_names[i] != NULL && !strcmp(lyr_ffn_names[i], e->name));
        CHECK_INT_EQ(lyr_ffn_find(e->name), i);
        CHECK(e->width_num >= 1 && e->width_den >= 1 && e->width_round >= 1 && e->about && e->kind);
        if (lyr_ffn_is_mlp(i)) {
            CHECK(e->act_fwd && e->act_bwd && e->mats >= 2);
            CHECK(e->in >= LYR_FFN_IN_PLAIN && e->in <= LYR_FFN_IN_BLOCKS);
            CHECK(!e->bias || e->in == LYR_FFN_IN_PLAIN);
        }
    }
    CHECK(lyr_ffn_names[n] == NULL);
    CHECK(lyr_ffn_get(-1) == NULL && lyr_ffn_get(n) == NULL);
    CHECK_INT_EQ(lyr_ffn_find("nope"), -1);
    CHECK_INT_EQ(lyr_ffn_find(NULL), -1);
    CHECK(!lyr_ffn_is_mlp(-1) && !lyr_ffn_is_mlp(n));
    CHECK_INT_EQ(lyr_ffn_width(LYR_MLP_GELU, 4, 128), 512);
    CHECK_INT_EQ(lyr_ffn_width(LYR_MLP_RELU2, 2, 96), 192);
    CHECK_INT_EQ(lyr_ffn_width(2, 4, 64), 256);
    CHECK_INT_EQ(lyr_ffn_width(n, 4, 64), -1);
    CHECK_INT_EQ(lyr_ffn_width(LYR_MLP_GELU, 0, 64), -1);
    CHECK_INT_EQ(lyr_ffn_width(LYR_MLP_GELU, 4, 0), -1);
    CHECK_INT_EQ(lyr_ffn_width(LYR_MLP_GELU, 64, 1 << 20), -1);
}

/* the SwiGLU row (lyr_ffn "swiglu"): out = (silu(x W1^T) * (x W3^T)) W2^T, fc.weight (2F,C)
   = [W1 ; W3] (rows 0..F-1 W1), proj.weight (C,F), no biases, no gain; the forward and the
   saved activations against a double re-implementation; LLaMA's hidden width
   (2/3 of d_ff_mult C, rounded up to a multiple of 8) and 3 matrices. (Its gradients:
   test_mlp_grad, every MLP row of the table.) */
static void test_mlp_swiglu(void)
{
    const int C = 5, F = 7;
    int r = lyr_ffn_find("swiglu"), i, k, j;
    fx f;
    size_t N, off;
    double worst = 0.0, worst_act = 0.0;
    CHECK(r >= 0 && lyr_ffn_is_mlp(r));
    if (r < 0) return;
    CHECK(lyr_ffn_get(r)->in == LYR_FFN_IN_BLOCKS && !lyr_ffn_get(r)->bias && !lyr_ffn_get(r)->gain);
    CHECK_INT_EQ(lyr_ffn_get(r)->mats, 3);
    CHECK_INT_EQ(lyr_ffn_width(r, 4, 128), 344); /* floor(2/3 512) = 341 -> 344 */
    CHECK_INT_EQ(lyr_ffn_width(r, 4, 96), 256);
    CHECK_INT_EQ(lyr_ffn_width(r, 2, 768), 1024);
    CHECK_INT_EQ(lyr_ffn_width(r, 1, 1), 8);
    f = mlp_fx(C, F, r);
    fx_setup(&f, 2, 4, 0.3, 130);
    N = (size_t)f.B * f.T;
    CHECK_INT_EQ(f.np, 2);
    CHECK(!strcmp(f.spec[0].suffix, "fc.weight") && f.spec[0].shape[0] == 2 * F && f.spec[0].shape[1] == C);
    CHECK(!strcmp(f.spec[1].suffix, "proj.weight") && f.spec[1].shape[0] == C && f.spec[1].shape[1] == F);
    CHECK(f.nsaved == (N * 2 * F + 15) / 16 * 16 + (N * F + 15) / 16 * 16);
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    off = lyr_mlp_act_offset(&f.mlp, f.B, f.T);
    CHECK(off == (N * 2 * F + 15) / 16 * 16);
    for (i = 0; i < (int)N; i++) {
        double act[7];
        for (k = 0; k < F; k++) {
            double a = 0.0, b = 0.0, e;
            for (j = 0; j < C; j++) {
                a += (double)f.P[0][(size_t)k * C + j] * f.x[(size_t)i * C + j];
                b += (double)f.P[0][(size_t)(F + k) * C + j] * f.x[(size_t)i * C + j];
            }
            act[k] = a / (1.0 + exp(-a)) * b;
            e = fabs(act[k] - f.saved[off + (size_t)i * F + k]) / (1e-6 + fabs(act[k]));
            if (e > worst_act) worst_act = e;
        }
        for (k = 0; k < C; k++) {
            double o = 0.0, e;
            for (j = 0; j < F; j++) o += (double)f.P[1][(size_t)k * F + j] * act[j];
            e = fabs(o - f.out[(size_t)i * C + k]) / (1e-6 + fabs(o));
            if (e > worst) worst = e;
        }
    }
    fprintf(stderr, "  swiglu forward against double: worst relative error %.2e (act %.2e)\n", worst, worst_act);
    CHECK(worst < 1e-4 && worst_act < 1e-4);
    f.mlp.gain = 2.0f; /* no gain in the SwiGLU MLP */
    CHECK_INT_EQ(lyr_mlp_validate(&f.mlp), LYR_EINVAL);
    f.mlp.gain = 0.0f;
    CHECK_INT_EQ(lyr_mlp_validate(&f.mlp), LYR_OK);
    fx_free(&f);
}

/* the GELU MLP with an activation gain a (seed 004 section 6 (C)): act = gelu(a u), every
   parameter and the input by finite differences for a = 1.7 and 0.6 (the same tolerance
   as the plain layer); a = 1 and a = 0 run the plain path bit for bit; the refusals */
static void test_mlp_gain(void)
{
    static const float gains[2] = {1.7f, 0.6f};
    int k, bad = 0;
    size_t i, n;
    float *o1;
    for (k = 0; k < 2; k++) {
        fx f = mlp_fx(8, 12, LYR_MLP_GELU);
        char what[32];
        f.mlp.gain = gains[k];
        fx_setup(&f, 2, 5, 0.3, 80 + k);
        snprintf(what, sizeof what, "mlp gelu gain %.1f", (double)gains[k]);
        fd_check_all(&f, what);
        check_accumulates(&f);
        fx_free(&f);
    }
    {
        fx f = mlp_fx(8, 12, LYR_MLP_GELU);
        fx_setup(&f, 2, 5, 0.3, 82);
        n = (size_t)f.B * f.T * (size_t)f.C;
        o1 = (float *)xcalloc(n, sizeof(float));
        f.mlp.gain = 0.0f;
        CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
        memcpy(o1, f.out, n * sizeof(float));
        f.mlp.gain = 1.0f;
        CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
        for (i = 0; i < n; i++) bad += memcmp(&o1[i], &f.out[i], sizeof(float)) != 0;
        CHECK_INT_EQ(bad, 0);
        f.mlp.gain = 2.0f; /* a real gain changes the output */
        CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
        for (i = 0, bad = 0; i < n; i++) bad += o1[i] != f.out[i];
        CHECK(bad > 0);
        /* where act(h) sits in saved: after the aligned pre-activations */
        CHECK(lyr_mlp_act_offset(&f.mlp, f.B, f.T) == ((size_t)f.B * f.T * 12 + 15) / 16 * 16);
        f.mlp.gain = -1.0f;
        CHECK_INT_EQ(lyr_mlp_validate(&f.mlp), LYR_EINVAL);
        CHECK(lyr_mlp_act_offset(&f.mlp, f.B, f.T) == 0);
        f.mlp.gain = NAN;
        CHECK_INT_EQ(lyr_mlp_validate(&f.mlp), LYR_EINVAL);
        f.mlp.gain = INFINITY;
        CHECK_INT_EQ(lyr_mlp_validate(&f.mlp), LYR_EINVAL);
        f.mlp.act = LYR_MLP_RELU2; /* no gain in the squared-ReLU MLP */
        f.mlp.gain = 2.0f;
        CHECK_INT_EQ(lyr_mlp_validate(&f.mlp), LYR_EINVAL);
        f.mlp.gain = 1.0f;
        CHECK_INT_EQ(lyr_mlp_validate(&f.mlp), LYR_OK);
        f.mlp.act = LYR_MLP_GELU;
        free(o1);
        fx_free(&f);
    }
}

/* the generic table (lyr_kind_mlp, what the model calls) is the typed functions; the
   tensors and the counts documented in layers.h; refused arguments */
static void test_mlp_kind_counts_args(void)
{
    fx f = mlp_fx(8, 12, LYR_MLP_GELU);
    lyr_pspec sp[LYR_MAX_PARAMS];
    ex_ctx cx = ex_ctx_make(EX_CPU);
    lyr_io io;
    size_t n, N, i;
    float *o2;
    int bad = 0;
    fx_setup(&f, 2, 5, 0.3, 75);
    N = (size_t)f.B * f.T;
    CHECK_INT_EQ(f.np, 4);
    CHECK(!strcmp(f.spec[0].suffix, "fc.weight") && f.spec[0].shape[0] == 12 && f.spec[0].shape[1] == 8);
    CHECK(!strcmp(f.spec[3].suffix, "proj.bias") && f.spec[3].init == LYR_INIT_ZERO);
    CHECK(f.spec[2].init == LYR_INIT_NORMAL && f.spec[2].init_arg == 0.01f);
    CHECK_INT_EQ((int)f.nsaved, (int)(2 * ((N * 12 + 15) / 16 * 16)));
    f.mlp.act = LYR_MLP_RELU2;
    CHECK_INT_EQ(lyr_mlp_params(&f.mlp, sp, LYR_MAX_PARAMS), 2);
    CHECK(sp[0].shape[0] == 24 && !strcmp(sp[1].suffix, "proj.weight"));
    CHECK(lyr_kind_mlp.saved_floats(&f.mlp, f.B, f.T) == lyr_mlp_saved_floats(&f.mlp, f.B, f.T));
    f.mlp.act = LYR_MLP_GELU;
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    n = N * (size_t)f.C;
    o2 = (float *)xcalloc(n, sizeof(float));
    memset(&io, 0, sizeof io);
    io.P = (const float *const *)f.P;
    io.x = f.x;
    io.out = o2;
    io.saved = f.saved;
    io.work = f.work;
    io.B = f.B;
    io.T = f.T;
    CHECK_INT_EQ(lyr_kind_mlp.forward(&cx, &f.mlp, &io), LYR_OK);
    for (i = 0; i < n; i++) bad += o2[i] != f.out[i];
    CHECK_INT_EQ(bad, 0);
    CHECK_INT_EQ(lyr_mlp_fwd(NULL, &f.mlp, (const float *const *)f.P, f.x, f.out, f.saved, f.B, f.T),
                 LYR_EINVAL);
    CHECK_INT_EQ(lyr_mlp_fwd(&cx, &f.mlp, (const float *const *)f.P, NULL, f.out, f.saved, f.B, f.T),
                 LYR_EINVAL);
    CHECK_INT_EQ(lyr_mlp_bwd(&cx, &f.mlp, (const float *const *)f.P, f.G, f.x, f.Rw, f.dx, f.saved, NULL,
                             f.B, f.T), LYR_EINVAL);
    f.mlp.act = 7;
    CHECK_INT_EQ(lyr_mlp_params(&f.mlp, sp, LYR_MAX_PARAMS), LYR_EINVAL);
    f.mlp.act = 2; /* the MoE's row: not an MLP activation */
    CHECK_INT_EQ(lyr_mlp_params(&f.mlp, sp, LYR_MAX_PARAMS), LYR_EINVAL);
    f.mlp.act = -1;
    CHECK_INT_EQ(lyr_mlp_validate(&f.mlp), LYR_EINVAL);
    f.mlp.act = LYR_MLP_GELU;
    CHECK_INT_EQ(lyr_mlp_params(&f.mlp, sp, 3), LYR_EINVAL);
    free(o2);
    fx_free(&f);
}

/* ------------------------------------------------------------ LFM2 gated short convolution */
static fx lfm_fx(int C, int K, int bias)
{
    fx f;
    memset(&f, 0, sizeof f);
    f.kind = K_LFM;
    f.lfm.C = C;
    f.lfm.K = K;
    f.lfm.bias = bias;
    f.lfm.std = 0.3f;
    f.lfm.proj_std = 0.3f;
    return f;
}

/* every parameter and the input by finite differences (the same tolerance as the other
   components): with biases (ATMA) at K 3, without (LFM2) at K 4 > some positions, and
   K 1 (the conv a per-channel scale); the += contract and determinism */
static void test_lfm_grad(void)
{
    static const int Ks[3] = {3, 4, 1}, bs[3] = {1, 0, 1};
    int k;
    for (k = 0; k < 3; k++) {
        fx f = lfm_fx(6, Ks[k], bs[k]);
        char what[48];
        fx_setup(&f, 2, 5, 0.3, 110 + k);
        snprintf(what, sizeof what, "lfm K %d bias %d", Ks[k], bs[k]);
        fd_check_all(&f, what);
        check_accumulates(&f);
        check_deterministic(&f);
        fx_free(&f);
    }
}

/* the forward against a double-precision transcription of the definition (layers.h 7) */
static void test_lfm_reference(void)
{
    fx f = lfm_fx(5, 3, 1);
    const int C = 5, K = 3;
    size_t N, n, i;
    double *st, *y, worst = 0;
    int b, t, c, j, s;
    fx_setup(&f, 2, 6, 0.3, 120);
    N = (size_t)f.B * f.T;
    n = N * C;
    st = (double *)xcalloc(3 * n, sizeof(double));
    y = (double *)xcalloc(n, sizeof(double));
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    for (i = 0; i < N; i++) /* streams: s = 0 B, 1 C', 2 x */
        for (s = 0; s < 3; s++)
            for (c = 0; c < C; c++) {
                double a = f.P[1][s * C + c];
                for (j = 0; j < C; j++) a += (double)f.P[0][(size_t)(s * C + c) * C + j] * f.x[i * C + j];
                st[(size_t)s * n + i * C + c] = a;
            }
    for (i = 0; i < n; i++) y[i] = st[i] * st[2 * n + i];
    for (b = 0; b < f.B; b++)
        for (t = 0; t < f.T; t++) {
            double o[5];
            for (c = 0; c < C; c++) {
                double z = 0;
                for (j = 0; j < K && j <= t; j++) z += (double)f.P[2][j * C + c] * y[((size_t)b * f.T + t - j) * C + c];
                o[c] = st[n + ((size_t)b * f.T + t) * C + c] * z;
            }
            for (c = 0; c < C; c++) {
                double a = f.P[4][c], e;
                for (j = 0; j < C; j++) a += (double)f.P[3][c * C + j] * o[j];
                e = fabs(a - f.out[((size_t)b * f.T + t) * C + c]) / (1e-6 + fabs(a));
                if (e > worst) worst = e;
            }
        }
    fprintf(stderr, "  lfm forward against double: worst relative error %.2e\n", worst);
    CHECK(worst < 1e-4);
    free(st);
    free(y);
    fx_free(&f);
}

/* the tensors, shapes, inits and counts documented in layers.h; the generic table is the
   typed functions; refused arguments */
static void test_lfm_kind_counts_args(void)
{
    fx f = lfm_fx(8, 3, 1);
    lyr_pspec sp[LYR_MAX_PARAMS];
    ex_ctx cx = ex_ctx_make(EX_CPU);
    lyr_io io;
    size_t n, N, i;
    float *o2, *d2;
    int bad = 0;
    fx_setup(&f, 2, 5, 0.3, 130);
    N = (size_t)f.B * f.T;
    n = N * (size_t)f.C;
    CHECK_INT_EQ(f.np, 5);
    CHECK(!strcmp(f.spec[0].suffix, "in_proj.weight") && f.spec[0].shape[0] == 24 && f.spec[0].shape[1] == 8 &&
          f.spec[0].decay == 1 && f.spec[0].init == LYR_INIT_NORMAL);
    CHECK(!strcmp(f.spec[1].suffix, "in_proj.bias") && f.spec[1].shape[0] == 24 && f.spec[1].init == LYR_INIT_ZERO &&
          f.spec[1].decay == 0);
    CHECK(!strcmp(f.spec[2].suffix, "conv.weight") && f.spec[2].shape[0] == 3 && f.spec[2].shape[1] == 8 &&
          f.spec[2].init == LYR_INIT_UNIFORM && fabs(f.spec[2].init_arg - 1.0 / sqrt(3.0)) < 1e-7 &&
          f.spec[2].decay == 0);
    CHECK(!strcmp(f.spec[3].suffix, "out_proj.weight") && f.spec[3].shape[0] == 8 && f.spec[3].shape[1] == 8 &&
          f.spec[3].init_arg == 0.3f);
    CHECK(!strcmp(f.spec[4].suffix, "out_proj.bias") && f.spec[4].shape[0] == 8);
    CHECK(f.nsaved == 4 * ((n + 15) / 16 * 16) && f.nwork == f.nsaved);
    CHECK(lyr_kind_lfm.saved_floats(&f.lfm, f.B, f.T) == f.nsaved);
    CHECK(lyr_kind_lfm.work_floats(&f.lfm, f.B, f.T) == f.nwork);
    CHECK(!strcmp(lyr_kind_lfm.name, "lfm"));
    f.lfm.bias = 0;
    CHECK_INT_EQ(lyr_lfm_params(&f.lfm, sp, LYR_MAX_PARAMS), 3);
    CHECK(!strcmp(sp[1].suffix, "conv.weight") && !strcmp(sp[2].suffix, "out_proj.weight"));
    f.lfm.bias = 1;
    /* lyr_lfm_init: the conv weights inside (-1/sqrt(K), 1/sqrt(K)), biases 0 */
    {
        tk_rng rng;
        tk_rng_seed(&rng, 3, 3);
        CHECK_INT_EQ(lyr_lfm_init(&f.lfm, f.P, &rng, 0.02f), LYR_OK);
        for (i = 0; i < 24; i++) bad += f.P[1][i] != 0.0f;
        for (i = 0; i < 24; i++) bad += !(fabs(f.P[2][i]) <= 1.0 / sqrt(3.0));
        CHECK_INT_EQ(bad, 0);
    }
    CHECK_INT_EQ(fx_forward(&f, NULL), LYR_OK);
    fx_zero_grads(&f);
    CHECK_INT_EQ(fx_backward(&f), LYR_OK);
    o2 = (float *)xcalloc(n, sizeof(float));
    d2 = (float *)xcalloc(n, sizeof(float));
    memset(&io, 0, sizeof io);
    io.P = (const float *const *)f.P;
    io.x = f.x;
    io.out = o2;
    io.saved = f.saved;
    io.work = f.work;
    io.B = f.B;
    io.T = f.T;
    CHECK_INT_EQ(lyr_kind_lfm.forward(&cx, &f.lfm, &io), LYR_OK);
    for (i = 0; i < n; i++) bad += memcmp(&o2[i], &f.out[i], sizeof(float)) != 0;
    CHECK_INT_EQ(bad, 0);
    memcpy(d2, f.dx, n * sizeof(float));
    fx_zero_grads(&f);
    io.G = f.G;
    io.dout = f.Rw;
    io.dx = f.dx;
    CHECK_INT_EQ(lyr_kind_lfm.backward(&cx, &f.lfm, &io), LYR_OK);
    for (i = 0; i < n; i++) bad += memcmp(&d2[i], &f.dx[i], sizeof(float)) != 0;
    CHECK_INT_EQ(bad, 0);
    /* dxn NULL: the parameter gradients only */
    io.dx = NULL;
    CHECK_INT_EQ(lyr_kind_lfm.backward(&cx, &f.lfm, &io), LYR_OK);
    /* refusals */
    CHECK_INT_EQ(lyr_lfm_fwd(NULL, &f.lfm, (const float *const *)f.P, f.x, f.out, f.saved, f.work, f.B, f.T),
                 LYR_EINVAL);
    CHECK_INT_EQ(lyr_lfm_fwd(&cx, &f.lfm, (const float *const *)f.P, NULL, f.out, f.saved, f.work, f.B, f.T),
                 LYR_EINVAL);
    CHECK_INT_EQ(lyr_lfm_fwd(&cx, &f.lfm, (const float *const *)f.P, f.x, f.out, f.saved, NULL, f.B, f.T),
                 LYR_EINVAL);
    CHECK_INT_EQ(lyr_lfm_fwd(&cx, &f.lfm, (const float *const *)f.P, f.x, f.out, f.saved, f.work, 0, f.T),
                 LYR_EINVAL);
    CHECK_INT_EQ(lyr_lfm_bwd(&cx, &f.lfm, (const float *const *)f.P, f.G, f.x, f.Rw, f.dx, f.saved, NULL, f.B, f.T),
                 LYR_EINVAL);
    CHECK_INT_EQ(lyr_lfm_bwd(&cx, &f.lfm, (const float *const *)f.P, NULL, f.x, f.Rw, f.dx, f.saved, f.work, f.B,
                             f.T), LYR_EINVAL);
    CHECK_INT_EQ(lyr_lfm_params(&f.lfm, sp, 4), LYR_EINVAL);
    f.lfm.K = 0;
    CHECK_INT_EQ(lyr_lfm_validate(&f.lfm), LYR_EINVAL);
    CHECK(lyr_lfm_saved_floats(&f.lfm, f.B, f.T) == 0);
    f.lfm.K = 65;
    CHECK_INT_EQ(lyr_lfm_validate(&f.lfm), LYR_EINVAL);
    f.lfm.K = 3;
    f.lfm.bias = 2;
    CHECK_INT_EQ(lyr_lfm_validate(&f.lfm), LYR_EINVAL);
    f.lfm.bias = 1;
    f.lfm.std = NAN;
    CHECK_INT_EQ(lyr_lfm_validate(&f.lfm), LYR_EINVAL);
    f.lfm.std = 0.3f;
    CHECK_INT_EQ(lyr_lfm_validate(&f.lfm), LYR_OK);
    CHECK_INT_EQ(lyr_lfm_validate(NULL), LYR_EINVAL);
    free(o2);
    free(d2);
    fx_free(&f);
}

/* ------------------------------------------------------------ the membership gates */
/* layers.h section 8: the residual gate and the value gate as kinds. Objective
   L = sum r . out (out: eta (N) or g * x (N,C)); every parameter, membership and (value
   gate) input entry by central differences in double through the float forward, against
   the backward's G, dmu and dx; the forward against a double transcription of the
   definition; dmu and G accumulate, dx is written (and may be dout itself); refusals. */
static double gate_loss(const lyr_kind *k, const lyr_gate_dims *d, const float *W, const float *mu, const float *x,
                        const float *r, int B, int T, float *saved, float *work, float *out)
{
    ex_ctx cx = ex_ctx_make(EX_CPU);
    const float *P[1];
    lyr_io io;
    const size_t N = (size_t)B * T, n = k == &lyr_kind_vgate ? N * d->C : N;
    const float *o = k == &lyr_kind_vgate ? out : saved;
    double L = 0;
    size_t i;
    P[0] = W;
    memset(&io, 0, sizeof io);
    io.P = P;
    io.mu = mu;
    io.x = x;
    io.out = out;
    io.saved = saved;
    io.work = work;
    io.B = B;
    io.T = T;
    CHECK_INT_EQ(k->forward(&cx, d, &io), LYR_OK);
    for (i = 0; i < n; i++) L += (double)r[i] * o[i];
    return L;
}

static void gate_case(const lyr_kind *k, const char *what)
{
    const int B = 2, T = 5, C = 6, H = 3, R = 4, vg = k == &lyr_kind_vgate;
    const size_t N = (size_t)B * T;
    lyr_gate_dims d;
    lyr_pspec sp[2];
    ex_ctx cx = ex_ctx_make(EX_CPU);
    float *W, *G, *mu, *dmu, *x, *dx, *r, *saved, *work, *out;
    const float *P[1];
    float *Gp[1];
    size_t nw, i, nsv, nwk;
    lyr_io io;
    double worst = 0;
    int bad = 0;
    d.C = C;
    d.H = H;
    d.R = R;
    CHECK_INT_EQ(k->params(&d, sp, 2), 1);
    nw = lyr_pspec_numel(&sp[0]);
    CHECK(nw == (size_t)(vg ? H : 1) * R);
    CHECK(sp[0].init == LYR_INIT_UNIFORM && sp[0].init_arg == 1.0f / sqrtf((float)R) && sp[0].decay == 0);
    CHECK(!strcmp(sp[0].suffix, vg ? "value_gamma.weight" : "weight"));
    nsv = k->saved_floats(&d, B, T);
    nwk = k->work_floats(&d, B, T);
    CHECK(nsv == (vg ? N * (H + 1) : N));
    CHECK(nwk == (vg ? N * (H + 1) : N));
    W = (float *)xcalloc(nw, sizeof(float));
    G = (float *)xcalloc(nw, sizeof(float));
    mu = (float *)xcalloc(N * R, sizeof(float));
    dmu = (float *)xcalloc(N * R, sizeof(float));
    x = (float *)xcalloc(N * C, sizeof(float));
    dx = (float *)xcalloc(N * C, sizeof(float));
    r = (float *)xcalloc(N * C, sizeof(float));
    saved = (float *)xcalloc(nsv, sizeof(float));
    work = (float *)xcalloc(nwk, sizeof(float));
    out = (float *)xcalloc(N * C, sizeof(float));
    tt_seed(vg ? 811 : 812);
    for (i = 0; i < nw; i++) W[i] = (float)(2.0 * tt_uniform() - 1.0);
    for (i = 0; i < N * R; i++) mu[i] = (float)tt_uniform();
    for (i = 0; i < N * C; i++) x[i] = (float)(2.0 * tt_uniform() - 1.0), r[i] = (float)(2.0 * tt_uniform() - 1.0);
    (void)gate_loss(k, &d, W, mu, x, r, B, T, saved, work, out);
    { /* the forward against the definition, in double */
        size_t n;
        int b, t, h, s2, j, c;
        for (b = 0; b < B; b++)
            for (t = 0; t < T; t++) {
                n = (size_t)b * T + t;
                if (!vg) {
                    double z = 0;
                    for (j = 0; j < R; j++) z += (double)mu[n * R + j] * W[j];
                    worst = fmax(worst, fabs(saved[n] - 1.0 / (1.0 + exp(-z))));
                } else {
                    double g = 0;
                    for (h = 0; h < H; h++) {
                        double m = 0;
                        for (s2 = 0; s2 <= t; s2++) {
                            double z = 0;
                            for (j = 0; j < R; j++) z += (double)mu[((size_t)b * T + s2) * R + j] * W[h * R + j];
                            m += z;
                        }
                        g += 1.0 / (1.0 + exp(-m / (t + 1)));
                    }
                    g /= H;
                    for (c = 0; c < C; c++) worst = fmax(worst, fabs(out[n * C + c] - g * x[n * C + c]));
                }
            }
        CHECK(worst < 1e-5);
    }
    P[0] = W;
    Gp[0] = G;
    memset(&io, 0, sizeof io);
    io.P = P;
    io.G = Gp;
    io.mu = mu;
    io.x = x;
    io.dout = r;
    io.dx = dx;
    io.dmu = dmu;
    io.saved = saved;
    io.work = work;
    io.B = B;
    io.T = T;
    CHECK_INT_EQ(k->backward(&cx, &d, &io), LYR_OK);
    { /* finite differences: W, mu, x */
        float *vars[3];
        const float *grads[3];
        size_t nv[3];
        int v;
        vars[0] = W, grads[0] = G, nv[0] = nw;
        vars[1] = mu, grads[1] = dmu, nv[1] = N * R;
        vars[2] = x, grads[2] = dx, nv[2] = vg ? N * C : 0;
        for (v = 0; v < 3; v++)
            for (i = 0; i < nv[v]; i++) {
                const float keep = vars[v][i];
                double lp, lm, fd;
                vars[v][i] = keep + FD_EPS;
                lp = gate_loss(k, &d, W, mu, x, r, B, T, saved, work, out);
                vars[v][i] = keep - FD_EPS;
                lm = gate_loss(k, &d, W, mu, x, r, B, T, saved, work, out);
                vars[v][i] = keep;
                fd = (lp - lm) / (2.0 * FD_EPS);
                if (fabs(fd - grads[v][i]) > FD_ATOL + FD_RTOL * fabs(fd)) {
                    if (bad < 5) fprintf(stderr, "%s: var %d entry %zu fd %g analytic %g\n", what, v, i, fd, grads[v][i]);
                    bad++;
                }
            }
        CHECK_INT_EQ(bad, 0);
    }
    (void)gate_loss(k, &d, W, mu, x, r, B, T, saved, work, out); /* saved as the backward wants it */
    { /* a second backward: G and dmu double, dx is written (the same), in place too */
        float *G1 = (float *)xcalloc(nw, sizeof(float)), *m1 = (float *)xcalloc(N * R, sizeof(float)),
              *x1 = (float *)xcalloc(N * C, sizeof(float));
        memcpy(G1, G, sizeof(float) * nw);
        memcpy(m1, dmu, sizeof(float) * N * R);
        memcpy(x1, dx, sizeof(float) * N * C);
        CHECK_INT_EQ(k->backward(&cx, &d, &io), LYR_OK);
        bad = 0;
        for (i = 0; i < nw; i++) bad += G[i] != 2.0f * G1[i];
        for (i = 0; i < N * R; i++) bad += dmu[i] != 2.0f * m1[i];
        if (vg) {
            for (i = 0; i < N * C; i++) bad += dx[i] != x1[i];
            memcpy(dx, r, sizeof(float) * N * C); /* dx == dout: scaled in place */
            io.dout = dx;
            CHECK_INT_EQ(k->backward(&cx, &d, &io), LYR_OK);
            for (i = 0; i < N * C; i++) bad += dx[i] != x1[i];
        }
        CHECK_INT_EQ(bad, 0);
        free(G1);
        free(m1);
        free(x1);
    }
    /* refusals */
    io.mu = NULL;
    CHECK_INT_EQ(k->backward(&cx, &d, &io), LYR_EINVAL);
    CHECK_INT_EQ(k->forward(&cx, &d, &io), LYR_EINVAL);
    io.mu = mu;
    CHECK_INT_EQ(k->forward(NULL, &d, &io), LYR_EINVAL);
    d.R = 0;
    CHECK_INT_EQ(k->params(&d, sp, 2), LYR_EINVAL);
    CHECK_INT_EQ(k->forward(&cx, &d, &io), LYR_EINVAL);
    d.R = R;
    CHECK_INT_EQ(k->params(&d, sp, 0), LYR_EINVAL);
    if (vg) {
        d.H = 0;
        CHECK_INT_EQ(k->params(&d, sp, 2), LYR_EINVAL);
        d.H = H;
        io.x = NULL;
        CHECK_INT_EQ(k->forward(&cx, &d, &io), LYR_EINVAL);
    }
    printf("  %s: forward against the definition %.2g, every entry by finite differences\n", what, worst);
    free(W), free(G), free(mu), free(dmu), free(x), free(dx), free(r), free(saved), free(work), free(out);
}

static void test_gates(void)
{
    gate_case(&lyr_kind_resgate, "residual gate");
    gate_case(&lyr_kind_vgate, "value gate");
    CHECK(!strcmp(lyr_kind_resgate.name, "res_gate") && !strcmp(lyr_kind_vgate.name, "attn"));
}

/* layers.h section 9: the memberships as a kind are era.h's era_membership_* on the kind's
   tensors, bit for bit (forward: mu, zproj and the statistics' sums; backward: G, dx +=);
   the tensors as the model names them; the config's R must match; refusals */
static void test_memb_kind(void)
{
    const int B = 2, T = 5, C = 6, R = 3;
    const size_t N = (size_t)B * T;
    era_rpa_config cfg = era_rpa_config_default(R);
    lyr_memb_dims d;
    lyr_pspec sp[LYR_MAX_PARAMS];
    ex_ctx cx = ex_ctx_make(EX_CPU);
    float *P[4], *G[4], *G2[4], *x, *saved, *work, *mu, *zp, *dmu, *dx, *dx2;
    double sums[3] = {0, 0, 0}, sums2[3] = {0, 0, 0};
    era_rpa_params p = era_rpa_params_default();
    era_rpa_grads g;
    lyr_io io;
    size_t i, k, n[4], nsv, nwk;
    int bad = 0;
    cfg.detach = 0;
    d.C = C;
    d.R = R;
    d.cfg = &cfg;
    CHECK_INT_EQ(lyr_kind_memb.params(&d, sp, LYR_MAX_PARAMS), 4);
    CHECK(!strcmp(sp[0].suffix, "proj.weight") && sp[0].decay == 1 && sp[0].init == LYR_INIT_UNIFORM);
    CHECK(!strcmp(sp[2].suffix, "centers") && sp[2].shape[0] == R && sp[2].init == LYR_INIT_NORMAL);
    CHECK(!strcmp(sp[3].suffix, "log_sigma") && sp[3].init == LYR_INIT_ZERO && sp[3].decay == 0);
    CHECK(!strcmp(lyr_kind_memb.name, "mem"));
    nsv = lyr_kind_memb.saved_floats(&d, B, T);
    nwk = lyr_kind_memb.work_floats(&d, B, T);
    CHECK(nsv >= N * (C + R));
    tt_seed(901);
    for (k = 0; k < 4; k++) {
        n[k] = lyr_pspec_numel(&sp[k]);
        P[k] = (float *)xcalloc(n[k], sizeof(float));
        G[k] = (float *)xcalloc(n[k], sizeof(float));
        G2[k] = (float *)xcalloc(n[k], sizeof(float));
        for (i = 0; i < n[k]; i++) P[k][i] = (float)(k == 3 ? 0.2 * tt_uniform() - 0.1 : 2.0 * tt_uniform() - 1.0);
    }
    x = (float *)xcalloc(N * C, sizeof(float));
    dx = (float *)xcalloc(N * C, sizeof(float));
    dx2 = (float *)xcalloc(N * C, sizeof(float));
    dmu = (float *)xcalloc(N * R, sizeof(float));
    mu = (float *)xcalloc(N * R, sizeof(float));
    zp = (float *)xcalloc(N * C, sizeof(float));
    saved = (float *)xcalloc(nsv, sizeof(float));
    work = (float *)xcalloc(nwk + 1, sizeof(float));
    for (i = 0; i < N * C; i++) x[i] = (float)(2.0 * tt_uniform() - 1.0), dx[i] = dx2[i] = 0.5f;
    for (i = 0; i < N * R; i++) dmu[i] = (float)(2.0 * tt_uniform() - 1.0);
    /* era.h directly */
    p.D = p.P = C;
    p.W = P[0], p.b = P[1], p.centers = P[2], p.log_sigma = P[3];
    CHECK_INT_EQ(era_membership_forward_sums(&cfg, &p, mu, zp, sums2, x, B, T), ERA_OK);
    memset(&g, 0, sizeof g);
    g.dW = G2[0], g.db = G2[1], g.dcenters = G2[2], g.dlog_sigma = G2[3];
    CHECK_INT_EQ(era_membership_backward(&cfg, &p, dx2, &g, dmu, 0.3f, x, zp, mu, B, T, NULL), ERA_OK);
    /* the kind */
    memset(&io, 0, sizeof io);
    io.P = (const float *const *)P;
    io.G = G;
    io.x = x;
    io.saved = saved;
    io.work = work;
    io.sums = sums;
    io.B = B;
    io.T = T;
    CHECK_INT_EQ(lyr_kind_memb.forward(&cx, &d, &io), LYR_OK);
    bad += memcmp(saved, mu, sizeof(float) * N * R) != 0;
    bad += memcmp(saved + ((N * R + 15) & ~(size_t)15), zp, sizeof(float) * N * C) != 0;
    bad += memcmp(sums, sums2, sizeof sums) != 0;
    io.dout = dmu;
    io.dx = dx;
    io.coef = 0.3f;
    CHECK_INT_EQ(lyr_kind_memb.backward(&cx, &d, &io), LYR_OK);
    bad += memcmp(dx, dx2, sizeof(float) * N * C) != 0;
    for (k = 0; k < 4; k++) bad += memcmp(G[k], G2[k], sizeof(float) * n[k]) != 0;
    CHECK_INT_EQ(bad, 0);
    CHECK(dx[0] != 0.5f);
    /* refusals: the config's R, no config, no x, no dout */
    d.R = R + 1;
    CHECK_INT_EQ(lyr_kind_memb.forward(&cx, &d, &io), LYR_EINVAL);
    d.R = R;
    d.cfg = NULL;
    CHECK_INT_EQ(lyr_kind_memb.forward(&cx, &d, &io), LYR_EINVAL);
    CHECK_INT_EQ(lyr_kind_memb.params(&d, sp, LYR_MAX_PARAMS), 4); /* (sizes only) */
    d.cfg = &cfg;
    io.x = NULL;
    CHECK_INT_EQ(lyr_kind_memb.forward(&cx, &d, &io), LYR_EINVAL);
    io.x = x;
    io.dout = NULL;
    CHECK_INT_EQ(lyr_kind_memb.backward(&cx, &d, &io), LYR_EINVAL);
    CHECK_INT_EQ(lyr_kind_memb.params(&d, sp, 3), LYR_EINVAL);
    for (k = 0; k < 4; k++) free(P[k]), free(G[k]), free(G2[k]);
    free(x), free(dx), free(dx2), free(dmu), free(mu), free(zp), free(saved), free(work);
}

/* one token per sequence: every layer runs forward and backward at T = 1 */
static void test_t1(void)
{
    fx f[4];
    int i;
    f[0] = moe_fx(8, 8, 3, 2, 2, 1, 1, 0.1f);
    f[1] = polar_fx(8, 2, 1, 1, 0, 1);
    f[2] = gd_fx(8, 2, 4, GD_ALGO_CHUNKED, 32, 0);
    f[3] = lfm_fx(8, 3, 1);
    for (i = 0; i < 4; i++) {
        size_t j, n;
        int bad = 0;
        fx_setup(&f[i], 3, 1, 0.3, 90 + i);
        CHECK_INT_EQ(fx_forward(&f[i], NULL), LYR_OK);
        CHECK_INT_EQ(fx_backward(&f[i]), LYR_OK);
        n = (size_t)f[i].B * f[i].C;
        for (j = 0; j < n; j++) bad += !(f[i].out[j] == f[i].out[j]) || !(f[i].dx[j] == f[i].dx[j]);
        CHECK_INT_EQ(bad, 0);
        fx_free(&f[i]);
    }
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_moe_grad_topk);
    TEST_RUN(test_moe_grad_listing_lb);
    TEST_RUN(test_moe_grad_top1_eval);
    TEST_RUN(test_moe_grad_clamped);
    TEST_RUN(test_moe_grad_lb_only);
    TEST_RUN(test_moe_accumulates_deterministic);
    TEST_RUN(test_moe_dense_equivalence);
    TEST_RUN(test_moe_idle_experts);
    TEST_RUN(test_moe_noise);
    TEST_RUN(test_moe_bad_args);
    TEST_RUN(test_moe_counts);
    TEST_RUN(test_moe_host_buffer);
    TEST_RUN(test_polar_grad);
    TEST_RUN(test_polar_grad_gqa_noqknorm);
    TEST_RUN(test_polar_grad_window);
    TEST_RUN(test_polar_grad_distractor);
    TEST_RUN(test_polar_accumulates_deterministic_stats);
    TEST_RUN(test_polar_channel_gate);
    TEST_RUN(test_polar_canon);
    TEST_RUN(test_polar_bad_args);
    TEST_RUN(test_polar_counts);
    TEST_RUN(test_gdelta_grad_chunked);
    TEST_RUN(test_gdelta_grad_recurrent_log);
    TEST_RUN(test_gdelta_accumulates_deterministic);
    TEST_RUN(test_gdelta_host_header);
    TEST_RUN(test_gdelta_init_noop);
    TEST_RUN(test_gdelta_bad_args);
    TEST_RUN(test_gdelta_counts);
    TEST_RUN(test_gdelta_shared_grad);
    TEST_RUN(test_mlp_grad);
    TEST_RUN(test_ffn_table);
    TEST_RUN(test_mlp_swiglu);
    TEST_RUN(test_mlp_gain);
    TEST_RUN(test_mlp_kind_counts_args);
    TEST_RUN(test_lfm_grad);
    TEST_RUN(test_lfm_reference);
    TEST_RUN(test_lfm_kind_counts_args);
    TEST_RUN(test_gates);
    TEST_RUN(test_memb_kind);
    TEST_RUN(test_t1);
    return TEST_END();
}
