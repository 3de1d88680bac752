/* bench_gdelta_cuda.cu - gdelta.h's CUDA path (cuda/gdelta.cuh) on a GPU.

   Build and run: `make gpu-check OUT=dir` (nvcc; runs every bench/bench_*_cuda.cu), or
     nvcc -O3 -std=c++17 -arch=native -I. -isystem /usr/include/stb \
          bench/bench_gdelta_cuda.cu -o bench_gdelta_cuda -lm && ./bench_gdelta_cuda

   Training: gd_forward_cuda + gd_backward_cuda (fp32 SIMT, chunk 64; the only math this
   build has: bf16/tf32 return GD_ENOTSUP) at B=4 T=2K H=16 D=128 and B=1 T=8K H=16 D=128.
   Saved state and workspace are allocated once outside the timing; each call still runs
   its device-side input scan and reads one int back (the API's contract), which is timed.
   Best of 5 after 2 warm-ups, cudaEvent timing on one stream.

   Peer: FLA's chunk_gated_delta_rule (bf16) is not run by this binary (no Python here).
   If a script measured it on the same device in the same session it may pass the times
   in milliseconds through GD_FLA_MS_2K / GD_FLA_MS_8K; the ratio is then FLA time / our
   time (>= 1.0: we are at least as fast). Otherwise the ratio prints n/a.

   Decode: gd_step_cuda for 512 sequences x 16 heads x (128 x 128) fp32 states in a
   512-slot table (slots a fixed random permutation), one token each: tokens/s and the
   achieved state bandwidth (read + write of every state) against a device-to-device
   cudaMemcpy of the same bytes (the measured copy bandwidth; issue target >= 70%).

   Last line: bench_gdelta_cuda: vs_fla_2k=X vs_fla_8k=Y */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define GDELTA_IMPLEMENTATION
#include "gdelta.h"

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)
#define GK(x)                                                                          \
    do {                                                                               \
        int r_ = (x);                                                                  \
        if (r_ != GD_OK) {                                                             \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, gd_strerror(r_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static unsigned long long rng = 0x243F6A8885A308D3ULL;
static float urand(void) /* [0, 1) */
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (float)((double)((rng * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0);
}

static float *dfill(size_t n, float lo, float hi)
{
    float *h = (float *)malloc(n * sizeof(float)), *d = NULL;
    size_t i;
    if (!h) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (i = 0; i < n; i++) h[i] = lo + (hi - lo) * urand();
    CK(cudaMalloc((void **)&d, n * sizeof(float)));
    CK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

/* best fwd and fwd+bwd milliseconds */
static void train_case(int B, int T, int H, int D, cudaStream_t st, double *fwd_ms, double *fb_ms)
{
    gd_config cfg = gd_config_default();
    size_t nqk = (size_t)B * H * T * D, ng = (size_t)B * H * T, wsn;
    float *q = dfill(nqk, -1, 1), *k = dfill(nqk, -1, 1), *v = dfill(nqk, -1, 1);
    float *g = dfill(ng, 0.9f, 1.0f), *be = dfill(ng, 0.1f, 0.9f), *dr = dfill(nqk, -1, 1);
    float *r, *dq, *dk, *dv, *dg, *db;
    void *ws;
    gd_saved sv = gd_saved_init();
    cudaEvent_t e0, e1, e2;
    int it;
    cfg.chunk_size = 64;
    CK(cudaMalloc((void **)&r, nqk * sizeof(float)));
    CK(cudaMalloc((void **)&dq, nqk * sizeof(float)));
    CK(cudaMalloc((void **)&dk, nqk * sizeof(float)));
    CK(cudaMalloc((void **)&dv, nqk * sizeof(float)));
    CK(cudaMalloc((void **)&dg, ng * sizeof(float)));
    CK(cudaMalloc((void **)&db, ng * sizeof(float)));
    CK(cudaMemset(dq, 0, nqk * sizeof(float)));
    CK(cudaMemset(dk, 0, nqk * sizeof(float)));
    CK(cudaMemset(dv, 0, nqk * sizeof(float)));
    CK(cudaMemset(dg, 0, ng * sizeof(float)));
    CK(cudaMemset(db, 0, ng * sizeof(float)));
    wsn = gd_workspace_size_cuda(&cfg, B, H, T, D, D);
    CK(cudaMalloc(&ws, wsn));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
    *fwd_ms = *fb_ms = 1e30;
    for (it = 0; it < 7; it++) {
        float a, b;
        CK(cudaEventRecord(e0, st));
        GK(gd_forward_cuda(&cfg, r, NULL, q, k, v, g, be, NULL, B, H, T, D, D, &sv, ws, st));
        CK(cudaEventRecord(e1, st));
        GK(gd_backward_cuda(&cfg, &sv, dq, dk, dv, dg, db, NULL, dr, NULL, q, k, v, g, be, NULL,
                            B, H, T, D, D, ws, st));
        CK(cudaEventRecord(e2, st));
        CK(cudaEventSynchronize(e2));
        CK(cudaEventElapsedTime(&a, e0, e1));
        CK(cudaEventElapsedTime(&b, e0, e2));
        if (it >= 2) {
            if (a < *fwd_ms) *fwd_ms = a;
            if (b < *fb_ms) *fb_ms = b;
        }
    }
    printf("train B=%d T=%-5d H=%d D=%d fp32 chunk 64: fwd %.3f ms, fwd+bwd %.3f ms "
           "(saved %.1f MB, workspace %.1f MB)\n", B, T, H, D, *fwd_ms, *fb_ms,
           (double)sv.cap / 1e6, (double)wsn / 1e6);
    gd_saved_free(&sv);
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(g); cudaFree(be); cudaFree(dr);
    cudaFree(r); cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dg); cudaFree(db);
    cudaFree(ws);
    cudaEventDestroy(e0); cudaEventDestroy(e1); cudaEventDestroy(e2);
}

static void step_case(cudaStream_t st)
{
    const int N = 512, H = 16, D = 128, NS = 512;
    gd_config cfg = gd_config_default();
    size_t state_bytes = (size_t)N * H * D * D * sizeof(float);
    float *table = dfill((size_t)NS * H * D * D, -0.1f, 0.1f), *copy;
    float *q = dfill((size_t)N * H * D, -1, 1), *k = dfill((size_t)N * H * D, -1, 1);
    float *v = dfill((size_t)N * H * D, -1, 1), *g = dfill((size_t)N * H, 0.9f, 1.0f);
    float *be = dfill((size_t)N * H, 0.1f, 0.9f), *r;
    int *hs = (int *)malloc(N * sizeof(int)), *ds, i, it;
    cudaEvent_t e0, e1;
    float ms_step = 1e30f, ms_copy = 1e30f, t;
    for (i = 0; i < N; i++) hs[i] = i;
    for (i = N - 1; i > 0; i--) {
        int j = (int)(urand() * (i + 1)), x = hs[i];
        hs[i] = hs[j];
        hs[j] = x;
    }
    CK(cudaMalloc((void **)&ds, N * sizeof(int)));
    CK(cudaMemcpy(ds, hs, N * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&r, (size_t)N * H * D * sizeof(float)));
    CK(cudaMalloc((void **)&copy, state_bytes));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (it = 0; it < 12; it++) {
        CK(cudaEventRecord(e0, st));
        GK(gd_step_cuda(&cfg, table, NS, ds, N, H, D, D, q, k, v, g, be, r, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= 2 && t < ms_step) ms_step = t;
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(copy, table, state_bytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= 2 && t < ms_copy) ms_copy = t;
    }
    {
        double bw = 2.0 * (double)state_bytes / (ms_step * 1e-3) / 1e9;
        double cbw = 2.0 * (double)state_bytes / (ms_copy * 1e-3) / 1e9;
        printf("step N=%d H=%d D=%d fp32: %.3f ms/step, %.0f tokens/s, state %.1f GB/s "
               "(read+write) vs copy %.1f GB/s: %.0f%% (includes the input scan and its sync)\n",
               N, H, D, ms_step, N / (ms_step * 1e-3), bw, cbw, 100.0 * bw / cbw);
    }
    free(hs);
    cudaFree(table); cudaFree(copy); cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(g);
    cudaFree(be); cudaFree(r); cudaFree(ds);
    cudaEventDestroy(e0); cudaEventDestroy(e1);
}

static void ratio(char *buf, size_t n, const char *env, double ours)
{
    const char *s = getenv(env);
    double peer = s ? atof(s) : 0.0;
    if (peer > 0.0) snprintf(buf, n, "%.2f", peer / ours);
    else snprintf(buf, n, "n/a");
}

int main(void)
{
    cudaStream_t st;
    cudaDeviceProp prop;
    double f2, fb2, f8, fb8;
    char r2[32], r8[32];
    if (!gd_cuda_available()) {
        printf("bench_gdelta_cuda: no GPU\n");
        printf("bench_gdelta_cuda: vs_fla_2k=n/a vs_fla_8k=n/a\n");
        return 0;
    }
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("bench_gdelta_cuda: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    CK(cudaStreamCreate(&st));
    train_case(4, 2048, 16, 128, st, &f2, &fb2);
    train_case(1, 8192, 16, 128, st, &f8, &fb8);
    step_case(st);
    ratio(r2, sizeof r2, "GD_FLA_MS_2K", fb2);
    ratio(r8, sizeof r8, "GD_FLA_MS_8K", fb8);
    if (!getenv("GD_FLA_MS_2K") && !getenv("GD_FLA_MS_8K"))
        printf("peer: FLA chunk_gated_delta_rule not measured in this run (n/a)\n");
    CK(cudaStreamDestroy(st));
    printf("bench_gdelta_cuda: vs_fla_2k=%s vs_fla_8k=%s\n", r2, r8);
    return 0;
}
