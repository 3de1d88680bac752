/* gdelta.h - gated-delta fast-weight memory (closed-loop Gated DeltaNet recurrence)
   with a recurrent reference path, a chunked (WY / UT-transform) training path,
   forward and backward for both, an in-place decode step, and the gate / readout
   helpers around it. Header-only C99 (STB style), fp32, CPU.
   v0.1 - MIT license (see the end of the file).

   WHAT
     ATMA (seed 002) section 3.3, eqs. 16-25, Findings 1-2, and section 5.4.3. Per
     sequence b and head h a state M (Dv,Dk) is updated, for t = 0..T-1, as

        M    <- gamma_t M                               retention   (decay first)
        pred  = M k_t
        M    <- M + beta_t (v_t - pred) k_t^T           delta write (undecayed)
        r_t   = scale * M q_t                           readout (self-inclusive)

     i.e. M_t = gamma_t M_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T, the
     convention of the paper and of flash-linear-attention. q and k are
     L2-normalised inside (Finding 1: with RMS-normalised keys the eigenvalue
     gamma (1 - beta |k|^2) of the update leaves (-1,1) and the state explodes; with
     unit keys the memory is self-stabilising even at gamma = 1, Finding 2).

     Two paths compute the same function:
       GD_ALGO_RECURRENT  step by step; backward runs the recurrence in reverse time
                          on the state, re-computing states from checkpoints stored
                          every cfg.checkpoint steps (1 = store every state).
       GD_ALGO_CHUNKED    (default) chunks of cfg.chunk_size steps: inside a chunk
                          A = strictly-lower beta_i (k_i.k_j) exp(G_i - G_j), (I + A)
                          solved by forward substitution for the WY/UT write vectors
                          U, outputs as inter-chunk (q . state) plus intra-chunk causal
                          terms, the state carried across chunks. Saves one state per
                          chunk, U and the chunk's (C,C) matrices (K K^T, Q K^T, decay,
                          A, (I + A)^-1: 5 T C floats, C <= 256 a constant): memory
                          O(T D + T C + (T/C) D^2). Backward is the reverse chunk loop
                          plus the WY backward.
     Both agree within 1e-4 relative in fp32 on outputs, final state and every
     gradient (tests/test_gdelta.c checks T = 1..300, C = 16/32/64, gamma = 1, gamma
     near 0, beta near 0 and 1, Dk != Dv).

     Numerics: exp(G_i - G_j) is always formed from the difference (never exp(-G)
     alone); log-gates are floored at cfg.log_gate_floor (-88) so -inf never meets
     -inf; a zero key normalises to zero (x / sqrt(|x|^2 + eps)), never a division
     by zero. The chunked backward sums each gate's gradient from the terms that carry
     that gate only (dL/dgamma_t = sum_{i>=t} P_it (sc_i e_{t-1} + sum_{j<t} Wc_ij
     P_{t-1,j}), see gd__chunk_backward_bh): the suffix sum of log-gate terms it replaced
     cancelled, lost ~1e-8 / gamma_t (37% of the max-norm at gamma ~ 1e-6) and gave a
     gate of exactly 0 no gradient (issue 38); a gate form (gate_is_log 0) now gets its
     gradient at gamma = 0 as the recurrent path does.

     Regimes checked against float64 (issue 38; tests/test_gdelta.c, test_sweep_float64,
     and tests/parity_gdelta.cu; reference: tests/ref64.h, eqs. 16-25 transcribed in
     double and differentiated by a tape): gates near 0 (1e-6..1e-2, exact 0) and near 1
     (1 - 1e-7..1 - 1e-3, exact 1), log gates -30..-5, beta near 0 (1e-7..1e-4, exact 0)
     and near 1 (exact 1), keys and queries of norm 1e-5..1e-2 (|k|^2 below and above
     norm_eps), T = 2048 (simulation 256) with gamma ~ 1, beta ~ 1 and a 4x4 state that
     saturates. Worst relative error to each tensor's max-norm, over all regimes:
       CPU chunked    r 3.1e-7, state 3.7e-7, dq 2.7e-7, dk 3.8e-7, dv 3.3e-7,
                      dgates 5.6e-7, dbeta 3.3e-7
       CPU recurrent  every tensor <= 3.0e-7
       CUDA fp32      r 3.7e-7, state 3.1e-7, dq 3.4e-7, dk 4.9e-7, dv 3.3e-7,
       (simulation)   dgates 3.9e-7, dbeta 5.3e-7
       CUDA bf16/tf32 (Dk = Dv = 16, gates near 0 / saturating) <= 5.5e-3 / 9.2e-4
     Tolerances: 1e-4 forward, 2e-3 gradients (2e-2 with tensor-core math).

   USAGE
     In exactly one C or C++ file:
        #define GDELTA_IMPLEMENTATION
        #include "gdelta.h"

        gd_config cfg = gd_config_default();          // chunked, C = 32, gates as gamma
        gd_saved saved = gd_saved_init();
        int rc = gd_forward(&cfg, r, state_out, q, k, v, gamma, beta, NULL,
                            B, H, T, Dk, Dv, &saved, NULL);
        if (rc != GD_OK) fprintf(stderr, "%s\n", gd_strerror(rc));
        // ... dr from the loss; dq, dk, dv, dgamma, dbeta zeroed (backward adds) ...
        rc = gd_backward(&cfg, &saved, dq, dk, dv, dgamma, dbeta, NULL, dr, NULL,
                         q, k, v, gamma, beta, NULL, B, H, T, Dk, Dv, NULL);
        gd_saved_free(&saved);

     Decode (one token per sequence, state table updated in place, no gather/scatter):
        rc = gd_step(&cfg, table, n_slots, slots, N, H, Dk, Dv, q1, k1, v1, g1, b1, r1);

   COMPILE-TIME OPTIONS
     GDELTA_STATIC            all functions static
     GDELTA_MALLOC/GDELTA_FREE allocator (define both or neither)
     GDELTA_ASSERT            internal-invariant assert (never used on user input)
     GDELTA_NO_SIMD           portable C GEMM kernel even where AVX-512F is available
                              (the default uses an AVX-512 8x32 kernel when the compiler
                              targets AVX-512F, e.g. -march=native on such a CPU)
     -fopenmp                 parallel over (b,h) with static schedules: results are
                              bit-identical run to run for a fixed thread count

   CONFIG (gd_config, gd_config_default())
     algo            GD_ALGO_CHUNKED      GD_ALGO_CHUNKED or GD_ALGO_RECURRENT
     chunk_size      32                   chunked path, 1..256 (16, 32, 64 are usual;
                                          32 was fastest in bench/bench_gdelta.c)
     checkpoint      64                   recurrent backward: a state saved every
                                          `checkpoint` steps, the rest recomputed
                                          (1: every state saved, no recomputation)
     gate_is_log     0                    gates given as gamma in [0,1] (0) or as
                                          log gamma in [-inf,0] (1, the safe form);
                                          0 or 1, anything else is GD_EINVAL
     normalize_qk    1                    L2-normalise q and k (Finding 1); 0 or 1,
                                          anything else is GD_EINVAL
     norm_eps        1e-6                 q_hat = q / sqrt(|q|^2 + norm_eps)
     scale           1.0                  r_t = scale * M_t q_t
     log_gate_floor  -88                  log gamma clamped below (no -inf, no NaN)
     b_gamma_init    3.9                  eq. 17 bias init (sigma(3.9) ~ 0.98)
     b_beta_init     0.0                  eq. 18 bias init (sigma(0) = 0.5)
     rms_eps         1e-6                 RMSNorm eps of the readout (eq. 25): y =
                                          r / sqrt(mean(r^2) + rms_eps). The paper gives
                                          none; the seed's code (kreasof-ai/atma) uses the
                                          dtype's epsilon: set GD_RMS_EPS_SEED (2^-23 =
                                          1.19e-7) to reproduce its runs (the two differ
                                          by ~7e-3 in the output early in a sequence,
                                          where r is small). Finite and >= 0, else
                                          GD_EINVAL. Used by gd_readout_* and by the
                                          examples' CPU and CUDA readout.
     math            GD_MATH_FP32         CUDA path only: fp32 SIMT (exact parity);
                                          GD_MATH_BF16 / GD_MATH_TF32: the chunk
                                          products on tensor cores (bf16 / tf32
                                          operands, fp32 accumulation and state;
                                          2e-2 RMS-relative parity; sm_80+; Dk, Dv,
                                          chunk_size multiples of 16, else
                                          GD_ENOTSUP); gd_step_cuda ignores it (fp32);
                                          another value is GD_EINVAL on every path
     status          NULL                 CUDA path only (gd_forward_cuda,
                                          gd_backward_cuda): NULL, the input scan
                                          waits on the host (below); a device int:
                                          the scan's flags are OR-ed into *status and
                                          nothing waits (the caller zeroes it, reads
                                          it when it next synchronises and discards
                                          what the calls wrote while it was nonzero;
                                          the outputs of bad inputs are then NaN or
                                          garbage, never out of bounds). A status
                                          that is not device memory is GD_EINVAL.
                                          The CPU ignores it
     log, log_user   NULL                 callback for detailed error messages

   INITIALISATION (drop-in use)
     q, k, v come from the host's own projections with its usual init: with
     normalize_qk (default) only the directions of q and k matter. Gate biases from
     gd_gates_init_bias (sigma(3.9) ~ 0.98 retention, beta 0.5); zero-initialise the
     readout's W_proj (gd_readout_forward) so the branch adds nothing at step 0 and the
     host's loss is unchanged until it learns to use the memory. Scratch comes from
     gd_workspace_size (sized for omp_get_max_threads() at the call; NULL workspace
     allocates); threads split (b, h) in explicit chunks, never by omp_get_thread_num().

   SHAPES (legend)  B batch, H heads, T time, Dk key dim, Dv value dim, Dx model
     input dim, Dout readout output dim, N decode batch, C chunk size.
     q, k (B,H,T,Dk); v, r (B,H,T,Dv); gates, beta (B,H,T); states (B,H,Dv,Dk)
     (row i of M belongs to value channel i). Buffers are caller-owned,
     contiguous, row-major float32. Backward functions ACCUMULATE (+=).

   ERRORS  (int status; gd_strerror() names it)
     GD_OK      0
     GD_EINVAL  NULL pointer, bad dimension, bad config (a flag other than 0 / 1, an
                algo or math outside its enum, on every path), saved state that does
                not match the call
     GD_ERANGE  a gate outside [0,1] (or log gate > 0), beta outside [0,1], a
                NaN/Inf in q, k, v, gates or initial state, a slot index outside
                [0, n_slots) or repeated within one gd_step batch
     GD_ENOMEM  allocation failed
     GD_ENOCUDA a *_cuda function in a build without nvcc (or the simulation)
     GD_ECUDA   a CUDA launch or runtime call failed
     GD_ENOTSUP cfg.math TF32/BF16 on the CUDA path where it is not supported (Dk, Dv
                or chunk_size not a multiple of 16, a device below sm_80)

   CUDA (cuda/gdelta.cuh, compiled when nvcc compiles this implementation)
     gd_forward_cuda / gd_backward_cuda / gd_step_cuda mirror the CPU functions with
     device pointers and a stream (gd_stream = cudaStream_t); the plain gd_forward /
     gd_step route device pointers there, gd_backward a saved state gd_forward_cuda
     filled. Chunked form with cfg.chunk_size, deterministic; the device saved state
     holds the chunk-start states and U only (the rest is recomputed). cfg.math fp32
     (default): tests/parity_gdelta.cu checks it against the CPU chunked and recurrent
     paths (1e-5 outputs/state, 1e-4 gradients). cfg.math bf16 / tf32: the chunk
     products (K K^T, Q K^T, W, U, the state's products and their backward) run on
     tensor cores with fp32 accumulation and an fp32 state, the norms, gates and the
     (I + A)^-1 solve stay fp32; checked at 2e-2 RMS-relative (cuda/gdelta.cuh lists
     what runs where). So far all of it has run only in the CPU simulation
     (docs/GPU.md).
*/
#ifndef GDELTA_H
#define GDELTA_H

#include <stddef.h>

#ifdef GDELTA_STATIC
/* unused is expected in a static copy: silence -Wunused-function */
#if defined(__GNUC__) || defined(__clang__)
#define GDELTADEF static __attribute__((unused))
#else
#define GDELTADEF static
#endif
#else
#define GDELTADEF extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum { GD_OK = 0, GD_EINVAL = -1, GD_ERANGE = -2, GD_ENOMEM = -3 };
enum { GD_ALGO_CHUNKED = 0, GD_ALGO_RECURRENT = 1 };
/* CUDA-path status codes and math modes (cfg.math; the CPU path is always fp32) */
enum { GD_ENOCUDA = -4, GD_ECUDA = -5, GD_ENOTSUP = -6 };
enum { GD_MATH_FP32 = 0, GD_MATH_TF32 = 1, GD_MATH_BF16 = 2 };
/* The readout RMSNorm epsilon of the seed's code (kreasof-ai/atma: the fp32 machine
   epsilon, FLT_EPSILON = 2^-23): set cfg.rms_eps = GD_RMS_EPS_SEED to reproduce its runs.
   The paper gives no value; the default stays 1e-6. */
#define GD_RMS_EPS_SEED 1.1920928955078125e-7f

typedef struct gd_config {
    int algo;             /* GD_ALGO_CHUNKED (default) or GD_ALGO_RECURRENT */
    int chunk_size;       /* chunked path chunk length C, 1..256; default 32 */
    int checkpoint;       /* recurrent backward: state saved every `checkpoint` steps; 64 */
    int gate_is_log;      /* 0: gates are gamma in [0,1]; 1: gates are log gamma <= 0 */
    int normalize_qk;     /* 1: L2-normalise q and k inside (Finding 1); default 1 */
    float norm_eps;       /* 1e-6 */
    float scale;          /* readout scale, 1.0 */
    float log_gate_floor; /* -88 */
    float b_gamma_init;   /* 3.9 (eq. 17) */
    float b_beta_init;    /* 0.0 (eq. 18) */
    float rms_eps;        /* 1e-6 (readout RMSNorm, eq. 25) */
    void (*log)(const char *msg, void *user); /* detailed error messages; NULL: silent */
    void *log_user;
    int math;             /* CUDA path: GD_MATH_FP32 (default, 0), GD_MATH_TF32, GD_MATH_BF16 */
    int *status;          /* CUDA path: NULL (default) or a device int: deferred input checks */
} gd_config;

/* What gd_forward saves for gd_backward. Initialise with gd_saved_init(); forward
   (re)allocates its buffer with GDELTA_MALLOC when too small; free with gd_saved_free. */
typedef struct gd_saved {
    int algo, B, H, T, Dk, Dv, step; /* step: chunk size or checkpoint interval */
    int nstates;                     /* states saved per (b,h) */
    float *states;                   /* (B,H,nstates,Dk*Dv) */
    float *u;                        /* chunked only: WY write vectors (B,H,T,Dv) */
    float *wy;                       /* chunked only: per chunk K K^T, Q K^T, decay P,
                                        A, (I + A)^-1: (B,H,nstates,5,C,C) */
    void *mem;
    size_t cap;                      /* bytes at mem */
} gd_saved;

GDELTADEF gd_config gd_config_default(void);
GDELTADEF const char *gd_strerror(int err);
GDELTADEF gd_saved gd_saved_init(void);
GDELTADEF void gd_saved_free(gd_saved *s);

/* Scratch bytes gd_forward / gd_backward need for these shapes (the larger of the
   two; depends on omp_get_max_threads() at the time of the call). */
GDELTADEF size_t gd_workspace_size(const gd_config *cfg, int B, int H, int T, int Dk, int Dv);

/* r: (B,H,T,Dv) written; state_out: (B,H,Dv,Dk) or NULL; q, k: (B,H,T,Dk);
   v: (B,H,T,Dv); gates, beta: (B,H,T); state0: (B,H,Dv,Dk) or NULL (zeros);
   saved: NULL (inference) or filled for gd_backward; workspace: NULL or
   gd_workspace_size() bytes. T >= 1. */
GDELTADEF int gd_forward(const gd_config *cfg, float *r, float *state_out,
                         const float *q, const float *k, const float *v,
                         const float *gates, const float *beta, const float *state0,
                         int B, int H, int T, int Dk, int Dv, gd_saved *saved,
                         void *workspace);

/* Accumulates (+=): dq, dk (B,H,T,Dk); dv (B,H,T,Dv); dgates, dbeta (B,H,T)
   (dgates in the form of cfg.gate_is_log); dstate0 (B,H,Dv,Dk) or NULL.
   dr: (B,H,T,Dv); dstate_out: (B,H,Dv,Dk) or NULL (zero). The inputs and cfg
   must be those of the gd_forward call that filled saved. */
GDELTADEF int gd_backward(const gd_config *cfg, const gd_saved *saved,
                          float *dq, float *dk, float *dv, float *dgates,
                          float *dbeta, float *dstate0,
                          const float *dr, const float *dstate_out,
                          const float *q, const float *k, const float *v,
                          const float *gates, const float *beta, const float *state0,
                          int B, int H, int T, int Dk, int Dv, void *workspace);

/* One decode token for each of N sequences, in place. table: (n_slots,H,Dv,Dk);
   slots: (N) distinct indices into the table; q, k: (N,H,Dk); v: (N,H,Dv);
   gates, beta: (N,H); r: (N,H,Dv) written. Same update as gd_forward (T = 1). */
GDELTADEF int gd_step(const gd_config *cfg, float *table, int n_slots, const int *slots,
                      int N, int H, int Dk, int Dv, const float *q, const float *k,
                      const float *v, const float *gates, const float *beta, float *r);
/* Strided q, k, v, r: element (b, h, t, d) of q is q[b*q[0] + h*q[1] + t*q[2] + d]
   (strides in floats, >= 0; head dim contiguous), likewise k, v and r; dq, dk, dv, dr
   share the strides of q, k, v, r, so llm.c-style interleaved buffers go in as they are
   (gd_layout_qkv: q, k, v at qkv, qkv + C, qkv + 2C, token stride 3C, C = H*Dk, Dv = Dk;
   r (B,T,C)). gates, beta, states stay contiguous. Design: the strided calls gather into
   contiguous scratch, run gd_forward / gd_backward and scatter (r written, gradients
   added); the contiguous layout skips the copies. Same results as the contiguous calls:
   bit for bit in the forward, and in the backward when the gradient buffers start at
   zero (otherwise the library's own terms are summed before they are added: rounding). */
typedef struct gd_layout {
    ptrdiff_t q[3], k[3], v[3], r[3]; /* {batch, head, token} strides */
} gd_layout;
GDELTADEF gd_layout gd_layout_contiguous(int H, int T, int Dk, int Dv);
GDELTADEF gd_layout gd_layout_qkv(int H, int T, int D);
GDELTADEF int gd_forward_strided(const gd_config *cfg, const gd_layout *lay, float *r,
                                 float *state_out, const float *q, const float *k,
                                 const float *v, const float *gates, const float *beta,
                                 const float *state0, int B, int H, int T, int Dk, int Dv,
                                 gd_saved *saved, void *workspace);
GDELTADEF int gd_backward_strided(const gd_config *cfg, const gd_layout *lay,
                                  const gd_saved *saved, float *dq, float *dk, float *dv,
                                  float *dgates, float *dbeta, float *dstate0, const float *dr,
                                  const float *dstate_out, const float *q, const float *k,
                                  const float *v, const float *gates, const float *beta,
                                  const float *state0, int B, int H, int T, int Dk, int Dv,
                                  void *workspace);

/* Gates (eqs. 17-18): z = x W^T + b per head; gates = sigma(z_gamma) (or its log,
   computed stably as -softplus(-z), when cfg.gate_is_log), beta = sigma(z_beta).
   gates, beta: (B,H,T) written (either may be NULL); x: (B,T,Dx);
   W_gamma, W_beta: (H,Dx); b_gamma, b_beta: (H) or NULL (zero). */
GDELTADEF int gd_gates_forward(const gd_config *cfg, float *gates, float *beta,
                               const float *x, const float *W_gamma, const float *b_gamma,
                               const float *W_beta, const float *b_beta,
                               int B, int T, int Dx, int H);
/* Accumulates dx (B,T,Dx), dW_gamma, dW_beta (H,Dx), db_gamma, db_beta (H); any may be
   NULL. dgates, dbeta: (B,H,T) or NULL (zero). */
GDELTADEF int gd_gates_backward(const gd_config *cfg, float *dx, float *dW_gamma,
                                float *db_gamma, float *dW_beta, float *db_beta,
                                const float *dgates, const float *dbeta, const float *x,
                                const float *W_gamma, const float *b_gamma,
                                const float *W_beta, const float *b_beta,
                                int B, int T, int Dx, int H);
/* b_gamma, b_beta (H): set to cfg.b_gamma_init, cfg.b_beta_init (either may be NULL). */
GDELTADEF int gd_gates_init_bias(const gd_config *cfg, float *b_gamma, float *b_beta, int H);

/* Readout (eq. 25): y[b,t,h,:] = RMSNorm(r[b,h,t,:]) * norm_w (per head over Dv),
   z = y * sigma(x W_g^T + b_g) (H*Dv channels, index h*Dv + d), out = z W_proj^T.
   out: (B,T,Dout) written; r: (B,H,T,Dv); x: (B,T,Dx); norm_w: (Dv) or NULL (ones);
   W_g: (H*Dv,Dx); b_g: (H*Dv) or NULL; W_proj: (Dout,H*Dv) (zero-initialise it: the
   branch is then a no-op at step 0). workspace: NULL or
   gd_readout_workspace_size() bytes. */
GDELTADEF size_t gd_readout_workspace_size(int B, int T, int H, int Dv);
GDELTADEF int gd_readout_forward(const gd_config *cfg, float *out, const float *r,
                                 const float *x, const float *norm_w, const float *W_g,
                                 const float *b_g, const float *W_proj,
                                 int B, int T, int H, int Dv, int Dx, int Dout,
                                 void *workspace);
/* Accumulates dr (B,H,T,Dv), dx (B,T,Dx), dnorm_w (Dv), dW_g (H*Dv,Dx), db_g (H*Dv),
   dW_proj (Dout,H*Dv); any may be NULL. dout: (B,T,Dout). Recomputes the forward. */
GDELTADEF int gd_readout_backward(const gd_config *cfg, float *dr, float *dx,
                                  float *dnorm_w, float *dW_g, float *db_g,
                                  float *dW_proj, const float *dout, const float *r,
                                  const float *x, const float *norm_w, const float *W_g,
                                  const float *b_g, const float *W_proj,
                                  int B, int T, int H, int Dv, int Dx, int Dout,
                                  void *workspace);

/* ---------------------------------------------------------------- CUDA */
/* Device-pointer mirrors (cuda/gdelta.cuh), compiled when this header is compiled by
   nvcc (or against tests/cuda_sim.h); elsewhere they return GD_ENOCUDA. `stream` is a
   cudaStream_t (NULL: the default stream). Same shapes, config and semantics as the CPU
   functions. cfg.math: GD_MATH_FP32 (exact parity), GD_MATH_BF16 / GD_MATH_TF32
   (tensor-core products, fp32 accumulation and state; Dk, Dv and chunk_size multiples
   of 16 and an sm_80+ device, else GD_ENOTSUP; the chunk is then min(chunk_size, T
   rounded up to 16)); gd_step_cuda ignores it (fp32, bit-identical). gd_forward_cuda
   always runs the chunked form with cfg.chunk_size (1..256; Dk + chunk_size < 12288,
   9208 with tensor-core math) whatever cfg.algo says; its saved state lives in device memory (gd_saved_free releases it) and
   only gd_backward_cuda accepts it. workspace: NULL (allocated on the stream) or a device
   buffer of gd_workspace_size_cuda() bytes (enough for forward and backward). Input
   values are scanned on the device first (one int read back, the stream synchronised):
   a NaN/Inf or out-of-range gate/beta returns GD_ERANGE with nothing written (with
   cfg.status set the scan's flags go there instead and nothing waits). A host
   pointer returns GD_EINVAL, a failed launch GD_ECUDA. gd_step_cuda: slots is a device
   array; table is updated in place. */
struct CUstream_st;
typedef struct CUstream_st *gd_stream;
GDELTADEF int gd_cuda_available(void); /* 1 if a CUDA device is usable */
/* The device calls are written once each, in the list GD__CUDA_API: an entry
   X(int, gd_name_cuda, (parameters)) is the prototype `int gd_name_cuda(parameters)`; the
   list is expanded here into the declarations and, without nvcc / the simulation, into
   stubs that return GD_ENOCUDA ("gd_name_cuda: built without nvcc" to cfg's log; a
   workspace size: 0). */
#define GD__CUDA_DECLARE(ret, name, params) GDELTADEF ret name params;
#define GD__CUDA_API(X)                                                                         \
    X(size_t, gd_workspace_size_cuda, (const gd_config *cfg, int B, int H, int T, int Dk,       \
                                       int Dv))                                                 \
    X(int, gd_forward_cuda, (const gd_config *cfg, float *r, float *state_out, const float *q,  \
                             const float *k, const float *v, const float *gates,                \
                             const float *beta, const float *state0, int B, int H, int T,       \
                             int Dk, int Dv, gd_saved *saved, void *workspace,                  \
                             gd_stream stream))                                                 \
    X(int, gd_backward_cuda, (const gd_config *cfg, const gd_saved *saved, float *dq,           \
                              float *dk, float *dv, float *dgates, float *dbeta,                \
                              float *dstate0, const float *dr, const float *dstate_out,         \
                              const float *q, const float *k, const float *v,                   \
                              const float *gates, const float *beta, const float *state0,       \
                              int B, int H, int T, int Dk, int Dv, void *workspace,             \
                              gd_stream stream))                                                \
    X(int, gd_step_cuda, (const gd_config *cfg, float *table, int n_slots, const int *slots,    \
                          int N, int H, int Dk, int Dv, const float *q, const float *k,         \
                          const float *v, const float *gates, const float *beta, float *r,      \
                          gd_stream stream))
GD__CUDA_API(GD__CUDA_DECLARE)

#ifdef __cplusplus
}
#endif
#endif /* GDELTA_H */

/* ======================================================================== */
#ifdef GDELTA_IMPLEMENTATION
#ifndef GDELTA_IMPLEMENTATION_DONE
#define GDELTA_IMPLEMENTATION_DONE

/* GCC keeps IEEE exception semantics by default (-ftrapping-math): a loop with a
   compare-and-select around a float expression (a clamp before an exp, say) is then
   not if-converted, hence not vectorised, on AVX2 (AVX-512 gets masked instructions).
   Nothing here reads floating-point exception flags, so the implementation is compiled
   without that constraint; values are unchanged (this is not -ffast-math). */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__INTEL_COMPILER)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#define GDELTA__PUSHED_NO_TRAPPING 1
#endif

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdarg.h>
#include <stdint.h>

#if defined(GDELTA_MALLOC) && defined(GDELTA_FREE)
#elif !defined(GDELTA_MALLOC) && !defined(GDELTA_FREE)
#include <stdlib.h>
#define GDELTA_MALLOC(sz) malloc(sz)
#define GDELTA_FREE(p) free(p)
#else
#error "gdelta.h: define both GDELTA_MALLOC and GDELTA_FREE, or neither"
#endif

#ifndef GDELTA_ASSERT
#include <assert.h>
#define GDELTA_ASSERT(x) assert(x)
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__cplusplus)
#define GD__RESTRICT __restrict
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#define GD__RESTRICT restrict
#else
#define GD__RESTRICT
#endif

#define GD__MAXC 256

static int gd__max_threads(void)
{
#ifdef _OPENMP
    int n = omp_get_max_threads();
    return n > 0 ? n : 1;
#else
    return 1;
#endif
}

static int gd__err(const gd_config *cfg, int code, const char *fmt, ...)
{
    if (cfg && cfg->log) {
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        cfg->log(buf, cfg->log_user);
    }
    return code;
}

GDELTADEF gd_config gd_config_default(void)
{
    gd_config c;
    memset(&c, 0, sizeof c);
    c.algo = GD_ALGO_CHUNKED;
    c.chunk_size = 32;
    c.checkpoint = 64;
    c.gate_is_log = 0;
    c.normalize_qk = 1;
    c.norm_eps = 1e-6f;
    c.scale = 1.0f;
    c.log_gate_floor = -88.0f;
    c.b_gamma_init = 3.9f;
    c.b_beta_init = 0.0f;
    c.rms_eps = 1e-6f;
    c.log = NULL;
    c.log_user = NULL;
    c.status = NULL;
    return c;
}

GDELTADEF const char *gd_strerror(int err)
{
    switch (err) {
    case GD_OK: return "ok";
    case GD_EINVAL: return "invalid argument";
    case GD_ERANGE: return "value out of range";
    case GD_ENOMEM: return "out of memory";
    case GD_ENOCUDA: return "built without CUDA (compile with nvcc)";
    case GD_ECUDA: return "CUDA runtime error";
    case GD_ENOTSUP: return "not implemented in this build";
    default: return "unknown error";
    }
}

GDELTADEF gd_saved gd_saved_init(void)
{
    gd_saved s;
    memset(&s, 0, sizeof s);
    return s;
}

/* a gd_saved filled by gd_forward_cuda: algo has this bit, mem is device memory */
#define GD__SAVED_CUDA 0x100
static void gd__cu_saved_free(void *mem); /* CUDA section (cudaFree) or its stub */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
static int gd__cu_is_dev(const void *p); /* routes device pointers to the CUDA path */
#endif

GDELTADEF void gd_saved_free(gd_saved *s)
{
    if (!s) return;
    if (s->mem && (s->algo & GD__SAVED_CUDA)) gd__cu_saved_free(s->mem); /* device memory */
    else if (s->mem) GDELTA_FREE(s->mem);
    memset(s, 0, sizeof *s);
}

/* finite tests on the IEEE bits: they survive -ffast-math / -Ofast, which fold x == x
   and x * 0 == 0 to true */
static int gd__finite(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7F800000u) != 0x7F800000u;
}
static int gd__isnan(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (u & 0x7FFFFFFFu) > 0x7F800000u;
}

static int gd__check_cfg(const gd_config *cfg)
{
    if (!cfg) return GD_EINVAL;
    if (cfg->algo != GD_ALGO_CHUNKED && cfg->algo != GD_ALGO_RECURRENT)
        return gd__err(cfg, GD_EINVAL, "gdelta: algo %d unknown", cfg->algo);
    if (cfg->chunk_size < 1 || cfg->chunk_size > GD__MAXC)
        return gd__err(cfg, GD_EINVAL, "gdelta: chunk_size %d outside [1,%d]",
                       cfg->chunk_size, GD__MAXC);
    if (cfg->checkpoint < 1)
        return gd__err(cfg, GD_EINVAL, "gdelta: checkpoint %d < 1", cfg->checkpoint);
    /* flags are 0 or 1 and enums one of their values, nothing else (issue 37 rule 4) */
    if (cfg->gate_is_log != 0 && cfg->gate_is_log != 1)
        return gd__err(cfg, GD_EINVAL, "gdelta: gate_is_log %d is not 0 or 1", cfg->gate_is_log);
    if (cfg->normalize_qk != 0 && cfg->normalize_qk != 1)
        return gd__err(cfg, GD_EINVAL, "gdelta: normalize_qk %d is not 0 or 1",
                       cfg->normalize_qk);
    if (cfg->math != GD_MATH_FP32 && cfg->math != GD_MATH_TF32 && cfg->math != GD_MATH_BF16)
        return gd__err(cfg, GD_EINVAL, "gdelta: math %d unknown", cfg->math);
    if (!gd__finite(cfg->norm_eps) || cfg->norm_eps < 0.0f)
        return gd__err(cfg, GD_EINVAL, "gdelta: norm_eps must be finite and >= 0");
    if (!gd__finite(cfg->scale))
        return gd__err(cfg, GD_EINVAL, "gdelta: scale must be finite");
    if (!gd__finite(cfg->log_gate_floor) || cfg->log_gate_floor > 0.0f ||
        cfg->log_gate_floor < -103.0f)
        return gd__err(cfg, GD_EINVAL, "gdelta: log_gate_floor must be in [-103,0]");
    if (!gd__finite(cfg->rms_eps) || cfg->rms_eps < 0.0f)
        return gd__err(cfg, GD_EINVAL, "gdelta: rms_eps must be finite and >= 0");
    return GD_OK;
}

/* ---------------------------------------------------------------- small GEMM */
/* C (M,N; ldc) = beta*C + alpha * A B, A element (i,p) at A[i*a_rs + p*a_cs] (so a
   transposed A costs nothing), B (K,N; ldb) row-major. With beta == 0, C is never
   read. Blocked register tiles: 8 x 32 in an AVX-512 kernel when the compiler targets
   AVX-512F (unless GDELTA_NO_SIMD); 6 x 16 (12 accumulators: 2 FMA pipes x 4 cycles of
   latency need 8, the spare ones hide the loads; 4% faster chunked fwd+bwd than 4 x 16 at
   T 4096, D 128 on one Emerald Rapids core) with 4 x 16 for the last rows (32 = 4 x 6 +
   2 x 4) in an AVX2+FMA kernel; else portable C with contiguous inner loops the
   compiler vectorises (fmaf when the target has FMA). All three round each product
   into its sum as one multiply-add where the target has FMA. */
#if (defined(__FMA__) || defined(__AVX512F__)) && !defined(GDELTA_NO_SIMD)
#define GD__FMA(a, b, c) fmaf((a), (b), (c))
#else
#define GD__FMA(a, b, c) ((a) * (b) + (c))
#endif

#if defined(__AVX512F__) && !defined(GDELTA_NO_SIMD)
#include <immintrin.h>
#define GD__ROW8(X)                                                                    \
    X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
static void gd__gemm(int M, int N, int K, float alpha, const float *A, long a_rs,
                     long a_cs, const float *B, long ldb, float beta, float *C, long ldc)
{
    int i, j, p;
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (j = 0; j < N; j += 32) {
        int nb = N - j < 32 ? N - j : 32;
        const __mmask16 m0 = (__mmask16)(nb >= 16 ? 0xFFFFu : ((1u << nb) - 1u));
        const __mmask16 m1 =
            (__mmask16)(nb >= 32 ? 0xFFFFu : nb > 16 ? ((1u << (nb - 16)) - 1u) : 0u);
        const float *Bj = B + j;
        for (i = 0; i + 8 <= M; i += 8) {
            const float *a = A + (long)i * a_rs;
#define GD__DECL(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = _mm512_setzero_ps();
            GD__ROW8(GD__DECL)
#undef GD__DECL
            for (p = 0; p < K; p++) {
                const float *b = Bj + (long)p * ldb, *ap = a + (long)p * a_cs;
                const __m512 b0 = _mm512_maskz_loadu_ps(m0, b);
                const __m512 b1 = _mm512_maskz_loadu_ps(m1, b + 16);
                __m512 x;
#define GD__FM(r)                                                                      \
    x = _mm512_set1_ps(ap[(r) * a_rs]);                                                \
    c##r##0 = _mm512_fmadd_ps(x, b0, c##r##0);                                         \
    c##r##1 = _mm512_fmadd_ps(x, b1, c##r##1);
                GD__ROW8(GD__FM)
#undef GD__FM
            }
#define GD__ST(r)                                                                      \
    {                                                                                  \
        float *Cr = C + (long)(i + (r)) * ldc + j;                                     \
        __m512 o0 = _mm512_mul_ps(va, c##r##0), o1 = _mm512_mul_ps(va, c##r##1);       \
        if (beta != 0.0f) {                                                            \
            o0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, Cr), o0);               \
            o1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, Cr + 16), o1);          \
        }                                                                              \
        _mm512_mask_storeu_ps(Cr, m0, o0);                                             \
        _mm512_mask_storeu_ps(Cr + 16, m1, o1);                                        \
    }
            GD__ROW8(GD__ST)
#undef GD__ST
        }
        for (; i < M; i++) {
            const float *a = A + (long)i * a_rs;
            float *Cr = C + (long)i * ldc + j;
            __m512 c0 = _mm512_setzero_ps(), c1 = _mm512_setzero_ps(), o0, o1;
            for (p = 0; p < K; p++) {
                const float *b = Bj + (long)p * ldb;
                const __m512 x = _mm512_set1_ps(a[(long)p * a_cs]);
                c0 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m0, b), c0);
                c1 = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m1, b + 16), c1);
            }
            o0 = _mm512_mul_ps(va, c0);
            o1 = _mm512_mul_ps(va, c1);
            if (beta != 0.0f) {
                o0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, Cr), o0);
                o1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, Cr + 16), o1);
            }
            _mm512_mask_storeu_ps(Cr, m0, o0);
            _mm512_mask_storeu_ps(Cr + 16, m1, o1);
        }
    }
}
#undef GD__ROW8
#elif defined(__AVX2__) && defined(__FMA__) && !defined(GDELTA_NO_SIMD)
#include <immintrin.h>
/* lanes [0, n) of an 8-lane mask, n in [0, 8] */
static __m256i gd__mask8(int n)
{
    static const int tbl[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(const void *)(tbl + 8 - n));
}
/* one row of a tile: Cr[0:16) (lanes masked by m0, m1) = alpha acc (+ beta Cr) */
static void gd__row16(float *Cr, __m256 a0, __m256 a1, __m256 va, __m256 vb, float beta,
                      __m256i m0, __m256i m1)
{
    __m256 o0 = _mm256_mul_ps(va, a0), o1 = _mm256_mul_ps(va, a1);
    if (beta != 0.0f) {
        o0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(Cr, m0), o0);
        o1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(Cr + 8, m1), o1);
    }
    _mm256_maskstore_ps(Cr, m0, o0);
    _mm256_maskstore_ps(Cr + 8, m1, o1);
}
static void gd__gemm(int M, int N, int K, float alpha, const float *A, long a_rs,
                     long a_cs, const float *B, long ldb, float beta, float *C, long ldc)
{
    int i, j, p, r;
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (j = 0; j < N; j += 16) {
        const int nb = N - j < 16 ? N - j : 16;
        const __m256i m0 = gd__mask8(nb >= 8 ? 8 : nb), m1 = gd__mask8(nb > 8 ? nb - 8 : 0);
        const int full = nb == 16;
        const float *Bj = B + j;
        i = 0;
        for (; M - i >= 10 || M - i == 6; i += 6) { /* 6 x 16: 12 accumulators (the last
                                                           rows go in 4-row tiles: 32 = 4 x 6 + 2 x 4) */
            const float *a0 = A + (long)i * a_rs;
            __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
            __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00, acc[12];
            const long r1 = a_rs, r2 = 2 * a_rs, r3 = 3 * a_rs, r4 = 4 * a_rs, r5 = 5 * a_rs;
            for (p = 0; p < K; p++) {
                const float *b = Bj + (long)p * ldb, *ap = a0 + (long)p * a_cs;
                const __m256 b0 = full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, m0);
                const __m256 b1 = full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, m1);
                __m256 x = _mm256_broadcast_ss(ap);
                c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
                x = _mm256_broadcast_ss(ap + r1);
                c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
                x = _mm256_broadcast_ss(ap + r2);
                c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
                x = _mm256_broadcast_ss(ap + r3);
                c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
                x = _mm256_broadcast_ss(ap + r4);
                c40 = _mm256_fmadd_ps(x, b0, c40), c41 = _mm256_fmadd_ps(x, b1, c41);
                x = _mm256_broadcast_ss(ap + r5);
                c50 = _mm256_fmadd_ps(x, b0, c50), c51 = _mm256_fmadd_ps(x, b1, c51);
            }
            acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11, acc[4] = c20, acc[5] = c21;
            acc[6] = c30, acc[7] = c31, acc[8] = c40, acc[9] = c41, acc[10] = c50, acc[11] = c51;
            for (r = 0; r < 6; r++)
                gd__row16(C + (long)(i + r) * ldc + j, acc[2 * r], acc[2 * r + 1], va, vb, beta, m0, m1);
        }
        for (; i + 4 <= M; i += 4) {
            const float *a0 = A + (long)i * a_rs, *a1 = a0 + a_rs, *a2 = a1 + a_rs,
                        *a3 = a2 + a_rs;
            __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00;
            __m256 c20 = c00, c21 = c00, c30 = c00, c31 = c00, acc[8];
            for (p = 0; p < K; p++) {
                const float *b = Bj + (long)p * ldb;
                const long o = (long)p * a_cs;
                const __m256 b0 = full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, m0);
                const __m256 b1 = full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, m1);
                __m256 x = _mm256_broadcast_ss(a0 + o);
                c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
                x = _mm256_broadcast_ss(a1 + o);
                c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
                x = _mm256_broadcast_ss(a2 + o);
                c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
                x = _mm256_broadcast_ss(a3 + o);
                c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
            }
            acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11;
            acc[4] = c20, acc[5] = c21, acc[6] = c30, acc[7] = c31;
            for (r = 0; r < 4; r++)
                gd__row16(C + (long)(i + r) * ldc + j, acc[2 * r], acc[2 * r + 1], va, vb, beta, m0, m1);
        }
        for (; i < M; i++) {
            const float *a = A + (long)i * a_rs;
            __m256 c0 = _mm256_setzero_ps(), c1 = _mm256_setzero_ps();
            for (p = 0; p < K; p++) {
                const float *b = Bj + (long)p * ldb;
                const __m256 x = _mm256_broadcast_ss(a + (long)p * a_cs);
                c0 = _mm256_fmadd_ps(x, full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, m0), c0);
                c1 = _mm256_fmadd_ps(x, full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, m1), c1);
            }
            gd__row16(C + (long)i * ldc + j, c0, c1, va, vb, beta, m0, m1);
        }
    }
}
#else
static void gd__gemm(int M, int N, int K, float alpha, const float *A, long a_rs,
                     long a_cs, const float *B, long ldb, float beta, float *C, long ldc)
{
    int i, j, p, r, u;
    for (j = 0; j < N; j += 32) {
        int nb = N - j < 32 ? N - j : 32;
        for (i = 0; i < M; i += 4) {
            int mr = M - i < 4 ? M - i : 4;
            float c[4][32];
            for (r = 0; r < 4; r++)
                for (u = 0; u < 32; u++) c[r][u] = 0.0f;
            if (mr == 4 && nb == 32) {
                for (p = 0; p < K; p++) {
                    const float *GD__RESTRICT b = B + (long)p * ldb + j;
                    for (r = 0; r < 4; r++) {
                        const float x = A[(long)(i + r) * a_rs + (long)p * a_cs];
                        for (u = 0; u < 32; u++) c[r][u] = GD__FMA(x, b[u], c[r][u]);
                    }
                }
            } else {
                for (p = 0; p < K; p++) {
                    const float *GD__RESTRICT b = B + (long)p * ldb + j;
                    for (r = 0; r < mr; r++) {
                        const float x = A[(long)(i + r) * a_rs + (long)p * a_cs];
                        for (u = 0; u < nb; u++) c[r][u] = GD__FMA(x, b[u], c[r][u]);
                    }
                }
            }
            for (r = 0; r < mr; r++) {
                float *Cr = C + (long)(i + r) * ldc + j;
                if (beta == 1.0f)
                    for (u = 0; u < nb; u++) Cr[u] += alpha * c[r][u];
                else if (beta != 0.0f)
                    for (u = 0; u < nb; u++) Cr[u] = beta * Cr[u] + alpha * c[r][u];
                else
                    for (u = 0; u < nb; u++) Cr[u] = alpha * c[r][u];
            }
        }
    }
}
#endif

#if defined(__AVX512F__) && !defined(GDELTA_NO_SIMD)
/* 16 x 16 block transpose in registers: d (16 rows, ldd) = s (16 rows, lds)^T */
static void gd__tr16(float *GD__RESTRICT d, long ldd, const float *GD__RESTRICT s, long lds)
{
    __m512 r[16], t[16];
    int i;
    for (i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + (long)i * lds);
    for (i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (i = 0; i < 4; i++) {
        r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (i = 0; i < 2; i++) {
        int b = 8 * i, u;
        for (u = 0; u < 4; u++) {
            t[b + u] = _mm512_shuffle_f32x4(r[b + u], r[b + u + 4], 0x88);
            t[b + u + 4] = _mm512_shuffle_f32x4(r[b + u], r[b + u + 4], 0xDD);
        }
    }
    for (i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    }
    for (i = 0; i < 16; i++) _mm512_storeu_ps(d + (long)i * ldd, r[i]);
}
#elif defined(__AVX2__) && !defined(GDELTA_NO_SIMD)
#include <immintrin.h>
#define GD__TR_AVX2 1
/* 8 x 8 block transpose in registers: d (8 rows, ldd) = s (8 rows, lds)^T */
static void gd__tr8(float *GD__RESTRICT d, long ldd, const float *GD__RESTRICT s, long lds)
{
    __m256 r[8], t[8];
    int i;
    for (i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s + (long)i * lds);
    for (i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (i = 0; i < 2; i++) {
        r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (i = 0; i < 4; i++) {
        t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
        t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
    }
    for (i = 0; i < 8; i++) _mm256_storeu_ps(d + (long)i * ldd, t[i]);
}
#endif

/* dst (cols, rows) = src (rows, cols)^T with leading dims */
static void gd__transpose(float *GD__RESTRICT dst, long ldd, const float *GD__RESTRICT src,
                          long lds, int rows, int cols)
{
    int i, j, i0, j0;
    for (i0 = 0; i0 < rows; i0 += 16)
        for (j0 = 0; j0 < cols; j0 += 16) {
            int ie = i0 + 16 < rows ? i0 + 16 : rows, je = j0 + 16 < cols ? j0 + 16 : cols;
#if defined(__AVX512F__) && !defined(GDELTA_NO_SIMD)
            if (ie - i0 == 16 && je - j0 == 16) {
                gd__tr16(dst + (long)j0 * ldd + i0, ldd, src + (long)i0 * lds + j0, lds);
                continue;
            }
#elif defined(GD__TR_AVX2)
            if (ie - i0 == 16 && je - j0 == 16) {
                int a, b;
                for (a = 0; a < 16; a += 8)
                    for (b = 0; b < 16; b += 8)
                        gd__tr8(dst + (long)(j0 + b) * ldd + i0 + a, ldd,
                                src + (long)(i0 + a) * lds + j0 + b, lds);
                continue;
            }
#endif
            for (i = i0; i < ie; i++)
                for (j = j0; j < je; j++) dst[(long)j * ldd + i] = src[(long)i * lds + j];
        }
}

/* Reductions use GD__W independent partial sums (a fixed order: deterministic), so the
   compiler can vectorise them without -ffast-math. */
#define GD__W 16
static float gd__hsum(float *acc)
{
    int w;
    for (w = GD__W / 2; w >= 1; w /= 2) {
        int u;
        for (u = 0; u < w; u++) acc[u] += acc[u + w];
    }
    return acc[0];
}

static float gd__dot(const float *GD__RESTRICT a, const float *GD__RESTRICT b, int n)
{
    float acc[GD__W], s;
    int i = 0, u;
    for (u = 0; u < GD__W; u++) acc[u] = 0.0f;
    for (; i + GD__W <= n; i += GD__W)
        for (u = 0; u < GD__W; u++) acc[u] += a[i + u] * b[i + u];
    s = gd__hsum(acc);
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y = x / sqrt(|x|^2 + eps) (or a copy); returns the inverse norm used. */
static float gd__l2norm(float *GD__RESTRICT y, const float *GD__RESTRICT x, int n,
                        const gd_config *cfg)
{
    int i;
    float inv = 1.0f;
    if (cfg->normalize_qk) {
        double s, acc[8];
        int u;
        for (u = 0; u < 8; u++) acc[u] = 0.0;
        for (i = 0; i + 8 <= n; i += 8) /* 8 fixed partial sums: vectorises, deterministic */
            for (u = 0; u < 8; u++) acc[u] += (double)x[i + u] * x[i + u];
        s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
        for (; i < n; i++) s += (double)x[i] * x[i];
        s += cfg->norm_eps;
        inv = s > 0.0 ? (float)(1.0 / sqrt(s)) : 0.0f;
    }
    for (i = 0; i < n; i++) y[i] = x[i] * inv;
    return inv;
}

/* dx += d(normalise)/dx^T dy, with y the normalised vector and inv its 1/norm */
static void gd__l2norm_back(float *GD__RESTRICT dx, const float *GD__RESTRICT dy,
                            const float *GD__RESTRICT y, float inv, int n,
                            const gd_config *cfg)
{
    int i;
    if (!cfg->normalize_qk) {
        for (i = 0; i < n; i++) dx[i] += dy[i];
        return;
    }
    {
        float yd = gd__dot(y, dy, n);
        for (i = 0; i < n; i++) dx[i] += inv * (dy[i] - y[i] * yd);
    }
}

/* floored log-gate and gamma from a gate value in the configured form */
static float gd__lg(const gd_config *cfg, float g)
{
    float lg;
    if (cfg->gate_is_log) lg = g;
    else lg = g > 0.0f ? logf(g) : cfg->log_gate_floor;
    return lg < cfg->log_gate_floor ? cfg->log_gate_floor : lg;
}
static float gd__gamma(const gd_config *cfg, float g)
{
    if (cfg->gate_is_log) return expf(g < cfg->log_gate_floor ? cfg->log_gate_floor : g);
    return g;
}

/* ---------------------------------------------------------------- validation */
/* 1 if every x[i] is finite, read from the bits (exponent all ones = NaN/Inf; adding
   one exponent unit carries into bit 31 exactly then), so -ffast-math cannot fold it;
   an OR over integers, which vectorises. */
static int gd__all_finite(const float *x, long n)
{
    uint32_t bad = 0;
    long i;
    for (i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof u);
        bad |= (u & 0x7F800000u) + 0x00800000u;
    }
    return (bad & 0x80000000u) == 0;
}

static int gd__check_data(const gd_config *cfg, const char *fn, const float *q,
                          const float *k, const float *v, const float *gates,
                          const float *beta, const float *state0, long nqk, long nv,
                          long ng, long ns)
{
    long i;
    if (!gd__all_finite(q, nqk) || !gd__all_finite(k, nqk))
        return gd__err(cfg, GD_ERANGE, "%s: non-finite q or k", fn);
    if (!gd__all_finite(v, nv)) return gd__err(cfg, GD_ERANGE, "%s: non-finite v", fn);
    for (i = 0; i < ng; i++) {
        float g = gates[i], b = beta[i];
        if (gd__isnan(g) || gd__isnan(b)) /* the range tests below miss NaN under -ffast-math */
            return gd__err(cfg, GD_ERANGE, "%s: NaN gate or beta at %ld", fn, i);
        if (cfg->gate_is_log) {
            if (!(g <= 0.0f))
                return gd__err(cfg, GD_ERANGE, "%s: log gate %g at %ld not <= 0", fn, g, i);
        } else if (!(g >= 0.0f && g <= 1.0f))
            return gd__err(cfg, GD_ERANGE, "%s: gate %g at %ld outside [0,1]", fn, g, i);
        if (!(b >= 0.0f && b <= 1.0f))
            return gd__err(cfg, GD_ERANGE, "%s: beta %g at %ld outside [0,1]", fn, b, i);
    }
    if (state0 && !gd__all_finite(state0, ns))
        return gd__err(cfg, GD_ERANGE, "%s: non-finite state0", fn);
    return GD_OK;
}

static int gd__check_shapes(const gd_config *cfg, const char *fn, int B, int H, int T,
                            int Dk, int Dv)
{
    if (B < 1 || H < 1 || T < 1 || Dk < 1 || Dv < 1)
        return gd__err(cfg, GD_EINVAL, "%s: B=%d H=%d T=%d Dk=%d Dv=%d must be >= 1", fn,
                       B, H, T, Dk, Dv);
    if ((double)B * H * T * (Dk > Dv ? Dk : Dv) > 1e15 || (double)Dk * Dv > 1e12 ||
        (double)B * H > 2e9)
        return gd__err(cfg, GD_EINVAL, "%s: shapes too large", fn);
    return GD_OK;
}

/* ---------------------------------------------------------------- workspace */
static size_t gd__al(size_t n) { return (n + 15) & ~(size_t)15; } /* floats, 64-byte */

/* floats per thread */
static size_t gd__thread_floats(const gd_config *cfg, int T, int Dk, int Dv)
{
    size_t C = (size_t)(cfg->chunk_size < T ? cfg->chunk_size : T);
    size_t K = (size_t)(cfg->checkpoint < T ? cfg->checkpoint : T);
    size_t dk = (size_t)Dk, dv = (size_t)Dv, D2 = dk * dv;
    size_t ch, rec;
    /* chunked: 9 (C,Dk) + 8 (C,Dv) + 13 (C,C) + 3 D2 + 8 (C) + (Dv,C) + Dk + Dv */
    ch = 9 * gd__al(C * dk) + 8 * gd__al(C * dv) + 13 * gd__al(C * C) + 3 * gd__al(D2) +
         8 * gd__al(C) + gd__al(dv * C) + gd__al(dk) + gd__al(dv);
    /* recurrent: K states + dS + 6 (Dk) + 4 (Dv) */
    rec = (K + 1) * gd__al(D2) + 6 * gd__al(dk) + 4 * gd__al(dv);
    return (ch > rec ? ch : rec) + 16;
}

GDELTADEF size_t gd_workspace_size(const gd_config *cfg, int B, int H, int T, int Dk, int Dv)
{
    if (gd__check_cfg(cfg) != GD_OK || B < 1 || H < 1 || T < 1 || Dk < 1 || Dv < 1)
        return 0;
    return gd__thread_floats(cfg, T, Dk, Dv) * sizeof(float) * (size_t)gd__max_threads();
}

typedef struct gd__arena {
    float *p;
} gd__arena;
static float *gd__take(gd__arena *a, size_t n)
{
    float *r = a->p;
    a->p += gd__al(n);
    return r;
}

/* The saved state's description: written by both forwards (gd_forward: algo cfg->algo,
   host memory; gd_forward_cuda: GD_ALGO_CHUNKED | GD__SAVED_CUDA, device memory) and
   checked against the call by both backwards (gd__saved_fits: 1 when it matches). */
static void gd__saved_set(gd_saved *s, int algo, int B, int H, int T, int Dk, int Dv, int step,
                          int nstates)
{
    s->algo = algo;
    s->B = B; s->H = H; s->T = T; s->Dk = Dk; s->Dv = Dv;
    s->step = step;
    s->nstates = nstates;
}
static int gd__saved_fits(const gd_saved *s, int algo, int B, int H, int T, int Dk, int Dv,
                          int step)
{
    return s->states && s->algo == algo && s->B == B && s->H == H && s->T == T && s->Dk == Dk &&
           s->Dv == Dv && s->step == step;
}

static int gd__saved_prepare(const gd_config *cfg, gd_saved *s, int B, int H, int T,
                             int Dk, int Dv)
{
    int step = cfg->algo == GD_ALGO_CHUNKED ? cfg->chunk_size : cfg->checkpoint;
    int ns = (T + step - 1) / step;
    size_t nst = (size_t)B * H * ns * (size_t)Dk * Dv;
    size_t nu = cfg->algo == GD_ALGO_CHUNKED ? (size_t)B * H * T * (size_t)Dv : 0;
    size_t nw = cfg->algo == GD_ALGO_CHUNKED ? (size_t)B * H * ns * 5 * (size_t)step * step
                                             : 0;
    size_t bytes = (gd__al(nst) + gd__al(nu) + gd__al(nw) + 16) * sizeof(float);
    if (s->mem && (s->algo & GD__SAVED_CUDA)) { /* device memory from gd_forward_cuda */
        gd__cu_saved_free(s->mem);
        s->mem = NULL;
        s->cap = 0;
    }
    if (s->cap < bytes || !s->mem) {
        if (s->mem) GDELTA_FREE(s->mem);
        s->mem = GDELTA_MALLOC(bytes);
        s->cap = s->mem ? bytes : 0;
        if (!s->mem) return gd__err(cfg, GD_ENOMEM, "gd_forward: saved state alloc failed");
    }
    {
        float *base = (float *)s->mem;
        size_t off = ((size_t)(-(ptrdiff_t)(size_t)base) / sizeof(float)) & 15; /* align */
        if ((off + gd__al(nst) + gd__al(nu) + gd__al(nw)) * sizeof(float) > bytes) off = 0;
        s->states = base + off;
        s->u = nu ? s->states + gd__al(nst) : NULL;
        s->wy = nw ? s->states + gd__al(nst) + gd__al(nu) : NULL;
    }
    gd__saved_set(s, cfg->algo, B, H, T, Dk, Dv, step, ns);
    return GD_OK;
}

/* ---------------------------------------------------------------- recurrent */
/* One step on M (Dv,Dk) in place; r (Dv) or NULL. kn, qn normalised. Row i of M
   only meets row i: decay + prediction in one pass, write + readout in a second. */
static void gd__rec_step(float *GD__RESTRICT M, int Dk, int Dv, const float *GD__RESTRICT kn,
                         const float *GD__RESTRICT qn, const float *GD__RESTRICT v,
                         float gam, float bet, float scale, float *GD__RESTRICT r)
{
    int i, j, w;
    float acc[GD__W];
    for (i = 0; i < Dv; i++) {
        float *GD__RESTRICT row = M + (long)i * Dk;
        float p, u, o;
        for (w = 0; w < GD__W; w++) acc[w] = 0.0f;
        for (j = 0; j + GD__W <= Dk; j += GD__W)
            for (w = 0; w < GD__W; w++) {
                float x = row[j + w] * gam;
                row[j + w] = x;
                acc[w] += x * kn[j + w];
            }
        p = gd__hsum(acc);
        for (; j < Dk; j++) {
            row[j] *= gam;
            p += row[j] * kn[j];
        }
        u = bet * (v[i] - p);
        for (w = 0; w < GD__W; w++) acc[w] = 0.0f;
        for (j = 0; j + GD__W <= Dk; j += GD__W)
            for (w = 0; w < GD__W; w++) {
                float x = row[j + w] + u * kn[j + w];
                row[j + w] = x;
                acc[w] += x * qn[j + w];
            }
        o = gd__hsum(acc);
        for (; j < Dk; j++) {
            row[j] += u * kn[j];
            o += row[j] * qn[j];
        }
        if (r) r[i] = scale * o;
    }
}

/* Backward through one step. Mp = M_{t-1} (Dv,Dk); dS (Dv,Dk): in = dL/dM_t, out =
   dL/dM_{t-1}. dqn, dkn (Dk) accumulate; dv (Dv) written; *dbet, *da (= dL/dgamma)
   written. */
static void gd__rec_step_back(const float *GD__RESTRICT Mp, float *GD__RESTRICT dS, int Dk,
                              int Dv, const float *GD__RESTRICT kn,
                              const float *GD__RESTRICT qn, const float *GD__RESTRICT v,
                              const float *GD__RESTRICT dr, float gam, float bet,
                              float scale, float *GD__RESTRICT dqn, float *GD__RESTRICT dkn,
                              float *GD__RESTRICT dv, float *dbet, float *da)
{
    int i, j, w;
    float sb = 0.0f, sa = 0.0f, acc[GD__W];
    for (i = 0; i < Dv; i++) {
        const float *GD__RESTRICT mp = Mp + (long)i * Dk;
        float *GD__RESTRICT ds = dS + (long)i * Dk;
        float p, u, du, dp, sdo = scale * dr[i], a;
        p = gam * gd__dot(mp, kn, Dk);
        u = bet * (v[i] - p);
        for (w = 0; w < GD__W; w++) acc[w] = 0.0f;
        for (j = 0; j + GD__W <= Dk; j += GD__W)
            for (w = 0; w < GD__W; w++) {
                float st = gam * mp[j + w] + u * kn[j + w];
                float d = ds[j + w] + sdo * qn[j + w];
                ds[j + w] = d;
                dqn[j + w] += sdo * st;
                acc[w] += d * kn[j + w];
                dkn[j + w] += u * d;
            }
        du = gd__hsum(acc);
        for (; j < Dk; j++) {
            float st = gam * mp[j] + u * kn[j];
            ds[j] += sdo * qn[j];
            dqn[j] += sdo * st;
            du += ds[j] * kn[j];
            dkn[j] += u * ds[j];
        }
        dv[i] = bet * du;
        sb += du * (v[i] - p);
        dp = -bet * du;
        for (w = 0; w < GD__W; w++) acc[w] = 0.0f;
        for (j = 0; j + GD__W <= Dk; j += GD__W)
            for (w = 0; w < GD__W; w++) {
                float dsp = ds[j + w] + dp * kn[j + w];
                dkn[j + w] += dp * gam * mp[j + w];
                acc[w] += dsp * mp[j + w];
                ds[j + w] = gam * dsp;
            }
        a = gd__hsum(acc);
        for (; j < Dk; j++) {
            float dsp = ds[j] + dp * kn[j];
            dkn[j] += dp * gam * mp[j];
            a += dsp * mp[j];
            ds[j] = gam * dsp;
        }
        sa += a;
    }
    *dbet = sb;
    *da = sa;
}

static void gd__rec_forward_bh(const gd_config *cfg, float *r, float *state_out,
                               const float *q, const float *k, const float *v,
                               const float *g, const float *be, const float *s0, int T,
                               int Dk, int Dv, float *saved_states, float *ws)
{
    gd__arena ar;
    float *M, *qn, *kn;
    int t, K = cfg->checkpoint;
    size_t D2 = (size_t)Dk * Dv;
    ar.p = ws;
    M = gd__take(&ar, D2);
    qn = gd__take(&ar, (size_t)Dk);
    kn = gd__take(&ar, (size_t)Dk);
    if (s0) memcpy(M, s0, D2 * sizeof(float));
    else memset(M, 0, D2 * sizeof(float));
    for (t = 0; t < T; t++) {
        if (saved_states && t % K == 0)
            memcpy(saved_states + (size_t)(t / K) * D2, M, D2 * sizeof(float));
        gd__l2norm(qn, q + (long)t * Dk, Dk, cfg);
        gd__l2norm(kn, k + (long)t * Dk, Dk, cfg);
        gd__rec_step(M, Dk, Dv, kn, qn, v + (long)t * Dv, gd__gamma(cfg, g[t]), be[t],
                     cfg->scale, r + (long)t * Dv);
    }
    if (state_out) memcpy(state_out, M, D2 * sizeof(float));
}

static void gd__rec_backward_bh(const gd_config *cfg, const float *saved_states,
                                float *dq, float *dk, float *dv, float *dg, float *dbeta,
                                float *ds0, const float *dr, const float *dsout,
                                const float *q, const float *k, const float *v,
                                const float *g, const float *be, int T, int Dk, int Dv,
                                float *ws)
{
    gd__arena ar;
    float *dS, *Ms, *qn, *kn, *dqn, *dkn, *dvt;
    int K = cfg->checkpoint, seg, nseg = (T + K - 1) / K, t, i;
    size_t D2 = (size_t)Dk * Dv;
    ar.p = ws;
    dS = gd__take(&ar, D2);
    qn = gd__take(&ar, (size_t)Dk);
    kn = gd__take(&ar, (size_t)Dk);
    dqn = gd__take(&ar, (size_t)Dk);
    dkn = gd__take(&ar, (size_t)Dk);
    dvt = gd__take(&ar, (size_t)Dv);
    Ms = ar.p; /* (K, D2): states before each step of the segment */
    if (dsout) memcpy(dS, dsout, D2 * sizeof(float));
    else memset(dS, 0, D2 * sizeof(float));
    for (seg = nseg - 1; seg >= 0; seg--) {
        int t0 = seg * K, t1 = t0 + K < T ? t0 + K : T;
        memcpy(Ms, saved_states + (size_t)seg * D2, D2 * sizeof(float));
        for (t = t0; t + 1 < t1; t++) { /* recompute states inside the segment */
            float *dst = Ms + (size_t)(t - t0 + 1) * D2;
            memcpy(dst, Ms + (size_t)(t - t0) * D2, D2 * sizeof(float));
            gd__l2norm(qn, q + (long)t * Dk, Dk, cfg);
            gd__l2norm(kn, k + (long)t * Dk, Dk, cfg);
            gd__rec_step(dst, Dk, Dv, kn, qn, v + (long)t * Dv, gd__gamma(cfg, g[t]), be[t],
                         cfg->scale, NULL);
        }
        for (t = t1 - 1; t >= t0; t--) {
            float dbt, da, gam = gd__gamma(cfg, g[t]);
            float qinv = gd__l2norm(qn, q + (long)t * Dk, Dk, cfg);
            float kinv = gd__l2norm(kn, k + (long)t * Dk, Dk, cfg);
            memset(dqn, 0, (size_t)Dk * sizeof(float));
            memset(dkn, 0, (size_t)Dk * sizeof(float));
            gd__rec_step_back(Ms + (size_t)(t - t0) * D2, dS, Dk, Dv, kn, qn,
                              v + (long)t * Dv, dr + (long)t * Dv, gam, be[t], cfg->scale,
                              dqn, dkn, dvt, &dbt, &da);
            gd__l2norm_back(dq + (long)t * Dk, dqn, qn, qinv, Dk, cfg);
            gd__l2norm_back(dk + (long)t * Dk, dkn, kn, kinv, Dk, cfg);
            for (i = 0; i < Dv; i++) dv[(long)t * Dv + i] += dvt[i];
            dbeta[t] += dbt;
            if (cfg->gate_is_log) {
                if (g[t] > cfg->log_gate_floor) dg[t] += gam * da;
            } else
                dg[t] += da;
        }
    }
    if (ds0)
        for (i = 0; i < (int)D2; i++) ds0[i] += dS[i];
}

/* ---------------------------------------------------------------- chunked */
/* Per-chunk quantities shared by forward and backward. */
typedef struct gd__chunk {
    int L, C, Dk, Dv;
    float *qn, *kn;           /* (C,Dk) */
    float *kt;                /* (Dk,C) */
    float *KK, *QK, *P, *A;   /* (C,C) */
    float *Tm;                /* (C,C) (I + A)^-1, unit lower triangular */
    float *G, *e, *c, *bet, *qinv, *kinv, *lg;  /* (C) */
} gd__chunk;

static void gd__chunk_alloc(gd__chunk *ch, gd__arena *ar, int C, int Dk, int Dv)
{
    size_t cc = (size_t)C * C;
    ch->C = C; ch->Dk = Dk; ch->Dv = Dv;
    ch->qn = gd__take(ar, (size_t)C * Dk);
    ch->kn = gd__take(ar, (size_t)C * Dk);
    ch->kt = gd__take(ar, (size_t)C * Dk);
    ch->KK = gd__take(ar, cc);
    ch->QK = gd__take(ar, cc);
    ch->P = gd__take(ar, cc);
    ch->A = gd__take(ar, cc);
    ch->Tm = gd__take(ar, cc);
    ch->G = gd__take(ar, (size_t)C);
    ch->e = gd__take(ar, (size_t)C);
    ch->c = gd__take(ar, (size_t)C);
    ch->bet = gd__take(ar, (size_t)C);
    ch->qinv = gd__take(ar, (size_t)C);
    ch->kinv = gd__take(ar, (size_t)C);
    ch->lg = gd__take(ar, (size_t)C);
}

/* Points the (C,C) matrices of ch at a saved block of 5 C^2 floats. */
static void gd__chunk_point(gd__chunk *ch, float *w)
{
    size_t cc = (size_t)ch->C * ch->C;
    ch->KK = w;
    ch->QK = w + cc;
    ch->P = w + 2 * cc;
    ch->A = w + 3 * cc;
    ch->Tm = w + 4 * cc;
}

/* Loads chunk [t0, t0+L): normalised q, k, the transpose of k, cumulative log-decay G,
   e = exp(G), c = exp(G_last - G), KK = K K^T, QK = Q K^T, P (lower incl. diagonal)
   = exp(G_i - G_j), A (strictly lower) = beta_i KK_ij P_ij. */
static void gd__chunk_load(const gd_config *cfg, gd__chunk *ch, int L, const float *q,
                           const float *k, const float *g, const float *be, int full)
{
    int i, j, C = ch->C, Dk = ch->Dk;
    double acc = 0.0, Gd[GD__MAXC]; /* cumulative log-decay in double: differences of
                                       large G stay exact to fp32 precision */
    ch->L = L;
    for (i = 0; i < L; i++) {
        ch->qinv[i] = gd__l2norm(ch->qn + (long)i * Dk, q + (long)i * Dk, Dk, cfg);
        ch->kinv[i] = gd__l2norm(ch->kn + (long)i * Dk, k + (long)i * Dk, Dk, cfg);
        ch->lg[i] = gd__lg(cfg, g[i]);
        acc += ch->lg[i];
        Gd[i] = acc;
        ch->G[i] = (float)acc;
        ch->bet[i] = be[i];
    }
    for (i = 0; i < L; i++) {
        ch->e[i] = (float)exp(Gd[i]);
        ch->c[i] = (float)exp(Gd[L - 1] - Gd[i]);
    }
    if (!full) return; /* backward: the matrices below were saved by the forward */
    gd__transpose(ch->kt, C, ch->kn, Dk, L, Dk);
    gd__gemm(L, L, Dk, 1.0f, ch->kn, Dk, 1, ch->kt, C, 0, ch->KK, C);
    gd__gemm(L, L, Dk, 1.0f, ch->qn, Dk, 1, ch->kt, C, 0, ch->QK, C);
    for (i = 0; i < L; i++) {
        float *Pi = ch->P + (long)i * C, *Ai = ch->A + (long)i * C;
        for (j = 0; j <= i; j++) Pi[j] = expf((float)(Gd[i] - Gd[j]));
        for (j = i + 1; j < L; j++) Pi[j] = 0.0f;
        for (j = 0; j < i; j++) Ai[j] = ch->bet[i] * ch->KK[(long)i * C + j] * Pi[j];
        for (j = i; j < L; j++) Ai[j] = 0.0f;
    }
    /* Tm = (I + A)^-1 by forward substitution on the identity: row i = e_i - sum_{j<i}
       A_ij Tm_j (row j is zero right of j). L^3/6 multiply-adds, then U = Tm Bm and
       dBm = Tm^T dU are plain matrix products. */
    for (i = 0; i < L; i++) {
        float *Ti = ch->Tm + (long)i * C;
        const float *Ai = ch->A + (long)i * C;
        for (j = 0; j < L; j++) Ti[j] = 0.0f;
        Ti[i] = 1.0f;
        for (j = 0; j < i; j++) {
            const float *GD__RESTRICT Tj = ch->Tm + (long)j * C;
            const float a = Ai[j];
            int m;
            for (m = 0; m <= j; m++) Ti[m] -= a * Tj[m];
        }
    }
}

static void gd__chunk_forward_bh(const gd_config *cfg, float *r, float *state_out,
                                 const float *q, const float *k, const float *v,
                                 const float *g, const float *be, const float *s0, int T,
                                 int Dk, int Dv, float *saved_states, float *saved_u,
                                 float *saved_wy, float *ws)
{
    gd__arena ar;
    gd__chunk ch;
    int C = cfg->chunk_size < T ? cfg->chunk_size : T;
    float *St, *KS, *QS, *U0, *cU, *QKP;
    int t0, i, j, ci = 0;
    size_t D2 = (size_t)Dk * Dv;
    ar.p = ws;
    gd__chunk_alloc(&ch, &ar, C, Dk, Dv);
    St = gd__take(&ar, D2);
    KS = gd__take(&ar, (size_t)C * Dv);
    QS = gd__take(&ar, (size_t)C * Dv);
    U0 = gd__take(&ar, (size_t)C * Dv);
    cU = gd__take(&ar, (size_t)C * Dv);
    QKP = gd__take(&ar, (size_t)C * C);
    if (s0) gd__transpose(St, Dv, s0, Dk, Dv, Dk);
    else memset(St, 0, D2 * sizeof(float));
    for (t0 = 0; t0 < T; t0 += C, ci++) {
        int L = T - t0 < C ? T - t0 : C;
        float *U = saved_u ? saved_u + (long)t0 * Dv : U0;
        const float *vv = v + (long)t0 * Dv;
        float *rr = r + (long)t0 * Dv;
        if (saved_states) memcpy(saved_states + (size_t)ci * D2, St, D2 * sizeof(float));
        if (saved_wy) gd__chunk_point(&ch, saved_wy + (size_t)ci * 5 * C * C);
        gd__chunk_load(cfg, &ch, L, q + (long)t0 * Dk, k + (long)t0 * Dk, g + t0, be + t0, 1);
        gd__gemm(L, Dv, Dk, 1.0f, ch.kn, Dk, 1, St, Dv, 0, KS, Dv); /* KS_i = M k_i */
        gd__gemm(L, Dv, Dk, 1.0f, ch.qn, Dk, 1, St, Dv, 0, QS, Dv); /* QS_i = M q_i */
        /* U = (I + A)^-1 Bm, Bm = diag(beta) (V - diag(e) KS) (built in KS) */
        for (i = 0; i < L; i++) {
            float *Bi = KS + (long)i * Dv;
            const float *vi = vv + (long)i * Dv;
            float bi = ch.bet[i], ei = ch.e[i];
            for (j = 0; j < Dv; j++) Bi[j] = bi * (vi[j] - ei * Bi[j]);
        }
        gd__gemm(L, Dv, L, 1.0f, ch.Tm, C, 1, KS, Dv, 0, U, Dv);
        /* r = scale (diag(e) QS + (P o QK) U) */
        for (i = 0; i < L; i++) {
            for (j = 0; j < L; j++)
                QKP[(long)i * C + j] = ch.P[(long)i * C + j] * ch.QK[(long)i * C + j];
            for (j = 0; j < Dv; j++) rr[(long)i * Dv + j] = ch.e[i] * QS[(long)i * Dv + j];
        }
        gd__gemm(L, Dv, L, 1.0f, QKP, C, 1, U, Dv, 1, rr, Dv);
        if (cfg->scale != 1.0f)
            for (i = 0; i < L * Dv; i++) rr[i] *= cfg->scale;
        /* state: St = e_last St + K^T diag(c) U */
        {
            float el = ch.e[L - 1];
            for (i = 0; i < L; i++)
                for (j = 0; j < Dv; j++) cU[(long)i * Dv + j] = ch.c[i] * U[(long)i * Dv + j];
            gd__gemm(Dk, Dv, L, 1.0f, ch.kt, C, 1, cU, Dv, el, St, Dv);
        }
    }
    if (state_out) gd__transpose(state_out, Dk, St, Dv, Dk, Dv);
}

static void gd__chunk_backward_bh(const gd_config *cfg, const float *saved_states,
                                  const float *saved_u, const float *saved_wy, float *dq, float *dk, float *dv,
                                  float *dg, float *dbeta, float *ds0, const float *dr,
                                  const float *dsout, const float *q, const float *k,
                                  const float *v, const float *g, const float *be, int T,
                                  int Dk, int Dv, float *ws)
{
    gd__arena ar;
    gd__chunk ch;
    int C = cfg->chunk_size < T ? cfg->chunk_size : T;
    int nck = (T + C - 1) / C, ci, i, j;
    float *S, *dSt, *dS, *Ut, *dU, *dB, *Y, *W, *Z, *X, *dQn, *dKn, *QKP, *DOU, *Dm,
        *dBU, *dKK, *dG, *Wc;
    float scale = cfg->scale;
    size_t D2 = (size_t)Dk * Dv;
    ar.p = ws;
    gd__chunk_alloc(&ch, &ar, C, Dk, Dv);
    S = gd__take(&ar, D2);
    dSt = gd__take(&ar, D2);
    dS = gd__take(&ar, (size_t)Dk * C);
    Ut = gd__take(&ar, (size_t)C * Dv);
    dU = gd__take(&ar, (size_t)C * Dv);
    dB = gd__take(&ar, (size_t)C * Dv);
    Y = gd__take(&ar, (size_t)C * Dv);
    W = gd__take(&ar, (size_t)C * Dv);
    Z = gd__take(&ar, (size_t)C * Dk);
    X = gd__take(&ar, (size_t)C * Dk);
    dQn = gd__take(&ar, (size_t)C * Dk);
    dKn = gd__take(&ar, (size_t)C * Dk);
    QKP = gd__take(&ar, (size_t)C * C);
    DOU = gd__take(&ar, (size_t)C * C);
    Dm = gd__take(&ar, (size_t)C * C);
    dBU = gd__take(&ar, (size_t)C * C);
    dKK = gd__take(&ar, (size_t)C * C);
    Wc = gd__take(&ar, (size_t)C * C);
    dG = gd__take(&ar, (size_t)C);
    if (dsout) gd__transpose(dSt, Dv, dsout, Dk, Dv, Dk);
    else memset(dSt, 0, D2 * sizeof(float));
    for (ci = nck - 1; ci >= 0; ci--) {
        int t0 = ci * C, L = T - t0 < C ? T - t0 : C;
        const float *St = saved_states + (size_t)ci * D2;
        const float *U = saved_u + (long)t0 * Dv;
        const float *dO = dr + (long)t0 * Dv, *vv = v + (long)t0 * Dv;
        float el;
        gd__chunk_point(&ch, (float *)saved_wy + (size_t)ci * 5 * C * C);
        gd__chunk_load(cfg, &ch, L, q + (long)t0 * Dk, k + (long)t0 * Dk, g + t0, be + t0, 0);
        el = ch.e[L - 1];
        gd__transpose(S, Dk, St, Dv, Dk, Dv);  /* S = M (Dv,Dk) at chunk start */
        gd__transpose(Ut, C, U, Dv, L, Dv);
        /* The gate gradient (issue 38). Every term that depends on the decays carries
           either e_i = exp(G_i) (a "single" at i: dG_i += sc_i e_i) or a pair factor
           P_ij = exp(G_i - G_j), j < i (dG_i += Wc_ij P_ij, dG_j -= Wc_ij P_ij). The
           log-gate gradient is the suffix sum of dG, in which the pairs with j >= t cancel
           in exact arithmetic; in fp32 they leave eps * sum|terms|, which the division by
           gamma_t turned into errors of order 1e-8 / gamma_t (37% at gamma ~ 1e-6), and a
           gate of exactly 0 (log floored) got no gradient at all. So sc and Wc are kept
           without their decay factor and the gradient is summed at the end with only the
           terms that contain gamma_t, divided out exactly:
             dL/dgamma_t = sum_{i >= t} P_it (sc_i e_{t-1} + sum_{j < t} Wc_ij P_{t-1,j})
           (P_it e_{t-1} gamma_t = e_i, P_it P_{t-1,j} gamma_t = P_ij): no cancellation,
           L^3/6 multiply-adds per chunk. */
        for (i = 0; i < L; i++) {
            dG[i] = 0.0f;
            for (j = 0; j < L; j++) {
                QKP[(long)i * C + j] = ch.P[(long)i * C + j] * ch.QK[(long)i * C + j];
                Wc[(long)i * C + j] = 0.0f;
            }
        }
        /* --- through the state carried out: M_end = e_last M + sum_j c_j u_j k_j^T */
        gd__gemm(L, Dv, Dk, 1.0f, ch.kn, Dk, 1, dSt, Dv, 0, Y, Dv); /* Y_j = dM^T.. */
        for (j = 0; j < L - 1; j++) /* the pair (L-1, j), factor c_j = P_{L-1,j} */
            Wc[(long)(L - 1) * C + j] += gd__dot(U + (long)j * Dv, Y + (long)j * Dv, Dv);
        dG[L - 1] += gd__dot(dSt, St, (int)D2); /* a single, factor e_{L-1} */
        /* dU = scale (P o QK)^T dO + diag(c) Y */
        for (j = 0; j < L; j++)
            for (i = 0; i < Dv; i++) dU[(long)j * Dv + i] = ch.c[j] * Y[(long)j * Dv + i];
        gd__gemm(L, Dv, L, scale, QKP, 1, C, dO, Dv, 1, dU, Dv);
        /* dKn = diag(c) U dM_end, formed transposed (dS (Dk,L) = dSt U^T) so the state
           gradient is never transposed */
        gd__gemm(Dk, L, Dv, 1.0f, dSt, Dv, 1, Ut, C, 0, dS, C);
        gd__transpose(dKn, Dk, dS, C, Dk, L);
        for (j = 0; j < L; j++)
            for (i = 0; i < Dk; i++) dKn[(long)j * Dk + i] *= ch.c[j];
        /* --- inter-chunk readout r_i += scale e_i M q_i */
        gd__gemm(L, Dk, Dv, 1.0f, dO, Dv, 1, S, Dk, 0, Z, Dk); /* Z_i = M^T do_i */
        for (i = 0; i < L; i++) {
            float se = scale * ch.e[i];
            dG[i] += scale * gd__dot(ch.qn + (long)i * Dk, Z + (long)i * Dk, Dk); /* e_i */
            for (j = 0; j < Dk; j++) dQn[(long)i * Dk + j] = se * Z[(long)i * Dk + j];
        }
        /* --- intra-chunk readout r_i += scale sum_{j<=i} P_ij (q_i.k_j) u_j */
        gd__gemm(L, L, Dv, 1.0f, dO, Dv, 1, Ut, C, 0, DOU, C);
        for (i = 0; i < L; i++)
            for (j = 0; j < L; j++) {
                float d = scale * ch.P[(long)i * C + j] * DOU[(long)i * C + j];
                Dm[(long)i * C + j] = d;
                if (j < i) Wc[(long)i * C + j] += scale * DOU[(long)i * C + j] * ch.QK[(long)i * C + j];
            }
        gd__gemm(L, Dk, L, 1.0f, Dm, C, 1, ch.kn, Dk, 1, dQn, Dk);
        gd__gemm(L, Dk, L, 1.0f, Dm, 1, C, ch.qn, Dk, 1, dKn, Dk);
        /* --- WY: U = (I + A)^-1 Bm: dBm = (I + A)^-T dU = Tm^T dU */
        gd__gemm(L, Dv, L, 1.0f, ch.Tm, 1, C, dU, Dv, 0, dB, Dv);
        gd__gemm(L, L, Dv, 1.0f, dB, Dv, 1, Ut, C, 0, dBU, C); /* dA = -dB U^T */
        /* Bm_i = beta_i (v_i - e_i M k_i) */
        gd__gemm(L, Dk, Dv, 1.0f, dB, Dv, 1, S, Dk, 0, X, Dk); /* X_i = M^T dB_i */
        for (i = 0; i < L; i++) {
            float bi = ch.bet[i], ei = ch.e[i];
            const float *dBi = dB + (long)i * Dv;
            float kx = gd__dot(ch.kn + (long)i * Dk, X + (long)i * Dk, Dk);
            float db = gd__dot(dBi, vv + (long)i * Dv, Dv) - ei * kx;
            for (j = 0; j < Dv; j++) dv[(long)(t0 + i) * Dv + j] += bi * dBi[j];
            for (j = 0; j < Dk; j++) dKn[(long)i * Dk + j] -= bi * ei * X[(long)i * Dk + j];
            dG[i] -= bi * kx; /* e_i */
            /* A_ij = beta_i KK_ij P_ij (j < i) */
            for (j = 0; j < i; j++) {
                float dA = -dBU[(long)i * C + j];
                float kp = ch.KK[(long)i * C + j] * ch.P[(long)i * C + j];
                db += dA * kp;
                dKK[(long)i * C + j] = dA * bi * ch.P[(long)i * C + j];
                Wc[(long)i * C + j] += dA * bi * ch.KK[(long)i * C + j];
            }
            for (j = i; j < L; j++) dKK[(long)i * C + j] = 0.0f;
            dbeta[t0 + i] += db;
        }
        gd__gemm(L, Dk, L, 1.0f, dKK, C, 1, ch.kn, Dk, 1, dKn, Dk);
        gd__gemm(L, Dk, L, 1.0f, dKK, 1, C, ch.kn, Dk, 1, dKn, Dk);
        /* --- dM at the chunk start: e_last dM_end + scale Q^T diag(e) dO - K^T diag(beta e) dB */
        for (i = 0; i < L; i++) {
            float se = scale * ch.e[i], be_ = -ch.bet[i] * ch.e[i];
            for (j = 0; j < Dv; j++) {
                W[(long)i * Dv + j] = se * dO[(long)i * Dv + j];
                Y[(long)i * Dv + j] = be_ * dB[(long)i * Dv + j];
            }
        }
        gd__gemm(Dk, Dv, L, 1.0f, ch.qn, 1, Dk, W, Dv, el, dSt, Dv);
        gd__gemm(Dk, Dv, L, 1.0f, ch.kn, 1, Dk, Y, Dv, 1, dSt, Dv);
        /* --- gates (dG holds the singles sc, see above); normalisation */
        for (i = L - 1; i >= 0; i--) {
            long t = t0 + i;
            const float et1 = i > 0 ? ch.e[i - 1] : 1.0f;
            const float *Pt1 = ch.P + (long)(i > 0 ? i - 1 : 0) * C;
            float dgam = 0.0f;
            int m;
            for (m = i; m < L; m++) {
                const float *Wm = Wc + (long)m * C;
                float in = dG[m] * et1;
                for (j = 0; j < i; j++) in += Wm[j] * Pt1[j];
                dgam += ch.P[(long)m * C + i] * in;
            }
            /* dL/dlog gamma = gamma dL/dgamma; a gate form gets its gradient at 0 too */
            if (cfg->gate_is_log) {
                if (g[t] > cfg->log_gate_floor) dg[t] += expf(ch.lg[i]) * dgam;
            } else
                dg[t] += dgam;
            gd__l2norm_back(dq + t * Dk, dQn + (long)i * Dk, ch.qn + (long)i * Dk, ch.qinv[i],
                            Dk, cfg);
            gd__l2norm_back(dk + t * Dk, dKn + (long)i * Dk, ch.kn + (long)i * Dk, ch.kinv[i],
                            Dk, cfg);
        }
    }
    if (ds0) {
        for (i = 0; i < Dv; i++)
            for (j = 0; j < Dk; j++) ds0[(long)i * Dk + j] += dSt[(long)j * Dv + i];
    }
}

/* ---------------------------------------------------------------- public */
GDELTADEF int gd_forward(const gd_config *cfg, float *r, float *state_out,
                         const float *q, const float *k, const float *v,
                         const float *gates, const float *beta, const float *state0,
                         int B, int H, int T, int Dk, int Dv, gd_saved *saved,
                         void *workspace)
{
    int rc, ch, nbh, nt;
    size_t per;
    float *ws;
    void *own = NULL;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if (!r || !q || !k || !v || !gates || !beta)
        return gd__err(cfg, GD_EINVAL, "gd_forward: NULL buffer");
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (gd__cu_is_dev(q)) /* device pointers: the CUDA path on the default stream */
        return gd_forward_cuda(cfg, r, state_out, q, k, v, gates, beta, state0, B, H, T, Dk,
                               Dv, saved, gd__cu_is_dev(workspace) ? workspace : NULL, NULL);
#endif
    if ((rc = gd__check_shapes(cfg, "gd_forward", B, H, T, Dk, Dv)) != GD_OK) return rc;
    if ((rc = gd__check_data(cfg, "gd_forward", q, k, v, gates, beta, state0,
                             (long)B * H * T * Dk, (long)B * H * T * Dv, (long)B * H * T,
                             (long)B * H * Dk * Dv)) != GD_OK)
        return rc;
    if (saved && (rc = gd__saved_prepare(cfg, saved, B, H, T, Dk, Dv)) != GD_OK) return rc;
    nt = gd__max_threads();
    per = gd__thread_floats(cfg, T, Dk, Dv);
    if (workspace) ws = (float *)workspace;
    else {
        own = GDELTA_MALLOC(per * sizeof(float) * (size_t)nt + 64);
        if (!own) return gd__err(cfg, GD_ENOMEM, "gd_forward: workspace alloc failed");
        ws = (float *)own;
    }
    nbh = B * H;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
    for (ch = 0; ch < nt; ch++) { /* chunk ch: a contiguous range, its own scratch */
        int bh, bh_lo = (int)((long long)nbh * ch / nt);
        int bh_hi = (int)((long long)nbh * (ch + 1) / nt);
        for (bh = bh_lo; bh < bh_hi; bh++) {
            float *w = ws + per * (size_t)ch;
            size_t oq = (size_t)bh * T * Dk, ov = (size_t)bh * T * Dv, og = (size_t)bh * T;
            size_t os = (size_t)bh * Dk * Dv;
            float *sst = saved ? saved->states + (size_t)bh * saved->nstates * Dk * Dv : NULL;
            if (cfg->algo == GD_ALGO_RECURRENT)
                gd__rec_forward_bh(cfg, r + ov, state_out ? state_out + os : NULL, q + oq, k + oq,
                                   v + ov, gates + og, beta + og, state0 ? state0 + os : NULL, T,
                                   Dk, Dv, sst, w);
            else
                gd__chunk_forward_bh(cfg, r + ov, state_out ? state_out + os : NULL, q + oq,
                                     k + oq, v + ov, gates + og, beta + og,
                                     state0 ? state0 + os : NULL, T, Dk, Dv, sst,
                                     saved ? saved->u + ov : NULL,
                                     saved ? saved->wy + (size_t)bh * saved->nstates * 5 *
                                                             saved->step * saved->step
                                           : NULL,
                                     w);
        }
    }
    if (own) GDELTA_FREE(own);
    return GD_OK;
}

GDELTADEF int gd_backward(const gd_config *cfg, const gd_saved *saved,
                          float *dq, float *dk, float *dv, float *dgates,
                          float *dbeta, float *dstate0,
                          const float *dr, const float *dstate_out,
                          const float *q, const float *k, const float *v,
                          const float *gates, const float *beta, const float *state0,
                          int B, int H, int T, int Dk, int Dv, void *workspace)
{
    int rc, ch, nbh, nt, step;
    size_t per;
    float *ws;
    void *own = NULL;
    (void)state0; /* the saved chunk / checkpoint states already hold it */
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if (!saved || !dq || !dk || !dv || !dgates || !dbeta || !dr || !q || !k || !v ||
        !gates || !beta)
        return gd__err(cfg, GD_EINVAL, "gd_backward: NULL buffer");
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (saved->algo & GD__SAVED_CUDA) /* filled by gd_forward_cuda: the CUDA path */
        return gd_backward_cuda(cfg, saved, dq, dk, dv, dgates, dbeta, dstate0, dr, dstate_out,
                                q, k, v, gates, beta, state0, B, H, T, Dk, Dv,
                                gd__cu_is_dev(workspace) ? workspace : NULL, NULL);
#endif
    if ((rc = gd__check_shapes(cfg, "gd_backward", B, H, T, Dk, Dv)) != GD_OK) return rc;
    step = cfg->algo == GD_ALGO_CHUNKED ? cfg->chunk_size : cfg->checkpoint;
    if (!gd__saved_fits(saved, cfg->algo, B, H, T, Dk, Dv, step) ||
        (cfg->algo == GD_ALGO_CHUNKED && (!saved->u || !saved->wy)))
        return gd__err(cfg, GD_EINVAL, "gd_backward: saved state does not match the call");
    if ((rc = gd__check_data(cfg, "gd_backward", q, k, v, gates, beta, NULL,
                             (long)B * H * T * Dk, (long)B * H * T * Dv, (long)B * H * T,
                             0)) != GD_OK)
        return rc;
    nt = gd__max_threads();
    per = gd__thread_floats(cfg, T, Dk, Dv);
    if (workspace) ws = (float *)workspace;
    else {
        own = GDELTA_MALLOC(per * sizeof(float) * (size_t)nt + 64);
        if (!own) return gd__err(cfg, GD_ENOMEM, "gd_backward: workspace alloc failed");
        ws = (float *)own;
    }
    nbh = B * H;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
    for (ch = 0; ch < nt; ch++) { /* chunk ch: a contiguous range, its own scratch */
        int bh, bh_lo = (int)((long long)nbh * ch / nt);
        int bh_hi = (int)((long long)nbh * (ch + 1) / nt);
        for (bh = bh_lo; bh < bh_hi; bh++) {
            float *w = ws + per * (size_t)ch;
            size_t oq = (size_t)bh * T * Dk, ov = (size_t)bh * T * Dv, og = (size_t)bh * T;
            size_t os = (size_t)bh * Dk * Dv;
            const float *sst = saved->states + (size_t)bh * saved->nstates * Dk * Dv;
            if (cfg->algo == GD_ALGO_RECURRENT)
                gd__rec_backward_bh(cfg, sst, dq + oq, dk + oq, dv + ov, dgates + og, dbeta + og,
                                    dstate0 ? dstate0 + os : NULL, dr + ov,
                                    dstate_out ? dstate_out + os : NULL, q + oq, k + oq, v + ov,
                                    gates + og, beta + og, T, Dk, Dv, w);
            else
                gd__chunk_backward_bh(cfg, sst, saved->u + ov,
                                      saved->wy + (size_t)bh * saved->nstates * 5 * saved->step *
                                                      saved->step,
                                      dq + oq, dk + oq, dv + ov,
                                      dgates + og, dbeta + og, dstate0 ? dstate0 + os : NULL,
                                      dr + ov, dstate_out ? dstate_out + os : NULL, q + oq,
                                      k + oq, v + ov, gates + og, beta + og, T, Dk, Dv, w);
        }
    }
    if (own) GDELTA_FREE(own);
    return GD_OK;
}

/* ---------------------------------------------------------------- strided layouts */
GDELTADEF gd_layout gd_layout_contiguous(int H, int T, int Dk, int Dv)
{
    gd_layout l;
    l.q[0] = l.k[0] = (ptrdiff_t)H * T * Dk;
    l.v[0] = l.r[0] = (ptrdiff_t)H * T * Dv;
    l.q[1] = l.k[1] = (ptrdiff_t)T * Dk;
    l.v[1] = l.r[1] = (ptrdiff_t)T * Dv;
    l.q[2] = l.k[2] = Dk;
    l.v[2] = l.r[2] = Dv;
    return l;
}

GDELTADEF gd_layout gd_layout_qkv(int H, int T, int D)
{
    gd_layout l;
    const ptrdiff_t C = (ptrdiff_t)H * D;
    l.q[0] = l.k[0] = l.v[0] = 3 * C * T;
    l.q[1] = l.k[1] = l.v[1] = D;
    l.q[2] = l.k[2] = l.v[2] = 3 * C;
    l.r[0] = C * T;
    l.r[1] = D;
    l.r[2] = C;
    return l;
}

/* 1: layout valid; *contig: it is the contiguous one */
static int gd__check_layout(const gd_layout *l, int B, int H, int T, int Dk, int Dv,
                            int *contig)
{
    gd_layout c;
    int i, j;
    if (!l) return 0;
    for (i = 0; i < 4; i++) {
        const ptrdiff_t *s = i == 0 ? l->q : i == 1 ? l->k : i == 2 ? l->v : l->r;
        double hi = (double)(i < 2 ? Dk : Dv);
        for (j = 0; j < 3; j++)
            if (s[j] < 0) return 0;
        hi += (double)(B - 1) * s[0] + (double)(H - 1) * s[1] + (double)(T - 1) * s[2];
        if (hi * sizeof(float) > (double)PTRDIFF_MAX / 2) return 0;
    }
    c = gd_layout_contiguous(H, T, Dk, Dv);
    *contig = !memcmp(&c, l, sizeof c);
    return 1;
}

/* dst (B,H,T,D) contiguous <-> src strided; mode 0: gather, 1: scatter (set), 2: add */
static void gd__move(float *con, float *str, const float *cstr, const ptrdiff_t *s, int B,
                     int H, int T, int D, int mode)
{
    int bh;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if((long long)B * H * T * D > 65536)
#endif
    for (bh = 0; bh < B * H; bh++) {
        int t, d, b = bh / H, h = bh % H;
        for (t = 0; t < T; t++) {
            ptrdiff_t o = b * s[0] + h * s[1] + t * s[2];
            float *c = con + ((size_t)bh * T + t) * D;
            if (mode == 0) memcpy(c, cstr + o, sizeof(float) * (size_t)D);
            else if (mode == 1) memcpy(str + o, c, sizeof(float) * (size_t)D);
            else
                for (d = 0; d < D; d++) str[o + d] += c[d];
        }
    }
}

GDELTADEF int gd_forward_strided(const gd_config *cfg, const gd_layout *lay, float *r,
                                 float *state_out, const float *q, const float *k,
                                 const float *v, const float *gates, const float *beta,
                                 const float *state0, int B, int H, int T, int Dk, int Dv,
                                 gd_saved *saved, void *workspace)
{
    int rc, contig = 0;
    size_t nq, nv;
    float *buf;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if ((rc = gd__check_shapes(cfg, "gd_forward_strided", B, H, T, Dk, Dv)) != GD_OK) return rc;
    if (!gd__check_layout(lay, B, H, T, Dk, Dv, &contig))
        return gd__err(cfg, GD_EINVAL, "gd_forward_strided: bad layout");
    if (!r || !q || !k || !v) return gd__err(cfg, GD_EINVAL, "gd_forward_strided: NULL buffer");
    if (contig)
        return gd_forward(cfg, r, state_out, q, k, v, gates, beta, state0, B, H, T, Dk, Dv,
                          saved, workspace);
    nq = (size_t)B * H * T * Dk;
    nv = (size_t)B * H * T * Dv;
    buf = (float *)GDELTA_MALLOC(sizeof(float) * (2 * nq + 2 * nv));
    if (!buf) return gd__err(cfg, GD_ENOMEM, "gd_forward_strided: alloc failed");
    gd__move(buf, NULL, q, lay->q, B, H, T, Dk, 0);
    gd__move(buf + nq, NULL, k, lay->k, B, H, T, Dk, 0);
    gd__move(buf + 2 * nq, NULL, v, lay->v, B, H, T, Dv, 0);
    rc = gd_forward(cfg, buf + 2 * nq + nv, state_out, buf, buf + nq, buf + 2 * nq, gates, beta,
                    state0, B, H, T, Dk, Dv, saved, workspace);
    if (rc == GD_OK) gd__move(buf + 2 * nq + nv, r, NULL, lay->r, B, H, T, Dv, 1);
    GDELTA_FREE(buf);
    return rc;
}

GDELTADEF int gd_backward_strided(const gd_config *cfg, const gd_layout *lay,
                                  const gd_saved *saved, float *dq, float *dk, float *dv,
                                  float *dgates, float *dbeta, float *dstate0, const float *dr,
                                  const float *dstate_out, const float *q, const float *k,
                                  const float *v, const float *gates, const float *beta,
                                  const float *state0, int B, int H, int T, int Dk, int Dv,
                                  void *workspace)
{
    int rc, contig = 0;
    size_t nq, nv;
    float *buf;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if ((rc = gd__check_shapes(cfg, "gd_backward_strided", B, H, T, Dk, Dv)) != GD_OK)
        return rc;
    if (!gd__check_layout(lay, B, H, T, Dk, Dv, &contig))
        return gd__err(cfg, GD_EINVAL, "gd_backward_strided: bad layout");
    if (!dq || !dk || !dv || !dr || !q || !k || !v)
        return gd__err(cfg, GD_EINVAL, "gd_backward_strided: NULL buffer");
    if (contig)
        return gd_backward(cfg, saved, dq, dk, dv, dgates, dbeta, dstate0, dr, dstate_out, q,
                           k, v, gates, beta, state0, B, H, T, Dk, Dv, workspace);
    nq = (size_t)B * H * T * Dk;
    nv = (size_t)B * H * T * Dv;
    /* q, k, v, dr gathered; dq, dk, dv from zero, then added */
    buf = (float *)GDELTA_MALLOC(sizeof(float) * (4 * nq + 3 * nv));
    if (!buf) return gd__err(cfg, GD_ENOMEM, "gd_backward_strided: alloc failed");
    gd__move(buf, NULL, q, lay->q, B, H, T, Dk, 0);
    gd__move(buf + nq, NULL, k, lay->k, B, H, T, Dk, 0);
    gd__move(buf + 2 * nq, NULL, v, lay->v, B, H, T, Dv, 0);
    gd__move(buf + 2 * nq + nv, NULL, dr, lay->r, B, H, T, Dv, 0);
    memset(buf + 2 * nq + 2 * nv, 0, sizeof(float) * (2 * nq + nv));
    rc = gd_backward(cfg, saved, buf + 2 * nq + 2 * nv, buf + 3 * nq + 2 * nv,
                     buf + 4 * nq + 2 * nv, dgates, dbeta, dstate0, buf + 2 * nq + nv,
                     dstate_out, buf, buf + nq, buf + 2 * nq, gates, beta, state0, B, H, T, Dk,
                     Dv, workspace);
    if (rc == GD_OK) {
        gd__move(buf + 2 * nq + 2 * nv, dq, NULL, lay->q, B, H, T, Dk, 2);
        gd__move(buf + 3 * nq + 2 * nv, dk, NULL, lay->k, B, H, T, Dk, 2);
        gd__move(buf + 4 * nq + 2 * nv, dv, NULL, lay->v, B, H, T, Dv, 2);
    }
    GDELTA_FREE(buf);
    return rc;
}

GDELTADEF int gd_step(const gd_config *cfg, float *table, int n_slots, const int *slots,
                      int N, int H, int Dk, int Dv, const float *q, const float *k,
                      const float *v, const float *gates, const float *beta, float *r)
{
    int rc, ch, n, m, nh, nt;
    float *heap = NULL;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if (!table || !slots || !q || !k || !v || !gates || !beta || !r)
        return gd__err(cfg, GD_EINVAL, "gd_step: NULL buffer");
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
    if (gd__cu_is_dev(table)) /* a device state table: the CUDA path on the default stream */
        return gd_step_cuda(cfg, table, n_slots, slots, N, H, Dk, Dv, q, k, v, gates, beta, r,
                            NULL);
#endif
    if (n_slots < 1 || N < 1 || H < 1 || Dk < 1 || Dv < 1 || (double)N * H > 2e9 ||
        (double)N * H * (Dk > Dv ? Dk : Dv) > 1e15 || (double)Dk * Dv > 1e12)
        return gd__err(cfg, GD_EINVAL, "gd_step: bad dimensions");
    for (n = 0; n < N; n++) {
        if (slots[n] < 0 || slots[n] >= n_slots)
            return gd__err(cfg, GD_ERANGE, "gd_step: slot %d (row %d) outside [0,%d)",
                           slots[n], n, n_slots);
        for (m = 0; m < n; m++)
            if (slots[m] == slots[n])
                return gd__err(cfg, GD_ERANGE, "gd_step: slot %d repeated", slots[n]);
    }
    if ((rc = gd__check_data(cfg, "gd_step", q, k, v, gates, beta, NULL, (long)N * H * Dk,
                             (long)N * H * Dv, (long)N * H, 0)) != GD_OK)
        return rc;
    nh = N * H;
    nt = gd__max_threads();
    if (Dk > 512) { /* normalised q, k: on the stack up to 512, else one heap block */
        heap = (float *)GDELTA_MALLOC(2 * (size_t)Dk * (size_t)nt * sizeof(float));
        if (!heap) return gd__err(cfg, GD_ENOMEM, "gd_step: alloc failed");
    }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
    for (ch = 0; ch < nt; ch++) { /* chunk ch: a contiguous range, its own scratch */
        int n, n_lo = (int)((long long)nh * ch / nt);
        int n_hi = (int)((long long)nh * (ch + 1) / nt);
        for (n = n_lo; n < n_hi; n++) {
            int b = n / H, h = n % H;
            float qn[512], kn[512];
            float *qb = qn, *kb = kn;
            float *M = table + ((size_t)slots[b] * H + h) * (size_t)Dk * Dv;
            if (heap) {
                qb = heap + 2 * (size_t)Dk * (size_t)ch;
                kb = qb + Dk;
            }
            gd__l2norm(qb, q + (size_t)n * Dk, Dk, cfg);
            gd__l2norm(kb, k + (size_t)n * Dk, Dk, cfg);
            gd__rec_step(M, Dk, Dv, kb, qb, v + (size_t)n * Dv, gd__gamma(cfg, gates[n]),
                         beta[n], cfg->scale, r + (size_t)n * Dv);
        }
    }
    if (heap) GDELTA_FREE(heap);
    return GD_OK;
}

/* ---------------------------------------------------------------- gates */
static float gd__sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }
/* log sigma(z) = -softplus(-z), stable both ways */
static float gd__logsigmoid(float z)
{
    return z >= 0.0f ? -log1pf(expf(-z)) : z - log1pf(expf(z));
}

GDELTADEF int gd_gates_init_bias(const gd_config *cfg, float *b_gamma, float *b_beta, int H)
{
    int h;
    if (!cfg || H < 1) return gd__err(cfg, GD_EINVAL, "gd_gates_init_bias: bad arguments");
    for (h = 0; h < H; h++) {
        if (b_gamma) b_gamma[h] = cfg->b_gamma_init;
        if (b_beta) b_beta[h] = cfg->b_beta_init;
    }
    return GD_OK;
}

GDELTADEF int gd_gates_forward(const gd_config *cfg, float *gates, float *beta,
                               const float *x, const float *W_gamma, const float *b_gamma,
                               const float *W_beta, const float *b_beta,
                               int B, int T, int Dx, int H)
{
    int rc, bt, NT;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if (!x || (!gates && !beta) || (gates && !W_gamma) || (beta && !W_beta))
        return gd__err(cfg, GD_EINVAL, "gd_gates_forward: NULL buffer");
    if (B < 1 || T < 1 || Dx < 1 || H < 1 || (double)B * T * (Dx > H ? Dx : H) > 1e15 ||
        (double)B * T > 2e9)
        return gd__err(cfg, GD_EINVAL, "gd_gates_forward: bad dimensions");
    NT = B * T;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (bt = 0; bt < NT; bt++) {
        int b = bt / T, t = bt % T, h;
        const float *xr = x + (size_t)bt * Dx;
        for (h = 0; h < H; h++) {
            size_t o = ((size_t)b * H + h) * T + t;
            if (gates) {
                float z = gd__dot(W_gamma + (size_t)h * Dx, xr, Dx) + (b_gamma ? b_gamma[h] : 0.0f);
                gates[o] = cfg->gate_is_log ? gd__logsigmoid(z) : gd__sigmoid(z);
            }
            if (beta) {
                float z = gd__dot(W_beta + (size_t)h * Dx, xr, Dx) + (b_beta ? b_beta[h] : 0.0f);
                beta[o] = gd__sigmoid(z);
            }
        }
    }
    return GD_OK;
}

GDELTADEF int gd_gates_backward(const gd_config *cfg, float *dx, float *dW_gamma,
                                float *db_gamma, float *dW_beta, float *db_beta,
                                const float *dgates, const float *dbeta, const float *x,
                                const float *W_gamma, const float *b_gamma,
                                const float *W_beta, const float *b_beta,
                                int B, int T, int Dx, int H)
{
    int rc, which;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if (!x || (dgates && !W_gamma) || (dbeta && !W_beta))
        return gd__err(cfg, GD_EINVAL, "gd_gates_backward: NULL buffer");
    if (B < 1 || T < 1 || Dx < 1 || H < 1 || (double)B * T * (Dx > H ? Dx : H) > 1e15 ||
        (double)B * T > 2e9)
        return gd__err(cfg, GD_EINVAL, "gd_gates_backward: bad dimensions");
    for (which = 0; which < 2; which++) {
        const float *dy = which ? dbeta : dgates;
        const float *W = which ? W_beta : W_gamma, *bb = which ? b_beta : b_gamma;
        float *dW = which ? dW_beta : dW_gamma, *db = which ? db_beta : db_gamma;
        int h, bt, NT = B * T;
        if (!dy) continue;
        /* dz per (h, b, t), recomputed; weight grads owned per head (deterministic) */
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (h = 0; h < H; h++) {
            int b, t;
            for (b = 0; b < B; b++)
                for (t = 0; t < T; t++) {
                    const float *xr = x + ((size_t)b * T + t) * Dx;
                    float z = gd__dot(W + (size_t)h * Dx, xr, Dx) + (bb ? bb[h] : 0.0f);
                    float d = dy[((size_t)b * H + h) * T + t], dz;
                    if (!which && cfg->gate_is_log) dz = d * gd__sigmoid(-z);
                    else {
                        float s = gd__sigmoid(z);
                        dz = d * s * (1.0f - s);
                    }
                    if (dW) {
                        float *dWh = dW + (size_t)h * Dx;
                        int i;
                        for (i = 0; i < Dx; i++) dWh[i] += dz * xr[i];
                    }
                    if (db) db[h] += dz;
                }
        }
        if (dx) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
            for (bt = 0; bt < NT; bt++) {
                int b = bt / T, t = bt % T, hh, i;
                const float *xr = x + (size_t)bt * Dx;
                float *dxr = dx + (size_t)bt * Dx;
                for (hh = 0; hh < H; hh++) {
                    const float *Wh = W + (size_t)hh * Dx;
                    float z = gd__dot(Wh, xr, Dx) + (bb ? bb[hh] : 0.0f);
                    float d = dy[((size_t)b * H + hh) * T + t], dz;
                    if (!which && cfg->gate_is_log) dz = d * gd__sigmoid(-z);
                    else {
                        float s = gd__sigmoid(z);
                        dz = d * s * (1.0f - s);
                    }
                    for (i = 0; i < Dx; i++) dxr[i] += dz * Wh[i];
                }
            }
        }
    }
    return GD_OK;
}

/* ---------------------------------------------------------------- readout */
GDELTADEF size_t gd_readout_workspace_size(int B, int T, int H, int Dv)
{
    if (B < 1 || T < 1 || H < 1 || Dv < 1) return 0;
    return (3 * gd__al((size_t)B * T * H * Dv) + gd__al((size_t)B * T * H) + 16) * sizeof(float);
}

static int gd__readout_check(const gd_config *cfg, const char *fn, const float *r,
                             const float *x, const float *W_g, const float *W_proj, int B,
                             int T, int H, int Dv, int Dx, int Dout)
{
    int rc;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if (!r || !x || !W_g || !W_proj) return gd__err(cfg, GD_EINVAL, "%s: NULL buffer", fn);
    if (B < 1 || T < 1 || H < 1 || Dv < 1 || Dx < 1 || Dout < 1 ||
        (double)B * T * H * Dv > 1e15 || (double)Dout * H * Dv > 1e15 ||
        (double)B * T > 2e9 || (double)H * Dv > 2e9)
        return gd__err(cfg, GD_EINVAL, "%s: bad dimensions", fn);
    return GD_OK;
}

/* For row bt: z (H*Dv) = RMSNorm(r) * w * sigma(gate); optionally rhat (r / rms), s
   (sigmoid of the gate) and inv (H) the inverse rms per head. */
static void gd__readout_row(const gd_config *cfg, float *z, float *rhat, float *s,
                            float *inv, const float *r, const float *xr,
                            const float *norm_w, const float *W_g, const float *b_g,
                            int b, int t, int T, int H, int Dv, int Dx)
{
    int h, d;
    for (h = 0; h < H; h++) {
        const float *rr = r + (((size_t)b * H + h) * T + t) * Dv;
        double ms = 0.0;
        float iv;
        for (d = 0; d < Dv; d++) ms += (double)rr[d] * rr[d];
        iv = (float)(1.0 / sqrt(ms / Dv + cfg->rms_eps));
        if (inv) inv[h] = iv;
        for (d = 0; d < Dv; d++) {
            size_t hd = (size_t)h * Dv + d;
            float rh = rr[d] * iv;
            float pre = gd__dot(W_g + hd * Dx, xr, Dx) + (b_g ? b_g[hd] : 0.0f);
            float sg = gd__sigmoid(pre);
            z[hd] = rh * (norm_w ? norm_w[d] : 1.0f) * sg;
            if (rhat) rhat[hd] = rh;
            if (s) s[hd] = sg;
        }
    }
}

GDELTADEF int gd_readout_forward(const gd_config *cfg, float *out, const float *r,
                                 const float *x, const float *norm_w, const float *W_g,
                                 const float *b_g, const float *W_proj,
                                 int B, int T, int H, int Dv, int Dx, int Dout,
                                 void *workspace)
{
    int rc, bt, NT;
    size_t HD = (size_t)H * Dv;
    float *ws;
    void *own = NULL;
    if ((rc = gd__readout_check(cfg, "gd_readout_forward", r, x, W_g, W_proj, B, T, H, Dv,
                                Dx, Dout)) != GD_OK)
        return rc;
    if (!out) return gd__err(cfg, GD_EINVAL, "gd_readout_forward: NULL out");
    if (workspace) ws = (float *)workspace;
    else {
        own = GDELTA_MALLOC(gd_readout_workspace_size(B, T, H, Dv));
        if (!own) return gd__err(cfg, GD_ENOMEM, "gd_readout_forward: alloc failed");
        ws = (float *)own;
    }
    NT = B * T;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (bt = 0; bt < NT; bt++) {
        float *z = ws + (size_t)bt * HD;
        int o;
        gd__readout_row(cfg, z, NULL, NULL, NULL, r, x + (size_t)bt * Dx, norm_w, W_g, b_g,
                        bt / T, bt % T, T, H, Dv, Dx);
        for (o = 0; o < Dout; o++)
            out[(size_t)bt * Dout + o] = gd__dot(W_proj + (size_t)o * HD, z, (int)HD);
    }
    if (own) GDELTA_FREE(own);
    return GD_OK;
}

GDELTADEF int gd_readout_backward(const gd_config *cfg, float *dr, float *dx,
                                  float *dnorm_w, float *dW_g, float *db_g,
                                  float *dW_proj, const float *dout, const float *r,
                                  const float *x, const float *norm_w, const float *W_g,
                                  const float *b_g, const float *W_proj,
                                  int B, int T, int H, int Dv, int Dx, int Dout,
                                  void *workspace)
{
    int rc, bt, NT;
    size_t HD = (size_t)H * Dv, nz;
    float *ws, *Zb, *Gb, *Yb;
    void *own = NULL;
    if ((rc = gd__readout_check(cfg, "gd_readout_backward", r, x, W_g, W_proj, B, T, H, Dv,
                                Dx, Dout)) != GD_OK)
        return rc;
    if (!dout) return gd__err(cfg, GD_EINVAL, "gd_readout_backward: NULL dout");
    if (workspace) ws = (float *)workspace;
    else {
        own = GDELTA_MALLOC(gd_readout_workspace_size(B, T, H, Dv));
        if (!own) return gd__err(cfg, GD_ENOMEM, "gd_readout_backward: alloc failed");
        ws = (float *)own;
    }
    NT = B * T;
    nz = gd__al((size_t)NT * HD);
    Zb = ws;          /* z (BT, HD) */
    Gb = ws + nz;     /* d gate pre-activation (BT, HD) */
    Yb = ws + 2 * nz; /* dy * rhat (BT, HD), for dnorm_w */
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (bt = 0; bt < NT; bt++) {
        int b = bt / T, t = bt % T, h, d, o;
        float *z = Zb + (size_t)bt * HD, *dgp = Gb + (size_t)bt * HD, *yr = Yb + (size_t)bt * HD;
        const float *xr = x + (size_t)bt * Dx;
        const float *dor = dout + (size_t)bt * Dout;
        float *rhat = yr, *s = dgp; /* dy parked in yr, then dy * rhat; s: d pre-act */
        for (h = 0; h < H; h++) {
            const float *rr = r + (((size_t)b * H + h) * T + t) * Dv;
            double ms = 0.0;
            float iv, dot = 0.0f;
            for (d = 0; d < Dv; d++) ms += (double)rr[d] * rr[d];
            iv = (float)(1.0 / sqrt(ms / Dv + cfg->rms_eps));
            for (d = 0; d < Dv; d++) {
                size_t hd = (size_t)h * Dv + d;
                float pre = gd__dot(W_g + hd * Dx, xr, Dx) + (b_g ? b_g[hd] : 0.0f);
                float w = norm_w ? norm_w[d] : 1.0f;
                float dzv = 0.0f, sg, rh, dy;
                for (o = 0; o < Dout; o++) dzv += dor[o] * W_proj[(size_t)o * HD + hd];
                sg = gd__sigmoid(pre);
                rh = rr[d] * iv;
                z[hd] = rh * w * sg;
                dy = dzv * sg;                 /* d(RMSNorm(r) * w) */
                s[hd] = dzv * rh * w * sg * (1.0f - sg); /* d pre-activation */
                rhat[hd] = dy;                 /* park dy; turned into dy*rhat below */
                dot += dy * w * rr[d];
            }
            /* RMS backward: rh = r iv; d r = iv (w dy) - iv^3 / Dv (r . w dy) r */
            for (d = 0; d < Dv; d++) {
                size_t hd = (size_t)h * Dv + d;
                float w = norm_w ? norm_w[d] : 1.0f;
                float dy = rhat[hd];
                if (dr)
                    dr[(((size_t)b * H + h) * T + t) * Dv + d] +=
                        iv * w * dy - iv * iv * iv / (float)Dv * dot * rr[d];
                rhat[hd] = dy * rr[d] * iv;
            }
        }
        if (dx) {
            int i; /* private to the thread (a function-scope i was shared: a data race
                      that clang -O0 turned into wrong dx with 2 threads) */
            for (i = 0; i < (int)HD; i++) {
                const float *Wr = W_g + (size_t)i * Dx;
                float gv = dgp[i];
                int j;
                for (j = 0; j < Dx; j++) dx[(size_t)bt * Dx + j] += gv * Wr[j];
            }
        }
    }
    if (dW_proj) {
        int o;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (o = 0; o < Dout; o++) {
            float *dWr = dW_proj + (size_t)o * HD;
            int b2;
            for (b2 = 0; b2 < NT; b2++) {
                float g2 = dout[(size_t)b2 * Dout + o];
                const float *z = Zb + (size_t)b2 * HD;
                size_t j;
                for (j = 0; j < HD; j++) dWr[j] += g2 * z[j];
            }
        }
    }
    if (dW_g || db_g) {
        int hd;
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
        for (hd = 0; hd < (int)HD; hd++) {
            int b2, j;
            for (b2 = 0; b2 < NT; b2++) {
                float gv = Gb[(size_t)b2 * HD + hd];
                if (dW_g) {
                    const float *xr = x + (size_t)b2 * Dx;
                    float *dWr = dW_g + (size_t)hd * Dx;
                    for (j = 0; j < Dx; j++) dWr[j] += gv * xr[j];
                }
                if (db_g) db_g[hd] += gv;
            }
        }
    }
    if (dnorm_w) {
        int d;
        for (d = 0; d < Dv; d++) {
            int b2, h;
            float acc = 0.0f;
            for (b2 = 0; b2 < NT; b2++)
                for (h = 0; h < H; h++) acc += Yb[(size_t)b2 * HD + (size_t)h * Dv + d];
            dnorm_w[d] += acc;
        }
    }
    if (own) GDELTA_FREE(own);
    return GD_OK;
}

/* ---------------------------------------------------------------- CUDA */
#if defined(__CUDACC__) || defined(ATTNKIT_CUDA_SIM)
#include "cuda/gdelta.cuh"
#else
static void gd__cu_saved_free(void *mem) { (void)mem; } /* no device memory exists here */
GDELTADEF int gd_cuda_available(void) { return 0; }
/* the calls of the list GD__CUDA_API (declared above): GD_ENOCUDA with the function's
   name to the log of their cfg (every int entry has one), a workspace size 0; the other
   parameters go unused */
#define GD__NOCUDA_int(name) gd__err(cfg, GD_ENOCUDA, "%s: built without nvcc", name)
#define GD__NOCUDA_size_t(name) 0
#define GD__CUDA_STUB(ret, name, params)                                                    \
    GDELTADEF ret name params { return GD__NOCUDA_##ret(#name); }
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
GD__CUDA_API(GD__CUDA_STUB)
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
#undef GD__CUDA_STUB
#undef GD__NOCUDA_int
#undef GD__NOCUDA_size_t
#endif

#ifdef GDELTA__PUSHED_NO_TRAPPING
#pragma GCC pop_options
#undef GDELTA__PUSHED_NO_TRAPPING
#endif
#endif /* GDELTA_IMPLEMENTATION_DONE */
#endif /* GDELTA_IMPLEMENTATION */

/*
MIT License

Copyright (c) 2026 attnkit contributors

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
CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR
THE USE OR OTHER DEALINGS IN THE SOFTWARE.
*/
