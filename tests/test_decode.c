/* test_decode.c - token-by-token decoding of the examples' model (model.h mdl_decode_*,
   issue 42): prefill + steps against the full causal forward at every position, for
   several configurations (learned positions + LayerNorm + GELU; RoPE + RMSNorm + ReLU^2
   with per-head temperatures; GAC temperature; no positions; fuzzy MoE with residual and
   value gates; RoPE + value gate; the RPA, ERA, sinusoid and relative priors against the
   forward of the decoding window, their documented rule; polar attention with GQA and a
   window, the gated-delta memory, the causal convolution, all three together), three
   slots of different
   lengths stepped together, a slot reset and restarted mid-way, the refused
   configurations (one table) and bad arguments. Links the model (Makefile:
   TEST_OBJS_test_decode). */
#include "../examples/common/model.h"
#include "../examples/common/sample.h"
#include "../examples/common/layers.h"
#include "attnkit_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DV 37
#define DT 12
#define NSEQ 4

static mdl_config small(void)
{
    mdl_config c = mdl_config_default();
    c.vocab = DV;
    c.d_model = 16;
    c.n_layers = 2;
    c.n_heads = 2;
    c.max_T = DT;
    c.d_ff_mult = 2;
    c.init_std = 0.3f;
    c.R = 3;
    c.rpa.K = 3;
    c.era.R = 4;
    c.era.nb = 4;
    return c;
}

/* random weights: every parameter N(0, 0.4), norm gains 1 + N(0, 0.4), gac_tau 0.7 */
static void randomize(mdl_model *m, unsigned long long seed)
{
    float *P = mdl_params(m);
    int i, n = mdl_num_tensors(m);
    tt_seed(seed);
    for (i = 0; i < n; i++) {
        const mdl_tensor *t = mdl_tensor_at(m, i);
        size_t k;
        for (k = 0; k < t->numel; k++) P[t->offset + k] = (float)(0.4 * tt_normal());
        if (strstr(t->name, "gac_tau"))
            for (k = 0; k < t->numel; k++) P[t->offset + k] = 0.7f;
        else if (strstr(t->name, "ln") && strstr(t->name, "weight"))
            for (k = 0; k < t->numel; k++) P[t->offset + k] += 1.0f;
    }
}

static double g_worst = 0.0;

/* max over rows of max |a - b| / max |b| (row of V) */
static double row_err(const float *a, const float *b, int V)
{
    double mx = 0.0, d = 0.0;
    int v;
    for (v = 0; v < V; v++) {
        double x = fabs((double)b[v]), e = fabs((double)a[v] - (double)b[v]);
        if (x > mx) mx = x;
        if (e > d || e != e) d = e != e ? 1e30 : e;
    }
    return d / (mx > 0.0 ? mx : 1.0);
}

/* The full causal forward's logits of seq (len) into ref (len, V). */
static void full_logits(mdl_model *m, const int *seq, int len, const mdl_opts *o, float *ref)
{
    int rc = mdl_forward(m, seq, NULL, 1, len, o, NULL);
    CHECK_INT_EQ(rc, MDL_OK);
    if (rc == MDL_OK) memcpy(ref, mdl_logits(m), sizeof(float) * (size_t)len * DV);
}

static void run_exact(mdl_config c, const float *head_temp, const char *name)
{
    static const int lens[NSEQ] = {9, 5, 12, 7};
    static const int pre[NSEQ] = {3, 1, 4, 2};
    int seq[NSEQ][DT], i, j, rc, done[NSEQ] = {0, 0, 0, 0}, slot_seq[3] = {0, 1, 2}, pos[3];
    float *ref = (float *)malloc(sizeof(float) * NSEQ * DT * DV), *lg = (float *)malloc(sizeof(float) * 3 * DT * DV);
    mdl_model *m = NULL;
    mdl_opts o = mdl_opts_default();
    char err[256];
    size_t cb = 0;
    double worst = 0.0;
    int restarted = 0;
    o.train = 0;
    o.head_temp = head_temp;
    CHECK(ref && lg);
    rc = mdl_create(&m, &c, 7, err, sizeof err);
    CHECK_INT_EQ(rc, MDL_OK);
    if (rc != MDL_OK || !ref || !lg) { fprintf(stderr, "%s: %s\n", name, err); goto out; }
    randomize(m, 1234);
    tt_seed(99);
    for (i = 0; i < NSEQ; i++)
        for (j = 0; j < lens[i]; j++) seq[i][j] = (int)(tt_uniform() * DV);
    if (c.prior != MDL_PRIOR_NONE) {
        /* the documented rule: decoding with a prior is the first rows of a forward of the
           window W = DT (mdl_decode_init's max_len): each sequence continued to DT tokens */
        for (i = 0; i < NSEQ; i++)
            for (j = lens[i]; j < DT; j++) seq[i][j] = (int)(tt_uniform() * DV);
        if (c.prior == MDL_PRIOR_RPA) { /* running statistics that are not uniform */
            size_t np = 0, k;
            const float *cur = mdl_prior_stats(m, &np);
            float *ps = (float *)malloc(sizeof(float) * np);
            CHECK(cur && np == (size_t)c.n_layers * DT * c.R + DT);
            if (ps && cur) {
                for (k = 0; k + DT < np; k += (size_t)c.R) {
                    double z = 0.0;
                    int r;
                    for (r = 0; r < c.R; r++) z += ps[k + r] = (float)(0.05 + tt_uniform());
                    for (r = 0; r < c.R; r++) ps[k + r] = (float)(ps[k + r] / z);
                }
                for (k = np - DT; k < np; k++) ps[k] = 5.0f;
                CHECK_INT_EQ(mdl_prior_stats_set(m, ps, np), MDL_OK);
            }
            free(ps);
        }
    }
    for (i = 0; i < NSEQ; i++)
        full_logits(m, seq[i], c.prior != MDL_PRIOR_NONE ? DT : lens[i], &o, ref + (size_t)i * DT * DV);
    rc = mdl_decode_init(m, 3, DT, &cb);
    CHECK_INT_EQ(rc, MDL_OK);
    if (rc) { fprintf(stderr, "%s: %s\n", name, mdl_last_error(m)); goto out; }
    {
        /* K/V (+ value-gate) cache, + the memory states (Hm, Dk, Dk), the convolution's
           last K inputs, (a layer_pattern with 'c') the gated convolution's last lfm_k
           values of y and polar's Canon inputs, per layer and slot */
        size_t hm = c.memory ? (size_t)(c.gd_heads ? c.gd_heads : c.n_heads) : 0, dk = hm ? (size_t)c.d_model / hm : 0;
        size_t kl = strchr(c.layer_pattern, 'c') ? (size_t)c.lfm_k : 0;
        /* polar's Canon layers: the last polar_canon_k inputs [q | k | v] */
        size_t hkv = c.polar_kv_heads ? (size_t)c.polar_kv_heads : (size_t)c.n_heads;
        size_t cn = c.attn == MDL_ATTN_POLAR ? (size_t)c.polar_canon_k * ((size_t)c.n_heads + 2 * hkv) *
                                                   ((size_t)c.d_model / c.n_heads) : 0;
        CHECK(cb == ((size_t)2 * c.d_model + (c.value_gate ? (size_t)c.n_heads : 0)) * c.n_layers * 3 * DT * sizeof(float) +
                        ((size_t)c.n_layers * 3 * (hm * dk * dk + ((size_t)c.conv_k + kl) * c.d_model + cn)) * sizeof(float));
    }
    CHECK(cb == mdl_decode_cache_bytes(m));
    CHECK_INT_EQ(mdl_decode_set_temp(m, head_temp, 1.0f), MDL_OK);
    /* prefill each slot (all logits), then step the live slots together */
    for (i = 0; i < 3; i++) {
        rc = mdl_decode_prefill(m, i, seq[i], pre[i], lg, 1);
        CHECK_INT_EQ(rc, MDL_OK);
        for (j = 0; j < pre[i]; j++) {
            double e = row_err(lg + (size_t)j * DV, ref + ((size_t)i * DT + j) * DV, DV);
            if (e > worst) worst = e;
        }
        pos[i] = pre[i];
        CHECK_INT_EQ(mdl_decode_len(m, i), pre[i]);
    }
    for (;;) {
        int slots[3], toks[3], ns = 0;
        for (i = 0; i < 3; i++) {
            int s = slot_seq[i];
            if (s < 0) continue;
            if (pos[i] >= lens[s]) {
                done[s] = 1;
                /* slot 1 finishes first: reset it and restart it on sequence 3 (a prefill
                   while the other slots are mid-way) */
                if (i == 1 && !restarted) {
                    restarted = 1;
                    CHECK_INT_EQ(mdl_decode_reset(m, 1), MDL_OK);
                    CHECK_INT_EQ(mdl_decode_len(m, 1), 0);
                    slot_seq[1] = 3;
                    rc = mdl_decode_prefill(m, 1, seq[3], pre[3], lg, 0); /* last row only */
                    CHECK_INT_EQ(rc, MDL_OK);
                    {
                        double e = row_err(lg, ref + ((size_t)3 * DT + pre[3] - 1) * DV, DV);
                        if (e > worst) worst = e;
                    }
                    pos[1] = pre[3];
                } else {
                    slot_seq[i] = -1;
                }
                continue;
            }
            slots[ns] = i;
            toks[ns] = seq[s][pos[i]];
            ns++;
        }
        if (ns == 0) break;
        if (ns > 1) { /* another order each time: slots are independent of their order */
            int t = slots[0], k = toks[0];
            slots[0] = slots[ns - 1];
            toks[0] = toks[ns - 1];
            slots[ns - 1] = t;
            toks[ns - 1] = k;
        }
        rc = mdl_decode_step(m, slots, toks, ns, lg);
        CHECK_INT_EQ(rc, MDL_OK);
        if (rc) { fprintf(stderr, "%s: %s\n", name, mdl_last_error(m)); break; }
        for (j = 0; j < ns; j++) {
            int sl = slots[j], s = slot_seq[sl];
            double e = row_err(lg + (size_t)j * DV, ref + ((size_t)s * DT + pos[sl]) * DV, DV);
            if (e > worst) worst = e;
            pos[sl]++;
        }
    }
    for (i = 0; i < NSEQ; i++) CHECK(done[i]);
    CHECK(restarted);
    fprintf(stderr, "  %s: max relative logit error %.3g\n", name, worst);
    CHECK(worst <= 1e-5);
    if (worst > g_worst) g_worst = worst;
out:
    mdl_destroy(m);
    free(ref);
    free(lg);
}

static void test_exact_learned_ln_gelu(void)
{
    mdl_config c = small();
    c.pos = MDL_POS_LEARNED;
    c.norm = MDL_NORM_LAYER;
    c.ffn = MDL_FFN_GELU;
    run_exact(c, NULL, "learned+LayerNorm+GELU");
}

static void test_exact_rope_rms_relu2_temps(void)
{
    mdl_config c = small();
    float ht[4] = {0.6f, 1.7f, 1.1f, 0.8f};
    c.pos = MDL_POS_ROPE;
    c.norm = MDL_NORM_RMS;
    c.ffn = MDL_FFN_RELU2;
    run_exact(c, NULL, "RoPE+RMSNorm+ReLU2");
    run_exact(c, ht, "RoPE+RMSNorm+ReLU2, per-head temperatures");
}

/* Every MLP row of layers.h's FFN table past the named ones (MDL_FFN_GELU, _RELU2, _MOE,
   covered above): decoding runs the row through the component's forward at B = 1 */
static void test_exact_ffn_rows(void)
{
    int r, n = 0;
    for (r = MDL_FFN_MOE + 1; r < lyr_ffn_count(); r++) {
        mdl_config c = small();
        char what[96];
        if (!lyr_ffn_is_mlp(r)) continue;
        c.ffn = r;
        c.norm = MDL_NORM_RMS;
        snprintf(what, sizeof what, "FFN row %d (%s) + RMSNorm", r, lyr_ffn_get(r)->name);
        run_exact(c, NULL, what);
        c.pos = MDL_POS_ROPE;
        c.res_gate = 1;
        snprintf(what, sizeof what, "FFN row %d (%s) + RoPE + residual gates", r, lyr_ffn_get(r)->name);
        run_exact(c, NULL, what);
        n++;
    }
    fprintf(stderr, "  %d further MLP rows of the FFN table decoded\n", n);
}

static void test_exact_gac_nopos(void)
{
    mdl_config c = small();
    c.gac_tau = 1;
    c.pos = MDL_POS_LEARNED;
    c.norm = MDL_NORM_RMS;
    run_exact(c, NULL, "gac_tau");
    c = small();
    c.pos = MDL_POS_NONE;
    c.n_heads = 4;
    run_exact(c, NULL, "no positions, 4 heads");
}

static void test_exact_moe_gates(void)
{
    mdl_config c = small();
    c.ffn = MDL_FFN_MOE;
    c.res_gate = 1;
    c.value_gate = 1;
    c.moe_experts = 3;
    c.moe_topk = 2;
    run_exact(c, NULL, "MoE + residual and value gates (tiny-baseline's blocks)");
    c = small();
    c.pos = MDL_POS_ROPE;
    c.value_gate = 1;
    c.norm = MDL_NORM_RMS;
    run_exact(c, NULL, "RoPE + value gate");
}

/* The priors: RPA from the running statistics (alone, and with the tiny preset's MoE and
   gates), ERA (alone, with GAC's temperature), the fixed sinusoid and relative priors. */
static void test_exact_priors(void)
{
    mdl_config c = small();
    c.prior = MDL_PRIOR_RPA;
    c.rpa.posmix = 0.1f;
    run_exact(c, NULL, "RPA prior (running statistics)");
    c.ffn = MDL_FFN_MOE;
    c.res_gate = 1;
    c.value_gate = 1;
    c.moe_experts = 3;
    c.moe_topk = 2;
    run_exact(c, NULL, "RPA prior + MoE + residual and value gates (the tiny preset's blocks)");
    c = small();
    c.prior = MDL_PRIOR_ERA;
    run_exact(c, NULL, "ERA prior");
    c.gac_tau = 1;
    c.pos = MDL_POS_ROPE;
    run_exact(c, NULL, "ERA prior + gac_tau + RoPE");
    c = small();
    c.prior = MDL_PRIOR_SINUSOID;
    run_exact(c, NULL, "sinusoid prior");
    c.prior = MDL_PRIOR_RELATIVE;
    run_exact(c, NULL, "relative prior");
}

/* What the rule means: a 5-token sequence decoded in a window of DT is the first rows of a
   DT-token forward, not the forward of its 5 tokens (ERA's B(5) is another matrix). */
static void test_prior_window_rule(void)
{
    mdl_config c = small();
    mdl_model *m = NULL;
    mdl_opts o = mdl_opts_default();
    char err[256];
    int seq[DT], j, rc;
    float *lg = (float *)malloc(sizeof(float) * DT * DV), *ref = (float *)malloc(sizeof(float) * DT * DV);
    double e_win = 0.0, e_own = 0.0;
    c.prior = MDL_PRIOR_ERA;
    rc = mdl_create(&m, &c, 7, err, sizeof err);
    CHECK_INT_EQ(rc, MDL_OK);
    if (rc || !lg || !ref) goto out;
    randomize(m, 4242);
    tt_seed(5);
    for (j = 0; j < DT; j++) seq[j] = (int)(tt_uniform() * DV);
    CHECK_INT_EQ(mdl_decode_init(m, 1, DT, NULL), MDL_OK);
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, seq, 5, lg, 1), MDL_OK);
    full_logits(m, seq, DT, &o, ref);
    for (j = 0; j < 5; j++) {
        double e = row_err(lg + (size_t)j * DV, ref + (size_t)j * DV, DV);
        if (e > e_win) e_win = e;
    }
    full_logits(m, seq, 5, &o, ref);
    for (j = 1; j < 5; j++) { /* (row 0 has one key: no bias moves it) */
        double e = row_err(lg + (size_t)j * DV, ref + (size_t)j * DV, DV);
        if (e > e_own) e_own = e;
    }
    fprintf(stderr, "  ERA, 5 tokens in a window of %d: against the %d-token forward %.3g, against the 5-token "
                    "forward %.3g\n", DT, DT, e_win, e_own);
    CHECK(e_win <= 1e-5);
    CHECK(e_own > 1e-3);
out:
    mdl_destroy(m);
    free(lg);
    free(ref);
}

/* Polar attention (GQA, q/k RMSNorm, a window), the gated-delta channel, the causal
   convolution, and all three with polar (seed 002's ATMA blocks). */
static void test_exact_polar_gdelta_conv(void)
{
    mdl_config c = small();
    c.attn = MDL_ATTN_POLAR;
    c.pos = MDL_POS_NONE;
    run_exact(c, NULL, "polar attention");
    c.n_heads = 4;
    c.polar_kv_heads = 2;
    c.polar.window = 5;
    run_exact(c, NULL, "polar attention, 4 heads over 2 KV heads, window 5");
    c = small();
    c.memory = MDL_MEM_GDELTA;
    run_exact(c, NULL, "softmax + gated-delta memory");
    c = small();
    c.conv_k = 3;
    c.pos = MDL_POS_ROPE;
    run_exact(c, NULL, "causal convolution (K 3) + RoPE");
    c = small();
    c.attn = MDL_ATTN_POLAR;
    c.pos = MDL_POS_NONE;
    c.memory = MDL_MEM_GDELTA;
    c.conv_k = 4;
    c.norm = MDL_NORM_RMS;
    run_exact(c, NULL, "polar + gated-delta + convolution (K 4), RMSNorm");
}

/* issue 43 items 3, 4: polar attention without the q/k RMSNorm, and with the output gate
   per channel and the output biases (decoded through lyr_polar_assemble at T = 1), with
   GQA, a window, the memory channel and a conv layer */
static void test_exact_polar_qknorm_gate(void)
{
    mdl_config c = small();
    c.attn = MDL_ATTN_POLAR;
    c.pos = MDL_POS_NONE;
    c.polar_qk_norm = 0;
    run_exact(c, NULL, "polar attention, qk-norm off");
    c.polar_qk_norm = 1;
    c.polar_gate = MDL_POLAR_GATE_CHANNEL;
    run_exact(c, NULL, "polar attention, gate per channel + output biases");
    c.n_heads = 4;
    c.polar_kv_heads = 2;
    c.polar.window = 5;
    c.polar_qk_norm = 0;
    run_exact(c, NULL, "polar, gate per channel, 4 heads over 2 KV heads, window 5, qk-norm off");
    c = small();
    c.attn = MDL_ATTN_POLAR;
    c.pos = MDL_POS_NONE;
    c.polar_gate = MDL_POLAR_GATE_CHANNEL;
    c.memory = MDL_MEM_GDELTA;
    c.norm = MDL_NORM_RMS;
    c.prior = MDL_PRIOR_NONE;
    c.value_gate = 0;
    snprintf(c.layer_pattern, sizeof c.layer_pattern, "cA");
    run_exact(c, NULL, "pattern cA, polar gate per channel + gated-delta, RMSNorm");
    /* item 2: Canon layers (a ring of the last K inputs per slot), K 3 and K 5 (longer than
       some prefills), with GQA, the gate per channel, qk-norm off */
    c = small();
    c.attn = MDL_ATTN_POLAR;
    c.pos = MDL_POS_NONE;
    c.polar_canon_k = 3;
    run_exact(c, NULL, "polar, Canon K 3");
    c.n_heads = 4;
    c.polar_kv_heads = 2;
    c.polar_gate = MDL_POLAR_GATE_CHANNEL;
    c.polar_qk_norm = 0;
    c.polar_canon_k = 5;
    c.polar.window = 5;
    run_exact(c, NULL, "polar, Canon K 5, 4 heads over 2 KV heads, gate per channel, qk-norm off, window 5");
}

/* issue 43 item 5: the memory channel on the polar attention's own q, k, v (mem_qkv
   shared): decoded from the polar layer's q (after its norm and Canon) and its cached k, v,
   against the full forward; with GQA (memory head h reads kv head h / 2), Canon K 3, the
   gate per channel, qk-norm off, and after a gated-conv layer */
static void test_exact_mem_qkv(void)
{
    mdl_config c = small();
    c.attn = MDL_ATTN_POLAR;
    c.pos = MDL_POS_NONE;
    c.memory = MDL_MEM_GDELTA;
    c.mem_qkv = MDL_MEMQKV_SHARED;
    run_exact(c, NULL, "polar + memory on the attention's q/k/v");
    c.n_heads = 4;
    c.polar_kv_heads = 2;
    c.polar_canon_k = 3;
    c.polar_gate = MDL_POLAR_GATE_CHANNEL;
    c.polar_qk_norm = 0;
    run_exact(c, NULL, "polar + memory on its q/k/v, 4 heads over 2 KV heads, Canon K 3, gate per channel, qk-norm off");
    c = small();
    c.attn = MDL_ATTN_POLAR;
    c.pos = MDL_POS_NONE;
    c.memory = MDL_MEM_GDELTA;
    c.mem_qkv = MDL_MEMQKV_SHARED;
    c.polar_kv_heads = 1;
    c.norm = MDL_NORM_RMS;
    snprintf(c.layer_pattern, sizeof c.layer_pattern, "cA");
    run_exact(c, NULL, "pattern cA, polar (GQA 1 KV head) + memory on its q/k/v, RMSNorm");
}

/* The per-layer mixer (cfg.layer_pattern, issue 43): LFM2's gated short convolution on
   the 'c' layers, decoded from a ring of each slot's last K values of y = B x, against the
   full forward: with softmax attention (RoPE) and with polar attention, "cA" and "ccA",
   a kernel longer than some prefills (K 4), the memory channel on the attention layers
   and the causal convolution before every mixer; the decoding state's size. */
static void test_exact_layer_pattern(void)
{
    mdl_config c = small();
    snprintf(c.layer_pattern, sizeof c.layer_pattern, "cA");
    c.pos = MDL_POS_ROPE;
    run_exact(c, NULL, "pattern cA, softmax + RoPE");
    c = small();
    c.n_layers = 3;
    snprintf(c.layer_pattern, sizeof c.layer_pattern, "ccA");
    run_exact(c, NULL, "pattern ccA, softmax");
    c.attn = MDL_ATTN_POLAR;
    c.pos = MDL_POS_NONE;
    run_exact(c, NULL, "pattern ccA, polar");
    c.memory = MDL_MEM_GDELTA;
    c.lfm_k = 4;
    c.conv_k = 3;
    c.norm = MDL_NORM_RMS;
    c.ffn = MDL_FFN_RELU2;
    run_exact(c, NULL, "pattern ccA, polar + gated-delta + convolution (K 3), lfm_k 4, RMSNorm, ReLU2");
    c = small();
    snprintf(c.layer_pattern, sizeof c.layer_pattern, "c");
    c.res_gate = 1;
    c.ffn = MDL_FFN_MOE;
    run_exact(c, NULL, "pattern c (no attention), MoE + residual gates");
    {
        /* the state: the K/V cache of every layer, plus L nb K C floats of y rings */
        mdl_model *m = NULL;
        char err[256];
        size_t cb = 0, cb0 = 0;
        mdl_config a = small();
        snprintf(a.layer_pattern, sizeof a.layer_pattern, "cA");
        CHECK_INT_EQ(mdl_create(&m, &a, 3, err, sizeof err), MDL_OK);
        if (m) {
            CHECK_INT_EQ(mdl_decode_init(m, 3, 10, &cb), MDL_OK);
            mdl_destroy(m);
        }
        a.layer_pattern[0] = 0;
        CHECK_INT_EQ(mdl_create(&m, &a, 3, err, sizeof err), MDL_OK);
        if (m) {
            CHECK_INT_EQ(mdl_decode_init(m, 3, 10, &cb0), MDL_OK);
            mdl_destroy(m);
        }
        CHECK(cb == cb0 + sizeof(float) * 2 * 3 * 3 * 16);
    }
}

/* sample.h: the picking rule (greedy, top-k 1, determinism of a seed, non-finite logits)
   and smp_continue's greedy continuation against the argmax of full forwards of the
   growing sequence. */
static void test_sample(void)
{
    mdl_config c = small();
    mdl_model *m = NULL;
    mdl_opts o = mdl_opts_default();
    char err[256];
    float lg[8] = {0.1f, 2.0f, -1.0f, 2.0f, 0.5f, 1.9f, -3.0f, 0.0f};
    smp_cand cd[DV];
    uint64_t r1 = 7, r2 = 7;
    int seq[DT], out[DT], nout = 0, i, k, rc, same = 1, counts[8] = {0};
    CHECK_INT_EQ(smp_pick(lg, 8, 0.0, 0, 1.0, &r1, cd), 1); /* ties: the lower id */
    CHECK_INT_EQ(smp_pick(lg, 8, 1.0, 1, 1.0, &r1, cd), 1); /* top-1 is greedy */
    r1 = r2 = 7;
    for (i = 0; i < 200; i++) {
        int a = smp_pick(lg, 8, 0.7, 0, 0.9, &r1, cd), b = smp_pick(lg, 8, 0.7, 0, 0.9, &r2, cd);
        if (a != b || a < 0 || a >= 8) same = 0;
        else counts[a]++;
    }
    CHECK(same);
    CHECK(counts[1] > 0 && counts[3] > 0 && counts[6] == 0); /* the nucleus drops the tail */
    lg[4] = NAN;
    CHECK_INT_EQ(smp_pick(lg, 8, 1.0, 0, 1.0, &r1, cd), -1);
    rc = mdl_create(&m, &c, 5, err, sizeof err);
    CHECK_INT_EQ(rc, MDL_OK);
    if (rc) return;
    randomize(m, 77);
    seq[0] = 3;
    seq[1] = 14;
    seq[2] = 9;
    CHECK_INT_EQ(smp_continue(m, seq, 3, DT - 3, 0.0, 0, 1.0, 1, -1, out, &nout, err, sizeof err), MDL_OK);
    CHECK_INT_EQ(nout, DT - 3);
    for (k = 0; k < nout; k++) { /* argmax of the full forward's last row, the sequence so far */
        const float *row;
        int best = 0, v;
        CHECK_INT_EQ(mdl_forward(m, seq, NULL, 1, 3 + k, &o, NULL), MDL_OK);
        row = mdl_logits(m) + (size_t)(2 + k) * DV;
        for (v = 1; v < DV; v++)
            if (row[v] > row[best]) best = v;
        CHECK_INT_EQ(out[k], best);
        seq[3 + k] = out[k];
    }
    /* eot stops (and is kept); max_new 0 gives nothing; a prompt beyond the context is refused */
    {
        int eot = out[1], first = out[0] == eot ? 1 : 2;
        CHECK_INT_EQ(smp_continue(m, seq, 3, DT - 3, 0.0, 0, 1.0, 1, eot, out, &nout, err, sizeof err), MDL_OK);
        CHECK_INT_EQ(nout, first);
    }
    CHECK_INT_EQ(smp_continue(m, seq, 3, 0, 0.0, 0, 1.0, 1, -1, out, &nout, err, sizeof err), MDL_OK);
    CHECK_INT_EQ(nout, 0);
    CHECK_INT_EQ(smp_continue(m, seq, DT + 1, 2, 0.0, 0, 1.0, 1, -1, out, &nout, err, sizeof err), MDL_EINVAL);
    CHECK(strstr(err, "context") != NULL);
    mdl_destroy(m);
}

/* ex_dec_attn (exctx.h, the CPU decode's attention of each new row over its slot's cache)
   against the straightforward loops it was written as (the values summed per output
   element, j inner): the value sum runs j outer over blocks of the head's elements since
   2026-11-27 (contiguous reads, independent chains); every element must come out in the
   same bits. Head widths 8, 32, 72 (a block of 64 and a rest), with and without a prior
   and GAC's tau, rows at positions 0 .. nl-1 of two slots. */
static void ref_dec_attn(float *att, const float *qkv, const float *kc, const float *vc, const int *slot,
                         const int *pos, const float *temp, float g, const float *pb, int n, int H, int D, int nl,
                         float *sc)
{
    const int C = H * D;
    int u;
    for (u = 0; u < n * H; u++) {
        const int rr = u / H, h = u % H, t = pos[rr], s = slot[rr];
        const float alpha = 1.0f / (sqrtf((float)D) * (temp[h] * g));
        const float *q = qkv + (size_t)rr * 3 * C + (size_t)h * D;
        const float *kb = kc + (size_t)s * nl * C + (size_t)h * D, *vb = vc + (size_t)s * nl * C + (size_t)h * D;
        float *o = att + (size_t)rr * C + (size_t)h * D, mx;
        double sum = 0.0;
        int j, e;
        for (j = 0; j <= t; j++) {
            double a = 0.0;
            for (e = 0; e < D; e++) a += (double)q[e] * (double)kb[(size_t)j * C + e];
            sc[j] = (float)a * alpha;
        }
        if (pb) {
            if (g != 1.0f)
                for (j = 0; j <= t; j++) sc[j] += pb[(size_t)t * nl + j] * (1.0f / g);
            else
                for (j = 0; j <= t; j++) sc[j] += pb[(size_t)t * nl + j];
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
}

static void test_dec_attn_bits(void)
{
    static const int Ds[3] = {8, 32, 72};
    const int H = 2, nl = 40, nb = 2, n = 6;
    int di, variant;
    ex_ctx cx = ex_ctx_make(EX_CPU);
#ifdef _OPENMP
    const int nthr = omp_get_max_threads();
#else
    const int nthr = 1;
#endif
    for (di = 0; di < 3; di++)
        for (variant = 0; variant < 3; variant++) {
            const int D = Ds[di], C = H * D;
            const float g = variant == 2 ? 0.7f : 1.0f;
            const float temp[2] = {1.0f, 1.3f};
            float *qkv = (float *)malloc(sizeof(float) * (size_t)n * 3 * C);
            float *kc = (float *)malloc(sizeof(float) * (size_t)nb * nl * C);
            float *vc = (float *)malloc(sizeof(float) * (size_t)nb * nl * C);
            float *pb = (float *)malloc(sizeof(float) * (size_t)nl * nl);
            float *a1 = (float *)malloc(sizeof(float) * (size_t)n * C), *a2 = (float *)malloc(sizeof(float) * (size_t)n * C);
            float *scr = (float *)malloc(sizeof(float) * (size_t)nthr * nl), *sc1 = (float *)malloc(sizeof(float) * nl);
            int slot[6] = {0, 1, 0, 1, 1, 0}, pos[6] = {0, 39, 17, 1, 25, 38}, k;
            CHECK(qkv && kc && vc && pb && a1 && a2 && scr && sc1);
            if (qkv && kc && vc && pb && a1 && a2 && scr && sc1) {
                tt_seed(500ull + (unsigned long long)(di * 3 + variant));
                for (k = 0; k < n * 3 * C; k++) qkv[k] = (float)(1.5 * tt_normal());
                for (k = 0; k < nb * nl * C; k++) kc[k] = (float)(1.5 * tt_normal()), vc[k] = (float)tt_normal();
                for (k = 0; k < nl * nl; k++) pb[k] = (float)(0.5 * tt_normal());
                CHECK_INT_EQ(ex_dec_attn(&cx, a1, qkv, kc, vc, slot, pos, temp, g, variant ? pb : NULL, n, H, D, nl, scr,
                                         nthr),
                             TK_OK);
                ref_dec_attn(a2, qkv, kc, vc, slot, pos, temp, g, variant ? pb : NULL, n, H, D, nl, sc1);
                CHECK(memcmp(a1, a2, sizeof(float) * (size_t)n * C) == 0);
                CHECK(a1[0] == a1[0]);
            }
            free(qkv);
            free(kc);
            free(vc);
            free(pb);
            free(a1);
            free(a2);
            free(scr);
            free(sc1);
        }
}

static void test_refusals(void)
{
    mdl_config base = small();
    char err[512];
    int n = 0;
    while (mdl_decode_limit(n)) n++;
    CHECK_INT_EQ(n, 1);
    CHECK(mdl_decode_limit(-1) == NULL);
    CHECK_INT_EQ(mdl_decode_supports(&base, err, sizeof err), MDL_OK);
    CHECK_INT_EQ(mdl_decode_supports(NULL, err, sizeof err), MDL_EINVAL);
    base.value_gate = 1;
    base.n_heads = 257;
    CHECK_INT_EQ(mdl_decode_supports(&base, err, sizeof err), MDL_EINVAL);
    CHECK(strstr(err, "256 heads") != NULL);
    { /* issue 43 item 5: the memory on the attention's q/k/v decodes (test_exact_mem_qkv) */
        mdl_config c = small();
        c.attn = MDL_ATTN_POLAR;
        c.memory = MDL_MEM_GDELTA;
        c.mem_qkv = MDL_MEMQKV_SHARED;
        CHECK_INT_EQ(mdl_decode_supports(&c, err, sizeof err), MDL_OK);
    }
}

static void test_bad_args(void)
{
    mdl_config c = small();
    mdl_model *m = NULL;
    char err[256];
    int toks[DT + 2], slots[3] = {0, 1, 2}, i;
    float lg[3 * DV];
    for (i = 0; i < DT + 2; i++) toks[i] = i % DV;
    CHECK_INT_EQ(mdl_create(&m, &c, 3, err, sizeof err), MDL_OK);
    if (!m) return;
    /* NULL model and no init */
    CHECK_INT_EQ(mdl_decode_init(NULL, 1, 1, NULL), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_prefill(NULL, 0, toks, 1, lg, 0), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_step(NULL, slots, toks, 1, lg), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_reset(NULL, 0), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_len(NULL, 0), -1);
    mdl_decode_free(NULL);
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, toks, 1, lg, 0), MDL_EINVAL);
    CHECK(strstr(mdl_last_error(m), "mdl_decode_init") != NULL);
    CHECK_INT_EQ(mdl_decode_step(m, slots, toks, 1, lg), MDL_EINVAL);
    /* init bounds */
    CHECK_INT_EQ(mdl_decode_init(m, 0, 4, NULL), MDL_EINVAL);
    CHECK(strstr(mdl_last_error(m), "max_batch") != NULL);
    CHECK_INT_EQ(mdl_decode_init(m, 2, DT + 1, NULL), MDL_EINVAL);
    CHECK(strstr(mdl_last_error(m), "max_len") != NULL);
    CHECK_INT_EQ(mdl_decode_init(m, 2, 0, NULL), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_init(m, 3, DT, NULL), MDL_OK);
    /* slot out of range, NULL, lengths */
    CHECK_INT_EQ(mdl_decode_prefill(m, 3, toks, 1, lg, 0), MDL_ERANGE);
    CHECK(strstr(mdl_last_error(m), "slot 3") != NULL);
    CHECK_INT_EQ(mdl_decode_prefill(m, -1, toks, 1, lg, 0), MDL_ERANGE);
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, NULL, 1, lg, 0), MDL_EINVAL);
    CHECK(strstr(mdl_last_error(m), "NULL") != NULL);
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, toks, 0, lg, 0), MDL_ERANGE);
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, toks, DT + 1, lg, 0), MDL_ERANGE);
    CHECK(strstr(mdl_last_error(m), "do not fit") != NULL);
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, toks, 1, lg, 2), MDL_EINVAL);
    toks[1] = DV;
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, toks, 2, lg, 0), MDL_ERANGE);
    CHECK(strstr(mdl_last_error(m), "outside") != NULL);
    toks[1] = -1;
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, toks, 2, lg, 0), MDL_ERANGE);
    toks[1] = 1;
    CHECK_INT_EQ(mdl_decode_len(m, 0), 0); /* failed calls change nothing */
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, toks, DT - 1, NULL, 0), MDL_OK); /* cache only */
    CHECK_INT_EQ(mdl_decode_len(m, 0), DT - 1);
    CHECK_INT_EQ(mdl_decode_prefill(m, 0, toks, 2, lg, 0), MDL_ERANGE); /* beyond max_len */
    CHECK_INT_EQ(mdl_decode_step(m, slots, toks, 1, lg), MDL_OK);
    CHECK_INT_EQ(mdl_decode_len(m, 0), DT);
    CHECK_INT_EQ(mdl_decode_step(m, slots, toks, 1, lg), MDL_ERANGE); /* full */
    CHECK(strstr(mdl_last_error(m), "full") != NULL);
    CHECK_INT_EQ(mdl_decode_len(m, 0), DT);
    /* step arguments */
    CHECK_INT_EQ(mdl_decode_step(m, NULL, toks, 1, lg), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_step(m, slots, NULL, 1, lg), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_step(m, slots + 1, toks, 1, NULL), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_step(m, slots + 1, toks, 0, lg), MDL_EINVAL);
    CHECK_INT_EQ(mdl_decode_step(m, slots + 1, toks, 4, lg), MDL_EINVAL);
    {
        int dup[2] = {1, 1}, bad[2] = {1, 5};
        CHECK_INT_EQ(mdl_decode_step(m, dup, toks, 2, lg), MDL_EINVAL);
        CHECK(strstr(mdl_last_error(m), "twice") != NULL);
        CHECK_INT_EQ(mdl_decode_step(m, bad, toks, 2, lg), MDL_ERANGE);
        CHECK_INT_EQ(mdl_decode_len(m, 1), 0);
    }
    CHECK_INT_EQ(mdl_decode_reset(m, 3), MDL_ERANGE);
    CHECK_INT_EQ(mdl_decode_reset(m, 0), MDL_OK);
    CHECK_INT_EQ(mdl_decode_len(m, 0), 0);
    CHECK_INT_EQ(mdl_decode_len(m, 7), -1);
    /* temperatures */
    {
        float ht[4] = {1.0f, 0.0f, 1.0f, 1.0f};
        CHECK_INT_EQ(mdl_decode_set_temp(m, ht, 1.0f), MDL_EINVAL);
        ht[1] = (float)NAN;
        CHECK_INT_EQ(mdl_decode_set_temp(m, ht, 1.0f), MDL_EINVAL);
        CHECK_INT_EQ(mdl_decode_set_temp(m, NULL, 0.0f), MDL_EINVAL);
        CHECK_INT_EQ(mdl_decode_set_temp(m, NULL, 1.0f), MDL_OK);
    }
    mdl_decode_free(m);
    CHECK_INT_EQ(mdl_decode_cache_bytes(m), 0);
    CHECK_INT_EQ(mdl_decode_step(m, slots, toks, 1, lg), MDL_EINVAL);
    mdl_destroy(m);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_exact_learned_ln_gelu);
    TEST_RUN(test_exact_rope_rms_relu2_temps);
    TEST_RUN(test_exact_ffn_rows);
    TEST_RUN(test_exact_gac_nopos);
    TEST_RUN(test_exact_moe_gates);
    TEST_RUN(test_exact_priors);
    TEST_RUN(test_prior_window_rule);
    TEST_RUN(test_exact_polar_gdelta_conv);
    TEST_RUN(test_exact_layer_pattern);
    TEST_RUN(test_exact_polar_qknorm_gate);
    TEST_RUN(test_sample);
    TEST_RUN(test_dec_attn_bits);
    TEST_RUN(test_exact_mem_qkv);
    TEST_RUN(test_refusals);
    TEST_RUN(test_bad_args);
    fprintf(stderr, "test_decode: worst relative logit error over every configuration %.3g\n", g_worst);
    return TEST_END();
}
