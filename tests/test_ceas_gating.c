/* test_ceas_gating.c - CEAS gating in training (issue 20; examples/common/model.c):
   the gate rows against ceas_row_observables, the token-mask floors, the gated attention
   backward against the dense backward with the pruned rows' output gradients zeroed (exact
   comparison) and against finite differences of the masked objective, frozen heads
   (zero gradients, projection gradients of the other heads unchanged, parameters
   bit-identical through an AdamW step), the skipped-FLOP count against the rows the
   backward really left out, gating beside the RPA and ERA priors (the bias gradient
   against the dense backward, whole-model gradients against the masked dense backward and
   against finite differences of the held-rows objective), refused inputs, and the
   byte-level WikiText-2 data. */
#define _POSIX_C_SOURCE 200809L
#include <stb_ds.h>
/* the unit under test, compiled in for its internals (mdl__*); the headers' bodies, stb_ds,
   the BPE, the data loader and the layers are linked (Makefile: TEST_OBJS_test_ceas_gating) */
#include "../examples/common/data.h"
#include "../tensor.h"
/* The model's dense CPU attention calls go through the test's hooks (tg_*, below): the
   backward can zero the output gradients of the pruned rows and frozen heads (the
   reference the gated backward must equal), the forward can hold those rows' outputs at
   a saved value (the objective whose finite differences the gated gradients are). The
   declarations above keep the real names; only model.c's calls are renamed. */
static int tg_attn_fwd(float *out, float *probs, const float *q, const float *k, const float *v, const float *bias,
                       int bias_per_head, const float *temp, int B, int H, int T, int D);
static int tg_attn_bwd(float *dq, float *dk, float *dv, float *dbias, float *dtemp, const float *dout,
                       const float *probs, const float *q, const float *k, const float *v, int bias_per_head,
                       const float *temp, int B, int H, int T, int D);
#define tk_attention_forward tg_attn_fwd
#define tk_attention_backward tg_attn_bwd
#include "../examples/common/model.c"
#undef tk_attention_forward
#undef tk_attention_backward
#include "attnkit_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GB 2
#define GT 80 /* > 64 kept rows in a head: the gated backward works in several chunks */
#define GV 29

/* the hooks' state: the model, its gating (keep (L,B,H,T), frozen (L,H)) and what to do */
static struct {
    const mdl_model *m;
    const unsigned char *keep, *frozen;
    int mask_bwd; /* 1: the dense backward sees the gated rows' output gradients as 0 */
    int save_fwd; /* 1: the forward copies its outputs into hold */
    int hold_fwd; /* 1: the gated rows' outputs are replaced by hold's */
    float *hold;  /* (L, B,H,T,D) */
    float *scr;   /* (B,H,T,D) */
} tg;

static int tg_layer(const float *probs)
{
    int l;
    if (!tg.m) return -1;
    for (l = 0; l < tg.m->L; l++)
        if (probs == tg.m->ba[l].probs) return l;
    return -1;
}

/* 1: row i of unit u = b H + h of layer l is gated (pruned or its head frozen) */
static int tg_gated(int l, int B, int H, int T, int u, int i)
{
    return tg.frozen[(size_t)l * H + u % H] || !tg.keep[((size_t)l * B * H + u) * T + i];
}

static int tg_attn_fwd(float *out, float *probs, const float *q, const float *k, const float *v, const float *bias,
                       int bias_per_head, const float *temp, int B, int H, int T, int D)
{
    int l = tg_layer(probs), rc = tk_attention_forward(out, probs, q, k, v, bias, bias_per_head, temp, B, H, T, D);
    size_t n = (size_t)B * H * T * D;
    if (rc != TK_OK || l < 0) return rc;
    if (tg.save_fwd) memcpy(tg.hold + (size_t)l * n, out, sizeof(float) * n);
    if (tg.hold_fwd) {
        int u, i;
        for (u = 0; u < B * H; u++)
            for (i = 0; i < T; i++)
                if (tg_gated(l, B, H, T, u, i))
                    memcpy(out + ((size_t)u * T + i) * D, tg.hold + (size_t)l * n + ((size_t)u * T + i) * D,
                           sizeof(float) * (size_t)D);
    }
    return rc;
}

static int tg_attn_bwd(float *dq, float *dk, float *dv, float *dbias, float *dtemp, const float *dout,
                       const float *probs, const float *q, const float *k, const float *v, int bias_per_head,
                       const float *temp, int B, int H, int T, int D)
{
    int l = tg.mask_bwd ? tg_layer(probs) : -1;
    if (l >= 0) {
        int u, i;
        memcpy(tg.scr, dout, sizeof(float) * (size_t)B * H * T * D);
        for (u = 0; u < B * H; u++)
            for (i = 0; i < T; i++)
                if (tg_gated(l, B, H, T, u, i)) memset(tg.scr + ((size_t)u * T + i) * D, 0, sizeof(float) * (size_t)D);
        dout = tg.scr;
    }
    return tk_attention_backward(dq, dk, dv, dbias, dtemp, dout, probs, q, k, v, bias_per_head, temp, B, H, T, D);
}

static mdl_config gcfg(void)
{
    mdl_config c = mdl_config_default();
    c.vocab = GV;
    c.d_model = 16;
    c.n_layers = 2;
    c.n_heads = 2;
    c.max_T = GT;
    c.d_ff_mult = 2;
    c.init_std = 0.3f;
    return c;
}

static mdl_model *make(const mdl_config *c, int *x, int *y)
{
    mdl_model *m = NULL;
    char err[256];
    int i, rc = mdl_create(&m, c, 5, err, sizeof err);
    CHECK_INT_EQ(rc, MDL_OK);
    if (rc) return NULL;
    tt_seed(3);
    for (i = 0; i < GB * GT; i++) {
        x[i] = (int)(tt_uniform() * GV);
        y[i] = (int)(tt_uniform() * GV);
    }
    return m;
}

static int fwd(mdl_model *m, const int *x, const int *y, int rows, mdl_stats *st)
{
    mdl_opts o = mdl_opts_default();
    o.train = 1;
    o.want_gate_rows = rows;
    return mdl_forward(m, x, y, GB, GT, &o, st);
}

/* the gate rows equal ceas_row_observables of the recomputed logits */
static void test_gate_rows(void)
{
    mdl_config c = gcfg();
    int x[GB * GT], y[GB * GT], l, u, i, j, d, bad = 0;
    mdl_stats st;
    mdl_model *m = make(&c, x, y);
    if (!m) return;
    CHECK_INT_EQ(fwd(m, x, y, 1, &st), MDL_OK);
    CHECK(st.gate_rows != NULL);
    for (l = 0; l < c.n_layers; l++)
        for (u = 0; u < GB * c.n_heads; u++)
            for (i = 0; i < GT; i += 7) {
                const mdl__ba *a = &m->ba[l];
                float z[GT], al = 1.0f / sqrtf((float)m->D);
                ceas_obs ref;
                const ceas_obs *g = st.gate_rows + ((size_t)l * GB * c.n_heads + u) * GT + i;
                for (j = 0; j <= i; j++) {
                    double s = 0;
                    for (d = 0; d < m->D; d++)
                        s += (double)a->q[((size_t)u * GT + i) * m->D + d] * a->k[((size_t)u * GT + j) * m->D + d];
                    z[j] = (float)(s * al);
                }
                CHECK_INT_EQ(ceas_row_observables(&ref, z, i + 1, al), CEAS_OK);
                if (fabs(ref.H - g->H) > 2e-4 + 1e-4 * ref.H || fabs(ref.sigma_qk - g->sigma_qk) > 1e-4 + 1e-4 * ref.sigma_qk ||
                    fabs(ref.var_s - g->var_s) > 1e-3 + 1e-3 * ref.var_s || g->n != i + 1 ||
                    fabs(ref.log_n - g->log_n) > 1e-6) {
                    if (!bad) fprintf(stderr, "gate row l%d u%d i%d: H %g vs %g, sigma %g vs %g, var %g vs %g\n", l, u, i,
                                      g->H, ref.H, g->sigma_qk, ref.sigma_qk, g->var_s, ref.var_s);
                    bad++;
                }
            }
    CHECK_INT_EQ(bad, 0);
    /* evaluation forwards cannot ask for them; the forward itself is unchanged */
    {
        mdl_opts o = mdl_opts_default();
        mdl_stats s2;
        o.want_gate_rows = 1;
        CHECK_INT_EQ(mdl_forward(m, x, y, GB, GT, &o, &s2), MDL_EINVAL);
        CHECK_INT_EQ(fwd(m, x, y, 0, &s2), MDL_OK);
        CHECK(s2.gate_rows == NULL);
        CHECK(s2.loss == st.loss);
    }
    mdl_destroy(m);
}

/* ceas gating through the model: the floors m_min per (sequence, head) and h_min hold */
static void test_mask_floors(void)
{
    mdl_config c = gcfg();
    int x[GB * GT], y[GB * GT], l, b, h, i, k, qk;
    mdl_stats st;
    ceas_state cs;
    ceas_config cc;
    mdl_model *m = make(&c, x, y);
    if (!m) return;
    ceas_config_preset(CEAS_PRESET_9K, &cc);
    cc.m_min = 30;   /* above ceil(q T) = 24 at q 0.3: the floor binds */
    cc.q_init = 0.3f;
    cc.t_max = cc.t_inf = 50.0f; /* no token passes the threshold: only top-q and the floor keep */
    CHECK_INT_EQ(ceas_init(&cs, &cc, c.n_layers, c.n_heads, m->D), CEAS_OK);
    CHECK_INT_EQ(fwd(m, x, y, 1, &st), MDL_OK);
    CHECK_INT_EQ(mdl_ceas_gating(m, &cs, 1, 1), MDL_OK);
    CHECK_INT_EQ(m->gate_keep_on, 1);
    for (l = 0; l < c.n_layers; l++)
        for (b = 0; b < GB; b++)
            for (h = 0; h < c.n_heads; h++) {
                const unsigned char *kp = m->gate_keep + (((size_t)l * GB + b) * c.n_heads + h) * GT;
                for (i = k = 0; i < GT; i++) k += kp[i];
                CHECK_INT_EQ(k, 30);
            }
    /* q above the floor: ceil(0.55 * 80) = 44 kept */
    cs.cfg.m_min = 4;
    cs.cfg.q_init = 0.55f;
    CHECK_INT_EQ(mdl_ceas_gating(m, &cs, 1, 1), MDL_OK);
    for (l = 0; l < c.n_layers; l++)
        for (b = 0; b < GB; b++)
            for (h = 0; h < c.n_heads; h++) {
                const unsigned char *kp = m->gate_keep + (((size_t)l * GB + b) * c.n_heads + h) * GT;
                for (i = k = 0; i < GT; i++) k += kp[i];
                CHECK_INT_EQ(k, 44);
            }
    /* the kept rows are the top-q by score: every kept score >= every pruned one */
    {
        const unsigned char *kp = m->gate_keep;
        float mn = INFINITY, mx = -INFINITY, beta[2];
        float sc[GB * 2 * GT];
        for (h = 0; h < 2; h++) beta[h] = 1.0f / sqrtf((float)m->D);
        CHECK_INT_EQ(ceas_gate_scores(sc, st.gate_rows, beta, GB, 2, GT), CEAS_OK);
        for (qk = 0; qk < GT; qk++) {
            if (kp[qk] && sc[qk] < mn) mn = sc[qk];
            if (!kp[qk] && sc[qk] > mx) mx = sc[qk];
        }
        CHECK(mn >= mx);
    }
    /* head floor: h_min 2 of 2 heads keeps both active whatever the entropies say */
    for (i = 0; i < 2 * c.n_heads; i++) cs.frozen[i] = 0;
    {
        ceas_obs heads[4];
        int s;
        memset(heads, 0, sizeof heads);
        for (i = 0; i < 4; i++) {
            heads[i].H = i % 2 ? 3.0f : 0.1f; /* head 0 far sharper than its layer */
            heads[i].n_eff = expf(heads[i].H);
            heads[i].var_s = 1.0f;
            heads[i].sigma_qk = 1.0f;
            heads[i].log_n = logf(40.0f);
            heads[i].n = 40;
        }
        cs.cfg.h_min = 2;
        cs.cfg.freeze_window = 3;
        for (s = 0; s < 10; s++) CHECK_INT_EQ(ceas_step(&cs, heads), CEAS_OK);
        CHECK_INT_EQ(cs.frozen[0] + cs.frozen[1] + cs.frozen[2] + cs.frozen[3], 0);
        cs.cfg.h_min = 1;
        for (s = 0; s < 4; s++) CHECK_INT_EQ(ceas_step(&cs, heads), CEAS_OK);
        CHECK_INT_EQ(cs.frozen[0], 1);
        CHECK_INT_EQ(cs.frozen[2], 1);
        CHECK_INT_EQ(cs.frozen[1] + cs.frozen[3], 0);
    }
    ceas_free(&cs);
    mdl_destroy(m);
}

/* random keep mask (about 40% pruned) and layer 0's head 1 frozen */
static void random_gating(mdl_model *m, unsigned char *keep, unsigned char *frozen)
{
    size_t e, n = (size_t)m->L * GB * m->H * GT;
    tt_seed(99);
    for (e = 0; e < n; e++) keep[e] = tt_uniform() < 0.6;
    memset(frozen, 0, (size_t)m->L * m->H);
    frozen[1] = 1;
}

/* the masked objective f(q,k,v) = sum over kept rows of heads not frozen of G . out */
static double masked_obj(const mdl_model *m, const float *q, const float *k, const float *v, const float *G,
                         const unsigned char *kp, const unsigned char *fz, float *out, float *probs)
{
    int B = GB, H = m->H, T = GT, D = m->D, u, i, d;
    double s = 0;
    if (tk_attention_forward(out, probs, q, k, v, NULL, 0, NULL, B, H, T, D) != TK_OK) return NAN;
    for (u = 0; u < B * H; u++) {
        if (fz[u % H]) continue;
        for (i = 0; i < T; i++) {
            if (!kp[(size_t)u * T + i]) continue;
            for (d = 0; d < D; d++) s += (double)G[((size_t)u * T + i) * D + d] * out[((size_t)u * T + i) * D + d];
        }
    }
    return s;
}

/* gated core backward == dense backward with the pruned rows' (and the frozen head's)
   output gradients zeroed; both against finite differences of the masked objective */
static void test_gated_core(void)
{
    mdl_config c = gcfg();
    int x[GB * GT], y[GB * GT], u, i, d, H, D;
    size_t NC, e, nk;
    mdl_stats st;
    unsigned char *keep, frozen[4];
    float *G, *G0, *dq, *dk, *dv, *out, *probs, *qq, *kk, *vv;
    mdl_model *m = make(&c, x, y);
    if (!m) return;
    H = m->H;
    D = m->D;
    NC = (size_t)GB * GT * c.d_model;
    nk = (size_t)c.n_layers * GB * H * GT;
    keep = (unsigned char *)malloc(nk);
    G = (float *)malloc(sizeof(float) * NC * 11);
    G0 = G + NC; dq = G0 + NC; dk = dq + NC; dv = dk + NC; out = dv + NC;
    probs = (float *)malloc(sizeof(float) * (size_t)GB * H * GT * GT);
    qq = out + NC; kk = qq + NC; vv = kk + NC;
    CHECK_INT_EQ(fwd(m, x, y, 0, &st), MDL_OK);
    random_gating(m, keep, frozen);
    CHECK_INT_EQ(mdl_set_gating(m, keep, frozen), MDL_OK);
    tt_seed(17);
    for (e = 0; e < NC; e++) G[e] = (float)tt_normal();
    /* gated, layer 0 */
    memset(m->dq, 0, sizeof(float) * NC);
    memset(m->dk, 0, sizeof(float) * NC);
    memset(m->dv, 0, sizeof(float) * NC);
    CHECK_INT_EQ(mdl__attn_bwd_gated(m, 0, G, NULL), MDL_OK);
    memcpy(dq, m->dq, sizeof(float) * NC);
    memcpy(dk, m->dk, sizeof(float) * NC);
    memcpy(dv, m->dv, sizeof(float) * NC);
    /* dense reference with zeroed rows */
    for (u = 0; u < GB * H; u++)
        for (i = 0; i < GT; i++) {
            int z = frozen[u % H] || !keep[(size_t)u * GT + i];
            for (d = 0; d < D; d++) G0[((size_t)u * GT + i) * D + d] = z ? 0.0f : G[((size_t)u * GT + i) * D + d];
        }
    memset(m->dq, 0, sizeof(float) * NC);
    memset(m->dk, 0, sizeof(float) * NC);
    memset(m->dv, 0, sizeof(float) * NC);
    CHECK_INT_EQ(tk_attention_backward(m->dq, m->dk, m->dv, NULL, NULL, G0, m->ba[0].probs, m->ba[0].q, m->ba[0].k,
                                       m->ba[0].v, 0, NULL, GB, H, GT, D), TK_OK);
    CHECK_ALL_CLOSE(dq, m->dq, NC, 1e-5, 1e-6);
    CHECK_ALL_CLOSE(dk, m->dk, NC, 1e-5, 1e-6);
    CHECK_ALL_CLOSE(dv, m->dv, NC, 1e-5, 1e-6);
    /* the frozen head and the pruned rows' dq are exactly 0 */
    {
        int bad = 0;
        for (u = 0; u < GB * H; u++)
            for (i = 0; i < GT; i++)
                for (d = 0; d < D; d++) {
                    size_t o = ((size_t)u * GT + i) * D + d;
                    if (frozen[u % H] && (dq[o] != 0.0f || dk[o] != 0.0f || dv[o] != 0.0f)) bad++;
                    if (!keep[(size_t)u * GT + i] && dq[o] != 0.0f) bad++;
                }
        CHECK_INT_EQ(bad, 0);
    }
    /* finite differences of the masked objective (Richardson, fp32) on sampled coordinates */
    {
        const double h = 4e-3;
        int s, bad = 0;
        float *bufs[3], *ans[3];
        memcpy(qq, m->ba[0].q, sizeof(float) * NC);
        memcpy(kk, m->ba[0].k, sizeof(float) * NC);
        memcpy(vv, m->ba[0].v, sizeof(float) * NC);
        bufs[0] = qq; bufs[1] = kk; bufs[2] = vv;
        ans[0] = dq; ans[1] = dk; ans[2] = dv;
        for (s = 0; s < 36; s++) {
            int w = s % 3;
            size_t o = ((size_t)s * 2654435761ULL + 13) % NC;
            float p0 = bufs[w][o];
            double d1, d2, fd, an = ans[w][o];
            float *ob = (float *)malloc(sizeof(float) * NC);
            bufs[w][o] = (float)(p0 + h);
            d1 = masked_obj(m, qq, kk, vv, G, keep, frozen, ob, probs);
            bufs[w][o] = (float)(p0 - h);
            d1 = (d1 - masked_obj(m, qq, kk, vv, G, keep, frozen, ob, probs)) / (2 * h);
            bufs[w][o] = (float)(p0 + h / 2);
            d2 = masked_obj(m, qq, kk, vv, G, keep, frozen, ob, probs);
            bufs[w][o] = (float)(p0 - h / 2);
            d2 = (d2 - masked_obj(m, qq, kk, vv, G, keep, frozen, ob, probs)) / h;
            bufs[w][o] = p0;
            fd = (4 * d2 - d1) / 3;
            if (fabs(fd - an) > 2e-3 + 0.03 * fabs(an)) {
                fprintf(stderr, "FD %c[%lu]: fd %g analytic %g\n", "qkv"[w], (unsigned long)o, fd, an);
                bad++;
            }
            free(ob);
        }
        CHECK_INT_EQ(bad, 0);
    }
    free(probs);
    free(G);
    free(keep);
    mdl_destroy(m);
}

/* whole-model backward with gating: frozen-head slices 0, the other heads' projection
   gradients in the last layer equal the dense ones, the skipped-FLOP count equals the
   rows the backward left out (read off dq) */
static void test_model_gated(void)
{
    mdl_config c = gcfg();
    int x[GB * GT], y[GB * GT], i, h, l, u;
    size_t np, e, nk;
    mdl_stats st;
    mdl_gate_counts gc;
    unsigned char *keep, frozen[4];
    float *gd, *gg;
    mdl_model *m = make(&c, x, y);
    const mdl__bp *bl;
    if (!m) return;
    np = mdl_num_params(m);
    nk = (size_t)c.n_layers * GB * c.n_heads * GT;
    gd = (float *)malloc(sizeof(float) * np * 2);
    gg = gd + np;
    keep = (unsigned char *)malloc(nk);
    /* dense */
    mdl_zero_grad(m);
    CHECK_INT_EQ(fwd(m, x, y, 0, &st), MDL_OK);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    memcpy(gd, mdl_grads(m), sizeof(float) * np);
    CHECK_INT_EQ(mdl_gate_counts_get(m, &gc), MDL_OK);
    CHECK(gc.attn_bwd_skipped == 0.0 && gc.proj_bwd_skipped == 0.0 && gc.heads_frozen == 0);
    CHECK_CLOSE(gc.attn_bwd_dense, 8.0 * m->D * GT * (GT + 1) / 2.0 * c.n_layers * GB * c.n_heads, 1e-12, 0);
    /* gated: keep all rows of the last layer, freeze its head 0; layer 0 random */
    random_gating(m, keep, frozen);
    memset(keep + (size_t)GB * c.n_heads * GT, 1, (size_t)GB * c.n_heads * GT);
    frozen[2] = 1;
    mdl_zero_grad(m);
    CHECK_INT_EQ(fwd(m, x, y, 0, &st), MDL_OK);
    CHECK_INT_EQ(mdl_set_gating(m, keep, frozen), MDL_OK);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    memcpy(gg, mdl_grads(m), sizeof(float) * np);
    bl = &m->bp[1];
    {
        int C = c.d_model, D = m->D, part, o, bad0 = 0;
        for (part = 0; part < 3; part++)
            for (e = 0; e < (size_t)D * C; e++) {
                size_t off0 = bl->qkv + ((size_t)part * C + 0) * C + e, off1 = bl->qkv + ((size_t)part * C + D) * C + e;
                if (gg[off0] != 0.0f) bad0++;
                CHECK_CLOSE(gg[off1], gd[off1], 1e-4, 1e-6);
            }
        for (o = 0; o < C; o++)
            for (i = 0; i < D; i++) {
                if (gg[bl->proj + (size_t)o * C + i] != 0.0f) bad0++;
                CHECK_CLOSE(gg[bl->proj + (size_t)o * C + D + i], gd[bl->proj + (size_t)o * C + D + i], 1e-4, 1e-6);
            }
        CHECK_INT_EQ(bad0, 0);
        /* layer 0's frozen head 1 too */
        for (part = 0; part < 3; part++)
            for (e = 0; e < (size_t)D * C; e++)
                if (gg[m->bp[0].qkv + ((size_t)part * C + D) * C + e] != 0.0f) bad0++;
        CHECK_INT_EQ(bad0, 0);
    }
    /* the count against the rows the layer-0 backward really skipped: dq rows that are
       exactly 0 in heads not frozen are the pruned rows */
    CHECK_INT_EQ(mdl_gate_counts_get(m, &gc), MDL_OK);
    {
        double skipped = 0.0, full = 8.0 * m->D * GT * (GT + 1) / 2.0;
        long long pr = 0;
        float *G = (float *)malloc(sizeof(float) * (size_t)GB * GT * c.d_model);
        tt_seed(5);
        for (e = 0; e < (size_t)GB * GT * c.d_model; e++) G[e] = (float)tt_normal();
        memset(m->dq, 0, sizeof(float) * (size_t)GB * GT * c.d_model);
        CHECK_INT_EQ(mdl__attn_bwd_gated(m, 0, G, NULL), MDL_OK);
        for (l = 0; l < c.n_layers; l++)
            for (u = 0; u < GB * c.n_heads; u++) {
                h = u % c.n_heads;
                if (frozen[l * c.n_heads + h]) { skipped += full; continue; }
                if (l == 1) continue; /* all kept */
                for (i = 0; i < GT; i++) {
                    const float *r = m->dq + ((size_t)u * GT + i) * m->D;
                    int d, z = 1;
                    for (d = 0; d < m->D; d++) z &= r[d] == 0.0f;
                    /* row 0 has one key: its dq is 0 kept or not; the mask says */
                    if (i == 0) z = !keep[(size_t)u * GT];
                    if (z) { skipped += 8.0 * m->D * (i + 1); pr++; }
                }
            }
        CHECK_CLOSE(gc.attn_bwd_skipped, skipped, 1e-12, 0);
        CHECK_INT_EQ((int)gc.rows_pruned, (int)pr);
        CHECK(pr > 0);
        CHECK_INT_EQ(gc.heads_frozen, 2);
        CHECK_CLOSE(gc.proj_bwd_skipped, 2 * 16.0 * GB * GT * c.d_model * m->D, 1e-12, 0);
        free(G);
    }
    /* gating holds for one backward only */
    CHECK_INT_EQ(fwd(m, x, y, 0, &st), MDL_OK);
    CHECK_INT_EQ(m->gate_keep_on + m->gate_frozen_on, 0);
    free(keep);
    free(gd);
    mdl_destroy(m);
}

/* a frozen head's parameters (and AdamW moments) are bit-identical through a step */
static void test_frozen_step(void)
{
    mdl_config c = gcfg();
    int x[GB * GT], y[GB * GT], s;
    size_t np, nf, e;
    mdl_stats st;
    unsigned char frozen[4] = {0, 1, 0, 0};
    float *p0, *am, *av, *snap, *P;
    tk_adamw_config ac = tk_adamw_config_default();
    mdl_model *m = make(&c, x, y);
    if (!m) return;
    np = mdl_num_params(m);
    nf = mdl_frozen_floats(m, frozen);
    CHECK_INT_EQ((int)nf, 4 * m->D * c.d_model);
    p0 = (float *)malloc(sizeof(float) * np * 3);
    am = p0 + np;
    av = am + np;
    snap = (float *)malloc(sizeof(float) * nf * 3);
    memset(am, 0, sizeof(float) * np * 2);
    P = mdl_params(m);
    for (s = 0; s < 3; s++) {
        /* step 0 ungated (moments become non-zero), steps 1-2 with head 1 of layer 0 frozen */
        mdl_zero_grad(m);
        CHECK_INT_EQ(fwd(m, x, y, 0, &st), MDL_OK);
        if (s > 0) CHECK_INT_EQ(mdl_set_gating(m, NULL, frozen), MDL_OK);
        CHECK_INT_EQ(mdl_backward(m), MDL_OK);
        if (s > 0) {
            memcpy(p0, P, sizeof(float) * np);
            CHECK_INT_EQ(mdl_frozen_copy(m, frozen, P, snap, 0), MDL_OK);
            CHECK_INT_EQ(mdl_frozen_copy(m, frozen, am, snap + nf, 0), MDL_OK);
            CHECK_INT_EQ(mdl_frozen_copy(m, frozen, av, snap + 2 * nf, 0), MDL_OK);
        }
        ac.weight_decay = 0.1f;
        CHECK_INT_EQ(tk_adamw_update(P, mdl_grads(m), am, av, np, &ac, s + 1), TK_OK);
        if (s > 0) {
            size_t changed = 0, same = 0;
            float *cur = (float *)malloc(sizeof(float) * nf);
            CHECK_INT_EQ(mdl_frozen_copy(m, frozen, P, snap, 1), MDL_OK);
            CHECK_INT_EQ(mdl_frozen_copy(m, frozen, am, snap + nf, 1), MDL_OK);
            CHECK_INT_EQ(mdl_frozen_copy(m, frozen, av, snap + 2 * nf, 1), MDL_OK);
            /* frozen slices bit-identical to before the step, the rest moved */
            CHECK_INT_EQ(mdl_frozen_copy(m, frozen, p0, cur, 0), MDL_OK);
            CHECK(memcmp(cur, snap, sizeof(float) * nf) == 0);
            CHECK_INT_EQ(mdl_frozen_copy(m, frozen, P, cur, 0), MDL_OK);
            CHECK(memcmp(cur, snap, sizeof(float) * nf) == 0);
            for (e = 0; e < np; e++) {
                if (P[e] != p0[e]) changed++;
                else same++;
            }
            CHECK_INT_EQ((int)same, (int)nf); /* exactly the frozen floats stayed */
            CHECK((size_t)changed == np - nf);
            free(cur);
        }
    }
    free(snap);
    free(p0);
    mdl_destroy(m);
}

/* ---- gating beside an additive prior (issue 46 item 3): the RPA and ERA biases ---- */

static mdl_config pcfg(int prior)
{
    mdl_config c = gcfg();
    c.prior = prior;
    c.R = 3;
    c.rpa.K = 3;
    c.rpa.detach = 0;
    c.rpa.posmix = 0.1f;
    c.tau_att_init = 0.9f;
    c.era.R = 4;
    c.era.nb = 4;
    return c;
}

static const float ptemp[4] = {0.7f, 1.3f, 1.1f, 0.9f}; /* per-head temperatures (L,H) */

static mdl_opts popts(void)
{
    mdl_opts o = mdl_opts_default();
    o.train = 1;
    o.head_temp = ptemp;
    o.prior_scale = 0.8f;
    return o;
}

/* random keep mask (about 40% pruned) over every layer, frozen heads {l0 h1, l1 h0} */
static void prior_gating(int L, int H, int T, unsigned char *keep, unsigned char *frozen)
{
    size_t e, n = (size_t)L * GB * H * T;
    tt_seed(77);
    for (e = 0; e < n; e++) keep[e] = tt_uniform() < 0.6;
    memset(frozen, 0, (size_t)L * H);
    frozen[1] = 1;
    frozen[H] = 1;
}

/* core: the gated backward's dbias (and dq, dk, dv) == the dense backward's with the gated
   rows' output gradients zeroed, per-head temperatures on; bit-identical run to run and
   for 1, 2 and 3 threads */
static void prior_core(int prior, const char *what)
{
    mdl_config c = pcfg(prior);
    int x[GB * GT], y[GB * GT], u, i, d, H, D, pass;
    size_t NC, nk, TT = (size_t)GT * GT, e;
    mdl_stats st;
    mdl_opts o = popts();
    unsigned char *keep, frozen[4];
    float *G, *G0, *gq, *gk, *gv, *gb, *db, *rq, *rb;
    double dbmax = 0.0;
    mdl_model *m = make(&c, x, y);
    if (!m) return;
    H = m->H;
    D = m->D;
    NC = (size_t)GB * GT * c.d_model;
    nk = (size_t)c.n_layers * GB * H * GT;
    keep = (unsigned char *)malloc(nk);
    G = (float *)malloc(sizeof(float) * (NC * 6 + TT * 3));
    G0 = G + NC; gq = G0 + NC; gk = gq + NC; gv = gk + NC; rq = gv + NC;
    gb = rq + NC; db = gb + TT; rb = db + TT;
    CHECK_INT_EQ(mdl_forward(m, x, y, GB, GT, &o, &st), MDL_OK);
    CHECK(m->ba[0].bias != NULL);
    prior_gating(c.n_layers, H, GT, keep, frozen);
    CHECK_INT_EQ(mdl_set_gating(m, keep, frozen), MDL_OK);
    tt_seed(23);
    for (e = 0; e < NC; e++) G[e] = (float)tt_normal();
    for (pass = 0; pass < 4; pass++) {
#ifdef _OPENMP
        int nthr = omp_get_max_threads();
        omp_set_num_threads(pass < 2 ? 2 : pass - 1); /* 2, 2, 1, 3 */
#endif
        memset(m->dq, 0, sizeof(float) * NC);
        memset(m->dk, 0, sizeof(float) * NC);
        memset(m->dv, 0, sizeof(float) * NC);
        for (e = 0; e < TT; e++) db[e] = 0.25f; /* accumulates (+=) */
        CHECK_INT_EQ(mdl__attn_bwd_gated(m, 0, G, db), MDL_OK);
#ifdef _OPENMP
        omp_set_num_threads(nthr);
#endif
        if (!pass) {
            memcpy(gq, m->dq, sizeof(float) * NC);
            memcpy(gk, m->dk, sizeof(float) * NC);
            memcpy(gv, m->dv, sizeof(float) * NC);
            memcpy(gb, db, sizeof(float) * TT);
        } else {
            CHECK(memcmp(gq, m->dq, sizeof(float) * NC) == 0);
            CHECK(memcmp(gk, m->dk, sizeof(float) * NC) == 0);
            CHECK(memcmp(gv, m->dv, sizeof(float) * NC) == 0);
            CHECK(memcmp(gb, db, sizeof(float) * TT) == 0);
        }
    }
    /* the dense reference (the real tk_attention_backward) */
    for (u = 0; u < GB * H; u++)
        for (i = 0; i < GT; i++) {
            int z = frozen[u % H] || !keep[(size_t)u * GT + i];
            for (d = 0; d < D; d++) G0[((size_t)u * GT + i) * D + d] = z ? 0.0f : G[((size_t)u * GT + i) * D + d];
        }
    memset(m->dq, 0, sizeof(float) * NC);
    memset(m->dk, 0, sizeof(float) * NC);
    memset(m->dv, 0, sizeof(float) * NC);
    for (e = 0; e < TT; e++) rb[e] = 0.25f;
    CHECK_INT_EQ(tk_attention_backward(m->dq, m->dk, m->dv, rb, NULL, G0, m->ba[0].probs, m->ba[0].q, m->ba[0].k,
                                       m->ba[0].v, 0, m->temp, GB, H, GT, D), TK_OK);
    CHECK_ALL_CLOSE(gq, m->dq, NC, 1e-5, 1e-6);
    CHECK_ALL_CLOSE(gk, m->dk, NC, 1e-5, 1e-6);
    CHECK_ALL_CLOSE(gv, m->dv, NC, 1e-5, 1e-6);
    CHECK_ALL_CLOSE(gb, rb, TT, 1e-5, 1e-6);
    /* 0 above the diagonal; the temperatures differ per head; not a trivial bias gradient */
    {
        int bad = 0, j;
        for (i = 0; i < GT; i++)
            for (j = i + 1; j < GT; j++) bad += gb[(size_t)i * GT + j] != 0.25f;
        CHECK_INT_EQ(bad, 0);
        CHECK(m->temp[0] != m->temp[1]);
        for (e = 0; e < TT; e++) {
            double a = fabs((double)gb[e] - rb[e]);
            if (a > dbmax) dbmax = a;
        }
        for (e = 0, bad = 0; e < TT; e++) bad += gb[e] != 0.25f;
        CHECK(bad > (int)(TT / 4));
    }
    if (getenv("MODEL_TEST_VERBOSE")) fprintf(stderr, "  %s core: max |dbias gated - dense| %.3g\n", what, dbmax);
    free(G);
    free(keep);
    mdl_destroy(m);
}

static void test_prior_core(void)
{
    prior_core(MDL_PRIOR_RPA, "rpa");
    prior_core(MDL_PRIOR_ERA, "era");
}

/* 1: parameter offset e is in a column of a frozen head's output projection (the gated
   backward leaves those at 0 by definition; the masked dense backward does not) */
static int frozen_proj(const mdl_model *m, const unsigned char *frozen, size_t e)
{
    int l;
    for (l = 0; l < m->L; l++) {
        size_t p0 = m->bp[l].proj, n = (size_t)m->C * m->C;
        if (e >= p0 && e < p0 + n) return frozen[(size_t)l * m->H + (int)((e - p0) % (size_t)m->C) / m->D];
    }
    return 0;
}

/* 1: tensor ti is one of the prior's (tau_att, pos_beta, the memberships, the ERA ones) */
static int prior_tensor(const mdl_tensor *t)
{
    return strstr(t->name, "tau_att") || strstr(t->name, "pos_beta") || strstr(t->name, ".mem.") ||
           strstr(t->name, "era");
}

/* whole model: every gradient of the gated mdl_backward (the prior's included) == that of
   the dense mdl_backward whose attention backward sees the gated rows' output gradients
   as 0; the frozen heads' projection slices exactly 0 */
static void prior_model(int prior, const char *what)
{
    mdl_config c = pcfg(prior);
    int x[GB * GT], y[GB * GT], ti, nprior = 0, moved = 0;
    size_t np, nk, e;
    mdl_stats st;
    mdl_opts o = popts();
    unsigned char *keep, frozen[4];
    float *gd, *gg, *gu;
    double worst = 0.0;
    mdl_model *m = make(&c, x, y);
    if (!m) return;
    np = mdl_num_params(m);
    nk = (size_t)c.n_layers * GB * c.n_heads * GT;
    gd = (float *)malloc(sizeof(float) * np * 3);
    gg = gd + np;
    gu = gg + np;
    keep = (unsigned char *)malloc(nk);
    tg.scr = (float *)malloc(sizeof(float) * (size_t)GB * GT * c.d_model);
    prior_gating(c.n_layers, c.n_heads, GT, keep, frozen);
    /* ungated */
    mdl_zero_grad(m);
    CHECK_INT_EQ(mdl_forward(m, x, y, GB, GT, &o, &st), MDL_OK);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    memcpy(gu, mdl_grads(m), sizeof(float) * np);
    /* dense with the gated rows' output gradients zeroed */
    tg.m = m;
    tg.keep = keep;
    tg.frozen = frozen;
    tg.mask_bwd = 1;
    mdl_zero_grad(m);
    CHECK_INT_EQ(mdl_forward(m, x, y, GB, GT, &o, &st), MDL_OK);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    memcpy(gd, mdl_grads(m), sizeof(float) * np);
    tg.mask_bwd = 0;
    /* gated */
    mdl_zero_grad(m);
    CHECK_INT_EQ(mdl_forward(m, x, y, GB, GT, &o, &st), MDL_OK);
    CHECK_INT_EQ(mdl_set_gating(m, keep, frozen), MDL_OK);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    memcpy(gg, mdl_grads(m), sizeof(float) * np);
    tg.m = NULL;
    for (ti = 0; ti < mdl_num_tensors(m); ti++) {
        const mdl_tensor *t = mdl_tensor_at(m, ti);
        int bad = 0, isp = prior_tensor(t);
        for (e = t->offset; e < t->offset + t->numel; e++) {
            double d = fabs((double)gg[e] - gd[e]);
            if (frozen_proj(m, frozen, e)) {
                bad += gg[e] != 0.0f;
                continue;
            }
            if (d > 1e-4 * fabs((double)gd[e]) + 1e-6) {
                if (bad < 3)
                    fprintf(stderr, "  %s %s[%lu]: gated %.8g dense-masked %.8g\n", what, t->name,
                            (unsigned long)(e - t->offset), gg[e], gd[e]);
                bad++;
            }
            if (d / (1e-4 * fabs((double)gd[e]) + 1e-6) > worst) worst = d / (1e-4 * fabs((double)gd[e]) + 1e-6);
            if (isp && fabs((double)gg[e] - gu[e]) > 1e-3 * fabs((double)gu[e]) + 1e-6) moved++;
        }
        CHECK_INT_EQ(bad, 0);
        if (isp) nprior++;
    }
    /* the prior's tensors are there, and the gating changed their gradients */
    CHECK(nprior >= 2);
    CHECK(moved > 0);
    {
        float tau0 = gg[m->bp[0].tau != MDL__ABSENT ? m->bp[0].tau : m->bp[0].eraa];
        CHECK(tau0 != 0.0f && isfinite(tau0));
    }
    if (getenv("MODEL_TEST_VERBOSE"))
        fprintf(stderr, "  %s model: worst |gated - dense-masked| / (1e-4 |g| + 1e-6) %.3f; %d prior tensors, %d "
                        "prior coordinates moved by the gating\n", what, worst, nprior, moved);
    free(tg.scr);
    tg.scr = NULL;
    free(keep);
    free(gd);
    mdl_destroy(m);
}

static void test_prior_model(void)
{
    prior_model(MDL_PRIOR_RPA, "rpa");
    prior_model(MDL_PRIOR_ERA, "era");
}

/* finite differences of the objective the gated backward differentiates: the loss with
   the gated rows' attention outputs (pruned rows, frozen heads) held at their values
   (they pass no gradient into the attention core). Every tensor (all coordinates of the
   small ones, the prior's among them; 8 sampled of the others; the frozen heads' output
   projection columns, 0 by definition, left out) as test_model's gradcheck: fp32
   Richardson, h 4e-3, |fd - an| <= 1.5e-3 + 3% |an|, ||fd - an|| <= 5% ||an|| + 1.5e-3.
   The ungated gradient fails it on some prior coordinate (the check sees the gating). */
#define FT 24
static double fd_loss(mdl_model *m, const int *x, const int *y, const mdl_opts *o)
{
    mdl_stats st;
    CHECK_INT_EQ(mdl_forward(m, x, y, GB, FT, o, &st), MDL_OK);
    return st.loss;
}

static void prior_fd(int prior, const char *what)
{
    mdl_config c = pcfg(prior);
    mdl_model *m = NULL;
    char err[256];
    int x[GB * FT], y[GB * FT], ti, i, seen_ungated_fail = 0;
    size_t np, nk;
    mdl_opts o = popts();
    mdl_stats st;
    unsigned char *keep, frozen[4];
    float *g, *gu;
    double worst = 0.0, l0, l1;
    const double h = 4e-3, atol = 1.5e-3, rtol = 0.03;
#ifdef _OPENMP
    int nthr = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    c.max_T = FT;
    CHECK_INT_EQ(mdl_create(&m, &c, 7, err, sizeof err), MDL_OK);
    if (!m) return;
    tt_seed(11);
    for (i = 0; i < GB * FT; i++) {
        x[i] = (int)(tt_uniform() * GV);
        y[i] = (int)(tt_uniform() * GV);
    }
    np = mdl_num_params(m);
    nk = (size_t)c.n_layers * GB * c.n_heads * FT;
    keep = (unsigned char *)malloc(nk);
    g = (float *)malloc(sizeof(float) * np * 2);
    gu = g + np;
    tg.hold = (float *)malloc(sizeof(float) * (size_t)c.n_layers * GB * FT * c.d_model);
    prior_gating(c.n_layers, c.n_heads, FT, keep, frozen);
    mdl_zero_grad(m);
    l0 = fd_loss(m, x, y, &o);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    memcpy(gu, mdl_grads(m), sizeof(float) * np);
    tg.m = m;
    tg.keep = keep;
    tg.frozen = frozen;
    tg.save_fwd = 1;
    mdl_zero_grad(m);
    CHECK_INT_EQ(mdl_forward(m, x, y, GB, FT, &o, &st), MDL_OK);
    tg.save_fwd = 0;
    CHECK_INT_EQ(mdl_set_gating(m, keep, frozen), MDL_OK);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    memcpy(g, mdl_grads(m), sizeof(float) * np);
    tg.hold_fwd = 1;
    l1 = fd_loss(m, x, y, &o);
    CHECK(l1 == l0 && st.loss == l0); /* holding the rows at their own values changes nothing */
    for (ti = 0; ti < mdl_num_tensors(m); ti++) {
        const mdl_tensor *t = mdl_tensor_at(m, ti);
        size_t n = t->numel, k, cnt = n <= 8 ? n : 8;
        double dd = 0.0, na = 0.0;
        int bad = 0, isp = prior_tensor(t);
        for (k = 0; k < cnt; k++) {
            size_t idx = n <= 8 ? k : (size_t)(((unsigned long long)k * 2654435761ULL + 17) % n);
            float *p = mdl_params(m) + t->offset + idx, p0 = *p;
            double lp, lm, d1, d2, fd, an = g[t->offset + idx], e;
            if (frozen_proj(m, frozen, t->offset + idx)) {
                CHECK(an == 0.0);
                continue;
            }
            *p = (float)(p0 + h);
            lp = fd_loss(m, x, y, &o);
            *p = (float)(p0 - h);
            lm = fd_loss(m, x, y, &o);
            d1 = (lp - lm) / (2 * h);
            *p = (float)(p0 + h / 2);
            lp = fd_loss(m, x, y, &o);
            *p = (float)(p0 - h / 2);
            lm = fd_loss(m, x, y, &o);
            d2 = (lp - lm) / h;
            *p = p0;
            fd = (4 * d2 - d1) / 3;
            e = fabs(fd - an);
            dd += e * e;
            na += an * an;
            if (e > atol + rtol * fabs(an)) {
                if (bad < 3) fprintf(stderr, "  %s %s[%lu]: fd %.6g an %.6g\n", what, t->name, (unsigned long)idx, fd, an);
                bad++;
            }
            if (e / (atol + rtol * fabs(an)) > worst) worst = e / (atol + rtol * fabs(an));
            if (isp && fabs(fd - gu[t->offset + idx]) > atol + rtol * fabs((double)gu[t->offset + idx]))
                seen_ungated_fail++;
        }
        CHECK_INT_EQ(bad, 0);
        CHECK(sqrt(dd) <= 0.05 * sqrt(na) + atol);
    }
    CHECK(seen_ungated_fail > 0);
    tg.hold_fwd = 0;
    tg.m = NULL;
    if (getenv("MODEL_TEST_VERBOSE"))
        fprintf(stderr, "  %s fd: worst error / tolerance %.3f; the ungated gradient fails %d prior coordinates\n", what,
                worst, seen_ungated_fail);
    free(tg.hold);
    tg.hold = NULL;
    free(g);
    free(keep);
    mdl_destroy(m);
#ifdef _OPENMP
    omp_set_num_threads(nthr);
#endif
}

static void test_prior_fd(void)
{
    prior_fd(MDL_PRIOR_RPA, "rpa");
    prior_fd(MDL_PRIOR_ERA, "era");
}

static void test_refused(void)
{
    mdl_config c = gcfg();
    int x[GB * GT], y[GB * GT];
    mdl_stats st;
    unsigned char bad[2 * GB * 2 * GT], fz[4] = {0, 2, 0, 0};
    ceas_state cs;
    mdl_model *m = make(&c, x, y);
    if (!m) return;
    CHECK_INT_EQ(ceas_init(&cs, NULL, 2, 2, m->D), CEAS_OK);
    CHECK_INT_EQ(mdl_set_gating(m, NULL, NULL), MDL_EINVAL);     /* no forward yet */
    CHECK_INT_EQ(fwd(m, x, y, 0, &st), MDL_OK);
    CHECK_INT_EQ(mdl_ceas_gating(m, &cs, 1, 0), MDL_EINVAL);     /* no gate rows */
    CHECK_INT_EQ(mdl_ceas_gating(m, &cs, 0, 1), MDL_OK);         /* heads only is fine */
    CHECK_INT_EQ(mdl_ceas_gating(m, &cs, 2, 1), MDL_EINVAL);
    CHECK_INT_EQ(mdl_ceas_gating(m, NULL, 0, 1), MDL_EINVAL);
    memset(bad, 1, sizeof bad);
    bad[7] = 3;
    CHECK_INT_EQ(mdl_set_gating(m, bad, NULL), MDL_EINVAL);
    CHECK_INT_EQ(mdl_set_gating(m, NULL, fz), MDL_EINVAL);
    CHECK_INT_EQ(mdl_frozen_copy(m, NULL, mdl_params(m), mdl_params(m), 0), MDL_EINVAL);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    CHECK_INT_EQ(mdl_set_gating(m, NULL, NULL), MDL_EINVAL);     /* backward consumed it */
    ceas_free(&cs);
    {
        ceas_state c3;
        CHECK_INT_EQ(ceas_init(&c3, NULL, 3, 2, m->D), CEAS_OK);
        CHECK_INT_EQ(fwd(m, x, y, 1, &st), MDL_OK);
        CHECK_INT_EQ(mdl_ceas_gating(m, &c3, 1, 1), MDL_EINVAL); /* other shape */
        ceas_free(&c3);
    }
    mdl_destroy(m);
    /* a prior is fine (issue 46 item 3); gac_tau is refused */
    c.prior = MDL_PRIOR_ERA;
    m = make(&c, x, y);
    if (!m) return;
    CHECK_INT_EQ(fwd(m, x, y, 0, &st), MDL_OK);
    CHECK_INT_EQ(mdl_set_gating(m, NULL, NULL), MDL_OK);
    mdl_destroy(m);
    c.gac_tau = 1;
    m = make(&c, x, y);
    if (!m) return;
    CHECK_INT_EQ(fwd(m, x, y, 0, &st), MDL_OK);
    CHECK_INT_EQ(mdl_set_gating(m, NULL, NULL), MDL_EINVAL);
    mdl_destroy(m);
}

/* byte-level ids: the protocol's rows, blank rows dropped, bytes as ids */
static void test_bytes(void)
{
    const char *txt = " = A = \n \n\nHi \xc3\xa9\n\t \n tail";
    const char *want = " = A = \nHi \xc3\xa9\n tail";
    uint16_t *ids = NULL;
    size_t n = 0, i, wn = strlen(want);
    int bad = 0;
    CHECK_INT_EQ(wt2_bytes_tokenize((const unsigned char *)txt, strlen(txt), &ids, &n), BPE_OK);
    CHECK_INT_EQ((int)n, (int)wn);
    for (i = 0; i < n && i < wn; i++) bad += ids[i] != (unsigned char)want[i];
    CHECK_INT_EQ(bad, 0);
    free(ids);
    CHECK_INT_EQ(wt2_bytes_tokenize((const unsigned char *)" \n\n", 3, &ids, &n), BPE_OK);
    CHECK(ids == NULL && n == 0);
    CHECK_INT_EQ(wt2_bytes_tokenize(NULL, 3, &ids, &n), BPE_EINVAL);
    CHECK_INT_EQ(wt2_bytes_tokenize((const unsigned char *)"a", 1, NULL, &n), BPE_EINVAL);
    {
        /* the shared valid split, when it is there: every id a byte, blank rows gone */
        wt2_tokens t;
        char err[256];
        const char *dir = wt2_default_data_dir();
        wt2_inventory inv;
        if (wt2_scan(dir, &inv) <= 0 || !inv.has_raw[WT2_VALID]) {
            fprintf(stderr, "  (no raw valid split in %s: file case skipped)\n", dir);
            return;
        }
        CHECK_INT_EQ(wt2_load_split_bytes(dir, WT2_VALID, &t, err, sizeof err), BPE_OK);
        CHECK(t.n > 1000000 && t.n < 1146846); /* the raw file is 1,146,846 bytes with its blank rows */
        CHECK_INT_EQ(wt2_check_ids(t.ids, t.n, WT2_BYTE_VOCAB, "valid", err, sizeof err), BPE_OK);
        for (i = 1, bad = 0; i + 1 < t.n; i++) bad += t.ids[i - 1] == '\n' && t.ids[i] == ' ' && t.ids[i + 1] == '\n';
        CHECK_INT_EQ(bad, 0);
        wt2_tokens_free(&t);
        CHECK(wt2_load_split_bytes("/nonexistent-dir", WT2_VALID, &t, err, sizeof err) != BPE_OK);
    }
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_gate_rows);
    TEST_RUN(test_mask_floors);
    TEST_RUN(test_gated_core);
    TEST_RUN(test_model_gated);
    TEST_RUN(test_frozen_step);
    TEST_RUN(test_prior_core);
    TEST_RUN(test_prior_model);
    TEST_RUN(test_prior_fd);
    TEST_RUN(test_refused);
    TEST_RUN(test_bytes);
    return TEST_END();
}
