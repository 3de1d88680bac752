/* layers.c - the fuzzy MoE FFN, the polar attention mixer and the gated-delta memory
   channel of the attnkit language model (see layers.h for the maths and the protocol).
   License: MIT. */
#include "layers.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef _OPENMP
#define LYR__OMP(...) _Pragma(#__VA_ARGS__)
#else
#define LYR__OMP(...)
#endif
/* per-row loops below this many floats of work stay on one thread */
#define LYR__PAR_MIN 16384

/* sub-buffers are carved at 16-float (64-byte) steps */
static size_t lyr__al(size_t n) { return (n + 15) & ~(size_t)15; }
static float *lyr__take(float **p, size_t n)
{
    float *r = *p;
    *p += lyr__al(n);
    return r;
}
static int lyr__finite(double x) { return x == x && x - x == 0.0; }
static size_t lyr__bytes_to_floats(size_t bytes) { return (bytes + sizeof(float) - 1) / sizeof(float); }

const char *lyr_strerror(int err)
{
    switch (err) {
    case LYR_OK: return "ok";
    case LYR_EINVAL: return "invalid argument (NULL pointer, bad dimension, NaN/Inf hyper-parameter)";
    case LYR_ENOMEM: return "out of memory";
    case LYR_EFAIL: return "a tensor.h / polar.h / gdelta.h call failed";
    default: return "unknown layers error";
    }
}

size_t lyr_pspec_numel(const lyr_pspec *s)
{
    size_t n = 1;
    int i;
    if (!s || s->ndim < 1 || s->ndim > 4) return 0;
    for (i = 0; i < s->ndim; i++) n *= (size_t)(s->shape[i] > 0 ? s->shape[i] : 0);
    return n;
}

static void lyr__spec(lyr_pspec *s, const char *suffix, int decay, int ndim, int d0, int d1,
                      int d2)
{
    memset(s, 0, sizeof *s);
    snprintf(s->suffix, sizeof s->suffix, "%s", suffix);
    s->ndim = ndim;
    s->shape[0] = d0;
    s->shape[1] = d1;
    s->shape[2] = d2;
    s->decay = decay;
}

/* P / G arrays: n non-NULL pointers */
static int lyr__ptrs_ok(const void *const *P, int n)
{
    int i;
    if (!P) return 0;
    for (i = 0; i < n; i++)
        if (!P[i]) return 0;
    return 1;
}

/* B, T >= 1 and B*T*w fits easily in int arithmetic of the helpers */
static int lyr__bt_ok(int B, int T, double w)
{
    if (B < 1 || T < 1) return 0;
    if ((double)B * T * (w > 1 ? w : 1) > 1.5e9) return 0;
    return 1;
}

/* counter-based hash -> uniform in [0,1) (24 bits) */
static uint64_t lyr__mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
static double lyr__unif(uint64_t seed, uint64_t stream, uint64_t idx)
{
    uint64_t h = lyr__mix(seed + 0x9e3779b97f4a7c15ULL * (idx + 1));
    h = lyr__mix(h ^ (stream * 0xd6e8feb86659fd93ULL + 0x632be59bd9b4e019ULL));
    return (double)(h >> 40) * (1.0 / 16777216.0);
}
/* Gumbel(0,1) for (seed, token n, expert e) of an E-expert layer */
static double lyr__gumbel(uint64_t seed, size_t n, int e, int E)
{
    double u = lyr__unif(seed, 1, (uint64_t)n * (uint64_t)E + (uint64_t)e);
    if (u < 1e-6) u = 1e-6;
    if (u > 1.0 - 1e-6) u = 1.0 - 1e-6;
    return -log(-log(u));
}
/* N(0,1) for (seed, index), Box-Muller from two hashed uniforms */
static double lyr__normal(uint64_t seed, uint64_t idx)
{
    double u1 = lyr__unif(seed, 2, 2 * idx), u2 = lyr__unif(seed, 2, 2 * idx + 1);
    if (u1 < 1e-12) u1 = 1e-12;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* =================================================================== fuzzy MoE */
lyr_moe_dims lyr_moe_dims_make(int C, int F, int E, int top_k, int R)
{
    lyr_moe_dims d;
    memset(&d, 0, sizeof d);
    d.C = C;
    d.F = F;
    d.E = E;
    d.top_k = top_k;
    d.R = R;
    d.gumbel_tau = 0.5f;
    d.renorm = 1;
    d.resid_scale = 1.0f;
    return d;
}

int lyr_moe_validate(const lyr_moe_dims *d)
{
    if (!d) return LYR_EINVAL;
    if (d->C < 1 || d->F < 1 || d->E < 1 || d->R < 1) return LYR_EINVAL;
    if (d->top_k < 1 || d->top_k > d->E) return LYR_EINVAL;
    if (d->E > 4096 || d->C > (1 << 20) || d->F > (1 << 22) || d->R > 4096) return LYR_EINVAL;
    if (!lyr__finite(d->gumbel_tau) || !(d->gumbel_tau > 0)) return LYR_EINVAL;
    if (d->renorm != 0 && d->renorm != 1) return LYR_EINVAL;
    if (!lyr__finite(d->resid_scale) || d->resid_scale < 0) return LYR_EINVAL;
    return LYR_OK;
}

int lyr_moe_params(const lyr_moe_dims *d, lyr_pspec *out, int cap)
{
    if (lyr_moe_validate(d) != LYR_OK || !out) return LYR_EINVAL;
    if (cap < LYR_MOE_NPARAMS) return LYR_EINVAL;
    lyr__spec(&out[LYR_MOE_GATE], "gate", 1, 2, d->E, d->R, 0);
    lyr__spec(&out[LYR_MOE_W1], "w1", 1, 3, d->E, d->F, d->C);
    lyr__spec(&out[LYR_MOE_B1], "b1", 0, 2, d->E, d->F, 0);
    lyr__spec(&out[LYR_MOE_W2], "w2", 1, 3, d->E, d->C, d->F);
    lyr__spec(&out[LYR_MOE_B2], "b2", 0, 2, d->E, d->C, 0);
    return LYR_MOE_NPARAMS;
}

int lyr_moe_init(const lyr_moe_dims *d, float *const *P, tk_rng *rng, float init_std)
{
    size_t E, C, F;
    if (lyr_moe_validate(d) != LYR_OK || !lyr__ptrs_ok((const void *const *)P, LYR_MOE_NPARAMS) ||
        !rng || !lyr__finite(init_std) || init_std < 0)
        return LYR_EINVAL;
    E = (size_t)d->E;
    C = (size_t)d->C;
    F = (size_t)d->F;
    if (tk_init_normal(P[LYR_MOE_GATE], E * (size_t)d->R, 0.0f, init_std, rng) != TK_OK ||
        tk_init_normal(P[LYR_MOE_W1], E * F * C, 0.0f, init_std, rng) != TK_OK ||
        tk_init_constant(P[LYR_MOE_B1], E * F, 0.0f) != TK_OK ||
        tk_init_normal(P[LYR_MOE_W2], E * C * F, 0.0f, init_std * d->resid_scale, rng) != TK_OK ||
        tk_init_constant(P[LYR_MOE_B2], E * C, 0.0f) != TK_OK)
        return LYR_EFAIL;
    return LYR_OK;
}

/* Where things live. The O(N C) and O(N F) work (the gather, the expert GEMMs and GELUs,
   the combine and their backward) and the routing backward (exctx.h ex_moe_route_bwd) run
   on the context's side. The forward's routing (logits, noise, softmax, top-k, weights,
   the per-expert row lists, the load-balance statistic) and the backward's load-balance
   term per expert run on the host: on the CPU path in place; on the device path on host
   copies of mu and the gate (one read per forward), in the caller's host buffer, and the
   routing block then goes to the device in one copy (the expert GEMMs' row counts are the
   host's: the lists decide the GEMM shapes).

   saved (the buffers' side): mu (N,R), xg (NK,C), hpre (NK,F), eo (NK,C), then the
   routing block. Routing block: lraw (N,E), y (N,E), w (N,K), idx (N,K int), pos (N,K
   int: the gathered row of slot (n,k)), gsrc (NK int: the token of each gathered row),
   off (E+1 int). ints take float-sized slots.
   host buffer (device path): the routing block (kept from forward to backward), then the
   forward's host copies mu (N,R), gate (E,R) and cursor (E+1 int), and the backward's
   pe (E+1).
   work (the buffers' side): a, da, dh (NK,F), deo, dxg (NK,C), dw (NK), dl (N,E),
   pe (E+1), cursor (E+1 int) (cursor used on the CPU path only). */
typedef struct lyr__moe_rt {
    float *lraw, *y, *w;
    int *idx, *pos, *gsrc, *off;
} lyr__moe_rt;

typedef struct lyr__moe_saved {
    float *mu, *xg, *hpre, *eo;
    float *rt; /* the routing block, in the context's memory (on a device: uploaded once per
                  forward, for the gathers, the combine and the router's backward) */
} lyr__moe_saved;

typedef struct lyr__moe_work {
    float *a, *da, *dh, *deo, *dxg, *dw, *dl, *pe;
    int *cursor;
    float *stage; /* device: the router's inputs (mu, then the gate at al(N R)) for one read */
} lyr__moe_work;

typedef struct lyr__moe_host {
    float *rt, *mu, *gate, *pe;
    int *cursor;
} lyr__moe_host;

/* floats holding n ints */
static size_t lyr__ifl(size_t n) { return lyr__bytes_to_floats(n * sizeof(int)); }
static int *lyr__take_i(float **p, size_t n) { return (int *)(void *)lyr__take(p, lyr__ifl(n)); }

static size_t lyr__moe_rt_floats(const lyr_moe_dims *d, size_t N)
{
    size_t K = (size_t)d->top_k, E = (size_t)d->E;
    return 2 * lyr__al(N * E) + lyr__al(N * K) + 3 * lyr__al(lyr__ifl(N * K)) +
           lyr__al(lyr__ifl(E + 1));
}

static void lyr__moe_carve_rt(const lyr_moe_dims *d, float *base, size_t N, lyr__moe_rt *r)
{
    size_t K = (size_t)d->top_k, E = (size_t)d->E;
    float *p = base;
    r->lraw = lyr__take(&p, N * E);
    r->y = lyr__take(&p, N * E);
    r->w = lyr__take(&p, N * K);
    r->idx = lyr__take_i(&p, N * K);
    r->pos = lyr__take_i(&p, N * K);
    r->gsrc = lyr__take_i(&p, N * K);
    r->off = lyr__take_i(&p, E + 1);
}

static void lyr__moe_carve(const lyr_moe_dims *d, float *base, size_t N, lyr__moe_saved *s)
{
    size_t K = (size_t)d->top_k;
    float *p = base;
    s->mu = lyr__take(&p, N * (size_t)d->R);
    s->xg = lyr__take(&p, N * K * (size_t)d->C);
    s->hpre = lyr__take(&p, N * K * (size_t)d->F);
    s->eo = lyr__take(&p, N * K * (size_t)d->C);
    s->rt = p;
}

static void lyr__moe_carve_work(const lyr_moe_dims *d, float *base, size_t N, lyr__moe_work *w)
{
    size_t K = (size_t)d->top_k, E = (size_t)d->E, C = (size_t)d->C, F = (size_t)d->F;
    float *p = base;
    w->a = lyr__take(&p, N * K * F);
    w->da = lyr__take(&p, N * K * F);
    w->dh = lyr__take(&p, N * K * F);
    w->deo = lyr__take(&p, N * K * C);
    w->dxg = lyr__take(&p, N * K * C);
    w->dw = lyr__take(&p, N * K);
    w->dl = lyr__take(&p, N * E);
    w->pe = lyr__take(&p, E + 1);
    w->cursor = lyr__take_i(&p, E + 1);
    w->stage = lyr__take(&p, lyr__al(N * (size_t)d->R) + E * (size_t)d->R);
}

static void lyr__moe_carve_host(const lyr_moe_dims *d, float *base, size_t N, lyr__moe_host *h)
{
    size_t E = (size_t)d->E, R = (size_t)d->R;
    float *p = base;
    h->rt = lyr__take(&p, lyr__moe_rt_floats(d, N));
    h->mu = lyr__take(&p, N * R);
    h->gate = lyr__take(&p, E * R);
    h->cursor = lyr__take_i(&p, E + 1);
    h->pe = lyr__take(&p, E + 1);
}

static int lyr__moe_bt_ok(const lyr_moe_dims *d, int B, int T)
{
    return lyr__bt_ok(B, T, (double)d->top_k * (d->C > d->F ? d->C : d->F));
}

size_t lyr_moe_saved_floats(const lyr_moe_dims *d, int B, int T)
{
    size_t N, K;
    if (lyr_moe_validate(d) != LYR_OK || !lyr__moe_bt_ok(d, B, T)) return 0;
    N = (size_t)B * T;
    K = (size_t)d->top_k;
    return lyr__al(N * (size_t)d->R) + 2 * lyr__al(N * K * (size_t)d->C) +
           lyr__al(N * K * (size_t)d->F) + lyr__moe_rt_floats(d, N);
}

size_t lyr_moe_work_floats(const lyr_moe_dims *d, int B, int T)
{
    size_t N, K, E;
    if (lyr_moe_validate(d) != LYR_OK || !lyr__moe_bt_ok(d, B, T)) return 0;
    N = (size_t)B * T;
    K = (size_t)d->top_k;
    E = (size_t)d->E;
    return 3 * lyr__al(N * K * (size_t)d->F) + 2 * lyr__al(N * K * (size_t)d->C) +
           lyr__al(N * K) + lyr__al(N * E) + lyr__al(E + 1) + lyr__al(lyr__ifl(E + 1)) +
           lyr__al(N * (size_t)d->R) + lyr__al(E * (size_t)d->R);
}

size_t lyr_moe_host_floats(const lyr_moe_dims *d, int B, int T)
{
    size_t N, E, R;
    if (lyr_moe_validate(d) != LYR_OK || !lyr__moe_bt_ok(d, B, T)) return 0;
    N = (size_t)B * T;
    E = (size_t)d->E;
    R = (size_t)d->R;
    return lyr__moe_rt_floats(d, N) + lyr__al(N * R) + lyr__al(E * R) + lyr__al(lyr__ifl(E + 1)) +
           lyr__al(E + 1);
}

/* 1 when the non-NULL pointers of p (n) are all host or all device memory (*dev: 1 for
   device), 0 when mixed */
static int lyr__one_side(const void *const *p, int n, int *dev)
{
    int i, side = -1;
    for (i = 0; i < n; i++) {
        int s;
        if (!p[i]) continue;
        s = tk_is_device(p[i]) ? 1 : 0;
        if (side < 0) side = s;
        else if (s != side) return 0;
    }
    *dev = side > 0;
    return 1;
}

/* C = op(A) op(B) on the context's device */
static int lyr__sgemm(const ex_ctx *cx, int transA, int transB, int M, int N, int K, const float *A,
                      int lda, const float *B, int ldb, float *C, int ldc)
{
    return ex_sgemm(cx, transA, transB, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}

int lyr_moe_fwd(const ex_ctx *cx, const lyr_moe_dims *d, const float *const *P, const float *x,
                const float *mu, float *out, float *saved, float *work, int B, int T,
                int train, uint64_t seed, float *host, float *lb_stat)
{
    lyr__moe_saved s;
    lyr__moe_work wk;
    lyr__moe_rt rt;
    const float *gate, *mh, *wv;
    const int *gsrc, *spos;
    int *cursor;
    float *rtb; /* the routing block the host writes: the host buffer's, or saved's on the CPU */
    size_t N, K, E, R, C, F, i;
    int n, e, E_ = 0, dev = 0;
    double inv_tau;
    if (!cx || lyr_moe_validate(d) != LYR_OK) return LYR_EINVAL;
    if (!lyr__ptrs_ok((const void *const *)P, LYR_MOE_NPARAMS) || !x || !mu || !out || !saved ||
        !work || !lyr__moe_bt_ok(d, B, T))
        return LYR_EINVAL;
    dev = cx->device;
    if (dev && !host) return LYR_EINVAL;
    N = (size_t)B * T;
    K = (size_t)d->top_k;
    E = (size_t)d->E;
    R = (size_t)d->R;
    C = (size_t)d->C;
    F = (size_t)d->F;
    E_ = d->E;
    lyr__moe_carve(d, saved, N, &s);
    lyr__moe_carve_work(d, work, N, &wk);
    if (dev) {
        lyr__moe_host h;
        lyr__moe_carve_host(d, host, N, &h);
        /* the memberships and the gate side by side in the device staging (copies on the
           stream, no wait), then one read: h.gate follows h.mu at the same offset */
        if (ex_copy(cx, wk.stage, mu, N * R * sizeof(float)) != TK_OK ||
            ex_copy(cx, wk.stage + lyr__al(N * R), P[LYR_MOE_GATE], E * R * sizeof(float)) != TK_OK ||
            ex_to_host(cx, h.mu, wk.stage, (lyr__al(N * R) + E * R) * sizeof(float)) != TK_OK)
            return LYR_EFAIL;
        mh = h.mu;
        gate = h.gate;
        cursor = h.cursor;
        rtb = h.rt;
    } else {
        mh = mu;
        gate = P[LYR_MOE_GATE];
        cursor = wk.cursor;
        rtb = s.rt;
    }
    lyr__moe_carve_rt(d, rtb, N, &rt);
    for (i = 0; i < N * R; i++)
        if (!lyr__finite(mh[i])) return LYR_EINVAL;
    for (i = 0; i < E * R; i++)
        if (!lyr__finite(gate[i])) return LYR_EINVAL;
    inv_tau = 1.0 / (double)d->gumbel_tau;

    /* routing (host), per token (independent rows) */
    LYR__OMP(omp parallel for schedule(static) if(N * E * (R + K) > LYR__PAR_MIN))
    for (n = 0; n < (int)N; n++) {
        const float *m = mh + (size_t)n * R;
        float *lr = rt.lraw + (size_t)n * E, *y = rt.y + (size_t)n * E;
        float *w = rt.w + (size_t)n * K;
        int *ix = rt.idx + (size_t)n * K;
        double mx = -1e300, sum = 0, kept = 0, norm;
        int ee, k, r;
        for (ee = 0; ee < E_; ee++) {
            double l = 0, z;
            for (r = 0; r < (int)R; r++) l += (double)m[r] * gate[(size_t)ee * R + r];
            lr[ee] = (float)l;
            if (l > 30.0) l = 30.0;
            if (l < -30.0) l = -30.0;
            z = (double)(float)l;
            if (train) z += lyr__gumbel(seed, (size_t)n, ee, E_);
            z *= inv_tau;
            y[ee] = (float)z; /* logit, turned into a probability below */
            if (z > mx) mx = z;
        }
        for (ee = 0; ee < E_; ee++) {
            double p = exp((double)y[ee] - mx);
            y[ee] = (float)p;
            sum += p;
        }
        for (ee = 0; ee < E_; ee++) y[ee] = (float)((double)y[ee] / sum);
        /* top-k by repeated arg-max (ties: lower index) */
        for (k = 0; k < (int)K; k++) {
            int best = -1, j;
            for (ee = 0; ee < E_; ee++) {
                int taken = 0;
                for (j = 0; j < k; j++)
                    if (ix[j] == ee) taken = 1;
                if (taken) continue;
                if (best < 0 || y[ee] > y[best]) best = ee;
            }
            ix[k] = best;
            kept += y[best];
        }
        if (d->renorm) norm = kept > 0 ? 1.0 / kept : 0.0;
        else {
            double all = 0;
            for (ee = 0; ee < E_; ee++) all += y[ee];
            norm = 1.0 / (all + 1e-6);
        }
        for (k = 0; k < (int)K; k++) w[k] = (float)((double)y[ix[k]] * norm);
    }

    /* per-expert row lists (host): off[e] = first gathered row of expert e (token order
       kept); pos[n*K+k] = the gathered row of slot (n,k); gsrc[row] = its token */
    for (e = 0; e <= E_; e++) cursor[e] = 0;
    for (i = 0; i < N * K; i++) cursor[rt.idx[i]] += 1;
    {
        int acc = 0;
        for (e = 0; e < E_; e++) {
            int c = cursor[e];
            rt.off[e] = acc;
            cursor[e] = acc;
            acc += c;
        }
        rt.off[E_] = acc;
    }
    for (i = 0; i < N * K; i++) {
        int row = cursor[rt.idx[i]]++;
        rt.pos[i] = row;
        rt.gsrc[row] = (int)(i / K);
    }
    if (dev) { /* the routing block to the device in one copy: what the device ops read
                  here and in the backward */
        lyr__moe_rt rd;
        if (ex_to_ctx(cx, s.rt, rtb, lyr__moe_rt_floats(d, N) * sizeof(float)) != TK_OK) return LYR_EFAIL;
        lyr__moe_carve_rt(d, s.rt, N, &rd);
        gsrc = rd.gsrc;
        spos = rd.pos;
        wv = rd.w;
    } else {
        gsrc = rt.gsrc;
        spos = rt.pos;
        wv = rt.w;
    }
    if (ex_copy(cx, s.mu, mu, N * R * sizeof(float)) != TK_OK ||
        ex_rows_gather(cx, s.xg, x, (int)N, gsrc, (int)(N * K), (int)C) != TK_OK)
        return LYR_EFAIL;

    /* experts: one GEMM pair per expert over its gathered rows */
    for (e = 0; e < E_; e++) {
        size_t r0 = (size_t)rt.off[e], cnt = (size_t)rt.off[e + 1] - r0;
        if (cnt == 0) continue;
        if (ex_matmul_fwd(cx, s.hpre + r0 * F, s.xg + r0 * C, P[LYR_MOE_W1] + (size_t)e * F * C,
                              P[LYR_MOE_B1] + (size_t)e * F, (int)cnt, (int)C, (int)F) != TK_OK)
            return LYR_EFAIL;
        if (ex_gelu_fwd(cx, wk.a + r0 * F, s.hpre + r0 * F, cnt * F) != TK_OK) return LYR_EFAIL;
        if (ex_matmul_fwd(cx, s.eo + r0 * C, wk.a + r0 * F, P[LYR_MOE_W2] + (size_t)e * C * F,
                              P[LYR_MOE_B2] + (size_t)e * C, (int)cnt, (int)F, (int)C) != TK_OK)
            return LYR_EFAIL;
    }

    /* combine, per token in slot order */
    if (ex_rows_combine_fwd(cx, out, s.eo, (int)(N * K), spos, wv, (int)N, (int)K, (int)C, 0) !=
        TK_OK)
        return LYR_EFAIL;

    if (lb_stat) {
        double lb = 0;
        for (e = 0; e < E_; e++) {
            double p = 0;
            for (i = 0; i < N * K; i++)
                if (rt.idx[i] == e) p += rt.w[i];
            p /= (double)N;
            lb += (p - 1.0 / E_) * (p - 1.0 / E_);
        }
        *lb_stat = (float)(lb / E_);
    }
    return LYR_OK;
}

int lyr_moe_bwd(const ex_ctx *cx, const lyr_moe_dims *d, const float *const *P, float *const *G,
                const float *dout, float *dx, float *dmu, const float *saved,
                float *work, int B, int T, float *host, float lb_coef)
{
    lyr__moe_saved s;
    lyr__moe_work wk;
    lyr__moe_rt rt;
    size_t N, K, E, R, C, F, i;
    int e, E_, dev = 0;
    float *pe;
    lyr__moe_rt rd; /* the routing block in the context's memory */
    double inv_tau;
    if (!cx || lyr_moe_validate(d) != LYR_OK) return LYR_EINVAL;
    if (!lyr__ptrs_ok((const void *const *)P, LYR_MOE_NPARAMS) ||
        !lyr__ptrs_ok((const void *const *)G, LYR_MOE_NPARAMS) || !dout || !saved || !work ||
        !lyr__moe_bt_ok(d, B, T) || !lyr__finite(lb_coef))
        return LYR_EINVAL;
    dev = cx->device;
    if (dev && !host) return LYR_EINVAL;
    N = (size_t)B * T;
    K = (size_t)d->top_k;
    E = (size_t)d->E;
    R = (size_t)d->R;
    C = (size_t)d->C;
    F = (size_t)d->F;
    E_ = d->E;
    lyr__moe_carve(d, (float *)saved, N, &s); /* read-only use below */
    lyr__moe_carve_work(d, work, N, &wk);
    lyr__moe_carve_rt(d, s.rt, N, &rd);
    if (dev) { /* the host's copy of the routing block (the forward's) */
        lyr__moe_host h;
        lyr__moe_carve_host(d, host, N, &h);
        lyr__moe_carve_rt(d, h.rt, N, &rt);
        pe = h.pe;
    } else {
        rt = rd;
        pe = wk.pe;
    }
    inv_tau = 1.0 / (double)d->gumbel_tau;

    /* load-balance term: d(lb_coef * mean_e (p_e - 1/E)^2)/dw = lb_coef 2 (p_e - 1/E) / (E N) */
    for (e = 0; e < E_; e++) pe[e] = 0;
    if (lb_coef != 0) {
        for (e = 0; e < E_; e++) {
            double p = 0;
            for (i = 0; i < N * K; i++)
                if (rt.idx[i] == e) p += rt.w[i];
            p /= (double)N;
            pe[e] = (float)(lb_coef * 2.0 * (p - 1.0 / E_) / ((double)E_ * (double)N));
        }
        if (dev && ex_to_ctx(cx, wk.pe, pe, E * sizeof(float)) != TK_OK) return LYR_EFAIL;
    }

    /* dw (N,K) = dout . eo of the slot, deo (gathered rows) = w dout (the load-balance
       term joins dw in the router's backward below) */
    if (ex_zero(cx, wk.deo, N * K * C * sizeof(float)) != TK_OK ||
        ex_zero(cx, wk.dw, N * K * sizeof(float)) != TK_OK ||
        ex_rows_combine_bwd(cx, wk.deo, wk.dw, dout, s.eo, (int)(N * K), rd.pos, rd.w, (int)N,
                                 (int)K, (int)C) != TK_OK)
        return LYR_EFAIL;

    /* experts backward */
    if (ex_zero(cx, wk.dh, N * K * F * sizeof(float)) != TK_OK) return LYR_EFAIL;
    for (e = 0; e < E_; e++) {
        size_t r0 = (size_t)rt.off[e], cnt = (size_t)rt.off[e + 1] - r0;
        const float *W1 = P[LYR_MOE_W1] + (size_t)e * F * C, *W2 = P[LYR_MOE_W2] + (size_t)e * C * F;
        float *ae = wk.a + r0 * F, *dae = wk.da + r0 * F, *dhe = wk.dh + r0 * F;
        if (cnt == 0) continue;
        if (ex_gelu_fwd(cx, ae, s.hpre + r0 * F, cnt * F) != TK_OK) return LYR_EFAIL;
        /* da = deo W2 (cnt,F); dW2 += deo^T a; db2 += colsum deo */
        if (lyr__sgemm(cx, 0, 0, (int)cnt, (int)F, (int)C, wk.deo + r0 * C, (int)C, W2, (int)F,
                       dae, (int)F) != TK_OK ||
            ex_matmul_bwd(cx, NULL, G[LYR_MOE_W2] + (size_t)e * C * F,
                               G[LYR_MOE_B2] + (size_t)e * C, wk.deo + r0 * C, ae, W2, (int)cnt,
                               (int)F, (int)C) != TK_OK)
            return LYR_EFAIL;
        if (ex_gelu_bwd(cx, dhe, s.hpre + r0 * F, dae, cnt * F) != TK_OK) return LYR_EFAIL;
        /* dxg = dh W1 (cnt,C); dW1 += dh^T xg; db1 += colsum dh */
        if (dx && lyr__sgemm(cx, 0, 0, (int)cnt, (int)C, (int)F, dhe, (int)F, W1, (int)C,
                             wk.dxg + r0 * C, (int)C) != TK_OK)
            return LYR_EFAIL;
        if (ex_matmul_bwd(cx, NULL, G[LYR_MOE_W1] + (size_t)e * F * C,
                               G[LYR_MOE_B1] + (size_t)e * F, dhe, s.xg + r0 * C, W1, (int)cnt,
                               (int)C, (int)F) != TK_OK)
            return LYR_EFAIL;
    }
    /* dx[n] += sum_k dxg[pos[n,k]] */
    if (dx && ex_rows_combine_fwd(cx, dx, wk.dxg, (int)(N * K), rd.pos, NULL, (int)N, (int)K,
                                      (int)C, 1) != TK_OK)
        return LYR_EFAIL;

    /* routing backward: dl over the experts (+ the load-balance term), through the clamp and
       1/tau, per token in the context's memory (exctx.h ex_moe_route_bwd) */
    if (ex_moe_route_bwd(cx, wk.dl, wk.dw, lb_coef != 0 ? wk.pe : NULL, rd.w, rd.idx, rd.y, rd.lraw, (int)N, E_,
                         (int)K, d->renorm, inv_tau) != TK_OK)
        return LYR_EFAIL;
    if (ex_matmul_bwd(cx, dmu, G[LYR_MOE_GATE], NULL, wk.dl, s.mu, P[LYR_MOE_GATE], (int)N, (int)R,
                           (int)E) != TK_OK)
        return LYR_EFAIL;
    return LYR_OK;
}

/* =================================================================== polar mixer */
lyr_polar_dims lyr_polar_dims_make(int C, int H)
{
    lyr_polar_dims d;
    memset(&d, 0, sizeof d);
    d.C = C;
    d.H = H;
    d.Hkv = H;
    d.qk_norm = 1;
    d.qk_norm_eps = 1e-6f;
    d.gate = LYR_POLAR_GATE_HEAD;
    d.bias = 0;
    d.canon_k = 0;
    d.resid_scale = 1.0f;
    d.cfg = polar_config_default();
    return d;
}

int lyr_polar_validate(const lyr_polar_dims *d)
{
    if (!d) return LYR_EINVAL;
    if (d->C < 1 || d->H < 1 || d->Hkv < 1 || d->C % d->H != 0 || d->H % d->Hkv != 0)
        return LYR_EINVAL;
    if (d->C > (1 << 20)) return LYR_EINVAL;
    if (d->qk_norm != 0 && d->qk_norm != 1) return LYR_EINVAL;
    if (!lyr__finite(d->qk_norm_eps) || !(d->qk_norm_eps > 0)) return LYR_EINVAL;
    if (d->gate != LYR_POLAR_GATE_HEAD && d->gate != LYR_POLAR_GATE_CHANNEL) return LYR_EINVAL;
    if (d->bias != 0 && d->bias != 1) return LYR_EINVAL;
    if (d->canon_k < 0 || d->canon_k > 64) return LYR_EINVAL;
    if (!lyr__finite(d->resid_scale) || d->resid_scale < 0) return LYR_EINVAL;
    if (polar_workspace_size(&d->cfg, 1, d->H, d->Hkv, 1, d->C / d->H) == 0) return LYR_EINVAL;
    return LYR_OK;
}

/* gate logits per token: H (per head) or H D (per channel) */
static int lyr__polar_G(const lyr_polar_dims *d)
{
    return d->gate == LYR_POLAR_GATE_CHANNEL ? d->C / d->H * d->H : d->H;
}

static int lyr__polar_P(const lyr_polar_dims *d) /* rows of qkv.weight */
{
    int D = d->C / d->H;
    return (d->H + 2 * d->Hkv) * D + lyr__polar_G(d);
}

/* parameter tensors: LYR_POLAR_NPARAMS, the two biases with dims.bias, the three Canon
   weights with dims.canon_k */
static int lyr__polar_np(const lyr_polar_dims *d)
{
    return (d->bias ? LYR_POLAR_NPARAMS_MAX : LYR_POLAR_NPARAMS) + (d->canon_k > 0 ? 3 : 0);
}

int lyr_polar_canon_index(const lyr_polar_dims *d)
{
    if (lyr_polar_validate(d) != LYR_OK || d->canon_k < 1) return -1;
    return d->bias ? LYR_POLAR_NPARAMS_MAX : LYR_POLAR_NPARAMS;
}

int lyr_polar_params(const lyr_polar_dims *d, lyr_pspec *out, int cap)
{
    int D;
    if (lyr_polar_validate(d) != LYR_OK || !out) return LYR_EINVAL;
    if (cap < lyr__polar_np(d)) return LYR_EINVAL;
    D = d->C / d->H;
    lyr__spec(&out[LYR_POLAR_QKV], "qkv.weight", 1, 2, lyr__polar_P(d), d->C, 0);
    lyr__spec(&out[LYR_POLAR_LEN_GAIN], "len_gain_raw", 0, 1, d->H, 0, 0);
    lyr__spec(&out[LYR_POLAR_NULL_BASE], "null_base", 0, 1, d->H, 0, 0);
    lyr__spec(&out[LYR_POLAR_NULL_SLOPE], "null_slope_raw", 0, 1, d->H, 0, 0);
    lyr__spec(&out[LYR_POLAR_MAG_BETA], "mag_beta_raw", 0, 1, d->H, 0, 0);
    lyr__spec(&out[LYR_POLAR_V_NULL], "v_null", 0, 2, d->H, D, 0);
    lyr__spec(&out[LYR_POLAR_O], "o.weight", 1, 2, d->C, d->H * D, 0);
    lyr__spec(&out[LYR_POLAR_MU], "mu.weight", 1, 2, d->C, d->H, 0);
    if (d->bias) {
        lyr__spec(&out[LYR_POLAR_O_BIAS], "o.bias", 0, 1, d->C, 0, 0);
        out[LYR_POLAR_O_BIAS].init = LYR_INIT_ZERO;
        lyr__spec(&out[LYR_POLAR_MU_BIAS], "mu.bias", 0, 1, d->C, 0, 0);
        out[LYR_POLAR_MU_BIAS].init = LYR_INIT_ZERO;
    }
    if (d->canon_k > 0) { /* PyTorch's Conv1d default (fan_in = K), as the authors' code keeps */
        static const char *const nm[3] = {"canon_q.weight", "canon_k.weight", "canon_v.weight"};
        int ci = lyr_polar_canon_index(d), i;
        for (i = 0; i < 3; i++) {
            lyr__spec(&out[ci + i], nm[i], 0, 3, i == 0 ? d->H : d->Hkv, d->canon_k, D);
            out[ci + i].init = LYR_INIT_UNIFORM;
            out[ci + i].init_arg = (float)(1.0 / sqrt((double)d->canon_k));
        }
    }
    return lyr__polar_np(d);
}

int lyr_polar_init(const lyr_polar_dims *d, float *const *P, tk_rng *rng, float init_std)
{
    size_t C;
    int D;
    if (lyr_polar_validate(d) != LYR_OK || !lyr__ptrs_ok((const void *const *)P, lyr__polar_np(d)) ||
        !rng || !lyr__finite(init_std) || init_std < 0)
        return LYR_EINVAL;
    C = (size_t)d->C;
    D = d->C / d->H;
    if (tk_init_normal(P[LYR_POLAR_QKV], (size_t)lyr__polar_P(d) * C, 0.0f, init_std, rng) != TK_OK ||
        tk_init_normal(P[LYR_POLAR_O], C * C, 0.0f, init_std * d->resid_scale, rng) != TK_OK ||
        tk_init_normal(P[LYR_POLAR_MU], C * (size_t)d->H, 0.0f, init_std * d->resid_scale, rng) !=
            TK_OK)
        return LYR_EFAIL;
    if (polar_params_init(&d->cfg, d->H, D, P[LYR_POLAR_LEN_GAIN], P[LYR_POLAR_NULL_BASE],
                          P[LYR_POLAR_NULL_SLOPE], P[LYR_POLAR_MAG_BETA], P[LYR_POLAR_V_NULL]) !=
        POLAR_OK)
        return LYR_EFAIL;
    if (d->bias) { /* host memory, as the rng draws above */
        memset(P[LYR_POLAR_O_BIAS], 0, C * sizeof(float));
        memset(P[LYR_POLAR_MU_BIAS], 0, C * sizeof(float));
    }
    if (d->canon_k > 0) { /* after every other draw: without Canon the draws are as before */
        int ci = lyr_polar_canon_index(d), i;
        float a = (float)(1.0 / sqrt((double)d->canon_k));
        for (i = 0; i < 3; i++)
            if (tk_init_uniform(P[ci + i], (size_t)(i == 0 ? d->H : d->Hkv) * (size_t)d->canon_k * (size_t)D, -a, a,
                                rng) != TK_OK)
                return LYR_EFAIL;
    }
    return LYR_OK;
}

/* saved layout: hdr (16: [0] distractor keys drawn, [1] the device path's distractor
   loss), xn (N,C), q (B,H,T,D), k, v
   (B,Hkv,T,D), gl (B,T,G) (G = H, or H D per channel), rq (B,H,T), rk (B,Hkv,T), c (B,H,T,D), mag (B,H,T),
   stats (B,H,T,NSTAT), krand (B,Hkv,R,D), and with Canon the convolutions' inputs qp
   (B,H,T,D), kp, vp (B,Hkv,T,D) (q, k, v then hold their outputs) */
typedef struct lyr__polar_saved {
    float *hdr, *xn, *q, *k, *v, *gl, *rq, *rk, *c, *mag, *stats, *krand, *qp, *kp, *vp;
} lyr__polar_saved;

static void lyr__polar_carve(const lyr_polar_dims *d, float *base, int B, int T,
                             lyr__polar_saved *s)
{
    size_t N = (size_t)B * T, D = (size_t)(d->C / d->H), H = (size_t)d->H, Hkv = (size_t)d->Hkv;
    size_t Rk = d->cfg.distractor_keys > 0 ? (size_t)d->cfg.distractor_keys : 0;
    float *p = base;
    s->hdr = lyr__take(&p, 16);
    s->xn = lyr__take(&p, N * (size_t)d->C);
    s->q = lyr__take(&p, N * H * D);
    s->k = lyr__take(&p, N * Hkv * D);
    s->v = lyr__take(&p, N * Hkv * D);
    s->gl = lyr__take(&p, N * (size_t)lyr__polar_G(d));
    s->rq = lyr__take(&p, N * H);
    s->rk = lyr__take(&p, N * Hkv);
    s->c = lyr__take(&p, N * H * D);
    s->mag = lyr__take(&p, N * H);
    s->stats = lyr__take(&p, N * H * POLAR_NSTAT);
    s->krand = Rk ? lyr__take(&p, (size_t)B * Hkv * Rk * D) : NULL;
    s->qp = d->canon_k > 0 ? lyr__take(&p, N * H * D) : NULL;
    s->kp = d->canon_k > 0 ? lyr__take(&p, N * Hkv * D) : NULL;
    s->vp = d->canon_k > 0 ? lyr__take(&p, N * Hkv * D) : NULL;
}

static int lyr__polar_bt_ok(const lyr_polar_dims *d, int B, int T)
{
    return lyr__bt_ok(B, T, (double)lyr__polar_P(d) + d->C);
}

size_t lyr_polar_saved_floats(const lyr_polar_dims *d, int B, int T)
{
    if (lyr_polar_validate(d) != LYR_OK || !lyr__polar_bt_ok(d, B, T)) return 0;
    {
        size_t D = (size_t)(d->C / d->H), Rk = d->cfg.distractor_keys > 0 ? (size_t)d->cfg.distractor_keys : 0;
        size_t N = (size_t)B * T, H = (size_t)d->H, Hkv = (size_t)d->Hkv;
        return lyr__al(16) + lyr__al(N * (size_t)d->C) + 2 * lyr__al(N * H * D) +
               2 * lyr__al(N * Hkv * D) + lyr__al(N * (size_t)lyr__polar_G(d)) + 2 * lyr__al(N * H) +
               lyr__al(N * Hkv) +
               lyr__al(N * H * POLAR_NSTAT) + (Rk ? lyr__al((size_t)B * Hkv * Rk * D) : 0) +
               (d->canon_k > 0 ? lyr__al(N * H * D) + 2 * lyr__al(N * Hkv * D) : 0);
    }
}

size_t lyr_polar_work_floats(const lyr_polar_dims *d, int B, int T)
{
    size_t N, D, H, Hkv, ws;
    if (lyr_polar_validate(d) != LYR_OK || !lyr__polar_bt_ok(d, B, T)) return 0;
    N = (size_t)B * T;
    D = (size_t)(d->C / d->H);
    H = (size_t)d->H;
    Hkv = (size_t)d->Hkv;
    ws = polar_workspace_size(&d->cfg, B, d->H, d->Hkv, T, (int)D);
    if (ws == 0) return 0;
    { /* the device path's workspaces (0 in builds without CUDA): the backward's, and the
         distractor loss's (used after polar_forward / polar_backward, in the same room) */
        size_t wc = polar_workspace_size_cuda(&d->cfg, B, d->H, d->Hkv, T, (int)D);
        size_t wd = polar_distractor_workspace_size_cuda(&d->cfg, B, d->H, T);
        if (wc > ws) ws = wc;
        if (wd > ws) ws = wd;
    }
    /* the device backward's gate per channel keeps sigmoid(gate) and z (N,H,D) each in ws's
       room */
    if (d->gate == LYR_POLAR_GATE_CHANNEL && ws < 2 * lyr__al(N * H * D) * sizeof(float))
        ws = 2 * lyr__al(N * H * D) * sizeof(float);
    /* backward: dqkvg (N,P), dc, dq (N,H,D), dk, dv (N,Hkv,D), dmag (N,H), dgl (N,G), magT,
       dmagT (N,H), ws */
    return lyr__al(N * (size_t)lyr__polar_P(d)) + 2 * lyr__al(N * H * D) +
           2 * lyr__al(N * Hkv * D) + 3 * lyr__al(N * H) + lyr__al(N * (size_t)lyr__polar_G(d)) +
           lyr__al(lyr__bytes_to_floats(ws));
}

static polar_params lyr__polar_prm(const float *const *P)
{
    polar_params p;
    p.len_gain_raw = P[LYR_POLAR_LEN_GAIN];
    p.null_base = P[LYR_POLAR_NULL_BASE];
    p.null_slope_raw = P[LYR_POLAR_NULL_SLOPE];
    p.mag_beta_raw = P[LYR_POLAR_MAG_BETA];
    p.v_null = P[LYR_POLAR_V_NULL];
    return p;
}

/* RMSNorm rows of length D in place (no weight): x <- x r, r = 1/sqrt(mean x^2 + eps) */
void lyr_rms_rows(float *x, float *rs, size_t rows, int D, float eps)
{
    int i;
    LYR__OMP(omp parallel for schedule(static) if(rows * (size_t)D > LYR__PAR_MIN))
    for (i = 0; i < (int)rows; i++) rs[i] = ex_rms_row(x + (size_t)i * D, D, eps); /* (exctx.h) */
}

static float lyr__sigmoidf(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }

/* z (N, H*D) = c (B,H,T,D) merged per token times sigmoid(gl (N,H)) per head, or times
   sigmoid(gl (N,H*D)) per channel (chan); magT (N,H) = mag (B,H,T) per token */
static void lyr__polar_gate_c(const float *c, const float *gl, const float *mag, float *z,
                              float *magT, int B, int T, int H, int D, int chan)
{
    int n;
    LYR__OMP(omp parallel for schedule(static) if((size_t)B * T * H * D > LYR__PAR_MIN))
    for (n = 0; n < B * T; n++) {
        size_t b = (size_t)n / (size_t)T, t = (size_t)n % (size_t)T, h, j;
        for (h = 0; h < (size_t)H; h++) {
            size_t row = (b * H + h) * (size_t)T + t;
            const float *ch = c + row * D;
            float *zh = z + ((size_t)n * H + h) * D;
            if (chan) {
                const float *gh = gl + ((size_t)n * H + h) * D;
                for (j = 0; j < (size_t)D; j++) zh[j] = ch[j] * lyr__sigmoidf(gh[j]);
            } else {
                float sg = lyr__sigmoidf(gl[(size_t)n * H + h]);
                for (j = 0; j < (size_t)D; j++) zh[j] = ch[j] * sg;
            }
            magT[(size_t)n * H + h] = mag[row];
        }
    }
}

/* Canon forward: qp, kp, vp <- q, k, v; q, k, v <- x + conv(x) per (batch, head) with that
   head's (K, D) weights (tensor.h's causal depthwise convolution, accumulating onto the copy) */
static int lyr__polar_canon_fwd(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P,
                                const lyr__polar_saved *s, int B, int T)
{
    const int ci = lyr_polar_canon_index(d), K = d->canon_k, D = d->C / d->H;
    int part, b, h;
    for (part = 0; part < 3; part++) {
        const int hh = part == 0 ? d->H : d->Hkv;
        float *x = part == 0 ? s->q : part == 1 ? s->k : s->v, *xp = part == 0 ? s->qp : part == 1 ? s->kp : s->vp;
        const float *w = P[ci + part];
        const size_t hd = (size_t)T * D;
        if (ex_copy(cx, xp, x, (size_t)B * hh * hd * sizeof(float)) != TK_OK) return LYR_EFAIL;
        for (b = 0; b < B; b++)
            for (h = 0; h < hh; h++) {
                const size_t o = ((size_t)b * hh + h) * hd;
                if (ex_causal_dwconv_fwd(cx, x + o, xp + o, w + (size_t)h * K * D, 1, T, D, K, 1) != TK_OK)
                    return LYR_EFAIL;
            }
    }
    return LYR_OK;
}

/* Canon backward, in place: g (the gradient of a convolution's output, (B,hh,T,D)) becomes
   that of its input, g + conv^T(g), through tmp (same size; must not alias g); the weight
   gradients accumulate into G */
static int lyr__polar_canon_bwd(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P,
                                float *const *G, const lyr__polar_saved *s, float *dq, float *dk, float *dv,
                                float *tmp, int B, int T)
{
    const int ci = lyr_polar_canon_index(d), K = d->canon_k, D = d->C / d->H;
    int part, b, h;
    for (part = 0; part < 3; part++) {
        const int hh = part == 0 ? d->H : d->Hkv;
        float *g = part == 0 ? dq : part == 1 ? dk : dv;
        const float *xp = part == 0 ? s->qp : part == 1 ? s->kp : s->vp, *w = P[ci + part];
        float *gw = G[ci + part];
        const size_t hd = (size_t)T * D, n = (size_t)B * hh * hd;
        if (ex_copy(cx, tmp, g, n * sizeof(float)) != TK_OK) return LYR_EFAIL;
        for (b = 0; b < B; b++)
            for (h = 0; h < hh; h++) {
                const size_t o = ((size_t)b * hh + h) * hd;
                if (ex_causal_dwconv_bwd(cx, tmp + o, gw + (size_t)h * K * D, g + o, xp + o, w + (size_t)h * K * D, 1,
                                         T, D, K) != TK_OK)
                    return LYR_EFAIL;
            }
        if (ex_copy(cx, g, tmp, n * sizeof(float)) != TK_OK) return LYR_EFAIL;
    }
    return LYR_OK;
}

int lyr_polar_assemble(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P, const float *c,
                       const float *mag, const float *gl, float *out, float *z, float *magT, float *sg,
                       float *tmp, int B, int T)
{
    size_t N, D, H, C, G;
    const int chan = d && d->gate == LYR_POLAR_GATE_CHANNEL;
    if (!cx || lyr_polar_validate(d) != LYR_OK || B < 1 || T < 1) return LYR_EINVAL;
    if (!lyr__ptrs_ok((const void *const *)P, lyr__polar_np(d)) || !c || !mag || !gl || !out || !z || !magT ||
        (cx->device && !sg) || (d->bias && !tmp))
        return LYR_EINVAL;
    N = (size_t)B * T;
    D = (size_t)(d->C / d->H);
    H = (size_t)d->H;
    C = (size_t)d->C;
    G = (size_t)lyr__polar_G(d);
    if (cx->device) {
        if (ex_merge_heads_fwd(cx, z, c, B, T, (int)H, (int)D) != TK_OK ||
            ex_sigmoid_fwd(cx, sg, gl, N * G) != TK_OK ||
            (chan ? ex_rowscale(cx, z, z, sg, (int)(N * H * D), 1)
                  : ex_rowscale(cx, z, z, sg, (int)(N * H), (int)D)) != TK_OK ||
            ex_merge_heads_fwd(cx, magT, mag, B, T, (int)H, 1) != TK_OK)
            return LYR_EFAIL;
    } else {
        lyr__polar_gate_c(c, gl, mag, z, magT, B, T, (int)H, (int)D, chan);
    }
    if (ex_matmul_fwd(cx, out, z, P[LYR_POLAR_O], d->bias ? P[LYR_POLAR_O_BIAS] : NULL, (int)N, (int)(H * D),
                      (int)C) != TK_OK)
        return LYR_EFAIL;
    if (!d->bias)
        return ex_sgemm(cx, 0, 1, (int)N, (int)C, (int)H, 1.0f, magT, (int)H, P[LYR_POLAR_MU], (int)H, 1.0f,
                        out, (int)C) != TK_OK ? LYR_EFAIL : LYR_OK;
    if (ex_matmul_fwd(cx, tmp, magT, P[LYR_POLAR_MU], P[LYR_POLAR_MU_BIAS], (int)N, (int)H, (int)C) != TK_OK ||
        ex_residual_fwd(cx, out, out, tmp, N * C) != TK_OK)
        return LYR_EFAIL;
    return LYR_OK;
}

/* lyr_polar_fwd with means 0: stats (when given) gets the distractor loss only, and
   mag_mean / null_mean are 0 (the component protocol's forward: nothing reads them there,
   and on the device they cost 5 host reads per layer) */
static int lyr__polar_fwd(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P, const float *xn,
                          float *out, float *saved, float *work, int B, int T, int train,
                          uint64_t seed, lyr_polar_stats *stats, int means)
{
    lyr__polar_saved s;
    polar_params prm;
    polar_state st;
    size_t N, D, H, Hkv, C, Pq, G;
    float *qkvg, *ws;
    int n, rc, use_dist, dev = 0;
    if (!cx || lyr_polar_validate(d) != LYR_OK) return LYR_EINVAL;
    if (!lyr__ptrs_ok((const void *const *)P, lyr__polar_np(d)) || !xn || !out || !saved ||
        !work || !lyr__polar_bt_ok(d, B, T))
        return LYR_EINVAL;
    dev = cx->device;
    use_dist = train && d->cfg.distractor_keys > 0;
    N = (size_t)B * T;
    D = (size_t)(d->C / d->H);
    H = (size_t)d->H;
    Hkv = (size_t)d->Hkv;
    C = (size_t)d->C;
    Pq = (size_t)lyr__polar_P(d);
    lyr__polar_carve(d, saved, B, T, &s);
    G = (size_t)lyr__polar_G(d);
    qkvg = work;
    ws = work + lyr__al(N * Pq) + 2 * lyr__al(N * H * D) + 2 * lyr__al(N * Hkv * D) +
         3 * lyr__al(N * H) + lyr__al(N * G);
    prm = lyr__polar_prm(P);
    if (dev) {
        /* one GEMM per row block of qkv.weight ([q | k | v | gate] rows are contiguous),
           token-major results turned head-major (merge_heads_backward as a transpose) in
           the dc room, RMSNormed into saved */
        float *ta = work, *tb = work + lyr__al(N * Pq);
        const float *W = P[LYR_POLAR_QKV];
        int part;
        if (ex_copy(cx, s.xn, xn, N * C * sizeof(float)) != TK_OK) return LYR_EFAIL;
        for (part = 0; part < 3; part++) {
            size_t hh = part == 0 ? H : Hkv, off = part == 0 ? 0 : part == 1 ? H * D : (H + Hkv) * D;
            float *dst = part == 0 ? s.q : part == 1 ? s.k : s.v;
            float *rs = part == 0 ? s.rq : s.rk;
            int norm = d->qk_norm && part < 2;
            float *hm = norm ? tb : dst;
            if (lyr__sgemm(cx, 0, 1, (int)N, (int)(hh * D), (int)C, xn, (int)C, W + off * C, (int)C,
                           ta, (int)(hh * D)) != TK_OK ||
                ex_zero(cx, hm, N * hh * D * sizeof(float)) != TK_OK ||
                ex_merge_heads_bwd(cx, hm, ta, B, T, (int)hh, (int)D) != TK_OK ||
                (norm && ex_rmsnorm_fwd(cx, dst, rs, tb, NULL, (int)(N * hh), (int)D,
                                            d->qk_norm_eps) != TK_OK))
                return LYR_EFAIL;
        }
        if (lyr__sgemm(cx, 0, 1, (int)N, (int)G, (int)C, xn, (int)C, W + (H + 2 * Hkv) * D * C,
                       (int)C, s.gl, (int)G) != TK_OK)
            return LYR_EFAIL;
    } else {
    memcpy(s.xn, xn, N * C * sizeof(float));
    if (ex_matmul_fwd(cx, qkvg, xn, P[LYR_POLAR_QKV], NULL, (int)N, (int)C, (int)Pq) != TK_OK)
        return LYR_EFAIL;
    /* split rows [q | k | v | gate] into head-major q, k, v and (B,T,H) gate logits */
    LYR__OMP(omp parallel for schedule(static) if(N * Pq > LYR__PAR_MIN))
    for (n = 0; n < (int)N; n++) {
        size_t b = (size_t)n / (size_t)T, t = (size_t)n % (size_t)T, h;
        const float *row = qkvg + (size_t)n * Pq;
        for (h = 0; h < H; h++)
            memcpy(s.q + ((b * H + h) * (size_t)T + t) * D, row + h * D, D * sizeof(float));
        for (h = 0; h < Hkv; h++) {
            memcpy(s.k + ((b * Hkv + h) * (size_t)T + t) * D, row + (H + h) * D, D * sizeof(float));
            memcpy(s.v + ((b * Hkv + h) * (size_t)T + t) * D, row + (H + Hkv + h) * D,
                   D * sizeof(float));
        }
        memcpy(s.gl + (size_t)n * G, row + (H + 2 * Hkv) * D, G * sizeof(float));
    }
    if (d->qk_norm) {
        lyr_rms_rows(s.q, s.rq, N * H, (int)D, d->qk_norm_eps);
        lyr_rms_rows(s.k, s.rk, N * Hkv, (int)D, d->qk_norm_eps);
    }
    }
    if (d->canon_k > 0 && (rc = lyr__polar_canon_fwd(cx, d, P, &s, B, T)) != LYR_OK) return rc;
    st.stats = s.stats;
    st.probs = NULL;
    rc = ex_polar_fwd(cx, &d->cfg, s.c, s.mag, &st, s.q, s.k, s.v, &prm, B, (int)H, (int)Hkv, T,
                       (int)D, ws);
    if (rc != POLAR_OK) return rc == POLAR_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
    /* eq. 14 as two GEMMs: out = z W_o^T + magT W_mu^T (+ biases), z = merged c *
       sigmoid(gate) (the same function as polar_assemble_forward, which loops per token);
       z in the qkvg room, sigmoid(gate) (device) in the dc room, the biased mu part in dq's */
    rc = lyr_polar_assemble(cx, d, P, s.c, s.mag, s.gl, out, qkvg, ws - lyr__al(N * H), work + lyr__al(N * Pq),
                            work + lyr__al(N * Pq) + lyr__al(N * H * D), B, T);
    if (rc != LYR_OK) return rc;
    {
        float flag = use_dist ? 1.0f : 0.0f;
        if (ex_to_ctx(cx, s.hdr, &flag, sizeof flag) != TK_OK) return LYR_EFAIL;
    }
    if (stats) stats->align_loss = stats->mag_mean = stats->null_mean = 0;
    if (use_dist) {
        size_t nk = (size_t)B * Hkv * (size_t)d->cfg.distractor_keys * D, i;
        float loss = 0;
        if (dev) { /* the same keys, drawn on the host in blocks; the loss into hdr[1] */
            float kb[256];
            size_t i0, m;
            for (i0 = 0; i0 < nk; i0 += m) {
                m = nk - i0 < 256 ? nk - i0 : 256;
                for (i = 0; i < m; i++) kb[i] = (float)lyr__normal(seed, i0 + i);
                if (ex_to_ctx(cx, s.krand + i0, kb, m * sizeof(float)) != TK_OK) return LYR_EFAIL;
            }
            rc = polar_distractor_forward_cuda(&d->cfg, s.hdr + 1, s.q, s.krand, &prm, B, (int)H,
                                               (int)Hkv, T, (int)D, ws, cx->stream);
            if (rc == POLAR_OK && ex_to_host(cx, &loss, s.hdr + 1, sizeof loss) != TK_OK) return LYR_EFAIL;
        } else {
            for (i = 0; i < nk; i++) s.krand[i] = (float)lyr__normal(seed, i);
            rc = polar_distractor_forward(&d->cfg, &loss, s.q, s.krand, &prm, B, (int)H, (int)Hkv,
                                          T, (int)D);
        }
        if (rc != POLAR_OK) return rc == POLAR_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
        if (stats) stats->align_loss = loss;
    }
    if (stats && means) {
        /* on the host, rows in (b, h, t) order on both devices (the device path copies them
           in blocks of 1024 rows, and the three per-head parameters once when H <= 256) */
        double ms = 0, ns = 0, spa = 0, spg = 0, nb = 0;
        const int W = d->cfg.window;
        const size_t nrow = N * H;
        size_t r0, r, m, hcur = (size_t)-1;
        float sbuf[1024 * POLAR_NSTAT], mbuf[1024], hpa[3][256];
        const int pre = dev && H <= 256;
        if (pre && (ex_to_host(cx, hpa[0], prm.len_gain_raw, H * sizeof(float)) != TK_OK ||
                    ex_to_host(cx, hpa[1], prm.null_base, H * sizeof(float)) != TK_OK ||
                    ex_to_host(cx, hpa[2], prm.null_slope_raw, H * sizeof(float)) != TK_OK))
            return LYR_EFAIL;
        for (r0 = 0; r0 < nrow; r0 += m) {
            const float *stp = s.stats + r0 * POLAR_NSTAT, *mgp = s.mag + r0;
            m = nrow - r0 < 1024 ? nrow - r0 : 1024;
            if (dev) {
                if (ex_to_host(cx, sbuf, stp, m * POLAR_NSTAT * sizeof(float)) != TK_OK ||
                    ex_to_host(cx, mbuf, mgp, m * sizeof(float)) != TK_OK)
                    return LYR_EFAIL;
                stp = sbuf;
                mgp = mbuf;
            }
            for (r = r0; r < r0 + m; r++) {
                const size_t h = (r / (size_t)T) % H, t = r % (size_t)T;
                const float *stt = stp + (r - r0) * POLAR_NSTAT;
                double nv = (double)(t + 1), temp, nul, pN;
                if (h != hcur) { /* this head's length gain, null base and slope */
                    float hp[3] = {0.0f, 0.0f, 0.0f}; /* written below on every path (gcc -O3 cannot see through ex_to_host) */
                    if (pre) {
                        hp[0] = hpa[0][h];
                        hp[1] = hpa[1][h];
                        hp[2] = hpa[2][h];
                    } else if (dev) {
                        if (ex_to_host(cx, &hp[0], prm.len_gain_raw + h, sizeof(float)) != TK_OK ||
                            ex_to_host(cx, &hp[1], prm.null_base + h, sizeof(float)) != TK_OK ||
                            ex_to_host(cx, &hp[2], prm.null_slope_raw + h, sizeof(float)) != TK_OK)
                            return LYR_EFAIL;
                    } else {
                        hp[0] = prm.len_gain_raw[h];
                        hp[1] = prm.null_base[h];
                        hp[2] = prm.null_slope_raw[h];
                    }
                    spa = (double)hp[0] > 30 ? (double)hp[0] : log1p(exp((double)hp[0]));
                    spg = (double)hp[2] > 30 ? (double)hp[2] : log1p(exp((double)hp[2]));
                    nb = (double)hp[1];
                    hcur = h;
                }
                if (W > 0 && nv > W) nv = W;
                temp = 1.0 + spa * log(nv);
                nul = nb + spg * sqrt(log(nv + 1.0));
                pN = exp(temp * nul - (double)stt[0]);
                ns += pN / ((double)stt[1] + pN);
                ms += mgp[r - r0];
            }
        }
        stats->mag_mean = (float)(ms / ((double)N * H));
        stats->null_mean = (float)(ns / ((double)N * H));
    }
    return LYR_OK;
}

int lyr_polar_fwd(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P, const float *xn,
                  float *out, float *saved, float *work, int B, int T, int train,
                  uint64_t seed, lyr_polar_stats *stats)
{
    return lyr__polar_fwd(cx, d, P, xn, out, saved, work, B, T, train, seed, stats, 1);
}

int lyr_polar_qkv(const lyr_polar_dims *d, const float *saved, int B, int T, const float **q,
                  const float **k, const float **v)
{
    lyr__polar_saved s;
    if (lyr_polar_validate(d) != LYR_OK || !saved || !q || !k || !v || !lyr__polar_bt_ok(d, B, T))
        return LYR_EINVAL;
    lyr__polar_carve(d, (float *)saved, B, T, &s); /* read-only use */
    *q = s.q;
    *k = s.k;
    *v = s.v;
    return LYR_OK;
}

int lyr_polar_bwd(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P, float *const *G,
                  const float *dout, float *dxn, const float *saved, float *work,
                  int B, int T)
{
    return lyr_polar_bwd_qkv(cx, d, P, G, dout, dxn, saved, work, B, T, NULL, NULL, NULL);
}

int lyr_polar_bwd_qkv(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P, float *const *G,
                      const float *dout, float *dxn, const float *saved, float *work,
                      int B, int T, const float *gq, const float *gk, const float *gv)
{
    lyr__polar_saved s;
    polar_params prm;
    polar_grads gr;
    polar_state st;
    size_t N, D, H, Hkv, C, Pq, Gc;
    float *dqkvg, *dc, *dq, *dk, *dv, *dmag, *dgl, *magT, *dmagT, *ws, *wp, flag;
    int n, rc, dev = 0;
    const int chan = d && d->gate == LYR_POLAR_GATE_CHANNEL;
    if (!cx || lyr_polar_validate(d) != LYR_OK) return LYR_EINVAL;
    if (!lyr__ptrs_ok((const void *const *)P, lyr__polar_np(d)) ||
        !lyr__ptrs_ok((const void *const *)G, lyr__polar_np(d)) || !dout || !saved || !work ||
        !lyr__polar_bt_ok(d, B, T))
        return LYR_EINVAL;
    dev = cx->device;
    N = (size_t)B * T;
    D = (size_t)(d->C / d->H);
    H = (size_t)d->H;
    Hkv = (size_t)d->Hkv;
    C = (size_t)d->C;
    Pq = (size_t)lyr__polar_P(d);
    Gc = (size_t)lyr__polar_G(d);
    lyr__polar_carve(d, (float *)saved, B, T, &s); /* read-only use below */
    wp = work;
    dqkvg = lyr__take(&wp, N * Pq);
    dc = lyr__take(&wp, N * H * D);
    dq = lyr__take(&wp, N * H * D);
    dk = lyr__take(&wp, N * Hkv * D);
    dv = lyr__take(&wp, N * Hkv * D);
    dmag = lyr__take(&wp, N * H);
    dgl = lyr__take(&wp, N * Gc);
    magT = lyr__take(&wp, N * H);
    dmagT = lyr__take(&wp, N * H);
    ws = wp;
    prm = lyr__polar_prm(P);
    /* whether the forward ran the distractor loss (its flag in the saved header): a host
       read on the device, so only where the configuration has one */
    flag = 0.0f;
    if (d->cfg.distractor_keys > 0 && ex_to_host(cx, &flag, s.hdr, sizeof flag) != TK_OK) return LYR_EFAIL;
    if (dev) {
        /* eq. 14 backward with routed ops: sigmoid(gate) and z in ws's room (free until
           polar_backward), merged c in dq's, dz in dqkvg's, rowdot(dz, c) in magT's (per
           channel: dz c in z's room, free after the o.weight gradient). With the gate per
           channel every "per row of D" product is elementwise (rows of 1). */
        float *sg = ws, *zb = ws + lyr__al(N * Gc), *zc = dq, *dz = dqkvg;
        const int gr_n = chan ? (int)(N * H * D) : (int)(N * H), gr_c = chan ? 1 : (int)D;
        if (ex_sigmoid_fwd(cx, sg, s.gl, N * Gc) != TK_OK ||
            ex_merge_heads_fwd(cx, zc, s.c, B, T, (int)H, (int)D) != TK_OK ||
            ex_rowscale(cx, zb, zc, sg, gr_n, gr_c) != TK_OK ||
            ex_merge_heads_fwd(cx, magT, s.mag, B, T, (int)H, 1) != TK_OK ||
            ex_matmul_bwd(cx, NULL, G[LYR_POLAR_O], d->bias ? G[LYR_POLAR_O_BIAS] : NULL, dout, zb, NULL, (int)N,
                          (int)(H * D), (int)C) != TK_OK ||
            ex_matmul_bwd(cx, NULL, G[LYR_POLAR_MU], d->bias ? G[LYR_POLAR_MU_BIAS] : NULL, dout, magT, NULL,
                          (int)N, (int)H, (int)C) != TK_OK ||
            lyr__sgemm(cx, 0, 0, (int)N, (int)(H * D), (int)C, dout, (int)C, P[LYR_POLAR_O],
                       (int)(H * D), dz, (int)(H * D)) != TK_OK ||
            lyr__sgemm(cx, 0, 0, (int)N, (int)H, (int)C, dout, (int)C, P[LYR_POLAR_MU], (int)H,
                       dmagT, (int)H) != TK_OK)
            return LYR_EFAIL;
        if (chan ? (ex_rowscale(cx, zb, dz, zc, (int)(N * H * D), 1) != TK_OK ||
                    ex_zero(cx, dgl, N * Gc * sizeof(float)) != TK_OK ||
                    ex_sigmoid_bwd(cx, dgl, sg, zb, N * Gc) != TK_OK)
                 : (ex_zero(cx, magT, N * H * sizeof(float)) != TK_OK ||
                    ex_rowdot(cx, magT, dz, zc, (int)(N * H), (int)D) != TK_OK ||
                    ex_zero(cx, dgl, N * H * sizeof(float)) != TK_OK ||
                    ex_sigmoid_bwd(cx, dgl, sg, magT, N * H) != TK_OK))
            return LYR_EFAIL;
        if (ex_rowscale(cx, zb, dz, sg, gr_n, gr_c) != TK_OK ||
            ex_zero(cx, dc, N * H * D * sizeof(float)) != TK_OK ||
            ex_merge_heads_bwd(cx, dc, zb, B, T, (int)H, (int)D) != TK_OK ||
            ex_zero(cx, dmag, N * H * sizeof(float)) != TK_OK ||
            ex_merge_heads_bwd(cx, dmag, dmagT, B, T, (int)H, 1) != TK_OK)
            return LYR_EFAIL;
    } else
    /* eq. 14 backward with GEMMs: z in dqkvg's room, dz in dq's (both free until later) */
    {
        float *z = dqkvg, *dz = dq;
        lyr__polar_gate_c(s.c, s.gl, s.mag, z, magT, B, T, (int)H, (int)D, chan);
        if (ex_matmul_bwd(cx, NULL, G[LYR_POLAR_O], d->bias ? G[LYR_POLAR_O_BIAS] : NULL, dout, z, NULL, (int)N,
                          (int)(H * D), (int)C) != TK_OK ||
            ex_matmul_bwd(cx, NULL, G[LYR_POLAR_MU], d->bias ? G[LYR_POLAR_MU_BIAS] : NULL, dout, magT, NULL,
                          (int)N, (int)H, (int)C) != TK_OK ||
            ex_sgemm(cx, 0, 0, (int)N, (int)(H * D), (int)C, 1.0f, dout, (int)C, P[LYR_POLAR_O],
                     (int)(H * D), 0.0f, dz, (int)(H * D)) != TK_OK ||
            ex_sgemm(cx, 0, 0, (int)N, (int)H, (int)C, 1.0f, dout, (int)C, P[LYR_POLAR_MU], (int)H,
                     0.0f, dmagT, (int)H) != TK_OK)
            return LYR_EFAIL;
        LYR__OMP(omp parallel for schedule(static) if(N * H * D > LYR__PAR_MIN))
        for (n = 0; n < (int)N; n++) {
            size_t b = (size_t)n / (size_t)T, t = (size_t)n % (size_t)T, h, j;
            for (h = 0; h < H; h++) {
                size_t row = (b * H + h) * (size_t)T + t;
                const float *ch = s.c + row * D, *dzh = dz + ((size_t)n * H + h) * D;
                float *dch = dc + row * D;
                float sg;
                double acc = 0;
                if (chan) { /* per channel: dc = dz sg, dgl = dz c sg (1 - sg) */
                    const float *gh = s.gl + ((size_t)n * H + h) * D;
                    float *dg = dgl + ((size_t)n * H + h) * D;
                    for (j = 0; j < D; j++) {
                        double sj = lyr__sigmoidf(gh[j]);
                        dch[j] = (float)(dzh[j] * sj);
                        dg[j] = (float)((double)dzh[j] * ch[j] * sj * (1.0 - sj));
                    }
                    dmag[row] = dmagT[(size_t)n * H + h];
                    continue;
                }
                sg = lyr__sigmoidf(s.gl[(size_t)n * H + h]);
                for (j = 0; j < D; j++) {
                    dch[j] = dzh[j] * sg;
                    acc += (double)dzh[j] * ch[j];
                }
                dgl[(size_t)n * H + h] = (float)(acc * sg * (1.0 - sg));
                dmag[row] = dmagT[(size_t)n * H + h];
            }
        }
    }
    if (ex_zero(cx, dq, N * H * D * sizeof(float)) != TK_OK ||
        ex_zero(cx, dk, N * Hkv * D * sizeof(float)) != TK_OK ||
        ex_zero(cx, dv, N * Hkv * D * sizeof(float)) != TK_OK)
        return LYR_EFAIL;
    gr.len_gain_raw = G[LYR_POLAR_LEN_GAIN];
    gr.null_base = G[LYR_POLAR_NULL_BASE];
    gr.null_slope_raw = G[LYR_POLAR_NULL_SLOPE];
    gr.mag_beta_raw = G[LYR_POLAR_MAG_BETA];
    gr.v_null = G[LYR_POLAR_V_NULL];
    st.stats = s.stats;
    st.probs = NULL;
    rc = ex_polar_bwd(cx, &d->cfg, dq, dk, dv, &gr, dc, dmag, s.c, s.mag, &st, s.q, s.k, s.v, &prm,
                        B, (int)H, (int)Hkv, T, (int)D, ws);
    if (rc != POLAR_OK) return rc == POLAR_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
    if (flag != 0.0f && d->cfg.distractor_keys > 0) {
        if (dev) /* ws is free again after polar_backward */
            rc = polar_distractor_backward_cuda(&d->cfg, dq, NULL, &gr, 1.0f, s.q, s.krand, &prm, B,
                                                (int)H, (int)Hkv, T, (int)D, ws, cx->stream);
        else
            rc = polar_distractor_backward(&d->cfg, dq, NULL, &gr, 1.0f, s.q, s.krand, &prm, B,
                                           (int)H, (int)Hkv, T, (int)D);
        if (rc != POLAR_OK) return rc == POLAR_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
    }
    /* a second reader of the scored q, k, v (the shared memory channel): its gradients */
    if ((gq && ex_residual_fwd(cx, dq, dq, gq, N * H * D) != TK_OK) ||
        (gk && ex_residual_fwd(cx, dk, dk, gk, N * Hkv * D) != TK_OK) ||
        (gv && ex_residual_fwd(cx, dv, dv, gv, N * Hkv * D) != TK_OK))
        return LYR_EFAIL;
    /* Canon: dq, dk, dv become the gradients of the convolutions' inputs (dc's room as the
       scratch, free after polar_backward); the norms' backward below reads qp, kp */
    if (d->canon_k > 0 && (rc = lyr__polar_canon_bwd(cx, d, P, G, &s, dq, dk, dv, dc, B, T)) != LYR_OK) return rc;
    if (dev) {
        /* per row block of qkv.weight: back through the RMSNorm (dx = r (g - y mean(g y)),
           in dc's room, mean(g y) in magT's), token-major (in dqkvg's room), the block's
           GEMM backward; then the gate rows from dgl */
        const float *W = P[LYR_POLAR_QKV];
        float *GW = G[LYR_POLAR_QKV], *tm = magT, *tmp = dc, *tok = dqkvg;
        int part;
        for (part = 0; part < 3; part++) {
            size_t hh = part == 0 ? H : Hkv, off = part == 0 ? 0 : part == 1 ? H * D : (H + Hkv) * D;
            size_t rows = N * hh;
            const float *g = part == 0 ? dq : part == 1 ? dk : dv;
            const float *y = d->canon_k > 0 ? (part == 0 ? s.qp : s.kp) : (part == 0 ? s.q : s.k),
                        *rs = part == 0 ? s.rq : s.rk;
            if (d->qk_norm && part < 2) {
                if (ex_zero(cx, tm, rows * sizeof(float)) != TK_OK ||
                    ex_rowdot(cx, tm, g, y, (int)rows, (int)D) != TK_OK ||
                    ex_scale(cx, tm, tm, -1.0f / (float)D, rows) != TK_OK ||
                    ex_rowscale(cx, tmp, y, tm, (int)rows, (int)D) != TK_OK ||
                    ex_residual_fwd(cx, tmp, tmp, g, rows * D) != TK_OK ||
                    ex_rowscale(cx, tmp, tmp, rs, (int)rows, (int)D) != TK_OK)
                    return LYR_EFAIL;
                g = tmp;
            }
            if (ex_merge_heads_fwd(cx, tok, g, B, T, (int)hh, (int)D) != TK_OK ||
                ex_matmul_bwd(cx, dxn, GW + off * C, NULL, tok, s.xn, W + off * C, (int)N, (int)C,
                                   (int)(hh * D)) != TK_OK)
                return LYR_EFAIL;
        }
        if (ex_matmul_bwd(cx, dxn, GW + (H + 2 * Hkv) * D * C, NULL, dgl, s.xn,
                               W + (H + 2 * Hkv) * D * C, (int)N, (int)C, (int)Gc) != TK_OK)
            return LYR_EFAIL;
        return LYR_OK;
    }
    /* back through the per-head RMSNorm and into the fused projection rows */
    LYR__OMP(omp parallel for schedule(static) if(N * Pq > LYR__PAR_MIN))
    for (n = 0; n < (int)N; n++) {
        size_t b = (size_t)n / (size_t)T, t = (size_t)n % (size_t)T, h, j;
        float *row = dqkvg + (size_t)n * Pq;
        for (h = 0; h < H + 2 * Hkv; h++) {
            const float *g, *y;
            float r = 1.0f;
            float *o = row + h * D;
            size_t idx;
            if (h < H) {
                idx = (b * H + h) * (size_t)T + t;
                g = dq + idx * D;
                y = (d->canon_k > 0 ? s.qp : s.q) + idx * D;
                if (d->qk_norm) r = s.rq[idx];
            } else if (h < H + Hkv) {
                idx = (b * Hkv + (h - H)) * (size_t)T + t;
                g = dk + idx * D;
                y = (d->canon_k > 0 ? s.kp : s.k) + idx * D;
                if (d->qk_norm) r = s.rk[idx];
            } else {
                idx = (b * Hkv + (h - H - Hkv)) * (size_t)T + t;
                g = dv + idx * D;
                y = s.v + idx * D;
            }
            if (h < H + Hkv && d->qk_norm) { /* dx = r (g - y mean(g y)) */
                double gy = 0;
                for (j = 0; j < D; j++) gy += (double)g[j] * y[j];
                gy /= (double)D;
                for (j = 0; j < D; j++) o[j] = (float)(r * ((double)g[j] - y[j] * gy));
            } else {
                memcpy(o, g, D * sizeof(float));
            }
        }
        memcpy(row + (H + 2 * Hkv) * D, dgl + (size_t)n * Gc, Gc * sizeof(float));
    }
    if (ex_matmul_bwd(cx, dxn, G[LYR_POLAR_QKV], NULL, dqkvg, s.xn, P[LYR_POLAR_QKV], (int)N,
                           (int)C, (int)Pq) != TK_OK)
        return LYR_EFAIL;
    return LYR_OK;
}

/* =================================================================== gated-delta memory */
lyr_gdelta_dims lyr_gdelta_dims_make(int C, int Hm, int Dk)
{
    lyr_gdelta_dims d;
    memset(&d, 0, sizeof d);
    d.C = C;
    d.Hm = Hm;
    d.Dk = Dk;
    d.resid_scale = 1.0f;
    d.cfg = gd_config_default();
    return d;
}

int lyr_gdelta_validate(const lyr_gdelta_dims *d)
{
    if (!d) return LYR_EINVAL;
    if (d->C < 1 || d->Hm < 1 || d->Dk < 1) return LYR_EINVAL;
    if (d->C > (1 << 20) || (double)d->Hm * d->Dk > (double)(1 << 20)) return LYR_EINVAL;
    if (!lyr__finite(d->resid_scale) || d->resid_scale < 0) return LYR_EINVAL;
    if (gd_workspace_size(&d->cfg, 1, d->Hm, 1, d->Dk, d->Dk) == 0) return LYR_EINVAL;
    if (d->qkv_shared != 0 && d->qkv_shared != 1) return LYR_EINVAL;
    if (d->qkv_shared && (d->kv_heads < 1 || d->Hm % d->kv_heads != 0)) return LYR_EINVAL;
    return LYR_OK;
}

int lyr_gdelta_param_base(const lyr_gdelta_dims *d)
{
    if (lyr_gdelta_validate(d) != LYR_OK) return -1;
    return d->qkv_shared ? 0 : 1;
}

/* the layer's parameter count (LYR_GD_NPARAMS, one fewer with qkv_shared) */
static int lyr__gd_np(const lyr_gdelta_dims *d) { return d->qkv_shared ? LYR_GD_NPARAMS - 1 : LYR_GD_NPARAMS; }

/* P (the layer's list) indexed by LYR_GD_* in Pl (Pl[LYR_GD_QKV] NULL with qkv_shared) */
static void lyr__gd_pl(const lyr_gdelta_dims *d, const float *const *P, const float **Pl)
{
    int i, o = d->qkv_shared ? 1 : 0;
    Pl[LYR_GD_QKV] = NULL;
    for (i = o; i < LYR_GD_NPARAMS; i++) Pl[i] = P[i - o];
}

static void lyr__gd_gl(const lyr_gdelta_dims *d, float *const *G, float **Gl)
{
    int i, o = d->qkv_shared ? 1 : 0;
    Gl[LYR_GD_QKV] = NULL;
    for (i = o; i < LYR_GD_NPARAMS; i++) Gl[i] = G[i - o];
}

int lyr_gdelta_params(const lyr_gdelta_dims *d, lyr_pspec *out, int cap)
{
    int HD, o;
    if (lyr_gdelta_validate(d) != LYR_OK || !out) return LYR_EINVAL;
    if (cap < lyr__gd_np(d)) return LYR_EINVAL;
    HD = d->Hm * d->Dk;
    o = d->qkv_shared ? -1 : 0; /* shared: the list starts at w_gamma */
    if (!d->qkv_shared) lyr__spec(&out[LYR_GD_QKV], "qkv.weight", 1, 2, 3 * HD, d->C, 0);
    lyr__spec(&out[LYR_GD_W_GAMMA + o], "w_gamma", 1, 2, d->Hm, d->C, 0);
    lyr__spec(&out[LYR_GD_B_GAMMA + o], "b_gamma", 0, 1, d->Hm, 0, 0);
    lyr__spec(&out[LYR_GD_W_BETA + o], "w_beta", 1, 2, d->Hm, d->C, 0);
    lyr__spec(&out[LYR_GD_B_BETA + o], "b_beta", 0, 1, d->Hm, 0, 0);
    lyr__spec(&out[LYR_GD_NORM + o], "norm.weight", 0, 1, d->Dk, 0, 0);
    lyr__spec(&out[LYR_GD_G_W + o], "g.weight", 1, 2, HD, d->C, 0);
    lyr__spec(&out[LYR_GD_G_B + o], "g.bias", 0, 1, HD, 0, 0);
    lyr__spec(&out[LYR_GD_PROJ + o], "proj.weight", 1, 2, d->C, HD, 0);
    return lyr__gd_np(d);
}

int lyr_gdelta_init(const lyr_gdelta_dims *d, float *const *Pin, tk_rng *rng, float init_std)
{
    size_t C, HD, Hm;
    float *P[LYR_GD_NPARAMS];
    if (lyr_gdelta_validate(d) != LYR_OK || !lyr__ptrs_ok((const void *const *)Pin, lyr__gd_np(d)) ||
        !rng || !lyr__finite(init_std) || init_std < 0)
        return LYR_EINVAL;
    lyr__gd_gl(d, Pin, P);
    C = (size_t)d->C;
    Hm = (size_t)d->Hm;
    HD = Hm * (size_t)d->Dk;
    if ((!d->qkv_shared && tk_init_normal(P[LYR_GD_QKV], 3 * HD * C, 0.0f, init_std, rng) != TK_OK) ||
        tk_init_normal(P[LYR_GD_W_GAMMA], Hm * C, 0.0f, init_std, rng) != TK_OK ||
        tk_init_normal(P[LYR_GD_W_BETA], Hm * C, 0.0f, init_std, rng) != TK_OK ||
        tk_init_constant(P[LYR_GD_NORM], (size_t)d->Dk, 1.0f) != TK_OK ||
        tk_init_normal(P[LYR_GD_G_W], HD * C, 0.0f, init_std, rng) != TK_OK ||
        tk_init_constant(P[LYR_GD_G_B], HD, 0.0f) != TK_OK ||
        tk_init_constant(P[LYR_GD_PROJ], C * HD, 0.0f) != TK_OK)
        return LYR_EFAIL;
    if (gd_gates_init_bias(&d->cfg, P[LYR_GD_B_GAMMA], P[LYR_GD_B_BETA], d->Hm) != GD_OK)
        return LYR_EFAIL;
    return LYR_OK;
}

/* bytes gd_forward's saved state needs: the larger of the CPU layout (states, u, wy, each
   at 16 floats, plus 16 floats of alignment slack) and gd_forward_cuda's (chunk-start
   states rounded up to 64 floats, then u; its chunk is min(chunk_size, T), or larger with
   tensor-core math, which only lowers the state count) */
static size_t lyr__gd_saved_bytes(const gd_config *cfg, int B, int H, int T, int Dk, int Dv)
{
    int step = cfg->algo == GD_ALGO_CHUNKED ? cfg->chunk_size : cfg->checkpoint;
    int cstep = cfg->chunk_size < T ? cfg->chunk_size : T;
    size_t ns = (size_t)((T + step - 1) / step), cns = (size_t)((T + cstep - 1) / cstep);
    size_t nst = (size_t)B * H * ns * (size_t)Dk * Dv;
    size_t nu = cfg->algo == GD_ALGO_CHUNKED ? (size_t)B * H * T * (size_t)Dv : 0;
    size_t nw = cfg->algo == GD_ALGO_CHUNKED ? (size_t)B * H * ns * 5 * (size_t)step * step : 0;
    size_t cpu = (lyr__al(nst) + lyr__al(nu) + lyr__al(nw) + 16) * sizeof(float);
    size_t cnst = (size_t)B * H * cns * (size_t)Dk * Dv;
    size_t dev = (((cnst + 63) & ~(size_t)63) + (size_t)B * H * T * (size_t)Dv) * sizeof(float);
    return cpu > dev ? cpu : dev;
}

/* gdelta.h's private GD__SAVED_CUDA: the gd_saved.algo bit of a device saved state (set
   on the device path so gd_forward_cuda fills the caller's device buffer in place instead
   of freeing it as host memory) */
#define LYR__GD_SAVED_CUDA 0x100

#define LYR__GD_HDR (lyr__al(lyr__bytes_to_floats(sizeof(gd_saved))))

/* saved layout: hdr (a gd_saved copy), xn (N,C), q, k, v (B,Hm,T,Dk), gates, beta
   (B,Hm,T), r (B,Hm,T,Dk), readout gate sigmoid(xn W_g^T + b_g) (N,Hm*Dk), readout
   RMSNorm rstd (N,Hm), gd memory */
typedef struct lyr__gd_saved {
    float *hdr, *xn, *q, *k, *v, *gates, *beta, *r, *g, *rs, *mem;
    size_t mem_bytes;
} lyr__gd_saved;

static void lyr__gd_carve(const lyr_gdelta_dims *d, float *base, int B, int T, lyr__gd_saved *s)
{
    size_t N = (size_t)B * T, HD = (size_t)d->Hm * d->Dk;
    float *p = base;
    s->hdr = lyr__take(&p, LYR__GD_HDR);
    s->xn = lyr__take(&p, N * (size_t)d->C);
    s->q = lyr__take(&p, N * HD);
    s->k = lyr__take(&p, N * HD);
    s->v = lyr__take(&p, N * HD);
    s->gates = lyr__take(&p, N * (size_t)d->Hm);
    s->beta = lyr__take(&p, N * (size_t)d->Hm);
    s->r = lyr__take(&p, N * HD);
    s->g = lyr__take(&p, N * HD);
    s->rs = lyr__take(&p, N * (size_t)d->Hm);
    s->mem_bytes = lyr__gd_saved_bytes(&d->cfg, B, d->Hm, T, d->Dk, d->Dk);
    s->mem = lyr__take(&p, lyr__bytes_to_floats(s->mem_bytes));
}

static int lyr__gd_bt_ok(const lyr_gdelta_dims *d, int B, int T)
{
    return lyr__bt_ok(B, T, 3.0 * d->Hm * d->Dk + d->C);
}

size_t lyr_gdelta_saved_floats(const lyr_gdelta_dims *d, int B, int T)
{
    size_t N, HD;
    if (lyr_gdelta_validate(d) != LYR_OK || !lyr__gd_bt_ok(d, B, T)) return 0;
    N = (size_t)B * T;
    HD = (size_t)d->Hm * d->Dk;
    return LYR__GD_HDR + lyr__al(N * (size_t)d->C) + 5 * lyr__al(N * HD) +
           3 * lyr__al(N * (size_t)d->Hm) +
           lyr__al(lyr__bytes_to_floats(lyr__gd_saved_bytes(&d->cfg, B, d->Hm, T, d->Dk, d->Dk)));
}

size_t lyr_gdelta_work_floats(const lyr_gdelta_dims *d, int B, int T)
{
    size_t N, HD, ws;
    if (lyr_gdelta_validate(d) != LYR_OK || !lyr__gd_bt_ok(d, B, T)) return 0;
    N = (size_t)B * T;
    HD = (size_t)d->Hm * d->Dk;
    ws = gd_workspace_size(&d->cfg, B, d->Hm, T, d->Dk, d->Dk);
    if (ws == 0) return 0;
    { /* the device path's workspace (0 in builds without CUDA) */
        size_t wc = gd_workspace_size_cuda(&d->cfg, B, d->Hm, T, d->Dk, d->Dk);
        if (wc > ws) ws = wc;
    }
    /* backward: dqkv (N,3HD) (first the readout's z, dz, dz_gate), dq, dk, dv, dr (N,HD),
       dgates, dbeta (N,Hm), the recurrence's workspace */
    return lyr__al(3 * N * HD) + 4 * lyr__al(N * HD) + 2 * lyr__al(N * (size_t)d->Hm) +
           lyr__al(lyr__bytes_to_floats(ws));
}

/* z (N,Hm*Dk) = r (B,Hm,T,Dk) * rs * norm_w * g, per token and head. first: g holds the
   gate pre-activations (turned into sigmoids in place) and rs is computed; else both are
   read. */
void lyr_gdelta_readout_z(const lyr_gdelta_dims *d, const float *r, float *g, float *rs, const float *nw, float *z,
                          int B, int T, int first)
{
    int n, Hm = d->Hm, Dk = d->Dk;
    float eps = d->cfg.rms_eps;
    LYR__OMP(omp parallel for schedule(static) if((size_t)B * T * Hm * Dk > LYR__PAR_MIN))
    for (n = 0; n < B * T; n++) {
        size_t b = (size_t)n / (size_t)T, t = (size_t)n % (size_t)T;
        int h, j;
        for (h = 0; h < Hm; h++) {
            const float *rr = r + ((b * Hm + h) * (size_t)T + t) * Dk;
            float *gg = g + ((size_t)n * Hm + h) * Dk, *zz = z + ((size_t)n * Hm + h) * Dk;
            float rsv;
            if (first) {
                double ss = 0;
                for (j = 0; j < Dk; j++) ss += (double)rr[j] * rr[j];
                rsv = (float)(1.0 / sqrt(ss / Dk + (double)eps));
                rs[(size_t)n * Hm + h] = rsv;
                for (j = 0; j < Dk; j++) gg[j] = lyr__sigmoidf(gg[j]);
            } else {
                rsv = rs[(size_t)n * Hm + h];
            }
            for (j = 0; j < Dk; j++) zz[j] = rr[j] * rsv * nw[j] * gg[j];
        }
    }
}

/* the work buffer's rooms (see lyr_gdelta_work_floats): the backward's names; the forward
   uses dqkv for the fused projection and the readout's z, the others as scratch */
typedef struct lyr__gd_work {
    float *dqkv, *dq, *dk, *dv, *dr, *dg, *db, *ws;
} lyr__gd_work;

static void lyr__gd_work_carve(float *base, size_t N, size_t HD, size_t Hm, lyr__gd_work *w)
{
    float *p = base;
    w->dqkv = lyr__take(&p, 3 * N * HD);
    w->dq = lyr__take(&p, N * HD);
    w->dk = lyr__take(&p, N * HD);
    w->dv = lyr__take(&p, N * HD);
    w->dr = lyr__take(&p, N * HD);
    w->dg = lyr__take(&p, N * Hm);
    w->db = lyr__take(&p, N * Hm);
    w->ws = p;
}

/* gates, beta (B,Hm,T) = sigmoid(xn W^T + b) with tensor.h's routed ops (the device path;
   gd_gates_forward is host code). tmp: N*Hm floats. */
static int lyr__gd_gates_ops(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, const float *xn,
                             float *gates, float *beta, float *tmp, int B, int T)
{
    size_t n = (size_t)B * T * d->Hm;
    int which;
    for (which = 0; which < 2; which++) {
        float *o = which ? beta : gates;
        if (ex_matmul_fwd(cx, tmp, xn, P[which ? LYR_GD_W_BETA : LYR_GD_W_GAMMA],
                              P[which ? LYR_GD_B_BETA : LYR_GD_B_GAMMA], B * T, d->C, d->Hm) != TK_OK ||
            ex_zero(cx, o, n * sizeof(float)) != TK_OK ||
            ex_merge_heads_bwd(cx, o, tmp, B, T, d->Hm, 1) != TK_OK || /* (B,T,Hm) -> (B,Hm,T) */
            ex_sigmoid_fwd(cx, o, o, n) != TK_OK)
            return LYR_EFAIL;
    }
    return LYR_OK;
}

int lyr_gdelta_gates(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, const float *xn,
                     float *gates, float *beta, float *tmp, int B, int T)
{
    int rc;
    if (cx->device) return lyr__gd_gates_ops(cx, d, P, xn, gates, beta, tmp, B, T);
    rc = gd_gates_forward(&d->cfg, gates, beta, xn, P[LYR_GD_W_GAMMA], P[LYR_GD_B_GAMMA], P[LYR_GD_W_BETA],
                          P[LYR_GD_B_BETA], B, T, d->C, d->Hm);
    return rc == GD_OK ? LYR_OK : rc == GD_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
}

int lyr_gdelta_readout(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *r, float *g, float *rs,
                       const float *nw, float *z, float *t1, float *t2, int B, int T)
{
    const size_t N = (size_t)B * T, HD = (size_t)d->Hm * d->Dk;
    if (!cx->device) {
        lyr_gdelta_readout_z(d, r, g, rs, nw, z, B, T, 1);
        return LYR_OK;
    }
    if (ex_sigmoid_fwd(cx, g, g, N * HD) != TK_OK || ex_merge_heads_fwd(cx, t1, r, B, T, d->Hm, d->Dk) != TK_OK ||
        ex_rmsnorm_fwd(cx, t2, rs, t1, nw, (int)N * d->Hm, d->Dk, d->cfg.rms_eps) != TK_OK ||
        ex_rowscale(cx, z, t2, g, (int)(N * HD), 1) != TK_OK)
        return LYR_EFAIL;
    return LYR_OK;
}

/* the backward of lyr__gd_gates_ops: dxn (or NULL), dW, db += from dgates, dbeta (B,Hm,T).
   t1, t2: N*Hm floats each. */
static int lyr__gd_gates_ops_bwd(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P,
                                 float *const *G, float *dxn, const float *dgates,
                                 const float *dbeta, const float *gates, const float *beta,
                                 const float *xn, float *t1, float *t2, int B, int T)
{
    size_t n = (size_t)B * T * d->Hm;
    int which;
    for (which = 0; which < 2; which++) {
        int iw = which ? LYR_GD_W_BETA : LYR_GD_W_GAMMA, ib = which ? LYR_GD_B_BETA : LYR_GD_B_GAMMA;
        if (ex_zero(cx, t1, n * sizeof(float)) != TK_OK ||
            ex_sigmoid_bwd(cx, t1, which ? beta : gates, which ? dbeta : dgates, n) != TK_OK ||
            ex_merge_heads_fwd(cx, t2, t1, B, T, d->Hm, 1) != TK_OK || /* (B,Hm,T) -> (B,T,Hm) */
            ex_matmul_bwd(cx, dxn, G[iw], G[ib], t2, xn, P[iw], B * T, d->C, d->Hm) != TK_OK)
            return LYR_EFAIL;
    }
    return LYR_OK;
}

/* the sum of n floats at x (host or device memory: read in order, in host blocks on the
   device), of exp(x) when is_log */
static int lyr__gd_sum(const ex_ctx *cx, const float *x, size_t n, int is_log, double *sum)
{
    float buf[256];
    double acc = 0;
    size_t i = 0, j, m;
    while (i < n) {
        const float *p = x + i;
        m = n - i < 256 ? n - i : 256;
        if (cx->device) {
            if (ex_to_host(cx, buf, p, m * sizeof(float)) != TK_OK) return LYR_EFAIL;
            p = buf;
        }
        for (j = 0; j < m; j++) acc += is_log ? exp((double)p[j]) : (double)p[j];
        i += m;
    }
    *sum = acc;
    return LYR_OK;
}

/* Devices: with every buffer device memory the layer runs on the CUDA device through
   tensor.h's routed ops and gdelta.h's routed gd_forward / gd_backward (their CUDA bodies;
   the saved state stays in the caller's saved buffer). The CPU path keeps its fused host
   loops for the gates (gd_gates_*) and the readout (double accumulation); the device path
   computes the same functions with tk_matmul / tk_sigmoid / tk_rmsnorm / tk_rowscale (float
   accumulation), equal to float rounding. cfg.gate_is_log is CPU-only (LYR_EINVAL). */
/* k or v (B,Hkv,T,Dk) repeated to (B,Hm,T,Dk): memory head h reads kv head h / (Hm / Hkv) */
static int lyr__gd_expand(const ex_ctx *cx, const lyr_gdelta_dims *d, float *dst, const float *src, int B, int T)
{
    const size_t blk = (size_t)T * d->Dk;
    const int Hm = d->Hm, Hkv = d->kv_heads, grp = Hm / Hkv;
    int b, h;
    if (grp == 1) return ex_copy(cx, dst, src, (size_t)B * Hm * blk * sizeof(float)) == TK_OK ? LYR_OK : LYR_EFAIL;
    for (b = 0; b < B; b++)
        for (h = 0; h < Hm; h++)
            if (ex_copy(cx, dst + ((size_t)b * Hm + h) * blk, src + ((size_t)b * Hkv + h / grp) * blk,
                        blk * sizeof(float)) != TK_OK)
                return LYR_EFAIL;
    return LYR_OK;
}

/* dst (B,Hkv,T,Dk) += src (B,Hm,T,Dk) summed over each kv head's memory heads (in order) */
static int lyr__gd_reduce(const ex_ctx *cx, const lyr_gdelta_dims *d, float *dst, const float *src, int B, int T)
{
    const size_t blk = (size_t)T * d->Dk;
    const int Hm = d->Hm, Hkv = d->kv_heads, grp = Hm / Hkv;
    int b, h;
    if (grp == 1) return ex_residual_fwd(cx, dst, dst, src, (size_t)B * Hm * blk) == TK_OK ? LYR_OK : LYR_EFAIL;
    for (b = 0; b < B; b++)
        for (h = 0; h < Hm; h++) {
            float *o = dst + ((size_t)b * Hkv + h / grp) * blk;
            if (ex_residual_fwd(cx, o, o, src + ((size_t)b * Hm + h) * blk, blk) != TK_OK) return LYR_EFAIL;
        }
    return LYR_OK;
}

/* the forward of both forms: q NULL: the own projection (P[LYR_GD_QKV]); else the given q,
   k, v (qkv_shared). P indexed by LYR_GD_*. hhdr (NULL: none): host memory that gets a copy
   of the saved header, which the backward then reads there instead of from saved (a device
   model's per-layer host floats: no host wait in the backward). */
static int lyr__gd_fwd(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, const float *xn,
                       const float *qi, const float *ki, const float *vi, float *out, float *saved, float *work,
                       int B, int T, lyr_gdelta_stats *stats, void *hhdr)
{
    lyr__gd_saved s;
    lyr__gd_work w;
    gd_saved gs;
    size_t N, HD, C;
    float *qkv;
    int rc, dev = 0;
    dev = cx->device;
    if (dev && d->cfg.gate_is_log) return LYR_EINVAL;
    N = (size_t)B * T;
    HD = (size_t)d->Hm * d->Dk;
    C = (size_t)d->C;
    lyr__gd_carve(d, saved, B, T, &s);
    lyr__gd_work_carve(work, N, HD, (size_t)d->Hm, &w);
    qkv = w.dqkv;
    if (ex_copy(cx, s.xn, xn, N * C * sizeof(float)) != TK_OK) return LYR_EFAIL;
    if (qi) {
        if (ex_copy(cx, s.q, qi, N * HD * sizeof(float)) != TK_OK) return LYR_EFAIL;
        if ((rc = lyr__gd_expand(cx, d, s.k, ki, B, T)) != LYR_OK ||
            (rc = lyr__gd_expand(cx, d, s.v, vi, B, T)) != LYR_OK)
            return rc;
    } else if (ex_matmul_fwd(cx, qkv, xn, P[LYR_GD_QKV], NULL, (int)N, (int)C, (int)(3 * HD)) != TK_OK ||
               ex_split_heads_fwd(cx, s.q, s.k, s.v, qkv, B, T, d->Hm, d->Dk) != TK_OK) {
        return LYR_EFAIL;
    }
    if (dev) {
        if ((rc = lyr__gd_gates_ops(cx, d, P, xn, s.gates, s.beta, w.dg, B, T)) != LYR_OK) return rc;
    } else {
        rc = gd_gates_forward(&d->cfg, s.gates, s.beta, xn, P[LYR_GD_W_GAMMA], P[LYR_GD_B_GAMMA],
                              P[LYR_GD_W_BETA], P[LYR_GD_B_BETA], B, T, (int)C, d->Hm);
        if (rc != GD_OK) return rc == GD_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
    }
    gs = gd_saved_init();
    gs.mem = s.mem;
    gs.cap = s.mem_bytes;
    if (dev) gs.algo = GD_ALGO_CHUNKED | LYR__GD_SAVED_CUDA; /* device memory: fill it */
    rc = ex_gd_fwd(cx, &d->cfg, s.r, NULL, s.q, s.k, s.v, s.gates, s.beta, NULL, B, d->Hm, T, d->Dk,
                    d->Dk, &gs, w.ws);
    if (gs.mem != (void *)s.mem) { /* gdelta grew its buffer: our size is out of date */
        gd_saved_free(&gs);
        return LYR_EFAIL;
    }
    if (rc != GD_OK) return rc == GD_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
    if (ex_to_ctx(cx, s.hdr, &gs, sizeof gs) != TK_OK) return LYR_EFAIL;
    if (hhdr) memcpy(hhdr, &gs, sizeof gs);
    /* readout (eq. 25, the function of gd_readout_forward) with GEMMs:
       g = sigmoid(xn W_g^T + b_g), z = RMSNorm(r) * norm_w * g (in qkv's room), out = z W_proj^T */
    if (ex_matmul_fwd(cx, s.g, xn, P[LYR_GD_G_W], P[LYR_GD_G_B], (int)N, (int)C, (int)HD) != TK_OK)
        return LYR_EFAIL;
    if (dev) { /* merged r in dq's room, RMSNorm(r) * norm_w in dk's */
        if (ex_sigmoid_fwd(cx, s.g, s.g, N * HD) != TK_OK ||
            ex_merge_heads_fwd(cx, w.dq, s.r, B, T, d->Hm, d->Dk) != TK_OK ||
            ex_rmsnorm_fwd(cx, w.dk, s.rs, w.dq, P[LYR_GD_NORM], (int)N * d->Hm, d->Dk,
                               d->cfg.rms_eps) != TK_OK ||
            ex_rowscale(cx, qkv, w.dk, s.g, (int)(N * HD), 1) != TK_OK) /* z = y * g */
            return LYR_EFAIL;
    } else {
        lyr_gdelta_readout_z(d, s.r, s.g, s.rs, P[LYR_GD_NORM], qkv, B, T, 1);
    }
    if (ex_matmul_fwd(cx, out, qkv, P[LYR_GD_PROJ], NULL, (int)N, (int)HD, (int)C) != TK_OK)
        return LYR_EFAIL;
    if (stats) {
        double sg = 0, sb = 0;
        size_t n = N * (size_t)d->Hm;
        if (lyr__gd_sum(cx, s.gates, n, d->cfg.gate_is_log, &sg) != LYR_OK ||
            lyr__gd_sum(cx, s.beta, n, 0, &sb) != LYR_OK)
            return LYR_EFAIL;
        stats->gamma_mean = (float)(sg / (double)n);
        stats->beta_mean = (float)(sb / (double)n);
    }
    return LYR_OK;
}

/* both forms' checks, then the forward (qkv_shared: q, k, v given; else none read) */
static int lyr__gdelta_fwd_h(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, const float *xn,
                             const float *q, const float *k, const float *v, float *out, float *saved, float *work,
                             int B, int T, lyr_gdelta_stats *stats, void *hhdr)
{
    const float *Pl[LYR_GD_NPARAMS];
    int sh;
    if (!cx || lyr_gdelta_validate(d) != LYR_OK) return LYR_EINVAL;
    sh = d->qkv_shared != 0;
    if (!lyr__ptrs_ok((const void *const *)P, LYR_GD_NPARAMS - sh) || !xn || (sh && (!q || !k || !v)) || !out ||
        !saved || !work || !lyr__gd_bt_ok(d, B, T))
        return LYR_EINVAL;
    if (!sh) return lyr__gd_fwd(cx, d, P, xn, NULL, NULL, NULL, out, saved, work, B, T, stats, hhdr);
    lyr__gd_pl(d, P, Pl);
    return lyr__gd_fwd(cx, d, Pl, xn, q, k, v, out, saved, work, B, T, stats, hhdr);
}

int lyr_gdelta_fwd(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, const float *xn,
                   float *out, float *saved, float *work, int B, int T, int train,
                   uint64_t seed, lyr_gdelta_stats *stats)
{
    (void)train;
    (void)seed;
    if (d && d->qkv_shared) return LYR_EINVAL;
    return lyr__gdelta_fwd_h(cx, d, P, xn, NULL, NULL, NULL, out, saved, work, B, T, stats, NULL);
}

int lyr_gdelta_fwd_qkv(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P,
                       const float *xn, const float *q, const float *k, const float *v, float *out,
                       float *saved, float *work, int B, int T, int train, uint64_t seed,
                       lyr_gdelta_stats *stats)
{
    (void)train;
    (void)seed;
    if (!d || !d->qkv_shared) return LYR_EINVAL;
    return lyr__gdelta_fwd_h(cx, d, P, xn, q, k, v, out, saved, work, B, T, stats, NULL);
}

/* the backward of both forms: with qkv_shared the gradients of q, k, v go to dqo, dko, dvo
   (+=, each may be NULL) instead of qkv.weight. P, G indexed by LYR_GD_*. */
static int lyr__gd_bwd(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, float *const *G,
                       const float *dout, float *dxn, float *dqo, float *dko, float *dvo, const float *saved,
                       float *work, int B, int T, const void *hhdr)
{
    lyr__gd_saved s;
    lyr__gd_work w;
    gd_saved gs;
    size_t N, HD, C, Hm;
    int rc, dev = 0;
    dev = cx->device;
    if (dev && d->cfg.gate_is_log) return LYR_EINVAL;
    N = (size_t)B * T;
    Hm = (size_t)d->Hm;
    HD = Hm * d->Dk;
    C = (size_t)d->C;
    lyr__gd_carve(d, (float *)saved, B, T, &s); /* read-only use below */
    if (hhdr) /* the forward's host copy (lyr__gd_fwd) */
        memcpy(&gs, hhdr, sizeof gs);
    else if (ex_to_host(cx, &gs, s.hdr, sizeof gs) != TK_OK)
        return LYR_EFAIL;
    /* the saved state must be this buffer's, from a forward of these sizes (and side) */
    if (gs.mem != (void *)s.mem || gs.B != B || gs.T != T || gs.H != d->Hm || gs.Dk != d->Dk ||
        ((gs.algo & LYR__GD_SAVED_CUDA) != 0) != (dev != 0))
        return LYR_EINVAL;
    lyr__gd_work_carve(work, N, HD, Hm, &w);
    /* readout backward with GEMMs. CPU: z, dz, dgate in dqkv's room (free until the end);
       device: z in dqkv's room, dz in dq's, merged r in dv's, y = RMSNorm(r) * norm_w in
       dk's */
    {
        float *z = w.dqkv, *dz = dev ? w.dq : w.dqkv + N * HD;
        const float *nw = P[LYR_GD_NORM];
        if (dev) {
            if (ex_merge_heads_fwd(cx, w.dv, s.r, B, T, d->Hm, d->Dk) != TK_OK ||
                ex_rmsnorm_fwd(cx, w.dk, NULL, w.dv, nw, (int)N * d->Hm, d->Dk,
                                   d->cfg.rms_eps) != TK_OK ||
                ex_rowscale(cx, z, w.dk, s.g, (int)(N * HD), 1) != TK_OK)
                return LYR_EFAIL;
        } else {
            lyr_gdelta_readout_z(d, s.r, s.g, s.rs, nw, z, B, T, 0);
        }
        if (ex_matmul_bwd(cx, NULL, G[LYR_GD_PROJ], NULL, dout, z, NULL, (int)N,
                               (int)HD, (int)C) != TK_OK ||
            lyr__sgemm(cx, 0, 0, (int)N, (int)HD, (int)C, dout, (int)C, P[LYR_GD_PROJ], (int)HD,
                       dz, (int)HD) != TK_OK)
            return LYR_EFAIL;
        if (dev) {
            /* dgate = dz y g (1 - g) (in dk's room, after t = dz y in z's); then
               dy = dz g (in z's room) through the RMSNorm into dr */
            if (ex_rowscale(cx, z, dz, w.dk, (int)(N * HD), 1) != TK_OK ||
                ex_zero(cx, w.dk, N * HD * sizeof(float)) != TK_OK ||
                ex_sigmoid_bwd(cx, w.dk, s.g, z, N * HD) != TK_OK ||
                ex_matmul_bwd(cx, dxn, G[LYR_GD_G_W], G[LYR_GD_G_B], w.dk, s.xn, P[LYR_GD_G_W],
                                   (int)N, (int)C, (int)HD) != TK_OK ||
                ex_rowscale(cx, z, dz, s.g, (int)(N * HD), 1) != TK_OK ||
                ex_zero(cx, w.dk, N * HD * sizeof(float)) != TK_OK ||
                ex_rmsnorm_bwd(cx, w.dk, G[LYR_GD_NORM], z, w.dv, nw, s.rs, (int)N * d->Hm,
                                    d->Dk) != TK_OK ||
                ex_zero(cx, w.dr, N * HD * sizeof(float)) != TK_OK ||
                ex_merge_heads_bwd(cx, w.dr, w.dk, B, T, d->Hm, d->Dk) != TK_OK)
                return LYR_EFAIL;
        } else {
            float *dgp = w.dqkv + 2 * N * HD, *dr = w.dr;
            float *dnw = G[LYR_GD_NORM];
            int Dk = d->Dk, Hmi = d->Hm, j;
            /* dnorm_w (Dk) += sum over tokens and heads of dz g yhat (fixed order) */
            for (j = 0; j < Dk; j++) {
                double acc = 0;
                size_t n2;
                int h;
                for (n2 = 0; n2 < N; n2++) {
                    size_t b = n2 / (size_t)T, t = n2 % (size_t)T;
                    for (h = 0; h < Hmi; h++) {
                        size_t o = (n2 * Hmi + h) * Dk + j;
                        float yh = s.r[((b * Hmi + h) * (size_t)T + t) * Dk + j] * s.rs[n2 * Hmi + h];
                        acc += (double)dz[o] * s.g[o] * yh;
                    }
                }
                dnw[j] += (float)acc;
            }
            LYR__OMP(omp parallel for schedule(static) if(N * HD > LYR__PAR_MIN))
            for (j = 0; j < (int)N; j++) {
                size_t b = (size_t)j / (size_t)T, t = (size_t)j % (size_t)T;
                int h, i;
                for (h = 0; h < Hmi; h++) {
                    size_t o = ((size_t)j * Hmi + h) * Dk, ro = ((b * Hmi + h) * (size_t)T + t) * Dk;
                    const float *rr = s.r + ro, *gg = s.g + o, *dzz = dz + o;
                    float *dgg = dgp + o, *drr = dr + ro, rsv = s.rs[(size_t)j * Hmi + h];
                    double m = 0;
                    for (i = 0; i < Dk; i++) {
                        double yh = (double)rr[i] * rsv, dyh = (double)dzz[i] * gg[i] * nw[i];
                        dgg[i] = (float)((double)dzz[i] * yh * nw[i] * gg[i] * (1.0 - gg[i]));
                        m += dyh * yh;
                    }
                    m /= Dk;
                    for (i = 0; i < Dk; i++) { /* RMSNorm backward: rs (dyh - yh mean(dyh yh)) */
                        double yh = (double)rr[i] * rsv, dyh = (double)dzz[i] * gg[i] * nw[i];
                        drr[i] = (float)(rsv * (dyh - yh * m));
                    }
                }
            }
            if (ex_matmul_bwd(cx, dxn, G[LYR_GD_G_W], G[LYR_GD_G_B], dgp, s.xn, P[LYR_GD_G_W],
                                   (int)N, (int)C, (int)HD) != TK_OK)
                return LYR_EFAIL;
        }
    }
    if (ex_zero(cx, w.dq, N * HD * sizeof(float)) != TK_OK ||
        ex_zero(cx, w.dk, N * HD * sizeof(float)) != TK_OK ||
        ex_zero(cx, w.dv, N * HD * sizeof(float)) != TK_OK ||
        ex_zero(cx, w.dg, N * Hm * sizeof(float)) != TK_OK ||
        ex_zero(cx, w.db, N * Hm * sizeof(float)) != TK_OK)
        return LYR_EFAIL;
    rc = ex_gd_bwd(cx, &d->cfg, &gs, w.dq, w.dk, w.dv, w.dg, w.db, NULL, w.dr, NULL, s.q, s.k, s.v,
                     s.gates, s.beta, NULL, B, d->Hm, T, d->Dk, d->Dk, w.ws);
    if (rc != GD_OK) return rc == GD_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
    if (dev) { /* scratch: dqkv's room and dr's (free now) */
        if ((rc = lyr__gd_gates_ops_bwd(cx, d, P, G, dxn, w.dg, w.db, s.gates, s.beta, s.xn, w.dqkv,
                                        w.dr, B, T)) != LYR_OK)
            return rc;
    } else {
        rc = gd_gates_backward(&d->cfg, dxn, G[LYR_GD_W_GAMMA], G[LYR_GD_B_GAMMA],
                               G[LYR_GD_W_BETA], G[LYR_GD_B_BETA], w.dg, w.db, s.xn,
                               P[LYR_GD_W_GAMMA], P[LYR_GD_B_GAMMA], P[LYR_GD_W_BETA],
                               P[LYR_GD_B_BETA], B, T, (int)C, d->Hm);
        if (rc != GD_OK) return rc == GD_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
    }
    if (d->qkv_shared) {
        if (dqo && ex_residual_fwd(cx, dqo, dqo, w.dq, N * HD) != TK_OK) return LYR_EFAIL;
        if ((dko && (rc = lyr__gd_reduce(cx, d, dko, w.dk, B, T)) != LYR_OK) ||
            (dvo && (rc = lyr__gd_reduce(cx, d, dvo, w.dv, B, T)) != LYR_OK))
            return rc;
        return LYR_OK;
    }
    if (ex_zero(cx, w.dqkv, 3 * N * HD * sizeof(float)) != TK_OK ||
        ex_split_heads_bwd(cx, w.dqkv, w.dq, w.dk, w.dv, B, T, d->Hm, d->Dk) != TK_OK ||
        ex_matmul_bwd(cx, dxn, G[LYR_GD_QKV], NULL, w.dqkv, s.xn, P[LYR_GD_QKV], (int)N, (int)C,
                           (int)(3 * HD)) != TK_OK)
        return LYR_EFAIL;
    return LYR_OK;
}

/* both forms' checks, then the backward (qkv_shared: dq, dk, dv may be given; else none) */
static int lyr__gdelta_bwd_h(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, float *const *G,
                             const float *dout, float *dxn, float *dq, float *dk, float *dv, const float *saved,
                             float *work, int B, int T, const void *hhdr)
{
    const float *Pl[LYR_GD_NPARAMS];
    float *Gl[LYR_GD_NPARAMS];
    int sh;
    if (!cx || lyr_gdelta_validate(d) != LYR_OK) return LYR_EINVAL;
    sh = d->qkv_shared != 0;
    if (!lyr__ptrs_ok((const void *const *)P, LYR_GD_NPARAMS - sh) ||
        !lyr__ptrs_ok((const void *const *)G, LYR_GD_NPARAMS - sh) || !dout || !saved || !work ||
        !lyr__gd_bt_ok(d, B, T))
        return LYR_EINVAL;
    if (!sh) return lyr__gd_bwd(cx, d, P, G, dout, dxn, NULL, NULL, NULL, saved, work, B, T, hhdr);
    lyr__gd_pl(d, P, Pl);
    lyr__gd_gl(d, G, Gl);
    return lyr__gd_bwd(cx, d, Pl, Gl, dout, dxn, dq, dk, dv, saved, work, B, T, hhdr);
}

int lyr_gdelta_bwd(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, float *const *G,
                   const float *dout, float *dxn, const float *saved, float *work,
                   int B, int T)
{
    if (d && d->qkv_shared) return LYR_EINVAL;
    return lyr__gdelta_bwd_h(cx, d, P, G, dout, dxn, NULL, NULL, NULL, saved, work, B, T, NULL);
}

int lyr_gdelta_bwd_qkv(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P,
                       float *const *G, const float *dout, float *dxn, float *dq, float *dk,
                       float *dv, const float *saved, float *work, int B, int T)
{
    if (!d || !d->qkv_shared) return LYR_EINVAL;
    return lyr__gdelta_bwd_h(cx, d, P, G, dout, dxn, dq, dk, dv, saved, work, B, T, NULL);
}

/* =================================================================== MLP FFN */
/* The MLP runs the activation of its FFN-table row (lyr_ffn, lyr__ffns at the end): the
   first projection by the row's `in`, the row's hooks, the output projection. */

/* the MLP row of act, or NULL */
static const lyr_ffn *lyr__mlp_row(int act)
{
    return lyr_ffn_is_mlp(act) ? lyr_ffn_get(act) : NULL;
}

int lyr_mlp_validate(const lyr_mlp_dims *d)
{
    const lyr_ffn *e;
    if (!d) return LYR_EINVAL;
    if (d->C < 1 || d->F < 1 || d->C > (1 << 20) || d->F > (1 << 22)) return LYR_EINVAL;
    if (!(e = lyr__mlp_row(d->act))) return LYR_EINVAL;
    if (!lyr__finite(d->std) || d->std < 0 || !lyr__finite(d->proj_std) || d->proj_std < 0)
        return LYR_EINVAL;
    if (!lyr__finite(d->gain) || d->gain < 0) return LYR_EINVAL;
    if (!e->gain && d->gain != 0.0f && d->gain != 1.0f) return LYR_EINVAL;
    return LYR_OK;
}

/* the gain a when it scales (not 0 or 1), else 0: the plain path runs */
static float lyr__mlp_gain(const lyr_mlp_dims *d)
{
    return lyr__mlp_row(d->act)->gain && d->gain != 0.0f && d->gain != 1.0f ? d->gain : 0.0f;
}

/* hidden width of the first projection: F (plain) or 2F (the stacked [W1 | W3]) */
static size_t lyr__mlp_hw(const lyr_mlp_dims *d)
{
    return lyr__mlp_row(d->act)->in != LYR_FFN_IN_PLAIN ? 2 * (size_t)d->F : (size_t)d->F;
}

static int lyr__mlp_bt_ok(const lyr_mlp_dims *d, int B, int T)
{
    return lyr__bt_ok(B, T, (double)lyr__mlp_hw(d) + (double)d->C);
}

int lyr_mlp_params(const lyr_mlp_dims *d, lyr_pspec *out, int cap)
{
    int n = 0, bias;
    if (lyr_mlp_validate(d) != LYR_OK || !out) return LYR_EINVAL;
    bias = lyr__mlp_row(d->act)->bias;
    if (cap < (bias ? 4 : 2)) return LYR_EINVAL;
    lyr__spec(&out[n], "fc.weight", 1, 2, (int)lyr__mlp_hw(d), d->C, 0);
    out[n].init = LYR_INIT_NORMAL;
    out[n++].init_arg = d->std;
    if (bias) {
        lyr__spec(&out[n], "fc.bias", 0, 1, d->F, 0, 0);
        out[n++].init = LYR_INIT_ZERO;
    }
    lyr__spec(&out[n], "proj.weight", 1, 2, d->C, d->F, 0);
    out[n].init = LYR_INIT_NORMAL;
    out[n++].init_arg = d->proj_std;
    if (bias) {
        lyr__spec(&out[n], "proj.bias", 0, 1, d->C, 0, 0);
        out[n++].init = LYR_INIT_ZERO;
    }
    return n;
}

/* P[i] from the rules of lyr_mlp_params, one draw sequence from rng (the model instead
   draws each tensor from its own stream, by the same rules) */
int lyr_mlp_init(const lyr_mlp_dims *d, float *const *P, tk_rng *rng, float init_std)
{
    lyr_pspec sp[4];
    int n = lyr_mlp_params(d, sp, 4), i;
    (void)init_std;
    if (n < 0 || !P || !rng || !lyr__ptrs_ok((const void *const *)P, n)) return LYR_EINVAL;
    for (i = 0; i < n; i++) {
        size_t k = lyr_pspec_numel(&sp[i]);
        int rc = sp[i].init == LYR_INIT_NORMAL ? tk_init_normal(P[i], k, 0.0f, sp[i].init_arg, rng)
                                               : tk_init_constant(P[i], k, 0.0f);
        if (rc != TK_OK) return LYR_EFAIL;
    }
    return LYR_OK;
}

size_t lyr_mlp_saved_floats(const lyr_mlp_dims *d, int B, int T)
{
    size_t N;
    if (lyr_mlp_validate(d) != LYR_OK || !lyr__mlp_bt_ok(d, B, T)) return 0;
    N = (size_t)B * T;
    return lyr__al(N * lyr__mlp_hw(d)) + lyr__al(N * (size_t)d->F); /* h, act(h) */
}

size_t lyr_mlp_work_floats(const lyr_mlp_dims *d, int B, int T)
{
    return lyr_mlp_saved_floats(d, B, T); /* dh, d act(h) */
}

size_t lyr_mlp_act_offset(const lyr_mlp_dims *d, int B, int T)
{
    if (lyr_mlp_validate(d) != LYR_OK || !lyr__mlp_bt_ok(d, B, T)) return 0;
    return lyr__al((size_t)B * T * lyr__mlp_hw(d));
}

int lyr_mlp_fwd(const ex_ctx *cx, const lyr_mlp_dims *d, const float *const *P, const float *x,
                float *out, float *saved, int B, int T)
{
    const lyr_ffn *e;
    size_t N, hw;
    int n, C, F, rc;
    float *h, *hg, a;
    if (!cx || lyr_mlp_validate(d) != LYR_OK || !lyr__mlp_bt_ok(d, B, T) || !x || !out || !saved)
        return LYR_EINVAL;
    e = lyr__mlp_row(d->act);
    n = e->bias ? 4 : 2;
    if (!lyr__ptrs_ok((const void *const *)P, n)) return LYR_EINVAL;
    N = (size_t)B * T;
    C = d->C;
    F = d->F;
    hw = lyr__mlp_hw(d);
    a = lyr__mlp_gain(d);
    h = saved;
    hg = saved + lyr__al(N * hw);
    if (e->in == LYR_FFN_IN_BLOCKS) { /* a = x W1^T, b = x W3^T: contiguous (N,F) blocks */
        rc = ex_matmul_fwd(cx, h, x, P[0], NULL, (int)N, C, F);
        if (!rc) rc = ex_matmul_fwd(cx, h + N * (size_t)F, x, P[0] + (size_t)F * C, NULL, (int)N, C, F);
    } else {
        rc = ex_matmul_fwd(cx, h, x, P[0], e->bias ? P[1] : NULL, (int)N, C, (int)hw);
    }
    if (!rc && a != 0.0f) rc = ex_scale(cx, h, h, a, N * hw); /* saved: a u */
    if (!rc) rc = e->act_fwd(cx, hg, h, (int)N, F);
    if (!rc) rc = ex_matmul_fwd(cx, out, hg, P[e->bias ? 2 : 1], e->bias ? P[3] : NULL, (int)N, F, C);
    return rc ? LYR_EFAIL : LYR_OK;
}

int lyr_mlp_bwd(const ex_ctx *cx, const lyr_mlp_dims *d, const float *const *P, float *const *G,
                const float *x, const float *dout, float *dx, const float *saved, float *work,
                int B, int T)
{
    const lyr_ffn *e;
    size_t N, hw;
    int n, C, F, rc, bias;
    const float *h, *hg;
    float *dh, *dhg;
    if (!cx || lyr_mlp_validate(d) != LYR_OK || !lyr__mlp_bt_ok(d, B, T) || !x || !dout || !saved ||
        !work)
        return LYR_EINVAL;
    e = lyr__mlp_row(d->act);
    bias = e->bias;
    n = bias ? 4 : 2;
    if (!lyr__ptrs_ok((const void *const *)P, n) || !lyr__ptrs_ok((const void *const *)G, n))
        return LYR_EINVAL;
    N = (size_t)B * T;
    C = d->C;
    F = d->F;
    hw = lyr__mlp_hw(d);
    h = saved;
    hg = saved + lyr__al(N * hw);
    dh = work;
    dhg = work + lyr__al(N * hw);
    /* d act(h) = dout W2 (written); dW2, db2 += */
    rc = ex_zero(cx, dhg, sizeof(float) * N * (size_t)F);
    if (!rc) rc = ex_matmul_bwd(cx, dhg, G[bias ? 2 : 1], bias ? G[3] : NULL, dout, hg, P[bias ? 2 : 1], (int)N,
                                F, C);
    if (!rc) rc = ex_zero(cx, dh, sizeof(float) * N * hw);
    if (!rc) rc = e->act_bwd(cx, dh, h, dhg, (int)N, F);
    /* the gain: h holds a u, so dh = act'(a u) d act; d u = a dh */
    if (!rc && lyr__mlp_gain(d) != 0.0f) rc = ex_scale(cx, dh, dh, lyr__mlp_gain(d), N * hw);
    /* dx += dh W1; dW1, db1 += */
    if (e->in == LYR_FFN_IN_BLOCKS) {
        size_t nf = N * (size_t)F, fc = (size_t)F * C;
        if (!rc) rc = ex_matmul_bwd(cx, dx, G[0], NULL, dh, x, P[0], (int)N, C, F);
        if (!rc) rc = ex_matmul_bwd(cx, dx, G[0] + fc, NULL, dh + nf, x, P[0] + fc, (int)N, C, F);
    } else if (!rc) {
        rc = ex_matmul_bwd(cx, dx, G[0], bias ? G[1] : NULL, dh, x, P[0], (int)N, C, (int)hw);
    }
    return rc ? LYR_EFAIL : LYR_OK;
}

/* =================================================================== causal convolution */
static int lyr__conv_ok(const lyr_conv_dims *d) { return d && d->C >= 1 && d->C <= (1 << 20) && d->K >= 1 && d->K <= 64; }

int lyr_conv_params(const lyr_conv_dims *d, lyr_pspec *out, int cap)
{
    if (!lyr__conv_ok(d) || !out || cap < 1) return LYR_EINVAL;
    memset(out, 0, sizeof *out);
    snprintf(out[0].suffix, sizeof out[0].suffix, "weight");
    out[0].ndim = 2;
    out[0].shape[0] = d->K;
    out[0].shape[1] = d->C;
    out[0].decay = 0;
    out[0].init = LYR_INIT_ZERO;
    return 1;
}

int lyr_conv_fwd(const ex_ctx *cx, const lyr_conv_dims *d, const float *const *P, const float *x, float *out,
                 int B, int T)
{
    int rc;
    if (!cx || !lyr__conv_ok(d) || !lyr__bt_ok(B, T, (double)d->C) || !P || !P[0] || !x || !out) return LYR_EINVAL;
    rc = ex_copy(cx, out, x, sizeof(float) * (size_t)B * T * d->C);
    if (!rc) rc = ex_causal_dwconv_fwd(cx, out, x, P[0], B, T, d->C, d->K, 1);
    return rc ? LYR_EFAIL : LYR_OK;
}

int lyr_conv_bwd(const ex_ctx *cx, const lyr_conv_dims *d, const float *const *P, float *const *G, const float *x,
                 const float *dout, float *dx, int B, int T)
{
    int rc;
    if (!cx || !lyr__conv_ok(d) || !lyr__bt_ok(B, T, (double)d->C) || !P || !P[0] || !G || !G[0] || !x || !dout ||
        !dx)
        return LYR_EINVAL;
    rc = ex_residual_fwd(cx, dx, dx, dout, (size_t)B * T * d->C); /* the identity path */
    if (!rc) rc = ex_causal_dwconv_bwd(cx, dx, G[0], dout, x, P[0], B, T, d->C, d->K);
    return rc ? LYR_EFAIL : LYR_OK;
}

/* =================================================================== LFM2 gated short convolution */
int lyr_lfm_validate(const lyr_lfm_dims *d)
{
    if (!d) return LYR_EINVAL;
    if (d->C < 1 || d->C > (1 << 20) || d->K < 1 || d->K > 64) return LYR_EINVAL;
    if (d->bias != 0 && d->bias != 1) return LYR_EINVAL;
    if (!lyr__finite(d->std) || d->std < 0 || !lyr__finite(d->proj_std) || d->proj_std < 0) return LYR_EINVAL;
    return LYR_OK;
}

/* B*T*C must fit tensor.h's int row counts (the elementwise products run as (N C, 1) rows) */
static int lyr__lfm_bt_ok(const lyr_lfm_dims *d, int B, int T)
{
    return lyr__bt_ok(B, T, 4.0 * (double)d->C) && (double)B * T * d->C <= 2147483647.0 / 4.0;
}

int lyr_lfm_params(const lyr_lfm_dims *d, lyr_pspec *out, int cap)
{
    int n = 0;
    if (lyr_lfm_validate(d) != LYR_OK || !out || cap < (d->bias ? 5 : 3)) return LYR_EINVAL;
    lyr__spec(&out[n], "in_proj.weight", 1, 2, 3 * d->C, d->C, 0);
    out[n].init = LYR_INIT_NORMAL;
    out[n++].init_arg = d->std;
    if (d->bias) {
        lyr__spec(&out[n], "in_proj.bias", 0, 1, 3 * d->C, 0, 0);
        out[n++].init = LYR_INIT_ZERO;
    }
    lyr__spec(&out[n], "conv.weight", 0, 2, d->K, d->C, 0);
    out[n].init = LYR_INIT_UNIFORM;
    out[n++].init_arg = (float)(1.0 / sqrt((double)d->K));
    lyr__spec(&out[n], "out_proj.weight", 1, 2, d->C, d->C, 0);
    out[n].init = LYR_INIT_NORMAL;
    out[n++].init_arg = d->proj_std;
    if (d->bias) {
        lyr__spec(&out[n], "out_proj.bias", 0, 1, d->C, 0, 0);
        out[n++].init = LYR_INIT_ZERO;
    }
    return n;
}

/* P[i] from the rules of lyr_lfm_params, one draw sequence from rng */
int lyr_lfm_init(const lyr_lfm_dims *d, float *const *P, tk_rng *rng, float init_std)
{
    lyr_pspec sp[5];
    int n = lyr_lfm_params(d, sp, 5), i;
    (void)init_std;
    if (n < 0 || !P || !rng || !lyr__ptrs_ok((const void *const *)P, n)) return LYR_EINVAL;
    for (i = 0; i < n; i++) {
        size_t k = lyr_pspec_numel(&sp[i]);
        float a = sp[i].init_arg;
        int rc = sp[i].init == LYR_INIT_NORMAL    ? tk_init_normal(P[i], k, 0.0f, a, rng)
                 : sp[i].init == LYR_INIT_UNIFORM ? tk_init_uniform(P[i], k, -a, a, rng)
                                                  : tk_init_constant(P[i], k, 0.0f);
        if (rc != TK_OK) return LYR_EFAIL;
    }
    return LYR_OK;
}

size_t lyr_lfm_saved_floats(const lyr_lfm_dims *d, int B, int T)
{
    if (lyr_lfm_validate(d) != LYR_OK || !lyr__lfm_bt_ok(d, B, T)) return 0;
    return 4 * lyr__al((size_t)B * T * d->C); /* B, C', x, z */
}

size_t lyr_lfm_work_floats(const lyr_lfm_dims *d, int B, int T)
{
    return lyr_lfm_saved_floats(d, B, T); /* four (N,C) scratch rows */
}

/* the tensors of P in order (bias or not) */
typedef struct lyr__lfm_p {
    const float *win, *bin, *wc, *wout, *bout;
} lyr__lfm_p;

static lyr__lfm_p lyr__lfm_unpack(const lyr_lfm_dims *d, const float *const *P)
{
    lyr__lfm_p p;
    int i = 0;
    p.win = P[i++];
    p.bin = d->bias ? P[i++] : NULL;
    p.wc = P[i++];
    p.wout = P[i++];
    p.bout = d->bias ? P[i] : NULL;
    return p;
}

int lyr_lfm_fwd(const ex_ctx *cx, const lyr_lfm_dims *d, const float *const *P, const float *xn,
                float *out, float *saved, float *work, int B, int T)
{
    size_t N, NC, S;
    int C, s, rc = 0;
    lyr__lfm_p p;
    const float *sb, *sc, *sx;
    float *sz, *y, *o;
    if (!cx || lyr_lfm_validate(d) != LYR_OK || !lyr__lfm_bt_ok(d, B, T) || !xn || !out || !saved || !work)
        return LYR_EINVAL;
    if (!lyr__ptrs_ok((const void *const *)P, d->bias ? 5 : 3)) return LYR_EINVAL;
    p = lyr__lfm_unpack(d, P);
    C = d->C;
    N = (size_t)B * T;
    NC = N * (size_t)C;
    S = lyr__al(NC);
    sb = saved;
    sc = saved + S;
    sx = saved + 2 * S;
    sz = saved + 3 * S;
    y = work;
    o = work + S;
    /* the three streams, one GEMM per row block of W_in: B, C', x */
    for (s = 0; s < 3 && !rc; s++)
        rc = ex_matmul_fwd(cx, saved + (size_t)s * S, xn, p.win + (size_t)s * C * C, p.bin ? p.bin + (size_t)s * C : NULL,
                           (int)N, C, C);
    if (!rc) rc = ex_rowscale(cx, y, sx, sb, (int)NC, 1);                      /* y = B x */
    if (!rc) rc = ex_causal_dwconv_fwd(cx, sz, y, p.wc, B, T, C, d->K, 0);     /* z = conv(y) */
    if (!rc) rc = ex_rowscale(cx, o, sz, sc, (int)NC, 1);                      /* o = C' z */
    if (!rc) rc = ex_matmul_fwd(cx, out, o, p.wout, p.bout, (int)N, C, C);     /* out = o W_out^T + b */
    return rc ? LYR_EFAIL : LYR_OK;
}

int lyr_lfm_bwd(const ex_ctx *cx, const lyr_lfm_dims *d, const float *const *P, float *const *G,
                const float *xn, const float *dout, float *dxn, const float *saved, float *work,
                int B, int T)
{
    size_t N, NC, S;
    int C, rc, np;
    lyr__lfm_p p;
    float *gw[5], *gin_b, *gout_b;
    const float *sb, *sc, *sx, *sz;
    float *w0, *w1, *w2, *w3;
    if (!cx || lyr_lfm_validate(d) != LYR_OK || !lyr__lfm_bt_ok(d, B, T) || !xn || !dout || !saved || !work)
        return LYR_EINVAL;
    np = d->bias ? 5 : 3;
    if (!lyr__ptrs_ok((const void *const *)P, np) || !lyr__ptrs_ok((const void *const *)G, np)) return LYR_EINVAL;
    p = lyr__lfm_unpack(d, P);
    {
        int i;
        for (i = 0; i < np; i++) gw[i] = G[i];
    }
    gin_b = d->bias ? gw[1] : NULL;
    gout_b = d->bias ? gw[4] : NULL;
    C = d->C;
    N = (size_t)B * T;
    NC = N * (size_t)C;
    S = lyr__al(NC);
    sb = saved;
    sc = saved + S;
    sx = saved + 2 * S;
    sz = saved + 3 * S;
    w0 = work;
    w1 = work + S;
    w2 = work + 2 * S;
    w3 = work + 3 * S;
    /* out = o W_out^T + b: do (w1) = dout W_out; dW_out, db_out += (o recomputed in w0) */
    rc = ex_rowscale(cx, w0, sz, sc, (int)NC, 1);
    if (!rc) rc = ex_zero(cx, w1, sizeof(float) * NC);
    if (!rc) rc = ex_matmul_bwd(cx, w1, gw[d->bias ? 3 : 2], gout_b, dout, w0, p.wout, (int)N, C, C);
    /* o = C' z: dC' (w0) = do z, dz (w2) = do C' */
    if (!rc) rc = ex_rowscale(cx, w0, w1, sz, (int)NC, 1);
    if (!rc) rc = ex_rowscale(cx, w2, w1, sc, (int)NC, 1);
    /* z = conv(y): dy (w3) += conv^T dz, dw_conv += (y recomputed in w1) */
    if (!rc) rc = ex_rowscale(cx, w1, sx, sb, (int)NC, 1);
    if (!rc) rc = ex_zero(cx, w3, sizeof(float) * NC);
    if (!rc) rc = ex_causal_dwconv_bwd(cx, w3, gw[d->bias ? 2 : 1], w2, w1, p.wc, B, T, C, d->K);
    /* y = B x: dB (w1) = dy x, dx (w2) = dy B */
    if (!rc) rc = ex_rowscale(cx, w1, w3, sx, (int)NC, 1);
    if (!rc) rc = ex_rowscale(cx, w2, w3, sb, (int)NC, 1);
    /* the streams' GEMMs: dxn +=, dW_in and db_in row blocks += (B, C', x) */
    if (!rc) rc = ex_matmul_bwd(cx, dxn, gw[0], gin_b, w1, xn, p.win, (int)N, C, C);
    if (!rc) rc = ex_matmul_bwd(cx, dxn, gw[0] + (size_t)C * C, gin_b ? gin_b + C : NULL, w0, xn, p.win + (size_t)C * C,
                                (int)N, C, C);
    if (!rc) rc = ex_matmul_bwd(cx, dxn, gw[0] + 2 * (size_t)C * C, gin_b ? gin_b + 2 * C : NULL, w2, xn,
                                p.win + 2 * (size_t)C * C, (int)N, C, C);
    return rc ? LYR_EFAIL : LYR_OK;
}

/* =================================================================== norms */
static int lyr__norm_ok(const lyr_norm_dims *d)
{
    return d && d->C >= 1 && d->C <= (1 << 20) && (d->rms == 0 || d->rms == 1) && lyr__finite(d->eps) &&
           d->eps > 0;
}

int lyr_norm_params(const lyr_norm_dims *d, lyr_pspec *out, int cap)
{
    if (!lyr__norm_ok(d) || !out || cap < (d->rms ? 1 : 2)) return LYR_EINVAL;
    lyr__spec(&out[0], "weight", 0, 1, d->C, 0, 0);
    out[0].init = LYR_INIT_ONE;
    if (d->rms) return 1;
    lyr__spec(&out[1], "bias", 0, 1, d->C, 0, 0);
    out[1].init = LYR_INIT_ZERO;
    return 2;
}

size_t lyr_norm_saved_floats(const lyr_norm_dims *d, int B, int T)
{
    if (!lyr__norm_ok(d) || !lyr__bt_ok(B, T, (double)d->C)) return 0;
    return 2 * lyr__al((size_t)B * T); /* mean, rstd */
}

int lyr_norm_fwd(const ex_ctx *cx, const lyr_norm_dims *d, const float *const *P, const float *x,
                 float *out, float *saved, int B, int T)
{
    size_t N;
    int rc;
    if (!cx || !lyr__norm_ok(d) || !lyr__bt_ok(B, T, (double)d->C) || !x || !out || !saved ||
        !lyr__ptrs_ok((const void *const *)P, d->rms ? 1 : 2))
        return LYR_EINVAL;
    N = (size_t)B * T;
    rc = d->rms ? ex_rmsnorm_fwd(cx, out, saved + lyr__al(N), x, P[0], (int)N, d->C, d->eps)
                : ex_layernorm_fwd(cx, out, saved, saved + lyr__al(N), x, P[0], P[1], (int)N, d->C, d->eps);
    return rc ? LYR_EFAIL : LYR_OK;
}

int lyr_norm_bwd(const ex_ctx *cx, const lyr_norm_dims *d, const float *const *P, float *const *G,
                 const float *x, const float *dout, float *dx, const float *saved, int B, int T)
{
    size_t N;
    int rc, n;
    if (!cx || !lyr__norm_ok(d) || !lyr__bt_ok(B, T, (double)d->C) || !x || !dout || !dx || !saved)
        return LYR_EINVAL;
    n = d->rms ? 1 : 2;
    if (!lyr__ptrs_ok((const void *const *)P, n) || !lyr__ptrs_ok((const void *const *)G, n)) return LYR_EINVAL;
    N = (size_t)B * T;
    rc = d->rms ? ex_rmsnorm_bwd(cx, dx, G[0], dout, x, P[0], saved + lyr__al(N), (int)N, d->C)
                : ex_layernorm_bwd(cx, dx, G[0], G[1], dout, x, P[0], saved, saved + lyr__al(N), (int)N, d->C);
    return rc ? LYR_EFAIL : LYR_OK;
}

/* =================================================================== the protocol's table */
/* Adapters from the generic lyr_kind (dims as void *, arguments in lyr_io) to each kind's
   typed functions. */
static int lyr__mlp_params_v(const void *d, lyr_pspec *out, int cap) { return lyr_mlp_params((const lyr_mlp_dims *)d, out, cap); }
static int lyr__mlp_init_v(const void *d, float *const *P, tk_rng *rng, float std)
{
    return lyr_mlp_init((const lyr_mlp_dims *)d, P, rng, std);
}
static size_t lyr__mlp_saved_v(const void *d, int B, int T) { return lyr_mlp_saved_floats((const lyr_mlp_dims *)d, B, T); }
static size_t lyr__mlp_work_v(const void *d, int B, int T) { return lyr_mlp_work_floats((const lyr_mlp_dims *)d, B, T); }
static size_t lyr__no_floats_v(const void *d, int B, int T)
{
    (void)d;
    (void)B;
    (void)T;
    return 0;
}
static int lyr__mlp_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    io->stat = 0.0f;
    return lyr_mlp_fwd(cx, (const lyr_mlp_dims *)d, io->P, io->x, io->out, io->saved, io->B, io->T);
}
static int lyr__mlp_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    return lyr_mlp_bwd(cx, (const lyr_mlp_dims *)d, io->P, io->G, io->x, io->dout, io->dx, io->saved, io->work,
                       io->B, io->T);
}

static int lyr__moe_params_v(const void *d, lyr_pspec *out, int cap) { return lyr_moe_params((const lyr_moe_dims *)d, out, cap); }
static int lyr__moe_init_v(const void *d, float *const *P, tk_rng *rng, float std)
{
    return lyr_moe_init((const lyr_moe_dims *)d, P, rng, std);
}
static size_t lyr__moe_saved_v(const void *d, int B, int T) { return lyr_moe_saved_floats((const lyr_moe_dims *)d, B, T); }
static size_t lyr__moe_work_v(const void *d, int B, int T) { return lyr_moe_work_floats((const lyr_moe_dims *)d, B, T); }
static size_t lyr__moe_host_v(const void *d, int B, int T) { return lyr_moe_host_floats((const lyr_moe_dims *)d, B, T); }
static int lyr__moe_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    io->stat = 0.0f;
    return lyr_moe_fwd(cx, (const lyr_moe_dims *)d, io->P, io->x, io->mu, io->out, io->saved, io->work, io->B, io->T,
                       io->train, io->seed, io->host, &io->stat);
}
static int lyr__moe_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    return lyr_moe_bwd(cx, (const lyr_moe_dims *)d, io->P, io->G, io->dout, io->dx, io->dmu, io->saved, io->work,
                       io->B, io->T, io->host, io->coef);
}

static int lyr__polar_params_v(const void *d, lyr_pspec *out, int cap)
{
    return lyr_polar_params((const lyr_polar_dims *)d, out, cap);
}
static int lyr__polar_init_v(const void *d, float *const *P, tk_rng *rng, float std)
{
    return lyr_polar_init((const lyr_polar_dims *)d, P, rng, std);
}
static size_t lyr__polar_saved_v(const void *d, int B, int T) { return lyr_polar_saved_floats((const lyr_polar_dims *)d, B, T); }
static size_t lyr__polar_work_v(const void *d, int B, int T) { return lyr_polar_work_floats((const lyr_polar_dims *)d, B, T); }
static int lyr__polar_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    lyr_polar_stats st; /* the distractor loss only (the means: lyr_polar_fwd) */
    int rc = lyr__polar_fwd(cx, (const lyr_polar_dims *)d, io->P, io->x, io->out, io->saved, io->work, io->B,
                            io->T, io->train, io->seed, &st, 0);
    io->stat = rc == LYR_OK ? st.align_loss : 0.0f;
    return rc;
}
static int lyr__polar_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    return lyr_polar_bwd_qkv(cx, (const lyr_polar_dims *)d, io->P, io->G, io->dout, io->dx, io->saved, io->work,
                             io->B, io->T, io->gq, io->gk, io->gv);
}

static int lyr__gdelta_params_v(const void *d, lyr_pspec *out, int cap)
{
    return lyr_gdelta_params((const lyr_gdelta_dims *)d, out, cap);
}
static int lyr__gdelta_init_v(const void *d, float *const *P, tk_rng *rng, float std)
{
    return lyr_gdelta_init((const lyr_gdelta_dims *)d, P, rng, std);
}
static size_t lyr__gdelta_saved_v(const void *d, int B, int T)
{
    return lyr_gdelta_saved_floats((const lyr_gdelta_dims *)d, B, T);
}
static size_t lyr__gdelta_work_v(const void *d, int B, int T)
{
    return lyr_gdelta_work_floats((const lyr_gdelta_dims *)d, B, T);
}
/* a device model's host floats per layer: the forward's copy of the saved header, which the
   backward reads there (lyr__gd_fwd's hhdr) instead of waiting on a device read */
static size_t lyr__gdelta_host_v(const void *d, int B, int T)
{
    (void)d, (void)B, (void)T;
    return (sizeof(gd_saved) + sizeof(float) - 1) / sizeof(float);
}
static int lyr__gdelta_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    io->stat = 0.0f; /* (the gate statistics are not asked for: on a device they are host reads) */
    return lyr__gdelta_fwd_h(cx, (const lyr_gdelta_dims *)d, io->P, io->x, io->mq, io->mk, io->mv, io->out,
                             io->saved, io->work, io->B, io->T, NULL, io->host);
}
static int lyr__gdelta_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    return lyr__gdelta_bwd_h(cx, (const lyr_gdelta_dims *)d, io->P, io->G, io->dout, io->dx, io->dmq, io->dmk,
                             io->dmv, io->saved, io->work, io->B, io->T, io->host);
}

static int lyr__norm_params_v(const void *d, lyr_pspec *out, int cap) { return lyr_norm_params((const lyr_norm_dims *)d, out, cap); }
static int lyr__norm_init_v(const void *d, float *const *P, tk_rng *rng, float std)
{
    lyr_pspec sp[2];
    int n = lyr_norm_params((const lyr_norm_dims *)d, sp, 2), i;
    (void)rng;
    (void)std;
    if (n < 0 || !lyr__ptrs_ok((const void *const *)P, n)) return LYR_EINVAL;
    for (i = 0; i < n; i++)
        if (tk_init_constant(P[i], lyr_pspec_numel(&sp[i]), sp[i].init == LYR_INIT_ONE ? 1.0f : 0.0f) != TK_OK)
            return LYR_EFAIL;
    return LYR_OK;
}
static size_t lyr__norm_saved_v(const void *d, int B, int T) { return lyr_norm_saved_floats((const lyr_norm_dims *)d, B, T); }
static int lyr__norm_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    io->stat = 0.0f;
    return lyr_norm_fwd(cx, (const lyr_norm_dims *)d, io->P, io->x, io->out, io->saved, io->B, io->T);
}
static int lyr__norm_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    return lyr_norm_bwd(cx, (const lyr_norm_dims *)d, io->P, io->G, io->x, io->dout, io->dx, io->saved, io->B,
                        io->T);
}

/* init of the kinds whose tensors all follow their pspec rules (the caller applies them):
   conv, lfm, the gates, the memberships */
static int lyr__rules_init_v(const void *d, float *const *P, tk_rng *rng, float std)
{
    (void)d, (void)P, (void)rng, (void)std;
    return LYR_OK;
}

static int lyr__conv_params_v(const void *d, lyr_pspec *out, int cap) { return lyr_conv_params((const lyr_conv_dims *)d, out, cap); }
static int lyr__conv_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    io->stat = 0.0f;
    return lyr_conv_fwd(cx, (const lyr_conv_dims *)d, io->P, io->x, io->out, io->B, io->T);
}
static int lyr__conv_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    return lyr_conv_bwd(cx, (const lyr_conv_dims *)d, io->P, io->G, io->x, io->dout, io->dx, io->B, io->T);
}

static int lyr__lfm_params_v(const void *d, lyr_pspec *out, int cap) { return lyr_lfm_params((const lyr_lfm_dims *)d, out, cap); }
static size_t lyr__lfm_saved_v(const void *d, int B, int T) { return lyr_lfm_saved_floats((const lyr_lfm_dims *)d, B, T); }
static size_t lyr__lfm_work_v(const void *d, int B, int T) { return lyr_lfm_work_floats((const lyr_lfm_dims *)d, B, T); }
static int lyr__lfm_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    io->stat = 0.0f;
    return lyr_lfm_fwd(cx, (const lyr_lfm_dims *)d, io->P, io->x, io->out, io->saved, io->work, io->B, io->T);
}
static int lyr__lfm_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    return lyr_lfm_bwd(cx, (const lyr_lfm_dims *)d, io->P, io->G, io->x, io->dout, io->dx, io->saved, io->work, io->B,
                       io->T);
}

/* =================================================================== the membership gates */
static int lyr__gate_ok(const lyr_gate_dims *d, int vg)
{
    return d && d->R >= 1 && d->R <= (1 << 16) && (!vg || (d->C >= 1 && d->C <= (1 << 20) && d->H >= 1 &&
                                                          d->H <= (1 << 16)));
}
static int lyr__gate_spec(const lyr_gate_dims *d, lyr_pspec *out, int cap, int rows, const char *suffix)
{
    if (!out || cap < 1) return LYR_EINVAL;
    memset(out, 0, sizeof *out);
    snprintf(out[0].suffix, sizeof out[0].suffix, "%s", suffix);
    out[0].ndim = 2;
    out[0].shape[0] = rows;
    out[0].shape[1] = d->R;
    out[0].decay = 0;
    out[0].init = LYR_INIT_UNIFORM;
    out[0].init_arg = 1.0f / sqrtf((float)d->R);
    return 1;
}
static int lyr__rg_params_v(const void *dv, lyr_pspec *out, int cap)
{
    const lyr_gate_dims *d = (const lyr_gate_dims *)dv;
    return lyr__gate_ok(d, 0) ? lyr__gate_spec(d, out, cap, 1, "weight") : LYR_EINVAL;
}
static int lyr__vg_params_v(const void *dv, lyr_pspec *out, int cap)
{
    const lyr_gate_dims *d = (const lyr_gate_dims *)dv;
    return lyr__gate_ok(d, 1) ? lyr__gate_spec(d, out, cap, d->H, "value_gamma.weight") : LYR_EINVAL;
}
static size_t lyr__rg_floats_v(const void *d, int B, int T)
{
    (void)d;
    return (size_t)B * T;
}
/* the value gate's saved and work floats alike: N (H + 1) */
static size_t lyr__vg_floats_v(const void *d, int B, int T) { return (size_t)B * T * (((const lyr_gate_dims *)d)->H + 1); }
static int lyr__rg_fwd_v(const ex_ctx *cx, const void *dv, lyr_io *io)
{
    const lyr_gate_dims *d = (const lyr_gate_dims *)dv;
    const size_t N = (size_t)io->B * io->T;
    int rc;
    io->stat = 0.0f;
    if (!cx || !lyr__gate_ok(d, 0) || !lyr__bt_ok(io->B, io->T, (double)d->R) || !io->P || !io->P[0] || !io->mu ||
        !io->saved)
        return LYR_EINVAL;
    rc = ex_matmul_fwd(cx, io->saved, io->mu, io->P[0], NULL, (int)N, d->R, 1);
    if (!rc) rc = ex_sigmoid_fwd(cx, io->saved, io->saved, N);
    return rc ? LYR_EFAIL : LYR_OK;
}
static int lyr__rg_bwd_v(const ex_ctx *cx, const void *dv, lyr_io *io)
{
    const lyr_gate_dims *d = (const lyr_gate_dims *)dv;
    const size_t N = (size_t)io->B * io->T;
    int rc;
    if (!cx || !lyr__gate_ok(d, 0) || !lyr__bt_ok(io->B, io->T, (double)d->R) || !io->P || !io->P[0] || !io->G ||
        !io->G[0] || !io->mu || !io->saved || !io->dout || !io->work)
        return LYR_EINVAL;
    rc = ex_zero(cx, io->work, sizeof(float) * N);
    if (!rc) rc = ex_sigmoid_bwd(cx, io->work, io->saved, io->dout, N);
    if (!rc) rc = ex_matmul_bwd(cx, io->dmu, io->G[0], NULL, io->work, io->mu, io->P[0], (int)N, d->R, 1);
    return rc ? LYR_EFAIL : LYR_OK;
}
static int lyr__vg_fwd_v(const ex_ctx *cx, const void *dv, lyr_io *io)
{
    const lyr_gate_dims *d = (const lyr_gate_dims *)dv;
    const size_t N = (size_t)io->B * io->T;
    int rc;
    io->stat = 0.0f;
    if (!cx || !lyr__gate_ok(d, 1) || !lyr__bt_ok(io->B, io->T, (double)d->C + d->H + d->R) || !io->P ||
        !io->P[0] || !io->mu || !io->x || !io->out || !io->saved || !io->work)
        return LYR_EINVAL;
    rc = ex_matmul_fwd(cx, io->work, io->mu, io->P[0], NULL, (int)N, d->R, d->H);
    if (!rc) rc = ex_causal_mean_gate_fwd(cx, io->saved + N * d->H, io->saved, io->work, io->B, io->T, d->H);
    if (!rc) rc = ex_rowscale(cx, io->out, io->x, io->saved + N * d->H, (int)N, d->C);
    return rc ? LYR_EFAIL : LYR_OK;
}
static int lyr__vg_bwd_v(const ex_ctx *cx, const void *dv, lyr_io *io)
{
    const lyr_gate_dims *d = (const lyr_gate_dims *)dv;
    const size_t N = (size_t)io->B * io->T;
    float *dg = io->work, *dz = io->work + N;
    const float *g = io->saved + N * d->H;
    int rc;
    if (!cx || !lyr__gate_ok(d, 1) || !lyr__bt_ok(io->B, io->T, (double)d->C + d->H + d->R) || !io->P ||
        !io->P[0] || !io->G || !io->G[0] || !io->mu || !io->x || !io->saved || !io->dout || !io->dx || !io->work)
        return LYR_EINVAL;
    rc = ex_zero(cx, io->work, sizeof(float) * N * (d->H + 1));
    if (!rc) rc = ex_rowdot(cx, dg, io->dout, io->x, (int)N, d->C);
    if (!rc) rc = ex_rowscale(cx, io->dx, io->dout, g, (int)N, d->C);
    if (!rc) rc = ex_causal_mean_gate_bwd(cx, dz, dg, io->saved, io->B, io->T, d->H);
    if (!rc) rc = ex_matmul_bwd(cx, io->dmu, io->G[0], NULL, dz, io->mu, io->P[0], (int)N, d->R, d->H);
    return rc ? LYR_EFAIL : LYR_OK;
}

/* =================================================================== the memberships */
/* the sizes (run: the config too, which the model sets before each forward) */
static int lyr__memb_ok(const lyr_memb_dims *d, int run)
{
    return d && d->C >= 1 && d->C <= (1 << 20) && d->R >= 1 && d->R <= (1 << 16) &&
           (!run || (d->cfg && d->R == d->cfg->R));
}
static int lyr__memb_params_v(const void *dv, lyr_pspec *out, int cap)
{
    const lyr_memb_dims *d = (const lyr_memb_dims *)dv;
    static const char *const nm[4] = {"proj.weight", "proj.bias", "centers", "log_sigma"};
    const float uC = 1.0f / sqrtf((float)(d ? d->C : 1));
    int i;
    if (!lyr__memb_ok(d, 0) || !out || cap < 4) return LYR_EINVAL;
    memset(out, 0, 4 * sizeof *out);
    for (i = 0; i < 4; i++) {
        snprintf(out[i].suffix, sizeof out[i].suffix, "%s", nm[i]);
        out[i].init_arg = i == 3 ? 0.0f : uC;
    }
    out[0].ndim = 2, out[0].shape[0] = d->C, out[0].shape[1] = d->C, out[0].decay = 1, out[0].init = LYR_INIT_UNIFORM;
    out[1].ndim = 1, out[1].shape[0] = d->C, out[1].init = LYR_INIT_UNIFORM;
    out[2].ndim = 2, out[2].shape[0] = d->R, out[2].shape[1] = d->C, out[2].init = LYR_INIT_NORMAL;
    out[3].ndim = 1, out[3].shape[0] = d->R, out[3].init = LYR_INIT_ZERO;
    return 4;
}
static size_t lyr__memb_saved_v(const void *dv, int B, int T)
{
    const lyr_memb_dims *d = (const lyr_memb_dims *)dv;
    const size_t N = (size_t)B * T;
    return lyr__memb_ok(d, 0) ? lyr__al(N * d->R) + N * d->C : 0;
}
static size_t lyr__memb_work_v(const void *dv, int B, int T)
{
    const lyr_memb_dims *d = (const lyr_memb_dims *)dv;
    era_rpa_params p = era_rpa_params_default();
    if (!lyr__memb_ok(d, 0)) return 0;
    p.D = p.P = d->C;
    return (era_membership_workspace_size(&p, B, T) + sizeof(float) - 1) / sizeof(float);
}
/* era.h's parameters of the memberships from the kind's tensors */
static era_rpa_params lyr__memb_p(const lyr_memb_dims *d, const float *const *P)
{
    era_rpa_params p = era_rpa_params_default();
    p.D = p.P = d->C;
    p.W = P[0];
    p.b = P[1];
    p.centers = P[2];
    p.log_sigma = P[3];
    return p;
}
static int lyr__memb_fwd_v(const ex_ctx *cx, const void *dv, lyr_io *io)
{
    const lyr_memb_dims *d = (const lyr_memb_dims *)dv;
    era_rpa_params p;
    float *mu, *zp;
    int rc;
    io->stat = 0.0f;
    if (!cx || !lyr__memb_ok(d, 1) || !lyr__bt_ok(io->B, io->T, (double)d->C + d->R) ||
        !lyr__ptrs_ok((const void *const *)io->P, 4) || !io->x || !io->saved)
        return LYR_EINVAL;
    p = lyr__memb_p(d, io->P);
    mu = io->saved;
    zp = io->saved + lyr__al((size_t)io->B * io->T * d->R);
    rc = io->sums ? ex_membership_fwd_sums(cx, d->cfg, &p, mu, zp, io->sums, io->x, io->B, io->T)
                  : ex_membership_fwd(cx, d->cfg, &p, mu, zp, NULL, io->x, io->B, io->T);
    return rc == ERA_OK ? LYR_OK : rc == ERA_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
}
static int lyr__memb_bwd_v(const ex_ctx *cx, const void *dv, lyr_io *io)
{
    const lyr_memb_dims *d = (const lyr_memb_dims *)dv;
    era_rpa_params p;
    era_rpa_grads g;
    const float *mu, *zp;
    int rc;
    if (!cx || !lyr__memb_ok(d, 1) || !lyr__bt_ok(io->B, io->T, (double)d->C + d->R) ||
        !lyr__ptrs_ok((const void *const *)io->P, 4) || !lyr__ptrs_ok((const void *const *)io->G, 4) || !io->x ||
        !io->saved || !io->dout || !io->dx || !io->work)
        return LYR_EINVAL;
    p = lyr__memb_p(d, io->P);
    memset(&g, 0, sizeof g);
    g.dW = io->G[0];
    g.db = io->G[1];
    g.dcenters = io->G[2];
    g.dlog_sigma = io->G[3];
    mu = io->saved;
    zp = io->saved + lyr__al((size_t)io->B * io->T * d->R);
    rc = ex_membership_bwd(cx, d->cfg, &p, io->dx, &g, io->dout, io->coef, io->x, zp, mu, io->B, io->T, io->work);
    return rc == ERA_OK ? LYR_OK : rc == ERA_ENOMEM ? LYR_ENOMEM : LYR_EFAIL;
}

const lyr_kind lyr_kind_memb = {"mem", lyr__memb_params_v, lyr__rules_init_v, lyr__memb_saved_v, lyr__memb_work_v,
                                lyr__no_floats_v, lyr__memb_fwd_v, lyr__memb_bwd_v};
const lyr_kind lyr_kind_resgate = {"res_gate", lyr__rg_params_v, lyr__rules_init_v, lyr__rg_floats_v, lyr__rg_floats_v,
                                   lyr__no_floats_v, lyr__rg_fwd_v, lyr__rg_bwd_v};
const lyr_kind lyr_kind_vgate = {"attn", lyr__vg_params_v, lyr__rules_init_v, lyr__vg_floats_v, lyr__vg_floats_v,
                                 lyr__no_floats_v, lyr__vg_fwd_v, lyr__vg_bwd_v};

const lyr_kind lyr_kind_norm = {"ln", lyr__norm_params_v, lyr__norm_init_v, lyr__norm_saved_v, lyr__no_floats_v,
                                lyr__no_floats_v, lyr__norm_fwd_v, lyr__norm_bwd_v};
const lyr_kind lyr_kind_conv = {"conv", lyr__conv_params_v, lyr__rules_init_v, lyr__no_floats_v, lyr__no_floats_v,
                                lyr__no_floats_v, lyr__conv_fwd_v, lyr__conv_bwd_v};
const lyr_kind lyr_kind_lfm = {"lfm", lyr__lfm_params_v, lyr__rules_init_v, lyr__lfm_saved_v, lyr__lfm_work_v,
                               lyr__no_floats_v, lyr__lfm_fwd_v, lyr__lfm_bwd_v};
const lyr_kind lyr_kind_polar = {"attn", lyr__polar_params_v, lyr__polar_init_v, lyr__polar_saved_v,
                                 lyr__polar_work_v, lyr__no_floats_v, lyr__polar_fwd_v, lyr__polar_bwd_v};
const lyr_kind lyr_kind_gdelta = {"gdelta", lyr__gdelta_params_v, lyr__gdelta_init_v, lyr__gdelta_saved_v,
                                  lyr__gdelta_work_v, lyr__gdelta_host_v, lyr__gdelta_fwd_v, lyr__gdelta_bwd_v};
const lyr_kind lyr_kind_mlp = {"mlp", lyr__mlp_params_v, lyr__mlp_init_v, lyr__mlp_saved_v, lyr__mlp_work_v,
                               lyr__no_floats_v, lyr__mlp_fwd_v, lyr__mlp_bwd_v};
const lyr_kind lyr_kind_moe = {"moe", lyr__moe_params_v, lyr__moe_init_v, lyr__moe_saved_v, lyr__moe_work_v,
                               lyr__moe_host_v, lyr__moe_fwd_v, lyr__moe_bwd_v};

/* =================================================================== the FFN table */
/* The MLP activations' hooks (layers.h, lyr_ffn: act_fwd writes act (N,F) from h;
   act_bwd adds into the zeroed dh) */
static int lyr__gelu_fwd(const ex_ctx *cx, float *act, const float *h, int N, int F)
{
    return ex_gelu_fwd(cx, act, h, (size_t)N * F);
}
static int lyr__gelu_bwd(const ex_ctx *cx, float *dh, const float *h, float *dact, int N, int F)
{
    return ex_gelu_bwd(cx, dh, h, dact, (size_t)N * F);
}
/* relu(a)^2 * b over the rows [a | b] of h (N,2F) */
static int lyr__relu2_fwd(const ex_ctx *cx, float *act, const float *h, int N, int F)
{
    return ex_relu2_gated_fwd(cx, act, h, N, F);
}
static int lyr__relu2_bwd(const ex_ctx *cx, float *dh, const float *h, float *dact, int N, int F)
{
    return ex_relu2_gated_bwd(cx, dh, h, dact, N, F);
}

/* SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"; LLaMA's FFN): act = silu(a) * b
   over the blocks a = h[0, N F) = x W1^T, b = h[N F, 2 N F) = x W3^T (LYR_FFN_IN_BLOCKS),
   silu(a) = a sigmoid(a), from the context's elementwise ops (sigmoid, the C = 1 row
   scale as an elementwise product, add): either device, no new kernel. */
static int lyr__swiglu_fwd(const ex_ctx *cx, float *act, const float *h, int N, int F)
{
    size_t nf = (size_t)N * F;
    if (nf > (size_t)2147483647) return LYR_EINVAL;
    if (ex_sigmoid_fwd(cx, act, h, nf) != TK_OK ||                  /* s = sigmoid(a) */
        ex_rowscale(cx, act, act, h, (int)nf, 1) != TK_OK ||        /* silu(a) = a s */
        ex_rowscale(cx, act, act, h + nf, (int)nf, 1) != TK_OK)     /* silu(a) b */
        return LYR_EFAIL;
    return LYR_OK;
}
/* dh zero on entry: db = dact silu(a); da = dact b silu'(a), silu'(a) = s + a s (1 - s);
   dact ends as dact b (scratch) */
static int lyr__swiglu_bwd(const ex_ctx *cx, float *dh, const float *h, float *dact, int N, int F)
{
    size_t nf = (size_t)N * F;
    float *da = dh, *db = dh + nf;
    const float *a = h, *b = h + nf;
    if (nf > (size_t)2147483647) return LYR_EINVAL;
    if (ex_sigmoid_fwd(cx, db, a, nf) != TK_OK ||                   /* db = s */
        ex_sigmoid_bwd(cx, da, db, a, nf) != TK_OK ||               /* da = a s (1 - s) */
        ex_residual_fwd(cx, da, da, db, nf) != TK_OK ||             /* da = silu'(a) */
        ex_rowscale(cx, db, db, a, (int)nf, 1) != TK_OK ||          /* db = silu(a) */
        ex_rowscale(cx, db, db, dact, (int)nf, 1) != TK_OK ||       /* db = dact silu(a) */
        ex_rowscale(cx, dact, dact, b, (int)nf, 1) != TK_OK ||      /* dact b */
        ex_rowscale(cx, da, da, dact, (int)nf, 1) != TK_OK)         /* da = dact b silu'(a) */
        return LYR_EFAIL;
    return LYR_OK;
}

/* One row per FFN; the row's index is mdl_config.ffn (and lyr_mlp_dims.act for the MLP
   rows): append, never reorder (checkpoints record the name, programs the index). */
static const lyr_ffn lyr__ffns[] = {
    /* MDL_FFN_GELU: gelu(x W1^T + b1) W2^T + b2, F = d_ff_mult C */
    {"gelu", "GELU MLP (tanh approximation), biases", &lyr_kind_mlp, LYR_FFN_IN_PLAIN, 1, 1, 1, 1, 1, 2,
     lyr__gelu_fwd, lyr__gelu_bwd},
    /* MDL_FFN_RELU2: (relu(x W1^T)^2 * (x W3^T)) W2^T, no biases, F = d_ff_mult C */
    {"relu2", "squared-ReLU gated MLP, no biases", &lyr_kind_mlp, LYR_FFN_IN_ROWS, 0, 0, 1, 1, 1, 3,
     lyr__relu2_fwd, lyr__relu2_bwd},
    /* MDL_FFN_MOE: the fuzzy mixture of experts (its dims from the model's MoE fields) */
    {"moe", "fuzzy mixture-of-experts FFN", &lyr_kind_moe, LYR_FFN_IN_PLAIN, 0, 0, 1, 1, 1, 0, NULL, NULL},
    /* 3: (silu(x W1^T) * (x W3^T)) W2^T, no biases; fc.weight (2F,C) = [W1 ; W3] (rows
       0..F-1 W1, the SiLU branch), two GEMMs into contiguous halves; F as LLaMA: 2/3 of
       d_ff_mult C rounded up to a multiple of 8, so 3 C F ~ the GELU MLP's 2 C (d_ff_mult C)
       parameters (d_ff_mult 4, C 128: F 344) */
    {"swiglu", "SwiGLU (SiLU-gated) MLP, no biases, F = 2/3 d_ff_mult C (multiple of 8)", &lyr_kind_mlp,
     LYR_FFN_IN_BLOCKS, 0, 0, 2, 3, 8, 3, lyr__swiglu_fwd, lyr__swiglu_bwd},
};
#define LYR__NFFN ((int)(sizeof lyr__ffns / sizeof lyr__ffns[0]))

const char *const lyr_ffn_names[] = {"gelu", "relu2", "moe", "swiglu", NULL}; /* lyr__ffns' names, in order */

int lyr_ffn_count(void) { return LYR__NFFN; }

const lyr_ffn *lyr_ffn_get(int i) { return i >= 0 && i < LYR__NFFN ? &lyr__ffns[i] : NULL; }

int lyr_ffn_find(const char *name)
{
    int i;
    if (!name) return -1;
    for (i = 0; i < LYR__NFFN; i++)
        if (!strcmp(lyr__ffns[i].name, name)) return i;
    return -1;
}

int lyr_ffn_is_mlp(int i) { return i >= 0 && i < LYR__NFFN && lyr__ffns[i].kind == &lyr_kind_mlp; }

int lyr_ffn_width(int i, int d_ff_mult, int C)
{
    const lyr_ffn *e = lyr_ffn_get(i);
    long long f;
    if (!e || d_ff_mult < 1 || C < 1 || d_ff_mult > (1 << 22) || C > (1 << 22)) return -1;
    f = (long long)d_ff_mult * C * e->width_num / e->width_den;
    if (f < 1) f = 1; /* (a width rule below 1: the smallest) */
    f = (f + e->width_round - 1) / e->width_round * e->width_round;
    return f >= 1 && f <= (1 << 22) ? (int)f : -1;
}

/* =================================================================== drop-in entry points */
/* The plain lyr_X_forward / lyr_X_backward find the device from the buffers (tensor.h's
   tk_is_device), refuse a mix (LYR_EINVAL, nothing written) and run the context form on
   the default stream. The model calls the context forms (lyr_X_fwd / lyr_X_bwd) with its
   own context and asks the driver nothing. */

int lyr_moe_forward(const lyr_moe_dims *d, const float *const *P, const float *x,
                const float *mu, float *out, float *saved, float *work, int B, int T,
                int train, uint64_t seed, float *host, float *lb_stat)
{
    ex_ctx cx;
    int dev = 0;
    if (P && lyr__ptrs_ok((const void *const *)P, LYR_MOE_NPARAMS)) {
        const void *bufs[5 + LYR_MOE_NPARAMS];
        int k;
        bufs[0] = x;
        bufs[1] = mu;
        bufs[2] = out;
        bufs[3] = saved;
        bufs[4] = work;
        for (k = 0; k < LYR_MOE_NPARAMS; k++) bufs[5 + k] = P[k];
        if (!lyr__one_side(bufs, 5 + LYR_MOE_NPARAMS, &dev)) return LYR_EINVAL;
    }
    if (host && tk_is_device(host)) return LYR_EINVAL;
    cx = ex_ctx_make(dev ? EX_CUDA : EX_CPU);
    return lyr_moe_fwd(&cx, d, P, x, mu, out, saved, work, B, T, train, seed, host, lb_stat);
}

int lyr_moe_backward(const lyr_moe_dims *d, const float *const *P, float *const *G,
                 const float *dout, float *dx, float *dmu, const float *saved,
                 float *work, int B, int T, float *host, float lb_coef)
{
    ex_ctx cx;
    int dev = 0;
    if (P && lyr__ptrs_ok((const void *const *)P, LYR_MOE_NPARAMS) &&
        G && lyr__ptrs_ok((const void *const *)G, LYR_MOE_NPARAMS)) {
        const void *bufs[5 + 2 * LYR_MOE_NPARAMS];
        int k;
        bufs[0] = dout;
        bufs[1] = dx;
        bufs[2] = dmu;
        bufs[3] = saved;
        bufs[4] = work;
        for (k = 0; k < LYR_MOE_NPARAMS; k++) {
            bufs[5 + k] = P[k];
            bufs[5 + LYR_MOE_NPARAMS + k] = G[k];
        }
        if (!lyr__one_side(bufs, 5 + 2 * LYR_MOE_NPARAMS, &dev)) return LYR_EINVAL;
    }
    if (host && tk_is_device(host)) return LYR_EINVAL;
    cx = ex_ctx_make(dev ? EX_CUDA : EX_CPU);
    return lyr_moe_bwd(&cx, d, P, G, dout, dx, dmu, saved, work, B, T, host, lb_coef);
}

int lyr_polar_forward(const lyr_polar_dims *d, const float *const *P, const float *xn,
                  float *out, float *saved, float *work, int B, int T, int train,
                  uint64_t seed, lyr_polar_stats *stats)
{
    ex_ctx cx;
    int dev = 0, np = d && lyr_polar_validate(d) == LYR_OK ? lyr__polar_np(d) : LYR_POLAR_NPARAMS;
    if (P && lyr__ptrs_ok((const void *const *)P, np)) {
        const void *bufs[4 + LYR_POLAR_NPARAMS_MAX + 3];
        int k;
        bufs[0] = xn;
        bufs[1] = out;
        bufs[2] = saved;
        bufs[3] = work;
        for (k = 0; k < np; k++) bufs[4 + k] = P[k];
        if (!lyr__one_side(bufs, 4 + np, &dev)) return LYR_EINVAL;
    }
    cx = ex_ctx_make(dev ? EX_CUDA : EX_CPU);
    return lyr_polar_fwd(&cx, d, P, xn, out, saved, work, B, T, train, seed, stats);
}

int lyr_polar_backward(const lyr_polar_dims *d, const float *const *P, float *const *G,
                   const float *dout, float *dxn, const float *saved, float *work,
                   int B, int T)
{
    ex_ctx cx;
    int dev = 0, np = d && lyr_polar_validate(d) == LYR_OK ? lyr__polar_np(d) : LYR_POLAR_NPARAMS;
    if (P && lyr__ptrs_ok((const void *const *)P, np) &&
        G && lyr__ptrs_ok((const void *const *)G, np)) {
        const void *bufs[4 + 2 * (LYR_POLAR_NPARAMS_MAX + 3)];
        int k;
        bufs[0] = dout;
        bufs[1] = dxn; /* NULL: skipped */
        bufs[2] = saved;
        bufs[3] = work;
        for (k = 0; k < np; k++) {
            bufs[4 + k] = P[k];
            bufs[4 + np + k] = G[k];
        }
        if (!lyr__one_side(bufs, 4 + 2 * np, &dev)) return LYR_EINVAL;
    }
    cx = ex_ctx_make(dev ? EX_CUDA : EX_CPU);
    return lyr_polar_bwd(&cx, d, P, G, dout, dxn, saved, work, B, T);
}

int lyr_gdelta_forward(const lyr_gdelta_dims *d, const float *const *P, const float *xn,
                   float *out, float *saved, float *work, int B, int T, int train,
                   uint64_t seed, lyr_gdelta_stats *stats)
{
    ex_ctx cx;
    int dev = 0;
    if (d && d->qkv_shared) return LYR_EINVAL; /* the context forms with q, k, v only */
    if (P && lyr__ptrs_ok((const void *const *)P, LYR_GD_NPARAMS)) {
        const void *bufs[4 + LYR_GD_NPARAMS];
        int k;
        bufs[0] = xn;
        bufs[1] = out;
        bufs[2] = saved;
        bufs[3] = work;
        for (k = 0; k < LYR_GD_NPARAMS; k++) bufs[4 + k] = P[k];
        if (!lyr__one_side(bufs, 4 + LYR_GD_NPARAMS, &dev)) return LYR_EINVAL;
    }
    cx = ex_ctx_make(dev ? EX_CUDA : EX_CPU);
    return lyr_gdelta_fwd(&cx, d, P, xn, out, saved, work, B, T, train, seed, stats);
}

int lyr_gdelta_backward(const lyr_gdelta_dims *d, const float *const *P, float *const *G,
                    const float *dout, float *dxn, const float *saved, float *work,
                    int B, int T)
{
    ex_ctx cx;
    int dev = 0;
    if (d && d->qkv_shared) return LYR_EINVAL; /* the context forms with q, k, v only */
    if (P && lyr__ptrs_ok((const void *const *)P, LYR_GD_NPARAMS) &&
        G && lyr__ptrs_ok((const void *const *)G, LYR_GD_NPARAMS)) {
        const void *bufs[4 + 2 * LYR_GD_NPARAMS];
        int k;
        bufs[0] = dout;
        bufs[1] = dxn; /* NULL: skipped */
        bufs[2] = saved;
        bufs[3] = work;
        for (k = 0; k < LYR_GD_NPARAMS; k++) {
            bufs[4 + k] = P[k];
            bufs[4 + LYR_GD_NPARAMS + k] = G[k];
        }
        if (!lyr__one_side(bufs, 4 + 2 * LYR_GD_NPARAMS, &dev)) return LYR_EINVAL;
    }
    cx = ex_ctx_make(dev ? EX_CUDA : EX_CPU);
    return lyr_gdelta_bwd(&cx, d, P, G, dout, dxn, saved, work, B, T);
}
