/* bench_decode.c - token-by-token decoding of the examples' model (examples/common/model.h,
   "Token-by-token decoding": mdl_decode_init / prefill / step, issue 42 item 4) on the CPU:
   per-token latency at batch 1, tokens/s at batch 32, the cost of seed 000's cached prior,
   beside a PyTorch eager model with a K/V cache (bench/torch_decode.py) in the same run.

   Build: make build/bench/bench_decode     (-O3 -march=native -fopenmp; this file is the
          whole program: it includes examples/common/impl.c, layers.c and model.c)
   Run:   build/bench/bench_decode [--contexts N,N,...] [--steps N] [--rounds N]
                                   [--threads N] [--no-torch] [--quick]
   The record (a quiet machine, each ISA build; tools/bench_all.sh runs it too):
          make build/bench/bench_decode && build/bench/bench_decode
          make bench ARCH=-march=x86-64-v3 BENCH_DIR=build/bench-avx2 &&
              build/bench-avx2/bench_decode
   Smoke: build/bench/bench_decode --quick --no-torch   (context 128, 4 steps, 1 round)

   Shape (bench_train's config S without its context): d 128, 4 layers, 4 heads (head width
   32), vocab 50257, FFN 4C GELU, LayerNorm, learned positions, tied head, mdl_create's
   random initialisation (seed 1234, init_std 0.02), built with max_T = the context.
   Architectures (only the mixer changes):
     softmax        softmax attention, no prior (the PyTorch peer's model)
     softmax+RPA    seed 000's RPA prior from the running statistics (the cached, leak-free
                    prior): the statistics set to random non-uniform memberships (each
                    position's R = 4 memberships uniform in [0.05, 1.05), normalised; counts
                    5) with mdl_prior_stats_set, so B(W) is not the uniform plan's
     softmax+ERA    seed 003's ERA prior (the layers' initial centres, sigma, alpha)
     polar          seed 002's polar attention (as many key/value heads as heads, no window)
     polar+gdelta   polar attention + the gated-delta memory channel (4 memory heads of 32)
   With a prior the decoding window W is mdl_decode_init's max_len = the context, and B(W)
   is built once at init (model.h "Priors"): a step adds row t of it per head.

   Batch 1, per context (default 128, 512, 2048, 4096; max_T = the context): one slot
   (mdl_decode_init(m, 1, context)); a round resets it, prefills P = context/2 random
   tokens (untimed, cache only), takes 2 untimed steps, then `steps` timed single-token
   mdl_decode_step calls (default 48; positions P+2 .. P+steps+1), each step's wall time on
   its own. p50 and p99 (nearest rank) over every round's steps (default 5 rounds). Rounds
   are interleaved: a round runs every context and architecture (the architectures in
   reverse order every other round), then the PyTorch peer, so drift on a shared machine
   cancels between the sides and between the architectures.
   Seed 000's claim (§5: a cached prior adds no measurable p50 latency): per context the
   ratio p50(softmax+RPA) / p50(softmax); prior_p50_ratio is the largest of them (the
   context named); the target is <= 1.02.
   Batch 32: 32 slots (mdl_decode_init(m, 32, context)) at context 512 (the first context
   given when 512 is not among them): each slot prefilled with P = context/2 random tokens
   (the same live length in every slot), 2 untimed steps, then `steps` timed
   mdl_decode_step calls of all 32 slots; tokens/s = 32 / the p50 (nearest-rank median)
   step time over the rounds. Every architecture; the speedup compares softmax with the
   peer. Memory: the batch-1 models of every context and the batch-32 models stay alive
   for the interleaved rounds; each model's decoding cache (mdl_decode_cache_bytes) and
   the process's peak RSS are printed.
   Correctness first: before any timing, for every architecture and context, one step's
   logits (prefill P, step token P) against mdl_forward's row P (of P+1 tokens; of W tokens
   with a prior: the documented window rule) of a twin model (the same config, seed and
   statistics, so the same parameters), as max |a - b| / max |b| over the vocabulary; above
   1e-5 the bench refuses to time and exits 1.

   Peer: bench/torch_decode.py (the softmax model of bench/torch_train.py: the same shape,
   learned positions, LayerNorm, GELU MLP, tied head), decoding with pre-allocated K/V
   cache tensors under torch.inference_mode(), one token per step, the same prefill length,
   warm-up and steps, checked against its own full forward first; run once per round in
   bench_train's best set-up on a 2-core machine: --threads N, LD_PRELOAD of Debian's
   libtcmalloc_minimal.so.4 (libtcmalloc-minimal4) when present, OMP_WAIT_POLICY=passive;
   python from $TORCH_PYTHON, else /usr/bin/python3, else python3. Without torch (or with
   --no-torch) the speedups print as nan. Speedups: batch 1 = the peer's p50 / ours
   (softmax, context 512, or the first context given), batch 32 = our tokens/s / the peer's.

   --threads N    OpenMP threads of ours and torch.set_num_threads of the peer (default 2)
   --contexts L   comma list of contexts, each in [16, 65536] and >= 2 (steps + 2)
   --steps N      timed steps per round (default 48; --quick 4)
   --rounds N     rounds (default 5; --quick 1)
   --quick        context 128 (unless --contexts), 4 steps, 1 round: a smoke run
   --no-torch     skip the peer

   The load other processes put on the machine is printed; a loaded run's key=value lines
   get a "(loaded: ...)" suffix. Last lines, key=value:
     bench_decode: prior_p50_ratio=X (worst context C)
     bench_decode: speedup_vs_torch_b1=X (context C, softmax)
     bench_decode: speedup_vs_torch_b32=X (context C, softmax) */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/bench_util.h"
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "../examples/common/impl.c"
#include "../examples/common/layers.c"
#include "../examples/common/model.c"

#define TCMALLOC_SO "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
#define BD_PROG "bench_decode"
#define VOCAB 50257 /* bench_decode_models.h's bd_vocab, which this bench keeps */
#define WARM 2          /* untimed steps after each prefill */
#define B32 32          /* slots of the batch-32 measurement */
#define MAXCTX 16       /* contexts on the command line */
#ifndef CHECK_TOL /* (-DCHECK_TOL=1e-12 exercises the refusal) */
#define CHECK_TOL 1e-5
#endif

#include "bench/bench_decode_models.h"

/* The decoding check of model m (architecture a, decoding initialised with one slot at
   window ctx): prefill P tokens, one step; against row P of a twin's mdl_forward of P + 1
   tokens (W = ctx tokens with a prior). Returns the relative error (inf on a failed call),
   slot 0 left empty. */
static double check_decode(mdl_model *m, const bd_arch *a, int ctx)
{
    const int P = ctx / 2, Tf = a->prior != MDL_PRIOR_NONE ? ctx : P + 1;
    int *seq = (int *)xmalloc(sizeof(int) * (size_t)ctx), j, slot = 0;
    float *lg = (float *)xmalloc(sizeof(float) * VOCAB);
    mdl_model *twin = NULL;
    mdl_opts o = mdl_opts_default();
    double e = INFINITY;
    for (j = 0; j < ctx; j++) seq[j] = rnd_tok();
    if (mdl_decode_reset(m, 0) != MDL_OK || mdl_decode_prefill(m, 0, seq, P, NULL, 0) != MDL_OK ||
        mdl_decode_step(m, &slot, seq + P, 1, lg) != MDL_OK) {
        fprintf(stderr, "bench_decode: check %s, context %d: %s\n", a->name, ctx, mdl_last_error(m));
        goto out;
    }
    twin = make_model(a, ctx, MDL_DEVICE_CPU);
    if (!twin) goto out;
    o.train = 0;
    o.logits_from = P;
    if (mdl_forward(twin, seq, NULL, 1, Tf, &o, NULL) != MDL_OK || !mdl_logits(twin)) {
        fprintf(stderr, "bench_decode: check %s, context %d: mdl_forward: %s\n", a->name, ctx, mdl_last_error(twin));
        goto out;
    }
    e = row_err(lg, mdl_logits(twin) + (size_t)P * VOCAB, VOCAB);
out:
    mdl_destroy(twin);
    mdl_decode_reset(m, 0);
    free(seq);
    free(lg);
    return e;
}

/* One round of architecture model m at batch nb (1 or B32), context ctx: reset and prefill
   every slot with P = ctx/2 random tokens, WARM untimed steps, `steps` timed steps; each
   timed step's seconds into out. 0, or -1 after a message. */
static int time_round(mdl_model *m, const char *name, int ctx, int nb, int steps, bd_samples *out)
{
    const int P = ctx / 2;
    int *toks = (int *)xmalloc(sizeof(int) * (size_t)P), slots[B32], tk[B32], s, i, rc = -1;
    float *lg = (float *)xmalloc(sizeof(float) * (size_t)nb * VOCAB);
    for (s = 0; s < nb; s++) {
        slots[s] = s;
        for (i = 0; i < P; i++) toks[i] = rnd_tok();
        if (mdl_decode_reset(m, s) != MDL_OK || mdl_decode_prefill(m, s, toks, P, NULL, 0) != MDL_OK) goto fail;
    }
    for (i = 0; i < WARM + steps; i++) {
        double t0, t1;
        for (s = 0; s < nb; s++) tk[s] = rnd_tok();
        t0 = now_s();
        if (mdl_decode_step(m, slots, tk, nb, lg) != MDL_OK) goto fail;
        t1 = now_s();
        if (!(lg[0] == lg[0])) {
            fprintf(stderr, "bench_decode: %s, context %d: non-finite logits\n", name, ctx);
            goto done;
        }
        if (i >= WARM) samples_add(out, t1 - t0);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "bench_decode: %s, context %d, batch %d: %s\n", name, ctx, nb, mdl_last_error(m));
done:
    free(toks);
    free(lg);
    return rc;
}

/* ---- the PyTorch peer ---------------------------------------------------------------- */


/* One round of the peer: every context at batch 1, the batch-32 context; step times added
   to tb1[c] and tb32. 1 when every config came back. */
static int run_torch(const int *ctxs, int nctx, int b32_ctx, int steps, int threads, bd_samples *tb1, bd_samples *tb32,
                     char *ver, size_t nver)
{
    char cmd[1024], list[256], *line = NULL;
    size_t cap = 0, off = 0;
    FILE *f;
    int c, got = 0, want = nctx + 1;
    list[0] = '\0';
    for (c = 0; c < nctx; c++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", c ? "," : "", ctxs[c]);
    snprintf(cmd, sizeof cmd,
             "%s%s OMP_WAIT_POLICY=passive %s bench/torch_decode.py --threads %d --contexts %s --steps %d "
             "--warmup %d --batch %d --batch-context %d",
             access(TCMALLOC_SO, R_OK) == 0 ? "LD_PRELOAD=" : "", access(TCMALLOC_SO, R_OK) == 0 ? TCMALLOC_SO : "",
             torch_python(), threads, list, steps, WARM, B32, b32_ctx);
    fflush(stdout);
    f = popen(cmd, "r");
    if (!f) return 0;
    while (getline(&line, &cap, f) > 0) {
        const char *cf = strstr(line, "\"config\"");
        if (!cf) continue;
        if (strstr(line, "\"error\"")) {
            printf("  PyTorch peer: %s", line);
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
                if (ctxs[c] == ctx && json_list_ms(line, "step_ms", &tb1[c]) == steps) got++;
        } else if (strstr(line, "\"config\": \"b32\"")) {
            if (json_list_ms(line, "step_ms", tb32) == steps) got++;
        }
    }
    free(line);
    if (pclose(f) != 0) return 0;
    return got == want;
}

/* ---- flags ----------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_decode [--contexts N,N,...] [--steps N] [--rounds N] [--threads N]\n"
               "                    [--no-torch] [--quick]\n"
               "  --contexts  comma list, each in [16, 65536] and >= 2 (steps + %d) (default 128,512,2048,4096;\n"
               "              --quick 128)\n"
               "  --steps     timed steps per round, 1..100000 (default 48; --quick 4)\n"
               "  --rounds    1..1000 (default 5; --quick 1)\n"
               "  --threads   1..1024 (default 2), ours and the PyTorch peer\n"
               "  --no-torch  skip the PyTorch peer (speedups print as nan)\n"
               "  --quick     a smoke run\n", WARM);
}

int main(int argc, char **argv)
{
    int ctxs[MAXCTX], nctx = 0, steps = -1, rounds = -1, threads = 2, use_torch = 1, quick = 0;
    int i, c, a, r, have_torch, b32_ci = 0, torch_ok_rounds = 0, worst_ci = -1;
    mdl_model **mb1 = NULL, *mb32[NARCH];
    bd_samples *tb1 = NULL, sb32[NARCH], pb1[MAXCTX], pb32;
    double worst_ratio = nan(""), sp_b1, sp_b32;
    bench_quiet quiet;
    char loaded[96], tver[64] = "?";

    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    bench_match_isa_env(argv);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--contexts") && i + 1 < argc) nctx = parse_contexts(argv[++i], ctxs);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = parse_int("--steps", argv[++i], 1, 100000);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = parse_int("--rounds", argv[++i], 1, 1000);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = parse_int("--threads", argv[++i], 1, 1024);
        else if (!strcmp(argv[i], "--no-torch")) use_torch = 0;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else {
            fprintf(stderr, "bench_decode: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (steps < 0) steps = quick ? 4 : 48;
    if (rounds < 0) rounds = quick ? 1 : 5;
    if (nctx == 0) {
        static const int def[4] = {128, 512, 2048, 4096};
        nctx = quick ? 1 : 4;
        for (c = 0; c < nctx; c++) ctxs[c] = def[c];
    }
    for (c = 0; c < nctx; c++)
        if (ctxs[c] / 2 + WARM + steps > ctxs[c]) {
            fprintf(stderr, "bench_decode: context %d holds a prefill of %d, %d warm-up and %d timed steps only "
                            "when --steps <= %d (or a context >= %d)\n", ctxs[c], ctxs[c] / 2, WARM, steps,
                    ctxs[c] - ctxs[c] / 2 - WARM, 2 * (steps + WARM));
            return 2;
        }
    for (c = 0; c < nctx; c++)
        if (ctxs[c] == 512) b32_ci = c;
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    threads = 1;
#endif
    have_torch = use_torch && torch_available();
    printf("bench_decode: %d thread(s), gemm kernel %s, %d round(s) of %d timed steps (after a prefill of "
           "context/2 and %d untimed steps)\n", threads, tk_gemm_kernel_name(), rounds, steps, WARM);
    printf("  shape: d 128, 4 layers, 4 heads, vocab %d, FFN 4x GELU, LayerNorm, learned positions, tied head, "
           "random init (seed %d); max_T = the context\n", VOCAB, SEED);
    if (!use_torch) printf("  PyTorch peer: skipped (--no-torch); speedups print as nan\n");
    else if (!have_torch)
        printf("  PyTorch peer: torch not importable by %s (apt-get install python3-torch); speedups print as nan\n",
               torch_python());
    else
        printf("  PyTorch peer: %s bench/torch_decode.py, tuned: --threads %d, %s, OMP_WAIT_POLICY=passive\n",
               torch_python(), threads,
               access(TCMALLOC_SO, R_OK) == 0 ? "tcmalloc preloaded" : "no tcmalloc (libtcmalloc-minimal4 missing)");
    bench_quiet_begin(&quiet);

    /* the models: NARCH per context at batch 1, NARCH at the batch-32 context */
    mb1 = (mdl_model **)xmalloc(sizeof(mdl_model *) * (size_t)nctx * NARCH);
    tb1 = (bd_samples *)xmalloc(sizeof(bd_samples) * (size_t)nctx * NARCH);
    memset(tb1, 0, sizeof(bd_samples) * (size_t)nctx * NARCH);
    memset(sb32, 0, sizeof sb32);
    memset(pb1, 0, sizeof pb1);
    memset(&pb32, 0, sizeof pb32);
    for (c = 0; c < nctx; c++)
        for (a = 0; a < NARCH; a++) {
            size_t cb = 0;
            mdl_model *m = make_model(&ARCHS[a], ctxs[c], MDL_DEVICE_CPU);
            if (!m) return 1;
            if (mdl_decode_init(m, 1, ctxs[c], &cb) != MDL_OK) {
                fprintf(stderr, "bench_decode: mdl_decode_init (%s, context %d): %s\n", ARCHS[a].name, ctxs[c],
                        mdl_last_error(m));
                return 1;
            }
            mb1[c * NARCH + a] = m;
        }
    for (a = 0; a < NARCH; a++) {
        mdl_model *m = make_model(&ARCHS[a], ctxs[b32_ci], MDL_DEVICE_CPU);
        if (!m) return 1;
        if (mdl_decode_init(m, B32, ctxs[b32_ci], NULL) != MDL_OK) {
            fprintf(stderr, "bench_decode: mdl_decode_init (%s, %d slots, context %d): %s\n", ARCHS[a].name, B32,
                    ctxs[b32_ci], mdl_last_error(m));
            return 1;
        }
        mb32[a] = m;
    }

    /* correctness before any timing */
    for (c = 0; c < nctx; c++) {
        int bad = 0;
        printf("check, context %d (prefill %d, one step; relative to mdl_forward's row %d):", ctxs[c], ctxs[c] / 2,
               ctxs[c] / 2);
        for (a = 0; a < NARCH; a++) {
            double e = check_decode(mb1[c * NARCH + a], &ARCHS[a], ctxs[c]);
            printf(" %s %.2g%s", ARCHS[a].name, e, a + 1 < NARCH ? "," : "\n");
            fflush(stdout);
            if (!(e <= CHECK_TOL)) bad = 1;
        }
        if (bad) {
            fprintf(stderr, "bench_decode: decoding differs from the full forward by more than %g: not timing it\n",
                    CHECK_TOL);
            return 1;
        }
    }

    for (r = 0; r < rounds; r++) {
        for (c = 0; c < nctx; c++)
            for (i = 0; i < NARCH; i++) {
                a = r % 2 ? NARCH - 1 - i : i;
                if (time_round(mb1[c * NARCH + a], ARCHS[a].name, ctxs[c], 1, steps, &tb1[c * NARCH + a])) return 1;
            }
        for (i = 0; i < NARCH; i++) {
            a = r % 2 ? NARCH - 1 - i : i;
            if (time_round(mb32[a], ARCHS[a].name, ctxs[b32_ci], B32, steps, &sb32[a])) return 1;
        }
        if (have_torch) {
            if (run_torch(ctxs, nctx, ctxs[b32_ci], steps, threads, pb1, &pb32, tver, sizeof tver)) torch_ok_rounds++;
            else printf("  PyTorch peer failed in round %d\n", r + 1);
        }
        printf("  round %d of %d done\n", r + 1, rounds);
        fflush(stdout);
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
            printf("  %-16s %9.3f %9.3f %10.0f %12.4f %9.2f\n", ARCHS[a].name, 1e3 * p50, 1e3 * p99, 1.0 / p50,
                   p50 / base, (double)mdl_decode_cache_bytes(mb1[c * NARCH + a]) / 1048576.0);
        }
        if (pb1[c].n == 0) {
            printf("  %-16s (no peer figures)\n", "torch (softmax)");
        } else {
            const double p50 = quantile(&pb1[c], 0.5), p99 = quantile(&pb1[c], 0.99);
            printf("  %-16s %9.3f %9.3f %10.0f %12.4f   (ours is %.3fx its tokens/s at p50)\n", "torch (softmax)",
                   1e3 * p50, 1e3 * p99, 1.0 / p50, p50 / base, p50 / base);
        }
        {
            const double ratio = quantile(&tb1[c * NARCH + 1], 0.5) / base;
            printf("  seed 000: p50 with the cached RPA prior / without = %.4f (target <= 1.02)\n", ratio);
            if (worst_ci < 0 || ratio > worst_ratio) worst_ratio = ratio, worst_ci = c;
        }
    }
    printf("batch %d at context %d (prefill %d per slot, %d samples each): tokens/s = %d / p50 step\n", B32,
           ctxs[b32_ci], ctxs[b32_ci] / 2, sb32[0].n, B32);
    printf("  %-16s %9s %10s %9s\n", "", "step ms", "tok/s", "cache MB");
    for (a = 0; a < NARCH; a++) {
        const double md = quantile(&sb32[a], 0.5);
        printf("  %-16s %9.3f %10.0f %9.2f\n", ARCHS[a].name, 1e3 * md, B32 / md,
               (double)mdl_decode_cache_bytes(mb32[a]) / 1048576.0);
    }
    if (pb32.n == 0) {
        printf("  %-16s (no peer figures)\n", "torch (softmax)");
    } else {
        const double md = quantile(&pb32, 0.5);
        printf("  %-16s %9.3f %10.0f\n", "torch (softmax)", 1e3 * md, B32 / md);
    }
    if (have_torch)
        printf("  PyTorch peer: torch %s, %d of %d round(s) complete\n", tver, torch_ok_rounds, rounds);
    sp_b1 = torch_ok_rounds ? quantile(&pb1[b32_ci], 0.5) / quantile(&tb1[b32_ci * NARCH], 0.5) : nan("");
    sp_b32 = torch_ok_rounds ? quantile(&pb32, 0.5) / quantile(&sb32[0], 0.5) : nan("");
    {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("memory: peak RSS %.0f MB (every model of the run, alive together)\n", (double)ru.ru_maxrss / 1024.0);
    }
    bench_quiet_report(&quiet, loaded, sizeof loaded);
    printf("bench_decode: prior_p50_ratio=%.4f (worst context %d)%s\n", worst_ratio, ctxs[worst_ci], loaded);
    printf("bench_decode: speedup_vs_torch_b1=%.3f (context %d, softmax)%s\n", sp_b1, ctxs[b32_ci], loaded);
    printf("bench_decode: speedup_vs_torch_b32=%.3f (context %d, softmax)%s\n", sp_b32, ctxs[b32_ci], loaded);

    for (c = 0; c < nctx * NARCH; c++) {
        mdl_destroy(mb1[c]);
        free(tb1[c].v);
    }
    for (a = 0; a < NARCH; a++) {
        mdl_destroy(mb32[a]);
        free(sb32[a].v);
    }
    for (c = 0; c < nctx; c++) free(pb1[c].v);
    free(pb32.v);
    free(mb1);
    free(tb1);
    return 0;
}
