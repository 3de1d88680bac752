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
     TK_STATIC (or TENSOR_STATIC) all functions static (private copy per translation unit)
     TK_MALLOC/TK_FREE    allocator (define both or neither)
     TK_ASSERT            internal-invariant assert (never used on user input)
     TK_GEMM_NO_SIMD      build only the portable scalar GEMM micro-kernel
     TK_USE_CBLAS         tk_sgemm calls cblas_sgemm (any CBLAS: OpenBLAS, BLIS, MKL;
                          link it, e.g. -lopenblas) instead of the built-in kernels;
                          off by default (tensor.h has no dependencies). The header
                          included for it is <cblas.h>, or TK_CBLAS_HEADER (e.g.
                          -DTK_CBLAS_HEADER='<mkl_cblas.h>'). Validation, the alpha == 0
                          and tiny-product paths stay tensor.h's; results are then the
                          BLAS's (its own threads and bits: not bit-identical across
                          thread counts). tk_gemm_set_kernel(TK_GEMM_BUILTIN) or
                          TK_GEMM_SCALAR returns to the built-in kernels at run time.
     -fopenmp             parallel GEMM and row loops (optional; results identical
                          run to run for a fixed thread count)
     The GEMM micro-kernel is chosen at compile time: AVX-512F if __AVX512F__,
     else AVX2+FMA if __AVX2__ && __FMA__, else portable scalar C.

   SHAPES (legend)
     B batch, T time (sequence), C channels, H heads, D head dim (C = H*D),
     V vocabulary, N rows (usually B*T), OC output channels. All buffers are
     caller-owned, contiguous, row-major float32.

   INITIALISATION (drop-in use)
     tensor.h is the examples' support library, not needed by the mechanism headers. Its
     attention takes temp = NULL (all 1: the plain 1/sqrt(D) softmax) and bias = NULL,
     so a host can route its attention through it and add a prior or a temperature
     controller later; tk_init_normal / tk_init_uniform fill weights (GPT-2 uses
     normal 0.02). NaN/Inf checks read the IEEE bits, so they hold under -ffast-math.

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

#if defined(TK_STATIC) || defined(TENSOR_STATIC)
/* unused is expected in a static copy: silence -Wunused-function */
#if defined(__GNUC__) || defined(__clang__)
#define TKDEF static __attribute__((unused))
#else
#define TKDEF static
#endif
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

/* Seeding is pcg32_srandom_r's: (42, 54) gives the reference demo's sequence
   0xa15c02b7, 0x7b47f409, ... The generator functions cannot report errors: a NULL
   rng is a no-op for tk_rng_seed and yields 0 from the others. */
TKDEF void tk_rng_seed(tk_rng *rng, uint64_t seed, uint64_t stream);
TKDEF uint32_t tk_rng_u32(tk_rng *rng);
TKDEF float tk_rng_uniform(tk_rng *rng);          /* [0, 1) with 24 random bits */
TKDEF float tk_rng_normal(tk_rng *rng);           /* N(0, 1), Box-Muller, 2 draws */
/* x (n), n >= 1, filled in index order from rng (deterministic for a seed).
   normal: mean finite, std finite >= 0; uniform: [lo, hi), lo <= hi, both finite. */
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

enum { TK_GEMM_AUTO = 0, TK_GEMM_SCALAR = 1, TK_GEMM_BUILTIN = 2 };
/* Force the portable scalar micro-kernel (TK_GEMM_SCALAR), the best compiled built-in
   one (TK_GEMM_BUILTIN), or the default (TK_GEMM_AUTO: cblas_sgemm when compiled with
   TK_USE_CBLAS, else the best built-in kernel). Process-wide; for tests and benchmarks. */
TKDEF void tk_gemm_set_kernel(int kernel);
/* "cblas", "avx512", "avx2" or "scalar": what tk_sgemm uses now. */
TKDEF const char *tk_gemm_kernel_name(void);

/* ---------------------------------------------------------------- layers */
/* Common rules for everything below: int dimensions must be >= 1 and size_t counts
   n >= 1 (else TK_EINVAL); a rejected input writes nothing. Outputs must not alias
   inputs unless a comment says they may. Backward functions ACCUMULATE (+=). */

/* out (N,OC) = inp (N,C) . W^T + b;  W (OC,C), b (OC) or NULL. Uses tk_sgemm. */
TKDEF int tk_matmul_forward(float *out, const float *inp, const float *W,
                            const float *b, int N, int C, int OC);
/* dinp (N,C) += dout (N,OC) . W;  dW (OC,C) += dout^T . inp;  db (OC) += sum_rows dout.
   Any of dinp, dW, db may be NULL (not computed); W is needed only for dinp and inp
   only for dW (either may be NULL otherwise). */
TKDEF int tk_matmul_backward(float *dinp, float *dW, float *db, const float *dout,
                             const float *inp, const float *W, int N, int C, int OC);

/* out (B,T,C) = wte[ids[b,t]] + wpe[t];  ids (B,T) in [0,V); wte (V,C); wpe (T,C) or NULL.
   An id outside [0,V) returns TK_ERANGE and writes nothing. */
TKDEF int tk_embedding_forward(float *out, const int *ids, const float *wte,
                               const float *wpe, int B, int T, int C, int V);
/* dout (B,T,C); dwte (V,C) += scatter of dout by ids; dwpe (T,C) += sum over batch.
   Either may be NULL; ids are needed (and range-checked first) only for dwte. */
TKDEF int tk_embedding_backward(float *dwte, float *dwpe, const float *dout,
                                const int *ids, int B, int T, int C, int V);

/* LayerNorm over the last dim. out, inp (N,C); w, b (C) (b may be NULL);
   mean, rstd (N) saved for backward (may be NULL for inference). eps finite > 0. */
TKDEF int tk_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, int N, int C, float eps);
/* dinp (N,C), dw (C), db (C) accumulate; dw/db may be NULL. dout, inp (N,C). */
TKDEF int tk_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, const float *mean,
                                const float *rstd, int N, int C);

/* RMSNorm: out = inp * rstd * w, rstd = 1/sqrt(mean(inp^2) + eps). out, inp (N,C);
   w (C) or NULL (all 1); rstd (N) saved for backward (may be NULL); eps finite > 0.
   Backward: dinp (N,C) +=, dw (C) += (may be NULL; with w NULL it is the gradient
   of an implicit unit weight). */
TKDEF int tk_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w,
                             int N, int C, float eps);
TKDEF int tk_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                              const float *w, const float *rstd, int N, int C);

/* Element-wise activations over n elements. GELU is the tanh approximation;
   relu2(x) = max(x,0)^2; silu(x) = x * sigmoid(x). out may alias inp.
   Backward: dinp (n) += f'(inp) * dout. */
TKDEF int tk_gelu_forward(float *out, const float *inp, size_t n);
TKDEF int tk_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
TKDEF int tk_relu2_forward(float *out, const float *inp, size_t n);
TKDEF int tk_relu2_backward(float *dinp, const float *inp, const float *dout, size_t n);
TKDEF int tk_silu_forward(float *out, const float *inp, size_t n);
TKDEF int tk_silu_backward(float *dinp, const float *inp, const float *dout, size_t n);
/* Gated relu2 (the relu2-gated MLP): inp (N,2F), each row [a | b] (a the gate half, b
   the value half); out (N,F) = max(a,0)^2 * b. Backward: dinp (N,2F) += the gradient,
   d/da = 2 max(a,0) b dout, d/db = max(a,0)^2 dout; dout (N,F). out / dinp must not
   alias inp (or dout). */
TKDEF int tk_relu2_gated_forward(float *out, const float *inp, int N, int F);
TKDEF int tk_relu2_gated_backward(float *dinp, const float *inp, const float *dout, int N,
                                  int F);
/* Rotary position embedding, in place on x (B,H,T,D), D even >= 2: for position t
   (0-based) and pair (x[2i], x[2i+1]), i < D/2, a rotation by the angle
   t * base^(-2i/D) (computed in double with pow/cos/sin, then rounded to float, so
   positions in the thousands keep their precision):
     x[2i] <- x[2i] cos - x[2i+1] sin,   x[2i+1] <- x[2i] sin + x[2i+1] cos.
   base finite > 1 (10000 is the usual choice); inverse 1 rotates by minus the angle:
   the transpose of the rotation, which is the backward of the forward one (apply it to
   the gradient in place). Position 0 is unchanged; every pair keeps its norm. */
TKDEF int tk_rope(float *x, int B, int H, int T, int D, float base, int inverse);

/* Row softmax / log-softmax over the last dim: out, inp (N,C), max-subtracted (no
   overflow for large logits); out may alias inp. Backward uses the forward output:
   dinp (N,C) += J^T dout. */
TKDEF int tk_softmax_forward(float *out, const float *inp, int N, int C);
TKDEF int tk_softmax_backward(float *dinp, const float *dout, const float *out, int N, int C);
TKDEF int tk_logsoftmax_forward(float *out, const float *inp, int N, int C);
TKDEF int tk_logsoftmax_backward(float *dinp, const float *dout, const float *out, int N, int C);

/* out (n) = a + b (out may alias a or b);  da, db (n) += dout (either may be NULL) */
TKDEF int tk_residual_forward(float *out, const float *a, const float *b, size_t n);
TKDEF int tk_residual_backward(float *da, float *db, const float *dout, size_t n);

/* Sigmoid over n elements: out = 1 / (1 + exp(-x)) (tk_silu's sigmoid: exact limits 0 and
   1 up to ~1e-38); out may alias x. Backward from the forward's OUTPUT y:
   dx (n) += dy * y * (1 - y). */
TKDEF int tk_sigmoid_forward(float *out, const float *x, size_t n);
TKDEF int tk_sigmoid_backward(float *dx, const float *y, const float *dy, size_t n);
/* Scale by a host scalar: out (n) = alpha * x; out may alias x; alpha finite. */
TKDEF int tk_scale(float *out, const float *x, float alpha, size_t n);
/* Shift by a host scalar: out (n) = x + beta (one IEEE addition: a NaN or infinite beta
   propagates as it would in x + beta); out may alias x. On the device the value travels as
   a kernel argument: adding a host-computed scalar gradient to a device element costs no
   copy and no wait (tk_shift_cuda). */
TKDEF int tk_shift(float *out, const float *x, float beta, size_t n);
/* Causal depthwise convolution over time, per channel: inp, out (B,T,C), w (K,C),
     out[b,t,c] (+)= sum_{j=0..min(K-1,t)} w[j,c] inp[b,t-j,c]   (j in order; accumulate 0 or
   1: 0 writes, 1 adds to out as it is). out must not alias inp. Backward (ACCUMULATES):
     dinp[b,t,c] += sum_{j: t+j<T} w[j,c] dout[b,t+j,c]   (j in order),
     dw[j,c]     += sum over b, t >= j of dout[b,t,c] inp[b,t-j,c]   (in double, b then t);
   dinp (with w) or dw (with inp) may be NULL, not both; dinp must not alias dout. */
TKDEF int tk_causal_dwconv_forward(float *out, const float *inp, const float *w, int B, int T,
                                   int C, int K, int accumulate);
TKDEF int tk_causal_dwconv_backward(float *dinp, float *dw, const float *dout, const float *inp,
                                    const float *w, int B, int T, int C, int K);
/* Per-row scale: out (N,C) = s[i] * x[i,:];  x (N,C), s (N). out may alias x. */
TKDEF int tk_rowscale(float *out, const float *x, const float *s, int N, int C);
/* Per-row dot product, ACCUMULATING: out (N) += sum_j a[i,j] * b[i,j];  a, b (N,C). Each
   row is summed in double (the products are exact there) and added to out[i] in double,
   rounded once. out must not alias a or b. (With tk_rowscale: the backward of a per-row
   gate, ds += rowdot(dout, br), dbr += s * dout.) */
TKDEF int tk_rowdot(float *out, const float *a, const float *b, int N, int C);
/* Residual with a per-row gate: out (N,C) = x[i,:] + s[i] * br[i,:];  x, br (N,C), s (N).
   out may alias x or br. Backward: dx += dout (tk_residual_backward), ds += rowdot(dout,
   br) (tk_rowdot), dbr += s * dout (tk_rowscale into scratch, then added). */
TKDEF int tk_residual_rows_forward(float *out, const float *x, const float *br,
                                   const float *s, int N, int C);
/* Causal mean gate: z, sig (B,T,H), g (B,T), H <= 256. For every (b,h), the running mean
   over time, its sigmoid, and the mean over heads:
     pre[b,t,h] = (1/(t+1)) sum_{s<=t} z[b,s,h]   (a running sum in double)
     sig[b,t,h] = sigmoid(pre)                     (computed in double, stored as float)
     g[b,t]     = (1/H) sum_h sig[b,t,h]           (summed in double, h in order)
   sig is saved for the backward. Backward (ACCUMULATES): dg (B,T), sig from the forward;
     dpre[b,t,h] = dg[b,t] / H * sig (1 - sig),
     dz[b,s,h]  += sum_{t>=s} dpre[b,t,h] / (t+1)  (a reverse running sum in double).
   No buffer may alias another. */
TKDEF int tk_causal_mean_gate_forward(float *g, float *sig, const float *z, int B, int T,
                                      int H);
TKDEF int tk_causal_mean_gate_backward(float *dz, const float *dg, const float *sig, int B,
                                       int T, int H);
/* Row gather: out (n,C) = src[idx[i],:] row by row;  src (nsrc,C), idx (n) in [0,nsrc).
   An idx outside [0,nsrc) is TK_ERANGE with nothing written (every index is checked
   first). The device twin cannot check indices without a copy to the host: it writes a
   zero row for an out-of-range index (and never reads outside src). out must not alias
   src. */
TKDEF int tk_rows_gather(float *out, const float *src, int nsrc, const int *idx, int n,
                         int C);
/* Weighted combination of gathered rows (a mixture-of-experts "combine"): for each row n,
     out[n,:] = (accumulate ? out[n,:] : 0) + sum_{k=0..K-1} w[n*K+k] * src[idx[n*K+k],:]
   summed in float in the order k = 0, 1, ..., K-1.  out (N,C), src (nsrc,C), idx (N*K),
   w (N*K) or NULL (every weight 1), accumulate 0 or 1. An index outside [0,nsrc):
   TK_ERANGE with nothing written on the CPU; on the device (no host check) that term is
   skipped. out must not alias src.
   Backward (ACCUMULATES), dout (N,C):
     dsrc (nsrc,C): dsrc[idx[n*K+k],:] += w[n*K+k] * dout[n,:]  (w NULL: 1)
     dw (N*K):      dw[n*K+k] += dot(dout[n,:], src[idx[n*K+k],:])  (in double, as tk_rowdot;
                    src is needed only for dw)
   either may be NULL, not both. Repeated idx entries are summed in the order (n,k) on the
   CPU; on the device the dsrc scatter needs DISTINCT idx entries (repeats race: their sum
   is then undefined); dw does not care. */
TKDEF int tk_rows_combine_forward(float *out, const float *src, int nsrc, const int *idx,
                                  const float *w, int N, int K, int C, int accumulate);
TKDEF int tk_rows_combine_backward(float *dsrc, float *dw, const float *dout,
                                   const float *src, int nsrc, const int *idx,
                                   const float *w, int N, int K, int C);

/* Inverted dropout: out = inp * keep / (1-p), keep ~ Bernoulli(1-p) from rng, saved in
   mask (n bytes, 0/1). p in [0,1). p == 0 copies and sets mask to 1 (rng may then be
   NULL and is not advanced). One draw per element, in index order: the mask depends
   only on the rng state, never on the thread count. Backward: dinp (n) +=
   dout * mask / (1-p), with the forward's p. */
TKDEF int tk_dropout_forward(float *out, uint8_t *mask, const float *inp, size_t n,
                             float p, tk_rng *rng);
TKDEF int tk_dropout_backward(float *dinp, const float *dout, const uint8_t *mask,
                              size_t n, float p);
/* Counter-based inverted dropout: the same contract as tk_dropout_forward (out, inp,
   mask (n); p in [0,1), finite; p == 0 copies inp and sets mask to 1; out may alias inp;
   backward: tk_dropout_backward with the same p), but element i's keep bit is a pure
   function of (seed, i), so the CPU (any thread count) and the device
   (tk_dropout_seeded_forward_cuda) draw the same mask and write the same bits. The hash
   is SplitMix64's (Vigna; the mixer m is Stafford's "Mix13"), two rounds:
     G = 0x9E3779B97F4A7C15,
     m(z): z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
           return z ^ (z >> 31)                          (all uint64_t, mod 2^64)
     key  = m(seed + G)                 (SplitMix64's first output from state seed)
     bits = m(key + i * G)              (i the 0-based element index, as uint64_t)
     u    = (float)(bits >> 40) * 2^-24 (24 bits, exact: u in [0, 1))
     keep = u >= p;   out[i] = keep ? inp[i] * scale : 0,   scale = 1.0f / (1.0f - p)
   (the scale is tk_dropout_forward's float expression, computed once). Integer
   arithmetic only up to u, so host and device agree bit for bit. A model draws a fresh
   mask per call by changing seed (e.g. a per-run base plus a step and layer counter):
   seeds are hashed before use, so nearby seeds give unrelated masks. Errors (nothing
   written): NULL pointer, n == 0, p outside [0,1) or not finite: TK_EINVAL. */
TKDEF int tk_dropout_seeded_forward(float *out, uint8_t *mask, const float *inp, size_t n,
                                    float p, uint64_t seed);

/* ---------------------------------------------------------------- loss */
/* Cross-entropy with label smoothing eps in [0,1) (seed 000, Listing 8):
   target distribution q = (1-eps) onehot(y) + eps/V; per row
     ce   = -log p_y                       (the pure CE, reported)
     loss = -sum_v q_v log p_v             (the smoothed loss, optimised)
   logits (N,V); targets (N) in [0,V) (else TK_ERANGE); probs (N,V) receives the
   softmax (saved for backward, may be NULL if backward is not needed);
   losses (N) per-row smoothed loss or NULL. *mean_ce / *mean_loss (either may be NULL)
   receive the means over rows (summed in double, in row order; needs 16N bytes from
   TK_MALLOC, else TK_ENOMEM). Log-sum-exp is max-subtracted; with eps == 0 the two
   losses are equal. loss = (1-eps) ce + eps (lse - mean_v logits_v). */
TKDEF int tk_crossentropy_forward(float *probs, float *losses, float *mean_ce,
                                  float *mean_loss, const float *logits,
                                  const int *targets, int N, int V, float eps);
/* Fused softmax + CE backward: dlogits (N,V) += dloss * (probs - q).
   dloss is the gradient of the objective w.r.t. each row's loss (1/N for a mean);
   finite. probs (N,V) from the forward; eps must be the forward's. */
TKDEF int tk_crossentropy_backward(float *dlogits, const float *probs, const int *targets,
                                   int N, int V, float eps, float dloss);
/* In-place cross-entropy for the LM head (no second (N,V) buffer): logits (N,V) are
   overwritten with the softmax probs; losses (N) receive the label-smoothed per-row
   loss (eps as tk_crossentropy_forward; may be NULL); ce (N) the pure CE per row (may
   be NULL). Two passes per row, exp evaluated once: pass 1 writes exp(x - running
   max) chunk by chunk and sums it (online rescale), pass 2 scales each chunk to the
   probs. Rows are split over the OpenMP threads (static); no allocation.
   Errors as tk_crossentropy_forward (logits is not modified on error). */
TKDEF int tk_crossentropy_forward_inplace(float *logits, float *losses, float *ce,
                                          const int *targets, int N, int V, float eps);
/* probs (N,V) from the in-place forward -> dlogits = dloss * (probs - q) in place
   (OVERWRITES, does not accumulate), q the smoothed target. One pass per row. */
TKDEF int tk_crossentropy_backward_inplace(float *probs, const int *targets, int N, int V,
                                           float eps, float dloss);

/* ---------------------------------------------------------------- attention */
/* Causal multi-head softmax attention, materialised reference.
   out, q, k, v: (B,H,T,D); probs: (B,H,T,T), filled with the softmax (zeros above the
   diagonal) and saved for backward; bias: NULL, (T,T) shared by all heads
   (bias_per_head = 0) or (H,T,T) (bias_per_head = 1); temp: NULL (all 1) or (H), > 0.
     logits[b,h,i,j] = (q_i . k_j) / (sqrt(D) * temp[h]) + bias[(h,)i,j],  j <= i
   The bias is added before the causal mask: it is the hook for the RPA/ERA priors;
   temp is the hook for per-head temperature controllers. Bias entries above the
   diagonal are never read; the others must be finite or -INFINITY with at least one
   finite entry per row: a row that breaks this (or a NaN/Inf in q, k) is caught by one
   test of its softmax normaliser and the call returns TK_EINVAL. Computed in blocks of
   64 query rows against keys [0, end of block) only (the masked blocks are skipped),
   QK^T and PV through tk_sgemm, bias +
   scale + mask + softmax fused per block while it is in cache; threads split the
   (b, row block) pairs, heads inside (a shared bias block is reused by every head, and
   its row maxima, found once, give each head's softmax shift as max(scores) + max(bias)
   so the bias is read once per element: see tk__attn_softmax_row). Bit-identical for
   any thread count. No scratch.
   Checked against float64 (issue 38; tests/test_tensor.c and parity_tensor.cu,
   tests/ref64.h): without bias and with -inf rows (one finite key; mixed) every tensor
   (out, dq, dk, dv, dbias, dtemp) within 1e-6 of its max-norm (the device's dtemp
   3e-6); with biases of +-1e4
   (mixed with O(1) entries, or +1e4 everywhere) up to 1.6e-4 (out) and 1e-3 (dtemp, the
   device): a logit near 1e4 is held in fp32 only to eps32 * 1e4 = 1.2e-3, the bound
   those regimes are checked against. */
TKDEF int tk_attention_forward(float *out, float *probs, const float *q, const float *k,
                               const float *v, const float *bias, int bias_per_head,
                               const float *temp, int B, int H, int T, int D);
/* dq, dk, dv (B,H,T,D) += ; dbias (same shape as bias) += (summed over batch, and over
   heads when shared; 0 above the diagonal); dtemp (H) += ; dbias/dtemp may be NULL.
   dout (B,H,T,D); probs from the forward; bias_per_head, temp as in the forward.
   Blocks of 128 query rows (masked blocks skipped); threads split the heads.
   Scratch from TK_MALLOC: per thread min(T,128)*T floats (twice that + T with dtemp),
   plus H*T*T for a shared dbias, else TK_ENOMEM. */
TKDEF int tk_attention_backward(float *dq, float *dk, float *dv, float *dbias, float *dtemp,
                                const float *dout, const float *probs, const float *q,
                                const float *k, const float *v, int bias_per_head,
                                const float *temp, int B, int H, int T, int D);
/* Strided q, k, v, out: element (b, h, t, d) of q is q[b*q[0] + h*q[1] + t*q[2] + d]
   (strides in floats, >= 0, token stride <= INT_MAX; head dim contiguous), likewise
   k, v, out; dq, dk, dv, dout share the strides of q, k, v, out, so llm.c's interleaved
   (B,T,3C) qkv / dqkv and a (B,T,C) output go in as they are (tk_attn_layout_qkv).
   probs, bias, dbias stay contiguous. Same arithmetic as the contiguous calls (the GEMMs
   read through their leading dimensions): bit-identical results. */
typedef struct tk_attn_layout {
    ptrdiff_t q[3], k[3], v[3], out[3]; /* {batch, head, token} strides */
} tk_attn_layout;
TKDEF tk_attn_layout tk_attn_layout_contiguous(int H, int T, int D);
TKDEF tk_attn_layout tk_attn_layout_qkv(int H, int T, int D);
TKDEF int tk_attention_forward_strided(const tk_attn_layout *lay, float *out, float *probs,
                                       const float *q, const float *k, const float *v,
                                       const float *bias, int bias_per_head,
                                       const float *temp, int B, int H, int T, int D);
TKDEF int tk_attention_backward_strided(const tk_attn_layout *lay, float *dq, float *dk,
                                        float *dv, float *dbias, float *dtemp,
                                        const float *dout, const float *probs, const float *q,
                                        const float *k, const float *v, int bias_per_head,
                                        const float *temp, int B, int H, int T, int D);
/* The forward with per-row statistics of the softmax, gathered in its exp pass while the
   row is in cache (what an entropy controller such as ceas.h's CEAS needs, without a
   second pass over the (B,H,T,T) logits or probabilities). stats: (B,H,T,TK_ATTN_NSTATS),
   per row i of (b,h), over the visible keys j <= i (bias entries of -inf excluded) of the
   logits x_j = alpha q_i.k_j + bias_ij and p = softmax(x):
     [0] entropy H = -sum p log p (nats)   [1] E_p[x]   [2] Var_p[x]
     [3] mean_j x_j   [4] var_j x_j (population: over the keys, unweighted)   [5] the
     number of keys counted.
   lay: the strides as tk_attention_forward_strided, or NULL for contiguous (B,H,T,D).
   out and probs are bit-identical to tk_attention_forward's. Sums in float lanes per
   256-key chunk and double across chunks, shifted by the row's softmax shift: relative
   error ~1e-6 for rows of a few thousand keys. */
#define TK_ATTN_NSTATS 6
TKDEF int tk_attention_forward_stats(const tk_attn_layout *lay, float *out, float *probs,
                                     float *stats, const float *q, const float *k,
                                     const float *v, const float *bias, int bias_per_head,
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
/* One AdamW step with bias correction. params, grads, m, v (n); step t >= 1.
     m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
     p -= lr * ( (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * p )
   lr >= 0, wd >= 0, eps > 0 (all finite), beta1/beta2 in [0,1), else TK_EINVAL. */
TKDEF int tk_adamw_update(float *params, const float *grads, float *m, float *v, size_t n,
                          const tk_adamw_config *cfg, long t);
/* Global L2 norm of g (n) into *norm: squares summed in double over 64 fixed blocks,
   added in order, so the result is bit-identical for any thread count. */
TKDEF int tk_grad_norm(const float *g, size_t n, float *norm);
/* Scale g so its L2 norm is at most max_norm (finite, > 0); *norm_out (may be NULL)
   gets the norm before clipping. A non-finite norm (NaN/Inf in g) leaves g unchanged
   and is reported in *norm_out: check it before the optimiser step. */
TKDEF int tk_clip_grad_norm(float *g, size_t n, float max_norm, float *norm_out);

/* ---------------------------------------------------------------- CUDA */
/* Device-pointer mirrors of the CPU ops, implemented in cuda/tensor.cuh and compiled
   only when this header is compiled by nvcc; elsewhere they return TK_ENOCUDA.
   `stream` is a cudaStream_t (NULL: the default stream). Tolerances against the CPU
   path are documented in cuda/tensor.cuh and checked by tests/parity_tensor.cu.
   The *_cuda functions are written once each, in the lists TK__CUDA_OPS and
   TK__CUDA_ATTN below: an entry X(int, tk_name_cuda, (parameters)) is the prototype
   `int tk_name_cuda(parameters)`, with its documentation above it in the list. The
   lists are expanded here into the declarations and, in a build without nvcc, into
   stubs that return TK_ENOCUDA ("tk_name_cuda: built without nvcc" to the log). */
struct CUstream_st;
typedef struct CUstream_st *tk_stream;
/* 1 if a CUDA device is usable, else 0 (always 0 without nvcc). */
TKDEF int tk_cuda_available(void);
/* Releases what the device ops keep for the process (the cuBLAS handle and its workspace,
   created by the first device GEMM; the cached scratch, one buffer per (device, stream)
   grown on demand, that the ops' flags and partial sums use, so that a call in steady
   state allocates nothing): call it once at the end of a program, after its last device
   op and before cudaDeviceReset, so a leak checker (compute-sanitizer --leak-check full)
   sees nothing left. Later device ops create them again. Synchronises the device first.
   The cache is process state: device ops from several host threads at once are not
   supported (nor are they with the shared cuBLAS handle). TK_OK (also without nvcc, where
   there is nothing to release), or TK_ECUDA. */
TKDEF int tk_cuda_release(void);
/* The arithmetic of the device GEMMs, process-wide: tk_sgemm_cuda and everything built on
   it (tk_matmul_*_cuda and the plain tk_matmul_* with device buffers). TK_MATH_FP32 (the
   default): cuBLAS SGEMM in fp32. TK_MATH_TF32 / TK_MATH_BF16 (defined with the attention
   below): cublasGemmEx on fp32 buffers with the FAST_TF32 / FAST_16BF compute types, the
   inputs rounded to tf32 / bf16 on the tensor cores, fp32 accumulation and output (the
   "autocast" of a trainer: fp32 storage and master weights, reduced-precision products).
   Per element |gpu - exact| <= e * sum_k |a_ik b_kj| with e about 1e-6 (fp32), 2^-9
   (tf32), 2^-7 (bf16) (cuda/tensor.cuh). tk_cuda_set_math returns TK_OK or TK_EINVAL (an
   unknown mode; the mode is unchanged); it is plain global state: set it before the GEMMs
   of other host threads start. The CPU path ignores it (always fp32). Works without CUDA
   too (it only records the mode). */
TKDEF int tk_cuda_set_math(int math);
TKDEF int tk_cuda_get_math(void);
/* Device memory, for programs that keep their buffers on the device and call the plain
   ops (which route device buffers to the _cuda twins). Always declared; the CUDA bodies
   are in cuda/tensor.cuh, and without nvcc there is no device memory:
     tk_device_alloc   *ptr = cudaMalloc(bytes). ptr NULL or bytes 0: TK_EINVAL; without
                       CUDA TK_ENOCUDA; the device out of memory TK_ENOMEM, another
                       cudaMalloc failure (no device or driver) TK_ECUDA, each with the
                       CUDA message. *ptr is NULL on any error (when ptr is not NULL).
     tk_device_free    cudaFree(ptr); NULL is a no-op; a no-op without CUDA.
     tk_copy           dst <- src, bytes, in any direction (host or device on either side,
                       found from the pointers), synchronous: done when it returns. Two
                       host buffers (always, without CUDA) are copied with memcpy. bytes 0
                       does nothing (TK_OK); a NULL pointer with bytes > 0 is TK_EINVAL.
                       dst and src must not overlap.
     tk_fill_zero      dst (bytes) = 0: memset on the host, cudaMemset on the device;
                       synchronous; bytes 0 does nothing, NULL with bytes > 0 TK_EINVAL.
     tk_copy_async     dst <- src, bytes, queued on `stream` (a cudaStream_t, NULL: the
                       default stream) without a host wait: for device -> device and host
                       -> device copies. dst is device memory; src device or host memory
                       (cudaMemcpyAsync with cudaMemcpyDefault: the runtime finds the sides
                       by unified addressing; nothing here queries the pointers, so a host
                       dst is not detected: copies INTO host memory take tk_copy, which
                       returns when the host may read them). Stream order makes the bytes
                       visible to every later op on the same stream; the host sees them
                       only through a later synchronising read (tk_copy to the host,
                       tk_device_synchronize). The source: device memory must not be
                       written by other streams until the copy ran; a pageable host source
                       is staged by the runtime before the call returns (the host may
                       reuse it at once), a page-locked one (cudaMallocHost) is read when
                       the stream reaches the copy (keep it unchanged until then). Without
                       CUDA there is no device memory: a memcpy of host memory, done on
                       return. bytes 0 does nothing; a NULL pointer with bytes > 0 is
                       TK_EINVAL; an argument the runtime refuses is TK_ECUDA (a fault in
                       the copy itself surfaces at the next synchronising call).
     tk_copy_to_host   dst (host memory) <- src (device memory), bytes: one cudaMemcpyAsync
                       (device to host) queued on `stream` after its earlier work, then a wait
                       for that stream (cudaStreamSynchronize): done when it returns, the
                       host may read dst. Nothing queries the pointers (tk_copy asks the
                       driver where both live): the caller knows src is device memory. A
                       pending fault of the stream's work is returned as TK_ECUDA. Without
                       CUDA a memcpy of host memory. bytes 0 does nothing; a NULL pointer
                       with bytes > 0 is TK_EINVAL.
     tk_fill_zero_async  dst (bytes, device memory) = 0, cudaMemsetAsync on `stream`, no
                       host wait (visible as tk_copy_async's bytes are); without CUDA a
                       memset of host memory. bytes 0 does nothing, NULL with bytes > 0
                       TK_EINVAL, a host dst in a CUDA build TK_ECUDA.
     tk_is_device      1 when p is device (or managed) memory, else 0 (0 without CUDA).
     tk_device_synchronize  waits for the device; a pending CUDA error (a failed launch,
                       a fault in a kernel) is returned as TK_ECUDA with its message and
                       cleared where CUDA allows. TK_OK without CUDA. */
TKDEF int tk_device_alloc(void **ptr, size_t bytes);
TKDEF void tk_device_free(void *ptr);
TKDEF int tk_copy(void *dst, const void *src, size_t bytes);
TKDEF int tk_fill_zero(void *dst, size_t bytes);
TKDEF int tk_copy_async(void *dst, const void *src, size_t bytes, tk_stream stream);
TKDEF int tk_fill_zero_async(void *dst, size_t bytes, tk_stream stream);
TKDEF int tk_copy_to_host(void *dst, const void *src, size_t bytes, tk_stream stream);
TKDEF int tk_is_device(const void *p);
TKDEF int tk_device_synchronize(void);
#define TK__CUDA_DECLARE(ret, name, params) TKDEF ret name params;
#define TK__CUDA_OPS(X)                                                                         \
    X(int, tk_sgemm_cuda, (int transA, int transB, int M, int N, int K, float alpha,            \
                           const float *A, int lda, const float *B, int ldb, float beta,        \
                           float *C, int ldc, tk_stream stream))                                \
    X(int, tk_matmul_forward_cuda, (float *out, const float *inp, const float *W,               \
                                    const float *b, int N, int C, int OC, tk_stream stream))    \
    X(int, tk_matmul_backward_cuda, (float *dinp, float *dW, float *db, const float *dout,      \
                                     const float *inp, const float *W, int N, int C, int OC,    \
                                     tk_stream stream))                                         \
    X(int, tk_embedding_forward_cuda, (float *out, const int *ids, const float *wte,            \
                                       const float *wpe, int B, int T, int C, int V,            \
                                       tk_stream stream))                                       \
    X(int, tk_embedding_backward_cuda, (float *dwte, float *dwpe, const float *dout,            \
                                        const int *ids, int B, int T, int C, int V,             \
                                        tk_stream stream))                                      \
    /* The deferred form of the two above and of the in-place cross-entropy pair below: with   \
       status NULL exactly the plain function (the ids / targets range-checked by a small       \
       kernel whose flag is copied to the host: a host wait, TK_ERANGE with nothing written).   \
       With status a device int nothing waits: the same check runs on the device and sets       \
       *status to 1 when an index is outside [0, V) (the caller zeroes it and reads it when it  \
       next synchronises, as tk_attention_cuda_config.status; it discards what the calls wrote  \
       while it was nonzero). Nothing is read or written out of bounds: a bad index gives a     \
       zero row (embedding forward), no dwte term (backward), a NaN loss (CE forward) and no    \
       target term (CE backward). A status that is not device memory is TK_EINVAL. */          \
    X(int, tk_embedding_forward_cuda_ex, (float *out, const int *ids, const float *wte,         \
                                          const float *wpe, int B, int T, int C, int V,         \
                                          int *status, tk_stream stream))                       \
    X(int, tk_embedding_backward_cuda_ex, (float *dwte, float *dwpe, const float *dout,         \
                                           const int *ids, int B, int T, int C, int V,          \
                                           int *status, tk_stream stream))                      \
    X(int, tk_layernorm_forward_cuda, (float *out, float *mean, float *rstd, const float *inp,  \
                                       const float *w, const float *b, int N, int C, float eps, \
                                       tk_stream stream))                                       \
    X(int, tk_layernorm_backward_cuda, (float *dinp, float *dw, float *db, const float *dout,   \
                                        const float *inp, const float *w, const float *mean,    \
                                        const float *rstd, int N, int C, tk_stream stream))     \
    X(int, tk_gelu_forward_cuda, (float *out, const float *inp, size_t n, tk_stream stream))    \
    X(int, tk_gelu_backward_cuda, (float *dinp, const float *inp, const float *dout, size_t n,  \
                                   tk_stream stream))                                           \
    /* relu2, silu, gated relu2, rope: the CPU ops' shapes, validation and semantics (the       \
       backward functions accumulate), device buffers. */                                       \
    X(int, tk_relu2_forward_cuda, (float *out, const float *inp, size_t n, tk_stream stream))   \
    X(int, tk_relu2_backward_cuda, (float *dinp, const float *inp, const float *dout, size_t n, \
                                    tk_stream stream))                                          \
    X(int, tk_silu_forward_cuda, (float *out, const float *inp, size_t n, tk_stream stream))    \
    X(int, tk_silu_backward_cuda, (float *dinp, const float *inp, const float *dout, size_t n,  \
                                   tk_stream stream))                                           \
    X(int, tk_relu2_gated_forward_cuda, (float *out, const float *inp, int N, int F,            \
                                         tk_stream stream))                                     \
    X(int, tk_relu2_gated_backward_cuda, (float *dinp, const float *inp, const float *dout,     \
                                          int N, int F, tk_stream stream))                      \
    X(int, tk_rope_cuda, (float *x, int B, int H, int T, int D, float base, int inverse,        \
                          tk_stream stream))                                                    \
    X(int, tk_softmax_forward_cuda, (float *out, const float *inp, int N, int C,                \
                                     tk_stream stream))                                         \
    /* probs (N,V) softmax (may be NULL); losses (N) per-row smoothed loss; ce (N) per-row      \
       pure CE (may be NULL). Means are the caller's reduction (device or host). */             \
    X(int, tk_crossentropy_forward_cuda, (float *probs, float *losses, float *ce,               \
                                          const float *logits, const int *targets, int N,       \
                                          int V, float eps, tk_stream stream))                  \
    X(int, tk_crossentropy_backward_cuda, (float *dlogits, const float *probs,                  \
                                           const int *targets, int N, int V, float eps,         \
                                           float dloss, tk_stream stream))                      \
    /* The in-place cross-entropy pair on the device (tk_crossentropy_forward_inplace /         \
       tk_crossentropy_backward_inplace: same contracts; losses, ce device or NULL). The        \
       targets are range-checked first by a small kernel whose flag is copied to the host       \
       (the call synchronises the stream): a bad target is TK_ERANGE with nothing written. */   \
    X(int, tk_crossentropy_forward_inplace_cuda, (float *logits, float *losses, float *ce,      \
                                                  const int *targets, int N, int V, float eps,  \
                                                  tk_stream stream))                            \
    X(int, tk_crossentropy_backward_inplace_cuda, (float *probs, const int *targets, int N,     \
                                                   int V, float eps, float dloss,               \
                                                   tk_stream stream))                           \
    X(int, tk_crossentropy_forward_inplace_cuda_ex, (float *logits, float *losses, float *ce,   \
                                                     const int *targets, int N, int V,          \
                                                     float eps, int *status,                    \
                                                     tk_stream stream))                         \
    X(int, tk_crossentropy_backward_inplace_cuda_ex, (float *probs, const int *targets, int N,  \
                                                      int V, float eps, float dloss,            \
                                                      int *status, tk_stream stream))           \
    X(int, tk_adamw_update_cuda, (float *params, const float *grads, float *m, float *v,        \
                                  size_t n, const tk_adamw_config *cfg, long t,                 \
                                  tk_stream stream))                                            \
    /* RMSNorm, residual, head layouts: the CPU ops' shapes, validation and semantics (the      \
       backward functions accumulate), device buffers. Deterministic: the RMSNorm weight        \
       gradient is summed over rows in a fixed order (per row-chunk partials, then a second     \
       pass; scratch ceil(N/128)*C floats, the cached scratch), no float atomics. */           \
    X(int, tk_rmsnorm_forward_cuda, (float *out, float *rstd, const float *inp, const float *w, \
                                     int N, int C, float eps, tk_stream stream))                \
    X(int, tk_rmsnorm_backward_cuda, (float *dinp, float *dw, const float *dout,                \
                                      const float *inp, const float *w, const float *rstd,      \
                                      int N, int C, tk_stream stream))                          \
    X(int, tk_residual_forward_cuda, (float *out, const float *a, const float *b, size_t n,     \
                                      tk_stream stream))                                        \
    X(int, tk_residual_backward_cuda, (float *da, float *db, const float *dout, size_t n,       \
                                       tk_stream stream))                                       \
    /* Sigmoid, row scale / dot, the row-gated residual, the causal mean gate, row gather and   \
       combine: the CPU ops' shapes, validation and semantics (the backward functions and       \
       tk_rowdot accumulate), device buffers, idx device ints. Deterministic, no atomics:       \
       tk_rowdot and the combine's dw reduce one row per warp (double lanes, a fixed butterfly); \
       the causal gate runs one thread per (b,h) over time in double and one per (b,t) over the \
       heads in order (the CPU's arithmetic). Indices are not checked on the host (a copy       \
       would be needed): an index outside [0,nsrc) gives a zero row in tk_rows_gather_cuda and  \
       a skipped term in the combine (forward: nothing added; backward: no dsrc row, no dw      \
       change); nothing is read out of bounds. The dsrc scatter of                              \
       tk_rows_combine_backward_cuda needs distinct idx entries (repeats race). */              \
    X(int, tk_sigmoid_forward_cuda, (float *out, const float *x, size_t n, tk_stream stream))   \
    X(int, tk_scale_cuda, (float *out, const float *x, float alpha, size_t n,                   \
                           tk_stream stream))                                                   \
    X(int, tk_shift_cuda, (float *out, const float *x, float beta, size_t n, tk_stream stream)) \
    /* the causal depthwise convolution: one thread per output element (forward, dinp), one per \
       (j,c) for dw (double, the CPU's order): bit-identical to the CPU (each product meets its \
       running sum in an explicit fma on both sides, so no compiler's contraction changes a bit) */ \
    X(int, tk_causal_dwconv_forward_cuda, (float *out, const float *inp, const float *w, int B, \
                                           int T, int C, int K, int accumulate,                 \
                                           tk_stream stream))                                   \
    X(int, tk_causal_dwconv_backward_cuda, (float *dinp, float *dw, const float *dout,          \
                                            const float *inp, const float *w, int B, int T,     \
                                            int C, int K, tk_stream stream))                    \
    X(int, tk_sigmoid_backward_cuda, (float *dx, const float *y, const float *dy, size_t n,     \
                                      tk_stream stream))                                        \
    X(int, tk_rowscale_cuda, (float *out, const float *x, const float *s, int N, int C,         \
                              tk_stream stream))                                                \
    X(int, tk_rowdot_cuda, (float *out, const float *a, const float *b, int N, int C,           \
                            tk_stream stream))                                                  \
    X(int, tk_residual_rows_forward_cuda, (float *out, const float *x, const float *br,         \
                                           const float *s, int N, int C, tk_stream stream))     \
    X(int, tk_causal_mean_gate_forward_cuda, (float *g, float *sig, const float *z, int B,      \
                                              int T, int H, tk_stream stream))                  \
    X(int, tk_causal_mean_gate_backward_cuda, (float *dz, const float *dg, const float *sig,    \
                                               int B, int T, int H, tk_stream stream))          \
    X(int, tk_rows_gather_cuda, (float *out, const float *src, int nsrc, const int *idx, int n, \
                                 int C, tk_stream stream))                                      \
    X(int, tk_rows_combine_forward_cuda, (float *out, const float *src, int nsrc,               \
                                          const int *idx, const float *w, int N, int K, int C,  \
                                          int accumulate, tk_stream stream))                    \
    X(int, tk_rows_combine_backward_cuda, (float *dsrc, float *dw, const float *dout,           \
                                           const float *src, int nsrc, const int *idx,          \
                                           const float *w, int N, int K, int C,                 \
                                           tk_stream stream))                                   \
    /* Seeded dropout on the device: tk_dropout_seeded_forward's contract and hash (mask and    \
       out bit-identical to the CPU's), and tk_dropout_backward's (dinp += dout * mask /        \
       (1-p), accumulating; bit-identical too). out, mask, inp / dinp, dout, mask device. */    \
    X(int, tk_dropout_seeded_forward_cuda, (float *out, uint8_t *mask, const float *inp,        \
                                            size_t n, float p, uint64_t seed,                   \
                                            tk_stream stream))                                  \
    X(int, tk_dropout_backward_cuda, (float *dinp, const float *dout, const uint8_t *mask,      \
                                      size_t n, float p, tk_stream stream))                     \
    X(int, tk_split_heads_forward_cuda, (float *q, float *k, float *v, const float *qkv, int B, \
                                         int T, int H, int D, tk_stream stream))                \
    X(int, tk_split_heads_backward_cuda, (float *dqkv, const float *dq, const float *dk,        \
                                          const float *dv, int B, int T, int H, int D,          \
                                          tk_stream stream))                                    \
    X(int, tk_merge_heads_forward_cuda, (float *out, const float *inp, int B, int T, int H,     \
                                         int D, tk_stream stream))                              \
    X(int, tk_merge_heads_backward_cuda, (float *dinp, const float *dout, int B, int T, int H,  \
                                          int D, tk_stream stream))                             \
    /* g (n) device; *norm (a HOST float) receives the L2 norm: squares summed in double, a     \
       fixed grid (a function of n only) of per-block partials reduced by one block in a fixed  \
       order, so the result is bit-identical run to run. Synchronises the stream (the norm is   \
       copied to the host). A device pointer for norm is TK_EINVAL. */                          \
    X(int, tk_grad_norm_cuda, (const float *g, size_t n, float *norm, tk_stream stream))        \
    /* tk_clip_grad_norm on the device: the norm is computed as tk_grad_norm_cuda and the       \
       scale max_norm / norm applied by a kernel that reads the norm on the device (nothing     \
       else waits for the host). norm_out: a HOST float or NULL; when given, the call           \
       synchronises the stream to fill it. A non-finite norm leaves g unchanged. */             \
    X(int, tk_clip_grad_norm_cuda, (float *g, size_t n, float max_norm, float *norm_out,        \
                                    tk_stream stream))                                          \
    /* Flash-style causal attention on the device: the logits of tk_attention_forward,          \
         logits[b,h,i,j] = (q_i . k_j) / (sqrt(D) * temp[h]) + bias[(h,)i,j],  j <= i,          \
       without any (T,T) store. out, q, k, v: (B,H,T,D) device; lse (B,H,T) device, written:    \
       each row's log-sum-exp of its logits (what the backward needs instead of probs);         \
       bias: NULL, (T,T) shared (bias_per_head 0) or (H,T,T) (1), device; -INFINITY entries     \
       mask (sliding windows); temp: NULL or (H) device, finite and > 0 (copied to the host     \
       to be checked). D <= 128. A row whose logits are not finite or all -inf gives TK_EINVAL  \
       (one 4-byte device-to-host copy per call: the call synchronises the stream). */          \
    X(int, tk_attention_forward_cuda, (float *out, float *lse, const float *q, const float *k,  \
                                       const float *v, const float *bias, int bias_per_head,    \
                                       const float *temp, int B, int H, int T, int D,           \
                                       tk_stream stream))                                       \
    /* dq, dk, dv (B,H,T,D) += ; dbias (as bias) += (summed over batch, and over heads when     \
       shared), may be NULL; dtemp (H) += , may be NULL. dout, out, lse from the forward; bias  \
       and temp as given to the forward. Deterministic (no atomics). Scratch: B*H*T + B*H*      \
       ceil(T/32) floats, the cached scratch (tk_cuda_release). */                              \
    X(int, tk_attention_backward_cuda, (float *dq, float *dk, float *dv, float *dbias,          \
                                        float *dtemp, const float *dout, const float *out,      \
                                        const float *lse, const float *q, const float *k,       \
                                        const float *v, const float *bias, int bias_per_head,   \
                                        const float *temp, int B, int H, int T, int D,          \
                                        tk_stream stream))
TK__CUDA_OPS(TK__CUDA_DECLARE)
/* The same attention with a configuration: the arithmetic (math) and grouped-query
   attention (kv_heads). The two functions above are these with the default config.
     math      TK_MATH_FP32 (default): fp32 SIMT, parity 1e-5 / 1e-4 with the CPU.
               TK_MATH_TF32, TK_MATH_BF16: QK^T, PV and the four backward products on
               tensor cores (WMMA; inputs rounded to tf32 / bf16 when staged into shared
               memory, fp32 accumulation, softmax statistics and lse in fp32), parity 2e-2
               in the max-norm (the norms are stated in cuda/tensor.cuh). Needs D a
               multiple of 16 (16..128), a device of compute capability 8.0 or newer and
               enough opt-in shared memory for D (else TK_EINVAL, nothing launched).
     kv_heads  0 (default): H, no grouping. Else 1..H with H % kv_heads == 0: k, v (and
               in the backward dk, dv) are (B, kv_heads, T, D); query head h reads kv
               head h / (H / kv_heads) in place (nothing is repeated in memory). dk, dv
               are summed over each group's query heads in a fixed order (no atomics).
   Buffers stay fp32 in every mode. cfg NULL means tk_attention_cuda_config_default().
   The kernels and shared-memory budgets are described in cuda/tensor.cuh. */
#define TK_MATH_FP32 0 /* SIMT fp32, the exact-parity path (default) */
#define TK_MATH_TF32 1 /* tensor cores, tf32 inputs, fp32 accumulation */
#define TK_MATH_BF16 2 /* tensor cores, bf16 inputs, fp32 accumulation */
/* Backward only, an entropy term: with ent_coef != 0 the backward also adds the gradient of
   ent_coef * sum over the B*H*T rows of the row entropy H_i = -sum_j p_ij ln p_ij
   (dlogit_ij = -ent_coef p_ij (ln p_ij + H_i)) to dq, dk, dbias and dtemp (what an entropy
   penalty on the attention, e.g. GAC's entropy band, differentiates to). ent_rows: each
   row's H (device; (B,H,T) with stride ent_stride floats: the forward's stats with
   TK_ATTN_NSTATS). fp32 math only (TK_EINVAL with tf32 / bf16). */
/* Deferred checks: with status NULL (the default) an entry checks on the host what only the
   device can see, a host wait each: the per-head temperatures (finite, > 0; forward and
   backward) and, after the forward, that no row of logits + bias was non-finite. With status
   a device int, nothing waits: those checks run on the device and leave a nonzero value in
   *status when one fails (the caller zeroes it, reads it when it next synchronises, and
   discards whatever the calls wrote while it was nonzero: a training step is then a failed
   step). The entry still refuses at once, on the host, every argument it can check there. */
typedef struct tk_attention_cuda_config {
    int math;     /* TK_MATH_FP32 */
    int kv_heads; /* 0: H (no GQA) */
    float ent_coef;        /* 0: no entropy term */
    const float *ent_rows; /* NULL */
    int ent_stride;        /* 0 */
    int *status;           /* NULL: the checks above wait on the host; a device int: deferred */
} tk_attention_cuda_config;
TKDEF tk_attention_cuda_config tk_attention_cuda_config_default(void);
#define TK__CUDA_ATTN(X)                                                                        \
    /* out, q: (B,H,T,D); k, v: (B,Hkv,T,D) with Hkv = cfg->kv_heads (or H); lse (B,H,T) */     \
    X(int, tk_attention_forward_cuda_ex, (float *out, float *lse, const float *q,               \
                                          const float *k, const float *v, const float *bias,    \
                                          int bias_per_head, const float *temp, int B, int H,   \
                                          int T, int D, const tk_attention_cuda_config *cfg,    \
                                          tk_stream stream))                                    \
    /* The forward of tk_attention_forward_cuda_ex that also writes each softmax row's moments, \
       as tk_attention_forward_stats does on the host (what ceas.h's                            \
       ceas_attention_observables_from_moments(_cuda) turns into CEAS observables): stats       \
       (B,H,T,TK_ATTN_NSTATS) device, per row i of (b,h), over the visible keys j <= i (-inf    \
       bias entries not counted) of x_j = alpha q_i.k_j + bias_ij and p = softmax(x):           \
         [0] H = -sum p ln p  [1] E_p[x]  [2] Var_p[x]  [3] mean_j x_j  [4] var_j x_j           \
         (population)  [5] the number of keys counted.                                          \
       Gathered in the kernel's softmax pass, online over the key tiles with the running max    \
       (float sums per tile, double across tiles, shifted when the max moves), from the fp32    \
       logits in every math mode: nothing of size T x T is stored, out and lse are bit-identical \
       to tk_attention_forward_cuda_ex's. stats NULL: exactly tk_attention_forward_cuda_ex.     \
       Parity with tk_attention_forward_stats: fp32 1e-5 relative per field (above a floor of   \
       1e-5 of the field's largest |value| in the call), tf32 / bf16 2e-2 in the max-norm per   \
       field (the logits come from rounded q, k); the count exact. */                           \
    X(int, tk_attention_forward_stats_cuda, (float *out, float *lse, float *stats,              \
                                             const float *q, const float *k, const float *v,    \
                                             const float *bias, int bias_per_head,              \
                                             const float *temp, int B, int H, int T, int D,     \
                                             const tk_attention_cuda_config *cfg,               \
                                             tk_stream stream))                                 \
    /* dq (B,H,T,D) +=; dk, dv (B,Hkv,T,D) +=; the rest as tk_attention_backward_cuda. Give     \
       the same cfg as the forward (the lse of one math mode is valid input to another). */     \
    X(int, tk_attention_backward_cuda_ex, (float *dq, float *dk, float *dv, float *dbias,       \
                                           float *dtemp, const float *dout, const float *out,   \
                                           const float *lse, const float *q, const float *k,    \
                                           const float *v, const float *bias,                   \
                                           int bias_per_head, const float *temp, int B, int H,  \
                                           int T, int D, const tk_attention_cuda_config *cfg,   \
                                           tk_stream stream))
TK__CUDA_ATTN(TK__CUDA_DECLARE)

#ifdef __cplusplus
}
#endif
#endif /* TENSOR_H */

/* ======================================================================== */
#ifdef TENSOR_IMPLEMENTATION
#ifndef TENSOR_IMPLEMENTATION_DONE
#define TENSOR_IMPLEMENTATION_DONE

/* GCC keeps IEEE exception semantics by default (-ftrapping-math): a loop with a
   compare-and-select around a float expression (a clamp before an exp, say) is then
   not if-converted, hence not vectorised, on AVX2 (AVX-512 gets masked instructions).
   Nothing here reads floating-point exception flags, so the implementation is compiled
   without that constraint; values are unchanged (this is not -ffast-math). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__INTEL_COMPILER)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#define TENSOR__PUSHED_NO_TRAPPING 1
#endif

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
/* keeps a small hot loop out of its (large) caller so that the caller's inlining
   budget cannot leave tk__expf un-inlined (and the loop scalar) inside it */
#if defined(__GNUC__) || defined(__clang__)
#define TK__NOINLINE __attribute__((noinline))
#else
#define TK__NOINLINE
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

/* IEEE tests on the bits: they survive -ffast-math / -Ofast, which fold x == x and
   x - x == 0 to true (and would let NaN/Inf through every check) */
static int tk__finite(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7F800000u) != 0x7F800000u;
}
static int tk__isnan(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7FFFFFFFu) > 0x7F800000u;
}
static int tk__finite_d(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7FF0000000000000ULL) != 0x7FF0000000000000ULL;
}

/* ---------------------------------------------------------------- GEMM */
/* tk_sgemm, the blocked SIMD GEMM.

   Design (GotoBLAS / BLIS layering, row-major C):
     for jc over N in steps of NC            B panel  op(B)[pc:pc+KC, jc:jc+NC] packed,
       for pc over K in steps of KC            shared by the threads (lives in L3)
         pack the B panel cooperatively
         for ic over this thread's rows      A block  op(A)[ic:ic+MC, pc:pc+KC] packed,
           pack the A block                    private to the thread (lives in L2)
           for jr over NR column panels      B micro-panel (KC x NR) stays in L1
             for ir over MR row panels
               micro-kernel: C[ir:ir+MR, jr:jr+NR] (+)= A micro-panel . B micro-panel
   Few rows (M <= MC) against many columns (N > NC), a decoding step's head: op(A) is
   packed once and each thread packs its own L2-sized chunks of op(B) (tk__gemm_rows),
   the same tiles and K order, so the same bits as the loops above.
   Packing pads partial panels with zeros, so the micro-kernel always runs a full
   MR x NR x kc product in registers; it writes back only the valid mr x nr corner
   (masked stores), as alpha * acc + beta * C for the first K block (beta == 0 never
   reads C) and C + alpha * acc for the later ones.

   Micro-kernels (chosen at compile time; TK_GEMM_NO_SIMD keeps only the scalar one):
     AVX-512F    MR = 12, NR = 32: 24 zmm accumulators
     AVX2 + FMA  MR =  6, NR = 16: 12 ymm accumulators
     scalar C    MR =  4, NR = 16: portable, also selectable at run time
                 (tk_gemm_set_kernel(TK_GEMM_SCALAR)) so the tests cover it.

   Determinism: the tile grid (MR x NR tiles, KC blocks of K) does not depend on the
   thread count; threads split whole tiles, so every C element is computed by one
   thread with the same instruction sequence and K order. Results are bit-identical
   run to run AND for any number of OpenMP threads (for a given kernel). */

#if !defined(TK_GEMM_NO_SIMD) && defined(__AVX512F__)
#include <immintrin.h>
#define TK__GEMM_HAVE_AVX512 1
#elif !defined(TK_GEMM_NO_SIMD) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TK__GEMM_HAVE_AVX2 1
#endif

/* Cache blocking. MC must be a multiple of every MR (12, 6, 4) and NC of every NR
   (32, 16).
     AVX-512 (tuned on Zen 4: L1d 32 KiB, L2 1 MiB; also Sapphire/Emerald Rapids):
       KC 512, MC 96.
     AVX2 (Zen 3: L1d 32 KiB, L2 512 KiB; Haswell..Golden Cove): KC 384, MC 144: the
       B micro-panel KC x 16 (24 KiB) stays in a 32 KiB L1 beside the streaming A
       micro-panel (9 KiB), the A block MC x KC (216 KiB) in half of a 512 KiB L2.
       KC 512 put the whole 32 KiB L1 under the B micro-panel. */
#ifndef TK__GEMM_KC
#if defined(TK__GEMM_HAVE_AVX512)
#define TK__GEMM_KC 512
#else
#define TK__GEMM_KC 384
#endif
#endif
#ifndef TK__GEMM_MC
#if defined(TK__GEMM_HAVE_AVX512)
#define TK__GEMM_MC 96
#else
#define TK__GEMM_MC 144
#endif
#endif
#ifndef TK__GEMM_NC
#define TK__GEMM_NC 3072
#endif
/* Below this many multiply-adds (M*N*K) a direct loop beats packing. */
#define TK__GEMM_SMALL 4096.0
/* Below this many multiply-adds the GEMM runs on one thread. */
#define TK__GEMM_PAR_MIN (48.0 * 48.0 * 48.0)

typedef void (*tk__gemm_ukr_fn)(int kc, const float *TK_RESTRICT a,
                                const float *TK_RESTRICT b, float *c, size_t ldc,
                                int mr, int nr, float alpha, float beta);
typedef struct tk__gemm_kernel {
    int mr, nr;
    tk__gemm_ukr_fn fn;
    const char *name;
} tk__gemm_kernel;

/* ---- portable scalar micro-kernel: MR = 4, NR = 16 ---------------------- */
#define TK__GEMM_SMR 4
#define TK__GEMM_SNR 16
static void tk__gemm_ukr_scalar(int kc, const float *TK_RESTRICT a,
                                const float *TK_RESTRICT b, float *c, size_t ldc,
                                int mr, int nr, float alpha, float beta)
{
    float acc0[TK__GEMM_SNR], acc1[TK__GEMM_SNR], acc2[TK__GEMM_SNR], acc3[TK__GEMM_SNR];
    float *accs[TK__GEMM_SMR];
    int i, j, p;
    for (j = 0; j < TK__GEMM_SNR; j++) acc0[j] = acc1[j] = acc2[j] = acc3[j] = 0.0f;
    for (p = 0; p < kc; p++) {
        const float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
        for (j = 0; j < TK__GEMM_SNR; j++) {
            const float bj = b[j];
            acc0[j] += a0 * bj;
            acc1[j] += a1 * bj;
            acc2[j] += a2 * bj;
            acc3[j] += a3 * bj;
        }
        a += TK__GEMM_SMR;
        b += TK__GEMM_SNR;
    }
    accs[0] = acc0;
    accs[1] = acc1;
    accs[2] = acc2;
    accs[3] = acc3;
    for (i = 0; i < mr; i++) {
        float *cr = c + (size_t)i * ldc;
        const float *acc = accs[i];
        if (beta == 0.0f)
            for (j = 0; j < nr; j++) cr[j] = alpha * acc[j];
        else
            for (j = 0; j < nr; j++) cr[j] = alpha * acc[j] + beta * cr[j];
    }
}

#if defined(TK__GEMM_HAVE_AVX512)
/* ---- AVX-512F micro-kernel: MR = 12, NR = 32 ---------------------------- */
#define TK__GEMM_AVX512_STEP(off)                                                   \
    do {                                                                            \
        const __m512 b0_ = _mm512_load_ps(b + (off) * 32);                          \
        const __m512 b1_ = _mm512_load_ps(b + (off) * 32 + 16);                     \
        const float *ap_ = a + (off) * 12;                                          \
        __m512 av_;                                                                 \
        av_ = _mm512_set1_ps(ap_[0]);                                               \
        c0_0 = _mm512_fmadd_ps(av_, b0_, c0_0); c0_1 = _mm512_fmadd_ps(av_, b1_, c0_1); \
        av_ = _mm512_set1_ps(ap_[1]);                                               \
        c1_0 = _mm512_fmadd_ps(av_, b0_, c1_0); c1_1 = _mm512_fmadd_ps(av_, b1_, c1_1); \
        av_ = _mm512_set1_ps(ap_[2]);                                               \
        c2_0 = _mm512_fmadd_ps(av_, b0_, c2_0); c2_1 = _mm512_fmadd_ps(av_, b1_, c2_1); \
        av_ = _mm512_set1_ps(ap_[3]);                                               \
        c3_0 = _mm512_fmadd_ps(av_, b0_, c3_0); c3_1 = _mm512_fmadd_ps(av_, b1_, c3_1); \
        av_ = _mm512_set1_ps(ap_[4]);                                               \
        c4_0 = _mm512_fmadd_ps(av_, b0_, c4_0); c4_1 = _mm512_fmadd_ps(av_, b1_, c4_1); \
        av_ = _mm512_set1_ps(ap_[5]);                                               \
        c5_0 = _mm512_fmadd_ps(av_, b0_, c5_0); c5_1 = _mm512_fmadd_ps(av_, b1_, c5_1); \
        av_ = _mm512_set1_ps(ap_[6]);                                               \
        c6_0 = _mm512_fmadd_ps(av_, b0_, c6_0); c6_1 = _mm512_fmadd_ps(av_, b1_, c6_1); \
        av_ = _mm512_set1_ps(ap_[7]);                                               \
        c7_0 = _mm512_fmadd_ps(av_, b0_, c7_0); c7_1 = _mm512_fmadd_ps(av_, b1_, c7_1); \
        av_ = _mm512_set1_ps(ap_[8]);                                               \
        c8_0 = _mm512_fmadd_ps(av_, b0_, c8_0); c8_1 = _mm512_fmadd_ps(av_, b1_, c8_1); \
        av_ = _mm512_set1_ps(ap_[9]);                                               \
        c9_0 = _mm512_fmadd_ps(av_, b0_, c9_0); c9_1 = _mm512_fmadd_ps(av_, b1_, c9_1); \
        av_ = _mm512_set1_ps(ap_[10]);                                              \
        c10_0 = _mm512_fmadd_ps(av_, b0_, c10_0); c10_1 = _mm512_fmadd_ps(av_, b1_, c10_1); \
        av_ = _mm512_set1_ps(ap_[11]);                                              \
        c11_0 = _mm512_fmadd_ps(av_, b0_, c11_0); c11_1 = _mm512_fmadd_ps(av_, b1_, c11_1); \
    } while (0)

/* Write back one row: c[0:nr] = alpha * acc + beta * c (beta == 0: c not read). */
#define TK__GEMM_AVX512_ROW(i)                                                      \
    do {                                                                            \
        if ((i) < mr) {                                                             \
            float *cr_ = c + (size_t)(i) * ldc;                                     \
            __m512 r0_ = _mm512_mul_ps(va, c##i##_0), r1_ = _mm512_mul_ps(va, c##i##_1); \
            if (beta != 0.0f) {                                                     \
                r0_ = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, cr_), r0_);     \
                r1_ = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, cr_ + 16), r1_); \
            }                                                                       \
            _mm512_mask_storeu_ps(cr_, m0, r0_);                                    \
            _mm512_mask_storeu_ps(cr_ + 16, m1, r1_);                               \
        }                                                                           \
    } while (0)

static void tk__gemm_ukr_avx512(int kc, const float *TK_RESTRICT a,
                                const float *TK_RESTRICT b, float *c, size_t ldc,
                                int mr, int nr, float alpha, float beta)
{
    __m512 c0_0 = _mm512_setzero_ps(), c0_1 = _mm512_setzero_ps();
    __m512 c1_0 = c0_0, c1_1 = c0_0, c2_0 = c0_0, c2_1 = c0_0, c3_0 = c0_0, c3_1 = c0_0;
    __m512 c4_0 = c0_0, c4_1 = c0_0, c5_0 = c0_0, c5_1 = c0_0, c6_0 = c0_0, c6_1 = c0_0;
    __m512 c7_0 = c0_0, c7_1 = c0_0, c8_0 = c0_0, c8_1 = c0_0, c9_0 = c0_0, c9_1 = c0_0;
    __m512 c10_0 = c0_0, c10_1 = c0_0, c11_0 = c0_0, c11_1 = c0_0;
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 m0 = (__mmask16)(nr >= 16 ? 0xFFFFu : (1u << nr) - 1u);
    const __mmask16 m1 = (__mmask16)(nr >= 32 ? 0xFFFFu : nr > 16 ? (1u << (nr - 16)) - 1u : 0u);
    int p, i;
    for (i = 0; i < mr; i++) { /* a row of 32 floats spans three lines unless aligned */
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + 16), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + 31), _MM_HINT_T0);
    }
    for (p = 0; p + 4 <= kc; p += 4) {
        TK__GEMM_AVX512_STEP(0);
        TK__GEMM_AVX512_STEP(1);
        TK__GEMM_AVX512_STEP(2);
        TK__GEMM_AVX512_STEP(3);
        a += 4 * 12;
        b += 4 * 32;
    }
    for (; p < kc; p++) {
        TK__GEMM_AVX512_STEP(0);
        a += 12;
        b += 32;
    }
    TK__GEMM_AVX512_ROW(0); TK__GEMM_AVX512_ROW(1); TK__GEMM_AVX512_ROW(2);
    TK__GEMM_AVX512_ROW(3); TK__GEMM_AVX512_ROW(4); TK__GEMM_AVX512_ROW(5);
    TK__GEMM_AVX512_ROW(6); TK__GEMM_AVX512_ROW(7); TK__GEMM_AVX512_ROW(8);
    TK__GEMM_AVX512_ROW(9); TK__GEMM_AVX512_ROW(10); TK__GEMM_AVX512_ROW(11);
}
#undef TK__GEMM_AVX512_STEP
#undef TK__GEMM_AVX512_ROW
#endif /* TK__GEMM_HAVE_AVX512 */

#if defined(TK__GEMM_HAVE_AVX2)
/* ---- AVX2 + FMA micro-kernel: MR = 6, NR = 16 --------------------------- */
#define TK__GEMM_AVX2_STEP()                                                        \
    do {                                                                            \
        const __m256 b0_ = _mm256_load_ps(b);                                       \
        const __m256 b1_ = _mm256_load_ps(b + 8);                                   \
        const float *ap_ = a;                                                       \
        __m256 av_;                                                                 \
        av_ = _mm256_broadcast_ss(ap_ + 0);                                         \
        c0_0 = _mm256_fmadd_ps(av_, b0_, c0_0); c0_1 = _mm256_fmadd_ps(av_, b1_, c0_1); \
        av_ = _mm256_broadcast_ss(ap_ + 1);                                         \
        c1_0 = _mm256_fmadd_ps(av_, b0_, c1_0); c1_1 = _mm256_fmadd_ps(av_, b1_, c1_1); \
        av_ = _mm256_broadcast_ss(ap_ + 2);                                         \
        c2_0 = _mm256_fmadd_ps(av_, b0_, c2_0); c2_1 = _mm256_fmadd_ps(av_, b1_, c2_1); \
        av_ = _mm256_broadcast_ss(ap_ + 3);                                         \
        c3_0 = _mm256_fmadd_ps(av_, b0_, c3_0); c3_1 = _mm256_fmadd_ps(av_, b1_, c3_1); \
        av_ = _mm256_broadcast_ss(ap_ + 4);                                         \
        c4_0 = _mm256_fmadd_ps(av_, b0_, c4_0); c4_1 = _mm256_fmadd_ps(av_, b1_, c4_1); \
        av_ = _mm256_broadcast_ss(ap_ + 5);                                         \
        c5_0 = _mm256_fmadd_ps(av_, b0_, c5_0); c5_1 = _mm256_fmadd_ps(av_, b1_, c5_1); \
    } while (0)

#define TK__GEMM_AVX2_ROW(i)                                                        \
    do {                                                                            \
        if ((i) < mr) {                                                             \
            float *cr_ = c + (size_t)(i) * ldc;                                     \
            __m256 r0_ = _mm256_mul_ps(va, c##i##_0), r1_ = _mm256_mul_ps(va, c##i##_1); \
            if (beta != 0.0f) {                                                     \
                r0_ = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr_, m0), r0_);        \
                r1_ = _mm256_fmadd_ps(vb, _mm256_maskload_ps(cr_ + 8, m1), r1_);    \
            }                                                                       \
            _mm256_maskstore_ps(cr_, m0, r0_);                                      \
            _mm256_maskstore_ps(cr_ + 8, m1, r1_);                                  \
        }                                                                           \
    } while (0)

#define TK__GEMM_AVX2_FULLROW(i)                                                    \
    do {                                                                            \
        if ((i) < mr) {                                                             \
            float *cr_ = c + (size_t)(i) * ldc;                                     \
            __m256 r0_ = _mm256_mul_ps(va, c##i##_0), r1_ = _mm256_mul_ps(va, c##i##_1); \
            if (beta != 0.0f) {                                                     \
                r0_ = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr_), r0_);               \
                r1_ = _mm256_fmadd_ps(vb, _mm256_loadu_ps(cr_ + 8), r1_);           \
            }                                                                       \
            _mm256_storeu_ps(cr_, r0_);                                             \
            _mm256_storeu_ps(cr_ + 8, r1_);                                         \
        }                                                                           \
    } while (0)

static void tk__gemm_ukr_avx2(int kc, const float *TK_RESTRICT a,
                              const float *TK_RESTRICT b, float *c, size_t ldc,
                              int mr, int nr, float alpha, float beta)
{
    /* lanes j < n of mask(n) are set: load 8 ints starting at tbl + 8 - n */
    static const int tbl[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    __m256 c0_0 = _mm256_setzero_ps(), c0_1 = _mm256_setzero_ps();
    __m256 c1_0 = c0_0, c1_1 = c0_0, c2_0 = c0_0, c2_1 = c0_0;
    __m256 c3_0 = c0_0, c3_1 = c0_0, c4_0 = c0_0, c4_1 = c0_0, c5_0 = c0_0, c5_1 = c0_0;
    __m256 va, vb;
    __m256i m0, m1;
    int p, i, n0, n1;
    /* the C tile's lines, the row's first and last element: a row of 16 floats spans
       two lines unless C is 64-byte aligned (without the second, the write-back stalled
       on it: 10% of the kernel's time at 1024^3) */
    for (i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + (size_t)i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + (size_t)i * ldc + 15), _MM_HINT_T0);
    }
    /* one k per iteration: GCC's scheduler, given the 4-way unrolled body, hoisted the
       next steps' loads and spilled three accumulators (16 ymm registers hold exactly
       12 accumulators + 2 B vectors + 1 broadcast) */
    for (p = 0; p < kc; p++) {
        TK__GEMM_AVX2_STEP();
        a += 6;
        b += 16;
    }
    /* the write-back constants are made only now: live across the loop they took 4 of
       the 16 ymm registers and GCC spilled an accumulator to the stack in the loop */
    va = _mm256_set1_ps(alpha);
    vb = _mm256_set1_ps(beta);
    n0 = nr >= 8 ? 8 : nr;
    n1 = nr >= 16 ? 8 : nr > 8 ? nr - 8 : 0;
    if (nr == 16) { /* full rows: plain loads and stores (a masked 256-bit store,
                         vmaskmovps, is microcoded on AMD Zen 2/3, many times a plain one) */
        TK__GEMM_AVX2_FULLROW(0); TK__GEMM_AVX2_FULLROW(1); TK__GEMM_AVX2_FULLROW(2);
        TK__GEMM_AVX2_FULLROW(3); TK__GEMM_AVX2_FULLROW(4); TK__GEMM_AVX2_FULLROW(5);
        return;
    }
    m0 = _mm256_loadu_si256((const __m256i *)(const void *)(tbl + 8 - n0));
    m1 = _mm256_loadu_si256((const __m256i *)(const void *)(tbl + 8 - n1));
    TK__GEMM_AVX2_ROW(0); TK__GEMM_AVX2_ROW(1); TK__GEMM_AVX2_ROW(2);
    TK__GEMM_AVX2_ROW(3); TK__GEMM_AVX2_ROW(4); TK__GEMM_AVX2_ROW(5);
}
#undef TK__GEMM_AVX2_STEP
#undef TK__GEMM_AVX2_ROW
#undef TK__GEMM_AVX2_FULLROW
#endif /* TK__GEMM_HAVE_AVX2 */

static int tk__gemm_kernel_choice = TK_GEMM_AUTO;
#ifdef TK_USE_CBLAS
#ifdef TK_CBLAS_HEADER
#include TK_CBLAS_HEADER
#else
#include <cblas.h>
#endif
#endif

static tk__gemm_kernel tk__gemm_pick(void)
{
    tk__gemm_kernel k;
    k.mr = TK__GEMM_SMR;
    k.nr = TK__GEMM_SNR;
    k.fn = tk__gemm_ukr_scalar;
    k.name = "scalar";
    if (tk__gemm_kernel_choice == TK_GEMM_SCALAR) return k;
#if defined(TK__GEMM_HAVE_AVX512)
    k.mr = 12;
    k.nr = 32;
    k.fn = tk__gemm_ukr_avx512;
    k.name = "avx512";
#elif defined(TK__GEMM_HAVE_AVX2)
    k.mr = 6;
    k.nr = 16;
    k.fn = tk__gemm_ukr_avx2;
    k.name = "avx2";
#endif
    return k;
}

TKDEF void tk_gemm_set_kernel(int kernel)
{
    tk__gemm_kernel_choice = (kernel == TK_GEMM_SCALAR || kernel == TK_GEMM_BUILTIN)
                                 ? kernel
                                 : TK_GEMM_AUTO;
}

TKDEF const char *tk_gemm_kernel_name(void)
{
#ifdef TK_USE_CBLAS
    if (tk__gemm_kernel_choice == TK_GEMM_AUTO) return "cblas";
#endif
    return tk__gemm_pick().name;
}

/* ---- packing -------------------------------------------------------------- */
#if defined(TK__GEMM_HAVE_AVX512) || defined(TK__GEMM_HAVE_AVX2)
/* dst[c * ld + r] = src[r * ls + c] for r, c < 8 (an 8 x 8 transpose). */
static void tk__gemm_tr8x8(float *dst, size_t ld, const float *src, size_t ls)
{
    const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ls);
    const __m256 r2 = _mm256_loadu_ps(src + 2 * ls), r3 = _mm256_loadu_ps(src + 3 * ls);
    const __m256 r4 = _mm256_loadu_ps(src + 4 * ls), r5 = _mm256_loadu_ps(src + 5 * ls);
    const __m256 r6 = _mm256_loadu_ps(src + 6 * ls), r7 = _mm256_loadu_ps(src + 7 * ls);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    /* u0: column 0 (rows 0-3) | column 4; u1: 1 | 5; u2: 2 | 6; u3: 3 | 7 */
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(dst + ld, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(dst + 2 * ld, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(dst + 3 * ld, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(dst + 4 * ld, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(dst + 5 * ld, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(dst + 6 * ld, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(dst + 7 * ld, _mm256_permute2f128_ps(u3, u7, 0x31));
}

/* dst[c * ld + r] = src[r * ls + c] for r < 4, c < 8. */
static void tk__gemm_tr4x8(float *dst, size_t ld, const float *src, size_t ls)
{
    const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ls);
    const __m256 r2 = _mm256_loadu_ps(src + 2 * ls), r3 = _mm256_loadu_ps(src + 3 * ls);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    _mm_storeu_ps(dst, _mm256_castps256_ps128(u0));
    _mm_storeu_ps(dst + ld, _mm256_castps256_ps128(u1));
    _mm_storeu_ps(dst + 2 * ld, _mm256_castps256_ps128(u2));
    _mm_storeu_ps(dst + 3 * ld, _mm256_castps256_ps128(u3));
    _mm_storeu_ps(dst + 4 * ld, _mm256_extractf128_ps(u0, 1));
    _mm_storeu_ps(dst + 5 * ld, _mm256_extractf128_ps(u1, 1));
    _mm_storeu_ps(dst + 6 * ld, _mm256_extractf128_ps(u2, 1));
    _mm_storeu_ps(dst + 7 * ld, _mm256_extractf128_ps(u3, 1));
}

/* dst[c * ld + r] = src[r * ls + c] for r < 2, c < 8: the pairs (row 0, row 1) of each
   column are 64-bit units, stored as such (the AVX2 kernel's 6-row panels end in two
   rows, which were copied one float at a time). */
static void tk__gemm_tr2x8(float *dst, size_t ld, const float *src, size_t ls)
{
    const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ls);
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m128 a = _mm256_castps256_ps128(t0), b = _mm256_castps256_ps128(t1);
    const __m128 c = _mm256_extractf128_ps(t0, 1), d = _mm256_extractf128_ps(t1, 1);
    _mm_storel_pi((__m64 *)(void *)dst, a);
    _mm_storeh_pi((__m64 *)(void *)(dst + ld), a);
    _mm_storel_pi((__m64 *)(void *)(dst + 2 * ld), b);
    _mm_storeh_pi((__m64 *)(void *)(dst + 3 * ld), b);
    _mm_storel_pi((__m64 *)(void *)(dst + 4 * ld), c);
    _mm_storeh_pi((__m64 *)(void *)(dst + 5 * ld), c);
    _mm_storel_pi((__m64 *)(void *)(dst + 6 * ld), d);
    _mm_storeh_pi((__m64 *)(void *)(dst + 7 * ld), d);
}
#endif

/* Interleave r source rows (row i at src + i*ls, contiguous in p) into a w-wide
   micro-panel: dst[p*w + i] = src[i*ls + p] for p < kc, i < r; zero for r <= i < w. */
static void tk__gemm_pack_rows(float *TK_RESTRICT dst, int w, const float *src, size_t ls,
                               int r, int kc)
{
    int i = 0, p;
#if defined(TK__GEMM_HAVE_AVX512) || defined(TK__GEMM_HAVE_AVX2)
    if (r == w) {
        const int kc8 = kc & ~7;
        for (; i + 8 <= r; i += 8)
            for (p = 0; p < kc8; p += 8)
                tk__gemm_tr8x8(dst + (size_t)p * w + i, (size_t)w, src + (size_t)i * ls + p, ls);
        for (; i + 4 <= r; i += 4)
            for (p = 0; p < kc8; p += 8)
                tk__gemm_tr4x8(dst + (size_t)p * w + i, (size_t)w, src + (size_t)i * ls + p, ls);
        for (; i + 2 <= r; i += 2)
            for (p = 0; p < kc8; p += 8)
                tk__gemm_tr2x8(dst + (size_t)p * w + i, (size_t)w, src + (size_t)i * ls + p, ls);
        for (; i < r; i++) {
            const float *sr = src + (size_t)i * ls;
            for (p = 0; p < kc8; p++) dst[(size_t)p * w + i] = sr[p];
        }
        for (p = kc8; p < kc; p++)
            for (i = 0; i < r; i++) dst[(size_t)p * w + i] = src[(size_t)i * ls + p];
        return;
    }
#endif
    for (; i < r; i++) {
        const float *sr = src + (size_t)i * ls;
        for (p = 0; p < kc; p++) dst[(size_t)p * w + i] = sr[p];
    }
    for (; i < w; i++)
        for (p = 0; p < kc; p++) dst[(size_t)p * w + i] = 0.0f;
}

/* Copy kc source rows of c contiguous values (row p at src + p*ls) into a w-wide
   micro-panel: dst[p*w + j] = src[p*ls + j] for j < c; zero for c <= j < w. */
static void tk__gemm_pack_cols(float *TK_RESTRICT dst, int w, const float *src, size_t ls,
                               int c, int kc)
{
    int p, j;
    if (c == w && w == 32) {
        for (p = 0; p < kc; p++) memcpy(dst + (size_t)p * 32, src + (size_t)p * ls, 32 * sizeof(float));
    } else if (c == w && w == 16) {
        for (p = 0; p < kc; p++) memcpy(dst + (size_t)p * 16, src + (size_t)p * ls, 16 * sizeof(float));
    } else if (c == w && w == 12) {
        for (p = 0; p < kc; p++) memcpy(dst + (size_t)p * 12, src + (size_t)p * ls, 12 * sizeof(float));
    } else if (c == w && w == 6) {
        for (p = 0; p < kc; p++) memcpy(dst + (size_t)p * 6, src + (size_t)p * ls, 6 * sizeof(float));
    } else {
        for (p = 0; p < kc; p++) {
            const float *sp = src + (size_t)p * ls;
            float *dp = dst + (size_t)p * w;
            for (j = 0; j < c; j++) dp[j] = sp[j];
            for (; j < w; j++) dp[j] = 0.0f;
        }
    }
}

/* Pack op(A)[i0:i0+mc, p0:p0+kc] into mr-row micro-panels: panel q holds rows
   i0+q*mr .. +mr, laid out p-major (dst[p*mr + i]); rows past mc are zero. */
static void tk__gemm_pack_a(float *TK_RESTRICT dst, const float *A, size_t lda, int transA,
                            int i0, int mc, int p0, int kc, int mr)
{
    int ir;
    for (ir = 0; ir < mc; ir += mr) {
        const int m = mc - ir < mr ? mc - ir : mr;
        if (!transA) /* A (M, lda): row r contiguous in p */
            tk__gemm_pack_rows(dst + (size_t)ir * kc, mr, A + (size_t)(i0 + ir) * lda + p0, lda,
                               m, kc);
        else /* A stored (K, lda): op(A)[r, p] = A[p*lda + r], contiguous in r */
            tk__gemm_pack_cols(dst + (size_t)ir * kc, mr, A + (size_t)p0 * lda + i0 + ir, lda,
                               m, kc);
    }
}

/* Pack column panels q0..q1 of op(B)[p0:p0+kc, j0:j0+nc] into nr-column micro-panels
   laid out p-major (dst[p*nr + j]); columns past nc are zero. */
static void tk__gemm_pack_b(float *TK_RESTRICT dst, const float *B, size_t ldb, int transB,
                            int p0, int kc, int j0, int nc, int nr, int q0, int q1)
{
    int q;
    for (q = q0; q < q1; q++) {
        const int jr = q * nr;
        const int n = nc - jr < nr ? nc - jr : nr;
        if (!transB) /* B (K, ldb): row p contiguous in j */
            tk__gemm_pack_cols(dst + (size_t)jr * kc, nr, B + (size_t)p0 * ldb + j0 + jr, ldb,
                               n, kc);
        else /* B stored (N, ldb): op(B)[p, j] = B[j*ldb + p], contiguous in p */
            tk__gemm_pack_rows(dst + (size_t)jr * kc, nr, B + (size_t)(j0 + jr) * ldb + p0, ldb,
                               n, kc);
    }
}

/* C (M,N) = alpha * acc + beta * C by direct loops: tiny products. */
static void tk__gemm_small(int transA, int transB, int M, int N, int K, float alpha,
                           const float *A, size_t lda, const float *B, size_t ldb,
                           float beta, float *C, size_t ldc)
{
    int i, j, p;
    for (i = 0; i < M; i++)
        for (j = 0; j < N; j++) {
            float acc = 0.0f, *c = C + (size_t)i * ldc + j;
            for (p = 0; p < K; p++) {
                const float a = transA ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                const float b = transB ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                acc += a * b;
            }
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
        }
}

/* Tile arithmetic that cannot overflow for any dimension up to INT_MAX: the number of
   tiles of size t covering n; the next block start (x + step, or end when that would
   pass it); and the bound of part idx of parts over tiles tiles of size t, clamped to n
   (the products go through long long). */
static int tk__gemm_ntiles(int n, int t) { return n / t + (n % t != 0); }
static int tk__gemm_next(int x, int end, int step) { return end - x > step ? x + step : end; }
static int tk__gemm_bound(int tiles, int idx, int parts, int t, int n)
{
    const long long b = (long long)tiles * idx / parts * t;
    return b < n ? (int)b : n;
}

/* One work item of a (jc, pc) block: pack rows [ic, ic + mc) of op(A)[:, pc:pc+kc] into
   Ap, then multiply them by the packed column panels [q0, q1) of Bp into C. Row and
   column tiles start at multiples of MR and NR, so the tile grid, and with it every
   element's arithmetic, does not depend on which thread runs which item. */
static void tk__gemm_item(const tk__gemm_kernel *ker, float *Ap, const float *Bp,
                          int transA, const float *A, size_t lda, int ic, int mc, int pc,
                          int kc, int jc, int nc, int q0, int q1, float alpha, float beta_k,
                          float *C, size_t ldc)
{
    const int mr = ker->mr, nr = ker->nr;
    int q, ir;
    tk__gemm_pack_a(Ap, A, lda, transA, ic, mc, pc, kc, mr);
#ifdef TK__GEMM_IR_OUTER
    for (ir = 0; ir < mc; ir += mr) {
        const int m = mc - ir < mr ? mc - ir : mr;
        for (q = q0; q < q1; q++) {
            const int jr = q * nr;
            const int n = nc - jr < nr ? nc - jr : nr;
#else
    for (q = q0; q < q1; q++) {
        const int jr = q * nr;
        const int n = nc - jr < nr ? nc - jr : nr;
        for (ir = 0; ir < mc; ir += mr) {
            const int m = mc - ir < mr ? mc - ir : mr;
#endif
            ker->fn(kc, Ap + (size_t)ir * kc, Bp + (size_t)jr * kc,
                    C + (size_t)(ic + ir) * ldc + jc + jr, ldc, m, n, alpha, beta_k);
        }
    }
}

static size_t tk__gemm_round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* The GotoBLAS loops with the team sharing each packed B block. For every (jc, pc)
   block (NC columns and KC of K, in order) the threads pack B's column panels together,
   a share each, into one of two buffers, meet at one barrier, then take items (a block
   of at most MC rows of C times a group of B's panels) from a shared counter until none
   are left, packing each item's A block privately. Taking items as they come is meant
   to keep the cores busy when one runs slower (a busy sibling, another process; no
   gain was measurable on a 2-vCPU guest, docs/BENCHMARKS.md), and no B block is packed
   twice. The buffers alternate, so packing block t + 1 never overwrites panels
   a slower thread still reads: a thread packs block t + 1 only after passing block t's
   barrier, which every thread reaches only after finishing its items of block t - 1,
   the last readers of that buffer. For the same reason block t's items (the same C
   rows, the next K block) never run beside block t - 1's. */
static int tk__gemm_blocked(int transA, int transB, int M, int N, int K, float alpha,
                            const float *A, size_t lda, const float *B, size_t ldb,
                            float beta, float *C, size_t ldc)
{
    const tk__gemm_kernel ker = tk__gemm_pick();
    const int mr = ker.mr, nr = ker.nr, m_tiles = tk__gemm_ntiles(M, mr);
    const int kcm = K < TK__GEMM_KC ? K : TK__GEMM_KC;
    const int mcm = M < TK__GEMM_MC ? M : TK__GEMM_MC;
    const int ncm = N < TK__GEMM_NC ? N : TK__GEMM_NC;
    int nt = 1, m_blocks = tk__gemm_ntiles(M, TK__GEMM_MC), groups = 1, counter[2] = {0, 0};
    size_t a_size, b_size;
    void *raw;
    float *buf;
#ifdef _OPENMP
    int arrived = 0; /* threads that entered the region (see below) */
    if ((double)M * N * K >= TK__GEMM_PAR_MIN) nt = omp_get_max_threads();
    if (nt < 1) nt = 1;
#endif
    /* Row blocks: a multiple of the team where M has the MR tiles for it, all the same
       size to within one tile (block b starts at tile m_tiles * b / m_blocks), so equal
       shares of the items are equal shares of the work; none exceeds MC rows. Too few
       blocks for the team: each block's panels are split into groups as well (each
       group packs the A block again), >= 4 items per thread. */
    if (nt > 1) {
        const long long mb = ((long long)m_blocks + nt - 1) / nt * nt;
        m_blocks = mb < m_tiles ? (int)mb : m_tiles;
    }
    if (nt > 1 && m_blocks < 4 * nt) {
        const int panels = tk__gemm_ntiles(ncm, nr);
        groups = tk__gemm_ntiles(4 * nt, m_blocks);
        if (groups > panels) groups = panels;
    }
    if ((long long)nt > (long long)m_blocks * groups) nt = m_blocks * groups;
    /* sizes in floats, multiples of 16 plus a line between buffers: all 64-byte aligned */
    a_size = tk__gemm_round_up((size_t)kcm * tk__gemm_round_up((size_t)mcm, (size_t)mr), 16) + 16;
    b_size = tk__gemm_round_up((size_t)kcm * tk__gemm_round_up((size_t)ncm, (size_t)nr), 16) + 16;
    raw = TK_MALLOC(((size_t)nt * a_size + 2 * b_size) * sizeof(float) + 64);
    if (!raw) return tk__fail(TK_ENOMEM, "tk_sgemm: cannot allocate packing buffers");
    buf = (float *)(void *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);

#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0, team = 1, t = 0, jc, pc;
        float *Ap;
#ifdef _OPENMP
        /* The thread's number and the team's size are counted here, not asked of
           omp_get_thread_num() and omp_get_num_threads(): a host built the llm.c way
           (`clang -fopenmp ... -lgomp`) runs this region on LLVM's libomp while those
           calls answer from GNU libgomp, 0 and 1 on every thread. */
#pragma omp atomic capture
        tid = arrived++;
#pragma omp barrier
#pragma omp atomic read
        team = arrived;
#endif
        Ap = buf + 2 * b_size + (size_t)tid * a_size;
        for (jc = 0; jc < N; jc = tk__gemm_next(jc, N, TK__GEMM_NC)) {
            const int nc = N - jc < TK__GEMM_NC ? N - jc : TK__GEMM_NC;
            const int panels = tk__gemm_ntiles(nc, nr);
            const int g = groups < panels ? groups : panels;
            const int items = m_blocks * g;
            for (pc = 0; pc < K; pc = tk__gemm_next(pc, K, TK__GEMM_KC), t++) {
                const int kc = K - pc < TK__GEMM_KC ? K - pc : TK__GEMM_KC;
                /* the first K block applies beta, the later ones accumulate */
                const float beta_k = pc == 0 ? beta : 1.0f;
                float *Bp = buf + (size_t)(t & 1) * b_size;
                int *next = &counter[t & 1], item;
                tk__gemm_pack_b(Bp, B, ldb, transB, pc, kc, jc, nc, nr,
                                tk__gemm_bound(panels, tid, team, 1, panels),
                                tk__gemm_bound(panels, tid + 1, team, 1, panels));
                /* block t - 2 used this counter: all its items were taken before block
                   t - 1's barrier */
                if (tid == 0) *next = 0;
#ifdef _OPENMP
#pragma omp barrier
#endif
                for (;;) {
#ifdef _OPENMP
#pragma omp atomic capture
#endif
                    item = (*next)++;
                    if (item >= items) break;
                    {
                        const int blk = item / g, grp = item % g;
                        const int ic = tk__gemm_bound(m_tiles, blk, m_blocks, mr, M);
                        const int mc = tk__gemm_bound(m_tiles, blk + 1, m_blocks, mr, M) - ic;
                        tk__gemm_item(&ker, Ap, Bp, transA, A, lda, ic, mc, pc, kc, jc, nc,
                                      tk__gemm_bound(panels, grp, g, 1, panels),
                                      tk__gemm_bound(panels, grp + 1, g, 1, panels), alpha,
                                      beta_k, C, ldc);
                    }
                }
            }
        }
    }
    TK_FREE(raw);
    return TK_OK;
}

/* Few rows against many columns (M <= MC: one row block; N > NC: several column blocks),
   the shape of a decoding step's head (the batch's rows times the vocabulary). The loops
   above would pack op(B) in NC-column blocks (1.5 MB each at K = 128: out of L2) that
   only these M rows reuse, one barrier per block. Here op(A) is packed once (every K
   block, shared, read-only), and each thread packs its own L2-sized chunk of op(B)'s
   columns at a time, taken from a shared counter (chunks, not threads, fix the work:
   no static split to wait on when a core is busy), and multiplies it by every row of A.
   The same micro-kernel over the same K blocks in the same order, its tiles at the same
   multiples of MR and NR from (0, 0): every element's arithmetic, and with it every bit,
   is the blocked path's (test_gemm compares the two), for any thread count. */
#ifndef TK__GEMM_ROWS_CHUNK_BYTES
#define TK__GEMM_ROWS_CHUNK_BYTES (128 * 1024) /* a thread's packed chunk of op(B) */
#endif
static int tk__gemm_rows(int transA, int transB, int M, int N, int K, float alpha,
                         const float *A, size_t lda, const float *B, size_t ldb, float beta,
                         float *C, size_t ldc)
{
    const tk__gemm_kernel ker = tk__gemm_pick();
    const int mr = ker.mr, nr = ker.nr;
    const int kcm = K < TK__GEMM_KC ? K : TK__GEMM_KC;
    const size_t mp = tk__gemm_round_up((size_t)M, (size_t)mr);
    int ncs = (int)(TK__GEMM_ROWS_CHUNK_BYTES / sizeof(float)) / kcm / nr * nr, chunks,
        nt = 1, counter = 0, pc;
    size_t a_size, b_size;
    void *raw;
    float *buf;
#ifdef _OPENMP
    int arrived = 0;
#endif
    if (ncs < nr) ncs = nr;
    chunks = tk__gemm_ntiles(N, ncs);
#ifdef _OPENMP
    if ((double)M * N * K >= TK__GEMM_PAR_MIN) nt = omp_get_max_threads();
    if (nt < 1) nt = 1;
    if (nt > chunks) nt = chunks;
#endif
    a_size = tk__gemm_round_up(mp * (size_t)K, 16) + 16;
    b_size = tk__gemm_round_up((size_t)kcm * tk__gemm_round_up((size_t)ncs, (size_t)nr), 16) + 16;
    raw = TK_MALLOC((a_size + (size_t)nt * b_size) * sizeof(float) + 64);
    if (!raw) return tk__fail(TK_ENOMEM, "tk_sgemm: cannot allocate packing buffers");
    buf = (float *)(void *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    /* op(A) block pc (kc of K) at buf + mp * pc, its mr-row panels as the blocked path's */
    for (pc = 0; pc < K; pc = tk__gemm_next(pc, K, TK__GEMM_KC))
        tk__gemm_pack_a(buf + mp * (size_t)pc, A, lda, transA, 0, M, pc,
                        K - pc < TK__GEMM_KC ? K - pc : TK__GEMM_KC, mr);

#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int tid = 0, item;
        float *Bp;
#ifdef _OPENMP
        /* the thread's buffer by arrival, not omp_get_thread_num(): tk__gemm_blocked says why */
#pragma omp atomic capture
        tid = arrived++;
#endif
        Bp = buf + a_size + (size_t)tid * b_size;
        for (;;) {
            int j0, nc, panels, p0;
#ifdef _OPENMP
#pragma omp atomic capture
#endif
            item = counter++;
            if (item >= chunks) break;
            j0 = item * ncs;
            nc = N - j0 < ncs ? N - j0 : ncs;
            panels = tk__gemm_ntiles(nc, nr);
            for (p0 = 0; p0 < K; p0 = tk__gemm_next(p0, K, TK__GEMM_KC)) {
                const int kc = K - p0 < TK__GEMM_KC ? K - p0 : TK__GEMM_KC;
                const float beta_k = p0 == 0 ? beta : 1.0f;
                const float *Ap = buf + mp * (size_t)p0;
                int q, ir;
                tk__gemm_pack_b(Bp, B, ldb, transB, p0, kc, j0, nc, nr, 0, panels);
                for (q = 0; q < panels; q++) {
                    const int jr = q * nr;
                    const int n = nc - jr < nr ? nc - jr : nr;
                    for (ir = 0; ir < M; ir += mr) {
                        const int m = M - ir < mr ? M - ir : mr;
                        ker.fn(kc, Ap + (size_t)ir * kc, Bp + (size_t)jr * kc,
                               C + (size_t)ir * ldc + j0 + jr, ldc, m, n, alpha, beta_k);
                    }
                }
            }
        }
    }
    TK_FREE(raw);
    return TK_OK;
}

TKDEF int tk_sgemm(int transA, int transB, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta,
                   float *C, int ldc)
{
    if (!A || !B || !C) return tk__fail(TK_EINVAL, "tk_sgemm: NULL pointer");
    if (M <= 0 || N <= 0 || K <= 0)
        return tk__fail(TK_EINVAL, "tk_sgemm: M, N, K must be > 0 (got %d, %d, %d)", M, N, K);
    if (lda < (transA ? M : K))
        return tk__fail(TK_EINVAL, "tk_sgemm: lda %d < %d", lda, transA ? M : K);
    if (ldb < (transB ? K : N))
        return tk__fail(TK_EINVAL, "tk_sgemm: ldb %d < %d", ldb, transB ? K : N);
    if (ldc < N) return tk__fail(TK_EINVAL, "tk_sgemm: ldc %d < N = %d", ldc, N);
    if (!tk__finite(alpha) || !tk__finite(beta))
        return tk__fail(TK_EINVAL, "tk_sgemm: alpha and beta must be finite");
    transA = transA != 0;
    transB = transB != 0;
    if (alpha == 0.0f) { /* BLAS semantics: A and B are not read */
        int i, j;
        for (i = 0; i < M; i++) {
            float *c = C + (size_t)i * ldc;
            if (beta == 0.0f)
                for (j = 0; j < N; j++) c[j] = 0.0f;
            else if (beta != 1.0f)
                for (j = 0; j < N; j++) c[j] *= beta;
        }
        return TK_OK;
    }
    if ((double)M * N * K < TK__GEMM_SMALL) {
        tk__gemm_small(transA, transB, M, N, K, alpha, A, (size_t)lda, B, (size_t)ldb, beta,
                       C, (size_t)ldc);
        return TK_OK;
    }
#ifdef TK_USE_CBLAS
    if (tk__gemm_kernel_choice == TK_GEMM_AUTO) {
        cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                    transB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta,
                    C, ldc);
        return TK_OK;
    }
#endif
    if (M <= TK__GEMM_MC && N > TK__GEMM_NC)
        return tk__gemm_rows(transA, transB, M, N, K, alpha, A, (size_t)lda, B, (size_t)ldb,
                             beta, C, (size_t)ldc);
    return tk__gemm_blocked(transA, transB, M, N, K, alpha, A, (size_t)lda, B, (size_t)ldb,
                            beta, C, (size_t)ldc);
}

/* ==== IMPLEMENTATION BODY (tensor ops) BEGIN ==== */
/* ---------------------------------------------------------------- ops: helpers */
/* OpenMP pragmas go through this macro so that a build without -fopenmp sees no
   #pragma at all (no -Wunknown-pragmas). Every parallel loop uses a static schedule
   and writes disjoint outputs; reductions are done in a fixed order. */
#ifdef _OPENMP
#define TK__OPS_OMP(...) _Pragma(#__VA_ARGS__)
#else
#define TK__OPS_OMP(...)
#endif
/* Loops below this many elements (or rows * cols) stay on one thread. */
#define TK__PAR_MIN 32768
#define TK__LANES 16  /* float lanes of the ordered row reductions */
#define TK__CHUNK 256 /* row chunk of those reductions and of the chunked loops */
static double tk__row_sum(const float *x, int n);


#define TK__NONNULL(fn, p)                                                         \
    do {                                                                           \
        if (!(p)) return tk__fail(TK_EINVAL, "%s: %s is NULL", fn, #p);            \
    } while (0)
#define TK__POSDIM(fn, d)                                                          \
    do {                                                                           \
        if ((d) <= 0)                                                              \
            return tk__fail(TK_EINVAL, "%s: %s must be > 0, got %d", fn, #d, (int)(d)); \
    } while (0)
#define TK__NONZERO(fn, n)                                                         \
    do {                                                                           \
        if ((n) == 0) return tk__fail(TK_EINVAL, "%s: %s must be > 0, got 0", fn, #n); \
    } while (0)

/* Checks every index in ids (n) lies in [0, V). */
static int tk__check_ids(const char *fn, const char *what, const int *ids, size_t n, int V)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return tk__fail(TK_ERANGE, "%s: %s[%lu] = %d outside [0, %d)", fn, what,
                            (unsigned long)i, ids[i], V);
    return TK_OK;
}

/* dst (C) += column sums of src (N,C). Parallel over blocks of 64 columns; each
   column is summed over rows in order, so the result does not depend on the
   thread count. */
#define TK__COLBLK 64
static void tk__colsum_add(float *dst, const float *src, int N, int C)
{
    int nb = (C + TK__COLBLK - 1) / TK__COLBLK, blk;
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN && nb > 1))
    for (blk = 0; blk < nb; blk++) {
        float acc[TK__COLBLK];
        int c0 = blk * TK__COLBLK, c1 = c0 + TK__COLBLK, c, i;
        if (c1 > C) c1 = C;
        for (c = 0; c < c1 - c0; c++) acc[c] = 0.0f;
        for (i = 0; i < N; i++) {
            const float *row = src + (size_t)i * C + c0;
            for (c = 0; c < c1 - c0; c++) acc[c] += row[c];
        }
        for (c = c0; c < c1; c++) dst[c] += acc[c - c0];
    }
}

/* ---------------------------------------------------------------- RNG + init */
TKDEF void tk_rng_seed(tk_rng *rng, uint64_t seed, uint64_t stream)
{
    if (!rng) return;
    rng->state = 0u;
    rng->inc = (stream << 1) | 1u;
    (void)tk_rng_u32(rng);
    rng->state += seed;
    (void)tk_rng_u32(rng);
}

TKDEF uint32_t tk_rng_u32(tk_rng *rng)
{
    uint64_t old;
    uint32_t xs, rot;
    if (!rng) return 0u;
    old = rng->state;
    rng->state = old * 6364136223846793005ULL + (rng->inc | 1u);
    xs = (uint32_t)(((old >> 18) ^ old) >> 27);
    rot = (uint32_t)(old >> 59);
    return (xs >> rot) | (xs << ((32u - rot) & 31u));
}

TKDEF float tk_rng_uniform(tk_rng *rng)
{
    return (float)(tk_rng_u32(rng) >> 8) * (1.0f / 16777216.0f);
}

TKDEF float tk_rng_normal(tk_rng *rng)
{
    /* u1 in (0, 1] so log(u1) is finite; two draws per call, nothing cached. */
    double u1 = ((double)(tk_rng_u32(rng) >> 8) + 1.0) * (1.0 / 16777216.0);
    double u2 = (double)(tk_rng_u32(rng) >> 8) * (1.0 / 16777216.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

TKDEF int tk_init_normal(float *x, size_t n, float mean, float std, tk_rng *rng)
{
    static const char *fn = "tk_init_normal";
    size_t i;
    TK__NONNULL(fn, x);
    TK__NONNULL(fn, rng);
    TK__NONZERO(fn, n);
    if (!tk__finite(mean) || !tk__finite(std) || std < 0.0f)
        return tk__fail(TK_EINVAL, "%s: need finite mean and std >= 0 (got %g, %g)", fn,
                        (double)mean, (double)std);
    for (i = 0; i < n; i++) x[i] = mean + std * tk_rng_normal(rng);
    return TK_OK;
}

TKDEF int tk_init_uniform(float *x, size_t n, float lo, float hi, tk_rng *rng)
{
    static const char *fn = "tk_init_uniform";
    size_t i;
    TK__NONNULL(fn, x);
    TK__NONNULL(fn, rng);
    TK__NONZERO(fn, n);
    if (!tk__finite(lo) || !tk__finite(hi) || !(lo <= hi))
        return tk__fail(TK_EINVAL, "%s: need finite lo <= hi (got %g, %g)", fn, (double)lo,
                        (double)hi);
    for (i = 0; i < n; i++) x[i] = lo + (hi - lo) * tk_rng_uniform(rng);
    return TK_OK;
}

TKDEF int tk_init_constant(float *x, size_t n, float value)
{
    static const char *fn = "tk_init_constant";
    size_t i;
    TK__NONNULL(fn, x);
    TK__NONZERO(fn, n);
    if (!tk__finite(value))
        return tk__fail(TK_EINVAL, "%s: value must be finite (got %g)", fn, (double)value);
    for (i = 0; i < n; i++) x[i] = value;
    return TK_OK;
}

/* ---------------------------------------------------------------- matmul */
/* Under nvcc (or the CUDA simulation) the plain ops that have a _cuda twin of the same
   signature route DEVICE buffers to it on the default stream (DESIGN.md: one model for
   both devices): tk_matmul_*, tk_embedding_*, tk_layernorm_*, tk_gelu_*,
   tk_softmax_forward, tk_crossentropy_backward, tk_adamw_update, tk_rmsnorm_*,
   tk_residual_* (the backward decides on dout: da, db may be NULL), tk_split_heads_*,
   tk_merge_heads_*, tk_grad_norm and tk_clip_grad_norm (their norm stays a host float:
   only g decides), tk_relu2_*, tk_silu_*,
   tk_relu2_gated_*, tk_rope, tk_crossentropy_forward_inplace,
   tk_crossentropy_backward_inplace, tk_dropout_seeded_forward and tk_dropout_backward
   (tk_dropout_forward draws from a host tk_rng: not routed), tk_sigmoid_*, tk_rowscale,
   tk_rowdot, tk_residual_rows_forward, tk_causal_mean_gate_*, tk_rows_gather and
   tk_rows_combine_* (the backward decides on dout: dsrc, dw may be NULL). The first output decides
   the side; every other buffer must be on the same side (device memory with a device
   output, or NULL where the op allows; host memory with a host output), else TK_EINVAL
   and nothing is read or written: a host output with a device input would otherwise
   send the CPU loops into device memory. tk_sgemm (called by the CPU kernels
   themselves), tk_crossentropy_forward (its means are host scalars) and the attention
   (probs on the CPU, lse on the device) are not routed: call their _cuda forms. */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
static int tk__is_device_ptr(const void *p); /* cuda/tensor.cuh */
/* p on the side dev (1 device, 0 host); NULL: allowed on the host side (the CPU path
   checks its own NULLs), on the device side only where null_ok (TK__DEV0) */
static int tk__on_side(const void *p, int dev, int null_ok)
{
    if (!p) return dev ? null_ok : 1;
    return tk__is_device_ptr(p) == dev;
}
/* inside TK__ROUTE's rest expression: tk__side_ is the first output's side */
#define TK__DEV(p) tk__on_side((p), tk__side_, 0)
#define TK__DEV0(p) tk__on_side((p), tk__side_, 1)
#define TK__ROUTE(fn, first, rest_dev, call)                                                  \
    do {                                                                                     \
        const int tk__side_ = tk__is_device_ptr(first);                                      \
        if (!(rest_dev)) return tk__fail(TK_EINVAL, "%s: device and host buffers mixed", fn); \
        if (tk__side_) return call;                                                          \
    } while (0)
#else
#define TK__ROUTE(fn, first, rest_dev, call) ((void)0)
#endif

TKDEF int tk_matmul_forward(float *out, const float *inp, const float *W,
                            const float *b, int N, int C, int OC)
{
    static const char *fn = "tk_matmul_forward";
    int rc, i;
    TK__ROUTE(fn, out, TK__DEV(inp) && TK__DEV(W) && TK__DEV0(b),
              tk_matmul_forward_cuda(out, inp, W, b, N, C, OC, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, W);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    TK__POSDIM(fn, OC);
    /* out (N,OC) = inp (N,C) . W^T, W stored (OC,C) */
    rc = tk_sgemm(0, 1, N, OC, C, 1.0f, inp, C, W, C, 0.0f, out, OC);
    if (rc != TK_OK) return rc;
    if (b) {
        TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * OC > TK__PAR_MIN))
        for (i = 0; i < N; i++) {
            float *o = out + (size_t)i * OC;
            int j;
            for (j = 0; j < OC; j++) o[j] += b[j];
        }
    }
    return TK_OK;
}

TKDEF int tk_matmul_backward(float *dinp, float *dW, float *db, const float *dout,
                             const float *inp, const float *W, int N, int C, int OC)
{
    static const char *fn = "tk_matmul_backward";
    int rc;
    TK__ROUTE(fn, dout, TK__DEV0(dinp) && TK__DEV0(dW) && TK__DEV0(db) && TK__DEV0(inp) && TK__DEV0(W),
              tk_matmul_backward_cuda(dinp, dW, db, dout, inp, W, N, C, OC, NULL));
    TK__NONNULL(fn, dout);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    TK__POSDIM(fn, OC);
    if (dinp && !W) return tk__fail(TK_EINVAL, "%s: W is NULL (needed for dinp)", fn);
    if (dW && !inp) return tk__fail(TK_EINVAL, "%s: inp is NULL (needed for dW)", fn);
    if (dinp) { /* dinp (N,C) += dout (N,OC) . W (OC,C) */
        rc = tk_sgemm(0, 0, N, C, OC, 1.0f, dout, OC, W, C, 1.0f, dinp, C);
        if (rc != TK_OK) return rc;
    }
    if (dW) { /* dW (OC,C) += dout^T (OC,N) . inp (N,C) */
        rc = tk_sgemm(1, 0, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dW, C);
        if (rc != TK_OK) return rc;
    }
    if (db) tk__colsum_add(db, dout, N, OC); /* db (OC) += sum over rows of dout */
    return TK_OK;
}

/* ---------------------------------------------------------------- embedding */
TKDEF int tk_embedding_forward(float *out, const int *ids, const float *wte,
                               const float *wpe, int B, int T, int C, int V)
{
    static const char *fn = "tk_embedding_forward";
    int rc, bt;
    TK__ROUTE(fn, out, TK__DEV(ids) && TK__DEV(wte) && TK__DEV0(wpe),
              tk_embedding_forward_cuda(out, ids, wte, wpe, B, T, C, V, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, ids);
    TK__NONNULL(fn, wte);
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, C);
    TK__POSDIM(fn, V);
    rc = tk__check_ids(fn, "ids", ids, (size_t)B * T, V);
    if (rc != TK_OK) return rc;
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * C > TK__PAR_MIN))
    for (bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;                 /* (C) */
        const float *e = wte + (size_t)ids[bt] * C;      /* (C) */
        int c;
        if (wpe) {
            const float *p = wpe + (size_t)(bt % T) * C; /* (C) */
            for (c = 0; c < C; c++) o[c] = e[c] + p[c];
        } else {
            for (c = 0; c < C; c++) o[c] = e[c];
        }
    }
    return TK_OK;
}

TKDEF int tk_embedding_backward(float *dwte, float *dwpe, const float *dout,
                                const int *ids, int B, int T, int C, int V)
{
    static const char *fn = "tk_embedding_backward";
    int rc;
    TK__ROUTE(fn, dout, TK__DEV0(dwte) && TK__DEV0(dwpe) && TK__DEV0(ids),
              tk_embedding_backward_cuda(dwte, dwpe, dout, ids, B, T, C, V, NULL));
    TK__NONNULL(fn, dout);
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, C);
    TK__POSDIM(fn, V);
    if (dwte) {
        int nb = (C + TK__COLBLK - 1) / TK__COLBLK, blk;
        TK__NONNULL(fn, ids);
        rc = tk__check_ids(fn, "ids", ids, (size_t)B * T, V);
        if (rc != TK_OK) return rc;
        /* Tokens repeat, so rows of dwte collide: split the channels instead, each
           thread scatters every token into its own channel block, in token order. */
        TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * C > TK__PAR_MIN && nb > 1))
        for (blk = 0; blk < nb; blk++) {
            int c0 = blk * TK__COLBLK, c1 = c0 + TK__COLBLK, bt, c;
            if (c1 > C) c1 = C;
            for (bt = 0; bt < B * T; bt++) {
                float *d = dwte + (size_t)ids[bt] * C;
                const float *g = dout + (size_t)bt * C;
                for (c = c0; c < c1; c++) d[c] += g[c];
            }
        }
    }
    if (dwpe) { /* dwpe[t] += sum_b dout[b,t] */
        int t;
        TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * C > TK__PAR_MIN))
        for (t = 0; t < T; t++) {
            float *d = dwpe + (size_t)t * C;
            int b, c;
            for (b = 0; b < B; b++) {
                const float *g = dout + ((size_t)b * T + t) * C;
                for (c = 0; c < C; c++) d[c] += g[c];
            }
        }
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- LayerNorm */
TKDEF int tk_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                               const float *w, const float *b, int N, int C, float eps)
{
    static const char *fn = "tk_layernorm_forward";
    int i;
    TK__ROUTE(fn, out, TK__DEV0(mean) && TK__DEV0(rstd) && TK__DEV(inp) && TK__DEV(w) && TK__DEV0(b),
              tk_layernorm_forward_cuda(out, mean, rstd, inp, w, b, N, C, eps, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, w);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    if (!tk__finite(eps) || !(eps > 0.0f))
        return tk__fail(TK_EINVAL, "%s: eps must be finite and > 0 (got %g)", fn, (double)eps);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C; /* (C) */
        float *o = out + (size_t)i * C;       /* (C) */
        float m, var, s, lane[TK__LANES];
        int c, l;
        m = (float)(tk__row_sum(x, C) / (double)C);
        /* variance: 16 float lanes (vectorised), fixed order */
        for (l = 0; l < TK__LANES; l++) lane[l] = 0.0f;
        for (c = 0; c + TK__LANES <= C; c += TK__LANES)
            for (l = 0; l < TK__LANES; l++) {
                float d = x[c + l] - m;
                lane[l] += d * d;
            }
        for (; c < C; c++) lane[0] += (x[c] - m) * (x[c] - m);
        var = 0.0f;
        for (l = 0; l < TK__LANES; l++) var += lane[l];
        var /= (float)C;
        s = 1.0f / sqrtf(var + eps);
        if (b)
            for (c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c] + b[c];
        else
            for (c = 0; c < C; c++) o[c] = (x[c] - m) * s * w[c];
        if (mean) mean[i] = m;
        if (rstd) rstd[i] = s;
    }
    return TK_OK;
}

TKDEF int tk_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, const float *mean,
                                const float *rstd, int N, int C)
{
    static const char *fn = "tk_layernorm_backward";
    int i;
    TK__ROUTE(fn, dinp, TK__DEV0(dw) && TK__DEV0(db) && TK__DEV(dout) && TK__DEV(inp) && TK__DEV(w) &&
                            TK__DEV(mean) && TK__DEV(rstd),
              tk_layernorm_backward_cuda(dinp, dw, db, dout, inp, w, mean, rstd, N, C, NULL));
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, w);
    TK__NONNULL(fn, mean);
    TK__NONNULL(fn, rstd);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    /* dinp = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)), dnorm = w * dout */
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *g = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        float m = mean[i], s = rstd[i], a = 0.0f, bsum = 0.0f;
        int c;
        for (c = 0; c < C; c++) {
            float dn = w[c] * g[c];
            a += dn;
            bsum += dn * (x[c] - m) * s;
        }
        a /= (float)C;
        bsum /= (float)C;
        for (c = 0; c < C; c++) {
            float dn = w[c] * g[c], nrm = (x[c] - m) * s;
            dx[c] += (dn - a - nrm * bsum) * s;
        }
    }
    if (db) tk__colsum_add(db, dout, N, C);
    if (dw) { /* dw[c] += sum_i dout[i,c] * norm[i,c], column blocks as in colsum */
        int nb = (C + TK__COLBLK - 1) / TK__COLBLK, blk;
        TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN && nb > 1))
        for (blk = 0; blk < nb; blk++) {
            float acc[TK__COLBLK];
            int c0 = blk * TK__COLBLK, c1 = c0 + TK__COLBLK, c, r;
            if (c1 > C) c1 = C;
            for (c = 0; c < c1 - c0; c++) acc[c] = 0.0f;
            for (r = 0; r < N; r++) {
                const float *x = inp + (size_t)r * C, *g = dout + (size_t)r * C;
                float m = mean[r], s = rstd[r];
                for (c = c0; c < c1; c++) acc[c - c0] += g[c] * (x[c] - m) * s;
            }
            for (c = c0; c < c1; c++) dw[c] += acc[c - c0];
        }
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- RMSNorm */
TKDEF int tk_rmsnorm_forward(float *out, float *rstd, const float *inp, const float *w,
                             int N, int C, float eps)
{
    static const char *fn = "tk_rmsnorm_forward";
    int i;
    TK__ROUTE(fn, out, TK__DEV0(rstd) && TK__DEV(inp) && TK__DEV0(w),
              tk_rmsnorm_forward_cuda(out, rstd, inp, w, N, C, eps, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    if (!tk__finite(eps) || !(eps > 0.0f))
        return tk__fail(TK_EINVAL, "%s: eps must be finite and > 0 (got %g)", fn, (double)eps);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *o = out + (size_t)i * C;
        float ms = 0.0f, s;
        int c;
        for (c = 0; c < C; c++) ms += x[c] * x[c];
        s = 1.0f / sqrtf(ms / (float)C + eps);
        for (c = 0; c < C; c++) o[c] = x[c] * s * (w ? w[c] : 1.0f);
        if (rstd) rstd[i] = s;
    }
    return TK_OK;
}

TKDEF int tk_rmsnorm_backward(float *dinp, float *dw, const float *dout, const float *inp,
                              const float *w, const float *rstd, int N, int C)
{
    static const char *fn = "tk_rmsnorm_backward";
    int i;
    TK__ROUTE(fn, dinp, TK__DEV0(dw) && TK__DEV(dout) && TK__DEV(inp) && TK__DEV0(w) && TK__DEV(rstd),
              tk_rmsnorm_backward_cuda(dinp, dw, dout, inp, w, rstd, N, C, NULL));
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, rstd);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    /* y = x r w, r = (mean(x^2) + eps)^-1/2, dr/dx_j = -r^3 x_j / C:
       dx_j = r g_j - r^3 x_j / C * sum_c g_c x_c, with g = w * dout */
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C, *go = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C;
        float s = rstd[i], dot = 0.0f, k;
        int c;
        for (c = 0; c < C; c++) dot += go[c] * (w ? w[c] : 1.0f) * x[c];
        k = s * s * s * dot / (float)C;
        for (c = 0; c < C; c++) dx[c] += s * go[c] * (w ? w[c] : 1.0f) - k * x[c];
    }
    if (dw) {
        int nb = (C + TK__COLBLK - 1) / TK__COLBLK, blk;
        TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN && nb > 1))
        for (blk = 0; blk < nb; blk++) {
            float acc[TK__COLBLK];
            int c0 = blk * TK__COLBLK, c1 = c0 + TK__COLBLK, c, r;
            if (c1 > C) c1 = C;
            for (c = 0; c < c1 - c0; c++) acc[c] = 0.0f;
            for (r = 0; r < N; r++) {
                const float *x = inp + (size_t)r * C, *g = dout + (size_t)r * C;
                float s = rstd[r];
                for (c = c0; c < c1; c++) acc[c - c0] += g[c] * x[c] * s;
            }
            for (c = c0; c < c1; c++) dw[c] += acc[c - c0];
        }
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- ops: row helpers */
/* exp(x) in plain C that compilers vectorise (libm's expf is a scalar call): Cody-Waite
   reduction x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial (Cephes' coefficients),
   2^n built in the exponent bits. Max relative error ~2 ulp (tested against libm);
   exp(x) = 0 for x < -87 (and for -INFINITY), x > 88 saturates at exp(88), NaN -> NaN. */
static float tk__expf(float x)
{
    float xc = x > -87.0f ? x : -87.0f; /* also maps NaN to -87: fixed below */
    float t, n, r, p, scale;
    uint32_t bits;
    xc = xc < 88.0f ? xc : 88.0f;
    t = xc * 1.44269504088896341f;
    n = (t + 12582912.0f) - 12582912.0f; /* round to nearest integer, |t| < 2^22 */
    r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    bits = (uint32_t)((int32_t)n + 127) << 23; /* n in [-126, 127] */
    memcpy(&scale, &bits, sizeof scale);
    p *= scale;
    p = x < -87.0f ? 0.0f : p;
    return tk__isnan(x) ? x : p;
}

/* max over x (n >= 1). Lane-wise, so it vectorises; NaNs are skipped unless x[0]. */
static float tk__row_max(const float *x, int n)
{
    float lane[TK__LANES], mx;
    int j, l;
    for (l = 0; l < TK__LANES; l++) lane[l] = x[0];
    for (j = 0; j + TK__LANES <= n; j += TK__LANES)
        for (l = 0; l < TK__LANES; l++) lane[l] = x[j + l] > lane[l] ? x[j + l] : lane[l];
    for (; j < n; j++) lane[0] = x[j] > lane[0] ? x[j] : lane[0];
    mx = lane[0];
    for (l = 1; l < TK__LANES; l++) mx = lane[l] > mx ? lane[l] : mx;
    return mx;
}

/* Sum of y (n): 16 float lanes per chunk of 256, chunks added in double. Fixed order. */
static double tk__chunk_sum(const float *y, int m)
{
    float lane[TK__LANES];
    double s = 0.0;
    int j, l;
    for (l = 0; l < TK__LANES; l++) lane[l] = 0.0f;
    for (j = 0; j + TK__LANES <= m; j += TK__LANES)
        for (l = 0; l < TK__LANES; l++) lane[l] += y[j + l];
    for (; j < m; j++) lane[0] += y[j];
    for (l = 0; l < TK__LANES; l++) s += (double)lane[l];
    return s;
}

/* out[v] = exp(x[v] - mx) (out NULL: not stored); returns the sum of those values.
   out may alias x. */
TK__NOINLINE static double tk__exp_sum(float *out, const float *x, float mx, int n)
{
    float buf[TK__CHUNK];
    double s = 0.0;
    int c0, j;
    for (c0 = 0; c0 < n; c0 += TK__CHUNK) {
        int m = n - c0 < TK__CHUNK ? n - c0 : TK__CHUNK;
        float *dst = out ? out + c0 : buf;
        const float *src = x + c0;
        for (j = 0; j < m; j++) dst[j] = tk__expf(src[j] - mx);
        s += tk__chunk_sum(dst, m);
    }
    return s;
}

/* x (n) = exp(x + b - mx) in place, returns the sum: tk__exp_sum with a bias folded
   in (same chunks, same summation order). b never aliases x. Kept apart from
   tk__exp_sum: folded into it as an optional bias (three pointers, one may alias) the
   attention softmax ran 2-3% slower. */
TK__NOINLINE static double tk__exp_sum_bias(float *x, const float *b, float mx, int n)
{
    double s = 0.0;
    int c0, j;
    for (c0 = 0; c0 < n; c0 += TK__CHUNK) {
        int m = n - c0 < TK__CHUNK ? n - c0 : TK__CHUNK;
        float *dst = x + c0;
        const float *src = b + c0;
        for (j = 0; j < m; j++) dst[j] = tk__expf((dst[j] + src[j]) - mx);
        s += tk__chunk_sum(dst, m);
    }
    return s;
}

/* keeps GCC from unrolling a 16-lane loop into scalars before vectorising it */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && __GNUC__ >= 8
#define TK__NOUNROLL _Pragma("GCC unroll 1")
#else
#define TK__NOUNROLL
#endif

/* tk__exp_sum / tk__exp_sum_bias (b NULL or not) that also gathers the softmax row's
   moments: x (n) = exp(x (+ b) - mx) in place, with the same values and the same sum
   (r[0]: tk__exp_sum on t = x (+ b) - mx, chunk by chunk: the probabilities are
   bit-identical), and r[1..5] = sum e t, sum e t^2, sum t, sum t^2, count over the
   finite t (a -inf bias entry masks its key: e = 0 and it is not counted; the test is
   t > -1e30, which -ffast-math cannot fold away as it would a test against infinity).
   Three passes over each 256-key chunk in L1: t and its plain moments, the
   exponentials, the weighted moments (each a 16-lane loop GCC vectorises). */
TK__NOINLINE static void tk__exp_stats(float *x, const float *b, float mx, int n, double *r)
{
    int c0, j, l, k;
    for (k = 0; k < 6; k++) r[k] = 0.0;
    for (c0 = 0; c0 < n; c0 += TK__CHUNK) {
        const int m = n - c0 < TK__CHUNK ? n - c0 : TK__CHUNK;
        float a[TK__LANES], q[TK__LANES], s1[TK__LANES], s2[TK__LANES], c[TK__LANES];
        float tb[TK__CHUNK];
        float *d = x + c0;
        for (l = 0; l < TK__LANES; l++) a[l] = q[l] = s1[l] = s2[l] = c[l] = 0.0f;
        /* pass 1: t, its unweighted moments; a masked key's t becomes -1e30 (its
           exponential is 0 either way, and e t, e t^2 stay 0 in pass 3) */
        if (b) {
            const float *bb = b + c0;
#define TK__STATS_T_MASKED(J, L)                                                           \
    do {                                                                                   \
        const float t_ = (d[J] + bb[J]) - mx;                                              \
        const float ok_ = t_ > -1e30f ? 1.0f : 0.0f, tf_ = t_ > -1e30f ? t_ : 0.0f;        \
        tb[J] = t_ > -1e30f ? t_ : -1e30f;                                                 \
        s1[L] += tf_; s2[L] += tf_ * tf_; c[L] += ok_;                                     \
    } while (0)
            for (j = 0; j + TK__LANES <= m; j += TK__LANES) {
                TK__NOUNROLL
                for (l = 0; l < TK__LANES; l++) TK__STATS_T_MASKED(j + l, l);
            }
            for (; j < m; j++) TK__STATS_T_MASKED(j, 0);
#undef TK__STATS_T_MASKED
        } else {
            for (j = 0; j + TK__LANES <= m; j += TK__LANES) {
                TK__NOUNROLL
                for (l = 0; l < TK__LANES; l++) {
                    const float t = d[j + l] - mx;
                    tb[j + l] = t;
                    s1[l] += t;
                    s2[l] += t * t;
                }
            }
            for (; j < m; j++) {
                const float t = d[j] - mx;
                tb[j] = t;
                s1[0] += t;
                s2[0] += t * t;
            }
            c[0] = (float)m;
        }
        /* pass 2: the exponentials and their sum, as tk__exp_sum(_bias) computes them
           (t - 0 = t; a masked key: exp(-1e30) = exp(-inf) = 0) */
        r[0] += tk__exp_sum(d, tb, 0.0f, m);
        /* pass 3: the weighted moments */
        for (j = 0; j + TK__LANES <= m; j += TK__LANES) {
            TK__NOUNROLL
            for (l = 0; l < TK__LANES; l++) {
                const float et = d[j + l] * tb[j + l];
                a[l] += et;
                q[l] += et * tb[j + l];
            }
        }
        for (; j < m; j++) {
            const float et = d[j] * tb[j];
            a[0] += et;
            q[0] += et * tb[j];
        }
        for (l = 0; l < TK__LANES; l++) {
            r[1] += (double)a[l];
            r[2] += (double)q[l];
            r[3] += (double)s1[l];
            r[4] += (double)s2[l];
            r[5] += (double)c[l];
        }
    }
}

/* sum of x (n), same fixed order as tk__exp_sum */
static double tk__row_sum(const float *x, int n)
{
    double s = 0.0;
    int c0;
    for (c0 = 0; c0 < n; c0 += TK__CHUNK)
        s += tk__chunk_sum(x + c0, n - c0 < TK__CHUNK ? n - c0 : TK__CHUNK);
    return s;
}

/* One row: out = softmax(x), max-subtracted. out may alias x. */
static void tk__softmax_row(float *out, const float *x, int C)
{
    float mx = tk__row_max(x, C), inv;
    int c;
    inv = (float)(1.0 / tk__exp_sum(out, x, mx, C));
    for (c = 0; c < C; c++) out[c] *= inv;
}

/* ---------------------------------------------------------------- activations */
#define TK__GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define TK__GELU_A 0.044715f

#define TK__ELEMWISE_CHECK(fn, a, b, n)                                            \
    do {                                                                           \
        TK__NONNULL(fn, a);                                                        \
        TK__NONNULL(fn, b);                                                        \
        TK__NONZERO(fn, n);                                                        \
    } while (0)

/* 1 / (1 + exp(-x)) through tk__expf (vectorisable); exact limits 0 and 1 up to
   ~1e-38. */
static float tk__sigmoid(float x) { return 1.0f / (1.0f + tk__expf(-x)); }

/* GELU (tanh form) uses 0.5 (1 + tanh(u)) = sigmoid(2u), u = k (x + a x^3):
   gelu(x) = x s, gelu'(x) = s + 2 x s (1 - s) du/dx. */
TKDEF int tk_gelu_forward(float *out, const float *inp, size_t n)
{
    ptrdiff_t c0, nn = (ptrdiff_t)n;
    TK__ROUTE("tk_gelu_forward", out, TK__DEV(inp), tk_gelu_forward_cuda(out, inp, n, NULL));
    TK__ELEMWISE_CHECK("tk_gelu_forward", out, inp, n);
    /* chunks: exp(-2u) through the vectorised exp loop, then x sigmoid(2u) */
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (c0 = 0; c0 < nn; c0 += TK__CHUNK) {
        float e[TK__CHUNK];
        const float *x = inp + c0;
        int m = nn - c0 < TK__CHUNK ? (int)(nn - c0) : TK__CHUNK, j;
        for (j = 0; j < m; j++) /* -2u */
            e[j] = -2.0f * (TK__GELU_K * (x[j] + TK__GELU_A * x[j] * x[j] * x[j]));
        (void)tk__exp_sum(e, e, 0.0f, m);
        for (j = 0; j < m; j++) out[c0 + j] = x[j] / (1.0f + e[j]);
    }
    return TK_OK;
}

/* g (m) = d gelu / dx at x (m), m <= TK__CHUNK. A function of its own: inside the
   OpenMP-outlined loop GCC leaves the exp loop scalar. */
static void tk__gelu_grad_chunk(float *g, const float *x, int m)
{
    float e[TK__CHUNK];
    int j;
    for (j = 0; j < m; j++) { /* -2u, capped so exp stays finite (e sg stays exact) */
        float v = -2.0f * (TK__GELU_K * (x[j] + TK__GELU_A * x[j] * x[j] * x[j]));
        g[j] = v < 80.0f ? v : 80.0f;
    }
    (void)tk__exp_sum(e, g, 0.0f, m); /* e = exp(-2u) (the sum is not needed) */
    for (j = 0; j < m; j++) {
        float xj = x[j], sg = 1.0f / (1.0f + e[j]); /* sigmoid(2u) */
        float du = TK__GELU_K * (1.0f + 3.0f * TK__GELU_A * xj * xj);
        /* 1 - sg = e sg: written as 1.0f - sg it cancels for large x (10% relative error
           at x = 4.6, 1e-6 absolute in g, found by the CUDA parity test) */
        g[j] = sg + 2.0f * xj * sg * (e[j] * sg) * du;
    }
}

TKDEF int tk_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    ptrdiff_t c0, nn = (ptrdiff_t)n;
    TK__ROUTE("tk_gelu_backward", dinp, TK__DEV(inp) && TK__DEV(dout), tk_gelu_backward_cuda(dinp, inp, dout, n, NULL));
    TK__ELEMWISE_CHECK("tk_gelu_backward", dinp, inp, n);
    TK__NONNULL("tk_gelu_backward", dout);
    /* chunks of TK__CHUNK: the derivative goes to a local buffer first (a loop the
       compiler vectorises: no aliasing), then dinp += g * dout */
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (c0 = 0; c0 < nn; c0 += TK__CHUNK) {
        float g[TK__CHUNK];
        int m = nn - c0 < TK__CHUNK ? (int)(nn - c0) : TK__CHUNK, j;
        tk__gelu_grad_chunk(g, inp + c0, m);
        for (j = 0; j < m; j++) dinp[c0 + j] += g[j] * dout[c0 + j];
    }
    return TK_OK;
}

TKDEF int tk_relu2_forward(float *out, const float *inp, size_t n)
{
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE("tk_relu2_forward", out, TK__DEV(inp), tk_relu2_forward_cuda(out, inp, n, NULL));
    TK__ELEMWISE_CHECK("tk_relu2_forward", out, inp, n);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) {
        float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        out[i] = r * r;
    }
    return TK_OK;
}

TKDEF int tk_relu2_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE("tk_relu2_backward", dinp, TK__DEV(inp) && TK__DEV(dout),
              tk_relu2_backward_cuda(dinp, inp, dout, n, NULL));
    TK__ELEMWISE_CHECK("tk_relu2_backward", dinp, inp, n);
    TK__NONNULL("tk_relu2_backward", dout);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) {
        float r = inp[i] > 0.0f ? inp[i] : 0.0f;
        dinp[i] += 2.0f * r * dout[i];
    }
    return TK_OK;
}

TKDEF int tk_silu_forward(float *out, const float *inp, size_t n)
{
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE("tk_silu_forward", out, TK__DEV(inp), tk_silu_forward_cuda(out, inp, n, NULL));
    TK__ELEMWISE_CHECK("tk_silu_forward", out, inp, n);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) out[i] = inp[i] * tk__sigmoid(inp[i]);
    return TK_OK;
}

TKDEF int tk_silu_backward(float *dinp, const float *inp, const float *dout, size_t n)
{
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE("tk_silu_backward", dinp, TK__DEV(inp) && TK__DEV(dout),
              tk_silu_backward_cuda(dinp, inp, dout, n, NULL));
    TK__ELEMWISE_CHECK("tk_silu_backward", dinp, inp, n);
    TK__NONNULL("tk_silu_backward", dout);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) {
        float x = inp[i], sg = tk__sigmoid(x);
        dinp[i] += sg * (1.0f + x * (1.0f - sg)) * dout[i];
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- gated relu2, rope */
TKDEF int tk_relu2_gated_forward(float *out, const float *inp, int N, int F)
{
    static const char *fn = "tk_relu2_gated_forward";
    int i;
    TK__ROUTE(fn, out, TK__DEV(inp), tk_relu2_gated_forward_cuda(out, inp, N, F, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, F);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * F > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *a = inp + (size_t)i * 2 * F, *b = a + F; /* [a | b] */
        float *o = out + (size_t)i * F;
        int j;
        for (j = 0; j < F; j++) {
            float r = a[j] > 0.0f ? a[j] : 0.0f;
            o[j] = r * r * b[j];
        }
    }
    return TK_OK;
}

TKDEF int tk_relu2_gated_backward(float *dinp, const float *inp, const float *dout, int N,
                                  int F)
{
    static const char *fn = "tk_relu2_gated_backward";
    int i;
    TK__ROUTE(fn, dinp, TK__DEV(inp) && TK__DEV(dout),
              tk_relu2_gated_backward_cuda(dinp, inp, dout, N, F, NULL));
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, dout);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, F);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * F > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *a = inp + (size_t)i * 2 * F, *b = a + F, *g = dout + (size_t)i * F;
        float *da = dinp + (size_t)i * 2 * F, *db = da + F;
        int j;
        for (j = 0; j < F; j++) {
            float r = a[j] > 0.0f ? a[j] : 0.0f;
            da[j] += g[j] * 2.0f * r * b[j];
            db[j] += g[j] * r * r;
        }
    }
    return TK_OK;
}

/* the argument checks of tk_rope and tk_rope_cuda */
static int tk__check_rope(const char *fn, const float *x, int B, int H, int T, int D,
                          float base, int inverse)
{
    TK__NONNULL(fn, x);
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, H);
    TK__POSDIM(fn, T);
    if (D < 2 || D % 2 != 0)
        return tk__fail(TK_EINVAL, "%s: D must be even and >= 2, got %d", fn, D);
    if (!tk__finite(base) || !(base > 1.0f))
        return tk__fail(TK_EINVAL, "%s: base must be finite and > 1 (got %g)", fn,
                        (double)base);
    if (inverse != 0 && inverse != 1)
        return tk__fail(TK_EINVAL, "%s: inverse must be 0 or 1 (got %d)", fn, inverse);
    return TK_OK;
}

TKDEF int tk_rope(float *x, int B, int H, int T, int D, float base, int inverse)
{
    static const char *fn = "tk_rope";
    size_t BH;
    int rc, t;
    TK__ROUTE(fn, x, 1, tk_rope_cuda(x, B, H, T, D, base, inverse, NULL));
    rc = tk__check_rope(fn, x, B, H, T, D, base, inverse);
    if (rc != TK_OK) return rc;
    BH = (size_t)B * (size_t)H;
    /* one angle per (t, i), applied to every (b, h) */
    TK__OPS_OMP(omp parallel for schedule(static) if(BH * T * D > TK__PAR_MIN))
    for (t = 0; t < T; t++) {
        size_t bh;
        int i;
        for (i = 0; i < D / 2; i++) {
            double ang = (double)t * pow((double)base, -2.0 * i / (double)D);
            float cs = (float)cos(ang), sn = (float)(inverse ? -sin(ang) : sin(ang));
            for (bh = 0; bh < BH; bh++) {
                float *p = x + (bh * T + t) * D + 2 * i, x0 = p[0], x1 = p[1];
                p[0] = x0 * cs - x1 * sn;
                p[1] = x0 * sn + x1 * cs;
            }
        }
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- softmax */
TKDEF int tk_softmax_forward(float *out, const float *inp, int N, int C)
{
    static const char *fn = "tk_softmax_forward";
    int i;
    TK__ROUTE(fn, out, TK__DEV(inp), tk_softmax_forward_cuda(out, inp, N, C, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) tk__softmax_row(out + (size_t)i * C, inp + (size_t)i * C, C);
    return TK_OK;
}

TKDEF int tk_softmax_backward(float *dinp, const float *dout, const float *out, int N, int C)
{
    static const char *fn = "tk_softmax_backward";
    int i;
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__NONNULL(fn, out);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    /* dx_j += y_j (dy_j - sum_c dy_c y_c) */
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *y = out + (size_t)i * C, *g = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C, dot = 0.0f;
        int c;
        for (c = 0; c < C; c++) dot += g[c] * y[c];
        for (c = 0; c < C; c++) dx[c] += y[c] * (g[c] - dot);
    }
    return TK_OK;
}

TKDEF int tk_logsoftmax_forward(float *out, const float *inp, int N, int C)
{
    static const char *fn = "tk_logsoftmax_forward";
    int i;
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *x = inp + (size_t)i * C;
        float *o = out + (size_t)i * C, mx = tk__row_max(x, C), lse;
        int c;
        lse = mx + (float)log(tk__exp_sum(NULL, x, mx, C));
        for (c = 0; c < C; c++) o[c] = x[c] - lse;
    }
    return TK_OK;
}

TKDEF int tk_logsoftmax_backward(float *dinp, const float *dout, const float *out, int N, int C)
{
    static const char *fn = "tk_logsoftmax_backward";
    int i;
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__NONNULL(fn, out);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    /* dx_j += dy_j - exp(y_j) sum_c dy_c */
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *y = out + (size_t)i * C, *g = dout + (size_t)i * C;
        float *dx = dinp + (size_t)i * C, sum = 0.0f;
        int c;
        for (c = 0; c < C; c++) sum += g[c];
        for (c = 0; c < C; c++) dx[c] += g[c] - tk__expf(y[c]) * sum;
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- residual */
TKDEF int tk_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    static const char *fn = "tk_residual_forward";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE(fn, out, TK__DEV(a) && TK__DEV(b), tk_residual_forward_cuda(out, a, b, n, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, a);
    TK__NONNULL(fn, b);
    TK__NONZERO(fn, n);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) out[i] = a[i] + b[i];
    return TK_OK;
}

TKDEF int tk_residual_backward(float *da, float *db, const float *dout, size_t n)
{
    static const char *fn = "tk_residual_backward";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE(fn, dout, TK__DEV0(da) && TK__DEV0(db), tk_residual_backward_cuda(da, db, dout, n, NULL));
    TK__NONNULL(fn, dout);
    TK__NONZERO(fn, n);
    if (da) {
        TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
        for (i = 0; i < nn; i++) da[i] += dout[i];
    }
    if (db) {
        TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
        for (i = 0; i < nn; i++) db[i] += dout[i];
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- dropout */
TKDEF int tk_dropout_forward(float *out, uint8_t *mask, const float *inp, size_t n,
                             float p, tk_rng *rng)
{
    static const char *fn = "tk_dropout_forward";
    size_t i;
    float scale;
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, mask);
    TK__NONNULL(fn, inp);
    TK__NONZERO(fn, n);
    if (!tk__finite(p) || p < 0.0f || p >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: p must be in [0, 1) (got %g)", fn, (double)p);
    if (p == 0.0f) {
        for (i = 0; i < n; i++) {
            out[i] = inp[i];
            mask[i] = 1u;
        }
        return TK_OK;
    }
    TK__NONNULL(fn, rng);
    scale = 1.0f / (1.0f - p);
    /* serial: the mask is a pure function of the rng state, whatever the threads */
    for (i = 0; i < n; i++) {
        uint8_t keep = (uint8_t)(tk_rng_uniform(rng) >= p);
        mask[i] = keep;
        out[i] = keep ? inp[i] * scale : 0.0f;
    }
    return TK_OK;
}

TKDEF int tk_dropout_backward(float *dinp, const float *dout, const uint8_t *mask,
                              size_t n, float p)
{
    static const char *fn = "tk_dropout_backward";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    float scale;
    TK__ROUTE(fn, dinp, TK__DEV(dout) && TK__DEV(mask),
              tk_dropout_backward_cuda(dinp, dout, mask, n, p, NULL));
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__NONNULL(fn, mask);
    TK__NONZERO(fn, n);
    if (!tk__finite(p) || p < 0.0f || p >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: p must be in [0, 1) (got %g)", fn, (double)p);
    scale = 1.0f / (1.0f - p);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++)
        if (mask[i]) dinp[i] = fmaf(dout[i], scale, dinp[i]);
    return TK_OK;
}

/* Functions for both the host and the device (nvcc compiles them for both; the CUDA
   bodies in cuda/tensor.cuh call them): the seeded dropout's hash here, the attention
   statistics' tk__mom_write below. */
#if defined(__CUDACC__)
#define TK__HD __host__ __device__
#else
#define TK__HD
#endif
#define TK__SM64_GAMMA 0x9E3779B97F4A7C15ULL /* SplitMix64's increment (odd) */

/* SplitMix64's output mixer (Stafford's Mix13): a bijection of uint64_t */
static TK__HD uint64_t tk__mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The per-call key of tk_dropout_seeded_forward: m(seed + G) */
static TK__HD uint64_t tk__dropout_key(uint64_t seed)
{
    return tk__mix64(seed + TK__SM64_GAMMA);
}

/* 1 when element i is kept: u = top 24 bits of m(key + i G) as a float in [0,1), u >= p */
static TK__HD int tk__dropout_keep(uint64_t key, uint64_t i, float p)
{
    uint32_t top = (uint32_t)(tk__mix64(key + i * TK__SM64_GAMMA) >> 40);
    return (float)top * (1.0f / 16777216.0f) >= p;
}

/* p in [0, 1) and finite (the dropout functions' common check) */
static int tk__check_dropout_p(const char *fn, float p)
{
    if (!tk__finite(p) || p < 0.0f || p >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: p must be in [0, 1) (got %g)", fn, (double)p);
    return TK_OK;
}

TKDEF int tk_dropout_seeded_forward(float *out, uint8_t *mask, const float *inp, size_t n,
                                    float p, uint64_t seed)
{
    static const char *fn = "tk_dropout_seeded_forward";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    uint64_t key;
    float scale;
    int rc;
    TK__ROUTE(fn, out, TK__DEV(mask) && TK__DEV(inp),
              tk_dropout_seeded_forward_cuda(out, mask, inp, n, p, seed, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, mask);
    TK__NONNULL(fn, inp);
    TK__NONZERO(fn, n);
    if ((rc = tk__check_dropout_p(fn, p)) != TK_OK) return rc;
    if (p == 0.0f) { /* a copy (bit for bit, NaN payloads included), as tk_dropout_forward */
        TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
        for (i = 0; i < nn; i++) {
            out[i] = inp[i];
            mask[i] = 1u;
        }
        return TK_OK;
    }
    scale = 1.0f / (1.0f - p);
    key = tk__dropout_key(seed);
    /* element i depends on (key, i) only: any thread count gives the same bits */
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) {
        uint8_t keep = (uint8_t)tk__dropout_keep(key, (uint64_t)i, p);
        mask[i] = keep;
        out[i] = keep ? inp[i] * scale : 0.0f;
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- sigmoid, row ops */
TKDEF int tk_sigmoid_forward(float *out, const float *x, size_t n)
{
    static const char *fn = "tk_sigmoid_forward";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE(fn, out, TK__DEV(x), tk_sigmoid_forward_cuda(out, x, n, NULL));
    TK__ELEMWISE_CHECK(fn, out, x, n);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) out[i] = tk__sigmoid(x[i]);
    return TK_OK;
}

TKDEF int tk_scale(float *out, const float *x, float alpha, size_t n)
{
    static const char *fn = "tk_scale";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE(fn, out, TK__DEV(x), tk_scale_cuda(out, x, alpha, n, NULL));
    TK__ELEMWISE_CHECK(fn, out, x, n);
    if (!(alpha == alpha && alpha - alpha == 0.0f)) return tk__fail(TK_EINVAL, "%s: alpha must be finite", fn);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) out[i] = alpha * x[i];
    return TK_OK;
}

TKDEF int tk_shift(float *out, const float *x, float beta, size_t n)
{
    static const char *fn = "tk_shift";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE(fn, out, TK__DEV(x), tk_shift_cuda(out, x, beta, n, NULL));
    TK__ELEMWISE_CHECK(fn, out, x, n);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) out[i] = x[i] + beta;
    return TK_OK;
}

static int tk__dwconv_check(const char *fn, int B, int T, int C, int K)
{
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, C);
    TK__POSDIM(fn, K);
    if ((double)B * T * C > 2147483647.0 || (double)K * C > 2147483647.0)
        return tk__fail(TK_EINVAL, "%s: B*T*C and K*C must fit an int", fn);
    return TK_OK;
}

TKDEF int tk_causal_dwconv_forward(float *out, const float *inp, const float *w, int B, int T,
                                   int C, int K, int accumulate)
{
    static const char *fn = "tk_causal_dwconv_forward";
    int r, rc;
    TK__ROUTE(fn, out, TK__DEV(inp) && TK__DEV(w),
              tk_causal_dwconv_forward_cuda(out, inp, w, B, T, C, K, accumulate, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__NONNULL(fn, w);
    if ((rc = tk__dwconv_check(fn, B, T, C, K)) != TK_OK) return rc;
    if (accumulate != 0 && accumulate != 1) return tk__fail(TK_EINVAL, "%s: accumulate must be 0 or 1", fn);
    if (out == inp) return tk__fail(TK_EINVAL, "%s: out must not alias inp", fn);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * C * K > TK__PAR_MIN))
    for (r = 0; r < B * T; r++) {
        int t = r % T, j, ch;
        float *o = out + (size_t)r * C;
        if (!accumulate)
            for (ch = 0; ch < C; ch++) o[ch] = 0.0f;
        for (j = 0; j < K && j <= t; j++) {
            const float *xs = inp + (size_t)(r - j) * C, *wj = w + (size_t)j * C;
            for (ch = 0; ch < C; ch++) o[ch] = fmaf(wj[ch], xs[ch], o[ch]);
        }
    }
    return TK_OK;
}

TKDEF int tk_causal_dwconv_backward(float *dinp, float *dw, const float *dout, const float *inp,
                                    const float *w, int B, int T, int C, int K)
{
    static const char *fn = "tk_causal_dwconv_backward";
    int r, jc, rc;
    TK__ROUTE(fn, dout, TK__DEV0(dinp) && TK__DEV0(dw) && TK__DEV0(inp) && TK__DEV0(w),
              tk_causal_dwconv_backward_cuda(dinp, dw, dout, inp, w, B, T, C, K, NULL));
    TK__NONNULL(fn, dout);
    if ((rc = tk__dwconv_check(fn, B, T, C, K)) != TK_OK) return rc;
    if ((!dinp && !dw) || (dinp && !w) || (dw && !inp))
        return tk__fail(TK_EINVAL, "%s: need dinp (with w) and/or dw (with inp)", fn);
    if (dinp == dout) return tk__fail(TK_EINVAL, "%s: dinp must not alias dout", fn);
    if (dinp) {
        TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * C * K > TK__PAR_MIN))
        for (r = 0; r < B * T; r++) {
            int t = r % T, j, ch;
            float *d = dinp + (size_t)r * C;
            for (j = 0; j < K && t + j < T; j++) {
                const float *gs = dout + (size_t)(r + j) * C, *wj = w + (size_t)j * C;
                for (ch = 0; ch < C; ch++) d[ch] = fmaf(wj[ch], gs[ch], d[ch]);
            }
        }
    }
    if (dw) {
        TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * C * K > TK__PAR_MIN))
        for (jc = 0; jc < K * C; jc++) {
            int j = jc / C, ch = jc % C, bb, t;
            double acc = 0.0;
            for (bb = 0; bb < B; bb++)
                for (t = j; t < T; t++) {
                    size_t rr = (size_t)bb * T + t;
                    acc += (double)dout[rr * C + ch] * inp[(rr - j) * C + ch];
                }
            dw[jc] += (float)acc;
        }
    }
    return TK_OK;
}

TKDEF int tk_sigmoid_backward(float *dx, const float *y, const float *dy, size_t n)
{
    static const char *fn = "tk_sigmoid_backward";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    TK__ROUTE(fn, dx, TK__DEV(y) && TK__DEV(dy), tk_sigmoid_backward_cuda(dx, y, dy, n, NULL));
    TK__ELEMWISE_CHECK(fn, dx, y, n);
    TK__NONNULL(fn, dy);
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i++) dx[i] = fmaf(dy[i] * y[i], 1.0f - y[i], dx[i]);
    return TK_OK;
}

/* the common checks of the (N,C) row ops: three buffers, N, C > 0 */
static int tk__check_rows3(const char *fn, const void *out, const void *a, const void *b,
                           int N, int C)
{
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, a);
    TK__NONNULL(fn, b);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, C);
    return TK_OK;
}

TKDEF int tk_rowscale(float *out, const float *x, const float *s, int N, int C)
{
    static const char *fn = "tk_rowscale";
    int i, rc;
    TK__ROUTE(fn, out, TK__DEV(x) && TK__DEV(s), tk_rowscale_cuda(out, x, s, N, C, NULL));
    if ((rc = tk__check_rows3(fn, out, x, s, N, C)) != TK_OK) return rc;
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C, si = s[i];
        float *o = out + (size_t)i * C;
        int j;
        for (j = 0; j < C; j++) o[j] = si * xr[j];
    }
    return TK_OK;
}

/* sum_j a[j] b[j] in double (each product exact), 4 partial sums in a fixed order */
static double tk__dot_d(const float *a, const float *b, int C)
{
    double p0 = 0.0, p1 = 0.0, p2 = 0.0, p3 = 0.0;
    int j;
    for (j = 0; j + 4 <= C; j += 4) {
        p0 += (double)a[j] * (double)b[j];
        p1 += (double)a[j + 1] * (double)b[j + 1];
        p2 += (double)a[j + 2] * (double)b[j + 2];
        p3 += (double)a[j + 3] * (double)b[j + 3];
    }
    for (; j < C; j++) p0 += (double)a[j] * (double)b[j];
    return (p0 + p1) + (p2 + p3);
}

TKDEF int tk_rowdot(float *out, const float *a, const float *b, int N, int C)
{
    static const char *fn = "tk_rowdot";
    int i, rc;
    TK__ROUTE(fn, out, TK__DEV(a) && TK__DEV(b), tk_rowdot_cuda(out, a, b, N, C, NULL));
    if ((rc = tk__check_rows3(fn, out, a, b, N, C)) != TK_OK) return rc;
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++)
        out[i] = (float)((double)out[i] +
                         tk__dot_d(a + (size_t)i * C, b + (size_t)i * C, C));
    return TK_OK;
}

TKDEF int tk_residual_rows_forward(float *out, const float *x, const float *br,
                                   const float *s, int N, int C)
{
    static const char *fn = "tk_residual_rows_forward";
    int i, rc;
    TK__ROUTE(fn, out, TK__DEV(x) && TK__DEV(br) && TK__DEV(s),
              tk_residual_rows_forward_cuda(out, x, br, s, N, C, NULL));
    if ((rc = tk__check_rows3(fn, out, x, br, N, C)) != TK_OK) return rc;
    TK__NONNULL(fn, s);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * C > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *xr = x + (size_t)i * C, *br_ = br + (size_t)i * C, si = s[i];
        float *o = out + (size_t)i * C;
        int j;
        for (j = 0; j < C; j++) o[j] = fmaf(si, br_[j], xr[j]);
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- causal mean gate */
#define TK__GATE_MAXH 256 /* heads of the causal mean gate (a per-thread double array) */

static int tk__check_gate(const char *fn, const void *o1, const void *o2, const void *in,
                          int B, int T, int H)
{
    TK__NONNULL(fn, o1);
    TK__NONNULL(fn, o2);
    TK__NONNULL(fn, in);
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, H);
    if (H > TK__GATE_MAXH)
        return tk__fail(TK_EINVAL, "%s: H must be <= %d, got %d", fn, TK__GATE_MAXH, H);
    return TK_OK;
}

/* the gate's sigmoid of the running mean, in double (the device computes the same) */
static TK__HD float tk__gate_sig(double pre) { return (float)(1.0 / (1.0 + exp(-pre))); }

TKDEF int tk_causal_mean_gate_forward(float *g, float *sig, const float *z, int B, int T,
                                      int H)
{
    static const char *fn = "tk_causal_mean_gate_forward";
    int b, rc;
    TK__ROUTE(fn, g, TK__DEV(sig) && TK__DEV(z),
              tk_causal_mean_gate_forward_cuda(g, sig, z, B, T, H, NULL));
    if ((rc = tk__check_gate(fn, g, sig, z, B, T, H)) != TK_OK) return rc;
    /* per batch row: time outer, heads inner (contiguous), one running sum per head */
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * H > TK__PAR_MIN / 8 && B > 1))
    for (b = 0; b < B; b++) {
        double acc[TK__GATE_MAXH];
        int t, h;
        for (h = 0; h < H; h++) acc[h] = 0.0;
        for (t = 0; t < T; t++) {
            const size_t o = ((size_t)b * T + t) * (size_t)H;
            double sum = 0.0;
            for (h = 0; h < H; h++) {
                acc[h] += (double)z[o + h];
                sig[o + h] = tk__gate_sig(acc[h] / (double)(t + 1));
            }
            for (h = 0; h < H; h++) sum += (double)sig[o + h];
            g[(size_t)b * T + t] = (float)(sum / (double)H);
        }
    }
    return TK_OK;
}

TKDEF int tk_causal_mean_gate_backward(float *dz, const float *dg, const float *sig, int B,
                                       int T, int H)
{
    static const char *fn = "tk_causal_mean_gate_backward";
    int b, rc;
    TK__ROUTE(fn, dz, TK__DEV(dg) && TK__DEV(sig),
              tk_causal_mean_gate_backward_cuda(dz, dg, sig, B, T, H, NULL));
    if ((rc = tk__check_gate(fn, dz, dg, sig, B, T, H)) != TK_OK) return rc;
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * H > TK__PAR_MIN / 8 && B > 1))
    for (b = 0; b < B; b++) {
        double acc[TK__GATE_MAXH];
        int t, h;
        for (h = 0; h < H; h++) acc[h] = 0.0;
        for (t = T - 1; t >= 0; t--) {
            const size_t o = ((size_t)b * T + t) * (size_t)H;
            const double d = (double)dg[(size_t)b * T + t] / (double)H;
            for (h = 0; h < H; h++) {
                const double s = (double)sig[o + h];
                acc[h] += d * s * (1.0 - s) / (double)(t + 1);
                dz[o + h] = (float)((double)dz[o + h] + acc[h]);
            }
        }
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- row gather, combine */
/* every idx[i] (n entries) in [0, nsrc), else TK_ERANGE */
static int tk__check_rows_idx(const char *fn, const int *idx, size_t n, int nsrc)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (idx[i] < 0 || idx[i] >= nsrc)
            return tk__fail(TK_ERANGE, "%s: idx[%lu] = %d outside [0, %d)", fn,
                            (unsigned long)i, idx[i], nsrc);
    return TK_OK;
}

static int tk__check_gather(const char *fn, const float *out, const float *src, int nsrc,
                            const int *idx, int n, int C)
{
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, src);
    TK__NONNULL(fn, idx);
    TK__POSDIM(fn, nsrc);
    TK__POSDIM(fn, n);
    TK__POSDIM(fn, C);
    return TK_OK;
}

TKDEF int tk_rows_gather(float *out, const float *src, int nsrc, const int *idx, int n,
                         int C)
{
    static const char *fn = "tk_rows_gather";
    int i, rc;
    TK__ROUTE(fn, out, TK__DEV(src) && TK__DEV(idx),
              tk_rows_gather_cuda(out, src, nsrc, idx, n, C, NULL));
    if ((rc = tk__check_gather(fn, out, src, nsrc, idx, n, C)) != TK_OK) return rc;
    if ((rc = tk__check_rows_idx(fn, idx, (size_t)n, nsrc)) != TK_OK) return rc;
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)n * C > TK__PAR_MIN))
    for (i = 0; i < n; i++)
        memcpy(out + (size_t)i * C, src + (size_t)idx[i] * C, (size_t)C * sizeof(float));
    return TK_OK;
}

/* the sizes and idx of the combine (forward and backward) */
static int tk__check_combine_dims(const char *fn, const int *idx, int nsrc, int N, int K, int C)
{
    TK__NONNULL(fn, idx);
    TK__POSDIM(fn, nsrc);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, K);
    TK__POSDIM(fn, C);
    return TK_OK;
}

static int tk__check_combine_fwd(const char *fn, const float *out, const float *src, int nsrc,
                                 const int *idx, int N, int K, int C, int accumulate)
{
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, src);
    if (accumulate != 0 && accumulate != 1)
        return tk__fail(TK_EINVAL, "%s: accumulate must be 0 or 1 (got %d)", fn, accumulate);
    return tk__check_combine_dims(fn, idx, nsrc, N, K, C);
}

/* dsrc, dw: at least one; src needed only for dw */
static int tk__check_combine_bwd(const char *fn, const float *dsrc, const float *dw,
                                 const float *dout, const float *src, int nsrc, const int *idx,
                                 int N, int K, int C)
{
    if (!dsrc && !dw) return tk__fail(TK_EINVAL, "%s: dsrc and dw are both NULL", fn);
    TK__NONNULL(fn, dout);
    if (dw && !src) return tk__fail(TK_EINVAL, "%s: src is NULL (needed for dw)", fn);
    return tk__check_combine_dims(fn, idx, nsrc, N, K, C);
}

TKDEF int tk_rows_combine_forward(float *out, const float *src, int nsrc, const int *idx,
                                  const float *w, int N, int K, int C, int accumulate)
{
    static const char *fn = "tk_rows_combine_forward";
    int n, rc;
    TK__ROUTE(fn, out, TK__DEV(src) && TK__DEV(idx) && TK__DEV0(w),
              tk_rows_combine_forward_cuda(out, src, nsrc, idx, w, N, K, C, accumulate, NULL));
    if ((rc = tk__check_combine_fwd(fn, out, src, nsrc, idx, N, K, C, accumulate)) != TK_OK)
        return rc;
    if ((rc = tk__check_rows_idx(fn, idx, (size_t)N * K, nsrc)) != TK_OK) return rc;
    /* per element: (base + t_0) + t_1 + ..., k in order (the device's order too) */
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * K * C > TK__PAR_MIN))
    for (n = 0; n < N; n++) {
        float *o = out + (size_t)n * C;
        int k, j;
        if (!accumulate)
            for (j = 0; j < C; j++) o[j] = 0.0f;
        for (k = 0; k < K; k++) {
            const size_t r = (size_t)n * K + k;
            const float *sr = src + (size_t)idx[r] * C;
            if (w) {
                const float wk = w[r];
                for (j = 0; j < C; j++) o[j] = fmaf(wk, sr[j], o[j]);
            } else {
                for (j = 0; j < C; j++) o[j] += sr[j];
            }
        }
    }
    return TK_OK;
}

TKDEF int tk_rows_combine_backward(float *dsrc, float *dw, const float *dout,
                                   const float *src, int nsrc, const int *idx,
                                   const float *w, int N, int K, int C)
{
    static const char *fn = "tk_rows_combine_backward";
    const size_t NK = (size_t)N * (size_t)K;
    int rc;
    TK__ROUTE(fn, dout, TK__DEV0(dsrc) && TK__DEV0(dw) && TK__DEV0(src) && TK__DEV(idx) && TK__DEV0(w),
              tk_rows_combine_backward_cuda(dsrc, dw, dout, src, nsrc, idx, w, N, K, C, NULL));
    if ((rc = tk__check_combine_bwd(fn, dsrc, dw, dout, src, nsrc, idx, N, K, C)) != TK_OK)
        return rc;
    if ((rc = tk__check_rows_idx(fn, idx, NK, nsrc)) != TK_OK) return rc;
    if (dsrc) {
        /* threads own column blocks; each walks every (n,k) in order, so repeated idx
           entries add up in a fixed order for any thread count */
        int nb = (C + TK__COLBLK - 1) / TK__COLBLK, blk;
        TK__OPS_OMP(omp parallel for schedule(static) if(NK * C > TK__PAR_MIN && nb > 1))
        for (blk = 0; blk < nb; blk++) {
            const int c0 = blk * TK__COLBLK, c1 = c0 + TK__COLBLK < C ? c0 + TK__COLBLK : C;
            size_t r;
            for (r = 0; r < NK; r++) {
                const float *go = dout + (r / (size_t)K) * C;
                float *d = dsrc + (size_t)idx[r] * C;
                int j;
                if (w) {
                    const float wr = w[r];
                    for (j = c0; j < c1; j++) d[j] = fmaf(wr, go[j], d[j]);
                } else {
                    for (j = c0; j < c1; j++) d[j] += go[j];
                }
            }
        }
    }
    if (dw) {
        ptrdiff_t r, nk = (ptrdiff_t)NK;
        TK__OPS_OMP(omp parallel for schedule(static) if(NK * C > TK__PAR_MIN))
        for (r = 0; r < nk; r++)
            dw[r] = (float)((double)dw[r] + tk__dot_d(dout + (size_t)(r / K) * C,
                                                      src + (size_t)idx[r] * C, C));
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- cross-entropy */
TKDEF int tk_crossentropy_forward(float *probs, float *losses, float *mean_ce,
                                  float *mean_loss, const float *logits,
                                  const int *targets, int N, int V, float eps)
{
    static const char *fn = "tk_crossentropy_forward";
    double *rows = NULL; /* (N,2): per-row ce, loss, for an ordered mean */
    int rc, i;
    TK__NONNULL(fn, logits);
    TK__NONNULL(fn, targets);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, V);
    if (!tk__finite(eps) || eps < 0.0f || eps >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: eps must be in [0, 1) (got %g)", fn, (double)eps);
    rc = tk__check_ids(fn, "targets", targets, (size_t)N, V);
    if (rc != TK_OK) return rc;
    if (mean_ce || mean_loss) {
        rows = (double *)TK_MALLOC((size_t)N * 2 * sizeof(double));
        if (!rows) return tk__fail(TK_ENOMEM, "%s: no memory for %d rows", fn, N);
    }
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * V > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *x = logits + (size_t)i * V; /* (V) */
        float *p = probs ? probs + (size_t)i * V : NULL;
        float mx = tk__row_max(x, V);
        double sum = tk__exp_sum(p, x, mx, V), sumx = tk__row_sum(x, V), lse, ce, loss;
        int v;
        lse = (double)mx + log(sum);
        /* -log p_y = lse - x_y; -sum_v (eps/V) log p_v = eps (lse - mean_v x_v) */
        ce = lse - (double)x[targets[i]];
        loss = (1.0 - (double)eps) * ce + (double)eps * (lse - sumx / (double)V);
        if (p) {
            float inv = (float)(1.0 / sum);
            for (v = 0; v < V; v++) p[v] *= inv;
        }
        if (losses) losses[i] = (float)loss;
        if (rows) {
            rows[2 * (size_t)i] = ce;
            rows[2 * (size_t)i + 1] = loss;
        }
    }
    if (rows) {
        double sce = 0.0, sl = 0.0;
        for (i = 0; i < N; i++) {
            sce += rows[2 * (size_t)i];
            sl += rows[2 * (size_t)i + 1];
        }
        if (mean_ce) *mean_ce = (float)(sce / N);
        if (mean_loss) *mean_loss = (float)(sl / N);
        TK_FREE(rows);
    }
    return TK_OK;
}

/* the shared argument checks of the two cross-entropy backward entry points */
static int tk__check_ce_bwd(const char *fn, const int *targets, int N, int V, float eps,
                            float dloss)
{
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, V);
    if (!tk__finite(eps) || eps < 0.0f || eps >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: eps must be in [0, 1) (got %g)", fn, (double)eps);
    if (!tk__finite(dloss))
        return tk__fail(TK_EINVAL, "%s: dloss must be finite (got %g)", fn, (double)dloss);
    return tk__check_ids(fn, "targets", targets, (size_t)N, V);
}

TKDEF int tk_crossentropy_backward(float *dlogits, const float *probs, const int *targets,
                                   int N, int V, float eps, float dloss)
{
    static const char *fn = "tk_crossentropy_backward";
    int rc, i;
    TK__ROUTE(fn, dlogits, TK__DEV(probs) && TK__DEV(targets),
              tk_crossentropy_backward_cuda(dlogits, probs, targets, N, V, eps, dloss, NULL));
    TK__NONNULL(fn, dlogits);
    TK__NONNULL(fn, probs);
    TK__NONNULL(fn, targets);
    rc = tk__check_ce_bwd(fn, targets, N, V, eps, dloss);
    if (rc != TK_OK) return rc;
    /* d loss / d logit_v = p_v - q_v, q = (1-eps) onehot(y) + eps/V */
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * V > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        const float *p = probs + (size_t)i * V;
        float *d = dlogits + (size_t)i * V, u = eps / (float)V;
        int v;
        for (v = 0; v < V; v++) d[v] += dloss * (p[v] - u);
        d[targets[i]] -= dloss * (1.0f - eps);
    }
    return TK_OK;
}

/* One row in place, pass 1: x[v] <- exp(x[v] - m_c) chunk by chunk, m_c the running
   max after chunk c (kept in cmax; the running sum is rescaled when a chunk raises
   it); also sum(x) and the row max. Pass 2 (the caller) multiplies chunk c by
   exp(m_c - max) / sum. So exp is evaluated once per element. At most TK__CE_MAXCH
   chunks: the chunk grows (a multiple of 16) for very wide rows. */
#define TK__CE_MAXCH 512
static int tk__ce_chunk(int V)
{
    int ch = TK__CHUNK;
    if ((V + ch - 1) / ch > TK__CE_MAXCH)
        ch = ((V + TK__CE_MAXCH - 1) / TK__CE_MAXCH + 15) / 16 * 16;
    return ch;
}
static void tk__ce_row_exp(float *x, int V, int ch, float *cmax, float *mx_out,
                           double *sum_out, double *sumx_out)
{
    float mx = 0.0f;
    double sum = 0.0, sumx = 0.0;
    int c0, c, j;
    for (c0 = 0, c = 0; c0 < V; c0 += ch, c++) {
        int m = V - c0 < ch ? V - c0 : ch;
        float *src = x + c0;
        float cm = tk__row_max(src, m);
        if (c0 == 0) {
            mx = cm;
        } else if (cm > mx) {
            sum *= (double)tk__expf(mx - cm);
            mx = cm;
        }
        cmax[c] = mx;
        sumx += tk__chunk_sum(src, m);
        for (j = 0; j < m; j++) src[j] = tk__expf(src[j] - mx);
        sum += tk__chunk_sum(src, m);
    }
    *mx_out = mx;
    *sum_out = sum;
    *sumx_out = sumx;
}

TKDEF int tk_crossentropy_forward_inplace(float *logits, float *losses, float *ce,
                                          const int *targets, int N, int V, float eps)
{
    static const char *fn = "tk_crossentropy_forward_inplace";
    int rc, i, ch;
    TK__ROUTE(fn, logits, TK__DEV(targets) && TK__DEV0(losses) && TK__DEV0(ce),
              tk_crossentropy_forward_inplace_cuda(logits, losses, ce, targets, N, V, eps, NULL));
    TK__NONNULL(fn, logits);
    TK__NONNULL(fn, targets);
    TK__POSDIM(fn, N);
    TK__POSDIM(fn, V);
    if (!tk__finite(eps) || eps < 0.0f || eps >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: eps must be in [0, 1) (got %g)", fn, (double)eps);
    rc = tk__check_ids(fn, "targets", targets, (size_t)N, V);
    if (rc != TK_OK) return rc;
    ch = tk__ce_chunk(V);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * V > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        float *x = logits + (size_t)i * V; /* (V) */
        float mx, cmax[TK__CE_MAXCH], xt = x[targets[i]];
        double sum, sumx, lse, c;
        int c0, cc, v;
        tk__ce_row_exp(x, V, ch, cmax, &mx, &sum, &sumx);
        lse = (double)mx + log(sum);
        c = lse - (double)xt;
        if (ce) ce[i] = (float)c;
        if (losses)
            losses[i] = (float)((1.0 - (double)eps) * c +
                                (double)eps * (lse - sumx / (double)V));
        for (c0 = 0, cc = 0; c0 < V; c0 += ch, cc++) {
            int m = V - c0 < ch ? V - c0 : ch;
            float sc = (float)((double)tk__expf(cmax[cc] - mx) / sum);
            float *dst = x + c0;
            for (v = 0; v < m; v++) dst[v] *= sc;
        }
    }
    return TK_OK;
}

TKDEF int tk_crossentropy_backward_inplace(float *probs, const int *targets, int N, int V,
                                           float eps, float dloss)
{
    static const char *fn = "tk_crossentropy_backward_inplace";
    int rc, i;
    TK__ROUTE(fn, probs, TK__DEV(targets),
              tk_crossentropy_backward_inplace_cuda(probs, targets, N, V, eps, dloss, NULL));
    TK__NONNULL(fn, probs);
    TK__NONNULL(fn, targets);
    rc = tk__check_ce_bwd(fn, targets, N, V, eps, dloss);
    if (rc != TK_OK) return rc;
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)N * V > TK__PAR_MIN))
    for (i = 0; i < N; i++) {
        float *d = probs + (size_t)i * V, u = eps / (float)V;
        int v;
        for (v = 0; v < V; v++) d[v] = dloss * (d[v] - u);
        d[targets[i]] -= dloss * (1.0f - eps);
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- attention */
static int tk__check_attn(const char *fn, const float *bias, int bias_per_head,
                          const float *temp, int B, int H, int T, int D)
{
    int h;
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, H);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, D);
    if (bias && bias_per_head != 0 && bias_per_head != 1)
        return tk__fail(TK_EINVAL, "%s: bias_per_head must be 0 or 1 (got %d)", fn,
                        bias_per_head);
    { /* every buffer (B,H,T,T) and (B,H,T,D) addressable in bytes: exact size_t
         products */
        const size_t lim = ((size_t)-1 >> 1) / sizeof(float);
        size_t bht = (size_t)B;
        int ok = (size_t)H <= lim / bht;
        if (ok) bht *= (size_t)H;
        ok = ok && (size_t)T <= lim / bht;
        if (ok) bht *= (size_t)T;
        ok = ok && (size_t)T <= lim / bht && (size_t)D <= lim / bht;
        if (!ok)
            return tk__fail(TK_EINVAL, "%s: B %d, H %d, T %d, D %d: buffers too large to "
                            "address", fn, B, H, T, D);
    }
    if (temp)
        for (h = 0; h < H; h++)
            if (!tk__finite(temp[h]) || !(temp[h] > 0.0f))
                return tk__fail(TK_EINVAL, "%s: temp[%d] must be finite and > 0 (got %g)",
                                fn, h, (double)temp[h]);
    return TK_OK;
}

/* Causal attention is done in row blocks of TK__ATTN_BR query rows: block [i0, i1)
   only needs key/value rows [0, i1), so the fully masked blocks above the diagonal
   are never computed (about half the work of the full T x T products). The forward
   splits the (b, row block) pairs over the threads (static, interleaved so the
   triangular costs balance) and walks the heads inside, so the bias rows of a block
   stay in cache for every head. The backward splits the heads (batch walked in order
   inside a head, row blocks in order inside a (b,h)), so every reduction (dK, dV,
   dtemp, dbias) has a fixed order. tk_sgemm is bit-identical for any thread count, so
   when there are too few units to split (then tk_sgemm and the row loops take the
   threads instead) the bits are the same. */
#ifndef TK__ATTN_BR
#define TK__ATTN_BR 64
#endif
#ifndef TK__ATTN_BWD_BR
#define TK__ATTN_BWD_BR 128
#endif
static int tk__omp_threads(void)
{
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

/* A softmax row's TK_ATTN_NSTATS statistics from its sums over t = x - m (z = sum e,
   ea = sum e t, eb = sum e t^2, s1 = sum t, s2 = sum t^2, n keys counted):
   H = ln z - E[t], E_p[x] = m + E[t], Var_p = E[t^2] - E[t]^2, mean = m + s1/n,
   var = s2/n - (s1/n)^2 (both variances clamped at 0), n. Host and device (the CUDA
   attention forward writes its stats with it). */
static TK__HD void tk__mom_write(float *st, double z, double ea, double eb, double s1, double s2,
                                 double n, float m)
{
    const double et = ea / z, et2 = eb / z, cnt = n > 0.0 ? n : 1.0;
    const double mu = s1 / cnt, h = log(z) - et;
    double vp = et2 - et * et, vu = s2 / cnt - mu * mu;
    vp = vp > 0.0 ? vp : 0.0;
    vu = vu > 0.0 ? vu : 0.0;
    st[0] = (float)(h > 0.0 ? h : 0.0);
    st[1] = (float)((double)m + et);
    st[2] = (float)vp;
    st[3] = (float)((double)m + mu);
    st[4] = (float)vu;
    st[5] = (float)n;
}

/* row (n) = softmax(row + brow) in place (brow NULL: no bias). The bias is added on
   the fly in the exp pass, which stores exp(row + brow - mx): no extra store or pass
   over the row. The shift mx: given bmax, the row's bias maximum (shared by every head
   of a shared bias, so found once per row block), mx = max(row) + bmax bounds
   max(row + brow) from above and needs no bias loads in the max pass; every term is
   then <= 1 (no overflow), and the terms at the first and the last position (the
   diagonal) are at least exp(-(mx - row[j] - brow[j])), so the bound is used only when
   one of them is within 40 of it (no precision lost to underflow); otherwise, and
   without bmax, mx is the exact maximum of row + brow. Softmax is shift-invariant: the
   two shifts differ in rounding only, and the choice depends on the row alone
   (deterministic). Returns 1 when the normaliser is not finite and positive (a NaN or
   +Inf logit or bias entry, or a row whose visible entries are all -inf): one test per
   row, which is all the checking the inputs get. */
static int tk__attn_softmax_row(float *row, const float *brow, const float *bmax, int n,
                                float *st)
{
    float mx, inv;
    double sum, r[6];
    int j;
    if (brow) {
        const float bound = bmax ? tk__row_max(row, n) + *bmax : 0.0f;
        const float lo0 = row[0] + brow[0], lo1 = row[n - 1] + brow[n - 1];
        if (bmax && (bound - lo0 <= 40.0f || bound - lo1 <= 40.0f)) {
            mx = bound;
        } else {
            float lane[TK__LANES];
            int l;
            for (l = 0; l < TK__LANES; l++) lane[l] = row[0] + brow[0];
            for (j = 0; j + TK__LANES <= n; j += TK__LANES)
                for (l = 0; l < TK__LANES; l++) {
                    float v = row[j + l] + brow[j + l];
                    lane[l] = v > lane[l] ? v : lane[l];
                }
            for (; j < n; j++) {
                float v = row[j] + brow[j];
                lane[0] = v > lane[0] ? v : lane[0];
            }
            mx = lane[0];
            for (l = 1; l < TK__LANES; l++) mx = lane[l] > mx ? lane[l] : mx;
        }
        if (st) tk__exp_stats(row, brow, mx, n, r);
        else sum = tk__exp_sum_bias(row, brow, mx, n);
    } else {
        mx = tk__row_max(row, n);
        if (st) tk__exp_stats(row, NULL, mx, n, r);
        else sum = tk__exp_sum(row, row, mx, n);
    }
    if (st) sum = r[0];
    if (!tk__finite_d(sum) || !(sum > 0.0)) return 1;
    inv = (float)(1.0 / sum);
    for (j = 0; j < n; j++) row[j] *= inv;
    if (st) tk__mom_write(st, r[0], r[1], r[2], r[3], r[4], r[5], mx);
    return 0;
}

/* Rows [i0, i1) of one (b,h): P (T,T) rows = softmax(alpha Q K^T + bias, causal),
   zeros above the diagonal; O (T,D) rows = P V. bb: the (T,T) bias of this head or
   NULL. */
static int tk__attn_fwd_block(float *O, float *P, float *St, const float *Q, const float *K,
                              const float *Vv, const float *bb, const float *bmax, float alpha,
                              int T, int D, int i0, int i1, int par, const int *ld)
{
    /* St: this head's (T, TK_ATTN_NSTATS) row statistics, or NULL */
    /* ld: token strides of Q, K, V, O */
    const int m = i1 - i0, n = i1;
    float *Pb = P + (size_t)i0 * T;
    int rc, i, bad = 0;
    (void)par;
    rc = tk_sgemm(0, 1, m, n, D, alpha, Q + (size_t)i0 * ld[0], ld[0], K, ld[1], 0.0f, Pb, T);
    if (rc != TK_OK) return rc;
    TK__OPS_OMP(omp parallel for schedule(static) reduction(| : bad) if(par && (size_t)m * n > TK__PAR_MIN))
    for (i = i0; i < i1; i++) {
        float *row = P + (size_t)i * T;
        int j;
        bad |= tk__attn_softmax_row(row, bb ? bb + (size_t)i * T : NULL,
                                    bmax ? bmax + (i - i0) : NULL, i + 1,
                                    St ? St + (size_t)i * TK_ATTN_NSTATS : NULL);
        for (j = i + 1; j < T; j++) row[j] = 0.0f;
    }
    if (bad)
        return tk__fail(TK_EINVAL, "tk_attention_forward: a row of logits + bias is not "
                                   "finite (NaN or +Inf in q, k or the bias, or all -inf)");
    /* O rows (m,D) = P rows (m, n) . V (n, D) */
    return tk_sgemm(0, 0, m, D, n, 1.0f, Pb, T, Vv, ld[2], 0.0f, O + (size_t)i0 * ld[3],
                    ld[3]);
}

TKDEF tk_attn_layout tk_attn_layout_contiguous(int H, int T, int D)
{
    tk_attn_layout l;
    int i;
    for (i = 0; i < 4; i++) {
        ptrdiff_t *s = i == 0 ? l.q : i == 1 ? l.k : i == 2 ? l.v : l.out;
        s[0] = (ptrdiff_t)H * T * D;
        s[1] = (ptrdiff_t)T * D;
        s[2] = D;
    }
    return l;
}

TKDEF tk_attn_layout tk_attn_layout_qkv(int H, int T, int D)
{
    tk_attn_layout l;
    const ptrdiff_t C = (ptrdiff_t)H * D;
    int i;
    for (i = 0; i < 3; i++) {
        ptrdiff_t *s = i == 0 ? l.q : i == 1 ? l.k : l.v;
        s[0] = 3 * C * T;
        s[1] = D;
        s[2] = 3 * C;
    }
    l.out[0] = C * T;
    l.out[1] = D;
    l.out[2] = C;
    return l;
}

/* strides non-negative, token strides in int (tk_sgemm's leading dimensions) and >= D,
   every element addressable; ld receives the four token strides */
static int tk__check_layout(const char *fn, const tk_attn_layout *l, int B, int H, int T,
                            int D, int *ld)
{
    int i, j;
    if (!l) return tk__fail(TK_EINVAL, "%s: layout is NULL", fn);
    for (i = 0; i < 4; i++) {
        const ptrdiff_t *s = i == 0 ? l->q : i == 1 ? l->k : i == 2 ? l->v : l->out;
        double hi = (double)D;
        for (j = 0; j < 3; j++)
            if (s[j] < 0) return tk__fail(TK_EINVAL, "%s: negative stride", fn);
        if (s[2] < D || s[2] > 0x7FFFFFFF)
            return tk__fail(TK_EINVAL, "%s: token stride %td outside [D, INT_MAX]", fn, s[2]);
        hi += (double)(B - 1) * s[0] + (double)(H - 1) * s[1] + (double)(T - 1) * s[2];
        if (hi * sizeof(float) > (double)PTRDIFF_MAX / 2)
            return tk__fail(TK_EINVAL, "%s: strided extent too large", fn);
        ld[i] = (int)s[2];
    }
    return TK_OK;
}

TKDEF int tk_attention_forward(float *out, float *probs, const float *q, const float *k,
                               const float *v, const float *bias, int bias_per_head,
                               const float *temp, int B, int H, int T, int D)
{
    tk_attn_layout lay;
    if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
        return tk__fail(TK_EINVAL, "tk_attention_forward: B, H, T, D must be > 0");
    lay = tk_attn_layout_contiguous(H, T, D);
    return tk_attention_forward_strided(&lay, out, probs, q, k, v, bias, bias_per_head, temp,
                                        B, H, T, D);
}

static int tk__attn_forward(const char *fn, const tk_attn_layout *lay, float *out,
                            float *probs, float *stats, const float *q, const float *k,
                            const float *v, const float *bias, int bias_per_head,
                            const float *temp, int B, int H, int T, int D)
{
    size_t TT = (size_t)T * T;
    int rc, u, err = TK_OK, nt, outer, nrb, units, ld[4];
    float *bmax_all = NULL;
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, probs);
    TK__NONNULL(fn, q);
    TK__NONNULL(fn, k);
    TK__NONNULL(fn, v);
    rc = tk__check_attn(fn, bias, bias_per_head, temp, B, H, T, D);
    if (rc != TK_OK) return rc;
    rc = tk__check_layout(fn, lay, B, H, T, D, ld);
    if (rc != TK_OK) return rc;
    nrb = T / TK__ATTN_BR + (T % TK__ATTN_BR != 0);
    if ((long long)B * nrb > 0x7FFFFFFFLL)
        return tk__fail(TK_EINVAL, "%s: B %d x %d row blocks overflow an int", fn, B, nrb);
    units = B * nrb;
    nt = tk__omp_threads();
    outer = nt > 1 && units >= 2 * nt;
    (void)nt;
    /* a shared bias: each row's bias maximum once for all heads and batch rows (see
       tk__attn_softmax_row; found per (batch, row block) before, the same values B times:
       2-3% of a biased forward at B 8, T 1024); a row whose maximum is not finite
       (NaN-led, or all -inf: invalid input) takes the exact path */
    if (bias && !bias_per_head) {
        int i;
        bmax_all = (float *)TK_MALLOC((size_t)T * sizeof(float));
        if (!bmax_all) return tk__fail(TK_ENOMEM, "%s: out of memory (%d floats)", fn, T);
        TK__OPS_OMP(omp parallel for schedule(static) if(nt > 1 && TT > TK__PAR_MIN))
        for (i = 0; i < T; i++) bmax_all[i] = tk__row_max(bias + (size_t)i * T, i + 1);
    }
    /* unit u: row block u / B of batch u % B (neighbouring units, same cost) */
    TK__OPS_OMP(omp parallel for schedule(static, 1) if(outer))
    for (u = 0; u < units; u++) {
        const int rb = u / B, b = u % B;
        const int i0 = rb * TK__ATTN_BR;
        const int i1 = i0 + TK__ATTN_BR < T ? i0 + TK__ATTN_BR : T;
        int h, r = TK_OK;
        const float *bmax = bmax_all ? bmax_all + i0 : NULL;
        for (h = 0; h < H && r == TK_OK; h++) {
            const size_t bh = (size_t)b * H + h;
            const float *bb = bias ? bias + (bias_per_head ? (size_t)h * TT : 0) : NULL;
            const float alpha = 1.0f / (sqrtf((float)D) * (temp ? temp[h] : 1.0f));
            r = tk__attn_fwd_block(out + b * lay->out[0] + h * lay->out[1], probs + bh * TT,
                                   stats ? stats + bh * T * TK_ATTN_NSTATS : NULL,
                                   q + b * lay->q[0] + h * lay->q[1],
                                   k + b * lay->k[0] + h * lay->k[1],
                                   v + b * lay->v[0] + h * lay->v[1], bb, bmax, alpha, T, D,
                                   i0, i1, !outer, ld);
        }
        if (r != TK_OK) {
            TK__OPS_OMP(omp critical(tk__attn_err))
            err = r;
        }
    }
    TK_FREE(bmax_all);
    return err;
}

TKDEF int tk_attention_forward_strided(const tk_attn_layout *lay, float *out, float *probs,
                                       const float *q, const float *k, const float *v,
                                       const float *bias, int bias_per_head,
                                       const float *temp, int B, int H, int T, int D)
{
    return tk__attn_forward("tk_attention_forward", lay, out, probs, NULL, q, k, v, bias,
                            bias_per_head, temp, B, H, T, D);
}

TKDEF int tk_attention_forward_stats(const tk_attn_layout *lay, float *out, float *probs,
                                     float *stats, const float *q, const float *k,
                                     const float *v, const float *bias, int bias_per_head,
                                     const float *temp, int B, int H, int T, int D)
{
    static const char *fn = "tk_attention_forward_stats";
    tk_attn_layout own;
    TK__NONNULL(fn, stats);
    if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
        return tk__fail(TK_EINVAL, "%s: B, H, T, D must be > 0", fn);
    if (!lay) {
        own = tk_attn_layout_contiguous(H, T, D);
        lay = &own;
    }
    return tk__attn_forward(fn, lay, out, probs, stats, q, k, v, bias, bias_per_head, temp,
                            B, H, T, D);
}

/* One (b,h) backward, row block by row block. dS (BWD_BR, T) scratch; S (BWD_BR, T)
   and rowacc (T) scratch when tsum is wanted (it receives sum_ij dS_ij S_ij,
   S = Q K^T unscaled). db (T,T) += dS. */
static int tk__attn_bwd_head(float *dQ, float *dK, float *dV, float *db, double *tsum,
                             const float *dO, const float *P, const float *Q, const float *K,
                             const float *Vv, float alpha, int T, int D, float *dS, float *S,
                             float *rowacc, int par, const int *ld)
{
    /* ld: token strides of Q (and dQ), K (dK), V (dV), O (dO) */
    int rc = TK_OK, i, i0;
    (void)par;
    for (i0 = 0; i0 < T && rc == TK_OK; i0 += TK__ATTN_BWD_BR) {
        const int i1 = i0 + TK__ATTN_BWD_BR < T ? i0 + TK__ATTN_BWD_BR : T;
        const int m = i1 - i0, n = i1;
        const float *Pb = P + (size_t)i0 * T, *dOb = dO + (size_t)i0 * ld[3];
        const float *Qb = Q + (size_t)i0 * ld[0];
        /* dP (m,n) = dO rows . V^T, computed into dS (ld n) */
        rc = tk_sgemm(0, 1, m, n, D, 1.0f, dOb, ld[3], Vv, ld[2], 0.0f, dS, n);
        if (rc == TK_OK && tsum)
            rc = tk_sgemm(0, 1, m, n, D, 1.0f, Qb, ld[0], K, ld[1], 0.0f, S, n);
        if (rc != TK_OK) break;
        /* dS = P * (dP - rowsum(P * dP)) on the causal part; 0 above the diagonal */
        TK__OPS_OMP(omp parallel for schedule(static) if(par && (size_t)m * n > TK__PAR_MIN))
        for (i = i0; i < i1; i++) {
            const float *p = P + (size_t)i * T;
            float *d = dS + (size_t)(i - i0) * n, dot = 0.0f;
            int j;
            for (j = 0; j <= i; j++) dot += p[j] * d[j];
            for (j = 0; j <= i; j++) d[j] = p[j] * (d[j] - dot);
            for (j = i + 1; j < n; j++) d[j] = 0.0f;
            if (db) {
                float *dbr = db + (size_t)i * T;
                for (j = 0; j <= i; j++) dbr[j] += d[j];
            }
            if (tsum) {
                const float *s = S + (size_t)(i - i0) * n;
                float acc = 0.0f;
                for (j = 0; j <= i; j++) acc += d[j] * s[j];
                rowacc[i] = acc;
            }
        }
        /* dV[0:n] += P_b^T dO_b;  dQ_b += alpha dS K[0:n];  dK[0:n] += alpha dS^T Q_b */
        rc = tk_sgemm(1, 0, n, D, m, 1.0f, Pb, T, dOb, ld[3], 1.0f, dV, ld[2]);
        if (rc == TK_OK)
            rc = tk_sgemm(0, 0, m, D, n, alpha, dS, n, K, ld[1], 1.0f, dQ + (size_t)i0 * ld[0],
                          ld[0]);
        if (rc == TK_OK) rc = tk_sgemm(1, 0, n, D, m, alpha, dS, n, Qb, ld[0], 1.0f, dK, ld[1]);
    }
    if (rc == TK_OK && tsum) {
        double acc = 0.0;
        for (i = 0; i < T; i++) acc += (double)rowacc[i];
        *tsum += acc;
    }
    return rc;
}

TKDEF int tk_attention_backward(float *dq, float *dk, float *dv, float *dbias, float *dtemp,
                                const float *dout, const float *probs, const float *q,
                                const float *k, const float *v, int bias_per_head,
                                const float *temp, int B, int H, int T, int D)
{
    tk_attn_layout lay;
    if (B <= 0 || H <= 0 || T <= 0 || D <= 0)
        return tk__fail(TK_EINVAL, "tk_attention_backward: B, H, T, D must be > 0");
    lay = tk_attn_layout_contiguous(H, T, D);
    return tk_attention_backward_strided(&lay, dq, dk, dv, dbias, dtemp, dout, probs, q, k, v,
                                         bias_per_head, temp, B, H, T, D);
}

TKDEF int tk_attention_backward_strided(const tk_attn_layout *lay, float *dq, float *dk,
                                        float *dv, float *dbias, float *dtemp,
                                        const float *dout, const float *probs, const float *q,
                                        const float *k, const float *v, int bias_per_head,
                                        const float *temp, int B, int H, int T, int D)
{
    static const char *fn = "tk_attention_backward";
    size_t TT = (size_t)T * T, per, total, blk;
    float *scratch, *acc = NULL; /* acc (H,T,T): per-head dS sums for a shared dbias */
    int rc, ch, err = TK_OK, nt, outer, ld[4];
    TK__NONNULL(fn, dq);
    TK__NONNULL(fn, dk);
    TK__NONNULL(fn, dv);
    TK__NONNULL(fn, dout);
    TK__NONNULL(fn, probs);
    TK__NONNULL(fn, q);
    TK__NONNULL(fn, k);
    TK__NONNULL(fn, v);
    rc = tk__check_attn(fn, dbias, bias_per_head, temp, B, H, T, D);
    if (rc != TK_OK) return rc;
    rc = tk__check_layout(fn, lay, B, H, T, D, ld);
    if (rc != TK_OK) return rc;
    nt = tk__omp_threads();
    outer = nt > 1 && H >= nt;
    if (!outer) nt = 1;
    /* per thread: dS (BWD_BR,T), and with dtemp S (BWD_BR,T) + row sums (T) */
    blk = (size_t)(T < TK__ATTN_BWD_BR ? T : TK__ATTN_BWD_BR) * T;
    per = dtemp ? 2 * blk + (size_t)T : blk;
    total = (size_t)nt * per + (dbias && !bias_per_head ? (size_t)H * TT : 0);
    scratch = (float *)TK_MALLOC(total * sizeof(float));
    if (!scratch) return tk__fail(TK_ENOMEM, "%s: no memory for T = %d scratch", fn, T);
    if (dbias && !bias_per_head) {
        acc = scratch + (size_t)nt * per;
        memset(acc, 0, (size_t)H * TT * sizeof(float));
    }
    TK__OPS_OMP(omp parallel for schedule(static) num_threads(nt) if(outer))
    for (ch = 0; ch < nt; ch++) { /* chunk ch: a contiguous range, its own scratch */
        int h, h_lo = (int)((long long)H * ch / nt);
        int h_hi = (int)((long long)H * (ch + 1) / nt);
        for (h = h_lo; h < h_hi; h++) {
            int tid = ch, b, r = TK_OK;
            float *dS, *S, *rowacc, *db;
            float th = temp ? temp[h] : 1.0f;
            float alpha = 1.0f / (sqrtf((float)D) * th);
            double tsum = 0.0;
            dS = scratch + (size_t)tid * per;
            S = dS + blk;
            rowacc = S + blk;
            db = dbias ? (bias_per_head ? dbias + (size_t)h * TT : acc + (size_t)h * TT) : NULL;
            for (b = 0; b < B && r == TK_OK; b++) {
                size_t bh = (size_t)b * H + h;
                const ptrdiff_t oq = b * lay->q[0] + h * lay->q[1];
                const ptrdiff_t ok = b * lay->k[0] + h * lay->k[1];
                const ptrdiff_t ov = b * lay->v[0] + h * lay->v[1];
                r = tk__attn_bwd_head(dq + oq, dk + ok, dv + ov, db, dtemp ? &tsum : NULL,
                                      dout + b * lay->out[0] + h * lay->out[1], probs + bh * TT,
                                      q + oq, k + ok, v + ov, alpha, T, D, dS, S, rowacc, !outer,
                                      ld);
            }
            if (r != TK_OK) {
                TK__OPS_OMP(omp critical(tk__attn_err))
                err = r;
            } else if (dtemp) { /* logit = alpha S + bias, d alpha / d temp = -alpha / temp */
                dtemp[h] += (float)(-(double)alpha / (double)th * tsum);
            }
        }
    }
    if (acc && err == TK_OK) { /* shared dbias += sum over heads, in head order */
        ptrdiff_t ij, ntt = (ptrdiff_t)TT;
        TK__OPS_OMP(omp parallel for schedule(static) if(TT > TK__PAR_MIN))
        for (ij = 0; ij < ntt; ij++) {
            float s = 0.0f;
            int hh;
            for (hh = 0; hh < H; hh++) s += acc[(size_t)hh * TT + (size_t)ij];
            dbias[ij] += s;
        }
    }
    TK_FREE(scratch);
    return err;
}

/* ---------------------------------------------------------------- heads */
TKDEF int tk_split_heads_forward(float *q, float *k, float *v, const float *qkv,
                                 int B, int T, int H, int D)
{
    static const char *fn = "tk_split_heads_forward";
    int bt;
    TK__ROUTE(fn, q, TK__DEV(k) && TK__DEV(v) && TK__DEV(qkv),
              tk_split_heads_forward_cuda(q, k, v, qkv, B, T, H, D, NULL));
    TK__NONNULL(fn, q);
    TK__NONNULL(fn, k);
    TK__NONNULL(fn, v);
    TK__NONNULL(fn, qkv);
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, H);
    TK__POSDIM(fn, D);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * H * D > TK__PAR_MIN))
    for (bt = 0; bt < B * T; bt++) {
        int b = bt / T, t = bt % T, h, d;
        size_t C = (size_t)H * D;
        const float *row = qkv + (size_t)bt * 3 * C; /* (3C) */
        for (h = 0; h < H; h++) {
            size_t o = (((size_t)b * H + h) * T + t) * D;
            for (d = 0; d < D; d++) {
                q[o + d] = row[(size_t)h * D + d];
                k[o + d] = row[C + (size_t)h * D + d];
                v[o + d] = row[2 * C + (size_t)h * D + d];
            }
        }
    }
    return TK_OK;
}

TKDEF int tk_split_heads_backward(float *dqkv, const float *dq, const float *dk,
                                  const float *dv, int B, int T, int H, int D)
{
    static const char *fn = "tk_split_heads_backward";
    int bt;
    TK__ROUTE(fn, dqkv, TK__DEV(dq) && TK__DEV(dk) && TK__DEV(dv),
              tk_split_heads_backward_cuda(dqkv, dq, dk, dv, B, T, H, D, NULL));
    TK__NONNULL(fn, dqkv);
    TK__NONNULL(fn, dq);
    TK__NONNULL(fn, dk);
    TK__NONNULL(fn, dv);
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, H);
    TK__POSDIM(fn, D);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * H * D > TK__PAR_MIN))
    for (bt = 0; bt < B * T; bt++) {
        int b = bt / T, t = bt % T, h, d;
        size_t C = (size_t)H * D;
        float *row = dqkv + (size_t)bt * 3 * C;
        for (h = 0; h < H; h++) {
            size_t o = (((size_t)b * H + h) * T + t) * D;
            for (d = 0; d < D; d++) {
                row[(size_t)h * D + d] += dq[o + d];
                row[C + (size_t)h * D + d] += dk[o + d];
                row[2 * C + (size_t)h * D + d] += dv[o + d];
            }
        }
    }
    return TK_OK;
}

TKDEF int tk_merge_heads_forward(float *out, const float *inp, int B, int T, int H, int D)
{
    static const char *fn = "tk_merge_heads_forward";
    int bt;
    TK__ROUTE(fn, out, TK__DEV(inp), tk_merge_heads_forward_cuda(out, inp, B, T, H, D, NULL));
    TK__NONNULL(fn, out);
    TK__NONNULL(fn, inp);
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, H);
    TK__POSDIM(fn, D);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * H * D > TK__PAR_MIN))
    for (bt = 0; bt < B * T; bt++) {
        int b = bt / T, t = bt % T, h, d;
        float *row = out + (size_t)bt * H * D; /* (C) */
        for (h = 0; h < H; h++) {
            const float *src = inp + (((size_t)b * H + h) * T + t) * D;
            for (d = 0; d < D; d++) row[(size_t)h * D + d] = src[d];
        }
    }
    return TK_OK;
}

TKDEF int tk_merge_heads_backward(float *dinp, const float *dout, int B, int T, int H, int D)
{
    static const char *fn = "tk_merge_heads_backward";
    int bt;
    TK__ROUTE(fn, dinp, TK__DEV(dout), tk_merge_heads_backward_cuda(dinp, dout, B, T, H, D, NULL));
    TK__NONNULL(fn, dinp);
    TK__NONNULL(fn, dout);
    TK__POSDIM(fn, B);
    TK__POSDIM(fn, T);
    TK__POSDIM(fn, H);
    TK__POSDIM(fn, D);
    TK__OPS_OMP(omp parallel for schedule(static) if((size_t)B * T * H * D > TK__PAR_MIN))
    for (bt = 0; bt < B * T; bt++) {
        int b = bt / T, t = bt % T, h, d;
        const float *row = dout + (size_t)bt * H * D;
        for (h = 0; h < H; h++) {
            float *dst = dinp + (((size_t)b * H + h) * T + t) * D;
            for (d = 0; d < D; d++) dst[d] += row[(size_t)h * D + d];
        }
    }
    return TK_OK;
}

/* ---------------------------------------------------------------- optimiser */
TKDEF tk_adamw_config tk_adamw_config_default(void)
{
    tk_adamw_config c;
    c.lr = 3e-4f;
    c.beta1 = 0.9f;
    c.beta2 = 0.95f;
    c.eps = 1e-8f;
    c.weight_decay = 0.1f;
    return c;
}

/* One AdamW chunk. GCC keeps a loop with sqrtf scalar (errno), so with AVX-512 the
   chunk runs 16 lanes by intrinsics: the same IEEE operations in the same order as
   the scalar tail (mul and add kept separate, div and sqrt correctly rounded), so
   every element gets the same bits either way. */
static void tk__adamw_chunk(float *TK_RESTRICT params, const float *TK_RESTRICT grads,
                            float *TK_RESTRICT m, float *TK_RESTRICT v, int n, float lr,
                            float b1, float b2, float eps, float wd, float c1, float c2)
{
    int i = 0;
#if defined(TK__GEMM_HAVE_AVX512)
    {
        const __m512 vb1 = _mm512_set1_ps(b1), vb2 = _mm512_set1_ps(b2);
        const __m512 va1 = _mm512_set1_ps(1.0f - b1), va2 = _mm512_set1_ps(1.0f - b2);
        const __m512 vc1 = _mm512_set1_ps(c1), vc2 = _mm512_set1_ps(c2);
        const __m512 veps = _mm512_set1_ps(eps), vwd = _mm512_set1_ps(wd);
        const __m512 vlr = _mm512_set1_ps(lr);
        for (; i + 16 <= n; i += 16) {
            __m512 g = _mm512_loadu_ps(grads + i), p = _mm512_loadu_ps(params + i);
            __m512 mi = _mm512_add_ps(_mm512_mul_ps(vb1, _mm512_loadu_ps(m + i)),
                                      _mm512_mul_ps(va1, g));
            __m512 vi = _mm512_add_ps(_mm512_mul_ps(vb2, _mm512_loadu_ps(v + i)),
                                      _mm512_mul_ps(_mm512_mul_ps(va2, g), g));
            __m512 mhat = _mm512_div_ps(mi, vc1), vhat = _mm512_div_ps(vi, vc2);
            __m512 step = _mm512_div_ps(mhat, _mm512_add_ps(_mm512_sqrt_ps(vhat), veps));
            step = _mm512_add_ps(step, _mm512_mul_ps(vwd, p));
            _mm512_storeu_ps(m + i, mi);
            _mm512_storeu_ps(v + i, vi);
            _mm512_storeu_ps(params + i, _mm512_sub_ps(p, _mm512_mul_ps(vlr, step)));
        }
    }
#elif defined(TK__GEMM_HAVE_AVX2)
    { /* the same operations in the same order, 8 lanes (sqrtf's errno keeps the C loop
         scalar) */
        const __m256 vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2);
        const __m256 va1 = _mm256_set1_ps(1.0f - b1), va2 = _mm256_set1_ps(1.0f - b2);
        const __m256 vc1 = _mm256_set1_ps(c1), vc2 = _mm256_set1_ps(c2);
        const __m256 veps = _mm256_set1_ps(eps), vwd = _mm256_set1_ps(wd);
        const __m256 vlr = _mm256_set1_ps(lr);
        for (; i + 8 <= n; i += 8) {
            __m256 g = _mm256_loadu_ps(grads + i), p = _mm256_loadu_ps(params + i);
            __m256 mi = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + i)),
                                      _mm256_mul_ps(va1, g));
            __m256 vi = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + i)),
                                      _mm256_mul_ps(_mm256_mul_ps(va2, g), g));
            __m256 mhat = _mm256_div_ps(mi, vc1), vhat = _mm256_div_ps(vi, vc2);
            __m256 step = _mm256_div_ps(mhat, _mm256_add_ps(_mm256_sqrt_ps(vhat), veps));
            step = _mm256_add_ps(step, _mm256_mul_ps(vwd, p));
            _mm256_storeu_ps(m + i, mi);
            _mm256_storeu_ps(v + i, vi);
            _mm256_storeu_ps(params + i, _mm256_sub_ps(p, _mm256_mul_ps(vlr, step)));
        }
    }
#endif
    for (; i < n; i++) {
        float g = grads[i];
        float mi = b1 * m[i] + (1.0f - b1) * g;
        float vi = b2 * v[i] + (1.0f - b2) * g * g;
        float mhat = mi / c1, vhat = vi / c2;
        m[i] = mi;
        v[i] = vi;
        /* decoupled weight decay: p -= lr * (adam step + wd * p) */
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * params[i]);
    }
}

TKDEF int tk_adamw_update(float *params, const float *grads, float *m, float *v, size_t n,
                          const tk_adamw_config *cfg, long t)
{
    static const char *fn = "tk_adamw_update";
    ptrdiff_t i, nn = (ptrdiff_t)n;
    float lr, b1, b2, eps, wd, c1, c2;
    TK__ROUTE(fn, params, TK__DEV(grads) && TK__DEV(m) && TK__DEV(v),
              tk_adamw_update_cuda(params, grads, m, v, n, cfg, t, NULL));
    TK__NONNULL(fn, params);
    TK__NONNULL(fn, grads);
    TK__NONNULL(fn, m);
    TK__NONNULL(fn, v);
    TK__NONNULL(fn, cfg);
    TK__NONZERO(fn, n);
    lr = cfg->lr;
    b1 = cfg->beta1;
    b2 = cfg->beta2;
    eps = cfg->eps;
    wd = cfg->weight_decay;
    if (!tk__finite(lr) || lr < 0.0f)
        return tk__fail(TK_EINVAL, "%s: lr must be finite and >= 0 (got %g)", fn, (double)lr);
    if (!tk__finite(b1) || b1 < 0.0f || b1 >= 1.0f || !tk__finite(b2) || b2 < 0.0f ||
        b2 >= 1.0f)
        return tk__fail(TK_EINVAL, "%s: beta1, beta2 must be in [0, 1) (got %g, %g)", fn,
                        (double)b1, (double)b2);
    if (!tk__finite(eps) || !(eps > 0.0f))
        return tk__fail(TK_EINVAL, "%s: eps must be finite and > 0 (got %g)", fn, (double)eps);
    if (!tk__finite(wd) || wd < 0.0f)
        return tk__fail(TK_EINVAL, "%s: weight_decay must be finite and >= 0 (got %g)", fn,
                        (double)wd);
    if (t < 1) return tk__fail(TK_EINVAL, "%s: step t must be >= 1 (got %ld)", fn, t);
    /* bias corrections 1 - beta^t, in double (beta^t underflows to 0 for large t: fine) */
    c1 = (float)(1.0 - pow((double)b1, (double)t));
    c2 = (float)(1.0 - pow((double)b2, (double)t));
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (i = 0; i < nn; i += TK__CHUNK)
        tk__adamw_chunk(params + i, grads + i, m + i, v + i,
                        nn - i < TK__CHUNK ? (int)(nn - i) : TK__CHUNK, lr, b1, b2, eps, wd,
                        c1, c2);
    return TK_OK;
}

/* Sum of squares in double over 64 fixed blocks (block bounds depend only on n), the
   blocks added in order: bit-identical for any thread count. */
#define TK__NORM_BLOCKS 64
TKDEF int tk_grad_norm(const float *g, size_t n, float *norm)
{
    static const char *fn = "tk_grad_norm";
    double part[TK__NORM_BLOCKS], total = 0.0;
    size_t per;
    int blk;
    TK__ROUTE(fn, g, 1, tk_grad_norm_cuda(g, n, norm, NULL));
    TK__NONNULL(fn, g);
    TK__NONNULL(fn, norm);
    TK__NONZERO(fn, n);
    per = (n + TK__NORM_BLOCKS - 1) / TK__NORM_BLOCKS;
    TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
    for (blk = 0; blk < TK__NORM_BLOCKS; blk++) {
        size_t i0 = (size_t)blk * per, i1 = i0 + per, i;
        double s = 0.0;
        if (i1 > n) i1 = n;
        for (i = i0; i < i1; i++) s += (double)g[i] * (double)g[i];
        part[blk] = s;
    }
    for (blk = 0; blk < TK__NORM_BLOCKS; blk++) total += part[blk];
    *norm = (float)sqrt(total);
    return TK_OK;
}

TKDEF int tk_clip_grad_norm(float *g, size_t n, float max_norm, float *norm_out)
{
    static const char *fn = "tk_clip_grad_norm";
    float norm;
    int rc;
    TK__ROUTE(fn, g, 1, tk_clip_grad_norm_cuda(g, n, max_norm, norm_out, NULL));
    TK__NONNULL(fn, g);
    TK__NONZERO(fn, n);
    if (!tk__finite(max_norm) || !(max_norm > 0.0f))
        return tk__fail(TK_EINVAL, "%s: max_norm must be finite and > 0 (got %g)", fn,
                        (double)max_norm);
    rc = tk_grad_norm(g, n, &norm);
    if (rc != TK_OK) return rc;
    if (norm_out) *norm_out = norm;
    if (tk__finite(norm) && norm > max_norm) {
        float scale = max_norm / norm;
        ptrdiff_t i, nn = (ptrdiff_t)n;
        TK__OPS_OMP(omp parallel for schedule(static) if(n > TK__PAR_MIN))
        for (i = 0; i < nn; i++) g[i] *= scale;
    }
    return TK_OK;
}
/* ==== IMPLEMENTATION BODY (tensor ops) END ==== */

/* ---------------------------------------------------------------- CUDA */
static int tk__cuda_math = 0; /* TK_MATH_FP32 */

TKDEF int tk_cuda_set_math(int math)
{
    if (math != TK_MATH_FP32 && math != TK_MATH_TF32 && math != TK_MATH_BF16)
        return tk__fail(TK_EINVAL, "tk_cuda_set_math: math must be TK_MATH_FP32, TK_MATH_TF32 or TK_MATH_BF16 (got %d)",
                        math);
    tk__cuda_math = math;
    return TK_OK;
}

TKDEF int tk_cuda_get_math(void) { return tk__cuda_math; }

TKDEF tk_attention_cuda_config tk_attention_cuda_config_default(void)
{
    tk_attention_cuda_config c;
    c.math = TK_MATH_FP32;
    c.kv_heads = 0;
    c.ent_coef = 0.0f;
    c.ent_rows = NULL;
    c.ent_stride = 0;
    c.status = NULL;
    return c;
}

#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
#include "cuda/tensor.cuh"
#else
TKDEF int tk_cuda_available(void) { return 0; }
TKDEF int tk_cuda_release(void) { return TK_OK; }
/* device memory without CUDA: no device, every buffer is host memory */
TKDEF int tk_device_alloc(void **ptr, size_t bytes)
{
    static const char *fn = "tk_device_alloc";
    TK__NONNULL(fn, ptr);
    *ptr = NULL;
    TK__NONZERO(fn, bytes);
    return tk__fail(TK_ENOCUDA, "%s: built without nvcc", fn);
}
TKDEF void tk_device_free(void *ptr) { (void)ptr; }
TKDEF int tk_copy(void *dst, const void *src, size_t bytes)
{
    static const char *fn = "tk_copy";
    if (bytes == 0) return TK_OK;
    TK__NONNULL(fn, dst);
    TK__NONNULL(fn, src);
    memcpy(dst, src, bytes);
    return TK_OK;
}
TKDEF int tk_fill_zero(void *dst, size_t bytes)
{
    static const char *fn = "tk_fill_zero";
    if (bytes == 0) return TK_OK;
    TK__NONNULL(fn, dst);
    memset(dst, 0, bytes);
    return TK_OK;
}
TKDEF int tk_copy_async(void *dst, const void *src, size_t bytes, tk_stream stream)
{
    (void)stream;
    return tk_copy(dst, src, bytes);
}
TKDEF int tk_fill_zero_async(void *dst, size_t bytes, tk_stream stream)
{
    (void)stream;
    return tk_fill_zero(dst, bytes);
}
TKDEF int tk_copy_to_host(void *dst, const void *src, size_t bytes, tk_stream stream)
{
    (void)stream;
    return tk_copy(dst, src, bytes);
}
TKDEF int tk_is_device(const void *p) { (void)p; return 0; }
TKDEF int tk_device_synchronize(void) { return TK_OK; }
/* the *_cuda functions of the lists TK__CUDA_OPS and TK__CUDA_ATTN (declared above):
   each fails with TK_ENOCUDA and its name; the parameters go unused */
#define TK__CUDA_STUB(ret, name, params)                                                    \
    TKDEF ret name params { return tk__fail(TK_ENOCUDA, "%s: built without nvcc", #name); }
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
TK__CUDA_OPS(TK__CUDA_STUB)
TK__CUDA_ATTN(TK__CUDA_STUB)
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef TK__CUDA_STUB
#endif /* __CUDACC__ */

#ifdef TENSOR__PUSHED_NO_TRAPPING
#pragma GCC pop_options
#undef TENSOR__PUSHED_NO_TRAPPING
#endif
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
