/* layers.h - pluggable block components of the attnkit language model (examples/common):
   the fuzzy mixture-of-experts FFN (seed 000 Listing 5, §3, §6.2), the polar attention
   mixer (seed 002 §3.2, built on polar.h), the gated-delta memory channel (seed 002
   §3.3, built on gdelta.h), the dense MLP FFNs (GELU, squared-ReLU gated), LFM2's gated
   short convolution (seed 002 §3.1's conv layers, section 7 below), the membership
   gates (seed 000's residual and value gates, section 8) and the memberships themselves
   (section 9, on era.h). Each is a
   self-contained layer with forward and backward; model.c plugs them into its pre-norm
   blocks through the generic table (lyr_kind, at the end). fp32, on tensor.h: CPU or a
   CUDA device, chosen by the device context (exctx.h). License: MIT.

   PROTOCOL (every layer kind X in {moe, polar, gdelta, mlp, norm, conv, lfm, resgate, vgate,
             memb})
     lyr_X_params(d, out, cap)       the parameter tensors, in order: suffix (the model
                                     names them "blocks.<l>.<component>.<suffix>"), shape,
                                     decay flag. Returns the count (<= cap) or < 0.
     lyr_X_init(d, P, rng, std)      P[i] points at tensor i (numel from its shape);
                                     deterministic for an rng state.
     lyr_X_saved_floats(d, B, T)     floats forward keeps for backward ("saved"); the
                                     same buffer (same address) must reach backward.
     lyr_X_work_floats(d, B, T)      scratch floats any call may overwrite ("work").
                                     For polar and gdelta it depends on the OpenMP thread
                                     count at the time of the call (keep it unchanged).
     lyr_X_fwd(ctx, ...)             writes the outputs and fills saved, on ctx's device.
     lyr_X_bwd(ctx, ...)             ACCUMULATES (+=) into G[i] (parameter gradients, same
                                     order as P) and into the input gradients.
     lyr_X_forward / lyr_X_backward  (moe, polar, gdelta) the same without a context: the
                                     device found from the buffers (drop-in form).
     lyr_kind_X                      the generic table of all the above (lyr_kind, lyr_io):
                                     the model holds a kind and its dims per block slot.
     A new kind: its functions and its lyr_kind in layers.c, the declarations here; the
     model picks it for a slot in mdl_create_on.
     lyr_moe_host_floats(d, B, T)    the MoE's host scratch ("host"; device path). The
                                     gated-delta kind's host floats hold its forward's copy
                                     of the saved header, read by its backward there (the
                                     typed lyr_gdelta_* read it from saved instead).
     saved and work: float buffers the caller carves from its allocations; 64-byte
     alignment is best, 8-byte alignment is required. The layers allocate nothing in
     forward or backward (tk_sgemm's packing buffers inside tensor.h, and polar.h's
     optional distractor loss, do their own small allocations). forward and backward may
     run at any B, T whose saved/work counts fit the buffers (the counts grow with B and
     T), backward at the B, T of the forward that filled saved. Results are bit-identical
     run to run for a fixed thread count (the MoE noise does not depend on it at all).
     Shapes: B batch, T time, C model width, N = B*T rows; every activation is (B,T,C)
     row-major float32 unless stated.

   1. FUZZY MoE FFN (lyr_moe_*): out = sum_{e in top-k} y_e expert_e(x),
        expert_e(x) = W2_e gelu(W1_e x + b1_e) + b2_e     (GELU: tanh approximation)
        logits = clamp(mu gate^T, -30, 30)                  mu: (B,T,R) memberships
        y      = softmax((logits + g) / gumbel_tau)         g: Gumbel noise when train
        kept   = the top_k largest y (ties: the lower expert index)
        renorm = 1 (default): y_e / sum_{kept} y (the kept weights sum to 1).
                 Listing 5 divides by the sum over ALL experts (+1e-6), which is 1: its
                 kept weights sum to less than 1. renorm = 0 reproduces that.
      Gumbel noise: u from a counter-based hash of (seed, token index b*T+t, expert),
      clamped to [1e-6, 1-1e-6], g = -log(-log u): deterministic and independent of the
      thread count. Listing 5 also draws noise in evaluation; here only when train != 0.
      Pass a different seed per layer and per step. Experts run sparsely: the rows routed
      to expert e are gathered and go through one GEMM pair per expert. There is no
      dropout inside the experts (the model's residual dropout follows the layer).
      Statistic (lb_stat): mean_e (p_e - 1/E)^2, p = mean over tokens of the kept weights.
      lyr_moe_backward's lb_coef > 0 adds lb_coef * that statistic to the objective (its
      gradient flows into the routing); 0 = statistic only, as seed 000.
      Backward: dx, dmu (through the softmax of the kept weights; the top-k selection is
      piecewise constant and the clamp passes no gradient outside [-30, 30]), dgate and
      the expert weights.
      Params: gate (E,R) [no bias], w1 (E,F,C), b1 (E,F), w2 (E,C,F), b2 (E,C).
      Init: gate, w1 normal(0, std); w2 normal(0, std * resid_scale); biases 0.
      Devices: with device buffers the gather, the expert GEMMs and GELUs, the combine and
      their backward run on the CUDA device (tensor.h's routed ops); the routing stays on
      the host (see lyr_moe_forward). Results equal the CPU's to float rounding.

   2. POLAR ATTENTION MIXER (lyr_polar_*), seed 002 §3.2, eqs. 5-14:
        [q | k | v | gate] = xn Wqkv^T        q (B,H,T,D), k, v (B,Hkv,T,D) (GQA: query
                                              head h reads kv head h/(H/Hkv)), gate (B,T,H)
                                              "carried in the q projection" (eq. 14), or
                                              (B,T,H,D) with dims.gate CHANNEL
        q, k <- RMSNorm over D per head (no weight) when qk_norm (the paper normalises
                                              queries and keys before scoring)
        q, k, v <- x + canon(x) when canon_k > 0 (Canon layers, below)
        c, mag = polar_forward (streaming, FlashAttention-style: memory O(T), never T^2)
        out = W_o (c * sigmoid(gate)) + W_mu mag     (eq. 14: polar_assemble_forward's
                                              function, computed as two tk_sgemm GEMMs)
              (+ b_o + b_mu with dims.bias)
      The gate per channel and the biases (dims.gate CHANNEL, dims.bias 1) follow the
      authors' code (kreasof-ai/atma model/reference.py PolarAttention, read at d36673b):
      its q projection has 2 D outputs per head, chunked into [q_h | gate_h], and
      c * sigmoid(gate) multiplies channel by channel before proj; proj and mu_proj are
      Linear layers with biases. Here the gate rows sit after v, head-major: gate channel
      (h, j) is row (H + 2 Hkv) D + h D + j (the authors' row h 2D + D + j); their q, k and
      v projections also carry biases, which this layer does not have.
      Optional distractor loss (eq. 15; cfg.distractor_keys = R > 0, off by default):
      R random keys per (batch, kv head), N(0,1) per coordinate (the scale of an
      RMS-normed key) from the forward's seed, scored against the null sink; its value
      (already times cfg.distractor_weight) goes to stats->align_loss, and backward adds
      its gradient (upstream gradient 1): the model adds align_loss to its objective.
      Canon layers (seed 002 §3.2; dims.canon_k = K > 0, off by default): a depthwise causal
      convolution with a residual on each of q, k and v before scoring,
        x[b,h,t,j] <- x[b,h,t,j] + sum_{i<K, i<=t} w[h,i,j] x[b,h,t-i,j]
      one weight per channel (h, j), no bias. The details the paper leaves open follow the
      authors' code (kreasof-ai/atma model/blocks.py AtmaAttnBase, model/reference.py and
      train/model.py PolarAttention, read at d36673b): per channel (Conv1d with groups =
      channels), kernel 4 (their attention kernel_size; here a parameter), no bias, on q and
      k AFTER their RMSNorm and on the raw v, the residual x + conv(x), GQA's k and v
      convolved per kv head before they are shared, and PyTorch's Conv1d initialisation
      U(-1/sqrt(K), 1/sqrt(K)) (fan_in = K). Layout: canon_q.weight (H, K, D), canon_k.weight
      and canon_v.weight (Hkv, K, D), w[h,i,j] multiplying the input i steps back (the
      authors' Conv1d weight W (H D, 1, K) with left padding K - 1 maps as
      w[h,i,j] = W[h D + j, 0, K - 1 - i]). Both devices run it as tensor.h's causal depthwise
      convolution per (batch, head); saved keeps the convolutions' inputs (q, k after their
      norm, v). Decoding (model.c) keeps a ring of the last K inputs per slot and layer.
      Params: qkv.weight ((H + 2 Hkv) D + G, C) rows [q | k | v | gate] (G = H, or H D
      with the gate per channel), len_gain_raw (H), null_base (H), null_slope_raw (H),
      mag_beta_raw (H), v_null (H,D), o.weight (C,H D), mu.weight (C,H); with dims.bias
      o.bias (C) and mu.bias (C) (init 0, no decay); with dims.canon_k, after those,
      canon_q.weight (H,K,D), canon_k.weight (Hkv,K,D), canon_v.weight (Hkv,K,D) (no decay,
      init as above; index lyr_polar_canon_index). Init: qkv.weight normal(0, std); o.weight and mu.weight
      normal(0, std * resid_scale); the per-head scalars and v_null from polar_params_init:
      mag_beta_raw -1.5 and v_null 0 are the authors' code's values (the paper gives none),
      the other scalars as polar.h documents them.
      Devices: with device buffers the layer runs on the CUDA device: the projections as one
      GEMM per row block of qkv.weight ([q | k | v | gate]), the head transposes, the qk
      RMSNorm, the gate and eq. 14 and their backward with tensor.h's routed ops, the
      attention in polar.h's CUDA body (polar_forward / polar_backward route there; head
      dim D 32, 64, 96 or 128, else LYR_EFAIL). The statistics (mag_mean, null_mean) are
      summed on the host from copies of the saved rows, in the CPU's order (5 host reads per
      call on the device: the component table's forward asks for the distractor loss only
      and leaves them 0, as nothing in the model reads them). The CPU path
      keeps its fused host loops (double accumulation): the two agree to float rounding,
      not bit for bit. The distractor loss in training (train and cfg.distractor_keys > 0)
      is CPU-only: LYR_EINVAL on the device path, nothing written. work_floats includes
      polar_workspace_size_cuda in CUDA builds.

   3. GATED-DELTA MEMORY CHANNEL (lyr_gdelta_*), seed 002 §3.3, eqs. 16-25:
        [q | k | v] = xn Wqkv^T                (B,Hm,T,Dk) each (Dv = Dk)
        gamma, beta = sigmoid(xn W_gamma^T + b_gamma), sigmoid(xn W_beta^T + b_beta)
        r = gated-delta recurrence (gd_forward, chunked by default; q, k L2-normalised
            inside, cfg.normalize_qk)
        out = W_proj (RMSNorm(r) * norm_w * sigmoid(xn W_g^T + b_g))   (eq. 25:
            gd_readout_forward's function, computed with tk_sgemm GEMMs; RMSNorm per head
            over Dk with cfg.rms_eps)
      How seed 002 combines it (eq. 16): out = out_polar + out_mem, a plain sum with no
      learned mixing gate (the readout's sigmoid gate is the only gate); the model ADDS this
      layer's out to the attention output. W_proj starts at zero, so the channel is a no-op
      at step 0. Deviation (dims.qkv_shared 0, the default): seed 002 runs the memory on
      the attention layer's own q, k, v; here the channel projects its own (so it also
      composes with softmax attention), [q | k | v] = xn Wqkv^T above.
      Shared q/k/v (dims.qkv_shared 1, issue 43 item 5; the paper's form): no qkv.weight;
      lyr_gdelta_fwd_qkv takes q (B,Hm,T,Dk), k, v (B,Hkv,T,Dk) from the caller, and
      lyr_gdelta_bwd_qkv returns their gradients (+=) for the caller's backward. What the
      model passes follows the authors' code (kreasof-ai/atma model/reference.py
      PolarAttention.forward, `out + self.mem(x, q_t, k_t, v_t)`, and model/blocks.py
      TitansMemory, read at d36673b): the polar mixer's q, k, v exactly as polar_forward
      scores them (lyr_polar_qkv: after the per-head RMSNorm of q and k and after the Canon
      layers; polar has no RoPE), Hm = H heads of width Dk = D (their
      TitansMemory(dim, num_heads, head_dim)), GQA's k and v repeated per query head (their
      repeat_interleave: memory head h reads kv head h / (Hm / Hkv); the backward sums the
      group's gradients into the kv head, heads in order), and the gradients flow into
      the attention's Canon weights and projections (lyr_polar_bwd_qkv adds them to the
      attention's own before its Canon / norm / projection backward). The gates (gamma,
      beta from xn, their biases), the gated-RMSNorm readout and proj stay the channel's;
      the recurrence still L2-normalises q and k (cfg.normalize_qk, as their torch path's
      F.normalize), so the RMSNorm before it changes nothing but rounding. The parameter
      list then starts at w_gamma (lyr_gdelta_param_base 0): 3 Hm Dk C parameters fewer.
      Not the authors': their w_gamma / w_beta / gate / proj are Linear layers with biases
      (here b_gamma, b_beta and g.bias only, proj without a bias, as in the own form).
      Params: qkv.weight (3 Hm Dk, C) (own form only), w_gamma (Hm,C), b_gamma (Hm),
      w_beta (Hm,C), b_beta (Hm), norm.weight (Dk), g.weight (Hm Dk, C), g.bias (Hm Dk),
      proj.weight (C, Hm Dk). Init: matrices normal(0, std), b_gamma = cfg.b_gamma_init
      (3.9), b_beta = cfg.b_beta_init (0), norm.weight 1, g.bias 0, proj.weight 0.
      Devices: with device buffers the whole layer runs on the CUDA device: the GEMMs, the
      gates, the readout and their backward with tensor.h's routed ops, the recurrence in
      gdelta.h's CUDA body (gd_forward / gd_backward route there; always the chunked form,
      its saved state kept in the caller's saved buffer). The CPU path keeps its fused host
      loops (gd_gates_forward / gd_gates_backward, the readout with double accumulation),
      so the two agree to float rounding, not bit for bit. cfg.gate_is_log is CPU-only
      (LYR_EINVAL on the device path). saved_floats and work_floats cover both paths (the
      work count includes gd_workspace_size_cuda in CUDA builds). The shared form's
      repeat and sum of the kv heads are ex_copy / ex_residual_fwd blocks on either device;
      the drop-in lyr_gdelta_forward / backward refuse it (LYR_EINVAL: use the _qkv forms
      with a context).

   DEVICE CONTEXT (exctx.h, issue 39): every layer has two entry points. lyr_X_fwd /
   lyr_X_bwd take an ex_ctx first: the buffers live on cx->device and every op runs there
   (exctx.h's dispatch, the CUDA bodies on cx->stream); nothing asks the driver where a
   pointer lives. The plain lyr_X_forward / lyr_X_backward are the drop-in form: they
   find the device from the buffers (tk_is_device), refuse a mix (LYR_EINVAL, nothing
   written) and call the context form. The model uses the context forms.

   ERRORS: LYR_OK 0; LYR_EINVAL (NULL pointer, bad dimension, NaN/Inf hyper-parameter);
   LYR_ENOMEM; LYR_EFAIL (a tensor.h / polar.h / gdelta.h call failed, e.g. a NaN/Inf
   activation refused by gdelta). lyr_strerror() names them. */
#ifndef ATTNKIT_LAYERS_H
#define ATTNKIT_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "tensor.h"
#include "polar.h"
#include "gdelta.h"
#include "exctx.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { LYR_OK = 0, LYR_EINVAL = -1, LYR_ENOMEM = -2, LYR_EFAIL = -4 };

#define LYR_MAX_PARAMS 16

/* How a parameter tensor starts: LAYER by the component's lyr_X_init (one rng for the
   component), the others tensor by tensor (the model draws each from its own stream). */
enum { LYR_INIT_LAYER = 0, LYR_INIT_ZERO, LYR_INIT_NORMAL, LYR_INIT_ONE,
       LYR_INIT_UNIFORM /* U(-init_arg, init_arg) */ };

typedef struct lyr_pspec {
    char suffix[48];
    int ndim;
    int shape[4];
    int decay;      /* 1: AdamW weight decay applies */
    int init;       /* LYR_INIT_*; LAYER (0) unless stated */
    float init_arg; /* NORMAL: the standard deviation; UNIFORM: the half-width */
} lyr_pspec;

const char *lyr_strerror(int err);
/* numel of a spec (product of its shape) */
size_t lyr_pspec_numel(const lyr_pspec *s);

/* ------------------------------------------------------------ fuzzy MoE */
enum { LYR_MOE_GATE = 0, LYR_MOE_W1, LYR_MOE_B1, LYR_MOE_W2, LYR_MOE_B2, LYR_MOE_NPARAMS };

typedef struct lyr_moe_dims {
    int C;            /* model width */
    int F;            /* expert hidden width (d_ff_mult * C) */
    int E;            /* experts, 4 */
    int top_k;        /* 2, 1..E */
    int R;            /* regimes (membership width) */
    float gumbel_tau; /* 0.5 */
    int renorm;       /* 1: kept weights renormalised to sum 1; 0: Listing 5 */
    float resid_scale;/* init std multiplier of w2 (e.g. 1/sqrt(2 L)), 1 */
} lyr_moe_dims;

/* Defaults above for these sizes. */
lyr_moe_dims lyr_moe_dims_make(int C, int F, int E, int top_k, int R);
int lyr_moe_validate(const lyr_moe_dims *d);
int lyr_moe_params(const lyr_moe_dims *d, lyr_pspec *out, int cap);
int lyr_moe_init(const lyr_moe_dims *d, float *const *P, tk_rng *rng, float init_std);
size_t lyr_moe_saved_floats(const lyr_moe_dims *d, int B, int T);
size_t lyr_moe_work_floats(const lyr_moe_dims *d, int B, int T);
/* Host scratch floats ("host": float-aligned host memory) the device path needs. */
size_t lyr_moe_host_floats(const lyr_moe_dims *d, int B, int T);
/* x: (B,T,C) normed input; mu: (B,T,R); out: (B,T,C) written; lb_stat: scalar or NULL
   (host). host: lyr_moe_host_floats floats of host memory, or NULL on the CPU path.
   DEVICE: x, mu, out, saved, work and every P[i] all device memory (tensor.h's
   tk_is_device) run the layer on the CUDA device; all host memory runs it on the CPU;
   a mix is LYR_EINVAL with nothing written. The routing (logits, noise, softmax, top-k,
   weights, per-expert row lists, lb_stat; in the backward the routing gradient) runs on
   the host in both cases, on host copies of mu and the gate on the device path: it is
   the same code, so both paths choose the same experts. The device path needs host
   (else LYR_EINVAL) and keeps the routing state in it from forward to backward: pass the
   SAME host buffer to the backward of that forward, untouched in between (one per layer
   whose backward is pending). The CPU path keeps everything in saved and ignores host. */
int lyr_moe_forward(const lyr_moe_dims *d, const float *const *P, const float *x,
                    const float *mu, float *out, float *saved, float *work, int B, int T,
                    int train, uint64_t seed, float *host, float *lb_stat);
/* dout: (B,T,C); dx: (B,T,C) += or NULL; dmu: (B,T,R) += or NULL; G[i] +=. dout, dx, dmu,
   saved, work, P[i], G[i] all on one side (as the forward's buffers); host: the forward's
   host buffer (device path; ignored on the CPU path). */
int lyr_moe_backward(const lyr_moe_dims *d, const float *const *P, float *const *G,
                     const float *dout, float *dx, float *dmu, const float *saved,
                     float *work, int B, int T, float *host, float lb_coef);
/* The same on the device of cx (every buffer there; host on the host), nothing asked of
   the driver about the buffers (see DEVICE CONTEXT at the top). */
int lyr_moe_fwd(const ex_ctx *cx, const lyr_moe_dims *d, const float *const *P, const float *x,
                const float *mu, float *out, float *saved, float *work, int B, int T, int train,
                uint64_t seed, float *host, float *lb_stat);
int lyr_moe_bwd(const ex_ctx *cx, const lyr_moe_dims *d, const float *const *P, float *const *G,
                const float *dout, float *dx, float *dmu, const float *saved, float *work, int B,
                int T, float *host, float lb_coef);

/* ------------------------------------------------------------ polar attention */
/* LYR_POLAR_NPARAMS: the tensors without biases; with dims.bias two more follow,
   LYR_POLAR_O_BIAS and LYR_POLAR_MU_BIAS; with dims.canon_k the three Canon weights follow
   those (q, k, v; the first at lyr_polar_canon_index). At most LYR_POLAR_NPARAMS_MAX + 3. */
enum { LYR_POLAR_QKV = 0, LYR_POLAR_LEN_GAIN, LYR_POLAR_NULL_BASE, LYR_POLAR_NULL_SLOPE,
       LYR_POLAR_MAG_BETA, LYR_POLAR_V_NULL, LYR_POLAR_O, LYR_POLAR_MU, LYR_POLAR_NPARAMS,
       LYR_POLAR_O_BIAS = LYR_POLAR_NPARAMS, LYR_POLAR_MU_BIAS, LYR_POLAR_NPARAMS_MAX };
enum { LYR_POLAR_GATE_HEAD = 0, LYR_POLAR_GATE_CHANNEL = 1 }; /* lyr_polar_dims.gate */

typedef struct lyr_polar_dims {
    int C;            /* model width */
    int H;            /* query heads; head dim D = C / H */
    int Hkv;          /* key/value heads, divides H (H: no GQA) */
    int qk_norm;      /* 1: RMSNorm q and k per head before scoring */
    float qk_norm_eps;/* 1e-6 */
    int gate;         /* LYR_POLAR_GATE_HEAD: one output gate per head, (B,T,H), H rows of
                         qkv.weight; LYR_POLAR_GATE_CHANNEL: one per channel, (B,T,H,D), H*D
                         rows (the authors' code) */
    int bias;         /* 1: o.bias and mu.bias (C) each on the output projections (the
                         authors' Linear layers); 0: none */
    int canon_k;      /* Canon layers' kernel K on q, k, v (0: none; the authors: 4), 0..64 */
    float resid_scale;/* init std multiplier of o.weight and mu.weight, 1 */
    polar_config cfg; /* polar_config_default(); window, tiles, distractor loss, ... */
} lyr_polar_dims;

typedef struct lyr_polar_stats {
    float align_loss; /* distractor loss (times its weight), 0 when off */
    float mag_mean;   /* mean magnitude channel over (B,H,T) */
    float null_mean;  /* mean null-sink weight w_iN over (B,H,T) */
} lyr_polar_stats;

lyr_polar_dims lyr_polar_dims_make(int C, int H);
int lyr_polar_validate(const lyr_polar_dims *d);
/* index of canon_q.weight among the parameters (canon_k, canon_v follow), or -1 without Canon */
int lyr_polar_canon_index(const lyr_polar_dims *d);
int lyr_polar_params(const lyr_polar_dims *d, lyr_pspec *out, int cap);
int lyr_polar_init(const lyr_polar_dims *d, float *const *P, tk_rng *rng, float init_std);
size_t lyr_polar_saved_floats(const lyr_polar_dims *d, int B, int T);
size_t lyr_polar_work_floats(const lyr_polar_dims *d, int B, int T);
/* xn: (B,T,C); out: (B,T,C) written; stats: NULL or filled (host). train only matters for
   the distractor loss (drawn and saved only when train and cfg.distractor_keys > 0).
   DEVICE: xn, out, saved, work and every P[i] all device memory run the layer on the CUDA
   device; all host memory runs it on the CPU; a mix is LYR_EINVAL with nothing written. */
int lyr_polar_forward(const lyr_polar_dims *d, const float *const *P, const float *xn,
                      float *out, float *saved, float *work, int B, int T, int train,
                      uint64_t seed, lyr_polar_stats *stats);
/* dout: (B,T,C); dxn: (B,T,C) += or NULL; G[i] +=. dout, dxn, saved, work, P[i], G[i] all
   on one side (else LYR_EINVAL, nothing written). */
int lyr_polar_backward(const lyr_polar_dims *d, const float *const *P, float *const *G,
                       const float *dout, float *dxn, const float *saved, float *work,
                       int B, int T);
/* The same on the device of cx. */
int lyr_polar_fwd(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P,
                  const float *xn, float *out, float *saved, float *work, int B, int T, int train,
                  uint64_t seed, lyr_polar_stats *stats);
int lyr_polar_bwd(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P,
                  float *const *G, const float *dout, float *dxn, const float *saved, float *work,
                  int B, int T);
/* The q (B,H,T,D), k, v (B,Hkv,T,D) the forward scored, inside saved (after the q/k RMSNorm
   and the Canon layers: what polar_forward read; the gated-delta channel's input with
   shared q/k/v). LYR_OK or LYR_EINVAL. */
int lyr_polar_qkv(const lyr_polar_dims *d, const float *saved, int B, int T, const float **q,
                  const float **k, const float **v);
/* lyr_polar_bwd with extra gradients of those scored q (B,H,T,D), k, v (B,Hkv,T,D) (each
   NULL: none) added to the attention's before the Canon / RMSNorm / projection backward
   (a second reader of q, k, v: the shared memory channel). */
int lyr_polar_bwd_qkv(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P,
                      float *const *G, const float *dout, float *dxn, const float *saved, float *work,
                      int B, int T, const float *gq, const float *gk, const float *gv);
/* Eq. 14 as the forward computes it (its last step; decoding calls it at T = 1 for the
   gate per channel): out (B,T,C) = z W_o^T + magT W_mu^T (+ o.bias + mu.bias with
   dims.bias), z (B*T, H*D) = c merged per token times sigmoid(gl) per head or per channel.
   c (B,H,T,D), mag (B,H,T), gl (B,T,G) (G = H, or H*D per channel); scratch z (B*T, H*D),
   magT (B*T, H), sg (B*T, G) (device only; NULL on the CPU), tmp (B*T, C) (with dims.bias;
   else NULL). All on cx's device. */
int lyr_polar_assemble(const ex_ctx *cx, const lyr_polar_dims *d, const float *const *P, const float *c,
                       const float *mag, const float *gl, float *out, float *z, float *magT, float *sg,
                       float *tmp, int B, int T);

/* ------------------------------------------------------------ gated-delta memory */
enum { LYR_GD_QKV = 0, LYR_GD_W_GAMMA, LYR_GD_B_GAMMA, LYR_GD_W_BETA, LYR_GD_B_BETA,
       LYR_GD_NORM, LYR_GD_G_W, LYR_GD_G_B, LYR_GD_PROJ, LYR_GD_NPARAMS };

typedef struct lyr_gdelta_dims {
    int C;            /* model width */
    int Hm;           /* memory heads */
    int Dk;           /* key = value width per head */
    float resid_scale;/* unused by init (proj.weight starts at 0); kept for symmetry, 1 */
    gd_config cfg;    /* gd_config_default(): chunked, chunk 32, gates as gamma */
    int qkv_shared;   /* 0 (lyr_gdelta_dims_make): own qkv.weight (the layer as before);
                         1: no qkv.weight, q, k, v come from the caller (the attention
                         mixer's scored q, k, v: lyr_gdelta_fwd_qkv / lyr_gdelta_bwd_qkv) */
    int kv_heads;     /* with qkv_shared: heads Hkv of the given k and v, divides Hm (memory
                         head h reads kv head h / (Hm / Hkv)); not read otherwise */
} lyr_gdelta_dims;

typedef struct lyr_gdelta_stats {
    float gamma_mean; /* mean retention gate */
    float beta_mean;  /* mean write strength */
} lyr_gdelta_stats;

lyr_gdelta_dims lyr_gdelta_dims_make(int C, int Hm, int Dk);
int lyr_gdelta_validate(const lyr_gdelta_dims *d);
/* The index in the layer's parameter list of LYR_GD_W_GAMMA: 1, or 0 with qkv_shared (its
   list has no qkv.weight: list tensor i is LYR_GD_W_GAMMA + i); -1 on bad dims. The list
   has LYR_GD_NPARAMS - 1 + that many tensors. */
int lyr_gdelta_param_base(const lyr_gdelta_dims *d);
int lyr_gdelta_params(const lyr_gdelta_dims *d, lyr_pspec *out, int cap);
int lyr_gdelta_init(const lyr_gdelta_dims *d, float *const *P, tk_rng *rng, float init_std);
size_t lyr_gdelta_saved_floats(const lyr_gdelta_dims *d, int B, int T);
size_t lyr_gdelta_work_floats(const lyr_gdelta_dims *d, int B, int T);
/* The readout's z (B*T, Hm*Dk) = RMSNorm(r) * norm_w * sigmoid(g) per token and head, r
   (B,Hm,T,Dk); first: g holds the gate pre-activations (made sigmoids in place) and rs
   (B*T*Hm) is computed, else both are read (the forward's and decoding's arithmetic). */
void lyr_gdelta_readout_z(const lyr_gdelta_dims *d, const float *r, float *g, float *rs, const float *nw, float *z,
                          int B, int T, int first);
/* RMSNorm of rows of length D in place, no weight: x <- x r, r = 1/sqrt(mean x^2 + eps)
   (in double) into rs (rows). Polar's q/k norm, in the forward and in decoding. */
void lyr_rms_rows(float *x, float *rs, size_t rows, int D, float eps);
/* The gated-delta channel's gates and readout on the context's device, as lyr_gdelta_fwd
   computes them (the decoding's per-row pieces): gates, beta (B,Hm,T) = sigmoid(xn W^T + b)
   (gd_gates_forward on the CPU; tmp: B*T*Hm floats, the device's); z (B,T,Hm*Dk) =
   RMSNorm(r) * norm_w * sigmoid(g) with g (B,T,Hm*Dk) pre-activations turned into
   sigmoid(g) in place, rs (B*T*Hm) (lyr_gdelta_readout_z on the CPU; t1, t2: B*T*Hm*Dk
   floats, the device's). LYR_OK or an LYR_E* code. */
int lyr_gdelta_gates(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P, const float *xn,
                     float *gates, float *beta, float *tmp, int B, int T);
int lyr_gdelta_readout(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *r, float *g, float *rs,
                       const float *nw, float *z, float *t1, float *t2, int B, int T);
/* xn: (B,T,C); out: (B,T,C) written (the model adds it to the attention output);
   train, seed: unused (no noise), kept for the protocol; stats: NULL or filled (host).
   DEVICE: xn, out, saved, work and every P[i] all device memory run the layer on the CUDA
   device; all host memory runs it on the CPU; a mix is LYR_EINVAL with nothing written. */
int lyr_gdelta_forward(const lyr_gdelta_dims *d, const float *const *P, const float *xn,
                       float *out, float *saved, float *work, int B, int T, int train,
                       uint64_t seed, lyr_gdelta_stats *stats);
/* dout: (B,T,C); dxn: (B,T,C) += or NULL; G[i] +=. dout, dxn, saved, work, P[i], G[i]
   all on the side of the forward that filled saved (else LYR_EINVAL, nothing written). */
int lyr_gdelta_backward(const lyr_gdelta_dims *d, const float *const *P, float *const *G,
                        const float *dout, float *dxn, const float *saved, float *work,
                        int B, int T);
/* The same on the device of cx. With dims.qkv_shared these two are LYR_EINVAL (the layer
   needs its q, k, v: the _qkv forms below). */
int lyr_gdelta_fwd(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P,
                   const float *xn, float *out, float *saved, float *work, int B, int T,
                   int train, uint64_t seed, lyr_gdelta_stats *stats);
int lyr_gdelta_bwd(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P,
                   float *const *G, const float *dout, float *dxn, const float *saved,
                   float *work, int B, int T);
/* dims.qkv_shared (else LYR_EINVAL): the channel on given q (B,Hm,T,Dk), k, v
   (B,Hkv,T,Dk) (Hkv = dims.kv_heads; memory head h reads kv head h / (Hm / Hkv), the
   authors' repeat_interleave), read in the forward only (copied into saved); P, G: the
   list without qkv.weight (lyr_gdelta_param_base). The backward ACCUMULATES the gradients
   of q, k, v into dq (B,Hm,T,Dk), dk, dv (B,Hkv,T,Dk) (each NULL: not wanted; the kv
   heads' sum over their query heads in head order), and dxn gets only the gates' and the
   readout gate's part. All on cx's device. */
int lyr_gdelta_fwd_qkv(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P,
                       const float *xn, const float *q, const float *k, const float *v, float *out,
                       float *saved, float *work, int B, int T, int train, uint64_t seed,
                       lyr_gdelta_stats *stats);
int lyr_gdelta_bwd_qkv(const ex_ctx *cx, const lyr_gdelta_dims *d, const float *const *P,
                       float *const *G, const float *dout, float *dxn, float *dq, float *dk,
                       float *dv, const float *saved, float *work, int B, int T);

/* ------------------------------------------------------------ MLP FFN */
/* 4. MLP FFN (lyr_mlp_*), the model's dense FFNs:
        GELU   out = gelu(x W1^T + b1) W2^T + b2          fc.weight (F,C), fc.bias (F),
                                                          proj.weight (C,F), proj.bias (C)
        RELU2  out = (relu(x W1^T)^2 * (x W3^T)) W2^T     fc.weight (2F,C) = [W1 | W3] (one
                                                          GEMM), proj.weight (C,F); no biases
      Init (pspec rules): fc.weight N(0, std), proj.weight N(0, proj_std), biases 0.
      saved: the hidden pre-activation and activation; work: their gradients. backward
      needs the forward's input x again (unchanged) and ACCUMULATES into dx (may be NULL).
      Either device through the context (tensor.h's ops; bit-identical to the CPU model's
      former inline MLP).
      GELU with a gain a (dims.gain not 0 or 1): out = gelu(a u) W2^T + b2, u = x W1^T + b1;
      the forward scales u in place (saved holds a u), the backward takes
      d u = a gelu'(a u) d act (tensor.h's tk_scale on either device; no new op).
      lyr_mlp_act_offset: where act(h) (N,F) (N = B T) starts in saved, in floats (the
      model reads the activations there for seed 004's output-entropy measurement). */
enum { LYR_MLP_GELU = 0, LYR_MLP_RELU2 = 1 }; /* rows of the FFN table (lyr_ffn, at the end);
                                                 any MLP row of it is a valid act */

typedef struct lyr_mlp_dims {
    int C, F;       /* model width, hidden width */
    int act;        /* an MLP row of the FFN table: LYR_MLP_GELU, LYR_MLP_RELU2, ... */
    float std;      /* init std of fc.weight */
    float proj_std; /* init std of proj.weight (the model: std / sqrt(2 L)) */
    float gain;     /* GELU input gain a (seed 004 section 6 (C)'s activation parameter):
                       act(u) = gelu(a u), u = x W1^T + b1; finite >= 0; 0 and 1 both mean
                       none (the plain GELU, bit for bit: no scaling runs, so a zeroed or
                       positional initialiser keeps the old layer). Rows without gain
                       (RELU2): 0 or 1 only */
} lyr_mlp_dims;

int lyr_mlp_validate(const lyr_mlp_dims *d);
int lyr_mlp_params(const lyr_mlp_dims *d, lyr_pspec *out, int cap);
int lyr_mlp_init(const lyr_mlp_dims *d, float *const *P, tk_rng *rng, float init_std);
size_t lyr_mlp_saved_floats(const lyr_mlp_dims *d, int B, int T);
size_t lyr_mlp_work_floats(const lyr_mlp_dims *d, int B, int T);
size_t lyr_mlp_act_offset(const lyr_mlp_dims *d, int B, int T); /* 0 on a bad argument */
int lyr_mlp_fwd(const ex_ctx *cx, const lyr_mlp_dims *d, const float *const *P, const float *x,
                float *out, float *saved, int B, int T);
int lyr_mlp_bwd(const ex_ctx *cx, const lyr_mlp_dims *d, const float *const *P, float *const *G,
                const float *x, const float *dout, float *dx, const float *saved, float *work,
                int B, int T);

/* ------------------------------------------------------------ norms */
/* 5. NORMS (lyr_norm_*): LayerNorm out = (x - mean) rstd * weight + bias, or RMSNorm
      out = x rstd * weight (rstd over the C channels of a row, eps inside the root), with
      tensor.h's kernels. Params: weight (C) [init 1], LayerNorm bias (C) [init 0], no
      decay. saved: the rows' mean and rstd; no work. backward needs the forward's input
      x again and ACCUMULATES into dx. */
typedef struct lyr_norm_dims {
    int C;
    int rms;        /* 0 LayerNorm, 1 RMSNorm */
    float eps;      /* the model: 1e-5 */
} lyr_norm_dims;

int lyr_norm_params(const lyr_norm_dims *d, lyr_pspec *out, int cap);
size_t lyr_norm_saved_floats(const lyr_norm_dims *d, int B, int T);
int lyr_norm_fwd(const ex_ctx *cx, const lyr_norm_dims *d, const float *const *P, const float *x,
                 float *out, float *saved, int B, int T);
int lyr_norm_bwd(const ex_ctx *cx, const lyr_norm_dims *d, const float *const *P, float *const *G,
                 const float *x, const float *dout, float *dx, const float *saved, int B, int T);

/* ------------------------------------------------------------ causal convolution */
/* 6. CAUSAL CONVOLUTION (lyr_conv_*): depthwise, with a residual,
        out[b,t,c] = x[b,t,c] + sum_{j<K, j<=t} w[j,c] x[b,t-j,c]
      (tensor.h's tk_causal_dwconv_forward accumulating onto a copy of x). Params: weight
      (K,C) [init 0, no decay]. No saved state, no work: backward needs the forward's x
      again; it ACCUMULATES dx += dout + sum_j w[j] dout[t+j] (t+j < T) and
      G[0][j,c] += sum_{b,t>=j} dout[b,t,c] x[b,t-j,c] (double per (j,c), a fixed order). */
typedef struct lyr_conv_dims {
    int C, K;       /* model width, kernel length (1..64) */
} lyr_conv_dims;

int lyr_conv_params(const lyr_conv_dims *d, lyr_pspec *out, int cap);
int lyr_conv_fwd(const ex_ctx *cx, const lyr_conv_dims *d, const float *const *P, const float *x, float *out,
                 int B, int T);
int lyr_conv_bwd(const ex_ctx *cx, const lyr_conv_dims *d, const float *const *P, float *const *G, const float *x,
                 const float *dout, float *dx, int B, int T);

/* ------------------------------------------------------------ LFM2 gated short convolution */
/* 7. LFM2 GATED SHORT CONVOLUTION (lyr_lfm_*), the sequence mixer of LFM2 and of ATMA's
      conv layers (seed 002 §3.1: 12 of its 16 blocks), a block mixer like attention:
        [B | C' | x] = xn W_in^T (+ b_in)    three (N,C) streams, W_in (3C,C) rows [B | C' | x]
        y  = B * x                          (input gate, elementwise)
        z[b,t,c] = sum_{j<K, j<=t} w[j,c] y[b,t-j,c]   (causal depthwise, kernel K, no bias)
        o  = C' * z                         (output gate, elementwise)
        out = o W_out^T (+ b_out)           W_out (C,C)
      No activation anywhere (no SiLU on the gates, none after the conv).
      Sources. LFM2 (Liquid AI; the Hugging Face transformers Lfm2ShortConv, config
      conv_L_cache = 3, conv_bias = False): the chunk order B, C, x of in_proj's output, B
      gating x before the conv, C gating after, kernel 3, no conv bias; with conv_bias False
      LFM2 has no biases on in_proj / out_proj either. ATMA (kreasof-ai/atma: train/model.py
      LFM2Conv, model/blocks.py AtmaConvBase, read at d36673b): the same order and gates,
      kernel 3 (conv_kernel_size), Conv1d with bias=False, but in_proj and out_proj are its
      Linear with bias=True. dims.bias chooses: 1 (ATMA's, the model's) or 0 (LFM2's).
      The kernel layout is tensor.h's (K,C): w[j] multiplies the input j steps back;
      PyTorch's Conv1d weight (C,1,K) with left padding K-1 maps as w[j,c] = W[c,0,K-1-j].
      Init (pspec rules; the model draws each tensor from its own stream): in_proj.weight
      N(0, std), out_proj.weight N(0, proj_std) (the model: std / sqrt(2 L), as the other
      residual projections), biases 0 (the library's rule; PyTorch's Linear default, which
      ATMA keeps, draws them uniform), conv.weight U(-1/sqrt(K), 1/sqrt(K)) (PyTorch's
      Conv1d default with fan_in = K, which ATMA keeps).
      Params, in order: in_proj.weight (3C,C), [in_proj.bias (3C)], conv.weight (K,C),
      out_proj.weight (C,C), [out_proj.bias (C)].
      saved: B, C', x, z (4 N C floats); work: 4 N C floats (y = B x and o = C' z live
      there in the forward; the backward recomputes them instead of keeping them). backward needs the forward's
      input xn again (io.x) and ACCUMULATES into dxn (may be NULL) and G.
      Devices: written only with exctx.h's ops (three GEMMs, one per row block of W_in;
      tensor.h's tk_rowscale with C = 1 as the elementwise product; the causal depthwise
      conv), so the same code runs on either device, bit-identical run to run.
      Decoding (model.c) keeps a ring of the last K values of y per slot and layer. */
typedef struct lyr_lfm_dims {
    int C, K;       /* model width, kernel length (1..64; LFM2 and ATMA: 3) */
    int bias;       /* 1: in_proj and out_proj carry biases (ATMA); 0: none (LFM2) */
    float std;      /* init std of in_proj.weight */
    float proj_std; /* init std of out_proj.weight */
} lyr_lfm_dims;

int lyr_lfm_validate(const lyr_lfm_dims *d);
int lyr_lfm_params(const lyr_lfm_dims *d, lyr_pspec *out, int cap);
int lyr_lfm_init(const lyr_lfm_dims *d, float *const *P, tk_rng *rng, float init_std);
size_t lyr_lfm_saved_floats(const lyr_lfm_dims *d, int B, int T);
size_t lyr_lfm_work_floats(const lyr_lfm_dims *d, int B, int T);
/* xn: (B,T,C); out: (B,T,C) written (must not alias xn); saved, work: lyr_lfm_saved_floats /
   work_floats floats; all on cx's device */
int lyr_lfm_fwd(const ex_ctx *cx, const lyr_lfm_dims *d, const float *const *P, const float *xn,
                float *out, float *saved, float *work, int B, int T);
/* dout: (B,T,C); dxn: (B,T,C) += or NULL; G[i] +=; xn and saved as the forward left them */
int lyr_lfm_bwd(const ex_ctx *cx, const lyr_lfm_dims *d, const float *const *P, float *const *G,
                const float *xn, const float *dout, float *dxn, const float *saved, float *work,
                int B, int T);

/* ------------------------------------------------------------ the membership gates */
/* 8. THE MEMBERSHIP GATES (seed 000 §3: the tiny recipe's residual and value gates), two
      kinds on the memberships mu (B,T,R) the model computes per block (era.h):
      RESIDUAL GATE (lyr_resgate_*): eta (B,T) = sigmoid(mu w^T), w (1,R); the model scales
        both residual branches of its block by it (x + eta * branch). forward reads io->mu
        and writes eta into io->saved (saved_floats N = B T; the model reads the gate
        there; io->out unused). backward: io->dout = d eta (N), G[0] +=, io->dmu +=
        (dz = deta eta (1 - eta) in io->work, N floats).
        Params: weight (1,R) [no decay, init U(-1/sqrt R, 1/sqrt R)]; the model names it
        "blocks.<l>.res_gate.weight".
      VALUE GATE (lyr_vgate_*): g (B,T) = mean_h sigmoid(mean_{s<=t} (mu_s W^T)_h), W (H,R),
        out = g * x (x: the attention output (B,T,C), out a separate buffer). forward:
        z = mu W^T (N,H) in io->work, then saved = [the causal mean's sigmoids (N,H) | g
        (N)]. backward: dg = rowdot(dout, x), then dx = g * dout WRITTEN, not accumulated
        (dx may be dout itself: the model scales its branch gradient in place), dz through
        the causal mean gate (work: (N, H + 1), zeroed here), G[0] +=, io->dmu +=.
        Params: value_gamma.weight (H,R) [no decay, init U(-1/sqrt R, 1/sqrt R)]; the model
        names it "blocks.<l>.attn.value_gamma.weight" (its kind name is "attn").
      Both: the model's arithmetic before they became kinds, op for op (CPU training is
      bit-identical); either device through the context (exctx.h's ops). */
typedef struct lyr_gate_dims {
    int C, H, R;    /* model width, heads (value gate), memberships */
} lyr_gate_dims;

/* 9. THE MEMBERSHIPS (lyr_kind_memb; seed 000 §3, era.h's era_membership_*): mu (B,T,R),
      the fuzzy memberships of each token's block input x (B,T,C) in R regimes, through
      zproj = x W^T + b (B,T,C) and the Gaussian centres (era.h's definition, its config
      *cfg: entropy floor, logit clamp, detach). forward: x -> saved = [mu (N,R) | zproj
      (N,C), at a 16-float boundary]; the model reads mu there; io->sums (NULL: none) gets
      the statistics added as 3 device doubles (era_membership_forward_sums: no host wait).
      backward: io->dout = d mu (N,R) (every reader's gradient, summed by the caller),
      io->coef = the entropy penalty's d/dH (era.h's dentropy), io->dx (B,T,C) +=, G +=;
      work: era_membership_workspace_size bytes.
      Params: proj.weight (C,C) [decay, U(-1/sqrt C, 1/sqrt C)], proj.bias (C) [no decay,
      the same], centers (R,C) [no decay, N(0, 1/sqrt C)], log_sigma (R) [no decay, 0]; the
      model names them "blocks.<l>.mem.<suffix>". The model's arithmetic before it became a
      kind (CPU training bit-identical); either device. */
typedef struct lyr_memb_dims {
    int C, R;
    const era_rpa_config *cfg; /* the membership settings (the model's, set per forward) */
} lyr_memb_dims;

/* ------------------------------------------------------------ the generic protocol */
/* One table per component kind, so a caller (the model) holds a kind and its dims and
   never names the kind again: adding a kind is its functions and a table here. The
   arguments of forward and backward travel in lyr_io (unused fields ignored). */
typedef struct lyr_io {
    const float *const *P;  /* parameters (lyr_X_params order) */
    float *const *G;        /* their gradients (backward, +=) */
    const float *x;         /* (B,T,C) input (forward; backward: the same, unchanged) */
    const float *mu;        /* (B,T,R) memberships, for kinds that read them (MoE) */
    float *out;             /* (B,T,C) forward output, written */
    const float *dout;      /* (B,T,C) backward: gradient of out */
    float *dx, *dmu;        /* backward: input gradients, += (NULL: not wanted) */
    float *saved, *work;    /* lyr_X_saved_floats / work_floats on the context's device */
    float *host;            /* host_floats of host memory (MoE, gated delta on a device), or
                               NULL (then the kinds read what they need from the device) */
    int B, T, train;
    int layer;              /* the caller's block index (kinds whose per-layer state lives
                               with the caller: the model's softmax attention); 0 else */
    uint64_t seed;          /* noise of this forward (MoE Gumbel) */
    float coef;             /* backward: weight of the kind's statistic in the loss (MoE lb) */
    float stat;             /* forward, out: the kind's statistic (MoE load balance), else 0 */
    double *sums;           /* forward: kinds that add statistics to sums in the context's
                               memory (the memberships: 3 doubles), or NULL */
    /* the gated-delta channel with qkv_shared: the mixer's scored q, k, v (forward) and
       their gradients (backward, +=); polar backward: gq, gk, gv extra gradients of its
       scored q, k, v (lyr_polar_bwd_qkv). NULL (zeroed io): none */
    const float *mq, *mk, *mv;
    float *dmq, *dmk, *dmv;
    const float *gq, *gk, *gv;
} lyr_io;

typedef struct lyr_kind {
    const char *name;       /* the tensors' name prefix ("mlp", "moe", "attn", "gdelta", "ln") */
    int (*params)(const void *d, lyr_pspec *out, int cap);
    int (*init)(const void *d, float *const *P, tk_rng *rng, float init_std);
    size_t (*saved_floats)(const void *d, int B, int T);
    size_t (*work_floats)(const void *d, int B, int T);
    size_t (*host_floats)(const void *d, int B, int T);
    int (*forward)(const ex_ctx *cx, const void *d, lyr_io *io);
    int (*backward)(const ex_ctx *cx, const void *d, lyr_io *io);
} lyr_kind;

extern const lyr_kind lyr_kind_mlp;    /* dims: lyr_mlp_dims */
extern const lyr_kind lyr_kind_moe;    /* dims: lyr_moe_dims; mu, host, seed, coef; stat: lb */
extern const lyr_kind lyr_kind_polar;  /* dims: lyr_polar_dims; seed; stat: the distractor loss */
extern const lyr_kind lyr_kind_gdelta; /* dims: lyr_gdelta_dims */
extern const lyr_kind lyr_kind_norm;   /* dims: lyr_norm_dims (init: the pspec rules) */
extern const lyr_kind lyr_kind_conv;   /* dims: lyr_conv_dims (init: the pspec rule) */
extern const lyr_kind lyr_kind_lfm;    /* dims: lyr_lfm_dims (init: the pspec rules) */
extern const lyr_kind lyr_kind_resgate; /* dims: lyr_gate_dims; mu; saved: eta (section 8) */
extern const lyr_kind lyr_kind_vgate;  /* dims: lyr_gate_dims; mu; dx written (section 8) */
extern const lyr_kind lyr_kind_memb;   /* dims: lyr_memb_dims; saved: mu, zproj; sums (section 9) */

/* ------------------------------------------------------------ the FFN kinds */
/* THE FFN TABLE: every FFN a model can put in its blocks, one row each, indexed by
   mdl_config.ffn (MDL_FFN_GELU 0, MDL_FFN_RELU2 1, MDL_FFN_MOE 2, then any later rows by
   index: lyr_ffn_find(name)). Everything outside layers.c derives from it: the --ffn
   flag's names (and so the checkpoint's "attnkit.config", which records the name), the
   model's validation, component, hidden width and FLOP count, maxent's shapes, decoding
   (the component's forward at B = 1). A row whose kind is lyr_kind_mlp is an activation
   of the dense MLP (lyr_mlp_dims.act = the row's index); its fields below say how the MLP
   runs it. Any other kind (the fuzzy MoE) is the component itself (the model builds its
   dims; the MLP fields are unused).
   ADDING AN MLP ACTIVATION: its two hooks and one row in layers.c (lyr__ffns); nothing
   else in examples/common changes.
   The MLP's first projection, by `in`:
     LYR_FFN_IN_PLAIN   h (N,F) = x W1^T (+ b1)                    fc.weight (F,C)
     LYR_FFN_IN_ROWS    h (N,2F) = x [W1 ; W3]^T, one GEMM: each row [a | b]
                                                                   fc.weight (2F,C)
     LYR_FFN_IN_BLOCKS  the same weight, two GEMMs: h = [a (N,F) ; b (N,F)], a = x W1^T
                        the first N F floats, b = x W3^T the next (for activations built
                        from elementwise ops over contiguous halves)
   then act (N,F) = act_fwd(h), out = act W2^T (+ b2), proj.weight (C,F).
   act_fwd(cx, act, h, N, F): writes act (N,F) from h (layout above; h unchanged).
   act_bwd(cx, dh, h, dact, N, F): dh (zero on entry, h's layout) += d act / d h . dact;
     dact (N,F) is scratch the hook may overwrite. */
enum { LYR_FFN_IN_PLAIN = 0, LYR_FFN_IN_ROWS = 1, LYR_FFN_IN_BLOCKS = 2 };

typedef struct lyr_ffn {
    const char *name;       /* the --ffn value and the checkpoint's record ("gelu") */
    const char *about;      /* one line for help and errors */
    const lyr_kind *kind;   /* &lyr_kind_mlp (an MLP activation) or the component itself */
    int in;                 /* MLP: LYR_FFN_IN_* */
    int bias;               /* MLP: fc.bias (F) and proj.bias (C) (with LYR_FFN_IN_PLAIN only) */
    int gain;               /* MLP: takes lyr_mlp_dims.gain (act(a u), the backward scales by a) */
    int width_num, width_den, width_round; /* hidden width F from the model's d_ff_mult * C:
                               round_up(floor(d_ff_mult C num / den), round) */
    int mats;               /* MLP: C x F weight matrices a token multiplies (FLOPs) */
    int (*act_fwd)(const ex_ctx *cx, float *act, const float *h, int N, int F);
    int (*act_bwd)(const ex_ctx *cx, float *dh, const float *h, float *dact, int N, int F);
} lyr_ffn;

int lyr_ffn_count(void);
const lyr_ffn *lyr_ffn_get(int i);        /* row i, or NULL outside [0, lyr_ffn_count()) */
int lyr_ffn_find(const char *name);       /* the row of name, or -1 (NULL or unknown) */
int lyr_ffn_is_mlp(int i);                /* 1: row i is an MLP activation, else 0 */
int lyr_ffn_width(int i, int d_ff_mult, int C); /* row i's hidden width F, or -1 (bad row,
                                             d_ff_mult or C < 1, or F over 1 << 22) */
/* the rows' names in index order, NULL-terminated (the --ffn flag's list) */
extern const char *const lyr_ffn_names[];

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_LAYERS_H */
