/* ceas_exp - one run of the CEAS savings experiment (issue 20, seed 004; the maxent and rpa
   arms: issue 46 item 4): a small
   decoder-only LM trained on WikiText-2 with one of six arms, printing one JSON line
   with its validation curve, executed FLOPs, wall time and pruned fractions.
   tools/ceas_exp.sh runs the whole grid; tools/ceas_exp.py turns the lines into the
   tables of docs/RESULTS.md.

     make build/ceas_exp
     build/ceas_exp --scale 9k|1m --arm fixed|beta|gate|maxent|rpa|rpa-gate [--seed N]
                    [--steps N] [--eval-every N] [--eval-chunks N] [--lr X] [--threads N]
                    [--data-dir DIR] [--heads N] [--pos learned|rope|none]
                    [--maxent-cost flops|time] [--warmin N]

   Flags: --seed 1..1000000 (1), --steps >= 1 (1500 for 9k, 600 for 1m), --eval-every >= 1
   (25, 20), --eval-chunks 1..100000 (64), --lr in (0, 1) (3e-3, 2e-3), --threads 1..1024
   (1), --heads 1..256 dividing the width, --pos learned (default) | rope (an even head
   width) | none (ablations: the run is labelled "<scale>[-hN]-rope" / "-nopos"; with
   maxent it is the catalogue's base); --maxent-cost (maxent only) flops (default:
   reproducible) or time (this machine's probe timings); --warmin 0..10^7 (rpa and
   rpa-gate only; 60, the tiny preset's). Anything else, a value out of range or a flag
   given to an arm it does not apply to: the usage or a sentence on stderr, exit 2.

   Scales (this project's choices; seed 004 names "9k parameters" and no model):
     9k  byte-level ids (vocabulary 256, wt2_load_split_bytes), d 16, 2 layers, 2 heads
         (head width 8), FFN x 2, context 64, batch 8 (9,472 parameters); CEAS 9k preset.
     1m  GPT-2 BPE ids (vocabulary 50,257), d 32, 2 layers, 4 heads (head width 8), FFN x 4,
         context 64, batch 8 (1.64 M parameters, 1.61 M of them the tied embedding);
         CEAS 14.4M preset (the nearest the seed gives).
   --heads N changes the head count at the same width (the run is labelled scale "9k-h4" etc.):
   with 2 heads per layer CEAS's h_min = 2 floor never lets a head freeze.
   Both: learned positions, LayerNorm, GELU MLP, no dropout, softmax attention without a
   prior; AdamW (lr 3e-3 for 9k, 2e-3 for 1m, betas 0.9/0.95, wd 0.1 on matrices), a
   20-step linear warm-up then a constant rate, gradient clip 1. No train split is shipped:
   training batches are random chunks of the valid split, the validation loss of the
   curve is the mean CE over the first eval-chunks (default 64) sequential chunks of the
   test split (fixed for every arm and seed).

   Arms: fixed  beta = 1/sqrt(d_k) (the model's own softmax scale, no controller)
         beta   CEAS: per-head beta from ceas_step on the observables of batch row 0
                (want_attn_obs), validation losses reported to ceas_report_val_loss
         gate   beta + gating (model.h mdl_ceas_gating): token mask and frozen heads
                applied to the attention backward, frozen heads' parameters and AdamW
                moments left as they were.
         maxent the gate arm after seed 004 section 6's MaxEnt pre-selection, with
                examples/common/maxent.c's functions unchanged: a trn_config matching this
                run (model, context, batch, lr and its 20-step warm-up then constant, AdamW
                0.9/0.95, wd 0.1, clip 1, controller CEAS with this scale's preset and
                gating, the seed, the threads) goes to mx_run with --maxent-cost flops
                (default): (B)+(D) the catalogue around the scale's shape (heads {H/2, H,
                2H} x positions {learned, rope, none}, head width + 16 (and - 16 when > 16),
                FFN x {1/2, 2}), 3 probe steps of 2 x T tokens per candidate on the
                training split (valid; the utility forward reads it too, never test),
                ceas_maxent_select (lambda 0.1, no budget, tile 16: a shape whose head
                width, d_ff or width is not a multiple of 16 is infeasible); mx_apply's
                shape is this run's model; then (A) mx_init_scales on the created model
                (W_q / W_k rows of every layer's qkv weight rescaled so T at step 0 is in
                ceas's band). The table goes to stderr. Where nothing is feasible (the
                9k model with 4 heads of width 4: every candidate's head width is < 16 or
                not a multiple of it) mx_run refuses: a sentence, exit 1, no JSON.
         rpa    fixed beta with seed 000's RPA prior in every layer, the tiny preset's
                settings (train.c trn__recipe): R = K = 4, tau_align 0.70, 6 Sinkhorn
                iterations, posmix 0.10, tau_att 0.68 (learned), warm-in over --warmin
                steps (guardian_warm_in on the step index, as trn__prior_scale); training
                forwards take the batch memberships (MDL_PSRC_BATCH, the trainer's
                prior_train 0), every evaluation the running statistics
                (mdl_prior_stats_update with momentum 0.99 after each step, as train.c).
                The recipe's other switches (MoE, residual and value gates, Guardian,
                chaos, ...) stay off: the model is the fixed arm's plus the prior.
         rpa-gate  the gate arm on the rpa arm's model and prior (the gated backward
                passes the kept rows' dS to the prior, model.h mdl_set_gating); paired
                with rpa.
   Executed FLOPs per step = mdl_flops_per_token * B * T (nominal, causal attention)
     - the backward FLOPs the gating skipped (mdl_gate_counts: pruned rows, frozen heads)
     + the forward's CEAS statistics (mdl_gate_counts.gate_overhead, beta and gate): the
       moments the attention's softmax pass gathers, ~6 FLOPs per causal logit of every
       row, and the conversion to gate rows (gate only). (Before the fused moments, the
       observables took a T x T logit GEMM per layer and head and a separate row pass,
       and the gate rows a blocked logit GEMM: the RESULTS.md runs were made with those.)
   The RPA prior's own work (memberships, Sinkhorn, the (T,T) bias and its backward) is
   not in mdl_flops_per_token beyond its membership projection: rpa and rpa-gate count
   the same nominal step, so their pairing is fair, but their FLOPs are not comparable
   with the other arms'. The maxent arm's pre-selection is counted apart ("probe_flops":
   probe steps x mdl_flops_per_token x 2 x T per measured candidate, plus its two utility
   forwards at a third of a step's FLOPs per token): "flops_total" and the curve leave it
   out; add it for the savings with the pre-selection.
   Evaluation FLOPs and time are left out (the same for every arm). Wall time: the
   training steps only (CLOCK_MONOTONIC), controller and gating work included.

   Output (stdout, one line): {"scale","arm","seed","params","steps","B","T","lr",
   "d_model","heads","ff_mult","pos","prior", "warmin" (rpa arms), "maxent" (maxent arm:
   {"selected" (the shape's label), "params", "cost", "candidates", "measured",
   "feasible", "probe_steps", "probe_batch", "probe_flops", "probe_s" (wall of the whole
   pre-selection), "init_met", "init_layers" ((A): layers whose T at step 0 met the band /
   rescaled), "sigma_q_before", "sigma_q" (layer 0's W_q std before / after (A)), "T0"}),
   "evals":[[step, val_ce, cum_flops, cum_wall_s, chi], ...] (chi: the mean, over the steps
   since the previous eval, of the share of the attention backward not computed: pruned
   rows + frozen heads), "skip_share", "overhead_share" (of the nominal FLOPs),
   "pruned_rows", "frozen_head_steps", "beta_mean", "beta_init", "backoffs",
   "flops_dense_total", "flops_total", "wall_s"}. */
#define _POSIX_C_SOURCE 200809L
#include "common/data.h"
#include "common/maxent.h"
#include "common/model.h"
#include "common/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

enum { ARM_FIXED = 0, ARM_BETA = 1, ARM_GATE = 2, ARM_MAXENT = 3, ARM_RPA = 4, ARM_RPA_GATE = 5 };
static const char *const arm_names[] = {"fixed", "beta", "gate", "maxent", "rpa", "rpa-gate", NULL};
#define RPA_MOMENTUM 0.99f /* the trainer's prior_momentum default */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(void)
{
    fprintf(stderr, "usage: ceas_exp --scale 9k|1m --arm fixed|beta|gate|maxent|rpa|rpa-gate [--seed N] [--steps N]\n"
                    "                [--eval-every N] [--eval-chunks N] [--lr X] [--threads N] [--data-dir DIR] [--heads N]\n"
                    "                [--pos learned|rope|none] [--maxent-cost flops|time] (maxent only)\n"
                    "                [--warmin N] (rpa, rpa-gate only)\n");
}

/* the RPA prior's warm-in (train.c trn__prior_scale): 0 at step 0, linear to 1 at warm */
static float warmin_scale(long long step, int warm)
{
    float sc = 1.0f;
    if (warm > 0 && guardian_warm_in((int64_t)step, (int64_t)warm, &sc) != GUARDIAN_OK) sc = 1.0f;
    return sc;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *e;
    long v = strtol(s, &e, 10);
    if (*s == '\0' || *e != '\0' || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* mean CE over the eval chunks (B = 8 rows per forward) */
static int evaluate(mdl_model *m, const uint16_t *ids, size_t n, int T, int chunks, const float *temp, float prior_scale,
                    double *ce)
{
    wt2_loader L;
    int32_t *buf = (int32_t *)malloc(sizeof(int32_t) * 8 * (size_t)(T + 1));
    int *x = (int *)malloc(sizeof(int) * 8 * (size_t)T), *y = (int *)malloc(sizeof(int) * 8 * (size_t)T);
    double s = 0.0;
    long long tok = 0;
    int done = 0, rc = 0;
    if (!buf || !x || !y || wt2_loader_init(&L, ids, n, WT2_SEQUENTIAL, 1) != 0) rc = -1;
    while (!rc && done < chunks) {
        mdl_opts o = mdl_opts_default();
        mdl_stats st;
        int want = chunks - done < 8 ? chunks - done : 8, got, b, j;
        got = wt2_loader_next(&L, want, T, buf);
        if (got <= 0) break;
        for (b = 0; b < got; b++)
            for (j = 0; j < T; j++) {
                x[b * T + j] = buf[(size_t)b * (T + 1) + j];
                y[b * T + j] = buf[(size_t)b * (T + 1) + j + 1];
            }
        o.head_temp = temp;
        o.prior_scale = prior_scale; /* the RPA prior (rpa arms): running statistics (MDL_PSRC_AUTO) */
        if (mdl_forward(m, x, y, got, T, &o, &st) != MDL_OK) { rc = -1; break; }
        s += st.ce_sum;
        tok += st.ntok;
        done += got;
    }
    free(buf), free(x), free(y);
    if (rc || tok == 0) return -1;
    *ce = s / (double)tok;
    return 0;
}

/* seed 004 section 6 (B)+(D) for the maxent arm: a trn_config that matches this run's model,
   data, batch, optimiser and arm (CEAS beta + gating, the scale's preset), so mx_run's probe
   trainers are this experiment's training at the probe's batch; the catalogue, the probes,
   the utility and ceas_maxent_select are maxent.c's, unchanged. The utility forward reads
   the training split (valid), never the test split the curve is scored on. *probe_flops:
   the nominal model FLOPs of the probes (probe steps x mdl_flops_per_token x batch x T per
   measured candidate, plus the utility forwards at a third of a step's FLOPs per token). */
static int maxent_select(mdl_config *cfg, int is9k, int B, int T, int steps, float lr, int seed, int threads,
                         int cost, const wt2_tokens *tr, mx_result *res, double *probe_flops, char *err, size_t errlen)
{
    trn_config tc;
    int i;
    if (trn_preset("tiny-plain", &tc) != TRN_OK) return snprintf(err, errlen, "trn_preset failed"), -1;
    tc.model = *cfg;
    tc.context = T;
    tc.batch = B;
    tc.steps = steps;
    tc.epochs = 0;
    tc.epoch_steps = 0;
    tc.max_steps = 0;
    tc.eval_every = 0;
    tc.lr = lr;
    tc.lr_flat_frac = 0.999f; /* with the floor at 1: constant after the warm-up, as this program's schedule */
    tc.lr_floor_frac = 1.0f;
    tc.lr_warmup = 20;
    tc.beta1 = 0.9f;
    tc.beta2 = 0.95f;
    tc.weight_decay = 0.1f;
    tc.grad_clip = 1.0f;
    tc.label_smoothing = 0.0f;
    tc.ent_floor_alpha = 0.0f;
    tc.chaos = 0;
    tc.ema = 0;
    tc.swa = 0;
    tc.cg = 0;
    tc.warmin_steps = 0;
    tc.controller = TRN_CTRL_CEAS;
    tc.ceas_preset = is9k ? CEAS_PRESET_9K : CEAS_PRESET_14M;
    tc.ceas_gating = 1;
    tc.maxent = 1;
    tc.maxent_cost = cost;
    tc.seed = (uint64_t)seed;
    tc.threads = threads;
    if (mx_run(&tc, tr->ids, tr->n, tr->ids, tr->n, res, err, errlen) != TRN_OK) return -1;
    *probe_flops = 0.0;
    for (i = 0; i < res->n; i++) {
        const mx_cand *c = &res->cand[i];
        if (!c->valid) continue;
        *probe_flops += (double)res->probe_steps * c->flops +
                        mdl_flops_per_token(&c->model, T) / 3.0 * 2.0 /* utility sequences */ * (double)T;
    }
    if (mx_apply(&tc, res) != TRN_OK) return snprintf(err, errlen, "mx_apply failed"), -1;
    *cfg = tc.model;
    if (cfg->max_T < T) cfg->max_T = T;
    return 0;
}

int main(int argc, char **argv)
{
    const char *scale = NULL, *arm_s = NULL, *dir = NULL;
    int heads = 0;
    char label[32];
    int arm = -1, seed = 1, steps = 0, eval_every = 0, eval_chunks = 64, threads = 1, i, k, is9k, B = 8, T = 64;
    float lr = 0.0f;
    char err[1024];
    wt2_tokens tr, te;
    mdl_config cfg = mdl_config_default();
    mdl_model *m = NULL;
    ceas_state cs;
    ceas_config cc;
    int have_cs = 0, rc = 1;
    float *mom = NULL, *vel = NULL, *temp = NULL, *fz = NULL;
    int32_t *chunk = NULL;
    int *x = NULL, *y = NULL;
    size_t np;
    wt2_loader L;
    double cum_flops = 0.0, cum_wall = 0.0, skip_sum = 0.0, over_sum = 0.0, base_sum = 0.0;
    double chi_sum = 0.0, pruned_sum = 0.0;
    long long frozen_steps = 0;
    int chi_n = 0, first = 1;
    unsigned char frz[MDL_MAX_LAYERS * 256];
    int gating, rpa, maxent_cost = -1, warmin = -1, pos = MDL_POS_LEARNED;
    mx_result *mxr = NULL;
    trn_maxent_report mrep;
    double probe_flops = 0.0;

    memset(&tr, 0, sizeof tr);
    memset(&te, 0, sizeof te);
    for (i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!v) bad = 1;
        else if (!strcmp(a, "--scale")) scale = v;
        else if (!strcmp(a, "--arm")) arm_s = v;
        else if (!strcmp(a, "--seed")) bad = parse_int(v, 1, 1000000, &seed);
        else if (!strcmp(a, "--steps")) bad = parse_int(v, 1, 10000000, &steps);
        else if (!strcmp(a, "--eval-every")) bad = parse_int(v, 1, 10000000, &eval_every);
        else if (!strcmp(a, "--eval-chunks")) bad = parse_int(v, 1, 100000, &eval_chunks);
        else if (!strcmp(a, "--threads")) bad = parse_int(v, 1, 1024, &threads);
        else if (!strcmp(a, "--heads")) bad = parse_int(v, 1, 256, &heads);
        else if (!strcmp(a, "--warmin")) bad = parse_int(v, 0, 10000000, &warmin);
        else if (!strcmp(a, "--pos")) {
            pos = !strcmp(v, "learned") ? MDL_POS_LEARNED : !strcmp(v, "rope") ? MDL_POS_ROPE : !strcmp(v, "none") ? MDL_POS_NONE : -1;
            bad = pos < 0;
        }
        else if (!strcmp(a, "--maxent-cost")) {
            maxent_cost = !strcmp(v, "flops") ? MX_COST_FLOPS : !strcmp(v, "time") ? MX_COST_TIME : -1;
            bad = maxent_cost < 0;
        } else if (!strcmp(a, "--data-dir")) dir = v;
        else if (!strcmp(a, "--lr")) {
            char *e;
            lr = strtof(v, &e);
            bad = *e != '\0' || !(lr > 0.0f) || !(lr < 1.0f);
        } else bad = 1;
        if (bad) {
            usage();
            return 2;
        }
    }
    if (!scale || !arm_s || (strcmp(scale, "9k") && strcmp(scale, "1m"))) {
        usage();
        return 2;
    }
    for (i = 0; arm_names[i]; i++)
        if (!strcmp(arm_s, arm_names[i])) arm = i;
    if (arm < 0) {
        usage();
        return 2;
    }
    if (maxent_cost >= 0 && arm != ARM_MAXENT) {
        fprintf(stderr, "ceas_exp: --maxent-cost is for --arm maxent only\n");
        return 2;
    }
    if (warmin >= 0 && arm != ARM_RPA && arm != ARM_RPA_GATE) {
        fprintf(stderr, "ceas_exp: --warmin is for --arm rpa|rpa-gate only\n");
        return 2;
    }
    if (maxent_cost < 0) maxent_cost = MX_COST_FLOPS;
    gating = arm == ARM_GATE || arm == ARM_MAXENT || arm == ARM_RPA_GATE;
    rpa = arm == ARM_RPA || arm == ARM_RPA_GATE;
    if (warmin < 0) warmin = rpa ? 60 : 0; /* the tiny preset's warmin_steps */
    memset(&mrep, 0, sizeof mrep);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    is9k = !strcmp(scale, "9k");
    if (!dir) dir = wt2_default_data_dir();
    if (is9k) {
        if (wt2_load_split_bytes(dir, WT2_VALID, &tr, err, sizeof err) || wt2_load_split_bytes(dir, WT2_TEST, &te, err, sizeof err)) {
            fprintf(stderr, "ceas_exp: %s\n", err);
            goto out;
        }
    } else if (wt2_load_split(dir, WT2_VALID, NULL, &tr, err, sizeof err) ||
               wt2_load_split(dir, WT2_TEST, NULL, &te, err, sizeof err)) {
        fprintf(stderr, "ceas_exp: %s\n", err);
        goto out;
    }
    cfg.vocab = is9k ? WT2_BYTE_VOCAB : 50257;
    cfg.d_model = is9k ? 16 : 32;
    cfg.n_layers = 2;
    cfg.n_heads = is9k ? 2 : 4;
    snprintf(label, sizeof label, "%s", scale);
    if (heads && heads != cfg.n_heads) {
        if (cfg.d_model % heads) {
            fprintf(stderr, "ceas_exp: --heads %d must divide the width %d\n", heads, cfg.d_model);
            goto out;
        }
        cfg.n_heads = heads;
        snprintf(label, sizeof label, "%s-h%d", scale, heads);
    }
    cfg.d_ff_mult = is9k ? 2 : 4;
    cfg.max_T = T;
    cfg.pos = pos;
    if (pos != MDL_POS_LEARNED) { /* the label says what differs from the scale's model */
        size_t ln = strlen(label);
        snprintf(label + ln, sizeof label - ln, "-%s", pos == MDL_POS_ROPE ? "rope" : "nopos");
    }
    cfg.attn = MDL_ATTN_SOFTMAX;
    cfg.prior = MDL_PRIOR_NONE;
    cfg.ffn = MDL_FFN_GELU;
    cfg.dropout = 0.0f;
    if (rpa) {
        /* seed 000's RPA prior with the tiny preset's settings (train.c trn__recipe): R = K
           = 4 regimes, tau_align 0.70, 6 Sinkhorn iterations, posmix 0.10, tau_att 0.68;
           the recipe's other switches (MoE, residual and value gates, ...) stay off */
        cfg.prior = MDL_PRIOR_RPA;
        cfg.R = 4;
        cfg.rpa = era_rpa_config_default(4);
        cfg.rpa.K = 4;
        cfg.rpa.tau_align = 0.70f;
        cfg.rpa.sinkhorn_iters = 6;
        cfg.rpa.posmix = 0.10f;
        cfg.tau_att_init = 0.68f;
    }
    if (!steps) steps = is9k ? 1500 : 600;
    if (!eval_every) eval_every = is9k ? 25 : 20;
    if (!(lr > 0.0f)) lr = is9k ? 3e-3f : 2e-3f;
    if (arm == ARM_MAXENT) {
        mxr = (mx_result *)calloc(1, sizeof *mxr);
        if (!mxr) {
            fprintf(stderr, "ceas_exp: out of memory\n");
            goto out;
        }
        if (maxent_select(&cfg, is9k, B, T, steps, lr, seed, threads, maxent_cost, &tr, mxr, &probe_flops, err,
                          sizeof err)) {
            fprintf(stderr, "ceas_exp: %s\n", err);
            goto out;
        }
        mx_print_table(stderr, mxr);
#ifdef _OPENMP
        omp_set_num_threads(threads); /* the probes' trainers set it too: keep ours */
#endif
    }
    if (mdl_create(&m, &cfg, (uint64_t)seed * 7919u + 17u, err, sizeof err) != MDL_OK) {
        fprintf(stderr, "ceas_exp: %s\n", err);
        goto out;
    }
    if (arm == ARM_MAXENT && mx_init_scales(m, T, &mrep, err, sizeof err) != TRN_OK) { /* (A) */
        fprintf(stderr, "ceas_exp: %s\n", err);
        goto out;
    }
    np = mdl_num_params(m);
    mom = (float *)calloc(np, sizeof(float));
    vel = (float *)calloc(np, sizeof(float));
    fz = (float *)malloc(sizeof(float) * 3 * np);
    temp = (float *)malloc(sizeof(float) * (size_t)cfg.n_layers * cfg.n_heads);
    chunk = (int32_t *)malloc(sizeof(int32_t) * (size_t)B * (T + 1));
    x = (int *)malloc(sizeof(int) * (size_t)B * T);
    y = (int *)malloc(sizeof(int) * (size_t)B * T);
    if (!mom || !vel || !fz || !temp || !chunk || !x || !y) {
        fprintf(stderr, "ceas_exp: out of memory\n");
        goto out;
    }
    for (i = 0; i < cfg.n_layers * cfg.n_heads; i++) temp[i] = 1.0f;
    if (arm != ARM_FIXED && arm != ARM_RPA) {
        ceas_config_preset(is9k ? CEAS_PRESET_9K : CEAS_PRESET_14M, &cc);
        if (ceas_init(&cs, &cc, cfg.n_layers, cfg.n_heads, cfg.d_model / cfg.n_heads) != CEAS_OK) {
            fprintf(stderr, "ceas_exp: ceas_init failed\n");
            goto out;
        }
        have_cs = 1;
    }
    if (wt2_loader_init(&L, tr.ids, tr.n, WT2_RANDOM, (uint64_t)seed * 0x9E3779B97F4A7C15ULL + 1) != 0) {
        fprintf(stderr, "ceas_exp: loader\n");
        goto out;
    }
    printf("{\"scale\":\"%s\",\"arm\":\"%s\",\"seed\":%d,\"params\":%lu,\"steps\":%d,\"B\":%d,\"T\":%d,\"lr\":%g,"
           "\"d_model\":%d,\"heads\":%d,\"ff_mult\":%d,\"pos\":\"%s\",\"prior\":\"%s\",",
           label, arm_names[arm], seed, (unsigned long)np, steps, B, T, (double)lr, cfg.d_model, cfg.n_heads,
           cfg.d_ff_mult, cfg.pos == MDL_POS_ROPE ? "rope" : cfg.pos == MDL_POS_LEARNED ? "learned" : "none",
           rpa ? "rpa" : "none");
    if (rpa) printf("\"warmin\":%d,", warmin);
    if (arm == ARM_MAXENT) {
        int nfeas = 0, nmeas = 0;
        for (i = 0; i < mxr->n; i++) {
            nmeas += mxr->cand[i].valid;
            nfeas += mxr->cand[i].valid && mxr->cand[i].feasible;
        }
        printf("\"maxent\":{\"selected\":\"%s\",\"params\":%lu,\"cost\":\"%s\",\"candidates\":%d,\"measured\":%d,"
               "\"feasible\":%d,\"probe_steps\":%d,\"probe_batch\":%d,\"probe_flops\":%.6e,\"probe_s\":%.3f,"
               "\"init_met\":%d,\"init_layers\":%d,\"sigma_q_before\":%.6f,\"sigma_q\":%.6f,\"T0\":%.4f},",
               mxr->cand[mxr->selected].label, (unsigned long)np, maxent_cost == MX_COST_FLOPS ? "flops" : "time",
               mxr->n, nmeas, nfeas, mxr->probe_steps, mxr->probe_batch, probe_flops, mxr->seconds, mrep.a_met,
               mrep.a_applied, (double)mrep.a_sigma_before, (double)mrep.a_sigma_q, (double)mrep.a_T);
    }
    printf("\"evals\":[");
    {
        double ce;
        if (evaluate(m, te.ids, te.n, T, eval_chunks, have_cs ? temp : NULL, warmin_scale(0, warmin), &ce)) goto fail;
        printf("[0,%.6f,0,0,0]", ce);
        first = 0;
    }
    for (k = 1; k <= steps; k++) {
        mdl_opts o = mdl_opts_default();
        mdl_stats st;
        mdl_gate_counts gc;
        tk_adamw_config ac = tk_adamw_config_default();
        double t0 = now_s(), base, step_fl;
        float gn;
        size_t nfz = 0;
        int b, j, ti;
        if (wt2_loader_next(&L, B, T, chunk) != B) goto fail;
        for (b = 0; b < B; b++)
            for (j = 0; j < T; j++) {
                x[b * T + j] = chunk[(size_t)b * (T + 1) + j];
                y[b * T + j] = chunk[(size_t)b * (T + 1) + j + 1];
            }
        o.train = 1;
        o.seed = (uint64_t)k;
        if (rpa) { /* as the trainer drives it: batch memberships, the warm-in on the step index */
            o.prior_source = MDL_PSRC_BATCH;
            o.prior_scale = warmin_scale(k - 1, warmin);
        }
        if (have_cs) {
            for (i = 0; i < cfg.n_layers * cfg.n_heads; i++) temp[i] = ceas_beta_to_temp(cs.beta[i], cfg.d_model / cfg.n_heads);
            o.head_temp = temp;
            o.want_attn_obs = 1;
            o.want_gate_rows = gating;
        }
        mdl_zero_grad(m);
        if (mdl_forward(m, x, y, B, T, &o, &st) != MDL_OK) {
            fprintf(stderr, "ceas_exp: forward: %s\n", mdl_last_error(m));
            goto fail;
        }
        if (gating) {
            if (mdl_ceas_gating(m, &cs, 1, 1) != MDL_OK) {
                fprintf(stderr, "ceas_exp: gating: %s\n", mdl_last_error(m));
                goto fail;
            }
            memcpy(frz, cs.frozen, (size_t)cfg.n_layers * cfg.n_heads);
            nfz = mdl_frozen_floats(m, frz);
        }
        if (mdl_backward(m) != MDL_OK) {
            fprintf(stderr, "ceas_exp: backward: %s\n", mdl_last_error(m));
            goto fail;
        }
        tk_clip_grad_norm(mdl_grads(m), np, 1.0f, &gn);
        if (nfz) {
            mdl_frozen_copy(m, frz, mdl_params(m), fz, 0);
            mdl_frozen_copy(m, frz, mom, fz + np, 0);
            mdl_frozen_copy(m, frz, vel, fz + 2 * np, 0);
        }
        ac.lr = lr * (k < 20 ? (float)k / 20.0f : 1.0f);
        ac.beta1 = 0.9f;
        ac.beta2 = 0.95f;
        for (ti = 0; ti < mdl_num_tensors(m); ti++) {
            const mdl_tensor *e = mdl_tensor_at(m, ti);
            ac.weight_decay = e->decay ? 0.1f : 0.0f;
            tk_adamw_update(mdl_params(m) + e->offset, mdl_grads(m) + e->offset, mom + e->offset, vel + e->offset,
                            e->numel, &ac, k);
        }
        if (nfz) {
            mdl_frozen_copy(m, frz, mdl_params(m), fz, 1);
            mdl_frozen_copy(m, frz, mom, fz + np, 1);
            mdl_frozen_copy(m, frz, vel, fz + 2 * np, 1);
        }
        /* the RPA running statistics (the evaluations' prior) follow every step, as in train.c */
        if (rpa && mdl_prior_stats_update(m, RPA_MOMENTUM) != MDL_OK) {
            fprintf(stderr, "ceas_exp: prior statistics: %s\n", mdl_last_error(m));
            goto fail;
        }
        if (have_cs && (!st.attn_obs || ceas_step(&cs, st.attn_obs) != CEAS_OK)) {
            fprintf(stderr, "ceas_exp: ceas_step failed\n");
            goto fail;
        }
        cum_wall += now_s() - t0;
        mdl_gate_counts_get(m, &gc);
        base = mdl_flops_per_token(&cfg, T) * (double)B * T;
        step_fl = base - gc.attn_bwd_skipped - gc.proj_bwd_skipped + gc.gate_overhead;
        cum_flops += step_fl;
        base_sum += base;
        skip_sum += gc.attn_bwd_skipped + gc.proj_bwd_skipped;
        over_sum += gc.gate_overhead;
        chi_sum += gc.attn_bwd_dense > 0 ? gc.attn_bwd_skipped / gc.attn_bwd_dense : 0.0;
        pruned_sum += gc.rows > 0 ? (double)gc.rows_pruned / (double)gc.rows : 0.0;
        frozen_steps += gc.heads_frozen;
        chi_n++;
        if (!(st.loss == st.loss)) {
            fprintf(stderr, "ceas_exp: non-finite loss at step %d\n", k);
            goto fail;
        }
        if (k % eval_every == 0 || k == steps) {
            double ce;
            if (evaluate(m, te.ids, te.n, T, eval_chunks, have_cs ? temp : NULL, warmin_scale(k, warmin), &ce))
                goto fail;
            if (have_cs) ceas_report_val_loss(&cs, (float)ce, NULL);
            printf("%s[%d,%.6f,%.6e,%.4f,%.5f]", first ? "" : ",", k, ce, cum_flops, cum_wall,
                   chi_n ? chi_sum / chi_n : 0.0);
            first = 0;
            chi_sum = 0.0;
            chi_n = 0;
            fflush(stdout);
        }
    }
    {
        double bm = 0.0;
        if (have_cs)
            for (i = 0; i < cfg.n_layers * cfg.n_heads; i++) bm += cs.beta[i] / (double)(cfg.n_layers * cfg.n_heads);
        printf("],\"skip_share\":%.6f,\"overhead_share\":%.6f,\"pruned_rows\":%.6f,\"frozen_head_steps\":%lld,"
               "\"beta_mean\":%.6f,\"beta_init\":%.6f,\"backoffs\":%d,\"flops_dense_total\":%.6e,\"flops_total\":%.6e,"
               "\"wall_s\":%.3f}\n",
               skip_sum / base_sum, over_sum / base_sum, pruned_sum / steps, frozen_steps, bm,
               1.0 / sqrt((double)(cfg.d_model / cfg.n_heads)), have_cs ? cs.n_backoffs : 0, base_sum, cum_flops,
               cum_wall);
    }
    rc = 0;
    goto out;
fail:
    printf("]}\n");
    fprintf(stderr, "ceas_exp: run failed\n");
out:
    if (have_cs) ceas_free(&cs);
    mdl_destroy(m);
    (void)mdl_device_release();
    free(mom), free(vel), free(fz), free(temp), free(chunk), free(x), free(y), free(mxr);
    wt2_tokens_free(&tr);
    wt2_tokens_free(&te);
    return rc;
}
