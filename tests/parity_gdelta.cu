/* parity_gdelta.cu - gdelta.h's CUDA path (cuda/gdelta.cuh) against its CPU paths.
   Built by g++/clang++ against the CPU simulation (tests/cuda_sim.h; `make test`) and by
   nvcc for the GPU (`make cuda`, `make gpu-check`); under nvcc without a GPU the device
   cases print SKIP.

   Tolerances (issue 14, fp32): outputs and final state 1e-5 relative, every gradient
   1e-4 relative, element-wise, each with an absolute floor of the same factor times the
   reference tensor's RMS (an element near zero cannot be held to a relative bound).
   References: the CPU chunked path with the same chunk size, and the CPU recurrent path
   (the oracle); the recurrent comparison uses the same tolerances.
   Tensor-core math (cfg.math bf16 / tf32): outputs, final state and every gradient within
   2e-2 RMS-relative (|got - ref|_2 / |ref|_2, issue 14) of the CPU chunked path; the
   output at least 1e-4 (bf16) / 1e-5 (tf32) away from it (the fp32 device path is below
   1e-6: the operands really were rounded), tf32 closer than bf16.

   Sizes and where they run (simulation time matters: every thread is a fiber):
     forward/backward  T in {1, 63, 64, 65, 200, 1000}, Dk/Dv in {16, 64, 128} (Dk != Dv
                       too), chunk 64 (and 32, 128 at T = 200), gamma = 1, log gates, h0
                       present/absent, B*H in {2, 4}; D = 128 only at T = 65 and 130,
                       T = 1000 only at D = 16.
     tensor cores      T in {1, 63, 64, 65, 200, 40, 130}, Dk/Dv 16/64/128 (Dk != Dv
                       too), chunk 32, 64, 128, gamma = 1, log gates, h0 present/absent,
                       B*H 2; bf16 and tf32 share every line but the operand type, so
                       most shapes run one of them (T 1 and 65 both).
     (A caller workspace is NaN-filled before every forward and backward call, so a read
     of one before its write, e.g. a missing barrier, shows up.)
     step              300 steps, 3 sequences x 2 heads, Dk 16, Dv 16, 7 slots (4 never
                       touched), rows shuffled every step; 4 steps at Dk/Dv 128/64 and
                       40/72 (log gates, scale 0.7) against the CPU gd_step; math
                       bf16/tf32 bit-identical to fp32 (the step ignores math). */
#include "tests/cuda_test.h"
#define GDELTA_IMPLEMENTATION
#include "gdelta.h"
#include "tests/attnkit_test.h"
#include "tests/ref64.h"

static int g_gpu = 0;

#define NEED_GPU()                                                             \
    do {                                                                       \
        if (!g_gpu) TEST_SKIP("no GPU");                                       \
    } while (0)

static std::vector<float> randu(size_t n, double lo, double hi)
{
    std::vector<float> v(n);
    size_t i;
    for (i = 0; i < n; i++) v[i] = (float)(lo + (hi - lo) * tt_uniform());
    return v;
}

static double rms(const std::vector<float> &x)
{
    double s = 0.0;
    size_t i;
    for (i = 0; i < x.size(); i++) s += (double)x[i] * x[i];
    return x.empty() ? 0.0 : sqrt(s / (double)x.size());
}

/* element-wise |got - ref| <= rtol (|ref| + rms(ref)); returns the worst ratio to the
   tolerance (printed by the callers for the record) */
static double worst(const std::vector<float> &got, const std::vector<float> &ref, double rtol)
{
    double r = rms(ref), w = 0.0;
    size_t i;
    for (i = 0; i < ref.size(); i++) {
        double d = fabs((double)got[i] - ref[i]) / (rtol * (fabs((double)ref[i]) + r) + 1e-300);
        if (!(d <= w)) w = d; /* NaN propagates */
    }
    return w;
}
#define CHECK_REL(got, ref, rtol)                                                          \
    do {                                                                                   \
        double r_ = rms(ref);                                                              \
        CHECK_INT_EQ((long)(got).size(), (long)(ref).size());                              \
        CHECK_ALL_CLOSE((got).data(), (ref).data(), (long)(ref).size(), (rtol), (rtol) * r_); \
    } while (0)

typedef struct shape {
    int B, H, T, Dk, Dv, C, log_gates, gamma_one, h0;
} shape;

/* the inputs of one case */
typedef struct inputs {
    std::vector<float> q, k, v, g, be, s0, dr, dso;
} inputs;

static inputs make_inputs(const shape &s)
{
    inputs in;
    size_t bh = (size_t)s.B * s.H, i;
    in.q = randn(bh * s.T * s.Dk, 1.0);
    in.k = randn(bh * s.T * s.Dk, 1.0);
    in.v = randn(bh * s.T * s.Dv, 1.0);
    in.g = randu(bh * s.T, 0.85, 1.0);
    if (s.gamma_one)
        for (i = 0; i < in.g.size(); i++) in.g[i] = 1.0f;
    if (s.log_gates)
        for (i = 0; i < in.g.size(); i++) in.g[i] = logf(in.g[i]);
    in.be = randu(bh * s.T, 0.05, 0.95);
    if (s.h0) in.s0 = randn(bh * s.Dk * s.Dv, 0.3);
    in.dr = randn(bh * s.T * s.Dv, 1.0);
    in.dso = randn(bh * s.Dk * s.Dv, 0.5);
    return in;
}

typedef struct outputs {
    std::vector<float> r, so, dq, dk, dv, dg, dbe, ds0;
} outputs;

static int run_cpu(const gd_config &cfg, const shape &s, const inputs &in, outputs *o)
{
    size_t bh = (size_t)s.B * s.H;
    gd_saved sv = gd_saved_init();
    int rc;
    o->r.assign(bh * s.T * s.Dv, 0.0f);
    o->so.assign(bh * s.Dk * s.Dv, 0.0f);
    o->dq.assign(bh * s.T * s.Dk, 0.0f);
    o->dk.assign(bh * s.T * s.Dk, 0.0f);
    o->dv.assign(bh * s.T * s.Dv, 0.0f);
    o->dg.assign(bh * s.T, 0.0f);
    o->dbe.assign(bh * s.T, 0.0f);
    o->ds0.assign(bh * s.Dk * s.Dv, 0.0f);
    rc = gd_forward(&cfg, o->r.data(), o->so.data(), in.q.data(), in.k.data(), in.v.data(),
                    in.g.data(), in.be.data(), s.h0 ? in.s0.data() : NULL, s.B, s.H, s.T, s.Dk,
                    s.Dv, &sv, NULL);
    if (rc == GD_OK)
        rc = gd_backward(&cfg, &sv, o->dq.data(), o->dk.data(), o->dv.data(), o->dg.data(),
                         o->dbe.data(), o->ds0.data(), in.dr.data(), in.dso.data(), in.q.data(),
                         in.k.data(), in.v.data(), in.g.data(), in.be.data(),
                         s.h0 ? in.s0.data() : NULL, s.B, s.H, s.T, s.Dk, s.Dv, NULL);
    gd_saved_free(&sv);
    return rc;
}

/* the device run; gradients start from `seed` (the backward accumulates) */
static int run_gpu(const gd_config &cfg, const shape &s, const inputs &in, outputs *o,
                   int with_ws)
{
    size_t bh = (size_t)s.B * s.H;
    gd_saved sv = gd_saved_init();
    int rc;
    void *ws = NULL;
    float *q = dput(in.q), *k = dput(in.k), *v = dput(in.v), *g = dput(in.g), *be = dput(in.be);
    float *s0 = s.h0 ? dput(in.s0) : NULL, *dr = dput(in.dr), *dso = dput(in.dso);
    std::vector<float> zt(bh * s.T * s.Dv, 0.0f), zk(bh * s.T * s.Dk, 0.0f), z1(bh * s.T, 0.0f),
        zs(bh * s.Dk * s.Dv, 0.0f);
    float *r = dput(zt), *so = dput(zs), *dq = dput(zk), *dk = dput(zk), *dv = dput(zt);
    float *dg = dput(z1), *dbe = dput(z1), *ds0 = dput(zs);
    size_t nws = 0;
    if (with_ws) { /* filled with NaN before each call: nothing may read it before writing */
        nws = gd_workspace_size_cuda(&cfg, s.B, s.H, s.T, s.Dk, s.Dv);
        if (nws == 0 || cudaMalloc(&ws, nws) != cudaSuccess) return -100;
        cudaMemset(ws, 0xFF, nws);
    }
    rc = gd_forward_cuda(&cfg, r, so, q, k, v, g, be, s0, s.B, s.H, s.T, s.Dk, s.Dv, &sv, ws, NULL);
    if (ws) cudaMemset(ws, 0xFF, nws);
    if (rc == GD_OK)
        rc = gd_backward_cuda(&cfg, &sv, dq, dk, dv, dg, dbe, ds0, dr, dso, q, k, v, g, be, s0,
                              s.B, s.H, s.T, s.Dk, s.Dv, ws, NULL);
    o->r = dget(r, zt.size());
    o->so = dget(so, zs.size());
    o->dq = dget(dq, zk.size());
    o->dk = dget(dk, zk.size());
    o->dv = dget(dv, zt.size());
    o->dg = dget(dg, z1.size());
    o->dbe = dget(dbe, z1.size());
    o->ds0 = dget(ds0, zs.size());
    gd_saved_free(&sv);
    dfree(q); dfree(k); dfree(v); dfree(g); dfree(be); dfree(s0); dfree(dr); dfree(dso);
    dfree(r); dfree(so); dfree(dq); dfree(dk); dfree(dv); dfree(dg); dfree(dbe); dfree(ds0);
    if (ws) dfree(ws);
    return rc;
}

static void compare(const char *what, const shape &s, const outputs &got, const outputs &ref)
{
    fprintf(stderr,
            "    %-9s B%d H%d T%-4d Dk%-3d Dv%-3d C%-2d%s%s%s worst/tol: r %.2f S %.2f dq %.2f "
            "dk %.2f dv %.2f dg %.2f dbeta %.2f dh0 %.2f\n",
            what, s.B, s.H, s.T, s.Dk, s.Dv, s.C, s.log_gates ? " log" : "",
            s.gamma_one ? " g=1" : "", s.h0 ? " h0" : "", worst(got.r, ref.r, 1e-5),
            worst(got.so, ref.so, 1e-5), worst(got.dq, ref.dq, 1e-4), worst(got.dk, ref.dk, 1e-4),
            worst(got.dv, ref.dv, 1e-4), worst(got.dg, ref.dg, 1e-4),
            worst(got.dbe, ref.dbe, 1e-4), worst(got.ds0, ref.ds0, 1e-4));
    CHECK_REL(got.r, ref.r, 1e-5);
    CHECK_REL(got.so, ref.so, 1e-5);
    CHECK_REL(got.dq, ref.dq, 1e-4);
    CHECK_REL(got.dk, ref.dk, 1e-4);
    CHECK_REL(got.dv, ref.dv, 1e-4);
    CHECK_REL(got.dg, ref.dg, 1e-4);
    CHECK_REL(got.dbe, ref.dbe, 1e-4);
    if (s.h0) CHECK_REL(got.ds0, ref.ds0, 1e-4);
    else CHECK_REL(got.ds0, ref.ds0, 1e-4); /* still defined: dL/dh0 at h0 = 0 */
}

static void run_shapes(const shape *sh, int n, int vs_recurrent)
{
    int i;
    for (i = 0; i < n; i++) {
        const shape &s = sh[i];
        gd_config cfg = gd_config_default();
        inputs in;
        outputs ref, rec, got;
        tt_seed(100 + i);
        in = make_inputs(s);
        cfg.chunk_size = s.C;
        cfg.gate_is_log = s.log_gates;
        CHECK_INT_EQ(run_cpu(cfg, s, in, &ref), GD_OK);
        CHECK_INT_EQ(run_gpu(cfg, s, in, &got, i & 1), GD_OK);
        compare("chunked", s, got, ref);
        if (vs_recurrent) {
            gd_config rc = cfg;
            rc.algo = GD_ALGO_RECURRENT;
            CHECK_INT_EQ(run_cpu(rc, s, in, &rec), GD_OK);
            compare("recurrent", s, got, rec);
        }
    }
}

static void test_small_shapes(void)
{
    static const shape sh[] = {
        {1, 2, 1, 16, 16, 64, 0, 0, 1},   {2, 1, 63, 16, 64, 64, 0, 0, 1},
        {1, 2, 64, 64, 16, 64, 0, 1, 0},  {2, 1, 65, 16, 16, 64, 1, 0, 1},
        {2, 2, 200, 16, 16, 32, 0, 0, 0}, {1, 2, 200, 16, 16, 64, 1, 1, 1},
        {1, 2, 200, 16, 16, 128, 0, 0, 1}, /* chunk > 76: (I+A)^-1 solved in global memory */
    };
    NEED_GPU();
    run_shapes(sh, (int)(sizeof sh / sizeof sh[0]), 1);
}

static void test_wide_heads(void)
{
    static const shape sh[] = {
        {1, 2, 65, 128, 128, 64, 0, 0, 1},
        {1, 2, 130, 64, 128, 64, 1, 0, 0},
        {2, 1, 70, 128, 64, 64, 0, 1, 1},
    };
    NEED_GPU();
    run_shapes(sh, (int)(sizeof sh / sizeof sh[0]), 0);
}

static void test_long(void)
{
    static const shape sh[] = {{1, 2, 1000, 16, 16, 64, 0, 0, 1}};
    NEED_GPU();
    run_shapes(sh, 1, 1);
}

/* the other config branches: no q/k normalisation with scale != 1 and a chunk that does
   not divide T; gates at exactly 0 and 1, beta at exactly 0 and 1; log gates at -inf and
   below the floor (no gradient there) */
static void test_config_variants(void)
{
    int which;
    NEED_GPU();
    for (which = 0; which < 3; which++) {
        shape s = {1, 2, 50, 16, 24, 17, which == 2, 0, which != 1};
        gd_config cfg = gd_config_default();
        inputs in;
        outputs ref, got;
        size_t i;
        tt_seed(300 + which);
        in = make_inputs(s);
        cfg.chunk_size = s.C;
        cfg.gate_is_log = s.log_gates;
        if (which == 0) {
            cfg.normalize_qk = 0;
            cfg.scale = 0.5f;
            for (i = 0; i < in.q.size(); i++) {
                in.q[i] *= 0.2f;
                in.k[i] *= 0.2f;
            }
        } else if (which == 1) {
            for (i = 0; i < in.g.size(); i += 7) in.g[i] = 0.0f;
            for (i = 3; i < in.g.size(); i += 5) in.g[i] = 1.0f;
            for (i = 0; i < in.be.size(); i += 6) in.be[i] = 0.0f;
            for (i = 2; i < in.be.size(); i += 9) in.be[i] = 1.0f;
        } else {
            for (i = 0; i < in.g.size(); i += 11) in.g[i] = -INFINITY;
            for (i = 4; i < in.g.size(); i += 13) in.g[i] = -100.0f;
        }
        CHECK_INT_EQ(run_cpu(cfg, s, in, &ref), GD_OK);
        CHECK_INT_EQ(run_gpu(cfg, s, in, &got, which & 1), GD_OK);
        compare("chunked", s, got, ref);
        if (which == 2)
            for (i = 0; i < in.g.size(); i++)
                if (in.g[i] <= cfg.log_gate_floor) CHECK(got.dg[i] == 0.0f);
    }
}

/* bit-identical run to run; a second forward into a used saved state works */
static void test_deterministic(void)
{
    shape s = {2, 1, 100, 16, 32, 32, 0, 0, 1};
    gd_config cfg = gd_config_default();
    inputs in;
    outputs a, b;
    NEED_GPU();
    tt_seed(7);
    in = make_inputs(s);
    cfg.chunk_size = s.C;
    CHECK_INT_EQ(run_gpu(cfg, s, in, &a, 0), GD_OK);
    CHECK_INT_EQ(run_gpu(cfg, s, in, &b, 1), GD_OK);
    CHECK(a.r == b.r);
    CHECK(a.so == b.so);
    CHECK(a.dq == b.dq);
    CHECK(a.dk == b.dk);
    CHECK(a.dv == b.dv);
    CHECK(a.dg == b.dg);
    CHECK(a.dbe == b.dbe);
    CHECK(a.ds0 == b.ds0);
}

/* cfg.status (deferred input checks): good inputs give the same bits as the plain check
   (forward and backward) and leave the word 0, with no host wait in either call; each bad
   input (NaN q, gate 1.5, beta -0.1, Inf v) sets its bit without a wait; a host status is
   GD_EINVAL */
static void test_status_deferred(void)
{
    shape s = {2, 1, 40, 16, 16, 16, 0, 0, 1};
    gd_config cfg = gd_config_default(), dcfg;
    inputs in;
    outputs a, b;
    int *dst = NULL, h = -1, host_st = 0;
    NEED_GPU();
    tt_seed(11);
    in = make_inputs(s);
    cfg.chunk_size = s.C;
    CHECK_INT_EQ(cudaMalloc((void **)&dst, sizeof(int)), cudaSuccess);
    CHECK_INT_EQ(cudaMemset(dst, 0, sizeof(int)), cudaSuccess);
    dcfg = cfg;
    dcfg.status = dst;
    CHECK_INT_EQ(run_gpu(cfg, s, in, &a, 0), GD_OK);
    CHECK_INT_EQ(run_gpu(dcfg, s, in, &b, 0), GD_OK);
    CHECK(a.r == b.r && a.so == b.so && a.dq == b.dq && a.dk == b.dk && a.dv == b.dv && a.dg == b.dg &&
          a.dbe == b.dbe && a.ds0 == b.ds0);
    CHECK_INT_EQ(cudaMemcpy(&h, dst, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
    CHECK_INT_EQ(h, 0);
    {
        const int B = 1, H = 2, T = 5, Dk = 8, Dv = 8;
        const size_t nqk = (size_t)B * H * T * Dk, nv = (size_t)B * H * T * Dv, ng = (size_t)B * H * T;
        std::vector<float> hq = randn(nqk, 1.0), hk = randn(nqk, 1.0), hv = randn(nv, 1.0);
        std::vector<float> hg = randu(ng, 0.5, 1.0), hb = randu(ng, 0.1, 0.9), zero(nv, 0.0f);
        float *q = dput(hq), *k = dput(hk), *v = dput(hv), *g = dput(hg), *bb = dput(hb), *r = dput(zero);
        float *dq = dput(hq), *dk = dput(hk), *dv = dput(hv), *dg = dput(hg), *db = dput(hb);
        gd_saved sv = gd_saved_init();
        int bit;
        /* the backward's own scan, deferred too: no wait in either call */
#ifdef ATTNKIT_CUDA_SIM
        ak_sim_counts_reset();
#endif
        CHECK_INT_EQ(gd_forward_cuda(&dcfg, r, NULL, q, k, v, g, bb, NULL, B, H, T, Dk, Dv, &sv, NULL, NULL), GD_OK);
        CHECK_INT_EQ(gd_backward_cuda(&dcfg, &sv, dq, dk, dv, dg, db, NULL, v, NULL, q, k, v, g, bb, NULL,
                                      B, H, T, Dk, Dv, NULL, NULL), GD_OK);
#ifdef ATTNKIT_CUDA_SIM
        {
            ak_sim_counts c = ak_sim_counts_get();
            CHECK(c.syncs == 0 && c.sync_calls == 0 && c.d2h == 0);
        }
#endif
        for (bit = 0; bit < 4; bit++) {
            std::vector<float> bad = bit == 0 ? hq : bit == 1 ? hg : bit == 2 ? hb : hv;
            float *d;
            if (bit == 0) bad[3] = NAN;
            if (bit == 1) bad[ng - 1] = 1.5f;
            if (bit == 2) bad[0] = -0.1f;
            if (bit == 3) bad[nv / 2] = INFINITY;
            d = dput(bad);
            CHECK_INT_EQ(cudaMemset(dst, 0, sizeof(int)), cudaSuccess);
#ifdef ATTNKIT_CUDA_SIM
            ak_sim_counts_reset();
#endif
            CHECK_INT_EQ(gd_forward_cuda(&dcfg, r, NULL, bit == 0 ? d : q, k, bit == 3 ? d : v, bit == 1 ? d : g,
                                         bit == 2 ? d : bb, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_OK);
#ifdef ATTNKIT_CUDA_SIM
            {
                ak_sim_counts c = ak_sim_counts_get();
                CHECK(c.syncs == 0 && c.sync_calls == 0 && c.d2h == 0);
            }
#endif
            CHECK_INT_EQ(cudaMemcpy(&h, dst, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
            CHECK_INT_EQ(h, bit == 0 ? 1 : bit == 1 ? 4 : bit == 2 ? 8 : 2);
            dfree(d);
        }
        dcfg.status = &host_st;
        CHECK_INT_EQ(gd_forward_cuda(&dcfg, r, NULL, q, k, v, g, bb, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
        CHECK_INT_EQ(gd_backward_cuda(&dcfg, &sv, dq, dk, dv, dg, db, NULL, v, NULL, q, k, v, g, bb, NULL,
                                      B, H, T, Dk, Dv, NULL, NULL), GD_EINVAL);
        CHECK_INT_EQ(host_st, 0);
        gd_saved_free(&sv);
        dfree(q); dfree(k); dfree(v); dfree(g); dfree(bb); dfree(r); dfree(dq); dfree(dk); dfree(dv); dfree(dg);
        dfree(db);
    }
    cudaFree(dst);
}

/* the plain entry points route device pointers to the CUDA path (DESIGN.md) */
static void test_plain_entry_routes(void)
{
    const shape s = {1, 2, 40, 16, 16, 16, 0, 0, 1};
    gd_config cfg = gd_config_default();
    const size_t bh = 2, ntk = bh * s.T * s.Dk, ntv = bh * s.T * s.Dv, D2 = (size_t)s.Dk * s.Dv;
    inputs in;
    outputs ref;
    gd_saved sv = gd_saved_init();
    NEED_GPU();
    tt_seed(55);
    in = make_inputs(s);
    cfg.chunk_size = s.C;
    CHECK_INT_EQ(run_cpu(cfg, s, in, &ref), GD_OK);
    {
        std::vector<float> zt(ntv, 0.0f), zk(ntk, 0.0f), z1(bh * s.T, 0.0f), zs(bh * D2, 0.0f);
        float *q = dput(in.q), *k = dput(in.k), *v = dput(in.v), *g = dput(in.g), *be = dput(in.be);
        float *s0 = dput(in.s0), *dr = dput(in.dr), *dso = dput(in.dso), *r = dput(zt), *so = dput(zs);
        float *dq = dput(zk), *dk = dput(zk), *dv = dput(zt), *dg = dput(z1), *dbe = dput(z1), *ds0 = dput(zs);
        std::vector<float> hws(64, 0.0f); /* a host workspace is ignored on the device route */
        CHECK_INT_EQ(gd_forward(&cfg, r, so, q, k, v, g, be, s0, s.B, s.H, s.T, s.Dk, s.Dv, &sv, hws.data()), GD_OK);
        CHECK(sv.algo & GD__SAVED_CUDA);
        CHECK_INT_EQ(gd_backward(&cfg, &sv, dq, dk, dv, dg, dbe, ds0, dr, dso, q, k, v, g, be, s0, s.B, s.H, s.T,
                                 s.Dk, s.Dv, NULL), GD_OK);
        std::vector<float> x = dget(r, ntv);
        CHECK_REL(x, ref.r, 1e-5);
        x = dget(so, bh * D2);
        CHECK_REL(x, ref.so, 1e-5);
        x = dget(dk, ntk);
        CHECK_REL(x, ref.dk, 1e-4);
        x = dget(dg, bh * s.T);
        CHECK_REL(x, ref.dg, 1e-4);
        x = dget(ds0, bh * D2);
        CHECK_REL(x, ref.ds0, 1e-4);
        /* step: one token on a device table through gd_step */
        {
            std::vector<float> tab = randn(3 * bh * D2, 0.3), tab_cpu = tab, r1((size_t)s.H * s.Dv), rc1 = r1;
            std::vector<int> sl(1, 2);
            float *dt = dput(tab), *dr1 = dput(r1);
            int *dsl = dput(sl);
            CHECK_INT_EQ(gd_step(&cfg, dt, 3, dsl, 1, s.H, s.Dk, s.Dv, q, k, v, g, be, dr1), GD_OK);
            CHECK_INT_EQ(gd_step(&cfg, tab_cpu.data(), 3, sl.data(), 1, s.H, s.Dk, s.Dv, in.q.data(), in.k.data(),
                                 in.v.data(), in.g.data(), in.be.data(), rc1.data()), GD_OK);
            x = dget(dr1, r1.size());
            CHECK_REL(x, rc1, 1e-5);
            x = dget(dt, tab.size());
            CHECK_REL(x, tab_cpu, 1e-5);
            dfree(dt); dfree(dr1); dfree(dsl);
        }
        dfree(q); dfree(k); dfree(v); dfree(g); dfree(be); dfree(s0); dfree(dr); dfree(dso); dfree(r);
        dfree(so); dfree(dq); dfree(dk); dfree(dv); dfree(dg); dfree(dbe); dfree(ds0);
    }
    gd_saved_free(&sv);
}

static void test_bad_input(void)
{
    const int B = 1, H = 2, T = 5, Dk = 8, Dv = 8;
    const size_t nqk = (size_t)B * H * T * Dk, nv = (size_t)B * H * T * Dv, ng = (size_t)B * H * T;
    gd_config cfg = gd_config_default();
    gd_saved sv = gd_saved_init(), cpu_sv = gd_saved_init();
    std::vector<float> hq = randn(nqk, 1.0), hk = randn(nqk, 1.0), hv = randn(nv, 1.0);
    std::vector<float> hg = randu(ng, 0.5, 1.0), hb = randu(ng, 0.1, 0.9), sentinel(nv, 7.0f);
    std::vector<float> hr(nv, 0.0f);
    float *q, *k, *v, *g, *b, *r, *dq, *dk, *dv, *dg, *db;
    NEED_GPU();
    q = dput(hq); k = dput(hk); v = dput(hv); g = dput(hg); b = dput(hb); r = dput(sentinel);
    dq = dput(hq); dk = dput(hk); dv = dput(hv); dg = dput(hg); db = dput(hb);
    /* NULL, host pointers, shapes, config */
    CHECK_INT_EQ(gd_forward_cuda(&cfg, NULL, NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(NULL, r, NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, hq.data(), k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, hr.data(), NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, hr.data(), q, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, v, g, b, NULL, B, H, 0, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, v, g, b, NULL, B, -1, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, v, g, b, NULL, B, H, T, 20000, Dv, NULL, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, v, g, b, NULL, 1, 1, 1, 8, 300000000, NULL, NULL, NULL), GD_EINVAL);
    CHECK(gd_workspace_size_cuda(&cfg, B, H, T, 20000, Dv) == 0);
    CHECK(gd_workspace_size_cuda(&cfg, B, H, T, Dk, Dv) > 0);
    {
        gd_config c2 = cfg;
        c2.chunk_size = 0;
        CHECK_INT_EQ(gd_forward_cuda(&c2, r, NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
        c2 = cfg; /* Dk = 8: not a tensor-core shape (test_tc_bad_input has the rest) */
        c2.math = GD_MATH_BF16;
        CHECK_INT_EQ(gd_forward_cuda(&c2, r, NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_ENOTSUP);
        c2.math = GD_MATH_TF32;
        CHECK_INT_EQ(gd_forward_cuda(&c2, r, NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_ENOTSUP);
        c2.math = 7;
        CHECK_INT_EQ(gd_forward_cuda(&c2, r, NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_EINVAL);
        CHECK(strcmp(gd_strerror(GD_ENOTSUP), "not implemented in this build") == 0);
    }
    /* out-of-contract values: GD_ERANGE and r untouched */
    {
        std::vector<float> bad = hq;
        float *d;
        bad[3] = NAN;
        d = dput(bad);
        CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, d, k, v, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_ERANGE);
        dfree(d);
        bad = hg;
        bad[ng - 1] = 1.5f;
        d = dput(bad);
        CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, v, d, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_ERANGE);
        dfree(d);
        bad = hb;
        bad[0] = -0.1f;
        d = dput(bad);
        CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, v, g, d, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_ERANGE);
        dfree(d);
        bad = hv;
        bad[nv / 2] = INFINITY;
        d = dput(bad);
        CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, d, g, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_ERANGE);
        dfree(d);
        std::vector<float> got = dget(r, nv);
        CHECK(got == sentinel);
    }
    /* log gates: -inf is fine, +0.1 is not */
    {
        gd_config c2 = cfg;
        std::vector<float> lg(ng, -0.1f);
        float *d;
        c2.gate_is_log = 1;
        lg[1] = -INFINITY;
        d = dput(lg);
        CHECK_INT_EQ(gd_forward_cuda(&c2, r, NULL, q, k, v, d, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_OK);
        dfree(d);
        lg[1] = 0.1f;
        d = dput(lg);
        CHECK_INT_EQ(gd_forward_cuda(&c2, r, NULL, q, k, v, d, b, NULL, B, H, T, Dk, Dv, NULL, NULL, NULL), GD_ERANGE);
        dfree(d);
    }
    /* backward: saved state from the CPU, or from other shapes, is refused */
    CHECK_INT_EQ(gd_forward(&cfg, hr.data(), NULL, hq.data(), hk.data(), hv.data(), hg.data(), hb.data(), NULL,
                            B, H, T, Dk, Dv, &cpu_sv, NULL), GD_OK);
    CHECK_INT_EQ(gd_backward_cuda(&cfg, &cpu_sv, dq, dk, dv, dg, db, NULL, v, NULL, q, k, v, g, b, NULL,
                                  B, H, T, Dk, Dv, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, &sv, NULL, NULL), GD_OK);
    CHECK_INT_EQ(gd_backward_cuda(&cfg, &sv, dq, dk, dv, dg, db, NULL, v, NULL, q, k, v, g, b, NULL,
                                  B, H, T - 1, Dk, Dv, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_backward_cuda(&cfg, &sv, dq, dk, dv, dg, db, NULL, hv.data(), NULL, q, k, v, g, b, NULL,
                                  B, H, T, Dk, Dv, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_backward_cuda(&cfg, &sv, NULL, dk, dv, dg, db, NULL, v, NULL, q, k, v, g, b, NULL,
                                  B, H, T, Dk, Dv, NULL, NULL), GD_EINVAL);
    /* the plain backward with a device saved state and host buffers: routed to the CUDA
       path, which refuses host pointers; the CPU forward reuses the struct */
    CHECK_INT_EQ(gd_backward(&cfg, &sv, hq.data(), hk.data(), hv.data(), hg.data(), hb.data(), NULL, hv.data(),
                             NULL, hq.data(), hk.data(), hv.data(), hg.data(), hb.data(), NULL, B, H, T, Dk,
                             Dv, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_forward(&cfg, hr.data(), NULL, hq.data(), hk.data(), hv.data(), hg.data(), hb.data(), NULL,
                            B, H, T, Dk, Dv, &sv, NULL), GD_OK);
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, k, v, g, b, NULL, B, H, T, Dk, Dv, &cpu_sv, NULL, NULL), GD_OK);
    gd_saved_free(&sv);
    gd_saved_free(&cpu_sv);
    dfree(q); dfree(k); dfree(v); dfree(g); dfree(b); dfree(r);
    dfree(dq); dfree(dk); dfree(dv); dfree(dg); dfree(db);
}

/* ------------------------------------------------------- tensor cores (bf16, tf32) */
/* RMS-relative error |got - ref|_2 / |ref|_2 (issue 14: 2e-2 for the tensor-core math) */
static double rel_rms(const std::vector<float> &got, const std::vector<float> &ref)
{
    double n = 0.0, d = 0.0;
    size_t i;
    if (got.size() != ref.size()) return INFINITY;
    for (i = 0; i < ref.size(); i++) {
        double e = (double)got[i] - ref[i];
        n += e * e;
        d += (double)ref[i] * ref[i];
    }
    return d > 0.0 ? sqrt(n / d) : sqrt(n);
}

#define TC_TOL 2e-2
/* every output and gradient of a tensor-core run within TC_TOL (RMS-relative) of the CPU
   chunked path, and at least `floor` away from it in r (the operands really were rounded:
   the fp32 path is ~1e-7 away); returns the error in r */
static double tc_compare(const char *what, const shape &s, const outputs &got, const outputs &ref,
                         double floor)
{
    const std::vector<float> *g[8] = {&got.r, &got.so, &got.dq, &got.dk, &got.dv, &got.dg, &got.dbe, &got.ds0};
    const std::vector<float> *r[8] = {&ref.r, &ref.so, &ref.dq, &ref.dk, &ref.dv, &ref.dg, &ref.dbe, &ref.ds0};
    double e[8];
    int i;
    for (i = 0; i < 8; i++) {
        e[i] = rel_rms(*g[i], *r[i]);
        CHECK(e[i] <= TC_TOL); /* NaN fails */
    }
    CHECK(e[0] > floor);
    fprintf(stderr,
            "    %-4s B%d H%d T%-4d Dk%-3d Dv%-3d C%-3d%s%s%s rms-rel: r %.1e S %.1e dq %.1e dk %.1e "
            "dv %.1e dg %.1e dbeta %.1e dh0 %.1e (tol %.0e)\n",
            what, s.B, s.H, s.T, s.Dk, s.Dv, s.C, s.log_gates ? " log" : "", s.gamma_one ? " g=1" : "",
            s.h0 ? " h0" : "", e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7], TC_TOL);
    return e[0];
}

/* modes: 1 bf16, 2 tf32, 3 both (then tf32 must also be the closer one) */
static void run_tc_shapes(const shape *sh, const int *modes, int n)
{
    int i, m;
    for (i = 0; i < n; i++) {
        const shape &s = sh[i];
        gd_config cfg = gd_config_default();
        inputs in;
        outputs ref;
        double e[2] = {0.0, 0.0};
        tt_seed(500 + i);
        in = make_inputs(s);
        cfg.chunk_size = s.C;
        cfg.gate_is_log = s.log_gates;
        CHECK_INT_EQ(run_cpu(cfg, s, in, &ref), GD_OK);
        if (modes[i] == 3) { /* the floors separate the fp32 device path from the rounded ones */
            outputs g32;
            double e32;
            CHECK_INT_EQ(run_gpu(cfg, s, in, &g32, 1), GD_OK);
            e32 = rel_rms(g32.r, ref.r);
            fprintf(stderr, "    fp32 B%d H%d T%-4d Dk%-3d Dv%-3d rms-rel: r %.1e\n", s.B, s.H, s.T, s.Dk, s.Dv, e32);
            CHECK(e32 < 1e-6);
        }
        for (m = 0; m < 2; m++) {
            outputs got;
            if (!(modes[i] & (1 << m))) continue;
            cfg.math = m ? GD_MATH_TF32 : GD_MATH_BF16;
            CHECK_INT_EQ(run_gpu(cfg, s, in, &got, i != 1), GD_OK); /* i = 1: its own workspace */
            /* floors: a bf16 operand carries up to 2^-9 relative rounding, tf32 2^-12 */
            e[m] = tc_compare(m ? "tf32" : "bf16", s, got, ref, m ? 1e-5 : 1e-4);
        }
        if (modes[i] == 3) CHECK(e[1] < e[0]);
    }
}

/* T 1 (one zero-padded 16-row chunk), 63 / 65 / 40 (ragged tails), 64, 200 (7 chunks of
   32); Dk/Dv 16, 32, 64, 128 (Dk != Dv too); gamma = 1; log gates; h0 present and
   absent; B*H 2. bf16 and tf32 share every line but the operand type: each shape runs
   one of them (both where cheap) to stay within the simulation's time budget. */
static void test_tc_shapes(void)
{
    static const shape sh[] = {
        {1, 2, 1, 16, 16, 64, 0, 0, 1},   {2, 1, 63, 16, 64, 64, 0, 0, 1},
        {1, 2, 64, 64, 16, 64, 0, 1, 0},  {2, 1, 65, 16, 16, 64, 1, 0, 1},
        {1, 2, 200, 16, 32, 32, 0, 1, 1}, {1, 2, 40, 128, 128, 32, 0, 0, 1},
    };
    static const int modes[] = {3, 1, 2, 3, 2, 1};
    NEED_GPU();
    run_tc_shapes(sh, modes, (int)(sizeof sh / sizeof sh[0]));
}

/* chunk 128: A and (I + A)^-1 in the workspace instead of shared memory */
static void test_tc_chunk128(void)
{
    static const shape sh[] = {{1, 2, 130, 16, 16, 128, 1, 0, 1}};
    static const int modes[] = {1};
    NEED_GPU();
    run_tc_shapes(sh, modes, 1);
}

/* bit-identical run to run, like the fp32 path */
static void test_tc_deterministic(void)
{
    shape s = {2, 1, 40, 16, 32, 32, 0, 0, 1};
    gd_config cfg = gd_config_default();
    inputs in;
    outputs a, b;
    NEED_GPU();
    tt_seed(8);
    in = make_inputs(s);
    cfg.chunk_size = s.C;
    cfg.math = GD_MATH_BF16;
    CHECK_INT_EQ(run_gpu(cfg, s, in, &a, 0), GD_OK);
    CHECK_INT_EQ(run_gpu(cfg, s, in, &b, 1), GD_OK);
    CHECK(a.r == b.r && a.so == b.so && a.dq == b.dq && a.dk == b.dk && a.dv == b.dv);
    CHECK(a.dg == b.dg && a.dbe == b.dbe && a.ds0 == b.ds0);
}

/* the tensor-core modes refuse what they cannot do (GD_ENOTSUP with a message, nothing
   launched, r untouched): Dk or Dv not a multiple of 16, chunk_size not a multiple of 16;
   gd_workspace_size_cuda says 0 there; a saved state from another math/chunk is refused */
static int g_msgs = 0;
static void count_msg(const char *msg, void *user)
{
    (void)user;
    if (msg && strstr(msg, "multiples of 16")) g_msgs++;
}
static void test_tc_bad_input(void)
{
    const int B = 1, H = 2, T = 20;
    int m;
    NEED_GPU();
    for (m = 0; m < 2; m++) {
        static const int dims[3][3] = {{8, 16, 16}, {16, 24, 16}, {16, 16, 24}}; /* Dk Dv chunk */
        gd_config cfg = gd_config_default();
        int c;
        cfg.math = m ? GD_MATH_TF32 : GD_MATH_BF16;
        cfg.log = count_msg;
        g_msgs = 0;
        for (c = 0; c < 3; c++) {
            const int Dk = dims[c][0], Dv = dims[c][1];
            const size_t nqk = (size_t)B * H * T * Dk, nv = (size_t)B * H * T * Dv, ng = (size_t)B * H * T;
            std::vector<float> hq = randn(nqk, 1.0), hv = randn(nv, 1.0), hg(ng, 0.9f), hb(ng, 0.5f);
            std::vector<float> sentinel(nv, 7.0f);
            float *q = dput(hq), *v = dput(hv), *g = dput(hg), *b = dput(hb), *r = dput(sentinel);
            gd_saved sv = gd_saved_init();
            cfg.chunk_size = dims[c][2];
            CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, q, v, g, b, NULL, B, H, T, Dk, Dv, &sv, NULL, NULL),
                         GD_ENOTSUP);
            CHECK(gd_workspace_size_cuda(&cfg, B, H, T, Dk, Dv) == 0);
            CHECK(dget(r, nv) == sentinel);
            CHECK(sv.mem == NULL);
            gd_saved_free(&sv);
            dfree(q); dfree(v); dfree(g); dfree(b); dfree(r);
        }
        CHECK(g_msgs >= 3);
    }
    {   /* a saved state from a bf16 forward with chunk 16 does not fit a backward with chunk 32 */
        const int Dk = 16, Dv = 16;
        const size_t nqk = (size_t)B * H * T * Dk, ng = (size_t)B * H * T;
        gd_config cfg = gd_config_default();
        std::vector<float> hq = randn(nqk, 1.0), hg(ng, 0.9f), hb(ng, 0.5f), z(nqk, 0.0f), z1(ng, 0.0f);
        float *q = dput(hq), *g = dput(hg), *b = dput(hb), *r = dput(z), *dq = dput(z), *dk = dput(z),
              *dv = dput(z), *dg = dput(z1), *db = dput(z1);
        gd_saved sv = gd_saved_init();
        cfg.math = GD_MATH_BF16;
        cfg.chunk_size = 16;
        CHECK_INT_EQ(gd_forward_cuda(&cfg, r, NULL, q, q, q, g, b, NULL, B, H, T, Dk, Dv, &sv, NULL, NULL), GD_OK);
        cfg.chunk_size = 32;
        CHECK_INT_EQ(gd_backward_cuda(&cfg, &sv, dq, dk, dv, dg, db, NULL, q, NULL, q, q, q, g, b, NULL, B, H, T,
                                      Dk, Dv, NULL, NULL), GD_EINVAL);
        CHECK(dget(dq, nqk) == z);
        gd_saved_free(&sv);
        dfree(q); dfree(g); dfree(b); dfree(r); dfree(dq); dfree(dk); dfree(dv); dfree(dg); dfree(db);
    }
}

/* ------------------------------------------------------------------ step */
/* 300 steps of 3 sequences in a 7-slot table, rows shuffled each step, against the CPU
   recurrent forward over the whole sequence (outputs, final states 1e-5), the CPU gd_step
   on the same rows, and untouched slots bit-identical. */
static void test_step_300(void)
{
    const int N = 3, H = 2, Dk = 16, Dv = 16, NS = 7, T = 300;
    const int seq_slot[3] = {5, 1, 3};
    const size_t D2 = (size_t)Dk * Dv;
    gd_config cfg = gd_config_default();
    gd_config rcfg = gd_config_default();
    int t, n, h, i;
    NEED_GPU();
    tt_seed(31);
    /* sequences in (N,H,T,.) layout for the recurrent reference */
    std::vector<float> q = randn((size_t)N * H * T * Dk, 1.0), k = randn((size_t)N * H * T * Dk, 1.0);
    std::vector<float> v = randn((size_t)N * H * T * Dv, 1.0), g = randu((size_t)N * H * T, 0.9, 1.0);
    std::vector<float> be = randu((size_t)N * H * T, 0.05, 0.95);
    std::vector<float> table = randn((size_t)NS * H * D2, 0.3), table0 = table, cpu_table = table;
    std::vector<float> s0((size_t)N * H * D2), rref((size_t)N * H * T * Dv), sref((size_t)N * H * D2);
    for (n = 0; n < N; n++)
        memcpy(&s0[(size_t)n * H * D2], &table[(size_t)seq_slot[n] * H * D2], H * D2 * sizeof(float));
    rcfg.algo = GD_ALGO_RECURRENT;
    CHECK_INT_EQ(gd_forward(&rcfg, rref.data(), sref.data(), q.data(), k.data(), v.data(), g.data(), be.data(),
                            s0.data(), N, H, T, Dk, Dv, NULL, NULL), GD_OK);
    float *dtable = dput(table);
    std::vector<int> slots(N), order(N);
    std::vector<float> q1((size_t)N * H * Dk), k1((size_t)N * H * Dk), v1((size_t)N * H * Dv), g1((size_t)N * H),
        b1((size_t)N * H), r1((size_t)N * H * Dv), rc1((size_t)N * H * Dv);
    std::vector<float> gpu_r((size_t)N * H * T * Dv), cpu_r((size_t)N * H * T * Dv);
    float *dq1 = dput(q1), *dk1 = dput(k1), *dv1 = dput(v1), *dg1 = dput(g1), *db1 = dput(b1), *dr1 = dput(r1);
    int *dslots = dput(slots);
    for (n = 0; n < N; n++) order[n] = n;
    for (t = 0; t < T; t++) {
        for (n = N - 1; n > 0; n--) { /* shuffle which row carries which sequence */
            int j = (int)(tt_uniform() * (n + 1)) % (n + 1), x = order[n];
            order[n] = order[j];
            order[j] = x;
        }
        for (n = 0; n < N; n++) {
            int sq = order[n];
            slots[n] = seq_slot[sq];
            for (h = 0; h < H; h++) {
                size_t src = ((size_t)sq * H + h) * T + t, dst = (size_t)n * H + h;
                memcpy(&q1[dst * Dk], &q[src * Dk], Dk * sizeof(float));
                memcpy(&k1[dst * Dk], &k[src * Dk], Dk * sizeof(float));
                memcpy(&v1[dst * Dv], &v[src * Dv], Dv * sizeof(float));
                g1[dst] = g[src];
                b1[dst] = be[src];
            }
        }
        cudaMemcpy(dslots, slots.data(), N * sizeof(int), cudaMemcpyHostToDevice);
        cudaMemcpy(dq1, q1.data(), q1.size() * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemcpy(dk1, k1.data(), k1.size() * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemcpy(dv1, v1.data(), v1.size() * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemcpy(dg1, g1.data(), g1.size() * sizeof(float), cudaMemcpyHostToDevice);
        cudaMemcpy(db1, b1.data(), b1.size() * sizeof(float), cudaMemcpyHostToDevice);
        CHECK_INT_EQ(gd_step_cuda(&cfg, dtable, NS, dslots, N, H, Dk, Dv, dq1, dk1, dv1, dg1, db1, dr1, NULL), GD_OK);
        CHECK_INT_EQ(gd_step(&cfg, cpu_table.data(), NS, slots.data(), N, H, Dk, Dv, q1.data(), k1.data(), v1.data(),
                             g1.data(), b1.data(), rc1.data()), GD_OK);
        r1 = dget(dr1, r1.size());
        for (n = 0; n < N; n++)
            for (h = 0; h < H; h++) {
                size_t dst = ((size_t)order[n] * H + h) * T + t, src = (size_t)n * H + h;
                memcpy(&gpu_r[dst * Dv], &r1[src * Dv], Dv * sizeof(float));
                memcpy(&cpu_r[dst * Dv], &rc1[src * Dv], Dv * sizeof(float));
            }
    }
    CHECK_REL(gpu_r, rref, 1e-5);
    CHECK_REL(gpu_r, cpu_r, 1e-5);
    table = dget(dtable, table.size());
    {
        std::vector<float> fin((size_t)N * H * D2);
        int touched[7] = {0, 0, 0, 0, 0, 0, 0};
        for (n = 0; n < N; n++) {
            memcpy(&fin[(size_t)n * H * D2], &table[(size_t)seq_slot[n] * H * D2], H * D2 * sizeof(float));
            touched[seq_slot[n]] = 1;
        }
        CHECK_REL(fin, sref, 1e-5);
        fprintf(stderr, "    step: 300 steps, worst/tol r %.2f (vs recurrent), %.2f (vs gd_step), state %.2f\n",
                worst(gpu_r, rref, 1e-5), worst(gpu_r, cpu_r, 1e-5), worst(fin, sref, 1e-5));
        for (i = 0; i < NS; i++)
            if (!touched[i])
                CHECK(memcmp(&table[(size_t)i * H * D2], &table0[(size_t)i * H * D2], H * D2 * sizeof(float)) == 0);
    }
    dfree(dtable); dfree(dq1); dfree(dk1); dfree(dv1); dfree(dg1); dfree(db1); dfree(dr1); dfree(dslots);
}

/* wider rows for the step kernel: Dk > 32 and not a multiple of 32, Dv over several
   32-row blocks; log gates; 4 steps against the CPU gd_step (r and the whole table) */
static void test_step_shapes(void)
{
    static const int dims[2][2] = {{128, 64}, {40, 72}};
    int c, t;
    NEED_GPU();
    for (c = 0; c < 2; c++) {
        const int N = 2, H = 2, NS = 3, Dk = dims[c][0], Dv = dims[c][1];
        gd_config cfg = gd_config_default();
        std::vector<float> table = randn((size_t)NS * H * Dk * Dv, 0.3), cpu = table, orig = table;
        std::vector<int> slots(N);
        float *dt = dput(table);
        int *ds;
        slots[0] = 2;
        slots[1] = 0;
        ds = dput(slots);
        cfg.gate_is_log = 1;
        cfg.scale = 0.7f;
        tt_seed(400 + c);
        for (t = 0; t < 4; t++) {
            std::vector<float> q = randn((size_t)N * H * Dk, 1.0), k = randn((size_t)N * H * Dk, 1.0);
            std::vector<float> v = randn((size_t)N * H * Dv, 1.0), g = randu((size_t)N * H, -0.2, 0.0);
            std::vector<float> b = randu((size_t)N * H, 0.0, 1.0), r((size_t)N * H * Dv, 0.0f), rc = r;
            float *dq = dput(q), *dk = dput(k), *dv = dput(v), *dg = dput(g), *db = dput(b), *dr = dput(r);
            CHECK_INT_EQ(gd_step_cuda(&cfg, dt, NS, ds, N, H, Dk, Dv, dq, dk, dv, dg, db, dr, NULL), GD_OK);
            CHECK_INT_EQ(gd_step(&cfg, cpu.data(), NS, slots.data(), N, H, Dk, Dv, q.data(), k.data(), v.data(),
                                 g.data(), b.data(), rc.data()), GD_OK);
            r = dget(dr, r.size());
            CHECK_REL(r, rc, 1e-5);
            dfree(dq); dfree(dk); dfree(dv); dfree(dg); dfree(db); dfree(dr);
        }
        table = dget(dt, table.size());
        CHECK_REL(table, cpu, 1e-5);
        {   /* slot 1 never touched: bit-identical to the original */
            size_t sz = (size_t)H * Dk * Dv;
            CHECK(memcmp(&table[sz], &orig[sz], sz * sizeof(float)) == 0);
        }
        dfree(dt);
        dfree(ds);
    }
}

static void test_step_bad_input(void)
{
    const int N = 2, H = 1, Dk = 8, Dv = 8, NS = 4;
    gd_config cfg = gd_config_default();
    std::vector<float> table = randn((size_t)NS * H * Dk * Dv, 1.0), q = randn((size_t)N * H * Dk, 1.0);
    std::vector<float> v = randn((size_t)N * H * Dv, 1.0), g(N * H, 0.9f), b(N * H, 0.5f);
    std::vector<int> slots(N);
    float *dt, *dq, *dv, *dg, *db, *dr;
    int *ds;
    NEED_GPU();
    slots[0] = 0;
    slots[1] = 2;
    dt = dput(table); dq = dput(q); dv = dput(v); dg = dput(g); db = dput(b); dr = dput(v);
    ds = dput(slots);
    CHECK_INT_EQ(gd_step_cuda(&cfg, dt, NS, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, dr, NULL), GD_OK);
    table = dget(dt, table.size());
    CHECK_INT_EQ(gd_step_cuda(&cfg, dt, NS, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, NULL, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_step_cuda(&cfg, dt, NS, slots.data(), N, H, Dk, Dv, dq, dq, dv, dg, db, dr, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_step_cuda(&cfg, table.data(), NS, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, dr, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_step_cuda(&cfg, dt, 0, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, dr, NULL), GD_EINVAL);
    CHECK_INT_EQ(gd_step_cuda(&cfg, dt, NS, ds, N, H, 0, Dv, dq, dq, dv, dg, db, dr, NULL), GD_EINVAL);
    {   /* math bf16 / tf32: the step has no tensor-core product and runs its fp32 kernel,
           bit-identical to math fp32 (on copies of the table) */
        int m;
        for (m = 0; m < 2; m++) {
            gd_config c2 = cfg;
            float *t1 = dput(table), *t2 = dput(table), *r1 = dput(v), *r2 = dput(v);
            c2.math = m ? GD_MATH_TF32 : GD_MATH_BF16;
            CHECK_INT_EQ(gd_step_cuda(&c2, t1, NS, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, r1, NULL), GD_OK);
            CHECK_INT_EQ(gd_step_cuda(&cfg, t2, NS, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, r2, NULL), GD_OK);
            CHECK(dget(t1, table.size()) == dget(t2, table.size()));
            CHECK(dget(r1, v.size()) == dget(r2, v.size()));
            CHECK(dget(t1, table.size()) != table);
            dfree(t1); dfree(t2); dfree(r1); dfree(r2);
        }
    }
    slots[1] = NS; /* out of range */
    cudaMemcpy(ds, slots.data(), N * sizeof(int), cudaMemcpyHostToDevice);
    CHECK_INT_EQ(gd_step_cuda(&cfg, dt, NS, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, dr, NULL), GD_ERANGE);
    slots[1] = 0; /* repeated */
    cudaMemcpy(ds, slots.data(), N * sizeof(int), cudaMemcpyHostToDevice);
    CHECK_INT_EQ(gd_step_cuda(&cfg, dt, NS, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, dr, NULL), GD_ERANGE);
    slots[1] = 2;
    cudaMemcpy(ds, slots.data(), N * sizeof(int), cudaMemcpyHostToDevice);
    g[1] = 1.01f; /* gate out of range */
    cudaMemcpy(dg, g.data(), g.size() * sizeof(float), cudaMemcpyHostToDevice);
    CHECK_INT_EQ(gd_step_cuda(&cfg, dt, NS, ds, N, H, Dk, Dv, dq, dq, dv, dg, db, dr, NULL), GD_ERANGE);
    {
        std::vector<float> after = dget(dt, table.size());
        CHECK(after == table); /* no refused call wrote the table */
    }
    dfree(dt); dfree(dq); dfree(dv); dfree(dg); dfree(db); dfree(dr); dfree(ds);
}

/* ------------------------------------------------------------ issue 38: float64 sweep */
/* The device's chunked path (chunk 16) against tests/ref64.h's float64 transcription of
   eqs. 16-25 in test_gdelta.c's regimes (gates near 0 and 1, exact 0 and 1, log gates
   -30..-5, beta near 0 and 1, keys of norm 1e-5..1e-2, a saturating 4x4 state; T 256 here
   instead of 2048, the simulation being slow). fp32: 1e-4 forward, 2e-3 gradients,
   relative to each tensor's max-norm. Tensor-core math (Dk = Dv = 16, gates near 0 and
   the saturating state): the same measure within 2e-2 (the operands are rounded to
   bf16 / tf32: issue 14's bound). */
static void gd_sweep_device(r64_report *rep, r64_gd_case *c, int math, double tf, double tg)
{
    gd_config cfg = gd_config_default();
    const size_t nq = (size_t)c->B * c->H * c->T * c->Dk, nv = (size_t)c->B * c->H * c->T * c->Dv;
    const size_t ng = (size_t)c->B * c->H * c->T, nS = (size_t)c->B * c->H * c->Dv * c->Dk;
    std::vector<float> hq(c->q, c->q + nq), hk(c->k, c->k + nq), hv(c->v, c->v + nv);
    std::vector<float> hg(c->g, c->g + ng), hb(c->be, c->be + ng), hdr(c->dr, c->dr + nv);
    std::vector<float> hdS(c->dS, c->dS + nS), zq(nq, 0.0f), zv(nv, 0.0f), zg(ng, 0.0f), zS(nS, 0.0f);
    float *q = dput(hq), *k = dput(hk), *v = dput(hv), *g = dput(hg), *be = dput(hb);
    float *dr = dput(hdr), *dS = dput(hdS), *r = dput(zv), *S = dput(zS), *dq = dput(zq);
    float *dk = dput(zq), *dv = dput(zv), *dg = dput(zg), *db = dput(zg);
    gd_saved sv = gd_saved_init();
    static const char *nm[3][7] = {
        {"fp32 r", "fp32 state", "fp32 dq", "fp32 dk", "fp32 dv", "fp32 dgates", "fp32 dbeta"},
        {"tf32 r", "tf32 state", "tf32 dq", "tf32 dk", "tf32 dv", "tf32 dgates", "tf32 dbeta"},
        {"bf16 r", "bf16 state", "bf16 dq", "bf16 dk", "bf16 dv", "bf16 dgates", "bf16 dbeta"}};
    double e[7];
    int i;
    cfg.chunk_size = 16;
    cfg.gate_is_log = c->gate_is_log;
    cfg.math = math;
    CHECK_INT_EQ(gd_forward_cuda(&cfg, r, S, q, k, v, g, be, NULL, c->B, c->H, c->T, c->Dk, c->Dv,
                                 &sv, NULL, NULL), GD_OK);
    CHECK_INT_EQ(gd_backward_cuda(&cfg, &sv, dq, dk, dv, dg, db, NULL, dr, dS, q, k, v, g, be, NULL,
                                  c->B, c->H, c->T, c->Dk, c->Dv, NULL, NULL), GD_OK);
    e[0] = r64_relerr_f(dget(r, nv).data(), c->r, (long)nv);
    e[1] = r64_relerr_f(dget(S, nS).data(), c->S, (long)nS);
    e[2] = r64_relerr_f(dget(dq, nq).data(), c->dq, (long)nq);
    e[3] = r64_relerr_f(dget(dk, nq).data(), c->dk, (long)nq);
    e[4] = r64_relerr_f(dget(dv, nv).data(), c->dv, (long)nv);
    e[5] = r64_relerr_f(dget(dg, ng).data(), c->dg, (long)ng);
    e[6] = r64_relerr_f(dget(db, ng).data(), c->dbe, (long)ng);
    for (i = 0; i < 7; i++) {
        r64_note(rep, nm[math][i], c->name, e[i]);
        if (!(e[i] <= (i < 2 ? tf : tg))) {
            fprintf(stderr, "  %s, %s: relative error %.3e\n", c->name, nm[math][i], e[i]);
            CHECK(e[i] <= (i < 2 ? tf : tg));
        }
    }
    gd_saved_free(&sv);
    dfree(q); dfree(k); dfree(v); dfree(g); dfree(be); dfree(dr); dfree(dS); dfree(r); dfree(S);
    dfree(dq); dfree(dk); dfree(dv); dfree(dg); dfree(db);
}

static void test_sweep_float64(void)
{
    r64_report rep;
    int reg;
    NEED_GPU();
    memset(&rep, 0, sizeof rep);
    for (reg = 0; reg < R64_GD_NREGIMES; reg++) {
        r64_gd_case c;
        r64_gd_make(&c, reg, 256);
        gd_sweep_device(&rep, &c, GD_MATH_FP32, R64_TOL_FWD, R64_TOL_GRAD);
        r64_gd_free(&c);
    }
    {
        static const int tc[2] = {R64_GD_GATE0, R64_GD_SATURATE};
        for (reg = 0; reg < 2; reg++) {
            r64_gd_case c;
            r64_gd_make_dims(&c, tc[reg], 64, 16, 16);
            gd_sweep_device(&rep, &c, reg ? GD_MATH_TF32 : GD_MATH_BF16, 2e-2, 2e-2);
            r64_gd_free(&c);
        }
    }
    r64_print(&rep, "gdelta device vs float64 (eqs. 16-25)");
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    parity_print_device();
    g_gpu = parity_device_ok() && gd_cuda_available();
    TEST_RUN(test_bad_input);
    TEST_RUN(test_step_bad_input);
    TEST_RUN(test_plain_entry_routes);
    TEST_RUN(test_small_shapes);
    TEST_RUN(test_wide_heads);
    TEST_RUN(test_long);
    TEST_RUN(test_config_variants);
    TEST_RUN(test_deterministic);
    TEST_RUN(test_status_deferred);
    TEST_RUN(test_tc_bad_input);
    TEST_RUN(test_tc_shapes);
    TEST_RUN(test_tc_chunk128);
    TEST_RUN(test_tc_deterministic);
    TEST_RUN(test_step_300);
    TEST_RUN(test_step_shapes);
    TEST_RUN(test_sweep_float64);
    return TEST_END();
}
