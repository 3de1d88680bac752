/* bench_era.c - cost of building the RPA prior B(T) against one tensor.h causal
   attention forward, and the cost of adding a cached prior inside that forward.

   Build: make build/bench/bench_era      (-O3 -march=native -fopenmp)
   Run:   build/bench/bench_era [rounds] [T]     (defaults 5, 1024)

   Part 1 (build). Memberships mu (B = 8, T, R = 8) are given (random rows of the
   simplex); each round times era_rpa_forward (batch mean, basis, Sinkhorn, the
   (T,T) prior with z-score, clip and warm-in; K = 8, caller workspace and state
   reused) and one tk_attention_forward (B = 8, H = 8, T, D = 64, no bias), back to
   back. Beside them: the membership computation era_membership_forward (projection
   D = 512 -> 512 plus distances to R = 8 centres, batch 8) and the ERA build
   (R = nb = 32). Figures are medians over rounds; ratios are taken against the
   attention forward of the same run. Last line of this part:
     bench_era: build_over_attention=X      (target <= 0.02)

   Part 2 (cached inference). The prior for T comes from an era_cache (built once,
   untimed); each round runs tk_attention_forward without a bias and with the cached
   (T,T) bias, back to back in alternating order, same q, k, v. The headline is the
   median over rounds of the paired ratio (biased / plain of the same round), robust to
   the machine's speed drifting between rounds; the ratio of the medians is printed
   beside it. Last line:
     bench_era: cached_bias_attention_ratio=Y  (target <= 1.02) */
#define _POSIX_C_SOURCE 200809L
#include "bench/bench_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#define TENSOR_IMPLEMENTATION
#include "tensor.h"
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#define ERA_IMPLEMENTATION
#include "era.h"

static unsigned long long rng = 0x243F6A8885A308D3ULL;
static double urand(void)
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (double)((rng * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}
static void fill(float *x, size_t n, double scale)
{
    size_t i;
    for (i = 0; i < n; i++) x[i] = (float)(scale * (2.0 * urand() - 1.0));
}

static int calib_mu(void *user, int T, float *mbar)
{
    /* the batch-mean memberships a deployment would freeze per length */
    const float *mu = (const float *)user;
    memcpy(mbar, mu, sizeof(float) * (size_t)T * 8);
    return ERA_OK;
}

int main(int argc, char **argv)
{
    bench_quiet quiet_;
    char loaded_[96];
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    int T = argc > 2 ? atoi(argv[2]) : 1024;
    const int B = 8, H = 8, D = 64, R = 8, K = 8, DM = 512;
    size_t TT, nqkv, nprobs;
    float *q, *k, *v, *out, *probs, *mu, *bias, *h, *W, *bw, *cen, *ls, *z, *ecen;
    double *t_build, *t_attn, *t_mu, *t_era, *t_plain, *t_biased, *t_add, *t_pair;
    void *ws;
    era_rpa_config cfg;
    era_rpa_params p;
    era_rpa_state st;
    era_era_config ec;
    era_era_params ep;
    era_era_state es;
    era_cache cache;
    const float *cached;
    int r, i, nthreads = 1, rc;
    double build_m, attn_m, mu_m, era_m, plain_m, biased_m, pair_m;
    if (rounds < 1 || rounds > 1000 || T < 2 || T > 8192) {
        fprintf(stderr, "usage: bench_era [rounds (1..1000)] [T (2..8192)]\n");
        return 2;
    }
#ifdef _OPENMP
    nthreads = omp_get_max_threads();
#endif
    TT = (size_t)T * T;
    nqkv = (size_t)B * H * T * D;
    nprobs = (size_t)B * H * TT;
    q = (float *)xmalloc(sizeof(float) * nqkv);
    k = (float *)xmalloc(sizeof(float) * nqkv);
    v = (float *)xmalloc(sizeof(float) * nqkv);
    out = (float *)xmalloc(sizeof(float) * nqkv);
    probs = (float *)xmalloc(sizeof(float) * nprobs);
    mu = (float *)xmalloc(sizeof(float) * (size_t)B * T * R);
    bias = (float *)xmalloc(sizeof(float) * TT);
    h = (float *)xmalloc(sizeof(float) * (size_t)B * T * DM);
    W = (float *)xmalloc(sizeof(float) * (size_t)DM * DM);
    bw = (float *)xmalloc(sizeof(float) * DM);
    cen = (float *)xmalloc(sizeof(float) * (size_t)R * DM);
    ls = (float *)xmalloc(sizeof(float) * R);
    z = (float *)xmalloc(sizeof(float) * (size_t)B * T * DM);
    ecen = (float *)xmalloc(sizeof(float) * 32);
    t_build = (double *)xmalloc(sizeof(double) * rounds * 8);
    t_attn = t_build + rounds;
    t_mu = t_attn + rounds;
    t_era = t_mu + rounds;
    t_plain = t_era + rounds;
    t_biased = t_plain + rounds;
    t_add = t_biased + rounds;
    t_pair = t_add + rounds;
    fill(q, nqkv, 1.0); fill(k, nqkv, 1.0); fill(v, nqkv, 1.0);
    fill(h, (size_t)B * T * DM, 1.0);
    fill(W, (size_t)DM * DM, 1.0 / 22.6);
    fill(bw, DM, 0.1);
    fill(cen, (size_t)R * DM, 0.5);
    for (i = 0; i < R; i++) ls[i] = 0.5f;
    for (i = 0; i < B * T; i++) { /* random rows of the simplex */
        double s = 0;
        int rr;
        for (rr = 0; rr < R; rr++) { mu[(size_t)i * R + rr] = (float)(urand() + 1e-3); s += mu[(size_t)i * R + rr]; }
        for (rr = 0; rr < R; rr++) mu[(size_t)i * R + rr] = (float)(mu[(size_t)i * R + rr] / s);
    }

    cfg = era_rpa_config_default(R);
    cfg.K = K;
    cfg.sinkhorn_iters = 6;
    cfg.posmix = 0.1f;
    p = era_rpa_params_default();
    p.D = DM; p.P = DM; p.W = W; p.b = bw; p.centers = cen; p.log_sigma = ls;
    st = era_rpa_state_init();
    ws = xmalloc(era_rpa_workspace_size(&cfg, B, T));
    ec = era_era_config_default();
    era_era_init_centers(32, ecen);
    ep = era_era_params_default(ecen);
    es = era_era_state_init();

    printf("bench_era: B=%d H=%d T=%d D=%d R=K=%d, membership D=%d, %d OpenMP thread(s), %d rounds\n",
           B, H, T, D, R, DM, nthreads, rounds);
    bench_quiet_begin(&quiet_);
    /* warm-up (page faults, thread pool) */
    if ((rc = era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, ws)) != ERA_OK ||
        (rc = tk_attention_forward(out, probs, q, k, v, NULL, 0, NULL, B, H, T, D)) != TK_OK) {
        fprintf(stderr, "bench_era: warm-up failed (%d)\n", rc);
        return 1;
    }
    for (r = 0; r < rounds; r++) {
        double t0 = now_s();
        era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, ws);
        t_build[r] = now_s() - t0;
        t0 = now_s();
        tk_attention_forward(out, probs, q, k, v, NULL, 0, NULL, B, H, T, D);
        t_attn[r] = now_s() - t0;
        t0 = now_s();
        era_membership_forward(&cfg, &p, mu, z, NULL, h, B, T);
        t_mu[r] = now_s() - t0;
        t0 = now_s();
        era_era_forward(&ec, &ep, T, bias, &es, NULL);
        t_era[r] = now_s() - t0;
    }
    printf("  minima: attention %.3f ms, RPA build %.3f ms (%.4f x)\n", 1e3 * minimum(t_attn, rounds),
           1e3 * minimum(t_build, rounds), minimum(t_build, rounds) / minimum(t_attn, rounds));
    build_m = median(t_build, rounds);
    attn_m = median(t_attn, rounds);
    mu_m = median(t_mu, rounds);
    era_m = median(t_era, rounds);
    printf("  tk_attention_forward (no bias)        %10.3f ms\n", 1e3 * attn_m);
    printf("  RPA build B(T) from mu (era_rpa_forward) %7.3f ms  (%.4f x attention)\n", 1e3 * build_m, build_m / attn_m);
    printf("  memberships h->mu (projection + dist)  %8.3f ms  (%.4f x attention)\n", 1e3 * mu_m, mu_m / attn_m);
    printf("  ERA build (R = nb = 32)                %8.3f ms  (%.4f x attention)\n", 1e3 * era_m, era_m / attn_m);
    bench_quiet_report(&quiet_, loaded_, sizeof loaded_);
    printf("bench_era: build_over_attention=%.4f%s\n", build_m / attn_m, loaded_);
    bench_quiet_begin(&quiet_);

    /* part 2: cached prior inside the attention forward */
    {
        /* deployment: the batch-mean memberships for this length, frozen in a cache */
        float *mbar = (float *)xmalloc(sizeof(float) * (size_t)T * R);
        int t, rr, b;
        for (t = 0; t < T; t++)
            for (rr = 0; rr < R; rr++) {
                double s = 0;
                for (b = 0; b < B; b++) s += mu[((size_t)b * T + t) * R + rr];
                mbar[(size_t)t * R + rr] = (float)(s / B);
            }
        rc = era_cache_init_rpa(&cache, (size_t)64 << 20, &cfg, &p, calib_mu, mbar);
        if (rc == ERA_OK) rc = era_cache_get(&cache, T, &cached);
        if (rc != ERA_OK) {
            fprintf(stderr, "bench_era: cache: %s\n", era_strerror(rc));
            return 1;
        }
        for (r = 0; r < rounds; r++) {
            double t0;
            if (r % 2 == 0) {
                t0 = now_s();
                tk_attention_forward(out, probs, q, k, v, NULL, 0, NULL, B, H, T, D);
                t_plain[r] = now_s() - t0;
                t0 = now_s();
                era_cache_get(&cache, T, &cached);
                tk_attention_forward(out, probs, q, k, v, cached, 0, NULL, B, H, T, D);
                t_biased[r] = now_s() - t0;
            } else {
                t0 = now_s();
                era_cache_get(&cache, T, &cached);
                tk_attention_forward(out, probs, q, k, v, cached, 0, NULL, B, H, T, D);
                t_biased[r] = now_s() - t0;
                t0 = now_s();
                tk_attention_forward(out, probs, q, k, v, NULL, 0, NULL, B, H, T, D);
                t_plain[r] = now_s() - t0;
            }
            /* the add alone: era_apply of the (T,T) prior onto all (B,H,T,T) scores */
            t0 = now_s();
            era_apply(probs, cached, 0, B, H, T);
            t_add[r] = now_s() - t0;
        }
        printf("  minima: no bias %.3f ms, cached bias %.3f ms (ratio %.4f)\n", 1e3 * minimum(t_plain, rounds),
               1e3 * minimum(t_biased, rounds), minimum(t_biased, rounds) / minimum(t_plain, rounds));
        printf("  era_apply alone, full (B,H,T,T) add    %8.3f ms  (%.4f x attention)\n",
               1e3 * median(t_add, rounds), median(t_add, rounds) / median(t_plain, rounds));
        /* the headline: median over rounds of the back-to-back ratio biased / plain (a
           paired statistic: machine-speed drifts between rounds cancel within a pair) */
        for (r = 0; r < rounds; r++) t_pair[r] = t_biased[r] / t_plain[r];
        pair_m = median(t_pair, rounds);
        plain_m = median(t_plain, rounds);
        biased_m = median(t_biased, rounds);
        printf("  tk_attention_forward, no bias          %8.3f ms\n", 1e3 * plain_m);
        printf("  tk_attention_forward, cached RPA bias  %8.3f ms  (cache: %ld build, %ld hits)\n",
               1e3 * biased_m, cache.builds, cache.hits);
        printf("  ratio of the medians %.4f; median of the %d paired ratios below\n", biased_m / plain_m, rounds);
        bench_quiet_report(&quiet_, loaded_, sizeof loaded_);
        printf("bench_era: cached_bias_attention_ratio=%.4f%s\n", pair_m, loaded_);
        era_cache_free(&cache);
        free(mbar);
    }
    era_rpa_state_free(&st);
    era_era_state_free(&es);
    free(ws);
    free(q); free(k); free(v); free(out); free(probs); free(mu); free(bias); free(h); free(W);
    free(bw); free(cen); free(ls); free(z); free(ecen); free(t_build);
    return 0;
}
