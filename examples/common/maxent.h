/* maxent.h - seed 004 section 6's MaxEnt add-on for the examples' trainer (issue 46 item 2):
   wt2_train --maxent. ceas.h has the pure functions (its doc block, MAXENT); this unit
   measures what they take on this machine and applies what they return.

   (A) mx_init_scales: per layer, ceas_init_scales' W_q / W_k std (T at step 0 in
       ceas's band [0.9, 1.1] around 1, n_keys = the training context, var_x 1 after the
       pre-norm, beta 1/sqrt(d_k), Gaussian weights and inputs); the q and k rows of
       "blocks.l.attn.qkv.weight" are rescaled to it (their measured std times a factor, so
       the seeded draw keeps its shape). trn_create applies it when cfg.maxent is on, before
       the EMA copies the weights (host copies through the model's context, so the code is
       device-neutral, but trn_config_validate refuses --maxent / --maxent-c with --device
       cuda until the device path is checked).
   (B)+(D) mx_run: a catalogue around the configuration (mx_catalogue): heads {H/2, H, 2H}
       x positions {learned, rope, none} at the preset's width and FFN, plus the preset's
       heads and positions with d_model = H (d_k -+ 16) and ff-mult {m/2, 2m}; each
       candidate is made a trainer of its own (trn_create, (A) applied, the run's seed, its
       optimiser and schedule) at --maxent-batch sequences of --context tokens, runs
       --maxent-probe optimiser steps (the first a warm-up, the rest timed), then one
       evaluation forward of a fixed batch with the per-head observables (beta 1/sqrt(d_k),
       ceas_attention_observables' heads). Utility u = 0.75 ceas_corridor_utility (drop
       0.9..1.3 nats, width 0.5) + 0.25 ceas_early_neff_utility (the first half of the
       layers' heads, at least one layer: (D)'s "keep early-layer N_eff high"). Cost: the
       mean seconds of the timed steps (--maxent-cost time) or the model's FLOPs of one
       probe step (mdl_flops_per_token x tokens, --maxent-cost flops: reproducible). Then
       ceas_maxent_select (lambda --maxent-lambda, budget --maxent-budget, tile 16,
       temperature 0.05) picks the configuration. Candidates the model cannot build (a
       head width that does not divide, RoPE with an odd head width or polar attention)
       are listed as invalid and not scored.
   (C) The seed's "output-entropy band H(f(x)) held by a tiny PI controller on activation
       parameters" (wt2_train --maxent-pi on; mx_pi_update, every --maxent-pi-every steps):
       the parameter is the GELU MLP's per-layer gain a_l, act(u) = gelu(a_l u) (model.h
       mdl_act_gain_set: not trained, 1 at creation; a_l = 1 is the plain model bit for
       bit). Readings, all ours where the seed is silent:
         H(f(x)) = mx_act_entropy of layer l's activations gelu(a_l u) over the step's
           training batch (B T F values; a fixed stride sample of at most MX_PI_SAMPLE
           65536 of them): a 64-bin (MX_PI_BINS) histogram over the sample's robust range
           [q_0.005, q_0.995] (MX_PI_TAIL; values outside it left out), -sum p ln p / ln 64,
           so H is in [0, 1] and depends on the shape of the distribution, not its scale;
           a constant sample has H 0. Copied to the host through the model's context from
           the saved activations of the step's forward (mdl_ffn_act_copy), one copy per
           layer per measurement.
         direction: a larger a_l lowers H (ceas_pi_config.direction -1). Argued: for a
           small a u the GELU is nearly linear (a u / 2 + ...), the output keeps u's
           near-Gaussian shape (H ~ 0.93); a large a u makes it ReLU-like, half the mass
           piles up near 0 and H falls towards ~0.62. Measured on N(0, s^2) inputs
           (tests/test_maxent_pi.c test_entropy_direction, 200000 values, s 0.2): H of
           gelu(a u) falls monotonically in a s: 0.933, 0.931, 0.921, 0.864, 0.769, 0.736,
           0.694, 0.616 at a s = 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 12.8.
         the controller: ceas_pi_update on p = ln a_l (relative steps: an error of 0.05
           moves a by exp(kp 0.05)), band --maxent-pi-band 0.70,0.85 (the GELU's curved
           regime, between the near-linear ~0.93 and the ReLU limit ~0.62), kp
           --maxent-pi-kp 6, ki --maxent-pi-ki 0.1, i_max 10, a_l in [MX_PI_GAIN_MIN 0.05,
           MX_PI_GAIN_MAX 20], every --maxent-pi-every 5 steps, after the step's update
           (steps whose update was skipped do not measure). ceas_pi_update's integral
           holds inside the band, so with ki > 0 a_l keeps drifting by ki I per update
           there until the error turns (ki is small against kp for that reason).
       The gains and integrals are trainer state (checkpoint "state.act_gain",
       "state.maxent_pi"); every measurement writes a {"type":"maxent_pi"} metrics line.
       CPU trainer only (trn_config_validate refuses --device cuda: the model path is
       device-neutral, the device run is not checked yet); the GELU MLP only (a
       --ffn relu2 / moe run is refused: no gain there).
       mx_check_c, at trn_create when cfg.maxent_c is on: ceas_norm_eps on the
       per-row variances the first norm divides by (wte[id] (+ wpe[t]) of the first
       training tokens), reported against the model's fixed eps 1e-5 (not applied: the
       model's eps is a constant of model.c); and ceas_spectral_cap on every 2-D
       "blocks.*" weight (power iteration, 30 steps), rescaling those over cfg.maxent_cap
       (0: report only), before (A) (so (A)'s W_q / W_k scales are what the band asks).

   Determinism: with --maxent-cost flops the selection is a pure function of the
   configuration and the thread count (the trainer's determinism); with time it also
   depends on this machine's timings. The selected shape is written into the trainer's
   configuration, so the checkpoint's attnkit.arch records it (with "maxent":"on");
   mx_resume_shape reads it back for --resume.
   Errors: TRN_* codes of train.h with a sentence in err. License: MIT. */
#ifndef ATTNKIT_MAXENT_H
#define ATTNKIT_MAXENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "train.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MX_COST_TIME = 0, MX_COST_FLOPS = 1 };
#define MX_MAX_CAND 32
#define MX_EARLY_MIX 0.25  /* weight of (D)'s early-layer utility in u */
#define MX_DROP_LO 0.9f    /* corridor: H in [ln N - 1.3, ln N - 0.9] nats */
#define MX_DROP_HI 1.3f
#define MX_WIDTH 0.5f

typedef struct mx_cand {
    mdl_config model;       /* the candidate's model (the base with the shape changed) */
    int valid;              /* mdl_config_validate accepts it (else why says why) */
    char why[160];
    char label[48];         /* "d128 h4 ff4 learned" */
    ceas_arch arch;         /* what ceas_maxent_select scored (cost, utility) */
    double seconds;         /* mean seconds of a timed probe step (NaN: not run) */
    double flops;           /* model FLOPs of one probe step */
    double u_corridor, u_early;
    int init_met;           /* layers whose (A) scale met the band */
    size_t params;
    double score, weight;   /* ceas_maxent_select's J and softmax weight (NaN: invalid) */
    int feasible;
} mx_cand;

typedef struct mx_result {
    mx_cand cand[MX_MAX_CAND];
    int n;
    int selected;           /* index into cand */
    int cost_mode, probe_steps, probe_batch, T;
    double lambda, budget;
    double seconds;         /* wall time of the whole pre-selection */
} mx_result;

/* The catalogue around base (see the top); *n candidates written (<= MX_MAX_CAND). */
int mx_catalogue(const trn_config *base, mx_cand *cand, int *n, char *err, size_t errlen);
/* (B)+(D): measure every valid candidate and select. train / val: the trainer's token
   ids (as trn_create takes them). TRN_EINVAL with a sentence when nothing is feasible
   (ceas_maxent_select's CEAS_ERANGE) or a measurement fails. */
int mx_run(const trn_config *base, const uint16_t *train_ids, size_t n_train, const uint16_t *val_ids,
           size_t n_val, mx_result *res, char *err, size_t errlen);
/* cfg->model <- the selected candidate's model. */
int mx_apply(trn_config *cfg, const mx_result *res);
/* The table, one line per candidate (shape, cost, utility, score, weight, '*' selected). */
int mx_print_table(FILE *f, const mx_result *res);
/* {"type":"maxent",...} (no newline) into buf. */
int mx_json(const mx_result *res, char *buf, size_t cap);
/* (A) on a created model, context T (the attention's keys). rep may be NULL. */
int mx_init_scales(mdl_model *m, int T, trn_maxent_report *rep, char *err, size_t errlen);
/* (C) on a created model: ids (n) the first training tokens (<= 4096 used), T the context,
   cap the spectral cap (0: report only). rep may be NULL. */
int mx_check_c(mdl_model *m, const uint16_t *ids, size_t n, int T, float cap, trn_maxent_report *rep,
               char *err, size_t errlen);
/* (C) the PI controller on the GELU gain (see the top). */
#define MX_PI_BINS 64
#define MX_PI_TAIL 0.005f
#define MX_PI_SAMPLE 65536
#define MX_PI_GAIN_MIN 0.05f
#define MX_PI_GAIN_MAX 20.0f
/* H <- the normalised histogram entropy of v (n finite floats): bins in [2, 65536] over the
   sample's [q_tail, q_(1-tail)], tail in [0, 0.5); at most MX_PI_SAMPLE values read (a
   fixed stride). TRN_EINVAL for a bad argument or a non-finite value. */
int mx_act_entropy(const float *v, size_t n, int bins, float tail, float *H, char *err, size_t errlen);
/* ceas_pi_config of the controller on p = ln a: the band, kp, ki; i_max 10, p in
   [ln MX_PI_GAIN_MIN, ln MX_PI_GAIN_MAX], direction -1. */
ceas_pi_config mx_pi_config(float band_lo, float band_hi, float kp, float ki);
/* One measurement of every layer after a training forward of m (a GELU MLP model): H (L)
   the entropies; with update 1 one ceas_pi_update per layer on ln a_l (integral (L)
   in/out) and the new gains set on the model; gain (L) <- the gains now. buf: host
   scratch of cap >= B T F floats. TRN_EINVAL with a sentence (nothing set) on failure. */
int mx_pi_update(mdl_model *m, const ceas_pi_config *pc, int update, float *integral, float *H, float *gain,
                 float *buf, size_t cap, char *err, size_t errlen);
/* --resume: when the checkpoint's attnkit.arch says "maxent":"on", set cfg's d-model,
   heads, ff-mult, pos and maxent from it (*found 1); else leave cfg (*found 0). */
int mx_resume_shape(const char *ckpt_path, trn_config *cfg, int *found, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_MAXENT_H */
