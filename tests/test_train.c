/* test_train.c - the WikiText-2 trainer (examples/common/train.c) on synthetic token
   streams with a micro model: resume bit-exactness for every controller and mechanism
   family, refused checkpoints (corrupted, truncated, mismatched, missing) that leave the
   trainer untouched, the evaluation protocol's token count, flags and presets, and a short
   run that learns a periodic sequence. */
#define _POSIX_C_SOURCE 200809L
/* train.c is this test's unit and is included (the test reads trn__get_tau); the rest of
   the examples' code (impl, stb_impl, bpe, data, layers, model, ckpt) is linked, built
   once per configuration (the Makefile's TEST_OBJS_test_train). */
#include "../examples/common/train.c"
#include "attnkit_test.h"

#include <pthread.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#define NTOK 4000
static uint16_t g_ids[NTOK];

static void make_stream(void)
{
    int i;
    tt_seed(7);
    /* a noisy periodic stream over 37 symbols: learnable, not trivial */
    for (i = 0; i < NTOK; i++) {
        int v = (i * 5 + (i / 7)) % 37;
        if (tt_uniform() < 0.1) v = (int)(tt_uniform() * 37.0);
        g_ids[i] = (uint16_t)v;
    }
}

static void micro(trn_config *c)
{
    trn_preset("tiny", c);
    c->model.vocab = 37;
    c->model.d_model = 16;
    c->model.n_layers = 2;
    c->model.n_heads = 2;
    c->model.max_T = 8;
    c->model.moe_experts = 3;
    c->model.moe_topk = 2;
    c->context = 8;
    c->batch = 3;
    c->steps = 12;
    c->epoch_steps = 4; /* epoch ends (context game, SWA-select) at steps 4, 8, 12 */
    c->eval_every = 3;
    c->eval_max_chunks = 6;
    c->log_every = 1;
    c->warmin_steps = 4;
    c->cg_lengths[0] = 4;
    c->cg_lengths[1] = 8;
    c->n_cg = 2;
    c->swa_start_epoch = 0;
    c->guardian_start = 0;
    c->guardian_ramp = 2;
    c->lr = 3e-3f;
    c->seed = 11;
    c->threads = 0;
}

static char g_dir[256];
static void tmpdir_init(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/attnkit_test_train_%d", (int)getpid());
    mkdir(g_dir, 0777);
}

static int run_steps(trn *t, long long n)
{
    long long i;
    for (i = 0; i < n; i++) {
        int rc = trn_step(t, NULL);
        if (rc != TRN_OK) return rc;
    }
    return TRN_OK;
}

/* N steps + save + fresh trainer + load + N steps == 2N steps, bit for bit (weights,
   optimizer, EMA/SWA), and the same evaluation afterwards. */
static void check_resume(const trn_config *c, const char *tag)
{
    trn *a = NULL, *b = NULL, *r = NULL;
    char err[512], path[400];
    int rc;
    size_t n;
    double ca, cr;
    long long na, nr;
    uint16_t *tr = g_ids, *va = g_ids + 3200;
    snprintf(path, sizeof path, "%s/resume_%s.safetensors", g_dir, tag);
    rc = trn_create(&a, c, tr, 3200, va, NTOK - 3200, err, sizeof err);
    if (rc != TRN_OK) fprintf(stderr, "[%s] %s\n", tag, err);
    CHECK_INT_EQ(rc, TRN_OK);
    if (rc != TRN_OK) return;
    CHECK_INT_EQ(run_steps(a, 12), TRN_OK);
    CHECK_INT_EQ(trn_create(&b, c, tr, 3200, va, NTOK - 3200, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(run_steps(b, 5), TRN_OK);
    rc = trn_save(b, path, err, sizeof err);
    if (rc != TRN_OK) fprintf(stderr, "[%s] %s\n", tag, err);
    CHECK_INT_EQ(rc, TRN_OK);
    trn_destroy(b);
    CHECK_INT_EQ(trn_create(&r, c, tr, 3200, va, NTOK - 3200, err, sizeof err), TRN_OK);
    rc = trn_load(r, path, err, sizeof err);
    if (rc != TRN_OK) fprintf(stderr, "[%s] %s\n", tag, err);
    CHECK_INT_EQ(rc, TRN_OK);
    CHECK_INT_EQ(trn_steps_done(r), 5);
    CHECK_INT_EQ(run_steps(r, 7), TRN_OK);
    n = mdl_num_params(trn_model(a));
    CHECK(memcmp(mdl_params(trn_model(a)), mdl_params(trn_model(r)), n * sizeof(float)) == 0);
    CHECK(memcmp(a->adam_m, r->adam_m, n * sizeof(float)) == 0);
    CHECK(memcmp(a->adam_v, r->adam_v, n * sizeof(float)) == 0);
    if (a->ema) CHECK(memcmp(a->ema, r->ema, n * sizeof(float)) == 0);
    if (a->swa) CHECK(memcmp(a->swa, r->swa, n * sizeof(float)) == 0);
    {
        /* the RPA running statistics (what rebuilds the evaluation prior) resume too */
        size_t npa = 0, npr = 0;
        const float *pa = mdl_prior_stats(trn_model(a), &npa), *pr = mdl_prior_stats(trn_model(r), &npr);
        CHECK(npa == npr);
        if (npa && npa == npr) CHECK(memcmp(pa, pr, npa * sizeof(float)) == 0);
        CHECK((npa > 0) == (c->model.prior == MDL_PRIOR_RPA));
    }
    CHECK_INT_EQ(trn_evaluate(a, va, NTOK - 3200, 8, trn_final_weights(a), 0, &ca, &na, NULL), TRN_OK);
    CHECK_INT_EQ(trn_evaluate(r, va, NTOK - 3200, 8, trn_final_weights(r), 0, &cr, &nr, NULL), TRN_OK);
    CHECK(ca == cr);
    CHECK_INT_EQ(na, nr);
    CHECK(isfinite(ca));
    if (a->swa) {
        CHECK_INT_EQ(a->swa_state.n_averaged, r->swa_state.n_averaged);
        CHECK(a->swa_state.n_offered >= 2); /* epochs 2 and 3 offered a snapshot */
    }
    if (c->cg) CHECK(a->cg.rounds == 3 && r->cg.rounds == 3);
    trn_destroy(a);
    trn_destroy(r);
    remove(path);
}

static void test_resume_recipe_guardian(void)
{
    trn_config c;
    micro(&c); /* RPA prior, fuzzy MoE, gates, chaos, EMA, SWA, context game, Guardian */
    check_resume(&c, "guardian");
    micro(&c);
    c.prior_train = 1; /* the leak-free training prior */
    check_resume(&c, "guardian_running");
}

static void test_resume_gac_scripted(void)
{
    trn_config c;
    micro(&c);
    c.controller = TRN_CTRL_GAC;
    c.model.ffn = MDL_FFN_RELU2;
    check_resume(&c, "gac");
    micro(&c);
    c.controller = TRN_CTRL_GAC; /* seed 003's pairing */
    c.model.prior = MDL_PRIOR_ERA;
    check_resume(&c, "era_gac");
    micro(&c);
    c.controller = TRN_CTRL_SCRIPTED;
    c.model.prior = MDL_PRIOR_ERA;
    c.model.ffn = MDL_FFN_GELU;
    check_resume(&c, "scripted");
}

static void test_resume_ceas_softmax(void)
{
    trn_config c;
    micro(&c);
    c.model.prior = MDL_PRIOR_NONE;
    c.model.ffn = MDL_FFN_GELU;
    c.model.res_gate = c.model.value_gate = 0;
    c.controller = TRN_CTRL_CEAS;
    c.cg = 0;
    check_resume(&c, "ceas");
}

/* CEAS gating beside the RPA / ERA prior (issue 46 item 3): steps that prune rows, and a
   bit-identical resume */
static void test_resume_ceas_gating_prior(void)
{
    trn_config c;
    int p;
    for (p = 0; p < 2; p++) {
        trn *t = NULL;
        char err[512];
        trn_step_info info;
        double skipped = 0.0, pruned = 0.0;
        int s, rc;
        micro(&c); /* the recipe: RPA prior, fuzzy MoE, gates, chaos, EMA, SWA */
        c.controller = TRN_CTRL_CEAS;
        c.ceas_gating = 1;
        c.cg = 0;
        if (p) c.model.prior = MDL_PRIOR_ERA;
        rc = trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err);
        if (rc != TRN_OK) fprintf(stderr, "[ceas gating %s] %s\n", p ? "era" : "rpa", err);
        CHECK_INT_EQ(rc, TRN_OK);
        if (rc != TRN_OK) return;
        /* at T = 8 the presets' m_min floor keeps every row: a floor of 2 and q 0.5 prune */
        t->cs.cfg.m_min = 2;
        t->cs.cfg.q_init = t->cs.cfg.q_final = 0.5f;
        t->cs.cfg.t_max = t->cs.cfg.t_inf = 50.0f;
        for (s = 0; s < 4; s++) {
            CHECK_INT_EQ(trn_step(t, &info), TRN_OK);
            CHECK(isfinite(info.loss));
            skipped += info.gate_skipped_flops;
            pruned += info.gate_pruned_frac;
        }
        CHECK(skipped > 0.0 && pruned > 0.0); /* the gating did skip work */
        trn_destroy(t);
        check_resume(&c, p ? "ceas_gating_era" : "ceas_gating_rpa");
    }
}

static void test_resume_polar_gdelta(void)
{
    trn_config c;
    micro(&c);
    c.model.attn = MDL_ATTN_POLAR;
    c.model.memory = MDL_MEM_GDELTA;
    c.model.prior = MDL_PRIOR_NONE;
    c.model.ffn = MDL_FFN_GELU;
    c.model.res_gate = c.model.value_gate = 0;
    c.controller = TRN_CTRL_NONE;
    check_resume(&c, "polar");
}

static long file_size(const char *p)
{
    FILE *f = fopen(p, "rb");
    long n;
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fclose(f);
    return n;
}

static unsigned char *slurp(const char *p, long *n)
{
    FILE *f = fopen(p, "rb");
    unsigned char *b;
    *n = file_size(p);
    if (!f || *n < 0) { if (f) fclose(f); return NULL; }
    b = (unsigned char *)malloc((size_t)*n + 1);
    if (b && fread(b, 1, (size_t)*n, f) != (size_t)*n) { free(b); b = NULL; }
    fclose(f);
    return b;
}

static void spit(const char *p, const unsigned char *b, long n)
{
    FILE *f = fopen(p, "wb");
    if (!f) return;
    fwrite(b, 1, (size_t)n, f);
    fclose(f);
}

static void test_bad_checkpoints(void)
{
    trn_config c, c2;
    trn *t = NULL, *u = NULL;
    char err[512], good[400], bad[400];
    unsigned char *buf, *orig;
    long n, cut;
    size_t np;
    float *snap;
    micro(&c);
    snprintf(good, sizeof good, "%s/good.safetensors", g_dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 2), TRN_OK);
    CHECK_INT_EQ(trn_save(t, good, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(run_steps(t, 1), TRN_OK);
    np = mdl_num_params(trn_model(t));
    snap = (float *)malloc(np * sizeof(float));
    memcpy(snap, mdl_params(trn_model(t)), np * sizeof(float));
    buf = slurp(good, &n);
    CHECK(buf != NULL && n > 64);
    if (!buf) { trn_destroy(t); free(snap); return; }
    orig = (unsigned char *)malloc((size_t)n);
    memcpy(orig, buf, (size_t)n);
    /* a flipped byte in the data section */
    buf[n - 5] ^= 0x40;
    spit(bad, buf, n);
    err[0] = 0;
    CHECK(trn_load(t, bad, err, sizeof err) != TRN_OK);
    CHECK(strstr(err, "bad.safetensors") != NULL);
    CHECK(memcmp(snap, mdl_params(trn_model(t)), np * sizeof(float)) == 0);
    CHECK_INT_EQ(trn_steps_done(t), 3);
    /* truncations */
    for (cut = 0; cut < n; cut += (n / 23) + 1) {
        spit(bad, orig, cut);
        CHECK(trn_load(t, bad, err, sizeof err) != TRN_OK);
    }
    CHECK(memcmp(snap, mdl_params(trn_model(t)), np * sizeof(float)) == 0);
    /* missing file */
    CHECK(trn_load(t, "/nonexistent/x.safetensors", err, sizeof err) != TRN_OK);
    /* a different architecture: refused with a message naming the option */
    c2 = c;
    c2.model.d_model = 24;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, good, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--d-model 16") != NULL);
        trn_destroy(u);
        u = NULL;
    }
    c2 = c;
    c2.lr = 1e-3f;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        CHECK_INT_EQ(trn_load(u, good, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--lr") != NULL);
        trn_destroy(u);
    }
    /* a failed save (missing directory) leaves the good checkpoint byte-identical */
    CHECK(trn_save(t, "/nonexistent_dir_attnkit/ckpt.safetensors", err, sizeof err) != TRN_OK);
    {
        long m;
        unsigned char *again = slurp(good, &m);
        CHECK(again && m == n && memcmp(again, orig, (size_t)n) == 0);
        free(again);
    }
    /* and the good one still loads */
    CHECK_INT_EQ(trn_load(t, good, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_steps_done(t), 2);
    trn_destroy(t);
    free(buf);
    free(orig);
    free(snap);
    remove(good);
    remove(bad);
}

static void test_eval_protocol(void)
{
    trn_config c;
    trn *t = NULL;
    char err[256];
    double ce;
    long long nt;
    int used, T;
    micro(&c);
    c.ema = 0;
    c.swa = 0;
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    for (T = 1; T <= 8; T++) {
        size_t n = 797;
        CHECK_INT_EQ(trn_evaluate(t, g_ids, n, T, TRN_W_RAW, 0, &ce, &nt, &used), TRN_OK);
        CHECK_INT_EQ(nt, (long long)((n - 1) / (size_t)T) * T);
        CHECK_INT_EQ(nt, (long long)wt2_num_chunks(n, T) * T);
        CHECK(isfinite(ce) && ce > 0);
        CHECK_INT_EQ(trn_evaluate(t, g_ids, n, T, TRN_W_RAW, 5, &ce, &nt, &used), TRN_OK);
        CHECK_INT_EQ(nt, 5LL * T);
    }
    /* EMA / SWA asked but off: raw weights, and it says so */
    CHECK_INT_EQ(trn_evaluate(t, g_ids, 100, 8, TRN_W_SWA, 0, &ce, &nt, &used), TRN_OK);
    CHECK_INT_EQ(used, TRN_W_RAW);
    CHECK(trn_evaluate(t, g_ids, 100, 9, TRN_W_RAW, 0, &ce, &nt, &used) != TRN_OK); /* T > max_T */
    CHECK(trn_evaluate(t, NULL, 100, 8, TRN_W_RAW, 0, &ce, &nt, &used) != TRN_OK);
    trn_destroy(t);
}

/* trn_set_progress: fn(user, 0, total) first, then done rising to total (in chunks), the
   total the evaluation's own token count implies; capped by max_chunks; none when unset */
typedef struct {
    int calls, starts, monotone;
    long long last, total;
} prog_rec;
static void prog_cb(void *user, long long done, long long total)
{
    prog_rec *r = (prog_rec *)user;
    if (done == 0) {
        r->starts++;
        r->last = 0;
        r->total = total;
    } else if (done < r->last || done > total || total != r->total) {
        r->monotone = 0;
    }
    r->last = done;
    r->calls++;
}

static void test_eval_progress(void)
{
    trn_config c;
    trn *t = NULL;
    char err[256];
    double ce;
    long long nt;
    prog_rec r;
    micro(&c);
    c.ema = 0;
    c.swa = 0;
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    memset(&r, 0, sizeof r);
    r.monotone = 1;
    trn_set_progress(t, prog_cb, &r);
    CHECK_INT_EQ(trn_evaluate(t, g_ids, 797, 8, TRN_W_RAW, 0, &ce, &nt, NULL), TRN_OK);
    CHECK_INT_EQ(r.starts, 1);
    CHECK(r.monotone);
    CHECK_INT_EQ(r.total, (797 - 1) / 8);
    CHECK_INT_EQ(r.last, r.total);
    CHECK_INT_EQ(nt, r.total * 8);
    CHECK(r.calls >= 2);
    CHECK_INT_EQ(trn_evaluate(t, g_ids, 797, 8, TRN_W_RAW, 5, &ce, &nt, NULL), TRN_OK);
    CHECK_INT_EQ(r.starts, 2);
    CHECK_INT_EQ(r.total, 5);
    CHECK_INT_EQ(r.last, 5);
    CHECK(r.monotone);
    trn_set_progress(t, NULL, NULL);
    r.calls = 0;
    CHECK_INT_EQ(trn_evaluate(t, g_ids, 797, 8, TRN_W_RAW, 0, &ce, &nt, NULL), TRN_OK);
    CHECK_INT_EQ(r.calls, 0);
    trn_destroy(t);
}

/* every preset trn_preset takes is listed by trn_preset_name, and nothing else */
static void test_preset_names(void)
{
    trn_config c;
    int k;
    for (k = 0; trn_preset_name(k); k++) CHECK_INT_EQ(trn_preset(trn_preset_name(k), &c), TRN_OK);
    CHECK_INT_EQ(k, 8);
    CHECK(trn_preset_name(-1) == NULL);
    /* issue 43 item 8: seed 002's ATMA, the paper's ratios at the tiny budget */
    {
        char err[256];
        CHECK_INT_EQ(trn_preset("atma", &c), TRN_OK);
        CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
        CHECK(!strcmp(c.model.layer_pattern, "ccAc") && c.model.n_layers == 8 && c.model.lfm_k == 3); /* 3:1 */
        CHECK(c.model.attn == MDL_ATTN_POLAR && c.model.n_heads == 4 * c.model.polar_kv_heads);    /* GQA 1:4 */
        CHECK(c.model.polar_qk_norm == 1 && c.model.polar_canon_k == 4 && c.model.polar_gate == MDL_POLAR_GATE_CHANNEL);
        CHECK(c.model.memory == MDL_MEM_GDELTA && c.model.mem_qkv == MDL_MEMQKV_SHARED && c.model.ffn == MDL_FFN_RELU2 &&
              c.model.d_ff_mult == 4);
        CHECK(c.model.norm == MDL_NORM_RMS && c.model.pos == MDL_POS_NONE && c.optimizer == TRN_OPT_MUON);
        CHECK(c.lr_flat_frac == 0.3f && c.lr_floor_frac == 0.0f && c.steps == 300); /* the 70 % cooldown */
    }
    /* the device table behind --help's --device line and mdl_device_supports */
    CHECK(mdl_device_limit(0) != NULL && mdl_device_limit(1) != NULL && mdl_device_limit(2) != NULL &&
          mdl_device_limit(3) == NULL);
    CHECK(strstr(mdl_device_limit(1), "polar") != NULL);
    CHECK(strstr(mdl_device_limit(2), "sinusoid/relative") != NULL); /* issue 45: host-only fixed priors */
}

/* --ffn takes every row name of layers.h's FFN table (the option's list is the table's),
   records it by name in the config JSON (what a checkpoint keeps), and refuses others
   with the list */
static void test_flags_ffn_table(void)
{
    trn_config c;
    char err[512], js[16384], want[64];
    char *argv[3];
    int r;
    argv[0] = "x";
    argv[1] = "--ffn";
    for (r = 0; r < lyr_ffn_count(); r++) {
        CHECK_INT_EQ(trn_preset("tiny-plain", &c), TRN_OK);
        argv[2] = (char *)lyr_ffn_get(r)->name;
        CHECK_INT_EQ(trn_parse_flag(&c, 3, argv, 1, err, sizeof err), 2);
        CHECK_INT_EQ(c.model.ffn, r);
        CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
        CHECK(mdl_flops_per_token(&c.model, c.context) > 0.0);
        CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
        snprintf(want, sizeof want, "\"ffn\":\"%s\"", lyr_ffn_get(r)->name);
        CHECK(strstr(js, want) != NULL);
    }
    argv[2] = "bogus";
    CHECK_INT_EQ(trn_parse_flag(&c, 3, argv, 1, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "gelu|relu2|moe") != NULL);
}

static void test_flags_presets(void)
{
    trn_config c;
    char err[256];
    char *argv[] = {"x", "--d-model", "64", "--prior=era", "--cg-lengths", "32,64", "--lr", "abc",
                    "--prior", "bogus", "--unknown", "--context"};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    char js[16384];
    CHECK_INT_EQ(trn_preset("tiny", &c), TRN_OK);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 1, err, sizeof err), 2);
    CHECK_INT_EQ(c.model.d_model, 64);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 3, err, sizeof err), 1);
    CHECK_INT_EQ(c.model.prior, MDL_PRIOR_ERA);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 4, err, sizeof err), 2);
    CHECK_INT_EQ(c.n_cg, 2);
    CHECK_INT_EQ(c.cg_lengths[1], 64);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 6, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--lr") != NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 8, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "none|rpa|era") != NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 10, err, sizeof err), 0);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 11, err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "\"d-model\":64") != NULL);
    CHECK(strstr(js, "\"cg-lengths\":\"32,64\"") != NULL);
    CHECK_INT_EQ(trn_preset("paper", &c), TRN_OK);
    CHECK_INT_EQ(c.model.d_model, 510);
    CHECK_INT_EQ(c.batch * c.context, 24576);
    CHECK_INT_EQ(c.model.prior, MDL_PRIOR_RPA);
    CHECK_INT_EQ(c.controller, TRN_CTRL_GUARDIAN);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    /* seed 000 §7 / Table 1 / Listing 4: a fixed 8,030-step schedule, FFN x2, tau_max 1.6 */
    CHECK_INT_EQ(c.context, 768);
    CHECK_INT_EQ(c.steps, 0);
    CHECK_INT_EQ(c.epoch_steps, 73);
    CHECK_INT_EQ(c.epochs * c.epoch_steps, 8030);
    CHECK_INT_EQ(c.model.d_ff_mult, 2);
    CHECK(c.guardian_tau_max == 1.6f);
    CHECK_INT_EQ(c.swa_start_epoch, 60);
    CHECK(c.cg && c.n_cg == 2 && c.cg_lengths[0] == 384 && c.cg_lengths[1] == 768);
    CHECK_INT_EQ(trn_preset("era-gac", &c), TRN_OK);
    CHECK_INT_EQ(c.model.prior, MDL_PRIOR_ERA);
    CHECK_INT_EQ(c.controller, TRN_CTRL_GAC);
    CHECK_INT_EQ(c.epochs * c.epoch_steps, 8030);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_preset("era-gac-tiny", &c), TRN_OK);
    CHECK_INT_EQ(c.model.prior, MDL_PRIOR_ERA);
    CHECK_INT_EQ(c.controller, TRN_CTRL_GAC);
    CHECK(c.gac_hmin == 2.0f && c.gac_hmax == 5.0f);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_preset("baseline", &c), TRN_OK);
    CHECK_INT_EQ(c.model.prior, MDL_PRIOR_NONE);
    CHECK_INT_EQ(c.controller, TRN_CTRL_NONE);
    CHECK_INT_EQ(c.swa, 0);
    CHECK_INT_EQ(c.cg, 0);
    CHECK_INT_EQ(c.model.d_model, 510);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_preset("nope", &c), TRN_EINVAL);
    /* invalid combinations */
    trn_preset("tiny", &c);
    c.lr = NAN;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    trn_preset("tiny", &c);
    c.model.prior = MDL_PRIOR_NONE;
    c.controller = TRN_CTRL_GAC; /* GAC scales the logits: no prior needed */
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    c.model.attn = MDL_ATTN_POLAR;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "gac") != NULL);
    trn_preset("tiny", &c);
    c.prior_momentum = 1.0f;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    trn_preset("tiny", &c);
    c.gac_hmin = 6.0f;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    trn_preset("tiny", &c);
    c.cg_lengths[1] = 4096;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    /* CEAS gating beside the RPA / ERA prior (issue 46 item 3); it still needs --controller ceas */
    trn_preset("tiny", &c);
    CHECK_INT_EQ(c.model.prior, MDL_PRIOR_RPA);
    c.controller = TRN_CTRL_CEAS;
    c.ceas_gating = 1;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    c.model.prior = MDL_PRIOR_ERA;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    c.controller = TRN_CTRL_GUARDIAN;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--controller ceas") != NULL);
}

/* Training learns the stream: held-out CE falls well below its start. */
static void test_learns(void)
{
    trn_config c;
    trn *t = NULL;
    char err[256];
    double ce0, ce1;
    micro(&c);
    c.steps = 250;
    c.eval_every = 0;
    c.controller = TRN_CTRL_NONE;
    c.cg = 0;
    c.lr = 1e-2f;
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(trn_evaluate(t, g_ids + 3200, NTOK - 3200, 8, TRN_W_RAW, 0, &ce0, NULL, NULL), TRN_OK);
    CHECK_INT_EQ(run_steps(t, 250), TRN_OK);
    CHECK_INT_EQ(trn_evaluate(t, g_ids + 3200, NTOK - 3200, 8, TRN_W_RAW, 0, &ce1, NULL, NULL), TRN_OK);
    fprintf(stderr, "  learns: held-out CE %.3f -> %.3f (uniform %.3f)\n", ce0, ce1, log(37.0));
    CHECK(ce0 > 3.0);
    CHECK(ce1 < 2.0);
    trn_destroy(t);
}

/* Honest evaluation through the trainer: the same split scored with 1, 3 or 5 chunks per
   forward gives the same CE (the cached prior does not depend on the batch); the old
   per-batch prior (--eval-prior batch) does not, and differs from the honest figure */
static void test_eval_batch_invariant(void)
{
    trn_config c;
    trn *t = NULL;
    char err[256];
    double ce[3], old[3];
    int k, bs[3] = {1, 3, 5};
    uint16_t *va = g_ids + 3200;
    size_t nva = NTOK - 3200;
    micro(&c);
    c.model.rpa.tau_align = 0.05f; /* a sharp plan: the memberships shape the prior */
    c.model.tau_att_init = 0.6f;
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, va, nva, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 8), TRN_OK);
    for (k = 0; k < 3; k++) {
        t->tokens_per_step = bs[k] * 8;
        t->cfg.eval_prior = 0;
        CHECK_INT_EQ(trn_evaluate(t, va, nva, 8, TRN_W_RAW, 0, &ce[k], NULL, NULL), TRN_OK);
        t->cfg.eval_prior = 1;
        CHECK_INT_EQ(trn_evaluate(t, va, nva, 8, TRN_W_RAW, 0, &old[k], NULL, NULL), TRN_OK);
    }
    CHECK_CLOSE(ce[1], ce[0], 1e-9, 0);
    CHECK_CLOSE(ce[2], ce[0], 1e-9, 0);
    CHECK(fabs(old[1] - old[0]) > 1e-6 || fabs(old[2] - old[0]) > 1e-6);
    CHECK(fabs(old[0] - ce[0]) > 1e-6);
    fprintf(stderr, "  eval CE cached prior %.6f %.6f %.6f | per-batch prior %.6f %.6f %.6f\n", ce[0], ce[1], ce[2],
            old[0], old[1], old[2]);
    trn_destroy(t);
}

/* GAC reads dL/dtau before clipping: with the controller's gate open, one step moves
   tau_gac the same way whatever the clip (the clipped gradient would be ~1e4 x smaller);
   tau_gac is the controller's alone (AdamW leaves it), and stays in [0.5, 2.5] */
static void test_gac_preclip(void)
{
    trn_config c;
    trn *t[2] = {NULL, NULL};
    char err[256];
    float tau[2][MDL_MAX_LAYERS];
    int k, l;
    for (k = 0; k < 2; k++) {
        micro(&c);
        c.controller = TRN_CTRL_GAC;
        c.model.prior = MDL_PRIOR_ERA;
        c.cg = 0;
        c.chaos = 0;
        c.grad_clip = k ? 1e-6f : 0.0f;
        CHECK_INT_EQ(trn_create(&t[k], &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
        if (!t[k]) { trn_destroy(t[0]); return; }
        CHECK_INT_EQ(t[k]->n_tau, 2);
        t[k]->gc.u = 1; /* validation improving: the gate is open */
        t[k]->gc.cfg.eta = 50.0f; /* a visible move */
        CHECK_INT_EQ(trn_step(t[k], NULL), TRN_OK);
        trn__get_tau(t[k], tau[k]);
    }
    for (l = 0; l < 2; l++) {
        CHECK(tau[0][l] == tau[1][l]);
        CHECK(tau[0][l] != 1.0f);
        CHECK(tau[0][l] >= 0.5f && tau[0][l] <= 2.5f);
    }
    trn_destroy(t[0]);
    trn_destroy(t[1]);
}

/* Ids outside the model's vocabulary are refused when the trainer is made (naming the
   split and the position), not when a batch happens to sample them; a batch * context
   that does not fit an int is refused by the validation, not reported as out of memory. */
static void test_refused_at_create(void)
{
    trn_config c;
    trn *t = NULL;
    char err[512];
    static uint16_t ids[NTOK];
    micro(&c);
    memcpy(ids, g_ids, sizeof ids);
    ids[100] = 37; /* vocab is 37 */
    err[0] = 0;
    CHECK_INT_EQ(trn_create(&t, &c, ids, 3200, ids + 3200, NTOK - 3200, err, sizeof err), TRN_EINVAL);
    CHECK(t == NULL && strstr(err, "training split: token id 37 at position 100") != NULL);
    CHECK(strstr(err, "--vocab 37") != NULL);
    ids[100] = g_ids[100];
    ids[3200 + 7] = 65535;
    CHECK_INT_EQ(trn_create(&t, &c, ids, 3200, ids + 3200, NTOK - 3200, err, sizeof err), TRN_EINVAL);
    CHECK(t == NULL && strstr(err, "evaluation split: token id 65535 at position 7") != NULL);
    ids[3200 + 7] = g_ids[3200 + 7];
    CHECK_INT_EQ(trn_create(&t, &c, ids, 3200, ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    trn_destroy(t);
    /* 134217728 x 16 = 2^31 tokens per step */
    c.batch = 134217728;
    c.context = 16;
    c.model.max_T = 16;
    c.cg = 0;
    err[0] = 0;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "tokens per step") != NULL);
    c.batch = 134217727; /* fits: validation passes (memory is trn_create's business) */
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
}

/* trn_save always writes the CRC entry: a checkpoint without it is refused, unless the
   caller passes TRN_LOAD_ALLOW_NO_CRC. */
static void test_crc_required(void)
{
    trn_config c;
    trn *t = NULL;
    char err[512], good[400], bad[400];
    unsigned char *buf;
    long n;
    micro(&c);
    snprintf(good, sizeof good, "%s/crc.safetensors", g_dir);
    snprintf(bad, sizeof bad, "%s/nocrc.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 2), TRN_OK);
    CHECK_INT_EQ(trn_save(t, good, err, sizeof err), TRN_OK);
    buf = slurp(good, &n);
    CHECK(buf != NULL);
    if (buf) {
        /* blank out ,"attnkit.hcrc32":"xxxxxxxx" (a format-1 file), then also
           ,"attnkit.crc32":"xxxxxxxx" (or the pair and its comma): still JSON */
        uint64_t hl = 0;
        int k, pass;
        char *h, *p;
        static const char *const keys[2] = {"\"attnkit.hcrc32\":\"", "\"attnkit.crc32\":\""};
        for (k = 7; k >= 0; k--) hl = (hl << 8) | buf[k];
        for (pass = 0; pass < 2; pass++) {
            h = (char *)malloc((size_t)hl + 1);
            memcpy(h, buf + 8, (size_t)hl);
            h[hl] = 0;
            p = strstr(h, keys[pass]);
            CHECK(p != NULL);
            if (p) {
                size_t at = (size_t)(p - h), len = strlen(keys[pass]) + 9;
                if (at > 0 && h[at - 1] == ',') { at--; len++; }
                else if (h[at + len] == ',') len++;
                memset(buf + 8 + at, ' ', len);
            }
            free(h);
            spit(bad, buf, n);
            err[0] = 0;
            CHECK_INT_EQ(trn_load(t, bad, err, sizeof err), TRN_EFORMAT);
            CHECK(strstr(err, pass ? "crc32" : "hcrc32") != NULL && strstr(err, "nocrc.safetensors") != NULL);
            CHECK_INT_EQ(trn_load_flags(t, bad, TRN_LOAD_ALLOW_NO_CRC, err, sizeof err), TRN_OK);
            CHECK_INT_EQ(trn_steps_done(t), 2);
        }
        CHECK_INT_EQ(trn_load(t, good, err, sizeof err), TRN_OK);
        free(buf);
    }
    trn_destroy(t);
    remove(good);
    remove(bad);
}

/* A copy of checkpoint src at dst with nbytes at byte offset off of tensor `name`
   replaced, both checksums recomputed (ckpt_write): what a hostile or buggy writer could
   produce. 1 on success. */
static int mutate_ckpt(const char *src, const char *dst, const char *name, size_t off, const void *bytes,
                       size_t nbytes)
{
    ckpt_file *f = NULL;
    ckpt_entry *E;
    const char **mk, **mv;
    unsigned char *copy = NULL;
    char err[512];
    int i, n, nm, m = 0, ok = 0;
    if (ckpt_open(&f, src, err, sizeof err) != CKPT_OK) return 0;
    n = ckpt_count(f);
    nm = ckpt_meta_count(f);
    E = (ckpt_entry *)calloc((size_t)n, sizeof *E);
    mk = (const char **)calloc((size_t)nm + 1, sizeof *mk);
    mv = (const char **)calloc((size_t)nm + 1, sizeof *mv);
    for (i = 0; E && i < n; i++) {
        ckpt_entry_at(f, i, &E[i]);
        if (!strcmp(E[i].name, name)) {
            size_t sz = ckpt_dtype_size(E[i].dtype), k;
            for (k = 0; k < (size_t)E[i].ndim; k++) sz *= (size_t)E[i].shape[k];
            if (off + nbytes <= sz && (copy = (unsigned char *)malloc(sz)) != NULL) {
                memcpy(copy, E[i].data, sz);
                memcpy(copy + off, bytes, nbytes);
                E[i].data = copy;
                ok = 1;
            }
        }
    }
    for (i = 0; mk && mv && i < nm; i++) {
        const char *k, *v;
        ckpt_meta_at(f, i, &k, &v);
        if (strcmp(k, "attnkit.crc32") && strcmp(k, "attnkit.hcrc32")) {
            mk[m] = k;
            mv[m++] = v;
        }
    }
    if (ok) ok = ckpt_write(dst, E, n, mk, mv, m, err, sizeof err) == CKPT_OK;
    free(copy);
    free(E);
    free(mk);
    free(mv);
    ckpt_close(f);
    return ok;
}

/* TRN_LOAD_EVAL_ONLY (mcqa): a checkpoint loads into a trainer made on other tokens (a
   plain load refuses it: other data), with the same weights, and the trainer then refuses
   to step; mutated token counts are still refused. */
static void test_load_eval_only(void)
{
    trn_config c;
    trn *t = NULL, *u = NULL;
    char err[600], good[400], bad[400];
    const int64_t big = INT64_MAX;
    trn_step_info info;
    micro(&c);
    snprintf(good, sizeof good, "%s/eval_only.safetensors", g_dir);
    snprintf(bad, sizeof bad, "%s/eval_only_bad.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 3), TRN_OK);
    CHECK_INT_EQ(trn_save(t, good, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&u, &c, g_ids, 2000, g_ids + 2000, 700, err, sizeof err), TRN_OK);
    if (!u) { trn_destroy(t); return; }
    CHECK_INT_EQ(trn_load(u, good, err, sizeof err), TRN_EMISMATCH);
    CHECK_INT_EQ(trn_step(u, &info), TRN_OK); /* not loaded: still a trainer */
    CHECK_INT_EQ(trn_load_flags(u, good, TRN_LOAD_EVAL_ONLY, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_steps_done(u), 3);
    CHECK(memcmp(mdl_params(trn_model(u)), mdl_params(trn_model(t)), (size_t)mdl_num_params(trn_model(t)) * sizeof(float)) == 0);
    CHECK_INT_EQ(trn_step(u, &info), TRN_EINVAL);
    CHECK_INT_EQ(trn_steps_done(u), 3);
    CHECK(mutate_ckpt(good, bad, "trainer.i64", 8 * 28, &big, 8)); /* training tokens */
    CHECK_INT_EQ(trn_load_flags(u, bad, TRN_LOAD_EVAL_ONLY, err, sizeof err), TRN_EFORMAT);
    trn_destroy(t);
    trn_destroy(u);
    remove(good);
    remove(bad);
}

/* Issue 37: every field of the trainer's saved state is range-checked on load, in a file
   whose checksums are right: counters beyond the run, booleans not 0/1, NaN or negative
   controller state, non-finite weights and moments, and a resume on other data are
   refused with the field named, and the trainer is left as it was. */
static void test_state_mutants(void)
{
    trn_config c;
    trn *t = NULL, *u = NULL;
    char err[600], good[400], bad[400];
    int k;
    const int64_t big = INT64_MAX, two = 2, minus1 = -1;
    const double dnan = NAN, dneg = -1.0, dinf = INFINITY;
    const float fnan = NAN, fneg = -1.0f, finf = INFINITY;
    struct {
        const char *tensor;
        size_t off;
        const void *v;
        size_t n;
        const char *want;
    } mut[] = {
        {"trainer.i64", 8 * 1, &big, 8, "step"},
        {"trainer.i64", 8 * 1, &minus1, 8, "step"},
        {"trainer.i64", 8 * 3, &big, 8, "optimizer updates"},
        {"trainer.i64", 8 * 4, &big, 8, "skipped"},
        {"trainer.i64", 8 * 7, &big, 8, "loader rows"},
        {"trainer.i64", 8 * 14, &two, 8, "have_val"},
        {"trainer.i64", 8 * 17, &big, 8, "since the last evaluation"},
        {"trainer.i64", 8 * 19, &big, 8, "context-game count"},
        {"trainer.i64", 8 * 27, &big, 8, "pending"},
        {"trainer.f64", 8 * 6, &dnan, 8, "lambda_sat"},
        {"trainer.f64", 8 * 6, &dneg, 8, "lambda_sat"},
        {"trainer.f64", 8 * 7, &dnan, 8, "chaos"},
        {"trainer.f64", 8 * 16, &dnan, 8, "temperature"},
        {"trainer.f64", 8 * 16, &dneg, 8, "temperature"},
        {"trainer.f64", 8 * 3, &dinf, 8, "mu_H"},
        {"optim.adam_m", 4 * 5, &finf, 4, "first moments"},
        {"optim.adam_v", 0, &fneg, 4, "second moments"},
        {"optim.ema", 4 * 9, &fnan, 4, "EMA"},
    };
    micro(&c);
    snprintf(good, sizeof good, "%s/mut_good.safetensors", g_dir);
    snprintf(bad, sizeof bad, "%s/mut_bad.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 5), TRN_OK);
    CHECK_INT_EQ(trn_save(t, good, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&u, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!u) { trn_destroy(t); return; }
    CHECK_INT_EQ(run_steps(u, 1), TRN_OK);
    /* the rewriting itself changes nothing: an unmutated copy loads */
    {
        const int64_t five = 5;
        CHECK(mutate_ckpt(good, bad, "trainer.i64", 8, &five, 8));
        CHECK_INT_EQ(trn_load(u, bad, err, sizeof err), TRN_OK);
        CHECK_INT_EQ(trn_steps_done(u), 5);
    }
    for (k = 0; k < (int)(sizeof mut / sizeof mut[0]); k++) {
        int rc;
        CHECK(mutate_ckpt(good, bad, mut[k].tensor, mut[k].off, mut[k].v, mut[k].n));
        err[0] = 0;
        rc = trn_load(u, bad, err, sizeof err);
        if (rc != TRN_EFORMAT || !strstr(err, mut[k].want)) {
            CHECK(rc == TRN_EFORMAT && strstr(err, mut[k].want));
            fprintf(stderr, "    mutant %d (%s +%zu): rc %d '%s'\n", k, mut[k].tensor, mut[k].off, rc, err);
        }
        CHECK_INT_EQ(trn_steps_done(u), 5); /* unchanged */
    }
    /* a weight: the first float of the first tensor */
    {
        const mdl_tensor *e0 = mdl_tensor_at(trn_model(t), 0);
        CHECK(mutate_ckpt(good, bad, e0->name, 0, &fnan, 4));
        CHECK_INT_EQ(trn_load(u, bad, err, sizeof err), TRN_EFORMAT);
        CHECK(strstr(err, "weights") != NULL && strstr(err, e0->name) != NULL);
    }
    trn_destroy(u);
    u = NULL;
    /* other data: a different training / evaluation token count */
    CHECK_INT_EQ(trn_create(&u, &c, g_ids, 3100, g_ids + 3100, NTOK - 3100, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, good, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "3200") != NULL && strstr(err, "3100") != NULL && strstr(err, "data") != NULL);
        CHECK_INT_EQ(trn_steps_done(u), 0);
    }
    trn_destroy(u);
    trn_destroy(t);
    remove(good);
    remove(bad);
}

/* Issue 37: a stop request is honoured inside evaluations. trn_evaluate returns
   TRN_ESTOPPED; a step whose periodic evaluation is stopped leaves it pending, a
   checkpoint keeps it pending, and the resumed trainer runs it first: the run ends
   bit-identical to one never stopped. */
static void test_stop_flag(void)
{
    trn_config c;
    trn *a = NULL, *b = NULL, *r = NULL;
    volatile sig_atomic_t flag = 0;
    trn_step_info in;
    double ce = 0;
    long long nt = 0;
    int used, rc, i;
    char err[512], path[400];
    micro(&c);
    c.eval_every = 2;
    snprintf(path, sizeof path, "%s/stop.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&a, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&b, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&r, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!a || !b || !r) goto done;
    trn_set_stop_flag(b, &flag);
    CHECK_INT_EQ(run_steps(a, 7), TRN_OK);
    CHECK_INT_EQ(run_steps(b, 3), TRN_OK);
    flag = 1;
    CHECK_INT_EQ(trn_evaluate(b, g_ids + 3200, NTOK - 3200, 8, TRN_W_RAW, 0, &ce, &nt, &used), TRN_ESTOPPED);
    CHECK(isnan(ce));
    rc = trn_step(b, &in); /* step 4: its evaluation is stopped */
    CHECK_INT_EQ(rc, TRN_ESTOPPED);
    CHECK_INT_EQ(trn_steps_done(b), 4);
    CHECK_INT_EQ(trn_pending(b), 1);
    CHECK_INT_EQ(trn_save(b, path, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_load(r, path, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_pending(r), 1);
    rc = trn_step(r, &in); /* the pending evaluation, no update */
    CHECK_INT_EQ(rc, TRN_OK);
    CHECK(in.evaluated && in.T == 0 && isfinite(in.val_ce));
    CHECK_INT_EQ(trn_steps_done(r), 4);
    CHECK_INT_EQ(trn_pending(r), 0);
    CHECK_INT_EQ(run_steps(r, 3), TRN_OK);
    /* and in the same process: the flag lowered, the pending work runs first */
    flag = 0;
    CHECK_INT_EQ(trn_step(b, &in), TRN_OK);
    CHECK(in.evaluated && in.T == 0);
    CHECK_INT_EQ(run_steps(b, 3), TRN_OK);
    for (i = 0; i < 2; i++) {
        const trn *x = i ? b : r;
        CHECK_INT_EQ(trn_steps_done(x), 7);
        CHECK(memcmp(mdl_params(trn_model(a)), mdl_params(trn_model((trn *)x)), mdl_num_params(trn_model(a)) * sizeof(float)) == 0);
    }
done:
    trn_destroy(a);
    trn_destroy(b);
    trn_destroy(r);
    remove(path);
}

/* A diverging run (lr 1e30): every step returns TRN_OK, the non-finite ones are skipped
   and counted, the evaluation says NaN instead of failing, and every metrics line stays
   JSON (null for the non-finite numbers). */
static void test_divergence(void)
{
    trn_config c;
    trn *t = NULL;
    char err[512], path[400], line[4096], b[40];
    FILE *f;
    double ce = 0;
    long long nt = 0;
    int rc = TRN_OK, i, nulls = 0, lines = 0, bad = 0;
    CHECK(strcmp(trn_json_num(b, sizeof b, 6, NAN), "null") == 0);
    CHECK(strcmp(trn_json_num(b, sizeof b, 6, -INFINITY), "null") == 0);
    CHECK(strcmp(trn_json_num(b, sizeof b, 3, 1.5), "1.500") == 0);
    CHECK(strcmp(trn_json_num(b, sizeof b, 2, 1e30), "1.00e+30") == 0);
    CHECK(strcmp(trn_json_gnum(b, sizeof b, 6, INFINITY), "null") == 0);
    CHECK(strcmp(trn_json_gnum(b, sizeof b, 3, 0.00012345), "0.000123") == 0);
    micro(&c);
    c.lr = 1e30f;
    c.grad_clip = 0;
    snprintf(path, sizeof path, "%s/div.jsonl", g_dir);
    f = fopen(path, "w");
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t || !f) {
        if (f) fclose(f);
        trn_destroy(t);
        return;
    }
    trn_set_metrics(t, f);
    for (i = 0; i < 12 && rc == TRN_OK; i++) rc = trn_step(t, NULL);
    CHECK_INT_EQ(rc, TRN_OK);
    CHECK(trn_steps_skipped(t) >= 6);
    CHECK_INT_EQ(trn_evaluate(t, g_ids + 3200, NTOK - 3200, 8, TRN_W_RAW, 0, &ce, &nt, NULL), TRN_OK);
    CHECK(!isfinite(ce));
    trn_set_metrics(t, NULL);
    fclose(f);
    trn_destroy(t);
    f = fopen(path, "r");
    CHECK(f != NULL);
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        if (strstr(line, "null")) nulls++;
        if (strstr(line, "nan") || strstr(line, "inf") || strstr(line, "NaN")) bad++;
    }
    if (f) fclose(f);
    CHECK(lines >= 12);
    CHECK(nulls >= 6);
    CHECK_INT_EQ(bad, 0);
    remove(path);
}

/* issue 45: seed 000's fixed comparison priors through the trainer: flags and their
   validation (the flag named, never an abort), the configuration JSON (their knobs only
   with a fixed prior, so every other run's configuration, and its checkpoints from before
   these flags, are unchanged), a bit-exact resume, a checkpoint of other knobs refused */
/* --lr-warmup N: step k (1-based) of the first N runs at the schedule's lr times k/N, then
   the schedule as without it; the option is absent from the configuration JSON of a run
   without it (older checkpoints resume) and present, and checked on resume, with it */
static void test_lr_warmup(void)
{
    trn_config c, c0;
    trn *t = NULL, *t0 = NULL;
    trn_step_info in, in0;
    char err[256], js[16384];
    const char *argv[2] = {"--lr-warmup", "-1"};
    int k;
    micro(&c);
    c.steps = 12;
    c.eval_every = 0;
    c0 = c;
    CHECK_INT_EQ(trn_config_json(&c0, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "lr-warmup") == NULL);
    c.lr_warmup = 4;
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "\"lr-warmup\":4") != NULL);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&t0, &c0, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t || !t0) {
        trn_destroy(t);
        trn_destroy(t0);
        return;
    }
    for (k = 1; k <= 6; k++) {
        CHECK_INT_EQ(trn_step(t, &in), TRN_OK);
        CHECK_INT_EQ(trn_step(t0, &in0), TRN_OK);
        if (k <= 4) CHECK_CLOSE(in.lr, in0.lr * (double)k / 4.0, 1e-6, 0.0);
        else CHECK(in.lr == in0.lr);
    }
    trn_destroy(t);
    trn_destroy(t0);
    /* a negative count is refused by name */
    CHECK(trn_parse_flag(&c, 2, (char **)argv, 0, err, sizeof err) < 0 || trn_config_validate(&c, err, sizeof err) != TRN_OK);
}

static void test_fixed_prior_flags_resume(void)
{
    trn_config c, c2;
    trn *t = NULL, *u = NULL;
    char err[512], js[16384], path[400];
    char *argv[] = {"x", "--prior", "sinusoid", "--fixed-prior-dims", "32", "--fixed-prior-base", "500",
                    "--prior", "relative", "--fixed-prior-slope", "0.25", "--fixed-prior-zscore", "0",
                    "--fixed-prior-causal", "1", "--fixed-prior-clip", "3", "--fixed-prior-eps", "1e-5",
                    "--fixed-prior-dims", "abc", "--prior", "sinus"};
    int argc = (int)(sizeof argv / sizeof argv[0]), i;
    micro(&c);
    for (i = 1; i < 19; i += 2) CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, i, err, sizeof err), 2);
    CHECK_INT_EQ(c.model.prior, MDL_PRIOR_RELATIVE);
    CHECK_INT_EQ(c.model.fixed_prior.dims, 32);
    CHECK(c.model.fixed_prior.base == 500.0f);
    CHECK(c.model.fixed_prior.slope == 0.25f);
    CHECK_INT_EQ(c.model.fixed_prior.zscore, 0);
    CHECK_INT_EQ(c.model.fixed_prior.zscore_causal, 1);
    CHECK(c.model.fixed_prior.bias_clip == 3.0f);
    CHECK(c.model.fixed_prior.zscore_eps == 1e-5f);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 19, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--fixed-prior-dims") != NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 21, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "sinusoid|relative") != NULL);
    /* bad values: TRN_EINVAL naming the flag (a knob of the other fixed prior is not read) */
#define BADF(field, val, flag, pr)                                             \
    do {                                                                       \
        c2 = c;                                                                \
        c2.model.prior = pr;                                                   \
        c2.model.field = val;                                                  \
        CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);   \
        CHECK(strstr(err, flag) != NULL);                                      \
        CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_EINVAL); \
        CHECK(u == NULL);                                                      \
    } while (0)
    BADF(fixed_prior.dims, 7, "--fixed-prior-dims", MDL_PRIOR_SINUSOID);
    BADF(fixed_prior.dims, 0, "--fixed-prior-dims", MDL_PRIOR_SINUSOID);
    BADF(fixed_prior.base, 0.5f, "--fixed-prior-base", MDL_PRIOR_SINUSOID);
    BADF(fixed_prior.base, (float)NAN, "--fixed-prior-base", MDL_PRIOR_SINUSOID);
    BADF(fixed_prior.slope, 0.0f, "--fixed-prior-slope", MDL_PRIOR_RELATIVE);
    BADF(fixed_prior.slope, (float)INFINITY, "--fixed-prior-slope", MDL_PRIOR_RELATIVE);
    BADF(fixed_prior.zscore, 2, "--fixed-prior-zscore", MDL_PRIOR_RELATIVE);
    BADF(fixed_prior.zscore_causal, -1, "--fixed-prior-causal", MDL_PRIOR_SINUSOID);
    BADF(fixed_prior.zscore_eps, -1.0f, "--fixed-prior-eps", MDL_PRIOR_SINUSOID);
    BADF(fixed_prior.bias_clip, 0.0f, "--fixed-prior-clip", MDL_PRIOR_RELATIVE);
#undef BADF
    c2 = c;
    c2.model.fixed_prior.dims = 7; /* the sinusoid's: not read by the relative prior */
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_OK);
    c2.device = MDL_DEVICE_CUDA; /* the device model refuses them, from model.c's table */
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "sinusoid/relative") != NULL);
    /* the JSON: the knobs with a fixed prior only */
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "\"prior\":\"relative\"") != NULL);
    CHECK(strstr(js, "\"fixed-prior-slope\":0.25") != NULL);
    CHECK(strstr(js, "\"fixed-prior-zscore\":0") != NULL);
    c2 = c;
    c2.model.prior = MDL_PRIOR_ERA;
    CHECK_INT_EQ(trn_config_json(&c2, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "fixed-prior") == NULL);
    CHECK_INT_EQ(trn__json(&c2, js, sizeof js, 1), TRN_OK);
    CHECK(strstr(js, "fixed-prior") == NULL);
    /* resume bit for bit with each prior (Guardian moves its per-layer tau: no tau_att) */
    micro(&c);
    c.model.prior = MDL_PRIOR_SINUSOID;
    c.model.fixed_prior.dims = 8;
    check_resume(&c, "sinusoid");
    micro(&c);
    c.model.prior = MDL_PRIOR_RELATIVE;
    c.model.fixed_prior.zscore = 0;
    c.model.fixed_prior.slope = 0.3f;
    c.controller = TRN_CTRL_GAC;
    c.model.ffn = MDL_FFN_GELU;
    check_resume(&c, "relative_gac");
    /* a checkpoint of other knobs: refused, naming the knob; of another prior: naming --prior */
    micro(&c);
    c.model.prior = MDL_PRIOR_SINUSOID;
    c.model.fixed_prior.dims = 8;
    snprintf(path, sizeof path, "%s/fixed.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 2), TRN_OK);
    CHECK_INT_EQ(trn_save(t, path, err, sizeof err), TRN_OK);
    c2 = c;
    c2.model.fixed_prior.dims = 16;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--fixed-prior-dims 8") != NULL);
        trn_destroy(u);
        u = NULL;
    }
    c2 = c;
    c2.model.prior = MDL_PRIOR_NONE;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--prior sinusoid") != NULL);
        trn_destroy(u);
        u = NULL;
    }
    CHECK_INT_EQ(trn_load(t, path, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_steps_done(t), 2);
    trn_destroy(t);
    remove(path);
}

/* ------------------------------------------------------------------ data parallelism */
/* Two "ranks" as two threads of this process, with a communicator of shared memory that
   has dist.h's semantics (rank-ordered sums, broadcast, any), so that the trainer's
   data-parallel path (trn_set_parallel: micro-batches, the sums over ranks, the sharded
   evaluation) runs under ASan and UBSan here; tests/dp_check.sh runs it over MPI. */
typedef struct fake_comm {
    pthread_barrier_t bar;
    void *slot[2];
    int flag[2];
} fake_comm;
typedef struct fake_rank {
    fake_comm *fc;
    int rank;
} fake_rank;

static int fake_reduce(void *c, void *buf, size_t n, int f64)
{
    fake_rank *me = (fake_rank *)c;
    size_t i, esz = f64 ? sizeof(double) : sizeof(float);
    void *tmp = malloc(n * esz + 1);
    if (!tmp) return -1;
    me->fc->slot[me->rank] = buf;
    pthread_barrier_wait(&me->fc->bar);
    for (i = 0; i < n; i++) { /* rank order: x_0 + x_1 */
        if (f64) ((double *)tmp)[i] = ((double *)me->fc->slot[0])[i] + ((double *)me->fc->slot[1])[i];
        else ((float *)tmp)[i] = ((float *)me->fc->slot[0])[i] + ((float *)me->fc->slot[1])[i];
    }
    pthread_barrier_wait(&me->fc->bar);
    memcpy(buf, tmp, n * esz);
    free(tmp);
    return 0;
}
static int fake_ar32(void *c, float *buf, size_t n) { return fake_reduce(c, buf, n, 0); }
static int fake_ar64(void *c, double *buf, size_t n) { return fake_reduce(c, buf, n, 1); }
static int fake_bcast(void *c, void *buf, size_t bytes, int root)
{
    fake_rank *me = (fake_rank *)c;
    me->fc->slot[me->rank] = buf;
    pthread_barrier_wait(&me->fc->bar);
    if (me->rank != root) memcpy(buf, me->fc->slot[root], bytes);
    pthread_barrier_wait(&me->fc->bar);
    return 0;
}
static int fake_any(void *c, int flag, int *out)
{
    fake_rank *me = (fake_rank *)c;
    me->fc->flag[me->rank] = flag != 0;
    pthread_barrier_wait(&me->fc->bar);
    *out = me->fc->flag[0] || me->fc->flag[1];
    pthread_barrier_wait(&me->fc->bar);
    return 0;
}

typedef struct dp_job {
    trn_config cfg;
    int rank, size, accum, steps, rc, same;
    fake_rank fr;
    float *params;      /* (n) after the steps */
    double ce;          /* evaluation of the validation tail after them */
    long long ntok;
    uint64_t hash;
} dp_job;

static void *dp_run(void *arg)
{
    dp_job *j = (dp_job *)arg;
    trn *t = NULL;
    char err[512];
    trn_parallel p;
    size_t n;
#ifdef _OPENMP
    omp_set_num_threads(1); /* the rule holds for a fixed thread count: one here, every side */
#endif
    j->rc = trn_create(&t, &j->cfg, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err);
    if (j->rc != TRN_OK) { fprintf(stderr, "dp_run: %s\n", err); return NULL; }
    memset(&p, 0, sizeof p);
    p.rank = j->rank;
    p.size = j->size;
    p.accum = j->accum;
    p.comm = &j->fr;
    p.allreduce_f32 = fake_ar32;
    p.allreduce_f64 = fake_ar64;
    p.bcast = fake_bcast;
    p.any = fake_any;
    j->rc = trn_set_parallel(t, &p, err, sizeof err);
    if (j->rc == TRN_OK) j->rc = run_steps(t, j->steps);
    if (j->rc == TRN_OK)
        j->rc = trn_evaluate(t, g_ids + 3200, NTOK - 3200, 8, TRN_W_RAW, 0, &j->ce, &j->ntok, NULL);
    if (j->rc == TRN_OK) j->rc = trn_replicas_agree(t, &j->same);
    n = mdl_num_params(trn_model(t));
    j->params = (float *)malloc(n * sizeof(float));
    if (j->params) memcpy(j->params, mdl_params(trn_model(t)), n * sizeof(float));
    j->hash = trn_state_hash(t);
    trn_destroy(t);
    return NULL;
}

/* 2 ranks x accum 1 == 1 process x accum 2, bit for bit: weights, optimizer (hash),
   evaluation; for the recipe (RPA batch prior, Guardian, MoE, context game, EMA, SWA)
   and for CEAS (its observables combined over the ranks). */
static void check_dp_equals_accum(trn_config *c, const char *tag)
{
    dp_job ref, r[2];
    fake_comm fc;
    pthread_t th[2];
    size_t n;
    int k;
    trn *t = NULL;
    char err[256];
    memset(&ref, 0, sizeof ref);
    memset(r, 0, sizeof r);
    memset(&fc, 0, sizeof fc);
    ref.cfg = *c;
    ref.size = 1;
    ref.accum = 2;
    ref.steps = 12;
    ref.fr.fc = &fc;
    /* the reference in a thread of its own too (the same OpenMP set-up) */
    CHECK(pthread_create(&th[0], NULL, dp_run, &ref) == 0);
    pthread_join(th[0], NULL);
    CHECK_INT_EQ(ref.rc, TRN_OK);
    CHECK(pthread_barrier_init(&fc.bar, NULL, 2) == 0);
    for (k = 0; k < 2; k++) {
        r[k].cfg = *c;
        r[k].rank = k;
        r[k].size = 2;
        r[k].accum = 1;
        r[k].steps = 12;
        r[k].fr.fc = &fc;
        r[k].fr.rank = k;
        CHECK(pthread_create(&th[k], NULL, dp_run, &r[k]) == 0);
    }
    for (k = 0; k < 2; k++) pthread_join(th[k], NULL);
    pthread_barrier_destroy(&fc.bar);
    CHECK_INT_EQ(trn_create(&t, c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    n = t ? mdl_num_params(trn_model(t)) : 0;
    trn_destroy(t);
    for (k = 0; k < 2; k++) {
        CHECK_INT_EQ(r[k].rc, TRN_OK);
        CHECK(r[k].same == 1);
        CHECK(ref.params && r[k].params && memcmp(ref.params, r[k].params, n * sizeof(float)) == 0);
        CHECK(r[k].hash == ref.hash && ref.hash != 0);
        CHECK(r[k].ce == ref.ce && isfinite(ref.ce)); /* the sharded evaluation: exact */
        CHECK_INT_EQ(r[k].ntok, ref.ntok);
    }
    if (!(r[0].ce == ref.ce && r[1].hash == ref.hash))
        fprintf(stderr, "[%s] ref ce %.17g hash %llx, rank 0 ce %.17g hash %llx\n", tag, ref.ce,
                (unsigned long long)ref.hash, r[0].ce, (unsigned long long)r[0].hash);
    free(ref.params);
    free(r[0].params);
    free(r[1].params);
}

static void test_dp_equals_accum(void)
{
    trn_config c;
    micro(&c);
    c.batch = 4; /* 32 tokens per step: batches of 8 (T 4) and 4 (T 8), both even */
    check_dp_equals_accum(&c, "recipe");
    micro(&c);
    c.batch = 4;
    c.controller = TRN_CTRL_CEAS;
    c.model.prior = MDL_PRIOR_NONE;
    c.cg = 0;
    check_dp_equals_accum(&c, "ceas");
}

/* what trn_set_parallel refuses; accum 1 x size 1 changes nothing; --grad-accum resumes */
static void test_parallel_refusals(void)
{
    trn_config c;
    trn *t = NULL, *a = NULL;
    trn_parallel p;
    char err[512];
    micro(&c); /* batch 3 */
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    memset(&p, 0, sizeof p);
    p.size = 1;
    p.accum = 2;
    err[0] = 0;
    CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--batch 3") != NULL && strstr(err, "not divisible") != NULL);
    p.accum = 0;
    CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_EINVAL);
    p.accum = 1;
    p.size = 2;
    p.rank = 2;
    CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_EINVAL);
    p.rank = 1;
    err[0] = 0;
    CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_EINVAL); /* no collective functions */
    CHECK(strstr(err, "collective") != NULL);
    p.size = 1;
    p.rank = 0;
    p.accum = 4; /* more micro-batches than sequences */
    CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_EINVAL);
    trn_destroy(t);
    t = NULL;
    /* the context game: batch 4 at T 8 is 32 tokens, 4 at T 8, 8 at T 4; accum 4: 4 | 8 and 4 | 4;
       cg lengths 8 and 3 (a batch of 10 at T 3): refused */
    micro(&c);
    c.batch = 4;
    c.cg_lengths[0] = 3;
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    p.accum = 4;
    err[0] = 0;
    CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "context game's length 3") != NULL);
    trn_destroy(t);
    t = NULL;
    micro(&c);
    c.batch = 4;
    c.controller = TRN_CTRL_CEAS;
    c.ceas_gating = 1;
    c.cg = 0;
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    p.accum = 2;
    err[0] = 0;
    CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--ceas-gating on") != NULL);
    trn_destroy(t);
    t = NULL;
    /* size 1 x accum 1 through trn_set_parallel: the plain trainer, bit for bit */
    micro(&c);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&a, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (t && a) {
        int same = 0;
        p.accum = 1;
        CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_OK);
        CHECK_INT_EQ(run_steps(t, 6), TRN_OK);
        CHECK_INT_EQ(run_steps(a, 6), TRN_OK);
        CHECK(trn_state_hash(t) == trn_state_hash(a));
        CHECK_INT_EQ(trn_replicas_agree(t, &same), TRN_OK);
        CHECK(same == 1);
    }
    trn_destroy(t);
    trn_destroy(a);
    /* --grad-accum 2 resumes bit-exactly (the recipe: RPA batch prior, Guardian, MoE, CG) */
    {
        trn *b = NULL, *r = NULL;
        char path[400];
        size_t n;
        snprintf(path, sizeof path, "%s/resume_accum.safetensors", g_dir);
        micro(&c);
        c.batch = 4;
        p.accum = 2;
        CHECK_INT_EQ(trn_create(&a, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
        CHECK_INT_EQ(trn_create(&b, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
        CHECK_INT_EQ(trn_create(&r, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
        if (a && b && r) {
            CHECK_INT_EQ(trn_set_parallel(a, &p, err, sizeof err), TRN_OK);
            CHECK_INT_EQ(trn_set_parallel(b, &p, err, sizeof err), TRN_OK);
            CHECK_INT_EQ(run_steps(a, 12), TRN_OK);
            CHECK_INT_EQ(run_steps(b, 5), TRN_OK);
            CHECK_INT_EQ(trn_save(b, path, err, sizeof err), TRN_OK);
            CHECK_INT_EQ(trn_load(r, path, err, sizeof err), TRN_OK);
            CHECK_INT_EQ(trn_set_parallel(r, &p, err, sizeof err), TRN_OK);
            CHECK_INT_EQ(run_steps(r, 7), TRN_OK);
            n = mdl_num_params(trn_model(a));
            CHECK(memcmp(mdl_params(trn_model(a)), mdl_params(trn_model(r)), n * sizeof(float)) == 0);
            CHECK(trn_state_hash(a) == trn_state_hash(r));
        }
        trn_destroy(a);
        trn_destroy(b);
        trn_destroy(r);
        remove(path);
    }
}

/* issue 43: --layer-pattern / --lfm-k: parsed and refused by name, absent from the
   configuration JSON of a run without a pattern (older checkpoints resume), present with
   one; a bit-exact resume of hybrids (softmax "cA", polar + memory "ccAc" on 4 layers);
   a checkpoint of another pattern, or of none, refused naming the flag */
static void test_layer_pattern_flags_resume(void)
{
    trn_config c, c2;
    trn *t = NULL, *u = NULL;
    char err[512], js[16384], path[400];
    char *argv[] = {"x", "--layer-pattern", "cA", "--lfm-k", "2", "--layer-pattern", "cAx", "--layer-pattern",
                    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    micro(&c);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "layer-pattern") == NULL && strstr(js, "lfm-k") == NULL);
    CHECK_INT_EQ(trn__json(&c, js, sizeof js, 1), TRN_OK);
    CHECK(strstr(js, "layer-pattern") == NULL && strstr(js, "lfm-k") == NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 1, err, sizeof err), 2);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 3, err, sizeof err), 2);
    CHECK(!strcmp(c.model.layer_pattern, "cA"));
    CHECK_INT_EQ(c.model.lfm_k, 2);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 5, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--layer-pattern") != NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 7, err, sizeof err), TRN_EINVAL); /* 65 characters */
    CHECK(strstr(err, "--layer-pattern") != NULL);
    CHECK(!strcmp(c.model.layer_pattern, "cA"));
    /* the tiny preset's prior and value gate are attention-only: refused with a sentence */
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "layer_pattern") != NULL);
    c.model.prior = MDL_PRIOR_NONE;
    c.model.value_gate = 0;
    c.controller = TRN_CTRL_NONE;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    c2 = c;
    c2.controller = TRN_CTRL_CEAS;
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--layer-pattern") != NULL);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "\"layer-pattern\":\"cA\"") != NULL);
    CHECK(strstr(js, "\"lfm-k\":2") != NULL);
    check_resume(&c, "pattern_cA");
    micro(&c);
    c.model.attn = MDL_ATTN_POLAR;
    c.model.memory = MDL_MEM_GDELTA;
    c.model.prior = MDL_PRIOR_NONE;
    c.model.ffn = MDL_FFN_RELU2;
    c.model.norm = MDL_NORM_RMS;
    c.model.res_gate = c.model.value_gate = 0;
    c.model.n_layers = 4;
    c.controller = TRN_CTRL_NONE;
    snprintf(c.model.layer_pattern, sizeof c.model.layer_pattern, "ccAc");
    check_resume(&c, "pattern_ccAc_polar");
    /* another pattern, or none: refused naming --layer-pattern */
    snprintf(path, sizeof path, "%s/pattern.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 2), TRN_OK);
    CHECK_INT_EQ(trn_save(t, path, err, sizeof err), TRN_OK);
    c2 = c;
    snprintf(c2.model.layer_pattern, sizeof c2.model.layer_pattern, "cccA");
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--layer-pattern ccAc") != NULL);
        trn_destroy(u);
        u = NULL;
    }
    c2 = c;
    c2.model.layer_pattern[0] = 0;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--layer-pattern") != NULL);
        trn_destroy(u);
        u = NULL;
    }
    CHECK_INT_EQ(trn_load(t, path, err, sizeof err), TRN_OK);
    trn_destroy(t);
    remove(path);
}

/* ------------------------------------------------------------------ Muon (issue 43 item 6) */

/* An independent float64 transcription of the Newton-Schulz quintic iteration as the
   public Muon writes it: normalise by the Frobenius norm (+ 1e-7), work on the transpose
   when there are more rows than columns, `steps` times A = X X^T, B = b A + c A A,
   X = a X + B X, transpose back. X (r, c) in place. */
static void ns5_ref64(double *X, int r, int c, int steps)
{
    const double a = 3.4445, b = -4.7750, cc = 2.0315;
    int tr = r > c, R = tr ? c : r, C = tr ? r : c, i, j, k, s;
    double *Y = (double *)calloc((size_t)r * c, sizeof(double)), *A = (double *)calloc((size_t)R * R, sizeof(double));
    double *Bm = (double *)calloc((size_t)R * R, sizeof(double)), *Z = (double *)calloc((size_t)r * c, sizeof(double));
    double nrm = 0.0;
    if (!Y || !A || !Bm || !Z) goto done;
    for (i = 0; i < r * c; i++) nrm += X[i] * X[i];
    nrm = sqrt(nrm) + 1e-7;
    /* Y (R, C): X, or its transpose */
    for (i = 0; i < r; i++)
        for (j = 0; j < c; j++) {
            if (tr) Y[(size_t)j * C + i] = X[(size_t)i * c + j] / nrm;
            else Y[(size_t)i * C + j] = X[(size_t)i * c + j] / nrm;
        }
    for (s = 0; s < steps; s++) {
        for (i = 0; i < R; i++)
            for (j = 0; j < R; j++) {
                double acc = 0.0;
                for (k = 0; k < C; k++) acc += Y[(size_t)i * C + k] * Y[(size_t)j * C + k];
                A[(size_t)i * R + j] = acc;
            }
        for (i = 0; i < R; i++)
            for (j = 0; j < R; j++) {
                double acc = 0.0;
                for (k = 0; k < R; k++) acc += A[(size_t)i * R + k] * A[(size_t)k * R + j];
                Bm[(size_t)i * R + j] = b * A[(size_t)i * R + j] + cc * acc;
            }
        for (i = 0; i < R; i++)
            for (j = 0; j < C; j++) {
                double acc = 0.0;
                for (k = 0; k < R; k++) acc += Bm[(size_t)i * R + k] * Y[(size_t)k * C + j];
                Z[(size_t)i * C + j] = a * Y[(size_t)i * C + j] + acc;
            }
        memcpy(Y, Z, sizeof(double) * (size_t)r * c);
    }
    for (i = 0; i < r; i++)
        for (j = 0; j < c; j++) X[(size_t)i * c + j] = tr ? Y[(size_t)j * C + i] : Y[(size_t)i * C + j];
done:
    free(Y);
    free(A);
    free(Bm);
    free(Z);
}

/* trn_muon_step (the trainer's Muon update, shared with niah) against a float64
   transcription of its formula: momentum, Nesterov, NS5 (ns5_ref64), scale and decay */
static void test_muon_step(void)
{
    ex_ctx cx = ex_ctx_make(EX_CPU);
    mdl_tensor e;
    int r = 6, c = 10, i, steps;
    size_t n = (size_t)r * c;
    float P[60], G[60], M[60], W[60 + 60 + 2 * 36];
    double rP[60], rM[60], U[60], worst = 0.0, big = 0.0;
    const float lr = 0.01f, wd = 0.1f, beta = 0.95f;
    memset(&e, 0, sizeof e);
    e.ndim = 2;
    e.shape[0] = r;
    e.shape[1] = c;
    e.numel = n;
    CHECK(trn_muon_step_floats(&e) == n + trn_muon_work_floats(r, c) && trn_muon_step_floats(&e) == 60 + 60 + 2 * 36);
    tt_seed(11);
    for (steps = 0; steps <= 5; steps += 5) {
        double nrm = 0.0, sc = 0.2 * sqrt(10.0);
        for (i = 0; i < (int)n; i++) {
            P[i] = (float)(tt_uniform() * 2.0 - 1.0);
            G[i] = (float)(tt_uniform() * 2.0 - 1.0) * 0.1f;
            M[i] = (float)(tt_uniform() * 2.0 - 1.0) * 0.05f;
            rP[i] = P[i];
            rM[i] = beta * (double)M[i] + (1.0 - beta) * (double)G[i];
            U[i] = (1.0 - beta) * (double)G[i] + beta * rM[i];
            nrm += U[i] * U[i];
        }
        CHECK_INT_EQ(trn_muon_step(&cx, &e, P, G, M, lr, wd, beta, steps, W), TRN_OK);
        if (steps) ns5_ref64(U, r, c, steps);
        else
            for (i = 0; i < (int)n; i++) U[i] /= sqrt(nrm) + 1e-7;
        for (i = 0; i < (int)n; i++) {
            double want = rP[i] * (1.0 - (double)lr * wd) - (double)lr * sc * U[i];
            worst = fmax(worst, fabs((double)P[i] - want));
            worst = fmax(worst, fabs((double)M[i] - rM[i]));
            big = fmax(big, fabs(want));
        }
    }
    CHECK(worst <= 1e-5 * big);
    /* refusals: nothing NULL, a 2-D tensor whose shape is its numel, beta in [0, 1) */
    CHECK_INT_EQ(trn_muon_step(NULL, &e, P, G, M, lr, wd, beta, 5, W), TRN_EINVAL);
    CHECK_INT_EQ(trn_muon_step(&cx, &e, P, G, M, lr, wd, beta, 5, NULL), TRN_EINVAL);
    CHECK_INT_EQ(trn_muon_step(&cx, &e, P, G, M, lr, wd, 1.0f, 5, W), TRN_EINVAL);
    CHECK_INT_EQ(trn_muon_step(&cx, &e, P, G, M, NAN, wd, beta, 5, W), TRN_EINVAL);
    CHECK_INT_EQ(trn_muon_step(&cx, &e, P, G, M, lr, wd, beta, -1, W), TRN_EINVAL);
    e.numel = n + 1;
    CHECK_INT_EQ(trn_muon_step(&cx, &e, P, G, M, lr, wd, beta, 5, W), TRN_EINVAL);
    e.numel = n;
    e.ndim = 3;
    CHECK_INT_EQ(trn_muon_step(&cx, &e, P, G, M, lr, wd, beta, 5, W), TRN_EINVAL);
    CHECK(trn_muon_step_floats(&e) == 0 && trn_muon_step_floats(NULL) == 0);
}

/* trn_muon_orthogonalise (fp32, tensor.h's GEMM) against ns5_ref64 on wide, tall and
   square shapes: worst element difference within 1e-5 of the largest element */
static void test_muon_newton_schulz(void)
{
    static const int shapes[][2] = {{4, 4}, {3, 7}, {7, 3}, {16, 48}, {48, 16}, {33, 65}, {96, 24}, {2, 2}, {64, 64}};
    ex_ctx cx = ex_ctx_make(EX_CPU);
    int si, steps;
    tt_seed(3);
    for (si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
        int r = shapes[si][0], c = shapes[si][1], i;
        size_t n = (size_t)r * c;
        float *X = (float *)malloc(n * sizeof(float)), *W = (float *)malloc(trn_muon_work_floats(r, c) * sizeof(float));
        double *R = (double *)malloc(n * sizeof(double)), worst = 0.0, big = 0.0;
        CHECK(X && W && R);
        if (!X || !W || !R) { free(X); free(W); free(R); return; }
        for (steps = 1; steps <= 5; steps += 4) {
            for (i = 0; i < (int)n; i++) {
                X[i] = (float)(tt_uniform() * 2.0 - 1.0) * 0.03f;
                R[i] = X[i];
            }
            CHECK_INT_EQ(trn_muon_orthogonalise(&cx, X, r, c, steps, W), TRN_OK);
            ns5_ref64(R, r, c, steps);
            worst = big = 0.0;
            for (i = 0; i < (int)n; i++) {
                double d = fabs((double)X[i] - R[i]);
                if (d > worst) worst = d;
                if (fabs(R[i]) > big) big = fabs(R[i]);
            }
            if (!(worst <= 1e-5 * big))
                fprintf(stderr, "NS5 %dx%d, %d steps: worst %.3g of %.3g\n", r, c, steps, worst, big);
            CHECK(big > 0.0 && worst <= 1e-5 * big);
        }
        /* after 5 steps the rows (wide) or columns (tall) are near orthonormal: the
           diagonal of the small Gram matrix in NS5's band around 1 */
        {
            int S = r < c ? r : c, a, k;
            for (a = 0; a < S; a++) {
                double g = 0.0;
                if (r <= c) for (k = 0; k < c; k++) g += (double)X[(size_t)a * c + k] * X[(size_t)a * c + k];
                else for (k = 0; k < r; k++) g += (double)X[(size_t)k * c + a] * X[(size_t)k * c + a];
                CHECK(g > 0.3 && g < 1.6);
            }
        }
        free(X);
        free(W);
        free(R);
    }
    /* a zero matrix stays zero; bad sizes are refused */
    {
        float Z[12], W[64];
        int i;
        memset(Z, 0, sizeof Z);
        CHECK_INT_EQ(trn_muon_orthogonalise(&cx, Z, 3, 4, 5, W), TRN_OK);
        for (i = 0; i < 12; i++) CHECK(Z[i] == 0.0f);
        CHECK_INT_EQ(trn_muon_orthogonalise(&cx, Z, 0, 4, 5, W), TRN_EINVAL);
        CHECK_INT_EQ(trn_muon_orthogonalise(&cx, Z, 3, 4, 5, NULL), TRN_EINVAL);
        CHECK(trn_muon_work_floats(3, 4) == 12 + 2 * 9);
    }
}

static void muon_micro(trn_config *c)
{
    micro(c);
    c->optimizer = TRN_OPT_MUON;
    c->lr = 2e-3f;
}

/* which tensors Muon takes (from the parameter table), and that the others get AdamW
   exactly: after one step, every non-Muon tensor's weights and moments are bit-identical
   to an AdamW run's; Muon's matrices have a momentum buffer (adam_m) and no second moment,
   and their update's RMS is NS5's ~0.2 (the 0.2 sqrt(max dim) rule) */
static void test_muon_param_split(void)
{
    trn_config c, c0;
    trn *t = NULL, *t0 = NULL;
    trn_step_info in, in0;
    char err[512];
    int i, nt, n_muon = 0, n_adam = 0;
    float *P0 = NULL;
    muon_micro(&c);
    c.model.memory = MDL_MEM_GDELTA;
    c0 = c;
    c0.optimizer = TRN_OPT_ADAMW;
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&t0, &c0, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t || !t0) {
        trn_destroy(t);
        trn_destroy(t0);
        return;
    }
    CHECK(t->muon_ws != NULL && t0->muon_ws == NULL);
    P0 = (float *)malloc(t->n * sizeof(float));
    if (!P0) { trn_destroy(t); trn_destroy(t0); return; }
    memcpy(P0, mdl_params(trn_model(t)), t->n * sizeof(float));
    CHECK(memcmp(P0, mdl_params(trn_model(t0)), t->n * sizeof(float)) == 0);
    CHECK_INT_EQ(trn_step(t, &in), TRN_OK);
    CHECK_INT_EQ(trn_step(t0, &in0), TRN_OK);
    CHECK(in.loss == in0.loss && in.grad_norm == in0.grad_norm && in.lr == in0.lr && !in.skipped);
    nt = mdl_num_tensors(trn_model(t));
    for (i = 0; i < nt; i++) {
        const mdl_tensor *e = mdl_tensor_at(trn_model(t), i);
        const float *p = mdl_params(trn_model(t)) + e->offset, *p0 = mdl_params(trn_model(t0)) + e->offset;
        const float *m = t->adam_m + e->offset, *v = t->adam_v + e->offset;
        size_t k, nb = e->numel * sizeof(float);
        if (trn_muon_param(e)) {
            /* step 1 from M = 0: M = (1 - beta) G exactly; U = (1 - beta) G + beta M (Nesterov);
               W = W (1 - lr wd) - lr 0.2 sqrt(max(r, c)) NS5(U), rebuilt here from the
               gradient the step left in the model */
            const float *g = mdl_grads(trn_model(t)) + e->offset, beta = c.muon_momentum;
            int r = e->shape[0], cc = e->shape[1], mx = r > cc ? r : cc;
            float *U = (float *)malloc(e->numel * sizeof(float));
            float *W = (float *)malloc(trn_muon_work_floats(r, cc) * sizeof(float));
            double vs = 0.0, worst = 0.0, big = 0.0, ss = 0.0, upd = 0.0;
            ex_ctx cx = ex_ctx_make(EX_CPU);
            n_muon++;
            CHECK(e->ndim == 2 && e->decay && !strncmp(e->name, "blocks.", 7));
            CHECK(U && W);
            if (!U || !W) { free(U); free(W); continue; }
            for (k = 0; k < e->numel; k++) {
                float u = (1.0f - beta) * g[k];
                CHECK(m[k] == u);
                U[k] = u + beta * m[k];
                vs += fabs(v[k]);
            }
            CHECK(vs == 0.0); /* no second moment */
            CHECK_INT_EQ(trn_muon_orthogonalise(&cx, U, r, cc, c.muon_ns_steps, W), TRN_OK);
            for (k = 0; k < e->numel; k++) {
                double want = (double)P0[e->offset + k] * (1.0 - (double)in.lr * c.weight_decay) -
                              (double)in.lr * 0.2 * sqrt((double)mx) * U[k];
                double d = fabs(want - p[k]), du = (p[k] - (double)P0[e->offset + k] * (1.0 - (double)in.lr * c.weight_decay)) / in.lr;
                if (d > worst) worst = d;
                if (fabs(want) > big) big = fabs(want);
                if ((double)in.lr * 0.2 * sqrt((double)mx) * fabs(U[k]) > upd) upd = (double)in.lr * 0.2 * sqrt((double)mx) * fabs(U[k]);
                ss += du * du;
            }
            /* 1e-6 of the weights plus 1e-5 of the update (a compiler that fuses u + beta m
               into an fma here rounds U otherwise; NS5 carries that ulp on) */
            if (!(worst <= 1e-6 * big + 1e-5 * upd))
                fprintf(stderr, "Muon %s: worst %.3g of %.3g (update %.3g)\n", e->name, worst, big, upd);
            CHECK(worst <= 1e-6 * big + 1e-5 * upd);
            if (getenv("MUON_VERBOSE"))
                fprintf(stderr, "Muon %s (%dx%d): update RMS / lr %.3g\n", e->name, r, cc, sqrt(ss / (double)e->numel));
            free(U);
            free(W);
        } else {
            n_adam++;
            CHECK(memcmp(p, p0, nb) == 0);
            CHECK(memcmp(m, t0->adam_m + e->offset, nb) == 0);
            CHECK(memcmp(v, t0->adam_v + e->offset, nb) == 0);
        }
    }
    /* the named families: the embedding and the norms AdamW, the blocks' projections Muon */
    CHECK(!trn_muon_param(mdl_find_tensor(trn_model(t), "wte")));
    for (i = 0; i < nt; i++) {
        const mdl_tensor *e = mdl_tensor_at(trn_model(t), i);
        if (strstr(e->name, "ln") || strstr(e->name, "norm") || strstr(e->name, "bias") || e->ndim != 2)
            CHECK(!trn_muon_param(e));
        if (strstr(e->name, "qkv.weight") || strstr(e->name, "proj.weight")) CHECK(trn_muon_param(e));
    }
    CHECK(n_muon >= 4 && n_adam >= 4);
    free(P0);
    trn_destroy(t);
    trn_destroy(t0);
}

static int muon_stub_f32(void *c, float *b, size_t n) { (void)c, (void)b, (void)n; return 0; }
static int muon_stub_f64(void *c, double *b, size_t n) { (void)c, (void)b, (void)n; return 0; }
static int muon_stub_bcast(void *c, void *b, size_t n, int r) { (void)c, (void)b, (void)n, (void)r; return 0; }
static int muon_stub_any(void *c, int f, int *o) { (void)c; *o = f; return 0; }

/* deterministic, resumes bit-exactly (check_resume: 12 steps == 5 + save + load + 7, for
   the recipe and for polar + gated-delta + the squared-ReLU MLP); the flags and their JSON;
   refusals: an unknown optimizer, bad knobs, the other optimizer's checkpoint, ZeRO-1 */
static void test_muon_flags_resume(void)
{
    trn_config c, c2;
    trn *t = NULL, *u = NULL;
    trn_parallel p;
    char err[512], js[16384], path[400];
    char *argv[] = {"x", "--optimizer", "muon", "--muon-momentum", "0.9", "--muon-ns-steps", "4", "--optimizer", "sgd",
                    "--muon-ns-steps", "0", "--muon-momentum", "1"};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    micro(&c);
    CHECK_INT_EQ(c.optimizer, TRN_OPT_ADAMW);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "optimizer") == NULL && strstr(js, "muon") == NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 1, err, sizeof err), 2);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 3, err, sizeof err), 2);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 5, err, sizeof err), 2);
    CHECK_INT_EQ(c.optimizer, TRN_OPT_MUON);
    CHECK(c.muon_momentum == 0.9f && c.muon_ns_steps == 4);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "\"optimizer\":\"muon\"") && strstr(js, "\"muon-momentum\":0.899999976") &&
          strstr(js, "\"muon-ns-steps\":4"));
    err[0] = 0;
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 7, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--optimizer") && strstr(err, "'sgd'") && strstr(err, "adamw|muon"));
    c2 = c;
    CHECK_INT_EQ(trn_parse_flag(&c2, argc, argv, 9, err, sizeof err), 2);
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--muon-ns-steps") != NULL);
    c2 = c;
    CHECK_INT_EQ(trn_parse_flag(&c2, argc, argv, 11, err, sizeof err), 2);
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--muon-momentum") != NULL);
    c2 = c;
    c2.optimizer = 2;
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--optimizer") != NULL);
    /* determinism and bit-exact resume */
    muon_micro(&c);
    check_resume(&c, "muon_recipe");
    muon_micro(&c);
    c.model.attn = MDL_ATTN_POLAR;
    c.model.memory = MDL_MEM_GDELTA;
    c.model.prior = MDL_PRIOR_NONE;
    c.model.ffn = MDL_FFN_RELU2;
    c.model.norm = MDL_NORM_RMS;
    c.model.res_gate = c.model.value_gate = 0;
    c.controller = TRN_CTRL_NONE;
    c.cg = 0;
    c.lr_flat_frac = 0.3f; /* seed 002's cosine with a 70 % cooldown */
    c.lr_floor_frac = 0.0f;
    check_resume(&c, "muon_polar_gdelta");
    /* the other optimizer's checkpoint is refused, both ways, naming --optimizer */
    snprintf(path, sizeof path, "%s/muon.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 2), TRN_OK);
    CHECK_INT_EQ(trn_save(t, path, err, sizeof err), TRN_OK);
    c2 = c;
    c2.optimizer = TRN_OPT_ADAMW;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--optimizer muon") != NULL);
        CHECK_INT_EQ(run_steps(u, 2), TRN_OK);
        CHECK_INT_EQ(trn_save(u, path, err, sizeof err), TRN_OK);
        err[0] = 0;
        CHECK_INT_EQ(trn_load(t, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--optimizer adamw") != NULL);
        trn_destroy(u);
        u = NULL;
    }
    /* ZeRO-1 shards elementwise moments: refused with Muon */
    memset(&p, 0, sizeof p);
    p.rank = 0;
    p.size = 2;
    p.accum = 1;
    p.zero = 1;
    p.allreduce_f32 = muon_stub_f32;
    p.allreduce_f64 = muon_stub_f64;
    p.bcast = muon_stub_bcast;
    p.any = muon_stub_any;
    p.allgather_f32 = muon_stub_f32;
    err[0] = 0;
    CHECK_INT_EQ(trn_set_parallel(t, &p, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "ZeRO-1") && strstr(err, "--optimizer muon"));
    trn_destroy(t);
    remove(path);
}

/* issue 43 items 3, 4: --qk-norm on|off and --polar-gate head|channel: parsed and refused by
   name, absent from the configuration JSON at their defaults (older checkpoints, which
   lack them, load as the model they were: q/k normed, gate per head), present otherwise
   and read back by trn_parse_flag as the programs' ex_config_from_ckpt does; a bit-exact
   resume of polar + memory with both changed (the biases in the checkpoint); a checkpoint
   of the other setting refused naming the flag; --canon-k (item 2) likewise */
static void test_polar_qknorm_gate_flags_resume(void)
{
    trn_config c, c2;
    trn *t = NULL, *u = NULL;
    char err[512], js[16384], path[400];
    char *argv[] = {"x", "--qk-norm", "off", "--polar-gate", "channel", "--qk-norm", "no", "--polar-gate", "chan"};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    micro(&c);
    CHECK_INT_EQ(c.model.polar_qk_norm, 1);
    CHECK_INT_EQ(c.model.polar_gate, MDL_POLAR_GATE_HEAD);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "qk-norm") == NULL && strstr(js, "polar-gate") == NULL);
    CHECK_INT_EQ(trn__json(&c, js, sizeof js, 1), TRN_OK);
    CHECK(strstr(js, "qk-norm") == NULL && strstr(js, "polar-gate") == NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 1, err, sizeof err), 2);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 3, err, sizeof err), 2);
    CHECK_INT_EQ(c.model.polar_qk_norm, 0);
    CHECK_INT_EQ(c.model.polar_gate, MDL_POLAR_GATE_CHANNEL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 5, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--qk-norm") != NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 7, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--polar-gate") != NULL);
    CHECK_INT_EQ(c.model.polar_qk_norm, 0);
    CHECK_INT_EQ(c.model.polar_gate, MDL_POLAR_GATE_CHANNEL);
    CHECK_INT_EQ(trn__json(&c, js, sizeof js, 1), TRN_OK);
    CHECK(strstr(js, "\"qk-norm\":\"off\"") != NULL);
    CHECK(strstr(js, "\"polar-gate\":\"channel\"") != NULL);
    { /* read back from the JSON's values, as ckptcfg.h does */
        char *a2[] = {"x", "--qk-norm", "off", "--polar-gate", "channel"};
        micro(&c2);
        CHECK_INT_EQ(trn_parse_flag(&c2, 5, a2, 1, err, sizeof err), 2);
        CHECK_INT_EQ(trn_parse_flag(&c2, 5, a2, 3, err, sizeof err), 2);
        CHECK(c2.model.polar_qk_norm == c.model.polar_qk_norm && c2.model.polar_gate == c.model.polar_gate);
    }
    c.model.attn = MDL_ATTN_POLAR;
    c.model.memory = MDL_MEM_GDELTA;
    c.model.prior = MDL_PRIOR_NONE;
    c.model.ffn = MDL_FFN_GELU;
    c.model.res_gate = c.model.value_gate = 0;
    c.model.polar_kv_heads = 1;
    c.controller = TRN_CTRL_NONE;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    check_resume(&c, "polar_qk_gate");
    { /* issue 43 item 2: --canon-k, in the JSON only when set; a bit-exact resume with it */
        char *a3[] = {"x", "--canon-k", "4"};
        CHECK_INT_EQ(trn__json(&c, js, sizeof js, 1), TRN_OK);
        CHECK(strstr(js, "canon-k") == NULL);
        c2 = c;
        CHECK_INT_EQ(trn_parse_flag(&c2, 3, a3, 1, err, sizeof err), 2);
        CHECK_INT_EQ(c2.model.polar_canon_k, 4);
        CHECK_INT_EQ(trn__json(&c2, js, sizeof js, 1), TRN_OK);
        CHECK(strstr(js, "\"canon-k\":4") != NULL);
        check_resume(&c2, "polar_canon");
    }
    /* the other gate, or the other norm: refused naming the flag */
    snprintf(path, sizeof path, "%s/polar_qk_gate.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 2), TRN_OK);
    CHECK_INT_EQ(trn_save(t, path, err, sizeof err), TRN_OK);
    c2 = c;
    c2.model.polar_gate = MDL_POLAR_GATE_HEAD;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "polar-gate") != NULL);
        trn_destroy(u);
        u = NULL;
    }
    c2 = c;
    c2.model.polar_qk_norm = 1;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "qk-norm") != NULL);
        trn_destroy(u);
        u = NULL;
    }
    CHECK_INT_EQ(trn_load(t, path, err, sizeof err), TRN_OK);
    trn_destroy(t);
    remove(path);
}

/* issue 43 item 5: --mem-qkv own|shared: parsed and refused by name, absent from the
   configuration JSON at its default (older checkpoints, which lack it, load as the model
   they were: the memory's own projection), present otherwise and read back by
   trn_parse_flag; a bit-exact resume of polar + memory on the attention's q/k/v (GQA,
   Canon); a checkpoint of the other setting refused naming the flag, both ways */
static void test_mem_qkv_flag_resume(void)
{
    trn_config c, c2;
    trn *t = NULL, *u = NULL;
    char err[512], js[16384], path[400];
    char *argv[] = {"x", "--mem-qkv", "shared", "--mem-qkv", "both"};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    micro(&c);
    CHECK_INT_EQ(c.model.mem_qkv, MDL_MEMQKV_OWN);
    c.model.attn = MDL_ATTN_POLAR;
    c.model.memory = MDL_MEM_GDELTA;
    c.model.prior = MDL_PRIOR_NONE;
    c.model.ffn = MDL_FFN_GELU;
    c.model.res_gate = c.model.value_gate = 0;
    c.model.polar_kv_heads = 1;
    c.model.polar_canon_k = 2;
    c.controller = TRN_CTRL_NONE;
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "mem-qkv") == NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 1, err, sizeof err), 2);
    CHECK_INT_EQ(c.model.mem_qkv, MDL_MEMQKV_SHARED);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 3, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--mem-qkv") != NULL);
    CHECK_INT_EQ(c.model.mem_qkv, MDL_MEMQKV_SHARED);
    CHECK_INT_EQ(trn__json(&c, js, sizeof js, 1), TRN_OK);
    CHECK(strstr(js, "\"mem-qkv\":\"shared\"") != NULL);
    { /* read back from the JSON's value */
        char *a2[] = {"x", "--mem-qkv", "shared"};
        micro(&c2);
        CHECK_INT_EQ(trn_parse_flag(&c2, 3, a2, 1, err, sizeof err), 2);
        CHECK_INT_EQ(c2.model.mem_qkv, MDL_MEMQKV_SHARED);
    }
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    check_resume(&c, "mem_qkv_shared");
    /* softmax attention with it: refused, naming it */
    c2 = c;
    c2.model.attn = MDL_ATTN_SOFTMAX;
    c2.model.polar_canon_k = 0;
    c2.model.polar_kv_heads = 0;
    err[0] = 0;
    CHECK(trn_config_validate(&c2, err, sizeof err) != TRN_OK);
    CHECK(strstr(err, "mem_qkv") != NULL);
    /* a checkpoint of the other setting: refused naming the flag, both ways */
    snprintf(path, sizeof path, "%s/mem_qkv.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 2), TRN_OK);
    CHECK_INT_EQ(trn_save(t, path, err, sizeof err), TRN_OK);
    c2 = c;
    c2.model.mem_qkv = MDL_MEMQKV_OWN;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "mem-qkv") != NULL);
        CHECK_INT_EQ(trn_save(u, path, err, sizeof err), TRN_OK); /* an own-projection checkpoint */
        err[0] = 0;
        CHECK_INT_EQ(trn_load(t, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "mem-qkv") != NULL);
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_OK);
        trn_destroy(u);
    }
    trn_destroy(t);
    remove(path);
}

/* issue 43 item 7: --sigreg / --sigreg-alpha: flags, validation (the flag named), the
   configuration JSON (absent when off), the metrics' train lines ("sigreg" only when on),
   the term changes the run, a bit-exact resume in every mode, and checkpoints of another
   --sigreg refused naming it */
static void test_sigreg_flags_resume(void)
{
    trn_config c, c2;
    trn *t = NULL, *u = NULL;
    trn_step_info in;
    char err[512], js[16384], path[400], mpath[400], line[4096];
    char *argv[] = {"x", "--sigreg", "strong", "--sigreg-alpha", "0.05", "--sigreg", "baseline", "--sigreg-alpha", "1"};
    int argc = (int)(sizeof argv / sizeof argv[0]), mode, lines = 0, with = 0;
    FILE *f;
    micro(&c);
    CHECK_INT_EQ(c.sigreg, SGR_OFF);
    CHECK(c.sigreg_alpha == 0.01f);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "sigreg") == NULL);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 1, err, sizeof err), 2);
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 3, err, sizeof err), 2);
    CHECK_INT_EQ(c.sigreg, SGR_STRONG);
    CHECK(c.sigreg_alpha == 0.05f);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "\"sigreg\":\"strong\"") && strstr(js, "\"sigreg-alpha\":0.05"));
    err[0] = 0;
    CHECK_INT_EQ(trn_parse_flag(&c, argc, argv, 5, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--sigreg") && strstr(err, "'baseline'"));
    c2 = c;
    CHECK_INT_EQ(trn_parse_flag(&c2, argc, argv, 7, err, sizeof err), 2);
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--sigreg-alpha") != NULL);
    c2.sigreg_alpha = 0.0f;
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);
    c2.sigreg = SGR_OFF; /* off: the weight is not looked at */
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_OK);
    c2 = c;
    c2.sigreg = 7;
    CHECK_INT_EQ(trn_config_validate(&c2, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--sigreg") != NULL);
    /* the metrics: "sigreg" on every train line when on, on none when off; the term moves
       the weights */
    snprintf(mpath, sizeof mpath, "%s/sigreg.jsonl", g_dir);
    for (mode = SGR_OFF; mode <= SGR_WEAK; mode++) {
        micro(&c);
        c.sigreg = mode;
        f = fopen(mpath, "w");
        CHECK(f != NULL);
        CHECK_INT_EQ(trn_create(mode ? &u : &t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
        if (!f || !(mode ? u : t)) {
            if (f) fclose(f);
            trn_destroy(t);
            trn_destroy(u);
            return;
        }
        trn_set_metrics(mode ? u : t, f);
        memset(&in, 0, sizeof in);
        CHECK_INT_EQ(trn_step(mode ? u : t, &in), TRN_OK);
        CHECK_INT_EQ(trn_step(mode ? u : t, &in), TRN_OK);
        CHECK(mode ? in.sigreg > 0.0 && isfinite(in.sigreg) : in.sigreg == 0.0);
        trn_set_metrics(mode ? u : t, NULL);
        fclose(f);
        f = fopen(mpath, "r");
        lines = with = 0;
        while (f && fgets(line, sizeof line, f)) {
            if (!strstr(line, "\"type\":\"train\"")) continue;
            lines++;
            if (strstr(line, "\"sigreg\":")) with++;
        }
        if (f) fclose(f);
        CHECK(lines >= 2);
        CHECK_INT_EQ(with, mode ? lines : 0);
    }
    if (t && u) {
        size_t n = mdl_num_params(trn_model(t));
        CHECK(n == mdl_num_params(trn_model(u)));
        CHECK(memcmp(mdl_params(trn_model(t)), mdl_params(trn_model(u)), n * sizeof(float)) != 0);
    }
    trn_destroy(t);
    trn_destroy(u);
    t = u = NULL;
    remove(mpath);
    /* bit-exact resume, every mode (the sketches come from the seed and the step) */
    for (mode = SGR_WEAK; mode <= SGR_ZIPFIAN; mode++) {
        char tag[32];
        micro(&c);
        c.sigreg = mode;
        snprintf(tag, sizeof tag, "sigreg_%s", sgr_mode_name(mode));
        check_resume(&c, tag);
    }
    /* checkpoints of another --sigreg are refused, naming it */
    micro(&c);
    c.sigreg = SGR_WEAK;
    snprintf(path, sizeof path, "%s/sigreg.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (!t) return;
    CHECK_INT_EQ(run_steps(t, 2), TRN_OK);
    CHECK_INT_EQ(trn_save(t, path, err, sizeof err), TRN_OK);
    for (mode = SGR_OFF; mode <= SGR_STRONG; mode += 2) {
        c2 = c;
        c2.sigreg = mode;
        CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
        if (!u) continue;
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, mode ? "--sigreg weak, this run has --sigreg strong" : "--sigreg on, this run has --sigreg off"));
        if (!mode) { /* and the other way */
            CHECK_INT_EQ(run_steps(u, 1), TRN_OK);
            CHECK_INT_EQ(trn_save(u, path, err, sizeof err), TRN_OK);
            err[0] = 0;
            CHECK_INT_EQ(trn_load(t, path, err, sizeof err), TRN_EMISMATCH);
            CHECK(strstr(err, "--sigreg off, this run has --sigreg weak") != NULL);
            CHECK_INT_EQ(trn_save(t, path, err, sizeof err), TRN_OK);
        }
        trn_destroy(u);
        u = NULL;
    }
    c2 = c;
    c2.sigreg_alpha = 0.02f;
    CHECK_INT_EQ(trn_create(&u, &c2, g_ids, 3200, g_ids + 3200, NTOK - 3200, err, sizeof err), TRN_OK);
    if (u) {
        err[0] = 0;
        CHECK_INT_EQ(trn_load(u, path, err, sizeof err), TRN_EMISMATCH);
        CHECK(strstr(err, "--sigreg-alpha") != NULL);
        trn_destroy(u);
    }
    trn_destroy(t);
    remove(path);
    /* 2 ranks x accum 1 == 1 process x accum 2, bit for bit: each micro-batch's sketches
       are keyed by its global index */
    micro(&c);
    c.batch = 4;
    c.sigreg = SGR_STRONG;
    check_dp_equals_accum(&c, "sigreg strong");
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    make_stream();
    tmpdir_init();
    TEST_RUN(test_flags_presets);
    TEST_RUN(test_flags_ffn_table);
    TEST_RUN(test_eval_protocol);
    TEST_RUN(test_bad_checkpoints);
    TEST_RUN(test_resume_recipe_guardian);
    TEST_RUN(test_resume_gac_scripted);
    TEST_RUN(test_resume_ceas_softmax);
    TEST_RUN(test_resume_ceas_gating_prior);
    TEST_RUN(test_resume_polar_gdelta);
    TEST_RUN(test_polar_qknorm_gate_flags_resume);
    TEST_RUN(test_mem_qkv_flag_resume);
    TEST_RUN(test_learns);
    TEST_RUN(test_eval_batch_invariant);
    TEST_RUN(test_gac_preclip);
    TEST_RUN(test_refused_at_create);
    TEST_RUN(test_crc_required);
    TEST_RUN(test_state_mutants);
    TEST_RUN(test_load_eval_only);
    TEST_RUN(test_stop_flag);
    TEST_RUN(test_divergence);
    TEST_RUN(test_eval_progress);
    TEST_RUN(test_layer_pattern_flags_resume);
    TEST_RUN(test_preset_names);
    TEST_RUN(test_fixed_prior_flags_resume);
    TEST_RUN(test_lr_warmup);
    TEST_RUN(test_parallel_refusals);
    TEST_RUN(test_dp_equals_accum);
    TEST_RUN(test_muon_newton_schulz);
    TEST_RUN(test_muon_step);
    TEST_RUN(test_muon_param_split);
    TEST_RUN(test_muon_flags_resume);
    TEST_RUN(test_sigreg_flags_resume);
    rmdir(g_dir);
    return TEST_END();
}
