/* tools/era_diag.c - what a trained ERA prior looks like (issue 45, docs/RESULTS.md "Seed
   003's experiment"): reads a wt2_train checkpoint with the ERA prior and prints, per
   layer, the learned regime centres (range, spread), sigma and alpha, and for T in
   {64, 128, 256, 768} the prior B(T) that era.h builds from them: the Sinkhorn marginal
   error after the configured iterations, the row std of log(Q + delta) before the z-score
   (0: the prior is flat), and its shape after it: the mean bias of the keys within one
   block of the query (|i - j| < T / nb) minus the row mean (> 0: the prior favours nearby
   keys), and the correlation of the bias with -|i - j| / T over the causal half (1: purely
   "the nearer the better").
   Build: gcc -std=c99 -O1 -I. -isystem /usr/include/stb tools/era_diag.c -o build/era_diag -lm -llzma
   Run:   build/era_diag build/era_exp/era-gac.s1/ckpt.safetensors [R nb eps iters]
          (defaults: seed 003's R = nb = 32, eps 0.05, 5 iterations; delta 1e-5, whole-row
          z-score, as the era-gac-tiny preset) */
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "examples/common/impl.c"
#include "examples/common/ckpt.c"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const float *scalar_or_vec(ckpt_file *f, const char *name, int64_t want, char *why, size_t n)
{
    ckpt_entry e;
    if (ckpt_find(f, name, &e)) { snprintf(why, n, "no %s", name); return NULL; }
    if (e.dtype != CKPT_F32 || e.ndim != 1 || e.shape[0] != want) {
        snprintf(why, n, "%s is not %lld float32 values", name, (long long)want);
        return NULL;
    }
    return (const float *)e.data;
}

/* B(T) for T in 64, 128, 256, 768: one line each */
static int diag(const era_era_config *cfg, const era_era_params *pp)
{
    static const int Ts[4] = {64, 128, 256, 768};
    era_era_config c = *cfg;
    era_era_params p = *pp;
    int i;
        for (i = 0; i < 4; i++) {
            int T = Ts[i], a, b, w = T / c.nb > 1 ? T / c.nb : 1;
            float *bias = (float *)malloc(sizeof(float) * (size_t)T * T);
            era_era_state st = era_era_state_init();
            double near = 0.0, sxy = 0.0, sx = 0.0, sy = 0.0, sxx = 0.0, syy = 0.0, n = 0.0;
            long nn = 0;
            if (!bias || era_era_forward(&c, &p, T, bias, &st, NULL) != ERA_OK) {
                fprintf(stderr, "era_diag: era_era_forward failed at T %d\n", T);
                free(bias);
                era_era_state_free(&st);
                return 1;
            }
            for (a = 0; a < T; a++) {
                double rm = 0.0;
                for (b = 0; b < T; b++) rm += bias[(size_t)a * T + b];
                rm /= T;
                for (b = 0; b < T; b++) {
                    double v = bias[(size_t)a * T + b], d = -(double)abs(a - b) / T;
                    if (abs(a - b) < w) {
                        near += v - rm;
                        nn++;
                    }
                    if (b <= a) {
                        sx += d;
                        sy += v;
                        sxx += d * d;
                        syy += v * v;
                        sxy += d * v;
                        n += 1.0;
                    }
                }
            }
            {
                double cov = sxy / n - sx / n * sy / n, vx = sxx / n - sx / n * sx / n, vy = syy / n - sy / n * sy / n;
                printf("  T %4d: marginal error %.3g, std before z-score %.4g, near-diagonal excess %+.3f, "
                       "corr(bias, -|i-j|/T) %+.3f\n",
                       T, (double)st.marginal_err, (double)st.std_pre, near / (double)nn,
                       vx > 0 && vy > 0 ? cov / sqrt(vx * vy) : 0.0);
            }
            free(bias);
            era_era_state_free(&st);
        }
    return 0;
}

int main(int argc, char **argv)
{
    ckpt_file *f = NULL;
    char err[256], nm[96];
    int l, i;
    era_era_config c = era_era_config_default();
    if (argc < 2 || argc == 3 || argc == 4 || argc > 6) {
        fprintf(stderr, "usage: era_diag CKPT [R nb eps iters]\n");
        return 2;
    }
    if (argc == 6) {
        c.R = atoi(argv[2]);
        c.nb = atoi(argv[3]);
        c.eps = (float)atof(argv[4]);
        c.iters = atoi(argv[5]);
        if (c.R < 1 || c.R > 4096 || c.nb < 1 || c.nb > 4096 || !(c.eps > 0.0f) || c.iters < 1 || c.iters > 1000) {
            fprintf(stderr, "era_diag: R, nb in 1..4096, eps > 0, iters in 1..1000\n");
            return 2;
        }
    }
    if (ckpt_open(&f, argv[1], err, sizeof err)) {
        fprintf(stderr, "era_diag: %s\n", err);
        return 1;
    }
    {
        float *c0 = (float *)malloc(sizeof(float) * (size_t)c.R);
        era_era_params p0;
        if (!c0) { ckpt_close(f); return 1; }
        era_era_init_centers(c.R, c0);
        p0 = era_era_params_default(c0);
        printf("at initialisation: centres (r + 0.5)/R, sigma %.4f, alpha %.4f\n", (double)p0.sigma, (double)p0.alpha);
        if (diag(&c, &p0)) { free(c0); ckpt_close(f); return 1; }
        free(c0);
    }
    for (l = 0;; l++) {
        const float *cen, *ls, *al;
        era_era_params p;
        double mn = 1e30, mx = -1e30, mean = 0.0, var = 0.0;
        snprintf(nm, sizeof nm, "blocks.%d.attn.era.centers", l);
        cen = scalar_or_vec(f, nm, c.R, err, sizeof err);
        if (!cen) {
            if (l == 0) {
                fprintf(stderr, "era_diag: %s (an ERA checkpoint with R = %d?)\n", err, c.R);
                ckpt_close(f);
                return 1;
            }
            break;
        }
        snprintf(nm, sizeof nm, "blocks.%d.attn.era.log_sigma", l);
        ls = scalar_or_vec(f, nm, 1, err, sizeof err);
        snprintf(nm, sizeof nm, "blocks.%d.attn.era.alpha", l);
        al = scalar_or_vec(f, nm, 1, err, sizeof err);
        if (!ls || !al) {
            fprintf(stderr, "era_diag: %s\n", err);
            ckpt_close(f);
            return 1;
        }
        for (i = 0; i < c.R; i++) {
            mn = cen[i] < mn ? cen[i] : mn;
            mx = cen[i] > mx ? cen[i] : mx;
            mean += cen[i];
        }
        mean /= c.R;
        for (i = 0; i < c.R; i++) var += (cen[i] - mean) * (cen[i] - mean);
        p = era_era_params_default(cen);
        p.sigma = expf(ls[0]);
        p.alpha = al[0];
        printf("layer %d: centres in [%.3f, %.3f], mean %.3f, std %.3f (init: (r + 0.5)/R, std %.3f); sigma %.4f; alpha %.4f\n",
               l, mn, mx, mean, sqrt(var / c.R), sqrt((double)c.R * c.R - 1.0) / (sqrt(12.0) * c.R), (double)p.sigma,
               (double)p.alpha);
        if (diag(&c, &p)) {
            ckpt_close(f);
            return 1;
        }
    }
    ckpt_close(f);
    return 0;
}
