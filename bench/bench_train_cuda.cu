/* bench_train_cuda.cu - training throughput of the examples' model (examples/common/model.h) on
   a GPU, issue 16's Performance section: tokens/s and MFU of mdl_create_on(..., MDL_DEVICE_CUDA)
   beside PyTorch (bench/torch_train.py --device cuda) on the same device in the same run.

   Run by `make gpu-check OUT=dir` (or `make build/cuda/bench_train_cuda`, or by hand:
   nvcc -O3 -std=c++17 -arch=native -I. -isystem /usr/include/stb bench/bench_train_cuda.cu
   -o bench_train_cuda -lcublas -lgomp -lm -llzma -lpthread). This file is the whole program:
   it includes examples/common/impl.c (every header's implementation, so under nvcc every op
   the model calls has its CUDA body), layers.c, model.c and, for trn_preset("paper"),
   train.c with what it links (bpe.c, data.c, ckpt.c: hence -llzma).

   Models (random tokens, one device, the default stream):
     G  the GPT-2-small-shaped softmax baseline: d 768, 12 layers, 12 heads (D 64), context
        1024, GELU MLP 4x, LayerNorm, learned positions, tied head, vocab 50257, dropout 0,
        batch 8 (--batch N);
     paper  trn_preset("paper")'s model (seed 000: RPA prior, fuzzy MoE, residual and value
        gates, dropout 0.09), timed like the others: the model step with the preset's loss
        options (smoothing, entropy floor, MoE load balance; no controllers). Were the device
        model to refuse it, mdl_device_supports' reason is printed (for the whole preset and
        for each mechanism alone) and its figures are n/a;
     P  the plain stand-in for the paper preset: its shape (d 510, 12 layers, 6 heads (D 85,
        so the attention runs its fp32 SIMT path: the tensor-core path wants D % 16 == 0),
        context 768, batch 32, FFN 2x) with prior, MoE, gates and dropout off (dropout 0
        as in the peer). It is NOT the paper recipe, and it is labelled so wherever it is
        printed.
   One step = mdl_zero_grad, mdl_forward (train, targets), mdl_backward, tk_adamw_update per
   tensor (lr 3e-4, betas 0.9/0.95, eps 1e-8, wd 0.1 where the tensor's decay flag is set) on
   the device buffers (parameters, gradients, both moments all fp32 in device memory). Each
   model: `--warmup` untimed steps (default 3), then `--steps` timed steps (default 10), each
   bracketed by cudaEvents (whole step, and forward (with zero_grad) / backward / AdamW);
   tokens/s = B*T / the median step. Every forward synchronises once (its loss comes to the
   host), which is inside the timed step, as in a real trainer. When the last warm-up step
   shows the timed steps would take more than 30% (G) / 20% (P) of the budget (below),
   fewer are timed (at least 3) and a line says so.
   Precision: --precision bf16 (default) | tf32 | fp32 sets tk_cuda_set_math: the GEMMs (and
   the attention where D % 16 == 0) use bf16 / tf32 tensor cores on fp32 buffers; master
   weights and AdamW stay fp32.
   Peak: the device's bf16 matrix-product rate measured in this run: cublasGemmEx with bf16
   A and B (CUDA_R_16BF), CUBLAS_COMPUTE_32F, C in fp32 and in bf16, n x n x n (n 8192),
   best of 20 after 5 warm-ups; the higher of the two is the peak. MFU = mdl_flops_per_token
   (cfg, T) * tokens/s / peak (the torch peer's MFU uses the same FLOPs and peak). Beside it:
   our tk_sgemm_cuda on fp32 buffers in the chosen precision at the same size.
   Peer: bench/torch_train.py --device cuda --dtype <precision> --compile both --config G,P
   with the same shapes (--shape), the same warm-up and step counts: SDPA attention
   (is_causal), autocast bf16 with fp32 master weights and fused AdamW; eager, then
   torch.compile (compilation falls in its warm-up). python is $TORCH_PYTHON, else python3.
   It runs under `timeout` with what is left of the budget (--budget S; default
   $GPU_CHECK_BENCH_TIMEOUT - 10, else 170 s), eager runs first, so a slow compile costs the
   compiled figures only. vs_torch_eager = our tok/s / torch eager tok/s; vs_torch_compile
   likewise; -1 when the peer could not run (no torch, no GPU, a failure, out of time: the
   reason goes to stderr). --no-torch skips it, --no-compile skips torch.compile.
   Targets (issue 16, printed beside the figures): G >= 1.0x torch eager and MFU >= 0.35;
   the paper recipe within 1.5x of G's step time per token.
   Arguments (optional, positional, for small runs; the CPU simulation build uses them):
     C L H T B V steps [gemm_n]  the shape of G (and of P, with FFN 2x and the same B), the
                                 timed steps, the GEMM size (default 8192; 64 in the
                                 simulation, which skips the bf16-buffer peak: n/a)
   Simulation: g++ -std=c++17 -x c++ -O1 -I. -isystem /usr/include/stb -DATTNKIT_CUDA_SIM
   bench/bench_train_cuda.cu -o /tmp/btc -lm -llzma -lpthread && /tmp/btc 32 2 2 16 2 64 2
   (every call must return OK; its times mean nothing, and the peer is not run).
   Host-device synchronisations per step: counted with CUPTI's driver-API callbacks
   (libcupti.so.13 opened at run time; "n/a" with the reason where it is absent or refuses),
   from mdl_zero_grad to the last AdamW launch, so the benchmark's own per-step syncs are
   left out: explicit waits (cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize) and
   synchronous copies (cuMemcpy, cuMemcpyDtoH, cuMemcpyHtoD; a blocking copy makes the host
   wait for the stream too). Printed per model as the largest count of one timed step.
   First run on a GPU: 2026-11-27, an H200 (docs/GPU.md); the sync count was added after it
   and has not run on a GPU yet.
   Last line: bench_train_cuda: vs_torch_eager=X mfu=Y (X, Y for G; -1 where unavailable) */
#define _POSIX_C_SOURCE 200809L
#ifdef ATTNKIT_CUDA_SIM
#include "tests/cuda_sim.h"
#else
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cupti.h>
#include <dlfcn.h>
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "examples/common/impl.c"
#include "examples/common/bpe.c"
#include "examples/common/data.c"
#include "examples/common/layers.c"
#include "examples/common/model.c"
#include "examples/common/ckpt.c"
#include "examples/common/train.c"
#include "examples/common/maxent.c"

/* ------------------------------------------------------------------ small helpers */
static double btc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int btc_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : (x > y ? 1 : 0);
}

static double btc_median(const double *v, int n)
{
    double *s;
    double r;
    if (n <= 0) return nan("");
    s = (double *)malloc(sizeof(double) * (size_t)n);
    if (!s) return v[0];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, btc_cmp_d);
    r = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return r;
}

static uint64_t btc_rng = 0x9E3779B97F4A7C15ull;
static uint32_t btc_rnd32(void)
{
    btc_rng ^= btc_rng << 13;
    btc_rng ^= btc_rng >> 7;
    btc_rng ^= btc_rng << 17;
    return (uint32_t)(btc_rng >> 32);
}

/* tensor.h's last error message (tk_set_log) */
static char btc_tk_msg[256] = "no message";
static void btc_tk_log(const char *msg, void *user)
{
    (void)user;
    snprintf(btc_tk_msg, sizeof btc_tk_msg, "%s", msg);
}

static const char *btc_prec_name(int p)
{
    return p == TK_MATH_BF16 ? "bf16" : (p == TK_MATH_TF32 ? "tf32" : "fp32");
}

/* ------------------------------------------------------------------ peak and GEMM rates */
#ifndef ATTNKIT_CUDA_SIM
__global__ void btc_fill_bf16(__nv_bfloat16 *p, size_t n, unsigned seed)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i < n; i += (size_t)gridDim.x * blockDim.x) {
        unsigned h = (unsigned)i * 2654435761u ^ seed;
        h ^= h >> 15;
        h *= 0x2c1b3c6du;
        h ^= h >> 12;
        p[i] = __float2bfloat16((float)(h & 0xffffu) / 65536.0f - 0.5f);
    }
}

/* best TFLOP/s of an n^3 cublasGemmEx with bf16 A, B and C in fp32 (c_bf16 0) or bf16 (1),
   CUBLAS_COMPUTE_32F; -1 with a reason in why on failure */
static double btc_peak_bf16(int n, int c_bf16, char *why, size_t wl)
{
    const size_t nn = (size_t)n * (size_t)n;
    void *A = NULL, *B = NULL, *C = NULL;
    cublasHandle_t h = NULL;
    cudaEvent_t a = NULL, b = NULL;
    float alpha = 1.0f, beta = 0.0f, best = 1e30f;
    double r = -1.0;
    int it;
    if (cudaMalloc(&A, nn * 2) != cudaSuccess || cudaMalloc(&B, nn * 2) != cudaSuccess ||
        cudaMalloc(&C, nn * (c_bf16 ? 2 : 4)) != cudaSuccess) {
        snprintf(why, wl, "cudaMalloc of the %d^3 operands failed", n);
        (void)cudaGetLastError();
        goto done;
    }
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        h = NULL;
        snprintf(why, wl, "cublasCreate failed");
        goto done;
    }
    btc_fill_bf16<<<1024, 256>>>((__nv_bfloat16 *)A, nn, 1u);
    btc_fill_bf16<<<1024, 256>>>((__nv_bfloat16 *)B, nn, 2u);
    cudaMemset(C, 0, nn * (c_bf16 ? 2 : 4));
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (it = 0; it < 25; it++) {
        float ms = 0.0f;
        cublasStatus_t st;
        cudaEventRecord(a, 0);
        st = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, A, CUDA_R_16BF, n, B, CUDA_R_16BF, n, &beta, C,
                          c_bf16 ? CUDA_R_16BF : CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        cudaEventRecord(b, 0);
        if (st != CUBLAS_STATUS_SUCCESS) {
            snprintf(why, wl, "cublasGemmEx failed (status %d)", (int)st);
            goto done;
        }
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        if (it >= 5 && ms > 0.0f && ms < best) best = ms;
    }
    if (cudaDeviceSynchronize() != cudaSuccess) {
        snprintf(why, wl, "%s", cudaGetErrorString(cudaGetLastError()));
        goto done;
    }
    if (best < 1e29f) r = 2.0 * (double)n * n * n / (best * 1e-3) * 1e-12;
done:
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    if (h) cublasDestroy(h);
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    return r;
}
static const int btc_sim = 0;
#else
static double btc_peak_bf16(int n, int c_bf16, char *why, size_t wl)
{
    (void)n;
    (void)c_bf16;
    snprintf(why, wl, "the CPU simulation emulates cublasGemmEx on fp32 buffers only");
    return -1.0;
}
static const int btc_sim = 1;
#endif

/* n floats uniform in [-0.5, 0.5) on the device (NULL on failure) */
static float *btc_dev_uniform(size_t n)
{
    float *h = (float *)malloc(n * sizeof(float));
    void *d = NULL;
    size_t i;
    if (!h) return NULL;
    for (i = 0; i < n; i++) h[i] = (float)(btc_rnd32() >> 8) / 16777216.0f - 0.5f;
    if (tk_device_alloc(&d, n * sizeof(float)) != TK_OK || tk_copy(d, h, n * sizeof(float)) != TK_OK) {
        tk_device_free(d);
        d = NULL;
    }
    free(h);
    return (float *)d;
}

/* best TFLOP/s of our tk_sgemm_cuda (NN, fp32 buffers, the current tk_cuda_set_math), n^3 */
static double btc_sgemm_rate(int n, int reps)
{
    const size_t nn = (size_t)n * (size_t)n;
    float *A = btc_dev_uniform(nn), *B = btc_dev_uniform(nn), *C = NULL;
    cudaEvent_t a, b;
    float best = 1e30f;
    double r = -1.0;
    int it;
    if (A && B && tk_device_alloc((void **)&C, nn * sizeof(float)) != TK_OK) C = NULL;
    if (!A || !B || !C) {
        fprintf(stderr, "bench_train_cuda: tk_sgemm_cuda rate: out of device memory\n");
        tk_device_free(A);
        tk_device_free(B);
        return -1.0;
    }
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (it = 0; it < reps + 2; it++) {
        float ms = 0.0f;
        int rc;
        cudaEventRecord(a, 0);
        rc = tk_sgemm_cuda(0, 0, n, n, n, 1.0f, A, n, B, n, 0.0f, C, n, NULL);
        cudaEventRecord(b, 0);
        if (rc != TK_OK) {
            fprintf(stderr, "bench_train_cuda: tk_sgemm_cuda: %s\n", btc_tk_msg);
            best = 1e30f;
            break;
        }
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        if (it >= 2 && ms > 0.0f && ms < best) best = ms;
    }
    if (tk_device_synchronize() != TK_OK) {
        fprintf(stderr, "bench_train_cuda: tk_sgemm_cuda: %s\n", btc_tk_msg);
        best = 1e30f;
    }
    if (best < 1e29f) r = 2.0 * (double)n * n * n / (best * 1e-3) * 1e-12;
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    tk_device_free(A);
    tk_device_free(B);
    tk_device_free(C);
    return r;
}

/* ------------------------------------------------------------------ our model */
typedef struct btc_res {
    int ok;
    double step_ms, best_ms, fwd_ms, bwd_ms, opt_ms, tok_s, loss;
    double act_mb, dev_used_mb;
    long long params;
    long long syncs, copies; /* the most of one timed step; -1: not counted */
} btc_res;

/* ---- host-device synchronisations, counted by CUPTI driver-API callbacks (no nsys) */
static volatile long long btc_nsync = 0, btc_ncopy = 0;
static int btc_counting = 0;          /* 1 once the callbacks are on */
static char btc_count_why[200] = "";  /* why not, when not */
#ifndef ATTNKIT_CUDA_SIM
static void CUPTIAPI btc_sync_cb(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId id, const void *data)
{
    const CUpti_CallbackData *d = (const CUpti_CallbackData *)data;
    (void)ud;
    if (dom != CUPTI_CB_DOMAIN_DRIVER_API || d->callbackSite != CUPTI_API_ENTER) return;
    switch (id) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
    case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
        btc_nsync = btc_nsync + 1;
        break;
    default:
        btc_ncopy = btc_ncopy + 1;
        break;
    }
}
#endif
/* turns the counting on (once); 0 and the reason in btc_count_why when it cannot */
static int btc_count_start(void)
{
#ifdef ATTNKIT_CUDA_SIM
    snprintf(btc_count_why, sizeof btc_count_why, "the simulation has no CUPTI");
    return 0;
#else
    typedef CUptiResult (*sub_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    typedef CUptiResult (*en_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
    static const CUpti_CallbackId ids[] = {
        CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2,
        CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds};
    static CUpti_SubscriberHandle sub;
    void *h;
    sub_fn subscribe;
    en_fn enable;
    size_t i;
    if (btc_counting) return 1;
    h = dlopen("libcupti.so.13", RTLD_NOW);
    if (!h) h = dlopen("libcupti.so", RTLD_NOW);
    if (!h) {
        snprintf(btc_count_why, sizeof btc_count_why, "libcupti.so.13 not found (LD_LIBRARY_PATH)");
        return 0;
    }
    subscribe = (sub_fn)dlsym(h, "cuptiSubscribe");
    enable = (en_fn)dlsym(h, "cuptiEnableCallback");
    if (!subscribe || !enable) {
        snprintf(btc_count_why, sizeof btc_count_why, "libcupti lacks cuptiSubscribe/cuptiEnableCallback");
        return 0;
    }
    if (subscribe(&sub, (CUpti_CallbackFunc)btc_sync_cb, NULL) != CUPTI_SUCCESS) {
        snprintf(btc_count_why, sizeof btc_count_why, "cuptiSubscribe failed (another CUPTI client?)");
        return 0;
    }
    for (i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, ids[i]) != CUPTI_SUCCESS) {
            snprintf(btc_count_why, sizeof btc_count_why, "cuptiEnableCallback failed");
            return 0;
        }
    btc_counting = 1;
    return 1;
#endif
}

/* warmup + steps training steps of cfg at (B, T) on the device; figures from the timed ones.
   When the last warm-up step says `steps` would take more than max_s seconds, fewer steps
   are timed (at least 3), and a line says so. */
static btc_res btc_run_ours(const char *label, const mdl_config *cfg, int B, int T, const mdl_opts *base,
                            int warmup, int steps, double max_s)
{
    btc_res res;
    mdl_model *m = NULL;
    mdl_opts o = *base;
    mdl_stats st;
    char err[512];
    size_t n, k, ntok = (size_t)B * (size_t)T;
    int nt, s, i;
    float *p, *g, *mom = NULL, *vel = NULL;
    int *ids = NULL, *tgt = NULL;
    double *ts = NULL, *tf = NULL, *tb = NULL, *to = NULL;
    cudaEvent_t ev[4] = {NULL, NULL, NULL, NULL};
    tk_adamw_config ac = tk_adamw_config_default(), ac0;
    size_t fr = 0, tot = 0;

    memset(&res, 0, sizeof res);
    memset(&st, 0, sizeof st);
    if (mdl_create_on(&m, cfg, 1234, MDL_DEVICE_CUDA, err, sizeof err) != MDL_OK) {
        fprintf(stderr, "bench_train_cuda: %s: mdl_create_on: %s\n", label, err);
        return res;
    }
    if (mdl_reserve(m, B, T) != MDL_OK) {
        fprintf(stderr, "bench_train_cuda: %s: mdl_reserve: %s\n", label, mdl_last_error(m));
        goto done;
    }
    n = mdl_num_params(m);
    nt = mdl_num_tensors(m);
    if (tk_device_alloc((void **)&mom, n * sizeof(float)) != TK_OK ||
        tk_device_alloc((void **)&vel, n * sizeof(float)) != TK_OK || tk_fill_zero(mom, n * sizeof(float)) != TK_OK ||
        tk_fill_zero(vel, n * sizeof(float)) != TK_OK) {
        fprintf(stderr, "bench_train_cuda: %s: AdamW moments: %s\n", label, btc_tk_msg);
        goto done;
    }
    ids = (int *)malloc(sizeof(int) * ntok);
    tgt = (int *)malloc(sizeof(int) * ntok);
    ts = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    tf = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    tb = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    to = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    if (!ids || !tgt || !ts || !tf || !tb || !to) {
        fprintf(stderr, "bench_train_cuda: %s: out of host memory\n", label);
        goto done;
    }
    for (i = 0; i < 4; i++) cudaEventCreate(&ev[i]);
    ac.lr = 3e-4f;
    ac.beta1 = 0.9f;
    ac.beta2 = 0.95f;
    ac.eps = 1e-8f;
    ac.weight_decay = 0.1f;
    ac0 = ac;
    ac0.weight_decay = 0.0f;
    o.train = 1;
    p = mdl_params(m);
    g = mdl_grads(m);
    res.syncs = res.copies = -1;
    if (btc_count_start()) res.syncs = res.copies = 0;
    for (s = 0; s < warmup + steps; s++) {
        float ms[3] = {0.0f, 0.0f, 0.0f};
        double w0;
        long long ns0 = btc_nsync, nc0 = btc_ncopy;
        for (k = 0; k < ntok; k++) {
            ids[k] = (int)(btc_rnd32() % (uint32_t)cfg->vocab);
            tgt[k] = (int)(btc_rnd32() % (uint32_t)cfg->vocab);
        }
        o.seed = (uint64_t)s;
        w0 = btc_now();
        cudaEventRecord(ev[0], 0);
        mdl_zero_grad(m);
        if (mdl_forward(m, ids, tgt, B, T, &o, &st) != MDL_OK) {
            fprintf(stderr, "bench_train_cuda: %s: mdl_forward: %s\n", label, mdl_last_error(m));
            goto done;
        }
        cudaEventRecord(ev[1], 0);
        if (mdl_backward(m) != MDL_OK) {
            fprintf(stderr, "bench_train_cuda: %s: mdl_backward: %s\n", label, mdl_last_error(m));
            goto done;
        }
        cudaEventRecord(ev[2], 0);
        for (i = 0; i < nt; i++) {
            const mdl_tensor *t = mdl_tensor_at(m, i);
            if (tk_adamw_update(p + t->offset, g + t->offset, mom + t->offset, vel + t->offset, t->numel,
                                t->decay ? &ac : &ac0, (long)s + 1) != TK_OK) {
                fprintf(stderr, "bench_train_cuda: %s: tk_adamw_update (%s): %s\n", label, t->name, btc_tk_msg);
                goto done;
            }
        }
        if (btc_counting && s >= warmup) { /* this step's, before the benchmark's own waits */
            if (btc_nsync - ns0 > res.syncs) res.syncs = btc_nsync - ns0;
            if (btc_ncopy - nc0 > res.copies) res.copies = btc_ncopy - nc0;
        }
        cudaEventRecord(ev[3], 0);
        cudaEventSynchronize(ev[3]);
        if (tk_device_synchronize() != TK_OK) {
            fprintf(stderr, "bench_train_cuda: %s: step %d: %s\n", label, s, btc_tk_msg);
            goto done;
        }
        if (!(st.loss == st.loss) || fabs(st.loss) > 1e30) {
            fprintf(stderr, "bench_train_cuda: %s: non-finite loss at step %d\n", label, s);
            goto done;
        }
        if (s == warmup - 1) {
            const double dt = btc_now() - w0;
            if (dt * steps > max_s && steps > 3) {
                int ns = (int)(max_s / dt);
                if (ns < 3) ns = 3;
                if (ns < steps) {
                    printf("  (%s: a warm-up step took %.2f s: %d timed steps instead of %d, to stay within the "
                           "budget)\n", label, dt, ns, steps);
                    steps = ns;
                }
            }
        }
        if (s >= warmup) {
            float all = 0.0f;
            cudaEventElapsedTime(&ms[0], ev[0], ev[1]);
            cudaEventElapsedTime(&ms[1], ev[1], ev[2]);
            cudaEventElapsedTime(&ms[2], ev[2], ev[3]);
            cudaEventElapsedTime(&all, ev[0], ev[3]);
            ts[s - warmup] = all;
            tf[s - warmup] = ms[0];
            tb[s - warmup] = ms[1];
            to[s - warmup] = ms[2];
        }
    }
    res.step_ms = btc_median(ts, steps);
    res.fwd_ms = btc_median(tf, steps);
    res.bwd_ms = btc_median(tb, steps);
    res.opt_ms = btc_median(to, steps);
    qsort(ts, (size_t)steps, sizeof(double), btc_cmp_d);
    res.best_ms = ts[0];
    res.tok_s = res.step_ms > 0.0 ? (double)ntok / (res.step_ms * 1e-3) : nan("");
    res.loss = st.loss;
    res.params = (long long)n;
    res.act_mb = (double)mdl_activation_bytes(m) / 1048576.0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) res.dev_used_mb = (double)(tot - fr) / 1048576.0;
    res.ok = 1;
done:
    for (i = 0; i < 4; i++)
        if (ev[i]) cudaEventDestroy(ev[i]);
    free(ids), free(tgt), free(ts), free(tf), free(tb), free(to);
    tk_device_free(mom);
    tk_device_free(vel);
    mdl_destroy(m);
    return res;
}

/* ------------------------------------------------------------------ the PyTorch peer */
typedef struct btc_peer {
    double tok_s, step_ms, fwd_ms, bwd_ms, opt_ms, warmup_s, mem_mb;
    int ok;
    char why[320];
} btc_peer;

/* "key": number in a JSON line (json.dumps style) */
static double btc_json_num(const char *line, const char *key)
{
    char pat[64];
    const char *p;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(line, pat);
    if (!p) return nan("");
    return strtod(p + strlen(pat), NULL);
}

/* "key": "string" in a JSON line into out (empty when absent; escapes left as they are) */
static void btc_json_str(const char *line, const char *key, char *out, size_t ol)
{
    char pat[64];
    const char *p;
    size_t k = 0;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    out[0] = '\0';
    p = strstr(line, pat);
    if (!p) return;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p++ != '"') return;
    while (*p && k + 1 < ol) {
        if (*p == '\\' && p[1]) {
            out[k++] = p[1];
            p += 2;
            continue;
        }
        if (*p == '"') break;
        out[k++] = *p++;
    }
    out[k] = '\0';
}

enum { BTC_G = 0, BTC_P = 1, BTC_EAGER = 0, BTC_COMPILE = 1 };
#define BTC_TAIL 10

/* runs the peer once for G and P (eager, then compiled unless no_compile), filling
   peer[config][mode]; every run without a figure gets a reason */
static void btc_run_peer(btc_peer peer[2][2], const int shape[2][7], const char *prec, int warmup, int steps,
                         int no_compile, int timeout_s)
{
    const char *py = getenv("TORCH_PYTHON");
    char cmd[1024], pre[48], line[8192], tail[BTC_TAIL][240], how[200];
    int ntail = 0, c, md, status, have_timeout;
    FILE *f;
    if (!py || !*py) py = "python3";
    have_timeout = access("/usr/bin/timeout", X_OK) == 0 || access("/bin/timeout", X_OK) == 0;
    if (have_timeout) snprintf(pre, sizeof pre, "timeout -k 5 %d ", timeout_s);
    else pre[0] = '\0';
    snprintf(cmd, sizeof cmd,
             "%s%s bench/torch_train.py --device cuda --dtype %s --compile %s --config G,P "
             "--shape G=%d,%d,%d,%d,%d,%d,%d --shape P=%d,%d,%d,%d,%d,%d,%d --warmup %d --steps %d 2>&1",
             pre, py, prec, no_compile ? "off" : "both", shape[0][0], shape[0][1], shape[0][2], shape[0][3],
             shape[0][4], shape[0][5], shape[0][6], shape[1][0], shape[1][1], shape[1][2], shape[1][3], shape[1][4],
             shape[1][5], shape[1][6], warmup, steps);
    printf("  peer: %s\n", cmd);
    fflush(stdout);
    for (c = 0; c < 2; c++)
        for (md = 0; md < 2; md++) {
            memset(&peer[c][md], 0, sizeof peer[c][md]);
            peer[c][md].tok_s = -1.0;
            snprintf(peer[c][md].why, sizeof peer[c][md].why, "%s",
                     md == BTC_COMPILE && no_compile ? "--no-compile" : "no result from the peer");
        }
    f = popen(cmd, "r");
    if (!f) {
        for (c = 0; c < 2; c++)
            for (md = 0; md < 2; md++) snprintf(peer[c][md].why, sizeof peer[c][md].why, "popen failed");
        return;
    }
    while (fgets(line, sizeof line, f)) {
        char cfg[16], mode[16], error[256];
        line[strcspn(line, "\n")] = '\0';
        if (line[0] == '{' && strstr(line, "\"config\"")) {
            btc_peer *r;
            btc_json_str(line, "config", cfg, sizeof cfg);
            btc_json_str(line, "mode", mode, sizeof mode);
            btc_json_str(line, "error", error, sizeof error);
            c = !strcmp(cfg, "G") ? BTC_G : (!strcmp(cfg, "P") ? BTC_P : -1);
            md = !strcmp(mode, "eager") ? BTC_EAGER : (!strcmp(mode, "compile") ? BTC_COMPILE : -1);
            if (c < 0 || md < 0) continue;
            r = &peer[c][md];
            if (error[0]) {
                snprintf(r->why, sizeof r->why, "the peer failed: %s", error);
                continue;
            }
            r->tok_s = btc_json_num(line, "tok_per_s");
            r->fwd_ms = btc_json_num(line, "fwd_ms");
            r->bwd_ms = btc_json_num(line, "bwd_ms");
            r->opt_ms = btc_json_num(line, "opt_ms");
            r->warmup_s = btc_json_num(line, "warmup_s");
            r->mem_mb = btc_json_num(line, "peak_mem_mb");
            r->ok = r->tok_s == r->tok_s && r->tok_s > 0.0;
            r->step_ms = r->ok ? 1e3 * shape[c][4] * shape[c][3] / r->tok_s : nan("");
            if (!r->ok) {
                r->tok_s = -1.0;
                snprintf(r->why, sizeof r->why, "the peer's line has no tok_per_s");
            } else {
                char gpu[128], torch_v[64];
                btc_json_str(line, "gpu", gpu, sizeof gpu);
                btc_json_str(line, "torch", torch_v, sizeof torch_v);
                printf("  peer %s %s: torch %s on %s, %.0f tok/s\n", cfg, mode, torch_v, gpu, r->tok_s);
                fflush(stdout);
            }
        } else if (line[0]) {
            size_t l = strlen(line);
            if (l >= sizeof tail[0]) l = sizeof tail[0] - 1;
            memcpy(tail[ntail % BTC_TAIL], line, l);
            tail[ntail % BTC_TAIL][l] = '\0';
            ntail++;
        }
    }
    status = pclose(f);
    how[0] = '\0';
    if (status == -1)
        snprintf(how, sizeof how, "pclose failed");
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 124)
        snprintf(how, sizeof how, "timed out after %d s (the budget left; --budget)", timeout_s);
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        snprintf(how, sizeof how, "command not found (python: %s)", py);
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        snprintf(how, sizeof how, "the peer exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(how, sizeof how, "the peer was killed by signal %d", WTERMSIG(status));
    for (c = 0; c < 2; c++)
        for (md = 0; md < 2; md++)
            if (!peer[c][md].ok && how[0] && !strcmp(peer[c][md].why, "no result from the peer"))
                snprintf(peer[c][md].why, sizeof peer[c][md].why, "no result: %s", how);
    if (how[0] || ntail) {
        int i, first = ntail > BTC_TAIL ? ntail - BTC_TAIL : 0;
        int any_missing = 0;
        for (c = 0; c < 2; c++)
            for (md = 0; md < 2; md++) any_missing |= !peer[c][md].ok && !(md == BTC_COMPILE && no_compile);
        if (any_missing) {
            fprintf(stderr, "bench_train_cuda: torch peer: %s; its last other output lines:\n",
                    how[0] ? how : "some runs gave no figure");
            for (i = first; i < ntail; i++) fprintf(stderr, "  | %s\n", tail[i % BTC_TAIL]);
        }
    }
}

/* ------------------------------------------------------------------ main */
static mdl_config btc_plain(int C, int L, int H, int T, int V, int ff)
{
    mdl_config c = mdl_config_default();
    c.vocab = V;
    c.d_model = C;
    c.n_layers = L;
    c.n_heads = H;
    c.max_T = T;
    c.d_ff_mult = ff;
    c.pos = MDL_POS_LEARNED;
    c.norm = MDL_NORM_LAYER;
    c.attn = MDL_ATTN_SOFTMAX;
    c.prior = MDL_PRIOR_NONE;
    c.memory = MDL_MEM_NONE;
    c.ffn = MDL_FFN_GELU;
    c.dropout = 0.0f;
    return c;
}

/* the paper preset's model with its mechanisms off: a plain transformer of its shape */
static mdl_config btc_strip(mdl_config c)
{
    c.prior = MDL_PRIOR_NONE;
    c.ffn = MDL_FFN_GELU;
    c.res_gate = 0;
    c.value_gate = 0;
    c.dropout = 0.0f;
    c.gac_tau = 0;
    c.conv_k = 0;
    c.memory = MDL_MEM_NONE;
    c.attn = MDL_ATTN_SOFTMAX;
    return c;
}

static void btc_usage(void)
{
    fprintf(stderr,
            "usage: bench_train_cuda [C L H T B V steps [gemm_n]] [--precision bf16|tf32|fp32] [--batch N]\n"
            "                        [--warmup N] [--steps N] [--budget S] [--no-torch] [--no-compile]\n");
}

static void btc_print_row(const char *name, double tok_s, double step_ms, double fwd, double bwd, double opt,
                          double fpt, double peak_tf)
{
    double tf = tok_s > 0 ? fpt * tok_s * 1e-12 : nan("");
    if (tok_s > 0)
        printf("  %-34s %11.0f %9.2f = %7.2f + %7.2f + %6.2f %8.2f %7.3f\n", name, tok_s, step_ms, fwd, bwd, opt, tf,
               peak_tf > 0 ? tf / peak_tf : -1.0);
    else
        printf("  %-34s %11s\n", name, "n/a");
}

static const char *btc_verdict(double v, double target, int higher_better)
{
    if (!(v > 0)) return "n/a";
    return (higher_better ? v >= target : v <= target) ? "met" : "NOT met";
}

int main(int argc, char **argv)
{
    int C = 768, L = 12, H = 12, T = 1024, B = 8, V = 50257, steps = 10, warmup = 3, gemm_n = 8192;
    int prec = TK_MATH_BF16, use_torch = 1, no_compile = 0, npos = 0, i, toy = 0, batch_flag = 0;
    int pos[8];
    double budget = 170.0, t_start = btc_now();
    const char *env_to = getenv("GPU_CHECK_BENCH_TIMEOUT");
    cudaDeviceProp prop;
    trn_config tc;
    mdl_config cg, cp, cpaper;
    mdl_opts o = mdl_opts_default();
    int BP, TP, paper_ok;
    char perr[512], why_peak[256] = "";
    double peak_f32c = -1.0, peak_bf16c = -1.0, peak = -1.0, sg = -1.0, fpt_g, fpt_p, fpt_paper;
    btc_res rg, rp, rpaper;
    btc_peer peer[2][2];
    double vs_eager = -1.0, vs_compile = -1.0, mfu = -1.0, paper_ratio = -1.0;
    int shape[2][7];

#ifdef ATTNKIT_CUDA_SIM
    gemm_n = 64;
#endif
    if (env_to && atoi(env_to) > 30) budget = atoi(env_to) - 10;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--precision") && i + 1 < argc) {
            const char *v = argv[++i];
            if (!strcmp(v, "bf16")) prec = TK_MATH_BF16;
            else if (!strcmp(v, "tf32")) prec = TK_MATH_TF32;
            else if (!strcmp(v, "fp32")) prec = TK_MATH_FP32;
            else {
                btc_usage();
                return 2;
            }
        } else if ((!strcmp(a, "--batch") || !strcmp(a, "-B")) && i + 1 < argc) {
            B = atoi(argv[++i]);
            batch_flag = 1;
        } else if (!strcmp(a, "--warmup") && i + 1 < argc) {
            warmup = atoi(argv[++i]);
        } else if (!strcmp(a, "--steps") && i + 1 < argc) {
            steps = atoi(argv[++i]);
        } else if (!strcmp(a, "--budget") && i + 1 < argc) {
            budget = atof(argv[++i]);
        } else if (!strcmp(a, "--no-torch")) {
            use_torch = 0;
        } else if (!strcmp(a, "--no-compile")) {
            no_compile = 1;
        } else if (a[0] != '-' && npos < 8) {
            pos[npos++] = atoi(a);
        } else {
            btc_usage();
            return 2;
        }
    }
    if (npos > 0) toy = 1;
    if (npos > 0) C = pos[0];
    if (npos > 1) L = pos[1];
    if (npos > 2) H = pos[2];
    if (npos > 3) T = pos[3];
    if (npos > 4 && !batch_flag) B = pos[4];
    if (npos > 5) V = pos[5];
    if (npos > 6) steps = pos[6];
    if (npos > 7) gemm_n = pos[7];
    if (C <= 0 || L <= 0 || H <= 0 || C % H || T <= 0 || B <= 0 || V <= 1 || steps <= 0 || warmup < 0 ||
        gemm_n <= 0 || budget < 0) {
        btc_usage();
        return 2;
    }
    if (!tk_cuda_available() || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        printf("SKIP: no GPU\n");
        printf("bench_train_cuda: vs_torch_eager=n/a mfu=n/a\n");
        return 0;
    }
    tk_set_log(btc_tk_log, NULL);
    if (tk_cuda_set_math(prec) != TK_OK) {
        fprintf(stderr, "bench_train_cuda: tk_cuda_set_math: %s\n", btc_tk_msg);
        return 1;
    }
    printf("bench_train_cuda: device %s (sm_%d%d, %d SMs, %.1f GiB); precision %s (tk_cuda_set_math); "
           "warm-up %d, timed steps %d (median)%s\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / 1073741824.0,
           btc_prec_name(prec), warmup, steps, toy ? "; toy shape from the arguments" : "");
#ifdef ATTNKIT_CUDA_SIM
    printf("  CPU SIMULATION (tests/cuda_sim.h): every figure below is meaningless; the calls are what is checked\n");
#endif

    /* the configurations */
    cg = btc_plain(C, L, H, T, V, 4);
    if (trn_preset("paper", &tc) != TRN_OK) {
        fprintf(stderr, "bench_train_cuda: trn_preset(\"paper\") failed\n");
        return 1;
    }
    cpaper = tc.model;
    BP = tc.batch;
    TP = tc.context;
    if (toy) { /* the paper preset's mechanisms at the toy shape */
        cpaper.d_model = C;
        cpaper.n_layers = L;
        cpaper.n_heads = H;
        cpaper.max_T = T;
        cpaper.vocab = V;
        BP = B;
        TP = T;
    }
    cp = btc_strip(cpaper);
    fpt_g = mdl_flops_per_token(&cg, T);
    fpt_p = mdl_flops_per_token(&cp, TP);
    fpt_paper = mdl_flops_per_token(&cpaper, TP);
    shape[0][0] = C, shape[0][1] = L, shape[0][2] = H, shape[0][3] = T, shape[0][4] = B, shape[0][5] = V;
    shape[0][6] = cg.d_ff_mult;
    shape[1][0] = cp.d_model, shape[1][1] = cp.n_layers, shape[1][2] = cp.n_heads, shape[1][3] = TP;
    shape[1][4] = BP, shape[1][5] = cp.vocab, shape[1][6] = cp.d_ff_mult;

    /* the peak and our GEMM rate */
    peak_f32c = btc_peak_bf16(gemm_n, 0, why_peak, sizeof why_peak);
    if (peak_f32c > 0) peak_bf16c = btc_peak_bf16(gemm_n, 1, why_peak, sizeof why_peak);
    peak = peak_f32c > peak_bf16c ? peak_f32c : peak_bf16c;
    if (peak > 0)
        printf("  peak bf16 GEMM %d^3 (cublasGemmEx bf16 A/B, CUBLAS_COMPUTE_32F, best of 20): %.1f TFLOP/s with fp32 C, "
               "%.1f with bf16 C; peak = %.1f TFLOP/s\n",
               gemm_n, peak_f32c, peak_bf16c, peak);
    else
        printf("  peak bf16 GEMM (cublasGemmEx, bf16 A/B): n/a (%s); MFU prints -1\n", why_peak);
    sg = btc_sgemm_rate(gemm_n, 10);
    printf("  tk_sgemm_cuda %d^3, fp32 buffers, %s math: %.2f TFLOP/s", gemm_n, btc_prec_name(prec), sg);
    if (peak > 0 && sg > 0) printf(" (%.3f of the peak)", sg / peak);
    printf("\n");
    fflush(stdout);

    /* G: the softmax baseline */
    printf("model G, the softmax baseline: d %d, %d layers, %d heads (D %d), context %d, batch %d, vocab %d, GELU MLP "
           "4x, LayerNorm, learned positions, tied head, dropout 0; %.3f GFLOP/token\n",
           C, L, H, C / H, T, B, V, fpt_g * 1e-9);
    fflush(stdout);
    rg = btc_run_ours("G", &cg, B, T, &o, warmup, steps, 0.3 * budget);
    if (!rg.ok) {
        printf("bench_train_cuda: vs_torch_eager=-1 mfu=-1\n");
        return 1;
    }
    printf("  ours: %lld params, last loss %.4f (ln V %.4f), activations %.1f MiB, device memory in use %.0f MiB\n",
           rg.params, rg.loss, log((double)V), rg.act_mb, rg.dev_used_mb);
    fflush(stdout);

    /* the paper preset: on the device? */
    paper_ok = mdl_device_supports(&cpaper, perr, sizeof perr) == MDL_OK;
    printf("model paper (trn_preset(\"paper\"): d %d, %d layers, %d heads, context %d, batch %d, FFN %dx, RPA prior %s, "
           "%s FFN, res_gate %d, value_gate %d, dropout %.2f; %.3f GFLOP/token)\n",
           cpaper.d_model, cpaper.n_layers, cpaper.n_heads, TP, BP, cpaper.d_ff_mult,
           cpaper.prior == MDL_PRIOR_RPA ? "on" : "off", cpaper.ffn == MDL_FFN_MOE ? "fuzzy MoE" : "GELU",
           cpaper.res_gate, cpaper.value_gate, cpaper.dropout, fpt_paper * 1e-9);
    memset(&rpaper, 0, sizeof rpaper);
    if (!paper_ok) {
        printf("  paper preset on the device: n/a: mdl_device_supports: %s\n", perr);
        { /* each mechanism alone on the plain stand-in */
            struct { const char *what; int k; } mech[4] = {{"RPA prior", 0}, {"fuzzy MoE", 1}, {"gates", 2}, {"dropout", 3}};
            int j;
            for (j = 0; j < 4; j++) {
                mdl_config x = cp;
                char e2[512];
                if (mech[j].k == 0) {
                    if (cpaper.prior == MDL_PRIOR_NONE) continue;
                    x.prior = cpaper.prior;
                } else if (mech[j].k == 1) {
                    if (cpaper.ffn != MDL_FFN_MOE) continue;
                    x.ffn = cpaper.ffn;
                } else if (mech[j].k == 2) {
                    if (!cpaper.res_gate && !cpaper.value_gate) continue;
                    x.res_gate = cpaper.res_gate;
                    x.value_gate = cpaper.value_gate;
                } else {
                    if (!(cpaper.dropout > 0.0f)) continue;
                    x.dropout = cpaper.dropout;
                }
                if (mdl_device_supports(&x, e2, sizeof e2) != MDL_OK) printf("    alone, %-9s: %s\n", mech[j].what, e2);
                else printf("    alone, %-9s: supported\n", mech[j].what);
            }
        }
    } else {
        mdl_opts op = mdl_opts_default();
        op.label_smoothing = tc.label_smoothing;
        op.ent_floor_alpha = tc.ent_floor_alpha;
        op.ent_floor_eta = tc.ent_floor_eta;
        op.moe_lb_coef = tc.moe_lb_coef;
        op.prior_source = tc.prior_train ? MDL_PSRC_RUNNING : MDL_PSRC_BATCH;
        printf("  the device model accepts the paper preset: timing its model step (the preset's loss options, no "
               "controllers)\n");
        fflush(stdout);
        rpaper = btc_run_ours("paper", &cpaper, BP, TP, &op, warmup, steps, 0.2 * budget);
    }
    fflush(stdout);

    /* P: the plain stand-in */
    printf("model P, the PLAIN STAND-IN for the paper preset (its shape with prior, MoE, gates and dropout off; not "
           "the recipe): d %d, %d layers, %d heads (D %d%s), context %d, batch %d, FFN %dx, vocab %d; %.3f GFLOP/token\n",
           cp.d_model, cp.n_layers, cp.n_heads, cp.d_model / cp.n_heads,
           (cp.d_model / cp.n_heads) % 16 ? ": not a multiple of 16, so the attention runs fp32 SIMT" : "", TP, BP,
           cp.d_ff_mult, cp.vocab, fpt_p * 1e-9);
    fflush(stdout);
    rp = btc_run_ours("P", &cp, BP, TP, &o, warmup, steps, 0.2 * budget);
    if (rp.ok)
        printf("  ours: %lld params, last loss %.4f, activations %.1f MiB, device memory in use %.0f MiB\n", rp.params,
               rp.loss, rp.act_mb, rp.dev_used_mb);
    fflush(stdout);

    /* the peer */
    {
        int c, md;
        double left = budget - (btc_now() - t_start);
        for (c = 0; c < 2; c++)
            for (md = 0; md < 2; md++) {
                memset(&peer[c][md], 0, sizeof peer[c][md]);
                peer[c][md].tok_s = -1.0;
            }
        if (btc_sim) {
            for (c = 0; c < 2; c++)
                for (md = 0; md < 2; md++)
                    snprintf(peer[c][md].why, sizeof peer[c][md].why, "the CPU simulation (the peer needs a real GPU)");
        } else if (!use_torch) {
            for (c = 0; c < 2; c++)
                for (md = 0; md < 2; md++) snprintf(peer[c][md].why, sizeof peer[c][md].why, "--no-torch");
        } else if (left < 20.0) {
            for (c = 0; c < 2; c++)
                for (md = 0; md < 2; md++)
                    snprintf(peer[c][md].why, sizeof peer[c][md].why, "only %.0f s of the %.0f s budget left", left,
                             budget);
        } else {
            btc_run_peer(peer, shape, btc_prec_name(prec), warmup, steps, no_compile, (int)left);
        }
        for (c = 0; c < 2; c++)
            for (md = 0; md < 2; md++)
                if (!peer[c][md].ok)
                    fprintf(stderr, "bench_train_cuda: torch %s %s: n/a (%s)\n", c == BTC_G ? "G" : "P",
                            md == BTC_EAGER ? "eager" : "compile", peer[c][md].why);
    }

    /* the table */
    printf("\n  %-34s %11s %9s   %7s   %7s   %6s %8s %7s\n", "run", "tok/s", "step ms", "fwd", "bwd", "opt", "TFLOP/s",
           "MFU");
    btc_print_row("G ours", rg.tok_s, rg.step_ms, rg.fwd_ms, rg.bwd_ms, rg.opt_ms, fpt_g, peak);
    btc_print_row("G torch eager", peer[0][0].tok_s, peer[0][0].step_ms, peer[0][0].fwd_ms, peer[0][0].bwd_ms,
                  peer[0][0].opt_ms, fpt_g, peak);
    btc_print_row("G torch.compile", peer[0][1].tok_s, peer[0][1].step_ms, peer[0][1].fwd_ms, peer[0][1].bwd_ms,
                  peer[0][1].opt_ms, fpt_g, peak);
    if (paper_ok && rpaper.ok)
        btc_print_row("paper preset ours", rpaper.tok_s, rpaper.step_ms, rpaper.fwd_ms, rpaper.bwd_ms, rpaper.opt_ms,
                      fpt_paper, peak);
    else
        printf("  %-34s %11s   (the device model refuses it: see above)\n", "paper preset ours", "n/a");
    btc_print_row("P plain stand-in ours", rp.ok ? rp.tok_s : -1.0, rp.step_ms, rp.fwd_ms, rp.bwd_ms, rp.opt_ms, fpt_p,
                  peak);
    btc_print_row("P plain stand-in torch eager", peer[1][0].tok_s, peer[1][0].step_ms, peer[1][0].fwd_ms,
                  peer[1][0].bwd_ms, peer[1][0].opt_ms, fpt_p, peak);
    btc_print_row("P plain stand-in torch.compile", peer[1][1].tok_s, peer[1][1].step_ms, peer[1][1].fwd_ms,
                  peer[1][1].bwd_ms, peer[1][1].opt_ms, fpt_p, peak);
    {   /* host-device synchronisations per step (CUPTI) */
        const btc_res *rr[3] = {&rg, &rpaper, &rp};
        static const char *nm[3] = {"G ours", "paper preset ours", "P plain stand-in ours"};
        int q;
        for (q = 0; q < 3; q++) {
            if ((q == 1 && !paper_ok) || !rr[q]->ok) continue;
            if (rr[q]->syncs < 0)
                printf("  %-34s host-device syncs per step: n/a (%s)\n", nm[q], btc_count_why);
            else
                printf("  %-34s host-device syncs per step: %lld waits + %lld blocking copies (most of one timed step)\n",
                       nm[q], rr[q]->syncs, rr[q]->copies);
        }
    }
    printf("  (step ms = median whole step; fwd includes zero_grad; MFU = model FLOPs (mdl_flops_per_token) / the "
           "measured bf16 peak%s)\n", peak > 0 ? "" : ", -1: no peak");
    if (peer[0][1].ok || peer[1][1].ok)
        printf("  torch.compile warm-up (compilation included): G %.1f s, P %.1f s\n", peer[0][1].warmup_s,
               peer[1][1].warmup_s);

    /* ratios and targets */
    if (peer[0][0].ok) vs_eager = rg.tok_s / peer[0][0].tok_s;
    if (peer[0][1].ok) vs_compile = rg.tok_s / peer[0][1].tok_s;
    if (peak > 0) mfu = fpt_g * rg.tok_s / (peak * 1e12);
    if (paper_ok && rpaper.ok) paper_ratio = (rpaper.step_ms / ((double)BP * TP)) / (rg.step_ms / ((double)B * T));
    printf("\nG (softmax baseline): vs_torch_eager=%.3f (target >= 1.0: %s) vs_torch_compile=%.3f mfu=%.3f (target "
           ">= 0.35: %s)\n",
           vs_eager, btc_verdict(vs_eager, 1.0, 1), vs_compile, mfu, btc_verdict(mfu, 0.35, 1));
    if (rp.ok) {
        double pe = peer[1][0].ok ? rp.tok_s / peer[1][0].tok_s : -1.0;
        double pc = peer[1][1].ok ? rp.tok_s / peer[1][1].tok_s : -1.0;
        printf("P (plain stand-in, not the recipe): vs_torch_eager=%.3f vs_torch_compile=%.3f mfu=%.3f; time per token "
               "/ G's = %.3f (information only)\n",
               pe, pc, peak > 0 ? fpt_p * rp.tok_s / (peak * 1e12) : -1.0,
               (rp.step_ms / ((double)BP * TP)) / (rg.step_ms / ((double)B * T)));
    }
    if (paper_ok && rpaper.ok)
        printf("paper recipe: step time per token / G's = %.3f (target <= 1.5: %s)\n", paper_ratio,
               btc_verdict(paper_ratio, 1.5, 0));
    else
        printf("paper recipe: step time per token / G's = n/a (target <= 1.5: n/a; the device model does not run "
               "the preset yet: %s)\n",
               paper_ok ? "its run failed" : perr);
    printf("bench_train_cuda: vs_torch_eager=%.3f mfu=%.3f\n", vs_eager, mfu);
    (void)mdl_device_release();
    return rp.ok && (!paper_ok || rpaper.ok) ? 0 : 1;
}
