/* bench/bench_contended.h - throughput beside busy processes (issue 41), shared by
   bench_train, bench_polar and bench_gdelta. Not part of the public API. POSIX (fork):
   define _POSIX_C_SOURCE 200809L before the first system header.

   bench_contended_run measures a workload quiet, then with K busy processes beside it for
   each K asked for: the children spin on arithmetic (no system calls) until killed and none
   is pinned to a core, so the scheduler shares the machine among them and the workload's
   threads. Reported: the throughput quiet and under each K, and its ratio to the fair
   share, quiet * cores / (cores + K): what a process would get if the machine were divided
   evenly among the busy ones and the workload's threads (1.0 = a fair share; spinning
   waits show as ratios well below 1). Best of `rounds` each. The busy processes run for
   BENCH_CONTENDED_SETTLE_MS before each measurement starts, so the scheduler has spread
   them over the cores (the steady state of a shared machine, not the first moments of a
   fork). Each line also gives the process's CPU time over the measurement in cores (CPU
   seconds / wall seconds) beside its fair share, cores * cores / (cores + K): a ratio
   below 1 with a fair CPU share is lost in the workload (waits, migrations, cold caches);
   with less than a fair CPU share, the scheduler gave the time to the busy processes
   (threads asleep at a barrier while the others run). The last lines are key=value,
   one per line, for scripts:
     quiet_<unit>_per_s=X
     fair_share_ratio_k<K>=X        (one per K, in the order asked for) */
#ifndef ATTNKIT_BENCH_CONTENDED_H
#define ATTNKIT_BENCH_CONTENDED_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_CONTENDED_MAX_K 8   /* how many K values one run takes */
#define BENCH_CONTENDED_MAX_BUSY 64
#define BENCH_CONTENDED_SETTLE_MS 300

/* the process's CPU seconds and the wall clock, for the share of the machine it had */
static inline double bench_contended_clock(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* measure(ctx) once; *cores = the process's CPU time over the run / its wall time */
static inline double bench_contended_once(double (*measure)(void *ctx), void *ctx, double *cores)
{
    const double c0 = bench_contended_clock(CLOCK_PROCESS_CPUTIME_ID), w0 = bench_contended_clock(CLOCK_MONOTONIC);
    const double v = measure(ctx);
    const double w = bench_contended_clock(CLOCK_MONOTONIC) - w0;
    *cores = w > 0 ? (bench_contended_clock(CLOCK_PROCESS_CPUTIME_ID) - c0) / w : 0.0;
    return v;
}

/* "2,8" -> ks = {2, 8}, returns the count (>= 1), or 0 on a malformed list (each K in
   [1, 64], at most BENCH_CONTENDED_MAX_K of them, nothing else in the string). */
static inline int bench_contended_parse(const char *s, int *ks)
{
    int n = 0;
    while (*s) {
        char *e;
        long v = strtol(s, &e, 10);
        if (e == s || v < 1 || v > BENCH_CONTENDED_MAX_BUSY || (*e && *e != ',') ||
            n == BENCH_CONTENDED_MAX_K)
            return 0;
        ks[n++] = (int)v;
        s = *e ? e + 1 : e;
        if (*e && !*s) return 0; /* a trailing comma */
    }
    return n;
}

/* k busy children; returns how many started (< k: fork failed, those started run on) */
static inline int bench_busy_start(pid_t *pids, int k)
{
    int i;
    for (i = 0; i < k; i++) {
        pid_t p = fork();
        if (p < 0) return i;
        if (p == 0) {
            volatile double x = 1.0;
            for (;;) x = x * 1.0000001 + 1e-9;
        }
        pids[i] = p;
    }
    return k;
}

static inline void bench_busy_stop(pid_t *pids, int k)
{
    int i;
    for (i = 0; i < k; i++) kill(pids[i], SIGKILL);
    for (i = 0; i < k; i++) waitpid(pids[i], NULL, 0);
}

/* Two controls run beside each workload, under the same load and with the same threads
   (OpenMP's default team): plain loops of the two kinds a kernel is made of, so a ratio
   can be read against what the machine gives any code of that kind. "fma": independent
   multiply-add chains in registers (no memory). "stream": a sum over a 64 MiB buffer, far
   larger than the caches (DRAM bound). Each returns passes per second over at least a
   second. */
#define BENCH_CONTROL_STREAM_FLOATS (16u << 20)
static float *bench__control_buf;
static volatile float bench__control_sink;
static inline double bench_control_fma(void *unused)
{
    const double t0 = bench_contended_clock(CLOCK_MONOTONIC);
    double t;
    long n = 0;
    (void)unused;
    do {
        float acc = 0.0f;
#ifdef _OPENMP
#pragma omp parallel reduction(+ : acc)
#endif
        {
            float a[16];
            long i;
            int j;
            for (j = 0; j < 16; j++) a[j] = (float)j;
            for (i = 0; i < 1000000; i++)
                for (j = 0; j < 16; j++) a[j] = a[j] * 0.9999f + 1.0f;
            for (j = 0; j < 16; j++) acc += a[j];
        }
        bench__control_sink = acc;
        n++;
        t = bench_contended_clock(CLOCK_MONOTONIC) - t0;
    } while (t < 1.0);
    return (double)n / t;
}
static inline double bench_control_stream(void *unused)
{
    const double t0 = bench_contended_clock(CLOCK_MONOTONIC);
    double t;
    long n = 0;
    (void)unused;
    if (!bench__control_buf) {
        size_t i;
        bench__control_buf = (float *)malloc(sizeof(float) * BENCH_CONTROL_STREAM_FLOATS);
        if (!bench__control_buf) return 0.0;
        for (i = 0; i < BENCH_CONTROL_STREAM_FLOATS; i++) bench__control_buf[i] = 1.0f;
    }
    do {
        float acc = 0.0f;
        long i;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) reduction(+ : acc)
#endif
        for (i = 0; i < (long)BENCH_CONTROL_STREAM_FLOATS; i++) acc += bench__control_buf[i];
        bench__control_sink = acc;
        n++;
        t = bench_contended_clock(CLOCK_MONOTONIC) - t0;
    } while (t < 1.0);
    return (double)n / t;
}

/* measure(ctx) runs the workload once and returns its throughput (units per second,
   > 0), or a value <= 0 (or NaN) on failure. what: a phrase naming the workload; unit:
   the throughput's unit in the key names ("tokens" -> quiet_tokens_per_s=). ratios[j]
   (may be NULL) receives the ratio for ks[j]. Returns 0, or 1 after a message on
   stderr (a failed run or fork). Before the last lines, the controls' ratios:
     control_fma_ratio_k<K>=X, control_stream_ratio_k<K>=X */
static inline int bench_contended_run(const char *what, const char *unit,
                                      double (*measure)(void *ctx), void *ctx, int rounds,
                                      const int *ks, int nk, double *ratios)
{
    enum { NW = 3 }; /* the workload, the fma control, the stream control */
    static const char *const names[NW] = {"", "control fma loop", "control 64 MiB stream"};
    double (*const fns[NW])(void *) = {measure, bench_control_fma, bench_control_stream};
    void *const ctxs[NW] = {ctx, NULL, NULL};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv("GOMP_SPINCOUNT");
    double quiet[NW] = {0, 0, 0}, quiet_cores[NW] = {0, 0, 0}, r_out[BENCH_CONTENDED_MAX_K][NW];
    int r, j, w;
    if (ncpu < 1) ncpu = 1;
    if (nk > BENCH_CONTENDED_MAX_K) nk = BENCH_CONTENDED_MAX_K;
    printf("contended: %s, %ld CPUs, OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s, best of %d "
           "round(s)\n", what, ncpu, wp ? wp : "(unset)", sc ? sc : "(unset)", rounds);
    for (r = 0; r < rounds; r++)
        for (w = 0; w < NW; w++) {
            double cores, v = bench_contended_once(fns[w], ctxs[w], &cores);
            if (!(v > 0)) {
                fprintf(stderr, "contended: the quiet run %s failed\n", w ? names[w] : "of the workload");
                return 1;
            }
            if (v > quiet[w]) {
                quiet[w] = v;
                quiet_cores[w] = cores;
            }
        }
    printf("  quiet: %.1f %s/s, CPU %.2f cores\n", quiet[0], unit, quiet_cores[0]);
    fflush(stdout);
    for (j = 0; j < nk; j++) {
        pid_t pids[BENCH_CONTENDED_MAX_BUSY];
        const double share = (double)ncpu / (double)(ncpu + ks[j]); /* a fair share of the machine */
        double best[NW] = {0, 0, 0}, best_cores[NW] = {0, 0, 0};
        int k = ks[j] > BENCH_CONTENDED_MAX_BUSY ? BENCH_CONTENDED_MAX_BUSY : ks[j], got;
        for (r = 0; r < rounds; r++) {
            double v[NW] = {0, 0, 0}, cores[NW] = {0, 0, 0};
            got = bench_busy_start(pids, k);
            if (got == k) {
                struct timespec settle;
                settle.tv_sec = BENCH_CONTENDED_SETTLE_MS / 1000;
                settle.tv_nsec = (long)(BENCH_CONTENDED_SETTLE_MS % 1000) * 1000000L;
                (void)nanosleep(&settle, NULL);
                for (w = 0; w < NW; w++) v[w] = bench_contended_once(fns[w], ctxs[w], &cores[w]);
            }
            bench_busy_stop(pids, got);
            for (w = 0; w < NW; w++)
                if (got < k || !(v[w] > 0)) {
                    fprintf(stderr, "contended: %s\n", got < k ? "fork failed" : "a run failed");
                    return 1;
                }
            for (w = 0; w < NW; w++)
                if (v[w] > best[w]) {
                    best[w] = v[w];
                    best_cores[w] = cores[w];
                }
        }
        for (w = 0; w < NW; w++) r_out[j][w] = best[w] / (quiet[w] * share);
        if (ratios) ratios[j] = r_out[j][0];
        printf("  K=%d busy: %.1f %s/s, fair share %.1f, ratio %.3f; CPU %.2f cores, fair %.2f\n", ks[j],
               best[0], unit, quiet[0] * share, r_out[j][0], best_cores[0], (double)ncpu * share);
        for (w = 1; w < NW; w++)
            printf("    %s: ratio %.3f; CPU %.2f cores (quiet %.2f)\n", names[w], r_out[j][w], best_cores[w],
                   quiet_cores[w]);
        fflush(stdout);
    }
    for (j = 0; j < nk; j++) printf("control_fma_ratio_k%d=%.3f\n", ks[j], r_out[j][1]);
    for (j = 0; j < nk; j++) printf("control_stream_ratio_k%d=%.3f\n", ks[j], r_out[j][2]);
    printf("quiet_%s_per_s=%.1f\n", unit, quiet[0]);
    for (j = 0; j < nk; j++) printf("fair_share_ratio_k%d=%.3f\n", ks[j], r_out[j][0]);
    free(bench__control_buf);
    bench__control_buf = NULL;
    return 0;
}

#endif /* ATTNKIT_BENCH_CONTENDED_H */
