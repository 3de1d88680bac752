/* bench_guardian.c - per-step cost of guardian.h's controllers, against one tensor.h
   causal attention forward (one layer) measured in the same run.

   Build: make build/bench/bench_guardian     (-O3 -march=native -fopenmp)
   Run:   build/bench/bench_guardian [rounds]  (default 7)

   Peer: tk_attention_forward at B=4, H=6, T=256, D=64 (one layer of a small model;
   a training step runs many such layers forward and backward, so the ratio below is
   an upper bound on the controllers' share of a step).

   Controllers, each timed as the mean over many calls, median over rounds:
     guardian   guardian_step + guardian_update (policy 4-64-64-3, L = 12 layers)
     gac        gac_observe + gac_update (L*H = 72 temperatures) + gac_entropy_penalty (12)
     schedules  guardian_sched_tau + guardian_lr + guardian_warm_in + guardian_chaos_step
     cg         guardian_cg_update (K = 3) + guardian_cg_sample
     entfloor   guardian_mu_entropy + guardian_mu_entropy_backward (N = 1024, R = 4)
                + guardian_entropy_floor
   The per-step total of these is reported against the attention forward.

   Also (not per-step controllers): EMA / SWA-select over a 16M-float weight vector
   (memory-bound, ms and GB/s), guardian_ce_smoothed (with gradient) vs tensor.h's
   tk_crossentropy_forward + tk_crossentropy_backward at N = 512, V = 8192, and the
   Guardian state save.

   Last line: bench_guardian: controllers_over_attention=X */
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
#define GUARDIAN_IMPLEMENTATION
#include "guardian.h"

static volatile float sink;
static guardian_rng data_rng;

static void fill_normal(float *x, size_t n, float scale)
{
    size_t i;
    for (i = 0; i < n; i++) x[i] = scale * (float)guardian_rng_normal(&data_rng);
}

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "bench_guardian: %s failed (%d)\n", what, rc);
        exit(1);
    }
}

/* ---- per-call bodies (each does one "step" of a controller) */
enum { L = 12, HEADS = 6, NMU = 1024, RMU = 4 };

static guardian g_pol;
static gac g_gac;
static guardian_chaos g_chaos;
static guardian_cg g_cg;
static float g_tau[L], g_tau_h[L * HEADS], g_grad_h[L * HEADS], g_H[L], g_dH[L];
static float g_mu[NMU * RMU], g_dmu[NMU * RMU];
static long g_t;

static void step_guardian(void)
{
    guardian_obs o;
    guardian_knobs k;
    o.gate_delta = 0.01f;
    o.sat_frac = 0.3f;
    o.mu_entropy = 1.1f;
    o.val_ce = 5.3f - 1e-6f * (float)(g_t % 1000);
    check(guardian_step(&g_pol, &o, g_tau, &k), "guardian_step");
    check(guardian_update(&g_pol, -o.val_ce), "guardian_update");
    sink = k.tau_mean;
}

static void step_gac(void)
{
    float loss;
    check(gac_observe(&g_gac, -5.0f + 1e-4f * (float)(g_t % 100), NULL), "gac_observe");
    check(gac_update(&g_gac, g_tau_h, g_grad_h, L * HEADS), "gac_update");
    check(gac_entropy_penalty(&g_gac.cfg, g_H, L, &loss, g_dH), "gac_entropy_penalty");
    sink = loss;
}

static void step_schedules(void)
{
    guardian_sched_config sc = guardian_sched_config_default();
    guardian_lr_config lc = guardian_lr_config_default();
    float tau, lr, w, f;
    check(guardian_sched_tau(&sc, g_t % 8000, 1, 5.0f, 1e-4f, &tau), "sched");
    check(guardian_lr(&lc, g_t % 8000, &lr), "lr");
    check(guardian_warm_in(g_t % 2000, 1200, &w), "warm_in");
    check(guardian_chaos_step(&g_chaos, &f), "chaos");
    sink = tau + lr + w + f;
}

static void step_cg(void)
{
    float loss[3], sat[3] = {0.2f, 0.4f, 0.6f}, H[3] = {1.0f, 1.1f, 1.2f};
    int idx, i;
    for (i = 0; i < 3; i++) loss[i] = 5.0f + 0.1f * (float)i + 0.2f * g_cg.q[i];
    check(guardian_cg_update(&g_cg, loss, sat, H), "cg_update");
    check(guardian_cg_sample(&g_cg, &idx), "cg_sample");
    sink = (float)idx;
}

static void step_entfloor(void)
{
    float H, pen, d;
    guardian_entfloor_config ec = guardian_entfloor_config_default();
    check(guardian_mu_entropy(g_mu, NMU, RMU, &H), "mu_entropy");
    check(guardian_entropy_floor(&ec, H, 0.1f, &pen, &d), "entropy_floor");
    check(guardian_mu_entropy_backward(g_dmu, g_mu, NMU, RMU, d), "mu_entropy_backward");
    sink = pen;
}

/* mean seconds per call of fn over about target_s seconds; median over rounds */
static double time_calls(void (*fn)(void), int rounds, double target_s)
{
    double *v = (double *)xmalloc((size_t)rounds * sizeof(double)), t0, m;
    long n = 1, i;
    int r;
    /* calibrate */
    for (;;) {
        t0 = now_s();
        for (i = 0; i < n; i++) { fn(); g_t++; }
        if (now_s() - t0 > target_s * 0.2 || n > (1L << 28)) break;
        n *= 4;
    }
    n = (long)((double)n * target_s / (now_s() - t0 + 1e-9) * 0.2) + 1;
    for (r = 0; r < rounds; r++) {
        t0 = now_s();
        for (i = 0; i < n; i++) { fn(); g_t++; }
        v[r] = (now_s() - t0) / (double)n;
    }
    m = median(v, rounds);
    free(v);
    return m;
}

static double bench_attention(int rounds, int B, int H, int T, int D)
{
    size_t TD = (size_t)B * H * T * D, TT = (size_t)B * H * T * T;
    float *q = (float *)xmalloc(TD * 4), *k = (float *)xmalloc(TD * 4);
    float *v = (float *)xmalloc(TD * 4), *out = (float *)xmalloc(TD * 4);
    float *probs = (float *)xmalloc(TT * 4);
    double *ts = (double *)xmalloc((size_t)rounds * sizeof(double)), m;
    int r;
    fill_normal(q, TD, 1.0f); fill_normal(k, TD, 1.0f); fill_normal(v, TD, 1.0f);
    check(tk_attention_forward(out, probs, q, k, v, NULL, 0, NULL, B, H, T, D), "attention");
    for (r = 0; r < rounds; r++) {
        double t0 = now_s();
        check(tk_attention_forward(out, probs, q, k, v, NULL, 0, NULL, B, H, T, D), "attention");
        ts[r] = now_s() - t0;
        sink = out[0];
    }
    m = median(ts, rounds);
    free(q); free(k); free(v); free(out); free(probs); free(ts);
    return m;
}

int main(int argc, char **argv)
{
    bench_quiet quiet_;
    char loaded_[96];
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    int threads = 1, i;
    double t_att, t_pol, t_gac, t_sch, t_cg, t_ent, total;
    const int B = 4, H = 6, T = 256, D = 64;
    if (rounds < 1) rounds = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    guardian_rng_seed(&data_rng, 2026);
    printf("bench_guardian: %d rounds, %d OpenMP thread(s), GEMM kernel %s\n", rounds, threads,
           tk_gemm_kernel_name());
    bench_quiet_begin(&quiet_);

    /* set up the controllers */
    {
        guardian_config c = guardian_config_default();
        gac_config gc = gac_config_default();
        guardian_chaos_config cc = guardian_chaos_config_default();
        guardian_cg_config cgc = guardian_cg_config_default();
        c.n_layers = L;
        check(guardian_init(&g_pol, &c), "guardian_init");
        check(gac_init(&g_gac, &gc), "gac_init");
        check(guardian_chaos_init(&g_chaos, &cc), "chaos_init");
        cgc.n = 3; cgc.lengths[0] = 256; cgc.lengths[1] = 512; cgc.lengths[2] = 1024;
        check(guardian_cg_init(&g_cg, &cgc), "cg_init");
        for (i = 0; i < L; i++) { g_tau[i] = c.tau_init; g_H[i] = 1.5f + 0.4f * (float)i; }
        for (i = 0; i < L * HEADS; i++) g_tau_h[i] = 1.0f;
        fill_normal(g_grad_h, L * HEADS, 0.1f);
        for (i = 0; i < NMU; i++) {
            int r;
            float s = 0;
            for (r = 0; r < RMU; r++) { g_mu[i * RMU + r] = 0.05f + (float)guardian_rng_uniform(&data_rng); s += g_mu[i * RMU + r]; }
            for (r = 0; r < RMU; r++) g_mu[i * RMU + r] /= s;
        }
    }

    t_att = bench_attention(rounds, B, H, T, D);
    printf("  peer: tk_attention_forward B=%d H=%d T=%d D=%d   %10.3f us\n", B, H, T, D, 1e6 * t_att);
    t_pol = time_calls(step_guardian, rounds, 0.2);
    t_gac = time_calls(step_gac, rounds, 0.2);
    t_sch = time_calls(step_schedules, rounds, 0.2);
    t_cg = time_calls(step_cg, rounds, 0.2);
    t_ent = time_calls(step_entfloor, rounds, 0.2);
    total = t_pol + t_gac + t_sch + t_cg + t_ent;
    printf("  guardian step+update (4-64-64-3, L=%d)       %10.3f us  (%.5f of attention)\n", L, 1e6 * t_pol, t_pol / t_att);
    printf("  gac observe+update (%d taus) + band penalty  %10.3f us  (%.5f)\n", L * HEADS, 1e6 * t_gac, t_gac / t_att);
    printf("  schedules (Alg. 1 tau, LR, warm-in, chaos)   %10.3f us  (%.5f)\n", 1e6 * t_sch, t_sch / t_att);
    printf("  context game update+sample (K=3)             %10.3f us  (%.5f)\n", 1e6 * t_cg, t_cg / t_att);
    printf("  membership entropy fwd+bwd (N=%d,R=%d)+floor %10.3f us  (%.5f)\n", NMU, RMU, 1e6 * t_ent, t_ent / t_att);
    printf("  per-step total                                %10.3f us  (%.5f of one attention forward)\n", 1e6 * total, total / t_att);

    /* Guardian state save */
    {
        size_t n = guardian_state_size(&g_pol);
        unsigned char *buf = (unsigned char *)xmalloc(n);
        double t0 = now_s();
        int r;
        for (r = 0; r < 100; r++) check(guardian_save(&g_pol, buf, n, NULL), "guardian_save");
        printf("  guardian_save: %zu bytes, %.1f us per save\n", n, (now_s() - t0) / 100 * 1e6);
        free(buf);
    }

    /* EMA and SWA-select over a model-sized weight vector */
    {
        const int64_t n = 16 * 1024 * 1024;
        float *ema = (float *)xmalloc((size_t)n * 4), *w = (float *)xmalloc((size_t)n * 4);
        float *avg = (float *)xmalloc((size_t)n * 4);
        double *te = (double *)xmalloc((size_t)rounds * sizeof(double));
        double *tw = (double *)xmalloc((size_t)rounds * sizeof(double));
        guardian_swa s;
        guardian_swa_config sc = guardian_swa_config_default();
        int r;
        sc.start_epoch = 0; sc.min_rel_gain = 0.0f;
        check(guardian_swa_init(&s, &sc), "swa_init");
        fill_normal(w, (size_t)n, 1.0f);
        memcpy(ema, w, (size_t)n * 4);
        check(guardian_swa_offer(&s, avg, w, n, 0, 5.0f, 5.0f, NULL), "swa_offer");
        for (r = 0; r < rounds; r++) {
            double t0 = now_s();
            check(guardian_ema_update(ema, w, n, 0.999f), "ema");
            te[r] = now_s() - t0;
            t0 = now_s();
            check(guardian_swa_offer(&s, avg, w, n, 1, 5.0f, 4.9f, NULL), "swa_offer");
            tw[r] = now_s() - t0;
        }
        {
            double me = median(te, rounds), mw = median(tw, rounds);
            printf("  ema_update  n=%lld floats: %8.3f ms (%5.1f GB/s)\n", (long long)n, 1e3 * me, 12.0 * (double)n / me * 1e-9);
            printf("  swa_offer   n=%lld floats: %8.3f ms (%5.1f GB/s)\n", (long long)n, 1e3 * mw, 12.0 * (double)n / mw * 1e-9);
        }
        sink = ema[1] + avg[1];
        free(ema); free(w); free(avg); free(te); free(tw);
    }

    /* label-smoothing bookkeeping vs tensor.h's CE (both forward + gradient) */
    {
        const int N = 512, V = 8192;
        float *logits = (float *)xmalloc((size_t)N * V * 4), *d1 = (float *)xmalloc((size_t)N * V * 4);
        float *probs = (float *)xmalloc((size_t)N * V * 4);
        int *tg = (int *)xmalloc((size_t)N * sizeof(int));
        double *ta = (double *)xmalloc((size_t)rounds * sizeof(double));
        double *tb = (double *)xmalloc((size_t)rounds * sizeof(double));
        double ps = 0, ss = 0;
        float mce = 0, mloss = 0;
        int r;
        fill_normal(logits, (size_t)N * V, 2.0f);
        for (i = 0; i < N; i++) tg[i] = (int)(guardian_rng_u64(&data_rng) % (uint64_t)V);
        memset(d1, 0, (size_t)N * V * 4);
        for (r = 0; r < rounds; r++) {
            double t0 = now_s();
            check(guardian_ce_smoothed(logits, tg, N, V, 0.015f, &ps, &ss, NULL, d1, 1.0f / N), "ce_smoothed");
            ta[r] = now_s() - t0;
            t0 = now_s();
            check(tk_crossentropy_forward(probs, NULL, &mce, &mloss, logits, tg, N, V, 0.015f), "tk_ce_fwd");
            check(tk_crossentropy_backward(d1, probs, tg, N, V, 0.015f, 1.0f / N), "tk_ce_bwd");
            tb[r] = now_s() - t0;
        }
        {
            double ma = median(ta, rounds), mb = median(tb, rounds);
            printf("  ce_smoothed+grad N=%d V=%d: %8.3f ms; tk_crossentropy fwd+bwd %8.3f ms "
                   "(ratio %.2f); mean CE pure %.4f / tk %.4f, smoothed %.4f / tk %.4f\n",
                   N, V, 1e3 * ma, 1e3 * mb, ma / mb, ps / N, mce, ss / N, mloss);
        }
        free(logits); free(d1); free(probs); free(tg); free(ta); free(tb);
    }

    guardian_free(&g_pol);
    bench_quiet_report(&quiet_, loaded_, sizeof loaded_);
    printf("bench_guardian: controllers_over_attention=%.5f%s\n", total / t_att, loaded_);
    return 0;
}
