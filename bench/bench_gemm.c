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

   Peak: bench_peak() of bench/bench_util.h, the FP32 FMA throughput of enough
   independent FMA chains for this ISA (24 zmm / 12 ymm) on 1 and on 2 threads, and the
   clock from a dependent integer add chain; timed in thread CPU time, best of 5, so other
   processes do not lower them. "%peak" is against that measured peak.
   The share of the machine other processes used during the run is printed; a loaded run
   gets "(loaded: ...)" after its last line's figure.

   Last line: bench_gemm: min_ratio_vs_openblas=R  (ours / OpenBLAS GFLOP/s, the worst
   shape and layout over 1 AND 2 threads). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cblas.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "bench/bench_util.h"
#define TENSOR_IMPLEMENTATION
#include "tensor.h"

void openblas_set_num_threads(int);

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
    bench_quiet quiet;
    char loaded[96];
    tk_rng rng;

    bench_match_isa_env(argv);
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
        double fpc1, fpc2, ghz;
        peak1 = bench_peak(1, &fpc1, &ghz);
        peak2 = bench_peak(2, &fpc2, NULL);
        clk = ghz * 1e9;
        printf("bench_gemm: tk_sgemm micro-kernel %s (%s build) vs OpenBLAS %s (core %s)\n",
               tk_gemm_kernel_name(), bench_isa(), OPENBLAS_VERSION, openblas_get_corename());
#if defined(__AVX512F__)
        {
            char core[64];
            if (!bench_openblas_avx512(core, sizeof core))
                printf("NOTE: OpenBLAS runs its %s kernels here, not AVX-512 ones (it does not know this "
                   "CPU): rerun with OPENBLAS_CORETYPE=SkylakeX for an AVX-512 peer\n",
                       openblas_get_corename());
        }
#endif
        printf("clock (dependent integer add chain): %.2f GHz\n", clk * 1e-9);
        printf("measured FP32 FMA peak (%s): 1 thread %.1f GFLOP/s (%.1f FLOP/cycle), "
               "2 threads %.1f GFLOP/s (%.1f FLOP/cycle/core)\n",
               bench_isa(), peak1 * 1e-9, fpc1, peak2 * 1e-9, fpc2);
    }
    bench_quiet_begin(&quiet);
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
                if (ratio < min_ratio) min_ratio = ratio;
                snprintf(label, sizeof label, "%d,%d,%d", s->M, s->N, s->K);
                printf("%-20s %-3s %3d %10.1f %10.1f %7.3f %6.1f%%\n", label, layout_name[l], t,
                       flops / best[0] * 1e-9, flops / best[1] * 1e-9, ratio,
                       100.0 * flops / best[0] / (t == 1 ? peak1 : peak2));
                fflush(stdout);
            }
    free(A_);
    free(B_);
    free(C_);
    bench_quiet_report(&quiet, loaded, sizeof loaded);
    printf("bench_gemm: min_ratio_vs_openblas=%.3f%s\n", min_ratio, loaded);
    return 0;
}
