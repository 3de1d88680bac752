/* attnkit_test.h - the small test harness shared by every tests/test_*.c and
   tests/parity_*.cu. Not part of the public API.

   A test binary defines cases as `static void name(void)` and runs them from
   main() with TEST_RUN(name); main() ends with `return TEST_END();`.
   Inside a case:

     CHECK(cond)                       boolean check
     CHECK_INT_EQ(a, b)                integers (long long) equal
     CHECK_NEAR(a, b, atol)            |a - b| <= atol
     CHECK_CLOSE(a, b, rtol, atol)     |a - b| <= atol + rtol * |b|   (b is the reference)
     CHECK_ALL_CLOSE(a, b, n, rtol, atol)  element-wise, reports the worst element
     TEST_SKIP("why")                  marks the case skipped and returns

   A failed check prints file:line, the expression and the values, and marks the
   current case failed; the case goes on (checks do not return). NaN never
   passes a numeric check. The last line a binary prints is

     RESULT <binary> passed=P failed=F skipped=S

   which tests/run_tests.sh adds up into the suite's `N passed, N failed` line.
   The binary exits 1 if any case failed. */
#ifndef ATTNKIT_TEST_H
#define ATTNKIT_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tt__prog = "test";
static const char *tt__case = "";
static int tt__case_failed = 0, tt__case_skipped = 0;
static int tt__passed = 0, tt__failed = 0, tt__skipped = 0;
static long tt__checks = 0;

static inline void tt__fail_at(const char *file, int line)
{
    if (!tt__case_failed) fprintf(stderr, "FAIL %s\n", tt__case);
    tt__case_failed = 1;
    fprintf(stderr, "  %s:%d: ", file, line);
}

static inline int tt__isbad(double x) { return x != x || x - x != 0.0; }

#define CHECK(cond)                                                            \
    do {                                                                       \
        tt__checks++;                                                          \
        if (!(cond)) {                                                         \
            tt__fail_at(__FILE__, __LINE__);                                   \
            fprintf(stderr, "CHECK(%s)\n", #cond);                             \
        }                                                                      \
    } while (0)

#define CHECK_INT_EQ(a, b)                                                     \
    do {                                                                       \
        long long tt_a_ = (long long)(a), tt_b_ = (long long)(b);              \
        tt__checks++;                                                          \
        if (tt_a_ != tt_b_) {                                                  \
            tt__fail_at(__FILE__, __LINE__);                                   \
            fprintf(stderr, "%s == %s: %lld != %lld\n", #a, #b, tt_a_, tt_b_); \
        }                                                                      \
    } while (0)

#define CHECK_CLOSE(a, b, rtol, atol)                                          \
    do {                                                                       \
        double tt_a_ = (double)(a), tt_b_ = (double)(b);                       \
        double tt_d_ = fabs(tt_a_ - tt_b_);                                    \
        double tt_t_ = (double)(atol) + (double)(rtol) * fabs(tt_b_);          \
        tt__checks++;                                                          \
        if (tt__isbad(tt_a_) || tt__isbad(tt_b_) || !(tt_d_ <= tt_t_)) {       \
            tt__fail_at(__FILE__, __LINE__);                                   \
            fprintf(stderr, "%s ~ %s: %.9g vs %.9g (diff %.3g > tol %.3g)\n",  \
                    #a, #b, tt_a_, tt_b_, tt_d_, tt_t_);                       \
        }                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, atol) CHECK_CLOSE(a, b, 0.0, atol)

/* a, b: arrays of n float or double; b is the reference. */
#define CHECK_ALL_CLOSE(a, b, n, rtol, atol)                                   \
    do {                                                                       \
        long tt_n_ = (long)(n), tt_i_, tt_bad_ = -1, tt_nbad_ = 0;             \
        double tt_worst_ = -1.0;                                               \
        const double tt_rt_ = (double)(rtol), tt_at_ = (double)(atol); /* once */ \
        tt__checks++;                                                          \
        for (tt_i_ = 0; tt_i_ < tt_n_; tt_i_++) {                              \
            double tt_x_ = (double)(a)[tt_i_], tt_y_ = (double)(b)[tt_i_];     \
            double tt_d_ = fabs(tt_x_ - tt_y_);                                \
            double tt_t_ = tt_at_ + tt_rt_ * fabs(tt_y_);                      \
            double tt_r_ = tt_d_ / (tt_t_ > 0 ? tt_t_ : 1e-300);               \
            if (tt__isbad(tt_x_) || tt__isbad(tt_y_)) tt_r_ = HUGE_VAL;        \
            if (!(tt_d_ <= tt_t_) || tt_r_ == HUGE_VAL) tt_nbad_++;            \
            if (tt_r_ > tt_worst_) { tt_worst_ = tt_r_; tt_bad_ = tt_i_; }     \
        }                                                                      \
        if (tt_nbad_ > 0) {                                                    \
            tt__fail_at(__FILE__, __LINE__);                                   \
            fprintf(stderr,                                                    \
                    "%s ~ %s: %ld of %ld elements out of tolerance "           \
                    "(rtol %g, atol %g); worst [%ld]: %.9g vs %.9g\n",         \
                    #a, #b, tt_nbad_, tt_n_, tt_rt_, tt_at_,                   \
                    tt_bad_, (double)(a)[tt_bad_], (double)(b)[tt_bad_]);      \
        }                                                                      \
    } while (0)

#define TEST_SKIP(why)                                                         \
    do {                                                                       \
        tt__case_skipped = 1;                                                  \
        fprintf(stderr, "SKIP %s: %s\n", tt__case, (why));                     \
        return;                                                                \
    } while (0)

/* TEST_ONLY=substring runs only the cases whose name contains it (debugging aid);
   TEST_SHARD=i/n runs only the cases whose position in the program (0, 1, ...) is i
   modulo n (the runner splits a long program over its parallel lanes this way) */
static inline void tt__run(void (*fn)(void), const char *name)
{
    static int index = 0;
    const char *only = getenv("TEST_ONLY"), *shard = getenv("TEST_SHARD");
    int si = 0, sn = 1, mine = 1;
    if (shard && sscanf(shard, "%d/%d", &si, &sn) == 2 && sn > 0) mine = index % sn == si;
    index++;
    if (!mine) return;
    if (only && *only && !strstr(name, only)) return;
    tt__case = name;
    tt__case_failed = 0;
    tt__case_skipped = 0;
    fn();
    if (tt__case_failed) tt__failed++;
    else if (tt__case_skipped) tt__skipped++;
    else { tt__passed++; fprintf(stderr, "  ok %s\n", name); }
    fflush(stderr);
}

#define TEST_INIT(argc, argv)                                                  \
    do {                                                                       \
        if ((argc) > 0 && (argv)[0]) {                                         \
            const char *tt_s_ = strrchr((argv)[0], '/');                       \
            tt__prog = tt_s_ ? tt_s_ + 1 : (argv)[0];                          \
        }                                                                      \
    } while (0)

#define TEST_RUN(fn) tt__run(fn, #fn)

static inline int tt__end(void)
{
    fprintf(stderr, "%s: %ld checks\n", tt__prog, tt__checks);
    fflush(stderr);
    printf("RESULT %s passed=%d failed=%d skipped=%d\n", tt__prog, tt__passed,
           tt__failed, tt__skipped);
    fflush(stdout);
    return tt__failed ? 1 : 0;
}
#define TEST_END() tt__end()

/* Deterministic test data: a small xorshift generator so tests do not depend
   on any attnkit RNG they might be testing. */
static unsigned long long tt__rng_state = 0x9E3779B97F4A7C15ULL;
static inline void tt_seed(unsigned long long s) { tt__rng_state = s ? s : 0x9E3779B97F4A7C15ULL; }
static inline double tt_uniform(void) /* [0, 1) */
{
    unsigned long long x = tt__rng_state;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    tt__rng_state = x;
    return (double)((x * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}
static inline double tt_normal(void)
{
    double u1 = tt_uniform(), u2 = tt_uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
static inline void tt_fill_normal(float *x, long n, double scale)
{
    long i;
    for (i = 0; i < n; i++) x[i] = (float)(scale * tt_normal());
}
static inline void tt_fill_uniform(float *x, long n, double lo, double hi)
{
    long i;
    for (i = 0; i < n; i++) x[i] = (float)(lo + (hi - lo) * tt_uniform());
}

#endif /* ATTNKIT_TEST_H */
