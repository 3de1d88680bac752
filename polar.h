/* polar.h - Polar Attention: a length-invariant replacement for softmax attention,
   split into a unit-norm direction channel c and a bounded magnitude channel mag.
   v0.1 - MIT license (see the end of the file).

   Implements seed 002 ("ATMA", section 3.2, eqs. 5-15; kernels of section 5.4.1-5.4.2;
   algorithms of Appendix B) on the CPU, in fp32:

     sigma_ij = q_i . k_j / sqrt(D)                 keys j visible to query i (causal,
                                                     optionally a sliding window W)
     n_i      = i + 1   (or min(i + 1, W))          number of visible keys
     temp_i   = 1 + softplus(len_gain_raw) * log(n_i)
     null_i   = null_base + softplus(null_slope_raw) * sqrt(log(n_i + 1))
     w        = softmax([temp_i * sigma_i., temp_i * null_i])   (last entry: the null sink)
     s_i      = sum_j w_ij v_j + w_iN v_null
     c_i      = s_i / max(|s_i|, norm_eps)                           direction ("what")
     n_eff    = (sum_j w_ij)^2 / sum_j w_ij^2     participation ratio over the real keys
     m_eff    = n_eff * (1 - w_iN)
     mag_i    = tanh(softplus(mag_beta_raw) * log(1 + m_eff))  in [0, 1)   ("how much")

   Two paths compute exactly this:
     polar_forward_ref / polar_backward_ref   materialised (T x T+1 weights): the oracle.
     polar_forward / polar_backward           streaming, FlashAttention-2 style: key blocks
        with a running max M, L = sum p, Q2 = sum p^2 (rescaled by alpha^2 when M moves) and
        S = sum p v; the null logit folded in last; n_eff = L^2 / Q2. The backward recomputes
        scores block by block from the saved per-row (M, L, Q2, |s|): when the B*Hkv
        (batch, kv head) groups fill the threads, one pass per group, key blocks outer,
        each score tile computed once for dq, dk and dv; otherwise one pass over query
        blocks (dq, temperature/null grads) and one over key blocks (dk, dv). The two
        schedules give the same bits. Memory O(block) per thread (plus a group's dq
        accumulator, G*T*D doubles with D padded to 32, in the one-pass schedule) and
        O(B*H*T*(D+10)) row buffers, never O(T^2).
   Also: polar_decode (one new token per sequence over a paged, GQA-grouped KV cache),
   polar_assemble_forward/backward (eq. 14 output assembly) and the distractor alignment
   loss polar_distractor_forward/backward (eq. 15, off by default).
   CUDA (cuda/polar.cuh, compiled when this implementation is compiled by nvcc):
   polar_forward_cuda / polar_backward_cuda / polar_decode_cuda, the same maths as the
   streaming path in fp32 SIMT kernels (device pointers, a stream; D 32/64/96/128;
   deterministic, no atomics), and with cfg.math = POLAR_MATH_BF16 / POLAR_MATH_TF32 a
   tensor-core forward and backward (WMMA, fp32 accumulation and statistics; sm_80+);
   under nvcc the plain calls route device pointers there. Without nvcc they return
   POLAR_ENOCUDA. The tensor-core paths have run only in the CPU simulation so far.

   Backward maths (per query row, p_j = exp(temp*sigma_j - M), L = sum p_j, Q2 = sum p_j^2,
   Z = L + p_N): the outputs are invariant to a common scale of (p, p_N), so the logit
   gradients sum to zero and no softmax row-sum term is needed:
     ds   = (I - c c^T) dc / |s|                   (dc / norm_eps when |s| < norm_eps)
     m_eff = L^3 / (Q2 Z),  K = dmag * (1 - mag^2) * softplus(beta) / (1 + m_eff) * m_eff
     g_j  = p_j/Z (ds.v_j - ds.s) + K (3 p_j/L - 2 p_j^2/Q2 - p_j/Z)      (real key j)
     g_N  = p_N/Z (ds.v_null - ds.s - K)                                  (null sink)
   then sigma_j gets temp*g_j, temp gets sum_j g_j sigma_j + g_N null, null gets temp*g_N.
   Where the sink holds at least half the weight, g_N is taken as -sum_j g_j instead
   (= -sum_j p_j ds.v_j / Z + ds.s L/Z - K p_N/Z): the form above cancels to O(1 - w_N)
   there, since s -> v_null and s is known only to float rounding, and lost all precision
   as the real keys' share fell towards 1e-7 (seed 002's regime: ~4e-6 with the paper's
   initial values at 64K keys).

   ACCURACY (tests/test_polar.c and tests/parity_polar.cu, against tests/polar_ref64.h: the
   paper's equations in long double, backward by the chain rule): materialised, streaming
   (both backward schedules) and the CUDA fp32 kernels, in the regimes null-dominated
   (1 - w_N from 1e-2 to 1e-8, and the paper's initial values at 64K keys, synthesised),
   one-hot and uniform rows, a window of 1, GQA groups of 1 and 8, T = 2048 (300 in the
   simulation): worst max|err| / max|ref| per tensor 1.8e-6 (c, mag), 2.2e-6 (dq, dk,
   dv, v_null), 1.9e-5 (the per-head scalar gradients, d len_gain_raw on one-hot rows);
   before the -sum_j g_j form, d len_gain_raw was off by 1.2e-3 / 1.3e-2 / 1.2e-2 / 1.8 at
   1 - w_N = 1e-5 / 1e-6 / 3e-7 / 1e-8. Tensor cores (bf16 / tf32) against the reference
   on their rounded inputs, null-dominated and 64K regimes: within 8.1e-3 / 3.9e-4 (the
   per-head scalars against the sum of their row terms' magnitudes, as in parity_polar).

   USAGE
     In exactly one C or C++ file:
        #define POLAR_IMPLEMENTATION
        #include "polar.h"
     Example (B=1, H=Hkv=1, T=4, D=2):

        polar_config cfg = polar_config_default();
        float lg[1], nb[1], ns[1], mb[1], vn[2];
        float q[8] = {1, 0, 0, 1, 1, 1, 0, 1}, k[8] = {1, 0, 1, 0, 0, 1, 1, 1};
        float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, c[8], mag[4], stats[4 * POLAR_NSTAT];
        polar_params prm;
        polar_state st;
        int rc;
        polar_params_init(&cfg, 1, 2, lg, nb, ns, mb, vn);   // the paper's initial values
        prm.len_gain_raw = lg; prm.null_base = nb; prm.null_slope_raw = ns;
        prm.mag_beta_raw = mb; prm.v_null = vn;
        st.stats = stats; st.probs = NULL;
        rc = polar_forward(&cfg, c, mag, &st, q, k, v, &prm, 1, 1, 1, 4, 2, NULL);
        if (rc != POLAR_OK) fprintf(stderr, "%s\n", polar_strerror(rc));

   COMPILE-TIME OPTIONS
     POLAR_STATIC             all functions static
     POLAR_MALLOC/POLAR_FREE  allocator (define both or neither)
     POLAR_ASSERT             internal-invariant assert (never used on user input)
     POLAR_NO_SIMD            plain-C tile products even where AVX-512 is enabled (the
                              default there is an FMA micro-kernel; the two agree to
                              float rounding)
     POLAR_NO_VEXP            libm expf in the tiles instead of the vectorised polynomial
     -fopenmp                 parallel over (batch, head, query block) / (batch, kv head,
                              key block), or (batch, kv head) groups in the one-pass
                              backward; bit-identical results run to run and for any
                              thread count (static schedules, fixed-order reductions).

   CONFIG (polar_config, from polar_config_default())
     window              -1   POLAR_NO_WINDOW: full causal; W >= 1: sliding window of W
                              keys (n_i = min(i+1, W)); 0 and < -1 are invalid
     block_q, block_k    64   streaming tile sizes (1..4096)
     num_threads          0   0: omp_get_max_threads() (1 without OpenMP)
     norm_eps          1e-6   floor on |s| in c = s / max(|s|, eps)
     stat_floor       1e-30   floor on Q2 and Z (a tiny floor keeps the scale invariance)
     init_len_gain_raw   -1.0   paper initial values, used by polar_params_init
     init_null_base       2.0
     init_null_slope_raw  0.5
     init_mag_beta_raw   -1.5   (v_null starts at 0)
     distractor_keys      0   R random keys for the alignment loss; 0 = off
     distractor_weight 0.01   weight of the alignment loss
     distractor_mode      0   POLAR_DISTRACTOR_MEAN: weight * the mean over (b, h, i, r)
                              of the random keys' weight, temperature and null floor at
                              n_i = min(i+1, W), dk_rand's gradient written;
                              POLAR_DISTRACTOR_SEED: as seed 002's released training code
                              (train/model.py): the random keys' weights summed over r and
                              averaged over (b, h, i) (R times the mean), n_i = i + 1 even
                              under a window, and the random keys detached (dk_rand is
                              never written; it may be NULL). For reproducing the authors'
                              runs; the equations are the same.
     math                 0   the CUDA path's arithmetic (the CPU path is always fp32):
                              POLAR_MATH_FP32 SIMT fp32, within 1e-5 (forward) / 1e-4
                              (gradients) of the CPU; POLAR_MATH_TF32 / POLAR_MATH_BF16
                              tensor cores for the forward and backward (inputs rounded
                              to tf32 / bf16, fp32 accumulation and statistics), within
                              2e-2 of the CPU as max|err| / max|ref| per tensor (the
                              per-head scalar gradients: 2e-2 of the sum of their terms'
                              magnitudes; details at the top of cuda/polar.cuh); the
                              decode runs fp32 in every mode (memory-bound)

   INITIALISATION (drop-in use)
     With GPT-2-style weights (N(0, 0.02)) q.k/sqrt(D) starts near 0, so each of the n
     visible keys has weight ~1 against exp(temp*null) for the sink:
       sink share w_N = e^(temp*null) / (e^(temp*null) + n),
     with the paper's values (null_base 2) 0.989 at n = 32 and 0.9995 at n = 1024: the
     attention branch starts almost silent (mag 0.06 / 0.09, and |s| scaled by 1 - w_N).
     That suits training from scratch with the paper's schedule; in place of an existing
     softmax attention start lower: cfg.init_null_base = 0 gives w_N 0.58 / 0.77 and
     mag 0.49 / 0.80 (n = 32 / 1024), -2 gives 0.02 / 0.006 and mag 0.60 / 0.88. Keep
     v_null = 0. c is unit-norm per head (not scaled like a softmax output): give the
     output projection its usual init, and feed mag in (polar_assemble_forward's W_mu, or
     multiply) if the branch should learn how much to say. examples/dropin/ uses
     init_null_base = 0. polar_params_init writes the config's values.
   STRIDED LAYOUTS
     polar_forward_strided / polar_backward_strided read q, k, v and write c through
     {batch, head, token} strides (polar_layout; head dim contiguous), so an interleaved
     (B,T,3C) qkv and its gradient go in without copies (polar_layout_qkv); they also
     take and check the workspace size.

   SHAPES (legend)
     B batch, H query heads, Hkv key/value heads (H a multiple of Hkv; query head h reads
     kv head h / (H/Hkv)), T sequence length, D head dim, C model width, R distractor keys.
     q (B,H,T,D); k, v (B,Hkv,T,D); c (B,H,T,D); mag (B,H,T); per-head parameters (H),
     v_null (H,D); saved stats (B,H,T,POLAR_NSTAT); materialised weights (B,H,T,T+1).
     All buffers caller-owned, contiguous, row-major float32. Backward functions
     ACCUMULATE (+=) into gradient buffers.

   ERRORS
     POLAR_OK 0; POLAR_EINVAL (-1) NULL pointer, bad dimension or config, NaN/Inf parameter;
     POLAR_ENOMEM (-2) allocation failed; POLAR_ERANGE (-3) a block table entry or sequence
     length outside the cache, or a workspace smaller than the call needs.
     POLAR_ENOCUDA (-4) a *_cuda function in a build without nvcc; POLAR_ECUDA (-5) a CUDA
     launch or runtime call failed; POLAR_ENOTSUP (-6) valid but not implemented in this
     build or on this device (a head dim the CUDA kernels lack; a tensor-core tile above
     the device's shared-memory limit: tf32 backward at D = 128 before sm_90).
     polar_strerror() names them. Nothing aborts on user input.
*/
#ifndef POLAR_H
#define POLAR_H

#include <stddef.h>

#ifdef POLAR_STATIC
/* unused is expected in a static copy: silence -Wunused-function */
#if defined(__GNUC__) || defined(__clang__)
#define POLARDEF static __attribute__((unused))
#else
#define POLARDEF static
#endif
#else
#define POLARDEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define POLAR_VERSION "0.1"

#define POLAR_OK 0
#define POLAR_EINVAL (-1)
#define POLAR_ENOMEM (-2)
#define POLAR_ERANGE (-3)
#define POLAR_ENOCUDA (-4) /* a *_cuda function in a build without nvcc */
#define POLAR_ECUDA (-5)   /* a CUDA launch or runtime call failed */
#define POLAR_ENOTSUP (-6) /* valid, but not implemented in this build or device (head dim) */

/* polar_config.math: the CUDA path's arithmetic (the CPU path is always fp32) */
#define POLAR_MATH_FP32 0 /* SIMT fp32, the exact-parity path (default) */
#define POLAR_MATH_TF32 1 /* tensor cores, tf32 inputs, fp32 accumulation (forward, backward) */
#define POLAR_MATH_BF16 2 /* tensor cores, bf16 inputs, fp32 accumulation (forward, backward) */

#define POLAR_NO_WINDOW (-1)
/* polar_config.distractor_mode: the loss's normalisation (see CONFIG in the doc block) */
#define POLAR_DISTRACTOR_MEAN 0 /* mean over (b, h, i, r), window-aware n (default) */
#define POLAR_DISTRACTOR_SEED 1 /* seed 002's code: sum over r, n = i + 1, keys detached */
/* the most random keys the distractor loss accepts (polar_config.distractor_keys) */
#define POLAR_MAX_DISTRACTOR_KEYS 65536
/* per-row saved statistics: running max M, L = sum p, Q2 = sum p^2, |s| */
#define POLAR_NSTAT 4

typedef struct polar_config {
    int window;          /* POLAR_NO_WINDOW (-1) or W >= 1 */
    int block_q;         /* streaming query tile (rows) */
    int block_k;         /* streaming key tile (columns) */
    int num_threads;     /* 0: omp_get_max_threads() */
    float norm_eps;      /* floor on |s| */
    float stat_floor;    /* floor on Q2 and Z */
    float init_len_gain_raw;
    float init_null_base;
    float init_null_slope_raw;
    float init_mag_beta_raw;
    int distractor_keys;     /* R; 0 = alignment loss off */
    float distractor_weight; /* 0.01 */
    int distractor_mode;     /* POLAR_DISTRACTOR_MEAN (default) / _SEED */
    int math;                /* POLAR_MATH_FP32 / _TF32 / _BF16 (CUDA path only) */
} polar_config;

/* Per-head learned parameters (read-only in forward/backward). */
typedef struct polar_params {
    const float *len_gain_raw;   /* (H) alpha, through softplus */
    const float *null_base;      /* (H) */
    const float *null_slope_raw; /* (H) gamma, through softplus */
    const float *mag_beta_raw;   /* (H) beta, through softplus */
    const float *v_null;         /* (H, D) null value vector */
} polar_params;

/* Gradients of the per-head parameters; += into each; any pointer may be NULL. */
typedef struct polar_grads {
    float *len_gain_raw;   /* (H) */
    float *null_base;      /* (H) */
    float *null_slope_raw; /* (H) */
    float *mag_beta_raw;   /* (H) */
    float *v_null;         /* (H, D) */
} polar_grads;

/* What forward saves for backward. */
typedef struct polar_state {
    float *stats; /* (B, H, T, POLAR_NSTAT): M, L, Q2, |s| per row; always required */
    float *probs; /* (B, H, T, T+1): weights w (null in the last column); materialised
                     path only (NULL for the streaming path) */
} polar_state;

POLARDEF polar_config polar_config_default(void);
POLARDEF const char *polar_strerror(int status);

/* Fill the per-head parameters with the config's initial values (v_null = 0).
   Any pointer may be NULL (skipped). len_gain_raw..mag_beta_raw: (H); v_null: (H, D). */
POLARDEF int polar_params_init(const polar_config *cfg, int H, int D, float *len_gain_raw,
                               float *null_base, float *null_slope_raw, float *mag_beta_raw,
                               float *v_null);

/* Bytes of scratch the streaming forward/backward and the materialised backward need
   for these dimensions and this config (its num_threads; keep the OpenMP thread count
   unchanged between this call and the calls using the workspace). The forward alone
   uses only per-thread tiles (O(block_q*block_k + block*D) floats per thread); the
   backwards add row buffers of B*H*T*(D+10) floats and, when the one-pass backward is
   chosen (the B*Hkv groups fill the threads; never with more threads than groups), a
   (H/Hkv)*T*Dp double accumulator per thread, Dp = D rounded up to 32: in all no more
   than the row buffers or 64 MiB (else the two-pass backward runs). The workspace must
   be aligned to 8 bytes (malloc's is). 0 on invalid input. */
POLARDEF size_t polar_workspace_size(const polar_config *cfg, int B, int H, int Hkv, int T,
                                     int D);

/* Where q, k, v, c live when they are not contiguous (B,H,T,D) arrays: element
   (b, h, t, d) of q is at q[b*q[0] + h*q[1] + t*q[2] + d] (strides in floats, >= 0; the
   head dimension is contiguous), likewise k, v (with kv heads) and c. The gradients
   dq, dk, dv, dc share the strides of q, k, v, c, so an interleaved (B,T,3C) dqkv
   buffer takes the gradients in place (accumulated, +=). polar_layout_contiguous is
   the layout of polar_forward/polar_backward; polar_layout_qkv is the llm.c one:
   q, k, v at qkv, qkv + C, qkv + 2C with token stride 3C (C = H*D, Hkv = H), c (B,T,C). */
typedef struct polar_layout {
    ptrdiff_t q[3], k[3], v[3]; /* {batch, head, token} strides of q, k, v (and grads) */
    ptrdiff_t c[3];             /* of c and dc */
} polar_layout;
POLARDEF polar_layout polar_layout_contiguous(int H, int Hkv, int T, int D);
POLARDEF polar_layout polar_layout_qkv(int H, int T, int D);

/* Streaming forward. c: (B,H,T,D) out; mag: (B,H,T) out; st->stats: (B,H,T,NSTAT) out;
   q: (B,H,T,D); k, v: (B,Hkv,T,D). workspace: polar_workspace_size() bytes or NULL. */
POLARDEF int polar_forward(const polar_config *cfg, float *c, float *mag, polar_state *st,
                           const float *q, const float *k, const float *v,
                           const polar_params *prm, int B, int H, int Hkv, int T, int D,
                           void *workspace);

/* Streaming backward. dq: (B,H,T,D) +=; dk, dv: (B,Hkv,T,D) +=; grads +=; dc: (B,H,T,D);
   dmag: (B,H,T) or NULL (zero); c, mag: the forward's outputs; st: the forward's state
   (stats; from either path). */
POLARDEF int polar_backward(const polar_config *cfg, float *dq, float *dk, float *dv,
                            polar_grads *grads, const float *dc, const float *dmag,
                            const float *c, const float *mag, const polar_state *st,
                            const float *q, const float *k, const float *v,
                            const polar_params *prm, int B, int H, int Hkv, int T, int D,
                            void *workspace);

/* The streaming forward and backward on strided q, k, v, c (and dq, dk, dv, dc with the
   same strides; see polar_layout). mag, dmag, stats stay contiguous (B,H,T). The same
   arithmetic in the same order as the contiguous calls: bit-identical results.
   workspace: NULL (allocated per call) or workspace_bytes bytes, checked: fewer than
   this call needs (polar_workspace_size() is always enough) returns POLAR_ERANGE.
   polar_forward/polar_backward are these with the contiguous layout and an unchecked
   workspace (they take no size). */
POLARDEF int polar_forward_strided(const polar_config *cfg, const polar_layout *lay, float *c,
                                   float *mag, polar_state *st, const float *q, const float *k,
                                   const float *v, const polar_params *prm, int B, int H,
                                   int Hkv, int T, int D, void *workspace,
                                   size_t workspace_bytes);
POLARDEF int polar_backward_strided(const polar_config *cfg, const polar_layout *lay,
                                    float *dq, float *dk, float *dv, polar_grads *grads,
                                    const float *dc, const float *dmag, const float *c,
                                    const float *mag, const polar_state *st, const float *q,
                                    const float *k, const float *v, const polar_params *prm,
                                    int B, int H, int Hkv, int T, int D, void *workspace,
                                    size_t workspace_bytes);

/* Materialised reference forward: as polar_forward, and st->probs (B,H,T,T+1) is
   filled with w (zeros outside the visible keys, the null weight in column T). */
POLARDEF int polar_forward_ref(const polar_config *cfg, float *c, float *mag,
                               polar_state *st, const float *q, const float *k,
                               const float *v, const polar_params *prm, int B, int H,
                               int Hkv, int T, int D);

/* Materialised reference backward from st->probs and st->stats. Same accumulation
   contract as polar_backward. */
POLARDEF int polar_backward_ref(const polar_config *cfg, float *dq, float *dk, float *dv,
                                polar_grads *grads, const float *dc, const float *dmag,
                                const float *c, const float *mag, const polar_state *st,
                                const float *q, const float *k, const float *v,
                                const polar_params *prm, int B, int H, int Hkv, int T,
                                int D, void *workspace);

/* Decode one new token per sequence over a paged KV cache. The new token's k, v must
   already be in the cache; seq_lens[b] is the live length (keys 0..len-1, the query sits at
   position len-1; len 0 drains to the null sink). Key t of sequence b lives in cache block
   block_table[b*max_blocks + t/block_size], slot t%block_size. Each (sequence, kv head)
   reads every cached block once for all H/Hkv query heads of its group.
   c: (B,H,D) out; mag: (B,H) out; q: (B,H,D);
   k_cache, v_cache: (num_blocks, Hkv, block_size, D); block_table: (B, max_blocks);
   seq_lens: (B), each in [0, max_blocks*block_size]. Equals the last row of the forward. */
POLARDEF int polar_decode(const polar_config *cfg, float *c, float *mag, const float *q,
                          const float *k_cache, const float *v_cache,
                          const int *block_table, const int *seq_lens,
                          const polar_params *prm, int B, int H, int Hkv, int D,
                          int block_size, int num_blocks, int max_blocks);

/* Output assembly (eq. 14): out[b,t,:] = W_o (c[b,:,t,:] * sigmoid(gate[b,t,h]) over heads,
   flattened h*D+d) + W_mu mag[b,:,t].
   out: (B,T,C) written; c: (B,H,T,D); mag: (B,H,T); gate: (B,T,H) or NULL (no gating);
   W_o: (C, H*D); W_mu: (C, H). */
POLARDEF int polar_assemble_forward(float *out, const float *c, const float *mag,
                                    const float *gate, const float *W_o, const float *W_mu,
                                    int B, int H, int T, int D, int C);
/* dc: (B,H,T,D) +=; dmag: (B,H,T) +=; dgate: (B,T,H) += (NULL allowed, must be NULL when
   gate is NULL); dW_o: (C,H*D) +=; dW_mu: (C,H) +=; dout: (B,T,C). Any grad may be NULL. */
POLARDEF int polar_assemble_backward(float *dc, float *dmag, float *dgate, float *dW_o,
                                     float *dW_mu, const float *dout, const float *c,
                                     const float *mag, const float *gate, const float *W_o,
                                     const float *W_mu, int B, int H, int T, int D, int C);

/* Distractor alignment loss (eq. 15): R = cfg->distractor_keys random keys per kv head
   are scored by every query with the query's temperature and null floor; the loss is
   distractor_weight * mean over (b, h, i, r) of the random keys' softmax weight against
   the null sink (cfg->distractor_mode = POLAR_DISTRACTOR_SEED: summed over r, n = i + 1,
   keys detached, as seed 002's code). *loss = 0 and nothing else happens when R == 0
   (the default).
   loss: scalar out; q: (B,H,T,D); k_rand: (B,Hkv,R,D). */
POLARDEF int polar_distractor_forward(const polar_config *cfg, float *loss, const float *q,
                                      const float *k_rand, const polar_params *prm, int B,
                                      int H, int Hkv, int T, int D);
/* dq: (B,H,T,D) +=; dk_rand: (B,Hkv,R,D) += (may be NULL; never written in
   POLAR_DISTRACTOR_SEED mode); grads += (len_gain_raw,
   null_base, null_slope_raw); dloss: the upstream gradient of *loss. */
POLARDEF int polar_distractor_backward(const polar_config *cfg, float *dq, float *dk_rand,
                                       polar_grads *grads, float dloss, const float *q,
                                       const float *k_rand, const polar_params *prm, int B,
                                       int H, int Hkv, int T, int D);

/* ------------------------------------------------------------ CUDA (cuda/polar.cuh) */
/* Device-pointer mirrors of polar_forward / polar_backward / polar_decode: the same
   shapes, layouts, config and saved state; every buffer (including the per-head
   parameter and gradient arrays the polar_params / polar_grads structs point to) is
   device memory; the structs themselves are host memory. `stream` is a cudaStream_t
   (NULL: the default stream). Compiled when this implementation is compiled by nvcc
   (or by the CPU simulation of `make test`); otherwise they return POLAR_ENOCUDA.
   Head dims 32, 64, 96, 128; cfg->math POLAR_MATH_FP32, or POLAR_MATH_TF32 /
   POLAR_MATH_BF16 for tensor cores in the forward and backward (the decode runs fp32).
   A host pointer where a device pointer belongs: POLAR_EINVAL, nothing launched.
   Tolerances against the CPU path: see the top of cuda/polar.cuh. In those builds the
   plain polar_forward / polar_backward / polar_decode route calls whose q is device
   memory here, on the default stream (a device workspace is passed on, a host one
   dropped; the routed decode reports bad table entries as NaN rows, as below). */
struct CUstream_st;
typedef struct CUstream_st *polar_stream;
/* The device calls are written once each, in the list POLAR__CUDA_API: an entry
   X(int, polar_name_cuda, (parameters)) is the prototype `int polar_name_cuda(parameters)`,
   documented above it in the list; the list is expanded here into the declarations and,
   without nvcc / the simulation, into stubs that return POLAR_ENOCUDA (a workspace size:
   0). */
#define POLAR__CUDA_DECLARE(ret, name, params) POLARDEF ret name params;
#define POLAR__CUDA_API(X)                                                                      \
    /* Bytes of device workspace polar_backward_cuda needs: B*H*T*(D+10) floats, then           \
       H*ceil(B*T/256)*D doubles for v_null's gradient (0 on invalid input). The forward and    \
       decode need none. */                                                                     \
    X(size_t, polar_workspace_size_cuda, (const polar_config *cfg, int B, int H, int Hkv,       \
                                          int T, int D))                                        \
    /* workspace: unused (may be NULL). */                                                      \
    X(int, polar_forward_cuda, (const polar_config *cfg, float *c, float *mag, polar_state *st, \
                                const float *q, const float *k, const float *v,                 \
                                const polar_params *prm, int B, int H, int Hkv, int T, int D,   \
                                void *workspace, polar_stream stream))                          \
    /* workspace: polar_workspace_size_cuda() bytes of device memory, or NULL (then it is       \
       taken with cudaMallocAsync on the stream and freed with cudaFreeAsync). */               \
    X(int, polar_backward_cuda, (const polar_config *cfg, float *dq, float *dk, float *dv,      \
                                 polar_grads *grads, const float *dc, const float *dmag,        \
                                 const float *c, const float *mag, const polar_state *st,       \
                                 const float *q, const float *k, const float *v,                \
                                 const polar_params *prm, int B, int H, int Hkv, int T, int D,  \
                                 void *workspace, polar_stream stream))                         \
    /* block_table and seq_lens are device arrays, read by the kernel (no host sync, no         \
       allocation: capturable in a CUDA graph). An invalid entry or length cannot return        \
       POLAR_ERANGE without a sync: that sequence's c and mag come out NaN instead, and         \
       nothing outside the cache is read. */                                                    \
    X(int, polar_decode_cuda, (const polar_config *cfg, float *c, float *mag, const float *q,   \
                               const float *k_cache, const float *v_cache,                      \
                               const int *block_table, const int *seq_lens,                     \
                               const polar_params *prm, int B, int H, int Hkv, int D,           \
                               int block_size, int num_blocks, int max_blocks,                  \
                               polar_stream stream))                                            \
    /* Eq. 15's distractor loss on the device: polar_distractor_forward / _backward with        \
       device buffers (q, k_rand, the parameter and gradient arrays, dq, dk_rand) and `loss` a  \
       device scalar (written on the stream, no host sync). The same values as the CPU (double  \
       scores and softmax per row, fixed-order reductions: deterministic, no atomics); any      \
       head dim. workspace: polar_distractor_workspace_size_cuda() bytes of device memory, or   \
       NULL (taken with cudaMallocAsync on the stream). R == 0: the loss is set to 0 and the    \
       backward does nothing, as on the CPU. Under nvcc (or the simulation) the plain calls     \
       route a device q here, on the default stream. */                                         \
    X(size_t, polar_distractor_workspace_size_cuda, (const polar_config *cfg, int B, int H,     \
                                                     int T))                                    \
    X(int, polar_distractor_forward_cuda, (const polar_config *cfg, float *loss,                \
                                           const float *q, const float *k_rand,                 \
                                           const polar_params *prm, int B, int H, int Hkv,      \
                                           int T, int D, void *workspace, polar_stream stream)) \
    X(int, polar_distractor_backward_cuda, (const polar_config *cfg, float *dq, float *dk_rand, \
                                            polar_grads *grads, float dloss, const float *q,    \
                                            const float *k_rand, const polar_params *prm,       \
                                            int B, int H, int Hkv, int T, int D,                \
                                            void *workspace, polar_stream stream))
POLAR__CUDA_API(POLAR__CUDA_DECLARE)

#ifdef __cplusplus
}
#endif
#endif /* POLAR_H */

/* ======================================================================= */
#ifdef POLAR_IMPLEMENTATION
#ifndef POLAR_IMPLEMENTATION_DONE
#define POLAR_IMPLEMENTATION_DONE

/* GCC keeps IEEE exception semantics by default (-ftrapping-math): a loop with a
   compare-and-select around a float expression (a clamp before an exp, say) is then
   not if-converted, hence not vectorised, on AVX2 (AVX-512 gets masked instructions).
   Nothing here reads floating-point exception flags, so the implementation is compiled
   without that constraint; values are unchanged (this is not -ffast-math). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__INTEL_COMPILER)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#define POLAR__PUSHED_NO_TRAPPING 1
#endif

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(POLAR_MALLOC) && !defined(POLAR_FREE) || !defined(POLAR_MALLOC) && defined(POLAR_FREE)
#error "polar.h: define both POLAR_MALLOC and POLAR_FREE, or neither"
#endif
#ifndef POLAR_MALLOC
#include <stdlib.h>
#define POLAR_MALLOC(sz) malloc(sz)
#define POLAR_FREE(p) free(p)
#endif
#ifndef POLAR_ASSERT
#include <assert.h>
#define POLAR_ASSERT(x) assert(x)
#endif

#if defined(__cplusplus) || !defined(__STDC_VERSION__) || __STDC_VERSION__ < 199901L
#define POLAR__RESTRICT
#else
#define POLAR__RESTRICT restrict
#endif

/* tile padding of the micro-kernel: rows by 8, columns by 32 */
#define POLAR__MR 8
#define POLAR__NR 32
/* per-row scalars of the streaming backward */
#define POLAR__NROW 10
enum { POLAR__R_M, POLAR__R_T, POLAR__R_A, POLAR__R_B, POLAR__R_C, POLAR__R_WN,
       POLAR__R_DT, POLAR__R_DU, POLAR__R_DBETA, POLAR__R_NUL };
/* Rows whose null sink holds at least half the weight (R_WN >= 0.5) take the null's
   logit gradient from the zero-sum identity, g_N = -sum_j g_j: the direct form
   w_N (ds.v_null - ds.s - K) cancels to O(1 - w_N) there (s -> v_null, and s is known
   only to float rounding), losing all precision as 1 - w_N falls towards eps.
   -sum_j g_j = -P/Z + ds.s L/Z - K w_N with P = sum_j p_j ds.v_j, summed with the
   logit gradients themselves; R_NUL keeps the row's null logit for that last step. */
#define POLAR__NULL_SUM(wn) ((wn) >= 0.5f)

#ifdef __cplusplus
extern "C" {
#endif

POLARDEF polar_config polar_config_default(void)
{
    polar_config c;
    memset(&c, 0, sizeof c);
    c.window = POLAR_NO_WINDOW;
    c.block_q = 64;
    c.block_k = 64;
    c.num_threads = 0;
    c.norm_eps = 1e-6f;
    c.stat_floor = 1e-30f;
    c.init_len_gain_raw = -1.0f;
    c.init_null_base = 2.0f;
    c.init_null_slope_raw = 0.5f;
    c.init_mag_beta_raw = -1.5f;
    c.distractor_keys = 0;
    c.distractor_weight = 0.01f;
    c.distractor_mode = POLAR_DISTRACTOR_MEAN;
    c.math = POLAR_MATH_FP32;
    return c;
}

POLARDEF const char *polar_strerror(int status)
{
    switch (status) {
    case POLAR_OK: return "ok";
    case POLAR_EINVAL: return "invalid argument (NULL pointer, bad dimension, config or NaN/Inf parameter)";
    case POLAR_ENOMEM: return "out of memory";
    case POLAR_ERANGE: return "index out of range (block table or sequence length)";
    case POLAR_ENOCUDA: return "built without CUDA (compile with nvcc)";
    case POLAR_ECUDA: return "CUDA error (a launch or runtime call failed)";
    case POLAR_ENOTSUP: return "not implemented in this build or on this device (a CUDA head dim other than 32/64/96/128, or a tensor-core tile above the device's shared-memory limit)";
    default: return "unknown polar error";
    }
}

/* ------------------------------------------------------------ small helpers */
static double polar__softplus(double x) { return x > 30.0 ? x : log1p(exp(x)); }
static double polar__sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
/* finite test on the IEEE bits: survives -ffast-math / -Ofast, which fold x == x */
static int polar__finite(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7FF0000000000000ULL) != 0x7FF0000000000000ULL;
}
static size_t polar__rup(size_t x, size_t m) { return (x + m - 1) / m * m; }

static int polar__nthreads(const polar_config *cfg)
{
    int n = cfg->num_threads;
#ifdef _OPENMP
    if (n <= 0) n = omp_get_max_threads();
#else
    n = 1;
#endif
    return n < 1 ? 1 : n;
}

static int polar__check_cfg(const polar_config *cfg)
{
    if (!cfg) return 0;
    if (cfg->window == 0 || cfg->window < -1) return 0;
    if (cfg->block_q < 1 || cfg->block_q > 4096 || cfg->block_k < 1 || cfg->block_k > 4096)
        return 0;
    if (cfg->num_threads < 0 || cfg->num_threads > 4096) return 0;
    if (!polar__finite(cfg->norm_eps) || !(cfg->norm_eps > 0)) return 0;
    if (!polar__finite(cfg->stat_floor) || !(cfg->stat_floor > 0)) return 0;
    if (cfg->distractor_keys < 0 || cfg->distractor_keys > POLAR_MAX_DISTRACTOR_KEYS) return 0;
    if (!polar__finite(cfg->distractor_weight)) return 0;
    if (cfg->math < POLAR_MATH_FP32 || cfg->math > POLAR_MATH_BF16) return 0;
    if (cfg->distractor_mode != POLAR_DISTRACTOR_MEAN && cfg->distractor_mode != POLAR_DISTRACTOR_SEED)
        return 0;
    return 1;
}

/* dims valid and B*H*T*(T+1) and B*H*T*D fit comfortably in size_t */
static int polar__check_dims(int B, int H, int Hkv, int T, int D)
{
    double n;
    if (B < 1 || H < 1 || Hkv < 1 || T < 1 || D < 1) return 0;
    if (H % Hkv != 0) return 0;
    if ((double)B * H * T > (double)INT_MAX / 2 || (double)B * H * D > (double)INT_MAX / 2)
        return 0;
    n = (double)B * H * T * ((double)D + T + 16);
    if (n * 8.0 > (double)SIZE_MAX / 4) return 0;
    return 1;
}

static int polar__check_params(const polar_params *p, int H, int D)
{
    int h;
    long i;
    if (!p || !p->len_gain_raw || !p->null_base || !p->null_slope_raw || !p->mag_beta_raw ||
        !p->v_null)
        return 0;
    for (h = 0; h < H; h++)
        if (!polar__finite(p->len_gain_raw[h]) || !polar__finite(p->null_base[h]) ||
            !polar__finite(p->null_slope_raw[h]) || !polar__finite(p->mag_beta_raw[h]))
            return 0;
    for (i = 0; i < (long)H * D; i++)
        if (!polar__finite(p->v_null[i])) return 0;
    return 1;
}

/* number of keys visible to query i and the first of them */
static int polar__nkeys(int window, int i)
{
    return (window > 0 && i + 1 > window) ? window : i + 1;
}

/* temperature and null logit for n visible keys (n >= 1 used in the logs) */
static void polar__row_tn(const polar_params *p, int h, int n, double *temp, double *null_)
{
    double nn = n < 1 ? 1.0 : (double)n;
    *temp = 1.0 + polar__softplus(p->len_gain_raw[h]) * log(nn);
    *null_ = p->null_base[h] + polar__softplus(p->null_slope_raw[h]) * sqrt(log(nn + 1.0));
}

/* The shared epilogue: from the streamed sums of one row, write c and mag.
   S: (D) unnormalised sum p v + p_N v_null (scaled relative to M). Returns |s|. */
static double polar__finish_row(float *c, float *mag, const float *S, double L, double Q2,
                                double Z, int D, double beta_raw, const polar_config *cfg)
{
    double r2 = 0, r, inv, meff, f = cfg->stat_floor;
    int d;
    double Zf = Z > f ? Z : f, Qf = Q2 > f ? Q2 : f;
    for (d = 0; d < D; d++) {
        double s = S[d] / Zf;
        r2 += s * s;
    }
    r = sqrt(r2);
    inv = 1.0 / (Zf * (r > cfg->norm_eps ? r : (double)cfg->norm_eps));
    for (d = 0; d < D; d++) c[d] = (float)(S[d] * inv);
    meff = L * L * L / (Qf * Zf);
    *mag = (float)tanh(polar__softplus(beta_raw) * log1p(meff));
    return r;
}

/* C[M x N] (+)= A[M x K] * Bm[K x N]; M % MR == 0, N % NR == 0 (tiles are padded).
   An 8x32 accumulator block: with AVX-512 (and without POLAR_NO_SIMD) 16 zmm registers
   updated by fused multiply-adds from one broadcast of A and two loads of Bm per k;
   with AVX2+FMA, row strips of 6 x 16 (12 ymm accumulators of 16 registers, fed per k by
   two loads of Bm and six broadcasts of A: 8 loads per 12 FMAs; the M % 8 rows the
   strips of 6 leave run as 4 x 16, 8 accumulators);
   otherwise plain C that gcc and clang both keep in vector registers (a 4x16 block with
   named row arrays ran ~10x slower under clang, which left the accumulators in memory).
   Each accumulator sums over k in order in both versions; the SIMD one rounds once per
   multiply-add (FMA), so the two differ by float rounding only. */
#if defined(__AVX512F__) && !defined(POLAR_NO_SIMD)
#include <immintrin.h>
#define POLAR__GEMM_SIMD 1
#elif defined(__AVX2__) && defined(__FMA__) && !defined(POLAR_NO_SIMD)
#include <immintrin.h>
#define POLAR__GEMM_AVX2 1
#endif
static void polar__gemm(float *POLAR__RESTRICT C, int ldc, const float *POLAR__RESTRICT A,
                        int lda, const float *POLAR__RESTRICT Bm, int ldb, int M, int N, int K,
                        int accumulate)
{
    int i, j, kk;
#ifdef POLAR__GEMM_SIMD
    for (i = 0; i < M; i += POLAR__MR)
        for (j = 0; j < N; j += POLAR__NR) {
            float *c = C + (size_t)i * ldc + j;
            const float *a = A + (size_t)i * lda;
            __m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71;
            if (accumulate) {
#define POLAR__LD(r) c##r##0 = _mm512_loadu_ps(c + (size_t)r * ldc); \
                     c##r##1 = _mm512_loadu_ps(c + (size_t)r * ldc + 16);
                POLAR__LD(0) POLAR__LD(1) POLAR__LD(2) POLAR__LD(3)
                POLAR__LD(4) POLAR__LD(5) POLAR__LD(6) POLAR__LD(7)
#undef POLAR__LD
            } else {
                c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm512_setzero_ps();
                c40 = c41 = c50 = c51 = c60 = c61 = c70 = c71 = _mm512_setzero_ps();
            }
            for (kk = 0; kk < K; kk++) {
                const float *b = Bm + (size_t)kk * ldb + j;
                const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
                __m512 x;
#define POLAR__FMA(r) x = _mm512_set1_ps(a[(size_t)r * lda + kk]); \
                      c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0); \
                      c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);
                POLAR__FMA(0) POLAR__FMA(1) POLAR__FMA(2) POLAR__FMA(3)
                POLAR__FMA(4) POLAR__FMA(5) POLAR__FMA(6) POLAR__FMA(7)
#undef POLAR__FMA
            }
#define POLAR__ST(r) _mm512_storeu_ps(c + (size_t)r * ldc, c##r##0); \
                     _mm512_storeu_ps(c + (size_t)r * ldc + 16, c##r##1);
            POLAR__ST(0) POLAR__ST(1) POLAR__ST(2) POLAR__ST(3)
            POLAR__ST(4) POLAR__ST(5) POLAR__ST(6) POLAR__ST(7)
#undef POLAR__ST
        }
#elif defined(POLAR__GEMM_AVX2)
    int nrow, j16;
    (void)j;
    for (i = 0; i < M; i += nrow) {
        /* row strips of 6 (12 accumulators, 2 loads of Bm and 6 broadcasts per 12 FMAs),
           4-row strips for what is left: M % 8 == 0 leaves 4 or 8 rows */
        const int left = M - i;
        nrow = left >= 10 || left == 6 ? 6 : 4;
        for (j16 = 0; j16 < N; j16 += 16) {
            float *c = C + (size_t)i * ldc + j16;
            const float *a0 = A + (size_t)i * lda, *a1 = a0 + lda, *a2 = a1 + lda;
            const float *a3 = a2 + lda, *a4 = a3 + lda, *a5 = a4 + lda;
            const float *b = Bm + j16;
            __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
            c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm256_setzero_ps();
            c40 = c41 = c50 = c51 = _mm256_setzero_ps();
#define POLAR__LD8(r) c##r##0 = _mm256_loadu_ps(c + (size_t)r * ldc); \
                      c##r##1 = _mm256_loadu_ps(c + (size_t)r * ldc + 8);
#define POLAR__FMA8(r) x = _mm256_broadcast_ss(a##r + kk); \
                       c##r##0 = _mm256_fmadd_ps(x, b0, c##r##0); \
                       c##r##1 = _mm256_fmadd_ps(x, b1, c##r##1);
#define POLAR__ST8(r) _mm256_storeu_ps(c + (size_t)r * ldc, c##r##0); \
                      _mm256_storeu_ps(c + (size_t)r * ldc + 8, c##r##1);
            if (accumulate) {
                POLAR__LD8(0) POLAR__LD8(1) POLAR__LD8(2) POLAR__LD8(3)
                if (nrow == 6) {
                    POLAR__LD8(4) POLAR__LD8(5)
                }
            }
            if (nrow == 6) {
                for (kk = 0; kk < K; kk++, b += ldb) {
                    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
                    __m256 x;
                    POLAR__FMA8(0) POLAR__FMA8(1) POLAR__FMA8(2)
                    POLAR__FMA8(3) POLAR__FMA8(4) POLAR__FMA8(5)
                }
                POLAR__ST8(4) POLAR__ST8(5)
            } else {
                for (kk = 0; kk < K; kk++, b += ldb) {
                    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
                    __m256 x;
                    POLAR__FMA8(0) POLAR__FMA8(1) POLAR__FMA8(2) POLAR__FMA8(3)
                }
            }
            POLAR__ST8(0) POLAR__ST8(1) POLAR__ST8(2) POLAR__ST8(3)
#undef POLAR__LD8
#undef POLAR__FMA8
#undef POLAR__ST8
        }
    }
#else
    int x, y;
    for (i = 0; i < M; i += POLAR__MR)
        for (j = 0; j < N; j += POLAR__NR) {
            float acc[POLAR__MR][POLAR__NR];
            if (accumulate) {
                for (x = 0; x < POLAR__MR; x++)
                    for (y = 0; y < POLAR__NR; y++) acc[x][y] = C[(size_t)(i + x) * ldc + j + y];
            } else {
                for (x = 0; x < POLAR__MR; x++)
                    for (y = 0; y < POLAR__NR; y++) acc[x][y] = 0.0f;
            }
            for (kk = 0; kk < K; kk++) {
                const float *b = Bm + (size_t)kk * ldb + j;
                for (x = 0; x < POLAR__MR; x++) {
                    const float av = A[(size_t)(i + x) * lda + kk];
                    for (y = 0; y < POLAR__NR; y++) acc[x][y] += av * b[y];
                }
            }
            for (x = 0; x < POLAR__MR; x++)
                for (y = 0; y < POLAR__NR; y++) C[(size_t)(i + x) * ldc + j + y] = acc[x][y];
        }
#endif
}

/* exp for the tiles. With AVX2 (and without -ffast-math, which would fold the rounding
   trick) a Cephes-style polynomial exp that vectorises (max relative error ~1.4 ulp on
   [-87, 0]); otherwise libm's expf. Arguments below -87 give 0. */
#if defined(__AVX2__) && !defined(__FAST_MATH__) && !defined(POLAR_NO_VEXP)
#define POLAR__VEXP 1
static float polar__expf(float x)
{
    float n, r, p, y, sc;
    int32_t e;
    float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    y = p * r * r + r + 1.0f;
    e = ((int32_t)n + 127) << 23;
    memcpy(&sc, &e, sizeof sc);
    return x < -87.0f ? 0.0f : y * sc;
}
#else
#define POLAR__VEXP 0
static float polar__expf(float x) { return expf(x); }
#endif

/* x[i] = exp(x[i] * mul - sub) for i in [0, n) */
static void polar__vexp(float *POLAR__RESTRICT x, int n, float mul, float sub)
{
    int i;
    for (i = 0; i < n; i++) x[i] = polar__expf(x[i] * mul - sub);
}
/* max of x[0..n) with 8 fixed partials (vectorises; order fixed, so deterministic) */
static float polar__vmax(const float *POLAR__RESTRICT x, int n)
{
    float m[8];
    int i, j;
    for (j = 0; j < 8; j++) m[j] = -INFINITY;
    for (i = 0; i + 8 <= n; i += 8)
        for (j = 0; j < 8; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    for (j = 1; j < 8; j++) m[0] = m[j] > m[0] ? m[j] : m[0];
    return m[0];
}
/* sum and sum of squares of x[0..n) with 8 fixed partials */
/* sum x.y in eight lanes (vectorisable without reassociation flags) */
static float polar__vdot(const float *POLAR__RESTRICT x, const float *POLAR__RESTRICT y, int n)
{
    float a[8];
    int i, j;
    for (j = 0; j < 8; j++) a[j] = 0.0f;
    for (i = 0; i + 8 <= n; i += 8)
        for (j = 0; j < 8; j++) a[j] += x[i + j] * y[i + j];
    for (; i < n; i++) a[0] += x[i] * y[i];
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

static void polar__vsum2(const float *POLAR__RESTRICT x, int n, float *sum, float *sum2)
{
    float a[8], b[8];
    int i, j;
    for (j = 0; j < 8; j++) a[j] = b[j] = 0.0f;
    for (i = 0; i + 8 <= n; i += 8)
        for (j = 0; j < 8; j++) {
            a[j] += x[i + j];
            b[j] += x[i + j] * x[i + j];
        }
    for (; i < n; i++) {
        a[0] += x[i];
        b[0] += x[i] * x[i];
    }
    *sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    *sum2 = ((b[0] + b[1]) + (b[2] + b[3])) + ((b[4] + b[5]) + (b[6] + b[7]));
}

/* copy n rows (row stride ld) of D floats into a zero-padded (np x Dp) tile */
static void polar__load_rows(float *dst, int Dp, int np, const float *src, ptrdiff_t ld,
                             int D, int n)
{
    int r;
    for (r = 0; r < np; r++) {
        float *o = dst + (size_t)r * Dp;
        if (r < n) {
            memcpy(o, src + r * ld, (size_t)D * sizeof(float));
            if (Dp > D) memset(o + D, 0, (size_t)(Dp - D) * sizeof(float));
        } else {
            memset(o, 0, (size_t)Dp * sizeof(float));
        }
    }
}

/* transpose n rows (row stride ld) of D floats into a zero-padded (Dp x np) tile */
static void polar__load_cols(float *dst, int np, int Dp, const float *src, ptrdiff_t ld,
                             int D, int n)
{
    int r, d;
    memset(dst, 0, (size_t)Dp * np * sizeof(float));
    for (r = 0; r < n; r++)
        for (d = 0; d < D; d++) dst[(size_t)d * np + r] = src[r * ld + d];
}

/* address of row t of head h of batch b in a strided tensor */
#define POLAR__AT(p, s, b, h, t) ((p) + (ptrdiff_t)(b) * (s)[0] + (ptrdiff_t)(h) * (s)[1] + \
                                  (ptrdiff_t)(t) * (s)[2])

POLARDEF polar_layout polar_layout_contiguous(int H, int Hkv, int T, int D)
{
    polar_layout l;
    ptrdiff_t td = (ptrdiff_t)T * D;
    l.q[0] = l.c[0] = (ptrdiff_t)H * td;
    l.k[0] = l.v[0] = (ptrdiff_t)Hkv * td;
    l.q[1] = l.k[1] = l.v[1] = l.c[1] = td;
    l.q[2] = l.k[2] = l.v[2] = l.c[2] = D;
    return l;
}

POLARDEF polar_layout polar_layout_qkv(int H, int T, int D)
{
    polar_layout l;
    ptrdiff_t C = (ptrdiff_t)H * D;
    l.q[0] = l.k[0] = l.v[0] = 3 * C * T;
    l.q[1] = l.k[1] = l.v[1] = D;
    l.q[2] = l.k[2] = l.v[2] = 3 * C;
    l.c[0] = C * T;
    l.c[1] = D;
    l.c[2] = C;
    return l;
}

/* strides non-negative and the last element of each tensor addressable */
static int polar__check_layout(const polar_layout *l, int B, int H, int Hkv, int T, int D)
{
    const ptrdiff_t *s[4];
    int i, j;
    if (!l) return 0;
    s[0] = l->q; s[1] = l->k; s[2] = l->v; s[3] = l->c;
    for (i = 0; i < 4; i++) {
        double hi = (double)D;
        int nh = (i == 1 || i == 2) ? Hkv : H;
        for (j = 0; j < 3; j++)
            if (s[i][j] < 0) return 0;
        hi += (double)(B - 1) * s[i][0] + (double)(nh - 1) * s[i][1] + (double)(T - 1) * s[i][2];
        if (hi * sizeof(float) > (double)PTRDIFF_MAX / 2) return 0;
    }
    return 1;
}

/* ------------------------------------------------------------ sizes */
typedef struct polar__geom {
    int BQ, BK, BQp, BKp, Dp;
    size_t fwd_thread, bwd_thread; /* floats per thread */
    size_t gq;                     /* doubles of the dq accumulator per thread */
    size_t gp;                     /* doubles of the null-sum accumulator per thread */
    int fused;                     /* backward: one pass per kv group (else two passes) */
    size_t rows;                   /* floats in the global row buffers of the backward */
    size_t ref_thread;             /* floats per thread, materialised backward */
    int nthreads;
} polar__geom;

static void polar__geometry(polar__geom *g, const polar_config *cfg, int B, int H, int Hkv,
                            int T, int D)
{
    size_t BQp, BKp, Dp, n;
    g->BQ = cfg->block_q < T ? cfg->block_q : T;
    g->BK = cfg->block_k < T ? cfg->block_k : T;
    g->BQp = (int)polar__rup((size_t)g->BQ, POLAR__MR);
    g->BKp = (int)polar__rup((size_t)g->BK, POLAR__NR);
    g->Dp = (int)polar__rup((size_t)D, POLAR__NR);
    BQp = (size_t)g->BQp; BKp = (size_t)g->BKp; Dp = (size_t)g->Dp;
    /* Tile products are summed in float within a tile; the running sums across tiles
       are double (so the streaming error does not grow with T).
       forward, doubles: acc (BQp x Dp), L, Q2 (BQp); floats: Qt (BQp x Dp),
       Kt (Dp x BKp), Vt (BKp x Dp), S (BQp x BKp), tmp (BQp x Dp), M, alpha, temp (BQp),
       row (Dp) */
    g->fwd_thread = polar__rup(2 * (BQp * Dp + 2 * BQp) + BQp * Dp + Dp * BKp + BKp * Dp +
                               BQp * BKp + BQp * Dp + 3 * BQp + Dp + 16, 16);
    g->nthreads = polar__nthreads(cfg);
    /* Backward schedule. Two passes (query blocks for dq, then key blocks for dk, dv)
       recompute every score tile twice; the one-pass schedule takes a whole (batch, kv
       head) group per item, key blocks outer: each tile's scores are computed once and
       feed dq, dk and dv (5 tile products instead of 7), with the group's dq summed in
       a per-thread (G x T x Dp) double accumulator. Each row's dq still sums its key
       blocks in increasing order and each key block's dk, dv its (head, query block)
       tiles in the same order, so the two schedules give the same bits. One pass is
       chosen when the B*Hkv groups fill the threads well enough that the lost balance
       costs less than the saved products (a ceil(n/threads)/(n/threads) of at most 7/5),
       and its accumulators (threads x G x T x Dp doubles) are no larger than the row
       buffers or 64 MiB. */
    n = (size_t)B * (Hkv > 0 ? (size_t)Hkv : 1);
    g->rows = polar__rup((size_t)B * H * T * ((size_t)D + POLAR__NROW), 16);
    g->gq = (size_t)(H / (Hkv > 0 ? Hkv : 1)) * T * Dp;
    g->fused = n >= (size_t)g->nthreads &&
               (n + g->nthreads - 1) / g->nthreads * g->nthreads * 5 <= n * 7 &&
               (g->gq * g->nthreads * 2 <= g->rows || g->gq * g->nthreads <= ((size_t)8 << 20));
    g->gp = polar__rup((size_t)(H / (Hkv > 0 ? Hkv : 1)) * T, 16); /* keeps Qt aligned */
    if (!g->fused) {
        g->gq = BQp * Dp;
        g->gp = polar__rup(BQp, 16);
    }
    /* backward, doubles: G (gq), dK, dV (BKp x Dp); floats: Q, DS (BQp x Dp),
       Kt, Vt (Dp x BKp), Kr (BKp x Dp), S, dsv (BQp x BKp), tmp (max(BQp,BKp) x Dp),
       gT, wT (BKp x BQp) */
    g->bwd_thread = polar__rup(2 * (g->gq + 2 * BKp * Dp + g->gp) + 2 * BQp * Dp + 2 * Dp * BKp +
                               BKp * Dp + 2 * BQp * BKp + (BQp > BKp ? BQp : BKp) * Dp +
                               2 * BKp * BQp + 16, 16);
    g->ref_thread = (size_t)T + 1 + 2 * (size_t)D + 16;
}

POLARDEF size_t polar_workspace_size(const polar_config *cfg, int B, int H, int Hkv, int T,
                                     int D)
{
    polar__geom g;
    size_t a, b, r;
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, T, D)) return 0;
    polar__geometry(&g, cfg, B, H, Hkv, T, D);
    a = g.fwd_thread * g.nthreads;
    b = g.bwd_thread * g.nthreads + g.rows;
    r = g.ref_thread * g.nthreads;
    if (b > a) a = b;
    if (r > a) a = r;
    return a * sizeof(float) + 64;
}

POLARDEF int polar_params_init(const polar_config *cfg, int H, int D, float *len_gain_raw,
                               float *null_base, float *null_slope_raw, float *mag_beta_raw,
                               float *v_null)
{
    int h;
    if (!cfg || H < 1 || D < 1) return POLAR_EINVAL;
    if (!polar__finite(cfg->init_len_gain_raw) || !polar__finite(cfg->init_null_base) ||
        !polar__finite(cfg->init_null_slope_raw) || !polar__finite(cfg->init_mag_beta_raw))
        return POLAR_EINVAL;
    for (h = 0; h < H; h++) {
        if (len_gain_raw) len_gain_raw[h] = cfg->init_len_gain_raw;
        if (null_base) null_base[h] = cfg->init_null_base;
        if (null_slope_raw) null_slope_raw[h] = cfg->init_null_slope_raw;
        if (mag_beta_raw) mag_beta_raw[h] = cfg->init_mag_beta_raw;
    }
    if (v_null) memset(v_null, 0, (size_t)H * D * sizeof(float));
    return POLAR_OK;
}

/* ------------------------------------------------------------ materialised path */
POLARDEF int polar_forward_ref(const polar_config *cfg, float *c, float *mag,
                               polar_state *st, const float *q, const float *k,
                               const float *v, const polar_params *prm, int B, int H,
                               int Hkv, int T, int D)
{
    int bh;
    double sc;
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, T, D)) return POLAR_EINVAL;
    if (!c || !mag || !st || !st->stats || !st->probs || !q || !k || !v) return POLAR_EINVAL;
    if (!polar__check_params(prm, H, D)) return POLAR_EINVAL;
    sc = 1.0 / sqrt((double)D);
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H, i, j, d;
        int hk = h / (H / Hkv);
        const float *kb = k + ((size_t)b * Hkv + hk) * T * D;
        const float *vb = v + ((size_t)b * Hkv + hk) * T * D;
        const float *vn = prm->v_null + (size_t)h * D;
        for (i = 0; i < T; i++) {
            size_t row = (size_t)bh * T + i;
            const float *qi = q + row * D;
            float *w = st->probs + row * (size_t)(T + 1);
            float *ci = c + row * D, *sti = st->stats + row * POLAR_NSTAT;
            int n = polar__nkeys(cfg->window, i), lo = i + 1 - n;
            double temp, nul, M, aN, pN, L = 0, Q2 = 0, Z, r2 = 0, r, meff, f = cfg->stat_floor;
            polar__row_tn(prm, h, n, &temp, &nul);
            aN = temp * nul;
            /* logits of the visible keys, kept in w for now */
            M = aN;
            for (j = 0; j < T + 1; j++) w[j] = 0.0f;
            for (j = lo; j <= i; j++) {
                double dot = 0;
                for (d = 0; d < D; d++) dot += (double)qi[d] * kb[(size_t)j * D + d];
                w[j] = (float)(temp * (float)(dot * sc));
                if (w[j] > M) M = w[j];
            }
            for (j = lo; j <= i; j++) {
                double p = exp(w[j] - M);
                w[j] = (float)p;
                L += p;
                Q2 += p * p;
            }
            pN = exp(aN - M);
            Z = L + pN;
            /* normalise: w is the softmax over [real, null] */
            for (j = lo; j <= i; j++) w[j] = (float)(w[j] / Z);
            w[T] = (float)(pN / Z);
            for (d = 0; d < D; d++) {
                double s = (double)w[T] * vn[d];
                for (j = lo; j <= i; j++) s += (double)w[j] * vb[(size_t)j * D + d];
                ci[d] = (float)s;
                r2 += s * s;
            }
            r = sqrt(r2);
            for (d = 0; d < D; d++)
                ci[d] = (float)(ci[d] / (r > cfg->norm_eps ? r : (double)cfg->norm_eps));
            meff = L * L * L / ((Q2 > f ? Q2 : f) * (Z > f ? Z : f));
            mag[row] = (float)tanh(polar__softplus(prm->mag_beta_raw[h]) * log1p(meff));
            sti[0] = (float)M;
            sti[1] = (float)L;
            sti[2] = (float)Q2;
            sti[3] = (float)r;
        }
    }
    return POLAR_OK;
}

/* per-row backward scalars shared by both paths: ds (D) out, *Dss = ds.s, *dm = dL/dm_eff,
   *K = dm * m_eff, *dbeta = grad of mag_beta_raw. */
static void polar__row_ds(float *ds, double *Dss, double *dm, double *K, double *dbeta,
                          const float *ci,
                          const float *dci, double r, double magv, double dmagv, double meff,
                          double beta_raw, int D, double eps)
{
    double cdc = 0, rr = r > eps ? r : eps, dot = 0, bsp;
    int d;
    if (r > eps)
        for (d = 0; d < D; d++) cdc += (double)ci[d] * dci[d];
    for (d = 0; d < D; d++) {
        ds[d] = (float)((dci[d] - ci[d] * cdc) / rr);
        dot += (double)ds[d] * ci[d] * rr; /* s = c * max(r, eps) */
    }
    *Dss = dot;
    bsp = polar__softplus(beta_raw);
    *dm = dmagv * (1.0 - magv * magv) * bsp / (1.0 + meff);
    *K = *dm * meff;
    *dbeta = dmagv * (1.0 - magv * magv) * log1p(meff) * polar__sigmoid(beta_raw);
}

static int polar__check_bwd(const polar_config *cfg, float *dq, float *dk, float *dv,
                            const float *dc, const float *c, const float *mag,
                            const polar_state *st, const float *q, const float *k,
                            const float *v, const polar_params *prm, int B, int H, int Hkv,
                            int T, int D)
{
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, T, D)) return 0;
    if (!dq || !dk || !dv || !dc || !c || !mag || !st || !st->stats || !q || !k || !v)
        return 0;
    return polar__check_params(prm, H, D);
}

/* fixed-order reduction of the per-head parameter grads from per-row values */
static void polar__reduce_param_grads(polar_grads *gr, const float *rows, const float *ds,
                                      const polar_params *prm, const polar_config *cfg, int B,
                                      int H, int T, int D)
{
    int h, b, i, d;
    if (!gr) return;
    for (h = 0; h < H; h++) {
        double dlg = 0, dnb = 0, dns = 0, dbeta = 0;
        double sl = polar__sigmoid(prm->len_gain_raw[h]);
        double ss = polar__sigmoid(prm->null_slope_raw[h]);
        for (b = 0; b < B; b++)
            for (i = 0; i < T; i++) {
                size_t row = ((size_t)b * H + h) * T + i;
                const float *ro = rows + row * POLAR__NROW;
                double n = (double)polar__nkeys(cfg->window, i);
                dlg += ro[POLAR__R_DT] * log(n) * sl;
                dnb += ro[POLAR__R_DU];
                dns += ro[POLAR__R_DU] * sqrt(log(n + 1.0)) * ss;
                dbeta += ro[POLAR__R_DBETA];
                if (gr->v_null) {
                    float wn = ro[POLAR__R_WN];
                    const float *dsr = ds + row * D;
                    float *o = gr->v_null + (size_t)h * D;
                    for (d = 0; d < D; d++) o[d] += wn * dsr[d];
                }
            }
        if (gr->len_gain_raw) gr->len_gain_raw[h] += (float)dlg;
        if (gr->null_base) gr->null_base[h] += (float)dnb;
        if (gr->null_slope_raw) gr->null_slope_raw[h] += (float)dns;
        if (gr->mag_beta_raw) gr->mag_beta_raw[h] += (float)dbeta;
    }
}

POLARDEF int polar_backward_ref(const polar_config *cfg, float *dq, float *dk, float *dv,
                                polar_grads *grads, const float *dc, const float *dmag,
                                const float *c, const float *mag, const polar_state *st,
                                const float *q, const float *k, const float *v,
                                const polar_params *prm, int B, int H, int Hkv, int T,
                                int D, void *workspace)
{
    polar__geom g;
    float *ws, *rows, *dsall;
    int gi, G;
    double sc;
    if (!polar__check_bwd(cfg, dq, dk, dv, dc, c, mag, st, q, k, v, prm, B, H, Hkv, T, D) ||
        !st->probs)
        return POLAR_EINVAL;
    polar__geometry(&g, cfg, B, H, Hkv, T, D);
    ws = (float *)workspace;
    if (!ws) {
        ws = (float *)POLAR_MALLOC(polar_workspace_size(cfg, B, H, Hkv, T, D));
        if (!ws) return POLAR_ENOMEM;
    }
    /* the ref keeps its per-row results in the same row buffers as the streaming path */
    rows = ws;
    dsall = rows + (size_t)B * H * T * POLAR__NROW;
    sc = 1.0 / sqrt((double)D);
    G = H / Hkv;
    /* one kv group per iteration: it owns dk/dv of that group and dq of its heads */
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (gi = 0; gi < B * Hkv; gi++) {
        int b = gi / Hkv, hk = gi % Hkv, hh, i, j, d;
        const float *kb = k + (size_t)gi * T * D, *vb = v + (size_t)gi * T * D;
        float *dkb = dk + (size_t)gi * T * D, *dvb = dv + (size_t)gi * T * D;
        for (hh = 0; hh < G; hh++) {
            int h = hk * G + hh;
            const float *vn = prm->v_null + (size_t)h * D;
            for (i = 0; i < T; i++) {
                size_t row = ((size_t)b * H + h) * T + i;
                const float *w = st->probs + row * (size_t)(T + 1);
                const float *qi = q + row * D;
                float *dqi = dq + row * D, *ds = dsall + row * D;
                float *ro = rows + row * POLAR__NROW;
                int n = polar__nkeys(cfg->window, i), lo = i + 1 - n;
                double temp, nul, Lw = 0, Q2w = 0, meff, Dss, dm, K, dbeta, wN = w[T];
                double dvn = 0, gN, dt = 0, pw = 0;
                polar__row_tn(prm, h, n, &temp, &nul);
                for (j = lo; j <= i; j++) {
                    Lw += w[j];
                    Q2w += (double)w[j] * w[j];
                }
                meff = Q2w > 0 ? Lw * Lw * Lw / Q2w : 0.0;
                polar__row_ds(ds, &Dss, &dm, &K, &dbeta, c + row * D, dc + row * D,
                              st->stats[row * POLAR_NSTAT + 3], mag[row],
                              dmag ? dmag[row] : 0.0, meff, prm->mag_beta_raw[h], D,
                              cfg->norm_eps);
                for (j = lo; j <= i; j++) {
                    const float *kj = kb + (size_t)j * D, *vj = vb + (size_t)j * D;
                    double dsv = 0, dot = 0, gj;
                    for (d = 0; d < D; d++) {
                        dsv += (double)ds[d] * vj[d];
                        dot += (double)qi[d] * kj[d];
                    }
                    pw += w[j] * dsv;
                    gj = w[j] * (dsv - Dss);
                    if (Lw > 0) gj += K * (3.0 * w[j] / Lw - 2.0 * w[j] * w[j] / Q2w - w[j]);
                    dt += gj * dot * sc;
                    for (d = 0; d < D; d++) {
                        dqi[d] += (float)(sc * temp * gj * kj[d]);
                        dkb[(size_t)j * D + d] += (float)(sc * temp * gj * qi[d]);
                        dvb[(size_t)j * D + d] += (float)(w[j] * ds[d]);
                    }
                }
                for (d = 0; d < D; d++) dvn += (double)ds[d] * vn[d];
                if (POLAR__NULL_SUM((float)wN))
                    gN = -pw + Dss * Lw - K * wN; /* -sum_j g_j (see POLAR__NULL_SUM) */
                else
                    gN = wN * (dvn - Dss - K);
                ro[POLAR__R_DT] = (float)(dt + gN * nul);
                ro[POLAR__R_DU] = (float)(temp * gN);
                ro[POLAR__R_DBETA] = (float)dbeta;
                ro[POLAR__R_WN] = (float)wN;
            }
        }
    }
    polar__reduce_param_grads(grads, rows, dsall, prm, cfg, B, H, T, D);
    if (!workspace) POLAR_FREE(ws);
    return POLAR_OK;
}

/* ------------------------------------------------------------ streaming path */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
/* cuda/polar.cuh: 1 for device memory; polar_forward/backward/decode route such pointers
   to the CUDA path on the default stream */
static int polar__cu_dev(const void *p);
#endif
POLARDEF int polar_forward(const polar_config *cfg, float *c, float *mag, polar_state *st,
                           const float *q, const float *k, const float *v,
                           const polar_params *prm, int B, int H, int Hkv, int T, int D,
                           void *workspace)
{
    polar_layout lay;
    if (!polar__check_dims(B, H, Hkv, T, D)) return POLAR_EINVAL;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (polar__cu_dev(q)) /* device pointers: the CUDA path on the default stream */
        return polar_forward_cuda(cfg, c, mag, st, q, k, v, prm, B, H, Hkv, T, D, NULL, NULL);
#endif
    lay = polar_layout_contiguous(H, Hkv, T, D);
    return polar_forward_strided(cfg, &lay, c, mag, st, q, k, v, prm, B, H, Hkv, T, D,
                                 workspace, (size_t)-1);
}

POLARDEF int polar_forward_strided(const polar_config *cfg, const polar_layout *lay, float *c,
                                   float *mag, polar_state *st, const float *q, const float *k,
                                   const float *v, const polar_params *prm, int B, int H,
                                   int Hkv, int T, int D, void *workspace,
                                   size_t workspace_bytes)
{
    polar__geom g;
    float *ws;
    int nqb, nitems, nth, ch;
    float scf;
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, T, D)) return POLAR_EINVAL;
    if (!polar__check_layout(lay, B, H, Hkv, T, D)) return POLAR_EINVAL;
    if (!c || !mag || !st || !st->stats || !q || !k || !v) return POLAR_EINVAL;
    if (!polar__check_params(prm, H, D)) return POLAR_EINVAL;
    polar__geometry(&g, cfg, B, H, Hkv, T, D);
    if (workspace && workspace_bytes < g.fwd_thread * g.nthreads * sizeof(float))
        return POLAR_ERANGE;
    ws = (float *)workspace;
    if (!ws) { /* only the per-thread tiles: O(block) */
        ws = (float *)POLAR_MALLOC(g.fwd_thread * g.nthreads * sizeof(float) + 64);
        if (!ws) return POLAR_ENOMEM;
    }
    nqb = (T + g.BQ - 1) / g.BQ;
    nitems = B * H * nqb;
    nth = g.nthreads;
    scf = (float)(1.0 / sqrt((double)D));
    (void)nth;
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads(nth)
#endif
    for (ch = 0; ch < nth; ch++) { /* chunk ch: its own scratch, items ch, ch+nth, ... */
        int tid = ch, it;
        float *Qt, *Kt, *Vt, *S, *tmp, *mrow, *arow, *trow, *Srow;
        double *acc, *lrow, *q2row;
        int BQp = g.BQp, BKp = g.BKp, Dp = g.Dp;
        acc = (double *)(void *)(ws + (size_t)tid * g.fwd_thread);
        lrow = acc + (size_t)BQp * Dp;
        q2row = lrow + BQp;
        Qt = (float *)(void *)(q2row + BQp);
        Kt = Qt + (size_t)BQp * Dp;
        Vt = Kt + (size_t)Dp * BKp;
        S = Vt + (size_t)BKp * Dp;
        tmp = S + (size_t)BQp * BKp;
        mrow = tmp + (size_t)BQp * Dp;
        arow = mrow + BQp;
        trow = arow + BQp;
        Srow = trow + BQp;
        for (it = ch; it < nitems; it += nth) {
            /* interleave query blocks so that static chunks balance the causal work */
            int qb = nqb - 1 - it % nqb, bh = it / nqb;
            int b = bh / H, h = bh % H, hk = h / (H / Hkv);
            int i0 = qb * g.BQ, nr = (T - i0) < g.BQ ? (T - i0) : g.BQ;
            int i1 = i0 + nr - 1, r, cc, d, j0, jstart;
            const float *kb = POLAR__AT(k, lay->k, b, hk, 0);
            const float *vb = POLAR__AT(v, lay->v, b, hk, 0);
            polar__load_rows(Qt, Dp, BQp, POLAR__AT(q, lay->q, b, h, i0), lay->q[2], D, nr);
            for (r = 0; r < BQp; r++) {
                mrow[r] = -INFINITY;
                lrow[r] = 0.0;
                q2row[r] = 0.0;
            }
            for (r = 0; r < BQp * Dp; r++) acc[r] = 0.0;
            for (r = 0; r < nr; r++) { /* temp * scale per row, once per query block */
                double temp, nul;
                polar__row_tn(prm, h, polar__nkeys(cfg->window, i0 + r), &temp, &nul);
                trow[r] = (float)temp * scf;
            }
            jstart = i0 + 1 - polar__nkeys(cfg->window, i0);
            jstart = jstart / g.BK * g.BK;
            for (j0 = jstart; j0 <= i1; j0 += g.BK) {
                int nc = (T - j0) < g.BK ? (T - j0) : g.BK;
                polar__load_cols(Kt, BKp, Dp, kb + j0 * lay->k[2], lay->k[2], D, nc);
                polar__load_rows(Vt, Dp, BKp, vb + j0 * lay->v[2], lay->v[2], D, nc);
                polar__gemm(S, BKp, Qt, Dp, Kt, BKp, BQp, BKp, Dp, 0);
                for (r = 0; r < nr; r++) {
                    int i = i0 + r, lo = i + 1 - polar__nkeys(cfg->window, i);
                    int c0 = lo - j0, c1 = i - j0; /* visible columns [c0, c1] */
                    float tf = trow[r], mx, mnew, alpha, l = 0, q2 = 0;
                    float *sr = S + (size_t)r * BKp;
                    if (c0 < 0) c0 = 0;
                    if (c1 > nc - 1) c1 = nc - 1;
                    arow[r] = 1.0f;
                    if (c0 > c1) { /* nothing visible in this block: p = 0 */
                        for (cc = 0; cc < BKp; cc++) sr[cc] = 0.0f;
                        continue;
                    }
                    for (cc = c0; cc <= c1; cc++) sr[cc] *= tf;
                    mx = polar__vmax(sr + c0, c1 - c0 + 1);
                    mnew = mrow[r] > mx ? mrow[r] : mx;
                    alpha = expf(mrow[r] - mnew);
                    for (cc = 0; cc < c0; cc++) sr[cc] = 0.0f;
                    polar__vexp(sr + c0, c1 - c0 + 1, 1.0f, mnew);
                    for (cc = c1 + 1; cc < BKp; cc++) sr[cc] = 0.0f;
                    polar__vsum2(sr, BKp, &l, &q2);
                    lrow[r] = lrow[r] * alpha + l;
                    q2row[r] = q2row[r] * ((double)alpha * alpha) + q2;
                    mrow[r] = mnew;
                    arow[r] = alpha;
                }
                for (r = nr; r < BQp; r++) memset(S + (size_t)r * BKp, 0, (size_t)BKp * sizeof(float));
                polar__gemm(tmp, Dp, S, BKp, Vt, Dp, BQp, Dp, BKp, 0);
                for (r = 0; r < nr; r++) {
                    double *ar = acc + (size_t)r * Dp, al = arow[r];
                    const float *tr = tmp + (size_t)r * Dp;
                    if (al != 1.0)
                        for (d = 0; d < D; d++) ar[d] = ar[d] * al + tr[d];
                    else
                        for (d = 0; d < D; d++) ar[d] += tr[d];
                }
            }
            /* fold in the null sink and finish each row */
            for (r = 0; r < nr; r++) {
                int i = i0 + r, n = polar__nkeys(cfg->window, i);
                size_t row = (size_t)bh * T + i;
                double temp, nul, aN, M, alpha, pN, L, Q2, Z, rn;
                const double *ar = acc + (size_t)r * Dp;
                const float *vn = prm->v_null + (size_t)h * D;
                polar__row_tn(prm, h, n, &temp, &nul);
                aN = temp * nul;
                M = mrow[r] > aN ? (double)mrow[r] : aN;
                alpha = exp((double)mrow[r] - M);
                pN = exp(aN - M);
                L = lrow[r] * alpha;
                Q2 = q2row[r] * alpha * alpha;
                Z = L + pN;
                for (d = 0; d < D; d++) Srow[d] = (float)(ar[d] * alpha + pN * vn[d]);
                rn = polar__finish_row(POLAR__AT(c, lay->c, b, h, i), mag + row, Srow, L, Q2, Z, D,
                                       prm->mag_beta_raw[h], cfg);
                st->stats[row * POLAR_NSTAT + 0] = (float)M;
                st->stats[row * POLAR_NSTAT + 1] = (float)L;
                st->stats[row * POLAR_NSTAT + 2] = (float)Q2;
                st->stats[row * POLAR_NSTAT + 3] = (float)rn;
            }
        }
    }
    if (!workspace) POLAR_FREE(ws);
    return POLAR_OK;
}

/* Recompute the p tile of one (query block, key block) pair from the saved per-row M and
   temperature, and the logit gradients g (in place of dsv) and, if wT is given, the
   transposed weights w = p/Z and transposed g for the key pass.
   S (BQp x BKp) in: q.k raw; out: p. dsv (BQp x BKp) in: ds.v; out: g. */
static void polar__bwd_tile(float *S, float *dsv, const float *rows, int BKp, int nr, int nc,
                            int i0, int j0, int window, float scf, double *P)
{
    int r, cc;
    for (r = 0; r < nr; r++) {
        const float *ro = rows + (size_t)r * POLAR__NROW;
        int i = i0 + r, lo = i + 1 - polar__nkeys(window, i);
        int c0 = lo - j0, c1 = i - j0;
        float *sr = S + (size_t)r * BKp, *gr = dsv + (size_t)r * BKp;
        float tf = ro[POLAR__R_T] * scf, M = ro[POLAR__R_M];
        float A = ro[POLAR__R_A], Bc = ro[POLAR__R_B], Cc = ro[POLAR__R_C];
        if (c0 < 0) c0 = 0;
        if (c1 > nc - 1) c1 = nc - 1;
        for (cc = 0; cc < c0 && cc < BKp; cc++) sr[cc] = gr[cc] = 0.0f;
        if (c0 <= c1) polar__vexp(sr + c0, c1 - c0 + 1, tf, M);
        if (P && POLAR__NULL_SUM(ro[POLAR__R_WN]) && c0 <= c1)
            P[r] += (double)polar__vdot(sr + c0, gr + c0, c1 - c0 + 1);
        for (cc = c0; cc <= c1; cc++) {
            float p = sr[cc];
            gr[cc] = p * (A * gr[cc] + Bc) - Cc * p * p;
        }
        for (cc = (c1 + 1 > c0 ? c1 + 1 : c0); cc < BKp; cc++) sr[cc] = gr[cc] = 0.0f;
    }
}

/* One thread's backward scratch (see polar__geometry): the double accumulators Gq (gq),
   dK, dV (BKp x Dp), then the float tiles. */
typedef struct polar__bwd_scratch {
    double *Gq, *dK, *dV, *Pq;
    float *Qt, *DS, *Kt, *Vt, *Kr, *S, *dsv, *tmp, *gT, *wT;
} polar__bwd_scratch;

static void polar__bwd_scratch_at(polar__bwd_scratch *s, const polar__geom *g, float *base)
{
    size_t BQp = (size_t)g->BQp, BKp = (size_t)g->BKp, Dp = (size_t)g->Dp;
    s->Gq = (double *)(void *)base;
    s->dK = s->Gq + g->gq;
    s->dV = s->dK + BKp * Dp;
    s->Pq = s->dV + BKp * Dp;
    s->Qt = (float *)(void *)(s->Pq + g->gp);
    s->DS = s->Qt + BQp * Dp;
    s->Kt = s->DS + BQp * Dp;
    s->Vt = s->Kt + Dp * BKp;
    s->Kr = s->Vt + Dp * BKp;
    s->S = s->Kr + BKp * Dp;
    s->dsv = s->S + BQp * BKp;
    s->tmp = s->dsv + BQp * BKp;
    s->gT = s->tmp + (BQp > BKp ? BQp : BKp) * Dp;
    s->wT = s->gT + BKp * BQp;
}

/* S = p and dsv = g of the tile of Qt/DS (query block at i0, nr rows) against Kt/Vt
   (key block at j0, nc keys) */
static void polar__bwd_scores(polar__bwd_scratch *s, const polar__geom *g, const float *rws,
                              int nr, int nc, int i0, int j0, int window, float scf, double *P)
{
    polar__gemm(s->S, g->BKp, s->Qt, g->Dp, s->Kt, g->BKp, g->BQp, g->BKp, g->Dp, 0);
    polar__gemm(s->dsv, g->BKp, s->DS, g->Dp, s->Vt, g->BKp, g->BQp, g->BKp, g->Dp, 0);
    polar__bwd_tile(s->S, s->dsv, rws, g->BKp, nr, nc, i0, j0, window, scf, P);
}

/* Gq (nr x Dp, doubles) += g Kr: this tile's share of the query rows' dq */
static void polar__bwd_dq_tile(double *Gq, polar__bwd_scratch *s, const polar__geom *g, int nr)
{
    int r;
    for (r = nr; r < g->BQp; r++) memset(s->dsv + (size_t)r * g->BKp, 0, (size_t)g->BKp * sizeof(float));
    polar__gemm(s->tmp, g->Dp, s->dsv, g->BKp, s->Kr, g->Dp, g->BQp, g->Dp, g->BKp, 0);
    for (r = 0; r < nr * g->Dp; r++) Gq[r] += s->tmp[r];
}

/* dq of rows [i0, i0+nr) of head h from their summed Gq rows (row stride Dp), the
   real-key part of their temperature grads, and (POLAR__NULL_SUM rows) the P part of
   their null logit gradient from their summed P */
static void polar__bwd_dq_finish(const double *Gq, const double *P, int Dp, float *rows,
                                 const polar_layout *lay, float *dq, const float *q, int b,
                                 int h, int H, int T, int i0, int nr, int D, float scf)
{
    int r, d;
    for (r = 0; r < nr; r++) {
        size_t row = ((size_t)b * H + h) * T + i0 + r;
        float *ro = rows + row * POLAR__NROW;
        float *dqi = POLAR__AT(dq, lay->q, b, h, i0 + r);
        const float *qi = POLAR__AT(q, lay->q, b, h, i0 + r);
        const double *gq = Gq + (size_t)r * Dp;
        double dot = 0, f = (double)ro[POLAR__R_T] * scf;
        for (d = 0; d < D; d++) {
            dot += qi[d] * gq[d];
            dqi[d] += (float)(f * gq[d]);
        }
        ro[POLAR__R_DT] += (float)(dot * scf);
        if (POLAR__NULL_SUM(ro[POLAR__R_WN])) {
            double gp = -P[r] * ro[POLAR__R_A];
            ro[POLAR__R_DT] += (float)(gp * ro[POLAR__R_NUL]);
            ro[POLAR__R_DU] += (float)(gp * ro[POLAR__R_T]);
        }
    }
}

/* dk, dv of key block kb_i of kv head hk (batch b), summed over its group's heads and
   their query blocks in order; with_dq: each tile also adds its dq share to the group's
   (G x T x Dp) accumulator s->Gq (the one-pass schedule). */
static void polar__bwd_key_block(polar__bwd_scratch *s, const polar__geom *g,
                                 const polar_config *cfg, const polar_layout *lay,
                                 const float *rows, const float *dsall, const float *q,
                                 const float *k, const float *v, float *dk, float *dv, int b,
                                 int hk, int kb_i, int H, int G, int T, int D, float scf,
                                 int with_dq)
{
    int BQp = g->BQp, BKp = g->BKp, Dp = g->Dp, hh, r, cc, d;
    int j0 = kb_i * g->BK, nc = (T - j0) < g->BK ? (T - j0) : g->BK, j1 = j0 + nc - 1;
    int ilast = T - 1;
    const float *kb = POLAR__AT(k, lay->k, b, hk, 0);
    const float *vb = POLAR__AT(v, lay->v, b, hk, 0);
    if (cfg->window > 0 && (long)j1 + cfg->window - 1 < ilast) ilast = j1 + cfg->window - 1;
    polar__load_cols(s->Kt, BKp, Dp, kb + j0 * lay->k[2], lay->k[2], D, nc);
    polar__load_cols(s->Vt, BKp, Dp, vb + j0 * lay->v[2], lay->v[2], D, nc);
    if (with_dq) polar__load_rows(s->Kr, Dp, BKp, kb + j0 * lay->k[2], lay->k[2], D, nc);
    for (r = 0; r < BKp * Dp; r++) s->dK[r] = s->dV[r] = 0.0;
    for (hh = 0; hh < G; hh++) {
        int h = hk * G + hh, bhq = b * H + h, qb;
        for (qb = j0 / g->BQ; qb * g->BQ <= ilast; qb++) {
            int i0 = qb * g->BQ, nr = (T - i0) < g->BQ ? (T - i0) : g->BQ;
            const float *rws = rows + ((size_t)bhq * T + i0) * POLAR__NROW;
            polar__load_rows(s->Qt, Dp, BQp, POLAR__AT(q, lay->q, b, h, i0), lay->q[2], D, nr);
            polar__load_rows(s->DS, Dp, BQp, dsall + ((size_t)bhq * T + i0) * D, D, D, nr);
            polar__bwd_scores(s, g, rws, nr, nc, i0, j0, cfg->window, scf,
                              with_dq ? s->Pq + (size_t)hh * T + i0 : NULL);
            if (with_dq) polar__bwd_dq_tile(s->Gq + ((size_t)hh * T + i0) * Dp, s, g, nr);
            /* transpose: gT[c][r] = temp_r * scale * g[r][c], wT[c][r] = p[r][c] / Z_r */
            for (r = 0; r < BQp; r++) {
                float fg = 0.0f, fw = 0.0f;
                if (r < nr) {
                    fg = rws[(size_t)r * POLAR__NROW + POLAR__R_T] * scf;
                    fw = rws[(size_t)r * POLAR__NROW + POLAR__R_A];
                }
                for (cc = 0; cc < BKp; cc++) {
                    s->gT[(size_t)cc * BQp + r] = fg * s->dsv[(size_t)r * BKp + cc];
                    s->wT[(size_t)cc * BQp + r] = fw * s->S[(size_t)r * BKp + cc];
                }
            }
            polar__gemm(s->tmp, Dp, s->gT, BQp, s->Qt, Dp, BKp, Dp, BQp, 0);
            for (r = 0; r < nc * Dp; r++) s->dK[r] += s->tmp[r];
            polar__gemm(s->tmp, Dp, s->wT, BQp, s->DS, Dp, BKp, Dp, BQp, 0);
            for (r = 0; r < nc * Dp; r++) s->dV[r] += s->tmp[r];
        }
    }
    for (cc = 0; cc < nc; cc++) {
        float *dkj = POLAR__AT(dk, lay->k, b, hk, j0 + cc);
        float *dvj = POLAR__AT(dv, lay->v, b, hk, j0 + cc);
        for (d = 0; d < D; d++) {
            dkj[d] += (float)s->dK[(size_t)cc * Dp + d];
            dvj[d] += (float)s->dV[(size_t)cc * Dp + d];
        }
    }
}

POLARDEF int polar_backward(const polar_config *cfg, float *dq, float *dk, float *dv,
                            polar_grads *grads, const float *dc, const float *dmag,
                            const float *c, const float *mag, const polar_state *st,
                            const float *q, const float *k, const float *v,
                            const polar_params *prm, int B, int H, int Hkv, int T, int D,
                            void *workspace)
{
    polar_layout lay;
    if (!polar__check_dims(B, H, Hkv, T, D)) return POLAR_EINVAL;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (polar__cu_dev(q)) /* device pointers: the CUDA path; a device workspace is used */
        return polar_backward_cuda(cfg, dq, dk, dv, grads, dc, dmag, c, mag, st, q, k, v, prm,
                                   B, H, Hkv, T, D, polar__cu_dev(workspace) ? workspace : NULL,
                                   NULL);
#endif
    lay = polar_layout_contiguous(H, Hkv, T, D);
    return polar_backward_strided(cfg, &lay, dq, dk, dv, grads, dc, dmag, c, mag, st, q, k, v,
                                  prm, B, H, Hkv, T, D, workspace, (size_t)-1);
}

POLARDEF int polar_backward_strided(const polar_config *cfg, const polar_layout *lay,
                                    float *dq, float *dk, float *dv, polar_grads *grads,
                                    const float *dc, const float *dmag, const float *c,
                                    const float *mag, const polar_state *st, const float *q,
                                    const float *k, const float *v, const polar_params *prm,
                                    int B, int H, int Hkv, int T, int D, void *workspace,
                                    size_t workspace_bytes)
{
    polar__geom g;
    float *ws, *rows, *dsall, *tws;
    int nqb, nkb, nth, ch, bh, G;
    float scf;
    if (!polar__check_bwd(cfg, dq, dk, dv, dc, c, mag, st, q, k, v, prm, B, H, Hkv, T, D) ||
        !polar__check_layout(lay, B, H, Hkv, T, D))
        return POLAR_EINVAL;
    polar__geometry(&g, cfg, B, H, Hkv, T, D);
    if (workspace && workspace_bytes < (g.bwd_thread * g.nthreads + g.rows) * sizeof(float))
        return POLAR_ERANGE;
    ws = (float *)workspace;
    if (!ws) {
        ws = (float *)POLAR_MALLOC(polar_workspace_size(cfg, B, H, Hkv, T, D));
        if (!ws) return POLAR_ENOMEM;
    }
    rows = ws;
    dsall = rows + (size_t)B * H * T * POLAR__NROW;
    tws = rows + g.rows;
    nqb = (T + g.BQ - 1) / g.BQ;
    nkb = (T + g.BK - 1) / g.BK;
    nth = g.nthreads;
    scf = (float)(1.0 / sqrt((double)D));
    G = H / Hkv;
    (void)nth;

    /* 1. per-row preamble: ds, the scalars of g, the null-sink and beta grads */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nth)
#endif
    for (bh = 0; bh < B * H; bh++) {
        int h = bh % H, i, d;
        const float *vn = prm->v_null + (size_t)h * D;
        double f = cfg->stat_floor;
        for (i = 0; i < T; i++) {
            size_t row = (size_t)bh * T + i;
            const float *sti = st->stats + row * POLAR_NSTAT;
            float *ro = rows + row * POLAR__NROW, *ds = dsall + row * D;
            int n = polar__nkeys(cfg->window, i);
            double temp, nul, M = sti[0], L = sti[1], Q2 = sti[2], pN, Z, Zf, Qf, meff;
            double Dss, K, dbeta, dvn = 0, gN, dm;
            polar__row_tn(prm, h, n, &temp, &nul);
            pN = exp(temp * nul - M);
            Z = L + pN;
            Zf = Z > f ? Z : f;
            Qf = Q2 > f ? Q2 : f;
            meff = L * L * L / (Qf * Zf);
            polar__row_ds(ds, &Dss, &dm, &K, &dbeta, POLAR__AT(c, lay->c, bh / H, h, i),
                          POLAR__AT(dc, lay->c, bh / H, h, i), sti[3], mag[row],
                          dmag ? dmag[row] : 0.0, meff, prm->mag_beta_raw[h], D,
                          cfg->norm_eps);
            /* the K terms are written without dividing by L or m_eff */
            ro[POLAR__R_M] = (float)M;
            ro[POLAR__R_T] = (float)temp;
            ro[POLAR__R_A] = (float)(1.0 / Zf);
            /* g_j = p_j (ds.v_j / Z + 3K/L - K/Z - Dss/Z) - (2K/Q2) p_j^2 */
            ro[POLAR__R_B] = (float)(dm * 3.0 * L * L / (Qf * Zf) - (K + Dss) / Zf);
            ro[POLAR__R_C] = (float)(Q2 >= f ? 2.0 * dm * L * L * L / (Qf * Qf * Zf) : 0.0);
            ro[POLAR__R_WN] = (float)(pN / Zf);
            ro[POLAR__R_NUL] = (float)nul;
            if (POLAR__NULL_SUM(ro[POLAR__R_WN])) {
                /* -sum_j g_j without its P/Z part, which the query pass adds */
                gN = Dss * (L / Zf) - K * (pN / Zf);
            } else {
                for (d = 0; d < D; d++) dvn += (double)ds[d] * vn[d];
                gN = pN / Zf * (dvn - Dss - K);
            }
            ro[POLAR__R_DT] = (float)(gN * nul); /* the real-key part is added in pass 2 */
            ro[POLAR__R_DU] = (float)(temp * gN);
            ro[POLAR__R_DBETA] = (float)dbeta;
        }
    }

    if (g.fused) {
        /* 2+3. one pass: one (batch, kv head) group per item, key blocks outer */
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads(nth)
#endif
        for (ch = 0; ch < nth; ch++) { /* chunk ch: its own scratch, items ch, ch+nth, ... */
            polar__bwd_scratch sc;
            int it;
            polar__bwd_scratch_at(&sc, &g, tws + (size_t)ch * g.bwd_thread);
            for (it = ch; it < B * Hkv; it += nth) {
                int b = it / Hkv, hk = it % Hkv, hh, kb_i;
                memset(sc.Gq, 0, g.gq * sizeof(double));
                memset(sc.Pq, 0, g.gp * sizeof(double));
                for (kb_i = 0; kb_i < nkb; kb_i++)
                    polar__bwd_key_block(&sc, &g, cfg, lay, rows, dsall, q, k, v, dk, dv, b, hk,
                                         kb_i, H, G, T, D, scf, 1);
                for (hh = 0; hh < G; hh++)
                    polar__bwd_dq_finish(sc.Gq + (size_t)hh * T * g.Dp, sc.Pq + (size_t)hh * T,
                                         g.Dp, rows, lay, dq, q, b, hk * G + hh, H, T, 0, T, D,
                                         scf);
            }
        }
    } else {
        /* 2. query pass (dq and the real-key part of the temperature grad), then 3. key
           pass (dk, dv; one (batch, kv head, key block) per item, over its group). The key
           pass reads none of what the query pass writes, so a thread goes on to its key
           items without waiting for the others. */
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads(nth)
#endif
        for (ch = 0; ch < nth; ch++) {
            polar__bwd_scratch sc;
            int it;
            polar__bwd_scratch_at(&sc, &g, tws + (size_t)ch * g.bwd_thread);
            for (it = ch; it < B * H * nqb; it += nth) {
                int qb = nqb - 1 - it % nqb, bhq = it / nqb;
                int b = bhq / H, h = bhq % H, hk = h / G;
                int i0 = qb * g.BQ, nr = (T - i0) < g.BQ ? (T - i0) : g.BQ;
                int i1 = i0 + nr - 1, r, j0, jstart;
                const float *kb = POLAR__AT(k, lay->k, b, hk, 0);
                const float *vb = POLAR__AT(v, lay->v, b, hk, 0);
                const float *rws = rows + ((size_t)bhq * T + i0) * POLAR__NROW;
                polar__load_rows(sc.Qt, g.Dp, g.BQp, POLAR__AT(q, lay->q, b, h, i0), lay->q[2],
                                 D, nr);
                polar__load_rows(sc.DS, g.Dp, g.BQp, dsall + ((size_t)bhq * T + i0) * D, D, D,
                                 nr);
                for (r = 0; r < g.BQp * g.Dp; r++) sc.Gq[r] = 0.0;
                for (r = 0; r < g.BQp; r++) sc.Pq[r] = 0.0;
                jstart = i0 + 1 - polar__nkeys(cfg->window, i0);
                jstart = jstart / g.BK * g.BK;
                for (j0 = jstart; j0 <= i1; j0 += g.BK) {
                    int nc = (T - j0) < g.BK ? (T - j0) : g.BK;
                    polar__load_cols(sc.Kt, g.BKp, g.Dp, kb + j0 * lay->k[2], lay->k[2], D, nc);
                    polar__load_cols(sc.Vt, g.BKp, g.Dp, vb + j0 * lay->v[2], lay->v[2], D, nc);
                    polar__load_rows(sc.Kr, g.Dp, g.BKp, kb + j0 * lay->k[2], lay->k[2], D, nc);
                    polar__bwd_scores(&sc, &g, rws, nr, nc, i0, j0, cfg->window, scf, sc.Pq);
                    polar__bwd_dq_tile(sc.Gq, &sc, &g, nr);
                }
                polar__bwd_dq_finish(sc.Gq, sc.Pq, g.Dp, rows, lay, dq, q, b, h, H, T, i0, nr, D,
                                     scf);
            }
            for (it = ch; it < B * Hkv * nkb; it += nth)
                polar__bwd_key_block(&sc, &g, cfg, lay, rows, dsall, q, k, v, dk, dv,
                                     (it / nkb) / Hkv, (it / nkb) % Hkv, it % nkb, H, G, T, D,
                                     scf, 0);
        }
    }

    /* 4. per-head parameter grads, fixed order */
    polar__reduce_param_grads(grads, rows, dsall, prm, cfg, B, H, T, D);
    if (!workspace) POLAR_FREE(ws);
    return POLAR_OK;
}

/* ------------------------------------------------------------ paged decode */
POLARDEF int polar_decode(const polar_config *cfg, float *c, float *mag, const float *q,
                          const float *k_cache, const float *v_cache,
                          const int *block_table, const int *seq_lens,
                          const polar_params *prm, int B, int H, int Hkv, int D,
                          int block_size, int num_blocks, int max_blocks)
{
    int b, ch, G, rc = POLAR_OK;
    double *ws;
    size_t per;
    int nth, sb;
    double sc;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (polar__cu_dev(q)) /* device pointers: the CUDA path on the default stream */
        return polar_decode_cuda(cfg, c, mag, q, k_cache, v_cache, block_table, seq_lens, prm, B,
                                 H, Hkv, D, block_size, num_blocks, max_blocks, NULL);
#endif
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, 1, D)) return POLAR_EINVAL;
    if (!c || !mag || !q || !k_cache || !v_cache || !block_table || !seq_lens)
        return POLAR_EINVAL;
    if (block_size < 1 || num_blocks < 1 || max_blocks < 1) return POLAR_EINVAL;
    if ((double)num_blocks * Hkv * block_size * D > (double)SIZE_MAX / 8) return POLAR_EINVAL;
    if (!polar__check_params(prm, H, D)) return POLAR_EINVAL;
    for (b = 0; b < B; b++) {
        int len = seq_lens[b], nb, x;
        if (len < 0 || (double)len > (double)max_blocks * block_size) return POLAR_ERANGE;
        nb = (len + block_size - 1) / block_size;
        for (x = 0; x < nb; x++) {
            int e = block_table[(size_t)b * max_blocks + x];
            if (e < 0 || e >= num_blocks) return POLAR_ERANGE;
        }
    }
    G = H / Hkv;
    nth = polar__nthreads(cfg);
    /* per thread: G rows of (m, l, q2, acc[D]) and a score row of block_size per head */
    sb = block_size > D ? block_size : D; /* score row; reused for the final s (D floats) */
    per = (size_t)G * (3 + (size_t)D + (size_t)sb) + 16;
    ws = (double *)POLAR_MALLOC(per * nth * sizeof(double));
    if (!ws) return POLAR_ENOMEM;
    sc = 1.0 / sqrt((double)D);
    (void)nth;
#ifdef _OPENMP
#pragma omp parallel for schedule(static, 1) num_threads(nth)
#endif
    for (ch = 0; ch < nth; ch++) { /* chunk ch: its own scratch, groups ch, ch+nth, ... */
        int tid = ch, gi;
        for (gi = ch; gi < B * Hkv; gi += nth) {
            double *tw = ws + (size_t)tid * per;
            double *ms = tw, *ls = ms + G, *q2s = ls + G, *acc = q2s + G;
            double *sco = acc + (size_t)G * D;
            int bb = gi / Hkv, hk = gi % Hkv, hh, x, j, d;
            int len = seq_lens[bb], n = len < 1 ? 0 : polar__nkeys(cfg->window, len - 1);
            int lo = len - n, nblk = (len + block_size - 1) / block_size;
            for (hh = 0; hh < G; hh++) {
                ms[hh] = -INFINITY;
                ls[hh] = q2s[hh] = 0.0;
            }
            for (j = 0; j < G * D; j++) acc[j] = 0.0;
            for (x = lo / block_size; x < nblk; x++) {
                int blk = block_table[(size_t)bb * max_blocks + x];
                const float *kc = k_cache + ((size_t)blk * Hkv + hk) * block_size * D;
                const float *vc = v_cache + ((size_t)blk * Hkv + hk) * block_size * D;
                int ja = x * block_size, jb = ja + block_size;
                int s0 = (lo > ja ? lo : ja) - ja, s1 = (len < jb ? len : jb) - ja; /* [s0,s1) */
                if (s0 >= s1) continue;
                /* one pass over the cached block serves all G heads of the group */
                for (hh = 0; hh < G; hh++) {
                    int h = hk * G + hh;
                    const float *qh = q + ((size_t)bb * H + h) * D;
                    double *sr = sco + (size_t)hh * sb, mx = -INFINITY, mnew, al;
                    double l = 0, q2 = 0, *ah = acc + (size_t)hh * D;
                    double temp, nul, tf;
                    polar__row_tn(prm, h, n, &temp, &nul);
                    tf = temp * sc;
                    /* four keys at a time: each one's dot product is the same chain over
                       d in order (the same bits as one key at a time), four independent
                       chains in flight instead of one latency-bound one */
                    for (j = s0; j + 4 <= s1; j += 4) {
                        const float *k0 = kc + (size_t)j * D, *k1 = k0 + D, *k2 = k1 + D,
                                    *k3 = k2 + D;
                        float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
                        int u;
                        for (d = 0; d < D; d++) {
                            const float qd = qh[d];
                            d0 += qd * k0[d];
                            d1 += qd * k1[d];
                            d2 += qd * k2[d];
                            d3 += qd * k3[d];
                        }
                        sr[j] = d0 * tf;
                        sr[j + 1] = d1 * tf;
                        sr[j + 2] = d2 * tf;
                        sr[j + 3] = d3 * tf;
                        for (u = 0; u < 4; u++) mx = sr[j + u] > mx ? sr[j + u] : mx;
                    }
                    for (; j < s1; j++) {
                        float dot = 0;
                        for (d = 0; d < D; d++) dot += qh[d] * kc[(size_t)j * D + d];
                        sr[j] = dot * tf;
                        mx = sr[j] > mx ? sr[j] : mx;
                    }
                    mnew = ms[hh] > mx ? ms[hh] : mx;
                    al = exp(ms[hh] - mnew);
                    if (al != 1.0)
                        for (d = 0; d < D; d++) ah[d] *= al;
                    for (j = s0; j < s1; j++) {
                        double p = exp(sr[j] - mnew);
                        l += p;
                        q2 += p * p;
                        for (d = 0; d < D; d++) ah[d] += p * vc[(size_t)j * D + d];
                    }
                    ls[hh] = ls[hh] * al + l;
                    q2s[hh] = q2s[hh] * al * al + q2;
                    ms[hh] = mnew;
                }
            }
            for (hh = 0; hh < G; hh++) {
                int h = hk * G + hh;
                const float *vn = prm->v_null + (size_t)h * D;
                double temp, nul, aN, M, al, pN, L, Q2;
                double *ah = acc + (size_t)hh * D;
                float *Sf = (float *)(void *)(sco + (size_t)hh * sb);
                polar__row_tn(prm, h, n, &temp, &nul);
                aN = temp * nul;
                M = ms[hh] > aN ? ms[hh] : aN;
                al = exp(ms[hh] - M);
                pN = exp(aN - M);
                L = ls[hh] * al;
                Q2 = q2s[hh] * al * al;
                for (d = 0; d < D; d++) Sf[d] = (float)(ah[d] * al + pN * vn[d]);
                polar__finish_row(c + ((size_t)bb * H + h) * D, mag + (size_t)bb * H + h, Sf,
                                  L, Q2, L + pN, D, prm->mag_beta_raw[h], cfg);
            }
        }
    }
    POLAR_FREE(ws);
    return rc;
}

/* ------------------------------------------------------------ output assembly */
POLARDEF int polar_assemble_forward(float *out, const float *c, const float *mag,
                                    const float *gate, const float *W_o, const float *W_mu,
                                    int B, int H, int T, int D, int C)
{
    int bt;
    if (!out || !c || !mag || !W_o || !W_mu) return POLAR_EINVAL;
    if (!polar__check_dims(B, H, H, T, D) || C < 1) return POLAR_EINVAL;
    if ((double)C * H * D > (double)SIZE_MAX / 8 || (double)B * T * C > (double)SIZE_MAX / 8)
        return POLAR_EINVAL;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (bt = 0; bt < B * T; bt++) {
        int b = bt / T, t = bt % T, o, h, d;
        float *ot = out + (size_t)bt * C;
        /* four outputs at a time: each one's sums are the same chains in the same order as
           one output at a time (the same bits), four independent chains in flight */
        for (o = 0; o + 4 <= C; o += 4) {
            const float *wo0 = W_o + (size_t)o * H * D, *wo1 = wo0 + (size_t)H * D,
                        *wo2 = wo1 + (size_t)H * D, *wo3 = wo2 + (size_t)H * D;
            const float *wm0 = W_mu + (size_t)o * H, *wm1 = wm0 + H, *wm2 = wm1 + H,
                        *wm3 = wm2 + H;
            double acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
            for (h = 0; h < H; h++) {
                size_t row = ((size_t)b * H + h) * T + t;
                const float *ch = c + row * D;
                const size_t hd = (size_t)h * D;
                double dot0 = 0, dot1 = 0, dot2 = 0, dot3 = 0;
                double gs = gate ? polar__sigmoid(gate[(size_t)bt * H + h]) : 1.0;
                for (d = 0; d < D; d++) {
                    dot0 += (double)wo0[hd + d] * ch[d];
                    dot1 += (double)wo1[hd + d] * ch[d];
                    dot2 += (double)wo2[hd + d] * ch[d];
                    dot3 += (double)wo3[hd + d] * ch[d];
                }
                acc0 += gs * dot0 + (double)wm0[h] * mag[row];
                acc1 += gs * dot1 + (double)wm1[h] * mag[row];
                acc2 += gs * dot2 + (double)wm2[h] * mag[row];
                acc3 += gs * dot3 + (double)wm3[h] * mag[row];
            }
            ot[o] = (float)acc0;
            ot[o + 1] = (float)acc1;
            ot[o + 2] = (float)acc2;
            ot[o + 3] = (float)acc3;
        }
        for (; o < C; o++) {
            const float *wo = W_o + (size_t)o * H * D, *wm = W_mu + (size_t)o * H;
            double acc = 0;
            for (h = 0; h < H; h++) {
                size_t row = ((size_t)b * H + h) * T + t;
                const float *ch = c + row * D;
                double dot = 0, gs = gate ? polar__sigmoid(gate[(size_t)bt * H + h]) : 1.0;
                for (d = 0; d < D; d++) dot += (double)wo[(size_t)h * D + d] * ch[d];
                acc += gs * dot + (double)wm[h] * mag[row];
            }
            ot[o] = (float)acc;
        }
    }
    return POLAR_OK;
}

POLARDEF int polar_assemble_backward(float *dc, float *dmag, float *dgate, float *dW_o,
                                     float *dW_mu, const float *dout, const float *c,
                                     const float *mag, const float *gate, const float *W_o,
                                     const float *W_mu, int B, int H, int T, int D, int C)
{
    int bt, o;
    if (!dout || !c || !mag || !W_o || !W_mu) return POLAR_EINVAL;
    if (dgate && !gate) return POLAR_EINVAL;
    if (!polar__check_dims(B, H, H, T, D) || C < 1) return POLAR_EINVAL;
    if ((double)C * H * D > (double)SIZE_MAX / 8 || (double)B * T * C > (double)SIZE_MAX / 8)
        return POLAR_EINVAL;
    /* activation grads: parallel over (b, t); each owns its rows */
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (bt = 0; bt < B * T; bt++) {
        int b = bt / T, t = bt % T, h, d, oc; /* oc private (a shared o raced) */
        const float *go = dout + (size_t)bt * C;
        for (h = 0; h < H; h++) {
            size_t row = ((size_t)b * H + h) * T + t;
            const float *ch = c + row * D;
            double gs = gate ? polar__sigmoid(gate[(size_t)bt * H + h]) : 1.0, dgs = 0, dm = 0;
            for (d = 0; d < D; d++) {
                double acc = 0;
                for (oc = 0; oc < C; oc++) acc += (double)go[oc] * W_o[(size_t)oc * H * D + (size_t)h * D + d];
                if (dc) dc[row * D + d] += (float)(acc * gs);
                dgs += acc * ch[d];
            }
            for (oc = 0; oc < C; oc++) dm += (double)go[oc] * W_mu[(size_t)oc * H + h];
            if (dmag) dmag[row] += (float)dm;
            if (dgate) dgate[(size_t)bt * H + h] += (float)(dgs * gs * (1.0 - gs));
        }
    }
    /* weight grads: parallel over output rows; each owns its weight rows */
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (o = 0; o < C; o++) {
        int b2, t, h, d;
        for (b2 = 0; b2 < B; b2++)
            for (t = 0; t < T; t++) {
                size_t bt2 = (size_t)b2 * T + t;
                float go = dout[bt2 * C + o];
                if (go == 0.0f) continue;
                for (h = 0; h < H; h++) {
                    size_t row = ((size_t)b2 * H + h) * T + t;
                    float gs = gate ? (float)polar__sigmoid(gate[bt2 * H + h]) : 1.0f;
                    if (dW_o) {
                        float *wr = dW_o + (size_t)o * H * D + (size_t)h * D;
                        for (d = 0; d < D; d++) wr[d] += go * gs * c[row * D + d];
                    }
                    if (dW_mu) dW_mu[(size_t)o * H + h] += go * mag[row];
                }
            }
    }
    return POLAR_OK;
}

/* ------------------------------------------------------------ distractor loss */
/* the loss's divisor over B*H*T rows, and the window its temperature and null see */
static double polar__dist_count(const polar_config *cfg, double rows)
{
    return cfg->distractor_mode == POLAR_DISTRACTOR_SEED ? rows : rows * cfg->distractor_keys;
}
static int polar__dist_window(const polar_config *cfg)
{
    return cfg->distractor_mode == POLAR_DISTRACTOR_SEED ? POLAR_NO_WINDOW : cfg->window;
}

/* per (b, h, i): softmax over [temp*sigma_r (R of them), temp*null]; w_N out, the R
   weights into w (R), raw scores into sg (R). */
static void polar__distractor_row(double *w, double *sg, double *wN, const float *qi,
                                  const float *kr, int R, int D, double temp, double nul,
                                  double sc)
{
    int r, d;
    double M = temp * nul, Z;
    for (r = 0; r < R; r++) {
        double dot = 0;
        for (d = 0; d < D; d++) dot += (double)qi[d] * kr[(size_t)r * D + d];
        sg[r] = dot * sc;
        if (temp * sg[r] > M) M = temp * sg[r];
    }
    Z = exp(temp * nul - M);
    for (r = 0; r < R; r++) {
        w[r] = exp(temp * sg[r] - M);
        Z += w[r];
    }
    for (r = 0; r < R; r++) w[r] /= Z;
    *wN = exp(temp * nul - M) / Z;
}

static int polar__check_distractor(const polar_config *cfg, const float *q,
                                   const float *k_rand, const polar_params *prm, int B, int H,
                                   int Hkv, int T, int D)
{
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, T, D)) return 0;
    if (!q || !polar__check_params(prm, H, D)) return 0;
    if (cfg->distractor_keys > 0 && !k_rand) return 0;
    if (cfg->distractor_keys > POLAR_MAX_DISTRACTOR_KEYS) return 0;
    return 1;
}

POLARDEF int polar_distractor_forward(const polar_config *cfg, float *loss, const float *q,
                                      const float *k_rand, const polar_params *prm, int B,
                                      int H, int Hkv, int T, int D)
{
    int R, bh;
    double total = 0, sc;
    double *buf;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (polar__cu_dev(q)) /* device pointers (loss too): the CUDA path, default stream */
        return polar_distractor_forward_cuda(cfg, loss, q, k_rand, prm, B, H, Hkv, T, D, NULL,
                                             NULL);
#endif
    if (!loss) return POLAR_EINVAL;
    *loss = 0.0f;
    if (!polar__check_distractor(cfg, q, k_rand, prm, B, H, Hkv, T, D)) return POLAR_EINVAL;
    R = cfg->distractor_keys;
    if (R == 0) return POLAR_OK;
    buf = (double *)POLAR_MALLOC(sizeof(double) * 2 * R);
    if (!buf) return POLAR_ENOMEM;
    sc = 1.0 / sqrt((double)D);
    for (bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H, hk = h / (H / Hkv), i, r;
        const float *kr = k_rand + ((size_t)b * Hkv + hk) * R * D;
        for (i = 0; i < T; i++) {
            double temp, nul, wN;
            polar__row_tn(prm, h, polar__nkeys(polar__dist_window(cfg), i), &temp, &nul);
            polar__distractor_row(buf, buf + R, &wN, q + ((size_t)bh * T + i) * D, kr, R, D,
                                  temp, nul, sc);
            for (r = 0; r < R; r++) total += buf[r];
        }
    }
    POLAR_FREE(buf);
    *loss = (float)(cfg->distractor_weight * total / polar__dist_count(cfg, (double)B * H * T));
    return POLAR_OK;
}

POLARDEF int polar_distractor_backward(const polar_config *cfg, float *dq, float *dk_rand,
                                       polar_grads *grads, float dloss, const float *q,
                                       const float *k_rand, const polar_params *prm, int B,
                                       int H, int Hkv, int T, int D)
{
    int R, bh;
    double sc, coef;
    double *buf;
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (polar__cu_dev(q)) /* device pointers: the CUDA path, default stream */
        return polar_distractor_backward_cuda(cfg, dq, dk_rand, grads, dloss, q, k_rand, prm, B,
                                              H, Hkv, T, D, NULL, NULL);
#endif
    if (!dq || !polar__finite(dloss)) return POLAR_EINVAL;
    if (!polar__check_distractor(cfg, q, k_rand, prm, B, H, Hkv, T, D)) return POLAR_EINVAL;
    R = cfg->distractor_keys;
    if (R == 0) return POLAR_OK;
    buf = (double *)POLAR_MALLOC(sizeof(double) * 2 * R);
    if (!buf) return POLAR_ENOMEM;
    sc = 1.0 / sqrt((double)D);
    coef = dloss * cfg->distractor_weight / polar__dist_count(cfg, (double)B * H * T);
    if (cfg->distractor_mode == POLAR_DISTRACTOR_SEED) dk_rand = NULL; /* detached */
    /* serial: dk_rand and the per-head grads are shared across rows (fixed order) */
    for (bh = 0; bh < B * H; bh++) {
        int b = bh / H, h = bh % H, hk = h / (H / Hkv), i, r, d;
        const float *kr = k_rand + ((size_t)b * Hkv + hk) * R * D;
        float *dkr = dk_rand ? dk_rand + ((size_t)b * Hkv + hk) * R * D : NULL;
        double dlg = 0, dnb = 0, dns = 0;
        for (i = 0; i < T; i++) {
            size_t row = (size_t)bh * T + i;
            int n = polar__nkeys(polar__dist_window(cfg), i);
            double temp, nul, wN, dt = 0, gN;
            const float *qi = q + row * D;
            float *dqi = dq + row * D;
            polar__row_tn(prm, h, n, &temp, &nul);
            polar__distractor_row(buf, buf + R, &wN, qi, kr, R, D, temp, nul, sc);
            /* loss row = sum_r w_r = 1 - w_N: d/da_r = w_r w_N, d/da_N = -w_N (1 - w_N) */
            for (r = 0; r < R; r++) {
                double gr = coef * buf[r] * wN, f = gr * temp * sc;
                dt += gr * buf[R + r];
                for (d = 0; d < D; d++) {
                    dqi[d] += (float)(f * kr[(size_t)r * D + d]);
                    if (dkr) dkr[(size_t)r * D + d] += (float)(f * qi[d]);
                }
            }
            gN = -coef * wN * (1.0 - wN);
            dt += gN * nul;
            dlg += dt * log((double)n) * polar__sigmoid(prm->len_gain_raw[h]);
            dnb += temp * gN;
            dns += temp * gN * sqrt(log((double)n + 1.0)) * polar__sigmoid(prm->null_slope_raw[h]);
        }
        if (grads) {
            if (grads->len_gain_raw) grads->len_gain_raw[h] += (float)dlg;
            if (grads->null_base) grads->null_base[h] += (float)dnb;
            if (grads->null_slope_raw) grads->null_slope_raw[h] += (float)dns;
        }
    }
    POLAR_FREE(buf);
    return POLAR_OK;
}

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------ CUDA */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
#include "cuda/polar.cuh"
#else
#ifdef __cplusplus
extern "C" {
#endif
/* the calls of the list POLAR__CUDA_API (declared above): POLAR_ENOCUDA, a workspace size
   0; the parameters go unused */
#define POLAR__NOCUDA_int POLAR_ENOCUDA
#define POLAR__NOCUDA_size_t 0
#define POLAR__CUDA_STUB(ret, name, params)                                                 \
    POLARDEF ret name params { return POLAR__NOCUDA_##ret; }
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
POLAR__CUDA_API(POLAR__CUDA_STUB)
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef POLAR__CUDA_STUB
#undef POLAR__NOCUDA_int
#undef POLAR__NOCUDA_size_t
#ifdef __cplusplus
}
#endif
#endif /* CUDA */
#ifdef POLAR__PUSHED_NO_TRAPPING
#pragma GCC pop_options
#undef POLAR__PUSHED_NO_TRAPPING
#endif
#endif /* POLAR_IMPLEMENTATION_DONE */
#endif /* POLAR_IMPLEMENTATION */

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
FOR ANY CLAIM, DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPTIONS, CONSEQUENTIAL DAMAGES OR
OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF
OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
*/
