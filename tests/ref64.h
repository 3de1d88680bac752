/* ref64.h - float64 references for the regime sweeps of issue 38 (tests only).

   Shared by the CPU tests (tests/test_*.c, C99) and the CUDA parity tests
   (tests/parity_*.cu, C++ in the simulation and under nvcc). Nothing here calls an
   attnkit header: each reference is written from the paper's equations, in double.

   Gradients come from a small reverse-mode tape: a reference forward is written once
   with r64_* operations on tape nodes (each records its value and the partial
   derivatives to at most two parents), the loss seeds the adjoints of the outputs and
   r64_backward sweeps the tape once in reverse. So the backward of every reference is
   the exact derivative of its own forward (no hand-derived formulas to get wrong, and
   none shared with the library's code).

   Error measure (issue 38): for a float32 tensor `got` against its double reference
   `ref`, max_i |got_i - ref_i| / max_i |ref_i| (relative to the tensor's max-norm; an
   all-zero reference gives the absolute error). Tolerances: 1e-4 forward, 2e-3
   gradients (R64_TOL_FWD, R64_TOL_GRAD). Each sweep prints the worst error per tensor;
   R64_VERBOSE=1 in the environment prints every (regime, tensor) measurement. */
#ifndef ATTNKIT_REF64_H
#define ATTNKIT_REF64_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define R64_TOL_FWD 1e-4
#define R64_TOL_GRAD 2e-3
#define R64_EPS32 1.1920928955078125e-7

/* ------------------------------------------------------------------ tape */
typedef struct r64_tape {
    double *v, *adj, *da, *db;
    int *a, *b;
    long n, cap;
} r64_tape;

static inline void r64_tape_init(r64_tape *t)
{
    memset(t, 0, sizeof *t);
}
static inline void r64_tape_free(r64_tape *t)
{
    free(t->v); free(t->adj); free(t->da); free(t->db); free(t->a); free(t->b);
    memset(t, 0, sizeof *t);
}
static inline void r64_tape_clear(r64_tape *t) { t->n = 0; }

static inline long r64__push(r64_tape *t, double v, long a, double da, long b, double db)
{
    if (t->n == t->cap) {
        long nc = t->cap ? 2 * t->cap : 4096;
        t->v = (double *)realloc(t->v, sizeof(double) * (size_t)nc);
        t->adj = (double *)realloc(t->adj, sizeof(double) * (size_t)nc);
        t->da = (double *)realloc(t->da, sizeof(double) * (size_t)nc);
        t->db = (double *)realloc(t->db, sizeof(double) * (size_t)nc);
        t->a = (int *)realloc(t->a, sizeof(int) * (size_t)nc);
        t->b = (int *)realloc(t->b, sizeof(int) * (size_t)nc);
        if (!t->v || !t->adj || !t->da || !t->db || !t->a || !t->b) {
            fprintf(stderr, "ref64: out of memory\n");
            exit(2);
        }
        t->cap = nc;
    }
    t->v[t->n] = v;
    t->a[t->n] = (int)a;
    t->da[t->n] = da;
    t->b[t->n] = (int)b;
    t->db[t->n] = db;
    return t->n++;
}

/* a leaf (an input or a constant) */
static inline long r64_var(r64_tape *t, double x) { return r64__push(t, x, -1, 0.0, -1, 0.0); }
static inline double r64_val(const r64_tape *t, long x) { return t->v[x]; }
static inline long r64_add(r64_tape *t, long x, long y) { return r64__push(t, t->v[x] + t->v[y], x, 1.0, y, 1.0); }
static inline long r64_sub(r64_tape *t, long x, long y) { return r64__push(t, t->v[x] - t->v[y], x, 1.0, y, -1.0); }
static inline long r64_mul(r64_tape *t, long x, long y)
{
    return r64__push(t, t->v[x] * t->v[y], x, t->v[y], y, t->v[x]);
}
static inline long r64_div(r64_tape *t, long x, long y)
{
    double q = t->v[x] / t->v[y];
    return r64__push(t, q, x, 1.0 / t->v[y], y, -q / t->v[y]);
}
static inline long r64_scale(r64_tape *t, long x, double c) { return r64__push(t, c * t->v[x], x, c, -1, 0.0); }
static inline long r64_addc(r64_tape *t, long x, double c) { return r64__push(t, t->v[x] + c, x, 1.0, -1, 0.0); }
static inline long r64_exp(r64_tape *t, long x)
{
    double e = exp(t->v[x]);
    return r64__push(t, e, x, e, -1, 0.0);
}
static inline long r64_log(r64_tape *t, long x) { return r64__push(t, log(t->v[x]), x, 1.0 / t->v[x], -1, 0.0); }
static inline long r64_sqrt(r64_tape *t, long x)
{
    double s = sqrt(t->v[x]);
    return r64__push(t, s, x, s > 0 ? 0.5 / s : 0.0, -1, 0.0);
}
/* x*y + z in one call (two nodes) */
static inline long r64_fma(r64_tape *t, long x, long y, long z) { return r64_add(t, r64_mul(t, x, y), z); }
/* clamp(x, lo, hi): derivative 1 inside or on a bound, 0 beyond it (torch.clamp's rule) */
static inline long r64_clamp(r64_tape *t, long x, double lo, double hi)
{
    double v = t->v[x];
    if (v < lo) return r64__push(t, lo, x, 0.0, -1, 0.0);
    if (v > hi) return r64__push(t, hi, x, 0.0, -1, 0.0);
    return r64__push(t, v, x, 1.0, -1, 0.0);
}
/* sum of n nodes, left to right */
static inline long r64_sum(r64_tape *t, const long *x, int n)
{
    long s = x[0];
    int i;
    for (i = 1; i < n; i++) s = r64_add(t, s, x[i]);
    return s;
}
/* dot product of n pairs */
static inline long r64_dot(r64_tape *t, const long *x, const long *y, int n)
{
    long s = r64_mul(t, x[0], y[0]);
    int i;
    for (i = 1; i < n; i++) s = r64_fma(t, x[i], y[i], s);
    return s;
}
/* adjoints: zeroed, then the caller seeds outputs (r64_seed) and calls r64_backward */
static inline void r64_zero_adj(r64_tape *t) { memset(t->adj, 0, sizeof(double) * (size_t)t->n); }
static inline void r64_seed(r64_tape *t, long x, double g) { t->adj[x] += g; }
static inline void r64_backward(r64_tape *t)
{
    long i;
    for (i = t->n - 1; i >= 0; i--) {
        double g = t->adj[i];
        if (g == 0.0) continue;
        if (t->a[i] >= 0) t->adj[t->a[i]] += g * t->da[i];
        if (t->b[i] >= 0) t->adj[t->b[i]] += g * t->db[i];
    }
}
static inline double r64_grad(const r64_tape *t, long x) { return t->adj[x]; }
/* The same sweep on |partials| (seed with |g|): each adjoint becomes the sum over the
   chain rule's paths of |product|, the sum of |terms| a gradient is made of. An fp32
   evaluation of a gradient that cancels (its terms sum to much less than their sizes)
   can be held to c eps32 times this, its condition-aware bound. */
static inline void r64_backward_abs(r64_tape *t)
{
    long i;
    for (i = t->n - 1; i >= 0; i--) {
        double g = t->adj[i];
        if (g == 0.0) continue;
        if (t->a[i] >= 0) t->adj[t->a[i]] += g * fabs(t->da[i]);
        if (t->b[i] >= 0) t->adj[t->b[i]] += g * fabs(t->db[i]);
    }
}

/* ------------------------------------------------------------------ errors */
/* max |got - ref| / max |ref| (absolute when ref is all zero); NaN/Inf in got: +inf */
static inline double r64_relerr_f(const float *got, const double *ref, long n)
{
    double num = 0.0, den = 0.0;
    long i;
    for (i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d == d) || d - d != 0.0) return HUGE_VAL;
        if (d > num) num = d;
        if (fabs(ref[i]) > den) den = fabs(ref[i]);
    }
    return den > 0.0 ? num / den : num;
}
static inline double r64_maxabs(const double *x, long n)
{
    double m = 0.0;
    long i;
    for (i = 0; i < n; i++)
        if (fabs(x[i]) > m) m = fabs(x[i]);
    return m;
}

/* a worst-error record per tensor name, printed at the end of a sweep */
#define R64_MAXREC 48
typedef struct r64_report {
    const char *name[R64_MAXREC];
    double worst[R64_MAXREC];
    const char *where[R64_MAXREC];
    int n;
} r64_report;
static inline void r64_note(r64_report *r, const char *name, const char *regime, double err)
{
    int i;
    if (getenv("R64_VERBOSE")) printf("    [%s] %-22s %.3e\n", regime, name, err);
    for (i = 0; i < r->n; i++)
        if (!strcmp(r->name[i], name)) break;
    if (i == r->n) {
        if (r->n == R64_MAXREC) return;
        r->name[i] = name;
        r->worst[i] = -1.0;
        r->where[i] = regime;
        r->n++;
    }
    if (!(err <= r->worst[i])) {
        r->worst[i] = err;
        r->where[i] = regime;
    }
}
static inline void r64_print(const r64_report *r, const char *title)
{
    int i;
    printf("  %s: worst relative error per tensor (max-norm) over the sweep\n", title);
    for (i = 0; i < r->n; i++)
        printf("    %-22s %.3e  (%s)\n", r->name[i], r->worst[i], r->where[i]);
}

/* a small deterministic generator (the references' own, independent of the harness) */
static inline double r64_unif(unsigned long long *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}
static inline double r64_normal(unsigned long long *s)
{
    double u1 = r64_unif(s), u2 = r64_unif(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}


/* ================================================================== gdelta (seed 002)
   ATMA eqs. 16-25, per (b, h), t = 0..T-1, state M (Dv,Dk) from zero:
     k^ = k / sqrt(|k|^2 + eps), q^ likewise (the library's documented eps form of the
     L2 normalisation, Finding 1)
     M_t = gamma_t M_{t-1} + beta_t (v_t - gamma_t M_{t-1} k^_t) k^_t^T
     r_t = scale M_t q^_t
   gate_is_log: gamma_t = exp(max(g_t, floor)). Loss = sum dr . r + sum dS . M_T. */
typedef struct r64_gd_case {
    const char *name;
    int B, H, T, Dk, Dv, gate_is_log;
    double scale, eps, floor_;
    float *q, *k, *v, *g, *be, *dr, *dS;                 /* inputs (float) */
    double *r, *S, *dq, *dk, *dv, *dg, *dbe;              /* the double reference */
} r64_gd_case;

enum { R64_GD_GATE0, R64_GD_GATE1, R64_GD_LOGGATE, R64_GD_BETA0, R64_GD_BETA1,
       R64_GD_TINYK, R64_GD_SATURATE, R64_GD_NREGIMES };

static inline void r64_gd_free(r64_gd_case *c)
{
    free(c->q); free(c->k); free(c->v); free(c->g); free(c->be); free(c->dr); free(c->dS);
    free(c->r); free(c->S); free(c->dq); free(c->dk); free(c->dv); free(c->dg); free(c->dbe);
    memset(c, 0, sizeof *c);
}

static inline void r64_gd_reference(r64_gd_case *c)
{
    const int T = c->T, Dk = c->Dk, Dv = c->Dv, BH = c->B * c->H;
    r64_tape tp;
    long *iq = (long *)malloc(sizeof(long) * (size_t)T * Dk), *ik = (long *)malloc(sizeof(long) * (size_t)T * Dk);
    long *iv = (long *)malloc(sizeof(long) * (size_t)T * Dv), *ig = (long *)malloc(sizeof(long) * (size_t)T);
    long *ib = (long *)malloc(sizeof(long) * (size_t)T), *M = (long *)malloc(sizeof(long) * (size_t)Dv * Dk);
    long *ir = (long *)malloc(sizeof(long) * (size_t)T * Dv);
    long qh[256], kh[256], tmp[256];
    int bh, t, i, j;
    r64_tape_init(&tp);
    for (bh = 0; bh < BH; bh++) {
        size_t oq = (size_t)bh * T * Dk, ov = (size_t)bh * T * Dv, og = (size_t)bh * T;
        size_t oS = (size_t)bh * Dv * Dk;
        long zero;
        r64_tape_clear(&tp);
        zero = r64_var(&tp, 0.0);
        for (i = 0; i < T * Dk; i++) { iq[i] = r64_var(&tp, c->q[oq + i]); ik[i] = r64_var(&tp, c->k[oq + i]); }
        for (i = 0; i < T * Dv; i++) iv[i] = r64_var(&tp, c->v[ov + i]);
        for (t = 0; t < T; t++) { ig[t] = r64_var(&tp, c->g[og + t]); ib[t] = r64_var(&tp, c->be[og + t]); }
        for (i = 0; i < Dv * Dk; i++) M[i] = zero;
        for (t = 0; t < T; t++) {
            long nq = r64_addc(&tp, r64_dot(&tp, iq + (size_t)t * Dk, iq + (size_t)t * Dk, Dk), c->eps);
            long nk = r64_addc(&tp, r64_dot(&tp, ik + (size_t)t * Dk, ik + (size_t)t * Dk, Dk), c->eps);
            long gam;
            nq = r64_sqrt(&tp, nq);
            nk = r64_sqrt(&tp, nk);
            for (j = 0; j < Dk; j++) {
                qh[j] = r64_div(&tp, iq[(size_t)t * Dk + j], nq);
                kh[j] = r64_div(&tp, ik[(size_t)t * Dk + j], nk);
            }
            gam = !c->gate_is_log ? ig[t] : r64_exp(&tp, r64_clamp(&tp, ig[t], c->floor_, 1.0));
            for (i = 0; i < Dv; i++) {
                long *row = M + (size_t)i * Dk, pred, u;
                for (j = 0; j < Dk; j++) tmp[j] = r64_mul(&tp, gam, row[j]); /* gamma M_{t-1} */
                pred = r64_dot(&tp, tmp, kh, Dk);
                u = r64_mul(&tp, ib[t], r64_sub(&tp, iv[(size_t)t * Dv + i], pred));
                for (j = 0; j < Dk; j++) row[j] = r64_fma(&tp, u, kh[j], tmp[j]);
                ir[(size_t)t * Dv + i] = r64_scale(&tp, r64_dot(&tp, row, qh, Dk), c->scale);
            }
        }
        r64_zero_adj(&tp);
        for (i = 0; i < T * Dv; i++) {
            c->r[ov + i] = r64_val(&tp, ir[i]);
            r64_seed(&tp, ir[i], c->dr[ov + i]);
        }
        for (i = 0; i < Dv * Dk; i++) {
            c->S[oS + i] = r64_val(&tp, M[i]);
            r64_seed(&tp, M[i], c->dS[oS + i]);
        }
        r64_backward(&tp);
        for (i = 0; i < T * Dk; i++) { c->dq[oq + i] = r64_grad(&tp, iq[i]); c->dk[oq + i] = r64_grad(&tp, ik[i]); }
        for (i = 0; i < T * Dv; i++) c->dv[ov + i] = r64_grad(&tp, iv[i]);
        for (t = 0; t < T; t++) { c->dg[og + t] = r64_grad(&tp, ig[t]); c->dbe[og + t] = r64_grad(&tp, ib[t]); }
    }
    r64_tape_free(&tp);
    free(iq); free(ik); free(iv); free(ig); free(ib); free(M); free(ir);
}

/* The regimes of issue 38 for gdelta. T_long: the length of the saturating regime (the
   CPU test uses thousands; the simulation a few hundred). */
static inline void r64_gd_make_dims(r64_gd_case *c, int regime, int T_long, int Dk, int Dv);
static inline void r64_gd_make(r64_gd_case *c, int regime, int T_long)
{
    r64_gd_make_dims(c, regime, T_long, 0, 0);
}
/* Dk, Dv > 0: these head sizes instead of the regime's own */
static inline void r64_gd_make_dims(r64_gd_case *c, int regime, int T_long, int Dk, int Dv)
{
    unsigned long long s = 0x9d1ce5eedULL + (unsigned long long)regime * 7919ULL;
    size_t nq, nv, ng, nS, i;
    memset(c, 0, sizeof *c);
    c->B = 1; c->H = 2; c->T = 48; c->Dk = 8; c->Dv = 6;
    c->scale = 1.0; c->eps = 1e-6; c->floor_ = -88.0;
    switch (regime) {
    case R64_GD_GATE0: c->name = "gates near 0"; break;
    case R64_GD_GATE1: c->name = "gates near 1"; break;
    case R64_GD_LOGGATE: c->name = "log gates -30..-5"; c->gate_is_log = 1; break;
    case R64_GD_BETA0: c->name = "beta near 0"; break;
    case R64_GD_BETA1: c->name = "beta near 1"; break;
    case R64_GD_TINYK: c->name = "keys of tiny norm"; break;
    default: c->name = "long T, saturated state"; c->H = 1; c->T = T_long; c->Dk = 4; c->Dv = 4; break;
    }
    if (Dk > 0) c->Dk = Dk;
    if (Dv > 0) c->Dv = Dv;
    nq = (size_t)c->B * c->H * c->T * c->Dk; nv = (size_t)c->B * c->H * c->T * c->Dv;
    ng = (size_t)c->B * c->H * c->T; nS = (size_t)c->B * c->H * c->Dv * c->Dk;
    c->q = (float *)malloc(sizeof(float) * nq); c->k = (float *)malloc(sizeof(float) * nq);
    c->v = (float *)malloc(sizeof(float) * nv); c->g = (float *)malloc(sizeof(float) * ng);
    c->be = (float *)malloc(sizeof(float) * ng); c->dr = (float *)malloc(sizeof(float) * nv);
    c->dS = (float *)malloc(sizeof(float) * nS);
    c->r = (double *)malloc(sizeof(double) * nv); c->S = (double *)malloc(sizeof(double) * nS);
    c->dq = (double *)malloc(sizeof(double) * nq); c->dk = (double *)malloc(sizeof(double) * nq);
    c->dv = (double *)malloc(sizeof(double) * nv); c->dg = (double *)malloc(sizeof(double) * ng);
    c->dbe = (double *)malloc(sizeof(double) * ng);
    for (i = 0; i < nq; i++) {
        c->q[i] = (float)r64_normal(&s);
        c->k[i] = (float)r64_normal(&s);
        if (regime == R64_GD_TINYK) {
            /* |k| from 1e-5 to 1e-2 per token: |k|^2 from well below to well above eps */
            double sc = pow(10.0, -5.0 + 3.0 * (double)((i / (size_t)c->Dk) % 7) / 6.0) / sqrt((double)c->Dk);
            c->k[i] = (float)(c->k[i] * sc);
            c->q[i] = (float)(c->q[i] * sc);
        }
    }
    for (i = 0; i < nv; i++) { c->v[i] = (float)r64_normal(&s); c->dr[i] = (float)r64_normal(&s); }
    for (i = 0; i < nS; i++) c->dS[i] = (float)r64_normal(&s);
    for (i = 0; i < ng; i++) {
        double u = r64_unif(&s), g = 0.2 + 0.75 * u, b = 0.2 + 0.7 * r64_unif(&s);
        switch (regime) {
        case R64_GD_GATE0: g = i % 5 == 0 ? 0.0 : pow(10.0, -6.0 + 4.0 * u); break;
        case R64_GD_GATE1: g = i % 4 == 0 ? 1.0 : 1.0 - pow(10.0, -7.0 + 4.0 * u); break;
        case R64_GD_LOGGATE: g = -30.0 + 25.0 * u; break;
        case R64_GD_BETA0: b = i % 5 == 0 ? 0.0 : pow(10.0, -7.0 + 4.0 * r64_unif(&s)); break;
        case R64_GD_BETA1: b = i % 4 == 0 ? 1.0 : 1.0 - pow(10.0, -7.0 + 4.0 * r64_unif(&s)); break;
        case R64_GD_SATURATE: g = i % 2 ? 1.0 : 1.0 - 1e-4 * u; b = 0.9 + 0.1 * r64_unif(&s); break;
        default: break;
        }
        c->g[i] = (float)g;
        c->be[i] = (float)b;
    }
    r64_gd_reference(c);
}

/* ================================================================== tensor.h attention
   logits[b,h,i,j] = (q_i . k_j) / (sqrt(D) temp_h) + bias[i,j] for j <= i (bias (T,T)
   shared by the heads; an entry of -inf removes the key), p = softmax_j (shifted by the
   row's largest logit, a constant: softmax does not depend on it), out_i = sum_j p_ij v_j.
   Loss = sum dout . out. xabs (B,H,T): per row, the largest |score| + |bias| over its keys
   (the terms of a logit: the scale of its unavoidable fp32 rounding). */
typedef struct r64_at_case {
    const char *name;
    int B, H, T, D;
    float *q, *k, *v, *bias, *temp, *dout;
    double *out, *dq, *dk, *dv, *dbias, *dtemp, *xabs;
} r64_at_case;

enum { R64_AT_PLAIN, R64_AT_BIG, R64_AT_ALLBIG, R64_AT_NEGINF, R64_AT_NREGIMES };

static inline void r64_at_free(r64_at_case *c)
{
    free(c->q); free(c->k); free(c->v); free(c->bias); free(c->temp); free(c->dout);
    free(c->out); free(c->dq); free(c->dk); free(c->dv); free(c->dbias); free(c->dtemp); free(c->xabs);
    memset(c, 0, sizeof *c);
}

static inline void r64_at_reference(r64_at_case *c)
{
    const int T = c->T, D = c->D;
    const size_t TT = (size_t)T * T;
    r64_tape tp;
    long *iq = (long *)malloc(sizeof(long) * (size_t)T * D), *ik = (long *)malloc(sizeof(long) * (size_t)T * D);
    long *iv = (long *)malloc(sizeof(long) * (size_t)T * D), *ib = (long *)malloc(sizeof(long) * TT);
    long *io = (long *)malloc(sizeof(long) * (size_t)T * D), *ex = (long *)malloc(sizeof(long) * (size_t)T);
    long it, inv_ts;
    int b, h, i, j, d;
    r64_tape_init(&tp);
    memset(c->dbias, 0, sizeof(double) * TT);
    memset(c->dtemp, 0, sizeof(double) * (size_t)c->H);
    for (b = 0; b < c->B; b++)
        for (h = 0; h < c->H; h++) {
            const size_t o = ((size_t)b * c->H + h) * T * D, orow = ((size_t)b * c->H + h) * T;
            r64_tape_clear(&tp);
            for (i = 0; i < T * D; i++) {
                iq[i] = r64_var(&tp, c->q[o + i]);
                ik[i] = r64_var(&tp, c->k[o + i]);
                iv[i] = r64_var(&tp, c->v[o + i]);
            }
            for (i = 0; i < (int)TT; i++) ib[i] = r64_var(&tp, isinf(c->bias[i]) ? 0.0 : (double)c->bias[i]);
            it = r64_var(&tp, c->temp[h]);
            inv_ts = r64_div(&tp, r64_var(&tp, 1.0 / sqrt((double)D)), it);
            for (i = 0; i < T; i++) {
                double mx = -HUGE_VAL, xa = 0.0;
                long den = -1;
                for (j = 0; j <= i; j++) {
                    const double bij = c->bias[(size_t)i * T + j];
                    long sc;
                    ex[j] = -1;
                    if (isinf(bij)) continue;
                    sc = r64_mul(&tp, r64_dot(&tp, iq + (size_t)i * D, ik + (size_t)j * D, D), inv_ts);
                    if (fabs(r64_val(&tp, sc)) + fabs(bij) > xa) xa = fabs(r64_val(&tp, sc)) + fabs(bij);
                    ex[j] = r64_add(&tp, sc, ib[(size_t)i * T + j]);
                    if (r64_val(&tp, ex[j]) > mx) mx = r64_val(&tp, ex[j]);
                }
                c->xabs[orow + i] = xa;
                for (j = 0; j <= i; j++) {
                    if (ex[j] < 0) continue;
                    ex[j] = r64_exp(&tp, r64_addc(&tp, ex[j], -mx));
                    den = den < 0 ? ex[j] : r64_add(&tp, den, ex[j]);
                }
                for (d = 0; d < D; d++) {
                    long acc = -1;
                    for (j = 0; j <= i; j++) {
                        if (ex[j] < 0) continue;
                        acc = acc < 0 ? r64_mul(&tp, ex[j], iv[(size_t)j * D + d])
                                      : r64_fma(&tp, ex[j], iv[(size_t)j * D + d], acc);
                    }
                    io[(size_t)i * D + d] = r64_div(&tp, acc, den);
                }
            }
            r64_zero_adj(&tp);
            for (i = 0; i < T * D; i++) {
                c->out[o + i] = r64_val(&tp, io[i]);
                r64_seed(&tp, io[i], c->dout[o + i]);
            }
            r64_backward(&tp);
            for (i = 0; i < T * D; i++) {
                c->dq[o + i] = r64_grad(&tp, iq[i]);
                c->dk[o + i] = r64_grad(&tp, ik[i]);
                c->dv[o + i] = r64_grad(&tp, iv[i]);
            }
            for (i = 0; i < (int)TT; i++) {
                const int ii = i / T, jj = i % T;
                if (jj <= ii && !isinf(c->bias[i])) c->dbias[i] += r64_grad(&tp, ib[i]);
            }
            c->dtemp[h] += r64_grad(&tp, it);
        }
    r64_tape_free(&tp);
    free(iq); free(ik); free(iv); free(ib); free(io); free(ex);
}

/* regimes: plain (bias 0), +-1e4 entries mixed with O(1) ones, +1e4 on every entry (a
   pure shift), -inf rows (rows with one finite key, rows with a few, -inf mixed in) */
static inline void r64_at_make(r64_at_case *c, int regime)
{
    unsigned long long s = 0xa77e5eedULL + (unsigned long long)regime * 104729ULL;
    size_t n, i, TT;
    int ii, jj;
    memset(c, 0, sizeof *c);
    c->B = 1; c->H = 2; c->T = 20; c->D = 8;
    c->name = regime == R64_AT_PLAIN ? "no bias" : regime == R64_AT_BIG ? "bias +-1e4 mixed"
            : regime == R64_AT_ALLBIG ? "bias +1e4 everywhere" : "-inf rows";
    n = (size_t)c->B * c->H * c->T * c->D;
    TT = (size_t)c->T * c->T;
    c->q = (float *)malloc(sizeof(float) * n); c->k = (float *)malloc(sizeof(float) * n);
    c->v = (float *)malloc(sizeof(float) * n); c->dout = (float *)malloc(sizeof(float) * n);
    c->bias = (float *)malloc(sizeof(float) * TT); c->temp = (float *)malloc(sizeof(float) * (size_t)c->H);
    c->out = (double *)malloc(sizeof(double) * n); c->dq = (double *)malloc(sizeof(double) * n);
    c->dk = (double *)malloc(sizeof(double) * n); c->dv = (double *)malloc(sizeof(double) * n);
    c->dbias = (double *)malloc(sizeof(double) * TT); c->dtemp = (double *)malloc(sizeof(double) * (size_t)c->H);
    c->xabs = (double *)malloc(sizeof(double) * (size_t)c->B * c->H * c->T);
    for (i = 0; i < n; i++) {
        c->q[i] = (float)(1.5 * r64_normal(&s));
        c->k[i] = (float)(1.5 * r64_normal(&s));
        c->v[i] = (float)r64_normal(&s);
        c->dout[i] = (float)r64_normal(&s);
    }
    c->temp[0] = 1.0f;
    c->temp[1] = 0.7f;
    for (ii = 0; ii < c->T; ii++)
        for (jj = 0; jj < c->T; jj++) {
            double u = r64_unif(&s), bv = 0.0;
            switch (regime) {
            case R64_AT_BIG: /* a few +1e4 keys per row compete; -1e4 keys vanish */
                bv = u < 0.3 ? 1e4 : u < 0.6 ? -1e4 : u < 0.8 ? 0.5 * r64_normal(&s) : 1e4 + 2.0 * r64_unif(&s);
                break;
            case R64_AT_ALLBIG: bv = 1e4; break;
            case R64_AT_NEGINF:
                if (ii % 3 == 0) bv = jj == ii / 2 ? 0.3 : -HUGE_VAL;  /* one finite key */
                else bv = u < 0.5 ? -HUGE_VAL : 0.5 * r64_normal(&s);
                if (ii % 3 != 0 && jj == 0) bv = 0.0;                 /* at least one */
                break;
            default: break;
            }
            c->bias[(size_t)ii * c->T + jj] = (float)bv;
        }
    r64_at_reference(c);
}

/* ================================================================== ERA (seed 003)
   Section 3.2 / Algorithm 1, positions counted from 0 (era.h's documented reading):
     mu[t,r] = softmax_r(-(t/T - c_r)^2 / (2 sigma^2))
     C[r,b]  = (c_r - (b + 0.5)/nb)^2
     log-domain Sinkhorn from g = 0, `iters` times: f_r = eps log(1/R) - eps LSE_b((g_b -
     C_rb)/eps), then g_b = eps log(1/nb) - eps LSE_r((f_r - C_rb)/eps);
     plan = exp((f_r + g_b - C_rb)/eps)
     p_t(s) = sum_r mu[t,r] plan[r, blk(s)], blk(s) the block holding s (first position
     of block b: ceil(b T / nb))
     bias[t,s] = alpha (y_ts - mean_s y_t.) / (std_s y_t. + zeps), y = log(p + delta),
     population std over the whole row (the paper's RowZ; zeps is era.h's guard).
   Loss = sum dbias . bias; gradients for the centres, sigma and alpha. */
typedef struct r64_era_case {
    const char *name;
    int T, R, nb, iters;
    double eps, delta, zeps;
    float *centers, sigma, alpha, *dbias;
    double *bias, *dcenters, dsigma, dalpha;
    double *yabs; /* (T): max_s |y_ts| / (std_t + zeps): the row's z-score amplification */
} r64_era_case;

enum { R64_ERA_DEFAULT, R64_ERA_TINYSIGMA, R64_ERA_ONEREGIME, R64_ERA_SHARPOT, R64_ERA_NREGIMES };

static inline void r64_era_free(r64_era_case *c)
{
    free(c->centers); free(c->dbias); free(c->bias); free(c->dcenters); free(c->yabs);
    memset(c, 0, sizeof *c);
}

/* eps * LSE over n nodes x_i (the shift, the largest value, is a constant) */
static inline long r64__lse(r64_tape *tp, const long *x, int n)
{
    double m = -HUGE_VAL;
    long s = -1;
    int i;
    for (i = 0; i < n; i++)
        if (r64_val(tp, x[i]) > m) m = r64_val(tp, x[i]);
    for (i = 0; i < n; i++) {
        long e = r64_exp(tp, r64_addc(tp, x[i], -m));
        s = s < 0 ? e : r64_add(tp, s, e);
    }
    return r64_addc(tp, r64_log(tp, s), m);
}

static inline void r64_era_reference(r64_era_case *c)
{
    const int T = c->T, R = c->R, nb = c->nb;
    r64_tape tp;
    long *ic = (long *)malloc(sizeof(long) * (size_t)R), isg, ial, *mu = (long *)malloc(sizeof(long) * (size_t)T * R);
    long *C = (long *)malloc(sizeof(long) * (size_t)R * nb), *f = (long *)malloc(sizeof(long) * (size_t)R);
    long *g = (long *)malloc(sizeof(long) * (size_t)nb), *pl = (long *)malloc(sizeof(long) * (size_t)R * nb);
    long *x = (long *)malloc(sizeof(long) * (size_t)(R > nb ? R : nb) + sizeof(long) * 4);
    long *z = (long *)malloc(sizeof(long) * (size_t)nb), *y = (long *)malloc(sizeof(long) * (size_t)nb);
    long **zr = (long **)malloc(sizeof(long *) * (size_t)T);
    int *bs = (int *)malloc(sizeof(int) * (size_t)(nb + 1));
    int t, r, b, it, s;
    r64_tape_init(&tp);
    for (r = 0; r < R; r++) ic[r] = r64_var(&tp, c->centers[r]);
    isg = r64_var(&tp, c->sigma);
    ial = r64_var(&tp, c->alpha);
    for (b = 0; b <= nb; b++) bs[b] = (int)(((long long)b * T + nb - 1) / nb);
    {   /* memberships */
        long inv2s2 = r64_div(&tp, r64_var(&tp, 1.0), r64_scale(&tp, r64_mul(&tp, isg, isg), 2.0));
        for (t = 0; t < T; t++) {
            long *lg = mu + (size_t)t * R, lse;
            for (r = 0; r < R; r++) {
                long d = r64_sub(&tp, r64_var(&tp, (double)t / T), ic[r]);
                lg[r] = r64_scale(&tp, r64_mul(&tp, r64_mul(&tp, d, d), inv2s2), -1.0);
            }
            lse = r64__lse(&tp, lg, R);
            for (r = 0; r < R; r++) lg[r] = r64_exp(&tp, r64_sub(&tp, lg[r], lse));
        }
    }
    for (r = 0; r < R; r++)
        for (b = 0; b < nb; b++) {
            long d = r64_addc(&tp, ic[r], -((double)b + 0.5) / nb);
            C[(size_t)r * nb + b] = r64_mul(&tp, d, d);
        }
    for (b = 0; b < nb; b++) g[b] = r64_var(&tp, 0.0);
    for (it = 0; it < c->iters; it++) {
        for (r = 0; r < R; r++) {
            for (b = 0; b < nb; b++) x[b] = r64_scale(&tp, r64_sub(&tp, g[b], C[(size_t)r * nb + b]), 1.0 / c->eps);
            f[r] = r64_addc(&tp, r64_scale(&tp, r64__lse(&tp, x, nb), -c->eps), c->eps * log(1.0 / R));
        }
        for (b = 0; b < nb; b++) {
            for (r = 0; r < R; r++) x[r] = r64_scale(&tp, r64_sub(&tp, f[r], C[(size_t)r * nb + b]), 1.0 / c->eps);
            g[b] = r64_addc(&tp, r64_scale(&tp, r64__lse(&tp, x, R), -c->eps), c->eps * log(1.0 / nb));
        }
    }
    for (r = 0; r < R; r++)
        for (b = 0; b < nb; b++)
            pl[(size_t)r * nb + b] = r64_exp(&tp, r64_scale(&tp, r64_sub(&tp, r64_add(&tp, f[r], g[b]), C[(size_t)r * nb + b]), 1.0 / c->eps));
    for (t = 0; t < T; t++) {
        long mean = -1, var = -1, sd;
        double ymax = 0.0;
        for (b = 0; b < nb; b++) {
            long acc = -1;
            for (r = 0; r < R; r++)
                acc = acc < 0 ? r64_mul(&tp, mu[(size_t)t * R + r], pl[(size_t)r * nb + b])
                              : r64_fma(&tp, mu[(size_t)t * R + r], pl[(size_t)r * nb + b], acc);
            y[b] = r64_log(&tp, r64_addc(&tp, acc, c->delta));
            if (bs[b + 1] > bs[b] && fabs(r64_val(&tp, y[b])) > ymax) ymax = fabs(r64_val(&tp, y[b]));
        }
        for (b = 0; b < nb; b++) {
            long w;
            if (bs[b + 1] == bs[b]) continue;
            w = r64_scale(&tp, y[b], (double)(bs[b + 1] - bs[b]) / T);
            mean = mean < 0 ? w : r64_add(&tp, mean, w);
        }
        for (b = 0; b < nb; b++) {
            long d, w;
            z[b] = -1;
            if (bs[b + 1] == bs[b]) continue;
            d = r64_sub(&tp, y[b], mean);
            z[b] = d;
            w = r64_scale(&tp, r64_mul(&tp, d, d), (double)(bs[b + 1] - bs[b]) / T);
            var = var < 0 ? w : r64_add(&tp, var, w);
        }
        sd = r64_addc(&tp, r64_sqrt(&tp, var), c->zeps);
        c->yabs[t] = ymax / r64_val(&tp, sd);
        zr[t] = (long *)malloc(sizeof(long) * (size_t)nb);
        for (b = 0; b < nb; b++)
            zr[t][b] = z[b] < 0 ? -1 : r64_div(&tp, r64_mul(&tp, ial, z[b]), sd);
    }
    r64_zero_adj(&tp);
    for (t = 0; t < T; t++) {
        for (b = 0; b < nb; b++) {
            double seed = 0.0;
            if (zr[t][b] < 0) continue;
            for (s = bs[b]; s < bs[b + 1]; s++) {
                c->bias[(size_t)t * T + s] = r64_val(&tp, zr[t][b]);
                seed += c->dbias[(size_t)t * T + s];
            }
            r64_seed(&tp, zr[t][b], seed);
        }
        free(zr[t]);
    }
    r64_backward(&tp);
    for (r = 0; r < R; r++) c->dcenters[r] = r64_grad(&tp, ic[r]);
    c->dsigma = r64_grad(&tp, isg);
    c->dalpha = r64_grad(&tp, ial);
    r64_tape_free(&tp);
    free(ic); free(mu); free(C); free(f); free(g); free(pl); free(x); free(z); free(y); free(zr); free(bs);
}

/* regimes: defaults (R = nb = 8, sigma 0.1, eps 0.05, T 64); tiny sigma (1e-3: one-hot
   memberships, logits down to -1e5); one regime (R = 1: every row of the prior constant,
   the z-score of a constant); a sharp plan (eps 0.01, 8 iterations, nb 16, T 100: blocks
   of unequal size) */
static inline void r64_era_make(r64_era_case *c, int regime)
{
    unsigned long long s = 0xe4a5eedULL + (unsigned long long)regime * 15485863ULL;
    int r;
    size_t i, TT;
    memset(c, 0, sizeof *c);
    c->T = 64; c->R = 8; c->nb = 8; c->iters = 5;
    c->eps = 0.05f; c->delta = 1e-5f; c->zeps = 1e-6f; /* as the float fields hold them */
    c->sigma = 0.1f; c->alpha = 1.3f;
    switch (regime) {
    case R64_ERA_TINYSIGMA: c->name = "tiny sigma (1e-3)"; c->sigma = 1e-3f; break;
    case R64_ERA_ONEREGIME: c->name = "one regime (R = 1)"; c->R = 1; break;
    case R64_ERA_SHARPOT: c->name = "eps 0.01, nb 16, T 100"; c->eps = 0.01f; c->iters = 8; c->nb = 16; c->T = 100; break;
    default: c->name = "defaults"; break;
    }
    TT = (size_t)c->T * c->T;
    c->centers = (float *)malloc(sizeof(float) * (size_t)c->R);
    c->dbias = (float *)malloc(sizeof(float) * TT);
    c->bias = (double *)malloc(sizeof(double) * TT);
    c->dcenters = (double *)malloc(sizeof(double) * (size_t)c->R);
    c->yabs = (double *)malloc(sizeof(double) * (size_t)c->T);
    for (r = 0; r < c->R; r++)
        c->centers[r] = (float)(((double)r + 0.5) / c->R + 0.03 * r64_normal(&s));
    for (i = 0; i < TT; i++) c->dbias[i] = (float)r64_normal(&s);
    r64_era_reference(c);
}

/* ================================================================== RPA (seed 000)
   Sections 2-3 / Listings 1-4 (era.h's reading, non-legacy, statistics over all T*T):
     mbar = batch mean of mu (T,R); Phi (T,K): raised cosines centred at k (T-1)/(K-1),
     width max(1, 1.5 T/K), 0.5 (1 + cos(pi d)) for d = |t - c_k| / w <= 1, each row
     divided by (its sum + 1e-6);
     S = mbar^T Phi; X = clamp(exp(S / tau_align), 1e-9, 1e9); Sinkhorn `iters` times:
     rows X / (row sum + 1e-9), then columns / (column sum + 1e-9); P = X;
     x_ij = (1 - pm) (mbar P Phi^T)_ij + pm (-max(pos_beta, 0) |i - j| / max(1, T - 1));
     y = (x - mean) / (std + zeps) (mean and unbiased std over the T*T entries);
     bias = scale clip(y / clamp(tau_att, tau_min, tau_max), -clip, clip).
   detach: P a constant (no gradient through S and Sinkhorn). Loss = sum dbias . bias;
   gradients for mu (B,T,R), tau_att, pos_beta. */
typedef struct r64_rpa_case {
    const char *name;
    int B, T, R, K, iters, detach;
    double tau_align, posmix, clip, tau_min, tau_max, scale, zeps;
    float *mu, tau_att, pos_beta, *dbias;
    double *bias, *dmu, dtau, dbeta;
    double abs_dtau, abs_dbeta; /* the sums of |terms| of dtau and dbeta (r64_backward_abs) */
    double clamp_frac; /* share of exp(S / tau_align) at the clamp */
} r64_rpa_case;

enum { R64_RPA_DEFAULT, R64_RPA_CLAMP, R64_RPA_TAUMIN, R64_RPA_TAUMAX, R64_RPA_TAULOW,
       R64_RPA_ONEREGIME, R64_RPA_NREGIMES };

static inline void r64_rpa_free(r64_rpa_case *c)
{
    free(c->mu); free(c->dbias); free(c->bias); free(c->dmu);
    memset(c, 0, sizeof *c);
}

static inline void r64_rpa_reference(r64_rpa_case *c)
{
    const int B = c->B, T = c->T, R = c->R, K = c->K;
    const size_t TT = (size_t)T * T;
    r64_tape tp;
    long *imu = (long *)malloc(sizeof(long) * (size_t)B * T * R), *mb = (long *)malloc(sizeof(long) * (size_t)T * R);
    long *X = (long *)malloc(sizeof(long) * (size_t)R * K), *M = (long *)malloc(sizeof(long) * (size_t)T * K);
    long *x = (long *)malloc(sizeof(long) * TT), *out = (long *)malloc(sizeof(long) * TT);
    double *phi = (double *)malloc(sizeof(double) * (size_t)T * K);
    long itau, ibeta, mean = -1, var = -1, sd, tauc, acc;
    double w = 1.5 * (double)T / K, den = T - 1 > 1 ? (double)(T - 1) : 1.0;
    int b, t, r, k, it, i, j, ncl = 0;
    r64_tape_init(&tp);
    if (w < 1.0) w = 1.0;
    for (t = 0; t < T; t++) {
        double sum = 0.0;
        for (k = 0; k < K; k++) {
            double ck = K > 1 ? (double)k * (T - 1) / (K - 1) : 0.0, d = fabs((double)t - ck) / w;
            phi[(size_t)t * K + k] = d <= 1.0 ? 0.5 * (1.0 + cos(3.14159265358979323846 * d)) : 0.0;
            sum += phi[(size_t)t * K + k];
        }
        for (k = 0; k < K; k++) phi[(size_t)t * K + k] /= sum + 1e-6;
    }
    for (i = 0; i < B * T * R; i++) imu[i] = r64_var(&tp, c->mu[i]);
    itau = r64_var(&tp, c->tau_att);
    ibeta = r64_var(&tp, c->pos_beta);
    for (t = 0; t < T; t++)
        for (r = 0; r < R; r++) {
            acc = imu[(size_t)t * R + r];
            for (b = 1; b < B; b++) acc = r64_add(&tp, acc, imu[((size_t)b * T + t) * R + r]);
            mb[(size_t)t * R + r] = r64_scale(&tp, acc, 1.0 / B);
        }
    for (r = 0; r < R; r++)
        for (k = 0; k < K; k++) {
            long sk = r64_scale(&tp, mb[r], phi[k]), e;
            for (t = 1; t < T; t++) sk = r64_add(&tp, sk, r64_scale(&tp, mb[(size_t)t * R + r], phi[(size_t)t * K + k]));
            e = r64_exp(&tp, r64_scale(&tp, sk, 1.0 / c->tau_align));
            if (r64_val(&tp, e) < 1e-9 || r64_val(&tp, e) > 1e9) ncl++;
            X[(size_t)r * K + k] = r64_clamp(&tp, e, 1e-9, 1e9);
        }
    c->clamp_frac = (double)ncl / (R * K);
    for (it = 0; it < c->iters; it++) {
        for (r = 0; r < R; r++) {
            long s_ = r64_addc(&tp, r64_sum(&tp, X + (size_t)r * K, K), 1e-9);
            for (k = 0; k < K; k++) X[(size_t)r * K + k] = r64_div(&tp, X[(size_t)r * K + k], s_);
        }
        for (k = 0; k < K; k++) {
            long s_ = X[k];
            for (r = 1; r < R; r++) s_ = r64_add(&tp, s_, X[(size_t)r * K + k]);
            s_ = r64_addc(&tp, s_, 1e-9);
            for (r = 0; r < R; r++) X[(size_t)r * K + k] = r64_div(&tp, X[(size_t)r * K + k], s_);
        }
    }
    if (c->detach) /* P as a constant */
        for (i = 0; i < R * K; i++) X[i] = r64_var(&tp, r64_val(&tp, X[i]));
    for (t = 0; t < T; t++)
        for (k = 0; k < K; k++) {
            long a = r64_mul(&tp, mb[(size_t)t * R], X[k]);
            for (r = 1; r < R; r++) a = r64_fma(&tp, mb[(size_t)t * R + r], X[(size_t)r * K + k], a);
            M[(size_t)t * K + k] = a;
        }
    {
        long bpos = r64_clamp(&tp, ibeta, 0.0, HUGE_VAL);
        for (i = 0; i < T; i++)
            for (j = 0; j < T; j++) {
                long v = r64_scale(&tp, M[(size_t)i * K], phi[(size_t)j * K]);
                for (k = 1; k < K; k++) v = r64_add(&tp, v, r64_scale(&tp, M[(size_t)i * K + k], phi[(size_t)j * K + k]));
                if (c->posmix > 0.0)
                    v = r64_add(&tp, r64_scale(&tp, v, 1.0 - c->posmix),
                                r64_scale(&tp, bpos, -c->posmix * abs(i - j) / den));
                x[(size_t)i * T + j] = v;
                mean = mean < 0 ? v : r64_add(&tp, mean, v);
            }
    }
    mean = r64_scale(&tp, mean, 1.0 / (double)TT);
    for (i = 0; i < (int)TT; i++) {
        long d = r64_sub(&tp, x[i], mean), d2 = r64_mul(&tp, d, d);
        x[i] = d;
        var = var < 0 ? d2 : r64_add(&tp, var, d2);
    }
    var = r64_scale(&tp, var, 1.0 / ((double)TT - 1.0));
    sd = r64_addc(&tp, r64_sqrt(&tp, var), c->zeps);
    tauc = r64_clamp(&tp, itau, c->tau_min, c->tau_max);
    for (i = 0; i < (int)TT; i++) {
        long v = r64_div(&tp, r64_div(&tp, x[i], sd), tauc);
        out[i] = r64_scale(&tp, r64_clamp(&tp, v, -c->clip, c->clip), c->scale);
    }
    r64_zero_adj(&tp);
    for (i = 0; i < (int)TT; i++) {
        c->bias[i] = r64_val(&tp, out[i]);
        r64_seed(&tp, out[i], c->dbias[i]);
    }
    r64_backward(&tp);
    for (i = 0; i < B * T * R; i++) c->dmu[i] = r64_grad(&tp, imu[i]);
    c->dtau = r64_grad(&tp, itau);
    c->dbeta = r64_grad(&tp, ibeta);
    r64_zero_adj(&tp);
    for (i = 0; i < (int)TT; i++) r64_seed(&tp, out[i], fabs((double)c->dbias[i]));
    r64_backward_abs(&tp);
    c->abs_dtau = r64_grad(&tp, itau);
    c->abs_dbeta = r64_grad(&tp, ibeta);
    r64_tape_free(&tp);
    free(imu); free(mb); free(X); free(M); free(x); free(out); free(phi);
}

/* regimes: defaults (B 2, T 48, R = K = 4, tau_align 0.7, posmix 0.1, the exact gradient
   through Sinkhorn); the clamp regime (concentrated memberships, T 96, tau_align 0.5:
   exp(S / tau_align) above 1e9 for the matched regime-block pairs, as found at T = 768
   with the defaults); tau_att at tau_min and at tau_max (on the bound: the gradient
   passes); tau_att below tau_min (clamped: no gradient); one regime (R = 1: every mbar
   is 1, the prior is the position term alone) */
static inline void r64_rpa_make(r64_rpa_case *c, int regime)
{
    unsigned long long s = 0x27a5eedULL + (unsigned long long)regime * 32452843ULL;
    int b, t, r;
    size_t TT;
    memset(c, 0, sizeof *c);
    /* config values as the float fields will hold them */
    c->B = 2; c->T = 48; c->R = 4; c->K = 4; c->iters = 6; c->detach = 0;
    c->tau_align = 0.7f; c->posmix = 0.1f; c->clip = 4.0; c->tau_min = 0.6f; c->tau_max = 1.6f;
    c->scale = 1.0; c->zeps = 1e-6f;
    c->tau_att = 0.9f; c->pos_beta = 0.2f;
    switch (regime) {
    case R64_RPA_CLAMP: c->name = "Sinkhorn input clamped"; c->T = 96; c->tau_align = 0.5f; c->iters = 3; break;
    case R64_RPA_TAUMIN: c->name = "tau_att = tau_min"; c->tau_att = 0.6f; break;
    case R64_RPA_TAUMAX: c->name = "tau_att = tau_max"; c->tau_att = 1.6f; c->detach = 1; break;
    case R64_RPA_TAULOW: c->name = "tau_att < tau_min"; c->tau_att = 0.3f; break;
    case R64_RPA_ONEREGIME: c->name = "one regime (R = 1)"; c->R = 1; c->K = 4; c->posmix = 0.3f; break;
    default: c->name = "defaults"; break;
    }
    TT = (size_t)c->T * c->T;
    c->mu = (float *)malloc(sizeof(float) * (size_t)c->B * c->T * c->R);
    c->dmu = (double *)malloc(sizeof(double) * (size_t)c->B * c->T * c->R);
    c->dbias = (float *)malloc(sizeof(float) * TT);
    c->bias = (double *)malloc(sizeof(double) * TT);
    for (b = 0; b < c->B; b++)
        for (t = 0; t < c->T; t++) {
            double l[64], mx = -HUGE_VAL, sum = 0.0;
            for (r = 0; r < c->R; r++) {
                /* regime r prefers the r-th quarter of the sequence */
                double ctr = ((double)r + 0.5) / c->R, d = (double)t / c->T - ctr;
                l[r] = (regime == R64_RPA_CLAMP ? -60.0 : -8.0) * d * d + 0.3 * r64_normal(&s);
                if (l[r] > mx) mx = l[r];
            }
            for (r = 0; r < c->R; r++) { l[r] = exp(l[r] - mx); sum += l[r]; }
            for (r = 0; r < c->R; r++) c->mu[((size_t)b * c->T + t) * c->R + r] = (float)(l[r] / sum);
        }
    for (t = 0; t < (int)TT; t++) c->dbias[t] = (float)r64_normal(&s);
    r64_rpa_reference(c);
}

/* ================================================================== CEAS (seed 004)
   Observables of a row of logits l = beta s (n keys: all T, or j <= i when causal):
     p = softmax(l), H = -sum p ln p, n_eff = e^H, Var_p[s] = sum p (s - E_p s)^2,
     sigma_qk = population std of s over the keys, mean_s, log_n = ln n.
   Plain double, two passes (no gradients: the controller has no backward). */
typedef struct r64_ceas_case {
    const char *name;
    int T, causal;
    float beta, *logits;                        /* (T,T), one head */
    double *H, *neff, *var, *sig, *mean, *logn; /* (T) */
} r64_ceas_case;

enum { R64_CEAS_PLAIN, R64_CEAS_BETAMIN, R64_CEAS_BETAMAX, R64_CEAS_ZEROVAR, R64_CEAS_N1,
       R64_CEAS_SHARP, R64_CEAS_NREGIMES };

static inline void r64_ceas_free(r64_ceas_case *c)
{
    free(c->logits); free(c->H); free(c->neff); free(c->var); free(c->sig); free(c->mean); free(c->logn);
    memset(c, 0, sizeof *c);
}

static inline void r64_ceas_reference(r64_ceas_case *c)
{
    int i, j;
    for (i = 0; i < c->T; i++) {
        const float *l = c->logits + (size_t)i * c->T;
        const int n = c->causal ? i + 1 : c->T;
        double m = -HUGE_VAL, z = 0.0, es = 0.0, H = 0.0, v = 0.0, mu = 0.0, sv = 0.0;
        for (j = 0; j < n; j++) if (l[j] > m) m = l[j];
        for (j = 0; j < n; j++) z += exp((double)l[j] - m);
        /* moments of s taken about s_0 (exact: a constant row gives exactly 0) */
        for (j = 0; j < n; j++) {
            double p = exp((double)l[j] - m) / z, s_ = ((double)l[j] - l[0]) / c->beta;
            /* -p ln p = p (ln z - (l - m)): every term >= 0 */
            H += p * (log(z) - ((double)l[j] - m));
            es += p * s_;
            mu += s_;
        }
        mu /= n;
        for (j = 0; j < n; j++) {
            double p = exp((double)l[j] - m) / z, s_ = ((double)l[j] - l[0]) / c->beta;
            v += p * (s_ - es) * (s_ - es);
            sv += (s_ - mu) * (s_ - mu);
        }
        c->H[i] = H; c->neff[i] = exp(H); c->var[i] = v; c->sig[i] = sqrt(sv / n);
        c->mean[i] = mu + (double)l[0] / c->beta; c->logn[i] = log((double)n);
    }
}

/* regimes: plain (T 48, beta 0.3, causal); beta at the clip bounds 1e-4 and 1e4 (s of
   1e4 and 1e-4 for O(1) logits); logits of zero variance (every row constant); N = 1 (a
   single key: T = 1); sharp rows (one key 12..40 above the rest, non-causal) */
static inline void r64_ceas_make(r64_ceas_case *c, int regime)
{
    unsigned long long s = 0xcea5eedULL + (unsigned long long)regime * 49979687ULL;
    int i, j;
    size_t TT;
    memset(c, 0, sizeof *c);
    c->T = 48; c->causal = 1; c->beta = 0.3f;
    switch (regime) {
    case R64_CEAS_BETAMIN: c->name = "beta = beta_min (1e-4)"; c->beta = 1e-4f; break;
    case R64_CEAS_BETAMAX: c->name = "beta = beta_max (1e4)"; c->beta = 1e4f; break;
    case R64_CEAS_ZEROVAR: c->name = "logits of zero variance"; c->causal = 0; break;
    case R64_CEAS_N1: c->name = "N = 1"; c->T = 1; break;
    case R64_CEAS_SHARP: c->name = "sharp rows (gap 12..40)"; c->causal = 0; break;
    default: c->name = "plain"; break;
    }
    TT = (size_t)c->T * c->T;
    c->logits = (float *)malloc(sizeof(float) * TT);
    c->H = (double *)malloc(sizeof(double) * (size_t)c->T); c->neff = (double *)malloc(sizeof(double) * (size_t)c->T);
    c->var = (double *)malloc(sizeof(double) * (size_t)c->T); c->sig = (double *)malloc(sizeof(double) * (size_t)c->T);
    c->mean = (double *)malloc(sizeof(double) * (size_t)c->T); c->logn = (double *)malloc(sizeof(double) * (size_t)c->T);
    for (i = 0; i < c->T; i++)
        for (j = 0; j < c->T; j++) {
            double x = 2.0 * r64_normal(&s);
            if (regime == R64_CEAS_ZEROVAR) x = 0.37 + 0.1 * i;
            if (regime == R64_CEAS_SHARP) x = j == (i * 7) % c->T ? 12.0 + 28.0 * i / c->T : r64_normal(&s);
            c->logits[(size_t)i * c->T + j] = (float)x;
        }
    r64_ceas_reference(c);
}

/* ================================================================== RPA memberships
   (seed 000, Listing 1, era.h's reading) z = W h + b (P); per regime r
     logit_r = clamp(-|z - c_r|^2 clamp(exp(-2 log_sigma_r), 1e-3, 1e3) / 2, -30, 30),
     mu = softmax_r(logit). Loss = sum dmu . mu; gradients for h, W, b, centres, log_sigma. */
typedef struct r64_mem_case {
    const char *name;
    int B, T, D, P, R;
    float *h, *W, *b, *c, *ls, *dmu;
    double *mu, *dh, *dW, *db, *dc, *dls;
} r64_mem_case;

enum { R64_MEM_DEFAULT, R64_MEM_SHARP, R64_MEM_TINYSIGMA, R64_MEM_NREGIMES };

static inline void r64_mem_free(r64_mem_case *c)
{
    free(c->h); free(c->W); free(c->b); free(c->c); free(c->ls); free(c->dmu);
    free(c->mu); free(c->dh); free(c->dW); free(c->db); free(c->dc); free(c->dls);
    memset(c, 0, sizeof *c);
}

static inline void r64_mem_reference(r64_mem_case *c)
{
    const int n = c->B * c->T, D = c->D, P = c->P, R = c->R;
    r64_tape tp;
    long *ih = (long *)malloc(sizeof(long) * (size_t)n * D), *iW = (long *)malloc(sizeof(long) * (size_t)P * D);
    long *ib = (long *)malloc(sizeof(long) * (size_t)P), *ic = (long *)malloc(sizeof(long) * (size_t)R * P);
    long *il = (long *)malloc(sizeof(long) * (size_t)R), *s2 = (long *)malloc(sizeof(long) * (size_t)R);
    long *om = (long *)malloc(sizeof(long) * (size_t)n * R), z[64], lg[64];
    int i, q, d, r;
    r64_tape_init(&tp);
    for (i = 0; i < n * D; i++) ih[i] = r64_var(&tp, c->h[i]);
    for (i = 0; i < P * D; i++) iW[i] = r64_var(&tp, c->W[i]);
    for (i = 0; i < P; i++) ib[i] = r64_var(&tp, c->b[i]);
    for (i = 0; i < R * P; i++) ic[i] = r64_var(&tp, c->c[i]);
    for (r = 0; r < R; r++) {
        il[r] = r64_var(&tp, c->ls[r]);
        s2[r] = r64_clamp(&tp, r64_exp(&tp, r64_scale(&tp, il[r], -2.0)), 1e-3, 1e3);
    }
    for (i = 0; i < n; i++) {
        long lse;
        for (q = 0; q < P; q++) {
            long a = ib[q];
            for (d = 0; d < D; d++) a = r64_fma(&tp, iW[(size_t)q * D + d], ih[(size_t)i * D + d], a);
            z[q] = a;
        }
        for (r = 0; r < R; r++) {
            long d2 = -1;
            for (q = 0; q < P; q++) {
                long e = r64_sub(&tp, z[q], ic[(size_t)r * P + q]), e2 = r64_mul(&tp, e, e);
                d2 = d2 < 0 ? e2 : r64_add(&tp, d2, e2);
            }
            lg[r] = r64_clamp(&tp, r64_scale(&tp, r64_mul(&tp, d2, s2[r]), -0.5), -30.0, 30.0);
        }
        lse = r64__lse(&tp, lg, R);
        for (r = 0; r < R; r++) om[(size_t)i * R + r] = r64_exp(&tp, r64_sub(&tp, lg[r], lse));
    }
    r64_zero_adj(&tp);
    for (i = 0; i < n * R; i++) {
        c->mu[i] = r64_val(&tp, om[i]);
        r64_seed(&tp, om[i], c->dmu[i]);
    }
    r64_backward(&tp);
    for (i = 0; i < n * D; i++) c->dh[i] = r64_grad(&tp, ih[i]);
    for (i = 0; i < P * D; i++) c->dW[i] = r64_grad(&tp, iW[i]);
    for (i = 0; i < P; i++) c->db[i] = r64_grad(&tp, ib[i]);
    for (i = 0; i < R * P; i++) c->dc[i] = r64_grad(&tp, ic[i]);
    for (r = 0; r < R; r++) c->dls[r] = r64_grad(&tp, il[r]);
    r64_tape_free(&tp);
    free(ih); free(iW); free(ib); free(ic); free(il); free(s2); free(om);
}

/* regimes: defaults (log_sigma ~ 0, memberships near uniform); sharp (log_sigma -1.5:
   1 / sigma^2 = 20, logits -5..-40, some at the -30 clamp); tiny sigma (log_sigma
   -4 .. -7: exp(-2 log_sigma) above 1e3, clamped, no log_sigma gradient; nearly every
   logit at the -30 clamp, one token nearly one-hot: mu = 1 - 1e-11 beside 3e-12) */
static inline void r64_mem_make(r64_mem_case *c, int regime)
{
    unsigned long long s = 0x3e35eedULL + (unsigned long long)regime * 86028121ULL;
    int i, n;
    memset(c, 0, sizeof *c);
    c->B = 2; c->T = 12; c->D = 6; c->P = 3; c->R = 4;
    c->name = regime == R64_MEM_SHARP ? "memberships, sigma 0.22" : regime == R64_MEM_TINYSIGMA
            ? "memberships, tiny sigma (clamped)" : "memberships, defaults";
    n = c->B * c->T;
    c->h = (float *)malloc(sizeof(float) * (size_t)n * c->D); c->W = (float *)malloc(sizeof(float) * (size_t)c->P * c->D);
    c->b = (float *)malloc(sizeof(float) * (size_t)c->P); c->c = (float *)malloc(sizeof(float) * (size_t)c->R * c->P);
    c->ls = (float *)malloc(sizeof(float) * (size_t)c->R); c->dmu = (float *)malloc(sizeof(float) * (size_t)n * c->R);
    c->mu = (double *)malloc(sizeof(double) * (size_t)n * c->R); c->dh = (double *)malloc(sizeof(double) * (size_t)n * c->D);
    c->dW = (double *)malloc(sizeof(double) * (size_t)c->P * c->D); c->db = (double *)malloc(sizeof(double) * (size_t)c->P);
    c->dc = (double *)malloc(sizeof(double) * (size_t)c->R * c->P); c->dls = (double *)malloc(sizeof(double) * (size_t)c->R);
    for (i = 0; i < n * c->D; i++) c->h[i] = (float)r64_normal(&s);
    for (i = 0; i < c->P * c->D; i++) c->W[i] = (float)(0.3 * r64_normal(&s));
    for (i = 0; i < c->P; i++) c->b[i] = (float)(0.1 * r64_normal(&s));
    for (i = 0; i < c->R * c->P; i++) c->c[i] = (float)(0.5 * r64_normal(&s));
    for (i = 0; i < c->R; i++)
        c->ls[i] = (float)(regime == R64_MEM_SHARP ? -1.5 : regime == R64_MEM_TINYSIGMA ? -4.0 - i : 0.2 * r64_normal(&s));
    for (i = 0; i < n * c->R; i++) c->dmu[i] = (float)r64_normal(&s);
    r64_mem_reference(c);
}

#endif /* ATTNKIT_REF64_H */
