/* train.h - the WikiText-2 trainer behind examples/wt2_train.c: configuration and presets,
   the training step (AdamW, or Muon on the blocks' weight matrices with AdamW on the rest;
   clipping, label smoothing, entropy floor, LR flat + cosine to a floor, bias warm-in, chaos warm-in, EMA, SWA-select, the context game, controllers
   none|scripted|guardian|gac|ceas), evaluation, and bit-exact checkpoints.

   Protocol (seed 000 §7): training draws random contiguous chunks; evaluation walks a split
   in sequential non-overlapping chunks (stride = context), counting every target of every
   full chunk once: chunks = floor((n - 1) / T), tokens = chunks * T.

   Splits: with a full WikiText-2 directory: train / validation / test. Where the train
   split is missing (../shared/data), the trainer trains on the validation split minus its
   last `holdout` fraction, uses that held-out tail for the periodic evaluations the
   controllers and SWA-select see, and reports the final figure on test (so the test split
   never steers training). trn_describe_splits() says which is which.

   Determinism: for a fixed thread count, a run is a pure function of its configuration;
   N steps, save, resume, N more steps gives bit-identical weights to 2N steps in one go.

   Optimizers (--optimizer adamw|muon; issue 43 item 6, seed 002 §4.1). adamw (the default):
   AdamW on every tensor, weight decay on those the model's parameter table marks (decay).
   muon: Muon on each tensor trn_muon_param accepts (a 2-D weight matrix of a block with
   weight decay: the mixers' and the memory's projections, the MLPs', the RPA membership
   projection, the MoE router; read from the parameter table, names and shapes), AdamW as
   above on the rest (embeddings wte / wpe, norms, biases, the priors' and gates'
   parameters, the convolutions' kernels, the 3-D MoE expert stacks). Muon's step for a
   matrix W (r x c) with gradient G, momentum beta (--muon-momentum 0.95), learning rate lr
   (the schedule's, shared with AdamW) and weight decay wd (--wd):
       M <- beta M + (1 - beta) G                  (momentum buffer, EMA form)
       U <- (1 - beta) G + beta M                  (Nesterov, as the public Muon does)
       O <- NS5(U)                                 (trn_muon_orthogonalise: --muon-ns-steps 5)
       W <- W - lr (0.2 sqrt(max(r, c)) O + wd W)
   The 0.2 sqrt(max(r, c)) scale is the RMS-matching rule of Liu et al. 2025 ("Muon is
   scalable for LLM training", Moonshot): it brings the update's RMS near AdamW's (~0.2), so
   one --lr and one --wd serve both groups (the alternative, Keller Jordan's
   max(1, r/c)^0.5 with a separate, larger Muon rate, is not offered). The momentum buffer
   lives in the checkpoint's optim.adam_m at the matrix's offset (optim.adam_v stays 0
   there): the file's format does not change and a Muon run resumes bit-exactly. The
   checkpoint's configuration records --optimizer muon and its two knobs (absent for
   adamw, so adamw runs and their checkpoints are as before); resuming with the other
   optimizer is refused. The schedule: seed 002's "cosine with a 70 % cooldown" is
   --lr-flat 0.3 --lr-floor 0 (flat for 30 % of the steps, then a cosine to 0 over the last
   70 %), optionally with --lr-warmup. Precision: the Newton-Schulz GEMMs run in fp32 on
   both devices (a device trainer switches tk_cuda_set_math to fp32 for them and back; the
   public implementation uses bf16 on GPUs). Device: the same code path through exctx.h's
   ops (ex_sgemm, ex_scale, ex_residual_fwd, ex_grad_norm: one host read of the norm per
   matrix and step). Refused: ZeRO-1 (trn_set_parallel zero = 1: it shards elementwise
   moments; Muon needs whole matrices).

   SIGReg (--sigreg off|weak|strong|discrete|zipfian, --sigreg-alpha a; issue 43 item 7,
   seed 002 Appendix A eq. 29): each training micro-batch optimises (1 - a) L_LM + a L_reg,
   L_reg the mean over the blocks of the mode's regulariser of the block's output (the
   residual stream, all B T rows), as the authors' code (kreasof-ai/atma) does; sigreg.h
   defines the modes and names the source of each choice; model.h mdl_sigreg_set the
   model's side. The sketches / projections are drawn from (--seed, step x micro-batches +
   micro-batch, block): reproducible, and a resumed run is bit-identical. The metrics'
   train lines carry "sigreg" (L_reg) and their "loss" is the weighted objective; the
   options are in the configuration JSON only when on (off: every run, log and checkpoint
   as before) and a checkpoint resumes only under the same --sigreg and --sigreg-alpha.
   Scale: atma's L_LM is the CE summed over a micro-batch's tokens, ours the mean (sigreg.h).
   With micro-batches / data parallelism the logged value is the mean over the step's
   micro-batches (all processes: it travels with the step statistics). Device: the model copies each
   block's output to the host for the regulariser and its gradient back (one (B T, C) copy
   each way per block and forward / backward).
   License: MIT. */
#ifndef ATTNKIT_TRAIN_H
#define ATTNKIT_TRAIN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model.h"
#include "sigreg.h"
#include "guardian.h"
#include "ceas.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { TRN_OK = 0, TRN_EINVAL = -1, TRN_ENOMEM = -2, TRN_EIO = -3, TRN_EFORMAT = -4,
       TRN_EMISMATCH = -5, TRN_ENAN = -6,
       TRN_ESTOPPED = -7 /* the stop flag (trn_set_stop_flag) was raised: see there */ };
enum { TRN_CTRL_NONE = 0, TRN_CTRL_SCRIPTED, TRN_CTRL_GUARDIAN, TRN_CTRL_GAC, TRN_CTRL_CEAS };
enum { TRN_W_RAW = 0, TRN_W_EMA = 1, TRN_W_SWA = 2 };
enum { TRN_OPT_ADAMW = 0, TRN_OPT_MUON = 1 };
#define TRN_MAX_CG 8
#define TRN_PATH_MAX 1024
/* bounds on what a flag or a loaded checkpoint may say: optimizer steps (--steps,
   --max-steps, --warmin, a schedule's length, a checkpoint's step) and --threads */
#define TRN_MAX_STEPS 1000000000000LL
#define TRN_MAX_THREADS 1024

typedef struct trn_config {
    mdl_config model;
    /* data and budget */
    int context;            /* T: training context (the longest context-game length if on) */
    int batch;              /* B at `context`: tokens per step = batch * context */
    long long steps;        /* schedule length in optimizer steps (0: epochs * steps/epoch) */
    int epochs;             /* used when steps == 0 */
    int epoch_steps;        /* steps per epoch (0: training tokens / tokens per step); epoch
                               ends drive the context game and SWA-select */
    long long max_steps;    /* stop after this many steps (0: run the schedule), then eval */
    float holdout;          /* fraction of the training split held out when train is absent */
    int eval_every;         /* steps between evaluations (0: at the end of each epoch) */
    int eval_max_chunks;    /* cap on periodic-eval chunks (0: the whole split) */
    int final_max_chunks;   /* cap on the final evaluation's chunks (0: all; smoke tests) */
    int final_weights;      /* -1: auto (SWA if averaged, else EMA if on, else raw), or TRN_W_* */
    int log_every;          /* steps between metrics lines */
    int ckpt_every;         /* steps between checkpoints (0: only at the end) */
    /* optimisation */
    float lr, lr_flat_frac, lr_floor_frac;
    int lr_warmup;          /* steps of linear learning-rate warm-up: step k (1-based) of the
                               first N runs at lr * k / N on top of the schedule (0: none, the
                               presets' default; early Adam steps at a flat lr 2e-3 spike now
                               and then at the tiny presets' size) */
    float beta1, beta2, adam_eps, weight_decay;
    int optimizer;          /* TRN_OPT_ADAMW (0, default) or TRN_OPT_MUON (see the top) */
    float muon_momentum;    /* Muon's beta (0.95, the public implementation's) */
    int muon_ns_steps;      /* Newton-Schulz iterations (5) */
    int sigreg;             /* seed 002's signature-stream regulariser: SGR_OFF (0, default),
                               SGR_WEAK, SGR_STRONG, SGR_DISCRETE, SGR_ZIPFIAN (sigreg.h) */
    float sigreg_alpha;     /* its weight a: (1 - a) L_LM + a L_reg (0.01, atma's) */
    float grad_clip;        /* 0: off */
    float label_smoothing, ent_floor_alpha, ent_floor_eta;
    float moe_lb_coef;
    long long warmin_steps; /* RPA/ERA bias warm-in (0: full scale from step 0) */
    int chaos;              /* chaos warm-in on LR and bias scale */
    float chaos_amp, chaos_decay, chaos_r, chaos_x0;
    int ema; float ema_decay;
    int swa;                /* SWA-select at epoch ends */
    int swa_start_epoch; float swa_ce_lo, swa_ce_hi, swa_min_gain;
    int cg;                 /* context game over cg_lengths at constant tokens per step */
    int n_cg, cg_lengths[TRN_MAX_CG];
    float cg_eta;
    int controller;         /* TRN_CTRL_* */
    int guardian_start;     /* Guardian beta ramp start (steps) and length */
    int guardian_ramp;
    float guardian_tau_max; /* Guardian's projection ceiling for tau_att (2.0; paper: 1.6) */
    /* RPA prior sources (model.h MDL_PSRC_*): training uses the batch statistics of seed
       000 (prior_train 0) or the running statistics (1: the leak-free option); every
       evaluation uses the running statistics through the cached B(T) (eval_prior 0);
       eval_prior 1 re-creates the old per-batch evaluation, which sees the evaluated
       text (for comparisons only) */
    int prior_train;
    int eval_prior;
    float prior_momentum;   /* running-statistics momentum (0.99) */
    /* GAC (seed 003 §3.3): the per-layer tau_gac divides the whole logits (model.gac_tau,
       on by --controller gac); the entropy-band penalty joins the training loss */
    float gac_lambda;       /* lambda of L_ent (1) */
    float gac_hmin, gac_hmax; /* entropy band in nats (2, 5) */
    /* CEAS (seed 004; --controller ceas): the preset of ceas.h's config (CEAS_PRESET_9K,
       _14M (default), _GPT), and gating (issue 20): 1 prunes query rows below the gate from
       the attention backward and freezes heads (no gradient, no optimiser update) as
       ceas.h decides (model.h mdl_ceas_gating); 0 controls beta only */
    int ceas_preset;
    int ceas_gating;
    /* MaxEnt (seed 004 section 6; examples/common/maxent.h, wt2_train --maxent): maxent 1
       sets (A)'s W_q / W_k init scales at trn_create (wt2_train also runs the (B)+(D)
       pre-selection, which writes the selected shape into model); maxent_cost MX_COST_TIME
       (0) or MX_COST_FLOPS (1), maxent_lambda the cost multiplier, maxent_budget a cost cap
       (0: none), maxent_probe optimiser steps per candidate, maxent_batch sequences per
       probe step; maxent_c 1: (C)'s norm-eps and spectral-cap check at trn_create, the cap
       maxent_cap (0: report only) */
    int maxent, maxent_cost, maxent_probe, maxent_batch, maxent_c;
    float maxent_lambda, maxent_budget, maxent_cap;
    /* MaxEnt (C)'s PI controller (wt2_train --maxent-pi; maxent.h (C)): maxent_pi 1 holds
       each GELU layer's activation entropy in maxent_pi_band (normalised, [0, 1]) by moving
       its gain a_l (act = gelu(a_l u)), one ceas_pi_update on ln a_l per layer every
       maxent_pi_every steps with gains maxent_pi_kp, maxent_pi_ki. GELU MLP and CPU only.
       Defaults (ours): off, 0.70,0.85, 5 steps, kp 6, ki 0.1 */
    int maxent_pi, maxent_pi_every;
    float maxent_pi_band[2], maxent_pi_kp, maxent_pi_ki;
    /* run */
    uint64_t seed;
    int threads;            /* 0: OpenMP default */
    int device;             /* MDL_DEVICE_CPU (--device cpu) or MDL_DEVICE_CUDA (--device cuda):
                               where the model, its gradients and the optimiser state live
                               (model.h mdl_create_on); the loader and controllers stay host */
    int precision;          /* -1 auto (--precision auto: bf16 on cuda, fp32 on the CPU), or
                               TK_MATH_FP32 / _TF32 / _BF16 (cuda only). trn_create of a cuda
                               trainer sets tensor.h's process-wide tk_cuda_set_math to it */
    char data_dir[TRN_PATH_MAX];
    char out_dir[TRN_PATH_MAX];
    char preset[32];
} trn_config;

/* Presets (trn_print_presets says what each is, value by value):
   "tiny"          the seed-000 recipe at a size that trains in minutes on 2 cores;
   "tiny-baseline" the same with prior, controller, SWA-select, context game, chaos off;
   "tiny-plain"    tiny-baseline as a plain GELU transformer;
   "era-gac-tiny"  seed 003's ERA prior + GAC on a plain transformer at the tiny budget;
   "paper"         seed 000 §7, Table 1, Listings 4-6 (8,030 steps of 24,576 tokens);
   "baseline"      the paper's budget and model with the recipe's mechanisms off;
   "era-gac"       seed 003's ERA + GAC on the paper's model shape and budget.
   TRN_EINVAL for an unknown name. */
int trn_preset(const char *name, trn_config *out);
/* The i-th preset's name (the order above), NULL past the last: error messages and help
   list the presets from here. */
const char *trn_preset_name(int i);
/* What each preset is: its model, budget and mechanisms, which values come from the
   papers and which are this project's choices (printed by wt2_train --help). */
void trn_print_presets(FILE *f);
/* MDL / TRN validation with a sentence in err. */
int trn_config_validate(const trn_config *c, char *err, size_t errlen);

/* Command-line options: every field above has a --flag. trn_parse_flag consumes argv[i]
   (and argv[i+1] for a value) and returns the number consumed (1 or 2), 0 if the flag is
   not a config flag, or TRN_EINVAL with a message. trn_print_help lists them with the
   current values as defaults. */
int trn_parse_flag(trn_config *c, int argc, char **argv, int i, char *err, size_t errlen);
void trn_print_help(const trn_config *c, FILE *f);
/* One-line JSON of the whole configuration (for metrics and checkpoints). */
int trn_config_json(const trn_config *c, char *buf, size_t cap);

typedef struct trn_step_info {
    long long step;         /* steps completed after this one */
    int epoch;
    int T, B;
    double loss, ce;        /* optimised loss and pure CE of this step's batch */
    double sigreg;          /* --sigreg: the step's L_reg (mean over its micro-batches); 0 when off */
    float lr, grad_norm, prior_scale;
    float mu_entropy, sat_frac, tau_mean, beta_mean, lambda_sat, moe_lb;
                            /* tau_mean: the controller's temperature, tau_att (Guardian,
                               scripted; divides the prior) or tau_gac (GAC; divides the
                               whole logits) */
    int skipped;            /* non-finite loss: no update */
    int evaluated;          /* a periodic evaluation ran after this step */
    double val_ce;          /* its result (NaN if none) */
    int epoch_end;
    /* RPA prior of this step (means over layers; 0 without the prior) */
    float prior_marg_err, prior_std_pre, prior_clamp_frac;
    float attn_entropy, ent_band;   /* mean attention entropy (GAC), band penalty */
    /* CEAS gating (controller ceas): model FLOPs of the step (forward + backward, nominal,
       mdl_flops_per_token), of which not computed (pruned rows + frozen heads), the gate
       rows' extra forward FLOPs, the pruned share of query rows (heads not frozen), frozen
       heads */
    double step_flops, gate_skipped_flops, gate_overhead_flops;
    float gate_pruned_frac;
    int gate_frozen_heads;
} trn_step_info;

typedef struct trn trn; /* opaque */

/* What the MaxEnt init (cfg.maxent, cfg.maxent_c) did at trn_create (maxent.h). */
typedef struct trn_maxent_report {
    int a_applied;          /* (A): layers rescaled (0: off) */
    int a_met;              /* layers whose scale met the band */
    float a_sigma_q;        /* layer 0's W_q / W_k std */
    float a_T;              /* its predicted T at step 0 */
    float a_sigma_before;   /* layer 0's W_q std before */
    int c_checked;          /* (C): 1 when run */
    float c_var_min;        /* smallest per-row variance the first norm divides by */
    float c_eps_rec;        /* ceas_norm_eps's eps (rel 1e-3, floor 1e-12) */
    float c_bias_rec;       /* that row's shrink with eps_rec */
    float c_bias_model;     /* ... with the model's eps 1e-5 */
    int c_mats, c_over;     /* matrices checked, over the cap (rescaled when cap > 0) */
    float c_sigma_max;      /* largest sigma_max found (before any rescale) */
    float c_cap;
    char c_worst[MDL_NAME_MAX];
} trn_maxent_report;

/* Creates the model and all training state from cfg; train / val token ids are borrowed
   (they must outlive the trainer). Every id must be < cfg->model.vocab (TRN_EINVAL with
   the split and the position of the first that is not). */
int trn_create(trn **out, const trn_config *cfg, const uint16_t *train_ids, size_t n_train,
               const uint16_t *val_ids, size_t n_val, char *err, size_t errlen);
void trn_destroy(trn *t);
mdl_model *trn_model(trn *t);
/* The MaxEnt init report (zeros when cfg.maxent and cfg.maxent_c are off). */
int trn_maxent_report_get(const trn *t, trn_maxent_report *out);
long long trn_steps_done(const trn *t);
long long trn_total_steps(const trn *t);
long long trn_steps_per_epoch(const trn *t);
/* One optimizer step (plus the evaluation / epoch-end work that falls after it).
   TRN_ESTOPPED: the stop flag was raised during the step's periodic evaluation; the
   update is done (trn_steps_done counts it) and the evaluation and epoch-end work are
   pending (trn_pending): a checkpoint saved now keeps them pending, and the next
   trn_step, in this process or after trn_load, runs them first and returns without a
   new update (info->evaluated says so; info->T is 0). */
int trn_step(trn *t, trn_step_info *info);
/* 1 when the last step's periodic evaluation / epoch-end work is still to run. */
int trn_pending(const trn *t);
/* A stop flag the long loops poll (between evaluation chunks): when *flag is non-zero
   trn_evaluate and the periodic evaluation stop and return TRN_ESTOPPED, leaving the
   trainer consistent for trn_save. NULL: none (the default). wt2_train passes
   exio.h's ex_stop_flag(), raised by SIGINT, SIGTERM and SIGHUP. */
void trn_set_stop_flag(trn *t, volatile sig_atomic_t *flag);
/* A progress callback for evaluations (trn_evaluate and the periodic evaluation, which
   calls it): fn(user, 0, total) when one starts, then fn(user, done, total) after each
   batch of chunks (done <= total, in chunks of the context). NULL: none (the default). The
   caller decides what to print and how often (wt2_train: a bar on a terminal, a line every
   10 s otherwise, nothing for an evaluation shorter than about 2 s). */
typedef void (*trn_progress_fn)(void *user, long long done, long long total);
void trn_set_progress(trn *t, trn_progress_fn fn, void *user);
/* Gradient accumulation and data parallelism (issue 44). Each optimizer step's batch of B
   sequences (the global batch, --batch) is cut into M = size * accum micro-batches of B / M
   consecutive rows; micro-batch k = rank * accum + j is run by process `rank` as its j-th.
   Every process draws the whole batch from the data loader (its position stays global)
   and runs only its micro-batches: forward and backward of each one's MEAN loss, the
   gradients added in order (g_0, then + g_1, ...), then summed over the processes in rank
   order (allreduce_f32), then scaled by 1/M. The per-forward statistics (loss, CE, the
   controllers' observables: membership entropy and saturation, attention entropy, CEAS's
   attention observables, the RPA prior's diagnostics) are combined the same way in double
   precision and averaged over the M micro-batches (the CEAS sigma_qk is pooled from the
   micro-batches' means and spreads); the RPA running statistics are updated once from the
   memberships summed over all B rows. So the loss, the clipping norm and every controller
   see the same global values on every process, and the weights stay the same everywhere.
   The rule: a run with `size` processes of accum 1 is BIT-IDENTICAL to one process with
   accum = size (the same micro-batches, the same order of every sum), for a fixed thread
   count per process. M = 1 is the plain trainer. Batch-level terms of the loss (entropy
   band, entropy floor, MoE balance, the BATCH-source RPA prior) are each micro-batch's
   own: a run with M > 1 is not the M = 1 run (the micro-batches' means of those differ
   from the whole batch's), it is the micro-batch run.
   Evaluation with size > 1: the evaluation batches (those a single process runs, in its
   order) are dealt round-robin to the processes; each batch's CE sum and token count come
   back to every process (allreduce_f64 of per-batch entries, each held by one process:
   exact) and are added in batch order, so every process gets the single process's result
   bit for bit, for any size.
   Refused with M > 1 (TRN_EINVAL, with a sentence): --ceas-gating on, --maxent-pi on (their
   per-forward controllers act between the micro-batches' forwards, on one micro-batch's
   values: refused rather than silently local), --device cuda with size > 1 and no
   allreduce_f32_dev, and a batch (every context-game length's) not divisible by M.
   Collective calls (the functions below, with comm) must be made by every process in the
   same order: trn_step, trn_evaluate and trn_replicas_agree are collective when size > 1.
   The stop flag is agreed (any) in trn_evaluate's rounds. Call before the first trn_step;
   it may follow trn_load. Without this call (or with size 1 and accum 1) nothing changes. */
typedef struct trn_parallel {
    int rank, size;         /* this process among size (>= 1) */
    int accum;              /* micro-batches per process and step (>= 1) */
    void *comm;             /* passed to the functions below (unused when size is 1) */
    int (*allreduce_f32)(void *comm, float *buf, size_t n);   /* rank-ordered sums */
    int (*allreduce_f64)(void *comm, double *buf, size_t n);
    int (*bcast)(void *comm, void *buf, size_t bytes, int root);
    int (*any)(void *comm, int flag, int *out);
    /* ZeRO-1 (issue 44 item 4): zero = 1 with size > 1 shards the AdamW moments: process
       `rank` keeps only elements [lo, hi) of the flat moment vectors, lo = n / size * rank +
       n % size * rank / size (dist.h dp_shard_lo; hi: the same at rank + 1). After the
       rank-ordered gradient all-reduce and the clipping by the global norm (as without it),
       each process runs AdamW on its slice of the parameters only, then allgather_f32 (each
       process's slice of buf to every process, in place: dp_allgather_f32) gives every
       process the full updated weights. AdamW is elementwise, so the run is BIT-IDENTICAL
       to zero = 0 (the weights, the moments, every metric). EMA and SWA copies stay full on
       every process (they are updated from the gathered weights). Checkpoints keep their
       format: every process calls trn_gather_moments (collective) before the process that
       writes calls trn_save (which refuses sharded moments without it); trn_load reads the
       full moments and keeps this process's slice (trn_load may come first: the slice is
       cut here), so files load at any size and zero. CPU trainer only; zero = 1 with one
       process is zero = 0 (nothing to shard). Call once (a second call is refused once
       sharded). zero 0 (memset): today's trainer, unchanged. */
    int zero;
    int (*allgather_f32)(void *comm, float *buf, size_t n);
    /* The device trainer (--device cuda) with size > 1: the gradient's sum over the
       processes, n floats in DEVICE memory, queued on the model's stream (stream: its
       cudaStream_t), in the same rank order as allreduce_f32 (wt2_train: dpnccl.h's
       dpn_allreduce_f32 over NCCL, dev_comm its communicator). The micro-batches'
       gradients are added on the device in order (tk_residual_forward_cuda: one fp32 add
       each, as the CPU's +=) and scaled by 1/M there, so a device run on `size` processes
       is bit-identical to one device process with accum = size (same rule as above). The
       statistics stay on allreduce_f64 (host doubles). Required for a device trainer with
       size > 1 (refused without it); NULL otherwise. ZeRO-1 stays CPU only. */
    void *dev_comm;
    int (*allreduce_f32_dev)(void *dev_comm, float *buf, size_t n, void *stream);
} trn_parallel;
int trn_set_parallel(trn *t, const trn_parallel *p, char *err, size_t errlen);
/* Bytes of AdamW moments this process holds: 2 x 4 x n, or 2 x 4 x its slice (ZeRO-1). */
size_t trn_moment_bytes(const trn *t);
/* ZeRO-1 before a checkpoint: collective, every process calls it, then the writer (rank 0)
   calls trn_save, which writes the gathered full moments and frees them (rank 0 briefly
   holds 2 x 4 x n bytes more; the others free theirs at once). Not sharded: a no-op. */
int trn_gather_moments(trn *t);
/* A 64-bit hash of this process's weights, optimizer moments, EMA / SWA copies, RPA
   running statistics and step (FNV-1a over their bytes; the CPU trainer: 0 on a device).
   ZeRO-1: its own slice of the moments (trn_replicas_agree then compares all but those). */
uint64_t trn_state_hash(trn *t);
/* Collective (size > 1): *same = 1 when every process holds the same trn_state_hash as
   rank 0. Size 1: *same = 1. */
int trn_replicas_agree(trn *t, int *same);

/* Sequential non-overlapping evaluation of ids (n) at context T with the chosen weights
   (TRN_W_EMA / TRN_W_SWA fall back to raw when not available: *used says which);
   max_chunks 0 = all. TRN_ESTOPPED when the stop flag was raised (*ce is then NaN). */
int trn_evaluate(trn *t, const uint16_t *ids, size_t n, int T, int weights, int max_chunks,
                 double *ce, long long *ntok, int *used);
/* Weights the final evaluation uses: SWA if snapshots were averaged, else EMA if on,
   else raw. */
int trn_final_weights(const trn *t);
const char *trn_weights_name(int w);
/* Checkpoints (safetensors; atomic). Load refuses corrupted, truncated and mismatched
   files with a message, and leaves the trainer unchanged on failure. Every field of the
   saved state is range-checked as strictly as a flag: counters within the run's steps
   (0 <= step <= the schedule's length <= TRN_MAX_STEPS, updates + skipped steps <= step,
   epochs = step / steps per epoch, ...), booleans 0 or 1, controller state finite and in
   its range, weights, moments, EMA and SWA finite (second moments >= 0), and the
   training and evaluation token counts equal to this trainer's (a resume on another
   data directory or split is refused, saying both counts). The file must be checkpoint
   format 2 (ckpt.h: the header is checksummed too): an older file, or one without its
   checksums, is refused unless TRN_LOAD_ALLOW_NO_CRC. Trainer state version 2 (written
   since issue 37) records the token counts and the pending evaluation; version 1 is
   read (with TRN_LOAD_ALLOW_NO_CRC, as its files are format 1) without the count
   check. */
int trn_save(trn *t, const char *path, char *err, size_t errlen);
int trn_load(trn *t, const char *path, char *err, size_t errlen);
/* trn_load with flags: TRN_LOAD_ALLOW_NO_CRC accepts a checkpoint without the
   attnkit.crc32 / attnkit.hcrc32 entries (every checkpoint trn_save writes has both, so
   trn_load refuses a file without them: it was edited, written by something else or by
   an attnkit older than checkpoint format 2). The state's range checks apply anyway. */
#define TRN_LOAD_ALLOW_NO_CRC 1u
/* TRN_LOAD_EVAL_ONLY: for scoring a checkpoint (mcqa): the trainer may have been created
   on any tokens (the run's own training and evaluation token counts are range-checked,
   not compared with the trainer's), and trn_step refuses it afterwards (TRN_EINVAL): its
   data loader would point into another run's data. Weights, EMA, SWA, controller state
   and every other check are as for a resume. */
#define TRN_LOAD_EVAL_ONLY 2u
int trn_load_flags(trn *t, const char *path, unsigned flags, char *err, size_t errlen);
/* Metrics sink: one JSON line per log step and per evaluation (NULL: none). Non-finite
   numbers are written as null. */
void trn_set_metrics(trn *t, FILE *f);
/* The errno of the first metrics line that could not be written (each line is flushed
   and checked), or 0: a caller stops the run when it is set (a full disk). */
int trn_metrics_error(const trn *t);
/* Steps whose update was skipped (non-finite loss or gradient), over the whole run
   (resumes included). */
long long trn_steps_skipped(const trn *t);
/* A JSON number for v into buf: "%.<prec>f" (exponent form from 1e15 up), or "null"
   when v is not finite (JSON has no NaN or infinity). Returns buf. trn_json_gnum: %g. */
const char *trn_json_num(char *buf, size_t cap, int prec, double v);
const char *trn_json_gnum(char *buf, size_t cap, int prec, double v);
const char *trn_strerror(int err);

/* Muon's pieces (the top of this file), for tests and for other trainers.
   trn_muon_param: 1 when --optimizer muon updates tensor e with Muon: ndim 2, weight decay
   on, both dimensions > 1 and a name under "blocks." (the token and position embeddings,
   "wte" / "wpe", and "lnf" are outside the blocks); 0 otherwise (AdamW).
   trn_muon_orthogonalise: X (rows, cols), on ctx's device, replaced by NS5's approximation
   of its orthogonal polar factor U V^T: X <- X / (||X||_F + 1e-7), then `steps` times
   A = X X^T, B = b A + c A A, X = a X + B X (the X^T X form, X = a X + X B, when rows > cols:
   the same map on the smaller Gram matrix), (a, b, c) = (3.4445, -4.7750, 2.0315): the
   quintic coefficients of Keller Jordan's public Muon (github.com/KellerJordan/Muon,
   zeropower_via_newtonschulz5; the iteration's singular values land in about [0.7, 1.2]
   rather than at 1: that is the method). fp32 GEMMs (ex_sgemm; a device context runs them
   at TK_MATH_FP32 and restores the math after). work: trn_muon_work_floats(rows, cols)
   floats on the same device. TRN_OK, or TRN_EINVAL (bad sizes, NULL) / TRN_EIO (an op
   failed). */
int trn_muon_param(const mdl_tensor *e);
size_t trn_muon_work_floats(int rows, int cols);
int trn_muon_orthogonalise(const ex_ctx *ctx, float *X, int rows, int cols, int steps, float *work);
/* One Muon step of a 2-D tensor e (the formula at the top of this file): P, G, M (its
   momentum buffer) are e's numel floats on ctx's device, work trn_muon_step_floats(e)
   floats there; beta in [0, 1), steps >= 0, lr and wd finite. The trainer's own update;
   niah's trainer calls it too. TRN_OK, TRN_EINVAL or TRN_EIO. */
size_t trn_muon_step_floats(const mdl_tensor *e);
int trn_muon_step(const ex_ctx *ctx, const mdl_tensor *e, float *P, const float *G, float *M, float lr, float wd,
                  float beta, int steps, float *work);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_TRAIN_H */
