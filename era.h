/* era.h - length-aware attention priors: RPA (fuzzy Regime-Position Alignment) and
   ERA (Entropic Regime Alignment), forward, backward and a cached inference path.
   Header-only C99 / C++11, STB style. No other attnkit header is needed.

   WHAT
   Both mechanisms build a (T,T) additive bias for pre-softmax attention scores from a
   small set of R "regimes" aligned by entropic optimal transport to a positional basis
   whose shape scales with the sequence length T:

   RPA (seed 000, sections 2, 3, 5, 7, 9, 12, Listings 1-4):
     membership  z = W h + b (B,T,P); mu[b,t,r] = softmax_r(clamp(-|z - c_r|^2 *
                 clamp(exp(-2 log_sigma_r), 1e-3, 1e3) / 2, -30, 30)), NaN rows -> 1/R.
     basis       Phi(T) (T,K): raised-cosine blocks centred at linspace(0, T-1, K), width
                 max(1, 1.5 T/K), rows normalised to 1.
     alignment   mbar = batch mean of mu (T,R); S = mbar^T Phi (R,K);
                 P = Sinkhorn(clamp(exp(S / tau_align), 1e-9, 1e9)) (alternating row and
                 column normalisation, a fixed number of iterations).
     prior       Bm = mbar P Phi^T (T,T). B is linear in mu, so it is built from the batch
                 mean: no (B,T,T) tensor ever exists.
     bias        x = (1 - posmix) Bm + posmix * (-max(pos_beta,0) |i-j| / max(1,T-1))
                 (the mix only when posmix > 0), then z-score with a global mean and an
                 unbiased standard deviation, NaN -> 0 / +-Inf -> +-clip, divide by
                 clamp(tau_att, tau_min, tau_max), clip to [-clip, clip], times the warm-in
                 scale clamped to [0,1].
     legacy      (cfg.legacy = 1, Listing 4) F = batch mean of mu_b mu_b^T (T,T), z-scored;
                 curve = sigmoid(kappa) F + (1 - sigmoid(kappa)) pos; then as above.
   ERA (seed 003, sections 3.2, 6, Appendix A, Algorithm 1):
     phi(t; n) = t/n; mu[t,r] = softmax_r(-(phi - c_r)^2 / (2 sigma^2)) (n,R);
     C[r,b] = (c_r - c_b)^2 with c_b = (b + 0.5)/nb (b counted from 0); entropic OT plan
     Tp (R,nb) with uniform marginals 1/R, 1/nb, regularisation eps, a fixed number of
     iterations, computed in the log domain (so eps = 0.05 cannot underflow);
     p_t(s) = sum_r mu[t,r] Tp[r, blk(s)], blk(s) = floor(s nb / n);
     bias[t,s] = alpha * RowZ(log(p_t(s) + delta)) (population standard deviation).
     One bias per length, shared by all heads: it depends on n and parameters only.

   FIXED PRIORS (seed 000's comparison bases; CPU only)
   Seed 000 (section 8's headline, sections 7.2 and 12) compares its prior with
   "sinusoid-only" and "relative-only" priors and says its bases may be hybridised with
   sinusoids / relative kernels, without formulas. These two builders give those priors in
   the same form as B(T): a (T,T) additive bias for a causal attention, one per length,
   shared by all heads, then the normalisation of section 7.2 exactly as the RPA bias does
   it (global mean, unbiased standard deviation + zscore_eps, clip to +-bias_clip, times
   the warm-in scale clamped to [0,1]; no tau_att: nothing is learned). Readings (the paper
   leaves them open):
     sinusoid  the RPA form B = A Phi^T with the aligned memberships A replaced by the basis
               itself: Phi(T) (T,D) the fixed sinusoidal encoding of Vaswani et al. (seed
               000's [12]), Phi[t,2k] = sin(t w_k), Phi[t,2k+1] = cos(t w_k),
               w_k = base^(-2k/D), and x = Phi Phi^T / (D/2), i.e.
               x[i,j] = (2/D) sum_{k<D/2} cos((i - j) w_k) (1 on the diagonal). D = 64 and
               base 10000 by default (a head width and the usual base).
     relative  the linear distance penalty of ALiBi (seed 000's [16]) with one slope:
               x[i,j] = -slope |i - j|. z-scored (the default), the slope cancels (up to
               zscore_eps): the prior is -|i - j| standardised over the matrix, whose
               std grows with T, so its per-token slope shrinks as 1/T (length-scaled,
               as RPA's positional mix -|i - j| / (T - 1) is); with zscore = 0 the bias
               is scale * x exactly (ALiBi's fixed per-token slope; no clip). ALiBi's per-head slopes 2^(-8(h+1)/H): build one bias per
               head with zscore 0 and add them with era_apply(per_head = 1).
   Both depend on i - j only (and are even in it), so the statistics come in closed form
   from the T distinct values with their multiplicities (T at d = 0, 2(T - d) at d > 0;
   T - d over j <= i); the cost is O(T D) + one pass over the output. zscore_causal = 1
   takes the statistics over j <= i and writes 0 at j > i (as ERA's causal option; with
   zscore = 0 too). T = 1:
   the standard deviation is undefined and the bias is 0 (as RPA's). They have no
   gradient (nothing to learn), no state and no CUDA mirror: build B(T) on the host once
   per length (an era_cache_init builder is a two-line wrapper) and copy it to the device.
   No model preset uses them yet.

   Positions are counted from 0 (t = 0..T-1). For ERA this means every position lies in
   one block (with the paper's 1-based s the last position s = n falls in no block).

   Z-SCORE COVERAGE. Both papers compute the z-score statistics over the full T x T
   matrix (RPA: global; ERA: whole rows), i.e. including the future positions that the
   causal mask later removes. That is the default (zscore_causal = 0). With
   zscore_causal = 1 the mean and standard deviation are taken over j <= i only (RPA: the
   lower triangle including the diagonal; ERA: s <= t in each row); the normalisation is
   applied to every entry for RPA (so the entries that survive the mask are exactly
   standardised); for ERA the causal option writes 0 at s > t (a row's causal set can be
   constant, and those masked entries would otherwise be arbitrarily large).

   USAGE (compiles as C99 and C++11)

     #define ERA_IMPLEMENTATION
     #include "era.h"
     Needs only the C library and libm (OpenMP optional): no stb_ds or other container
     library (the inference cache is a plain array), and it defines no short macro names,
     so it sits beside a host's own stb_ds.h, with or without STBDS_NO_SHORT_NAMES.
     // ERA: bias for length T, then add it to attention scores (B,H,T,T)
     era_era_config ec = era_era_config_default();        // R = nb = 32
     float centers[32]; era_era_init_centers(ec.R, centers);
     era_era_params ep = era_era_params_default(centers);  // sigma 0.1, alpha 1
     era_era_state es = era_era_state_init();
     float *bias = (float *)malloc(sizeof(float) * T * T);
     int rc = era_era_forward(&ec, &ep, T, bias, &es, NULL);
     if (rc == ERA_OK) rc = era_apply(scores, bias, 0, B, H, T);
     // training: era_era_backward(&ec, &ep, &es, dbias, &grads, NULL) accumulates
     era_era_state_free(&es);

     // RPA from memberships mu (B,T,R) (from era_membership_forward or your own):
     era_rpa_config rc_ = era_rpa_config_default(R);
     era_rpa_params rp = era_rpa_params_default();        // tau_att 1, pos_beta 0.2, kappa 0.5
     era_rpa_state rs = era_rpa_state_init();
     era_rpa_forward(&rc_, &rp, mu, B, T, bias, &rs, NULL);

     // inference: a cache keyed by T, bounded by a byte budget, frozen parameters
     era_cache cache;
     era_cache_init_era(&cache, 64u << 20, &ec, &ep);
     const float *cached; era_cache_get(&cache, T, &cached); // built once per T
     era_cache_free(&cache);

   CONFIG KNOBS (defaults)
     era_rpa_config: R (regimes, 4), K (blocks, <= 0 means R), tau_align 0.7,
       sinkhorn_iters 6, detach 1 (no gradient through S and the Sinkhorn iterations),
       posmix 0 (seed 000 WT2 runs use 0.10), bias_clip 4, tau_min 0.6, tau_max 1.6,
       scale 1 (warm-in scale, clamped to [0,1]; see era_warmin_scale), zscore_eps 1e-6,
       zscore_causal 0, legacy 0, logit_clamp 30, inv2sig2_min 1e-3, inv2sig2_max 1e3,
       entropy_floor 1e-8 (clamp inside log for H(mu)), sat_threshold 0.9 (a token is
       saturated when max_r mu >= this), max_T 65536. The flags detach, zscore_causal
       and legacy are 0 or 1 (else ERA_EINVAL).
     era_rpa_params: W (P,D), b (P) or NULL, centers (R,P), log_sigma (R), tau_att 1.0,
       pos_beta 0.2, kappa 0.5 (learned scalars); D, P.
     era_era_config: R 32, nb 32 (blocks), eps 0.05, iters 5, delta 1e-5,
       zscore_eps 1e-6, zscore_causal 0 (0 or 1, else ERA_EINVAL), max_T 65536.
     era_era_params: centers (R) (learnable), sigma 0.1, alpha 1.0.

   SHAPES: B batch, T sequence length, D model width, P projected width, R regimes,
     K RPA blocks, nb ERA blocks, H heads. All buffers are caller-owned row-major float32.

     era_pos_config (fixed priors): dims 64, base 10000, slope 1, zscore 1,
       zscore_causal 0, zscore_eps 1e-6, bias_clip 4, scale 1, max_T 65536; the flags
       are 0 or 1 (else ERA_EINVAL); dims and base are checked by the sinusoid builder,
       slope by the relative one (a field the prior does not use is not looked at).

   ERRORS: ERA_OK 0, ERA_EINVAL -1 (NULL pointer, bad dimension, NaN/Inf or out-of-range
     hyper-parameter), ERA_ENOMEM -2, ERA_ERANGE -3 (T above max_T, a size that overflows,
     a cache entry larger than the budget), ERA_ESTATE -4 (backward with a state that does
     not match). era_strerror(code) names them.

   INITIALISATION (drop-in use)
     The priors are additive attention biases: era_apply (or tensor.h's bias hook) adds
     B(T) to the scores before the causal mask. B(T) is z-scored and clipped to
     +-bias_clip (4), i.e. O(1) against the host's logits from step 0: ramp it in with
     cfg.scale = era_warmin_scale(step, warm_steps) when the host was trained without
     it. ERA: centres from era_era_init_centers, sigma 0.1, alpha 1. RPA: W, centers
     with small random values (memberships start near uniform 1/R), log_sigma 0,
     tau_att 1, pos_beta 0.2. Note RPA's detach = 1 (the default, as the reference's
     S.detach()) is not the exact gradient of B(T) (no gradient through S and Sinkhorn);
     set detach = 0 for the exact one. NULL grads are accepted by every backward.

   COST: the RPA mean and standard deviation of x come in closed form from prefix sums
     of the basis (sum Phi_j, sum Phi_j Phi_j^T, sum |i-j| Phi_j; O(T K^2), in double),
     so building B(T) is one pass over the (T,T) output; the legacy bias, whose F is
     not low-rank in this sense, still takes a statistics pass over its rows.

   NUMERICS: fp32 storage, double accumulation for global statistics. Row-parallel
   OpenMP loops with static schedules; every reduction goes through per-row partials
   summed in a fixed order, so results are bit-identical run to run for a fixed thread
   count (and independent of the thread count).
     Regimes checked against float64 (issue 38; tests/test_era.c and tests/parity_era.cu,
     test_sweep_float64; reference: tests/ref64.h, seeds 000 / 003 transcribed in double,
     tape gradients). Worst relative error to each tensor's max-norm, CPU and device
     (simulation) alike unless two numbers are given:
       ERA (defaults R = nb = 8; sigma = 1e-3, one-hot memberships; eps 0.01, nb 16,
       T 100): bias 7.8e-8, dcenters 8.6e-8, dsigma 1.6e-7, dalpha 7.4e-8. dsigma is
       summed as dl_r (d_r^2 - E_mu[d^2]) / sigma^3 (sum_r dl_r = 0): the plain sum of
       dl_r d_r^2 / sigma^3 (terms of 3.6e6 at sigma 1e-3) left 2.8% of it.
       RPA memberships (defaults; 1/sigma^2 = 20; sigma clamped at 1/sigma^2 = 1e3 with
       nearly every logit at -30 and one token nearly one-hot): mu 1.0e-7, dh, dW, db,
       dcenters 2.4e-5, dlog_sigma 9.4e-7. Both backwards take E_mu[.] with the fp32 mu
       renormalised in double: a near-one-hot mu (1.0f beside 3e-12) sums to 1 + 1e-11,
       and the plain dm_r - sum_k mu_k dm_k lost that token's whole gradient (157% of the
       max-norm before).
       RPA (defaults with the exact gradient through Sinkhorn; the clamp regime, 25% of
       exp(S / tau_align) above 1e9, as found at T = 768; tau_att at tau_min, at tau_max
       (gradient passes) and below tau_min (clamped); R = 1): bias 2.0e-6, dmu
       2.3e-7 / 1.4e-7, dtau_att 1.6e-6, dpos_beta 7.3e-7 / 3.2e-7.
       One regime (R = 1): ERA's rows are constant in exact arithmetic (every p_t(s) =
       1/nb) and the exact bias and gradients are 0; the plan is formed from the last f
       and a g recomputed from it in double, so it is exactly uniform and the bias stays
       at 1.2e-9 absolute (dalpha 2.9e-8). Before, fp32-rounded potentials made a plan
       uneven by ~1e-7, which RowZ amplified by 1/zscore_eps into 0.15 |alpha| of noise.
       RPA's dpos_beta at R = 1 is ill-conditioned by nature: what the z-score's scale
       invariance leaves (2.8e-2 out of terms summing to 4.9e4 in absolute value), held
       to 16 eps32 sum|terms| (error 9.5e-5).

   CUDA: era_*_cuda mirror the per-step calls (memberships, RPA B(T) and backward, ERA
     prior and backward, era_apply, era_reduce_grad) with device buffers and a stream,
     plus a device inference cache (era_cuda_cache_*); kernels in cuda/era.cuh (copy it
     with this header), compiled under nvcc, else ERA_ENOCUDA. The legacy kappa-mixture
     stays CPU-only. Parity and determinism: the top of cuda/era.cuh.

   VERSION 0.1.0. License: MIT (end of file). */
#ifndef ERA_H_INCLUDED
#define ERA_H_INCLUDED

#include <stddef.h>

#define ERA_VERSION_MAJOR 0
#define ERA_VERSION_MINOR 1
#define ERA_VERSION_PATCH 0

#ifdef ERA_STATIC
/* unused is expected in a static copy: silence -Wunused-function */
#if defined(__GNUC__) || defined(__clang__)
#define ERADEF static __attribute__((unused))
#else
#define ERADEF static
#endif
#else
#define ERADEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
    ERA_OK = 0,
    ERA_EINVAL = -1,
    ERA_ENOMEM = -2,
    ERA_ERANGE = -3,
    ERA_ESTATE = -4
};

/* ------------------------------------------------------------------ RPA ------ */

typedef struct era_rpa_config {
    int R;              /* regimes (4) */
    int K;              /* raised-cosine blocks; <= 0 means K = R */
    float tau_align;    /* Sinkhorn temperature (0.7), > 0 */
    int sinkhorn_iters; /* iterations (6), >= 0 */
    int detach;         /* 1: no gradient through S / Sinkhorn (P is a constant) */
    float posmix;       /* weight of the -pos_beta |i-j|/(T-1) term, in [0,1] (0) */
    float bias_clip;    /* clip of the final bias (4), > 0 */
    float tau_min;      /* clamp range of tau_att (0.6, 1.6), 0 < min <= max */
    float tau_max;
    float scale;        /* warm-in scale, clamped to [0,1] (1) */
    float zscore_eps;   /* added to the std (1e-6), >= 0 */
    int zscore_causal;  /* 0: statistics over all T*T entries (papers); 1: j <= i */
    int legacy;         /* 1: Listing 4 kappa-mixture of fuzzy similarity and position */
    float logit_clamp;  /* membership logit clamp (30) */
    float inv2sig2_min; /* clamp of exp(-2 log_sigma) (1e-3, 1e3) */
    float inv2sig2_max;
    float entropy_floor; /* clamp_min inside log for H(mu) (1e-8) */
    float sat_threshold; /* saturation: max_r mu >= threshold (0.9) */
    int max_T;          /* largest accepted T (65536) */
} era_rpa_config;

typedef struct era_rpa_params {
    int D, P;                /* input width, projected width */
    const float *W;          /* (P,D) projection weight */
    const float *b;          /* (P) projection bias, or NULL */
    const float *centers;    /* (R,P) regime centres */
    const float *log_sigma;  /* (R) log scales */
    float tau_att;           /* per-layer attention temperature (1.0) */
    float pos_beta;          /* position slope (0.2) */
    float kappa;             /* legacy mixture logit (0.5) */
} era_rpa_params;

typedef struct era_rpa_grads { /* every pointer may be NULL; all accumulate (+=) */
    float *dW;          /* (P,D) */
    float *db;          /* (P) */
    float *dcenters;    /* (R,P) */
    float *dlog_sigma;  /* (R) */
    float dtau_att, dpos_beta, dkappa;
    /* the sum of the magnitudes of dtau_att's terms (over the T x T prior; accumulates like
       dtau_att): its scale. The terms cancel (the attention's dbias sums to zero along each
       row), so dtau_att carries the rounding of dbias amplified by dtau_att_abs / |dtau_att|;
       a comparison of two devices' dtau_att is fair against this scale. */
    float dtau_att_abs;
    /* Optional destinations of the scalar gradients in the call's own memory (device memory
       for era_rpa_backward_cuda): with dtau_att_to set, dtau_att is added to *dtau_att_to,
       dpos_beta to *dpos_beta_to (must then be set too) and dtau_att_abs to
       *dtau_att_abs_to (NULL: not accumulated), each as *to += (float)sum, and the host
       fields dtau_att, dpos_beta, dtau_att_abs are left alone. The device call then waits
       for nothing (the sums stay on the stream). dkappa (legacy, CPU) stays a host field. */
    float *dtau_att_to, *dpos_beta_to, *dtau_att_abs_to;
} era_rpa_grads;

typedef struct era_mu_stats {
    float entropy;      /* mean over tokens of H(mu_t) = -sum_r mu log max(mu, floor) */
    float sat_frac;     /* fraction of tokens with max_r mu >= sat_threshold */
    int nan_rows;       /* tokens whose logits were not finite (replaced by 1/R) */
} era_mu_stats;

/* Saved state of era_rpa_forward (the factored prior); era_rpa_rows reads it too.
   Memory is allocated by the forward (ERA_MALLOC) and released by era_rpa_state_free. */
typedef struct era_rpa_state {
    int B, T, R, K, iters, legacy, zscore_causal, valid;
    double mean, std;    /* z-score statistics of x (legacy: of F) */
    long long count;     /* number of entries the statistics cover */
    float tau;           /* clamped tau_att used */
    float scale;         /* clamped warm-in scale used */
    float sig_kappa;     /* sigmoid(kappa) (legacy) */
    float pos_beta;      /* pos_beta as given (clamp_min 0 applied when used) */
    float posmix, clip, zeps;
    int tau_free;        /* tau_att was inside [tau_min, tau_max] */
    /* diagnostics */
    float std_pre;       /* std of x (legacy: F) before the z-score */
    float std_post;      /* std of the final bias over the statistics set */
    float marginal_err;  /* Sinkhorn: max(|row sum - K/R|, |col sum - 1|) */
    float clamp_frac;    /* share of the R*K entries of exp(S / tau_align) at the clamp
                            [1e-9, 1e9]: 1 means the plan no longer sees the memberships */
    const float *mu;     /* (B,T,R) pointer given to forward (legacy path re-reads it) */
    float *mbar;         /* (T,R) */
    float *phi;          /* (T,K) */
    float *phiT;         /* (K,T) the same basis, transposed */
    float *X;            /* (2 iters + 1, R, K) Sinkhorn iterates; P = last */
    float *M;            /* (T,K) = mbar P */
    void *mem;
    size_t cap;
    void *cuda;          /* the device twin (era_rpa_cuda_state) when the plain calls were
                            given device pointers (nvcc / simulation builds); else NULL */
} era_rpa_state;

ERADEF era_rpa_config era_rpa_config_default(int R);
ERADEF era_rpa_params era_rpa_params_default(void);
ERADEF era_rpa_state era_rpa_state_init(void);
ERADEF void era_rpa_state_free(era_rpa_state *st);
ERADEF float era_warmin_scale(long step, long warm_steps); /* min(1, step / max(1,warm)) */

/* Soft raised-cosine basis Phi(T): (T,K), rows sum to 1 (up to a 1e-6 guard). */
ERADEF int era_rpa_basis(float *phi /* (T,K) */, int T, int K);

/* Gaussian memberships. zproj: (B,T,P) projected states (saved for backward).
   mu: (B,T,R). stats may be NULL. */
ERADEF int era_membership_forward(const era_rpa_config *cfg, const era_rpa_params *p,
                                  float *mu /* (B,T,R) */, float *zproj /* (B,T,P) */,
                                  era_mu_stats *stats, const float *h /* (B,T,D) */,
                                  int B, int T);
/* era_membership_forward with its statistics as sums, ADDED to sums (3 doubles, in the
   call's memory: device memory for the _cuda call): sums[0] += the sum over tokens of
   H(mu_t), sums[1] += the tokens with max_r mu >= sat_threshold, sums[2] += the tokens
   whose logits were not finite. Divided by B*T the first two are era_mu_stats' entropy and
   sat_frac, the same values. Gather several calls' sums and read them once: the device
   call waits for nothing. */
ERADEF int era_membership_forward_sums(const era_rpa_config *cfg, const era_rpa_params *p,
                                       float *mu /* (B,T,R) */, float *zproj /* (B,T,P) */,
                                       double *sums /* (3) += */, const float *h /* (B,T,D) */,
                                       int B, int T);
/* Accumulates into dh (may be NULL) and g (may be NULL). dmu: (B,T,R) gradient on mu (may be NULL);
   dentropy: gradient on stats.entropy (the mean membership entropy). Supports R <= 64
   (ERA_EINVAL above). Tokens whose logits were not finite get no gradient. */
ERADEF int era_membership_backward(const era_rpa_config *cfg, const era_rpa_params *p,
                                   float *dh /* (B,T,D) */, era_rpa_grads *g,
                                   const float *dmu /* (B,T,R) */, float dentropy,
                                   const float *h /* (B,T,D) */,
                                   const float *zproj /* (B,T,P) */,
                                   const float *mu /* (B,T,R) */, int B, int T,
                                   void *workspace);
ERADEF size_t era_membership_workspace_size(const era_rpa_params *p, int B, int T);
/* H(mu) mean and saturation fraction of any membership tensor. */
ERADEF int era_mu_statistics(era_mu_stats *stats, const float *mu /* (B,T,R) */, int B,
                             int T, int R, float entropy_floor, float sat_threshold);

/* Optional type-2 uncertainty u = sigmoid(U2 relu(U1 h + c1) + c2) (forward only). */
ERADEF int era_type2_forward(float *u /* (B,T) */, const float *h /* (B,T,D) */,
                             const float *U1 /* (Dh,D) */, const float *c1 /* (Dh) */,
                             const float *U2 /* (Dh) */, float c2, int B, int T, int D,
                             int Dh);

/* RPA prior from memberships. bias: (T,T) output, or NULL to build only the factored
   state (O(T (R + K)) memory; then read rows with era_rpa_rows). The state keeps the mu
   pointer: mu must stay valid and unchanged until era_rpa_backward (and, with
   cfg->legacy, until the last era_rpa_rows). workspace: NULL or era_rpa_workspace_size
   bytes, queried with the same OpenMP thread count as the call (per-thread rows). */
ERADEF int era_rpa_forward(const era_rpa_config *cfg, const era_rpa_params *p,
                           const float *mu /* (B,T,R) */, int B, int T,
                           float *bias /* (T,T) or NULL */, era_rpa_state *st,
                           void *workspace);
/* dbias: (T,T) gradient on the bias (summed over batch and heads: era_reduce_grad).
   Accumulates dmu (B,T,R) (may be NULL) and g->dtau_att, g->dpos_beta, g->dkappa (g may
   be NULL: the scalars are then dropped), or the scalars into g->dtau_att_to etc. (see
   era_rpa_grads; dtau_att_to without dpos_beta_to: ERA_EINVAL).
   cfg must match the forward's (ERA_ESTATE otherwise). With cfg->detach the plan P is a
   constant (no gradient through S and Sinkhorn), as in the reference's S.detach().
   The warm-in scale and the clip are differentiated (clipped entries pass nothing);
   the legacy path's dmu supports R <= 64. */
ERADEF int era_rpa_backward(const era_rpa_config *cfg, const era_rpa_params *p,
                            const era_rpa_state *st, const float *dbias /* (T,T) */,
                            float *dmu /* (B,T,R) */, era_rpa_grads *g, void *workspace);
ERADEF size_t era_rpa_workspace_size(const era_rpa_config *cfg, int B, int T);
/* Rows [row0, row0 + nrows) of the bias from the factored state: out (nrows,T). */
ERADEF int era_rpa_rows(const era_rpa_state *st, int row0, int nrows,
                        float *out /* (nrows,T) */);

/* ------------------------------------------------------------------ ERA ------ */

typedef struct era_era_config {
    int R;            /* regimes (32) */
    int nb;           /* uniform blocks (32) */
    float eps;        /* entropic regularisation (0.05), > 0 */
    int iters;        /* Sinkhorn iterations (5), >= 1 */
    float delta;      /* log(p + delta) (1e-5), > 0 */
    float zscore_eps; /* added to the row std (1e-6) */
    int zscore_causal;/* 0: whole rows (paper), 1: s <= t */
    int max_T;        /* 65536 */
    int *status;      /* CUDA forward only: NULL (default), the centres are read back and
                         checked on the host (one wait); a device int: a kernel ORs 1 into
                         *status when a centre is not finite and nothing waits (the caller
                         zeroes it and reads it when it next synchronises; the bias of a
                         non-finite centre is NaN, never out of bounds). A status that is
                         not device memory is ERA_EINVAL. The CPU ignores it. */
} era_era_config;

typedef struct era_era_params {
    const float *centers; /* (R) learnable centres, in [0,1] typically */
    float sigma;          /* membership scale (0.1), > 0 */
    float alpha;          /* bias scale (1.0) */
} era_era_params;

typedef struct era_era_grads {
    float *dcenters;   /* (R) accumulates; may be NULL */
    float dsigma, dalpha;
    /* Optional destinations of the scalar gradients in the call's own memory (device memory
       for era_era_backward_cuda), both or neither: with them set, dalpha is added to
       *dalpha_to and dsigma times p->sigma (the gradient of log sigma) to *dlog_sigma_to,
       as *dalpha_to += (float)dalpha and *dlog_sigma_to += (float)dsigma * sigma, and the
       host fields dsigma, dalpha are left alone. The device call then waits for nothing. */
    float *dlog_sigma_to, *dalpha_to;
} era_era_grads;

typedef struct era_era_state {
    int T, R, nb, iters, zscore_causal, valid;
    float alpha, sigma, eps, delta, zeps;
    float marginal_err;  /* max(|Tp 1 - 1/R|, |Tp^T 1 - 1/nb|) */
    float std_pre;       /* rms over rows of the row std of log(p + delta) */
    float std_post;      /* rms over rows of the row std of the bias */
    float *mu;           /* (T,R) */
    float *f;            /* (iters, R) potentials */
    float *g;            /* (iters + 1, nb) potentials */
    float *cost;         /* (R,nb) */
    float *plan;         /* (R,nb) */
    float *Q;            /* (T,nb) = mu plan */
    double *rmean, *rstd; /* (T) row statistics of log(Q + delta) */
    int *bstart;         /* (nb + 1) first position of each block */
    void *mem;
    size_t cap;
    void *cuda;          /* the device twin (era_era_cuda_state), as in era_rpa_state */
} era_era_state;

ERADEF era_era_config era_era_config_default(void);
ERADEF era_era_params era_era_params_default(const float *centers);
ERADEF void era_era_init_centers(int R, float *centers /* (R) */); /* (r + 0.5)/R */
ERADEF era_era_state era_era_state_init(void);
ERADEF void era_era_state_free(era_era_state *st);
/* bias: (T,T) output or NULL (factored state only: O(T (R + nb)) memory). */
ERADEF int era_era_forward(const era_era_config *cfg, const era_era_params *p, int T,
                           float *bias /* (T,T) or NULL */, era_era_state *st,
                           void *workspace);
ERADEF int era_era_backward(const era_era_config *cfg, const era_era_params *p,
                            const era_era_state *st, const float *dbias /* (T,T) */,
                            era_era_grads *g, void *workspace);
ERADEF size_t era_era_workspace_size(const era_era_config *cfg, int T);
ERADEF int era_era_rows(const era_era_state *st, int row0, int nrows,
                        float *out /* (nrows,T) */);

/* ------------------------------------------------------------------ fixed priors */
/* Seed 000's comparison priors (see FIXED PRIORS at the top): T x T additive biases of the
   same form as B(T), with no learned part. CPU only. */
typedef struct era_pos_config {
    int dims;           /* sinusoid: basis width D, even, 2..65536 (64) */
    float base;         /* sinusoid: wavelength base, > 1 (10000) */
    float slope;        /* relative: distance slope m, > 0 (1); only matters with zscore 0 */
    int zscore;         /* 1: z-score and clip as the RPA bias (default); 0: raw (scale * x) */
    int zscore_causal;  /* 0: statistics over all T*T entries; 1: over j <= i, and 0 written
                           at j > i (also with zscore 0) */
    float zscore_eps;   /* added to the std (1e-6), >= 0 */
    float bias_clip;    /* clip of the z-scored bias (4), > 0 */
    float scale;        /* warm-in scale, clamped to [0,1] (1) */
    int max_T;          /* largest accepted T (65536) */
} era_pos_config;

ERADEF era_pos_config era_pos_config_default(void);
/* Fixed sinusoidal-basis prior: x[i,j] = (2/D) sum_k cos((i - j) base^(-2k/D)), k < D/2. */
ERADEF int era_sinusoid_bias(const era_pos_config *cfg, int T, float *bias /* (T,T) */);
/* Relative-position (ALiBi-style) prior: x[i,j] = -slope |i - j|. */
ERADEF int era_relative_bias(const era_pos_config *cfg, int T, float *bias /* (T,T) */);

/* ------------------------------------------------------------------ both ----- */

/* scores (B,H,T,T) += bias (T,T) (per_head 0) or (H,T,T) (per_head 1), in place, on
   every entry (call it before the causal mask). per_head outside {0, 1}: ERA_EINVAL. */
ERADEF int era_apply(float *scores /* (B,H,T,T) */, const float *bias, int per_head, int B,
                     int H, int T);
/* The gradient of a shared bias: dbias (T,T) (per_head 0) or (H,T,T) += sum over the
   batch (and heads) of dscores (B,H,T,T). per_head outside {0, 1}: ERA_EINVAL. */
ERADEF int era_reduce_grad(float *dbias, const float *dscores /* (B,H,T,T) */,
                           int per_head, int B, int H, int T);

/* Inference cache keyed by T (a plain array of entries, searched linearly: meant for a
   handful of lengths; no container library), bounded by a byte budget; least
   recently used entries are evicted. A pointer from era_cache_get stays valid until the
   next era_cache_get or era_cache_free on the same cache. Not thread-safe. */
typedef int (*era_build_fn)(void *user, int T, float *bias /* (T,T) */);
/* Mean memberships for length T, for the RPA builder: mbar (T,R). */
typedef int (*era_mu_fn)(void *user, int T, float *mbar /* (T,R) */);

struct era__cache_kv;
typedef struct era_cache {
    size_t budget, bytes;
    unsigned long long tick;
    long builds, hits, evictions;
    era_build_fn build;
    void *user;
    struct era__cache_kv *map;  /* (cap) entries, the first n live: T -> entry */
    int n, cap;
    /* frozen copies used by the built-in builders */
    int kind;                   /* 0 custom, 1 ERA, 2 RPA */
    era_era_config ecfg;
    era_era_params epar;
    era_rpa_config rcfg;
    era_rpa_params rpar;
    era_mu_fn mu_fn;
    void *mu_user;
    float *frozen;              /* owned copy of ERA centres */
} era_cache;

ERADEF int era_cache_init(era_cache *c, size_t budget_bytes, era_build_fn build, void *user);
/* ERA: parameters copied (frozen) at init. */
ERADEF int era_cache_init_era(era_cache *c, size_t budget_bytes, const era_era_config *cfg,
                              const era_era_params *p);
/* RPA: scalar parameters and config copied (frozen); mu_fn supplies the mean memberships
   for a length (e.g. averaged over a calibration set). p->W etc. are not used. */
ERADEF int era_cache_init_rpa(era_cache *c, size_t budget_bytes, const era_rpa_config *cfg,
                              const era_rpa_params *p, era_mu_fn mu_fn, void *user);
ERADEF int era_cache_get(era_cache *c, int T, const float **bias /* (T,T) */);
ERADEF void era_cache_free(era_cache *c);

ERADEF const char *era_strerror(int code);

/* ------------------------------------------------------------------ CUDA ----- */
/* Device mirrors of the calls a GPU trainer makes every step (cuda/era.cuh; compiled
   when this header is compiled by nvcc, or by a C++ compiler with ATTNKIT_CUDA_SIM and
   tests/cuda_sim.h; elsewhere they return ERA_ENOCUDA). Every buffer argument is a
   DEVICE pointer (a host pointer: ERA_EINVAL, nothing launched); configs, params
   structs and their scalars stay on the host, and so do the parameter pointers of the
   params structs' device twins: p->W, p->b, p->centers, p->log_sigma (RPA) and
   p->centers (ERA) must be device pointers here, and so must the array pointers of the
   grads structs. The scalar gradients (dtau_att, dpos_beta; dsigma, dalpha) and the
   optional era_mu_stats come back to the host: those calls end with a stream
   synchronisation, unless RPA's scalar gradients go to device floats (era_rpa_grads'
   *_to) and the statistics to device sums (era_membership_forward_sums_cuda): then the
   call waits for nothing. `stream` is a cudaStream_t (NULL: the default stream). fp32 math;
   statistics in double; no atomics (every reduction has a fixed order: results are
   bit-identical run to run). Not on the GPU: the legacy kappa-mixture (cfg->legacy:
   ERA_EINVAL), era_type2_forward, the fixed priors era_sinusoid_bias /
   era_relative_bias (build on the host, copy), the host cache (era_cache_* stays
   host-side; build B(T) once per T with era_*_forward_cuda and keep the device buffer).
   Tolerances against the CPU path: see the top of cuda/era.cuh.
   The plain calls (era_membership_*, era_rpa_*, era_era_*, era_apply, era_reduce_grad)
   take device pointers too in such a build and run these on the default stream: a prior
   state then keeps a device twin (state.cuda, freed by era_*_state_free) and its
   backward / rows follow the side its last forward ran on (device buffers given to a
   state whose last forward ran on the host: ERA_EINVAL). */
typedef struct CUstream_st *era_stream;
enum { ERA_ENOCUDA = -5, ERA_ECUDA = -6 };

/* 1 if a CUDA device is usable (always 0 without nvcc / the simulation). */
ERADEF int era_cuda_available(void);
/* Frees the device scratch the membership calls (era_membership_forward_cuda with stats,
   era_membership_backward_cuda) keep per (device, stream), grown on demand so that a call
   in steady state allocates nothing: call it at the end of a program, after the last
   device call (before cudaDeviceReset), so a leak checker sees nothing left. Later calls
   grow it again. Synchronises the device first. ERA_OK (also without nvcc, where there is
   nothing to free), or ERA_ECUDA (a pending device error; the scratch is freed anyway).
   The cache is process state: device calls from several host threads at once are not
   supported. */
ERADEF int era_cuda_release(void);

/* scalars of a device prior, copied back by era_*_cuda_diag */
typedef struct era_cuda_diag {
    double mean, std;    /* RPA: z-score statistics of x (ERA: mean over rows) */
    float std_pre, std_post, marginal_err, clamp_frac; /* as in the CPU states */
} era_cuda_diag;

/* Device state of era_rpa_forward_cuda: the CPU state's arrays, in device memory
   (one cudaMalloc, released by era_rpa_cuda_state_free). */
typedef struct era_rpa_cuda_state {
    int B, T, R, K, iters, zscore_causal, valid, tau_free;
    float tau, scale, pos_beta, posmix, clip, zeps;
    const float *mu;     /* (B,T,R) device pointer given to forward */
    float *mbar;         /* (T,R) */
    float *phi, *phiT;   /* (T,K), (K,T) */
    float *X;            /* (2 iters + 1, R, K) Sinkhorn iterates; P = last */
    float *M;            /* (T,K) = mbar P */
    double *stats;       /* (8): mean, std, count, std_pre, std_post, marginal_err, clamp_frac */
    void *dmem;
    size_t dcap;
} era_rpa_cuda_state;

typedef struct era_era_cuda_state {
    int T, R, nb, iters, zscore_causal, valid;
    float alpha, sigma, eps, delta, zeps;
    float *mu;           /* (T,R) */
    float *f, *g;        /* (iters,R), (iters+1,nb) potentials */
    float *cost, *plan;  /* (R,nb) */
    float *Q, *V;        /* (T,nb) mu plan; (T,nb) the bias value of each block */
    double *rmean, *rstd;/* (T) */
    int *bstart;         /* (nb + 1) */
    double *stats;       /* (3): marginal_err, std_pre, std_post */
    void *dmem;
    size_t dcap;
} era_era_cuda_state;

ERADEF era_rpa_cuda_state era_rpa_cuda_state_init(void);
ERADEF void era_rpa_cuda_state_free(era_rpa_cuda_state *st);
ERADEF era_era_cuda_state era_era_cuda_state_init(void);
ERADEF void era_era_cuda_state_free(era_era_cuda_state *st);

/* The device calls below are written once each, in the list ERA__CUDA_API: an entry
   X(int, era_name_cuda, (parameters)) is the prototype `int era_name_cuda(parameters)`,
   documented above it in the list; the list is expanded here into the declarations and,
   without nvcc / the simulation, into stubs that return ERA_ENOCUDA (a workspace size: 0). */
#define ERA__CUDA_DECLARE(ret, name, params) ERADEF ret name params;
#define ERA__CUDA_API(X)                                                                        \
    /* memberships (device h, mu, zproj; p's arrays on the device). stats: host or NULL. */     \
    X(int, era_membership_forward_cuda, (const era_rpa_config *cfg, const era_rpa_params *p,    \
                                         float *mu /* (B,T,R) */, float *zproj /* (B,T,P) */,   \
                                         era_mu_stats *stats, const float *h /* (B,T,D) */,     \
                                         int B, int T, era_stream stream))                      \
    /* the same with the statistics as sums added to sums (3 doubles, device memory) on the    \
       stream: era_membership_forward_sums; no host wait */                                     \
    X(int, era_membership_forward_sums_cuda, (const era_rpa_config *cfg,                        \
                                              const era_rpa_params *p, float *mu, float *zproj, \
                                              double *sums, const float *h, int B, int T,       \
                                              era_stream stream))                               \
    /* workspace: NULL or era_membership_workspace_size(p, B, T) bytes of device memory */      \
    X(int, era_membership_backward_cuda, (const era_rpa_config *cfg, const era_rpa_params *p,   \
                                          float *dh /* (B,T,D) */, era_rpa_grads *g,            \
                                          const float *dmu /* (B,T,R) */, float dentropy,       \
                                          const float *h /* (B,T,D) */,                         \
                                          const float *zproj /* (B,T,P) */,                     \
                                          const float *mu /* (B,T,R) */, int B, int T,          \
                                          void *workspace, era_stream stream))                  \
    /* RPA prior. workspace: NULL or era_rpa_cuda_workspace_size bytes of device memory. */     \
    X(size_t, era_rpa_cuda_workspace_size, (const era_rpa_config *cfg, int B, int T))           \
    X(int, era_rpa_forward_cuda, (const era_rpa_config *cfg, const era_rpa_params *p,           \
                                  const float *mu /* (B,T,R) */, int B, int T,                  \
                                  float *bias /* (T,T) or NULL */, era_rpa_cuda_state *st,      \
                                  void *workspace, era_stream stream))                          \
    X(int, era_rpa_backward_cuda, (const era_rpa_config *cfg, const era_rpa_params *p,          \
                                   const era_rpa_cuda_state *st,                                \
                                   const float *dbias /* (T,T) */, float *dmu /* (B,T,R) */,    \
                                   era_rpa_grads *g, void *workspace, era_stream stream))       \
    X(int, era_rpa_rows_cuda, (const era_rpa_cuda_state *st, int row0, int nrows,               \
                               float *out /* (nrows,T) */, era_stream stream))                  \
    X(int, era_rpa_cuda_diag, (const era_rpa_cuda_state *st, era_cuda_diag *out,                \
                               era_stream stream))                                              \
    /* ERA prior (p->centers on the device). workspace as above. */                             \
    X(size_t, era_era_cuda_workspace_size, (const era_era_config *cfg, int T))                  \
    X(int, era_era_forward_cuda, (const era_era_config *cfg, const era_era_params *p, int T,    \
                                  float *bias /* (T,T) or NULL */, era_era_cuda_state *st,      \
                                  void *workspace, era_stream stream))                          \
    X(int, era_era_backward_cuda, (const era_era_config *cfg, const era_era_params *p,          \
                                   const era_era_cuda_state *st,                                \
                                   const float *dbias /* (T,T) */, era_era_grads *g,            \
                                   void *workspace, era_stream stream))                         \
    X(int, era_era_rows_cuda, (const era_era_cuda_state *st, int row0, int nrows,               \
                               float *out /* (nrows,T) */, era_stream stream))                  \
    X(int, era_era_cuda_diag, (const era_era_cuda_state *st, era_cuda_diag *out,                \
                               era_stream stream))                                              \
    X(int, era_apply_cuda, (float *scores /* (B,H,T,T) */, const float *bias, int per_head,     \
                            int B, int H, int T, era_stream stream))                            \
    X(int, era_reduce_grad_cuda, (float *dbias, const float *dscores /* (B,H,T,T) */,           \
                                  int per_head, int B, int H, int T, era_stream stream))
ERA__CUDA_API(ERA__CUDA_DECLARE)
/* Inference cache keyed by T with DEVICE buffers: B(T) built once per length on the
   device (era_era_forward_cuda / era_rpa_forward_cuda with frozen parameters) and reused;
   LRU eviction under a byte budget, as era_cache. ERA: p->centers host or device (copied
   to an owned device array at init). RPA: mu_fn fills the host mean memberships (T,R) for
   a length (uploaded once per build); p's arrays are not used. A pointer from
   era_cuda_cache_get stays valid until the next get or free on the same cache. */
typedef struct era_cuda_cache_entry {
    int T;
    float *bias;        /* (T,T) device */
    size_t bytes;
    unsigned long long last;
} era_cuda_cache_entry;
typedef struct era_cuda_cache {
    size_t budget, bytes;
    unsigned long long tick;
    long builds, hits, evictions;
    int kind;           /* 1 ERA, 2 RPA */
    era_era_config ecfg;
    era_era_params epar; /* centers: owned device copy */
    era_rpa_config rcfg;
    era_rpa_params rpar;
    era_mu_fn mu_fn;
    void *mu_user;
    float *dcenters;
    era_cuda_cache_entry *ent;
    int n, cap;
} era_cuda_cache;
ERADEF int era_cuda_cache_init_era(era_cuda_cache *c, size_t budget_bytes,
                                   const era_era_config *cfg, const era_era_params *p);
ERADEF int era_cuda_cache_init_rpa(era_cuda_cache *c, size_t budget_bytes,
                                   const era_rpa_config *cfg, const era_rpa_params *p,
                                   era_mu_fn mu_fn, void *user);
ERADEF int era_cuda_cache_get(era_cuda_cache *c, int T, const float **bias /* (T,T) device */,
                              era_stream stream);
ERADEF void era_cuda_cache_free(era_cuda_cache *c);

#ifdef __cplusplus
}
#endif
#endif /* ERA_H_INCLUDED */

/* ============================================================================= */
#ifdef ERA_IMPLEMENTATION
#ifndef ERA_IMPLEMENTATION_DONE
#define ERA_IMPLEMENTATION_DONE

/* GCC keeps IEEE exception semantics by default (-ftrapping-math): a loop with a
   compare-and-select around a float expression (a clamp before an exp, say) is then
   not if-converted, hence not vectorised, on AVX2 (AVX-512 gets masked instructions).
   Nothing here reads floating-point exception flags, so the implementation is compiled
   without that constraint; values are unchanged (this is not -ffast-math). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__INTEL_COMPILER)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#define ERA__PUSHED_NO_TRAPPING 1
#endif

#include <math.h>
#include <string.h>
#include <stdlib.h>
#include <float.h>
#include <stdint.h>
#include <limits.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(ERA_MALLOC) && !defined(ERA_FREE)
#error "define ERA_MALLOC and ERA_FREE together"
#endif
#if !defined(ERA_MALLOC) && defined(ERA_FREE)
#error "define ERA_MALLOC and ERA_FREE together"
#endif
#ifndef ERA_MALLOC
#define ERA_MALLOC(sz) malloc(sz)
#define ERA_FREE(p) free(p)
#endif
#ifndef ERA_ASSERT
#include <assert.h>
#define ERA_ASSERT(x) assert(x)
#endif
#if defined(__cplusplus) || !defined(__STDC_VERSION__) || __STDC_VERSION__ < 199901L
#define ERA_RESTRICT
#else
#define ERA_RESTRICT restrict
#endif
#ifdef _OPENMP
#define ERA__OMP(x) _Pragma(#x)
#else
#define ERA__OMP(x)
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct era__cache_entry {
    float *bias;
    size_t bytes;
    unsigned long long last;
};
struct era__cache_kv {
    int key;
    struct era__cache_entry value;
};

/* IEEE tests on the bits: they survive -ffast-math / -Ofast, which fold x != x,
   x - x == 0 and comparisons with +-DBL_MAX or +-HUGE_VAL */
static int era__finite(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7FF0000000000000ULL) != 0x7FF0000000000000ULL;
}
static int era__isnan(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7FFFFFFFFFFFFFFFULL) > 0x7FF0000000000000ULL;
}
/* +1 for +Inf, -1 for -Inf, 0 otherwise */
static int era__infsign(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFFFFFFFFFULL) != 0x7FF0000000000000ULL) return 0;
    return (u >> 63) ? -1 : 1;
}
/* float bits for the vectorised row loop: 0 finite, 1 NaN, 2 +Inf, 3 -Inf */
static int era__fclass(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7F800000u) != 0x7F800000u) return 0;
    if (u & 0x007FFFFFu) return 1;
    return (u >> 31) ? 3 : 2;
}
static size_t era__align(size_t n) { return (n + 63u) & ~(size_t)63u; }
/* The next array carved out of a block: base + *off (NULL while base is NULL: a size
   computation), then *off moves past it, rounded up to 64 bytes. The layouts below are
   each written once, for the CPU body and the device one (cuda/era.cuh). */
static void *era__take(char *base, size_t *off, size_t bytes)
{
    void *p = base ? (void *)(base + *off) : NULL;
    *off += era__align(bytes);
    return p;
}
static int era__nthreads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

ERADEF const char *era_strerror(int code)
{
    switch (code) {
    case ERA_OK: return "ok";
    case ERA_EINVAL: return "invalid argument";
    case ERA_ENOMEM: return "out of memory";
    case ERA_ERANGE: return "size out of range";
    case ERA_ESTATE: return "saved state does not match";
    case ERA_ENOCUDA: return "built without CUDA (compile with nvcc)";
    case ERA_ECUDA: return "CUDA error";
    default: return "unknown error";
    }
}

ERADEF float era_warmin_scale(long step, long warm_steps)
{
    double w = warm_steps < 1 ? 1.0 : (double)warm_steps;
    double s = (double)step / w;
    if (s < 0.0) s = 0.0;
    if (s > 1.0) s = 1.0;
    return (float)s;
}

/* a (T,T) float matrix must fit in size_t and respect max_T */
static int era__check_T(int T, int max_T)
{
    if (T <= 0) return ERA_EINVAL;
    if (T > max_T) return ERA_ERANGE;
    if ((double)T * (double)T * sizeof(float) > (double)((size_t)-1) / 4) return ERA_ERANGE;
    return ERA_OK;
}

/* Grow an owned block to at least n bytes. */
static int era__reserve(void **mem, size_t *cap, size_t n)
{
    if (*mem && *cap >= n) return ERA_OK;
    if (*mem) ERA_FREE(*mem);
    *mem = NULL;
    *cap = 0;
    *mem = ERA_MALLOC(n ? n : 1);
    if (!*mem) return ERA_ENOMEM;
    *cap = n;
    return ERA_OK;
}

/* ------------------------------------------------------------------ RPA ------ */

ERADEF era_rpa_config era_rpa_config_default(int R)
{
    era_rpa_config c;
    memset(&c, 0, sizeof c);
    c.R = R > 0 ? R : 4;
    c.K = 0;
    c.tau_align = 0.7f;
    c.sinkhorn_iters = 6;
    c.detach = 1;
    c.posmix = 0.0f;
    c.bias_clip = 4.0f;
    c.tau_min = 0.6f;
    c.tau_max = 1.6f;
    c.scale = 1.0f;
    c.zscore_eps = 1e-6f;
    c.zscore_causal = 0;
    c.legacy = 0;
    c.logit_clamp = 30.0f;
    c.inv2sig2_min = 1e-3f;
    c.inv2sig2_max = 1e3f;
    c.entropy_floor = 1e-8f;
    c.sat_threshold = 0.9f;
    c.max_T = 65536;
    return c;
}

ERADEF era_rpa_params era_rpa_params_default(void)
{
    era_rpa_params p;
    memset(&p, 0, sizeof p);
    p.tau_att = 1.0f;
    p.pos_beta = 0.2f;
    p.kappa = 0.5f;
    return p;
}

ERADEF era_rpa_state era_rpa_state_init(void)
{
    era_rpa_state s;
    memset(&s, 0, sizeof s);
    return s;
}

ERADEF void era_rpa_state_free(era_rpa_state *st)
{
    if (!st) return;
    if (st->mem) ERA_FREE(st->mem);
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (st->cuda) {
        era_rpa_cuda_state_free((era_rpa_cuda_state *)st->cuda);
        ERA_FREE(st->cuda);
    }
#endif
    memset(st, 0, sizeof *st);
}

static int era__rpa_K(const era_rpa_config *c) { return c->K > 0 ? c->K : c->R; }

static int era__rpa_check_cfg(const era_rpa_config *c)
{
    if (!c) return ERA_EINVAL;
    if (c->R <= 0 || c->R > 4096 || c->K > 4096) return ERA_EINVAL;
    if (!era__finite(c->tau_align) || c->tau_align <= 0.0f) return ERA_EINVAL;
    if (c->sinkhorn_iters < 0 || c->sinkhorn_iters > 10000) return ERA_EINVAL;
    if (!era__finite(c->posmix) || c->posmix < 0.0f || c->posmix > 1.0f) return ERA_EINVAL;
    if (!era__finite(c->bias_clip) || c->bias_clip <= 0.0f) return ERA_EINVAL;
    if (!era__finite(c->tau_min) || !era__finite(c->tau_max) || c->tau_min <= 0.0f ||
        c->tau_max < c->tau_min)
        return ERA_EINVAL;
    if (!era__finite(c->scale)) return ERA_EINVAL;
    if (!era__finite(c->zscore_eps) || c->zscore_eps < 0.0f) return ERA_EINVAL;
    if (!era__finite(c->logit_clamp) || c->logit_clamp <= 0.0f) return ERA_EINVAL;
    if (!era__finite(c->inv2sig2_min) || !era__finite(c->inv2sig2_max) ||
        c->inv2sig2_min <= 0.0f || c->inv2sig2_max < c->inv2sig2_min)
        return ERA_EINVAL;
    if (!era__finite(c->entropy_floor) || c->entropy_floor <= 0.0f) return ERA_EINVAL;
    if (!era__finite(c->sat_threshold)) return ERA_EINVAL;
    if (c->max_T <= 0) return ERA_EINVAL;
    /* boolean flags are 0 or 1, nothing else (issue 37 rule 4) */
    if ((c->detach != 0 && c->detach != 1) || (c->zscore_causal != 0 && c->zscore_causal != 1) ||
        (c->legacy != 0 && c->legacy != 1))
        return ERA_EINVAL;
    return ERA_OK;
}

ERADEF int era_rpa_basis(float *phi, int T, int K)
{
    int t, k;
    double w;
    if (!phi || T <= 0 || K <= 0) return ERA_EINVAL;
    w = 1.5 * (double)T / (double)K;
    if (w < 1.0) w = 1.0;
    for (t = 0; t < T; t++) {
        double s = 0.0;
        float *row = phi + (size_t)t * K;
        for (k = 0; k < K; k++) {
            double c = K > 1 ? (double)k * (double)(T - 1) / (double)(K - 1) : 0.0;
            double d = fabs((double)t - c) / w;
            double v = d <= 1.0 ? 0.5 * (1.0 + cos(3.14159265358979323846 * d)) : 0.0;
            row[k] = (float)v;
            s += (double)row[k];
        }
        for (k = 0; k < K; k++) row[k] = (float)((double)row[k] / (s + 1e-6));
    }
    return ERA_OK;
}

static float era__inv2sig2(const era_rpa_config *c, float ls, int *free_)
{
    double v = exp(-2.0 * (double)ls);
    int fr = 1;
    if (!(v >= c->inv2sig2_min)) { v = c->inv2sig2_min; fr = 0; }
    if (v > c->inv2sig2_max) { v = c->inv2sig2_max; fr = 0; }
    if (free_) *free_ = fr;
    return (float)v;
}

/* over n tokens of mu (n,R): *H = the sum of H(mu_t) (in order), *sat = the tokens with
   max_r mu >= sat_threshold */
static void era__mu_sums(const float *mu, long long n, int R, float entropy_floor,
                         float sat_threshold, double *Hout, long long *satout)
{
    long long i, sat = 0;
    double H = 0.0;
    for (i = 0; i < n; i++) {
        const float *m = mu + (size_t)i * R;
        double h = 0.0, mx = -1.0;
        int r;
        for (r = 0; r < R; r++) {
            double v = m[r];
            double lv = v > entropy_floor ? v : (double)entropy_floor;
            h -= v * log(lv);
            if (v > mx) mx = v;
        }
        H += h;
        if (mx >= sat_threshold) sat++;
    }
    *Hout = H;
    *satout = sat;
}

ERADEF int era_mu_statistics(era_mu_stats *stats, const float *mu, int B, int T, int R,
                             float entropy_floor, float sat_threshold)
{
    long long n, sat;
    double H;
    if (!stats || !mu || B <= 0 || T <= 0 || R <= 0) return ERA_EINVAL;
    if (!era__finite(entropy_floor) || entropy_floor <= 0.0f) return ERA_EINVAL;
    n = (long long)B * T;
    era__mu_sums(mu, n, R, entropy_floor, sat_threshold, &H, &sat);
    stats->entropy = (float)(H / (double)n);
    stats->sat_frac = (float)((double)sat / (double)n);
    return ERA_OK;
}

/* Under nvcc (or the CUDA simulation) the plain calls route DEVICE pointers to the
   *_cuda paths on the default stream (DESIGN.md: one model for both devices): the
   memberships by h, era_apply / era_reduce_grad by the scores, the RPA prior by mu, the
   ERA prior by bias or p->centers, rows by out. A prior state then carries a device twin
   (st->cuda, allocated on first use, released by era_*_state_free): the backward and
   rows follow the device twin when the last forward ran on the device, else the host
   state (one state holds one side's forward at a time; the other side is invalidated).
   Workspaces and parameter arrays must then be device memory, as for the _cuda calls. */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
static int era__is_dev(const void *p); /* cuda/era.cuh */
static era_rpa_cuda_state *era__rpa_twin(era_rpa_state *st)
{
    if (!st->cuda) {
        st->cuda = ERA_MALLOC(sizeof(era_rpa_cuda_state));
        if (st->cuda) *(era_rpa_cuda_state *)st->cuda = era_rpa_cuda_state_init();
    }
    return (era_rpa_cuda_state *)st->cuda;
}
static era_era_cuda_state *era__era_twin(era_era_state *st)
{
    if (!st->cuda) {
        st->cuda = ERA_MALLOC(sizeof(era_era_cuda_state));
        if (st->cuda) *(era_era_cuda_state *)st->cuda = era_era_cuda_state_init();
    }
    return (era_era_cuda_state *)st->cuda;
}
/* the device twin holds the last forward */
static const era_rpa_cuda_state *era__rpa_on_dev(const era_rpa_state *st)
{
    return st && st->cuda && ((const era_rpa_cuda_state *)st->cuda)->valid ? (const era_rpa_cuda_state *)st->cuda : NULL;
}
static const era_era_cuda_state *era__era_on_dev(const era_era_state *st)
{
    return st && st->cuda && ((const era_era_cuda_state *)st->cuda)->valid ? (const era_era_cuda_state *)st->cuda : NULL;
}
#endif

/* the host memberships (era_membership_forward's body); *nan_out: the non-finite rows */
static int era__membership_fwd_host(const era_rpa_config *cfg, const era_rpa_params *p,
                                    float *mu, float *zproj, const float *h, int B, int T,
                                    int *nan_out)
{
    int rc, R, D, P, nan_rows = 0;
    long long n, i;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!p || !mu || !zproj || !h || !p->W || !p->centers || !p->log_sigma) return ERA_EINVAL;
    if (B <= 0 || T <= 0 || p->D <= 0 || p->P <= 0) return ERA_EINVAL;
    R = cfg->R;
    D = p->D;
    P = p->P;
    n = (long long)B * T;
    {
        /* projection z = W h + b with W transposed once, four tokens per pass over it:
           contiguous axpy inner loops that vectorise without -ffast-math */
        long long nblk = (n + 3) / 4, ib;
        float *Wt = (float *)ERA_MALLOC(sizeof(float) * (size_t)D * (size_t)P);
        int q0, d0;
        if (!Wt) return ERA_ENOMEM;
        for (q0 = 0; q0 < P; q0++)
            for (d0 = 0; d0 < D; d0++) Wt[(size_t)d0 * P + q0] = p->W[(size_t)q0 * D + d0];
        ERA__OMP(omp parallel for schedule(static) if(n * (long long)P * D > 65536))
        for (ib = 0; ib < nblk; ib++) {
            long long i0 = ib * 4;
            int nu = n - i0 < 4 ? (int)(n - i0) : 4, u, d, q;
            for (u = 0; u < nu; u++) {
                float *z = zproj + (size_t)(i0 + u) * P;
                for (q = 0; q < P; q++) z[q] = p->b ? p->b[q] : 0.0f;
            }
            for (d = 0; d < D; d++) {
                const float *ERA_RESTRICT wt = Wt + (size_t)d * P;
                for (u = 0; u < nu; u++) {
                    float xv = h[(size_t)(i0 + u) * D + d];
                    float *ERA_RESTRICT z = zproj + (size_t)(i0 + u) * P;
                    for (q = 0; q < P; q++) z[q] += xv * wt[q];
                }
            }
        }
        ERA_FREE(Wt);
    }
    ERA__OMP(omp parallel for schedule(static) if(n * (long long)P * R > 65536) reduction(+:nan_rows))
    for (i = 0; i < n; i++) {
        const float *z = zproj + (size_t)i * P;
        float *m = mu + (size_t)i * R;
        double mx = -HUGE_VAL, s = 0.0;
        int q, r, bad = 0;
        for (r = 0; r < R; r++) {
            const float *c = p->centers + (size_t)r * P;
            double d2 = 0.0, lg;
            float s2 = era__inv2sig2(cfg, p->log_sigma[r], NULL);
            for (q = 0; q < P; q++) {
                double e = (double)z[q] - (double)c[q];
                d2 += e * e;
            }
            lg = -0.5 * d2 * (double)s2;
            if (era__isnan(lg)) bad = 1;
            if (lg < -cfg->logit_clamp) lg = -cfg->logit_clamp;
            if (lg > cfg->logit_clamp) lg = cfg->logit_clamp;
            m[r] = (float)lg;
            if (lg > mx) mx = lg;
        }
        if (bad) {
            for (r = 0; r < R; r++) m[r] = 1.0f / (float)R;
            nan_rows++;
            continue;
        }
        for (r = 0; r < R; r++) {
            double e = exp((double)m[r] - mx);
            m[r] = (float)e;
            s += e;
        }
        for (r = 0; r < R; r++) m[r] = (float)((double)m[r] / s);
    }
    *nan_out = nan_rows;
    return ERA_OK;
}

ERADEF int era_membership_forward(const era_rpa_config *cfg, const era_rpa_params *p,
                                  float *mu, float *zproj, era_mu_stats *stats,
                                  const float *h, int B, int T)
{
    int rc, nan_rows = 0;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__is_dev(h)) return era_membership_forward_cuda(cfg, p, mu, zproj, stats, h, B, T, NULL);
#endif
    rc = era__membership_fwd_host(cfg, p, mu, zproj, h, B, T, &nan_rows);
    if (rc == ERA_OK && stats) {
        era_mu_statistics(stats, mu, B, T, cfg->R, cfg->entropy_floor, cfg->sat_threshold);
        stats->nan_rows = nan_rows;
    }
    return rc;
}

ERADEF int era_membership_forward_sums(const era_rpa_config *cfg, const era_rpa_params *p,
                                       float *mu, float *zproj, double *sums, const float *h,
                                       int B, int T)
{
    int rc, nan_rows = 0;
    double H;
    long long sat;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__is_dev(h)) return era_membership_forward_sums_cuda(cfg, p, mu, zproj, sums, h, B, T, NULL);
#endif
    if (!sums) return ERA_EINVAL;
    rc = era__membership_fwd_host(cfg, p, mu, zproj, h, B, T, &nan_rows);
    if (rc != ERA_OK) return rc;
    era__mu_sums(mu, (long long)B * T, cfg->R, cfg->entropy_floor, cfg->sat_threshold, &H, &sat);
    sums[0] += H;
    sums[1] += (double)sat;
    sums[2] += (double)nan_rows;
    return ERA_OK;
}

/* the membership backward's workspace (n = B T rows): dz (n,P), then dd2 (n,64); its
   bytes (base NULL: only those) */
static size_t era__mu_ws_carve(void *base, size_t n, int P, float **dz, float **dd2)
{
    size_t off = 0;
    *dz = (float *)era__take((char *)base, &off, sizeof(float) * n * (size_t)P);
    *dd2 = (float *)era__take((char *)base, &off, sizeof(float) * n * 64u);
    return off;
}

ERADEF size_t era_membership_workspace_size(const era_rpa_params *p, int B, int T)
{
    float *dz, *dd2;
    if (!p || B <= 0 || T <= 0 || p->P <= 0) return 0;
    return era__mu_ws_carve(NULL, (size_t)B * (size_t)T, p->P, &dz, &dd2);
}

ERADEF int era_membership_backward(const era_rpa_config *cfg, const era_rpa_params *p,
                                   float *dh, era_rpa_grads *g, const float *dmu,
                                   float dentropy, const float *h, const float *zproj,
                                   const float *mu, int B, int T, void *workspace)
{
    int rc, R, D, P;
    long long n, i;
    size_t need;
    void *own = NULL;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__is_dev(h))
        return era_membership_backward_cuda(cfg, p, dh, g, dmu, dentropy, h, zproj, mu, B, T, workspace, NULL);
#endif
    float *dz, *dd2;
    float *s2 = NULL;
    int *s2free = NULL;
    era_rpa_grads gnone;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!g) { /* NULL grads: nothing accumulated into the parameters (as polar.h) */
        memset(&gnone, 0, sizeof gnone);
        g = &gnone;
    }
    if (!p || !h || !zproj || !mu || !p->W || !p->centers || !p->log_sigma)
        return ERA_EINVAL;
    if (B <= 0 || T <= 0 || p->D <= 0 || p->P <= 0) return ERA_EINVAL;
    if (!era__finite(dentropy)) return ERA_EINVAL;
    R = cfg->R;
    D = p->D;
    P = p->P;
    if (R > 64) return ERA_EINVAL; /* workspace holds up to 64 regimes per token */
    n = (long long)B * T;
    need = era_membership_workspace_size(p, B, T);
    if (!workspace) {
        own = ERA_MALLOC(need);
        if (!own) return ERA_ENOMEM;
        workspace = own;
    }
    era__mu_ws_carve(workspace, (size_t)n, P, &dz, &dd2);
    s2 = (float *)ERA_MALLOC(sizeof(float) * R + sizeof(int) * R);
    if (!s2) {
        if (own) ERA_FREE(own);
        return ERA_ENOMEM;
    }
    s2free = (int *)(s2 + R);
    {
        int r;
        for (r = 0; r < R; r++) s2[r] = era__inv2sig2(cfg, p->log_sigma[r], &s2free[r]);
    }
    /* per token: dlogit -> dd2 (stored, row of 64) and dz */
    ERA__OMP(omp parallel for schedule(static) if(n * (long long)P * R > 65536))
    for (i = 0; i < n; i++) {
        const float *m = mu + (size_t)i * R;
        const float *z = zproj + (size_t)i * P;
        float *dzi = dz + (size_t)i * P;
        float *dd = dd2 + (size_t)i * 64;
        double dm[64];
        double dot = 0.0, msum = 0.0;
        int r, q, bad = 0;
        for (r = 0; r < R; r++) {
            double v = dmu ? (double)dmu[(size_t)i * R + r] : 0.0;
            if (dentropy != 0.0f) {
                double mv = m[r];
                if (mv > cfg->entropy_floor)
                    v += -(double)dentropy * (log(mv) + 1.0) / (double)n;
                else
                    v += -(double)dentropy * log((double)cfg->entropy_floor) / (double)n;
            }
            dm[r] = v;
            dot += v * (double)m[r];
            msum += (double)m[r];
        }
        /* E_mu[dm] with mu renormalised in double (issue 38): an fp32 mu near one-hot
           (1.0f beside 3e-12) sums to 1 + 1e-11, and the plain dm_r - sum mu dm then
           lost the whole of a gradient of that size */
        dot /= msum;
        for (q = 0; q < P; q++) dzi[q] = 0.0f;
        /* recompute the raw logits to know which were clamped (and NaN rows) */
        for (r = 0; r < R; r++) {
            const float *c = p->centers + (size_t)r * P;
            double d2 = 0.0, lg, dl;
            for (q = 0; q < P; q++) {
                double e = (double)z[q] - (double)c[q];
                d2 += e * e;
            }
            lg = -0.5 * d2 * (double)s2[r];
            if (era__isnan(lg)) { bad = 1; break; }
            dl = (double)m[r] * (dm[r] - dot);
            if (lg < -cfg->logit_clamp || lg > cfg->logit_clamp) dl = 0.0;
            dd[r] = (float)dl; /* gradient on the unclamped logit */
        }
        if (bad) {
            for (r = 0; r < R; r++) dd[r] = 0.0f;
            continue;
        }
        for (r = 0; r < R; r++) {
            const float *c = p->centers + (size_t)r * P;
            double k = (double)dd[r] * (-0.5 * (double)s2[r]) * 2.0; /* d/dz of d2 = 2 (z-c) */
            for (q = 0; q < P; q++) dzi[q] += (float)(k * ((double)z[q] - (double)c[q]));
        }
    }
    /* centres and log-scales: reduce over tokens in a fixed order per regime */
    if (g->dcenters || g->dlog_sigma) {
        int r;
        ERA__OMP(omp parallel for schedule(static) if(n * (long long)P * R > 65536))
        for (r = 0; r < R; r++) {
            const float *c = p->centers + (size_t)r * P;
            double dls = 0.0;
            long long j;
            int q;
            for (j = 0; j < n; j++) {
                const float *z = zproj + (size_t)j * P;
                double dl = dd2[(size_t)j * 64 + r];
                if (dl == 0.0) continue;
                if (g->dcenters) {
                    double k = dl * (-0.5 * (double)s2[r]) * 2.0;
                    for (q = 0; q < P; q++)
                        g->dcenters[(size_t)r * P + q] -= (float)(k * ((double)z[q] - (double)c[q]));
                }
                if (s2free[r]) {
                    double d2 = 0.0;
                    for (q = 0; q < P; q++) {
                        double e = (double)z[q] - (double)c[q];
                        d2 += e * e;
                    }
                    /* logit = -0.5 d2 s2, s2 = exp(-2 ls) */
                    dls += dl * (-0.5 * d2) * (double)s2[r] * -2.0;
                }
            }
            if (g->dlog_sigma) g->dlog_sigma[r] += (float)dls;
        }
    }
    /* projection: dW[q,:] += sum_i dz[i,q] h[i,:]; db[q] += sum_i dz[i,q] */
    if (g->dW || g->db) {
        int q;
        ERA__OMP(omp parallel for schedule(static) if(n * (long long)P * D > 65536))
        for (q = 0; q < P; q++) {
            long long j;
            double sb = 0.0;
            for (j = 0; j < n; j++) {
                float v = dz[(size_t)j * P + q];
                const float *x = h + (size_t)j * D;
                int d;
                sb += v;
                if (g->dW && v != 0.0f) {
                    float *w = g->dW + (size_t)q * D;
                    for (d = 0; d < D; d++) w[d] += v * x[d];
                }
            }
            if (g->db) g->db[q] += (float)sb;
        }
    }
    if (dh) {
        ERA__OMP(omp parallel for schedule(static) if(n * (long long)P * D > 65536))
        for (i = 0; i < n; i++) {
            const float *dzi = dz + (size_t)i * P;
            float *o = dh + (size_t)i * D;
            int q, d;
            for (q = 0; q < P; q++) {
                const float *w = p->W + (size_t)q * D;
                float v = dzi[q];
                if (v == 0.0f) continue;
                for (d = 0; d < D; d++) o[d] += v * w[d];
            }
        }
    }
    ERA_FREE(s2);
    if (own) ERA_FREE(own);
    return ERA_OK;
}

ERADEF int era_type2_forward(float *u, const float *h, const float *U1, const float *c1,
                             const float *U2, float c2, int B, int T, int D, int Dh)
{
    long long n, i;
    if (!u || !h || !U1 || !U2 || B <= 0 || T <= 0 || D <= 0 || Dh <= 0) return ERA_EINVAL;
    if (!era__finite(c2)) return ERA_EINVAL;
    n = (long long)B * T;
    ERA__OMP(omp parallel for schedule(static) if(n * (long long)D * Dh > 65536))
    for (i = 0; i < n; i++) {
        const float *x = h + (size_t)i * D;
        double acc = c2;
        int k, d;
        for (k = 0; k < Dh; k++) {
            const float *w = U1 + (size_t)k * D;
            double a = c1 ? c1[k] : 0.0;
            for (d = 0; d < D; d++) a += (double)w[d] * x[d];
            if (a > 0.0) acc += (double)U2[k] * a;
        }
        if (era__isnan(acc)) acc = 0.0;
        u[i] = (float)(1.0 / (1.0 + exp(-acc)));
    }
    return ERA_OK;
}

/* The RPA state's arrays, one block for the host state and for its device twin (which
   appends its own after X): mbar (T,R), phi (T,K), M (T,K), phiT (K,T), X (2 iters + 1,
   R, K). Returns the bytes up to the end of X; base NULL: only those. */
static size_t era__rpa_state_carve(char *base, int T, int R, int K, int iters, float **mbar,
                                   float **phi, float **M, float **phiT, float **X)
{
    size_t off = 0;
    *mbar = (float *)era__take(base, &off, sizeof(float) * (size_t)T * R);
    *phi = (float *)era__take(base, &off, sizeof(float) * (size_t)T * K);
    *M = (float *)era__take(base, &off, sizeof(float) * (size_t)T * K);
    *phiT = (float *)era__take(base, &off, sizeof(float) * (size_t)T * K);
    *X = (float *)era__take(base, &off, sizeof(float) * (size_t)(2 * iters + 1) * R * K);
    return off;
}
static size_t era__rpa_state_bytes(int T, int R, int K, int iters)
{
    float *a;
    return era__rpa_state_carve(NULL, T, R, K, iters, &a, &a, &a, &a, &a);
}

/* x (non-legacy) or F (legacy) for row i into out (T) */
/* Sum and sum of squares of x (n) into *s, *s2. The rows of a prior have a mean far
   above their spread, so a plain float sum of squares would cancel catastrophically
   in var = E[x^2] - E[x]^2: the partials are taken of x - p (p = x[0], a shift that
   keeps the float sums at the scale of the spread), in 16 float lanes over blocks of
   256 (vectorisable), folded into doubles per block and shifted back exactly in double.
   Fixed order: deterministic. */
static void era__sum_sq(const float *ERA_RESTRICT x, int n, double *s, double *s2)
{
    double S = 0.0, S2 = 0.0;
    const float p = n > 0 ? x[0] : 0.0f;
    int j = 0;
    while (j < n) {
        int m = n - j < 256 ? n - j : 256, i, l;
        const float *ERA_RESTRICT xb = x + j;
        float a[16], b[16], d[256];
        /* three simple loops (shift, sum, sum of squares): each one vectorises cleanly
           with gcc and clang, where one fused loop with two lane arrays does not */
        for (i = 0; i < m; i++) d[i] = xb[i] - p;
        for (l = 0; l < 16; l++) a[l] = b[l] = 0.0f;
        for (i = 0; i + 16 <= m; i += 16)
            for (l = 0; l < 16; l++) a[l] += d[i + l];
        for (i = 0; i + 16 <= m; i += 16)
            for (l = 0; l < 16; l++) b[l] += d[i + l] * d[i + l];
        for (i = m & ~15; i < m; i++) {
            a[0] += d[i];
            b[0] += d[i] * d[i];
        }
        for (l = 0; l < 16; l++) {
            S += a[l];
            S2 += b[l];
        }
        j += m;
    }
    /* sum x = S + n p;  sum x^2 = S2 + 2 p S + n p^2 */
    *s = S + (double)n * p;
    *s2 = S2 + 2.0 * (double)p * S + (double)n * (double)p * p;
}

static void era__rpa_xrow(const era_rpa_state *st, int i, float *ERA_RESTRICT out)
{
    int T = st->T, K = st->K, j, k;
    if (!st->legacy) {
        const float *Mi = st->M + (size_t)i * K;
        float pm = st->posmix;
        double beta = st->pos_beta > 0.0f ? st->pos_beta : 0.0;
        double den = T - 1 > 1 ? (double)(T - 1) : 1.0;
        /* row i of M Phi^T: contiguous passes over the transposed basis, four
           columns per pass (vectorises; K = 8 is two passes) */
        for (k = 0; k < K; k += 4) {
            const float *ERA_RESTRICT p0 = st->phiT + (size_t)k * T;
            const int kn = K - k < 4 ? K - k : 4;
            const float m0 = Mi[k];
            if (kn == 4) {
                const float *ERA_RESTRICT p1 = p0 + T, *ERA_RESTRICT p2 = p1 + T, *ERA_RESTRICT p3 = p2 + T;
                const float m1 = Mi[k + 1], m2 = Mi[k + 2], m3 = Mi[k + 3];
                if (k == 0)
                    for (j = 0; j < T; j++) out[j] = m0 * p0[j] + m1 * p1[j] + m2 * p2[j] + m3 * p3[j];
                else
                    for (j = 0; j < T; j++) out[j] += m0 * p0[j] + m1 * p1[j] + m2 * p2[j] + m3 * p3[j];
            } else {
                int kk;
                if (k == 0)
                    for (j = 0; j < T; j++) out[j] = m0 * p0[j];
                else
                    for (j = 0; j < T; j++) out[j] += m0 * p0[j];
                for (kk = 1; kk < kn; kk++) {
                    const float *ERA_RESTRICT pk = p0 + (size_t)kk * T;
                    const float mk = Mi[k + kk];
                    for (j = 0; j < T; j++) out[j] += mk * pk[j];
                }
            }
        }
        if (pm > 0.0f) {
            float keep = 1.0f - pm, cpos = (float)(-(double)pm * beta / den);
            for (j = 0; j < T; j++) out[j] = keep * out[j] + cpos * (float)(i > j ? i - j : j - i);
        }
    } else {
        int B = st->B, R = st->R, b, r;
        double inv = 1.0 / (double)B;
        for (j = 0; j < T; j++) {
            double acc = 0.0;
            for (b = 0; b < B; b++) {
                const float *mi = st->mu + ((size_t)b * T + i) * R;
                const float *mj = st->mu + ((size_t)b * T + j) * R;
                float a = 0.0f;
                for (r = 0; r < R; r++) a += mi[r] * mj[r];
                acc += a;
            }
            out[j] = (float)(acc * inv);
        }
    }
}

/* y (the standardised pre-temperature value, nan_to_num not yet applied) */
static double era__rpa_y(const era_rpa_state *st, int i, int j, float x, double inv_d,
                         double *pos_out)
{
    int T = st->T;
    double den = T - 1 > 1 ? (double)(T - 1) : 1.0;
    double beta = st->pos_beta > 0.0f ? st->pos_beta : 0.0;
    double pos = -beta * (double)abs(i - j) / den;
    double y;
    if (pos_out) *pos_out = pos;
    if (st->count < 2) return 0.0; /* std undefined (T = 1): NaN -> 0 */
    y = ((double)x - st->mean) * inv_d;
    if (st->legacy) y = (double)st->sig_kappa * y + (1.0 - (double)st->sig_kappa) * pos;
    return y;
}

static float era__rpa_finish(const era_rpa_state *st, double y)
{
    double c = st->clip, v;
    if (era__isnan(y)) y = 0.0;
    else if (era__infsign(y)) y = era__infsign(y) > 0 ? c : -c;
    v = y / (double)st->tau;
    if (v > c) v = c;
    if (v < -c) v = -c;
    return (float)(v * (double)st->scale);
}

static double era__rpa_inv_d(const era_rpa_state *st)
{
    return 1.0 / (st->std + (double)st->zeps);
}

/* row i of the final bias into row (T) */
static void era__rpa_final_row(const era_rpa_state *st, int i, float *ERA_RESTRICT row)
{
    int j, T = st->T;
    double inv_d = era__rpa_inv_d(st);
    era__rpa_xrow(st, i, row);
    if (st->legacy || st->count < 2) {
        for (j = 0; j < T; j++) row[j] = era__rpa_finish(st, era__rpa_y(st, i, j, row[j], inv_d, NULL));
    } else {
        /* the same steps as era__rpa_y + era__rpa_finish, in float (vectorises) */
        float m = (float)st->mean, id = (float)inv_d, c = st->clip, it = 1.0f / st->tau;
        float sc = st->scale;
        for (j = 0; j < T; j++) {
            float y = (row[j] - m) * id, v;
            int cls = era__fclass(y);
            if (cls) y = cls == 1 ? 0.0f : (cls == 2 ? c : -c);
            v = y * it;
            v = v > c ? c : (v < -c ? -c : v);
            row[j] = v * sc;
        }
    }
}

/* Sum and sum of squares of x over the statistics set, in closed form (non-legacy):
   x_ij = keep (M_i . Phi_j) + cpos |i - j| (keep 1, cpos 0 without the position mix, the
   same float constants era__rpa_xrow uses), so with, over the set J_i of row i,
     S_i = sum Phi_j,  G_i = sum Phi_j Phi_j^T,  E_i = sum |i-j| Phi_j,
     D_i = sum |i-j|,  D2_i = sum |i-j|^2,
   sum_j x_ij = keep M_i.S_i + cpos D_i and
   sum_j x_ij^2 = keep^2 M_i G_i M_i^T + 2 keep cpos M_i.E_i + cpos^2 D2_i.
   Prefix sums over j make it O(T K^2) instead of a pass over the (T,T) matrix; all in
   double. scratch: 4 K + 2 K^2 doubles. */
static void era__rpa_stats_closed(const era_rpa_state *st, double *scratch, double *sum_out,
                                  double *sumsq_out)
{
    const int T = st->T, K = st->K, causal = st->zscore_causal;
    double *P0 = scratch, *P1 = P0 + K, *T0 = P1 + K, *T1 = T0 + K;
    double *G = T1 + K, *Gt = G + (size_t)K * K;
    double keep = 1.0, cpos = 0.0, S = 0.0, S2 = 0.0;
    int i, k, l;
    if (st->posmix > 0.0f) {
        double beta = st->pos_beta > 0.0f ? st->pos_beta : 0.0;
        double den = T - 1 > 1 ? (double)(T - 1) : 1.0;
        keep = (double)(1.0f - st->posmix);
        cpos = (double)(float)(-(double)st->posmix * beta / den);
    }
    for (k = 0; k < K; k++) P0[k] = P1[k] = T0[k] = T1[k] = 0.0;
    for (k = 0; k < K * K; k++) G[k] = Gt[k] = 0.0;
    if (!causal)
        for (i = 0; i < T; i++) {
            const float *ph = st->phi + (size_t)i * K;
            for (k = 0; k < K; k++) {
                T0[k] += ph[k];
                T1[k] += (double)i * ph[k];
                for (l = 0; l < K; l++) Gt[(size_t)k * K + l] += (double)ph[k] * ph[l];
            }
        }
    for (i = 0; i < T; i++) {
        const float *ph = st->phi + (size_t)i * K, *Mi = st->M + (size_t)i * K;
        const double di = (double)i, a = (double)(T - 1 - i);
        const double *Gs = causal ? G : Gt;
        double D = 0.5 * di * (di + 1.0), D2 = di * (di + 1.0) * (2.0 * di + 1.0) / 6.0;
        double ms = 0.0, mgm = 0.0, me = 0.0;
        for (k = 0; k < K; k++) {
            P0[k] += ph[k];
            P1[k] += di * ph[k];
            if (causal)
                for (l = 0; l < K; l++) G[(size_t)k * K + l] += (double)ph[k] * ph[l];
        }
        if (!causal) {
            D += 0.5 * a * (a + 1.0);
            D2 += a * (a + 1.0) * (2.0 * a + 1.0) / 6.0;
        }
        for (k = 0; k < K; k++) {
            double Sk = causal ? P0[k] : T0[k];
            double Ek = di * P0[k] - P1[k], g = 0.0;
            if (!causal) Ek += (T1[k] - P1[k]) - di * (T0[k] - P0[k]);
            for (l = 0; l < K; l++) g += Gs[(size_t)k * K + l] * Mi[l];
            ms += (double)Mi[k] * Sk;
            me += (double)Mi[k] * Ek;
            mgm += (double)Mi[k] * g;
        }
        S += keep * ms + cpos * D;
        S2 += keep * keep * mgm + 2.0 * keep * cpos * me + cpos * cpos * D2;
    }
    *sum_out = S;
    *sumsq_out = S2;
}

/* doubles of the partial-sum area: 6 per row, at least the closed-form statistics'
   scratch (4 K + 2 K^2) */
static size_t era__rpa_part_doubles(int T, int K)
{
    size_t a = 6 * (size_t)T, b = 4 * (size_t)K + 2 * (size_t)K * (size_t)K;
    return a > b ? a : b;
}

ERADEF size_t era_rpa_workspace_size(const era_rpa_config *cfg, int B, int T)
{
    size_t nt = (size_t)era__nthreads();
    (void)B;
    if (!cfg || T <= 0) return 0;
    /* per-thread row buffers (3 rows) + per-row partial sums (6 doubles, or the
       closed-form statistics' scratch) + dM (T,K) + legacy dF (T,T) */
    return era__align(sizeof(float) * 3 * (size_t)T * nt) +
           era__align(sizeof(double) * era__rpa_part_doubles(T, era__rpa_K(cfg))) +
           era__align(sizeof(float) * (size_t)T * (size_t)(era__rpa_K(cfg))) +
           (cfg->legacy ? era__align(sizeof(float) * (size_t)T * (size_t)T) : 0);
}

ERADEF int era_rpa_forward(const era_rpa_config *cfg, const era_rpa_params *p,
                           const float *mu, int B, int T, float *bias, era_rpa_state *st,
                           void *workspace)
{
    int rc, R, K, L, t, r, k, it, nt, ch, nclamp = 0;
    size_t need;
    void *own = NULL;
    float *rowbuf;
    double *part;
    double tau_a;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (st && era__is_dev(mu)) {
        era_rpa_cuda_state *cs = era__rpa_twin(st);
        if (!cs) return ERA_ENOMEM;
        st->valid = 0; /* the host state no longer holds the last forward */
        return era_rpa_forward_cuda(cfg, p, mu, B, T, bias, cs, workspace, NULL);
    }
    if (st && st->cuda) ((era_rpa_cuda_state *)st->cuda)->valid = 0;
#endif
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!p || !mu || !st) return ERA_EINVAL;
    if (B <= 0) return ERA_EINVAL;
    rc = era__check_T(T, cfg->max_T);
    if (rc) return rc;
    if (!era__finite(p->tau_att) || !era__finite(p->pos_beta) || !era__finite(p->kappa))
        return ERA_EINVAL;
    R = cfg->R;
    K = era__rpa_K(cfg);
    L = cfg->sinkhorn_iters;
    { /* mu (B,T,R), the (T,R) / (T,K) state and the (2L+1,R,K) Sinkhorn history must be
         addressable: exact size_t products (R, K <= 4096, L <= 10000 by the config) */
        const size_t lim = ((size_t)-1 >> 1) / sizeof(float);
        const size_t rk = (size_t)R * (size_t)K, rmax = (size_t)(R > K ? R : K);
        if (rmax > lim / (size_t)T || (size_t)B > lim / ((size_t)T * (size_t)R) ||
            (size_t)(2 * L + 1) > lim / rk)
            return ERA_ERANGE;
    }
    st->valid = 0;
    need = era__rpa_state_bytes(T, R, K, L);
    rc = era__reserve(&st->mem, &st->cap, need);
    if (rc) return rc;
    st->B = B; st->T = T; st->R = R; st->K = K; st->iters = L;
    st->legacy = cfg->legacy ? 1 : 0;
    st->zscore_causal = cfg->zscore_causal ? 1 : 0;
    st->mu = mu;
    era__rpa_state_carve((char *)st->mem, T, R, K, L, &st->mbar, &st->phi, &st->M, &st->phiT,
                         &st->X);
    st->posmix = cfg->posmix;
    st->pos_beta = p->pos_beta;
    st->clip = cfg->bias_clip;
    st->zeps = cfg->zscore_eps;
    st->sig_kappa = (float)(1.0 / (1.0 + exp(-(double)p->kappa)));
    st->tau = p->tau_att;
    st->tau_free = 1;
    if (!(st->tau >= cfg->tau_min)) { st->tau = cfg->tau_min; st->tau_free = 0; }
    if (st->tau > cfg->tau_max) { st->tau = cfg->tau_max; st->tau_free = 0; }
    st->scale = cfg->scale < 0.0f ? 0.0f : (cfg->scale > 1.0f ? 1.0f : cfg->scale);

    need = era_rpa_workspace_size(cfg, B, T);
    if (!workspace) {
        own = ERA_MALLOC(need);
        if (!own) return ERA_ENOMEM;
        workspace = own;
    }
    nt = era__nthreads();
    rowbuf = (float *)workspace;
    part = (double *)((char *)workspace + era__align(sizeof(float) * 3 * (size_t)T * nt));

    /* batch mean of mu: B(T) is linear in mu; a non-finite entry counts as 1/R (the
       membership's own NaN guard) */
    ERA__OMP(omp parallel for schedule(static) if((long long)T * R * B > 65536))
    for (t = 0; t < T; t++) {
        int rr, b;
        for (rr = 0; rr < R; rr++) {
            double s = 0.0;
            for (b = 0; b < B; b++) {
                double v = mu[((size_t)b * T + t) * R + rr];
                s += era__finite(v) ? v : 1.0 / R;
            }
            st->mbar[(size_t)t * R + rr] = (float)(s / (double)B);
        }
    }
    era_rpa_basis(st->phi, T, K);
    for (t = 0; t < T; t++)
        for (k = 0; k < K; k++) st->phiT[(size_t)k * T + t] = st->phi[(size_t)t * K + k];
    /* S = mbar^T Phi, X0 = clamp(exp(S / tau_align)) */
    tau_a = cfg->tau_align > 1e-6f ? (double)cfg->tau_align : 1e-6;
    for (r = 0; r < R; r++)
        for (k = 0; k < K; k++) {
            double s = 0.0, e;
            for (t = 0; t < T; t++) s += (double)st->mbar[(size_t)t * R + r] * st->phi[(size_t)t * K + k];
            e = exp(s / tau_a);
            if (e < 1e-9 || e > 1e9 || era__isnan(e)) nclamp++;
            if (e < 1e-9) e = 1e-9;
            if (e > 1e9) e = 1e9;
            st->X[(size_t)r * K + k] = (float)e;
        }
    for (it = 0; it < L; it++) {
        const float *X0 = st->X + (size_t)(2 * it) * R * K;
        float *X1 = st->X + (size_t)(2 * it + 1) * R * K;
        float *X2 = st->X + (size_t)(2 * it + 2) * R * K;
        for (r = 0; r < R; r++) {
            double s = 0.0;
            for (k = 0; k < K; k++) s += X0[(size_t)r * K + k];
            for (k = 0; k < K; k++) X1[(size_t)r * K + k] = (float)(X0[(size_t)r * K + k] / (s + 1e-9));
        }
        for (k = 0; k < K; k++) {
            double s = 0.0;
            for (r = 0; r < R; r++) s += X1[(size_t)r * K + k];
            for (r = 0; r < R; r++) X2[(size_t)r * K + k] = (float)(X1[(size_t)r * K + k] / (s + 1e-9));
        }
    }
    {
        const float *Pm = st->X + (size_t)(2 * L) * R * K;
        double err = 0.0;
        for (r = 0; r < R; r++) {
            double s = 0.0;
            for (k = 0; k < K; k++) s += Pm[(size_t)r * K + k];
            s = fabs(s - (double)K / (double)R);
            if (s > err || era__isnan(s)) err = s;
        }
        for (k = 0; k < K; k++) {
            double s = 0.0;
            for (r = 0; r < R; r++) s += Pm[(size_t)r * K + k];
            s = fabs(s - 1.0);
            if (s > err || era__isnan(s)) err = s;
        }
        st->marginal_err = (float)err;
        st->clamp_frac = (float)nclamp / (float)(R * K);
        /* M = mbar P */
        for (t = 0; t < T; t++)
            for (k = 0; k < K; k++) {
                float acc = 0.0f;
                for (r = 0; r < R; r++) acc += st->mbar[(size_t)t * R + r] * Pm[(size_t)r * K + k];
                st->M[(size_t)t * K + k] = acc;
            }
    }
    /* statistics of x: closed form (O(T K^2)) for the prior, a pass over the rows (x in
       a per-thread row buffer) for the legacy bias */
    {
        double s = 0.0, s2 = 0.0, n, var;
        if (!st->legacy) {
            era__rpa_stats_closed(st, part, &s, &s2);
        } else {
            ERA__OMP(omp parallel for schedule(static) if((long long)T * T > 4096))
            for (ch = 0; ch < nt; ch++) { /* chunk ch: a contiguous range, its own scratch */
                int t, t_lo = (int)((long long)T * ch / nt);
                int t_hi = (int)((long long)T * (ch + 1) / nt);
                for (t = t_lo; t < t_hi; t++) {
                    float *row = rowbuf + (size_t)ch * T;
                    int jn = st->zscore_causal ? t + 1 : T;
                    double rs = 0.0, rs2 = 0.0;
                    era__rpa_xrow(st, t, row);
                    era__sum_sq(row, jn, &rs, &rs2);
                    part[2 * (size_t)t] = rs;
                    part[2 * (size_t)t + 1] = rs2;
                }
            }
            for (t = 0; t < T; t++) { s += part[2 * (size_t)t]; s2 += part[2 * (size_t)t + 1]; }
        }
        n = st->zscore_causal ? 0.5 * (double)T * (double)(T + 1) : (double)T * (double)T;
        st->count = (long long)n;
        st->mean = s / n;
        var = n > 1.0 ? (s2 - s * s / n) / (n - 1.0) : 0.0;
        if (var < 0.0) var = 0.0;
        st->std = sqrt(var);
        st->std_pre = (float)st->std;
    }
    /* output pass, and the std of the final bias over the statistics set */
    {
        ERA__OMP(omp parallel for schedule(static) if((long long)T * T > 4096))
        for (ch = 0; ch < nt; ch++) { /* chunk ch: a contiguous range, its own scratch */
            int t, t_lo = (int)((long long)T * ch / nt);
            int t_hi = (int)((long long)T * (ch + 1) / nt);
            for (t = t_lo; t < t_hi; t++) {
                float *row = bias ? bias + (size_t)t * T : rowbuf + (size_t)ch * T;
                int jn = st->zscore_causal ? t + 1 : T;
                double s = 0.0, s2 = 0.0;
                era__rpa_final_row(st, t, row);
                era__sum_sq(row, jn, &s, &s2);
                part[2 * (size_t)t] = s;
                part[2 * (size_t)t + 1] = s2;
            }
        }
        {
            double s = 0.0, s2 = 0.0, n = (double)st->count, var;
            for (t = 0; t < T; t++) { s += part[2 * (size_t)t]; s2 += part[2 * (size_t)t + 1]; }
            var = n > 1.0 ? (s2 - s * s / n) / (n - 1.0) : 0.0;
            st->std_post = (float)sqrt(var > 0.0 ? var : 0.0);
        }
    }
    st->valid = 1;
    if (own) ERA_FREE(own);
    return ERA_OK;
}

ERADEF int era_rpa_rows(const era_rpa_state *st, int row0, int nrows, float *out)
{
    int t;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__rpa_on_dev(st)) return era_rpa_rows_cuda(era__rpa_on_dev(st), row0, nrows, out, NULL);
    if (era__is_dev(out)) return ERA_EINVAL; /* device rows of a host forward */
#endif
    if (!st || !out || !st->valid) return ERA_EINVAL;
    if (row0 < 0 || nrows < 0 || row0 > st->T || nrows > st->T - row0) return ERA_EINVAL;
    ERA__OMP(omp parallel for schedule(static) if((long long)nrows * st->T > 4096))
    for (t = row0; t < row0 + nrows; t++) era__rpa_final_row(st, t, out + (size_t)(t - row0) * st->T);
    return ERA_OK;
}

/* gradient of out w.r.t. y (dydo) and the tau contribution, one element */
static double era__rpa_dfinish(const era_rpa_state *st, double y, double dout, double *dtau, double *dtau_abs)
{
    double c = st->clip, v;
    if (!era__finite(y)) return 0.0;
    v = y / (double)st->tau;
    if (v > c || v < -c) return 0.0;
    dout *= (double)st->scale;
    if (st->tau_free) {
        double term = dout * (-y / ((double)st->tau * (double)st->tau));
        *dtau += term;
        *dtau_abs += fabs(term);
    }
    return dout / (double)st->tau;
}

ERADEF int era_rpa_backward(const era_rpa_config *cfg, const era_rpa_params *p,
                            const era_rpa_state *st, const float *dbias, float *dmu,
                            era_rpa_grads *g, void *workspace)
{
    int rc, T, R, K, L, B, t, r, k, nt, ch;
    size_t need;
    void *own = NULL;
    float *rowbuf, *dM, *dF = NULL;
    double *part;
    double inv_d, A = 0.0, Bs = 0.0, dtau = 0.0, dtau_abs = 0.0, dbeta = 0.0, dkap = 0.0, n, den;
    double *dmbar, *dP, *dX;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__rpa_on_dev(st)) return era_rpa_backward_cuda(cfg, p, era__rpa_on_dev(st), dbias, dmu, g, workspace, NULL);
    if (era__is_dev(dbias) || era__is_dev(dmu)) return ERA_EINVAL; /* device buffers, host forward */
#endif
    era_rpa_grads gnone;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!g) { /* NULL grads: only dmu is accumulated */
        memset(&gnone, 0, sizeof gnone);
        g = &gnone;
    }
    if (!p || !st || !dbias) return ERA_EINVAL;
    if (g->dtau_att_to && !g->dpos_beta_to) return ERA_EINVAL;
    if (!st->valid || st->R != cfg->R || st->K != era__rpa_K(cfg) ||
        st->iters != cfg->sinkhorn_iters || st->legacy != (cfg->legacy ? 1 : 0))
        return ERA_ESTATE;
    if (st->legacy && dmu && st->R > 64) return ERA_EINVAL; /* legacy dmu: R <= 64 */
    T = st->T; R = st->R; K = st->K; L = st->iters; B = st->B;
    need = era_rpa_workspace_size(cfg, B, T);
    if (!workspace) {
        own = ERA_MALLOC(need);
        if (!own) return ERA_ENOMEM;
        workspace = own;
    }
    nt = era__nthreads();
    rowbuf = (float *)workspace;
    part = (double *)((char *)workspace + era__align(sizeof(float) * 3 * (size_t)T * nt));
    dM = (float *)((char *)part + era__align(sizeof(double) * era__rpa_part_doubles(T, K)));
    if (st->legacy) dF = (float *)((char *)dM + era__align(sizeof(float) * (size_t)T * K));
    inv_d = era__rpa_inv_d(st);
    n = (double)st->count;
    den = T - 1 > 1 ? (double)(T - 1) : 1.0;
    /* pass 1: g = dL/d(standardised value), sums A = sum g, Bs = sum g (x - m) */
    ERA__OMP(omp parallel for schedule(static) if((long long)T * T > 4096))
    for (ch = 0; ch < nt; ch++) { /* chunk ch: a contiguous range, its own scratch */
        int t, t_lo = (int)((long long)T * ch / nt);
        int t_hi = (int)((long long)T * (ch + 1) / nt);
        for (t = t_lo; t < t_hi; t++) {
            float *xr = rowbuf + (size_t)ch * 3 * T;
            const float *db = dbias + (size_t)t * T;
            double a = 0.0, bs = 0.0, dt = 0.0, dta = 0.0, dk = 0.0, dbt = 0.0;
            int j;
            era__rpa_xrow(st, t, xr);
            for (j = 0; j < T; j++) {
                double pos, y = era__rpa_y(st, t, j, xr[j], inv_d, &pos);
                double gy = era__rpa_dfinish(st, y, db[j], &dt, &dta);
                if (st->count < 2) gy = 0.0;
                if (st->legacy) {
                    double yF = ((double)xr[j] - st->mean) * inv_d;
                    dk += gy * (yF - pos);
                    if (st->pos_beta > 0.0f) dbt += gy * (1.0 - st->sig_kappa) * (-(double)abs(t - j) / den);
                    gy *= st->sig_kappa;
                }
                a += gy;
                bs += gy * ((double)xr[j] - st->mean);
            }
            part[6 * (size_t)t] = a;
            part[6 * (size_t)t + 1] = bs;
            part[6 * (size_t)t + 2] = dt;
            part[6 * (size_t)t + 3] = dk;
            part[6 * (size_t)t + 4] = dbt;
            /* dtau's magnitudes: column 5 is free until pass 2 (which writes it only
               without legacy), column 3 holds dk only with legacy */
            part[6 * (size_t)t + (st->legacy ? 5 : 3)] = dta;
        }
    }
    for (t = 0; t < T; t++) {
        A += part[6 * (size_t)t];
        Bs += part[6 * (size_t)t + 1];
        dtau += part[6 * (size_t)t + 2];
        dtau_abs += part[6 * (size_t)t + (st->legacy ? 5 : 3)];
        if (st->legacy) dkap += part[6 * (size_t)t + 3];
        dbeta += part[6 * (size_t)t + 4];
    }
    /* pass 2: dx, then dM rows (non-legacy) or dF rows (legacy) */
    ERA__OMP(omp parallel for schedule(static) if((long long)T * T > 4096))
    for (ch = 0; ch < nt; ch++) { /* chunk ch: a contiguous range, its own scratch */
        int t, t_lo = (int)((long long)T * ch / nt);
        int t_hi = (int)((long long)T * (ch + 1) / nt);
        for (t = t_lo; t < t_hi; t++) {
            float *xr = rowbuf + (size_t)ch * 3 * T;
            float *dx = xr + T;
            const float *db = dbias + (size_t)t * T;
            int j, kk, jn = st->zscore_causal ? t + 1 : T;
            double dbt = 0.0, dummy = 0.0;
            double cA = n > 0.0 ? A * inv_d / n : 0.0;
            double cB = (n > 1.0 && st->std > 0.0) ? Bs * inv_d * inv_d / ((n - 1.0) * st->std) : 0.0;
            era__rpa_xrow(st, t, xr);
            for (j = 0; j < T; j++) {
                double pos, y = era__rpa_y(st, t, j, xr[j], inv_d, &pos);
                double gy = era__rpa_dfinish(st, y, db[j], &dummy, &dummy);
                double d;
                if (st->count < 2) gy = 0.0;
                if (st->legacy) gy *= st->sig_kappa;
                d = gy * inv_d;
                if (j < jn && st->count >= 2) d -= cA + cB * ((double)xr[j] - st->mean);
                dx[j] = (float)d;
            }
            if (st->legacy) {
                memcpy(dF + (size_t)t * T, dx, sizeof(float) * T);
            } else {
                float *dm = dM + (size_t)t * K;
                double pm = st->posmix;
                for (kk = 0; kk < K; kk++) dm[kk] = 0.0f;
                for (j = 0; j < T; j++) {
                    const float *Pj = st->phi + (size_t)j * K;
                    double v = dx[j];
                    if (pm > 0.0) {
                        if (st->pos_beta > 0.0f) dbt += v * pm * (-(double)abs(t - j) / den);
                        v *= 1.0 - pm;
                    }
                    for (kk = 0; kk < K; kk++) dm[kk] += (float)(v * Pj[kk]);
                }
                part[6 * (size_t)t + 5] = dbt;
            }
        }
    }
    if (!st->legacy)
        for (t = 0; t < T; t++) dbeta += part[6 * (size_t)t + 5];
    if (g->dtau_att_to) {
        *g->dtau_att_to += (float)dtau;
        *g->dpos_beta_to += (float)dbeta;
        if (g->dtau_att_abs_to) *g->dtau_att_abs_to += (float)dtau_abs;
    } else {
        g->dtau_att += (float)dtau;
        g->dtau_att_abs += (float)dtau_abs;
        g->dpos_beta += (float)dbeta;
    }
    if (st->legacy) g->dkappa += (float)(dkap * st->sig_kappa * (1.0 - st->sig_kappa));

    if (!dmu) {
        if (own) ERA_FREE(own);
        return ERA_OK;
    }
    if (st->legacy) {
        /* F = (1/B) sum_b mu_b mu_b^T: dmu_b[i,r] += (1/B) sum_j (dF_ij + dF_ji) mu_b[j,r] */
        int b;
        double invB = 1.0 / (double)B;
        ERA__OMP(omp parallel for schedule(static) if((long long)T * T * B > 4096))
        for (t = 0; t < T; t++) {
            int j, bb, rr;
            for (bb = 0; bb < B; bb++) {
                double acc[64];
                float *o = dmu + ((size_t)bb * T + t) * R;
                for (rr = 0; rr < R; rr++) acc[rr] = 0.0;
                for (j = 0; j < T; j++) {
                    double w = (double)dF[(size_t)t * T + j] + (double)dF[(size_t)j * T + t];
                    const float *mj = st->mu + ((size_t)bb * T + j) * R;
                    if (w == 0.0) continue;
                    for (rr = 0; rr < R; rr++) acc[rr] += w * mj[rr];
                }
                for (rr = 0; rr < R; rr++) o[rr] += (float)(acc[rr] * invB);
            }
        }
        (void)b;
        if (own) ERA_FREE(own);
        return ERA_OK;
    }
    /* Bm = mbar P Phi^T: dmbar = dM P^T, dP = mbar^T dM */
    {
        const float *Pm = st->X + (size_t)(2 * L) * R * K;
        double *tmp = (double *)ERA_MALLOC(sizeof(double) * ((size_t)T * R + 2 * (size_t)R * K));
        if (!tmp) {
            if (own) ERA_FREE(own);
            return ERA_ENOMEM;
        }
        dmbar = tmp;
        dP = tmp + (size_t)T * R;
        dX = dP + (size_t)R * K;
        for (t = 0; t < T; t++)
            for (r = 0; r < R; r++) {
                double acc = 0.0;
                for (k = 0; k < K; k++) acc += (double)dM[(size_t)t * K + k] * Pm[(size_t)r * K + k];
                dmbar[(size_t)t * R + r] = acc;
            }
        if (!cfg->detach) {
            int it;
            for (r = 0; r < R; r++)
                for (k = 0; k < K; k++) {
                    double acc = 0.0;
                    for (t = 0; t < T; t++) acc += (double)st->mbar[(size_t)t * R + r] * dM[(size_t)t * K + k];
                    dP[(size_t)r * K + k] = acc;
                }
            /* Sinkhorn backward: dP is the gradient on X_{2L} */
            for (it = L - 1; it >= 0; it--) {
                const float *X0 = st->X + (size_t)(2 * it) * R * K;
                const float *X1 = st->X + (size_t)(2 * it + 1) * R * K;
                /* X2 = X1 / (colsum(X1) + 1e-9) */
                for (k = 0; k < K; k++) {
                    double s = 0.0, q = 0.0;
                    for (r = 0; r < R; r++) {
                        s += X1[(size_t)r * K + k];
                        q += dP[(size_t)r * K + k] * (double)X1[(size_t)r * K + k];
                    }
                    s += 1e-9;
                    for (r = 0; r < R; r++)
                        dX[(size_t)r * K + k] = dP[(size_t)r * K + k] / s - q / (s * s);
                }
                /* X1 = X0 / (rowsum(X0) + 1e-9) */
                for (r = 0; r < R; r++) {
                    double s = 0.0, q = 0.0;
                    for (k = 0; k < K; k++) {
                        s += X0[(size_t)r * K + k];
                        q += dX[(size_t)r * K + k] * (double)X0[(size_t)r * K + k];
                    }
                    s += 1e-9;
                    for (k = 0; k < K; k++)
                        dP[(size_t)r * K + k] = dX[(size_t)r * K + k] / s - q / (s * s);
                }
            }
            /* X0 = clamp(exp(S / tau)): dS = dX0 X0 / tau where unclamped */
            {
                double tau_a = cfg->tau_align > 1e-6f ? (double)cfg->tau_align : 1e-6;
                const float *X0 = st->X;
                for (r = 0; r < R; r++)
                    for (k = 0; k < K; k++) {
                        double x0 = X0[(size_t)r * K + k];
                        double v = (x0 > 1e-9 * 1.0000001 && x0 < 1e9 * 0.9999999)
                                       ? dP[(size_t)r * K + k] * x0 / tau_a : 0.0;
                        dP[(size_t)r * K + k] = v; /* now dS */
                    }
            }
            for (t = 0; t < T; t++)
                for (r = 0; r < R; r++) {
                    double acc = 0.0;
                    for (k = 0; k < K; k++) acc += (double)st->phi[(size_t)t * K + k] * dP[(size_t)r * K + k];
                    dmbar[(size_t)t * R + r] += acc;
                }
        }
        {
            int b;
            double invB = 1.0 / (double)B;
            for (b = 0; b < B; b++)
                for (t = 0; t < T; t++)
                    for (r = 0; r < R; r++) {
                        double v = st->mu[((size_t)b * T + t) * R + r];
                        if (era__finite(v))
                            dmu[((size_t)b * T + t) * R + r] += (float)(dmbar[(size_t)t * R + r] * invB);
                    }
        }
        ERA_FREE(tmp);
    }
    if (own) ERA_FREE(own);
    return ERA_OK;
}

/* ------------------------------------------------------------------ ERA ------ */

ERADEF era_era_config era_era_config_default(void)
{
    era_era_config c;
    memset(&c, 0, sizeof c);
    c.R = 32;
    c.nb = 32;
    c.eps = 0.05f;
    c.iters = 5;
    c.delta = 1e-5f;
    c.zscore_eps = 1e-6f;
    c.zscore_causal = 0;
    c.max_T = 65536;
    return c;
}

ERADEF era_era_params era_era_params_default(const float *centers)
{
    era_era_params p;
    p.centers = centers;
    p.sigma = 0.1f;
    p.alpha = 1.0f;
    return p;
}

ERADEF void era_era_init_centers(int R, float *centers)
{
    int r;
    if (!centers || R <= 0) return;
    for (r = 0; r < R; r++) centers[r] = (float)(((double)r + 0.5) / (double)R);
}

ERADEF era_era_state era_era_state_init(void)
{
    era_era_state s;
    memset(&s, 0, sizeof s);
    return s;
}

ERADEF void era_era_state_free(era_era_state *st)
{
    if (!st) return;
    if (st->mem) ERA_FREE(st->mem);
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (st->cuda) {
        era_era_cuda_state_free((era_era_cuda_state *)st->cuda);
        ERA_FREE(st->cuda);
    }
#endif
    memset(st, 0, sizeof *st);
}

/* the config's and the params' scalars (not the centres: era__era_check) */
static int era__era_check_scalars(const era_era_config *c, const era_era_params *p)
{
    if (!c || !p || !p->centers) return ERA_EINVAL;
    if (c->R <= 0 || c->R > 4096 || c->nb <= 0 || c->nb > 1000000) return ERA_EINVAL;
    if (!era__finite(c->eps) || c->eps <= 0.0f) return ERA_EINVAL;
    if (c->iters < 1 || c->iters > 100000) return ERA_EINVAL;
    if (!era__finite(c->delta) || c->delta <= 0.0f) return ERA_EINVAL;
    if (!era__finite(c->zscore_eps) || c->zscore_eps < 0.0f) return ERA_EINVAL;
    if (c->max_T <= 0) return ERA_EINVAL;
    if (c->zscore_causal != 0 && c->zscore_causal != 1) return ERA_EINVAL; /* a boolean */
    if (!era__finite(p->sigma) || p->sigma <= 0.0f || !era__finite(p->alpha)) return ERA_EINVAL;
    return ERA_OK;
}

static int era__era_check(const era_era_config *c, const era_era_params *p)
{
    int r, rc = era__era_check_scalars(c, p);
    if (rc) return rc;
    for (r = 0; r < c->R; r++)
        if (!era__finite(p->centers[r])) return ERA_EINVAL;
    return ERA_OK;
}

/* The ERA state's arrays, one block for the host state and for its device twin (which
   appends its own after bstart): mu (T,R), f (L,R), g (L+1,nb), cost, plan (R,nb), Q (T,nb),
   rmean, rstd (T) doubles, bstart (nb+1) ints. Returns the bytes up to the end of bstart;
   base NULL: only those. */
static size_t era__era_state_carve(char *base, int T, int R, int nb, int L, float **mu,
                                   float **f, float **g, float **cost, float **plan, float **Q,
                                   double **rmean, double **rstd, int **bstart)
{
    size_t off = 0;
    *mu = (float *)era__take(base, &off, sizeof(float) * (size_t)T * R);
    *f = (float *)era__take(base, &off, sizeof(float) * (size_t)L * R);
    *g = (float *)era__take(base, &off, sizeof(float) * (size_t)(L + 1) * nb);
    *cost = (float *)era__take(base, &off, sizeof(float) * (size_t)R * nb);
    *plan = (float *)era__take(base, &off, sizeof(float) * (size_t)R * nb);
    *Q = (float *)era__take(base, &off, sizeof(float) * (size_t)T * nb);
    *rmean = (double *)era__take(base, &off, sizeof(double) * (size_t)T);
    *rstd = (double *)era__take(base, &off, sizeof(double) * (size_t)T);
    *bstart = (int *)era__take(base, &off, sizeof(int) * (size_t)(nb + 1));
    return off;
}
static size_t era__era_state_bytes(int T, int R, int nb, int L)
{
    float *a;
    double *d;
    int *i;
    return era__era_state_carve(NULL, T, R, nb, L, &a, &a, &a, &a, &a, &a, &d, &d, &i);
}

static double era__lse(const double *v, int n)
{
    double m = -HUGE_VAL, s = 0.0;
    int i;
    for (i = 0; i < n; i++) if (v[i] > m) m = v[i];
    if (era__isnan(m) || era__infsign(m) < 0) return m;
    for (i = 0; i < n; i++) s += exp(v[i] - m);
    return m + log(s);
}

/* statistics-set count of block b for row t */
static long long era__era_count(const era_era_state *st, int t, int b)
{
    int s0 = st->bstart[b], s1 = st->bstart[b + 1];
    if (st->zscore_causal) {
        if (t < s0) return 0;
        if (t < s1) return (long long)(t - s0 + 1);
    }
    return (long long)(s1 - s0);
}

ERADEF size_t era_era_workspace_size(const era_era_config *cfg, int T)
{
    int m;
    if (!cfg || T <= 0) return 0;
    m = cfg->R > cfg->nb ? cfg->R : cfg->nb;
    return era__align(sizeof(double) * (size_t)T * (size_t)(2 * cfg->nb)) +
           era__align(sizeof(double) * (size_t)(4 * (size_t)cfg->R * cfg->nb + 4 * (size_t)m + 2 * (size_t)T));
}

ERADEF int era_era_forward(const era_era_config *cfg, const era_era_params *p, int T,
                           float *bias, era_era_state *st, void *workspace)
{
    int rc, R, nb, L, t, r, b, it;
    double *buf;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (st && ((bias && era__is_dev(bias)) || (p && era__is_dev(p->centers)))) {
        era_era_cuda_state *cs = era__era_twin(st);
        if (!cs) return ERA_ENOMEM;
        st->valid = 0; /* the host state no longer holds the last forward */
        return era_era_forward_cuda(cfg, p, T, bias, cs, workspace, NULL);
    }
    if (st && st->cuda) ((era_era_cuda_state *)st->cuda)->valid = 0;
#endif
    rc = era__era_check(cfg, p);
    if (rc) return rc;
    if (!st) return ERA_EINVAL;
    rc = era__check_T(T, cfg->max_T);
    if (rc) return rc;
    R = cfg->R; nb = cfg->nb; L = cfg->iters;
    st->valid = 0;
    rc = era__reserve(&st->mem, &st->cap, era__era_state_bytes(T, R, nb, L));
    if (rc) return rc;
    (void)workspace; /* ERA's forward needs no scratch beyond a few O(R + nb) vectors */
    st->T = T; st->R = R; st->nb = nb; st->iters = L;
    st->zscore_causal = cfg->zscore_causal ? 1 : 0;
    st->alpha = p->alpha; st->sigma = p->sigma; st->eps = cfg->eps; st->delta = cfg->delta;
    st->zeps = cfg->zscore_eps;
    era__era_state_carve((char *)st->mem, T, R, nb, L, &st->mu, &st->f, &st->g, &st->cost,
                         &st->plan, &st->Q, &st->rmean, &st->rstd, &st->bstart);
    buf = (double *)ERA_MALLOC(sizeof(double) * (size_t)(R > nb ? R : nb));
    if (!buf) return ERA_ENOMEM;
    for (b = 0; b <= nb; b++) st->bstart[b] = (int)(((long long)b * T + nb - 1) / nb);

    /* memberships mu[t,r] = softmax_r(-(t/T - c_r)^2 / (2 sigma^2)) */
    {
        double is2 = 1.0 / (2.0 * (double)p->sigma * (double)p->sigma);
        ERA__OMP(omp parallel for schedule(static) if((long long)T * R > 65536))
        for (t = 0; t < T; t++) {
            double ph = (double)t / (double)T, mx = -HUGE_VAL, s = 0.0;
            float *m = st->mu + (size_t)t * R;
            int rr;
            for (rr = 0; rr < R; rr++) {
                double d = ph - (double)p->centers[rr], l = -d * d * is2;
                if (l > mx) mx = l;
            }
            for (rr = 0; rr < R; rr++) {
                double d = ph - (double)p->centers[rr], e = exp(-d * d * is2 - mx);
                m[rr] = (float)e;
                s += e;
            }
            for (rr = 0; rr < R; rr++) m[rr] = (float)((double)m[rr] / s);
        }
    }
    /* cost and log-domain Sinkhorn with uniform marginals */
    {
        double eps = cfg->eps, la = log(1.0 / R), lb = log(1.0 / nb), err = 0.0;
        for (r = 0; r < R; r++)
            for (b = 0; b < nb; b++) {
                double d = (double)p->centers[r] - ((double)b + 0.5) / (double)nb;
                st->cost[(size_t)r * nb + b] = (float)(d * d);
            }
        for (b = 0; b < nb; b++) st->g[b] = 0.0f;
        for (it = 0; it < L; it++) {
            const float *g0 = st->g + (size_t)it * nb;
            float *f = st->f + (size_t)it * R;
            float *g1 = st->g + (size_t)(it + 1) * nb;
            for (r = 0; r < R; r++) {
                for (b = 0; b < nb; b++) buf[b] = ((double)g0[b] - st->cost[(size_t)r * nb + b]) / eps;
                f[r] = (float)(eps * la - eps * era__lse(buf, nb));
            }
            for (b = 0; b < nb; b++) {
                for (r = 0; r < R; r++) buf[r] = ((double)f[r] - st->cost[(size_t)r * nb + b]) / eps;
                g1[b] = (float)(eps * lb - eps * era__lse(buf, R));
            }
        }
        {
            /* the plan from the last f and the last g recomputed from it in double (the
               stored g is that value rounded to fp32): its columns then hold exactly 1/nb
               before the final rounding, and a plan that is uniform in exact arithmetic
               (R = 1) comes out exactly uniform instead of with the potentials' rounding,
               which the row z-score would amplify by 1/zscore_eps (issue 38) */
            const float *f = st->f + (size_t)(L - 1) * R;
            for (b = 0; b < nb; b++) {
                double gb;
                for (r = 0; r < R; r++) buf[r] = ((double)f[r] - st->cost[(size_t)r * nb + b]) / eps;
                gb = eps * lb - eps * era__lse(buf, R);
                for (r = 0; r < R; r++)
                    st->plan[(size_t)r * nb + b] =
                        (float)exp(((double)f[r] + gb - st->cost[(size_t)r * nb + b]) / eps);
            }
            for (r = 0; r < R; r++) {
                double s = 0.0;
                for (b = 0; b < nb; b++) s += st->plan[(size_t)r * nb + b];
                s = fabs(s - 1.0 / R);
                if (s > err) err = s;
            }
            for (b = 0; b < nb; b++) {
                double s = 0.0;
                for (r = 0; r < R; r++) s += st->plan[(size_t)r * nb + b];
                s = fabs(s - 1.0 / nb);
                if (s > err) err = s;
            }
            st->marginal_err = (float)err;
        }
    }
    ERA_FREE(buf);
    /* Q = mu plan and the row statistics of log(Q + delta) over the statistics set */
    {
        double pre = 0.0, post = 0.0;
        ERA__OMP(omp parallel for schedule(static) if((long long)T * R * nb > 65536))
        for (t = 0; t < T; t++) {
            float *Qt = st->Q + (size_t)t * nb;
            const float *m = st->mu + (size_t)t * R;
            double s = 0.0, s2 = 0.0, n = 0.0, mean, var;
            int bb, rr;
            for (bb = 0; bb < nb; bb++) {
                double acc = 0.0;
                for (rr = 0; rr < R; rr++) acc += (double)m[rr] * st->plan[(size_t)rr * nb + bb];
                Qt[bb] = (float)acc;
            }
            for (bb = 0; bb < nb; bb++) {
                double c = (double)era__era_count(st, t, bb), y;
                if (c == 0.0) continue;
                y = log((double)Qt[bb] + st->delta);
                s += c * y;
                n += c;
            }
            mean = s / n;
            for (bb = 0; bb < nb; bb++) {
                double c = (double)era__era_count(st, t, bb), y;
                if (c == 0.0) continue;
                y = log((double)Qt[bb] + st->delta) - mean;
                s2 += c * y * y;
            }
            var = s2 / n;
            st->rmean[t] = mean;
            st->rstd[t] = sqrt(var);
        }
        for (t = 0; t < T; t++) {
            double sd = st->rstd[t], o = fabs((double)st->alpha) * sd / (sd + st->zeps);
            pre += sd * sd;
            post += o * o;
        }
        st->std_pre = (float)sqrt(pre / T);
        st->std_post = (float)sqrt(post / T);
    }
    st->valid = 1;
    if (bias) return era_era_rows(st, 0, T, bias);
    return ERA_OK;
}

ERADEF int era_era_rows(const era_era_state *st, int row0, int nrows, float *out)
{
    int t;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__era_on_dev(st)) return era_era_rows_cuda(era__era_on_dev(st), row0, nrows, out, NULL);
    if (era__is_dev(out)) return ERA_EINVAL; /* device rows of a host forward */
#endif
    if (!st || !out || !st->valid) return ERA_EINVAL;
    if (row0 < 0 || nrows < 0 || row0 > st->T || nrows > st->T - row0) return ERA_EINVAL;
    ERA__OMP(omp parallel for schedule(static) if((long long)nrows * st->T > 16384))
    for (t = row0; t < row0 + nrows; t++) {
        float *row = out + (size_t)(t - row0) * st->T;
        const float *Qt = st->Q + (size_t)t * st->nb;
        double m = st->rmean[t], inv = (double)st->alpha / ((double)st->rstd[t] + st->zeps);
        int bb, s;
        for (bb = 0; bb < st->nb; bb++) {
            float v = (float)((log((double)Qt[bb] + st->delta) - m) * inv);
            for (s = st->bstart[bb]; s < st->bstart[bb + 1]; s++) row[s] = v;
        }
        /* causal z-score: the future (s > t) is outside the statistics and masked
           later; it is written as 0 (standardised with a row std that can be ~0, it
           would otherwise be arbitrarily large) */
        if (st->zscore_causal)
            for (s = t + 1; s < st->T; s++) row[s] = 0.0f;
    }
    return ERA_OK;
}

ERADEF int era_era_backward(const era_era_config *cfg, const era_era_params *p,
                            const era_era_state *st, const float *dbias, era_era_grads *g,
                            void *workspace)
{
    int rc, T, R, nb, L, t, r, b, it, m;
    size_t need;
    void *own = NULL;
    double *dQ, *dalpha_t, *dmu, *dplan, *dC, *df, *dg, *buf, *dcen;
    double eps, dsig = 0.0, dal = 0.0, is2, sig;
    era_era_grads gnone;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__era_on_dev(st)) return era_era_backward_cuda(cfg, p, era__era_on_dev(st), dbias, g, workspace, NULL);
    if (era__is_dev(dbias)) return ERA_EINVAL; /* device buffers, host forward */
#endif
    rc = era__era_check(cfg, p);
    if (rc) return rc;
    if (!g) { /* NULL grads: accepted (nothing to accumulate), as in polar.h */
        memset(&gnone, 0, sizeof gnone);
        g = &gnone;
    }
    if (!st || !dbias || !g->dalpha_to != !g->dlog_sigma_to) return ERA_EINVAL;
    if (!st->valid || st->R != cfg->R || st->nb != cfg->nb || st->iters != cfg->iters)
        return ERA_ESTATE;
    T = st->T; R = st->R; nb = st->nb; L = st->iters;
    m = R > nb ? R : nb;
    need = era_era_workspace_size(cfg, T);
    if (!workspace) {
        own = ERA_MALLOC(need);
        if (!own) return ERA_ENOMEM;
        workspace = own;
    }
    dQ = (double *)workspace;                                   /* (T,nb) */
    dalpha_t = (double *)((char *)workspace + era__align(sizeof(double) * (size_t)T * (size_t)(2 * nb)));
    dplan = dalpha_t + T;                                       /* (R,nb) */
    dC = dplan + (size_t)R * nb;                                /* (R,nb) */
    dmu = dC + (size_t)R * nb;                                  /* (R,nb) scratch rows of mu grad */
    df = dmu + (size_t)R * nb;                                  /* (m) */
    dg = df + m;
    buf = dg + m;
    dcen = buf + m;                                             /* (m) */
    (void)dmu;
    eps = st->eps;
    /* rows: dalpha, and dQ via the row z-score (population std) */
    ERA__OMP(omp parallel for schedule(static) if((long long)T * T > 16384))
    for (t = 0; t < T; t++) {
        const float *db = dbias + (size_t)t * T;
        const float *Qt = st->Q + (size_t)t * nb;
        double *dq = dQ + (size_t)t * nb;
        double *sz = dQ + (size_t)T * nb + (size_t)t * nb; /* per-block sum of dbias */
        double mean = st->rmean[t], sd = st->rstd[t], d = sd + st->zeps;
        double A = 0.0, Bs = 0.0, da = 0.0, n = 0.0;
        int bb, s;
        for (bb = 0; bb < nb; bb++) {
            double acc = 0.0, y = log((double)Qt[bb] + st->delta) - mean;
            int send = st->bstart[bb + 1];
            if (st->zscore_causal && send > t + 1) send = t + 1; /* the future is 0 */
            for (s = st->bstart[bb]; s < send; s++) acc += db[s];
            sz[bb] = acc * st->alpha;   /* sum over the block of dz */
            da += acc * y / d;
            A += sz[bb];
            Bs += sz[bb] * y;
            n += (double)era__era_count(st, t, bb);
        }
        dalpha_t[t] = da;
        for (bb = 0; bb < nb; bb++) {
            double c = (double)era__era_count(st, t, bb);
            double y = log((double)Qt[bb] + st->delta) - mean;
            double dy = sz[bb] / d;
            if (c > 0.0) {
                dy -= c * A / (n * d);
                if (sd > 0.0) dy -= c * y * Bs / (n * sd * d * d);
            }
            dq[bb] = dy / ((double)Qt[bb] + st->delta);
        }
    }
    for (t = 0; t < T; t++) dal += dalpha_t[t];
    if (g->dalpha_to)
        *g->dalpha_to += (float)dal;
    else
        g->dalpha += (float)dal;
    /* dplan = mu^T dQ; dmu = dQ plan^T folded into the membership backward */
    for (r = 0; r < R; r++)
        for (b = 0; b < nb; b++) {
            double acc = 0.0;
            for (t = 0; t < T; t++) acc += (double)st->mu[(size_t)t * R + r] * dQ[(size_t)t * nb + b];
            dplan[(size_t)r * nb + b] = acc;
        }
    for (r = 0; r < m; r++) dcen[r] = 0.0;
    sig = st->sigma;
    is2 = 1.0 / (sig * sig);
    for (t = 0; t < T; t++) {
        const float *mt = st->mu + (size_t)t * R;
        double ph = (double)t / (double)T, dot = 0.0, m2 = 0.0, ms = 0.0;
        for (r = 0; r < R; r++) {
            double acc = 0.0;
            for (b = 0; b < nb; b++) acc += dQ[(size_t)t * nb + b] * st->plan[(size_t)r * nb + b];
            buf[r] = acc;
            dot += acc * mt[r];
            ms += (double)mt[r];
        }
        dot /= ms; /* mu renormalised in double, as in era_membership_backward */
        /* dsigma = sum_r dl_r d_r^2 / sigma^3 with sum_r dl_r = 0 (softmax): taken as
           sum_r dl_r (d_r^2 - E_mu[d^2]) / sigma^3 (issue 38). The plain form summed
           terms of size d^2 / sigma^3 (3.6e6 at sigma 1e-3) that cancel; the fp32 mu
           (sum_r mu != 1 by ~1e-7) left 3% of dsigma at sigma = 1e-3. */
        for (r = 0; r < R; r++) {
            double d = ph - (double)p->centers[r];
            m2 += (double)mt[r] * d * d;
        }
        m2 /= ms;
        for (r = 0; r < R; r++) {
            double dl = (double)mt[r] * (buf[r] - dot);
            double d = ph - (double)p->centers[r];
            /* logit = -d^2 / (2 sigma^2) */
            dcen[r] += dl * d * is2;
            dsig += dl * (d * d - m2) / (sig * sig * sig);
        }
    }
    /* plan = exp((f + g - C)/eps), unrolled log-domain Sinkhorn backward */
    for (r = 0; r < m; r++) { df[r] = 0.0; dg[r] = 0.0; }
    for (r = 0; r < R; r++)
        for (b = 0; b < nb; b++) {
            double z = dplan[(size_t)r * nb + b] * st->plan[(size_t)r * nb + b] / eps;
            df[r] += z;
            dg[b] += z;
            dC[(size_t)r * nb + b] = -z;
        }
    for (it = L - 1; it >= 0; it--) {
        const float *f = st->f + (size_t)it * R;
        const float *g0 = st->g + (size_t)it * nb;
        /* g1[b] = eps log(1/nb) - eps LSE_r((f_r - C_rb)/eps) */
        for (b = 0; b < nb; b++) {
            double mx = -HUGE_VAL, s = 0.0;
            for (r = 0; r < R; r++) {
                buf[r] = ((double)f[r] - st->cost[(size_t)r * nb + b]) / eps;
                if (buf[r] > mx) mx = buf[r];
            }
            for (r = 0; r < R; r++) { buf[r] = exp(buf[r] - mx); s += buf[r]; }
            for (r = 0; r < R; r++) {
                double v = buf[r] / s;
                df[r] -= dg[b] * v;
                dC[(size_t)r * nb + b] += dg[b] * v;
            }
        }
        for (b = 0; b < nb; b++) dg[b] = 0.0;
        /* f[r] = eps log(1/R) - eps LSE_b((g0_b - C_rb)/eps) */
        for (r = 0; r < R; r++) {
            double mx = -HUGE_VAL, s = 0.0;
            for (b = 0; b < nb; b++) {
                buf[b] = ((double)g0[b] - st->cost[(size_t)r * nb + b]) / eps;
                if (buf[b] > mx) mx = buf[b];
            }
            for (b = 0; b < nb; b++) { buf[b] = exp(buf[b] - mx); s += buf[b]; }
            for (b = 0; b < nb; b++) {
                double w = buf[b] / s;
                dg[b] -= df[r] * w;
                dC[(size_t)r * nb + b] += df[r] * w;
            }
        }
        for (r = 0; r < R; r++) df[r] = 0.0;
    }
    /* C_rb = (c_r - c_b)^2 */
    for (r = 0; r < R; r++)
        for (b = 0; b < nb; b++) {
            double d = (double)p->centers[r] - ((double)b + 0.5) / (double)nb;
            dcen[r] += dC[(size_t)r * nb + b] * 2.0 * d;
        }
    if (g->dcenters)
        for (r = 0; r < R; r++) g->dcenters[r] += (float)dcen[r];
    if (g->dlog_sigma_to)
        *g->dlog_sigma_to += (float)dsig * p->sigma;
    else
        g->dsigma += (float)dsig;
    if (own) ERA_FREE(own);
    return ERA_OK;
}

/* ------------------------------------------------------------------ both ----- */

ERADEF int era_apply(float *scores, const float *bias, int per_head, int B, int H, int T)
{
    long long n, bh;
    size_t TT;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__is_dev(scores)) return era_apply_cuda(scores, bias, per_head, B, H, T, NULL);
#endif
    if (!scores || !bias || B <= 0 || H <= 0 || T <= 0) return ERA_EINVAL;
    if (per_head != 0 && per_head != 1) return ERA_EINVAL; /* a boolean: (T,T) or (H,T,T) */
    if ((double)B * H * (double)T * T > (double)((size_t)-1) / 8) return ERA_ERANGE;
    TT = (size_t)T * (size_t)T;
    n = (long long)B * H;
    ERA__OMP(omp parallel for schedule(static) if(n * (long long)TT > 65536))
    for (bh = 0; bh < n; bh++) {
        float *ERA_RESTRICT s = scores + (size_t)bh * TT;
        const float *ERA_RESTRICT b = bias + (per_head ? (size_t)(bh % H) * TT : 0);
        size_t i;
        for (i = 0; i < TT; i++) s[i] += b[i];
    }
    return ERA_OK;
}

ERADEF int era_reduce_grad(float *dbias, const float *dscores, int per_head, int B, int H,
                           int T)
{
    long long i, TT;
    int nh;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (era__is_dev(dscores)) return era_reduce_grad_cuda(dbias, dscores, per_head, B, H, T, NULL);
#endif
    if (!dbias || !dscores || B <= 0 || H <= 0 || T <= 0) return ERA_EINVAL;
    if (per_head != 0 && per_head != 1) return ERA_EINVAL; /* a boolean: (T,T) or (H,T,T) */
    if ((double)B * H * (double)T * T > (double)((size_t)-1) / 8) return ERA_ERANGE;
    TT = (long long)T * T;
    nh = per_head ? H : 1;
    ERA__OMP(omp parallel for schedule(static) if(TT * nh * B * H > 65536))
    for (i = 0; i < TT * nh; i++) {
        long long hh = i / TT, e = i % TT;
        double acc = 0.0;
        int b, h;
        for (b = 0; b < B; b++) {
            if (per_head) {
                acc += dscores[((size_t)b * H + (size_t)hh) * (size_t)TT + (size_t)e];
            } else {
                for (h = 0; h < H; h++) acc += dscores[((size_t)b * H + h) * (size_t)TT + (size_t)e];
            }
        }
        dbias[i] += (float)acc;
    }
    return ERA_OK;
}

/* ------------------------------------------------------------------ fixed priors */

ERADEF era_pos_config era_pos_config_default(void)
{
    era_pos_config c;
    c.dims = 64;
    c.base = 10000.0f;
    c.slope = 1.0f;
    c.zscore = 1;
    c.zscore_causal = 0;
    c.zscore_eps = 1e-6f;
    c.bias_clip = 4.0f;
    c.scale = 1.0f;
    c.max_T = 65536;
    return c;
}

/* x(d), d = |i - j| >= 0, of either prior (kind 0 sinusoid, 1 relative), in double */
static double era__pos_x(const era_pos_config *c, int kind, int d)
{
    if (kind == 0) {
        int k, half = c->dims / 2;
        double acc = 0.0;
        for (k = 0; k < half; k++) acc += cos((double)d * pow((double)c->base, -2.0 * k / (double)c->dims));
        return acc / (double)half;
    }
    return -(double)c->slope * (double)d;
}

/* multiplicity of distance d in the statistics set */
static double era__pos_mult(int causal, int T, int d)
{
    if (causal) return (double)(T - d);
    return d ? 2.0 * (double)(T - d) : (double)T;
}

static int era__pos_bias(const era_pos_config *c, int kind, int T, float *bias)
{
    double n = 0.0, mean = 0.0, ss = 0.0, inv = 0.0, scale, clip;
    float *last;
    int d, i, rc;
    if (!c || !bias) return ERA_EINVAL;
    if (c->max_T < 1 || (c->zscore != 0 && c->zscore != 1) || (c->zscore_causal != 0 && c->zscore_causal != 1))
        return ERA_EINVAL;
    if (!era__finite(c->scale) || !era__finite(c->zscore_eps) || c->zscore_eps < 0.0f ||
        !era__finite(c->bias_clip) || c->bias_clip <= 0.0f)
        return ERA_EINVAL;
    if (kind == 0 && (c->dims < 2 || c->dims > 65536 || (c->dims & 1) || !era__finite(c->base) || c->base <= 1.0f))
        return ERA_EINVAL;
    if (kind == 1 && (!era__finite(c->slope) || c->slope <= 0.0f)) return ERA_EINVAL;
    if ((rc = era__check_T(T, c->max_T)) != ERA_OK) return rc;
    scale = c->scale < 0.0f ? 0.0 : c->scale > 1.0f ? 1.0 : (double)c->scale;
    clip = (double)c->bias_clip;
    if (c->zscore) { /* closed-form statistics over the distinct distances, two passes */
        for (d = 0; d < T; d++) {
            double m = era__pos_mult(c->zscore_causal, T, d);
            mean += m * era__pos_x(c, kind, d);
            n += m;
        }
        mean /= n;
        for (d = 0; d < T; d++) {
            double e = era__pos_x(c, kind, d) - mean;
            ss += era__pos_mult(c->zscore_causal, T, d) * e * e;
        }
        inv = n < 2.0 ? 0.0 : 1.0 / (sqrt(ss / (n - 1.0)) + (double)c->zscore_eps); /* T = 1: 0 */
    }
    /* the values y(d) go into the last row (y(d) at column T-1-d), then every row copies them */
    last = bias + (size_t)(T - 1) * (size_t)T;
    for (d = 0; d < T; d++) {
        double y = era__pos_x(c, kind, d);
        if (c->zscore) {
            y = (y - mean) * inv;
            if (y > clip) y = clip;
            if (y < -clip) y = -clip;
        }
        last[T - 1 - d] = (float)(y * scale);
    }
    ERA__OMP(omp parallel for schedule(static) if((long long)T * T > 65536))
    for (i = 0; i < T - 1; i++) {
        float *row = bias + (size_t)i * (size_t)T;
        int j;
        for (j = 0; j <= i; j++) row[j] = last[T - 1 - (i - j)];
        for (j = i + 1; j < T; j++) row[j] = c->zscore_causal ? 0.0f : last[T - 1 - (j - i)];
    }
    return ERA_OK;
}

ERADEF int era_sinusoid_bias(const era_pos_config *cfg, int T, float *bias)
{
    return era__pos_bias(cfg, 0, T, bias);
}

ERADEF int era_relative_bias(const era_pos_config *cfg, int T, float *bias)
{
    return era__pos_bias(cfg, 1, T, bias);
}

static int era__build_era(void *user, int T, float *bias)
{
    era_cache *c = (era_cache *)user;
    era_era_state st = era_era_state_init();
    int rc = era_era_forward(&c->ecfg, &c->epar, T, bias, &st, NULL);
    era_era_state_free(&st);
    return rc;
}

static int era__build_rpa(void *user, int T, float *bias)
{
    era_cache *c = (era_cache *)user;
    era_rpa_state st = era_rpa_state_init();
    float *mbar;
    int rc;
    if ((size_t)T > ((size_t)-1) / sizeof(float) / (size_t)c->rcfg.R) return ERA_ERANGE;
    mbar = (float *)ERA_MALLOC(sizeof(float) * (size_t)T * (size_t)c->rcfg.R);
    if (!mbar) return ERA_ENOMEM;
    rc = c->mu_fn(c->mu_user, T, mbar);
    if (rc == ERA_OK) rc = era_rpa_forward(&c->rcfg, &c->rpar, mbar, 1, T, bias, &st, NULL);
    era_rpa_state_free(&st);
    ERA_FREE(mbar);
    return rc;
}

ERADEF int era_cache_init(era_cache *c, size_t budget_bytes, era_build_fn build, void *user)
{
    if (!c || !build) return ERA_EINVAL;
    memset(c, 0, sizeof *c);
    c->budget = budget_bytes;
    c->build = build;
    c->user = user;
    return ERA_OK;
}

ERADEF int era_cache_init_era(era_cache *c, size_t budget_bytes, const era_era_config *cfg,
                              const era_era_params *p)
{
    int rc;
    if (!c) return ERA_EINVAL;
    rc = era__era_check(cfg, p);
    if (rc) return rc;
    rc = era_cache_init(c, budget_bytes, era__build_era, NULL);
    if (rc) return rc;
    c->user = c;
    c->kind = 1;
    c->ecfg = *cfg;
    c->epar = *p;
    c->frozen = (float *)ERA_MALLOC(sizeof(float) * (size_t)cfg->R);
    if (!c->frozen) return ERA_ENOMEM;
    memcpy(c->frozen, p->centers, sizeof(float) * (size_t)cfg->R);
    c->epar.centers = c->frozen;
    return ERA_OK;
}

ERADEF int era_cache_init_rpa(era_cache *c, size_t budget_bytes, const era_rpa_config *cfg,
                              const era_rpa_params *p, era_mu_fn mu_fn, void *user)
{
    int rc;
    if (!c || !p || !mu_fn) return ERA_EINVAL;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!era__finite(p->tau_att) || !era__finite(p->pos_beta) || !era__finite(p->kappa))
        return ERA_EINVAL;
    if (cfg->legacy) return ERA_EINVAL; /* the legacy bias is quadratic in mu: no mean path */
    rc = era_cache_init(c, budget_bytes, era__build_rpa, NULL);
    if (rc) return rc;
    c->user = c;
    c->kind = 2;
    c->rcfg = *cfg;
    c->rpar = *p;
    c->rpar.W = NULL; c->rpar.b = NULL; c->rpar.centers = NULL; c->rpar.log_sigma = NULL;
    c->mu_fn = mu_fn;
    c->mu_user = user;
    return ERA_OK;
}

ERADEF int era_cache_get(era_cache *c, int T, const float **bias)
{
    ptrdiff_t idx;
    size_t bytes;
    struct era__cache_entry e;
    int rc, max_T = 65536;
    if (!c || !bias || !c->build) return ERA_EINVAL;
    *bias = NULL;
    if (c->kind == 1) max_T = c->ecfg.max_T;
    if (c->kind == 2) max_T = c->rcfg.max_T;
    rc = era__check_T(T, max_T);
    if (rc) return rc;
    c->tick++;
    for (idx = 0; idx < c->n; idx++)
        if (c->map[idx].key == T) break;
    if (idx < c->n) {
        c->map[idx].value.last = c->tick;
        c->hits++;
        *bias = c->map[idx].value.bias;
        return ERA_OK;
    }
    bytes = sizeof(float) * (size_t)T * (size_t)T;
    if (bytes > c->budget) return ERA_ERANGE;
    /* evict least recently used entries until the new one fits */
    while (c->bytes + bytes > c->budget && c->n > 0) {
        ptrdiff_t i, lru = 0;
        for (i = 1; i < c->n; i++)
            if (c->map[i].value.last < c->map[lru].value.last) lru = i;
        c->bytes -= c->map[lru].value.bytes;
        ERA_FREE(c->map[lru].value.bias);
        c->map[lru] = c->map[c->n - 1]; /* order does not matter: move the last one in */
        c->n--;
        c->evictions++;
    }
    if (c->n == c->cap) { /* grow the entry array (doubling) */
        int ncap = c->cap ? 2 * c->cap : 8;
        struct era__cache_kv *nm;
        if (c->cap > INT_MAX / 2) return ERA_ENOMEM;
        nm = (struct era__cache_kv *)ERA_MALLOC(sizeof(*nm) * (size_t)ncap);
        if (!nm) return ERA_ENOMEM;
        if (c->n) memcpy(nm, c->map, sizeof(*nm) * (size_t)c->n);
        if (c->map) ERA_FREE(c->map);
        c->map = nm;
        c->cap = ncap;
    }
    e.bias = (float *)ERA_MALLOC(bytes);
    if (!e.bias) return ERA_ENOMEM;
    rc = c->build(c->user, T, e.bias);
    if (rc) {
        ERA_FREE(e.bias);
        return rc;
    }
    e.bytes = bytes;
    e.last = c->tick;
    c->map[c->n].key = T;
    c->map[c->n].value = e;
    c->n++;
    c->bytes += bytes;
    c->builds++;
    *bias = e.bias;
    return ERA_OK;
}

ERADEF void era_cache_free(era_cache *c)
{
    ptrdiff_t i;
    if (!c) return;
    for (i = 0; i < c->n; i++) ERA_FREE(c->map[i].value.bias);
    if (c->map) ERA_FREE(c->map);
    if (c->frozen) ERA_FREE(c->frozen);
    memset(c, 0, sizeof *c);
}

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------ CUDA ----- */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
#include "cuda/era.cuh"
#else
#define ERA__NOCUDA return ERA_ENOCUDA
ERADEF int era_cuda_available(void) { return 0; }
ERADEF int era_cuda_release(void) { return ERA_OK; }
ERADEF era_rpa_cuda_state era_rpa_cuda_state_init(void)
{
    era_rpa_cuda_state s;
    memset(&s, 0, sizeof s);
    return s;
}
ERADEF void era_rpa_cuda_state_free(era_rpa_cuda_state *st) { if (st) memset(st, 0, sizeof *st); }
ERADEF era_era_cuda_state era_era_cuda_state_init(void)
{
    era_era_cuda_state s;
    memset(&s, 0, sizeof s);
    return s;
}
ERADEF void era_era_cuda_state_free(era_era_cuda_state *st) { if (st) memset(st, 0, sizeof *st); }
/* the calls of the list ERA__CUDA_API (declared above): ERA_ENOCUDA, a workspace size 0;
   the parameters go unused */
#define ERA__NOCUDA_int ERA_ENOCUDA
#define ERA__NOCUDA_size_t 0
#define ERA__CUDA_STUB(ret, name, params) ERADEF ret name params { return ERA__NOCUDA_##ret; }
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
ERA__CUDA_API(ERA__CUDA_STUB)
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef ERA__CUDA_STUB
#undef ERA__NOCUDA_int
#undef ERA__NOCUDA_size_t
ERADEF int era_cuda_cache_init_era(era_cuda_cache *c, size_t budget_bytes,
                                   const era_era_config *cfg, const era_era_params *p)
{
    (void)budget_bytes; (void)cfg; (void)p;
    if (c) memset(c, 0, sizeof *c);
    ERA__NOCUDA;
}
ERADEF int era_cuda_cache_init_rpa(era_cuda_cache *c, size_t budget_bytes,
                                   const era_rpa_config *cfg, const era_rpa_params *p,
                                   era_mu_fn mu_fn, void *user)
{
    (void)budget_bytes; (void)cfg; (void)p; (void)mu_fn; (void)user;
    if (c) memset(c, 0, sizeof *c);
    ERA__NOCUDA;
}
ERADEF int era_cuda_cache_get(era_cuda_cache *c, int T, const float **bias, era_stream stream)
{
    (void)c; (void)T; (void)stream;
    if (bias) *bias = NULL;
    ERA__NOCUDA;
}
ERADEF void era_cuda_cache_free(era_cuda_cache *c) { if (c) memset(c, 0, sizeof *c); }
#undef ERA__NOCUDA
#endif /* CUDA */
#ifdef ERA__PUSHED_NO_TRAPPING
#pragma GCC pop_options
#undef ERA__PUSHED_NO_TRAPPING
#endif
#endif /* ERA_IMPLEMENTATION_DONE */
#endif /* ERA_IMPLEMENTATION */

/*
MIT License

Copyright (c) 2026 attnkit contributors

Permission is hereby granted, free of charge, to any person obtaining a copy of this
software and associated documentation files (the "Software"), to deal in the Software
without restriction, including without limitation the rights to use, copy, modify, merge,
publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR
PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
FOR ANY CLAIM, DAMAGE OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
DEALINGS IN THE SOFTWARE.
*/
