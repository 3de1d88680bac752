/* cuda/polar.cuh - CUDA bodies of polar.h's *_cuda entry points (seed 002 §3.2, §5.4.1-5.4.2).

   Not a standalone header: polar.h includes it at the end of its implementation section
   when compiled by nvcc (POLAR_IMPLEMENTATION + __CUDACC__) or by the CPU simulation of
   `make test` (ATTNKIT_CUDA_SIM, tests/cuda_sim.h). It uses polar.h's private helpers
   (config and dimension checks, the row-buffer layout of the streaming backward) and
   nothing else from attnkit. Copy polar.h and this file together.

   Kernels (fp32 SIMT, `math = POLAR_MATH_FP32`; every thread block has 128 threads):
     polar__k_fwd       one block per (batch, head, 16-query tile); streams 32-key tiles of
                        K and V through shared memory with a running max M, L = sum p,
                        Q2 = sum p^2 (alpha^2 rescale) and S = sum p v per row (8 threads
                        per row, D/8 output dims each), folds the null sink in last and
                        writes c, mag and the saved statistics (M, L, Q2, |s|) with the same
                        meaning as polar_forward's. Causal / sliding-window: only the key
                        tiles that some row of the tile can see are visited. GQA: query head
                        h reads kv head h / (H/Hkv) in place (nothing is repeated).
     polar__k_bwd_pre   per row: ds, the scalars of the logit gradient, the null-sink and
                        beta terms (polar_backward's step 1), into a row buffer. Rows whose
                        sink holds >= half the weight take g_N = -sum_j g_j (polar.h's
                        POLAR__NULL_SUM): the query passes (fp32 and tensor-core) add its
                        sum_j p_j ds.v_j part per row.
     polar__k_bwd_q     query-parallel pass: one block per 16-query tile, 16-key tiles:
                        recomputes p from the saved M, accumulates dq and the real-key part
                        of the temperature gradient.
     polar__k_bwd_kv    key-parallel pass: one block per (batch, kv head, 16-key tile); loops
                        over the H/Hkv query heads of its group and the query tiles that see
                        its keys, so dk and dv are reduced over the group inside one block
                        (no atomics).
     polar__k_bwd_prm   per-head parameter gradients: one block per head, fixed-order tree
                        reduction in double; v_null's gradient in two fixed-order levels
                        (polar__k_bwd_vn_part: one block per head and 256 rows;
                        polar__k_bwd_vn_sum: the chunks in order).
     polar__k_decode    paged GQA decode: one block per (sequence, kv head, up to 16 query
                        heads of the group); each cached K/V row is read once into shared
                        memory for all of them; the loop is bounded by the live length read
                        on the device (no host sync, no allocation: capturable in a graph).
     polar__k_dist_row, _loss, _prm, _dk  eq. 15's distractor loss and its backward: one
                        thread per query row (R double dots, the softmax against the null
                        logit; dq accumulated per row), the loss and the per-head gradients
                        as one-block fixed-order double sums, dk_rand one thread per element
                        looping over its group's rows (no atomics). Not a hot path: R is a
                        handful of keys and the loss is off by default.
   Kernels (tensor cores, `math = POLAR_MATH_BF16` or `POLAR_MATH_TF32`; one source per
   pass, templated on the math mode; 128 threads = 4 warps; sm_80 or newer: a build for an
   older target compiles bodies that write NaN into the outputs):
     polar__k_fwd_tc    one block per (batch, head, 64-query tile), each warp owning 16
                        query rows; 64-key tiles of K and V staged once per block (rounded
                        to bf16 / tf32 as they are stored in shared memory, the tail rows of
                        a ragged T zero-filled). Per key tile each warp computes its 16 x 64
                        scores S = Q K^T on WMMA (fp32 accumulators; only the 16-key column
                        tiles its rows can see), then two lanes per row do the row work in
                        fp32 on the fp32 score tile: mask, tile max, running max M, p =
                        exp(s - M), L += sum p, Q2 += sum p^2 (alpha^2 rescale), the row of
                        the fp32 output accumulator O (shared) scaled by alpha, p rounded
                        into a P tile; then O += P V on WMMA. Causal / sliding-window tile
                        skipping and GQA (query head h reads kv head h / (H/Hkv) in place)
                        as in the fp32 kernel. The null sink, c, mag and the statistics are
                        finished per row as there (double, once per row, outside the loops);
                        c is written coalesced by the whole block.
     polar__k_bwd_q_tc  query pass: one block per 64-query tile, 64-key tiles: S = Q K^T and
                        DV = DS V^T on WMMA, g per visible pair from the saved row scalars
                        (SIMT fp32), g rounded into G, dq += G K on WMMA with the fp32
                        accumulator fragments held in registers across all key tiles. The
                        temperature gradient's sum_j g_j (q . k_j) is summed in fp32 from the
                        unrounded g and the fp32 scores (it cancels ~100-fold; G's rounding
                        would show through q . (G K)).
     polar__k_bwd_kv_tc key pass: one block per (batch, kv head, 64-key tile), each warp
                        owning 16 keys; loops over the group's H/Hkv query heads and the
                        64-query tiles that see its keys: S^T = K Q^T and DV^T = V DS^T on
                        WMMA, gt = temp/sqrt(D) g and wt = p / Z (SIMT fp32, rounded), dk +=
                        Gt Q and dv += Wt DS on WMMA, accumulators in registers across the
                        whole group (reduced without atomics, deterministic).
     polar__k_bwd_pre and polar__k_bwd_prm (O(T D) row work) are the fp32 kernels above in
     every math mode. The decode is fp32 in every math mode (one query per head: memory-
     bound, tensor cores would not speed it up): math = bf16 / tf32 run the fp32 decode.
     Shared rows are padded (ldm = D + 8 bf16 / D + 4 floats; score tiles 64 + 4 floats;
     P tiles 64 + 8 bf16, tf32 rounds P in place in the score tile), so every WMMA tile
     pointer is 32-byte aligned, ldm a multiple of 16 bytes, and consecutive rows start on
     different banks. Dynamic shared memory per block (bytes, KiB; above 48 KiB the launch
     raises cudaFuncAttributeMaxDynamicSharedMemorySize first; sm_90 allows 227 KiB, so
     all fit there; sm_80 allows 163 KiB: all but the tf32 backward at D = 128, which
     returns POLAR_ENOTSUP there before any launch; untested, no sm_80 device here):
                         D = 32        64         96         128
       forward  bf16       51.1      71.1       91.1       111.1
                tf32       54.1      86.1      118.1       150.1
       backward bf16       73.4      89.4      105.4       121.4  (query and key passes)
                tf32       71.4     103.4      135.4       167.4
     (forward: Q, K, V tiles, one fp32 score tile, one P tile, the fp32 64 x (D + 4) O
     tile, row scalars; backward: four staged tiles, two fp32 score tiles, two P tiles,
     row scalars; the epilogues reuse the staged tiles' room for the fp32 results.)
     Not measured on a GPU yet: occupancy, register use and speed are unknown.
   Memory of the backward: the workspace holds B*H*T*(D + 10) floats (polar__k_bwd_pre's
   row buffer and ds) and v_null's chunk sums (H * ceil(B*T/256) * D doubles); never
   O(T^2). polar_workspace_size_cuda() gives its size.

   Numerics and parity tolerances (tests/parity_polar.cu against the CPU streaming path):
     Scores, p and the per-tile sums are fp32 as on the CPU; the running sums across tiles
     (L, Q2, S, the dq/dk/dv accumulators) are double, as on the CPU, so the error does not
     grow with T. Row epilogues are double. Against polar_forward: c, mag and the saved
     statistics within 1e-5 relative; against polar_backward: dq, dk, dv and every parameter
     gradient within 1e-4 relative (the element-wise bound is rtol*|ref| + rtol*max|ref|,
     i.e. relative to the element or, where the element cancels to ~0, to the tensor's
     scale). Decode: within 1e-5 of polar_decode and of the last row of the forward.
     Do not compile with --use_fast_math (expf and the double epilogue must be accurate).
   Tensor-core paths (bf16 / tf32): q, k, v, ds, p and g are rounded to the math mode's
     input precision (bf16: 8 significant bits, tf32: 11) before the products; products
     accumulate in fp32; M, L, Q2, |s|, O and every running sum are fp32 (no double inside
     the loops). Tolerance against the CPU forward + backward (the device backward fed its
     own forward's c, mag and statistics, as in training), per tensor, with the norm
     max|gpu - cpu| / max|cpu|: 2e-2 for c, mag, each saved statistic, dq, dk, dv and
     v_null's gradient. The four per-head scalar gradients (len_gain, null_base,
     null_slope, mag_beta) are sums over all B*T rows of terms that cancel 10-200 fold (the
     logit gradients of a row sum to zero), so their norm is |gpu - cpu| <= 2e-2 * the sum
     of the magnitudes of the terms. Measured in the simulation (tests/parity_polar.cu):
     bf16 up to 1.9e-2 (Q2 on peaked rows; c 1.2e-2 at most, dq/dk/dv 1.1e-2), tf32 up to
     3.2e-3. The error grows with the size of the logits (bf16 rounds q.k/sqrt(D) to about
     2^-8 |q||k|/sqrt(D)); both modes stay above a floor (bf16 1e-4, tf32 1e-5) in c, dq, dk,
     dv, so the tests show the rounding happened.
   Determinism: no atomics anywhere; every reduction is in a fixed order, so results are
   bit-identical run to run (in every math mode).
   Not implemented: head dims other than 32, 64, 96, 128 return POLAR_ENOTSUP (in every
   math mode); tensor cores in the decode (it runs fp32, see above). Parameters are
   not scanned for NaN/Inf on the device (that would need a host sync): non-finite
   parameters give non-finite outputs. Invalid block-table entries or sequence lengths in
   polar_decode_cuda are detected on the device: that sequence's c and mag are NaN
   (no out-of-range read), since an error code would need a host sync. */

#ifdef ATTNKIT_CUDA_SIM
#define POLAR__LAUNCH(k, g, b, sm, st, ...) ATTNKIT_SIM_LAUNCH(k, g, b, sm, st, __VA_ARGS__)
#define POLAR__DSMEM(T, name) AK_SIM_DYNAMIC_SHARED(T, name)
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>
#include <stdint.h>
#define POLAR__LAUNCH(k, g, b, sm, st, ...) k<<<(g), (b), (sm), (st)>>>(__VA_ARGS__)
#define POLAR__DSMEM(T, name) \
    extern __shared__ __align__(16) unsigned char polar__dsmem_[]; T *name = (T *)polar__dsmem_
#endif

#define POLAR__CT 128 /* threads per block */
#define POLAR__SUB 8  /* threads per query row (forward, query pass, decode) or per key */
#define POLAR__CQ 16  /* query rows per block (forward, query pass, decode) */
#define POLAR__CK 32  /* keys per tile in the forward and decode */
#define POLAR__CKQ 16 /* keys per tile in the query pass */
#define POLAR__CKB 16 /* keys per block in the key pass */
#define POLAR__CQB 16 /* query rows per tile in the key pass */

/* ------------------------------------------------------------ device helpers */
static __device__ double polar__d_softplus(double x) { return x > 30.0 ? x : log1p(exp(x)); }
static __device__ double polar__d_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static __device__ int polar__d_nkeys(int window, int i)
{
    return (window > 0 && i + 1 > window) ? window : i + 1;
}
/* temperature and null logit of a row with n visible keys (as polar__row_tn) */
static __device__ void polar__d_row_tn(const float *lg, const float *nb, const float *ns, int h,
                                       int n, double *temp, double *nul)
{
    double nn = n < 1 ? 1.0 : (double)n;
    *temp = 1.0 + polar__d_softplus(lg[h]) * log(nn);
    *nul = nb[h] + polar__d_softplus(ns[h]) * sqrt(log(nn + 1.0));
}

/* One key tile's update of a row's running sums. sr: the row's CK scores (-inf where the
   key is not visible); Vs: the value tile (CK x D); this thread owns dims u + SUB*e. */
template <int D>
static __device__ void polar__d_tile_update(const float *sr, const float *Vs, int u, float *m,
                                            double *l, double *q2, double *acc)
{
    enum { E = D / POLAR__SUB };
    float mx = -INFINITY, mnew, alpha, lt = 0.0f, q2t = 0.0f, at[E];
    int jj, e;
    for (jj = 0; jj < POLAR__CK; jj++) mx = fmaxf(mx, sr[jj]);
    if (mx == -INFINITY) return; /* nothing visible in this tile for this row */
    mnew = fmaxf(*m, mx);
    alpha = expf(*m - mnew); /* 0 on the first visible tile (m = -inf) */
    for (e = 0; e < E; e++) at[e] = 0.0f;
    for (jj = 0; jj < POLAR__CK; jj++) {
        float p = expf(sr[jj] - mnew); /* exp(-inf) = 0 for masked keys */
        const float *vr = Vs + jj * D + u;
        lt += p;
        q2t += p * p;
        for (e = 0; e < E; e++) at[e] += p * vr[POLAR__SUB * e];
    }
    *l = *l * alpha + lt;
    *q2 = *q2 * ((double)alpha * alpha) + q2t;
    for (e = 0; e < E; e++) acc[e] = acc[e] * alpha + at[e];
    *m = mnew;
}

/* Fold the null sink into a row: Sf (this thread's dims of s*Z, rounded to float as on
   the CPU), the statistics, and this thread's part of |s|^2. */
template <int D>
static __device__ double polar__d_fold(float *Sf, double *Mo, double *Lo, double *Q2o, double *Zf,
                                       double *Qf, float m, double l, double q2, const double *acc,
                                       double temp, double nul, const float *vn, int u,
                                       float stat_floor)
{
    enum { E = D / POLAR__SUB };
    double aN = temp * nul, M = (double)m > aN ? (double)m : aN;
    double al = exp((double)m - M), pN = exp(aN - M), L = l * al, Q2 = q2 * al * al, Z = L + pN;
    double f = stat_floor, r2 = 0.0;
    int e;
    *Zf = Z > f ? Z : f;
    *Qf = Q2 > f ? Q2 : f;
    for (e = 0; e < E; e++) {
        double s;
        Sf[e] = (float)(acc[e] * al + pN * vn[u + POLAR__SUB * e]);
        s = Sf[e] / *Zf;
        r2 += s * s;
    }
    *Mo = M;
    *Lo = L;
    *Q2o = Q2;
    return r2;
}

/* ------------------------------------------------------------ forward */
/* The end of a row, shared by the forward and the decode: c = S / (Z max(|S|, eps)), |S|
   from the POLAR__SUB sub-lane partial sums of squares in red; mag from the participation
   ratio; stats (NULL in the decode) gets M, L, Q2, |S|; bad (the decode's invalid block
   table or length) writes NaN instead. Lane u writes its E elements; lane 0 the rest. */
template <int D>
static __device__ void polar__d_finish(float *c, float *mag, float *stats, const double *red, const float *Sf,
                                       size_t row, int u, double M, double L, double Q2, double Zf, double Qf,
                                       float mbh, float norm_eps, int bad)
{
    enum { E = D / POLAR__SUB };
    double rn = 0.0, inv;
    int x, e;
    for (x = 0; x < POLAR__SUB; x++) rn += red[x];
    rn = sqrt(rn);
    inv = 1.0 / (Zf * (rn > norm_eps ? rn : (double)norm_eps));
    if (bad) inv = NAN;
    for (e = 0; e < E; e++) c[row * D + u + POLAR__SUB * e] = (float)(Sf[e] * inv);
    if (u == 0) {
        double meff = L * L * L / (Qf * Zf);
        mag[row] = bad ? NAN : (float)tanh(polar__d_softplus(mbh) * log1p(meff));
        if (stats) {
            stats[row * POLAR_NSTAT + 0] = (float)M;
            stats[row * POLAR_NSTAT + 1] = (float)L;
            stats[row * POLAR_NSTAT + 2] = (float)Q2;
            stats[row * POLAR_NSTAT + 3] = (float)rn;
        }
    }
}

template <int D>
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_fwd(float *c, float *mag, float *stats, const float *q, const float *k, const float *v,
             const float *lg, const float *nb, const float *ns, const float *mb, const float *vnull,
             int H, int Hkv, int T, int window, float norm_eps, float stat_floor, int nqb)
{
    enum { DP = D + 1, E = D / POLAR__SUB, SP = POLAR__CK + 1 };
    __shared__ float Qs[POLAR__CQ * DP];
    __shared__ float Ks[POLAR__CK * DP];
    __shared__ float Vs[POLAR__CK * D];
    __shared__ float Ss[POLAR__CQ * SP];
    __shared__ float tfs[POLAR__CQ];
    __shared__ double red[POLAR__CQ * POLAR__SUB];
    const int tid = threadIdx.x, r = tid / POLAR__SUB, u = tid % POLAR__SUB;
    const int qb = nqb - 1 - (int)(blockIdx.x % (unsigned)nqb), bh = (int)(blockIdx.x / (unsigned)nqb);
    const int b = bh / H, h = bh % H, hk = h / (H / Hkv);
    const int i0 = qb * POLAR__CQ, nr = T - i0 < POLAR__CQ ? T - i0 : POLAR__CQ, i1 = i0 + nr - 1;
    const int i = i0 + r, live = i < T;
    const float scf = (float)(1.0 / sqrt((double)D));
    const float *kb = k + ((size_t)b * Hkv + hk) * T * D, *vb = v + ((size_t)b * Hkv + hk) * T * D;
    const int n = live ? polar__d_nkeys(window, i) : 1;
    double temp, nul, l = 0.0, q2 = 0.0, acc[E], M, L, Q2, Zf, Qf, r2;
    float m = -INFINITY, Sf[E];
    int x, e, j0, jstart;
    polar__d_row_tn(lg, nb, ns, h, n, &temp, &nul);
    for (e = 0; e < E; e++) acc[e] = 0.0;
    for (x = tid; x < POLAR__CQ * D; x += POLAR__CT) {
        int rr = x / D, d = x % D;
        Qs[rr * DP + d] = i0 + rr < T ? q[((size_t)bh * T + i0 + rr) * D + d] : 0.0f;
    }
    if (u == 0) tfs[r] = (float)temp * scf;
    jstart = i0 + 1 - polar__d_nkeys(window, i0);
    jstart -= jstart % POLAR__CK;
    for (j0 = jstart; j0 <= i1; j0 += POLAR__CK) {
        const int nc = T - j0 < POLAR__CK ? T - j0 : POLAR__CK;
        __syncthreads(); /* the previous tile is consumed (and Qs, tfs are written) */
        for (x = tid; x < POLAR__CK * D; x += POLAR__CT) {
            int jj = x / D, d = x % D;
            size_t o = (size_t)(j0 + jj) * D + d;
            Ks[jj * DP + d] = jj < nc ? kb[o] : 0.0f;
            Vs[jj * D + d] = jj < nc ? vb[o] : 0.0f;
        }
        __syncthreads();
        for (x = tid; x < POLAR__CQ * POLAR__CK; x += POLAR__CT) {
            int rr = x / POLAR__CK, jj = x % POLAR__CK, ii = i0 + rr, jg = j0 + jj, d;
            float s = -INFINITY;
            if (ii < T && jg <= ii && jg > ii - polar__d_nkeys(window, ii)) {
                const float *qr = Qs + rr * DP, *kr = Ks + jj * DP;
                float dot = 0.0f;
                for (d = 0; d < D; d++) dot += qr[d] * kr[d];
                s = dot * tfs[rr];
            }
            Ss[rr * SP + jj] = s;
        }
        __syncthreads();
        if (live) polar__d_tile_update<D>(Ss + r * SP, Vs, u, &m, &l, &q2, acc);
    }
    r2 = polar__d_fold<D>(Sf, &M, &L, &Q2, &Zf, &Qf, m, l, q2, acc, temp, nul,
                          vnull + (size_t)h * D, u, stat_floor);
    red[r * POLAR__SUB + u] = r2;
    __syncthreads();
    if (live)
        polar__d_finish<D>(c, mag, stats, red + r * POLAR__SUB, Sf, (size_t)bh * T + i, u, M, L, Q2, Zf, Qf,
                           mb[h], norm_eps, 0);
}

/* ------------------------------------------------------------ backward */
/* step 1, one thread per row (as polar_backward's preamble and polar__row_ds) */
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_bwd_pre(float *rows, float *dsall, const float *dc, const float *dmag, const float *c,
                 const float *mag, const float *stats, const float *lg, const float *nb,
                 const float *ns, const float *mb, const float *vnull, int H, int T, int D,
                 int window, float norm_eps, float stat_floor, size_t nrows)
{
    size_t row = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float *sti, *ci, *dci, *vn;
    float *ro, *ds;
    double temp, nul, M, L, Q2, pN, Z, Zf, Qf, meff, f = stat_floor, eps = norm_eps;
    double rn, rr, cdc = 0.0, Dss = 0.0, bsp, dm, K, dbeta, dvn = 0.0, gN, magv, dmagv, g1;
    int h, i, d;
    if (row >= nrows) return; /* no barrier in this kernel */
    h = (int)((row / (size_t)T) % (size_t)H);
    i = (int)(row % (size_t)T);
    sti = stats + row * POLAR_NSTAT;
    ci = c + row * D;
    dci = dc + row * D;
    ds = dsall + row * D;
    ro = rows + row * POLAR__NROW;
    vn = vnull + (size_t)h * D;
    polar__d_row_tn(lg, nb, ns, h, polar__d_nkeys(window, i), &temp, &nul);
    M = sti[0];
    L = sti[1];
    Q2 = sti[2];
    rn = sti[3];
    pN = exp(temp * nul - M);
    Z = L + pN;
    Zf = Z > f ? Z : f;
    Qf = Q2 > f ? Q2 : f;
    meff = L * L * L / (Qf * Zf);
    rr = rn > eps ? rn : eps;
    if (rn > eps)
        for (d = 0; d < D; d++) cdc += (double)ci[d] * dci[d];
    for (d = 0; d < D; d++) {
        ds[d] = (float)((dci[d] - ci[d] * cdc) / rr);
        Dss += (double)ds[d] * ci[d] * rr;
    }
    magv = mag[row];
    dmagv = dmag ? (double)dmag[row] : 0.0;
    bsp = polar__d_softplus(mb[h]);
    g1 = dmagv * (1.0 - magv * magv);
    dm = g1 * bsp / (1.0 + meff);
    K = dm * meff;
    dbeta = g1 * log1p(meff) * polar__d_sigmoid(mb[h]);
    ro[POLAR__R_WN] = (float)(pN / Zf);
    if (POLAR__NULL_SUM(ro[POLAR__R_WN])) {
        gN = Dss * (L / Zf) - K * (pN / Zf); /* -sum_j g_j less its P part (query pass) */
    } else {
        for (d = 0; d < D; d++) dvn += (double)ds[d] * vn[d];
        gN = pN / Zf * (dvn - Dss - K);
    }
    ro[POLAR__R_M] = (float)M;
    ro[POLAR__R_T] = (float)temp;
    ro[POLAR__R_A] = (float)(1.0 / Zf);
    ro[POLAR__R_B] = (float)(dm * 3.0 * L * L / (Qf * Zf) - (K + Dss) / Zf);
    ro[POLAR__R_C] = (float)(Q2 >= f ? 2.0 * dm * L * L * L / (Qf * Qf * Zf) : 0.0);
    ro[POLAR__R_DT] = (float)(gN * nul);
    ro[POLAR__R_DU] = (float)(temp * gN);
    ro[POLAR__R_DBETA] = (float)dbeta;
    ro[POLAR__R_NUL] = (float)nul;
}

/* the logit gradient of one visible (query, key) pair from its raw q.k and ds.v */
static __device__ float polar__d_g(float s, float dsv, const float *rs, float *p)
{
    /* rs: M, tf, A, B, C of the row */
    float pv = expf(s * rs[1] - rs[0]);
    *p = pv;
    return pv * (rs[2] * dsv + rs[3]) - rs[4] * pv * pv;
}

/* step 2: query pass (dq, the real-key part of the temperature grad) */
template <int D>
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_bwd_q(float *dq, float *rows, const float *q, const float *k, const float *v,
               const float *dsall, int H, int Hkv, int T, int window, int nqb)
{
    enum { DP = D + 1, E = D / POLAR__SUB, GP = POLAR__CKQ + 1 };
    __shared__ float Qs[POLAR__CQ * DP];
    __shared__ float DSs[POLAR__CQ * DP];
    __shared__ float Ks[POLAR__CKQ * DP];
    __shared__ float Vs[POLAR__CKQ * DP];
    __shared__ float Gs[POLAR__CQ * GP];
    __shared__ float PDs[POLAR__CQ * GP]; /* p ds.v per pair, for the null sum P */
    __shared__ float rsc[POLAR__CQ * 5];
    __shared__ double red[POLAR__CQ * POLAR__SUB];
    const int tid = threadIdx.x, r = tid / POLAR__SUB, u = tid % POLAR__SUB;
    const int qb = nqb - 1 - (int)(blockIdx.x % (unsigned)nqb), bh = (int)(blockIdx.x / (unsigned)nqb);
    const int b = bh / H, h = bh % H, hk = h / (H / Hkv);
    const int i0 = qb * POLAR__CQ, nr = T - i0 < POLAR__CQ ? T - i0 : POLAR__CQ, i1 = i0 + nr - 1;
    const int i = i0 + r, live = i < T;
    const float scf = (float)(1.0 / sqrt((double)D));
    const float *kb = k + ((size_t)b * Hkv + hk) * T * D, *vb = v + ((size_t)b * Hkv + hk) * T * D;
    double gq[E], dot = 0.0, pacc = 0.0;
    int x, e, j0, jstart;
    for (e = 0; e < E; e++) gq[e] = 0.0;
    for (x = tid; x < POLAR__CQ * D; x += POLAR__CT) {
        int rr = x / D, d = x % D;
        size_t o = ((size_t)bh * T + i0 + rr) * D + d;
        Qs[rr * DP + d] = i0 + rr < T ? q[o] : 0.0f;
        DSs[rr * DP + d] = i0 + rr < T ? dsall[o] : 0.0f;
    }
    if (tid < POLAR__CQ) {
        const float *ro = rows + ((size_t)bh * T + i0 + tid) * POLAR__NROW;
        int ok = i0 + tid < T;
        rsc[tid * 5 + 0] = ok ? ro[POLAR__R_M] : 0.0f;
        rsc[tid * 5 + 1] = ok ? ro[POLAR__R_T] * scf : 0.0f;
        rsc[tid * 5 + 2] = ok ? ro[POLAR__R_A] : 0.0f;
        rsc[tid * 5 + 3] = ok ? ro[POLAR__R_B] : 0.0f;
        rsc[tid * 5 + 4] = ok ? ro[POLAR__R_C] : 0.0f;
    }
    jstart = i0 + 1 - polar__d_nkeys(window, i0);
    jstart -= jstart % POLAR__CKQ;
    for (j0 = jstart; j0 <= i1; j0 += POLAR__CKQ) {
        const int nc = T - j0 < POLAR__CKQ ? T - j0 : POLAR__CKQ;
        __syncthreads();
        for (x = tid; x < POLAR__CKQ * D; x += POLAR__CT) {
            int jj = x / D, d = x % D;
            size_t o = (size_t)(j0 + jj) * D + d;
            Ks[jj * DP + d] = jj < nc ? kb[o] : 0.0f;
            Vs[jj * DP + d] = jj < nc ? vb[o] : 0.0f;
        }
        __syncthreads();
        for (x = tid; x < POLAR__CQ * POLAR__CKQ; x += POLAR__CT) {
            int rr = x / POLAR__CKQ, jj = x % POLAR__CKQ, ii = i0 + rr, jg = j0 + jj, d;
            float g = 0.0f, p, pd = 0.0f;
            if (ii < T && jg <= ii && jg > ii - polar__d_nkeys(window, ii)) {
                const float *qr = Qs + rr * DP, *dr = DSs + rr * DP;
                const float *kr = Ks + jj * DP, *vr = Vs + jj * DP;
                float s = 0.0f, dsv = 0.0f;
                for (d = 0; d < D; d++) {
                    s += qr[d] * kr[d];
                    dsv += dr[d] * vr[d];
                }
                g = polar__d_g(s, dsv, rsc + rr * 5, &p);
                pd = __fmul_rn(p, dsv);
            }
            Gs[rr * GP + jj] = g;
            PDs[rr * GP + jj] = pd;
        }
        __syncthreads();
        if (live) {
            float gt[E];
            int jj;
            for (e = 0; e < E; e++) gt[e] = 0.0f;
            for (jj = 0; jj < POLAR__CKQ; jj++) {
                float g = Gs[r * GP + jj];
                const float *kr = Ks + jj * DP + u;
                for (e = 0; e < E; e++) gt[e] += g * kr[POLAR__SUB * e];
            }
            for (e = 0; e < E; e++) gq[e] += gt[e];
            if (u == 0)
                for (jj = 0; jj < POLAR__CKQ; jj++) pacc += (double)PDs[r * GP + jj];
        }
    }
    if (live) {
        size_t row = (size_t)bh * T + i;
        double fsc = (double)rows[row * POLAR__NROW + POLAR__R_T] * scf;
        for (e = 0; e < E; e++) {
            int d = u + POLAR__SUB * e;
            dot += q[row * D + d] * gq[e];
            dq[row * D + d] += (float)(fsc * gq[e]);
        }
    }
    red[r * POLAR__SUB + u] = dot;
    __syncthreads();
    if (live && u == 0) {
        double t = 0.0;
        float *ro = rows + ((size_t)bh * T + i) * POLAR__NROW;
        for (x = 0; x < POLAR__SUB; x++) t += red[r * POLAR__SUB + x];
        ro[POLAR__R_DT] += (float)(t * scf);
        if (POLAR__NULL_SUM(ro[POLAR__R_WN])) { /* g_N = -sum_j g_j: its P part */
            double gp = -pacc * ro[POLAR__R_A];
            ro[POLAR__R_DT] += (float)(gp * ro[POLAR__R_NUL]);
            ro[POLAR__R_DU] += (float)(gp * ro[POLAR__R_T]);
        }
    }
}

/* step 3: key pass (dk, dv), reduced over the GQA group inside the block */
template <int D>
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_bwd_kv(float *dk, float *dv, const float *rows, const float *q, const float *k,
                const float *v, const float *dsall, int H, int Hkv, int T, int window, int nkb)
{
    enum { DP = D + 1, E = D / POLAR__SUB, GP = POLAR__CQB + 1 };
    __shared__ float Ks[POLAR__CKB * DP];
    __shared__ float Vs[POLAR__CKB * DP];
    __shared__ float Qs[POLAR__CQB * DP];
    __shared__ float DSs[POLAR__CQB * DP];
    __shared__ float GT[POLAR__CKB * GP];
    __shared__ float WT[POLAR__CKB * GP];
    __shared__ float rsc[POLAR__CQB * 5];
    const int tid = threadIdx.x, jl = tid / POLAR__SUB, u = tid % POLAR__SUB;
    const int kbi = (int)(blockIdx.x % (unsigned)nkb), bk = (int)(blockIdx.x / (unsigned)nkb);
    const int b = bk / Hkv, hk = bk % Hkv, G = H / Hkv;
    const int j0 = kbi * POLAR__CKB, nc = T - j0 < POLAR__CKB ? T - j0 : POLAR__CKB;
    const int j1 = j0 + nc - 1;
    const float scf = (float)(1.0 / sqrt((double)D));
    const float *kb = k + (size_t)bk * T * D, *vb = v + (size_t)bk * T * D;
    double dK[E], dV[E];
    int x, e, hh, i0, ilast = T - 1;
    if (window > 0 && (long)j1 + window - 1 < ilast) ilast = j1 + window - 1;
    for (e = 0; e < E; e++) dK[e] = dV[e] = 0.0;
    for (x = tid; x < POLAR__CKB * D; x += POLAR__CT) {
        int jj = x / D, d = x % D;
        size_t o = (size_t)(j0 + jj) * D + d;
        Ks[jj * DP + d] = jj < nc ? kb[o] : 0.0f;
        Vs[jj * DP + d] = jj < nc ? vb[o] : 0.0f;
    }
    for (hh = 0; hh < G; hh++) {
        const int bhq = b * H + hk * G + hh;
        for (i0 = j0; i0 <= ilast; i0 += POLAR__CQB) {
            __syncthreads(); /* the previous query tile is consumed (Ks, Vs written) */
            for (x = tid; x < POLAR__CQB * D; x += POLAR__CT) {
                int rr = x / D, d = x % D;
                size_t o = ((size_t)bhq * T + i0 + rr) * D + d;
                Qs[rr * DP + d] = i0 + rr < T ? q[o] : 0.0f;
                DSs[rr * DP + d] = i0 + rr < T ? dsall[o] : 0.0f;
            }
            if (tid < POLAR__CQB) {
                const float *ro = rows + ((size_t)bhq * T + i0 + tid) * POLAR__NROW;
                int ok = i0 + tid < T;
                rsc[tid * 5 + 0] = ok ? ro[POLAR__R_M] : 0.0f;
                rsc[tid * 5 + 1] = ok ? ro[POLAR__R_T] * scf : 0.0f;
                rsc[tid * 5 + 2] = ok ? ro[POLAR__R_A] : 0.0f;
                rsc[tid * 5 + 3] = ok ? ro[POLAR__R_B] : 0.0f;
                rsc[tid * 5 + 4] = ok ? ro[POLAR__R_C] : 0.0f;
            }
            __syncthreads();
            for (x = tid; x < POLAR__CQB * POLAR__CKB; x += POLAR__CT) {
                int jj = x / POLAR__CQB, rr = x % POLAR__CQB, ii = i0 + rr, jg = j0 + jj, d;
                float gt = 0.0f, wt = 0.0f;
                if (ii < T && jg < T && jg <= ii && jg > ii - polar__d_nkeys(window, ii)) {
                    const float *qr = Qs + rr * DP, *dr = DSs + rr * DP;
                    const float *kr = Ks + jj * DP, *vr = Vs + jj * DP;
                    const float *rs = rsc + rr * 5;
                    float s = 0.0f, dsv = 0.0f, p, g;
                    for (d = 0; d < D; d++) {
                        s += qr[d] * kr[d];
                        dsv += dr[d] * vr[d];
                    }
                    g = polar__d_g(s, dsv, rs, &p);
                    gt = rs[1] * g;
                    wt = rs[2] * p;
                }
                GT[jj * GP + rr] = gt;
                WT[jj * GP + rr] = wt;
            }
            __syncthreads();
            if (jl < nc) {
                float tk[E], tv[E];
                int rr;
                for (e = 0; e < E; e++) tk[e] = tv[e] = 0.0f;
                for (rr = 0; rr < POLAR__CQB; rr++) {
                    float gt = GT[jl * GP + rr], wt = WT[jl * GP + rr];
                    const float *qr = Qs + rr * DP + u, *dr = DSs + rr * DP + u;
                    for (e = 0; e < E; e++) {
                        tk[e] += gt * qr[POLAR__SUB * e];
                        tv[e] += wt * dr[POLAR__SUB * e];
                    }
                }
                for (e = 0; e < E; e++) {
                    dK[e] += tk[e];
                    dV[e] += tv[e];
                }
            }
        }
    }
    if (jl < nc) {
        size_t o = ((size_t)bk * T + j0 + jl) * D + u;
        for (e = 0; e < E; e++) {
            dk[o + POLAR__SUB * e] += (float)dK[e];
            dv[o + POLAR__SUB * e] += (float)dV[e];
        }
    }
}

/* red[k][0] = the sum of red[k][0..POLAR__CT) for k < K: a fixed-order tree in double
   (deterministic), the whole block taking part */
template <int K>
static __device__ void polar__d_block_sum(double (*red)[POLAR__CT], int tid)
{
    int s, k;
    for (s = POLAR__CT / 2; s > 0; s /= 2) {
        __syncthreads();
        if (tid < s)
            for (k = 0; k < K; k++) red[k][tid] += red[k][tid + s];
    }
}

/* step 4: per-head parameter grads, one block per head, fixed-order reductions */
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_bwd_prm(float *glg, float *gnb, float *gns, float *gmb, const float *rows,
                 const float *lg, const float *ns, int B, int H, int T, int window)
{
    __shared__ double red[4][POLAR__CT];
    const int tid = threadIdx.x, h = blockIdx.x;
    const double sl = polar__d_sigmoid(lg[h]), ss = polar__d_sigmoid(ns[h]);
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    long x, nrow = (long)B * T;
    for (x = tid; x < nrow; x += POLAR__CT) {
        int b = (int)(x / T), i = (int)(x % T);
        const float *ro = rows + (((size_t)b * H + h) * T + i) * POLAR__NROW;
        double n = (double)polar__d_nkeys(window, i);
        a0 += ro[POLAR__R_DT] * log(n) * sl;
        a1 += ro[POLAR__R_DU];
        a2 += ro[POLAR__R_DU] * sqrt(log(n + 1.0)) * ss;
        a3 += ro[POLAR__R_DBETA];
    }
    red[0][tid] = a0;
    red[1][tid] = a1;
    red[2][tid] = a2;
    red[3][tid] = a3;
    polar__d_block_sum<4>(red, tid);
    if (tid == 0) {
        if (glg) glg[h] += (float)red[0][0];
        if (gnb) gnb[h] += (float)red[1][0];
        if (gns) gns[h] += (float)red[2][0];
        if (gmb) gmb[h] += (float)red[3][0];
    }
}

/* v_null's gradient, sum over the B*T rows of w_N * ds, in two fixed-order levels so that
   more than H blocks share the rows: polar__k_bwd_vn_part sums chunk c of POLAR__VNR rows
   of head h into part[(h * nch + c) * D + d] (double), polar__k_bwd_vn_sum adds the nch
   chunk sums in chunk order. */
enum { POLAR__VNR = 256 };
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_bwd_vn_part(double *part, const float *rows, const float *dsall, int B, int H, int T,
                     int D, int nch)
{
    const int h = (int)(blockIdx.x / (unsigned)nch), c = (int)(blockIdx.x % (unsigned)nch);
    const long nrow = (long)B * T, x0 = (long)c * POLAR__VNR;
    const long x1 = x0 + POLAR__VNR < nrow ? x0 + POLAR__VNR : nrow;
    int d;
    for (d = (int)threadIdx.x; d < D; d += POLAR__CT) {
        double acc = 0.0;
        long x;
        int b = (int)(x0 / T), i = (int)(x0 % T);
        for (x = x0; x < x1; x++) {
            size_t row = ((size_t)b * H + h) * T + (size_t)i;
            acc += (double)rows[row * POLAR__NROW + POLAR__R_WN] * dsall[row * D + d];
            if (++i == T) i = 0, b++;
        }
        part[((size_t)h * nch + c) * D + d] = acc;
    }
}

static __global__ void __launch_bounds__(POLAR__CT)
polar__k_bwd_vn_sum(float *gvn, const double *part, int D, int nch)
{
    const int h = (int)blockIdx.x;
    int d, c;
    for (d = (int)threadIdx.x; d < D; d += POLAR__CT) {
        double acc = 0.0;
        for (c = 0; c < nch; c++) acc += part[((size_t)h * nch + c) * D + d];
        gvn[(size_t)h * D + d] += (float)acc;
    }
}

/* ------------------------------------------------------------ paged decode */
template <int D>
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_decode(float *c, float *mag, const float *q, const float *kc, const float *vc,
                const int *btab, const int *seq_lens, const float *lg, const float *nb,
                const float *ns, const float *mb, const float *vnull, int H, int Hkv,
                int block_size, int num_blocks, int max_blocks, int window, float norm_eps,
                float stat_floor)
{
    enum { DP = D + 1, E = D / POLAR__SUB, SP = POLAR__CK + 1 };
    __shared__ float Qs[POLAR__CQ * DP];
    __shared__ float Ks[POLAR__CK * DP];
    __shared__ float Vs[POLAR__CK * D];
    __shared__ float Ss[POLAR__CQ * SP];
    __shared__ float tfs[POLAR__CQ];
    __shared__ double red[POLAR__CQ * POLAR__SUB];
    __shared__ int bad;
    const int tid = threadIdx.x, r = tid / POLAR__SUB, u = tid % POLAR__SUB;
    const int b = (int)(blockIdx.x / (unsigned)Hkv), hk = (int)(blockIdx.x % (unsigned)Hkv);
    const int G = H / Hkv, hh = (int)blockIdx.y * POLAR__CQ + r, live = hh < G;
    const int h = hk * G + (live ? hh : 0);
    const float scf = (float)(1.0 / sqrt((double)D));
    const int len = seq_lens[b];
    const int lbad = len < 0 || (double)len > (double)max_blocks * block_size;
    const int n = (lbad || len < 1) ? 0 : polar__d_nkeys(window, len - 1);
    const int lo = lbad ? 0 : len - n, hi = lbad ? 0 : len; /* keys [lo, hi) */
    double temp, nul, l = 0.0, q2 = 0.0, acc[E], M, L, Q2, Zf, Qf, r2;
    float m = -INFINITY, Sf[E];
    int x, e, j0;
    polar__d_row_tn(lg, nb, ns, h, n, &temp, &nul);
    for (e = 0; e < E; e++) acc[e] = 0.0;
    for (x = tid; x < POLAR__CQ * D; x += POLAR__CT) {
        int rr = x / D, d = x % D, hr = (int)blockIdx.y * POLAR__CQ + rr;
        Qs[rr * DP + d] = hr < G ? q[((size_t)b * H + hk * G + hr) * D + d] : 0.0f;
    }
    if (u == 0) tfs[r] = (float)temp * scf;
    if (tid == 0) bad = lbad;
    __syncthreads();
    for (j0 = lo - lo % POLAR__CK; j0 < hi; j0 += POLAR__CK) {
        __syncthreads(); /* the previous tile is consumed */
        for (x = tid; x < POLAR__CK * D; x += POLAR__CT) {
            int jj = x / D, d = x % D, jg = j0 + jj;
            float kv = 0.0f, vv = 0.0f;
            if (jg >= lo && jg < hi) {
                int blk = btab[(size_t)b * max_blocks + jg / block_size];
                if (blk >= 0 && blk < num_blocks) {
                    size_t o = (((size_t)blk * Hkv + hk) * block_size + jg % block_size) * D + d;
                    kv = kc[o];
                    vv = vc[o];
                } else {
                    bad = 1;
                }
            }
            Ks[jj * DP + d] = kv;
            Vs[jj * D + d] = vv;
        }
        __syncthreads();
        for (x = tid; x < POLAR__CQ * POLAR__CK; x += POLAR__CT) {
            int rr = x / POLAR__CK, jj = x % POLAR__CK, jg = j0 + jj, d;
            float s = -INFINITY;
            if (jg >= lo && jg < hi && (int)blockIdx.y * POLAR__CQ + rr < G) { /* live rows only */
                const float *qr = Qs + rr * DP, *kr = Ks + jj * DP;
                float dot = 0.0f;
                for (d = 0; d < D; d++) dot += qr[d] * kr[d];
                s = dot * tfs[rr];
            }
            Ss[rr * SP + jj] = s;
        }
        __syncthreads();
        if (live) polar__d_tile_update<D>(Ss + r * SP, Vs, u, &m, &l, &q2, acc);
    }
    r2 = polar__d_fold<D>(Sf, &M, &L, &Q2, &Zf, &Qf, m, l, q2, acc, temp, nul,
                          vnull + (size_t)h * D, u, stat_floor);
    red[r * POLAR__SUB + u] = r2;
    __syncthreads();
    if (live)
        polar__d_finish<D>(c, mag, NULL, red + r * POLAR__SUB, Sf, (size_t)b * H + h, u, M, L, Q2, Zf, Qf, mb[h],
                           norm_eps, bad);
}

/* ------------------------------------------------------------ tensor-core kernels */
/* math = POLAR_MATH_BF16 / POLAR_MATH_TF32: one source, templated on the math mode MT.
   Tiles of fp32 global memory are rounded once when staged into shared memory (bf16
   round-to-nearest-even, or wmma::__float_to_tf32), multiplied on WMMA with fp32
   accumulators; the row work (masks, running max, exp, L, Q2, the logit gradient) is
   SIMT fp32 on fp32 score tiles in shared memory. 128 threads = 4 warps; a block owns
   64 rows (queries in the forward and the query pass, keys in the key pass), each warp
   16 of them; the other side streams in tiles of 64. Every shared row is padded (ldm =
   D + 8 bf16 / D + 4 floats, score tiles 64 + 4 floats), so each WMMA tile pointer is
   32-byte aligned and rows fall on different banks. */
#if defined(ATTNKIT_CUDA_SIM) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define POLAR__TC_OK 1 /* bf16 WMMA needs sm_80; older targets write NaN (never silently wrong) */
#endif
#define POLAR__TR 64 /* rows per block (4 warps x 16) */
#define POLAR__TC 64 /* columns per streamed tile */

template <int MT> struct polar__tc;
template <> struct polar__tc<POLAR_MATH_BF16> {
    typedef __nv_bfloat16 T; /* staged element */
    typedef __nv_bfloat16 F; /* fragment element */
    enum { KK = 16, PAD = 8 };
    static __device__ __forceinline__ T cvt(float x) { return __float2bfloat16(x); }
};
template <> struct polar__tc<POLAR_MATH_TF32> {
    typedef float T;
    enum { KK = 8, PAD = 4 };
#ifdef POLAR__TC_OK /* mma.h declares tf32 for sm_80+ only */
    typedef nvcuda::wmma::precision::tf32 F;
    static __device__ __forceinline__ T cvt(float x) { return nvcuda::wmma::__float_to_tf32(x); }
#endif
};

/* Shared-memory layout (byte offsets; every region a multiple of 128 bytes). X: one
   staged 64-row tile (64 x LD elements); S: an fp32 64 x 68 score tile; P: a rounded
   64 x PLD tile (bf16; tf32 rounds in place in S, so P takes no room); O: an fp32
   64 x (D + 4) accumulator tile. */
template <int MT, int D> struct polar__tcl {
    typedef typename polar__tc<MT>::T ET;
    enum {
        LD = D + polar__tc<MT>::PAD,
        SLD = POLAR__TC + 4,
        PLD = MT == POLAR_MATH_TF32 ? SLD : POLAR__TC + polar__tc<MT>::PAD,
        OLD = D + 4,
        XB = POLAR__TR * LD * (int)sizeof(ET),
        SB = POLAR__TR * SLD * 4,
        PB = MT == POLAR_MATH_TF32 ? 0 : POLAR__TR * PLD * (int)sizeof(ET),
        OB = POLAR__TR * OLD * 4,
        /* forward: Q | K | V | S | P | O | 64 row scalars x 4 */
        F_S = 3 * XB, F_P = F_S + SB, F_O = F_P + PB, F_R = F_O + OB,
        F_BYTES = F_R + POLAR__TR * 4 * 4 + 128,
        /* backward passes: X0 | X1 | X2 | X3 | S | S2 | P | P2 | 64 row scalars x 5 */
        B_S = 4 * XB, B_S2 = B_S + SB, B_P = B_S2 + SB, B_P2 = B_P + PB, B_R = B_P2 + PB,
        B_BYTES = B_R + POLAR__TR * 5 * 4 + 128
    };
};

/* dynamic shared memory, its start rounded up to 128 bytes (the launch asks 128 more) */
#define POLAR__TC_SMEM(name)                                                              \
    POLAR__DSMEM(unsigned char, name##_raw_);                                             \
    unsigned char *name = (unsigned char *)(((uintptr_t)name##_raw_ + 127) & ~(uintptr_t)127)

/* stage rows [r0, r0 + 64) of a (rows x D) fp32 matrix as 64 x LD rounded elements;
   rows at or past nrow are zero. 16-byte loads where the matrix is 16-byte aligned
   (cudaMalloc'd buffers are; a view at another offset takes the 4-byte loop). */
template <int MT, int D>
static __device__ void polar__tc_stage(typename polar__tc<MT>::T *dst, const float *src, int r0, int nrow)
{
    enum { LD = polar__tcl<MT, D>::LD };
    typedef polar__tc<MT> TC;
    int x;
    if (((uintptr_t)src & 15u) == 0) {
        for (x = threadIdx.x; x < POLAR__TR * D / 4; x += POLAR__CT) {
            int rr = x / (D / 4), d = (x % (D / 4)) * 4;
            float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            typename TC::T *o = dst + rr * LD + d;
            if (r0 + rr < nrow) f = *(const float4 *)(const void *)(src + (size_t)(r0 + rr) * D + d);
            o[0] = TC::cvt(f.x);
            o[1] = TC::cvt(f.y);
            o[2] = TC::cvt(f.z);
            o[3] = TC::cvt(f.w);
        }
        return;
    }
    for (x = threadIdx.x; x < POLAR__TR * D; x += POLAR__CT) {
        int rr = x / D, d = x % D;
        dst[rr * LD + d] = TC::cvt(r0 + rr < nrow ? src[(size_t)(r0 + rr) * D + d] : 0.0f);
    }
}

/* C (16 x 16 tiles nt0..nt1 of a warp's 16 x 64 strip, fp32, ldm SLD) = A (16 x D,
   row-major, ldm LD) . B^T where B is 64 x D row-major (ldm LD): S = Q K^T and its kin */
template <int MT, int D>
static __device__ void polar__tc_abt(float *C, const typename polar__tc<MT>::T *A,
                                     const typename polar__tc<MT>::T *Bm, int nt0, int nt1)
{
    using namespace nvcuda;
    typedef polar__tc<MT> TC;
    typedef polar__tcl<MT, D> L;
    wmma::fragment<wmma::matrix_a, 16, 16, TC::KK, typename TC::F, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, TC::KK, typename TC::F, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, TC::KK, float> fc;
    int nt, kk;
    for (nt = nt0; nt <= nt1; nt++) {
        wmma::fill_fragment(fc, 0.0f);
        for (kk = 0; kk < D; kk += TC::KK) {
            wmma::load_matrix_sync(fa, A + kk, L::LD);
            wmma::load_matrix_sync(fb, Bm + nt * 16 * L::LD + kk, L::LD);
            wmma::mma_sync(fc, fa, fb, fc);
        }
        wmma::store_matrix_sync(C + nt * 16, fc, L::SLD, wmma::mem_row_major);
    }
}

/* acc[D/16] (a warp's 16 x D strip) += P (16 x 64, ldm PLD; columns [16 kt0, 16 kt1 + 16)
   only) . X (64 x D row-major, ldm LD) */
template <int MT, int D, typename FC>
static __device__ void polar__tc_apx(FC *acc, const typename polar__tc<MT>::T *P,
                                     const typename polar__tc<MT>::T *X, int kt0, int kt1)
{
    using namespace nvcuda;
    typedef polar__tc<MT> TC;
    typedef polar__tcl<MT, D> L;
    wmma::fragment<wmma::matrix_a, 16, 16, TC::KK, typename TC::F, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, TC::KK, typename TC::F, wmma::row_major> fb;
    int nt, k0;
    for (k0 = kt0 * 16; k0 < kt1 * 16 + 16; k0 += TC::KK) {
        wmma::load_matrix_sync(fa, P + k0, L::PLD);
        for (nt = 0; nt < D / 16; nt++) {
            wmma::load_matrix_sync(fb, X + k0 * L::LD + nt * 16, L::LD);
            wmma::mma_sync(acc[nt], fa, fb, acc[nt]);
        }
    }
}

/* the row scalars of the streaming backward (M, temp*scf, A, B, C) of rows [r0, r0+64) */
static __device__ void polar__tc_rsc(float *rsc, const float *rows, size_t r0, int nvalid, float scf)
{
    int t = threadIdx.x;
    if (t < POLAR__TR) {
        const float *ro = rows + (r0 + (size_t)t) * POLAR__NROW;
        int ok = t < nvalid;
        rsc[t * 5 + 0] = ok ? ro[POLAR__R_M] : 0.0f;
        rsc[t * 5 + 1] = ok ? ro[POLAR__R_T] * scf : 0.0f;
        rsc[t * 5 + 2] = ok ? ro[POLAR__R_A] : 0.0f;
        rsc[t * 5 + 3] = ok ? ro[POLAR__R_B] : 0.0f;
        rsc[t * 5 + 4] = ok ? ro[POLAR__R_C] : 0.0f;
    }
}

/* Forward: one block per (batch, head, 64-query tile); 64-key tiles of K and V staged
   once per block. Per key tile each warp: S = Q K^T (its 16 rows, only the 16-key column
   tiles its rows can see) on WMMA into fp32 S; two lanes per row: mask, tile max, running
   max M, p = exp(s - M) (fp32), L += sum p, Q2 += sum p^2 (alpha^2 rescale), the row of
   O (fp32, shared) scaled by alpha, p rounded into P; then O += P V on WMMA (O loaded
   and stored through the accumulator fragments). The null sink and c, mag, stats as in
   the fp32 kernel (per-row double epilogue, outside the loops). */
template <int MT, int D>
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_fwd_tc(float *c, float *mag, float *stats, const float *q, const float *k, const float *v,
                const float *lg, const float *nb, const float *ns, const float *mb, const float *vnull,
                int H, int Hkv, int T, int window, float norm_eps, float stat_floor, int nqb)
{
#ifdef POLAR__TC_OK
    using namespace nvcuda;
    typedef polar__tc<MT> TC;
    typedef typename TC::T ET;
    typedef polar__tcl<MT, D> L;
    POLAR__TC_SMEM(sm);
    ET *Qs = (ET *)sm, *Ks = (ET *)(sm + L::XB), *Vs = (ET *)(sm + 2 * L::XB);
    float *Ss = (float *)(sm + L::F_S), *Os = (float *)(sm + L::F_O), *rsv = (float *)(sm + L::F_R);
    ET *Ps = MT == POLAR_MATH_TF32 ? (ET *)(void *)Ss : (ET *)(sm + L::F_P);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, half = lane & 1;
    const int r = w * 16 + (lane >> 1); /* this lane's row in the block (two lanes per row) */
    const int qb = nqb - 1 - (int)(blockIdx.x % (unsigned)nqb), bh = (int)(blockIdx.x / (unsigned)nqb);
    const int b = bh / H, h = bh % H, hk = h / (H / Hkv);
    const int i0 = qb * POLAR__TR, nr = T - i0 < POLAR__TR ? T - i0 : POLAR__TR, i1 = i0 + nr - 1;
    const int i = i0 + r, live = i < T;
    const int wr0 = i0 + w * 16, wr1 = wr0 + 15 < i1 ? wr0 + 15 : i1; /* the warp's live rows */
    const float scf = (float)(1.0 / sqrt((double)D));
    const float *kb = k + ((size_t)b * Hkv + hk) * T * D, *vb = v + ((size_t)b * Hkv + hk) * T * D;
    const int n = live ? polar__d_nkeys(window, i) : 1;
    wmma::fragment<wmma::accumulator, 16, 16, TC::KK, float> acc[D / 16];
    double temp, nul;
    float m = -INFINITY, l = 0.0f, q2 = 0.0f, tf;
    int x, j0, jstart, nt, t;
    polar__d_row_tn(lg, nb, ns, h, n, &temp, &nul);
    tf = (float)temp * scf;
    polar__tc_stage<MT, D>(Qs, q + (size_t)bh * T * D, i0, T);
    for (x = tid; x < POLAR__TR * D; x += POLAR__CT) Os[(x / D) * L::OLD + x % D] = 0.0f;
    jstart = i0 + 1 - polar__d_nkeys(window, i0);
    jstart -= jstart % POLAR__TC;
    for (j0 = jstart; j0 <= i1; j0 += POLAR__TC) {
        int lo, hi;
        __syncthreads(); /* the previous tile is consumed (and Q, O are written) */
        polar__tc_stage<MT, D>(Ks, kb, j0, T);
        polar__tc_stage<MT, D>(Vs, vb, j0, T);
        __syncthreads();
        /* the tile columns this warp's rows can see: [lo, hi] (warp-uniform) */
        lo = wr0 <= i1 ? wr0 + 1 - polar__d_nkeys(window, wr0) - j0 : POLAR__TC;
        hi = wr1 - j0;
        lo = lo < 0 ? 0 : lo;
        hi = hi > POLAR__TC - 1 ? POLAR__TC - 1 : hi;
        if (lo > hi) continue; /* warp-uniform: no barrier until the loop's top */
        polar__tc_abt<MT, D>(Ss + w * 16 * L::SLD, Qs + w * 16 * L::LD, Ks, lo / 16, hi / 16);
        __syncwarp();
        {   /* row work: lane `half` takes columns half, half + 2, ... */
            float mx = -INFINITY, mnew, alpha, lt = 0.0f, q2t = 0.0f;
            for (t = half; t < POLAR__TC; t += 2) {
                int jg = j0 + t;
                if (live && jg < T && jg <= i && jg > i - n) mx = fmaxf(mx, Ss[r * L::SLD + t] * tf);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mnew = fmaxf(m, mx);
            alpha = mx == -INFINITY ? 1.0f : expf(m - mnew); /* 0 on the first visible tile */
            for (t = half; t < POLAR__TC; t += 2) {
                int jg = j0 + t;
                float p = 0.0f;
                if (mx != -INFINITY && live && jg < T && jg <= i && jg > i - n) p = expf(Ss[r * L::SLD + t] * tf - mnew);
                lt += p;
                q2t += p * p;
                Ps[r * L::PLD + t] = TC::cvt(p);
            }
            lt += __shfl_xor_sync(0xffffffffu, lt, 1);
            q2t += __shfl_xor_sync(0xffffffffu, q2t, 1);
            l = l * alpha + lt;
            q2 = q2 * (alpha * alpha) + q2t;
            m = mnew;
            if (alpha != 1.0f)
                for (t = half; t < D; t += 2) Os[r * L::OLD + t] *= alpha;
        }
        __syncwarp();
        for (nt = 0; nt < D / 16; nt++)
            wmma::load_matrix_sync(acc[nt], Os + w * 16 * L::OLD + nt * 16, L::OLD, wmma::mem_row_major);
        polar__tc_apx<MT, D>(acc, Ps + w * 16 * L::PLD, Vs, lo / 16, hi / 16);
        for (nt = 0; nt < D / 16; nt++)
            wmma::store_matrix_sync(Os + w * 16 * L::OLD + nt * 16, acc[nt], L::OLD, wmma::mem_row_major);
    }
    __syncthreads(); /* O complete */
    {   /* fold the null sink in (per row, double) and finish |s|, c's scale, mag, stats */
        double aN = temp * nul, M = (double)m > aN ? (double)m : aN;
        double al = exp((double)m - M), pN = exp(aN - M), Lr = l * al, Q2 = (double)q2 * al * al, Z = Lr + pN;
        double f = stat_floor, Zf = Z > f ? Z : f, Qf = Q2 > f ? Q2 : f, r2 = 0.0, rn, inv;
        const float *vn = vnull + (size_t)h * D;
        for (t = half; t < D; t += 2) {
            double s = (double)(float)(Os[r * L::OLD + t] * al + pN * vn[t]) / Zf;
            r2 += s * s;
        }
        r2 += __shfl_xor_sync(0xffffffffu, r2, 1);
        rn = sqrt(r2);
        inv = 1.0 / (Zf * (rn > norm_eps ? rn : (double)norm_eps));
        if (half == 0) {
            rsv[r * 4 + 0] = (float)al;
            rsv[r * 4 + 1] = (float)pN;
            rsv[r * 4 + 2] = (float)inv;
        }
        if (live && half == 0) {
            size_t row = (size_t)bh * T + i;
            double meff = Lr * Lr * Lr / (Qf * Zf);
            mag[row] = (float)tanh(polar__d_softplus(mb[h]) * log1p(meff));
            stats[row * POLAR_NSTAT + 0] = (float)M;
            stats[row * POLAR_NSTAT + 1] = (float)Lr;
            stats[row * POLAR_NSTAT + 2] = (float)Q2;
            stats[row * POLAR_NSTAT + 3] = (float)rn;
        }
    }
    __syncthreads();
    for (x = tid; x < nr * D; x += POLAR__CT) { /* c, coalesced */
        int rr = x / D, d = x % D;
        const float *rs = rsv + rr * 4;
        float s = Os[rr * L::OLD + d] * rs[0] + rs[1] * vnull[(size_t)h * D + d];
        c[((size_t)bh * T + i0) * D + x] = s * rs[2];
    }
#else /* no bf16 WMMA before sm_80: this block's rows come out NaN, never silently wrong */
    const int bh = (int)(blockIdx.x / (unsigned)nqb), i0 = (nqb - 1 - (int)(blockIdx.x % (unsigned)nqb)) * POLAR__TR;
    int x;
    for (x = threadIdx.x; x < POLAR__TR * D; x += POLAR__CT)
        if (i0 + x / D < T) c[((size_t)bh * T + i0) * D + x] = NAN;
    for (x = threadIdx.x; x < POLAR__TR; x += POLAR__CT)
        if (i0 + x < T) mag[(size_t)bh * T + i0 + x] = NAN;
    (void)stats; (void)q; (void)k; (void)v; (void)lg; (void)nb; (void)ns; (void)mb;
    (void)vnull; (void)H; (void)Hkv; (void)window; (void)norm_eps; (void)stat_floor;
#endif
}

/* Query pass: one block per (batch, head, 64-query tile), 64-key tiles. Per key tile each
   warp: S = Q K^T and DV = DS V^T (WMMA, fp32 tiles), g per visible pair from the saved
   row scalars (SIMT fp32, polar__d_g), g rounded into G, dq += G K (WMMA; the fp32
   accumulator fragments stay in registers across all key tiles). Then dq += temp/sqrt(D)
   times it. The row's temperature gradient gets sum_j g_j (q . k_j) / sqrt(D) summed in
   fp32 from the unrounded g and the fp32 score tile (not q . (G K): that sum cancels
   ~100-fold, and G's rounding would show through). */
template <int MT, int D>
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_bwd_q_tc(float *dq, float *rows, const float *q, const float *k, const float *v,
                  const float *dsall, int H, int Hkv, int T, int window, int nqb)
{
#ifdef POLAR__TC_OK
    using namespace nvcuda;
    typedef polar__tc<MT> TC;
    typedef typename TC::T ET;
    typedef polar__tcl<MT, D> L;
    POLAR__TC_SMEM(sm);
    ET *Qs = (ET *)sm, *DSs = (ET *)(sm + L::XB), *Ks = (ET *)(sm + 2 * L::XB), *Vs = (ET *)(sm + 3 * L::XB);
    float *Ss = (float *)(sm + L::B_S), *Ds = (float *)(sm + L::B_S2), *rsc = (float *)(sm + L::B_R);
    float *Gq = (float *)(sm + 2 * L::XB); /* after the loop: G K (64 x OLD fp32), over K and V */
    ET *Gs = MT == POLAR_MATH_TF32 ? (ET *)(void *)Ss : (ET *)(sm + L::B_P);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, half = lane & 1;
    const int r = w * 16 + (lane >> 1);
    const int qb = nqb - 1 - (int)(blockIdx.x % (unsigned)nqb), bh = (int)(blockIdx.x / (unsigned)nqb);
    const int b = bh / H, h = bh % H, hk = h / (H / Hkv);
    const int i0 = qb * POLAR__TR, nr = T - i0 < POLAR__TR ? T - i0 : POLAR__TR, i1 = i0 + nr - 1;
    const int i = i0 + r, live = i < T;
    const int wr0 = i0 + w * 16, wr1 = wr0 + 15 < i1 ? wr0 + 15 : i1;
    const float scf = (float)(1.0 / sqrt((double)D));
    const float *kb = k + ((size_t)b * Hkv + hk) * T * D, *vb = v + ((size_t)b * Hkv + hk) * T * D;
    const int n = live ? polar__d_nkeys(window, i) : 1;
    wmma::fragment<wmma::accumulator, 16, 16, TC::KK, float> acc[D / 16];
    float gs = 0.0f; /* this lane's part of sum_j g_j (q . k_j) */
    float ps = 0.0f; /* and of P = sum_j p_j ds.v_j (the null sum, POLAR__NULL_SUM rows) */
    int x, j0, jstart, nt, t;
    for (nt = 0; nt < D / 16; nt++) wmma::fill_fragment(acc[nt], 0.0f);
    polar__tc_stage<MT, D>(Qs, q + (size_t)bh * T * D, i0, T);
    polar__tc_stage<MT, D>(DSs, dsall + (size_t)bh * T * D, i0, T);
    polar__tc_rsc(rsc, rows, (size_t)bh * T + i0, nr, scf);
    jstart = i0 + 1 - polar__d_nkeys(window, i0);
    jstart -= jstart % POLAR__TC;
    for (j0 = jstart; j0 <= i1; j0 += POLAR__TC) {
        int lo, hi;
        __syncthreads();
        polar__tc_stage<MT, D>(Ks, kb, j0, T);
        polar__tc_stage<MT, D>(Vs, vb, j0, T);
        __syncthreads();
        lo = wr0 <= i1 ? wr0 + 1 - polar__d_nkeys(window, wr0) - j0 : POLAR__TC;
        hi = wr1 - j0;
        lo = lo < 0 ? 0 : lo;
        hi = hi > POLAR__TC - 1 ? POLAR__TC - 1 : hi;
        if (lo > hi) continue; /* warp-uniform */
        polar__tc_abt<MT, D>(Ss + w * 16 * L::SLD, Qs + w * 16 * L::LD, Ks, lo / 16, hi / 16);
        polar__tc_abt<MT, D>(Ds + w * 16 * L::SLD, DSs + w * 16 * L::LD, Vs, lo / 16, hi / 16);
        __syncwarp();
        for (t = half; t < POLAR__TC; t += 2) {
            int jg = j0 + t;
            float g = 0.0f, p;
            if (live && jg < T && jg <= i && jg > i - n) {
                float sv = Ss[r * L::SLD + t];
                g = polar__d_g(sv, Ds[r * L::SLD + t], rsc + r * 5, &p);
                gs += g * sv; /* before G is rounded: sum_j g_j sigma_j cancels ~100-fold */
                ps += p * Ds[r * L::SLD + t];
            }
            Gs[r * L::PLD + t] = TC::cvt(g);
        }
        __syncwarp();
        polar__tc_apx<MT, D>(acc, Gs + w * 16 * L::PLD, Ks, lo / 16, hi / 16);
    }
    __syncthreads(); /* K and V are consumed: their room takes G K */
    for (nt = 0; nt < D / 16; nt++)
        wmma::store_matrix_sync(Gq + w * 16 * L::OLD + nt * 16, acc[nt], L::OLD, wmma::mem_row_major);
    __syncthreads();
    gs += __shfl_xor_sync(0xffffffffu, gs, 1);
    ps += __shfl_xor_sync(0xffffffffu, ps, 1);
    if (live && half == 0) {
        float *ro = rows + ((size_t)bh * T + i) * POLAR__NROW;
        ro[POLAR__R_DT] += gs * scf;
        if (POLAR__NULL_SUM(ro[POLAR__R_WN])) { /* g_N = -sum_j g_j: its P part */
            double gp = -(double)ps * ro[POLAR__R_A];
            ro[POLAR__R_DT] += (float)(gp * ro[POLAR__R_NUL]);
            ro[POLAR__R_DU] += (float)(gp * ro[POLAR__R_T]);
        }
    }
    for (x = tid; x < nr * D; x += POLAR__CT) { /* dq, coalesced */
        int rr = x / D, d = x % D;
        dq[((size_t)bh * T + i0) * D + x] += rsc[rr * 5 + 1] * Gq[rr * L::OLD + d];
    }
#else /* before sm_80: NaN (see polar__k_fwd_tc) */
    const int bh = (int)(blockIdx.x / (unsigned)nqb), i0 = (nqb - 1 - (int)(blockIdx.x % (unsigned)nqb)) * POLAR__TR;
    int x;
    for (x = threadIdx.x; x < POLAR__TR * D; x += POLAR__CT)
        if (i0 + x / D < T) dq[((size_t)bh * T + i0) * D + x] = NAN;
    (void)rows; (void)q; (void)k; (void)v; (void)dsall; (void)H; (void)Hkv; (void)window;
#endif
}

/* Key pass: one block per (batch, kv head, 64-key tile); loops over the H/Hkv query heads
   of its group and the 64-query tiles that see its keys. Per query tile each warp (16
   keys): S^T = K Q^T and DV^T = V DS^T (WMMA), then per visible pair gt = temp/sqrt(D) g
   and wt = p / Z (SIMT fp32, rounded into two tiles), dk += Gt Q and dv += Wt DS (WMMA,
   accumulators in registers across the whole group: reduced without atomics). */
template <int MT, int D>
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_bwd_kv_tc(float *dk, float *dv, const float *rows, const float *q, const float *k,
                   const float *v, const float *dsall, int H, int Hkv, int T, int window, int nkb)
{
#ifdef POLAR__TC_OK
    using namespace nvcuda;
    typedef polar__tc<MT> TC;
    typedef typename TC::T ET;
    typedef polar__tcl<MT, D> L;
    POLAR__TC_SMEM(sm);
    ET *Ks = (ET *)sm, *Vs = (ET *)(sm + L::XB), *Qs = (ET *)(sm + 2 * L::XB), *DSs = (ET *)(sm + 3 * L::XB);
    float *St = (float *)(sm + L::B_S), *Dt = (float *)(sm + L::B_S2), *rsc = (float *)(sm + L::B_R);
    float *dKs = (float *)sm, *dVs = (float *)(sm + 2 * L::XB); /* after the loops */
    ET *Gt = MT == POLAR_MATH_TF32 ? (ET *)(void *)St : (ET *)(sm + L::B_P);
    ET *Wt = MT == POLAR_MATH_TF32 ? (ET *)(void *)Dt : (ET *)(sm + L::B_P2);
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, half = lane & 1;
    const int r = w * 16 + (lane >> 1); /* this lane's key row */
    const int kbi = (int)(blockIdx.x % (unsigned)nkb), bk = (int)(blockIdx.x / (unsigned)nkb);
    const int b = bk / Hkv, hk = bk % Hkv, G = H / Hkv;
    const int j0 = kbi * POLAR__TR, nc = T - j0 < POLAR__TR ? T - j0 : POLAR__TR, j1 = j0 + nc - 1;
    const int jg = j0 + r, wj0 = j0 + w * 16, wj1 = wj0 + 15 < j1 ? wj0 + 15 : j1;
    const float scf = (float)(1.0 / sqrt((double)D));
    wmma::fragment<wmma::accumulator, 16, 16, TC::KK, float> aK[D / 16], aV[D / 16];
    int x, nt, t, hh, i0, ilast = T - 1;
    if (window > 0 && (long)j1 + window - 1 < ilast) ilast = j1 + window - 1;
    for (nt = 0; nt < D / 16; nt++) {
        wmma::fill_fragment(aK[nt], 0.0f);
        wmma::fill_fragment(aV[nt], 0.0f);
    }
    polar__tc_stage<MT, D>(Ks, k + (size_t)bk * T * D, j0, T);
    polar__tc_stage<MT, D>(Vs, v + (size_t)bk * T * D, j0, T);
    for (hh = 0; hh < G; hh++) {
        const int bhq = b * H + hk * G + hh;
        for (i0 = j0; i0 <= ilast; i0 += POLAR__TC) {
            int lo, hi;
            __syncthreads(); /* the previous query tile is consumed (K, V written) */
            polar__tc_stage<MT, D>(Qs, q + (size_t)bhq * T * D, i0, T);
            polar__tc_stage<MT, D>(DSs, dsall + (size_t)bhq * T * D, i0, T);
            polar__tc_rsc(rsc, rows, (size_t)bhq * T + i0, T - i0, scf);
            __syncthreads();
            /* the tile's queries that see some key of this warp: [lo, hi] (warp-uniform) */
            lo = wj0 - i0;
            hi = (window > 0 && (long)wj1 + window - 1 < T - 1 ? wj1 + window - 1 : T - 1) - i0;
            lo = lo < 0 ? 0 : lo;
            hi = hi > POLAR__TC - 1 ? POLAR__TC - 1 : hi;
            if (wj0 > j1 || lo > hi) continue;
            polar__tc_abt<MT, D>(St + w * 16 * L::SLD, Ks + w * 16 * L::LD, Qs, lo / 16, hi / 16);
            polar__tc_abt<MT, D>(Dt + w * 16 * L::SLD, Vs + w * 16 * L::LD, DSs, lo / 16, hi / 16);
            __syncwarp();
            for (t = half; t < POLAR__TC; t += 2) {
                int ii = i0 + t;
                float gt = 0.0f, wt = 0.0f;
                if (jg <= j1 && ii < T && jg <= ii && jg > ii - polar__d_nkeys(window, ii)) {
                    const float *rs = rsc + t * 5;
                    float p, g = polar__d_g(St[r * L::SLD + t], Dt[r * L::SLD + t], rs, &p);
                    gt = rs[1] * g;
                    wt = rs[2] * p;
                }
                Gt[r * L::PLD + t] = TC::cvt(gt);
                Wt[r * L::PLD + t] = TC::cvt(wt);
            }
            __syncwarp();
            polar__tc_apx<MT, D>(aK, Gt + w * 16 * L::PLD, Qs, lo / 16, hi / 16);
            polar__tc_apx<MT, D>(aV, Wt + w * 16 * L::PLD, DSs, lo / 16, hi / 16);
        }
    }
    __syncthreads(); /* every tile is consumed: their room takes dk and dv */
    for (nt = 0; nt < D / 16; nt++) {
        wmma::store_matrix_sync(dKs + w * 16 * L::OLD + nt * 16, aK[nt], L::OLD, wmma::mem_row_major);
        wmma::store_matrix_sync(dVs + w * 16 * L::OLD + nt * 16, aV[nt], L::OLD, wmma::mem_row_major);
    }
    __syncthreads();
    for (x = tid; x < nc * D; x += POLAR__CT) { /* coalesced */
        int rr = x / D, d = x % D;
        size_t o = ((size_t)bk * T + j0) * D + x;
        dk[o] += dKs[rr * L::OLD + d];
        dv[o] += dVs[rr * L::OLD + d];
    }
#else /* before sm_80: NaN (see polar__k_fwd_tc) */
    const int bk = (int)(blockIdx.x / (unsigned)nkb), j0 = (int)(blockIdx.x % (unsigned)nkb) * POLAR__TR;
    int x;
    for (x = threadIdx.x; x < POLAR__TR * D; x += POLAR__CT)
        if (j0 + x / D < T) {
            dk[((size_t)bk * T + j0) * D + x] = NAN;
            dv[((size_t)bk * T + j0) * D + x] = NAN;
        }
    (void)rows; (void)q; (void)k; (void)v; (void)dsall; (void)H; (void)Hkv; (void)window;
#endif
}

/* ------------------------------------------------------------ distractor loss */
/* Eq. 15's alignment loss (polar_distractor_forward / _backward on the device). One
   thread per row (b, h, i): the R distractor scores (double dots, as the CPU), the softmax
   over them and the null logit, in the CPU's order and precision (double). sg: this row's
   R doubles of the workspace (the scores; the backward overwrites them with f_r).
   Forward: rowv[row] = sum_r w_r. Backward (dq != NULL): dq row += (float)(f_r k_r) for r
   in order (the CPU's float accumulation), sg[r] = f_r = coef w_r w_N temp / sqrt(D), and
   rowv[3 row + 0..2] = the row's len_gain / null_base / null_slope gradient terms. */
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_dist_row(double *rowv, double *sgall, float *dq, const float *q, const float *kall,
                  const float *lg, const float *nb, const float *ns, int H, int Hkv, int T, int D,
                  int R, int window, double coef, long nrows)
{
    const long row = (long)blockIdx.x * POLAR__CT + threadIdx.x;
    long bh;
    int b, h, i, n, r, d;
    const float *qi, *kr;
    double *sg, temp, nul, sc, M, Z, wN;
    if (row >= nrows) return;
    bh = row / T;
    i = (int)(row % T);
    b = (int)(bh / H);
    h = (int)(bh % H);
    qi = q + (size_t)row * D;
    kr = kall + ((size_t)b * Hkv + h / (H / Hkv)) * (size_t)R * D;
    sg = sgall + (size_t)row * R;
    n = polar__d_nkeys(window, i);
    polar__d_row_tn(lg, nb, ns, h, n, &temp, &nul);
    sc = 1.0 / sqrt((double)D);
    M = temp * nul;
    for (r = 0; r < R; r++) {
        double dot = 0.0;
        for (d = 0; d < D; d++) dot += (double)qi[d] * kr[(size_t)r * D + d];
        sg[r] = dot * sc;
        if (temp * sg[r] > M) M = temp * sg[r];
    }
    Z = exp(temp * nul - M);
    for (r = 0; r < R; r++) Z += exp(temp * sg[r] - M);
    wN = exp(temp * nul - M) / Z;
    if (!dq) {
        double tot = 0.0;
        for (r = 0; r < R; r++) tot += exp(temp * sg[r] - M) / Z;
        rowv[row] = tot;
    } else {
        float *dqi = dq + (size_t)row * D;
        double dt = 0.0, gN;
        for (r = 0; r < R; r++) {
            const double w = exp(temp * sg[r] - M) / Z, gr = coef * w * wN, f = gr * temp * sc;
            dt += gr * sg[r];
            for (d = 0; d < D; d++) dqi[d] += (float)(f * kr[(size_t)r * D + d]);
            sg[r] = f;
        }
        gN = -coef * wN * (1.0 - wN);
        dt += gN * nul;
        rowv[3 * row] = dt * log((double)n) * polar__d_sigmoid(lg[h]);
        rowv[3 * row + 1] = temp * gN;
        rowv[3 * row + 2] = temp * gN * sqrt(log((double)n + 1.0)) * polar__d_sigmoid(ns[h]);
    }
}

/* the loss: one block, a fixed-order sum of the rows' values, then the scale */
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_dist_loss(float *loss, const double *rowv, long nrows, double scale)
{
    __shared__ double red[1][POLAR__CT];
    const int tid = threadIdx.x;
    double a = 0.0;
    long x;
    for (x = tid; x < nrows; x += POLAR__CT) a += rowv[x];
    red[0][tid] = a;
    polar__d_block_sum<1>(red, tid);
    if (tid == 0) *loss = (float)(scale * red[0][0]);
}

/* per-head gradients: one block per head, fixed-order sums over (b, i) in double */
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_dist_prm(float *glg, float *gnb, float *gns, const double *rowv, int B, int H, int T)
{
    __shared__ double red[3][POLAR__CT];
    const int tid = threadIdx.x, h = blockIdx.x;
    double a0 = 0.0, a1 = 0.0, a2 = 0.0;
    long x;
    for (x = tid; x < (long)B * T; x += POLAR__CT) {
        const size_t row = ((size_t)(x / T) * H + h) * T + (size_t)(x % T);
        a0 += rowv[3 * row];
        a1 += rowv[3 * row + 1];
        a2 += rowv[3 * row + 2];
    }
    red[0][tid] = a0;
    red[1][tid] = a1;
    red[2][tid] = a2;
    polar__d_block_sum<3>(red, tid);
    if (tid == 0) {
        if (glg) glg[h] += (float)red[0][0];
        if (gnb) gnb[h] += (float)red[1][0];
        if (gns) gns[h] += (float)red[2][0];
    }
}

/* dk_rand: one thread per element (b, kv head, r, d); the group's query heads, then the
   rows, in the CPU's order, accumulated in float as the CPU does (no atomics) */
static __global__ void __launch_bounds__(POLAR__CT)
polar__k_dist_dk(float *dk, const double *fall, const float *q, int B, int H, int Hkv, int T,
                 int D, int R)
{
    const long e = (long)blockIdx.x * POLAR__CT + threadIdx.x;
    const int G = H / Hkv;
    long bk;
    int r, d, hk, b, h, i;
    float acc;
    if (e >= (long)B * Hkv * R * D) return;
    d = (int)(e % D);
    r = (int)((e / D) % R);
    bk = e / ((long)R * D);
    hk = (int)(bk % Hkv);
    b = (int)(bk / Hkv);
    acc = dk[e];
    for (h = hk * G; h < (hk + 1) * G; h++)
        for (i = 0; i < T; i++) {
            const size_t row = ((size_t)b * H + h) * T + i;
            acc += (float)(fall[row * R + r] * q[row * D + d]);
        }
    dk[e] = acc;
}

/* ------------------------------------------------------------ host side */
/* 1 if p is device (or managed) memory */
static int polar__cu_dev(const void *p)
{
    cudaPointerAttributes a;
    cudaError_t e;
    if (!p) return 0;
    memset(&a, 0, sizeof a);
    e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* older runtimes fail on host pointers */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

static int polar__cu_launched(void)
{
    return cudaGetLastError() == cudaSuccess ? POLAR_OK : POLAR_ECUDA;
}

/* config, dims, math mode and head dim supported by the kernels (every math mode has
   the same head dims: 32, 64, 96, 128) */
static int polar__cu_check(const polar_config *cfg, int B, int H, int Hkv, int T, int D)
{
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, T, D)) return POLAR_EINVAL;
    if (cfg->math != POLAR_MATH_FP32 && cfg->math != POLAR_MATH_TF32 && cfg->math != POLAR_MATH_BF16)
        return POLAR_EINVAL;
    if (D != 32 && D != 64 && D != 96 && D != 128) return POLAR_ENOTSUP;
    return POLAR_OK;
}

/* The tensor-core launches: raise the kernel's dynamic shared-memory limit to what its
   layout needs (above the default 48 KiB for most (math, D)), then launch. A device whose
   opt-in limit is lower (tf32 at D = 128 in the backward on sm_80) refuses the attribute:
   POLAR_ENOTSUP, nothing launched. */
template <int MT, int D>
static int polar__tc_fwd(cudaStream_t s, unsigned grid, float *c, float *mag, float *stats, const float *q,
                         const float *k, const float *v, const polar_params *prm, int H, int Hkv, int T,
                         const polar_config *cfg, int nqb)
{
    void (*kf)(float *, float *, float *, const float *, const float *, const float *, const float *,
               const float *, const float *, const float *, const float *, int, int, int, int, float, float,
               int) = polar__k_fwd_tc<MT, D>;
    const int bytes = polar__tcl<MT, D>::F_BYTES;
    cudaError_t e = cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return e == cudaErrorInvalidValue ? POLAR_ENOTSUP : POLAR_ECUDA; /* over this device's limit */
    }
    POLAR__LAUNCH(kf, grid, POLAR__CT, bytes, s, c, mag, stats, q, k, v, prm->len_gain_raw, prm->null_base,
                  prm->null_slope_raw, prm->mag_beta_raw, prm->v_null, H, Hkv, T, cfg->window, cfg->norm_eps,
                  cfg->stat_floor, nqb);
    return polar__cu_launched();
}
template <int MT, int D>
static int polar__tc_bwd(cudaStream_t s, unsigned gq, unsigned gkv, float *dq, float *dk, float *dv,
                         float *rows, const float *q, const float *k, const float *v, const float *dsall,
                         int H, int Hkv, int T, int window, int nqb, int nkb)
{
    void (*kq)(float *, float *, const float *, const float *, const float *, const float *, int, int, int,
               int, int) = polar__k_bwd_q_tc<MT, D>;
    void (*kkv)(float *, float *, const float *, const float *, const float *, const float *, const float *,
                int, int, int, int, int) = polar__k_bwd_kv_tc<MT, D>;
    const int bytes = polar__tcl<MT, D>::B_BYTES;
    cudaError_t e = cudaFuncSetAttribute(kq, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    int rc;
    if (e == cudaSuccess) e = cudaFuncSetAttribute(kkv, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return e == cudaErrorInvalidValue ? POLAR_ENOTSUP : POLAR_ECUDA; /* over this device's limit */
    }
    POLAR__LAUNCH(kq, gq, POLAR__CT, bytes, s, dq, rows, q, k, v, dsall, H, Hkv, T, window, nqb);
    rc = polar__cu_launched();
    if (rc != POLAR_OK) return rc;
    POLAR__LAUNCH(kkv, gkv, POLAR__CT, bytes, s, dk, dv, (const float *)rows, q, k, v, dsall, H, Hkv, T,
                  window, nkb);
    return polar__cu_launched();
}
/* FN<math, D>(args) for the (checked) math mode and head dim */
#define POLAR__TC_CALL(FN, math, D, ...)                                                  \
    ((math) == POLAR_MATH_BF16                                                            \
         ? ((D) == 32 ? FN<POLAR_MATH_BF16, 32>(__VA_ARGS__)                              \
            : (D) == 64 ? FN<POLAR_MATH_BF16, 64>(__VA_ARGS__)                            \
            : (D) == 96 ? FN<POLAR_MATH_BF16, 96>(__VA_ARGS__)                            \
                        : FN<POLAR_MATH_BF16, 128>(__VA_ARGS__))                          \
         : ((D) == 32 ? FN<POLAR_MATH_TF32, 32>(__VA_ARGS__)                              \
            : (D) == 64 ? FN<POLAR_MATH_TF32, 64>(__VA_ARGS__)                            \
            : (D) == 96 ? FN<POLAR_MATH_TF32, 96>(__VA_ARGS__)                            \
                        : FN<POLAR_MATH_TF32, 128>(__VA_ARGS__)))

static int polar__cu_params(const polar_params *p)
{
    return p && polar__cu_dev(p->len_gain_raw) && polar__cu_dev(p->null_base) &&
           polar__cu_dev(p->null_slope_raw) && polar__cu_dev(p->mag_beta_raw) &&
           polar__cu_dev(p->v_null);
}

/* launch kernel template K for the head dim D (one of the four checked above) */
#define POLAR__LAUNCH_D(K, D, g, b, st, ...)                                              \
    do {                                                                                  \
        switch (D) {                                                                      \
        case 32: POLAR__LAUNCH(K<32>, g, b, 0, st, __VA_ARGS__); break;                   \
        case 64: POLAR__LAUNCH(K<64>, g, b, 0, st, __VA_ARGS__); break;                   \
        case 96: POLAR__LAUNCH(K<96>, g, b, 0, st, __VA_ARGS__); break;                   \
        default: POLAR__LAUNCH(K<128>, g, b, 0, st, __VA_ARGS__); break;                  \
        }                                                                                 \
    } while (0)

/* The backward's workspace: the row buffers (B*H*T*(D + NROW) floats), then, from a
   256-byte boundary, v_null's chunk sums (H x chunks x D doubles) */
static int polar__vn_chunks(int B, int T)
{
    return (int)(((long)B * T + POLAR__VNR - 1) / POLAR__VNR);
}
static size_t polar__vn_offset(int B, int H, int T, int D)
{
    size_t f = (size_t)B * H * T * ((size_t)D + POLAR__NROW) * sizeof(float);
    return (f + 255) / 256 * 256;
}

POLARDEF size_t polar_workspace_size_cuda(const polar_config *cfg, int B, int H, int Hkv, int T,
                                          int D)
{
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, T, D)) return 0;
    return polar__vn_offset(B, H, T, D) +
           (size_t)H * polar__vn_chunks(B, T) * D * sizeof(double) + 256;
}

POLARDEF int polar_forward_cuda(const polar_config *cfg, float *c, float *mag, polar_state *st,
                                const float *q, const float *k, const float *v,
                                const polar_params *prm, int B, int H, int Hkv, int T, int D,
                                void *workspace, polar_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc = polar__cu_check(cfg, B, H, Hkv, T, D), nqb;
    (void)workspace; /* the forward needs none */
    if (rc != POLAR_OK) return rc;
    if (!st || !polar__cu_dev(c) || !polar__cu_dev(mag) || !polar__cu_dev(st->stats) ||
        !polar__cu_dev(q) || !polar__cu_dev(k) || !polar__cu_dev(v) || !polar__cu_params(prm))
        return POLAR_EINVAL;
    (void)cudaGetLastError(); /* report only this call's launch */
    if (cfg->math != POLAR_MATH_FP32) {
        nqb = (T + POLAR__TR - 1) / POLAR__TR;
        return POLAR__TC_CALL(polar__tc_fwd, cfg->math, D, s, (unsigned)nqb * (unsigned)(B * H), c, mag,
                              st->stats, q, k, v, prm, H, Hkv, T, cfg, nqb);
    }
    nqb = (T + POLAR__CQ - 1) / POLAR__CQ;
    POLAR__LAUNCH_D(polar__k_fwd, D, (unsigned)nqb * (unsigned)(B * H), POLAR__CT, s, c, mag,
                    st->stats, q, k, v, prm->len_gain_raw, prm->null_base, prm->null_slope_raw,
                    prm->mag_beta_raw, prm->v_null, H, Hkv, T, cfg->window, cfg->norm_eps,
                    cfg->stat_floor, nqb);
    return polar__cu_launched();
}

POLARDEF int polar_backward_cuda(const polar_config *cfg, float *dq, float *dk, float *dv,
                                 polar_grads *grads, const float *dc, const float *dmag,
                                 const float *c, const float *mag, const polar_state *st,
                                 const float *q, const float *k, const float *v,
                                 const polar_params *prm, int B, int H, int Hkv, int T, int D,
                                 void *workspace, polar_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc = polar__cu_check(cfg, B, H, Hkv, T, D), nqb, nkb;
    size_t nrows = (size_t)B * H * T;
    float *ws = (float *)workspace, *rows, *dsall;
    float *glg = NULL, *gnb = NULL, *gns = NULL, *gmb = NULL, *gvn = NULL;
    if (rc != POLAR_OK) return rc;
    if (!st || !polar__cu_dev(dq) || !polar__cu_dev(dk) || !polar__cu_dev(dv) ||
        !polar__cu_dev(dc) || !polar__cu_dev(c) || !polar__cu_dev(mag) ||
        !polar__cu_dev(st->stats) || !polar__cu_dev(q) || !polar__cu_dev(k) ||
        !polar__cu_dev(v) || !polar__cu_params(prm) || (dmag && !polar__cu_dev(dmag)))
        return POLAR_EINVAL;
    if (grads) {
        glg = grads->len_gain_raw;
        gnb = grads->null_base;
        gns = grads->null_slope_raw;
        gmb = grads->mag_beta_raw;
        gvn = grads->v_null;
        if ((glg && !polar__cu_dev(glg)) || (gnb && !polar__cu_dev(gnb)) ||
            (gns && !polar__cu_dev(gns)) || (gmb && !polar__cu_dev(gmb)) ||
            (gvn && !polar__cu_dev(gvn)))
            return POLAR_EINVAL;
    }
    if (ws && !polar__cu_dev(ws)) return POLAR_EINVAL;
    (void)cudaGetLastError();
    if (!ws && cudaMallocAsync((void **)&ws, polar_workspace_size_cuda(cfg, B, H, Hkv, T, D), s) !=
                   cudaSuccess) {
        (void)cudaGetLastError();
        return POLAR_ENOMEM;
    }
    rows = ws;
    dsall = rows + nrows * POLAR__NROW;
    nqb = (T + POLAR__CQ - 1) / POLAR__CQ;
    nkb = (T + POLAR__CKB - 1) / POLAR__CKB;
    POLAR__LAUNCH(polar__k_bwd_pre, (unsigned)((nrows + POLAR__CT - 1) / POLAR__CT), POLAR__CT, 0,
                  s, rows, dsall, dc, dmag, c, mag, st->stats, prm->len_gain_raw, prm->null_base,
                  prm->null_slope_raw, prm->mag_beta_raw, prm->v_null, H, T, D, cfg->window,
                  cfg->norm_eps, cfg->stat_floor, nrows);
    rc = polar__cu_launched();
    if (rc == POLAR_OK && cfg->math != POLAR_MATH_FP32) {
        int nqt = (T + POLAR__TR - 1) / POLAR__TR;
        rc = POLAR__TC_CALL(polar__tc_bwd, cfg->math, D, s, (unsigned)nqt * (unsigned)(B * H),
                            (unsigned)nqt * (unsigned)(B * Hkv), dq, dk, dv, rows, q, k, v,
                            (const float *)dsall, H, Hkv, T, cfg->window, nqt, nqt);
    } else if (rc == POLAR_OK) {
        POLAR__LAUNCH_D(polar__k_bwd_q, D, (unsigned)nqb * (unsigned)(B * H), POLAR__CT, s, dq,
                        rows, q, k, v, dsall, H, Hkv, T, cfg->window, nqb);
        rc = polar__cu_launched();
        if (rc == POLAR_OK) {
            POLAR__LAUNCH_D(polar__k_bwd_kv, D, (unsigned)nkb * (unsigned)(B * Hkv), POLAR__CT, s,
                            dk, dv, rows, q, k, v, dsall, H, Hkv, T, cfg->window, nkb);
            rc = polar__cu_launched();
        }
    }
    if (rc == POLAR_OK && (glg || gnb || gns || gmb)) {
        POLAR__LAUNCH(polar__k_bwd_prm, (unsigned)H, POLAR__CT, 0, s, glg, gnb, gns, gmb,
                      (const float *)rows, prm->len_gain_raw, prm->null_slope_raw, B, H, T,
                      cfg->window);
        rc = polar__cu_launched();
    }
    if (rc == POLAR_OK && gvn) {
        const int nch = polar__vn_chunks(B, T);
        double *part = (double *)(void *)((char *)ws + polar__vn_offset(B, H, T, D));
        POLAR__LAUNCH(polar__k_bwd_vn_part, (unsigned)H * (unsigned)nch, POLAR__CT, 0, s,
                      part, (const float *)rows, (const float *)dsall, B, H, T, D, nch);
        rc = polar__cu_launched();
        if (rc == POLAR_OK) {
            POLAR__LAUNCH(polar__k_bwd_vn_sum, (unsigned)H, POLAR__CT, 0, s, gvn,
                          (const double *)part, D, nch);
            rc = polar__cu_launched();
        }
    }
    if (!workspace) cudaFreeAsync(ws, s);
    return rc;
}

POLARDEF int polar_decode_cuda(const polar_config *cfg, float *c, float *mag, const float *q,
                               const float *k_cache, const float *v_cache,
                               const int *block_table, const int *seq_lens,
                               const polar_params *prm, int B, int H, int Hkv, int D,
                               int block_size, int num_blocks, int max_blocks,
                               polar_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc = polar__cu_check(cfg, B, H, Hkv, 1, D), G;
    if (rc != POLAR_OK) return rc;
    if (block_size < 1 || num_blocks < 1 || max_blocks < 1) return POLAR_EINVAL;
    if ((double)num_blocks * Hkv * block_size * D > (double)SIZE_MAX / 8) return POLAR_EINVAL;
    if ((double)B * max_blocks > (double)INT_MAX || (double)B * Hkv > (double)INT_MAX)
        return POLAR_EINVAL;
    if (!polar__cu_dev(c) || !polar__cu_dev(mag) || !polar__cu_dev(q) ||
        !polar__cu_dev(k_cache) || !polar__cu_dev(v_cache) || !polar__cu_dev(block_table) ||
        !polar__cu_dev(seq_lens) || !polar__cu_params(prm))
        return POLAR_EINVAL;
    G = H / Hkv;
    (void)cudaGetLastError();
    POLAR__LAUNCH_D(polar__k_decode, D,
                    dim3((unsigned)(B * Hkv), (unsigned)((G + POLAR__CQ - 1) / POLAR__CQ)),
                    POLAR__CT, s, c, mag, q, k_cache, v_cache, block_table, seq_lens,
                    prm->len_gain_raw, prm->null_base, prm->null_slope_raw, prm->mag_beta_raw,
                    prm->v_null, H, Hkv, block_size, num_blocks, max_blocks, cfg->window,
                    cfg->norm_eps, cfg->stat_floor);
    return polar__cu_launched();
}

/* ------------------------------------------------------------ distractor loss (host) */
POLARDEF size_t polar_distractor_workspace_size_cuda(const polar_config *cfg, int B, int H,
                                                     int T)
{
    size_t R;
    if (!cfg || cfg->distractor_keys < 0 || cfg->distractor_keys > POLAR_MAX_DISTRACTOR_KEYS || B < 1 || H < 1 || T < 1)
        return 0;
    if ((double)B * H * T * ((double)cfg->distractor_keys + 3) * 8.0 > (double)SIZE_MAX / 4) return 0;
    R = (size_t)cfg->distractor_keys;
    return (size_t)B * H * T * (R + 3) * sizeof(double) + 256;
}

/* dims, config and the device pointers both directions share */
static int polar__cu_dist_check(const polar_config *cfg, const float *q, const float *k_rand,
                                const polar_params *prm, int B, int H, int Hkv, int T, int D,
                                const void *workspace)
{
    if (!polar__check_cfg(cfg) || !polar__check_dims(B, H, Hkv, T, D)) return POLAR_EINVAL;
    if (cfg->distractor_keys < 0 || cfg->distractor_keys > POLAR_MAX_DISTRACTOR_KEYS) return POLAR_EINVAL;
    if (!polar__cu_dev(q) || !polar__cu_params(prm)) return POLAR_EINVAL;
    if (cfg->distractor_keys > 0 && !polar__cu_dev(k_rand)) return POLAR_EINVAL;
    if (workspace && !polar__cu_dev(workspace)) return POLAR_EINVAL;
    if ((double)B * Hkv * cfg->distractor_keys * D > (double)INT_MAX * POLAR__CT) return POLAR_EINVAL;
    return POLAR_OK;
}

/* the row kernel, into a caller's or a stream-ordered workspace; *wsp receives it */
static int polar__cu_dist_rows(const polar_config *cfg, void **wsp, float *dq, const float *q,
                               const float *k_rand, const polar_params *prm, int B, int H,
                               int Hkv, int T, int D, double coef, cudaStream_t s)
{
    const long nrows = (long)B * H * T;
    double *ws = (double *)*wsp;
    if (!ws) {
        if (cudaMallocAsync((void **)&ws, polar_distractor_workspace_size_cuda(cfg, B, H, T), s) !=
            cudaSuccess) {
            (void)cudaGetLastError();
            return POLAR_ENOMEM;
        }
        *wsp = ws;
    }
    POLAR__LAUNCH(polar__k_dist_row, (unsigned)((nrows + POLAR__CT - 1) / POLAR__CT), POLAR__CT, 0, s,
                  ws, ws + 3 * nrows, dq, q, k_rand, prm->len_gain_raw, prm->null_base,
                  prm->null_slope_raw, H, Hkv, T, D, cfg->distractor_keys, polar__dist_window(cfg), coef, nrows);
    return polar__cu_launched();
}

POLARDEF int polar_distractor_forward_cuda(const polar_config *cfg, float *loss, const float *q,
                                           const float *k_rand, const polar_params *prm, int B,
                                           int H, int Hkv, int T, int D, void *workspace,
                                           polar_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    void *ws = workspace;
    int rc;
    if (!polar__cu_dev(loss)) return POLAR_EINVAL;
    rc = polar__cu_dist_check(cfg, q, k_rand, prm, B, H, Hkv, T, D, workspace);
    if (rc != POLAR_OK) return rc;
    (void)cudaGetLastError();
    if (cfg->distractor_keys == 0) /* off: the loss is 0, as on the CPU */
        return cudaMemsetAsync(loss, 0, sizeof(float), s) == cudaSuccess ? POLAR_OK : POLAR_ECUDA;
    rc = polar__cu_dist_rows(cfg, &ws, NULL, q, k_rand, prm, B, H, Hkv, T, D, 0.0, s);
    if (rc == POLAR_OK) {
        const long nrows = (long)B * H * T;
        POLAR__LAUNCH(polar__k_dist_loss, 1, POLAR__CT, 0, s, loss, (const double *)ws, nrows,
                      (double)cfg->distractor_weight / polar__dist_count(cfg, (double)nrows));
        rc = polar__cu_launched();
    }
    if (ws && !workspace) cudaFreeAsync(ws, s);
    return rc;
}

POLARDEF int polar_distractor_backward_cuda(const polar_config *cfg, float *dq, float *dk_rand,
                                            polar_grads *grads, float dloss, const float *q,
                                            const float *k_rand, const polar_params *prm, int B,
                                            int H, int Hkv, int T, int D, void *workspace,
                                            polar_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    void *ws = workspace;
    float *glg = grads ? grads->len_gain_raw : NULL, *gnb = grads ? grads->null_base : NULL;
    float *gns = grads ? grads->null_slope_raw : NULL;
    const long nrows = (long)B * H * T;
    int rc;
    if (!polar__cu_dev(dq) || !polar__finite(dloss)) return POLAR_EINVAL;
    rc = polar__cu_dist_check(cfg, q, k_rand, prm, B, H, Hkv, T, D, workspace);
    if (rc != POLAR_OK) return rc;
    if ((dk_rand && !polar__cu_dev(dk_rand)) || (glg && !polar__cu_dev(glg)) ||
        (gnb && !polar__cu_dev(gnb)) || (gns && !polar__cu_dev(gns)))
        return POLAR_EINVAL;
    if (cfg->distractor_keys == 0) return POLAR_OK;
    (void)cudaGetLastError();
    rc = polar__cu_dist_rows(cfg, &ws, dq, q, k_rand, prm, B, H, Hkv, T, D,
                             (double)dloss * cfg->distractor_weight / polar__dist_count(cfg, (double)nrows),
                             s);
    if (cfg->distractor_mode == POLAR_DISTRACTOR_SEED) dk_rand = NULL; /* detached, as the CPU */
    if (rc == POLAR_OK && (glg || gnb || gns)) {
        POLAR__LAUNCH(polar__k_dist_prm, (unsigned)H, POLAR__CT, 0, s, glg, gnb, gns,
                      (const double *)ws, B, H, T);
        rc = polar__cu_launched();
    }
    if (rc == POLAR_OK && dk_rand) {
        const long ne = (long)B * Hkv * cfg->distractor_keys * D;
        POLAR__LAUNCH(polar__k_dist_dk, (unsigned)((ne + POLAR__CT - 1) / POLAR__CT), POLAR__CT, 0, s,
                      dk_rand, (const double *)ws + 3 * nrows, q, B, H, Hkv, T, D,
                      cfg->distractor_keys);
        rc = polar__cu_launched();
    }
    if (ws && !workspace) cudaFreeAsync(ws, s);
    return rc;
}

#undef POLAR__LAUNCH_D
#undef POLAR__TC_CALL
