/* test_maxent_pi.c - seed 004 section 6 (C)'s PI controller on an activation parameter
   (issue 46 item 2; wt2_train --maxent-pi, maxent.h (C)): the output-entropy measure and
   its direction in the gain, the model's GELU gain a_l (bit-identity at a_l = 1, a whole-
   model finite-difference check at a_l != 1, the decoding path), the controller moving
   a_l into the band on a tiny model, the checkpoint round trip and bit-exact resume, and
   the refusals. (The layer's own finite-difference check with a gain is test_layers'
   test_mlp_gain.) Links the examples' objects (Makefile TEST_OBJS_test_maxent_pi). */
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
    tt_seed(7);
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
    c->batch = 4;
    c->steps = 40;
    c->epoch_steps = 40;
    c->eval_every = 1000;
    c->eval_max_chunks = 2;
    c->ema = 0;
    c->maxent_pi = 1;
    c->maxent_pi_every = 1;
    c->seed = 3;
}

static float gelu_ref(float x) /* the tanh approximation, as tensor.h */
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

/* H(gelu(a u)) on N(0, s^2) falls monotonically with a s (the controller's direction -1);
   the measure's range: a uniform sample near 1, a constant one 0; its refusals */
static void test_entropy_direction(void)
{
    enum { N = 200000 };
    static const float as[] = {0.25f, 0.5f, 1.0f, 2.0f, 4.0f, 8.0f, 16.0f, 64.0f};
    float *u = (float *)malloc(sizeof(float) * N), *v = (float *)malloc(sizeof(float) * N), H, prev = 2.0f;
    char err[256];
    size_t i;
    int k;
    CHECK(u && v);
    if (!u || !v) { free(u); free(v); return; }
    tt_seed(11);
    for (i = 0; i < N; i++) u[i] = (float)(0.2 * tt_normal());
    for (k = 0; k < (int)(sizeof as / sizeof as[0]); k++) {
        for (i = 0; i < N; i++) v[i] = gelu_ref(as[k] * u[i]);
        CHECK_INT_EQ(mx_act_entropy(v, N, MX_PI_BINS, MX_PI_TAIL, &H, err, sizeof err), TRN_OK);
        CHECK(H < prev);
        fprintf(stderr, "  a s = %g: H %.3f\n", 0.2 * as[k], (double)H);
        if (as[k] == 0.25f) CHECK(H > 0.9f);  /* nearly linear: u's Gaussian shape */
        if (as[k] == 64.0f) CHECK(H < 0.68f); /* ReLU-like: half the mass near 0 */
        prev = H;
    }
    for (i = 0; i < N; i++) v[i] = (float)tt_uniform();
    CHECK_INT_EQ(mx_act_entropy(v, N, 64, 0.0f, &H, err, sizeof err), TRN_OK);
    CHECK(H > 0.99f && H <= 1.0f);
    for (i = 0; i < N; i++) v[i] = 0.25f;
    CHECK_INT_EQ(mx_act_entropy(v, N, 64, MX_PI_TAIL, &H, err, sizeof err), TRN_OK);
    CHECK(H == 0.0f);
    CHECK_INT_EQ(mx_act_entropy(NULL, N, 64, 0.0f, &H, err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(mx_act_entropy(v, 0, 64, 0.0f, &H, err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(mx_act_entropy(v, N, 1, 0.0f, &H, err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(mx_act_entropy(v, N, 64, 0.5f, &H, err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(mx_act_entropy(v, N, 64, NAN, &H, err, sizeof err), TRN_EINVAL);
    v[0] = NAN;
    CHECK_INT_EQ(mx_act_entropy(v, N, 64, 0.0f, &H, err, sizeof err), TRN_EINVAL);
    free(u);
    free(v);
}

static void model_batch(int *inp, int *tgt, int B, int T, int off)
{
    int b, t;
    for (b = 0; b < B; b++)
        for (t = 0; t < T; t++) {
            inp[b * T + t] = g_ids[off + b * 37 + t];
            tgt[b * T + t] = g_ids[off + b * 37 + t + 1];
        }
}

static mdl_config small_model(void)
{
    mdl_config c = mdl_config_default();
    c.vocab = 37;
    c.d_model = 16;
    c.n_layers = 2;
    c.n_heads = 2;
    c.max_T = 8;
    c.d_ff_mult = 2;
    c.init_std = 0.3f; /* pre-activations of order 1: the gain bends the GELU visibly */
    return c;
}

/* gains exactly 1 (set explicitly) give the bits of a model that never heard of gains:
   loss and every gradient; a gain != 1 changes them */
static void test_gain_one_bit_identical(void)
{
    mdl_config c = small_model();
    mdl_model *a = NULL, *b = NULL;
    int inp[2 * 8], tgt[2 * 8], bad = 0;
    float ones[2] = {1.0f, 1.0f}, g2[2] = {1.0f, 1.5f}, back[2];
    mdl_opts o = mdl_opts_default();
    mdl_stats sa, sb;
    size_t n, i;
    char err[256];
    o.train = 1;
    model_batch(inp, tgt, 2, 8, 0);
    CHECK_INT_EQ(mdl_create(&a, &c, 5, err, sizeof err), MDL_OK);
    CHECK_INT_EQ(mdl_create(&b, &c, 5, err, sizeof err), MDL_OK);
    if (!a || !b) { mdl_destroy(a); mdl_destroy(b); return; }
    CHECK_INT_EQ(mdl_act_gain_set(b, g2, 2), MDL_OK);
    CHECK_INT_EQ(mdl_act_gain_set(b, ones, 2), MDL_OK);
    CHECK_INT_EQ(mdl_act_gain_get(b, back, 2), MDL_OK);
    CHECK(back[0] == 1.0f && back[1] == 1.0f);
    n = mdl_num_params(a);
    mdl_zero_grad(a);
    mdl_zero_grad(b);
    CHECK_INT_EQ(mdl_forward(a, inp, tgt, 2, 8, &o, &sa), MDL_OK);
    CHECK_INT_EQ(mdl_backward(a), MDL_OK);
    CHECK_INT_EQ(mdl_forward(b, inp, tgt, 2, 8, &o, &sb), MDL_OK);
    CHECK_INT_EQ(mdl_backward(b), MDL_OK);
    CHECK(memcmp(&sa.loss, &sb.loss, sizeof sa.loss) == 0);
    for (i = 0; i < n; i++) bad += memcmp(&mdl_grads(a)[i], &mdl_grads(b)[i], sizeof(float)) != 0;
    CHECK_INT_EQ(bad, 0);
    /* a real gain moves the loss and the gradients of the layer's fc.weight */
    CHECK_INT_EQ(mdl_act_gain_set(b, g2, 2), MDL_OK);
    mdl_zero_grad(b);
    CHECK_INT_EQ(mdl_forward(b, inp, tgt, 2, 8, &o, &sb), MDL_OK);
    CHECK_INT_EQ(mdl_backward(b), MDL_OK);
    CHECK(sa.loss != sb.loss);
    {
        const mdl_tensor *e = mdl_find_tensor(b, "blocks.1.mlp.fc.weight");
        CHECK(e != NULL);
        if (e) {
            for (i = 0, bad = 0; i < e->numel; i++) bad += mdl_grads(a)[e->offset + i] != mdl_grads(b)[e->offset + i];
            CHECK(bad > 0);
        }
    }
    mdl_destroy(a);
    mdl_destroy(b);
}

/* the whole model's gradient with gains (1.6, 0.7) against central differences of the
   loss in double: every element of both layers' fc.weight, fc.bias, proj.weight and the
   embedding rows the batch uses (the gain sits between fc and proj, and the residual
   stream carries the input gradient back to wte); |g - fd| <= 2e-3 max(|fd|, 0.05) + 5e-4 */
static void test_model_fd_with_gain(void)
{
    mdl_config c = small_model();
    mdl_model *m = NULL;
    int inp[2 * 8], tgt[2 * 8], k, total = 0, bad = 0;
    float gains[2] = {1.6f, 0.7f};
    mdl_opts o = mdl_opts_default();
    mdl_stats st;
    char err[256];
    static const char *names[] = {"blocks.0.mlp.fc.weight", "blocks.0.mlp.fc.bias", "blocks.0.mlp.proj.weight",
                                  "blocks.1.mlp.fc.weight", "blocks.1.mlp.fc.bias", "wte"};
    float *g;
    c.d_model = 8;
    c.n_heads = 2;
    o.train = 1;
    model_batch(inp, tgt, 2, 8, 100);
    CHECK_INT_EQ(mdl_create(&m, &c, 9, err, sizeof err), MDL_OK);
    if (!m) return;
    CHECK_INT_EQ(mdl_act_gain_set(m, gains, 2), MDL_OK);
    mdl_zero_grad(m);
    CHECK_INT_EQ(mdl_forward(m, inp, tgt, 2, 8, &o, &st), MDL_OK);
    CHECK_INT_EQ(mdl_backward(m), MDL_OK);
    g = (float *)malloc(sizeof(float) * mdl_num_params(m));
    if (!g) { mdl_destroy(m); return; }
    memcpy(g, mdl_grads(m), sizeof(float) * mdl_num_params(m));
    for (k = 0; k < (int)(sizeof names / sizeof names[0]); k++) {
        const mdl_tensor *e = mdl_find_tensor(m, names[k]);
        size_t i, lim;
        CHECK(e != NULL);
        if (!e) continue;
        lim = !strcmp(names[k], "wte") ? (size_t)8 * 37 : e->numel; /* all of it (37 x 8) */
        for (i = 0; i < lim; i++) {
            float *p = mdl_params(m) + e->offset + i, keep = *p;
            const float h = 1e-2f;
            double lp, lm, fd, an = g[e->offset + i];
            mdl_stats s2;
            *p = keep + h;
            mdl_forward(m, inp, tgt, 2, 8, &o, &s2);
            lp = s2.loss;
            *p = keep - h;
            mdl_forward(m, inp, tgt, 2, 8, &o, &s2);
            lm = s2.loss;
            *p = keep;
            fd = (lp - lm) / (2.0 * (double)h);
            total++;
            if (fabs(an - fd) > 2e-3 * fmax(fabs(fd), 0.05) + 5e-4) {
                if (bad < 8) fprintf(stderr, "  %s[%zu]: analytic %.7g fd %.7g\n", names[k], i, an, fd);
                bad++;
            }
        }
    }
    CHECK(total > 500);
    CHECK_INT_EQ(bad, 0);
    free(g);
    mdl_destroy(m);
}

/* decoding runs the gains too: prefill logits agree with the full forward's */
static void test_decode_with_gain(void)
{
    mdl_config c = small_model();
    mdl_model *m = NULL;
    int inp[8], tgt[8];
    float gains[2] = {2.5f, 0.5f}, *dl;
    const float *fl;
    mdl_opts o = mdl_opts_default();
    char err[256];
    c.init_std = 0.1f;
    model_batch(inp, tgt, 1, 8, 200);
    CHECK_INT_EQ(mdl_create(&m, &c, 4, err, sizeof err), MDL_OK);
    if (!m) return;
    CHECK_INT_EQ(mdl_act_gain_set(m, gains, 2), MDL_OK);
    CHECK_INT_EQ(mdl_forward(m, inp, NULL, 1, 8, &o, NULL), MDL_OK);
    fl = mdl_logits(m);
    dl = (float *)malloc(sizeof(float) * 8 * 37);
    CHECK(fl != NULL && dl != NULL);
    if (fl && dl) {
        CHECK_INT_EQ(mdl_decode_init(m, 1, 8, NULL), MDL_OK);
        CHECK_INT_EQ(mdl_decode_prefill(m, 0, inp, 8, dl, 1), MDL_OK);
        CHECK_ALL_CLOSE(dl, fl, 8 * 37, 1e-4, 1e-5);
        {
            /* and they differ from the plain model's */
            float ones[2] = {1.0f, 1.0f};
            float *d1 = (float *)malloc(sizeof(float) * 8 * 37);
            int i, diff = 0;
            CHECK_INT_EQ(mdl_act_gain_set(m, ones, 2), MDL_OK);
            CHECK_INT_EQ(mdl_decode_reset(m, 0), MDL_OK);
            if (d1) {
                CHECK_INT_EQ(mdl_decode_prefill(m, 0, inp, 8, d1, 1), MDL_OK);
                for (i = 0; i < 8 * 37; i++) diff += fabsf(d1[i] - dl[i]) > 1e-4f;
                CHECK(diff > 0);
            }
            free(d1);
        }
    }
    free(dl);
    mdl_destroy(m);
}

/* The controller on a tiny trainer: at a = 1 the activations are nearly linear (H above
   the band 0.70..0.85), every step one PI update; within 10 steps every layer's H is in
   the band and its gain > 1 (direction -1: raising a lowers H) */
static void test_controller_into_band(void)
{
    trn_config c;
    trn *t = NULL;
    char err[512];
    float H[MDL_MAX_LAYERS], gain[MDL_MAX_LAYERS], I0[MDL_MAX_LAYERS] = {0}, buf0[1];
    float *buf;
    size_t cap;
    ceas_pi_config pc;
    int s, l, inband_at = -1;
    base(&c);
    (void)buf0;
    pc = mx_pi_config(c.maxent_pi_band[0], c.maxent_pi_band[1], c.maxent_pi_kp, c.maxent_pi_ki);
    CHECK_INT_EQ(pc.direction, -1);
    CHECK_INT_EQ(trn_create(&t, &c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    if (!t) { fprintf(stderr, "%s\n", err); return; }
    cap = (size_t)c.batch * c.context * 64;
    buf = (float *)malloc(sizeof(float) * cap);
    if (!buf) { trn_destroy(t); return; }
    /* the first forward measures the untouched model (measurement only: update 0) */
    {
        trn_config c0 = c;
        trn *t0 = NULL;
        c0.maxent_pi_every = 1000000;
        CHECK_INT_EQ(trn_create(&t0, &c0, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
        if (t0) {
            CHECK_INT_EQ(trn_step(t0, NULL), TRN_OK);
            CHECK_INT_EQ(mx_pi_update(trn_model(t0), &pc, 0, I0, H, gain, buf, cap, err, sizeof err), TRN_OK);
            for (l = 0; l < 2; l++) {
                CHECK(H[l] > c.maxent_pi_band[1]);
                CHECK(gain[l] == 1.0f);
                CHECK(I0[l] == 0.0f);
            }
            fprintf(stderr, "  a = 1: H = %.3f %.3f\n", (double)H[0], (double)H[1]);
            trn_destroy(t0);
        }
    }
    for (s = 1; s <= 10; s++) {
        int in = 1;
        CHECK_INT_EQ(trn_step(t, NULL), TRN_OK);
        /* the step measured its forward's activations and moved the gains; measure the
           same forward again (update 0) to read what the controller saw */
        CHECK_INT_EQ(mx_pi_update(trn_model(t), &pc, 0, I0, H, gain, buf, cap, err, sizeof err), TRN_OK);
        for (l = 0; l < 2; l++) in = in && H[l] >= c.maxent_pi_band[0] && H[l] <= c.maxent_pi_band[1];
        fprintf(stderr, "  step %d: H %.3f %.3f, gain now %.3f %.3f\n", s, (double)H[0], (double)H[1], (double)gain[0],
                (double)gain[1]);
        if (in && inband_at < 0) inband_at = s;
    }
    CHECK(inband_at > 0 && inband_at <= 10);
    CHECK_INT_EQ(mdl_act_gain_get(trn_model(t), gain, 2), MDL_OK);
    CHECK(gain[0] > 1.0f && gain[1] > 1.0f);
    free(buf);
    trn_destroy(t);
}

/* the gains and the controller's state go into the checkpoint; N steps, save, resume, K
   more give the bits of N + K in one go (weights and gains) */
static void test_checkpoint_round_trip(void)
{
    trn_config c;
    trn *a = NULL, *b = NULL, *r = NULL;
    char err[600], path[400];
    float ga[MDL_MAX_LAYERS], gb[MDL_MAX_LAYERS], gr[MDL_MAX_LAYERS];
    int s, rc;
    base(&c);
    c.maxent_pi_every = 2;
    snprintf(path, sizeof path, "%s/pi.safetensors", g_dir);
    CHECK_INT_EQ(trn_create(&a, &c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&b, &c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(trn_create(&r, &c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
    if (!a || !b || !r) { trn_destroy(a); trn_destroy(b); trn_destroy(r); return; }
    for (s = 0; s < 5; s++) CHECK_INT_EQ(trn_step(a, NULL), TRN_OK);
    rc = trn_save(a, path, err, sizeof err);
    if (rc != TRN_OK) fprintf(stderr, "%s\n", err);
    CHECK_INT_EQ(rc, TRN_OK);
    rc = trn_load(r, path, err, sizeof err);
    if (rc != TRN_OK) fprintf(stderr, "%s\n", err);
    CHECK_INT_EQ(rc, TRN_OK);
    CHECK_INT_EQ(mdl_act_gain_get(trn_model(a), ga, 2), MDL_OK);
    CHECK_INT_EQ(mdl_act_gain_get(trn_model(r), gr, 2), MDL_OK);
    CHECK(memcmp(ga, gr, 2 * sizeof(float)) == 0);
    CHECK(ga[0] != 1.0f && ga[1] != 1.0f); /* the controller moved them (steps 2 and 4) */
    for (s = 0; s < 5; s++) CHECK_INT_EQ(trn_step(a, NULL), TRN_OK);
    for (s = 0; s < 5; s++) CHECK_INT_EQ(trn_step(r, NULL), TRN_OK);
    for (s = 0; s < 10; s++) CHECK_INT_EQ(trn_step(b, NULL), TRN_OK);
    CHECK_INT_EQ(mdl_act_gain_get(trn_model(a), ga, 2), MDL_OK);
    CHECK_INT_EQ(mdl_act_gain_get(trn_model(b), gb, 2), MDL_OK);
    CHECK_INT_EQ(mdl_act_gain_get(trn_model(r), gr, 2), MDL_OK);
    CHECK(memcmp(ga, gb, 2 * sizeof(float)) == 0);
    CHECK(memcmp(gr, gb, 2 * sizeof(float)) == 0);
    CHECK(memcmp(mdl_params(trn_model(r)), mdl_params(trn_model(b)), mdl_num_params(trn_model(b)) * sizeof(float)) == 0);
    CHECK(memcmp(mdl_params(trn_model(a)), mdl_params(trn_model(b)), mdl_num_params(trn_model(b)) * sizeof(float)) == 0);
    trn_destroy(r);
    r = NULL;
    /* a run without --maxent-pi does not load it (the arch records the option), nor the reverse */
    {
        trn_config p = c;
        trn *x = NULL;
        char p2[400];
        p.maxent_pi = 0;
        CHECK_INT_EQ(trn_create(&x, &p, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
        if (x) {
            CHECK_INT_EQ(trn_load(x, path, err, sizeof err), TRN_EMISMATCH);
            CHECK(strstr(err, "maxent-pi") != NULL);
            snprintf(p2, sizeof p2, "%s/plain.safetensors", g_dir);
            CHECK_INT_EQ(trn_save(x, p2, err, sizeof err), TRN_OK);
            trn_destroy(x);
            CHECK_INT_EQ(trn_create(&x, &c, g_ids, NTRAIN, g_ids + NTRAIN, NTOK - NTRAIN, err, sizeof err), TRN_OK);
            if (x) {
                CHECK_INT_EQ(trn_load(x, p2, err, sizeof err), TRN_EMISMATCH);
                trn_destroy(x);
            }
            unlink(p2);
        }
    }
    trn_destroy(a);
    trn_destroy(b);
    unlink(path);
}

static int parse1(trn_config *c, const char *flag, const char *val, char *err, size_t n)
{
    char *argv[3];
    argv[0] = (char *)"t";
    argv[1] = (char *)flag;
    argv[2] = (char *)val;
    return trn_parse_flag(c, val ? 3 : 2, argv, 1, err, n);
}

/* flags, the configuration JSON, and what --maxent-pi refuses */
static void test_flags_refusals(void)
{
    trn_config c;
    char err[600], js[16384];
    mdl_model *m = NULL;
    mdl_config mc = small_model();
    float g[2] = {2.0f, 2.0f}, h[64];
    size_t n = 0;
    base(&c);
    c.maxent_pi = 0;
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "maxent-pi") == NULL); /* runs without it keep their configuration */
    CHECK_INT_EQ(parse1(&c, "--maxent-pi", NULL, err, sizeof err), 1); /* bare: on */
    CHECK_INT_EQ(c.maxent_pi, 1);
    CHECK_INT_EQ(parse1(&c, "--maxent-pi-band", "0.6,0.8", err, sizeof err), 2);
    CHECK(c.maxent_pi_band[0] == 0.6f && c.maxent_pi_band[1] == 0.8f);
    CHECK_INT_EQ(trn_config_json(&c, js, sizeof js), TRN_OK);
    CHECK(strstr(js, "\"maxent-pi\":\"on\"") != NULL);
    CHECK(strstr(js, "\"maxent-pi-band\":\"0.600000024,0.800000012\"") != NULL);
    CHECK(strstr(js, "\"maxent-pi-every\":1") != NULL);
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_OK);
    CHECK_INT_EQ(parse1(&c, "--maxent-pi-band", "0.6", err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(parse1(&c, "--maxent-pi-band", "0.6,", err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(parse1(&c, "--maxent-pi-band", "0.6,0.8,0.9", err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(parse1(&c, "--maxent-pi-band", "nan,0.8", err, sizeof err), TRN_EINVAL);
    CHECK_INT_EQ(parse1(&c, "--maxent-pi=maybe", NULL, err, sizeof err), TRN_EINVAL);
    c.maxent_pi = 0;
    CHECK_INT_EQ(parse1(&c, "--maxent-pi", "off", err, sizeof err), 2);
    CHECK_INT_EQ(c.maxent_pi, 0);
    base(&c);
    c.maxent_pi_band[0] = 0.9f;
    c.maxent_pi_band[1] = 0.8f;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    c.maxent_pi_band[0] = -0.1f;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    c.maxent_pi_band[0] = 0.5f;
    c.maxent_pi_band[1] = 1.5f;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    base(&c);
    c.maxent_pi_every = 0;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    base(&c);
    c.maxent_pi_kp = -1.0f;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    base(&c);
    c.maxent_pi_ki = NAN;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    /* no gain outside the GELU MLP */
    base(&c);
    c.model.ffn = MDL_FFN_RELU2;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--ffn gelu") != NULL && strstr(err, "relu2") != NULL);
    c.model.ffn = MDL_FFN_MOE;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "moe") != NULL);
    /* the CPU trainer only */
    base(&c);
    c.device = MDL_DEVICE_CUDA;
    CHECK_INT_EQ(trn_config_validate(&c, err, sizeof err), TRN_EINVAL);
    CHECK(strstr(err, "--maxent-pi") != NULL && strstr(err, "CPU") != NULL);
    /* the model's functions */
    CHECK_INT_EQ(mdl_act_gain_supported(NULL, err, sizeof err), MDL_EINVAL);
    CHECK_INT_EQ(mdl_act_gain_supported(&mc, err, sizeof err), MDL_OK);
    CHECK_INT_EQ(mdl_act_gain_set(NULL, g, 2), MDL_EINVAL);
    CHECK_INT_EQ(mdl_create(&m, &mc, 1, err, sizeof err), MDL_OK);
    if (m) {
        int inp[8], tgt[8];
        mdl_opts o = mdl_opts_default();
        CHECK_INT_EQ(mdl_act_gain_set(m, NULL, 2), MDL_EINVAL);
        CHECK_INT_EQ(mdl_act_gain_set(m, g, 3), MDL_EINVAL);
        g[1] = 0.0f;
        CHECK_INT_EQ(mdl_act_gain_set(m, g, 2), MDL_EINVAL);
        g[1] = NAN;
        CHECK_INT_EQ(mdl_act_gain_set(m, g, 2), MDL_EINVAL);
        g[1] = 2e4f;
        CHECK_INT_EQ(mdl_act_gain_set(m, g, 2), MDL_EINVAL);
        CHECK(strstr(mdl_last_error(m), "a[1]") != NULL);
        CHECK_INT_EQ(mdl_act_gain_get(m, g, 2), MDL_OK); /* unchanged by the refusals */
        CHECK(g[0] == 1.0f && g[1] == 1.0f);
        CHECK_INT_EQ(mdl_act_gain_get(m, NULL, 2), MDL_EINVAL);
        /* activations: only after a training forward */
        CHECK_INT_EQ(mdl_ffn_act_copy(m, 0, h, 64, &n), MDL_EINVAL);
        model_batch(inp, tgt, 1, 8, 300);
        CHECK_INT_EQ(mdl_forward(m, inp, tgt, 1, 8, &o, NULL), MDL_OK); /* evaluation */
        CHECK_INT_EQ(mdl_ffn_act_copy(m, 0, h, 64, &n), MDL_EINVAL);
        o.train = 1;
        CHECK_INT_EQ(mdl_forward(m, inp, tgt, 1, 8, &o, NULL), MDL_OK);
        CHECK_INT_EQ(mdl_ffn_act_copy(m, 0, h, 64, &n), MDL_EINVAL); /* 8 x 32 floats: no room */
        CHECK_INT_EQ(mdl_ffn_act_copy(m, 2, h, 64, &n), MDL_EINVAL);
        CHECK_INT_EQ(mdl_ffn_act_copy(m, 0, NULL, 64, &n), MDL_EINVAL);
        {
            float big[8 * 32];
            CHECK_INT_EQ(mdl_ffn_act_copy(m, 1, big, 8 * 32, &n), MDL_OK);
            CHECK(n == 8 * 32);
        }
        mdl_destroy(m);
        m = NULL;
    }
    mc.ffn = MDL_FFN_RELU2;
    CHECK_INT_EQ(mdl_act_gain_supported(&mc, err, sizeof err), MDL_EINVAL);
    CHECK_INT_EQ(mdl_create(&m, &mc, 1, err, sizeof err), MDL_OK);
    if (m) {
        float one[2] = {1.0f, 1.0f}, hh[8 * 64];
        CHECK_INT_EQ(mdl_act_gain_set(m, one, 2), MDL_EINVAL);
        CHECK(strstr(mdl_last_error(m), "relu2") != NULL);
        CHECK_INT_EQ(mdl_ffn_act_copy(m, 0, hh, 8 * 64, &n), MDL_EINVAL);
        mdl_destroy(m);
    }
    /* mx_pi_update's own refusals */
    {
        ceas_pi_config pc = mx_pi_config(0.7f, 0.85f, 6.0f, 0.1f);
        float I[2] = {0, 0}, H[2], G[2], b[4];
        CHECK_INT_EQ(mx_pi_update(NULL, &pc, 1, I, H, G, b, 4, err, sizeof err), TRN_EINVAL);
        pc.h_lo = 0.9f; /* above h_hi */
        mc = small_model();
        CHECK_INT_EQ(mdl_create(&m, &mc, 1, err, sizeof err), MDL_OK);
        if (m) {
            CHECK_INT_EQ(mx_pi_update(m, &pc, 1, I, H, G, b, 4, err, sizeof err), TRN_EINVAL);
            pc.h_lo = 0.7f;
            CHECK_INT_EQ(mx_pi_update(m, &pc, 1, I, H, G, b, 4, err, sizeof err), TRN_EINVAL); /* no forward */
            CHECK(strstr(err, "training forward") != NULL);
            mdl_destroy(m);
        }
    }
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    make_stream();
    snprintf(g_dir, sizeof g_dir, "/tmp/attnkit_test_maxent_pi_%d", (int)getpid());
    mkdir(g_dir, 0777);
    TEST_RUN(test_entropy_direction);
    TEST_RUN(test_gain_one_bit_identical);
    TEST_RUN(test_model_fd_with_gain);
    TEST_RUN(test_decode_with_gain);
    TEST_RUN(test_controller_into_band);
    TEST_RUN(test_checkpoint_round_trip);
    TEST_RUN(test_flags_refusals);
    rmdir(g_dir);
    return TEST_END();
}
