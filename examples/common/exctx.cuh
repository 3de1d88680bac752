/* exctx.cuh - the CUDA bodies of exctx.h's decoding ops (ex_dec_*: issue 42), of its MoE
   router backward and of GAC's temperature gradient, included by impl.c where it is
   compiled by nvcc (the GPU examples' build/cuda/obj/impl.o) or in the CPU simulation
   (tests/cuda_sim.h: the parity tests that include impl.c), after tensor.h's
   implementation (its TK__LAUNCH, tk__launched, tk__blocks).

   Each kernel is the CPU loop of exctx.h spread over threads, with the CPU's arithmetic
   (the scores and the value sums in double, the softmax in float, the gate in double):
     ex__dec_embed_cuda  one thread per (row, channel);
     ex__dec_kv_cuda     one thread per (row, head of q/k/v, pair of the head): the RoPE
                         rotation (angle in double, as tk_rope) and the k/v cache writes;
     ex__dec_attn_cuda   one thread per (row, head) over its slot's positions 0..t, the
                         scores in a (n H, nl) scratch of device memory (a simple kernel:
                         a decode step has n H independent rows; no shared-memory tiling);
     ex__dec_vgate_cuda  one thread per (row, head) writes the cache, then one per row
                         sums the gate and scales its C values;
     ex__dec_polar_split_cuda  one thread per head of a polar qkvg row (q, the cache
                         writes of k and v, qk_norm's RMSNorm by exctx.h's ex_rms_row; one
                         more for the gate logits, per head or per channel). Polar's decode
                         itself is polar_decode_cuda, its output assembly tensor.h's ops
                         (layers.c's lyr_polar_assemble with the gate per channel or the
                         output biases);
     ex__dec_canon_cuda  one thread per channel of polar's [q | k | v] over the rows in
                         order: exctx.h's ex_dec_canon_one, the CPU's own code (Canon
                         layers' ring and convolution; bit-identical to the CPU);
     ex__dec_conv_cuda / ex__dec_lfm_cuda  one thread per channel over the rows in order
                         (the rings' writes and reads of a prefill stay in order; fmaf as
                         the CPU: bit-identical to it);
     ex__moe_route_bwd_cuda  one thread per token: exctx.h's ex_moe_route_bwd_row, the
                         CPU's own code (training, not decoding: lyr_moe_bwd);
     ex__gac_dtau_cuda   one thread: exctx.h's ex_gac_dtau_one (GAC's temperature
                         gradient, model.c's attention backward).
   Parity: within float rounding of the CPU (the device's cos/sin/exp in double, fused
   multiply-adds where nvcc contracts); exact in the simulation up to the host compiler's
   contraction. Ran only in the CPU simulation so far (docs/GPU.md).

   License: MIT. */
#ifndef ATTNKIT_EXCTX_CUH
#define ATTNKIT_EXCTX_CUH

#include "examples/common/exctx.h"

static __global__ void ex__k_dec_embed(float *x, const float *wte, const float *wpe, const int *ids, const int *pos,
                                       int n, int C)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int r, j;
    if (k >= (size_t)n * C) return;
    r = (int)(k / (size_t)C);
    j = (int)(k % (size_t)C);
    if (wpe)
        x[k] = wte[(size_t)ids[r] * C + j] + wpe[(size_t)pos[r] * C + j];
    else
        x[k] = wte[(size_t)ids[r] * C + j];
}

int ex__dec_embed_cuda(float *x, const float *wte, const float *wpe, const int *ids, const int *pos, int n, int C,
                       tk_stream stream)
{
    if (!x || !wte || !ids || (wpe && !pos) || n < 1 || C < 1) return TK_EINVAL;
    TK__LAUNCH(ex__k_dec_embed, tk__blocks((size_t)n * C, 256), 256, 0, (cudaStream_t)stream, x, wte, wpe, ids, pos,
               n, C);
    return tk__launched("ex__dec_embed_cuda");
}

/* one thread per (r, hh, i): hh in [0, 3H) (q, k, v heads), i in [0, (D+1)/2) */
static __global__ void ex__k_dec_kv(float *qkv, float *kc, float *vc, const int *slot, const int *pos, int n, int H,
                                    int D, int nl, int rope, float base)
{
    const int P = (D + 1) / 2, C = H * D;
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int r, hh, i, t, e;
    float *pp;
    if (k >= (size_t)n * 3 * H * P) return;
    r = (int)(k / ((size_t)3 * H * P));
    hh = (int)((k / (size_t)P) % (size_t)(3 * H));
    i = (int)(k % (size_t)P);
    t = pos[r];
    pp = qkv + (size_t)r * 3 * C + (size_t)hh * D + 2 * i;
    if (rope && hh < 2 * H && 2 * i + 1 < D) {
        double ang = (double)t * pow((double)base, -2.0 * i / (double)D);
        float cs = (float)cos(ang), sn = (float)sin(ang), x0 = pp[0], x1 = pp[1];
        pp[0] = x0 * cs - x1 * sn;
        pp[1] = x0 * sn + x1 * cs;
    }
    if (hh >= H) {
        float *dst = (hh < 2 * H ? kc : vc) + ((size_t)slot[r] * nl + t) * C + (size_t)(hh % H) * D + 2 * i;
        for (e = 0; e < 2 && 2 * i + e < D; e++) dst[e] = pp[e];
    }
}

int ex__dec_kv_cuda(float *qkv, float *kc, float *vc, const int *slot, const int *pos, int n, int H, int D, int nl,
                    int rope, float base, tk_stream stream)
{
    const size_t nt = (size_t)n * 3 * H * ((D + 1) / 2);
    if (!qkv || !kc || !vc || !slot || !pos || n < 1 || H < 1 || D < 1 || nl < 1) return TK_EINVAL;
    TK__LAUNCH(ex__k_dec_kv, tk__blocks(nt, 128), 128, 0, (cudaStream_t)stream, qkv, kc, vc, slot, pos, n, H, D, nl,
               rope, base);
    return tk__launched("ex__dec_kv_cuda");
}

static __global__ void ex__k_dec_attn(float *att, const float *qkv, const float *kc, const float *vc, const int *slot,
                                      const int *pos, const float *temp, float g, const float *pb, int n, int H,
                                      int D, int nl, float *scr)
{
    const int C = H * D;
    const float ginv = 1.0f / g;
    size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int rr, h, t, s, j, e;
    float alpha, mx, *sc, *o;
    const float *q, *kb, *vb;
    double sum = 0.0;
    if (u >= (size_t)n * H) return;
    rr = (int)(u / (size_t)H);
    h = (int)(u % (size_t)H);
    t = pos[rr];
    s = slot[rr];
    alpha = 1.0f / (sqrtf((float)D) * (temp[h] * g));
    q = qkv + (size_t)rr * 3 * C + (size_t)h * D;
    kb = kc + (size_t)s * nl * C + (size_t)h * D;
    vb = vc + (size_t)s * nl * C + (size_t)h * D;
    sc = scr + u * (size_t)nl;
    o = att + (size_t)rr * C + (size_t)h * D;
    for (j = 0; j <= t; j++) {
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
    for (e = 0; e < D; e++) {
        double a = 0.0;
        for (j = 0; j <= t; j++) a += (double)sc[j] * (double)vb[(size_t)j * C + e];
        o[e] = (float)(a / sum);
    }
}

int ex__dec_attn_cuda(float *att, const float *qkv, const float *kc, const float *vc, const int *slot,
                      const int *pos, const float *temp, float g, const float *pb, int n, int H, int D, int nl,
                      float *sc, tk_stream stream)
{
    if (!att || !qkv || !kc || !vc || !slot || !pos || !temp || !sc || n < 1 || H < 1 || D < 1 || nl < 1)
        return TK_EINVAL;
    TK__LAUNCH(ex__k_dec_attn, tk__blocks((size_t)n * H, 64), 64, 0, (cudaStream_t)stream, att, qkv, kc, vc, slot,
               pos, temp, g, pb, n, H, D, nl, sc);
    return tk__launched("ex__dec_attn_cuda");
}

static __global__ void ex__k_dec_vz_put(float *vzc, const float *vz, const int *slot, const int *pos, int n, int H,
                                        int nl)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int r;
    if (k >= (size_t)n * H) return;
    r = (int)(k / (size_t)H);
    vzc[((size_t)slot[r] * nl + pos[r]) * H + k % (size_t)H] = vz[k];
}

static __global__ void ex__k_dec_vgate(float *ap, const float *vzc, const int *slot, const int *pos, int n, int H,
                                       int nl, int C)
{
    size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float *zb;
    double sum = 0.0;
    float gv, *ar;
    int t, h, j;
    if (r >= (size_t)n) return;
    t = pos[r];
    zb = vzc + (size_t)slot[r] * nl * H;
    ar = ap + r * (size_t)C;
    for (h = 0; h < H; h++) {
        double acc = 0.0;
        for (j = 0; j <= t; j++) acc += (double)zb[(size_t)j * H + h];
        sum += (double)(float)(1.0 / (1.0 + exp(-(acc / (double)(t + 1)))));
    }
    gv = (float)(sum / (double)H);
    for (j = 0; j < C; j++) ar[j] *= gv;
}

int ex__dec_vgate_cuda(float *ap, float *vzc, const float *vz, const int *slot, const int *pos, int n, int H,
                       int nl, int C, tk_stream stream)
{
    int rc;
    if (!ap || !vzc || !vz || !slot || !pos || n < 1 || H < 1 || nl < 1 || C < 1) return TK_EINVAL;
    TK__LAUNCH(ex__k_dec_vz_put, tk__blocks((size_t)n * H, 128), 128, 0, (cudaStream_t)stream, vzc, vz, slot, pos, n,
               H, nl);
    if ((rc = tk__launched("ex__dec_vgate_cuda")) != TK_OK) return rc;
    TK__LAUNCH(ex__k_dec_vgate, tk__blocks((size_t)n, 64), 64, 0, (cudaStream_t)stream, ap, (const float *)vzc, slot,
               pos, n, H, nl, C);
    return tk__launched("ex__dec_vgate_cuda");
}

/* one thread per (r, hh), hh in [0, H + 2 Hkv]: a q head -> pq, a k / v head -> the caches
   (q and k RMSNormed with qk_norm), hh = H + 2 Hkv: the G gate logits -> gl */
static __global__ void ex__k_dec_polar_split(float *pq, float *gl, float *kc, float *vc, const float *pqkv,
                                             const int *slot, const int *pos, int n, int H, int Hkv, int D, int G,
                                             int nl, int qk_norm, float eps)
{
    const int NH = H + 2 * Hkv + 1;
    const size_t Pq = (size_t)(H + 2 * Hkv) * D + (size_t)G;
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float *src;
    float *dst;
    int r, hh, i, m = D;
    if (k >= (size_t)n * NH) return;
    r = (int)(k / (size_t)NH);
    hh = (int)(k % (size_t)NH);
    src = pqkv + (size_t)r * Pq + (size_t)hh * D;
    if (hh < H) {
        dst = pq + ((size_t)r * H + hh) * D;
    } else if (hh < H + 2 * Hkv) {
        const int h = (hh - H) % Hkv;
        dst = (hh < H + Hkv ? kc : vc) + (((size_t)slot[r] * Hkv + h) * nl + pos[r]) * D;
    } else {
        dst = gl + (size_t)r * G;
        m = G;
    }
    for (i = 0; i < m; i++) dst[i] = src[i];
    if (qk_norm && hh < H + Hkv) (void)ex_rms_row(dst, D, eps);
}

int ex__dec_polar_split_cuda(float *pq, float *gl, float *kc, float *vc, const float *pqkv, const int *slot,
                             const int *pos, int n, int H, int Hkv, int D, int G, int nl, int qk_norm, float eps,
                             tk_stream stream)
{
    const size_t nt = (size_t)n * (size_t)(H + 2 * Hkv + 1);
    if (!pq || !gl || !kc || !vc || !pqkv || !slot || !pos || n < 1 || H < 1 || Hkv < 1 || D < 1 || G < 1 || nl < 1)
        return TK_EINVAL;
    TK__LAUNCH(ex__k_dec_polar_split, tk__blocks(nt, 64), 64, 0, (cudaStream_t)stream, pq, gl, kc, vc, pqkv, slot,
               pos, n, H, Hkv, D, G, nl, qk_norm, eps);
    return tk__launched("ex__dec_polar_split_cuda");
}

/* one thread per channel c of [q | k | v] ((H + 2 Hkv) D of them), over the rows in order
   (a prefill's rows of one slot read the ring entries the earlier rows wrote): exctx.h's
   ex_dec_canon_one, the CPU's own code */
static __global__ void ex__k_dec_canon(float *pq, float *kc, float *vc, float *ring, const float *wq, const float *wk,
                                       const float *wv, const int *slot, const int *pos, int n, int H, int Hkv, int D,
                                       int nl, int K)
{
    const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int r;
    if (c >= (size_t)(H + 2 * Hkv) * D) return;
    for (r = 0; r < n; r++) ex_dec_canon_one(pq, kc, vc, ring, wq, wk, wv, r, slot[r], pos[r], (int)c, H, Hkv, D, nl, K);
}

int ex__dec_canon_cuda(float *pq, float *kc, float *vc, float *ring, const float *wq, const float *wk,
                       const float *wv, const int *slot, const int *pos, int n, int H, int Hkv, int D, int nl, int K,
                       tk_stream stream)
{
    const size_t nt = (size_t)(H + 2 * Hkv) * (size_t)D;
    if (!pq || !kc || !vc || !ring || !wq || !wk || !wv || !slot || !pos || n < 1 || H < 1 || Hkv < 1 || D < 1 ||
        nl < 1 || K < 1)
        return TK_EINVAL;
    TK__LAUNCH(ex__k_dec_canon, tk__blocks(nt, 64), 64, 0, (cudaStream_t)stream, pq, kc, vc, ring, wq, wk, wv, slot, pos,
               n, H, Hkv, D, nl, K);
    return tk__launched("ex__dec_canon_cuda");
}

/* one thread per channel, the rows in order (a prefill's rows share a ring) */
static __global__ void ex__k_dec_conv(float *out, const float *inp, float *ring, const float *w, const int *slot,
                                      const int *pos, int n, int K, int C)
{
    const int ch = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    int r, j;
    if (ch >= C) return;
    for (r = 0; r < n; r++) {
        const int t = pos[r];
        float *rg = ring + (size_t)slot[r] * (size_t)K * C;
        const float xi = inp[(size_t)r * C + ch];
        float o = xi;
        rg[(size_t)(t % K) * C + ch] = xi;
        for (j = 0; j < K && j <= t; j++) o = fmaf(w[(size_t)j * C + ch], rg[(size_t)((t - j) % K) * C + ch], o);
        out[(size_t)r * C + ch] = o;
    }
}

int ex__dec_conv_cuda(float *out, const float *inp, float *ring, const float *w, const int *slot, const int *pos,
                      int n, int K, int C, tk_stream stream)
{
    if (!out || !inp || !ring || !w || !slot || !pos || n < 1 || K < 1 || C < 1) return TK_EINVAL;
    TK__LAUNCH(ex__k_dec_conv, tk__blocks((size_t)C, 64), 64, 0, (cudaStream_t)stream, out, inp, ring, w, slot, pos, n,
               K, C);
    return tk__launched("ex__dec_conv_cuda");
}

static __global__ void ex__k_dec_lfm(float *out, const float *sb, const float *sc, const float *sx, float *ring,
                                     const float *w, const int *slot, const int *pos, int n, int K, int C)
{
    const int ch = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    int r, j;
    if (ch >= C) return;
    for (r = 0; r < n; r++) {
        const int t = pos[r];
        const size_t rc = (size_t)r * C + ch;
        float *rg = ring + (size_t)slot[r] * (size_t)K * C, o = 0.0f;
        rg[(size_t)(t % K) * C + ch] = sb[rc] * sx[rc];
        for (j = 0; j < K && j <= t; j++) o = fmaf(w[(size_t)j * C + ch], rg[(size_t)((t - j) % K) * C + ch], o);
        out[rc] = sc[rc] * o;
    }
}

int ex__dec_lfm_cuda(float *out, const float *sb, const float *sc, const float *sx, float *ring, const float *w,
                     const int *slot, const int *pos, int n, int K, int C, tk_stream stream)
{
    if (!out || !sb || !sc || !sx || !ring || !w || !slot || !pos || n < 1 || K < 1 || C < 1) return TK_EINVAL;
    TK__LAUNCH(ex__k_dec_lfm, tk__blocks((size_t)C, 64), 64, 0, (cudaStream_t)stream, out, sb, sc, sx, ring, w, slot,
               pos, n, K, C);
    return tk__launched("ex__dec_lfm_cuda");
}

/* the MoE router's backward: one thread per token, exctx.h's row function */
static __global__ void ex__k_moe_route_bwd(float *dl, const float *dw, const float *pe, const float *w, const int *idx,
                                           const float *y, const float *lraw, int N, int E, int K, int renorm,
                                           double inv_tau)
{
    const size_t n = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= (size_t)N) return;
    ex_moe_route_bwd_row(dl + n * E, dw + n * K, pe, w + n * K, idx + n * K, y + n * E, lraw + n * E, E, K, renorm,
                         inv_tau);
}

int ex__moe_route_bwd_cuda(float *dl, const float *dw, const float *pe, const float *w, const int *idx,
                           const float *y, const float *lraw, int N, int E, int K, int renorm, double inv_tau,
                           tk_stream stream)
{
    if (!dl || !dw || !w || !idx || !y || !lraw || N < 1 || E < 1 || K < 1 || K > E) return TK_EINVAL;
    TK__LAUNCH(ex__k_moe_route_bwd, tk__blocks((size_t)N, 128), 128, 0, (cudaStream_t)stream, dl, dw, pe, w, idx, y,
               lraw, N, E, K, renorm, inv_tau);
    return tk__launched("ex__moe_route_bwd_cuda");
}

/* GAC's temperature gradient: one thread, exctx.h's ex_gac_dtau_one */
static __global__ void ex__k_gac_dtau(float *dg, const float *dtemp, const float *temp, float ig, const float *sb,
                                      int H)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) ex_gac_dtau_one(dg, dtemp, temp, ig, sb, H);
}

int ex__gac_dtau_cuda(float *dg, const float *dtemp, const float *temp, float ig, const float *sb, int H,
                      tk_stream stream)
{
    if (!dg || !dtemp || !temp || H < 1) return TK_EINVAL;
    TK__LAUNCH(ex__k_gac_dtau, 1, 1, 0, (cudaStream_t)stream, dg, dtemp, temp, ig, sb, H);
    return tk__launched("ex__gac_dtau_cuda");
}

#endif /* ATTNKIT_EXCTX_CUH */
