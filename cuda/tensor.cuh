/* cuda/tensor.cuh - CUDA bodies of tensor.h's *_cuda entry points.

   Not a standalone header: tensor.h includes it inside its implementation section
   when compiled by nvcc (TENSOR_IMPLEMENTATION + __CUDACC__). Every function takes
   device pointers and a stream (tk_stream == cudaStream_t), validates its scalar
   arguments like the CPU path, launches, and returns TK_ECUDA if a launch or a
   cuBLAS call fails.

   Numerics and parity tolerances (checked by tests/parity_tensor.cu against the CPU
   path of tensor.h):
     GEMM / matmul   cuBLAS SGEMM in its default FP32 math mode (no TF32):
                     |gpu - cpu| <= 1e-4 * sum_k |a_ik b_kj| per element (tested as
                     rtol 1e-4 on K-normalised data, atol 1e-4). With tk_cuda_set_math
                     TF32 / BF16 (cublasGemmEx, FAST_TF32 / FAST_16BF): each input rounded
                     (or truncated: either is allowed) to 10 / 7 mantissa bits, so per
                     element |gpu - cpu| <= e * sum_k |a_ik b_kj| with e = 2^-9 (tf32) and
                     2^-7 (bf16): the two inputs' relative errors (<= 2^-10 / 2^-8 each
                     when truncated) plus fp32 accumulation.
     layernorm       two-pass mean/variance in fp32 per row: rtol 1e-5, atol 1e-5.
     gelu, adamw     element-wise, same formulas: rtol 1e-5, atol 1e-6 (adamw 1e-6).
     softmax, CE     block reductions in a different order: rtol 1e-5, atol 1e-6.
     embedding       exact (the same additions in the same order).
     relu2, gated relu2  the CPU's products in its order: forward exact; backward
                     rtol 1e-5, atol 1e-6 (nvcc contracts the += into an fma).
     silu            expf against the CPU's polynomial exp: rtol 1e-5, atol 1e-6.
     rope            angle in double (pow, cos, sin) rounded to float as on the CPU, the
                     rotation's two products may be fused: rtol 1e-5, atol 1e-6 (|x| ~ 1).
     CE in place     per-thread online max/sum merged over the block (fp32), row scalars
                     in double: probs rtol 1e-5 atol 1e-7, losses / ce rtol 1e-5 atol
                     1e-5; backward (element-wise, same operations) rtol 1e-5 atol 1e-7.
                     Measured in the simulation (tests/parity_tensor.cu, V up to 5003,
                     eps 0 and 0.1): probs 2.4e-7, losses 1.1e-7 relative; silu 6.2e-7;
                     relu2, gated relu2, rope, CE backward bit-identical there (no fma).
     rmsnorm         one warp per row, the CPU's expressions, row sums in the warp's
                     order: out, rstd, dinp rtol 1e-5 with atol 1e-6 of the scale of what
                     was written (dinp: added; its two terms cancel); dw (fixed row chunks
                     of 128, then the chunks in order) rtol 1e-5, atol 1e-5 of the added
                     scale. Measured in the simulation (N up to 300, C up to 1000): out
                     4.4e-7, rstd 3.3e-7, dinp 3.4e-7, dw 3.9e-7 of the scale.
     residual, heads exact (one addition per element; copies).
     seeded dropout  forward: mask and out bit-identical (tensor.h's integer hash
                     tk__dropout_keep, compiled for both; the host's key and scale; one
                     product per kept element). Backward: bit-identical, dinp +=
                     __fmul_rn(dout, scale) (a separately rounded product, which nvcc
                     cannot fuse into an fma) equals the CPU's dinp += dout * scale where
                     the host compiler does not contract it (GCC in ISO mode, as the
                     tests build; any target without FMA); a CPU build that fuses it
                     (clang's default -ffp-contract=on with FMA) differs by one rounding
                     at most. Checked with memcmp (n 1 to 65537, p 0, 0.1, 0.9):
                     bit-identical in the simulation (g++, clang++); not yet run on a GPU.
                     Only a kept NaN may differ in its payload (the GPU returns the
                     canonical NaN); p == 0 copies bits. Assumes no --use_fast_math (its
                     flush-to-zero would zero denormal products).
     grad norm, clip squares summed in double on both sides (in other orders), the root
                     rounded to float: norm rtol 1e-6, clipped g rtol 1e-6 (bit-identical
                     in the simulation).
     sigmoid         expf against the CPU's polynomial exp: rtol 1e-6 (atol 1e-30: below
                     x = -88 the CPU's clamped exp gives ~6e-39 where the device gives 0);
                     backward: the CPU's products, the last one unfused (__fmul_rn): rtol
                     1e-6, atol 1e-7 (exact where the host does not contract).
     rowscale, residual_rows, gather, combine forward and dsrc
                     the CPU's products and float sums in its order (k = 0..K-1), products
                     unfused: rtol 1e-6, atol 1e-7 (exact where the host compiler does not
                     contract: a CPU build with FMA contraction, clang -march=x86-64-v3,
                     differs by a rounding per term); gather exact.
     rowdot, combine dw  one warp per row, double lane sums + butterfly (the CPU: 4 double
                     partials), added to the float output in double, rounded once: rtol
                     1e-5, atol 1e-6.
     causal mean gate  the CPU's double arithmetic (running sums, exp in double, the heads
                     summed in order), one thread per (b,h) / (b,t): sig rtol 1e-6, g and
                     dz rtol 1e-5 (only the double exp's last bit may differ).
                     Measured in the simulation (tests/parity_tensor.cu: n up to 10007, C up
                     to 777, T up to 300, H up to 256, K up to 3): sigmoid forward 1.6e-7
                     relative, everything else bit-identical; not yet run on a GPU.
   Determinism: no atomics. The embedding scatter is done by one thread per output in a
   fixed order (the positions in order; threads split by channel and id % 64), so results
   are bit-identical run to run. The bias/column sums (matmul db, LayerNorm dw and db),
   the RMSNorm weight gradient and the gradient norm reduce in two fixed-order stages
   (per-block partials over chunks of 128 rows, then one pass over them), with grids that
   depend on the shapes only: C threads walking N = B*T rows alone would leave the GPU
   idle (a few SMs, latency-bound) at training shapes. tk_rowdot and the combine's dw
   reduce one row per warp (fixed butterfly); the combine's dsrc scatter writes each
   element from one thread when the idx entries are distinct (repeats race: documented
   in tensor.h).

   A single cuBLAS handle is created on first use (not thread-safe to create from
   two host threads at once) and reused; each call binds it to the caller's stream. */
#ifdef ATTNKIT_CUDA_SIM
/* CPU simulation (tests/cuda_sim.h, included by the test before this file): same source. */
#define TK__LAUNCH(k, grid, block, smem, stream, ...) ATTNKIT_SIM_LAUNCH(k, grid, block, smem, stream, __VA_ARGS__)
#else
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <mma.h>       /* nvcuda::wmma: the attention's tensor-core path */
#include <cuda_bf16.h>
/* k<<<grid, block, smem, stream>>>(args...), written so the CPU simulation can run it too */
#define TK__LAUNCH(k, grid, block, smem, stream, ...) k<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#endif
/* a * b + c with one rounding: the CPU's fmaf in the CPU's order. An explicit fma on both
   sides gives the same bits whatever either compiler contracts (nvcc fuses a * b + c by
   default; g++ in C++ mode and clang do where the target has FMA) */
#define TK__FMA(a, b, c) __fmaf_rn((a), (b), (c))

static cublasHandle_t tk__cublas = NULL;

static int tk__cuda_check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess)
        return tk__fail(TK_ECUDA, "%s: %s", what, cudaGetErrorString(e));
    return TK_OK;
}

static int tk__cublas_get(cudaStream_t stream, cublasHandle_t *out)
{
    if (!tk__cublas) {
        if (cublasCreate(&tk__cublas) != CUBLAS_STATUS_SUCCESS) {
            tk__cublas = NULL;
            return tk__fail(TK_ECUDA, "cublasCreate failed");
        }
    }
    if (cublasSetStream(tk__cublas, stream) != CUBLAS_STATUS_SUCCESS)
        return tk__fail(TK_ECUDA, "cublasSetStream failed");
    *out = tk__cublas;
    return TK_OK;
}

static int tk__launched(const char *what) { return tk__cuda_check(cudaGetLastError(), what); }

/* The device ops' temporaries (the index and attention flags, per-block partial sums, the
   attention backward's row terms) come from one cached buffer per (device, stream), grown
   on demand with cudaMalloc and kept until tk_cuda_release: a call in steady state
   allocates nothing. An op takes its whole scratch in one request, uses it only through
   work queued on its stream and takes no other scratch meanwhile. Reuse is safe in
   stream order (the next op on the same stream runs after this one's kernels); growing
   frees the old buffer with cudaFree, which waits for the device first, as does evicting
   a slot when more than TK__SCRATCH_SLOTS (device, stream) pairs have been used. Like
   the shared cuBLAS handle, this is process state: device ops from several host threads
   at once are not supported, and a stream should be destroyed only once its work is done
   (a new stream may reuse its handle, hence its scratch). */
#define TK__SCRATCH_SLOTS 8
typedef struct tk__scratch_slot {
    int dev;
    cudaStream_t s;
    void *p;
    size_t bytes;
} tk__scratch_slot;
static tk__scratch_slot tk__scratch[TK__SCRATCH_SLOTS];
static int tk__nscratch = 0;

static void tk__scratch_drop(tk__scratch_slot *e)
{
    int cur = 0;
    if (e->p) {
        if (cudaGetDevice(&cur) == cudaSuccess && cur != e->dev && cudaSetDevice(e->dev) == cudaSuccess) {
            (void)cudaFree(e->p);
            (void)cudaSetDevice(cur);
        } else {
            (void)cudaFree(e->p);
        }
        (void)cudaGetLastError();
    }
    e->p = NULL;
    e->bytes = 0;
}

/* *out = at least bytes (> 0) of device scratch for work queued on stream s */
static int tk__scratch_get(cudaStream_t s, size_t bytes, void **out, const char *who)
{
    tk__scratch_slot *e = NULL;
    cudaError_t err;
    int dev = 0, i;
    *out = NULL;
    if ((err = cudaGetDevice(&dev)) != cudaSuccess) return tk__cuda_check(err, who);
    for (i = 0; i < tk__nscratch && !e; i++)
        if (tk__scratch[i].dev == dev && tk__scratch[i].s == s) e = &tk__scratch[i];
    if (!e) {
        if (tk__nscratch < TK__SCRATCH_SLOTS) {
            e = &tk__scratch[tk__nscratch++];
        } else { /* the oldest slot goes; the others move up */
            tk__scratch_drop(&tk__scratch[0]);
            memmove(&tk__scratch[0], &tk__scratch[1], (TK__SCRATCH_SLOTS - 1) * sizeof(tk__scratch_slot));
            e = &tk__scratch[TK__SCRATCH_SLOTS - 1];
        }
        e->dev = dev;
        e->s = s;
        e->p = NULL;
        e->bytes = 0;
    }
    if (e->bytes < bytes) {
        size_t nb = bytes < 256 ? 256 : (bytes + 255) / 256 * 256;
        tk__scratch_drop(e);
        if ((err = cudaMalloc(&e->p, nb)) != cudaSuccess) {
            e->p = NULL;
            (void)cudaGetLastError();
            return tk__fail(err == cudaErrorMemoryAllocation ? TK_ENOMEM : TK_ECUDA, "%s: scratch of %zu bytes: %s",
                            who, nb, cudaGetErrorString(err));
        }
        e->bytes = nb;
    }
    *out = e->p;
    return TK_OK;
}

/* frees every cached scratch (the device is idle: tk_cuda_release synchronised it) */
static void tk__scratch_release(void)
{
    int i;
    for (i = 0; i < tk__nscratch; i++) tk__scratch_drop(&tk__scratch[i]);
    tk__nscratch = 0;
}

static unsigned tk__blocks(size_t n, unsigned threads)
{
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : (b > 2147483647u ? 2147483647u : b));
}

TKDEF int tk_cuda_available(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky "insufficient driver" error */
        return 0;
    }
    return n > 0;
}

TKDEF int tk_cuda_release(void)
{
    int rc = TK_OK;
    cudaError_t e;
    if (!tk__cublas && !tk__nscratch) return TK_OK;
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
        (void)cudaGetLastError();
        rc = tk__cuda_check(e, "tk_cuda_release");
    }
    tk__scratch_release();
    if (!tk__cublas) return rc;
    if (cublasDestroy(tk__cublas) != CUBLAS_STATUS_SUCCESS && rc == TK_OK)
        rc = tk__fail(TK_ECUDA, "tk_cuda_release: cublasDestroy failed");
    tk__cublas = NULL;
    return rc;
}

/* ------------------------------------------------------------------ GEMM */
TKDEF int tk_sgemm_cuda(int transA, int transB, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta,
                        float *C, int ldc, tk_stream stream)
{
    cublasHandle_t h;
    int rc;
    if (!A || !B || !C) return tk__fail(TK_EINVAL, "tk_sgemm_cuda: NULL pointer");
    if (M <= 0 || N <= 0 || K <= 0)
        return tk__fail(TK_EINVAL, "tk_sgemm_cuda: M, N, K must be > 0 (got %d, %d, %d)", M, N, K);
    if (lda < (transA ? M : K) || ldb < (transB ? K : N) || ldc < N)
        return tk__fail(TK_EINVAL, "tk_sgemm_cuda: leading dimension too small");
    if (!isfinite(alpha) || !isfinite(beta))
        return tk__fail(TK_EINVAL, "tk_sgemm_cuda: alpha and beta must be finite");
    if ((rc = tk__cublas_get((cudaStream_t)stream, &h)) != TK_OK) return rc;
    /* Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap operands. */
    if (tk__cuda_math == TK_MATH_FP32) {
        if (cublasSgemm(h, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                        N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc) != CUBLAS_STATUS_SUCCESS)
            return tk__fail(TK_ECUDA, "tk_sgemm_cuda: cublasSgemm failed");
    } else {
        /* tk_cuda_set_math: fp32 buffers, tf32 / bf16 products on the tensor cores */
        cublasComputeType_t ct = tk__cuda_math == TK_MATH_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                               : CUBLAS_COMPUTE_32F_FAST_16BF;
        if (cublasGemmEx(h, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
                         CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F, ldc, ct,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            return tk__fail(TK_ECUDA, "tk_sgemm_cuda: cublasGemmEx (%s) failed",
                            tk__cuda_math == TK_MATH_TF32 ? "tf32" : "bf16");
    }
    return TK_OK;
}

/* out (N,OC): every row = b (OC) */
static __global__ void tk__k_rows_set(float *out, const float *b, int N, int OC)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)N * OC) out[i] = b[i % OC];
}

/* Column reductions of an (N,C) gradient: db (C) += sum_r dout[r], and the norms' weight
   gradient dw (C) += sum_r dout[r] (inp[r] - mean_r) rstd_r (LayerNorm), or
   sum_r dout[r] inp[r] rstd_r with mean NULL (RMSNorm). Two fixed-order stages, so that
   thousands of rows are not walked by C threads alone: block (32, 8) owns 32 columns of one
   chunk of `rows` rows (blockIdx.y); thread (x, y) sums rows y, y+8, ... of the chunk in
   order, then the 8 sums are added in order. accumulate: db, dw are the outputs (one
   chunk: +=), else the (nchunk, C) partials. db or dw may be NULL. */
#define TK__CS_CHUNK 128      /* rows per partial */
#define TK__CS_MAXCHUNK 4096  /* at most this many partials (longer chunks beyond) */
static __global__ void tk__k_colsum_part(float *db, float *dw, int accumulate, const float *dout,
                                         const float *inp, const float *mean, const float *rstd,
                                         int N, int C, int rows)
{
    __shared__ float sh[2][8][32];
    int c = (int)(blockIdx.x * 32 + threadIdx.x), r0 = (int)blockIdx.y * rows, r1, r, j;
    float ab = 0.0f, aw = 0.0f;
    r1 = N - r0 < rows ? N : r0 + rows;
    if (c < C)
        for (r = r0 + (int)threadIdx.y; r < r1; r += 8) {
            const float g = dout[(size_t)r * C + c];
            ab += g;
            if (dw) aw += g * (mean ? inp[(size_t)r * C + c] - mean[r] : inp[(size_t)r * C + c]) * rstd[r];
        }
    sh[0][threadIdx.y][threadIdx.x] = ab;
    sh[1][threadIdx.y][threadIdx.x] = aw;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (j = 1; j < 8; j++) {
            ab += sh[0][j][threadIdx.x];
            aw += sh[1][j][threadIdx.x];
        }
        if (accumulate) {
            if (db) db[c] += ab;
            if (dw) dw[c] += aw;
        } else {
            if (db) db[(size_t)blockIdx.y * C + c] = ab;
            if (dw) dw[(size_t)blockIdx.y * C + c] = aw;
        }
    }
}

/* dst (C) += the partials (nchunk, C) summed over chunks in order: one thread per column */
static __global__ void tk__k_colsum_sum(float *dst, const float *part, int nchunk, int C)
{
    int c = (int)(blockIdx.x * blockDim.x + threadIdx.x), k;
    float acc = 0.0f;
    if (c >= C) return;
    for (k = 0; k < nchunk; k++) acc += part[(size_t)k * C + c];
    dst[c] += acc;
}

/* launches the column reductions above (inp, mean, rstd only with dw) */
static int tk__colsum_cuda(const char *fn, float *db, float *dw, const float *dout, const float *inp,
                           const float *mean, const float *rstd, int N, int C, cudaStream_t s)
{
    int rows = TK__CS_CHUNK, nchunk = (N + TK__CS_CHUNK - 1) / TK__CS_CHUNK, rc;
    float *part = NULL;
    if (nchunk > TK__CS_MAXCHUNK) {
        rows = (int)(((size_t)N + TK__CS_MAXCHUNK - 1) / TK__CS_MAXCHUNK);
        nchunk = (N + rows - 1) / rows;
    }
    const dim3 grid((unsigned)((C + 31) / 32), (unsigned)nchunk), block(32, 8);
    if (nchunk == 1) {
        TK__LAUNCH(tk__k_colsum_part, grid, block, 0, s, db, dw, 1, dout, inp, mean, rstd, N, C, rows);
        return tk__launched(fn);
    }
    /* the partials: db's (if any), then dw's */
    const size_t np = (size_t)((db != NULL) + (dw != NULL)) * nchunk * C;
    if ((rc = tk__scratch_get(s, np * sizeof(float), (void **)&part, fn)) != TK_OK) return rc;
    {
        float *pb = db ? part : NULL, *pw = dw ? part + (db ? (size_t)nchunk * C : 0) : NULL;
        TK__LAUNCH(tk__k_colsum_part, grid, block, 0, s, pb, pw, 0, dout, inp, mean, rstd, N, C, rows);
        rc = tk__launched(fn);
        if (rc == TK_OK && db) {
            TK__LAUNCH(tk__k_colsum_sum, tk__blocks((size_t)C, 256), 256, 0, s, db, (const float *)pb, nchunk, C);
            rc = tk__launched(fn);
        }
        if (rc == TK_OK && dw) {
            TK__LAUNCH(tk__k_colsum_sum, tk__blocks((size_t)C, 256), 256, 0, s, dw, (const float *)pw, nchunk, C);
            rc = tk__launched(fn);
        }
    }
    return rc;
}

TKDEF int tk_matmul_forward_cuda(float *out, const float *inp, const float *W,
                                 const float *b, int N, int C, int OC, tk_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if (!out || !inp || !W) return tk__fail(TK_EINVAL, "tk_matmul_forward_cuda: NULL pointer");
    if (N <= 0 || C <= 0 || OC <= 0)
        return tk__fail(TK_EINVAL, "tk_matmul_forward_cuda: N, C, OC must be > 0");
    if (b) {
        TK__LAUNCH(tk__k_rows_set, tk__blocks((size_t)N * OC, 256), 256, 0, s, out, b, N, OC);
        if ((rc = tk__launched("tk_matmul_forward_cuda")) != TK_OK) return rc;
    }
    return tk_sgemm_cuda(0, 1, N, OC, C, 1.0f, inp, C, W, C, b ? 1.0f : 0.0f, out, OC, stream);
}

TKDEF int tk_matmul_backward_cuda(float *dinp, float *dW, float *db, const float *dout,
                                  const float *inp, const float *W, int N, int C, int OC,
                                  tk_stream stream)
{
    int rc;
    /* as the CPU's: W is needed only for dinp, inp only for dW */
    if (!dout || (dinp && !W) || (dW && !inp))
        return tk__fail(TK_EINVAL, "tk_matmul_backward_cuda: NULL pointer (dout; W with dinp; inp with dW)");
    if (N <= 0 || C <= 0 || OC <= 0)
        return tk__fail(TK_EINVAL, "tk_matmul_backward_cuda: N, C, OC must be > 0");
    if (dinp && (rc = tk_sgemm_cuda(0, 0, N, C, OC, 1.0f, dout, OC, W, C, 1.0f, dinp, C, stream)) != TK_OK)
        return rc;
    if (dW && (rc = tk_sgemm_cuda(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dW, C, stream)) != TK_OK)
        return rc;
    if (db)
        return tk__colsum_cuda("tk_matmul_backward_cuda", db, NULL, dout, NULL, NULL, NULL, N, OC,
                               (cudaStream_t)stream);
    return TK_OK;
}

/* --------------------------------------------------- index range checks */
/* *bad = 1 if any ids[i] is outside [0, V) */
static __global__ void tk__k_check_ids(int *bad, const int *ids, size_t n, int V)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && (ids[i] < 0 || ids[i] >= V)) *bad = 1;
}

/* Returns TK_ERANGE if an id is outside [0,V): one small device->host copy (syncs the
   stream), which keeps the CPU contract "bad id: error, nothing written". */
static int tk__cuda_ids_in_range(const int *ids, size_t n, int V, cudaStream_t s, const char *who)
{
    int *dbad = NULL, hbad = 0, rc;
    if ((rc = tk__scratch_get(s, sizeof(int), (void **)&dbad, who)) != TK_OK) return rc;
    rc = tk__cuda_check(cudaMemsetAsync(dbad, 0, sizeof(int), s), who);
    if (rc == TK_OK) {
        TK__LAUNCH(tk__k_check_ids, tk__blocks(n, 256), 256, 0, s, dbad, ids, n, V);
        rc = tk__launched(who);
    }
    if (rc == TK_OK) rc = tk__cuda_check(cudaMemcpyAsync(&hbad, dbad, sizeof(int), cudaMemcpyDeviceToHost, s), who);
    if (rc == TK_OK) rc = tk__cuda_check(cudaStreamSynchronize(s), who);
    if (rc != TK_OK) return rc;
    return hbad ? tk__fail(TK_ERANGE, "%s: an index is outside [0, %d)", who, V) : TK_OK;
}

/* The deferred form (status a device int): the same kernel sets *status, nothing waits;
   the kernels below skip an out-of-range index themselves. The status pointer is checked
   like tk_attention_cuda_config.status (one pointer query). */
static int tk__cuda_ids_deferred(const int *ids, size_t n, int V, int *status, cudaStream_t s, const char *who)
{
    if (!tk__is_device_ptr(status)) return tk__fail(TK_EINVAL, "%s: status is not a device pointer", who);
    TK__LAUNCH(tk__k_check_ids, tk__blocks(n, 256), 256, 0, s, status, ids, n, V);
    return tk__launched(who);
}
static int tk__cuda_ids_check(const int *ids, size_t n, int V, int *status, cudaStream_t s, const char *who)
{
    return status ? tk__cuda_ids_deferred(ids, n, V, status, s, who) : tk__cuda_ids_in_range(ids, n, V, s, who);
}

/* ------------------------------------------------------------- embedding */
static __global__ void tk__k_embed_fwd(float *out, const int *ids, const float *wte, const float *wpe,
                                int BT, int T, int C, int V)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t bt, c;
    float x;
    int id;
    if (i >= (size_t)BT * C) return;
    bt = i / C;
    c = i % C;
    id = ids[bt];
    x = id >= 0 && id < V ? wte[(size_t)id * C + c] : 0.0f; /* (a deferred check's bad id: a zero row) */
    if (wpe) x += wpe[(bt % T) * C + c];
    out[i] = x;
}

/* dwte: thread (channel c, id class k = blockIdx.y) walks every position in order and adds
   those whose id % TK__EMB_K == k: each element of dwte is still updated by one thread with
   the positions in order (deterministic, no atomics, the same sums as one thread per
   channel), but TK__EMB_K times as many threads share the B*T-long chain of dependent
   read-modify-writes (C threads alone: tens of ms at B*T = 32768) */
#define TK__EMB_K 64
static __global__ void tk__k_embed_bwd_wte(float *dwte, const float *dout, const int *ids, int BT, int C, int V)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, k = (int)blockIdx.y;
    int p;
    if (c >= C) return;
    for (p = 0; p < BT; p++) {
        const int id = ids[p];
        if (id >= 0 && id < V && id % TK__EMB_K == k) dwte[(size_t)id * C + c] += dout[(size_t)p * C + c];
    }
}

/* dwpe (T,C) += sum over batch */
static __global__ void tk__k_embed_bwd_wpe(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    int b;
    if (i >= (size_t)T * C) return;
    for (b = 0; b < B; b++) acc += dout[(size_t)b * T * C + i];
    dwpe[i] += acc;
}

TKDEF int tk_embedding_forward_cuda_ex(float *out, const int *ids, const float *wte,
                                       const float *wpe, int B, int T, int C, int V,
                                       int *status, tk_stream stream)
{
    static const char *fn = "tk_embedding_forward_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if (!out || !ids || !wte) return tk__fail(TK_EINVAL, "%s: NULL pointer", fn);
    if (B <= 0 || T <= 0 || C <= 0 || V <= 0) return tk__fail(TK_EINVAL, "%s: B, T, C, V must be > 0", fn);
    if ((rc = tk__cuda_ids_check(ids, (size_t)B * T, V, status, s, fn)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_embed_fwd, tk__blocks((size_t)B * T * C, 256), 256, 0, s, out, ids, wte, wpe, B * T, T, C, V);
    return tk__launched(fn);
}

TKDEF int tk_embedding_forward_cuda(float *out, const int *ids, const float *wte,
                                    const float *wpe, int B, int T, int C, int V,
                                    tk_stream stream)
{
    return tk_embedding_forward_cuda_ex(out, ids, wte, wpe, B, T, C, V, NULL, stream);
}

TKDEF int tk_embedding_backward_cuda_ex(float *dwte, float *dwpe, const float *dout,
                                        const int *ids, int B, int T, int C, int V,
                                        int *status, tk_stream stream)
{
    static const char *fn = "tk_embedding_backward_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if (!dout || !ids) return tk__fail(TK_EINVAL, "%s: NULL pointer", fn);
    if (B <= 0 || T <= 0 || C <= 0 || V <= 0) return tk__fail(TK_EINVAL, "%s: B, T, C, V must be > 0", fn);
    if (dwte) {
        if ((rc = tk__cuda_ids_check(ids, (size_t)B * T, V, status, s, fn)) != TK_OK) return rc;
        TK__LAUNCH(tk__k_embed_bwd_wte, dim3(tk__blocks((size_t)C, 128), TK__EMB_K), 128, 0, s, dwte, dout, ids,
                   B * T, C, V);
        if ((rc = tk__launched(fn)) != TK_OK) return rc;
    }
    if (dwpe) {
        TK__LAUNCH(tk__k_embed_bwd_wpe, tk__blocks((size_t)T * C, 256), 256, 0, s, dwpe, dout, B, T, C);
        if ((rc = tk__launched(fn)) != TK_OK) return rc;
    }
    return TK_OK;
}

TKDEF int tk_embedding_backward_cuda(float *dwte, float *dwpe, const float *dout,
                                     const int *ids, int B, int T, int C, int V,
                                     tk_stream stream)
{
    return tk_embedding_backward_cuda_ex(dwte, dwpe, dout, ids, B, T, C, V, NULL, stream);
}

/* ------------------------------------------------------- block reductions */
#define TK__CUDA_THREADS 256

static __device__ float tk__block_sum(float v, float *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5, o;
    for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (unsigned)nw) ? sh[threadIdx.x] : 0.0f;
    if (warp == 0)
        for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

static __device__ float tk__block_max(float v, float *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5, o;
    for (o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = (threadIdx.x < (unsigned)nw) ? sh[threadIdx.x] : -INFINITY;
    if (warp == 0)
        for (o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (threadIdx.x == 0) sh[0] = v;
    __syncthreads();
    v = sh[0];
    __syncthreads();
    return v;
}

/* ------------------------------------------------------------- layernorm */
/* one block per row: two-pass mean and variance */
static __global__ void tk__k_ln_fwd(float *out, float *mean, float *rstd, const float *inp,
                             const float *w, const float *b, int C, float eps)
{
    __shared__ float sh[32];
    const float *x = inp + (size_t)blockIdx.x * C;
    float *y = out + (size_t)blockIdx.x * C;
    float m = 0.0f, v = 0.0f, r;
    int i;
    for (i = threadIdx.x; i < C; i += blockDim.x) m += x[i];
    m = tk__block_sum(m, sh) / C;
    for (i = threadIdx.x; i < C; i += blockDim.x) { float d = x[i] - m; v += d * d; }
    v = tk__block_sum(v, sh) / C;
    r = rsqrtf(v + eps);
    for (i = threadIdx.x; i < C; i += blockDim.x)
        y[i] = (x[i] - m) * r * w[i] + (b ? b[i] : 0.0f);
    if (threadIdx.x == 0) {
        if (mean) mean[blockIdx.x] = m;
        if (rstd) rstd[blockIdx.x] = r;
    }
}

/* dinp, one block per row: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * w */
static __global__ void tk__k_ln_bwd_inp(float *dinp, const float *dout, const float *inp, const float *w,
                                 const float *mean, const float *rstd, int C)
{
    __shared__ float sh[32];
    size_t off = (size_t)blockIdx.x * C;
    float m = mean[blockIdx.x], r = rstd[blockIdx.x], sg = 0.0f, sgx = 0.0f;
    int i;
    for (i = threadIdx.x; i < C; i += blockDim.x) {
        float g = dout[off + i] * w[i], xh = (inp[off + i] - m) * r;
        sg += g;
        sgx += g * xh;
    }
    sg = tk__block_sum(sg, sh) / C;
    sgx = tk__block_sum(sgx, sh) / C;
    for (i = threadIdx.x; i < C; i += blockDim.x) {
        float g = dout[off + i] * w[i], xh = (inp[off + i] - m) * r;
        dinp[off + i] += r * (g - sg - xh * sgx);
    }
}

TKDEF int tk_layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                                    const float *w, const float *b, int N, int C, float eps,
                                    tk_stream stream)
{
    if (!out || !inp || !w) return tk__fail(TK_EINVAL, "tk_layernorm_forward_cuda: NULL pointer");
    if (N <= 0 || C <= 0) return tk__fail(TK_EINVAL, "tk_layernorm_forward_cuda: N, C must be > 0");
    if (!(eps > 0.0f) || !isfinite(eps))
        return tk__fail(TK_EINVAL, "tk_layernorm_forward_cuda: eps must be finite and > 0");
    TK__LAUNCH(tk__k_ln_fwd, N, TK__CUDA_THREADS, 0, (cudaStream_t)stream, out, mean, rstd, inp, w, b, C, eps);
    return tk__launched("tk_layernorm_forward_cuda");
}

TKDEF int tk_layernorm_backward_cuda(float *dinp, float *dw, float *db, const float *dout,
                                     const float *inp, const float *w, const float *mean,
                                     const float *rstd, int N, int C, tk_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if (!dout || !inp || !w || !mean || !rstd)
        return tk__fail(TK_EINVAL, "tk_layernorm_backward_cuda: NULL pointer");
    if (N <= 0 || C <= 0) return tk__fail(TK_EINVAL, "tk_layernorm_backward_cuda: N, C must be > 0");
    if (dinp) {
        TK__LAUNCH(tk__k_ln_bwd_inp, N, TK__CUDA_THREADS, 0, s, dinp, dout, inp, w, mean, rstd, C);
        if ((rc = tk__launched("tk_layernorm_backward_cuda")) != TK_OK) return rc;
    }
    if (dw || db) /* dw, db: the two-stage column reductions (tk__colsum_cuda) */
        return tk__colsum_cuda("tk_layernorm_backward_cuda", db, dw, dout, inp, mean, rstd, N, C, s);
    return TK_OK;
}

/* --------------------------------------------------------------- RMSNorm */
#define TK__RN_WARPS 4        /* rows per block of the row kernels: one warp each */

/* the sum of v over the 32 lanes of a full warp, in every lane (fixed butterfly order) */
static __device__ float tk__warp_sum(float v)
{
    int o;
    for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* one warp per row: rstd = 1 / sqrt(mean(x^2) + eps), out = x * rstd * w (the CPU's
   expressions; the row sum is the warp's) */
static __global__ void tk__k_rms_fwd(float *out, float *rstd, const float *inp, const float *w,
                                     int N, int C, float eps)
{
    int row = (int)(blockIdx.x * TK__RN_WARPS + (threadIdx.x >> 5)), lane = threadIdx.x & 31, c;
    const float *x;
    float *y, ss = 0.0f, s;
    if (row >= N) return; /* the whole warp: no barrier below, only full-warp shuffles */
    x = inp + (size_t)row * C;
    y = out + (size_t)row * C;
    for (c = lane; c < C; c += 32) ss += x[c] * x[c];
    ss = tk__warp_sum(ss);
    s = 1.0f / sqrtf(ss / (float)C + eps);
    for (c = lane; c < C; c += 32) y[c] = x[c] * s * (w ? w[c] : 1.0f);
    if (rstd && lane == 0) rstd[row] = s;
}

/* dinp, one warp per row: dx += r g - r^3 x / C * sum_c g_c x_c, g = w * dout */
static __global__ void tk__k_rms_bwd_inp(float *dinp, const float *dout, const float *inp,
                                         const float *w, const float *rstd, int N, int C)
{
    int row = (int)(blockIdx.x * TK__RN_WARPS + (threadIdx.x >> 5)), lane = threadIdx.x & 31, c;
    const float *x, *go;
    float *dx, s, dot = 0.0f, k;
    if (row >= N) return;
    x = inp + (size_t)row * C;
    go = dout + (size_t)row * C;
    dx = dinp + (size_t)row * C;
    s = rstd[row];
    for (c = lane; c < C; c += 32) dot += go[c] * (w ? w[c] : 1.0f) * x[c];
    dot = tk__warp_sum(dot);
    k = s * s * s * dot / (float)C;
    for (c = lane; c < C; c += 32) dx[c] += s * go[c] * (w ? w[c] : 1.0f) - k * x[c];
}

TKDEF int tk_rmsnorm_forward_cuda(float *out, float *rstd, const float *inp, const float *w,
                                  int N, int C, float eps, tk_stream stream)
{
    static const char *fn = "tk_rmsnorm_forward_cuda";
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    if (!tk__finite(eps) || !(eps > 0.0f))
        return tk__fail(TK_EINVAL, "%s: eps must be finite and > 0 (got %g)", fn, (double)eps);
    TK__LAUNCH(tk__k_rms_fwd, tk__blocks((size_t)N, TK__RN_WARPS), TK__RN_WARPS * 32, 0,
               (cudaStream_t)stream, out, rstd, inp, w, N, C, eps);
    return tk__launched(fn);
}

TKDEF int tk_rmsnorm_backward_cuda(float *dinp, float *dw, const float *dout,
                                   const float *inp, const float *w, const float *rstd,
                                   int N, int C, tk_stream stream)
{
    static const char *fn = "tk_rmsnorm_backward_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, rstd);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    TK__LAUNCH(tk__k_rms_bwd_inp, tk__blocks((size_t)N, TK__RN_WARPS), TK__RN_WARPS * 32, 0, s,
               dinp, dout, inp, w, rstd, N, C);
    if ((rc = tk__launched(fn)) != TK_OK) return rc;
    if (dw) return tk__colsum_cuda(fn, NULL, dw, dout, inp, NULL, rstd, N, C, s);
    return TK_OK;
}

/* ------------------------------------------------------------------ GELU */
#define TK__GELU_K 0.7978845608028654f /* sqrt(2/pi) */

static __global__ void tk__k_gelu_fwd(float *out, const float *inp, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + tanhf(TK__GELU_K * (x + 0.044715f * x * x * x)));
    }
}

static __global__ void tk__k_gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        /* the CPU form: sigmoid(2u) = 1 / (1 + e), e = exp(-2u), and 1 - sigmoid = e sigmoid
           (1 - tanh^2 cancels for large x) */
        float x = inp[i], u = TK__GELU_K * (x + 0.044715f * x * x * x);
        float e = expf(fminf(-2.0f * u, 80.0f)), sg = 1.0f / (1.0f + e);
        float du = TK__GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] += dout[i] * (sg + 2.0f * x * sg * (e * sg) * du);
    }
}

TKDEF int tk_gelu_forward_cuda(float *out, const float *inp, size_t n, tk_stream stream)
{
    if (!out || !inp) return tk__fail(TK_EINVAL, "tk_gelu_forward_cuda: NULL pointer");
    if (n == 0) return tk__fail(TK_EINVAL, "tk_gelu_forward_cuda: n must be > 0");
    TK__LAUNCH(tk__k_gelu_fwd, tk__blocks(n, 256), 256, 0, (cudaStream_t)stream, out, inp, n);
    return tk__launched("tk_gelu_forward_cuda");
}

TKDEF int tk_gelu_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n,
                                tk_stream stream)
{
    if (!dinp || !inp || !dout) return tk__fail(TK_EINVAL, "tk_gelu_backward_cuda: NULL pointer");
    if (n == 0) return tk__fail(TK_EINVAL, "tk_gelu_backward_cuda: n must be > 0");
    TK__LAUNCH(tk__k_gelu_bwd, tk__blocks(n, 256), 256, 0, (cudaStream_t)stream, dinp, inp, dout, n);
    return tk__launched("tk_gelu_backward_cuda");
}

/* ------------------------------------------- relu2, silu, gated relu2, rope */
/* One thread per element (per pair for rope), the CPU's expressions in the CPU's order. */
static __global__ void tk__k_relu2_fwd(float *out, const float *inp, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        out[i] = r * r;
    }
}

static __global__ void tk__k_relu2_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        dinp[i] += 2.0f * r * dout[i];
    }
}

/* sigmoid(x) = 1 / (1 + exp(-x)): exp(-x) = inf gives exactly 0, as the CPU's form */
static __global__ void tk__k_silu_fwd(float *out, const float *inp, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = inp[i];
        out[i] = x * (1.0f / (1.0f + expf(-x)));
    }
}

static __global__ void tk__k_silu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = inp[i], sg = 1.0f / (1.0f + expf(-x));
        dinp[i] += sg * (1.0f + x * (1.0f - sg)) * dout[i];
    }
}

/* k over N*F: row k / F, column k % F of out; inp rows [a | b] of 2F */
static __global__ void tk__k_relu2g_fwd(float *out, const float *inp, int N, int F)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < (size_t)N * F) {
        const float *a = inp + (k / F) * 2 * F + k % F;
        float r = a[0] > 0.0f ? a[0] : 0.0f;
        out[k] = r * r * a[F];
    }
}

static __global__ void tk__k_relu2g_bwd(float *dinp, const float *inp, const float *dout, int N, int F)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < (size_t)N * F) {
        size_t o = (k / F) * 2 * F + k % F;
        const float *a = inp + o;
        float r = a[0] > 0.0f ? a[0] : 0.0f, g = dout[k];
        dinp[o] += g * 2.0f * r * a[F];
        dinp[o + F] += g * r * r;
    }
}

/* k over T * D/2: position t = k / (D/2), pair i = k % (D/2); the angle once (double, as
   the CPU), then every (b, h) from blockIdx.y in steps of gridDim.y */
static __global__ void tk__k_rope(float *x, size_t BH, int T, int D, double base, int inverse)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x, bh;
    int half = D / 2, t, i;
    double ang;
    float cs, sn;
    if (k >= (size_t)T * half) return;
    t = (int)(k / half);
    i = (int)(k % half);
    ang = (double)t * pow(base, -2.0 * i / (double)D);
    cs = (float)cos(ang);
    sn = (float)(inverse ? -sin(ang) : sin(ang));
    for (bh = blockIdx.y; bh < BH; bh += gridDim.y) {
        float *p = x + (bh * T + t) * D + 2 * i, x0 = p[0], x1 = p[1];
        p[0] = x0 * cs - x1 * sn;
        p[1] = x0 * sn + x1 * cs;
    }
}

TKDEF int tk_relu2_forward_cuda(float *out, const float *inp, size_t n, tk_stream stream)
{
    static const char *fn = "tk_relu2_forward_cuda";
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__NONZERO(fn, n);
    TK__LAUNCH(tk__k_relu2_fwd, tk__blocks(n, 256), 256, 0, (cudaStream_t)stream, out, inp, n);
    return tk__launched(fn);
}

TKDEF int tk_relu2_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n,
                                 tk_stream stream)
{
    static const char *fn = "tk_relu2_backward_cuda";
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, dout);
    TK__NONZERO(fn, n);
    TK__LAUNCH(tk__k_relu2_bwd, tk__blocks(n, 256), 256, 0, (cudaStream_t)stream, dinp, inp, dout, n);
    return tk__launched(fn);
}

TKDEF int tk_silu_forward_cuda(float *out, const float *inp, size_t n, tk_stream stream)
{
    static const char *fn = "tk_silu_forward_cuda";
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__NONZERO(fn, n);
    TK__LAUNCH(tk__k_silu_fwd, tk__blocks(n, 256), 256, 0, (cudaStream_t)stream, out, inp, n);
    return tk__launched(fn);
}

TKDEF int tk_silu_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n,
                                tk_stream stream)
{
    static const char *fn = "tk_silu_backward_cuda";
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, dout);
    TK__NONZERO(fn, n);
    TK__LAUNCH(tk__k_silu_bwd, tk__blocks(n, 256), 256, 0, (cudaStream_t)stream, dinp, inp, dout, n);
    return tk__launched(fn);
}

TKDEF int tk_relu2_gated_forward_cuda(float *out, const float *inp, int N, int F,
                                      tk_stream stream)
{
    static const char *fn = "tk_relu2_gated_forward_cuda";
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, F);
    TK__LAUNCH(tk__k_relu2g_fwd, tk__blocks((size_t)N * F, 256), 256, 0, (cudaStream_t)stream, out, inp, N, F);
    return tk__launched(fn);
}

TKDEF int tk_relu2_gated_backward_cuda(float *dinp, const float *inp, const float *dout,
                                       int N, int F, tk_stream stream)
{
    static const char *fn = "tk_relu2_gated_backward_cuda";
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, dout);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, F);
    TK__LAUNCH(tk__k_relu2g_bwd, tk__blocks((size_t)N * F, 256), 256, 0, (cudaStream_t)stream, dinp, inp, dout, N, F);
    return tk__launched(fn);
}

TKDEF int tk_rope_cuda(float *x, int B, int H, int T, int D, float base, int inverse,
                       tk_stream stream)
{
    static const char *fn = "tk_rope_cuda";
    size_t BH;
    unsigned ny;
    int rc = tk__check_rope(fn, x, B, H, T, D, base, inverse);
    if (rc != TK_OK) return rc;
    BH = (size_t)B * (size_t)H;
    ny = BH < 16 ? (unsigned)BH : 16u; /* each thread's angle serves BH / ny heads */
    TK__LAUNCH(tk__k_rope, dim3(tk__blocks((size_t)T * (D / 2), 256), ny), 256, 0, (cudaStream_t)stream,
               x, BH, T, D, (double)base, inverse);
    return tk__launched(fn);
}

/* --------------------------------------------------------------- softmax */
static __global__ void tk__k_softmax_fwd(float *out, const float *inp, int C)
{
    __shared__ float sh[32];
    const float *x = inp + (size_t)blockIdx.x * C;
    float *y = out + (size_t)blockIdx.x * C;
    float m = -INFINITY, s = 0.0f, inv;
    int i;
    for (i = threadIdx.x; i < C; i += blockDim.x) m = fmaxf(m, x[i]);
    m = tk__block_max(m, sh);
    for (i = threadIdx.x; i < C; i += blockDim.x) s += expf(x[i] - m);
    s = tk__block_sum(s, sh);
    inv = 1.0f / s;
    for (i = threadIdx.x; i < C; i += blockDim.x) y[i] = expf(x[i] - m) * inv;
}

TKDEF int tk_softmax_forward_cuda(float *out, const float *inp, int N, int C,
                                  tk_stream stream)
{
    if (!out || !inp) return tk__fail(TK_EINVAL, "tk_softmax_forward_cuda: NULL pointer");
    if (N <= 0 || C <= 0) return tk__fail(TK_EINVAL, "tk_softmax_forward_cuda: N, C must be > 0");
    TK__LAUNCH(tk__k_softmax_fwd, N, TK__CUDA_THREADS, 0, (cudaStream_t)stream, out, inp, C);
    return tk__launched("tk_softmax_forward_cuda");
}

/* ---------------------------------------------------------- cross-entropy */
/* one block per row. lse = log sum exp x; ce = lse - x_y;
   smoothed = (1-eps) ce + eps (lse - mean_v x_v) */
static __global__ void tk__k_ce_fwd(float *probs, float *losses, float *ce, const float *logits,
                             const int *targets, int V, float eps)
{
    __shared__ float sh[32];
    const float *x = logits + (size_t)blockIdx.x * V;
    float m = -INFINITY, s = 0.0f, sx = 0.0f, lse, c;
    int i, y = targets[blockIdx.x];
    for (i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, x[i]);
    m = tk__block_max(m, sh);
    for (i = threadIdx.x; i < V; i += blockDim.x) { s += expf(x[i] - m); sx += x[i]; }
    s = tk__block_sum(s, sh);
    sx = tk__block_sum(sx, sh);
    lse = m + logf(s);
    if (probs) {
        float *p = probs + (size_t)blockIdx.x * V;
        for (i = threadIdx.x; i < V; i += blockDim.x) p[i] = expf(x[i] - lse);
    }
    if (threadIdx.x == 0) {
        c = lse - x[y];
        if (ce) ce[blockIdx.x] = c;
        losses[blockIdx.x] = (1.0f - eps) * c + eps * (lse - sx / V);
    }
}

static __global__ void tk__k_ce_bwd(float *dlogits, const float *probs, const int *targets, int N,
                             int V, float eps, float dloss)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t r;
    int v;
    float q;
    if (i >= (size_t)N * V) return;
    r = i / V;
    v = (int)(i % V);
    q = eps / V + (v == targets[r] ? 1.0f - eps : 0.0f);
    dlogits[i] += dloss * (probs[i] - q);
}

TKDEF int tk_crossentropy_forward_cuda(float *probs, float *losses, float *ce,
                                       const float *logits, const int *targets, int N,
                                       int V, float eps, tk_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if (!losses || !logits || !targets)
        return tk__fail(TK_EINVAL, "tk_crossentropy_forward_cuda: NULL pointer");
    if (N <= 0 || V <= 0) return tk__fail(TK_EINVAL, "tk_crossentropy_forward_cuda: N, V must be > 0");
    if (!(eps >= 0.0f && eps < 1.0f))
        return tk__fail(TK_EINVAL, "tk_crossentropy_forward_cuda: eps must be in [0, 1)");
    if ((rc = tk__cuda_ids_in_range(targets, (size_t)N, V, s, "tk_crossentropy_forward_cuda")) != TK_OK)
        return rc;
    TK__LAUNCH(tk__k_ce_fwd, N, TK__CUDA_THREADS, 0, s, probs, losses, ce, logits, targets, V, eps);
    return tk__launched("tk_crossentropy_forward_cuda");
}

TKDEF int tk_crossentropy_backward_cuda(float *dlogits, const float *probs,
                                        const int *targets, int N, int V, float eps,
                                        float dloss, tk_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if (!dlogits || !probs || !targets)
        return tk__fail(TK_EINVAL, "tk_crossentropy_backward_cuda: NULL pointer");
    if (N <= 0 || V <= 0) return tk__fail(TK_EINVAL, "tk_crossentropy_backward_cuda: N, V must be > 0");
    if (!(eps >= 0.0f && eps < 1.0f) || !isfinite(dloss))
        return tk__fail(TK_EINVAL, "tk_crossentropy_backward_cuda: eps in [0,1) and finite dloss");
    if ((rc = tk__cuda_ids_in_range(targets, (size_t)N, V, s, "tk_crossentropy_backward_cuda")) != TK_OK)
        return rc;
    TK__LAUNCH(tk__k_ce_bwd, tk__blocks((size_t)N * V, 256), 256, 0, s, dlogits, probs, targets, N, V, eps, dloss);
    return tk__launched("tk_crossentropy_backward_cuda");
}

/* In place, one block per row. Pass 1 reads the row once: each thread keeps an online
   max m and sum s = sum exp(x - m) (rescaled when m rises) and sum x; the block merges
   them (M = max m, S = sum s exp(m - M)). Thread 0 reads x[target] before any thread
   writes (the merges are barriers). Pass 2 writes p = exp(x - M) / S. The row's scalars
   (lse, ce, loss) are formed in double from the fp32 sums, as the CPU does. */
static __global__ void tk__k_ce_fwd_inplace(float *logits, float *losses, float *ce,
                                            const int *targets, int V, float eps)
{
    __shared__ float sh[32];
    float *x = logits + (size_t)blockIdx.x * V;
    float m = -INFINITY, s = 0.0f, sx = 0.0f, xt = 0.0f, M, S, inv;
    int i;
    if (threadIdx.x == 0) { /* (a deferred check's bad target: a NaN loss) */
        const int t = targets[blockIdx.x];
        xt = t >= 0 && t < V ? x[t] : NAN;
    }
    for (i = threadIdx.x; i < V; i += blockDim.x) {
        float v = x[i];
        sx += v;
        if (v > m) {
            s = s * expf(m - v) + 1.0f; /* m = -inf at the start: 0 * 0 + 1 */
            m = v;
        } else if (m > -INFINITY) {
            s += expf(v - m);
        }
    }
    M = tk__block_max(m, sh);
    S = tk__block_sum(m > -INFINITY ? s * expf(m - M) : 0.0f, sh);
    sx = tk__block_sum(sx, sh);
    if (threadIdx.x == 0) {
        double lse = (double)M + log((double)S), c = lse - (double)xt;
        if (ce) ce[blockIdx.x] = (float)c;
        if (losses)
            losses[blockIdx.x] = (float)((1.0 - (double)eps) * c + (double)eps * (lse - (double)sx / (double)V));
    }
    inv = 1.0f / S;
    for (i = threadIdx.x; i < V; i += blockDim.x) x[i] = expf(x[i] - M) * inv;
}

/* probs (N,V) -> dloss * (probs - q) in place; the CPU's operations in its order */
static __global__ void tk__k_ce_bwd_inplace(float *probs, const int *targets, int N, int V,
                                            float eps, float dloss)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float u, d;
    if (i >= (size_t)N * V) return;
    u = eps / (float)V;
    d = dloss * (probs[i] - u);
    if ((int)(i % V) == targets[i / V]) d -= dloss * (1.0f - eps);
    probs[i] = d;
}

TKDEF int tk_crossentropy_forward_inplace_cuda_ex(float *logits, float *losses, float *ce,
                                                  const int *targets, int N, int V, float eps,
                                                  int *status, tk_stream stream)
{
    static const char *fn = "tk_crossentropy_forward_inplace_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    TK__NONNULL(fn, logits);
    TK__NONNULL(fn, targets);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, V);
    if (!tk__finite(eps) || eps < 0.0f || eps >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: eps must be in [0, 1) (got %g)", fn, (double)eps);
    if ((rc = tk__cuda_ids_check(targets, (size_t)N, V, status, s, fn)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_ce_fwd_inplace, N, TK__CUDA_THREADS, 0, s, logits, losses, ce, targets, V, eps);
    return tk__launched(fn);
}

TKDEF int tk_crossentropy_forward_inplace_cuda(float *logits, float *losses, float *ce,
                                               const int *targets, int N, int V, float eps,
                                               tk_stream stream)
{
    return tk_crossentropy_forward_inplace_cuda_ex(logits, losses, ce, targets, N, V, eps, NULL, stream);
}

TKDEF int tk_crossentropy_backward_inplace_cuda_ex(float *probs, const int *targets, int N,
                                                   int V, float eps, float dloss, int *status,
                                                   tk_stream stream)
{
    static const char *fn = "tk_crossentropy_backward_inplace_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    TK__NONNULL(fn, probs);
    TK__NONNULL(fn, targets);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, V);
    if (!tk__finite(eps) || eps < 0.0f || eps >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: eps must be in [0, 1) (got %g)", fn, (double)eps);
    if (!tk__finite(dloss))
        return tk__fail(TK_EINVAL, "%s: dloss must be finite (got %g)", fn, (double)dloss);
    if ((rc = tk__cuda_ids_check(targets, (size_t)N, V, status, s, fn)) != TK_OK) return rc;
    /* (an out-of-range target matches no column: the row gets no target term) */
    TK__LAUNCH(tk__k_ce_bwd_inplace, tk__blocks((size_t)N * V, 256), 256, 0, s, probs, targets, N, V, eps, dloss);
    return tk__launched(fn);
}

TKDEF int tk_crossentropy_backward_inplace_cuda(float *probs, const int *targets, int N,
                                                int V, float eps, float dloss,
                                                tk_stream stream)
{
    return tk_crossentropy_backward_inplace_cuda_ex(probs, targets, N, V, eps, dloss, NULL, stream);
}

/* ----------------------------------------------------------------- AdamW */
static __global__ void tk__k_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr,
                            float b1, float b2, float eps, float wd, float bc1, float bc2)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float gi, mi, vi, mhat, vhat;
    if (i >= n) return;
    gi = g[i];
    mi = b1 * m[i] + (1.0f - b1) * gi;
    vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    mhat = mi / bc1;
    vhat = vi / bc2;
    p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
}

TKDEF int tk_adamw_update_cuda(float *params, const float *grads, float *m, float *v,
                               size_t n, const tk_adamw_config *cfg, long t,
                               tk_stream stream)
{
    float bc1, bc2;
    if (!params || !grads || !m || !v || !cfg)
        return tk__fail(TK_EINVAL, "tk_adamw_update_cuda: NULL pointer");
    if (n == 0 || t < 1) return tk__fail(TK_EINVAL, "tk_adamw_update_cuda: n > 0 and t >= 1 required");
    if (!isfinite(cfg->lr) || !(cfg->beta1 >= 0.0f && cfg->beta1 < 1.0f) ||
        !(cfg->beta2 >= 0.0f && cfg->beta2 < 1.0f) || !(cfg->eps >= 0.0f) || !isfinite(cfg->eps) ||
        !isfinite(cfg->weight_decay))
        return tk__fail(TK_EINVAL, "tk_adamw_update_cuda: bad hyper-parameter");
    bc1 = (float)(1.0 - pow((double)cfg->beta1, (double)t));
    bc2 = (float)(1.0 - pow((double)cfg->beta2, (double)t));
    TK__LAUNCH(tk__k_adamw, tk__blocks(n, 256), 256, 0, (cudaStream_t)stream, 
        params, grads, m, v, n, cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, bc1, bc2);
    return tk__launched("tk_adamw_update_cuda");
}

/* ------------------------------------------------------ residual, heads */
#define TK__GS_MAXB 4096u /* grid cap of the grid-stride element loops */

static unsigned tk__gs_blocks(size_t n, unsigned threads)
{
    unsigned b = tk__blocks(n, threads);
    return b > TK__GS_MAXB ? TK__GS_MAXB : b;
}

static __global__ void tk__k_residual_fwd(float *out, const float *a, const float *b, size_t n)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) out[i] = a[i] + b[i];
}

static __global__ void tk__k_residual_bwd(float *da, float *db, const float *dout, size_t n)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        float g = dout[i];
        if (da) da[i] += g;
        if (db) db[i] += g;
    }
}

TKDEF int tk_residual_forward_cuda(float *out, const float *a, const float *b, size_t n,
                                   tk_stream stream)
{
    static const char *fn = "tk_residual_forward_cuda";
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, a);
    TK__NONNULL(fn, b);
    TK__NONZERO(fn, n);
    TK__LAUNCH(tk__k_residual_fwd, tk__gs_blocks(n, 256), 256, 0, (cudaStream_t)stream, out, a, b, n);
    return tk__launched(fn);
}

TKDEF int tk_residual_backward_cuda(float *da, float *db, const float *dout, size_t n,
                                    tk_stream stream)
{
    static const char *fn = "tk_residual_backward_cuda";
    TK__NONNULL(fn, dout);
    TK__NONZERO(fn, n);
    if (!da && !db) return TK_OK;
    TK__LAUNCH(tk__k_residual_bwd, tk__gs_blocks(n, 256), 256, 0, (cudaStream_t)stream, da, db, dout, n);
    return tk__launched(fn);
}

/* ------------------------------- sigmoid, row ops, causal mean gate, row gather/combine */
/* Element-wise and row kernels: the CPU's expressions in the CPU's order; a product added
   to a sum is the CPU's fmaf, TK__FMA here (bit-identical under any contraction). */
static __global__ void tk__k_sigmoid_fwd(float *out, const float *x, size_t n)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        out[i] = 1.0f / (1.0f + expf(-x[i]));
}

static __global__ void tk__k_scale(float *out, const float *x, float alpha, size_t n)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) out[i] = alpha * x[i];
}

static __global__ void tk__k_shift(float *out, const float *x, float beta, size_t n)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) out[i] = x[i] + beta;
}

/* causal depthwise convolution: the CPU's sums in the CPU's order (each product fused into
   the running sum by an explicit fma, as the CPU's fmaf) */
static __global__ void tk__k_dwconv_fwd(float *out, const float *inp, const float *w, int B, int T, int C,
                                        int K, int accumulate)
{
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x, r;
    int t, ch, j;
    float o;
    if (e >= (size_t)B * T * C) return;
    r = e / (size_t)C;
    ch = (int)(e % (size_t)C);
    t = (int)(r % (size_t)T);
    o = accumulate ? out[e] : 0.0f;
    for (j = 0; j < K && j <= t; j++) o = TK__FMA(w[(size_t)j * C + ch], inp[(r - j) * C + ch], o);
    out[e] = o;
}

static __global__ void tk__k_dwconv_dinp(float *dinp, const float *dout, const float *w, int B, int T, int C,
                                         int K)
{
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x, r;
    int t, ch, j;
    float d;
    if (e >= (size_t)B * T * C) return;
    r = e / (size_t)C;
    ch = (int)(e % (size_t)C);
    t = (int)(r % (size_t)T);
    d = dinp[e];
    for (j = 0; j < K && t + j < T; j++) d = TK__FMA(w[(size_t)j * C + ch], dout[(r + j) * C + ch], d);
    dinp[e] = d;
}

static __global__ void tk__k_dwconv_dw(float *dw, const float *dout, const float *inp, int B, int T, int C, int K)
{
    int jc = blockIdx.x * blockDim.x + threadIdx.x, j, ch, bb, t;
    double acc = 0.0;
    if (jc >= K * C) return;
    j = jc / C;
    ch = jc % C;
    for (bb = 0; bb < B; bb++)
        for (t = j; t < T; t++) {
            size_t rr = (size_t)bb * T + t;
            acc += (double)dout[rr * C + ch] * (double)inp[(rr - j) * C + ch];
        }
    dw[jc] += (float)acc;
}

static __global__ void tk__k_sigmoid_bwd(float *dx, const float *y, const float *dy, size_t n)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        float yi = y[i];
        dx[i] = TK__FMA(dy[i] * yi, 1.0f - yi, dx[i]);
    }
}

/* out = s[row] * x (br NULL) or x + s[row] * br, over the N*C elements */
static __global__ void tk__k_rowscale(float *out, const float *x, const float *br, const float *s,
                                      size_t NC, int C)
{
    size_t e, step = (size_t)gridDim.x * blockDim.x;
    for (e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < NC; e += step) {
        float si = s[e / (size_t)C];
        out[e] = br ? TK__FMA(si, br[e], x[e]) : si * x[e];
    }
}

#define TK__ROW_WARPS 4 /* rows per block of the one-warp-per-row reductions */

/* the sum of v over the 32 lanes of a full warp, in every lane (fixed butterfly order) */
static __device__ double tk__warp_sum_d(double v)
{
    int o;
    for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* sum_c a[c] b[c] over a row of C by one full warp: lane-strided double sums (each product
   exact), then the butterfly; the same value in every lane */
static __device__ double tk__warp_dot_d(const float *a, const float *b, int C)
{
    int lane = (int)(threadIdx.x & 31), c;
    double s = 0.0;
    for (c = lane; c < C; c += 32) s += (double)a[c] * (double)b[c];
    return tk__warp_sum_d(s);
}

/* one warp per row: out[row] += dot(a[row], b[row]) (added in double, rounded once) */
static __global__ void tk__k_rowdot(float *out, const float *a, const float *b, int N, int C)
{
    int row = (int)(blockIdx.x * TK__ROW_WARPS + (threadIdx.x >> 5));
    double s;
    if (row >= N) return; /* the whole warp */
    s = tk__warp_dot_d(a + (size_t)row * C, b + (size_t)row * C, C);
    if ((threadIdx.x & 31) == 0) out[row] = (float)((double)out[row] + s);
}

/* causal mean gate, forward stage 1: one thread per (b,h), time in order, in double */
static __global__ void tk__k_gate_fwd_sig(float *sig, const float *z, int B, int T, int H)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x, o;
    double acc = 0.0;
    int t;
    if (k >= (size_t)B * H) return;
    o = (k / (size_t)H) * (size_t)T * H + k % (size_t)H; /* (b, t=0, h) */
    for (t = 0; t < T; t++, o += (size_t)H) {
        acc += (double)z[o];
        sig[o] = tk__gate_sig(acc / (double)(t + 1));
    }
}

/* stage 2: one thread per (b,t): g = (sum over h in order, in double) / H */
static __global__ void tk__k_gate_fwd_g(float *g, const float *sig, size_t BT, int H)
{
    size_t k, step = (size_t)gridDim.x * blockDim.x;
    for (k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < BT; k += step) {
        const float *sr = sig + k * (size_t)H;
        double sum = 0.0;
        int h;
        for (h = 0; h < H; h++) sum += (double)sr[h];
        g[k] = (float)(sum / (double)H);
    }
}

/* backward: one thread per (b,h), time in reverse, the CPU's double expressions */
static __global__ void tk__k_gate_bwd(float *dz, const float *dg, const float *sig, int B, int T, int H)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x, b, o;
    double acc = 0.0;
    int t;
    if (k >= (size_t)B * H) return;
    b = k / (size_t)H;
    for (t = T - 1; t >= 0; t--) {
        const double d = (double)dg[b * T + t] / (double)H;
        double s;
        o = (b * T + t) * (size_t)H + k % (size_t)H;
        s = (double)sig[o];
        acc += d * s * (1.0 - s) / (double)(t + 1);
        dz[o] = (float)((double)dz[o] + acc);
    }
}

/* out (n,C) = src[idx[row]]; an index outside [0,nsrc) gives a zero row */
static __global__ void tk__k_rows_gather(float *out, const float *src, int nsrc, const int *idx,
                                         size_t nC, int C)
{
    size_t e, step = (size_t)gridDim.x * blockDim.x;
    for (e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < nC; e += step) {
        int i = idx[e / (size_t)C];
        out[e] = (i >= 0 && i < nsrc) ? src[(size_t)i * C + e % (size_t)C] : 0.0f;
    }
}

/* one thread per out element: (accumulate ? out : 0) + w_k src[idx_k], k in order;
   out-of-range terms skipped */
static __global__ void tk__k_rows_combine_fwd(float *out, const float *src, int nsrc, const int *idx,
                                              const float *w, size_t NC, int K, int C, int accumulate)
{
    size_t e, step = (size_t)gridDim.x * blockDim.x;
    for (e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < NC; e += step) {
        const size_t r0 = (e / (size_t)C) * (size_t)K, j = e % (size_t)C;
        float acc = accumulate ? out[e] : 0.0f;
        int k;
        for (k = 0; k < K; k++) {
            const int i = idx[r0 + k];
            if (i >= 0 && i < nsrc) {
                const float v = src[(size_t)i * C + j];
                acc = w ? TK__FMA(w[r0 + k], v, acc) : acc + v;
            }
        }
        out[e] = acc;
    }
}

/* dsrc[idx[r]] += w[r] dout[r / K] over the N*K*C elements (distinct idx: no two threads
   write one element; repeats race) */
static __global__ void tk__k_rows_combine_dsrc(float *dsrc, const float *dout, int nsrc, const int *idx,
                                               const float *w, size_t NKC, int K, int C)
{
    size_t e, step = (size_t)gridDim.x * blockDim.x;
    for (e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < NKC; e += step) {
        const size_t r = e / (size_t)C, j = e % (size_t)C;
        const int i = idx[r];
        if (i >= 0 && i < nsrc) {
            const float g = dout[(r / (size_t)K) * C + j];
            float *d = dsrc + (size_t)i * C + j;
            *d = w ? TK__FMA(w[r], g, *d) : *d + g;
        }
    }
}

/* one warp per (n,k): dw[r] += dot(dout[n], src[idx[r]]) in double; out of range: skipped */
static __global__ void tk__k_rows_combine_dw(float *dw, const float *dout, const float *src, int nsrc,
                                             const int *idx, size_t NK, int K, int C)
{
    size_t r = (size_t)blockIdx.x * TK__ROW_WARPS + (threadIdx.x >> 5);
    double s;
    int i;
    if (r >= NK) return; /* the whole warp */
    i = idx[r];
    if (i < 0 || i >= nsrc) return; /* the whole warp: i is the same in every lane */
    s = tk__warp_dot_d(dout + (r / (size_t)K) * C, src + (size_t)i * C, C);
    if ((threadIdx.x & 31) == 0) dw[r] = (float)((double)dw[r] + s);
}

TKDEF int tk_sigmoid_forward_cuda(float *out, const float *x, size_t n, tk_stream stream)
{
    static const char *fn = "tk_sigmoid_forward_cuda";
    TK__ELEMWISE_CHECK(fn, out, x, n);
    TK__LAUNCH(tk__k_sigmoid_fwd, tk__gs_blocks(n, 256), 256, 0, (cudaStream_t)stream, out, x, n);
    return tk__launched(fn);
}

TKDEF int tk_scale_cuda(float *out, const float *x, float alpha, size_t n, tk_stream stream)
{
    static const char *fn = "tk_scale_cuda";
    TK__ELEMWISE_CHECK(fn, out, x, n);
    if (!(alpha == alpha && alpha - alpha == 0.0f)) return tk__fail(TK_EINVAL, "%s: alpha must be finite", fn);
    TK__LAUNCH(tk__k_scale, tk__gs_blocks(n, 256), 256, 0, (cudaStream_t)stream, out, x, alpha, n);
    return tk__launched(fn);
}

TKDEF int tk_shift_cuda(float *out, const float *x, float beta, size_t n, tk_stream stream)
{
    static const char *fn = "tk_shift_cuda";
    TK__ELEMWISE_CHECK(fn, out, x, n);
    TK__LAUNCH(tk__k_shift, tk__gs_blocks(n, 256), 256, 0, (cudaStream_t)stream, out, x, beta, n);
    return tk__launched(fn);
}

TKDEF int tk_causal_dwconv_forward_cuda(float *out, const float *inp, const float *w, int B,
                                        int T, int C, int K, int accumulate, tk_stream stream)
{
    static const char *fn = "tk_causal_dwconv_forward_cuda";
    int rc;
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, w);
    if ((rc = tk__dwconv_check(fn, B, T, C, K)) != TK_OK) return rc;
    if (accumulate != 0 && accumulate != 1) return tk__fail(TK_EINVAL, "%s: accumulate must be 0 or 1", fn);
    if (out == inp) return tk__fail(TK_EINVAL, "%s: out must not alias inp", fn);
    TK__LAUNCH(tk__k_dwconv_fwd, tk__blocks((size_t)B * T * C, 256), 256, 0, (cudaStream_t)stream, out, inp, w, B,
               T, C, K, accumulate);
    return tk__launched(fn);
}

TKDEF int tk_causal_dwconv_backward_cuda(float *dinp, float *dw, const float *dout,
                                         const float *inp, const float *w, int B, int T, int C,
                                         int K, tk_stream stream)
{
    static const char *fn = "tk_causal_dwconv_backward_cuda";
    int rc;
    TK__NONNULL(fn, dout);
    if ((rc = tk__dwconv_check(fn, B, T, C, K)) != TK_OK) return rc;
    if ((!dinp && !dw) || (dinp && !w) || (dw && !inp))
        return tk__fail(TK_EINVAL, "%s: need dinp (with w) and/or dw (with inp)", fn);
    if (dinp == dout) return tk__fail(TK_EINVAL, "%s: dinp must not alias dout", fn);
    if (dinp) {
        TK__LAUNCH(tk__k_dwconv_dinp, tk__blocks((size_t)B * T * C, 256), 256, 0, (cudaStream_t)stream, dinp, dout,
                   w, B, T, C, K);
        if ((rc = tk__launched(fn)) != TK_OK) return rc;
    }
    if (dw) {
        TK__LAUNCH(tk__k_dwconv_dw, tk__blocks((size_t)K * C, 128), 128, 0, (cudaStream_t)stream, dw, dout, inp, B,
                   T, C, K);
        if ((rc = tk__launched(fn)) != TK_OK) return rc;
    }
    return TK_OK;
}

TKDEF int tk_sigmoid_backward_cuda(float *dx, const float *y, const float *dy, size_t n,
                                   tk_stream stream)
{
    static const char *fn = "tk_sigmoid_backward_cuda";
    TK__ELEMWISE_CHECK(fn, dx, y, n);
    TK__NONNULL(fn, dy);
    TK__LAUNCH(tk__k_sigmoid_bwd, tk__gs_blocks(n, 256), 256, 0, (cudaStream_t)stream, dx, y, dy, n);
    return tk__launched(fn);
}

TKDEF int tk_rowscale_cuda(float *out, const float *x, const float *s, int N, int C,
                           tk_stream stream)
{
    static const char *fn = "tk_rowscale_cuda";
    const size_t NC = (size_t)N * (size_t)C;
    int rc;
    if ((rc = tk__check_rows3(fn, out, x, s, N, C)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_rowscale, tk__gs_blocks(NC, 256), 256, 0, (cudaStream_t)stream, out, x,
               (const float *)NULL, s, NC, C);
    return tk__launched(fn);
}

TKDEF int tk_rowdot_cuda(float *out, const float *a, const float *b, int N, int C,
                         tk_stream stream)
{
    static const char *fn = "tk_rowdot_cuda";
    int rc;
    if ((rc = tk__check_rows3(fn, out, a, b, N, C)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_rowdot, tk__blocks((size_t)N, TK__ROW_WARPS), TK__ROW_WARPS * 32, 0,
               (cudaStream_t)stream, out, a, b, N, C);
    return tk__launched(fn);
}

TKDEF int tk_residual_rows_forward_cuda(float *out, const float *x, const float *br,
                                        const float *s, int N, int C, tk_stream stream)
{
    static const char *fn = "tk_residual_rows_forward_cuda";
    const size_t NC = (size_t)N * (size_t)C;
    int rc;
    if ((rc = tk__check_rows3(fn, out, x, br, N, C)) != TK_OK) return rc;
    TK__NONNULL(fn, s);
    TK__LAUNCH(tk__k_rowscale, tk__gs_blocks(NC, 256), 256, 0, (cudaStream_t)stream, out, x, br, s,
               NC, C);
    return tk__launched(fn);
}

TKDEF int tk_causal_mean_gate_forward_cuda(float *g, float *sig, const float *z, int B,
                                           int T, int H, tk_stream stream)
{
    static const char *fn = "tk_causal_mean_gate_forward_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if ((rc = tk__check_gate(fn, g, sig, z, B, T, H)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_gate_fwd_sig, tk__blocks((size_t)B * H, 128), 128, 0, s, sig, z, B, T, H);
    if ((rc = tk__launched(fn)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_gate_fwd_g, tk__gs_blocks((size_t)B * T, 256), 256, 0, s, g, (const float *)sig,
               (size_t)B * T, H);
    return tk__launched(fn);
}

TKDEF int tk_causal_mean_gate_backward_cuda(float *dz, const float *dg, const float *sig,
                                            int B, int T, int H, tk_stream stream)
{
    static const char *fn = "tk_causal_mean_gate_backward_cuda";
    int rc;
    if ((rc = tk__check_gate(fn, dz, dg, sig, B, T, H)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_gate_bwd, tk__blocks((size_t)B * H, 128), 128, 0, (cudaStream_t)stream, dz, dg,
               sig, B, T, H);
    return tk__launched(fn);
}

TKDEF int tk_rows_gather_cuda(float *out, const float *src, int nsrc, const int *idx, int n,
                              int C, tk_stream stream)
{
    static const char *fn = "tk_rows_gather_cuda";
    const size_t nC = (size_t)n * (size_t)C;
    int rc;
    if ((rc = tk__check_gather(fn, out, src, nsrc, idx, n, C)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_rows_gather, tk__gs_blocks(nC, 256), 256, 0, (cudaStream_t)stream, out, src, nsrc,
               idx, nC, C);
    return tk__launched(fn);
}

TKDEF int tk_rows_combine_forward_cuda(float *out, const float *src, int nsrc,
                                       const int *idx, const float *w, int N, int K, int C,
                                       int accumulate, tk_stream stream)
{
    static const char *fn = "tk_rows_combine_forward_cuda";
    const size_t NC = (size_t)N * (size_t)C;
    int rc;
    if ((rc = tk__check_combine_fwd(fn, out, src, nsrc, idx, N, K, C, accumulate)) != TK_OK)
        return rc;
    TK__LAUNCH(tk__k_rows_combine_fwd, tk__gs_blocks(NC, 256), 256, 0, (cudaStream_t)stream, out, src,
               nsrc, idx, w, NC, K, C, accumulate);
    return tk__launched(fn);
}

TKDEF int tk_rows_combine_backward_cuda(float *dsrc, float *dw, const float *dout,
                                        const float *src, int nsrc, const int *idx,
                                        const float *w, int N, int K, int C,
                                        tk_stream stream)
{
    static const char *fn = "tk_rows_combine_backward_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    const size_t NK = (size_t)N * (size_t)K;
    int rc;
    if ((rc = tk__check_combine_bwd(fn, dsrc, dw, dout, src, nsrc, idx, N, K, C)) != TK_OK)
        return rc;
    if (dsrc) {
        TK__LAUNCH(tk__k_rows_combine_dsrc, tk__gs_blocks(NK * (size_t)C, 256), 256, 0, s, dsrc, dout,
                   nsrc, idx, w, NK * (size_t)C, K, C);
        if ((rc = tk__launched(fn)) != TK_OK) return rc;
    }
    if (dw) {
        TK__LAUNCH(tk__k_rows_combine_dw, tk__blocks(NK, TK__ROW_WARPS), TK__ROW_WARPS * 32, 0, s, dw,
                   dout, src, nsrc, idx, NK, K, C);
        if ((rc = tk__launched(fn)) != TK_OK) return rc;
    }
    return TK_OK;
}

/* ------------------------------------------------------ seeded dropout */
/* Grid-stride over elements; key and scale come from the host (tensor.h's expressions),
   the keep bit from tk__dropout_keep, the function the CPU calls. p == 0 copies. */
static __global__ void tk__k_dropout_seeded_fwd(float *out, uint8_t *mask, const float *inp,
                                                size_t n, float p, uint64_t key, float scale)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        float x = inp[i];
        if (p == 0.0f) {
            out[i] = x;
            mask[i] = 1u;
        } else {
            uint8_t keep = (uint8_t)tk__dropout_keep(key, (uint64_t)i, p);
            mask[i] = keep;
            out[i] = keep ? x * scale : 0.0f;
        }
    }
}

static __global__ void tk__k_dropout_bwd(float *dinp, const float *dout, const uint8_t *mask,
                                         size_t n, float scale)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        if (mask[i]) dinp[i] = TK__FMA(dout[i], scale, dinp[i]);
}

TKDEF int tk_dropout_seeded_forward_cuda(float *out, uint8_t *mask, const float *inp,
                                         size_t n, float p, uint64_t seed,
                                         tk_stream stream)
{
    static const char *fn = "tk_dropout_seeded_forward_cuda";
    int rc;
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, mask);
    TK__NONNULL(fn, inp);
    TK__NONZERO(fn, n);
    if ((rc = tk__check_dropout_p(fn, p)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_dropout_seeded_fwd, tk__gs_blocks(n, 256), 256, 0, (cudaStream_t)stream, out, mask,
               inp, n, p, tk__dropout_key(seed), 1.0f / (1.0f - p));
    return tk__launched(fn);
}

TKDEF int tk_dropout_backward_cuda(float *dinp, const float *dout, const uint8_t *mask,
                                   size_t n, float p, tk_stream stream)
{
    static const char *fn = "tk_dropout_backward_cuda";
    int rc;
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__NONNULL(fn, mask);
    TK__NONZERO(fn, n);
    if ((rc = tk__check_dropout_p(fn, p)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_dropout_bwd, tk__gs_blocks(n, 256), 256, 0, (cudaStream_t)stream, dinp, dout, mask, n,
               1.0f / (1.0f - p));
    return tk__launched(fn);
}

/* Head layouts. A block walks rows bt = (b, t) of the (B,T,W) side (W = 3C for qkv, C for
   merged), its threads the W columns: that side is read or written contiguously, the
   (B,H,T,D) side in contiguous runs of D. Rows grid-stride; every element is touched by
   exactly one thread (the backward += needs no atomics). */
static unsigned tk__heads_threads(int W)
{
    int t = (W + 31) / 32 * 32;
    return (unsigned)(t > 256 ? 256 : t);
}

/* qkv (B,T,3C) -> q, k, v (B,H,T,D) (backward 0); dqkv (B,T,3C) += dq, dk, dv (1) */
static __global__ void tk__k_split_heads(float *q, float *k, float *v, float *dqkv, const float *qkv,
                                         const float *dq, const float *dk, const float *dv,
                                         int B, int T, int H, int D, int backward)
{
    const int C = H * D, W = 3 * C;
    int bt, col;
    for (bt = (int)blockIdx.x; bt < B * T; bt += (int)gridDim.x) {
        const int b = bt / T, t = bt % T;
        const size_t row = (size_t)bt * W;
        for (col = (int)threadIdx.x; col < W; col += (int)blockDim.x) {
            const int j = col / C, cc = col - j * C, h = cc / D, d = cc - h * D;
            const size_t o = (((size_t)b * H + h) * T + t) * D + d;
            if (backward)
                dqkv[row + col] += (j == 0 ? dq : (j == 1 ? dk : dv))[o];
            else
                (j == 0 ? q : (j == 1 ? k : v))[o] = qkv[row + col];
        }
    }
}

/* inp (B,H,T,D) -> out (B,T,C) (backward 0); dinp (B,H,T,D) += dout (B,T,C) (1) */
static __global__ void tk__k_merge_heads(float *out, float *dinp, const float *inp, const float *dout,
                                         int B, int T, int H, int D, int backward)
{
    const int C = H * D;
    int bt, col;
    for (bt = (int)blockIdx.x; bt < B * T; bt += (int)gridDim.x) {
        const int b = bt / T, t = bt % T;
        const size_t row = (size_t)bt * C;
        for (col = (int)threadIdx.x; col < C; col += (int)blockDim.x) {
            const int h = col / D, d = col - h * D;
            const size_t o = (((size_t)b * H + h) * T + t) * D + d;
            if (backward) dinp[o] += dout[row + col];
            else out[row + col] = inp[o];
        }
    }
}

#define TK__HEADS_CHECK(fn)                                                    \
    do {                                                                       \
        TK__POSDIM(fn, B);                                                     \
        TK__POSDIM(fn, T);                                                     \
        TK__POSDIM(fn, H);                                                     \
        TK__POSDIM(fn, D);                                                     \
    } while (0)

TKDEF int tk_split_heads_forward_cuda(float *q, float *k, float *v, const float *qkv,
                                      int B, int T, int H, int D, tk_stream stream)
{
    static const char *fn = "tk_split_heads_forward_cuda";
    TK__NONNULL(fn, q);
    TK__NONNULL(fn, k);
    TK__NONNULL(fn, v);
    TK__NONNULL(fn, qkv);
    TK__HEADS_CHECK(fn);
    TK__LAUNCH(tk__k_split_heads, tk__gs_blocks((size_t)B * T, 1), tk__heads_threads(3 * H * D), 0,
               (cudaStream_t)stream, q, k, v, (float *)NULL, qkv, (const float *)NULL,
               (const float *)NULL, (const float *)NULL, B, T, H, D, 0);
    return tk__launched(fn);
}

TKDEF int tk_split_heads_backward_cuda(float *dqkv, const float *dq, const float *dk,
                                       const float *dv, int B, int T, int H, int D,
                                       tk_stream stream)
{
    static const char *fn = "tk_split_heads_backward_cuda";
    TK__NONNULL(fn, dqkv);
    TK__NONNULL(fn, dq);
    TK__NONNULL(fn, dk);
    TK__NONNULL(fn, dv);
    TK__HEADS_CHECK(fn);
    TK__LAUNCH(tk__k_split_heads, tk__gs_blocks((size_t)B * T, 1), tk__heads_threads(3 * H * D), 0,
               (cudaStream_t)stream, (float *)NULL, (float *)NULL, (float *)NULL, dqkv,
               (const float *)NULL, dq, dk, dv, B, T, H, D, 1);
    return tk__launched(fn);
}

TKDEF int tk_merge_heads_forward_cuda(float *out, const float *inp, int B, int T, int H,
                                      int D, tk_stream stream)
{
    static const char *fn = "tk_merge_heads_forward_cuda";
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__HEADS_CHECK(fn);
    TK__LAUNCH(tk__k_merge_heads, tk__gs_blocks((size_t)B * T, 1), tk__heads_threads(H * D), 0,
               (cudaStream_t)stream, out, (float *)NULL, inp, (const float *)NULL, B, T, H, D, 0);
    return tk__launched(fn);
}

TKDEF int tk_merge_heads_backward_cuda(float *dinp, const float *dout, int B, int T, int H,
                                       int D, tk_stream stream)
{
    static const char *fn = "tk_merge_heads_backward_cuda";
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__HEADS_CHECK(fn);
    TK__LAUNCH(tk__k_merge_heads, tk__gs_blocks((size_t)B * T, 1), tk__heads_threads(H * D), 0,
               (cudaStream_t)stream, (float *)NULL, dinp, (const float *)NULL, dout, B, T, H, D, 1);
    return tk__launched(fn);
}
#undef TK__HEADS_CHECK

/* ------------------------------------------------------ gradient norm */
/* Deterministic two-stage sum of squares: TK__GN_THREADS-thread blocks, a grid fixed by n
   alone (at most TK__GN_MAXB blocks), each thread sums its grid-stride elements in double,
   each block reduces in a fixed butterfly order to one double partial; one block then adds
   the partials in a fixed order and writes the norm (a float) on the device. */
#define TK__GN_THREADS 256
#define TK__GN_MAXB 1024u

/* the sum of v over the block (blockDim.x a multiple of 32), valid in thread 0 */
static __device__ double tk__block_sum_d(double v, double *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5), o;
    for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < nw ? sh[lane] : 0.0;
        for (o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

static __global__ void tk__k_sumsq_part(double *part, const float *g, size_t n)
{
    __shared__ double sh[32];
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    double s = 0.0;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        double x = (double)g[i];
        s += x * x; /* exact in double (a float squared), so FMA or not: the same bits */
    }
    s = tk__block_sum_d(s, sh);
    if (threadIdx.x == 0) part[blockIdx.x] = s;
}

static __global__ void tk__k_sumsq_final(float *norm, const double *part, int nb)
{
    __shared__ double sh[32];
    double s = 0.0;
    int i;
    for (i = (int)threadIdx.x; i < nb; i += (int)blockDim.x) s += part[i];
    s = tk__block_sum_d(s, sh);
    if (threadIdx.x == 0) *norm = (float)sqrt(s);
}

/* g *= max_norm / norm when the (device) norm is finite and > max_norm, as the CPU does */
static __global__ void tk__k_clip_scale(float *g, size_t n, const float *norm, float max_norm)
{
    size_t i, step = (size_t)gridDim.x * blockDim.x;
    float nv = *norm, sc;
    if (!isfinite(nv) || !(nv > max_norm)) return;
    sc = max_norm / nv;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) g[i] *= sc;
}

/* launches the two stages; *scratch (the stream's cached scratch) holds the partials and,
   at *dnorm, the norm */
static int tk__norm_launch(const char *fn, const float *g, size_t n, double **scratch, float **dnorm,
                           cudaStream_t s)
{
    unsigned nb = tk__blocks(n, TK__GN_THREADS * 4);
    double *part = NULL;
    int rc;
    if (nb > TK__GN_MAXB) nb = TK__GN_MAXB;
    *scratch = NULL;
    if ((rc = tk__scratch_get(s, (nb + 1) * sizeof(double), (void **)&part, fn)) != TK_OK) return rc;
    *scratch = part;
    *dnorm = (float *)(part + nb);
    TK__LAUNCH(tk__k_sumsq_part, nb, TK__GN_THREADS, 0, s, part, g, n);
    if ((rc = tk__launched(fn)) != TK_OK) return rc;
    TK__LAUNCH(tk__k_sumsq_final, 1, TK__GN_THREADS, 0, s, *dnorm, (const double *)part, (int)nb);
    return tk__launched(fn);
}

/* a host-only output (the norms): a device pointer is refused */
static int tk__host_out(const char *fn, const char *what, const void *p)
{
    if (p && tk__is_device_ptr(p))
        return tk__fail(TK_EINVAL, "%s: %s must be host memory (got a device pointer)", fn, what);
    return TK_OK;
}

TKDEF int tk_grad_norm_cuda(const float *g, size_t n, float *norm, tk_stream stream)
{
    static const char *fn = "tk_grad_norm_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    double *scratch = NULL;
    float *dnorm = NULL, h = 0.0f;
    int rc;
    TK__NONNULL(fn, g);
    TK__NONNULL(fn, norm);
    TK__NONZERO(fn, n);
    if ((rc = tk__host_out(fn, "norm", norm)) != TK_OK) return rc;
    rc = tk__norm_launch(fn, g, n, &scratch, &dnorm, s);
    if (rc == TK_OK) rc = tk__cuda_check(cudaMemcpyAsync(&h, dnorm, sizeof(float), cudaMemcpyDeviceToHost, s), fn);
    if (rc == TK_OK) rc = tk__cuda_check(cudaStreamSynchronize(s), fn);
    if (rc == TK_OK) *norm = h;
    return rc;
}

TKDEF int tk_clip_grad_norm_cuda(float *g, size_t n, float max_norm, float *norm_out,
                                 tk_stream stream)
{
    static const char *fn = "tk_clip_grad_norm_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    double *scratch = NULL;
    float *dnorm = NULL, h = 0.0f;
    int rc;
    TK__NONNULL(fn, g);
    TK__NONZERO(fn, n);
    if (!tk__finite(max_norm) || !(max_norm > 0.0f))
        return tk__fail(TK_EINVAL, "%s: max_norm must be finite and > 0 (got %g)", fn,
                        (double)max_norm);
    if ((rc = tk__host_out(fn, "norm_out", norm_out)) != TK_OK) return rc;
    rc = tk__norm_launch(fn, g, n, &scratch, &dnorm, s);
    if (rc == TK_OK) {
        TK__LAUNCH(tk__k_clip_scale, tk__gs_blocks(n, 256), 256, 0, s, g, n, (const float *)dnorm, max_norm);
        rc = tk__launched(fn);
    }
    if (rc == TK_OK && norm_out) {
        rc = tk__cuda_check(cudaMemcpyAsync(&h, dnorm, sizeof(float), cudaMemcpyDeviceToHost, s), fn);
        if (rc == TK_OK) rc = tk__cuda_check(cudaStreamSynchronize(s), fn);
        if (rc == TK_OK) *norm_out = h;
    }
    return rc;
}

/* ------------------------------------------------------ device memory */
/* a failed runtime call: clear the (non-sticky) last error so that a later launch check
   does not report it again, and return code with the message */
static int tk__cuda_fail(int code, cudaError_t e, const char *fn, const char *what)
{
    (void)cudaGetLastError();
    return tk__fail(code, "%s: %s: %s", fn, what, cudaGetErrorString(e));
}

TKDEF int tk_device_alloc(void **ptr, size_t bytes)
{
    static const char *fn = "tk_device_alloc";
    cudaError_t e;
    TK__NONNULL(fn, ptr);
    *ptr = NULL;
    TK__NONZERO(fn, bytes);
    e = cudaMalloc(ptr, bytes);
    if (e != cudaSuccess) {
        *ptr = NULL;
        return tk__cuda_fail(e == cudaErrorMemoryAllocation ? TK_ENOMEM : TK_ECUDA, e, fn, "cudaMalloc");
    }
    return TK_OK;
}

TKDEF void tk_device_free(void *ptr)
{
    cudaError_t e;
    if (!ptr) return;
    e = cudaFree(ptr);
    if (e != cudaSuccess) (void)tk__cuda_fail(TK_ECUDA, e, "tk_device_free", "cudaFree");
}

TKDEF int tk_is_device(const void *p) { return tk__is_device_ptr(p); }

/* cudaMemcpy / cudaMemset are asynchronous for some directions (device to device, from
   pageable memory to the device): the default stream is synchronised after them */
TKDEF int tk_copy(void *dst, const void *src, size_t bytes)
{
    static const char *fn = "tk_copy";
    cudaError_t e;
    int dd, sd;
    if (bytes == 0) return TK_OK;
    TK__NONNULL(fn, dst);
    TK__NONNULL(fn, src);
    dd = tk__is_device_ptr(dst);
    sd = tk__is_device_ptr(src);
    if (!dd && !sd) {
        memcpy(dst, src, bytes);
        return TK_OK;
    }
    e = cudaMemcpy(dst, src, bytes,
                   dd ? (sd ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice) : cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return tk__cuda_fail(TK_ECUDA, e, fn, "cudaMemcpy");
    e = cudaStreamSynchronize((cudaStream_t)0);
    return e != cudaSuccess ? tk__cuda_fail(TK_ECUDA, e, fn, "cudaStreamSynchronize") : TK_OK;
}

TKDEF int tk_fill_zero(void *dst, size_t bytes)
{
    static const char *fn = "tk_fill_zero";
    cudaError_t e;
    if (bytes == 0) return TK_OK;
    TK__NONNULL(fn, dst);
    if (!tk__is_device_ptr(dst)) {
        memset(dst, 0, bytes);
        return TK_OK;
    }
    e = cudaMemset(dst, 0, bytes);
    if (e != cudaSuccess) return tk__cuda_fail(TK_ECUDA, e, fn, "cudaMemset");
    e = cudaStreamSynchronize((cudaStream_t)0);
    return e != cudaSuccess ? tk__cuda_fail(TK_ECUDA, e, fn, "cudaStreamSynchronize") : TK_OK;
}

/* Stream-ordered, no host wait (tensor.h): one cudaMemcpyAsync (cudaMemcpyDefault, so no
   pointer query) / cudaMemsetAsync on the caller's stream. Launch-time errors (a bad
   pointer or size) are returned here; an asynchronous fault surfaces at the next
   synchronising call, as for the kernels. */
TKDEF int tk_copy_async(void *dst, const void *src, size_t bytes, tk_stream stream)
{
    static const char *fn = "tk_copy_async";
    cudaError_t e;
    if (bytes == 0) return TK_OK;
    TK__NONNULL(fn, dst);
    TK__NONNULL(fn, src);
    e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, (cudaStream_t)stream);
    return e != cudaSuccess ? tk__cuda_fail(TK_ECUDA, e, fn, "cudaMemcpyAsync") : TK_OK;
}

TKDEF int tk_fill_zero_async(void *dst, size_t bytes, tk_stream stream)
{
    static const char *fn = "tk_fill_zero_async";
    cudaError_t e;
    if (bytes == 0) return TK_OK;
    TK__NONNULL(fn, dst);
    e = cudaMemsetAsync(dst, 0, bytes, (cudaStream_t)stream);
    return e != cudaSuccess ? tk__cuda_fail(TK_ECUDA, e, fn, "cudaMemsetAsync") : TK_OK;
}

/* The host's read of device memory on the caller's stream: the copy after the stream's
   earlier work, then a wait for the stream (tensor.h). No pointer query: the direction is
   the caller's word (device to host). */
TKDEF int tk_copy_to_host(void *dst, const void *src, size_t bytes, tk_stream stream)
{
    static const char *fn = "tk_copy_to_host";
    cudaError_t e;
    if (bytes == 0) return TK_OK;
    TK__NONNULL(fn, dst);
    TK__NONNULL(fn, src);
    e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)stream);
    if (e != cudaSuccess) return tk__cuda_fail(TK_ECUDA, e, fn, "cudaMemcpyAsync");
    e = cudaStreamSynchronize((cudaStream_t)stream);
    return e != cudaSuccess ? tk__cuda_fail(TK_ECUDA, e, fn, "cudaStreamSynchronize") : TK_OK;
}

TKDEF int tk_device_synchronize(void)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess) e = cudaGetLastError(); /* a launch error not yet reported */
    if (e != cudaSuccess) return tk__cuda_fail(TK_ECUDA, e, "tk_device_synchronize", "pending CUDA error");
    return TK_OK;
}

/* ------------------------------------------------- fused causal attention */
/* Flash-style causal attention with an optional additive bias (shared (T,T) or per head
   (H,T,T); -inf entries mask, e.g. sliding windows), per-head temperature and grouped-query
   attention (tk_attention_cuda_config.kv_heads: query head h reads kv head h / (H / Hkv) of
   k, v (B,Hkv,T,D) in place). Nothing of size T x T is stored. Every block has 128 threads.

   math = TK_MATH_FP32 (the exact-parity path). Tiles of TK__AT_BR = 32 query rows x
   TK__AT_BC = 32 keys, 4 threads per tile row (thread t: row t / 4, columns and head
   dimensions t % 4, t % 4 + 4, ...); logit tiles are computed entry by entry into shared
   memory (entry e = t + 128 m). Fully masked key tiles (above the diagonal) are skipped.
     forward   grid (query tiles, B*H): online softmax (running max m and sum l), out = acc / l,
               lse = m + log l; a non-finite or empty row raises a device flag.
     backward  D_i = dO_i . O_i; then three passes that each recompute P = exp(logit - lse):
               dq (grid query tiles x B*H: dq += alpha dS K, and per-block partial sums of
               dS * (q.k) for dtemp), dk/dv (grid key tiles x B*Hkv: the block loops over the
               group's query heads, then the query tiles: dv += P^T dO, dk += alpha dS^T Q),
               dbias (grid query tile x key tile [x H]: dS summed over the heads (shared bias)
               and the batch in order). Every reduction has a fixed order: bits are the same
               run to run, and no atomics.
     shared memory: forward (32 + 2*32) D + 32*33 floats, dq and dbias (2*32 + 2*32) D +
               32*33 + 64 + 128 floats, dk/dv (2*32 + 2*32) D + 2*32*33 + 64 floats: 72.5 KiB
               at D = 128 (opted in above 48 KiB). D <= 128, any value.
   Parity with tk_attention_forward/backward (GQA: the CPU run on K/V repeated per query
   head, dk/dv summed over the group on the host): forward 1e-5, gradients 1e-4 relative
   (rtol on each element plus 1e-6 / 1e-5 of the buffer's max |x|).

   math = TK_MATH_TF32 / TK_MATH_BF16 (tensor cores through nvcuda::wmma: one kernel source,
   templated on the math type; bf16 m16n16k16, tf32 m16n16k8, fp32 accumulators). Tiles of
   TK__TC_B = 64 query rows x 64 keys, 4 warps each owning 16 rows of the tile (16 keys in the
   dk/dv kernel). q, k, v, dO tiles are converted to bf16 / tf32 (round to nearest) when
   staged into shared memory, rows padded to D + 8 elements (WMMA wants 32-byte aligned tile
   pointers and an ldm that is a multiple of 16 bytes: the padded rows give both for any
   D % 16 == 0); fp32 score tiles are 64 x 68. The products on tensor cores:
     forward   S = Q K^T (16-key chunks above the warp's last row skipped), then a warp-local
               SIMT pass (fp32 in shared memory): s = alpha S + bias or -inf, online softmax
               with two lanes per row (max, sum, correction by shuffles), P rounded to the
               math type; O (fp32, 64 x (D+4) in shared memory) is rescaled per row by the
               correction and O += P V on WMMA (accumulator loaded from and stored back to O,
               key chunks past the warp's diagonal skipped). lse and the device flag as fp32.
     dq        grid (query tiles, B*H): S = Q K^T, dP = dO V^T on WMMA, SIMT p = exp(alpha s +
               bias - lse), ds = p (dp - D_i), dS = alpha ds rounded; dq += dS K on WMMA into
               register accumulators (D/16 fragments per warp), added to dq through shared
               memory; dtemp partials sum ds * s in fp32 in a fixed order.
     dk/dv     grid (key tiles, B*Hkv), looping over the group's query heads and the query
               tiles at or below the diagonal: S^T = K Q^T, dP^T = V dO^T on WMMA (stored
               transposed into (query, key) tiles), SIMT P and dS, then dv += P^T dO and
               dk += dS^T Q on WMMA (register accumulators, 2 D/16 fragments per warp): the
               GQA reduction over the group is this loop, in order, without atomics.
     dbias     grid (query tile, key tile [, head]): S and dP on WMMA, ds summed in fp32
               registers over the heads (shared bias) and the batch in order.
   The shared bias tile is read from global memory by each (b, h) block that needs it (the
   logit pass reads it coalesced, once per key tile per head); heads are not batched in one
   block, so a tile is not shared across heads in shared memory (L2 serves the repeats).
   Shared memory per block (bytes, tk__tc_layout; with tf32 P and dS overwrite the fp32 S
   and dP tiles in place):
                          D = 64              D = 128
                          bf16      tf32      bf16      tf32
     forward              72,320    90,752    113,280   156,288
     dq                   82,048    109,696   114,816   175,232
     dk/dv                90,752    109,184   123,520   174,720
     dbias                72,320    109,184   105,088   174,720
   Above 48 KiB the kernels opt in with cudaFuncSetAttribute. A call whose largest block
   needs more than the device's opt-in limit returns TK_EINVAL before any launch: sm_90
   (227 KiB) runs every D in both modes; sm_80 (163 KiB) runs bf16 at every D and tf32 up to
   D = 112 (at D = 128 the tf32 forward fits, its backward needs 175,232 bytes); sm_86/89
   (99 KiB) bf16 up to D = 80, tf32 up to D = 48 (the forward alone: bf16 up to 96, tf32
   up to 64). D must be a multiple of 16 in 16..128; compute capability 8.0 or newer.
   Parity with the CPU (fp32), forward and backward: out, dq, dk, dv, dbias within 2e-2 in
   the max-norm relative to what the call wrote or added, max_i |gpu_i - cpu_i| <= 2e-2
   max_i |cpu_i - initial_i| (the gradients accumulate into initial values); dtemp[h]
   within 2e-2 of the sum of its terms' magnitudes, alpha_h / temp_h sum |ds_ij (q_i.k_j)|
   (dtemp is a sum that cancels: each row's part is a covariance under p, so relative to
   its own value the error is ill-conditioned: bf16 gave 0.33 at T 200 on random data,
   where the CPU run on the same bf16-rounded inputs agrees to 1.4e-3). The inputs'
   rounding (bf16 2^-9, tf32 2^-11 relative, half an ulp) and P / dS rounded before their
   products are the whole difference: accumulation and statistics are fp32. Measured in the
   simulation (tests/parity_tensor.cu, T up to 200, D 16..128): tf32 1.2e-4..9.7e-4, bf16
   1.6e-3..8.6e-3 (dtemp of its terms: tf32 <= 1.3e-4, bf16 <= 4.5e-4).
   Row moments (tk_attention_forward_stats_cuda; stats NULL, or the _ex / plain forwards,
   launch the same kernels instantiated without them: tk__k_attn_fwd<ST>,
   tk__k_attn_fwd_tc<MATH, ST>). With stats the forward's softmax pass also gathers, per
   row, tk_attention_forward_stats' six moments of the fp32 logits x (before P is rounded
   in the tf32/bf16 kernels): each lane of the row (4 in fp32, 2 in the WMMA kernels) sums
   its keys of the tile in float (e, e t, e t^2, t, t^2 with t = x - m_new, -inf keys not
   counted), adds them to double accumulators in registers after moving those from the old
   running max to the new one (tk__at_mom_shift: the shift identities of ceas.h's row
   pass), and the row's lanes add their shares in a fixed butterfly at the end; the row's
   first lane writes H, E_p[x], Var_p[x], mean, var, n. No extra pass over K, no T x T
   store, no extra shared memory; out and lse keep their bits. Parity with the CPU's
   tk_attention_forward_stats (tests/parity_tensor.cu): fp32 |gpu - cpu| <= 1e-5 (|cpu| +
   S_f) per field f, S_f the field's largest |value| in the call (the rounding of E_p[x],
   the mean and the variances scales with the logits' magnitude and spread, not with the
   field, which can cancel to ~0); tf32 / bf16 max |gpu - cpu| <= 2e-2 S_f; the count
   exact. Measured in the simulation (T 1..130, GQA, windows, bias on/off): fp32 <= 1.0e-6,
   tf32 <= 6.0e-4, bf16 <= 5.6e-3; CEAS observables from the device moments
   (ceas_attention_observables_from_moments_cuda) against the CPU chain: fp32 <= 5.5e-7,
   bf16 <= 3.9e-3. nvcc sm_90 registers without / with stats: fp32 72 / 95, tf32 96 / 128,
   bf16 96 / 96, no spills (ptxas -v).
   Checked in the CPU simulation of CUDA (tests/cuda_sim.h, WMMA emulated) only: none of the
   tensor-core path has run on a GPU yet. */
#define TK__AT_BR 32
#define TK__AT_BC 32
#define TK__AT_THREADS 128
#define TK__AT_MAXD 128
#define TK__AT_LD (TK__AT_BC + 1)

#ifdef ATTNKIT_CUDA_SIM
#define TK__DSMEM(T, name) AK_SIM_DYNAMIC_SHARED(T, name)
#else
#define TK__DSMEM(T, name) extern __shared__ __align__(16) unsigned char tk__dsmem_[]; T *name = (T *)tk__dsmem_
#endif

struct tk__attn_args {
    const float *q, *k, *v, *bias, *temp, *dout, *out, *lse, *dvec;
    float *stats; /* forward: (B,H,T,TK_ATTN_NSTATS) row moments, or NULL */
    const float *ent_rows; /* backward: each row's entropy (stride ent_stride), or NULL */
    float ent_coef;
    int ent_stride;
    int bias_per_head, H, Hkv, T, D;
};

/* A lane's share of one softmax row's moments (tk_attention_forward_stats' layout), kept
   relative to the row's running max m: over the visible keys the lane has seen (x finite,
   -inf entries not counted), t = x - m, e = exp(t):
     z = sum e, ea = sum e t, eb = sum e t^2, s1 = sum t, s2 = sum t^2, n keys.
   Each key tile adds its float partial sums (<= 32 terms) to these doubles; when the max
   moves from m to m' (d = m - m' < 0, c = e^d) the sums move with it, as ceas.h's row pass:
     eb' = c (eb + d (2 ea + d z)), ea' = c (ea + d z), z' = c z,
     s2' = s2 + d (2 s1 + n d), s1' = s1 + n d.
   Lanes of a row add their shares (same max) at the end, in a fixed butterfly. */
struct tk__at_mom {
    double z, ea, eb, s1, s2;
    int n;
};
static __device__ __forceinline__ void tk__at_mom_zero(tk__at_mom &r)
{
    r.z = r.ea = r.eb = r.s1 = r.s2 = 0.0;
    r.n = 0;
}
/* the sums move from max m_old to m_new >= m_old (n == 0: all zero, nothing to move) */
static __device__ __forceinline__ void tk__at_mom_shift(tk__at_mom &r, float m_old, float m_new)
{
    if (r.n > 0 && m_new != m_old) {
        const double d = (double)m_old - (double)m_new, c = exp(d), nd = (double)r.n * d;
        r.eb = c * (r.eb + d * (2.0 * r.ea + d * r.z));
        r.ea = c * (r.ea + d * r.z);
        r.z *= c;
        r.s2 += d * (2.0 * r.s1 + nd);
        r.s1 += nd;
    }
}
/* one tile's float partials (relative to the current max) into the sums */
static __device__ __forceinline__ void tk__at_mom_add(tk__at_mom &r, float z, float ea, float eb, float s1, float s2, int n)
{
    r.z += z; r.ea += ea; r.eb += eb; r.s1 += s1; r.s2 += s2; r.n += n;
}
/* the lanes lane ^ 1 (and lane ^ 2 when four) of a row add their shares: every lane of the
   row gets the same sums. A warp-collective (all 32 lanes). */
static __device__ __forceinline__ void tk__at_mom_reduce(tk__at_mom &r, int four)
{
    int o;
    for (o = 1; o <= (four ? 2 : 1); o <<= 1) {
        r.z += __shfl_xor_sync(0xffffffffu, r.z, o);
        r.ea += __shfl_xor_sync(0xffffffffu, r.ea, o);
        r.eb += __shfl_xor_sync(0xffffffffu, r.eb, o);
        r.s1 += __shfl_xor_sync(0xffffffffu, r.s1, o);
        r.s2 += __shfl_xor_sync(0xffffffffu, r.s2, o);
        r.n += __shfl_xor_sync(0xffffffffu, r.n, o);
    }
}
/* st (TK_ATTN_NSTATS) from a row's sums at max m: tensor.h's tk__mom_write, the host's
   formulas */
static __device__ void tk__at_mom_write(float *st, const tk__at_mom &r, float m)
{
    tk__mom_write(st, r.z, r.ea, r.eb, r.s1, r.s2, (double)r.n, m);
}

/* offset of the (T,D) k/v matrix that (b, h) = (bh / H, bh % H) reads: kv head h / (H / Hkv) */
static __device__ size_t tk__at_kvoff(const tk__attn_args &a, int bh)
{
    const int b = bh / a.H, h = bh % a.H;
    return ((size_t)b * a.Hkv + h / (a.H / a.Hkv)) * a.T * a.D;
}

/* rows [r0, r0 + n) of a (T,D) matrix into sh (n, D), zero past T */
static __device__ void tk__at_load(float *sh, const float *src, int r0, int n, int T, int D)
{
    int e;
    for (e = threadIdx.x; e < n * D; e += blockDim.x) {
        int r = e / D, d = e % D;
        sh[e] = r0 + r < T ? src[(size_t)(r0 + r) * D + d] : 0.0f;
    }
}

static __device__ float tk__at_dot(const float *a, const float *b, int D)
{
    float s = 0.0f;
    int d;
    for (d = 0; d < D; d++) s += a[d] * b[d];
    return s;
}

static __device__ float tk__at_alpha(const float *temp, int h, int D)
{
    return 1.0f / (sqrtf((float)D) * (temp ? temp[h] : 1.0f));
}

static __device__ float tk__at_bias(const tk__attn_args &a, int h, int i, int j)
{
    if (!a.bias) return 0.0f;
    return a.bias[(a.bias_per_head ? (size_t)h * a.T * a.T : 0) + (size_t)i * a.T + j];
}

template <int ST>
static __global__ void tk__k_attn_fwd(float *out, float *lse, int *bad, tk__attn_args a)
{
    TK__DSMEM(float, sm);
    const int D = a.D, T = a.T, bh = blockIdx.y, h = bh % a.H, q0 = blockIdx.x * TK__AT_BR;
    const int t = threadIdx.x, r = t >> 2, g = t & 3, i = q0 + r;
    const size_t off = (size_t)bh * T * D, koff = tk__at_kvoff(a, bh);
    const float alpha = tk__at_alpha(a.temp, h, D);
    float *Qs = sm, *Ks = Qs + TK__AT_BR * D, *Vs = Ks + TK__AT_BC * D, *Ps = Vs + TK__AT_BC * D;
    float acc[TK__AT_MAXD / 4], m = -INFINITY, l = 0.0f;
    int dd, nd = (D - g + 3) / 4, kt, nkt = (q0 + TK__AT_BR - 1) / TK__AT_BC + 1, e;
    tk__at_mom mom;
    tk__at_mom_zero(mom);
    for (dd = 0; dd < TK__AT_MAXD / 4; dd++) acc[dd] = 0.0f;
    if (nkt * TK__AT_BC > T) nkt = (T + TK__AT_BC - 1) / TK__AT_BC;
    tk__at_load(Qs, a.q + off, q0, TK__AT_BR, T, D);
    for (kt = 0; kt < nkt; kt++) {
        const int k0 = kt * TK__AT_BC;
        float mt = -INFINITY, m_new, corr, ls = 0.0f;
        int c;
        __syncthreads(); /* the previous tile's Ks, Vs, Ps are no longer read */
        tk__at_load(Ks, a.k + koff, k0, TK__AT_BC, T, D);
        tk__at_load(Vs, a.v + koff, k0, TK__AT_BC, T, D);
        __syncthreads();
        for (e = t; e < TK__AT_BR * TK__AT_BC; e += TK__AT_THREADS) {
            int rr = e / TK__AT_BC, cc = e % TK__AT_BC, ii = q0 + rr, jj = k0 + cc;
            float s = -INFINITY;
            if (ii < T && jj <= ii)
                s = alpha * tk__at_dot(Qs + rr * D, Ks + cc * D, D) + tk__at_bias(a, h, ii, jj);
            Ps[rr * TK__AT_LD + cc] = s;
        }
        __syncthreads();
        for (c = g; c < TK__AT_BC; c += 4) mt = fmaxf(mt, Ps[r * TK__AT_LD + c]);
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 2));
        m_new = fmaxf(m, mt);
        corr = m_new == -INFINITY ? 1.0f : expf(m - m_new);
        if (ST) { /* the row moments: this tile's keys of the lane, relative to m_new */
            float fz = 0.0f, fa = 0.0f, fb = 0.0f, f1 = 0.0f, f2 = 0.0f;
            int fn = 0;
            tk__at_mom_shift(mom, m, m_new);
            for (c = g; c < TK__AT_BC; c += 4) {
                const float s = Ps[r * TK__AT_LD + c];
                if (s != -INFINITY) {
                    const float t = s - m_new, p = expf(t), pt = p * t;
                    fz += p; fa += pt; fb += pt * t; f1 += t; f2 += t * t; fn++;
                }
            }
            tk__at_mom_add(mom, fz, fa, fb, f1, f2, fn);
        }
        for (c = g; c < TK__AT_BC; c += 4) {
            float s = Ps[r * TK__AT_LD + c];
            float p = s == -INFINITY ? 0.0f : expf(s - m_new);
            Ps[r * TK__AT_LD + c] = p;
            ls += p;
        }
        ls += __shfl_xor_sync(0xffffffffu, ls, 1);
        ls += __shfl_xor_sync(0xffffffffu, ls, 2);
        l = l * corr + ls;
        m = m_new;
        __syncthreads(); /* every p of the row written */
        for (dd = 0; dd < nd; dd++) {
            const int d = g + 4 * dd;
            float s = 0.0f;
            for (c = 0; c < TK__AT_BC; c++) s += Ps[r * TK__AT_LD + c] * Vs[c * D + d];
            acc[dd] = acc[dd] * corr + s;
        }
    }
    if (ST) tk__at_mom_reduce(mom, 1);
    if (i < T) {
        const int ok = l > 0.0f && l <= 3.0e38f && m > -INFINITY && m < INFINITY;
        const float inv = 1.0f / l;
        for (dd = 0; dd < nd; dd++) out[off + (size_t)i * D + g + 4 * dd] = acc[dd] * inv;
        if (g == 0) {
            lse[(size_t)bh * T + i] = m + logf(l);
            if (!ok) *bad = 1;
            if (ST) tk__at_mom_write(a.stats + ((size_t)bh * T + i) * TK_ATTN_NSTATS, mom, m);
        }
    }
}

/* dvec (B*H*T) = rowsum(dout * out) */
static __global__ void tk__k_attn_dvec(float *dvec, const float *dout, const float *out, size_t rows, int D)
{
    size_t row = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) dvec[row] = tk__at_dot(dout + row * D, out + row * D, D);
}

/* dS entries of a (query tile, key tile) into dSs (and P into Ps when wanted), from the
   tiles already in shared memory; tacc += dS * (q.k) over valid entries */
static __device__ void tk__at_ds_tile(float *dSs, float *Ps, float *tacc, const tk__attn_args &a,
                                      const float *Qs, const float *dOs, const float *Ks,
                                      const float *Vs, const float *Ls, const float *Dsv,
                                      int h, int q0, int k0, float alpha, size_t bh)
{
    const int D = a.D, T = a.T;
    int e;
    for (e = threadIdx.x; e < TK__AT_BR * TK__AT_BC; e += blockDim.x) {
        int rr = e / TK__AT_BC, cc = e % TK__AT_BC, ii = q0 + rr, jj = k0 + cc;
        float p = 0.0f, ds = 0.0f;
        if (ii < T && jj <= ii) {
            float su = tk__at_dot(Qs + rr * D, Ks + cc * D, D);
            float logit = alpha * su + tk__at_bias(a, h, ii, jj);
            float dp = tk__at_dot(dOs + rr * D, Vs + cc * D, D);
            p = expf(logit - Ls[rr]);
            ds = p * (dp - Dsv[rr]);
            if (a.ent_rows && p > 0.0f) /* the entropy term: -c p (ln p + H_i) */
                ds -= a.ent_coef * p * ((logit - Ls[rr]) + a.ent_rows[(bh * T + ii) * (size_t)a.ent_stride]);
            if (tacc) *tacc += ds * su;
        }
        dSs[rr * TK__AT_LD + cc] = ds;
        if (Ps) Ps[rr * TK__AT_LD + cc] = p;
    }
}

/* the per-row lse and D of query rows [q0, q0 + n) into shared memory */
static __device__ void tk__at_load_rows(float *Ls, float *Dsv, const tk__attn_args &a, size_t bh, int q0, int n)
{
    int r;
    for (r = threadIdx.x; r < n; r += blockDim.x) {
        int i = q0 + r;
        Ls[r] = i < a.T ? a.lse[bh * a.T + i] : 0.0f;
        Dsv[r] = i < a.T ? a.dvec[bh * a.T + i] : 0.0f;
    }
}

/* block sum in a fixed order: every thread's value to shared, thread 0 adds them up */
static __device__ float tk__at_block_sum_fixed(float v, float *sh)
{
    float s = 0.0f;
    int u;
    __syncthreads();
    sh[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x == 0)
        for (u = 0; u < (int)blockDim.x; u++) s += sh[u];
    return s; /* valid in thread 0 */
}

static __global__ void tk__k_attn_dq(float *dq, float *tpart, tk__attn_args a)
{
    TK__DSMEM(float, sm);
    const int D = a.D, T = a.T, bh = blockIdx.y, h = bh % a.H, q0 = blockIdx.x * TK__AT_BR;
    const int t = threadIdx.x, r = t >> 2, g = t & 3, i = q0 + r;
    const size_t off = (size_t)bh * T * D, koff = tk__at_kvoff(a, bh);
    const float alpha = tk__at_alpha(a.temp, h, D);
    float *Qs = sm, *dOs = Qs + TK__AT_BR * D, *Ks = dOs + TK__AT_BR * D, *Vs = Ks + TK__AT_BC * D;
    float *dSs = Vs + TK__AT_BC * D, *Ls = dSs + TK__AT_BR * TK__AT_LD, *Dsv = Ls + TK__AT_BR;
    float *red = Dsv + TK__AT_BR;
    float acc[TK__AT_MAXD / 4], tacc = 0.0f, tsum;
    int dd, nd = (D - g + 3) / 4, kt, nkt = (q0 + TK__AT_BR - 1) / TK__AT_BC + 1;
    for (dd = 0; dd < TK__AT_MAXD / 4; dd++) acc[dd] = 0.0f;
    if (nkt * TK__AT_BC > T) nkt = (T + TK__AT_BC - 1) / TK__AT_BC;
    tk__at_load(Qs, a.q + off, q0, TK__AT_BR, T, D);
    tk__at_load(dOs, a.dout + off, q0, TK__AT_BR, T, D);
    tk__at_load_rows(Ls, Dsv, a, (size_t)bh, q0, TK__AT_BR);
    for (kt = 0; kt < nkt; kt++) {
        const int k0 = kt * TK__AT_BC;
        int c;
        __syncthreads();
        tk__at_load(Ks, a.k + koff, k0, TK__AT_BC, T, D);
        tk__at_load(Vs, a.v + koff, k0, TK__AT_BC, T, D);
        __syncthreads();
        tk__at_ds_tile(dSs, NULL, &tacc, a, Qs, dOs, Ks, Vs, Ls, Dsv, h, q0, k0, alpha, (size_t)bh);
        __syncthreads();
        for (dd = 0; dd < nd; dd++) {
            const int d = g + 4 * dd;
            float s = 0.0f;
            for (c = 0; c < TK__AT_BC; c++) s += dSs[r * TK__AT_LD + c] * Ks[c * D + d];
            acc[dd] += alpha * s;
        }
    }
    if (i < T)
        for (dd = 0; dd < nd; dd++) dq[off + (size_t)i * D + g + 4 * dd] += acc[dd];
    tsum = tk__at_block_sum_fixed(tacc, red);
    if (t == 0 && tpart) tpart[(size_t)bh * gridDim.x + blockIdx.x] = tsum;
}

/* grid (key tiles, B*Hkv): dk, dv (B,Hkv,T,D) of one kv head, summed over its group's
   query heads and the query tiles in order */
static __global__ void tk__k_attn_dkdv(float *dk, float *dv, tk__attn_args a)
{
    TK__DSMEM(float, sm);
    const int D = a.D, T = a.T, bk = blockIdx.y, G = a.H / a.Hkv, b = bk / a.Hkv, hk = bk % a.Hkv;
    const int k0 = blockIdx.x * TK__AT_BC, t = threadIdx.x, c = t >> 2, g = t & 3, j = k0 + c;
    const size_t koff = (size_t)bk * T * D;
    float *Ks = sm, *Vs = Ks + TK__AT_BC * D, *Qs = Vs + TK__AT_BC * D, *dOs = Qs + TK__AT_BR * D;
    float *dSs = dOs + TK__AT_BR * D, *Ps = dSs + TK__AT_BR * TK__AT_LD, *Ls = Ps + TK__AT_BR * TK__AT_LD;
    float *Dsv = Ls + TK__AT_BR;
    float adk[TK__AT_MAXD / 4], adv[TK__AT_MAXD / 4];
    int dd, nd = (D - g + 3) / 4, qt, nqt = (T + TK__AT_BR - 1) / TK__AT_BR, gi;
    for (dd = 0; dd < TK__AT_MAXD / 4; dd++) adk[dd] = adv[dd] = 0.0f;
    tk__at_load(Ks, a.k + koff, k0, TK__AT_BC, T, D);
    tk__at_load(Vs, a.v + koff, k0, TK__AT_BC, T, D);
    for (gi = 0; gi < G; gi++) {
        const int h = hk * G + gi;
        const size_t bh = (size_t)b * a.H + h, off = bh * T * D;
        const float alpha = tk__at_alpha(a.temp, h, D);
        for (qt = k0 / TK__AT_BR; qt < nqt; qt++) { /* query tiles at or below the diagonal */
            const int q0 = qt * TK__AT_BR;
            int rr;
            __syncthreads();
            tk__at_load(Qs, a.q + off, q0, TK__AT_BR, T, D);
            tk__at_load(dOs, a.dout + off, q0, TK__AT_BR, T, D);
            tk__at_load_rows(Ls, Dsv, a, bh, q0, TK__AT_BR);
            __syncthreads();
            tk__at_ds_tile(dSs, Ps, NULL, a, Qs, dOs, Ks, Vs, Ls, Dsv, h, q0, k0, alpha, bh);
            __syncthreads();
            for (dd = 0; dd < nd; dd++) {
                const int d = g + 4 * dd;
                float sk = 0.0f, sv = 0.0f;
                for (rr = 0; rr < TK__AT_BR; rr++) {
                    sk += dSs[rr * TK__AT_LD + c] * Qs[rr * D + d];
                    sv += Ps[rr * TK__AT_LD + c] * dOs[rr * D + d];
                }
                adk[dd] += alpha * sk;
                adv[dd] += sv;
            }
        }
    }
    if (j < T)
        for (dd = 0; dd < nd; dd++) {
            dk[koff + (size_t)j * D + g + 4 * dd] += adk[dd];
            dv[koff + (size_t)j * D + g + 4 * dd] += adv[dd];
        }
}

/* dbias tile (blockIdx.x: query tile, blockIdx.y: key tile, blockIdx.z: head when the bias
   is per head): dS summed over b (and over h for a shared bias), in order */
static __global__ void tk__k_attn_dbias(float *dbias, tk__attn_args a, int B)
{
    TK__DSMEM(float, sm);
    const int D = a.D, T = a.T, q0 = blockIdx.x * TK__AT_BR, k0 = blockIdx.y * TK__AT_BC;
    const int h_lo = a.bias_per_head ? (int)blockIdx.z : 0, h_hi = a.bias_per_head ? h_lo + 1 : a.H;
    float *Qs = sm, *dOs = Qs + TK__AT_BR * D, *Ks = dOs + TK__AT_BR * D, *Vs = Ks + TK__AT_BC * D;
    float *dSs = Vs + TK__AT_BC * D, *Ls = dSs + TK__AT_BR * TK__AT_LD, *Dsv = Ls + TK__AT_BR;
    float acc[TK__AT_BR * TK__AT_BC / TK__AT_THREADS];
    int b, h, m, e;
    for (m = 0; m < TK__AT_BR * TK__AT_BC / TK__AT_THREADS; m++) acc[m] = 0.0f;
    if (k0 > q0 + TK__AT_BR - 1) return; /* uniform over the block: above the diagonal */
    for (h = h_lo; h < h_hi; h++)
        for (b = 0; b < B; b++) {
            const int bh = b * a.H + h;
            const size_t off = (size_t)bh * T * D, koff = tk__at_kvoff(a, bh);
            const float alpha = tk__at_alpha(a.temp, h, D);
            __syncthreads();
            tk__at_load(Qs, a.q + off, q0, TK__AT_BR, T, D);
            tk__at_load(dOs, a.dout + off, q0, TK__AT_BR, T, D);
            tk__at_load(Ks, a.k + koff, k0, TK__AT_BC, T, D);
            tk__at_load(Vs, a.v + koff, k0, TK__AT_BC, T, D);
            tk__at_load_rows(Ls, Dsv, a, (size_t)bh, q0, TK__AT_BR);
            __syncthreads();
            tk__at_ds_tile(dSs, NULL, NULL, a, Qs, dOs, Ks, Vs, Ls, Dsv, h, q0, k0, alpha, (size_t)bh);
            __syncthreads();
            for (m = 0, e = threadIdx.x; e < TK__AT_BR * TK__AT_BC; e += TK__AT_THREADS, m++)
                acc[m] += dSs[(e / TK__AT_BC) * TK__AT_LD + e % TK__AT_BC];
        }
    for (m = 0, e = threadIdx.x; e < TK__AT_BR * TK__AT_BC; e += TK__AT_THREADS, m++) {
        int ii = q0 + e / TK__AT_BC, jj = k0 + e % TK__AT_BC;
        if (ii < T && jj <= ii)
            dbias[(a.bias_per_head ? (size_t)h_lo * T * T : 0) + (size_t)ii * T + jj] += acc[m];
    }
}

/* dtemp[h] += -alpha_h / temp_h * sum over b and query tiles of tpart, in order */
static __global__ void tk__k_attn_dtemp(float *dtemp, const float *tpart, const float *temp, int B, int H, int nqt, int D)
{
    int h = blockIdx.x * blockDim.x + threadIdx.x, b, u;
    float s = 0.0f, th, alpha;
    if (h >= H) return;
    for (b = 0; b < B; b++)
        for (u = 0; u < nqt; u++) s += tpart[((size_t)b * H + h) * nqt + u];
    th = temp ? temp[h] : 1.0f;
    alpha = 1.0f / (sqrtf((float)D) * th);
    dtemp[h] += -alpha / th * s;
}

/* ---------------------------------------- tensor-core attention (tf32 / bf16 WMMA) */
#define TK__TC_B 64                /* query rows and keys of a tile (the causal loops need both equal) */
#define TK__TC_LS (TK__TC_B + 4)   /* fp32 score tile row: 272 bytes */
#define TK__TC_LP (TK__TC_B + 8)   /* bf16 P / dS tile row: 144 bytes */
#define TK__TC_NDC (TK__AT_MAXD / 16)

/* the WMMA kernels exist for sm_80 and newer (bf16 and tf32 fragments); for older targets
   their bodies are empty and the host refuses the tensor-core modes on such devices */
#if defined(ATTNKIT_CUDA_SIM) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define TK__TC_OK 1
#endif
#ifdef ATTNKIT_CUDA_SIM
#define TK__UNROLL
#else
#define TK__UNROLL _Pragma("unroll")
#endif

/* shared-memory regions of a tensor-core attention block, byte offsets from a 128-byte
   aligned base. kind 0 forward, 1 dq, 2 dk/dv, 3 dbias; esz: the staged element's size (2
   bf16, 4 tf32). With tf32 (4-byte elements) P and dS are written over the fp32 S and dP
   tiles in place. */
struct tk__tc_smem {
    size_t t[4], s, dp, p, ds, o, rows, red, total;
};
static __host__ __device__ size_t tk__tc_round(size_t bytes) { return (bytes + 127) & ~(size_t)127; }
static __host__ __device__ tk__tc_smem tk__tc_layout(int kind, int D, size_t esz)
{
    tk__tc_smem m;
    const size_t tile = tk__tc_round((size_t)TK__TC_B * (D + 8) * esz);
    const size_t fl = tk__tc_round((size_t)TK__TC_B * TK__TC_LS * sizeof(float));
    const size_t pt = tk__tc_round((size_t)TK__TC_B * TK__TC_LP * esz);
    const int bf = esz == 2;
    size_t at = 0;
    int n;
    for (n = 0; n < 4; n++) {
        m.t[n] = at;
        if (n < (kind == 0 ? 3 : 4)) at += tile;
    }
    m.s = at;
    at += fl;
    m.dp = at;
    if (kind != 0) at += fl;
    m.p = bf ? at : m.s;
    if (bf && (kind == 0 || kind == 2)) at += pt;
    m.ds = bf ? at : m.dp;
    if (bf && (kind == 1 || kind == 2)) at += pt;
    m.o = at;
    if (kind == 0) at += tk__tc_round((size_t)TK__TC_B * (D + 4) * sizeof(float));
    m.rows = at;
    at += tk__tc_round(2 * TK__TC_B * sizeof(float));
    m.red = at;
    if (kind == 1) at += tk__tc_round(TK__AT_THREADS * sizeof(float));
    m.total = at + 128; /* room to align the base */
    return m;
}

#ifdef TK__TC_OK
/* the math type: what a staged element is, the WMMA element type, the k of one product */
template <int MATH> struct tk__tc;
template <> struct tk__tc<TK_MATH_BF16> {
    typedef __nv_bfloat16 st;
    typedef __nv_bfloat16 ft;
    enum { KS = 16 };
    static __device__ __forceinline__ st cvt(float x) { return __float2bfloat16(x); }
};
template <> struct tk__tc<TK_MATH_TF32> {
    typedef float st;
    typedef nvcuda::wmma::precision::tf32 ft;
    enum { KS = 8 };
    static __device__ __forceinline__ st cvt(float x) { return nvcuda::wmma::__float_to_tf32(x); }
};
template <int MATH> struct tk__tcacc {
    typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, tk__tc<MATH>::KS, float> type;
};
template <typename L> struct tk__tclay;
template <> struct tk__tclay<nvcuda::wmma::row_major> { enum { row = 1 }; };
template <> struct tk__tclay<nvcuda::wmma::col_major> { enum { row = 0 }; };

/* acc += A B over k in [k0, k1) (multiples of KS): A 16 x k, element (r, k) at pa[r*lda + k]
   (LA row_major) or pa[k*lda + r] (col_major); B k x 16, element (k, c) at pb[k*ldb + c]
   (LB row_major) or pb[c*ldb + k] (col_major). A warp-collective. */
template <int MATH, typename LA, typename LB>
static __device__ __forceinline__ void tk__tc_mma(typename tk__tcacc<MATH>::type &acc,
                                                  const typename tk__tc<MATH>::st *pa, int lda,
                                                  const typename tk__tc<MATH>::st *pb, int ldb, int k0, int k1)
{
    enum { KS = tk__tc<MATH>::KS };
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, KS, typename tk__tc<MATH>::ft, LA> fa;
    nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, KS, typename tk__tc<MATH>::ft, LB> fb;
    int kk;
    for (kk = k0; kk < k1; kk += KS) {
        nvcuda::wmma::load_matrix_sync(fa, pa + (tk__tclay<LA>::row ? (size_t)kk : (size_t)kk * lda), (unsigned)lda);
        nvcuda::wmma::load_matrix_sync(fb, pb + (tk__tclay<LB>::row ? (size_t)kk * ldb : (size_t)kk), (unsigned)ldb);
        nvcuda::wmma::mma_sync(acc, fa, fb, acc);
    }
}

/* rows [r0, r0 + 64) of a (T,D) fp32 matrix into sh (64, ld) in the math type, zero past T */
template <int MATH>
static __device__ void tk__tc_stage(typename tk__tc<MATH>::st *sh, const float *src, int r0, int T, int D, int ld)
{
    int e;
    for (e = threadIdx.x; e < TK__TC_B * D; e += blockDim.x) {
        const int r = e / D, d = e - r * D;
        sh[r * ld + d] = tk__tc<MATH>::cvt(r0 + r < T ? src[(size_t)(r0 + r) * D + d] : 0.0f);
    }
}

static __device__ __forceinline__ unsigned char *tk__tc_base(unsigned char *raw)
{
    return (unsigned char *)(((uintptr_t)raw + 127) & ~(uintptr_t)127);
}

/* the warp's 16 rows [wr0, wr0 + 16) of the fp32 score tile become logits: alpha s + bias,
   -inf where masked (key after the query, query past T). Stale entries of skipped chunks
   are all masked, so never read. Lanes walk the columns: bias reads are coalesced. */
static __device__ void tk__tc_logits(float *Ss, const tk__attn_args &a, int h, float alpha, int q0, int k0, int wr0, int lane)
{
    int rr, c;
    for (rr = 0; rr < 16; rr++) {
        const int ii = q0 + wr0 + rr;
        for (c = lane; c < TK__TC_B; c += 32) {
            const int jj = k0 + c;
            float *ps = Ss + (wr0 + rr) * TK__TC_LS + c;
            *ps = ii < a.T && jj <= ii ? alpha * *ps + tk__at_bias(a, h, ii, jj) : -INFINITY;
        }
    }
}

/* S = Q K^T and dP = dO V^T for the warp's query rows [wr0, wr0 + 16) (fp32, ld TK__TC_LS);
   16-key chunks after the warp's last query row are skipped */
template <int MATH>
static __device__ void tk__tc_rows_sdp(float *Ss, float *dPs, const typename tk__tc<MATH>::st *Qs,
                                       const typename tk__tc<MATH>::st *dOs, const typename tk__tc<MATH>::st *Ks,
                                       const typename tk__tc<MATH>::st *Vs, int D, int ld, int wr0, int qlast, int k0)
{
    int n;
    for (n = 0; n < TK__TC_B / 16; n++)
        if (k0 + 16 * n <= qlast) {
            typename tk__tcacc<MATH>::type acc;
            nvcuda::wmma::fill_fragment(acc, 0.0f);
            tk__tc_mma<MATH, nvcuda::wmma::row_major, nvcuda::wmma::col_major>(acc, Qs + wr0 * ld, ld, Ks + 16 * n * ld, ld, 0, D);
            nvcuda::wmma::store_matrix_sync(Ss + wr0 * TK__TC_LS + 16 * n, acc, TK__TC_LS, nvcuda::wmma::mem_row_major);
            nvcuda::wmma::fill_fragment(acc, 0.0f);
            tk__tc_mma<MATH, nvcuda::wmma::row_major, nvcuda::wmma::col_major>(acc, dOs + wr0 * ld, ld, Vs + 16 * n * ld, ld, 0, D);
            nvcuda::wmma::store_matrix_sync(dPs + wr0 * TK__TC_LS + 16 * n, acc, TK__TC_LS, nvcuda::wmma::mem_row_major);
        }
}

/* the warp's query rows of a (query, key) tile: p = exp(alpha s + bias - lse), ds = p (dp - D_i)
   in fp32; alpha ds rounded to the math type into dSs (ld ldS; may be dPs itself: the same
   lane reads and writes an entry), unless dSs is NULL; dsacc (32 per lane, may be NULL) +=
   ds. Returns the lane's sum of ds * s (the temperature gradient's partial). */
template <int MATH>
static __device__ float tk__tc_rows_ds(typename tk__tc<MATH>::st *dSs, int ldS, const float *Ss, const float *dPs,
                                       const float *Ls, const float *Dv, const tk__attn_args &a, int h, float alpha,
                                       int q0, int k0, int wr0, int lane, float *dsacc)
{
    float tacc = 0.0f;
    int rr, c, m = 0;
    for (rr = 0; rr < 16; rr++) {
        const int row = wr0 + rr, ii = q0 + row;
        for (c = lane; c < TK__TC_B; c += 32, m++) {
            const int jj = k0 + c;
            float ds = 0.0f;
            if (ii < a.T && jj <= ii) {
                const float su = Ss[row * TK__TC_LS + c];
                const float p = expf(alpha * su + tk__at_bias(a, h, ii, jj) - Ls[row]);
                ds = p * (dPs[row * TK__TC_LS + c] - Dv[row]);
                tacc += ds * su;
            }
            if (dSs) dSs[row * ldS + c] = tk__tc<MATH>::cvt(alpha * ds);
            if (dsacc) dsacc[m] += ds;
        }
    }
    return tacc;
}

/* the lse and D of query rows [q0, q0 + 64) into Ls, Dv */
static __device__ void tk__tc_rows(float *Ls, float *Dv, const tk__attn_args &a, size_t bh, int q0)
{
    tk__at_load_rows(Ls, Dv, a, bh, q0, TK__TC_B);
}

/* rows [wr0, wr0 + 16) of an fp32 staging tile (ld) added to dst rows r0 + wr0 + rr < T */
static __device__ void tk__tc_add_rows(float *dst, const float *stg, int ld, int r0, int wr0, int T, int D, int lane)
{
    int rr, c;
    for (rr = 0; rr < 16; rr++) {
        const int i = r0 + wr0 + rr;
        if (i >= T) break;
        for (c = lane; c < D; c += 32) dst[(size_t)i * D + c] += stg[(wr0 + rr) * ld + c];
    }
}
#endif /* TK__TC_OK */

template <int MATH, int ST>
static __global__ void __launch_bounds__(TK__AT_THREADS) tk__k_attn_fwd_tc(float *out, float *lse, int *bad, tk__attn_args a)
{
#ifdef TK__TC_OK
    typedef typename tk__tc<MATH>::st st;
    TK__DSMEM(unsigned char, raw);
    const tk__tc_smem L = tk__tc_layout(0, a.D, sizeof(st));
    unsigned char *base = tk__tc_base(raw);
    const int D = a.D, T = a.T, LD = D + 8, LO = D + 4, LP = sizeof(st) == 2 ? TK__TC_LP : TK__TC_LS;
    const int bh = blockIdx.y, h = bh % a.H, q0 = blockIdx.x * TK__TC_B;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, wr0 = 16 * w, qlast = q0 + wr0 + 15;
    const int row = wr0 + (lane >> 1), half = lane & 1, i = q0 + row;
    const size_t off = (size_t)bh * T * D, koff = tk__at_kvoff(a, bh);
    const float alpha = tk__at_alpha(a.temp, h, D);
    st *Qs = (st *)(base + L.t[0]), *Ks = (st *)(base + L.t[1]), *Vs = (st *)(base + L.t[2]), *Ps = (st *)(base + L.p);
    float *Ss = (float *)(base + L.s), *Os = (float *)(base + L.o), *Rs = (float *)(base + L.rows);
    float m_run = -INFINITY, l_run = 0.0f;
    int kt, e, n, dc, c;
    tk__at_mom mom;
    tk__at_mom_zero(mom);
    tk__tc_stage<MATH>(Qs, a.q + off, q0, T, D, LD);
    for (e = lane; e < 16 * D; e += 32) Os[(wr0 + e / D) * LO + e % D] = 0.0f;
    for (kt = 0; kt <= (int)blockIdx.x; kt++) { /* key tiles up to the diagonal (all start below T) */
        const int k0 = kt * TK__TC_B;
        const int k1 = qlast - k0 + 1 >= TK__TC_B ? TK__TC_B
                                                  : (qlast - k0 + tk__tc<MATH>::KS) / tk__tc<MATH>::KS * tk__tc<MATH>::KS;
        float mt = -INFINITY, ls = 0.0f, m_new, corr;
        __syncthreads(); /* the previous tile's K, V are no longer read */
        tk__tc_stage<MATH>(Ks, a.k + koff, k0, T, D, LD);
        tk__tc_stage<MATH>(Vs, a.v + koff, k0, T, D, LD);
        __syncthreads();
        for (n = 0; n < TK__TC_B / 16; n++)
            if (k0 + 16 * n <= qlast) {
                typename tk__tcacc<MATH>::type acc;
                nvcuda::wmma::fill_fragment(acc, 0.0f);
                tk__tc_mma<MATH, nvcuda::wmma::row_major, nvcuda::wmma::col_major>(acc, Qs + wr0 * LD, LD, Ks + 16 * n * LD, LD, 0, D);
                nvcuda::wmma::store_matrix_sync(Ss + wr0 * TK__TC_LS + 16 * n, acc, TK__TC_LS, nvcuda::wmma::mem_row_major);
            }
        __syncwarp();
        tk__tc_logits(Ss, a, h, alpha, q0, k0, wr0, lane);
        __syncwarp();
        /* online softmax, two lanes per row (columns half, half + 2, ...) */
        for (c = half; c < TK__TC_B; c += 2) mt = fmaxf(mt, Ss[row * TK__TC_LS + c]);
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        m_new = fmaxf(m_run, mt);
        corr = m_new == -INFINITY ? 1.0f : expf(m_run - m_new);
        if (ST) { /* the row moments from the fp32 logits, before P is rounded */
            float fz = 0.0f, fa = 0.0f, fb = 0.0f, f1 = 0.0f, f2 = 0.0f;
            int fn = 0;
            tk__at_mom_shift(mom, m_run, m_new);
            for (c = half; c < TK__TC_B; c += 2) {
                const float s = Ss[row * TK__TC_LS + c];
                if (s != -INFINITY) {
                    const float t = s - m_new, p = expf(t), pt = p * t;
                    fz += p; fa += pt; fb += pt * t; f1 += t; f2 += t * t; fn++;
                }
            }
            tk__at_mom_add(mom, fz, fa, fb, f1, f2, fn);
        }
        for (c = half; c < TK__TC_B; c += 2) {
            const float s = Ss[row * TK__TC_LS + c];
            const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
            Ps[row * LP + c] = tk__tc<MATH>::cvt(p); /* tf32: over S in place, same lane */
            ls += p;
        }
        ls += __shfl_xor_sync(0xffffffffu, ls, 1);
        l_run = l_run * corr + ls;
        m_run = m_new;
        for (c = half; c < D; c += 2) Os[row * LO + c] *= corr;
        __syncwarp();
        for (dc = 0; dc < D / 16; dc++) { /* O += P V, keys past the warp's last row skipped */
            typename tk__tcacc<MATH>::type acc;
            nvcuda::wmma::load_matrix_sync(acc, Os + wr0 * LO + 16 * dc, (unsigned)LO, nvcuda::wmma::mem_row_major);
            tk__tc_mma<MATH, nvcuda::wmma::row_major, nvcuda::wmma::row_major>(acc, Ps + wr0 * LP, LP, Vs + 16 * dc, LD, 0, k1);
            nvcuda::wmma::store_matrix_sync(Os + wr0 * LO + 16 * dc, acc, (unsigned)LO, nvcuda::wmma::mem_row_major);
        }
        __syncwarp();
    }
    if (ST) tk__at_mom_reduce(mom, 0);
    if (half == 0) {
        Rs[row] = l_run > 0.0f ? 1.0f / l_run : 0.0f; /* rows past T: never read */
        if (i < T) {
            const int ok = l_run > 0.0f && l_run <= 3.0e38f && m_run > -INFINITY && m_run < INFINITY;
            lse[(size_t)bh * T + i] = m_run + logf(l_run);
            if (!ok) *bad = 1;
            if (ST) tk__at_mom_write(a.stats + ((size_t)bh * T + i) * TK_ATTN_NSTATS, mom, m_run);
        }
    }
    __syncwarp();
    {
        int rr;
        for (rr = 0; rr < 16; rr++) {
            const int ii = q0 + wr0 + rr;
            if (ii >= T) break;
            for (c = lane; c < D; c += 32) out[off + (size_t)ii * D + c] = Os[(wr0 + rr) * LO + c] * Rs[wr0 + rr];
        }
    }
#else
    (void)out; (void)lse; (void)bad; (void)a;
#endif
}

template <int MATH>
static __global__ void __launch_bounds__(TK__AT_THREADS) tk__k_attn_dq_tc(float *dq, float *tpart, tk__attn_args a)
{
#ifdef TK__TC_OK
    typedef typename tk__tc<MATH>::st st;
    TK__DSMEM(unsigned char, raw);
    const tk__tc_smem L = tk__tc_layout(1, a.D, sizeof(st));
    unsigned char *base = tk__tc_base(raw);
    const int D = a.D, T = a.T, LD = D + 8, LO = D + 4, LdS = sizeof(st) == 2 ? TK__TC_LP : TK__TC_LS;
    const int bh = blockIdx.y, h = bh % a.H, q0 = blockIdx.x * TK__TC_B;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, wr0 = 16 * w, qlast = q0 + wr0 + 15, nd = D / 16;
    const size_t off = (size_t)bh * T * D, koff = tk__at_kvoff(a, bh);
    const float alpha = tk__at_alpha(a.temp, h, D);
    st *Qs = (st *)(base + L.t[0]), *dOs = (st *)(base + L.t[1]), *Ks = (st *)(base + L.t[2]), *Vs = (st *)(base + L.t[3]);
    st *dSs = (st *)(base + L.ds);
    float *Ss = (float *)(base + L.s), *dPs = (float *)(base + L.dp), *Ls = (float *)(base + L.rows), *Dv = Ls + TK__TC_B;
    float *red = (float *)(base + L.red), *Stg = (float *)(base + L.t[0]), tacc = 0.0f, tsum;
    typename tk__tcacc<MATH>::type acc[TK__TC_NDC];
    int kt, dc;
    TK__UNROLL
    for (dc = 0; dc < TK__TC_NDC; dc++) nvcuda::wmma::fill_fragment(acc[dc], 0.0f);
    tk__tc_stage<MATH>(Qs, a.q + off, q0, T, D, LD);
    tk__tc_stage<MATH>(dOs, a.dout + off, q0, T, D, LD);
    tk__tc_rows(Ls, Dv, a, (size_t)bh, q0);
    for (kt = 0; kt <= (int)blockIdx.x; kt++) {
        const int k0 = kt * TK__TC_B;
        const int k1 = qlast - k0 + 1 >= TK__TC_B ? TK__TC_B
                                                  : (qlast - k0 + tk__tc<MATH>::KS) / tk__tc<MATH>::KS * tk__tc<MATH>::KS;
        __syncthreads();
        tk__tc_stage<MATH>(Ks, a.k + koff, k0, T, D, LD);
        tk__tc_stage<MATH>(Vs, a.v + koff, k0, T, D, LD);
        __syncthreads();
        tk__tc_rows_sdp<MATH>(Ss, dPs, Qs, dOs, Ks, Vs, D, LD, wr0, qlast, k0);
        __syncwarp();
        tacc += tk__tc_rows_ds<MATH>(dSs, LdS, Ss, dPs, Ls, Dv, a, h, alpha, q0, k0, wr0, lane, NULL);
        __syncwarp();
        TK__UNROLL
        for (dc = 0; dc < TK__TC_NDC; dc++) /* dq += (alpha dS) K */
            if (dc < nd)
                tk__tc_mma<MATH, nvcuda::wmma::row_major, nvcuda::wmma::row_major>(acc[dc], dSs + wr0 * LdS, LdS, Ks + 16 * dc, LD, 0, k1);
    }
    __syncthreads(); /* Q and dO become the fp32 staging tile */
    TK__UNROLL
    for (dc = 0; dc < TK__TC_NDC; dc++)
        if (dc < nd) nvcuda::wmma::store_matrix_sync(Stg + wr0 * LO + 16 * dc, acc[dc], (unsigned)LO, nvcuda::wmma::mem_row_major);
    __syncwarp();
    tk__tc_add_rows(dq + off, Stg, LO, q0, wr0, T, D, lane);
    tsum = tk__at_block_sum_fixed(tacc, red);
    if (threadIdx.x == 0 && tpart) tpart[(size_t)bh * gridDim.x + blockIdx.x] = tsum;
#else
    (void)dq; (void)tpart; (void)a;
#endif
}

template <int MATH>
static __global__ void __launch_bounds__(TK__AT_THREADS) tk__k_attn_dkdv_tc(float *dk, float *dv, tk__attn_args a)
{
#ifdef TK__TC_OK
    typedef typename tk__tc<MATH>::st st;
    TK__DSMEM(unsigned char, raw);
    const tk__tc_smem L = tk__tc_layout(2, a.D, sizeof(st));
    unsigned char *base = tk__tc_base(raw);
    const int D = a.D, T = a.T, LD = D + 8, LO = D + 4, LdP = sizeof(st) == 2 ? TK__TC_LP : TK__TC_LS;
    const int bk = blockIdx.y, G = a.H / a.Hkv, b = bk / a.Hkv, hk = bk % a.Hkv, k0 = blockIdx.x * TK__TC_B;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, wr0 = 16 * w, kfirst = k0 + wr0, nd = D / 16;
    const int nqt = (T + TK__TC_B - 1) / TK__TC_B;
    const size_t koff = (size_t)bk * T * D;
    st *Qs = (st *)(base + L.t[0]), *dOs = (st *)(base + L.t[1]), *Ks = (st *)(base + L.t[2]), *Vs = (st *)(base + L.t[3]);
    st *Ps = (st *)(base + L.p), *dSs = (st *)(base + L.ds);
    float *Ss = (float *)(base + L.s), *dPs = (float *)(base + L.dp), *Ls = (float *)(base + L.rows), *Dv = Ls + TK__TC_B;
    float *Stg = (float *)(base + L.t[0]);
    typename tk__tcacc<MATH>::type ak[TK__TC_NDC], av[TK__TC_NDC];
    int gi, qt, n, e, dc;
    TK__UNROLL
    for (dc = 0; dc < TK__TC_NDC; dc++) {
        nvcuda::wmma::fill_fragment(ak[dc], 0.0f);
        nvcuda::wmma::fill_fragment(av[dc], 0.0f);
    }
    tk__tc_stage<MATH>(Ks, a.k + koff, k0, T, D, LD);
    tk__tc_stage<MATH>(Vs, a.v + koff, k0, T, D, LD);
    for (gi = 0; gi < G; gi++) { /* the group's query heads, in order */
        const int h = hk * G + gi;
        const size_t bh = (size_t)b * a.H + h, off = bh * T * D;
        const float alpha = tk__at_alpha(a.temp, h, D);
        for (qt = blockIdx.x; qt < nqt; qt++) { /* query tiles at or below the diagonal */
            const int q0 = qt * TK__TC_B;
            /* queries before the warp's first key see none of its keys: skip them in P^T dO */
            const int kk0 = kfirst - q0 <= 0 ? 0 : (kfirst - q0) / tk__tc<MATH>::KS * tk__tc<MATH>::KS;
            __syncthreads();
            tk__tc_stage<MATH>(Qs, a.q + off, q0, T, D, LD);
            tk__tc_stage<MATH>(dOs, a.dout + off, q0, T, D, LD);
            tk__tc_rows(Ls, Dv, a, bh, q0);
            __syncthreads();
            /* S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys, stored transposed into the
               (query, key) tiles; 16-query chunks wholly before the warp's keys skipped */
            for (n = 0; n < TK__TC_B / 16; n++)
                if (q0 + 16 * n + 15 >= kfirst) {
                    typename tk__tcacc<MATH>::type acc;
                    nvcuda::wmma::fill_fragment(acc, 0.0f);
                    tk__tc_mma<MATH, nvcuda::wmma::row_major, nvcuda::wmma::col_major>(acc, Ks + wr0 * LD, LD, Qs + 16 * n * LD, LD, 0, D);
                    nvcuda::wmma::store_matrix_sync(Ss + 16 * n * TK__TC_LS + wr0, acc, TK__TC_LS, nvcuda::wmma::mem_col_major);
                    nvcuda::wmma::fill_fragment(acc, 0.0f);
                    tk__tc_mma<MATH, nvcuda::wmma::row_major, nvcuda::wmma::col_major>(acc, Vs + wr0 * LD, LD, dOs + 16 * n * LD, LD, 0, D);
                    nvcuda::wmma::store_matrix_sync(dPs + 16 * n * TK__TC_LS + wr0, acc, TK__TC_LS, nvcuda::wmma::mem_col_major);
                }
            __syncwarp();
            for (e = lane; e < TK__TC_B * 16; e += 32) { /* the warp's columns, 16 per row */
                const int row = e >> 4, col = wr0 + (e & 15), ii = q0 + row, jj = k0 + col;
                float p = 0.0f, ds = 0.0f;
                if (ii < T && jj <= ii) {
                    const float su = Ss[row * TK__TC_LS + col];
                    p = expf(alpha * su + tk__at_bias(a, h, ii, jj) - Ls[row]);
                    ds = p * (dPs[row * TK__TC_LS + col] - Dv[row]);
                }
                Ps[row * LdP + col] = tk__tc<MATH>::cvt(p); /* tf32: over S, same lane */
                dSs[row * LdP + col] = tk__tc<MATH>::cvt(alpha * ds);
            }
            __syncwarp();
            TK__UNROLL
            for (dc = 0; dc < TK__TC_NDC; dc++)
                if (dc < nd) { /* dv += P^T dO, dk += (alpha dS)^T Q */
                    tk__tc_mma<MATH, nvcuda::wmma::col_major, nvcuda::wmma::row_major>(av[dc], Ps + wr0, LdP, dOs + 16 * dc, LD, kk0, TK__TC_B);
                    tk__tc_mma<MATH, nvcuda::wmma::col_major, nvcuda::wmma::row_major>(ak[dc], dSs + wr0, LdP, Qs + 16 * dc, LD, kk0, TK__TC_B);
                }
        }
    }
    __syncthreads(); /* Q and dO become the fp32 staging tile */
    TK__UNROLL
    for (dc = 0; dc < TK__TC_NDC; dc++)
        if (dc < nd) nvcuda::wmma::store_matrix_sync(Stg + wr0 * LO + 16 * dc, ak[dc], (unsigned)LO, nvcuda::wmma::mem_row_major);
    __syncwarp();
    tk__tc_add_rows(dk + koff, Stg, LO, k0, wr0, T, D, lane);
    __syncwarp();
    TK__UNROLL
    for (dc = 0; dc < TK__TC_NDC; dc++)
        if (dc < nd) nvcuda::wmma::store_matrix_sync(Stg + wr0 * LO + 16 * dc, av[dc], (unsigned)LO, nvcuda::wmma::mem_row_major);
    __syncwarp();
    tk__tc_add_rows(dv + koff, Stg, LO, k0, wr0, T, D, lane);
#else
    (void)dk; (void)dv; (void)a;
#endif
}

template <int MATH>
static __global__ void __launch_bounds__(TK__AT_THREADS) tk__k_attn_dbias_tc(float *dbias, tk__attn_args a, int B)
{
#ifdef TK__TC_OK
    typedef typename tk__tc<MATH>::st st;
    TK__DSMEM(unsigned char, raw);
    const tk__tc_smem L = tk__tc_layout(3, a.D, sizeof(st));
    unsigned char *base = tk__tc_base(raw);
    const int D = a.D, T = a.T, LD = D + 8, q0 = blockIdx.x * TK__TC_B, k0 = blockIdx.y * TK__TC_B;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, wr0 = 16 * w, qlast = q0 + wr0 + 15;
    const int h_lo = a.bias_per_head ? (int)blockIdx.z : 0, h_hi = a.bias_per_head ? h_lo + 1 : a.H;
    st *Qs = (st *)(base + L.t[0]), *dOs = (st *)(base + L.t[1]), *Ks = (st *)(base + L.t[2]), *Vs = (st *)(base + L.t[3]);
    float *Ss = (float *)(base + L.s), *dPs = (float *)(base + L.dp), *Ls = (float *)(base + L.rows), *Dv = Ls + TK__TC_B;
    float acc[16 * TK__TC_B / 32];
    int b, h, m, rr, c;
    for (m = 0; m < 16 * TK__TC_B / 32; m++) acc[m] = 0.0f;
    if (blockIdx.y > blockIdx.x) return; /* uniform over the block: above the diagonal */
    for (h = h_lo; h < h_hi; h++)
        for (b = 0; b < B; b++) {
            const int bh = b * a.H + h;
            const size_t off = (size_t)bh * T * D, koff = tk__at_kvoff(a, bh);
            const float alpha = tk__at_alpha(a.temp, h, D);
            __syncthreads();
            tk__tc_stage<MATH>(Qs, a.q + off, q0, T, D, LD);
            tk__tc_stage<MATH>(dOs, a.dout + off, q0, T, D, LD);
            tk__tc_stage<MATH>(Ks, a.k + koff, k0, T, D, LD);
            tk__tc_stage<MATH>(Vs, a.v + koff, k0, T, D, LD);
            tk__tc_rows(Ls, Dv, a, (size_t)bh, q0);
            __syncthreads();
            tk__tc_rows_sdp<MATH>(Ss, dPs, Qs, dOs, Ks, Vs, D, LD, wr0, qlast, k0);
            __syncwarp();
            (void)tk__tc_rows_ds<MATH>(NULL, 0, Ss, dPs, Ls, Dv, a, h, alpha, q0, k0, wr0, lane, acc);
        }
    for (m = 0, rr = 0; rr < 16; rr++) {
        const int ii = q0 + wr0 + rr;
        for (c = lane; c < TK__TC_B; c += 32, m++) {
            const int jj = k0 + c;
            if (ii < T && jj <= ii) dbias[(a.bias_per_head ? (size_t)h_lo * T * T : 0) + (size_t)ii * T + jj] += acc[m];
        }
    }
#else
    (void)dbias; (void)a; (void)B;
#endif
}

/* ------------------------------------------------------ attention: host side */
/* 1 when p is memory cudaMalloc returned (a device pointer), else 0 */
static int tk__is_device_ptr(const void *p)
{
    cudaPointerAttributes at;
    if (!p) return 0;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

/* the deferred temperature check: *status = 1 where a temperature is not finite or <= 0 */
static __global__ void tk__k_temp_check(const float *temp, int H, int *status)
{
    int h = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (h < H && !(temp[h] > 0.0f && temp[h] <= 3.402823466e38f)) *status = 1; /* NaN fails both */
}

static int tk__attn_cuda_check(const char *fn, const float *bias, int bias_per_head, const float *temp,
                               int B, int H, int T, int D, cudaStream_t s, int *status)
{
    if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
        return tk__fail(TK_EINVAL, "%s: B, H, T, D must be > 0 (got %d, %d, %d, %d)", fn, B, H, T, D);
    if (D > TK__AT_MAXD) return tk__fail(TK_EINVAL, "%s: D %d > %d is not supported", fn, D, TK__AT_MAXD);
    if ((long long)B * H > 65535LL || (long long)B * H * T > 0x7FFFFFFFLL * 16 ||
        (size_t)B * H * T > ((size_t)-1 >> 1) / sizeof(float) / (size_t)D)
        return tk__fail(TK_EINVAL, "%s: B %d, H %d, T %d, D %d: too large (B*H <= 65535)", fn, B, H, T, D);
    if (bias && bias_per_head != 0 && bias_per_head != 1)
        return tk__fail(TK_EINVAL, "%s: bias_per_head must be 0 or 1 (got %d)", fn, bias_per_head);
    if (bias && !tk__is_device_ptr(bias)) return tk__fail(TK_EINVAL, "%s: bias is not a device pointer", fn);
    if (status && !tk__is_device_ptr(status)) return tk__fail(TK_EINVAL, "%s: cfg->status is not a device pointer", fn);
    if (temp && status) { /* deferred: no host wait */
        if (!tk__is_device_ptr(temp)) return tk__fail(TK_EINVAL, "%s: temp is not a device pointer", fn);
        TK__LAUNCH(tk__k_temp_check, tk__blocks((size_t)H, 64), 64, 0, s, temp, H, status);
        return tk__launched(fn);
    }
    if (temp) {
        float *ht;
        int h, rc = TK_OK;
        if (!tk__is_device_ptr(temp)) return tk__fail(TK_EINVAL, "%s: temp is not a device pointer", fn);
        ht = (float *)TK_MALLOC((size_t)H * sizeof(float));
        if (!ht) return tk__fail(TK_ENOMEM, "%s: no memory", fn);
        if (cudaMemcpyAsync(ht, temp, (size_t)H * sizeof(float), cudaMemcpyDeviceToHost, s) != cudaSuccess ||
            cudaStreamSynchronize(s) != cudaSuccess)
            rc = tk__fail(TK_ECUDA, "%s: reading temp failed", fn);
        for (h = 0; h < H && rc == TK_OK; h++)
            if (!tk__finite(ht[h]) || !(ht[h] > 0.0f))
                rc = tk__fail(TK_EINVAL, "%s: temp[%d] must be finite and > 0 (got %g)", fn, h, (double)ht[h]);
        TK_FREE(ht);
        if (rc != TK_OK) return rc;
    }
    return TK_OK;
}

static size_t tk__at_smem_fwd(int D) { return ((size_t)(TK__AT_BR + 2 * TK__AT_BC) * D + TK__AT_BR * TK__AT_LD) * sizeof(float); }
static size_t tk__at_smem_dq(int D)
{
    return ((size_t)(2 * TK__AT_BR + 2 * TK__AT_BC) * D + TK__AT_BR * TK__AT_LD + 2 * TK__AT_BR + TK__AT_THREADS) * sizeof(float);
}
static size_t tk__at_smem_dkdv(int D)
{
    return ((size_t)(2 * TK__AT_BR + 2 * TK__AT_BC) * D + 2 * TK__AT_BR * TK__AT_LD + 2 * TK__AT_BR) * sizeof(float);
}

/* opt in to more than 48 KiB of dynamic shared memory (once per kernel) */
static int tk__at_smem_optin(void)
{
    static int done = 0;
    int bytes = (int)tk__at_smem_dkdv(TK__AT_MAXD);
    if (done) return TK_OK;
    if (cudaFuncSetAttribute(tk__k_attn_fwd<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(tk__k_attn_fwd<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(tk__k_attn_dq, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(tk__k_attn_dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(tk__k_attn_dbias, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return tk__fail(TK_ECUDA, "tk_attention_*_cuda: cannot raise the shared-memory limit to %d bytes", bytes);
    }
    done = 1;
    return TK_OK;
}

/* the config, checked: *math, *hkv (kv_heads resolved: 0 -> H). For the tensor-core modes
   also D (a multiple of 16), the device's compute capability (8.0+) and its opt-in shared
   memory against the largest block of the kernels this call launches (kinds: bit k for
   tk__tc_layout kind k). */
static int tk__attn_cfg(const char *fn, const tk_attention_cuda_config *cfg, int H, int D, int kinds, int *math, int *hkv)
{
    const tk_attention_cuda_config c = cfg ? *cfg : tk_attention_cuda_config_default();
    if (c.math != TK_MATH_FP32 && c.math != TK_MATH_TF32 && c.math != TK_MATH_BF16)
        return tk__fail(TK_EINVAL, "%s: math must be TK_MATH_FP32, TK_MATH_TF32 or TK_MATH_BF16 (got %d)", fn, c.math);
    if (c.kv_heads < 0 || c.kv_heads > H || (c.kv_heads > 0 && H % c.kv_heads != 0))
        return tk__fail(TK_EINVAL, "%s: kv_heads must be 0 (= H) or divide H %d (got %d)", fn, H, c.kv_heads);
    if (c.math != TK_MATH_FP32) {
        static int dev_major[16], dev_optin[16];
        const size_t esz = c.math == TK_MATH_BF16 ? 2 : 4;
        size_t need = 0;
        int dev = 0, kind;
        if (D % 16 != 0 || D < 16 || D > TK__AT_MAXD)
            return tk__fail(TK_EINVAL, "%s: math %s needs D a multiple of 16 in 16..%d (got %d)", fn,
                            c.math == TK_MATH_BF16 ? "bf16" : "tf32", TK__AT_MAXD, D);
        if (cudaGetDevice(&dev) != cudaSuccess) {
            (void)cudaGetLastError();
            return tk__fail(TK_ECUDA, "%s: no current CUDA device", fn);
        }
        if (dev < 0 || dev >= 16 || dev_major[dev] == 0) {
            cudaDeviceProp p;
            if (cudaGetDeviceProperties(&p, dev) != cudaSuccess) {
                (void)cudaGetLastError();
                return tk__fail(TK_ECUDA, "%s: cannot read the device's properties", fn);
            }
            if (dev >= 0 && dev < 16) {
                dev_major[dev] = p.major;
                dev_optin[dev] = (int)p.sharedMemPerBlockOptin;
            } else if (p.major < 8) {
                return tk__fail(TK_EINVAL, "%s: tf32/bf16 math needs compute capability 8.0 or newer (device %d.%d)", fn, p.major, p.minor);
            }
        }
        if (dev >= 0 && dev < 16) {
            if (dev_major[dev] < 8)
                return tk__fail(TK_EINVAL, "%s: tf32/bf16 math needs compute capability 8.0 or newer (device %d.x)", fn,
                                dev_major[dev]);
            for (kind = 0; kind < 4; kind++)
                if (kinds >> kind & 1) {
                    size_t b = tk__tc_layout(kind, D, esz).total;
                    need = b > need ? b : need;
                }
            if (need > (size_t)dev_optin[dev])
                return tk__fail(TK_EINVAL, "%s: math %s at D %d needs %zu bytes of shared memory per block; this device "
                                           "allows %d (use a smaller D or TK_MATH_FP32)", fn,
                                c.math == TK_MATH_BF16 ? "bf16" : "tf32", D, need, dev_optin[dev]);
        }
    }
    *math = c.math;
    *hkv = c.kv_heads ? c.kv_heads : H;
    return TK_OK;
}

/* raise a tensor-core kernel's dynamic shared memory limit to bytes (remembered per kernel) */
static int tk__tc_optin(int math, int kind, size_t bytes)
{
    static size_t set[3][4];
    cudaError_t e = cudaSuccess;
    if (bytes <= set[math][kind] || bytes <= (48u << 10)) return TK_OK;
#define TK__TC_SET(K) e = cudaFuncSetAttribute(K, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes)
    if (math == TK_MATH_TF32) {
        if (kind == 0) {
            TK__TC_SET((tk__k_attn_fwd_tc<TK_MATH_TF32, 0>));
            if (e == cudaSuccess) TK__TC_SET((tk__k_attn_fwd_tc<TK_MATH_TF32, 1>));
        }
        else if (kind == 1) TK__TC_SET(tk__k_attn_dq_tc<TK_MATH_TF32>);
        else if (kind == 2) TK__TC_SET(tk__k_attn_dkdv_tc<TK_MATH_TF32>);
        else TK__TC_SET(tk__k_attn_dbias_tc<TK_MATH_TF32>);
    } else {
        if (kind == 0) {
            TK__TC_SET((tk__k_attn_fwd_tc<TK_MATH_BF16, 0>));
            if (e == cudaSuccess) TK__TC_SET((tk__k_attn_fwd_tc<TK_MATH_BF16, 1>));
        }
        else if (kind == 1) TK__TC_SET(tk__k_attn_dq_tc<TK_MATH_BF16>);
        else if (kind == 2) TK__TC_SET(tk__k_attn_dkdv_tc<TK_MATH_BF16>);
        else TK__TC_SET(tk__k_attn_dbias_tc<TK_MATH_BF16>);
    }
#undef TK__TC_SET
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return tk__fail(TK_ECUDA, "tk_attention_*_cuda_ex: cannot raise the shared-memory limit to %zu bytes", bytes);
    }
    set[math][kind] = bytes;
    return TK_OK;
}

/* the forward kernels: [math][stats wanted] (one signature, launched through a pointer) */
typedef void (*tk__at_fwd_fn)(float *, float *, int *, tk__attn_args);
static tk__at_fwd_fn tk__at_fwd_kernel(int math, int st)
{
    if (math == TK_MATH_TF32) return st ? tk__k_attn_fwd_tc<TK_MATH_TF32, 1> : tk__k_attn_fwd_tc<TK_MATH_TF32, 0>;
    if (math == TK_MATH_BF16) return st ? tk__k_attn_fwd_tc<TK_MATH_BF16, 1> : tk__k_attn_fwd_tc<TK_MATH_BF16, 0>;
    return st ? tk__k_attn_fwd<1> : tk__k_attn_fwd<0>;
}

static int tk__attn_forward_cuda(const char *fn, float *out, float *lse, float *stats, const float *q, const float *k,
                                 const float *v, const float *bias, int bias_per_head, const float *temp, int B, int H,
                                 int T, int D, const tk_attention_cuda_config *cfg, tk_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    tk__attn_args a;
    int rc, *dbad = NULL, hbad = 0, math = TK_MATH_FP32, hkv = H;
    if (!out || !lse || !q || !k || !v) return tk__fail(TK_EINVAL, "%s: NULL pointer", fn);
    if ((rc = tk__attn_cuda_check(fn, bias, bias_per_head, temp, B, H, T, D, s, cfg ? cfg->status : NULL)) != TK_OK)
        return rc;
    if ((rc = tk__attn_cfg(fn, cfg, H, D, 1, &math, &hkv)) != TK_OK) return rc;
    if (!tk__is_device_ptr(out) || !tk__is_device_ptr(lse) || !tk__is_device_ptr(q) || !tk__is_device_ptr(k) ||
        !tk__is_device_ptr(v) || (stats && !tk__is_device_ptr(stats)))
        return tk__fail(TK_EINVAL, "%s: out, lse, q, k, v%s must be device pointers", fn, stats ? ", stats" : "");
    if (math == TK_MATH_FP32) rc = tk__at_smem_optin();
    else rc = tk__tc_optin(math, 0, tk__tc_layout(0, D, math == TK_MATH_BF16 ? 2 : 4).total);
    if (rc != TK_OK) return rc;
    memset(&a, 0, sizeof a);
    a.q = q; a.k = k; a.v = v; a.bias = bias; a.temp = temp;
    a.stats = stats;
    a.bias_per_head = bias_per_head; a.H = H; a.Hkv = hkv; a.T = T; a.D = D;
    if (cfg && cfg->status) { /* deferred: the kernel's flag is the caller's status, no read-back */
        dbad = cfg->status;
    } else {
        if ((rc = tk__scratch_get(s, sizeof(int), (void **)&dbad, fn)) != TK_OK) return rc;
        rc = tk__cuda_check(cudaMemsetAsync(dbad, 0, sizeof(int), s), fn);
    }
    if (rc == TK_OK) {
        const tk__at_fwd_fn kf = tk__at_fwd_kernel(math, stats != NULL);
        const int rows = math == TK_MATH_FP32 ? TK__AT_BR : TK__TC_B;
        const size_t smem = math == TK_MATH_FP32 ? tk__at_smem_fwd(D) : tk__tc_layout(0, D, math == TK_MATH_BF16 ? 2 : 4).total;
        dim3 grid((unsigned)((T + rows - 1) / rows), (unsigned)(B * H));
        TK__LAUNCH(kf, grid, TK__AT_THREADS, smem, s, out, lse, dbad, a);
        rc = tk__launched(fn);
    }
    if (rc != TK_OK || (cfg && cfg->status)) return rc;
    rc = tk__cuda_check(cudaMemcpyAsync(&hbad, dbad, sizeof(int), cudaMemcpyDeviceToHost, s), fn);
    if (rc == TK_OK) rc = tk__cuda_check(cudaStreamSynchronize(s), fn);
    if (rc != TK_OK) return rc;
    return hbad ? tk__fail(TK_EINVAL, "%s: a row of logits + bias is not finite (NaN or +Inf in q, k or the "
                                      "bias, or all -inf)", fn)
                : TK_OK;
}

TKDEF int tk_attention_forward_stats_cuda(float *out, float *lse, float *stats, const float *q, const float *k,
                                          const float *v, const float *bias, int bias_per_head,
                                          const float *temp, int B, int H, int T, int D,
                                          const tk_attention_cuda_config *cfg, tk_stream stream)
{
    return tk__attn_forward_cuda("tk_attention_forward_stats_cuda", out, lse, stats, q, k, v, bias, bias_per_head, temp,
                                 B, H, T, D, cfg, stream);
}

TKDEF int tk_attention_forward_cuda_ex(float *out, float *lse, const float *q, const float *k,
                                       const float *v, const float *bias, int bias_per_head,
                                       const float *temp, int B, int H, int T, int D,
                                       const tk_attention_cuda_config *cfg, tk_stream stream)
{
    return tk__attn_forward_cuda("tk_attention_forward_cuda", out, lse, NULL, q, k, v, bias, bias_per_head, temp, B, H,
                                 T, D, cfg, stream);
}

TKDEF int tk_attention_forward_cuda(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const float *bias, int bias_per_head,
                                    const float *temp, int B, int H, int T, int D,
                                    tk_stream stream)
{
    return tk_attention_forward_cuda_ex(out, lse, q, k, v, bias, bias_per_head, temp, B, H, T, D, NULL, stream);
}

TKDEF int tk_attention_backward_cuda_ex(float *dq, float *dk, float *dv, float *dbias,
                                        float *dtemp, const float *dout, const float *out,
                                        const float *lse, const float *q, const float *k,
                                        const float *v, const float *bias, int bias_per_head,
                                        const float *temp, int B, int H, int T, int D,
                                        const tk_attention_cuda_config *cfg,
                                        tk_stream stream)
{
    static const char *fn = "tk_attention_backward_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    tk__attn_args a;
    float *dvec = NULL, *tpart = NULL;
    int rc, math = TK_MATH_FP32, hkv = H, tile, nqt, nkt;
    if (!dq || !dk || !dv || !dout || !out || !lse || !q || !k || !v)
        return tk__fail(TK_EINVAL, "%s: NULL pointer", fn);
    if (dbias && !bias) return tk__fail(TK_EINVAL, "%s: dbias needs the forward's bias", fn);
    if ((rc = tk__attn_cuda_check(fn, bias, bias_per_head, temp, B, H, T, D, s, cfg ? cfg->status : NULL)) != TK_OK)
        return rc;
    if ((rc = tk__attn_cfg(fn, cfg, H, D, dbias ? 14 : 6, &math, &hkv)) != TK_OK) return rc;
    if (cfg && cfg->ent_coef != 0.0f) {
        if (!(cfg->ent_coef - cfg->ent_coef == 0.0f) || !cfg->ent_rows || cfg->ent_stride < 1 ||
            !tk__is_device_ptr(cfg->ent_rows))
            return tk__fail(TK_EINVAL, "%s: the entropy term needs a finite ent_coef, ent_rows (device) and "
                                       "ent_stride >= 1", fn);
        if (math != TK_MATH_FP32)
            return tk__fail(TK_EINVAL, "%s: the entropy term (ent_coef) needs fp32 math", fn);
    }
    if (!tk__is_device_ptr(dq) || !tk__is_device_ptr(dk) || !tk__is_device_ptr(dv) || !tk__is_device_ptr(dout) ||
        !tk__is_device_ptr(out) || !tk__is_device_ptr(lse) || !tk__is_device_ptr(q) || !tk__is_device_ptr(k) ||
        !tk__is_device_ptr(v) || (dbias && !tk__is_device_ptr(dbias)) || (dtemp && !tk__is_device_ptr(dtemp)))
        return tk__fail(TK_EINVAL, "%s: every buffer must be a device pointer", fn);
    if (math == TK_MATH_FP32) {
        rc = tk__at_smem_optin();
    } else {
        const size_t esz = math == TK_MATH_BF16 ? 2 : 4;
        int kind;
        for (kind = 1; kind < (dbias ? 4 : 3) && rc == TK_OK; kind++) rc = tk__tc_optin(math, kind, tk__tc_layout(kind, D, esz).total);
    }
    if (rc != TK_OK) return rc;
    tile = math == TK_MATH_FP32 ? TK__AT_BR : TK__TC_B;
    nqt = (T + tile - 1) / tile;
    nkt = nqt;
    memset(&a, 0, sizeof a);
    a.q = q; a.k = k; a.v = v; a.bias = bias; a.temp = temp; a.dout = dout; a.out = out; a.lse = lse;
    a.bias_per_head = bias_per_head; a.H = H; a.Hkv = hkv; a.T = T; a.D = D;
    if (cfg && cfg->ent_coef != 0.0f) {
        a.ent_rows = cfg->ent_rows;
        a.ent_coef = cfg->ent_coef;
        a.ent_stride = cfg->ent_stride;
    }
    {   /* one scratch: dvec (B*H*T), then tpart (B*H*nqt) with dtemp */
        const size_t nd = (size_t)B * H * T, nt = dtemp ? (size_t)B * H * nqt : 0;
        float *sc = NULL;
        rc = tk__scratch_get(s, (nd + nt) * sizeof(float), (void **)&sc, fn);
        if (rc == TK_OK) {
            dvec = sc;
            if (dtemp) tpart = sc + nd;
        }
    }
    if (rc == TK_OK) {
        size_t rows = (size_t)B * H * T;
        TK__LAUNCH(tk__k_attn_dvec, tk__blocks(rows, 256), 256, 0, s, dvec, dout, out, rows, D);
        rc = tk__launched(fn);
    }
    a.dvec = dvec;
    if (rc == TK_OK) {
        const dim3 gq((unsigned)nqt, (unsigned)(B * H)), gk((unsigned)nkt, (unsigned)(B * hkv));
        const dim3 gb((unsigned)nqt, (unsigned)nkt, (unsigned)(bias_per_head ? H : 1));
        if (math == TK_MATH_FP32) {
            TK__LAUNCH(tk__k_attn_dq, gq, TK__AT_THREADS, tk__at_smem_dq(D), s, dq, tpart, a);
            if ((rc = tk__launched(fn)) == TK_OK) {
                TK__LAUNCH(tk__k_attn_dkdv, gk, TK__AT_THREADS, tk__at_smem_dkdv(D), s, dk, dv, a);
                rc = tk__launched(fn);
            }
            if (rc == TK_OK && dbias) {
                TK__LAUNCH(tk__k_attn_dbias, gb, TK__AT_THREADS, tk__at_smem_dq(D), s, dbias, a, B);
                rc = tk__launched(fn);
            }
        } else if (math == TK_MATH_TF32) {
            TK__LAUNCH(tk__k_attn_dq_tc<TK_MATH_TF32>, gq, TK__AT_THREADS, tk__tc_layout(1, D, 4).total, s, dq, tpart, a);
            if ((rc = tk__launched(fn)) == TK_OK) {
                TK__LAUNCH(tk__k_attn_dkdv_tc<TK_MATH_TF32>, gk, TK__AT_THREADS, tk__tc_layout(2, D, 4).total, s, dk, dv, a);
                rc = tk__launched(fn);
            }
            if (rc == TK_OK && dbias) {
                TK__LAUNCH(tk__k_attn_dbias_tc<TK_MATH_TF32>, gb, TK__AT_THREADS, tk__tc_layout(3, D, 4).total, s, dbias, a, B);
                rc = tk__launched(fn);
            }
        } else {
            TK__LAUNCH(tk__k_attn_dq_tc<TK_MATH_BF16>, gq, TK__AT_THREADS, tk__tc_layout(1, D, 2).total, s, dq, tpart, a);
            if ((rc = tk__launched(fn)) == TK_OK) {
                TK__LAUNCH(tk__k_attn_dkdv_tc<TK_MATH_BF16>, gk, TK__AT_THREADS, tk__tc_layout(2, D, 2).total, s, dk, dv, a);
                rc = tk__launched(fn);
            }
            if (rc == TK_OK && dbias) {
                TK__LAUNCH(tk__k_attn_dbias_tc<TK_MATH_BF16>, gb, TK__AT_THREADS, tk__tc_layout(3, D, 2).total, s, dbias, a, B);
                rc = tk__launched(fn);
            }
        }
    }
    if (rc == TK_OK && dtemp) {
        TK__LAUNCH(tk__k_attn_dtemp, tk__blocks((size_t)H, 64), 64, 0, s, dtemp, tpart, temp, B, H, nqt, D);
        rc = tk__launched(fn);
    }
    return rc;
}

TKDEF int tk_attention_backward_cuda(float *dq, float *dk, float *dv, float *dbias,
                                     float *dtemp, const float *dout, const float *out,
                                     const float *lse, const float *q, const float *k,
                                     const float *v, const float *bias, int bias_per_head,
                                     const float *temp, int B, int H, int T, int D,
                                     tk_stream stream)
{
    return tk_attention_backward_cuda_ex(dq, dk, dv, dbias, dtemp, dout, out, lse, q, k, v, bias, bias_per_head, temp,
                                         B, H, T, D, NULL, stream);
}
