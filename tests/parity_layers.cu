/* parity_layers.cu - examples/common/layers.c's fuzzy MoE (lyr_moe_*) on a CUDA device
   against the same layer on the CPU: one source, the device path taken when its buffers
   are device memory. Built like the other parity tests: against the CPU simulation of
   CUDA (tests/cuda_sim.h) by g++/clang++, and by nvcc for a GPU (`SKIP: no GPU` without
   one).

   Layer: C 24, F 40, E 4, R 4, B 2, T 7 (N 14), random parameters, memberships a softmax of
   random logits. For train 0 and 1 (Gumbel noise), top_k 1 and 2, renorm 0 and 1:
     - forward: out within 1e-5 of the CPU's largest |out|; the routing runs on the host
       on copies of the same bits on both paths, so lb_stat and the expert selection must
       be bit-identical;
     - backward, lb_coef 0 and 0.5, both from the same forward (the backward only reads the
       saved buffer and the routing state in the host buffer): every parameter gradient
       (gate, w1, b1, w2, b2), dx and dmu within 1e-5 of the CPU tensor's largest
       |value|; the gradients accumulate into non-zero starting values;
     - the input gradients are optional (dx, dmu NULL) on the device too.
   Also: every token routed to expert 0 (idle experts: no rows, exactly zero gradient),
   and the refusals, each with nothing written: the device path without a host buffer,
   a device pointer as the host buffer, host and device buffers mixed (in the forward and
   in the backward), NaN in the memberships (checked on the host copy).
   The gated-delta memory (lyr_gdelta_*) and the polar attention mixer (lyr_polar_*) the
   same way: see their sections below. The MLP FFNs and the norms, which the model reaches
   only through layers.h's generic table with an explicit device context (no pointer
   routing): the same case on a CPU context and on a CUDA context, see the last section. */
#include "tests/cuda_test.h"
#include "examples/common/impl.c"
#include "examples/common/layers.c"

#include <math.h>
#include <string.h>

#include <string>
#include <vector>

static int g_gpu = 0;

#define NEED_GPU()                                                             \
    do {                                                                       \
        if (!g_gpu) TEST_SKIP("no GPU");                                       \
    } while (0)

#define PC 24
#define PF 40
#define PE 4
#define PR 4
#define PB 2
#define PT 7
#define PN (PB * PT)
#define TOL 1e-5

typedef std::vector<float> fvec;

/* ------------------------------------------------------------ shared scaffolding */
/* A layer case's host data, whatever the layer: np parameter tensors (spec), their values
   and the gradients' non-zero starting values, the input x, the output gradient dout and
   dx's starting value (N = PB * T rows of width C), the saved and work sizes. */
struct layer_case {
    int np, T, N, C;
    lyr_pspec spec[LYR_MAX_PARAMS];
    fvec P[LYR_MAX_PARAMS], G0[LYR_MAX_PARAMS];
    fvec x, dout, dx0;
    size_t nsaved, nwork;
};

/* the parameter tensors sized from spec (zero), Pp their pointers for the layer's init */
static void case_params(layer_case &c, int np, float **Pp)
{
    c.np = np;
    for (int i = 0; i < np; i++) {
        c.P[i].assign(lyr_pspec_numel(&c.spec[i]), 0.0f);
        Pp[i] = c.P[i].data();
    }
}

/* after the layer's init: noise on every parameter tensor (scale s_one on tensor one, s on
   the others) and the gradients' starting values, then x, dout, dx0 (the draws in this
   order) */
static void case_random(layer_case &c, int one, double s_one, double s)
{
    for (int i = 0; i < c.np; i++) {
        fvec noise = randn(c.P[i].size(), i == one ? s_one : s);
        for (size_t j = 0; j < c.P[i].size(); j++) c.P[i][j] += noise[j];
        c.G0[i] = randn(c.P[i].size(), 0.01);
    }
    c.x = randn((size_t)c.N * c.C, 1.0);
    c.dout = randn((size_t)c.N * c.C, 1.0);
    c.dx0 = randn((size_t)c.N * c.C, 0.1);
}

/* one path's buffers: host vectors or device copies of the case's data */
struct layer_run {
    int dev, np;
    float *P[LYR_MAX_PARAMS], *G[LYR_MAX_PARAMS];
    float *x, *out, *dout, *dx, *saved, *work;
    fvec hP[LYR_MAX_PARAMS], hG[LYR_MAX_PARAMS], hout, hdx, hsaved, hwork;
};

static float *put(int dev, fvec &h, const fvec &v)
{
    h = v;
    return dev ? dput(v) : h.data();
}

static void run_init(layer_run &r, const layer_case &c, int dev)
{
    int i;
    r.dev = dev;
    r.np = c.np;
    for (i = 0; i < c.np; i++) {
        r.P[i] = put(dev, r.hP[i], c.P[i]);
        r.G[i] = put(dev, r.hG[i], c.G0[i]);
    }
    /* the inputs (read-only): the case's own vectors on the CPU path */
    r.x = dev ? dput(c.x) : const_cast<float *>(c.x.data());
    r.dout = dev ? dput(c.dout) : const_cast<float *>(c.dout.data());
    r.out = put(dev, r.hout, fvec((size_t)c.N * c.C, -7.0f));
    r.dx = put(dev, r.hdx, c.dx0);
    r.saved = put(dev, r.hsaved, fvec(c.nsaved, NAN));
    r.work = put(dev, r.hwork, fvec(c.nwork, NAN));
}

static void run_free(layer_run &r)
{
    int i;
    if (!r.dev) return;
    for (i = 0; i < r.np; i++) {
        dfree(r.P[i]);
        dfree(r.G[i]);
    }
    dfree(r.x);
    dfree(r.dout);
    dfree(r.out);
    dfree(r.dx);
    dfree(r.saved);
    dfree(r.work);
}

/* a buffer's current host view (dev: device memory) */
static fvec get_any(int dev, const float *p, size_t n)
{
    return dev ? dget(p, n) : fvec(p, p + n);
}

static fvec get(const layer_run &r, const float *p, size_t n)
{
    return get_any(r.dev, p, n);
}

/* the gradients and dx back to their starting values */
static void reset_grads(layer_run &r, const layer_case &c)
{
    int i;
    for (i = 0; i < c.np; i++)
        CHECK_INT_EQ(tk_copy(r.G[i], c.G0[i].data(), c.G0[i].size() * sizeof(float)), TK_OK);
    CHECK_INT_EQ(tk_copy(r.dx, c.dx0.data(), c.dx0.size() * sizeof(float)), TK_OK);
}

/* dev within tol of ref's largest |value|; *worst: the largest |dev - ref| / that scale
   seen, for the report line */
static void close_to(const fvec &dev, const fvec &ref, double tol, double *worst, const char *what,
                     const std::string &ctx)
{
    double scale = maxabs(ref) > 0 ? maxabs(ref) : 1.0;
    int failed = tt__case_failed;
    for (size_t i = 0; i < dev.size() && i < ref.size(); i++) {
        double e = fabs((double)dev[i] - (double)ref[i]) / scale;
        if (e > *worst) *worst = e;
    }
    tt__case_failed = 0;
    CHECK(dev.size() == ref.size());
    CHECK_ALL_CLOSE(dev.data(), ref.data(), (long)ref.size(), 0.0, tol * scale);
    if (tt__case_failed) fprintf(stderr, "    %s, %s (scale %.3g)\n", what, ctx.c_str(), maxabs(ref));
    tt__case_failed |= failed;
}

/* the device run g's forward output against the CPU run h's */
static void close_out(const layer_run &g, const layer_run &h, const layer_case &c, double tol,
                      double *worst, const std::string &ctx)
{
    close_to(get(g, g.out, (size_t)c.N * c.C), h.hout, tol, worst, "out", ctx);
}

/* every parameter gradient of the device run g against the CPU run h's, then, with
   dx_name, the input gradient dx */
static void close_grads(const layer_run &g, const layer_run &h, const layer_case &c, double tol,
                        double *worst, const char *dx_name, const std::string &ctx)
{
    for (int i = 0; i < c.np; i++)
        close_to(get(g, g.G[i], c.G0[i].size()), h.hG[i], tol, worst, c.spec[i].suffix, ctx);
    if (dx_name) close_to(get(g, g.dx, c.dx0.size()), h.hdx, tol, worst, dx_name, ctx);
}

/* ------------------------------------------------------------ fuzzy MoE */
/* host data of one layer and the refusal scratch */
struct moe_case : layer_case {
    lyr_moe_dims d;
    fvec mu, dmu0;
    size_t nhost;
};

static void case_init(moe_case &c, int top_k, int renorm, unsigned long long seed)
{
    tk_rng rng;
    c.T = PT;
    c.N = PN;
    c.C = PC;
    c.d = lyr_moe_dims_make(PC, PF, PE, top_k, PR);
    c.d.renorm = renorm;
    CHECK_INT_EQ(lyr_moe_params(&c.d, c.spec, LYR_MAX_PARAMS), LYR_MOE_NPARAMS);
    tk_rng_seed(&rng, seed, 3);
    tt_seed(seed);
    {
        float *Pp[LYR_MOE_NPARAMS];
        case_params(c, LYR_MOE_NPARAMS, Pp);
        CHECK_INT_EQ(lyr_moe_init(&c.d, Pp, &rng, 0.2f), LYR_OK);
    }
    case_random(c, LYR_MOE_GATE, 1.0, 0.1);
    c.dmu0 = randn((size_t)PN * PR, 0.1);
    c.mu.assign((size_t)PN * PR, 0.0f);
    for (int n = 0; n < PN; n++) {
        double e[PR], s = 0;
        for (int r = 0; r < PR; r++) s += (e[r] = exp(1.5 * tt_normal()));
        for (int r = 0; r < PR; r++) c.mu[(size_t)n * PR + r] = (float)(e[r] / s);
    }
    c.nsaved = lyr_moe_saved_floats(&c.d, PB, PT);
    c.nwork = lyr_moe_work_floats(&c.d, PB, PT);
    c.nhost = lyr_moe_host_floats(&c.d, PB, PT);
    CHECK(c.nsaved > 0 && c.nwork > 0 && c.nhost > 0);
}

/* one path's buffers, with the memberships, their gradient and the host buffer */
struct moe_run : layer_run {
    float *mu, *dmu;
    fvec hdmu;
    fvec host; /* the host buffer (both paths; NaN bytes: its content must not matter) */
};

static void run_init(moe_run &r, const moe_case &c, int dev)
{
    run_init(static_cast<layer_run &>(r), c, dev);
    r.mu = dev ? dput(c.mu) : const_cast<float *>(c.mu.data());
    r.dmu = put(dev, r.hdmu, c.dmu0);
    r.host.assign(c.nhost, 0.0f);
    memset(r.host.data(), 0xff, c.nhost * sizeof(float));
}

static void run_free(moe_run &r)
{
    if (r.dev) {
        dfree(r.mu);
        dfree(r.dmu);
    }
    run_free(static_cast<layer_run &>(r));
}

static void reset_grads(moe_run &r, const moe_case &c)
{
    reset_grads(static_cast<layer_run &>(r), c);
    CHECK_INT_EQ(tk_copy(r.dmu, c.dmu0.data(), c.dmu0.size() * sizeof(float)), TK_OK);
}

static int fwd(moe_run &r, const moe_case &c, int train, uint64_t seed, float *lb)
{
    return lyr_moe_forward(&c.d, (const float *const *)r.P, r.x, r.mu, r.out, r.saved, r.work,
                           PB, PT, train, seed, r.host.data(), lb);
}

static int bwd(moe_run &r, const moe_case &c, float lb_coef, int inputs)
{
    return lyr_moe_backward(&c.d, (const float *const *)r.P, r.G, r.dout, inputs ? r.dx : NULL,
                            inputs ? r.dmu : NULL, r.saved, r.work, PB, PT, r.host.data(), lb_coef);
}

/* the largest |dev - ref| / scale seen, for the report line */
static double g_worst = 0.0;

/* the expert choices of the last forward: the routing block's idx (N,K) */
static std::vector<int> selection(const moe_run &r, const moe_case &c)
{
    lyr__moe_saved s;
    lyr__moe_rt rt;
    if (r.dev) {
        lyr__moe_host h;
        lyr__moe_carve_host(&c.d, const_cast<float *>(r.host.data()), PN, &h);
        lyr__moe_carve_rt(&c.d, h.rt, PN, &rt);
    } else {
        lyr__moe_carve(&c.d, r.saved, PN, &s);
        lyr__moe_carve_rt(&c.d, s.rt, PN, &rt);
    }
    return std::vector<int>(rt.idx, rt.idx + (size_t)PN * c.d.top_k);
}

static void compare_case(int train, int top_k, int renorm, unsigned long long seed)
{
    moe_case c;
    moe_run h, g;
    float lbh = -1.0f, lbg = -2.0f;
    char buf[96];
    snprintf(buf, sizeof buf, "train %d top_k %d renorm %d", train, top_k, renorm);
    std::string ctx(buf);
    case_init(c, top_k, renorm, seed);
    run_init(h, c, 0);
    run_init(g, c, 1);
    CHECK_INT_EQ(fwd(h, c, train, 1000 + seed, &lbh), LYR_OK);
    CHECK_INT_EQ(fwd(g, c, train, 1000 + seed, &lbg), LYR_OK);
    close_out(g, h, c, TOL, &g_worst, ctx);
    CHECK(memcmp(&lbh, &lbg, sizeof lbh) == 0);
    CHECK(selection(g, c) == selection(h, c));
    for (int pass = 0; pass < 2; pass++) {
        float lb_coef = pass ? 0.5f : 0.0f;
        std::string bctx = ctx + (pass ? ", lb_coef 0.5" : ", lb_coef 0");
        reset_grads(h, c);
        reset_grads(g, c);
        CHECK_INT_EQ(bwd(h, c, lb_coef, 1), LYR_OK);
        CHECK_INT_EQ(bwd(g, c, lb_coef, 1), LYR_OK);
        close_grads(g, h, c, TOL, &g_worst, "dx", bctx);
        close_to(get(g, g.dmu, c.dmu0.size()), h.hdmu, TOL, &g_worst, "dmu", bctx);
        if (pass && !(top_k == 1 && renorm)) {
            /* the load-balance term reaches the gate (not with one renormalised expert:
               its weight is 1 whatever the logits) */
            fvec without = h.hG[LYR_MOE_GATE];
            reset_grads(h, c);
            CHECK_INT_EQ(bwd(h, c, 0.0f, 1), LYR_OK);
            CHECK(h.hG[LYR_MOE_GATE] != without);
        }
    }
    /* dx, dmu NULL: the parameter gradients alone */
    reset_grads(h, c);
    reset_grads(g, c);
    CHECK_INT_EQ(bwd(h, c, 0.25f, 0), LYR_OK);
    CHECK_INT_EQ(bwd(g, c, 0.25f, 0), LYR_OK);
    close_grads(g, h, c, TOL, &g_worst, NULL, ctx + ", no input grads");
    CHECK(get(g, g.dx, c.dx0.size()) == c.dx0);
    CHECK(get(g, g.dmu, c.dmu0.size()) == c.dmu0);
    run_free(g);
}

static void test_moe_forward_backward(void)
{
    NEED_GPU();
    for (int train = 0; train < 2; train++)
        for (int top_k = 1; top_k <= 2; top_k++)
            for (int renorm = 0; renorm < 2; renorm++)
                compare_case(train, top_k, renorm, 11 + (unsigned long long)(train * 4 + top_k * 2 + renorm));
    fprintf(stderr, "    worst |device - cpu| / the tensor's largest |cpu|: %.3g (bound %.0e)\n", g_worst, TOL);
}

/* every token on expert 0: the other experts get no rows (no GEMM) and exactly zero
   gradient on both paths */
static void test_moe_idle_experts(void)
{
    moe_case c;
    moe_run h, g;
    float lbh, lbg;
    NEED_GPU();
    case_init(c, 1, 1, 41);
    for (int e = 0; e < PE; e++)
        for (int r = 0; r < PR; r++) c.P[LYR_MOE_GATE][(size_t)e * PR + r] = e == 0 ? 5.0f : -5.0f;
    for (int i = 0; i < LYR_MOE_NPARAMS; i++) std::fill(c.G0[i].begin(), c.G0[i].end(), 0.0f);
    run_init(h, c, 0);
    run_init(g, c, 1);
    CHECK_INT_EQ(fwd(h, c, 0, 0, &lbh), LYR_OK);
    CHECK_INT_EQ(fwd(g, c, 0, 0, &lbg), LYR_OK);
    close_out(g, h, c, TOL, &g_worst, "idle experts");
    CHECK(lbh == lbg);
    CHECK_INT_EQ(bwd(h, c, 0.3f, 1), LYR_OK);
    CHECK_INT_EQ(bwd(g, c, 0.3f, 1), LYR_OK);
    close_grads(g, h, c, TOL, &g_worst, "dx", "idle experts");
    close_to(get(g, g.dmu, c.dmu0.size()), h.hdmu, TOL, &g_worst, "dmu", "idle experts");
    {
        fvec w1 = get(g, g.G[LYR_MOE_W1], c.G0[LYR_MOE_W1].size());
        size_t per = (size_t)PF * PC, nz = 0;
        for (size_t i = per; i < w1.size(); i++) nz += w1[i] != 0.0f;
        CHECK(nz == 0);
        CHECK(w1[0] != 0.0f);
    }
    run_free(g);
}

/* refusals with device buffers: LYR_EINVAL and nothing written */
static void test_moe_refusals(void)
{
    moe_case c;
    moe_run g;
    float lb = 3.0f;
    fvec out0, G0, dx0;
    NEED_GPU();
    case_init(c, 2, 1, 51);
    run_init(g, c, 1);
    out0 = get(g, g.out, (size_t)PN * PC);
    /* no host buffer */
    CHECK_INT_EQ(lyr_moe_forward(&c.d, (const float *const *)g.P, g.x, g.mu, g.out, g.saved,
                                 g.work, PB, PT, 1, 5, NULL, &lb), LYR_EINVAL);
    /* a device buffer as the host buffer */
    CHECK_INT_EQ(lyr_moe_forward(&c.d, (const float *const *)g.P, g.x, g.mu, g.out, g.saved,
                                 g.work, PB, PT, 1, 5, g.dx, &lb), LYR_EINVAL);
    /* mixed: x on the host */
    CHECK_INT_EQ(lyr_moe_forward(&c.d, (const float *const *)g.P, c.x.data(), g.mu, g.out,
                                 g.saved, g.work, PB, PT, 1, 5, g.host.data(), &lb), LYR_EINVAL);
    /* mixed: one parameter on the host */
    {
        float *keep = g.P[LYR_MOE_W2];
        g.P[LYR_MOE_W2] = const_cast<float *>(c.P[LYR_MOE_W2].data());
        CHECK_INT_EQ(fwd(g, c, 1, 5, &lb), LYR_EINVAL);
        g.P[LYR_MOE_W2] = keep;
    }
    /* mixed: out on the host */
    {
        fvec hout((size_t)PN * PC, -3.0f);
        CHECK_INT_EQ(lyr_moe_forward(&c.d, (const float *const *)g.P, g.x, g.mu, hout.data(),
                                     g.saved, g.work, PB, PT, 1, 5, g.host.data(), &lb), LYR_EINVAL);
        CHECK(hout == fvec((size_t)PN * PC, -3.0f));
    }
    /* NaN in the memberships: found on the host copy */
    {
        fvec bad = c.mu;
        float *d_bad;
        bad[5] = NAN;
        d_bad = dput(bad);
        CHECK_INT_EQ(lyr_moe_forward(&c.d, (const float *const *)g.P, g.x, d_bad, g.out, g.saved,
                                     g.work, PB, PT, 1, 5, g.host.data(), &lb), LYR_EINVAL);
        dfree(d_bad);
    }
    CHECK(lb == 3.0f);
    CHECK(get(g, g.out, (size_t)PN * PC) == out0);

    /* the backward after a good forward */
    CHECK_INT_EQ(fwd(g, c, 1, 5, &lb), LYR_OK);
    G0 = get(g, g.G[LYR_MOE_GATE], c.G0[LYR_MOE_GATE].size());
    dx0 = get(g, g.dx, c.dx0.size());
    CHECK_INT_EQ(lyr_moe_backward(&c.d, (const float *const *)g.P, g.G, g.dout, g.dx, g.dmu,
                                  g.saved, g.work, PB, PT, NULL, 0.0f), LYR_EINVAL);
    {
        fvec hdx = c.dx0; /* dx on the host */
        CHECK_INT_EQ(lyr_moe_backward(&c.d, (const float *const *)g.P, g.G, g.dout, hdx.data(),
                                      g.dmu, g.saved, g.work, PB, PT, g.host.data(), 0.0f),
                     LYR_EINVAL);
        CHECK(hdx == c.dx0);
    }
    {
        fvec hG = c.G0[LYR_MOE_B1]; /* one gradient on the host */
        float *keep = g.G[LYR_MOE_B1];
        g.G[LYR_MOE_B1] = hG.data();
        CHECK_INT_EQ(bwd(g, c, 0.0f, 1), LYR_EINVAL);
        g.G[LYR_MOE_B1] = keep;
        CHECK(hG == c.G0[LYR_MOE_B1]);
    }
    CHECK_INT_EQ(lyr_moe_backward(&c.d, (const float *const *)g.P, g.G, c.dout.data(), g.dx,
                                  g.dmu, g.saved, g.work, PB, PT, g.host.data(), 0.0f), LYR_EINVAL);
    CHECK(get(g, g.G[LYR_MOE_GATE], c.G0[LYR_MOE_GATE].size()) == G0);
    CHECK(get(g, g.dx, c.dx0.size()) == dx0);
    /* and then it works */
    CHECK_INT_EQ(bwd(g, c, 0.0f, 1), LYR_OK);
    run_free(g);
}

/* the CPU path: a host buffer that is device memory is refused too; NULL is fine */
static void test_moe_cpu_host_arg(void)
{
    moe_case c;
    moe_run h;
    float lb;
    case_init(c, 2, 1, 61);
    run_init(h, c, 0);
    CHECK_INT_EQ(lyr_moe_forward(&c.d, (const float *const *)h.P, h.x, h.mu, h.out, h.saved,
                                 h.work, PB, PT, 1, 5, NULL, &lb), LYR_OK);
    CHECK_INT_EQ(lyr_moe_backward(&c.d, (const float *const *)h.P, h.G, h.dout, h.dx, h.dmu,
                                  h.saved, h.work, PB, PT, NULL, 0.1f), LYR_OK);
    if (g_gpu) {
        float *d_host = dput(fvec(c.nhost, 0.0f));
        CHECK_INT_EQ(lyr_moe_forward(&c.d, (const float *const *)h.P, h.x, h.mu, h.out, h.saved,
                                     h.work, PB, PT, 1, 5, d_host, &lb), LYR_EINVAL);
        CHECK_INT_EQ(lyr_moe_backward(&c.d, (const float *const *)h.P, h.G, h.dout, h.dx, h.dmu,
                                      h.saved, h.work, PB, PT, d_host, 0.1f), LYR_EINVAL);
        dfree(d_host);
    }
}

/* ------------------------------------------------------------ gated-delta memory */
/* Layer: C 32, Hm 2, Dk 16 (chunk 32), B 2, T 7 and 70 (not a multiple of the chunk),
   random parameters (proj.weight too: it starts at zero). Forward out within 1e-5 of the
   CPU's largest |out| (and the gate statistics); backward every parameter gradient and
   dxn within 1e-4 of the CPU tensor's largest |value|, accumulated into non-zero starting
   values; dxn NULL; the refusals with mixed sides. */
#define GC 32
#define GHM 2
#define GDK 16
#define GTOL_F 1e-5
#define GTOL_B 1e-4

struct gd_case : layer_case {
    lyr_gdelta_dims d;
};

static void gd_case_init(gd_case &c, int T, unsigned long long seed)
{
    tk_rng rng;
    c.T = T;
    c.N = PB * T;
    c.C = GC;
    c.d = lyr_gdelta_dims_make(GC, GHM, GDK);
    CHECK_INT_EQ(lyr_gdelta_params(&c.d, c.spec, LYR_MAX_PARAMS), LYR_GD_NPARAMS);
    tk_rng_seed(&rng, seed, 3);
    tt_seed(seed);
    {
        float *Pp[LYR_GD_NPARAMS];
        case_params(c, LYR_GD_NPARAMS, Pp);
        CHECK_INT_EQ(lyr_gdelta_init(&c.d, Pp, &rng, 0.2f), LYR_OK);
    }
    case_random(c, -1, 0.2, 0.2);
    c.nsaved = lyr_gdelta_saved_floats(&c.d, PB, T);
    c.nwork = lyr_gdelta_work_floats(&c.d, PB, T);
    CHECK(c.nsaved > 0 && c.nwork > 0);
}

static int gd_fwd(layer_run &r, const gd_case &c, int train, lyr_gdelta_stats *st)
{
    return lyr_gdelta_forward(&c.d, (const float *const *)r.P, r.x, r.out, r.saved, r.work, PB,
                              c.T, train, 9, st);
}

static int gd_bwd(layer_run &r, const gd_case &c, int inputs)
{
    return lyr_gdelta_backward(&c.d, (const float *const *)r.P, r.G, r.dout, inputs ? r.dx : NULL,
                               r.saved, r.work, PB, c.T);
}

static double g_gd_worst_f = 0.0, g_gd_worst_b = 0.0;

static void gd_compare(int T, int train, unsigned long long seed)
{
    gd_case c;
    layer_run h, g;
    lyr_gdelta_stats sh, sg;
    char buf[64];
    snprintf(buf, sizeof buf, "gdelta T %d train %d", T, train);
    std::string ctx(buf);
    gd_case_init(c, T, seed);
    run_init(h, c, 0);
    run_init(g, c, 1);
    CHECK_INT_EQ(gd_fwd(h, c, train, &sh), LYR_OK);
    CHECK_INT_EQ(gd_fwd(g, c, train, &sg), LYR_OK);
    CHECK(maxabs(h.hout) > 1e-3);
    close_out(g, h, c, GTOL_F, &g_gd_worst_f, ctx);
    CHECK_NEAR(sg.gamma_mean, sh.gamma_mean, 1e-6);
    CHECK_NEAR(sg.beta_mean, sh.beta_mean, 1e-6);
    for (int pass = 0; pass < 2; pass++) { /* twice from one forward: saved is read-only */
        reset_grads(h, c);
        reset_grads(g, c);
        CHECK_INT_EQ(gd_bwd(h, c, 1), LYR_OK);
        CHECK_INT_EQ(gd_bwd(g, c, 1), LYR_OK);
        close_grads(g, h, c, GTOL_B, &g_gd_worst_b, "dxn", ctx);
    }
    /* dxn NULL */
    reset_grads(h, c);
    reset_grads(g, c);
    CHECK_INT_EQ(gd_bwd(h, c, 0), LYR_OK);
    CHECK_INT_EQ(gd_bwd(g, c, 0), LYR_OK);
    close_grads(g, h, c, GTOL_B, &g_gd_worst_b, NULL, ctx + ", dxn NULL");
    CHECK(get(g, g.dx, c.dx0.size()) == c.dx0);
    run_free(g);
}

static void test_gdelta_forward_backward(void)
{
    NEED_GPU();
    gd_compare(PT, 0, 61);
    gd_compare(PT, 1, 62);
    gd_compare(70, 0, 63);
    gd_compare(70, 1, 64);
    printf("  gdelta worst |dev - cpu| / max|cpu|: forward %.3g, backward %.3g\n", g_gd_worst_f,
           g_gd_worst_b);
}

/* mixed sides: LYR_EINVAL, nothing written */
/* The backward refusals every device layer shares: dout, dxn or the gradient gi on the host
   give LYR_EINVAL and write nothing (gradient gw and dxn keep their values, the host
   buffers theirs). bwd(G, dout, dx) runs the layer's backward with g's other buffers.
   Returns dxn's value before. */
template <class Case, class Bwd>
static fvec bwd_refusals(layer_run &g, const Case &c, Bwd bwd, int gi, int gw)
{
    fvec G0 = get(g, g.G[gw], c.G0[gw].size()), dx0 = get(g, g.dx, c.dx0.size());
    CHECK_INT_EQ(bwd(g.G, c.dout.data(), g.dx), LYR_EINVAL);
    {
        fvec hdx = c.dx0;
        CHECK_INT_EQ(bwd(g.G, g.dout, hdx.data()), LYR_EINVAL);
        CHECK(hdx == c.dx0);
    }
    {
        float *keep = g.G[gi];
        fvec hg = c.G0[gi];
        g.G[gi] = hg.data();
        CHECK_INT_EQ(bwd(g.G, g.dout, g.dx), LYR_EINVAL);
        g.G[gi] = keep;
        CHECK(hg == c.G0[gi]);
    }
    CHECK(get(g, g.G[gw], c.G0[gw].size()) == G0);
    CHECK(get(g, g.dx, c.dx0.size()) == dx0);
    return dx0;
}

static void test_gdelta_refusals(void)
{
    gd_case c;
    layer_run g;
    fvec out0, dx0, saved0;
    NEED_GPU();
    gd_case_init(c, PT, 65);
    run_init(g, c, 1);
    out0 = get(g, g.out, (size_t)c.N * GC);
    saved0 = get(g, g.saved, c.nsaved);
    /* xn on the host */
    CHECK_INT_EQ(lyr_gdelta_forward(&c.d, (const float *const *)g.P, c.x.data(), g.out, g.saved,
                                    g.work, PB, PT, 0, 9, NULL), LYR_EINVAL);
    /* one parameter on the host */
    {
        float *keep = g.P[LYR_GD_NORM];
        g.P[LYR_GD_NORM] = const_cast<float *>(c.P[LYR_GD_NORM].data());
        CHECK_INT_EQ(gd_fwd(g, c, 0, NULL), LYR_EINVAL);
        g.P[LYR_GD_NORM] = keep;
    }
    /* gate_is_log is CPU-only */
    {
        gd_case c2 = c;
        c2.d.cfg.gate_is_log = 1;
        CHECK_INT_EQ(gd_fwd(g, c2, 0, NULL), LYR_EINVAL);
    }
    CHECK(get(g, g.out, (size_t)c.N * GC) == out0);
    {
        fvec sv = get(g, g.saved, c.nsaved);
        CHECK(memcmp(sv.data(), saved0.data(), sv.size() * sizeof(float)) == 0);
    }
    CHECK_INT_EQ(gd_fwd(g, c, 0, NULL), LYR_OK);
    /* backward: dout on the host, dxn on the host, one gradient on the host */
    dx0 = bwd_refusals(g, c, [&](float *const *G, const float *dout, float *dx) {
        return lyr_gdelta_backward(&c.d, (const float *const *)g.P, G, dout, dx, g.saved, g.work, PB, PT);
    }, LYR_GD_B_BETA, LYR_GD_PROJ);
    /* a host saved buffer filled by a CPU forward, with device buffers: refused */
    {
        layer_run h;
        run_init(h, c, 0);
        CHECK_INT_EQ(gd_fwd(h, c, 0, NULL), LYR_OK);
        CHECK_INT_EQ(lyr_gdelta_backward(&c.d, (const float *const *)g.P, g.G, g.dout, g.dx,
                                         h.saved, g.work, PB, PT), LYR_EINVAL);
    }
    CHECK(get(g, g.dx, c.dx0.size()) == dx0);
    run_free(g);
}

/* ------------------------------------------------------------ polar attention mixer */
/* Layer: C 128, H 4 (D 32: the CUDA polar kernels take D 32/64/96/128), Hkv 4 and 2
   (GQA), B 2, T 7 and 33, window off and 5, qk_norm on and off, train 0 and 1, random
   parameters. Forward out within 1e-5 of the CPU's largest |out|, the statistics within
   1e-5; backward every parameter gradient and dxn within 1e-4 of the CPU tensor's largest
   |value|, accumulated into non-zero starting values; dxn NULL; the distractor loss in
   training (R 4: the loss within 1e-5, its gradient inside dxn's); the output gate per
   channel with the output biases (issue 43 item 4), with and without qk_norm and GQA; the
   Canon layers (item 2, K 4); the refusals (mixed sides). */
#define QC 128
#define QH 4
#define QTOL_F 1e-5
#define QTOL_B 1e-4

struct pl_case : layer_case {
    lyr_polar_dims d;
};

static int g_pl_dist = 0; /* distractor keys of the next cases (0: the loss off) */
static int g_pl_chan = 0; /* 1: the next cases gate per channel, with o.bias and mu.bias */
static int g_pl_canon = 0; /* Canon layers' kernel of the next cases (0: none) */

static void pl_case_init(pl_case &c, int T, int Hkv, int window, int qk_norm,
                         unsigned long long seed)
{
    tk_rng rng;
    c.T = T;
    c.N = PB * T;
    c.C = QC;
    c.d = lyr_polar_dims_make(QC, QH);
    c.d.Hkv = Hkv;
    c.d.cfg.distractor_keys = g_pl_dist;
    c.d.qk_norm = qk_norm;
    c.d.gate = g_pl_chan ? LYR_POLAR_GATE_CHANNEL : LYR_POLAR_GATE_HEAD;
    c.d.bias = g_pl_chan;
    c.d.canon_k = g_pl_canon;
    if (window > 0) c.d.cfg.window = window; /* else POLAR_NO_WINDOW */
    const int np = (g_pl_chan ? LYR_POLAR_NPARAMS_MAX : LYR_POLAR_NPARAMS) + (g_pl_canon ? 3 : 0);
    CHECK_INT_EQ(lyr_polar_params(&c.d, c.spec, LYR_MAX_PARAMS), np);
    tk_rng_seed(&rng, seed, 3);
    tt_seed(seed);
    {
        float *Pp[LYR_MAX_PARAMS];
        case_params(c, np, Pp);
        CHECK_INT_EQ(lyr_polar_init(&c.d, Pp, &rng, 0.1f), LYR_OK);
    }
    case_random(c, LYR_POLAR_QKV, 0.1, 0.2);
    c.nsaved = lyr_polar_saved_floats(&c.d, PB, T);
    c.nwork = lyr_polar_work_floats(&c.d, PB, T);
    CHECK(c.nsaved > 0 && c.nwork > 0);
}

static int pl_fwd(layer_run &r, const pl_case &c, int train, lyr_polar_stats *st)
{
    return lyr_polar_forward(&c.d, (const float *const *)r.P, r.x, r.out, r.saved, r.work, PB,
                             c.T, train, 9, st);
}

static int pl_bwd(layer_run &r, const pl_case &c, int inputs)
{
    return lyr_polar_backward(&c.d, (const float *const *)r.P, r.G, r.dout, inputs ? r.dx : NULL,
                              r.saved, r.work, PB, c.T);
}

static double g_pl_worst_f = 0.0, g_pl_worst_b = 0.0, g_pl_worst_s = 0.0;

static void pl_compare(int T, int Hkv, int window, int qk_norm, int train,
                       unsigned long long seed)
{
    pl_case c;
    layer_run h, g;
    lyr_polar_stats sh, sg;
    char buf[128];
    snprintf(buf, sizeof buf, "polar T %d Hkv %d window %d qk_norm %d train %d gate %s canon %d", T, Hkv, window,
             qk_norm, train, g_pl_chan ? "channel+bias" : "head", g_pl_canon);
    std::string ctx(buf);
    pl_case_init(c, T, Hkv, window, qk_norm, seed);
    run_init(h, c, 0);
    run_init(g, c, 1);
    CHECK_INT_EQ(pl_fwd(h, c, train, &sh), LYR_OK);
    CHECK_INT_EQ(pl_fwd(g, c, train, &sg), LYR_OK);
    CHECK(maxabs(h.hout) > 1e-3);
    close_out(g, h, c, QTOL_F, &g_pl_worst_f, ctx);
    CHECK_NEAR(sg.mag_mean, sh.mag_mean, 1e-5);
    CHECK_NEAR(sg.null_mean, sh.null_mean, 1e-5);
    if (train && g_pl_dist) { /* the distractor loss (eq. 15) of the training forward */
        CHECK(sh.align_loss > 0.0f);
        CHECK_NEAR(sg.align_loss, sh.align_loss, 1e-5 * sh.align_loss);
    } else {
        CHECK(sg.align_loss == 0.0f && sh.align_loss == 0.0f);
    }
    if (fabs((double)sg.mag_mean - sh.mag_mean) > g_pl_worst_s)
        g_pl_worst_s = fabs((double)sg.mag_mean - sh.mag_mean);
    if (fabs((double)sg.null_mean - sh.null_mean) > g_pl_worst_s)
        g_pl_worst_s = fabs((double)sg.null_mean - sh.null_mean);
    for (int pass = 0; pass < 2; pass++) { /* twice from one forward: saved is read-only */
        reset_grads(h, c);
        reset_grads(g, c);
        CHECK_INT_EQ(pl_bwd(h, c, 1), LYR_OK);
        CHECK_INT_EQ(pl_bwd(g, c, 1), LYR_OK);
        close_grads(g, h, c, QTOL_B, &g_pl_worst_b, "dxn", ctx);
    }
    /* dxn NULL */
    reset_grads(h, c);
    reset_grads(g, c);
    CHECK_INT_EQ(pl_bwd(h, c, 0), LYR_OK);
    CHECK_INT_EQ(pl_bwd(g, c, 0), LYR_OK);
    close_grads(g, h, c, QTOL_B, &g_pl_worst_b, NULL, ctx + ", dxn NULL");
    CHECK(get(g, g.dx, c.dx0.size()) == c.dx0);
    run_free(g);
}

static void test_polar_forward_backward(void)
{
    NEED_GPU();
    pl_compare(PT, 4, 0, 1, 0, 71);
    pl_compare(PT, 2, 0, 1, 1, 72);
    pl_compare(33, 2, 5, 1, 1, 73);
    pl_compare(33, 4, 0, 0, 0, 74);
    pl_compare(33, 4, 5, 1, 0, 75);
    g_pl_dist = 4; /* the distractor loss: keys drawn on the host, loss and gradient on the device */
    pl_compare(33, 2, 5, 1, 1, 77);
    g_pl_dist = 0;
    g_pl_chan = 1; /* issue 43 item 4 */
    pl_compare(PT, 4, 0, 1, 1, 78);
    pl_compare(33, 2, 5, 0, 1, 79);
    pl_compare(33, 2, 0, 1, 0, 80);
    g_pl_chan = 0;
    g_pl_canon = 4; /* issue 43 item 2: Canon layers on q, k, v */
    pl_compare(33, 2, 5, 1, 1, 81);
    g_pl_chan = 1;
    pl_compare(PT, 4, 0, 0, 1, 82);
    g_pl_chan = 0;
    g_pl_canon = 0;
    printf("  polar worst |dev - cpu| / max|cpu|: forward %.3g, backward %.3g; stats |dev - cpu| "
           "%.3g\n", g_pl_worst_f, g_pl_worst_b, g_pl_worst_s);
}

/* mixed sides: LYR_EINVAL, nothing written */
static void test_polar_refusals(void)
{
    pl_case c;
    layer_run g;
    fvec out0, saved0;
    NEED_GPU();
    pl_case_init(c, PT, 2, 0, 1, 76);
    run_init(g, c, 1);
    out0 = get(g, g.out, (size_t)c.N * QC);
    saved0 = get(g, g.saved, c.nsaved);
    /* xn on the host */
    CHECK_INT_EQ(lyr_polar_forward(&c.d, (const float *const *)g.P, c.x.data(), g.out, g.saved,
                                   g.work, PB, PT, 0, 9, NULL), LYR_EINVAL);
    /* one parameter on the host */
    {
        float *keep = g.P[LYR_POLAR_NULL_BASE];
        g.P[LYR_POLAR_NULL_BASE] = const_cast<float *>(c.P[LYR_POLAR_NULL_BASE].data());
        CHECK_INT_EQ(pl_fwd(g, c, 0, NULL), LYR_EINVAL);
        g.P[LYR_POLAR_NULL_BASE] = keep;
    }
    CHECK(get(g, g.out, (size_t)c.N * QC) == out0);
    {
        fvec sv = get(g, g.saved, c.nsaved);
        CHECK(memcmp(sv.data(), saved0.data(), sv.size() * sizeof(float)) == 0);
    }
    CHECK_INT_EQ(pl_fwd(g, c, 0, NULL), LYR_OK);
    /* backward: dout on the host, dxn on the host, one gradient on the host */
    bwd_refusals(g, c, [&](float *const *G, const float *dout, float *dx) {
        return lyr_polar_backward(&c.d, (const float *const *)g.P, G, dout, dx, g.saved, g.work, PB, PT);
    }, LYR_POLAR_V_NULL, LYR_POLAR_O);
    run_free(g);
}

/* ------------------------------------------------------------ MLP and norms (contexts) */
/* lyr_kind_mlp (every MLP row of layers.h's FFN table: GELU, squared-ReLU gated, ...) and
   lyr_kind_norm (LayerNorm, RMSNorm) called
   through the table with ex_ctx CPU and ex_ctx CUDA on the same case (C 24, F 40, B 2,
   T 7): forward out within 1e-5 of the CPU's largest |out|; backward every parameter
   gradient and dx within 1e-5 of the CPU tensor's largest |value|, accumulated into
   non-zero starting values. */
struct kind_case : layer_case {
    const lyr_kind *k;
    lyr_mlp_dims mlp;
    lyr_norm_dims norm;
    const void *d;
};

static void kind_case_init(kind_case &c, const lyr_kind *k, int variant, unsigned long long seed)
{
    tk_rng rng;
    int np;
    c.k = k;
    c.T = PT;
    c.N = PN;
    c.C = PC;
    memset(&c.mlp, 0, sizeof c.mlp);
    memset(&c.norm, 0, sizeof c.norm);
    if (k == &lyr_kind_mlp) {
        c.mlp.C = PC;
        c.mlp.F = PF;
        c.mlp.act = variant; /* the FFN table's row */
        c.mlp.std = 0.2f;
        c.mlp.proj_std = 0.1f;
        c.d = &c.mlp;
    } else {
        c.norm.C = PC;
        c.norm.rms = variant;
        c.norm.eps = 1e-5f;
        c.d = &c.norm;
    }
    np = k->params(c.d, c.spec, LYR_MAX_PARAMS);
    CHECK(np > 0);
    tk_rng_seed(&rng, seed, 3);
    tt_seed(seed);
    {
        float *Pp[LYR_MAX_PARAMS];
        case_params(c, np, Pp);
        CHECK_INT_EQ(k->init(c.d, Pp, &rng, 0.2f), LYR_OK);
    }
    case_random(c, -1, 0.2, 0.2);
    c.nsaved = k->saved_floats(c.d, PB, PT);
    c.nwork = k->work_floats(c.d, PB, PT) + 16; /* (the norms need none: a non-empty buffer) */
    CHECK(c.nsaved > 0);
}

/* the case's forward (bwd 0) or backward (1) on r's side, through the table */
static int kind_run(layer_run &r, const kind_case &c, int bwd)
{
    ex_ctx cx = ex_ctx_make(r.dev ? EX_CUDA : EX_CPU);
    lyr_io io;
    memset(&io, 0, sizeof io);
    io.P = (const float *const *)r.P;
    io.G = r.G;
    io.x = r.x;
    io.out = r.out;
    io.dout = r.dout;
    io.dx = r.dx;
    io.saved = r.saved;
    io.work = r.work;
    io.B = PB;
    io.T = c.T;
    return bwd ? c.k->backward(&cx, c.d, &io) : c.k->forward(&cx, c.d, &io);
}

static void test_kinds_context(void)
{
    /* the cases: the FFN table's MLP rows, then the two norms */
    const lyr_kind *kinds[LYR_MAX_PARAMS + 2];
    int variant[LYR_MAX_PARAMS + 2], n = 0;
    std::string names[LYR_MAX_PARAMS + 2];
    double wf = 0.0, wb = 0.0;
    NEED_GPU();
    for (int r = 0; r < lyr_ffn_count() && n < LYR_MAX_PARAMS; r++)
        if (lyr_ffn_is_mlp(r)) {
            kinds[n] = &lyr_kind_mlp;
            variant[n] = r;
            names[n++] = std::string("mlp ") + lyr_ffn_get(r)->name;
        }
    CHECK(n >= 2);
    kinds[n] = &lyr_kind_norm, variant[n] = 0, names[n++] = "layernorm";
    kinds[n] = &lyr_kind_norm, variant[n] = 1, names[n++] = "rmsnorm";
    for (int i = 0; i < n; i++) {
        kind_case c;
        layer_run h, g;
        std::string ctx(names[i]);
        kind_case_init(c, kinds[i], variant[i], 80 + i);
        run_init(h, c, 0);
        run_init(g, c, 1);
        CHECK_INT_EQ(kind_run(h, c, 0), LYR_OK);
        CHECK_INT_EQ(kind_run(g, c, 0), LYR_OK);
        CHECK(maxabs(h.hout) > 1e-3);
        close_out(g, h, c, TOL, &wf, ctx);
        CHECK_INT_EQ(kind_run(h, c, 1), LYR_OK);
        CHECK_INT_EQ(kind_run(g, c, 1), LYR_OK);
        close_grads(g, h, c, TOL, &wb, "dx", ctx);
        run_free(g);
    }
    printf("  mlp / norms through the context, worst |dev - cpu| / max|cpu|: forward %.3g, backward %.3g\n",
           wf, wb);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    g_gpu = tk_cuda_available();
    if (!g_gpu) printf("SKIP: no GPU\n");
    else parity_print_device();
    TEST_RUN(test_moe_forward_backward);
    TEST_RUN(test_moe_idle_experts);
    TEST_RUN(test_moe_refusals);
    TEST_RUN(test_moe_cpu_host_arg);
    TEST_RUN(test_gdelta_forward_backward);
    TEST_RUN(test_gdelta_refusals);
    TEST_RUN(test_polar_forward_backward);
    TEST_RUN(test_polar_refusals);
    TEST_RUN(test_kinds_context);
    CHECK_INT_EQ(tk_cuda_release(), TK_OK); /* the cuBLAS handle: nothing left for --leak-check */
    return TEST_END();
}
