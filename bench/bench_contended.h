/* bench/bench_contended.h - throughput beside busy processes (issue 41), shared by
   bench_train, bench_polar and bench_gdelta. Not part of the public API. POSIX (fork):
   define _POSIX_C_SOURCE 200809L before the first system header.

   bench_contended_run measures a workload quiet, then with K busy processes beside it for
   each K asked for: the children spin on arithmetic (no system calls) until killed and none
   is pinned to a core, so the scheduler shares the machine among them and the workload's
   threads. Reported: the throughput quiet and under each K, and its ratio to the fair
   share, quiet * cores / (cores + K): what a process would get if the machine were divided
   evenly among the busy ones and the workload's threads (1.0 = a fair share; spinning
   waits show as ratios well below 1). Best of `rounds` each. The last lines are key=value,
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
#include <unistd.h>

#define BENCH_CONTENDED_MAX_K 8   /* how many K values one run takes */
#define BENCH_CONTENDED_MAX_BUSY 64

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

/* measure(ctx) runs the workload once and returns its throughput (units per second,
   > 0), or a value <= 0 (or NaN) on failure. what: a phrase naming the workload; unit:
   the throughput's unit in the key names ("tokens" -> quiet_tokens_per_s=). ratios[j]
   (may be NULL) receives the ratio for ks[j]. Returns 0, or 1 after a message on
   stderr (a failed run or fork). */
static inline int bench_contended_run(const char *what, const char *unit,
                                      double (*measure)(void *ctx), void *ctx, int rounds,
                                      const int *ks, int nk, double *ratios)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv("GOMP_SPINCOUNT");
    double quiet = 0, r_out[BENCH_CONTENDED_MAX_K];
    int r, j;
    if (ncpu < 1) ncpu = 1;
    if (nk > BENCH_CONTENDED_MAX_K) nk = BENCH_CONTENDED_MAX_K;
    printf("contended: %s, %ld CPUs, OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s, best of %d "
           "round(s)\n", what, ncpu, wp ? wp : "(unset)", sc ? sc : "(unset)", rounds);
    for (r = 0; r < rounds; r++) {
        double v = measure(ctx);
        if (!(v > 0)) {
            fprintf(stderr, "contended: the quiet run failed\n");
            return 1;
        }
        if (v > quiet) quiet = v;
    }
    printf("  quiet: %.1f %s/s\n", quiet, unit);
    fflush(stdout);
    for (j = 0; j < nk; j++) {
        pid_t pids[BENCH_CONTENDED_MAX_BUSY];
        double best = 0, fair = quiet * (double)ncpu / (double)(ncpu + ks[j]);
        int k = ks[j] > BENCH_CONTENDED_MAX_BUSY ? BENCH_CONTENDED_MAX_BUSY : ks[j], got;
        for (r = 0; r < rounds; r++) {
            double v;
            got = bench_busy_start(pids, k);
            v = got == k ? measure(ctx) : 0.0;
            bench_busy_stop(pids, got);
            if (got < k || !(v > 0)) {
                fprintf(stderr, "contended: %s\n", got < k ? "fork failed" : "a run failed");
                return 1;
            }
            if (v > best) best = v;
        }
        r_out[j] = best / fair;
        if (ratios) ratios[j] = r_out[j];
        printf("  K=%d busy: %.1f %s/s, fair share %.1f, ratio %.3f\n", ks[j], best, unit, fair,
               r_out[j]);
        fflush(stdout);
    }
    printf("quiet_%s_per_s=%.1f\n", unit, quiet);
    for (j = 0; j < nk; j++) printf("fair_share_ratio_k%d=%.3f\n", ks[j], r_out[j]);
    return 0;
}

#endif /* ATTNKIT_BENCH_CONTENDED_H */
