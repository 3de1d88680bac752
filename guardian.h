/* guardian.h - gain-aware training controllers for attention temperature, schedules,
   weight averaging and loss bookkeeping. v0.1.0 - MIT license (see the end of the file).

   Training-time controllers from two papers, as plain functions over numbers: each
   takes observables (validation CE, saturation fraction, membership entropy, per-layer
   gradients, ...) and returns new knob values (attention temperatures, penalty weights,
   learning rate, a context-length mixture). Nothing here touches a model: any trainer,
   in any framework, can drive them. Seeded and deterministic (own small RNG).

     - Guardian (seed 000 §4, §4.1, Listing 6): a 4 -> H -> H -> 3 tanh MLP policy with a
       diagonal Gaussian head and learned log-std, trained by REINFORCE with its own
       Adam. Actions move every layer's attention temperature tau_att by
       tau_step * beta * a0 (soft barrier above tau_max, projection onto
       [tau_min, tau_max]) and the penalty weights lambda_delta in [0, 1],
       lambda_sat in [0, 0.6]. Disabled (enable = 0) it changes nothing.
     - GAC (seed 003 §3.3, Algorithm 2): EMA of a validation metric, gain g_k, dead
       zone delta, projected multiplicative update
       tau <- clamp(tau * exp(-eta * u_k * dL/dtau), tau_min, tau_max), and the
       entropy-band penalty with its gradient.
     - The scripted temperature schedule (seed 000 Algorithm 1), the baseline.
     - Schedules and averaging (seed 000 §6): flat LR prelude then cosine to a floor;
       warm-in scale; logistic-map chaos factor with decaying amplitude (Listing 7);
       EMA of weights; SWA-select; the context game over context lengths (§6.1).
     - Loss helpers (Listing 8): pure vs label-smoothed CE bookkeeping (with the
       gradient of the smoothed loss), the membership entropy floor penalty and its
       gradient, membership entropy / saturation observables.
     - Every stateful controller saves to and loads from a flat byte buffer
       (magic, format version, kind, size, CRC-32; rejected when any is wrong).

   USAGE
     In exactly one C or C++ file:
        #define GUARDIAN_IMPLEMENTATION
        #include "guardian.h"
     Everywhere else just #include "guardian.h". A training loop:

        guardian_config gc = guardian_config_default();
        guardian g;
        float tau[12];                       // the model's per-layer tau_att
        guardian_obs obs;
        guardian_knobs k;
        int l, rc;
        gc.n_layers = 12;
        if (guardian_init(&g, &gc) != GUARDIAN_OK) return 1;
        for (l = 0; l < 12; l++) tau[l] = gc.tau_init;
        obs.gate_delta = 0.01f; obs.sat_frac = 0.2f;   // from the model
        obs.mu_entropy = 1.1f;  obs.val_ce = 5.4f;
        rc = guardian_step(&g, &obs, tau, &k);          // tau moved, k.lambda_sat ...
        // ... train, evaluate: new validation CE 5.39 (previous 5.40)
        if (rc == GUARDIAN_OK)
            rc = guardian_update(&g, guardian_reward(&gc, 5.39f, 5.40f));
        guardian_free(&g);

   COMPILE-TIME OPTIONS
     GUARDIAN_STATIC             all functions static (private copy per translation unit)
     GUARDIAN_MALLOC/GUARDIAN_FREE   allocator (define both or neither)
     GUARDIAN_ASSERT             internal-invariant assert (never used on user input)
     -fopenmp                    parallel EMA / SWA loops over long weight vectors and
                                 CE rows (element- or row-wise: results identical for
                                 any thread count)
     nvcc (__CUDACC__), or a C++ compiler with ATTNKIT_CUDA_SIM and tests/cuda_sim.h
                                 compiles the CUDA bodies (cuda/guardian.cuh, see CUDA)

   CUDA (cuda/guardian.cuh: copy it beside guardian.h, at cuda/guardian.cuh)
     The controllers stay scalar host code. What a GPU trainer runs every step on
     device-resident weights has a device twin: guardian_ema_update_cuda, and
     guardian_swa_offer_cuda (the snapshot decision is made on the host from the
     scalars, as guardian_swa_offer does; only the averaging runs on the device). They
     take DEVICE buffers (a host buffer: GUARDIAN_EINVAL, nothing launched) and a
     guardian_stream (a cudaStream_t; NULL: the default stream), launch asynchronously
     and return without synchronising. Compiled when this implementation is compiled by
     nvcc (or under the CPU simulation of CUDA); otherwise they return GUARDIAN_ENOCUDA.
     In such a build the plain guardian_ema_update and guardian_swa_offer route device
     buffers (device or managed memory) to them on the default stream, asynchronously
     as they are (both buffers on the device; one on each side: GUARDIAN_EINVAL); host
     buffers run the CPU loops as before. The device results are bit-identical to the
     CPU path's: the same float expressions, written with explicit fmas (fmaf on the host,
     __fmaf_rn on the device) where a product meets a sum, so no compiler's contraction
     (nvcc's default; g++ in C++ mode and clang where the target has FMA) can change a
     bit on either side. Neither side may flush subnormals (no --use_fast_math,
     -ftz=true, -ffast-math). NaN payloads may differ. guardian_set_log() receives a
     one-line message for each refusal of these paths.

   CONFIG KNOBS (defaults; [paper] = value stated by the paper, [ours] = our choice
   where the paper gives none)
     guardian_config: n_layers 1; hidden 64 [paper]; seed 1; enable 1;
       lr 1e-3, adam betas 0.9/0.999, eps 1e-8 [paper: Adam lr 1e-3];
       log_std_init 0 [paper], log_std range [-5, 2] [ours: keeps std finite];
       baseline_momentum 0.9 [ours: EMA reward baseline; 0 = plain REINFORCE, the
       loss Listing 6 writes, though not its gradient: see REWARD]; tau_init 0.68 [paper], tau_min 0.3 [paper], tau_max 2.0 [ours],
       tau_step 0.03 [paper], tau_barrier 0.10 [paper]; lambda_step 0.01,
       lambda_delta_max 1, lambda_sat_max 0.6 [paper]; beta 1 [paper];
       reward_gain (lambda_1) 1.0, reward_sig (lambda_2) 0.5, reward_sig_scale 100,
       reward_ce_eps 1e-6 [ours, see REWARD].
     gac_config: beta 0.1, delta 0, tau_min 0.5, tau_max 2.5, eta 0.01, h_min 2.0,
       h_max 5.0 [paper]; lambda_ent 1.0 [ours]; enable 1.
     guardian_sched_config (Algorithm 1): tau_min 0.5, tau_max 1.5, warmup 1200,
       total 8030, floor_frac 0.1, ce_zone 6.0, gain_gate 1e-3, nudge 0.02 [ours;
       warmup and total from the paper's WT2 run].
     guardian_lr_config: peak 3e-4, total 8030, flat_frac 0.1, floor_frac 0.1
       [paper: floor 5-10% of peak].
     guardian_chaos_config: r 3.9, x0 0.721, amp 0.25, decay 5e-4 [paper].
     guardian_swa_config: start_epoch 60 [paper], ce_lo 0, ce_hi 6.0,
       min_rel_gain 1e-3 [ours].
     guardian_cg_config: n 2, lengths {384, 768} [paper], eta 0.5, lambda_s 1.0,
       s0 0.5, lambda_h 0.1, h_max ln 4, temperature 1, q_floor 0 [ours]; seed 1.
     guardian_entfloor_config: R 4, alpha 0.02 [paper], eta 0.5 [ours].

   REWARD (the exact choice for R = -CE + lambda_1 (dCE)_+ + lambda_2 sigma(.))
     dCE = ce_prev - ce (positive when CE fell) and
       R = -ce + lambda_1 * max(0, dCE) + lambda_2 * sigmoid(k * dCE / max(ce, eps))
     with lambda_1 = reward_gain, lambda_2 = reward_sig, k = reward_sig_scale. The
     sigmoid of the *relative* gain makes the same absolute improvement worth more at
     already-low CE, as §4 asks; it is smooth in tau. guardian_update() subtracts an
     EMA baseline of past rewards (baseline_momentum) before the REINFORCE step (the
     first update only seeds the baseline); baseline_momentum = 0 gives the plain loss
     -reward * log p(a) that Listing 6 writes, with the sampled action a held fixed
     (the score-function gradient). It is NOT Listing 6 at the gradient level: the
     listing samples a = m + std * eps without detaching it, so (a - m) / std = eps is
     a constant of the parameters, log p(a) no longer depends on the mean network, and
     its backward moves only log_std (by reward per action dimension). This header
     keeps the REINFORCE estimator, the one §4's two-timescale argument assumes.
     Policy lr: the paper's 1e-3 is the default; on the toy problem in the tests it
     overshoots into the tau_max wall on some seeds (where the policy gradient
     vanishes), and 3e-4 converges on every seed tried.

   SHAPES (legend)
     L layers (or layers*heads for per-head temperatures), H_pol policy width,
     N rows (B*T tokens), V vocabulary, R regimes, K candidate context lengths,
     n length of a flat weight vector. Buffers are caller-owned, contiguous,
     row-major float32.

   INITIALISATION (drop-in use)
     Nothing to initialise in the host's model: the controllers act on knobs (attention
     temperature tau, label smoothing / entropy weights, learning rate) that the host
     reads each step. Start tau at the host's current value (1.0 for a plain softmax;
     tau_init 0.68 is the paper's from-scratch value and sharpens attention at once);
     use the LR schedule only in place of the host's own; guardian_init seeds the
     policy (log_std_init 0).

   ERRORS
     Every status-returning function returns GUARDIAN_OK (0) or a negative code;
     guardian_strerror() names it. On error nothing is written: no knob, state or
     output changes (in particular no NaN is ever written into a knob).
       GUARDIAN_EINVAL   NULL pointer, bad size, NaN/Inf input or hyper-parameter,
                         inverted bounds
       GUARDIAN_ENOMEM   allocation failed
       GUARDIAN_ERANGE   output buffer too small (state save), index out of range
       GUARDIAN_EFORMAT  state buffer: wrong magic, version, kind, size, checksum,
                         shape, or a decoded value out of range
       GUARDIAN_ESTATE   call out of order (guardian_update without a pending step)
       GUARDIAN_ENOCUDA  a *_cuda function in a build without CUDA (see CUDA)
       GUARDIAN_ECUDA    a CUDA launch or copy failed (the device buffer may then be
                         partly written; the host state is not)

   VERSION  0.1.0 (state format version 1)
*/
#ifndef GUARDIAN_H
#define GUARDIAN_H

#include <stddef.h>
#include <stdint.h>

#define GUARDIAN_VERSION_MAJOR 0
#define GUARDIAN_VERSION_MINOR 1
#define GUARDIAN_VERSION_PATCH 0
#define GUARDIAN_STATE_VERSION 1u
#define GUARDIAN_STATE_MAGIC 0x4E445247u /* "GRDN" little-endian */
#define GUARDIAN_STATE_HEADER 20         /* bytes before the payload */
#define GUARDIAN_CG_MAX 16               /* most candidate context lengths */

#ifdef GUARDIAN_STATIC
/* unused is expected in a static copy: silence -Wunused-function */
#if defined(__GNUC__) || defined(__clang__)
#define GUARDIANDEF static __attribute__((unused))
#else
#define GUARDIANDEF static
#endif
#else
#define GUARDIANDEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    GUARDIAN_OK = 0,
    GUARDIAN_EINVAL = -1,
    GUARDIAN_ENOMEM = -2,
    GUARDIAN_ERANGE = -3,
    GUARDIAN_EIO = -4,
    GUARDIAN_EFORMAT = -5,
    GUARDIAN_ESTATE = -6,
    GUARDIAN_ENOCUDA = -7, /* a *_cuda function in a build without CUDA */
    GUARDIAN_ECUDA = -8    /* a CUDA launch or runtime call failed */
};

GUARDIANDEF const char *guardian_strerror(int err);
/* Optional log callback (NULL: none; process-wide, set it before threads start): one
   line saying why the CUDA paths refused a call (mixed host/device buffers, a host
   buffer given to a *_cuda function, no CUDA in this build, a CUDA error). */
GUARDIANDEF void guardian_set_log(void (*fn)(const char *msg, void *user), void *user);

/* ---------------------------------------------------------------- RNG */
/* splitmix64: one 64-bit word of state; the same seed gives the same stream. */
typedef struct guardian_rng {
    uint64_t s;
} guardian_rng;

GUARDIANDEF void guardian_rng_seed(guardian_rng *r, uint64_t seed);
GUARDIANDEF uint64_t guardian_rng_u64(guardian_rng *r);
GUARDIANDEF double guardian_rng_uniform(guardian_rng *r); /* [0, 1), 53 bits */
GUARDIANDEF double guardian_rng_normal(guardian_rng *r);  /* N(0, 1), Box-Muller */

/* ---------------------------------------------------------------- Guardian */
typedef struct guardian_obs {       /* the policy's state (seed 000 §4) */
    float gate_delta;               /* change of the fuzzy gate since the last step */
    float sat_frac;                 /* saturation fraction of the memberships, [0,1] */
    float mu_entropy;               /* mean membership entropy */
    float val_ce;                   /* validation cross-entropy */
} guardian_obs;

typedef struct guardian_knobs {     /* what guardian_step hands back */
    float tau_mean;                 /* mean of the per-layer tau after the step */
    float lambda_delta;             /* in [0, lambda_delta_max] */
    float lambda_sat;               /* in [0, lambda_sat_max] */
    float action[3];                /* the sampled action (dtau, dlambda_delta, dlambda_sat) */
} guardian_knobs;

typedef struct guardian_config {
    int n_layers;                   /* L: temperatures moved per step (>= 1) */
    int hidden;                     /* policy width (64) */
    uint64_t seed;                  /* RNG seed: weight init and action noise */
    int enable;                     /* 0: step/update change nothing (inference) */
    float lr, adam_beta1, adam_beta2, adam_eps;   /* the policy's Adam */
    float log_std_init, log_std_min, log_std_max; /* learned log-std, clamped */
    float baseline_momentum;        /* EMA reward baseline in [0,1); 0: none */
    float tau_init;                 /* suggested initial tau (not applied by the header) */
    float tau_min, tau_max;         /* projection interval, 0 < tau_min < tau_max */
    float tau_step;                 /* tau += tau_step * beta * a0 */
    float tau_barrier;              /* tau -= tau_barrier * max(0, tau - tau_max) */
    float lambda_step;              /* lambda += lambda_step * beta * a{1,2} */
    float lambda_delta_max, lambda_sat_max;
    float lambda_delta_init, lambda_sat_init;
    float beta;                     /* ramp on the step size, >= 0 */
    float reward_gain;              /* lambda_1 */
    float reward_sig;               /* lambda_2 */
    float reward_sig_scale;         /* k in sigmoid(k * dCE / ce) */
    float reward_ce_eps;            /* floor on ce in the relative gain */
} guardian_config;

/* Fields are readable; change them only through the functions. */
typedef struct guardian {
    guardian_config cfg;
    int n_params;                   /* policy parameters (incl. log-std) */
    float *params, *adam_m, *adam_v;/* (n_params) each, one allocation */
    double *work;                   /* scratch: activations and gradients */
    int64_t adam_t;
    float lambda_delta, lambda_sat, beta;
    double baseline;
    int have_baseline;
    int pending;                    /* a sampled action awaits its reward */
    float last_obs[4], last_action[3];
    guardian_rng rng;
    int64_t n_steps, n_updates;
} guardian;

GUARDIANDEF guardian_config guardian_config_default(void);
GUARDIANDEF int guardian_config_check(const guardian_config *cfg);
/* Allocates the policy (PyTorch Linear init, seeded by cfg->seed). */
GUARDIANDEF int guardian_init(guardian *g, const guardian_config *cfg);
GUARDIANDEF void guardian_free(guardian *g);
/* Samples an action from the policy at obs, moves every tau[l] (in/out, (L)) and the
   lambdas, fills *out (may be NULL). Disabled: tau untouched, *out = current knobs. */
GUARDIANDEF int guardian_step(guardian *g, const guardian_obs *obs, float *tau,
                              guardian_knobs *out);
/* REINFORCE + Adam step for the pending action with the given reward. */
GUARDIANDEF int guardian_update(guardian *g, float reward);
/* The shaped reward (see REWARD). Returns NaN when ce or ce_prev is not finite. */
GUARDIANDEF float guardian_reward(const guardian_config *cfg, float ce, float ce_prev);
GUARDIANDEF int guardian_set_beta(guardian *g, float beta);
GUARDIANDEF int guardian_set_enabled(guardian *g, int enable);
/* Linear ramp: 0 before start, 1 after start + len (len <= 0: a step at start). */
GUARDIANDEF float guardian_ramp(int64_t step, int64_t start, int64_t len);
/* The policy's mean action and std at obs (no sampling, no state change). */
GUARDIANDEF int guardian_policy_mean(const guardian *g, const guardian_obs *obs,
                                     float mean[3], float std[3]);

/* ---------------------------------------------------------------- GAC */
typedef struct gac_config {
    float beta;                     /* EMA momentum of the metric (0.1) */
    float delta;                    /* dead zone: sharpen only when g_k > delta */
    float tau_min, tau_max;         /* projection interval, 0 < tau_min <= tau_max */
    float eta;                      /* controller step size */
    float h_min, h_max;             /* entropy band, h_min <= h_max */
    float lambda_ent;               /* weight of the entropy-band penalty */
    int enable;                     /* 0: inference, u_k = 0 and tau frozen */
} gac_config;

typedef struct gac {
    gac_config cfg;
    double m_bar;                   /* EMA of the metric */
    double last_gain;               /* g_k of the last observation */
    int have_m;                     /* m_bar initialised (first observation) */
    int u;                          /* u_k = 1[g_k > delta] */
    int64_t n_obs, n_updates;
} gac;

GUARDIANDEF gac_config gac_config_default(void);
GUARDIANDEF int gac_config_check(const gac_config *cfg);
GUARDIANDEF int gac_init(gac *g, const gac_config *cfg);
/* A validation step: metric m_k, higher is better (pass -CE or accuracy). The first
   observation initialises m_bar = m_k with g_k = 0. u (may be NULL) gets u_k. */
GUARDIANDEF int gac_observe(gac *g, float metric, int *u);
/* tau (n) in/out <- clamp(tau * exp(-eta * u_k * grad_tau), tau_min, tau_max);
   grad_tau (n) = dL_train/dtau; n = layers (or layers*heads). */
GUARDIANDEF int gac_update(gac *g, float *tau, const float *grad_tau, int n);
/* loss = lambda_ent * sum_l [max(0, h_min - H_l)^2 + max(0, H_l - h_max)^2];
   H (n) per-layer mean attention entropies; dH (n) += dloss/dH_l (NULL: skipped). */
GUARDIANDEF int gac_entropy_penalty(const gac_config *cfg, const float *H, int n,
                                    float *loss, float *dH);

/* ---------------------------------------------------------------- schedules */
typedef struct guardian_sched_config {  /* Algorithm 1 (seed 000) */
    float tau_min, tau_max;
    int64_t warmup;                 /* W: linear tau_min -> tau_max over t = 1..W */
    int64_t total;                  /* T > W: cosine from tau_max to the floor by t = T */
    float floor_frac;               /* f in [0,1]: floor = tau_min + f (tau_max - tau_min) */
    float ce_zone;                  /* z: nudge only when val CE < z ... */
    float gain_gate;                /* epsilon: ... and the improvement < epsilon */
    float nudge;                    /* Delta: tau <- min(tau + Delta, tau_max) */
} guardian_sched_config;

GUARDIANDEF guardian_sched_config guardian_sched_config_default(void);
/* tau at step t >= 0. have_val (0 or 1, else GUARDIAN_EINVAL): 1 when a validation
   result (val_ce, improvement = previous CE - val_ce) is available this step; with 0
   both are ignored. */
GUARDIANDEF int guardian_sched_tau(const guardian_sched_config *c, int64_t t, int have_val,
                                   float val_ce, float improvement, float *tau);

typedef struct guardian_lr_config {
    float peak;                     /* > 0 */
    int64_t total;                  /* steps; lr = floor from here on */
    float flat_frac;                /* [0,1): first flat_frac*total steps at peak */
    float floor_frac;               /* [0,1]: floor = floor_frac * peak */
} guardian_lr_config;

GUARDIANDEF guardian_lr_config guardian_lr_config_default(void);
GUARDIANDEF int guardian_lr(const guardian_lr_config *c, int64_t step, float *lr);
/* scale = min(1, step / max(1, warm_steps)), 0 for step <= 0. */
GUARDIANDEF int guardian_warm_in(int64_t step, int64_t warm_steps, float *scale);

typedef struct guardian_chaos_config {
    float r;                        /* logistic map parameter, (0, 4] */
    float x0;                       /* initial point, (0, 1) */
    float amp;                      /* initial amplitude, [0, 1] */
    float decay;                    /* amp_t = amp * exp(-decay * t), >= 0 */
} guardian_chaos_config;

typedef struct guardian_chaos {
    guardian_chaos_config cfg;
    double x;
    int64_t t;
    float last;                     /* factor of the last step (1 before any) */
} guardian_chaos;

GUARDIANDEF guardian_chaos_config guardian_chaos_config_default(void);
GUARDIANDEF int guardian_chaos_init(guardian_chaos *c, const guardian_chaos_config *cfg);
/* x <- r x (1 - x); t++; factor = (1 - a_t) + a_t x, in [1 - a_t, 1]. */
GUARDIANDEF int guardian_chaos_step(guardian_chaos *c, float *factor);
/* 1 + max_extra * a_t * x_t, in [1, 1 + max_extra] (the listing's temp() is
   truncated in the paper; this is our bounded, decaying reading of it). */
GUARDIANDEF int guardian_chaos_temp(const guardian_chaos *c, float max_extra, float *temp);

/* ---------------------------------------------------------------- averaging */
/* ema (n) <- decay * ema + (1 - decay) * w (n); decay in [0, 1]. With CUDA (see CUDA):
   ema and w both device pointers run guardian_ema_update_cuda on the default stream;
   one device and one host pointer: GUARDIAN_EINVAL. */
GUARDIANDEF int guardian_ema_update(float *ema, const float *w, int64_t n, float decay);

typedef struct guardian_swa_config {
    int64_t start_epoch;            /* no snapshot before this epoch */
    float ce_lo, ce_hi;             /* the helpful CE zone [ce_lo, ce_hi] */
    float min_rel_gain;             /* (ce_entry - ce) / ce_entry >= this */
} guardian_swa_config;

typedef struct guardian_swa {
    guardian_swa_config cfg;
    int64_t n_averaged, n_offered;
} guardian_swa;

GUARDIANDEF guardian_swa_config guardian_swa_config_default(void);
GUARDIANDEF int guardian_swa_init(guardian_swa *s, const guardian_swa_config *cfg);
/* *take = 1 when a snapshot at epoch with validation CE ce, whose entry snapshot
   had ce_entry (> 0), is to be averaged. */
GUARDIANDEF int guardian_swa_select(const guardian_swa_config *cfg, int64_t epoch,
                                    float ce_entry, float ce, int *take);
/* Offers a snapshot w (n); if selected, avg (n) <- avg + (w - avg) / (k + 1), k the
   count so far (the first one is copied). taken (may be NULL) gets the decision. With
   CUDA (see CUDA): avg and w both device pointers run guardian_swa_offer_cuda on the
   default stream; one device and one host pointer: GUARDIAN_EINVAL. */
GUARDIANDEF int guardian_swa_offer(guardian_swa *s, float *avg, const float *w, int64_t n,
                                   int64_t epoch, float ce_entry, float ce, int *taken);

/* ---- CUDA: the averaging on device-resident weights (cuda/guardian.cuh) ---- */
/* A cudaStream_t (NULL: the default stream). The calls below launch on it and return
   without synchronising: order later work on the same stream, or synchronise before
   reading the buffers on the host. Every buffer argument is a DEVICE pointer (device
   or managed memory; a host pointer: GUARDIAN_EINVAL, nothing launched); the
   controller state s and taken stay on the host. Without CUDA: GUARDIAN_ENOCUDA. */
typedef struct CUstream_st *guardian_stream;
/* 1 if a CUDA device is usable (always 0 without CUDA). */
GUARDIANDEF int guardian_cuda_available(void);
/* The device calls are written once each, in the list GUARDIAN__CUDA_API: an entry
   X(int, guardian_name_cuda, (parameters)) is the prototype
   `int guardian_name_cuda(parameters)`, documented above it in the list; the list is
   expanded here into the declarations and, without CUDA, into stubs that return
   GUARDIAN_ENOCUDA with the message "guardian_name_cuda: built without CUDA ...". */
#define GUARDIAN__CUDA_DECLARE(ret, name, params) GUARDIANDEF ret name params;
#define GUARDIAN__CUDA_API(X)                                                                   \
    /* As guardian_ema_update: ema (n) device <- decay * ema + (1 - decay) * w (n) device,      \
       element by element the CPU's bits (a = decay, b = 1 - decay rounded as on the host;      \
       fmaf(a, ema[i], b * w[i]): one explicit fma on both sides). ema == w is allowed; partly  \
       overlapping buffers are not. */                                                          \
    X(int, guardian_ema_update_cuda, (float *ema /* (n) device */,                              \
                                      const float *w /* (n) device */, int64_t n, float decay,  \
                                      guardian_stream stream))                                  \
    /* As guardian_swa_offer: the decision (guardian_swa_select) and the state update (s,       \
       *taken) on the host, then, if taken, avg (n) device <- a copy of w (n) device for the    \
       first snapshot, else avg + (w - avg) * k with k = (float)(1 / (n_averaged + 1)),         \
       the CPU's bits. On an error s and *taken are unchanged. */                               \
    X(int, guardian_swa_offer_cuda, (guardian_swa *s /* host */, float *avg /* (n) device */,   \
                                     const float *w /* (n) device */, int64_t n, int64_t epoch, \
                                     float ce_entry, float ce,                                  \
                                     int *taken /* host, may be NULL */,                        \
                                     guardian_stream stream))
GUARDIAN__CUDA_API(GUARDIAN__CUDA_DECLARE)

/* ---------------------------------------------------------------- context game */
typedef struct guardian_cg_config {
    int n;                          /* K candidate lengths, 1..GUARDIAN_CG_MAX */
    int lengths[GUARDIAN_CG_MAX];   /* the candidates (informational, > 0) */
    float eta;                      /* step on the log-weights */
    float lambda_s, s0;             /* saturation penalty lambda_s [sat - s0]_+ */
    float lambda_h, h_max;          /* entropy bonus lambda_h H / h_max */
    float temperature;              /* q = softmax(logw / temperature) */
    float q_floor;                  /* q <- (1 - K q_floor) q + q_floor, [0, 1/K) */
    uint64_t seed;                  /* for guardian_cg_sample */
} guardian_cg_config;

typedef struct guardian_cg {
    guardian_cg_config cfg;
    double logw[GUARDIAN_CG_MAX];   /* running log-weights (max kept at 0) */
    float q[GUARDIAN_CG_MAX];       /* the current mixture */
    guardian_rng rng;
    int64_t rounds;
} guardian_cg;

GUARDIANDEF guardian_cg_config guardian_cg_config_default(void);
GUARDIANDEF int guardian_cg_init(guardian_cg *cg, const guardian_cg_config *cfg);
/* u = -loss - lambda_s max(0, sat - s0) + lambda_h H / h_max */
GUARDIANDEF int guardian_cg_utility(const guardian_cg_config *cfg, float loss, float sat,
                                    float H, float *u);
/* One replicator/logit round from per-length observations loss, sat, H (K each;
   sat and H may be NULL: treated as 0). */
GUARDIANDEF int guardian_cg_update(guardian_cg *cg, const float *loss, const float *sat,
                                   const float *H);
/* The same round from utilities u (K) directly. */
GUARDIANDEF int guardian_cg_update_utility(guardian_cg *cg, const float *u);
/* Draws a candidate index from q. */
GUARDIANDEF int guardian_cg_sample(guardian_cg *cg, int *index);

/* ---------------------------------------------------------------- loss helpers */
/* Cross-entropy of logits (N,V) against targets (N) (a target < 0 is skipped), pure
   and label-smoothed (eps in [0,1)): smoothed = (1 - eps)(-log p_y) + eps mean_j(-log p_j),
   as PyTorch's label_smoothing. Sums over rows into *ce_pure_sum, *ce_smooth_sum,
   counted rows into *ntok (any may be NULL). dlogits (N,V) += grad_scale *
   d(smoothed sum)/dlogits (NULL: skipped). A target >= V is GUARDIAN_ERANGE. The sums
   use a double log-sum-exp and are added in row order (identical for any thread count);
   N doubles of scratch come from GUARDIAN_MALLOC (GUARDIAN_ENOMEM if that fails). */
GUARDIANDEF int guardian_ce_smoothed(const float *logits, const int *targets, int N, int V,
                                     float eps, double *ce_pure_sum, double *ce_smooth_sum,
                                     int64_t *ntok, float *dlogits, float grad_scale);

typedef struct guardian_ce_meter {  /* bookkeeping: optimise smoothed, report pure */
    double pure_sum, smooth_sum;
    int64_t ntok;
} guardian_ce_meter;

GUARDIANDEF void guardian_ce_meter_reset(guardian_ce_meter *m);
GUARDIANDEF int guardian_ce_meter_add(guardian_ce_meter *m, double pure_sum,
                                      double smooth_sum, int64_t ntok);
/* Mean pure CE, mean smoothed CE, perplexity exp(pure mean); any may be NULL. */
GUARDIANDEF int guardian_ce_meter_mean(const guardian_ce_meter *m, double *ce_pure,
                                       double *ce_smooth, double *ppl);

typedef struct guardian_entfloor_config {
    int R;                          /* regimes; H_max = ln(max(2, R)) */
    float eta;                      /* floor = eta * H_max, eta in [0, 1] */
    float alpha;                    /* penalty = alpha/2 (1 + lambda_sat) relu(floor - H) */
} guardian_entfloor_config;

GUARDIANDEF guardian_entfloor_config guardian_entfloor_config_default(void);
/* penalty and dpenalty/dH_mu at the mean membership entropy H_mu (either out may be
   NULL); lambda_sat from Guardian (>= 0). */
GUARDIANDEF int guardian_entropy_floor(const guardian_entfloor_config *cfg, float H_mu,
                                       float lambda_sat, float *penalty, float *dpen_dH);
/* Mean row entropy of memberships mu (N,R) (rows on the simplex, entries in [0,1]). */
GUARDIANDEF int guardian_mu_entropy(const float *mu, int64_t N, int R, float *H_mean);
/* dmu (N,R) += dH * dH_mean/dmu = dH * -(log mu + 1) / N (mu clamped at 1e-30). */
GUARDIANDEF int guardian_mu_entropy_backward(float *dmu, const float *mu, int64_t N, int R,
                                             float dH);
/* Fraction of rows of mu (N,R) whose largest membership is >= thresh. */
GUARDIANDEF int guardian_mu_saturation(const float *mu, int64_t N, int R, float thresh,
                                       float *frac);

/* ---------------------------------------------------------------- state I/O */
/* Each stateful controller: *_state_size gives the exact byte count (0 on NULL);
   *_save writes it (GUARDIAN_ERANGE if cap is smaller; *written gets the size either
   way when non-NULL); *_load restores a controller from exactly those bytes. Loading
   is all-or-nothing. A Guardian loads into one initialised with the same n_layers and
   hidden; the whole config and state (policy, Adam, RNG, pending action) are
   restored, so a resumed run continues bit-exactly. Format: little-endian u32 magic,
   u32 version, u32 kind, u32 payload bytes, u32 CRC-32 (of the first 16 bytes and the
   payload), payload. */
GUARDIANDEF size_t guardian_state_size(const guardian *g);
GUARDIANDEF int guardian_save(const guardian *g, void *buf, size_t cap, size_t *written);
GUARDIANDEF int guardian_load(guardian *g, const void *buf, size_t len);
GUARDIANDEF size_t gac_state_size(const gac *g);
GUARDIANDEF int gac_save(const gac *g, void *buf, size_t cap, size_t *written);
GUARDIANDEF int gac_load(gac *g, const void *buf, size_t len);
GUARDIANDEF size_t guardian_chaos_state_size(const guardian_chaos *c);
GUARDIANDEF int guardian_chaos_save(const guardian_chaos *c, void *buf, size_t cap,
                                    size_t *written);
GUARDIANDEF int guardian_chaos_load(guardian_chaos *c, const void *buf, size_t len);
GUARDIANDEF size_t guardian_swa_state_size(const guardian_swa *s);
GUARDIANDEF int guardian_swa_save(const guardian_swa *s, void *buf, size_t cap,
                                  size_t *written);
GUARDIANDEF int guardian_swa_load(guardian_swa *s, const void *buf, size_t len);
GUARDIANDEF size_t guardian_cg_state_size(const guardian_cg *cg);
GUARDIANDEF int guardian_cg_save(const guardian_cg *cg, void *buf, size_t cap,
                                 size_t *written);
GUARDIANDEF int guardian_cg_load(guardian_cg *cg, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* GUARDIAN_H */

/* ================================================================ implementation */
#ifdef GUARDIAN_IMPLEMENTATION
#ifndef GUARDIAN_IMPLEMENTATION_DONE
#define GUARDIAN_IMPLEMENTATION_DONE

/* GCC keeps IEEE exception semantics by default (-ftrapping-math): a loop with a
   compare-and-select around a float expression (a clamp before an exp, say) is then
   not if-converted, hence not vectorised, on AVX2 (AVX-512 gets masked instructions).
   Nothing here reads floating-point exception flags, so the implementation is compiled
   without that constraint; values are unchanged (this is not -ffast-math). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__INTEL_COMPILER)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#define GUARDIAN__PUSHED_NO_TRAPPING 1
#endif

#include <math.h>
#include <string.h>

#if defined(GUARDIAN_MALLOC) && !defined(GUARDIAN_FREE)
#error "guardian.h: define GUARDIAN_MALLOC and GUARDIAN_FREE together"
#endif
#if defined(GUARDIAN_FREE) && !defined(GUARDIAN_MALLOC)
#error "guardian.h: define GUARDIAN_MALLOC and GUARDIAN_FREE together"
#endif
#ifndef GUARDIAN_MALLOC
#include <stdlib.h>
#define GUARDIAN_MALLOC(sz) malloc(sz)
#define GUARDIAN_FREE(p) free(p)
#endif
#ifndef GUARDIAN_ASSERT
#include <assert.h>
#define GUARDIAN_ASSERT(x) assert(x)
#endif

#ifndef GUARDIAN_RESTRICT
#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
#define GUARDIAN_RESTRICT __restrict
#else
#define GUARDIAN_RESTRICT
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define GUARDIAN__KIND_POLICY 1u
#define GUARDIAN__KIND_GAC 2u
#define GUARDIAN__KIND_CHAOS 3u
#define GUARDIAN__KIND_SWA 4u
#define GUARDIAN__KIND_CG 5u

/* finite tests on the IEEE bits: they survive -ffast-math / -Ofast, which fold x == x
   and x - x == 0 */
static int guardian__finite(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7FF0000000000000ULL) != 0x7FF0000000000000ULL;
}
/* 1 if all n floats are finite: an OR over the bits (exponent all ones carries into
   bit 31 when one exponent unit is added), which vectorises */
static int guardian__all_finite(const float *x, size_t n)
{
    uint32_t bad = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & 0x7F800000u) + 0x00800000u;
    }
    return (bad & 0x80000000u) == 0;
}

/* the log callback (guardian_set_log) and the one place that calls it */
static void (*guardian__log_fn)(const char *msg, void *user) = NULL;
static void *guardian__log_user = NULL;

GUARDIANDEF void guardian_set_log(void (*fn)(const char *msg, void *user), void *user)
{
    guardian__log_fn = fn;
    guardian__log_user = user;
}

static int guardian__fail(int code, const char *msg)
{
    if (guardian__log_fn) guardian__log_fn(msg, guardian__log_user);
    return code;
}

GUARDIANDEF const char *guardian_strerror(int err)
{
    switch (err) {
    case GUARDIAN_OK: return "ok";
    case GUARDIAN_EINVAL: return "invalid argument";
    case GUARDIAN_ENOMEM: return "out of memory";
    case GUARDIAN_ERANGE: return "out of range (or buffer too small)";
    case GUARDIAN_EIO: return "i/o error";
    case GUARDIAN_EFORMAT: return "bad state buffer (magic, version, size or checksum)";
    case GUARDIAN_ESTATE: return "call out of order";
    case GUARDIAN_ENOCUDA: return "built without CUDA (compile with nvcc)";
    case GUARDIAN_ECUDA: return "CUDA error";
    default: return "unknown error";
    }
}

/* ---------------------------------------------------------------- RNG */
GUARDIANDEF void guardian_rng_seed(guardian_rng *r, uint64_t seed)
{
    if (r) r->s = seed ^ 0x6A09E667F3BCC909ULL;
}

GUARDIANDEF uint64_t guardian_rng_u64(guardian_rng *r)
{
    uint64_t z;
    if (!r) return 0;
    z = (r->s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

GUARDIANDEF double guardian_rng_uniform(guardian_rng *r)
{
    return (double)(guardian_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

GUARDIANDEF double guardian_rng_normal(guardian_rng *r)
{
    double u1 = 1.0 - guardian_rng_uniform(r); /* (0, 1] */
    double u2 = guardian_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---------------------------------------------------------------- serialisation */
/* One body function per controller walks its fields in a fixed order in three modes:
   count bytes, write, read. Little-endian on every host. */
enum { GUARDIAN__IO_COUNT = 0, GUARDIAN__IO_WRITE = 1, GUARDIAN__IO_READ = 2 };

typedef struct guardian__io {
    unsigned char *p;
    size_t cap, pos;
    int mode, err;
} guardian__io;

static void guardian__io_u32(guardian__io *io, uint32_t *v)
{
    if (io->err) return;
    if (io->mode != GUARDIAN__IO_COUNT) {
        if (io->cap - io->pos < 4 || io->pos > io->cap) { io->err = 1; return; }
        if (io->mode == GUARDIAN__IO_WRITE) {
            io->p[io->pos + 0] = (unsigned char)(*v & 0xFFu);
            io->p[io->pos + 1] = (unsigned char)((*v >> 8) & 0xFFu);
            io->p[io->pos + 2] = (unsigned char)((*v >> 16) & 0xFFu);
            io->p[io->pos + 3] = (unsigned char)((*v >> 24) & 0xFFu);
        } else {
            *v = (uint32_t)io->p[io->pos] | ((uint32_t)io->p[io->pos + 1] << 8) |
                 ((uint32_t)io->p[io->pos + 2] << 16) | ((uint32_t)io->p[io->pos + 3] << 24);
        }
    }
    io->pos += 4;
}

static void guardian__io_u64(guardian__io *io, uint64_t *v)
{
    uint32_t lo = (uint32_t)(*v & 0xFFFFFFFFu), hi = (uint32_t)(*v >> 32);
    guardian__io_u32(io, &lo);
    guardian__io_u32(io, &hi);
    if (io->mode == GUARDIAN__IO_READ && !io->err) *v = ((uint64_t)hi << 32) | lo;
}

static void guardian__io_i32(guardian__io *io, int *v)
{
    int32_t s = (int32_t)*v;
    uint32_t u;
    memcpy(&u, &s, 4);
    guardian__io_u32(io, &u);
    if (io->mode == GUARDIAN__IO_READ && !io->err) { memcpy(&s, &u, 4); *v = (int)s; }
}

static void guardian__io_i64(guardian__io *io, int64_t *v)
{
    uint64_t u;
    memcpy(&u, v, 8);
    guardian__io_u64(io, &u);
    if (io->mode == GUARDIAN__IO_READ && !io->err) memcpy(v, &u, 8);
}

static void guardian__io_f32(guardian__io *io, float *v)
{
    uint32_t u;
    memcpy(&u, v, 4);
    guardian__io_u32(io, &u);
    if (io->mode == GUARDIAN__IO_READ && !io->err) memcpy(v, &u, 4);
}

static void guardian__io_f64(guardian__io *io, double *v)
{
    uint64_t u;
    memcpy(&u, v, 8);
    guardian__io_u64(io, &u);
    if (io->mode == GUARDIAN__IO_READ && !io->err) memcpy(v, &u, 8);
}

static void guardian__io_f32s(guardian__io *io, float *a, size_t n)
{
    size_t i;
    for (i = 0; i < n && !io->err; i++) guardian__io_f32(io, &a[i]);
}

/* CRC-32 (IEEE, reflected 0xEDB88320), table built per call (1 KB, 2k operations) */
static uint32_t guardian__crc32(uint32_t crc, const unsigned char *p, size_t n)
{
    uint32_t tab[256], c;
    size_t i;
    int k;
    for (i = 0; i < 256; i++) {
        c = (uint32_t)i;
        for (k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        tab[i] = c;
    }
    crc = ~crc;
    for (i = 0; i < n; i++) crc = tab[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

typedef void (*guardian__body_fn)(guardian__io *io, void *obj);

static size_t guardian__payload_size(guardian__body_fn body, const void *obj)
{
    guardian__io io;
    io.p = NULL; io.cap = 0; io.pos = 0; io.mode = GUARDIAN__IO_COUNT; io.err = 0;
    body(&io, (void *)obj); /* count mode never writes through obj */
    return io.pos;
}

static int guardian__save(uint32_t kind, guardian__body_fn body, const void *obj,
                          void *buf, size_t cap, size_t *written)
{
    guardian__io io;
    size_t payload = guardian__payload_size(body, obj);
    size_t total = GUARDIAN_STATE_HEADER + payload;
    uint32_t u, crc;
    unsigned char *p = (unsigned char *)buf;
    if (written) *written = total;
    if (payload > 0xFFFFFFFFu) return GUARDIAN_ERANGE;
    if (!buf || cap < total) return GUARDIAN_ERANGE;
    io.p = p; io.cap = total; io.pos = 0; io.mode = GUARDIAN__IO_WRITE; io.err = 0;
    u = GUARDIAN_STATE_MAGIC; guardian__io_u32(&io, &u);
    u = GUARDIAN_STATE_VERSION; guardian__io_u32(&io, &u);
    u = kind; guardian__io_u32(&io, &u);
    u = (uint32_t)payload; guardian__io_u32(&io, &u);
    u = 0; guardian__io_u32(&io, &u);
    body(&io, (void *)obj); /* write mode only reads obj */
    GUARDIAN_ASSERT(!io.err && io.pos == total);
    crc = guardian__crc32(0, p, 16);
    crc = guardian__crc32(crc, p + GUARDIAN_STATE_HEADER, payload);
    io.pos = 16;
    guardian__io_u32(&io, &crc);
    return GUARDIAN_OK;
}

/* Checks the envelope; on success *payload points at the payload bytes. */
static int guardian__check_envelope(uint32_t kind, const void *buf, size_t len,
                                    const unsigned char **payload, size_t *plen)
{
    guardian__io io;
    uint32_t magic = 0, ver = 0, k = 0, n = 0, crc = 0, c;
    const unsigned char *p = (const unsigned char *)buf;
    if (!buf) return GUARDIAN_EINVAL;
    if (len < GUARDIAN_STATE_HEADER) return GUARDIAN_EFORMAT;
    io.p = (unsigned char *)p; io.cap = len; io.pos = 0; io.mode = GUARDIAN__IO_READ;
    io.err = 0; /* read mode never writes through io.p */
    guardian__io_u32(&io, &magic);
    guardian__io_u32(&io, &ver);
    guardian__io_u32(&io, &k);
    guardian__io_u32(&io, &n);
    guardian__io_u32(&io, &crc);
    if (io.err || magic != GUARDIAN_STATE_MAGIC || ver != GUARDIAN_STATE_VERSION ||
        k != kind)
        return GUARDIAN_EFORMAT;
    if ((size_t)n != len - GUARDIAN_STATE_HEADER) return GUARDIAN_EFORMAT;
    c = guardian__crc32(0, p, 16);
    c = guardian__crc32(c, p + GUARDIAN_STATE_HEADER, (size_t)n);
    if (c != crc) return GUARDIAN_EFORMAT;
    *payload = p + GUARDIAN_STATE_HEADER;
    *plen = (size_t)n;
    return GUARDIAN_OK;
}

/* Reads a payload into obj (a scratch copy). EFORMAT unless it is consumed exactly. */
static int guardian__read_payload(guardian__body_fn body, void *obj,
                                  const unsigned char *payload, size_t plen)
{
    guardian__io io;
    io.p = (unsigned char *)payload; io.cap = plen; io.pos = 0;
    io.mode = GUARDIAN__IO_READ; io.err = 0;
    body(&io, obj);
    if (io.err || io.pos != plen) return GUARDIAN_EFORMAT;
    return GUARDIAN_OK;
}

/* ---------------------------------------------------------------- Guardian */
#define GUARDIAN__NS 4 /* state dim */
#define GUARDIAN__NA 3 /* action dim */

static int guardian__n_params(int h)
{
    return h * GUARDIAN__NS + h + h * h + h + GUARDIAN__NA * h + GUARDIAN__NA + GUARDIAN__NA;
}

GUARDIANDEF guardian_config guardian_config_default(void)
{
    guardian_config c;
    memset(&c, 0, sizeof c);
    c.n_layers = 1;
    c.hidden = 64;
    c.seed = 1;
    c.enable = 1;
    c.lr = 1e-3f;
    c.adam_beta1 = 0.9f;
    c.adam_beta2 = 0.999f;
    c.adam_eps = 1e-8f;
    c.log_std_init = 0.0f;
    c.log_std_min = -5.0f;
    c.log_std_max = 2.0f;
    c.baseline_momentum = 0.9f;
    c.tau_init = 0.68f;
    c.tau_min = 0.3f;
    c.tau_max = 2.0f;
    c.tau_step = 0.03f;
    c.tau_barrier = 0.10f;
    c.lambda_step = 0.01f;
    c.lambda_delta_max = 1.0f;
    c.lambda_sat_max = 0.6f;
    c.lambda_delta_init = 0.0f;
    c.lambda_sat_init = 0.0f;
    c.beta = 1.0f;
    c.reward_gain = 1.0f;
    c.reward_sig = 0.5f;
    c.reward_sig_scale = 100.0f;
    c.reward_ce_eps = 1e-6f;
    return c;
}

GUARDIANDEF int guardian_config_check(const guardian_config *c)
{
    const float *f[24];
    int i, nf = 0;
    if (!c) return GUARDIAN_EINVAL;
    if (c->n_layers < 1 || c->hidden < 1 || c->hidden > 4096) return GUARDIAN_EINVAL;
    if (c->enable != 0 && c->enable != 1) return GUARDIAN_EINVAL;
    f[nf++] = &c->lr; f[nf++] = &c->adam_beta1; f[nf++] = &c->adam_beta2;
    f[nf++] = &c->adam_eps; f[nf++] = &c->log_std_init; f[nf++] = &c->log_std_min;
    f[nf++] = &c->log_std_max; f[nf++] = &c->baseline_momentum; f[nf++] = &c->tau_init;
    f[nf++] = &c->tau_min; f[nf++] = &c->tau_max; f[nf++] = &c->tau_step;
    f[nf++] = &c->tau_barrier; f[nf++] = &c->lambda_step; f[nf++] = &c->lambda_delta_max;
    f[nf++] = &c->lambda_sat_max; f[nf++] = &c->lambda_delta_init;
    f[nf++] = &c->lambda_sat_init; f[nf++] = &c->beta; f[nf++] = &c->reward_gain;
    f[nf++] = &c->reward_sig; f[nf++] = &c->reward_sig_scale; f[nf++] = &c->reward_ce_eps;
    for (i = 0; i < nf; i++)
        if (!guardian__finite(*f[i])) return GUARDIAN_EINVAL;
    if (c->lr < 0 || c->adam_beta1 < 0 || c->adam_beta1 >= 1 || c->adam_beta2 < 0 ||
        c->adam_beta2 >= 1 || c->adam_eps <= 0)
        return GUARDIAN_EINVAL;
    if (c->log_std_min > c->log_std_max || c->log_std_init < c->log_std_min ||
        c->log_std_init > c->log_std_max || c->log_std_max > 20 || c->log_std_min < -20)
        return GUARDIAN_EINVAL;
    if (c->baseline_momentum < 0 || c->baseline_momentum >= 1) return GUARDIAN_EINVAL;
    if (!(c->tau_min > 0) || !(c->tau_min < c->tau_max)) return GUARDIAN_EINVAL;
    if (c->tau_step < 0 || c->tau_barrier < 0 || c->tau_barrier > 1 || c->lambda_step < 0)
        return GUARDIAN_EINVAL;
    if (c->lambda_delta_max < 0 || c->lambda_sat_max < 0 || c->lambda_delta_init < 0 ||
        c->lambda_delta_init > c->lambda_delta_max || c->lambda_sat_init < 0 ||
        c->lambda_sat_init > c->lambda_sat_max)
        return GUARDIAN_EINVAL;
    if (c->beta < 0 || c->reward_sig_scale < 0 || !(c->reward_ce_eps > 0))
        return GUARDIAN_EINVAL;
    return GUARDIAN_OK;
}

static void guardian__zero(guardian *g)
{
    memset(g, 0, sizeof *g);
    g->params = NULL; g->adam_m = NULL; g->adam_v = NULL; g->work = NULL;
}

GUARDIANDEF int guardian_init(guardian *g, const guardian_config *cfg)
{
    int rc, h, np, i, j;
    float *mem;
    double *work;
    float *p;
    if (!g) return GUARDIAN_EINVAL;
    rc = guardian_config_check(cfg);
    if (rc != GUARDIAN_OK) return rc;
    h = cfg->hidden;
    np = guardian__n_params(h);
    mem = (float *)GUARDIAN_MALLOC(sizeof(float) * (size_t)np * 3);
    /* h1, h2, d2, d1 (H each) and the gradient (np) */
    work = (double *)GUARDIAN_MALLOC(sizeof(double) * ((size_t)4 * h + (size_t)np + 16));
    if (!mem || !work) {
        if (mem) GUARDIAN_FREE(mem);
        if (work) GUARDIAN_FREE(work);
        return GUARDIAN_ENOMEM;
    }
    guardian__zero(g);
    g->cfg = *cfg;
    g->n_params = np;
    g->params = mem;
    g->adam_m = mem + np;
    g->adam_v = mem + 2 * (size_t)np;
    g->work = work;
    for (i = 0; i < np; i++) { g->adam_m[i] = 0.0f; g->adam_v[i] = 0.0f; }
    guardian_rng_seed(&g->rng, cfg->seed);
    /* PyTorch nn.Linear init: W and b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) */
    p = g->params;
    {
        int fan[3], outs[3];
        fan[0] = GUARDIAN__NS; outs[0] = h;
        fan[1] = h; outs[1] = h;
        fan[2] = h; outs[2] = GUARDIAN__NA;
        for (j = 0; j < 3; j++) {
            double bound = 1.0 / sqrt((double)fan[j]);
            int n = outs[j] * fan[j] + outs[j];
            for (i = 0; i < n; i++)
                *p++ = (float)((2.0 * guardian_rng_uniform(&g->rng) - 1.0) * bound);
        }
    }
    for (i = 0; i < GUARDIAN__NA; i++) *p++ = cfg->log_std_init;
    GUARDIAN_ASSERT(p == g->params + np);
    g->lambda_delta = cfg->lambda_delta_init;
    g->lambda_sat = cfg->lambda_sat_init;
    g->beta = cfg->beta;
    return GUARDIAN_OK;
}

GUARDIANDEF void guardian_free(guardian *g)
{
    if (!g) return;
    if (g->params) GUARDIAN_FREE(g->params);
    if (g->work) GUARDIAN_FREE(g->work);
    guardian__zero(g);
}

/* Forward pass: h1 (H), h2 (H) in double, mean (3). */
static void guardian__forward(const guardian *g, const float s[4], double *h1, double *h2,
                              double mean[3])
{
    int H = g->cfg.hidden, i, j;
    const float *W1 = g->params, *b1 = W1 + H * GUARDIAN__NS;
    const float *W2 = b1 + H, *b2 = W2 + H * H;
    const float *W3 = b2 + H, *b3 = W3 + GUARDIAN__NA * H;
    for (i = 0; i < H; i++) {
        double z = b1[i];
        for (j = 0; j < GUARDIAN__NS; j++) z += (double)W1[i * GUARDIAN__NS + j] * s[j];
        h1[i] = tanh(z);
    }
    for (i = 0; i < H; i++) {
        double z = b2[i];
        for (j = 0; j < H; j++) z += (double)W2[i * H + j] * h1[j];
        h2[i] = tanh(z);
    }
    for (i = 0; i < GUARDIAN__NA; i++) {
        double z = b3[i];
        for (j = 0; j < H; j++) z += (double)W3[i * H + j] * h2[j];
        mean[i] = z;
    }
}

static const float *guardian__log_std(const guardian *g)
{
    return g->params + g->n_params - GUARDIAN__NA;
}

static int guardian__obs_ok(const guardian_obs *o)
{
    return guardian__finite(o->gate_delta) && guardian__finite(o->sat_frac) &&
           guardian__finite(o->mu_entropy) && guardian__finite(o->val_ce);
}

static float guardian__tau_mean(const float *tau, int n)
{
    double s = 0;
    int i;
    for (i = 0; i < n; i++) s += tau[i];
    return (float)(s / n);
}

GUARDIANDEF int guardian_policy_mean(const guardian *g, const guardian_obs *obs,
                                     float mean[3], float std[3])
{
    float s[4];
    double m[3];
    const float *ls;
    int i;
    if (!g || !g->params || !obs || !guardian__obs_ok(obs)) return GUARDIAN_EINVAL;
    s[0] = obs->gate_delta; s[1] = obs->sat_frac; s[2] = obs->mu_entropy; s[3] = obs->val_ce;
    guardian__forward(g, s, g->work, g->work + g->cfg.hidden, m);
    ls = guardian__log_std(g);
    for (i = 0; i < GUARDIAN__NA; i++) {
        if (mean) mean[i] = (float)m[i];
        if (std) std[i] = (float)exp((double)ls[i]);
    }
    return GUARDIAN_OK;
}

static double guardian__clampd(double x, double lo, double hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

GUARDIANDEF int guardian_step(guardian *g, const guardian_obs *obs, float *tau,
                              guardian_knobs *out)
{
    int L, i;
    float s[4];
    double m[3], a[3];
    const float *ls;
    if (!g || !g->params || !obs || !tau) return GUARDIAN_EINVAL;
    L = g->cfg.n_layers;
    if (!guardian__obs_ok(obs)) return GUARDIAN_EINVAL;
    for (i = 0; i < L; i++)
        if (!guardian__finite(tau[i])) return GUARDIAN_EINVAL;
    if (!g->cfg.enable) {
        if (out) {
            out->tau_mean = guardian__tau_mean(tau, L);
            out->lambda_delta = g->lambda_delta;
            out->lambda_sat = g->lambda_sat;
            out->action[0] = out->action[1] = out->action[2] = 0.0f;
        }
        return GUARDIAN_OK;
    }
    s[0] = obs->gate_delta; s[1] = obs->sat_frac; s[2] = obs->mu_entropy; s[3] = obs->val_ce;
    guardian__forward(g, s, g->work, g->work + g->cfg.hidden, m);
    ls = guardian__log_std(g);
    {
        guardian_rng saved = g->rng;
        for (i = 0; i < GUARDIAN__NA; i++) {
            a[i] = m[i] + exp((double)ls[i]) * guardian_rng_normal(&g->rng);
            if (!guardian__finite(a[i]) || !guardian__finite((float)a[i])) {
                g->rng = saved; /* all-or-nothing */
                return GUARDIAN_EINVAL;
            }
        }
    }
    {
        double scale = g->beta, tmax = g->cfg.tau_max, tmin = g->cfg.tau_min;
        double d = (double)g->cfg.tau_step * scale * a[0];
        for (i = 0; i < L; i++) {
            double t = (double)tau[i] + d;
            double over = t > tmax ? t - tmax : 0.0;
            t -= (double)g->cfg.tau_barrier * over;
            tau[i] = (float)guardian__clampd(t, tmin, tmax);
        }
        g->lambda_delta = (float)guardian__clampd(
            g->lambda_delta + (double)g->cfg.lambda_step * scale * a[1], 0.0,
            g->cfg.lambda_delta_max);
        g->lambda_sat = (float)guardian__clampd(
            g->lambda_sat + (double)g->cfg.lambda_step * scale * a[2], 0.0,
            g->cfg.lambda_sat_max);
    }
    memcpy(g->last_obs, s, sizeof s);
    for (i = 0; i < GUARDIAN__NA; i++) g->last_action[i] = (float)a[i];
    g->pending = 1;
    g->n_steps++;
    if (out) {
        out->tau_mean = guardian__tau_mean(tau, L);
        out->lambda_delta = g->lambda_delta;
        out->lambda_sat = g->lambda_sat;
        for (i = 0; i < GUARDIAN__NA; i++) out->action[i] = (float)a[i];
    }
    return GUARDIAN_OK;
}

GUARDIANDEF float guardian_reward(const guardian_config *cfg, float ce, float ce_prev)
{
    double d, rel, r;
    if (!cfg || !guardian__finite(ce) || !guardian__finite(ce_prev)) return (float)NAN;
    d = (double)ce_prev - (double)ce;
    rel = d / (ce > cfg->reward_ce_eps ? (double)ce : (double)cfg->reward_ce_eps);
    r = -(double)ce + (double)cfg->reward_gain * (d > 0 ? d : 0.0) +
        (double)cfg->reward_sig / (1.0 + exp(-(double)cfg->reward_sig_scale * rel));
    return (float)r;
}

GUARDIANDEF int guardian_update(guardian *g, float reward)
{
    int H, np, i, j;
    double m[3], dm[3], dls[3], adv;
    double *h1, *h2, *d2, *d1, *gr;
    float *W2, *W3;
    const float *ls;
    if (!g || !g->params) return GUARDIAN_EINVAL;
    if (!g->cfg.enable) return GUARDIAN_OK;
    if (!guardian__finite(reward)) return GUARDIAN_EINVAL;
    if (!g->pending) return GUARDIAN_ESTATE;
    H = g->cfg.hidden;
    np = g->n_params;
    h1 = g->work; h2 = h1 + H; d2 = h2 + H; d1 = d2 + H;
    guardian__forward(g, g->last_obs, h1, h2, m);
    ls = guardian__log_std(g);
    /* advantage against an EMA baseline of earlier rewards */
    if (g->cfg.baseline_momentum > 0) {
        if (g->have_baseline) adv = (double)reward - g->baseline;
        else adv = 0.0;
    } else {
        adv = reward;
    }
    /* loss = -adv * log p(a); dlogp/dm = (a-m)/s^2, dlogp/dlog s = (a-m)^2/s^2 - 1 */
    for (i = 0; i < GUARDIAN__NA; i++) {
        double s = exp((double)ls[i]);
        double z = ((double)g->last_action[i] - m[i]) / s;
        dm[i] = -adv * z / s;
        dls[i] = -adv * (z * z - 1.0);
    }
    /* backprop through the MLP into the gradient buffer (parameter order) */
    W2 = g->params + H * GUARDIAN__NS + H;
    W3 = W2 + H * H + H;
    for (j = 0; j < H; j++) {
        double s = 0;
        for (i = 0; i < GUARDIAN__NA; i++) s += (double)W3[i * H + j] * dm[i];
        d2[j] = s * (1.0 - h2[j] * h2[j]);
    }
    for (j = 0; j < H; j++) {
        double s = 0;
        for (i = 0; i < H; i++) s += (double)W2[i * H + j] * d2[i];
        d1[j] = s * (1.0 - h1[j] * h1[j]);
    }
    for (i = 0; i < GUARDIAN__NA; i++)
        if (!guardian__finite(dm[i]) || !guardian__finite(dls[i])) return GUARDIAN_EINVAL;
    for (j = 0; j < H; j++)
        if (!guardian__finite(d1[j]) || !guardian__finite(d2[j])) return GUARDIAN_EINVAL;
    gr = d1 + H;
    {
        double *q = gr;
        for (i = 0; i < H; i++)                     /* W1 (H,4) */
            for (j = 0; j < GUARDIAN__NS; j++) *q++ = d1[i] * (double)g->last_obs[j];
        for (i = 0; i < H; i++) *q++ = d1[i];       /* b1 */
        for (i = 0; i < H; i++)                     /* W2 (H,H) */
            for (j = 0; j < H; j++) *q++ = d2[i] * h1[j];
        for (i = 0; i < H; i++) *q++ = d2[i];       /* b2 */
        for (i = 0; i < GUARDIAN__NA; i++)          /* W3 (3,H) */
            for (j = 0; j < H; j++) *q++ = dm[i] * h2[j];
        for (i = 0; i < GUARDIAN__NA; i++) *q++ = dm[i];  /* b3 */
        for (i = 0; i < GUARDIAN__NA; i++) *q++ = dls[i]; /* log-std */
        GUARDIAN_ASSERT(q == gr + np);
    }
    /* Adam (PyTorch form, bias-corrected) */
    {
        double b1 = g->cfg.adam_beta1, b2 = g->cfg.adam_beta2, lr = g->cfg.lr;
        double eps = g->cfg.adam_eps, c1, c2;
        int64_t t = g->adam_t + 1;
        int k;
        float *GUARDIAN_RESTRICT P = g->params;
        float *GUARDIAN_RESTRICT M = g->adam_m;
        float *GUARDIAN_RESTRICT Q = g->adam_v;
        const double *GUARDIAN_RESTRICT G = gr;
        c1 = 1.0 / (1.0 - pow(b1, (double)t)); /* bias corrections, as factors */
        c2 = 1.0 / (1.0 - pow(b2, (double)t));
        for (k = 0; k < np; k++) {
            double mm = b1 * M[k] + (1.0 - b1) * G[k];
            double vv = b2 * Q[k] + (1.0 - b2) * G[k] * G[k];
            M[k] = (float)mm;
            Q[k] = (float)vv;
            P[k] = (float)((double)P[k] - lr * (mm * c1) / (sqrt(vv * c2) + eps));
        }
        g->adam_t = t;
    }
    {
        float *lsw = g->params + np - GUARDIAN__NA;
        for (i = 0; i < GUARDIAN__NA; i++)
            lsw[i] = (float)guardian__clampd(lsw[i], g->cfg.log_std_min, g->cfg.log_std_max);
    }
    if (g->cfg.baseline_momentum > 0) {
        if (g->have_baseline)
            g->baseline = g->cfg.baseline_momentum * g->baseline +
                          (1.0 - g->cfg.baseline_momentum) * (double)reward;
        else
            g->baseline = reward;
        g->have_baseline = 1;
    }
    g->pending = 0;
    g->n_updates++;
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_set_beta(guardian *g, float beta)
{
    if (!g || !guardian__finite(beta) || beta < 0) return GUARDIAN_EINVAL;
    g->beta = beta;
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_set_enabled(guardian *g, int enable)
{
    if (!g || (enable != 0 && enable != 1)) return GUARDIAN_EINVAL;
    g->cfg.enable = enable;
    if (!enable) g->pending = 0;
    return GUARDIAN_OK;
}

GUARDIANDEF float guardian_ramp(int64_t step, int64_t start, int64_t len)
{
    if (step < start) return 0.0f;
    if (len <= 0) return 1.0f;
    if (step - start >= len) return 1.0f;
    return (float)((double)(step - start) / (double)len);
}

static void guardian__cfg_io(guardian__io *io, guardian_config *c)
{
    int i;
    float *f[23];
    int nf = 0;
    guardian__io_i32(io, &c->n_layers);
    guardian__io_i32(io, &c->hidden);
    guardian__io_u64(io, &c->seed);
    guardian__io_i32(io, &c->enable);
    f[nf++] = &c->lr; f[nf++] = &c->adam_beta1; f[nf++] = &c->adam_beta2;
    f[nf++] = &c->adam_eps; f[nf++] = &c->log_std_init; f[nf++] = &c->log_std_min;
    f[nf++] = &c->log_std_max; f[nf++] = &c->baseline_momentum; f[nf++] = &c->tau_init;
    f[nf++] = &c->tau_min; f[nf++] = &c->tau_max; f[nf++] = &c->tau_step;
    f[nf++] = &c->tau_barrier; f[nf++] = &c->lambda_step; f[nf++] = &c->lambda_delta_max;
    f[nf++] = &c->lambda_sat_max; f[nf++] = &c->lambda_delta_init;
    f[nf++] = &c->lambda_sat_init; f[nf++] = &c->beta; f[nf++] = &c->reward_gain;
    f[nf++] = &c->reward_sig; f[nf++] = &c->reward_sig_scale; f[nf++] = &c->reward_ce_eps;
    for (i = 0; i < nf; i++) guardian__io_f32(io, f[i]);
}

static void guardian__policy_body(guardian__io *io, void *obj)
{
    guardian *g = (guardian *)obj;
    int hid = g->cfg.hidden, nl = g->cfg.n_layers, np = g->n_params;
    guardian__cfg_io(io, &g->cfg);
    guardian__io_i32(io, &g->n_params);
    if (io->mode == GUARDIAN__IO_READ &&
        (g->cfg.hidden != hid || g->cfg.n_layers != nl || g->n_params != np)) {
        io->err = 2;
        return;
    }
    guardian__io_f32s(io, g->params, (size_t)np);
    guardian__io_f32s(io, g->adam_m, (size_t)np);
    guardian__io_f32s(io, g->adam_v, (size_t)np);
    guardian__io_i64(io, &g->adam_t);
    guardian__io_f32(io, &g->lambda_delta);
    guardian__io_f32(io, &g->lambda_sat);
    guardian__io_f32(io, &g->beta);
    guardian__io_f64(io, &g->baseline);
    guardian__io_i32(io, &g->have_baseline);
    guardian__io_i32(io, &g->pending);
    guardian__io_f32s(io, g->last_obs, 4);
    guardian__io_f32s(io, g->last_action, 3);
    guardian__io_u64(io, &g->rng.s);
    guardian__io_i64(io, &g->n_steps);
    guardian__io_i64(io, &g->n_updates);
}

GUARDIANDEF size_t guardian_state_size(const guardian *g)
{
    if (!g || !g->params) return 0;
    return GUARDIAN_STATE_HEADER + guardian__payload_size(guardian__policy_body, g);
}

GUARDIANDEF int guardian_save(const guardian *g, void *buf, size_t cap, size_t *written)
{
    if (!g || !g->params) return GUARDIAN_EINVAL;
    return guardian__save(GUARDIAN__KIND_POLICY, guardian__policy_body, g, buf, cap, written);
}

GUARDIANDEF int guardian_load(guardian *g, const void *buf, size_t len)
{
    const unsigned char *pl;
    size_t plen;
    int rc, i, np;
    guardian t;
    float *mem;
    if (!g || !g->params || !buf) return GUARDIAN_EINVAL;
    rc = guardian__check_envelope(GUARDIAN__KIND_POLICY, buf, len, &pl, &plen);
    if (rc != GUARDIAN_OK) return rc;
    np = g->n_params;
    mem = (float *)GUARDIAN_MALLOC(sizeof(float) * (size_t)np * 3);
    if (!mem) return GUARDIAN_ENOMEM;
    t = *g;
    t.params = mem; t.adam_m = mem + np; t.adam_v = mem + 2 * (size_t)np;
    rc = guardian__read_payload(guardian__policy_body, &t, pl, plen);
    if (rc == GUARDIAN_OK && guardian_config_check(&t.cfg) != GUARDIAN_OK) rc = GUARDIAN_EFORMAT;
    if (rc == GUARDIAN_OK) {
        const float *ls = t.params + np - GUARDIAN__NA;
        for (i = 0; i < 3 * np && rc == GUARDIAN_OK; i++)
            if (!guardian__finite(mem[i])) rc = GUARDIAN_EFORMAT;
        for (i = 0; i < np && rc == GUARDIAN_OK; i++)
            if (t.adam_v[i] < 0) rc = GUARDIAN_EFORMAT;
        for (i = 0; i < GUARDIAN__NA && rc == GUARDIAN_OK; i++)
            if (ls[i] < t.cfg.log_std_min || ls[i] > t.cfg.log_std_max) rc = GUARDIAN_EFORMAT;
        for (i = 0; i < 4 && rc == GUARDIAN_OK; i++)
            if (!guardian__finite(t.last_obs[i])) rc = GUARDIAN_EFORMAT;
        for (i = 0; i < 3 && rc == GUARDIAN_OK; i++)
            if (!guardian__finite(t.last_action[i])) rc = GUARDIAN_EFORMAT;
        if (t.adam_t < 0 || t.n_steps < 0 || t.n_updates < 0 ||
            !guardian__finite(t.lambda_delta) || t.lambda_delta < 0 ||
            t.lambda_delta > t.cfg.lambda_delta_max || !guardian__finite(t.lambda_sat) ||
            t.lambda_sat < 0 || t.lambda_sat > t.cfg.lambda_sat_max ||
            !guardian__finite(t.beta) || t.beta < 0 || !guardian__finite(t.baseline) ||
            (t.have_baseline != 0 && t.have_baseline != 1) ||
            (t.pending != 0 && t.pending != 1))
            rc = GUARDIAN_EFORMAT;
    }
    if (rc == GUARDIAN_OK) {
        memcpy(g->params, mem, sizeof(float) * (size_t)np * 3);
        t.params = g->params; t.adam_m = g->adam_m; t.adam_v = g->adam_v; t.work = g->work;
        *g = t;
    }
    GUARDIAN_FREE(mem);
    return rc;
}

/* ---------------------------------------------------------------- GAC */
GUARDIANDEF gac_config gac_config_default(void)
{
    gac_config c;
    memset(&c, 0, sizeof c);
    c.beta = 0.1f;
    c.delta = 0.0f;
    c.tau_min = 0.5f;
    c.tau_max = 2.5f;
    c.eta = 0.01f;
    c.h_min = 2.0f;
    c.h_max = 5.0f;
    c.lambda_ent = 1.0f;
    c.enable = 1;
    return c;
}

GUARDIANDEF int gac_config_check(const gac_config *c)
{
    if (!c) return GUARDIAN_EINVAL;
    if (!guardian__finite(c->beta) || !guardian__finite(c->delta) ||
        !guardian__finite(c->tau_min) || !guardian__finite(c->tau_max) ||
        !guardian__finite(c->eta) || !guardian__finite(c->h_min) ||
        !guardian__finite(c->h_max) || !guardian__finite(c->lambda_ent))
        return GUARDIAN_EINVAL;
    if (c->beta <= 0 || c->beta > 1 || c->delta < 0 || !(c->tau_min > 0) ||
        c->tau_min > c->tau_max || c->eta < 0 || c->h_min > c->h_max || c->lambda_ent < 0)
        return GUARDIAN_EINVAL;
    if (c->enable != 0 && c->enable != 1) return GUARDIAN_EINVAL;
    return GUARDIAN_OK;
}

GUARDIANDEF int gac_init(gac *g, const gac_config *cfg)
{
    int rc;
    if (!g) return GUARDIAN_EINVAL;
    rc = gac_config_check(cfg);
    if (rc != GUARDIAN_OK) return rc;
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    return GUARDIAN_OK;
}

GUARDIANDEF int gac_observe(gac *g, float metric, int *u)
{
    double nb;
    if (!g || !guardian__finite(metric)) return GUARDIAN_EINVAL;
    if (!g->cfg.enable) {
        g->u = 0;
        if (u) *u = 0;
        return GUARDIAN_OK;
    }
    if (!g->have_m) {
        g->m_bar = metric;
        g->last_gain = 0.0;
        g->have_m = 1;
    } else {
        nb = (1.0 - (double)g->cfg.beta) * g->m_bar + (double)g->cfg.beta * (double)metric;
        g->last_gain = nb - g->m_bar;
        g->m_bar = nb;
    }
    g->u = g->last_gain > (double)g->cfg.delta ? 1 : 0;
    g->n_obs++;
    if (u) *u = g->u;
    return GUARDIAN_OK;
}

GUARDIANDEF int gac_update(gac *g, float *tau, const float *grad_tau, int n)
{
    int i;
    double lo, hi, step;
    if (!g || !tau || n < 1 || (!grad_tau && g->u)) return GUARDIAN_EINVAL;
    for (i = 0; i < n; i++) {
        if (!guardian__finite(tau[i])) return GUARDIAN_EINVAL;
        if (grad_tau && !guardian__finite(grad_tau[i])) return GUARDIAN_EINVAL;
    }
    if (!g->cfg.enable) return GUARDIAN_OK; /* inference: tau frozen */
    lo = g->cfg.tau_min; hi = g->cfg.tau_max;
    step = g->u ? (double)g->cfg.eta : 0.0;
    for (i = 0; i < n; i++) {
        double t = tau[i];
        if (step != 0.0) {
            double e = -step * (double)grad_tau[i];
            if (e > 50.0) e = 50.0; /* exp stays finite; clamped below anyway */
            t *= exp(e);
        }
        tau[i] = (float)guardian__clampd(t, lo, hi);
    }
    g->n_updates++;
    return GUARDIAN_OK;
}

GUARDIANDEF int gac_entropy_penalty(const gac_config *cfg, const float *H, int n,
                                    float *loss, float *dH)
{
    int i;
    double s = 0;
    if (!cfg || !H || n < 1 || gac_config_check(cfg) != GUARDIAN_OK) return GUARDIAN_EINVAL;
    for (i = 0; i < n; i++)
        if (!guardian__finite(H[i])) return GUARDIAN_EINVAL;
    for (i = 0; i < n; i++) {
        double lo = (double)cfg->h_min - H[i], hi = (double)H[i] - cfg->h_max;
        double d = 0;
        if (lo > 0) { s += lo * lo; d -= 2.0 * lo; }
        if (hi > 0) { s += hi * hi; d += 2.0 * hi; }
        if (dH) dH[i] += (float)(cfg->lambda_ent * d);
    }
    if (loss) *loss = (float)(cfg->lambda_ent * s);
    return GUARDIAN_OK;
}

static void guardian__gac_body(guardian__io *io, void *obj)
{
    gac *g = (gac *)obj;
    guardian__io_f32(io, &g->cfg.beta);
    guardian__io_f32(io, &g->cfg.delta);
    guardian__io_f32(io, &g->cfg.tau_min);
    guardian__io_f32(io, &g->cfg.tau_max);
    guardian__io_f32(io, &g->cfg.eta);
    guardian__io_f32(io, &g->cfg.h_min);
    guardian__io_f32(io, &g->cfg.h_max);
    guardian__io_f32(io, &g->cfg.lambda_ent);
    guardian__io_i32(io, &g->cfg.enable);
    guardian__io_f64(io, &g->m_bar);
    guardian__io_f64(io, &g->last_gain);
    guardian__io_i32(io, &g->have_m);
    guardian__io_i32(io, &g->u);
    guardian__io_i64(io, &g->n_obs);
    guardian__io_i64(io, &g->n_updates);
}

GUARDIANDEF size_t gac_state_size(const gac *g)
{
    if (!g) return 0;
    return GUARDIAN_STATE_HEADER + guardian__payload_size(guardian__gac_body, g);
}

GUARDIANDEF int gac_save(const gac *g, void *buf, size_t cap, size_t *written)
{
    if (!g) return GUARDIAN_EINVAL;
    return guardian__save(GUARDIAN__KIND_GAC, guardian__gac_body, g, buf, cap, written);
}

GUARDIANDEF int gac_load(gac *g, const void *buf, size_t len)
{
    const unsigned char *pl;
    size_t plen;
    gac t;
    int rc;
    if (!g || !buf) return GUARDIAN_EINVAL;
    rc = guardian__check_envelope(GUARDIAN__KIND_GAC, buf, len, &pl, &plen);
    if (rc != GUARDIAN_OK) return rc;
    memset(&t, 0, sizeof t);
    rc = guardian__read_payload(guardian__gac_body, &t, pl, plen);
    if (rc != GUARDIAN_OK) return rc;
    if (gac_config_check(&t.cfg) != GUARDIAN_OK || !guardian__finite(t.m_bar) ||
        !guardian__finite(t.last_gain) || (t.have_m != 0 && t.have_m != 1) ||
        (t.u != 0 && t.u != 1) || t.n_obs < 0 || t.n_updates < 0)
        return GUARDIAN_EFORMAT;
    *g = t;
    return GUARDIAN_OK;
}

/* ---------------------------------------------------------------- schedules */
GUARDIANDEF guardian_sched_config guardian_sched_config_default(void)
{
    guardian_sched_config c;
    memset(&c, 0, sizeof c);
    c.tau_min = 0.5f;
    c.tau_max = 1.5f;
    c.warmup = 1200;
    c.total = 8030;
    c.floor_frac = 0.1f;
    c.ce_zone = 6.0f;
    c.gain_gate = 1e-3f;
    c.nudge = 0.02f;
    return c;
}

static const double guardian__pi = 3.14159265358979323846;

GUARDIANDEF int guardian_sched_tau(const guardian_sched_config *c, int64_t t, int have_val,
                                   float val_ce, float improvement, float *tau)
{
    double lo, hi, v;
    if (!c || !tau || t < 0) return GUARDIAN_EINVAL;
    if (have_val != 0 && have_val != 1) return GUARDIAN_EINVAL; /* a boolean (issue 37) */
    if (!guardian__finite(c->tau_min) || !guardian__finite(c->tau_max) ||
        !guardian__finite(c->floor_frac) || !guardian__finite(c->ce_zone) ||
        !guardian__finite(c->gain_gate) || !guardian__finite(c->nudge))
        return GUARDIAN_EINVAL;
    if (!(c->tau_min > 0) || c->tau_min > c->tau_max || c->warmup < 0 ||
        c->total <= c->warmup || c->floor_frac < 0 || c->floor_frac > 1 || c->nudge < 0)
        return GUARDIAN_EINVAL;
    if (have_val && (!guardian__finite(val_ce) || !guardian__finite(improvement)))
        return GUARDIAN_EINVAL;
    lo = c->tau_min; hi = c->tau_max;
    if (t <= c->warmup) {
        v = c->warmup > 0 ? lo + (hi - lo) * (double)t / (double)c->warmup : hi;
    } else {
        double u = (double)(t - c->warmup) / (double)(c->total - c->warmup);
        double f = c->floor_frac;
        if (u > 1.0) u = 1.0;
        v = lo + (hi - lo) * (f + (1.0 - f) * 0.5 * (1.0 + cos(guardian__pi * u)));
    }
    if (have_val && val_ce < c->ce_zone && improvement < c->gain_gate) {
        v += c->nudge;
        if (v > hi) v = hi;
    }
    *tau = (float)v;
    return GUARDIAN_OK;
}

GUARDIANDEF guardian_lr_config guardian_lr_config_default(void)
{
    guardian_lr_config c;
    memset(&c, 0, sizeof c);
    c.peak = 3e-4f;
    c.total = 8030;
    c.flat_frac = 0.1f;
    c.floor_frac = 0.1f;
    return c;
}

GUARDIANDEF int guardian_lr(const guardian_lr_config *c, int64_t step, float *lr)
{
    double flat, u, f;
    if (!c || !lr || step < 0) return GUARDIAN_EINVAL;
    if (!guardian__finite(c->peak) || !guardian__finite(c->flat_frac) ||
        !guardian__finite(c->floor_frac) || !(c->peak > 0) || c->total < 1 ||
        c->flat_frac < 0 || c->flat_frac >= 1 || c->floor_frac < 0 || c->floor_frac > 1)
        return GUARDIAN_EINVAL;
    flat = floor((double)c->flat_frac * (double)c->total);
    f = c->floor_frac;
    if ((double)step < flat) {
        *lr = c->peak;
        return GUARDIAN_OK;
    }
    u = ((double)step - flat) / ((double)c->total - flat);
    if (u > 1.0) u = 1.0;
    *lr = (float)((double)c->peak * (f + (1.0 - f) * 0.5 * (1.0 + cos(guardian__pi * u))));
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_warm_in(int64_t step, int64_t warm_steps, float *scale)
{
    double w;
    if (!scale) return GUARDIAN_EINVAL;
    w = (double)(warm_steps > 1 ? warm_steps : 1);
    if (step <= 0) *scale = 0.0f;
    else if ((double)step >= w) *scale = 1.0f;
    else *scale = (float)((double)step / w);
    return GUARDIAN_OK;
}

/* ---------------------------------------------------------------- chaos */
GUARDIANDEF guardian_chaos_config guardian_chaos_config_default(void)
{
    guardian_chaos_config c;
    c.r = 3.9f;
    c.x0 = 0.721f;
    c.amp = 0.25f;
    c.decay = 5e-4f;
    return c;
}

static int guardian__chaos_cfg_ok(const guardian_chaos_config *c)
{
    return c && guardian__finite(c->r) && guardian__finite(c->x0) &&
           guardian__finite(c->amp) && guardian__finite(c->decay) && c->r > 0 &&
           c->r <= 4 && c->x0 > 0 && c->x0 < 1 && c->amp >= 0 && c->amp <= 1 &&
           c->decay >= 0;
}

GUARDIANDEF int guardian_chaos_init(guardian_chaos *c, const guardian_chaos_config *cfg)
{
    if (!c || !guardian__chaos_cfg_ok(cfg)) return GUARDIAN_EINVAL;
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    c->x = cfg->x0;
    c->t = 0;
    c->last = 1.0f;
    return GUARDIAN_OK;
}

static double guardian__chaos_amp(const guardian_chaos *c)
{
    return (double)c->cfg.amp * exp(-(double)c->cfg.decay * (double)c->t);
}

GUARDIANDEF int guardian_chaos_step(guardian_chaos *c, float *factor)
{
    double x, a;
    if (!c || !guardian__chaos_cfg_ok(&c->cfg)) return GUARDIAN_EINVAL;
    x = (double)c->cfg.r * c->x * (1.0 - c->x);
    x = guardian__clampd(x, 0.0, 1.0);
    c->x = x;
    c->t++;
    a = guardian__chaos_amp(c);
    c->last = (float)((1.0 - a) + a * x);
    if (factor) *factor = c->last;
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_chaos_temp(const guardian_chaos *c, float max_extra, float *temp)
{
    if (!c || !temp || !guardian__finite(max_extra) || max_extra < 0) return GUARDIAN_EINVAL;
    *temp = (float)(1.0 + (double)max_extra * guardian__chaos_amp(c) * c->x);
    return GUARDIAN_OK;
}

static void guardian__chaos_body(guardian__io *io, void *obj)
{
    guardian_chaos *c = (guardian_chaos *)obj;
    guardian__io_f32(io, &c->cfg.r);
    guardian__io_f32(io, &c->cfg.x0);
    guardian__io_f32(io, &c->cfg.amp);
    guardian__io_f32(io, &c->cfg.decay);
    guardian__io_f64(io, &c->x);
    guardian__io_i64(io, &c->t);
    guardian__io_f32(io, &c->last);
}

GUARDIANDEF size_t guardian_chaos_state_size(const guardian_chaos *c)
{
    if (!c) return 0;
    return GUARDIAN_STATE_HEADER + guardian__payload_size(guardian__chaos_body, c);
}

GUARDIANDEF int guardian_chaos_save(const guardian_chaos *c, void *buf, size_t cap,
                                    size_t *written)
{
    if (!c) return GUARDIAN_EINVAL;
    return guardian__save(GUARDIAN__KIND_CHAOS, guardian__chaos_body, c, buf, cap, written);
}

GUARDIANDEF int guardian_chaos_load(guardian_chaos *c, const void *buf, size_t len)
{
    const unsigned char *pl;
    size_t plen;
    guardian_chaos t;
    int rc;
    if (!c || !buf) return GUARDIAN_EINVAL;
    rc = guardian__check_envelope(GUARDIAN__KIND_CHAOS, buf, len, &pl, &plen);
    if (rc != GUARDIAN_OK) return rc;
    memset(&t, 0, sizeof t);
    rc = guardian__read_payload(guardian__chaos_body, &t, pl, plen);
    if (rc != GUARDIAN_OK) return rc;
    if (!guardian__chaos_cfg_ok(&t.cfg) || !guardian__finite(t.x) || t.x < 0 || t.x > 1 ||
        t.t < 0 || !guardian__finite(t.last) || t.last < 0 || t.last > 1)
        return GUARDIAN_EFORMAT;
    *c = t;
    return GUARDIAN_OK;
}

/* ---------------------------------------------------------------- averaging */
/* Under nvcc (or the CUDA simulation) the plain averaging calls route DEVICE buffers to
   their _cuda twins on the default stream; a device and a host buffer in one call are
   refused. guardian__is_dev: 1 for device or managed memory (cuda/guardian.cuh). */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
static int guardian__is_dev(const void *p);
#endif

GUARDIANDEF int guardian_ema_update(float *ema, const float *w, int64_t n, float decay)
{
    int64_t i;
    float a, b;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    {
        const int de = guardian__is_dev(ema), dw = guardian__is_dev(w);
        if (de && dw) return guardian_ema_update_cuda(ema, w, n, decay, NULL);
        if (de || dw)
            return guardian__fail(GUARDIAN_EINVAL, "guardian_ema_update: ema and w must be both "
                                                   "host or both device pointers");
    }
#endif
    if (!ema || !w || n < 1 || !guardian__finite(decay) || decay < 0 || decay > 1)
        return GUARDIAN_EINVAL;
    a = decay;
    b = 1.0f - decay;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
    for (i = 0; i < n; i++) ema[i] = fmaf(a, ema[i], b * w[i]);
    return GUARDIAN_OK;
}

GUARDIANDEF guardian_swa_config guardian_swa_config_default(void)
{
    guardian_swa_config c;
    memset(&c, 0, sizeof c);
    c.start_epoch = 60;
    c.ce_lo = 0.0f;
    c.ce_hi = 6.0f;
    c.min_rel_gain = 1e-3f;
    return c;
}

static int guardian__swa_cfg_ok(const guardian_swa_config *c)
{
    return c && guardian__finite(c->ce_lo) && guardian__finite(c->ce_hi) &&
           guardian__finite(c->min_rel_gain) && c->ce_lo <= c->ce_hi && c->start_epoch >= 0;
}

GUARDIANDEF int guardian_swa_init(guardian_swa *s, const guardian_swa_config *cfg)
{
    if (!s || !guardian__swa_cfg_ok(cfg)) return GUARDIAN_EINVAL;
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_swa_select(const guardian_swa_config *cfg, int64_t epoch,
                                    float ce_entry, float ce, int *take)
{
    double gain;
    if (!take || !guardian__swa_cfg_ok(cfg) || epoch < 0 || !guardian__finite(ce_entry) ||
        !guardian__finite(ce) || !(ce_entry > 0))
        return GUARDIAN_EINVAL;
    gain = ((double)ce_entry - (double)ce) / (double)ce_entry;
    *take = epoch >= cfg->start_epoch && ce >= cfg->ce_lo && ce <= cfg->ce_hi &&
            gain >= (double)cfg->min_rel_gain;
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_swa_offer(guardian_swa *s, float *avg, const float *w, int64_t n,
                                   int64_t epoch, float ce_entry, float ce, int *taken)
{
    int take = 0, rc;
    int64_t i;
    float k;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    {
        const int da = guardian__is_dev(avg), dw = guardian__is_dev(w);
        if (da && dw) return guardian_swa_offer_cuda(s, avg, w, n, epoch, ce_entry, ce, taken, NULL);
        if (da || dw)
            return guardian__fail(GUARDIAN_EINVAL, "guardian_swa_offer: avg and w must be both "
                                                   "host or both device pointers");
    }
#endif
    if (!s || !avg || !w || n < 1) return GUARDIAN_EINVAL;
    rc = guardian_swa_select(&s->cfg, epoch, ce_entry, ce, &take);
    if (rc != GUARDIAN_OK) return rc;
    s->n_offered++;
    if (taken) *taken = take;
    if (!take) return GUARDIAN_OK;
    if (s->n_averaged == 0) {
        memcpy(avg, w, sizeof(float) * (size_t)n); /* exact: avg may hold garbage */
    } else {
        k = (float)(1.0 / (double)(s->n_averaged + 1));
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n > 65536)
#endif
        for (i = 0; i < n; i++) avg[i] = fmaf(w[i] - avg[i], k, avg[i]);
    }
    s->n_averaged++;
    return GUARDIAN_OK;
}

static void guardian__swa_body(guardian__io *io, void *obj)
{
    guardian_swa *s = (guardian_swa *)obj;
    guardian__io_i64(io, &s->cfg.start_epoch);
    guardian__io_f32(io, &s->cfg.ce_lo);
    guardian__io_f32(io, &s->cfg.ce_hi);
    guardian__io_f32(io, &s->cfg.min_rel_gain);
    guardian__io_i64(io, &s->n_averaged);
    guardian__io_i64(io, &s->n_offered);
}

GUARDIANDEF size_t guardian_swa_state_size(const guardian_swa *s)
{
    if (!s) return 0;
    return GUARDIAN_STATE_HEADER + guardian__payload_size(guardian__swa_body, s);
}

GUARDIANDEF int guardian_swa_save(const guardian_swa *s, void *buf, size_t cap,
                                  size_t *written)
{
    if (!s) return GUARDIAN_EINVAL;
    return guardian__save(GUARDIAN__KIND_SWA, guardian__swa_body, s, buf, cap, written);
}

GUARDIANDEF int guardian_swa_load(guardian_swa *s, const void *buf, size_t len)
{
    const unsigned char *pl;
    size_t plen;
    guardian_swa t;
    int rc;
    if (!s || !buf) return GUARDIAN_EINVAL;
    rc = guardian__check_envelope(GUARDIAN__KIND_SWA, buf, len, &pl, &plen);
    if (rc != GUARDIAN_OK) return rc;
    memset(&t, 0, sizeof t);
    rc = guardian__read_payload(guardian__swa_body, &t, pl, plen);
    if (rc != GUARDIAN_OK) return rc;
    if (!guardian__swa_cfg_ok(&t.cfg) || t.n_averaged < 0 || t.n_offered < t.n_averaged)
        return GUARDIAN_EFORMAT;
    *s = t;
    return GUARDIAN_OK;
}

/* ---------------------------------------------------------------- context game */
GUARDIANDEF guardian_cg_config guardian_cg_config_default(void)
{
    guardian_cg_config c;
    memset(&c, 0, sizeof c);
    c.n = 2;
    c.lengths[0] = 384;
    c.lengths[1] = 768;
    c.eta = 0.5f;
    c.lambda_s = 1.0f;
    c.s0 = 0.5f;
    c.lambda_h = 0.1f;
    c.h_max = 1.3862943611198906f; /* ln 4 */
    c.temperature = 1.0f;
    c.q_floor = 0.0f;
    c.seed = 1;
    return c;
}

static int guardian__cg_cfg_ok(const guardian_cg_config *c)
{
    int i;
    if (!c || c->n < 1 || c->n > GUARDIAN_CG_MAX) return 0;
    for (i = 0; i < c->n; i++)
        if (c->lengths[i] <= 0) return 0;
    if (!guardian__finite(c->eta) || !guardian__finite(c->lambda_s) ||
        !guardian__finite(c->s0) || !guardian__finite(c->lambda_h) ||
        !guardian__finite(c->h_max) || !guardian__finite(c->temperature) ||
        !guardian__finite(c->q_floor))
        return 0;
    return c->eta >= 0 && c->lambda_s >= 0 && c->lambda_h >= 0 && c->h_max > 0 &&
           c->temperature > 0 && c->q_floor >= 0 && (double)c->q_floor * c->n < 1.0;
}

static void guardian__cg_probs(guardian_cg *cg)
{
    int i, K = cg->cfg.n;
    double mx = cg->logw[0], s = 0, e[GUARDIAN_CG_MAX];
    double fl = cg->cfg.q_floor;
    for (i = 1; i < K; i++)
        if (cg->logw[i] > mx) mx = cg->logw[i];
    for (i = 0; i < K; i++) cg->logw[i] -= mx; /* keep the max at 0 */
    for (i = 0; i < K; i++) {
        if (cg->logw[i] < -1e6) cg->logw[i] = -1e6;
        e[i] = exp(cg->logw[i] / (double)cg->cfg.temperature);
        s += e[i];
    }
    for (i = 0; i < K; i++) cg->q[i] = (float)((1.0 - K * fl) * (e[i] / s) + fl);
}

GUARDIANDEF int guardian_cg_init(guardian_cg *cg, const guardian_cg_config *cfg)
{
    int i;
    if (!cg || !guardian__cg_cfg_ok(cfg)) return GUARDIAN_EINVAL;
    memset(cg, 0, sizeof *cg);
    cg->cfg = *cfg;
    for (i = 0; i < GUARDIAN_CG_MAX; i++) cg->logw[i] = 0.0;
    guardian_rng_seed(&cg->rng, cfg->seed);
    guardian__cg_probs(cg);
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_cg_utility(const guardian_cg_config *cfg, float loss, float sat,
                                    float H, float *u)
{
    double v;
    if (!u || !guardian__cg_cfg_ok(cfg) || !guardian__finite(loss) ||
        !guardian__finite(sat) || !guardian__finite(H))
        return GUARDIAN_EINVAL;
    v = -(double)loss - (double)cfg->lambda_s * (sat > cfg->s0 ? (double)sat - cfg->s0 : 0.0) +
        (double)cfg->lambda_h * (double)H / (double)cfg->h_max;
    if (!guardian__finite((float)v)) return GUARDIAN_EINVAL;
    *u = (float)v;
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_cg_update_utility(guardian_cg *cg, const float *u)
{
    int i, K;
    if (!cg || !u || !guardian__cg_cfg_ok(&cg->cfg)) return GUARDIAN_EINVAL;
    K = cg->cfg.n;
    for (i = 0; i < K; i++)
        if (!guardian__finite(u[i])) return GUARDIAN_EINVAL;
    for (i = 0; i < K; i++) cg->logw[i] += (double)cg->cfg.eta * (double)u[i];
    guardian__cg_probs(cg);
    cg->rounds++;
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_cg_update(guardian_cg *cg, const float *loss, const float *sat,
                                   const float *H)
{
    float u[GUARDIAN_CG_MAX];
    int i, rc;
    if (!cg || !loss || !guardian__cg_cfg_ok(&cg->cfg)) return GUARDIAN_EINVAL;
    for (i = 0; i < cg->cfg.n; i++) {
        rc = guardian_cg_utility(&cg->cfg, loss[i], sat ? sat[i] : 0.0f, H ? H[i] : 0.0f,
                                 &u[i]);
        if (rc != GUARDIAN_OK) return rc;
    }
    return guardian_cg_update_utility(cg, u);
}

GUARDIANDEF int guardian_cg_sample(guardian_cg *cg, int *index)
{
    double r, c = 0;
    int i, K;
    if (!cg || !index || !guardian__cg_cfg_ok(&cg->cfg)) return GUARDIAN_EINVAL;
    K = cg->cfg.n;
    r = guardian_rng_uniform(&cg->rng);
    for (i = 0; i < K - 1; i++) {
        c += cg->q[i];
        if (r < c) break;
    }
    *index = i;
    return GUARDIAN_OK;
}

static void guardian__cg_body(guardian__io *io, void *obj)
{
    guardian_cg *cg = (guardian_cg *)obj;
    int i;
    guardian__io_i32(io, &cg->cfg.n);
    for (i = 0; i < GUARDIAN_CG_MAX; i++) guardian__io_i32(io, &cg->cfg.lengths[i]);
    guardian__io_f32(io, &cg->cfg.eta);
    guardian__io_f32(io, &cg->cfg.lambda_s);
    guardian__io_f32(io, &cg->cfg.s0);
    guardian__io_f32(io, &cg->cfg.lambda_h);
    guardian__io_f32(io, &cg->cfg.h_max);
    guardian__io_f32(io, &cg->cfg.temperature);
    guardian__io_f32(io, &cg->cfg.q_floor);
    guardian__io_u64(io, &cg->cfg.seed);
    for (i = 0; i < GUARDIAN_CG_MAX; i++) guardian__io_f64(io, &cg->logw[i]);
    guardian__io_f32s(io, cg->q, GUARDIAN_CG_MAX);
    guardian__io_u64(io, &cg->rng.s);
    guardian__io_i64(io, &cg->rounds);
}

GUARDIANDEF size_t guardian_cg_state_size(const guardian_cg *cg)
{
    if (!cg) return 0;
    return GUARDIAN_STATE_HEADER + guardian__payload_size(guardian__cg_body, cg);
}

GUARDIANDEF int guardian_cg_save(const guardian_cg *cg, void *buf, size_t cap,
                                 size_t *written)
{
    if (!cg) return GUARDIAN_EINVAL;
    return guardian__save(GUARDIAN__KIND_CG, guardian__cg_body, cg, buf, cap, written);
}

GUARDIANDEF int guardian_cg_load(guardian_cg *cg, const void *buf, size_t len)
{
    const unsigned char *pl;
    size_t plen;
    guardian_cg t;
    int rc, i;
    double qs = 0;
    if (!cg || !buf) return GUARDIAN_EINVAL;
    rc = guardian__check_envelope(GUARDIAN__KIND_CG, buf, len, &pl, &plen);
    if (rc != GUARDIAN_OK) return rc;
    memset(&t, 0, sizeof t);
    rc = guardian__read_payload(guardian__cg_body, &t, pl, plen);
    if (rc != GUARDIAN_OK) return rc;
    if (!guardian__cg_cfg_ok(&t.cfg) || t.rounds < 0) return GUARDIAN_EFORMAT;
    for (i = 0; i < t.cfg.n; i++) {
        if (!guardian__finite(t.logw[i]) || t.logw[i] > 0 || t.logw[i] < -1e6 ||
            !guardian__finite(t.q[i]) || t.q[i] < 0 || t.q[i] > 1)
            return GUARDIAN_EFORMAT;
        qs += t.q[i];
    }
    if (fabs(qs - 1.0) > 1e-4) return GUARDIAN_EFORMAT;
    *cg = t;
    return GUARDIAN_OK;
}

/* ---------------------------------------------------------------- loss helpers */
GUARDIANDEF int guardian_ce_smoothed(const float *logits, const int *targets, int N, int V,
                                     float eps, double *ce_pure_sum, double *ce_smooth_sum,
                                     int64_t *ntok, float *dlogits, float grad_scale)
{
    int r;
    double ps = 0, ss = 0, *rv;
    int64_t cnt = 0;
    if (!logits || !targets || N < 1 || V < 1 || !guardian__finite(eps) || eps < 0 ||
        eps >= 1 || (dlogits && !guardian__finite(grad_scale)))
        return GUARDIAN_EINVAL;
    for (r = 0; r < N; r++)
        if (targets[r] >= V) return GUARDIAN_ERANGE;
    /* reject non-finite logits (of counted rows) before anything is written */
    for (r = 0; r < N; r++) {
        if (targets[r] < 0) continue;
        if (!guardian__all_finite(logits + (size_t)r * V, (size_t)V)) return GUARDIAN_EINVAL;
    }
    rv = (double *)GUARDIAN_MALLOC(sizeof(double) * 2 * (size_t)N);
    if (!rv) return GUARDIAN_ENOMEM;
    /* one pass per row: log-sum-exp in double (exact bookkeeping), then the gradient
       d smoothed / d logits = softmax - (1 - eps) onehot - eps / V (softmax in float).
       Rows are independent; the sums are added serially below (deterministic). */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if ((double)N * V > 32768.0)
#endif
    for (r = 0; r < N; r++) {
        const float *x = logits + (size_t)r * V;
        double mx, se = 0, sx = 0, lse, lpy;
        int j, y = targets[r];
        if (y < 0) { rv[2 * (size_t)r] = 0; rv[2 * (size_t)r + 1] = 0; continue; }
        mx = x[0];
        for (j = 0; j < V; j++) {
            if (x[j] > mx) mx = x[j];
            sx += x[j];
        }
        for (j = 0; j < V; j++) se += exp((double)x[j] - mx);
        lse = mx + log(se);
        lpy = (double)x[y] - lse;
        rv[2 * (size_t)r] = -lpy;
        rv[2 * (size_t)r + 1] = (1.0 - eps) * (-lpy) + (double)eps * (lse - sx / V);
        if (dlogits) {
            float *d = dlogits + (size_t)r * V;
            float fl = (float)lse, sc = grad_scale, u = eps / (float)V;
            for (j = 0; j < V; j++) d[j] += sc * (expf(x[j] - fl) - u);
            d[y] -= sc * (1.0f - eps);
        }
    }
    for (r = 0; r < N; r++) {
        if (targets[r] < 0) continue;
        ps += rv[2 * (size_t)r];
        ss += rv[2 * (size_t)r + 1];
        cnt++;
    }
    GUARDIAN_FREE(rv);
    if (ce_pure_sum) *ce_pure_sum = ps;
    if (ce_smooth_sum) *ce_smooth_sum = ss;
    if (ntok) *ntok = cnt;
    return GUARDIAN_OK;
}

GUARDIANDEF void guardian_ce_meter_reset(guardian_ce_meter *m)
{
    if (m) { m->pure_sum = 0; m->smooth_sum = 0; m->ntok = 0; }
}

GUARDIANDEF int guardian_ce_meter_add(guardian_ce_meter *m, double pure_sum,
                                      double smooth_sum, int64_t ntok)
{
    if (!m || !guardian__finite(pure_sum) || !guardian__finite(smooth_sum) || ntok < 0)
        return GUARDIAN_EINVAL;
    m->pure_sum += pure_sum;
    m->smooth_sum += smooth_sum;
    m->ntok += ntok;
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_ce_meter_mean(const guardian_ce_meter *m, double *ce_pure,
                                       double *ce_smooth, double *ppl)
{
    double p;
    if (!m || m->ntok < 1) return GUARDIAN_EINVAL;
    p = m->pure_sum / (double)m->ntok;
    if (ce_pure) *ce_pure = p;
    if (ce_smooth) *ce_smooth = m->smooth_sum / (double)m->ntok;
    if (ppl) *ppl = exp(p);
    return GUARDIAN_OK;
}

GUARDIANDEF guardian_entfloor_config guardian_entfloor_config_default(void)
{
    guardian_entfloor_config c;
    c.R = 4;
    c.eta = 0.5f;
    c.alpha = 0.02f;
    return c;
}

GUARDIANDEF int guardian_entropy_floor(const guardian_entfloor_config *cfg, float H_mu,
                                       float lambda_sat, float *penalty, float *dpen_dH)
{
    double hmax, gap, coef;
    if (!cfg || cfg->R < 1 || !guardian__finite(cfg->eta) || !guardian__finite(cfg->alpha) ||
        cfg->eta < 0 || cfg->eta > 1 || cfg->alpha < 0 || !guardian__finite(H_mu) ||
        !guardian__finite(lambda_sat) || lambda_sat < 0)
        return GUARDIAN_EINVAL;
    hmax = log((double)(cfg->R > 2 ? cfg->R : 2));
    gap = (double)cfg->eta * hmax - (double)H_mu;
    coef = 0.5 * (double)cfg->alpha * (1.0 + (double)lambda_sat);
    if (penalty) *penalty = (float)(gap > 0 ? coef * gap : 0.0);
    if (dpen_dH) *dpen_dH = (float)(gap > 0 ? -coef : 0.0);
    return GUARDIAN_OK;
}

static int guardian__mu_ok(const float *mu, int64_t N, int R)
{
    int64_t i;
    for (i = 0; i < N * (int64_t)R; i++)
        if (!guardian__finite(mu[i]) || mu[i] < 0 || mu[i] > 1) return 0;
    return 1;
}

GUARDIANDEF int guardian_mu_entropy(const float *mu, int64_t N, int R, float *H_mean)
{
    int64_t i;
    int r;
    double s = 0;
    if (!mu || !H_mean || N < 1 || R < 1 || !guardian__mu_ok(mu, N, R)) return GUARDIAN_EINVAL;
    for (i = 0; i < N; i++)
        for (r = 0; r < R; r++) {
            double p = mu[i * R + r];
            if (p > 0) s -= p * log(p);
        }
    *H_mean = (float)(s / (double)N);
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_mu_entropy_backward(float *dmu, const float *mu, int64_t N, int R,
                                             float dH)
{
    int64_t i;
    double c;
    if (!dmu || !mu || N < 1 || R < 1 || !guardian__finite(dH) || !guardian__mu_ok(mu, N, R))
        return GUARDIAN_EINVAL;
    c = (double)dH / (double)N;
    for (i = 0; i < N * (int64_t)R; i++) {
        double p = mu[i] > 1e-30f ? (double)mu[i] : 1e-30;
        dmu[i] += (float)(-c * (log(p) + 1.0));
    }
    return GUARDIAN_OK;
}

GUARDIANDEF int guardian_mu_saturation(const float *mu, int64_t N, int R, float thresh,
                                       float *frac)
{
    int64_t i, k = 0;
    int r;
    if (!mu || !frac || N < 1 || R < 1 || !guardian__finite(thresh) ||
        !guardian__mu_ok(mu, N, R))
        return GUARDIAN_EINVAL;
    for (i = 0; i < N; i++) {
        float m = mu[i * R];
        for (r = 1; r < R; r++)
            if (mu[i * R + r] > m) m = mu[i * R + r];
        if (m >= thresh) k++;
    }
    *frac = (float)((double)k / (double)N);
    return GUARDIAN_OK;
}

#ifdef __cplusplus
}
#endif

/* ---------------------------------------------------------------- CUDA */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
#include "cuda/guardian.cuh"
#else
#ifdef __cplusplus
extern "C" {
#endif
GUARDIANDEF int guardian_cuda_available(void) { return 0; }
/* the calls of the list GUARDIAN__CUDA_API (declared above): GUARDIAN_ENOCUDA with the
   function's name in the message; the parameters go unused */
#define GUARDIAN__NOCUDA_WHY ": built without CUDA (compile the implementation with nvcc)"
#define GUARDIAN__CUDA_STUB(ret, name, params)                                              \
    GUARDIANDEF ret name params                                                             \
    {                                                                                       \
        return guardian__fail(GUARDIAN_ENOCUDA, #name GUARDIAN__NOCUDA_WHY);                \
    }
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
GUARDIAN__CUDA_API(GUARDIAN__CUDA_STUB)
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef GUARDIAN__CUDA_STUB
#undef GUARDIAN__NOCUDA_WHY
#ifdef __cplusplus
}
#endif
#endif /* CUDA */

#ifdef GUARDIAN__PUSHED_NO_TRAPPING
#pragma GCC pop_options
#undef GUARDIAN__PUSHED_NO_TRAPPING
#endif
#endif /* GUARDIAN_IMPLEMENTATION_DONE */
#endif /* GUARDIAN_IMPLEMENTATION */

/*
MIT License

Copyright (c) 2026 the attnkit authors

Permission is hereby granted, free of charge, to any person obtaining a copy of this
software and associated documentation files (the "Software"), to deal in the Software
without restriction, including without limitation the rights to use, copy, modify,
merge, publish, distribute, sublicense, and/or sell copies of the Software, and to
permit persons to whom the Software is furnished to do so, subject to the following
conditions:

The above copyright notice and this permission notice shall be included in all copies
or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A
PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT
HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF
CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE
OR THE USE OR OTHER DISPOSITION OF THE SOFTWARE.
*/
