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

/* ------------------------------------------------- fused causal attention */
/* Flash-style causal attention with an optional additive bias and per-head temperature,
   fp32 SIMT (the exact-parity path). Tiles of TK__AT_BR query rows x TK__AT_BC keys, 128
   threads a block: 4 threads per tile row (thread t: row t / 4, columns and head
   dimensions t % 4, t % 4 + 4, ...); logit tiles are computed entry by entry into shared
   memory (entry e = t + 128 m). Fully masked key tiles (above the diagonal) are skipped.
     forward   grid (query tiles, B*H): online softmax (running max m and sum l), out = acc / l,
               lse = m + log l; a non-finite or empty row raises a device flag.
     backward  D_i = dO_i . O_i; then three passes that each recompute P = exp(logit - lse):
               dq (grid query tiles x B*H: dq += alpha dS K, and per-block partial sums of
               dS * (q.k) for dtemp), dk/dv (grid key tiles x B*H: dv += P^T dO,
               dk += alpha dS^T Q), dbias (grid query tile x key tile [x H]: dS summed over
               the batch (and heads) in order). Every reduction has a fixed order: bits are
               the same run to run.
   Parity with tk_attention_forward/backward: forward 1e-5, gradients 1e-4 relative. */
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
    int bias_per_head, H, T, D;
};

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

static __global__ void tk__k_attn_fwd(float *out, float *lse, int *bad, tk__attn_args a)
{
    TK__DSMEM(float, sm);
    const int D = a.D, T = a.T, bh = blockIdx.y, h = bh % a.H, q0 = blockIdx.x * TK__AT_BR;
    const int t = threadIdx.x, r = t >> 2, g = t & 3, i = q0 + r;
    const size_t off = (size_t)bh * T * D;
    const float alpha = tk__at_alpha(a.temp, h, D);
    float *Qs = sm, *Ks = Qs + TK__AT_BR * D, *Vs = Ks + TK__AT_BC * D, *Ps = Vs + TK__AT_BC * D;
    float acc[TK__AT_MAXD / 4], m = -INFINITY, l = 0.0f;
    int dd, nd = (D - g + 3) / 4, kt, nkt = (q0 + TK__AT_BR - 1) / TK__AT_BC + 1, e;
    for (dd = 0; dd < TK__AT_MAXD / 4; dd++) acc[dd] = 0.0f;
    if (nkt * TK__AT_BC > T) nkt = (T + TK__AT_BC - 1) / TK__AT_BC;
    tk__at_load(Qs, a.q + off, q0, TK__AT_BR, T, D);
    for (kt = 0; kt < nkt; kt++) {
        const int k0 = kt * TK__AT_BC;
        float mt = -INFINITY, m_new, corr, ls = 0.0f;
        int c;
        __syncthreads(); /* the previous tile's Ks, Vs, Ps are no longer read */
        tk__at_load(Ks, a.k + off, k0, TK__AT_BC, T, D);
        tk__at_load(Vs, a.v + off, k0, TK__AT_BC, T, D);
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
    if (i < T) {
        const int ok = l > 0.0f && l <= 3.0e38f && m > -INFINITY && m < INFINITY;
        const float inv = 1.0f / l;
        for (dd = 0; dd < nd; dd++) out[off + (size_t)i * D + g + 4 * dd] = acc[dd] * inv;
        if (g == 0) {
            lse[(size_t)bh * T + i] = m + logf(l);
            if (!ok) *bad = 1;
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
                                      int h, int q0, int k0, float alpha)
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
            if (tacc) *tacc += ds * su;
        }
        dSs[rr * TK__AT_LD + cc] = ds;
        if (Ps) Ps[rr * TK__AT_LD + cc] = p;
    }
}

/* the per-row lse and D of query rows [q0, q0 + BR) into shared memory */
static __device__ void tk__at_load_rows(float *Ls, float *Dsv, const tk__attn_args &a, size_t bh, int q0)
{
    int r;
    for (r = threadIdx.x; r < TK__AT_BR; r += blockDim.x) {
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
    const size_t off = (size_t)bh * T * D;
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
    tk__at_load_rows(Ls, Dsv, a, (size_t)bh, q0);
    for (kt = 0; kt < nkt; kt++) {
        const int k0 = kt * TK__AT_BC;
        int c;
        __syncthreads();
        tk__at_load(Ks, a.k + off, k0, TK__AT_BC, T, D);
        tk__at_load(Vs, a.v + off, k0, TK__AT_BC, T, D);
        __syncthreads();
        tk__at_ds_tile(dSs, NULL, &tacc, a, Qs, dOs, Ks, Vs, Ls, Dsv, h, q0, k0, alpha);
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

static __global__ void tk__k_attn_dkdv(float *dk, float *dv, tk__attn_args a)
{
    TK__DSMEM(float, sm);
    const int D = a.D, T = a.T, bh = blockIdx.y, h = bh % a.H, k0 = blockIdx.x * TK__AT_BC;
    const int t = threadIdx.x, c = t >> 2, g = t & 3, j = k0 + c;
    const size_t off = (size_t)bh * T * D;
    const float alpha = tk__at_alpha(a.temp, h, D);
    float *Ks = sm, *Vs = Ks + TK__AT_BC * D, *Qs = Vs + TK__AT_BC * D, *dOs = Qs + TK__AT_BR * D;
    float *dSs = dOs + TK__AT_BR * D, *Ps = dSs + TK__AT_BR * TK__AT_LD, *Ls = Ps + TK__AT_BR * TK__AT_LD;
    float *Dsv = Ls + TK__AT_BR;
    float adk[TK__AT_MAXD / 4], adv[TK__AT_MAXD / 4];
    int dd, nd = (D - g + 3) / 4, qt, nqt = (T + TK__AT_BR - 1) / TK__AT_BR;
    for (dd = 0; dd < TK__AT_MAXD / 4; dd++) adk[dd] = adv[dd] = 0.0f;
    tk__at_load(Ks, a.k + off, k0, TK__AT_BC, T, D);
    tk__at_load(Vs, a.v + off, k0, TK__AT_BC, T, D);
    for (qt = k0 / TK__AT_BR; qt < nqt; qt++) { /* query tiles at or below the diagonal */
        const int q0 = qt * TK__AT_BR;
        int rr;
        __syncthreads();
        tk__at_load(Qs, a.q + off, q0, TK__AT_BR, T, D);
        tk__at_load(dOs, a.dout + off, q0, TK__AT_BR, T, D);
        tk__at_load_rows(Ls, Dsv, a, (size_t)bh, q0);
        __syncthreads();
        tk__at_ds_tile(dSs, Ps, NULL, a, Qs, dOs, Ks, Vs, Ls, Dsv, h, q0, k0, alpha);
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
    if (j < T)
        for (dd = 0; dd < nd; dd++) {
            dk[off + (size_t)j * D + g + 4 * dd] += adk[dd];
            dv[off + (size_t)j * D + g + 4 * dd] += adv[dd];
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
            const size_t bh = (size_t)b * a.H + h, off = bh * T * D;
            const float alpha = tk__at_alpha(a.temp, h, D);
            __syncthreads();
            tk__at_load(Qs, a.q + off, q0, TK__AT_BR, T, D);
            tk__at_load(dOs, a.dout + off, q0, TK__AT_BR, T, D);
            tk__at_load(Ks, a.k + off, k0, TK__AT_BC, T, D);
            tk__at_load(Vs, a.v + off, k0, TK__AT_BC, T, D);
            tk__at_load_rows(Ls, Dsv, a, bh, q0);
            __syncthreads();
            tk__at_ds_tile(dSs, NULL, NULL, a, Qs, dOs, Ks, Vs, Ls, Dsv, h, q0, k0, alpha);
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

static int tk__attn_cuda_check(const char *fn, const float *bias, int bias_per_head, const float *temp,
                               int B, int H, int T, int D, cudaStream_t s)
{
    if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
        return tk__fail(TK_EINVAL, "%s: B, H, T, D must be > 0 (got %d, %d, %d, %d)", fn, B, H, T, D);
    if (D > TK__AT_MAXD) return tk__fail(TK_EINVAL, "%s: D %d > %d is not supported", fn, D, TK__AT_MAXD);
    if ((long long)B * H > 65535LL * 65535LL || (long long)B * H * T > 0x7FFFFFFFLL * 16 ||
        (size_t)B * H * T > ((size_t)-1 >> 1) / sizeof(float) / (size_t)D)
        return tk__fail(TK_EINVAL, "%s: B %d, H %d, T %d, D %d: too large", fn, B, H, T, D);
    if (bias && bias_per_head != 0 && bias_per_head != 1)
        return tk__fail(TK_EINVAL, "%s: bias_per_head must be 0 or 1 (got %d)", fn, bias_per_head);
    if (bias && !tk__is_device_ptr(bias)) return tk__fail(TK_EINVAL, "%s: bias is not a device pointer", fn);
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
    if (cudaFuncSetAttribute(tk__k_attn_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(tk__k_attn_dq, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(tk__k_attn_dkdv, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess ||
        cudaFuncSetAttribute(tk__k_attn_dbias, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return tk__fail(TK_ECUDA, "tk_attention_*_cuda: cannot raise the shared-memory limit to %d bytes", bytes);
    }
    done = 1;
    return TK_OK;
}

TKDEF int tk_attention_forward_cuda(float *out, float *lse, const float *q, const float *k,
                                    const float *v, const float *bias, int bias_per_head,
                                    const float *temp, int B, int H, int T, int D,
                                    tk_stream stream)
{
    static const char *fn = "tk_attention_forward_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    tk__attn_args a;
    int rc, *dbad = NULL, hbad = 0;
    if (!out || !lse || !q || !k || !v) return tk__fail(TK_EINVAL, "%s: NULL pointer", fn);
    if ((rc = tk__attn_cuda_check(fn, bias, bias_per_head, temp, B, H, T, D, s)) != TK_OK) return rc;
    if (!tk__is_device_ptr(out) || !tk__is_device_ptr(lse) || !tk__is_device_ptr(q) || !tk__is_device_ptr(k) ||
        !tk__is_device_ptr(v))
        return tk__fail(TK_EINVAL, "%s: out, lse, q, k, v must be device pointers", fn);
    if ((rc = tk__at_smem_optin()) != TK_OK) return rc;
    memset(&a, 0, sizeof a);
    a.q = q; a.k = k; a.v = v; a.bias = bias; a.temp = temp;
    a.bias_per_head = bias_per_head; a.H = H; a.T = T; a.D = D;
    if ((rc = tk__cuda_check(cudaMallocAsync((void **)&dbad, sizeof(int), s), fn)) != TK_OK) return rc;
    rc = tk__cuda_check(cudaMemsetAsync(dbad, 0, sizeof(int), s), fn);
    if (rc == TK_OK) {
        dim3 grid((unsigned)((T + TK__AT_BR - 1) / TK__AT_BR), (unsigned)(B * H));
        TK__LAUNCH(tk__k_attn_fwd, grid, TK__AT_THREADS, tk__at_smem_fwd(D), s, out, lse, dbad, a);
        rc = tk__launched(fn);
    }
    if (rc == TK_OK) rc = tk__cuda_check(cudaMemcpyAsync(&hbad, dbad, sizeof(int), cudaMemcpyDeviceToHost, s), fn);
    if (rc == TK_OK) rc = tk__cuda_check(cudaStreamSynchronize(s), fn);
    cudaFreeAsync(dbad, s);
    if (rc != TK_OK) return rc;
    return hbad ? tk__fail(TK_EINVAL, "%s: a row of logits + bias is not finite (NaN or +Inf in q, k or the "
                                      "bias, or all -inf)", fn)
                : TK_OK;
}

TKDEF int tk_attention_backward_cuda(float *dq, float *dk, float *dv, float *dbias,
                                     float *dtemp, const float *dout, const float *out,
                                     const float *lse, const float *q, const float *k,
                                     const float *v, const float *bias, int bias_per_head,
                                     const float *temp, int B, int H, int T, int D,
                                     tk_stream stream)
{
    static const char *fn = "tk_attention_backward_cuda";
    cudaStream_t s = (cudaStream_t)stream;
    tk__attn_args a;
    float *dvec = NULL, *tpart = NULL;
    const int nqt = (T + TK__AT_BR - 1) / TK__AT_BR, nkt = (T + TK__AT_BC - 1) / TK__AT_BC;
    int rc;
    if (!dq || !dk || !dv || !dout || !out || !lse || !q || !k || !v)
        return tk__fail(TK_EINVAL, "%s: NULL pointer", fn);
    if (dbias && !bias) return tk__fail(TK_EINVAL, "%s: dbias needs the forward's bias", fn);
    if ((rc = tk__attn_cuda_check(fn, bias, bias_per_head, temp, B, H, T, D, s)) != TK_OK) return rc;
    if (!tk__is_device_ptr(dq) || !tk__is_device_ptr(dk) || !tk__is_device_ptr(dv) || !tk__is_device_ptr(dout) ||
        !tk__is_device_ptr(out) || !tk__is_device_ptr(lse) || !tk__is_device_ptr(q) || !tk__is_device_ptr(k) ||
        !tk__is_device_ptr(v) || (dbias && !tk__is_device_ptr(dbias)) || (dtemp && !tk__is_device_ptr(dtemp)))
        return tk__fail(TK_EINVAL, "%s: every buffer must be a device pointer", fn);
    if ((rc = tk__at_smem_optin()) != TK_OK) return rc;
    memset(&a, 0, sizeof a);
    a.q = q; a.k = k; a.v = v; a.bias = bias; a.temp = temp; a.dout = dout; a.out = out; a.lse = lse;
    a.bias_per_head = bias_per_head; a.H = H; a.T = T; a.D = D;
    rc = tk__cuda_check(cudaMallocAsync((void **)&dvec, (size_t)B * H * T * sizeof(float), s), fn);
    if (rc == TK_OK && dtemp) rc = tk__cuda_check(cudaMallocAsync((void **)&tpart, (size_t)B * H * nqt * sizeof(float), s), fn);
    if (rc == TK_OK) {
        size_t rows = (size_t)B * H * T;
        TK__LAUNCH(tk__k_attn_dvec, tk__blocks(rows, 256), 256, 0, s, dvec, dout, out, rows, D);
        rc = tk__launched(fn);
    }
    a.dvec = dvec;
    if (rc == TK_OK) {
        TK__LAUNCH(tk__k_attn_dq, dim3((unsigned)nqt, (unsigned)(B * H)), TK__AT_THREADS, tk__at_smem_dq(D), s, dq, tpart, a);
        rc = tk__launched(fn);
    }
    if (rc == TK_OK) {
        TK__LAUNCH(tk__k_attn_dkdv, dim3((unsigned)nkt, (unsigned)(B * H)), TK__AT_THREADS, tk__at_smem_dkdv(D), s, dk, dv, a);
        rc = tk__launched(fn);
    }
    if (rc == TK_OK && dbias) {
        TK__LAUNCH(tk__k_attn_dbias, dim3((unsigned)nqt, (unsigned)nkt, (unsigned)(bias_per_head ? H : 1)),
                   TK__AT_THREADS, tk__at_smem_dq(D), s, dbias, a, B);
        rc = tk__launched(fn);
    }
    if (rc == TK_OK && dtemp) {
        TK__LAUNCH(tk__k_attn_dtemp, tk__blocks((size_t)H, 64), 64, 0, s, dtemp, tpart, temp, B, H, nqt, D);
        rc = tk__launched(fn);
    }
    cudaFreeAsync(dvec, s);
    if (tpart) cudaFreeAsync(tpart, s);
    return rc;
}
