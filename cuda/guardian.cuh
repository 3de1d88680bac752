/* cuda/guardian.cuh - CUDA bodies of guardian.h's *_cuda entry points: the weight
   averaging a GPU trainer runs every step on device-resident weights (the EMA of the
   weights, the SWA running mean). The controllers (SWA-select, Guardian, GAC, the
   schedules) stay scalar host code.

   Not a header of its own: guardian.h includes it at the end of its implementation
   section when compiled by nvcc (GUARDIAN_IMPLEMENTATION + __CUDACC__), or by a C++
   compiler with ATTNKIT_CUDA_SIM (tests/cuda_sim.h included first). It needs nothing
   but guardian.h and the CUDA runtime: copy guardian.h and cuda/guardian.cuh.

   Kernels: one grid-stride loop over the n elements (GUARDIAN__NT threads per block,
   at most GUARDIAN__MAXB blocks), one element per thread per iteration, each element
   read and written by one thread (no reductions, no atomics: deterministic).
     EMA: ema[i] = fma(a, ema[i], b * w[i]) with a = decay, b = 1.0f - decay computed
          on the host exactly as guardian_ema_update computes them.
     SWA: the first snapshot is a device-to-device copy (as the CPU's memcpy); later
          ones avg[i] = fma(w[i] - avg[i], k, avg[i]), k = (float)(1.0 / (n_averaged + 1))
          computed on the host in double and rounded to float, as the CPU.
   Every product, difference and fma is rounded as written (__fmul_rn, __fsub_rn,
   __fmaf_rn: nvcc may not fuse or split them), as the CPU's fmaf expressions: an
   explicit fma on both sides, so neither compiler's contraction changes a bit (the first
   GPU run, 2026-11-27, found the host side contracted a * e + b * w by g++ -std=c++17
   -march=x86-64-v3 while the device rounded each product).
   Parity with the CPU path (tests/parity_guardian.cu): bit-identical, element by element
   (0 ulp), under the conditions guardian.h's CUDA section states (the host compiler does
   not contract the CPU expressions into FMAs; no flush-to-zero on either side). NaN
   payloads may differ. */
#ifdef ATTNKIT_CUDA_SIM
#define GUARDIAN__LAUNCH(k, g, b, st, ...) ATTNKIT_SIM_LAUNCH(k, g, b, 0, st, __VA_ARGS__)
#else
#include <cuda_runtime.h>
#define GUARDIAN__LAUNCH(k, g, b, st, ...) k<<<(g), (b), 0, (st)>>>(__VA_ARGS__)
#endif
#include <stdio.h>

#define GUARDIAN__NT 256    /* threads per block */
#define GUARDIAN__MAXB 4096 /* most blocks per launch (grid-stride beyond) */

/* Each operation below is rounded as written (__fmul_rn, __fsub_rn, __fmaf_rn; the
   simulation's tests/cuda_sim.h has the same intrinsics, kept apart from the host
   compiler's contraction). */
/* ema (n) <- fma(a, ema, b * w): the CPU's `fmaf(a, ema[i], b * w[i])` */
static __global__ void guardian__k_ema(float *ema, const float *w, int64_t n, float a, float b)
{
    int64_t i = (int64_t)blockIdx.x * GUARDIAN__NT + (int64_t)threadIdx.x;
    const int64_t step = (int64_t)gridDim.x * GUARDIAN__NT;
    for (; i < n; i += step) ema[i] = __fmaf_rn(a, ema[i], __fmul_rn(b, w[i]));
}

/* avg (n) <- fma(w - avg, k, avg): the CPU's `avg[i] = fmaf(w[i] - avg[i], k, avg[i])` */
static __global__ void guardian__k_swa(float *avg, const float *w, int64_t n, float k)
{
    int64_t i = (int64_t)blockIdx.x * GUARDIAN__NT + (int64_t)threadIdx.x;
    const int64_t step = (int64_t)gridDim.x * GUARDIAN__NT;
    for (; i < n; i += step) {
        const float x = avg[i];
        avg[i] = __fmaf_rn(__fsub_rn(w[i], x), k, x);
    }
}

/* ------------------------------------------------------------ host side */
static int guardian__is_dev(const void *p)
{
    cudaPointerAttributes a;
    if (!p) return 0;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* the error of the last launch or copy: GUARDIAN_OK, or GUARDIAN_ECUDA with the CUDA
   error's text in the log */
static int guardian__cuda_rc(cudaError_t e, const char *fn)
{
    char msg[256];
    if (e == cudaSuccess) return GUARDIAN_OK;
    (void)cudaGetLastError();
    snprintf(msg, sizeof msg, "%s: %s", fn, cudaGetErrorString(e));
    return guardian__fail(GUARDIAN_ECUDA, msg);
}

static unsigned guardian__blocks(int64_t n)
{
    const int64_t b = (n + GUARDIAN__NT - 1) / GUARDIAN__NT;
    return (unsigned)(b < GUARDIAN__MAXB ? b : GUARDIAN__MAXB);
}

/* n floats must be addressable in one size_t */
static int guardian__n_fits(int64_t n) { return (uint64_t)n <= (uint64_t)((size_t)-1 / sizeof(float)); }

GUARDIANDEF int guardian_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

GUARDIANDEF int guardian_ema_update_cuda(float *ema, const float *w, int64_t n, float decay,
                                         guardian_stream stream)
{
    const cudaStream_t st = (cudaStream_t)stream;
    float a, b;
    if (!ema || !w || n < 1 || !guardian__finite(decay) || decay < 0 || decay > 1)
        return guardian__fail(GUARDIAN_EINVAL, "guardian_ema_update_cuda: ema and w must be non-NULL, "
                                               "n >= 1 and decay in [0, 1]");
    if (!guardian__n_fits(n)) return guardian__fail(GUARDIAN_ERANGE, "guardian_ema_update_cuda: n too large");
    if (!guardian__is_dev(ema) || !guardian__is_dev(w))
        return guardian__fail(GUARDIAN_EINVAL, "guardian_ema_update_cuda: ema and w must be device pointers");
    a = decay; /* as guardian_ema_update */
    b = 1.0f - decay;
    GUARDIAN__LAUNCH(guardian__k_ema, guardian__blocks(n), GUARDIAN__NT, st, ema, w, n, a, b);
    return guardian__cuda_rc(cudaGetLastError(), "guardian_ema_update_cuda");
}

GUARDIANDEF int guardian_swa_offer_cuda(guardian_swa *s, float *avg, const float *w, int64_t n,
                                        int64_t epoch, float ce_entry, float ce, int *taken,
                                        guardian_stream stream)
{
    const cudaStream_t st = (cudaStream_t)stream;
    int take = 0, rc;
    float k;
    if (!s || !avg || !w || n < 1)
        return guardian__fail(GUARDIAN_EINVAL, "guardian_swa_offer_cuda: s, avg and w must be non-NULL and n >= 1");
    rc = guardian_swa_select(&s->cfg, epoch, ce_entry, ce, &take);
    if (rc != GUARDIAN_OK)
        return guardian__fail(rc, "guardian_swa_offer_cuda: bad config, epoch < 0, or ce / ce_entry "
                                  "not finite or ce_entry <= 0");
    if (!guardian__n_fits(n)) return guardian__fail(GUARDIAN_ERANGE, "guardian_swa_offer_cuda: n too large");
    if (!guardian__is_dev(avg) || !guardian__is_dev(w))
        return guardian__fail(GUARDIAN_EINVAL, "guardian_swa_offer_cuda: avg and w must be device pointers");
    if (take) {
        if (s->n_averaged == 0) {
            /* exact, as the CPU's memcpy: avg may hold garbage */
            rc = avg == w ? GUARDIAN_OK
                          : guardian__cuda_rc(cudaMemcpyAsync(avg, w, sizeof(float) * (size_t)n,
                                                              cudaMemcpyDeviceToDevice, st),
                                              "guardian_swa_offer_cuda");
        } else {
            k = (float)(1.0 / (double)(s->n_averaged + 1)); /* as guardian_swa_offer */
            GUARDIAN__LAUNCH(guardian__k_swa, guardian__blocks(n), GUARDIAN__NT, st, avg, w, n, k);
            rc = guardian__cuda_rc(cudaGetLastError(), "guardian_swa_offer_cuda");
        }
        if (rc != GUARDIAN_OK) return rc; /* the state is untouched */
    }
    s->n_offered++;
    if (taken) *taken = take;
    if (take) s->n_averaged++;
    return GUARDIAN_OK;
}
