/* test_niah.c - seed 002's needle-in-a-haystack experiment (examples/common/niah.c) and the
   model's RoPE position option and per-target loss weights (examples/common/model.c):
   the needle generator (disjoint train/eval keys and codes, every piece tokenised exactly
   as the GPT-2 BPE encodes the whole record, cue placement and answer positions at every
   length), the compact vocabulary, the per-digit scorer, the Wilson interval, RoPE's and
   the target weights' gradients against finite differences, RoPE's relative-position
   property, and a tiny end-to-end run (every arm, two lengths) whose table and JSON lines
   are well formed. Cases that need ../shared/data skip without it. */
#define _POSIX_C_SOURCE 200809L
/* the examples' code (impl, stb_impl, bpe, data, layers, model, plot, niah) is linked,
   built once per configuration (the Makefile's TEST_OBJS_test_niah) */
#include "../examples/common/niah.h"
#include "../examples/common/data.h"
#include "../examples/common/model.h"
#include "../examples/common/sigreg.h"
#include "attnkit_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static bpe_tokenizer *g_tok = NULL;
static wt2_tokens g_tr, g_te;
static char g_skip[640] = "no data";

static void load_data(void)
{
    char path[1200], err[512];
    const char *dir = wt2_default_data_dir();
    memset(&g_tr, 0, sizeof g_tr);
    memset(&g_te, 0, sizeof g_te);
    snprintf(path, sizeof path, "%s/gpt2", dir);
    if (bpe_load_dir(&g_tok, path, err, sizeof err) != BPE_OK) {
        snprintf(g_skip, sizeof g_skip, "no tokenizer: %s", err);
        g_tok = NULL;
        return;
    }
    if (wt2_load_split(dir, WT2_VALID, g_tok, &g_tr, err, sizeof err) != BPE_OK ||
        wt2_load_split(dir, WT2_TEST, g_tok, &g_te, err, sizeof err) != BPE_OK) {
        snprintf(g_skip, sizeof g_skip, "no WikiText-2 splits: %s", err);
        bpe_free(g_tok);
        g_tok = NULL;
    }
}

/* the ids of text as the tokenizer encodes it in one piece */
static int encode(const char *text, int32_t *out, int cap)
{
    bpe_ids ids = {0};
    int n;
    CHECK_INT_EQ(bpe_encode(g_tok, text, strlen(text), &ids), BPE_OK);
    n = (int)ids.n;
    if (n > cap) n = cap;
    memcpy(out, ids.data, sizeof(int32_t) * (size_t)n);
    bpe_ids_free(&ids);
    return n;
}

static void key_text(int32_t id, char *buf, size_t cap)
{
    size_t n = 0;
    const unsigned char *b = bpe_token_bytes(g_tok, id, &n);
    if (!b || n + 1 > cap) n = 0;
    if (n) memcpy(buf, b, n);
    buf[n] = 0;
}

static void test_spec_keys_and_codes(void)
{
    niah_spec s;
    char err[256];
    int i, j, sp;
    tk_rng rng;
    if (!g_tok) TEST_SKIP(g_skip);
    CHECK_INT_EQ(niah_spec_build(&s, g_tok, g_tr.ids, g_tr.n, 32, err, sizeof err), NIAH_OK);
    CHECK_INT_EQ(s.nkeys[0], 32);
    CHECK_INT_EQ(s.nkeys[1], 32);
    /* disjoint pools, every key one token " Word" that encodes to itself, not a template token */
    for (i = 0; i < 32; i++)
        for (j = 0; j < 32; j++) CHECK(s.keys[NIAH_TRAIN][i] != s.keys[NIAH_EVAL][j]);
    for (sp = 0; sp < 2; sp++)
        for (i = 0; i < 32; i++) {
            char kt[64];
            int32_t one[4];
            key_text(s.keys[sp][i], kt, sizeof kt);
            CHECK(kt[0] == ' ' && kt[1] >= 'A' && kt[1] <= 'Z');
            CHECK_INT_EQ(encode(kt, one, 4), 1);
            CHECK_INT_EQ(one[0], s.keys[sp][i]);
            for (j = 0; j < s.nprefix; j++) CHECK(s.prefix[j] != s.keys[sp][i]);
            for (j = 0; j < i; j++) CHECK(s.keys[sp][j] != s.keys[sp][i]);
        }
    /* drawn needles: key from their split's pool, code parity of their split */
    tk_rng_seed(&rng, 3, 0);
    for (i = 0; i < 2000; i++) {
        niah_needle nd;
        int in_pool = 0, k;
        sp = i % 2;
        CHECK_INT_EQ(niah_draw(&s, sp, &rng, &nd), NIAH_OK);
        for (k = 0; k < 32; k++) in_pool |= s.keys[sp][k] == nd.key;
        CHECK(in_pool);
        CHECK_INT_EQ(niah_code_split(nd.digits), sp);
        for (k = 0; k < NIAH_DIGITS; k++) CHECK(nd.digits[k] >= 0 && nd.digits[k] <= 9);
    }
    CHECK_INT_EQ(niah_draw(&s, 2, &rng, NULL), NIAH_EINVAL);
    niah_spec_free(&s);
    /* 100 tokens of text do not hold 2 x 1000 key words: refused, nothing left allocated */
    CHECK_INT_EQ(niah_spec_build(&s, g_tok, g_tr.ids, 100, 1000, err, sizeof err), NIAH_EINVAL);
    CHECK(s.keys[0] == NULL && s.keys[1] == NULL);
}

static void test_record_tokenisation(void)
{
    niah_spec s;
    char err[256];
    int sp, i;
    tk_rng rng;
    if (!g_tok) TEST_SKIP(g_skip);
    CHECK_INT_EQ(niah_spec_build(&s, g_tok, g_tr.ids, g_tr.n, 16, err, sizeof err), NIAH_OK);
    tk_rng_seed(&rng, 5, 0);
    for (sp = 0; sp < 2; sp++)
        for (i = 0; i < 16; i++) {
            niah_needle nd;
            char kt[64], text[256];
            int32_t got[64], want[64];
            int n, nw, k;
            CHECK_INT_EQ(niah_draw(&s, sp, &rng, &nd), NIAH_OK);
            key_text(nd.key, kt, sizeof kt);
            /* the whole record encoded in one go: the ids the generator plants */
            snprintf(text, sizeof text, " The access code for record%s is %d %d %d %d %d.", kt, nd.digits[0],
                     nd.digits[1], nd.digits[2], nd.digits[3], nd.digits[4]);
            n = niah_record(&s, &nd, got, 64);
            nw = encode(text, want, 64);
            CHECK_INT_EQ(n, nw);
            CHECK_INT_EQ(n, niah_record_len(&s));
            for (k = 0; k < n && k < nw; k++) CHECK_INT_EQ(got[k], want[k]);
            /* the cue + digits: the record without its final "." */
            snprintf(text, sizeof text, " The access code for record%s is %d %d %d %d %d", kt, nd.digits[0],
                     nd.digits[1], nd.digits[2], nd.digits[3], nd.digits[4]);
            n = niah_cue(&s, &nd, got, 64);
            nw = encode(text, want, 64);
            CHECK_INT_EQ(n, nw);
            CHECK_INT_EQ(n, niah_cue_len(&s) + NIAH_DIGITS);
            for (k = 0; k < n && k < nw; k++) CHECK_INT_EQ(got[k], want[k]);
            /* the digits are the last five tokens, each " d" */
            for (k = 0; k < NIAH_DIGITS; k++) {
                char d[4] = {' ', (char)('0' + nd.digits[k]), 0, 0};
                int32_t one[2];
                CHECK_INT_EQ(encode(d, one, 2), 1);
                CHECK_INT_EQ(got[niah_cue_len(&s) + k], one[0]);
            }
        }
    {
        niah_needle bad = {0, {1, 2, 3, 4, 10}};
        int32_t out[64];
        CHECK_INT_EQ(niah_record(&s, &bad, out, 64), NIAH_EINVAL);
        bad.digits[4] = 4;
        CHECK_INT_EQ(niah_record(&s, &bad, out, 3), NIAH_EINVAL);
    }
    niah_spec_free(&s);
}

static void test_vocab(void)
{
    niah_spec s;
    niah_vocab v;
    char err[256];
    int32_t must[256];
    int nm, i;
    if (!g_tok) TEST_SKIP(g_skip);
    CHECK_INT_EQ(niah_spec_build(&s, g_tok, g_tr.ids, g_tr.n, 16, err, sizeof err), NIAH_OK);
    nm = niah_spec_tokens(&s, must, 256);
    CHECK(nm > 32);
    CHECK_INT_EQ(niah_vocab_build(&v, g_tr.ids, g_tr.n, 50257, 300, must, nm, err, sizeof err), NIAH_OK);
    CHECK_INT_EQ(v.V, 300);
    CHECK_INT_EQ(v.unk, 299);
    for (i = 0; i < nm; i++) {
        CHECK(v.fwd[must[i]] != v.unk);
        CHECK_INT_EQ(v.back[v.fwd[must[i]]], must[i]);
    }
    for (i = 0; i < v.V - 1; i++) CHECK_INT_EQ(v.fwd[v.back[i]], i);
    /* the most frequent token of the text is in; the rest map to UNK or to themselves */
    CHECK(v.ntop > 0);
    for (i = 0; i < v.ntop; i++) CHECK(v.top[i] >= 0 && v.top[i] < v.V);
    for (i = 0; i < 50257; i++) CHECK(v.fwd[i] >= 0 && v.fwd[i] < v.V);
    niah_vocab_free(&v);
    /* too many needle tokens for V, bad ids */
    CHECK_INT_EQ(niah_vocab_build(&v, g_tr.ids, g_tr.n, 50257, 10, must, nm, err, sizeof err), NIAH_EINVAL);
    must[0] = 60000;
    CHECK_INT_EQ(niah_vocab_build(&v, g_tr.ids, g_tr.n, 50257, 300, must, nm, err, sizeof err), NIAH_EINVAL);
    niah_spec_free(&s);
}

/* cue placement and answer positions at every length 1x .. 32x of L = 64 */
static void test_rows(void)
{
    niah_spec s;
    niah_vocab v;
    niah_hay h;
    char err[256];
    int32_t must[256], *row;
    int nm, mult, rep;
    tk_rng rng;
    if (!g_tok) TEST_SKIP(g_skip);
    CHECK_INT_EQ(niah_spec_build(&s, g_tok, g_tr.ids, g_tr.n, 16, err, sizeof err), NIAH_OK);
    nm = niah_spec_tokens(&s, must, 256);
    CHECK_INT_EQ(niah_vocab_build(&v, g_tr.ids, g_tr.n, 50257, 1024, must, nm, err, sizeof err), NIAH_OK);
    row = (int32_t *)malloc(sizeof(int32_t) * (64 * 32 + 1));
    tk_rng_seed(&rng, 9, 0);
    for (h.mode = NIAH_HAY_TEXT; h.mode <= NIAH_HAY_SYNTH; h.mode++) {
        h.ids = g_te.ids;
        h.n = g_te.n;
        for (mult = 1; mult <= 32; mult *= 2) {
            int T = 64 * mult;
            for (rep = 0; rep < 3; rep++) {
                niah_probe pr;
                int32_t cue[64], rec[64];
                int nc, nr, k;
                CHECK_INT_EQ(niah_eval_row(&s, &v, &h, T, 8, 24, &rng, row, &pr), NIAH_OK);
                CHECK_INT_EQ(niah_code_split(pr.nd.digits), NIAH_EVAL);
                nc = niah_cue(&s, &pr.nd, cue, 64);
                nr = niah_record(&s, &pr.nd, rec, 64);
                /* the cue ends the T+1 row; the input at ans predicts digit 1, at ans + 4
                   (the last input, T - 1) digit 5 */
                CHECK_INT_EQ(pr.cue_pos + nc, T + 1);
                CHECK_INT_EQ(pr.ans + NIAH_DIGITS - 1, T - 1);
                for (k = 0; k < nc; k++) CHECK_INT_EQ(row[pr.cue_pos + k], v.fwd[cue[k]]);
                for (k = 0; k < NIAH_DIGITS; k++)
                    CHECK_INT_EQ(row[pr.ans + k + 1], v.fwd[s.digit[pr.nd.digits[k]]]); /* target of input ans+k */
                CHECK(pr.rec_pos >= 8 && pr.rec_pos < 24);
                for (k = 0; k < nr; k++) CHECK_INT_EQ(row[pr.rec_pos + k], v.fwd[rec[k]]);
                for (k = 0; k <= T; k++) CHECK(row[k] >= 0 && row[k] < v.V);
            }
        }
        /* training rows: k needles, records in the first half, cues in the second */
        for (rep = 0; rep < 20; rep++) {
            niah_probe pr[4];
            int k, j, T = 128;
            CHECK_INT_EQ(niah_train_row(&s, &v, &h, T, 1 + rep % 4, &rng, row, pr), NIAH_OK);
            for (k = 0; k < 1 + rep % 4; k++) {
                int32_t cue[64];
                int nc = niah_cue(&s, &pr[k].nd, cue, 64);
                CHECK_INT_EQ(niah_code_split(pr[k].nd.digits), NIAH_TRAIN);
                CHECK(pr[k].rec_pos + niah_record_len(&s) <= (T + 1) / 2);
                CHECK(pr[k].cue_pos >= (T + 1) / 2 && pr[k].cue_pos + nc <= T + 1);
                for (j = 0; j < nc; j++) CHECK_INT_EQ(row[pr[k].cue_pos + j], v.fwd[cue[j]]);
                CHECK_INT_EQ(pr[k].ans, pr[k].cue_pos + niah_cue_len(&s) - 1);
            }
        }
        CHECK_INT_EQ(niah_train_row(&s, &v, &h, 40, 2, &rng, row, NULL), NIAH_EINVAL); /* does not fit */
        CHECK_INT_EQ(niah_copy_row(&v, &h, 128, 32, &rng, row), NIAH_OK);
    }
    /* too short for a probe */
    {
        niah_probe pr;
        h.mode = NIAH_HAY_TEXT;
        CHECK_INT_EQ(niah_eval_row(&s, &v, &h, 20, 8, 24, &rng, row, &pr), NIAH_EINVAL);
    }
    free(row);
    niah_vocab_free(&v);
    niah_spec_free(&s);
}

/* the per-digit scorer on hand-made logits (no data needed: a spec and vocabulary by hand) */
static void test_scorer(void)
{
    niah_spec s;
    niah_vocab v;
    niah_probe pr;
    int32_t fwd[40], back[12];
    int V = 12, correct[NIAH_DIGITS], k;
    float lg[8 * 12];
    memset(&s, 0, sizeof s);
    memset(&v, 0, sizeof v);
    for (k = 0; k < 10; k++) s.digit[k] = 20 + k; /* GPT-2 ids 20..29 -> compact 1..10 */
    for (k = 0; k < 40; k++) fwd[k] = 11;
    for (k = 0; k < 10; k++) {
        fwd[20 + k] = 1 + k;
        back[1 + k] = 20 + k;
    }
    v.V = V;
    v.unk = 11;
    v.n_src = 40;
    v.fwd = fwd;
    v.back = back;
    memset(&pr, 0, sizeof pr);
    pr.ans = 2;
    pr.nd.digits[0] = 3;
    pr.nd.digits[1] = 1;
    pr.nd.digits[2] = 4;
    pr.nd.digits[3] = 1;
    pr.nd.digits[4] = 5;
    for (k = 0; k < 8 * 12; k++) lg[k] = 0.0f;
    /* rows 2..6 predict digits 1..5: right, right, wrong (UNK wins), right, tie -> lower id */
    lg[2 * V + 1 + 3] = 2.0f;
    lg[3 * V + 1 + 1] = 1.0f;
    lg[4 * V + 1 + 4] = 1.0f;
    lg[4 * V + 11] = 3.0f;
    lg[5 * V + 1 + 1] = 0.5f;
    lg[6 * V + 1 + 5] = 1.0f;
    lg[6 * V + 1 + 2] = 1.0f; /* digit 2 (compact 3) ties digit 5 (compact 6): 3 wins */
    /* rows outside the answer are never read: make them decisive for a wrong digit */
    lg[0 * V + 1] = 9.0f;
    lg[7 * V + 2] = 9.0f;
    CHECK_INT_EQ(niah_score(lg, V, &v, &s, &pr, correct), 3);
    CHECK_INT_EQ(correct[0], 1);
    CHECK_INT_EQ(correct[1], 1);
    CHECK_INT_EQ(correct[2], 0);
    CHECK_INT_EQ(correct[3], 1);
    CHECK_INT_EQ(correct[4], 0);
    lg[6 * V + 1 + 5] = 1.5f;
    CHECK_INT_EQ(niah_score(lg, V, &v, &s, &pr, correct), 4);
    CHECK_INT_EQ(niah_score(lg, V + 1, &v, &s, &pr, correct), NIAH_EINVAL);
    CHECK_INT_EQ(niah_score(NULL, V, &v, &s, &pr, correct), NIAH_EINVAL);
}

static void test_wilson(void)
{
    double lo, hi;
    niah_wilson(0, 10, &lo, &hi);
    CHECK_NEAR(lo, 0.0, 1e-12);
    CHECK_NEAR(hi, 0.27753, 1e-4);
    niah_wilson(5, 10, &lo, &hi);
    CHECK_NEAR(lo, 0.23659, 1e-4);
    CHECK_NEAR(hi, 0.76341, 1e-4);
    niah_wilson(400, 400, &lo, &hi);
    CHECK_NEAR(hi, 1.0, 1e-12);
    CHECK_NEAR(lo, 0.99049, 1e-4);
    niah_wilson(3, 0, &lo, &hi);
    CHECK(lo != lo && hi != hi);
}

/* ---- RoPE and target weights in the model: finite differences */
#define RB 2
#define RT 6
#define RV 29

static mdl_config rope_cfg(void)
{
    mdl_config c = mdl_config_default();
    c.vocab = RV;
    c.d_model = 16;
    c.n_layers = 2;
    c.n_heads = 2;
    c.max_T = 8;
    c.d_ff_mult = 2;
    c.init_std = 0.3f; /* large weights: gradients well above fp32 noise */
    c.pos = MDL_POS_ROPE;
    return c;
}

/* > 0: gradcheck fills every "conv.weight" with spread values (they start at 0: identity) */
static float g_conv_fill = 0.0f;

static double loss_of(mdl_model *m, const int *x, const int *y, const mdl_opts *o)
{
    mdl_stats st;
    CHECK_INT_EQ(mdl_forward(m, x, y, RB, RT, o, &st), MDL_OK);
    return st.loss;
}

/* central differences with Richardson extrapolation (the scheme of test_model.c), every
   coordinate of small tensors, 8 spread coordinates of large ones */
static void gradcheck(const mdl_config *c, const mdl_opts *o, const char *what)
{
    mdl_model *m = NULL;
    char err[256];
    int x[RB * RT], y[RB * RT], i, ti;
    float *g;
    const double h = 4e-3, atol = 1.5e-3, rtol = 0.03;
#ifdef _OPENMP
    int nthr = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    CHECK_INT_EQ(mdl_create(&m, c, 7, err, sizeof err), MDL_OK);
    if (!m) {
        fprintf(stderr, "%s: %s\n", what, err);
        return;
    }
    if (g_conv_fill != 0.0f)
        for (ti = 0; ti < mdl_num_tensors(m); ti++) {
            const mdl_tensor *t = mdl_tensor_at(m, ti);
            size_t k;
            if (strstr(t->name, "conv.weight"))
                for (k = 0; k < t->numel; k++) mdl_params(m)[t->offset + k] = g_conv_fill * (float)((int)(k % 7) - 3);
        }
    tt_seed(11);
    for (i = 0; i < RB * RT; i++) {
        x[i] = (int)(tt_uniform() * RV);
        y[i] = (int)(tt_uniform() * RV);
    }
    mdl_zero_grad(m);
    loss_of(m, x, y, o);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    g = (float *)malloc(sizeof(float) * mdl_num_params(m));
    memcpy(g, mdl_grads(m), sizeof(float) * mdl_num_params(m));
    for (ti = 0; ti < mdl_num_tensors(m); ti++) {
        const mdl_tensor *t = mdl_tensor_at(m, ti);
        size_t n = t->numel, k, cnt = n <= 8 ? n : 8;
        int bad = 0;
        for (k = 0; k < cnt; k++) {
            size_t idx = n <= 8 ? k : (size_t)(((unsigned long long)k * 2654435761ULL + 17) % n);
            float *p = mdl_params(m) + t->offset + idx, p0 = *p;
            double d1, d2, fd, an = g[t->offset + idx];
            *p = (float)(p0 + h);
            d1 = loss_of(m, x, y, o);
            *p = (float)(p0 - h);
            d1 = (d1 - loss_of(m, x, y, o)) / (2 * h);
            *p = (float)(p0 + h / 2);
            d2 = loss_of(m, x, y, o);
            *p = (float)(p0 - h / 2);
            d2 = (d2 - loss_of(m, x, y, o)) / h;
            *p = p0;
            fd = (4 * d2 - d1) / 3;
            if (fabs(fd - an) > atol + rtol * fabs(an)) {
                if (bad < 3) fprintf(stderr, "  %s %s[%lu]: fd %.6g an %.6g\n", what, t->name, (unsigned long)idx, fd, an);
                bad++;
            }
        }
        CHECK(bad == 0);
    }
    free(g);
    mdl_destroy(m);
#ifdef _OPENMP
    omp_set_num_threads(nthr);
#endif
}

static void test_rope_grad(void)
{
    mdl_config c = rope_cfg();
    mdl_opts o = mdl_opts_default();
    o.train = 1;
    gradcheck(&c, &o, "rope");
    c.memory = MDL_MEM_GDELTA;
    gradcheck(&c, &o, "rope+gdelta");
}

/* the causal convolution before the mixers: gradients of every arm's combination */
static void test_conv_grad(void)
{
    mdl_config c = rope_cfg();
    mdl_opts o = mdl_opts_default();
    o.train = 1;
    c.conv_k = 3;
    g_conv_fill = 0.15f;
    gradcheck(&c, &o, "conv+rope");
    c.pos = MDL_POS_NONE;
    c.attn = MDL_ATTN_POLAR;
    c.memory = MDL_MEM_GDELTA;
    gradcheck(&c, &o, "conv+polar+gdelta");
    c.conv_k = 2;
    c.attn = MDL_ATTN_SOFTMAX;
    c.memory = MDL_MEM_NONE;
    gradcheck(&c, &o, "conv2+nope");
    g_conv_fill = 0.0f;
}

/* causality of the convolution: changing token t never changes outputs before t; at
   init (weights 0) the model equals the same model without the convolution */
static void test_conv_causal(void)
{
    mdl_config c = rope_cfg();
    mdl_model *m = NULL, *m0 = NULL;
    char err[256];
    int x[RT] = {3, 9, 14, 2, 20, 7}, i, t;
    float *ref;
    c.conv_k = 4;
    CHECK_INT_EQ(mdl_create(&m, &c, 5, err, sizeof err), MDL_OK);
    c.conv_k = 0;
    CHECK_INT_EQ(mdl_create(&m0, &c, 5, err, sizeof err), MDL_OK);
    if (!m || !m0) return;
    ref = (float *)malloc(sizeof(float) * RT * RV);
    /* the same weights by name (tensor i draws from stream i, so the extra tensor shifts
       the draws); the conv weights stay 0 */
    for (i = 0; i < mdl_num_tensors(m0); i++) {
        const mdl_tensor *t0 = mdl_tensor_at(m0, i), *t1 = mdl_find_tensor(m, t0->name);
        CHECK(t1 != NULL && t1->numel == t0->numel);
        if (t1 && t1->numel == t0->numel)
            memcpy(mdl_params(m) + t1->offset, mdl_params(m0) + t0->offset, sizeof(float) * t0->numel);
    }
    CHECK_INT_EQ(mdl_forward(m, x, NULL, 1, RT, NULL, NULL), MDL_OK);
    memcpy(ref, mdl_logits(m), sizeof(float) * RT * RV);
    CHECK_INT_EQ(mdl_forward(m0, x, NULL, 1, RT, NULL, NULL), MDL_OK);
    for (i = 0; i < RT * RV; i++) CHECK_NEAR(mdl_logits(m0)[i], ref[i], 1e-6);
    for (i = 0; i < mdl_num_tensors(m); i++) {
        const mdl_tensor *tt = mdl_tensor_at(m, i);
        size_t k;
        if (strstr(tt->name, "conv.weight"))
            for (k = 0; k < tt->numel; k++) mdl_params(m)[tt->offset + k] = 0.2f * (float)((int)(k % 5) - 2);
    }
    CHECK_INT_EQ(mdl_forward(m, x, NULL, 1, RT, NULL, NULL), MDL_OK);
    memcpy(ref, mdl_logits(m), sizeof(float) * RT * RV);
    x[3] = 25;
    CHECK_INT_EQ(mdl_forward(m, x, NULL, 1, RT, NULL, NULL), MDL_OK);
    for (t = 0; t < 3; t++)
        for (i = 0; i < RV; i++) CHECK(mdl_logits(m)[t * RV + i] == ref[t * RV + i]);
    {
        double d = 0.0;
        for (i = 0; i < RV; i++) d += fabs((double)mdl_logits(m)[3 * RV + i] - ref[3 * RV + i]);
        CHECK(d > 1e-3);
    }
    c.conv_k = 1;
    CHECK_INT_EQ(mdl_config_validate(&c, err, sizeof err), MDL_EINVAL);
    c.conv_k = 17;
    CHECK_INT_EQ(mdl_config_validate(&c, err, sizeof err), MDL_EINVAL);
    free(ref);
    mdl_destroy(m);
    mdl_destroy(m0);
}

static void test_target_weight_grad(void)
{
    mdl_config c = rope_cfg();
    mdl_opts o = mdl_opts_default();
    float w[RB * RT];
    int i;
    for (i = 0; i < RB * RT; i++) w[i] = (float)(i % 3) * 0.75f + (i == 4 ? 6.0f : 0.0f);
    o.train = 1;
    o.label_smoothing = 0.1f;
    o.target_weight = w;
    gradcheck(&c, &o, "target weights");
    c.pos = MDL_POS_NONE;
    c.attn = MDL_ATTN_POLAR;
    gradcheck(&c, &o, "target weights polar");
}

/* loss with weights = the weighted mean of the per-token losses; bad weights refused */
static void test_target_weight_value(void)
{
    mdl_config c = rope_cfg();
    mdl_opts o = mdl_opts_default();
    mdl_model *m = NULL;
    mdl_stats st;
    char err[256];
    int x[RB * RT], y[RB * RT], i;
    float w[RB * RT];
    double num = 0.0, den = 0.0, ce_plain;
    const double *tce;
    CHECK_INT_EQ(mdl_create(&m, &c, 3, err, sizeof err), MDL_OK);
    if (!m) return;
    for (i = 0; i < RB * RT; i++) {
        x[i] = (i * 7) % RV;
        y[i] = (i * 5 + 1) % RV;
        w[i] = (float)(i % 4);
    }
    CHECK_INT_EQ(mdl_forward(m, x, y, RB, RT, &o, &st), MDL_OK);
    ce_plain = st.ce;
    tce = mdl_token_ce(m);
    for (i = 0; i < RB * RT; i++) {
        num += w[i] * tce[i];
        den += w[i];
    }
    o.target_weight = w;
    CHECK_INT_EQ(mdl_forward(m, x, y, RB, RT, &o, &st), MDL_OK);
    CHECK_CLOSE(st.loss, num / den, 1e-6, 1e-9);
    CHECK_CLOSE(st.ce, ce_plain, 1e-12, 0.0); /* the reported CE stays the plain mean */
    w[3] = -1.0f;
    CHECK_INT_EQ(mdl_forward(m, x, y, RB, RT, &o, &st), MDL_EINVAL);
    w[3] = NAN;
    CHECK_INT_EQ(mdl_forward(m, x, y, RB, RT, &o, &st), MDL_EINVAL);
    for (i = 0; i < RB * RT; i++) w[i] = 0.0f;
    CHECK_INT_EQ(mdl_forward(m, x, y, RB, RT, &o, &st), MDL_EINVAL);
    mdl_destroy(m);
}

/* RoPE's rotation: a query rotated to position t dotted with a key rotated to s equals the
   query rotated by t - s dotted with the unrotated key (scores depend on relative
   positions only), and the inverse rotation undoes it. Through the model: with one layer
   and no positions, the last position's output is a pool over the earlier tokens, so
   permuting them leaves it unchanged; with RoPE it changes (positions are used). */
static void test_rope_relative(void)
{
    mdl_config c = rope_cfg();
    mdl_model *mr = NULL, *mn = NULL;
    char err[256];
    int a[RT] = {3, 9, 14, 2, 20, 7}, b[RT] = {20, 2, 14, 9, 3, 7}, i;
    float la[RV], lb[RV], na[RV], nb[RV];
    double dr = 0.0, dn = 0.0;
    c.n_layers = 1;
    CHECK_INT_EQ(mdl_create(&mr, &c, 5, err, sizeof err), MDL_OK);
    c.pos = MDL_POS_NONE;
    CHECK_INT_EQ(mdl_create(&mn, &c, 5, err, sizeof err), MDL_OK);
    if (!mr || !mn) return;
    CHECK_INT_EQ(mdl_forward(mr, a, NULL, 1, RT, NULL, NULL), MDL_OK);
    memcpy(la, mdl_logits(mr) + (size_t)(RT - 1) * RV, sizeof la);
    CHECK_INT_EQ(mdl_forward(mr, b, NULL, 1, RT, NULL, NULL), MDL_OK);
    memcpy(lb, mdl_logits(mr) + (size_t)(RT - 1) * RV, sizeof lb);
    CHECK_INT_EQ(mdl_forward(mn, a, NULL, 1, RT, NULL, NULL), MDL_OK);
    memcpy(na, mdl_logits(mn) + (size_t)(RT - 1) * RV, sizeof na);
    CHECK_INT_EQ(mdl_forward(mn, b, NULL, 1, RT, NULL, NULL), MDL_OK);
    memcpy(nb, mdl_logits(mn) + (size_t)(RT - 1) * RV, sizeof nb);
    for (i = 0; i < RV; i++) {
        dr += fabs((double)la[i] - lb[i]);
        dn += fabs((double)na[i] - nb[i]);
    }
    CHECK(dn < 1e-4);  /* NoPE, one layer: the last row is a permutation-invariant pool */
    CHECK(dr > 1e-2);  /* RoPE: order matters */
    {
        float q[1 * 1 * 3 * 4], k[1 * 1 * 3 * 4], q0[4], k0[4];
        int t, s, d;
        for (d = 0; d < 4; d++) {
            q0[d] = 0.3f + 0.2f * d;
            k0[d] = 1.0f - 0.3f * d;
        }
        for (t = 0; t < 3; t++)
            for (d = 0; d < 4; d++) {
                q[t * 4 + d] = q0[d];
                k[t * 4 + d] = k0[d];
            }
        CHECK_INT_EQ(tk_rope(q, 1, 1, 3, 4, (float)MDL_ROPE_BASE, 0), TK_OK);
        CHECK_INT_EQ(tk_rope(k, 1, 1, 3, 4, (float)MDL_ROPE_BASE, 0), TK_OK);
        for (t = 0; t < 3; t++)
            for (s = 0; s <= t; s++) {
                float qq[4], dot = 0.0f, ref = 0.0f;
                int u;
                /* q0 rotated by t - s dotted with k0 */
                float tmp[4 * 3];
                for (u = 0; u < 3; u++)
                    for (d = 0; d < 4; d++) tmp[u * 4 + d] = q0[d];
                CHECK_INT_EQ(tk_rope(tmp, 1, 1, 3, 4, (float)MDL_ROPE_BASE, 0), TK_OK);
                for (d = 0; d < 4; d++) qq[d] = tmp[(t - s) * 4 + d];
                for (d = 0; d < 4; d++) {
                    dot += q[t * 4 + d] * k[s * 4 + d];
                    ref += qq[d] * k0[d];
                }
                CHECK_NEAR(dot, ref, 1e-5);
            }
        /* the inverse undoes the forward */
        CHECK_INT_EQ(tk_rope(q, 1, 1, 3, 4, (float)MDL_ROPE_BASE, 1), TK_OK);
        for (t = 0; t < 3; t++)
            for (d = 0; d < 4; d++) CHECK_NEAR(q[t * 4 + d], q0[d], 1e-6);
    }
    mdl_destroy(mr);
    mdl_destroy(mn);
}

static void test_rope_config(void)
{
    mdl_config c = rope_cfg();
    char err[256];
    CHECK_INT_EQ(mdl_config_validate(&c, err, sizeof err), MDL_OK);
    c.attn = MDL_ATTN_POLAR;
    CHECK_INT_EQ(mdl_config_validate(&c, err, sizeof err), MDL_EINVAL);
    CHECK(strstr(err, "rope") != NULL);
    c = rope_cfg();
    c.d_model = 18;
    c.n_heads = 2; /* head width 9: odd */
    CHECK_INT_EQ(mdl_config_validate(&c, err, sizeof err), MDL_EINVAL);
    c = rope_cfg();
    c.pos = 3;
    CHECK_INT_EQ(mdl_config_validate(&c, err, sizeof err), MDL_EINVAL);
}

/* a tiny end-to-end run: every arm, two lengths, a well-formed table and JSON lines */
/* issue 37: the configuration check a program runs before it opens any output, and a
   results table that never prints "nan" (no document windows: doc_ce NaN; no digits) */
static void test_config_check_and_table(void)
{
    niah_config c = niah_config_default();
    niah_result r;
    char err[256], *buf = NULL;
    size_t n = 0;
    FILE *f;
    CHECK_INT_EQ(niah_config_check(&c, err, sizeof err), NIAH_OK);
    c.conv_k = 1;
    err[0] = 0;
    CHECK_INT_EQ(niah_config_check(&c, err, sizeof err), NIAH_EINVAL);
    CHECK(strstr(err, "conv_k") != NULL);
    c = niah_config_default();
    c.d_model = 6;
    c.n_heads = 4;
    CHECK_INT_EQ(niah_config_check(&c, err, sizeof err), NIAH_EINVAL);
    CHECK_INT_EQ(niah_config_check(NULL, err, sizeof err), NIAH_EINVAL);
    memset(&r, 0, sizeof r);
    r.arm = 2;
    r.mult = 1;
    r.T = 64;
    r.doc_ce = NAN;
    r.train_ce = NAN;
    niah_wilson(0, 0, &r.acc_lo, &r.acc_hi); /* no digits: NaN bounds */
    f = open_memstream(&buf, &n);
    if (!f) TEST_SKIP("no open_memstream");
    niah_print_table(f, &r, 1);
    fclose(f);
    CHECK(buf != NULL && strstr(buf, "| polar | 1 | 64 |") != NULL);
    CHECK(buf != NULL && strstr(buf, "nan") == NULL && strstr(buf, "NaN") == NULL);
    free(buf);
}

static void test_end_to_end(void)
{
    niah_config c = niah_config_default();
    niah_result res[NIAH_NARMS * 2];
    char err[512], line[2048], tmpl[] = "/tmp/test_niah_XXXXXX";
    int nres = 0, i, fd, lines = 0, seen[NIAH_NARMS] = {0};
    FILE *jl, *tab;
    if (!g_tok) TEST_SKIP(g_skip);
    c.train_len = 48;
    c.nmult = 2;
    c.mult[0] = 1;
    c.mult[1] = 2;
    c.steps = 2;
    c.batch = 2;
    c.train_needles = 1;
    c.copy_frac = 0.5f;
    c.digit_weight = 5.0f;
    c.probes = 3;
    c.doc_windows = 2;
    c.eval_tokens = 100;
    c.d_model = 8;
    c.n_layers = 1;
    c.n_heads = 2;
    c.vocab = 128;
    c.nkeys = 4;
    c.log_every = 0;
    fd = mkstemp(tmpl);
    CHECK(fd >= 0);
    if (fd < 0) return;
    jl = fdopen(fd, "w+");
    tab = tmpfile();
    CHECK(jl != NULL && tab != NULL);
    if (!jl || !tab) return;
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, res, NIAH_NARMS * 2, &nres, jl, NULL, err,
                          sizeof err), NIAH_OK);
    CHECK_INT_EQ(nres, NIAH_NARMS * 2);
    for (i = 0; i < nres; i++) {
        const niah_result *r = res + i;
        CHECK(r->arm >= 0 && r->arm < NIAH_NARMS);
        seen[r->arm]++;
        CHECK_INT_EQ(r->mult, i % 2 ? 2 : 1);
        CHECK_INT_EQ(r->T, 48 * r->mult);
        CHECK_INT_EQ(r->probes, 3);
        CHECK_INT_EQ(r->digits, 15);
        CHECK(r->correct >= 0 && r->correct <= 15 && r->exact >= 0 && r->exact <= 3);
        CHECK_NEAR(r->acc, (double)r->correct / 15.0, 1e-12);
        CHECK(r->acc_lo <= r->acc && r->acc <= r->acc_hi && r->acc_lo >= 0.0 && r->acc_hi <= 1.0);
        CHECK(r->doc_ce > 0.0 && r->doc_ce < 20.0);
        CHECK_INT_EQ(r->doc_tokens, 2LL * r->T);
        CHECK(r->train_ce > 0.0 && r->train_ce < 20.0);
    }
    for (i = 0; i < NIAH_NARMS; i++) CHECK_INT_EQ(seen[i], 2);
    /* the JSON lines: one per result, with every field */
    rewind(jl);
    while (fgets(line, sizeof line, jl)) {
        CHECK(line[0] == '{' && strstr(line, "}\n") != NULL);
        CHECK(strstr(line, "\"arm\": \"") && strstr(line, "\"acc\": ") && strstr(line, "\"acc_lo\": ") &&
              strstr(line, "\"doc_ce\": ") && strstr(line, "\"probes\": 3") && strstr(line, "\"seed\": 1"));
        CHECK(strstr(line, "nan") == NULL && strstr(line, "inf") == NULL);
        lines++;
    }
    CHECK_INT_EQ(lines, NIAH_NARMS * 2);
    /* the table: header, rule, one row per result with 9 cells */
    niah_print_table(tab, res, nres);
    rewind(tab);
    lines = 0;
    while (fgets(line, sizeof line, tab)) {
        int bars = 0;
        char *p;
        for (p = line; *p; p++) bars += *p == '|';
        CHECK_INT_EQ(bars, 9);
        if (lines >= 2) CHECK(strstr(line, niah_arm_name(res[lines - 2].arm)) != NULL);
        lines++;
    }
    CHECK_INT_EQ(lines, 2 + NIAH_NARMS * 2);
    fclose(tab);
    fclose(jl);
    unlink(tmpl);
    /* refused configurations */
    c.train_len = 16;
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, res, NIAH_NARMS * 2, &nres, NULL, NULL, err,
                          sizeof err), NIAH_EINVAL);
    c.train_len = 48;
    for (i = 0; i < NIAH_NARMS; i++) c.arms[i] = 0;
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, res, NIAH_NARMS * 2, &nres, NULL, NULL, err,
                          sizeof err), NIAH_EINVAL);
    c.arms[0] = 1;
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, res, 1, &nres, NULL, NULL, err, sizeof err),
                 NIAH_EINVAL); /* capacity */
    c.mult[1] = 4096;
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, res, NIAH_NARMS * 2, &nres, NULL, NULL, err,
                          sizeof err), NIAH_EINVAL);
}

/* issue 43 item 8: the presets, the checks on the new knobs */
static void test_atma_preset_and_checks(void)
{
    niah_config c = niah_config_default(), d = niah_config_default();
    char err[256];
    CHECK_INT_EQ(niah_config_preset(&c, "atma"), NIAH_OK);
    CHECK(!strcmp(c.preset, "atma") && !strcmp(c.layer_pattern, "ccAc"));
    CHECK(c.d_model == 64 && c.n_layers == 8 && c.n_heads == 4 && c.kv_heads == 1 && c.conv_k == 0);
    CHECK(c.ffn == MDL_FFN_RELU2 && c.norm == MDL_NORM_RMS && c.qk_norm == 1 && c.canon_k == 4);
    CHECK(c.polar_gate == MDL_POLAR_GATE_CHANNEL && c.optimizer == NIAH_OPT_MUON && c.mem_qkv == MDL_MEMQKV_SHARED);
    CHECK(c.lr_flat == 0.3 && c.lr_floor == 0.0);
    CHECK(c.steps == d.steps && c.batch == d.batch && c.train_len == d.train_len); /* the grid's budget */
    CHECK_INT_EQ(niah_config_check(&c, err, sizeof err), NIAH_OK);
    CHECK_INT_EQ(niah_config_preset(&c, "default"), NIAH_OK); /* back to the original model */
    CHECK(!c.preset[0] && !c.layer_pattern[0] && c.d_model == d.d_model && c.conv_k == d.conv_k &&
          c.optimizer == NIAH_OPT_ADAMW && c.lr_floor == 0.1 && c.ffn == MDL_FFN_GELU);
    CHECK_INT_EQ(niah_config_preset(&c, "atmax"), NIAH_EINVAL);
    CHECK_INT_EQ(niah_config_preset(NULL, "atma"), NIAH_EINVAL);
    CHECK_INT_EQ(niah_config_preset(&c, NULL), NIAH_EINVAL);
#define BAD(field, value, word)                                                                                    \
    do {                                                                                                           \
        niah_config b = niah_config_default();                                                                     \
        niah_config_preset(&b, "atma");                                                                            \
        b.field = value;                                                                                           \
        err[0] = 0;                                                                                                \
        CHECK_INT_EQ(niah_config_check(&b, err, sizeof err), NIAH_EINVAL);                                         \
        CHECK(strstr(err, word) != NULL);                                                                          \
    } while (0)
    BAD(ffn, MDL_FFN_MOE, "ffn");
    BAD(norm, 7, "norm");
    BAD(kv_heads, 3, "kv_heads");
    BAD(kv_heads, -1, "kv_heads");
    BAD(qk_norm, 2, "qk_norm");
    BAD(polar_gate, 5, "gate");
    BAD(optimizer, 2, "optimizer");
    BAD(mem_qkv, 2, "mem_qkv");
    BAD(muon_momentum, 1.0f, "Muon");
    BAD(muon_ns_steps, 0, "Muon");
    BAD(sigreg, 9, "sigreg");
    {
        niah_config b = c;
        niah_config_preset(&b, "atma");
        b.sigreg = SGR_WEAK;
        b.sigreg_alpha = 0.0f; /* checked only with a mode on */
        CHECK_INT_EQ(niah_config_check(&b, err, sizeof err), NIAH_EINVAL);
        b.sigreg = SGR_OFF;
        CHECK_INT_EQ(niah_config_check(&b, err, sizeof err), NIAH_OK);
    }
    BAD(lr_flat, 1.5, "lr_flat");
    BAD(lr_floor, -0.1, "lr_floor");
    BAD(layer_pattern[1], 'x', "pattern");
    BAD(preset[0], 'z', "preset");
#undef BAD
}

/* the atma preset end to end at a toy size: the results carry the preset and model, a run is
   a pure function of its configuration, and Muon / SIGReg change it */
static void atma_toy(niah_config *c)
{
    niah_config_preset(c, "atma");
    c->train_len = 48;
    c->nmult = 1;
    c->mult[0] = 1;
    c->steps = 3;
    c->batch = 2;
    c->probes = 2;
    c->doc_windows = 1;
    c->eval_tokens = 100;
    c->d_model = 16;
    c->n_layers = 4; /* one of each mixer */
    c->n_heads = 2;
    c->vocab = 128;
    c->nkeys = 4;
    c->log_every = 0;
    memset(c->arms, 0, sizeof c->arms);
    c->arms[5] = 1; /* polar+gdelta */
    c->arms[1] = 1; /* softmax-nope */
}

static void test_atma_end_to_end(void)
{
    niah_config c = niah_config_default();
    niah_result r1[2], r2[2], r3[2];
    char err[512], line[2048];
    int n = 0;
    if (!g_tok) TEST_SKIP(g_skip);
    atma_toy(&c);
    c.sigreg = 0;
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, r1, 2, &n, NULL, NULL, err, sizeof err),
                 NIAH_OK);
    CHECK_INT_EQ(n, 2);
    CHECK(!strcmp(r1[0].preset, "atma") && strstr(r1[0].model, "pattern=ccAc") && strstr(r1[0].model, "opt=muon") &&
          strstr(r1[0].model, "memqkv=shared"));
    CHECK(r1[1].train_ce > 0.0 && r1[1].train_ce < 20.0 && r1[1].doc_ce > 0.0);
    niah_result_json(&r1[1], 1, line, sizeof line);
    CHECK(strstr(line, "\"preset\": \"atma\"") && strstr(line, "\"model\": \"d16 L4 H2 pattern=ccAc"));
    /* the same configuration again: the same numbers, bit for bit */
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, r2, 2, &n, NULL, NULL, err, sizeof err),
                 NIAH_OK);
    CHECK(r2[0].train_ce == r1[0].train_ce && r2[1].train_ce == r1[1].train_ce && r2[1].doc_ce == r1[1].doc_ce);
    /* AdamW instead of Muon: another run */
    c.optimizer = NIAH_OPT_ADAMW;
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, r3, 2, &n, NULL, NULL, err, sizeof err),
                 NIAH_OK);
    CHECK(r3[1].train_ce != r1[1].train_ce && strstr(r3[1].model, "opt=adamw"));
    /* SIGReg strong: another objective, another run */
    c.optimizer = NIAH_OPT_MUON;
    c.sigreg = SGR_STRONG;
    CHECK_INT_EQ(niah_run(&c, g_tok, g_tr.ids, g_tr.n, g_te.ids, g_te.n, r3, 2, &n, NULL, NULL, err, sizeof err),
                 NIAH_OK);
    CHECK(r3[1].train_ce != r1[1].train_ce && strstr(r3[1].model, "sigreg=strong"));
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    load_data();
    TEST_RUN(test_scorer);
    TEST_RUN(test_wilson);
    TEST_RUN(test_atma_preset_and_checks);
    TEST_RUN(test_atma_end_to_end);
    TEST_RUN(test_rope_config);
    TEST_RUN(test_rope_grad);
    TEST_RUN(test_rope_relative);
    TEST_RUN(test_conv_grad);
    TEST_RUN(test_conv_causal);
    TEST_RUN(test_target_weight_value);
    TEST_RUN(test_target_weight_grad);
    TEST_RUN(test_spec_keys_and_codes);
    TEST_RUN(test_record_tokenisation);
    TEST_RUN(test_vocab);
    TEST_RUN(test_rows);
    TEST_RUN(test_config_check_and_table);
    TEST_RUN(test_end_to_end);
    wt2_tokens_free(&g_tr);
    wt2_tokens_free(&g_te);
    bpe_free(g_tok);
    return TEST_END();
}
