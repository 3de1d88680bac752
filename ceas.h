/* ceas.h - CEAS: entropy-targeted control of the attention inverse temperature
   (beta), with token/head gating and a multi-knob training controller.
   v0.1.0 - MIT license (see the end of the file).

   WHAT IT IS
     Seed 004 ("CEAS") as a stand-alone controller, its sections 1-6 (section 6, the
     MaxEnt add-on, as functions called before training, with formulas of ceas's own
     where the seed gives none: see MAXENT). It never
     touches a model: you hand it numbers measured from the model (attention
     logits, per-head entropies, a curvature estimate, gradient norms, a
     validation loss) and it hands back knob values (per-head beta, which heads
     to freeze, which tokens to keep, learning rate, batch size, weight decay,
     label smoothing). Any trainer in any framework can drive it.

       observables   one pass over each row of attention logits l = beta*s gives
                     H = -sum p ln p (p = softmax(l)), N_eff = e^H, Var_p[s],
                     sigma_qk (unweighted std of the scores s over the row's keys);
                     batched over (B,H,T) rows with OpenMP, pooled per head.
       beta          init 1/sqrt(d_k); closed form ("final address")
                     beta* = sqrt(2 ln N_eff) / sigma_qk; Newton step toward a
                     target entropy
                        beta <- beta + kappa(t) (H(beta) - H_target) / (beta Var_p[s] + eps)
                     (dH/dbeta = -beta Var_p[s], so kappa = 1 is Newton's method),
                     gain schedule kappa(t) = k_inf + (k_max - k_inf) exp(-t/tau_k),
                     |dbeta| clip, pseudo-critical margin |beta - beta_c|/beta_c >= u_min,
                     EMA windows (64 steps for H and Var_p[s], 128 for sigma_qk).
       gating        temperature-gap score, normalised T = beta / beta* =
                     beta sigma_qk / sqrt(2 ln N_eff) (the default of
                     ceas_gate_scores: the reading the thresholds below fit; see
                     READINGS), or the literal T = beta sigma_qk sqrt(2 ln N_eff)
                     (ceas_gate_scores_mode with CEAS_GATE_RAW);
                     token mask (keep T >= T_gate(t) or the top-q by T per head, at
                     least m_min per sequence, T_gate(t) = T_inf + (T_max - T_inf)
                     exp(-t/tau_T), q linear from q_init to q_final over q_steps);
                     head freezing (H_h <= H_freeze for w consecutive steps, unfreeze
                     on exit, at least h_min active heads per layer); back-off (the
                     short-EMA validation loss rises by more than 0.2 sigma: T_gate
                     -= 0.05 and kappa halved for 200 steps).
       multi-knob    seed 004 section 2: learning rate from the trust ratio
                     rho = eta lambda_max, batch size from a gradient-noise scale,
                     weight decay from a parameter-entropy band, label smoothing from
                     a logit-entropy band (with the observables' helpers).
       maxent        seed 004 section 6, before training (see MAXENT): init scales of
                     W_q, W_k per layer for a step-0 T band, a cost / corridor-utility
                     selection over a catalogue of (H, d_k, d_ff, d_model, positional
                     scheme), a PI controller on an activation parameter, a norm epsilon
                     rule and a spectral-radius cap check.
       checkpoints   the controller state saves to / loads from a flat byte buffer
                     (little-endian, versioned, checksummed, validated on load).

   READINGS OF THE PAPER (it leaves these open; ceas documents its choice)
     * "beta" is the inverse temperature multiplying the raw query-key score s:
       logits l = beta * s. For tensor.h's attention (logits = q.k/(sqrt(D) temp[h]))
       beta_h = 1 / (sqrt(D) temp[h]); ceas_beta_to_temp() converts.
     * H_target = ln N - target_drop (default drop 1.1 nats): "log N_eff" in the
       paper's target is read as the log of the number of competing keys N, i.e.
       a fixed entropy drop from uniform. For causal rows ln N is the mean of
       ln(row length) over the head's rows.
     * beta* = sqrt(2 ln N_eff)/sigma_qk takes ln N_eff as an argument. With
       ln N_eff = target_drop (the entropy drop), beta* solves H(beta) = H_target
       exactly in the Gaussian-score (annealed) limit H(beta) = ln N - beta^2
       sigma^2 / 2; ceas_set_beta_star() uses it that way.
     * beta_c (pseudo-critical point) defaults to the Gaussian freezing point
       sqrt(2 ln N)/sigma_qk, where the entropy of Gaussian scores collapses;
       cfg.beta_c > 0 fixes it instead. The margin projects a step that lands
       inside (1 +- u_min) beta_c to the edge on the side it came from.
     * Newton safeguard (ceas's addition): far from the target H(beta) is flat
       (beta Var_p[s] -> 0 when attention is nearly one-hot), so the raw step can
       be huge. It is clipped to |dbeta| <= dbeta_max (the paper's clip) and to a
       trust region beta/max_ratio <= beta' <= beta*max_ratio (default 2; 0 turns
       it off), which also keeps beta > 0.
     * ceas_step is NOT Newton's method and has no quadratic convergence: it applies
       the Newton formula to EMA-smoothed H and Var_p[s] (windows ema_h), which lag
       beta, and multiplies it by kappa(t) >= 1. Measured on a linear model
       H(beta) = a - c beta with Var_p[s] = c / beta (where one exact Newton step lands
       on the target), clips and margin off, ceas v0.1: window 64 overshoots the
       target by 129% at kappa 1 and 184% at kappa 1.8 (the 14.4M preset's kappa_max)
       before settling (within 0.1% after ~340 steps at kappa 1.8); window 1 (no EMA)
       overshoots 0% at kappa 1 and 80% at kappa 1.8 (kappa - 1, by construction).
       The dbeta_max clip and the trust region bound these excursions in practice;
       ceas_newton_update() on instantaneous observables is the plain Newton step.
     * Gate score. The paper's T = beta sigma_qk sqrt(2 ln N_eff) equals 2 ln N_eff at
       beta = beta* = sqrt(2 ln N_eff)/sigma_qk (e.g. ~7.5 for 128 keys at the 1.1-nat
       drop), far above its thresholds T_gate 1.0-1.8, so the threshold keeps every
       token and nothing is pruned. The thresholds make sense for the normalised score
       beta / beta* = beta sigma_qk / sqrt(2 ln N_eff), which is 1 at the closed form:
       there T_gate > 1 removes the threshold keeps and the top-q rule prunes 1 - q,
       i.e. 45% early (q 0.55) and 25% late (q 0.75), the seed's projected prune rates
       (chi_warm 0.35-0.45, chi_steady 0.18-0.26 for 14.4M). Measured on Gaussian
       scores (128 causal-free keys, 2 x 2 x 128 rows, m_min 16): the literal score
       prunes 0.0% at (T_gate 1.8, q 0.55) and at (1.05, 0.75); the normalised one
       44.5% and 25.0%. So the normalised reading is the default: ceas_gate_scores()
       (and ceas_gate_scores_cuda()) compute it; ceas_gate_scores_mode() with
       CEAS_GATE_RAW gives the literal formula.
     * H_freeze = (mean over the layer's heads of H) - freeze_drop (default 0.9):
       a head freezes when it is persistently sharper than its layer. With
       freeze_ref = CEAS_FREEZE_UNIFORM it is ln N - freeze_drop instead (the
       literal reading; note that it lies above H_target).
     * Token gating works per (b, h): a token's score is that of its query row;
       the m_min floor holds for every head of every sequence, so also per
       sequence.
     * EMA "window" w means weight alpha = 2/(w+1), started at the first value.
     * What gating means in training (issue 20; ceas only computes the masks, the trainer
       applies them: examples/common/model.h mdl_set_gating / mdl_ceas_gating).
       A pruned token is a query row (b, h, i) whose keep entry is 0.
       - Forward: nothing changes. Every row's attention output is computed and used as
         in the ungated model, so the loss, the logits and inference are those of the same
         model; gating never changes what the network computes, only what it learns from.
         (Dropping a row from the forward would change the model's output and its
         distribution between training and inference, and would save little: the
         forward's cost is one third of a step's.)
       - Backward: the pruned row's attention output passes no gradient into that head's
         attention core, i.e. its output gradient dO[b,h,i] is taken as 0: no dQ row, no
         contribution to dK and dV of the keys it attends to, and none of that row's
         backward work (dP row = dO_i V^T, dS row, the dV, dQ and dK products: 8 D (i+1)
         FLOPs at causal cost) is computed. Everything else is exact: the output
         projection, the residual stream, the FFN and the other heads get their full
         gradient, and the kept rows' gradients are those of the dense backward. The
         gradient is therefore the exact gradient of the loss with the pruned rows'
         attention outputs held constant (a stop-gradient on them), a biased estimate of
         the full gradient that drops the low-score rows (seed 004: the rows whose
         temperature gap says they carry little information). With an additive prior
         bias on the logits (the examples' RPA / ERA priors), the bias gradient likewise
         sums the kept rows' logit gradients only; the prior's parameters learn from them.
       - A frozen head (h, layer l): its attention backward, the backward of its Q/K/V
         rows of the qkv projection and of its columns of the output projection are not
         computed, no gradient flows through it into the residual stream, and the
         optimiser leaves its parameters and moments as they are ("stop backprop through
         head h" of the seed) until ceas_step unfreezes it. The forward still uses it.
       - The gate score needs every row's H and sigma_qk, which the forward's attention
         kernel does not keep: recomputing them costs a logit GEMM per row block and a pass
         (counted as overhead beside the FLOPs skipped; see docs/RESULTS.md).
     * Back-off: on each validation report x the short EMA m (window val_window)
       and the EMA variance v are updated; it fires when the new m exceeds the
       previous m by more than backoff_sigma * sqrt(v_prev) (v before this report),
       after backoff_min_reports reports. T_gate's offset drops by backoff_dt per
       firing (T_gate never below 0); kappa is multiplied by backoff_kappa while
       the back-off timer runs (a new firing restarts it; halvings do not stack).

   MAXENT (seed 004 section 6: structure and initialisation, chosen before training)
     Host functions on numbers the caller measured (the header times nothing and runs no
     model); none is in the CUDA list. Section 7's "+8-12 pp" (9k) are the seed's
     projections, not checked here. The seed gives these steps in one or two sentences each
     and no formulas; every formula below is ceas's, and each reading says so.
     (A) ceas_init_scales: per layer, the std of W_q and W_k.
       Model at step 0: q = W_q x, k = W_k x (d_k x d_model), entries iid mean 0, std
       sigma_q, sigma_k; input coordinates iid mean 0, variance var_x, independent across
       tokens. Variance propagation (expectations over weights and inputs):
          Var(q_i) = d_model sigma_q^2 var_x,   Var(k_i) = d_model sigma_k^2 var_x,
          sigma_qk^2 = Var_j(q . k_j) = d_k Var(q_i) Var(k_i)
       (sigma_qk as ceas_obs measures it: the std over a row's keys at a fixed query).
       With sigma_q = sigma_k and g = beta sqrt(d_k): x = beta sigma_qk = g Var(q_i).
       T is ceas's gate score at ln N_eff = log_n_eff: T = x / sqrt(2 ln N_eff) (mode
       CEAS_GATE_NORMALISED, default) or x sqrt(2 ln N_eff) (CEAS_GATE_RAW). Kept x: the
       band [x(t_lo), x(t_hi)] cut by g [var_lo, var_hi] and by x <= (1 - u_min) sqrt(2 ln N);
       the chosen x is the kept point nearest x(t_star); Var(q_i) = x / g, sigma_q = sigma_k
       = sqrt(Var(q_i) / (d_model var_x)). Nothing kept: met 0, flags (CEAS_INIT_*) name the
       bound, and the scales of t_star itself are written (reported, never clamped).
       Kurtosis: a product of independent zero-mean factors of excess kurtosis a, b has
       excess (3+a)(3+b) - 3, a sum of n iid terms 1/n of one term's excess, so
          e_q = ((3 + kurt_w)(3 + kurt_x) - 3) / d_model,   e_s = ((3 + e_q)^2 - 3) / d_k
       (Gaussian weights and inputs: e_s ~ 6/d_k); e_s > kurt_max: met 0, CEAS_INIT_KURT.
       Readings. The seed says "choose sigma_w so T = beta sigma_qk sqrt(2 ln N_eff) starts
       near a target band T*" and names no band nor N_eff; we read T as ceas's gate score
       (normalised by default, as READINGS' gate score) and ln N_eff as target_drop (as
       ceas_set_beta_star does), because then T = 1 is beta = beta*, i.e. H = H_target in
       the Gaussian-score limit H = ln N - x^2/2: the layer starts in the corridor. The
       default band [0.9, 1.1] is ceas's (entropy drops 0.89-1.33 nats, about the seed's
       1.1 and its "tighten to 1.3"). "Variance propagation within bounds" is read as
       Var(q_i), Var(k_i) in [var_lo, var_hi] (0.01, 100: ceas's), "kurtosis within bounds"
       as the predicted excess kurtosis of the scores, which says how far they are from the
       Gaussian beta* assumes; it treats the terms as independent and ignores the dependence
       through shared weights (an approximation). The margin is ceas's addition: section
       B's u_min about the Gaussian freezing point sqrt(2 ln N) (beta_c's default), which
       also makes "a band that cannot be met" concrete (few keys, or a band past
       freezing). The seed's one sigma_w becomes W_q and W_k split equally; W_v, W_o and the
       FFN do not enter T and are left to the caller. Each layer is solved alone from its
       own var_x (1 after a pre-LayerNorm; measure it otherwise) and its step-0 beta (tensor.h:
       1/(sqrt(D) temp)); an additive prior bias (RPA/ERA) on the logits is not modelled
       (it shifts the scores per offset; measure sigma_qk with it if it matters). Checked
       (tests/test_ceas_maxent.c): random W_q, W_k drawn at the chosen std give a measured
       sigma_qk within 0.5% of the prediction, T inside the band, and a mean attention
       entropy ln N - 0.96..0.98 nats at N = 64..128 (the Gaussian limit says ln N - 1.1;
       finite N keeps ~0.13 nats more), inside the corridor [ln N - 1.3, ln N - 0.9].
     (B) ceas_corridor_utility, ceas_maxent_select: the catalogue.
          U   = mean over heads of exp(-d_h^2 / (2 width^2)),  d_h the distance of H_h from
                [ln N - drop_hi, ln N - drop_lo] (0 inside)
          J_i = U_i - lambda cost_i / c_min,   w_i = exp((J_i - J_max)/temp) / Z
       over the feasible candidates (cost <= budget when budget > 0; d_k, d_ff, d_model
       multiples of tile); the selection is the feasible argmax of J; ties (|J_i - J_max| <=
       tie_tol) go to the lower cost, then the lower index; nothing feasible: CEAS_ERANGE.
       Readings. "How well per-head N_eff stays in band for moderate beta" is read as the
       mean over heads of a Gaussian-tailed indicator of H in the corridor (1 inside; a hard
       fraction would rank ties coarsely); the band and width are the caller's (0.9 / 1.3 /
       0.5 nats suit ceas's target_drop 1.1); "moderate beta" is where the caller measured
       (beta = 1/sqrt(d_k), or after a few probe steps). "Softmax / Lagrange trade-off" is
       read as the MaxEnt distribution over the catalogue at fixed expected utility and cost,
       the Gibbs form p_i ~ exp(J_i / temp), lambda the multiplier of the cost constraint
       (given by the caller, not solved for), the budget a hard cap; the tuple "fixed before
       training" is its mode, argmax J (also the temp -> 0 limit); the weights are reported
       for a printout. Cost is taken relative to the cheapest feasible candidate so lambda
       is unit-free (ceas's choice; 0.1 = doubling the cost is worth 0.1 of utility).
       "Tile-friendly" is read as the sizes being multiples of tile (16).
     (C) ceas_pi_update, ceas_norm_eps, ceas_spectral_cap.
          e = h_lo - h (below), h_hi - h (above), 0 (inside);  I <- clamp(I + e, +-i_max);
          p <- clamp(p + direction (kp e + ki I), p_min, p_max)
          eps = max(rel v_min, eps_floor), v_min the smallest positive row variance
          scale = cap / sigma_max when sigma_max > cap, else 1
       Readings. "An output-entropy band H(f(x)) by a tiny PI controller on activation
       parameters": the entropy and its units are the caller's (e.g. a histogram entropy of
       the activation output over ln(bins)), the parameter any scalar (a GELU/Swish
       sharpness) whose effect's sign the caller gives as direction; the integral holds
       inside the band and is clamped (anti-windup). The update is incremental (p moves by
       kp e + ki I each call), so with ki > 0 p keeps drifting by ki I inside the band
       until the error changes sign: a small ki against kp keeps that drift slow. "A sensible layer-norm eps" is read as
       small against the smallest variance the norm divides by (rel 1e-3: that row shrinks
       by <= 0.05%, reported as bias) with a floor for constant rows; "a spectral-radius cap"
       as a check of the caller's estimate against a cap with the rescale that meets it.
     (D) The positional scheme is one more field (pos: CEAS_POS_ROTARY / LEARNED / ALIBI /
       LOCAL) of the catalogue's candidates, selected by the same J. "Favouring options that
       keep early-layer N_eff high at fixed compute" is read as the utility
       ceas_early_neff_utility = mean over the early layers' heads of H / ln N (the caller
       says which layers are early, and may mix it with the corridor utility).
     Measuring costs and utilities is the caller's. The examples' trainer does it
     (examples/common/maxent.h, wt2_train --maxent on; issue 46 item 2):
       (A) every candidate and the trained model get ceas_init_scales' W_q / W_k std per
           layer (n_keys the context, var_x 1 after the pre-norm, beta 1/sqrt(d_k)), the q
           and k rows of the qkv weight rescaled to it at trainer creation;
       (B) a catalogue around the configuration (heads H/2, H, 2H; d_model at head width
           -+16; ff-mult halved, doubled), each candidate run for a few optimiser probe
           steps (--maxent-probe, 3) at --maxent-batch sequences; cost = mean seconds of
           the timed steps or the model's FLOPs (--maxent-cost time|flops), utility =
           0.75 ceas_corridor_utility (0.9, 1.3, 0.5) + 0.25 ceas_early_neff_utility of
           the heads' observables on two fixed sequences after the probe;
           ceas_maxent_select (lambda --maxent-lambda, budget --maxent-budget, tile 16)
           picks the shape the run trains; the table goes to stderr and metrics.jsonl;
       (C) --maxent-c on: ceas_norm_eps on the first norm's row variances (reported; the
           model's eps is a constant) and ceas_spectral_cap on the block matrices at init
           (--maxent-cap). --maxent-pi on: ceas_pi_update on the GELU MLP's per-layer gain
           a_l, act(u) = gelu(a_l u) (the model's activation parameter, 1 at creation: the
           plain GELU bit for bit; not trained), p = ln a_l, direction -1; h = the
           normalised 64-bin histogram entropy of gelu(a_l u) over the step's batch on its
           [q_0.005, q_0.995] range, measured every --maxent-pi-every (5) steps; band
           --maxent-pi-band (0.70, 0.85), kp 6, ki 0.1, i_max 10, a_l in [0.05, 20] (all the
           trainer's readings; maxent.h (C) argues and measures the direction: a larger
           gain makes the GELU ReLU-like and lowers h from ~0.93 towards ~0.62). CPU
           trainer and --ffn gelu only (squared ReLU and the MoE have no such parameter);
       (D) the positional scheme (learned, rotary, none: the model's options; none is
           CEAS_POS_ANY) is a catalogue axis beside the heads, scored by the same J.
     Use (tests/test_ceas_maxent.c test_doc_example runs it):
       ceas_init_config ic = ceas_init_config_default();
       ceas_init_layer ly = {d_model, d_k, T, 0.0f, 1.0f, 0.0f, 0.0f}; // beta 1/sqrt(d_k), pre-LN
       ceas_init_scale sc;
       rc = ceas_init_scales(&ic, &ly, 1, &sc, NULL);  // then W_q, W_k ~ N(0, sc.sigma_q^2);
                                                       // sc.met 0: sc.flags says which bound
       // per candidate i: cand[i].cost = the caller's timed step, cand[i].utility from the
       // heads' observables of a few probe steps at beta = 1/sqrt(d_k):
       rc = ceas_corridor_utility(heads, L * H, 0.9f, 1.3f, 0.5f, &u);
       ceas_select_config sel = ceas_select_config_default();
       rc = ceas_maxent_select(&sel, cand, n, score, weight, NULL, &best); // ERANGE: none fits

   USAGE
     #define CEAS_IMPLEMENTATION   (in exactly one C or C++ file)
     #include "ceas.h"

     // One controller for L layers of H heads (head dim D). logits: (L, B, H,
     // T, T), each step's causal attention logits, made with beta = st.beta
     // (tensor.h: temp[h] = ceas_beta_to_temp(beta[h], D)). In a trainer the
     // logits change every step; here they are fixed for brevity.
     int ceas_example(const float *logits, int L, int B, int H, int T, int D, int steps)
     {
         ceas_config cfg = ceas_config_default();      // the 14.4M preset
         ceas_state st;
         ceas_obs *heads = (ceas_obs *)malloc(sizeof(ceas_obs) * (size_t)L * H);
         int l, t, rc = heads ? ceas_init(&st, &cfg, L, H, D) : CEAS_ENOMEM;
         if (rc != CEAS_OK) { free(heads); return rc; }
         for (t = 0; t < steps && rc == CEAS_OK; t++) {
             for (l = 0; l < L && rc == CEAS_OK; l++)   // per-head observables
                 rc = ceas_attention_observables(logits + (size_t)l * B * H * T * T,
                                                 B, H, T, 1, st.beta + l * H,
                                                 NULL, heads + l * H, NULL);
             if (rc == CEAS_OK) rc = ceas_step(&st, heads); // new st.beta, st.frozen
             // token gating for this step: ceas_gate_scores_mode(...,
             // CEAS_GATE_NORMALISED) on the row observables, then ceas_token_mask(keep, score, B, H, T,
             // ceas_t_gate(&st), ceas_keep_q_at(&st.cfg, st.step), st.cfg.m_min, ...)
             // on validation: ceas_report_val_loss(&st, val_loss, &fired)
         }
         ceas_free(&st);
         free(heads);
         return rc;
     }

   COMPILE-TIME OPTIONS
     CEAS_STATIC            all functions static
     CEAS_MALLOC/CEAS_FREE  allocator (define both or neither)
     CEAS_ASSERT            internal-invariant assert (never used on user input)
     nvcc                   ceas_*_cuda (cuda/ceas.cuh): the observables, their
                            pooling and the gate scores from device logits
     -fopenmp               rows of the observables pass in parallel (results are
                            bit-identical for any thread count)

   CONFIG (ceas_config; ceas_config_default() = the 14.4M preset)
     field            9k      14.4M   GPT     meaning
     target_drop      1.1     1.1     1.1     H_target = ln N - target_drop
     eps              1e-6                    Newton denominator guard
     kappa_max        2.2     1.8     1.5     gain at t = 0
     kappa_inf        1.0     1.0     1.0     gain as t -> inf
     tau_kappa        750     1500    3500    gain decay (paper: 500-1k, 1-2k, 2-5k)
     dbeta_max        0.75    0.5     0.3     |dbeta| clip per update
     max_ratio        2                       trust region: beta/max_ratio <= beta_new
                                              <= beta*max_ratio (0: off; not in the paper)
     u_min            0.06    0.05    0.04    pseudo-critical margin
     nu               0.75                    zeta_CE exponent (paper: [0.5, 1])
     beta_c           0                       > 0: fixed beta_c; 0: sqrt(2 ln N)/sigma_qk
     beta_min/max     1e-4 / 1e4              hard bounds on beta
     ema_h            64                      EMA window for H and Var_p[s]
     ema_sigma        128                     EMA window for sigma_qk and ln N
     t_max            1.8     1.6     1.5     T_gate at t = 0
     t_inf            1.05    1.02    1.00    T_gate as t -> inf
     tau_t            600     1200    3000    T_gate decay (paper GPT: 2-4k)
     q_init, q_final  0.55, 0.75              top-q kept fraction schedule
     q_steps          2000                    steps of the linear q schedule
     m_min            16                      tokens kept per sequence (paper 16-32)
     h_min            2                       active heads per layer (paper 2-4)
     freeze_drop      0.9                     H_freeze = reference - freeze_drop
     freeze_window    50      100     200     w consecutive steps to freeze
     freeze_ref       CEAS_FREEZE_LAYER_MEAN  or CEAS_FREEZE_UNIFORM
     backoff_sigma    0.2                     rise threshold in sigmas
     backoff_dt       0.05                    T_gate decrease per back-off
     backoff_kappa    0.5                     kappa factor during back-off
     backoff_steps    200                     back-off duration (steps)
     val_window       5                       short EMA window of the val loss
     backoff_min_reports 3                    reports before back-off can fire
   Multi-knob (ceas_knob_config, ceas_knob_config_default()):
     rho_min/rho_max 0.02/0.08, kappa_lr 10, lr_min/lr_max 1e-7/10,
     max_factor 2 (per-update multiplicative cap for lr and batch);
     gns_target 0 (0: the current batch size, so B tracks the noise scale),
     kappa_batch 0.5, batch_min/max 1/65536;
     wd_h_lo/wd_h_hi 0.80/0.95 (normalised parameter entropy), kappa_wd 0.01,
     wd_min/wd_max 0/1;
     ls_h_early/ls_h_late 0.6/0.3 (normalised logit entropy H/ln V), ls_tau 2000,
     ls_band 0.05, kappa_ls 0.1, ls_min/ls_max 0/0.3.

   INITIALISATION (drop-in use)
     beta starts at ceas_beta_init(d_k) = 1/sqrt(d_k): the host's own softmax scale, so
     turning the controller on changes nothing at step 0; ceas_beta_to_temp converts a
     beta into tensor.h's per-head temperature. The controllers only read statistics
     the host computes (observables of its logits) and write knobs; no weights to init.

   SHAPES (legend)
     B batch, H heads, T sequence length (keys = queries = T), L layers,
     R rows, N keys per row, V vocabulary. All arrays are caller-owned,
     contiguous, row-major float32.

   ERRORS
     CEAS_OK 0; CEAS_EINVAL NULL pointer, bad size, NaN/Inf input or
     hyper-parameter, inverted bounds; CEAS_ENOMEM; CEAS_ERANGE buffer too small, or no
     value in range (ceas_gns too noisy, ceas_maxent_select nothing feasible);
     CEAS_EFORMAT a state buffer that is corrupted, truncated or of another
     shape. ceas_strerror() names them. A function that fails leaves its
     outputs and the controller state unchanged (the observables functions
     excepted: they mark a bad row with NaN and return CEAS_EINVAL). No NaN is
     ever written into a knob. Flag arguments are checked as strictly as numbers:
     ceas_attention_observables(_cuda)'s causal is 0 or 1, a gate mode one of its
     two values, cfg.freeze_ref one of its two values (else CEAS_EINVAL).

   NUMERICS CHECKED (issue 38; tests/test_ceas.c and tests/parity_ceas.cu,
     test_sweep_float64, against tests/ref64.h's float64 two-pass transcription)
     The row observables in: plain causal rows, beta at its clip bounds (1e-4: s ~ 1e4;
     1e4: s ~ 1e-4), logits of zero variance (H = ln N, Var_p[s] = sigma_qk = 0
     exactly), N = 1, sharp rows (one key 12..40 above the rest). Worst relative error
     to each observable's max-norm, CPU / device (simulation): H 3.3e-5 / 9.3e-6 (sharp
     rows), n_eff 2.2e-7 / 1.2e-7, Var_p[s] 1.6e-7 / 5.2e-8, sigma_qk 3.3e-6 / 1.1e-7,
     mean_s 2.4e-6 / 2.4e-7, ln N 3.0e-8; ceas_newton_update at the clip bounds equals
     its double transcription. Known: a row sharper than ~20 nats (sum of the other
     keys' weights below eps32) loses the ln z part of its tiny H (H ~ 1e-8 there; a
     relative 1/(gap + 1) of it), which the max-norm measure does not see.
*/
#ifndef CEAS_H
#define CEAS_H

#include <stddef.h>

#ifdef CEAS_STATIC
/* unused is expected in a static copy: silence -Wunused-function */
#if defined(__GNUC__) || defined(__clang__)
#define CEASDEF static __attribute__((unused))
#else
#define CEASDEF static
#endif
#else
#define CEASDEF extern
#endif

#define CEAS_VERSION_MAJOR 0
#define CEAS_VERSION_MINOR 1
#define CEAS_VERSION_PATCH 0
#define CEAS_VERSION "0.1.0"

#define CEAS_OK       0
#define CEAS_EINVAL  (-1)
#define CEAS_ENOMEM  (-2)
#define CEAS_ERANGE  (-3)
#define CEAS_EIO     (-4)
#define CEAS_EFORMAT (-5)

#define CEAS_PRESET_9K  0
#define CEAS_PRESET_14M 1
#define CEAS_PRESET_GPT 2

#define CEAS_FREEZE_LAYER_MEAN 0
#define CEAS_FREEZE_UNIFORM    1

#ifdef __cplusplus
extern "C" {
#endif

/* Observables of one row (or, pooled, of one head). */
typedef struct ceas_obs {
    float H;         /* entropy of softmax(logits), nats (head: mean over rows) */
    float n_eff;     /* exp(H) */
    float var_s;     /* Var_p[s], s = logits / beta (head: mean over rows) */
    float sigma_qk;  /* unweighted std of s over the keys (head: pooled) */
    float mean_s;    /* unweighted mean of s (head: pooled) */
    float log_n;     /* ln(keys): entropy of uniform attention (head: mean) */
    long long n;     /* keys in the row (head: keys summed over its rows) */
} ceas_obs;

typedef struct ceas_config {
    float target_drop, eps;
    float kappa_max, kappa_inf, tau_kappa;
    float dbeta_max, max_ratio, u_min, nu, beta_c, beta_min, beta_max;
    float t_max, t_inf, tau_t, q_init, q_final;
    float freeze_drop;
    float backoff_sigma, backoff_dt, backoff_kappa;
    int ema_h, ema_sigma;
    int q_steps, m_min, h_min, freeze_window, freeze_ref;
    int backoff_steps, val_window, backoff_min_reports;
} ceas_config;

typedef struct ceas_state {
    ceas_config cfg;
    int n_layers, n_heads, d_k;
    long long step;          /* ceas_step calls so far (t of the schedules) */
    long long n_obs;         /* observations folded into the EMAs */
    float *beta;             /* (L, H) the knob: per-head inverse temperature */
    float *h_ema;            /* (L, H) EMA of H */
    float *var_ema;          /* (L, H) EMA of Var_p[s] */
    float *sigma_ema;        /* (L, H) EMA of sigma_qk */
    float *logn_ema;         /* (L, H) EMA of ln N */
    int *below;              /* (L, H) consecutive steps with H <= H_freeze */
    unsigned char *frozen;   /* (L, H) 1: stop backprop through this head */
    float t_gate_offset;     /* <= 0, accumulated back-off decreases of T_gate */
    int backoff_left;        /* steps of halved kappa left */
    int n_backoffs;          /* back-offs fired so far */
    long long n_val;         /* validation reports so far */
    double val_ema, val_var; /* short EMA of the validation loss and its variance */
    void *mem_;              /* the one allocation behind the arrays */
} ceas_state;

typedef struct ceas_knob_config {
    float rho_min, rho_max, kappa_lr, lr_min, lr_max, max_factor;
    float gns_target, kappa_batch, batch_min, batch_max;
    float wd_h_lo, wd_h_hi, kappa_wd, wd_min, wd_max;
    float ls_h_early, ls_h_late, ls_tau, ls_band, kappa_ls, ls_min, ls_max;
} ceas_knob_config;

CEASDEF const char *ceas_strerror(int err);

/* ---- configuration ---- */
CEASDEF ceas_config ceas_config_default(void);
CEASDEF int ceas_config_preset(int preset, ceas_config *out);
CEASDEF int ceas_config_validate(const ceas_config *cfg);

/* ---- observables ---- */
/* One row. logits: (n) = beta * s. beta > 0 converts back to s. */
CEASDEF int ceas_row_observables(ceas_obs *out, const float *logits, int n, float beta);
/* R rows of n keys each. logits: (R, n); out: (R). OpenMP over rows. */
CEASDEF int ceas_rows_observables(ceas_obs *out, const float *logits, int R, int n,
                                  float beta);
/* Pools R row observables (one head) into one: means of H, Var_p[s], ln N over
   rows, pooled mean and std of s over all keys. rows: (R). */
CEASDEF int ceas_pool_observables(ceas_obs *out, const ceas_obs *rows, int R);
/* Attention logits of a batch. logits: (B, H, T, T), row (b,h,i) holds the
   logits of query i; causal 1 reads only keys j <= i (0 all T; anything else is
   CEAS_EINVAL). beta: (H) the
   inverse temperature each head's logits were made with (NULL: all 1).
   rows: (B, H, T) or NULL; heads: (H) pooled over b and i, or NULL.
   workspace: ceas_attention_observables_workspace_size(B, H, T) bytes, or
   NULL (allocated when rows is NULL and heads is not). */
CEASDEF size_t ceas_attention_observables_workspace_size(int B, int H, int T);
CEASDEF int ceas_attention_observables(const float *logits, int B, int H, int T, int causal,
                                       const float *beta, ceas_obs *rows, ceas_obs *heads,
                                       void *workspace);

/* The same observables from per-row moments an attention kernel gathered in its softmax
   pass, so the (B,H,T,T) logits are never read again (tensor.h's
   tk_attention_forward_stats writes them in this layout). moments: (B, H, T, stride)
   floats, stride >= 6, each row starting with, over its n visible keys, of the logits
   x = beta * s and p = softmax(x):
     {H = -sum p ln p, E_p[x], Var_p[x], mean x, population variance of x, n}.
   beta, rows, heads, workspace as ceas_attention_observables (rows: (B,H,T) or NULL;
   heads: (H) pooled, or NULL; workspace: ceas_attention_observables_workspace_size bytes
   or NULL). Equals ceas_attention_observables on the same logits (causal) to the
   moments' rounding. A row with n < 1 or a non-finite moment: CEAS_EINVAL (its
   observables NaN). */
CEASDEF int ceas_attention_observables_from_moments(const float *moments, int B, int H, int T,
                                                    int stride, const float *beta,
                                                    ceas_obs *rows, ceas_obs *heads,
                                                    void *workspace);

/* ---- beta: initialiser, closed form, Newton step, margin ---- */
CEASDEF float ceas_beta_init(int d_k);                 /* 1/sqrt(d_k); 0 if d_k <= 0 */
CEASDEF float ceas_beta_to_temp(float beta, int d);     /* tensor.h temp = 1/(sqrt(d) beta) */
/* beta* = sqrt(2 log_n_eff) / sigma_qk; sigma_qk > 0, log_n_eff > 0. */
CEASDEF int ceas_beta_star(float sigma_qk, float log_n_eff, float *beta_out);
CEASDEF float ceas_kappa_at(const ceas_config *cfg, long long t);
/* zeta_CE = 1 / max(u, u_min)^nu; u = |beta - beta_c| / beta_c. */
CEASDEF float ceas_zeta(float u, float u_min, float nu);
/* One controlled update: step = kappa (H - h_target) / (beta var_s + eps),
   clipped to |step| <= cfg->dbeta_max, then to the trust region
   [beta/max_ratio, beta*max_ratio] (max_ratio > 1), then the margin about beta_c (skipped
   when beta_c <= 0 or cfg->u_min == 0), then [beta_min, beta_max]. */
CEASDEF int ceas_newton_update(const ceas_config *cfg, float beta, float H, float var_s,
                               float h_target, float kappa, float beta_c, float *beta_out);

/* ---- the controller ---- */
/* cfg NULL: ceas_config_default(). beta starts at 1/sqrt(d_k). */
CEASDEF int ceas_init(ceas_state *st, const ceas_config *cfg, int n_layers, int n_heads,
                      int d_k);
CEASDEF void ceas_free(ceas_state *st);
/* Sets every beta to beta*(sigma_qk, target_drop) from heads: (L, H). */
CEASDEF int ceas_set_beta_star(ceas_state *st, const ceas_obs *heads);
/* One training step. heads: (L, H) this step's per-head observables, made
   with st->beta. Updates the EMAs, beta (Newton), freezing; then t += 1. */
CEASDEF int ceas_step(ceas_state *st, const ceas_obs *heads);
CEASDEF float ceas_kappa(const ceas_state *st);           /* with back-off */
CEASDEF float ceas_t_gate_at(const ceas_config *cfg, long long t);
CEASDEF float ceas_t_gate(const ceas_state *st);          /* with back-off */
CEASDEF float ceas_keep_q_at(const ceas_config *cfg, long long t);
CEASDEF float ceas_h_target(const ceas_state *st, int layer, int head);
CEASDEF float ceas_h_freeze(const ceas_state *st, int layer, int head);
CEASDEF float ceas_beta_c(const ceas_state *st, int layer, int head); /* 0: none */
/* Validation loss report; *fired (may be NULL) = 1 if back-off fired. */
CEASDEF int ceas_report_val_loss(ceas_state *st, float loss, int *fired);

/* ---- token gating ---- */
enum { CEAS_GATE_NORMALISED = 0, CEAS_GATE_RAW = 1 };
CEASDEF float ceas_gate_score(float beta, float sigma_qk, float n_eff);
/* beta / beta* = beta sigma_qk / sqrt(2 ln n_eff) (0 for non-finite input; ln n_eff
   below 1e-6 is taken as 1e-6, so a one-key row scores high and is kept) */
CEASDEF float ceas_gate_score_norm(float beta, float sigma_qk, float n_eff);
/* score: (B, H, T) = beta[h] * rows.sigma_qk / sqrt(2 ln rows.n_eff) (the normalised
   reading beta / beta*, CEAS_GATE_NORMALISED: the default, see READINGS); rows:
   (B, H, T); beta: (H) or NULL (1). */
CEASDEF int ceas_gate_scores(float *score, const ceas_obs *rows, const float *beta, int B,
                             int H, int T);
/* The same with a choice of reading: CEAS_GATE_NORMALISED (recommended; the one the
   T_gate thresholds fit, see READINGS) or CEAS_GATE_RAW; CEAS_EINVAL otherwise. */
CEASDEF int ceas_gate_scores_mode(float *score, const ceas_obs *rows, const float *beta,
                                  int B, int H, int T, int mode);
/* keep: (B, H, T) 1/0. Per (b, h): keeps every token with score >= t_gate and
   the top max(ceil(q T), min(m_min, T)) by score (ties: lower index; q T
   within 1e-4 of an integer counts as that integer).
   score: (B, H, T) finite. n_kept: optional total. workspace:
   ceas_token_mask_workspace_size(T) bytes or NULL. */
CEASDEF size_t ceas_token_mask_workspace_size(int T);
CEASDEF int ceas_token_mask(unsigned char *keep, const float *score, int B, int H, int T,
                            float t_gate, float q, int m_min, long long *n_kept,
                            void *workspace);

/* ---- state save / load ---- */
CEASDEF size_t ceas_state_size(const ceas_state *st);
CEASDEF int ceas_state_save(const ceas_state *st, void *buf, size_t cap, size_t *written);
/* st must be initialised with the same n_layers and n_heads; on success it
   holds the saved state (config included), on failure it is unchanged. */
CEASDEF int ceas_state_load(ceas_state *st, const void *buf, size_t len);

/* ---- multi-knob controllers (seed 004 section 2) ---- */
CEASDEF ceas_knob_config ceas_knob_config_default(void);
CEASDEF int ceas_knob_config_validate(const ceas_knob_config *kc);
/* rho = lr * lambda_max; outside [rho_min, rho_max]:
   lr <- lr exp(kappa_lr (rho* - rho)), rho* the band centre, factor capped to
   [1/max_factor, max_factor], then [lr_min, lr_max]. */
CEASDEF int ceas_lr_update(const ceas_knob_config *kc, float lr, float lambda_max,
                           float *lr_out);
/* Gradient-noise scale B_simple = tr(Sigma)/|G|^2 from the squared norms of
   gradients averaged over b_small and b_big examples (b_small < b_big). */
CEASDEF int ceas_gns(float sqnorm_small, float sqnorm_big, float b_small, float b_big,
                     float *gns_out);
/* batch <- batch exp(kappa_batch (gns/g* - 1)), g* = gns_target or batch when
   gns_target is 0; factor capped as for lr, then [batch_min, batch_max]. */
CEASDEF int ceas_batch_update(const ceas_knob_config *kc, float batch, float gns,
                              float *batch_out);
/* Entropy of p_i = w_i^2 / sum w^2; H_norm = H / ln n (n > 1). w: (n). */
CEASDEF int ceas_param_entropy(const float *w, long long n, float *H, float *H_norm);
/* Outside [wd_h_lo, wd_h_hi]: wd <- wd + kappa_wd (H* - h_param), H* the band
   centre, then [wd_min, wd_max]. */
CEASDEF int ceas_wd_update(const ceas_knob_config *kc, float wd, float h_param,
                           float *wd_out);
/* Mean normalised entropy H/ln V of softmax over the rows. logits: (R, V). */
CEASDEF int ceas_logit_entropy(const float *logits, int R, int V, float *h_norm);
CEASDEF float ceas_ls_target_at(const ceas_knob_config *kc, long long t);
/* Outside target(t) +- ls_band: p <- p + kappa_ls (target(t) - h_logit), then
   [ls_min, ls_max]. */
CEASDEF int ceas_ls_update(const ceas_knob_config *kc, long long t, float p, float h_logit,
                           float *p_out);

/* ---- MaxEnt structural add-on (seed 004 section 6): choices made before training ---- */
/* Host-only, pure functions on numbers the caller measured; formulas and readings in the
   doc block (MAXENT). None of them is in the CUDA list. */

/* (A) initialisation scales of W_q, W_k per layer. */
typedef struct ceas_init_config {
    int mode;             /* which T: CEAS_GATE_NORMALISED (default) or CEAS_GATE_RAW */
    float t_lo, t_hi;     /* target band of T at step 0 (0.9, 1.1) */
    float t_star;         /* the T aimed at, in [t_lo, t_hi] (1.0) */
    float log_n_eff;      /* ln N_eff inside T (1.1: ceas_config's target_drop) */
    float var_lo, var_hi; /* bounds on Var(q_i) = Var(k_i) at init (0.01, 100) */
    float kurt_max;       /* bound on the scores' predicted excess kurtosis (1.0) */
    float u_min;          /* freezing margin: beta sigma_qk <= (1-u_min) sqrt(2 ln N) (0.05) */
} ceas_init_config;

typedef struct ceas_init_layer {
    int d_model;  /* input width of the q/k projections */
    int d_k;      /* head dimension (the q.k dot product length) */
    int n_keys;   /* keys per attention row (the context length), >= 1 */
    float beta;   /* inverse temperature at step 0; 0: 1/sqrt(d_k) */
    float var_x;  /* variance of one input coordinate (1 after a LayerNorm), > 0 */
    float kurt_x; /* excess kurtosis of an input coordinate (0 Gaussian), >= -2 */
    float kurt_w; /* excess kurtosis of a weight entry (0 Gaussian, -1.2 uniform), >= -2 */
} ceas_init_layer;

/* check bits of ceas_init_scale.flags: which constraint leaves no scale inside the band */
#define CEAS_INIT_VAR_LOW  1 /* the band needs Var(q_i) below var_lo */
#define CEAS_INIT_VAR_HIGH 2 /* the band needs Var(q_i) above var_hi */
#define CEAS_INIT_MARGIN   4 /* the band lies past the freezing margin (1-u_min) sqrt(2 ln N) */
#define CEAS_INIT_KURT     8 /* predicted excess kurtosis of the scores above kurt_max */

typedef struct ceas_init_scale {
    float sigma_q, sigma_k; /* std of the entries of W_q and W_k (equal: symmetric split) */
    float var_q;            /* predicted Var(q_i) = Var(k_i) = d_model sigma^2 var_x */
    float sigma_qk;         /* predicted std of the scores = sqrt(d_k) var_q */
    float x;                /* beta sigma_qk */
    float T;                /* predicted T at step 0 */
    float kurt_s;           /* predicted excess kurtosis of the scores */
    int met;                /* 1: T in [t_lo, t_hi] with every bound kept; 0: see flags */
    int flags;              /* CEAS_INIT_* bits (0 when met) */
} ceas_init_scale;

CEASDEF ceas_init_config ceas_init_config_default(void);
CEASDEF int ceas_init_config_validate(const ceas_init_config *ic);
/* Per layer l (layers, out: (L)): the scales that put T at t_star, or at the point of the
   band nearest t_star that keeps every bound; when no point of the band keeps them, met 0,
   flags name the conflicts and the scales written are those of t_star itself (reported,
   never clamped); a kurtosis over kurt_max sets met 0 and CEAS_INIT_KURT beside the scales
   (the kurtosis does not depend on the scale). n_met (may be NULL): layers met. CEAS_EINVAL
   (nothing written) on a bad config or layer. */
CEASDEF int ceas_init_scales(const ceas_init_config *ic, const ceas_init_layer *layers, int L,
                             ceas_init_scale *out, int *n_met);

/* (B) + (D) the catalogue. */
#define CEAS_POS_ANY     0 /* the positional axis is not used */
#define CEAS_POS_ROTARY  1
#define CEAS_POS_LEARNED 2
#define CEAS_POS_ALIBI   3
#define CEAS_POS_LOCAL   4

typedef struct ceas_arch {
    int n_heads, d_k, d_ff, d_model; /* > 0 */
    int pos;                         /* CEAS_POS_* */
    double cost;                     /* measured cost, caller's units (FLOPs, s, bytes), > 0 */
    double utility;                  /* corridor utility (ceas_corridor_utility), finite */
} ceas_arch;

typedef struct ceas_select_config {
    double lambda;  /* Lagrange multiplier on the relative cost c / c_min, >= 0 (0.1) */
    double budget;  /* cost cap, caller's units; 0: none (0) */
    double temp;    /* softmax temperature of the weights, > 0 (0.05) */
    double tie_tol; /* scores within tie_tol of the best tie (1e-9) */
    int tile;       /* d_k, d_ff, d_model multiples of tile, else infeasible; <= 1: off (16) */
} ceas_select_config;

CEASDEF ceas_select_config ceas_select_config_default(void);
CEASDEF int ceas_select_config_validate(const ceas_select_config *sc);
/* Corridor utility of one candidate from per-head observables measured at a moderate beta
   (heads: (n), e.g. ceas_attention_observables' heads of every layer): the mean over heads
   of exp(-d^2 / (2 width^2)), d the distance of H from [log_n - drop_hi, log_n - drop_lo]
   (0 inside). In (0, 1]. */
CEASDEF int ceas_corridor_utility(const ceas_obs *heads, int n, float drop_lo, float drop_hi,
                                  float width, float *u);
/* (D) early-layer utility: mean over heads of H / log_n (1: uniform); heads with
   log_n == 0 (one key) count 1. heads: (n). */
CEASDEF int ceas_early_neff_utility(const ceas_obs *heads, int n, float *u);
/* Scores J_i = utility_i - lambda cost_i / c_min (c_min: the cheapest feasible cost),
   softmax weights w_i = exp((J_i - J_max)/temp) / Z over the feasible candidates (0 for the
   rest), and the selection: the feasible argmax of J; ties (within tie_tol) go to the lower
   cost, then the lower index. cand: (n); score, weight, feasible: (n) or NULL. A candidate is
   feasible when cost <= budget (budget > 0) and its sizes fit the tile. None feasible:
   CEAS_ERANGE, nothing written. */
CEASDEF int ceas_maxent_select(const ceas_select_config *sc, const ceas_arch *cand, int n,
                               double *score, double *weight, unsigned char *feasible,
                               int *selected);

/* (C) activation / normalisation parameters. */
typedef struct ceas_pi_config {
    float h_lo, h_hi;   /* output-entropy band, the caller's units (0.6, 0.9: normalised) */
    float kp, ki;       /* proportional and integral gains, >= 0 (0.5, 0.05) */
    float i_max;        /* anti-windup: |integral| <= i_max, > 0 (10) */
    float p_min, p_max; /* bounds on the parameter (1e-3, 1e3) */
    int direction;      /* +1: raising the parameter raises the entropy; -1: lowers it (+1) */
} ceas_pi_config;

CEASDEF ceas_pi_config ceas_pi_config_default(void);
CEASDEF int ceas_pi_config_validate(const ceas_pi_config *pc);
/* One PI step on an activation parameter p from the measured output entropy h:
   e = h_lo - h below the band, h_hi - h above it, 0 inside; I <- clamp(I + e, +-i_max);
   p <- clamp(p + direction (kp e + ki I), p_min, p_max). integral: in/out (start at 0). */
CEASDEF int ceas_pi_update(const ceas_pi_config *pc, float p, float h, float *integral,
                           float *p_out);
/* Norm epsilon from the per-row variances the norm divides by (var: (n), >= 0, one
   positive at least): eps = max(rel v_min, eps_floor), v_min the smallest positive
   variance; bias (may be NULL) = 1 - sqrt(v_min / (v_min + eps)), the relative shrink of
   that row's normalised output. rel > 0, eps_floor > 0. */
CEASDEF int ceas_norm_eps(const float *var, long long n, float rel, float eps_floor,
                          float *eps, float *bias);
/* Spectral-radius cap: sigma_max (the caller's estimate, e.g. power iteration) against
   cap > 0: *scale = cap / sigma_max when over the cap (multiply the weights by it), else 1;
   *over (may be NULL) = 1 when over. */
CEASDEF int ceas_spectral_cap(float sigma_max, float cap, float *scale, int *over);

/* ---- CUDA: the observables and their reductions on the device ---- */
/* cuda/ceas.cuh; compiled when this header is compiled by nvcc (or by a C++ compiler
   with ATTNKIT_CUDA_SIM and tests/cuda_sim.h), else these return CEAS_ENOCUDA. The
   controller itself stays on the host: these hand it the numbers it needs.
   logits, rows and score are DEVICE pointers (a host pointer: CEAS_EINVAL, nothing
   launched); beta (H) and heads (H) are HOST arrays (the controller's). `stream` is a
   cudaStream_t (NULL: the default stream). Per row one block: max, then one pass
   with double accumulators; pooling per head in a fixed-order tree (deterministic).
   Calls that return heads or a validity verdict end with a stream synchronisation.
   In such a build the plain ceas_attention_observables(_from_moments),
   ceas_pool_observables and ceas_gate_scores(_mode) route device inputs here (default
   stream), so one trainer calls the same names on host or device buffers. */
typedef struct CUstream_st *ceas_stream;
#define CEAS_ENOCUDA (-6)
#define CEAS_ECUDA   (-7)
CEASDEF int ceas_cuda_available(void);
/* The device calls are written once each, in the list CEAS__CUDA_API: an entry
   X(int, ceas_name_cuda, (parameters)) is the prototype `int ceas_name_cuda(parameters)`,
   documented above it in the list; the list is expanded here into the declarations and,
   without nvcc / the simulation, into stubs that return CEAS_ENOCUDA (a workspace size:
   0). */
#define CEAS__CUDA_DECLARE(ret, name, params) CEASDEF ret name params;
#define CEAS__CUDA_API(X)                                                                       \
    /* As ceas_attention_observables. rows: (B,H,T) device ceas_obs or NULL; heads: (H) host    \
       or NULL (not both NULL); workspace: NULL or                                              \
       ceas_attention_observables_cuda_workspace_size(B, H, T) bytes of device memory. */       \
    X(size_t, ceas_attention_observables_cuda_workspace_size, (int B, int H, int T))            \
    X(int, ceas_attention_observables_cuda, (const float *logits /* (B,H,T,T) */, int B, int H, \
                                             int T, int causal,                                 \
                                             const float *beta /* (H) host */,                  \
                                             ceas_obs *rows /* (B,H,T) device */,               \
                                             ceas_obs *heads /* (H) host */, void *workspace,   \
                                             ceas_stream stream))                               \
    /* As ceas_attention_observables_from_moments: moments (B,H,T,stride) device, rows (B,H,T)  \
       device or NULL, heads (H) host or NULL, beta (H) host; workspace as above. */            \
    X(int, ceas_attention_observables_from_moments_cuda, (const float *moments, int B, int H,   \
                                                          int T, int stride, const float *beta, \
                                                          ceas_obs *rows, ceas_obs *heads,      \
                                                          void *workspace, ceas_stream stream)) \
    /* As ceas_pool_observables over device rows (R) into a host result. */                     \
    X(int, ceas_pool_observables_cuda, (ceas_obs *out /* host */,                               \
                                        const ceas_obs *rows /* (R) device */, int R,           \
                                        ceas_stream stream))                                    \
    /* As ceas_gate_scores (the normalised reading) and ceas_gate_scores_mode: score (B,H,T)    \
       and rows (B,H,T) on the device, beta (H) host. */                                        \
    X(int, ceas_gate_scores_cuda, (float *score, const ceas_obs *rows, const float *beta,       \
                                   int B, int H, int T, ceas_stream stream))                    \
    X(int, ceas_gate_scores_mode_cuda, (float *score, const ceas_obs *rows, const float *beta,  \
                                        int B, int H, int T, int mode, ceas_stream stream))
CEAS__CUDA_API(CEAS__CUDA_DECLARE)

#ifdef __cplusplus
}
#endif

#endif /* CEAS_H */

/* ======================================================================= */
#ifdef CEAS_IMPLEMENTATION
#ifndef CEAS_IMPLEMENTATION_DONE
#define CEAS_IMPLEMENTATION_DONE

/* GCC keeps IEEE exception semantics by default (-ftrapping-math): a loop with a
   compare-and-select around a float expression (a clamp before an exp, say) is then
   not if-converted, hence not vectorised, on AVX2 (AVX-512 gets masked instructions).
   Nothing here reads floating-point exception flags, so the implementation is compiled
   without that constraint; values are unchanged (this is not -ffast-math). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__INTEL_COMPILER)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#define CEAS__PUSHED_NO_TRAPPING 1
#endif

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#if defined(CEAS_MALLOC) && !defined(CEAS_FREE)
#error "define CEAS_MALLOC and CEAS_FREE together"
#endif
#if defined(CEAS_FREE) && !defined(CEAS_MALLOC)
#error "define CEAS_MALLOC and CEAS_FREE together"
#endif
#ifndef CEAS_MALLOC
#define CEAS_MALLOC(sz) malloc(sz)
#define CEAS_FREE(p) free(p)
#endif
#ifndef CEAS_ASSERT
#include <assert.h>
#define CEAS_ASSERT(x) assert(x)
#endif

#if defined(__cplusplus) || defined(_MSC_VER)
#define CEAS__RESTRICT __restrict
#else
#define CEAS__RESTRICT restrict
#endif

/* fused multiply-add where the target has it (a call to fmaf would be a slow
   software routine elsewhere); only the rounding of the last bit differs */
#if defined(__FMA__) || defined(__AVX512F__)
#define CEAS__FMA(a, b, c) fmaf((a), (b), (c))
#else
#define CEAS__FMA(a, b, c) ((a) * (b) + (c))
#endif

/* software prefetch (a hint; rows of attention logits start a new page each,
   where hardware stream prefetchers restart) */
#if defined(__GNUC__) || defined(__clang__)
#define CEAS__PREFETCH(p) __builtin_prefetch((const void *)(p), 0, 0)
#else
#define CEAS__PREFETCH(p) ((void)0)
#endif

#ifndef CEAS__LANES
#define CEAS__LANES 16
#endif
#define CEAS__CHUNK 1024
#define CEAS__GROUP 8

/* finite test on the IEEE bits: survives -ffast-math / -Ofast, which fold x == x */
static int ceas__finite(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7FF0000000000000ULL) != 0x7FF0000000000000ULL;
}

CEASDEF const char *ceas_strerror(int err)
{
    switch (err) {
    case CEAS_OK: return "ok";
    case CEAS_EINVAL: return "invalid argument (NULL, bad size, NaN/Inf or inverted bounds)";
    case CEAS_ENOMEM: return "out of memory";
    case CEAS_ERANGE: return "buffer too small or no value in range (nothing feasible)";
    case CEAS_EIO: return "i/o error";
    case CEAS_EFORMAT: return "bad state buffer (corrupted, truncated or other shape)";
    case CEAS_ENOCUDA: return "built without CUDA (compile with nvcc)";
    case CEAS_ECUDA: return "CUDA error";
    default: return "unknown error";
    }
}

/* ---------------------------------------------------------------- config */

/* config fields in serialisation order */
#define CEAS__CFG_FLOATS(X) X(target_drop) X(eps) X(kappa_max) X(kappa_inf) X(tau_kappa) \
    X(dbeta_max) X(max_ratio) X(u_min) X(nu) X(beta_c) X(beta_min) X(beta_max) X(t_max) X(t_inf)      \
    X(tau_t) X(q_init) X(q_final) X(freeze_drop) X(backoff_sigma) X(backoff_dt)           \
    X(backoff_kappa)
#define CEAS__CFG_INTS(X) X(ema_h) X(ema_sigma) X(q_steps) X(m_min) X(h_min)               \
    X(freeze_window) X(freeze_ref) X(backoff_steps) X(val_window) X(backoff_min_reports)


CEASDEF int ceas_config_preset(int preset, ceas_config *out)
{
    ceas_config c;
    if (!out) return CEAS_EINVAL;
    if (preset != CEAS_PRESET_9K && preset != CEAS_PRESET_14M && preset != CEAS_PRESET_GPT)
        return CEAS_EINVAL;
    memset(&c, 0, sizeof c);
    c.target_drop = 1.1f;
    c.eps = 1e-6f;
    c.kappa_inf = 1.0f;
    c.nu = 0.75f;
    c.max_ratio = 2.0f;
    c.beta_c = 0.0f;
    c.beta_min = 1e-4f;
    c.beta_max = 1e4f;
    c.ema_h = 64;
    c.ema_sigma = 128;
    c.q_init = 0.55f;
    c.q_final = 0.75f;
    c.q_steps = 2000;
    c.m_min = 16;
    c.h_min = 2;
    c.freeze_drop = 0.9f;
    c.freeze_ref = CEAS_FREEZE_LAYER_MEAN;
    c.backoff_sigma = 0.2f;
    c.backoff_dt = 0.05f;
    c.backoff_kappa = 0.5f;
    c.backoff_steps = 200;
    c.val_window = 5;
    c.backoff_min_reports = 3;
    if (preset == CEAS_PRESET_9K) {
        c.kappa_max = 2.2f; c.tau_kappa = 750.0f; c.dbeta_max = 0.75f; c.u_min = 0.06f;
        c.t_max = 1.8f; c.t_inf = 1.05f; c.tau_t = 600.0f; c.freeze_window = 50;
    } else if (preset == CEAS_PRESET_14M) {
        c.kappa_max = 1.8f; c.tau_kappa = 1500.0f; c.dbeta_max = 0.5f; c.u_min = 0.05f;
        c.t_max = 1.6f; c.t_inf = 1.02f; c.tau_t = 1200.0f; c.freeze_window = 100;
    } else {
        c.kappa_max = 1.5f; c.tau_kappa = 3500.0f; c.dbeta_max = 0.3f; c.u_min = 0.04f;
        c.t_max = 1.5f; c.t_inf = 1.0f; c.tau_t = 3000.0f; c.freeze_window = 200;
    }
    *out = c;
    return CEAS_OK;
}

CEASDEF ceas_config ceas_config_default(void)
{
    ceas_config c;
    ceas_config_preset(CEAS_PRESET_14M, &c);
    return c;
}

CEASDEF int ceas_config_validate(const ceas_config *c)
{
    if (!c) return CEAS_EINVAL;
#define CEAS__VF(f) if (!ceas__finite(c->f)) return CEAS_EINVAL;
    CEAS__CFG_FLOATS(CEAS__VF)
#undef CEAS__VF
    if (!(c->eps > 0) || c->kappa_max < 0 || c->kappa_inf < 0 || !(c->tau_kappa > 0) ||
        !(c->dbeta_max > 0) || !(c->max_ratio == 0 || c->max_ratio > 1) || c->u_min < 0 || !(c->u_min < 1) || !(c->nu > 0) ||
        c->beta_c < 0 || !(c->beta_min > 0) || !(c->beta_min <= c->beta_max) ||
        c->t_max < 0 || c->t_inf < 0 || !(c->tau_t > 0) || c->q_init < 0 ||
        c->q_init > 1 || c->q_final < 0 || c->q_final > 1 || c->backoff_sigma < 0 ||
        c->backoff_dt < 0 || !(c->backoff_kappa > 0) || c->backoff_kappa > 1)
        return CEAS_EINVAL;
    if (c->ema_h < 1 || c->ema_sigma < 1 || c->q_steps < 0 || c->m_min < 0 ||
        c->h_min < 0 || c->freeze_window < 1 ||
        (c->freeze_ref != CEAS_FREEZE_LAYER_MEAN && c->freeze_ref != CEAS_FREEZE_UNIFORM) ||
        c->backoff_steps < 0 || c->val_window < 1 || c->backoff_min_reports < 2)
        return CEAS_EINVAL;
    return CEAS_OK;
}

/* ---------------------------------------------------------- observables */

/* e^x for x in [-87, 0] (callers clamp), relative error < 2e-7, branch-free
   and written so that a compiler vectorises it in a loop: n = round(x/ln 2)
   by the 1.5*2^23 trick, r = x - n ln 2 in one fused step (|r| <= ln2/2; the
   error of ln 2 in float, |n| * 2e-9, only matters where e^x < 2^-60), a
   degree-5 polynomial fitted for relative error on that interval (Lawson
   iterations), 2^n from the bits. */
static inline float ceas__expneg(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    float kf = CEAS__FMA(x, 1.44269504088896341f, magic);
    float n = kf - magic, r, p, s;
    unsigned int bits, kb;
    memcpy(&kb, &kf, sizeof kb);
    r = CEAS__FMA(n, -0.693147180559945309f, x);
    p = 8.3125270903e-3f;
    p = CEAS__FMA(p, r, 4.1890114546e-2f);
    p = CEAS__FMA(p, r, 1.6667114198e-1f);
    p = CEAS__FMA(p, r, 4.9999231100e-1f);
    p = CEAS__FMA(p, r, 1.0f);
    p = CEAS__FMA(p, r, 1.0f);
    /* kb's low bits hold n + 0x400000; 2^n has exponent field n + 127 */
    bits = (kb - 0x4B400000u + 127u) << 23;
    memcpy(&s, &bits, sizeof s);
    return p * s;
}

#define CEAS__XMIN (-87.0f)

/* AVX2 + FMA (without AVX-512): the accumulating loop of the row pass in intrinsics,
   8 lanes and 5 accumulators in ymm registers. The 16-lane C loop, vectorised by the
   compiler into pairs of ymm, kept 10 accumulators plus temporaries in 16 registers
   and spilled. The exponential is ceas__expneg's, with n = round(x log2 e) by
   cvtps (round to nearest even) instead of the 1.5*2^23 trick: immune to -ffast-math
   reassociation. Each chunk's sums go into lanes 0..7 of the 16-lane accumulators;
   the rescale when the max moves is linear in them and depends on the lane counts
   only through their total, so where the values sit does not matter. */
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__) && \
    !defined(CEAS_NO_SIMD) && CEAS__LANES == 16
#include <immintrin.h>
#define CEAS__AVX2_PASS 1
static inline __m256 ceas__expneg8(__m256 x)
{
    const __m256i ni = _mm256_cvtps_epi32(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)));
    const __m256 n = _mm256_cvtepi32_ps(ni);
    const __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-0.693147180559945309f), x);
    __m256 p = _mm256_set1_ps(8.3125270903e-3f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1890114546e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6667114198e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.9999231100e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(
                                _mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23)));
}
/* adds, over x[0..len) (len % 8 == 0), e = e^max(t, XMIN), e t, e t^2, t, t^2 with
   t = x - m into z, a, b, s1, s2 (lanes 0..7) */
static void ceas__accum_avx2(const float *CEAS__RESTRICT x, int len, float m, float *z,
                             float *a, float *b, float *s1, float *s2)
{
    const __m256 vm = _mm256_set1_ps(m), vx = _mm256_set1_ps(CEAS__XMIN);
    __m256 vz = _mm256_setzero_ps(), va = vz, vb = vz, v1 = vz, v2 = vz;
    int j;
    for (j = 0; j < len; j += 8) {
        const __m256 t = _mm256_sub_ps(_mm256_loadu_ps(x + j), vm);
        const __m256 tc = _mm256_max_ps(t, vx); /* NaN t -> XMIN, as the C loop */
        const __m256 e = ceas__expneg8(tc), et = _mm256_mul_ps(e, tc);
        vz = _mm256_add_ps(vz, e);
        va = _mm256_add_ps(va, et);
        vb = _mm256_fmadd_ps(et, tc, vb);
        v1 = _mm256_add_ps(v1, t);
        v2 = _mm256_fmadd_ps(t, t, v2);
    }
    _mm256_storeu_ps(z, _mm256_add_ps(_mm256_loadu_ps(z), vz));
    _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a), va));
    _mm256_storeu_ps(b, _mm256_add_ps(_mm256_loadu_ps(b), vb));
    _mm256_storeu_ps(s1, _mm256_add_ps(_mm256_loadu_ps(s1), v1));
    _mm256_storeu_ps(s2, _mm256_add_ps(_mm256_loadu_ps(s2), v2));
}
#endif

/* keeps GCC from unrolling a 16-lane loop into scalars before vectorising it */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && __GNUC__ >= 8
#define CEAS__NOUNROLL _Pragma("GCC unroll 1")
#else
#define CEAS__NOUNROLL
#endif

/* horizontal max and sum of CEAS__LANES (16) lanes: in registers with
   AVX-512 (a tree through memory stalls on store forwarding), else a
   fixed-order tree */
#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__)) && CEAS__LANES == 16
#include <immintrin.h>
static inline float ceas__hmax(const float *v) { return _mm512_reduce_max_ps(_mm512_loadu_ps(v)); }
static inline float ceas__hsum(const float *v) { return _mm512_reduce_add_ps(_mm512_loadu_ps(v)); }
#elif defined(__AVX2__) && (defined(__GNUC__) || defined(__clang__)) && CEAS__LANES == 16
/* AVX2: the two halves combined, then 8 -> 4 -> 2 -> 1 lanes in registers */
#include <immintrin.h>
static inline float ceas__hmax(const float *v)
{
    __m256 x = _mm256_max_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8));
    __m128 y = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    y = _mm_max_ps(y, _mm_movehl_ps(y, y));
    y = _mm_max_ss(y, _mm_shuffle_ps(y, y, 1));
    return _mm_cvtss_f32(y);
}
static inline float ceas__hsum(const float *v)
{
    __m256 x = _mm256_add_ps(_mm256_loadu_ps(v), _mm256_loadu_ps(v + 8));
    __m128 y = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    y = _mm_add_ps(y, _mm_movehl_ps(y, y));
    y = _mm_add_ss(y, _mm_shuffle_ps(y, y, 1));
    return _mm_cvtss_f32(y);
}
#else
static inline float ceas__hmax(const float *v)
{
    float t[CEAS__LANES];
    int h, l;
    for (l = 0; l < CEAS__LANES; l++) t[l] = v[l];
    for (h = CEAS__LANES / 2; h >= 1; h /= 2)
        for (l = 0; l < h; l++) t[l] = t[l + h] > t[l] ? t[l + h] : t[l];
    return t[0];
}
static inline float ceas__hsum(const float *v)
{
    float t[CEAS__LANES];
    int h, l;
    for (l = 0; l < CEAS__LANES; l++) t[l] = v[l];
    for (h = CEAS__LANES / 2; h >= 1; h /= 2)
        for (l = 0; l < h; l++) t[l] += t[l + h];
    return t[0];
}
#endif

/* weights of the last, overlapping block of a row: ceas__tailw + (n % LANES)
   is 1 on the lanes l >= LANES - n % LANES (the values not yet counted) */
static const float ceas__tailw[2 * CEAS__LANES] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* The one pass over a row (n values, in lanes of CEAS__LANES; every loop over
   l is lane-independent and vectorisable without reassociation). Per chunk
   of up to CEAS__CHUNK values: the chunk's max; when it exceeds the running
   max m, the accumulators move to it (one e^d per chunk, d = m_old - m_new);
   then, with t = x - m and e = e^t (branch-free exponential, t clamped at
   XMIN), per lane z = sum e, a = sum e t, b = sum e t^2, s1 = sum t,
   s2 = sum t^2. The last n % LANES values: one weighted block, overlapping
   the previous (n >= LANES) or padded with x[0] (n < LANES). Lanes merge in
   a fixed-order tree. Results: m, z, a, b, s1, s2, m. */
static void ceas__row_pass(const float *CEAS__RESTRICT x, int n, double *res)
{
    float z[CEAS__LANES], a[CEAS__LANES], b[CEAS__LANES];
    float s1[CEAS__LANES], s2[CEAS__LANES], cm[CEAS__LANES], cm2[CEAS__LANES];
    float pad[CEAS__LANES];
    const float *CEAS__RESTRICT xt = NULL;
    const float *CEAS__RESTRICT w = ceas__tailw + n % CEAS__LANES;
    float m = x[0], k = 0;
    int nfull = n - n % CEAS__LANES, j0 = 0, j, l;
    if (n % CEAS__LANES) {
        if (n >= CEAS__LANES) xt = x + (n - CEAS__LANES);
        else {
            for (l = 0; l < CEAS__LANES; l++)
                pad[l] = l >= CEAS__LANES - n ? x[l - (CEAS__LANES - n)] : x[0];
            xt = pad;
        }
    }
    for (l = 0; l < CEAS__LANES; l++) {
        z[l] = 0; a[l] = 0; b[l] = 0; s1[l] = 0; s2[l] = 0;
    }
    do {
        int len = nfull - j0;
        float mc;
        if (len > CEAS__CHUNK) len = CEAS__CHUNK;
        for (j = j0 + CEAS__CHUNK; j < j0 + CEAS__CHUNK + len && j < n; j += 16)
            CEAS__PREFETCH(x + j); /* the next chunk, one 64-byte line per 16 */
        for (l = 0; l < CEAS__LANES; l++) { cm[l] = m; cm2[l] = m; }
        for (j = j0; j + 2 * CEAS__LANES <= j0 + len; j += 2 * CEAS__LANES) {
            const float *CEAS__RESTRICT xb = x + j;  /* two chains: latency */
            CEAS__NOUNROLL
            for (l = 0; l < CEAS__LANES; l++) cm[l] = xb[l] > cm[l] ? xb[l] : cm[l];
            CEAS__NOUNROLL
            for (l = 0; l < CEAS__LANES; l++)
                cm2[l] = xb[CEAS__LANES + l] > cm2[l] ? xb[CEAS__LANES + l] : cm2[l];
        }
        if (j < j0 + len)
            for (l = 0; l < CEAS__LANES; l++) cm[l] = x[j + l] > cm[l] ? x[j + l] : cm[l];
        for (l = 0; l < CEAS__LANES; l++) cm[l] = cm2[l] > cm[l] ? cm2[l] : cm[l];
        if (j0 + len == nfull && xt)
            for (l = 0; l < CEAS__LANES; l++) cm[l] = xt[l] > cm[l] ? xt[l] : cm[l];
        mc = ceas__hmax(cm);
        if (mc > m) {
            if (k > 0) { /* move the accumulators from m to mc */
                float d = m - mc, dc = d < CEAS__XMIN ? CEAS__XMIN : d;
                float c = ceas__expneg(dc);
                for (l = 0; l < CEAS__LANES; l++) {
                    float zz = z[l], aa = a[l];
                    b[l] = c * (b[l] + dc * (2.0f * aa + dc * zz));
                    a[l] = c * (aa + dc * zz);
                    z[l] = c * zz;
                    s2[l] += d * (2.0f * s1[l] + k * d);
                    s1[l] += k * d;
                }
            }
            m = mc;
        }
#ifdef CEAS__AVX2_PASS
        ceas__accum_avx2(x + j0, len, m, z, a, b, s1, s2);
#else
        for (j = j0; j < j0 + len; j += CEAS__LANES) {
            const float *CEAS__RESTRICT xb = x + j;
            for (l = 0; l < CEAS__LANES; l++) {
                float t = xb[l] - m;
                float tc = t > CEAS__XMIN ? t : CEAS__XMIN;
                float e = ceas__expneg(tc);
                float et = e * tc;
                z[l] += e;
                a[l] += et;
                b[l] = CEAS__FMA(et, tc, b[l]);
                s1[l] += t;
                s2[l] = CEAS__FMA(t, t, s2[l]);
            }
        }
#endif
        k += (float)(len / CEAS__LANES);
        j0 += len;
    } while (j0 < nfull);
    if (xt)
        for (l = 0; l < CEAS__LANES; l++) {
            float t = xt[l] - m;
            float tc = t > CEAS__XMIN ? t : CEAS__XMIN;
            float e = ceas__expneg(tc) * w[l];
            float et = e * tc, tw = t * w[l];
            z[l] += e;
            a[l] += et;
            b[l] = CEAS__FMA(et, tc, b[l]);
            s1[l] += tw;
            s2[l] = CEAS__FMA(tw, t, s2[l]);
        }
    res[0] = m; res[1] = ceas__hsum(z); res[2] = ceas__hsum(a); res[3] = ceas__hsum(b);
    res[4] = ceas__hsum(s1); res[5] = ceas__hsum(s2); res[6] = m;
}

/* The observables of one row from its pass's sums r. */
static int ceas__row_fin(ceas_obs *o, const double *r, int n, float beta)
{
    double ea, eb, varx, mu, var, H, ib = 1.0 / beta;
    ea = r[2] / r[1];
    eb = r[3] / r[1];
    varx = eb - ea * ea;
    if (varx < 0) varx = 0;
    H = (double)logf((float)r[1]) - ea; /* z is a float sum */
    if (H < 0) H = 0;
    mu = r[4] / n;
    var = r[5] / n - mu * mu;
    if (var < 0) var = 0;
    o->H = (float)H;
    o->n_eff = expf((float)H);
    o->var_s = (float)(varx * ib * ib);
    o->sigma_qk = (float)(sqrt(var) * ib);
    o->mean_s = (float)((r[6] + mu) * ib);
    o->log_n = logf((float)n);
    o->n = n;
    if (!ceas__finite(o->H) || !ceas__finite(o->var_s) || !ceas__finite(o->sigma_qk) ||
        !ceas__finite(o->mean_s) || !ceas__finite(o->n_eff)) {
        o->H = o->n_eff = o->var_s = o->sigma_qk = o->mean_s = (float)NAN;
        return CEAS_EINVAL;
    }
    return CEAS_OK;
}

static int ceas__row_obs(ceas_obs *o, const float *x, int n, float beta)
{
    double r[7];
    ceas__row_pass(x, n, r);
    return ceas__row_fin(o, r, n, beta);
}

CEASDEF int ceas_row_observables(ceas_obs *out, const float *logits, int n, float beta)
{
    if (!out || !logits || n <= 0 || !ceas__finite(beta) || !(beta > 0)) return CEAS_EINVAL;
    return ceas__row_obs(out, logits, n, beta);
}

CEASDEF int ceas_rows_observables(ceas_obs *out, const float *logits, int R, int n,
                                  float beta)
{
    int r, bad = 0;
    if (!out || !logits || R <= 0 || n <= 0 || !ceas__finite(beta) || !(beta > 0))
        return CEAS_EINVAL;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) reduction(| : bad)
#endif
    for (r = 0; r < R; r++)
        bad |= ceas__row_obs(out + r, logits + (size_t)r * (size_t)n, n, beta) != CEAS_OK;
    return bad ? CEAS_EINVAL : CEAS_OK;
}

/* Pools rows[0..R) taken with stride `stride` (in rows). */
static int ceas__pool(ceas_obs *out, const ceas_obs *rows, int R, size_t stride,
                      int inner, size_t inner_stride)
{
    /* rows are visited as: for r < R, for i < inner: rows[r*stride + i*inner_stride] */
    double sh = 0, sv = 0, sl = 0, nn = 0, sm = 0, mu, svar = 0;
    long long cnt = 0, ntot = 0;
    int r, i, bad = 0;
    for (r = 0; r < R; r++)
        for (i = 0; i < inner; i++) {
            const ceas_obs *o = rows + (size_t)r * stride + (size_t)i * inner_stride;
            if (!ceas__finite(o->H) || !ceas__finite(o->var_s) ||
                !ceas__finite(o->sigma_qk) || !ceas__finite(o->mean_s) ||
                !ceas__finite(o->log_n) || o->n <= 0)
                bad = 1;
            sh += o->H; sv += o->var_s; sl += o->log_n;
            nn += (double)o->n; sm += (double)o->n * o->mean_s;
            ntot += o->n;
            cnt++;
        }
    if (bad || cnt == 0) {
        out->H = out->n_eff = out->var_s = out->sigma_qk = out->mean_s = out->log_n =
            (float)NAN;
        out->n = ntot;
        return CEAS_EINVAL;
    }
    mu = sm / nn;
    for (r = 0; r < R; r++)
        for (i = 0; i < inner; i++) {
            const ceas_obs *o = rows + (size_t)r * stride + (size_t)i * inner_stride;
            double d = o->mean_s - mu;
            svar += (double)o->n * ((double)o->sigma_qk * o->sigma_qk + d * d);
        }
    out->H = (float)(sh / cnt);
    out->n_eff = (float)exp(sh / cnt);
    out->var_s = (float)(sv / cnt);
    out->sigma_qk = (float)sqrt(svar / nn);
    out->mean_s = (float)mu;
    out->log_n = (float)(sl / cnt);
    out->n = ntot;
    return CEAS_OK;
}

/* Under nvcc (or the CUDA simulation) the plain reductions route DEVICE inputs (logits,
   moments, rows) to their _cuda twins on the default stream (DESIGN.md: one model for
   both devices); rows outputs are then device memory, heads stay on the host. */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
static int ceas__is_dev(const void *p); /* cuda/ceas.cuh */
#endif

CEASDEF int ceas_pool_observables(ceas_obs *out, const ceas_obs *rows, int R)
{
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (ceas__is_dev(rows)) return ceas_pool_observables_cuda(out, rows, R, NULL);
#endif
    if (!out || !rows || R <= 0) return CEAS_EINVAL;
    return ceas__pool(out, rows, R, 1, 1, 0);
}

/* First row of part t of nt of nrows rows (rows of T keys, or causal
   triangles of T rows with i + 1 keys in row i), parts of equal keys. */
static long long ceas__split(long long nrows, int T, int causal, int t, int nt)
{
    double tri, target, rem;
    long long k, i;
    if (t <= 0) return 0;
    if (t >= nt) return nrows;
    if (!causal) return nrows * t / nt;
    tri = 0.5 * (double)T * ((double)T + 1.0);
    target = tri * (double)(nrows / T) * t / nt;
    k = (long long)(target / tri);
    rem = target - (double)k * tri;
    i = (long long)ceil((sqrt(8.0 * rem + 1.0) - 1.0) * 0.5);
    if (i < 0) i = 0;
    if (i > T) i = T;
    k = k * T + i;
    return k < nrows ? k : nrows;
}

/* shared by the two observables calls: beta (H) valid or NULL; the rows buffer (the
   caller's rows, else the workspace, else an allocation left in *own); the heads pool */
static int ceas__beta_valid(const float *beta, int H)
{
    int h;
    if (beta)
        for (h = 0; h < H; h++)
            if (!ceas__finite(beta[h]) || !(beta[h] > 0)) return 0;
    return 1;
}
static ceas_obs *ceas__rows_buf(ceas_obs *rows, void *workspace, int B, int H, int T, void **own);
static int ceas__pool_heads(ceas_obs *heads, const ceas_obs *ro, int B, int H, int T);

CEASDEF size_t ceas_attention_observables_workspace_size(int B, int H, int T)
{
    if (B <= 0 || H <= 0 || T <= 0) return 0;
    return (size_t)B * (size_t)H * (size_t)T * sizeof(ceas_obs);
}

CEASDEF int ceas_attention_observables(const float *logits, int B, int H, int T, int causal,
                                       const float *beta, ceas_obs *rows, ceas_obs *heads,
                                       void *workspace)
{
    long long nrows;
    ceas_obs *ro;
    void *own = NULL;
    int bad = 0, ch, nch = 1;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (ceas__is_dev(logits))
        return ceas_attention_observables_cuda(logits, B, H, T, causal, beta, rows, heads, workspace, NULL);
#endif
    if (!logits || B <= 0 || H <= 0 || T <= 0 || (!rows && !heads) || !ceas__beta_valid(beta, H))
        return CEAS_EINVAL;
    if (causal != 0 && causal != 1) return CEAS_EINVAL; /* a boolean (issue 37 rule 4) */
    nrows = (long long)B * H * T;
    if (!(ro = ceas__rows_buf(rows, workspace, B, H, T, &own))) return CEAS_ENOMEM;
    /* each thread takes one contiguous range of rows holding an equal share
       of the keys (causal triangles weighted): contiguous rows stream from
       memory far better than interleaved ones; each row's result is
       independent of the thread count. Within a range, groups of CEAS__GROUP
       rows: their passes run back to back, then they are finalised, so that
       one row's short dependent tail (reductions, log, exp) overlaps the next
       row's pass instead of stalling it. */
#if defined(_OPENMP)
    nch = omp_get_max_threads();
    if (nch < 1) nch = 1;
#endif
    /* ranges are explicit chunks (never omp_get_thread_num(), which a host linking a
       second OpenMP runtime can answer with 0 on every thread) */
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) reduction(| : bad)
#endif
    for (ch = 0; ch < nch; ch++) {
        int nt = nch, tid = ch;
        long long lo, hi, r0, q;
        lo = ceas__split(nrows, T, causal, tid, nt);
        hi = ceas__split(nrows, T, causal, tid + 1, nt);
        for (r0 = lo; r0 < hi; r0 += CEAS__GROUP) {
            double sums[CEAS__GROUP][7];
            long long r1 = r0 + CEAS__GROUP < hi ? r0 + CEAS__GROUP : hi;
            for (q = r0; q < r1; q++) {
                int pf, i = (int)(q % T), n = causal ? i + 1 : T;
                if (q + 1 < hi) /* the next row, ahead of the hardware prefetcher */
                    for (pf = 0; pf < 2 * CEAS__CHUNK && pf < T; pf += 16)
                        CEAS__PREFETCH(logits + (size_t)(q + 1) * (size_t)T + pf);
                ceas__row_pass(logits + (size_t)q * (size_t)T, n, sums[q - r0]);
            }
            for (q = r0; q < r1; q++) {
                int i = (int)(q % T), n = causal ? i + 1 : T, hh = (int)((q / T) % H);
                float bt = beta ? beta[hh] : 1.0f;
                bad |= ceas__row_fin(ro + q, sums[q - r0], n, bt) != CEAS_OK;
            }
        }
    }
    if (heads && ceas__pool_heads(heads, ro, B, H, T) != CEAS_OK) bad = 1;
    if (own) CEAS_FREE(own);
    return bad ? CEAS_EINVAL : CEAS_OK;
}

static ceas_obs *ceas__rows_buf(ceas_obs *rows, void *workspace, int B, int H, int T, void **own)
{
    *own = NULL;
    if (rows) return rows;
    if (workspace) return (ceas_obs *)workspace;
    *own = CEAS_MALLOC(ceas_attention_observables_workspace_size(B, H, T));
    return (ceas_obs *)*own;
}

/* heads (H): each head's rows pooled over batch and query rows */
static int ceas__pool_heads(ceas_obs *heads, const ceas_obs *ro, int B, int H, int T)
{
    int h, bad = 0;
    for (h = 0; h < H; h++)
        if (ceas__pool(heads + h, ro + (size_t)h * T, B, (size_t)H * T, T, 1) != CEAS_OK) bad = 1;
    return bad ? CEAS_EINVAL : CEAS_OK;
}

CEASDEF int ceas_attention_observables_from_moments(const float *moments, int B, int H, int T,
                                                    int stride, const float *beta,
                                                    ceas_obs *rows, ceas_obs *heads,
                                                    void *workspace)
{
    long long nrows, q;
    ceas_obs *ro;
    void *own = NULL;
    int bad = 0;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (ceas__is_dev(moments))
        return ceas_attention_observables_from_moments_cuda(moments, B, H, T, stride, beta, rows, heads,
                                                            workspace, NULL);
#endif
    if (!moments || B <= 0 || H <= 0 || T <= 0 || stride < 6 || (!rows && !heads) || !ceas__beta_valid(beta, H))
        return CEAS_EINVAL;
    nrows = (long long)B * H * T;
    if (!(ro = ceas__rows_buf(rows, workspace, B, H, T, &own))) return CEAS_ENOMEM;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) reduction(| : bad) if(nrows > 4096)
#endif
    for (q = 0; q < nrows; q++) {
        const float *m = moments + (size_t)q * (size_t)stride;
        const double ib = 1.0 / (beta ? beta[(q / T) % H] : 1.0f);
        ceas_obs *o = ro + q;
        const float n = m[5];
        if (!ceas__finite(m[0]) || !ceas__finite(m[2]) || !ceas__finite(m[3]) ||
            !ceas__finite(m[4]) || !ceas__finite(n) || !(n >= 1.0f) || !(n < 9.0e15f)) {
            o->H = o->n_eff = o->var_s = o->sigma_qk = o->mean_s = o->log_n = (float)NAN;
            o->n = 0;
            bad = 1;
            continue;
        }
        o->H = m[0] > 0.0f ? m[0] : 0.0f;
        o->n_eff = expf(o->H);
        o->var_s = (float)((m[2] > 0.0f ? (double)m[2] : 0.0) * ib * ib);
        o->sigma_qk = (float)(sqrt(m[4] > 0.0f ? (double)m[4] : 0.0) * ib);
        o->mean_s = (float)((double)m[3] * ib);
        o->n = (long long)n;
        o->log_n = logf((float)o->n);
    }
    if (heads && ceas__pool_heads(heads, ro, B, H, T) != CEAS_OK) bad = 1;
    if (own) CEAS_FREE(own);
    return bad ? CEAS_EINVAL : CEAS_OK;
}

/* ------------------------------------------------------------------ beta */

CEASDEF float ceas_beta_init(int d_k) { return d_k > 0 ? (float)(1.0 / sqrt((double)d_k)) : 0.0f; }

CEASDEF float ceas_beta_to_temp(float beta, int d)
{
    if (d <= 0 || !ceas__finite(beta) || !(beta > 0)) return 0.0f;
    return (float)(1.0 / (sqrt((double)d) * beta));
}

CEASDEF int ceas_beta_star(float sigma_qk, float log_n_eff, float *beta_out)
{
    double b;
    if (!beta_out || !ceas__finite(sigma_qk) || !ceas__finite(log_n_eff) ||
        !(sigma_qk > 0) || !(log_n_eff > 0))
        return CEAS_EINVAL;
    b = sqrt(2.0 * log_n_eff) / sigma_qk;
    if (!ceas__finite((float)b) || !(b > 0)) return CEAS_EINVAL;
    *beta_out = (float)b;
    return CEAS_OK;
}

CEASDEF float ceas_kappa_at(const ceas_config *c, long long t)
{
    if (!c || !(c->tau_kappa > 0)) return 0.0f;
    if (t < 0) t = 0;
    return (float)(c->kappa_inf + (c->kappa_max - c->kappa_inf) * exp(-(double)t / c->tau_kappa));
}

CEASDEF float ceas_zeta(float u, float u_min, float nu)
{
    double m = fabs((double)u);
    if (!ceas__finite(u) || !ceas__finite(u_min) || !ceas__finite(nu)) return 0.0f;
    if (m < u_min) m = u_min;
    if (!(m > 0)) return (float)HUGE_VAL;
    return (float)pow(m, -(double)nu);
}

static float ceas__clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

CEASDEF int ceas_newton_update(const ceas_config *c, float beta, float H, float var_s,
                               float h_target, float kappa, float beta_c, float *beta_out)
{
    double step, b;
    if (!c || !beta_out) return CEAS_EINVAL;
    if (!ceas__finite(beta) || !ceas__finite(H) || !ceas__finite(var_s) ||
        !ceas__finite(h_target) || !ceas__finite(kappa) || !ceas__finite(beta_c) ||
        !(beta > 0) || var_s < 0 || kappa < 0 || beta_c < 0)
        return CEAS_EINVAL;
    if (!ceas__finite(c->eps) || !(c->eps > 0) || !ceas__finite(c->dbeta_max) ||
        !(c->dbeta_max > 0) || !ceas__finite(c->max_ratio) ||
        !(c->max_ratio == 0 || c->max_ratio > 1) || !ceas__finite(c->u_min) || c->u_min < 0 || !(c->u_min < 1) ||
        !ceas__finite(c->beta_min) || !ceas__finite(c->beta_max) || !(c->beta_min > 0) ||
        !(c->beta_min <= c->beta_max))
        return CEAS_EINVAL;
    step = (double)kappa * ((double)H - h_target) / ((double)beta * var_s + c->eps);
    if (step > c->dbeta_max) step = c->dbeta_max;
    if (step < -c->dbeta_max) step = -c->dbeta_max;
    b = (double)beta + step;
    if (c->max_ratio > 1) { /* trust region: beta moves by at most a factor */
        double lo = (double)beta / c->max_ratio, hi = (double)beta * c->max_ratio;
        b = b < lo ? lo : (b > hi ? hi : b);
    }
    if (beta_c > 0 && c->u_min > 0) {
        double lo = (double)beta_c * (1.0 - c->u_min), hi = (double)beta_c * (1.0 + c->u_min);
        if (b > lo && b < hi) {
            int up = beta > beta_c || (beta == beta_c && b >= beta_c);
            if (beta > lo && beta < hi) up = b >= beta_c; /* started inside: nearer edge */
            b = up ? hi : lo;
        }
    }
    if (!ceas__finite((float)b)) return CEAS_EINVAL;
    *beta_out = ceas__clampf((float)b, c->beta_min, c->beta_max);
    return CEAS_OK;
}

/* ------------------------------------------------------------ controller */

static size_t ceas__state_bytes(int LH)
{
    return (size_t)LH * (5 * sizeof(float) + sizeof(int) + 1);
}

static void ceas__carve(ceas_state *st, void *mem, int LH)
{
    char *p = (char *)mem;
    st->beta = (float *)p; p += (size_t)LH * sizeof(float);
    st->h_ema = (float *)p; p += (size_t)LH * sizeof(float);
    st->var_ema = (float *)p; p += (size_t)LH * sizeof(float);
    st->sigma_ema = (float *)p; p += (size_t)LH * sizeof(float);
    st->logn_ema = (float *)p; p += (size_t)LH * sizeof(float);
    st->below = (int *)p; p += (size_t)LH * sizeof(int);
    st->frozen = (unsigned char *)p;
    st->mem_ = mem;
}

CEASDEF int ceas_init(ceas_state *st, const ceas_config *cfg, int n_layers, int n_heads,
                      int d_k)
{
    ceas_config c = cfg ? *cfg : ceas_config_default();
    void *mem;
    int i, LH;
    if (!st || n_layers <= 0 || n_heads <= 0 || d_k <= 0) return CEAS_EINVAL;
    if (n_layers > (1 << 20) / n_heads) return CEAS_EINVAL;
    if (ceas_config_validate(&c) != CEAS_OK) return CEAS_EINVAL;
    LH = n_layers * n_heads;
    mem = CEAS_MALLOC(ceas__state_bytes(LH));
    if (!mem) return CEAS_ENOMEM;
    memset(st, 0, sizeof *st);
    memset(mem, 0, ceas__state_bytes(LH));
    st->cfg = c;
    st->n_layers = n_layers;
    st->n_heads = n_heads;
    st->d_k = d_k;
    ceas__carve(st, mem, LH);
    for (i = 0; i < LH; i++)
        st->beta[i] = ceas__clampf(ceas_beta_init(d_k), c.beta_min, c.beta_max);
    return CEAS_OK;
}

CEASDEF void ceas_free(ceas_state *st)
{
    if (!st) return;
    if (st->mem_) CEAS_FREE(st->mem_);
    memset(st, 0, sizeof *st);
}

static int ceas__head_obs_ok(const ceas_obs *o)
{
    return ceas__finite(o->H) && ceas__finite(o->var_s) && ceas__finite(o->sigma_qk) &&
           ceas__finite(o->log_n) && o->H >= 0 && o->var_s >= 0 && o->sigma_qk >= 0 &&
           o->log_n >= 0;
}

static int ceas__st_ok(const ceas_state *st)
{
    return st && st->mem_ && st->n_layers > 0 && st->n_heads > 0 &&
           st->n_layers <= (1 << 20) / st->n_heads;
}

CEASDEF int ceas_set_beta_star(ceas_state *st, const ceas_obs *heads)
{
    int i, LH;
    float *nb;
    if (!ceas__st_ok(st) || !heads) return CEAS_EINVAL;
    LH = st->n_layers * st->n_heads;
    for (i = 0; i < LH; i++) {
        float b;
        if (!ceas__head_obs_ok(heads + i) ||
            ceas_beta_star(heads[i].sigma_qk, st->cfg.target_drop, &b) != CEAS_OK)
            return CEAS_EINVAL;
    }
    nb = st->beta;
    for (i = 0; i < LH; i++) {
        float b = 0;
        ceas_beta_star(heads[i].sigma_qk, st->cfg.target_drop, &b);
        nb[i] = ceas__clampf(b, st->cfg.beta_min, st->cfg.beta_max);
    }
    return CEAS_OK;
}

CEASDEF float ceas_kappa(const ceas_state *st)
{
    float k;
    if (!ceas__st_ok(st)) return 0.0f;
    k = ceas_kappa_at(&st->cfg, st->step);
    if (st->backoff_left > 0) k *= st->cfg.backoff_kappa;
    return k;
}

CEASDEF float ceas_t_gate_at(const ceas_config *c, long long t)
{
    if (!c || !(c->tau_t > 0)) return 0.0f;
    if (t < 0) t = 0;
    return (float)(c->t_inf + (c->t_max - c->t_inf) * exp(-(double)t / c->tau_t));
}

CEASDEF float ceas_t_gate(const ceas_state *st)
{
    float g;
    if (!ceas__st_ok(st)) return 0.0f;
    g = ceas_t_gate_at(&st->cfg, st->step) + st->t_gate_offset;
    return g < 0 ? 0.0f : g;
}

CEASDEF float ceas_keep_q_at(const ceas_config *c, long long t)
{
    if (!c) return 1.0f;
    if (t < 0) t = 0;
    if (c->q_steps <= 0 || t >= c->q_steps) return c->q_final;
    return (float)(c->q_init + (c->q_final - c->q_init) * ((double)t / c->q_steps));
}

CEASDEF float ceas_h_target(const ceas_state *st, int layer, int head)
{
    float t;
    if (!ceas__st_ok(st) || layer < 0 || layer >= st->n_layers || head < 0 ||
        head >= st->n_heads)
        return 0.0f;
    t = st->logn_ema[layer * st->n_heads + head] - st->cfg.target_drop;
    return t < 0 ? 0.0f : t;
}

static float ceas__h_freeze(const ceas_state *st, int layer, int head)
{
    const float *he = st->h_ema + (size_t)layer * st->n_heads;
    if (st->cfg.freeze_ref == CEAS_FREEZE_UNIFORM)
        return st->logn_ema[layer * st->n_heads + head] - st->cfg.freeze_drop;
    else {
        double s = 0;
        int h;
        for (h = 0; h < st->n_heads; h++) s += he[h];
        return (float)(s / st->n_heads) - st->cfg.freeze_drop;
    }
}

CEASDEF float ceas_h_freeze(const ceas_state *st, int layer, int head)
{
    if (!ceas__st_ok(st) || layer < 0 || layer >= st->n_layers || head < 0 ||
        head >= st->n_heads)
        return 0.0f;
    return ceas__h_freeze(st, layer, head);
}

CEASDEF float ceas_beta_c(const ceas_state *st, int layer, int head)
{
    int i;
    double s, ln;
    if (!ceas__st_ok(st) || layer < 0 || layer >= st->n_layers || head < 0 ||
        head >= st->n_heads)
        return 0.0f;
    if (st->cfg.beta_c > 0) return st->cfg.beta_c;
    i = layer * st->n_heads + head;
    s = st->sigma_ema[i];
    ln = st->logn_ema[i];
    if (!(s > 0) || !(ln > 0) || st->n_obs == 0) return 0.0f;
    s = sqrt(2.0 * ln) / s;
    return ceas__finite((float)s) ? (float)s : 0.0f;
}

static float ceas__alpha(int w) { return w <= 1 ? 1.0f : 2.0f / (float)(w + 1); }

CEASDEF int ceas_step(ceas_state *st, const ceas_obs *heads)
{
    const ceas_config *c;
    int i, l, h, LH, H;
    float ah, as, kappa;
    if (!ceas__st_ok(st) || !heads) return CEAS_EINVAL;
    c = &st->cfg;
    H = st->n_heads;
    LH = st->n_layers * H;
    for (i = 0; i < LH; i++)
        if (!ceas__head_obs_ok(heads + i)) return CEAS_EINVAL;
    /* observables validated: from here on nothing can fail */
    ah = st->n_obs ? ceas__alpha(c->ema_h) : 1.0f;
    as = st->n_obs ? ceas__alpha(c->ema_sigma) : 1.0f;
    for (i = 0; i < LH; i++) {
        st->h_ema[i] += ah * (heads[i].H - st->h_ema[i]);
        st->var_ema[i] += ah * (heads[i].var_s - st->var_ema[i]);
        st->sigma_ema[i] += as * (heads[i].sigma_qk - st->sigma_ema[i]);
        st->logn_ema[i] += as * (heads[i].log_n - st->logn_ema[i]);
    }
    st->n_obs++;
    kappa = ceas_kappa(st);
    for (l = 0; l < st->n_layers; l++)
        for (h = 0; h < H; h++) {
            float nb;
            i = l * H + h;
            if (ceas_newton_update(c, st->beta[i], st->h_ema[i], st->var_ema[i],
                                   ceas_h_target(st, l, h), kappa, ceas_beta_c(st, l, h),
                                   &nb) == CEAS_OK)
                st->beta[i] = nb;
        }
    /* head freezing with the h_min floor */
    for (l = 0; l < st->n_layers; l++) {
        int active = 0, allowed;
        for (h = 0; h < H; h++) {
            i = l * H + h;
            if (st->h_ema[i] <= ceas__h_freeze(st, l, h)) {
                if (st->below[i] < 0x7fffffff) st->below[i]++;
            } else {
                st->below[i] = 0;
                st->frozen[i] = 0; /* exit: unfreeze */
            }
            active += !st->frozen[i];
        }
        allowed = active - c->h_min;
        while (allowed > 0) { /* freeze candidates, lowest entropy first */
            int best = -1;
            for (h = 0; h < H; h++) {
                i = l * H + h;
                if (st->frozen[i] || st->below[i] < c->freeze_window) continue;
                if (best < 0 || st->h_ema[i] < st->h_ema[l * H + best]) best = h;
            }
            if (best < 0) break;
            st->frozen[l * H + best] = 1;
            allowed--;
        }
        /* the floor also binds when h_min grew (a loaded config): unfreeze
           the highest-entropy frozen heads until it holds */
        while (active < c->h_min && active < H) {
            int best = -1;
            for (h = 0; h < H; h++) {
                i = l * H + h;
                if (!st->frozen[i]) continue;
                if (best < 0 || st->h_ema[i] > st->h_ema[l * H + best]) best = h;
            }
            if (best < 0) break;
            st->frozen[l * H + best] = 0;
            active++;
        }
    }
    st->step++;
    if (st->backoff_left > 0) st->backoff_left--;
    return CEAS_OK;
}

CEASDEF int ceas_report_val_loss(ceas_state *st, float loss, int *fired)
{
    const ceas_config *c;
    double a, prev, m, v;
    int f = 0;
    if (fired) *fired = 0;
    if (!ceas__st_ok(st) || !ceas__finite(loss)) return CEAS_EINVAL;
    c = &st->cfg;
    if (st->n_val == 0) {
        st->val_ema = loss;
        st->val_var = 0;
        st->n_val = 1;
        return CEAS_OK;
    }
    a = 2.0 / (c->val_window + 1.0);
    if (c->val_window <= 1) a = 1.0;
    prev = st->val_ema;
    m = prev + a * ((double)loss - prev);
    v = (1.0 - a) * (st->val_var + a * ((double)loss - prev) * ((double)loss - prev));
    if (st->n_val + 1 >= c->backoff_min_reports && m - prev > c->backoff_sigma * sqrt(st->val_var))
        f = 1;
    st->val_ema = m;
    st->val_var = v;
    st->n_val++;
    if (f) {
        st->t_gate_offset -= c->backoff_dt;
        st->backoff_left = c->backoff_steps;
        st->n_backoffs++;
    }
    if (fired) *fired = f;
    return CEAS_OK;
}

/* ---------------------------------------------------------------- gating */

CEASDEF float ceas_gate_score(float beta, float sigma_qk, float n_eff)
{
    double ln;
    if (!ceas__finite(beta) || !ceas__finite(sigma_qk) || !ceas__finite(n_eff) ||
        !(n_eff > 0))
        return 0.0f;
    ln = log((double)n_eff);
    if (ln < 0) ln = 0;
    return (float)((double)beta * sigma_qk * sqrt(2.0 * ln));
}

CEASDEF float ceas_gate_score_norm(float beta, float sigma_qk, float n_eff)
{
    double ln;
    if (!ceas__finite(beta) || !ceas__finite(sigma_qk) || !ceas__finite(n_eff) ||
        !(n_eff > 0))
        return 0.0f;
    ln = log((double)n_eff);
    if (ln < 1e-6) ln = 1e-6;
    return (float)((double)beta * sigma_qk / sqrt(2.0 * ln));
}

CEASDEF int ceas_gate_scores(float *score, const ceas_obs *rows, const float *beta, int B,
                             int H, int T)
{
    return ceas_gate_scores_mode(score, rows, beta, B, H, T, CEAS_GATE_NORMALISED);
}

CEASDEF int ceas_gate_scores_mode(float *score, const ceas_obs *rows, const float *beta,
                                  int B, int H, int T, int mode)
{
    long long n, r;
    int h;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (ceas__is_dev(rows)) return ceas_gate_scores_mode_cuda(score, rows, beta, B, H, T, mode, NULL);
#endif
    if (!score || !rows || B <= 0 || H <= 0 || T <= 0) return CEAS_EINVAL;
    if (mode != CEAS_GATE_NORMALISED && mode != CEAS_GATE_RAW) return CEAS_EINVAL;
    n = (long long)B * H * T;
    if (beta)
        for (h = 0; h < H; h++)
            if (!ceas__finite(beta[h]) || !(beta[h] > 0)) return CEAS_EINVAL;
    for (r = 0; r < n; r++) {
        const ceas_obs *o = rows + r;
        if (!ceas__finite(o->sigma_qk) || !ceas__finite(o->n_eff) || o->sigma_qk < 0 ||
            !(o->n_eff > 0))
            return CEAS_EINVAL;
    }
    for (r = 0; r < n; r++) {
        float bt = beta ? beta[(r / T) % H] : 1.0f;
        score[r] = mode == CEAS_GATE_RAW ? ceas_gate_score(bt, rows[r].sigma_qk, rows[r].n_eff)
                                         : ceas_gate_score_norm(bt, rows[r].sigma_qk, rows[r].n_eff);
    }
    return CEAS_OK;
}

typedef struct ceas__pair { float s; int i; } ceas__pair;

static int ceas__pair_cmp(const void *pa, const void *pb)
{
    const ceas__pair *a = (const ceas__pair *)pa, *b = (const ceas__pair *)pb;
    if (a->s > b->s) return -1;
    if (a->s < b->s) return 1;
    return (a->i > b->i) - (a->i < b->i);
}

CEASDEF size_t ceas_token_mask_workspace_size(int T)
{
    return T > 0 ? (size_t)T * sizeof(ceas__pair) : 0;
}

CEASDEF int ceas_token_mask(unsigned char *keep, const float *score, int B, int H, int T,
                            float t_gate, float q, int m_min, long long *n_kept,
                            void *workspace)
{
    long long n, r, kept = 0;
    ceas__pair *pr;
    void *own = NULL;
    int bh, k, i;
    if (!keep || !score || B <= 0 || H <= 0 || T <= 0 || !ceas__finite(t_gate) ||
        !ceas__finite(q) || q < 0 || q > 1 || m_min < 0)
        return CEAS_EINVAL;
    n = (long long)B * H * T;
    for (r = 0; r < n; r++)
        if (!ceas__finite(score[r])) return CEAS_EINVAL;
    if (workspace) pr = (ceas__pair *)workspace;
    else {
        own = CEAS_MALLOC(ceas_token_mask_workspace_size(T));
        if (!own) return CEAS_ENOMEM;
        pr = (ceas__pair *)own;
    }
    k = (int)ceil((double)q * T - 1e-4); /* 0.55f * 40 keeps 22 */
    if (k < (m_min < T ? m_min : T)) k = m_min < T ? m_min : T;
    if (k > T) k = T;
    for (bh = 0; bh < B * H; bh++) {
        const float *s = score + (size_t)bh * T;
        unsigned char *kp = keep + (size_t)bh * T;
        for (i = 0; i < T; i++) {
            pr[i].s = s[i];
            pr[i].i = i;
            kp[i] = s[i] >= t_gate;
        }
        qsort(pr, (size_t)T, sizeof *pr, ceas__pair_cmp);
        for (i = 0; i < k; i++) kp[pr[i].i] = 1;
        for (i = 0; i < T; i++) kept += kp[i];
    }
    if (own) CEAS_FREE(own);
    if (n_kept) *n_kept = kept;
    return CEAS_OK;
}

/* ------------------------------------------------------------- save/load */

#define CEAS__MAGIC 0x53414543u /* "CEAS" little-endian */
#define CEAS__FORMAT 1u

typedef struct ceas__wr { unsigned char *p; size_t n, cap; } ceas__wr;

static void ceas__put(ceas__wr *w, unsigned long long v, int bytes)
{
    int i;
    for (i = 0; i < bytes; i++) {
        if (w->p && w->n < w->cap) w->p[w->n] = (unsigned char)(v >> (8 * i));
        w->n++;
    }
}
static void ceas__put_f32(ceas__wr *w, float f)
{
    unsigned int u;
    memcpy(&u, &f, 4);
    ceas__put(w, u, 4);
}
static void ceas__put_f64(ceas__wr *w, double f)
{
    unsigned long long u;
    memcpy(&u, &f, 8);
    ceas__put(w, u, 8);
}

typedef struct ceas__rd { const unsigned char *p; size_t n, len; int bad; } ceas__rd;

static unsigned long long ceas__get(ceas__rd *r, int bytes)
{
    unsigned long long v = 0;
    int i;
    if (r->n > r->len || r->len - r->n < (size_t)bytes) { r->bad = 1; return 0; }
    for (i = 0; i < bytes; i++) v |= (unsigned long long)r->p[r->n + i] << (8 * i);
    r->n += (size_t)bytes;
    return v;
}
static float ceas__get_f32(ceas__rd *r)
{
    unsigned int u = (unsigned int)ceas__get(r, 4);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static double ceas__get_f64(ceas__rd *r)
{
    unsigned long long u = ceas__get(r, 8);
    double f;
    memcpy(&f, &u, 8);
    return f;
}

static unsigned long long ceas__fnv(const unsigned char *p, size_t n)
{
    unsigned long long h = 1469598103934665603ULL;
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 1099511628211ULL; }
    return h;
}

static void ceas__write(const ceas_state *st, ceas__wr *w)
{
    int i, LH = st->n_layers * st->n_heads;
    ceas__put(w, CEAS__MAGIC, 4);
    ceas__put(w, CEAS__FORMAT, 4);
    ceas__put(w, (unsigned)st->n_layers, 4);
    ceas__put(w, (unsigned)st->n_heads, 4);
    ceas__put(w, (unsigned)st->d_k, 4);
#define CEAS__WF(f) ceas__put_f32(w, st->cfg.f);
#define CEAS__WI(f) ceas__put(w, (unsigned)st->cfg.f, 4);
    CEAS__CFG_FLOATS(CEAS__WF)
    CEAS__CFG_INTS(CEAS__WI)
#undef CEAS__WF
#undef CEAS__WI
    ceas__put(w, (unsigned long long)st->step, 8);
    ceas__put(w, (unsigned long long)st->n_obs, 8);
    ceas__put_f32(w, st->t_gate_offset);
    ceas__put(w, (unsigned)st->backoff_left, 4);
    ceas__put(w, (unsigned)st->n_backoffs, 4);
    ceas__put(w, (unsigned long long)st->n_val, 8);
    ceas__put_f64(w, st->val_ema);
    ceas__put_f64(w, st->val_var);
    for (i = 0; i < LH; i++) ceas__put_f32(w, st->beta[i]);
    for (i = 0; i < LH; i++) ceas__put_f32(w, st->h_ema[i]);
    for (i = 0; i < LH; i++) ceas__put_f32(w, st->var_ema[i]);
    for (i = 0; i < LH; i++) ceas__put_f32(w, st->sigma_ema[i]);
    for (i = 0; i < LH; i++) ceas__put_f32(w, st->logn_ema[i]);
    for (i = 0; i < LH; i++) ceas__put(w, (unsigned)st->below[i], 4);
    for (i = 0; i < LH; i++) ceas__put(w, st->frozen[i], 1);
}

CEASDEF size_t ceas_state_size(const ceas_state *st)
{
    ceas__wr w;
    if (!ceas__st_ok(st)) return 0;
    w.p = NULL; w.n = 0; w.cap = 0;
    ceas__write(st, &w);
    return w.n + 8;
}

CEASDEF int ceas_state_save(const ceas_state *st, void *buf, size_t cap, size_t *written)
{
    ceas__wr w;
    size_t need;
    if (!ceas__st_ok(st) || !buf) return CEAS_EINVAL;
    need = ceas_state_size(st);
    if (cap < need) return CEAS_ERANGE;
    w.p = (unsigned char *)buf; w.n = 0; w.cap = cap;
    ceas__write(st, &w);
    ceas__put(&w, ceas__fnv((const unsigned char *)buf, w.n), 8);
    if (written) *written = w.n;
    return CEAS_OK;
}

CEASDEF int ceas_state_load(ceas_state *st, const void *buf, size_t len)
{
    ceas__rd r;
    ceas_state t;
    unsigned char *tmp;
    int i, LH;
    if (!ceas__st_ok(st) || !buf) return CEAS_EINVAL;
    LH = st->n_layers * st->n_heads;
    if (len != ceas_state_size(st)) return CEAS_EFORMAT;
    r.p = (const unsigned char *)buf; r.n = len - 8; r.len = len; r.bad = 0;
    if (ceas__fnv((const unsigned char *)buf, len - 8) != ceas__get(&r, 8))
        return CEAS_EFORMAT;
    tmp = (unsigned char *)CEAS_MALLOC(ceas__state_bytes(LH));
    if (!tmp) return CEAS_ENOMEM;
    memset(&t, 0, sizeof t);
    ceas__carve(&t, tmp, LH);
    r.p = (const unsigned char *)buf; r.n = 0; r.len = len - 8; r.bad = 0;
    if (ceas__get(&r, 4) != CEAS__MAGIC || ceas__get(&r, 4) != CEAS__FORMAT ||
        (int)ceas__get(&r, 4) != st->n_layers || (int)ceas__get(&r, 4) != st->n_heads)
        goto fail;
    t.n_layers = st->n_layers;
    t.n_heads = st->n_heads;
    t.d_k = (int)(unsigned)ceas__get(&r, 4);
#define CEAS__RF(f) t.cfg.f = ceas__get_f32(&r);
#define CEAS__RI(f) t.cfg.f = (int)(unsigned)ceas__get(&r, 4);
    CEAS__CFG_FLOATS(CEAS__RF)
    CEAS__CFG_INTS(CEAS__RI)
#undef CEAS__RF
#undef CEAS__RI
    t.step = (long long)ceas__get(&r, 8);
    t.n_obs = (long long)ceas__get(&r, 8);
    t.t_gate_offset = ceas__get_f32(&r);
    t.backoff_left = (int)(unsigned)ceas__get(&r, 4);
    t.n_backoffs = (int)(unsigned)ceas__get(&r, 4);
    t.n_val = (long long)ceas__get(&r, 8);
    t.val_ema = ceas__get_f64(&r);
    t.val_var = ceas__get_f64(&r);
    for (i = 0; i < LH; i++) t.beta[i] = ceas__get_f32(&r);
    for (i = 0; i < LH; i++) t.h_ema[i] = ceas__get_f32(&r);
    for (i = 0; i < LH; i++) t.var_ema[i] = ceas__get_f32(&r);
    for (i = 0; i < LH; i++) t.sigma_ema[i] = ceas__get_f32(&r);
    for (i = 0; i < LH; i++) t.logn_ema[i] = ceas__get_f32(&r);
    for (i = 0; i < LH; i++) t.below[i] = (int)(unsigned)ceas__get(&r, 4);
    for (i = 0; i < LH; i++) t.frozen[i] = (unsigned char)ceas__get(&r, 1);
    if (r.bad || r.n != r.len) goto fail;
    /* semantic validation */
    if (t.d_k <= 0 || ceas_config_validate(&t.cfg) != CEAS_OK || t.step < 0 || t.n_obs < 0 ||
        !ceas__finite(t.t_gate_offset) || t.t_gate_offset > 0 || t.backoff_left < 0 ||
        t.n_backoffs < 0 || t.n_val < 0 || !ceas__finite(t.val_ema) ||
        !ceas__finite(t.val_var) || t.val_var < 0)
        goto fail;
    for (i = 0; i < LH; i++)
        if (!ceas__finite(t.beta[i]) || !(t.beta[i] > 0) || !ceas__finite(t.h_ema[i]) ||
            !ceas__finite(t.var_ema[i]) || !ceas__finite(t.sigma_ema[i]) ||
            !ceas__finite(t.logn_ema[i]) || t.below[i] < 0 || t.frozen[i] > 1)
            goto fail;
    memcpy(st->mem_, tmp, ceas__state_bytes(LH));
    {
        void *keep = st->mem_;
        *st = t;
        ceas__carve(st, keep, LH);
    }
    CEAS_FREE(tmp);
    return CEAS_OK;
fail:
    CEAS_FREE(tmp);
    return CEAS_EFORMAT;
}

/* ------------------------------------------------------------ multi-knob */

CEASDEF ceas_knob_config ceas_knob_config_default(void)
{
    ceas_knob_config k;
    memset(&k, 0, sizeof k);
    k.rho_min = 0.02f; k.rho_max = 0.08f; k.kappa_lr = 10.0f;
    k.lr_min = 1e-7f; k.lr_max = 10.0f; k.max_factor = 2.0f;
    k.gns_target = 0.0f; k.kappa_batch = 0.5f; k.batch_min = 1.0f; k.batch_max = 65536.0f;
    k.wd_h_lo = 0.80f; k.wd_h_hi = 0.95f; k.kappa_wd = 0.01f; k.wd_min = 0.0f; k.wd_max = 1.0f;
    k.ls_h_early = 0.6f; k.ls_h_late = 0.3f; k.ls_tau = 2000.0f; k.ls_band = 0.05f;
    k.kappa_ls = 0.1f; k.ls_min = 0.0f; k.ls_max = 0.3f;
    return k;
}

CEASDEF int ceas_knob_config_validate(const ceas_knob_config *k)
{
    const float *f;
    size_t i, n = sizeof(ceas_knob_config) / sizeof(float);
    if (!k) return CEAS_EINVAL;
    f = (const float *)(const void *)k;
    for (i = 0; i < n; i++)
        if (!ceas__finite(f[i])) return CEAS_EINVAL;
    if (!(k->rho_min > 0) || !(k->rho_min <= k->rho_max) || k->kappa_lr < 0 ||
        !(k->lr_min > 0) || !(k->lr_min <= k->lr_max) || !(k->max_factor >= 1) ||
        k->gns_target < 0 || k->kappa_batch < 0 || !(k->batch_min > 0) ||
        !(k->batch_min <= k->batch_max) || !(k->wd_h_lo <= k->wd_h_hi) || k->kappa_wd < 0 ||
        k->wd_min < 0 || !(k->wd_min <= k->wd_max) || !(k->ls_tau > 0) || k->ls_band < 0 ||
        k->kappa_ls < 0 || k->ls_min < 0 || !(k->ls_min <= k->ls_max) || k->ls_max > 1)
        return CEAS_EINVAL;
    return CEAS_OK;
}

static double ceas__cap(double lf, double max_factor)
{
    double m = log(max_factor);
    return lf > m ? m : (lf < -m ? -m : lf);
}

CEASDEF int ceas_lr_update(const ceas_knob_config *k, float lr, float lambda_max, float *lr_out)
{
    double rho, target, nl;
    if (!lr_out || ceas_knob_config_validate(k) != CEAS_OK || !ceas__finite(lr) ||
        !(lr > 0) || !ceas__finite(lambda_max) || lambda_max < 0)
        return CEAS_EINVAL;
    rho = (double)lr * lambda_max;
    nl = lr;
    if (rho < k->rho_min || rho > k->rho_max) {
        target = 0.5 * ((double)k->rho_min + k->rho_max);
        nl = lr * exp(ceas__cap(k->kappa_lr * (target - rho), k->max_factor));
    }
    if (!ceas__finite((float)nl)) return CEAS_EINVAL;
    *lr_out = ceas__clampf((float)nl, k->lr_min, k->lr_max);
    return CEAS_OK;
}

CEASDEF int ceas_gns(float sqnorm_small, float sqnorm_big, float b_small, float b_big,
                     float *gns_out)
{
    double g2, tr;
    if (!gns_out || !ceas__finite(sqnorm_small) || !ceas__finite(sqnorm_big) ||
        !ceas__finite(b_small) || !ceas__finite(b_big) || sqnorm_small < 0 ||
        sqnorm_big < 0 || !(b_small > 0) || !(b_big > b_small))
        return CEAS_EINVAL;
    g2 = ((double)b_big * sqnorm_big - (double)b_small * sqnorm_small) / ((double)b_big - b_small);
    tr = ((double)sqnorm_small - sqnorm_big) / (1.0 / b_small - 1.0 / b_big);
    if (!(g2 > 0) || tr < 0) return CEAS_ERANGE; /* too noisy to estimate this time */
    if (!ceas__finite((float)(tr / g2))) return CEAS_ERANGE;
    *gns_out = (float)(tr / g2);
    return CEAS_OK;
}

CEASDEF int ceas_batch_update(const ceas_knob_config *k, float batch, float gns,
                              float *batch_out)
{
    double target, nb;
    if (!batch_out || ceas_knob_config_validate(k) != CEAS_OK || !ceas__finite(batch) ||
        !(batch > 0) || !ceas__finite(gns) || gns < 0)
        return CEAS_EINVAL;
    target = k->gns_target > 0 ? k->gns_target : batch;
    nb = batch * exp(ceas__cap(k->kappa_batch * (gns / target - 1.0), k->max_factor));
    if (!ceas__finite((float)nb)) return CEAS_EINVAL;
    *batch_out = ceas__clampf((float)nb, k->batch_min, k->batch_max);
    return CEAS_OK;
}

CEASDEF int ceas_param_entropy(const float *w, long long n, float *H, float *H_norm)
{
    double s = 0, t = 0, h;
    long long i;
    if (!w || n <= 0 || (!H && !H_norm)) return CEAS_EINVAL;
    for (i = 0; i < n; i++) {
        double v = (double)w[i] * w[i];
        if (!ceas__finite(w[i])) return CEAS_EINVAL;
        s += v;
        if (v > 0) t += v * log(v);
    }
    if (!(s > 0)) return CEAS_EINVAL;
    h = log(s) - t / s;
    if (h < 0) h = 0;
    if (H) *H = (float)h;
    if (H_norm) *H_norm = n > 1 ? (float)(h / log((double)n)) : 0.0f;
    return CEAS_OK;
}

CEASDEF int ceas_wd_update(const ceas_knob_config *k, float wd, float h_param, float *wd_out)
{
    double nw = wd;
    if (!wd_out || ceas_knob_config_validate(k) != CEAS_OK || !ceas__finite(wd) || wd < 0 ||
        !ceas__finite(h_param))
        return CEAS_EINVAL;
    if (h_param < k->wd_h_lo || h_param > k->wd_h_hi)
        nw = wd + k->kappa_wd * (0.5 * ((double)k->wd_h_lo + k->wd_h_hi) - h_param);
    *wd_out = ceas__clampf((float)nw, k->wd_min, k->wd_max);
    return CEAS_OK;
}

CEASDEF int ceas_logit_entropy(const float *logits, int R, int V, float *h_norm)
{
    double s = 0;
    float *hr;
    int r, bad = 0;
    if (!logits || R <= 0 || V <= 1 || !h_norm) return CEAS_EINVAL;
    hr = (float *)CEAS_MALLOC((size_t)R * sizeof(float));
    if (!hr) return CEAS_ENOMEM;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) reduction(| : bad)
#endif
    for (r = 0; r < R; r++) {
        ceas_obs o;
        bad |= ceas__row_obs(&o, logits + (size_t)r * V, V, 1.0f) != CEAS_OK;
        hr[r] = o.H;
    }
    for (r = 0; r < R; r++) s += hr[r]; /* fixed summation order */
    CEAS_FREE(hr);
    if (bad) return CEAS_EINVAL;
    *h_norm = (float)(s / R / log((double)V));
    return CEAS_OK;
}

CEASDEF float ceas_ls_target_at(const ceas_knob_config *k, long long t)
{
    if (!k || !(k->ls_tau > 0)) return 0.0f;
    if (t < 0) t = 0;
    return (float)(k->ls_h_late + (k->ls_h_early - k->ls_h_late) * exp(-(double)t / k->ls_tau));
}

CEASDEF int ceas_ls_update(const ceas_knob_config *k, long long t, float p, float h_logit,
                           float *p_out)
{
    double target, np = p;
    if (!p_out || ceas_knob_config_validate(k) != CEAS_OK || !ceas__finite(p) || p < 0 ||
        p > 1 || !ceas__finite(h_logit))
        return CEAS_EINVAL;
    target = ceas_ls_target_at(k, t);
    if (h_logit < target - k->ls_band || h_logit > target + k->ls_band)
        np = p + k->kappa_ls * (target - h_logit);
    *p_out = ceas__clampf((float)np, k->ls_min, k->ls_max);
    return CEAS_OK;
}

/* ------------------------------------------------- MaxEnt (seed 004 section 6) */

CEASDEF ceas_init_config ceas_init_config_default(void)
{
    ceas_init_config c;
    memset(&c, 0, sizeof c);
    c.mode = CEAS_GATE_NORMALISED;
    c.t_lo = 0.9f;
    c.t_hi = 1.1f;
    c.t_star = 1.0f;
    c.log_n_eff = 1.1f;
    c.var_lo = 0.01f;
    c.var_hi = 100.0f;
    c.kurt_max = 1.0f;
    c.u_min = 0.05f;
    return c;
}

CEASDEF int ceas_init_config_validate(const ceas_init_config *c)
{
    if (!c) return CEAS_EINVAL;
    if (c->mode != CEAS_GATE_NORMALISED && c->mode != CEAS_GATE_RAW) return CEAS_EINVAL;
    if (!ceas__finite(c->t_lo) || !ceas__finite(c->t_hi) || !ceas__finite(c->t_star) ||
        !ceas__finite(c->log_n_eff) || !ceas__finite(c->var_lo) || !ceas__finite(c->var_hi) ||
        !ceas__finite(c->kurt_max) || !ceas__finite(c->u_min))
        return CEAS_EINVAL;
    if (!(c->t_lo > 0) || !(c->t_lo <= c->t_star) || !(c->t_star <= c->t_hi) ||
        !(c->log_n_eff > 0) || !(c->var_lo > 0) || !(c->var_lo <= c->var_hi) ||
        !(c->kurt_max >= 0) || !(c->u_min >= 0) || !(c->u_min < 1))
        return CEAS_EINVAL;
    return CEAS_OK;
}

/* x = beta sigma_qk that gives the gate score t (both readings are linear in x) */
static double ceas__init_x_of_t(const ceas_init_config *c, double t)
{
    double r = sqrt(2.0 * (double)c->log_n_eff);
    return c->mode == CEAS_GATE_RAW ? t / r : t * r;
}

static double ceas__init_t_of_x(const ceas_init_config *c, double x)
{
    double r = sqrt(2.0 * (double)c->log_n_eff);
    return c->mode == CEAS_GATE_RAW ? x * r : x / r;
}

static int ceas__init_layer_ok(const ceas_init_layer *l)
{
    return l->d_model > 0 && l->d_k > 0 && l->n_keys > 0 && ceas__finite(l->beta) &&
           l->beta >= 0 && ceas__finite(l->var_x) && l->var_x > 0 && ceas__finite(l->kurt_x) &&
           l->kurt_x >= -2 && ceas__finite(l->kurt_w) && l->kurt_w >= -2;
}

CEASDEF int ceas_init_scales(const ceas_init_config *c, const ceas_init_layer *layers, int L,
                             ceas_init_scale *out, int *n_met)
{
    int l, met = 0;
    if (ceas_init_config_validate(c) != CEAS_OK || !layers || !out || L <= 0)
        return CEAS_EINVAL;
    for (l = 0; l < L; l++)
        if (!ceas__init_layer_ok(&layers[l])) return CEAS_EINVAL;
    for (l = 0; l < L; l++) { /* every value below is finite for valid input */
        const ceas_init_layer *ly = &layers[l];
        ceas_init_scale r;
        double beta = ly->beta > 0 ? ly->beta : 1.0 / sqrt((double)ly->d_k);
        double g = beta * sqrt((double)ly->d_k); /* x = g var_q */
        double lo = ceas__init_x_of_t(c, c->t_lo), hi = ceas__init_x_of_t(c, c->t_hi);
        double xs = ceas__init_x_of_t(c, c->t_star), x;
        double x_vlo = g * c->var_lo, x_vhi = g * c->var_hi;
        double x_marg = (1.0 - c->u_min) * sqrt(2.0 * log((double)ly->n_keys));
        double eq, vq;
        memset(&r, 0, sizeof r);
        /* kurtosis: a product of independent zero-mean factors with excess a, b has excess
           (3+a)(3+b)-3; a sum of n independent such terms divides it by n */
        eq = ((3.0 + ly->kurt_w) * (3.0 + ly->kurt_x) - 3.0) / ly->d_model;
        r.kurt_s = (float)(((3.0 + eq) * (3.0 + eq) - 3.0) / ly->d_k);
        /* the feasible x: the band, the variance bounds and the margin */
        if (hi < x_vlo) r.flags |= CEAS_INIT_VAR_LOW;
        if (lo > x_vhi) r.flags |= CEAS_INIT_VAR_HIGH;
        if (lo > x_marg) r.flags |= CEAS_INIT_MARGIN;
        if (lo < x_vlo) lo = x_vlo;
        if (hi > x_vhi) hi = x_vhi;
        if (hi > x_marg) hi = x_marg;
        /* each bound leaves part of the band, yet none is left: with var_lo <= var_hi and
           the band against each bound checked, only var_lo against the margin remains */
        if (!(lo <= hi) && !(r.flags & (CEAS_INIT_VAR_LOW | CEAS_INIT_VAR_HIGH | CEAS_INIT_MARGIN)))
            r.flags |= CEAS_INIT_MARGIN | CEAS_INIT_VAR_LOW;
        if (r.kurt_s > c->kurt_max) r.flags |= CEAS_INIT_KURT;
        x = xs;
        if (lo <= hi) x = xs < lo ? lo : (xs > hi ? hi : xs); /* nearest kept point of the band */
        /* variance propagation: Var(q_i) = d_model sigma_q^2 var_x, same for k;
           sigma_qk^2 = d_k Var(q_i) Var(k_i); symmetric split Var(q_i) = Var(k_i) */
        vq = x / g;
        r.var_q = (float)vq;
        r.sigma_q = r.sigma_k = (float)sqrt(vq / ((double)ly->d_model * ly->var_x));
        r.sigma_qk = (float)(sqrt((double)ly->d_k) * vq);
        r.x = (float)x;
        r.T = (float)ceas__init_t_of_x(c, x);
        r.met = r.flags == 0;
        met += r.met;
        out[l] = r;
    }
    if (n_met) *n_met = met;
    return CEAS_OK;
}

CEASDEF ceas_select_config ceas_select_config_default(void)
{
    ceas_select_config c;
    memset(&c, 0, sizeof c);
    c.lambda = 0.1;
    c.budget = 0;
    c.temp = 0.05;
    c.tie_tol = 1e-9;
    c.tile = 16;
    return c;
}

CEASDEF int ceas_select_config_validate(const ceas_select_config *c)
{
    if (!c || !ceas__finite(c->lambda) || !ceas__finite(c->budget) || !ceas__finite(c->temp) ||
        !ceas__finite(c->tie_tol) || !(c->lambda >= 0) || !(c->budget >= 0) ||
        !(c->temp > 0) || !(c->tie_tol >= 0) || c->tile < 0)
        return CEAS_EINVAL;
    return CEAS_OK;
}

CEASDEF int ceas_corridor_utility(const ceas_obs *heads, int n, float drop_lo, float drop_hi,
                                  float width, float *u)
{
    double s = 0;
    int i;
    if (!heads || n <= 0 || !u || !ceas__finite(drop_lo) || !ceas__finite(drop_hi) ||
        !ceas__finite(width) || !(drop_lo >= 0) || !(drop_lo <= drop_hi) || !(width > 0))
        return CEAS_EINVAL;
    for (i = 0; i < n; i++)
        if (!ceas__finite(heads[i].H) || !ceas__finite(heads[i].log_n) || heads[i].log_n < 0)
            return CEAS_EINVAL;
    for (i = 0; i < n; i++) {
        double lo = (double)heads[i].log_n - drop_hi, hi = (double)heads[i].log_n - drop_lo;
        double h = heads[i].H, d = h < lo ? lo - h : (h > hi ? h - hi : 0.0);
        s += exp(-d * d / (2.0 * (double)width * width));
    }
    *u = (float)(s / n);
    return CEAS_OK;
}

CEASDEF int ceas_early_neff_utility(const ceas_obs *heads, int n, float *u)
{
    double s = 0;
    int i;
    if (!heads || n <= 0 || !u) return CEAS_EINVAL;
    for (i = 0; i < n; i++)
        if (!ceas__finite(heads[i].H) || !ceas__finite(heads[i].log_n) || heads[i].log_n < 0 ||
            heads[i].H < 0)
            return CEAS_EINVAL;
    for (i = 0; i < n; i++) s += heads[i].log_n > 0 ? (double)heads[i].H / heads[i].log_n : 1.0;
    *u = (float)(s / n);
    return CEAS_OK;
}

static int ceas__arch_fits(const ceas_select_config *c, const ceas_arch *a)
{
    if (c->budget > 0 && a->cost > c->budget) return 0;
    if (c->tile > 1 && (a->d_k % c->tile || a->d_ff % c->tile || a->d_model % c->tile)) return 0;
    return 1;
}

CEASDEF int ceas_maxent_select(const ceas_select_config *c, const ceas_arch *cand, int n,
                               double *score, double *weight, unsigned char *feasible,
                               int *selected)
{
    double c_min = 0, j_max = 0, z = 0;
    int i, best = -1;
    if (ceas_select_config_validate(c) != CEAS_OK || !cand || n <= 0 || !selected)
        return CEAS_EINVAL;
    for (i = 0; i < n; i++) {
        const ceas_arch *a = &cand[i];
        if (a->n_heads <= 0 || a->d_k <= 0 || a->d_ff <= 0 || a->d_model <= 0 ||
            a->pos < CEAS_POS_ANY || a->pos > CEAS_POS_LOCAL || !ceas__finite(a->cost) ||
            !(a->cost > 0) || !ceas__finite(a->utility))
            return CEAS_EINVAL;
    }
    for (i = 0; i < n; i++)
        if (ceas__arch_fits(c, &cand[i]) && (c_min == 0 || cand[i].cost < c_min))
            c_min = cand[i].cost;
    if (c_min == 0) return CEAS_ERANGE; /* nothing feasible */
    for (i = 0; i < n; i++) { /* J_max over the feasible ones (at least one) */
        double j = cand[i].utility - c->lambda * (cand[i].cost / c_min);
        if (!ceas__finite(j)) return CEAS_EINVAL;
        if (ceas__arch_fits(c, &cand[i]) && (best < 0 || j > j_max)) {
            j_max = j;
            best = i;
        }
    }
    /* the selection: the best score; a tie (within tie_tol) goes to the lower cost, then
       the lower index */
    best = -1;
    for (i = 0; i < n; i++) {
        double j = cand[i].utility - c->lambda * (cand[i].cost / c_min);
        if (!ceas__arch_fits(c, &cand[i]) || j < j_max - c->tie_tol) continue;
        if (best < 0 || cand[i].cost < cand[best].cost) best = i;
    }
    for (i = 0; i < n; i++)
        if (ceas__arch_fits(c, &cand[i]))
            z += exp((cand[i].utility - c->lambda * (cand[i].cost / c_min) - j_max) / c->temp);
    for (i = 0; i < n; i++) {
        double j = cand[i].utility - c->lambda * (cand[i].cost / c_min);
        int f = ceas__arch_fits(c, &cand[i]);
        if (score) score[i] = j;
        if (weight) weight[i] = f ? exp((j - j_max) / c->temp) / z : 0.0;
        if (feasible) feasible[i] = (unsigned char)f;
    }
    *selected = best;
    return CEAS_OK;
}

CEASDEF ceas_pi_config ceas_pi_config_default(void)
{
    ceas_pi_config c;
    memset(&c, 0, sizeof c);
    c.h_lo = 0.6f;
    c.h_hi = 0.9f;
    c.kp = 0.5f;
    c.ki = 0.05f;
    c.i_max = 10.0f;
    c.p_min = 1e-3f;
    c.p_max = 1e3f;
    c.direction = 1;
    return c;
}

CEASDEF int ceas_pi_config_validate(const ceas_pi_config *c)
{
    if (!c || !ceas__finite(c->h_lo) || !ceas__finite(c->h_hi) || !ceas__finite(c->kp) ||
        !ceas__finite(c->ki) || !ceas__finite(c->i_max) || !ceas__finite(c->p_min) ||
        !ceas__finite(c->p_max) || !(c->h_lo <= c->h_hi) || !(c->kp >= 0) || !(c->ki >= 0) ||
        !(c->i_max > 0) || !(c->p_min <= c->p_max) || (c->direction != 1 && c->direction != -1))
        return CEAS_EINVAL;
    return CEAS_OK;
}

CEASDEF int ceas_pi_update(const ceas_pi_config *c, float p, float h, float *integral,
                           float *p_out)
{
    double e, I, np;
    if (ceas_pi_config_validate(c) != CEAS_OK || !integral || !p_out || !ceas__finite(p) ||
        !ceas__finite(h) || !ceas__finite(*integral))
        return CEAS_EINVAL;
    e = h < c->h_lo ? (double)c->h_lo - h : (h > c->h_hi ? (double)c->h_hi - h : 0.0);
    I = *integral + e;
    if (I > c->i_max) I = c->i_max;
    if (I < -c->i_max) I = -c->i_max;
    np = p + c->direction * (c->kp * e + c->ki * I);
    if (!ceas__finite(np)) return CEAS_EINVAL;
    *integral = (float)I;
    *p_out = ceas__clampf((float)np, c->p_min, c->p_max);
    return CEAS_OK;
}

CEASDEF int ceas_norm_eps(const float *var, long long n, float rel, float eps_floor, float *eps,
                          float *bias)
{
    double vmin = 0, e;
    long long i;
    if (!var || n <= 0 || !eps || !ceas__finite(rel) || !(rel > 0) || !ceas__finite(eps_floor) ||
        !(eps_floor > 0))
        return CEAS_EINVAL;
    for (i = 0; i < n; i++) {
        if (!ceas__finite(var[i]) || var[i] < 0) return CEAS_EINVAL;
        if (var[i] > 0 && (vmin == 0 || var[i] < vmin)) vmin = var[i];
    }
    if (vmin == 0) return CEAS_EINVAL; /* every row constant: nothing to scale against */
    e = rel * vmin;
    if (e < eps_floor) e = eps_floor;
    if (!ceas__finite((float)e)) return CEAS_EINVAL;
    *eps = (float)e;
    if (bias) *bias = (float)(1.0 - sqrt(vmin / (vmin + e)));
    return CEAS_OK;
}

CEASDEF int ceas_spectral_cap(float sigma_max, float cap, float *scale, int *over)
{
    int o;
    if (!scale || !ceas__finite(sigma_max) || sigma_max < 0 || !ceas__finite(cap) || !(cap > 0))
        return CEAS_EINVAL;
    o = sigma_max > cap;
    *scale = o ? (float)((double)cap / sigma_max) : 1.0f;
    if (over) *over = o;
    return CEAS_OK;
}

/* ------------------------------------------------------------------ CUDA */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
#include "cuda/ceas.cuh"
#else
CEASDEF int ceas_cuda_available(void) { return 0; }
/* the calls of the list CEAS__CUDA_API (declared above): CEAS_ENOCUDA, a workspace size
   0; the parameters go unused */
#define CEAS__NOCUDA_int CEAS_ENOCUDA
#define CEAS__NOCUDA_size_t 0
#define CEAS__CUDA_STUB(ret, name, params) CEASDEF ret name params { return CEAS__NOCUDA_##ret; }
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
CEAS__CUDA_API(CEAS__CUDA_STUB)
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef CEAS__CUDA_STUB
#undef CEAS__NOCUDA_int
#undef CEAS__NOCUDA_size_t
#endif /* CUDA */

#ifdef CEAS__PUSHED_NO_TRAPPING
#pragma GCC pop_options
#undef CEAS__PUSHED_NO_TRAPPING
#endif
#endif /* CEAS_IMPLEMENTATION_DONE */
#endif /* CEAS_IMPLEMENTATION */

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
FOR ANY CLAIM, DAMAGE OR CONSEQUENCE ARISING FROM, OUT OF OR IN CONNECTION WITH THE
SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
*/
