/* bench_ops.c - tensor.h's training ops at the WT2 trainer's configs S and M.

   Build: make build/bench/bench_ops      (-O3 -march=native -fopenmp, -lopenblas)
   Run:   OMP_NUM_THREADS=2 OPENBLAS_THREAD_TIMEOUT=4 build/bench/bench_ops [rounds] [skip_head]
          (rounds default 3; skip_head 1 leaves out the 50257-wide head GEMMs)

   Configs (issue 8): S d 128, 4 layers, 4 heads, context 256, batch 8; M d 384,
   6 layers, 6 heads, context 512, batch 4; vocab 50257, tied head. N = B*T = 2048.

   1. Attention forward + backward (B,H,T,D of S and M, no bias, and M with a shared
      bias): tensor.h now against the previous implementation (full T x T products per
      (b,h) through tk_sgemm, kept below as a static reference copy, same GEMM).
   2. Cross-entropy of the head, N = 512 rows x V = 50257: the in-place pair against
      the two-buffer pair (tk_crossentropy_forward into probs, zeroing dlogits,
      tk_crossentropy_backward), which is what a trainer needed before.
   3. Every tk_sgemm shape of a training step (per layer: qkv, attention projection,
      MLP up/down, forward NT, input gradient NN, weight gradient TN; the tied head;
      attention per (b,h), full and as the blocked calls of a 64-row block) against
      OpenBLAS cblas_sgemm (openblas_set_num_threads(2)), GFLOP/s, best of rounds.
   4. Memory-bound ops (LayerNorm, GELU, residual, AdamW, embedding backward) in GB/s
      of the bytes they must move, beside memcpy of the same byte count.
   Timings: wall clock, best of `rounds` calls (the machine is shared; ratios compare
   runs of the same process, interleaved).
   Last line: bench_ops: attn_speedup=X ce_speedup=Y min_gemm_ratio_vs_openblas=Z
   (X: the smallest old/new time over the attention cases; Y: old/new time of the CE
   pair; Z: the smallest tk_sgemm / OpenBLAS GFLOP/s over the shapes). */
#define _POSIX_C_SOURCE 200809L
#include "bench/bench_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#define TENSOR_IMPLEMENTATION
#include "tensor.h"

void openblas_set_num_threads(int num_threads);

static int g_rounds = 3;
static int g_threads = 1;

static void fill(float *x, size_t n, float scale, unsigned seed)
{
    tk_rng r;
    tk_rng_seed(&r, seed, 7);
    tk_init_normal(x, n, 0.0f, scale, &r);
}

/* ------------------------------------------------------------ reference attention */
/* The previous tk_attention_forward/backward (full T x T per (b,h)), no bias/temp
   handling beyond a shared bias in the forward: the speed reference. */
static void ref_attn_fwd(float *out, float *probs, const float *q, const float *k,
                         const float *v, const float *bias, int B, int H, int T, int D)
{
    size_t TD = (size_t)T * D, TT = (size_t)T * T;
    int bh;
    float alpha = 1.0f / sqrtf((float)D);
#pragma omp parallel for schedule(static)
    for (bh = 0; bh < B * H; bh++) {
        float *P = probs + bh * TT;
        int i;
        tk_sgemm(0, 1, T, T, D, alpha, q + bh * TD, D, k + bh * TD, D, 0.0f, P, T);
        for (i = 0; i < T; i++) {
            float *row = P + (size_t)i * T;
            int j;
            if (bias)
                for (j = 0; j <= i; j++) row[j] += bias[(size_t)i * T + j];
            tk__softmax_row(row, row, i + 1);
            for (j = i + 1; j < T; j++) row[j] = 0.0f;
        }
        tk_sgemm(0, 0, T, D, T, 1.0f, P, T, v + bh * TD, D, 0.0f, out + bh * TD, D);
    }
}
static void ref_attn_bwd(float *dq, float *dk, float *dv, const float *dout,
                         const float *probs, const float *q, const float *k, const float *v,
                         int B, int H, int T, int D, float *scratch /* nthreads*T*T */)
{
    size_t TD = (size_t)T * D, TT = (size_t)T * T;
    int h;
    float alpha = 1.0f / sqrtf((float)D);
#pragma omp parallel for schedule(static)
    for (h = 0; h < H; h++) {
        int tid = 0, b;
        float *dS;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        dS = scratch + (size_t)tid * TT;
        for (b = 0; b < B; b++) {
            size_t bh = (size_t)b * H + h;
            const float *P = probs + bh * TT;
            int i;
            tk_sgemm(0, 1, T, T, D, 1.0f, dout + bh * TD, D, v + bh * TD, D, 0.0f, dS, T);
            for (i = 0; i < T; i++) {
                const float *p = P + (size_t)i * T;
                float *d = dS + (size_t)i * T, dot = 0.0f;
                int j;
                for (j = 0; j <= i; j++) dot += p[j] * d[j];
                for (j = 0; j <= i; j++) d[j] = p[j] * (d[j] - dot);
                for (j = i + 1; j < T; j++) d[j] = 0.0f;
            }
            tk_sgemm(1, 0, T, D, T, 1.0f, P, T, dout + bh * TD, D, 1.0f, dv + bh * TD, D);
            tk_sgemm(0, 0, T, D, T, alpha, dS, T, k + bh * TD, D, 1.0f, dq + bh * TD, D);
            tk_sgemm(1, 0, T, D, T, alpha, dS, T, q + bh * TD, D, 1.0f, dk + bh * TD, D);
        }
    }
}

static double bench_attention(const char *name, int B, int H, int T, int D, int with_bias)
{
    size_t n = (size_t)B * H * T * D, np = (size_t)B * H * T * T;
    float *q = (float *)xmalloc(n * 4), *k = (float *)xmalloc(n * 4), *v = (float *)xmalloc(n * 4);
    float *o = (float *)xmalloc(n * 4), *p = (float *)xmalloc(np * 4);
    float *dout = (float *)xmalloc(n * 4), *dq = (float *)xmalloc(n * 4);
    float *dk = (float *)xmalloc(n * 4), *dv = (float *)xmalloc(n * 4);
    float *bias = with_bias ? (float *)xmalloc((size_t)T * T * 4) : NULL;
    float *scratch = (float *)xmalloc((size_t)omp_get_max_threads() * T * T * 4);
    double bo_f = 1e30, bo_b = 1e30, bn_f = 1e30, bn_b = 1e30, flops, sp;
    int r;
    fill(q, n, 1, 1); fill(k, n, 1, 2); fill(v, n, 1, 3); fill(dout, n, 1, 4);
    if (bias) fill(bias, (size_t)T * T, 1, 5);
    memset(dq, 0, n * 4); memset(dk, 0, n * 4); memset(dv, 0, n * 4);
    for (r = 0; r < g_rounds + 1; r++) { /* first round warms up, untimed */
        double t0 = now_s(), t1, t2, t3, t4;
        ref_attn_fwd(o, p, q, k, v, bias, B, H, T, D);
        t1 = now_s();
        ref_attn_bwd(dq, dk, dv, dout, p, q, k, v, B, H, T, D, scratch);
        t2 = now_s();
        tk_attention_forward(o, p, q, k, v, bias, 0, NULL, B, H, T, D);
        t3 = now_s();
        tk_attention_backward(dq, dk, dv, NULL, NULL, dout, p, q, k, v, 0, NULL, B, H, T, D);
        t4 = now_s();
        if (r == 0) continue;
        if (t1 - t0 < bo_f) bo_f = t1 - t0;
        if (t2 - t1 < bo_b) bo_b = t2 - t1;
        if (t3 - t2 < bn_f) bn_f = t3 - t2;
        if (t4 - t3 < bn_b) bn_b = t4 - t3;
    }
    /* causal model FLOPs: fwd 2 GEMMs over the lower triangle, bwd 4 */
    flops = 2.0 * B * H * (double)T * (T + 1) / 2.0 * D;
    sp = (bo_f + bo_b) / (bn_f + bn_b);
    printf("  %-22s fwd %8.2f ms -> %8.2f ms (%5.1f GFLOP/s causal)  bwd %8.2f ms -> %8.2f ms"
           " (%5.1f GFLOP/s)  speedup %.2fx\n",
           name, 1e3 * bo_f, 1e3 * bn_f, 2 * flops / bn_f * 1e-9, 1e3 * bo_b, 1e3 * bn_b,
           4 * flops / bn_b * 1e-9, sp);
    free(q); free(k); free(v); free(o); free(p); free(dout); free(dq); free(dk); free(dv);
    free(bias); free(scratch);
    return sp;
}

/* ------------------------------------------------------------ cross-entropy */
static double bench_ce(int N, int V)
{
    size_t nv = (size_t)N * V;
    float *logits = (float *)xmalloc(nv * 4), *work = (float *)xmalloc(nv * 4);
    float *probs = (float *)xmalloc(nv * 4), *dl = (float *)xmalloc(nv * 4);
    float *losses = (float *)xmalloc((size_t)N * 4), *ce = (float *)xmalloc((size_t)N * 4);
    int *y = (int *)xmalloc((size_t)N * sizeof(int)), i, r;
    double bo = 1e30, bn = 1e30, sp;
    float mce, ml;
    fill(logits, nv, 2, 9);
    for (i = 0; i < N; i++) y[i] = (i * 7919) % V;
    for (r = 0; r < g_rounds + 1; r++) { /* interleaved; round 0 warms up */
        double t0, t1, t2;
        memcpy(work, logits, nv * 4); /* the head GEMM's fresh output, both paths */
        t0 = now_s();
        tk_crossentropy_forward(probs, losses, &mce, &ml, work, y, N, V, 0.015f);
        memset(dl, 0, nv * 4);
        tk_crossentropy_backward(dl, probs, y, N, V, 0.015f, 1.0f / N);
        t1 = now_s() - t0;
        memcpy(work, logits, nv * 4);
        t0 = now_s();
        tk_crossentropy_forward_inplace(work, losses, ce, y, N, V, 0.015f);
        tk_crossentropy_backward_inplace(work, y, N, V, 0.015f, 1.0f / N);
        t2 = now_s() - t0;
        if (r == 0) continue;
        if (t1 < bo) bo = t1;
        if (t2 < bn) bn = t2;
    }
    sp = bo / bn;
    printf("  CE fwd+bwd N=%d V=%d: two-buffer %.2f ms, in-place %.2f ms (%.2f GB/s of the "
           "8 B/elem read+write, twice), speedup %.2fx\n",
           N, V, 1e3 * bo, 1e3 * bn, 16.0 * nv / bn * 1e-9, sp);
    free(logits); free(work); free(probs); free(dl); free(losses); free(ce); free(y);
    return sp;
}

/* ------------------------------------------------------------ GEMM shapes */
typedef struct {
    const char *what;
    int tA, tB, M, N, K;
} gshape;

static double time_gemm(int lib, const gshape *g, const float *A, const float *Bm, float *C)
{
    double best = 1e30, start = now_s();
    int r, reps = g_rounds < 2 ? 2 : g_rounds;
    int lda = g->tA ? g->M : g->K, ldb = g->tB ? g->K : g->N;
    /* best of >= reps calls and >= 0.15 s (the machine is shared) */
    for (r = 0; r < reps + 1 || now_s() - start < 0.15; r++) {
        double t0 = now_s(), t;
        if (lib == 0)
            tk_sgemm(g->tA, g->tB, g->M, g->N, g->K, 1.0f, A, lda, Bm, ldb, 0.0f, C, g->N);
        else
            cblas_sgemm(CblasRowMajor, g->tA ? CblasTrans : CblasNoTrans,
                        g->tB ? CblasTrans : CblasNoTrans, g->M, g->N, g->K, 1.0f, A, lda,
                        Bm, ldb, 0.0f, C, g->N);
        t = now_s() - t0;
        if (r > 0 && t < best) best = t;
    }
    return best;
}

static double bench_gemm_shapes(const char *cfg, int N, int C, int T, int D, int V,
                                int with_head)
{
    gshape gs[32];
    int ng = 0, i;
    double worst = 1e30;
#define ADD(w, a, b, m, n_, k_)                                                          \
    do {                                                                               \
        gs[ng].what = w; gs[ng].tA = a; gs[ng].tB = b;                                 \
        gs[ng].M = m; gs[ng].N = n_; gs[ng].K = k_; ng++;                              \
    } while (0)
    ADD("qkv fwd  x Wqkv^T", 0, 1, N, 3 * C, C);
    ADD("qkv dinp dout Wqkv", 0, 0, N, C, 3 * C);
    ADD("qkv dW   dout^T x", 1, 0, 3 * C, C, N);
    ADD("proj fwd", 0, 1, N, C, C);
    ADD("proj dinp", 0, 0, N, C, C);
    ADD("proj dW", 1, 0, C, C, N);
    ADD("fc fwd (4C)", 0, 1, N, 4 * C, C);
    ADD("fc dinp", 0, 0, N, C, 4 * C);
    ADD("fc dW", 1, 0, 4 * C, C, N);
    ADD("fcproj fwd", 0, 1, N, C, 4 * C);
    ADD("fcproj dinp", 0, 0, N, 4 * C, C);
    ADD("fcproj dW", 1, 0, C, 4 * C, N);
    ADD("attn QK^T (full)", 0, 1, T, T, D);
    ADD("attn PV (full)", 0, 0, T, D, T);
    ADD("attn blk QK^T 64xT", 0, 1, 64, T, D);
    ADD("attn blk PV 64xT", 0, 0, 64, D, T);
    ADD("attn bwd dV P^T dO", 1, 0, T, D, 128);
    ADD("attn bwd dQ dS K", 0, 0, 128, D, T);
    if (with_head) {
        ADD("head fwd x wte^T", 0, 1, N, V, C);
        ADD("head dinp dl wte", 0, 0, N, C, V);
        ADD("head dW dl^T x", 1, 0, V, C, N);
    }
#undef ADD
    printf("  %s (N=%d C=%d T=%d D=%d)          tk_sgemm  OpenBLAS   ratio"
           "  (GFLOP/s, %d thread(s))\n",
           cfg, N, C, T, D, g_threads);
    for (i = 0; i < ng; i++) {
        const gshape *g = &gs[i];
        size_t na = (size_t)g->M * g->K, nb = (size_t)g->K * g->N, nc = (size_t)g->M * g->N;
        float *A = (float *)xmalloc(na * 4), *Bm = (float *)xmalloc(nb * 4);
        float *Cm = (float *)xmalloc(nc * 4);
        double fl = 2.0 * g->M * g->N * (double)g->K, to, tb, ratio;
        fill(A, na, 1, 11); fill(Bm, nb, 1, 12); memset(Cm, 0, nc * 4);
        to = time_gemm(0, g, A, Bm, Cm);
        tb = time_gemm(1, g, A, Bm, Cm);
        ratio = tb / to;
        if (ratio < worst) worst = ratio;
        printf("    %-22s %c%c %6d %6d %6d  %7.1f  %7.1f  %6.3f\n", g->what, g->tA ? 'T' : 'N',
               g->tB ? 'T' : 'N', g->M, g->N, g->K, fl / to * 1e-9, fl / tb * 1e-9, ratio);
        free(A); free(Bm); free(Cm);
    }
    return worst;
}

/* ------------------------------------------------------------ memory-bound ops */
static double g_memcpy_gbs(size_t bytes, float *a, float *b)
{
    double best = 1e30;
    int r;
    for (r = 0; r < g_rounds + 1; r++) {
        double t0 = now_s(), t;
        memcpy(a, b, bytes / 2);
        t = now_s() - t0;
        if (r > 0 && t < best) best = t;
    }
    return (double)bytes / best * 1e-9;
}
#define TIME_OP(label, bytes, call)                                                     \
    do {                                                                               \
        double best_ = 1e30, gbs_, mc_;                                                \
        int r_;                                                                        \
        for (r_ = 0; r_ < g_rounds + 1; r_++) {                                        \
            double t0_ = now_s(), t_;                                                  \
            call;                                                                      \
            t_ = now_s() - t0_;                                                        \
            if (r_ > 0 && t_ < best_) best_ = t_;                                      \
        }                                                                              \
        gbs_ = (double)(bytes) / best_ * 1e-9;                                         \
        mc_ = g_memcpy_gbs((size_t)(bytes), cpa, cpb);                                 \
        printf("    %-26s %8.3f ms  %6.1f GB/s  memcpy same bytes %6.1f GB/s  (%.2f)\n", \
               label, 1e3 * best_, gbs_, mc_, gbs_ / mc_);                             \
    } while (0)

static void bench_memops(int N, int C, int V, size_t nparams)
{
    size_t nc = (size_t)N * C, n4 = nc * 4;
    size_t big = nparams * 28 > n4 * 16 ? nparams * 28 : n4 * 16; /* most bytes moved */
    float *x = (float *)xmalloc(n4 * 4), *y = (float *)xmalloc(n4 * 4);
    float *dx = (float *)xmalloc(n4 * 4), *dy = (float *)xmalloc(n4 * 4);
    float *w = (float *)xmalloc((size_t)C * 4), *bb = (float *)xmalloc((size_t)C * 4);
    float *dw = (float *)xmalloc((size_t)C * 4), *db = (float *)xmalloc((size_t)C * 4);
    float *mean = (float *)xmalloc((size_t)N * 4), *rstd = (float *)xmalloc((size_t)N * 4);
    float *p = (float *)xmalloc(nparams * 4), *g = (float *)xmalloc(nparams * 4);
    float *m = (float *)xmalloc(nparams * 4), *vv = (float *)xmalloc(nparams * 4);
    float *dwte = (float *)xmalloc((size_t)V * C * 4);
    float *cpa = (float *)xmalloc(big / 2 + 64), *cpb = (float *)xmalloc(big / 2 + 64);
    float *dwpe = (float *)xmalloc((size_t)256 * C * 4);
    int *ids = (int *)xmalloc((size_t)N * sizeof(int)), i;
    tk_adamw_config cfg = tk_adamw_config_default();
    fill(x, n4, 1, 21); fill(y, n4, 1, 22); fill(dy, n4, 1, 23); memset(dx, 0, n4 * 4);
    fill(w, (size_t)C, 1, 24); fill(bb, (size_t)C, 1, 25);
    memset(dw, 0, (size_t)C * 4); memset(db, 0, (size_t)C * 4);
    fill(p, nparams, 1, 26); fill(g, nparams, 1, 27);
    memset(m, 0, nparams * 4); memset(vv, 0, nparams * 4);
    memset(dwte, 0, (size_t)V * C * 4);
    memset(cpa, 0, big / 2); memset(cpb, 1, big / 2);
    memset(dwpe, 0, (size_t)256 * C * 4);
    for (i = 0; i < N; i++) ids[i] = (i * 104729) % V;
    printf("  memory-bound ops, N=%d C=%d (GB/s of the bytes each must move)\n", N, C);
    TIME_OP("layernorm fwd", nc * 8, tk_layernorm_forward(y, mean, rstd, x, w, bb, N, C, 1e-5f));
    TIME_OP("layernorm bwd", nc * 16,
            tk_layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C));
    TIME_OP("gelu fwd (4C)", n4 * 8, tk_gelu_forward(y, x, n4));
    TIME_OP("gelu bwd (4C)", n4 * 16, tk_gelu_backward(dx, x, dy, n4));
    TIME_OP("residual fwd", nc * 12, tk_residual_forward(y, x, dy, nc));
    TIME_OP("residual bwd", nc * 20, tk_residual_backward(dx, y, dy, nc));
    TIME_OP("embedding bwd (dwte,dwpe)", nc * 12,
            tk_embedding_backward(dwte, dwpe, dy, ids, N / 256 > 0 ? N / 256 : 1,
                                  N / 256 > 0 ? 256 : N, C, V));
    TIME_OP("adamw (all params)", nparams * 28,
            tk_adamw_update(p, g, m, vv, nparams, &cfg, 1));
    free(x); free(y); free(dx); free(dy); free(w); free(bb); free(dw); free(db); free(mean);
    free(rstd); free(p); free(g); free(m); free(vv); free(dwte); free(cpa); free(cpb); free(dwpe);
    free(ids);
}

int main(int argc, char **argv)
{
    bench_quiet quiet_;
    char loaded_[96];
    double attn_sp = 1e30, sp, ce_sp, gr = 1e30, r;
    int skip_head = 0, nt = 1;
    bench_match_isa_env(argv);
    if (argc > 1) g_rounds = atoi(argv[1]) > 0 ? atoi(argv[1]) : 3;
    if (argc > 2) skip_head = atoi(argv[2]) != 0;
#ifdef _OPENMP
    nt = omp_get_max_threads();
#endif
    g_threads = nt;
    openblas_set_num_threads(nt);
    printf("bench_ops: %d thread(s), %d rounds, GEMM kernel %s\n", nt, g_rounds,
           tk_gemm_kernel_name());
    bench_quiet_begin(&quiet_);
    printf("attention forward+backward, previous (full T x T) -> now (row blocks)\n");
    sp = bench_attention("S B8 H4 T256 D32", 8, 4, 256, 32, 0);
    if (sp < attn_sp) attn_sp = sp;
    sp = bench_attention("M B4 H6 T512 D64", 4, 6, 512, 64, 0);
    if (sp < attn_sp) attn_sp = sp;
    sp = bench_attention("M + shared bias", 4, 6, 512, 64, 1);
    if (sp < attn_sp) attn_sp = sp;
    printf("cross-entropy of the head\n");
    ce_sp = bench_ce(512, 50257);
    printf("GEMM shapes of a training step\n");
    r = bench_gemm_shapes("S", 2048, 128, 256, 32, 50257, !skip_head);
    if (r < gr) gr = r;
    r = bench_gemm_shapes("M", 2048, 384, 512, 64, 50257, !skip_head);
    if (r < gr) gr = r;
    printf("memory-bound ops\n");
    bench_memops(2048, 384, 50257, (size_t)50257 * 384 + 6 * (size_t)12 * 384 * 384);
    bench_quiet_report(&quiet_, loaded_, sizeof loaded_);
    printf("bench_ops: attn_speedup=%.3f ce_speedup=%.3f min_gemm_ratio_vs_openblas=%.3f%s\n",
           attn_sp, ce_sp, gr, loaded_);
    return 0;
}
