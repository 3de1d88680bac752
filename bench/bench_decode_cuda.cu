/* bench_decode_cuda.cu - token-by-token decoding of the examples' model (examples/common/model.h,
   "Token-by-token decoding", on a device model: mdl_create_on(..., MDL_DEVICE_CUDA, ...), the
   ex_dec_* ops of examples/common/exctx.cuh) on a GPU, issue 42 item 4: per-token latency at
   batch 1, tokens/s at batch 512, the cost of seed 000's cached prior, beside a PyTorch eager
   model with a K/V cache on the same GPU (bench/torch_decode.py --device cuda) in the same run.
   The GPU twin of bench/bench_decode.c (the CPU's): the same shape, architectures, protocol and
   key=value lines where they apply.

   Run by the GPU kit (tools/gpu_run.sh phase b / 2, docs/GPU.md) or `make gpu-check`; built
   here by `make build/cuda/bench_decode_cuda` (nvcc; this file is the whole program: it
   includes examples/common/impl.c, so under nvcc every op the model calls has its CUDA body,
   layers.c and model.c).
   Simulation smoke run (tests/cuda_sim.h: every call is checked, every time is meaningless;
   g++ -O0 with ASan + UBSan, about 1 CPU-minute to run on 2026-11-27; not in `make test`):
     make build/sim-g++/bench_decode_cuda && build/sim-g++/bench_decode_cuda --quick \
         --no-torch --vocab 64 --contexts 32 --batch 4 --batch-context 32 --steps 2

   Shape (bench_decode's): d 128, 4 layers, 4 heads (head width 32), vocab 50257 (--vocab),
   FFN 4C GELU, LayerNorm, learned positions, tied head, mdl_create_on's random
   initialisation (seed 1234, init_std 0.02), built with max_T = the context; fp32 buffers,
   the GEMMs in --precision (tk_cuda_set_math; default fp32, the decode's own kernels are
   fp32 always).
   Architectures (only the mixer changes; each one the device decode refuses,
   mdl_device_supports / mdl_decode_supports_on, is printed with the reason and its figures
   are n/a; none is refused today):
     softmax        softmax attention, no prior (the PyTorch peer's model)
     softmax+RPA    seed 000's RPA prior from the running statistics (the cached prior),
                    bench_decode's random non-uniform statistics (mdl_prior_stats_set)
     softmax+ERA    seed 003's ERA prior (the layers' initial parameters)
     polar          seed 002's polar attention (as many key/value heads as heads)
     polar+gdelta   polar attention + the gated-delta memory channel
   With a prior the window W is mdl_decode_init's max_len = the context; B(W) is built once
   on the device at init and a step adds row t of it per head.

   Correctness first: for every architecture and context, one step's logits (prefill P =
   context/2 random tokens, step token P) of the device model against the same step of a
   CPU twin (the same config, seed and statistics, so the same parameters; the CPU decode
   is the one tests/test_decode.c holds to the full forward), max |a - b| / max |b| over the
   vocabulary. Above 1e-4 (fp32; 3e-2 in tf32 / bf16) the line says CHECK FAILED, the
   figures are still measured (a GPU lease is short) and the program exits 1 at the end
   with check=FAIL in its last line.

   Batch 1, per context (default 128, 512, 2048, 4096): one slot (mdl_decode_init(m, 1,
   context)); a round resets it, prefills P = context/2 random tokens (untimed), takes 2
   untimed steps, then --steps timed mdl_decode_step calls (default 48), each from a
   cudaDeviceSynchronize to the step's return (the step copies its logits row to the host,
   which waits for the device) on the host's monotonic clock. p50 / p99 (nearest rank)
   over every round's steps (--rounds, default 3); rounds interleave the contexts and the
   architectures (reversed every other round), as bench_decode's. Seed 000's claim: per
   context p50(softmax+RPA) / p50(softmax); prior_p50_ratio is the largest (target <= 1.02).
   Batch --batch (default 512) at --batch-context (default 512): --batch slots, each
   prefilled once with P = batch-context/2 random tokens at the start (untimed; one
   mdl_decode_prefill per slot), then per round 2 untimed and --steps timed steps of all
   slots together (positions go on from round to round: P + rounds * (steps + 2) must fit
   the context); tokens/s = batch / the p50 step. A step's time includes copying all
   batch x vocab logits to the host (model.h's API: 103 MB a step at 512 x 50257), which a
   sampler on the device would not need; the peer is told to do the same (below).
   Seed 002 reports 19,270 tokens/s at batch 512 on an L4 (a different GPU: stated beside).

   Peer: bench/torch_decode.py --device cuda --logits-to-host (the softmax model of
   bench/torch_train.py with pre-allocated K/V cache tensors on the GPU, fp32, eager, under
   torch.inference_mode(); each timed step ends with the logits copied to the host, as ours
   do), the same contexts, prefill, warm-up, steps and rounds, one call after our rounds
   (the GPU has no other load to cancel by interleaving), under `timeout` with what is left
   of the budget (--budget S; default $GPU_CHECK_BENCH_TIMEOUT - 10, else 170 s). Our
   models are destroyed before it runs (mdl_device_release), so the two never share the
   GPU's memory. python is $TORCH_PYTHON, else /usr/bin/python3, else python3. --no-torch
   skips it; without torch or CUDA in it the speedups print as nan with the reason.

   In the simulation (ATTNKIT_CUDA_SIM) it also prints what one batch-1 step costs the
   host beside its kernels (copies each way, synchronising calls, allocations, launches:
   tests/cuda_sim.h's counters).

   --contexts L    comma list of batch-1 contexts, each in [16, 65536] (default
                   128,512,2048,4096; --quick 128)
   --steps N       timed steps per round (default 48; --quick 4)
   --rounds N      rounds (default 3; --quick 1)
   --batch N       slots of the batched measurement, 1..65536 (default 512; --quick 16)
   --batch-context L  its context (default 512; --quick 128)
   --vocab V       vocabulary (default 50257; smaller for a smoke run)
   --precision P   fp32 (default) | tf32 | bf16: the GEMMs' tk_cuda_set_math
   --budget S      seconds for the whole run, the peer's timeout comes from it
   --no-torch      skip the peer;  --quick  a smoke run
   Exit status: 0, 1 (a failed call or check), 2 (a bad flag). Without a GPU: "SKIP: no
   GPU", its key=value lines as n/a, exit 0 (as bench_train_cuda).
   Never run on a GPU yet (written 2026-11-27; compiled by nvcc, smoke-run in the simulation).
   Last lines, key=value:
     bench_decode_cuda: prior_p50_ratio=X (worst context C)
     bench_decode_cuda: speedup_vs_torch_b1=X (context C, softmax)
     bench_decode_cuda: speedup_vs_torch_b512=X (context C, softmax)
     bench_decode_cuda: tokens_per_s_b512=X speedup_vs_torch_b512=Y prior_p50_ratio=Z check=ok|FAIL
       (X for softmax; seed 002's 19,270 on an L4 is a different GPU) */
#define _POSIX_C_SOURCE 200809L
#ifdef ATTNKIT_CUDA_SIM
#include "tests/cuda_sim.h"
#else
#include <cuda_runtime.h>
#endif
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/bench_util.h"
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "examples/common/impl.c"
#include "examples/common/layers.c"
#include "examples/common/model.c"

#define BD_PROG "bench_decode_cuda"
#define WARM 2    /* untimed steps after each prefill */
#define MAXCTX 16 /* contexts on the command line */
#define SEED002_L4 19270.0 /* seed 002's tokens/s at batch 512, on an L4 */

#include "bench/bench_decode_models.h"

/* Why the device decode refuses architecture a at ctx (into why), or 0 when it runs. */
static int arch_refused(const bd_arch *a, int ctx, char *why, size_t n)
{
    mdl_config c = arch_config(a, ctx);
    if (mdl_device_supports(&c, why, n) != MDL_OK) return 1;
    if (mdl_decode_supports_on(&c, MDL_DEVICE_CUDA, why, n) != MDL_OK) return 1;
    return 0;
}

/* The check of device model m (architecture a, one slot at window ctx): prefill P = ctx/2
   random tokens, one step; the same on a CPU twin. The relative error (inf on a failed
   call); slot 0 of m left empty. */
static double check_decode(mdl_model *m, const bd_arch *a, int ctx)
{
    const int P = ctx / 2;
    int *seq = (int *)xmalloc(sizeof(int) * (size_t)(P + 1)), j, slot = 0, ok = 0;
    float *lg = (float *)xmalloc(sizeof(float) * (size_t)bd_vocab);
    float *lc = (float *)xmalloc(sizeof(float) * (size_t)bd_vocab);
    mdl_model *twin = NULL;
    double e = INFINITY;
    for (j = 0; j <= P; j++) seq[j] = rnd_tok();
    if (mdl_decode_reset(m, 0) != MDL_OK || mdl_decode_prefill(m, 0, seq, P, NULL, 0) != MDL_OK ||
        mdl_decode_step(m, &slot, seq + P, 1, lg) != MDL_OK) {
        fprintf(stderr, "bench_decode_cuda: check %s, context %d (device): %s\n", a->name, ctx, mdl_last_error(m));
    } else if ((twin = make_model(a, ctx, MDL_DEVICE_CPU)) != NULL) {
        if (mdl_decode_init(twin, 1, ctx, NULL) != MDL_OK || mdl_decode_prefill(twin, 0, seq, P, NULL, 0) != MDL_OK ||
            mdl_decode_step(twin, &slot, seq + P, 1, lc) != MDL_OK)
            fprintf(stderr, "bench_decode_cuda: check %s, context %d (CPU twin): %s\n", a->name, ctx,
                    mdl_last_error(twin));
        else
            ok = 1;
    }
    if (ok) e = row_err(lg, lc, bd_vocab);
    mdl_destroy(twin);
    mdl_decode_reset(m, 0);
    free(seq);
    free(lg);
    free(lc);
    return e;
}

/* one timed step of slots[0..nb): from a device synchronisation to the step's return (its
   logits are on the host then); seconds, or -1 after a message */
static double timed_step(mdl_model *m, const char *name, int ctx, const int *slots, const int *tk, int nb, float *lg)
{
    double t0, t1;
    cudaDeviceSynchronize();
    t0 = now_s();
    if (mdl_decode_step(m, slots, tk, nb, lg) != MDL_OK) {
        fprintf(stderr, "bench_decode_cuda: %s, context %d, batch %d: %s\n", name, ctx, nb, mdl_last_error(m));
        return -1.0;
    }
    cudaDeviceSynchronize();
    t1 = now_s();
    if (!(lg[0] == lg[0])) {
        fprintf(stderr, "bench_decode_cuda: %s, context %d, batch %d: non-finite logits\n", name, ctx, nb);
        return -1.0;
    }
    return t1 - t0;
}

/* One batch-1 round of model m: reset, prefill P = ctx/2 random tokens, WARM untimed steps,
   `steps` timed steps into out. 0, or -1 after a message. */
static int round_b1(mdl_model *m, const char *name, int ctx, int steps, float *lg, bd_samples *out)
{
    const int P = ctx / 2;
    int *toks = (int *)xmalloc(sizeof(int) * (size_t)P), i, slot = 0, rc = 0;
    for (i = 0; i < P; i++) toks[i] = rnd_tok();
    if (mdl_decode_reset(m, 0) != MDL_OK || mdl_decode_prefill(m, 0, toks, P, NULL, 0) != MDL_OK) {
        fprintf(stderr, "bench_decode_cuda: %s, context %d: prefill: %s\n", name, ctx, mdl_last_error(m));
        rc = -1;
    }
    for (i = 0; rc == 0 && i < WARM + steps; i++) {
        int tk = rnd_tok();
        double dt = timed_step(m, name, ctx, &slot, &tk, 1, lg);
        if (dt < 0) rc = -1;
        else if (i >= WARM) samples_add(out, dt);
    }
    free(toks);
    return rc;
}

/* One batched round of model m (nb slots, already prefilled): WARM untimed and `steps`
   timed steps of every slot. 0, or -1 after a message. */
static int round_bn(mdl_model *m, const char *name, int ctx, int nb, int steps, float *lg, int *slots, int *tk,
                    bd_samples *out)
{
    int i, s;
    for (i = 0; i < WARM + steps; i++) {
        double dt;
        for (s = 0; s < nb; s++) tk[s] = rnd_tok();
        dt = timed_step(m, name, ctx, slots, tk, nb, lg);
        if (dt < 0) return -1;
        if (i >= WARM) samples_add(out, dt);
    }
    return 0;
}

/* ---- the PyTorch peer ---------------------------------------------------------------- */

/* The peer, once: every context at batch 1 and the batched config, `rounds` rounds pooled.
   Step times into tb1[c] and tbn; 1 when every config came back, else 0 with the reason in
   why. */
static int run_torch(const int *ctxs, int nctx, int nb, int bctx, int steps, int rounds, int timeout_s,
                     bd_samples *tb1, bd_samples *tbn, char *ver, size_t nver, char *why, size_t nwhy)
{
    char cmd[1600], list[256], want_bn[32], to[32], *line = NULL;
    size_t cap = 0, off = 0;
    FILE *f;
    int c, got = 0, want = nctx + 1, st;
    list[0] = '\0';
    for (c = 0; c < nctx; c++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", c ? "," : "", ctxs[c]);
    snprintf(want_bn, sizeof want_bn, "\"config\": \"b%d\"", nb);
    to[0] = '\0';
    if (access("/usr/bin/timeout", X_OK) == 0 || access("/bin/timeout", X_OK) == 0)
        snprintf(to, sizeof to, "timeout -k 5 %d ", timeout_s);
    snprintf(cmd, sizeof cmd,
             "%s%s bench/torch_decode.py --device cuda --logits-to-host --contexts %s --steps %d --warmup %d "
             "--rounds %d --batch %d --batch-context %d --vocab %d",
             to, torch_python(), list, steps, WARM, rounds, nb, bctx, bd_vocab);
    printf("  PyTorch peer: %s\n", cmd);
    fflush(stdout);
    f = popen(cmd, "r");
    if (!f) {
        snprintf(why, nwhy, "popen failed");
        return 0;
    }
    snprintf(why, nwhy, "no result lines");
    while (getline(&line, &cap, f) > 0) {
        const char *cf = strstr(line, "\"config\"");
        if (!cf) continue;
        if (strstr(line, "\"error\"")) {
            printf("  PyTorch peer: %s", line);
            snprintf(why, nwhy, "a config failed (its error line above)");
            continue;
        }
        if (ver && nver) {
            const char *tv = strstr(line, "\"torch\": \"");
            if (tv) {
                size_t k = 0;
                tv += 10;
                while (tv[k] && tv[k] != '"' && k + 1 < nver) ver[k] = tv[k], k++;
                ver[k] = '\0';
            }
        }
        if (strstr(line, "\"config\": \"b1\"")) {
            int ctx = (int)json_num(line, "context");
            for (c = 0; c < nctx; c++)
                if (ctxs[c] == ctx && json_list_ms(line, "step_ms", &tb1[c]) == steps * rounds) got++;
        } else if (strstr(line, want_bn)) {
            if (json_list_ms(line, "step_ms", tbn) == steps * rounds) got++;
        }
    }
    free(line);
    st = pclose(f);
    if (st != 0) {
        if (WIFEXITED(st) && WEXITSTATUS(st) == 124) snprintf(why, nwhy, "timed out after %d s (--budget)", timeout_s);
        else if (WIFEXITED(st) && WEXITSTATUS(st) == 127) snprintf(why, nwhy, "command not found (%s)", torch_python());
        else if (got < want) snprintf(why, nwhy, "exit status %d (its stderr above)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    return got == want;
}

/* ---- flags ----------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_decode_cuda [--contexts N,N,...] [--steps N] [--rounds N] [--batch N]\n"
               "                         [--batch-context N] [--vocab V] [--precision fp32|tf32|bf16]\n"
               "                         [--budget S] [--no-torch] [--quick]\n"
               "  --contexts       batch-1 contexts, comma list, each in [16, 65536] (default 128,512,2048,4096)\n"
               "  --steps          timed steps per round, 1..100000 (default 48; --quick 4)\n"
               "  --rounds         1..1000 (default 3; --quick 1)\n"
               "  --batch          slots of the batched measurement, 1..65536 (default 512; --quick 16)\n"
               "  --batch-context  its context, 16..65536 (default 512; --quick 128)\n"
               "  --vocab          2..1000000 (default 50257)\n"
               "  --precision      the GEMMs' math (tk_cuda_set_math; default fp32)\n"
               "  --budget         seconds for the run (default $GPU_CHECK_BENCH_TIMEOUT - 10, else 170)\n"
               "  --no-torch       skip the PyTorch peer (speedups print as nan)\n"
               "  --quick          a smoke run\n");
}

static void last_lines(const char *ratio, const char *sb1, const char *sbn, const char *tps, int nb, int ctx_w,
                       int ctx_b, int check_ok)
{
    printf("bench_decode_cuda: prior_p50_ratio=%s (worst context %d)\n", ratio, ctx_w);
    printf("bench_decode_cuda: speedup_vs_torch_b1=%s (context %d, softmax)\n", sb1, ctx_b);
    printf("bench_decode_cuda: speedup_vs_torch_b%d=%s (context %d, softmax)\n", nb, sbn, ctx_b);
    printf("bench_decode_cuda: tokens_per_s_b%d=%s speedup_vs_torch_b%d=%s prior_p50_ratio=%s check=%s\n", nb, tps, nb,
           sbn, ratio, check_ok ? "ok" : "FAIL");
}

int main(int argc, char **argv)
{
    int ctxs[MAXCTX], nctx = 0, steps = -1, rounds = -1, nb = -1, bctx = -1, use_torch = 1, quick = 0;
    int prec = TK_MATH_FP32, i, c, a, r, b1_ci = 0, worst_ci = -1, check_ok = 1, torch_ok = 0, runs = 0;
    int refused[NARCH];
    char why[NARCH][256], tver[64] = "?", twhy[256] = "skipped (--no-torch)";
    mdl_model **mb1 = NULL, *mbn[NARCH];
    bd_samples *tb1 = NULL, sbn[NARCH], pb1[MAXCTX], pbn;
    size_t *cb1 = NULL, cbn[NARCH];
    double worst_ratio = nan(""), sp_b1 = nan(""), sp_bn = nan(""), budget = 170.0, t_start = now_s(), tol;
    float *lg1 = NULL, *lgn = NULL;
    int *slots = NULL, *tk = NULL;
    cudaDeviceProp prop;
    const char *env_to = getenv("GPU_CHECK_BENCH_TIMEOUT");
    char s_ratio[32], s_b1[32], s_bn[32], s_tps[32];

    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (env_to && atoi(env_to) > 30) budget = atoi(env_to) - 10;
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--contexts") && i + 1 < argc) nctx = parse_contexts(argv[++i], ctxs);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = parse_int("--steps", argv[++i], 1, 100000);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = parse_int("--rounds", argv[++i], 1, 1000);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) nb = parse_int("--batch", argv[++i], 1, 65536);
        else if (!strcmp(argv[i], "--batch-context") && i + 1 < argc)
            bctx = parse_int("--batch-context", argv[++i], 16, 65536);
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) bd_vocab = parse_int("--vocab", argv[++i], 2, 1000000);
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc) budget = parse_int("--budget", argv[++i], 1, 1000000);
        else if (!strcmp(argv[i], "--precision") && i + 1 < argc) {
            const char *p = argv[++i];
            if (!strcmp(p, "fp32")) prec = TK_MATH_FP32;
            else if (!strcmp(p, "tf32")) prec = TK_MATH_TF32;
            else if (!strcmp(p, "bf16")) prec = TK_MATH_BF16;
            else {
                fprintf(stderr, "bench_decode_cuda: --precision wants fp32, tf32 or bf16 (got '%s')\n", p);
                return 2;
            }
        } else if (!strcmp(argv[i], "--no-torch")) use_torch = 0;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else {
            fprintf(stderr, "bench_decode_cuda: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (steps < 0) steps = quick ? 4 : 48;
    if (rounds < 0) rounds = quick ? 1 : 3;
    if (nb < 0) nb = quick ? 16 : 512;
    if (bctx < 0) bctx = quick ? 128 : 512;
    if (nctx == 0) {
        static const int def[4] = {128, 512, 2048, 4096};
        nctx = quick ? 1 : 4;
        for (c = 0; c < nctx; c++) ctxs[c] = def[c];
    }
    for (c = 0; c < nctx; c++)
        if (ctxs[c] / 2 + WARM + steps > ctxs[c]) {
            fprintf(stderr, "bench_decode_cuda: context %d holds a prefill of %d, %d warm-up and %d timed steps only "
                            "when --steps <= %d\n", ctxs[c], ctxs[c] / 2, WARM, steps, ctxs[c] - ctxs[c] / 2 - WARM);
            return 2;
        }
    if (bctx / 2 + rounds * (WARM + steps) > bctx) {
        fprintf(stderr, "bench_decode_cuda: --batch-context %d holds a prefill of %d and %d rounds of %d steps only "
                        "when rounds x (steps + %d) <= %d\n", bctx, bctx / 2, rounds, WARM + steps, WARM,
                bctx - bctx / 2);
        return 2;
    }
    tol = prec == TK_MATH_FP32 ? 1e-4 : 3e-2;
    for (c = 0; c < nctx; c++)
        if (ctxs[c] == 512) b1_ci = c;
    snprintf(s_ratio, sizeof s_ratio, "n/a");
    snprintf(s_b1, sizeof s_b1, "n/a");
    snprintf(s_bn, sizeof s_bn, "n/a");
    snprintf(s_tps, sizeof s_tps, "n/a");
    if (!tk_cuda_available() || cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        printf("SKIP: no GPU\n");
        last_lines(s_ratio, s_b1, s_bn, s_tps, nb, ctxs[0], ctxs[b1_ci], 1);
        return 0;
    }
    if (tk_cuda_set_math(prec) != TK_OK) {
        fprintf(stderr, "bench_decode_cuda: tk_cuda_set_math failed\n");
        return 1;
    }
#ifdef _OPENMP
    omp_set_num_threads(omp_get_max_threads() < 8 ? omp_get_max_threads() : 8); /* the CPU twins' checks */
#endif
    printf("bench_decode_cuda: device %s (sm_%d%d, %d SMs, %.1f GiB); GEMMs %s; %d round(s) of %d timed steps "
           "(after a prefill of context/2 and %d untimed steps); budget %.0f s\n",
           prop.name, prop.major, prop.minor, prop.multiProcessorCount, (double)prop.totalGlobalMem / 1073741824.0,
           prec == TK_MATH_FP32 ? "fp32" : prec == TK_MATH_TF32 ? "tf32" : "bf16", rounds, steps, WARM, budget);
    printf("  shape: d 128, 4 layers, 4 heads, vocab %d, FFN 4x GELU, LayerNorm, learned positions, tied head, "
           "random init (seed %d); max_T = the context\n", bd_vocab, SEED);
#ifdef ATTNKIT_CUDA_SIM
    printf("  CPU SIMULATION (tests/cuda_sim.h): every time below is meaningless; the calls are what is checked\n");
#endif
    for (a = 0; a < NARCH; a++) {
        refused[a] = 0;
        why[a][0] = '\0';
        for (c = 0; c < nctx && !refused[a]; c++) refused[a] = arch_refused(&ARCHS[a], ctxs[c], why[a], sizeof why[a]);
        if (!refused[a]) refused[a] = arch_refused(&ARCHS[a], bctx, why[a], sizeof why[a]);
        if (refused[a]) printf("  %s: not run: %s\n", ARCHS[a].name, why[a]);
    }
    if (refused[0]) { /* the baseline of every ratio */
        fprintf(stderr, "bench_decode_cuda: the device decode refuses the softmax baseline: %s\n", why[0]);
        return 1;
    }

    /* the models: NARCH per context at batch 1, NARCH at the batched context */
    mb1 = (mdl_model **)xmalloc(sizeof(mdl_model *) * (size_t)nctx * NARCH);
    cb1 = (size_t *)xmalloc(sizeof(size_t) * (size_t)nctx * NARCH);
    tb1 = (bd_samples *)xmalloc(sizeof(bd_samples) * (size_t)nctx * NARCH);
    memset(mb1, 0, sizeof(mdl_model *) * (size_t)nctx * NARCH);
    memset(cb1, 0, sizeof(size_t) * (size_t)nctx * NARCH);
    memset(tb1, 0, sizeof(bd_samples) * (size_t)nctx * NARCH);
    memset(mbn, 0, sizeof mbn);
    memset(cbn, 0, sizeof cbn);
    memset(sbn, 0, sizeof sbn);
    memset(pb1, 0, sizeof pb1);
    memset(&pbn, 0, sizeof pbn);
    lg1 = (float *)xmalloc(sizeof(float) * (size_t)bd_vocab);
    lgn = (float *)xmalloc(sizeof(float) * (size_t)nb * (size_t)bd_vocab);
    slots = (int *)xmalloc(sizeof(int) * (size_t)nb);
    tk = (int *)xmalloc(sizeof(int) * (size_t)nb);
    for (i = 0; i < nb; i++) slots[i] = i;
    for (c = 0; c < nctx; c++)
        for (a = 0; a < NARCH; a++) {
            mdl_model *m;
            if (refused[a]) continue;
            m = make_model(&ARCHS[a], ctxs[c], MDL_DEVICE_CUDA);
            if (!m) return 1;
            if (mdl_decode_init(m, 1, ctxs[c], &cb1[c * NARCH + a]) != MDL_OK) {
                fprintf(stderr, "bench_decode_cuda: mdl_decode_init (%s, context %d): %s\n", ARCHS[a].name, ctxs[c],
                        mdl_last_error(m));
                return 1;
            }
            mb1[c * NARCH + a] = m;
        }

    /* correctness before any timing (timed anyway: see the header) */
    for (c = 0; c < nctx; c++) {
        printf("check, context %d (prefill %d, one step; the device against the CPU decode):", ctxs[c], ctxs[c] / 2);
        for (a = 0; a < NARCH; a++) {
            double e;
            if (refused[a]) continue;
            e = check_decode(mb1[c * NARCH + a], &ARCHS[a], ctxs[c]);
            printf(" %s %.2g%s", ARCHS[a].name, e, e <= tol ? "" : " (CHECK FAILED)");
            fflush(stdout);
            if (!(e <= tol)) check_ok = 0;
        }
        printf("\n");
    }
    if (!check_ok)
        fprintf(stderr, "bench_decode_cuda: the device decode differs from the CPU decode by more than %g: timed anyway, "
                        "exit status 1\n", tol);

#ifdef ATTNKIT_CUDA_SIM
    { /* what one batch-1 step costs the host beside its kernels */
        int slot = 0, t0k = rnd_tok();
        ak_sim_counts k;
        int tok0 = rnd_tok();
        mdl_model *m = mb1[0];
        if (mdl_decode_reset(m, 0) == MDL_OK && mdl_decode_prefill(m, 0, &tok0, 1, NULL, 0) == MDL_OK) {
            ak_sim_counts_reset();
            if (mdl_decode_step(m, &slot, &t0k, 1, lg1) == MDL_OK) {
                k = ak_sim_counts_get();
                printf("  one batch-1 step (softmax, simulation's counters): %llu host->device copies, %llu "
                       "device->host, %llu synchronising calls, %llu allocations, %llu launches\n",
                       k.h2d, k.d2h, k.sync_calls, k.allocs, k.launches);
            }
        }
    }
#endif

    /* the batched models: every slot prefilled once (untimed) */
    for (a = 0; a < NARCH; a++) {
        mdl_model *m;
        const int P = bctx / 2;
        int *toks = (int *)xmalloc(sizeof(int) * (size_t)P), s;
        double t0 = now_s();
        if (refused[a]) {
            free(toks);
            continue;
        }
        m = make_model(&ARCHS[a], bctx, MDL_DEVICE_CUDA);
        if (!m) return 1;
        if (mdl_decode_init(m, nb, bctx, &cbn[a]) != MDL_OK) {
            fprintf(stderr, "bench_decode_cuda: mdl_decode_init (%s, %d slots, context %d): %s\n", ARCHS[a].name, nb,
                    bctx, mdl_last_error(m));
            return 1;
        }
        for (s = 0; s < nb; s++) {
            for (i = 0; i < P; i++) toks[i] = rnd_tok();
            if (mdl_decode_prefill(m, s, toks, P, NULL, 0) != MDL_OK) {
                fprintf(stderr, "bench_decode_cuda: %s, %d slots: prefill of slot %d: %s\n", ARCHS[a].name, nb, s,
                        mdl_last_error(m));
                return 1;
            }
        }
        free(toks);
        mbn[a] = m;
        printf("  batch %d, %s: %d slots prefilled with %d tokens each in %.1f s (untimed)\n", nb, ARCHS[a].name, nb, P,
               now_s() - t0);
    }

    for (r = 0; r < rounds; r++) {
        for (c = 0; c < nctx; c++)
            for (i = 0; i < NARCH; i++) {
                a = r % 2 ? NARCH - 1 - i : i;
                if (refused[a]) continue;
                if (round_b1(mb1[c * NARCH + a], ARCHS[a].name, ctxs[c], steps, lg1, &tb1[c * NARCH + a])) return 1;
            }
        for (i = 0; i < NARCH; i++) {
            a = r % 2 ? NARCH - 1 - i : i;
            if (refused[a]) continue;
            if (round_bn(mbn[a], ARCHS[a].name, bctx, nb, steps, lgn, slots, tk, &sbn[a])) return 1;
        }
        runs++;
        printf("  round %d of %d done (%.0f s)\n", r + 1, rounds, now_s() - t_start);
        fflush(stdout);
        if (r + 1 < rounds && now_s() - t_start > 0.5 * budget) {
            printf("  stopping after %d round(s): half of the %.0f s budget is spent (the peer needs the rest)\n", r + 1,
                   budget);
            break;
        }
    }
    /* our models go before the peer runs */
    for (c = 0; c < nctx * NARCH; c++) mdl_destroy(mb1[c]);
    for (a = 0; a < NARCH; a++) mdl_destroy(mbn[a]);
    if (mdl_device_release() != MDL_OK) fprintf(stderr, "bench_decode_cuda: mdl_device_release reported an error\n");

    if (use_torch) {
        const int left = (int)(budget - (now_s() - t_start)) - 5;
        if (!torch_available())
            snprintf(twhy, sizeof twhy, "torch not importable by %s", torch_python());
        else if (left < 20)
            snprintf(twhy, sizeof twhy, "only %d s of the %.0f s budget left", left + 5, budget);
        else
            torch_ok = run_torch(ctxs, nctx, nb, bctx, steps, runs, left, pb1, &pbn, tver, sizeof tver, twhy,
                                 sizeof twhy);
    }

    /* the tables */
    for (c = 0; c < nctx; c++) {
        const double base = quantile(&tb1[c * NARCH], 0.5);
        const int P = ctxs[c] / 2;
        printf("context %d, batch 1 (prefill %d, steps at positions %d..%d, %d samples each): per-token latency\n",
               ctxs[c], P, P + WARM, P + WARM + steps - 1, tb1[c * NARCH].n);
        printf("  %-16s %9s %9s %10s %12s %9s\n", "", "p50 ms", "p99 ms", "tok/s p50", "p50/softmax", "cache MB");
        for (a = 0; a < NARCH; a++) {
            const bd_samples *s = &tb1[c * NARCH + a];
            const double p50 = quantile(s, 0.5), p99 = quantile(s, 0.99);
            if (refused[a]) {
                printf("  %-16s n/a (refused: %s)\n", ARCHS[a].name, why[a]);
                continue;
            }
            printf("  %-16s %9.3f %9.3f %10.0f %12.4f %9.2f\n", ARCHS[a].name, 1e3 * p50, 1e3 * p99, 1.0 / p50,
                   p50 / base, (double)cb1[c * NARCH + a] / 1048576.0);
        }
        if (pb1[c].n == 0) {
            printf("  %-16s (no peer figures)\n", "torch (softmax)");
        } else {
            const double p50 = quantile(&pb1[c], 0.5), p99 = quantile(&pb1[c], 0.99);
            printf("  %-16s %9.3f %9.3f %10.0f %12.4f   (ours is %.3fx its tokens/s at p50)\n", "torch (softmax)",
                   1e3 * p50, 1e3 * p99, 1.0 / p50, p50 / base, p50 / base);
        }
        if (!refused[1]) {
            const double ratio = quantile(&tb1[c * NARCH + 1], 0.5) / base;
            printf("  seed 000: p50 with the cached RPA prior / without = %.4f (target <= 1.02)\n", ratio);
            if (worst_ci < 0 || ratio > worst_ratio) worst_ratio = ratio, worst_ci = c;
        }
    }
    printf("batch %d at context %d (prefill %d per slot, %d samples each; each step copies %d x %d logits to the "
           "host): tokens/s = %d / p50 step\n", nb, bctx, bctx / 2, sbn[0].n, nb, bd_vocab, nb);
    printf("  %-16s %9s %10s %9s\n", "", "step ms", "tok/s", "cache MB");
    for (a = 0; a < NARCH; a++) {
        const double md = quantile(&sbn[a], 0.5);
        if (refused[a]) {
            printf("  %-16s n/a (refused: %s)\n", ARCHS[a].name, why[a]);
            continue;
        }
        printf("  %-16s %9.3f %10.0f %9.2f\n", ARCHS[a].name, 1e3 * md, nb / md, (double)cbn[a] / 1048576.0);
    }
    if (pbn.n == 0) {
        printf("  %-16s (no peer figures)\n", "torch (softmax)");
    } else {
        const double md = quantile(&pbn, 0.5);
        printf("  %-16s %9.3f %10.0f\n", "torch (softmax)", 1e3 * md, nb / md);
    }
    if (nb == 512)
        printf("  seed 002 reports %.0f tokens/s at batch 512 on an L4 (a different GPU; its context is not ours "
               "necessarily)\n", SEED002_L4);
    if (torch_ok) printf("  PyTorch peer: torch %s, cuda, fp32 eager, logits to the host each step\n", tver);
    else printf("  PyTorch peer: no figures: %s\n", twhy);
    if (torch_ok) {
        sp_b1 = quantile(&pb1[b1_ci], 0.5) / quantile(&tb1[b1_ci * NARCH], 0.5);
        sp_bn = quantile(&pbn, 0.5) / quantile(&sbn[0], 0.5);
    }
    snprintf(s_ratio, sizeof s_ratio, "%.4f", worst_ratio);
    snprintf(s_b1, sizeof s_b1, "%.3f", sp_b1);
    snprintf(s_bn, sizeof s_bn, "%.3f", sp_bn);
    snprintf(s_tps, sizeof s_tps, "%.0f", nb / quantile(&sbn[0], 0.5));
    last_lines(s_ratio, s_b1, s_bn, s_tps, nb, worst_ci >= 0 ? ctxs[worst_ci] : ctxs[0], ctxs[b1_ci], check_ok);

    for (c = 0; c < nctx * NARCH; c++) free(tb1[c].v);
    for (a = 0; a < NARCH; a++) free(sbn[a].v);
    for (c = 0; c < nctx; c++) free(pb1[c].v);
    free(pbn.v);
    free(mb1);
    free(cb1);
    free(tb1);
    free(lg1);
    free(lgn);
    free(slots);
    free(tk);
    return check_ok ? 0 : 1;
}
