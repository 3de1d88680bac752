/* bench_gemm.c - tk_sgemm GFLOP/s beside OpenBLAS cblas_sgemm, same run, same data.

   Build: make build/bench/bench_gemm     (-O3 -march=native -fopenmp, -lopenblas)
   Run:   OPENBLAS_THREAD_TIMEOUT=4 build/bench/bench_gemm [rounds] [M,N,K ...]

   Shapes (M,N,K): the GPT-2-small-like products of a trainer with B*T = 4096 tokens,
   C = 384: (4096,384,384) attention projection, (4096,1536,384) MLP up,
   (4096,384,1536) MLP down, (4096,50257,384) LM head, (384,384,4096) a weight
   gradient (K = tokens), and 1024^3. Layouts, row-major, C = op(A) op(B):
     NN  op(A) = A, op(B) = B            e.g. dinp = dout . W
     NT  op(B) = B^T (B stored (N,K))    the layer forward out = inp . W^T
     TN  op(A) = A^T (A stored (K,M))    the weight gradient dW = dout^T . inp
                                         (timed only for shapes with M <= 1024)
   Each (shape, layout, threads) is timed in `rounds` rounds (default 3); a round times
   ours then OpenBLAS (interleaved), each as the best of >= 2 calls and >= 0.25 s;
   the figure is the best over rounds. Thread counts: omp_set_num_threads for tk_sgemm,
   openblas_set_num_threads for OpenBLAS. A pause between the two libraries lets the
   other's worker threads stop spinning (OPENBLAS_THREAD_TIMEOUT=4 shortens OpenBLAS's).

   Peak: the FP32 FMA throughput measured with 16 independent vector FMA chains on 1
   and on 2 threads (the sum of the threads' rates), and the core clock measured from a
   dependent FMA chain (FMA latency 4 cycles on Zen 4 / Skylake-class cores; stated,
   not detected). The probes are timed in thread CPU time (CLOCK_THREAD_CPUTIME_ID),
   best of 5, so other processes on the machine do not lower them.

   Last line: bench_gemm: min_ratio_vs_openblas=R  (ours / OpenBLAS GFLOP/s, the worst
   shape and layout at 2 threads). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#define TENSOR_IMPLEMENTATION
#include "tensor.h"

void openblas_set_num_threads(int);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the calling thread: the peak probes below are not slowed by other
   processes sharing the machine. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void pause_s(double s)
{
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    nanosleep(&ts, NULL);
}

static void set_threads(int nt)
{
#ifdef _OPENMP
    omp_set_num_threads(nt);
#endif
    openblas_set_num_threads(nt);
}

/* ---- peak: FMA throughput and clock ---------------------------------------- */
static volatile float g_sink;

/* Returns FLOP/s of one thread running 16 independent vector FMA chains. */
static double fma_throughput_one(long iters)
{
#if defined(__AVX512F__)
    __m512 x[16], m = _mm512_set1_ps(0.999999f), d = _mm512_set1_ps(1e-7f);
    const int lanes = 16;
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 x[16], m = _mm256_set1_ps(0.999999f), d = _mm256_set1_ps(1e-7f);
    const int lanes = 8;
#endif
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
    long it;
    int j;
    double t0, t1;
    float s = 0.0f, tmp[16];
    for (j = 0; j < 16; j++)
#if defined(__AVX512F__)
        x[j] = _mm512_set1_ps((float)j);
#else
        x[j] = _mm256_set1_ps((float)j);
#endif
    t0 = cpu_s();
    for (it = 0; it < iters; it++) {
#if defined(__AVX512F__)
#define F_(j) x[j] = _mm512_fmadd_ps(x[j], m, d)
#else
#define F_(j) x[j] = _mm256_fmadd_ps(x[j], m, d)
#endif
        F_(0); F_(1); F_(2); F_(3); F_(4); F_(5); F_(6); F_(7);
        F_(8); F_(9); F_(10); F_(11); F_(12); F_(13); F_(14); F_(15);
#undef F_
    }
    t1 = cpu_s();
    for (j = 0; j < 16; j++) {
#if defined(__AVX512F__)
        _mm512_storeu_ps(tmp, x[j]);
#else
        _mm256_storeu_ps(tmp, x[j]);
#endif
        s += tmp[0];
    }
    g_sink = s;
    return (double)iters * 16.0 * lanes * 2.0 / (t1 - t0);
#else
    (void)iters;
    return 0.0;
#endif
}

/* Seconds per dependent FMA (one chain); clock = latency / that. */
static double fma_latency_s(long iters)
{
    float x = 1.0f;
    volatile float mv = 0.999999f, dv = 1e-7f;
    const float m = mv, d = dv;
    long it;
    double t0 = cpu_s(), t1;
    for (it = 0; it < iters; it++) {
        x = fmaf(x, m, d); x = fmaf(x, m, d); x = fmaf(x, m, d); x = fmaf(x, m, d);
    }
    t1 = cpu_s();
    g_sink = x;
    return (t1 - t0) / ((double)iters * 4.0);
}

/* ---- GEMM timing ------------------------------------------------------------ */
typedef struct shape { int M, N, K; } shape;

static float *A_, *B_, *C_;

static void call(int lib, int tA, int tB, const shape *s)
{
    const int lda = tA ? s->M : s->K, ldb = tB ? s->K : s->N, ldc = s->N;
    if (lib == 0) {
        int rc = tk_sgemm(tA, tB, s->M, s->N, s->K, 1.0f, A_, lda, B_, ldb, 0.0f, C_, ldc);
        if (rc != TK_OK) {
            fprintf(stderr, "tk_sgemm failed: %s\n", tk_strerror(rc));
            exit(1);
        }
    } else {
        cblas_sgemm(CblasRowMajor, tA ? CblasTrans : CblasNoTrans,
                    tB ? CblasTrans : CblasNoTrans, s->M, s->N, s->K, 1.0f, A_, lda, B_,
                    ldb, 0.0f, C_, ldc);
    }
}

/* Best seconds per call over >= 2 calls and >= min_s seconds (after one warm-up). */
static double time_best(int lib, int tA, int tB, const shape *s, double min_s)
{
    double best = 1e30, start;
    int n = 0;
    call(lib, tA, tB, s);
    start = now_s();
    while (n < 2 || now_s() - start < min_s) {
        double t0 = now_s(), t;
        call(lib, tA, tB, s);
        t = now_s() - t0;
        if (t < best) best = t;
        n++;
    }
    return best;
}

int main(int argc, char **argv)
{
    static const shape def_shapes[] = {{4096, 384, 384},  {4096, 1536, 384},
                                       {4096, 384, 1536}, {4096, 50257, 384},
                                       {384, 384, 4096},  {1024, 1024, 1024}};
    static const char *layout_name[] = {"NN", "NT", "TN"};
    static const int layout_t[][2] = {{0, 0}, {0, 1}, {1, 0}};
    shape shapes[16];
    int nshapes = 0, rounds = 3, i, l, t, r;
    size_t maxA = 0, maxB = 0, maxC = 0;
    double min_ratio = 1e30, clk, peak1, peak2 = 0.0;
    tk_rng rng;

    if (argc > 1) rounds = atoi(argv[1]);
    if (rounds < 1) rounds = 1;
    for (i = 2; i < argc && nshapes < 16; i++) {
        shape s;
        if (sscanf(argv[i], "%d,%d,%d", &s.M, &s.N, &s.K) == 3 && s.M > 0 && s.N > 0 && s.K > 0)
            shapes[nshapes++] = s;
    }
    if (nshapes == 0) {
        nshapes = (int)(sizeof def_shapes / sizeof def_shapes[0]);
        memcpy(shapes, def_shapes, sizeof def_shapes);
    }
    for (i = 0; i < nshapes; i++) {
        size_t a = (size_t)shapes[i].M * shapes[i].K, b = (size_t)shapes[i].K * shapes[i].N;
        size_t c = (size_t)shapes[i].M * shapes[i].N;
        if (a > maxA) maxA = a;
        if (b > maxB) maxB = b;
        if (c > maxC) maxC = c;
    }
    A_ = (float *)malloc(maxA * sizeof(float));
    B_ = (float *)malloc(maxB * sizeof(float));
    C_ = (float *)malloc(maxC * sizeof(float));
    if (!A_ || !B_ || !C_) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        return 1;
    }
    tk_rng_seed(&rng, 1234, 1);
    for (i = 0; i < (int)maxA; i++) A_[i] = tk_rng_uniform(&rng) - 0.5f;
    for (i = 0; i < (int)maxB; i++) B_[i] = tk_rng_uniform(&rng) - 0.5f;
    memset(C_, 0, maxC * sizeof(float));

    /* machine peak: best of 5 short probes, timed in thread CPU time */
    {
        double lat = 1e30;
        peak1 = 0.0;
        for (r = 0; r < 5; r++) {
            double l = fma_latency_s(5000000L), p = fma_throughput_one(5000000L);
            if (l < lat) lat = l;
            if (p > peak1) peak1 = p;
        }
        clk = 4.0 / lat;
    }
#ifdef _OPENMP
    for (r = 0; r < 5; r++) {
        double tot = 0.0;
#pragma omp parallel num_threads(2) reduction(+ : tot)
        tot += fma_throughput_one(5000000L);
        if (tot > peak2) peak2 = tot;
    }
#else
    peak2 = 2.0 * peak1;
#endif
    printf("bench_gemm: tk_sgemm micro-kernel %s vs OpenBLAS %s (core %s)\n",
           tk_gemm_kernel_name(), OPENBLAS_VERSION, openblas_get_corename());
    printf("clock (dependent FMA chain, latency 4 cycles assumed): %.2f GHz\n", clk * 1e-9);
    printf("measured FP32 FMA peak: 1 thread %.1f GFLOP/s (%.1f FLOP/cycle), 2 threads %.1f GFLOP/s\n",
           peak1 * 1e-9, peak1 / clk, peak2 * 1e-9);
    printf("nominal 2 x clock x 2 FMA x 16 lanes x 2 = %.1f GFLOP/s (assumes two full 512-bit FMA units;\n"
           "  Zen 4 runs a 512-bit FMA on its two 256-bit pipes: 2 x clock x 32 = %.1f GFLOP/s)\n",
           2.0 * clk * 64 * 1e-9, 2.0 * clk * 32 * 1e-9);
    printf("rounds %d, best-of, ours and OpenBLAS interleaved; GFLOP/s = 2MNK / time\n\n", rounds);
    printf("%-20s %-3s %3s %10s %10s %7s %7s\n", "M,N,K", "op", "thr", "tk GF/s",
           "oblas GF/s", "ratio", "%peak");
    fflush(stdout);

    for (i = 0; i < nshapes; i++)
        for (l = 0; l < 3; l++)
            for (t = 1; t <= 2; t++) {
                const shape *s = &shapes[i];
                double flops = 2.0 * s->M * s->N * s->K, best[2] = {1e30, 1e30}, ratio;
                char label[40];
                /* TN (the weight-gradient layout) only for the weight-gradient-like
                   shapes (M <= 1024); NN and NT everywhere */
                if (l == 2 && s->M > 1024) continue;
                set_threads(t);
                for (r = 0; r < rounds; r++) {
                    int lib;
                    for (lib = 0; lib < 2; lib++) {
                        double x = time_best(lib, layout_t[l][0], layout_t[l][1], s, 0.25);
                        if (x < best[lib]) best[lib] = x;
                        pause_s(0.05);
                    }
                }
                ratio = best[1] / best[0];
                if (t == 2 && ratio < min_ratio) min_ratio = ratio;
                snprintf(label, sizeof label, "%d,%d,%d", s->M, s->N, s->K);
                printf("%-20s %-3s %3d %10.1f %10.1f %7.3f %6.1f%%\n", label, layout_name[l], t,
                       flops / best[0] * 1e-9, flops / best[1] * 1e-9, ratio,
                       100.0 * flops / best[0] / (t == 1 ? peak1 : peak2));
                fflush(stdout);
            }
    free(A_);
    free(B_);
    free(C_);
    printf("bench_gemm: min_ratio_vs_openblas=%.3f\n", min_ratio);
    return 0;
}
