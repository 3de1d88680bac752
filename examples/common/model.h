/* model.h - the decoder-only language model the attnkit examples train (wt2_train,
   bench_train, the model tests). CPU, fp32, built on tensor.h and the mechanism headers.

   Architecture (seed 000 §3, §6.2, Listing 5; seed 002 §3; seed 003 §3):
     x0 = wte[ids] (+ wpe[t] with learned positions)
     per block l (pre-norm):
       mu   = memberships(x)            (B,T,R)  only when something uses them (RPA prior,
                                                 fuzzy MoE, residual gates, value gate)
       eta  = sigmoid(W_eta mu)          (B,T,1)  residual gates (cfg.res_gate), else 1
       a    = mixer(norm1(x), mu)        (B,T,C)  softmax attention (+ RPA/ERA prior, per-
                                                 layer tau_att) or polar attention;
                                                 + gated-delta memory channel (cfg.memory)
       x    = x + eta * dropout(a)
                                                 (or, per cfg.layer_pattern, LFM2's gated
                                                 short convolution)
       f    = ffn(norm2(x), mu)          (B,T,C)  GELU MLP, squared-ReLU gated MLP or fuzzy MoE
       x    = x + eta * dropout(f)
     logits = normf(x) wte^T (tied head), loss = label-smoothed CE (+ entropy floor).

   Memory: parameters, gradients and activations each come from one allocation. The
   parameter buffer is a list of named tensors (mdl_tensor) so checkpoints can save them
   by name (names follow PyTorch's style: "wte", "blocks.0.attn.qkv.weight", ...).

   Threads: OpenMP inside tensor.h and the headers; for a fixed thread count every result is
   bit-identical run to run.

   Errors: MDL_OK (0) or a negative MDL_E* code; messages go to the err buffer of
   mdl_init / mdl_config_validate and to mdl_last_error(m) after a failed call.
   License: MIT. */
#ifndef ATTNKIT_MODEL_H
#define ATTNKIT_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"
#include "era.h"
#include "polar.h"
#include "gdelta.h"
#include "ceas.h"
#include "exctx.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MDL_OK = 0, MDL_EINVAL = -1, MDL_ENOMEM = -2, MDL_ERANGE = -3, MDL_EFAIL = -4 };
enum { MDL_ATTN_SOFTMAX = 0, MDL_ATTN_POLAR = 1 };
enum { MDL_POLAR_GATE_HEAD = 0, MDL_POLAR_GATE_CHANNEL = 1 }; /* mdl_config.polar_gate */
/* Softmax attention priors (an additive (T,T) bias on the logits, model.c):
   RPA (seed 000, learned parameters), ERA (seed 003, learned parameters), and seed 000's
   comparison priors SINUSOID and RELATIVE ("sinusoid-only" / "relative-only", era.h's
   era_sinusoid_bias / era_relative_bias with cfg.fixed_prior): fixed, no parameters. */
enum { MDL_PRIOR_NONE = 0, MDL_PRIOR_RPA = 1, MDL_PRIOR_ERA = 2, MDL_PRIOR_SINUSOID = 3, MDL_PRIOR_RELATIVE = 4 };
enum { MDL_MEM_NONE = 0, MDL_MEM_GDELTA = 1 };
enum { MDL_MEMQKV_OWN = 0, MDL_MEMQKV_SHARED = 1 }; /* mdl_config.mem_qkv */
/* FFN kinds: rows of layers.h's FFN table (lyr_ffn), by index; later rows have no name
   here: lyr_ffn_find("name") gives their index (the --ffn flag takes the names). */
enum { MDL_FFN_GELU = 0, MDL_FFN_RELU2 = 1, MDL_FFN_MOE = 2 };
enum { MDL_NORM_LAYER = 0, MDL_NORM_RMS = 1 };
/* Positions: NONE, LEARNED (wpe table, max_T rows) or ROPE (rotary embeddings on the
   softmax attention's q and k per head, pairs (2i, 2i+1) turned by t * MDL_ROPE_BASE^(-2i/D);
   softmax attention and an even head width only; no table, so any T up to max_T). */
enum { MDL_POS_NONE = 0, MDL_POS_LEARNED = 1, MDL_POS_ROPE = 2 };
#define MDL_ROPE_BASE 10000.0
/* Where the RPA prior's memberships come from (mdl_opts.prior_source):
   AUTO     training forwards: BATCH (seed 000's method); other forwards: RUNNING.
   BATCH    the batch mean of this forward's memberships (S sums over all T positions, the
            mean runs over the batch): the bias at (t, s) depends on tokens after t and on
            the other rows of the batch. The seed's training prior; never an honest
            evaluation.
   RUNNING  the model's running statistics (see mdl_prior_stats_update): the bias depends
            on T, the parameters and past training batches only, never on the text being
            scored. Evaluation builds it once per (T, parameters) through era.h's cache.
            In training it is the leak-free "causal" option (the prior then passes no
            gradient to the memberships; tau_att and pos_beta still learn). */
enum { MDL_PSRC_AUTO = 0, MDL_PSRC_BATCH = 1, MDL_PSRC_RUNNING = 2 };

#define MDL_MAX_LAYERS 64
#define MDL_NAME_MAX 96

typedef struct mdl_config {
    int vocab;          /* 50257 */
    int d_model;        /* C, 128 */
    int n_layers;       /* 4 */
    int n_heads;        /* 4 (head dim C / H) */
    int max_T;          /* longest context the model runs (positions table), 256 */
    int d_ff_mult;      /* FFN hidden width = d_ff_mult * C, 4 */
    int pos;            /* MDL_POS_LEARNED */
    int conv_k;         /* 0: off; K in [2, 16]: a depthwise causal convolution of width K
                           on each block's mixer input, n1 <- n1 + sum_{j<K} w_j * n1[t-j]
                           per channel ("blocks.l.conv.weight" (K,C), init 0: identity at
                           step 0). A simplified stand-in for seed 002's short convolutions
                           (it gives position-free attention local order; one conv before
                           the mixers; polar attention's Canon layers on q/k/v, as the
                           seed has them, are polar_canon_k) */
    int norm;           /* MDL_NORM_LAYER */
    int attn;           /* MDL_ATTN_SOFTMAX */
    int prior;          /* MDL_PRIOR_NONE (only with softmax attention): NONE, RPA, ERA,
                           SINUSOID or RELATIVE. The bias is added to the logits as
                           softmax(qk/(sqrt(D) temp_h) + B) (with gac_tau:
                           softmax((qk/sqrt(D) + B)/tau_gac)), times the warm-in
                           opts.prior_scale. SINUSOID / RELATIVE are fixed: B(T) from
                           era.h (fixed_prior below), built once per length and cached;
                           no parameters, no gradient, and no tau_att (era.h's reading:
                           nothing is learned; seed 000 gives these priors no temperature).
                           CPU model only (mdl_device_supports refuses them). */
    int memory;         /* MDL_MEM_NONE */
    int ffn;            /* MDL_FFN_GELU (a row of the FFN table, layers.h lyr_ffn) */
    float dropout;      /* 0 (residual and attention-output dropout when training) */
    float init_std;     /* 0.02; residual output projections scaled by 1/sqrt(2 L) */
    /* fuzzy memberships (seed 000 Listing 3): used by RPA, the MoE gate, res_gate, value_gate */
    int R;              /* regimes, 4 */
    int res_gate;       /* 0: eta = sigmoid(W_eta mu) residual gates of Listing 5 */
    int value_gate;     /* 0: attention output times sigmoid(mean over s <= t of W_gamma mu) (Listing 4, made causal) */
    /* softmax attention prior */
    era_rpa_config rpa; /* K, tau_align, sinkhorn_iters, detach, posmix, clip, ... */
    float tau_att_init; /* per-layer learned tau_att (RPA), 0.68 in seed 000 §7; 1 default.
                           Seed 000's temperature: it divides the PRIOR only (Listing 4),
                           clamped to [rpa.tau_min, rpa.tau_max] inside era.h. */
    int gac_tau;        /* 0; 1: per-layer GAC temperature tau_gac ("blocks.l.attn.gac_tau",
                           init 1) dividing the WHOLE logits, softmax((qk/sqrt(D) + B)/tau_gac)
                           (seed 003 eq. 8); no clamp inside the model (GAC projects it) */
    era_era_config era; /* ERA (seed 003): R, blocks, eps, iterations */
    era_pos_config fixed_prior; /* SINUSOID / RELATIVE (era.h era_pos_config_default): dims
                           (even, 2..65536) and base (> 1) of the sinusoid, slope (> 0) of the
                           relative prior, zscore and zscore_causal (0/1), zscore_eps (>= 0),
                           bias_clip (> 0); checked only when prior is one of the two. Its
                           scale and max_T are not read: the warm-in is opts.prior_scale and
                           the length bound max_T */
    /* polar attention (seed 002): polar.window (sliding window, -1 full causal) and
       polar.distractor_keys / distractor_weight (eq. 15 alignment loss, 0 = off) are
       reachable from wt2_train (--polar-window, --polar-distractor, ...) */
    polar_config polar;
    int polar_kv_heads; /* key/value heads (GQA; seed 002 uses H/4); 0 = n_heads
                           (wt2_train --polar-kv-heads) */
    int polar_qk_norm;  /* 1 (the default; the model has always done it): q and k
                           RMSNormed per head over D before scoring, no weight, eps 1e-6
                           (seed 002 §3.2; the authors' F.rms_norm has no weight either,
                           its eps is the dtype's epsilon); 0: the raw projections.
                           wt2_train --qk-norm on|off */
    int polar_gate;     /* MDL_POLAR_GATE_HEAD: eq. 14's output gate, one scalar per head
                           (B,T,H), H extra rows of the q projection, no biases (the model as
                           before, bit for bit); MDL_POLAR_GATE_CHANNEL: one gate per channel
                           (B,T,H,D), H*D extra rows (the authors' code: its q projection
                           gives [q | gate] per head), and biases on the output projections
                           ("blocks.l.attn.o.bias", ".mu.bias", (C) each, init 0) as the
                           authors' Linear layers carry. wt2_train --polar-gate head|channel */
    int polar_canon_k;  /* Canon layers (seed 002 §3.2): a depthwise causal convolution with a
                           residual of kernel polar_canon_k on each of q, k, v before scoring
                           (layers.h: per channel, after the q/k norm, the authors' layout and
                           init; "blocks.l.attn.canon_{q,k,v}.weight" (H or Hkv, K, D));
                           0 (the default): none; the authors use 4; 0..64. Decoding keeps
                           a ring of the last K inputs per slot. wt2_train --canon-k */
    /* gated-delta memory channel (seed 002 §3) */
    gd_config gd;
    int gd_heads;       /* memory heads, 0 = n_heads */
    int gd_dk;          /* key/value width per memory head, 0 = C / gd_heads */
    int mem_qkv;        /* MDL_MEMQKV_OWN (the default; the model as before, bit for bit): the
                           memory channel projects its own q, k, v ("blocks.l.gdelta.qkv.weight"
                           (3 Hm Dk, C)). MDL_MEMQKV_SHARED (seed 002 §3.3; the authors' code,
                           kreasof-ai/atma PolarAttention: self.mem(x, q_t, k_t, v_t)): the
                           memory reads the polar attention's own q, k, v as polar_forward
                           scores them (after the q/k RMSNorm and the Canon layers; the model's
                           polar attention has no RoPE), GQA's k, v repeated per query head
                           (memory head h reads kv head h / (H / Hkv)), and its gradients flow
                           back into the attention's projections (and Canon weights); no
                           qkv.weight of its own (3 C^2 fewer parameters per layer). Needs
                           memory gdelta and polar attention, gd_heads 0 or n_heads and gd_dk 0
                           or C / n_heads (Hm = H, Dk = D, as the authors' TitansMemory(dim, H,
                           head_dim)). Token-by-token decoding covers it exactly (the polar
                           layer's q and cached k, v). wt2_train --mem-qkv own|shared */
    /* fuzzy MoE (seed 000 Listing 5) */
    int moe_experts;    /* E, 4 */
    int moe_topk;       /* 2 */
    float moe_gumbel_tau; /* 0.5 */
    /* The per-layer mixer (issue 43 item 1; seed 002 §3.1's hybrid): layer l's mixer is
       layer_pattern[l % strlen(layer_pattern)]: 'A' the attention cfg.attn names (softmax or
       polar), 'c' LFM2's gated short convolution (layers.h lyr_kind_lfm: in_proj to three
       streams B, C', x; y = B x; causal depthwise conv of width lfm_k; C' z; out_proj;
       ["blocks.l.lfm.in_proj.weight" (3C,C), ".in_proj.bias" (3C), ".conv.weight" (K,C),
       ".out_proj.weight" (C,C), ".out_proj.bias" (C)], in place of the attention's tensors).
       "" (the default): every layer attention, the model as before, bit for bit; "A" is the
       same model. ATMA's 16 layers (kreasof-ai/atma, attention where l % 4 == 2) are
       "ccAc"; the seed's "3:1" reads as "cccA" too. At most MDL_MAX_LAYERS characters.
       On a conv layer: the memory channel (cfg.memory) is absent (ATMA's memory lives in
       its attention layers); norms, FFN, memberships, residual gates, conv_k and dropout
       are the block's and apply as on any layer. Refused with conv layers
       (mdl_config_validate): the priors, value_gate and gac_tau (per-layer attention
       parts not carried over yet); the forward refuses CEAS observables and gate rows, and
       mdl_set_gating any gating; GAC's entropy band counts the attention layers only. */
    char layer_pattern[MDL_MAX_LAYERS + 1];
    int lfm_k;          /* the gated convolution's kernel K, 3 (LFM2, ATMA); 1..64; read only
                           when layer_pattern has a 'c' */
} mdl_config;

/* Defaults above: softmax attention, no prior, no memory, GELU MLP, LayerNorm, learned
   positions, d 128, 4 layers, 4 heads, context 256, vocab 50257. */
mdl_config mdl_config_default(void);
/* MDL_OK or MDL_EINVAL with a sentence in err (may be NULL). */
int mdl_config_validate(const mdl_config *cfg, char *err, size_t errlen);

/* One named parameter tensor: params + offset, numel floats, row-major shape. */
typedef struct mdl_tensor {
    char name[MDL_NAME_MAX];
    int ndim;
    int shape[4];
    size_t offset, numel;
    int decay;          /* 1: AdamW weight decay applies (matrices), 0: norms, biases, scalars */
} mdl_tensor;

/* Per-forward options: what the trainer changes from step to step. */
typedef struct mdl_opts {
    int train;              /* 1: dropout and Gumbel noise on, activations kept for backward */
    float label_smoothing;  /* 0; the optimised loss uses it, stats.ce is always pure CE */
    float ent_floor_alpha;  /* 0: entropy-floor penalty weight (seed 000 Listing 8) */
    float ent_floor_eta;    /* 0.02 fraction of H_max = log R below which it bites */
    float lambda_sat;       /* 0: Guardian's saturation multiplier (1 + lambda_sat) */
    float moe_lb_coef;      /* 0: load-balance loss weight (0: statistic only, as seed 000) */
    float prior_scale;      /* 1: prior bias warm-in scale in [0,1] (every prior) */
    float attn_temp_mul;    /* 1: global attention temperature multiplier (chaos warm-in) */
    const float *head_temp; /* (L,H) per-head temperature multipliers (CEAS), NULL = 1 */
    int want_attn_obs;      /* 1: fill stats.attn_obs (CEAS observables per layer and head) */
    uint64_t seed;          /* dropout / Gumbel noise stream for this forward */
    int prior_source;       /* MDL_PSRC_AUTO (RPA prior only; see the enum) */
    /* GAC entropy band (seed 003 eq. 12), training forwards with softmax attention:
       loss += ent_band_lambda * sum_l [relu(h_min - H_l)^2 + relu(H_l - h_max)^2],
       H_l = mean attention entropy of layer l (nats) over batch, heads and query rows */
    float ent_band_lambda;  /* 0: off */
    float ent_band_hmin;    /* 2 */
    float ent_band_hmax;    /* 5 */
    /* CEAS gating (ceas.h, issue 20), training forwards with softmax attention: 1 fills
       stats.gate_rows with every query row's observables (H, n_eff, sigma_qk of the
       scores, ...) for ceas_gate_scores / ceas_token_mask; see mdl_set_gating */
    int want_gate_rows;     /* 0 */
    /* Per-target weights of the optimised loss, (B,T) finite >= 0 with a positive sum, or
       NULL (all 1): loss = sum_i w_i loss_i / sum_i w_i (+ the penalties); stats.ce and
       ce_sum stay the plain CE over every target. Used by niah to weigh needle digits. */
    const float *target_weight; /* NULL */
    /* Inference forwards (no targets, train 0): the head (normf(x) wte^T, most of a small
       model's forward) runs only on the rows t >= logits_from of each sequence; mdl_logits'
       rows t < logits_from are left as they were (not computed). The rows computed are
       bit-identical to a forward with 0 when each head GEMM (rows x vocab x d_model) is
       >= 4096 (tensor.h's blocked path, every real vocabulary); tinier heads take the
       small-GEMM path, whose sums can differ in the last bit. mcqa scores with it. */
    int logits_from;        /* 0: every row */
} mdl_opts;
mdl_opts mdl_opts_default(void);

typedef struct mdl_stats {
    double loss;            /* optimised objective (mean over targets, + penalties) */
    double ce;              /* pure CE, mean over the targets */
    double ce_sum;          /* pure CE, summed (evaluation weighs by tokens) */
    long long ntok;         /* targets counted */
    float mu_entropy;       /* mean membership entropy over layers (0 without memberships) */
    float sat_frac;         /* mean membership saturation fraction */
    float ent_pen;          /* entropy-floor penalty value (before its weight) */
    float moe_lb;           /* MoE load-balance statistic mean over layers */
    float layer_mu_entropy[MDL_MAX_LAYERS];
    float layer_tau_att[MDL_MAX_LAYERS];
    const ceas_obs *attn_obs; /* (L,H) when want_attn_obs, else NULL; owned by the model */
    /* RPA prior diagnostics of this forward's prior, per layer (0 without an RPA prior):
       Sinkhorn marginal error, std of the bias before the z-score, share of exp(S/tau_align)
       entries at era.h's clamp (1: the plan ignores the memberships, only the position
       structure of the basis is left) */
    float layer_prior_marg_err[MDL_MAX_LAYERS];
    float layer_prior_std_pre[MDL_MAX_LAYERS];
    float layer_prior_clamp_frac[MDL_MAX_LAYERS];
    int prior_running;       /* 1: the RPA prior came from the running statistics */
    /* attention entropy (softmax attention; filled when ent_band_lambda > 0 or !train) */
    float layer_attn_H[MDL_MAX_LAYERS];
    float ent_band;          /* the entropy-band penalty (before its weight lambda) */
    float layer_tau_gac[MDL_MAX_LAYERS];
    const ceas_obs *gate_rows; /* (L,B,H,T) when want_gate_rows, else NULL; owned by the model */
    double sigreg;           /* the signature-stream regulariser L_reg of a training forward
                                (mdl_sigreg_set; 0 when off), before its weight */
} mdl_stats;

typedef struct mdl_model mdl_model; /* opaque */

/* Allocate and initialise (seeded, deterministic). *out is NULL on failure. */
int mdl_create(mdl_model **out, const mdl_config *cfg, uint64_t seed, char *err,
               size_t errlen);

/* Devices. mdl_create_on(..., MDL_DEVICE_CUDA, ...) puts the parameters, gradients and
   activations in CUDA device memory (the same initial values as mdl_create with the same
   seed); the forward and backward then run the same model code, each tensor.h op taking
   its CUDA path for device buffers (so the implementations must be compiled with nvcc, or
   with the CPU simulation in the tests). Token ids, options, statistics and controllers
   stay on the host. On a device model, mdl_params, mdl_grads and mdl_logits return device
   pointers (tk_copy moves them; tk_adamw_update takes them as they are); mdl_token_ce
   stays host. The device model does not cover every configuration yet:
   mdl_device_supports says whether cfg runs there (MDL_EINVAL and why, if not: polar
   attention with a head width other than 32, 64, 96, 128; the fixed sinusoid / relative
   priors). CEAS gating runs there as a
   mask (see mdl_set_gating). mdl_create_on fails with MDL_EINVAL when no CUDA device can
   be used (a build without CUDA included).
   Precision on the device: tensor.h's tk_cuda_set_math (fp32, tf32, bf16) sets the GEMMs'
   arithmetic and, where the head width is a multiple of 16 up to 128, the attention's
   (tk_attention_cuda_config.math); buffers, master weights and the optimiser stay fp32. */
enum { MDL_DEVICE_CPU = 0, MDL_DEVICE_CUDA = 1 };
int mdl_create_on(mdl_model **out, const mdl_config *cfg, uint64_t seed, int device, char *err,
                  size_t errlen);
int mdl_device(const mdl_model *m);
/* The device context the model was created with (exctx.h): the trainer and other callers
   run their ops on the model's memory through it. NULL for m NULL. */
const ex_ctx *mdl_ctx(const mdl_model *m);
int mdl_device_supports(const mdl_config *cfg, char *err, size_t errlen);
/* The i-th configuration mdl_device_supports refuses, as a phrase ("more than 256 heads"),
   from the same table; NULL past the last (help texts list them from here). */
const char *mdl_device_limit(int i);
void mdl_destroy(mdl_model *m);
/* Frees what the device ops keep between calls for every model of the process (the cuBLAS
   handle and the scratch caches of tensor.h and era.h, see tk_cuda_release and
   era_cuda_release), after the last device model is destroyed; a later device call builds
   them again. MDL_OK, or MDL_EFAIL when the device reports an error while freeing. MDL_OK
   without CUDA. */
int mdl_device_release(void);
const mdl_config *mdl_get_config(const mdl_model *m);
const char *mdl_last_error(const mdl_model *m);

/* The parameter and gradient buffers (n floats each) and their tensor table. */
size_t mdl_num_params(const mdl_model *m);
float *mdl_params(mdl_model *m);
float *mdl_grads(mdl_model *m);
/* One float, base[off], of the model's parameters or gradients (base: mdl_params or
   mdl_grads) read from the host on either device: a plain load on the CPU model, a 4-byte
   copy on a device model (NaN if that copy fails, or m or base is NULL). */
float mdl_scalar_get(const mdl_model *m, const float *base, size_t off);
/* n floats, out[i] = base[off[i]], read from the host in one transfer: on a device model
   the n floats are gathered on the model's stream (device copies, no wait) and read back
   with one copy, one host wait for all of them; plain loads on the CPU model. MDL_OK, or
   MDL_EINVAL (a NULL argument with n > 0, n < 0), MDL_EFAIL (a failed copy: out holds NaN).
   The values are those mdl_scalar_get returns, bit for bit. */
int mdl_scalars_get(const mdl_model *m, const float *base, const size_t *off, int n, float *out);
int mdl_num_tensors(const mdl_model *m);
const mdl_tensor *mdl_tensor_at(const mdl_model *m, int i);
const mdl_tensor *mdl_find_tensor(const mdl_model *m, const char *name);

/* Activation capacity for batches up to B x T (T <= max_T); one allocation, grown on
   demand by mdl_forward too. Returns MDL_ENOMEM if it cannot. */
int mdl_reserve(mdl_model *m, int B, int T);
size_t mdl_activation_bytes(const mdl_model *m);

/* inputs, targets: (B,T) token ids in [0, vocab); targets may be NULL (then no loss; the
   forward is still complete). With opts->train it keeps what mdl_backward needs. */
int mdl_forward(mdl_model *m, const int *inputs, const int *targets, int B, int T,
                const mdl_opts *opts, mdl_stats *stats);
/* grads += d(stats.loss)/d(params) for the last training forward (same opts). */
int mdl_backward(mdl_model *m);

/* Seed 002 Appendix A's signature-stream regulariser (issue 43 item 7; sigreg.h says what
   each mode computes and which source each choice follows). With mode != SGR_OFF, every
   later training forward with targets computes L_reg = (1/L) sum_l R(x_l) over the L
   blocks' outputs x_l (the residual stream after block l, the B T rows (B T, C)), reports
   it in mdl_stats.sigreg and optimises loss = (1 - alpha) (its usual loss's LM part:
   CE with label smoothing / target weights) + alpha L_reg + the other penalties as
   before; the backward scales dlogits by (1 - alpha) and adds alpha / L dR/dx_l to the
   residual gradient before block l's backward. sketch: sigreg.h's k (SGR_SKETCH = 64,
   atma's); (seed, key): its randomness, the block index mixed in (the trainer passes its
   run seed and step x micro-batches + micro-batch). Device models: the rows go to the
   host, the gradient back (ex_to_host / ex_to_ctx / ex_residual_fwd: one (B T, C) copy
   each way per block). mode SGR_OFF (the default) leaves every forward and backward as
   they were, bit for bit. MDL_EINVAL: mode outside 0..4, alpha not in (0, 1), sketch < 1. */
int mdl_sigreg_set(mdl_model *m, int mode, float alpha, int sketch, uint64_t seed, uint64_t key);
void mdl_zero_grad(mdl_model *m);
/* Logits of the last forward, (B,T,V), or NULL when the head did not keep them. */
const float *mdl_logits(const mdl_model *m);
/* Per-token pure CE of the last forward with targets, (B,T) doubles, or NULL. */
const double *mdl_token_ce(const mdl_model *m);

/* RPA running statistics (the leak-free prior). The model keeps, per layer and position
   t < max_T, a running average of the batch-mean memberships mbar[t] (R) of the training
   forwards, and per position how many updates it has seen. Memberships at position t
   depend on tokens <= t only, so the table is the same for every training length (the
   context game's shorter lengths update the first rows). Update rule, per row seen:
     w = max(1 - momentum, 1 / (n_t + 1)); run[t] += w (mbar[t] - run[t]); n_t += 1
   (a plain average for the first 1/(1-momentum) updates, an EMA after: no start-up bias).
   Rows never seen hold 1/R (uniform memberships). mdl_prior_stats_update reads the last
   training forward's memberships: call it after mdl_backward (a RUNNING-source training
   forward reads the table until its backward). No-op (MDL_OK) without an RPA prior. */
int mdl_prior_stats_update(mdl_model *m, float momentum);
/* The same update in two parts, for gradient accumulation and data parallelism (train.h
   trn_set_parallel): mdl_prior_batch_sums writes the last training forward's memberships
   summed over its batch rows, sums[(l * T + t) * R + r] (L * T * R doubles, cap the room,
   T the forward's length; non-finite entries count as 1/R as in the update) and its rows
   in *rows; mdl_prior_stats_apply makes one update from sums added over several forwards
   of the same T (rows: their rows in all): mean = sums / rows, then the rule above. Both
   MDL_OK with nothing done without an RPA prior (*rows 0). */
int mdl_prior_batch_sums(mdl_model *m, double *sums, size_t cap, int *T, int *rows);
int mdl_prior_stats_apply(mdl_model *m, const double *sums, int T, long long rows, float momentum);
/* The statistics as one float buffer (*n floats, 0 without an RPA prior):
   [L * max_T * R running memberships (layer-major, then position, then regime)]
   [max_T update counts (integers stored as floats)]. For checkpoints. */
const float *mdl_prior_stats(const mdl_model *m, size_t *n);
/* Replace them (checkpoint load): n must match, memberships finite in [0, 1], counts
   finite integers >= 0; MDL_EINVAL otherwise (the model is unchanged). */
int mdl_prior_stats_set(mdl_model *m, const float *buf, size_t n);
/* Cached prior builds and hits since creation: the RPA prior's evaluation cache (RUNNING
   source), plus the fixed priors' B(T) cache (SINUSOID / RELATIVE: one build per length
   while it stays cached, the 8 most recent lengths kept, every forward a hit or a build). */
void mdl_prior_cache_counts(const mdl_model *m, long *builds, long *hits);

/* Seed 004 section 6 (C)'s activation parameter (issue 46 item 2): the GELU MLP's
   per-layer gain a_l, act(u) = gelu(a_l u), u = n2 W1^T + b1 (layers.h lyr_mlp_dims.gain).
   Not a trained parameter (no tensor, no gradient): model state, 1 for every layer at
   creation; a layer whose gain is exactly 1 runs the plain GELU path, bit for bit as a
   model without gains (so every existing configuration is unchanged). The backward takes
   d u = a_l gelu'(a_l u) d act with the gains of its forward. Device-neutral (tensor.h's
   scale op through the model's context); the decoding path uses the gains too.
     mdl_act_gain_supported  MDL_OK for a GELU MLP; MDL_EINVAL and a sentence otherwise
                             (the squared-ReLU MLP and the MoE's experts have no gain)
     mdl_act_gain_set        a (L) finite in [MDL_ACT_GAIN_MIN, MDL_ACT_GAIN_MAX]; the next
                             forward uses them; MDL_EINVAL (model unchanged) otherwise
     mdl_act_gain_get        a (L) <- the gains
     mdl_ffn_act_copy        layer l's activations gelu(a_l u) of the last forward, which
                             must have been a training forward (B T F floats, (B,T,F)
                             row-major) into host (cap floats, >= B T F): one copy through
                             the model's context on a device model; *n (may be NULL) = B T F.
                             MDL_EINVAL when the last forward was not a training forward
                             (or the buffers were re-reserved since) */
#define MDL_ACT_GAIN_MIN 1e-4f
#define MDL_ACT_GAIN_MAX 1e4f
int mdl_act_gain_supported(const mdl_config *cfg, char *err, size_t errlen);
int mdl_act_gain_set(mdl_model *m, const float *a, int n);
int mdl_act_gain_get(const mdl_model *m, float *a, int n);
int mdl_ffn_act_copy(mdl_model *m, int l, float *host, size_t cap, size_t *n);

/* CEAS gating of the attention backward (issue 20). Forward: unchanged (a gated model
   computes exactly the same logits, loss and inference as an ungated one). Backward of
   the next mdl_backward only (every mdl_forward clears it):
     keep (L,B,H,T) 1/0 or NULL (all kept): keep[l,b,h,i] = 0 prunes query row i of head h
       of sequence b in layer l: that row's attention output passes no gradient into the
       attention core of that head (its dO row is taken as 0): no dQ row, and no
       contribution to dK, dV of the keys it attends to; those rows are not computed. The
       rest of the network (output projection, residual stream, FFN, the other heads) gets
       its full gradient.
     frozen (L,H) 1/0 or NULL: a frozen head's attention backward is not computed at all,
       nor the backward of its Q/K/V rows of the qkv weight and its columns of the output
       projection: their gradients stay 0 and no gradient flows through the head into the
       residual stream. (The optimiser must also leave those slices alone: see
       mdl_frozen_copy.)
     an additive prior (MDL_PRIOR_RPA / ERA; issue 46 item 3): the (T,T) bias gradient the
       prior's backward (tau_att, pos_beta, the memberships, the ERA parameters) consumes
       is the kept rows' logit gradients dS summed over the sequences and the heads not
       frozen, exactly what the dense backward gives with the gated rows' output
       gradients zeroed; the gated backward sums it per head in sequence order, then over
       the heads in head order (independent of the thread count).
   Needs softmax attention without gac_tau or the entropy band (MDL_EINVAL).
   Copies keep and frozen. On a CUDA model the gating is a row mask uploaded here: the
   pruned rows' and frozen heads' output gradients are zeroed before the dense device
   attention backward (which then gives them no dS, so no bias gradient either), and the
   frozen heads' projection slices are skipped as on the CPU.
   The gradients are the gated backward's (rounding aside); the attention-core FLOPs are
   not saved there (mdl_gate_counts still counts what the gating would skip). */
int mdl_set_gating(mdl_model *m, const unsigned char *keep, const unsigned char *frozen);
/* keep and frozen from CEAS: per layer l, ceas_gate_scores (the normalised score beta/beta*,
   beta = the head's logit scale) of the last training forward's gate_rows, then
   ceas_token_mask(t_gate, q, m_min) with the controller's ceas_t_gate(cs),
   ceas_keep_q_at(&cs->cfg, cs->step), cs->cfg.m_min; frozen = cs->frozen (NULL: no head
   freezing). token_gating 0: keep NULL (heads only). Then mdl_set_gating. The last forward
   must have had want_gate_rows (when token_gating is 1). */
int mdl_ceas_gating(mdl_model *m, const ceas_state *cs, int token_gating, int head_gating);
/* FLOP accounting of the last training forward + backward (nominal causal costs as in
   mdl_flops_per_token: a query row i of a head costs 8 D (i+1) FLOPs of attention backward;
   a frozen head saves 16 B T C D FLOPs of its Q/K/V/O projection backward). */
typedef struct mdl_gate_counts {
    double attn_bwd_dense;    /* attention-core backward FLOPs of the step without gating */
    double attn_bwd_skipped;  /* of which not computed (pruned rows, frozen heads) */
    double proj_bwd_skipped;  /* Q/K/V/O projection backward FLOPs not computed (frozen) */
    double gate_overhead;     /* FLOPs the forward spent on CEAS statistics (the softmax pass's
                                 moments for gate rows or observables, the row conversion) */
    long long rows;           /* (l,b,h,i) query rows of the step */
    long long rows_pruned;    /* rows pruned by the token mask in heads that are not frozen */
    long long rows_frozen;    /* rows of frozen heads */
    int heads_frozen;         /* frozen (l,h) */
} mdl_gate_counts;
int mdl_gate_counts_get(const mdl_model *m, mdl_gate_counts *out);
/* The parameter floats of frozen heads (Q/K/V rows of blocks.l.attn.qkv.weight, columns of
   blocks.l.attn.proj.weight): mdl_frozen_floats counts them; mdl_frozen_copy copies them
   from buf (a parameter-shaped buffer: params, AdamW moments) into compact (restore 0) or
   back (restore 1). frozen (L,H). buf lives on the model's device (MDL_EINVAL otherwise);
   compact may be host or device memory (device buffers: one tk_copy per run). */
size_t mdl_frozen_floats(const mdl_model *m, const unsigned char *frozen);
int mdl_frozen_copy(const mdl_model *m, const unsigned char *frozen, float *buf, float *compact,
                    int restore);

/* Token-by-token decoding (issue 42; the CPU model and a device model: see "On a device"
   below). A cache of every layer's keys (rotated
   with RoPE) and values for max_batch independent slots of up to max_len positions each;
   each call runs the new tokens only through the blocks and gives the logits of the full
   causal forward at those positions (mdl_forward's math: the same components, the same
   RoPE angles; the attention of a new row over its slot's cached keys in double
   accumulation, so agreement is to rounding, not bits). The parameters are read at each
   call (load or change them between calls freely; cached keys stay those of the weights
   they were computed with), except the prior's and GAC's tau (taken at mdl_decode_init).
   On a device (a model of mdl_create_on(..., MDL_DEVICE_CUDA, ...)): the same code, its
   per-row work through exctx.h's ex_dec_* ops (CUDA bodies in exctx.cuh); the caches,
   the slot and position tables, the temperatures and B(W) (RPA and ERA built by the
   device priors, the fixed priors on the host and uploaded) live in device memory; each
   call copies the rows' token ids, slots and positions to the device and only the logits
   asked for back (a MoE FFN also routes on host copies, as in its forward). It covers
   what the CPU decode covers and the device model builds: softmax attention with or
   without a prior, polar attention (polar_decode_cuda over the slots' cache blocks; its
   Canon layers' rings one thread per channel, the gate per channel and the biases), the
   gated-delta channel (gd_step_cuda on the slots' states, one row at a time), the causal
   and the gated convolutions (their rings, one thread per channel); the device's own
   refusal table (mdl_decode_device_limit) is empty today. Checked against the CPU decode
   and forward in the CUDA simulation only (tests/parity_model.cu), never on a GPU.
   Priors (RPA, ERA, sinusoid, relative). B(T) depends on the length T, and a forward of T
   tokens gives every row t the row t of B(T): a token's hidden states, so the keys and
   values cached from them, depend on the length of the forward they came from. Decoding
   fixes one length, the window W = max_len of mdl_decode_init: every token at position t
   (in any slot) gets row t of B(W), the bias an evaluation forward of W tokens gives it.
   So a sequence of n <= W tokens decodes as the first n rows of a W-token forward (any
   tokens after them: the attention is causal), to rounding; a forward of just its n tokens
   uses B(n) instead and differs by design (for ERA, whose blocks are fractions of the
   length, and for RPA, whose Sinkhorn plan sees the whole length). With W = max_T, the
   length the model trained at, decoding scores a text as evaluation does at max_T. B(W) is
   built at mdl_decode_init (RPA from the running statistics, ERA from the layers'
   parameters, no warm-in) and kept: call mdl_decode_init again after changing them. It
   takes (L or 1) * W * W * 4 bytes (RPA, ERA per layer; the fixed priors one).
     mdl_decode_supports  MDL_OK, or MDL_EINVAL and a sentence: decoding covers softmax
                          attention with or without a prior, learned / rotary / no positions,
                          LayerNorm / RMSNorm, GELU / squared-ReLU MLP or fuzzy MoE, the
                          memberships, residual and value gates (the value gate's causal
                          mean from a per-slot cache of its pre-activations), gac_tau,
                          per-head temperatures; polar attention (polar.h's polar_decode
                          over the slot's keys, one cache block per slot, GQA, window);
                          the gated-delta channel (gdelta.h's gd_step on a per-slot state,
                          in place; with mem_qkv shared on the polar layer's q after its
                          norm and Canon and its cached k, v of the row); the causal convolution (a ring of the slot's last K
                          norm outputs); the gated short convolution of cfg.layer_pattern's
                          'c' layers (a ring of the slot's last lfm_k values of y = B x).
                          It refuses what mdl_decode_limit lists (one table:
                          the value gate with more than 256 heads)
     mdl_decode_limit     the i-th refused configuration as a phrase, NULL past the last
     mdl_decode_supports_on  mdl_decode_supports for a model on device (MDL_DEVICE_CPU or
                          MDL_DEVICE_CUDA): on CUDA also what mdl_decode_device_limit lists
     mdl_decode_device_limit  the i-th configuration decoding refuses on a device model
                          beyond mdl_decode_limit's, NULL past the last (none today)
     mdl_decode_init      allocates the cache and scratch once (1 <= max_batch <= 65536,
                          1 <= max_len <= max_T); *cache_bytes (may be NULL) = the cache
                          size: (2 C (+ H with value_gate)) * L * max_batch * max_len * 4
                          bytes (K/V), + L * max_batch * Hm * Dk * Dk * 4 (memory states)
                          + L * max_batch * K * C * 4 (convolution ring) + L * max_batch *
                          lfm_k * C * 4 (the gated convolution's rings, with a 'c' in
                          cfg.layer_pattern; every layer's K/V cache is kept). Every slot
                          starts empty; a second call replaces the first. Refuses an
                          unsupported configuration (mdl_decode_supports_on for the model's
                          device). On a device the cache and scratch are device memory.
     mdl_decode_set_temp  per-head temperature multipliers (L,H) (NULL: 1) times
                          attn_temp_mul, as mdl_opts.head_temp / attn_temp_mul in a forward
     mdl_decode_reset     empties one slot (the others keep their state)
     mdl_decode_len       live length of a slot, -1 for a bad argument
     mdl_decode_prefill   appends tokens[0..n) to slot's sequence (n >= 1, its length +
                          n <= max_len); logits_out (caller-owned, may be NULL: cache only)
                          gets (n,V) logits with all_logits 1, else the last row's (V)
     mdl_decode_step      one new token per slot: slots[i] (distinct, each with room) takes
                          tokens[i]; logits_out (nslots,V). Slots of any live lengths, in
                          any order and subset; a slot not listed keeps its state
     mdl_decode_free      frees the cache (mdl_destroy does too)
   Errors: MDL_EINVAL (NULL, not initialised, a repeated slot, refused config), MDL_ERANGE
   (slot out of range, no room, token id outside [0, vocab)) with mdl_last_error(m); a
   failed call leaves every slot's length unchanged (arguments are checked before anything
   runs; after an internal failure, reset a slot with the memory channel: its state is
   updated in place). */
int mdl_decode_supports(const mdl_config *cfg, char *err, size_t errlen);
const char *mdl_decode_limit(int i);
int mdl_decode_supports_on(const mdl_config *cfg, int device, char *err, size_t errlen);
const char *mdl_decode_device_limit(int i);
int mdl_decode_init(mdl_model *m, int max_batch, int max_len, size_t *cache_bytes);
size_t mdl_decode_cache_bytes(const mdl_model *m);
int mdl_decode_set_temp(mdl_model *m, const float *head_temp, float attn_temp_mul);
int mdl_decode_reset(mdl_model *m, int slot);
int mdl_decode_len(const mdl_model *m, int slot);
int mdl_decode_prefill(mdl_model *m, int slot, const int *tokens, int n, float *logits_out, int all_logits);
int mdl_decode_step(mdl_model *m, const int *slots, const int *tokens, int nslots, float *logits_out);
void mdl_decode_free(mdl_model *m);

/* Model FLOPs of one training step (forward + backward) per token at context T: the
   figure MFU uses (matmuls, attention at its causal cost, head). */
double mdl_flops_per_token(const mdl_config *cfg, int T);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_MODEL_H */
