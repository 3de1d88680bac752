/* tests/test_gdelta.c - gated-delta memory: recurrent vs a double-precision loop,
   gradients vs central finite differences of that loop, chunked vs recurrent over
   many lengths / chunk sizes / gate regimes, Finding 2 (self-stabilisation vs a
   Hebbian memory's sqrt(N) growth), in-place decode, gate and readout helpers, bad
   input. */
#define GDELTA_IMPLEMENTATION
#include "../gdelta.h"
#include "attnkit_test.h"
#include "ref64.h"

/* ------------------------------------------------------------ double reference */
typedef struct {
    int B, H, T, Dk, Dv, gate_is_log;
    double scale, eps, floor_;
} refp;

/* Forward in double; returns loss = sum(wr * r) + sum(ws * state_out) when wr/ws given.
   r (B,H,T,Dv) and sout (B,H,Dv,Dk) written when not NULL. */
static double ref_forward(const refp *p, const double *q, const double *k, const double *v,
                          const double *g, const double *be, const double *s0, double *r,
                          double *sout, const double *wr, const double *ws)
{
    int bh, t, i, j, Dk = p->Dk, Dv = p->Dv, T = p->T;
    double loss = 0.0;
    double *M = (double *)malloc(sizeof(double) * Dk * Dv);
    double *qn = (double *)malloc(sizeof(double) * Dk), *kn = (double *)malloc(sizeof(double) * Dk);
    for (bh = 0; bh < p->B * p->H; bh++) {
        for (i = 0; i < Dv * Dk; i++) M[i] = s0 ? s0[(size_t)bh * Dk * Dv + i] : 0.0;
        for (t = 0; t < T; t++) {
            size_t o = (size_t)bh * T + t;
            const double *qq = q + o * Dk, *kk = k + o * Dk, *vv = v + o * Dv;
            double nq = 0, nk = 0, gam;
            for (j = 0; j < Dk; j++) { nq += qq[j] * qq[j]; nk += kk[j] * kk[j]; }
            for (j = 0; j < Dk; j++) {
                qn[j] = qq[j] / sqrt(nq + p->eps);
                kn[j] = kk[j] / sqrt(nk + p->eps);
            }
            if (p->gate_is_log) gam = exp(g[o] < p->floor_ ? p->floor_ : g[o]);
            else gam = g[o];
            for (i = 0; i < Dv; i++) {
                double *row = M + (size_t)i * Dk, pr = 0, u, ro = 0;
                for (j = 0; j < Dk; j++) { row[j] *= gam; pr += row[j] * kn[j]; }
                u = be[o] * (vv[i] - pr);
                for (j = 0; j < Dk; j++) { row[j] += u * kn[j]; ro += row[j] * qn[j]; }
                ro *= p->scale;
                if (r) r[o * Dv + i] = ro;
                if (wr) loss += wr[o * Dv + i] * ro;
            }
        }
        for (i = 0; i < Dv * Dk; i++) {
            if (sout) sout[(size_t)bh * Dk * Dv + i] = M[i];
            if (ws) loss += ws[(size_t)bh * Dk * Dv + i] * M[i];
        }
    }
    free(M); free(qn); free(kn);
    return loss;
}

static double *to_d(const float *x, size_t n)
{
    double *d = (double *)malloc(sizeof(double) * (n ? n : 1));
    size_t i;
    for (i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static float maxabs(const float *x, size_t n)
{
    float m = 0.0f;
    size_t i;
    for (i = 0; i < n; i++) if (fabsf(x[i]) > m) m = fabsf(x[i]);
    return m;
}

/* a problem instance */
typedef struct {
    int B, H, T, Dk, Dv;
    float *q, *k, *v, *g, *be, *s0;
} prob;

enum { GATES_RANDOM, GATES_ONE, GATES_NEAR0, BETA_NEAR0, BETA_NEAR1 };

static prob prob_make(int B, int H, int T, int Dk, int Dv, int regime, int gate_is_log,
                      unsigned long long seed)
{
    prob P;
    size_t nq = (size_t)B * H * T * Dk, nv = (size_t)B * H * T * Dv, ng = (size_t)B * H * T,
           i;
    tt_seed(seed);
    P.B = B; P.H = H; P.T = T; P.Dk = Dk; P.Dv = Dv;
    P.q = (float *)malloc(sizeof(float) * nq);
    P.k = (float *)malloc(sizeof(float) * nq);
    P.v = (float *)malloc(sizeof(float) * nv);
    P.g = (float *)malloc(sizeof(float) * ng);
    P.be = (float *)malloc(sizeof(float) * ng);
    P.s0 = (float *)malloc(sizeof(float) * B * H * Dk * Dv);
    tt_fill_normal(P.q, (long)nq, 1.0);
    tt_fill_normal(P.k, (long)nq, 1.0);
    tt_fill_normal(P.v, (long)nv, 1.0);
    tt_fill_normal(P.s0, (long)B * H * Dk * Dv, 0.3);
    for (i = 0; i < ng; i++) {
        double gm = 0.75 + 0.24 * tt_uniform(), bt = 0.1 + 0.85 * tt_uniform();
        if (regime == GATES_ONE) gm = 1.0;
        if (regime == GATES_NEAR0) gm = 1e-3 + 1e-2 * tt_uniform();
        if (regime == BETA_NEAR0) bt = 1e-4 * (1.0 + tt_uniform());
        if (regime == BETA_NEAR1) bt = 1.0 - 1e-4 * tt_uniform();
        P.g[i] = gate_is_log ? (float)log(gm) : (float)gm;
        P.be[i] = (float)bt;
    }
    return P;
}

static void prob_free(prob *P)
{
    free(P->q); free(P->k); free(P->v); free(P->g); free(P->be); free(P->s0);
}

static refp refp_of(const prob *P, const gd_config *c)
{
    refp p;
    p.B = P->B; p.H = P->H; p.T = P->T; p.Dk = P->Dk; p.Dv = P->Dv;
    p.gate_is_log = c->gate_is_log;
    p.scale = c->scale;
    p.eps = c->norm_eps;
    p.floor_ = c->log_gate_floor;
    return p;
}

/* all gradients of one forward+backward */
typedef struct {
    float *r, *sout, *dq, *dk, *dv, *dg, *dbe, *ds0;
} grads;

static grads run_fb(const gd_config *c, const prob *P, const float *dr, const float *dso,
                    int use_s0)
{
    grads G;
    size_t nq = (size_t)P->B * P->H * P->T * P->Dk, nv = (size_t)P->B * P->H * P->T * P->Dv,
           ng = (size_t)P->B * P->H * P->T, ns = (size_t)P->B * P->H * P->Dk * P->Dv;
    gd_saved sv = gd_saved_init();
    int rc;
    G.r = (float *)calloc(nv, sizeof(float));
    G.sout = (float *)calloc(ns, sizeof(float));
    G.dq = (float *)calloc(nq, sizeof(float));
    G.dk = (float *)calloc(nq, sizeof(float));
    G.dv = (float *)calloc(nv, sizeof(float));
    G.dg = (float *)calloc(ng, sizeof(float));
    G.dbe = (float *)calloc(ng, sizeof(float));
    G.ds0 = (float *)calloc(ns, sizeof(float));
    rc = gd_forward(c, G.r, G.sout, P->q, P->k, P->v, P->g, P->be, use_s0 ? P->s0 : NULL,
                    P->B, P->H, P->T, P->Dk, P->Dv, &sv, NULL);
    CHECK_INT_EQ(rc, GD_OK);
    rc = gd_backward(c, &sv, G.dq, G.dk, G.dv, G.dg, G.dbe, G.ds0, dr, dso, P->q, P->k, P->v,
                     P->g, P->be, use_s0 ? P->s0 : NULL, P->B, P->H, P->T, P->Dk, P->Dv, NULL);
    CHECK_INT_EQ(rc, GD_OK);
    gd_saved_free(&sv);
    return G;
}

static void grads_free(grads *G)
{
    free(G->r); free(G->sout); free(G->dq); free(G->dk); free(G->dv); free(G->dg);
    free(G->dbe); free(G->ds0);
}

/* ------------------------------------------------------------ tests */
static void test_recurrent_vs_double(void)
{
    int lg;
    for (lg = 0; lg < 2; lg++) {
        gd_config c = gd_config_default();
        prob P = prob_make(2, 2, 37, 12, 10, GATES_RANDOM, lg, 11 + lg);
        size_t nv = (size_t)2 * 2 * 37 * 10, ns = (size_t)2 * 2 * 12 * 10, i;
        float *r = (float *)malloc(sizeof(float) * nv), *so = (float *)malloc(sizeof(float) * ns);
        double *rd = (double *)malloc(sizeof(double) * nv), *sd = (double *)malloc(sizeof(double) * ns);
        double *qd, *kd, *vd, *gdd, *bd, *s0d;
        refp p;
        c.algo = GD_ALGO_RECURRENT;
        c.gate_is_log = lg;
        c.scale = 0.7f;
        p = refp_of(&P, &c);
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, P.s0, 2, 2, 37, 12, 10,
                                NULL, NULL), GD_OK);
        qd = to_d(P.q, 2 * 2 * 37 * 12); kd = to_d(P.k, 2 * 2 * 37 * 12);
        vd = to_d(P.v, nv); gdd = to_d(P.g, 2 * 2 * 37); bd = to_d(P.be, 2 * 2 * 37);
        s0d = to_d(P.s0, ns);
        ref_forward(&p, qd, kd, vd, gdd, bd, s0d, rd, sd, NULL, NULL);
        CHECK_ALL_CLOSE(r, rd, nv, 1e-4, 1e-5);
        CHECK_ALL_CLOSE(so, sd, ns, 1e-4, 1e-5);
        /* without initial state too */
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 2, 2, 37, 12, 10,
                                NULL, NULL), GD_OK);
        ref_forward(&p, qd, kd, vd, gdd, bd, NULL, rd, sd, NULL, NULL);
        CHECK_ALL_CLOSE(r, rd, nv, 1e-4, 1e-5);
        CHECK_ALL_CLOSE(so, sd, ns, 1e-4, 1e-5);
        for (i = 0; i < nv; i++) (void)i;
        free(r); free(so); free(rd); free(sd); free(qd); free(kd); free(vd); free(gdd);
        free(bd); free(s0d);
        prob_free(&P);
    }
}

/* Gradient of the library (algo, gate form) vs central differences of ref_forward. */
static void check_grads_fd(int algo, int gate_is_log, int step)
{
    gd_config c = gd_config_default();
    int B = 1, H = 2, T = 11, Dk = 5, Dv = 4;
    prob P = prob_make(B, H, T, Dk, Dv, GATES_RANDOM, gate_is_log, 100 + algo * 7 + gate_is_log);
    size_t nq = (size_t)B * H * T * Dk, nv = (size_t)B * H * T * Dv, ng = (size_t)B * H * T,
           ns = (size_t)B * H * Dk * Dv, i;
    float *wr = (float *)malloc(sizeof(float) * nv), *wsf = (float *)malloc(sizeof(float) * ns);
    double *qd = to_d(P.q, nq), *kd = to_d(P.k, nq), *vd = to_d(P.v, nv), *gdd = to_d(P.g, ng),
           *bd = to_d(P.be, ng), *s0d = to_d(P.s0, ns), *wrd, *wsd;
    double *fd = (double *)malloc(sizeof(double) * nq);
    grads G;
    refp p;
    const double h = 1e-5;
    c.algo = algo;
    c.gate_is_log = gate_is_log;
    c.chunk_size = step;
    c.checkpoint = step;
    c.scale = 0.8f;
    p = refp_of(&P, &c);
    tt_fill_normal(wr, (long)nv, 1.0);
    tt_fill_normal(wsf, (long)ns, 1.0);
    wrd = to_d(wr, nv);
    wsd = to_d(wsf, ns);
    G = run_fb(&c, &P, wr, wsf, 1);
#define FD_OF(arr, n, out)                                                           \
    for (i = 0; i < (n); i++) {                                                      \
        double s_ = arr[i], lp, lm;                                                  \
        arr[i] = s_ + h;                                                             \
        lp = ref_forward(&p, qd, kd, vd, gdd, bd, s0d, NULL, NULL, wrd, wsd);        \
        arr[i] = s_ - h;                                                             \
        lm = ref_forward(&p, qd, kd, vd, gdd, bd, s0d, NULL, NULL, wrd, wsd);        \
        arr[i] = s_;                                                                 \
        out[i] = (lp - lm) / (2 * h);                                                \
    }
    FD_OF(qd, nq, fd);
    CHECK_ALL_CLOSE(G.dq, fd, nq, 1e-3, 1e-4);
    FD_OF(kd, nq, fd);
    CHECK_ALL_CLOSE(G.dk, fd, nq, 1e-3, 1e-4);
    FD_OF(vd, nv, fd);
    CHECK_ALL_CLOSE(G.dv, fd, nv, 1e-3, 1e-4);
    FD_OF(gdd, ng, fd);
    CHECK_ALL_CLOSE(G.dg, fd, ng, 1e-3, 1e-4);
    FD_OF(bd, ng, fd);
    CHECK_ALL_CLOSE(G.dbe, fd, ng, 1e-3, 1e-4);
    FD_OF(s0d, ns, fd);
    CHECK_ALL_CLOSE(G.ds0, fd, ns, 1e-3, 1e-4);
#undef FD_OF
    grads_free(&G);
    free(wr); free(wsf); free(qd); free(kd); free(vd); free(gdd); free(bd); free(s0d);
    free(wrd); free(wsd); free(fd);
    prob_free(&P);
}

static void test_recurrent_grad_fd(void)
{
    check_grads_fd(GD_ALGO_RECURRENT, 0, 1);  /* every state stored */
    check_grads_fd(GD_ALGO_RECURRENT, 1, 4);  /* checkpoints + recomputation, ragged */
    check_grads_fd(GD_ALGO_RECURRENT, 0, 64); /* one segment */
}

static void test_chunked_grad_fd(void)
{
    check_grads_fd(GD_ALGO_CHUNKED, 0, 4);
    check_grads_fd(GD_ALGO_CHUNKED, 1, 3);
    check_grads_fd(GD_ALGO_CHUNKED, 1, 16); /* one partial chunk */
}

/* Chunked vs recurrent: outputs, final state and every gradient, relative 1e-4 of the
   largest reference magnitude (per tensor). */
static void cmp_paths(int T, int C, int regime, int gate_is_log, int Dk, int Dv, int B,
                      int H)
{
    gd_config cr = gd_config_default(), cc;
    prob P = prob_make(B, H, T, Dk, Dv, regime, gate_is_log, 1000 + T * 7 + C + regime);
    size_t nq = (size_t)B * H * T * Dk, nv = (size_t)B * H * T * Dv, ng = (size_t)B * H * T,
           ns = (size_t)B * H * Dk * Dv;
    float *dr = (float *)malloc(sizeof(float) * nv), *dso = (float *)malloc(sizeof(float) * ns);
    grads R, K;
    cr.gate_is_log = gate_is_log;
    cr.algo = GD_ALGO_RECURRENT;
    cr.checkpoint = 16;
    cc = cr;
    cc.algo = GD_ALGO_CHUNKED;
    cc.chunk_size = C;
    tt_fill_normal(dr, (long)nv, 1.0);
    tt_fill_normal(dso, (long)ns, 1.0);
    R = run_fb(&cr, &P, dr, dso, 1);
    K = run_fb(&cc, &P, dr, dso, 1);
#define CMP(f, n)                                                                  \
    do {                                                                           \
        double atol_ = 1e-4 * maxabs(R.f, n) + 1e-7;                               \
        CHECK_ALL_CLOSE(K.f, R.f, n, 1e-4, atol_);                                 \
    } while (0)
    CMP(r, nv);
    CMP(sout, ns);
    CMP(dq, nq);
    CMP(dk, nq);
    CMP(dv, nv);
    CMP(dg, ng);
    CMP(dbe, ng);
    CMP(ds0, ns);
#undef CMP
    if (tt__case_failed)
        fprintf(stderr, "    (T=%d C=%d regime=%d log=%d Dk=%d Dv=%d)\n", T, C, regime,
                gate_is_log, Dk, Dv);
    grads_free(&R);
    grads_free(&K);
    free(dr); free(dso);
    prob_free(&P);
}

static void test_chunked_vs_recurrent(void)
{
    static const int Ts[] = {1, 2, 15, 17, 33, 63, 65, 100, 129, 300};
    static const int Cs[] = {16, 32, 64};
    int a, b;
    for (a = 0; a < (int)(sizeof Ts / sizeof Ts[0]); a++)
        for (b = 0; b < 3; b++) cmp_paths(Ts[a], Cs[b], GATES_RANDOM, (a + b) & 1, 16, 12, 1, 2);
}

static void test_chunked_regimes(void)
{
    static const int Cs[] = {16, 32, 64};
    int b, reg;
    for (reg = GATES_ONE; reg <= BETA_NEAR1; reg++)
        for (b = 0; b < 3; b++) {
            cmp_paths(300, Cs[b], reg, 0, 16, 8, 1, 1);
            cmp_paths(77, Cs[b], reg, 1, 8, 20, 2, 1);
        }
}

static void test_chunked_d64(void)
{
    cmp_paths(150, 64, GATES_RANDOM, 1, 64, 48, 1, 1);
    cmp_paths(150, 32, GATES_ONE, 0, 48, 64, 1, 1);
}

/* Finding 2: unit keys, gamma = 1: the delta memory's norm stays flat over 65,536
   random steps while M += v k^T grows like sqrt(N). */
static void test_finding2_self_stabilising(void)
{
    const int Dk = 8, Dv = 8, seg = 4096, nseg = 16;
    int s, t, i, j;
    gd_config c = gd_config_default();
    float *q = (float *)malloc(sizeof(float) * seg * Dk), *k = (float *)malloc(sizeof(float) * seg * Dk);
    float *v = (float *)malloc(sizeof(float) * seg * Dv), *g = (float *)malloc(sizeof(float) * seg);
    float *be = (float *)malloc(sizeof(float) * seg), *r = (float *)malloc(sizeof(float) * seg * Dv);
    float S[64], S2[64];
    double Hb[64], vmax = 0, nd[17], nh[17];
    memset(S, 0, sizeof S);
    memset(Hb, 0, sizeof Hb);
    tt_seed(2);
    for (s = 0; s < nseg; s++) {
        tt_fill_normal(q, (long)seg * Dk, 1.0);
        tt_fill_normal(k, (long)seg * Dk, 1.0);
        tt_fill_normal(v, (long)seg * Dv, 1.0);
        for (t = 0; t < seg; t++) {
            g[t] = 1.0f;
            be[t] = (float)(0.1 + 0.9 * tt_uniform());
        }
        for (t = 0; t < seg; t++) {
            double nk = 0, nv = 0;
            for (j = 0; j < Dk; j++) nk += (double)k[t * Dk + j] * k[t * Dk + j];
            for (i = 0; i < Dv; i++) nv += (double)v[t * Dv + i] * v[t * Dv + i];
            if (sqrt(nv) > vmax) vmax = sqrt(nv);
            nk = sqrt(nk);
            for (i = 0; i < Dv; i++)
                for (j = 0; j < Dk; j++) Hb[i * Dk + j] += v[t * Dv + i] * (k[t * Dk + j] / nk);
        }
        CHECK_INT_EQ(gd_forward(&c, r, S2, q, k, v, g, be, S, 1, 1, seg, Dk, Dv, NULL, NULL),
                     GD_OK);
        memcpy(S, S2, sizeof S);
        nd[s] = 0; nh[s] = 0;
        for (i = 0; i < 64; i++) { nd[s] += (double)S[i] * S[i]; nh[s] += Hb[i] * Hb[i]; }
        nd[s] = sqrt(nd[s]);
        nh[s] = sqrt(nh[s]);
        /* bounded: |M|_F <= sqrt(min(Dk,Dv)) * max |v| (each write keeps M k = v-ish) */
        CHECK(nd[s] <= sqrt((double)Dk) * vmax);
    }
    /* flat: the delta memory at 65,536 steps is within 30% of its norm at 4,096 */
    CHECK(nd[nseg - 1] < 1.3 * nd[0] && nd[nseg - 1] > nd[0] / 1.3);
    /* Hebbian: sqrt(N): 16x the steps -> ~4x the norm; |M|_F / sqrt(N Dv) ~ 1 */
    CHECK(nh[nseg - 1] / nh[0] > 2.5 && nh[nseg - 1] / nh[0] < 6.0);
    CHECK_CLOSE(nh[nseg - 1] / sqrt(65536.0 * Dv), 1.0, 0.15, 0.0);
    free(q); free(k); free(v); free(g); free(be); free(r);
}

/* Finding 1: with RMS-normalised keys (|k|^2 = Dk) and normalisation off, the state
   blows up; with L2 normalisation it does not. */
static void test_finding1_key_norm(void)
{
    const int Dk = 16, Dv = 16, T = 256;
    gd_config c = gd_config_default();
    float *q = (float *)malloc(sizeof(float) * T * Dk), *k = (float *)malloc(sizeof(float) * T * Dk);
    float *v = (float *)malloc(sizeof(float) * T * Dv), *g = (float *)malloc(sizeof(float) * T);
    float *be = (float *)malloc(sizeof(float) * T), *r = (float *)malloc(sizeof(float) * T * Dv);
    float S[256];
    double n1 = 0, n2 = 0;
    int t, j, i;
    tt_seed(3);
    tt_fill_normal(q, (long)T * Dk, 1.0);
    tt_fill_normal(k, (long)T * Dk, 1.0);
    tt_fill_normal(v, (long)T * Dv, 1.0);
    for (t = 0; t < T; t++) {
        double ms = 0;
        for (j = 0; j < Dk; j++) ms += (double)k[t * Dk + j] * k[t * Dk + j];
        ms = sqrt(ms / Dk);
        for (j = 0; j < Dk; j++) k[t * Dk + j] = (float)(k[t * Dk + j] / ms); /* RMS-normed */
        g[t] = 0.98f;
        be[t] = 0.5f;
    }
    c.algo = GD_ALGO_RECURRENT;
    CHECK_INT_EQ(gd_forward(&c, r, S, q, k, v, g, be, NULL, 1, 1, T, Dk, Dv, NULL, NULL), GD_OK);
    for (i = 0; i < 256; i++) n1 += (double)S[i] * S[i];
    c.normalize_qk = 0;
    CHECK_INT_EQ(gd_forward(&c, r, S, q, k, v, g, be, NULL, 1, 1, T, Dk, Dv, NULL, NULL), GD_OK);
    for (i = 0; i < 256; i++) n2 += (double)S[i] * S[i];
    CHECK(sqrt(n1) < 50.0);
    CHECK(!(sqrt(n2) < 1e6)); /* diverged (Inf/NaN or huge) */
    free(q); free(k); free(v); free(g); free(be); free(r);
}

/* gd_step on a slot table reproduces gd_forward token by token; other slots untouched */
static void test_decode_step(void)
{
    const int H = 3, Dk = 10, Dv = 6, T = 13, N = 3, NS = 5;
    static const int slots[3] = {4, 0, 2};
    int lg;
    for (lg = 0; lg < 2; lg++) {
        gd_config c = gd_config_default();
        prob P = prob_make(N, H, T, Dk, Dv, GATES_RANDOM, lg, 77 + lg);
        size_t D2 = (size_t)Dk * Dv;
        float *table = (float *)malloc(sizeof(float) * NS * H * D2);
        float *table0 = (float *)malloc(sizeof(float) * NS * H * D2);
        float *rf = (float *)malloc(sizeof(float) * N * H * T * Dv);
        float *sf = (float *)malloc(sizeof(float) * N * H * D2);
        float *s0 = (float *)malloc(sizeof(float) * N * H * D2);
        float q1[3 * 3 * 10], k1[3 * 3 * 10], v1[3 * 3 * 6], g1[9], b1[9], r1[3 * 3 * 6];
        int n, h, t, d;
        c.gate_is_log = lg;
        tt_fill_normal(table, (long)NS * H * D2, 0.5);
        memcpy(table0, table, sizeof(float) * NS * H * D2);
        for (n = 0; n < N; n++)
            memcpy(s0 + (size_t)n * H * D2, table + (size_t)slots[n] * H * D2, sizeof(float) * H * D2);
        CHECK_INT_EQ(gd_forward(&c, rf, sf, P.q, P.k, P.v, P.g, P.be, s0, N, H, T, Dk, Dv, NULL,
                                NULL), GD_OK);
        for (t = 0; t < T; t++) {
            for (n = 0; n < N; n++)
                for (h = 0; h < H; h++) {
                    size_t o = ((size_t)n * H + h) * T + t;
                    memcpy(q1 + (n * H + h) * Dk, P.q + o * Dk, sizeof(float) * Dk);
                    memcpy(k1 + (n * H + h) * Dk, P.k + o * Dk, sizeof(float) * Dk);
                    memcpy(v1 + (n * H + h) * Dv, P.v + o * Dv, sizeof(float) * Dv);
                    g1[n * H + h] = P.g[o];
                    b1[n * H + h] = P.be[o];
                }
            CHECK_INT_EQ(gd_step(&c, table, NS, slots, N, H, Dk, Dv, q1, k1, v1, g1, b1, r1), GD_OK);
            for (n = 0; n < N; n++)
                for (h = 0; h < H; h++)
                    for (d = 0; d < Dv; d++) {
                        float ref = rf[(((size_t)n * H + h) * T + t) * Dv + d];
                        CHECK_CLOSE(r1[(n * H + h) * Dv + d], ref, 1e-4, 1e-5);
                    }
        }
        for (n = 0; n < N; n++)
            CHECK_ALL_CLOSE(table + (size_t)slots[n] * H * D2, sf + (size_t)n * H * D2, H * D2,
                            1e-4, 1e-5);
        CHECK(memcmp(table + 1 * H * D2, table0 + 1 * H * D2, sizeof(float) * H * D2) == 0);
        CHECK(memcmp(table + 3 * H * D2, table0 + 3 * H * D2, sizeof(float) * H * D2) == 0);
        free(table); free(table0); free(rf); free(sf); free(s0);
        prob_free(&P);
    }
}

/* gd_step with Dk beyond the on-stack buffer (heap path) */
static void test_decode_large_dk(void)
{
    const int N = 2, H = 1, Dk = 600, Dv = 3, T = 4;
    gd_config c = gd_config_default();
    prob P = prob_make(N, H, T, Dk, Dv, GATES_RANDOM, 0, 88);
    static const int slots[2] = {1, 0};
    float *table = (float *)calloc((size_t)2 * Dk * Dv, sizeof(float));
    float *rf = (float *)malloc(sizeof(float) * N * T * Dv), *sf = (float *)malloc(sizeof(float) * N * Dk * Dv);
    float *q1 = (float *)malloc(sizeof(float) * N * Dk), *k1 = (float *)malloc(sizeof(float) * N * Dk);
    float v1[6], g1[2], b1[2], r1[6];
    int t, n;
    CHECK_INT_EQ(gd_forward(&c, rf, sf, P.q, P.k, P.v, P.g, P.be, NULL, N, H, T, Dk, Dv, NULL, NULL), GD_OK);
    for (t = 0; t < T; t++) {
        for (n = 0; n < N; n++) {
            size_t o = (size_t)n * T + t;
            memcpy(q1 + n * Dk, P.q + o * Dk, sizeof(float) * Dk);
            memcpy(k1 + n * Dk, P.k + o * Dk, sizeof(float) * Dk);
            memcpy(v1 + n * Dv, P.v + o * Dv, sizeof(float) * Dv);
            g1[n] = P.g[o];
            b1[n] = P.be[o];
        }
        CHECK_INT_EQ(gd_step(&c, table, 2, slots, N, H, Dk, Dv, q1, k1, v1, g1, b1, r1), GD_OK);
        for (n = 0; n < N; n++)
            CHECK_ALL_CLOSE(r1 + n * Dv, rf + ((size_t)n * T + t) * Dv, Dv, 1e-4, 1e-5);
    }
    CHECK_ALL_CLOSE(table + (size_t)Dk * Dv, sf, Dk * Dv, 1e-4, 1e-5);
    CHECK_ALL_CLOSE(table, sf + (size_t)Dk * Dv, Dk * Dv, 1e-4, 1e-5);
    free(table); free(rf); free(sf); free(q1); free(k1);
    prob_free(&P);
}

/* ------------------------------------------------------------ gate helpers */
static double ref_gates(const double *x, const double *Wg, const double *bg, const double *Wb,
                        const double *bb, int B, int T, int Dx, int H, int lg, double *g,
                        double *be, const double *wg, const double *wb)
{
    int b, t, h, i;
    double loss = 0;
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++)
            for (h = 0; h < H; h++) {
                double zg = bg[h], zb = bb[h], sg, sb;
                size_t o = ((size_t)b * H + h) * T + t;
                for (i = 0; i < Dx; i++) {
                    zg += Wg[h * Dx + i] * x[((size_t)b * T + t) * Dx + i];
                    zb += Wb[h * Dx + i] * x[((size_t)b * T + t) * Dx + i];
                }
                sg = 1.0 / (1.0 + exp(-zg));
                sb = 1.0 / (1.0 + exp(-zb));
                if (lg) sg = log(sg);
                if (g) g[o] = sg;
                if (be) be[o] = sb;
                if (wg) loss += wg[o] * sg + wb[o] * sb;
            }
    return loss;
}

static void test_gates(void)
{
    const int B = 2, T = 5, Dx = 7, H = 3;
    int lg;
    for (lg = 0; lg < 2; lg++) {
        gd_config c = gd_config_default();
        float x[70], Wg[21], bg[3], Wb[21], bb[3], g[30], be[30], wg[30], wb[30];
        float dx[70], dWg[21], dbg[3], dWb[21], dbb[3];
        double gd_[30], bed[30], fd[70], *xd, *Wgd, *bgd, *Wbd, *bbd, *wgd, *wbd;
        const double h = 1e-6;
        size_t i;
        c.gate_is_log = lg;
        tt_seed(5 + lg);
        tt_fill_normal(x, 70, 1.0);
        tt_fill_normal(Wg, 21, 0.5);
        tt_fill_normal(Wb, 21, 0.5);
        CHECK_INT_EQ(gd_gates_init_bias(&c, bg, bb, H), GD_OK);
        CHECK_CLOSE(bg[1], 3.9f, 0, 0);
        CHECK_CLOSE(bb[2], 0.0, 0, 0);
        bg[1] = 0.3f; bb[0] = -0.2f;
        tt_fill_normal(wg, 30, 1.0);
        tt_fill_normal(wb, 30, 1.0);
        xd = to_d(x, 70); Wgd = to_d(Wg, 21); bgd = to_d(bg, 3); Wbd = to_d(Wb, 21);
        bbd = to_d(bb, 3); wgd = to_d(wg, 30); wbd = to_d(wb, 30);
        CHECK_INT_EQ(gd_gates_forward(&c, g, be, x, Wg, bg, Wb, bb, B, T, Dx, H), GD_OK);
        ref_gates(xd, Wgd, bgd, Wbd, bbd, B, T, Dx, H, lg, gd_, bed, NULL, NULL);
        CHECK_ALL_CLOSE(g, gd_, 30, 1e-5, 1e-6);
        CHECK_ALL_CLOSE(be, bed, 30, 1e-5, 1e-6);
        memset(dx, 0, sizeof dx); memset(dWg, 0, sizeof dWg); memset(dbg, 0, sizeof dbg);
        memset(dWb, 0, sizeof dWb); memset(dbb, 0, sizeof dbb);
        CHECK_INT_EQ(gd_gates_backward(&c, dx, dWg, dbg, dWb, dbb, wg, wb, x, Wg, bg, Wb, bb,
                                       B, T, Dx, H), GD_OK);
#define GFD(arr, n, out)                                                                 \
        for (i = 0; i < (size_t)(n); i++) {                                                \
            double s_ = arr[i], lp, lm;                                                    \
            arr[i] = s_ + h;                                                               \
            lp = ref_gates(xd, Wgd, bgd, Wbd, bbd, B, T, Dx, H, lg, NULL, NULL, wgd, wbd); \
            arr[i] = s_ - h;                                                               \
            lm = ref_gates(xd, Wgd, bgd, Wbd, bbd, B, T, Dx, H, lg, NULL, NULL, wgd, wbd); \
            arr[i] = s_;                                                                   \
            out[i] = (lp - lm) / (2 * h);                                                  \
        }
        GFD(xd, 70, fd); CHECK_ALL_CLOSE(dx, fd, 70, 1e-4, 1e-5);
        GFD(Wgd, 21, fd); CHECK_ALL_CLOSE(dWg, fd, 21, 1e-4, 1e-5);
        GFD(bgd, 3, fd); CHECK_ALL_CLOSE(dbg, fd, 3, 1e-4, 1e-5);
        GFD(Wbd, 21, fd); CHECK_ALL_CLOSE(dWb, fd, 21, 1e-4, 1e-5);
        GFD(bbd, 3, fd); CHECK_ALL_CLOSE(dbb, fd, 3, 1e-4, 1e-5);
#undef GFD
        /* log form is the stable one: a very negative pre-activation gives a finite log */
        if (lg) {
            float xx[1] = {1.0f}, W1[1] = {-200.0f}, gg[1], bb1[1];
            CHECK_INT_EQ(gd_gates_forward(&c, gg, bb1, xx, W1, NULL, W1, NULL, 1, 1, 1, 1), GD_OK);
            CHECK_CLOSE(gg[0], -200.0, 1e-5, 0);
        }
        free(xd); free(Wgd); free(bgd); free(Wbd); free(bbd); free(wgd); free(wbd);
    }
}

/* ------------------------------------------------------------ readout */
static double ref_readout(const double *r, const double *x, const double *nw, const double *Wg,
                          const double *bg, const double *Wp, int B, int T, int H, int Dv,
                          int Dx, int Dout, double eps, double *out, const double *w)
{
    int b, t, h, d, o, i;
    int HD = H * Dv;
    double loss = 0, *z = (double *)malloc(sizeof(double) * HD);
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++) {
            for (h = 0; h < H; h++) {
                const double *rr = r + (((size_t)b * H + h) * T + t) * Dv;
                double ms = 0;
                for (d = 0; d < Dv; d++) ms += rr[d] * rr[d];
                ms = 1.0 / sqrt(ms / Dv + eps);
                for (d = 0; d < Dv; d++) {
                    double pre = bg[h * Dv + d];
                    for (i = 0; i < Dx; i++) pre += Wg[(size_t)(h * Dv + d) * Dx + i] * x[((size_t)b * T + t) * Dx + i];
                    z[h * Dv + d] = rr[d] * ms * nw[d] / (1.0 + exp(-pre));
                }
            }
            for (o = 0; o < Dout; o++) {
                double s = 0;
                for (i = 0; i < HD; i++) s += Wp[(size_t)o * HD + i] * z[i];
                if (out) out[((size_t)b * T + t) * Dout + o] = s;
                if (w) loss += w[((size_t)b * T + t) * Dout + o] * s;
            }
        }
    free(z);
    return loss;
}

static void test_readout(void)
{
    enum { B = 2, T = 3, H = 2, Dv = 4, Dx = 5, Dout = 3 };
    const int HD = H * Dv, nr = B * H * T * Dv, nx = B * T * Dx, no = B * T * Dout;
    gd_config c = gd_config_default();
    float r[B * H * T * Dv], x[B * T * Dx], nw[Dv], Wg[H * Dv * Dx], bg[H * Dv], Wp[Dout * H * Dv];
    float out[B * T * Dout], w[B * T * Dout], z0[B * T * Dout];
    float dr[B * H * T * Dv], dx[B * T * Dx], dnw[Dv], dWg[H * Dv * Dx], dbg[H * Dv], dWp[Dout * H * Dv];
    double outd[B * T * Dout], fd[64], *rd, *xd, *nwd, *Wgd, *bgd, *Wpd, *wd;
    const double h = 1e-6;
    int i;
    tt_seed(9);
    tt_fill_normal(r, nr, 1.0);
    tt_fill_normal(x, nx, 1.0);
    tt_fill_normal(nw, Dv, 1.0);
    tt_fill_normal(Wg, HD * Dx, 0.5);
    tt_fill_normal(bg, HD, 0.5);
    tt_fill_normal(w, no, 1.0);
    /* zero W_proj: a no-op branch */
    memset(Wp, 0, sizeof Wp);
    CHECK_INT_EQ(gd_readout_forward(&c, z0, r, x, nw, Wg, bg, Wp, B, T, H, Dv, Dx, Dout, NULL), GD_OK);
    CHECK(maxabs(z0, no) == 0.0f);
    tt_fill_normal(Wp, Dout * HD, 0.5);
    rd = to_d(r, nr); xd = to_d(x, nx); nwd = to_d(nw, Dv); Wgd = to_d(Wg, HD * Dx);
    bgd = to_d(bg, HD); Wpd = to_d(Wp, Dout * HD); wd = to_d(w, no);
    CHECK_INT_EQ(gd_readout_forward(&c, out, r, x, nw, Wg, bg, Wp, B, T, H, Dv, Dx, Dout, NULL), GD_OK);
    ref_readout(rd, xd, nwd, Wgd, bgd, Wpd, B, T, H, Dv, Dx, Dout, c.rms_eps, outd, NULL);
    CHECK_ALL_CLOSE(out, outd, no, 1e-5, 1e-6);
    memset(dr, 0, sizeof dr); memset(dx, 0, sizeof dx); memset(dnw, 0, sizeof dnw);
    memset(dWg, 0, sizeof dWg); memset(dbg, 0, sizeof dbg); memset(dWp, 0, sizeof dWp);
    CHECK_INT_EQ(gd_readout_backward(&c, dr, dx, dnw, dWg, dbg, dWp, w, r, x, nw, Wg, bg, Wp, B,
                                     T, H, Dv, Dx, Dout, NULL), GD_OK);
#define RFD(arr, n, got)                                                                  \
    for (i = 0; i < (n); i++) {                                                           \
        double s_ = arr[i], lp, lm;                                                       \
        arr[i] = s_ + h;                                                                  \
        lp = ref_readout(rd, xd, nwd, Wgd, bgd, Wpd, B, T, H, Dv, Dx, Dout, c.rms_eps, NULL, wd); \
        arr[i] = s_ - h;                                                                  \
        lm = ref_readout(rd, xd, nwd, Wgd, bgd, Wpd, B, T, H, Dv, Dx, Dout, c.rms_eps, NULL, wd); \
        arr[i] = s_;                                                                      \
        fd[i] = (lp - lm) / (2 * h);                                                      \
    }                                                                                     \
    CHECK_ALL_CLOSE(got, fd, n, 1e-4, 1e-5);
    RFD(rd, nr, dr);
    RFD(xd, nx, dx);
    RFD(nwd, Dv, dnw);
    RFD(Wgd, HD * Dx, dWg);
    RFD(bgd, HD, dbg);
    RFD(Wpd, Dout * HD, dWp);
#undef RFD
    free(rd); free(xd); free(nwd); free(Wgd); free(bgd); free(Wpd); free(wd);
}

/* ------------------------------------------------------------ bad input */
static void test_bad_input(void)
{
    gd_config c = gd_config_default();
    prob P = prob_make(1, 1, 9, 4, 3, GATES_RANDOM, 0, 123);
    float r[27], so[12], dq[36], dk[36], dv[27], dg[9], db[9];
    gd_saved sv = gd_saved_init();
    int a, i;
    for (a = 0; a < 2; a++) {
        c.algo = a ? GD_ALGO_RECURRENT : GD_ALGO_CHUNKED;
        c.chunk_size = 4;
        /* a zero key (and query) is normalised to zero, no division by zero */
        for (i = 0; i < 4; i++) { P.k[2 * 4 + i] = 0.0f; P.q[5 * 4 + i] = 0.0f; }
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, &sv, NULL), GD_OK);
        for (i = 0; i < 27; i++) CHECK(r[i] == r[i] && fabsf(r[i]) < 1e6f);
        memset(dq, 0, sizeof dq); memset(dk, 0, sizeof dk); memset(dv, 0, sizeof dv);
        memset(dg, 0, sizeof dg); memset(db, 0, sizeof db);
        CHECK_INT_EQ(gd_backward(&c, &sv, dq, dk, dv, dg, db, NULL, r, NULL, P.q, P.k, P.v, P.g,
                                 P.be, NULL, 1, 1, 9, 4, 3, NULL), GD_OK);
        for (i = 0; i < 36; i++) CHECK(dk[i] == dk[i] && dq[i] == dq[i]);
        /* gamma = 0 and log gamma = -inf: floored, finite */
        P.g[3] = 0.0f;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_OK);
        for (i = 0; i < 27; i++) CHECK(r[i] == r[i]);
        P.g[3] = 0.9f;
        {
            gd_config cl = c;
            float lgt[9];
            for (i = 0; i < 9; i++) lgt[i] = -HUGE_VALF;
            cl.gate_is_log = 1;
            CHECK_INT_EQ(gd_forward(&cl, r, so, P.q, P.k, P.v, lgt, P.be, NULL, 1, 1, 9, 4, 3, &sv, NULL), GD_OK);
            for (i = 0; i < 27; i++) CHECK(r[i] == r[i]);
            memset(dg, 0, sizeof dg);
            CHECK_INT_EQ(gd_backward(&cl, &sv, dq, dk, dv, dg, db, NULL, r, NULL, P.q, P.k, P.v,
                                     lgt, P.be, NULL, 1, 1, 9, 4, 3, NULL), GD_OK);
            for (i = 0; i < 9; i++) CHECK(dg[i] == 0.0f);
            lgt[1] = 0.1f; /* log gate > 0 */
            CHECK_INT_EQ(gd_forward(&cl, r, so, P.q, P.k, P.v, lgt, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
            lgt[1] = NAN;
            CHECK_INT_EQ(gd_forward(&cl, r, so, P.q, P.k, P.v, lgt, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        }
        P.g[4] = 1.5f;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        P.g[4] = -0.1f;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        P.g[4] = NAN;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        P.g[4] = 0.9f;
        P.be[2] = 1.01f;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        P.be[2] = -1e-3f;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        P.be[2] = 0.5f;
        P.q[7] = NAN;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        P.q[7] = 0.5f;
        P.v[3] = HUGE_VALF;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        P.v[3] = 0.5f;
        P.s0[0] = NAN;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, P.s0, 1, 1, 9, 4, 3, NULL, NULL), GD_ERANGE);
        P.s0[0] = 0.0f;
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 0, 4, 3, NULL, NULL), GD_EINVAL);
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 0, 3, NULL, NULL), GD_EINVAL);
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, -1, 9, 4, 3, NULL, NULL), GD_EINVAL);
        CHECK_INT_EQ(gd_forward(&c, NULL, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_EINVAL);
        CHECK_INT_EQ(gd_forward(NULL, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_EINVAL);
        /* backward with a saved state from other shapes */
        CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, &sv, NULL), GD_OK);
        CHECK_INT_EQ(gd_backward(&c, &sv, dq, dk, dv, dg, db, NULL, r, NULL, P.q, P.k, P.v, P.g,
                                 P.be, NULL, 1, 1, 8, 4, 3, NULL), GD_EINVAL);
        {
            gd_config c2 = c;
            c2.algo = a ? GD_ALGO_CHUNKED : GD_ALGO_RECURRENT;
            CHECK_INT_EQ(gd_backward(&c2, &sv, dq, dk, dv, dg, db, NULL, r, NULL, P.q, P.k, P.v,
                                     P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL), GD_EINVAL);
        }
    }
    c = gd_config_default();
    c.chunk_size = 0;
    CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_EINVAL);
    c = gd_config_default();
    c.scale = NAN;
    CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_EINVAL);
    c = gd_config_default();
    c.algo = 7;
    CHECK_INT_EQ(gd_forward(&c, r, so, P.q, P.k, P.v, P.g, P.be, NULL, 1, 1, 9, 4, 3, NULL, NULL), GD_EINVAL);
    /* decode: slot out of range, repeated, negative */
    {
        float table[3 * 12], rr[2 * 3];
        int sl[2] = {0, 3};
        c = gd_config_default();
        memset(table, 0, sizeof table);
        CHECK_INT_EQ(gd_step(&c, table, 3, sl, 2, 1, 4, 3, P.q, P.k, P.v, P.g, P.be, rr), GD_ERANGE);
        sl[1] = -1;
        CHECK_INT_EQ(gd_step(&c, table, 3, sl, 2, 1, 4, 3, P.q, P.k, P.v, P.g, P.be, rr), GD_ERANGE);
        sl[1] = 0;
        CHECK_INT_EQ(gd_step(&c, table, 3, sl, 2, 1, 4, 3, P.q, P.k, P.v, P.g, P.be, rr), GD_ERANGE);
        sl[1] = 2;
        CHECK_INT_EQ(gd_step(&c, table, 3, sl, 2, 1, 4, 3, P.q, P.k, P.v, P.g, P.be, rr), GD_OK);
        CHECK_INT_EQ(gd_step(&c, NULL, 3, sl, 2, 1, 4, 3, P.q, P.k, P.v, P.g, P.be, rr), GD_EINVAL);
        CHECK_INT_EQ(gd_step(&c, table, 3, sl, 0, 1, 4, 3, P.q, P.k, P.v, P.g, P.be, rr), GD_EINVAL);
    }
    CHECK_INT_EQ(gd_gates_forward(&c, dg, db, NULL, dq, NULL, dq, NULL, 1, 1, 1, 1), GD_EINVAL);
    CHECK_INT_EQ(gd_readout_forward(&c, r, r, r, NULL, r, NULL, r, 1, 0, 1, 1, 1, 1, NULL), GD_EINVAL);
    CHECK(strcmp(gd_strerror(GD_ERANGE), gd_strerror(GD_EINVAL)) != 0);
    gd_saved_free(&sv);
    prob_free(&P);
}

/* same inputs, same thread count: bit-identical outputs and gradients */
static void test_deterministic(void)
{
    int a;
    for (a = 0; a < 2; a++) {
        gd_config c = gd_config_default();
        prob P = prob_make(2, 3, 70, 16, 16, GATES_RANDOM, 0, 55);
        size_t nv = (size_t)2 * 3 * 70 * 16, ns = (size_t)2 * 3 * 256;
        float *dr = (float *)malloc(sizeof(float) * nv), *dso = (float *)malloc(sizeof(float) * ns);
        grads G1, G2;
        c.algo = a;
        tt_fill_normal(dr, (long)nv, 1.0);
        tt_fill_normal(dso, (long)ns, 1.0);
        G1 = run_fb(&c, &P, dr, dso, 1);
        G2 = run_fb(&c, &P, dr, dso, 1);
        CHECK(memcmp(G1.r, G2.r, sizeof(float) * nv) == 0);
        CHECK(memcmp(G1.dq, G2.dq, sizeof(float) * 2 * 3 * 70 * 16) == 0);
        CHECK(memcmp(G1.dg, G2.dg, sizeof(float) * 2 * 3 * 70) == 0);
        CHECK(memcmp(G1.ds0, G2.ds0, sizeof(float) * ns) == 0);
        grads_free(&G1); grads_free(&G2);
        free(dr); free(dso);
        prob_free(&P);
    }
}

/* a caller workspace of gd_workspace_size bytes gives the same result as NULL */
static void test_workspace(void)
{
    gd_config c = gd_config_default();
    prob P = prob_make(1, 2, 50, 8, 8, GATES_RANDOM, 0, 66);
    float r1[800], r2[800];
    size_t sz = gd_workspace_size(&c, 1, 2, 50, 8, 8);
    void *ws = malloc(sz);
    CHECK(sz > 0);
    CHECK_INT_EQ(gd_forward(&c, r1, NULL, P.q, P.k, P.v, P.g, P.be, NULL, 1, 2, 50, 8, 8, NULL, NULL), GD_OK);
    CHECK_INT_EQ(gd_forward(&c, r2, NULL, P.q, P.k, P.v, P.g, P.be, NULL, 1, 2, 50, 8, 8, NULL, ws), GD_OK);
    CHECK(memcmp(r1, r2, sizeof r1) == 0);
    free(ws);
    prob_free(&P);
}

/* Strided entry points (issue 22): q, k, v from an interleaved (B,T,3C) qkv, r into
   (B,T,C), gradients added into an interleaved dqkv. Equal to the contiguous calls bit
   for bit (gradient buffers from zero), within rounding when they accumulate onto
   values; the strided dq against central differences of the double reference. */
static void check_strided(int algo, int T, int step)
{
    enum { B = 2, H = 2, D = 5 };
    const long C = (long)H * D;
    gd_config c = gd_config_default();
    prob P = prob_make(B, H, T, D, D, GATES_RANDOM, 0, 900 + algo);
    size_t nq = (size_t)B * H * T * D, ng = (size_t)B * H * T, n3 = (size_t)B * T * 3 * C, i;
    float *qkv = (float *)malloc(sizeof(float) * n3), *dqkv = (float *)calloc(n3, sizeof(float));
    float *dqkv1 = (float *)malloc(sizeof(float) * n3), *rs = (float *)malloc(sizeof(float) * nq);
    float *dr = (float *)malloc(sizeof(float) * nq), *drs = (float *)malloc(sizeof(float) * nq);
    float *dg = (float *)calloc(ng, sizeof(float)), *db = (float *)calloc(ng, sizeof(float));
    float *dq1 = (float *)malloc(sizeof(float) * nq), *dk1 = (float *)malloc(sizeof(float) * nq);
    float *dv1 = (float *)malloc(sizeof(float) * nq);
    gd_layout lay = gd_layout_qkv(H, T, D);
    gd_saved sv = gd_saved_init();
    grads G;
    long bad = 0, bad1 = 0;
    int b, h, t, d;
    c.algo = algo;
    c.chunk_size = step;
    c.checkpoint = step;
    tt_fill_normal(dr, (long)nq, 1.0);
    tt_fill_normal(dqkv1, (long)n3, 1.0);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (t = 0; t < T; t++)
                for (d = 0; d < D; d++) {
                    size_t ci = (((size_t)b * H + h) * T + t) * D + d;
                    size_t x = ((size_t)b * T + t) * 3 * C + (size_t)h * D + d;
                    qkv[x] = P.q[ci]; qkv[x + C] = P.k[ci]; qkv[x + 2 * C] = P.v[ci];
                    drs[((size_t)b * T + t) * C + (size_t)h * D + d] = dr[ci];
                }
    G = run_fb(&c, &P, dr, NULL, 1);
    CHECK_INT_EQ(gd_forward_strided(&c, &lay, rs, NULL, qkv, qkv + C, qkv + 2 * C, P.g, P.be,
                                    P.s0, B, H, T, D, D, &sv, NULL), GD_OK);
    CHECK_INT_EQ(gd_backward_strided(&c, &lay, &sv, dqkv, dqkv + C, dqkv + 2 * C, dg, db, NULL,
                                     drs, NULL, qkv, qkv + C, qkv + 2 * C, P.g, P.be, P.s0, B,
                                     H, T, D, D, NULL), GD_OK);
    /* accumulating onto random values: the contiguous call gets the same start */
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (t = 0; t < T; t++)
                for (d = 0; d < D; d++) {
                    size_t ci = (((size_t)b * H + h) * T + t) * D + d;
                    size_t x = ((size_t)b * T + t) * 3 * C + (size_t)h * D + d;
                    dq1[ci] = dqkv1[x]; dk1[ci] = dqkv1[x + C]; dv1[ci] = dqkv1[x + 2 * C];
                }
    CHECK_INT_EQ(gd_backward_strided(&c, &lay, &sv, dqkv1, dqkv1 + C, dqkv1 + 2 * C, dg, db,
                                     NULL, drs, NULL, qkv, qkv + C, qkv + 2 * C, P.g, P.be,
                                     P.s0, B, H, T, D, D, NULL), GD_OK);
    for (i = 0; i < ng; i++) { /* dg, db got two equal backward passes */
        bad += dg[i] != 2.0f * G.dg[i];
        bad += db[i] != 2.0f * G.dbe[i];
    }
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (t = 0; t < T; t++)
                for (d = 0; d < D; d++) {
                    size_t ci = (((size_t)b * H + h) * T + t) * D + d;
                    size_t x = ((size_t)b * T + t) * 3 * C + (size_t)h * D + d;
                    bad += memcmp(rs + ((size_t)b * T + t) * C + (size_t)h * D + d, G.r + ci, 4) != 0;
                    bad += memcmp(dqkv + x, G.dq + ci, 4) != 0;
                    bad += memcmp(dqkv + x + C, G.dk + ci, 4) != 0;
                    bad += memcmp(dqkv + x + 2 * C, G.dv + ci, 4) != 0;
                    bad1 += fabsf(dqkv1[x] - (dq1[ci] + G.dq[ci])) > 1e-6f * (1 + fabsf(dq1[ci]));
                    bad1 += fabsf(dqkv1[x + 2 * C] - (dv1[ci] + G.dv[ci])) >
                            1e-6f * (1 + fabsf(dv1[ci]));
                }
    CHECK_INT_EQ(bad, 0);
    CHECK_INT_EQ(bad1, 0);
    { /* the strided dq (gathered) against finite differences of the reference */
        refp p = refp_of(&P, &c);
        double *qd = to_d(P.q, nq), *kd = to_d(P.k, nq), *vd = to_d(P.v, nq);
        double *gdd = to_d(P.g, ng), *bd = to_d(P.be, ng), *s0d = to_d(P.s0, (size_t)B * H * D * D);
        double *wr = to_d(dr, nq), *fdv = (double *)malloc(sizeof(double) * nq);
        float *an = (float *)malloc(sizeof(float) * nq);
        const double hh = 1e-5;
        for (i = 0; i < nq; i++) {
            double s_ = qd[i], lp, lm;
            qd[i] = s_ + hh;
            lp = ref_forward(&p, qd, kd, vd, gdd, bd, s0d, NULL, NULL, wr, NULL);
            qd[i] = s_ - hh;
            lm = ref_forward(&p, qd, kd, vd, gdd, bd, s0d, NULL, NULL, wr, NULL);
            qd[i] = s_;
            fdv[i] = (lp - lm) / (2 * hh);
        }
        for (b = 0; b < B; b++)
            for (h = 0; h < H; h++)
                for (t = 0; t < T; t++)
                    for (d = 0; d < D; d++)
                        an[(((size_t)b * H + h) * T + t) * D + d] =
                            dqkv[((size_t)b * T + t) * 3 * C + (size_t)h * D + d];
        CHECK_ALL_CLOSE(an, fdv, nq, 1e-3, 1e-4);
        free(qd); free(kd); free(vd); free(gdd); free(bd); free(s0d); free(wr); free(fdv);
        free(an);
    }
    lay.q[0] = -1;
    CHECK_INT_EQ(gd_forward_strided(&c, &lay, rs, NULL, qkv, qkv + C, qkv + 2 * C, P.g, P.be,
                                    P.s0, B, H, T, D, D, NULL, NULL), GD_EINVAL);
    gd_saved_free(&sv);
    grads_free(&G);
    free(qkv); free(dqkv); free(dqkv1); free(rs); free(dr); free(drs); free(dg); free(db);
    free(dq1); free(dk1); free(dv1);
    prob_free(&P);
}
static void test_strided_qkv(void)
{
    check_strided(GD_ALGO_CHUNKED, 13, 4);
    check_strided(GD_ALGO_RECURRENT, 9, 3);
}

/* ------------------------------------------------------------ issue 38: float64 sweep */
/* The float32 library (chunked C = 16 and recurrent, checkpoint 16) against ref64.h's
   float64 transcription of eqs. 16-25 (tape gradients), in every regime the paper
   reaches: gates near 0 (down to 0 exactly) and near 1 (up to 1 exactly), log gates
   -30..-5, beta near 0 and 1 (exact 0 and 1 included), keys (and queries) of norm
   1e-5..1e-2 (|k|^2 below and above norm_eps), T = 2048 with gamma ~ 1 and beta ~ 1
   (a 4x4 state that saturates: capacity 4 keys, 2048 writes). Relative error per tensor
   to its max-norm: 1e-4 forward (r, final state), 2e-3 gradients. */
static void gd_sweep_run(r64_report *rep, r64_gd_case *c, int algo)
{
    gd_config cfg = gd_config_default();
    const size_t nq = (size_t)c->B * c->H * c->T * c->Dk, nv = (size_t)c->B * c->H * c->T * c->Dv;
    const size_t ng = (size_t)c->B * c->H * c->T, nS = (size_t)c->B * c->H * c->Dv * c->Dk;
    float *r = (float *)malloc(sizeof(float) * nv), *S = (float *)malloc(sizeof(float) * nS);
    float *dq = (float *)calloc(nq, sizeof(float)), *dk = (float *)calloc(nq, sizeof(float));
    float *dv = (float *)calloc(nv, sizeof(float)), *dg = (float *)calloc(ng, sizeof(float));
    float *db = (float *)calloc(ng, sizeof(float));
    gd_saved sv = gd_saved_init();
    double e[7];
    int i;
    static const char *nm[2][7] = {
        {"chunked r", "chunked state", "chunked dq", "chunked dk", "chunked dv",
         "chunked dgates", "chunked dbeta"},
        {"recurrent r", "recurrent state", "recurrent dq", "recurrent dk", "recurrent dv",
         "recurrent dgates", "recurrent dbeta"}};
    cfg.algo = algo;
    cfg.chunk_size = 16;
    cfg.checkpoint = 16;
    cfg.gate_is_log = c->gate_is_log;
    CHECK_INT_EQ(gd_forward(&cfg, r, S, c->q, c->k, c->v, c->g, c->be, NULL, c->B, c->H, c->T,
                            c->Dk, c->Dv, &sv, NULL), GD_OK);
    CHECK_INT_EQ(gd_backward(&cfg, &sv, dq, dk, dv, dg, db, NULL, c->dr, c->dS, c->q, c->k,
                             c->v, c->g, c->be, NULL, c->B, c->H, c->T, c->Dk, c->Dv, NULL),
                 GD_OK);
    e[0] = r64_relerr_f(r, c->r, (long)nv);
    e[1] = r64_relerr_f(S, c->S, (long)nS);
    e[2] = r64_relerr_f(dq, c->dq, (long)nq);
    e[3] = r64_relerr_f(dk, c->dk, (long)nq);
    e[4] = r64_relerr_f(dv, c->dv, (long)nv);
    e[5] = r64_relerr_f(dg, c->dg, (long)ng);
    e[6] = r64_relerr_f(db, c->dbe, (long)ng);
    for (i = 0; i < 7; i++) {
        r64_note(rep, nm[algo == GD_ALGO_RECURRENT][i], c->name, e[i]);
        if (!(e[i] <= (i < 2 ? R64_TOL_FWD : R64_TOL_GRAD))) {
            fprintf(stderr, "  %s, %s: relative error %.3e\n", c->name,
                    nm[algo == GD_ALGO_RECURRENT][i], e[i]);
            CHECK(e[i] <= (i < 2 ? R64_TOL_FWD : R64_TOL_GRAD));
        }
    }
    gd_saved_free(&sv);
    free(r); free(S); free(dq); free(dk); free(dv); free(dg); free(db);
}

static void test_sweep_float64(void)
{
    r64_report rep;
    int reg;
    memset(&rep, 0, sizeof rep);
    for (reg = 0; reg < R64_GD_NREGIMES; reg++) {
        r64_gd_case c;
        r64_gd_make(&c, reg, 2048);
        gd_sweep_run(&rep, &c, GD_ALGO_CHUNKED);
        gd_sweep_run(&rep, &c, GD_ALGO_RECURRENT);
        r64_gd_free(&c);
    }
    r64_print(&rep, "gdelta CPU vs float64 (eqs. 16-25)");
}

/* Issue 38: the readout RMSNorm epsilon. The paper gives none; the default is 1e-6; the
   seed's code uses the fp32 machine epsilon (GD_RMS_EPS_SEED). Early in a sequence r is
   small (mean square ~1e-6 here) and the choice shows in the output: each setting must
   match the float64 RMSNorm with its own eps, and the two must differ. */
static void test_readout_rms_eps_seed(void)
{
    enum { B = 1, T = 2, H = 2, Dv = 4, Dx = 3 };
    const int HD = H * Dv;
    float r[B * H * T * Dv], x[B * T * Dx], Wg[H * Dv * Dx], bg[H * Dv], Wp[H * Dv * H * Dv];
    float o1[B * T * H * Dv], o2[B * T * H * Dv];
    double ref1[B * T * H * Dv], ref2[B * T * H * Dv];
    gd_config c = gd_config_default();
    int i, t, h, d;
    double worst = 0.0;
    CHECK(c.rms_eps == 1e-6f);
    CHECK(GD_RMS_EPS_SEED == 1.1920928955078125e-7f);
    tt_seed(38);
    tt_fill_normal(r, B * H * T * Dv, 1e-3);
    memset(x, 0, sizeof x);
    memset(Wg, 0, sizeof Wg);
    for (i = 0; i < HD; i++) bg[i] = 40.0f; /* sigma(40) == 1 in float: the gate is open */
    memset(Wp, 0, sizeof Wp);
    for (i = 0; i < HD; i++) Wp[i * HD + i] = 1.0f; /* identity projection: out = y */
    CHECK_INT_EQ(gd_readout_forward(&c, o1, r, x, NULL, Wg, bg, Wp, B, T, H, Dv, Dx, HD, NULL), GD_OK);
    c.rms_eps = GD_RMS_EPS_SEED;
    CHECK_INT_EQ(gd_readout_forward(&c, o2, r, x, NULL, Wg, bg, Wp, B, T, H, Dv, Dx, HD, NULL), GD_OK);
    for (t = 0; t < T; t++)
        for (h = 0; h < H; h++) {
            const float *rr = r + ((size_t)h * T + t) * Dv;
            double ms = 0.0;
            for (d = 0; d < Dv; d++) ms += (double)rr[d] * rr[d];
            ms /= Dv;
            for (d = 0; d < Dv; d++) {
                ref1[(size_t)t * HD + h * Dv + d] = rr[d] / sqrt(ms + 1e-6);
                ref2[(size_t)t * HD + h * Dv + d] = rr[d] / sqrt(ms + 1.1920928955078125e-7);
            }
        }
    CHECK_ALL_CLOSE(o1, ref1, T * HD, 1e-5, 1e-6);
    CHECK_ALL_CLOSE(o2, ref2, T * HD, 1e-5, 1e-6);
    for (i = 0; i < T * HD; i++)
        if (fabs((double)o2[i] - o1[i]) > worst) worst = fabs((double)o2[i] - o1[i]);
    CHECK(worst > 0.05); /* the two settings are distinguishable here */
    c.rms_eps = -GD_RMS_EPS_SEED;
    CHECK_INT_EQ(gd_readout_forward(&c, o2, r, x, NULL, Wg, bg, Wp, B, T, H, Dv, Dx, HD, NULL), GD_EINVAL);
}

/* Issue 37 rule 4: flag-like config fields outside their values are GD_EINVAL (before,
   gate_is_log 2 or normalize_qk -1 ran as 1; math 7 passed on the CPU). */
static void test_flags_range_checked(void)
{
    enum { T = 3, D = 4 };
    float q[T * D], k[T * D], v[T * D], g[T], be[T], r[T * D];
    gd_config c;
    int bad[4] = {-1, 2, 3, 1 << 30}, i, fld, slot0 = 0;
    tt_seed(37);
    tt_fill_normal(q, T * D, 1.0);
    tt_fill_normal(k, T * D, 1.0);
    tt_fill_normal(v, T * D, 1.0);
    for (i = 0; i < T; i++) { g[i] = 0.9f; be[i] = 0.5f; }
    for (fld = 0; fld < 3; fld++)
        for (i = 0; i < 4; i++) {
            c = gd_config_default();
            if (fld == 0) c.gate_is_log = bad[i];
            if (fld == 1) c.normalize_qk = bad[i];
            if (fld == 2) c.math = bad[i] == 2 ? 7 : bad[i]; /* 2 is GD_MATH_BF16 */
            CHECK_INT_EQ(gd_forward(&c, r, NULL, q, k, v, g, be, NULL, 1, 1, T, D, D, NULL, NULL),
                         GD_EINVAL);
            CHECK_INT_EQ(gd_step(&c, r, 1, &slot0, 1, 1, 2, 2, q, k, v, g, be, r + 8), GD_EINVAL);
        }
    c = gd_config_default();
    c.gate_is_log = 1;
    for (i = 0; i < T; i++) g[i] = -0.1f;
    CHECK_INT_EQ(gd_forward(&c, r, NULL, q, k, v, g, be, NULL, 1, 1, T, D, D, NULL, NULL), GD_OK);
    c.normalize_qk = 0;
    CHECK_INT_EQ(gd_forward(&c, r, NULL, q, k, v, g, be, NULL, 1, 1, T, D, D, NULL, NULL), GD_OK);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_recurrent_vs_double);
    TEST_RUN(test_recurrent_grad_fd);
    TEST_RUN(test_chunked_grad_fd);
    TEST_RUN(test_chunked_vs_recurrent);
    TEST_RUN(test_chunked_regimes);
    TEST_RUN(test_chunked_d64);
    TEST_RUN(test_finding1_key_norm);
    TEST_RUN(test_finding2_self_stabilising);
    TEST_RUN(test_decode_step);
    TEST_RUN(test_decode_large_dk);
    TEST_RUN(test_gates);
    TEST_RUN(test_readout);
    TEST_RUN(test_bad_input);
    TEST_RUN(test_deterministic);
    TEST_RUN(test_workspace);
    TEST_RUN(test_strided_qkv);
    TEST_RUN(test_sweep_float64);
    TEST_RUN(test_readout_rms_eps_seed);
    TEST_RUN(test_flags_range_checked);
    return TEST_END();
}
