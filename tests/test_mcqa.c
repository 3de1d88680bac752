/* test_mcqa.c - multiple-choice scoring and paired statistics (examples/common/mcqa.c):
   scoring on a hand-computable bigram model (sum and mean rules, shared forwards,
   left truncation, the prompt hash), scoring a real micro model (RPA prior) against a direct
   computation, tokenisation rules, task and log parsing (malformed lines name the line),
   refusal of mismatched logs, and the statistics against reference values from SciPy 1.17.1
   and statsmodels 0.15.0. Issue 37: non-finite scores are an error (never "nan" in a log),
   logged sums must be log-probability sums and means sum / n, a gold answer that differs
   is said as such, a read error (a directory) is not an empty input. */
#define _POSIX_C_SOURCE 200809L
/* the examples' code (impl, stb_impl, bpe, layers, model, mcqa) is linked, built once
   per configuration (the Makefile's TEST_OBJS_test_mcqa) */
#include "../examples/common/mcqa.h"
#include "../examples/common/model.h"
#include "attnkit_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------ toy model */
/* A bigram "model" over V = 4 tokens: the logits at position t are log(w[ids[t]]), so
   p(next = j | current = i) = w[i][j] / sum_j w[i][j], written out by hand below. */
static const double W[4][4] = {
    {1, 1, 1, 1}, /* after 0: 1/4 each */
    {1, 2, 3, 2}, /* after 1: 1/8, 2/8, 3/8, 2/8 */
    {4, 2, 1, 1}, /* after 2: 4/8, 2/8, 1/8, 1/8 */
    {1, 1, 1, 5}, /* after 3: 1/8, 1/8, 1/8, 5/8 */
};

typedef struct {
    float logits[64 * 4];
    int calls, last_B, last_T, first_id, max_T_seen;
} toy;

static int toy_forward(void *user, const int *ids, int B, int T, int first, const float **logits, int *V,
                       char *err, size_t errlen)
{
    toy *m = (toy *)user;
    int t, j;
    if (B != 1 || T < 1 || T > 64 || first < 0 || first >= T) {
        snprintf(err, errlen, "toy: B %d T %d", B, T);
        return -1;
    }
    for (t = 0; t < T; t++)
        for (j = 0; j < 4; j++) m->logits[t * 4 + j] = (float)log(W[ids[t]][j]);
    m->calls++;
    m->last_B = B;
    m->last_T = T;
    m->first_id = ids[0];
    if (T > m->max_T_seen) m->max_T_seen = T;
    *logits = m->logits;
    *V = 4;
    return 0;
}

static void make_tokens(mcqa_tokens *tk, const int *prompt, int np, const int *const *ch, const int *nc, int C)
{
    int i;
    memset(tk, 0, sizeof *tk);
    tk->n_prompt = np;
    tk->prompt = (int *)malloc((size_t)np * sizeof(int));
    memcpy(tk->prompt, prompt, (size_t)np * sizeof(int));
    tk->n_choices = C;
    tk->n_choice = (int *)malloc((size_t)C * sizeof(int));
    tk->choice = (int **)malloc((size_t)C * sizeof(int *));
    for (i = 0; i < C; i++) {
        tk->n_choice[i] = nc[i];
        tk->choice[i] = (int *)malloc((size_t)nc[i] * sizeof(int));
        memcpy(tk->choice[i], ch[i], (size_t)nc[i] * sizeof(int));
    }
}

static void test_score_hand(void)
{
    /* prompt [0, 1]; choices [2], [3, 3], [0, 2], [3, 1] */
    static const int prompt[2] = {0, 1}, c0[1] = {2}, c1[2] = {3, 3}, c2[2] = {0, 2}, c3[2] = {3, 1};
    const int *ch[4] = {c0, c1, c2, c3};
    const int nc[4] = {1, 2, 2, 2};
    mcqa_tokens tk;
    mcqa_result r;
    toy m;
    char err[256];
    /* by hand: c0 log(3/8); c1 log(2/8) + log(5/8); c2 log(1/8) + log(1/4); c3 log(2/8) + log(1/8) */
    const double s0 = log(3.0 / 8), s1 = log(2.0 / 8) + log(5.0 / 8), s2 = log(1.0 / 8) + log(1.0 / 4),
                 s3 = log(2.0 / 8) + log(1.0 / 8);
    make_tokens(&tk, prompt, 2, ch, nc, 4);
    memset(&m, 0, sizeof m);
    CHECK_INT_EQ(mcqa_score(toy_forward, &m, 16, &tk, &r, err, sizeof err), MCQA_OK);
    CHECK_NEAR(r.sum[0], s0, 1e-6);
    CHECK_NEAR(r.sum[1], s1, 1e-6);
    CHECK_NEAR(r.sum[2], s2, 1e-6);
    CHECK_NEAR(r.sum[3], s3, 1e-6);
    CHECK_NEAR(r.mean[0], s0, 1e-6);
    CHECK_NEAR(r.mean[1], s1 / 2, 1e-6);
    CHECK_NEAR(r.mean[2], s2 / 2, 1e-6);
    CHECK_INT_EQ(r.n[1], 2);
    /* sum: c0 (-0.98) beats c1 (-1.86); mean: c1 (-0.93) beats c0 (-0.98) */
    CHECK_INT_EQ(r.pred_sum, 0);
    CHECK_INT_EQ(r.pred_mean, 1);
    CHECK_INT_EQ(r.truncated, 0);
    CHECK_INT_EQ(r.n_prompt, 2);
    CHECK_INT_EQ(r.n_prompt_full, 2);
    /* c1 and c3 have the same input (prompt + [3]): 3 forwards for 4 choices */
    CHECK_INT_EQ(r.forwards, 3);
    CHECK_INT_EQ(m.calls, 3);
    CHECK_INT_EQ(m.max_T_seen, 3);
    CHECK(r.hash == mcqa_hash_tokens(prompt, 2, ch, nc, 4));

    /* left truncation: max_T 2, longest choice 2 -> keep 2 + 1 - 2 = 1 prompt token ([1]);
       the bigram scores do not change, the hash does */
    {
        mcqa_result t;
        uint64_t h_full = r.hash;
        memset(&m, 0, sizeof m);
        CHECK_INT_EQ(mcqa_score(toy_forward, &m, 2, &tk, &t, err, sizeof err), MCQA_OK);
        CHECK_INT_EQ(t.truncated, 1);
        CHECK_INT_EQ(t.n_prompt, 1);
        CHECK_INT_EQ(t.n_prompt_full, 2);
        CHECK_INT_EQ(m.max_T_seen, 2);
        CHECK_INT_EQ(m.first_id, 1);
        CHECK_NEAR(t.sum[1], s1, 1e-6);
        CHECK_NEAR(t.sum[2], s2, 1e-6);
        CHECK(t.hash != h_full);
        CHECK(t.hash == mcqa_hash_tokens(prompt + 1, 1, ch, nc, 4));
        /* a choice longer than the context: refused with a message */
        err[0] = 0;
        CHECK_INT_EQ(mcqa_score(toy_forward, &m, 1, &tk, &t, err, sizeof err), MCQA_ERANGE);
        CHECK(strstr(err, "more than the model's context") != NULL);
    }
    /* ties go to the lowest index */
    {
        static const int p1[1] = {0}, a[1] = {3}, b[1] = {1};
        const int *cc[2] = {a, b};
        const int n1[2] = {1, 1};
        mcqa_tokens t2;
        mcqa_result q;
        make_tokens(&t2, p1, 1, cc, n1, 2);
        CHECK_INT_EQ(mcqa_score(toy_forward, &m, 8, &t2, &q, err, sizeof err), MCQA_OK);
        CHECK_NEAR(q.sum[0], q.sum[1], 0.0);
        CHECK_INT_EQ(q.pred_sum, 0);
        CHECK_INT_EQ(q.forwards, 1);
        mcqa_tokens_free(&t2);
    }
    CHECK_INT_EQ(mcqa_score(NULL, &m, 8, &tk, &r, err, sizeof err), MCQA_EINVAL);
    CHECK_INT_EQ(mcqa_score(toy_forward, &m, 0, &tk, &r, err, sizeof err), MCQA_EINVAL);
    mcqa_tokens_free(&tk);
}

/* ------------------------------------------------------------------ real micro model */
typedef struct {
    mdl_model *m;
    mdl_opts o;
    int partial; /* 1: the head on the rows mcqa_score reads only (logits_from) */
} mctx;

static int mdl_fwd(void *user, const int *ids, int B, int T, int first, const float **logits, int *V, char *err,
                   size_t errlen)
{
    mctx *c = (mctx *)user;
    int rc;
    c->o.logits_from = c->partial ? first : 0;
    rc = mdl_forward(c->m, ids, NULL, B, T, &c->o, NULL);
    if (rc) {
        snprintf(err, errlen, "%s", mdl_last_error(c->m));
        return rc;
    }
    *logits = mdl_logits(c->m);
    *V = mdl_get_config(c->m)->vocab;
    return 0;
}

static void test_score_model(void)
{
    mdl_config c = mdl_config_default();
    mctx x;
    char err[256];
    static const int prompt[3] = {5, 9, 2}, a[3] = {7, 1, 4}, b[2] = {3, 3}, z[3] = {7, 1, 8};
    const int *ch[2] = {a, b}, *ch2[2] = {a, z};
    const int nc[2] = {3, 2}, nc2[2] = {3, 3};
    mcqa_tokens tk, tk2;
    mcqa_result r, r2;
    int seq[5], k;
    double direct = 0.0;
    c.vocab = 11;
    c.d_model = 16;
    c.n_layers = 2;
    c.n_heads = 2;
    c.max_T = 8;
    c.d_ff_mult = 2;
    c.init_std = 0.3f;
    c.prior = MDL_PRIOR_RPA;
    c.R = 3;
    c.rpa.K = 3;
    c.res_gate = 1;
    CHECK_INT_EQ(mdl_create(&x.m, &c, 3, err, sizeof err), MDL_OK);
    if (!x.m) return;
    x.o = mdl_opts_default();
    x.o.train = 0;
    make_tokens(&tk, prompt, 3, ch, nc, 2);
    x.partial = 0;
    CHECK_INT_EQ(mcqa_score(mdl_fwd, &x, 8, &tk, &r, err, sizeof err), MCQA_OK);
    /* the head on the read rows only (what mcqa does) scores every choice to the bit */
    x.partial = 1;
    CHECK_INT_EQ(mcqa_score(mdl_fwd, &x, 8, &tk, &r2, err, sizeof err), MCQA_OK);
    CHECK(r2.sum[0] == r.sum[0] && r2.sum[1] == r.sum[1] && r2.hash == r.hash);
    x.partial = 0;
    x.o.logits_from = 0;
    /* direct: the sequence prompt + a[0..1] in one forward, log-softmax by hand */
    memcpy(seq, prompt, sizeof prompt);
    seq[3] = a[0];
    seq[4] = a[1];
    CHECK_INT_EQ(mdl_forward(x.m, seq, NULL, 1, 5, &x.o, NULL), MDL_OK);
    for (k = 0; k < 3; k++) {
        const float *row = mdl_logits(x.m) + (size_t)(2 + k) * 11;
        double mx = row[0], s = 0.0;
        int v;
        for (v = 1; v < 11; v++) mx = row[v] > mx ? row[v] : mx;
        for (v = 0; v < 11; v++) s += exp((double)row[v] - mx);
        direct += (double)row[a[k]] - mx - log(s);
    }
    CHECK_CLOSE(r.sum[0], direct, 1e-9, 1e-9);
    CHECK_CLOSE(r.mean[0], direct / 3, 1e-9, 1e-9);
    CHECK(r.sum[0] < 0 && r.sum[1] < 0);
    /* a choice's score does not depend on the other choices of the item */
    make_tokens(&tk2, prompt, 3, ch2, nc2, 2);
    CHECK_INT_EQ(mcqa_score(mdl_fwd, &x, 8, &tk2, &r2, err, sizeof err), MCQA_OK);
    CHECK_NEAR(r2.sum[0], r.sum[0], 0.0);
    /* truncated to the model's context: 8 + 1 - 3 = 6 >= 3, none; at max_T 4: 2 kept */
    CHECK_INT_EQ(r.truncated, 0);
    CHECK_INT_EQ(mcqa_score(mdl_fwd, &x, 4, &tk, &r2, err, sizeof err), MCQA_OK);
    CHECK_INT_EQ(r2.truncated, 1);
    CHECK_INT_EQ(r2.n_prompt, 2);
    mcqa_tokens_free(&tk);
    mcqa_tokens_free(&tk2);
    mdl_destroy(x.m);
}

/* ------------------------------------------------------------------ tokenisation */
static void test_tokenize(void)
{
    bpe_tokenizer *tok = NULL;
    char err[512];
    mcqa_item it;
    mcqa_tokens tk;
    char ctx0[] = "Hello", ctx1[] = "Hello ", empty[] = "", c_plain[] = "world", c_space[] = " world";
    char *chs[2];
    if (bpe_load_dir(&tok, NULL, err, sizeof err) != BPE_OK) TEST_SKIP("GPT-2 tokenizer files not found");
    memset(&it, 0, sizeof it);
    it.n_choices = 2;
    it.choices = chs;
    /* leading space added when missing: "world" and " world" tokenise alike (995) */
    it.context = ctx0;
    chs[0] = c_plain;
    chs[1] = c_space;
    CHECK_INT_EQ(mcqa_tokenize(tok, &it, &tk, err, sizeof err), MCQA_OK);
    CHECK_INT_EQ(tk.n_prompt, 1);
    CHECK_INT_EQ(tk.prompt[0], 15496);
    CHECK_INT_EQ(tk.n_choice[0], 1);
    CHECK_INT_EQ(tk.choice[0][0], 995);
    CHECK_INT_EQ(tk.n_choice[1], 1);
    CHECK_INT_EQ(tk.choice[1][0], 995);
    mcqa_tokens_free(&tk);
    /* a trailing space of the context moves to the choice */
    it.context = ctx1;
    CHECK_INT_EQ(mcqa_tokenize(tok, &it, &tk, err, sizeof err), MCQA_OK);
    CHECK_INT_EQ(tk.n_prompt, 1);
    CHECK_INT_EQ(tk.prompt[0], 15496);
    CHECK_INT_EQ(tk.choice[0][0], 995);
    mcqa_tokens_free(&tk);
    /* empty context: <|endoftext|> */
    it.context = empty;
    CHECK_INT_EQ(mcqa_tokenize(tok, &it, &tk, err, sizeof err), MCQA_OK);
    CHECK_INT_EQ(tk.n_prompt, 1);
    CHECK_INT_EQ(tk.prompt[0], 50256);
    mcqa_tokens_free(&tk);
    bpe_free(tok);
}

/* ------------------------------------------------------------------ parsing */
static void test_json(void)
{
    mcqa_json *j = NULL;
    char err[256];
    const char *s = "{\"a\":[1,-2.5e1,true,null],\"b\":\"x\\u00e9\\ud83d\\ude00\\n\",\"c\":{}}";
    CHECK_INT_EQ(mcqa_json_parse(s, strlen(s), &j, err, sizeof err), MCQA_OK);
    if (j) {
        const mcqa_json *a = mcqa_json_get(j, "a"), *b = mcqa_json_get(j, "b");
        CHECK(a && a->type == MCQA_JARR && a->n == 4);
        if (a && a->n == 4) {
            CHECK_NEAR(a->items[1]->num, -25.0, 0.0);
            CHECK(a->items[0]->is_int && !a->items[1]->is_int);
            CHECK(a->items[2]->type == MCQA_JBOOL && a->items[2]->b);
            CHECK(a->items[3]->type == MCQA_JNULL);
        }
        CHECK(b && b->len == 8 && !memcmp(b->str, "x\xc3\xa9\xf0\x9f\x98\x80\n", 8));
        CHECK(mcqa_json_get(j, "zz") == NULL);
    }
    mcqa_json_free(j);
    {
        static const char *bad[] = {"{\"a\":1,}", "{\"a\":1 \"b\":2}", "[1,2", "{\"a\":1}x", "{\"a\":1,\"a\":2}",
                                    "\"\\ud800\"", "01", "\"\xff\"", "{a:1}", "", "tru", "1.", "\"a\tb\""};
        size_t i;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            j = NULL;
            err[0] = 0;
            CHECK_INT_EQ(mcqa_json_parse(bad[i], strlen(bad[i]), &j, err, sizeof err), MCQA_EFORMAT);
            CHECK(j == NULL && strstr(err, "byte ") == err);
        }
    }
}

static void test_items(void)
{
    mcqa_item it;
    char err[512];
    const char *good = "{\"task\":\"sciq\",\"id\":17,\"context\":\"Q?\",\"choices\":[\" a\",\"b\"],\"gold\":1,\"extra\":[1]}";
    const char *alias = "{\"query\":\"Q\",\"endings\":[\"x\",\"y\",\"z\"],\"label\":\"2\"}";
    CHECK_INT_EQ(mcqa_item_parse(good, strlen(good), 3, "t.jsonl", "dflt", &it, err, sizeof err), MCQA_OK);
    CHECK(!strcmp(it.task, "sciq") && !strcmp(it.id, "17") && !strcmp(it.context, "Q?"));
    CHECK_INT_EQ(it.n_choices, 2);
    CHECK_INT_EQ(it.gold, 1);
    CHECK(!strcmp(it.choices[0], " a"));
    mcqa_item_free(&it);
    CHECK_INT_EQ(mcqa_item_parse(alias, strlen(alias), 9, "t.jsonl", "dflt", &it, err, sizeof err), MCQA_OK);
    CHECK(!strcmp(it.task, "dflt") && !strcmp(it.id, "9"));
    CHECK_INT_EQ(it.gold, 2);
    mcqa_item_free(&it);
    CHECK_INT_EQ(mcqa_item_parse("   ", 3, 4, "t.jsonl", NULL, &it, err, sizeof err), MCQA_ERANGE);
    {
        static const char *bad[] = {
            "{\"context\":\"c\",\"choices\":[\"a\",\"b\"],\"gold\":2}",      /* gold out of range */
            "{\"context\":\"c\",\"choices\":[\"a\"],\"gold\":0}",            /* one choice */
            "{\"context\":\"c\",\"choices\":[\"a\",\"b\"]}",                 /* no gold */
            "{\"choices\":[\"a\",\"b\"],\"gold\":0}",                        /* no context */
            "{\"context\":\"c\",\"choices\":[\"a\",3],\"gold\":0}",          /* non-string choice */
            "{\"context\":\"c\",\"choices\":[\"a\",\"b\"],\"gold\":0.5}",    /* fractional gold */
            "{\"context\":\"c\",\"choices\":[\"a\",\"b\"],\"gold\":0,",      /* truncated JSON */
            "[1,2]",
        };
        size_t i;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            err[0] = 0;
            CHECK_INT_EQ(mcqa_item_parse(bad[i], strlen(bad[i]), 41, "tasks.jsonl", NULL, &it, err, sizeof err), MCQA_EFORMAT);
            CHECK(strstr(err, "tasks.jsonl:41:") == err);
        }
    }
}

static void test_log_roundtrip(void)
{
    mcqa_item it;
    mcqa_result r;
    mcqa_record rec;
    char err[512], buf[4096], bad[4096];
    FILE *f = tmpfile();
    size_t n;
    char *p;
    char ctx[] = "c \"q\"", a[] = " a", b[] = " b", c[] = " c", task[] = "t1", id[] = "x\\1";
    char *chs[3];
    chs[0] = a;
    chs[1] = b;
    chs[2] = c;
    memset(&it, 0, sizeof it);
    it.task = task;
    it.id = id;
    it.context = ctx;
    it.n_choices = 3;
    it.choices = chs;
    it.gold = 2;
    memset(&r, 0, sizeof r);
    r.n_choices = 3;
    r.sum[0] = -3.1;
    r.sum[1] = -1.0 / 3.0;
    r.sum[2] = -0.7;
    r.n[0] = 1;
    r.n[1] = 1;
    r.n[2] = 3;
    r.mean[0] = -3.1;
    r.mean[1] = -1.0 / 3.0;
    r.mean[2] = -0.7 / 3.0;
    r.pred_sum = 1;
    r.pred_mean = 2;
    r.n_prompt = 5;
    r.n_prompt_full = 9;
    r.truncated = 1;
    r.hash = 0x0123456789abcdefull;
    if (!f) TEST_SKIP("no tmpfile");
    CHECK_INT_EQ(mcqa_log_write(f, &it, &r), MCQA_OK);
    rewind(f);
    n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    CHECK(n > 0 && buf[n - 1] == '\n');
    CHECK_INT_EQ(mcqa_log_parse(buf, n - 1, 1, "a.jsonl", &rec, err, sizeof err), MCQA_OK);
    CHECK(!strcmp(rec.task, "t1") && !strcmp(rec.id, "x\\1"));
    CHECK(rec.hash == 0x0123456789abcdefull);
    CHECK_INT_EQ(rec.pred_sum, 1);
    CHECK_INT_EQ(rec.pred_mean, 2);
    CHECK_INT_EQ(rec.correct_sum, 0);
    CHECK_INT_EQ(rec.correct_mean, 1);
    CHECK_INT_EQ(rec.truncated, 1);
    CHECK_INT_EQ(rec.n_prompt, 5);
    mcqa_record_free(&rec);
    /* a logged prediction that does not follow from the scores is refused, naming the line */
    memcpy(bad, buf, n + 1);
    p = strstr(bad, "\"pred_sum\":1");
    CHECK(p != NULL);
    if (p) {
        p[11] = '0';
        err[0] = 0;
        CHECK_INT_EQ(mcqa_log_parse(bad, n - 1, 7, "a.jsonl", &rec, err, sizeof err), MCQA_EFORMAT);
        CHECK(strstr(err, "a.jsonl:7:") == err && strstr(err, "do not follow") != NULL);
    }
    /* malformed JSON names the line */
    err[0] = 0;
    CHECK_INT_EQ(mcqa_log_parse(buf, n / 2, 12, "a.jsonl", &rec, err, sizeof err), MCQA_EFORMAT);
    CHECK(strstr(err, "a.jsonl:12:") == err);
    memcpy(bad, buf, n + 1);
    p = strstr(bad, "\"prompt_hash\":\"0123");
    if (p) {
        p[15] = 'Z';
        err[0] = 0;
        CHECK_INT_EQ(mcqa_log_parse(bad, n - 1, 3, "a.jsonl", &rec, err, sizeof err), MCQA_EFORMAT);
        CHECK(strstr(err, "prompt_hash") != NULL);
    }
}

static mcqa_record rec(const char *task, const char *id, uint64_t hash, long line)
{
    mcqa_record r;
    memset(&r, 0, sizeof r);
    r.task = (char *)task;
    r.id = (char *)id;
    r.hash = hash;
    r.n_choices = 4;
    r.line = line;
    return r;
}

static void test_pair(void)
{
    mcqa_record a[3], b[3];
    long pair[3];
    char err[512];
    a[0] = rec("t", "1", 11, 1);
    a[1] = rec("t", "2", 22, 2);
    a[2] = rec("u", "1", 33, 3);
    b[0] = rec("u", "1", 33, 1);
    b[1] = rec("t", "1", 11, 2);
    b[2] = rec("t", "2", 22, 3);
    CHECK_INT_EQ(mcqa_pair(a, 3, b, 3, pair, err, sizeof err), MCQA_OK);
    CHECK_INT_EQ(pair[0], 1);
    CHECK_INT_EQ(pair[1], 2);
    CHECK_INT_EQ(pair[2], 0);
    /* a different prompt hash is refused with a clear message */
    b[2].hash = 23;
    err[0] = 0;
    CHECK_INT_EQ(mcqa_pair(a, 3, b, 3, pair, err, sizeof err), MCQA_EMISMATCH);
    CHECK(strstr(err, "prompt hash differs for item t/2") != NULL && strstr(err, "refusing to compare") != NULL);
    b[2].hash = 22;
    /* an item missing from one log */
    CHECK_INT_EQ(mcqa_pair(a, 3, b, 2, pair, err, sizeof err), MCQA_EMISMATCH);
    CHECK(strstr(err, "t/2") != NULL && strstr(err, "not in log B") != NULL);
    CHECK_INT_EQ(mcqa_pair(a, 2, b, 3, pair, err, sizeof err), MCQA_EMISMATCH);
    CHECK(strstr(err, "u/1") != NULL && strstr(err, "not in log A") != NULL);
    /* a duplicated item */
    b[0] = rec("t", "2", 22, 1);
    CHECK_INT_EQ(mcqa_pair(a, 3, b, 3, pair, err, sizeof err), MCQA_EMISMATCH);
    CHECK(strstr(err, "twice") != NULL);
}

/* ------------------------------------------------------------------ statistics */
/* Reference values: statsmodels 0.15.0
     mcnemar([[0, n01], [n10, 0]], exact=False, correction=True).statistic / .pvalue
     mcnemar([[0, n01], [n10, 0]], exact=True).pvalue  (== scipy.stats.binomtest(min, n, 0.5))
   and scipy 1.17.1 scipy.stats.chi2.sf(x, 1), computed on 2026-11-24. */
static void test_mcnemar(void)
{
    static const struct { long n01, n10; double chi2, p, p_exact; } ref[] = {
        {25, 10, 5.6, 0.01796047752607879, 0.016673847800120715},
        {10, 25, 5.6, 0.01796047752607879, 0.016673847800120715},
        {3, 0, 1.3333333333333333, 0.24821307898992026, 0.25},
        {7, 7, 0.07142857142857142, 0.7892680261342813, 1.0},
        {120, 95, 2.6790697674418604, 0.10167510531668583, 0.10145232764870649},
        {40, 1, 35.21951219512195, 2.945574533099054e-09, 3.8198777474462986e-11},
        {1, 0, 0.0, 1.0, 1.0},
        {300, 200, 19.602, 9.53693139989851e-06, 8.940066542253288e-06},
    };
    size_t i;
    for (i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        double c = -1, p = -1;
        CHECK_INT_EQ(mcqa_mcnemar(ref[i].n01, ref[i].n10, &c, &p), MCQA_OK);
        CHECK_CLOSE(c, ref[i].chi2, 1e-12, 1e-15);
        CHECK_CLOSE(p, ref[i].p, 1e-9, 1e-300);
        CHECK_CLOSE(mcqa_binom_exact_p(ref[i].n01, ref[i].n10), ref[i].p_exact, 1e-9, 1e-300);
    }
    CHECK_CLOSE(mcqa_chi2_1_sf(3.84), 0.05004352124870519, 1e-12, 0);
    CHECK_CLOSE(mcqa_chi2_1_sf(0.5), 0.47950012218695337, 1e-12, 0);
    CHECK_CLOSE(mcqa_chi2_1_sf(30.0), 4.3204630578274955e-08, 1e-9, 0);
    {
        double c, p;
        CHECK_INT_EQ(mcqa_mcnemar(0, 0, &c, &p), MCQA_OK);
        CHECK_NEAR(p, 1.0, 0.0);
        CHECK_INT_EQ(mcqa_mcnemar(-1, 0, &c, &p), MCQA_EINVAL);
    }
    /* a large table stays finite and symmetric */
    CHECK_CLOSE(mcqa_binom_exact_p(20000, 19500), mcqa_binom_exact_p(19500, 20000), 1e-15, 0);
    CHECK(mcqa_binom_exact_p(20000, 19500) > 0 && mcqa_binom_exact_p(20000, 19500) < 0.1);
    /* odds ratio n01 / n10 */
    CHECK_NEAR(mcqa_odds_ratio(25, 10), 2.5, 0.0);
    CHECK(isinf(mcqa_odds_ratio(3, 0)));
    CHECK(isnan(mcqa_odds_ratio(0, 0)));
    CHECK_NEAR(mcqa_odds_ratio(0, 4), 0.0, 0.0);
}

/* Reference: statsmodels 0.15.0 multipletests(p, method="holm")[1]. */
static void test_holm(void)
{
    double p1[4] = {0.01, 0.04, 0.03, 0.005}, r1[4] = {0.03, 0.06, 0.06, 0.02}, a1[4];
    double p2[5] = {0.2, 0.001, 0.5, 0.04, 0.04}, r2[5] = {0.4, 0.005, 0.5, 0.16, 0.16}, a2[5];
    double one = 0.3, bad[2] = {0.1, 1.5};
    CHECK_INT_EQ(mcqa_holm(p1, 4, a1), MCQA_OK);
    CHECK_ALL_CLOSE(a1, r1, 4, 1e-12, 1e-15);
    CHECK_INT_EQ(mcqa_holm(p2, 5, a2), MCQA_OK);
    CHECK_ALL_CLOSE(a2, r2, 5, 1e-12, 1e-15);
    CHECK_INT_EQ(mcqa_holm(&one, 1, &one), MCQA_OK); /* aliasing allowed; m = 1: unchanged */
    CHECK_NEAR(one, 0.3, 0.0);
    CHECK_INT_EQ(mcqa_holm(bad, 2, a1), MCQA_EINVAL);
    CHECK_INT_EQ(mcqa_holm(p1, 0, a1), MCQA_EINVAL);
}

static void test_bootstrap(void)
{
    signed char d[400];
    double lo1, hi1, lo2, hi2, lo3, hi3;
    int i;
    for (i = 0; i < 400; i++) d[i] = (signed char)(i % 10 == 0 ? 1 : i % 10 == 1 ? -1 : i % 10 < 4 ? 1 : 0);
    /* mean = (40 + 80 - 40) / 400 = 0.2 */
    CHECK_INT_EQ(mcqa_bootstrap_delta(d, 400, 2000, 7, 0.05, &lo1, &hi1), MCQA_OK);
    CHECK_INT_EQ(mcqa_bootstrap_delta(d, 400, 2000, 7, 0.05, &lo2, &hi2), MCQA_OK);
    CHECK_INT_EQ(mcqa_bootstrap_delta(d, 400, 2000, 8, 0.05, &lo3, &hi3), MCQA_OK);
    CHECK(lo1 == lo2 && hi1 == hi2);        /* reproducible for a seed */
    CHECK(lo1 != lo3 || hi1 != hi3);        /* another seed, another draw */
    CHECK(lo1 < 0.2 && hi1 > 0.2);
    /* the normal-theory half width is 1.96 sqrt(var / n), var = 0.4 - 0.04 = 0.36: 0.0588 */
    CHECK_NEAR(hi1 - lo1, 2 * 0.0588, 0.015);
    for (i = 0; i < 400; i++) d[i] = 1;
    CHECK_INT_EQ(mcqa_bootstrap_delta(d, 400, 200, 1, 0.05, &lo1, &hi1), MCQA_OK);
    CHECK(lo1 == 1.0 && hi1 == 1.0);
    CHECK_INT_EQ(mcqa_bootstrap_delta(d, 0, 200, 1, 0.05, &lo1, &hi1), MCQA_EINVAL);
    CHECK_INT_EQ(mcqa_bootstrap_delta(d, 10, 200, 1, 1.5, &lo1, &hi1), MCQA_EINVAL);
}

/* Issue 45: pooling over training seeds. The cluster bootstrap with one stratum is the plain
   bootstrap draw for draw; strata that agree item for item change nothing; the t test's
   p-values against closed forms (df 1, 2, 3) and the t quantiles (df 4, 10, 30). */
static void test_pooled_stats(void)
{
    signed char d[400];
    int t1[400], t2[400], t3[400];
    double lo1, hi1, lo2, hi2, lo3, hi3, m, sd, t, p, x;
    double del[5] = {0.012, 0.030, -0.004, 0.021, 0.015}, same[3] = {0.01, 0.01, 0.01}, zero[2] = {0, 0};
    int i;
    for (i = 0; i < 400; i++) {
        d[i] = (signed char)(i % 10 == 0 ? 1 : i % 10 == 1 ? -1 : i % 10 < 4 ? 1 : 0);
        t1[i] = d[i];
        t2[i] = 2 * d[i];                       /* two strata with the same outcomes */
        t3[i] = d[i] + (i % 7 == 0 ? 1 : 0);    /* a second stratum that differs */
        if (t3[i] > 2) t3[i] = 2;
    }
    CHECK_INT_EQ(mcqa_bootstrap_delta(d, 400, 2000, 7, 0.05, &lo1, &hi1), MCQA_OK);
    CHECK_INT_EQ(mcqa_bootstrap_cluster(t1, 400, 1, 2000, 7, 0.05, &lo2, &hi2), MCQA_OK);
    CHECK(lo1 == lo2 && hi1 == hi2);
    CHECK_INT_EQ(mcqa_bootstrap_cluster(t2, 400, 2, 2000, 7, 0.05, &lo3, &hi3), MCQA_OK);
    CHECK(lo1 == lo3 && hi1 == hi3);
    CHECK_INT_EQ(mcqa_bootstrap_cluster(t3, 400, 2, 2000, 7, 0.05, &lo3, &hi3), MCQA_OK);
    CHECK(lo3 != lo1 || hi3 != hi1);
    x = 0;
    for (i = 0; i < 400; i++) x += t3[i];
    x /= 800.0;
    CHECK(lo3 < x && hi3 > x);
    CHECK_INT_EQ(mcqa_bootstrap_cluster(t3, 400, 1, 200, 7, 0.05, &lo3, &hi3), MCQA_EINVAL); /* |t| > S */
    CHECK_INT_EQ(mcqa_bootstrap_cluster(t1, 0, 1, 200, 7, 0.05, &lo3, &hi3), MCQA_EINVAL);
    CHECK_INT_EQ(mcqa_bootstrap_cluster(t1, 400, 0, 200, 7, 0.05, &lo3, &hi3), MCQA_EINVAL);
    CHECK_INT_EQ(mcqa_bootstrap_cluster(NULL, 400, 1, 200, 7, 0.05, &lo3, &hi3), MCQA_EINVAL);
    /* closed forms: df 1 (Cauchy) 1 - 2 atan|t| / pi; df 2: 1 - |t| / sqrt(2 + t^2);
       df 3: 1 - 2 (atan(t / sqrt 3) + sqrt(3) t / (t^2 + 3)) / pi */
    for (x = 0.0; x <= 40.0; x += 0.37) {
        double pi = 3.14159265358979323846;
        CHECK_NEAR(mcqa_t_p2(x, 1), 1.0 - 2.0 * atan(x) / pi, 1e-12);
        CHECK_NEAR(mcqa_t_p2(-x, 2), 1.0 - x / sqrt(2.0 + x * x), 1e-12);
        CHECK_NEAR(mcqa_t_p2(x, 3), 1.0 - 2.0 * (atan(x / sqrt(3.0)) + sqrt(3.0) * x / (x * x + 3.0)) / pi, 1e-12);
    }
    /* t_{0.975} quantiles: two-sided p 0.05 */
    CHECK_NEAR(mcqa_t_p2(2.7764451051977987, 4), 0.05, 1e-12);
    CHECK_NEAR(mcqa_t_p2(2.228138851986274, 10), 0.05, 1e-12);
    CHECK_NEAR(mcqa_t_p2(2.0422724563012373, 30), 0.05, 1e-12);
    CHECK_NEAR(mcqa_t_p2(0.0, 5), 1.0, 1e-15);
    CHECK(mcqa_t_p2(INFINITY, 4) == 0.0);
    CHECK(isnan(mcqa_t_p2(NAN, 4)) && isnan(mcqa_t_p2(1.0, 0)));
    /* the paired t test: mean 0.0148, sample sd 0.012497..., t 2.6482, df 4 */
    CHECK_INT_EQ(mcqa_paired_t(del, 5, &m, &sd, &t, &p), MCQA_OK);
    CHECK_NEAR(m, 0.0148, 1e-15);
    x = 0;
    for (i = 0; i < 5; i++) x += (del[i] - 0.0148) * (del[i] - 0.0148);
    CHECK_NEAR(sd, sqrt(x / 4.0), 1e-15);
    CHECK_NEAR(t, 0.0148 / (sd / sqrt(5.0)), 1e-12);
    CHECK_NEAR(p, mcqa_t_p2(t, 4), 0.0);
    CHECK(p > 0.05 && p < 0.1); /* t 2.648 < 2.776 */
    CHECK_INT_EQ(mcqa_paired_t(same, 3, &m, &sd, &t, &p), MCQA_OK);
    CHECK(sd == 0.0 && isinf(t) && t > 0 && p == 0.0);
    CHECK_INT_EQ(mcqa_paired_t(zero, 2, &m, &sd, &t, &p), MCQA_OK);
    CHECK(t == 0.0 && p == 1.0);
    CHECK_INT_EQ(mcqa_paired_t(del, 1, &m, &sd, &t, &p), MCQA_EINVAL);
    del[2] = NAN;
    CHECK_INT_EQ(mcqa_paired_t(del, 5, &m, &sd, &t, &p), MCQA_EINVAL);
}

static void test_families(void)
{
    mcqa_families f;
    char err[256];
    const char *txt = "# families\nF1: sciq arc_easy  qasc # science\n\n  F2:hellaswag\tboolq\n";
    CHECK_INT_EQ(mcqa_families_parse(txt, strlen(txt), &f, err, sizeof err), MCQA_OK);
    CHECK_INT_EQ(f.n, 2);
    if (f.n == 2) {
        CHECK_INT_EQ(f.n_tasks[0], 3);
        CHECK_INT_EQ(f.n_tasks[1], 2);
        CHECK(!strcmp(f.name[1], "F2") && !strcmp(f.tasks[1][1], "boolq"));
    }
    CHECK_INT_EQ(mcqa_family_of(&f, "qasc"), 0);
    CHECK_INT_EQ(mcqa_family_of(&f, "boolq"), 1);
    CHECK_INT_EQ(mcqa_family_of(&f, "piqa"), -1);
    mcqa_families_free(&f);
    {
        static const char *bad[] = {"F1: a b\nF2: b\n", "F1 a b\n", "F1:\n", "F1: a\nF1: b\n"};
        size_t i;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
            CHECK_INT_EQ(mcqa_families_parse(bad[i], strlen(bad[i]), &f, err, sizeof err), MCQA_EFORMAT);
    }
}


/* ------------------------------------------------------------------ issue 37 */
/* A model whose logits are NaN (non-finite weights): every score is an error naming the
   cause, never a "nan" in the log. */
static int nan_forward(void *user, const int *ids, int B, int T, int first, const float **logits, int *V, char *err,
                       size_t errlen)
{
    static float lg[64 * 4];
    int i;
    (void)user;
    (void)ids;
    (void)first;
    (void)err;
    (void)errlen;
    if (B != 1 || T < 1 || T > 64) return -1;
    for (i = 0; i < T * 4; i++) lg[i] = (i % 3) ? 0.5f : NAN;
    *logits = lg;
    *V = 4;
    return 0;
}

static void test_nonfinite_scores(void)
{
    static const int prompt[2] = {1, 2}, c0[1] = {0}, c1[2] = {3, 1};
    const int *ch[2];
    int nc[2] = {1, 2};
    mcqa_tokens tk;
    mcqa_result r;
    mcqa_item it;
    char err[512], a[] = " a", b[] = " b", task[] = "t", id[] = "1", ctx[] = "c", *chs[2];
    FILE *f;
    ch[0] = c0;
    ch[1] = c1;
    make_tokens(&tk, prompt, 2, ch, nc, 2);
    err[0] = 0;
    CHECK_INT_EQ(mcqa_score(nan_forward, NULL, 16, &tk, &r, err, sizeof err), MCQA_EMODEL);
    CHECK(strstr(err, "not finite") != NULL && strstr(err, "NaN") != NULL);
    mcqa_tokens_free(&tk);
    /* the writer refuses a non-finite score and writes nothing */
    chs[0] = a;
    chs[1] = b;
    memset(&it, 0, sizeof it);
    it.task = task;
    it.id = id;
    it.context = ctx;
    it.n_choices = 2;
    it.choices = chs;
    memset(&r, 0, sizeof r);
    r.n_choices = 2;
    r.n[0] = r.n[1] = 1;
    r.sum[0] = r.mean[0] = -1.0;
    r.sum[1] = r.mean[1] = NAN;
    f = tmpfile();
    if (!f) TEST_SKIP("no tmpfile");
    CHECK_INT_EQ(mcqa_log_write(f, &it, &r), MCQA_ERANGE);
    CHECK(ftell(f) == 0);
    r.sum[1] = r.mean[1] = -INFINITY;
    CHECK_INT_EQ(mcqa_log_write(f, &it, &r), MCQA_ERANGE);
    CHECK(ftell(f) == 0);
    fclose(f);
}

/* A log line with one choice's sum / mean replaced (two choices of n = 1 and n = 2). */
static int parse_scores(const char *s0, const char *m0, char *err, size_t errlen)
{
    char line[1024];
    mcqa_record rec;
    int rc;
    snprintf(line, sizeof line,
             "{\"task\":\"t\",\"id\":\"1\",\"prompt_hash\":\"0000000000000001\",\"n_prompt\":3,\"n_prompt_full\":3,"
             "\"truncated\":0,\"gold\":0,\"choices\":[{\"n\":1,\"sum\":%s,\"mean\":%s},{\"n\":2,\"sum\":-4,\"mean\":-2}],"
             "\"pred_sum\":0,\"pred_mean\":0,\"correct_sum\":1,\"correct_mean\":1}", s0, m0);
    err[0] = 0;
    rc = mcqa_log_parse(line, strlen(line), 5, "x.jsonl", &rec, err, errlen);
    if (rc == MCQA_OK) mcqa_record_free(&rec);
    return rc;
}

static void test_log_scores_checked(void)
{
    char err[512];
    CHECK_INT_EQ(parse_scores("-1", "-1", err, sizeof err), MCQA_OK);
    CHECK_INT_EQ(parse_scores("0", "0", err, sizeof err), MCQA_OK); /* log p = 0: p = 1, allowed */
    CHECK_INT_EQ(parse_scores("-1.0000000000000002", "-1", err, sizeof err), MCQA_OK); /* within 1e-9 */
    /* a positive log-probability sum */
    CHECK_INT_EQ(parse_scores("0.5", "0.5", err, sizeof err), MCQA_EFORMAT);
    CHECK(strstr(err, "x.jsonl:5:") == err && strstr(err, "positive") != NULL);
    /* a mean that is not sum / n */
    CHECK_INT_EQ(parse_scores("-1", "-0.9", err, sizeof err), MCQA_EFORMAT);
    CHECK(strstr(err, "x.jsonl:5:") == err && strstr(err, "not sum / n") != NULL);
    /* a number that overflows to infinity */
    CHECK_INT_EQ(parse_scores("-1e999", "-1e999", err, sizeof err), MCQA_EFORMAT);
    CHECK(strstr(err, "not a finite number") != NULL);
}

static void test_pair_says_what_differs(void)
{
    mcqa_record a[1], b[1];
    long pair[1];
    char err[512];
    a[0] = rec("t", "1", 11, 1);
    b[0] = rec("t", "1", 11, 4);
    b[0].gold = 2;
    err[0] = 0;
    CHECK_INT_EQ(mcqa_pair(a, 1, b, 1, pair, err, sizeof err), MCQA_EMISMATCH);
    CHECK(strstr(err, "gold answer of item t/1 differs") != NULL && strstr(err, "prompt hash differs") == NULL);
    b[0].gold = 0;
    b[0].n_choices = 3;
    CHECK_INT_EQ(mcqa_pair(a, 1, b, 1, pair, err, sizeof err), MCQA_EMISMATCH);
    CHECK(strstr(err, "has 4 choices in log A") != NULL);
}

/* A read error is not the end of the input: a directory opened as a file. */
static void test_read_errors(void)
{
    char dir[] = "/tmp/attnkit-mcqa-XXXXXX", err[512], *buf = NULL;
    size_t cap = 0;
    mcqa_record *recs = NULL;
    long n = 0;
    FILE *f;
    if (!mkdtemp(dir)) TEST_SKIP("no mkdtemp");
    f = fopen(dir, "rb");
    if (f) {
        CHECK_INT_EQ(mcqa_read_line(f, &buf, &cap), MCQA_EIO);
        fclose(f);
    }
    free(buf);
    err[0] = 0;
    CHECK(mcqa_log_read(dir, &recs, &n, err, sizeof err) < 0);
    CHECK(strstr(err, dir) != NULL && recs == NULL && n == 0);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_score_hand);
    TEST_RUN(test_score_model);
    TEST_RUN(test_tokenize);
    TEST_RUN(test_json);
    TEST_RUN(test_items);
    TEST_RUN(test_log_roundtrip);
    TEST_RUN(test_pair);
    TEST_RUN(test_mcnemar);
    TEST_RUN(test_holm);
    TEST_RUN(test_bootstrap);
    TEST_RUN(test_pooled_stats);
    TEST_RUN(test_families);
    TEST_RUN(test_nonfinite_scores);
    TEST_RUN(test_log_scores_checked);
    TEST_RUN(test_pair_says_what_differs);
    TEST_RUN(test_read_errors);
    return TEST_END();
}
