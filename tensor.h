/* tensor.h - attnkit's minimal tensor library: the fp32 CPU ops a small GPT-style
   trainer needs, each a forward/backward pair, plus a fast blocked SIMD GEMM.
   v0.1 - MIT license (see the end of the file).

   This is attnkit's *support* header. The mechanism headers (era.h, polar.h,
   gdelta.h, guardian.h, ceas.h) never include it; the examples, tests and
   benchmarks do. It follows llm.c's layout: one function per layer and direction,
   shapes in comments, backward functions ACCUMULATE (+=) into gradient buffers.

   USAGE
     In exactly one C or C++ file:
        #define TENSOR_IMPLEMENTATION
        #include "tensor.h"
     Everywhere else just #include "tensor.h".

        float out[2 * 3];
        const float x[2 * 4] = {0}, W[3 * 4] = {0}, b[3] = {0};
        int rc = tk_matmul_forward(out, x, W, b, 2, 4, 3);   // out = x W^T + b
        if (rc != TK_OK) fprintf(stderr, "%s\n", tk_strerror(rc));

   COMPILE-TIME OPTIONS
     TK_STATIC            all functions static (private copy per translation unit)
     TK_MALLOC/TK_FREE    allocator (define both or neither)
     TK_ASSERT            internal-invariant assert (never used on user input)
     TK_GEMM_NO_SIMD      build only the portable scalar GEMM micro-kernel
     -fopenmp             parallel GEMM and row loops (optional; results identical
                          run to run for a fixed thread count)
     The GEMM micro-kernel is chosen at compile time: AVX-512F if __AVX512F__,
     else AVX2+FMA if __AVX2__ && __FMA__, else portable scalar C.

   SHAPES (legend)
     B batch, T time (sequence), C channels, H heads, D head dim (C = H*D),
     V vocabulary, N rows (usually B*T), OC output channels. All buffers are
     caller-owned, contiguous, row-major float32.

   ERRORS
     Every function returns TK_OK (0) or a negative code; tk_strerror() names it.
     A detailed message for the last error goes to the callback set with
     tk_set_log(); by default nothing is printed.
       TK_EINVAL  NULL pointer, bad dimension, NaN/Inf hyper-parameter
       TK_ERANGE  an index (token id, target) outside its range
       TK_ENOMEM  allocation failed
       TK_ENOCUDA a *_cuda function called in a build without nvcc
       TK_ECUDA   a CUDA or cuBLAS call failed
*/
#ifndef TENSOR_H
#define TENSOR_H

#include <stddef.h>
#include <stdint.h>

#ifdef TK_STATIC
#define TKDEF static
#else
#define TKDEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    TK_OK = 0,
    TK_EINVAL = -1,
    TK_ERANGE = -2,
    TK_ENOMEM = -3,
    TK_ENOCUDA = -4,
    TK_ECUDA = -5
};

TKDEF const char *tk_strerror(int err);
/* Detailed messages ("tk_matmul_forward: C must be > 0, got 0") go to fn. NULL: silent. */
TKDEF void tk_set_log(void (*fn)(const char *msg, void *user), void *user);

/* ---------------------------------------------------------------- RNG + init */
/* PCG32 (O'Neill): 64-bit state, odd increment selects the stream. */
typedef struct tk_rng {
    uint64_t state;
    uint64_t inc;
} tk_rng;

TKDEF void tk_rng_seed(tk_rng *rng, uint64_t seed, uint64_t stream);
TKDEF uint32_t tk_rng_u32(tk_rng *rng);
TKDEF float tk_rng_uniform(tk_rng *rng);          /* [0, 1) with 24 random bits */
TKDEF float tk_rng_normal(tk_rng *rng);           /* N(0, 1), Box-Muller */
TKDEF int tk_init_normal(float *x, size_t n, float mean, float std, tk_rng *rng);
TKDEF int tk_init_uniform(float *x, size_t n, float lo, float hi, tk_rng *rng);
TKDEF int tk_init_constant(float *x, size_t n, float value);

/* ---------------------------------------------------------------- GEMM */
/* C = alpha * op(A) * op(B) + beta * C, row-major (as cblas_sgemm(CblasRowMajor, ...)).
   op(A): (M,K), stored (M,lda) if !transA else (K,lda); op(B): (K,N), stored (K,ldb)
   if !transB else (N,ldb); C: (M,ldc). M, N, K >= 1; lda/ldb/ldc >= the stored row
   length. beta == 0 never reads C (NaNs in C are overwritten). */
TKDEF int tk_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc);

enum { TK_GEMM_AUTO = 0, TK_GEMM_SCALAR = 1 };
/* Force the portable scalar micro-kernel (TK_GEMM_SCALAR) or use the best compiled
   one (TK_GEMM_AUTO, the default). Process-wide; for tests and benchmarks. */
TKDEF void tk_gemm_set_kernel(int kernel);
/* "avx512", "avx2" or "scalar": the micro-kernel tk_sgemm uses now. */
TKDEF const char *tk_gemm_kernel_name(void);

/* ---------------------------------------------------------------- layers */
/* out (N,OC) = inp (N,C) . W^T + b;  W (OC,C), b (OC) or NULL */
TKDEF int tk_matmul_forward(float *out, const float *inp, const float *W,
                            const float *b, int N, int C, int OC);
/* dinp (N,C) += dout . W;  dW (OC,C) += dout^T . inp;  db (OC) += sum_rows dout.
   Any of dinp, dW, db may be NULL (not computed). */
TKDEF int tk_matmul_backward(float *dinp, float *dW, float *db, const float *dout,
                             const float *inp, const float *W, int N, int C, int OC);

/* out (B,T,C) = wte[ids[b,t]] + wpe[t];  ids (B,T) in [0,V); wte (V,C); wpe (T,C) or NULL.
   An id outside [0,V) returns TK_ERANGE and writes nothing. */
TKDEF int tk_embedding_forward(float *out, const int *ids, const float *wte,
                               const float *wpe, int B, int T, int C, int V);
/* dwte (V,C) += scatter of dout; dwpe (T,C) += sum over batch (either may be NULL) */
TKDEF int tk_embedding_backward(float *dwte, float *dwpe, const float *dout,
                                const int *ids, int B, int T, int C, int V);

/* LayerNorm over the last dim. out, inp (N,C); w, b (C) (b may be NULL);
   mean, rstd (N) saved for backward. eps > 0. */
TKDEF int tk_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, int N, int C, float eps);
/* dinp (N,C), dw (C), db (C) accumulate; dw/db may be NULL */
TKDEF int tk_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, const float *mean,
                                const float *rstd, int N, int C);

/* RMSNorm: out = inp * rstd * w, rstd = 1/sqrt(mean(inp^2) + eps). w (C) or NULL (=1). */
TKDEF int tk_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w,
                             int N, int C, float eps);
TKDEF int tk_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                              const float *w, const float *rstd, int N, int C);

/* Element-wise activations over n elements. GELU is the tanh approximation;
   relu2(x) = max(x,0)^2; silu(x) = x * sigmoid(x). out may alias inp. */
TKDEF int tk_gelu_forward(float *out, const float *inp, size_t n);
TKDEF int tk_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
TKDEF int tk_relu2_forward(float *out, const float *inp, size_t n);
TKDEF int tk_relu2_backward(float *dinp, const float *inp, const float *dout, size_t n);
TKDEF int tk_silu_forward(float *out, const float *inp, size_t n);
TKDEF int tk_silu_backward(float *dinp, const float *inp, const float *dout, size_t n);

/* Row softmax / log-softmax over the last dim: out, inp (N,C). Backward uses the
   forward output: dinp (N,C) += J^T dout. */
TKDEF int tk_softmax_forward(float *out, const float *inp, int N, int C);
TKDEF int tk_softmax_backward(float *dinp, const float *dout, const float *out, int N, int C);
TKDEF int tk_logsoftmax_forward(float *out, const float *inp, int N, int C);
TKDEF int tk_logsoftmax_backward(float *dinp, const float *dout, const float *out, int N, int C);

/* out (n) = a + b;  da, db (n) += dout (either may be NULL) */
TKDEF int tk_residual_forward(float *out, const float *a, const float *b, size_t n);
TKDEF int tk_residual_backward(float *da, float *db, const float *dout, size_t n);

/* Inverted dropout: out = inp * keep / (1-p), keep ~ Bernoulli(1-p) from rng, saved in
   mask (n bytes, 0/1). p in [0,1). p == 0 copies and sets mask to 1. */
TKDEF int tk_dropout_forward(float *out, uint8_t *mask, const float *inp, size_t n,
                             float p, tk_rng *rng);
TKDEF int tk_dropout_backward(float *dinp, const float *dout, const uint8_t *mask,
                              size_t n, float p);

/* ---------------------------------------------------------------- loss */
/* Cross-entropy with label smoothing eps in [0,1) (seed 000, Listing 8):
   target distribution q = (1-eps) onehot(y) + eps/V; per row
     ce   = -log p_y                       (the pure CE, reported)
     loss = -sum_v q_v log p_v             (the smoothed loss, optimised)
   logits (N,V); targets (N) in [0,V) (else TK_ERANGE); probs (N,V) receives the
   softmax (saved for backward, may be NULL if backward is not needed);
   losses (N) per-row smoothed loss or NULL. *mean_ce / *mean_loss (either may be NULL)
   receive the means over rows. */
TKDEF int tk_crossentropy_forward(float *probs, float *losses, float *mean_ce,
                                  float *mean_loss, const float *logits,
                                  const int *targets, int N, int V, float eps);
/* Fused softmax + CE backward: dlogits (N,V) += dloss * (probs - q).
   dloss is the gradient of the objective w.r.t. each row's loss (1/N for a mean). */
TKDEF int tk_crossentropy_backward(float *dlogits, const float *probs, const int *targets,
                                   int N, int V, float eps, float dloss);

/* ---------------------------------------------------------------- attention */
/* Causal multi-head softmax attention, materialised reference.
   out, q, k, v: (B,H,T,D); probs: (B,H,T,T), filled with the softmax (zeros above the
   diagonal) and saved for backward; bias: NULL, (T,T) shared by all heads
   (bias_per_head = 0) or (H,T,T) (bias_per_head = 1); temp: NULL (all 1) or (H), > 0.
     logits[b,h,i,j] = (q_i . k_j) / (sqrt(D) * temp[h]) + bias[(h,)i,j],  j <= i
   The bias is added before the causal mask: it is the hook for the RPA/ERA priors;
   temp is the hook for per-head temperature controllers. */
TKDEF int tk_attention_forward(float *out, float *probs, const float *q, const float *k,
                               const float *v, const float *bias, int bias_per_head,
                               const float *temp, int B, int H, int T, int D);
/* dq, dk, dv (B,H,T,D) += ; dbias (same shape as bias) += (summed over batch, and over
   heads when shared); dtemp (H) += ; dbias/dtemp may be NULL. */
TKDEF int tk_attention_backward(float *dq, float *dk, float *dv, float *dbias, float *dtemp,
                                const float *dout, const float *probs, const float *q,
                                const float *k, const float *v, int bias_per_head,
                                const float *temp, int B, int H, int T, int D);

/* Head layout helpers. qkv (B,T,3C) -> q, k, v (B,H,T,D) with C = H*D; merge:
   inp (B,H,T,D) -> out (B,T,C). Backward accumulates. */
TKDEF int tk_split_heads_forward(float *q, float *k, float *v, const float *qkv,
                                 int B, int T, int H, int D);
TKDEF int tk_split_heads_backward(float *dqkv, const float *dq, const float *dk,
                                  const float *dv, int B, int T, int H, int D);
TKDEF int tk_merge_heads_forward(float *out, const float *inp, int B, int T, int H, int D);
TKDEF int tk_merge_heads_backward(float *dinp, const float *dout, int B, int T, int H, int D);

/* ---------------------------------------------------------------- optimiser */
typedef struct tk_adamw_config {
    float lr;           /* 3e-4 */
    float beta1;        /* 0.9 */
    float beta2;        /* 0.95 */
    float eps;          /* 1e-8 */
    float weight_decay; /* 0.1, decoupled: p -= lr * wd * p */
} tk_adamw_config;
TKDEF tk_adamw_config tk_adamw_config_default(void);
/* One AdamW step with bias correction. params, grads, m, v (n); step t >= 1. */
TKDEF int tk_adamw_update(float *params, const float *grads, float *m, float *v, size_t n,
                          const tk_adamw_config *cfg, long t);
/* Global L2 norm of g (n) (accumulated in double, fixed order) into *norm. */
TKDEF int tk_grad_norm(const float *g, size_t n, float *norm);
/* Scale g so its L2 norm is at most max_norm (> 0); *norm_out (may be NULL) gets the
   norm before clipping. */
TKDEF int tk_clip_grad_norm(float *g, size_t n, float max_norm, float *norm_out);

/* ---------------------------------------------------------------- CUDA */
/* Device-pointer mirrors of the CPU ops, implemented in cuda/tensor.cuh and compiled
   only when this header is compiled by nvcc; elsewhere they return TK_ENOCUDA.
   `stream` is a cudaStream_t (NULL: the default stream). Tolerances against the CPU
   path are documented in cuda/tensor.cuh and checked by tests/parity_tensor.cu. */
struct CUstream_st;
typedef struct CUstream_st *tk_stream;
/* 1 if a CUDA device is usable, else 0 (always 0 without nvcc). */
TKDEF int tk_cuda_available(void);
TKDEF int tk_sgemm_cuda(int transA, int transB, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta,
                        float *C, int ldc, tk_stream stream);
TKDEF int tk_matmul_forward_cuda(float *out, const float *inp, const float *W,
                                 const float *b, int N, int C, int OC, tk_stream stream);
TKDEF int tk_matmul_backward_cuda(float *dinp, float *dW, float *db, const float *dout,
                                  const float *inp, const float *W, int N, int C, int OC,
                                  tk_stream stream);
TKDEF int tk_embedding_forward_cuda(float *out, const int *ids, const float *wte,
                                    const float *wpe, int B, int T, int C, int V,
                                    tk_stream stream);
TKDEF int tk_embedding_backward_cuda(float *dwte, float *dwpe, const float *dout,
                                     const int *ids, int B, int T, int C, int V,
                                     tk_stream stream);
TKDEF int tk_layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                                    const float *w, const float *b, int N, int C, float eps,
                                    tk_stream stream);
TKDEF int tk_layernorm_backward_cuda(float *dinp, float *dw, float *db, const float *dout,
                                     const float *inp, const float *w, const float *mean,
                                     const float *rstd, int N, int C, tk_stream stream);
TKDEF int tk_gelu_forward_cuda(float *out, const float *inp, size_t n, tk_stream stream);
TKDEF int tk_gelu_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n,
                                tk_stream stream);
TKDEF int tk_softmax_forward_cuda(float *out, const float *inp, int N, int C,
                                  tk_stream stream);
/* probs (N,V) softmax (may be NULL); losses (N) per-row smoothed loss; ce (N) per-row
   pure CE (may be NULL). Means are the caller's reduction (device or host). */
TKDEF int tk_crossentropy_forward_cuda(float *probs, float *losses, float *ce,
                                       const float *logits, const int *targets, int N,
                                       int V, float eps, tk_stream stream);
TKDEF int tk_crossentropy_backward_cuda(float *dlogits, const float *probs,
                                        const int *targets, int N, int V, float eps,
                                        float dloss, tk_stream stream);
TKDEF int tk_adamw_update_cuda(float *params, const float *grads, float *m, float *v,
                               size_t n, const tk_adamw_config *cfg, long t,
                               tk_stream stream);

#ifdef __cplusplus
}
#endif
#endif /* TENSOR_H */

/* ======================================================================== */
#ifdef TENSOR_IMPLEMENTATION
#ifndef TENSOR_IMPLEMENTATION_DONE
#define TENSOR_IMPLEMENTATION_DONE

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(TK_MALLOC) != defined(TK_FREE)
#error "tensor.h: define both TK_MALLOC and TK_FREE, or neither"
#endif
#ifndef TK_MALLOC
#define TK_MALLOC(sz) malloc(sz)
#define TK_FREE(p) free(p)
#endif
#ifndef TK_ASSERT
#include <assert.h>
#define TK_ASSERT(x) assert(x)
#endif
#if defined(__cplusplus)
#define TK_RESTRICT __restrict
#else
#define TK_RESTRICT restrict
#endif

/* ---------------------------------------------------------------- errors */
static void (*tk__log_fn)(const char *msg, void *user) = NULL;
static void *tk__log_user = NULL;

TKDEF void tk_set_log(void (*fn)(const char *msg, void *user), void *user)
{
    tk__log_fn = fn;
    tk__log_user = user;
}

TKDEF const char *tk_strerror(int err)
{
    switch (err) {
    case TK_OK: return "ok";
    case TK_EINVAL: return "invalid argument";
    case TK_ERANGE: return "index out of range";
    case TK_ENOMEM: return "out of memory";
    case TK_ENOCUDA: return "built without CUDA (compile with nvcc)";
    case TK_ECUDA: return "CUDA error";
    default: return "unknown error";
    }
}

/* Report an error through the log callback and return its code:
   `return tk__fail(TK_EINVAL, "tk_matmul_forward: C must be > 0, got %d", C);` */
static int tk__fail(int code, const char *fmt, ...)
{
    if (tk__log_fn) {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        tk__log_fn(buf, tk__log_user);
    }
    return code;
}

/* ---------------------------------------------------------------- GEMM */
/* The GEMM lives in tensor_gemm.inc during development; merged here before release. */
#include "tensor_gemm.inc"

/* ==== IMPLEMENTATION BODY (tensor ops) BEGIN ==== */
/* ==== IMPLEMENTATION BODY (tensor ops) END ==== */

/* ---------------------------------------------------------------- CUDA */
#if defined(__CUDACC__)
#include "cuda/tensor.cuh"
#else
TKDEF int tk_cuda_available(void) { return 0; }
#define TK__NOCUDA(name) return tk__fail(TK_ENOCUDA, "%s: built without nvcc", name)
TKDEF int tk_sgemm_cuda(int transA, int transB, int M, int N, int K, float alpha,
                        const float *A, int lda, const float *B, int ldb, float beta,
                        float *C, int ldc, tk_stream stream)
{
    (void)transA; (void)transB; (void)M; (void)N; (void)K; (void)alpha; (void)A;
    (void)lda; (void)B; (void)ldb; (void)beta; (void)C; (void)ldc; (void)stream;
    TK__NOCUDA("tk_sgemm_cuda");
}
TKDEF int tk_matmul_forward_cuda(float *out, const float *inp, const float *W,
                                 const float *b, int N, int C, int OC, tk_stream stream)
{
    (void)out; (void)inp; (void)W; (void)b; (void)N; (void)C; (void)OC; (void)stream;
    TK__NOCUDA("tk_matmul_forward_cuda");
}
TKDEF int tk_matmul_backward_cuda(float *dinp, float *dW, float *db, const float *dout,
                                  const float *inp, const float *W, int N, int C, int OC,
                                  tk_stream stream)
{
    (void)dinp; (void)dW; (void)db; (void)dout; (void)inp; (void)W; (void)N; (void)C;
    (void)OC; (void)stream;
    TK__NOCUDA("tk_matmul_backward_cuda");
}
TKDEF int tk_embedding_forward_cuda(float *out, const int *ids, const float *wte,
                                    const float *wpe, int B, int T, int C, int V,
                                    tk_stream stream)
{
    (void)out; (void)ids; (void)wte; (void)wpe; (void)B; (void)T; (void)C; (void)V;
    (void)stream;
    TK__NOCUDA("tk_embedding_forward_cuda");
}
TKDEF int tk_embedding_backward_cuda(float *dwte, float *dwpe, const float *dout,
                                     const int *ids, int B, int T, int C, int V,
                                     tk_stream stream)
{
    (void)dwte; (void)dwpe; (void)dout; (void)ids; (void)B; (void)T; (void)C; (void)V;
    (void)stream;
    TK__NOCUDA("tk_embedding_backward_cuda");
}
TKDEF int tk_layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                                    const float *w, const float *b, int N, int C, float eps,
                                    tk_stream stream)
{
    (void)out; (void)mean; (void)rstd; (void)inp; (void)w; (void)b; (void)N; (void)C;
    (void)eps; (void)stream;
    TK__NOCUDA("tk_layernorm_forward_cuda");
}
TKDEF int tk_layernorm_backward_cuda(float *dinp, float *dw, float *db, const float *dout,
                                     const float *inp, const float *w, const float *mean,
                                     const float *rstd, int N, int C, tk_stream stream)
{
    (void)dinp; (void)dw; (void)db; (void)dout; (void)inp; (void)w; (void)mean;
    (void)rstd; (void)N; (void)C; (void)stream;
    TK__NOCUDA("tk_layernorm_backward_cuda");
}
TKDEF int tk_gelu_forward_cuda(float *out, const float *inp, size_t n, tk_stream stream)
{
    (void)out; (void)inp; (void)n; (void)stream;
    TK__NOCUDA("tk_gelu_forward_cuda");
}
TKDEF int tk_gelu_backward_cuda(float *dinp, const float *inp, const float *dout, size_t n,
                                tk_stream stream)
{
    (void)dinp; (void)inp; (void)dout; (void)n; (void)stream;
    TK__NOCUDA("tk_gelu_backward_cuda");
}
TKDEF int tk_softmax_forward_cuda(float *out, const float *inp, int N, int C,
                                  tk_stream stream)
{
    (void)out; (void)inp; (void)N; (void)C; (void)stream;
    TK__NOCUDA("tk_softmax_forward_cuda");
}
TKDEF int tk_crossentropy_forward_cuda(float *probs, float *losses, float *ce,
                                       const float *logits, const int *targets, int N,
                                       int V, float eps, tk_stream stream)
{
    (void)probs; (void)losses; (void)ce; (void)logits; (void)targets; (void)N; (void)V;
    (void)eps; (void)stream;
    TK__NOCUDA("tk_crossentropy_forward_cuda");
}
TKDEF int tk_crossentropy_backward_cuda(float *dlogits, const float *probs,
                                        const int *targets, int N, int V, float eps,
                                        float dloss, tk_stream stream)
{
    (void)dlogits; (void)probs; (void)targets; (void)N; (void)V; (void)eps; (void)dloss;
    (void)stream;
    TK__NOCUDA("tk_crossentropy_backward_cuda");
}
TKDEF int tk_adamw_update_cuda(float *params, const float *grads, float *m, float *v,
                               size_t n, const tk_adamw_config *cfg, long t,
                               tk_stream stream)
{
    (void)params; (void)grads; (void)m; (void)v; (void)n; (void)cfg; (void)t;
    (void)stream;
    TK__NOCUDA("tk_adamw_update_cuda");
}
#undef TK__NOCUDA
#endif /* __CUDACC__ */

#endif /* TENSOR_IMPLEMENTATION_DONE */
#endif /* TENSOR_IMPLEMENTATION */

/*
MIT License

Copyright (c) 2026 the attnkit authors

Permission is hereby granted, free of charge, to any person obtaining a copy of this
software and associated documentation files (the "Software"), to deal in the Software
without restriction, including without limitation the rights to use, copy, modify, merge,
publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR
PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
DEALINGS IN THE SOFTWARE.
*/
