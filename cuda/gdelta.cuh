/* cuda/gdelta.cuh - CUDA bodies of gdelta.h's *_cuda entry points (gated-delta memory).

   Not a standalone header: gdelta.h includes it at the end of its implementation section
   when compiled by nvcc (GDELTA_IMPLEMENTATION + __CUDACC__) or against the CPU simulation
   of CUDA (ATTNKIT_CUDA_SIM, tests/cuda_sim.h). It includes nothing from attnkit.

   What runs where (cfg.math = GD_MATH_FP32, the exact-parity path: fp32 SIMT; for
   GD_MATH_BF16 / GD_MATH_TF32 see "Tensor-core math" below):
     gd_forward_cuda   1. gd__k_check: NaN/Inf and gate/beta range scan of the inputs
                          (one int copied back, the stream synchronised: the CPU contract
                          "bad value -> GD_ERANGE, nothing written" holds on the device).
                       2. gd__k_intra, one block per (b,h,chunk), all chunks in parallel:
                          L2-normalised q, k; cumulative log-gates G (double, like the
                          CPU); e = exp(G), c = exp(G_last - G); K K^T, Q K^T, the decay
                          P = exp(G_i - G_j), A = beta_i (k_i.k_j) P_ij (strictly lower),
                          T = (I + A)^-1 (one thread per column, forward substitution in
                          the CPU's order); the WY/UT vectors W = T diag(beta e) K and
                          U0 = T diag(beta) V.
                       3. gd__k_scan_fwd, one block per (b,h, slice of BV value rows),
                          sequential over chunks: the state slice (BV,Dk) stays in shared
                          memory; per chunk U = U0 - W S^T, r = scale (e_i S q_i +
                          sum_{j<=i} P_ij (q_i.k_j) u_j), S <- e_last S + sum_j c_j u_j k_j^T.
                          Rows of the state are independent (each value channel only meets
                          itself), so the Dv split needs no communication.
     gd_backward_cuda  gd__k_intra again (recompute), gd__k_scan_bwd (reverse scan over
                       chunks for dL/dS, per value-row slice; writes dU and dS at each chunk
                       end), gd__k_chunk_bwd (one block per chunk, all in parallel: the WY
                       backward, dq, dk, dv, dbeta, the log-gate gradient by a reverse
                       cumulative sum, the L2-norm backward).
     gd_step_cuda      gd__k_step_check (slots in range and distinct), gd__k_check, then
                       gd__k_step: one block per (sequence, head, 32 value rows), a warp per
                       row, the state row read from and written back to the slot table in
                       place: decay, prediction, delta write, readout (gd_step's order).
                       It ignores cfg.math: it has no matrix product (a matrix-vector
                       update, memory-bound), so bf16/tf32 configs run the same fp32
                       kernel, bit-identical to GD_MATH_FP32 (a model trained with
                       math bf16 decodes with the same config).

   Tensor-core math (cfg.math GD_MATH_BF16 or GD_MATH_TF32; sm_80 or newer, else
   GD_ENOTSUP). Same structure, store/recompute choice, saved state and workspace as fp32;
   the kernels gd__k_intra_tc, gd__k_scan_fwd_tc, gd__k_scan_bwd_tc, gd__k_chunk_bwd_tc
   are one template each over the operand type (__nv_bfloat16 or wmma::precision::tf32).
   Every buffer stays fp32 in global memory; the state slice stays fp32 in shared memory.
     On tensor cores (gd__mm: WMMA bf16 m16n16k16 / tf32 m16n16k8, fp32 accumulators):
       intra      K K^T, Q K^T, W = Tm diag(beta e) K, U0 = Tm diag(beta) V
       scan fwd   U = U0 - W S^T, diag(e) Q S^T, (P o QK) U, S <- e_last S + U^T diag(c) K
       scan bwd   dU = diag(c) K dS^T + scale (P o QK)^T dO,
                  dS <- e_last dS + scale dO^T diag(e) Q - dU^T W
       chunk bwd  dB = Tm^T dU, Y = K dSe^T, Z = dO S, diag(c) U dSe, D = dO U^T, X = dB S,
                  D K, dA = -dB U^T, D^T Q, dKK K, dKK^T K
     In fp32 SIMT (the numerically sensitive parts, shared code with the fp32 kernels):
       L2 norms (double sums), cumulative log-gates (double), e, c, the decay P and its
       masks, A = beta K K^T o P, (I + A)^-1 by forward substitution, <dS_end, S>, dc,
       dbeta, the log-gate gradient's reverse cumulative sum, the L2-norm backward.
     gd__mm: a warp per 16x16 output tile (tiles dealt to warps in a fixed order); per k
     step the warp converts the A (16 x KS) and B (KS x 16) tiles from fp32 (any strides,
     zeros outside the operand's valid rows/columns) into its own shared slice, rows
     padded (bf16 24 elements = 48 bytes, tf32 12 / 20 floats = 48 / 80 bytes) so every
     ldm is a multiple of 16 bytes and every tile 32-byte aligned; fp32 epilogue
     C = beta C + alpha rsc_i (A diag(ks) B)_ij. A diag(...) scaling is applied in fp32
     before the rounding. Ragged chunks: the chunk is min(chunk_size, T rounded up to
     16) and rows past T are zeros in the staged tiles, never read from memory.
     Shared memory per block (256 threads, all dynamic, none above 48 KiB, so no
     cudaFuncSetAttribute is needed): staging 8 warps x 1536 B = 12 KiB (+32 B for
     alignment) in every kernel; gd__k_intra_tc adds A and Tm (2 C^2 floats) when the
     total fits in 48 KiB (C <= 64: 44.8 KiB at C = 64), else keeps them in the
     workspace as the fp32 kernel does for C > 76, plus 12 C bytes (beta e, log-gates);
     the scans add the state slice and the U slice, BV (Dk + 1 + C) floats with BV = 16
     while it fits (24.1 KiB at Dk = 128, C = 64), halved otherwise; gd__k_chunk_bwd_tc
     12 KiB dynamic + 4 KiB static.
     Tolerances (tests/parity_gdelta.cu): outputs, final state and every gradient within
     2e-2 RMS-relative (|got - ref|_2 / |ref|_2, issue 14) of the CPU chunked path; in
     the simulation bf16 lands at 3.2e-4..6.4e-3 and tf32 at 7.7e-5..7.6e-4 over the
     tested shapes (the fp32 kernels: 2e-8..1.2e-7), and the outputs must differ from
     the reference by more than a floor (1e-4 bf16, 1e-5 tf32: the operands really were
     rounded) with tf32 closer than bf16. Deterministic: bit-identical run to run. Limits: Dk, Dv and chunk_size
     multiples of 16, else GD_ENOTSUP with a message, nothing launched.
     nvcc (sm_80, sm_90): 40-111 registers per thread, no spills.
     Speed: not tuned and never measured. Operands are staged from global memory with
     plain strided loads, one output tile per warp at a time, and the per-chunk
     intermediates still go through the global workspace.

   Store or recompute: the forward saves, per (b,h), the state at every chunk start
   (T/C x Dv x Dk floats) and U (T x Dv); everything else (norms, gates, the (C,C)
   matrices, T, W) is recomputed by the backward from the inputs. The states are the one
   sequential product (recomputing them would repeat the whole forward scan); U costs as
   much memory as v. The (C,C) matrices live only in the workspace
   (gd_workspace_size_cuda), never in the saved state, unlike the CPU path's 5 T C floats
   per head. Memory saved: (T/C) Dv Dk + T Dv floats per (b,h). At the issue's training
   shapes (B*T*H = 131072 rows, D = 128, C = 64: 4 x 2K x 16 or 1 x 8K x 16) that is
   134 MB of states + 67 MB of U held from forward to backward; recomputing the states
   would cost a second forward scan (the sequential part) and still needs them materialised
   (or a fused scan) in the backward, so they are stored. Not measured on a GPU yet.
   Workspace (gd_workspace_size_cuda, the same shapes): 470 MB forward, 1.17 GB backward
   (the per-chunk (C,C) matrices and per-row intermediates are staged in global memory).

   Numerics and parity tolerances (tests/parity_gdelta.cu, fp32): outputs and final
   state within 1e-5 relative (atol 1e-5 x the reference's RMS) of the CPU chunked path
   with the same chunk size, every gradient within 1e-4 relative (atol 1e-4 x RMS); the
   step kernel within 1e-5 of the CPU recurrent path. Sums run in fixed orders, no atomics
   feed an output: results are bit-identical run to run. Every reduction is a plain loop
   in one thread (norms in double, as on the CPU), so no shuffle order enters the forward
   or backward; only the step kernel reduces over a warp (xor butterfly, fixed order).

   Limits: chunk_size 1..256 (cfg), Dk + chunk_size < 12288 (tensor-core math: 9208) (the state slice and the
   chunk's U slice share 48 KiB of shared memory), Dk * Dv and Dv * chunk_size below 2^31
   (int indices inside a block); gd_step_cuda: Dk <= 6144. Beyond: GD_EINVAL, no launch. */
#ifdef ATTNKIT_CUDA_SIM
#define GD__LAUNCH(k, g, b, sm, st, ...) ATTNKIT_SIM_LAUNCH(k, g, b, sm, st, __VA_ARGS__)
#define GD__DSMEM(T, name) AK_SIM_DYNAMIC_SHARED(T, name)
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>
#define GD__LAUNCH(k, g, b, sm, st, ...) k<<<(g), (b), (sm), (st)>>>(__VA_ARGS__)
#define GD__DSMEM(T, name)                                                                \
    extern __shared__ __align__(16) unsigned char gd__dsmem_[];                           \
    T *name = (T *)gd__dsmem_
#endif

#define GD__CU_THREADS 256
#define GD__CU_SMEM (48 * 1024)

/* ------------------------------------------------------------ parameters */
/* Workspace arrays (device). Per (b,h): (T,Dk) rows kn, qn, w, x, z, dqn, dkn; (T,Dv) rows
   u0, du, db, y; (T) e, c, qinv, kinv; (NC,C,C) kk, qk, p, a, tm, qkp, dd, da, dkk, wc
   (wc: the gate gradient's pair coefficients without their decay factor, gdelta.h's Wc);
   (NC,Dv,Dk) dse. The backward-only arrays are NULL in a forward layout. */
typedef struct gd__cws {
    float *kn, *qn, *w, *u0, *e, *c, *qinv, *kinv;
    float *kk, *qk, *p, *a, *tm, *qkp;
    float *du, *db, *y, *x, *z, *dqn, *dkn, *dse, *dd, *da, *dkk, *wc;
    int *flag;
} gd__cws;

typedef struct gd__kp {
    const float *q, *k, *v, *g, *be, *s0, *dr, *dsout;
    float *r, *sout, *states, *u;
    float *dq, *dk, *dv, *dg, *dbe, *ds0;
    gd__cws w;
    int T, Dk, Dv, C, NC, BV, gate_is_log, normalize_qk;
    int intra_sm; /* gd__k_intra: A and Tm staged in dynamic shared memory (2 C^2 floats) */
    float norm_eps, scale, floor_;
} gd__kp;

static size_t gd__cu_take(size_t *off, size_t bytes)
{
    size_t o = *off;
    *off += (bytes + 255) & ~(size_t)255;
    return o;
}

/* Lays the workspace out at base (NULL: only sizes it); returns the bytes needed. */
static size_t gd__cws_layout(gd__cws *w, void *base, size_t BH, int T, int Dk, int Dv, int C,
                             int NC, int backward)
{
    size_t off = 0, f = sizeof(float);
    size_t tk = BH * (size_t)T * Dk * f, tv = BH * (size_t)T * Dv * f, t1 = BH * (size_t)T * f;
    size_t cc = BH * (size_t)NC * C * C * f, sd = BH * (size_t)NC * Dk * Dv * f;
    size_t o[27];
    int i, n = 0;
    char *b = (char *)base;
    o[n++] = gd__cu_take(&off, 256); /* flag */
    o[n++] = gd__cu_take(&off, tk);  /* kn */
    o[n++] = gd__cu_take(&off, tk);  /* qn */
    o[n++] = gd__cu_take(&off, tk);  /* w */
    o[n++] = gd__cu_take(&off, tv);  /* u0 */
    for (i = 0; i < 4; i++) o[n++] = gd__cu_take(&off, t1); /* e c qinv kinv */
    for (i = 0; i < 6; i++) o[n++] = gd__cu_take(&off, cc); /* kk qk p a tm qkp */
    if (backward) {
        for (i = 0; i < 3; i++) o[n++] = gd__cu_take(&off, tv); /* du db y */
        for (i = 0; i < 4; i++) o[n++] = gd__cu_take(&off, tk); /* x z dqn dkn */
        o[n++] = gd__cu_take(&off, sd);                         /* dse */
        for (i = 0; i < 4; i++) o[n++] = gd__cu_take(&off, cc); /* dd da dkk wc */
    }
    if (w) {
        memset(w, 0, sizeof *w);
        if (b) {
            float **fl[] = {&w->kn, &w->qn, &w->w, &w->u0, &w->e, &w->c, &w->qinv, &w->kinv,
                            &w->kk, &w->qk, &w->p, &w->a, &w->tm, &w->qkp, &w->du, &w->db,
                            &w->y, &w->x, &w->z, &w->dqn, &w->dkn, &w->dse, &w->dd, &w->da,
                            &w->dkk, &w->wc};
            w->flag = (int *)(void *)(b + o[0]);
            for (i = 1; i < n; i++) *fl[i - 1] = (float *)(void *)(b + o[i]);
        }
    }
    return off;
}

/* ------------------------------------------------------------ device helpers */
static __device__ int gd__cu_min(int a, int b) { return a < b ? a : b; }

static __device__ float gd__cu_lg(const gd__kp *p, float g)
{
    float lg;
    if (p->gate_is_log) lg = g;
    else lg = g > 0.0f ? logf(g) : p->floor_;
    return lg < p->floor_ ? p->floor_ : lg;
}

static __device__ int gd__cu_bad(float x) /* NaN or Inf, from the bits */
{
    return (__float_as_uint(x) & 0x7F800000u) == 0x7F800000u;
}

/* ------------------------------------------------------------ input scan */
/* flag bits: 1 q/k not finite, 2 v not finite, 4 gate out of range, 8 beta out of range,
   16 state0 not finite. Grid-stride; the flag only decides an error code. */
static __global__ void gd__k_check(int *flag, const float *q, const float *k, size_t nqk,
                                   const float *v, size_t nv, const float *g, const float *be,
                                   size_t ng, const float *s0, size_t ns, int gate_is_log)
{
    size_t i, stride = (size_t)gridDim.x * blockDim.x;
    int bad = 0;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nqk; i += stride)
        if (gd__cu_bad(q[i]) || gd__cu_bad(k[i])) bad |= 1;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nv; i += stride)
        if (gd__cu_bad(v[i])) bad |= 2;
    for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < ng; i += stride) {
        float x = g[i], b = be[i];
        if (gd__cu_bad(x) && !(gate_is_log && x < 0.0f)) bad |= 4; /* -inf log gate is fine */
        else if (gate_is_log ? !(x <= 0.0f) : !(x >= 0.0f && x <= 1.0f)) bad |= 4;
        if (!(b >= 0.0f && b <= 1.0f)) bad |= 8;
    }
    if (s0)
        for (i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < ns; i += stride)
            if (gd__cu_bad(s0[i])) bad |= 16;
    if (bad) atomicOr(flag, bad);
}

/* ------------------------------------------------------------ chunk pieces (SIMT, fp32) */
/* Shared by the fp32 and the tensor-core kernels: the numerically sensitive parts stay
   here, in fp32 (norms and gate sums in double, as on the CPU). */

/* the chunk's rows: normalised q, k into qn, kn (threads [0,L) q, [L,2L) k), their
   inverse norms; thread 0: the cumulative log-gates sG, e = exp(G), c = exp(G_last - G) */
static __device__ void gd__cu_rows(const gd__kp &p, size_t row0, int L, double *sG)
{
    const int tid = threadIdx.x, nt = blockDim.x, Dk = p.Dk;
    const gd__cws w = p.w;
    int idx, i, d;
    for (idx = tid; idx < 2 * L; idx += nt) {
        int isk = idx >= L;
        size_t rr = row0 + (size_t)(isk ? idx - L : idx);
        const float *xs = (isk ? p.k : p.q) + rr * Dk;
        float *ys = (isk ? w.kn : w.qn) + rr * Dk;
        float inv = 1.0f;
        if (p.normalize_qk) {
            double s = 0.0;
            for (d = 0; d < Dk; d++) s += (double)xs[d] * xs[d];
            s += p.norm_eps;
            inv = s > 0.0 ? (float)(1.0 / sqrt(s)) : 0.0f;
        }
        for (d = 0; d < Dk; d++) ys[d] = xs[d] * inv;
        (isk ? w.kinv : w.qinv)[rr] = inv;
    }
    if (tid == 0) {
        double acc = 0.0;
        for (i = 0; i < L; i++) {
            acc += gd__cu_lg(&p, p.g[row0 + i]);
            sG[i] = acc;
        }
        for (i = 0; i < L; i++) {
            w.e[row0 + i] = (float)exp(sG[i]);
            w.c[row0 + i] = (float)exp(sG[L - 1] - sG[i]);
        }
    }
}

/* Tm = (I + A)^-1 (A, Tm (C,C), shared or global memory): one thread per column m,
   forward substitution in the CPU's order per entry; tm_copy: Tm also to the workspace */
static __device__ void gd__cu_solve(const gd__kp &p, const float *As, float *Ts, size_t cc0,
                                    int L, int tm_copy)
{
    const int C = p.C;
    int m, i, j;
    for (m = threadIdx.x; m < C; m += blockDim.x)
        for (i = 0; i < C; i++) {
            float x = 0.0f;
            if (i < L && m < L && i >= m) {
                x = i == m ? 1.0f : 0.0f;
                for (j = m; j < i; j++) x -= As[i * C + j] * Ts[j * C + m];
            }
            Ts[i * C + m] = x;
            if (tm_copy) p.w.tm[cc0 + (size_t)i * C + m] = x;
        }
}

/* ------------------------------------------------------------ intra-chunk */
/* One block per (bh, chunk). Writes kn, qn, qinv, kinv, e, c (rows of the chunk), the
   (C,C) matrices kk, qk, p, a, tm, qkp (zero outside the causal part), w and u0. */
static __global__ void gd__k_intra(gd__kp p)
{
    GD__DSMEM(float, sm);
    __shared__ double sG[GD__MAXC];
    const int tid = threadIdx.x, nt = blockDim.x;
    const int C = p.C, Dk = p.Dk, Dv = p.Dv, T = p.T;
    const size_t bh = blockIdx.x / (unsigned)p.NC;
    const int ci = (int)(blockIdx.x % (unsigned)p.NC);
    const int t0 = ci * C, L = gd__cu_min(C, T - t0);
    const size_t row0 = bh * (size_t)T + t0, cc0 = (bh * p.NC + ci) * (size_t)C * C;
    const gd__cws w = p.w;
    /* A and Tm: in shared memory when they fit (the column solve and W, U0 read them
       C^2 times), else straight in the workspace; the workspace copies are always
       written (the backward reads them) */
    float *As = p.intra_sm ? sm : w.a + cc0, *Ts = p.intra_sm ? sm + (size_t)C * C : w.tm + cc0;
    int idx, i, j, d;
    gd__cu_rows(p, row0, L, sG);
    __syncthreads();
    /* --- 2: K K^T, Q K^T, P, A, P o QK */
    for (idx = tid; idx < C * C; idx += nt) {
        float kk = 0.0f, qk = 0.0f, pp = 0.0f, aa = 0.0f, qkp = 0.0f;
        i = idx / C;
        j = idx % C;
        if (i < L && j <= i) {
            const float *ki = w.kn + (row0 + i) * Dk, *kj = w.kn + (row0 + j) * Dk;
            const float *qi = w.qn + (row0 + i) * Dk;
            for (d = 0; d < Dk; d++) {
                kk += ki[d] * kj[d];
                qk += qi[d] * kj[d];
            }
            pp = expf((float)(sG[i] - sG[j]));
            if (j < i) aa = p.be[row0 + i] * kk * pp;
            qkp = pp * qk;
        }
        w.kk[cc0 + idx] = kk;
        w.qk[cc0 + idx] = qk;
        w.p[cc0 + idx] = pp;
        As[idx] = aa;
        if (p.intra_sm) w.a[cc0 + idx] = aa;
        w.qkp[cc0 + idx] = qkp;
    }
    __syncthreads();
    gd__cu_solve(p, As, Ts, cc0, L, p.intra_sm);
    __syncthreads();
    /* --- 4: W = Tm diag(beta e) K, U0 = Tm diag(beta) V */
    for (idx = tid; idx < L * Dk; idx += nt) {
        const float *Tm = Ts;
        float s = 0.0f;
        i = idx / Dk;
        d = idx % Dk;
        for (j = 0; j <= i; j++)
            s += Tm[i * C + j] * (p.be[row0 + j] * w.e[row0 + j] * w.kn[(row0 + j) * Dk + d]);
        w.w[(row0 + i) * Dk + d] = s;
    }
    for (idx = tid; idx < L * Dv; idx += nt) {
        const float *Tm = Ts;
        float s = 0.0f;
        i = idx / Dv;
        d = idx % Dv;
        for (j = 0; j <= i; j++) s += Tm[i * C + j] * (p.be[row0 + j] * p.v[(row0 + j) * Dv + d]);
        w.u0[(row0 + i) * Dv + d] = s;
    }
}

/* ------------------------------------------------------------ forward scan */
/* grid (BH, ceil(Dv/BV)): the block owns value rows [v0, v0+nv) of the state. Dynamic
   shared memory: S (BV,Dk) with row stride Dk + 1 (lanes that walk different rows at the
   same column hit different banks), then the chunk's U slice (C,BV). */
static __global__ void gd__k_scan_fwd(gd__kp p)
{
    GD__DSMEM(float, sm);
    const int tid = threadIdx.x, nt = blockDim.x;
    const int C = p.C, Dk = p.Dk, Dv = p.Dv, T = p.T, BV = p.BV, SP = Dk + 1;
    const size_t bh = blockIdx.x;
    const int v0 = (int)blockIdx.y * BV, nv = gd__cu_min(BV, Dv - v0);
    const gd__cws w = p.w;
    float *S = sm, *Us = sm + (size_t)BV * SP;
    int idx, ci, i, j, d, x;
    for (idx = tid; idx < nv * Dk; idx += nt) {
        x = idx / Dk;
        d = idx % Dk;
        S[x * SP + d] = p.s0 ? p.s0[(bh * Dv + v0 + x) * Dk + d] : 0.0f;
    }
    for (ci = 0; ci < p.NC; ci++) {
        const int t0 = ci * C, L = gd__cu_min(C, T - t0);
        const size_t row0 = bh * (size_t)T + t0, cc0 = (bh * p.NC + ci) * (size_t)C * C;
        float el;
        __syncthreads();
        if (p.states)
            for (idx = tid; idx < nv * Dk; idx += nt) {
                x = idx / Dk;
                d = idx % Dk;
                p.states[((bh * p.NC + ci) * Dv + v0 + x) * Dk + d] = S[x * SP + d];
            }
        /* U = U0 - W S^T */
        for (idx = tid; idx < L * nv; idx += nt) {
            const float *wj, *sx;
            float s = 0.0f, u;
            j = idx / nv;
            x = idx % nv;
            wj = w.w + (row0 + j) * Dk;
            sx = S + x * SP;
            for (d = 0; d < Dk; d++) s += wj[d] * sx[d];
            u = w.u0[(row0 + j) * Dv + v0 + x] - s;
            Us[j * BV + x] = u;
            if (p.u) p.u[(row0 + j) * Dv + v0 + x] = u;
        }
        __syncthreads();
        /* r_i = scale (e_i S q_i + sum_{j<=i} P_ij QK_ij u_j) */
        for (idx = tid; idx < L * nv; idx += nt) {
            const float *qi, *sx, *mq;
            float s = 0.0f, o;
            i = idx / nv;
            x = idx % nv;
            qi = w.qn + (row0 + i) * Dk;
            sx = S + x * SP;
            mq = w.qkp + cc0 + (size_t)i * C;
            for (d = 0; d < Dk; d++) s += sx[d] * qi[d];
            o = w.e[row0 + i] * s;
            for (j = 0; j <= i; j++) o += mq[j] * Us[j * BV + x];
            if (p.scale != 1.0f) o *= p.scale;
            p.r[(row0 + i) * Dv + v0 + x] = o;
        }
        __syncthreads();
        /* S <- e_last S + sum_j c_j u_j k_j^T (each thread owns its (x,d)) */
        el = w.e[row0 + L - 1];
        for (idx = tid; idx < nv * Dk; idx += nt) {
            float s = 0.0f;
            x = idx / Dk;
            d = idx % Dk;
            for (j = 0; j < L; j++) s += w.kn[(row0 + j) * Dk + d] * (w.c[row0 + j] * Us[j * BV + x]);
            S[x * SP + d] = el * S[x * SP + d] + s;
        }
    }
    if (p.sout)
        for (idx = tid; idx < nv * Dk; idx += nt) {
            x = idx / Dk;
            d = idx % Dk;
            p.sout[(bh * Dv + v0 + x) * Dk + d] = S[x * SP + d];
        }
}

/* ------------------------------------------------------------ backward scan */
/* grid (BH, ceil(Dv/BV)); dS (BV,Dk) and the chunk's dU slice (C,BV) in shared memory.
   Writes dse (the gradient for the state at each chunk's end), du, and adds the
   gradient for the initial state to ds0. */
static __global__ void gd__k_scan_bwd(gd__kp p)
{
    GD__DSMEM(float, sm);
    const int tid = threadIdx.x, nt = blockDim.x;
    const int C = p.C, Dk = p.Dk, Dv = p.Dv, T = p.T, BV = p.BV, SP = Dk + 1;
    const size_t bh = blockIdx.x;
    const int v0 = (int)blockIdx.y * BV, nv = gd__cu_min(BV, Dv - v0);
    const gd__cws w = p.w;
    float *dS = sm, *dUs = sm + (size_t)BV * SP;
    int idx, ci, i, j, d, x;
    for (idx = tid; idx < nv * Dk; idx += nt) {
        x = idx / Dk;
        d = idx % Dk;
        dS[x * SP + d] = p.dsout ? p.dsout[(bh * Dv + v0 + x) * Dk + d] : 0.0f;
    }
    for (ci = p.NC - 1; ci >= 0; ci--) {
        const int t0 = ci * C, L = gd__cu_min(C, T - t0);
        const size_t row0 = bh * (size_t)T + t0, cc0 = (bh * p.NC + ci) * (size_t)C * C;
        float el;
        __syncthreads();
        for (idx = tid; idx < nv * Dk; idx += nt) {
            x = idx / Dk;
            d = idx % Dk;
            w.dse[((bh * p.NC + ci) * Dv + v0 + x) * Dk + d] = dS[x * SP + d];
        }
        /* dU_j = c_j dS k_j + scale sum_{i>=j} P_ij QK_ij dO_i */
        for (idx = tid; idx < L * nv; idx += nt) {
            const float *kj, *sx;
            float y = 0.0f, s = 0.0f, du;
            j = idx / nv;
            x = idx % nv;
            kj = w.kn + (row0 + j) * Dk;
            sx = dS + x * SP;
            for (d = 0; d < Dk; d++) y += kj[d] * sx[d];
            for (i = j; i < L; i++) s += w.qkp[cc0 + (size_t)i * C + j] * p.dr[(row0 + i) * Dv + v0 + x];
            du = w.c[row0 + j] * y + p.scale * s;
            dUs[j * BV + x] = du;
            w.du[(row0 + j) * Dv + v0 + x] = du;
        }
        __syncthreads();
        /* dS <- e_last dS + scale sum_i e_i q_i dO_i^T - sum_j w_j dU_j^T */
        el = w.e[row0 + L - 1];
        for (idx = tid; idx < nv * Dk; idx += nt) {
            float a = 0.0f, b = 0.0f;
            x = idx / Dk;
            d = idx % Dk;
            for (i = 0; i < L; i++)
                a += w.qn[(row0 + i) * Dk + d] * (w.e[row0 + i] * p.dr[(row0 + i) * Dv + v0 + x]);
            for (j = 0; j < L; j++) b += w.w[(row0 + j) * Dk + d] * dUs[j * BV + x];
            dS[x * SP + d] = el * dS[x * SP + d] + p.scale * a - b;
        }
    }
    __syncthreads();
    if (p.ds0)
        for (idx = tid; idx < nv * Dk; idx += nt) {
            x = idx / Dk;
            d = idx % Dk;
            p.ds0[(bh * Dv + v0 + x) * Dk + d] += dS[x * SP + d];
        }
}

/* the end of the per-chunk backward (after dB, X, Z, dQn, dKn, D, dA, dKK and the pair
   coefficients wc are in the workspace and sdc_j = u_j . Y_j, sred[0] = <dS_end, S> in
   shared memory): dbeta, the gate gradient, the L2-norm backward into dq, dk.
   Gate gradient (issue 38, as gdelta.h's chunked backward): singles sc_i (the terms with
   the factor e_i, here without it) and pairs wc_ij (factor P_ij, without it; the carried
   state adds sdc_j to row L-1) give
     dL/dgamma_t = sum_{i >= t} P_it (sc_i e_{t-1} + sum_{j < t} wc_ij P_{t-1,j})
   summed by one thread per t: only terms that contain gamma_t, so nothing cancels (the
   former suffix sum of log-gate terms lost 1e-8 / gamma_t to cancellation and gave a
   gate of exactly 0 no gradient); dL/dlog gamma = gamma dL/dgamma. */
static __device__ void gd__cu_bwd_rows(const gd__kp &p, size_t row0, size_t cc0, int L,
                                       const float *sred, const float *sdc, float *svec)
{
    const int tid = threadIdx.x, nt = blockDim.x, C = p.C, Dk = p.Dk, Dv = p.Dv;
    const float scale = p.scale;
    const gd__cws w = p.w;
    int idx, i, j, d, x;
    for (idx = tid; idx < L; idx += nt) { /* dbeta and the per-row dG terms */
        const size_t rr = row0 + idx;
        const float bi = p.be[rr], ei = w.e[rr];
        float kx = 0.0f, zq = 0.0f, db = 0.0f;
        for (d = 0; d < Dk; d++) {
            kx += w.kn[rr * Dk + d] * w.x[rr * Dk + d];
            zq += w.qn[rr * Dk + d] * w.z[rr * Dk + d];
        }
        for (x = 0; x < Dv; x++) db += w.db[rr * Dv + x] * p.v[rr * Dv + x];
        db -= ei * kx;
        for (j = 0; j < idx; j++)
            db += w.da[cc0 + (size_t)idx * C + j] * (w.kk[cc0 + (size_t)idx * C + j] *
                                                       w.p[cc0 + (size_t)idx * C + j]);
        p.dbe[rr] += db;
        svec[idx] = scale * zq - bi * kx + (idx == L - 1 ? sred[0] : 0.0f); /* factor e_i */
    }
    __syncthreads();
    /* --- phase 4: the gate gradient, one thread per gate */
    for (idx = tid; idx < L; idx += nt) {
        const size_t t = row0 + idx;
        const float et1 = idx > 0 ? w.e[t - 1] : 1.0f, gt = p.g[t];
        const size_t pt1 = cc0 + (size_t)(idx > 0 ? idx - 1 : 0) * C;
        float dgam = 0.0f;
        for (i = idx; i < L; i++) {
            const size_t oi = cc0 + (size_t)i * C;
            float in = svec[i] * et1;
            if (i == L - 1)
                for (j = 0; j < idx; j++) in += (w.wc[oi + j] + sdc[j]) * w.p[pt1 + j];
            else
                for (j = 0; j < idx; j++) in += w.wc[oi + j] * w.p[pt1 + j];
            dgam += w.p[oi + idx] * in;
        }
        if (p.gate_is_log) {
            if (gt > p.floor_) p.dg[t] += expf(gt) * dgam;
        } else
            p.dg[t] += dgam;
    }
    /* L2-norm backward: rows [0,L) q, [L,2L) k */
    for (idx = tid; idx < 2 * L; idx += nt) {
        const int isk = idx >= L;
        const size_t rr = row0 + (size_t)(isk ? idx - L : idx);
        const float *y = (isk ? w.kn : w.qn) + rr * Dk, *dy = (isk ? w.dkn : w.dqn) + rr * Dk;
        float *dx = (isk ? p.dk : p.dq) + rr * Dk;
        if (!p.normalize_qk) {
            for (d = 0; d < Dk; d++) dx[d] += dy[d];
        } else {
            const float inv = (isk ? w.kinv : w.qinv)[rr];
            float yd = 0.0f;
            for (d = 0; d < Dk; d++) yd += y[d] * dy[d];
            for (d = 0; d < Dk; d++) dx[d] += inv * (dy[d] - y[d] * yd);
        }
    }
}

/* ------------------------------------------------------------ per-chunk backward */
/* One block per (bh, chunk), chunks independent once dU and dse are known. Accumulates
   into dq, dk, dv, dg, dbe for the chunk's rows. Shared: per-row vectors and a
   fixed-shape tree for <dS_end, S>. */
static __global__ void gd__k_chunk_bwd(gd__kp p)
{
    __shared__ float sdc[256], svec[256], sred[GD__CU_THREADS];
    const int tid = threadIdx.x, nt = blockDim.x;
    const int C = p.C, Dk = p.Dk, Dv = p.Dv, T = p.T;
    const size_t bh = blockIdx.x / (unsigned)p.NC;
    const int ci = (int)(blockIdx.x % (unsigned)p.NC);
    const int t0 = ci * C, L = gd__cu_min(C, T - t0);
    const size_t row0 = bh * (size_t)T + t0, cc0 = (bh * p.NC + ci) * (size_t)C * C;
    const size_t s0 = (bh * p.NC + ci) * (size_t)Dv * Dk;
    const float *S = p.states + s0, *dSe = p.w.dse + s0;
    const float *U = p.u, *dO = p.dr;
    const gd__cws w = p.w;
    const float scale = p.scale;
    int idx, i, j, d, x, s;
    float part = 0.0f;
    /* --- phase 1 */
    for (idx = tid; idx < L * Dv; idx += nt) { /* dB = Tm^T dU; Y_j = dSe k_j */
        float b = 0.0f, y = 0.0f;
        i = idx / Dv;
        x = idx % Dv;
        for (j = i; j < L; j++) b += w.tm[cc0 + (size_t)j * C + i] * w.du[(row0 + j) * Dv + x];
        for (d = 0; d < Dk; d++) y += dSe[(size_t)x * Dk + d] * w.kn[(row0 + i) * Dk + d];
        w.db[(row0 + i) * Dv + x] = b;
        w.y[(row0 + i) * Dv + x] = y;
    }
    for (idx = tid; idx < L * Dk; idx += nt) { /* Z_i = S^T dO_i; dKn_j = c_j dSe^T u_j */
        float z = 0.0f, a = 0.0f;
        i = idx / Dk;
        d = idx % Dk;
        for (x = 0; x < Dv; x++) {
            z += S[(size_t)x * Dk + d] * dO[(row0 + i) * Dv + x];
            a += dSe[(size_t)x * Dk + d] * U[(row0 + i) * Dv + x];
        }
        w.z[(row0 + i) * Dk + d] = z;
        w.dkn[(row0 + i) * Dk + d] = w.c[row0 + i] * a;
    }
    for (idx = tid; idx < C * C; idx += nt) { /* D_ij = scale P_ij (dO_i . u_j) */
        float dd = 0.0f, wc = 0.0f;
        i = idx / C;
        j = idx % C;
        if (i < L && j <= i) {
            float s2 = 0.0f;
            for (x = 0; x < Dv; x++) s2 += dO[(row0 + i) * Dv + x] * U[(row0 + j) * Dv + x];
            dd = scale * w.p[cc0 + idx] * s2;
            if (j < i) wc = scale * s2 * w.qk[cc0 + idx]; /* the pair's coefficient, no P */
        }
        w.dd[cc0 + idx] = dd;
        w.wc[cc0 + idx] = wc;
    }
    for (idx = tid; idx < Dv * Dk; idx += nt) part += dSe[idx] * S[idx];
    sred[tid] = part;
    __syncthreads();
    for (s = GD__CU_THREADS / 2; s > 0; s >>= 1) { /* fixed tree: deterministic */
        if (tid < s) sred[tid] += sred[tid + s];
        __syncthreads();
    }
    /* --- phase 2 */
    for (idx = tid; idx < L * Dk; idx += nt) { /* X_i = S^T dB_i; dQn */
        float xs = 0.0f, q = 0.0f;
        i = idx / Dk;
        d = idx % Dk;
        for (x = 0; x < Dv; x++) xs += S[(size_t)x * Dk + d] * w.db[(row0 + i) * Dv + x];
        w.x[(row0 + i) * Dk + d] = xs;
        for (j = 0; j <= i; j++) q += w.dd[cc0 + (size_t)i * C + j] * w.kn[(row0 + j) * Dk + d];
        w.dqn[(row0 + i) * Dk + d] = scale * w.e[row0 + i] * w.z[(row0 + i) * Dk + d] + q;
    }
    for (idx = tid; idx < C * C; idx += nt) { /* dA = -dB U^T (strictly lower), dKK */
        float da = 0.0f, dkk = 0.0f;
        i = idx / C;
        j = idx % C;
        if (i < L && j < i) {
            float s2 = 0.0f;
            for (x = 0; x < Dv; x++) s2 += w.db[(row0 + i) * Dv + x] * U[(row0 + j) * Dv + x];
            da = -s2;
            dkk = da * p.be[row0 + i] * w.p[cc0 + idx];
            w.wc[cc0 + idx] += da * p.be[row0 + i] * w.kk[cc0 + idx];
        }
        w.da[cc0 + idx] = da;
        w.dkk[cc0 + idx] = dkk;
    }
    for (idx = tid; idx < L; idx += nt) { /* u_j . Y_j (dc_j without its factor c_j) */
        float s2 = 0.0f;
        for (x = 0; x < Dv; x++) s2 += U[(row0 + idx) * Dv + x] * w.y[(row0 + idx) * Dv + x];
        sdc[idx] = idx < L - 1 ? s2 : 0.0f;
    }
    for (idx = tid; idx < L * Dv; idx += nt) { /* dv_i += beta_i dB_i */
        i = idx / Dv;
        x = idx % Dv;
        p.dv[(row0 + i) * Dv + x] += p.be[row0 + i] * w.db[(row0 + i) * Dv + x];
    }
    __syncthreads();
    /* --- phase 3 */
    for (idx = tid; idx < L * Dk; idx += nt) { /* rest of dKn */
        float a = 0.0f, b = 0.0f, c2 = 0.0f;
        const int m = idx / Dk;
        const float bm = p.be[row0 + m], em = w.e[row0 + m];
        d = idx % Dk;
        for (i = m; i < L; i++) a += w.dd[cc0 + (size_t)i * C + m] * w.qn[(row0 + i) * Dk + d];
        for (j = 0; j < m; j++) b += w.dkk[cc0 + (size_t)m * C + j] * w.kn[(row0 + j) * Dk + d];
        for (i = m + 1; i < L; i++) c2 += w.dkk[cc0 + (size_t)i * C + m] * w.kn[(row0 + i) * Dk + d];
        w.dkn[(row0 + m) * Dk + d] += a - bm * em * w.x[(row0 + m) * Dk + d] + b + c2;
    }
    gd__cu_bwd_rows(p, row0, cc0, L, sred, sdc, svec);
}

/* ------------------------------------------------------------ tensor cores (tf32 / bf16) */
/* cfg.math GD_MATH_BF16 / GD_MATH_TF32: the chunk products run on WMMA. gd__mm is the one
   product routine: a warp per 16x16 output tile (tiles dealt to warps in a fixed order);
   per k step it stages the A (16 x KS) and B (KS x 16) tiles from fp32 operands (global or
   shared memory, any row/column strides, zero outside the operand's valid rows and
   columns: ragged chunk tails cost nothing) into its own padded slice of shared memory,
   converted to bf16 (round to nearest even) or rounded to tf32, and accumulates with
   mma_sync in an fp32 fragment; the tile goes back through the same slice to an fp32
   epilogue C = beta C + alpha rsc_i (A diag(ks) B)_ij (rd = 0: C is overwritten, not
   read). */
#if defined(ATTNKIT_CUDA_SIM) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define GD__TC_ARCH 1 /* bf16 / tf32 WMMA exist (sm_80+) */
#endif

#define GD__TC_SLICE 1536                                   /* staging bytes per warp */
#define GD__TC_STAGE ((GD__CU_THREADS / 32) * GD__TC_SLICE) /* per block: 12 KiB */

/* Staged tiles: A at the slice start (16 rows, LDA elements apart), B 768 bytes in (KS
   rows, LDB apart): every row stride a multiple of 16 bytes, every tile start 32-byte
   aligned (WMMA's rules); the fp32 output tile (16 x 20 floats, 1280 bytes) reuses the
   slice after the k loop. bf16: KS 16, A and B 16 x 24 (1536 bytes); tf32: KS 8, A 16 x 12
   floats (768 bytes), B 8 x 20 floats (640 bytes). */
template <class MT> struct gd__tct;
template <> struct gd__tct<__nv_bfloat16> {
    typedef __nv_bfloat16 st;
    enum { KS = 16, LDA = 24, LDB = 24 };
    typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16,
                                   nvcuda::wmma::row_major> fa;
    typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16,
                                   nvcuda::wmma::row_major> fb;
    typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> fc;
    static __device__ st cvt(float x) { return __float2bfloat16(x); }
};
template <> struct gd__tct<nvcuda::wmma::precision::tf32> {
    typedef float st;
    enum { KS = 8, LDA = 12, LDB = 20 };
    typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 8,
                                   nvcuda::wmma::precision::tf32, nvcuda::wmma::row_major> fa;
    typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 8,
                                   nvcuda::wmma::precision::tf32, nvcuda::wmma::row_major> fb;
    typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 8, float> fc;
    static __device__ st cvt(float x) { return nvcuda::wmma::__float_to_tf32(x); }
};

/* an fp32 operand: element (r, c) at p[r rs + c cs], zero for r >= nr or c >= nc */
typedef struct gd__op {
    const float *p;
    int rs, cs, nr, nc;
} gd__op;
/* the epilogue: rows [0,nr) and columns [0,nc) of C (row stride ld) get
   beta C + alpha rsc_i acc (rd = 1) or alpha rsc_i acc (rd = 0); rsc NULL: 1 */
typedef struct gd__ep {
    float *p;
    int ld, nr, nc, rd;
    float alpha, beta;
    const float *rsc;
} gd__ep;

static __device__ gd__op gd__opm(const float *p, int rs, int cs, int nr, int nc)
{
    gd__op o;
    o.p = p; o.rs = rs; o.cs = cs; o.nr = nr; o.nc = nc;
    return o;
}
static __device__ gd__ep gd__epm(float *p, int ld, int nr, int nc, int rd, float alpha,
                                 float beta, const float *rsc)
{
    gd__ep e;
    e.p = p; e.ld = ld; e.nr = nr; e.nc = nc; e.rd = rd; e.alpha = alpha; e.beta = beta;
    e.rsc = rsc;
    return e;
}

/* the staging area: the dynamic shared memory rounded up to 32 bytes (launches ask for
   32 more bytes than they use) */
static __device__ unsigned char *gd__tc_base(unsigned char *raw)
{
    return (unsigned char *)(((size_t)raw + 31) & ~(size_t)31);
}

/* C (E) <- A diag(ks) B (ks NULL: I), K = min(A.nc, B.nr); the whole block calls it (every
   warp reaches every WMMA call of its tiles; no block barrier inside: the caller
   separates a product from the code that reads its output with __syncthreads) */
template <class MT>
static __device__ void gd__mm(unsigned char *stage, gd__op A, gd__op B, const float *ks, gd__ep E)
{
#ifdef GD__TC_ARCH
    using namespace nvcuda;
    typedef gd__tct<MT> TT;
    typedef typename TT::st st;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const int KS = TT::KS, LDA = TT::LDA, LDB = TT::LDB;
    const int K = A.nc < B.nr ? A.nc : B.nr, tn = (E.nc + 15) >> 4, ntile = ((E.nr + 15) >> 4) * tn;
    st *sa = (st *)(void *)(stage + (size_t)warp * GD__TC_SLICE);
    st *sb = (st *)(void *)(stage + (size_t)warp * GD__TC_SLICE + 768);
    float *sc = (float *)(void *)(stage + (size_t)warp * GD__TC_SLICE);
    int t, k0, e;
    for (t = warp; t < ntile; t += nw) {
        const int i0 = (t / tn) * 16, j0 = (t % tn) * 16;
        typename TT::fc acc;
        wmma::fill_fragment(acc, 0.0f);
        for (k0 = 0; k0 < K; k0 += KS) {
            typename TT::fa fa;
            typename TT::fb fb;
            for (e = lane; e < 16 * KS; e += 32) { /* A: 16 x KS */
                const int r = e / KS, c = e % KS, i = i0 + r, k = k0 + c;
                float a = 0.0f;
                if (i < A.nr && k < K) {
                    a = A.p[(size_t)i * A.rs + (size_t)k * A.cs];
                    if (ks) a *= ks[k];
                }
                sa[r * LDA + c] = TT::cvt(a);
            }
            for (e = lane; e < KS * 16; e += 32) { /* B: KS x 16 */
                const int r = e >> 4, c = e & 15, k = k0 + r, j = j0 + c;
                float b = 0.0f;
                if (k < K && j < B.nc) b = B.p[(size_t)k * B.rs + (size_t)j * B.cs];
                sb[r * LDB + c] = TT::cvt(b);
            }
            __syncwarp();
            wmma::load_matrix_sync(fa, sa, LDA);
            wmma::load_matrix_sync(fb, sb, LDB);
            wmma::mma_sync(acc, fa, fb, acc);
            __syncwarp(); /* every lane has loaded before the slice is staged again */
        }
        wmma::store_matrix_sync(sc, acc, 20, wmma::mem_row_major);
        __syncwarp();
        for (e = lane; e < 256; e += 32) {
            const int r = e >> 4, c = e & 15, i = i0 + r, j = j0 + c;
            if (i < E.nr && j < E.nc) {
                float v = E.alpha * sc[r * 20 + c];
                float *o = E.p + (size_t)i * E.ld + j;
                if (E.rsc) v *= E.rsc[i];
                *o = E.rd ? E.beta * *o + v : v;
            }
        }
        __syncwarp(); /* the output tile is read before the next tile's staging */
    }
#else
    (void)stage; (void)A; (void)B; (void)ks; (void)E;
    __trap(); /* the host refuses tensor-core math below sm_80; a JIT for such a device lands here */
#endif
}

/* dynamic shared bytes of the tensor-core kernels (the +32: gd__tc_base's alignment) */
static __host__ __device__ size_t gd__tc_intra_bytes(int C, int sm)
{
    return 32 + GD__TC_STAGE + (sm ? 2 * (size_t)C * C * sizeof(float) : 0) +
           (size_t)C * (sizeof(float) + sizeof(double));
}
static __host__ __device__ size_t gd__tc_scan_bytes(int Dk, int C, int BV)
{
    return 32 + GD__TC_STAGE + (size_t)BV * (Dk + 1 + C) * sizeof(float);
}

/* intra-chunk, tensor cores: as gd__k_intra, with K K^T, Q K^T, W = Tm diag(beta e) K and
   U0 = Tm diag(beta) V on WMMA; norms, gate sums, the decay P, A and the (I + A)^-1
   forward substitution in fp32 SIMT. Dynamic shared: staging, then A and Tm (C,C) when
   p.intra_sm, then beta e (C floats) and the cumulative log-gates (C doubles). */
template <class MT> static __global__ void gd__k_intra_tc(gd__kp p)
{
    GD__DSMEM(unsigned char, raw);
    unsigned char *stage = gd__tc_base(raw);
    const int tid = threadIdx.x, nt = blockDim.x;
    const int C = p.C, Dk = p.Dk, Dv = p.Dv, T = p.T;
    const size_t bh = blockIdx.x / (unsigned)p.NC;
    const int ci = (int)(blockIdx.x % (unsigned)p.NC);
    const int t0 = ci * C, L = gd__cu_min(C, T - t0);
    const size_t row0 = bh * (size_t)T + t0, cc0 = (bh * p.NC + ci) * (size_t)C * C;
    const gd__cws w = p.w;
    float *fs = (float *)(void *)(stage + GD__TC_STAGE);
    float *As = p.intra_sm ? fs : w.a + cc0, *Ts = p.intra_sm ? fs + (size_t)C * C : w.tm + cc0;
    float *sbe = p.intra_sm ? fs + 2 * (size_t)C * C : fs;
    double *sG = (double *)(void *)(sbe + C); /* C is a multiple of 16: 8-byte aligned */
    int idx, i, j;
    gd__cu_rows(p, row0, L, sG);
    __syncthreads();
    for (j = tid; j < L; j += nt) sbe[j] = p.be[row0 + j] * w.e[row0 + j];
    /* K K^T, Q K^T (C,C) on tensor cores; rows and columns >= L come out zero */
    gd__mm<MT>(stage, gd__opm(w.kn + row0 * Dk, Dk, 1, L, Dk), gd__opm(w.kn + row0 * Dk, 1, Dk, Dk, L),
               NULL, gd__epm(w.kk + cc0, C, C, C, 0, 1.0f, 0.0f, NULL));
    gd__mm<MT>(stage, gd__opm(w.qn + row0 * Dk, Dk, 1, L, Dk), gd__opm(w.kn + row0 * Dk, 1, Dk, Dk, L),
               NULL, gd__epm(w.qk + cc0, C, C, C, 0, 1.0f, 0.0f, NULL));
    __syncthreads();
    /* P, A, P o QK in fp32; K K^T and Q K^T zeroed outside the causal part */
    for (idx = tid; idx < C * C; idx += nt) {
        float kk = 0.0f, qk = 0.0f, pp = 0.0f, aa = 0.0f, qkp = 0.0f;
        i = idx / C;
        j = idx % C;
        if (i < L && j <= i) {
            kk = w.kk[cc0 + idx];
            qk = w.qk[cc0 + idx];
            pp = expf((float)(sG[i] - sG[j]));
            if (j < i) aa = p.be[row0 + i] * kk * pp;
            qkp = pp * qk;
        }
        w.kk[cc0 + idx] = kk;
        w.qk[cc0 + idx] = qk;
        w.p[cc0 + idx] = pp;
        As[idx] = aa;
        if (p.intra_sm) w.a[cc0 + idx] = aa;
        w.qkp[cc0 + idx] = qkp;
    }
    __syncthreads();
    gd__cu_solve(p, As, Ts, cc0, L, p.intra_sm);
    __syncthreads();
    /* W = Tm diag(beta e) K, U0 = Tm diag(beta) V on tensor cores */
    gd__mm<MT>(stage, gd__opm(Ts, C, 1, L, L), gd__opm(w.kn + row0 * Dk, Dk, 1, L, Dk), sbe,
               gd__epm(w.w + row0 * Dk, Dk, L, Dk, 0, 1.0f, 0.0f, NULL));
    gd__mm<MT>(stage, gd__opm(Ts, C, 1, L, L), gd__opm(p.v + row0 * Dv, Dv, 1, L, Dv), p.be + row0,
               gd__epm(w.u0 + row0 * Dv, Dv, L, Dv, 0, 1.0f, 0.0f, NULL));
}

/* forward scan, tensor cores: as gd__k_scan_fwd (the fp32 state slice stays in shared
   memory, row stride Dk + 1); U = U0 - W S^T, r = scale (diag(e) Q S^T + (P o QK) U) and
   S <- e_last S + U^T diag(c) K on WMMA (S, W, Q, U, K rounded as operands, the state
   accumulated in fp32). Dynamic shared: staging, S (BV, Dk + 1), U slice (C, BV). */
template <class MT> static __global__ void gd__k_scan_fwd_tc(gd__kp p)
{
    GD__DSMEM(unsigned char, raw);
    unsigned char *stage = gd__tc_base(raw);
    const int tid = threadIdx.x, nt = blockDim.x;
    const int C = p.C, Dk = p.Dk, Dv = p.Dv, T = p.T, BV = p.BV, SP = Dk + 1;
    const size_t bh = blockIdx.x;
    const int v0 = (int)blockIdx.y * BV, nv = gd__cu_min(BV, Dv - v0);
    const gd__cws w = p.w;
    float *S = (float *)(void *)(stage + GD__TC_STAGE), *Us = S + (size_t)BV * SP;
    int idx, ci, j, d, x;
    for (idx = tid; idx < nv * Dk; idx += nt) {
        x = idx / Dk;
        d = idx % Dk;
        S[x * SP + d] = p.s0 ? p.s0[(bh * Dv + v0 + x) * Dk + d] : 0.0f;
    }
    for (ci = 0; ci < p.NC; ci++) {
        const int t0 = ci * C, L = gd__cu_min(C, T - t0);
        const size_t row0 = bh * (size_t)T + t0, cc0 = (bh * p.NC + ci) * (size_t)C * C;
        const gd__op St = gd__opm(S, 1, SP, Dk, nv); /* S^T: (Dk, nv) */
        float *r = p.r + row0 * Dv + v0;
        __syncthreads();
        if (p.states)
            for (idx = tid; idx < nv * Dk; idx += nt) {
                x = idx / Dk;
                d = idx % Dk;
                p.states[((bh * p.NC + ci) * Dv + v0 + x) * Dk + d] = S[x * SP + d];
            }
        for (idx = tid; idx < L * nv; idx += nt) {
            j = idx / nv;
            x = idx % nv;
            Us[j * BV + x] = w.u0[(row0 + j) * Dv + v0 + x];
        }
        __syncthreads();
        /* U = U0 - W S^T */
        gd__mm<MT>(stage, gd__opm(w.w + row0 * Dk, Dk, 1, L, Dk), St, NULL,
                   gd__epm(Us, BV, L, nv, 1, -1.0f, 1.0f, NULL));
        /* r = scale diag(e) Q S^T (reads S only) */
        gd__mm<MT>(stage, gd__opm(w.qn + row0 * Dk, Dk, 1, L, Dk), St, NULL,
                   gd__epm(r, Dv, L, nv, 0, p.scale, 0.0f, w.e + row0));
        __syncthreads();
        if (p.u)
            for (idx = tid; idx < L * nv; idx += nt) {
                j = idx / nv;
                x = idx % nv;
                p.u[(row0 + j) * Dv + v0 + x] = Us[j * BV + x];
            }
        /* r += scale (P o QK) U */
        gd__mm<MT>(stage, gd__opm(w.qkp + cc0, C, 1, L, L), gd__opm(Us, BV, 1, L, nv), NULL,
                   gd__epm(r, Dv, L, nv, 1, p.scale, 1.0f, NULL));
        __syncthreads();
        /* S <- e_last S + U^T diag(c) K */
        gd__mm<MT>(stage, gd__opm(Us, 1, BV, nv, L), gd__opm(w.kn + row0 * Dk, Dk, 1, L, Dk), w.c + row0,
                   gd__epm(S, SP, nv, Dk, 1, 1.0f, w.e[row0 + L - 1], NULL));
    }
    __syncthreads();
    if (p.sout)
        for (idx = tid; idx < nv * Dk; idx += nt) {
            x = idx / Dk;
            d = idx % Dk;
            p.sout[(bh * Dv + v0 + x) * Dk + d] = S[x * SP + d];
        }
}

/* backward scan, tensor cores: as gd__k_scan_bwd; dU = diag(c) K dS^T + scale (P o QK)^T dO
   and dS <- e_last dS + scale dO^T diag(e) Q - dU^T W on WMMA, dS accumulated in fp32.
   Dynamic shared: staging, dS (BV, Dk + 1), dU slice (C, BV). */
template <class MT> static __global__ void gd__k_scan_bwd_tc(gd__kp p)
{
    GD__DSMEM(unsigned char, raw);
    unsigned char *stage = gd__tc_base(raw);
    const int tid = threadIdx.x, nt = blockDim.x;
    const int C = p.C, Dk = p.Dk, Dv = p.Dv, T = p.T, BV = p.BV, SP = Dk + 1;
    const size_t bh = blockIdx.x;
    const int v0 = (int)blockIdx.y * BV, nv = gd__cu_min(BV, Dv - v0);
    const gd__cws w = p.w;
    float *dS = (float *)(void *)(stage + GD__TC_STAGE), *dUs = dS + (size_t)BV * SP;
    int idx, ci, j, d, x;
    for (idx = tid; idx < nv * Dk; idx += nt) {
        x = idx / Dk;
        d = idx % Dk;
        dS[x * SP + d] = p.dsout ? p.dsout[(bh * Dv + v0 + x) * Dk + d] : 0.0f;
    }
    for (ci = p.NC - 1; ci >= 0; ci--) {
        const int t0 = ci * C, L = gd__cu_min(C, T - t0);
        const size_t row0 = bh * (size_t)T + t0, cc0 = (bh * p.NC + ci) * (size_t)C * C;
        const float *dO = p.dr + row0 * Dv + v0;
        __syncthreads();
        for (idx = tid; idx < nv * Dk; idx += nt) {
            x = idx / Dk;
            d = idx % Dk;
            w.dse[((bh * p.NC + ci) * Dv + v0 + x) * Dk + d] = dS[x * SP + d];
        }
        /* dU = diag(c) K dS^T, then += scale (P o QK)^T dO */
        gd__mm<MT>(stage, gd__opm(w.kn + row0 * Dk, Dk, 1, L, Dk), gd__opm(dS, 1, SP, Dk, nv), NULL,
                   gd__epm(dUs, BV, L, nv, 0, 1.0f, 0.0f, w.c + row0));
        __syncthreads();
        gd__mm<MT>(stage, gd__opm(w.qkp + cc0, 1, C, L, L), gd__opm(dO, Dv, 1, L, nv), NULL,
                   gd__epm(dUs, BV, L, nv, 1, p.scale, 1.0f, NULL));
        __syncthreads();
        for (idx = tid; idx < L * nv; idx += nt) {
            j = idx / nv;
            x = idx % nv;
            w.du[(row0 + j) * Dv + v0 + x] = dUs[j * BV + x];
        }
        /* dS <- e_last dS + scale dO^T diag(e) Q, then -= dU^T W */
        gd__mm<MT>(stage, gd__opm(dO, 1, Dv, nv, L), gd__opm(w.qn + row0 * Dk, Dk, 1, L, Dk), w.e + row0,
                   gd__epm(dS, SP, nv, Dk, 1, p.scale, w.e[row0 + L - 1], NULL));
        __syncthreads();
        gd__mm<MT>(stage, gd__opm(dUs, 1, BV, nv, L), gd__opm(w.w + row0 * Dk, Dk, 1, L, Dk), NULL,
                   gd__epm(dS, SP, nv, Dk, 1, -1.0f, 1.0f, NULL));
    }
    __syncthreads();
    if (p.ds0)
        for (idx = tid; idx < nv * Dk; idx += nt) {
            x = idx / Dk;
            d = idx % Dk;
            p.ds0[(bh * Dv + v0 + x) * Dk + d] += dS[x * SP + d];
        }
}

/* per-chunk backward, tensor cores: as gd__k_chunk_bwd, with dB = Tm^T dU, Y = K dSe^T,
   Z = dO S, c o (U dSe), D = dO U^T, X = dB S, D K, dA = -dB U^T, D^T Q, dKK K and dKK^T K
   on WMMA (the (C,C) and per-row results in the workspace, fp32); the masks, <dSe, S>,
   dc, dbeta, the gate sums and the L2-norm backward in fp32 SIMT (gd__cu_bwd_rows).
   Dynamic shared: staging only. */
template <class MT> static __global__ void gd__k_chunk_bwd_tc(gd__kp p)
{
    GD__DSMEM(unsigned char, raw);
    unsigned char *stage = gd__tc_base(raw);
    __shared__ float sdc[256], svec[256], sred[GD__CU_THREADS];
    const int tid = threadIdx.x, nt = blockDim.x;
    const int C = p.C, Dk = p.Dk, Dv = p.Dv, T = p.T;
    const size_t bh = blockIdx.x / (unsigned)p.NC;
    const int ci = (int)(blockIdx.x % (unsigned)p.NC);
    const int t0 = ci * C, L = gd__cu_min(C, T - t0);
    const size_t row0 = bh * (size_t)T + t0, cc0 = (bh * p.NC + ci) * (size_t)C * C;
    const size_t s0 = (bh * p.NC + ci) * (size_t)Dv * Dk;
    const float *S = p.states + s0, *dSe = p.w.dse + s0;
    const float *U = p.u + row0 * Dv, *dO = p.dr + row0 * Dv;
    const gd__cws w = p.w;
    const float *kn = w.kn + row0 * Dk, *qn = w.qn + row0 * Dk;
    const float scale = p.scale;
    const gd__op Kop = gd__opm(kn, Dk, 1, L, Dk), Ut = gd__opm(U, 1, Dv, Dv, L);
    int idx, i, j, x, s;
    float part = 0.0f;
    /* --- phase 1: dB, Y, Z, c o (U dSe) into dKn, D (unmasked); <dSe, S> */
    gd__mm<MT>(stage, gd__opm(w.tm + cc0, 1, C, L, L), gd__opm(w.du + row0 * Dv, Dv, 1, L, Dv), NULL,
               gd__epm(w.db + row0 * Dv, Dv, L, Dv, 0, 1.0f, 0.0f, NULL));
    gd__mm<MT>(stage, Kop, gd__opm(dSe, 1, Dk, Dk, Dv), NULL,
               gd__epm(w.y + row0 * Dv, Dv, L, Dv, 0, 1.0f, 0.0f, NULL));
    gd__mm<MT>(stage, gd__opm(dO, Dv, 1, L, Dv), gd__opm(S, Dk, 1, Dv, Dk), NULL,
               gd__epm(w.z + row0 * Dk, Dk, L, Dk, 0, 1.0f, 0.0f, NULL));
    gd__mm<MT>(stage, gd__opm(U, Dv, 1, L, Dv), gd__opm(dSe, Dk, 1, Dv, Dk), NULL,
               gd__epm(w.dkn + row0 * Dk, Dk, L, Dk, 0, 1.0f, 0.0f, w.c + row0));
    gd__mm<MT>(stage, gd__opm(dO, Dv, 1, L, Dv), Ut, NULL,
               gd__epm(w.dd + cc0, C, C, C, 0, 1.0f, 0.0f, NULL));
    for (idx = tid; idx < Dv * Dk; idx += nt) part += dSe[idx] * S[idx];
    sred[tid] = part;
    __syncthreads();
    for (s = GD__CU_THREADS / 2; s > 0; s >>= 1) { /* fixed tree: deterministic */
        if (tid < s) sred[tid] += sred[tid + s];
        __syncthreads();
    }
    for (idx = tid; idx < C * C; idx += nt) { /* D = scale P o (dO U^T), lower with diagonal */
        i = idx / C;
        j = idx % C;
        w.wc[cc0 + idx] = i < L && j < i ? scale * w.dd[cc0 + idx] * w.qk[cc0 + idx] : 0.0f;
        w.dd[cc0 + idx] = i < L && j <= i ? scale * w.p[cc0 + idx] * w.dd[cc0 + idx] : 0.0f;
    }
    __syncthreads();
    /* --- phase 2: X = dB S, dQn = D K, dA = -dB U^T (unmasked); dc, dv */
    gd__mm<MT>(stage, gd__opm(w.db + row0 * Dv, Dv, 1, L, Dv), gd__opm(S, Dk, 1, Dv, Dk), NULL,
               gd__epm(w.x + row0 * Dk, Dk, L, Dk, 0, 1.0f, 0.0f, NULL));
    gd__mm<MT>(stage, gd__opm(w.dd + cc0, C, 1, L, L), Kop, NULL,
               gd__epm(w.dqn + row0 * Dk, Dk, L, Dk, 0, 1.0f, 0.0f, NULL));
    gd__mm<MT>(stage, gd__opm(w.db + row0 * Dv, Dv, 1, L, Dv), Ut, NULL,
               gd__epm(w.da + cc0, C, C, C, 0, -1.0f, 0.0f, NULL));
    for (idx = tid; idx < L; idx += nt) { /* u_j . Y_j (dc_j without its factor c_j) */
        float s2 = 0.0f;
        for (x = 0; x < Dv; x++) s2 += U[(size_t)idx * Dv + x] * w.y[(row0 + idx) * Dv + x];
        sdc[idx] = idx < L - 1 ? s2 : 0.0f;
    }
    for (idx = tid; idx < L * Dv; idx += nt) { /* dv_i += beta_i dB_i */
        i = idx / Dv;
        x = idx % Dv;
        p.dv[(row0 + i) * Dv + x] += p.be[row0 + i] * w.db[(row0 + i) * Dv + x];
    }
    __syncthreads();
    for (idx = tid; idx < C * C; idx += nt) { /* dA strictly lower, dKK = dA o beta_i P */
        float da = 0.0f, dkk = 0.0f;
        i = idx / C;
        j = idx % C;
        if (i < L && j < i) {
            da = w.da[cc0 + idx];
            dkk = da * p.be[row0 + i] * w.p[cc0 + idx];
            w.wc[cc0 + idx] += da * p.be[row0 + i] * w.kk[cc0 + idx];
        }
        w.da[cc0 + idx] = da;
        w.dkk[cc0 + idx] = dkk;
    }
    for (idx = tid; idx < L * Dk; idx += nt) { /* dQn += scale e_i Z_i */
        i = idx / Dk;
        w.dqn[row0 * Dk + idx] += scale * w.e[row0 + i] * w.z[row0 * Dk + idx];
    }
    __syncthreads();
    /* --- phase 3: dKn += D^T Q + dKK K + dKK^T K - diag(beta e) X */
    gd__mm<MT>(stage, gd__opm(w.dd + cc0, 1, C, L, L), gd__opm(qn, Dk, 1, L, Dk), NULL,
               gd__epm(w.dkn + row0 * Dk, Dk, L, Dk, 1, 1.0f, 1.0f, NULL));
    __syncthreads();
    gd__mm<MT>(stage, gd__opm(w.dkk + cc0, C, 1, L, L), Kop, NULL,
               gd__epm(w.dkn + row0 * Dk, Dk, L, Dk, 1, 1.0f, 1.0f, NULL));
    __syncthreads();
    gd__mm<MT>(stage, gd__opm(w.dkk + cc0, 1, C, L, L), Kop, NULL,
               gd__epm(w.dkn + row0 * Dk, Dk, L, Dk, 1, 1.0f, 1.0f, NULL));
    __syncthreads();
    for (idx = tid; idx < L * Dk; idx += nt) {
        i = idx / Dk;
        w.dkn[row0 * Dk + idx] -= p.be[row0 + i] * w.e[row0 + i] * w.x[row0 * Dk + idx];
    }
    gd__cu_bwd_rows(p, row0, cc0, L, sred, sdc, svec);
}

/* ------------------------------------------------------------ decode step */
/* flag: 1 a slot outside [0,n_slots), 2 a slot repeated */
static __global__ void gd__k_step_check(int *flag, const int *slots, int N, int n_slots)
{
    int n = blockIdx.x * blockDim.x + threadIdx.x, m, bad = 0;
    if (n < N) {
        int s = slots[n];
        if (s < 0 || s >= n_slots) bad |= 1;
        for (m = 0; m < n; m++)
            if (slots[m] == s) bad |= 2;
    }
    if (bad) atomicOr(flag, bad);
}

#define GD__STEP_ROWS 32
#define GD__STEP_THREADS 128

/* grid (N*H, ceil(Dv/32)), 128 threads; shared qn, kn (2 Dk floats). Warp w of the block
   handles rows v0 + w, v0 + w + 4, ...; lanes stride over Dk; sums by xor butterfly. */
static __global__ void gd__k_step(gd__kp p, float *table, const int *slots, int H)
{
    GD__DSMEM(float, sm);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    const int Dk = p.Dk, Dv = p.Dv;
    const size_t n = blockIdx.x;
    const int b = (int)(n / (unsigned)H), h = (int)(n % (unsigned)H);
    const int v0 = (int)blockIdx.y * GD__STEP_ROWS, v1 = gd__cu_min(Dv, v0 + GD__STEP_ROWS);
    float *qn = sm, *kn = sm + Dk;
    float *M = table + ((size_t)slots[b] * H + h) * (size_t)Dk * Dv;
    const float gv = p.g[n];
    const float gam = p.gate_is_log ? expf(gv < p.floor_ ? p.floor_ : gv) : gv;
    const float bet = p.be[n];
    int i, d, o;
    if (warp < 2) { /* warp 0 normalises q, warp 1 k (double sums, like the CPU) */
        const float *xs = (warp ? p.k : p.q) + n * Dk;
        float *ys = warp ? kn : qn;
        float inv = 1.0f;
        if (p.normalize_qk) {
            double s = 0.0;
            for (d = lane; d < Dk; d += 32) s += (double)xs[d] * xs[d];
            for (o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            s += p.norm_eps;
            inv = s > 0.0 ? (float)(1.0 / sqrt(s)) : 0.0f;
        }
        for (d = lane; d < Dk; d += 32) ys[d] = xs[d] * inv;
    }
    __syncthreads();
    for (i = v0 + warp; i < v1; i += nw) {
        float *row = M + (size_t)i * Dk;
        float pr = 0.0f, u, out = 0.0f;
        for (d = lane; d < Dk; d += 32) {
            float x = row[d] * gam;
            pr += x * kn[d];
        }
        for (o = 16; o > 0; o >>= 1) pr += __shfl_xor_sync(0xffffffffu, pr, o);
        u = bet * (p.v[n * Dv + i] - pr);
        for (d = lane; d < Dk; d += 32) {
            float x = row[d] * gam;
            x = x + u * kn[d];
            row[d] = x;
            out += x * qn[d];
        }
        for (o = 16; o > 0; o >>= 1) out += __shfl_xor_sync(0xffffffffu, out, o);
        if (lane == 0) p.r[n * Dv + i] = p.scale * out;
    }
}

/* ------------------------------------------------------------ host side */
static int gd__cu_rc(const gd_config *cfg, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return GD_OK;
    return gd__err(cfg, GD_ECUDA, "%s: %s", what, cudaGetErrorString(e));
}

static int gd__cu_launched(const gd_config *cfg, const char *what)
{
    return gd__cu_rc(cfg, cudaGetLastError(), what);
}

/* 1 if p is a device (or managed) pointer */
static int gd__cu_is_dev(const void *p)
{
    cudaPointerAttributes a;
    if (!p) return 0;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* 1 for the tensor-core math modes */
static int gd__cu_tc(const gd_config *cfg) { return cfg->math != GD_MATH_FP32; }

static int gd__cu_math(const gd_config *cfg, const char *fn)
{
    if (cfg->math == GD_MATH_FP32 || cfg->math == GD_MATH_TF32 || cfg->math == GD_MATH_BF16)
        return GD_OK;
    return gd__err(cfg, GD_EINVAL, "%s: math %d unknown", fn, cfg->math);
}

/* value rows per scan block: 16, fewer when the state slice and U slice (plus `extra`
   bytes: the tensor-core staging) would not fit in 48 KiB */
static int gd__cu_bv(int Dk, int Dv, int C, size_t extra)
{
    int bv = 16;
    while (bv > 1 && (size_t)bv * (size_t)(Dk + 1 + C) * sizeof(float) + extra > GD__CU_SMEM) bv /= 2;
    if ((size_t)bv * (size_t)(Dk + 1 + C) * sizeof(float) + extra > GD__CU_SMEM) return 0;
    return bv < Dv ? bv : Dv;
}

static void gd__cu_saved_free(void *mem) { (void)cudaFree(mem); }

/* The input scan, GD_ERANGE (with a message) if any value is out of contract, in two
   halves: gd__cu_check_launch queues it on the stream (dflag[0] must be zero: the caller
   clears it), gd__cu_check_flags turns the flag's bits, once read back, into the error.
   gd__cu_check_data does both with one read-back. */
static int gd__cu_check_launch(const gd_config *cfg, const char *fn, int *dflag,
                               const float *q, const float *k, size_t nqk, const float *v,
                               size_t nv, const float *g, const float *be, size_t ng,
                               const float *s0, size_t ns, cudaStream_t st)
{
    size_t mx = nqk > nv ? nqk : nv, nb = (mx + 255) / 256;
    if (nb > 4096) nb = 4096;
    if (nb < 1) nb = 1;
    GD__LAUNCH(gd__k_check, (unsigned)nb, 256, 0, st, dflag, q, k, nqk, v, nv, g, be, ng, s0, ns,
               cfg->gate_is_log);
    return gd__cu_launched(cfg, fn);
}

static int gd__cu_check_flags(const gd_config *cfg, const char *fn, int h)
{
    if (h & 1) return gd__err(cfg, GD_ERANGE, "%s: non-finite q or k", fn);
    if (h & 2) return gd__err(cfg, GD_ERANGE, "%s: non-finite v", fn);
    if (h & 4) return gd__err(cfg, GD_ERANGE, "%s: a gate out of range (or NaN)", fn);
    if (h & 8) return gd__err(cfg, GD_ERANGE, "%s: a beta outside [0,1] (or NaN)", fn);
    if (h & 16) return gd__err(cfg, GD_ERANGE, "%s: non-finite state0", fn);
    return GD_OK;
}

static int gd__cu_check_data(const gd_config *cfg, const char *fn, int *dflag,
                             const float *q, const float *k, size_t nqk, const float *v,
                             size_t nv, const float *g, const float *be, size_t ng,
                             const float *s0, size_t ns, cudaStream_t st)
{
    int rc, h = 0;
    if (cfg->status) { /* deferred: the flags into the caller's word, no read-back */
        if (!gd__cu_is_dev(cfg->status)) return gd__err(cfg, GD_EINVAL, "%s: cfg->status is not a device pointer", fn);
        return gd__cu_check_launch(cfg, fn, cfg->status, q, k, nqk, v, nv, g, be, ng, s0, ns, st);
    }
    if ((rc = gd__cu_rc(cfg, cudaMemsetAsync(dflag, 0, sizeof(int), st), fn)) != GD_OK) return rc;
    if ((rc = gd__cu_check_launch(cfg, fn, dflag, q, k, nqk, v, nv, g, be, ng, s0, ns, st)) !=
        GD_OK)
        return rc;
    if ((rc = gd__cu_rc(cfg, cudaMemcpyAsync(&h, dflag, sizeof(int), cudaMemcpyDeviceToHost, st),
                        fn)) != GD_OK)
        return rc;
    if ((rc = gd__cu_rc(cfg, cudaStreamSynchronize(st), fn)) != GD_OK) return rc;
    return gd__cu_check_flags(cfg, fn, h);
}

/* common scalar checks of forward/backward; fills C, NC, BV */
static int gd__cu_shapes(const gd_config *cfg, const char *fn, int B, int H, int T, int Dk,
                         int Dv, int *C, int *NC, int *BV)
{
    int rc;
    const int tc = gd__cu_tc(cfg);
    if ((rc = gd__check_shapes(cfg, fn, B, H, T, Dk, Dv)) != GD_OK) return rc;
    if (tc) { /* WMMA tiles: 16 x 16; the chunk padded to a multiple of 16, tails zero */
        int major = 0;
        if (Dk % 16 || Dv % 16 || cfg->chunk_size % 16)
            return gd__err(cfg, GD_ENOTSUP, "%s: math %s needs Dk, Dv and chunk_size multiples of 16 "
                           "(Dk=%d Dv=%d chunk_size=%d); GD_MATH_FP32 takes any", fn,
                           cfg->math == GD_MATH_TF32 ? "tf32" : "bf16", Dk, Dv, cfg->chunk_size);
#ifdef ATTNKIT_CUDA_SIM
        major = 9; /* the simulation's device */
#else
        {
            int dev = 0;
            if (cudaGetDevice(&dev) != cudaSuccess ||
                cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
                (void)cudaGetLastError();
                major = 0;
            }
        }
#endif
        if (major < 8)
            return gd__err(cfg, GD_ENOTSUP, "%s: math %s needs an sm_80 or newer device", fn,
                           cfg->math == GD_MATH_TF32 ? "tf32" : "bf16");
    }
    *C = cfg->chunk_size < T ? cfg->chunk_size : T;
    if (tc) *C = cfg->chunk_size < (T + 15) / 16 * 16 ? cfg->chunk_size : (T + 15) / 16 * 16;
    *NC = (T + *C - 1) / *C;
    *BV = gd__cu_bv(Dk, Dv, *C, tc ? 32 + GD__TC_STAGE : 0);
    if (!*BV)
        return gd__err(cfg, GD_EINVAL, "%s: Dk + chunk_size = %d must be below %d on the CUDA path", fn,
                       Dk + *C, (int)((GD__CU_SMEM - (tc ? 32 + GD__TC_STAGE : 0)) / sizeof(float)));
    if ((double)B * H * *NC > 2e9)
        return gd__err(cfg, GD_EINVAL, "%s: B*H*chunks too large for one grid", fn);
    if ((double)Dk * Dv > 2147483647.0 || (double)Dv * *C > 2147483647.0 ||
        (Dv + *BV - 1) / *BV > 65535) /* int indices inside a block, grid.y */
        return gd__err(cfg, GD_EINVAL, "%s: Dk=%d Dv=%d too large for the CUDA path", fn, Dk, Dv);
    return GD_OK;
}

GDELTADEF int gd_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

GDELTADEF size_t gd_workspace_size_cuda(const gd_config *cfg, int B, int H, int T, int Dk,
                                        int Dv)
{
    int C, NC, BV;
    if (gd__check_cfg(cfg) != GD_OK) return 0;
    if (gd__cu_shapes(cfg, "gd_workspace_size_cuda", B, H, T, Dk, Dv, &C, &NC, &BV) != GD_OK)
        return 0;
    return gd__cws_layout(NULL, NULL, (size_t)B * H, T, Dk, Dv, C, NC, 1);
}

static void gd__cu_params(gd__kp *p, const gd_config *cfg, int T, int Dk, int Dv, int C,
                          int NC, int BV)
{
    memset(p, 0, sizeof *p);
    p->T = T; p->Dk = Dk; p->Dv = Dv; p->C = C; p->NC = NC; p->BV = BV;
    p->gate_is_log = cfg->gate_is_log;
    p->normalize_qk = cfg->normalize_qk;
    p->norm_eps = cfg->norm_eps;
    p->scale = cfg->scale;
    p->floor_ = cfg->log_gate_floor;
    /* gd__k_intra's static sG (GD__MAXC doubles) counts against the same 48 KiB: C <= 76 */
    p->intra_sm = 2 * (size_t)C * C * sizeof(float) + GD__MAXC * sizeof(double) <= GD__CU_SMEM;
    if (gd__cu_tc(cfg)) p->intra_sm = gd__tc_intra_bytes(C, 1) <= GD__CU_SMEM; /* C <= 64 */
}

/* the tensor-core kernels of gd_forward_cuda (backward = 0) or gd_backward_cuda */
template <class MT>
static int gd__cu_run_tc(const gd_config *cfg, const char *fn, const gd__kp &p, size_t BH,
                         int backward, cudaStream_t st)
{
    int rc;
    dim3 grid((unsigned)BH, (unsigned)((p.Dv + p.BV - 1) / p.BV));
    GD__LAUNCH(gd__k_intra_tc<MT>, (unsigned)(BH * p.NC), GD__CU_THREADS,
               gd__tc_intra_bytes(p.C, p.intra_sm), st, p);
    if ((rc = gd__cu_launched(cfg, fn)) != GD_OK) return rc;
    if (!backward) {
        GD__LAUNCH(gd__k_scan_fwd_tc<MT>, grid, GD__CU_THREADS, gd__tc_scan_bytes(p.Dk, p.C, p.BV), st, p);
        return gd__cu_launched(cfg, fn);
    }
    GD__LAUNCH(gd__k_scan_bwd_tc<MT>, grid, GD__CU_THREADS, gd__tc_scan_bytes(p.Dk, p.C, p.BV), st, p);
    if ((rc = gd__cu_launched(cfg, fn)) != GD_OK) return rc;
    GD__LAUNCH(gd__k_chunk_bwd_tc<MT>, (unsigned)(BH * p.NC), GD__CU_THREADS, 32 + GD__TC_STAGE, st, p);
    return gd__cu_launched(cfg, fn);
}

GDELTADEF int gd_forward_cuda(const gd_config *cfg, float *r, float *state_out,
                              const float *q, const float *k, const float *v,
                              const float *gates, const float *beta, const float *state0,
                              int B, int H, int T, int Dk, int Dv, gd_saved *saved,
                              void *workspace, gd_stream stream)
{
    static const char *fn = "gd_forward_cuda";
    cudaStream_t st = (cudaStream_t)stream;
    int rc, C, NC, BV;
    size_t BH, need;
    void *own = NULL;
    gd__kp p;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if ((rc = gd__cu_math(cfg, fn)) != GD_OK) return rc;
    if (!r || !q || !k || !v || !gates || !beta)
        return gd__err(cfg, GD_EINVAL, "%s: NULL buffer", fn);
    if ((rc = gd__cu_shapes(cfg, fn, B, H, T, Dk, Dv, &C, &NC, &BV)) != GD_OK) return rc;
    if (!gd__cu_is_dev(r) || !gd__cu_is_dev(q) || !gd__cu_is_dev(k) || !gd__cu_is_dev(v) ||
        !gd__cu_is_dev(gates) || !gd__cu_is_dev(beta) || (state_out && !gd__cu_is_dev(state_out)) ||
        (state0 && !gd__cu_is_dev(state0)) || (workspace && !gd__cu_is_dev(workspace)))
        return gd__err(cfg, GD_EINVAL, "%s: a buffer is not a device pointer", fn);
    BH = (size_t)B * H;
    need = gd__cws_layout(NULL, NULL, BH, T, Dk, Dv, C, NC, 0);
    if (!workspace) {
        if ((rc = gd__cu_rc(cfg, cudaMallocAsync(&own, need, st), fn)) != GD_OK)
            return rc == GD_ECUDA ? GD_ENOMEM : rc;
        workspace = own;
    }
    gd__cu_params(&p, cfg, T, Dk, Dv, C, NC, BV);
    gd__cws_layout(&p.w, workspace, BH, T, Dk, Dv, C, NC, 0);
    rc = gd__cu_check_data(cfg, fn, p.w.flag, q, k, BH * T * Dk, v, BH * T * Dv, gates, beta,
                           BH * T, state0, BH * Dk * Dv, st);
    if (rc == GD_OK && saved) { /* device saved state: chunk-start states, then U */
        size_t nst = BH * NC * (size_t)Dk * Dv, nu = BH * (size_t)T * Dv;
        size_t bytes = ((nst + 63) & ~(size_t)63) * sizeof(float) + nu * sizeof(float);
        if (saved->mem && (!(saved->algo & GD__SAVED_CUDA) || saved->cap < bytes)) {
            if (saved->algo & GD__SAVED_CUDA) (void)cudaFree(saved->mem);
            else GDELTA_FREE(saved->mem);
            saved->mem = NULL;
            saved->cap = 0;
        }
        if (!saved->mem) {
            if (cudaMalloc(&saved->mem, bytes) != cudaSuccess) {
                (void)cudaGetLastError();
                saved->mem = NULL;
                rc = gd__err(cfg, GD_ENOMEM, "%s: saved state alloc failed", fn);
            } else
                saved->cap = bytes;
        }
        if (rc == GD_OK) {
            saved->states = (float *)saved->mem;
            saved->u = saved->states + ((nst + 63) & ~(size_t)63);
            saved->wy = NULL;
            gd__saved_set(saved, GD_ALGO_CHUNKED | GD__SAVED_CUDA, B, H, T, Dk, Dv, C, NC);
            p.states = saved->states;
            p.u = saved->u;
        }
    }
    if (rc == GD_OK && gd__cu_tc(cfg)) {
        p.q = q; p.k = k; p.v = v; p.g = gates; p.be = beta; p.s0 = state0;
        p.r = r; p.sout = state_out;
        rc = cfg->math == GD_MATH_BF16 ? gd__cu_run_tc<__nv_bfloat16>(cfg, fn, p, BH, 0, st)
                                       : gd__cu_run_tc<nvcuda::wmma::precision::tf32>(cfg, fn, p, BH, 0, st);
        if (own) (void)cudaFreeAsync(own, st);
        return rc;
    }
    if (rc == GD_OK) {
        p.q = q; p.k = k; p.v = v; p.g = gates; p.be = beta; p.s0 = state0;
        p.r = r; p.sout = state_out;
        GD__LAUNCH(gd__k_intra, (unsigned)(BH * NC), GD__CU_THREADS,
                   p.intra_sm ? 2 * (size_t)C * C * sizeof(float) : 0, st, p);
        rc = gd__cu_launched(cfg, fn);
    }
    if (rc == GD_OK) {
        dim3 grid((unsigned)BH, (unsigned)((Dv + BV - 1) / BV));
        size_t sm = (size_t)BV * (Dk + 1 + C) * sizeof(float);
        GD__LAUNCH(gd__k_scan_fwd, grid, GD__CU_THREADS, sm, st, p);
        rc = gd__cu_launched(cfg, fn);
    }
    if (own) (void)cudaFreeAsync(own, st);
    return rc;
}

GDELTADEF int gd_backward_cuda(const gd_config *cfg, const gd_saved *saved,
                               float *dq, float *dk, float *dv, float *dgates,
                               float *dbeta, float *dstate0,
                               const float *dr, const float *dstate_out,
                               const float *q, const float *k, const float *v,
                               const float *gates, const float *beta, const float *state0,
                               int B, int H, int T, int Dk, int Dv, void *workspace,
                               gd_stream stream)
{
    static const char *fn = "gd_backward_cuda";
    cudaStream_t st = (cudaStream_t)stream;
    int rc, C, NC, BV;
    size_t BH, need;
    void *own = NULL;
    gd__kp p;
    (void)state0; /* the saved chunk states hold it */
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if ((rc = gd__cu_math(cfg, fn)) != GD_OK) return rc;
    if (!saved || !dq || !dk || !dv || !dgates || !dbeta || !dr || !q || !k || !v || !gates ||
        !beta)
        return gd__err(cfg, GD_EINVAL, "%s: NULL buffer", fn);
    if ((rc = gd__cu_shapes(cfg, fn, B, H, T, Dk, Dv, &C, &NC, &BV)) != GD_OK) return rc;
    if (!gd__saved_fits(saved, GD_ALGO_CHUNKED | GD__SAVED_CUDA, B, H, T, Dk, Dv, C) ||
        !saved->u || saved->nstates != NC)
        return gd__err(cfg, GD_EINVAL, "%s: saved state does not match the call (not from "
                       "gd_forward_cuda with these shapes and chunk size)", fn);
    if (!gd__cu_is_dev(dq) || !gd__cu_is_dev(dk) || !gd__cu_is_dev(dv) || !gd__cu_is_dev(dgates) ||
        !gd__cu_is_dev(dbeta) || !gd__cu_is_dev(dr) || !gd__cu_is_dev(q) || !gd__cu_is_dev(k) ||
        !gd__cu_is_dev(v) || !gd__cu_is_dev(gates) || !gd__cu_is_dev(beta) ||
        (dstate0 && !gd__cu_is_dev(dstate0)) || (dstate_out && !gd__cu_is_dev(dstate_out)) ||
        (workspace && !gd__cu_is_dev(workspace)))
        return gd__err(cfg, GD_EINVAL, "%s: a buffer is not a device pointer", fn);
    BH = (size_t)B * H;
    need = gd__cws_layout(NULL, NULL, BH, T, Dk, Dv, C, NC, 1);
    if (!workspace) {
        if ((rc = gd__cu_rc(cfg, cudaMallocAsync(&own, need, st), fn)) != GD_OK)
            return rc == GD_ECUDA ? GD_ENOMEM : rc;
        workspace = own;
    }
    gd__cu_params(&p, cfg, T, Dk, Dv, C, NC, BV);
    gd__cws_layout(&p.w, workspace, BH, T, Dk, Dv, C, NC, 1);
    rc = gd__cu_check_data(cfg, fn, p.w.flag, q, k, BH * T * Dk, v, BH * T * Dv, gates, beta,
                           BH * T, NULL, 0, st);
    if (rc == GD_OK) {
        p.q = q; p.k = k; p.v = v; p.g = gates; p.be = beta;
        p.dr = dr; p.dsout = dstate_out;
        p.states = saved->states; p.u = saved->u;
        p.dq = dq; p.dk = dk; p.dv = dv; p.dg = dgates; p.dbe = dbeta; p.ds0 = dstate0;
        if (gd__cu_tc(cfg)) {
            rc = cfg->math == GD_MATH_BF16 ? gd__cu_run_tc<__nv_bfloat16>(cfg, fn, p, BH, 1, st)
                                           : gd__cu_run_tc<nvcuda::wmma::precision::tf32>(cfg, fn, p, BH, 1, st);
            if (own) (void)cudaFreeAsync(own, st);
            return rc;
        }
        GD__LAUNCH(gd__k_intra, (unsigned)(BH * NC), GD__CU_THREADS,
                   p.intra_sm ? 2 * (size_t)C * C * sizeof(float) : 0, st, p);
        rc = gd__cu_launched(cfg, fn);
    }
    if (rc == GD_OK) {
        dim3 grid((unsigned)BH, (unsigned)((Dv + BV - 1) / BV));
        size_t sm = (size_t)BV * (Dk + 1 + C) * sizeof(float);
        GD__LAUNCH(gd__k_scan_bwd, grid, GD__CU_THREADS, sm, st, p);
        rc = gd__cu_launched(cfg, fn);
    }
    if (rc == GD_OK) {
        GD__LAUNCH(gd__k_chunk_bwd, (unsigned)(BH * NC), GD__CU_THREADS, 0, st, p);
        rc = gd__cu_launched(cfg, fn);
    }
    if (own) (void)cudaFreeAsync(own, st);
    return rc;
}

GDELTADEF int gd_step_cuda(const gd_config *cfg, float *table, int n_slots, const int *slots,
                           int N, int H, int Dk, int Dv, const float *q, const float *k,
                           const float *v, const float *gates, const float *beta, float *r,
                           gd_stream stream)
{
    static const char *fn = "gd_step_cuda";
    cudaStream_t st = (cudaStream_t)stream;
    int rc, hflag[2] = {0, 0}, *dflag = NULL;
    size_t NH;
    gd__kp p;
    if ((rc = gd__check_cfg(cfg)) != GD_OK) return rc;
    if ((rc = gd__cu_math(cfg, fn)) != GD_OK) return rc;
    if (!table || !slots || !q || !k || !v || !gates || !beta || !r)
        return gd__err(cfg, GD_EINVAL, "%s: NULL buffer", fn);
    if (n_slots < 1 || N < 1 || H < 1 || Dk < 1 || Dv < 1 || (double)N * H > 2e9 ||
        (double)N * H * (Dk > Dv ? Dk : Dv) > 1e15 || (double)Dk * Dv > 1e12 ||
        (double)n_slots * H * Dk * Dv > 4e18 || Dk > 6144 ||
        (Dv + GD__STEP_ROWS - 1) / GD__STEP_ROWS > 65535)
        return gd__err(cfg, GD_EINVAL, "%s: bad dimensions", fn);
    if (!gd__cu_is_dev(table) || !gd__cu_is_dev(slots) || !gd__cu_is_dev(q) ||
        !gd__cu_is_dev(k) || !gd__cu_is_dev(v) || !gd__cu_is_dev(gates) ||
        !gd__cu_is_dev(beta) || !gd__cu_is_dev(r))
        return gd__err(cfg, GD_EINVAL, "%s: a buffer is not a device pointer", fn);
    NH = (size_t)N * H;
    if ((rc = gd__cu_rc(cfg, cudaMallocAsync((void **)&dflag, 2 * sizeof(int), st), fn)) != GD_OK)
        return rc;
    rc = gd__cu_rc(cfg, cudaMemsetAsync(dflag, 0, 2 * sizeof(int), st), fn);
    if (rc == GD_OK) {
        GD__LAUNCH(gd__k_step_check, (unsigned)((N + 127) / 128), 128, 0, st, dflag + 1, slots, N,
                   n_slots);
        rc = gd__cu_launched(cfg, fn);
    }
    /* the slot check and the input scan, then one read-back of both flags */
    if (rc == GD_OK)
        rc = gd__cu_check_launch(cfg, fn, dflag, q, k, NH * Dk, v, NH * Dv, gates, beta, NH, NULL,
                                 0, st);
    if (rc == GD_OK)
        rc = gd__cu_rc(cfg, cudaMemcpyAsync(hflag, dflag, 2 * sizeof(int), cudaMemcpyDeviceToHost,
                                            st), fn);
    if (rc == GD_OK) rc = gd__cu_rc(cfg, cudaStreamSynchronize(st), fn);
    if (rc == GD_OK && (hflag[1] & 1)) rc = gd__err(cfg, GD_ERANGE, "%s: a slot outside [0,%d)", fn, n_slots);
    if (rc == GD_OK && (hflag[1] & 2)) rc = gd__err(cfg, GD_ERANGE, "%s: a slot repeated", fn);
    if (rc == GD_OK) rc = gd__cu_check_flags(cfg, fn, hflag[0]);
    if (rc == GD_OK) {
        dim3 grid((unsigned)NH, (unsigned)((Dv + GD__STEP_ROWS - 1) / GD__STEP_ROWS));
        gd__cu_params(&p, cfg, 1, Dk, Dv, 1, 1, 1);
        p.q = q; p.k = k; p.v = v; p.g = gates; p.be = beta; p.r = r;
        GD__LAUNCH(gd__k_step, grid, GD__STEP_THREADS, 2 * (size_t)Dk * sizeof(float), st, p,
                   table, slots, H);
        rc = gd__cu_launched(cfg, fn);
    }
    (void)cudaFreeAsync(dflag, st);
    return rc;
}
