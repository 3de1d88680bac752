/* exctx.h - the device context of the examples' model and its one dispatch point per op
   (issue 39, item 1). Header only (static inline), C99; no state of its own.

   A model is created on one device and stays there. Everything that depends on the
   device is in one small struct, chosen once (mdl_create_on) and passed down explicitly
   to every layer and component:

     ex_ctx { device, stream }
       device  EX_CPU (host memory, tensor.h's CPU bodies) or EX_CUDA (device memory,
               the _cuda bodies). Buffers handed to an op must live on ctx->device:
               nothing here asks the driver where a pointer lives.
       stream  the CUDA stream the device ops are queued on (NULL: the default stream,
               as tensor.h's routed entry points use). Unused on the CPU.
     (cuBLAS: tensor.h owns its handle per device, the _cuda GEMMs take none; the
     workspace arena is ex_arena below, carved by the model from its allocations.)

   Each ex_X(ctx, ...) below takes tensor.h's (or a mechanism header's) arguments and
   calls the CPU entry point or the explicit _cuda one on ctx->stream: these functions
   are the only place in model.c / layers.c that chooses a body by device. The headers'
   plain entry points still route device pointers by themselves (their drop-in
   contract); the model does not rely on that. The CPU calls are the same calls the model
   made before (bit-identical results); the memory helpers use memcpy / memset on the
   host (the same bytes as tk_copy / tk_fill_zero there). On the device, ex_zero,
   ex_copy and ex_to_ctx queue tk_fill_zero_async / tk_copy_async on ctx->stream and
   return without a host wait; ex_to_host is tensor.h's tk_copy_to_host on ctx->stream
   (the copy queued after the stream's earlier work, then one wait for the stream: the
   host reads what it returns; no pointer query).

   Why no wait is needed after a device zero or copy (issue 39, item 2): every device op
   of the model runs on the one stream ctx->stream, in issue order, so a kernel queued
   after the memset / copy sees its bytes; the host never touches device memory but
   through ex_to_host (a synchronising read: it returns when ctx->stream's earlier work,
   this copy included, is done; work a plain entry point queued on the legacy default
   stream is ordered before it too, ctx->stream being a blocking stream) or by freeing
   it (cudaFree waits for the device). A host -> device ex_to_ctx from pageable memory
   (malloc, the stack: all the model uses) is staged before it returns, so the host may
   change or free its source at once; a page-locked source (cudaMallocHost) would have
   to stay unchanged until the stream reached the copy. The CPU path is unchanged.

   License: MIT. */
#ifndef ATTNKIT_EXCTX_H
#define ATTNKIT_EXCTX_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor.h"
#include "era.h"
#include "polar.h"
#include "gdelta.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { EX_CPU = 0, EX_CUDA = 1 }; /* the same values as model.h's MDL_DEVICE_* */

typedef struct ex_ctx {
    int device;       /* EX_CPU or EX_CUDA */
    tk_stream stream; /* device ops' stream; NULL: the default stream */
    int *status;      /* NULL, or a device int: the deferred-check word. The device ops whose
                         checks only the device can do (ex_embedding_fwd / _bwd,
                         ex_ce_fwd_inplace / _bwd_inplace: the ids' range; ex_gd_fwd / _bwd:
                         the memory's input scan; ex_era_fwd: ERA's centres) then leave a
                         nonzero value there instead of a host wait each (tensor.h's
                         *_cuda_ex, gd_config.status, era_era_config.status); whoever
                         sets it zeroes it and reads it (the model: once per forward, with the
                         row losses). Unused on the CPU. */
} ex_ctx;

static inline ex_ctx ex_ctx_make(int device)
{
    ex_ctx c;
    c.device = device;
    c.stream = NULL;
    c.status = NULL;
    return c;
}

/* ------------------------------------------------------------------ memory */
/* All return TK_OK or a TK_E* code; NULL with bytes > 0 is TK_EINVAL, bytes 0 is a no-op. */

/* *p = bytes of the context's memory (malloc / tk_device_alloc); *p NULL on failure */
static inline int ex_alloc(const ex_ctx *x, void **p, size_t bytes)
{
    if (x->device) return tk_device_alloc(p, bytes);
    *p = bytes ? malloc(bytes) : NULL;
    return *p ? TK_OK : TK_ENOMEM;
}
static inline void ex_free(const ex_ctx *x, void *p)
{
    if (x->device) tk_device_free(p);
    else free(p);
}
/* dst (context memory) = 0 */
static inline int ex_zero(const ex_ctx *x, void *dst, size_t bytes)
{
    if (x->device) return tk_fill_zero_async(dst, bytes, x->stream);
    if (!bytes) return TK_OK;
    if (!dst) return TK_EINVAL;
    memset(dst, 0, bytes);
    return TK_OK;
}
/* the host's memcpy with the helpers' validation */
static inline int ex__host_copy(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return TK_OK;
    if (!dst || !src) return TK_EINVAL;
    memcpy(dst, src, bytes);
    return TK_OK;
}
/* dst <- src, both context memory (no overlap); on the device queued on ctx->stream, no
   host wait (see the top of this file) */
static inline int ex_copy(const ex_ctx *x, void *dst, const void *src, size_t bytes)
{
    if (x->device) return tk_copy_async(dst, src, bytes, x->stream);
    return ex__host_copy(dst, src, bytes);
}
/* dst (host) <- src (context memory); synchronous on the device: done when it returns
   (tk_copy_to_host: the copy on ctx->stream after its earlier work, one wait, no pointer
   query) */
static inline int ex_to_host(const ex_ctx *x, void *dst, const void *src, size_t bytes)
{
    if (x->device) return tk_copy_to_host(dst, src, bytes, x->stream);
    return ex__host_copy(dst, src, bytes);
}
/* dst (context memory) <- src (pageable host memory); on the device queued on
   ctx->stream, the source staged before return (the host may reuse it at once) */
static inline int ex_to_ctx(const ex_ctx *x, void *dst, const void *src, size_t bytes)
{
    if (x->device) return tk_copy_async(dst, src, bytes, x->stream);
    return ex__host_copy(dst, src, bytes);
}

/* A bump allocator over one allocation: take() hands out 64-byte aligned pieces in
   order; with base NULL it only counts (the same calls size the allocation, then carve
   it). */
typedef struct ex_arena {
    char *base; /* NULL: count only */
    size_t off;
} ex_arena;

static inline size_t ex_align64(size_t n) { return (n + 63) & ~(size_t)63; }

static inline void *ex_take(ex_arena *a, size_t bytes)
{
    void *p = a->base ? (void *)(a->base + a->off) : NULL;
    a->off += ex_align64(bytes ? bytes : 1);
    return p;
}

/* ------------------------------------------------------------------ tensor.h ops */
#define EX__OP(cpu, cuda) return x->device ? (cuda) : (cpu)

static inline int ex_sgemm(const ex_ctx *x, int tA, int tB, int M, int N, int K, float alpha,
                           const float *A, int lda, const float *B, int ldb, float beta, float *C,
                           int ldc)
{
    EX__OP(tk_sgemm(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc),
           tk_sgemm_cuda(tA, tB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, x->stream));
}
static inline int ex_matmul_fwd(const ex_ctx *x, float *out, const float *inp, const float *W,
                                const float *b, int N, int C, int OC)
{
    EX__OP(tk_matmul_forward(out, inp, W, b, N, C, OC),
           tk_matmul_forward_cuda(out, inp, W, b, N, C, OC, x->stream));
}
static inline int ex_matmul_bwd(const ex_ctx *x, float *dinp, float *dW, float *db, const float *dout,
                                const float *inp, const float *W, int N, int C, int OC)
{
    EX__OP(tk_matmul_backward(dinp, dW, db, dout, inp, W, N, C, OC),
           tk_matmul_backward_cuda(dinp, dW, db, dout, inp, W, N, C, OC, x->stream));
}
static inline int ex_embedding_fwd(const ex_ctx *x, float *out, const int *ids, const float *wte,
                                   const float *wpe, int B, int T, int C, int V)
{
    EX__OP(tk_embedding_forward(out, ids, wte, wpe, B, T, C, V),
           tk_embedding_forward_cuda_ex(out, ids, wte, wpe, B, T, C, V, x->status, x->stream));
}
static inline int ex_embedding_bwd(const ex_ctx *x, float *dwte, float *dwpe, const float *dout,
                                   const int *ids, int B, int T, int C, int V)
{
    EX__OP(tk_embedding_backward(dwte, dwpe, dout, ids, B, T, C, V),
           tk_embedding_backward_cuda_ex(dwte, dwpe, dout, ids, B, T, C, V, x->status, x->stream));
}
static inline int ex_layernorm_fwd(const ex_ctx *x, float *out, float *mean, float *rstd,
                                   const float *inp, const float *w, const float *b, int N, int C,
                                   float eps)
{
    EX__OP(tk_layernorm_forward(out, mean, rstd, inp, w, b, N, C, eps),
           tk_layernorm_forward_cuda(out, mean, rstd, inp, w, b, N, C, eps, x->stream));
}
static inline int ex_layernorm_bwd(const ex_ctx *x, float *dinp, float *dw, float *db,
                                   const float *dout, const float *inp, const float *w,
                                   const float *mean, const float *rstd, int N, int C)
{
    EX__OP(tk_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C),
           tk_layernorm_backward_cuda(dinp, dw, db, dout, inp, w, mean, rstd, N, C, x->stream));
}
static inline int ex_rmsnorm_fwd(const ex_ctx *x, float *out, float *rstd, const float *inp,
                                 const float *w, int N, int C, float eps)
{
    EX__OP(tk_rmsnorm_forward(out, rstd, inp, w, N, C, eps),
           tk_rmsnorm_forward_cuda(out, rstd, inp, w, N, C, eps, x->stream));
}
static inline int ex_rmsnorm_bwd(const ex_ctx *x, float *dinp, float *dw, const float *dout,
                                 const float *inp, const float *w, const float *rstd, int N, int C)
{
    EX__OP(tk_rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C),
           tk_rmsnorm_backward_cuda(dinp, dw, dout, inp, w, rstd, N, C, x->stream));
}
static inline int ex_gelu_fwd(const ex_ctx *x, float *out, const float *inp, size_t n)
{
    EX__OP(tk_gelu_forward(out, inp, n), tk_gelu_forward_cuda(out, inp, n, x->stream));
}
static inline int ex_gelu_bwd(const ex_ctx *x, float *dinp, const float *inp, const float *dout, size_t n)
{
    EX__OP(tk_gelu_backward(dinp, inp, dout, n), tk_gelu_backward_cuda(dinp, inp, dout, n, x->stream));
}
static inline int ex_relu2_gated_fwd(const ex_ctx *x, float *out, const float *inp, int N, int F)
{
    EX__OP(tk_relu2_gated_forward(out, inp, N, F), tk_relu2_gated_forward_cuda(out, inp, N, F, x->stream));
}
static inline int ex_relu2_gated_bwd(const ex_ctx *x, float *dinp, const float *inp, const float *dout,
                                     int N, int F)
{
    EX__OP(tk_relu2_gated_backward(dinp, inp, dout, N, F),
           tk_relu2_gated_backward_cuda(dinp, inp, dout, N, F, x->stream));
}
static inline int ex_rope(const ex_ctx *x, float *v, int B, int H, int T, int D, float base, int inverse)
{
    EX__OP(tk_rope(v, B, H, T, D, base, inverse), tk_rope_cuda(v, B, H, T, D, base, inverse, x->stream));
}
static inline int ex_residual_fwd(const ex_ctx *x, float *out, const float *a, const float *b, size_t n)
{
    EX__OP(tk_residual_forward(out, a, b, n), tk_residual_forward_cuda(out, a, b, n, x->stream));
}
static inline int ex_residual_rows_fwd(const ex_ctx *x, float *out, const float *xi, const float *br,
                                       const float *s, int N, int C)
{
    EX__OP(tk_residual_rows_forward(out, xi, br, s, N, C),
           tk_residual_rows_forward_cuda(out, xi, br, s, N, C, x->stream));
}
static inline int ex_sigmoid_fwd(const ex_ctx *x, float *out, const float *v, size_t n)
{
    EX__OP(tk_sigmoid_forward(out, v, n), tk_sigmoid_forward_cuda(out, v, n, x->stream));
}
static inline int ex_sigmoid_bwd(const ex_ctx *x, float *dx, const float *y, const float *dy, size_t n)
{
    EX__OP(tk_sigmoid_backward(dx, y, dy, n), tk_sigmoid_backward_cuda(dx, y, dy, n, x->stream));
}
static inline int ex_scale(const ex_ctx *x, float *out, const float *v, float alpha, size_t n)
{
    EX__OP(tk_scale(out, v, alpha, n), tk_scale_cuda(out, v, alpha, n, x->stream));
}
static inline int ex_shift(const ex_ctx *x, float *out, const float *v, float beta, size_t n)
{
    EX__OP(tk_shift(out, v, beta, n), tk_shift_cuda(out, v, beta, n, x->stream));
}
static inline int ex_rowscale(const ex_ctx *x, float *out, const float *v, const float *s, int N, int C)
{
    EX__OP(tk_rowscale(out, v, s, N, C), tk_rowscale_cuda(out, v, s, N, C, x->stream));
}
static inline int ex_rowdot(const ex_ctx *x, float *out, const float *a, const float *b, int N, int C)
{
    EX__OP(tk_rowdot(out, a, b, N, C), tk_rowdot_cuda(out, a, b, N, C, x->stream));
}
static inline int ex_causal_dwconv_fwd(const ex_ctx *x, float *out, const float *inp, const float *w,
                                       int B, int T, int C, int K, int accumulate)
{
    EX__OP(tk_causal_dwconv_forward(out, inp, w, B, T, C, K, accumulate),
           tk_causal_dwconv_forward_cuda(out, inp, w, B, T, C, K, accumulate, x->stream));
}
static inline int ex_causal_dwconv_bwd(const ex_ctx *x, float *dinp, float *dw, const float *dout,
                                       const float *inp, const float *w, int B, int T, int C, int K)
{
    EX__OP(tk_causal_dwconv_backward(dinp, dw, dout, inp, w, B, T, C, K),
           tk_causal_dwconv_backward_cuda(dinp, dw, dout, inp, w, B, T, C, K, x->stream));
}
static inline int ex_causal_mean_gate_fwd(const ex_ctx *x, float *g, float *sig, const float *z, int B,
                                          int T, int H)
{
    EX__OP(tk_causal_mean_gate_forward(g, sig, z, B, T, H),
           tk_causal_mean_gate_forward_cuda(g, sig, z, B, T, H, x->stream));
}
static inline int ex_causal_mean_gate_bwd(const ex_ctx *x, float *dz, const float *dg, const float *sig,
                                          int B, int T, int H)
{
    EX__OP(tk_causal_mean_gate_backward(dz, dg, sig, B, T, H),
           tk_causal_mean_gate_backward_cuda(dz, dg, sig, B, T, H, x->stream));
}
static inline int ex_rows_gather(const ex_ctx *x, float *out, const float *src, int nsrc, const int *idx,
                                 int n, int C)
{
    EX__OP(tk_rows_gather(out, src, nsrc, idx, n, C), tk_rows_gather_cuda(out, src, nsrc, idx, n, C, x->stream));
}
static inline int ex_rows_combine_fwd(const ex_ctx *x, float *out, const float *src, int nsrc,
                                      const int *idx, const float *w, int N, int K, int C, int accumulate)
{
    EX__OP(tk_rows_combine_forward(out, src, nsrc, idx, w, N, K, C, accumulate),
           tk_rows_combine_forward_cuda(out, src, nsrc, idx, w, N, K, C, accumulate, x->stream));
}
static inline int ex_rows_combine_bwd(const ex_ctx *x, float *dsrc, float *dw, const float *dout,
                                      const float *src, int nsrc, const int *idx, const float *w, int N,
                                      int K, int C)
{
    EX__OP(tk_rows_combine_backward(dsrc, dw, dout, src, nsrc, idx, w, N, K, C),
           tk_rows_combine_backward_cuda(dsrc, dw, dout, src, nsrc, idx, w, N, K, C, x->stream));
}
static inline int ex_dropout_fwd(const ex_ctx *x, float *out, uint8_t *mask, const float *inp, size_t n,
                                 float p, uint64_t seed)
{
    EX__OP(tk_dropout_seeded_forward(out, mask, inp, n, p, seed),
           tk_dropout_seeded_forward_cuda(out, mask, inp, n, p, seed, x->stream));
}
static inline int ex_dropout_bwd(const ex_ctx *x, float *dinp, const float *dout, const uint8_t *mask,
                                 size_t n, float p)
{
    EX__OP(tk_dropout_backward(dinp, dout, mask, n, p), tk_dropout_backward_cuda(dinp, dout, mask, n, p, x->stream));
}
static inline int ex_split_heads_fwd(const ex_ctx *x, float *q, float *k, float *v, const float *qkv, int B,
                                     int T, int H, int D)
{
    EX__OP(tk_split_heads_forward(q, k, v, qkv, B, T, H, D),
           tk_split_heads_forward_cuda(q, k, v, qkv, B, T, H, D, x->stream));
}
static inline int ex_split_heads_bwd(const ex_ctx *x, float *dqkv, const float *dq, const float *dk,
                                     const float *dv, int B, int T, int H, int D)
{
    EX__OP(tk_split_heads_backward(dqkv, dq, dk, dv, B, T, H, D),
           tk_split_heads_backward_cuda(dqkv, dq, dk, dv, B, T, H, D, x->stream));
}
static inline int ex_merge_heads_fwd(const ex_ctx *x, float *out, const float *inp, int B, int T, int H,
                                     int D)
{
    EX__OP(tk_merge_heads_forward(out, inp, B, T, H, D), tk_merge_heads_forward_cuda(out, inp, B, T, H, D, x->stream));
}
static inline int ex_merge_heads_bwd(const ex_ctx *x, float *dinp, const float *dout, int B, int T, int H,
                                     int D)
{
    EX__OP(tk_merge_heads_backward(dinp, dout, B, T, H, D),
           tk_merge_heads_backward_cuda(dinp, dout, B, T, H, D, x->stream));
}
static inline int ex_ce_fwd_inplace(const ex_ctx *x, float *logits, float *losses, float *ce,
                                    const int *targets, int N, int V, float eps)
{
    EX__OP(tk_crossentropy_forward_inplace(logits, losses, ce, targets, N, V, eps),
           tk_crossentropy_forward_inplace_cuda_ex(logits, losses, ce, targets, N, V, eps, x->status, x->stream));
}
static inline int ex_ce_bwd_inplace(const ex_ctx *x, float *probs, const int *targets, int N, int V,
                                    float eps, float dloss)
{
    EX__OP(tk_crossentropy_backward_inplace(probs, targets, N, V, eps, dloss),
           tk_crossentropy_backward_inplace_cuda_ex(probs, targets, N, V, eps, dloss, x->status,
                                                    x->stream));
}

static inline int ex_adamw(const ex_ctx *x, float *params, const float *grads, float *m, float *v, size_t n,
                           const tk_adamw_config *cfg, long t)
{
    EX__OP(tk_adamw_update(params, grads, m, v, n, cfg, t),
           tk_adamw_update_cuda(params, grads, m, v, n, cfg, t, x->stream));
}
/* norm, norm_out: host floats */
static inline int ex_grad_norm(const ex_ctx *x, const float *g, size_t n, float *norm)
{
    EX__OP(tk_grad_norm(g, n, norm), tk_grad_norm_cuda(g, n, norm, x->stream));
}
static inline int ex_clip_grad_norm(const ex_ctx *x, float *g, size_t n, float max_norm, float *norm_out)
{
    EX__OP(tk_clip_grad_norm(g, n, max_norm, norm_out), tk_clip_grad_norm_cuda(g, n, max_norm, norm_out, x->stream));
}

/* ------------------------------------------------------------------ mechanisms */
/* polar.h and gdelta.h: the CUDA bodies take a device workspace (or NULL) and the
   stream; era.h's priors keep their device state in an era_*_cuda_state the caller
   owns (the plain calls' routed "twin"). */
static inline int ex_polar_fwd(const ex_ctx *x, const polar_config *cfg, float *c, float *mag,
                               polar_state *st, const float *q, const float *k, const float *v,
                               const polar_params *prm, int B, int H, int Hkv, int T, int D, void *ws)
{
    EX__OP(polar_forward(cfg, c, mag, st, q, k, v, prm, B, H, Hkv, T, D, ws),
           polar_forward_cuda(cfg, c, mag, st, q, k, v, prm, B, H, Hkv, T, D, NULL, (polar_stream)x->stream));
}
static inline int ex_polar_bwd(const ex_ctx *x, const polar_config *cfg, float *dq, float *dk, float *dv,
                               polar_grads *g, const float *dc, const float *dmag, const float *c,
                               const float *mag, const polar_state *st, const float *q, const float *k,
                               const float *v, const polar_params *prm, int B, int H, int Hkv, int T, int D,
                               void *ws)
{
    EX__OP(polar_backward(cfg, dq, dk, dv, g, dc, dmag, c, mag, st, q, k, v, prm, B, H, Hkv, T, D, ws),
           polar_backward_cuda(cfg, dq, dk, dv, g, dc, dmag, c, mag, st, q, k, v, prm, B, H, Hkv, T, D, ws,
                               (polar_stream)x->stream));
}
static inline int ex_gd_fwd(const ex_ctx *x, const gd_config *cfg, float *r, float *state_out, const float *q,
                            const float *k, const float *v, const float *gates, const float *beta,
                            const float *state0, int B, int H, int T, int Dk, int Dv, gd_saved *saved, void *ws)
{
    gd_config dc = *cfg; /* the device scan into the context's status word (no wait) */
    dc.status = x->status;
    EX__OP(gd_forward(cfg, r, state_out, q, k, v, gates, beta, state0, B, H, T, Dk, Dv, saved, ws),
           gd_forward_cuda(&dc, r, state_out, q, k, v, gates, beta, state0, B, H, T, Dk, Dv, saved, ws,
                           (gd_stream)x->stream));
}
static inline int ex_gd_bwd(const ex_ctx *x, const gd_config *cfg, const gd_saved *saved, float *dq, float *dk,
                            float *dv, float *dgates, float *dbeta, float *dstate0, const float *dr,
                            const float *dstate_out, const float *q, const float *k, const float *v,
                            const float *gates, const float *beta, const float *state0, int B, int H, int T,
                            int Dk, int Dv, void *ws)
{
    gd_config dc = *cfg; /* (the backward's scan sees the forward's inputs: deferred, as there) */
    dc.status = x->status;
    EX__OP(gd_backward(cfg, saved, dq, dk, dv, dgates, dbeta, dstate0, dr, dstate_out, q, k, v, gates, beta,
                       state0, B, H, T, Dk, Dv, ws),
           gd_backward_cuda(&dc, saved, dq, dk, dv, dgates, dbeta, dstate0, dr, dstate_out, q, k, v, gates, beta,
                            state0, B, H, T, Dk, Dv, ws, (gd_stream)x->stream));
}
static inline int ex_membership_fwd(const ex_ctx *x, const era_rpa_config *cfg, const era_rpa_params *p,
                                    float *mu, float *zproj, era_mu_stats *stats, const float *h, int B, int T)
{
    EX__OP(era_membership_forward(cfg, p, mu, zproj, stats, h, B, T),
           era_membership_forward_cuda(cfg, p, mu, zproj, stats, h, B, T, (era_stream)x->stream));
}
/* the memberships with their statistics added to sums (3 doubles, context memory): no host wait */
static inline int ex_membership_fwd_sums(const ex_ctx *x, const era_rpa_config *cfg, const era_rpa_params *p,
                                         float *mu, float *zproj, double *sums, const float *h, int B, int T)
{
    EX__OP(era_membership_forward_sums(cfg, p, mu, zproj, sums, h, B, T),
           era_membership_forward_sums_cuda(cfg, p, mu, zproj, sums, h, B, T, (era_stream)x->stream));
}
static inline int ex_membership_bwd(const ex_ctx *x, const era_rpa_config *cfg, const era_rpa_params *p,
                                    float *dh, era_rpa_grads *g, const float *dmu, float dentropy, const float *h,
                                    const float *zproj, const float *mu, int B, int T, void *ws)
{
    EX__OP(era_membership_backward(cfg, p, dh, g, dmu, dentropy, h, zproj, mu, B, T, ws),
           era_membership_backward_cuda(cfg, p, dh, g, dmu, dentropy, h, zproj, mu, B, T, ws,
                                        (era_stream)x->stream));
}
/* The priors: st the host state, cst the device state (one of them is used). */
static inline int ex_rpa_fwd(const ex_ctx *x, const era_rpa_config *cfg, const era_rpa_params *p,
                             const float *mu, int B, int T, float *bias, era_rpa_state *st,
                             era_rpa_cuda_state *cst, void *ws)
{
    EX__OP(era_rpa_forward(cfg, p, mu, B, T, bias, st, ws),
           era_rpa_forward_cuda(cfg, p, mu, B, T, bias, cst, ws, (era_stream)x->stream));
}
static inline int ex_rpa_bwd(const ex_ctx *x, const era_rpa_config *cfg, const era_rpa_params *p,
                             const era_rpa_state *st, const era_rpa_cuda_state *cst, const float *dbias,
                             float *dmu, era_rpa_grads *g, void *ws)
{
    EX__OP(era_rpa_backward(cfg, p, st, dbias, dmu, g, ws),
           era_rpa_backward_cuda(cfg, p, cst, dbias, dmu, g, ws, (era_stream)x->stream));
}
static inline int ex_era_fwd(const ex_ctx *x, const era_era_config *cfg, const era_era_params *p, int T,
                             float *bias, era_era_state *st, era_era_cuda_state *cst, void *ws)
{
    era_era_config dc;
    if (!x->device) return era_era_forward(cfg, p, T, bias, st, ws);
    dc = *cfg; /* the device's check of the centres into the context's status word (no wait) */
    dc.status = x->status;
    return era_era_forward_cuda(&dc, p, T, bias, cst, ws, (era_stream)x->stream);
}
static inline int ex_era_bwd(const ex_ctx *x, const era_era_config *cfg, const era_era_params *p,
                             const era_era_state *st, const era_era_cuda_state *cst, const float *dbias,
                             era_era_grads *g, void *ws)
{
    EX__OP(era_era_backward(cfg, p, st, dbias, g, ws),
           era_era_backward_cuda(cfg, p, cst, dbias, g, ws, (era_stream)x->stream));
}

/* era.h's evaluation cache of the RPA prior (B(T) built once per length), on the
   context's device: one of the two caches is used. */
typedef struct ex_rpa_cache {
    era_cache h;
    era_cuda_cache d;
} ex_rpa_cache;

static inline int ex_rpa_cache_init(const ex_ctx *x, ex_rpa_cache *c, size_t budget, const era_rpa_config *cfg,
                                    const era_rpa_params *p, era_mu_fn mu_fn, void *user)
{
    EX__OP(era_cache_init_rpa(&c->h, budget, cfg, p, mu_fn, user),
           era_cuda_cache_init_rpa(&c->d, budget, cfg, p, mu_fn, user));
}
static inline int ex_rpa_cache_get(const ex_ctx *x, ex_rpa_cache *c, int T, const float **bias)
{
    EX__OP(era_cache_get(&c->h, T, bias), era_cuda_cache_get(&c->d, T, bias, (era_stream)x->stream));
}
static inline void ex_rpa_cache_free(const ex_ctx *x, ex_rpa_cache *c)
{
    if (x->device) era_cuda_cache_free(&c->d);
    else era_cache_free(&c->h);
}
/* the frozen parameters and config the cache was built with; its build and hit counts */
static inline const era_rpa_params *ex_rpa_cache_params(const ex_ctx *x, const ex_rpa_cache *c)
{
    EX__OP(&c->h.rpar, &c->d.rpar);
}
static inline const era_rpa_config *ex_rpa_cache_config(const ex_ctx *x, const ex_rpa_cache *c)
{
    EX__OP(&c->h.rcfg, &c->d.rcfg);
}
static inline long ex_rpa_cache_builds(const ex_ctx *x, const ex_rpa_cache *c) { EX__OP(c->h.builds, c->d.builds); }
static inline long ex_rpa_cache_hits(const ex_ctx *x, const ex_rpa_cache *c) { EX__OP(c->h.hits, c->d.hits); }

/* ------------------------------------------------------------------ --device cuda */
/* The programs' check before --device cuda (wt2_train, generate): EX_CUDA_USABLE, or why not
   with the runtime's words in why (n bytes): EX_CUDA_NOT_BUILT (a build without nvcc:
   TK_ENOCUDA) or EX_CUDA_NO_DEVICE (a CUDA build where tk_cuda_available finds no usable
   device; why gets the runtime's error text, or "" when it gave none). A one-byte device
   allocation tells the two apart and brings back cudaGetErrorString's text through
   tensor.h's log callback (which is left unset afterwards). */
enum { EX_CUDA_USABLE = 0, EX_CUDA_NOT_BUILT = 1, EX_CUDA_NO_DEVICE = 2 };
typedef struct ex__why {
    char *buf;
    size_t n;
} ex__why;
static inline void ex__why_log(const char *msg, void *user)
{
    const ex__why *w = (const ex__why *)user;
    if (w->buf && w->n) snprintf(w->buf, w->n, "%s", msg);
}
static inline int ex_cuda_probe(char *why, size_t n)
{
    ex__why w;
    void *probe = NULL;
    int rc;
    if (why && n) why[0] = 0;
    if (tk_cuda_available()) return EX_CUDA_USABLE;
    w.buf = why;
    w.n = n;
    tk_set_log(ex__why_log, &w);
    rc = tk_device_alloc(&probe, 1);
    tk_set_log(NULL, NULL);
    if (rc == TK_OK) tk_device_free(probe); /* (tk_cuda_available said no: not usable) */
    return rc == TK_ENOCUDA ? EX_CUDA_NOT_BUILT : EX_CUDA_NO_DEVICE;
}

/* ------------------------------------------------------------------ decoding (issue 42) */
/* The per-row pieces of the model's token-by-token decoding (model.c mdl_decode_*) that
   are no tensor.h op: each CPU body below is the loop model.c ran before (the same
   arithmetic in the same order: the CPU decode is bit-identical), each CUDA body is in
   examples/common/exctx.cuh (compiled where impl.c is compiled by nvcc or in the CPU
   simulation; without either the _cuda twins return TK_ENOCUDA). ids, slot, pos: ints of
   the context's memory. Layouts: x (n, C); qkv (n, 3C) with q, k, v as (H, D) each; the
   K/V caches kc, vc (nb, nl, C) of one layer; vzc (nb, nl, H); a row r is token ids[r] at
   position pos[r] of slot slot[r]. */
int ex__dec_embed_cuda(float *x, const float *wte, const float *wpe, const int *ids, const int *pos, int n, int C,
                       tk_stream stream);
int ex__dec_kv_cuda(float *qkv, float *kc, float *vc, const int *slot, const int *pos, int n, int H, int D, int nl,
                    int rope, float base, tk_stream stream);
int ex__dec_attn_cuda(float *att, const float *qkv, const float *kc, const float *vc, const int *slot,
                      const int *pos, const float *temp, float g, const float *pb, int n, int H, int D, int nl,
                      float *sc, tk_stream stream);
int ex__dec_vgate_cuda(float *ap, float *vzc, const float *vz, const int *slot, const int *pos, int n, int H,
                       int nl, int C, tk_stream stream);
int ex__dec_conv_cuda(float *out, const float *inp, float *ring, const float *w, const int *slot, const int *pos,
                      int n, int K, int C, tk_stream stream);
int ex__dec_lfm_cuda(float *out, const float *sb, const float *sc, const float *sx, float *ring, const float *w,
                     const int *slot, const int *pos, int n, int K, int C, tk_stream stream);
int ex__dec_polar_split_cuda(float *pq, float *gl, float *kc, float *vc, const float *pqkv, const int *slot,
                             const int *pos, int n, int H, int Hkv, int D, int G, int nl, int qk_norm, float eps,
                             tk_stream stream);
int ex__dec_canon_cuda(float *pq, float *kc, float *vc, float *ring, const float *wq, const float *wk,
                       const float *wv, const int *slot, const int *pos, int n, int H, int Hkv, int D, int nl, int K,
                       tk_stream stream);

#ifdef _OPENMP
#define EX__OMP(x) _Pragma(#x)
#define EX__TID() omp_get_thread_num()
#else
#define EX__OMP(x)
#define EX__TID() 0
#endif

/* x[r] = wte[ids[r]] + wpe[pos[r]] (wpe NULL: wte[ids[r]] alone); ids in [0, V) (checked
   by the caller) */
static inline int ex_dec_embed(const ex_ctx *x, float *xo, const float *wte, const float *wpe, const int *ids,
                               const int *pos, int n, int C)
{
    int r;
    if (x->device) return ex__dec_embed_cuda(xo, wte, wpe, ids, pos, n, C, x->stream);
    for (r = 0; r < n; r++) {
        const float *te = wte + (size_t)ids[r] * C;
        float *xr = xo + (size_t)r * C;
        int j;
        if (wpe) {
            const float *pe = wpe + (size_t)pos[r] * C;
            for (j = 0; j < C; j++) xr[j] = te[j] + pe[j];
        } else {
            memcpy(xr, te, sizeof(float) * (size_t)C);
        }
    }
    return TK_OK;
}

/* rope: q and k of each row rotated in place at the row's position (tk_rope's angles:
   pow(base, -2i/D) in double); then the row's k and v into the caches at (slot, pos) */
static inline int ex_dec_kv(const ex_ctx *x, float *qkv, float *kc, float *vc, const int *slot, const int *pos, int n,
                            int H, int D, int nl, int rope, float base)
{
    const int C = H * D;
    int r;
    if (x->device) return ex__dec_kv_cuda(qkv, kc, vc, slot, pos, n, H, D, nl, rope, base, x->stream);
    for (r = 0; r < n; r++) {
        float *row = qkv + (size_t)r * 3 * C;
        const int t = pos[r];
        if (rope) {
            int i, h;
            for (i = 0; i < D / 2; i++) {
                double ang = (double)t * pow((double)base, -2.0 * i / (double)D);
                float cs = (float)cos(ang), sn = (float)sin(ang);
                for (h = 0; h < 2 * H; h++) { /* q heads, then k heads */
                    float *pp = row + (size_t)h * D + 2 * i, x0 = pp[0], x1 = pp[1];
                    pp[0] = x0 * cs - x1 * sn;
                    pp[1] = x0 * sn + x1 * cs;
                }
            }
        }
        memcpy(kc + ((size_t)slot[r] * nl + t) * C, row + C, sizeof(float) * (size_t)C);
        memcpy(vc + ((size_t)slot[r] * nl + t) * C, row + 2 * C, sizeof(float) * (size_t)C);
    }
    return TK_OK;
}

#define EX__DEC_VB 64 /* ex_dec_attn: output elements of a head summed together (its stack block) */
#define EX__DEC_PF 16 /* ex_dec_attn: keys ahead a head's cache rows are prefetched (a head's slice of
                         each cached row is D floats at a stride of C: a stream the hardware
                         prefetcher picks up late, if at all, over a few hundred keys) */
#if defined(__GNUC__) || defined(__clang__)
#define EX__PREFETCH(p) __builtin_prefetch((p), 0, 3)
#else
#define EX__PREFETCH(p) ((void)(p))
#endif
/* every 64-byte line of the head's D floats of cached row j, when j <= t (D = 32 floats
   at a line boundary is two lines: mdl_decode_init aligns the caches) */
#define EX__DEC_PF_ROW(base, j, t, C, D)                                                     \
    do {                                                                                     \
        if ((j) <= (t)) {                                                                    \
            const char *pf_ = (const char *)((base) + (size_t)(j) * (C));                    \
            const char *pe_ = pf_ + sizeof(float) * (size_t)(D);                             \
            pf_ -= (uintptr_t)pf_ & 63u;                                                     \
            for (; pf_ < pe_; pf_ += 64) EX__PREFETCH(pf_);                                  \
        }                                                                                    \
    } while (0)
/* att (n, C): each (row, head) attends over its slot's cached positions 0..t (t = pos[r]):
   scores q.k in double times 1 / (sqrt(D) temp[h] g), plus row t of pb (nl, nl) divided
   by g (pb NULL: no prior), softmax, the values summed in double. temp (H) the layer's
   temperature multipliers. sc: scratch, (nthr, nl) floats on the CPU (nthr: the OpenMP
   team size it was sized for; a larger team is TK_ERANGE), (n H, nl) on the device. */
static inline int ex_dec_attn(const ex_ctx *x, float *att, const float *qkv, const float *kc, const float *vc,
                              const int *slot, const int *pos, const float *temp, float g, const float *pb, int n,
                              int H, int D, int nl, float *scr, int nthr)
{
    const int C = H * D;
    const float ginv = 1.0f / g;
    int u, err = 0;
    if (x->device) return ex__dec_attn_cuda(att, qkv, kc, vc, slot, pos, temp, g, pb, n, H, D, nl, scr, x->stream);
    EX__OMP(omp parallel for schedule(dynamic, 1) if(n * H > 1 && nthr > 1))
    for (u = 0; u < n * H; u++) {
        const int rr = u / H, h = u % H, t = pos[rr], s = slot[rr];
        const float alpha = 1.0f / (sqrtf((float)D) * (temp[h] * g));
        const float *q = qkv + (size_t)rr * 3 * C + (size_t)h * D;
        const float *kb = kc + (size_t)s * nl * C + (size_t)h * D, *vb = vc + (size_t)s * nl * C + (size_t)h * D;
        float *sc = scr + (size_t)EX__TID() * nl, *o = att + (size_t)rr * C + (size_t)h * D, mx;
        double sum = 0.0;
        int j, e, e0;
        if (EX__TID() >= nthr) { /* (more threads than the scratch was sized for) */
            EX__OMP(omp atomic write)
            err = 1;
            continue;
        }
        /* the scores, four keys at a time: each one's double sum over e in order, as
           a = 0; a += q[e] k[j][e] (the same bits as one key at a time), four
           independent chains in flight instead of one */
        for (j = 0; j < EX__DEC_PF && j <= t; j++) EX__DEC_PF_ROW(kb, j, t, C, D);
        for (j = 0; j + 3 <= t; j += 4) {
            const float *k0 = kb + (size_t)j * C, *k1 = k0 + C, *k2 = k1 + C, *k3 = k2 + C;
            double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
            EX__DEC_PF_ROW(kb, j + EX__DEC_PF, t, C, D);
            EX__DEC_PF_ROW(kb, j + EX__DEC_PF + 1, t, C, D);
            EX__DEC_PF_ROW(kb, j + EX__DEC_PF + 2, t, C, D);
            EX__DEC_PF_ROW(kb, j + EX__DEC_PF + 3, t, C, D);
            for (e = 0; e < D; e++) {
                const double qe = (double)q[e];
                a0 += qe * (double)k0[e];
                a1 += qe * (double)k1[e];
                a2 += qe * (double)k2[e];
                a3 += qe * (double)k3[e];
            }
            sc[j] = (float)a0 * alpha;
            sc[j + 1] = (float)a1 * alpha;
            sc[j + 2] = (float)a2 * alpha;
            sc[j + 3] = (float)a3 * alpha;
        }
        for (; j <= t; j++) {
            const float *kj = kb + (size_t)j * C;
            double a = 0.0;
            for (e = 0; e < D; e++) a += (double)q[e] * (double)kj[e];
            sc[j] = (float)a * alpha;
        }
        if (pb) {
            const float *br = pb + (size_t)t * nl;
            if (g != 1.0f)
                for (j = 0; j <= t; j++) sc[j] += br[j] * ginv;
            else
                for (j = 0; j <= t; j++) sc[j] += br[j];
        }
        mx = sc[0];
        for (j = 1; j <= t; j++) mx = sc[j] > mx ? sc[j] : mx;
        for (j = 0; j <= t; j++) {
            sc[j] = expf(sc[j] - mx);
            sum += sc[j];
        }
        /* the values: per output element e the double sum over j = 0..t in order, as
           a = 0; a += sc[j] v[j][e] (one expression, so fused to an FMA or not alike in
           either loop order, whatever the compiler's contraction setting); j outer and
           up to EX__DEC_VB elements of e inner, so the e loop reads a key row's values
           contiguously and runs as independent (vectorisable) chains instead of one
           dependent chain per e walking the cache at stride C: the same operations on
           each element in the same order, so the same bits */
        for (e0 = 0; e0 < D; e0 += EX__DEC_VB) {
            const int eb = D - e0 < EX__DEC_VB ? D - e0 : EX__DEC_VB;
            double acc[EX__DEC_VB];
            for (e = 0; e < eb; e++) acc[e] = 0.0;
            for (j = 0; j < EX__DEC_PF && j <= t; j++) EX__DEC_PF_ROW(vb + e0, j, t, C, eb);
            for (j = 0; j <= t; j++) {
                const double w = (double)sc[j];
                const float *vr = vb + (size_t)j * C + e0;
                EX__DEC_PF_ROW(vb + e0, j + EX__DEC_PF, t, C, eb);
                for (e = 0; e < eb; e++) acc[e] += w * (double)vr[e];
            }
            for (e = 0; e < eb; e++) o[e0 + e] = (float)(acc[e] / sum);
        }
    }
    return err ? TK_ERANGE : TK_OK;
}

/* The value gate: vz (n, H) into the cache vzc at (slot, pos); then for each row
   g = mean_h sigmoid(mean_{s <= t} vzc[slot, s, h]) (tk_causal_mean_gate_forward's sums in
   double) and ap (n, C) *= g */
static inline int ex_dec_vgate(const ex_ctx *x, float *ap, float *vzc, const float *vz, const int *slot,
                               const int *pos, int n, int H, int nl, int C)
{
    int r;
    if (x->device) return ex__dec_vgate_cuda(ap, vzc, vz, slot, pos, n, H, nl, C, x->stream);
    for (r = 0; r < n; r++)
        memcpy(vzc + ((size_t)slot[r] * nl + pos[r]) * H, vz + (size_t)r * H, sizeof(float) * (size_t)H);
    for (r = 0; r < n; r++) {
        const int t = pos[r];
        const float *zb = vzc + (size_t)slot[r] * nl * H;
        double sum = 0.0;
        float gv, *ar = ap + (size_t)r * C;
        int h, j;
        for (h = 0; h < H; h++) {
            double acc = 0.0;
            for (j = 0; j <= t; j++) acc += (double)zb[(size_t)j * H + h];
            sum += (double)(float)(1.0 / (1.0 + exp(-(acc / (double)(t + 1)))));
        }
        gv = (float)(sum / (double)H);
        for (j = 0; j < C; j++) ar[j] *= gv;
    }
    return TK_OK;
}

/* RMSNorm of one row of D floats in place, no weight: row <- row r, r = 1 / sqrt(mean
   row^2 + eps) in double; returns r (layers.c's lyr_rms_rows, polar's q/k norm, is this per
   row; the device's decode calls it from its kernel). */
#if defined(__CUDACC__)
#define EX__HD __host__ __device__
#else
#define EX__HD
#endif
static inline EX__HD float ex_rms_row(float *row, int D, float eps)
{
    double ss = 0, r;
    int j;
    for (j = 0; j < D; j++) ss += (double)row[j] * row[j];
    r = 1.0 / sqrt(ss / D + eps);
    for (j = 0; j < D; j++) row[j] = (float)(row[j] * r);
    return (float)r;
}

/* ------------------------------------------------------------------ MoE router, backward */
/* One token's router gradient (lyr_moe_bwd): g (E) = dL/d(raw logit) from the kept
   experts' weight gradients dw (K) (+ pe[idx[k]] when pe is not NULL: the load-balance
   term per expert), through the weights' normalisation (renorm: the softmax over the kept
   experts; else w = y / (sum y + 1e-6)), the softmax y (E), the clamp of the raw logits
   lraw (E) at |l| > 30 (no gradient) and the 1/tau of the Gumbel softmax. w, idx (K): the
   kept weights and their experts. The CPU body and the device kernel run this same code. */
/* kept expert k's weight gradient, with the load-balance term of its expert (pe: NULL for none) */
static inline EX__HD float ex__moe_gw(const float *dw, const float *pe, const int *ix, int k)
{
    return pe ? dw[k] + pe[ix[k]] : dw[k];
}
static inline EX__HD void ex_moe_route_bwd_row(float *g, const float *dw, const float *pe, const float *w,
                                               const int *ix, const float *y, const float *lr, int E, int K,
                                               int renorm, double inv_tau)
{
    int ee, k;
    for (ee = 0; ee < E; ee++) g[ee] = 0;
    if (renorm) {
        double sdot = 0;
        for (k = 0; k < K; k++) sdot += (double)w[k] * ex__moe_gw(dw, pe, ix, k);
        for (k = 0; k < K; k++) g[ix[k]] = (float)((double)w[k] * ((double)ex__moe_gw(dw, pe, ix, k) - sdot));
    } else { /* sum y == 1: dy_e = dw_e / (1 + 1e-6) */
        double all = 0, ydy = 0, cst;
        for (ee = 0; ee < E; ee++) all += y[ee];
        cst = 1.0 / (all + 1e-6);
        for (k = 0; k < K; k++) {
            const float gw = ex__moe_gw(dw, pe, ix, k);
            g[ix[k]] = (float)(gw * cst); /* dy */
            ydy += (double)y[ix[k]] * gw * cst;
        }
        for (ee = 0; ee < E; ee++) g[ee] = (float)((double)y[ee] * ((double)g[ee] - ydy));
    }
    for (ee = 0; ee < E; ee++) {
        const double l = lr[ee];
        g[ee] = (l > 30.0 || l < -30.0) ? 0.0f : (float)(g[ee] * inv_tau);
    }
}

int ex__moe_route_bwd_cuda(float *dl, const float *dw, const float *pe, const float *w, const int *idx,
                           const float *y, const float *lraw, int N, int E, int K, int renorm, double inv_tau,
                           tk_stream stream);

/* dl (N, E) = the router's gradient of every token (ex_moe_route_bwd_row per row) from dw,
   w, idx (N, K), y, lraw (N, E) and pe (E, or NULL), all in the context's memory: on a
   device no value comes back to the host. */
static inline int ex_moe_route_bwd(const ex_ctx *x, float *dl, const float *dw, const float *pe, const float *w,
                                   const int *idx, const float *y, const float *lraw, int N, int E, int K, int renorm,
                                   double inv_tau)
{
    int n;
    if (!dl || !dw || !w || !idx || !y || !lraw || N < 1 || E < 1 || K < 1 || K > E) return TK_EINVAL;
    if (x->device) return ex__moe_route_bwd_cuda(dl, dw, pe, w, idx, y, lraw, N, E, K, renorm, inv_tau, x->stream);
    EX__OMP(omp parallel for schedule(static) if((long long)N * E * K > 16384))
    for (n = 0; n < N; n++)
        ex_moe_route_bwd_row(dl + (size_t)n * E, dw + (size_t)n * K, pe, w + (size_t)n * K, idx + (size_t)n * K,
                             y + (size_t)n * E, lraw + (size_t)n * E, E, K, renorm, inv_tau);
    return TK_OK;
}

/* ------------------------------------------------------------------ GAC, backward */
/* The gradient of GAC's temperature g of one layer (model.c): with temp_h = base_h g and
   the bias divided by g, dL/dg = sum_h dtemp[h] (temp[h] / g) - sb / g, in double (ig =
   1 / g; sb: sum dbias' bias', NULL when the layer has no bias gradient), added to the
   gradient *dg as a float. The CPU body and the device kernel run this same code. */
static inline EX__HD void ex_gac_dtau_one(float *dg, const float *dtemp, const float *temp, float ig,
                                          const float *sb, int H)
{
    double s = 0.0;
    int h;
    for (h = 0; h < H; h++) s += (double)dtemp[h] * (temp[h] * ig);
    if (sb) s -= (double)sb[0] * ig;
    dg[0] = dg[0] + (float)s;
}

int ex__gac_dtau_cuda(float *dg, const float *dtemp, const float *temp, float ig, const float *sb, int H,
                      tk_stream stream);

/* ex_gac_dtau_one on the context's side: dg (1), dtemp (H), temp (H) and sb (1 or NULL)
   in the context's memory, ig a host value; on a device no value comes back. */
static inline int ex_gac_dtau(const ex_ctx *x, float *dg, const float *dtemp, const float *temp, float ig,
                              const float *sb, int H)
{
    if (!dg || !dtemp || !temp || H < 1) return TK_EINVAL;
    if (x->device) return ex__gac_dtau_cuda(dg, dtemp, temp, ig, sb, H, x->stream);
    ex_gac_dtau_one(dg, dtemp, temp, ig, sb, H);
    return TK_OK;
}

/* Polar attention's rows (model.c mdl__dec_polar). pqkv (n, Pq) rows [q (H,D) | k (Hkv,D) |
   v (Hkv,D) | gate logits (G)], Pq = (H + 2 Hkv) D + G (G = H: a gate per head, H D: per
   channel): q into pq (n, H, D), k and v into the caches (nb, Hkv, nl, D) of one layer at
   (slot, pos), the gate logits into gl (n, G); qk_norm: each head of q and of the cached k
   RMSNormed (ex_rms_row, eps). */
static inline int ex_dec_polar_split(const ex_ctx *x, float *pq, float *gl, float *kc, float *vc, const float *pqkv,
                                     const int *slot, const int *pos, int n, int H, int Hkv, int D, int G, int nl,
                                     int qk_norm, float eps)
{
    const size_t Pq = (size_t)(H + 2 * Hkv) * D + (size_t)G;
    int r, h;
    if (x->device)
        return ex__dec_polar_split_cuda(pq, gl, kc, vc, pqkv, slot, pos, n, H, Hkv, D, G, nl, qk_norm, eps, x->stream);
    for (r = 0; r < n; r++) {
        const float *row = pqkv + (size_t)r * Pq;
        const int s = slot[r], t = pos[r];
        memcpy(pq + (size_t)r * H * D, row, sizeof(float) * (size_t)H * D);
        for (h = 0; h < Hkv; h++) {
            memcpy(kc + (((size_t)s * Hkv + h) * nl + t) * D, row + (size_t)(H + h) * D, sizeof(float) * (size_t)D);
            memcpy(vc + (((size_t)s * Hkv + h) * nl + t) * D, row + (size_t)(H + Hkv + h) * D,
                   sizeof(float) * (size_t)D);
        }
        memcpy(gl + (size_t)r * G, row + (size_t)(H + 2 * Hkv) * D, sizeof(float) * (size_t)G);
        if (qk_norm) {
            for (h = 0; h < Hkv; h++) (void)ex_rms_row(kc + (((size_t)s * Hkv + h) * nl + t) * D, D, eps);
            for (h = 0; h < H; h++) (void)ex_rms_row(pq + ((size_t)r * H + h) * D, D, eps);
        }
    }
    return TK_OK;
}

/* Canon's step (layers.h section 2) of one channel c in [0, (H + 2 Hkv) D) of row r (slot s,
   position t), channels ordered [q heads | k heads | v heads]: the value x (in pq, or in the
   cache at (s, t)) goes into the slot's ring (K, PC) at t % K, then
   x <- x + sum_{j < K, j <= t} w[h, j, ch] ring[(t - j) % K] (fmaf, j in order: the
   forward's tk_causal_dwconv_forward, bit for bit). ring: the layer's (nb, K, PC). The CPU
   body and the device kernel run this same code. */
static inline EX__HD void ex_dec_canon_one(float *pq, float *kc, float *vc, float *ring, const float *wq,
                                           const float *wk, const float *wv, int r, int s, int t, int c, int H,
                                           int Hkv, int D, int nl, int K)
{
    const size_t PC = (size_t)(H + 2 * Hkv) * D;
    const int h = c / D, ch = c % D;
    float *o, acc;
    const float *w;
    int j;
    if (h < H) {
        o = pq + ((size_t)r * H + h) * D + ch;
        w = wq + (size_t)h * K * D + ch;
    } else {
        const int hk = (h - H) % Hkv, isk = h < H + Hkv;
        o = (isk ? kc : vc) + (((size_t)s * Hkv + hk) * nl + t) * D + ch;
        w = (isk ? wk : wv) + (size_t)hk * K * D + ch;
    }
    ring += (size_t)s * K * PC + (size_t)c;
    acc = *o;
    ring[(size_t)(t % K) * PC] = acc;
    for (j = 0; j < K && j <= t; j++) acc = fmaf(w[(size_t)j * D], ring[(size_t)((t - j) % K) * PC], acc);
    *o = acc;
}

/* Polar's Canon layers for the n rows (model.c mdl__dec_polar, after ex_dec_polar_split):
   q in pq (n, H, D) and the rows' cached k, v (nb, Hkv, nl, D) in place, each through
   ex_dec_canon_one over its slot's ring (nb, K, (H + 2 Hkv) D) of the last K inputs; wq
   (H, K, D), wk, wv (Hkv, K, D). Rows of one slot in position order (a prefill): each
   channel's rows run in order on both devices. */
static inline int ex_dec_canon(const ex_ctx *x, float *pq, float *kc, float *vc, float *ring, const float *wq,
                               const float *wk, const float *wv, const int *slot, const int *pos, int n, int H,
                               int Hkv, int D, int nl, int K)
{
    const int PC = (H + 2 * Hkv) * D;
    int r, c;
    if (!pq || !kc || !vc || !ring || !wq || !wk || !wv || !slot || !pos || n < 1 || H < 1 || Hkv < 1 || D < 1 ||
        nl < 1 || K < 1)
        return TK_EINVAL;
    if (x->device) return ex__dec_canon_cuda(pq, kc, vc, ring, wq, wk, wv, slot, pos, n, H, Hkv, D, nl, K, x->stream);
    for (r = 0; r < n; r++)
        for (c = 0; c < PC; c++) ex_dec_canon_one(pq, kc, vc, ring, wq, wk, wv, r, slot[r], pos[r], c, H, Hkv, D, nl, K);
    return TK_OK;
}

/* polar_decode of each row over its slot's cache block (one block of nl positions per
   slot: block_table = slot, seq_lens = lens, max_blocks 1): the CPU one row at a time
   (polar_decode with B = 1), the device all rows in one polar_decode_cuda. Returns a
   POLAR_* code. */
static inline int ex_dec_polar_decode(const ex_ctx *x, const polar_config *cfg, float *c, float *mag, const float *q,
                                      const float *kc, const float *vc, const int *slot, const int *lens,
                                      const polar_params *prm, int n, int H, int Hkv, int D, int nl, int nb)
{
    int r, rc;
    if (x->device)
        return polar_decode_cuda(cfg, c, mag, q, kc, vc, slot, lens, prm, n, H, Hkv, D, nl, nb, 1,
                                 (polar_stream)x->stream);
    for (r = 0; r < n; r++) {
        int len = lens[r];
        rc = polar_decode(cfg, c + (size_t)r * H * D, mag + (size_t)r * H, q + (size_t)r * H * D, kc, vc, slot + r, &len,
                          prm, 1, H, Hkv, D, nl, nb, 1);
        if (rc != POLAR_OK) return rc;
    }
    return POLAR_OK;
}

/* Eq. 14 for n rows (T = 1): out (n, C) = (c sigmoid(gl)) W_o^T + mag W_mu^T; c (n, H, D),
   mag, gl (n, H), W_o (C, H D), W_mu (C, H). The CPU: polar_assemble_forward; the device:
   tensor.h's sigmoid, row scale and GEMMs (layers.c's device path of the forward), with
   sg (n H) and z (n H D) floats of device scratch. Returns a POLAR_* code (TK_* on the
   device). */
static inline int ex_dec_polar_assemble(const ex_ctx *x, float *out, const float *c, const float *mag, const float *gl,
                                        const float *Wo, const float *Wmu, int n, int H, int D, int C, float *sg,
                                        float *z)
{
    int rc;
    if (!x->device) return polar_assemble_forward(out, c, mag, gl, Wo, Wmu, n, H, 1, D, C);
    if ((rc = ex_sigmoid_fwd(x, sg, gl, (size_t)n * H)) != TK_OK) return rc;
    if ((rc = ex_rowscale(x, z, c, sg, n * H, D)) != TK_OK) return rc;
    if ((rc = ex_matmul_fwd(x, out, z, Wo, NULL, n, H * D, C)) != TK_OK) return rc;
    return ex_sgemm(x, 0, 1, n, C, H, 1.0f, mag, H, Wmu, H, 1.0f, out, C);
}

/* The gated-delta step of each row on its slot's state (gdelta.h's gd_step in place, one
   row at a time in row order: a prefill's rows share a slot): table (nb, Hm, Dk, Dk); q, k,
   v, r (n, Hm, Dk); gates, beta (n, Hm); slot (n) of the context's memory. A GD_* code. */
static inline int ex_dec_gd_step(const ex_ctx *x, const gd_config *cfg, float *table, int nb, const int *slot, int n,
                                 int Hm, int Dk, const float *q, const float *k, const float *v, const float *gates,
                                 const float *beta, float *r)
{
    const size_t HD = (size_t)Hm * Dk;
    int i, rc;
    for (i = 0; i < n; i++) {
        const size_t o = (size_t)i * HD;
        rc = x->device ? gd_step_cuda(cfg, table, nb, slot + i, 1, Hm, Dk, Dk, q + o, k + o, v + o,
                                      gates + (size_t)i * Hm, beta + (size_t)i * Hm, r + o, (gd_stream)x->stream)
                       : gd_step(cfg, table, nb, slot + i, 1, Hm, Dk, Dk, q + o, k + o, v + o, gates + (size_t)i * Hm,
                                 beta + (size_t)i * Hm, r + o);
        if (rc != GD_OK) return rc;
    }
    return GD_OK;
}

/* The causal depthwise convolution's rows (cfg.conv_k): each row's input into its slot's
   ring (nb, K, C) of one layer at t % K, then out = inp + sum_{j<K, j<=t} w[j] ring[t-j]
   (tk_causal_dwconv_forward's fmaf chain, j in order). Rows in order (a prefill's rows
   share a ring); the device runs one thread per channel over the rows in the same order
   (fmaf on both: bit-identical). out, inp (n, C); w (K, C). */
static inline int ex_dec_conv(const ex_ctx *x, float *out, const float *inp, float *ring, const float *w,
                              const int *slot, const int *pos, int n, int K, int C)
{
    int r;
    if (x->device) return ex__dec_conv_cuda(out, inp, ring, w, slot, pos, n, K, C, x->stream);
    for (r = 0; r < n; r++) {
        const int t = pos[r];
        float *rg = ring + (size_t)slot[r] * (size_t)K * C, *o = out + (size_t)r * C;
        int j, ch;
        memcpy(rg + (size_t)(t % K) * C, inp + (size_t)r * C, sizeof(float) * (size_t)C);
        memcpy(o, inp + (size_t)r * C, sizeof(float) * (size_t)C);
        for (j = 0; j < K && j <= t; j++) {
            const float *xs = rg + (size_t)((t - j) % K) * C, *wj = w + (size_t)j * C;
            for (ch = 0; ch < C; ch++) o[ch] = fmaf(wj[ch], xs[ch], o[ch]);
        }
    }
    return TK_OK;
}

/* The gated short convolution's rows (layer_pattern 'c'): y = B x into the slot's ring
   (nb, K, C) at t % K; z = sum_{j<K, j<=t} w[j] y[t-j] (fmaf from 0, j in order); out =
   C' z. sb, sc, sx (n, C) the three streams; w (K, C). Rows in order; the device one
   thread per channel (bit-identical). */
static inline int ex_dec_lfm(const ex_ctx *x, float *out, const float *sb, const float *sc, const float *sx,
                             float *ring, const float *w, const int *slot, const int *pos, int n, int K, int C)
{
    int r;
    if (x->device) return ex__dec_lfm_cuda(out, sb, sc, sx, ring, w, slot, pos, n, K, C, x->stream);
    for (r = 0; r < n; r++) {
        const int t = pos[r];
        float *rg = ring + (size_t)slot[r] * (size_t)K * C, *o = out + (size_t)r * C;
        float *yt = rg + (size_t)(t % K) * C;
        const float *br = sb + (size_t)r * C, *cr = sc + (size_t)r * C, *xr = sx + (size_t)r * C;
        int j, ch;
        for (ch = 0; ch < C; ch++) yt[ch] = br[ch] * xr[ch];
        for (ch = 0; ch < C; ch++) o[ch] = 0.0f;
        for (j = 0; j < K && j <= t; j++) {
            const float *ys = rg + (size_t)((t - j) % K) * C, *wj = w + (size_t)j * C;
            for (ch = 0; ch < C; ch++) o[ch] = fmaf(wj[ch], ys[ch], o[ch]);
        }
        for (ch = 0; ch < C; ch++) o[ch] = cr[ch] * o[ch];
    }
    return TK_OK;
}
#undef EX__OMP
#undef EX__TID

#undef EX__OP

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_EXCTX_H */
