/* test_gdelta_nocuda.c - gdelta.h's CUDA entry points in a build without nvcc: every
   *_cuda function returns GD_ENOCUDA (with a log message), nothing is written, and the
   new config field / error codes behave. The CUDA bodies themselves are tested by
   tests/parity_gdelta.cu (simulation and GPU). */
#define GDELTA_IMPLEMENTATION
#include "gdelta.h"
#include "tests/attnkit_test.h"

static int g_logged = 0;
static void logcb(const char *msg, void *user)
{
    (void)user;
    if (strstr(msg, "built without nvcc")) g_logged++;
}

static void test_stubs(void)
{
    gd_config cfg = gd_config_default();
    float buf[64], before[64];
    int slots[1] = {0}, i;
    gd_saved sv = gd_saved_init();
    for (i = 0; i < 64; i++) buf[i] = before[i] = (float)i;
    cfg.log = logcb;
    CHECK_INT_EQ(gd_cuda_available(), 0);
    CHECK(gd_workspace_size_cuda(&cfg, 1, 1, 4, 2, 2) == 0);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, buf, NULL, buf, buf, buf, buf, buf, NULL, 1, 1, 4, 2, 2,
                                 &sv, NULL, NULL), GD_ENOCUDA);
    CHECK_INT_EQ(gd_backward_cuda(&cfg, &sv, buf, buf, buf, buf, buf, NULL, buf, NULL, buf, buf,
                                  buf, buf, buf, NULL, 1, 1, 4, 2, 2, NULL, NULL), GD_ENOCUDA);
    CHECK_INT_EQ(gd_step_cuda(&cfg, buf, 1, slots, 1, 1, 2, 2, buf, buf, buf, buf, buf, buf, NULL),
                 GD_ENOCUDA);
    CHECK_INT_EQ(g_logged, 3);
    CHECK(memcmp(buf, before, sizeof buf) == 0);
    CHECK(sv.mem == NULL);
    gd_saved_free(&sv);
}

static void test_codes_and_math(void)
{
    gd_config cfg = gd_config_default();
    const int B = 1, H = 1, T = 3, D = 2;
    float q[6] = {1, 0, 0.5f, 0.5f, 0, 1}, v[6] = {1, 2, 3, 4, 5, 6}, g[3] = {0.9f, 1, 0.5f};
    float be[3] = {0.5f, 0.5f, 0.5f}, r1[6], r2[6];
    CHECK_INT_EQ(cfg.math, GD_MATH_FP32);
    CHECK(strcmp(gd_strerror(GD_ENOCUDA), gd_strerror(GD_ECUDA)) != 0);
    CHECK(strcmp(gd_strerror(GD_ENOTSUP), "not implemented in this build") == 0);
    CHECK(strcmp(gd_strerror(GD_ECUDA), "unknown error") != 0);
    /* the CPU path is fp32 whatever cfg.math says */
    CHECK_INT_EQ(gd_forward(&cfg, r1, NULL, q, q, v, g, be, NULL, B, H, T, D, D, NULL, NULL), GD_OK);
    cfg.math = GD_MATH_BF16;
    CHECK_INT_EQ(gd_forward(&cfg, r2, NULL, q, q, v, g, be, NULL, B, H, T, D, D, NULL, NULL), GD_OK);
    CHECK(memcmp(r1, r2, sizeof r1) == 0);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    TEST_RUN(test_stubs);
    TEST_RUN(test_codes_and_math);
    return TEST_END();
}
