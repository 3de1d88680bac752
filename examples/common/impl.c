/* impl.c - the one translation unit of the examples that compiles the attnkit headers'
   implementations (each header's X_IMPLEMENTATION), so every program in examples/ links
   them once. Tests link it (the Makefile's TEST_OBJS_<test>: build/<cc>/common/impl.o) or,
   one translation unit, include this file directly. */
#define TENSOR_IMPLEMENTATION
#include "tensor.h"
#define ERA_IMPLEMENTATION
#include "era.h"
#define POLAR_IMPLEMENTATION
#include "polar.h"
#define GDELTA_IMPLEMENTATION
#include "gdelta.h"
#define GUARDIAN_IMPLEMENTATION
#include "guardian.h"
#define CEAS_IMPLEMENTATION
#include "ceas.h"

/* exctx.h's decoding ops (ex_dec_*), the MoE router's backward and GAC's temperature
   gradient: their CUDA bodies where this file is compiled by nvcc
   or in the CPU simulation, else the _cuda twins fail with TK_ENOCUDA (a CPU model never
   calls them). */
#include "examples/common/exctx.h"
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
#include "examples/common/exctx.cuh"
#else
int ex__dec_embed_cuda(float *x, const float *wte, const float *wpe, const int *ids, const int *pos, int n, int C,
                       tk_stream stream)
{
    (void)x, (void)wte, (void)wpe, (void)ids, (void)pos, (void)n, (void)C, (void)stream;
    return TK_ENOCUDA;
}
int ex__dec_kv_cuda(float *qkv, float *kc, float *vc, const int *slot, const int *pos, int n, int H, int D, int nl,
                    int rope, float base, tk_stream stream)
{
    (void)qkv, (void)kc, (void)vc, (void)slot, (void)pos, (void)n, (void)H, (void)D, (void)nl, (void)rope,
        (void)base, (void)stream;
    return TK_ENOCUDA;
}
int ex__dec_attn_cuda(float *att, const float *qkv, const float *kc, const float *vc, const int *slot,
                      const int *pos, const float *temp, float g, const float *pb, int n, int H, int D, int nl,
                      float *sc, tk_stream stream)
{
    (void)att, (void)qkv, (void)kc, (void)vc, (void)slot, (void)pos, (void)temp, (void)g, (void)pb, (void)n,
        (void)H, (void)D, (void)nl, (void)sc, (void)stream;
    return TK_ENOCUDA;
}
int ex__dec_vgate_cuda(float *ap, float *vzc, const float *vz, const int *slot, const int *pos, int n, int H,
                       int nl, int C, tk_stream stream)
{
    (void)ap, (void)vzc, (void)vz, (void)slot, (void)pos, (void)n, (void)H, (void)nl, (void)C, (void)stream;
    return TK_ENOCUDA;
}
int ex__dec_polar_split_cuda(float *pq, float *gl, float *kc, float *vc, const float *pqkv, const int *slot,
                             const int *pos, int n, int H, int Hkv, int D, int G, int nl, int qk_norm, float eps,
                             tk_stream stream)
{
    (void)pq, (void)gl, (void)kc, (void)vc, (void)pqkv, (void)slot, (void)pos, (void)n, (void)H, (void)Hkv, (void)D,
        (void)G, (void)nl, (void)qk_norm, (void)eps, (void)stream;
    return TK_ENOCUDA;
}
int ex__dec_canon_cuda(float *pq, float *kc, float *vc, float *ring, const float *wq, const float *wk,
                       const float *wv, const int *slot, const int *pos, int n, int H, int Hkv, int D, int nl, int K,
                       tk_stream stream)
{
    (void)pq, (void)kc, (void)vc, (void)ring, (void)wq, (void)wk, (void)wv, (void)slot, (void)pos, (void)n, (void)H,
        (void)Hkv, (void)D, (void)nl, (void)K, (void)stream;
    return TK_ENOCUDA;
}
int ex__dec_conv_cuda(float *out, const float *inp, float *ring, const float *w, const int *slot, const int *pos,
                      int n, int K, int C, tk_stream stream)
{
    (void)out, (void)inp, (void)ring, (void)w, (void)slot, (void)pos, (void)n, (void)K, (void)C, (void)stream;
    return TK_ENOCUDA;
}
int ex__dec_lfm_cuda(float *out, const float *sb, const float *sc, const float *sx, float *ring, const float *w,
                     const int *slot, const int *pos, int n, int K, int C, tk_stream stream)
{
    (void)out, (void)sb, (void)sc, (void)sx, (void)ring, (void)w, (void)slot, (void)pos, (void)n, (void)K, (void)C,
        (void)stream;
    return TK_ENOCUDA;
}
int ex__gac_dtau_cuda(float *dg, const float *dtemp, const float *temp, float ig, const float *sb, int H,
                      tk_stream stream)
{
    (void)dg, (void)dtemp, (void)temp, (void)ig, (void)sb, (void)H, (void)stream;
    return TK_ENOCUDA;
}
int ex__moe_route_bwd_cuda(float *dl, const float *dw, const float *pe, const float *w, const int *idx,
                           const float *y, const float *lraw, int N, int E, int K, int renorm, double inv_tau,
                           tk_stream stream)
{
    (void)dl, (void)dw, (void)pe, (void)w, (void)idx, (void)y, (void)lraw, (void)N, (void)E, (void)K, (void)renorm,
        (void)inv_tau, (void)stream;
    return TK_ENOCUDA;
}
#endif
