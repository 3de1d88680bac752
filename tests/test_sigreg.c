/* test_sigreg.c - the signature-stream regularisers (examples/common/sigreg.h, seed 002
   Appendix A): the gradient of each mode (weak, strong, discrete, zipfian) against central
   finite differences, sketched (C > k) and not (C <= k); weak's value against a direct
   transcription of ||Cov(x) - I||_F; discrete's invariance to the rows' scale; the
   randomness a pure function of (seed, key); refused arguments; the mode names. */
#define SGR_IMPLEMENTATION
#include "../examples/common/sigreg.h"
#include "attnkit_test.h"

/* x (N, C): entries on the 2^-10 grid, so x +- h (h = 2^-9) is exact in float */
static void fill(float *x, int n, unsigned long long seed, double scale)
{
    int i;
    tt_seed(seed);
    for (i = 0; i < n; i++) {
        double u = tt_uniform(), v = tt_uniform();
        double g = sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v) * scale + 0.25;
        x[i] = (float)(floor(g * 1024.0 + 0.5) / 1024.0);
    }
}

/* every element's dR/dx against (R(x + h) - R(x - h)) / 2h; tolerance: rtol of the
   largest gradient entry */
static void fd_check(int mode, int N, int C, int k, unsigned long long seed, double scale, double rtol)
{
    const float h = 1.0f / 512.0f;
    float *x = (float *)malloc(sizeof(float) * (size_t)N * C), *g = (float *)malloc(sizeof(float) * (size_t)N * C);
    double *fd = (double *)malloc(sizeof(double) * (size_t)N * C), *ga = (double *)malloc(sizeof(double) * (size_t)N * C);
    double R = 0.0, gmax = 0.0;
    int i;
    CHECK(x && g && fd && ga);
    if (!x || !g || !fd || !ga) goto out;
    fill(x, N * C, seed, scale);
    CHECK_INT_EQ(sgr_loss(mode, x, N, C, k, 7, 11, &R, g, 1.0f), SGR_OK);
    CHECK(isfinite(R) && R > 0.0);
    for (i = 0; i < N * C; i++) {
        double rp = 0.0, rm = 0.0;
        float x0 = x[i];
        x[i] = x0 + h;
        CHECK_INT_EQ(sgr_loss(mode, x, N, C, k, 7, 11, &rp, NULL, 1.0f), SGR_OK);
        x[i] = x0 - h;
        CHECK_INT_EQ(sgr_loss(mode, x, N, C, k, 7, 11, &rm, NULL, 1.0f), SGR_OK);
        x[i] = x0;
        fd[i] = (rp - rm) / (2.0 * (double)h);
        ga[i] = g[i];
        if (fabs(fd[i]) > gmax) gmax = fabs(fd[i]);
    }
    CHECK(gmax > 0.0);
    CHECK_ALL_CLOSE(ga, fd, N * C, 0.0, rtol * gmax);
    fprintf(stderr, "    %s N %d C %d k %d: R %.6g, max |dR/dx| %.3g\n", sgr_mode_name(mode), N, C, k, R, gmax);
    { /* gscale scales the gradient, not R */
        double R2 = 0.0;
        float *g2 = (float *)malloc(sizeof(float) * (size_t)N * C);
        CHECK(g2 != NULL);
        if (g2) {
            CHECK_INT_EQ(sgr_loss(mode, x, N, C, k, 7, 11, &R2, g2, 0.25f), SGR_OK);
            CHECK(R2 == R);
            for (i = 0; i < N * C; i++) CHECK_CLOSE(g2[i], 0.25 * g[i], 1e-6, 1e-12);
            free(g2);
        }
    }
out:
    free(x);
    free(g);
    free(fd);
    free(ga);
}

static void test_weak_grad(void)
{
    fd_check(SGR_WEAK, 12, 3, 4, 1, 1.0, 2e-4);  /* C <= k: no sketch */
    fd_check(SGR_WEAK, 16, 9, 4, 2, 1.0, 2e-4);  /* sketched */
}

static void test_strong_grad(void)
{
    fd_check(SGR_STRONG, 12, 3, 4, 3, 1.0, 2e-4);
    fd_check(SGR_STRONG, 10, 9, 5, 4, 1.0, 2e-4);
}

static void test_discrete_grad(void)
{
    fd_check(SGR_DISCRETE, 12, 3, 4, 5, 1.0, 2e-4);
    fd_check(SGR_DISCRETE, 16, 9, 4, 6, 1.0, 2e-4);
}

static void test_zipfian_grad(void)
{
    fd_check(SGR_ZIPFIAN, 12, 3, 4, 7, 1.0, 2e-4);
    fd_check(SGR_ZIPFIAN, 16, 9, 4, 8, 1.0, 2e-4);
}

/* weak without a sketch is ||Cov(x) - I||_F with Cov over the rows, denominator N - 1 + 1e-6 */
static void test_weak_value(void)
{
    enum { N = 20, C = 4 };
    float x[N * C];
    double mean[C], cov, s = 0.0, R = 0.0;
    int i, a, b;
    fill(x, N * C, 9, 1.5);
    for (a = 0; a < C; a++) {
        mean[a] = 0.0;
        for (i = 0; i < N; i++) mean[a] += x[i * C + a];
        mean[a] /= N;
    }
    for (a = 0; a < C; a++)
        for (b = 0; b < C; b++) {
            cov = 0.0;
            for (i = 0; i < N; i++) cov += (x[i * C + a] - mean[a]) * (x[i * C + b] - mean[b]);
            cov = cov / (N - 1 + 1e-6) - (a == b);
            s += cov * cov;
        }
    CHECK_INT_EQ(sgr_loss(SGR_WEAK, x, N, C, 64, 1, 2, &R, NULL, 1.0f), SGR_OK);
    CHECK_CLOSE(R, sqrt(s), 1e-12, 0.0);
}

/* discrete sees only the rows' directions */
static void test_discrete_scale_invariant(void)
{
    enum { N = 14, C = 8 };
    float x[N * C], y[N * C];
    double r1 = 0.0, r2 = 0.0;
    int i;
    fill(x, N * C, 10, 1.0);
    for (i = 0; i < N * C; i++) y[i] = x[i] * (float)(1 << (i / C % 5)); /* row i scaled by 2^(i mod 5) */
    CHECK_INT_EQ(sgr_loss(SGR_DISCRETE, x, N, C, 4, 3, 4, &r1, NULL, 1.0f), SGR_OK);
    CHECK_INT_EQ(sgr_loss(SGR_DISCRETE, y, N, C, 4, 3, 4, &r2, NULL, 1.0f), SGR_OK);
    CHECK_CLOSE(r2, r1, 1e-12, 0.0);
}

/* the sketch / projection is a function of (seed, key) only */
static void test_randomness(void)
{
    enum { N = 16, C = 12 };
    float x[N * C];
    double a = 0.0, b = 0.0, c = 0.0, d = 0.0;
    int m;
    fill(x, N * C, 11, 1.0);
    for (m = SGR_WEAK; m <= SGR_ZIPFIAN; m++) {
        CHECK_INT_EQ(sgr_loss(m, x, N, C, 4, 5, 100, &a, NULL, 1.0f), SGR_OK);
        CHECK_INT_EQ(sgr_loss(m, x, N, C, 4, 5, 100, &b, NULL, 1.0f), SGR_OK);
        CHECK_INT_EQ(sgr_loss(m, x, N, C, 4, 5, 101, &c, NULL, 1.0f), SGR_OK);
        CHECK_INT_EQ(sgr_loss(m, x, N, C, 4, 6, 100, &d, NULL, 1.0f), SGR_OK);
        CHECK(a == b);
        CHECK(a != c);
        CHECK(a != d);
    }
}

static void test_refusals_and_names(void)
{
    float x[8] = {0};
    double R = 0.0;
    CHECK_INT_EQ(sgr_loss(SGR_OFF, x, 4, 2, 4, 0, 0, &R, NULL, 1.0f), SGR_EINVAL);
    CHECK_INT_EQ(sgr_loss(5, x, 4, 2, 4, 0, 0, &R, NULL, 1.0f), SGR_EINVAL);
    CHECK_INT_EQ(sgr_loss(SGR_WEAK, x, 1, 2, 4, 0, 0, &R, NULL, 1.0f), SGR_EINVAL); /* N >= 2 */
    CHECK_INT_EQ(sgr_loss(SGR_WEAK, x, 4, 2, 0, 0, 0, &R, NULL, 1.0f), SGR_EINVAL);
    CHECK_INT_EQ(sgr_loss(SGR_WEAK, NULL, 4, 2, 4, 0, 0, &R, NULL, 1.0f), SGR_EINVAL);
    CHECK_INT_EQ(sgr_loss(SGR_WEAK, x, 4, 2, 4, 0, 0, NULL, NULL, 1.0f), SGR_EINVAL);
    CHECK_INT_EQ(sgr_mode_parse("off"), SGR_OFF);
    CHECK_INT_EQ(sgr_mode_parse("weak"), SGR_WEAK);
    CHECK_INT_EQ(sgr_mode_parse("strong"), SGR_STRONG);
    CHECK_INT_EQ(sgr_mode_parse("discrete"), SGR_DISCRETE);
    CHECK_INT_EQ(sgr_mode_parse("zipfian"), SGR_ZIPFIAN);
    CHECK_INT_EQ(sgr_mode_parse("baseline"), -1);
    CHECK_INT_EQ(sgr_mode_parse(NULL), -1);
    CHECK(!strcmp(sgr_strerror(SGR_ENOMEM), "out of memory"));
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_weak_grad);
    TEST_RUN(test_strong_grad);
    TEST_RUN(test_discrete_grad);
    TEST_RUN(test_zipfian_grad);
    TEST_RUN(test_weak_value);
    TEST_RUN(test_discrete_scale_invariant);
    TEST_RUN(test_randomness);
    TEST_RUN(test_refusals_and_names);
    return TEST_END();
}
