/* bench_gdelta.c - gated-delta memory: chunked (WY) vs recurrent forward+backward, and
   the in-place decode step's throughput.

   Build: make build/bench/bench_gdelta     (-O3 -march=native -fopenmp)
   Run:   build/bench/bench_gdelta [rounds]   (default 2)
          build/bench/bench_gdelta --contended K,K,... [rounds]   (issue 41; rounds default 2)

   Training: B = 1, H = 8, Dk = Dv = 64 and 128, T = 1K, 4K, 16K. Each path runs
   gd_forward then gd_backward (saved state and workspace allocated once, outside the
   timing). Chunked: chunk 64 and chunk 32 (one state per chunk + the WY vectors saved). Recurrent:
   the reference step loop; its backward stores a state every 64 steps and recomputes
   the states inside each 64-step segment (one extra forward). Rounds alternate the two
   paths; each figure is the best round. Peer in the same run: tensor.h's causal
   softmax attention forward (tk_attention_forward, T^2 probabilities) at T <= 4K.

   Decode: gd_step for 256 sequences x 8 heads x (128 x 128) states in a 256-slot
   table, one token each; tokens/s = 256 / seconds per step.

   Last line: bench_gdelta: chunked_speedup_4k=X (recurrent time / chunked time at
   the default chunk 32, fwd+bwd, T = 4096, D = 128).

   --contended (issue 41, bench/bench_contended.h): the headline shape only (chunked,
   chunk 32, forward + backward, B = 1, H = 8, T = 4096, D = 128, repeated for >= 1 s per
   measurement), quiet and beside K busy processes, under the programs' wait policy
   (examples/common/exio.h's ex_wait_policy). Last lines: quiet_tokens_per_s=X and
   fair_share_ratio_k<K>=X per K. */
#define _POSIX_C_SOURCE 200809L
#include "bench/bench_util.h"
#include "bench/bench_contended.h"
#include "examples/common/exio.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#define GDELTA_IMPLEMENTATION
#include "gdelta.h"
#define TENSOR_IMPLEMENTATION
#include "tensor.h"

static unsigned long long rng = 0x243F6A8885A308D3ULL;
static float urand(void) /* [-1, 1) */
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (float)((double)((rng * 0x2545F4914F6CDD1DULL) >> 11) / 4503599627370496.0 - 1.0);
}

static float *alloc_fill(size_t n, float lo, float hi)
{
    float *p = (float *)malloc(n * sizeof(float));
    size_t i;
    if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (i = 0; i < n; i++) p[i] = lo + (hi - lo) * 0.5f * (urand() + 1.0f);
    return p;
}

/* one fwd+bwd, seconds */
static double run_fb(const gd_config *c, gd_saved *sv, void *ws, float *r, const float *q,
                     const float *k, const float *v, const float *g, const float *be,
                     const float *dr, float *dq, float *dk, float *dv, float *dg, float *db,
                     int H, int T, int D, double *t_fwd)
{
    double t0 = now_s(), t1;
    int rc = gd_forward(c, r, NULL, q, k, v, g, be, NULL, 1, H, T, D, D, sv, ws);
    t1 = now_s();
    if (rc == GD_OK)
        rc = gd_backward(c, sv, dq, dk, dv, dg, db, NULL, dr, NULL, q, k, v, g, be, NULL, 1,
                         H, T, D, D, ws);
    if (rc != GD_OK) { fprintf(stderr, "gdelta: %s\n", gd_strerror(rc)); exit(1); }
    *t_fwd = t1 - t0;
    return now_s() - t0;
}

/* --contended: one measurement = run_fb (chunk 32) at T = 4096, D = 128 repeated for at
   least a second; returns tokens (T per pass, B = 1) per second */
typedef struct cont_ctx {
    gd_config c;
    gd_saved sv;
    void *ws;
    float *q, *k, *v, *dr, *g, *be, *r, *dq, *dk, *dv, *dg, *db;
    int H, T, D;
} cont_ctx;
static double cont_measure(void *p)
{
    cont_ctx *x = (cont_ctx *)p;
    double t0 = now_s(), t, tf;
    int n = 0;
    do {
        run_fb(&x->c, &x->sv, x->ws, x->r, x->q, x->k, x->v, x->g, x->be, x->dr, x->dq, x->dk,
               x->dv, x->dg, x->db, x->H, x->T, x->D, &tf);
        n++;
        t = now_s() - t0;
    } while (t < 1.0);
    return (double)n * x->T / t;
}
static int run_contended(const char *list, int rounds)
{
    int ks[BENCH_CONTENDED_MAX_K], nk = bench_contended_parse(list, ks), rc;
    cont_ctx x;
    size_t nqk, ng;
    if (!nk) {
        fprintf(stderr, "bench_gdelta: --contended takes K,K,... (each 1..64)\n");
        return 2;
    }
    x.H = 8; x.T = 4096; x.D = 128;
    nqk = (size_t)x.H * x.T * x.D;
    ng = (size_t)x.H * x.T;
    x.c = gd_config_default();
    x.c.chunk_size = 32;
    x.sv = gd_saved_init();
    x.q = alloc_fill(nqk, -1, 1); x.k = alloc_fill(nqk, -1, 1); x.v = alloc_fill(nqk, -1, 1);
    x.dr = alloc_fill(nqk, -1, 1);
    x.g = alloc_fill(ng, 0.9f, 1.0f); x.be = alloc_fill(ng, 0.1f, 0.9f);
    x.r = (float *)calloc(nqk, sizeof(float)); x.dq = (float *)calloc(nqk, sizeof(float));
    x.dk = (float *)calloc(nqk, sizeof(float)); x.dv = (float *)calloc(nqk, sizeof(float));
    x.dg = (float *)calloc(ng, sizeof(float)); x.db = (float *)calloc(ng, sizeof(float));
    x.ws = malloc(gd_workspace_size(&x.c, 1, x.H, x.T, x.D, x.D));
    if (!x.r || !x.dq || !x.dk || !x.dv || !x.dg || !x.db || !x.ws) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    rc = bench_contended_run("bench_gdelta chunked (32) fwd+bwd B=1 H=8 T=4096 D=128", "tokens",
                             cont_measure, &x, rounds, ks, nk, NULL);
    gd_saved_free(&x.sv);
    free(x.ws); free(x.q); free(x.k); free(x.v); free(x.dr); free(x.g); free(x.be); free(x.r);
    free(x.dq); free(x.dk); free(x.dv); free(x.dg); free(x.db);
    return rc;
}

int main(int argc, char **argv)
{
    bench_quiet quiet_;
    char loaded_[96];
    int rounds;
    static const int Ds[2] = {64, 128}, Ts[3] = {1024, 4096, 16384};
    const int H = 8;
    int di, ti, nt = 1;
    double speed4k = 0.0;
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    if (argc > 1 && !strcmp(argv[1], "--contended")) {
        int r = argc > 3 ? atoi(argv[3]) : 2;
        if (argc < 3 || argc > 4 || r < 1) {
            fprintf(stderr, "usage: bench_gdelta --contended K,K,... [rounds]\n");
            return 2;
        }
        ex_wait_policy(argv);
        return run_contended(argv[2], r);
    }
    rounds = argc > 1 ? atoi(argv[1]) : 2;
    if (rounds < 1) rounds = 1;
    printf("bench_gdelta: %d threads, %d rounds (best), B=1 H=%d, recurrent checkpoint 64 "
           "(recompute); times in ms\n", nt, rounds, H);
    bench_quiet_begin(&quiet_);
    printf("%5s %6s | %10s %10s | %10s %10s %8s | %10s %8s | %14s\n", "D", "T", "rec fwd",
           "rec f+b", "C64 fwd", "C64 f+b", "speedup", "C32 f+b", "speedup",
           "softmax fwd ms");
    for (di = 0; di < 2; di++)
        for (ti = 0; ti < 3; ti++) {
            int D = Ds[di], T = Ts[ti], rd;
            size_t nqk = (size_t)H * T * D, ng = (size_t)H * T;
            float *q = alloc_fill(nqk, -1, 1), *k = alloc_fill(nqk, -1, 1),
                  *v = alloc_fill(nqk, -1, 1), *dr = alloc_fill(nqk, -1, 1);
            float *g = alloc_fill(ng, 0.9f, 1.0f), *be = alloc_fill(ng, 0.1f, 0.9f);
            float *r = (float *)calloc(nqk, sizeof(float)), *dq = (float *)calloc(nqk, sizeof(float));
            float *dk = (float *)calloc(nqk, sizeof(float)), *dv = (float *)calloc(nqk, sizeof(float));
            float *dg = (float *)calloc(ng, sizeof(float)), *db = (float *)calloc(ng, sizeof(float));
            gd_config cc = gd_config_default(), cr = gd_config_default(), c32;
            gd_saved sc = gd_saved_init(), srec = gd_saved_init(), s32 = gd_saved_init();
            size_t wsz;
            void *ws;
            double bc = 1e30, br = 1e30, bcf = 1e30, brf = 1e30, b32 = 1e30, tf, t, att = -1.0;
            cr.algo = GD_ALGO_RECURRENT;
            cr.checkpoint = 64;
            cc.chunk_size = 64;
            c32 = cc;
            c32.chunk_size = 32;
            wsz = gd_workspace_size(&cr, 1, H, T, D, D);
            if (gd_workspace_size(&cc, 1, H, T, D, D) > wsz) wsz = gd_workspace_size(&cc, 1, H, T, D, D);
            ws = malloc(wsz);
            for (rd = 0; rd < rounds; rd++) {
                t = run_fb(&cc, &sc, ws, r, q, k, v, g, be, dr, dq, dk, dv, dg, db, H, T, D, &tf);
                if (t < bc) bc = t;
                if (tf < bcf) bcf = tf;
                t = run_fb(&cr, &srec, ws, r, q, k, v, g, be, dr, dq, dk, dv, dg, db, H, T, D, &tf);
                if (t < br) br = t;
                if (tf < brf) brf = tf;
                t = run_fb(&c32, &s32, ws, r, q, k, v, g, be, dr, dq, dk, dv, dg, db, H, T, D, &tf);
                if (t < b32) b32 = t;
            }
            if (T <= 4096) {
                float *probs = (float *)malloc((size_t)H * T * T * sizeof(float));
                if (probs) {
                    for (rd = 0; rd < rounds; rd++) {
                        double t0 = now_s();
                        if (tk_attention_forward(r, probs, q, k, v, NULL, 0, NULL, 1, H, T, D) != TK_OK)
                            break;
                        t = now_s() - t0;
                        if (att < 0 || t < att) att = t;
                    }
                    free(probs);
                }
            }
            printf("%5d %6d | %10.1f %10.1f | %10.1f %10.1f %7.2fx | %10.1f %7.2fx | ", D, T,
                   brf * 1e3, br * 1e3, bcf * 1e3, bc * 1e3, br / bc, b32 * 1e3, br / b32);
            if (att >= 0) printf("%14.1f\n", att * 1e3);
            else printf("%14s\n", "n/a");
            fflush(stdout);
            if (D == 128 && T == 4096) speed4k = br / b32;
            gd_saved_free(&sc);
            gd_saved_free(&srec);
            gd_saved_free(&s32);
            free(ws);
            free(q); free(k); free(v); free(dr); free(g); free(be); free(r); free(dq);
            free(dk); free(dv); free(dg); free(db);
        }
    /* decode */
    {
        const int N = 256, D = 128, steps = 20;
        size_t tsz = (size_t)N * H * D * D;
        float *table = (float *)calloc(tsz, sizeof(float));
        float *q = alloc_fill((size_t)N * H * D, -1, 1), *k = alloc_fill((size_t)N * H * D, -1, 1);
        float *v = alloc_fill((size_t)N * H * D, -1, 1), *r = (float *)calloc((size_t)N * H * D, sizeof(float));
        float *g = alloc_fill((size_t)N * H, 0.9f, 1.0f), *be = alloc_fill((size_t)N * H, 0.1f, 0.9f);
        int *slots = (int *)malloc(sizeof(int) * N), i, s;
        gd_config c = gd_config_default();
        double best = 1e30;
        for (i = 0; i < N; i++) slots[i] = (i * 37) % N; /* a permutation: 37 is odd */
        for (s = 0; s < steps; s++) {
            double t0 = now_s(), t;
            if (gd_step(&c, table, N, slots, N, H, D, D, q, k, v, g, be, r) != GD_OK) {
                fprintf(stderr, "gd_step failed\n");
                return 1;
            }
            t = now_s() - t0;
            if (t < best) best = t;
        }
        printf("decode gd_step: %d seqs x %d heads x %dx%d state (%.0f MB table): %.2f ms/step, "
               "%.0f tokens/s (state traffic %.1f GB/s)\n", N, H, D, D,
               tsz * 4.0 / 1048576.0, best * 1e3, N / best, 2.0 * tsz * 4.0 / best / 1e9);
        free(table); free(q); free(k); free(v); free(r); free(g); free(be); free(slots);
    }
    bench_quiet_report(&quiet_, loaded_, sizeof loaded_);
    printf("bench_gdelta: chunked_speedup_4k=%.2f%s\n", speed4k, loaded_);
    return 0;
}
