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

/* ---- the machine: ISA, clock, FP32 peak, and whether it was quiet ----------------------

   bench_isa()      the SIMD level this binary was compiled for (the kernels are chosen at
                    compile time from the same macros).
   bench_peak()     FP32 FMA peak of `threads` threads, FLOP/s, measured: each thread runs
                    enough independent vector FMA chains to cover latency x pipes on every
                    current x86 core (AVX-512: 24 chains of 32 zmm registers; AVX2: 12 of
                    16 ymm, so nothing spills: the old probe ran 16 AVX2 chains, which
                    spilled and reported half the peak on Zen 3), timed in thread CPU time
                    (other processes do not lower it much), best of 20 short probes. The clock comes from a
                    dependent integer add chain (1 cycle per add on every x86-64 core),
                    not from an assumed FMA latency. The adds take a register operand:
                    Golden Cove class cores fold add-immediate chains at rename and run
                    them at ~4 per cycle (11.7 "GHz" on a 2.9 GHz Xeon). *flop_per_cycle and *ghz may be NULL.
   bench_quiet_*    the share of the machine other processes used while a benchmark ran:
                    busy jiffies of all CPUs (/proc/stat) minus this process's own CPU time
                    and its waited-for children's (getrusage), over ncores x wall time.
                    bench_quiet_report prints it with the load averages and returns 1 when
                    the run was loaded (others took more than BENCH_LOADED_SHARE of the
                    machine); a loaded run's headline line gets a "(loaded ...)" suffix. */
#if defined(__AVX512F__)
#include <immintrin.h>
#define BENCH_ISA "avx512f"
#define BENCH_LANES 16
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BENCH_ISA "avx2+fma"
#define BENCH_LANES 8
#else
#define BENCH_ISA "scalar"
#define BENCH_LANES 1
#endif
#include <math.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifndef BENCH_LOADED_SHARE
#define BENCH_LOADED_SHARE 0.10
#endif

static inline const char *bench_isa(void) { return BENCH_ISA; }

static inline double bench_thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static volatile float bench_sink_;

/* FLOP/s of this thread's independent FMA chains */
static inline double bench_fma_rate_(long iters)
{
#if defined(__AVX512F__)
#define BENCH_CH_ 24
    __m512 x[BENCH_CH_];
    const __m512 m = _mm512_set1_ps(0.999999f), d = _mm512_set1_ps(1e-7f);
#define BENCH_FMA_(j) x[j] = _mm512_fmadd_ps(x[j], m, d)
#elif defined(__AVX2__) && defined(__FMA__)
#define BENCH_CH_ 12
    __m256 x[BENCH_CH_];
    const __m256 m = _mm256_set1_ps(0.999999f), d = _mm256_set1_ps(1e-7f);
#define BENCH_FMA_(j) x[j] = _mm256_fmadd_ps(x[j], m, d)
#else
#define BENCH_CH_ 12
    float x[BENCH_CH_];
    volatile float mv = 0.999999f, dv = 1e-7f;
    const float m = mv, d = dv;
#define BENCH_FMA_(j) x[j] = fmaf(x[j], m, d)
#endif
    float tmp[16], s = 0.0f;
    double t0, t1;
    long it;
    int j;
    for (j = 0; j < BENCH_CH_; j++) {
#if defined(__AVX512F__)
        x[j] = _mm512_set1_ps((float)j);
#elif defined(__AVX2__) && defined(__FMA__)
        x[j] = _mm256_set1_ps((float)j);
#else
        x[j] = (float)j;
#endif
    }
    t0 = bench_thread_cpu_s();
    for (it = 0; it < iters; it++) {
        BENCH_FMA_(0); BENCH_FMA_(1); BENCH_FMA_(2); BENCH_FMA_(3);
        BENCH_FMA_(4); BENCH_FMA_(5); BENCH_FMA_(6); BENCH_FMA_(7);
        BENCH_FMA_(8); BENCH_FMA_(9); BENCH_FMA_(10); BENCH_FMA_(11);
#if BENCH_CH_ > 12
        BENCH_FMA_(12); BENCH_FMA_(13); BENCH_FMA_(14); BENCH_FMA_(15);
        BENCH_FMA_(16); BENCH_FMA_(17); BENCH_FMA_(18); BENCH_FMA_(19);
        BENCH_FMA_(20); BENCH_FMA_(21); BENCH_FMA_(22); BENCH_FMA_(23);
#endif
    }
    t1 = bench_thread_cpu_s();
    for (j = 0; j < BENCH_CH_; j++) {
#if defined(__AVX512F__)
        _mm512_storeu_ps(tmp, x[j]);
#elif defined(__AVX2__) && defined(__FMA__)
        _mm256_storeu_ps(tmp, x[j]);
#else
        tmp[0] = x[j];
#endif
        s += tmp[0];
    }
    bench_sink_ = s;
    return (double)iters * BENCH_CH_ * BENCH_LANES * 2.0 / (t1 - t0);
#undef BENCH_FMA_
#undef BENCH_CH_
}

/* core clock, Hz, from a dependent chain of integer adds (latency 1 cycle); 0 when it
   cannot be measured this way (not x86-64 GCC/clang) */
static inline double bench_clock_hz(void)
{
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    double best = 0.0;
    int r;
    for (r = 0; r < 5; r++) {
        unsigned long x = 0, y = 3;
        long it, iters = 20000000L;
        double t0 = bench_thread_cpu_s(), t1, hz;
        for (it = 0; it < iters; it++)
            __asm__ volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                             "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                             : "+r"(x)
                             : "r"(y));
        t1 = bench_thread_cpu_s();
        hz = (double)iters * 8.0 / (t1 - t0);
        if (hz > best) best = hz;
    }
    return best;
#else
    return 0.0;
#endif
}

/* best total FLOP/s of `threads` threads over `probes` short probes */
static inline double bench_multi_rate_(int threads, int probes)
{
    double best = 0.0;
    int r;
    for (r = 0; r < probes; r++) {
        double tot = 0.0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : tot)
        tot += bench_fma_rate_(4000000L);
#else
        tot = (double)threads * bench_fma_rate_(4000000L);
#endif
        if (tot > best) best = tot;
    }
    return best;
}

static inline double bench_peak(int threads, double *flop_per_cycle, double *ghz)
{
    double best, clk, x;
    if (threads < 1) threads = 1;
    best = bench_multi_rate_(threads, 20); /* 20 short probes: one finds the cores free */
    if (threads > 1) {
        /* a process that ran on one of the cores during every probe shows up as a
           multi-thread rate far below threads x the one-thread rate: probe again */
        const double one = bench_multi_rate_(1, 10);
        int again;
        for (again = 0; again < 5 && best < 0.8 * threads * one; again++)
            if ((x = bench_multi_rate_(threads, 20)) > best) best = x;
        if (best < 0.8 * threads * one)
            fprintf(stderr, "bench_peak: %d threads reach only %.1f GFLOP/s against %.1f on one "
                    "(busy machine, or SMT siblings sharing FMA units)\n", threads, best * 1e-9,
                    one * 1e-9);
    }
    clk = bench_clock_hz();
    if (ghz) *ghz = clk * 1e-9;
    if (flop_per_cycle) *flop_per_cycle = clk > 0.0 ? best / threads / clk : nan("");
    return best;
}

typedef struct bench_quiet {
    double wall0, own0, busy0, load0;
    long ncpu;
} bench_quiet;

/* busy and total jiffies of all CPUs */
static inline int bench_stat_(double *busy)
{
    unsigned long long v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    FILE *f = fopen("/proc/stat", "r");
    int n;
    if (!f) return -1;
    n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 4) return -1;
    /* user nice system idle iowait irq softirq steal: busy = all but idle and iowait */
    *busy = (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
    return 0;
}

static inline double bench_own_cpu_s_(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)a.ru_utime.tv_sec + 1e-6 * a.ru_utime.tv_usec + (double)a.ru_stime.tv_sec +
           1e-6 * a.ru_stime.tv_usec + (double)b.ru_utime.tv_sec + 1e-6 * b.ru_utime.tv_usec +
           (double)b.ru_stime.tv_sec + 1e-6 * b.ru_stime.tv_usec;
}

static inline double bench_loadavg(void)
{
    double l = nan("");
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = nan("");
        fclose(f);
    }
    return l;
}

static inline void bench_quiet_begin(bench_quiet *q)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    q->wall0 = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    q->own0 = bench_own_cpu_s_();
    if (bench_stat_(&q->busy0) != 0) q->busy0 = -1.0;
    q->load0 = bench_loadavg();
    q->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (q->ncpu < 1) q->ncpu = 1;
}

/* share of the machine (0..1) others used since bench_quiet_begin; -1 if unknown */
static inline double bench_quiet_share(const bench_quiet *q)
{
    struct timespec ts;
    double busy, wall, own, hz = (double)sysconf(_SC_CLK_TCK), other;
    if (q->busy0 < 0.0 || bench_stat_(&busy) != 0 || hz <= 0.0) return -1.0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    wall = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - q->wall0;
    own = bench_own_cpu_s_() - q->own0;
    if (wall <= 0.0) return -1.0;
    other = (busy - q->busy0) / hz - own;
    if (other < 0.0) other = 0.0;
    return other / ((double)q->ncpu * wall);
}

/* prints the load line; returns 1 when the run was loaded. suffix (>= 64 bytes) gets
   "" or " (loaded: ...)" for the headline line. */
static inline int bench_quiet_report(const bench_quiet *q, char *suffix, size_t n)
{
    double share = bench_quiet_share(q), l1 = bench_loadavg();
    int loaded = share > BENCH_LOADED_SHARE;
    printf("machine: %s build, %ld CPUs; other processes used %.1f%% of the machine during the "
           "run (load average %.2f before, %.2f after)%s\n",
           bench_isa(), q->ncpu, share < 0.0 ? nan("") : 100.0 * share, q->load0, l1,
           loaded ? ": LOADED, the headline figure below is not a quiet-machine figure" : "");
    if (suffix && n) {
        if (loaded)
            snprintf(suffix, n, " (loaded: others used %.0f%% of the CPUs)", 100.0 * share);
        else
            suffix[0] = '\0';
    }
    return loaded;
}

/* 1 if /proc/cpuinfo's first "flags" line lists `flag` (0 if not, or unreadable) */
static inline int bench_cpu_has(const char *flag)
{
    char line[8192];
    size_t n = strlen(flag);
    int found = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) == 0) {
            const char *p = line;
            while ((p = strstr(p, flag)) != NULL) {
                if ((p == line || p[-1] == ' ' || p[-1] == '\t') &&
                    (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) {
                    found = 1;
                    break;
                }
                p += n;
            }
            break;
        }
    }
    fclose(f);
    return found;
}

/* The ISA-matched peer. An AVX2 build on a CPU with AVX-512 compares itself with peers
   restricted to AVX2 (the protocol for measuring AVX2 kernels on an AVX-512
   machine): bench_match_isa_env caps oneDNN's / ATen's ISA at AVX2 (unless the caller
   set them) and, when OPENBLAS_CORETYPE is not set, sets it to Haswell and re-executes
   this program (OpenBLAS reads the variable when it loads), so OpenBLAS in this process
   and PyTorch in its children run AVX2 kernels. An AVX-512 build gives the peers their
   AVX-512 kernels: OpenBLAS 0.3.21 does not know every AVX-512 CPU (on Emerald Rapids it
   falls back to its SSE3 Prescott kernels, and PyTorch's BLAS with it: a peer 3x slower
   than it should be), so when OPENBLAS_CORETYPE is not set and OpenBLAS picked a core
   without AVX-512 on a CPU that has it, OPENBLAS_CORETYPE=SkylakeX is set and the program
   re-executed. It prints what it did. Call first thing in main. */
char *openblas_get_corename(void);
/* 1 if OpenBLAS runs AVX-512 kernels (core SkylakeX, CooperLake or SapphireRapids); its
   core name, lower case, into core[n] */
static inline int bench_openblas_avx512(char *core, size_t n)
{
    size_t c;
    snprintf(core, n, "%s", openblas_get_corename());
    for (c = 0; core[c]; c++)
        if (core[c] >= 'A' && core[c] <= 'Z') core[c] = (char)(core[c] - 'A' + 'a');
    return strstr(core, "skylakex") || strstr(core, "cooperlake") || strstr(core, "sapphire");
}
static inline void bench_match_isa_env(char **argv)
{
#if defined(__AVX512F__)
    if (!getenv("OPENBLAS_CORETYPE") && bench_cpu_has("avx512f")) {
        char core[64];
        if (!bench_openblas_avx512(core, sizeof core)) {
            printf("peers: OpenBLAS picked its %s kernels on this AVX-512 CPU; rerunning with "
                   "OPENBLAS_CORETYPE=SkylakeX\n", core);
            setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
            fflush(stdout);
            execv("/proc/self/exe", argv);
        }
    }
#else
    if (bench_cpu_has("avx512f")) {
        /* PyTorch's caps are read by its child processes: set them even when the caller
           chose an OpenBLAS core (some machines preset OPENBLAS_CORETYPE) */
        setenv("DNNL_MAX_CPU_ISA", "AVX2", 0);
        setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 0);
        setenv("ATEN_CPU_CAPABILITY", "avx2", 0);
        if (!getenv("OPENBLAS_CORETYPE")) {
            setenv("OPENBLAS_CORETYPE", "Haswell", 1);
            fflush(stdout);
            execv("/proc/self/exe", argv);
            /* exec failed: go on, OpenBLAS unrestricted (said below) */
        }
    }
#endif
    (void)argv;
    printf("peers: %s build; OPENBLAS_CORETYPE=%s, DNNL_MAX_CPU_ISA=%s, ATEN_CPU_CAPABILITY=%s\n",
           bench_isa(), getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(auto)",
           getenv("DNNL_MAX_CPU_ISA") ? getenv("DNNL_MAX_CPU_ISA") : "(auto)",
           getenv("ATEN_CPU_CAPABILITY") ? getenv("ATEN_CPU_CAPABILITY") : "(auto)");
}


/* The PyTorch peers (bench_train, bench_decode): the python to run them with
   ($TORCH_PYTHON, else /usr/bin/python3, where Debian's python3-torch lives, else
   python3), whether it imports torch, and one number of a peer's JSON line ("key":
   number; NaN when absent). */
static inline const char *torch_python(void)
{
    const char *e = getenv("TORCH_PYTHON");
    if (e && *e) return e;
    if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
    return "python3";
}

static inline int torch_available(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' >/dev/null 2>&1", torch_python());
    return system(cmd) == 0;
}

static inline double json_num(const char *line, const char *key)
{
    char pat[64];
    const char *p;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(line, pat);
    if (!p) return nan("");
    return strtod(p + strlen(pat), NULL);
}

#endif
