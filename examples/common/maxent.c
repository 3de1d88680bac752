/* maxent.c - seed 004 section 6's MaxEnt add-on for the trainer (see maxent.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "maxent.h"
#include "ckpt.h"
#include "errf.h"
#include "layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MX__OBS_SEQS 2   /* sequences of the utility forward (the model pools sequence 0) */
#define MX__POWER_ITERS 30
#define MX__NORM_ROWS 4096
#define MX__MODEL_EPS 1e-5f /* model.c's MDL__NORM_EPS (LayerNorm and RMSNorm) */

static double mx__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *mx__pos_name(int pos)
{
    return pos == MDL_POS_ROPE ? "rope" : pos == MDL_POS_LEARNED ? "learned" : pos == MDL_POS_NONE ? "none" : "?";
}

static int mx__ceas_pos(int pos)
{
    return pos == MDL_POS_ROPE ? CEAS_POS_ROTARY : pos == MDL_POS_LEARNED ? CEAS_POS_LEARNED : CEAS_POS_ANY;
}

static void mx__add(const trn_config *base, mx_cand *cand, int *n, int d_model, int heads, int mult, int pos)
{
    mx_cand *c;
    int k;
    if (*n >= MX_MAX_CAND) return;
    for (k = 0; k < *n; k++) /* no duplicates */
        if (cand[k].model.d_model == d_model && cand[k].model.n_heads == heads && cand[k].model.d_ff_mult == mult &&
            cand[k].model.pos == pos)
            return;
    c = &cand[(*n)++];
    memset(c, 0, sizeof *c);
    c->model = base->model;
    c->model.d_model = d_model;
    c->model.n_heads = heads;
    c->model.d_ff_mult = mult;
    c->model.pos = pos;
    if (c->model.max_T < base->context) c->model.max_T = base->context;
    snprintf(c->label, sizeof c->label, "d%d h%d ff%d %s", d_model, heads, mult, mx__pos_name(pos));
    c->seconds = c->flops = c->score = c->weight = NAN;
    c->u_corridor = c->u_early = NAN;
    c->arch.n_heads = heads;
    c->arch.d_model = d_model;
    c->arch.d_k = heads > 0 ? d_model / heads : 0;
    { /* the FFN table's hidden width for the base's FFN */
        int w = lyr_ffn_width(c->model.ffn, mult, d_model);
        c->arch.d_ff = w > 0 ? w : mult * d_model;
    }
    c->arch.pos = mx__ceas_pos(pos);
    c->valid = 1;
    if (heads < 1 || d_model < 1 || d_model % heads != 0) {
        c->valid = 0;
        snprintf(c->why, sizeof c->why, "d_model %d is not a multiple of %d heads", d_model, heads);
    } else if (mdl_config_validate(&c->model, c->why, sizeof c->why) != MDL_OK) {
        c->valid = 0;
    }
}

int mx_catalogue(const trn_config *base, mx_cand *cand, int *n, char *err, size_t errlen)
{
    static const int pos3[3] = {MDL_POS_LEARNED, MDL_POS_ROPE, MDL_POS_NONE};
    int C, H, M, D, P, i, j;
    if (!base || !cand || !n) return ex_errf(err, errlen, TRN_EINVAL, "mx_catalogue: NULL argument");
    *n = 0;
    C = base->model.d_model;
    H = base->model.n_heads;
    M = base->model.d_ff_mult;
    P = base->model.pos;
    if (C < 1 || H < 1 || M < 1 || C % H != 0)
        return ex_errf(err, errlen, TRN_EINVAL, "--maxent: the base shape (d-model %d, heads %d, ff-mult %d) is not valid",
                       C, H, M);
    D = C / H;
    /* the base first, then heads x positions at the base's width and FFN */
    mx__add(base, cand, n, C, H, M, P);
    for (i = 0; i < 3; i++) {
        int h = i == 0 ? H / 2 : i == 1 ? H : 2 * H;
        if (h < 1) continue;
        for (j = 0; j < 3; j++) mx__add(base, cand, n, C, h, M, pos3[j]);
    }
    /* width: head width -+ 16 at the base's heads and positions; FFN: half and double */
    if (D > 16) mx__add(base, cand, n, H * (D - 16), H, M, P);
    mx__add(base, cand, n, H * (D + 16), H, M, P);
    if (M / 2 >= 1 && M / 2 != M) mx__add(base, cand, n, C, H, M / 2, P);
    mx__add(base, cand, n, C, H, 2 * M, P);
    return TRN_OK;
}

/* Measure one candidate: cost and utility. */
static int mx__measure(const trn_config *base, mx_cand *c, const uint16_t *train_ids, size_t n_train,
                       const uint16_t *val_ids, size_t n_val, char *err, size_t errlen)
{
    trn_config pc = *base;
    trn *t = NULL;
    trn_step_info info;
    trn_maxent_report rep;
    mdl_model *m;
    mdl_opts o;
    mdl_stats st;
    int *inp = NULL, rc, s, T = base->context, L, H, early, q, nseq = 0;
    double t0, tsum = 0.0, uc = 0.0, ue = 0.0;
    const uint16_t *src = val_ids;
    size_t nsrc = n_val;
    char e2[600];

    pc.model = c->model;
    pc.maxent = 1;  /* (A) on every candidate, as on the run */
    pc.batch = base->maxent_batch;
    pc.cg = 0;      /* the context game changes T at epoch ends: not in a probe */
    pc.swa = 0;
    pc.ema = 0;
    pc.epoch_steps = 0;
    pc.eval_every = 1000000;
    pc.max_steps = 0;
    if (pc.steps <= 0 || pc.steps < pc.maxent_probe) pc.steps = pc.maxent_probe;
    if (trn_config_validate(&pc, e2, sizeof e2) != TRN_OK) {
        c->valid = 0;
        snprintf(c->why, sizeof c->why, "%.150s", e2);
        return TRN_OK;
    }
    rc = trn_create(&t, &pc, train_ids, n_train, val_ids, n_val, e2, sizeof e2);
    if (rc != TRN_OK) {
        return ex_errf(err, errlen, rc, "--maxent: candidate %s: %s", c->label, e2);
    }
    m = trn_model(t);
    c->params = mdl_num_params(m);
    if (trn_maxent_report_get(t, &rep) == TRN_OK) c->init_met = rep.a_met;
    for (s = 0; s < base->maxent_probe; s++) {
        t0 = mx__now();
        rc = trn_step(t, &info);
        if (rc != TRN_OK) {
            trn_destroy(t);
            return ex_errf(err, errlen, rc, "--maxent: candidate %s: probe step %d failed (%s)", c->label, s + 1,
                           trn_strerror(rc));
        }
        if (s > 0 || base->maxent_probe == 1) tsum += mx__now() - t0;
    }
    c->seconds = tsum / (double)(base->maxent_probe > 1 ? base->maxent_probe - 1 : 1);
    c->flops = mdl_flops_per_token(&c->model, T) * (double)pc.batch * (double)T;
    /* utility: per-head observables of fixed sequences (the validation split's first) */
    if (nsrc < (size_t)T + 1) { src = train_ids; nsrc = n_train; }
    inp = (int *)malloc(sizeof(int) * (size_t)T);
    if (!inp) { trn_destroy(t); return ex_errf(err, errlen, TRN_ENOMEM, "out of memory"); }
    L = c->model.n_layers;
    H = c->model.n_heads;
    early = L / 2 > 0 ? L / 2 : 1;
    o = mdl_opts_default();
    o.train = 0;
    o.want_attn_obs = 1;
    for (q = 0; q < MX__OBS_SEQS && (size_t)(q + 1) * (size_t)(T + 1) <= nsrc; q++) {
        float u1, u2;
        int j;
        for (j = 0; j < T; j++) inp[j] = src[(size_t)q * (size_t)(T + 1) + (size_t)j];
        memset(&st, 0, sizeof st);
        rc = mdl_forward(m, inp, NULL, 1, T, &o, &st);
        if (rc != MDL_OK || !st.attn_obs) {
            free(inp);
            snprintf(e2, sizeof e2, "%s", rc != MDL_OK ? mdl_last_error(m) : "no attention observables");
            trn_destroy(t);
            return ex_errf(err, errlen, TRN_EINVAL, "--maxent: candidate %s: utility forward: %s", c->label, e2);
        }
        if (ceas_corridor_utility(st.attn_obs, L * H, MX_DROP_LO, MX_DROP_HI, MX_WIDTH, &u1) != CEAS_OK ||
            ceas_early_neff_utility(st.attn_obs, early * H, &u2) != CEAS_OK) {
            free(inp);
            trn_destroy(t);
            return ex_errf(err, errlen, TRN_EINVAL,
                           "--maxent: candidate %s: the attention observables are not finite (diverged probe?)", c->label);
        }
        uc += u1;
        ue += u2;
        nseq++;
    }
    free(inp);
    trn_destroy(t);
    if (nseq == 0) return ex_errf(err, errlen, TRN_EINVAL, "--maxent: no sequence of %d tokens for the utility", T + 1);
    c->u_corridor = uc / nseq;
    c->u_early = ue / nseq;
    c->arch.utility = (1.0 - MX_EARLY_MIX) * c->u_corridor + MX_EARLY_MIX * c->u_early;
    c->arch.cost = base->maxent_cost == MX_COST_FLOPS ? c->flops : c->seconds;
    if (!(c->arch.cost > 0.0)) c->arch.cost = 1e-9; /* a step too quick for the clock */
    return TRN_OK;
}

int mx_run(const trn_config *base, const uint16_t *train_ids, size_t n_train, const uint16_t *val_ids,
           size_t n_val, mx_result *res, char *err, size_t errlen)
{
    ceas_select_config sel;
    ceas_arch arch[MX_MAX_CAND];
    double score[MX_MAX_CAND], weight[MX_MAX_CAND];
    unsigned char feas[MX_MAX_CAND];
    int map[MX_MAX_CAND], nv = 0, i, rc, best = -1;
    double t0 = mx__now();
    if (!base || !res || !train_ids || !val_ids) return ex_errf(err, errlen, TRN_EINVAL, "mx_run: NULL argument");
    memset(res, 0, sizeof *res);
    if (trn_config_validate(base, err, errlen) != TRN_OK) return TRN_EINVAL;
    rc = mx_catalogue(base, res->cand, &res->n, err, errlen);
    if (rc != TRN_OK) return rc;
    res->selected = -1;
    res->cost_mode = base->maxent_cost;
    res->probe_steps = base->maxent_probe;
    res->probe_batch = base->maxent_batch;
    res->T = base->context;
    res->lambda = base->maxent_lambda;
    res->budget = base->maxent_budget;
    for (i = 0; i < res->n; i++) {
        mx_cand *c = &res->cand[i];
        if (!c->valid) continue;
        rc = mx__measure(base, c, train_ids, n_train, val_ids, n_val, err, errlen);
        if (rc != TRN_OK) return rc;
        if (!c->valid) continue;
        arch[nv] = c->arch;
        map[nv++] = i;
    }
    res->seconds = mx__now() - t0;
    if (nv == 0) return ex_errf(err, errlen, TRN_EINVAL, "--maxent: no candidate of the %d could be built", res->n);
    sel = ceas_select_config_default();
    sel.lambda = base->maxent_lambda;
    sel.budget = base->maxent_budget;
    rc = ceas_maxent_select(&sel, arch, nv, score, weight, feas, &best);
    if (rc == CEAS_ERANGE) {
        double cmin = arch[0].cost;
        for (i = 1; i < nv; i++)
            if (arch[i].cost < cmin) cmin = arch[i].cost;
        return ex_errf(err, errlen, TRN_EINVAL,
                       "--maxent: none of the %d measured candidates is feasible (budget %g %s, the cheapest costs %g; "
                       "head width, d_ff and d_model must be multiples of %d): raise --maxent-budget or change the shape",
                       nv, sel.budget, base->maxent_cost == MX_COST_FLOPS ? "FLOPs" : "s", cmin, sel.tile);
    }
    if (rc != CEAS_OK) return ex_errf(err, errlen, TRN_EINVAL, "--maxent: ceas_maxent_select: %s", ceas_strerror(rc));
    for (i = 0; i < nv; i++) {
        mx_cand *c = &res->cand[map[i]];
        c->score = score[i];
        c->weight = weight[i];
        c->feasible = feas[i] != 0;
    }
    res->selected = map[best];
    return TRN_OK;
}

int mx_apply(trn_config *cfg, const mx_result *res)
{
    if (!cfg || !res || res->selected < 0 || res->selected >= res->n) return TRN_EINVAL;
    cfg->model = res->cand[res->selected].model;
    cfg->maxent = 1;
    return TRN_OK;
}

int mx_print_table(FILE *f, const mx_result *res)
{
    int i;
    if (!f || !res) return TRN_EINVAL;
    fprintf(f, "maxent: %d candidates, %d probe steps of %d x %d tokens each (cost: %s), lambda %g%s, %.1f s\n", res->n,
            res->probe_steps, res->probe_batch, res->T,
            res->cost_mode == MX_COST_FLOPS ? "model FLOPs of a probe step" : "mean seconds of a timed probe step",
            res->lambda, res->budget > 0 ? " (with a budget)" : "", res->seconds);
    fprintf(f, "maxent:   %-24s %10s %11s %9s %8s %8s %8s %9s %8s\n", "candidate", "params", "cost", "s/step",
            "u_corr", "u_early", "utility", "score", "weight");
    for (i = 0; i < res->n; i++) {
        const mx_cand *c = &res->cand[i];
        if (!c->valid) {
            fprintf(f, "maxent:   %-24s invalid: %s\n", c->label, c->why);
            continue;
        }
        fprintf(f, "maxent: %c %-24s %10zu %11.4g %9.4f %8.4f %8.4f %8.4f %9.4f %8.4f%s\n", i == res->selected ? '*' : ' ',
                c->label, c->params, c->arch.cost, c->seconds, c->u_corridor, c->u_early, c->arch.utility, c->score,
                c->weight, c->feasible ? "" : "  infeasible");
    }
    return TRN_OK;
}

int mx_json(const mx_result *res, char *buf, size_t cap)
{
    size_t w = 0;
    int i, n;
    char a[8][40];
#define MX__PUT(...) do { n = snprintf(buf + w, cap - w, __VA_ARGS__); \
        if (n < 0 || (size_t)n >= cap - w) return TRN_EINVAL; \
        w += (size_t)n; } while (0)
    if (!res || !buf || cap < 2) return TRN_EINVAL;
    MX__PUT("{\"type\":\"maxent\",\"cost\":\"%s\",\"lambda\":%s,\"budget\":%s,\"probe_steps\":%d,\"probe_batch\":%d,"
            "\"context\":%d,\"seconds\":%s,\"selected\":%d,\"candidates\":[",
            res->cost_mode == MX_COST_FLOPS ? "flops" : "time", trn_json_gnum(a[0], 40, 6, res->lambda),
            trn_json_gnum(a[1], 40, 6, res->budget), res->probe_steps, res->probe_batch, res->T,
            trn_json_num(a[2], 40, 3, res->seconds), res->selected);
    for (i = 0; i < res->n; i++) {
        const mx_cand *c = &res->cand[i];
        MX__PUT("%s{\"d_model\":%d,\"heads\":%d,\"d_k\":%d,\"ff_mult\":%d,\"d_ff\":%d,\"pos\":\"%s\",\"valid\":%d", i ? "," : "",
                c->model.d_model, c->model.n_heads, c->arch.d_k, c->model.d_ff_mult, c->arch.d_ff,
                mx__pos_name(c->model.pos), c->valid);
        if (c->valid)
            MX__PUT(",\"params\":%zu,\"cost\":%s,\"seconds\":%s,\"flops\":%s,\"u_corridor\":%s,\"u_early\":%s,"
                    "\"utility\":%s,\"score\":%s,\"weight\":%s,\"feasible\":%d,\"init_met\":%d,\"selected\":%d}",
                    c->params, trn_json_gnum(a[0], 40, 9, c->arch.cost), trn_json_gnum(a[1], 40, 6, c->seconds),
                    trn_json_gnum(a[2], 40, 9, c->flops), trn_json_num(a[3], 40, 6, c->u_corridor),
                    trn_json_num(a[4], 40, 6, c->u_early), trn_json_num(a[5], 40, 6, c->arch.utility),
                    trn_json_num(a[6], 40, 6, c->score), trn_json_num(a[7], 40, 6, c->weight), c->feasible,
                    c->init_met, i == res->selected);
        else {
            const char *s;
            MX__PUT(",\"why\":\"");
            for (s = c->why; *s; s++) {
                if (*s == '"' || *s == '\\') MX__PUT("\\%c", *s);
                else if ((unsigned char)*s >= 0x20) MX__PUT("%c", *s);
            }
            MX__PUT("\"}");
        }
    }
    MX__PUT("]}");
#undef MX__PUT
    return TRN_OK;
}

/* A tensor's floats on the host (a copy) and back. */
static float *mx__get(mdl_model *m, const mdl_tensor *te, char *err, size_t errlen)
{
    float *h = (float *)malloc(te->numel * sizeof(float));
    if (!h) { ex_errf(err, errlen, TRN_ENOMEM, "out of memory"); return NULL; }
    if (ex_to_host(mdl_ctx(m), h, mdl_params(m) + te->offset, te->numel * sizeof(float)) != 0) {
        free(h);
        ex_errf(err, errlen, TRN_EINVAL, "cannot read %s", te->name);
        return NULL;
    }
    return h;
}
static int mx__put(mdl_model *m, const mdl_tensor *te, const float *h, char *err, size_t errlen)
{
    if (ex_to_ctx(mdl_ctx(m), mdl_params(m) + te->offset, h, te->numel * sizeof(float)) != 0)
        return ex_errf(err, errlen, TRN_EINVAL, "cannot write %s", te->name);
    return TRN_OK;
}

static double mx__std(const float *x, size_t n)
{
    double s = 0.0, s2 = 0.0, mu;
    size_t i;
    for (i = 0; i < n; i++) s += x[i];
    mu = n ? s / (double)n : 0.0;
    for (i = 0; i < n; i++) s2 += ((double)x[i] - mu) * ((double)x[i] - mu);
    return n > 1 ? sqrt(s2 / (double)n) : 0.0;
}

int mx_init_scales(mdl_model *m, int T, trn_maxent_report *rep, char *err, size_t errlen)
{
    const mdl_config *mc;
    ceas_init_config ic = ceas_init_config_default();
    ceas_init_layer *ly = NULL;
    ceas_init_scale *sc = NULL;
    int L, C, D, l, met = 0, rc = TRN_OK;
    if (!m || T < 1) return ex_errf(err, errlen, TRN_EINVAL, "mx_init_scales: NULL model or context < 1");
    mc = mdl_get_config(m);
    if (mc->attn != MDL_ATTN_SOFTMAX)
        return ex_errf(err, errlen, TRN_EINVAL, "MaxEnt (A) sets softmax attention's W_q / W_k: --attn softmax");
    L = mc->n_layers;
    C = mc->d_model;
    D = C / mc->n_heads;
    ly = (ceas_init_layer *)calloc((size_t)L, sizeof *ly);
    sc = (ceas_init_scale *)calloc((size_t)L, sizeof *sc);
    if (!ly || !sc) { rc = ex_errf(err, errlen, TRN_ENOMEM, "out of memory"); goto done; }
    for (l = 0; l < L; l++) {
        ly[l].d_model = C;
        ly[l].d_k = D;
        ly[l].n_keys = T;
        ly[l].beta = 0.0f;  /* 1/sqrt(d_k): the model's logit scale at step 0 */
        ly[l].var_x = 1.0f; /* pre-norm, unit gain at init */
    }
    if (ceas_init_scales(&ic, ly, L, sc, &met) != CEAS_OK) {
        rc = ex_errf(err, errlen, TRN_EINVAL, "MaxEnt (A): ceas_init_scales refused d_model %d, d_k %d, %d keys", C, D, T);
        goto done;
    }
    for (l = 0; l < L; l++) {
        char name[MDL_NAME_MAX];
        const mdl_tensor *te;
        float *w;
        int part;
        snprintf(name, sizeof name, "blocks.%d.attn.qkv.weight", l);
        te = mdl_find_tensor(m, name);
        if (!te || te->ndim != 2 || te->shape[0] != 3 * C || te->shape[1] != C) {
            rc = ex_errf(err, errlen, TRN_EINVAL, "MaxEnt (A): the model has no (3C, C) tensor %s", name);
            goto done;
        }
        w = mx__get(m, te, err, errlen);
        if (!w) { rc = TRN_ENOMEM; goto done; }
        for (part = 0; part < 2; part++) { /* rows [0, C): W_q, [C, 2C): W_k (tk_split_heads_forward) */
            float *blk = w + (size_t)part * (size_t)C * (size_t)C;
            double sd = mx__std(blk, (size_t)C * (size_t)C);
            double want = part ? sc[l].sigma_k : sc[l].sigma_q;
            size_t i;
            if (l == 0 && part == 0 && rep) rep->a_sigma_before = (float)sd;
            if (!(sd > 0.0) || !isfinite(want) || !(want > 0.0)) {
                free(w);
                rc = ex_errf(err, errlen, TRN_EINVAL, "MaxEnt (A): layer %d: cannot rescale (std %g, target %g)", l, sd, want);
                goto done;
            }
            for (i = 0; i < (size_t)C * (size_t)C; i++) blk[i] = (float)((double)blk[i] * (want / sd));
        }
        rc = mx__put(m, te, w, err, errlen);
        free(w);
        if (rc != TRN_OK) goto done;
    }
    if (rep) {
        rep->a_applied = L;
        rep->a_met = met;
        rep->a_sigma_q = sc[0].sigma_q;
        rep->a_T = sc[0].T;
    }
done:
    free(ly);
    free(sc);
    return rc;
}

/* sigma_max of a (r, c) row-major matrix by power iteration on W^T W (deterministic start). */
static double mx__sigma_max(const float *W, int r, int c, double *v, double *u)
{
    int it, i, j;
    double nrm = 0.0, s = 0.0;
    for (j = 0; j < c; j++) { v[j] = 1.0 + 0.01 * (double)(j % 7); nrm += v[j] * v[j]; }
    nrm = sqrt(nrm);
    for (j = 0; j < c; j++) v[j] /= nrm;
    for (it = 0; it < MX__POWER_ITERS; it++) {
        for (i = 0; i < r; i++) {
            double a = 0.0;
            for (j = 0; j < c; j++) a += (double)W[(size_t)i * c + j] * v[j];
            u[i] = a;
        }
        for (j = 0; j < c; j++) v[j] = 0.0;
        for (i = 0; i < r; i++)
            for (j = 0; j < c; j++) v[j] += (double)W[(size_t)i * c + j] * u[i];
        nrm = 0.0;
        for (j = 0; j < c; j++) nrm += v[j] * v[j];
        nrm = sqrt(nrm);
        if (!(nrm > 0.0)) return 0.0;
        s = sqrt(nrm); /* ||W^T W v|| -> sigma^2 for the unit v */
        for (j = 0; j < c; j++) v[j] /= nrm;
    }
    return s;
}

int mx_check_c(mdl_model *m, const uint16_t *ids, size_t n, int T, float cap, trn_maxent_report *rep, char *err,
               size_t errlen)
{
    const mdl_config *mc;
    const mdl_tensor *wte, *wpe;
    float *E = NULL, *Pp = NULL, *var = NULL, eps = 0.0f, bias = 0.0f;
    double *v = NULL, *u = NULL;
    size_t rows, i;
    int C, k, nt, rc = TRN_OK;
    trn_maxent_report r;
    if (!m || !ids || n < 1 || T < 1 || !(cap >= 0.0f) || !isfinite(cap))
        return ex_errf(err, errlen, TRN_EINVAL, "mx_check_c: NULL model or ids, n or T < 1, or cap not finite >= 0");
    memset(&r, 0, sizeof r);
    if (rep) { /* keep (A)'s fields, start (C)'s afresh */
        r.a_applied = rep->a_applied;
        r.a_met = rep->a_met;
        r.a_sigma_q = rep->a_sigma_q;
        r.a_T = rep->a_T;
        r.a_sigma_before = rep->a_sigma_before;
    }
    mc = mdl_get_config(m);
    C = mc->d_model;
    /* the first norm's rows: wte[id] (+ wpe[t] with learned positions) */
    wte = mdl_find_tensor(m, "wte");
    wpe = mc->pos == MDL_POS_LEARNED ? mdl_find_tensor(m, "wpe") : NULL;
    if (!wte) return ex_errf(err, errlen, TRN_EINVAL, "MaxEnt (C): the model has no wte");
    rows = n < MX__NORM_ROWS ? n : MX__NORM_ROWS;
    E = mx__get(m, wte, err, errlen);
    if (!E) return TRN_ENOMEM;
    if (wpe) {
        Pp = mx__get(m, wpe, err, errlen);
        if (!Pp) { free(E); return TRN_ENOMEM; }
    }
    var = (float *)malloc(rows * sizeof(float));
    if (!var) { rc = ex_errf(err, errlen, TRN_ENOMEM, "out of memory"); goto done; }
    for (i = 0; i < rows; i++) {
        const float *e = E + (size_t)ids[i] * (size_t)C;
        const float *p = Pp ? Pp + (size_t)(i % (size_t)T) * (size_t)C : NULL;
        double s = 0.0, s2 = 0.0;
        int j;
        if ((int)ids[i] >= mc->vocab) { rc = ex_errf(err, errlen, TRN_EINVAL, "MaxEnt (C): token id outside the vocabulary"); goto done; }
        for (j = 0; j < C; j++) { double x = (double)e[j] + (p ? (double)p[j] : 0.0); s += x; s2 += x * x; }
        var[i] = mc->norm == MDL_NORM_RMS ? (float)(s2 / C) : (float)(s2 / C - (s / C) * (s / C));
        if (var[i] < 0.0f) var[i] = 0.0f;
    }
    if (ceas_norm_eps(var, (long long)rows, 1e-3f, 1e-12f, &eps, &bias) != CEAS_OK) {
        rc = ex_errf(err, errlen, TRN_EINVAL, "MaxEnt (C): ceas_norm_eps refused the row variances (all zero?)");
        goto done;
    }
    {
        float vmin = 0.0f;
        for (i = 0; i < rows; i++)
            if (var[i] > 0.0f && (vmin == 0.0f || var[i] < vmin)) vmin = var[i];
        r.c_var_min = vmin;
        r.c_eps_rec = eps;
        r.c_bias_rec = bias;
        r.c_bias_model = (float)(1.0 - sqrt((double)vmin / ((double)vmin + (double)MX__MODEL_EPS)));
    }
    /* spectral cap on every 2-D block matrix */
    nt = mdl_num_tensors(m);
    for (k = 0; k < nt && rc == TRN_OK; k++) {
        const mdl_tensor *te = mdl_tensor_at(m, k);
        float *W, scale = 1.0f;
        int over = 0;
        double s;
        if (!te || te->ndim != 2 || strncmp(te->name, "blocks.", 7) != 0 || te->shape[0] < 1 || te->shape[1] < 1) continue;
        free(v);
        free(u);
        v = (double *)malloc(sizeof(double) * (size_t)te->shape[1]);
        u = (double *)malloc(sizeof(double) * (size_t)te->shape[0]);
        W = mx__get(m, te, err, errlen);
        if (!W || !v || !u) { free(W); rc = ex_errf(err, errlen, TRN_ENOMEM, "out of memory"); break; }
        s = mx__sigma_max(W, te->shape[0], te->shape[1], v, u);
        r.c_mats++;
        if (s > r.c_sigma_max) {
            r.c_sigma_max = (float)s;
            snprintf(r.c_worst, sizeof r.c_worst, "%s", te->name);
        }
        if (cap > 0.0f && s > 0.0) {
            if (ceas_spectral_cap((float)s, cap, &scale, &over) != CEAS_OK) {
                free(W);
                rc = ex_errf(err, errlen, TRN_EINVAL, "MaxEnt (C): ceas_spectral_cap refused sigma %g", s);
                break;
            }
            if (over) {
                r.c_over++;
                for (i = 0; i < te->numel; i++) W[i] *= scale;
                rc = mx__put(m, te, W, err, errlen);
            }
        }
        free(W);
    }
    r.c_cap = cap;
    r.c_checked = 1;
    if (rep && rc == TRN_OK) *rep = r;
done:
    free(E);
    free(Pp);
    free(var);
    free(v);
    free(u);
    return rc;
}

int mx_resume_shape(const char *ckpt_path, trn_config *cfg, int *found, char *err, size_t errlen)
{
    static const char *const keys[3] = {"\"d-model\":", "\"heads\":", "\"ff-mult\":"};
    ckpt_file *f = NULL;
    const char *arch, *p;
    char e2[512];
    int vals[3], k, pos = -1;
    if (!ckpt_path || !cfg || !found) return ex_errf(err, errlen, TRN_EINVAL, "mx_resume_shape: NULL argument");
    *found = 0;
    if (ckpt_open(&f, ckpt_path, e2, sizeof e2) != CKPT_OK)
        return ex_errf(err, errlen, TRN_EIO, "cannot resume from %s: %s", ckpt_path, e2);
    arch = ckpt_meta(f, "attnkit.arch");
    if (!arch || !strstr(arch, "\"maxent\":\"on\"")) {
        ckpt_close(f);
        return TRN_OK;
    }
    for (k = 0; k < 3; k++) {
        char *end;
        long v;
        p = strstr(arch, keys[k]);
        if (!p) break;
        v = strtol(p + strlen(keys[k]), &end, 10);
        if (end == p + strlen(keys[k]) || v < 1 || v > 1000000) break;
        vals[k] = (int)v;
    }
    p = strstr(arch, "\"pos\":\"");
    if (p) {
        p += 7;
        if (!strncmp(p, "none\"", 5)) pos = MDL_POS_NONE;
        else if (!strncmp(p, "learned\"", 8)) pos = MDL_POS_LEARNED;
        else if (!strncmp(p, "rope\"", 5)) pos = MDL_POS_ROPE;
    }
    ckpt_close(f);
    if (k < 3 || pos < 0)
        return ex_errf(err, errlen, TRN_EFORMAT,
                       "cannot resume from %s: its configuration says --maxent on but not a whole shape "
                       "(d-model, heads, ff-mult, pos)", ckpt_path);
    cfg->model.d_model = vals[0];
    cfg->model.n_heads = vals[1];
    cfg->model.d_ff_mult = vals[2];
    cfg->model.pos = pos;
    cfg->maxent = 1;
    *found = 1;
    return TRN_OK;
}

/* ------------------------------------------------------------------ (C): the PI controller */
static int mx__fcmp(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

int mx_act_entropy(const float *v, size_t n, int bins, float tail, float *H, char *err, size_t errlen)
{
    size_t stride, m, i, ilo, ihi, tot = 0;
    float *s, lo, hi;
    double *cnt, h = 0.0, w;
    if (!v || !H || n == 0) return ex_errf(err, errlen, TRN_EINVAL, "mx_act_entropy: NULL or empty sample");
    if (bins < 2 || bins > 65536) return ex_errf(err, errlen, TRN_EINVAL, "mx_act_entropy: bins %d outside [2, 65536]", bins);
    if (!(tail >= 0.0f && tail < 0.5f))
        return ex_errf(err, errlen, TRN_EINVAL, "mx_act_entropy: tail %g outside [0, 0.5)", (double)tail);
    stride = (n + MX_PI_SAMPLE - 1) / MX_PI_SAMPLE;
    m = (n + stride - 1) / stride;
    s = (float *)malloc(sizeof(float) * m);
    cnt = (double *)calloc((size_t)bins, sizeof(double));
    if (!s || !cnt) {
        free(s);
        free(cnt);
        return ex_errf(err, errlen, TRN_ENOMEM, "mx_act_entropy: out of memory");
    }
    for (i = 0; i < m; i++) {
        s[i] = v[i * stride];
        if (!isfinite(s[i])) {
            free(s);
            free(cnt);
            return ex_errf(err, errlen, TRN_EINVAL, "mx_act_entropy: value %lu is not finite",
                           (unsigned long)(i * stride));
        }
    }
    qsort(s, m, sizeof(float), mx__fcmp);
    ilo = (size_t)((double)tail * (double)(m - 1));
    ihi = m - 1 - ilo;
    lo = s[ilo];
    hi = s[ihi];
    if (!(hi > lo)) { /* (nearly) constant: all mass in one bin */
        *H = 0.0f;
        free(s);
        free(cnt);
        return TRN_OK;
    }
    w = (double)bins / ((double)hi - (double)lo);
    for (i = 0; i < m; i++) {
        long b;
        if (s[i] < lo || s[i] > hi) continue;
        b = (long)(((double)s[i] - (double)lo) * w);
        if (b >= bins) b = bins - 1;
        cnt[b] += 1.0;
        tot++;
    }
    for (i = 0; i < (size_t)bins; i++)
        if (cnt[i] > 0) {
            double p = cnt[i] / (double)tot;
            h -= p * log(p);
        }
    *H = (float)(h / log((double)bins));
    free(s);
    free(cnt);
    return TRN_OK;
}

ceas_pi_config mx_pi_config(float band_lo, float band_hi, float kp, float ki)
{
    ceas_pi_config pc = ceas_pi_config_default();
    pc.h_lo = band_lo;
    pc.h_hi = band_hi;
    pc.kp = kp;
    pc.ki = ki;
    pc.i_max = 10.0f;
    pc.p_min = logf(MX_PI_GAIN_MIN);
    pc.p_max = logf(MX_PI_GAIN_MAX);
    pc.direction = -1; /* a larger gain lowers the entropy (maxent.h (C)) */
    return pc;
}

int mx_pi_update(mdl_model *m, const ceas_pi_config *pc, int update, float *integral, float *H, float *gain,
                 float *buf, size_t cap, char *err, size_t errlen)
{
    const mdl_config *mc = m ? mdl_get_config(m) : NULL;
    float a[MDL_MAX_LAYERS], I[MDL_MAX_LAYERS], h[MDL_MAX_LAYERS];
    int L, l;
    if (!m || !pc || !integral || !H || !gain || !buf)
        return ex_errf(err, errlen, TRN_EINVAL, "mx_pi_update: NULL argument");
    if (ceas_pi_config_validate(pc) != CEAS_OK)
        return ex_errf(err, errlen, TRN_EINVAL, "mx_pi_update: invalid PI configuration (band, gains or bounds)");
    if (mdl_act_gain_supported(mc, err, errlen) != MDL_OK) return TRN_EINVAL;
    L = mc->n_layers;
    if (mdl_act_gain_get(m, a, L) != MDL_OK) return ex_errf(err, errlen, TRN_EINVAL, "mx_pi_update: cannot read the gains");
    memcpy(I, integral, sizeof(float) * (size_t)L);
    for (l = 0; l < L; l++) {
        size_t n = 0;
        int rc;
        float p;
        if (mdl_ffn_act_copy(m, l, buf, cap, &n) != MDL_OK)
            return ex_errf(err, errlen, TRN_EINVAL, "mx_pi_update: %s", mdl_last_error(m));
        rc = mx_act_entropy(buf, n, MX_PI_BINS, MX_PI_TAIL, &h[l], err, errlen);
        if (rc != TRN_OK) return rc;
        if (!update) continue;
        if (ceas_pi_update(pc, logf(a[l]), h[l], &I[l], &p) != CEAS_OK)
            return ex_errf(err, errlen, TRN_EINVAL, "mx_pi_update: ceas_pi_update refused layer %d (gain %g, H %g)", l,
                           (double)a[l], (double)h[l]);
        a[l] = expf(p);
        if (a[l] < MX_PI_GAIN_MIN) a[l] = MX_PI_GAIN_MIN; /* exp(log(x)) may round below the bound */
        if (a[l] > MX_PI_GAIN_MAX) a[l] = MX_PI_GAIN_MAX;
    }
    if (update && mdl_act_gain_set(m, a, L) != MDL_OK)
        return ex_errf(err, errlen, TRN_EINVAL, "mx_pi_update: %s", mdl_last_error(m));
    memcpy(H, h, sizeof(float) * (size_t)L);
    memcpy(gain, a, sizeof(float) * (size_t)L);
    if (update) memcpy(integral, I, sizeof(float) * (size_t)L);
    return TRN_OK;
}
