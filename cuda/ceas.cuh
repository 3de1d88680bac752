/* cuda/ceas.cuh - CUDA bodies of ceas.h's *_cuda entry points: the attention-logit
   observables (row entropy H, N_eff, Var_p[s], sigma_qk, mean of s) computed on the
   device, and the controller-side reductions (pooling per head, gate scores). The
   controller (beta's Newton step, gating decisions, EMAs) stays on the host.

   Not a standalone header: ceas.h includes it at the end of its implementation section
   when compiled by nvcc (CEAS_IMPLEMENTATION + __CUDACC__), or by a C++ compiler with
   ATTNKIT_CUDA_SIM (tests/cuda_sim.h included first). It includes nothing from attnkit.

   ceas_attention_observables_from_moments_cuda: one thread per row turns the moments an
   attention forward gathered (tensor.h's layout) into row observables with the CPU's
   formulas, then the same per-head pool.
   Kernels: one block of one warp (CEAS__RT = 32 threads) per row of logits: the row max
   (a fixed tree, exact), then one pass with t = x - max and double accumulators of e^t, e^t t, e^t t^2,
   t, t^2 (the CPU's five sums), one fixed shared-memory tree for all five, and the CPU's finishing
   formulas (ceas__row_fin). Pooling: one block per head, fixed-tree sums in double
   (two passes: the pooled mean of s, then the pooled variance). No atomics: results
   are bit-identical run to run.
   Parity with the CPU path (tests/parity_ceas.cu): row and head observables rtol 1e-5,
   atol 1e-5 x the scale of the quantity (the CPU sums in float lanes and uses a
   polynomial e^x with relative error < 2e-7; the device sums in double with exp). */
#ifdef ATTNKIT_CUDA_SIM
#define CEAS__LAUNCH(k, g, b, sm, st, ...) ATTNKIT_SIM_LAUNCH(k, g, b, sm, st, __VA_ARGS__)
#define CEAS__DSMEM(T, name) AK_SIM_DYNAMIC_SHARED(T, name)
#else
#include <cuda_runtime.h>
#define CEAS__LAUNCH(k, g, b, sm, st, ...) k<<<(g), (b), (sm), (st)>>>(__VA_ARGS__)
#define CEAS__DSMEM(T, name) extern __shared__ __align__(16) unsigned char ceas__dsmem_[]; T *name = (T *)ceas__dsmem_
#endif

#define CEAS__NT 128 /* threads per row / per head block (a power of two) */

static __device__ int ceas__d_finitef(float x) { return x == x && x - x == 0.0f; }

/* sum over the block, fixed tree; every thread calls it */
static __device__ double ceas__d_bsum(double v, double *sh)
{
    int t = (int)threadIdx.x, s;
    double r;
    sh[t] = v;
    __syncthreads();
    for (s = CEAS__NT / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    r = sh[0];
    __syncthreads();
    return r;
}

/* one block of CEAS__RT threads (one warp) per row q of (B*H*T): the row observables.
   The max and the five sums each take one fixed shared-memory tree. */
#define CEAS__RT 32
static __global__ void ceas__k_rows(ceas_obs *rows, const float *logits, const float *beta, int H,
                                    int T, int causal)
{
    __shared__ double sh[5][CEAS__RT];
    __shared__ float shm[CEAS__RT];
    long long q = (long long)blockIdx.x;
    int i = (int)(q % T), hh = (int)((q / T) % H), n = causal ? i + 1 : T, j, s, tid = (int)threadIdx.x;
    const float *x = logits + (size_t)q * (size_t)T;
    float m = x[0];
    double z = 0.0, a = 0.0, b = 0.0, s1 = 0.0, s2 = 0.0;
    for (j = tid; j < n; j += CEAS__RT) m = x[j] > m ? x[j] : m;
    shm[tid] = m;
    __syncthreads();
    for (s = CEAS__RT / 2; s > 0; s >>= 1) {
        if (tid < s) shm[tid] = shm[tid + s] > shm[tid] ? shm[tid + s] : shm[tid];
        __syncthreads();
    }
    m = shm[0];
    for (j = tid; j < n; j += CEAS__RT) {
        float t = x[j] - m, tc = t > -87.0f ? t : -87.0f;
        double e = exp((double)tc);
        z += e;
        a += e * tc;
        b += e * tc * tc;
        s1 += t;
        s2 += (double)t * t;
    }
    sh[0][tid] = z; sh[1][tid] = a; sh[2][tid] = b; sh[3][tid] = s1; sh[4][tid] = s2;
    __syncthreads();
    for (s = CEAS__RT / 2; s > 0; s >>= 1) {
        if (tid < s) {
            int c;
            for (c = 0; c < 5; c++) sh[c][tid] += sh[c][tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        ceas_obs *o = rows + q;
        double bt = beta ? (double)beta[hh] : 1.0, ib = 1.0 / bt;
        double ea, eb, varx, H_, mu, var;
        z = sh[0][0]; a = sh[1][0]; b = sh[2][0]; s1 = sh[3][0]; s2 = sh[4][0];
        ea = a / z;
        eb = b / z;
        varx = eb - ea * ea;
        if (varx < 0) varx = 0;
        H_ = (double)logf((float)z) - ea;
        if (H_ < 0) H_ = 0;
        mu = s1 / n;
        var = s2 / n - mu * mu;
        if (var < 0) var = 0;
        o->H = (float)H_;
        o->n_eff = expf((float)H_);
        o->var_s = (float)(varx * ib * ib);
        o->sigma_qk = (float)(sqrt(var) * ib);
        o->mean_s = (float)(((double)m + mu) * ib);
        o->log_n = logf((float)n);
        o->n = n;
        if (!ceas__d_finitef(o->H) || !ceas__d_finitef(o->var_s) || !ceas__d_finitef(o->sigma_qk) ||
            !ceas__d_finitef(o->mean_s) || !ceas__d_finitef(o->n_eff))
            o->H = o->n_eff = o->var_s = o->sigma_qk = o->mean_s = __int_as_float(0x7fc00000);
    }
}

/* one block per output: pools rows base + blockIdx.x * head_off + r * stride + i * istride
   (r < R, i < inner) as ceas__pool does */
static __global__ void ceas__k_pool(ceas_obs *out, const ceas_obs *rows, long long head_off, int R,
                                    long long stride, int inner, long long istride)
{
    __shared__ double sh[CEAS__NT];
    const ceas_obs *base = rows + (size_t)blockIdx.x * (size_t)head_off;
    long long k, cnt = (long long)R * inner;
    double shh = 0, sv = 0, sl = 0, nn = 0, sm = 0, bad = 0, svar = 0, mu;
    for (k = threadIdx.x; k < cnt; k += CEAS__NT) {
        const ceas_obs *o = base + (size_t)(k / inner) * (size_t)stride + (size_t)(k % inner) * (size_t)istride;
        if (!ceas__d_finitef(o->H) || !ceas__d_finitef(o->var_s) || !ceas__d_finitef(o->sigma_qk) ||
            !ceas__d_finitef(o->mean_s) || !ceas__d_finitef(o->log_n) || o->n <= 0)
            bad += 1.0;
        shh += o->H;
        sv += o->var_s;
        sl += o->log_n;
        nn += (double)o->n;
        sm += (double)o->n * o->mean_s;
    }
    shh = ceas__d_bsum(shh, sh);
    sv = ceas__d_bsum(sv, sh);
    sl = ceas__d_bsum(sl, sh);
    nn = ceas__d_bsum(nn, sh);
    sm = ceas__d_bsum(sm, sh);
    bad = ceas__d_bsum(bad, sh);
    mu = sm / nn;
    for (k = threadIdx.x; k < cnt; k += CEAS__NT) {
        const ceas_obs *o = base + (size_t)(k / inner) * (size_t)stride + (size_t)(k % inner) * (size_t)istride;
        double d = o->mean_s - mu;
        svar += (double)o->n * ((double)o->sigma_qk * o->sigma_qk + d * d);
    }
    svar = ceas__d_bsum(svar, sh);
    if (threadIdx.x == 0) {
        ceas_obs *o = out + blockIdx.x;
        o->n = (long long)nn;
        if (bad > 0.0 || cnt == 0) {
            o->H = o->n_eff = o->var_s = o->sigma_qk = o->mean_s = o->log_n = __int_as_float(0x7fc00000);
        } else {
            o->H = (float)(shh / cnt);
            o->n_eff = (float)exp(shh / cnt);
            o->var_s = (float)(sv / cnt);
            o->sigma_qk = (float)sqrt(svar / nn);
            o->mean_s = (float)mu;
            o->log_n = (float)(sl / cnt);
        }
    }
}

/* one thread per row: the observables from the attention's softmax-pass moments, with
   ceas_attention_observables_from_moments' formulas (mom: stride floats per row) */
static __global__ void ceas__k_moments(ceas_obs *rows, const float *mom, int stride, const float *beta,
                                       int H, int T, long long nrows)
{
    long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const float *m;
    ceas_obs *o;
    double ib;
    float n;
    if (q >= nrows) return;
    m = mom + (size_t)q * (size_t)stride;
    o = rows + q;
    ib = 1.0 / (beta ? beta[(q / T) % H] : 1.0f);
    n = m[5];
    if (!ceas__d_finitef(m[0]) || !ceas__d_finitef(m[2]) || !ceas__d_finitef(m[3]) || !ceas__d_finitef(m[4]) ||
        !ceas__d_finitef(n) || !(n >= 1.0f) || !(n < 9.0e15f)) {
        o->H = o->n_eff = o->var_s = o->sigma_qk = o->mean_s = o->log_n = __int_as_float(0x7fc00000);
        o->n = 0;
        return;
    }
    o->H = m[0] > 0.0f ? m[0] : 0.0f;
    o->n_eff = expf(o->H);
    o->var_s = (float)((m[2] > 0.0f ? (double)m[2] : 0.0) * ib * ib);
    o->sigma_qk = (float)(sqrt(m[4] > 0.0f ? (double)m[4] : 0.0) * ib);
    o->mean_s = (float)((double)m[3] * ib);
    o->n = (long long)n;
    o->log_n = logf((float)o->n);
}

/* bad[0] = number of rows whose sigma_qk / n_eff the gate score cannot use; one block */
static __global__ void ceas__k_gate_check(double *bad, const ceas_obs *rows, long long n)
{
    __shared__ double sh[CEAS__NT];
    double c = 0.0;
    long long r;
    for (r = threadIdx.x; r < n; r += CEAS__NT) {
        const ceas_obs *o = rows + r;
        if (!ceas__d_finitef(o->sigma_qk) || !ceas__d_finitef(o->n_eff) || o->sigma_qk < 0 ||
            !(o->n_eff > 0))
            c += 1.0;
    }
    c = ceas__d_bsum(c, sh);
    if (threadIdx.x == 0) bad[0] = c;
}

/* raw: the literal beta sigma_qk sqrt(2 ln N_eff) (ln clamped at 0); else the normalised
   beta sigma_qk / sqrt(2 ln N_eff) (ln floored at 1e-6), as ceas_gate_score(_norm) */
static __global__ void ceas__k_gate(float *score, const ceas_obs *rows, const float *beta, int H,
                                    int T, long long n, int raw)
{
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double ln, bt;
    if (r >= n) return;
    bt = beta ? (double)beta[(r / T) % H] : 1.0;
    ln = log((double)rows[r].n_eff);
    if (raw) {
        if (ln < 0) ln = 0;
        score[r] = (float)(bt * rows[r].sigma_qk * sqrt(2.0 * ln));
    } else {
        if (ln < 1e-6) ln = 1e-6;
        score[r] = (float)(bt * rows[r].sigma_qk / sqrt(2.0 * ln));
    }
}

/* ------------------------------------------------------------ host side */
static int ceas__cuda_check(cudaError_t e) { return e == cudaSuccess ? CEAS_OK : CEAS_ECUDA; }
static int ceas__is_dev(const void *p)
{
    cudaPointerAttributes a;
    if (!p) return 0;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}
static int ceas__dtmp(void **p, size_t n, cudaStream_t s)
{
    if (cudaMallocAsync(p, n ? n : 1, s) != cudaSuccess) {
        (void)cudaGetLastError();
        *p = NULL;
        return CEAS_ENOMEM;
    }
    return CEAS_OK;
}
static size_t ceas__al(size_t n) { return (n + 255u) & ~(size_t)255u; }

CEASDEF int ceas_cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n > 0;
}

/* The device observables' workspace: the host call's (the (B,H,T) rows,
   ceas_attention_observables_workspace_size), then beta (H) floats and the heads (H), each
   256-byte aligned. Returns its bytes; base NULL: only those (the pointers NULL). */
static size_t ceas__obs_ws_carve(char *base, int B, int H, int T, ceas_obs **rows, float **beta,
                                 ceas_obs **heads)
{
    size_t off = 0;
    *rows = base ? (ceas_obs *)(base + off) : NULL;
    off += ceas__al(ceas_attention_observables_workspace_size(B, H, T));
    *beta = base ? (float *)(base + off) : NULL;
    off += ceas__al((size_t)H * sizeof(float));
    *heads = base ? (ceas_obs *)(base + off) : NULL;
    off += ceas__al((size_t)H * sizeof(ceas_obs));
    return off;
}

CEASDEF size_t ceas_attention_observables_cuda_workspace_size(int B, int H, int T)
{
    ceas_obs *rows, *heads;
    float *beta;
    if (B <= 0 || H <= 0 || T <= 0) return 0;
    return ceas__obs_ws_carve(NULL, B, H, T, &rows, &beta, &heads);
}

/* The two observables calls: rows from logits (moments NULL; arg = causal) or from
   moments (arg = their stride), then the per-head pool copied to the host. Inputs are
   checked by the callers except the device tests. */
static int ceas__obs_cuda(const float *logits, const float *moments, int B, int H, int T, int arg,
                          const float *beta, ceas_obs *rows, ceas_obs *heads, void *workspace,
                          cudaStream_t s)
{
    const long long nrows = (long long)B * H * T;
    void *own = NULL;
    ceas_obs *ro, *dheads, *wrows;
    float *dbeta = NULL, *wbeta;
    int h, rc = CEAS_OK;
    if (!ceas__is_dev(logits ? logits : moments) || (rows && !ceas__is_dev(rows)) ||
        (workspace && !ceas__is_dev(workspace)))
        return CEAS_EINVAL;
    if (!workspace) {
        if ((rc = ceas__dtmp(&own, ceas_attention_observables_cuda_workspace_size(B, H, T), s)) != CEAS_OK)
            return rc;
        workspace = own;
    }
    ceas__obs_ws_carve((char *)workspace, B, H, T, &wrows, &wbeta, &dheads);
    ro = rows ? rows : wrows;
    if (beta) dbeta = wbeta;
    if (beta)
        rc = ceas__cuda_check(cudaMemcpyAsync(dbeta, beta, sizeof(float) * (size_t)H, cudaMemcpyHostToDevice, s));
    if (rc == CEAS_OK) {
        if (logits)
            CEAS__LAUNCH(ceas__k_rows, (unsigned)nrows, CEAS__RT, 0, s, ro, logits, (const float *)dbeta, H, T,
                         arg ? 1 : 0);
        else
            CEAS__LAUNCH(ceas__k_moments, (unsigned)((nrows + 127) / 128), 128, 0, s, ro, moments, arg,
                         (const float *)dbeta, H, T, nrows);
        rc = ceas__cuda_check(cudaGetLastError());
    }
    /* the per-head pool always runs: a bad row makes its head NaN, which is the verdict */
    if (rc == CEAS_OK) {
        CEAS__LAUNCH(ceas__k_pool, (unsigned)H, CEAS__NT, 0, s, dheads, (const ceas_obs *)ro, (long long)T, B,
                     (long long)H * T, T, 1LL);
        rc = ceas__cuda_check(cudaGetLastError());
    }
    if (rc == CEAS_OK) {
        ceas_obs *hh = heads, *tmp = NULL;
        if (!hh) {
            tmp = (ceas_obs *)CEAS_MALLOC(sizeof(ceas_obs) * (size_t)H);
            if (!tmp) rc = CEAS_ENOMEM;
            hh = tmp;
        }
        if (rc == CEAS_OK)
            rc = ceas__cuda_check(cudaMemcpyAsync(hh, dheads, sizeof(ceas_obs) * (size_t)H, cudaMemcpyDeviceToHost, s));
        if (rc == CEAS_OK) rc = ceas__cuda_check(cudaStreamSynchronize(s));
        if (rc == CEAS_OK)
            for (h = 0; h < H; h++)
                if (!ceas__finite(hh[h].H)) rc = CEAS_EINVAL;
        if (tmp) CEAS_FREE(tmp);
    }
    if (own) cudaFreeAsync(own, s);
    return rc;
}

CEASDEF int ceas_attention_observables_cuda(const float *logits, int B, int H, int T, int causal,
                                            const float *beta, ceas_obs *rows, ceas_obs *heads,
                                            void *workspace, ceas_stream stream)
{
    long long nrows;
    if (!logits || B <= 0 || H <= 0 || T <= 0 || (!rows && !heads) || !ceas__beta_valid(beta, H)) return CEAS_EINVAL;
    if (causal != 0 && causal != 1) return CEAS_EINVAL; /* a boolean (issue 37 rule 4) */
    nrows = (long long)B * H * T;
    if ((double)nrows * (double)T > (double)((size_t)-1) / 8 || nrows > 2147483647LL)
        return CEAS_ERANGE;
    return ceas__obs_cuda(logits, NULL, B, H, T, causal, beta, rows, heads, workspace, (cudaStream_t)stream);
}

CEASDEF int ceas_attention_observables_from_moments_cuda(const float *moments, int B, int H, int T,
                                                         int stride, const float *beta,
                                                         ceas_obs *rows, ceas_obs *heads,
                                                         void *workspace, ceas_stream stream)
{
    long long nrows;
    if (!moments || B <= 0 || H <= 0 || T <= 0 || stride < 6 || (!rows && !heads) || !ceas__beta_valid(beta, H))
        return CEAS_EINVAL;
    nrows = (long long)B * H * T;
    if (nrows > 2147483647LL || (double)nrows * stride > (double)((size_t)-1) / 8) return CEAS_ERANGE;
    return ceas__obs_cuda(NULL, moments, B, H, T, stride, beta, rows, heads, workspace, (cudaStream_t)stream);
}

CEASDEF int ceas_pool_observables_cuda(ceas_obs *out, const ceas_obs *rows, int R,
                                       ceas_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    ceas_obs *d = NULL;
    int rc;
    if (!out || !rows || R <= 0) return CEAS_EINVAL;
    if (!ceas__is_dev(rows)) return CEAS_EINVAL;
    if ((rc = ceas__dtmp((void **)&d, sizeof(ceas_obs), s)) != CEAS_OK) return rc;
    CEAS__LAUNCH(ceas__k_pool, 1, CEAS__NT, 0, s, d, rows, 0LL, R, 1LL, 1, 0LL);
    rc = ceas__cuda_check(cudaGetLastError());
    if (rc == CEAS_OK) rc = ceas__cuda_check(cudaMemcpyAsync(out, d, sizeof(ceas_obs), cudaMemcpyDeviceToHost, s));
    if (rc == CEAS_OK) rc = ceas__cuda_check(cudaStreamSynchronize(s));
    cudaFreeAsync(d, s);
    if (rc == CEAS_OK && !ceas__finite(out->H)) rc = CEAS_EINVAL;
    return rc;
}

CEASDEF int ceas_gate_scores_cuda(float *score, const ceas_obs *rows, const float *beta, int B,
                                  int H, int T, ceas_stream stream)
{
    return ceas_gate_scores_mode_cuda(score, rows, beta, B, H, T, CEAS_GATE_NORMALISED, stream);
}

CEASDEF int ceas_gate_scores_mode_cuda(float *score, const ceas_obs *rows, const float *beta,
                                       int B, int H, int T, int mode, ceas_stream stream)
{
    cudaStream_t s = (cudaStream_t)stream;
    long long n;
    double bad = 0.0;
    char *w = NULL;
    float *dbeta = NULL;
    int rc;
    if (!score || !rows || B <= 0 || H <= 0 || T <= 0) return CEAS_EINVAL;
    if ((mode != CEAS_GATE_NORMALISED && mode != CEAS_GATE_RAW) || !ceas__beta_valid(beta, H)) return CEAS_EINVAL;
    n = (long long)B * H * T;
    if (!ceas__is_dev(score) || !ceas__is_dev(rows)) return CEAS_EINVAL;
    if ((rc = ceas__dtmp((void **)&w, ceas__al(sizeof(double)) + ceas__al(sizeof(float) * (size_t)H), s)) != CEAS_OK)
        return rc;
    if (beta) {
        dbeta = (float *)(w + ceas__al(sizeof(double)));
        rc = ceas__cuda_check(cudaMemcpyAsync(dbeta, beta, sizeof(float) * (size_t)H, cudaMemcpyHostToDevice, s));
    }
    if (rc == CEAS_OK) {
        CEAS__LAUNCH(ceas__k_gate_check, 1, CEAS__NT, 0, s, (double *)w, rows, n);
        rc = ceas__cuda_check(cudaGetLastError());
    }
    if (rc == CEAS_OK) rc = ceas__cuda_check(cudaMemcpyAsync(&bad, w, sizeof bad, cudaMemcpyDeviceToHost, s));
    if (rc == CEAS_OK) rc = ceas__cuda_check(cudaStreamSynchronize(s));
    if (rc == CEAS_OK && bad > 0.0) rc = CEAS_EINVAL; /* nothing written, as the CPU */
    if (rc == CEAS_OK) {
        CEAS__LAUNCH(ceas__k_gate, (unsigned)((n + 255) / 256), 256, 0, s, score, rows, (const float *)dbeta, H, T, n,
                     mode == CEAS_GATE_RAW);
        rc = ceas__cuda_check(cudaGetLastError());
    }
    cudaFreeAsync(w, s);
    return rc;
}
