/* bench_train.c - training tokens/s of the softmax-baseline LM (examples/common/model.h)
   beside PyTorch (bench/torch_train.py, the same architecture) in the same run.

   Build: make build/bench/bench_train      (-O3 -march=native -fopenmp; this file is the
          whole program: it includes examples/common/impl.c, layers.c and model.c)
   Run:   build/bench/bench_train [--config S|M|all] [--steps N] [--warmup N]
                                  [--rounds N] [--threads N] [--no-torch] [--phases]
                                  [--ceas-gating on|off]

   Configs (issue 8): S: d 128, 4 layers, 4 heads, context 256, batch 8, vocab 50257;
                      M: d 384, 6 layers, 6 heads, context 512, batch 4, vocab 50257.
   Learned positions, LayerNorm, GELU MLP (4C), tied head, dropout 0, random tokens.
   One step = mdl_zero_grad, mdl_forward (train), mdl_backward, AdamW (lr 3e-4, betas
   0.9/0.95, eps 1e-8, wd 0.1 on the tensors whose decay flag is set), called per tensor.
   Each config: `warmup` untimed steps (default 2), then `steps` timed steps (default S 10,
   M 5); tokens/s = B*T / median step time (the median resists other jobs on a shared
   machine). A round times ours, then runs the PyTorch peer for the same config; with
   --rounds R the best round's figure of each side is kept.

   Peer: bench/torch_train.py in its best set-up on a 2-core machine: --threads 2,
   LD_PRELOAD of Debian's libtcmalloc_minimal.so.4 (libtcmalloc-minimal4), and
   OMP_WAIT_POLICY=passive; python from $TORCH_PYTHON, else /usr/bin/python3 (Debian's
   python3-torch lives there), else python3. Without torch the speedups print as nan.

   MFU = mdl_flops_per_token(cfg, T) * tokens/s / peak, with the peak the machine's FP32
   FMA peak at the bench's thread count, measured in this run by bench_peak()
   (bench/bench_util.h: enough independent FMA chains for the build's ISA, clock from a
   dependent add chain). The best GFLOP/s of a 2048^3 tk_sgemm is printed beside it (the
   old, too-kind denominator). The load other processes put on the machine is printed; a
   loaded run's last line gets a "(loaded: ...)" suffix.
   Memory: ru_maxrss of this process (grows monotonically: S runs first) and the model's
   own account: activations (mdl_activation_bytes) + params + grads + AdamW m and v.

   --ceas-gating on (issue 20; default off): our side runs seed 004's CEAS controller
   (ceas.h, 14.4M preset) each step: per-head beta from the observables, the token mask and
   frozen heads applied to the attention backward (model.h mdl_ceas_gating), the frozen
   heads' parameters and moments left alone by AdamW; the timings include the controller's
   own work. Each config then prints the share of the model FLOPs the backward skipped, the
   gate rows' extra forward FLOPs and the pruned row share (means over the timed steps).
   The PyTorch peer always runs plain attention.

   --contended K,K,... (issue 41): ours only, config S (M with --config M): tokens/s quiet,
   then with K busy processes beside it (started and killed by the benchmark, spinning on
   arithmetic, pinned to no core), as total tokens over the total time of the timed steps,
   best of --rounds; and the ratio to the fair share quiet * cores / (cores + K)
   (bench/bench_contended.h). It runs under the programs' wait policy (exio.h's
   ex_wait_policy: GOMP_SPINCOUNT=5000) unless the environment sets one
   (OMP_WAIT_POLICY, GOMP_SPINCOUNT; ATTNKIT_WAIT_POLICY=anything keeps the runtime's
   default), printed, so policies can be compared. Last lines, key=value:
     quiet_tokens_per_s=N
     fair_share_ratio_k<K>=X       (one per K)

   Last line (without --contended): bench_train: min_speedup_vs_torch=X mfu_m=Y */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/bench_util.h"
#include "bench/bench_contended.h"
#include "examples/common/exio.h"
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "../examples/common/impl.c"
#include "../examples/common/layers.c"
#include "../examples/common/model.c"

#define TCMALLOC_SO "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"

typedef struct bench_cfg {
    const char *name;
    int C, L, H, T, B;
    int steps;
} bench_cfg;

static int ceas_gating = 0; /* --ceas-gating on */

typedef struct side_result {
    double skip_share, overhead_share, pruned_share; /* CEAS gating, means over timed steps */
    double tok_s, tok_s_best, fwd_ms, bwd_ms, opt_ms, step_ms;
    double tok_s_mean; /* B*T*steps / the timed steps' total time (--contended) */
    double rss_mb, model_mb, act_mb;
    long long params;
    int ok;
} side_result;

static double median_of(const double *v, int n)
{
    double *s = (double *)malloc(sizeof(double) * (size_t)n), r;
    if (!s) return v[0];
    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_d);
    r = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return r;
}

static double rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

/* best GFLOP/s of an n^3 tk_sgemm (NN) over `reps` calls */
static double gemm_rate_n3(int n, int reps)
{
    size_t sz = (size_t)n * (size_t)n;
    float *A = (float *)malloc(sz * sizeof(float)), *B = (float *)malloc(sz * sizeof(float));
    float *Cm = (float *)malloc(sz * sizeof(float));
    double best = 0.0;
    size_t i;
    int r;
    if (!A || !B || !Cm) {
        free(A), free(B), free(Cm);
        return nan("");
    }
    for (i = 0; i < sz; i++) {
        A[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
        B[i] = (float)((int)(rnd32() % 2001) - 1000) * 1e-3f;
    }
    for (r = 0; r < reps; r++) {
        double t0 = now_s(), dt;
        if (tk_sgemm(0, 0, n, n, n, 1.0f, A, n, B, n, 0.0f, Cm, n) != TK_OK) break;
        dt = now_s() - t0;
        if (r > 0 && 2.0 * n * (double)n * n / dt * 1e-9 > best) best = 2.0 * n * (double)n * n / dt * 1e-9;
    }
    free(A), free(B), free(Cm);
    return best;
}

/* One timed run of our model at config bc. */
static side_result run_ours(const bench_cfg *bc, int warmup, int steps, int phases)
{
    side_result res;
    mdl_config cfg = mdl_config_default();
    mdl_model *m = NULL;
    mdl_opts o = mdl_opts_default();
    mdl_stats st;
    char err[256];
    int B = bc->B, T = bc->T, i, s, nt;
    size_t n, k;
    float *mom = NULL, *vel = NULL, *p, *g;
    int *ids = NULL, *tgt = NULL;
    double *tstep = NULL, *tf = NULL, *tb = NULL, *to = NULL;
    tk_adamw_config ac = tk_adamw_config_default();
    tk_adamw_config ac0;
    ceas_state cs;
    float *temp = NULL, *fz_save = NULL;
    unsigned char frz[MDL_MAX_LAYERS * 256];
    int have_cs = 0;

    memset(&res, 0, sizeof res);
    cfg.vocab = 50257;
    cfg.d_model = bc->C;
    cfg.n_layers = bc->L;
    cfg.n_heads = bc->H;
    cfg.max_T = T;
    cfg.d_ff_mult = 4;
    cfg.pos = MDL_POS_LEARNED;
    cfg.norm = MDL_NORM_LAYER;
    cfg.attn = MDL_ATTN_SOFTMAX;
    cfg.prior = MDL_PRIOR_NONE;
    cfg.memory = MDL_MEM_NONE;
    cfg.ffn = MDL_FFN_GELU;
    cfg.dropout = 0.0f;
    if (mdl_create(&m, &cfg, 1234, err, sizeof err) != MDL_OK) {
        fprintf(stderr, "bench_train: mdl_create (%s): %s\n", bc->name, err);
        return res;
    }
    if (mdl_reserve(m, B, T) != MDL_OK) {
        fprintf(stderr, "bench_train: mdl_reserve (%s): %s\n", bc->name, mdl_last_error(m));
        mdl_destroy(m);
        return res;
    }
    n = mdl_num_params(m);
    nt = mdl_num_tensors(m);
    if (ceas_gating) {
        if (ceas_init(&cs, NULL, bc->L, bc->H, bc->C / bc->H) != CEAS_OK) {
            fprintf(stderr, "bench_train: ceas_init failed\n");
            mdl_destroy(m);
            return res;
        }
        have_cs = 1;
        temp = (float *)malloc(sizeof(float) * (size_t)bc->L * bc->H);
        fz_save = (float *)malloc(sizeof(float) * 3 * n);
        if (!temp || !fz_save) {
            fprintf(stderr, "bench_train: out of memory\n");
            goto done;
        }
        o.want_attn_obs = 1;
        o.want_gate_rows = 1;
        o.head_temp = temp;
    }
    mom = (float *)calloc(n, sizeof(float));
    vel = (float *)calloc(n, sizeof(float));
    ids = (int *)malloc(sizeof(int) * (size_t)B * (size_t)T);
    tgt = (int *)malloc(sizeof(int) * (size_t)B * (size_t)T);
    tstep = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    tf = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    tb = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    to = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    if (!mom || !vel || !ids || !tgt || !tstep || !tf || !tb || !to) {
        fprintf(stderr, "bench_train: out of memory\n");
        goto done;
    }
    ac.lr = 3e-4f;
    ac.beta1 = 0.9f;
    ac.beta2 = 0.95f;
    ac.eps = 1e-8f;
    ac.weight_decay = 0.1f;
    ac0 = ac;
    ac0.weight_decay = 0.0f;
    o.train = 1;
    p = mdl_params(m);
    g = mdl_grads(m);
    for (s = 0; s < warmup + steps; s++) {
        double t0, t1, t2, t3;
        for (k = 0; k < (size_t)B * (size_t)T; k++) {
            ids[k] = (int)(rnd32() % 50257u);
            tgt[k] = (int)(rnd32() % 50257u);
        }
        o.seed = (uint64_t)s;
        t0 = now_s();
        if (have_cs)
            for (i = 0; i < bc->L * bc->H; i++) temp[i] = ceas_beta_to_temp(cs.beta[i], bc->C / bc->H);
        mdl_zero_grad(m);
        if (mdl_forward(m, ids, tgt, B, T, &o, &st) != MDL_OK) {
            fprintf(stderr, "bench_train: mdl_forward: %s\n", mdl_last_error(m));
            goto done;
        }
        if (have_cs) {
            if (mdl_ceas_gating(m, &cs, 1, 1) != MDL_OK) {
                fprintf(stderr, "bench_train: mdl_ceas_gating: %s\n", mdl_last_error(m));
                goto done;
            }
            memcpy(frz, cs.frozen, (size_t)bc->L * bc->H);
        }
        t1 = now_s();
        if (mdl_backward(m) != MDL_OK) {
            fprintf(stderr, "bench_train: mdl_backward: %s\n", mdl_last_error(m));
            goto done;
        }
        t2 = now_s();
        if (have_cs) {
            mdl_frozen_copy(m, frz, p, fz_save, 0);
            mdl_frozen_copy(m, frz, mom, fz_save + n, 0);
            mdl_frozen_copy(m, frz, vel, fz_save + 2 * n, 0);
        }
        for (i = 0; i < nt; i++) {
            const mdl_tensor *t = mdl_tensor_at(m, i);
            if (tk_adamw_update(p + t->offset, g + t->offset, mom + t->offset, vel + t->offset,
                                t->numel, t->decay ? &ac : &ac0, (long)s + 1) != TK_OK) {
                fprintf(stderr, "bench_train: tk_adamw_update failed\n");
                goto done;
            }
        }
        if (have_cs) {
            mdl_gate_counts gc;
            double fl = mdl_flops_per_token(mdl_get_config(m), T) * (double)B * T;
            mdl_frozen_copy(m, frz, p, fz_save, 1);
            mdl_frozen_copy(m, frz, mom, fz_save + n, 1);
            mdl_frozen_copy(m, frz, vel, fz_save + 2 * n, 1);
            if (!st.attn_obs || ceas_step(&cs, st.attn_obs) != CEAS_OK) {
                fprintf(stderr, "bench_train: ceas_step failed\n");
                goto done;
            }
            mdl_gate_counts_get(m, &gc);
            if (s >= warmup) {
                res.skip_share += (gc.attn_bwd_skipped + gc.proj_bwd_skipped) / fl / steps;
                res.overhead_share += gc.gate_overhead / fl / steps;
                res.pruned_share += (double)gc.rows_pruned / (double)gc.rows / steps;
            }
        }
        t3 = now_s();
        if (s >= warmup) {
            tstep[s - warmup] = t3 - t0;
            tf[s - warmup] = t1 - t0;
            tb[s - warmup] = t2 - t1;
            to[s - warmup] = t3 - t2;
        }
        if (!(st.loss == st.loss)) {
            fprintf(stderr, "bench_train: non-finite loss\n");
            goto done;
        }
    }
    res.step_ms = 1e3 * median_of(tstep, steps);
    res.fwd_ms = 1e3 * median_of(tf, steps);
    res.bwd_ms = 1e3 * median_of(tb, steps);
    res.opt_ms = 1e3 * median_of(to, steps);
    {
        double tot = 0;
        for (i = 0; i < steps; i++) tot += tstep[i];
        res.tok_s_mean = tot > 0 ? (double)B * T * steps / tot : 0.0;
    }
    qsort(tstep, (size_t)steps, sizeof(double), cmp_d);
    res.tok_s = (double)B * T / (res.step_ms * 1e-3);
    res.tok_s_best = (double)B * T / tstep[0];
    res.params = (long long)n;
    res.act_mb = (double)mdl_activation_bytes(m) / 1048576.0;
    res.model_mb = res.act_mb + 4.0 * 4.0 * (double)n / 1048576.0;
    res.rss_mb = rss_mb();
    res.ok = 1;
    if (phases)
        printf("  ours %s: last loss %.4f (ln V = %.4f)\n", bc->name, st.loss, log(50257.0));
done:
    free(mom), free(vel), free(ids), free(tgt), free(tstep), free(tf), free(tb), free(to);
    free(temp), free(fz_save);
    if (have_cs) ceas_free(&cs);
    mdl_destroy(m);
    return res;
}


static side_result run_torch(const bench_cfg *bc, int warmup, int steps, int threads, int tuned)
{
    side_result res;
    char cmd[1024], line[4096];
    FILE *f;
    memset(&res, 0, sizeof res);
    if (tuned)
        snprintf(cmd, sizeof cmd,
                 "%s%s OMP_WAIT_POLICY=passive %s bench/torch_train.py --config %s --threads %d "
                 "--steps %d --warmup %d",
                 access(TCMALLOC_SO, R_OK) == 0 ? "LD_PRELOAD=" : "",
                 access(TCMALLOC_SO, R_OK) == 0 ? TCMALLOC_SO : "", torch_python(), bc->name,
                 threads, steps, warmup);
    else
        snprintf(cmd, sizeof cmd, "%s bench/torch_train.py --config %s --steps %d --warmup %d",
                 torch_python(), bc->name, steps, warmup);
    f = popen(cmd, "r");
    if (!f) return res;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "\"config\"")) {
            res.tok_s = json_num(line, "tok_per_s");
            res.tok_s_best = json_num(line, "tok_per_s_best");
            res.rss_mb = json_num(line, "peak_rss_mb");
            res.params = (long long)json_num(line, "params");
            res.ok = res.tok_s == res.tok_s;
        }
    }
    if (pclose(f) != 0) res.ok = 0;
    return res;
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_train [--config S|M|all] [--steps N] [--warmup N] [--rounds N]\n"
                    "                   [--threads N] [--no-torch] [--torch-default] [--phases]\n"
                    "                   [--ceas-gating on|off] [--contended K,K,...]\n");
}

/* --contended (issue 41, bench/bench_contended.h): the training step's tokens/s quiet
   and beside K busy processes; one measurement = run_ours's tokens over the timed steps'
   total time (what a user sees). */
typedef struct contended_ctx {
    const bench_cfg *bc;
    int warmup, steps;
} contended_ctx;
static double contended_measure(void *p)
{
    const contended_ctx *c = (const contended_ctx *)p;
    side_result o = run_ours(c->bc, c->warmup, c->steps, 0);
    return o.ok ? o.tok_s_mean : -1.0;
}

int main(int argc, char **argv)
{
    int cont_k[BENCH_CONTENDED_MAX_K], cont_n = 0;
    bench_cfg cfgs[2] = {{"S", 128, 4, 4, 256, 8, 10}, {"M", 384, 6, 6, 512, 4, 5}};
    const char *which = "all";
    int steps = 0, warmup = 2, rounds = 1, threads = 2, use_torch = 1, torch_default = 0;
    int phases = 0, i, r, have_torch;
    double min_speedup = INFINITY, mfu_m = nan("");
    int any_ratio = 0;
    double peak, fpc, ghz;
    bench_quiet quiet;
    char loaded[96];

    bench_match_isa_env(argv);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) which = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-torch")) use_torch = 0;
        else if (!strcmp(argv[i], "--torch-default")) torch_default = 1;
        else if (!strcmp(argv[i], "--phases")) phases = 1;
        else if (!strcmp(argv[i], "--contended") && i + 1 < argc) {
            if (!(cont_n = bench_contended_parse(argv[++i], cont_k))) { usage(); return 2; }
        }
        else if (!strcmp(argv[i], "--ceas-gating") && i + 1 < argc && !strcmp(argv[i + 1], "on")) ceas_gating = 1, i++;
        else if (!strcmp(argv[i], "--ceas-gating") && i + 1 < argc && !strcmp(argv[i + 1], "off")) ceas_gating = 0, i++;
        else {
            usage();
            return 2;
        }
    }
    if (warmup < 0 || rounds < 1 || threads < 1 || steps < 0) {
        usage();
        return 2;
    }
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    threads = 1;
#endif
    if (cont_n > 0) { /* issue 41's contended benchmark: ours only, under the programs'
                         default wait policy unless the environment sets one */
        ex_wait_policy(argv);
        contended_ctx cc;
        char what[64];
        cc.bc = strcmp(which, "M") ? &cfgs[0] : &cfgs[1];
        cc.warmup = warmup;
        cc.steps = steps ? steps : cc.bc->steps;
        snprintf(what, sizeof what, "bench_train config %s, %d steps", cc.bc->name, cc.steps);
        return bench_contended_run(what, "tokens", contended_measure, &cc, rounds, cont_k,
                                   cont_n, NULL);
    }
    have_torch = use_torch && torch_available();
    printf("bench_train: %d thread(s), gemm kernel %s, warm-up %d, rounds %d\n", threads,
           tk_gemm_kernel_name(), warmup, rounds);
    peak = 1e-9 * bench_peak(threads, &fpc, &ghz);
    printf("  peak: %s FP32 FMA, %d thread(s): %.1f GFLOP/s measured (%.1f FLOP/cycle/core at "
           "%.2f GHz)\n", bench_isa(), threads, peak, fpc, ghz);
    bench_quiet_begin(&quiet);
    if (!use_torch) printf("  PyTorch peer: skipped (--no-torch); speedups print as nan\n");
    else if (!have_torch)
        printf("  PyTorch peer: torch not importable by %s (apt-get install python3-torch); "
               "speedups print as nan\n", torch_python());
    else
        printf("  PyTorch peer: %s bench/torch_train.py, %s\n", torch_python(),
               torch_default ? "default set-up"
                             : (access(TCMALLOC_SO, R_OK) == 0
                                    ? "tuned: --threads N, tcmalloc preloaded, OMP_WAIT_POLICY=passive"
                                    : "tuned without tcmalloc (libtcmalloc-minimal4 missing)"));

    for (i = 0; i < 2; i++) {
        const bench_cfg *bc = &cfgs[i];
        side_result best_o, best_t;
        double fpt, mfu, mfu_nom, speed, gemm_rate;
        int st = steps ? steps : bc->steps;
        if (strcmp(which, "all") && strcmp(which, bc->name)) continue;
        memset(&best_o, 0, sizeof best_o);
        memset(&best_t, 0, sizeof best_t);
        gemm_rate = gemm_rate_n3(2048, 4);
        for (r = 0; r < rounds; r++) {
            side_result o = run_ours(bc, warmup, st, phases);
            double pk = gemm_rate_n3(2048, 3);
            if (pk > gemm_rate) gemm_rate = pk;
            if (!o.ok) return 1;
            if (o.tok_s > best_o.tok_s) best_o = o;
            if (have_torch) {
                side_result t = run_torch(bc, warmup, st, threads, !torch_default);
                if (!t.ok) printf("  PyTorch peer failed on %s\n", bc->name);
                else if (t.tok_s > best_t.tok_s) best_t = t;
                printf("  round %d %s: ours %.0f tok/s, torch %.0f tok/s\n", r + 1, bc->name,
                       o.tok_s, t.ok ? t.tok_s : nan(""));
            } else {
                printf("  round %d %s: ours %.0f tok/s\n", r + 1, bc->name, o.tok_s);
            }
        }
        {
            mdl_config c = mdl_config_default();
            c.d_model = bc->C, c.n_layers = bc->L, c.n_heads = bc->H, c.max_T = bc->T;
            c.vocab = 50257, c.d_ff_mult = 4;
            fpt = mdl_flops_per_token(&c, bc->T);
        }
        mfu = fpt * best_o.tok_s / (peak * 1e9);
        mfu_nom = fpt * best_o.tok_s / (gemm_rate * 1e9);
        speed = best_t.ok ? best_o.tok_s / best_t.tok_s : nan("");
        printf("config %s (d %d, L %d, H %d, T %d, B %d, V 50257): %lld params, %.3f GFLOP/token\n",
               bc->name, bc->C, bc->L, bc->H, bc->T, bc->B, best_o.params, fpt * 1e-9);
        printf("  ours : %8.0f tok/s (best step %.0f)  step %.1f ms = fwd %.1f + bwd %.1f + adamw %.1f\n",
               best_o.tok_s, best_o.tok_s_best, best_o.step_ms, best_o.fwd_ms, best_o.bwd_ms,
               best_o.opt_ms);
        printf("  torch: %8.0f tok/s (best step %.0f)  peak RSS %.0f MB (its own process)\n",
               best_t.ok ? best_t.tok_s : nan(""), best_t.ok ? best_t.tok_s_best : nan(""),
               best_t.ok ? best_t.rss_mb : nan(""));
        printf("  speedup vs torch %.3f\n", speed);
        if (ceas_gating)
            printf("  CEAS gating on: backward FLOPs skipped %.4f of the model FLOPs, gate rows cost %.4f, "
                   "pruned rows %.3f (means over the timed steps)\n",
                   best_o.skip_share, best_o.overhead_share, best_o.pruned_share);
        printf("  MFU %.3f of the measured %s FMA peak %.1f GFLOP/s (%.3f of the best 2048^3 "
               "tk_sgemm rate %.1f GFLOP/s)\n", mfu, bench_isa(), peak, mfu_nom, gemm_rate);
        printf("  memory: peak RSS %.0f MB (process so far); model account %.0f MB = activations "
               "%.0f + params/grads/AdamW %.0f\n",
               best_o.rss_mb, best_o.model_mb, best_o.act_mb, best_o.model_mb - best_o.act_mb);
        if (best_t.ok) {
            any_ratio = 1;
            if (speed < min_speedup) min_speedup = speed;
        } else {
            min_speedup = nan("");
        }
        if (!strcmp(bc->name, "M")) mfu_m = mfu;
        fflush(stdout);
    }
    if (!any_ratio) min_speedup = nan("");
    bench_quiet_report(&quiet, loaded, sizeof loaded);
    printf("bench_train: min_speedup_vs_torch=%.3f mfu_m=%.3f%s\n", min_speedup, mfu_m, loaded);
    return 0;
}
