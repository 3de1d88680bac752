/* bench_polar_cuda.cu - polar.h's CUDA kernels (cuda/polar.cuh) on a GPU: issue 13's
   performance figures, ours and the peers' in one run.

   Run by `make gpu-check OUT=dir` (tools/gpu_check.sh puts peers/ on PYTHONPATH;
   docs/GPU.md gives the device call), or from the repository root
     nvcc -O3 -std=c++17 -arch=native -I. -isystem /usr/include/stb \
          bench/bench_polar_cuda.cu -o bench_polar_cuda -lm && ./bench_polar_cuda
   (the peers are bench/peer_polar.py, found by a relative path). GPU only: it exits 1
   without a device.
   1. Training shape of issue 13: polar_forward_cuda + polar_backward_cuda at B=1, H=16,
      Hkv=4 (GQA: query head h reads kv head h/4 in place), D=128, T in {2K, 4K, 8K, 16K},
      full causal, every gradient wanted (dq, dk, dv, dmag path, the five per-head
      parameter gradients). What our API takes: fp32 buffers (q, k, v, c, dc, dq, dk, dv);
      cfg.math = POLAR_MATH_BF16 rounds the tiles to bf16 on the tensor cores (fp32
      accumulation and statistics): the headline. POLAR_MATH_FP32 (SIMT, the exact-parity
      path) is timed beside it for reference while the run is under POLAR_BENCH_FP32_S
      seconds (default 60; later T print "skipped"). Saved state, workspace and gradients
      are allocated once per T outside the timing; gradients are zeroed before each
      iteration, outside the timing. Best of 5 after 1 warm-up (bf16) and of 3 after 1
      (fp32), cudaEvents on the default stream. TFLOP/s counts causal attention's matmuls
      for everyone alike: forward 2, backward 5 (score recompute, ds.v, dq, dk, dv), each
      2*B*H*D*T*(T+1)/2 FLOPs. After the timing the last iteration's c, dq and dk of the
      two modes are compared on the host (max|bf16 - fp32| / max|fp32| per tensor; the
      parity tests' tolerance against the CPU is 2e-2): a device-side sanity check of the
      tensor-core path at long T, not a parity test.
   2. Decode: batch 512, context 2K and 8K (every sequence full), H=16, Hkv=4, D=128,
      block size 16, shuffled block table; tokens/s and achieved bandwidth (K and V bytes
      read once per (sequence, kv head)) against a device-to-device cudaMemcpy of 1 GiB
      (read + write counted) measured in the same run (issue target >= 60%). The decode
      runs fp32 in every math mode. Skipped when the cache does not fit.
   3. Peers, same run, same device, after ours (one Python process each; bench/
      peer_polar.py): (a) PyTorch SDPA restricted to the flash backend (FA2), causal,
      bf16 q/k/v/dout, GQA through enable_gqa=True (K/V keep 4 heads; the peer falls back
      to K/V repeated to 16 heads outside the timing if this torch refuses, and says so on
      its peer line); (b) kreasof-ai/atma's Triton polar kernel (kernel/polar_triton.py,
      copied into the git-ignored peers/ by tools/fetch_peers.sh atma and carried to the
      device, never committed), bf16 q/k/v and output gradients, fp32 parameters, the
      same problem as ours; its kernels take K/V with H heads, so its headline time has
      K/V repeated once outside the timing (kernel against kernel) and the time with the
      repeat_interleave and its backward inside the step is printed beside it. Both:
      best of 10 CUDA-event timings after 3 warm-ups (Triton compiles there, untimed).
      The peers read and write bf16 where our API moves fp32: a difference in what the
      APIs take, not hidden. Each peer's timeout is the smaller of its cap (SDPA 60 s,
      atma 150 s) and what is left of POLAR_BENCH_BUDGET seconds (default: gpu_check's
      per-benchmark timeout GPU_CHECK_BENCH_TIMEOUT, 180 s unless set, less 10 s).
   Ratios: over_sdpa = our bf16 fwd+bwd ms / SDPA flash's (issue target <= 1.5 at 4K and
   16K); vs_atma = atma's ms / our bf16 ms (issue target >= 1.0). n/a where a peer gave no
   time, with the reason on a `peer <name>: n/a: ...` line above the last.
   Built against the CPU simulation (g++ -std=c++17 -x c++ -DATTNKIT_CUDA_SIM -I. ...) it
   runs the same code at toy sizes (T 40/64/100/128, 1 timed iteration, decode batch 8, context
   64/128, a 64 MiB copy, no peers unless POLAR_BENCH_SIM_PEERS is set: then it runs
   whatever bench/peer_polar.py the working directory has, a stand-in that checks the
   parsing) so that its logic is checked on machines without a GPU; those timings mean
   nothing.
   Last line: bench_polar_cuda: over_sdpa_4k=X over_sdpa_16k=Y vs_atma_4k=Z vs_atma_16k=W
   Exit status: 0 when our kernels ran and gave finite outputs (peers may be n/a), 1
   otherwise. */
#ifdef ATTNKIT_CUDA_SIM
#include "tests/cuda_sim.h"
#define BP_SIM 1
#else
#include <cuda_runtime.h>
#define BP_SIM 0
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#define POLAR_IMPLEMENTATION
#include "polar.h"

#define NT 4 /* training lengths */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double env_s(const char *name, double dflt)
{
    const char *s = getenv(name);
    return s && atof(s) > 0 ? atof(s) : dflt;
}

/* n floats U(-scale/2, scale/2) on the device; above 16 Mi floats a 16 Mi-float random
   block is repeated (the timings do not depend on the values, and the host loop stays
   short for the 17 GB decode caches) */
static float *dfill(size_t n, float scale, unsigned seed)
{
    const size_t blk = (size_t)1 << (BP_SIM ? 16 : 24);
    size_t m = n < blk ? n : blk, i;
    float *h = (float *)malloc((m ? m : 1) * sizeof(float)), *d = NULL;
    unsigned long long s = 0x9E3779B97F4A7C15ULL * (seed + 1);
    if (!h || cudaMalloc((void **)&d, (n ? n : 1) * sizeof(float)) != cudaSuccess) {
        fprintf(stderr, "bench_polar_cuda: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (i = 0; i < m; i++) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        h[i] = scale * ((float)((s * 0x2545F4914F6CDD1DULL) >> 40) / 16777216.0f - 0.5f);
    }
    for (i = 0; i < n; i += m)
        cudaMemcpy(d + i, h, (n - i < m ? n - i : m) * sizeof(float), cudaMemcpyHostToDevice);
    free(h);
    return d;
}

struct dparams {
    float *lg, *nb, *ns, *mb, *vn;
    polar_params p;
    dparams(int H, int D)
    {
        lg = dfill(H, 0.0f, 21); nb = dfill(H, 0.0f, 22); ns = dfill(H, 0.0f, 23); mb = dfill(H, 0.0f, 24);
        vn = dfill((size_t)H * D, 0.2f, 25);
        p.len_gain_raw = lg; p.null_base = nb; p.null_slope_raw = ns; p.mag_beta_raw = mb; p.v_null = vn;
    }
    ~dparams() { cudaFree(lg); cudaFree(nb); cudaFree(ns); cudaFree(mb); cudaFree(vn); }
};

/* the inputs of one training length */
struct fb_in {
    int B, H, Hkv, T, D;
    size_t nq, nk, nr;
    float *q, *k, *v, *dc, *dmag;
    dparams *dp;
};

static void fb_in_init(fb_in *in, int T)
{
    in->B = 1; in->H = 16; in->Hkv = 4; in->T = T; in->D = 128;
    in->nq = (size_t)in->B * in->H * T * in->D;
    in->nk = (size_t)in->B * in->Hkv * T * in->D;
    in->nr = (size_t)in->B * in->H * T;
    in->q = dfill(in->nq, 2.0f, 1); in->k = dfill(in->nk, 2.0f, 2); in->v = dfill(in->nk, 2.0f, 3);
    in->dc = dfill(in->nq, 1.0f, 7); in->dmag = dfill(in->nr, 1.0f, 8);
    in->dp = new dparams(in->H, in->D);
}

static void fb_in_free(fb_in *in)
{
    cudaFree(in->q); cudaFree(in->k); cudaFree(in->v); cudaFree(in->dc); cudaFree(in->dmag);
    delete in->dp;
}

/* one math mode at one length: best forward and backward ms of `iters` timed iterations
   after one warm-up; c, dq, dk of the last iteration copied into hc, hdq, hdk (host, may
   be NULL). Returns POLAR_OK or the first error (then the times are -1). */
static int time_fb(const fb_in *in, int math, int iters, double *fwd_ms, double *bwd_ms, float *hc,
                   float *hdq, float *hdk)
{
    const int B = in->B, H = in->H, Hkv = in->Hkv, T = in->T, D = in->D;
    polar_config cfg = polar_config_default();
    float *c, *mag, *stats, *dq, *dk, *dv, *gh;
    const size_t ngh = (size_t)4 * H + (size_t)H * D;
    void *ws = NULL;
    polar_state st;
    polar_grads gr;
    cudaEvent_t a, b, m;
    float t1, t2;
    int it, rc = POLAR_OK;
    cfg.math = math;
    *fwd_ms = *bwd_ms = -1.0;
    c = dfill(in->nq, 0.0f, 4); mag = dfill(in->nr, 0.0f, 5); stats = dfill(in->nr * POLAR_NSTAT, 0.0f, 6);
    dq = dfill(in->nq, 0.0f, 9); dk = dfill(in->nk, 0.0f, 10); dv = dfill(in->nk, 0.0f, 11);
    gh = dfill(ngh, 0.0f, 12);
    st.stats = stats; st.probs = NULL;
    gr.len_gain_raw = gh; gr.null_base = gh + H; gr.null_slope_raw = gh + 2 * H; gr.mag_beta_raw = gh + 3 * H;
    gr.v_null = gh + 4 * H;
    if (cudaMalloc(&ws, polar_workspace_size_cuda(&cfg, B, H, Hkv, T, D)) != cudaSuccess) {
        fprintf(stderr, "bench_polar_cuda: out of memory (workspace)\n");
        exit(1);
    }
    cudaEventCreate(&a); cudaEventCreate(&m); cudaEventCreate(&b);
    double bf = 1e30, bb = 1e30;
    for (it = 0; it <= iters && rc == POLAR_OK; it++) {
        cudaMemsetAsync(dq, 0, in->nq * sizeof(float), 0);
        cudaMemsetAsync(dk, 0, in->nk * sizeof(float), 0);
        cudaMemsetAsync(dv, 0, in->nk * sizeof(float), 0);
        cudaMemsetAsync(gh, 0, ngh * sizeof(float), 0);
        cudaEventRecord(a, 0);
        rc = polar_forward_cuda(&cfg, c, mag, &st, in->q, in->k, in->v, &in->dp->p, B, H, Hkv, T, D, NULL, NULL);
        cudaEventRecord(m, 0);
        if (rc == POLAR_OK)
            rc = polar_backward_cuda(&cfg, dq, dk, dv, &gr, in->dc, in->dmag, c, mag, &st, in->q, in->k, in->v,
                                     &in->dp->p, B, H, Hkv, T, D, ws, NULL);
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        if (rc == POLAR_OK && cudaGetLastError() != cudaSuccess) rc = POLAR_ECUDA;
        cudaEventElapsedTime(&t1, a, m);
        cudaEventElapsedTime(&t2, m, b);
        if (it > 0 && t1 < bf) bf = t1;
        if (it > 0 && t2 < bb) bb = t2;
    }
    if (rc == POLAR_OK) {
        *fwd_ms = bf;
        *bwd_ms = bb;
        if (hc) cudaMemcpy(hc, c, in->nq * sizeof(float), cudaMemcpyDeviceToHost);
        if (hdq) cudaMemcpy(hdq, dq, in->nq * sizeof(float), cudaMemcpyDeviceToHost);
        if (hdk) cudaMemcpy(hdk, dk, in->nk * sizeof(float), cudaMemcpyDeviceToHost);
    }
    cudaEventDestroy(a); cudaEventDestroy(m); cudaEventDestroy(b);
    cudaFree(c); cudaFree(mag); cudaFree(stats); cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(gh);
    cudaFree(ws);
    return rc;
}

/* max|x - ref| / max|ref|; +inf when x holds a non-finite value */
static double rel_err(const float *x, const float *ref, size_t n)
{
    double e = 0.0, r = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        if (!isfinite(x[i])) return INFINITY;
        if (fabs((double)x[i] - ref[i]) > e) e = fabs((double)x[i] - ref[i]);
        if (fabs((double)ref[i]) > r) r = fabs((double)ref[i]);
    }
    return r > 0 ? e / r : e;
}

static int all_finite(const float *x, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

/* device-to-device copy bandwidth in GB/s (read + write) */
static double copy_gbps(void)
{
    const size_t n = (size_t)1 << (BP_SIM ? 26 : 30);
    void *x = NULL, *y = NULL;
    cudaEvent_t a, b;
    float ms, best = 1e30f;
    int it;
    if (cudaMalloc(&x, n) != cudaSuccess || cudaMalloc(&y, n) != cudaSuccess) return -1.0;
    cudaMemset(x, 1, n);
    cudaEventCreate(&a); cudaEventCreate(&b);
    for (it = 0; it < 5; it++) {
        cudaEventRecord(a, 0);
        cudaMemcpy(y, x, n, cudaMemcpyDeviceToDevice);
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        if (it > 0 && ms < best) best = ms;
    }
    cudaEventDestroy(a); cudaEventDestroy(b);
    cudaFree(x); cudaFree(y);
    return 2.0 * (double)n / (best * 1e-3) / 1e9;
}

/* decode: returns ms per step (best of 5 after 1 warm-up), -1 if it does not fit, -2 on
   an error */
static double time_decode(int ctx, double *bytes)
{
    const int B = BP_SIM ? 8 : 512, H = 16, Hkv = 4, D = 128, bs = 16, maxb = ctx / bs, nblk = B * maxb;
    const size_t ncache = (size_t)nblk * Hkv * bs * D;
    size_t fr = 0, tot = 0;
    polar_config cfg = polar_config_default();
    int *tab, *lens, *d_tab, *d_len, i, rc = POLAR_OK;
    float *kc, *vc, *q, *c, *mag, ms, best = 1e30f;
    cudaEvent_t a, b;
    cudaMemGetInfo(&fr, &tot);
    if ((double)ncache * 2 * sizeof(float) > 0.85 * (double)fr) return -1.0;
    dparams dp(H, D);
    kc = dfill(ncache, 2.0f, 31);
    vc = dfill(ncache, 2.0f, 32);
    q = dfill((size_t)B * H * D, 2.0f, 33);
    c = dfill((size_t)B * H * D, 0.0f, 34);
    mag = dfill((size_t)B * H, 0.0f, 35);
    tab = (int *)malloc(sizeof(int) * (size_t)nblk);
    lens = (int *)malloc(sizeof(int) * B);
    for (i = 0; i < nblk; i++) tab[i] = i;
    for (i = nblk - 1; i > 0; i--) { /* shuffled physical blocks */
        int j = (int)(((unsigned long long)i * 2654435761ULL + 12345ULL) % (unsigned long long)(i + 1)), t = tab[i];
        tab[i] = tab[j];
        tab[j] = t;
    }
    for (i = 0; i < B; i++) lens[i] = ctx;
    cudaMalloc((void **)&d_tab, sizeof(int) * (size_t)nblk);
    cudaMalloc((void **)&d_len, sizeof(int) * B);
    cudaMemcpy(d_tab, tab, sizeof(int) * (size_t)nblk, cudaMemcpyHostToDevice);
    cudaMemcpy(d_len, lens, sizeof(int) * B, cudaMemcpyHostToDevice);
    cudaEventCreate(&a); cudaEventCreate(&b);
    for (i = 0; i < 6 && rc == POLAR_OK; i++) {
        cudaEventRecord(a, 0);
        rc = polar_decode_cuda(&cfg, c, mag, q, kc, vc, d_tab, d_len, &dp.p, B, H, Hkv, D, bs, nblk, maxb, NULL);
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        if (i > 0 && ms < best) best = ms;
    }
    if (rc != POLAR_OK) fprintf(stderr, "bench_polar_cuda: polar_decode_cuda: %s\n", polar_strerror(rc));
    *bytes = 2.0 * (double)B * ctx * Hkv * D * sizeof(float);
    cudaEventDestroy(a); cudaEventDestroy(b);
    cudaFree(kc); cudaFree(vc); cudaFree(q); cudaFree(c); cudaFree(mag); cudaFree(d_tab); cudaFree(d_len);
    free(tab); free(lens);
    return rc == POLAR_OK ? best : -2.0;
}

/* one peer through bench/peer_polar.py, all lengths in one process (bf16, B=1 H=16 Hkv=4
   D=128): fb[i] (and fbx[i], atma's peer_ms_gqa; may be NULL) <= 0 where it gave no time;
   why: the reason when it gave none */
static void run_peer(const char *peer, const int *Ts, int nt, int tsec, double *fb, double *fbx, char *why,
                     size_t nwhy)
{
    char cmd[512], line[1024], last[512] = "", missing[512] = "";
    int i, got = 0, st;
    size_t n;
    FILE *p;
    for (i = 0; i < nt; i++) {
        fb[i] = -1.0;
        if (fbx) fbx[i] = -1.0;
    }
    n = (size_t)snprintf(cmd, sizeof cmd, "timeout -k 5 %d python3 bench/peer_polar.py %s bf16", tsec, peer);
    for (i = 0; i < nt; i++) n += (size_t)snprintf(cmd + n, sizeof cmd - n, " 1:16:4:%d:128", Ts[i]);
    snprintf(cmd + n, sizeof cmd - n, " 2>&1");
    fflush(stdout);
    p = popen(cmd, "r");
    if (!p) {
        snprintf(why, nwhy, "could not start python3 (popen failed)");
        return;
    }
    while (fgets(line, sizeof line, p)) {
        int b, h, hk, t, d, x;
        double f1, f2;
        line[strcspn(line, "\r\n")] = 0;
        if ((x = !strncmp(line, "peer_ms_gqa ", 12)) || !strncmp(line, "peer_ms ", 8)) {
            if (sscanf(line + (x ? 12 : 8), "%d %d %d %d %d %lf %lf", &b, &h, &hk, &t, &d, &f1, &f2) != 7) continue;
            for (i = 0; i < nt; i++)
                if (Ts[i] == t && b == 1 && h == 16 && hk == 4 && d == 128) {
                    if (!x) {
                        fb[i] = f1;
                        got++;
                    } else if (fbx) {
                        fbx[i] = f1;
                    }
                }
        } else if (!strncmp(line, "peer_info ", 10)) {
            printf("peer: %s\n", line + 10);
        } else if (!strncmp(line, "peer_missing ", 13)) {
            snprintf(missing, sizeof missing, "%.500s", line + 13);
        } else if (line[0]) {
            snprintf(last, sizeof last, "%.500s", line); /* sh: python3: not found, a traceback's end */
            fprintf(stderr, "peer %s: %s\n", peer, line); /* kept in gpu-check's logs */
        }
    }
    st = pclose(p);
    if (got < nt) {
        if (st != -1 && WIFEXITED(st) && (WEXITSTATUS(st) == 124 || WEXITSTATUS(st) == 137))
            snprintf(why, nwhy, "bench/peer_polar.py %s timed out after %d s (%d of %d lengths timed)", peer, tsec,
                     got, nt);
        else if (missing[0])
            snprintf(why, nwhy, "%s (%d of %d lengths timed)", missing, got, nt);
        else
            snprintf(why, nwhy, "bench/peer_polar.py %s exited %d with %d of %d lengths timed: %s", peer,
                     st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, got, nt, last[0] ? last : "no output");
    }
}

static void fmt_ratio(char *s, size_t n, double num, double den)
{
    if (num > 0 && den > 0) snprintf(s, n, "%.2f", num / den);
    else snprintf(s, n, "n/a");
}

static void fmt_ms(char *s, size_t n, double ms)
{
    if (ms > 0) snprintf(s, n, "%.3f", ms);
    else snprintf(s, n, "n/a");
}

int main(void)
{
#if BP_SIM
    static const int Ts[NT] = {40, 64, 100, 128}, Cs[] = {64, 128};
    const int it_bf16 = 1, it_fp32 = 1;
#else
    static const int Ts[NT] = {2048, 4096, 8192, 16384}, Cs[] = {2048, 8192};
    const int it_bf16 = 5, it_fp32 = 3;
#endif
    const double t0 = now_s(), budget = env_s("POLAR_BENCH_BUDGET", env_s("GPU_CHECK_BENCH_TIMEOUT", 180.0) - 10.0),
                 fp32_s = env_s("POLAR_BENCH_FP32_S", 60.0);
    double fw[2][NT], bw[2][NT], sd[NT], at[NT], atx[NT], cbw;
    char why_sd[600] = "", why_at[600] = "";
    cudaDeviceProp prop;
    int n = 0, i, bad = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1 || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        printf("bench_polar_cuda: no CUDA device\n");
        printf("bench_polar_cuda: over_sdpa_4k=n/a over_sdpa_16k=n/a vs_atma_4k=n/a vs_atma_16k=n/a\n");
        return 1;
    }
    printf("bench_polar_cuda: %s (sm_%d%d)%s\n", prop.name, prop.major, prop.minor,
           BP_SIM ? " - simulation: toy sizes, timings mean nothing" : "");
    printf("fwd+bwd B=1 H=16 Hkv=4 D=128 full causal; ours: fp32 buffers, math bf16 (tensor cores) and fp32 (SIMT)\n");
    printf("%6s %4s %9s %9s %9s %8s   %s\n", "T", "math", "fwd_ms", "bwd_ms", "tot_ms", "TFLOP/s", "bf16 vs fp32 on device (c, dq, dk)");
    for (i = 0; i < NT; i++) {
        const int T = Ts[i];
        const double mm = 2.0 * 16 * 128 * (double)T * (T + 1) / 2.0;
        fb_in in;
        float *hc[2] = {NULL, NULL}, *hdq[2] = {NULL, NULL}, *hdk[2] = {NULL, NULL};
        int md, rc;
        fb_in_init(&in, T);
        for (md = 0; md < 2; md++) {
            hc[md] = (float *)malloc(in.nq * sizeof(float));
            hdq[md] = (float *)malloc(in.nq * sizeof(float));
            hdk[md] = (float *)malloc(in.nk * sizeof(float));
            if (!hc[md] || !hdq[md] || !hdk[md]) {
                fprintf(stderr, "bench_polar_cuda: out of host memory\n");
                return 1;
            }
        }
        for (md = 0; md < 2; md++) { /* 0: bf16 (headline), 1: fp32 (reference) */
            fw[md][i] = bw[md][i] = -1.0;
            if (md == 1 && now_s() - t0 > fp32_s) {
                printf("%6d %4s %9s   (skipped: the run passed POLAR_BENCH_FP32_S = %.0f s)\n", T, "fp32", "-", fp32_s);
                continue;
            }
            rc = time_fb(&in, md ? POLAR_MATH_FP32 : POLAR_MATH_BF16, md ? it_fp32 : it_bf16, &fw[md][i], &bw[md][i],
                         hc[md], hdq[md], hdk[md]);
            if (rc != POLAR_OK) {
                printf("%6d %4s   failed: %s\n", T, md ? "fp32" : "bf16", polar_strerror(rc));
                bad = 1;
                continue;
            }
            printf("%6d %4s %9.3f %9.3f %9.3f %8.2f", T, md ? "fp32" : "bf16", fw[md][i], bw[md][i], fw[md][i] + bw[md][i],
                   7 * mm / ((fw[md][i] + bw[md][i]) * 1e9));
            if (!all_finite(hc[md], in.nq) || !all_finite(hdq[md], in.nq) || !all_finite(hdk[md], in.nk)) {
                printf("   NON-FINITE outputs\n");
                bad = 1;
            } else if (md == 1 && fw[0][i] > 0) {
                double ec = rel_err(hc[0], hc[1], in.nq), eq = rel_err(hdq[0], hdq[1], in.nq),
                       ek = rel_err(hdk[0], hdk[1], in.nk);
                printf("   %.1e %.1e %.1e%s\n", ec, eq, ek,
                       ec > 2e-2 || eq > 2e-2 || ek > 2e-2 ? "  above 2e-2: look at the parity run" : "");
            } else {
                printf("\n");
            }
            fflush(stdout);
        }
        for (md = 0; md < 2; md++) {
            free(hc[md]); free(hdq[md]); free(hdk[md]);
        }
        fb_in_free(&in);
    }
    cbw = copy_gbps();
    printf("device-to-device copy: %.1f GB/s (read + write)\n", cbw);
    for (i = 0; i < 2; i++) {
        int ctx = Cs[i];
        double bytes = 0, ms = time_decode(ctx, &bytes);
        if (ms == -1.0) {
            printf("decode ctx=%d: skipped (the cache does not fit)\n", ctx);
            continue;
        }
        if (ms < 0) {
            printf("decode ctx=%d: failed\n", ctx);
            bad = 1;
            continue;
        }
        printf("decode B=%d H=16 Hkv=4 D=128 ctx=%d fp32: %.3f ms/step, %.0f tokens/s, %.1f GB/s = %.0f%% of copy\n",
               BP_SIM ? 8 : 512, ctx, ms, (BP_SIM ? 8.0 : 512.0) / (ms * 1e-3), bytes / (ms * 1e-3) / 1e9,
               cbw > 0 ? 100.0 * bytes / (ms * 1e-3) / 1e9 / cbw : 0.0);
        fflush(stdout);
    }

    /* peers, after ours (their processes hold no device memory while ours runs) */
    for (i = 0; i < NT; i++) sd[i] = at[i] = atx[i] = -1.0;
    if (BP_SIM && !getenv("POLAR_BENCH_SIM_PEERS")) {
        snprintf(why_sd, sizeof why_sd, "not run in the CPU simulation");
        snprintf(why_at, sizeof why_at, "not run in the CPU simulation");
    } else {
        int left = (int)(budget - (now_s() - t0)) - 3;
        if (left < 10) snprintf(why_sd, sizeof why_sd, "POLAR_BENCH_BUDGET (%.0f s) spent before the peer", budget);
        else run_peer("sdpa", Ts, NT, left < 60 ? left : 60, sd, NULL, why_sd, sizeof why_sd);
        left = (int)(budget - (now_s() - t0)) - 3;
        if (left < 10) snprintf(why_at, sizeof why_at, "POLAR_BENCH_BUDGET (%.0f s) spent before the peer", budget);
        else run_peer("atma", Ts, NT, left < 150 ? left : 150, at, atx, why_at, sizeof why_at);
    }
    printf("\nfwd+bwd ms (TFLOP/s, same FLOP count for all); over_sdpa = ours bf16 / SDPA (target <= 1.5 at 4K, 16K);\n"
           "vs_atma = atma / ours bf16 (target >= 1.0); atma+rep: atma with K/V repeat_interleave in the step\n");
    printf("%6s %17s %17s %17s %9s %17s %9s %8s\n", "T", "ours_bf16", "ours_fp32", "sdpa_fa2", "over_sdpa", "atma",
           "atma+rep", "vs_atma");
    for (i = 0; i < NT; i++) {
        const int T = Ts[i];
        const double fl = 7 * 2.0 * 16 * 128 * (double)T * (T + 1) / 2.0 / 1e9;
        double ob = fw[0][i] > 0 ? fw[0][i] + bw[0][i] : -1.0, of = fw[1][i] > 0 ? fw[1][i] + bw[1][i] : -1.0;
        char s[5][32], r1[16], r2[16], x[16];
        const double ms[4] = {ob, of, sd[i], at[i]};
        int j;
        for (j = 0; j < 4; j++) {
            if (ms[j] > 0) snprintf(s[j], sizeof s[j], "%.3f (%.0f)", ms[j], fl / ms[j]);
            else snprintf(s[j], sizeof s[j], "n/a");
        }
        fmt_ratio(r1, sizeof r1, ob, sd[i]);
        fmt_ratio(r2, sizeof r2, at[i], ob);
        fmt_ms(x, sizeof x, atx[i]);
        printf("%6d %17s %17s %17s %9s %17s %9s %8s\n", T, s[0], s[1], s[2], r1, s[3], x, r2);
    }
    if (why_sd[0]) printf("peer sdpa: n/a: %s\n", why_sd);
    if (why_at[0]) printf("peer atma: n/a: %s\n", why_at);
    {
        char a[16], b[16], c[16], d[16];
        double o4 = fw[0][1] > 0 ? fw[0][1] + bw[0][1] : -1.0, o16 = fw[0][3] > 0 ? fw[0][3] + bw[0][3] : -1.0;
        fmt_ratio(a, sizeof a, o4, sd[1]);
        fmt_ratio(b, sizeof b, o16, sd[3]);
        fmt_ratio(c, sizeof c, at[1], o4);
        fmt_ratio(d, sizeof d, at[3], o16);
        if ((o4 <= 0 || o16 <= 0) && (sd[1] > 0 || at[1] > 0)) printf("ratios n/a: our bf16 path failed (above)\n");
        printf("bench_polar_cuda: over_sdpa_4k=%s over_sdpa_16k=%s vs_atma_4k=%s vs_atma_16k=%s\n", a, b, c, d);
    }
    return bad;
}
