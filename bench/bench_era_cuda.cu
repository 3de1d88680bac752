/* bench_era_cuda.cu - the per-step cost of era.h's priors on a GPU (cuda/era.cuh), against
   one attention layer of tensor.h (cuda/tensor.cuh) at the same shape.

   Run by `make gpu-check OUT=dir` (or: nvcc -O3 -std=c++17 -arch=native -I.
   bench/bench_era_cuda.cu -o bench_era_cuda -lcublas -lm). Issue 15's budget: the RPA B(T)
   build per training step at T = 768, R = K = 4, B = 32 within 2% of one attention layer's
   forward + backward. Times, best of 5 after 2 warm-ups (cudaEvents, one stream):
     rpa_build    era_rpa_forward_cuda from device memberships (B,T,R), posmix 0.10, writing
                  the (T,T) bias (what a trainer does every step);
     rpa_fwdbwd   the build plus era_rpa_backward_cuda with dmu (it synchronises once: the
                  scalar tau / pos_beta gradients come back to the host), timed as is;
     era_build    era_era_forward_cuda, R = nb = 32 (per length, not per step: cached);
     attn         tk_attention_forward_cuda + tk_attention_backward_cuda with that shared
                  bias (dbias wanted), B 32, H 6, D 85 (seed 000's d 510 / 6 heads), fp32.
   Arguments (optional): B T H D, for smaller runs (the CPU simulation build uses them).
   Last line: bench_era_cuda: rpa_build_over_attn_768=X rpa_fwdbwd_over_attn_768=Y
   (ratios of times; the issue's goal is X <= 0.02). */
#ifdef ATTNKIT_CUDA_SIM
#include "tests/cuda_sim.h"
#else
#include <cuda_runtime.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define TENSOR_IMPLEMENTATION
#include "tensor.h"
#define ERA_IMPLEMENTATION
#include "era.h"
#include "bench/bench_cuda_util.h"

#define CKT(x)                                                                                 \
    do {                                                                                       \
        int r_ = (x);                                                                          \
        if (r_ != TK_OK) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, tk_strerror(r_));       \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define CKE(x)                                                                                 \
    do {                                                                                       \
        int r_ = (x);                                                                          \
        if (r_ != ERA_OK) {                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, era_strerror(r_));      \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

typedef void (*bench_fn)(void *);

/* best of 5 after 2 warm-ups, milliseconds */
static float best_ms(bench_fn f, void *ctx, cudaStream_t s)
{
    cudaEvent_t a, b;
    float best = 1e30f;
    int it;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (it = 0; it < 7; it++) {
        float ms = 0.0f;
        cudaEventRecord(a, s);
        f(ctx);
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        if (it >= 2 && ms < best) best = ms;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

struct ctx {
    cudaStream_t s;
    int B, T, H, D, R;
    era_rpa_config rc;
    era_rpa_params rp;
    era_rpa_cuda_state rs;
    era_era_config ec;
    era_era_params ep;
    era_era_cuda_state es;
    float *mu, *dmu, *bias, *dbias, *ws;
    float *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
};

static void run_rpa_build(void *p)
{
    struct ctx *c = (struct ctx *)p;
    CKE(era_rpa_forward_cuda(&c->rc, &c->rp, c->mu, c->B, c->T, c->bias, &c->rs, c->ws, (era_stream)c->s));
}
static void run_rpa_fwdbwd(void *p)
{
    struct ctx *c = (struct ctx *)p;
    era_rpa_grads g;
    memset(&g, 0, sizeof g);
    run_rpa_build(p);
    CKE(era_rpa_backward_cuda(&c->rc, &c->rp, &c->rs, c->dbias, c->dmu, &g, c->ws, (era_stream)c->s));
}
static void run_era_build(void *p)
{
    struct ctx *c = (struct ctx *)p;
    CKE(era_era_forward_cuda(&c->ec, &c->ep, c->T, c->bias, &c->es, NULL, (era_stream)c->s));
}
static void run_attn(void *p)
{
    struct ctx *c = (struct ctx *)p;
    CKT(tk_attention_forward_cuda(c->out, c->lse, c->q, c->k, c->v, c->bias, 0, NULL, c->B, c->H,
                                  c->T, c->D, (tk_stream)c->s));
    CKT(tk_attention_backward_cuda(c->dq, c->dk, c->dv, c->dbias, NULL, c->dout, c->out, c->lse,
                                   c->q, c->k, c->v, c->bias, 0, NULL, c->B, c->H, c->T, c->D,
                                   (tk_stream)c->s));
}

int main(int argc, char **argv)
{
    struct ctx c;
    cudaDeviceProp prop;
    float t_build, t_fb, t_era, t_attn, *cen_h, *cen_d = NULL;
    size_t nq;
    memset(&c, 0, sizeof c);
    c.B = argc > 1 ? atoi(argv[1]) : 32;
    c.T = argc > 2 ? atoi(argv[2]) : 768;
    c.H = argc > 3 ? atoi(argv[3]) : 6;
    c.D = argc > 4 ? atoi(argv[4]) : 85;
    c.R = 4;
    if (c.B <= 0 || c.T <= 0 || c.H <= 0 || c.D <= 0 || c.D > 128) {
        fprintf(stderr, "usage: bench_era_cuda [B T H D]\n");
        return 2;
    }
    if (!era_cuda_available()) {
        printf("SKIP: no GPU\n");
        printf("bench_era_cuda: rpa_build_over_attn_768=n/a rpa_fwdbwd_over_attn_768=n/a\n");
        return 0;
    }
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) printf("device: %s\n", prop.name);
    cudaStreamCreate(&c.s);
    c.rc = era_rpa_config_default(c.R);
    c.rc.posmix = 0.10f;
    c.rp = era_rpa_params_default();
    c.rs = era_rpa_cuda_state_init();
    c.ec = era_era_config_default();
    cen_h = (float *)malloc(sizeof(float) * (size_t)c.ec.R);
    era_era_init_centers(c.ec.R, cen_h);
    cudaMalloc((void **)&cen_d, sizeof(float) * (size_t)c.ec.R);
    cudaMemcpy(cen_d, cen_h, sizeof(float) * (size_t)c.ec.R, cudaMemcpyHostToDevice);
    c.ep = era_era_params_default(cen_d);
    c.es = era_era_cuda_state_init();
    c.mu = dmu_fill(c.B, c.T, c.R);
    c.dmu = dfill((size_t)c.B * c.T * c.R, 0.0f, 1);
    c.bias = dfill((size_t)c.T * c.T, 0.0f, 2);
    c.dbias = dfill((size_t)c.T * c.T, 1e-3f, 3);
    if (cudaMalloc((void **)&c.ws, era_rpa_cuda_workspace_size(&c.rc, c.B, c.T)) != cudaSuccess) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    nq = (size_t)c.B * c.H * c.T * c.D;
    c.q = dfill(nq, 1.0f, 4); c.k = dfill(nq, 1.0f, 5); c.v = dfill(nq, 1.0f, 6);
    c.out = dfill(nq, 0.0f, 7); c.dout = dfill(nq, 1e-2f, 8);
    c.dq = dfill(nq, 0.0f, 9); c.dk = dfill(nq, 0.0f, 10); c.dv = dfill(nq, 0.0f, 11);
    c.lse = dfill((size_t)c.B * c.H * c.T, 0.0f, 12);
    t_build = best_ms(run_rpa_build, &c, c.s);
    t_fb = best_ms(run_rpa_fwdbwd, &c, c.s);
    t_era = best_ms(run_era_build, &c, c.s);
    t_attn = best_ms(run_attn, &c, c.s);
    printf("B %d T %d H %d D %d R=K %d: rpa_build %.4f ms, rpa_fwd+bwd %.4f ms, era_build "
           "(R=nb=32) %.4f ms, attention fwd+bwd (shared bias, fp32) %.4f ms\n",
           c.B, c.T, c.H, c.D, c.R, t_build, t_fb, t_era, t_attn);
    printf("bench_era_cuda: rpa_build_over_attn_768=%.4f rpa_fwdbwd_over_attn_768=%.4f\n",
           t_build / t_attn, t_fb / t_attn);
    era_rpa_cuda_state_free(&c.rs);
    era_era_cuda_state_free(&c.es);
    cudaFree(c.mu); cudaFree(c.dmu); cudaFree(c.bias); cudaFree(c.dbias); cudaFree(c.ws);
    cudaFree(c.q); cudaFree(c.k); cudaFree(c.v); cudaFree(c.out); cudaFree(c.dout);
    cudaFree(c.dq); cudaFree(c.dk); cudaFree(c.dv); cudaFree(c.lse); cudaFree(cen_d);
    free(cen_h);
    cudaStreamDestroy(c.s);
    return 0;
}
