/* bench_polar.c - Polar Attention on the CPU: the streaming path against the
   materialised reference and against tensor.h's causal softmax attention, plus the
   memory of a T = 65,536 streaming forward.

   Build: make build/bench/bench_polar      (-O3 -march=native -fopenmp)
   Run:   build/bench/bench_polar [rounds] [H_64k] [nT] [mat]
          (defaults 3, 8, 3, 1; H_64k 0 skips part 1; nT: how many of the lengths;
          mat 0 skips the materialised path, for quick ratio runs with many rounds)
          build/bench/bench_polar --contended K,K,... [rounds]   (issue 41; rounds default 2)

   Part 1 (memory, runs first so the RSS high-water mark is its own). B = 1, H = H_64k,
   Hkv = H, T = 65,536, D = 64: q, k, v, c, mag and the saved stats are allocated and
   touched, then one polar_forward runs with the header allocating its workspace.
   Reported: its time, the peak RSS before (inputs + outputs) and after, and the
   difference (target <= 64 MiB).

   Part 2 (speed). B = 1, H = 8, Hkv = 8, D = 64, T in {1024, 4096, 16384}; forward +
   backward (dc, dmag random) with caller workspaces reused:
     stream   polar_forward + polar_backward
     mat      polar_forward_ref + polar_backward_ref (weights (B,H,T,T+1)); T <= 4096
     softmax  tk_attention_forward + tk_attention_backward (probs (B,H,T,T)); T <= 4096
   Times are medians over `rounds` (at most 31; 1 round at 16K), the three run back to
   back in each round. Ratios are within the same run; stream/softmax is the median over
   rounds of the paired ratio (the two of the same round), robust to the machine's speed
   drifting between rounds. Last line:
     bench_polar: stream_over_softmax_4k=X     (target <= 1.5)

   --contended (issue 41, bench/bench_contended.h): the headline shape only (T = 4096,
   streaming forward + backward, repeated for >= 1 s per measurement), quiet and beside K
   busy processes, under the programs' wait policy (examples/common/exio.h's
   ex_wait_policy: GOMP_SPINCOUNT=5000 unless the environment sets a policy). Last lines:
   quiet_tokens_per_s=X and fair_share_ratio_k<K>=X per K. */
#define _POSIX_C_SOURCE 200809L
#include "bench/bench_util.h"
#include "bench/bench_contended.h"
#include "examples/common/exio.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#define TENSOR_IMPLEMENTATION
#include "tensor.h"
#define POLAR_IMPLEMENTATION
#include "polar.h"

static unsigned long long rng = 0x243F6A8885A308D3ULL;
static double urand(void)
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (double)((rng * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}
static float *randn(size_t n, double scale)
{
    float *x = (float *)malloc(n * sizeof(float));
    size_t i;
    if (!x) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (i = 0; i < n; i++) x[i] = (float)(scale * (urand() + urand() + urand() - 1.5) * 2.0);
    return x;
}
static float *zeros(size_t n)
{
    float *x = (float *)calloc(n, sizeof(float));
    if (!x) { fprintf(stderr, "out of memory\n"); exit(1); }
    return x;
}
static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}
static void die(int rc, const char *what)
{
    if (rc) { fprintf(stderr, "%s failed: %d\n", what, rc); exit(1); }
}

typedef struct params {
    float lg[64], nb[64], ns[64], mb[64], *vn;
    polar_params p;
} params;
static void params_make(params *P, polar_config *cfg, int H, int D)
{
    P->vn = zeros((size_t)H * D);
    polar_params_init(cfg, H, D, P->lg, P->nb, P->ns, P->mb, P->vn);
    P->p.len_gain_raw = P->lg; P->p.null_base = P->nb; P->p.null_slope_raw = P->ns;
    P->p.mag_beta_raw = P->mb; P->p.v_null = P->vn;
}

static void part_memory(int H)
{
    const int B = 1, T = 65536, D = 64;
    size_t nq = (size_t)B * H * T * D, nr = (size_t)B * H * T;
    polar_config cfg = polar_config_default();
    params P;
    polar_state st;
    float *q, *k, *v, *c, *mag;
    double rss0, rss1, t0, t1;
    params_make(&P, &cfg, H, D);
    q = randn(nq, 1.0); k = randn(nq, 1.0); v = randn(nq, 1.0);
    c = zeros(nq); mag = zeros(nr);
    st.stats = zeros(nr * POLAR_NSTAT); st.probs = NULL;
    memset(c, 1, nq * sizeof(float)); /* touch every output page */
    memset(mag, 1, nr * sizeof(float));
    memset(st.stats, 1, nr * POLAR_NSTAT * sizeof(float));
    rss0 = peak_rss_mib();
    t0 = now_s();
    die(polar_forward(&cfg, c, mag, &st, q, k, v, &P.p, B, H, H, T, D, NULL), "polar_forward 64K");
    t1 = now_s();
    rss1 = peak_rss_mib();
    printf("T=65536 B=1 H=%d D=64 streaming forward: %.2f s; peak RSS before %.1f MiB "
           "(inputs+outputs), after %.1f MiB; extra %.1f MiB (target <= 64); "
           "workspace %.2f MiB; mag[last]=%.4f\n",
           H, t1 - t0, rss0, rss1, rss1 - rss0,
           (double)polar_workspace_size(&cfg, B, H, H, T, D) / 1048576.0, mag[nr - 1]);
    free(q); free(k); free(v); free(c); free(mag); free(st.stats); free(P.vn);
}

/* --contended: one measurement = polar_forward + polar_backward at T = 4096 repeated for at
   least a second; returns tokens (B * T per pass) per second */
typedef struct cont_ctx {
    polar_config cfg;
    params P;
    polar_state st;
    polar_grads g;
    float *q, *k, *v, *dc, *dmag, *c, *mag, *dq, *dk, *dv, *grad[5];
    void *ws;
    int B, H, T, D;
} cont_ctx;
static double cont_measure(void *p)
{
    cont_ctx *x = (cont_ctx *)p;
    double t0 = now_s(), t;
    int n = 0;
    do {
        if (polar_forward(&x->cfg, x->c, x->mag, &x->st, x->q, x->k, x->v, &x->P.p, x->B, x->H,
                          x->H, x->T, x->D, x->ws) ||
            polar_backward(&x->cfg, x->dq, x->dk, x->dv, &x->g, x->dc, x->dmag, x->c, x->mag,
                           &x->st, x->q, x->k, x->v, &x->P.p, x->B, x->H, x->H, x->T, x->D,
                           x->ws))
            return -1.0;
        n++;
        t = now_s() - t0;
    } while (t < 1.0);
    return (double)n * x->B * x->T / t;
}
static int run_contended(const char *list, int rounds)
{
    int ks[BENCH_CONTENDED_MAX_K], nk = bench_contended_parse(list, ks), rc, i;
    cont_ctx x;
    size_t nq, nr;
    if (!nk) {
        fprintf(stderr, "bench_polar: --contended takes K,K,... (each 1..64)\n");
        return 2;
    }
    x.B = 1; x.H = 8; x.T = 4096; x.D = 64;
    nq = (size_t)x.B * x.H * x.T * x.D;
    nr = (size_t)x.B * x.H * x.T;
    x.cfg = polar_config_default();
    params_make(&x.P, &x.cfg, x.H, x.D);
    x.q = randn(nq, 1.0); x.k = randn(nq, 1.0); x.v = randn(nq, 1.0);
    x.dc = randn(nq, 0.1); x.dmag = randn(nr, 0.1);
    x.c = zeros(nq); x.mag = zeros(nr); x.dq = zeros(nq); x.dk = zeros(nq); x.dv = zeros(nq);
    for (i = 0; i < 4; i++) x.grad[i] = zeros((size_t)x.H);
    x.grad[4] = zeros((size_t)x.H * x.D);
    x.g.len_gain_raw = x.grad[0]; x.g.null_base = x.grad[1]; x.g.null_slope_raw = x.grad[2];
    x.g.mag_beta_raw = x.grad[3]; x.g.v_null = x.grad[4];
    x.st.stats = zeros(nr * POLAR_NSTAT); x.st.probs = NULL;
    x.ws = malloc(polar_workspace_size(&x.cfg, x.B, x.H, x.H, x.T, x.D));
    if (!x.ws) { fprintf(stderr, "out of memory\n"); return 1; }
    rc = bench_contended_run("bench_polar streaming fwd+bwd B=1 H=8 T=4096 D=64", "tokens",
                             cont_measure, &x, rounds, ks, nk, NULL);
    free(x.q); free(x.k); free(x.v); free(x.dc); free(x.dmag); free(x.c); free(x.mag);
    free(x.dq); free(x.dk); free(x.dv); free(x.st.stats); free(x.ws); free(x.P.vn);
    for (i = 0; i < 5; i++) free(x.grad[i]);
    return rc;
}

int main(int argc, char **argv)
{
    bench_quiet quiet_;
    char loaded_[96];
    int rounds, H64;
    const int B = 1, H = 8, D = 64, Ts[3] = {1024, 4096, 16384};
    double ratio4k = -1;
    int ti, nth = 1, nT, want_mat;
    if (argc > 1 && !strcmp(argv[1], "--contended")) {
        int r = argc > 3 ? atoi(argv[3]) : 2;
        if (argc < 3 || argc > 4 || r < 1) {
            fprintf(stderr, "usage: bench_polar --contended K,K,... [rounds]\n");
            return 2;
        }
        ex_wait_policy(argv);
        return run_contended(argv[2], r);
    }
    rounds = argc > 1 ? atoi(argv[1]) : 3;
    H64 = argc > 2 ? atoi(argv[2]) : 8;
    nT = argc > 3 ? atoi(argv[3]) : 3; /* how many of Ts to run */
    want_mat = argc > 4 ? atoi(argv[4]) != 0 : 1;
    if (rounds < 1) rounds = 1;
    if (H64 < 0 || H64 > 64) H64 = 8; /* 0 skips part 1 */
#ifdef _OPENMP
    nth = omp_get_max_threads();
#endif
    printf("bench_polar: B=1 H=8 Hkv=8 D=64, threads=%d, rounds=%d\n", nth, rounds);
    bench_quiet_begin(&quiet_);
    if (H64 > 0) part_memory(H64);
    printf("%7s %12s %12s %12s %14s %14s\n", "T", "stream_s", "mat_s", "softmax_s",
           "mat/stream", "stream/softmax");
    if (nT < 1 || nT > 3) nT = 3;
    for (ti = 0; ti < nT; ti++) {
        int T = Ts[ti], big = T <= 4096, R = T > 4096 ? 1 : rounds, r;
        size_t nq = (size_t)B * H * T * D, nr = (size_t)B * H * T;
        polar_config cfg = polar_config_default();
        params P;
        polar_state st, str;
        polar_grads g;
        float *q = randn(nq, 1.0), *k = randn(nq, 1.0), *v = randn(nq, 1.0);
        float *dc = randn(nq, 0.1), *dmag = randn(nr, 0.1);
        float *c = zeros(nq), *mag = zeros(nr), *dq = zeros(nq), *dk = zeros(nq), *dv = zeros(nq);
        float *dlg = zeros(H), *dnb = zeros(H), *dns = zeros(H), *dmb = zeros(H), *dvn = zeros((size_t)H * D);
        float *out = NULL, *probs = NULL, *wprobs = NULL;
        double ts[32], tm[32], tsm[32], pr[32], s_med, m_med = -1, sm_med = -1, pr_med = -1;
        void *ws;
        params_make(&P, &cfg, H, D);
        g.len_gain_raw = dlg; g.null_base = dnb; g.null_slope_raw = dns; g.mag_beta_raw = dmb;
        g.v_null = dvn;
        st.stats = zeros(nr * POLAR_NSTAT); st.probs = NULL;
        ws = malloc(polar_workspace_size(&cfg, B, H, H, T, D));
        if (big) {
            out = zeros(nq);
            probs = zeros((size_t)B * H * T * T);
            wprobs = zeros((size_t)B * H * T * (T + 1));
        }
        str.stats = st.stats; str.probs = wprobs;
        if (R > 31) R = 31;
        for (r = 0; r < R; r++) {
            double t0 = now_s();
            die(polar_forward(&cfg, c, mag, &st, q, k, v, &P.p, B, H, H, T, D, ws), "polar_forward");
            die(polar_backward(&cfg, dq, dk, dv, &g, dc, dmag, c, mag, &st, q, k, v, &P.p, B, H,
                               H, T, D, ws), "polar_backward");
            ts[r] = now_s() - t0;
            if (big && want_mat) {
                t0 = now_s();
                die(polar_forward_ref(&cfg, c, mag, &str, q, k, v, &P.p, B, H, H, T, D), "ref fwd");
                die(polar_backward_ref(&cfg, dq, dk, dv, &g, dc, dmag, c, mag, &str, q, k, v, &P.p,
                                       B, H, H, T, D, ws), "ref bwd");
                tm[r] = now_s() - t0;
            }
            if (big) {
                t0 = now_s();
                die(tk_attention_forward(out, probs, q, k, v, NULL, 0, NULL, B, H, T, D), "tk fwd");
                die(tk_attention_backward(dq, dk, dv, NULL, NULL, dc, probs, q, k, v, 0, NULL, B,
                                          H, T, D), "tk bwd");
                tsm[r] = now_s() - t0;
                pr[r] = ts[r] / tsm[r];
            }
        }
        s_med = median(ts, R);
        if (big) {
            m_med = want_mat ? median(tm, R) : -1.0;
            sm_med = median(tsm, R);
            pr_med = median(pr, R);
            printf("%7d %12.4f %12.4f %12.4f %14.2f %14.2f   (ratio of the medians %.3f)\n", T,
                   s_med, m_med, sm_med, want_mat ? m_med / s_med : -1.0, pr_med, s_med / sm_med);
            if (T == 4096) ratio4k = pr_med;
        } else {
            printf("%7d %12.4f %12s %12s %14s %14s   (T^2 buffers: %.1f GiB, skipped)\n", T,
                   s_med, "n/a", "n/a", "n/a", "n/a",
                   (double)B * H * T * T * 4.0 / 1073741824.0);
        }
        fflush(stdout);
        free(q); free(k); free(v); free(dc); free(dmag); free(c); free(mag); free(dq); free(dk);
        free(dv); free(dlg); free(dnb); free(dns); free(dmb); free(dvn); free(out); free(probs);
        free(wprobs); free(st.stats); free(ws); free(P.vn);
    }
    bench_quiet_report(&quiet_, loaded_, sizeof loaded_);
    printf("bench_polar: stream_over_softmax_4k=%.3f%s\n", ratio4k, loaded_);
    return 0;
}
