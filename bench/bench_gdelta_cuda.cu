/* bench_gdelta_cuda.cu - gdelta.h's CUDA path (cuda/gdelta.cuh) on a GPU: issue 14's
   performance figures, ours and FLA's in one run.

   Run by `make gpu-check OUT=dir` (tools/gpu_check.sh: it installs the carried fla-core
   wheel from .whl/ first; docs/GPU.md gives the device call), or
     nvcc -O3 -std=c++17 -arch=native -I. -isystem /usr/include/stb \
          bench/bench_gdelta_cuda.cu -o bench_gdelta_cuda -lm && ./bench_gdelta_cuda
   from the repository root (the peer is bench/peer_fla.py, found by a relative path).

   1. Training (issue 14): gd_forward_cuda + gd_backward_cuda at B=4 T=2K H=16 D=128 and
      B=1 T=8K H=16 D=128 (Dk = Dv = D), chunk 64, log-gates log U(0.9, 1) (gate_is_log),
      beta U(0.1, 0.9), q/k/v U(-1, 1), L2-normalised q and k inside, scale 1/sqrt(D), no
      h0, no final state, every input gradient wanted (dq, dk, dv, dgates, dbeta). What our
      API takes: fp32 buffers in (B,H,T,D); cfg.math GD_MATH_BF16 rounds the chunk
      products' operands to bf16 on the tensor cores (fp32 accumulation, fp32 state), the
      headline; GD_MATH_FP32 (fp32 SIMT, the exact-parity path) is timed beside it for
      reference. Saved state and workspace are allocated once outside the timing; each
      forward and backward still runs its device-side input scan and reads one int back
      (the API's contract), which is timed. Gradients are zeroed before each iteration,
      outside the timing. Best of 5 after 2 warm-ups (best of 2 after 1 when an iteration
      takes over a second), cudaEvents on one stream.
   2. Peer, same run, same device, after ours (one process): FLA's chunk_gated_delta_rule
      (the fla-core wheel, carried to the device in .whl/) through bench/peer_fla.py at the
      same shapes and problem in FLA's layout (B,T,H,D): q/k/v/beta/dout bf16, log-gates
      fp32, use_qk_l2norm_in_kernel, the same scale, chunk 64, fwd+bwd with grads to q, k,
      v, g, beta; best of 10 CUDA-event timings after 3 warm-up calls (Triton compiles and
      autotunes there, untimed). FLA reads and writes bf16 tensors where we move fp32: a
      difference in what the two APIs take, not hidden. vs_fla = FLA ms / our bf16 ms
      (>= 1.0: we are at least as fast; issue target >= 1.0). n/a where the peer did not
      run, with the reason on the line above the last (no python3/torch, fla not on the
      path, a failure, or a timeout: GD_FLA_TIMEOUT seconds, default 140, so that the
      whole bench fits tools/gpu_check.sh's default 180 s per benchmark; a first run on a
      fresh machine compiles and autotunes FLA's Triton kernels, so docs/GPU.md's call
      gives it 300 s and the benchmark 420 s).
   3. Decode: gd_step_cuda for 512 sequences x 16 heads x (128 x 128) fp32 states in a
      512-slot table (slots a fixed random permutation), one token each (the step ignores
      cfg.math: fp32); tokens/s and the achieved state bandwidth (each state read and
      written once: 2 x 512 MiB) against a device-to-device cudaMemcpy of the same bytes
      in the same run (read + write counted; issue target >= 70%). The step's time
      includes its slot check and input scan and their one read-back (one stream sync).
   Built against the CPU simulation (g++ -std=c++17 -x c++ -DATTNKIT_CUDA_SIM -I. ...) it
   runs the same code at toy sizes (B=1 T=80 H=2 D=32 and B=2 T=40, decode N=8 H=2 D=32,
   no peer unless GD_FLA_IN_SIM is set) so its logic is checked without a GPU; those
   timings mean nothing.
   Exit status: 0 when our kernels ran (the peer may be n/a), 1 otherwise.
   Last line: bench_gdelta_cuda: vs_fla_2k=X vs_fla_8k=Y */
#ifdef ATTNKIT_CUDA_SIM
#include "tests/cuda_sim.h"
#define BG_SIM 1
#else
#include <cuda_runtime.h>
#define BG_SIM 0
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#define GDELTA_IMPLEMENTATION
#include "gdelta.h"

#define CK(x)                                                                          \
    do {                                                                               \
        cudaError_t e_ = (x);                                                          \
        if (e_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static unsigned long long rng = 0x243F6A8885A308D3ULL;
static float urand(void) /* [0, 1) */
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (float)((double)((rng * 0x2545F4914F6CDD1DULL) >> 11) / 9007199254740992.0);
}

/* n floats U(lo, hi) on the device; logv: their logarithms */
static float *dfill(size_t n, float lo, float hi, int logv)
{
    float *h = (float *)malloc(n * sizeof(float)), *d = NULL;
    size_t i;
    if (!h) { fprintf(stderr, "out of memory\n"); exit(1); }
    for (i = 0; i < n; i++) {
        h[i] = lo + (hi - lo) * urand();
        if (logv) h[i] = logf(h[i]);
    }
    CK(cudaMalloc((void **)&d, n * sizeof(float)));
    CK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    free(h);
    return d;
}

static void gd_log(const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "gdelta: %s\n", msg);
}

static const char *math_name(int m)
{
    return m == GD_MATH_BF16 ? "bf16" : m == GD_MATH_TF32 ? "tf32" : "fp32";
}

/* best fwd and fwd+bwd milliseconds of one shape, for each math mode in maths[0..nm);
   fb_ms[i] < 0 where that mode failed (the reason on stderr and stdout) */
static void train_case(int B, int T, int H, int D, const int *maths, int nm, cudaStream_t st,
                       double *fwd_ms, double *fb_ms)
{
    size_t nqk = (size_t)B * H * T * D, ng = (size_t)B * H * T, wsn = 0;
    float *q = dfill(nqk, -1, 1, 0), *k = dfill(nqk, -1, 1, 0), *v = dfill(nqk, -1, 1, 0);
    float *g = dfill(ng, 0.9f, 1.0f, 1), *be = dfill(ng, 0.1f, 0.9f, 0), *dr = dfill(nqk, -1, 1, 0);
    float *r, *dq, *dk, *dv, *dg, *db;
    void *ws = NULL;
    cudaEvent_t e0, e1, e2;
    int mi;
    CK(cudaMalloc((void **)&r, nqk * sizeof(float)));
    CK(cudaMalloc((void **)&dq, nqk * sizeof(float)));
    CK(cudaMalloc((void **)&dk, nqk * sizeof(float)));
    CK(cudaMalloc((void **)&dv, nqk * sizeof(float)));
    CK(cudaMalloc((void **)&dg, ng * sizeof(float)));
    CK(cudaMalloc((void **)&db, ng * sizeof(float)));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventCreate(&e2));
    for (mi = 0; mi < nm; mi++) {
        gd_config cfg = gd_config_default();
        gd_saved sv = gd_saved_init();
        int it, warm = 2, iters = 7, rc = GD_OK;
        size_t need;
        cfg.chunk_size = 64;
        cfg.gate_is_log = 1;
        cfg.normalize_qk = 1;
        cfg.scale = 1.0f / sqrtf((float)D);
        cfg.math = maths[mi];
        cfg.log = gd_log;
        need = gd_workspace_size_cuda(&cfg, B, H, T, D, D);
        if (need > wsn) {
            if (ws) CK(cudaFree(ws));
            CK(cudaMalloc(&ws, need));
            wsn = need;
        }
        fwd_ms[mi] = fb_ms[mi] = 1e30;
        for (it = 0; it < iters && rc == GD_OK; it++) {
            float a, b;
            CK(cudaMemsetAsync(dq, 0, nqk * sizeof(float), st));
            CK(cudaMemsetAsync(dk, 0, nqk * sizeof(float), st));
            CK(cudaMemsetAsync(dv, 0, nqk * sizeof(float), st));
            CK(cudaMemsetAsync(dg, 0, ng * sizeof(float), st));
            CK(cudaMemsetAsync(db, 0, ng * sizeof(float), st));
            CK(cudaEventRecord(e0, st));
            rc = gd_forward_cuda(&cfg, r, NULL, q, k, v, g, be, NULL, B, H, T, D, D, &sv, ws, st);
            if (rc != GD_OK) break;
            CK(cudaEventRecord(e1, st));
            rc = gd_backward_cuda(&cfg, &sv, dq, dk, dv, dg, db, NULL, dr, NULL, q, k, v, g, be,
                                  NULL, B, H, T, D, D, ws, st);
            if (rc != GD_OK) break;
            CK(cudaEventRecord(e2, st));
            CK(cudaEventSynchronize(e2));
            CK(cudaGetLastError());
            CK(cudaEventElapsedTime(&a, e0, e1));
            CK(cudaEventElapsedTime(&b, e0, e2));
            if (it == 0 && b > 1000.0f) { warm = 1; iters = 3; } /* slow: best of 2 after 1 */
            if (it >= warm) {
                if (a < fwd_ms[mi]) fwd_ms[mi] = a;
                if (b < fb_ms[mi]) fb_ms[mi] = b;
            }
        }
        if (rc != GD_OK) {
            printf("train B=%d T=%-5d H=%d D=%d math %s: failed: %s\n", B, T, H, D,
                   math_name(cfg.math), gd_strerror(rc));
            fwd_ms[mi] = fb_ms[mi] = -1.0;
        } else {
            printf("train B=%d T=%-5d H=%d D=%d math %s chunk 64: fwd %.3f ms, fwd+bwd %.3f ms, "
                   "%.0f tokens/s (saved %.1f MB, workspace %.1f MB)\n", B, T, H, D,
                   math_name(cfg.math), fwd_ms[mi], fb_ms[mi],
                   (double)B * T / (fb_ms[mi] * 1e-3), (double)sv.cap / 1e6, (double)need / 1e6);
        }
        fflush(stdout);
        gd_saved_free(&sv);
    }
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(g); cudaFree(be); cudaFree(dr);
    cudaFree(r); cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dg); cudaFree(db);
    if (ws) cudaFree(ws);
    cudaEventDestroy(e0); cudaEventDestroy(e1); cudaEventDestroy(e2);
}

/* decode step at N sequences x H heads x (D x D) states; returns 0 when it ran */
static int step_case(int N, int H, int D, cudaStream_t st)
{
    const int NS = N;
    gd_config cfg = gd_config_default();
    size_t state_bytes = (size_t)N * H * D * D * sizeof(float);
    float *table = dfill((size_t)NS * H * D * D, -0.1f, 0.1f, 0), *copy;
    float *q = dfill((size_t)N * H * D, -1, 1, 0), *k = dfill((size_t)N * H * D, -1, 1, 0);
    float *v = dfill((size_t)N * H * D, -1, 1, 0), *g = dfill((size_t)N * H, 0.9f, 1.0f, 0);
    float *be = dfill((size_t)N * H, 0.1f, 0.9f, 0), *r;
    int *hs = (int *)malloc(N * sizeof(int)), *ds, i, it, rc = GD_OK;
    cudaEvent_t e0, e1;
    float ms_step = 1e30f, ms_copy = 1e30f, t;
    cfg.log = gd_log;
    for (i = 0; i < N; i++) hs[i] = i;
    for (i = N - 1; i > 0; i--) {
        int j = (int)(urand() * (i + 1)), x = hs[i];
        hs[i] = hs[j];
        hs[j] = x;
    }
    CK(cudaMalloc((void **)&ds, N * sizeof(int)));
    CK(cudaMemcpy(ds, hs, N * sizeof(int), cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&r, (size_t)N * H * D * sizeof(float)));
    CK(cudaMalloc((void **)&copy, state_bytes));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (it = 0; it < 12; it++) {
        CK(cudaEventRecord(e0, st));
        rc = gd_step_cuda(&cfg, table, NS, ds, N, H, D, D, q, k, v, g, be, r, st);
        if (rc != GD_OK) break;
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= 2 && t < ms_step) ms_step = t;
        CK(cudaEventRecord(e0, st));
        CK(cudaMemcpyAsync(copy, table, state_bytes, cudaMemcpyDeviceToDevice, st));
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&t, e0, e1));
        if (it >= 2 && t < ms_copy) ms_copy = t;
    }
    if (rc != GD_OK) {
        printf("step N=%d H=%d D=%d: failed: %s\n", N, H, D, gd_strerror(rc));
    } else {
        double bw = 2.0 * (double)state_bytes / (ms_step * 1e-3) / 1e9;
        double cbw = 2.0 * (double)state_bytes / (ms_copy * 1e-3) / 1e9;
        printf("device-to-device copy of the %.1f MiB state table: %.3f ms, %.1f GB/s (read+write)\n",
               (double)state_bytes / (1 << 20), ms_copy, cbw);
        printf("step N=%d H=%d D=%d fp32 (any math): %.3f ms/step, %.0f tokens/s, state %.1f GB/s "
               "(read+write) = %.0f%% of copy (target >= 70%%; includes the input scan and its sync)\n",
               N, H, D, ms_step, N / (ms_step * 1e-3), bw, 100.0 * bw / cbw);
    }
    fflush(stdout);
    free(hs);
    cudaFree(table); cudaFree(copy); cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(g);
    cudaFree(be); cudaFree(r); cudaFree(ds);
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    return rc == GD_OK ? 0 : 1;
}

/* FLA peer: runs bench/peer_fla.py once for every shape (bf16); peer_fb[i] <= 0 where it
   gave no time; why: the reason when it gave none */
static void run_peer(const int (*shapes)[4], int ns, double *peer_fb, double *peer_f, char *why,
                     size_t nwhy)
{
    char cmd[512], line[512], last[512] = "", missing[512] = "";
    const char *to = getenv("GD_FLA_TIMEOUT");
    int i, tsec = to && atoi(to) > 0 ? atoi(to) : 140, got = 0, st;
    size_t n;
    FILE *p;
    for (i = 0; i < ns; i++) peer_fb[i] = peer_f[i] = -1.0;
    n = (size_t)snprintf(cmd, sizeof cmd, "timeout %d python3 bench/peer_fla.py bf16", tsec);
    for (i = 0; i < ns; i++)
        n += (size_t)snprintf(cmd + n, sizeof cmd - n, " %d:%d:%d:%d", shapes[i][0], shapes[i][1],
                              shapes[i][2], shapes[i][3]);
    snprintf(cmd + n, sizeof cmd - n, " 2>&1");
    fflush(stdout);
    p = popen(cmd, "r");
    if (!p) {
        snprintf(why, nwhy, "could not start python3 (popen failed)");
        return;
    }
    while (fgets(line, sizeof line, p)) {
        int b, t, h, d;
        double fb, f;
        line[strcspn(line, "\r\n")] = 0;
        if (sscanf(line, "peer_ms %d %d %d %d %lf %lf", &b, &t, &h, &d, &fb, &f) == 6) {
            for (i = 0; i < ns; i++)
                if (shapes[i][0] == b && shapes[i][1] == t && shapes[i][2] == h && shapes[i][3] == d) {
                    peer_fb[i] = fb;
                    peer_f[i] = f;
                    got++;
                }
        } else if (!strncmp(line, "peer_info ", 10)) {
            printf("peer: %s\n", line + 10);
        } else if (!strncmp(line, "peer_missing ", 13)) {
            snprintf(missing, sizeof missing, "%s", line + 13);
        } else if (line[0]) {
            snprintf(last, sizeof last, "%s", line); /* sh: python3: not found, a traceback's end */
        }
    }
    st = pclose(p);
    if (got < ns) {
        if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 124)
            snprintf(why, nwhy, "bench/peer_fla.py timed out after %d s (GD_FLA_TIMEOUT)", tsec);
        else if (missing[0])
            snprintf(why, nwhy, "%s", missing);
        else
            snprintf(why, nwhy, "bench/peer_fla.py gave no time (exit %d): %s",
                     st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, last[0] ? last : "no output");
    }
}

int main(void)
{
#if BG_SIM
    static const int shapes[2][4] = {{1, 80, 2, 32}, {2, 40, 2, 32}};
    const int SN = 8, SH = 2, SD = 32;
#else
    static const int shapes[2][4] = {{4, 2048, 16, 128}, {1, 8192, 16, 128}};
    const int SN = 512, SH = 16, SD = 128;
#endif
    static const int maths[2] = {GD_MATH_BF16, GD_MATH_FP32};
    cudaStream_t st;
    cudaDeviceProp prop;
    double fwd[2][2], fb[2][2], pfb[2], pf[2];
    char rs[2][32], why[600] = "";
    int i, bad = 0;
    if (!gd_cuda_available() || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        printf("bench_gdelta_cuda: no GPU\n");
        printf("bench_gdelta_cuda: vs_fla_2k=n/a vs_fla_8k=n/a\n");
        return 1;
    }
    printf("bench_gdelta_cuda: %s (sm_%d%d)%s\n", prop.name, prop.major, prop.minor,
           BG_SIM ? " - simulation: toy sizes, timings mean nothing" : "");
    CK(cudaStreamCreate(&st));
    for (i = 0; i < 2; i++) {
        train_case(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], maths, 2, st, fwd[i], fb[i]);
        if (fb[i][0] < 0 || fb[i][1] < 0) bad = 1;
    }
    if (step_case(SN, SH, SD, st)) bad = 1;
    CK(cudaStreamDestroy(st));
    if (BG_SIM && !getenv("GD_FLA_IN_SIM")) { /* GD_FLA_IN_SIM=1: checks the peer's plumbing */
        pfb[0] = pfb[1] = pf[0] = pf[1] = -1.0;
        snprintf(why, sizeof why, "not run in the CPU simulation");
    } else {
        run_peer(shapes, 2, pfb, pf, why, sizeof why);
    }
    for (i = 0; i < 2; i++) {
        char pm[64] = "n/a";
        if (pfb[i] > 0) snprintf(pm, sizeof pm, "%.3f ms (fwd %.3f)", pfb[i], pf[i]);
        if (pfb[i] > 0 && fb[i][0] > 0) snprintf(rs[i], sizeof rs[i], "%.2f", pfb[i] / fb[i][0]);
        else snprintf(rs[i], sizeof rs[i], "n/a");
        printf("fwd+bwd B=%d T=%d H=%d D=%d: ours bf16 %.3f ms, ours fp32 %.3f ms, FLA bf16 %s; "
               "FLA / ours bf16 = %s (>= 1.0: at least as fast)\n", shapes[i][0], shapes[i][1],
               shapes[i][2], shapes[i][3], fb[i][0], fb[i][1], pm, rs[i]);
    }
    if (pfb[0] <= 0 || pfb[1] <= 0) printf("peer: FLA n/a: %s\n", why[0] ? why : "no time");
    else if (fb[0][0] <= 0 || fb[1][0] <= 0) printf("peer: ratio n/a: our bf16 path failed (above)\n");
    printf("bench_gdelta_cuda: vs_fla_2k=%s vs_fla_8k=%s\n", rs[0], rs[1]);
    return bad;
}
