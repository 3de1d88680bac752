/* model.c - the decoder-only language model of the attnkit examples (see model.h).

   Architecture as built here (PyTorch-style tensor names in brackets):
     x0  = wte[ids] + wpe[t]                       ["wte" (V,C), "wpe" (max_T,C)]
           (pos ROPE: no wpe; softmax attention's q, k rotated per head after the split,
           tensor.h tk_rope; pos NONE: no positions at all)
     block l (pre-norm), x = its input (B,T,C):
       mu  = memberships(x) (seed 000 Listing 3: z = P x + b, Gaussian distances to R
             centres, softmax)                     ["blocks.l.mem.proj.weight" (C,C),
             only when the RPA prior, the fuzzy     "...mem.proj.bias" (C),
             MoE, res_gate or value_gate use it     "...mem.centers" (R,C), "...mem.log_sigma" (R)]
       eta = sigmoid(W_eta mu) (N,1) if res_gate   ["blocks.l.res_gate.weight" (1,R)], else 1
       n1  = norm1(x)                              ["blocks.l.ln1.weight" (C) (+ ".bias" LN)]
             with cfg.conv_k = K: n1 += depthwise causal conv of n1 over the last K
             positions (layers.h lyr_kind_conv)    ["blocks.l.conv.weight" (K,C), init 0]
       softmax attention: qkv = n1 Wqkv^T (one GEMM, no bias) ["blocks.l.attn.qkv.weight" (3C,C)]
             logits = q k^T / (sqrt(D) temp_h) + prior bias, causal softmax, merge heads,
             a = y Wo^T (no bias)                   ["blocks.l.attn.proj.weight" (C,C)]
             temp_h = attn_temp_mul * head_temp[l,h] (* tau_gac[l] with cfg.gac_tau, which
               also divides the prior bias: softmax((qk/sqrt(D) + B)/tau_gac), seed 003
               eq. 8; "blocks.l.attn.gac_tau" (1); its gradient through the temperature
               and the bias)
             RPA prior (era.h era_rpa_forward, warm-in = opts.prior_scale, learned
               per-layer tau_att and pos_beta; tau_att divides the prior only): training
               from the batch-mean memberships (seed 000) or, with prior_source RUNNING,
               from the running statistics; evaluation from the running statistics
               through a per-layer era_cache (B(T) built once per length and parameters)
                                                   ["blocks.l.attn.tau_att" (1), "...pos_beta" (1)]
             ERA prior (era.h era_era_forward, one (T,T) bias per length, times prior_scale)
                                                   ["blocks.l.attn.era.centers" (R_era),
                                                    "...era.log_sigma" (1), "...era.alpha" (1)]
             fixed priors SINUSOID / RELATIVE (seed 000's "sinusoid-only" / "relative-only"
               comparisons; era.h era_sinusoid_bias / era_relative_bias with cfg.fixed_prior,
               scale 1): one (T,T) bias shared by every layer and head, built once per length
               into a small cache (mdl__fixed_bias), times prior_scale; no tensors, no
               gradient, no tau_att (nothing learned: era.h's reading, and seed 000 gives
               them no temperature); gac_tau divides it as it divides any prior. CPU only.
             value gate (Listing 4): a *= mean_h sigmoid(mean_{s<=t} (W_gamma mu_s)_h)
                                                   ["blocks.l.attn.value_gamma.weight" (H,R)]
             NOTE: Listing 4 averages W_gamma mu over the whole sequence, which lets every
             position see the memberships of future tokens; here the mean runs over the
             prefix s <= t (causal), the only form a language model can use.
       gated short convolution (LFM2; the layers cfg.layer_pattern marks 'c', in place of
             the attention and of the memory channel; layers.h lyr_kind_lfm):
             [B | C' | x] = n1 W_in^T + b_in, y = B x, z = causal depthwise conv of y (width
             lfm_k, no bias), a = (C' z) W_out^T + b_out
                                                   ["blocks.l.lfm.in_proj.weight" (3C,C),
                                                    "...lfm.in_proj.bias" (3C),
                                                    "...lfm.conv.weight" (lfm_k,C),
                                                    "...lfm.out_proj.weight" (C,C),
                                                    "...lfm.out_proj.bias" (C)]
       x   = x + eta * dropout(a)
       n2  = norm2(x)                              ["blocks.l.ln2.weight" (+ ".bias")]
       f   = GELU MLP: gelu(n2 W1^T + b1) W2^T + b2 ["blocks.l.mlp.fc.weight" (F,C), ".fc.bias" (F),
                                                    "...mlp.proj.weight" (C,F), ".proj.bias" (C)]
           | relu2 gated MLP: (relu(n2 W1^T)^2 * (n2 W3^T)) W2^T, no biases; W1 and W3 are
             stacked in one (2F,C) matrix (rows 0..F-1 = W1) so one GEMM computes both
                                                   ["blocks.l.mlp.fc.weight" (2F,C),
                                                    "blocks.l.mlp.proj.weight" (C,F)]
           | any other MLP row of layers.h's FFN table (lyr_ffn; its tensors, the same names)
           | fuzzy MoE (layers.h, lyr_kind_moe)
       x   = x + eta * dropout(f)
     logits = normf(x) wte^T (tied head)           ["lnf.weight" (+ "lnf.bias")]
     loss   = mean over targets of the label-smoothed CE
              + (opts.train only, Listing 8) alpha/2 (1 + lambda_sat) relu(eta_floor log R - Hbar)
              where Hbar = mean over layers of each layer's mean membership entropy H(mu)
              (Listing 8 adds the penalty to the summed CE; here the CE is a mean, so the
              penalty weight is relative to a per-token loss)
              + moe_lb_coef * (mean over layers of the MoE load-balance statistic)
              + (opts.train) ent_band_lambda * sum_l [relu(hmin - H_l)^2 + relu(H_l - hmax)^2]
              with H_l the layer's mean attention entropy (GAC's band, seed 003 eq. 12)
   F = lyr_ffn_width(ffn, d_ff_mult, C) (d_ff_mult * C for gelu, relu2, moe). LayerNorm: weight and bias, eps 1e-5; RMSNorm: weight only, eps 1e-5.
   Dropout (cfg.dropout, training only) acts on a and f before the residual add.

   Init (deterministic from the seed; tensor i draws from tk_rng stream i): matrices and
   embeddings N(0, init_std), the residual output projections (attn.proj, mlp.proj)
   N(0, init_std / sqrt(2 L)), biases 0, norm weights 1; the membership layer and the small
   gates follow PyTorch's nn.Linear default U(-1/sqrt(fan_in), 1/sqrt(fan_in)), centres
   N(0, 1/C), log_sigma 0 (Listing 3); tau_att = cfg.tau_att_init, pos_beta 0.2, ERA centres
   (r + 0.5)/R, sigma 0.1, alpha 1.

   Devices and components (issue 39): the model is created on one device and keeps it in
   m->cx (exctx.h's ex_ctx); every op goes through exctx.h's ex_X(ctx, ...) dispatch, so
   nothing here asks the driver where a pointer lives. The mixer (polar attention, or
   softmax attention as this file's own kind mdl__kind_softmax), the gated-delta memory,
   the FFN (GELU / squared-ReLU MLP, fuzzy MoE), the norms and the causal convolution
   (cfg.conv_k, layers.h lyr_kind_conv) are components held per
   block slot (mdl__comp: a lyr_kind and its dims); their tensors, initialisation,
   saved state, work buffer, forward and backward go through the kind's table (softmax
   attention's saved state and scratch are still carved by mdl__carve). The memberships
   and the gates are still written in the block; the softmax attention keeps
   per-device saved state (CPU: probabilities; device: log-sum-exp), issue 39 item 4.

   Memory: parameters and gradients are one allocation each; every activation and every
   backward scratch buffer is carved from one allocation sized by mdl_reserve. With
   opts.train = 0 the forward keeps one block's buffers and updates the residual stream in
   place; with train it keeps per block what the backward reads, and the head's loss pass
   turns the (N,V) logits into dlogits in place (softmax minus the smoothed target, over N),
   which mdl_backward consumes (no separate (N,V) probabilities buffer, no extra sweep).

   License: MIT. */
#include "model.h"
#include "errf.h"
#include "layers.h"
#include "exctx.h"
#define SGR_IMPLEMENTATION
#include "sigreg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef _OPENMP
#define MDL__OMP(x) _Pragma(#x)
#else
#define MDL__OMP(x)
#endif

#define MDL__ALIGN 64
#define MDL__NORM_EPS 1e-5f
#define MDL__ABSENT ((size_t)-1)
#define MDL__FXB_SLOTS 8 /* lengths the fixed priors' B(T) cache keeps (model.h says 8) */

/* ------------------------------------------------------------------ structures */

/* The layers.h components of a block (layers.h's generic protocol, lyr_kind): the slots
   a block's forward and backward visit, in forward order. A slot without a component
   (no polar mixer, no memory) has kind NULL. */
enum { MDL__CP_MIX = 0, /* the mixer: polar attention (layers.h) or softmax attention
                           (mdl__kind_softmax, this file's own kind) */
       MDL__CP_MEM,     /* the memory channel (gated delta), added to the mixer's output */
       MDL__CP_FFN,     /* the FFN (GELU / squared-ReLU MLP, fuzzy MoE) */
       MDL__CP_N1,      /* norm1 (LayerNorm / RMSNorm) */
       MDL__CP_N2,      /* norm2 */
       MDL__CP_CONV,    /* the causal convolution after norm1 (cfg.conv_k) */
       MDL__CP_LFM,     /* LFM2's gated short convolution: the mixer of the layers
                           cfg.layer_pattern marks 'c' (those have no MIX and no MEM) */
       MDL__CP_RESG,    /* the residual gate eta on the memberships (cfg.res_gate) */
       MDL__CP_VGATE,   /* the value gate on the memberships (cfg.value_gate) */
       MDL__CP_MEMB,    /* the memberships mu of the block input (need_mu) */
       MDL__NCP };      /* (a slot's index is its init stream: 100000 + 4 l + slot for the
                           first three; the norms start from constants) */

typedef struct mdl__comp {
    const lyr_kind *k;   /* NULL: none in this slot */
    const char *name;    /* tensor names: blocks.<l>.<name>.<suffix> */
    const void *d;       /* its dims (in the model) */
    int np;              /* tensors per block */
    int layer_init;      /* some tensor is LYR_INIT_LAYER: k->init draws them from stream
                            100000 + 4 l + slot */
} mdl__comp;

/* Offsets (floats) of one block's parameters in the parameter buffer; MDL__ABSENT when
   the configuration has no such tensor. */
typedef struct mdl__bp {
    size_t memw, memb, memc, mems;
    size_t resg, vgam;
    size_t qkv, proj, tau, posb, kappa, gtau;
    size_t erac, eras, eraa;
    size_t cp[MDL__NCP][LYR_MAX_PARAMS]; /* the layers.h components' tensors */
} mdl__bp;

/* One block's activations (train: one set per layer; eval: one shared set). */
typedef struct mdl__ba {
    float *xmid;            /* (N,C) x after the attention residual (input of norm2) */
    float *zproj, *mu;      /* (N,C), (N,R) memberships */
    float *eta;             /* (N) residual gates */
    float *n1;              /* (N,C) norm1 output (after the causal convolution when
                               cfg.conv_k) */
    float *n1p;             /* (N,C) norm1 output before the convolution (conv_k only) */
    float *q, *k, *v;       /* (B,H,T,D) each */
    float *probs;           /* (B,H,T,T) (CPU model) */
    float *lse, *atto;      /* (B,H,T), (B,H,T,D): the attention's saved state on a device
                               model (the flash-style kernels keep lse, not probs) */
    float *attm;            /* (N,C) merged heads (input of the output projection) */
    float *ap;              /* (N,C) output projection, before gate and dropout */
    float *ao;              /* (N,C) eta-less branch output: dropout(g * ap) (or == ap) */
    float *vsig, *vg;       /* (N,H) sigmoids, (N) value gate */
    float *bias;            /* (T,T) prior bias */
    uint8_t *mask_a, *mask_f; /* (N,C) dropout masks */
    float *n2;              /* (N,C) norm2 output */
    float *fp;              /* (N,C) FFN output before dropout */
    float *fo;              /* (N,C) dropout(fp) (or == fp) */
    float *sv[MDL__NCP];     /* the components' saved buffers */
    float *hst[MDL__NCP];    /* their host_floats (the MoE routing of a device model) or NULL */
} mdl__ba;

/* era_cache's membership source context: the model and a layer */
struct mdl__pctx {
    struct mdl_model *m;
    int l;
};

struct mdl_model {
    mdl_config cfg;
    ex_ctx cx;               /* the device context, fixed at creation (exctx.h): where params,
                                grads and activations live and which bodies run (host
                                scalars and statistics stay host) */
    int L, C, H, D, F, V, R, need_mu;
    lyr_polar_dims pd;
    lyr_gdelta_dims gdd;
    lyr_moe_dims md;
    lyr_mlp_dims mlpd;
    lyr_norm_dims normd;
    lyr_conv_dims convd;
    lyr_lfm_dims lfmd;
    lyr_gate_dims gated;     /* the residual and value gates (layers.h section 8) */
    lyr_memb_dims membd;     /* the memberships (layers.h section 9; cfg: rpa_used) */
    unsigned char lconv[MDL_MAX_LAYERS]; /* 1: layer l's mixer is the gated convolution */
    int nconv;               /* how many layers are */
    mdl__comp cp[MDL__NCP];  /* the block's layers.h components by slot */
    float *params, *grads;
    size_t nparams;
    mdl_tensor *tensors;
    int ntensors, tcap;
    int *tinit;             /* per tensor: init kind */
    float *tinit_a;         /* per tensor: init argument */
    mdl__bp bp[MDL_MAX_LAYERS];
    size_t wte, wpe, lnf[LYR_MAX_PARAMS]; /* lnf: the final norm's tensors (norm1's kind) */
    era_rpa_state rpa_st[MDL_MAX_LAYERS];
    era_era_state era_st[MDL_MAX_LAYERS];
    era_rpa_cuda_state rpa_cst[MDL_MAX_LAYERS]; /* the priors' state on a device model */
    era_era_cuda_state era_cst[MDL_MAX_LAYERS];
    era_rpa_config rpa_used; /* the config of the last forward (scale = prior_scale) */
    float era_scale_used;
    /* RPA running statistics (model.h, mdl_prior_stats_update) and the evaluation cache */
    float *pstats;           /* L*max_T*R running memberships, then max_T counts; NULL: no RPA */
    size_t npstats;
    unsigned long pgen;      /* bumped whenever pstats changes (invalidates the caches) */
    int prior_running;       /* the last forward's RPA prior came from pstats */
    ex_rpa_cache pcache[MDL_MAX_LAYERS]; /* on the model's device (pcache_on: in use) */
    float *pstats_d;         /* device copy of pstats' memberships (device model, running prior) */
    unsigned long pstats_d_gen; /* pgen + 1 of the copy; 0: none */
    float *mu_h;             /* (L,N,R) host staging of every layer's memberships */
    size_t mu_h_cap;
    int mu_back;             /* device model: the last forward's memberships came back with its
                                read-back (at rowfh + MDL__MU_AT(N, L)), mdl__mu_all reads none */
    int ent_back;            /* device model: this forward's softmax layers summed their attention
                                moments into rowf at MDL__ENT_AT (GAC, the entropy band); the
                                read-back brings them with the rest (no read per layer) */
    float *mu_d;             /* (L,N,R) device model: their device staging (mdl__mu_all) */
    size_t mu_d_cap;
    int pcache_on[MDL_MAX_LAYERS], pdiag_T[MDL_MAX_LAYERS];
    unsigned long pcache_gen[MDL_MAX_LAYERS];
    struct mdl__pctx pctx[MDL_MAX_LAYERS];
    float pdiag[MDL_MAX_LAYERS][3];   /* cached prior: marginal error, std_pre, clamp share */
    /* the fixed priors' B(T) cache (SINUSOID / RELATIVE; mdl__fixed_bias): slot i holds the
       (fxb_T[i], fxb_T[i]) bias at scale 1 (host memory: the CPU model only), fxb_T 0 = empty;
       the least recently used slot (fxb_use) is rebuilt on a miss */
    float *fxb[MDL__FXB_SLOTS];
    int fxb_T[MDL__FXB_SLOTS];
    unsigned long fxb_use[MDL__FXB_SLOTS], fxb_tick;
    long fxb_builds, fxb_hits;
    const float *fxb_cur;   /* this forward's B(T) (a slot of fxb) */
    const float *bias_used[MDL_MAX_LAYERS]; /* the bias the last forward's layer l added (after
                                               the warm-in and gac_tau scales), NULL: none;
                                               its backward reads this one */
    long pc_builds, pc_hits;          /* of caches already released */
    int have_tce;            /* rowce holds the last forward's per-token CE */
    float ent_dHl[MDL_MAX_LAYERS]; /* d loss / d H_l of the entropy band (0: inactive) */
    double *mu_sums;         /* (MDL_MAX_LAYERS,3) in the model's memory: each layer's membership
                                statistics of the forward as sums (era_membership_forward_sums),
                                read once after the blocks */
    float *tau_abs;          /* (MDL_MAX_LAYERS) in the model's memory: the last backward's
                                era_rpa_grads.dtau_att_abs per layer, the scale of tau_att's
                                cancelling gradient (tests read a CPU model's) */
    /* activations: act on the model's device; hact the host part of a device model */
    void *act, *hact;
    size_t act_bytes, hact_bytes;
    int resB, resT;          /* mdl_reserve's request (kept as a floor) */
    /* per-forward carve */
    int B, T, train, obs;
    mdl__ba ba[MDL_MAX_LAYERS];
    float *res;              /* train: (L+1, N, C) residual stream per block input; eval: (N,C) */
    float *nf, *nf_sv;       /* (N,C) final norm output, its saved state */
    float *logits;           /* (N,V) logits, or probs -> dlogits with train */
    double *rowce, *rowloss; /* (N) */
    int *ids, *tgt;          /* (N) copies for the backward (on the model's device) */
    float *temp;             /* (L,H) per-head temperature used (host) */
    float *temp_d;           /* (L,H) its device copy (== temp on the CPU) */
    float *rowf;             /* device model, the forward's one read-back (mdl__readback):
                                (N) per-row CE, (N) smoothed loss (tensor.h's in-place
                                cross-entropy), (N) target weights, then at float MDL__TAIL(N):
                                the status word (an int, then a pad) and each layer's
                                membership sums (L,3 doubles); at MDL__ENT_AT(N, L) each
                                softmax layer's attention moment sums (L,TK_ATTN_NSTATS)
                                when the forward wants the entropy; with the RPA prior, then at
                                MDL__MU_AT(N, L) every layer's memberships (L,N,R) of a
                                training forward (for mdl_prior_stats_update) */
    float *rowfh;            /* its host copy */
    int *status_d;           /* device model: the deferred checks' word (m->cx.status, and
                                tk_attention_cuda_config.status): zero, or nonzero after a
                                non-finite attention row or temperature or an id out of range;
                                read once per forward with the row losses */
    /* backward scratch */
    float *dres, *dln, *dbr, *dq, *dk, *dv, *datt, *dqkv, *dmu, *deta, *dbias;
    float *dtemp_d;          /* (H+1) GAC: dtemp and a scalar, on the model's device */
    float *qkv;              /* (N,3C) scratch of the forward */
    float *atty;             /* (B,H,T,D) scratch of the forward */
    void *rpa_ws, *era_ws, *obs_ws;
    size_t rpa_ws_n, era_ws_n, obs_ws_n;
    float *attn_stats;       /* (B,H,T,TK_ATTN_NSTATS) softmax-row moments of the layer being run */
    size_t attn_stats_cap;
    float *attn_stats_d;     /* the device model's: computed there, copied into attn_stats */
    size_t attn_stats_dcap;
    float *lwork;            /* layers.h work (max over the kinds in use) */
    float *gm;               /* (N,C) memory-channel output (forward scratch) */
    float *gsq, *gsk, *gsv;  /* mem_qkv shared: the memory's gradients of the attention's scored
                                q (N,H,D), k, v (N,Hkv,D) (backward scratch), else NULL */
    float lyr_loss;          /* polar distractor loss + MoE load-balance term of the last forward */
    mdl_stats *fst;          /* the statistics of the forward being run (the model's own kinds) */
    int kfail;               /* a model-side kind failed and reported it already (mdl__kret) */
    ceas_obs *obs_heads;     /* (L,H) */
    /* CEAS gating (issue 20; mdl_set_gating): malloc'ed apart from the activations */
    ceas_obs *gate_rows;     /* (L,B,H,T) gate observables of the last forward */
    size_t gate_rows_cap;
    int gate_rows_ok;        /* gate_rows hold the last (training) forward's rows */
    float *gate_mask_d;      /* the device model's gating as a row mask (L,B,H,T): 1 kept, 0 pruned
                                or frozen (mdl_set_gating uploads it; see mdl__attn_bwd_masked) */
    size_t gate_mask_dcap;
    float *gate_scr;         /* per-thread scratch of the gate rows and the gated backward */
    size_t gate_scr_cap;
    unsigned char *gate_keep;   /* (L,B,H,T) */
    size_t gate_keep_cap;
    unsigned char *gate_frozen; /* (L,H) */
    int gate_keep_on, gate_frozen_on;
    mdl_gate_counts gcount;
    /* last forward */
    int have_bwd;            /* a training forward with targets is ready for backward */
    /* seed 002's signature-stream regulariser (mdl_sigreg_set; sigreg.h): mode (SGR_OFF:
       none), weight, sketch, the (seed, key) of its randomness; sig_fkey: the key the last
       training forward used (its backward's); sig_hx, sig_hg: host copies of a block's
       output and its gradient on a device model (sig_cap floats each) */
    int sig_mode, sig_k;
    float sig_alpha;
    uint64_t sig_seed, sig_key, sig_fkey;
    float *sig_hx, *sig_hg;
    size_t sig_cap;
    mdl_opts opts;
    float ent_dH;            /* d loss / d Hbar of the last forward */
    float layer_H[MDL_MAX_LAYERS];
    /* Host mirror of each block's scalar parameters (gac_tau, tau_att, pos_beta, the ERA
       prior's log_sigma and alpha; mdl__scal): block l's are the span sc_lo[l] ..
       sc_lo[l] + sc_n[l] - 1 of the parameter buffer (contiguous but for the ERA centers
       between gac_tau and log_sigma), mirrored at sc + sc_at[l]. Every mdl_forward
       refreshes it first (on a device model the spans gathered on the device and read
       back with one copy, one host wait; a memcpy per block on the CPU), so it follows whatever changed the parameters since (an
       optimiser step, a checkpoint, EMA / SWA swaps, a controller's tau); the rest of
       that forward and its backward read it, never the parameter buffer. */
    float *sc;
    size_t sc_lo[MDL_MAX_LAYERS], sc_n[MDL_MAX_LAYERS], sc_at[MDL_MAX_LAYERS];
    /* device model: the staging of host reads of scalars (sc_cap floats, device memory):
       the mirror's spans (and mdl_scalars_get's floats) gathered there by device copies
       on the model's stream, then read back with one copy, one host wait */
    float *sc_d;
    size_t sc_cap;
    /* seed 004 section 6 (C): the GELU MLP's per-layer activation gain a_l (act = gelu(a_l u);
       not a parameter: no gradient, set by mdl_act_gain_set), 1 at creation; gain_fwd: the
       gains the last forward ran with (its backward reads these) */
    float act_gain[MDL_MAX_LAYERS], gain_fwd[MDL_MAX_LAYERS];
    int ffn_act_ok;          /* the last forward was a training forward: every layer's FFN
                                activations are in its saved buffer (mdl_ffn_act_copy) */
    char err[256];
    struct mdl__dec *dec;   /* token-by-token decoding state (mdl_decode_init), or NULL */
};

/* Softmax attention as the mixer slot's kind (issue 39 item 3): the model's own kind, its
   dims the model itself (cp[MDL__CP_MIX].d = m). Its tensors are qkv.weight (3C,C) and
   proj.weight (C,C) ("blocks.<l>.attn.*"; the prior's and the temperature's tensors stay
   the model's); its forward reads lyr_io's layer, x = the block's n1 and writes out = its
   ap, with the prior bias, the temperatures, the observables and the CEAS gate rows of
   m->opts into the running forward's statistics (m->fst); its backward takes dout = the
   model's dbr (consumed) and accumulates into dx = the model's dln. Its saved state and
   scratch are still carved by mdl__carve (saved / work counts 0 here). Errors come back
   as MDL_* codes already reported (m->kfail, mdl__kret). */
static int mdl__sm_params_v(const void *d, lyr_pspec *out, int cap);
static int mdl__sm_init_v(const void *d, float *const *P, tk_rng *rng, float init_std);
static size_t mdl__sm_floats_v(const void *d, int B, int T);
static int mdl__sm_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io);
static int mdl__sm_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io);
static int mdl__kret(struct mdl_model *m, int rc, const char *what);
static const lyr_kind mdl__kind_softmax = {"attn", mdl__sm_params_v, mdl__sm_init_v, mdl__sm_floats_v,
                                           mdl__sm_floats_v, mdl__sm_floats_v, mdl__sm_fwd_v, mdl__sm_bwd_v};

enum { MDL__INIT_ZERO = 0, MDL__INIT_ONE, MDL__INIT_NORMAL, MDL__INIT_UNIFORM, MDL__INIT_CONST,
       MDL__INIT_ERAC, MDL__INIT_LAYER };

/* ------------------------------------------------------------------ helpers */

static int mdl__fail(mdl_model *m, int code, const char *fmt, ...)
{
    if (m) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(m->err, sizeof m->err, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int mdl__finite(double x) { return x == x && x - x == 0.0; }

static size_t mdl__align(size_t n) { return (n + MDL__ALIGN - 1) & ~(size_t)(MDL__ALIGN - 1); }

mdl_config mdl_config_default(void)
{
    mdl_config c;
    memset(&c, 0, sizeof c);
    c.vocab = 50257;
    c.d_model = 128;
    c.n_layers = 4;
    c.n_heads = 4;
    c.max_T = 256;
    c.d_ff_mult = 4;
    c.pos = MDL_POS_LEARNED;
    c.norm = MDL_NORM_LAYER;
    c.attn = MDL_ATTN_SOFTMAX;
    c.prior = MDL_PRIOR_NONE;
    c.memory = MDL_MEM_NONE;
    c.ffn = MDL_FFN_GELU;
    c.dropout = 0.0f;
    c.init_std = 0.02f;
    c.R = 4;
    c.res_gate = 0;
    c.value_gate = 0;
    c.rpa = era_rpa_config_default(4);
    c.tau_att_init = 1.0f;
    c.gac_tau = 0;
    c.era = era_era_config_default();
    c.fixed_prior = era_pos_config_default();
    c.polar = polar_config_default();
    c.polar_kv_heads = 0;
    c.polar_qk_norm = 1;
    c.polar_gate = MDL_POLAR_GATE_HEAD;
    c.polar_canon_k = 0;
    c.gd = gd_config_default();
    c.gd_heads = 0;
    c.gd_dk = 0;
    c.mem_qkv = MDL_MEMQKV_OWN;
    c.moe_experts = 4;
    c.moe_topk = 2;
    c.moe_gumbel_tau = 0.5f;
    c.layer_pattern[0] = 0;
    c.lfm_k = 3;
    return c;
}

mdl_opts mdl_opts_default(void)
{
    mdl_opts o;
    memset(&o, 0, sizeof o);
    o.train = 0;
    o.label_smoothing = 0.0f;
    o.ent_floor_alpha = 0.0f;
    o.ent_floor_eta = 0.02f;
    o.lambda_sat = 0.0f;
    o.moe_lb_coef = 0.0f;
    o.prior_scale = 1.0f;
    o.attn_temp_mul = 1.0f;
    o.head_temp = NULL;
    o.want_attn_obs = 0;
    o.seed = 0;
    o.prior_source = MDL_PSRC_AUTO;
    o.ent_band_lambda = 0.0f;
    o.ent_band_hmin = 2.0f;
    o.ent_band_hmax = 5.0f;
    o.target_weight = NULL;
    return o;
}

/* SINUSOID / RELATIVE: a fixed bias (no parameters, no gradient) */
static int mdl__prior_fixed(const mdl_config *c)
{
    return c->prior == MDL_PRIOR_SINUSOID || c->prior == MDL_PRIOR_RELATIVE;
}

static int mdl__need_mu(const mdl_config *c)
{
    return c->prior == MDL_PRIOR_RPA || c->ffn == MDL_FFN_MOE || c->res_gate || c->value_gate;
}

/* Layer l's mixer from cfg.layer_pattern: 1 the gated convolution ('c'), 0 attention. The
   pattern must have been validated (a NUL within the array). */
static int mdl__conv_layer(const mdl_config *c, int l)
{
    size_t n = strlen(c->layer_pattern);
    return n > 0 && c->layer_pattern[(size_t)l % n] == 'c';
}

/* conv layers of a validated configuration */
static int mdl__nconv(const mdl_config *c)
{
    int l, n = 0;
    for (l = 0; l < c->n_layers && l < MDL_MAX_LAYERS; l++) n += mdl__conv_layer(c, l);
    return n;
}

/* layers.h dimensions of a configuration */
static void mdl__dims(const mdl_config *c, lyr_polar_dims *pd, lyr_gdelta_dims *gd, lyr_moe_dims *md)
{
    int C = c->d_model, H = c->n_heads > 0 ? c->n_heads : 1, L = c->n_layers > 0 ? c->n_layers : 1;
    int Hm = c->gd_heads > 0 ? c->gd_heads : H;
    int Dk = c->gd_dk > 0 ? c->gd_dk : (Hm > 0 ? C / Hm : 0);
    float rs = 1.0f / sqrtf(2.0f * (float)L);
    *pd = lyr_polar_dims_make(C, H);
    if (c->polar_kv_heads > 0) pd->Hkv = c->polar_kv_heads;
    pd->qk_norm = c->polar_qk_norm;
    pd->gate = c->polar_gate == MDL_POLAR_GATE_CHANNEL ? LYR_POLAR_GATE_CHANNEL : LYR_POLAR_GATE_HEAD;
    pd->bias = c->polar_gate == MDL_POLAR_GATE_CHANNEL;
    pd->canon_k = c->polar_canon_k;
    pd->cfg = c->polar;
    pd->resid_scale = rs;
    *gd = lyr_gdelta_dims_make(C, Hm, Dk);
    gd->cfg = c->gd;
    if (c->mem_qkv == MDL_MEMQKV_SHARED) { /* the polar attention's q, k, v (validated below) */
        gd->qkv_shared = 1;
        gd->kv_heads = pd->Hkv;
    }
    *md = lyr_moe_dims_make(C, c->d_ff_mult * C, c->moe_experts, c->moe_topk, c->R);
    md->gumbel_tau = c->moe_gumbel_tau;
    md->resid_scale = rs;
}

int mdl_config_validate(const mdl_config *c, char *err, size_t errlen)
{
    if (!c) return ex_errf(err, errlen, MDL_EINVAL, "model config is NULL");
    if (c->vocab < 2 || c->vocab > (1 << 24))
        return ex_errf(err, errlen, MDL_EINVAL, "vocab must be in [2, 2^24] (got %d)", c->vocab);
    if (c->d_model < 1 || c->d_model > 65536)
        return ex_errf(err, errlen, MDL_EINVAL, "d_model must be in [1, 65536] (got %d)", c->d_model);
    if (c->n_layers < 1 || c->n_layers > MDL_MAX_LAYERS)
        return ex_errf(err, errlen, MDL_EINVAL, "n_layers must be in [1, %d] (got %d)",
                         MDL_MAX_LAYERS, c->n_layers);
    if (c->n_heads < 1 || c->d_model % c->n_heads != 0)
        return ex_errf(err, errlen, MDL_EINVAL,
                         "n_heads must be >= 1 and divide d_model (got %d heads, d_model %d)",
                         c->n_heads, c->d_model);
    if (c->max_T < 1 || c->max_T > 65536)
        return ex_errf(err, errlen, MDL_EINVAL, "max_T must be in [1, 65536] (got %d)", c->max_T);
    if (c->d_ff_mult < 1 || c->d_ff_mult > 64)
        return ex_errf(err, errlen, MDL_EINVAL, "d_ff_mult must be in [1, 64] (got %d)", c->d_ff_mult);
    {
        size_t i, n = 0;
        while (n < sizeof c->layer_pattern && c->layer_pattern[n]) n++;
        if (n == sizeof c->layer_pattern)
            return ex_errf(err, errlen, MDL_EINVAL, "layer_pattern must be at most %d characters", MDL_MAX_LAYERS);
        for (i = 0; i < n; i++)
            if (c->layer_pattern[i] != 'A' && c->layer_pattern[i] != 'c')
                return ex_errf(err, errlen, MDL_EINVAL, "layer_pattern must be made of 'A' (attention) and 'c' (LFM2 "
                                                        "gated convolution) (got \"%.64s\")", c->layer_pattern);
        if (mdl__nconv(c) > 0) {
            if (c->lfm_k < 1 || c->lfm_k > 64)
                return ex_errf(err, errlen, MDL_EINVAL, "lfm_k (the gated convolution's kernel) must be in [1, 64] "
                                                        "(got %d)", c->lfm_k);
            if (c->prior != MDL_PRIOR_NONE)
                return ex_errf(err, errlen, MDL_EINVAL, "a prior with gated-convolution layers (layer_pattern \"%s\") "
                                                        "is not supported yet", c->layer_pattern);
            if (c->value_gate)
                return ex_errf(err, errlen, MDL_EINVAL, "the value gate with gated-convolution layers (layer_pattern "
                                                        "\"%s\") is not supported yet", c->layer_pattern);
            if (c->gac_tau)
                return ex_errf(err, errlen, MDL_EINVAL, "gac_tau with gated-convolution layers (layer_pattern \"%s\") "
                                                        "is not supported yet", c->layer_pattern);
        }
    }
    if (c->pos != MDL_POS_NONE && c->pos != MDL_POS_LEARNED && c->pos != MDL_POS_ROPE)
        return ex_errf(err, errlen, MDL_EINVAL, "pos must be MDL_POS_NONE, MDL_POS_LEARNED or MDL_POS_ROPE (got %d)",
                         c->pos);
    if (c->conv_k != 0 && (c->conv_k < 2 || c->conv_k > 16))
        return ex_errf(err, errlen, MDL_EINVAL, "conv_k must be 0 (off) or in [2, 16] (got %d)", c->conv_k);
    if (c->pos == MDL_POS_ROPE && (c->attn != MDL_ATTN_SOFTMAX || (c->d_model / c->n_heads) % 2 != 0))
        return ex_errf(err, errlen, MDL_EINVAL, "rope positions need softmax attention and an even head width "
                                                  "(got attn %d, head width %d)", c->attn, c->d_model / c->n_heads);
    if (c->norm != MDL_NORM_LAYER && c->norm != MDL_NORM_RMS)
        return ex_errf(err, errlen, MDL_EINVAL, "norm must be MDL_NORM_LAYER or MDL_NORM_RMS (got %d)", c->norm);
    if (c->attn != MDL_ATTN_SOFTMAX && c->attn != MDL_ATTN_POLAR)
        return ex_errf(err, errlen, MDL_EINVAL, "attn must be softmax or polar (got %d)", c->attn);
    if (c->prior < MDL_PRIOR_NONE || c->prior > MDL_PRIOR_RELATIVE)
        return ex_errf(err, errlen, MDL_EINVAL, "prior must be none, rpa, era, sinusoid or relative (got %d)", c->prior);
    if (c->prior != MDL_PRIOR_NONE && c->attn != MDL_ATTN_SOFTMAX)
        return ex_errf(err, errlen, MDL_EINVAL, "the rpa/era/sinusoid/relative prior needs softmax attention");
    if (c->memory != MDL_MEM_NONE && c->memory != MDL_MEM_GDELTA)
        return ex_errf(err, errlen, MDL_EINVAL, "memory must be none or gdelta (got %d)", c->memory);
    if (!lyr_ffn_get(c->ffn)) { /* the FFN table (layers.h, lyr_ffn) */
        char names[128];
        int i, w = 0;
        names[0] = 0;
        for (i = 0; lyr_ffn_names[i] && w < (int)sizeof names; i++)
            w += snprintf(names + w, sizeof names - (size_t)w, "%s%d %s", i ? ", " : "", i, lyr_ffn_names[i]);
        return ex_errf(err, errlen, MDL_EINVAL, "ffn must be one of %s (got %d)", names, c->ffn);
    }
    if (c->mem_qkv != MDL_MEMQKV_OWN && c->mem_qkv != MDL_MEMQKV_SHARED)
        return ex_errf(err, errlen, MDL_EINVAL, "mem_qkv must be MDL_MEMQKV_OWN or MDL_MEMQKV_SHARED (got %d)", c->mem_qkv);
    if (c->mem_qkv == MDL_MEMQKV_SHARED &&
        (c->memory != MDL_MEM_GDELTA || c->attn != MDL_ATTN_POLAR ||
         (c->gd_heads != 0 && c->gd_heads != c->n_heads) ||
         (c->gd_dk != 0 && (c->n_heads < 1 || c->gd_dk != c->d_model / c->n_heads))))
        return ex_errf(err, errlen, MDL_EINVAL,
                       "mem_qkv shared (the memory on the attention's q, k, v) needs memory gdelta, polar attention, "
                       "gd_heads 0 or n_heads and gd_dk 0 or d_model / n_heads");
    if (c->polar_qk_norm != 0 && c->polar_qk_norm != 1)
        return ex_errf(err, errlen, MDL_EINVAL, "polar_qk_norm must be 0 or 1 (got %d)", c->polar_qk_norm);
    if (c->polar_gate != MDL_POLAR_GATE_HEAD && c->polar_gate != MDL_POLAR_GATE_CHANNEL)
        return ex_errf(err, errlen, MDL_EINVAL, "polar_gate must be MDL_POLAR_GATE_HEAD or MDL_POLAR_GATE_CHANNEL (got %d)",
                         c->polar_gate);
    if (c->polar_canon_k < 0 || c->polar_canon_k > 64)
        return ex_errf(err, errlen, MDL_EINVAL, "polar_canon_k (the Canon layers' kernel) must be in [0, 64] (got %d)",
                         c->polar_canon_k);
    if (c->polar_canon_k > 0 && c->attn != MDL_ATTN_POLAR)
        return ex_errf(err, errlen, MDL_EINVAL, "polar_canon_k (Canon layers on q, k, v) needs polar attention");
    {
        lyr_polar_dims pd;
        lyr_gdelta_dims gd;
        lyr_moe_dims md;
        mdl__dims(c, &pd, &gd, &md);
        if (c->attn == MDL_ATTN_POLAR && lyr_polar_validate(&pd) != LYR_OK)
            return ex_errf(err, errlen, MDL_EINVAL, "invalid polar attention config (polar: see polar.h)");
        if (c->memory == MDL_MEM_GDELTA) {
            if (c->gd_heads < 0 || c->gd_dk < 0)
                return ex_errf(err, errlen, MDL_EINVAL, "gd_heads and gd_dk must be >= 0 (0: defaults)");
            if (gd.Dk < 1 || lyr_gdelta_validate(&gd) != LYR_OK)
                return ex_errf(err, errlen, MDL_EINVAL,
                                 "invalid gated-delta memory config (gd_heads %d, gd_dk %d, gd: see gdelta.h)",
                                 gd.Hm, gd.Dk);
        }
        if (c->ffn == MDL_FFN_MOE &&
            (c->moe_experts < 1 || c->moe_topk < 1 || c->moe_topk > c->moe_experts ||
             !mdl__finite(c->moe_gumbel_tau) || c->moe_gumbel_tau <= 0.0f || c->R < 1 ||
             lyr_moe_validate(&md) != LYR_OK))
            return ex_errf(err, errlen, MDL_EINVAL,
                             "invalid fuzzy MoE config: need moe_experts >= 1, 1 <= moe_topk <= moe_experts, "
                             "moe_gumbel_tau > 0 (got %d, %d, %g)", c->moe_experts, c->moe_topk,
                             (double)c->moe_gumbel_tau);
    }
    if (!mdl__finite(c->dropout) || c->dropout < 0.0f || c->dropout >= 1.0f)
        return ex_errf(err, errlen, MDL_EINVAL, "dropout must be in [0, 1) (got %g)", (double)c->dropout);
    if (!mdl__finite(c->init_std) || c->init_std < 0.0f)
        return ex_errf(err, errlen, MDL_EINVAL, "init_std must be finite and >= 0 (got %g)", (double)c->init_std);
    if (c->res_gate != 0 && c->res_gate != 1)
        return ex_errf(err, errlen, MDL_EINVAL, "res_gate must be 0 or 1 (got %d)", c->res_gate);
    if (c->value_gate != 0 && c->value_gate != 1)
        return ex_errf(err, errlen, MDL_EINVAL, "value_gate must be 0 or 1 (got %d)", c->value_gate);
    if (c->polar_kv_heads < 0 || (c->polar_kv_heads > 0 && c->n_heads % c->polar_kv_heads != 0))
        return ex_errf(err, errlen, MDL_EINVAL, "polar_kv_heads must be 0 or divide n_heads (got %d for %d heads)",
                         c->polar_kv_heads, c->n_heads);
    if (c->gac_tau != 0 && c->gac_tau != 1)
        return ex_errf(err, errlen, MDL_EINVAL, "gac_tau must be 0 or 1 (got %d)", c->gac_tau);
    if (c->gac_tau && c->attn != MDL_ATTN_SOFTMAX)
        return ex_errf(err, errlen, MDL_EINVAL, "gac_tau scales softmax attention logits: it needs softmax attention");
    if (c->gac_tau && c->n_heads > 256)
        return ex_errf(err, errlen, MDL_EINVAL, "gac_tau supports at most 256 heads (got %d)", c->n_heads);
    if (mdl__need_mu(c)) {
        era_rpa_config rc = c->rpa;
        if (c->R < 2 || c->R > 64)
            return ex_errf(err, errlen, MDL_EINVAL, "R (regimes) must be in [2, 64] (got %d)", c->R);
        rc.R = c->R;
        rc.scale = 1.0f;
        if (rc.max_T < c->max_T) rc.max_T = c->max_T;
        if (!mdl__finite(rc.tau_align) || rc.tau_align <= 0.0f || rc.sinkhorn_iters < 0 ||
            rc.sinkhorn_iters > 10000 || !mdl__finite(rc.posmix) || rc.posmix < 0.0f ||
            rc.posmix > 1.0f || !mdl__finite(rc.bias_clip) || rc.bias_clip <= 0.0f ||
            !mdl__finite(rc.tau_min) || !mdl__finite(rc.tau_max) || rc.tau_min <= 0.0f ||
            rc.tau_max < rc.tau_min || !mdl__finite(rc.zscore_eps) || rc.zscore_eps < 0.0f ||
            !mdl__finite(rc.logit_clamp) || rc.logit_clamp <= 0.0f ||
            !mdl__finite(rc.inv2sig2_min) || !mdl__finite(rc.inv2sig2_max) ||
            rc.inv2sig2_min <= 0.0f || rc.inv2sig2_max < rc.inv2sig2_min ||
            !mdl__finite(rc.entropy_floor) || rc.entropy_floor <= 0.0f ||
            !mdl__finite(rc.sat_threshold) || rc.K > 4096)
            return ex_errf(err, errlen, MDL_EINVAL,
                             "invalid rpa/membership config (tau_align > 0, sinkhorn_iters >= 0, "
                             "posmix in [0,1], bias_clip > 0, 0 < tau_min <= tau_max, ...)");
    }
    if (c->prior == MDL_PRIOR_RPA) {
        if (!mdl__finite(c->tau_att_init) || c->tau_att_init <= 0.0f)
            return ex_errf(err, errlen, MDL_EINVAL, "tau_att_init must be finite and > 0 (got %g)",
                             (double)c->tau_att_init);
        if (c->rpa.legacy)
            return ex_errf(err, errlen, MDL_EINVAL, "the legacy RPA bias (rpa.legacy) is not supported by the model");
    }
    if (c->prior == MDL_PRIOR_ERA) {
        const era_era_config *e = &c->era;
        if (e->R < 1 || e->R > 4096 || e->nb < 1 || e->nb > 1000000 || !mdl__finite(e->eps) ||
            e->eps <= 0.0f || e->iters < 1 || e->iters > 100000 || !mdl__finite(e->delta) ||
            e->delta <= 0.0f || !mdl__finite(e->zscore_eps) || e->zscore_eps < 0.0f)
            return ex_errf(err, errlen, MDL_EINVAL,
                             "invalid era config (R >= 1, nb >= 1, eps > 0, iters >= 1, delta > 0)");
    }
    if (mdl__prior_fixed(c)) {
        const era_pos_config *f = &c->fixed_prior;
        if (c->prior == MDL_PRIOR_SINUSOID && (f->dims < 2 || f->dims > 65536 || (f->dims & 1)))
            return ex_errf(err, errlen, MDL_EINVAL, "fixed_prior.dims (sinusoid basis width) must be even in [2, 65536] "
                                                    "(got %d)", f->dims);
        if (c->prior == MDL_PRIOR_SINUSOID && (!mdl__finite(f->base) || !(f->base > 1.0f)))
            return ex_errf(err, errlen, MDL_EINVAL, "fixed_prior.base (sinusoid wavelength base) must be finite and > 1 "
                                                    "(got %g)", (double)f->base);
        if (c->prior == MDL_PRIOR_RELATIVE && (!mdl__finite(f->slope) || !(f->slope > 0.0f)))
            return ex_errf(err, errlen, MDL_EINVAL, "fixed_prior.slope (relative distance slope) must be finite and > 0 "
                                                    "(got %g)", (double)f->slope);
        if ((f->zscore != 0 && f->zscore != 1) || (f->zscore_causal != 0 && f->zscore_causal != 1))
            return ex_errf(err, errlen, MDL_EINVAL, "fixed_prior.zscore and fixed_prior.zscore_causal must be 0 or 1 "
                                                    "(got %d, %d)", f->zscore, f->zscore_causal);
        if (!mdl__finite(f->zscore_eps) || f->zscore_eps < 0.0f)
            return ex_errf(err, errlen, MDL_EINVAL, "fixed_prior.zscore_eps must be finite and >= 0 (got %g)",
                           (double)f->zscore_eps);
        if (!mdl__finite(f->bias_clip) || !(f->bias_clip > 0.0f))
            return ex_errf(err, errlen, MDL_EINVAL, "fixed_prior.bias_clip must be finite and > 0 (got %g)",
                           (double)f->bias_clip);
    }
    {
        double f = (double)c->d_model * c->d_ff_mult;
        if (f > 4194304.0 || lyr_ffn_width(c->ffn, c->d_ff_mult, c->d_model) < 1)
            return ex_errf(err, errlen, MDL_EINVAL, "d_ff_mult * d_model too large");
    }
    return ex_errf(err, errlen, MDL_OK, "ok");
}

/* ------------------------------------------------------------------ parameters */

static size_t mdl__add_shape(mdl_model *m, const char *name, int ndim, const int *shape, int decay,
                             int init, float arg)
{
    mdl_tensor *t;
    size_t n = 1;
    int d;
    for (d = 0; d < ndim; d++) n *= (size_t)shape[d];
    if (m->ntensors == m->tcap) {
        int nc = m->tcap ? 2 * m->tcap : 64;
        mdl_tensor *nt = (mdl_tensor *)realloc(m->tensors, sizeof(mdl_tensor) * (size_t)nc);
        int *ni = (int *)realloc(m->tinit, sizeof(int) * (size_t)nc);
        float *na;
        if (nt) m->tensors = nt;
        if (ni) m->tinit = ni;
        na = (float *)realloc(m->tinit_a, sizeof(float) * (size_t)nc);
        if (na) m->tinit_a = na;
        if (!nt || !ni || !na) return MDL__ABSENT;
        m->tcap = nc;
    }
    t = &m->tensors[m->ntensors];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    for (d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->offset = m->nparams;
    t->numel = n;
    t->decay = decay;
    m->tinit[m->ntensors] = init;
    m->tinit_a[m->ntensors] = arg;
    m->ntensors++;
    m->nparams += n;
    return t->offset;
}

static size_t mdl__add(mdl_model *m, const char *name, int ndim, int s0, int s1, int decay,
                       int init, float arg)
{
    int sh[2];
    sh[0] = s0;
    sh[1] = s1;
    return mdl__add_shape(m, name, ndim, sh, decay, init, arg);
}

/* the tensors of a layers.h component, named prefix.<suffix> */
static int mdl__add_specs(mdl_model *m, const char *prefix, const lyr_pspec *sp, int n, size_t *off)
{
    char nm[MDL_NAME_MAX];
    int i;
    for (i = 0; i < n; i++) {
        int init = sp[i].init == LYR_INIT_NORMAL ? MDL__INIT_NORMAL
                   : sp[i].init == LYR_INIT_ZERO ? MDL__INIT_ZERO
                   : sp[i].init == LYR_INIT_ONE ? MDL__INIT_ONE
                   : sp[i].init == LYR_INIT_UNIFORM ? MDL__INIT_UNIFORM : MDL__INIT_LAYER;
        snprintf(nm, sizeof nm, "%s.%s", prefix, sp[i].suffix);
        off[i] = mdl__add_shape(m, nm, sp[i].ndim, sp[i].shape, sp[i].decay, init, sp[i].init_arg);
        if (off[i] == MDL__ABSENT) return MDL_ENOMEM;
    }
    return MDL_OK;
}

/* Whether block l has the component of slot j: the attention mixer and the memory
   channel on attention layers, the gated convolution on conv layers (cfg.layer_pattern),
   the others wherever the configuration has them. */
static int mdl__has(const mdl_model *m, int l, int j)
{
    if (!m->cp[j].k) return 0;
    if (j == MDL__CP_MIX || j == MDL__CP_MEM) return !m->lconv[l];
    if (j == MDL__CP_LFM) return m->lconv[l];
    return 1;
}

/* block l's tensors of the component in slot j (none: nothing), named
   blocks.<l>.<kind name>.<suffix> */
static int mdl__add_comp(mdl_model *m, int l, int j, const lyr_pspec *sp)
{
    char nm[MDL_NAME_MAX - 48]; /* (+ '.' + a suffix of at most 47 characters) */
    if (!mdl__has(m, l, j)) return MDL_OK;
    snprintf(nm, sizeof nm, "blocks.%d.%.20s", l, m->cp[j].name);
    return mdl__add_specs(m, nm, sp, m->cp[j].np, m->bp[l].cp[j]);
}

static int mdl__build_table(mdl_model *m)
{
    lyr_pspec sp[MDL__NCP][LYR_MAX_PARAMS];
    const mdl_config *c = &m->cfg;
    int l, rc, C = m->C;
    char nm[MDL_NAME_MAX];
    float std = c->init_std;
#define MDL__ADD(var, ndim, s0, s1, decay, init, arg)                                    \
    do {                                                                                 \
        var = mdl__add(m, nm, ndim, s0, s1, decay, init, arg);                           \
        if (var == MDL__ABSENT) return MDL_ENOMEM;                                       \
    } while (0)
    snprintf(nm, sizeof nm, "wte");
    MDL__ADD(m->wte, 2, m->V, C, 1, MDL__INIT_NORMAL, std);
    m->wpe = MDL__ABSENT;
    if (c->pos == MDL_POS_LEARNED) {
        snprintf(nm, sizeof nm, "wpe");
        MDL__ADD(m->wpe, 2, c->max_T, C, 1, MDL__INIT_NORMAL, std);
    }
    for (l = 0; l < MDL__NCP; l++) {
        mdl__comp *q = &m->cp[l];
        int k;
        q->np = q->k ? q->k->params(q->d, sp[l], LYR_MAX_PARAMS) : 0;
        if (q->np < 0) return MDL_EINVAL;
        q->layer_init = 0;
        for (k = 0; k < q->np; k++)
            if (sp[l][k].init == LYR_INIT_LAYER) q->layer_init = 1;
    }
    for (l = 0; l < m->L; l++) {
        mdl__bp *b = &m->bp[l];
        size_t *all = (size_t *)b;
        size_t k;
        for (k = 0; k < sizeof(mdl__bp) / sizeof(size_t); k++) all[k] = MDL__ABSENT;
        rc = mdl__add_comp(m, l, MDL__CP_N1, sp[MDL__CP_N1]);
        if (rc) return rc;
        rc = mdl__add_comp(m, l, MDL__CP_CONV, sp[MDL__CP_CONV]);
        if (rc) return rc;
        rc = mdl__add_comp(m, l, MDL__CP_MEMB, sp[MDL__CP_MEMB]); /* blocks.l.mem.{proj.weight, ...} */
        if (rc) return rc;
        b->memw = b->cp[MDL__CP_MEMB][0]; /* (decoding's and the priors' names for them) */
        b->memb = b->cp[MDL__CP_MEMB][1];
        b->memc = b->cp[MDL__CP_MEMB][2];
        b->mems = b->cp[MDL__CP_MEMB][3];
        rc = mdl__add_comp(m, l, MDL__CP_RESG, sp[MDL__CP_RESG]); /* blocks.l.res_gate.weight */
        if (rc) return rc;
        b->resg = b->cp[MDL__CP_RESG][0];
        rc = mdl__add_comp(m, l, MDL__CP_MIX, sp[MDL__CP_MIX]);
        if (rc) return rc;
        rc = mdl__add_comp(m, l, MDL__CP_LFM, sp[MDL__CP_LFM]); /* (a conv layer's mixer, in MIX's place) */
        if (rc) return rc;
        if (c->attn == MDL_ATTN_SOFTMAX && !m->lconv[l]) { /* (mdl__kind_softmax's tensors) */
            b->qkv = b->cp[MDL__CP_MIX][0];
            b->proj = b->cp[MDL__CP_MIX][1];
        }
        rc = mdl__add_comp(m, l, MDL__CP_MEM, sp[MDL__CP_MEM]);
        if (rc) return rc;
        if (c->gac_tau) {
            snprintf(nm, sizeof nm, "blocks.%d.attn.gac_tau", l);
            MDL__ADD(b->gtau, 1, 1, 0, 0, MDL__INIT_CONST, 1.0f);
        }
        if (c->prior == MDL_PRIOR_RPA) {
            snprintf(nm, sizeof nm, "blocks.%d.attn.tau_att", l);
            MDL__ADD(b->tau, 1, 1, 0, 0, MDL__INIT_CONST, c->tau_att_init);
            snprintf(nm, sizeof nm, "blocks.%d.attn.pos_beta", l);
            MDL__ADD(b->posb, 1, 1, 0, 0, MDL__INIT_CONST, 0.2f);
        }
        if (c->prior == MDL_PRIOR_ERA) {
            snprintf(nm, sizeof nm, "blocks.%d.attn.era.centers", l);
            MDL__ADD(b->erac, 1, c->era.R, 0, 0, MDL__INIT_ERAC, 0);
            snprintf(nm, sizeof nm, "blocks.%d.attn.era.log_sigma", l);
            MDL__ADD(b->eras, 1, 1, 0, 0, MDL__INIT_CONST, logf(0.1f));
            snprintf(nm, sizeof nm, "blocks.%d.attn.era.alpha", l);
            MDL__ADD(b->eraa, 1, 1, 0, 0, MDL__INIT_CONST, 1.0f);
        }
        rc = mdl__add_comp(m, l, MDL__CP_VGATE, sp[MDL__CP_VGATE]); /* blocks.l.attn.value_gamma.weight */
        if (rc) return rc;
        b->vgam = b->cp[MDL__CP_VGATE][0];
        rc = mdl__add_comp(m, l, MDL__CP_N2, sp[MDL__CP_N2]);
        if (rc) return rc;
        rc = mdl__add_comp(m, l, MDL__CP_FFN, sp[MDL__CP_FFN]);
        if (rc) return rc;
    }
    if (mdl__add_specs(m, "lnf", sp[MDL__CP_N1], m->cp[MDL__CP_N1].np, m->lnf)) return MDL_ENOMEM;
#undef MDL__ADD
    return MDL_OK;
}

/* The span of block l's scalar parameters (the mirror's layout, mdl_model.sc); n = 0:
   none. */
static void mdl__scal_span(const mdl__bp *b, size_t *lo, size_t *n)
{
    const size_t off[5] = {b->gtau, b->tau, b->posb, b->eras, b->eraa};
    size_t i, a = MDL__ABSENT, z = 0;
    for (i = 0; i < 5; i++) {
        if (off[i] == MDL__ABSENT) continue;
        if (a == MDL__ABSENT || off[i] < a) a = off[i];
        if (off[i] > z) z = off[i];
    }
    *lo = a == MDL__ABSENT ? 0 : a;
    *n = a == MDL__ABSENT ? 0 : z - a + 1;
}

static void mdl__init_params(mdl_model *m, uint64_t seed)
{
    int i;
    for (i = 0; i < m->ntensors; i++) {
        const mdl_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset, a = m->tinit_a[i];
        tk_rng rng;
        tk_rng_seed(&rng, seed, (uint64_t)i + 1);
        switch (m->tinit[i]) {
        case MDL__INIT_ONE: tk_init_constant(p, t->numel, 1.0f); break;
        case MDL__INIT_NORMAL: tk_init_normal(p, t->numel, 0.0f, a, &rng); break;
        case MDL__INIT_UNIFORM: tk_init_uniform(p, t->numel, -a, a, &rng); break;
        case MDL__INIT_CONST: tk_init_constant(p, t->numel, a); break;
        case MDL__INIT_ERAC: era_era_init_centers((int)t->numel, p); break;
        case MDL__INIT_LAYER: break; /* below */
        default: memset(p, 0, t->numel * sizeof(float)); break;
        }
    }
    for (i = 0; i < m->L; i++) {
        const mdl__bp *b = &m->bp[i];
        float *Pp[LYR_MAX_PARAMS];
        tk_rng rng;
        int k;
        int j;
        for (j = 0; j < MDL__NCP; j++) {
            const mdl__comp *q = &m->cp[j];
            if (!mdl__has(m, i, j) || !q->layer_init) continue;
            for (k = 0; k < q->np; k++) Pp[k] = m->params + b->cp[j][k];
            tk_rng_seed(&rng, seed, 100000u + (uint64_t)i * 4 + (uint64_t)j);
            q->k->init(q->d, Pp, &rng, m->cfg.init_std);
        }
    }
}

static void mdl__free_dev(const mdl_model *m, void *p) { ex_free(&m->cx, p); }

static void mdl__pcache_free(mdl_model *m, int l)
{
    ex_rpa_cache_free(&m->cx, &m->pcache[l]);
    m->pcache_on[l] = 0;
}

/* What the CUDA model refuses: the one table behind mdl_device_supports and the help text
   (mdl_device_limit). Everything else (softmax/RPA/ERA priors, polar attention at the widths
   below, memory, MoE, gates, GAC/Guardian/CEAS controllers) runs on the device. */
static int mdl__dev_many_heads(const mdl_config *c) { return c->n_heads > 256; }
/* the fixed priors' cache (mdl__fixed_bias) is host memory; era.h has no CUDA body for them */
static int mdl__dev_fixed_prior(const mdl_config *c) { return mdl__prior_fixed(c); }
static int mdl__dev_polar_width(const mdl_config *c)
{
    int w;
    if (c->attn != MDL_ATTN_POLAR || c->n_heads <= 0) return 0;
    if (c->d_model % c->n_heads) return 1;
    w = c->d_model / c->n_heads;
    return !(w == 32 || w == 64 || w == 96 || w == 128);
}
static const struct {
    int (*refuses)(const mdl_config *);
    const char *what;
} mdl__dev_limits[] = {
    {mdl__dev_many_heads, "more than 256 heads"},
    {mdl__dev_polar_width, "polar attention with a head width other than 32, 64, 96 or 128 (cuda/polar.cuh's kernels)"},
    {mdl__dev_fixed_prior, "the fixed sinusoid/relative priors (era.h builds them on the host only; the model's "
                           "B(T) cache is host memory)"},
};
#define MDL__NDEV_LIMITS ((int)(sizeof mdl__dev_limits / sizeof mdl__dev_limits[0]))

const char *mdl_device_limit(int i)
{
    return (i >= 0 && i < MDL__NDEV_LIMITS) ? mdl__dev_limits[i].what : NULL;
}

int mdl_device_release(void)
{
    int a = tk_cuda_release(), b = era_cuda_release();
    return a == TK_OK && b == ERA_OK ? MDL_OK : MDL_EFAIL;
}

int mdl_device_supports(const mdl_config *cfg, char *err, size_t errlen)
{
    int i;
    if (!cfg) return ex_errf(err, errlen, MDL_EINVAL, "mdl_device_supports: cfg is NULL");
    for (i = 0; i < MDL__NDEV_LIMITS; i++)
        if (mdl__dev_limits[i].refuses(cfg))
            return ex_errf(err, errlen, MDL_EINVAL, "the CUDA model does not support %s yet (CPU only for now)",
                           mdl__dev_limits[i].what);
    return ex_errf(err, errlen, MDL_OK, "ok");
}

int mdl_create(mdl_model **out, const mdl_config *cfg, uint64_t seed, char *err, size_t errlen)
{
    return mdl_create_on(out, cfg, seed, MDL_DEVICE_CPU, err, errlen);
}

int mdl_device(const mdl_model *m) { return m ? m->cx.device : MDL_DEVICE_CPU; }
const ex_ctx *mdl_ctx(const mdl_model *m) { return m ? &m->cx : NULL; }

int mdl_create_on(mdl_model **out, const mdl_config *cfg, uint64_t seed, int device, char *err,
                  size_t errlen)
{
    mdl_model *m;
    int rc, l;
    if (out) *out = NULL;
    if (!out) return ex_errf(err, errlen, MDL_EINVAL, "mdl_create: out is NULL");
    rc = mdl_config_validate(cfg, err, errlen);
    if (rc != MDL_OK) return rc;
    if (device != MDL_DEVICE_CPU && device != MDL_DEVICE_CUDA)
        return ex_errf(err, errlen, MDL_EINVAL, "mdl_create: device must be MDL_DEVICE_CPU or MDL_DEVICE_CUDA (got %d)",
                       device);
    if (device == MDL_DEVICE_CUDA) {
        rc = mdl_device_supports(cfg, err, errlen);
        if (rc != MDL_OK) return rc;
        if (!tk_cuda_available())
            return ex_errf(err, errlen, MDL_EINVAL, "mdl_create: no usable CUDA device (this build has no CUDA, "
                                                    "or no GPU is present)");
    }
    m = (mdl_model *)calloc(1, sizeof *m);
    if (!m) return ex_errf(err, errlen, MDL_ENOMEM, "mdl_create: out of memory");
    m->cx = ex_ctx_make(device == MDL_DEVICE_CUDA ? EX_CUDA : EX_CPU);
    m->cfg = *cfg;
    m->L = cfg->n_layers;
    m->C = cfg->d_model;
    m->H = cfg->n_heads;
    m->D = m->C / m->H;
    m->F = lyr_ffn_width(cfg->ffn, cfg->d_ff_mult, cfg->d_model); /* the FFN table's width rule */
    m->V = cfg->vocab;
    m->R = cfg->R;
    m->need_mu = mdl__need_mu(cfg);
    mdl__dims(cfg, &m->pd, &m->gdd, &m->md);
    /* the FFN component: one kind and its dims, never named again below */
    m->mlpd.C = m->C;
    m->mlpd.F = m->F;
    m->mlpd.act = lyr_ffn_is_mlp(cfg->ffn) ? cfg->ffn : LYR_MLP_GELU; /* an MLP row of the FFN table */
    m->mlpd.std = cfg->init_std;
    m->mlpd.proj_std = cfg->init_std / sqrtf(2.0f * (float)m->L); /* (as the other residual projections) */
    m->mlpd.gain = 1.0f; /* none; per layer: mdl__ffn_dims */
    {
        int l;
        for (l = 0; l < MDL_MAX_LAYERS; l++) m->act_gain[l] = m->gain_fwd[l] = 1.0f;
    }
    m->normd.C = m->C;
    m->normd.rms = cfg->norm == MDL_NORM_RMS;
    m->normd.eps = MDL__NORM_EPS;
    m->cp[MDL__CP_N1].k = m->cp[MDL__CP_N2].k = &lyr_kind_norm;
    m->cp[MDL__CP_N1].d = m->cp[MDL__CP_N2].d = &m->normd;
    m->cp[MDL__CP_N1].name = "ln1";
    m->convd.C = m->C;
    m->convd.K = cfg->conv_k;
    if (cfg->conv_k) {
        m->cp[MDL__CP_CONV].k = &lyr_kind_conv;
        m->cp[MDL__CP_CONV].d = &m->convd;
    }
    m->cp[MDL__CP_N2].name = "ln2";
    /* the mixer: polar attention (layers.h) or softmax attention (the model's own kind) */
    m->cp[MDL__CP_MIX].k = cfg->attn == MDL_ATTN_POLAR ? &lyr_kind_polar : &mdl__kind_softmax;
    m->cp[MDL__CP_MIX].d = cfg->attn == MDL_ATTN_POLAR ? (const void *)&m->pd : (const void *)m;
    if (cfg->memory == MDL_MEM_GDELTA) {
        m->cp[MDL__CP_MEM].k = &lyr_kind_gdelta;
        m->cp[MDL__CP_MEM].d = &m->gdd;
    }
    /* the gated convolution of the conv layers (cfg.layer_pattern): ATMA's biases */
    for (l = 0; l < m->L; l++) m->nconv += m->lconv[l] = (unsigned char)mdl__conv_layer(cfg, l);
    m->lfmd.C = m->C;
    m->lfmd.K = cfg->lfm_k;
    m->lfmd.bias = 1;
    m->lfmd.std = cfg->init_std;
    m->lfmd.proj_std = cfg->init_std / sqrtf(2.0f * (float)m->L); /* (as the other residual projections) */
    if (m->nconv) {
        m->cp[MDL__CP_LFM].k = &lyr_kind_lfm;
        m->cp[MDL__CP_LFM].d = &m->lfmd;
    }
    m->gated.C = m->C;
    m->gated.H = m->H;
    m->gated.R = cfg->R;
    m->membd.C = m->C;
    m->membd.R = cfg->R;
    m->membd.cfg = &m->rpa_used;
    if (m->need_mu) {
        m->cp[MDL__CP_MEMB].k = &lyr_kind_memb;
        m->cp[MDL__CP_MEMB].d = &m->membd;
    }
    if (cfg->res_gate) {
        m->cp[MDL__CP_RESG].k = &lyr_kind_resgate;
        m->cp[MDL__CP_RESG].d = &m->gated;
    }
    if (cfg->value_gate) {
        m->cp[MDL__CP_VGATE].k = &lyr_kind_vgate;
        m->cp[MDL__CP_VGATE].d = &m->gated;
    }
    m->cp[MDL__CP_FFN].k = lyr_ffn_get(cfg->ffn)->kind; /* the FFN table's component */
    m->cp[MDL__CP_FFN].d = cfg->ffn == MDL_FFN_MOE ? (const void *)&m->md : (const void *)&m->mlpd;
    for (l = 0; l < MDL__NCP; l++)
        if (m->cp[l].k && !m->cp[l].name) m->cp[l].name = m->cp[l].k->name;
    m->cfg.rpa.R = cfg->R;
    if (m->cfg.rpa.max_T < cfg->max_T) m->cfg.rpa.max_T = cfg->max_T;
    if (m->cfg.era.max_T < cfg->max_T) m->cfg.era.max_T = cfg->max_T;
    for (l = 0; l < MDL_MAX_LAYERS; l++) {
        m->rpa_st[l] = era_rpa_state_init();
        m->era_st[l] = era_era_state_init();
        m->rpa_cst[l] = era_rpa_cuda_state_init();
        m->era_cst[l] = era_era_cuda_state_init();
    }
    rc = mdl__build_table(m);
    if (rc != MDL_OK) {
        mdl_destroy(m);
        return ex_errf(err, errlen, rc, "mdl_create: out of memory (tensor table)");
    }
    {
        size_t nsc = 0;
        for (l = 0; l < m->L; l++) {
            mdl__scal_span(&m->bp[l], &m->sc_lo[l], &m->sc_n[l]);
            m->sc_at[l] = nsc;
            nsc += m->sc_n[l];
        }
        if (nsc) {
            m->sc = (float *)malloc(sizeof(float) * nsc);
            if (!m->sc) {
                mdl_destroy(m);
                return ex_errf(err, errlen, MDL_ENOMEM, "mdl_create: out of memory (scalar parameters)");
            }
        }
        if (device != MDL_DEVICE_CPU) {
            void *p = NULL;
            m->sc_cap = nsc > MDL_MAX_LAYERS ? nsc : MDL_MAX_LAYERS;
            if (ex_alloc(&m->cx, &p, sizeof(float) * m->sc_cap) != TK_OK) {
                mdl_destroy(m);
                return ex_errf(err, errlen, MDL_ENOMEM, "mdl_create: out of memory (scalar staging on the device)");
            }
            m->sc_d = (float *)p;
        }
    }
    { /* tau_abs, written on the model's device (era_rpa_grads.dtau_att_abs_to: no read-back) */
        void *p = NULL;
        if (ex_alloc(&m->cx, &p, sizeof(float) * MDL_MAX_LAYERS) != TK_OK ||
            ex_zero(&m->cx, p, sizeof(float) * MDL_MAX_LAYERS) != TK_OK) {
            if (p) ex_free(&m->cx, p);
            mdl_destroy(m);
            return ex_errf(err, errlen, MDL_ENOMEM, "mdl_create: out of memory (tau_att's gradient scale)");
        }
        m->tau_abs = (float *)p;
        p = NULL;
        if (ex_alloc(&m->cx, &p, sizeof(double) * 3 * MDL_MAX_LAYERS) != TK_OK) {
            mdl_destroy(m);
            return ex_errf(err, errlen, MDL_ENOMEM, "mdl_create: out of memory (membership statistics)");
        }
        m->mu_sums = (double *)p;
    }
    m->params = (float *)malloc(sizeof(float) * m->nparams);
    if (m->params) {
        /* initialised on the host, then moved to the model's memory (the same initial
           values on either device) */
        float *h = m->params;
        void *p = NULL, *g = NULL;
        size_t bytes = sizeof(float) * m->nparams;
        mdl__init_params(m, seed);
        m->params = NULL;
        if (ex_alloc(&m->cx, &p, bytes) == TK_OK && ex_alloc(&m->cx, &g, bytes) == TK_OK &&
            ex_to_ctx(&m->cx, p, h, bytes) == TK_OK && ex_zero(&m->cx, g, bytes) == TK_OK) {
            m->params = (float *)p;
            m->grads = (float *)g;
        } else {
            ex_free(&m->cx, p);
            ex_free(&m->cx, g);
        }
        free(h);
    }
    if (!m->params || !m->grads) {
        unsigned long np = (unsigned long)m->nparams;
        mdl_destroy(m);
        return ex_errf(err, errlen, MDL_ENOMEM, "mdl_create: out of memory (%lu parameters%s)", np,
                       device == MDL_DEVICE_CPU ? "" : " on the device");
    }
    if (cfg->prior == MDL_PRIOR_RPA) {
        size_t i, nmu = (size_t)m->L * (size_t)cfg->max_T * (size_t)m->R;
        m->npstats = nmu + (size_t)cfg->max_T;
        m->pstats = (float *)malloc(sizeof(float) * m->npstats);
        if (!m->pstats) {
            mdl_destroy(m);
            return ex_errf(err, errlen, MDL_ENOMEM, "mdl_create: out of memory (prior statistics)");
        }
        for (i = 0; i < nmu; i++) m->pstats[i] = 1.0f / (float)m->R;
        for (; i < m->npstats; i++) m->pstats[i] = 0.0f;
        for (l = 0; l < MDL_MAX_LAYERS; l++) {
            m->pctx[l].m = m;
            m->pctx[l].l = l;
        }
    }
    snprintf(m->err, sizeof m->err, "ok");
    *out = m;
    return ex_errf(err, errlen, MDL_OK, "ok");
}

void mdl_destroy(mdl_model *m)
{
    int l;
    if (!m) return;
    for (l = 0; l < MDL_MAX_LAYERS; l++) {
        era_rpa_state_free(&m->rpa_st[l]);
        era_era_state_free(&m->era_st[l]);
        era_rpa_cuda_state_free(&m->rpa_cst[l]);
        era_era_cuda_state_free(&m->era_cst[l]);
        if (m->pcache_on[l]) mdl__pcache_free(m, l);
    }
    for (l = 0; l < MDL__FXB_SLOTS; l++) free(m->fxb[l]);
    free(m->pstats);
    free(m->sc);
    if (m->sc_d) mdl__free_dev(m, m->sc_d);
    if (m->tau_abs) mdl__free_dev(m, m->tau_abs);
    if (m->mu_sums) mdl__free_dev(m, m->mu_sums);
    mdl__free_dev(m, m->pstats_d);
    free(m->mu_h);
    if (m->mu_d) mdl__free_dev(m, m->mu_d);
    mdl__free_dev(m, m->params);
    mdl__free_dev(m, m->grads);
    free(m->tensors);
    free(m->tinit);
    free(m->tinit_a);
    mdl__free_dev(m, m->act);
    free(m->hact);
    free(m->gate_rows);
    free(m->attn_stats);
    mdl__free_dev(m, m->attn_stats_d);
    mdl__free_dev(m, m->gate_mask_d);
    free(m->gate_scr);
    free(m->gate_keep);
    free(m->gate_frozen);
    free(m->sig_hx);
    free(m->sig_hg);
    mdl_decode_free(m);
    free(m);
}

const mdl_config *mdl_get_config(const mdl_model *m) { return m ? &m->cfg : NULL; }
const char *mdl_last_error(const mdl_model *m) { return m ? m->err : "model is NULL"; }
size_t mdl_num_params(const mdl_model *m) { return m ? m->nparams : 0; }
float *mdl_params(mdl_model *m) { return m ? m->params : NULL; }
float *mdl_grads(mdl_model *m) { return m ? m->grads : NULL; }
int mdl_num_tensors(const mdl_model *m) { return m ? m->ntensors : 0; }

const mdl_tensor *mdl_tensor_at(const mdl_model *m, int i)
{
    if (!m || i < 0 || i >= m->ntensors) return NULL;
    return &m->tensors[i];
}

const mdl_tensor *mdl_find_tensor(const mdl_model *m, const char *name)
{
    int i;
    if (!m || !name) return NULL;
    for (i = 0; i < m->ntensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return &m->tensors[i];
    return NULL;
}

void mdl_zero_grad(mdl_model *m)
{
    if (m && m->grads) ex_zero(&m->cx, m->grads, sizeof(float) * m->nparams);
}

/* ------------------------------------------------------------------ activations */

/* Two arenas: buffers the ops read and write (on the model's device) and host-only
   buffers (per-row losses, temperatures, controller statistics). On a CPU model both are
   the one allocation (split 0: host buffers are carved from the device arena). */
typedef struct mdl__carver {
    char *base, *hbase; /* NULL: count only */
    size_t off, hoff;
    int split;
} mdl__carver;

static void *mdl__take(mdl__carver *cv, size_t bytes)
{
    void *p = cv->base ? (void *)(cv->base + cv->off) : NULL;
    cv->off += mdl__align(bytes ? bytes : 1);
    return p;
}

static void *mdl__take_h(mdl__carver *cv, size_t bytes)
{
    void *p;
    if (!cv->split) return mdl__take(cv, bytes);
    p = cv->hbase ? (void *)(cv->hbase + cv->hoff) : NULL;
    cv->hoff += mdl__align(bytes ? bytes : 1);
    return p;
}

/* Whether activation set l carves slot j's buffers: with train one set per layer (that
   layer's components), else one set shared by every layer (any layer's). */
static int mdl__set_has(const mdl_model *m, int l, int train, int j)
{
    int k;
    if (train) return mdl__has(m, l, j);
    for (k = 0; k < m->L; k++)
        if (mdl__has(m, k, j)) return 1;
    return 0;
}

#define MDL__TF(cv, n) ((float *)mdl__take(cv, sizeof(float) * (size_t)(n)))
#define MDL__THF(cv, n) ((float *)mdl__take_h(cv, sizeof(float) * (size_t)(n)))
/* where the read-back's tail starts in rowf: after its 3N floats, at an even float (the
   membership sums are doubles) */
#define MDL__TAIL(N) ((3 * (size_t)(N) + 1) & ~(size_t)1)
/* rowf's memberships (RPA): after the tail's status word, pad and membership sums */
/* rowf's attention entropy sums (softmax with GAC or the entropy band): after the
   membership sums, TK_ATTN_NSTATS floats per layer */
#define MDL__ENT_AT(N, L) (MDL__TAIL(N) + 2 + 6 * (size_t)(L))
#define MDL__MU_AT(N, L) (MDL__ENT_AT(N, L) + (size_t)TK_ATTN_NSTATS * (size_t)(L))

/* Lay out every buffer for (B,T); train selects per-layer storage and the backward
   scratch; obs adds the CEAS observables scratch. Returns the bytes needed on the model's
   device, *hbytes those of the host arena (0 on a CPU model). */
static size_t mdl__carve(mdl_model *m, int B, int T, int train, int obs, char *base, char *hbase,
                         size_t *hbytes)
{
    mdl__carver cv;
    size_t N = (size_t)B * T, C = (size_t)m->C, H = (size_t)m->H;
    size_t R = (size_t)m->R, TT = (size_t)T * T, V = (size_t)m->V, L = (size_t)m->L;
    const mdl_config *c = &m->cfg;
    int l, j, nsets = train ? m->L : 1, drop = train && c->dropout > 0.0f;
    int sep_ao = c->value_gate || drop, sep_fo = drop;
    cv.base = base;
    cv.hbase = hbase;
    cv.off = cv.hoff = 0;
    cv.split = m->cx.device != EX_CPU;
    m->res = MDL__TF(&cv, (train ? (L + 1) : 1) * N * C);
    for (l = 0; l < nsets; l++) {
        mdl__ba *a = &m->ba[l];
        memset(a, 0, sizeof *a);
        a->xmid = train ? MDL__TF(&cv, N * C) : NULL;
        a->n1 = MDL__TF(&cv, N * C);
        a->n1p = m->cp[MDL__CP_CONV].k ? MDL__TF(&cv, N * C) : NULL;
        if (c->attn == MDL_ATTN_SOFTMAX && mdl__set_has(m, l, train, MDL__CP_MIX)) {
            a->q = MDL__TF(&cv, N * C);
            a->k = MDL__TF(&cv, N * C);
            a->v = MDL__TF(&cv, N * C);
            /* the softmax attention's saved state differs by device (issue 39 item 4):
               the CPU keeps the (T,T) probabilities and writes its output to the shared
               m->atty; the flash-style device kernels keep each row's log-sum-exp and
               the output */
            if (m->cx.device == EX_CPU) {
                a->probs = MDL__TF(&cv, (size_t)B * H * TT);
            } else {
                a->lse = MDL__TF(&cv, (size_t)B * H * T);
                a->atto = MDL__TF(&cv, N * C);
            }
            a->attm = MDL__TF(&cv, N * C);
        } else {
            /* (the polar mixer: a component, carved below) */
        }
        a->ap = MDL__TF(&cv, N * C);
        a->ao = sep_ao ? MDL__TF(&cv, N * C) : a->ap;
        if (c->prior != MDL_PRIOR_NONE) a->bias = MDL__TF(&cv, TT);
        if (drop) {
            a->mask_a = (uint8_t *)mdl__take(&cv, N * C);
            a->mask_f = (uint8_t *)mdl__take(&cv, N * C);
        }
        a->n2 = MDL__TF(&cv, N * C);
        /* the components' saved state, and host state kept per layer from the forward
           to the backward (the device model's MoE routing, computed on the host) */
        for (j = 0; j < MDL__NCP; j++) {
            const mdl__comp *q = &m->cp[j];
            int has = mdl__set_has(m, l, train, j);
            size_t hf = has && cv.split ? q->k->host_floats(q->d, B, T) : 0;
            size_t sf = has ? q->k->saved_floats(q->d, B, T) : 0;
            a->sv[j] = sf ? MDL__TF(&cv, sf) : NULL;
            a->hst[j] = hf ? MDL__THF(&cv, hf) : NULL;
        }
        a->mu = a->sv[MDL__CP_MEMB]; /* (the memberships' saved state: mu, then zproj) */
        a->zproj = a->mu ? a->mu + ((N * R + 15) & ~(size_t)15) : NULL;
        a->eta = a->sv[MDL__CP_RESG]; /* (the gates' saved state: eta; the sigmoids, then g) */
        a->vsig = a->sv[MDL__CP_VGATE];
        a->vg = a->vsig ? a->vsig + N * H : NULL;
        a->fp = MDL__TF(&cv, N * C);
        a->fo = sep_fo ? MDL__TF(&cv, N * C) : a->fp;
    }
    for (l = nsets; l < m->L; l++) m->ba[l] = m->ba[0];
    m->qkv = m->atty = m->lwork = m->gm = NULL;
    m->gsq = m->gsk = m->gsv = NULL;
    if (c->attn == MDL_ATTN_SOFTMAX) {
        m->qkv = MDL__TF(&cv, N * 3 * C);
        if (m->cx.device == EX_CPU) { /* the CPU's attention output, shared by the layers */
            m->atty = MDL__TF(&cv, N * C);
            for (l = 0; l < m->L; l++) m->ba[l].atto = m->atty;
        }
    }
    {
        size_t w = 0, x;
        /* one work buffer, the largest of the components' (they run one at a time) */
        for (j = 0; j < MDL__NCP; j++) {
            const mdl__comp *q = &m->cp[j];
            x = q->k ? q->k->work_floats(q->d, B, T) : 0;
            w = x > w ? x : w;
        }
        if (m->cp[MDL__CP_MEM].k) m->gm = MDL__TF(&cv, N * C);
        if (m->cp[MDL__CP_MEM].k && m->gdd.qkv_shared && train) {
            m->gsq = MDL__TF(&cv, N * C);
            m->gsk = MDL__TF(&cv, (size_t)N * m->pd.Hkv * (C / H));
            m->gsv = MDL__TF(&cv, (size_t)N * m->pd.Hkv * (C / H));
        }
        if (w) m->lwork = MDL__TF(&cv, w);
    }
    m->nf = MDL__TF(&cv, N * C);
    m->nf_sv = MDL__TF(&cv, m->cp[MDL__CP_N1].k->saved_floats(m->cp[MDL__CP_N1].d, B, T));
    m->logits = MDL__TF(&cv, N * V);
    m->rowce = (double *)mdl__take_h(&cv, sizeof(double) * N);
    m->rowloss = (double *)mdl__take_h(&cv, sizeof(double) * N);
    m->ids = (int *)mdl__take(&cv, sizeof(int) * N);
    m->tgt = (int *)mdl__take(&cv, sizeof(int) * N);
    m->temp = MDL__THF(&cv, L * H);
    m->temp_d = cv.split ? MDL__TF(&cv, L * H) : m->temp;
    { /* mdl__readback's: the tail, then (RPA) the memberships */
        const size_t nrf = MDL__MU_AT(N, L) + (c->prior == MDL_PRIOR_RPA ? (size_t)L * N * R : 0);
        m->rowf = cv.split ? MDL__TF(&cv, nrf) : NULL;
        m->rowfh = cv.split ? MDL__THF(&cv, nrf) : NULL;
    }
    m->status_d = cv.split ? (int *)mdl__take(&cv, sizeof(int)) : NULL;
    m->rpa_ws = m->era_ws = m->obs_ws = NULL;
    m->rpa_ws_n = m->era_ws_n = m->obs_ws_n = 0;
    if (c->prior == MDL_PRIOR_RPA) {
        era_rpa_config rc = m->cfg.rpa;
        m->rpa_ws_n = cv.split ? era_rpa_cuda_workspace_size(&rc, B, T) : era_rpa_workspace_size(&rc, B, T);
        m->rpa_ws = mdl__take(&cv, m->rpa_ws_n);
    }
    if (c->prior == MDL_PRIOR_ERA) {
        m->era_ws_n = cv.split ? era_era_cuda_workspace_size(&m->cfg.era, T) : era_era_workspace_size(&m->cfg.era, T);
        m->era_ws = mdl__take(&cv, m->era_ws_n);
    }
    if (obs) {
        m->obs_heads = (ceas_obs *)mdl__take_h(&cv, sizeof(ceas_obs) * L * H);
        m->obs_ws_n = ceas_attention_observables_workspace_size(1, (int)H, T);
        m->obs_ws = mdl__take_h(&cv, m->obs_ws_n);
    } else {
        m->obs_heads = NULL;
    }
    m->dres = m->dln = m->dbr = m->dq = m->dk = m->dv = m->datt = m->dqkv = NULL;
    m->dmu = m->deta = m->dbias = m->dtemp_d = NULL;
    if (train) {
        m->dres = MDL__TF(&cv, N * C);
        m->dln = MDL__TF(&cv, N * C);
        m->dbr = MDL__TF(&cv, N * C);
        if (c->attn == MDL_ATTN_SOFTMAX) {
            m->dq = MDL__TF(&cv, N * C);
            m->dk = MDL__TF(&cv, N * C);
            m->dv = MDL__TF(&cv, N * C);
            m->datt = MDL__TF(&cv, N * C);
            m->dqkv = MDL__TF(&cv, N * 3 * C);
        }
        if (m->need_mu) m->dmu = MDL__TF(&cv, N * R);
        if (c->res_gate) m->deta = MDL__TF(&cv, N);
        if (c->prior != MDL_PRIOR_NONE) m->dbias = MDL__TF(&cv, TT);
        if (c->gac_tau) m->dtemp_d = MDL__TF(&cv, H + 1); /* dtemp (device model), then a scalar */
    }
    if (hbytes) *hbytes = cv.hoff;
    return cv.off;
}

/* Grow the activation arenas to need (model's device) and hneed (host) bytes. */
static int mdl__grow(mdl_model *m, size_t need, size_t hneed, const char *who, int B, int T)
{
    if (need > m->act_bytes) {
        void *p = NULL;
        mdl__free_dev(m, m->act);
        m->act = NULL;
        m->act_bytes = 0;
        if (ex_alloc(&m->cx, &p, need) != TK_OK) p = NULL;
        if (!p) return mdl__fail(m, MDL_ENOMEM, "%s: out of memory for activations (%.1f MB at B %d, T %d%s)", who,
                                 (double)need / 1048576.0, B, T, m->cx.device == EX_CPU ? "" : ", device");
        m->act = p;
        m->act_bytes = need;
    }
    if (hneed > m->hact_bytes) {
        free(m->hact);
        m->hact = malloc(hneed);
        m->hact_bytes = m->hact ? hneed : 0;
        if (!m->hact) return mdl__fail(m, MDL_ENOMEM, "%s: out of memory (%.1f MB of host buffers)", who,
                                       (double)hneed / 1048576.0);
    }
    return MDL_OK;
}

static int mdl__ensure(mdl_model *m, int B, int T, int train, int obs)
{
    size_t hneed = 0, need = mdl__carve(m, B, T, train, obs, NULL, NULL, &hneed);
    int rc = mdl__grow(m, need, hneed, "mdl_forward", B, T);
    if (rc) return rc;
    mdl__carve(m, B, T, train, obs, (char *)m->act, (char *)m->hact, NULL);
    return MDL_OK;
}

int mdl_reserve(mdl_model *m, int B, int T)
{
    size_t need, hneed = 0;
    int rc;
    if (!m) return MDL_EINVAL;
    if (B <= 0 || T <= 0 || T > m->cfg.max_T)
        return mdl__fail(m, MDL_EINVAL, "mdl_reserve: need B >= 1 and 1 <= T <= max_T %d (got B %d, T %d)",
                         m->cfg.max_T, B, T);
    m->have_bwd = 0; /* the buffers may move */
    m->ffn_act_ok = 0;
    need = mdl__carve(m, B, T, 1, 1, NULL, NULL, &hneed);
    rc = mdl__grow(m, need, hneed, "mdl_reserve", B, T);
    if (rc) return rc;
    m->resB = B;
    m->resT = T;
    return MDL_OK;
}

size_t mdl_activation_bytes(const mdl_model *m) { return m ? m->act_bytes : 0; }

/* ------------------------------------------------------------------ small kernels */

/* exp in plain C that vectorises: x = n ln2 + r, degree-6 polynomial, 2^n via the
   exponent bits; 0 below -87, saturated above 88. */
static float mdl__expf(float x)
{
    float xc = x > -87.0f ? x : -87.0f, t, n, r, p, s;
    uint32_t bits;
    xc = xc < 88.0f ? xc : 88.0f;
    t = xc * 1.44269504088896341f;
    n = (t + 12582912.0f) - 12582912.0f;
    r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    bits = (uint32_t)((int32_t)n + 127) << 23;
    memcpy(&s, &bits, sizeof s);
    p *= s;
    return x < -87.0f ? 0.0f : p;
}

/* tanh via exp: 1 - 2 / (exp(2x) + 1), exact enough in fp32 for GELU */
/* out (N,OC) = inp (N,K) W^T (+ b); W (OC,K) */
static int mdl__linear(const ex_ctx *x, float *out, const float *inp, const float *W, const float *b, int N, int K,
                       int OC)
{
    return ex_matmul_fwd(x, out, inp, W, b, N, K, OC);
}

/* dinp (N,K) = beta dinp + dout W (beta 0 or 1; dinp may be NULL); dW (OC,K) += dout^T inp;
   db (OC) += column sums of dout (may be NULL) */
static int mdl__linear_bwd(const ex_ctx *x, float *dinp, float beta, float *dW, float *db, const float *dout,
                           const float *inp, const float *W, int N, int K, int OC)
{
    if (dinp && beta == 0.0f) {
        int rc = ex_zero(x, dinp, sizeof(float) * (size_t)N * K);
        if (rc != TK_OK) return rc;
    }
    return ex_matmul_bwd(x, dinp, dW, db, dout, inp, W, N, K, OC);
}

/* The 64-bit seed of one dropout site (layer l, branch k) of a forward: from the forward's
   seed through the PCG stream (l*4 + k); the mask is then tensor.h's counter-based
   tk_dropout_seeded_forward: a function of (seed, element), the same on both devices. */
static uint64_t mdl__drop_seed(uint64_t seed, int l, int k)
{
    tk_rng rng;
    uint64_t hi;
    tk_rng_seed(&rng, seed, (uint64_t)l * 4 + (uint64_t)k);
    hi = tk_rng_u32(&rng);
    return (hi << 32) | tk_rng_u32(&rng);
}

float mdl_scalar_get(const mdl_model *m, const float *base, size_t off)
{
    float v = 0.0f; /* (set by the copy; initialised for gcc -O3's -Wmaybe-uninitialized) */
    if (!m || !base) return (float)NAN;
    if (ex_to_host(&m->cx, &v, base + off, sizeof v) != TK_OK) return (float)NAN;
    return v;
}

int mdl_scalars_get(const mdl_model *m, const float *base, const size_t *off, int n, float *out)
{
    int i, k, rc = MDL_OK;
    if (!m || n < 0 || (n > 0 && (!base || !off || !out))) return MDL_EINVAL;
    if (m->cx.device == EX_CPU) {
        for (i = 0; i < n; i++) out[i] = base[off[i]];
        return MDL_OK;
    }
    for (i = 0; i < n; i += k) { /* (sc_cap >= MDL_MAX_LAYERS floats: one round for a layer's list) */
        int j;
        k = n - i < (int)m->sc_cap ? n - i : (int)m->sc_cap;
        for (j = 0; j < k && rc == MDL_OK; j++)
            if (ex_copy(&m->cx, m->sc_d + j, base + off[i + j], sizeof(float)) != TK_OK) rc = MDL_EFAIL;
        if (rc == MDL_OK && ex_to_host(&m->cx, out + i, m->sc_d, sizeof(float) * (size_t)k) != TK_OK) rc = MDL_EFAIL;
        if (rc != MDL_OK) break;
    }
    if (rc != MDL_OK)
        for (i = 0; i < n; i++) out[i] = (float)NAN;
    return rc;
}

/* The mirror's refresh (mdl_forward, before the blocks): on a device model each block's
   span is copied into the device staging sc_d at its mirror offset (device copies on the
   model's stream, no wait), then the whole mirror is read back with one copy (one host
   wait per forward, not one per block); on the CPU a memcpy per block. A failed copy
   leaves NaN there (as a failed scalar read did), which the forward's checks or the
   trainer's finiteness checks catch. */
static void mdl__scal_refresh(mdl_model *m)
{
    int l;
    if (m->cx.device != EX_CPU) {
        size_t nsc = 0, i;
        int ok = 1;
        for (l = 0; l < m->L; l++) {
            if (!m->sc_n[l]) continue;
            if (ex_copy(&m->cx, m->sc_d + m->sc_at[l], m->params + m->sc_lo[l], sizeof(float) * m->sc_n[l]) !=
                TK_OK)
                ok = 0;
            nsc = m->sc_at[l] + m->sc_n[l];
        }
        if (!nsc) return;
        if (!ok || ex_to_host(&m->cx, m->sc, m->sc_d, sizeof(float) * nsc) != TK_OK)
            for (i = 0; i < nsc; i++) m->sc[i] = (float)NAN;
        return;
    }
    for (l = 0; l < m->L; l++) {
        float *d;
        size_t i;
        if (!m->sc_n[l]) continue; /* (sc is NULL when no block has any) */
        d = m->sc + m->sc_at[l];
        if (ex_to_host(&m->cx, d, m->params + m->sc_lo[l], sizeof(float) * m->sc_n[l]) != TK_OK)
            for (i = 0; i < m->sc_n[l]; i++) d[i] = (float)NAN;
    }
}

/* Block l's scalar parameter at off (one of its five; present) from the mirror. */
static float mdl__scal(const mdl_model *m, int l, size_t off)
{
    return m->sc[m->sc_at[l] + (off - m->sc_lo[l])];
}

/* ------------------------------------------------------------------ forward */

static era_rpa_params mdl__rpa_params(const mdl_model *m, int l)
{
    const mdl__bp *b = &m->bp[l];
    const float *P = m->params;
    era_rpa_params p = era_rpa_params_default();
    p.D = m->C;
    p.P = m->C;
    p.W = P + b->memw;
    p.b = P + b->memb;
    p.centers = P + b->memc;
    p.log_sigma = P + b->mems;
    if (b->tau != MDL__ABSENT) p.tau_att = mdl__scal(m, l, b->tau);
    if (b->posb != MDL__ABSENT) p.pos_beta = mdl__scal(m, l, b->posb);
    return p;
}

static era_era_params mdl__era_params(const mdl_model *m, int l)
{
    const mdl__bp *b = &m->bp[l];
    era_era_params p = era_era_params_default(m->params + b->erac);
    p.sigma = expf(mdl__scal(m, l, b->eras));
    p.alpha = mdl__scal(m, l, b->eraa);
    return p;
}

static int mdl__check_ids(mdl_model *m, const int *ids, size_t n, const char *what)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->V)
            return mdl__fail(m, MDL_ERANGE, "%s[%lu] = %d is outside [0, %d)", what,
                             (unsigned long)i, ids[i], m->V);
    return MDL_OK;
}

static int mdl__sigreg(mdl_model *m, int l, double *R);
#define MDL__TRY(expr, what)                                                             \
    do {                                                                                 \
        int rc_ = (expr);                                                                \
        if (rc_ != 0) return mdl__fail(m, MDL_EFAIL, "%s failed (code %d)", what, rc_);  \
    } while (0)

/* era_cache membership source: the running table of layer l, rows 0..T-1. */
static int mdl__prior_mu(void *user, int T, float *mbar)
{
    const struct mdl__pctx *p = (const struct mdl__pctx *)user;
    const mdl_model *m = p->m;
    if (!m->pstats || T > m->cfg.max_T) return ERA_EINVAL;
    memcpy(mbar, m->pstats + (size_t)p->l * m->cfg.max_T * m->R, sizeof(float) * (size_t)T * m->R);
    return ERA_OK;
}

/* The cached prior of layer l at length T: a layer's cache is rebuilt whenever what the
   bias depends on changed (running statistics, tau_att, pos_beta, warm-in scale). */
static int mdl__prior_cached(mdl_model *m, int l, const era_rpa_params *rp, int T, const float **out)
{
    /* the host cache (CPU model) or its device twin (device model: B(T) built by the
       device prior from the same running table, kept in device memory) */
    const era_rpa_params *cpar = ex_rpa_cache_params(&m->cx, &m->pcache[l]);
    const era_rpa_config *ccfg = ex_rpa_cache_config(&m->cx, &m->pcache[l]);
    int rc;
    if (m->pcache_on[l] &&
        (m->pcache_gen[l] != m->pgen || cpar->tau_att != rp->tau_att || cpar->pos_beta != rp->pos_beta ||
         ccfg->scale != m->rpa_used.scale)) {
        m->pc_builds += ex_rpa_cache_builds(&m->cx, &m->pcache[l]);
        m->pc_hits += ex_rpa_cache_hits(&m->cx, &m->pcache[l]);
        mdl__pcache_free(m, l);
    }
    if (!m->pcache_on[l]) {
        size_t budget = (size_t)2 * (size_t)m->cfg.max_T * (size_t)m->cfg.max_T * sizeof(float);
        rc = ex_rpa_cache_init(&m->cx, &m->pcache[l], budget, &m->rpa_used, rp, mdl__prior_mu, &m->pctx[l]);
        if (rc) return rc;
        m->pcache_on[l] = 1;
        m->pcache_gen[l] = m->pgen;
        m->pdiag_T[l] = 0;
    }
    if (m->pdiag_T[l] != T) {
        /* diagnostics of the cached prior (factored state only, no (T,T) pass; on the
           host from the host running table on either device) */
        era_rpa_state ds = era_rpa_state_init();
        rc = era_rpa_forward(&m->rpa_used, rp, m->pstats + (size_t)l * m->cfg.max_T * m->R, 1, T, NULL, &ds, NULL);
        if (rc == ERA_OK) {
            m->pdiag[l][0] = ds.marginal_err;
            m->pdiag[l][1] = ds.std_pre;
            m->pdiag[l][2] = ds.clamp_frac;
            m->pdiag_T[l] = T;
        }
        era_rpa_state_free(&ds);
        if (rc) return rc;
    }
    return ex_rpa_cache_get(&m->cx, &m->pcache[l], T, out);
}

/* The device attention's arithmetic: the device GEMMs' (tk_cuda_set_math) where the
   tensor-core kernels take the head width (a multiple of 16, <= 128), else fp32. */
static tk_attention_cuda_config mdl__attn_cfg(const mdl_model *m)
{
    tk_attention_cuda_config ac = tk_attention_cuda_config_default();
    if (m->D % 16 == 0 && m->D <= 128) ac.math = tk_cuda_get_math();
    ac.status = m->status_d; /* deferred checks: read once per forward (mdl__readback) */
    return ac;
}

/* A device forward's one host read (issue 39 item 2): the row losses (when the forward has
   targets; its cross-entropy already queued), the deferred checks' word, the layers'
   membership sums and (m->ent_back) their attention moment sums come back with one copy:
   status_d and mu_sums are copied (on the stream, no wait) into rowf's tail first (the
   moment sums are there already). The word was zeroed at the start of the forward; the
   device attention (non-finite rows, temperatures) and the id checks of the embedding and
   the cross-entropy (ids the host checked already: mdl__check_ids) leave a nonzero value
   there, and so do the memory's input scan (gd_config.status through ex_gd_fwd) and ERA's
   centre check (era_era_config.status through ex_era_fwd; not in decoding's B(W)). A
   backward's checks are not read: they see what the forward before them saw (the
   same ids, no update between them), and the next forward zeroes the word. Nonzero: the
   forward fails (and what it wrote is not used). */
static int mdl__readback(mdl_model *m, int with_rows, int N)
{
    const size_t tl = MDL__TAIL(N), nmu = (size_t)N * m->R, L = (size_t)m->L;
    /* a training forward with the RPA running statistics: every layer's memberships too
       (mdl_prior_stats_update reads them after the step), behind the sums' room */
    const int with_mu = m->train && m->cfg.prior == MDL_PRIOR_RPA && m->pstats && nmu > 0;
    /* floats after the status word and its pad that come back: the membership sums, then
       (m->ent_back) the attention moment sums, then (with_mu) the memberships */
    size_t span = m->need_mu ? 6 * L : 0;
    int st = 0, l;
    m->mu_back = 0;
    if (m->cx.device == EX_CPU) return MDL_OK;
    if (ex_copy(&m->cx, m->rowf + tl, m->status_d, sizeof(int)) != TK_OK ||
        (span && ex_copy(&m->cx, m->rowf + tl + 2, m->mu_sums, sizeof(float) * span) != TK_OK))
        return mdl__fail(m, MDL_EFAIL, "mdl_forward: staging the forward's read-back failed");
    if ((m->ent_back || with_mu) && !span && ex_zero(&m->cx, m->rowf + tl + 2, sizeof(float) * 6 * L) != TK_OK)
        return mdl__fail(m, MDL_EFAIL, "mdl_forward: staging the forward's read-back failed");
    if (m->ent_back) span = MDL__ENT_AT(N, L) - tl - 2 + TK_ATTN_NSTATS * L; /* (written by the blocks) */
    if (with_mu) {
        if (!m->ent_back &&
            ex_zero(&m->cx, m->rowf + MDL__ENT_AT(N, L), sizeof(float) * TK_ATTN_NSTATS * L) != TK_OK)
            return mdl__fail(m, MDL_EFAIL, "mdl_forward: staging the forward's read-back failed");
        for (l = 0; l < m->L; l++)
            if (ex_copy(&m->cx, m->rowf + MDL__MU_AT(N, m->L) + (size_t)l * nmu, m->ba[l].mu, sizeof(float) * nmu) !=
                TK_OK)
                return mdl__fail(m, MDL_EFAIL, "mdl_forward: staging the memberships failed");
        span = MDL__MU_AT(N, L) - tl - 2 + L * nmu;
    }
    if (with_rows) {
        if (ex_to_host(&m->cx, m->rowfh, m->rowf, sizeof(float) * (tl + 2 + span)) != TK_OK)
            return mdl__fail(m, MDL_EFAIL, "mdl_forward: copy of the row losses failed");
    } else if (ex_to_host(&m->cx, m->rowfh + tl, m->rowf + tl, sizeof(float) * (2 + span)) != TK_OK) {
        return mdl__fail(m, MDL_EFAIL, "mdl_forward: reading the device's checks failed");
    }
    m->mu_back = with_mu;
    memcpy(&st, m->rowfh + tl, sizeof st);
    if (!st) return MDL_OK;
    return mdl__fail(m, MDL_EINVAL, "mdl_forward: a device check failed: a row of attention logits + bias not finite "
                                    "(NaN or +Inf in q, k or the prior), a head temperature not finite and > 0, a "
                                    "non-finite or out-of-range input of the gated-delta memory, a non-finite ERA "
                                    "centre, or an id out of range");
}

static int mdl__attn_bwd_gated(mdl_model *m, int l, const float *dout, float *dbias);
static int mdl__gate_layer_dense(const mdl_model *m, int l);
static int mdl__gate_layer_frozen(const mdl_model *m, int l);
static int mdl__proj_bwd_gated(mdl_model *m, int l, int qkv);
static void mdl__gate_count(mdl_model *m);

/* The fixed prior's B(T) (SINUSOID / RELATIVE) at scale 1, from the cache: a hit returns
   the slot of length T, a miss builds it with era.h into the least recently used slot
   (a pure function of T and cfg.fixed_prior, so nothing else can make a slot stale). */
static int mdl__fixed_bias(mdl_model *m, int T, const float **out)
{
    era_pos_config pc = m->cfg.fixed_prior;
    size_t TT = (size_t)T * (size_t)T;
    int i, v = 0, rc;
    *out = NULL;
    for (i = 0; i < MDL__FXB_SLOTS; i++) {
        if (m->fxb_T[i] == T && m->fxb[i]) {
            m->fxb_use[i] = ++m->fxb_tick;
            m->fxb_hits++;
            *out = m->fxb[i];
            return MDL_OK;
        }
        if (m->fxb_use[i] < m->fxb_use[v]) v = i;
    }
    free(m->fxb[v]);
    m->fxb_T[v] = 0;
    m->fxb[v] = (float *)malloc(sizeof(float) * TT);
    if (!m->fxb[v]) return mdl__fail(m, MDL_ENOMEM, "fixed prior B(T) for T = %d: out of memory", T);
    pc.scale = 1.0f; /* the warm-in is opts.prior_scale, applied per forward */
    pc.max_T = m->cfg.max_T;
    rc = m->cfg.prior == MDL_PRIOR_SINUSOID ? era_sinusoid_bias(&pc, T, m->fxb[v]) : era_relative_bias(&pc, T, m->fxb[v]);
    if (rc != ERA_OK) {
        free(m->fxb[v]);
        m->fxb[v] = NULL;
        return mdl__fail(m, rc == ERA_ENOMEM ? MDL_ENOMEM : MDL_EINVAL, "fixed %s prior for T = %d failed (%s)",
                         m->cfg.prior == MDL_PRIOR_SINUSOID ? "sinusoid" : "relative", T, era_strerror(rc));
    }
    m->fxb_T[v] = T;
    m->fxb_use[v] = ++m->fxb_tick;
    m->fxb_builds++;
    *out = m->fxb[v];
    return MDL_OK;
}

/* Softmax attention of block l: a->n1 -> a->ap (the prior bias, the observables). */
static int mdl__softmax_fwd(mdl_model *m, int l, const mdl_opts *o, mdl_stats *st)
{
    const mdl_config *c = &m->cfg;
    const mdl__bp *b = &m->bp[l];
    mdl__ba *a = &m->ba[l];
    float *P = m->params;
    int B = m->B, T = m->T, N = B * T, C = m->C, H = m->H, D = m->D;
    const float *bias = NULL;
    MDL__TRY(mdl__linear(&m->cx, m->qkv, a->n1, P + b->qkv, NULL, N, C, 3 * C), "qkv GEMM");
    MDL__TRY(ex_split_heads_fwd(&m->cx, a->q, a->k, a->v, m->qkv, B, T, H, D), "split heads");
    if (c->pos == MDL_POS_ROPE) {
        /* the rotated q, k are what the attention (and its backward) sees */
        MDL__TRY(ex_rope(&m->cx, a->q, B, H, T, D, (float)MDL_ROPE_BASE, 0), "RoPE q");
        MDL__TRY(ex_rope(&m->cx, a->k, B, H, T, D, (float)MDL_ROPE_BASE, 0), "RoPE k");
    }
    if (c->prior == MDL_PRIOR_RPA) {
        era_rpa_params rp = mdl__rpa_params(m, l);
        if (m->prior_running && !m->train) {
            /* evaluation: B(T) from the running statistics, built once per (T, parameters) */
            const float *cb = NULL;
            int rc = mdl__prior_cached(m, l, &rp, T, &cb);
            if (rc) return mdl__fail(m, MDL_EFAIL, "cached RPA prior of layer %d failed (%s)", l, era_strerror(rc));
            bias = cb;
            st->layer_prior_marg_err[l] = m->pdiag[l][0];
            st->layer_prior_std_pre[l] = m->pdiag[l][1];
            st->layer_prior_clamp_frac[l] = m->pdiag[l][2];
        } else {
            /* training (or the old per-batch evaluation): batch means of this forward, or
               the running table as a batch of one (state keeps the pointer until backward) */
            const float *mu = a->mu;
            if (m->prior_running) {
                /* the prior reads the running table from the model's memory: one upload
                   (a copy on the CPU) per change of the table */
                size_t nmu = (size_t)m->L * (size_t)c->max_T * (size_t)m->R;
                if (!m->pstats_d) {
                    void *d = NULL;
                    if (ex_alloc(&m->cx, &d, sizeof(float) * nmu) != TK_OK)
                        return mdl__fail(m, MDL_ENOMEM, "running prior table: out of memory");
                    m->pstats_d = (float *)d;
                    m->pstats_d_gen = 0;
                }
                if (m->pstats_d_gen != m->pgen + 1) {
                    MDL__TRY(ex_to_ctx(&m->cx, m->pstats_d, m->pstats, sizeof(float) * nmu),
                             "upload of the running table");
                    m->pstats_d_gen = m->pgen + 1;
                }
                mu = m->pstats_d + (size_t)l * c->max_T * m->R;
            }
            MDL__TRY(ex_rpa_fwd(&m->cx, &m->rpa_used, &rp, mu, m->prior_running ? 1 : B, T, a->bias, &m->rpa_st[l],
                                &m->rpa_cst[l], m->rpa_ws),
                     "era_rpa_forward");
            bias = a->bias;
            st->layer_prior_marg_err[l] = m->rpa_st[l].marginal_err;
            st->layer_prior_std_pre[l] = m->rpa_st[l].std_pre;
            st->layer_prior_clamp_frac[l] = m->rpa_st[l].clamp_frac;
        }
    } else if (c->prior == MDL_PRIOR_ERA) {
        era_era_params ep = mdl__era_params(m, l);
        MDL__TRY(ex_era_fwd(&m->cx, &c->era, &ep, T, a->bias, &m->era_st[l], &m->era_cst[l], m->era_ws),
                 "era_era_forward");
        if (m->era_scale_used != 1.0f)
            MDL__TRY(ex_scale(&m->cx, a->bias, a->bias, m->era_scale_used, (size_t)T * T), "ERA warm-in scale");
        bias = a->bias;
    } else if (mdl__prior_fixed(c)) {
        /* the cached B(T) (looked up once per forward), read in place; the warm-in scale
           writes a scaled copy */
        bias = m->fxb_cur;
        if (!bias) return mdl__fail(m, MDL_EFAIL, "layer %d: no fixed prior bias for T = %d", l, T);
        if (m->era_scale_used != 1.0f) {
            MDL__TRY(ex_scale(&m->cx, a->bias, bias, m->era_scale_used, (size_t)T * T), "fixed prior warm-in scale");
            bias = a->bias;
        }
    }
    if (c->prior == MDL_PRIOR_RPA) st->layer_tau_att[l] = mdl__scal(m, l, b->tau);
    if (c->gac_tau) {
        /* GAC (seed 003 eq. 8): softmax((qk/sqrt(D) + B) / tau_gac): the temperature of
           every head of the layer times tau_gac, the bias divided by it */
        float g = mdl__scal(m, l, b->gtau);
        int h;
        if (!mdl__finite(g) || !(g > 0.0f))
            return mdl__fail(m, MDL_EINVAL, "layer %d: gac_tau must be finite and > 0 (got %g)", l, (double)g);
        for (h = 0; h < H; h++) m->temp[(size_t)l * H + h] *= g;
        if (m->temp_d != m->temp)
            MDL__TRY(ex_to_ctx(&m->cx, m->temp_d + (size_t)l * H, m->temp + (size_t)l * H, sizeof(float) * (size_t)H),
                     "copy of the temperatures");
        if (bias && g != 1.0f) {
            MDL__TRY(ex_scale(&m->cx, a->bias, bias, 1.0f / g, (size_t)T * T), "GAC bias scale");
            bias = a->bias;
        }
        st->layer_tau_gac[l] = g;
    }
    m->bias_used[l] = bias; /* (the backward's: a->bias, or the fixed prior's cached B(T)) */
    {
        /* The entropy (GAC, the entropy band) and CEAS's observables and gate rows come
           from the moments tk_attention_forward_stats gathers in its softmax pass (no
           second pass over the logits or probabilities, no logit GEMM). */
        const int gate = o->want_gate_rows && o->train, ent = c->gac_tau || o->ent_band_lambda > 0.0f;
        const long long nrow = (long long)B * H * T;
        float beta[256];
        int h;
        for (h = 0; h < H && h < 256; h++) beta[h] = 1.0f / (sqrtf((float)D) * m->temp[(size_t)l * H + h]);
        if (m->cx.device != EX_CPU) { /* (issue 39 item 4: one contract for both devices) */
            /* flash-style: keeps each row's log-sum-exp and the output for the backward.
               The softmax-row moments, when asked, come from the same kernel and are
               copied to the host buffer the CPU path fills (gate rows are refused before
               the forward) */
            tk_attention_cuda_config ac = mdl__attn_cfg(m);
            float *sd = NULL;
            const size_t need = (gate || ent || o->want_attn_obs) ? (size_t)nrow * TK_ATTN_NSTATS : 0;
            /* a training forward with the entropy in the loss keeps every layer's moments
               on the device: the backward's entropy term reads its rows' H (the layer's
               column sums go to the read-back's room, below) */
            const size_t dneed = ent && m->train ? (size_t)m->L * need : need;
            const int host_rows = gate || o->want_attn_obs; /* the host reads every row */
            if (host_rows && need > m->attn_stats_cap) {
                float *p = (float *)realloc(m->attn_stats, need * sizeof(float));
                if (!p) return mdl__fail(m, MDL_ENOMEM, "attention statistics: out of memory");
                m->attn_stats = p;
                m->attn_stats_cap = need;
            }
            if (dneed > m->attn_stats_dcap) {
                void *d = NULL;
                mdl__free_dev(m, m->attn_stats_d);
                m->attn_stats_d = NULL;
                m->attn_stats_dcap = 0;
                if (ex_alloc(&m->cx, &d, dneed * sizeof(float)) != TK_OK)
                    return mdl__fail(m, MDL_ENOMEM, "attention statistics: out of device memory");
                m->attn_stats_d = (float *)d;
                m->attn_stats_dcap = dneed;
            }
            if (need) sd = m->attn_stats_d + (dneed > need ? (size_t)l * need : 0);
            MDL__TRY(tk_attention_forward_stats_cuda(a->atto, a->lse, sd, a->q, a->k, a->v, bias, 0,
                                                     m->temp_d + (size_t)l * H, B, H, T, D, &ac, m->cx.stream),
                     "tk_attention_forward_stats_cuda");
            if (host_rows) {
                MDL__TRY(ex_to_host(&m->cx, m->attn_stats, sd, need * sizeof(float)),
                         "copy of the attention statistics");
            } else if (ent) {
                /* the layer's mean entropy only: the moments' column sums on the device
                   (tk_matmul_backward's bias gradient: a fixed-order reduction) into the
                   read-back's room for them (zeroed by mdl_forward, m->ent_back), read
                   with the row losses after the blocks: no wait here */
                float *cs = m->rowf + MDL__ENT_AT((size_t)B * T, m->L) + (size_t)l * TK_ATTN_NSTATS;
                if (!m->ent_back) return mdl__fail(m, MDL_EINVAL, "attention entropy: no read-back room");
                MDL__TRY(ex_matmul_bwd(&m->cx, NULL, NULL, cs, sd, NULL, NULL, (int)nrow, 1, TK_ATTN_NSTATS),
                         "mean attention entropy");
            }
        } else if (!gate && !ent && !o->want_attn_obs) {
            MDL__TRY(tk_attention_forward(m->atty, a->probs, a->q, a->k, a->v, bias, 0, m->temp + (size_t)l * H,
                                          B, H, T, D), "tk_attention_forward");
        } else {
            const size_t need = (size_t)nrow * TK_ATTN_NSTATS;
            if (need > m->attn_stats_cap) {
                float *p = (float *)realloc(m->attn_stats, need * sizeof(float));
                if (!p) return mdl__fail(m, MDL_ENOMEM, "attention statistics: out of memory");
                m->attn_stats = p;
                m->attn_stats_cap = need;
            }
            MDL__TRY(tk_attention_forward_stats(NULL, m->atty, a->probs, m->attn_stats, a->q, a->k, a->v, bias, 0,
                                                m->temp + (size_t)l * H, B, H, T, D),
                     "tk_attention_forward_stats");
        }
        if (gate || o->want_attn_obs) /* the moments: ~6 FLOPs per causal logit */
            m->gcount.gate_overhead += 6.0 * (double)B * H * T * (T + 1) / 2.0;
        if (gate) {
            MDL__TRY(ceas_attention_observables_from_moments(m->attn_stats, B, H, T, TK_ATTN_NSTATS, beta,
                                                             m->gate_rows + (size_t)l * nrow, NULL, NULL),
                     "CEAS gate rows");
            m->gcount.gate_overhead += 20.0 * (double)nrow; /* the per-row conversion */
        }
        if (ent && (m->cx.device == EX_CPU || gate || o->want_attn_obs)) {
            /* mean attention entropy of the layer over batch, heads and query rows (nats),
               summed in row order: thread-count independent (the device model without the
               host rows summed it above) */
            double hs = 0.0;
            long long r;
            for (r = 0; r < nrow; r++) hs += (double)m->attn_stats[(size_t)r * TK_ATTN_NSTATS];
            st->layer_attn_H[l] = (float)(hs / (double)nrow);
        }
        if (o->want_attn_obs) /* pooled over batch row 0 (its rows come first) */
            MDL__TRY(ceas_attention_observables_from_moments(m->attn_stats, 1, H, T, TK_ATTN_NSTATS, beta, NULL,
                                                             m->obs_heads + (size_t)l * H, m->obs_ws),
                     "CEAS observables");
    }
    MDL__TRY(ex_merge_heads_fwd(&m->cx, a->attm, a->atto, B, T, H, D),
             "merge heads");
    MDL__TRY(mdl__linear(&m->cx, a->ap, a->attm, P + b->proj, NULL, N, C, C), "attention projection");
    return MDL_OK;
}

/* A gated residual branch: out (N,C) = x + eta * br (eta (N) per token, NULL means 1);
   its backward is mdl__branch_bwd. */
static int mdl__branch_fwd(const ex_ctx *cx, float *out, const float *x, const float *br, const float *eta,
                           int N, int C)
{
    if (!eta) return ex_residual_fwd(cx, out, x, br, (size_t)N * C);
    return ex_residual_rows_fwd(cx, out, x, br, eta, N, C);
}

/* The lyr_io of block l's component in slot j: its parameters (Pp) and, with Gp, their
   gradients, its saved, work and host buffers, B and T; the caller sets the rest. */
static void mdl__io(const mdl_model *m, const mdl__comp *q, const size_t *off, float *saved, float *host,
                    lyr_io *io, const float **Pp, float **Gp)
{
    int k;
    for (k = 0; k < q->np; k++) {
        Pp[k] = m->params + off[k];
        if (Gp) Gp[k] = m->grads + off[k];
    }
    memset(io, 0, sizeof *io);
    io->P = Pp;
    io->G = Gp;
    io->saved = saved;
    io->work = m->lwork;
    io->host = host;
    io->B = m->B;
    io->T = m->T;
}

static void mdl__comp_io(const mdl_model *m, int l, int j, lyr_io *io, const float **Pp, float **Gp)
{
    mdl__io(m, &m->cp[j], m->bp[l].cp[j], m->ba[l].sv[j], m->ba[l].hst[j], io, Pp, Gp);
}

/* The FFN slot's dims for layer l with gains gain (L): the shared dims when the FFN is
   not the MLP or the layer's gain is 1 (the path of a model without gains, unchanged),
   else a copy in tmp with the layer's gain. */
static const void *mdl__ffn_dims(const mdl_model *m, int l, const float *gain, lyr_mlp_dims *tmp)
{
    if (m->cp[MDL__CP_FFN].d != (const void *)&m->mlpd || gain[l] == 1.0f) return m->cp[MDL__CP_FFN].d;
    *tmp = m->mlpd;
    tmp->gain = gain[l];
    return tmp;
}

/* the forward / backward of slot j's component */
static int mdl__cfwd(mdl_model *m, int j, lyr_io *io) { return m->cp[j].k->forward(&m->cx, m->cp[j].d, io); }
static int mdl__cbwd(mdl_model *m, int j, lyr_io *io) { return m->cp[j].k->backward(&m->cx, m->cp[j].d, io); }

/* One block forward. x (N,C): block input; xo (N,C): output (may equal x in eval). */
static int mdl__block_fwd(mdl_model *m, int l, const float *x, float *xo, const mdl_opts *o,
                          mdl_stats *st)
{
    const mdl_config *c = &m->cfg;
    mdl__ba *a = &m->ba[l];
    int B = m->B, T = m->T, N = B * T, C = m->C, rc, mix;
    size_t NC = (size_t)N * C;
    int drop = o->train && c->dropout > 0.0f;
    float *xm = m->train ? a->xmid : xo;
    const float *Pp[LYR_MAX_PARAMS];
    lyr_io io;
    lyr_mlp_dims ffd;
    /* memberships */
    if (m->cp[MDL__CP_MEMB].k) { /* mu (a->mu); its statistics into mu_sums row l, read after the blocks */
        mdl__comp_io(m, l, MDL__CP_MEMB, &io, Pp, NULL);
        io.x = x;
        io.sums = m->mu_sums + 3 * (size_t)l;
        MDL__TRY(mdl__cfwd(m, MDL__CP_MEMB, &io), "era_membership_forward");
    }
    if (m->cp[MDL__CP_RESG].k) { /* eta (N) = sigmoid(mu . w), in its saved buffer (a->eta) */
        mdl__comp_io(m, l, MDL__CP_RESG, &io, Pp, NULL);
        io.mu = a->mu;
        MDL__TRY(mdl__cfwd(m, MDL__CP_RESG, &io), "residual gate");
    }
    /* attention */
    mdl__comp_io(m, l, MDL__CP_N1, &io, Pp, NULL);
    io.x = x;
    io.out = a->n1p ? a->n1p : a->n1;
    MDL__TRY(mdl__cfwd(m, MDL__CP_N1, &io), "norm1");
    if (m->cp[MDL__CP_CONV].k) { /* n1 = n1p + conv(n1p) */
        mdl__comp_io(m, l, MDL__CP_CONV, &io, Pp, NULL);
        io.x = a->n1p;
        io.out = a->n1;
        MDL__TRY(mdl__cfwd(m, MDL__CP_CONV, &io), "convolution");
    }
    mix = m->lconv[l] ? MDL__CP_LFM : MDL__CP_MIX;
    mdl__comp_io(m, l, mix, &io, Pp, NULL); /* the mixer (attention or gated conv): n1 -> ap */
    io.layer = l;
    io.x = a->n1;
    io.out = a->ap;
    io.train = o->train;
    io.seed = o->seed * 0x9E3779B97F4A7C15ULL + (uint64_t)l * 2 + 1;
    rc = mdl__kret(m, mdl__cfwd(m, mix, &io), "mixer forward");
    if (rc) return rc;
    if (o->train) m->lyr_loss += io.stat; /* (polar: the distractor loss) */
    if (mdl__has(m, l, MDL__CP_MEM)) { /* the memory channel: ap += mem(n1) */
        const float *sq = NULL, *sk = NULL, *sv = NULL;
        if (m->gdd.qkv_shared) /* the polar attention's scored q, k, v, in its saved state */
            MDL__TRY(lyr_polar_qkv(&m->pd, a->sv[MDL__CP_MIX], B, T, &sq, &sk, &sv), "memory q/k/v");
        mdl__comp_io(m, l, MDL__CP_MEM, &io, Pp, NULL);
        io.mq = sq;
        io.mk = sk;
        io.mv = sv;
        io.x = a->n1;
        io.out = m->gm;
        io.train = o->train;
        io.seed = o->seed;
        MDL__TRY(m->cp[MDL__CP_MEM].k->forward(&m->cx, m->cp[MDL__CP_MEM].d, &io), "memory forward");
        MDL__TRY(ex_residual_fwd(&m->cx, a->ap, a->ap, m->gm, NC), "memory channel");
    }
    if (m->cp[MDL__CP_VGATE].k) { /* ao = g * ap, g from the memberships */
        mdl__comp_io(m, l, MDL__CP_VGATE, &io, Pp, NULL);
        io.mu = a->mu;
        io.x = a->ap;
        io.out = a->ao;
        MDL__TRY(mdl__cfwd(m, MDL__CP_VGATE, &io), "value gate");
    } else if (a->ao != a->ap) {
        MDL__TRY(ex_copy(&m->cx, a->ao, a->ap, sizeof(float) * NC), "copy");
    }
    if (drop)
        MDL__TRY(ex_dropout_fwd(&m->cx, a->ao, a->mask_a, a->ao, NC, c->dropout, mdl__drop_seed(o->seed, l, 1)),
                 "attention dropout");
    MDL__TRY(mdl__branch_fwd(&m->cx, xm, x, a->ao, a->eta, N, C), "attention residual");
    /* FFN */
    mdl__comp_io(m, l, MDL__CP_N2, &io, Pp, NULL);
    io.x = xm;
    io.out = a->n2;
    MDL__TRY(mdl__cfwd(m, MDL__CP_N2, &io), "norm2");
    mdl__comp_io(m, l, MDL__CP_FFN, &io, Pp, NULL); /* the FFN: n2 (, mu) -> fp */
    io.x = a->n2;
    io.mu = a->mu;
    io.out = a->fp;
    io.train = o->train;
    io.seed = o->seed * 0x9E3779B97F4A7C15ULL + (uint64_t)l * 2 + 2;
    MDL__TRY(m->cp[MDL__CP_FFN].k->forward(&m->cx, mdl__ffn_dims(m, l, m->gain_fwd, &ffd), &io), "FFN forward");
    if (c->ffn == MDL_FFN_MOE) st->moe_lb += io.stat / (float)m->L;
    if (a->fo != a->fp) MDL__TRY(ex_copy(&m->cx, a->fo, a->fp, sizeof(float) * NC), "copy");
    if (drop)
        MDL__TRY(ex_dropout_fwd(&m->cx, a->fo, a->mask_f, a->fo, NC, c->dropout, mdl__drop_seed(o->seed, l, 2)),
                 "FFN dropout");
    MDL__TRY(mdl__branch_fwd(&m->cx, xo, xm, a->fo, a->eta, N, C), "FFN residual");
    return MDL_OK;
}

/* Cross-entropy over the (N,V) logits in place: per-row pure CE and smoothed loss; with
   keep the row becomes d(mean loss)/d(logits) = (softmax - q) / N, q = (1-eps) onehot +
   eps/V: the backward's dlogits, computed in the pass that normalises the softmax (one
   fewer sweep over the (N,V) buffer than a separate backward pass). */
static void mdl__ce(mdl_model *m, const int *tgt, int N, float eps, int keep, const float *w, double wsum)
{
    int V = m->V, i;
    MDL__OMP(omp parallel for schedule(static) if((long long)N * V > 65536))
    for (i = 0; i < N; i++) {
        float *x = m->logits + (size_t)i * V;
        float mx = x[0], lane[16], ls[16], inv;
        double sum = 0.0, sx = 0.0, lse, xy = tgt ? (double)x[tgt[i]] : 0.0;
        int v, j;
        for (j = 0; j < 16; j++) lane[j] = x[0];
        for (v = 0; v + 16 <= V; v += 16)
            for (j = 0; j < 16; j++) lane[j] = x[v + j] > lane[j] ? x[v + j] : lane[j];
        for (; v < V; v++) lane[0] = x[v] > lane[0] ? x[v] : lane[0];
        for (j = 0; j < 16; j++) mx = lane[j] > mx ? lane[j] : mx;
        for (v = 0; v < V; v += 256) {
            int e = V - v < 256 ? V - v : 256, k;
            for (j = 0; j < 16; j++) lane[j] = ls[j] = 0.0f;
            for (k = 0; k + 16 <= e; k += 16)
                for (j = 0; j < 16; j++) {
                    float xv = x[v + k + j], ev = mdl__expf(xv - mx);
                    ls[j] += xv;
                    lane[j] += ev;
                    if (keep) x[v + k + j] = ev;
                }
            for (; k < e; k++) {
                float xv = x[v + k], ev = mdl__expf(xv - mx);
                ls[0] += xv;
                lane[0] += ev;
                if (keep) x[v + k] = ev;
            }
            for (j = 0; j < 16; j++) {
                sum += lane[j];
                sx += ls[j];
            }
        }
        lse = (double)mx + log(sum);
        if (tgt) {
            double ce = lse - xy;
            m->rowce[i] = ce;
            m->rowloss[i] = (1.0 - (double)eps) * ce + (double)eps * (lse - sx / (double)V);
        }
        if (keep) {
            float dl = w ? (float)((double)w[i] / wsum) : 1.0f / (float)N, u = eps / (float)V;
            inv = (float)(1.0 / sum) * dl;
            u *= dl;
            for (v = 0; v < V; v++) x[v] = x[v] * inv - u;
            x[tgt[i]] -= dl * (1.0f - eps);
        }
    }
}

int mdl_forward(mdl_model *m, const int *inputs, const int *targets, int B, int T,
                const mdl_opts *opts, mdl_stats *stats)
{
    mdl_opts o = opts ? *opts : mdl_opts_default();
    mdl_stats st;
    const mdl_config *c;
    int rc, l, N, C, H, L;
    size_t NC;
    if (!m) return MDL_EINVAL;
    c = &m->cfg;
    m->have_bwd = 0;
    m->ffn_act_ok = 0;
    if (!inputs) return mdl__fail(m, MDL_EINVAL, "mdl_forward: inputs is NULL");
    if (B <= 0 || T <= 0) return mdl__fail(m, MDL_EINVAL, "mdl_forward: need B >= 1 and T >= 1 (got %d, %d)", B, T);
    if (T > c->max_T) return mdl__fail(m, MDL_EINVAL, "mdl_forward: T %d exceeds max_T %d", T, c->max_T);
    if ((long long)B * T > (1LL << 26))
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: B*T %lld too large", (long long)B * T);
    if (o.train != 0 && o.train != 1) return mdl__fail(m, MDL_EINVAL, "mdl_forward: opts.train must be 0 or 1");
    if (!mdl__finite(o.label_smoothing) || o.label_smoothing < 0.0f || o.label_smoothing >= 1.0f)
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: label_smoothing must be in [0, 1) (got %g)", (double)o.label_smoothing);
    if (!mdl__finite(o.ent_floor_alpha) || o.ent_floor_alpha < 0.0f || !mdl__finite(o.ent_floor_eta) ||
        !mdl__finite(o.lambda_sat) || !mdl__finite(o.moe_lb_coef) || o.moe_lb_coef < 0.0f)
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: ent_floor_alpha, moe_lb_coef must be finite >= 0; ent_floor_eta, lambda_sat finite");
    if (!mdl__finite(o.prior_scale))
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: prior_scale must be finite");
    if (o.prior_source < MDL_PSRC_AUTO || o.prior_source > MDL_PSRC_RUNNING)
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: prior_source must be MDL_PSRC_AUTO, _BATCH or _RUNNING (got %d)",
                         o.prior_source);
    if (!mdl__finite(o.ent_band_lambda) || o.ent_band_lambda < 0.0f || !mdl__finite(o.ent_band_hmin) ||
        !mdl__finite(o.ent_band_hmax) || o.ent_band_hmin > o.ent_band_hmax)
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: ent_band_lambda must be finite >= 0 and ent_band_hmin <= "
                                        "ent_band_hmax (finite)");
    if (!mdl__finite(o.attn_temp_mul) || !(o.attn_temp_mul > 0.0f))
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: attn_temp_mul must be finite and > 0 (got %g)", (double)o.attn_temp_mul);
    if (o.logits_from < 0 || o.logits_from >= T || (o.logits_from > 0 && (targets || o.train)))
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: logits_from must be in [0, T) (got %d, T %d), and above 0 only in "
                                        "a forward without targets and train 0 (its loss needs every row's logits)",
                         o.logits_from, T);
    if ((o.want_attn_obs || o.want_gate_rows) && m->H > 256)
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: attention observables and gate rows support at most 256 heads");
    if ((o.want_attn_obs || o.want_gate_rows) && m->nconv)
        return mdl__fail(m, MDL_EINVAL, "mdl_forward: attention observables and gate rows (CEAS) are not supported with "
                                        "gated-convolution layers (layer_pattern \"%s\")", c->layer_pattern);
    m->gate_keep_on = m->gate_frozen_on = 0; /* gating holds for one backward only */
    m->gate_rows_ok = 0;
    memset(&m->gcount, 0, sizeof m->gcount);
    if (o.want_gate_rows) {
        size_t need;
        if (o.want_gate_rows != 1 || !o.train || c->attn != MDL_ATTN_SOFTMAX)
            return mdl__fail(m, MDL_EINVAL, "mdl_forward: want_gate_rows needs a training forward (train 1) with "
                                            "softmax attention");
        need = (size_t)m->L * (size_t)B * (size_t)m->H * (size_t)T;
        if (need > m->gate_rows_cap) {
            ceas_obs *g = (ceas_obs *)realloc(m->gate_rows, need * sizeof(ceas_obs));
            if (!g) return mdl__fail(m, MDL_ENOMEM, "mdl_forward: out of memory (gate rows)");
            m->gate_rows = g;
            m->gate_rows_cap = need;
        }
    }
    L = m->L;
    H = m->H;
    C = m->C;
    if (o.head_temp) {
        int i;
        for (i = 0; i < L * H; i++)
            if (!mdl__finite(o.head_temp[i]) || !(o.head_temp[i] > 0.0f))
                return mdl__fail(m, MDL_EINVAL, "mdl_forward: head_temp[%d] must be finite and > 0 (got %g)", i,
                                 (double)o.head_temp[i]);
    }
    N = B * T;
    rc = mdl__check_ids(m, inputs, (size_t)N, "inputs");
    if (rc) return rc;
    if (targets) {
        rc = mdl__check_ids(m, targets, (size_t)N, "targets");
        if (rc) return rc;
    }
    {
        /* keep mdl_reserve's size as a floor so the buffers do not shrink and move */
        rc = mdl__ensure(m, B, T, o.train, o.want_attn_obs);
        if (rc) return rc;
    }
    m->B = B;
    m->T = T;
    m->train = o.train;
    m->mu_back = 0; /* (set again by this forward's read-back) */
    m->ent_back = m->rowf && c->attn == MDL_ATTN_SOFTMAX && (c->gac_tau || o.ent_band_lambda > 0.0f) &&
                  !(o.want_gate_rows && o.train) && !o.want_attn_obs;
    if (m->ent_back) /* the layers' sums start from zero (a conv layer's stay zero) */
        MDL__TRY(ex_zero(&m->cx, m->rowf + MDL__ENT_AT(N, L), sizeof(float) * TK_ATTN_NSTATS * (size_t)L),
                 "zero the entropy sums");
    memcpy(m->gain_fwd, m->act_gain, sizeof m->gain_fwd); /* this forward's and its backward's */
    m->cx.status = m->status_d; /* (carved above: mdl__ensure may move it) */
    if (m->status_d) MDL__TRY(ex_zero(&m->cx, m->status_d, sizeof(int)), "zero the deferred checks");
    m->obs = o.want_attn_obs;
    m->opts = o;
    NC = (size_t)N * C;
    memset(&st, 0, sizeof st);
    MDL__TRY(ex_to_ctx(&m->cx, m->ids, inputs, sizeof(int) * (size_t)N), "copy of the inputs");
    if (targets) MDL__TRY(ex_to_ctx(&m->cx, m->tgt, targets, sizeof(int) * (size_t)N), "copy of the targets");
    {
        int i;
        for (i = 0; i < L * H; i++)
            m->temp[i] = o.attn_temp_mul * (o.head_temp ? o.head_temp[i] : 1.0f);
        if (m->temp_d != m->temp)
            MDL__TRY(ex_to_ctx(&m->cx, m->temp_d, m->temp, sizeof(float) * (size_t)L * H), "copy of the temperatures");
    }
    mdl__scal_refresh(m); /* this forward's and its backward's scalar parameters */
    m->rpa_used = c->rpa;
    m->rpa_used.R = m->R;
    m->rpa_used.legacy = 0;
    m->rpa_used.scale = o.prior_scale < 0.0f ? 0.0f : (o.prior_scale > 1.0f ? 1.0f : o.prior_scale);
    m->era_scale_used = m->rpa_used.scale;
    m->prior_running = c->prior == MDL_PRIOR_RPA &&
                       (o.prior_source == MDL_PSRC_RUNNING || (o.prior_source == MDL_PSRC_AUTO && !o.train));
    st.prior_running = m->prior_running;
    m->fxb_cur = NULL;
    if (mdl__prior_fixed(c)) {
        rc = mdl__fixed_bias(m, T, &m->fxb_cur);
        if (rc) return rc;
    }
    m->have_tce = 0;
    memset(m->ent_dHl, 0, sizeof m->ent_dHl);
    m->lyr_loss = 0.0f;
    MDL__TRY(ex_embedding_fwd(&m->cx, m->res, m->ids, m->params + m->wte,
                                  m->wpe != MDL__ABSENT ? m->params + m->wpe : NULL, B, T, C, m->V),
             "embedding");
    if (m->need_mu) MDL__TRY(ex_zero(&m->cx, m->mu_sums, sizeof(double) * 3 * (size_t)L), "zero");
    for (l = 0; l < L; l++) {
        const float *x = m->train ? m->res + (size_t)l * NC : m->res;
        float *xo = m->train ? m->res + (size_t)(l + 1) * NC : m->res;
        m->fst = &st;
        rc = mdl__block_fwd(m, l, x, xo, &o, &st);
        if (rc) return rc;
    }
    {
        const float *x = m->res + (m->train ? (size_t)L * NC : 0);
        const float *Pp[LYR_MAX_PARAMS];
        lyr_io io;
        mdl__io(m, &m->cp[MDL__CP_N1], m->lnf, m->nf_sv, NULL, &io, Pp, NULL);
        io.x = x;
        io.out = m->nf;
        MDL__TRY(mdl__cfwd(m, MDL__CP_N1, &io), "final norm");
        if (o.logits_from == 0) {
            MDL__TRY(mdl__linear(&m->cx, m->logits, m->nf, m->params + m->wte, NULL, N, C, m->V), "head GEMM");
        } else { /* the rows t >= logits_from of each sequence (inference: the head is most of the cost) */
            int b, f = o.logits_from;
            for (b = 0; b < B; b++) {
                size_t r0 = (size_t)b * (size_t)T + (size_t)f;
                MDL__TRY(mdl__linear(&m->cx, m->logits + r0 * (size_t)m->V, m->nf + r0 * (size_t)C, m->params + m->wte,
                                     NULL, T - f, C, m->V), "head GEMM");
            }
        }
    }
    if (targets) {
        double wsum = (double)N;
        int i;
        if (o.target_weight) {
            wsum = 0.0;
            for (i = 0; i < N; i++) {
                if (!mdl__finite(o.target_weight[i]) || o.target_weight[i] < 0.0f)
                    return mdl__fail(m, MDL_EINVAL, "mdl_forward: target_weight[%d] must be finite and >= 0 (got %g)", i,
                                     (double)o.target_weight[i]);
                wsum += o.target_weight[i];
            }
            if (!(wsum > 0.0)) return mdl__fail(m, MDL_EINVAL, "mdl_forward: target weights sum to 0");
        }
        if (m->cx.device == EX_CPU) { /* the model's fused CE (one sweep) against tensor.h's */
            mdl__ce(m, m->tgt, N, o.label_smoothing, o.train, o.target_weight, wsum);
        } else {
            /* tensor.h's in-place CE on the device: per-row CE and smoothed loss, then (train)
               the logits become dlogits = (softmax - q) / N, or with target weights
               (softmax - q) w_i / sum w (the rows scaled by the uploaded w_i / sum w); the
               row losses come back with mdl__readback's one read */
            MDL__TRY(ex_ce_fwd_inplace(&m->cx, m->logits, m->rowf + N, m->rowf, m->tgt, N, m->V,
                                                     o.label_smoothing), "cross-entropy");
            if (o.train && !o.target_weight)
                MDL__TRY(ex_ce_bwd_inplace(&m->cx, m->logits, m->tgt, N, m->V, o.label_smoothing, 1.0f / (float)N),
                         "cross-entropy backward");
            if (o.train && o.target_weight) {
                float *wh = m->rowfh + 2 * (size_t)N;
                for (i = 0; i < N; i++) wh[i] = (float)((double)o.target_weight[i] / wsum);
                MDL__TRY(ex_to_ctx(&m->cx, m->rowf + 2 * (size_t)N, wh, sizeof(float) * (size_t)N),
                         "copy of the target weights");
                MDL__TRY(ex_ce_bwd_inplace(&m->cx, m->logits, m->tgt, N, m->V, o.label_smoothing, 1.0f),
                         "cross-entropy backward");
                MDL__TRY(ex_rowscale(&m->cx, m->logits, m->logits, m->rowf + 2 * (size_t)N, N, m->V), "target weights");
            }
        }
    }
    if ((rc = mdl__readback(m, targets != NULL, N)) != MDL_OK) return rc;
    if (m->ent_back) /* the softmax layers' mean attention entropy (mdl__softmax_fwd's sums) */
        for (l = 0; l < L; l++)
            st.layer_attn_H[l] = m->lconv[l] ? 0.0f
                                             : (float)((double)m->rowfh[MDL__ENT_AT(N, L) + (size_t)l * TK_ATTN_NSTATS] /
                                                       ((double)N * m->H));
    if (m->need_mu) { /* the layers' membership statistics (sums over the B T rows) */
        double hs[3 * MDL_MAX_LAYERS];
        if (m->cx.device == EX_CPU) memcpy(hs, m->mu_sums, sizeof(double) * 3 * (size_t)L);
        else memcpy(hs, m->rowfh + MDL__TAIL(N) + 2, sizeof(double) * 3 * (size_t)L);
        for (l = 0; l < L; l++) {
            const float ent = (float)(hs[3 * l] / (double)N), sat = (float)(hs[3 * l + 1] / (double)N);
            m->layer_H[l] = ent;
            st.layer_mu_entropy[l] = ent;
            st.mu_entropy += ent / (float)L;
            st.sat_frac += sat / (float)L;
        }
    }
    if (targets) {
        double sce = 0.0, sl = 0.0, wsum = (double)N;
        int i;
        float pen = 0.0f;
        if (o.target_weight) {
            wsum = 0.0;
            for (i = 0; i < N; i++) wsum += o.target_weight[i];
        }
        if (m->cx.device != EX_CPU) {
            const float *fh = m->rowfh;
            for (i = 0; i < N; i++) m->rowce[i] = (double)fh[i];
            for (i = 0; i < N; i++) m->rowloss[i] = (double)fh[N + i];
        }
        /* with train the buffer now holds dlogits (keep requires targets) */
        for (i = 0; i < N; i++) {
            sce += m->rowce[i];
            sl += o.target_weight ? (double)o.target_weight[i] * m->rowloss[i] : m->rowloss[i];
        }
        st.ce_sum = sce;
        m->have_tce = 1;
        st.ce = sce / N;
        st.ntok = N;
        st.loss = sl / wsum;
        if (o.train && m->sig_mode != SGR_OFF) { /* seed 002 eq. 29: (1 - a) L_LM + a L_reg */
            double R = 0.0;
            m->sig_fkey = m->sig_key;
            if ((rc = mdl__sigreg(m, -1, &R)) != MDL_OK) return rc;
            st.sigreg = R;
            st.loss = (1.0 - (double)m->sig_alpha) * st.loss + (double)m->sig_alpha * R;
        }
        if (o.train) st.loss += (double)m->lyr_loss + (double)o.moe_lb_coef * st.moe_lb;
        m->ent_dH = 0.0f;
        if (m->need_mu) {
            float hb = 0.0f, thr = o.ent_floor_eta * logf((float)m->R);
            for (l = 0; l < L; l++) hb += m->layer_H[l];
            hb /= (float)L;
            pen = thr - hb > 0.0f ? thr - hb : 0.0f;
            st.ent_pen = pen;
            if (o.train && o.ent_floor_alpha > 0.0f) {
                float w = 0.5f * o.ent_floor_alpha * (1.0f + o.lambda_sat);
                st.loss += (double)(w * pen);
                if (pen > 0.0f) m->ent_dH = -w;
            }
        }
        if (c->attn == MDL_ATTN_SOFTMAX && (c->gac_tau || o.ent_band_lambda > 0.0f)) {
            /* GAC's entropy band (seed 003 eq. 12) on each layer's mean attention entropy */
            double pen = 0.0;
            for (l = 0; l < L; l++) {
                double Hl = st.layer_attn_H[l], lo = (double)o.ent_band_hmin - Hl, hi = Hl - (double)o.ent_band_hmax;
                double d = 0.0;
                if (m->lconv[l]) continue; /* (a gated-convolution layer has no attention entropy) */
                if (lo > 0.0) { pen += lo * lo; d -= 2.0 * lo; }
                if (hi > 0.0) { pen += hi * hi; d += 2.0 * hi; }
                if (o.train) m->ent_dHl[l] = (float)((double)o.ent_band_lambda * d);
            }
            st.ent_band = (float)pen;
            if (o.train) st.loss += (double)o.ent_band_lambda * pen;
        }
        m->have_bwd = o.train;
    } else if (o.train) {
        /* nothing to differentiate */
        m->have_bwd = 0;
    }
    st.attn_obs = o.want_attn_obs && c->attn == MDL_ATTN_SOFTMAX ? m->obs_heads : NULL;
    m->gate_rows_ok = o.want_gate_rows == 1;
    st.gate_rows = m->gate_rows_ok ? m->gate_rows : NULL;
    m->ffn_act_ok = o.train;
    if (stats) *stats = st;
    return MDL_OK;
}

const double *mdl_token_ce(const mdl_model *m)
{
    return m && m->act && m->have_tce ? m->rowce : NULL;
}

/* Every layer's memberships of the last training forward, layer l's (B,T,R) at
   mu_h + l B T R on the host: on a device model gathered into the device staging mu_d by
   device copies on the model's stream (no wait), then read back with one copy (one host
   wait for all layers, not one per layer); memcpy's on the CPU. The staging buffers grow
   to the largest batch seen (the steps after the first allocate nothing). */
static int mdl__mu_all(mdl_model *m, const char *who)
{
    size_t n = (size_t)m->B * m->T * m->R, all = n * (size_t)m->L;
    int l;
    if (all > m->mu_h_cap) {
        float *p = (float *)realloc(m->mu_h, sizeof(float) * all);
        if (!p) return mdl__fail(m, MDL_ENOMEM, "%s: out of memory", who);
        m->mu_h = p;
        m->mu_h_cap = all;
    }
    if (m->cx.device == EX_CPU) {
        for (l = 0; l < m->L; l++)
            if (ex_to_host(&m->cx, m->mu_h + (size_t)l * n, m->ba[l].mu, sizeof(float) * n) != TK_OK)
                return mdl__fail(m, MDL_EFAIL, "%s: copy of the memberships failed", who);
        return MDL_OK;
    }
    if (m->mu_back) { /* they came back with the forward's read-back: no read */
        memcpy(m->mu_h, m->rowfh + MDL__MU_AT((size_t)m->B * m->T, m->L), sizeof(float) * all);
        return MDL_OK;
    }
    if (all > m->mu_d_cap) {
        void *p = NULL;
        if (m->mu_d) mdl__free_dev(m, m->mu_d);
        m->mu_d = NULL;
        m->mu_d_cap = 0;
        if (ex_alloc(&m->cx, &p, sizeof(float) * all) != TK_OK)
            return mdl__fail(m, MDL_ENOMEM, "%s: out of device memory (membership staging)", who);
        m->mu_d = (float *)p;
        m->mu_d_cap = all;
    }
    for (l = 0; l < m->L; l++)
        if (ex_copy(&m->cx, m->mu_d + (size_t)l * n, m->ba[l].mu, sizeof(float) * n) != TK_OK)
            return mdl__fail(m, MDL_EFAIL, "%s: copy of the memberships failed", who);
    if (ex_to_host(&m->cx, m->mu_h, m->mu_d, sizeof(float) * all) != TK_OK)
        return mdl__fail(m, MDL_EFAIL, "%s: copy of the memberships failed", who);
    return MDL_OK;
}

int mdl_prior_stats_update(mdl_model *m, float momentum)
{
    int l, t, b, r, B, T, R, maxT;
    float *cnt;
    if (!m) return MDL_EINVAL;
    if (!mdl__finite(momentum) || momentum < 0.0f || momentum >= 1.0f)
        return mdl__fail(m, MDL_EINVAL, "mdl_prior_stats_update: momentum must be in [0, 1) (got %g)", (double)momentum);
    if (m->cfg.prior != MDL_PRIOR_RPA || !m->pstats) return MDL_OK;
    if (!m->act || !m->train || m->B < 1)
        return mdl__fail(m, MDL_EINVAL, "mdl_prior_stats_update: needs a training forward first");
    B = m->B;
    T = m->T;
    R = m->R;
    maxT = m->cfg.max_T;
    cnt = m->pstats + (size_t)m->L * maxT * R;
    /* every layer's memberships, staged on the host (one read on a device model) */
    if ((b = mdl__mu_all(m, "mdl_prior_stats_update")) != MDL_OK) return b;
    for (l = 0; l < m->L; l++) {
        const float *mu = m->mu_h + (size_t)l * B * T * R;
        float *run;
        run = m->pstats + (size_t)l * maxT * R;
        for (t = 0; t < T; t++) {
            double w = 1.0 / ((double)cnt[t] + 1.0);
            if (w < 1.0 - (double)momentum) w = 1.0 - (double)momentum;
            for (r = 0; r < R; r++) {
                double s = 0.0, mean;
                for (b = 0; b < B; b++) {
                    double v = mu[((size_t)b * T + t) * R + r];
                    s += mdl__finite(v) ? v : 1.0 / R;
                }
                mean = s / (double)B;
                run[(size_t)t * R + r] = (float)(run[(size_t)t * R + r] + w * (mean - run[(size_t)t * R + r]));
            }
        }
    }
    for (t = 0; t < T; t++) cnt[t] += 1.0f;
    m->pgen++;
    return MDL_OK;
}

int mdl_prior_batch_sums(mdl_model *m, double *sums, size_t cap, int *T_out, int *rows)
{
    int l, t, b, r, B, T, R;
    if (!m || !sums || !T_out || !rows) return MDL_EINVAL;
    *T_out = 0;
    *rows = 0;
    if (m->cfg.prior != MDL_PRIOR_RPA || !m->pstats) return MDL_OK;
    if (!m->act || !m->train || m->B < 1)
        return mdl__fail(m, MDL_EINVAL, "mdl_prior_batch_sums: needs a training forward first");
    B = m->B;
    T = m->T;
    R = m->R;
    if ((size_t)m->L * T * R > cap)
        return mdl__fail(m, MDL_EINVAL, "mdl_prior_batch_sums: %lu doubles needed, room for %lu",
                         (unsigned long)((size_t)m->L * T * R), (unsigned long)cap);
    if ((b = mdl__mu_all(m, "mdl_prior_batch_sums")) != MDL_OK) return b; /* one read on a device model */
    for (l = 0; l < m->L; l++) {
        const float *mu = m->mu_h + (size_t)l * B * T * R;
        double *o = sums + (size_t)l * T * R;
        for (t = 0; t < T; t++)
            for (r = 0; r < R; r++) {
                double s = 0.0;
                for (b = 0; b < B; b++) {
                    double v = mu[((size_t)b * T + t) * R + r];
                    s += mdl__finite(v) ? v : 1.0 / R;
                }
                o[(size_t)t * R + r] = s;
            }
    }
    *T_out = T;
    *rows = B;
    return MDL_OK;
}

int mdl_prior_stats_apply(mdl_model *m, const double *sums, int T, long long rows, float momentum)
{
    int l, t, r, R, maxT;
    float *cnt;
    if (!m) return MDL_EINVAL;
    if (!mdl__finite(momentum) || momentum < 0.0f || momentum >= 1.0f)
        return mdl__fail(m, MDL_EINVAL, "mdl_prior_stats_apply: momentum must be in [0, 1) (got %g)", (double)momentum);
    if (m->cfg.prior != MDL_PRIOR_RPA || !m->pstats) return MDL_OK;
    if (!sums || T < 1 || T > m->cfg.max_T || rows < 1)
        return mdl__fail(m, MDL_EINVAL, "mdl_prior_stats_apply: bad sums, T %d or rows %lld", T, rows);
    R = m->R;
    maxT = m->cfg.max_T;
    cnt = m->pstats + (size_t)m->L * maxT * R;
    for (l = 0; l < m->L; l++) {
        const double *S = sums + (size_t)l * T * R;
        float *run = m->pstats + (size_t)l * maxT * R;
        for (t = 0; t < T; t++) {
            double w = 1.0 / ((double)cnt[t] + 1.0);
            if (w < 1.0 - (double)momentum) w = 1.0 - (double)momentum;
            for (r = 0; r < R; r++) {
                double mean = S[(size_t)t * R + r] / (double)rows;
                run[(size_t)t * R + r] = (float)(run[(size_t)t * R + r] + w * (mean - run[(size_t)t * R + r]));
            }
        }
    }
    for (t = 0; t < T; t++) cnt[t] += 1.0f;
    m->pgen++;
    return MDL_OK;
}

const float *mdl_prior_stats(const mdl_model *m, size_t *n)
{
    if (n) *n = m ? m->npstats : 0;
    return m ? m->pstats : NULL;
}

int mdl_prior_stats_set(mdl_model *m, const float *buf, size_t n)
{
    size_t i, nmu;
    if (!m) return MDL_EINVAL;
    if (n != m->npstats)
        return mdl__fail(m, MDL_EINVAL, "mdl_prior_stats_set: %lu floats given, the model keeps %lu",
                         (unsigned long)n, (unsigned long)m->npstats);
    if (!n) return MDL_OK;
    if (!buf) return mdl__fail(m, MDL_EINVAL, "mdl_prior_stats_set: buf is NULL");
    nmu = (size_t)m->L * (size_t)m->cfg.max_T * (size_t)m->R;
    for (i = 0; i < n; i++) {
        float v = buf[i];
        if (!mdl__finite(v) || v < 0.0f || (i < nmu && v > 1.0f) || (i >= nmu && (v != floorf(v) || v > 16777216.0f)))
            return mdl__fail(m, MDL_EINVAL, "mdl_prior_stats_set: entry %lu = %g is not a %s", (unsigned long)i,
                             (double)v, i < nmu ? "membership in [0, 1]" : "count");
    }
    memcpy(m->pstats, buf, sizeof(float) * n);
    m->pgen++;
    return MDL_OK;
}

int mdl_act_gain_supported(const mdl_config *cfg, char *err, size_t errlen)
{
    const lyr_ffn *e;
    if (!cfg) return ex_errf(err, errlen, MDL_EINVAL, "mdl_act_gain_supported: cfg is NULL");
    e = lyr_ffn_get(cfg->ffn);
    if (!e || e->kind != &lyr_kind_mlp || !e->gain)
        return ex_errf(err, errlen, MDL_EINVAL,
                       "the activation gain a_l (act = gelu(a_l u)) exists only in the GELU MLP; this model's FFN "
                       "is %s (the squared-ReLU MLP and the MoE's experts have no such parameter)",
                       e ? e->name : "unknown");
    return ex_errf(err, errlen, MDL_OK, "ok");
}

int mdl_act_gain_set(mdl_model *m, const float *a, int n)
{
    int l;
    if (!m) return MDL_EINVAL;
    if (!a) return mdl__fail(m, MDL_EINVAL, "mdl_act_gain_set: a is NULL");
    if (n != m->L) return mdl__fail(m, MDL_EINVAL, "mdl_act_gain_set: %d gains given, the model has %d layers", n, m->L);
    if (mdl_act_gain_supported(&m->cfg, m->err, sizeof m->err) != MDL_OK) return MDL_EINVAL;
    for (l = 0; l < n; l++)
        if (!mdl__finite(a[l]) || !(a[l] >= MDL_ACT_GAIN_MIN) || !(a[l] <= MDL_ACT_GAIN_MAX))
            return mdl__fail(m, MDL_EINVAL, "mdl_act_gain_set: a[%d] = %g is outside [%g, %g]", l, (double)a[l],
                             (double)MDL_ACT_GAIN_MIN, (double)MDL_ACT_GAIN_MAX);
    memcpy(m->act_gain, a, sizeof(float) * (size_t)n); /* the next forward runs with them */
    return MDL_OK;
}

int mdl_act_gain_get(const mdl_model *m, float *a, int n)
{
    if (!m || !a || n != m->L) return MDL_EINVAL;
    memcpy(a, m->act_gain, sizeof(float) * (size_t)n);
    return MDL_OK;
}

int mdl_ffn_act_copy(mdl_model *m, int l, float *host, size_t cap, size_t *n)
{
    size_t cnt, off;
    if (!m) return MDL_EINVAL;
    if (n) *n = 0;
    if (!host) return mdl__fail(m, MDL_EINVAL, "mdl_ffn_act_copy: host is NULL");
    if (l < 0 || l >= m->L) return mdl__fail(m, MDL_EINVAL, "mdl_ffn_act_copy: layer %d outside [0, %d)", l, m->L);
    if (m->cp[MDL__CP_FFN].d != (const void *)&m->mlpd || m->mlpd.act != LYR_MLP_GELU)
        return mdl__fail(m, MDL_EINVAL, "mdl_ffn_act_copy: the model's FFN is not the GELU MLP");
    if (!m->ffn_act_ok)
        return mdl__fail(m, MDL_EINVAL, "mdl_ffn_act_copy: no training forward since the model was created, "
                                        "reserved or ran another forward");
    cnt = (size_t)m->B * m->T * (size_t)m->F;
    off = lyr_mlp_act_offset(&m->mlpd, m->B, m->T);
    if (cap < cnt)
        return mdl__fail(m, MDL_EINVAL, "mdl_ffn_act_copy: %lu floats of room, the activations are %lu",
                         (unsigned long)cap, (unsigned long)cnt);
    if (!off || !m->ba[l].sv[MDL__CP_FFN]) return mdl__fail(m, MDL_EFAIL, "mdl_ffn_act_copy: no saved activations");
    MDL__TRY(ex_to_host(&m->cx, host, m->ba[l].sv[MDL__CP_FFN] + off, sizeof(float) * cnt), "activation copy");
    if (n) *n = cnt;
    return MDL_OK;
}

void mdl_prior_cache_counts(const mdl_model *m, long *builds, long *hits)
{
    long b = 0, h = 0;
    int l;
    if (m) {
        b = m->pc_builds + m->fxb_builds;
        h = m->pc_hits + m->fxb_hits;
        for (l = 0; l < MDL_MAX_LAYERS; l++)
            if (m->pcache_on[l]) {
                b += ex_rpa_cache_builds(&m->cx, &m->pcache[l]);
                h += ex_rpa_cache_hits(&m->cx, &m->pcache[l]);
            }
    }
    if (builds) *builds = b;
    if (hits) *hits = h;
}

const float *mdl_logits(const mdl_model *m)
{
    if (!m || !m->act || m->train) return NULL;
    return m->logits;
}

/* ------------------------------------------------------------------ backward */

/* Backward of a gated residual branch x_out = x_in + eta * dropout(br):
   dbr (N,C) = eta * dropout'(dres); deta (N) += sum_c dres * br_out (br_out: the branch
   output after dropout, as saved) when deta is not NULL; eta NULL means 1; mask NULL
   means no dropout (ps: the 1/(1-p) dropout scale). */
static int mdl__branch_bwd(const ex_ctx *x, float *dbr, float *deta, const float *dres, const float *br_out,
                           const float *eta, const uint8_t *mask, float p, int N, int C)
{
    const size_t n = (size_t)N * C;
    int rc;
    if (!mask) { /* dbr = eta * dres */
        rc = eta ? ex_rowscale(x, dbr, dres, eta, N, C) : ex_copy(x, dbr, dres, sizeof(float) * n);
    } else {     /* dbr = eta * mask * dres / (1 - p) */
        rc = ex_zero(x, dbr, sizeof(float) * n);
        if (!rc) rc = ex_dropout_bwd(x, dbr, dres, mask, n, p);
        if (!rc && eta) rc = ex_rowscale(x, dbr, dbr, eta, N, C);
    }
    if (!rc && deta) rc = ex_rowdot(x, deta, dres, br_out, N, C); /* d eta += dres . br_out */
    return rc;
}

/* The entropy band's gradient through layer l's attention: with z the pre-softmax logits
   (z = q k / (sqrt(D) temp_h) + bias) and H_row = -sum_j p_j log p_j,
   dH_row/dz_j = -p_j (log p_j + H_row); H_l is the mean over the B H T rows. Accumulates
   into m->dq, m->dk (B,H,T,D), dbias (T,T) (may be NULL) and dtemp (H) (may be NULL). */
static int mdl__ent_band_bwd(mdl_model *m, int l, float *dbias, float *dtemp)
{
    const mdl__ba *a = &m->ba[l];
    int B = m->B, T = m->T, H = m->H, D = m->D, b, h, t, j;
    size_t TT = (size_t)T * T, TD = (size_t)T * D;
    float coef = (float)((double)m->ent_dHl[l] / ((double)B * H * T));
    float *G = (float *)malloc(sizeof(float) * (TT + TD));
    float *tmp = G ? G + TT : NULL;
    if (!G) return mdl__fail(m, MDL_ENOMEM, "entropy band backward: out of memory");
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            size_t u = (size_t)b * H + h;
            const float *pu = a->probs + u * TT, *q = a->q + u * TD, *k = a->k + u * TD;
            float temp = m->temp[(size_t)l * H + h], al = 1.0f / (sqrtf((float)D) * temp);
            for (t = 0; t < T; t++) {
                const float *pr = pu + (size_t)t * T;
                float *g = G + (size_t)t * T;
                double hr = 0.0;
                for (j = 0; j <= t; j++)
                    if (pr[j] > 0.0f) hr -= (double)pr[j] * log((double)pr[j]);
                for (j = 0; j <= t; j++)
                    g[j] = pr[j] > 0.0f ? (float)(-(double)coef * pr[j] * (log((double)pr[j]) + hr)) : 0.0f;
                for (; j < T; j++) g[j] = 0.0f;
            }
            if (tk_sgemm(0, 0, T, D, T, al, G, T, k, D, 0.0f, tmp, D) != TK_OK ||
                tk_sgemm(1, 0, T, D, T, al, G, T, q, D, 1.0f, m->dk + u * TD, D) != TK_OK) {
                free(G);
                return mdl__fail(m, MDL_EFAIL, "entropy band backward GEMM failed");
            }
            {
                float *dq = m->dq + u * TD;
                double s = 0.0;
                size_t e;
                for (e = 0; e < TD; e++) {
                    dq[e] += tmp[e];
                    s += (double)q[e] * tmp[e];
                }
                if (dtemp) dtemp[h] += (float)(-s / temp);
                if (dbias)
                    for (e = 0; e < TT; e++) dbias[e] += G[e];
            }
        }
    free(G);
    return MDL_OK;
}

/* The softmax attention's backward of block l (the model's mixer kind, mdl__kind_softmax):
   dbr = d(attention output) (consumed: reused as scratch), m->dln += d(norm1 output). */
static int mdl__softmax_bwd(mdl_model *m, int l)
{
    const mdl_config *c = &m->cfg;
    const mdl__bp *b = &m->bp[l];
    mdl__ba *a = &m->ba[l];
    float *P = m->params, *G = m->grads, *dbr = m->dbr;
    int B = m->B, T = m->T, N = B * T, C = m->C, H = m->H, D = m->D;
    size_t NC = (size_t)N * C;
    /* output projection: dattm (datt) = dap Wo; dWo += dap^T attm (frozen heads'
       columns skipped under CEAS head gating) */
    if (mdl__gate_layer_frozen(m, l)) {
        int rc = mdl__proj_bwd_gated(m, l, 0);
        if (rc) return rc;
    } else {
        MDL__TRY(mdl__linear_bwd(&m->cx, m->datt, 0.0f, G + b->proj, NULL, dbr, a->attm, P + b->proj, N, C, C),
                 "attention projection backward");
    }
    /* merge heads backward: atty (B,H,T,D) gradient into dbr (reused) */
    MDL__TRY(ex_zero(&m->cx, dbr, sizeof(float) * NC), "zero");
    MDL__TRY(ex_merge_heads_bwd(&m->cx, dbr, m->datt, B, T, H, D), "merge heads backward");
    MDL__TRY(ex_zero(&m->cx, m->dq, sizeof(float) * NC), "zero");
    MDL__TRY(ex_zero(&m->cx, m->dk, sizeof(float) * NC), "zero");
    MDL__TRY(ex_zero(&m->cx, m->dv, sizeof(float) * NC), "zero");
    if (m->dbias) MDL__TRY(ex_zero(&m->cx, m->dbias, sizeof(float) * (size_t)T * T), "zero");
    {
        /* the bias gradient: for the learned priors, and for gac_tau's (a fixed prior's
           only consumer of it); a fixed prior alone needs none */
        float dtemp[256], *dtp = NULL,
              *dbp = c->prior != MDL_PRIOR_NONE && (!mdl__prior_fixed(c) || c->gac_tau) ? m->dbias : NULL;
        const float *biasu = m->bias_used[l];
        int h;
        if (c->gac_tau) {
            for (h = 0; h < H; h++) dtemp[h] = 0.0f;
            dtp = dtemp;
        }
        if (m->cx.device != EX_CPU) { /* (issue 39 item 4) */
            tk_attention_cuda_config ac = mdl__attn_cfg(m);
            if (m->ent_dHl[l] != 0.0f) {
                /* the entropy band's gradient inside the attention backward, from the
                   rows' H its forward kept (fp32 math) */
                ac.math = TK_MATH_FP32;
                ac.ent_coef = (float)((double)m->ent_dHl[l] / ((double)B * H * T));
                ac.ent_rows = m->attn_stats_d + (size_t)l * B * H * T * TK_ATTN_NSTATS;
                ac.ent_stride = TK_ATTN_NSTATS;
            }
            if (dtp) {
                dtp = m->dtemp_d;
                MDL__TRY(ex_zero(&m->cx, dtp, sizeof(float) * (size_t)H), "zero");
            }
            if (!mdl__gate_layer_dense(m, l))
                /* CEAS gating on the device: the pruned rows' and frozen heads' output
                   gradients are zeroed, so the dense backward gives them no dS and
                   nothing reaches dq, dk, dv or the prior's dbias from them: the gated
                   backward's gradients (rounding aside), without its savings */
                MDL__TRY(ex_rowscale(&m->cx, dbr, dbr, m->gate_mask_d + (size_t)l * B * H * T, B * H * T, D),
                         "CEAS gating mask");
            MDL__TRY(tk_attention_backward_cuda_ex(m->dq, m->dk, m->dv, dbp, dtp, dbr, a->atto, a->lse, a->q, a->k,
                                                   a->v, biasu, 0,
                                                   m->temp_d + (size_t)l * H, B, H, T, D, &ac, m->cx.stream),
                     "tk_attention_backward_cuda_ex");
        } else if (mdl__gate_layer_dense(m, l)) {
            MDL__TRY(tk_attention_backward(m->dq, m->dk, m->dv, dbp, dtp, dbr, a->probs, a->q, a->k, a->v,
                                           0, m->temp + (size_t)l * H, B, H, T, D),
                     "tk_attention_backward");
        } else {
            int rc = mdl__attn_bwd_gated(m, l, dbr, dbp); /* CEAS gating: pruned rows, frozen heads */
            if (rc) return rc;
        }
        if (m->ent_dHl[l] != 0.0f && m->cx.device == EX_CPU) {
            int rc = mdl__ent_band_bwd(m, l, dbp, dtp);
            if (rc) return rc;
        }
        if (c->gac_tau) {
            /* temp_h = base_h * g and bias' = bias / g: dg = sum_h dtemp_h base_h
               - sum dbias' bias' / g (exctx.h ex_gac_dtau, on the model's side: no
               read-back); the prior then gets dbias' / g */
            float g = mdl__scal(m, l, b->gtau), ig = 1.0f / g;
            const float *sbp = NULL;
            if (dbp) { /* sum dbias' bias' (tk_rowdot: one row in double) */
                MDL__TRY(ex_zero(&m->cx, m->dtemp_d + H, sizeof(float)), "zero");
                MDL__TRY(ex_rowdot(&m->cx, m->dtemp_d + H, dbp, biasu, 1, (int)((size_t)T * T)),
                         "GAC bias gradient");
                sbp = m->dtemp_d + H;
            }
            MDL__TRY(ex_gac_dtau(&m->cx, G + b->gtau, dtp, m->temp_d + (size_t)l * H, ig, sbp, H),
                     "GAC temperature gradient");
            if (dbp) MDL__TRY(ex_scale(&m->cx, dbp, dbp, ig, (size_t)T * T), "GAC bias gradient scale");
        }
    }
    if (c->pos == MDL_POS_ROPE) {
        /* dq, dk are gradients of the rotated q, k: turn them back */
        MDL__TRY(ex_rope(&m->cx, m->dq, B, H, T, D, (float)MDL_ROPE_BASE, 1), "RoPE backward (q)");
        MDL__TRY(ex_rope(&m->cx, m->dk, B, H, T, D, (float)MDL_ROPE_BASE, 1), "RoPE backward (k)");
    }
    MDL__TRY(ex_zero(&m->cx, m->dqkv, sizeof(float) * NC * 3), "zero");
    MDL__TRY(ex_split_heads_bwd(&m->cx, m->dqkv, m->dq, m->dk, m->dv, B, T, H, D), "split heads backward");
    if (mdl__gate_layer_frozen(m, l)) {
        int rc = mdl__proj_bwd_gated(m, l, 1);
        if (rc) return rc;
    } else {
        MDL__TRY(mdl__linear_bwd(&m->cx, m->dln, 1.0f, G + b->qkv, NULL, m->dqkv, a->n1, P + b->qkv, N, C, 3 * C),
                 "qkv backward");
    }
    return MDL_OK;
}

static int mdl__sm_params_v(const void *d, lyr_pspec *out, int cap)
{
    const mdl_model *m = (const mdl_model *)d;
    int C = m->C;
    if (cap < 2) return LYR_EINVAL;
    memset(out, 0, 2 * sizeof *out);
    snprintf(out[0].suffix, sizeof out[0].suffix, "qkv.weight");
    out[0].ndim = 2;
    out[0].shape[0] = 3 * C;
    out[0].shape[1] = C;
    out[0].decay = 1;
    out[0].init = LYR_INIT_NORMAL;
    out[0].init_arg = m->cfg.init_std;
    snprintf(out[1].suffix, sizeof out[1].suffix, "proj.weight");
    out[1].ndim = 2;
    out[1].shape[0] = C;
    out[1].shape[1] = C;
    out[1].decay = 1;
    out[1].init = LYR_INIT_NORMAL;
    out[1].init_arg = m->cfg.init_std / sqrtf(2.0f * (float)m->L);
    return 2;
}

static int mdl__sm_init_v(const void *d, float *const *P, tk_rng *rng, float init_std)
{
    (void)d, (void)P, (void)rng, (void)init_std; /* (the pspec rules) */
    return LYR_OK;
}

static size_t mdl__sm_floats_v(const void *d, int B, int T)
{
    (void)d, (void)B, (void)T;
    return 0;
}

static int mdl__sm_fwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    mdl_model *m = (mdl_model *)d; /* (the model, non-const: mdl_create_on) */
    int rc;
    (void)cx;
    if (io->x != m->ba[io->layer].n1 || io->out != m->ba[io->layer].ap) return LYR_EINVAL;
    rc = mdl__softmax_fwd(m, io->layer, &m->opts, m->fst);
    if (rc) m->kfail = 1;
    return rc;
}

static int mdl__sm_bwd_v(const ex_ctx *cx, const void *d, lyr_io *io)
{
    mdl_model *m = (mdl_model *)d;
    int rc;
    (void)cx;
    if (io->dout != m->dbr || io->dx != m->dln) return LYR_EINVAL;
    rc = mdl__softmax_bwd(m, io->layer);
    if (rc) m->kfail = 1;
    return rc;
}

/* The return of a component's forward or backward: a layers.h kind's error code becomes
   MDL_EFAIL ("what failed (code)"); the model's own kinds reported theirs (m->kfail). */
static int mdl__kret(mdl_model *m, int rc, const char *what)
{
    if (!rc) return MDL_OK;
    if (m->kfail) {
        m->kfail = 0;
        return rc;
    }
    return mdl__fail(m, MDL_EFAIL, "%s failed (code %d)", what, rc);
}

static int mdl__block_bwd(mdl_model *m, int l)
{
    const mdl_config *c = &m->cfg;
    const mdl__bp *b = &m->bp[l];
    mdl__ba *a = &m->ba[l];
    float *G = m->grads;
    int B = m->B, T = m->T, N = B * T, C = m->C, H = m->H, R = m->R;
    size_t NC = (size_t)N * C;
    const float *x = m->res + (size_t)l * NC;
    float *dres = m->dres, *dbr = m->dbr;
    int drop = c->dropout > 0.0f;
    const float *Pp[LYR_MAX_PARAMS];
    float *Gp[LYR_MAX_PARAMS];
    lyr_io io;
    lyr_mlp_dims ffd;
    int rc, mix, shq;
    if (m->need_mu) MDL__TRY(ex_zero(&m->cx, m->dmu, sizeof(float) * (size_t)N * R), "zero");
    if (m->deta) MDL__TRY(ex_zero(&m->cx, m->deta, sizeof(float) * (size_t)N), "zero");
    /* ---- FFN branch: x_out = x_mid + eta * fo */
    MDL__TRY(mdl__branch_bwd(&m->cx, dbr, m->deta, dres, a->fo, a->eta, drop ? a->mask_f : NULL, c->dropout, N, C),
             "FFN branch");
    mdl__comp_io(m, l, MDL__CP_FFN, &io, Pp, Gp); /* the FFN: dln = d n2, dmu += */
    io.x = a->n2;
    io.mu = a->mu;
    io.dout = dbr;
    io.dx = m->dln;
    io.dmu = m->dmu;
    io.coef = m->opts.moe_lb_coef / (float)m->L;
    MDL__TRY(ex_zero(&m->cx, m->dln, sizeof(float) * NC), "zero");
    MDL__TRY(m->cp[MDL__CP_FFN].k->backward(&m->cx, mdl__ffn_dims(m, l, m->gain_fwd, &ffd), &io), "FFN backward");
    mdl__comp_io(m, l, MDL__CP_N2, &io, Pp, Gp); /* dres += d norm2 */
    io.x = a->xmid;
    io.dout = m->dln;
    io.dx = dres;
    MDL__TRY(mdl__cbwd(m, MDL__CP_N2, &io), "norm2 backward");
    /* ---- attention branch: x_mid = x + eta * ao, ao = dropout(g * ap) */
    MDL__TRY(mdl__branch_bwd(&m->cx, dbr, m->deta, dres, a->ao, a->eta, drop ? a->mask_a : NULL, c->dropout, N, C),
             "attention branch");
    if (m->cp[MDL__CP_VGATE].k) { /* dbr = d(g * ap) becomes d ap, in place; dmu += */
        mdl__comp_io(m, l, MDL__CP_VGATE, &io, Pp, Gp);
        io.mu = a->mu;
        io.x = a->ap;
        io.dout = dbr;
        io.dx = dbr;
        io.dmu = m->dmu;
        MDL__TRY(mdl__cbwd(m, MDL__CP_VGATE, &io), "value gate backward");
    }
    /* dbr = d(attention output [+ memory channel]); dln collects d(norm1 output) */
    MDL__TRY(ex_zero(&m->cx, m->dln, sizeof(float) * NC), "zero");
    shq = mdl__has(m, l, MDL__CP_MEM) && m->gdd.qkv_shared;
    if (mdl__has(m, l, MDL__CP_MEM)) { /* the memory channel: dln += */
        if (shq) { /* its gradients of the attention's q, k, v, into the attention's backward */
            const size_t nkv = (size_t)N * m->pd.Hkv * (C / H);
            if (!m->gsq) return mdl__fail(m, MDL_EINVAL, "memory backward: no shared q/k/v gradient buffers");
            MDL__TRY(ex_zero(&m->cx, m->gsq, sizeof(float) * NC), "zero");
            MDL__TRY(ex_zero(&m->cx, m->gsk, sizeof(float) * nkv), "zero");
            MDL__TRY(ex_zero(&m->cx, m->gsv, sizeof(float) * nkv), "zero");
        }
        mdl__comp_io(m, l, MDL__CP_MEM, &io, Pp, Gp);
        io.x = a->n1;
        io.dout = dbr;
        io.dx = m->dln;
        if (shq) {
            io.dmq = m->gsq;
            io.dmk = m->gsk;
            io.dmv = m->gsv;
        }
        MDL__TRY(m->cp[MDL__CP_MEM].k->backward(&m->cx, m->cp[MDL__CP_MEM].d, &io), "memory backward");
    }
    mix = m->lconv[l] ? MDL__CP_LFM : MDL__CP_MIX;
    mdl__comp_io(m, l, mix, &io, Pp, Gp); /* the mixer (attention or gated conv): dln += */
    if (shq) {
        io.gq = m->gsq;
        io.gk = m->gsk;
        io.gv = m->gsv;
    }
    io.layer = l;
    io.x = a->n1;
    io.dout = dbr;
    io.dx = m->dln;
    rc = mdl__kret(m, mdl__cbwd(m, mix, &io), "mixer backward");
    if (rc) return rc;
    if (m->cp[MDL__CP_CONV].k) {
        /* the mixers' gradient is d(n1 after the convolution): back through it into dbr
           (free), then dln */
        MDL__TRY(ex_zero(&m->cx, dbr, sizeof(float) * NC), "zero");
        mdl__comp_io(m, l, MDL__CP_CONV, &io, Pp, Gp);
        io.x = a->n1p;
        io.dout = m->dln;
        io.dx = dbr;
        MDL__TRY(mdl__cbwd(m, MDL__CP_CONV, &io), "convolution backward");
        MDL__TRY(ex_copy(&m->cx, m->dln, dbr, sizeof(float) * NC), "copy");
    }
    mdl__comp_io(m, l, MDL__CP_N1, &io, Pp, Gp); /* dres += d norm1 */
    io.x = x;
    io.dout = m->dln;
    io.dx = dres;
    MDL__TRY(mdl__cbwd(m, MDL__CP_N1, &io), "norm1 backward");
    /* priors */
    if (c->prior == MDL_PRIOR_RPA) {
        era_rpa_params rp = mdl__rpa_params(m, l);
        era_rpa_grads g;
        memset(&g, 0, sizeof g);
        /* the scalar gradients straight into G and tau_abs, in the model's memory (on a
           device model: no read-back, no host wait) */
        g.dtau_att_to = G + b->tau;
        g.dpos_beta_to = G + b->posb;
        g.dtau_att_abs_to = m->tau_abs + l;
        MDL__TRY(ex_zero(&m->cx, m->tau_abs + l, sizeof(float)), "zero");
        MDL__TRY(ex_rpa_bwd(&m->cx, &m->rpa_used, &rp, &m->rpa_st[l], &m->rpa_cst[l], m->dbias,
                            m->prior_running ? NULL : m->dmu, &g, m->rpa_ws),
                 "era_rpa_backward");
    } else if (c->prior == MDL_PRIOR_ERA) {
        era_era_params ep = mdl__era_params(m, l);
        era_era_grads g;
        size_t TT = (size_t)T * T;
        memset(&g, 0, sizeof g);
        g.dcenters = G + b->erac;
        /* log sigma's and alpha's gradients straight into G (on a device model: no
           read-back, no host wait) */
        g.dlog_sigma_to = G + b->eras;
        g.dalpha_to = G + b->eraa;
        if (m->era_scale_used != 1.0f) MDL__TRY(ex_scale(&m->cx, m->dbias, m->dbias, m->era_scale_used, TT), "ERA scale");
        MDL__TRY(ex_era_bwd(&m->cx, &c->era, &ep, &m->era_st[l], &m->era_cst[l], m->dbias, &g, m->era_ws),
                 "era_era_backward");
    }
    if (m->cp[MDL__CP_RESG].k) { /* the residual gate: from deta (both branches), dmu += */
        mdl__comp_io(m, l, MDL__CP_RESG, &io, Pp, Gp);
        io.mu = a->mu;
        io.dout = m->deta;
        io.dmu = m->dmu;
        MDL__TRY(mdl__cbwd(m, MDL__CP_RESG, &io), "residual gate backward");
    }
    if (m->cp[MDL__CP_MEMB].k) { /* the memberships: from every reader's dmu, dres += */
        mdl__comp_io(m, l, MDL__CP_MEMB, &io, Pp, Gp);
        io.x = x;
        io.dout = m->dmu;
        io.dx = dres;
        io.coef = m->ent_dH / (float)m->L;
        MDL__TRY(mdl__cbwd(m, MDL__CP_MEMB, &io), "era_membership_backward");
    }
    return MDL_OK;
}

/* ------------------------------------------------------------------ SIGReg (seed 002 App. A) */
int mdl_sigreg_set(mdl_model *m, int mode, float alpha, int sketch, uint64_t seed, uint64_t key)
{
    if (!m) return MDL_EINVAL;
    if (mode < SGR_OFF || mode > SGR_ZIPFIAN)
        return mdl__fail(m, MDL_EINVAL, "mdl_sigreg_set: mode %d (want 0..4: off, weak, strong, discrete, zipfian)", mode);
    if (mode != SGR_OFF && (!(alpha > 0.0f) || !(alpha < 1.0f)))
        return mdl__fail(m, MDL_EINVAL, "mdl_sigreg_set: alpha %g (want 0 < alpha < 1)", (double)alpha);
    if (mode != SGR_OFF && sketch < 1) return mdl__fail(m, MDL_EINVAL, "mdl_sigreg_set: sketch %d (want >= 1)", sketch);
    m->sig_mode = mode;
    m->sig_alpha = alpha;
    m->sig_k = sketch;
    m->sig_seed = seed;
    m->sig_key = key;
    return MDL_OK;
}

/* l < 0 (the training forward): *R = (1/L) sum_l R(res[l+1]), no gradient. l >= 0 (the
   backward, before block l's): *R = R(res[l+1]) and dres += a / L dR / d res[l+1], through
   dbr (free between blocks); a device model's rows go through the host copies */
static int mdl__sigreg(mdl_model *m, int l, double *R)
{
    const int N = m->B * m->T, C = m->C, L = m->L;
    const size_t NC = (size_t)N * (size_t)C;
    const int dev = m->cx.device != EX_CPU;
    int j, rc;
    *R = 0.0;
    if (dev && m->sig_cap < NC) {
        float *a = (float *)realloc(m->sig_hx, sizeof(float) * NC), *b;
        if (a) m->sig_hx = a;
        b = a ? (float *)realloc(m->sig_hg, sizeof(float) * NC) : NULL;
        if (!a || !b) return mdl__fail(m, MDL_ENOMEM, "signature-stream regulariser: out of memory for %zu floats", NC);
        m->sig_hg = b;
        m->sig_cap = NC;
    }
    for (j = (l < 0 ? 0 : l); j <= (l < 0 ? L - 1 : l); j++) {
        const float *x = m->res + (size_t)(j + 1) * NC;
        float *g = l < 0 ? NULL : (dev ? m->sig_hg : m->dbr);
        uint64_t key = m->sig_fkey * (uint64_t)MDL_MAX_LAYERS + (uint64_t)j;
        double r = 0.0;
        if (dev) {
            MDL__TRY(ex_to_host(&m->cx, m->sig_hx, x, sizeof(float) * NC), "copy of a block's output");
            x = m->sig_hx;
        }
        rc = sgr_loss(m->sig_mode, x, N, C, m->sig_k, m->sig_seed, key, &r, g, m->sig_alpha / (float)L);
        if (rc != SGR_OK)
            return mdl__fail(m, rc == SGR_ENOMEM ? MDL_ENOMEM : MDL_EINVAL, "signature-stream regulariser (%s, %d rows): %s",
                             sgr_mode_name(m->sig_mode), N, sgr_strerror(rc));
        if (!isfinite(r)) return mdl__fail(m, MDL_EFAIL, "signature-stream regulariser: non-finite value at block %d", j);
        *R += l < 0 ? r / (double)L : r;
        if (g) {
            if (dev) MDL__TRY(ex_to_ctx(&m->cx, m->dbr, g, sizeof(float) * NC), "copy of the regulariser's gradient");
            MDL__TRY(ex_residual_fwd(&m->cx, m->dres, m->dres, m->dbr, NC), "regulariser's gradient");
        }
    }
    return MDL_OK;
}

int mdl_backward(mdl_model *m)
{
    int l, N, rc;
    size_t NC;
    if (!m) return MDL_EINVAL;
    if (!m->have_bwd)
        return mdl__fail(m, MDL_EINVAL, "mdl_backward: no training forward with targets to differentiate "
                                        "(call mdl_forward with opts.train = 1 and targets first; one backward per forward)");
    m->have_bwd = 0;
    N = m->B * m->T;
    NC = (size_t)N * m->C;
    mdl__gate_count(m);
    /* head: the training forward left dlogits (N,V) in the logits buffer */
    if (m->sig_mode != SGR_OFF) /* (1 - a) L_LM (seed 002 eq. 29) */
        MDL__TRY(ex_scale(&m->cx, m->logits, m->logits, 1.0f - m->sig_alpha, (size_t)N * (size_t)m->V),
                 "signature-stream regulariser's LM weight");
    MDL__TRY(mdl__linear_bwd(&m->cx, m->dln, 0.0f, m->grads + m->wte, NULL, m->logits, m->nf, m->params + m->wte, N, m->C,
                             m->V), "head backward");
    MDL__TRY(ex_zero(&m->cx, m->dres, sizeof(float) * NC), "zero");
    {
        const float *Pp[LYR_MAX_PARAMS];
        float *Gp[LYR_MAX_PARAMS];
        lyr_io io;
        mdl__io(m, &m->cp[MDL__CP_N1], m->lnf, m->nf_sv, NULL, &io, Pp, Gp);
        io.x = m->res + (size_t)m->L * NC;
        io.dout = m->dln;
        io.dx = m->dres;
        MDL__TRY(mdl__cbwd(m, MDL__CP_N1, &io), "final norm backward");
    }
    for (l = m->L - 1; l >= 0; l--) {
        if (m->sig_mode != SGR_OFF) { /* d res[l+1] += a / L dR(block l's output) */
            double R = 0.0;
            if ((rc = mdl__sigreg(m, l, &R)) != MDL_OK) return rc;
        }
        rc = mdl__block_bwd(m, l);
        if (rc) return rc;
    }
    MDL__TRY(ex_embedding_bwd(&m->cx, m->grads + m->wte, m->wpe != MDL__ABSENT ? m->grads + m->wpe : NULL, m->dres,
                                   m->ids, m->B, m->T, m->C, m->V),
             "embedding backward");
    return MDL_OK;
}

/* ------------------------------------------------------------------ CEAS gating */
/* Issue 20. The gate rows: per query row (b,h,i) of layer l, ceas_obs of the logits
   z_j = alpha_h q_i.k_j (+ bias_ij), j <= i, and the forward's probabilities, from the
   moments tk_attention_forward_stats gathers in the softmax pass (H, E_p[z], Var_p[z],
   mean and population variance of z over the i+1 keys) turned into H, n_eff = e^H,
   sigma_qk = std_j(z_j) / alpha_h, mean_s, Var_p[s] by
   ceas_attention_observables_from_moments (mdl__softmax_fwd). Cost (counted in
   gate_overhead): ~6 FLOPs per causal logit for the moments, 20 per row to convert. */

#define MDL__GATE_BR 64

static int mdl__nthreads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static int mdl__tid(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static int mdl__gate_scratch(mdl_model *m, size_t floats)
{
    if (floats > m->gate_scr_cap) {
        float *p = (float *)realloc(m->gate_scr, floats * sizeof(float));
        if (!p) return mdl__fail(m, MDL_ENOMEM, "CEAS gating: out of memory (scratch)");
        m->gate_scr = p;
        m->gate_scr_cap = floats;
    }
    return MDL_OK;
}

static int mdl__gate_layer_frozen(const mdl_model *m, int l)
{
    int h;
    if (!m->gate_frozen_on) return 0;
    for (h = 0; h < m->H; h++)
        if (m->gate_frozen[(size_t)l * m->H + h]) return 1;
    return 0;
}

/* 1: layer l's attention backward is the dense one (nothing pruned, nothing frozen) */
static int mdl__gate_layer_dense(const mdl_model *m, int l)
{
    size_t e, n = (size_t)m->B * m->H * m->T;
    const unsigned char *kp;
    if (mdl__gate_layer_frozen(m, l)) return 0;
    if (!m->gate_keep_on) return 1;
    kp = m->gate_keep + (size_t)l * n;
    for (e = 0; e < n; e++)
        if (!kp[e]) return 0;
    return 1;
}

/* One (sequence b, head h) unit u = b H + h of the gated backward (mdl__attn_bwd_gated):
   w the thread's scratch; db (T,T) or NULL: += dS of the kept rows (row i of db gets the
   logit gradient of query row i; 0 above the diagonal, as the dense backward's). 1 on a
   GEMM failure. */
static int mdl__gate_bh(mdl_model *m, int l, int u, const float *dout, float *w, float *db)
{
    const mdl__ba *a = &m->ba[l];
    int B = m->B, T = m->T, H = m->H, D = m->D;
    size_t TT = (size_t)T * T, TD = (size_t)T * D, R = MDL__GATE_BR;
    float *dOg = w, *Qg = dOg + R * D, *dQg = Qg + R * D, *Pg = dQg + R * D, *dS = Pg + R * T;
    int *idx = (int *)(void *)(dS + R * T); /* sizeof(int) == sizeof(float) (checked at set) */
    int b = u / H, h = u % H, nk = 0, c0, i, j, r;
    float al = 1.0f / (sqrtf((float)D) * m->temp[(size_t)l * H + h]);
    const unsigned char *kp;
    const float *Q = a->q + (size_t)u * TD, *K = a->k + (size_t)u * TD, *V = a->v + (size_t)u * TD;
    const float *P = a->probs + (size_t)u * TT, *dO = dout + (size_t)u * TD;
    float *dQ = m->dq + (size_t)u * TD, *dK = m->dk + (size_t)u * TD, *dV = m->dv + (size_t)u * TD;
    if (m->gate_frozen_on && m->gate_frozen[(size_t)l * H + h]) return 0;
    kp = m->gate_keep_on ? m->gate_keep + (((size_t)l * B + b) * H + h) * T : NULL;
    for (i = 0; i < T; i++)
        if (!kp || kp[i]) idx[nk++] = i;
    for (c0 = 0; c0 < nk; c0 += (int)R) {
        int mm = nk - c0 < (int)R ? nk - c0 : (int)R, n = idx[c0 + mm - 1] + 1, e = 0;
        for (r = 0; r < mm; r++) {
            int ir = idx[c0 + r];
            memcpy(dOg + (size_t)r * D, dO + (size_t)ir * D, sizeof(float) * (size_t)D);
            memcpy(Qg + (size_t)r * D, Q + (size_t)ir * D, sizeof(float) * (size_t)D);
            for (j = 0; j < n; j++) Pg[(size_t)r * n + j] = j <= ir ? P[(size_t)ir * T + j] : 0.0f;
        }
        e |= tk_sgemm(0, 1, mm, n, D, 1.0f, dOg, D, V, D, 0.0f, dS, n);
        if (!e)
            for (r = 0; r < mm; r++) {
                int ir = idx[c0 + r];
                const float *p = Pg + (size_t)r * n;
                float *d = dS + (size_t)r * n, dot = 0.0f;
                for (j = 0; j <= ir; j++) dot += p[j] * d[j];
                for (j = 0; j <= ir; j++) d[j] = p[j] * (d[j] - dot);
                for (j = ir + 1; j < n; j++) d[j] = 0.0f;
                if (db) { /* the logit gradient of row ir is the bias gradient's */
                    float *dbr = db + (size_t)ir * T;
                    for (j = 0; j <= ir; j++) dbr[j] += d[j];
                }
            }
        if (!e) e |= tk_sgemm(1, 0, n, D, mm, 1.0f, Pg, n, dOg, D, 1.0f, dV, D);
        if (!e) e |= tk_sgemm(0, 0, mm, D, n, al, dS, n, K, D, 0.0f, dQg, D);
        if (!e) e |= tk_sgemm(1, 0, n, D, mm, al, dS, n, Qg, D, 1.0f, dK, D);
        if (e) return 1;
        for (r = 0; r < mm; r++) {
            float *dq = dQ + (size_t)idx[c0 + r] * D;
            const float *s = dQg + (size_t)r * D;
            int d;
            for (d = 0; d < D; d++) dq[d] += s[d];
        }
    }
    return 0;
}

/* The gated attention-core backward of layer l: dout (B,H,T,D) the gradient of the
   attention output; m->dq, dk, dv (zeroed by the caller) accumulate; dbias (T,T) or NULL
   (no prior) += the gradient of the additive prior bias shared by the sequences and heads.
   Per (b,h) not frozen: the kept rows in chunks of up to 64: gathered dO, Q and P rows, then
     dP = dO_g V[0:n]^T, dS = P (dP - rowsum(P dP)) (j <= i), dV[0:n] += P_g^T dO_g,
     dQ rows = alpha dS K[0:n], dK[0:n] += alpha dS^T Q_g, dbias rows += dS
   (n = last kept row of the chunk + 1): the arithmetic of the dense backward restricted to
   the kept rows; the pruned rows and frozen heads are never touched (their output
   gradient is taken as 0, so their dS, and their share of dbias, is 0). With dbias the
   threads split the heads as tk_attention_backward does: each head sums its sequences'
   dS in sequence order into its own (T,T) slice, then dbias += the slices in head order,
   so the result does not depend on the thread count or the schedule. */
static int mdl__attn_bwd_gated(mdl_model *m, int l, const float *dout, float *dbias)
{
    int B = m->B, T = m->T, H = m->H, D = m->D, nbh = B * H, u, h, nt = mdl__nthreads(), err = 0;
    size_t TT = (size_t)T * T, R = MDL__GATE_BR;
    size_t per = 3 * R * D + 2 * R * T + (size_t)T; /* dOg, Qg, dQg, Pg, dS, idx (as floats) */
    float *acc;
    int rc = mdl__gate_scratch(m, (size_t)nt * per + (dbias ? (size_t)H * TT : 0));
    if (rc) return rc;
    acc = m->gate_scr + (size_t)nt * per; /* (H,T,T) per-head dS sums (with dbias) */
    if (!dbias) {
        MDL__OMP(omp parallel for schedule(dynamic, 1) num_threads(nt) if(nt > 1 && nbh > 1))
        for (u = 0; u < nbh; u++)
            if (mdl__gate_bh(m, l, u, dout, m->gate_scr + (size_t)mdl__tid() * per, NULL)) {
                MDL__OMP(omp atomic write)
                err = 1;
            }
    } else {
        ptrdiff_t ij, ntt = (ptrdiff_t)TT;
        MDL__OMP(omp parallel for schedule(dynamic, 1) num_threads(nt) if(nt > 1 && H > 1))
        for (h = 0; h < H; h++) {
            float *w = m->gate_scr + (size_t)mdl__tid() * per, *db = acc + (size_t)h * TT;
            int b, e = 0;
            memset(db, 0, sizeof(float) * TT);
            for (b = 0; b < B && !e; b++) e = mdl__gate_bh(m, l, b * H + h, dout, w, db);
            if (e) {
                MDL__OMP(omp atomic write)
                err = 1;
            }
        }
        if (!err) {
            MDL__OMP(omp parallel for schedule(static) num_threads(nt) if(nt > 1 && TT > 65536))
            for (ij = 0; ij < ntt; ij++) {
                float s = 0.0f;
                int hh;
                for (hh = 0; hh < H; hh++) s += acc[(size_t)hh * TT + (size_t)ij];
                dbias[ij] += s;
            }
        }
    }
    if (err) return mdl__fail(m, MDL_EFAIL, "CEAS gated attention backward: GEMM failed");
    return MDL_OK;
}

/* Projection backward of layer l with frozen heads skipped. qkv 0: the output projection
   (datt = dbr Wo over the columns of the active heads, dWo += dbr^T attm on those columns;
   the frozen heads' datt columns are 0); qkv 1: dln += dqkv W and dW += dqkv^T n1 over the
   Q, K and V rows of the active heads. Runs of adjacent active heads go in one GEMM. */

static int mdl__proj_bwd_gated(mdl_model *m, int l, int qkv)
{
    const mdl__bp *b = &m->bp[l];
    const mdl__ba *a = &m->ba[l];
    float *P = m->params, *G = m->grads;
    int N = m->B * m->T, C = m->C, H = m->H, D = m->D, h0 = 0, part;
    const unsigned char *fz = m->gate_frozen + (size_t)l * H;
    if (!qkv) MDL__TRY(ex_zero(&m->cx, m->datt, sizeof(float) * (size_t)N * C), "zero");
    while (h0 < H) {
        int h1 = h0, c0, w;
        if (fz[h0]) { h0++; continue; }
        while (h1 < H && !fz[h1]) h1++;
        c0 = h0 * D;
        w = (h1 - h0) * D;
        if (!qkv) {
            MDL__TRY(ex_sgemm(&m->cx, 0, 0, N, w, C, 1.0f, m->dbr, C, P + b->proj + c0, C, 0.0f, m->datt + c0, C),
                     "gated attention projection backward (dx)");
            MDL__TRY(ex_sgemm(&m->cx, 1, 0, C, w, N, 1.0f, m->dbr, C, a->attm + c0, C, 1.0f, G + b->proj + c0, C),
                     "gated attention projection backward (dW)");
        } else {
            for (part = 0; part < 3; part++) {
                size_t r0 = (size_t)part * C + (size_t)c0;
                MDL__TRY(ex_sgemm(&m->cx, 0, 0, N, C, w, 1.0f, m->dqkv + r0, 3 * C, P + b->qkv + r0 * C, C, 1.0f,
                                    m->dln, C), "gated qkv backward (dx)");
                MDL__TRY(ex_sgemm(&m->cx, 1, 0, w, C, N, 1.0f, m->dqkv + r0, 3 * C, a->n1, C, 1.0f,
                                    G + b->qkv + r0 * C, C), "gated qkv backward (dW)");
            }
        }
        h0 = h1;
    }
    return MDL_OK;
}

/* The counts of a backward under the current gating (called by mdl_backward). */
static void mdl__gate_count(mdl_model *m)
{
    int B = m->B, T = m->T, H = m->H, D = m->D, l, b, h, i, f;
    double full = 8.0 * D * (double)T * (T + 1) / 2.0;
    mdl_gate_counts *g = &m->gcount;
    g->attn_bwd_dense = g->attn_bwd_skipped = g->proj_bwd_skipped = 0.0;
    g->rows = g->rows_pruned = g->rows_frozen = 0;
    g->heads_frozen = 0;
    if (m->cfg.attn != MDL_ATTN_SOFTMAX) return;
    g->rows = (long long)(m->L - m->nconv) * B * H * T;
    g->attn_bwd_dense = full * (double)(m->L - m->nconv) * B * H;
    for (l = 0; l < m->L; l++)
        for (h = 0; h < H; h++) {
            f = m->gate_frozen_on && m->gate_frozen[(size_t)l * H + h];
            if (f) {
                g->heads_frozen++;
                g->rows_frozen += (long long)B * T;
                g->attn_bwd_skipped += full * B;
                g->proj_bwd_skipped += 16.0 * (double)B * T * m->C * D;
                continue;
            }
            if (!m->gate_keep_on) continue;
            for (b = 0; b < B; b++) {
                const unsigned char *kp = m->gate_keep + (((size_t)l * B + b) * H + h) * T;
                for (i = 0; i < T; i++)
                    if (!kp[i]) {
                        g->rows_pruned++;
                        g->attn_bwd_skipped += 8.0 * D * (double)(i + 1);
                    }
            }
        }
}

int mdl_set_gating(mdl_model *m, const unsigned char *keep, const unsigned char *frozen)
{
    const mdl_config *c;
    size_t nk, nf, e;
    if (!m) return MDL_EINVAL;
    c = &m->cfg;
    if (!m->have_bwd)
        return mdl__fail(m, MDL_EINVAL, "mdl_set_gating: no training forward with targets to gate (call it between "
                                        "mdl_forward and mdl_backward)");
    if (c->attn != MDL_ATTN_SOFTMAX || c->gac_tau || m->opts.ent_band_lambda > 0.0f)
        return mdl__fail(m, MDL_EINVAL, "mdl_set_gating: CEAS gating needs softmax attention without gac_tau or the "
                                        "entropy band");
    if (m->nconv)
        return mdl__fail(m, MDL_EINVAL, "mdl_set_gating: CEAS gating is not supported with gated-convolution layers "
                                        "(layer_pattern \"%s\")", c->layer_pattern);
    if (sizeof(int) != sizeof(float)) return mdl__fail(m, MDL_EINVAL, "mdl_set_gating: needs 4-byte int");
    nk = (size_t)m->L * m->B * m->H * m->T;
    nf = (size_t)m->L * m->H;
    if (keep)
        for (e = 0; e < nk; e++)
            if (keep[e] > 1) return mdl__fail(m, MDL_EINVAL, "mdl_set_gating: keep[%lu] is %d (must be 0 or 1)",
                                              (unsigned long)e, keep[e]);
    if (frozen)
        for (e = 0; e < nf; e++)
            if (frozen[e] > 1) return mdl__fail(m, MDL_EINVAL, "mdl_set_gating: frozen[%lu] is %d (must be 0 or 1)",
                                                (unsigned long)e, frozen[e]);
    if (keep && nk > m->gate_keep_cap) {
        unsigned char *p = (unsigned char *)realloc(m->gate_keep, nk);
        if (!p) return mdl__fail(m, MDL_ENOMEM, "mdl_set_gating: out of memory");
        m->gate_keep = p;
        m->gate_keep_cap = nk;
    }
    if (frozen && !m->gate_frozen) {
        m->gate_frozen = (unsigned char *)malloc((size_t)MDL_MAX_LAYERS * 256);
        if (!m->gate_frozen) return mdl__fail(m, MDL_ENOMEM, "mdl_set_gating: out of memory");
    }
    if (frozen && nf > (size_t)MDL_MAX_LAYERS * 256)
        return mdl__fail(m, MDL_EINVAL, "mdl_set_gating: at most 256 heads per layer");
    if (keep) memcpy(m->gate_keep, keep, nk);
    if (frozen) memcpy(m->gate_frozen, frozen, nf);
    m->gate_keep_on = keep != NULL;
    m->gate_frozen_on = frozen != NULL;
    if (m->cx.device != EX_CPU && (keep || frozen)) {
        /* the device backward applies the gating as a row mask (mdl_backward): 1 for a kept
           row of a head not frozen, else 0 */
        int l, b, h, i;
        float *mask = (float *)malloc(nk * sizeof(float));
        if (!mask) return mdl__fail(m, MDL_ENOMEM, "mdl_set_gating: out of memory");
        for (l = 0; l < m->L; l++)
            for (b = 0; b < m->B; b++)
                for (h = 0; h < m->H; h++) {
                    const size_t r0 = (((size_t)l * m->B + b) * m->H + h) * (size_t)m->T;
                    const int fz = frozen && frozen[(size_t)l * m->H + h];
                    for (i = 0; i < m->T; i++) mask[r0 + i] = !fz && (!keep || keep[r0 + i]) ? 1.0f : 0.0f;
                }
        if (nk > m->gate_mask_dcap) {
            void *d = NULL;
            mdl__free_dev(m, m->gate_mask_d);
            m->gate_mask_d = NULL;
            m->gate_mask_dcap = 0;
            if (ex_alloc(&m->cx, &d, nk * sizeof(float)) != TK_OK) {
                free(mask);
                m->gate_keep_on = m->gate_frozen_on = 0;
                return mdl__fail(m, MDL_ENOMEM, "mdl_set_gating: out of device memory");
            }
            m->gate_mask_d = (float *)d;
            m->gate_mask_dcap = nk;
        }
        if (ex_to_ctx(&m->cx, m->gate_mask_d, mask, nk * sizeof(float)) != TK_OK) {
            free(mask);
            m->gate_keep_on = m->gate_frozen_on = 0;
            return mdl__fail(m, MDL_EFAIL, "mdl_set_gating: copy of the mask to the device failed");
        }
        free(mask);
    }
    return MDL_OK;
}

int mdl_ceas_gating(mdl_model *m, const ceas_state *cs, int token_gating, int head_gating)
{
    int B, T, H, L, l, h, rc = MDL_OK;
    size_t n;
    float *score = NULL, beta[256];
    unsigned char *keep = NULL;
    void *ws = NULL;
    if (!m) return MDL_EINVAL;
    if (!cs || !cs->mem_ || cs->n_layers != m->L || cs->n_heads != m->H)
        return mdl__fail(m, MDL_EINVAL, "mdl_ceas_gating: the CEAS state must have the model's layers and heads");
    if ((token_gating != 0 && token_gating != 1) || (head_gating != 0 && head_gating != 1))
        return mdl__fail(m, MDL_EINVAL, "mdl_ceas_gating: token_gating and head_gating must be 0 or 1");
    if (!m->have_bwd)
        return mdl__fail(m, MDL_EINVAL, "mdl_ceas_gating: no training forward with targets to gate");
    if (token_gating && !m->gate_rows_ok)
        return mdl__fail(m, MDL_EINVAL, "mdl_ceas_gating: token gating needs a forward with want_gate_rows");
    if (m->H > 256) return mdl__fail(m, MDL_EINVAL, "mdl_ceas_gating: at most 256 heads");
    B = m->B; T = m->T; H = m->H; L = m->L;
    n = (size_t)B * H * T;
    if (token_gating) {
        score = (float *)malloc(sizeof(float) * n);
        keep = (unsigned char *)malloc(n * (size_t)L);
        ws = malloc(ceas_token_mask_workspace_size(T));
        if (!score || !keep || !ws) {
            rc = mdl__fail(m, MDL_ENOMEM, "mdl_ceas_gating: out of memory");
            goto done;
        }
        for (l = 0; l < L && rc == MDL_OK; l++) {
            int e;
            for (h = 0; h < H; h++) beta[h] = 1.0f / (sqrtf((float)m->D) * m->temp[(size_t)l * H + h]);
            e = ceas_gate_scores(score, m->gate_rows + (size_t)l * n, beta, B, H, T);
            if (e == CEAS_OK)
                e = ceas_token_mask(keep + (size_t)l * n, score, B, H, T, ceas_t_gate(cs),
                                    ceas_keep_q_at(&cs->cfg, cs->step), cs->cfg.m_min, NULL, ws);
            if (e != CEAS_OK)
                rc = mdl__fail(m, MDL_EINVAL, "mdl_ceas_gating: layer %d: %s", l, ceas_strerror(e));
        }
    }
    if (rc == MDL_OK) rc = mdl_set_gating(m, keep, head_gating ? cs->frozen : NULL);
done:
    free(score);
    free(keep);
    free(ws);
    return rc;
}

int mdl_gate_counts_get(const mdl_model *m, mdl_gate_counts *out)
{
    if (!m || !out) return MDL_EINVAL;
    *out = m->gcount;
    return MDL_OK;
}

/* The runs of frozen-head parameter floats: counts them and, with buf, copies each run
   between buf and compact (restore 0: buf -> compact; 1: compact -> buf). */
/* one run: memcpy on the host, tk_copy when either side is device memory (*err set on failure) */
static void mdl__run_copy(float *dst, const float *src, size_t n, int dev, int *err)
{
    if (!dev) memcpy(dst, src, n * sizeof(float));
    else if (tk_copy(dst, src, n * sizeof(float)) != TK_OK) *err = 1;
}

static size_t mdl__frozen_runs(const mdl_model *m, const unsigned char *frozen, float *buf, float *compact,
                               int restore, int *err)
{
    const int dev = buf && (tk_is_device(buf) || tk_is_device(compact));
    size_t tot = 0;
    int l, h, part, o;
    if (m->cfg.attn != MDL_ATTN_SOFTMAX) return 0;
    for (l = 0; l < m->L; l++)
        for (h = 0; h < m->H; h++) {
            size_t D = (size_t)m->D, C = (size_t)m->C;
            if (!frozen[(size_t)l * m->H + h] || m->lconv[l]) continue; /* (a conv layer has no heads) */
            for (part = 0; part < 3; part++) { /* rows of qkv.weight (3C,C): D x C floats */
                size_t off = m->bp[l].qkv + ((size_t)part * C + (size_t)h * D) * C, len = D * C;
                if (buf) {
                    if (restore) mdl__run_copy(buf + off, compact + tot, len, dev, err);
                    else mdl__run_copy(compact + tot, buf + off, len, dev, err);
                }
                tot += len;
            }
            for (o = 0; o < m->C; o++) { /* columns of proj.weight (C,C): C runs of D floats */
                size_t off = m->bp[l].proj + (size_t)o * C + (size_t)h * D;
                if (buf) {
                    if (restore) mdl__run_copy(buf + off, compact + tot, D, dev, err);
                    else mdl__run_copy(compact + tot, buf + off, D, dev, err);
                }
                tot += D;
            }
        }
    return tot;
}

size_t mdl_frozen_floats(const mdl_model *m, const unsigned char *frozen)
{
    int err = 0;
    if (!m || !frozen) return 0;
    return mdl__frozen_runs(m, frozen, NULL, NULL, 0, &err);
}

int mdl_frozen_copy(const mdl_model *m, const unsigned char *frozen, float *buf, float *compact, int restore)
{
    int err = 0;
    if (!m || !frozen || !buf || !compact || (restore != 0 && restore != 1)) return MDL_EINVAL;
    if ((m->cx.device != EX_CPU) != (tk_is_device(buf) != 0)) return MDL_EINVAL; /* buf on the model's side */
    mdl__frozen_runs(m, frozen, buf, compact, restore, &err);
    return err ? MDL_EFAIL : MDL_OK;
}

/* ------------------------------------------------------------------ FLOPs */

double mdl_flops_per_token(const mdl_config *cfg, int T)
{
    /* 6 x (matmul parameters: every weight matrix a token's activations multiply, the
       tied head counted once as a matmul, embeddings excluded) + attention at its causal
       cost: per layer and token, a query sees (T+1)/2 keys on average; QK^T and PV each
       take 2 C (T+1)/2 FLOPs forward, so 2 C (T+1) forward and 3x that for forward +
       backward: 6 C (T+1) per layer. */
    double C, F, L, V, per_layer, mm;
    if (!cfg || T <= 0) return 0.0;
    C = cfg->d_model;
    F = lyr_ffn_width(cfg->ffn, cfg->d_ff_mult, cfg->d_model); /* the FFN table's width rule */
    if (F < 1.0) return 0.0;
    L = cfg->n_layers;
    V = cfg->vocab;
    {
        lyr_polar_dims pd;
        lyr_gdelta_dims gd;
        lyr_moe_dims md;
        double extra = 0.0, per_conv, Lc = 0.0, La;
        mdl__dims(cfg, &pd, &gd, &md);
        if (cfg->attn == MDL_ATTN_POLAR) {
            double Dh = C / (double)pd.H;
            double Gg = pd.gate == LYR_POLAR_GATE_CHANNEL ? pd.H * Dh : (double)pd.H; /* gate rows */
            /* [q | k | v | gate] projection, o and mu read-outs */
            per_layer = (((double)pd.H + 2.0 * pd.Hkv) * Dh + Gg) * C + C * pd.H * Dh + C * pd.H;
        } else {
            per_layer = 4.0 * C * C; /* qkv + output projection */
        }
        per_conv = 4.0 * C * C; /* a gated-convolution layer (layer_pattern 'c'): in_proj (3C,C), out_proj */
        if (cfg->ffn == MDL_FFN_MOE)
            per_layer += (double)md.top_k * 2.0 * C * F + (double)md.R * md.E,
                per_conv += (double)md.top_k * 2.0 * C * F + (double)md.R * md.E;
        else { /* an MLP row of the FFN table: its C x F matrices */
            double mats = lyr_ffn_get(cfg->ffn)->mats;
            per_layer += mats * C * F, per_conv += mats * C * F;
        }
        if (mdl__need_mu(cfg)) per_layer += C * C, per_conv += C * C; /* membership projection */
        {
            size_t i, n = 0;
            while (n < sizeof cfg->layer_pattern && cfg->layer_pattern[n]) n++;
            for (i = 0; n && n < sizeof cfg->layer_pattern && (int)i < cfg->n_layers; i++)
                Lc += cfg->layer_pattern[i % n] == 'c';
        }
        La = L - Lc;
        if (cfg->memory == MDL_MEM_GDELTA) {
            double hd = (double)gd.Hm * gd.Dk;
            /* qkv (not with mem_qkv shared: the attention's), read-out gate, proj, gamma/beta */
            per_layer += (gd.qkv_shared ? 2.0 : 5.0) * hd * C + 2.0 * gd.Hm * C;
            /* recurrence: state read, delta write and query read, ~4 Hm Dk^2 FLOPs forward */
            extra += 3.0 * 4.0 * hd * gd.Dk;
        }
        if (Lc == 0.0) { /* every layer attention: the sums as before, bit for bit */
            mm = L * per_layer + V * C;
            return 6.0 * mm + L * (6.0 * C * ((double)T + 1.0) + extra);
        }
        mm = La * per_layer + Lc * per_conv + V * C;
        /* a conv layer's depthwise conv: 2 K C forward, 3x with the backward */
        return 6.0 * mm + La * (6.0 * C * ((double)T + 1.0) + extra) + Lc * 6.0 * (double)cfg->lfm_k * C;
    }
}

/* ------------------------------------------------------------------ decoding (issue 42) */

/* What token-by-token decoding refuses: the one table behind mdl_decode_supports and
   mdl_decode_limit. Decoding keeps each layer's rotated keys and values per slot and runs
   the per-token parts of the block (norms, projections, FFN) on the new rows only, so a
   component whose output at t reads more than the token at t and the cached keys/values
   (a (T,T) prior, the recurrent memory, the convolution's window, memberships' running
   statistics) is not covered yet. */
static int mdl__dec_heads(const mdl_config *c) { return c->value_gate && c->n_heads > 256; }
static const struct {
    int (*refuses)(const mdl_config *);
    const char *what;
} mdl__dec_limits[] = {
    {mdl__dec_heads, "the value gate with more than 256 heads"},
};
#define MDL__NDEC_LIMITS ((int)(sizeof mdl__dec_limits / sizeof mdl__dec_limits[0]))

const char *mdl_decode_limit(int i)
{
    return (i >= 0 && i < MDL__NDEC_LIMITS) ? mdl__dec_limits[i].what : NULL;
}

int mdl_decode_supports(const mdl_config *cfg, char *err, size_t errlen)
{
    int i;
    if (!cfg) return ex_errf(err, errlen, MDL_EINVAL, "mdl_decode_supports: cfg is NULL");
    for (i = 0; i < MDL__NDEC_LIMITS; i++)
        if (mdl__dec_limits[i].refuses(cfg))
            return ex_errf(err, errlen, MDL_EINVAL,
                           "token-by-token decoding does not support %s yet",
                           mdl__dec_limits[i].what);
    return ex_errf(err, errlen, MDL_OK, "ok");
}

/* What decoding on a device model refuses besides mdl__dec_limits: a component whose
   per-row decode work has no device op would be listed here (refuses, phrase). None today:
   every component's decode runs through exctx.h's ops or the headers' _cuda entry points
   (polar's Canon layers and per-channel gate too, since issue 43). The table ends at its
   {NULL, NULL} entry. */
static const struct {
    int (*refuses)(const mdl_config *);
    const char *what;
} mdl__dec_dev_limits[] = {
    {NULL, NULL},
};
#define MDL__NDEC_DEV_LIMITS ((int)(sizeof mdl__dec_dev_limits / sizeof mdl__dec_dev_limits[0]) - 1)

const char *mdl_decode_device_limit(int i)
{
    return (i >= 0 && i < MDL__NDEC_DEV_LIMITS) ? mdl__dec_dev_limits[i].what : NULL;
}

int mdl_decode_supports_on(const mdl_config *cfg, int device, char *err, size_t errlen)
{
    int i, rc = mdl_decode_supports(cfg, err, errlen);
    if (rc != MDL_OK || device == MDL_DEVICE_CPU) return rc;
    if (device != MDL_DEVICE_CUDA)
        return ex_errf(err, errlen, MDL_EINVAL, "mdl_decode_supports_on: unknown device %d", device);
    for (i = 0; i < MDL__NDEC_DEV_LIMITS; i++)
        if (mdl__dec_dev_limits[i].refuses(cfg))
            return ex_errf(err, errlen, MDL_EINVAL,
                           "token-by-token decoding on a device model does not support %s yet (the CPU model "
                           "decodes it)", mdl__dec_dev_limits[i].what);
    return ex_errf(err, errlen, MDL_OK, "ok");
}

struct mdl__dec {
    int nb, nl, rows, nthr;
    void *blk;               /* the one allocation below (kc at its first 64-byte boundary) */
    float *kc, *vc;          /* (L, nb, nl, C) rotated keys, values */
    float *vzc;              /* (L, nb, nl, H) value-gate pre-activations (value_gate), else NULL */
    float *mu, *zproj, *eta, *vz; /* memberships (rows,R), their projection (rows,C), residual
                                     gates (rows), value-gate pre-activations (rows,H) */
    int *len;                /* (nb) live length of each slot (host) */
    float *temp;             /* (L,H) temperature multipliers (mdl_decode_set_temp; host) */
    float *tempc;            /* temp in the model's memory (the CPU: temp itself) */
    int *slotc, *posc, *idc; /* rslot, rpos and the rows' token ids in the model's memory (the
                                CPU: rslot, rpos, and idc NULL: the caller's ids are read) */
    float *lg;               /* (rows, V) logits in device memory, copied to the caller's
                                (device model); NULL on the CPU (the head writes the caller's) */
    float *hst;              /* the FFN's host scratch (device model; NULL on the CPU) */
    float gl[MDL_MAX_LAYERS]; /* GAC's tau per layer (1 without), read at mdl_decode_init */
    void *hb;                /* the host block: len, temp, rslot, rpos, rout */
    float *x, *n1, *qkv, *att, *ap, *n2, *fp, *nf; /* scratch, rows x C (qkv rows x 3C) */
    float *sv_n1, *sv_n2, *sv_f, *sv_nf, *work;    /* the components' saved / work buffers */
    float *sc;               /* (nthr, nl) attention scores */
    int *rslot, *rpos, *rout; /* per row: slot, position; rows that want logits (host) */
    /* polar attention (its keys and values live in kc / vc as (nb, Hkv, nl, D) per layer),
       the gated-delta channel, the convolution: scratch per row, state per slot */
    float *xa;               /* one block for everything below (NULL when none is used) */
    float *pqkv, *pq, *pc, *pmag; /* (rows, Pq) projections, (rows, H, D) q, c, (rows, H) magnitudes */
    int *ptab;               /* (rows) the rows' polar lengths in device memory (a device model) */
    float *pgl, *psg;        /* (rows, G) polar's gate logits; (rows, G) the device's sigmoid scratch
                                (G = H, or H D with the gate per channel) */
    int *plen, *plenc;       /* (rows) the rows' polar lengths t + 1 (host); in the model's memory
                                (the CPU: plen itself; a device: ptab) */
    float *gqkv, *gq, *gk, *gv, *ggt, *gbt, *gr, *gg, *gm; /* gated delta: (rows, 3HD), (rows, HD) x3,
                                (rows, Hm) x2, (rows, HD) readout and gate, (rows, C) output */
    float *gst;              /* (L, nb, Hm, Dk, Dk) memory states, zeroed when a slot starts */
    float *n1p, *cvr;        /* (rows, C) norm1 output; (L, nb, K, C) the convolution's last K inputs */
    float *lfr;              /* (L, nb, K, C) the gated convolution's last K values of y = B x
                                (layer_pattern 'c' layers; row t % K holds position t) */
    float *cnr;              /* (L, nb, K, (H + 2 Hkv) D) polar's Canon inputs [q | k | v] (after
                                the q/k norm) of the last K = polar_canon_k positions */
    float *pb;               /* the prior B(W), W = nl: (L, nl, nl) (RPA, ERA: per layer) or (nl, nl)
                                (sinusoid, relative: shared); NULL without a prior */
    int pb_layers;           /* L or 1 */
    size_t cache_bytes, bytes;
};

static void *mdl__dec_take(char **p, size_t bytes)
{
    void *r = *p;
    *p += mdl__align(bytes ? bytes : 1);
    return r;
}

void mdl_decode_free(mdl_model *m)
{
    if (!m || !m->dec) return;
    ex_free(&m->cx, m->dec->xa);
    ex_free(&m->cx, m->dec->pb);
    ex_free(&m->cx, m->dec->blk);
    free(m->dec->hb);
    free(m->dec->hst);
    free(m->dec);
    m->dec = NULL;
}

/* The scratch and state of polar attention, the gated-delta channel and the convolution
   (one block, d->xa); nothing when the model has none of them. */
static int mdl__dec_extra(mdl_model *m, struct mdl__dec *d)
{
    const mdl_config *c = &m->cfg;
    const size_t rows = (size_t)d->rows, nb = (size_t)d->nb, L = (size_t)m->L, C = (size_t)m->C;
    const int polar = c->attn == MDL_ATTN_POLAR, mem = m->cp[MDL__CP_MEM].k != NULL,
              conv = m->cp[MDL__CP_CONV].k != NULL, lfm = m->nconv > 0;
    size_t H = (size_t)m->H, D = (size_t)m->D, Hkv = polar ? (size_t)m->pd.Hkv : 0,
           G = polar && m->pd.gate == LYR_POLAR_GATE_CHANNEL ? H * D : H, Pq = polar ? (H + 2 * Hkv) * D + G : 0,
           Hm = mem ? (size_t)m->gdd.Hm : 0,
           Dk = mem ? (size_t)m->gdd.Dk : 0, HD = Hm * Dk, K = conv ? (size_t)c->conv_k : 0,
           KL = lfm ? (size_t)c->lfm_k : 0, KC = polar ? (size_t)c->polar_canon_k : 0,
           PC = polar ? (H + 2 * Hkv) * D : 0, total = 0;
    char *p;
    if (!polar && !mem && !conv && !lfm) return MDL_OK;
#define MDL__XA(n) (total += mdl__align(sizeof(float) * (size_t)(n) + 1))
    MDL__XA(rows * Pq);
    MDL__XA(rows * H * D);
    MDL__XA(rows * H * D);
    MDL__XA(rows * H);
    MDL__XA(rows); /* ptab (ints) */
    MDL__XA(rows * 3 * HD);
    MDL__XA(rows * HD);
    MDL__XA(rows * HD);
    MDL__XA(rows * HD);
    MDL__XA(rows * Hm);
    MDL__XA(rows * Hm);
    MDL__XA(rows * HD);
    MDL__XA(rows * HD);
    MDL__XA(rows * C);
    MDL__XA(L * nb * Hm * Dk * Dk);
    MDL__XA(rows * C);
    MDL__XA(L * nb * K * C);
    MDL__XA(L * nb * KL * C);
    MDL__XA(L * nb * KC * PC);
    MDL__XA(rows * G); /* pgl */
    MDL__XA(rows * G); /* psg */
#undef MDL__XA
    {
        /* in the model's memory, zeroed (the memory states start from zero) */
        void *xv = NULL;
        if (ex_alloc(&m->cx, &xv, total) != TK_OK || ex_zero(&m->cx, xv, total) != TK_OK) {
            ex_free(&m->cx, xv);
            return mdl__fail(m, MDL_ENOMEM, "mdl_decode_init: out of memory (%.1f MB of decoding state)",
                             (double)total / 1e6);
        }
        d->xa = (float *)xv;
    }
    p = (char *)d->xa;
#define MDL__XT(n) ((float *)mdl__dec_take(&p, sizeof(float) * (size_t)(n) + 1))
    d->pqkv = MDL__XT(rows * Pq);
    d->pq = MDL__XT(rows * H * D);
    d->pc = MDL__XT(rows * H * D);
    d->pmag = MDL__XT(rows * H);
    d->ptab = (int *)(void *)MDL__XT(rows);
    d->gqkv = MDL__XT(rows * 3 * HD);
    d->gq = MDL__XT(rows * HD);
    d->gk = MDL__XT(rows * HD);
    d->gv = MDL__XT(rows * HD);
    d->ggt = MDL__XT(rows * Hm);
    d->gbt = MDL__XT(rows * Hm);
    d->gr = MDL__XT(rows * HD);
    d->gg = MDL__XT(rows * HD);
    d->gm = MDL__XT(rows * C);
    d->gst = MDL__XT(L * nb * Hm * Dk * Dk);
    d->n1p = MDL__XT(rows * C);
    d->cvr = MDL__XT(L * nb * K * C);
    d->lfr = MDL__XT(L * nb * KL * C);
    d->cnr = MDL__XT(L * nb * KC * PC);
    d->pgl = MDL__XT(rows * G);
    d->psg = MDL__XT(rows * G);
    d->plenc = m->cx.device != EX_CPU ? d->ptab : d->plen;
#undef MDL__XT
    d->bytes += total;
    d->cache_bytes += sizeof(float) * (L * nb * Hm * Dk * Dk + L * nb * K * C + L * nb * KL * C + L * nb * KC * PC);
    return MDL_OK;
}

/* The prior of decoding: B(W) for the window W = d->nl (mdl_decode_init's max_len), what an
   evaluation forward of W tokens uses: RPA from the running statistics (the cached, leak-free
   prior), ERA from the layer's centres, sigma and alpha, the fixed priors from the config;
   no warm-in (scale 1). Row t of it is the bias of the token at position t in every slot,
   whatever the slot's live length: a sequence decodes as the first rows of a W-token
   forward (model.h). Built once, from the parameters and statistics at mdl_decode_init. */
static int mdl__dec_prior_build(mdl_model *m, struct mdl__dec *d)
{
    const mdl_config *c = &m->cfg;
    const int W = d->nl;
    const size_t WW = (size_t)W * (size_t)W;
    int l, rc = ERA_OK;
    void *pv = NULL;
    d->pb_layers = (c->prior == MDL_PRIOR_RPA || c->prior == MDL_PRIOR_ERA) ? m->L : 1;
    if (ex_alloc(&m->cx, &pv, sizeof(float) * WW * (size_t)d->pb_layers) != TK_OK)
        return mdl__fail(m, MDL_ENOMEM, "mdl_decode_init: out of memory (the prior B(%d))", W);
    d->pb = (float *)pv;
    mdl__scal_refresh(m); /* tau_att, pos_beta, ERA's sigma and alpha as the parameters hold them */
    if (c->prior == MDL_PRIOR_RPA) {
        /* by the model's device's prior (era_rpa_forward or its _cuda twin) from the running
           table, which a device model uploads (rows 0..W-1 of each layer) */
        era_rpa_config ru = c->rpa;
        void *mv = NULL;
        ru.R = m->R;
        ru.legacy = 0;
        ru.scale = 1.0f;
        if (m->cx.device != EX_CPU && ex_alloc(&m->cx, &mv, sizeof(float) * (size_t)W * m->R) != TK_OK)
            return mdl__fail(m, MDL_ENOMEM, "mdl_decode_init: out of memory (the running table)");
        for (l = 0; l < m->L && rc == ERA_OK; l++) {
            era_rpa_params rp = mdl__rpa_params(m, l);
            era_rpa_state st = era_rpa_state_init();
            era_rpa_cuda_state cst = era_rpa_cuda_state_init();
            const float *mu = m->pstats + (size_t)l * c->max_T * m->R;
            if (mv) {
                if (ex_to_ctx(&m->cx, mv, mu, sizeof(float) * (size_t)W * m->R) != TK_OK) {
                    rc = ERA_EINVAL;
                    break;
                }
                mu = (const float *)mv;
            }
            rc = ex_rpa_fwd(&m->cx, &ru, &rp, mu, 1, W, d->pb + (size_t)l * WW, &st, &cst, NULL);
            era_rpa_state_free(&st);
            era_rpa_cuda_state_free(&cst);
        }
        if (mv) ex_free(&m->cx, mv);
    } else if (c->prior == MDL_PRIOR_ERA) {
        ex_ctx cx1 = m->cx; /* the centres checked on the host here: decoding reads no status word */
        cx1.status = NULL;
        for (l = 0; l < m->L && rc == ERA_OK; l++) {
            era_era_params ep = mdl__era_params(m, l);
            era_era_state st = era_era_state_init();
            era_era_cuda_state cst = era_era_cuda_state_init();
            rc = ex_era_fwd(&cx1, &c->era, &ep, W, d->pb + (size_t)l * WW, &st, &cst, NULL);
            era_era_state_free(&st);
            era_era_cuda_state_free(&cst);
        }
    } else {
        /* the fixed priors depend on the config alone: built on the host, uploaded once */
        era_pos_config pc = c->fixed_prior;
        float *hp = m->cx.device != EX_CPU ? (float *)malloc(sizeof(float) * WW) : d->pb;
        if (!hp) return mdl__fail(m, MDL_ENOMEM, "mdl_decode_init: out of memory (the prior B(%d))", W);
        pc.scale = 1.0f;
        pc.max_T = c->max_T;
        rc = c->prior == MDL_PRIOR_SINUSOID ? era_sinusoid_bias(&pc, W, hp) : era_relative_bias(&pc, W, hp);
        if (hp != d->pb) {
            if (rc == ERA_OK && ex_to_ctx(&m->cx, d->pb, hp, sizeof(float) * WW) != TK_OK) rc = ERA_EINVAL;
            free(hp);
        }
    }
    if (rc != ERA_OK)
        return mdl__fail(m, rc == ERA_ENOMEM ? MDL_ENOMEM : MDL_EFAIL, "mdl_decode_init: the prior B(%d) failed (%s)", W,
                         era_strerror(rc));
    return MDL_OK;
}

int mdl_decode_init(mdl_model *m, int max_batch, int max_len, size_t *cache_bytes)
{
    struct mdl__dec *d;
    const mdl_config *c;
    int rows, L, C, H, l, nthr;
    const int dev = m ? m->cx.device != EX_CPU : 0;
    size_t fl = 0, nsv1, nsv2, nsvf, nwork, cache, total, hbytes, w, vzn, nsc, nlg;
    char e[256], *p;
    void *blk = NULL;
    if (cache_bytes) *cache_bytes = 0;
    if (!m) return MDL_EINVAL;
    c = &m->cfg;
    if (mdl_decode_supports_on(c, m->cx.device, e, sizeof e) != MDL_OK)
        return mdl__fail(m, MDL_EINVAL, "mdl_decode_init: %s", e);
    if (max_batch < 1 || max_batch > 65536)
        return mdl__fail(m, MDL_EINVAL, "mdl_decode_init: max_batch must be in [1, 65536] (got %d)", max_batch);
    if (max_len < 1 || max_len > c->max_T)
        return mdl__fail(m, MDL_EINVAL, "mdl_decode_init: max_len must be in [1, max_T = %d] (got %d)", c->max_T,
                         max_len);
    L = m->L;
    C = m->C;
    H = m->H;
    rows = max_batch > max_len ? max_batch : max_len;
    nthr = mdl__nthreads();
    if (nthr < 1) nthr = 1;
    cache = (size_t)L * (size_t)max_batch * (size_t)max_len * (size_t)C;
    if (cache > ((size_t)1 << 40) / (2 * sizeof(float)))
        return mdl__fail(m, MDL_EINVAL, "mdl_decode_init: the cache (%d layers x %d slots x %d positions x %d) is too "
                                        "large", L, max_batch, max_len, C);
    nsv1 = m->cp[MDL__CP_N1].k->saved_floats(m->cp[MDL__CP_N1].d, 1, rows);
    nsv2 = m->cp[MDL__CP_N2].k->saved_floats(m->cp[MDL__CP_N2].d, 1, rows);
    nsvf = m->cp[MDL__CP_FFN].k->saved_floats(m->cp[MDL__CP_FFN].d, 1, rows);
    nwork = 0;
    for (l = 0; l < MDL__NCP; l++)
        if (m->cp[l].k && l != MDL__CP_MIX) {
            w = m->cp[l].k->work_floats(m->cp[l].d, 1, rows);
            if (w > nwork) nwork = w;
        }
    vzn = c->value_gate ? (size_t)L * (size_t)max_batch * (size_t)max_len * (size_t)H : 0;
    /* the attention's score scratch: one row of nl per OpenMP thread on the CPU, one per
       (row, head) on the device (its kernel runs them all at once) */
    nsc = (dev ? (size_t)rows * H : (size_t)nthr) * (size_t)max_len;
    nlg = dev ? (size_t)rows * m->V : 0;
    fl = (size_t)rows * C * 11 + (size_t)rows * (size_t)(m->R + 1 + H) + nsv1 * 2 + nsv2 + nsvf + nwork + nsc;
    total = mdl__align(sizeof(float) * cache) * 2 + mdl__align(sizeof(float) * vzn) + mdl__align(sizeof(float) * fl) +
            32 * MDL__ALIGN;
    if (dev) /* the context copies of temp, rslot, rpos, the ids; the logits */
        total += mdl__align(sizeof(float) * (size_t)L * H) + 3 * mdl__align(sizeof(int) * (size_t)rows) +
                 mdl__align(sizeof(float) * nlg);
    hbytes = mdl__align(sizeof(int) * (size_t)max_batch) + mdl__align(sizeof(float) * (size_t)L * H) +
             4 * mdl__align(sizeof(int) * (size_t)rows) + 8 * MDL__ALIGN;
    mdl_decode_free(m);
    d = (struct mdl__dec *)calloc(1, sizeof *d);
    if (!d) return mdl__fail(m, MDL_ENOMEM, "mdl_decode_init: out of memory");
    d->hb = malloc(hbytes);
    if (!d->hb || ex_alloc(&m->cx, &blk, total) != TK_OK) {
        free(d->hb);
        free(d);
        return mdl__fail(m, MDL_ENOMEM, "mdl_decode_init: out of memory (%.1f MB)", (double)total / 1e6);
    }
    /* the caches at 64-byte lines (a large malloc is 16 bytes past a page): a head's slice
       of a cached row, D = 32 floats, is then two lines, not three, for the attention's
       reads; total keeps 32 * MDL__ALIGN bytes to spare */
    d->blk = blk;
    d->kc = (float *)(void *)(((uintptr_t)blk + (MDL__ALIGN - 1)) & ~(uintptr_t)(MDL__ALIGN - 1));
    p = (char *)d->hb;
    d->len = (int *)mdl__dec_take(&p, sizeof(int) * (size_t)max_batch);
    d->temp = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)L * H);
    d->rslot = (int *)mdl__dec_take(&p, sizeof(int) * (size_t)rows);
    d->rpos = (int *)mdl__dec_take(&p, sizeof(int) * (size_t)rows);
    d->rout = (int *)mdl__dec_take(&p, sizeof(int) * (size_t)rows);
    d->plen = (int *)mdl__dec_take(&p, sizeof(int) * (size_t)rows);
    if ((size_t)(p - (char *)d->hb) > hbytes) {
        free(d->hb);
        ex_free(&m->cx, blk);
        free(d);
        return mdl__fail(m, MDL_EFAIL, "mdl_decode_init: internal size error");
    }
    p = (char *)d->kc + mdl__align(sizeof(float) * cache);
    d->vc = (float *)mdl__dec_take(&p, sizeof(float) * cache);
    d->vzc = vzn ? (float *)mdl__dec_take(&p, sizeof(float) * vzn) : NULL;
    d->mu = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * m->R);
    d->zproj = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C);
    d->eta = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows);
    d->vz = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * H);
    d->x = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C);
    d->n1 = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C);
    d->qkv = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C * 3);
    d->att = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C);
    d->ap = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C);
    d->n2 = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C);
    d->fp = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C);
    d->nf = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)rows * C);
    d->sv_n1 = (float *)mdl__dec_take(&p, sizeof(float) * nsv1);
    d->sv_nf = (float *)mdl__dec_take(&p, sizeof(float) * nsv1);
    d->sv_n2 = (float *)mdl__dec_take(&p, sizeof(float) * nsv2);
    d->sv_f = (float *)mdl__dec_take(&p, sizeof(float) * nsvf);
    d->work = (float *)mdl__dec_take(&p, sizeof(float) * nwork);
    d->sc = (float *)mdl__dec_take(&p, sizeof(float) * nsc);
    if (dev) {
        d->tempc = (float *)mdl__dec_take(&p, sizeof(float) * (size_t)L * H);
        d->slotc = (int *)mdl__dec_take(&p, sizeof(int) * (size_t)rows);
        d->posc = (int *)mdl__dec_take(&p, sizeof(int) * (size_t)rows);
        d->idc = (int *)mdl__dec_take(&p, sizeof(int) * (size_t)rows);
        d->lg = (float *)mdl__dec_take(&p, sizeof(float) * nlg);
    } else {
        d->tempc = d->temp;
        d->slotc = d->rslot;
        d->posc = d->rpos;
    }
    if ((size_t)(p - (char *)blk) > total) { /* (the sum above covers every take) */
        free(d->hb);
        ex_free(&m->cx, blk);
        free(d);
        return mdl__fail(m, MDL_EFAIL, "mdl_decode_init: internal size error");
    }
    d->nb = max_batch;
    d->nl = max_len;
    d->rows = rows;
    d->nthr = nthr;
    d->cache_bytes = sizeof(float) * (2 * cache + vzn);
    d->bytes = total + hbytes;
    m->dec = d; /* (mdl_decode_free releases what is set up below if a step fails) */
    for (l = 0; l < L * H; l++) d->temp[l] = 1.0f;
    memset(d->len, 0, sizeof(int) * (size_t)max_batch);
    if (dev && ex_to_ctx(&m->cx, d->tempc, d->temp, sizeof(float) * (size_t)L * H) != TK_OK) {
        mdl_decode_free(m);
        return mdl__fail(m, MDL_EFAIL, "mdl_decode_init: copy of the temperatures failed");
    }
    if (dev && m->cp[MDL__CP_FFN].k->host_floats) { /* the FFN's host scratch (the MoE's routing) */
        size_t hf = m->cp[MDL__CP_FFN].k->host_floats(m->cp[MDL__CP_FFN].d, 1, rows);
        if (hf) {
            d->hst = (float *)malloc(sizeof(float) * hf);
            if (!d->hst) {
                mdl_decode_free(m);
                return mdl__fail(m, MDL_ENOMEM, "mdl_decode_init: out of memory (the FFN's host scratch)");
            }
            d->bytes += sizeof(float) * hf;
        }
    }
    /* GAC's tau per layer as the parameters hold it now (a device model: the host mirror) */
    mdl__scal_refresh(m);
    for (l = 0; l < L; l++) d->gl[l] = m->bp[l].gtau != MDL__ABSENT ? mdl__scal(m, l, m->bp[l].gtau) : 1.0f;
    {
        int rc = mdl__dec_extra(m, d);
        if (rc) {
            mdl_decode_free(m);
            return rc;
        }
    }
    if (c->prior != MDL_PRIOR_NONE) {
        int rc = mdl__dec_prior_build(m, d);
        if (rc) {
            mdl_decode_free(m);
            return rc;
        }
        d->bytes += sizeof(float) * (size_t)d->pb_layers * (size_t)max_len * (size_t)max_len;
    }
    if (cache_bytes) *cache_bytes = d->cache_bytes;
    return MDL_OK;
}

size_t mdl_decode_cache_bytes(const mdl_model *m) { return m && m->dec ? m->dec->cache_bytes : 0; }

int mdl_decode_set_temp(mdl_model *m, const float *head_temp, float attn_temp_mul)
{
    int i, n;
    if (!m) return MDL_EINVAL;
    if (!m->dec) return mdl__fail(m, MDL_EINVAL, "mdl_decode_set_temp: call mdl_decode_init first");
    if (!mdl__finite(attn_temp_mul) || !(attn_temp_mul > 0.0f))
        return mdl__fail(m, MDL_EINVAL, "mdl_decode_set_temp: attn_temp_mul must be finite and > 0 (got %g)",
                         (double)attn_temp_mul);
    n = m->L * m->H;
    if (head_temp)
        for (i = 0; i < n; i++)
            if (!mdl__finite(head_temp[i]) || !(head_temp[i] > 0.0f))
                return mdl__fail(m, MDL_EINVAL, "mdl_decode_set_temp: head_temp[%d] must be finite and > 0 (got %g)",
                                 i, (double)head_temp[i]);
    for (i = 0; i < n; i++) m->dec->temp[i] = attn_temp_mul * (head_temp ? head_temp[i] : 1.0f);
    if (m->dec->tempc != m->dec->temp &&
        ex_to_ctx(&m->cx, m->dec->tempc, m->dec->temp, sizeof(float) * (size_t)n) != TK_OK)
        return mdl__fail(m, MDL_EFAIL, "mdl_decode_set_temp: copy of the temperatures failed");
    return MDL_OK;
}

int mdl_decode_reset(mdl_model *m, int slot)
{
    if (!m) return MDL_EINVAL;
    if (!m->dec) return mdl__fail(m, MDL_EINVAL, "mdl_decode_reset: call mdl_decode_init first");
    if (slot < 0 || slot >= m->dec->nb)
        return mdl__fail(m, MDL_ERANGE, "mdl_decode_reset: slot %d is outside [0, %d)", slot, m->dec->nb);
    m->dec->len[slot] = 0;
    if (m->cp[MDL__CP_MEM].k && m->dec->gst) { /* the memory channel's states of this slot start from zero */
        const size_t per = (size_t)m->gdd.Hm * m->gdd.Dk * m->gdd.Dk;
        int l;
        for (l = 0; l < m->L; l++)
            if (ex_zero(&m->cx, m->dec->gst + ((size_t)l * m->dec->nb + slot) * per, sizeof(float) * per) != TK_OK)
                return mdl__fail(m, MDL_EFAIL, "mdl_decode_reset: clearing the memory states failed");
    }
    return MDL_OK;
}

int mdl_decode_len(const mdl_model *m, int slot)
{
    if (!m || !m->dec || slot < 0 || slot >= m->dec->nb) return -1;
    return m->dec->len[slot];
}

/* One block-stack pass over n rows (row r: token ids[r] of slot rslot[r] at position
   rpos[r]; every earlier position of that slot is in the cache or among the earlier rows),
   then the head for the rows listed in rout (nout of them) into logits (nout, V). The
   same math as mdl_forward's: rows of one slot see exactly the keys a causal forward's row
   at that position sees. */
/* Polar attention of layer l for the n rows (lyr_polar_fwd's math, one query at a time):
   qkvg = n1 W^T split into q (H,D), k, v (Hkv,D), gate logits (H, or H D per channel); q and
   k RMSNormed per head (qk_norm); k, v into the slot's cache, (nb, Hkv, nl, D) in kc / vc
   (one block of nl positions per slot); with Canon layers, q and the cached k, v through
   their convolutions over the slot's ring of the last K inputs; polar_decode of each row
   over its slot's live keys 0..t (the last row of polar_forward at length t + 1); ap = eq.
   14 (W_o (c sigmoid(g)) + W_mu mag, + the biases): exctx.h's ex_dec_polar_* and
   ex_dec_canon ops, and lyr_polar_assemble with the gate per channel or the biases (either
   device). Polar's output at t does not depend on the length beyond t: exact to rounding. */
static int mdl__dec_polar(mdl_model *m, int l, int n)
{
    struct mdl__dec *d = m->dec;
    const lyr_polar_dims *pd = &m->pd;
    const float *Pp[LYR_MAX_PARAMS];
    lyr_io io;
    polar_params prm;
    const int C = m->C, H = m->H, D = m->D, Hkv = pd->Hkv, nl = d->nl, nb = d->nb;
    const int Gc = pd->gate == LYR_POLAR_GATE_CHANNEL ? H * D : H, Pq = (H + 2 * Hkv) * D + Gc;
    float *kc = d->kc + (size_t)l * nb * nl * C, *vc = d->vc + (size_t)l * nb * nl * C;
    int rc;
    mdl__io(m, &m->cp[MDL__CP_MIX], m->bp[l].cp[MDL__CP_MIX], NULL, NULL, &io, Pp, NULL);
    MDL__TRY(mdl__linear(&m->cx, d->pqkv, d->n1, Pp[LYR_POLAR_QKV], NULL, n, C, Pq), "polar qkv GEMM");
    prm.len_gain_raw = Pp[LYR_POLAR_LEN_GAIN];
    prm.null_base = Pp[LYR_POLAR_NULL_BASE];
    prm.null_slope_raw = Pp[LYR_POLAR_NULL_SLOPE];
    prm.mag_beta_raw = Pp[LYR_POLAR_MAG_BETA];
    prm.v_null = Pp[LYR_POLAR_V_NULL];
    MDL__TRY(ex_dec_polar_split(&m->cx, d->pq, d->pgl, kc, vc, d->pqkv, d->slotc, d->posc, n, H, Hkv, D, Gc, nl,
                                pd->qk_norm, pd->qk_norm_eps),
             "polar q/k/v split, qk_norm and cache");
    if (pd->canon_k > 0) { /* (after the norm: the forward's order) */
        const int K = pd->canon_k, ci = lyr_polar_canon_index(pd);
        const size_t PC = (size_t)(H + 2 * Hkv) * D;
        MDL__TRY(ex_dec_canon(&m->cx, d->pq, kc, vc, d->cnr + (size_t)l * nb * K * PC, Pp[ci], Pp[ci + 1], Pp[ci + 2],
                              d->slotc, d->posc, n, H, Hkv, D, nl, K),
                 "polar Canon layers");
    }
    if (m->gdd.qkv_shared && mdl__has(m, l, MDL__CP_MEM)) /* mem_qkv shared: the memory's q */
        MDL__TRY(ex_copy(&m->cx, d->gq, d->pq, sizeof(float) * (size_t)n * H * D), "memory q");
    /* each row over its slot's live keys 0..t (plenc: the lengths t + 1, set by mdl__dec_run) */
    rc = ex_dec_polar_decode(&m->cx, &pd->cfg, d->pc, d->pmag, d->pq, kc, vc, d->slotc, d->plenc, &prm, n, H, Hkv, D,
                             nl, nb);
    if (rc != POLAR_OK) return mdl__fail(m, MDL_EFAIL, "polar_decode: %s", polar_strerror(rc));
    if (pd->gate == LYR_POLAR_GATE_CHANNEL || pd->bias) {
        /* c (n,H,1,D) and mag (n,H,1); z in pq (free after polar_decode), magT and the biased
           mu part in the qkv scratch (rows x 3C; unused by polar layers), the device's sigmoid
           in psg (rows x G) */
        rc = lyr_polar_assemble(&m->cx, pd, Pp, d->pc, d->pmag, d->pgl, d->ap, d->pq, d->qkv + (size_t)n * C, d->psg,
                                d->qkv, n, 1);
        if (rc != LYR_OK) return mdl__fail(m, MDL_EFAIL, "lyr_polar_assemble: %s", lyr_strerror(rc));
        return MDL_OK;
    }
    /* eq. 14 for the n rows (the device's scratch: psg, and pq, free after the decode) */
    rc = ex_dec_polar_assemble(&m->cx, d->ap, d->pc, d->pmag, d->pgl, Pp[LYR_POLAR_O], Pp[LYR_POLAR_MU], n, H, D, C,
                               d->psg, d->pq);
    if (rc != POLAR_OK) return mdl__fail(m, MDL_EFAIL, "polar output assembly failed (code %d)", rc);
    return MDL_OK;
}

/* The gated-delta channel of layer l for the n rows (lyr_gdelta_fwd's math at T = 1 per
   row): qkv = n1 W^T split per head; the gates (gd_gates_forward); gd_step on the slot's
   state (Hm, Dk, Dk) in place, one row at a time in position order; the readout
   z = RMSNorm(r) * norm_w * sigmoid(n1 W_g^T + b_g), gm = z W_proj^T. With mem_qkv shared
   q is the polar layer's (copied into gq by mdl__dec_polar*, after its norm and Canon) and
   k, v its cached ones at the row's position (kv head h / (Hm / Hkv) per memory head): what
   lyr_gdelta_fwd_qkv reads at that position. */
static int mdl__dec_gdelta(mdl_model *m, int l, int n)
{
    struct mdl__dec *d = m->dec;
    const lyr_gdelta_dims *gd = &m->gdd;
    const float *Pl[LYR_MAX_PARAMS], *Pp[LYR_MAX_PARAMS];
    lyr_io io;
    const int C = m->C, Hm = gd->Hm, Dk = gd->Dk, HD = Hm * Dk, nb = d->nb;
    float *table = d->gst + (size_t)l * nb * Hm * Dk * Dk;
    int rc;
    mdl__io(m, &m->cp[MDL__CP_MEM], m->bp[l].cp[MDL__CP_MEM], NULL, NULL, &io, Pl, NULL);
    if (gd->qkv_shared) { /* the list has no qkv.weight: Pp indexed by LYR_GD_* */
        const int Hkv = gd->kv_heads, grp = Hm / Hkv, nl = d->nl;
        const float *kc = d->kc + (size_t)l * nb * nl * C, *vc = d->vc + (size_t)l * nb * nl * C;
        int i, r, h;
        Pp[LYR_GD_QKV] = NULL;
        for (i = 1; i < LYR_GD_NPARAMS; i++) Pp[i] = Pl[i - 1];
        for (r = 0; r < n; r++)
            for (h = 0; h < Hm; h++) {
                const size_t src = (((size_t)d->rslot[r] * Hkv + h / grp) * nl + d->rpos[r]) * Dk,
                             dst = ((size_t)r * Hm + h) * Dk;
                MDL__TRY(ex_copy(&m->cx, d->gk + dst, kc + src, sizeof(float) * (size_t)Dk), "memory k");
                MDL__TRY(ex_copy(&m->cx, d->gv + dst, vc + src, sizeof(float) * (size_t)Dk), "memory v");
            }
    } else {
        int i;
        for (i = 0; i < LYR_GD_NPARAMS; i++) Pp[i] = Pl[i];
        MDL__TRY(mdl__linear(&m->cx, d->gqkv, d->n1, Pp[LYR_GD_QKV], NULL, n, C, 3 * HD), "memory qkv GEMM");
        MDL__TRY(ex_split_heads_fwd(&m->cx, d->gq, d->gk, d->gv, d->gqkv, n, 1, Hm, Dk), "memory heads");
    }
    /* the gates (B = n rows, T = 1: (n, Hm)); gg as the device's scratch (before its GEMM) */
    rc = lyr_gdelta_gates(&m->cx, gd, Pp, d->n1, d->ggt, d->gbt, d->gg, n, 1);
    if (rc != LYR_OK) return mdl__fail(m, MDL_EFAIL, "gated-delta gates failed (code %d)", rc);
    rc = ex_dec_gd_step(&m->cx, &gd->cfg, table, nb, d->slotc, n, Hm, Dk, d->gq, d->gk, d->gv, d->ggt, d->gbt, d->gr);
    if (rc != GD_OK) return mdl__fail(m, MDL_EFAIL, "gd_step: %s", gd_strerror(rc));
    MDL__TRY(mdl__linear(&m->cx, d->gg, d->n1, Pp[LYR_GD_G_W], Pp[LYR_GD_G_B], n, C, HD), "memory readout gate");
    /* z (into gq, free after the steps) = RMSNorm(r) * norm_w * sigmoid(g), rs in ggt (free
       too); gk, gv (free too): the device's scratch */
    rc = lyr_gdelta_readout(&m->cx, gd, d->gr, d->gg, d->ggt, Pp[LYR_GD_NORM], d->gq, d->gk, d->gv, n, 1);
    if (rc != LYR_OK) return mdl__fail(m, MDL_EFAIL, "gated-delta readout failed (code %d)", rc);
    MDL__TRY(mdl__linear(&m->cx, d->gm, d->gq, Pp[LYR_GD_PROJ], NULL, n, HD, C), "memory projection");
    return MDL_OK;
}

/* The gated convolution of layer l (layer_pattern 'c') for the n rows (lyr_lfm_fwd's math):
   the three streams B, C', x = n1 W_in^T + b_in (one GEMM per row block, into d->qkv's
   thirds); y = B x into the slot's ring (row t % K); z[t] = sum_{j<K, j<=t} w[j] y[t-j]
   (tk_causal_dwconv_forward's fmaf chain from 0, j in order, over the ring); o = C' z;
   ap = o W_out^T + b_out. The output at t reads y at t-K+1..t only: exact to rounding. */
static int mdl__dec_lfm(mdl_model *m, int l, int n)
{
    struct mdl__dec *d = m->dec;
    const lyr_lfm_dims *ld = &m->lfmd;
    const float *Pp[LYR_MAX_PARAMS];
    lyr_io io;
    const int C = m->C, K = ld->K, nb = d->nb;
    const size_t nC = (size_t)n * C;
    const float *win, *bin, *wc, *wout, *bout;
    float *sb = d->qkv, *sc = d->qkv + nC, *sx = d->qkv + 2 * nC;
    int s;
    mdl__io(m, &m->cp[MDL__CP_LFM], m->bp[l].cp[MDL__CP_LFM], NULL, NULL, &io, Pp, NULL);
    win = Pp[0];
    bin = ld->bias ? Pp[1] : NULL;
    wc = Pp[ld->bias ? 2 : 1];
    wout = Pp[ld->bias ? 3 : 2];
    bout = ld->bias ? Pp[4] : NULL;
    for (s = 0; s < 3; s++)
        MDL__TRY(mdl__linear(&m->cx, d->qkv + (size_t)s * nC, d->n1, win + (size_t)s * C * C,
                             bin ? bin + (size_t)s * C : NULL, n, C, C), "gated convolution in_proj");
    MDL__TRY(ex_dec_lfm(&m->cx, d->att, sb, sc, sx, d->lfr + (size_t)l * nb * K * C, wc, d->slotc, d->posc, n, K, C),
             "gated convolution");
    MDL__TRY(mdl__linear(&m->cx, d->ap, d->att, wout, bout, n, C, C), "gated convolution out_proj");
    return MDL_OK;
}

static int mdl__dec_run(mdl_model *m, int n, const int *ids, float *logits, int nout)
{
    struct mdl__dec *d = m->dec;
    const mdl_config *c = &m->cfg;
    const float *P = m->params;
    const int C = m->C, H = m->H, D = m->D, nl = d->nl, nb = d->nb;
    const float *Pp[LYR_MAX_PARAMS];
    lyr_io io;
    lyr_mlp_dims ffd;
    const int *idc = ids;
    float *lo = d->lg ? d->lg : logits; /* the head's output: the caller's on the CPU */
    int r, l;
    if (d->idc) { /* a device model: the rows' ids, slots and positions into its memory */
        MDL__TRY(ex_to_ctx(&m->cx, d->idc, ids, sizeof(int) * (size_t)n), "copy of the token ids");
        MDL__TRY(ex_to_ctx(&m->cx, d->slotc, d->rslot, sizeof(int) * (size_t)n), "copy of the slots");
        MDL__TRY(ex_to_ctx(&m->cx, d->posc, d->rpos, sizeof(int) * (size_t)n), "copy of the positions");
        idc = d->idc;
    }
    if (c->attn == MDL_ATTN_POLAR) { /* polar's live lengths t + 1 of the rows, for every layer */
        for (r = 0; r < n; r++) d->plen[r] = d->rpos[r] + 1;
        if (d->plenc != d->plen)
            MDL__TRY(ex_to_ctx(&m->cx, d->plenc, d->plen, sizeof(int) * (size_t)n), "copy of the polar lengths");
    }
    /* embedding (+ learned positions) */
    MDL__TRY(ex_dec_embed(&m->cx, d->x, P + m->wte, m->wpe != MDL__ABSENT ? P + m->wpe : NULL, idc, d->posc, n, C),
             "embedding");
    for (l = 0; l < m->L; l++) {
        const mdl__bp *b = &m->bp[l];
        const float g = d->gl[l];
        float *kc = d->kc + (size_t)l * nb * nl * C, *vc = d->vc + (size_t)l * nb * nl * C;
        const float *eta = c->res_gate ? d->eta : NULL;
        if (!mdl__finite(g) || !(g > 0.0f))
            return mdl__fail(m, MDL_EINVAL, "layer %d: gac_tau must be finite and > 0 (got %g)", l, (double)g);
        if (c->ffn == MDL_FFN_MOE || c->res_gate || c->value_gate) {
            /* memberships of the new rows (per token), as mdl__block_fwd; the RPA prior
               alone needs none here (its B(W) is built from the running statistics) */
            era_rpa_config ru = c->rpa;
            era_rpa_params rp = era_rpa_params_default();
            ru.R = m->R;
            ru.legacy = 0;
            rp.D = C;
            rp.P = C;
            rp.W = P + b->memw;
            rp.b = P + b->memb;
            rp.centers = P + b->memc;
            rp.log_sigma = P + b->mems;
            /* (no statistics: decoding does not use them, and on a device they would cost a wait) */
            MDL__TRY(ex_membership_fwd(&m->cx, &ru, &rp, d->mu, d->zproj, NULL, d->x, 1, n), "era_membership_forward");
        }
        if (c->res_gate) { /* eta = sigmoid(mu . w) */
            MDL__TRY(mdl__linear(&m->cx, d->eta, d->mu, P + b->resg, NULL, n, m->R, 1), "residual gate");
            MDL__TRY(ex_sigmoid_fwd(&m->cx, d->eta, d->eta, (size_t)n), "residual gate sigmoid");
        }
        mdl__io(m, &m->cp[MDL__CP_N1], b->cp[MDL__CP_N1], d->sv_n1, NULL, &io, Pp, NULL);
        io.work = d->work;
        io.B = 1;
        io.T = n;
        io.x = d->x;
        io.out = m->cp[MDL__CP_CONV].k ? d->n1p : d->n1;
        MDL__TRY(mdl__cfwd(m, MDL__CP_N1, &io), "norm1");
        if (m->cp[MDL__CP_CONV].k) {
            /* n1 = n1p + causal depthwise conv(n1p) (lyr_conv_fwd: tk_causal_dwconv_forward's
               fmaf chain, j in order), the slot's last K inputs in a ring */
            const int K = c->conv_k;
            MDL__TRY(ex_dec_conv(&m->cx, d->n1, d->n1p, d->cvr + (size_t)l * nb * K * C, P + b->cp[MDL__CP_CONV][0],
                                 d->slotc, d->posc, n, K, C),
                     "convolution");
        }
        if (m->lconv[l]) {
            int rc_ = mdl__dec_lfm(m, l, n);
            if (rc_) return rc_;
        } else if (c->attn == MDL_ATTN_POLAR) {
            int rc_ = mdl__dec_polar(m, l, n);
            if (rc_) return rc_;
        } else {
        MDL__TRY(mdl__linear(&m->cx, d->qkv, d->n1, P + b->qkv, NULL, n, C, 3 * C), "qkv GEMM");
        /* RoPE (tk_rope's angles and rotation at each row's position), then the cache */
        MDL__TRY(ex_dec_kv(&m->cx, d->qkv, kc, vc, d->slotc, d->posc, n, H, D, nl, c->pos == MDL_POS_ROPE,
                           (float)MDL_ROPE_BASE),
                 "RoPE and the K/V cache");
        /* attention: each (row, head) over its slot's positions 0..t (+ row t of the prior
           B(W), divided by GAC's tau as the forward divides it) */
        const float *pbl = d->pb ? d->pb + (d->pb_layers > 1 ? (size_t)l * nl * nl : 0) : NULL;
        {
            int arc = ex_dec_attn(&m->cx, d->att, d->qkv, kc, vc, d->slotc, d->posc, d->tempc + (size_t)l * H, g, pbl,
                                  n, H, D, nl, d->sc, d->nthr);
            if (arc == TK_ERANGE) /* (the CPU's: a larger OpenMP team than the scratch's) */
                return mdl__fail(m, MDL_EFAIL, "decoding: more OpenMP threads than at mdl_decode_init");
            MDL__TRY(arc, "decode attention");
        }
        MDL__TRY(mdl__linear(&m->cx, d->ap, d->att, P + b->proj, NULL, n, C, C), "attention projection");
        }
        if (mdl__has(m, l, MDL__CP_MEM)) { /* the memory channel: ap += mem(n1) */
            int rc_ = mdl__dec_gdelta(m, l, n);
            if (rc_) return rc_;
            MDL__TRY(ex_residual_fwd(&m->cx, d->ap, d->ap, d->gm, (size_t)n * C), "memory channel");
        }
        if (c->value_gate) {
            /* g = mean_h sigmoid(mean_{s <= t} (W mu_s)_h) (tk_causal_mean_gate_forward's
               sums over the slot's cached pre-activations); ap *= g */
            float *vzc = d->vzc + (size_t)l * nb * nl * H;
            MDL__TRY(mdl__linear(&m->cx, d->vz, d->mu, P + b->vgam, NULL, n, m->R, H), "value gate");
            MDL__TRY(ex_dec_vgate(&m->cx, d->ap, vzc, d->vz, d->slotc, d->posc, n, H, nl, C), "value gate");
        }
        MDL__TRY(mdl__branch_fwd(&m->cx, d->x, d->x, d->ap, eta, n, C), "attention residual");
        mdl__io(m, &m->cp[MDL__CP_N2], b->cp[MDL__CP_N2], d->sv_n2, NULL, &io, Pp, NULL);
        io.work = d->work;
        io.B = 1;
        io.T = n;
        io.x = d->x;
        io.out = d->n2;
        MDL__TRY(mdl__cfwd(m, MDL__CP_N2, &io), "norm2");
        mdl__io(m, &m->cp[MDL__CP_FFN], b->cp[MDL__CP_FFN], d->sv_f, NULL, &io, Pp, NULL);
        io.work = d->work;
        io.B = 1;
        io.T = n;
        io.x = d->n2;
        io.mu = d->mu;
        io.host = d->hst;
        io.out = d->fp;
        MDL__TRY(m->cp[MDL__CP_FFN].k->forward(&m->cx, mdl__ffn_dims(m, l, m->act_gain, &ffd), &io), "FFN forward");
        MDL__TRY(mdl__branch_fwd(&m->cx, d->x, d->x, d->fp, eta, n, C), "FFN residual");
    }
    if (nout > 0) {
        /* the final norm and the tied head on the rows that want logits */
        for (r = 0; r < nout; r++)
            if (d->rout[r] != r)
                MDL__TRY(ex_copy(&m->cx, d->x + (size_t)r * C, d->x + (size_t)d->rout[r] * C, sizeof(float) * (size_t)C),
                         "row copy");
        mdl__io(m, &m->cp[MDL__CP_N1], m->lnf, d->sv_nf, NULL, &io, Pp, NULL);
        io.work = d->work;
        io.B = 1;
        io.T = nout;
        io.x = d->x;
        io.out = d->nf;
        MDL__TRY(mdl__cfwd(m, MDL__CP_N1, &io), "final norm");
        MDL__TRY(mdl__linear(&m->cx, lo, d->nf, P + m->wte, NULL, nout, C, m->V), "head GEMM");
        if (lo != logits) /* a device model: the logits asked for, to the caller */
            MDL__TRY(ex_to_host(&m->cx, logits, lo, sizeof(float) * (size_t)nout * m->V), "copy of the logits");
    }
    return MDL_OK;
}

int mdl_decode_prefill(mdl_model *m, int slot, const int *tokens, int n, float *logits_out, int all_logits)
{
    struct mdl__dec *d;
    int r, t0, rc;
    if (!m) return MDL_EINVAL;
    d = m->dec;
    if (!d) return mdl__fail(m, MDL_EINVAL, "mdl_decode_prefill: call mdl_decode_init first");
    if (slot < 0 || slot >= d->nb)
        return mdl__fail(m, MDL_ERANGE, "mdl_decode_prefill: slot %d is outside [0, %d)", slot, d->nb);
    if (!tokens) return mdl__fail(m, MDL_EINVAL, "mdl_decode_prefill: tokens is NULL");
    if (all_logits != 0 && all_logits != 1)
        return mdl__fail(m, MDL_EINVAL, "mdl_decode_prefill: all_logits must be 0 or 1 (got %d)", all_logits);
    t0 = d->len[slot];
    if (n < 1 || n > d->nl - t0)
        return mdl__fail(m, MDL_ERANGE, "mdl_decode_prefill: %d tokens do not fit slot %d (%d of max_len %d used)", n,
                         slot, t0, d->nl);
    rc = mdl__check_ids(m, tokens, (size_t)n, "tokens");
    if (rc) return rc;
    for (r = 0; r < n; r++) {
        d->rslot[r] = slot;
        d->rpos[r] = t0 + r;
        d->rout[r] = all_logits ? r : n - 1;
    }
    rc = mdl__dec_run(m, n, tokens, logits_out, logits_out ? (all_logits ? n : 1) : 0);
    if (rc) return rc;
    d->len[slot] = t0 + n;
    return MDL_OK;
}

int mdl_decode_step(mdl_model *m, const int *slots, const int *tokens, int nslots, float *logits_out)
{
    struct mdl__dec *d;
    int r, q, rc;
    if (!m) return MDL_EINVAL;
    d = m->dec;
    if (!d) return mdl__fail(m, MDL_EINVAL, "mdl_decode_step: call mdl_decode_init first");
    if (!slots || !tokens || !logits_out)
        return mdl__fail(m, MDL_EINVAL, "mdl_decode_step: slots, tokens and logits_out must not be NULL");
    if (nslots < 1 || nslots > d->nb)
        return mdl__fail(m, MDL_EINVAL, "mdl_decode_step: nslots must be in [1, max_batch = %d] (got %d)", d->nb,
                         nslots);
    for (r = 0; r < nslots; r++) {
        const int s = slots[r];
        if (s < 0 || s >= d->nb)
            return mdl__fail(m, MDL_ERANGE, "mdl_decode_step: slots[%d] = %d is outside [0, %d)", r, s, d->nb);
        for (q = 0; q < r; q++)
            if (slots[q] == s)
                return mdl__fail(m, MDL_EINVAL, "mdl_decode_step: slot %d is given twice (slots[%d], slots[%d])", s,
                                 q, r);
        if (d->len[s] >= d->nl)
            return mdl__fail(m, MDL_ERANGE, "mdl_decode_step: slot %d is full (max_len %d); reset it", s, d->nl);
    }
    rc = mdl__check_ids(m, tokens, (size_t)nslots, "tokens");
    if (rc) return rc;
    for (r = 0; r < nslots; r++) {
        d->rslot[r] = slots[r];
        d->rpos[r] = d->len[slots[r]];
        d->rout[r] = r;
    }
    rc = mdl__dec_run(m, nslots, tokens, logits_out, nslots);
    if (rc) return rc;
    for (r = 0; r < nslots; r++) d->len[slots[r]]++;
    return MDL_OK;
}
