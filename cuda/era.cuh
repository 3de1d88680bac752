/* cuda/era.cuh - CUDA bodies of era.h's *_cuda entry points (RPA memberships, the RPA
   prior B(T) and its backward, ERA's prior and its backward, era_apply, era_reduce_grad).

   Not a standalone header: era.h includes it at the end of its implementation section
   when compiled by nvcc (ERA_IMPLEMENTATION + __CUDACC__), or by a C++ compiler with
   ATTNKIT_CUDA_SIM (tests/cuda_sim.h included first). It includes nothing from attnkit.
   Every entry point validates its scalar arguments like the CPU path, then checks that
   its buffers are device pointers (cudaPointerGetAttributes; a host pointer is
   ERA_EINVAL and nothing is launched), launches, and returns ERA_ECUDA if a launch or a
   CUDA call fails.

   Kernels (SIMT fp32 storage; statistics, Sinkhorn and reductions in double, as the CPU):
     memberships   one thread per (token, projected unit) for z = W h + b (d in order;
                   32 x 32 output tiles staged through shared memory), one per token for
                   the softmax; backward: one per token for dlogits, one per (regime,
                   unit) / (unit, input) / (token, input) for dcenters, dW (32 x 32 tiles,
                   as z), dh, each walking tokens (or units) in the CPU's order; dlog_sigma:
                   per (regime, unit) shares over the tokens (double), then the units in
                   order per regime.
     RPA prior     batch mean (thread per (t,r)), basis (thread per t), S + Sinkhorn +
                   marginal error in ONE block (R x K is tiny), M = mbar P, the closed-form
                   z-score statistics (prefix sums of the basis: one thread per column of
                   (Phi, t Phi, Phi Phi^T), then one thread per row, then one block sums the
                   rows in a fixed tree: the deterministic two-level reduction), the (T,T)
                   output (one block per row, x = M_i . Phi_j in registers), and the std of
                   the output (row partials + one block).
     RPA backward  two passes over rows (one block per row: sums A, Bs, dtau; then dx and
                   dM_i = sum_j dx_j (1 - posmix) Phi_j, dpos_beta), dmbar = dM P^T, the
                   Sinkhorn backward in one block when cfg->detach = 0, dmu += dmbar / B.
     ERA prior     memberships (thread per t), cost + log-domain Sinkhorn + plan in one
                   block, Q = mu plan and the row statistics (thread per row), the (T,T)
                   bias as a gather of a (T,nb) table; backward: one block per row for dQ,
                   one thread per (r,b) for dplan = mu^T dQ, per-row membership terms, the
                   unrolled Sinkhorn backward in one block (each thread owns one r or b and
                   walks the other index in the CPU's order), dcenters per regime.
   Parity with the CPU path of era.h (tests/parity_era.cu): forward (memberships, B(T),
   ERA bias) rtol 1e-5 / atol 1e-5; gradients rtol 1e-4 / atol 1e-5 relative to the
   largest entry; the statistics (mean, std) within 1e-6 relative (the closed form is the
   CPU's, only the order of the row sum differs).
   Determinism: no atomics; every reduction is one thread walking its inputs in order, or
   a fixed shared-memory tree: bit-identical run to run. */
#ifdef ATTNKIT_CUDA_SIM
#define ERA__LAUNCH(k, g, b, sm, st, ...) ATTNKIT_SIM_LAUNCH(k, g, b, sm, st, __VA_ARGS__)
#define ERA__DSMEM(T, name) AK_SIM_DYNAMIC_SHARED(T, name)
#else
#include <cuda_runtime.h>
#define ERA__LAUNCH(k, g, b, sm, st, ...) k<<<(g), (b), (sm), (st)>>>(__VA_ARGS__)
#define ERA__DSMEM(T, name) extern __shared__ __align__(16) unsigned char era__dsmem_[]; T *name = (T *)era__dsmem_
#endif

#define ERA__NT 128 /* threads of the row and reduction blocks (a power of two) */
#define ERA__KC 16  /* basis columns per register chunk in the RPA backward */

/* ------------------------------------------------------------ device helpers */
static __device__ int era__d_fclass(float x)
{
    unsigned u = __float_as_uint(x);
    if ((u & 0x7F800000u) != 0x7F800000u) return 0;
    if (u & 0x007FFFFFu) return 1;
    return (u >> 31) ? 3 : 2;
}
static __device__ int era__d_finite(double x) { return x == x && x - x == 0.0; }

/* sum of v over the block (blockDim.x == ERA__NT), fixed tree; every thread calls it */
static __device__ double era__d_bsum(double v, double *sh)
{
    int t = (int)threadIdx.x, s;
    double r;
    sh[t] = v;
    __syncthreads();
    for (s = ERA__NT / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    r = sh[0];
    __syncthreads();
    return r;
}

/* v[0..nv) summed over the block in one fixed tree (the same per value as era__d_bsum);
   sh: nv * ERA__NT doubles; every thread calls it */
static __device__ void era__d_bsumv(double *v, int nv, double *sh)
{
    int t = (int)threadIdx.x, s, c;
    for (c = 0; c < nv; c++) sh[c * ERA__NT + t] = v[c];
    __syncthreads();
    for (s = ERA__NT / 2; s > 0; s >>= 1) {
        if (t < s)
            for (c = 0; c < nv; c++) sh[c * ERA__NT + t] += sh[c * ERA__NT + t + s];
        __syncthreads();
    }
    for (c = 0; c < nv; c++) v[c] = sh[c * ERA__NT];
    __syncthreads();
}

/* x_ij of the RPA prior (non-legacy): M_i . Phi_j, then the position mix */
static __device__ float era__d_rpa_x(const float *Mi, const float *phiT, int T, int K, int i,
                                     int j, float keep, float cpos, int mix)
{
    float out = 0.0f;
    int k = 0;
    for (; k + 4 <= K; k += 4) {
        const float *p0 = phiT + (size_t)k * T + j;
        float v = Mi[k] * p0[0] + Mi[k + 1] * p0[T] + Mi[k + 2] * p0[2 * (size_t)T] +
                  Mi[k + 3] * p0[3 * (size_t)T];
        out = k == 0 ? v : out + v;
    }
    for (; k < K; k++) out += Mi[k] * phiT[(size_t)k * T + j];
    if (mix) out = keep * out + cpos * (float)(i > j ? i - j : j - i);
    return out;
}

/* ------------------------------------------------------------ host helpers */
static int era__cuda_check(cudaError_t e) { return e == cudaSuccess ? (int)ERA_OK : (int)ERA_ECUDA; }
static int era__launched(void) { return era__cuda_check(cudaGetLastError()); }
static unsigned era__nblk(size_t n, unsigned t)
{
    size_t b = (n + t - 1) / t;
    return (unsigned)(b < 1 ? 1 : (b > 2147483647u ? 2147483647u : b));
}
/* 1 if p is device (or managed) memory */
static int era__is_dev(const void *p)
{
    cudaPointerAttributes a;
    if (!p) return 0;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}
/* NULL-or-device */
static int era__is_dev_or_null(const void *p) { return !p || era__is_dev(p); }
static int era__dreserve(void **mem, size_t *cap, size_t n)
{
    if (*mem && *cap >= n) return ERA_OK;
    if (*mem) cudaFree(*mem);
    *mem = NULL;
    *cap = 0;
    if (cudaMalloc(mem, n ? n : 1) != cudaSuccess) {
        (void)cudaGetLastError();
        *mem = NULL;
        return ERA_ENOMEM;
    }
    *cap = n;
    return ERA_OK;
}
static int era__dtmp(void **p, size_t n, cudaStream_t s)
{
    if (cudaMallocAsync(p, n ? n : 1, s) != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return ERA_ENOMEM;
    }
    return ERA_OK;
}

/* The memberships' temporaries (the forward's statistics partials, the backward's
   workspace when the caller gives none and its log-sigma partials) come from one cached
   buffer per (device, stream), grown on demand with cudaMalloc and kept until
   era_cuda_release: a call in steady state allocates nothing. A call takes its whole
   scratch in one request and uses it only through work queued on its stream: the next
   call on that stream runs after it; growing (or evicting a slot when more than
   ERA__SCRATCH_SLOTS (device, stream) pairs are used) frees the old buffer with cudaFree,
   which waits for the device. Process state: device calls from several host threads at
   once are not supported; destroy a stream only once its work is done. */
#define ERA__SCRATCH_SLOTS 8
typedef struct era__scratch_slot {
    int dev;
    cudaStream_t s;
    void *p;
    size_t bytes;
} era__scratch_slot;
static era__scratch_slot era__scratch[ERA__SCRATCH_SLOTS];
static int era__nscratch = 0;

static void era__scratch_drop(era__scratch_slot *e)
{
    int cur = 0;
    if (e->p) {
        if (cudaGetDevice(&cur) == cudaSuccess && cur != e->dev && cudaSetDevice(e->dev) == cudaSuccess) {
            (void)cudaFree(e->p);
            (void)cudaSetDevice(cur);
        } else {
            (void)cudaFree(e->p);
        }
        (void)cudaGetLastError();
    }
    e->p = NULL;
    e->bytes = 0;
}

/* *out = at least n bytes of device scratch for work queued on s */
static int era__scratch_get(void **out, size_t n, cudaStream_t s)
{
    era__scratch_slot *e = NULL;
    int dev = 0, i;
    *out = NULL;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return ERA_ECUDA;
    }
    for (i = 0; i < era__nscratch && !e; i++)
        if (era__scratch[i].dev == dev && era__scratch[i].s == s) e = &era__scratch[i];
    if (!e) {
        if (era__nscratch < ERA__SCRATCH_SLOTS) {
            e = &era__scratch[era__nscratch++];
        } else { /* the oldest slot goes; the others move up */
            era__scratch_drop(&era__scratch[0]);
            memmove(&era__scratch[0], &era__scratch[1], (ERA__SCRATCH_SLOTS - 1) * sizeof(era__scratch_slot));
            e = &era__scratch[ERA__SCRATCH_SLOTS - 1];
        }
        e->dev = dev;
        e->s = s;
        e->p = NULL;
        e->bytes = 0;
    }
    if (e->bytes < n) {
        size_t nb = n < 256 ? 256 : (n + 255) / 256 * 256;
        era__scratch_drop(e);
        if (cudaMalloc(&e->p, nb) != cudaSuccess) {
            (void)cudaGetLastError();
            e->p = NULL;
            return ERA_ENOMEM;
        }
        e->bytes = nb;
    }
    *out = e->p;
    return ERA_OK;
}

ERADEF int era_cuda_release(void)
{
    int i, rc = ERA_OK;
    if (!era__nscratch) return ERA_OK;
    if (cudaDeviceSynchronize() != cudaSuccess) {
        (void)cudaGetLastError();
        rc = ERA_ECUDA;
    }
    for (i = 0; i < era__nscratch; i++) era__scratch_drop(&era__scratch[i]);
    era__nscratch = 0;
    return rc;
}

ERADEF int era_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

ERADEF era_rpa_cuda_state era_rpa_cuda_state_init(void)
{
    era_rpa_cuda_state s;
    memset(&s, 0, sizeof s);
    return s;
}
ERADEF void era_rpa_cuda_state_free(era_rpa_cuda_state *st)
{
    if (!st) return;
    if (st->dmem) cudaFree(st->dmem);
    memset(st, 0, sizeof *st);
}
ERADEF era_era_cuda_state era_era_cuda_state_init(void)
{
    era_era_cuda_state s;
    memset(&s, 0, sizeof s);
    return s;
}
ERADEF void era_era_cuda_state_free(era_era_cuda_state *st)
{
    if (!st) return;
    if (st->dmem) cudaFree(st->dmem);
    memset(st, 0, sizeof *st);
}

/* ============================================================ memberships */
static __device__ float era__d_inv2sig2(float ls, float lo, float hi, int *fr)
{
    double v = exp(-2.0 * (double)ls);
    int f = 1;
    if (!(v >= lo)) { v = lo; f = 0; }
    if (v > hi) { v = hi; f = 0; }
    if (fr) *fr = f;
    return (float)v;
}

/* z (n,P) = W h + b: each output is b then the products over d in order (one thread per
   (token, unit), as before), computed in 32 x 32 tiles (blockIdx.x: 32 tokens, blockIdx.y:
   32 units; block (32, 8), 4 tokens per thread) from h and W chunks of 32 inputs staged in
   shared memory: one thread per output reading W[q] rows directly touched 32 cache lines
   per warp load (P = D = 510: tens of ms per call). */
#define ERA__PT 32
static __global__ void era__k_proj(float *z, const float *h, const float *W, const float *b,
                                   long long n, int D, int P)
{
    __shared__ float sw[ERA__PT][ERA__PT + 1], sh[ERA__PT][ERA__PT + 1];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y, q0 = (int)blockIdx.y * ERA__PT, q = q0 + tx;
    const long long i0 = (long long)blockIdx.x * ERA__PT;
    float acc[ERA__PT / 8];
    int d0, dd, k, nd;
    for (k = 0; k < ERA__PT / 8; k++) acc[k] = (b && q < P) ? b[q] : 0.0f;
    for (d0 = 0; d0 < D; d0 += ERA__PT) {
        nd = D - d0 < ERA__PT ? D - d0 : ERA__PT;
        for (k = 0; k < ERA__PT / 8; k++) {
            const int r = ty + 8 * k;
            const long long i = i0 + r;
            sw[r][tx] = (q0 + r < P && tx < nd) ? W[(size_t)(q0 + r) * D + d0 + tx] : 0.0f;
            sh[r][tx] = (i < n && tx < nd) ? h[(size_t)i * D + d0 + tx] : 0.0f;
        }
        __syncthreads();
        for (dd = 0; dd < nd; dd++) {
            const float w = sw[tx][dd];
            for (k = 0; k < ERA__PT / 8; k++) acc[k] += sh[ty + 8 * k][dd] * w;
        }
        __syncthreads();
    }
    if (q < P)
        for (k = 0; k < ERA__PT / 8; k++) {
            const long long i = i0 + ty + 8 * k;
            if (i < n) z[(size_t)i * P + q] = acc[k];
        }
}

/* mu (n,R) per token; tok (n,3) doubles: entropy, saturated, NaN row (stats) */
static __global__ void era__k_mu(float *mu, double *tok, const float *z, const float *centers,
                                 const float *log_sigma, long long n, int P, int R, float lclamp,
                                 float lo, float hi, float efloor, float sat)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const float *zi;
    float *m;
    double mx = -HUGE_VAL, s = 0.0, H = 0.0, mxv = -1.0;
    int r, q, bad = 0;
    if (i >= n) return;
    zi = z + (size_t)i * P;
    m = mu + (size_t)i * R;
    for (r = 0; r < R; r++) {
        const float *c = centers + (size_t)r * P;
        double d2 = 0.0, lg;
        float s2 = era__d_inv2sig2(log_sigma[r], lo, hi, NULL);
        for (q = 0; q < P; q++) {
            double e = (double)zi[q] - (double)c[q];
            d2 += e * e;
        }
        lg = -0.5 * d2 * (double)s2;
        if (lg != lg) bad = 1;
        if (lg < -lclamp) lg = -lclamp;
        if (lg > lclamp) lg = lclamp;
        m[r] = (float)lg;
        if (lg > mx) mx = lg;
    }
    if (bad) {
        for (r = 0; r < R; r++) m[r] = 1.0f / (float)R;
    } else {
        for (r = 0; r < R; r++) {
            double e = exp((double)m[r] - mx);
            m[r] = (float)e;
            s += e;
        }
        for (r = 0; r < R; r++) m[r] = (float)((double)m[r] / s);
    }
    if (tok) {
        for (r = 0; r < R; r++) {
            double v = m[r], lv = v > efloor ? v : (double)efloor;
            H -= v * log(lv);
            if (v > mxv) mxv = v;
        }
        tok[3 * (size_t)i] = H;
        tok[3 * (size_t)i + 1] = mxv >= sat ? 1.0 : 0.0;
        tok[3 * (size_t)i + 2] = bad ? 1.0 : 0.0;
    }
}

/* out[c] = sum over i of in[i*stride + c], c < ncol, one block, fixed tree */
static __global__ void era__k_colsum(double *out, const double *in, long long n, int stride,
                                     int ncol)
{
    __shared__ double sh[ERA__NT];
    int c;
    for (c = 0; c < ncol; c++) {
        double acc = 0.0, r;
        long long i;
        for (i = threadIdx.x; i < n; i += ERA__NT) acc += in[(size_t)i * stride + c];
        r = era__d_bsum(acc, sh);
        if (threadIdx.x == 0) out[c] = r;
    }
}

/* to[0..2] += from[0..2] (era_membership_forward_sums_cuda's sums) */
static __global__ void era__k_add3(double *to, const double *from)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    to[0] += from[0];
    to[1] += from[1];
    to[2] += from[2];
}

/* both membership calls: the statistics to the host (stats, one wait) or added to the
   device sums (no wait), or neither */
static int era__membership_fwd_cuda(const era_rpa_config *cfg, const era_rpa_params *p,
                                    float *mu, float *zproj, era_mu_stats *stats, double *sums,
                                    const float *h, int B, int T, cudaStream_t s)
{
    int rc, R, D, P;
    long long n;
    double *tok = NULL;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!p || !mu || !zproj || !h || !p->W || !p->centers || !p->log_sigma) return ERA_EINVAL;
    if (B <= 0 || T <= 0 || p->D <= 0 || p->P <= 0) return ERA_EINVAL;
    if (!era__is_dev(mu) || !era__is_dev(zproj) || !era__is_dev(h) || !era__is_dev(p->W) ||
        !era__is_dev_or_null(p->b) || !era__is_dev(p->centers) || !era__is_dev(p->log_sigma))
        return ERA_EINVAL;
    R = cfg->R; D = p->D; P = p->P;
    n = (long long)B * T;
    if ((stats || sums) &&
        (rc = era__scratch_get((void **)&tok, sizeof(double) * (3 * (size_t)n + 3), s)) != ERA_OK)
        return rc;
    ERA__LAUNCH(era__k_proj, dim3(era__nblk((size_t)n, ERA__PT), (unsigned)((P + ERA__PT - 1) / ERA__PT)),
                dim3(ERA__PT, 8), 0, s, zproj, h, p->W, p->b, n, D, P);
    rc = era__launched();
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_mu, era__nblk((size_t)n, 128), 128, 0, s, mu, tok, (const float *)zproj,
                    p->centers, p->log_sigma, n, P, R, cfg->logit_clamp, cfg->inv2sig2_min,
                    cfg->inv2sig2_max, cfg->entropy_floor, cfg->sat_threshold);
        rc = era__launched();
    }
    if (rc == ERA_OK && (stats || sums)) {
        ERA__LAUNCH(era__k_colsum, 1, ERA__NT, 0, s, tok + 3 * (size_t)n, (const double *)tok, n, 3, 3);
        rc = era__launched();
    }
    if (rc == ERA_OK && sums) {
        ERA__LAUNCH(era__k_add3, 1, 32, 0, s, sums, (const double *)(tok + 3 * (size_t)n));
        rc = era__launched();
    } else if (rc == ERA_OK && stats) {
        double hs[3];
        rc = era__cuda_check(cudaMemcpyAsync(hs, tok + 3 * (size_t)n, sizeof hs, cudaMemcpyDeviceToHost, s));
        if (rc == ERA_OK) rc = era__cuda_check(cudaStreamSynchronize(s));
        if (rc == ERA_OK) {
            stats->entropy = (float)(hs[0] / (double)n);
            stats->sat_frac = (float)(hs[1] / (double)n);
            stats->nan_rows = (int)hs[2];
        }
    }
    return rc;
}

ERADEF int era_membership_forward_cuda(const era_rpa_config *cfg, const era_rpa_params *p,
                                       float *mu, float *zproj, era_mu_stats *stats,
                                       const float *h, int B, int T, era_stream stream)
{
    return era__membership_fwd_cuda(cfg, p, mu, zproj, stats, NULL, h, B, T, (cudaStream_t)stream);
}

ERADEF int era_membership_forward_sums_cuda(const era_rpa_config *cfg, const era_rpa_params *p,
                                            float *mu, float *zproj, double *sums,
                                            const float *h, int B, int T, era_stream stream)
{
    if (!sums || !era__is_dev(sums)) return ERA_EINVAL;
    return era__membership_fwd_cuda(cfg, p, mu, zproj, NULL, sums, h, B, T, (cudaStream_t)stream);
}

/* per token: dd (n,64) gradient on the unclamped logits, dz (n,P) */
static __global__ void era__k_mu_bwd(float *dz, float *dd2, const float *dmu, float dentropy,
                                     const float *z, const float *mu, const float *centers,
                                     const float *log_sigma, long long n, int P, int R,
                                     float lclamp, float lo, float hi, float efloor)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const float *m, *zi;
    float *dzi, *dd;
    double dm[64], dot = 0.0, msum = 0.0;
    int r, q, bad = 0;
    if (i >= n) return;
    m = mu + (size_t)i * R;
    zi = z + (size_t)i * P;
    dzi = dz + (size_t)i * P;
    dd = dd2 + (size_t)i * 64;
    for (r = 0; r < R; r++) {
        double v = dmu ? (double)dmu[(size_t)i * R + r] : 0.0;
        if (dentropy != 0.0f) {
            double mv = m[r];
            if (mv > efloor) v += -(double)dentropy * (log(mv) + 1.0) / (double)n;
            else v += -(double)dentropy * log((double)efloor) / (double)n;
        }
        dm[r] = v;
        dot += v * (double)m[r];
        msum += (double)m[r];
    }
    dot /= msum; /* mu renormalised in double: see era.h's era_membership_backward */
    for (q = 0; q < P; q++) dzi[q] = 0.0f;
    for (r = 0; r < R; r++) {
        const float *c = centers + (size_t)r * P;
        double d2 = 0.0, lg, dl;
        float s2 = era__d_inv2sig2(log_sigma[r], lo, hi, NULL);
        for (q = 0; q < P; q++) {
            double e = (double)zi[q] - (double)c[q];
            d2 += e * e;
        }
        lg = -0.5 * d2 * (double)s2;
        if (lg != lg) { bad = 1; break; }
        dl = (double)m[r] * (dm[r] - dot);
        if (lg < -lclamp || lg > lclamp) dl = 0.0;
        dd[r] = (float)dl;
    }
    if (bad) {
        for (r = 0; r < R; r++) dd[r] = 0.0f;
        return;
    }
    for (r = 0; r < R; r++) {
        const float *c = centers + (size_t)r * P;
        float s2 = era__d_inv2sig2(log_sigma[r], lo, hi, NULL);
        double k = (double)dd[r] * (-0.5 * (double)s2) * 2.0;
        for (q = 0; q < P; q++) dzi[q] += (float)(k * ((double)zi[q] - (double)c[q]));
    }
}

/* dcenters (R,P): one thread per (r,q), tokens in order, float accumulation as the CPU.
   dls (R,P doubles, or NULL): the same thread's share of dlog_sigma[r], the sum over tokens
   of dl (z_q - c_q)^2 in double (era__k_mu_dls adds the shares over q). One thread walking
   every token's P distances for dlog_sigma alone would take n * P dependent steps (tens of
   ms per call at P = 510, B*T = 24576). */
static __global__ void era__k_mu_cen(float *dcenters, double *dls, const float *dd2,
                                     const float *z, const float *centers,
                                     const float *log_sigma, long long n, int P, int R,
                                     float lo, float hi)
{
    int id = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    int r, q;
    long long j;
    float s2, acc = 0.0f;
    double c, sq = 0.0;
    if (id >= R * P) return;
    r = id / P;
    q = id % P;
    s2 = era__d_inv2sig2(log_sigma[r], lo, hi, NULL);
    c = centers[(size_t)r * P + q];
    if (dcenters) acc = dcenters[(size_t)r * P + q];
    for (j = 0; j < n; j++) {
        double dl = dd2[(size_t)j * 64 + r], k, e;
        if (dl == 0.0) continue;
        e = (double)z[(size_t)j * P + q] - c;
        k = dl * (-0.5 * (double)s2) * 2.0;
        acc -= (float)(k * e);
        sq += dl * e * e;
    }
    if (dcenters) dcenters[(size_t)r * P + q] = acc;
    if (dls) dls[id] = sq;
}

/* dlog_sigma[r] += s2 * (the shares of r summed over q in order), unless s2 is clamped:
   the CPU's sum over tokens of dl (-0.5 d2) s2 (-2) */
static __global__ void era__k_mu_dls(float *dlog_sigma, const double *dls, const float *log_sigma,
                                     int P, int R, float lo, float hi)
{
    int r = (int)(blockIdx.x * blockDim.x + threadIdx.x), q, fr;
    double sum = 0.0;
    float s2;
    if (r >= R) return;
    s2 = era__d_inv2sig2(log_sigma[r], lo, hi, &fr);
    if (!fr) return;
    for (q = 0; q < P; q++) sum += dls[(size_t)r * P + q];
    dlog_sigma[r] += (float)(sum * (-0.5) * (double)s2 * -2.0);
}

/* dW (P,D) += dz^T h: each output adds dz[j][q] h[j][d] over the tokens in order (zeros
   skipped, float, as the CPU), in 32 x 32 tiles (blockIdx.x: 32 inputs d, blockIdx.y: 32
   units q; block (32, 8), 4 units per thread) from chunks of 32 tokens of dz and h staged
   in shared memory (one thread per output re-read all of h once per unit: P times). db[q]
   (double, tokens in order) by the first row of threads of the d-tile-0 blocks; dW NULL:
   one d tile, db only. */
static __global__ void era__k_mu_dw(float *dW, float *db, const float *dz, const float *h,
                                    long long n, int D, int P)
{
    __shared__ float sz[ERA__PT][ERA__PT + 1], sh[ERA__PT][ERA__PT + 1];
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y, d = (int)blockIdx.x * ERA__PT + tx;
    const int q0 = (int)blockIdx.y * ERA__PT, do_db = db && blockIdx.x == 0 && ty == 0 && q0 + tx < P;
    float acc[ERA__PT / 8];
    double sb = 0.0;
    long long j0;
    int jj, k, nj;
    for (k = 0; k < ERA__PT / 8; k++) {
        const int q = q0 + ty + 8 * k;
        acc[k] = (dW && q < P && d < D) ? dW[(size_t)q * D + d] : 0.0f;
    }
    for (j0 = 0; j0 < n; j0 += ERA__PT) {
        nj = n - j0 < ERA__PT ? (int)(n - j0) : ERA__PT;
        for (k = 0; k < ERA__PT / 8; k++) {
            const int r = ty + 8 * k;
            sz[r][tx] = (r < nj && q0 + tx < P) ? dz[(size_t)(j0 + r) * P + q0 + tx] : 0.0f;
            sh[r][tx] = (dW && r < nj && d < D) ? h[(size_t)(j0 + r) * D + d] : 0.0f;
        }
        __syncthreads();
        if (dW)
            for (jj = 0; jj < nj; jj++) {
                const float hv = sh[jj][tx];
                for (k = 0; k < ERA__PT / 8; k++) {
                    const float v = sz[jj][ty + 8 * k];
                    if (v != 0.0f) acc[k] += v * hv;
                }
            }
        if (do_db)
            for (jj = 0; jj < nj; jj++) sb += sz[jj][tx];
        __syncthreads();
    }
    if (dW && d < D)
        for (k = 0; k < ERA__PT / 8; k++) {
            const int q = q0 + ty + 8 * k;
            if (q < P) dW[(size_t)q * D + d] = acc[k];
        }
    if (do_db) db[q0 + tx] += (float)sb;
}

/* dh (n,D) += dz W, units in order */
static __global__ void era__k_mu_dh(float *dh, const float *dz, const float *W, long long n,
                                    int D, int P)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t i, d;
    float o;
    int q;
    if (id >= (size_t)n * (size_t)D) return;
    i = id / (size_t)D;
    d = id % (size_t)D;
    o = dh[id];
    for (q = 0; q < P; q++) {
        float v = dz[i * P + q];
        if (v == 0.0f) continue;
        o += v * W[(size_t)q * D + d];
    }
    dh[id] = o;
}

ERADEF int era_membership_backward_cuda(const era_rpa_config *cfg, const era_rpa_params *p,
                                        float *dh, era_rpa_grads *g, const float *dmu,
                                        float dentropy, const float *h, const float *zproj,
                                        const float *mu, int B, int T, void *workspace,
                                        era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc, R, D, P;
    long long n;
    void *sc = NULL;
    double *dls = NULL;
    size_t wsz, dlsz;
    float *dz, *dd2;
    era_rpa_grads gnone;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!g) { /* no parameter gradients, as on the CPU */
        memset(&gnone, 0, sizeof gnone);
        g = &gnone;
    }
    if (!p || !h || !zproj || !mu || !p->W || !p->centers || !p->log_sigma)
        return ERA_EINVAL;
    if (B <= 0 || T <= 0 || p->D <= 0 || p->P <= 0) return ERA_EINVAL;
    if (!era__finite(dentropy)) return ERA_EINVAL;
    if (cfg->R > 64) return ERA_EINVAL;
    if (!era__is_dev(h) || !era__is_dev(zproj) || !era__is_dev(mu) || !era__is_dev(p->W) ||
        !era__is_dev(p->centers) || !era__is_dev(p->log_sigma) || !era__is_dev_or_null(dh) ||
        !era__is_dev_or_null(dmu) || !era__is_dev_or_null(g->dW) ||
        !era__is_dev_or_null(g->db) || !era__is_dev_or_null(g->dcenters) ||
        !era__is_dev_or_null(g->dlog_sigma) || !era__is_dev_or_null(workspace))
        return ERA_EINVAL;
    R = cfg->R; D = p->D; P = p->P;
    n = (long long)B * T;
    /* one scratch: the workspace (when the caller gives none), then the log-sigma partials */
    wsz = workspace ? 0 : (era_membership_workspace_size(p, B, T) + 255) / 256 * 256;
    dlsz = g->dlog_sigma ? sizeof(double) * (size_t)R * P : 0;
    if (wsz + dlsz) {
        if ((rc = era__scratch_get(&sc, wsz + dlsz, s)) != ERA_OK) return rc;
        if (!workspace) workspace = sc;
        if (dlsz) dls = (double *)((char *)sc + wsz);
    }
    era__mu_ws_carve(workspace, (size_t)n, P, &dz, &dd2);
    ERA__LAUNCH(era__k_mu_bwd, era__nblk((size_t)n, 128), 128, 0, s, dz, dd2, dmu, dentropy,
                zproj, mu, p->centers, p->log_sigma, n, P, R, cfg->logit_clamp,
                cfg->inv2sig2_min, cfg->inv2sig2_max, cfg->entropy_floor);
    rc = era__launched();
    if (rc == ERA_OK && (g->dcenters || g->dlog_sigma)) {
        {
            ERA__LAUNCH(era__k_mu_cen, era__nblk((size_t)R * P, 64), 64, 0, s, g->dcenters, dls,
                        (const float *)dd2, zproj, p->centers, p->log_sigma, n, P, R,
                        cfg->inv2sig2_min, cfg->inv2sig2_max);
            rc = era__launched();
        }
        if (rc == ERA_OK && dls) {
            ERA__LAUNCH(era__k_mu_dls, era__nblk((size_t)R, 64), 64, 0, s, g->dlog_sigma,
                        (const double *)dls, p->log_sigma, P, R, cfg->inv2sig2_min, cfg->inv2sig2_max);
            rc = era__launched();
        }
    }
    if (rc == ERA_OK && (g->dW || g->db)) {
        ERA__LAUNCH(era__k_mu_dw, dim3(g->dW ? (unsigned)((D + ERA__PT - 1) / ERA__PT) : 1u,
                                       (unsigned)((P + ERA__PT - 1) / ERA__PT)),
                    dim3(ERA__PT, 8), 0, s, g->dW, g->db, (const float *)dz, h, n, D, P);
        rc = era__launched();
    }
    if (rc == ERA_OK && dh) {
        ERA__LAUNCH(era__k_mu_dh, era__nblk((size_t)n * D, 256), 256, 0, s, dh, (const float *)dz,
                    p->W, n, D, P);
        rc = era__launched();
    }
    return rc;
}

/* ============================================================ RPA prior */
/* mbar (T,R): batch mean, non-finite entries count as 1/R */
static __global__ void era__k_mbar(float *mbar, const float *mu, int B, int T, int R)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t t, r;
    double s = 0.0;
    int b;
    if (id >= (size_t)T * R) return;
    t = id / (size_t)R;
    r = id % (size_t)R;
    for (b = 0; b < B; b++) {
        double v = mu[((size_t)b * T + t) * R + r];
        s += era__d_finite(v) ? v : 1.0 / R;
    }
    mbar[id] = (float)(s / (double)B);
}

/* basis rows phi (T,K) and phiT (K,T), the CPU's formula in double */
static __global__ void era__k_basis(float *phi, float *phiT, int T, int K)
{
    int t = (int)(blockIdx.x * blockDim.x + threadIdx.x), k;
    double w = 1.5 * (double)T / (double)K, s = 0.0;
    float *row;
    if (t >= T) return;
    if (w < 1.0) w = 1.0;
    row = phi + (size_t)t * K;
    for (k = 0; k < K; k++) {
        double c = K > 1 ? (double)k * (double)(T - 1) / (double)(K - 1) : 0.0;
        double d = fabs((double)t - c) / w;
        double v = d <= 1.0 ? 0.5 * (1.0 + cos(3.14159265358979323846 * d)) : 0.0;
        row[k] = (float)v;
        s += (double)row[k];
    }
    for (k = 0; k < K; k++) {
        row[k] = (float)((double)row[k] / (s + 1e-6));
        phiT[(size_t)k * T + t] = row[k];
    }
}

/* S, exp + clamp, Sinkhorn iterations and the marginal error: one block */
static __global__ void era__k_rpa_plan(float *X, double *stats, const float *mbar,
                                       const float *phi, int T, int R, int K, int L,
                                       double tau_a)
{
    __shared__ double sh[ERA__NT];
    int id, it, nclamp = 0;
    double err = 0.0, tot;
    for (id = threadIdx.x; id < R * K; id += ERA__NT) {
        int r = id / K, k = id % K, t;
        double s = 0.0, e;
        for (t = 0; t < T; t++) s += (double)mbar[(size_t)t * R + r] * phi[(size_t)t * K + k];
        e = exp(s / tau_a);
        if (e < 1e-9 || e > 1e9 || e != e) nclamp++;
        if (e < 1e-9) e = 1e-9;
        if (e > 1e9) e = 1e9;
        X[id] = (float)e;
    }
    __syncthreads();
    for (it = 0; it < L; it++) {
        const float *X0 = X + (size_t)(2 * it) * R * K;
        float *X1 = X + (size_t)(2 * it + 1) * R * K;
        float *X2 = X + (size_t)(2 * it + 2) * R * K;
        int r, k;
        for (r = threadIdx.x; r < R; r += ERA__NT) {
            double s = 0.0;
            for (k = 0; k < K; k++) s += X0[(size_t)r * K + k];
            for (k = 0; k < K; k++) X1[(size_t)r * K + k] = (float)(X0[(size_t)r * K + k] / (s + 1e-9));
        }
        __syncthreads();
        for (k = threadIdx.x; k < K; k += ERA__NT) {
            double s = 0.0;
            for (r = 0; r < R; r++) s += X1[(size_t)r * K + k];
            for (r = 0; r < R; r++) X2[(size_t)r * K + k] = (float)(X1[(size_t)r * K + k] / (s + 1e-9));
        }
        __syncthreads();
    }
    {
        const float *Pm = X + (size_t)(2 * L) * R * K;
        int r, k;
        for (r = threadIdx.x; r < R; r += ERA__NT) {
            double s = 0.0;
            for (k = 0; k < K; k++) s += Pm[(size_t)r * K + k];
            s = fabs(s - (double)K / (double)R);
            if (s > err || s != s) err = s;
        }
        for (k = threadIdx.x; k < K; k += ERA__NT) {
            double s = 0.0;
            for (r = 0; r < R; r++) s += Pm[(size_t)r * K + k];
            s = fabs(s - 1.0);
            if (s > err || s != s) err = s;
        }
    }
    /* max of err over the block (NaN wins) and the clamp count */
    sh[threadIdx.x] = err;
    __syncthreads();
    if (threadIdx.x == 0) {
        int i;
        double m = 0.0;
        for (i = 0; i < ERA__NT; i++)
            if (sh[i] > m || sh[i] != sh[i]) m = sh[i];
        stats[5] = m;
    }
    __syncthreads();
    tot = era__d_bsum((double)nclamp, sh);
    if (threadIdx.x == 0) stats[6] = tot / (double)(R * K);
}

/* M (T,K) = mbar P, r in order */
static __global__ void era__k_rpa_M(float *M, const float *mbar, const float *X, int T, int R,
                                    int K, int L)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t t, k;
    const float *Pm = X + (size_t)(2 * L) * R * K;
    float acc = 0.0f;
    int r;
    if (id >= (size_t)T * K) return;
    t = id / (size_t)K;
    k = id % (size_t)K;
    for (r = 0; r < R; r++) acc += mbar[t * R + r] * Pm[(size_t)r * K + k];
    M[id] = acc;
}

/* prefix sums over t of C = 2K + K^2 columns (Phi_k, t Phi_k, Phi_k Phi_l), inclusive:
   pre (T,C); one thread per column walks t in order (the CPU's order) */
static __global__ void era__k_rpa_prefix(double *pre, const float *phi, int T, int K)
{
    int C = 2 * K + K * K, c = (int)(blockIdx.x * blockDim.x + threadIdx.x), t;
    double acc = 0.0;
    if (c >= C) return;
    for (t = 0; t < T; t++) {
        const float *ph = phi + (size_t)t * K;
        double v;
        if (c < K) v = ph[c];
        else if (c < 2 * K) v = (double)t * ph[c - K];
        else v = (double)ph[(c - 2 * K) / K] * ph[(c - 2 * K) % K];
        acc += v;
        pre[(size_t)t * C + c] = acc;
    }
}

/* row i's share of sum x and sum x^2 over the statistics set (closed form) */
static __global__ void era__k_rpa_rowstat(double *part, const double *pre, const float *M, int T,
                                          int K, int causal, double keep, double cpos)
{
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x), k, l, C = 2 * K + K * K;
    const double *Pi, *Pl;
    const float *Mi;
    double di, a, D, D2, ms = 0.0, mgm = 0.0, me = 0.0;
    if (i >= T) return;
    Pi = pre + (size_t)i * C;
    Pl = pre + (size_t)(T - 1) * C;
    Mi = M + (size_t)i * K;
    di = (double)i;
    a = (double)(T - 1 - i);
    D = 0.5 * di * (di + 1.0);
    D2 = di * (di + 1.0) * (2.0 * di + 1.0) / 6.0;
    if (!causal) {
        D += 0.5 * a * (a + 1.0);
        D2 += a * (a + 1.0) * (2.0 * a + 1.0) / 6.0;
    }
    for (k = 0; k < K; k++) {
        double P0 = Pi[k], P1 = Pi[K + k], T0 = Pl[k], T1 = Pl[K + k];
        double Sk = causal ? P0 : T0;
        double Ek = di * P0 - P1, g = 0.0;
        const double *Gs = (causal ? Pi : Pl) + 2 * K + (size_t)k * K;
        if (!causal) Ek += (T1 - P1) - di * (T0 - P0);
        for (l = 0; l < K; l++) g += Gs[l] * Mi[l];
        ms += (double)Mi[k] * Sk;
        me += (double)Mi[k] * Ek;
        mgm += (double)Mi[k] * g;
    }
    part[2 * (size_t)i] = keep * ms + cpos * D;
    part[2 * (size_t)i + 1] = keep * keep * mgm + 2.0 * keep * cpos * me + cpos * cpos * D2;
}

/* mean/std (which = 0: stats[0], [1], [2], [3] = std_pre) or the output std (which = 1:
   stats[4]) from row partials part (T,2), one block */
static __global__ void era__k_rpa_stat(double *stats, const double *part, int T, int causal,
                                       int which)
{
    __shared__ double sh[ERA__NT];
    double s = 0.0, s2 = 0.0, n, var;
    int i;
    for (i = threadIdx.x; i < T; i += ERA__NT) {
        s += part[2 * (size_t)i];
        s2 += part[2 * (size_t)i + 1];
    }
    s = era__d_bsum(s, sh);
    s2 = era__d_bsum(s2, sh);
    if (threadIdx.x != 0) return;
    n = causal ? 0.5 * (double)T * (double)(T + 1) : (double)T * (double)T;
    var = n > 1.0 ? (s2 - s * s / n) / (n - 1.0) : 0.0;
    if (var < 0.0) var = 0.0;
    if (which == 0) {
        stats[0] = s / n;
        stats[1] = sqrt(var);
        stats[2] = n;
        stats[3] = sqrt(var);
    } else {
        stats[4] = sqrt(var);
    }
}

/* bias rows [row0, row0 + gridDim.x) into out (nrows,T); part (T,2): the sums of the
   output over the statistics set (NULL: not wanted) */
static __global__ void era__k_rpa_out(float *out, double *part, const float *M, const float *phiT,
                                      const double *stats, int T, int K, int row0, int causal,
                                      float keep, float cpos, int mix, float clip, float tau,
                                      float scale, float zeps)
{
    __shared__ double sh[2 * ERA__NT];
    int i = row0 + (int)blockIdx.x, j, jn = causal ? i + 1 : T;
    const float *Mi = M + (size_t)i * K;
    float *row = out + (size_t)blockIdx.x * T;
    double mean = stats[0], sd = stats[1], s = 0.0, s2 = 0.0;
    int few = stats[2] < 2.0;
    float m = (float)mean, id = (float)(1.0 / (sd + (double)zeps)), it = 1.0f / tau;
    for (j = threadIdx.x; j < T; j += ERA__NT) {
        float x = era__d_rpa_x(Mi, phiT, T, K, i, j, keep, cpos, mix), y, v;
        int cls;
        if (few) {
            y = 0.0f;
        } else {
            y = (x - m) * id;
            cls = era__d_fclass(y);
            if (cls) y = cls == 1 ? 0.0f : (cls == 2 ? clip : -clip);
        }
        v = y * it;
        v = v > clip ? clip : (v < -clip ? -clip : v);
        row[j] = v * scale;
        if (j < jn) {
            s += (double)row[j];
            s2 += (double)row[j] * row[j];
        }
    }
    if (!part) return; /* uniform over the block: no barrier skipped by a subset */
    {
        double v[2];
        v[0] = s;
        v[1] = s2;
        era__d_bsumv(v, 2, sh);
        if (threadIdx.x == 0) {
            part[2 * (size_t)i] = v[0];
            part[2 * (size_t)i + 1] = v[1];
        }
    }
}

static size_t era__rpa_cuda_state_bytes(int T, int R, int K, int L)
{
    return era__rpa_state_bytes(T, R, K, L) + era__align(sizeof(float) * (size_t)T * K) +
           era__align(sizeof(double) * 8);
}

ERADEF size_t era_rpa_cuda_workspace_size(const era_rpa_config *cfg, int B, int T)
{
    size_t K, R, pre, bwd;
    (void)B;
    if (!cfg || T <= 0 || cfg->R <= 0) return 0;
    K = (size_t)era__rpa_K(cfg);
    R = (size_t)cfg->R;
    /* forward: row partials (T,2) + prefix table (T, 2K + K^2); backward: row partials
       (T,6), dM (T,K) floats, dmbar (T,R), dP and dX (R,K), 4 scalars (doubles) */
    pre = era__align(sizeof(double) * 2 * (size_t)T) +
          era__align(sizeof(double) * (size_t)T * (2 * K + K * K));
    bwd = era__align(sizeof(double) * 6 * (size_t)T) + era__align(sizeof(float) * (size_t)T * K) +
          era__align(sizeof(double) * (size_t)T * R) + 2 * era__align(sizeof(double) * R * K) +
          era__align(sizeof(double) * 8);
    return pre > bwd ? pre : bwd;
}

ERADEF int era_rpa_forward_cuda(const era_rpa_config *cfg, const era_rpa_params *p,
                                const float *mu, int B, int T, float *bias,
                                era_rpa_cuda_state *st, void *workspace, era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc, R, K, L, C;
    void *own = NULL;
    char *q;
    double *part, *pre, keep = 1.0, cpos = 0.0;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!p || !mu || !st) return ERA_EINVAL;
    if (B <= 0) return ERA_EINVAL;
    rc = era__check_T(T, cfg->max_T);
    if (rc) return rc;
    if (!era__finite(p->tau_att) || !era__finite(p->pos_beta) || !era__finite(p->kappa))
        return ERA_EINVAL;
    if (cfg->legacy) return ERA_EINVAL; /* the legacy kappa-mixture has no CUDA path */
    R = cfg->R;
    K = era__rpa_K(cfg);
    L = cfg->sinkhorn_iters;
    {
        const size_t lim = ((size_t)-1 >> 1) / sizeof(double);
        const size_t rk = (size_t)R * (size_t)K, rmax = (size_t)(R > K ? R : K);
        const size_t C2 = 2 * (size_t)K + (size_t)K * (size_t)K;
        if (rmax > lim / (size_t)T || (size_t)B > lim / ((size_t)T * (size_t)R) ||
            (size_t)(2 * L + 1) > lim / rk || C2 > lim / (size_t)T)
            return ERA_ERANGE;
    }
    if (!era__is_dev(mu) || !era__is_dev_or_null(bias) || !era__is_dev_or_null(workspace))
        return ERA_EINVAL;
    st->valid = 0;
    rc = era__dreserve(&st->dmem, &st->dcap, era__rpa_cuda_state_bytes(T, R, K, L));
    if (rc) return rc;
    st->B = B; st->T = T; st->R = R; st->K = K; st->iters = L;
    st->zscore_causal = cfg->zscore_causal ? 1 : 0;
    st->mu = mu;
    q = (char *)st->dmem; /* the host state's layout (era.h), then scratch (T,K), stats */
    q += era__rpa_state_carve(q, T, R, K, L, &st->mbar, &st->phi, &st->M, &st->phiT, &st->X);
    q += era__align(sizeof(float) * (size_t)T * K);
    st->stats = (double *)q;
    st->posmix = cfg->posmix;
    st->pos_beta = p->pos_beta;
    st->clip = cfg->bias_clip;
    st->zeps = cfg->zscore_eps;
    st->tau = p->tau_att;
    st->tau_free = 1;
    if (!(st->tau >= cfg->tau_min)) { st->tau = cfg->tau_min; st->tau_free = 0; }
    if (st->tau > cfg->tau_max) { st->tau = cfg->tau_max; st->tau_free = 0; }
    st->scale = cfg->scale < 0.0f ? 0.0f : (cfg->scale > 1.0f ? 1.0f : cfg->scale);
    if (st->posmix > 0.0f) { /* the CPU's float constants */
        double beta = st->pos_beta > 0.0f ? st->pos_beta : 0.0;
        double den = T - 1 > 1 ? (double)(T - 1) : 1.0;
        keep = (double)(1.0f - st->posmix);
        cpos = (double)(float)(-(double)st->posmix * beta / den);
    }
    if (!workspace) {
        if ((rc = era__dtmp(&own, era_rpa_cuda_workspace_size(cfg, B, T), s)) != ERA_OK) return rc;
        workspace = own;
    }
    part = (double *)workspace;
    pre = (double *)((char *)workspace + era__align(sizeof(double) * 2 * (size_t)T));
    C = 2 * K + K * K;
    /* std_post stays 0 when no bias is written (as no output exists to measure) */
    rc = era__cuda_check(cudaMemsetAsync(st->stats, 0, sizeof(double) * 8, s));
    if (rc) {
        if (own) cudaFreeAsync(own, s);
        return rc;
    }
    ERA__LAUNCH(era__k_mbar, era__nblk((size_t)T * R, 256), 256, 0, s, st->mbar, mu, B, T, R);
    rc = era__launched();
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_basis, era__nblk((size_t)T, 128), 128, 0, s, st->phi, st->phiT, T, K);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        double tau_a = cfg->tau_align > 1e-6f ? (double)cfg->tau_align : 1e-6;
        ERA__LAUNCH(era__k_rpa_plan, 1, ERA__NT, 0, s, st->X, st->stats, (const float *)st->mbar,
                    (const float *)st->phi, T, R, K, L, tau_a);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_rpa_M, era__nblk((size_t)T * K, 256), 256, 0, s, st->M,
                    (const float *)st->mbar, (const float *)st->X, T, R, K, L);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_rpa_prefix, era__nblk((size_t)C, 64), 64, 0, s, pre, (const float *)st->phi, T, K);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_rpa_rowstat, era__nblk((size_t)T, 128), 128, 0, s, part,
                    (const double *)pre, (const float *)st->M, T, K, st->zscore_causal, keep, cpos);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_rpa_stat, 1, ERA__NT, 0, s, st->stats, (const double *)part, T,
                    st->zscore_causal, 0);
        rc = era__launched();
    }
    if (rc == ERA_OK && bias) {
        ERA__LAUNCH(era__k_rpa_out, (unsigned)T, ERA__NT, 0, s, bias, part, (const float *)st->M,
                    (const float *)st->phiT, (const double *)st->stats, T, K, 0, st->zscore_causal,
                    (float)keep, (float)cpos, st->posmix > 0.0f ? 1 : 0, st->clip, st->tau,
                    st->scale, st->zeps);
        rc = era__launched();
        if (rc == ERA_OK) {
            ERA__LAUNCH(era__k_rpa_stat, 1, ERA__NT, 0, s, st->stats, (const double *)part, T,
                        st->zscore_causal, 1);
            rc = era__launched();
        }
    }
    if (own) cudaFreeAsync(own, s);
    if (rc == ERA_OK) st->valid = 1;
    return rc;
}

ERADEF int era_rpa_rows_cuda(const era_rpa_cuda_state *st, int row0, int nrows, float *out,
                             era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    double keep = 1.0, cpos = 0.0;
    if (!st || !out || !st->valid) return ERA_EINVAL;
    if (row0 < 0 || nrows < 0 || row0 > st->T || nrows > st->T - row0) return ERA_EINVAL;
    if (!era__is_dev(out)) return ERA_EINVAL;
    if (nrows == 0) return ERA_OK;
    if (st->posmix > 0.0f) {
        double beta = st->pos_beta > 0.0f ? st->pos_beta : 0.0;
        double den = st->T - 1 > 1 ? (double)(st->T - 1) : 1.0;
        keep = (double)(1.0f - st->posmix);
        cpos = (double)(float)(-(double)st->posmix * beta / den);
    }
    ERA__LAUNCH(era__k_rpa_out, (unsigned)nrows, ERA__NT, 0, s, out, (double *)NULL,
                (const float *)st->M, (const float *)st->phiT, (const double *)st->stats, st->T,
                st->K, row0, st->zscore_causal, (float)keep, (float)cpos,
                st->posmix > 0.0f ? 1 : 0, st->clip, st->tau, st->scale, st->zeps);
    return era__launched();
}

ERADEF int era_rpa_cuda_diag(const era_rpa_cuda_state *st, era_cuda_diag *out, era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    double h[8];
    int rc;
    if (!st || !out || !st->valid) return ERA_EINVAL;
    rc = era__cuda_check(cudaMemcpyAsync(h, st->stats, sizeof h, cudaMemcpyDeviceToHost, s));
    if (rc == ERA_OK) rc = era__cuda_check(cudaStreamSynchronize(s));
    if (rc) return rc;
    out->mean = h[0];
    out->std = h[1];
    out->std_pre = (float)h[3];
    out->std_post = (float)h[4];
    out->marginal_err = (float)h[5];
    out->clamp_frac = (float)h[6];
    return ERA_OK;
}

/* gradient through finish: the CPU's era__rpa_dfinish */
static __device__ double era__d_dfinish(double y, double dout, double tau, double clip,
                                        double scale, int tau_free, double *dtau, double *dtau_abs)
{
    double v;
    if (!era__d_finite(y)) return 0.0;
    v = y / tau;
    if (v > clip || v < -clip) return 0.0;
    dout *= scale;
    if (tau_free) {
        double term = dout * (-y / (tau * tau));
        *dtau += term;
        *dtau_abs += fabs(term);
    }
    return dout / tau;
}

/* pass 1, one block per row: A, Bs, dtau partials into part (T,6) */
static __global__ void era__k_rpa_b1(double *part, const float *dbias, const float *M,
                                     const float *phiT, const double *stats, int T, int K,
                                     float keep, float cpos, int mix, double tau, double clip,
                                     double scale, int tau_free, double zeps)
{
    __shared__ double sh[4 * ERA__NT];
    int i = (int)blockIdx.x, j;
    const float *Mi = M + (size_t)i * K, *db = dbias + (size_t)i * T;
    double mean = stats[0], inv_d = 1.0 / (stats[1] + zeps), a = 0.0, bs = 0.0, dt = 0.0, dta = 0.0;
    int few = stats[2] < 2.0;
    for (j = threadIdx.x; j < T; j += ERA__NT) {
        float x = era__d_rpa_x(Mi, phiT, T, K, i, j, keep, cpos, mix);
        double y = few ? 0.0 : ((double)x - mean) * inv_d;
        double gy = era__d_dfinish(y, db[j], tau, clip, scale, tau_free, &dt, &dta);
        if (few) gy = 0.0;
        a += gy;
        bs += gy * ((double)x - mean);
    }
    {
        double v[4];
        v[0] = a;
        v[1] = bs;
        v[2] = dt;
        v[3] = dta; /* the magnitudes of dtau's terms (column 3, as the CPU's) */
        era__d_bsumv(v, 4, sh);
        if (threadIdx.x == 0) {
            part[6 * (size_t)i] = v[0];
            part[6 * (size_t)i + 1] = v[1];
            part[6 * (size_t)i + 2] = v[2];
            part[6 * (size_t)i + 3] = v[3];
        }
    }
}

/* sums of part (T,6) columns c0..c0+n-1 into out, one block */
static __global__ void era__k_sum6(double *out, const double *part, int T, int c0, int n)
{
    __shared__ double sh[ERA__NT];
    int c, i;
    for (c = c0; c < c0 + n; c++) {
        double acc = 0.0;
        for (i = threadIdx.x; i < T; i += ERA__NT) acc += part[6 * (size_t)i + c];
        acc = era__d_bsum(acc, sh);
        if (threadIdx.x == 0) out[c] = acc;
    }
}

/* pass 2, one block per row: dx on the fly, dM_i (K) and the dpos_beta partial */
static __global__ void era__k_rpa_b2(float *dM, double *part, const double *sums,
                                     const float *dbias, const float *M, const float *phi,
                                     const float *phiT, const double *stats, int T, int K,
                                     int causal, float keep, float cpos, int mix, double tau,
                                     double clip, double scale, int tau_free, double zeps,
                                     double pm, double pos_beta, double den)
{
    __shared__ double sh[(ERA__KC + 1) * ERA__NT];
    int i = (int)blockIdx.x, j, k0, kk, jn = causal ? i + 1 : T;
    const float *Mi = M + (size_t)i * K, *db = dbias + (size_t)i * T;
    double mean = stats[0], sd = stats[1], n = stats[2], inv_d = 1.0 / (sd + zeps);
    double A = sums[0], Bs = sums[1];
    double cA = n > 0.0 ? A * inv_d / n : 0.0;
    double cB = (n > 1.0 && sd > 0.0) ? Bs * inv_d * inv_d / ((n - 1.0) * sd) : 0.0;
    int few = n < 2.0;
    for (k0 = 0; k0 < K; k0 += ERA__KC) {
        double acc[ERA__KC + 1], dbt = 0.0;
        int kn = K - k0 < ERA__KC ? K - k0 : ERA__KC;
        for (kk = 0; kk < ERA__KC; kk++) acc[kk] = 0.0;
        for (j = threadIdx.x; j < T; j += ERA__NT) {
            float x = era__d_rpa_x(Mi, phiT, T, K, i, j, keep, cpos, mix);
            double dummy = 0.0, y = few ? 0.0 : ((double)x - mean) * inv_d;
            double gy = era__d_dfinish(y, db[j], tau, clip, scale, tau_free, &dummy, &dummy), d, v;
            if (few) gy = 0.0;
            d = gy * inv_d;
            if (j < jn && !few) d -= cA + cB * ((double)x - mean);
            v = d;
            if (pm > 0.0) {
                if (pos_beta > 0.0) dbt += v * pm * (-(double)(i > j ? i - j : j - i) / den);
                v *= 1.0 - pm;
            }
            for (kk = 0; kk < kn; kk++) acc[kk] += v * phi[(size_t)j * K + k0 + kk];
        }
        acc[kn] = dbt;
        era__d_bsumv(acc, kn + 1, sh);
        if (threadIdx.x == 0) {
            for (kk = 0; kk < kn; kk++) dM[(size_t)i * K + k0 + kk] = (float)acc[kk];
            if (k0 == 0) part[6 * (size_t)i + 5] = acc[kn];
        }
    }
}

/* dmbar (T,R) = dM P^T (double, k in order) */
static __global__ void era__k_rpa_dmbar(double *dmbar, const float *dM, const float *X, int T,
                                        int R, int K, int L)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t t, r;
    const float *Pm = X + (size_t)(2 * L) * R * K;
    double acc = 0.0;
    int k;
    if (id >= (size_t)T * R) return;
    t = id / (size_t)R;
    r = id % (size_t)R;
    for (k = 0; k < K; k++) acc += (double)dM[t * K + k] * Pm[r * K + k];
    dmbar[id] = acc;
}

/* not detached: dP = mbar^T dM, Sinkhorn backward, dS (in dP); one block */
static __global__ void era__k_rpa_sinkbwd(double *dP, double *dX, const float *mbar,
                                          const float *dM, const float *X, int T, int R, int K,
                                          int L, double tau_a)
{
    int id, it;
    for (id = threadIdx.x; id < R * K; id += ERA__NT) {
        int r = id / K, k = id % K, t;
        double acc = 0.0;
        for (t = 0; t < T; t++) acc += (double)mbar[(size_t)t * R + r] * dM[(size_t)t * K + k];
        dP[id] = acc;
    }
    __syncthreads();
    for (it = L - 1; it >= 0; it--) {
        const float *X0 = X + (size_t)(2 * it) * R * K;
        const float *X1 = X + (size_t)(2 * it + 1) * R * K;
        int r, k;
        for (k = threadIdx.x; k < K; k += ERA__NT) {
            double s = 0.0, q = 0.0;
            for (r = 0; r < R; r++) {
                s += X1[(size_t)r * K + k];
                q += dP[(size_t)r * K + k] * (double)X1[(size_t)r * K + k];
            }
            s += 1e-9;
            for (r = 0; r < R; r++) dX[(size_t)r * K + k] = dP[(size_t)r * K + k] / s - q / (s * s);
        }
        __syncthreads();
        for (r = threadIdx.x; r < R; r += ERA__NT) {
            double s = 0.0, q = 0.0;
            for (k = 0; k < K; k++) {
                s += X0[(size_t)r * K + k];
                q += dX[(size_t)r * K + k] * (double)X0[(size_t)r * K + k];
            }
            s += 1e-9;
            for (k = 0; k < K; k++) dP[(size_t)r * K + k] = dX[(size_t)r * K + k] / s - q / (s * s);
        }
        __syncthreads();
    }
    for (id = threadIdx.x; id < R * K; id += ERA__NT) {
        double x0 = X[id];
        dP[id] = (x0 > 1e-9 * 1.0000001 && x0 < 1e9 * 0.9999999) ? dP[id] * x0 / tau_a : 0.0;
    }
}

/* dmbar (T,R) += Phi dS^T */
static __global__ void era__k_rpa_dmbar2(double *dmbar, const float *phi, const double *dS, int T,
                                         int R, int K)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t t, r;
    double acc = 0.0;
    int k;
    if (id >= (size_t)T * R) return;
    t = id / (size_t)R;
    r = id % (size_t)R;
    for (k = 0; k < K; k++) acc += (double)phi[t * K + k] * dS[r * K + k];
    dmbar[id] += acc;
}

/* dmu (B,T,R) += dmbar / B where mu is finite */
static __global__ void era__k_rpa_dmu(float *dmu, const float *mu, const double *dmbar, int B,
                                      int T, int R)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * T * R) return;
    if (era__d_finite(mu[id])) dmu[id] += (float)(dmbar[id % ((size_t)T * R)] * (1.0 / (double)B));
}

/* the scalar gradients into the caller's device floats (era_rpa_grads' *_to), as
   *to += (float)sum: sums[2] dtau_att, sums[3] its terms' magnitudes, sums[5] dpos_beta */
static __global__ void era__k_rpa_scal_to(float *dtau, float *dtau_abs, float *dbeta,
                                          const double *sums)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    *dtau += (float)sums[2];
    if (dtau_abs) *dtau_abs += (float)sums[3];
    *dbeta += (float)sums[5];
}

ERADEF int era_rpa_backward_cuda(const era_rpa_config *cfg, const era_rpa_params *p,
                                 const era_rpa_cuda_state *st, const float *dbias, float *dmu,
                                 era_rpa_grads *g, void *workspace, era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc, T, R, K, L, B, mix;
    void *own = NULL;
    double *part, *dmbar, *dP, *dX, *sums, keep = 1.0, cpos = 0.0, den, hs[8];
    float *dM;
    char *q;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!p || !st || !dbias || !g) return ERA_EINVAL;
    if (cfg->legacy) return ERA_EINVAL;
    if (!st->valid || st->R != cfg->R || st->K != era__rpa_K(cfg) ||
        st->iters != cfg->sinkhorn_iters)
        return ERA_ESTATE;
    if (!era__is_dev(dbias) || !era__is_dev_or_null(dmu) || !era__is_dev_or_null(workspace))
        return ERA_EINVAL;
    if (g->dtau_att_to && (!era__is_dev(g->dtau_att_to) || !g->dpos_beta_to ||
                           !era__is_dev(g->dpos_beta_to) || !era__is_dev_or_null(g->dtau_att_abs_to)))
        return ERA_EINVAL;
    T = st->T; R = st->R; K = st->K; L = st->iters; B = st->B;
    den = T - 1 > 1 ? (double)(T - 1) : 1.0;
    mix = st->posmix > 0.0f ? 1 : 0;
    if (mix) {
        double beta = st->pos_beta > 0.0f ? st->pos_beta : 0.0;
        keep = (double)(1.0f - st->posmix);
        cpos = (double)(float)(-(double)st->posmix * beta / den);
    }
    if (!workspace) {
        if ((rc = era__dtmp(&own, era_rpa_cuda_workspace_size(cfg, B, T), s)) != ERA_OK) return rc;
        workspace = own;
    }
    q = (char *)workspace;
    part = (double *)q; q += era__align(sizeof(double) * 6 * (size_t)T);
    dM = (float *)q; q += era__align(sizeof(float) * (size_t)T * K);
    dmbar = (double *)q; q += era__align(sizeof(double) * (size_t)T * R);
    dP = (double *)q; q += era__align(sizeof(double) * (size_t)R * K);
    dX = (double *)q; q += era__align(sizeof(double) * (size_t)R * K);
    sums = (double *)q;
    /* sums[4] is never summed; zeroed so the read-back copies no uninitialised bytes
       (compute-sanitizer initcheck flagged sums[3..4] on the H200, 2026-11-27) */
    rc = era__cuda_check(cudaMemsetAsync(sums, 0, sizeof(double) * 6, s));
    if (rc != ERA_OK) {
        if (own) cudaFreeAsync(own, s);
        return rc;
    }
    ERA__LAUNCH(era__k_rpa_b1, (unsigned)T, ERA__NT, 0, s, part, dbias, (const float *)st->M,
                (const float *)st->phiT, (const double *)st->stats, T, K, (float)keep, (float)cpos,
                mix, (double)st->tau, (double)st->clip, (double)st->scale, st->tau_free,
                (double)st->zeps);
    rc = era__launched();
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_sum6, 1, ERA__NT, 0, s, sums, (const double *)part, T, 0, 4);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_rpa_b2, (unsigned)T, ERA__NT, 0, s, dM, part, (const double *)sums, dbias,
                    (const float *)st->M, (const float *)st->phi, (const float *)st->phiT,
                    (const double *)st->stats, T, K, st->zscore_causal, (float)keep, (float)cpos,
                    mix, (double)st->tau, (double)st->clip, (double)st->scale, st->tau_free,
                    (double)st->zeps, (double)st->posmix, (double)st->pos_beta, den);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_sum6, 1, ERA__NT, 0, s, sums, (const double *)part, T, 5, 1);
        rc = era__launched();
    }
    if (rc == ERA_OK && dmu) {
        ERA__LAUNCH(era__k_rpa_dmbar, era__nblk((size_t)T * R, 256), 256, 0, s, dmbar,
                    (const float *)dM, (const float *)st->X, T, R, K, L);
        rc = era__launched();
        if (rc == ERA_OK && !cfg->detach) {
            double tau_a = cfg->tau_align > 1e-6f ? (double)cfg->tau_align : 1e-6;
            ERA__LAUNCH(era__k_rpa_sinkbwd, 1, ERA__NT, 0, s, dP, dX, (const float *)st->mbar,
                        (const float *)dM, (const float *)st->X, T, R, K, L, tau_a);
            rc = era__launched();
            if (rc == ERA_OK) {
                ERA__LAUNCH(era__k_rpa_dmbar2, era__nblk((size_t)T * R, 256), 256, 0, s, dmbar,
                            (const float *)st->phi, (const double *)dP, T, R, K);
                rc = era__launched();
            }
        }
        if (rc == ERA_OK) {
            ERA__LAUNCH(era__k_rpa_dmu, era__nblk((size_t)B * T * R, 256), 256, 0, s, dmu, st->mu,
                        (const double *)dmbar, B, T, R);
            rc = era__launched();
        }
    }
    if (rc == ERA_OK && g->dtau_att_to) { /* on the stream: no host wait */
        ERA__LAUNCH(era__k_rpa_scal_to, 1, 32, 0, s, g->dtau_att_to, g->dtau_att_abs_to,
                    g->dpos_beta_to, (const double *)sums);
        rc = era__launched();
    } else {
        if (rc == ERA_OK)
            rc = era__cuda_check(cudaMemcpyAsync(hs, sums, sizeof(double) * 6, cudaMemcpyDeviceToHost, s));
        if (rc == ERA_OK) rc = era__cuda_check(cudaStreamSynchronize(s));
        if (rc == ERA_OK) {
            g->dtau_att += (float)hs[2];
            g->dtau_att_abs += (float)hs[3];
            g->dpos_beta += (float)hs[5];
        }
    }
    if (own) cudaFreeAsync(own, s);
    return rc;
}

/* ============================================================ ERA prior */
static __global__ void era__k_era_mu(float *mu, const float *centers, int T, int R, double is2)
{
    int t = (int)(blockIdx.x * blockDim.x + threadIdx.x), r;
    double ph, mx = -HUGE_VAL, s = 0.0;
    float *m;
    if (t >= T) return;
    ph = (double)t / (double)T;
    m = mu + (size_t)t * R;
    for (r = 0; r < R; r++) {
        double d = ph - (double)centers[r], l = -d * d * is2;
        if (l > mx) mx = l;
    }
    for (r = 0; r < R; r++) {
        double d = ph - (double)centers[r], e = exp(-d * d * is2 - mx);
        m[r] = (float)e;
        s += e;
    }
    for (r = 0; r < R; r++) m[r] = (float)((double)m[r] / s);
}

/* cost, log-domain Sinkhorn (each thread owns one r, then one b; the LSE in two passes
   over the same values), plan, marginal error: one block */
static __global__ void era__k_era_sink(float *cost, float *f, float *g, float *plan,
                                       double *stats, const float *centers, int R, int nb,
                                       int L, double eps)
{
    __shared__ double sh[ERA__NT];
    double la = log(1.0 / R), lb = log(1.0 / nb), err = 0.0;
    int id, it, r, b;
    for (id = threadIdx.x; id < R * nb; id += ERA__NT) {
        double d = (double)centers[id / nb] - ((double)(id % nb) + 0.5) / (double)nb;
        cost[id] = (float)(d * d);
    }
    for (b = threadIdx.x; b < nb; b += ERA__NT) g[b] = 0.0f;
    __syncthreads();
    for (it = 0; it < L; it++) {
        const float *g0 = g + (size_t)it * nb;
        float *fi = f + (size_t)it * R;
        float *g1 = g + (size_t)(it + 1) * nb;
        for (r = threadIdx.x; r < R; r += ERA__NT) {
            double m = -HUGE_VAL, s = 0.0, lse;
            for (b = 0; b < nb; b++) {
                double v = ((double)g0[b] - cost[(size_t)r * nb + b]) / eps;
                if (v > m) m = v;
            }
            if (m != m || m == -HUGE_VAL) lse = m;
            else {
                for (b = 0; b < nb; b++) s += exp(((double)g0[b] - cost[(size_t)r * nb + b]) / eps - m);
                lse = m + log(s);
            }
            fi[r] = (float)(eps * la - eps * lse);
        }
        __syncthreads();
        for (b = threadIdx.x; b < nb; b += ERA__NT) {
            double m = -HUGE_VAL, s = 0.0, lse;
            for (r = 0; r < R; r++) {
                double v = ((double)fi[r] - cost[(size_t)r * nb + b]) / eps;
                if (v > m) m = v;
            }
            if (m != m || m == -HUGE_VAL) lse = m;
            else {
                for (r = 0; r < R; r++) s += exp(((double)fi[r] - cost[(size_t)r * nb + b]) / eps - m);
                lse = m + log(s);
            }
            g1[b] = (float)(eps * lb - eps * lse);
        }
        __syncthreads();
    }
    {
        /* the plan from the last f and the last g recomputed in double (the host's
           order): see era.h's era_era_forward */
        const float *fl = f + (size_t)(L - 1) * R;
        for (b = threadIdx.x; b < nb; b += ERA__NT) {
            double m = -HUGE_VAL, s = 0.0, lse, gb;
            for (r = 0; r < R; r++) {
                double v = ((double)fl[r] - cost[(size_t)r * nb + b]) / eps;
                if (v > m) m = v;
            }
            if (m != m || m == -HUGE_VAL) lse = m;
            else {
                for (r = 0; r < R; r++) s += exp(((double)fl[r] - cost[(size_t)r * nb + b]) / eps - m);
                lse = m + log(s);
            }
            gb = eps * lb - eps * lse;
            for (r = 0; r < R; r++)
                plan[(size_t)r * nb + b] = (float)exp(((double)fl[r] + gb - cost[(size_t)r * nb + b]) / eps);
        }
        __syncthreads();
        for (r = threadIdx.x; r < R; r += ERA__NT) {
            double s = 0.0;
            for (b = 0; b < nb; b++) s += plan[(size_t)r * nb + b];
            s = fabs(s - 1.0 / R);
            if (s > err) err = s;
        }
        for (b = threadIdx.x; b < nb; b += ERA__NT) {
            double s = 0.0;
            for (r = 0; r < R; r++) s += plan[(size_t)r * nb + b];
            s = fabs(s - 1.0 / nb);
            if (s > err) err = s;
        }
    }
    sh[threadIdx.x] = err;
    __syncthreads();
    if (threadIdx.x == 0) {
        double m = 0.0;
        for (id = 0; id < ERA__NT; id++)
            if (sh[id] > m) m = sh[id];
        stats[0] = m;
    }
}

/* count of block b's positions in row t's statistics set */
static __device__ double era__d_count(const int *bstart, int causal, int t, int b)
{
    int s0 = bstart[b], s1 = bstart[b + 1];
    if (causal) {
        if (t < s0) return 0.0;
        if (t < s1) return (double)(t - s0 + 1);
    }
    return (double)(s1 - s0);
}

/* bstart (nb+1) */
static __global__ void era__k_era_bstart(int *bstart, int T, int nb)
{
    int b = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (b <= nb) bstart[b] = (int)(((long long)b * T + nb - 1) / nb);
}

/* per row: Q, its statistics, the block values V, and (pre, post) partials */
static __global__ void era__k_era_rows(float *Q, float *V, double *rmean, double *rstd,
                                       double *part, const float *mu, const float *plan,
                                       const int *bstart, int T, int R, int nb, int causal,
                                       double delta, double alpha, double zeps)
{
    int t = (int)(blockIdx.x * blockDim.x + threadIdx.x), bb, rr;
    float *Qt;
    const float *m;
    double s = 0.0, s2 = 0.0, n = 0.0, mean, sd, inv, o;
    if (t >= T) return;
    Qt = Q + (size_t)t * nb;
    m = mu + (size_t)t * R;
    for (bb = 0; bb < nb; bb++) {
        double acc = 0.0;
        for (rr = 0; rr < R; rr++) acc += (double)m[rr] * plan[(size_t)rr * nb + bb];
        Qt[bb] = (float)acc;
    }
    for (bb = 0; bb < nb; bb++) {
        double c = era__d_count(bstart, causal, t, bb);
        if (c == 0.0) continue;
        s += c * log((double)Qt[bb] + delta);
        n += c;
    }
    mean = s / n;
    for (bb = 0; bb < nb; bb++) {
        double c = era__d_count(bstart, causal, t, bb), y;
        if (c == 0.0) continue;
        y = log((double)Qt[bb] + delta) - mean;
        s2 += c * y * y;
    }
    sd = sqrt(s2 / n);
    rmean[t] = mean;
    rstd[t] = sd;
    inv = alpha / (sd + zeps);
    for (bb = 0; bb < nb; bb++)
        V[(size_t)t * nb + bb] = (float)((log((double)Qt[bb] + delta) - mean) * inv);
    o = fabs(alpha) * sd / (sd + zeps);
    part[2 * (size_t)t] = sd * sd;
    part[2 * (size_t)t + 1] = o * o;
}

/* stats[1], [2]: rms of the row stds before/after; one block */
static __global__ void era__k_era_stat(double *stats, const double *part, int T)
{
    __shared__ double sh[ERA__NT];
    double a = 0.0, b = 0.0;
    int i;
    for (i = threadIdx.x; i < T; i += ERA__NT) {
        a += part[2 * (size_t)i];
        b += part[2 * (size_t)i + 1];
    }
    a = era__d_bsum(a, sh);
    b = era__d_bsum(b, sh);
    if (threadIdx.x == 0) {
        stats[1] = sqrt(a / T);
        stats[2] = sqrt(b / T);
    }
}

/* bias rows [row0, row0 + nrows): a gather of V; causal: 0 at s > t */
static __global__ void era__k_era_out(float *out, const float *V, int T, int nb, int row0,
                                      int nrows, int causal)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int t, sidx;
    if (id >= (size_t)nrows * T) return;
    t = row0 + (int)(id / (size_t)T);
    sidx = (int)(id % (size_t)T);
    out[id] = (causal && sidx > t) ? 0.0f : V[(size_t)t * nb + (int)((long long)sidx * nb / T)];
}

static size_t era__era_cuda_state_bytes(int T, int R, int nb, int L)
{
    return era__era_state_bytes(T, R, nb, L) + era__align(sizeof(float) * (size_t)T * nb) +
           era__align(sizeof(double) * 4);
}

ERADEF size_t era_era_cuda_workspace_size(const era_era_config *cfg, int T)
{
    size_t R, nb, m, fwd, bwd;
    if (!cfg || T <= 0 || cfg->R <= 0 || cfg->nb <= 0) return 0;
    R = (size_t)cfg->R;
    nb = (size_t)cfg->nb;
    m = R > nb ? R : nb;
    /* forward: (T,2) partials; backward: dQ (T,nb), dalpha (T), per-row membership terms
       (T,R) + (T), dplan and dC (R,nb), df, dg, dcen (m), colmax/colsum (nb + R) x 2,
       scalars (8), per-block dbias sums (T,nb) - all doubles */
    fwd = era__align(sizeof(double) * 2 * (size_t)T);
    bwd = era__align(sizeof(double) * (size_t)T * nb) + era__align(sizeof(double) * (size_t)T) +
          era__align(sizeof(double) * (size_t)T * R) + era__align(sizeof(double) * (size_t)T) +
          2 * era__align(sizeof(double) * R * nb) + 3 * era__align(sizeof(double) * m) +
          4 * era__align(sizeof(double) * m) + era__align(sizeof(double) * 8) +
          era__align(sizeof(double) * (size_t)T * nb);
    return fwd > bwd ? fwd : bwd;
}

/* era_era_grads' *_to: the host's (float) conversions and its product rounded as written */
static __global__ void era__k_era_scal_to(float *dlog_sigma, float *dalpha, const double *scal, float sigma)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    *dlog_sigma = __fadd_rn(*dlog_sigma, __fmul_rn((float)scal[0], sigma));
    *dalpha = __fadd_rn(*dalpha, (float)scal[1]);
}

/* era_era_config.status: 1 OR-ed into *status when a centre is not finite */
static __global__ void era__k_era_finite(int *status, const float *centers, int R)
{
    int r = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (r < R && !isfinite(centers[r])) atomicOr(status, 1);
}

ERADEF int era_era_forward_cuda(const era_era_config *cfg, const era_era_params *p, int T,
                                float *bias, era_era_cuda_state *st, void *workspace,
                                era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc, R, nb, L;
    void *own = NULL;
    char *q;
    float *hc;
    if (!cfg || !p || !p->centers || !st) return ERA_EINVAL;
    /* scalars first; then the CPU's checks, with the centres read back (R floats) */
    if (cfg->R <= 0 || cfg->R > 4096 || cfg->max_T <= 0) return ERA_EINVAL;
    rc = era__check_T(T, cfg->max_T);
    if (rc) return rc;
    if (!era__is_dev(p->centers)) return ERA_EINVAL;
    if (cfg->status) { /* deferred: the scalars here, the centres on the device, no wait */
        if (!era__is_dev(cfg->status)) return ERA_EINVAL;
        rc = era__era_check_scalars(cfg, p);
        if (rc) return rc;
        ERA__LAUNCH(era__k_era_finite, era__nblk((size_t)cfg->R, 128), 128, 0, s, cfg->status, p->centers, cfg->R);
        rc = era__launched();
        if (rc) return rc;
    } else {
        hc = (float *)ERA_MALLOC(sizeof(float) * (size_t)cfg->R);
        if (!hc) return ERA_ENOMEM;
        rc = era__cuda_check(cudaMemcpyAsync(hc, p->centers, sizeof(float) * (size_t)cfg->R,
                                             cudaMemcpyDeviceToHost, s));
        if (rc == ERA_OK) rc = era__cuda_check(cudaStreamSynchronize(s));
        if (rc == ERA_OK) {
            era_era_params hp = *p;
            hp.centers = hc;
            rc = era__era_check(cfg, &hp);
        }
        ERA_FREE(hc);
        if (rc) return rc;
    }
    rc = era__check_T(T, cfg->max_T);
    if (rc) return rc;
    if (!era__is_dev_or_null(bias) || !era__is_dev_or_null(workspace)) return ERA_EINVAL;
    R = cfg->R; nb = cfg->nb; L = cfg->iters;
    st->valid = 0;
    rc = era__dreserve(&st->dmem, &st->dcap, era__era_cuda_state_bytes(T, R, nb, L));
    if (rc) return rc;
    st->T = T; st->R = R; st->nb = nb; st->iters = L;
    st->zscore_causal = cfg->zscore_causal ? 1 : 0;
    st->alpha = p->alpha; st->sigma = p->sigma; st->eps = cfg->eps; st->delta = cfg->delta;
    st->zeps = cfg->zscore_eps;
    q = (char *)st->dmem; /* the host state's layout (era.h), then V (T,nb), stats */
    q += era__era_state_carve(q, T, R, nb, L, &st->mu, &st->f, &st->g, &st->cost, &st->plan,
                              &st->Q, &st->rmean, &st->rstd, &st->bstart);
    st->V = (float *)q; q += era__align(sizeof(float) * (size_t)T * nb);
    st->stats = (double *)q;
    if (!workspace) {
        if ((rc = era__dtmp(&own, era_era_cuda_workspace_size(cfg, T), s)) != ERA_OK) return rc;
        workspace = own;
    }
    {
        int *bstart = st->bstart;
        double is2 = 1.0 / (2.0 * (double)p->sigma * (double)p->sigma);
        ERA__LAUNCH(era__k_era_bstart, era__nblk((size_t)nb + 1, 128), 128, 0, s, bstart, T, nb);
        rc = era__launched();
        if (rc == ERA_OK) {
            ERA__LAUNCH(era__k_era_mu, era__nblk((size_t)T, 128), 128, 0, s, st->mu, p->centers, T, R, is2);
            rc = era__launched();
        }
        if (rc == ERA_OK) {
            ERA__LAUNCH(era__k_era_sink, 1, ERA__NT, 0, s, st->cost, st->f, st->g, st->plan, st->stats,
                        p->centers, R, nb, L, (double)cfg->eps);
            rc = era__launched();
        }
        if (rc == ERA_OK) {
            ERA__LAUNCH(era__k_era_rows, era__nblk((size_t)T, 64), 64, 0, s, st->Q, st->V, st->rmean,
                        st->rstd, (double *)workspace, (const float *)st->mu, (const float *)st->plan,
                        (const int *)bstart, T, R, nb, st->zscore_causal, (double)st->delta,
                        (double)st->alpha, (double)st->zeps);
            rc = era__launched();
        }
        if (rc == ERA_OK) {
            ERA__LAUNCH(era__k_era_stat, 1, ERA__NT, 0, s, st->stats, (const double *)workspace, T);
            rc = era__launched();
        }
    }
    if (own) cudaFreeAsync(own, s);
    if (rc) return rc;
    st->valid = 1;
    if (bias) return era_era_rows_cuda(st, 0, T, bias, stream);
    return ERA_OK;
}

ERADEF int era_era_rows_cuda(const era_era_cuda_state *st, int row0, int nrows, float *out,
                             era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    if (!st || !out || !st->valid) return ERA_EINVAL;
    if (row0 < 0 || nrows < 0 || row0 > st->T || nrows > st->T - row0) return ERA_EINVAL;
    if (!era__is_dev(out)) return ERA_EINVAL;
    if (nrows == 0) return ERA_OK;
    ERA__LAUNCH(era__k_era_out, era__nblk((size_t)nrows * st->T, 256), 256, 0, s, out,
                (const float *)st->V, st->T, st->nb, row0, nrows, st->zscore_causal);
    return era__launched();
}

ERADEF int era_era_cuda_diag(const era_era_cuda_state *st, era_cuda_diag *out, era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    double h[3];
    int rc;
    if (!st || !out || !st->valid) return ERA_EINVAL;
    rc = era__cuda_check(cudaMemcpyAsync(h, st->stats, sizeof h, cudaMemcpyDeviceToHost, s));
    if (rc == ERA_OK) rc = era__cuda_check(cudaStreamSynchronize(s));
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    out->marginal_err = (float)h[0];
    out->std_pre = (float)h[1];
    out->std_post = (float)h[2];
    return ERA_OK;
}

/* one block per row t: dQ (T,nb) (double), dalpha_t; the CPU's per-row order (thread 0
   walks the blocks for A, Bs, dalpha; each thread sums its blocks' dbias entries) */
static __global__ void era__k_era_b1(double *dQ, double *sz, double *dal, const float *dbias,
                                     const float *Q, const double *rmean, const double *rstd,
                                     const int *bstart, int T, int nb, int causal, double delta,
                                     double alpha, double zeps)
{
    __shared__ double shA, shB, shN;
    int t = (int)blockIdx.x, bb, sidx;
    const float *db = dbias + (size_t)t * T;
    const float *Qt = Q + (size_t)t * nb;
    double *szt = sz + (size_t)t * nb, mean = rmean[t], sd = rstd[t], d = sd + zeps;
    for (bb = threadIdx.x; bb < nb; bb += ERA__NT) {
        double acc = 0.0;
        int send = bstart[bb + 1];
        if (causal && send > t + 1) send = t + 1;
        for (sidx = bstart[bb]; sidx < send; sidx++) acc += db[sidx];
        szt[bb] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double A = 0.0, Bs = 0.0, da = 0.0, n = 0.0;
        for (bb = 0; bb < nb; bb++) {
            double acc = szt[bb], y = log((double)Qt[bb] + delta) - mean;
            szt[bb] = acc * alpha;
            da += acc * y / d;
            A += szt[bb];
            Bs += szt[bb] * y;
            n += era__d_count(bstart, causal, t, bb);
        }
        dal[t] = da;
        shA = A;
        shB = Bs;
        shN = n;
    }
    __syncthreads();
    for (bb = threadIdx.x; bb < nb; bb += ERA__NT) {
        double c = era__d_count(bstart, causal, t, bb);
        double y = log((double)Qt[bb] + delta) - mean;
        double dy = szt[bb] / d;
        if (c > 0.0) {
            dy -= c * shA / (shN * d);
            if (sd > 0.0) dy -= c * y * shB / (shN * sd * d * d);
        }
        dQ[(size_t)t * nb + bb] = dy / ((double)Qt[bb] + delta);
    }
}

/* dplan (R,nb) = mu^T dQ, t in order */
static __global__ void era__k_era_dplan(double *dplan, const float *mu, const double *dQ, int T,
                                        int R, int nb)
{
    int id = (int)(blockIdx.x * blockDim.x + threadIdx.x), r, b, t;
    double acc = 0.0;
    if (id >= R * nb) return;
    r = id / nb;
    b = id % nb;
    for (t = 0; t < T; t++) acc += (double)mu[(size_t)t * R + r] * dQ[(size_t)t * nb + b];
    dplan[id] = acc;
}

/* per row t: the membership terms dcen_t (T,R) and dsig_t (T) */
static __global__ void era__k_era_mterm(double *dct, double *dst, const float *mu,
                                        const double *dQ, const float *plan,
                                        const float *centers, int T, int R, int nb, double sig)
{
    int t = (int)(blockIdx.x * blockDim.x + threadIdx.x), r, b;
    const float *mt;
    double ph, dot = 0.0, ms = 0.0, is2 = 1.0 / (sig * sig), ds = 0.0;
    if (t >= T) return;
    mt = mu + (size_t)t * R;
    ph = (double)t / (double)T;
    for (r = 0; r < R; r++) {
        double acc = 0.0;
        for (b = 0; b < nb; b++) acc += dQ[(size_t)t * nb + b] * plan[(size_t)r * nb + b];
        dct[(size_t)t * R + r] = acc; /* buf[r] for now */
        dot += acc * mt[r];
        ms += (double)mt[r];
    }
    dot /= ms; /* mu renormalised in double, as on the host */
    {   /* dsigma centred on E_mu[d^2] (sum_r dl_r = 0): see era.h's era_era_backward */
        double m2 = 0.0;
        for (r = 0; r < R; r++) {
            double d = ph - (double)centers[r];
            m2 += (double)mt[r] * d * d;
        }
        m2 /= ms;
        for (r = 0; r < R; r++) {
            double dl = (double)mt[r] * (dct[(size_t)t * R + r] - dot);
            double d = ph - (double)centers[r];
            dct[(size_t)t * R + r] = dl * d * is2;
            ds += dl * (d * d - m2) / (sig * sig * sig);
        }
    }
    dst[t] = ds;
}

/* unrolled log-domain Sinkhorn backward and dcenters: one block. dcen (m) starts with the
   membership terms (t in order); scal[0] = dsigma, scal[1] = dalpha */
static __global__ void era__k_era_sinkbwd(double *dC, double *df, double *dg, double *cm,
                                          double *cs, double *dcen, double *scal,
                                          const double *dplan, const double *dct,
                                          const double *dst, const double *dal,
                                          const float *plan, const float *f, const float *g,
                                          const float *cost, const float *centers, int T, int R,
                                          int nb, int L, double eps)
{
    int id, it, r, b, t;
    /* membership terms, t in order per regime; scalars in one thread */
    for (r = threadIdx.x; r < R; r += ERA__NT) {
        double acc = 0.0;
        for (t = 0; t < T; t++) acc += dct[(size_t)t * R + r];
        dcen[r] = acc;
    }
    if (threadIdx.x == 0) {
        double a = 0.0, sgm = 0.0;
        for (t = 0; t < T; t++) { sgm += dst[t]; a += dal[t]; }
        scal[0] = sgm;
        scal[1] = a;
    }
    /* plan = exp((f + g - C)/eps) */
    for (id = threadIdx.x; id < R * nb; id += ERA__NT)
        dC[id] = -dplan[id] * plan[id] / eps;
    __syncthreads();
    for (r = threadIdx.x; r < R; r += ERA__NT) {
        double acc = 0.0;
        for (b = 0; b < nb; b++) acc += dplan[(size_t)r * nb + b] * plan[(size_t)r * nb + b] / eps;
        df[r] = acc;
    }
    for (b = threadIdx.x; b < nb; b += ERA__NT) {
        double acc = 0.0;
        for (r = 0; r < R; r++) acc += dplan[(size_t)r * nb + b] * plan[(size_t)r * nb + b] / eps;
        dg[b] = acc;
    }
    __syncthreads();
    for (it = L - 1; it >= 0; it--) {
        const float *fi = f + (size_t)it * R;
        const float *g0 = g + (size_t)it * nb;
        /* g1[b] = eps log(1/nb) - eps LSE_r((f_r - C_rb)/eps): column max and sum */
        for (b = threadIdx.x; b < nb; b += ERA__NT) {
            double mx = -HUGE_VAL, s = 0.0;
            for (r = 0; r < R; r++) {
                double v = ((double)fi[r] - cost[(size_t)r * nb + b]) / eps;
                if (v > mx) mx = v;
            }
            for (r = 0; r < R; r++) s += exp(((double)fi[r] - cost[(size_t)r * nb + b]) / eps - mx);
            cm[b] = mx;
            cs[b] = s;
        }
        __syncthreads();
        for (r = threadIdx.x; r < R; r += ERA__NT) {
            double dfr = df[r];
            for (b = 0; b < nb; b++) {
                double v = exp(((double)fi[r] - cost[(size_t)r * nb + b]) / eps - cm[b]) / cs[b];
                dfr -= dg[b] * v;
                dC[(size_t)r * nb + b] += dg[b] * v;
            }
            df[r] = dfr;
        }
        __syncthreads();
        /* f[r] = eps log(1/R) - eps LSE_b((g0_b - C_rb)/eps): row max and sum */
        for (r = threadIdx.x; r < R; r += ERA__NT) {
            double mx = -HUGE_VAL, s = 0.0;
            for (b = 0; b < nb; b++) {
                double v = ((double)g0[b] - cost[(size_t)r * nb + b]) / eps;
                if (v > mx) mx = v;
            }
            for (b = 0; b < nb; b++) s += exp(((double)g0[b] - cost[(size_t)r * nb + b]) / eps - mx);
            cm[nb + r] = mx;
            cs[nb + r] = s;
        }
        __syncthreads();
        for (b = threadIdx.x; b < nb; b += ERA__NT) {
            double dgb = 0.0;
            for (r = 0; r < R; r++) {
                double w = exp(((double)g0[b] - cost[(size_t)r * nb + b]) / eps - cm[nb + r]) / cs[nb + r];
                dgb -= df[r] * w;
                dC[(size_t)r * nb + b] += df[r] * w;
            }
            dg[b] = dgb;
        }
        __syncthreads();
        for (r = threadIdx.x; r < R; r += ERA__NT) df[r] = 0.0;
        __syncthreads();
    }
    for (r = threadIdx.x; r < R; r += ERA__NT) {
        double acc = dcen[r];
        for (b = 0; b < nb; b++) {
            double d = (double)centers[r] - ((double)b + 0.5) / (double)nb;
            acc += dC[(size_t)r * nb + b] * 2.0 * d;
        }
        dcen[r] = acc;
    }
}

static __global__ void era__k_addf(float *dst, const double *src, int n)
{
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) dst[i] += (float)src[i];
}

ERADEF int era_era_backward_cuda(const era_era_config *cfg, const era_era_params *p,
                                 const era_era_cuda_state *st, const float *dbias,
                                 era_era_grads *g, void *workspace, era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    int rc, T, R, nb, L, m;
    void *own = NULL;
    char *q;
    double *dQ, *dal, *dct, *dst, *dplan, *dC, *df, *dg, *dcen, *cm, *cs, *scal, *sz, hs[2];
    if (!cfg || !p || !p->centers || !st || !dbias || !g) return ERA_EINVAL;
    if (cfg->R <= 0 || cfg->nb <= 0 || cfg->iters < 1 || !era__finite(cfg->eps) || cfg->eps <= 0.0f)
        return ERA_EINVAL;
    if (!era__finite(p->sigma) || p->sigma <= 0.0f || !era__finite(p->alpha)) return ERA_EINVAL;
    if (!st->valid || st->R != cfg->R || st->nb != cfg->nb || st->iters != cfg->iters)
        return ERA_ESTATE;
    if (!era__is_dev(p->centers) || !era__is_dev(dbias) || !era__is_dev_or_null(g->dcenters) ||
        !era__is_dev_or_null(workspace))
        return ERA_EINVAL;
    if (!g->dalpha_to != !g->dlog_sigma_to ||
        (g->dalpha_to && (!era__is_dev(g->dalpha_to) || !era__is_dev(g->dlog_sigma_to))))
        return ERA_EINVAL;
    T = st->T; R = st->R; nb = st->nb; L = st->iters;
    m = R > nb ? R : nb;
    if (!workspace) {
        if ((rc = era__dtmp(&own, era_era_cuda_workspace_size(cfg, T), s)) != ERA_OK) return rc;
        workspace = own;
    }
    q = (char *)workspace;
    dQ = (double *)q; q += era__align(sizeof(double) * (size_t)T * nb);
    dal = (double *)q; q += era__align(sizeof(double) * (size_t)T);
    dct = (double *)q; q += era__align(sizeof(double) * (size_t)T * R);
    dst = (double *)q; q += era__align(sizeof(double) * (size_t)T);
    dplan = (double *)q; q += era__align(sizeof(double) * (size_t)R * nb);
    dC = (double *)q; q += era__align(sizeof(double) * (size_t)R * nb);
    df = (double *)q; q += era__align(sizeof(double) * (size_t)m);
    dg = (double *)q; q += era__align(sizeof(double) * (size_t)m);
    dcen = (double *)q; q += era__align(sizeof(double) * (size_t)m);
    cm = (double *)q; q += 2 * era__align(sizeof(double) * (size_t)m);
    cs = (double *)q; q += 2 * era__align(sizeof(double) * (size_t)m);
    scal = (double *)q; q += era__align(sizeof(double) * 8);
    sz = (double *)q;
    ERA__LAUNCH(era__k_era_b1, (unsigned)T, ERA__NT, 0, s, dQ, sz, dal, dbias, (const float *)st->Q,
                (const double *)st->rmean, (const double *)st->rstd, (const int *)st->bstart, T, nb,
                st->zscore_causal, (double)st->delta, (double)st->alpha, (double)st->zeps);
    rc = era__launched();
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_era_dplan, era__nblk((size_t)R * nb, 128), 128, 0, s, dplan,
                    (const float *)st->mu, (const double *)dQ, T, R, nb);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_era_mterm, era__nblk((size_t)T, 64), 64, 0, s, dct, dst,
                    (const float *)st->mu, (const double *)dQ, (const float *)st->plan, p->centers,
                    T, R, nb, (double)st->sigma);
        rc = era__launched();
    }
    if (rc == ERA_OK) {
        ERA__LAUNCH(era__k_era_sinkbwd, 1, ERA__NT, 0, s, dC, df, dg, cm, cs, dcen, scal,
                    (const double *)dplan, (const double *)dct, (const double *)dst,
                    (const double *)dal, (const float *)st->plan, (const float *)st->f,
                    (const float *)st->g, (const float *)st->cost, p->centers, T, R, nb, L,
                    (double)st->eps);
        rc = era__launched();
    }
    if (rc == ERA_OK && g->dcenters) {
        ERA__LAUNCH(era__k_addf, era__nblk((size_t)R, 128), 128, 0, s, g->dcenters, (const double *)dcen, R);
        rc = era__launched();
    }
    if (rc == ERA_OK && g->dalpha_to) { /* the scalars stay on the stream: no wait */
        ERA__LAUNCH(era__k_era_scal_to, 1, 1, 0, s, g->dlog_sigma_to, g->dalpha_to, (const double *)scal, p->sigma);
        rc = era__launched();
    } else if (rc == ERA_OK) {
        rc = era__cuda_check(cudaMemcpyAsync(hs, scal, sizeof hs, cudaMemcpyDeviceToHost, s));
        if (rc == ERA_OK) rc = era__cuda_check(cudaStreamSynchronize(s));
        if (rc == ERA_OK) {
            g->dsigma += (float)hs[0];
            g->dalpha += (float)hs[1];
        }
    }
    if (own) cudaFreeAsync(own, s);
    return rc;
}

/* ============================================================ both */
static __global__ void era__k_apply(float *scores, const float *bias, int per_head, size_t n,
                                    int H, size_t TT)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t bh, e;
    if (id >= n) return;
    bh = id / TT;
    e = id % TT;
    scores[id] += bias[(per_head ? (bh % (size_t)H) * TT : 0) + e];
}

ERADEF int era_apply_cuda(float *scores, const float *bias, int per_head, int B, int H, int T,
                          era_stream stream)
{
    size_t TT, n;
    if (!scores || !bias || B <= 0 || H <= 0 || T <= 0) return ERA_EINVAL;
    if (per_head != 0 && per_head != 1) return ERA_EINVAL; /* a boolean (issue 37) */
    if ((double)B * H * (double)T * T > (double)((size_t)-1) / 8) return ERA_ERANGE;
    if (!era__is_dev(scores) || !era__is_dev(bias)) return ERA_EINVAL;
    TT = (size_t)T * (size_t)T;
    n = (size_t)B * (size_t)H * TT;
    ERA__LAUNCH(era__k_apply, era__nblk(n, 256), 256, 0, (cudaStream_t)stream, scores, bias,
                per_head ? 1 : 0, n, H, TT);
    return era__launched();
}

/* dbias (nh,T,T) += sum over b (and h) of dscores, one thread per entry, in the CPU's order */
static __global__ void era__k_reduce(float *dbias, const float *dscores, int per_head, int B,
                                     int H, size_t TT, size_t n)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t hh, e;
    double acc = 0.0;
    int b, h;
    if (id >= n) return;
    hh = id / TT;
    e = id % TT;
    for (b = 0; b < B; b++) {
        if (per_head) acc += dscores[((size_t)b * H + hh) * TT + e];
        else
            for (h = 0; h < H; h++) acc += dscores[((size_t)b * H + h) * TT + e];
    }
    dbias[id] += (float)acc;
}

ERADEF int era_reduce_grad_cuda(float *dbias, const float *dscores, int per_head, int B, int H,
                                int T, era_stream stream)
{
    size_t TT, n;
    if (!dbias || !dscores || B <= 0 || H <= 0 || T <= 0) return ERA_EINVAL;
    if (per_head != 0 && per_head != 1) return ERA_EINVAL; /* a boolean (issue 37) */
    if ((double)B * H * (double)T * T > (double)((size_t)-1) / 8) return ERA_ERANGE;
    if (!era__is_dev(dbias) || !era__is_dev(dscores)) return ERA_EINVAL;
    TT = (size_t)T * (size_t)T;
    n = TT * (size_t)(per_head ? H : 1);
    ERA__LAUNCH(era__k_reduce, era__nblk(n, 256), 256, 0, (cudaStream_t)stream, dbias, dscores,
                per_head ? 1 : 0, B, H, TT, n);
    return era__launched();
}

/* ============================================================ device inference cache */
static void era__cc_zero(era_cuda_cache *c)
{
    memset(c, 0, sizeof *c);
}

ERADEF int era_cuda_cache_init_era(era_cuda_cache *c, size_t budget_bytes,
                                   const era_era_config *cfg, const era_era_params *p)
{
    float *hc;
    int rc, dev;
    if (!c) return ERA_EINVAL;
    era__cc_zero(c);
    if (!cfg || !p || !p->centers || cfg->R <= 0 || cfg->R > 4096) return ERA_EINVAL;
    dev = era__is_dev(p->centers);
    hc = (float *)ERA_MALLOC(sizeof(float) * (size_t)cfg->R);
    if (!hc) return ERA_ENOMEM;
    if (dev) rc = era__cuda_check(cudaMemcpy(hc, p->centers, sizeof(float) * (size_t)cfg->R, cudaMemcpyDeviceToHost));
    else {
        memcpy(hc, p->centers, sizeof(float) * (size_t)cfg->R);
        rc = ERA_OK;
    }
    if (rc == ERA_OK) {
        era_era_params hp = *p;
        hp.centers = hc;
        rc = era__era_check(cfg, &hp);
    }
    if (rc == ERA_OK && cudaMalloc((void **)&c->dcenters, sizeof(float) * (size_t)cfg->R) != cudaSuccess) {
        (void)cudaGetLastError();
        c->dcenters = NULL;
        rc = ERA_ENOMEM;
    }
    if (rc == ERA_OK)
        rc = era__cuda_check(cudaMemcpy(c->dcenters, hc, sizeof(float) * (size_t)cfg->R, cudaMemcpyHostToDevice));
    /* a pageable host-to-device cudaMemcpy may return before its DMA lands: complete it
       here, so that a get on any stream (a non-blocking one too) reads the centres */
    if (rc == ERA_OK) rc = era__cuda_check(cudaDeviceSynchronize());
    ERA_FREE(hc);
    if (rc) {
        era_cuda_cache_free(c);
        return rc;
    }
    c->budget = budget_bytes;
    c->kind = 1;
    c->ecfg = *cfg;
    c->epar = *p;
    c->epar.centers = c->dcenters;
    return ERA_OK;
}

ERADEF int era_cuda_cache_init_rpa(era_cuda_cache *c, size_t budget_bytes,
                                   const era_rpa_config *cfg, const era_rpa_params *p,
                                   era_mu_fn mu_fn, void *user)
{
    int rc;
    if (!c) return ERA_EINVAL;
    era__cc_zero(c);
    if (!p || !mu_fn) return ERA_EINVAL;
    rc = era__rpa_check_cfg(cfg);
    if (rc) return rc;
    if (!era__finite(p->tau_att) || !era__finite(p->pos_beta) || !era__finite(p->kappa))
        return ERA_EINVAL;
    if (cfg->legacy) return ERA_EINVAL;
    c->budget = budget_bytes;
    c->kind = 2;
    c->rcfg = *cfg;
    c->rpar = *p;
    c->rpar.W = NULL; c->rpar.b = NULL; c->rpar.centers = NULL; c->rpar.log_sigma = NULL;
    c->mu_fn = mu_fn;
    c->mu_user = user;
    return ERA_OK;
}

/* B(T) into the device buffer bias */
static int era__cc_build(era_cuda_cache *c, int T, float *bias, cudaStream_t s)
{
    int rc;
    if (c->kind == 1) {
        era_era_cuda_state st = era_era_cuda_state_init();
        rc = era_era_forward_cuda(&c->ecfg, &c->epar, T, bias, &st, NULL, (era_stream)s);
        if (rc == ERA_OK) rc = era__cuda_check(cudaStreamSynchronize(s));
        era_era_cuda_state_free(&st);
        return rc;
    } else {
        era_rpa_cuda_state st = era_rpa_cuda_state_init();
        size_t n = (size_t)T * (size_t)c->rcfg.R;
        float *hm, *dm = NULL;
        if ((size_t)T > ((size_t)-1) / sizeof(float) / (size_t)c->rcfg.R) return ERA_ERANGE;
        hm = (float *)ERA_MALLOC(sizeof(float) * n);
        if (!hm) return ERA_ENOMEM;
        rc = c->mu_fn(c->mu_user, T, hm);
        if (rc == ERA_OK && cudaMalloc((void **)&dm, sizeof(float) * n) != cudaSuccess) {
            (void)cudaGetLastError();
            dm = NULL;
            rc = ERA_ENOMEM;
        }
        /* on s, ordered before the forward that reads it (a cudaMemcpy on the legacy stream
           is not ordered with a non-blocking s and may return before its DMA lands) */
        if (rc == ERA_OK)
            rc = era__cuda_check(cudaMemcpyAsync(dm, hm, sizeof(float) * n, cudaMemcpyHostToDevice, s));
        if (rc == ERA_OK) rc = era_rpa_forward_cuda(&c->rcfg, &c->rpar, dm, 1, T, bias, &st, NULL, (era_stream)s);
        if (rc == ERA_OK) rc = era__cuda_check(cudaStreamSynchronize(s));
        era_rpa_cuda_state_free(&st);
        if (dm) cudaFree(dm);
        ERA_FREE(hm);
        return rc;
    }
}

ERADEF int era_cuda_cache_get(era_cuda_cache *c, int T, const float **bias, era_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    size_t bytes;
    era_cuda_cache_entry e;
    int rc, i, max_T;
    if (!c || !bias || (c->kind != 1 && c->kind != 2)) return ERA_EINVAL;
    *bias = NULL;
    max_T = c->kind == 1 ? c->ecfg.max_T : c->rcfg.max_T;
    rc = era__check_T(T, max_T);
    if (rc) return rc;
    c->tick++;
    for (i = 0; i < c->n; i++)
        if (c->ent[i].T == T) {
            c->ent[i].last = c->tick;
            c->hits++;
            *bias = c->ent[i].bias;
            return ERA_OK;
        }
    bytes = sizeof(float) * (size_t)T * (size_t)T;
    if (bytes > c->budget) return ERA_ERANGE;
    while (c->bytes + bytes > c->budget && c->n > 0) { /* evict the least recently used */
        int lru = 0;
        for (i = 1; i < c->n; i++)
            if (c->ent[i].last < c->ent[lru].last) lru = i;
        c->bytes -= c->ent[lru].bytes;
        cudaStreamSynchronize(s); /* no kernel of this stream may still read it */
        cudaFree(c->ent[lru].bias);
        c->ent[lru] = c->ent[c->n - 1];
        c->n--;
        c->evictions++;
    }
    if (c->n == c->cap) {
        int ncap = c->cap ? 2 * c->cap : 8;
        era_cuda_cache_entry *ne;
        if (c->cap > INT_MAX / 2) return ERA_ENOMEM;
        ne = (era_cuda_cache_entry *)ERA_MALLOC(sizeof(*ne) * (size_t)ncap);
        if (!ne) return ERA_ENOMEM;
        if (c->n) memcpy(ne, c->ent, sizeof(*ne) * (size_t)c->n);
        if (c->ent) ERA_FREE(c->ent);
        c->ent = ne;
        c->cap = ncap;
    }
    if (cudaMalloc((void **)&e.bias, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return ERA_ENOMEM;
    }
    rc = era__cc_build(c, T, e.bias, s);
    if (rc) {
        cudaFree(e.bias);
        return rc;
    }
    e.T = T;
    e.bytes = bytes;
    e.last = c->tick;
    c->ent[c->n++] = e;
    c->bytes += bytes;
    c->builds++;
    *bias = e.bias;
    return ERA_OK;
}

ERADEF void era_cuda_cache_free(era_cuda_cache *c)
{
    int i;
    if (!c) return;
    if (c->n > 0 || c->dcenters) cudaDeviceSynchronize();
    for (i = 0; i < c->n; i++) cudaFree(c->ent[i].bias);
    if (c->ent) ERA_FREE(c->ent);
    if (c->dcenters) cudaFree(c->dcenters);
    era__cc_zero(c);
}
