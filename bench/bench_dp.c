/* bench_dp.c - the cost of data parallelism over MPI (issue 44): one training step of the
   softmax-baseline LM at the same GLOBAL batch, N = 2 ranks x 1 OpenMP thread (each rank
   half the batch, the gradient summed by examples/common/dist.c's rank-ordered all-reduce,
   as wt2_train under mpirun) against 1 rank x 2 threads (the whole batch, no exchange).

   Build: make build/bench/bench_dp   (mpicc -DATTNKIT_MPI where mpicc exists; without it the
          program builds as one rank and says it cannot measure)
   Run:   build/bench/bench_dp [--config S|M] [--steps N] [--warmup N] [--rounds N]

   Configs (bench_train's, issue 8): S: d 128, 4 layers, 4 heads, context 256, batch 8;
   M: d 384, 6 layers, 6 heads, context 512, batch 4 (the default); vocab 50257, learned
   positions, LayerNorm, GELU MLP, dropout 0, random tokens (the global batch drawn the same
   on every rank, each taking its rows). One step = mdl_zero_grad, mdl_forward (train),
   mdl_backward, [all-reduce of the gradient, scaled by 1/N], AdamW per tensor; the ranks
   meet at a barrier before each step, and rank 0's step time counts. Each side runs
   `warmup` untimed steps (default 1) and `steps` timed ones (default 4): its figure is the
   median step time; a round runs both sides (N = 2 under mpirun, then N = 1 as an MPI
   singleton), --rounds R (default 1) keeps each side's best round.

   The driver (no --worker) starts the two sides as child processes (mpirun -np 2
   --oversubscribe, with the OpenMPI variables a root container needs) and reads one line
   from each. Printed: step times, the all-reduce's share of the N = 2 step and its
   bandwidth (gradient bytes / all-reduce time). Last line:
     dp_overhead_ratio=X     median step time N=2 x 1 thread / N=1 x 2 threads
   (1.0: data parallelism costs nothing against threads; above: its overhead; nan: not
   measured). The load other processes put on the machine is printed. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "bench/bench_util.h"
#include "examples/common/exio.h"
#include "examples/common/dist.h"
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "../examples/common/impl.c"
#include "../examples/common/layers.c"
#include "../examples/common/model.c"
#include "../examples/common/dist.c"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

typedef struct { const char *name; int C, L, H, T, B; } dp_cfg;
static const dp_cfg cfgs[2] = {{"S", 128, 4, 4, 256, 8}, {"M", 384, 6, 6, 512, 4}};

/* One side: this process is one of dp_size ranks. Prints (rank 0) one line:
   bench_dp_worker ranks=N threads=T step_ms=X allreduce_ms=Y grad_bytes=Z */
static int worker(const dp_cfg *bc, int warmup, int steps)
{
    dp_comm *c = NULL;
    char err[256];
    mdl_config cfg = mdl_config_default();
    mdl_model *m = NULL;
    mdl_opts o = mdl_opts_default();
    mdl_stats st;
    tk_adamw_config ac = tk_adamw_config_default(), ac0;
    int N, rank, Bl, T = bc->T, s, i, nt, rc = 1, threads = 1;
    size_t n, k;
    float *mom = NULL, *vel = NULL, *p, *g, inv;
    int *ids = NULL, *tgt = NULL;
    double *tstep = NULL, *tred = NULL;
    if (dp_init(&c, NULL, NULL, err, sizeof err) != DP_OK) {
        fprintf(stderr, "bench_dp: %s\n", err);
        return 1;
    }
    N = dp_size(c);
    rank = dp_rank(c);
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    if (bc->B % N) {
        fprintf(stderr, "bench_dp: batch %d does not divide by %d ranks\n", bc->B, N);
        return dp_fail(c, 2, NULL);
    }
    Bl = bc->B / N;
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
    if (mdl_create(&m, &cfg, 1234, err, sizeof err) != MDL_OK || mdl_reserve(m, Bl, T) != MDL_OK) {
        fprintf(stderr, "bench_dp: model: %s\n", m ? mdl_last_error(m) : err);
        return dp_fail(c, 1, NULL);
    }
    n = mdl_num_params(m);
    nt = mdl_num_tensors(m);
    mom = (float *)calloc(n, sizeof(float));
    vel = (float *)calloc(n, sizeof(float));
    ids = (int *)malloc(sizeof(int) * (size_t)bc->B * (size_t)T);
    tgt = (int *)malloc(sizeof(int) * (size_t)bc->B * (size_t)T);
    tstep = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    tred = (double *)malloc(sizeof(double) * (size_t)(steps + 1));
    if (!mom || !vel || !ids || !tgt || !tstep || !tred) {
        fprintf(stderr, "bench_dp: out of memory\n");
        rc = dp_fail(c, 1, NULL);
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
    inv = 1.0f / (float)N;
    for (s = 0; s < warmup + steps; s++) {
        double t0, t1, t2;
        /* the global batch, the same on every rank; this rank's rows are [rank Bl, (rank+1) Bl) */
        for (k = 0; k < (size_t)bc->B * (size_t)T; k++) {
            ids[k] = (int)(rnd32() % 50257u);
            tgt[k] = (int)(rnd32() % 50257u);
        }
        o.seed = (uint64_t)s;
        if (dp_barrier(c) != DP_OK) {
            rc = dp_fail(c, 1, dp_last_error(c));
            goto done;
        }
        t0 = now_s();
        mdl_zero_grad(m);
        if (mdl_forward(m, ids + (size_t)rank * Bl * T, tgt + (size_t)rank * Bl * T, Bl, T, &o, &st) != MDL_OK ||
            mdl_backward(m) != MDL_OK) {
            fprintf(stderr, "bench_dp: step: %s\n", mdl_last_error(m));
            rc = dp_fail(c, 1, NULL);
            goto done;
        }
        t1 = now_s();
        if (N > 1) {
            if (dp_allreduce_f32(c, g, n) != DP_OK) {
                rc = dp_fail(c, 1, dp_last_error(c));
                goto done;
            }
            for (k = 0; k < n; k++) g[k] *= inv;
        }
        t2 = now_s();
        for (i = 0; i < nt; i++) {
            const mdl_tensor *e = mdl_tensor_at(m, i);
            tk_adamw_update(p + e->offset, g + e->offset, mom + e->offset, vel + e->offset, e->numel,
                            e->decay ? &ac : &ac0, (long)(s + 1));
        }
        if (s >= warmup) {
            tstep[s - warmup] = now_s() - t0;
            tred[s - warmup] = t2 - t1;
        }
    }
    if (rank == 0)
        printf("bench_dp_worker ranks=%d threads=%d step_ms=%.3f allreduce_ms=%.3f grad_bytes=%zu\n", N, threads,
               1e3 * median(tstep, steps), 1e3 * median(tred, steps), n * sizeof(float));
    fflush(stdout);
    rc = 0;
done:
    free(mom);
    free(vel);
    free(ids);
    free(tgt);
    free(tstep);
    free(tred);
    mdl_destroy(m);
    dp_finalize(c);
    return rc;
}

/* run one side: cmd's stdout line "bench_dp_worker ..." into the figures; 0 on success */
static int side(const char *cmd, double *step_ms, double *red_ms, double *bytes)
{
    char line[512];
    int found = 0;
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) {
        const char *q = strstr(line, "bench_dp_worker ");
        if (q && sscanf(strstr(q, "step_ms="), "step_ms=%lf allreduce_ms=%lf grad_bytes=%lf", step_ms, red_ms, bytes) == 3)
            found = 1;
    }
    return pclose(f) == 0 && found ? 0 : -1;
}

int main(int argc, char **argv)
{
    const dp_cfg *bc = &cfgs[1];
    int warmup = 1, steps = 4, rounds = 1, i, is_worker = 0, r;
    char self[1024], cmd[2048], common[256];
    double best2 = INFINITY, best1 = INFINITY, red2 = NAN, bytes = NAN, ratio = NAN;
    bench_quiet q;
    char suffix[96];
    ssize_t len;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--worker")) is_worker = 1;
        else if (!strcmp(a, "--config") && v && (!strcmp(v, "S") || !strcmp(v, "M"))) { bc = &cfgs[!strcmp(v, "M")]; i++; }
        else if (!strcmp(a, "--steps") && v && ex_parse_int(v, 1, 1000, &steps) == 0) i++;
        else if (!strcmp(a, "--warmup") && v && ex_parse_int(v, 0, 1000, &warmup) == 0) i++;
        else if (!strcmp(a, "--rounds") && v && ex_parse_int(v, 1, 100, &rounds) == 0) i++;
        else {
            fprintf(stderr, "usage: bench_dp [--config S|M] [--steps 1..1000] [--warmup 0..1000] [--rounds 1..100]\n"
                            "(bad or unknown option '%s')\n", a);
            return 2;
        }
    }
    if (is_worker) return worker(bc, warmup, steps);
    ex_wait_policy(argv); /* the programs' OpenMP wait policy, inherited by both sides */
    printf("bench_dp: config %s (d %d, %d layers, %d heads, context %d, global batch %d), %d warm-up + %d timed "
           "steps, %d round(s)\n", bc->name, bc->C, bc->L, bc->H, bc->T, bc->B, warmup, steps, rounds);
    if (strcmp(dp_backend(NULL), "mpi") != 0) {
        printf("bench_dp: built without MPI (no mpicc): nothing to compare\ndp_overhead_ratio=nan\n");
        return 0;
    }
    len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        printf("bench_dp: cannot find this program's path\ndp_overhead_ratio=nan\n");
        return 1;
    }
    self[len] = 0;
    bench_quiet_begin(&q);
    snprintf(common, sizeof common, "--worker --config %s --steps %d --warmup %d", bc->name, steps, warmup);
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    for (r = 0; r < rounds; r++) {
        double s2, s1, rd, b, rd1, b1;
        snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 mpirun -np 2 --bind-to none '%s' %s", self, common);
        if (side(cmd, &s2, &rd, &b) != 0) {
            printf("bench_dp: the N = 2 side failed (%s)\ndp_overhead_ratio=nan\n", cmd);
            return 1;
        }
        snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=2 '%s' %s", self, common);
        if (side(cmd, &s1, &rd1, &b1) != 0) {
            printf("bench_dp: the N = 1 side failed (%s)\ndp_overhead_ratio=nan\n", cmd);
            return 1;
        }
        printf("bench_dp: round %d: N=2 x 1 thread %.1f ms/step (all-reduce %.1f ms), N=1 x 2 threads %.1f ms/step\n",
               r + 1, s2, rd, s1);
        if (s2 < best2) {
            best2 = s2;
            red2 = rd;
            bytes = b;
        }
        if (s1 < best1) best1 = s1;
        fflush(stdout);
    }
    ratio = best2 / best1;
    printf("bench_dp: N=2 x 1 thread %.1f ms/step, N=1 x 2 threads %.1f ms/step (best of %d)\n", best2, best1, rounds);
    if (isfinite(red2) && isfinite(bytes))
        printf("bench_dp: gradient %.1f MB, all-reduce %.1f ms (%.0f%% of the N=2 step), %.2f GB/s of gradient\n",
               bytes / 1e6, red2, 100.0 * red2 / best2, red2 > 0 ? bytes / (red2 * 1e-3) / 1e9 : NAN);
    bench_quiet_report(&q, suffix, sizeof suffix);
    if (suffix[0]) printf("bench_dp: the ratio below was measured on a loaded machine%s\n", suffix);
    printf("dp_overhead_ratio=%.3f\n", ratio);
    return 0;
}
