/* test_gemm.c - tk_sgemm against a naive double-precision loop.

   Tolerance: for every element, with S = |alpha| * sum_p |op(A)[i,p]| |op(B)[p,j]|
   + |beta| |C0[i,j]| (the magnitude the result is built from),
       |C[i,j] - ref[i,j]| <= (K + 3) * 2^-24 * S + 1e-30,
   the worst-case fp32 rounding bound for any summation order (K products, K-1 adds,
   the alpha/beta scaling). A wrong, missing or doubled term shows up as an error of
   order S / K, far above it for the K used here.

   Shapes: 1x1x1, primes, and sizes that are not multiples of any tile size
   (MR 12/6/4, NR 32/16, MC 96/144, KC 512/384, NC 3072), all four transpose combinations,
   several alpha/beta (beta = 0 with NaN in C), leading dimensions larger than the
   row length (the padding holds NaN: reading it would poison the result; C's padding
   must come back untouched). Every case runs with the compiled SIMD micro-kernel and
   with the portable scalar one (tk_gemm_set_kernel); under OpenMP 1 and 2 threads
   must give identical bits. Built with -DTK_USE_CBLAS (and a CBLAS linked), every case
   also runs through cblas_sgemm (the default then) and the built-in kernel. */
#include "attnkit_test.h"
#define TENSOR_IMPLEMENTATION
#include "tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define PAD_SENTINEL 12345.0f

typedef struct gemm_case {
    int tA, tB, M, N, K;
    float alpha, beta;
    int pad;      /* extra columns in lda, ldb, ldc */
    int nan_c;    /* fill C with NaN first (only with beta == 0) */
} gemm_case;

/* Buffers of one case: A, B stored with their transposes, C with its padding. */
typedef struct gemm_bufs {
    float *A, *B, *C0, *C;
    double *ref, *mag;
    int lda, ldb, ldc, arows, brows;
} gemm_bufs;

static float nanf_(void) { return (float)NAN; }

static int setup(gemm_bufs *g, const gemm_case *c)
{
    long i, j, p;
    const int acols = c->tA ? c->M : c->K, bcols = c->tB ? c->K : c->N;
    g->arows = c->tA ? c->K : c->M;
    g->brows = c->tB ? c->N : c->K;
    g->lda = acols + c->pad;
    g->ldb = bcols + c->pad;
    g->ldc = c->N + c->pad;
    g->A = (float *)malloc(sizeof(float) * (size_t)g->arows * g->lda);
    g->B = (float *)malloc(sizeof(float) * (size_t)g->brows * g->ldb);
    g->C0 = (float *)malloc(sizeof(float) * (size_t)c->M * g->ldc);
    g->C = (float *)malloc(sizeof(float) * (size_t)c->M * g->ldc);
    g->ref = (double *)malloc(sizeof(double) * (size_t)c->M * c->N);
    g->mag = (double *)malloc(sizeof(double) * (size_t)c->M * c->N);
    if (!g->A || !g->B || !g->C0 || !g->C || !g->ref || !g->mag) return 0;
    for (i = 0; i < g->arows; i++)
        for (j = 0; j < g->lda; j++)
            g->A[i * g->lda + j] = j < acols ? (float)tt_normal() : nanf_();
    for (i = 0; i < g->brows; i++)
        for (j = 0; j < g->ldb; j++)
            g->B[i * g->ldb + j] = j < bcols ? (float)tt_normal() : nanf_();
    for (i = 0; i < c->M; i++)
        for (j = 0; j < g->ldc; j++)
            g->C0[i * g->ldc + j] =
                j >= c->N ? PAD_SENTINEL : c->nan_c ? nanf_() : (float)tt_normal();
    for (i = 0; i < c->M; i++)
        for (j = 0; j < c->N; j++) {
            double acc = 0.0, mag = 0.0, c0 = c->beta != 0.0f ? g->C0[i * g->ldc + j] : 0.0;
            for (p = 0; p < c->K; p++) {
                double a = c->tA ? g->A[p * g->lda + i] : g->A[i * g->lda + p];
                double b = c->tB ? g->B[j * g->ldb + p] : g->B[p * g->ldb + j];
                acc += a * b;
                mag += fabs(a * b);
            }
            g->ref[i * c->N + j] = (double)c->alpha * acc + (double)c->beta * c0;
            g->mag[i * c->N + j] = fabs((double)c->alpha) * mag + fabs((double)c->beta * c0);
        }
    return 1;
}

static void teardown(gemm_bufs *g)
{
    free(g->A); free(g->B); free(g->C0); free(g->C); free(g->ref); free(g->mag);
}

static int run(const gemm_case *c, gemm_bufs *g)
{
    memcpy(g->C, g->C0, sizeof(float) * (size_t)c->M * g->ldc);
    return tk_sgemm(c->tA, c->tB, c->M, c->N, c->K, c->alpha, g->A, g->lda, g->B, g->ldb,
                    c->beta, g->C, g->ldc);
}

/* Check C against the reference (worst element) and C's padding. */
static void verify(const gemm_case *c, const gemm_bufs *g, const char *kernel)
{
    long i, j, worst = 0, pad_bad = 0;
    double worst_r = -1.0, tol_w = 0.0;
    const double u = 1.0 / 16777216.0;
    for (i = 0; i < c->M; i++) {
        for (j = 0; j < c->N; j++) {
            double x = g->C[i * g->ldc + j], r = g->ref[i * c->N + j];
            double tol = (c->K + 3) * u * g->mag[i * c->N + j] + 1e-30;
            double q = fabs(x - r) / tol;
            if (x != x) q = HUGE_VAL;
            if (q > worst_r) { worst_r = q; worst = i * c->N + j; tol_w = tol; }
        }
        for (j = c->N; j < g->ldc; j++)
            if (g->C[i * g->ldc + j] != PAD_SENTINEL) pad_bad++;
    }
    if (!(worst_r <= 1.0))
        fprintf(stderr, "  case %s tA=%d tB=%d M=%d N=%d K=%d alpha=%g beta=%g pad=%d nanC=%d\n",
                kernel, c->tA, c->tB, c->M, c->N, c->K, c->alpha, c->beta, c->pad, c->nan_c);
    CHECK_CLOSE(g->C[(worst / c->N) * g->ldc + worst % c->N], g->ref[worst], 0.0, tol_w);
    CHECK_INT_EQ(pad_bad, 0);
}

static void check_case(const gemm_case *c)
{
    gemm_bufs g;
    int rc;
    if (!setup(&g, c)) { CHECK(!"out of memory"); teardown(&g); return; }
    tk_gemm_set_kernel(TK_GEMM_AUTO);
    rc = run(c, &g);
    CHECK_INT_EQ(rc, TK_OK);
    verify(c, &g, tk_gemm_kernel_name());
#ifdef TK_USE_CBLAS
    tk_gemm_set_kernel(TK_GEMM_BUILTIN);
    rc = run(c, &g);
    CHECK_INT_EQ(rc, TK_OK);
    verify(c, &g, tk_gemm_kernel_name());
#endif
    tk_gemm_set_kernel(TK_GEMM_SCALAR);
    rc = run(c, &g);
    CHECK_INT_EQ(rc, TK_OK);
    verify(c, &g, "scalar");
    tk_gemm_set_kernel(TK_GEMM_AUTO);
    teardown(&g);
}

/* The shapes, each run with all four transpose combinations; alpha/beta, padding and
   NaN-filled C rotate through the cases. */
static const int shapes[][3] = {
    {1, 1, 1},     {1, 1, 7},     {1, 9, 1},     {5, 1, 1},     {2, 3, 4},
    {13, 17, 19},  {12, 32, 20},  {11, 31, 5},   {37, 41, 43},  {25, 33, 17},
    {97, 101, 103}, {1, 67, 300}, {65, 1, 257},  {193, 35, 13}, {200, 70, 260},
    {7, 3100, 5},  {24, 48, 513}, {3, 130, 40},  {50, 97, 1},   {3, 6200, 9},
};
static const float ab[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 2.0f}, {1.5f, 0.0f}, {0.25f, -1.0f}};

static void test_shapes(void)
{
    int s, t, n = 0;
    tt_seed(1);
    for (s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
        for (t = 0; t < 4; t++, n++) {
            gemm_case c;
            c.tA = t & 1;
            c.tB = t >> 1;
            c.M = shapes[s][0];
            c.N = shapes[s][1];
            c.K = shapes[s][2];
            c.alpha = ab[n % 5][0];
            c.beta = ab[n % 5][1];
            c.pad = (n % 3 == 1) ? 3 : (n % 3 == 2) ? 17 : 0;
            c.nan_c = c.beta == 0.0f;
            check_case(&c);
        }
}

/* beta == 0 never reads C: NaN and Inf in C are overwritten, not propagated. */
static void test_beta_zero_ignores_c(void)
{
    gemm_case c;
    gemm_bufs g;
    long i, j, bad = 0;
    c.tA = 0; c.tB = 1; c.M = 30; c.N = 45; c.K = 70;
    c.alpha = 1.0f; c.beta = 0.0f; c.pad = 2; c.nan_c = 1;
    tt_seed(2);
    if (!setup(&g, &c)) { CHECK(!"out of memory"); teardown(&g); return; }
    for (i = 0; i < c.M; i++)
        for (j = 0; j < c.N; j++)
            if ((i + j) % 2) g.C0[i * g.ldc + j] = (float)INFINITY;
    CHECK_INT_EQ(run(&c, &g), TK_OK);
    for (i = 0; i < c.M; i++)
        for (j = 0; j < c.N; j++)
            if (!(fabs(g.C[i * g.ldc + j]) < 1e30)) bad++;
    CHECK_INT_EQ(bad, 0);
    verify(&c, &g, tk_gemm_kernel_name());
    teardown(&g);
}

/* alpha == 0: C = beta * C and A, B are not read (they hold NaN here). */
static void test_alpha_zero(void)
{
    float A[6], B[6], C[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    int i;
    for (i = 0; i < 6; i++) A[i] = B[i] = nanf_();
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 0.0f, A, 3, B, 2, 0.5f, C, 2), TK_OK);
    CHECK_NEAR(C[0], 0.5, 0.0);
    CHECK_NEAR(C[3], 2.0, 0.0);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 0.0f, A, 3, B, 2, 0.0f, C, 2), TK_OK);
    CHECK_NEAR(C[1], 0.0, 0.0);
}

/* Bit-identical results for 1, 2 and 3 threads, and run to run. The shapes cover one
   row block shared by panel groups (M <= MC), several column blocks (N > NC) and K
   blocks (K > KC, the accumulating blocks and the alternating B buffers). */
static void test_threads_identical(void)
{
#ifdef _OPENMP
    static const int sh[][5] = {{0, 1, 301, 77, 290}, {1, 0, 40, 700, 33},
                                {0, 0, 6, 3300, 20},  {1, 1, 250, 260, 270},
                                {0, 0, 50, 3300, 1100}, {1, 0, 700, 40, 1600}};
    const int nsh = (int)(sizeof sh / sizeof sh[0]);
    int s, k, th, saved = omp_get_max_threads();
    for (k = 0; k < 2; k++) {
        /* the built-in kernels; a CBLAS (TK_USE_CBLAS) has its own threads and bits */
        tk_gemm_set_kernel(k ? TK_GEMM_SCALAR : TK_GEMM_BUILTIN);
        for (s = 0; s < nsh; s++) {
            gemm_case c;
            gemm_bufs g;
            float *C1;
            size_t bytes;
            c.tA = sh[s][0]; c.tB = sh[s][1]; c.M = sh[s][2]; c.N = sh[s][3]; c.K = sh[s][4];
            c.alpha = 0.75f; c.beta = s % 2 ? 0.0f : -1.25f; c.pad = 1; c.nan_c = 0;
            tt_seed(10 + s);
            if (!setup(&g, &c)) { CHECK(!"out of memory"); teardown(&g); continue; }
            bytes = sizeof(float) * (size_t)c.M * g.ldc;
            C1 = (float *)malloc(bytes);
            omp_set_num_threads(1);
            CHECK_INT_EQ(run(&c, &g), TK_OK);
            memcpy(C1, g.C, bytes);
            verify(&c, &g, "1 thread");
            for (th = 2; th <= 3; th++) {
                omp_set_num_threads(th);
                CHECK_INT_EQ(run(&c, &g), TK_OK);
                CHECK(memcmp(C1, g.C, bytes) == 0);
                CHECK_INT_EQ(run(&c, &g), TK_OK);
                CHECK(memcmp(C1, g.C, bytes) == 0);
            }
            free(C1);
            teardown(&g);
        }
    }
    tk_gemm_set_kernel(TK_GEMM_AUTO);
    omp_set_num_threads(saved);
#else
    TEST_SKIP("built without OpenMP");
#endif
}

/* The few-rows path (M <= MC, N > NC: a decoding step's head, tk__gemm_rows) against the
   blocked loops it stands in for, called directly: identical bits, every transpose, beta 0
   (NaN in C) and not, K across one, two and three K blocks, M across the MR tile edges,
   N with a partial last chunk and tile, both built-in kernels, 1 and 2 threads; and
   against the float64 reference. */
static void test_rows_path_matches_blocked(void)
{
    static const int sh[][3] = {{1, 3073, 1},  {5, 4100, 7},    {32, 50257, 128},
                                {13, 3500, 390}, {TK__GEMM_MC, 3100, 33}, {7, 6200, 900}};
    const int nsh = (int)(sizeof sh / sizeof sh[0]);
    int s, t, k, th, n = 0;
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
#endif
    for (k = 0; k < 2; k++) {
        tk_gemm_set_kernel(k ? TK_GEMM_SCALAR : TK_GEMM_BUILTIN);
        for (s = 0; s < nsh; s++)
            for (t = 0; t < 4; t++, n++) {
                gemm_case c;
                gemm_bufs g;
                float *Cb;
                size_t bytes;
                if (sh[s][1] > 20000 && (k || t != 2)) continue; /* the head shape: once */
                c.tA = t & 1; c.tB = t >> 1;
                c.M = sh[s][0]; c.N = sh[s][1]; c.K = sh[s][2];
                c.alpha = ab[n % 5][0]; c.beta = ab[n % 5][1];
                c.pad = n % 2 ? 5 : 0; c.nan_c = c.beta == 0.0f;
                CHECK(c.M <= TK__GEMM_MC && c.N > TK__GEMM_NC);
                tt_seed(100 + n);
                if (!setup(&g, &c)) { CHECK(!"out of memory"); teardown(&g); continue; }
                bytes = sizeof(float) * (size_t)c.M * g.ldc;
                Cb = (float *)malloc(bytes);
                memcpy(Cb, g.C0, bytes);
                CHECK_INT_EQ(tk__gemm_blocked(c.tA, c.tB, c.M, c.N, c.K, c.alpha, g.A,
                                              (size_t)g.lda, g.B, (size_t)g.ldb, c.beta, Cb,
                                              (size_t)g.ldc), TK_OK);
                for (th = 1; th <= 2; th++) {
#ifdef _OPENMP
                    omp_set_num_threads(th);
#endif
                    CHECK_INT_EQ(run(&c, &g), TK_OK);
                    if (memcmp(Cb, g.C, bytes) != 0)
                        fprintf(stderr, "  rows path differs: %s tA=%d tB=%d M=%d N=%d K=%d "
                                "threads %d\n", tk_gemm_kernel_name(), c.tA, c.tB, c.M,
                                c.N, c.K, th);
                    CHECK(memcmp(Cb, g.C, bytes) == 0);
                }
                verify(&c, &g, tk_gemm_kernel_name());
                free(Cb);
                teardown(&g);
            }
    }
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
    tk_gemm_set_kernel(TK_GEMM_AUTO);
}

static void test_kernel_name(void)
{
    const char *expect = "scalar";
#if !defined(TK_GEMM_NO_SIMD) && defined(__AVX512F__)
    expect = "avx512";
#elif !defined(TK_GEMM_NO_SIMD) && defined(__AVX2__) && defined(__FMA__)
    expect = "avx2";
#endif
    tk_gemm_set_kernel(TK_GEMM_AUTO);
#ifdef TK_USE_CBLAS
    CHECK(strcmp(tk_gemm_kernel_name(), "cblas") == 0);
#else
    CHECK(strcmp(tk_gemm_kernel_name(), expect) == 0);
#endif
    tk_gemm_set_kernel(TK_GEMM_BUILTIN);
    CHECK(strcmp(tk_gemm_kernel_name(), expect) == 0);
    tk_gemm_set_kernel(TK_GEMM_SCALAR);
    CHECK(strcmp(tk_gemm_kernel_name(), "scalar") == 0);
    tk_gemm_set_kernel(TK_GEMM_AUTO);
    fprintf(stderr, "  micro-kernel: %s\n", tk_gemm_kernel_name());
}

static void test_bad_input(void)
{
    float A[12] = {0}, B[12] = {0}, C[12];
    int i;
    for (i = 0; i < 12; i++) C[i] = 7.0f;
    /* NULL pointers */
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 1.0f, NULL, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 1.0f, A, 3, NULL, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 1.0f, A, 3, B, 2, 0.0f, NULL, 2), TK_EINVAL);
    /* dims <= 0 */
    CHECK_INT_EQ(tk_sgemm(0, 0, 0, 2, 3, 1.0f, A, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, -1, 3, 1.0f, A, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 0, 1.0f, A, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, -5, -5, -5, 1.0f, A, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    /* leading dimensions too small, for each transpose */
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 1.0f, A, 2, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(1, 0, 4, 2, 3, 1.0f, A, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 3, 2, 1.0f, A, 2, B, 2, 0.0f, C, 3), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 1, 2, 2, 3, 1.0f, A, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 3, 2, 1.0f, A, 2, B, 3, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 1.0f, A, 0, B, 0, 0.0f, C, 0), TK_EINVAL);
    /* non-finite alpha / beta */
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, nanf_(), A, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 1.0f, A, 3, B, 2, nanf_(), C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, (float)INFINITY, A, 3, B, 2, 0.0f, C, 2), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm(0, 0, 2, 2, 3, 1.0f, A, 3, B, 2, -(float)INFINITY, C, 2), TK_EINVAL);
    /* nothing was written */
    for (i = 0; i < 12; i++) CHECK_NEAR(C[i], 7.0, 0.0);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_kernel_name);
    TEST_RUN(test_bad_input);
    TEST_RUN(test_alpha_zero);
    TEST_RUN(test_beta_zero_ignores_c);
    TEST_RUN(test_shapes);
    TEST_RUN(test_threads_identical);
    TEST_RUN(test_rows_path_matches_blocked);
    return TEST_END();
}
