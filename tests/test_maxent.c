/* test_maxent.c - examples/common/maxent.c (wt2_train --maxent, issue 46 item 2): the
   catalogue, a deterministic selection with --maxent-cost flops, infeasible catalogues,
   (A)'s init scales and (C)'s checks at trn_create, a resume that keeps the selected shape,
   and the functions' refusals of bad input. Links the examples' objects (Makefile
   TEST_OBJS_test_maxent). */
#define _POSIX_C_SOURCE 200809L
#include "../examples/common/maxent.h"
#include "attnkit_test.h"

#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#define NTOK 6000
#define NTRAIN 5000
static uint16_t g_ids[NTOK];
static char g_dir[256];

static void make_stream(void)
{
    int i;
    tt_seed(5);
    for (i = 0; i < NTOK; i++) {
        int v = (i * 3 + (i / 5)) % 37;
        if (tt_uniform() < 0.15) v = (int)(tt_uniform() * 37.0);
        g_ids[i] = (uint16_t)v;
    }
}

static void base(trn_config *c)
{
    trn_preset("tiny-plain", c);
    c->model.vocab = 37;
    c->model.d_model = 32;
    c->model.n_layers = 2;
    c->model.n_heads = 2;
    c->model.d_ff_mult = 2;
    c->model.max_T = 16;
    c->context = 16;
    c->batch = 2;
    c->steps = 10;
    c->epoch_steps = 5;
    c->eval_every = 5;
    c->eval_max_chunks = 2;
    c->maxent = 1;
    c->maxent_cost = MX_COST_FLOPS;
    c->maxent_probe = 2;
    c->maxent_batch = 1;
    c->seed = 3;
}

static int find(const mx_result *r, int d, int h, int m, int pos)
{
    int i;
    for (i = 0; i < r->n; i++)
        if (r->cand[i].model.d_model == d && r->cand[i].model.n_heads == h && r->cand[i].model.d_ff_mult == m &&
            r->cand[i].model.pos == pos)
            return i;
    return -1;
}

static void test_catalogue(void)
{
    trn_config c;
    mx_cand cand[MX_MAX_CAND];
    int n = -1, i;
    char err[512];
    base(&c);
    CHECK_INT_EQ(mx_catalogue(&c, cand, &n, err, sizeof err), TRN_OK);
    /* base, heads {1,2,4} x {learned, rope, none} (base counted once), d 64 (head width
       16 + 16; 16 - 16 is 0: left out), ff {1, 4} */
    CHECK_INT_EQ(n, 12);
    CHECK_INT_EQ(cand[0].model.d_model, 32);
    CHECK_INT_EQ(cand[0].model.n_heads, 2);
    CHECK_INT_EQ(cand[0].model.pos, MDL_POS_LEARNED);
    for (i = 0; i < n; i++) CHECK(cand[i].valid);
    CHECK(!strcmp(cand[0].label, "d32 h2 ff2 learned"));
    CHECK_INT_EQ(mx_catalogue(NULL, cand, &n, err, sizeof err), TRN_EINVAL);
    c.model.n_heads = 3; /* 32 % 3 != 0 */
    CHECK_INT_EQ(mx_catalogue(&c, cand, &n, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "not valid") != NULL);
}

static void test_select_deterministic(void)
{
    trn_config c;
    mx_result *a = (mx_result *)malloc(sizeof *a), *b = (mx_result *)malloc(sizeof *b);
    char err[512], *js = (char *)malloc(65536), tiny[16];
    int i, rc, nd = 0;
    const char *p;
    CHECK(a && b && js);
    if (!a || !b || !js) { free(a); free(b); free(js); return; }
    base(&c);
    rc = mx_run(&c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, a, err, sizeof err);
    if (rc != TRN_OK) fprintf(stderr, "%s\n", err);
    CHECK_INT_EQ(rc, TRN_OK);
    CHECK_INT_EQ(mx_run(&c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, b, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(a->n, 12);
    CHECK(a->selected >= 0 && a->selected < a->n);
    CHECK_INT_EQ(a->selected, b->selected);
    for (i = 0; i < a->n && i < b->n; i++) {
        /* FLOPs and the probe's observables: the same run to run, bit for bit */
        CHECK(a->cand[i].arch.cost == b->cand[i].arch.cost);
        CHECK(a->cand[i].arch.utility == b->cand[i].arch.utility);
        CHECK(a->cand[i].score == b->cand[i].score);
        CHECK(a->cand[i].arch.utility > 0.0 && a->cand[i].arch.utility <= 1.0);
        CHECK(a->cand[i].flops > 0.0);
    }
    /* tile 16: the 4-head candidates (head width 8) are measured but infeasible */
    i = find(a, 32, 4, 2, MDL_POS_ROPE);
    CHECK(i >= 0);
    if (i >= 0) { CHECK(a->cand[i].valid); CHECK(!a->cand[i].feasible); CHECK(a->cand[i].weight == 0.0); }
    CHECK(a->cand[a->selected].feasible);
    /* a larger model costs more FLOPs */
    i = find(a, 64, 2, 2, MDL_POS_LEARNED);
    CHECK(i >= 0);
    if (i >= 0) CHECK(a->cand[i].flops > a->cand[0].flops);
    /* the table and the JSON record */
    CHECK_INT_EQ(mx_json(a, js, 65536), TRN_OK);
    CHECK(!strncmp(js, "{\"type\":\"maxent\",\"cost\":\"flops\"", 31));
    for (p = js; (p = strstr(p, "\"d_model\":")) != NULL; p++) nd++;
    CHECK_INT_EQ(nd, 12);
    CHECK(strstr(js, "\"selected\":1}") != NULL);
    CHECK_INT_EQ(mx_json(a, tiny, sizeof tiny), TRN_EINVAL);
    {
        FILE *f = tmpfile();
        CHECK(f != NULL);
        if (f) {
            char line[256];
            int lines = 0, star = 0;
            CHECK_INT_EQ(mx_print_table(f, a), TRN_OK);
            rewind(f);
            while (fgets(line, sizeof line, f)) {
                lines++;
                if (!strncmp(line, "maxent: * ", 10)) star++;
            }
            CHECK_INT_EQ(lines, 2 + 12);
            CHECK_INT_EQ(star, 1);
            fclose(f);
        }
    }
    /* mx_apply writes the selected shape */
    {
        trn_config d = c;
        CHECK_INT_EQ(mx_apply(&d, a), TRN_OK);
        CHECK_INT_EQ(d.model.n_heads, a->cand[a->selected].model.n_heads);
        CHECK_INT_EQ(d.model.pos, a->cand[a->selected].model.pos);
        CHECK_INT_EQ(mx_apply(NULL, a), TRN_EINVAL);
    }
    free(a);
    free(b);
    free(js);
}

static void test_infeasible(void)
{
    trn_config c;
    mx_result *r = (mx_result *)malloc(sizeof *r);
    char err[600];
    int rc;
    CHECK(r != NULL);
    if (!r) return;
    base(&c);
    c.maxent_budget = 1.0f; /* one FLOP: nothing fits */
    err[0] = 0;
    rc = mx_run(&c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, r, err, sizeof err);
    CHECK_INT_EQ(rc, TRN_EINVAL);
    CHECK(strstr(err, "feasible") != NULL && strstr(err, "--maxent-budget") != NULL);
    /* head widths off the tile everywhere: d 40, 2 heads (20), 1 (40), 4 (10), d 72 (36) */
    base(&c);
    c.model.d_model = 40;
    c.model.d_ff_mult = 3;
    err[0] = 0;
    rc = mx_run(&c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, r, err, sizeof err);
    CHECK_INT_EQ(rc, TRN_EINVAL);
    CHECK(strstr(err, "multiples of 16") != NULL);
    /* polar attention: refused before anything runs */
    base(&c);
    c.model.attn = MDL_ATTN_POLAR;
    CHECK_INT_EQ(mx_run(&c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, r, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "softmax") != NULL);
    CHECK_INT_EQ(mx_run(NULL, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, r, err, sizeof err), TRN_EINVAL);
    free(r);
}

/* (A) and (C) at trn_create */
static void test_init_a_c(void)
{
    trn_config c;
    trn *t = NULL;
    trn_maxent_report rep;
    char err[512];
    const mdl_tensor *te;
    const float *P;
    double s2 = 0.0;
    int i, C;
    base(&c);
    c.maxent_c = 1;
    c.maxent_cap = 0.0f; /* report only */
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(trn_maxent_report_get(t, &rep), TRN_OK);
    CHECK_INT_EQ(rep.a_applied, 2);
    CHECK_INT_EQ(rep.a_met, 2);
    CHECK(rep.a_T >= 0.9f && rep.a_T <= 1.1f);
    CHECK(rep.a_sigma_q > rep.a_sigma_before);
    CHECK_INT_EQ(rep.c_checked, 1);
    CHECK_INT_EQ(rep.c_mats, 8); /* per layer: qkv, proj, fc, fc2 */
    CHECK_INT_EQ(rep.c_over, 0);
    CHECK(rep.c_eps_rec > 0.0f && rep.c_var_min > 0.0f && rep.c_bias_model > rep.c_bias_rec);
    /* the W_q rows of layer 1 have the std (A) chose for layer 0 (same shapes) */
    te = mdl_find_tensor(trn_model(t), "blocks.1.attn.qkv.weight");
    CHECK(te != NULL);
    if (te) {
        C = c.model.d_model;
        P = mdl_params(trn_model(t)) + te->offset;
        for (i = 0; i < C * C; i++) s2 += (double)P[i] * P[i];
        CHECK_CLOSE(sqrt(s2 / (double)(C * C)), rep.a_sigma_q, 0.02, 0.0);
    }
    trn_destroy(t);
    t = NULL;
    /* a cap below every matrix's norm rescales them all */
    c.maxent_cap = 1e-3f;
    c.maxent = 0;
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    if (t) {
        CHECK_INT_EQ(trn_maxent_report_get(t, &rep), TRN_OK);
        CHECK_INT_EQ(rep.a_applied, 0);
        CHECK_INT_EQ(rep.c_over, 8);
        CHECK_INT_EQ(mx_check_c(trn_model(t), g_ids, NTRAIN, 16, 0.0f, &rep, err, sizeof err), TRN_OK);
        CHECK(rep.c_sigma_max <= 1.001e-3f);
        CHECK_INT_EQ(mx_check_c(trn_model(t), g_ids, NTRAIN, 16, NAN, &rep, err, sizeof err), TRN_EINVAL);
        CHECK_INT_EQ(mx_check_c(trn_model(t), NULL, NTRAIN, 16, 1.0f, &rep, err, sizeof err), TRN_EINVAL);
        CHECK_INT_EQ(mx_init_scales(NULL, 16, &rep, err, sizeof err), TRN_EINVAL);
        trn_destroy(t);
    }
    CHECK_INT_EQ(trn_maxent_report_get(NULL, &rep), TRN_EINVAL);
    /* flags: range checks */
    base(&c);
    c.maxent_probe = 0;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    base(&c);
    c.maxent_lambda = -1.0f;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
}

/* --maxent, checkpoint, resume: the recorded shape comes back; the preset's does not load */
static void test_resume_keeps_shape(void)
{
    trn_config c, r;
    mx_result *res = (mx_result *)malloc(sizeof *res);
    trn *a = NULL, *b = NULL, *x = NULL;
    char err[600], path[400];
    int found = -1, rc;
    CHECK(res != NULL);
    if (!res) return;
    base(&c);
    c.maxent_lambda = 0.0f; /* utility alone */
    rc = mx_run(&c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, res, err, sizeof err);
    CHECK_INT_EQ(rc, TRN_OK);
    if (rc != TRN_OK) { free(res); return; }
    /* force a shape unlike the base so the check means something */
    res->selected = find(res, 64, 2, 2, MDL_POS_LEARNED);
    CHECK(res->selected >= 0);
    if (res->selected < 0) { free(res); return; }
    CHECK_INT_EQ(mx_apply(&c, res), TRN_OK);
    snprintf(path, sizeof path, "%s/maxent.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&a, &c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    if (!a) { free(res); return; }
    CHECK_INT_EQ(trn_step(a, NULL), TRN_OK);
    CHECK_INT_EQ(trn_step(a, NULL), TRN_OK);
    rc = trn_save(a, path, err, sizeof err);
    if (rc != TRN_OK) fprintf(stderr, "%s\n", err);
    CHECK_INT_EQ(rc, TRN_OK);
    /* the run's flags again (the base shape, with or without --maxent): the shape comes from the file */
    base(&r);
    r.maxent = 0;
    CHECK_INT_EQ(mx_resume_shape(path, &r, &found, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(found, 1);
    CHECK_INT_EQ(r.model.d_model, 64);
    CHECK_INT_EQ(r.model.n_heads, 2);
    CHECK_INT_EQ(r.model.d_ff_mult, 2);
    CHECK_INT_EQ(r.model.pos, MDL_POS_LEARNED);
    CHECK_INT_EQ(r.maxent, 1);
    CHECK_INT_EQ(trn_create(&b, &r, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    if (b) {
        rc = trn_load(b, path, err, sizeof err);
        if (rc != TRN_OK) fprintf(stderr, "%s\n", err);
        CHECK_INT_EQ(rc, TRN_OK);
        CHECK_INT_EQ(trn_steps_done(b), 2);
        CHECK(memcmp(mdl_params(trn_model(a)), mdl_params(trn_model(b)), mdl_num_params(trn_model(a)) * sizeof(float)) == 0);
        CHECK_INT_EQ(trn_step(b, NULL), TRN_OK);
        trn_destroy(b);
    }
    /* without the recorded shape the checkpoint is refused (the arch check) */
    base(&r);
    CHECK_INT_EQ(trn_create(&x, &r, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    if (x) {
        CHECK_INT_EQ(trn_load(x, path, err, sizeof err), TRN_EMISMATCH);
        trn_destroy(x);
    }
    /* a checkpoint of a run without --maxent: found 0, cfg unchanged */
    {
        trn_config p;
        trn *y = NULL;
        char p2[400];
        base(&p);
        p.maxent = 0;
        snprintf(p2, sizeof p2, "%s/plain.safetensors", g_dir);
        CHECK_INT_EQ(trn_create(&y, &p, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
        if (y) {
            CHECK_INT_EQ(trn_save(y, p2, err, sizeof err), TRN_OK);
            trn_destroy(y);
        }
        r = p;
        CHECK_INT_EQ(mx_resume_shape(p2, &r, &found, err, sizeof err), TRN_OK);
        CHECK_INT_EQ(found, 0);
        CHECK_INT_EQ(r.model.d_model, 32);
        unlink(p2);
    }
    CHECK_INT_EQ(mx_resume_shape("/nonexistent/x.safetensors", &r, &found, err, sizeof err), TRN_EIO);
    CHECK_INT_EQ(mx_resume_shape(NULL, &r, &found, err, sizeof err), TRN_EINVAL);
    trn_destroy(a);
    unlink(path);
    free(res);
}

/* the flags: bare --maxent means on; the configuration JSON names them only when on */
static void test_flags(void)
{
    trn_config c;
    char err[512], *js = (char *)malloc(16384);
    char *argv[] = {"x", "--maxent", "--maxent-cost", "flops", "--maxent", "off", "--maxent-c", "--maxent-cost",
                    "bogus", "--maxent-lambda", "-1", NULL};
    int argc = 11;
    CHECK(js != NULL);
    if (!js) return;
    trn_preset("tiny-plain", &c);
    CHECK_INT_EQ(trn_config_json(&c, js, 16384), TRN_OK);
    CHECK(strstr(js, "maxent") == NULL); /* a run without it: its configuration as before */
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 1, err, sizeof err), 1);
    CHECK_INT_EQ(c.maxent, 1);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 2, err, sizeof err), 2);
    CHECK_INT_EQ(c.maxent_cost, MX_COST_FLOPS);
    CHECK_INT_EQ(trn_config_json(&c, js, 16384), TRN_OK);
    CHECK(strstr(js, "\"maxent\":\"on\"") != NULL && strstr(js, "\"maxent-cost\":\"flops\"") != NULL);
    CHECK(strstr(js, "maxent-c\"") == NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 4, err, sizeof err), 2);
    CHECK_INT_EQ(c.maxent, 0);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 6, err, sizeof err), 1);
    CHECK_INT_EQ(c.maxent_c, 1);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 7, err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 9, err, sizeof err), 2);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "maxent-lambda") != NULL);
    trn_preset("tiny-plain", &c);
    c.maxent = 1;
    c.device = MDL_DEVICE_CUDA;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    free(js);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    make_stream();
    snprintf(g_dir, sizeof g_dir, "/tmp/attnkit_test_maxent_%d", (int)getpid());
    mkdir(g_dir, 0777);
    TEST_RUN(test_flags);
    TEST_RUN(test_catalogue);
    TEST_RUN(test_select_deterministic);
    TEST_RUN(test_infeasible);
    TEST_RUN(test_init_a_c);
    TEST_RUN(test_resume_keeps_shape);
    rmdir(g_dir);
    return TEST_END();
}
