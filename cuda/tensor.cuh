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
                     rtol 1e-4 on K-normalised data, atol 1e-4).
     layernorm       two-pass mean/variance in fp32 per row: rtol 1e-5, atol 1e-5.
     gelu, adamw     element-wise, same formulas: rtol 1e-5, atol 1e-6 (adamw 1e-6).
     softmax, CE     block reductions in a different order: rtol 1e-5, atol 1e-6.
     embedding       exact (the same additions in the same order).
   Determinism: no atomics. Every reduction (bias/column sums, embedding scatter,
   LayerNorm weight gradients) is done by one thread per output in a fixed order,
   so results are bit-identical run to run.

   A single cuBLAS handle is created on first use (not thread-safe to create from
   two host threads at once) and reused; each call binds it to the caller's stream. */
#ifdef ATTNKIT_CUDA_SIM
/* CPU simulation (tests/cuda_sim.h, included by the test before this file): same source. */
#define TK__LAUNCH(k, grid, block, smem, stream, ...) ATTNKIT_SIM_LAUNCH(k, grid, block, smem, stream, __VA_ARGS__)
#else
#include <cuda_runtime.h>
#include <cublas_v2.h>
/* k<<<grid, block, smem, stream>>>(args...), written so the CPU simulation can run it too */
#define TK__LAUNCH(k, grid, block, smem, stream, ...) k<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
#endif

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
    if (cublasSgemm(h, transB ? CUBLAS_OP_T : CUBLAS_OP_N, transA ? CUBLAS_OP_T : CUBLAS_OP_N,
                    N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc) != CUBLAS_STATUS_SUCCESS)
        return tk__fail(TK_ECUDA, "tk_sgemm_cuda: cublasSgemm failed");
    return TK_OK;
}

/* out (N,OC): every row = b (OC) */
static __global__ void tk__k_rows_set(float *out, const float *b, int N, int OC)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (size_t)N * OC) out[i] = b[i % OC];
}

/* db (OC) += column sums of dout (N,OC): one thread per column, rows in order */
static __global__ void tk__k_colsum_add(float *db, const float *dout, int N, int OC)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    int r;
    if (o >= OC) return;
    for (r = 0; r < N; r++) acc += dout[(size_t)r * OC + o];
    db[o] += acc;
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
    if (!dout || !inp || !W) return tk__fail(TK_EINVAL, "tk_matmul_backward_cuda: NULL pointer");
    if (N <= 0 || C <= 0 || OC <= 0)
        return tk__fail(TK_EINVAL, "tk_matmul_backward_cuda: N, C, OC must be > 0");
    if (dinp && (rc = tk_sgemm_cuda(0, 0, N, C, OC, 1.0f, dout, OC, W, C, 1.0f, dinp, C, stream)) != TK_OK)
        return rc;
    if (dW && (rc = tk_sgemm_cuda(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dW, C, stream)) != TK_OK)
        return rc;
    if (db) {
        TK__LAUNCH(tk__k_colsum_add, tk__blocks((size_t)OC, 256), 256, 0, (cudaStream_t)stream, db, dout, N, OC);
        if ((rc = tk__launched("tk_matmul_backward_cuda")) != TK_OK) return rc;
    }
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
    if ((rc = tk__cuda_check(cudaMallocAsync((void **)&dbad, sizeof(int), s), who)) != TK_OK) return rc;
    rc = tk__cuda_check(cudaMemsetAsync(dbad, 0, sizeof(int), s), who);
    if (rc == TK_OK) {
        TK__LAUNCH(tk__k_check_ids, tk__blocks(n, 256), 256, 0, s, dbad, ids, n, V);
        rc = tk__launched(who);
    }
    if (rc == TK_OK) rc = tk__cuda_check(cudaMemcpyAsync(&hbad, dbad, sizeof(int), cudaMemcpyDeviceToHost, s), who);
    if (rc == TK_OK) rc = tk__cuda_check(cudaStreamSynchronize(s), who);
    cudaFreeAsync(dbad, s);
    if (rc != TK_OK) return rc;
    return hbad ? tk__fail(TK_ERANGE, "%s: an index is outside [0, %d)", who, V) : TK_OK;
}

/* ------------------------------------------------------------- embedding */
static __global__ void tk__k_embed_fwd(float *out, const int *ids, const float *wte, const float *wpe,
                                int BT, int T, int C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t bt, c;
    float x;
    if (i >= (size_t)BT * C) return;
    bt = i / C;
    c = i % C;
    x = wte[(size_t)ids[bt] * C + c];
    if (wpe) x += wpe[(bt % T) * C + c];
    out[i] = x;
}

/* dwte: one thread per channel walks every position in order (deterministic, no atomics) */
static __global__ void tk__k_embed_bwd_wte(float *dwte, const float *dout, const int *ids, int BT, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int p;
    if (c >= C) return;
    for (p = 0; p < BT; p++) dwte[(size_t)ids[p] * C + c] += dout[(size_t)p * C + c];
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

TKDEF int tk_embedding_forward_cuda(float *out, const int *ids, const float *wte,
                                    const float *wpe, int B, int T, int C, int V,
                                    tk_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if (!out || !ids || !wte) return tk__fail(TK_EINVAL, "tk_embedding_forward_cuda: NULL pointer");
    if (B <= 0 || T <= 0 || C <= 0 || V <= 0)
        return tk__fail(TK_EINVAL, "tk_embedding_forward_cuda: B, T, C, V must be > 0");
    if ((rc = tk__cuda_ids_in_range(ids, (size_t)B * T, V, s, "tk_embedding_forward_cuda")) != TK_OK)
        return rc;
    TK__LAUNCH(tk__k_embed_fwd, tk__blocks((size_t)B * T * C, 256), 256, 0, s, out, ids, wte, wpe, B * T, T, C);
    return tk__launched("tk_embedding_forward_cuda");
}

TKDEF int tk_embedding_backward_cuda(float *dwte, float *dwpe, const float *dout,
                                     const int *ids, int B, int T, int C, int V,
                                     tk_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc;
    if (!dout || !ids) return tk__fail(TK_EINVAL, "tk_embedding_backward_cuda: NULL pointer");
    if (B <= 0 || T <= 0 || C <= 0 || V <= 0)
        return tk__fail(TK_EINVAL, "tk_embedding_backward_cuda: B, T, C, V must be > 0");
    if (dwte) {
        if ((rc = tk__cuda_ids_in_range(ids, (size_t)B * T, V, s, "tk_embedding_backward_cuda")) != TK_OK)
            return rc;
        TK__LAUNCH(tk__k_embed_bwd_wte, tk__blocks((size_t)C, 128), 128, 0, s, dwte, dout, ids, B * T, C);
        if ((rc = tk__launched("tk_embedding_backward_cuda")) != TK_OK) return rc;
    }
    if (dwpe) {
        TK__LAUNCH(tk__k_embed_bwd_wpe, tk__blocks((size_t)T * C, 256), 256, 0, s, dwpe, dout, B, T, C);
        if ((rc = tk__launched("tk_embedding_backward_cuda")) != TK_OK) return rc;
    }
    return TK_OK;
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

/* dw, db: one thread per channel, rows in order */
static __global__ void tk__k_ln_bwd_w(float *dw, float *db, const float *dout, const float *inp,
                               const float *mean, const float *rstd, int N, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x, r;
    float aw = 0.0f, ab = 0.0f;
    if (c >= C) return;
    for (r = 0; r < N; r++) {
        float g = dout[(size_t)r * C + c];
        aw += g * (inp[(size_t)r * C + c] - mean[r]) * rstd[r];
        ab += g;
    }
    if (dw) dw[c] += aw;
    if (db) db[c] += ab;
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
    if (dw || db) {
        TK__LAUNCH(tk__k_ln_bwd_w, tk__blocks((size_t)C, 128), 128, 0, s, dw, db, dout, inp, mean, rstd, N, C);
        if ((rc = tk__launched("tk_layernorm_backward_cuda")) != TK_OK) return rc;
    }
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
