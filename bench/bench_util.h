/* bench/bench_util.h - the timing and statistics helpers every bench/ program shares.
   Not part of the public API. */
#ifndef ATTNKIT_BENCH_UTIL_H
#define ATTNKIT_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* monotonic wall clock, seconds */
static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* median of v (n); sorts v in place */
static inline double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static inline double minimum(const double *v, int n)
{
    double m = v[0];
    int i;
    for (i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

/* malloc that exits with a message: benchmarks have no recovery path */
static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

#endif
