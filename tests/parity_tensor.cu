/* parity_tensor.cu - tensor.h's CUDA ops (cuda/tensor.cuh) against its CPU path.
   Built twice: by g++/clang++ against the CPU simulation (tests/cuda_sim.h; `make test`
   runs it on every machine) and by nvcc for the GPU (`make cuda`, `make gpu-check`).
   Under nvcc without a usable GPU the device cases are skipped (`SKIP: no GPU`).
   Tolerances are the ones documented at the top of cuda/tensor.cuh. ceas.h joins for the
   attention stats' end to end case (ceas_attention_observables_from_moments_cuda). */
#include "tests/cuda_test.h"
#define TENSOR_IMPLEMENTATION
#include "tensor.h"
#define CEAS_IMPLEMENTATION
#include "ceas.h" /* the stats' end to end check: CEAS observables from the device moments */
#include "tests/attnkit_test.h"
#include "tests/ref64.h"

static int g_gpu = 0;

#define NEED_GPU()                                                             \
    do {                                                                       \
        if (!g_gpu) TEST_SKIP("no GPU");                                       \
    } while (0)

static void test_sgemm_shapes(void)
{
    static const int shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {64, 64, 64}, {129, 67, 251}, {300, 17, 1000}};
    int s, ta, tb;
    NEED_GPU();
    tt_seed(1);
    for (s = 0; s < 5; s++)
        for (ta = 0; ta < 2; ta++)
            for (tb = 0; tb < 2; tb++) {
                int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
                size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb;
                /* K-normalised data keeps |sum| ~ 1, so rtol/atol 1e-4 bounds the error */
                std::vector<float> A = randn(na, 1.0 / sqrt((double)K)), Bm = randn(nb, 1.0), C = randn((size_t)M * ldc, 1.0);
                std::vector<float> Cref = C;
                float *dA = dput(A), *dB = dput(Bm), *dC = dput(C);
                CHECK_INT_EQ(tk_sgemm(ta, tb, M, N, K, 0.7f, A.data(), lda, Bm.data(), ldb, 0.3f, Cref.data(), ldc), TK_OK);
                CHECK_INT_EQ(tk_sgemm_cuda(ta, tb, M, N, K, 0.7f, dA, lda, dB, ldb, 0.3f, dC, ldc, NULL), TK_OK);
                std::vector<float> got = dget(dC, C.size());
                CHECK_ALL_CLOSE(got.data(), Cref.data(), (long)C.size(), 1e-4, 1e-4);
                dfree(dA); dfree(dB); dfree(dC);
            }
}

/* tk_cuda_set_math: the device GEMM in tf32 / bf16 against the CPU's fp32 one, per element
   within e * sum_k |a_ik b_kj| (e = 2^-9 tf32, 2^-7 bf16: cuda/tensor.cuh); the error must
   also be real (above fp32's) so the mode is known to be in effect; the routed matmul
   follows the mode; FP32 restored gives SGEMM's result again; bad modes refused. */
static void test_sgemm_math(void)
{
    const int M = 37, N = 29, K = 300;
    const int modes[2] = {TK_MATH_TF32, TK_MATH_BF16};
    const double e_mode[2] = {1.0 / 512.0, 1.0 / 128.0};
    int mi;
    CHECK_INT_EQ(tk_cuda_get_math(), TK_MATH_FP32);
    CHECK_INT_EQ(tk_cuda_set_math(7), TK_EINVAL);
    CHECK_INT_EQ(tk_cuda_get_math(), TK_MATH_FP32);
    NEED_GPU();
    tt_seed(41);
    std::vector<float> A = randn((size_t)M * K, 1.0), Bm = randn((size_t)N * K, 1.0), C((size_t)M * N, 0.0f);
    std::vector<float> ref = C, bound((size_t)M * N, 0.0f);
    CHECK_INT_EQ(tk_sgemm(0, 1, M, N, K, 1.0f, A.data(), K, Bm.data(), K, 0.0f, ref.data(), N), TK_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int p = 0; p < K; p++) s += fabs((double)A[(size_t)i * K + p] * Bm[(size_t)j * K + p]);
            bound[(size_t)i * N + j] = (float)s;
        }
    float *dA = dput(A), *dB = dput(Bm), *dC = dput(C);
    for (mi = 0; mi < 2; mi++) {
        double worst = 0.0, worst_rel = 0.0;
        CHECK_INT_EQ(tk_cuda_set_math(modes[mi]), TK_OK);
        CHECK_INT_EQ(tk_cuda_get_math(), modes[mi]);
        CHECK_INT_EQ(tk_sgemm_cuda(0, 1, M, N, K, 1.0f, dA, K, dB, K, 0.0f, dC, N, NULL), TK_OK);
        std::vector<float> got = dget(dC, C.size());
        for (size_t e = 0; e < got.size(); e++) {
            double d = fabs((double)got[e] - (double)ref[e]), r = d / (double)bound[e];
            worst = d > worst ? d : worst;
            worst_rel = r > worst_rel ? r : worst_rel;
            CHECK(r <= e_mode[mi]);
        }
        CHECK(worst_rel > 1e-6); /* reduced precision really in effect */
        /* the routed matmul follows the mode: bit-identical to the direct call */
        CHECK_INT_EQ(tk_matmul_forward(dC, dA, dB, NULL, M, K, N), TK_OK);
        std::vector<float> got2 = dget(dC, C.size());
        CHECK(memcmp(got.data(), got2.data(), got.size() * sizeof(float)) == 0);
        printf("  sgemm %s: worst |err| %.3g, worst |err| / sum|ab| %.3g (bound %.3g)\n", mi ? "bf16" : "tf32", worst,
               worst_rel, e_mode[mi]);
    }
    CHECK_INT_EQ(tk_cuda_set_math(TK_MATH_FP32), TK_OK);
    CHECK_INT_EQ(tk_sgemm_cuda(0, 1, M, N, K, 1.0f, dA, K, dB, K, 0.0f, dC, N, NULL), TK_OK);
    {
        std::vector<float> got = dget(dC, C.size());
        CHECK_ALL_CLOSE(got.data(), ref.data(), (long)got.size(), 1e-4, 1e-4);
    }
    dfree(dA); dfree(dB); dfree(dC);
}

static void test_matmul(void)
{
    const int N = 37, C = 48, OC = 29;
    NEED_GPU();
    tt_seed(2);
    std::vector<float> x = randn((size_t)N * C, 1.0), W = randn((size_t)OC * C, 0.15), b = randn(OC, 1.0);
    std::vector<float> dout = randn((size_t)N * OC, 1.0);
    std::vector<float> out((size_t)N * OC), dx = randn((size_t)N * C, 1.0), dW = randn((size_t)OC * C, 1.0), db = randn(OC, 1.0);
    float *d_x = dput(x), *d_W = dput(W), *d_b = dput(b), *d_out = dput(out), *d_dout = dput(dout);
    float *d_dx = dput(dx), *d_dW = dput(dW), *d_db = dput(db);
    CHECK_INT_EQ(tk_matmul_forward(out.data(), x.data(), W.data(), b.data(), N, C, OC), TK_OK);
    CHECK_INT_EQ(tk_matmul_forward_cuda(d_out, d_x, d_W, d_b, N, C, OC, NULL), TK_OK);
    std::vector<float> g = dget(d_out, out.size());
    CHECK_ALL_CLOSE(g.data(), out.data(), (long)out.size(), 1e-4, 1e-4);
    CHECK_INT_EQ(tk_matmul_backward(dx.data(), dW.data(), db.data(), dout.data(), x.data(), W.data(), N, C, OC), TK_OK);
    CHECK_INT_EQ(tk_matmul_backward_cuda(d_dx, d_dW, d_db, d_dout, d_x, d_W, N, C, OC, NULL), TK_OK);
    g = dget(d_dx, dx.size());
    CHECK_ALL_CLOSE(g.data(), dx.data(), (long)dx.size(), 1e-4, 1e-4);
    g = dget(d_dW, dW.size());
    CHECK_ALL_CLOSE(g.data(), dW.data(), (long)dW.size(), 1e-4, 1e-4);
    g = dget(d_db, db.size());
    CHECK_ALL_CLOSE(g.data(), db.data(), (long)db.size(), 1e-5, 1e-5);
    dfree(d_x); dfree(d_W); dfree(d_b); dfree(d_out); dfree(d_dout); dfree(d_dx); dfree(d_dW); dfree(d_db);
}

static void test_embedding(void)
{
    const int B = 3, T = 11, C = 20, V = 50;
    int i;
    NEED_GPU();
    tt_seed(3);
    std::vector<int> ids((size_t)B * T);
    for (i = 0; i < B * T; i++) ids[i] = (int)(tt_uniform() * V) % V;
    ids[5] = ids[17] = 7; /* repeated ids exercise the scatter */
    std::vector<float> wte = randn((size_t)V * C, 1.0), wpe = randn((size_t)T * C, 1.0), dout = randn((size_t)B * T * C, 1.0);
    std::vector<float> out((size_t)B * T * C), dwte = randn((size_t)V * C, 1.0), dwpe = randn((size_t)T * C, 1.0);
    int *d_ids = dput(ids);
    float *d_wte = dput(wte), *d_wpe = dput(wpe), *d_out = dput(out), *d_dout = dput(dout), *d_dwte = dput(dwte), *d_dwpe = dput(dwpe);
    CHECK_INT_EQ(tk_embedding_forward(out.data(), ids.data(), wte.data(), wpe.data(), B, T, C, V), TK_OK);
    CHECK_INT_EQ(tk_embedding_forward_cuda(d_out, d_ids, d_wte, d_wpe, B, T, C, V, NULL), TK_OK);
    std::vector<float> g = dget(d_out, out.size());
    CHECK_ALL_CLOSE(g.data(), out.data(), (long)out.size(), 0.0, 0.0);
    CHECK_INT_EQ(tk_embedding_backward(dwte.data(), dwpe.data(), dout.data(), ids.data(), B, T, C, V), TK_OK);
    CHECK_INT_EQ(tk_embedding_backward_cuda(d_dwte, d_dwpe, d_dout, d_ids, B, T, C, V, NULL), TK_OK);
    g = dget(d_dwte, dwte.size());
    CHECK_ALL_CLOSE(g.data(), dwte.data(), (long)dwte.size(), 1e-6, 1e-6);
    g = dget(d_dwpe, dwpe.size());
    CHECK_ALL_CLOSE(g.data(), dwpe.data(), (long)dwpe.size(), 1e-6, 1e-6);
    /* an id outside the vocabulary: TK_ERANGE, output untouched */
    ids[4] = V;
    int *d_bad = dput(ids);
    std::vector<float> before = dget(d_out, out.size());
    CHECK_INT_EQ(tk_embedding_forward_cuda(d_out, d_bad, d_wte, d_wpe, B, T, C, V, NULL), TK_ERANGE);
    g = dget(d_out, out.size());
    CHECK_ALL_CLOSE(g.data(), before.data(), (long)out.size(), 0.0, 0.0);
    dfree(d_ids); dfree(d_bad); dfree(d_wte); dfree(d_wpe); dfree(d_out); dfree(d_dout); dfree(d_dwte); dfree(d_dwpe);
}

static void test_layernorm(void)
{
    const int N = 33, C = 300;
    NEED_GPU();
    tt_seed(4);
    std::vector<float> x = randn((size_t)N * C, 2.0), w = randn(C, 1.0), b = randn(C, 1.0), dout = randn((size_t)N * C, 1.0);
    std::vector<float> out((size_t)N * C), mean(N), rstd(N);
    std::vector<float> dx = randn((size_t)N * C, 1.0), dw = randn(C, 1.0), db = randn(C, 1.0);
    float *d_x = dput(x), *d_w = dput(w), *d_b = dput(b), *d_out = dput(out), *d_mean = dput(mean), *d_rstd = dput(rstd);
    float *d_dout = dput(dout), *d_dx = dput(dx), *d_dw = dput(dw), *d_db = dput(db);
    CHECK_INT_EQ(tk_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f), TK_OK);
    CHECK_INT_EQ(tk_layernorm_forward_cuda(d_out, d_mean, d_rstd, d_x, d_w, d_b, N, C, 1e-5f, NULL), TK_OK);
    std::vector<float> g = dget(d_out, out.size());
    CHECK_ALL_CLOSE(g.data(), out.data(), (long)out.size(), 1e-5, 1e-5);
    g = dget(d_rstd, rstd.size());
    CHECK_ALL_CLOSE(g.data(), rstd.data(), (long)N, 1e-5, 1e-6);
    CHECK_INT_EQ(tk_layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C), TK_OK);
    CHECK_INT_EQ(tk_layernorm_backward_cuda(d_dx, d_dw, d_db, d_dout, d_x, d_w, d_mean, d_rstd, N, C, NULL), TK_OK);
    g = dget(d_dx, dx.size());
    CHECK_ALL_CLOSE(g.data(), dx.data(), (long)dx.size(), 1e-4, 1e-5);
    g = dget(d_dw, dw.size());
    CHECK_ALL_CLOSE(g.data(), dw.data(), (long)C, 1e-4, 1e-5);
    g = dget(d_db, db.size());
    CHECK_ALL_CLOSE(g.data(), db.data(), (long)C, 1e-5, 1e-5);
    dfree(d_x); dfree(d_w); dfree(d_b); dfree(d_out); dfree(d_mean); dfree(d_rstd);
    dfree(d_dout); dfree(d_dx); dfree(d_dw); dfree(d_db);
}

/* matmul db and LayerNorm dw, db over many rows: the two-stage column reductions (chunks
   of 128 rows, then the partials in order) against the CPU's row-order float sums; atol on
   the scale of what was added (the orders differ) */
static void colsum_case(int N, int C, int want_dw, int want_db, unsigned seed)
{
    const size_t nc = (size_t)N * C;
    tt_seed(seed);
    std::vector<float> x = randn(nc, 2.0), w = randn((size_t)C, 1.0), b = randn((size_t)C, 1.0), dout = randn(nc, 1.0);
    std::vector<float> out(nc), mean((size_t)N), rstd((size_t)N);
    std::vector<float> dw = randn((size_t)C, 1.0), db = randn((size_t)C, 1.0), db2 = randn((size_t)C, 1.0);
    const std::vector<float> dw0 = dw, db0 = db, db20 = db2;
    CHECK_INT_EQ(tk_layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f), TK_OK);
    float *d_x = dput(x), *d_w = dput(w), *d_mean = dput(mean), *d_rstd = dput(rstd), *d_dout = dput(dout);
    float *d_dw = dput(dw), *d_db = dput(db), *d_db2 = dput(db2);
    std::vector<float> ddx(nc, 0.0f);
    CHECK_INT_EQ(tk_layernorm_backward(ddx.data(), want_dw ? dw.data() : NULL, want_db ? db.data() : NULL, dout.data(),
                                       x.data(), w.data(), mean.data(), rstd.data(), N, C), TK_OK);
    CHECK_INT_EQ(tk_layernorm_backward_cuda(NULL, want_dw ? d_dw : NULL, want_db ? d_db : NULL, d_dout, d_x, d_w, d_mean,
                                            d_rstd, N, C, NULL), TK_OK);
    CHECK_INT_EQ(tk_matmul_backward(NULL, NULL, db2.data(), dout.data(), NULL, NULL, N, 1, C), TK_OK);
    CHECK_INT_EQ(tk_matmul_backward_cuda(NULL, NULL, d_db2, d_dout, NULL, NULL, N, 1, C, NULL), TK_OK);
    const float *refs[3] = {dw.data(), db.data(), db2.data()}, *inits[3] = {dw0.data(), db0.data(), db20.data()};
    float *devs[3] = {d_dw, d_db, d_db2};
    for (int k = 0; k < 3; k++) {
        std::vector<float> g = dget(devs[k], (size_t)C), add((size_t)C);
        for (int c = 0; c < C; c++) add[(size_t)c] = refs[k][c] - inits[k][c];
        const double atol_ = 1e-5 * maxabs(add) + 1e-30;
        CHECK_ALL_CLOSE(g.data(), refs[k], (long)C, 1e-5, atol_);
    }
    dfree(d_x); dfree(d_w); dfree(d_mean); dfree(d_rstd); dfree(d_dout); dfree(d_dw); dfree(d_db); dfree(d_db2);
}

static void test_colsum_chunks(void)
{
    NEED_GPU();
    colsum_case(1, 5, 1, 1, 401);
    colsum_case(129, 33, 1, 1, 402);
    colsum_case(300, 17, 1, 0, 403);
    colsum_case(1000, 70, 0, 1, 404);
    colsum_case(257, 300, 1, 1, 405);
}

static void test_gelu(void)
{
    const size_t n = 10007;
    NEED_GPU();
    tt_seed(5);
    std::vector<float> x = randn(n, 3.0), dout = randn(n, 1.0), out(n), dx = randn(n, 1.0);
    float *d_x = dput(x), *d_out = dput(out), *d_dout = dput(dout), *d_dx = dput(dx);
    CHECK_INT_EQ(tk_gelu_forward(out.data(), x.data(), n), TK_OK);
    CHECK_INT_EQ(tk_gelu_forward_cuda(d_out, d_x, n, NULL), TK_OK);
    std::vector<float> g = dget(d_out, n);
    CHECK_ALL_CLOSE(g.data(), out.data(), (long)n, 1e-5, 1e-6);
    CHECK_INT_EQ(tk_gelu_backward(dx.data(), x.data(), dout.data(), n), TK_OK);
    CHECK_INT_EQ(tk_gelu_backward_cuda(d_dx, d_x, d_dout, n, NULL), TK_OK);
    g = dget(d_dx, n);
    CHECK_ALL_CLOSE(g.data(), dx.data(), (long)n, 1e-5, 1e-6);
    dfree(d_x); dfree(d_out); dfree(d_dout); dfree(d_dx);
}

static void test_softmax_ce(void)
{
    const int N = 19, V = 5003;
    const float eps = 0.1f;
    int i;
    NEED_GPU();
    tt_seed(6);
    std::vector<float> logits = randn((size_t)N * V, 3.0), probs((size_t)N * V), losses(N), sm((size_t)N * V);
    std::vector<float> dlog = randn((size_t)N * V, 0.01);
    std::vector<int> y(N);
    for (i = 0; i < N; i++) y[i] = (int)(tt_uniform() * V) % V;
    float *d_logits = dput(logits), *d_probs = dput(probs), *d_losses = dput(losses), *d_ce = dput(losses);
    float *d_sm = dput(sm), *d_dlog = dput(dlog);
    int *d_y = dput(y);
    float mean_ce = 0, mean_loss = 0;
    CHECK_INT_EQ(tk_softmax_forward(sm.data(), logits.data(), N, V), TK_OK);
    CHECK_INT_EQ(tk_softmax_forward_cuda(d_sm, d_logits, N, V, NULL), TK_OK);
    std::vector<float> g = dget(d_sm, sm.size());
    CHECK_ALL_CLOSE(g.data(), sm.data(), (long)sm.size(), 1e-5, 1e-7);
    CHECK_INT_EQ(tk_crossentropy_forward(probs.data(), losses.data(), &mean_ce, &mean_loss, logits.data(), y.data(), N, V, eps), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_forward_cuda(d_probs, d_losses, d_ce, d_logits, d_y, N, V, eps, NULL), TK_OK);
    g = dget(d_losses, N);
    CHECK_ALL_CLOSE(g.data(), losses.data(), (long)N, 1e-5, 1e-5);
    g = dget(d_ce, N);
    {
        double s = 0;
        for (i = 0; i < N; i++) s += g[i];
        CHECK_CLOSE(s / N, mean_ce, 1e-5, 1e-5);
    }
    g = dget(d_probs, probs.size());
    CHECK_ALL_CLOSE(g.data(), probs.data(), (long)probs.size(), 1e-5, 1e-7);
    CHECK_INT_EQ(tk_crossentropy_backward(dlog.data(), probs.data(), y.data(), N, V, eps, 1.0f / N), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_backward_cuda(d_dlog, d_probs, d_y, N, V, eps, 1.0f / N, NULL), TK_OK);
    g = dget(d_dlog, dlog.size());
    CHECK_ALL_CLOSE(g.data(), dlog.data(), (long)dlog.size(), 1e-5, 1e-7);
    /* a target outside the vocabulary is refused */
    y[3] = -1;
    int *d_bad = dput(y);
    CHECK_INT_EQ(tk_crossentropy_forward_cuda(d_probs, d_losses, d_ce, d_logits, d_bad, N, V, eps, NULL), TK_ERANGE);
    dfree(d_logits); dfree(d_probs); dfree(d_losses); dfree(d_ce); dfree(d_sm); dfree(d_dlog); dfree(d_y); dfree(d_bad);
}

static void test_adamw(void)
{
    const size_t n = 4099;
    long t;
    NEED_GPU();
    tt_seed(7);
    tk_adamw_config cfg = tk_adamw_config_default();
    std::vector<float> p = randn(n, 1.0), m(n, 0.0f), v(n, 0.0f);
    float *d_p = dput(p), *d_m = dput(m), *d_v = dput(v);
    for (t = 1; t <= 5; t++) {
        std::vector<float> gr = randn(n, 1.0);
        float *d_g = dput(gr);
        CHECK_INT_EQ(tk_adamw_update(p.data(), gr.data(), m.data(), v.data(), n, &cfg, t), TK_OK);
        CHECK_INT_EQ(tk_adamw_update_cuda(d_p, d_g, d_m, d_v, n, &cfg, t, NULL), TK_OK);
        dfree(d_g);
    }
    std::vector<float> g = dget(d_p, n);
    CHECK_ALL_CLOSE(g.data(), p.data(), (long)n, 1e-5, 1e-6);
    g = dget(d_v, n);
    CHECK_ALL_CLOSE(g.data(), v.data(), (long)n, 1e-5, 1e-7);
    dfree(d_p); dfree(d_m); dfree(d_v);
}

/* max over i of |g_i - ref_i| / (atol + rtol |ref_i|), times rtol: the measured relative
   error on the scale of rtol (CHECK_ALL_CLOSE passes when it is <= rtol) */
static double worst_rel(const std::vector<float> &g, const std::vector<float> &ref, double rtol, double atol)
{
    double w = 0.0;
    for (size_t i = 0; i < ref.size(); i++)
        w = fmax(w, fabs((double)g[i] - ref[i]) / (atol + rtol * fabs((double)ref[i])) * rtol);
    return w;
}

/* relu2 and silu, forward and backward (dinp starts nonzero: += is checked) */
static void test_relu2_silu(void)
{
    static const size_t sizes[] = {1, 31, 1000, 10007};
    double w[4] = {0, 0, 0, 0};
    int s, op;
    NEED_GPU();
    tt_seed(21);
    for (s = 0; s < 4; s++) {
        const size_t n = sizes[s];
        std::vector<float> x = randn(n, 3.0), dout = randn(n, 1.0), out = randn(n, 1.0), dx = randn(n, 1.0);
        x[0] = n > 1 ? 0.0f : x[0];
        if (n > 4) {
            x[1] = 40.0f; /* saturated tails */
            x[2] = -100.0f;
            x[3] = 1e-3f;
        }
        for (op = 0; op < 2; op++) {
            std::vector<float> o = out, d = dx;
            float *d_x = dput(x), *d_out = dput(out), *d_dout = dput(dout), *d_dx = dput(dx);
            if (op == 0) {
                CHECK_INT_EQ(tk_relu2_forward(o.data(), x.data(), n), TK_OK);
                CHECK_INT_EQ(tk_relu2_forward_cuda(d_out, d_x, n, NULL), TK_OK);
                CHECK_INT_EQ(tk_relu2_backward(d.data(), x.data(), dout.data(), n), TK_OK);
                CHECK_INT_EQ(tk_relu2_backward_cuda(d_dx, d_x, d_dout, n, NULL), TK_OK);
            } else {
                CHECK_INT_EQ(tk_silu_forward(o.data(), x.data(), n), TK_OK);
                CHECK_INT_EQ(tk_silu_forward_cuda(d_out, d_x, n, NULL), TK_OK);
                CHECK_INT_EQ(tk_silu_backward(d.data(), x.data(), dout.data(), n), TK_OK);
                CHECK_INT_EQ(tk_silu_backward_cuda(d_dx, d_x, d_dout, n, NULL), TK_OK);
            }
            std::vector<float> g = dget(d_out, n), gd = dget(d_dx, n);
            if (op == 0) CHECK_ALL_CLOSE(g.data(), o.data(), (long)n, 0.0, 0.0); /* the same products */
            else CHECK_ALL_CLOSE(g.data(), o.data(), (long)n, 1e-5, 1e-6);
            CHECK_ALL_CLOSE(gd.data(), d.data(), (long)n, 1e-5, 1e-6);
            w[2 * op] = fmax(w[2 * op], worst_rel(g, o, 1e-5, 1e-6));
            w[2 * op + 1] = fmax(w[2 * op + 1], worst_rel(gd, d, 1e-5, 1e-6));
            dfree(d_x); dfree(d_out); dfree(d_dout); dfree(d_dx);
        }
    }
    printf("    relu2 fwd %.2e bwd %.2e | silu fwd %.2e bwd %.2e (rtol 1e-5, atol 1e-6 scale)\n", w[0], w[1], w[2], w[3]);
}

/* gated relu2 at ragged shapes; the backward accumulates into a nonzero dinp */
static void test_relu2_gated(void)
{
    static const int shapes[][2] = {{1, 1}, {3, 7}, {33, 45}, {130, 257}, {7, 1000}};
    double wf = 0.0, wb = 0.0;
    int s;
    NEED_GPU();
    tt_seed(22);
    for (s = 0; s < 5; s++) {
        const int N = shapes[s][0], F = shapes[s][1];
        const size_t ni = (size_t)N * 2 * F, no = (size_t)N * F;
        std::vector<float> x = randn(ni, 1.5), dout = randn(no, 1.0), out = randn(no, 1.0), dx = randn(ni, 1.0);
        x[0] = 0.0f; /* the kink */
        float *d_x = dput(x), *d_out = dput(out), *d_dout = dput(dout), *d_dx = dput(dx);
        CHECK_INT_EQ(tk_relu2_gated_forward(out.data(), x.data(), N, F), TK_OK);
        CHECK_INT_EQ(tk_relu2_gated_forward_cuda(d_out, d_x, N, F, NULL), TK_OK);
        std::vector<float> g = dget(d_out, no);
        CHECK_ALL_CLOSE(g.data(), out.data(), (long)no, 0.0, 0.0); /* the same products */
        wf = fmax(wf, worst_rel(g, out, 1e-5, 1e-6));
        CHECK_INT_EQ(tk_relu2_gated_backward(dx.data(), x.data(), dout.data(), N, F), TK_OK);
        CHECK_INT_EQ(tk_relu2_gated_backward_cuda(d_dx, d_x, d_dout, N, F, NULL), TK_OK);
        g = dget(d_dx, ni);
        CHECK_ALL_CLOSE(g.data(), dx.data(), (long)ni, 1e-5, 1e-6);
        wb = fmax(wb, worst_rel(g, dx, 1e-5, 1e-6));
        dfree(d_x); dfree(d_out); dfree(d_dout); dfree(d_dx);
    }
    printf("    relu2_gated fwd %.2e bwd %.2e (rtol 1e-5, atol 1e-6 scale)\n", wf, wb);
}

/* rope forward and inverse: ragged T and D, B*H below and above the kernel's 16 head
   slices, two bases */
static void test_rope(void)
{
    static const int shapes[][4] = {{1, 1, 1, 2}, {2, 3, 17, 8}, {1, 2, 300, 16}, {3, 5, 33, 6}, {2, 12, 40, 64}};
    double w = 0.0;
    int s, inv;
    NEED_GPU();
    tt_seed(23);
    for (s = 0; s < 5; s++)
        for (inv = 0; inv < 2; inv++) {
            const int B = shapes[s][0], H = shapes[s][1], T = shapes[s][2], D = shapes[s][3];
            const size_t n = (size_t)B * H * T * D;
            const float base = s == 3 ? 500.0f : 10000.0f;
            std::vector<float> x = randn(n, 1.0);
            float *d_x = dput(x);
            CHECK_INT_EQ(tk_rope(x.data(), B, H, T, D, base, inv), TK_OK);
            CHECK_INT_EQ(tk_rope_cuda(d_x, B, H, T, D, base, inv, NULL), TK_OK);
            std::vector<float> g = dget(d_x, n);
            CHECK_ALL_CLOSE(g.data(), x.data(), (long)n, 1e-5, 1e-6);
            w = fmax(w, worst_rel(g, x, 1e-5, 1e-6));
            dfree(d_x);
        }
    printf("    rope %.2e (rtol 1e-5, atol 1e-6 scale)\n", w);
}

/* The in-place cross-entropy pair: V ragged and up to 5003, eps 0 and 0.1, a late row max
   (the online rescale) in odd rows and a hugely negative first logit; losses/ce start nonzero and may
   be NULL; a bad target is TK_ERANGE with nothing written. */
static void ce_inplace_case(int N, int V, float eps, double *wp, double *wl, double *wb)
{
    const size_t nv = (size_t)N * V;
    int i;
    std::vector<float> x = randn(nv, 3.0), losses = randn(N, 1.0), ce = randn(N, 1.0);
    std::vector<int> y(N);
    for (i = 0; i < N; i++) {
        y[i] = (int)(tt_uniform() * V) % V;
        /* a late max (rows of odd i) a little above the randn(3) data: the probs stay spread */
        if (i % 2) x[(size_t)i * V + (size_t)(V - 1 - i % V)] = 12.0f + 0.1f * (float)i;
    }
    if (V > 1) x[0] = -1e30f;
    std::vector<float> p = x, l = losses, c = ce;
    float *d_x = dput(x), *d_l = dput(losses), *d_c = dput(ce);
    int *d_y = dput(y);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace(p.data(), l.data(), c.data(), y.data(), N, V, eps), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(d_x, d_l, d_c, d_y, N, V, eps, NULL), TK_OK);
    std::vector<float> gp = dget(d_x, nv), gl = dget(d_l, N), gc = dget(d_c, N);
    CHECK_ALL_CLOSE(gp.data(), p.data(), (long)nv, 1e-5, 1e-7);
    CHECK_ALL_CLOSE(gl.data(), l.data(), (long)N, 1e-5, 1e-5);
    CHECK_ALL_CLOSE(gc.data(), c.data(), (long)N, 1e-5, 1e-5);
    *wp = fmax(*wp, worst_rel(gp, p, 1e-5, 1e-7));
    *wl = fmax(*wl, fmax(worst_rel(gl, l, 1e-5, 1e-5), worst_rel(gc, c, 1e-5, 1e-5)));
    /* losses and ce NULL: the same probs */
    {
        float *d_x2 = dput(x);
        CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(d_x2, NULL, NULL, d_y, N, V, eps, NULL), TK_OK);
        std::vector<float> g2 = dget(d_x2, nv);
        CHECK(memcmp(g2.data(), gp.data(), nv * sizeof(float)) == 0);
        dfree(d_x2);
    }
    /* backward from the CPU's probs (the backward alone), dloss 0.37 */
    {
        std::vector<float> d = p;
        float *d_p = dput(p);
        CHECK_INT_EQ(tk_crossentropy_backward_inplace(d.data(), y.data(), N, V, eps, 0.37f), TK_OK);
        CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda(d_p, d_y, N, V, eps, 0.37f, NULL), TK_OK);
        std::vector<float> g = dget(d_p, nv);
        CHECK_ALL_CLOSE(g.data(), d.data(), (long)nv, 1e-5, 1e-7);
        *wb = fmax(*wb, worst_rel(g, d, 1e-5, 1e-7));
        /* a bad target (too large, then negative): TK_ERANGE, nothing written */
        if (N > 1) {
            std::vector<int> yb = y;
            std::vector<float> before = dget(d_p, nv);
            yb[N - 1] = V;
            int *d_yb = dput(yb);
            float *d_x3 = dput(x), *d_l3 = dput(losses);
            CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(d_x3, d_l3, NULL, d_yb, N, V, eps, NULL), TK_ERANGE);
            CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda(d_p, d_yb, N, V, eps, 0.37f, NULL), TK_ERANGE);
            yb[N - 1] = y[N - 1];
            yb[0] = -1;
            CHECK_INT_EQ(cudaMemcpy(d_yb, yb.data(), (size_t)N * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
            CHECK_INT_EQ(tk_crossentropy_forward_inplace(d_x3, d_l3, NULL, d_yb, N, V, eps), TK_ERANGE); /* routed */
            CHECK_INT_EQ(tk_crossentropy_backward_inplace(d_p, d_yb, N, V, eps, 0.37f), TK_ERANGE);
            std::vector<float> gx = dget(d_x3, nv), gl3 = dget(d_l3, N), gpb = dget(d_p, nv);
            CHECK(memcmp(gx.data(), x.data(), nv * sizeof(float)) == 0);
            CHECK(memcmp(gl3.data(), losses.data(), (size_t)N * sizeof(float)) == 0);
            CHECK(memcmp(gpb.data(), before.data(), nv * sizeof(float)) == 0);
            dfree(d_yb); dfree(d_x3); dfree(d_l3);
        }
        dfree(d_p);
    }
    dfree(d_x); dfree(d_l); dfree(d_c); dfree(d_y);
}

/* the four deferred-check calls of test_ids_deferred on one set of buffers, then that none
   of them waited, copied back or allocated */
static void ids_deferred_calls(float *o, float *w, float *x, float *l, const int *ids, const float *wte,
                               const float *wpe, const float *dout, int B, int T, int C, int V, float eps,
                               float dloss, int *st)
{
    const int N = B * T;
#ifdef ATTNKIT_CUDA_SIM
    ak_sim_counts_reset();
#endif
    CHECK_INT_EQ(tk_embedding_forward_cuda_ex(o, ids, wte, wpe, B, T, C, V, st, NULL), TK_OK);
    CHECK_INT_EQ(tk_embedding_backward_cuda_ex(w, NULL, dout, ids, B, T, C, V, st, NULL), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda_ex(x, l, NULL, ids, N, V, eps, st, NULL), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda_ex(x, ids, N, V, eps, dloss, st, NULL), TK_OK);
#ifdef ATTNKIT_CUDA_SIM
    {
        ak_sim_counts k = ak_sim_counts_get(); /* no host wait, no copy back, nothing allocated */
        CHECK(k.syncs == 0 && k.sync_calls == 0 && k.d2h == 0 && k.allocs == 0);
    }
#endif
}

/* The deferred id checks (tk_embedding_*_cuda_ex, tk_crossentropy_*_inplace_cuda_ex with a
   device status): good ids give the plain functions' bytes and leave the status 0 with no
   host wait; a bad id (too large, negative) sets it to 1, still without a wait, and gives a
   zero embedding row (+ wpe), no dwte term, a NaN loss and no target term in that row only;
   the other rows are the plain results bit for bit. NULL status: the plain function. */
static void test_ids_deferred(void)
{
    const int B = 2, T = 7, C = 12, V = 29, N = B * T;
    const float eps = 0.1f, dloss = 0.37f;
    int i, c, hs = -1;
    NEED_GPU();
    tt_seed(31);
    std::vector<int> ids((size_t)N);
    for (i = 0; i < N; i++) ids[i] = (int)(tt_uniform() * V) % V;
    std::vector<float> wte = randn((size_t)V * C, 1.0), wpe = randn((size_t)T * C, 1.0), dout = randn((size_t)N * C, 1.0);
    std::vector<float> dwte0 = randn((size_t)V * C, 1.0), logits = randn((size_t)N * V, 2.0), zero((size_t)N * C, 0.0f);
    int *d_ids = dput(ids), *d_st = NULL;
    float *d_wte = dput(wte), *d_wpe = dput(wpe), *d_dout = dput(dout);
    CHECK_INT_EQ(tk_device_alloc((void **)&d_st, sizeof(int)), TK_OK);
    /* plain results on good ids */
    float *d_o1 = dput(zero), *d_o2 = dput(zero), *d_w1 = dput(dwte0), *d_w2 = dput(dwte0);
    float *d_x1 = dput(logits), *d_x2 = dput(logits), *d_l1 = dput(std::vector<float>((size_t)N, 0.0f)),
          *d_l2 = dput(std::vector<float>((size_t)N, 0.0f));
    CHECK_INT_EQ(tk_embedding_forward_cuda(d_o1, d_ids, d_wte, d_wpe, B, T, C, V, NULL), TK_OK);
    CHECK_INT_EQ(tk_embedding_backward_cuda(d_w1, NULL, d_dout, d_ids, B, T, C, V, NULL), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(d_x1, d_l1, NULL, d_ids, N, V, eps, NULL), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda(d_x1, d_ids, N, V, eps, dloss, NULL), TK_OK);
    CHECK_INT_EQ(tk_fill_zero(d_st, sizeof(int)), TK_OK);
    ids_deferred_calls(d_o2, d_w2, d_x2, d_l2, d_ids, d_wte, d_wpe, d_dout, B, T, C, V, eps, dloss, d_st);
    CHECK_INT_EQ(tk_copy(&hs, d_st, sizeof(int)), TK_OK);
    CHECK_INT_EQ(hs, 0);
    {
        std::vector<float> a = dget(d_o1, (size_t)N * C), b = dget(d_o2, (size_t)N * C);
        CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        a = dget(d_w1, (size_t)V * C);
        b = dget(d_w2, (size_t)V * C);
        CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        a = dget(d_x1, (size_t)N * V);
        b = dget(d_x2, (size_t)N * V);
        CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
        a = dget(d_l1, (size_t)N);
        b = dget(d_l2, (size_t)N);
        CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
    /* a bad id (too large at row 3, negative at row 9) */
    for (int bad = 0; bad < 2; bad++) {
        const int r = bad ? 9 : 3;
        std::vector<int> ib = ids;
        ib[r] = bad ? -2 : V;
        int *d_ib = dput(ib);
        float *d_o3 = dput(zero), *d_w3 = dput(dwte0), *d_x3 = dput(logits), *d_l3 = dput(std::vector<float>((size_t)N, 0.0f));
        CHECK_INT_EQ(tk_fill_zero(d_st, sizeof(int)), TK_OK);
        ids_deferred_calls(d_o3, d_w3, d_x3, d_l3, d_ib, d_wte, d_wpe, d_dout, B, T, C, V, eps, dloss, d_st);
        CHECK_INT_EQ(tk_copy(&hs, d_st, sizeof(int)), TK_OK);
        CHECK_INT_EQ(hs, 1);
        /* embedding: row r is wpe's row alone, the others as the plain forward */
        std::vector<float> a = dget(d_o1, (size_t)N * C), b = dget(d_o3, (size_t)N * C);
        for (i = 0; i < N; i++)
            for (c = 0; c < C; c++) {
                const size_t k = (size_t)i * C + c;
                if (i == r) CHECK(b[k] == 0.0f + wpe[(size_t)(i % T) * C + c]);
                else CHECK(b[k] == a[k]);
            }
        /* dwte: the plain backward with row r's gradient left out (its dout row zeroed, its id
           any good one: adding +0 changes nothing) */
        {
            std::vector<int> ig = ids;
            std::vector<float> dz = dout;
            for (c = 0; c < C; c++) dz[(size_t)r * C + c] = 0.0f;
            int *d_ig = dput(ig);
            float *d_dz = dput(dz), *d_w4 = dput(dwte0);
            CHECK_INT_EQ(tk_embedding_backward_cuda(d_w4, NULL, d_dz, d_ig, B, T, C, V, NULL), TK_OK);
            a = dget(d_w4, (size_t)V * C);
            b = dget(d_w3, (size_t)V * C);
            CHECK(memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
            dfree(d_ig); dfree(d_dz); dfree(d_w4);
        }
        /* CE: row r's loss NaN, its dlogits dloss (p - eps / V) with no target term; every
           other row the plain pair's bytes */
        {
            std::vector<float> l1 = dget(d_l1, (size_t)N), l3 = dget(d_l3, (size_t)N);
            std::vector<float> x1 = dget(d_x1, (size_t)N * V), x3 = dget(d_x3, (size_t)N * V);
            int ok = 1;
            for (i = 0; i < N; i++) {
                if (i == r) {
                    CHECK(l3[i] != l3[i]);
                    continue;
                }
                ok &= memcmp(&l1[i], &l3[i], sizeof(float)) == 0;
                ok &= memcmp(&x1[(size_t)i * V], &x3[(size_t)i * V], (size_t)V * sizeof(float)) == 0;
            }
            CHECK(ok);
            /* row r's probabilities as the plain forward writes them (the softmax does not
               read the target), then the backward without the target term */
            {
                std::vector<int> ig = ids;
                ig[r] = 0;
                int *d_ig = dput(ig);
                float *d_x5 = dput(logits);
                CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(d_x5, NULL, NULL, d_ig, N, V, eps, NULL), TK_OK);
                std::vector<float> p5 = dget(d_x5, (size_t)N * V);
                const float u = eps / (float)V;
                for (c = 0; c < V; c++) {
                    const size_t k = (size_t)r * V + c;
                    const float want = dloss * (p5[k] - u);
                    ok &= memcmp(&want, &x3[k], sizeof(float)) == 0;
                }
                CHECK(ok);
                dfree(d_ig); dfree(d_x5);
            }
        }
        dfree(d_ib); dfree(d_o3); dfree(d_w3); dfree(d_x3); dfree(d_l3);
    }
    /* a status that is not device memory: TK_EINVAL before anything runs */
    {
        int host_st = 0;
        CHECK_INT_EQ(tk_embedding_forward_cuda_ex(d_o2, d_ids, d_wte, d_wpe, B, T, C, V, &host_st, NULL), TK_EINVAL);
        CHECK_INT_EQ(tk_embedding_backward_cuda_ex(d_w2, NULL, d_dout, d_ids, B, T, C, V, &host_st, NULL), TK_EINVAL);
        CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda_ex(d_x2, d_l2, NULL, d_ids, N, V, eps, &host_st, NULL), TK_EINVAL);
        CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda_ex(d_x2, d_ids, N, V, eps, dloss, &host_st, NULL), TK_EINVAL);
        CHECK_INT_EQ(host_st, 0);
    }
    tk_device_free(d_st);
    dfree(d_ids); dfree(d_wte); dfree(d_wpe); dfree(d_dout); dfree(d_o1); dfree(d_o2); dfree(d_w1); dfree(d_w2);
    dfree(d_x1); dfree(d_x2); dfree(d_l1); dfree(d_l2);
}

static void test_ce_inplace(void)
{
    static const int shapes[][2] = {{1, 1}, {5, 17}, {3, 256}, {7, 1000}, {19, 5003}};
    double wp = 0.0, wl = 0.0, wb = 0.0;
    int s;
    NEED_GPU();
    tt_seed(24);
    for (s = 0; s < 5; s++) {
        ce_inplace_case(shapes[s][0], shapes[s][1], 0.0f, &wp, &wl, &wb);
        ce_inplace_case(shapes[s][0], shapes[s][1], 0.1f, &wp, &wl, &wb);
    }
    printf("    ce_inplace probs %.2e (atol 1e-7 scale) losses/ce %.2e (atol 1e-5 scale) bwd %.2e (atol 1e-7 scale)\n",
           wp, wl, wb);
}

/* The plain entry points route device buffers of the new twins: the same bits as the
   _cuda call; a host buffer among device ones: TK_EINVAL, nothing written */
static void test_plain_routing_ops(void)
{
    const int N = 5, F = 19, B = 2, H = 3, T = 7, D = 10, V = 37;
    const size_t n = (size_t)N * F;
    int i;
    NEED_GPU();
    tt_seed(25);
    std::vector<float> x = randn(2 * n, 2.0), dout = randn(n, 1.0), acc = randn(2 * n, 1.0), r = randn((size_t)B * H * T * D, 1.0);
    std::vector<float> lg = randn((size_t)N * V, 2.0), zl(N, 1.0f);
    std::vector<int> y(N);
    for (i = 0; i < N; i++) y[i] = (i * 11) % V;
    float *d_x = dput(x), *d_dout = dput(dout), *a1 = dput(acc), *a2 = dput(acc);
    float *r1 = dput(r), *r2 = dput(r), *l1 = dput(lg), *l2 = dput(lg), *s1 = dput(zl), *s2 = dput(zl);
    int *d_y = dput(y);
#define SAME(a, bb, cnt) CHECK(memcmp(dget(a, cnt).data(), dget(bb, cnt).data(), (cnt) * sizeof(float)) == 0)
    CHECK_INT_EQ(tk_relu2_forward(a1, d_x, n), TK_OK);
    CHECK_INT_EQ(tk_relu2_forward_cuda(a2, d_x, n, NULL), TK_OK);
    SAME(a1, a2, n);
    CHECK_INT_EQ(tk_relu2_backward(a1, d_x, d_dout, n), TK_OK);
    CHECK_INT_EQ(tk_relu2_backward_cuda(a2, d_x, d_dout, n, NULL), TK_OK);
    SAME(a1, a2, n);
    CHECK_INT_EQ(tk_silu_forward(a1, d_x, n), TK_OK);
    CHECK_INT_EQ(tk_silu_forward_cuda(a2, d_x, n, NULL), TK_OK);
    SAME(a1, a2, n);
    CHECK_INT_EQ(tk_silu_backward(a1, d_x, d_dout, n), TK_OK);
    CHECK_INT_EQ(tk_silu_backward_cuda(a2, d_x, d_dout, n, NULL), TK_OK);
    SAME(a1, a2, n);
    CHECK_INT_EQ(tk_relu2_gated_forward(a1, d_x, N, F), TK_OK);
    CHECK_INT_EQ(tk_relu2_gated_forward_cuda(a2, d_x, N, F, NULL), TK_OK);
    SAME(a1, a2, n);
    CHECK_INT_EQ(tk_relu2_gated_backward(a1, d_x, d_dout, N, F), TK_OK);
    CHECK_INT_EQ(tk_relu2_gated_backward_cuda(a2, d_x, d_dout, N, F, NULL), TK_OK);
    SAME(a1, a2, 2 * n);
    CHECK_INT_EQ(tk_rope(r1, B, H, T, D, 10000.0f, 0), TK_OK);
    CHECK_INT_EQ(tk_rope_cuda(r2, B, H, T, D, 10000.0f, 0, NULL), TK_OK);
    SAME(r1, r2, r.size());
    CHECK_INT_EQ(tk_rope(r1, B, H, T, D, 10000.0f, 1), TK_OK);
    CHECK_INT_EQ(tk_rope_cuda(r2, B, H, T, D, 10000.0f, 1, NULL), TK_OK);
    SAME(r1, r2, r.size());
    CHECK_INT_EQ(tk_crossentropy_forward_inplace(l1, s1, NULL, d_y, N, V, 0.1f), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(l2, s2, NULL, d_y, N, V, 0.1f, NULL), TK_OK);
    SAME(l1, l2, lg.size());
    SAME(s1, s2, zl.size());
    CHECK_INT_EQ(tk_crossentropy_backward_inplace(l1, d_y, N, V, 0.1f, 0.5f), TK_OK);
    CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda(l2, d_y, N, V, 0.1f, 0.5f, NULL), TK_OK);
    SAME(l1, l2, lg.size());
    /* device and host buffers mixed: refused before any launch */
    {
        std::vector<float> l1_before = dget(l1, lg.size()), a1_before = dget(a1, 2 * n);
        std::vector<float> hl(N, 3.0f);
        CHECK_INT_EQ(tk_relu2_forward(a1, x.data(), n), TK_EINVAL);
        CHECK_INT_EQ(tk_relu2_backward(a1, d_x, dout.data(), n), TK_EINVAL);
        CHECK_INT_EQ(tk_silu_forward(a1, x.data(), n), TK_EINVAL);
        CHECK_INT_EQ(tk_silu_backward(a1, x.data(), d_dout, n), TK_EINVAL);
        CHECK_INT_EQ(tk_relu2_gated_forward(a1, x.data(), N, F), TK_EINVAL);
        CHECK_INT_EQ(tk_relu2_gated_backward(a1, d_x, dout.data(), N, F), TK_EINVAL);
        CHECK_INT_EQ(tk_crossentropy_forward_inplace(l1, hl.data(), NULL, d_y, N, V, 0.1f), TK_EINVAL);
        CHECK_INT_EQ(tk_crossentropy_forward_inplace(l1, NULL, hl.data(), d_y, N, V, 0.1f), TK_EINVAL);
        CHECK_INT_EQ(tk_crossentropy_forward_inplace(l1, NULL, NULL, y.data(), N, V, 0.1f), TK_EINVAL);
        CHECK_INT_EQ(tk_crossentropy_backward_inplace(l1, y.data(), N, V, 0.1f, 0.5f), TK_EINVAL);
        CHECK(memcmp(dget(a1, 2 * n).data(), a1_before.data(), 2 * n * sizeof(float)) == 0);
        CHECK(memcmp(dget(l1, lg.size()).data(), l1_before.data(), lg.size() * sizeof(float)) == 0);
        for (i = 0; i < N; i++) CHECK(hl[(size_t)i] == 3.0f);
    }
#undef SAME
    dfree(d_x); dfree(d_dout); dfree(a1); dfree(a2); dfree(r1); dfree(r2); dfree(l1); dfree(l2);
    dfree(s1); dfree(s2); dfree(d_y);
}

/* validation of the new twins happens before any device work: runs without a GPU */
static void test_cuda_bad_input_ops(void)
{
    float x = 0.0f;
    int t = 0;
    CHECK_INT_EQ(tk_relu2_forward_cuda(&x, NULL, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_relu2_backward_cuda(&x, &x, &x, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_silu_forward_cuda(NULL, &x, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_silu_backward_cuda(&x, &x, NULL, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_relu2_gated_forward_cuda(&x, &x, 0, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_relu2_gated_forward_cuda(&x, &x, 1, -2, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_relu2_gated_backward_cuda(&x, NULL, &x, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_relu2_gated_backward_cuda(&x, &x, &x, -1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rope_cuda(NULL, 1, 1, 1, 2, 10000.0f, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rope_cuda(&x, 1, 1, 1, 3, 10000.0f, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rope_cuda(&x, 1, 0, 1, 2, 10000.0f, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rope_cuda(&x, 1, 1, 1, 2, 1.0f, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rope_cuda(&x, 1, 1, 1, 2, NAN, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rope_cuda(&x, 1, 1, 1, 2, 10000.0f, 2, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(NULL, NULL, NULL, &t, 1, 1, 0.0f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(&x, NULL, NULL, NULL, 1, 1, 0.0f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(&x, NULL, NULL, &t, 0, 1, 0.0f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(&x, NULL, NULL, &t, 1, 1, 1.0f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_forward_inplace_cuda(&x, NULL, NULL, &t, 1, 1, NAN, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda(&x, &t, 1, 0, 0.0f, 1.0f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda(&x, &t, 1, 1, -0.5f, 1.0f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda(&x, &t, 1, 1, 0.0f, INFINITY, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_backward_inplace_cuda(&x, NULL, 1, 1, 0.0f, 1.0f, NULL), TK_EINVAL);
}

/* one fused-attention case against tk_attention_forward/backward:
   bias_mode 0 none, 1 shared (T,T), 2 per head (H,T,T); window > 0: -inf beyond it */
static void attn_case(int B, int H, int T, int D, int bias_mode, int use_temp, int window, unsigned seed)
{
    const size_t n = (size_t)B * H * T * D, TT = (size_t)T * T;
    const size_t nb = bias_mode == 0 ? 0 : (bias_mode == 1 ? TT : (size_t)H * TT);
    int i, j, h;
    tt_seed(seed);
    std::vector<float> q = randn(n, 1.0), k = randn(n, 1.0), v = randn(n, 1.0), dout = randn(n, 1.0);
    std::vector<float> bias = randn(nb ? nb : 1, 0.7), temp(H);
    for (h = 0; h < H; h++) temp[h] = 0.6f + 0.3f * (float)h;
    if (window > 0 && nb)
        for (h = 0; h < (bias_mode == 2 ? H : 1); h++)
            for (i = 0; i < T; i++)
                for (j = 0; j < i - window + 1; j++) bias[(size_t)h * TT + (size_t)i * T + j] = -INFINITY;
    std::vector<float> out(n), probs((size_t)B * H * TT), lse((size_t)B * H * T);
    std::vector<float> dq = randn(n, 1.0), dk = randn(n, 1.0), dv = randn(n, 1.0);
    std::vector<float> dbias = randn(nb ? nb : 1, 1.0), dtemp = randn(H, 1.0);
    float *d_q = dput(q), *d_k = dput(k), *d_v = dput(v), *d_dout = dput(dout), *d_out = dput(out), *d_lse = dput(lse);
    float *d_bias = nb ? dput(bias) : NULL, *d_temp = use_temp ? dput(temp) : NULL;
    float *d_dq = dput(dq), *d_dk = dput(dk), *d_dv = dput(dv), *d_dbias = nb ? dput(dbias) : NULL, *d_dtemp = dput(dtemp);
    const float *hb = nb ? bias.data() : NULL, *ht = use_temp ? temp.data() : NULL;
    CHECK_INT_EQ(tk_attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), hb, bias_mode == 2, ht, B, H, T, D), TK_OK);
    CHECK_INT_EQ(tk_attention_forward_cuda(d_out, d_lse, d_q, d_k, d_v, d_bias, bias_mode == 2, d_temp, B, H, T, D, NULL), TK_OK);
    std::vector<float> g = dget(d_out, n);
    {
        const double atol_ = 1e-6 * maxabs(out); /* the scale, once (the macro evaluates per element) */
        CHECK_ALL_CLOSE(g.data(), out.data(), (long)n, 1e-5, atol_);
    }
    CHECK_INT_EQ(tk_attention_backward(dq.data(), dk.data(), dv.data(), nb ? dbias.data() : NULL, use_temp ? dtemp.data() : NULL,
                                       dout.data(), probs.data(), q.data(), k.data(), v.data(), bias_mode == 2, ht, B, H, T, D), TK_OK);
    CHECK_INT_EQ(tk_attention_backward_cuda(d_dq, d_dk, d_dv, d_dbias, use_temp ? d_dtemp : NULL, d_dout, d_out, d_lse, d_q, d_k, d_v,
                                            d_bias, bias_mode == 2, d_temp, B, H, T, D, NULL), TK_OK);
    g = dget(d_dq, n);
    {
        const double atol_ = 1e-5 * maxabs(dq); /* the scale, once (the macro evaluates per element) */
        CHECK_ALL_CLOSE(g.data(), dq.data(), (long)n, 1e-4, atol_);
    }
    g = dget(d_dk, n);
    {
        const double atol_ = 1e-5 * maxabs(dk); /* the scale, once (the macro evaluates per element) */
        CHECK_ALL_CLOSE(g.data(), dk.data(), (long)n, 1e-4, atol_);
    }
    g = dget(d_dv, n);
    {
        const double atol_ = 1e-5 * maxabs(dv); /* the scale, once (the macro evaluates per element) */
        CHECK_ALL_CLOSE(g.data(), dv.data(), (long)n, 1e-4, atol_);
    }
    if (nb) {
        g = dget(d_dbias, nb);
        {
            const double atol_ = 1e-5 * maxabs(dbias); /* the scale, once (the macro evaluates per element) */
            CHECK_ALL_CLOSE(g.data(), dbias.data(), (long)nb, 1e-4, atol_);
        }
    }
    if (use_temp) {
        g = dget(d_dtemp, (size_t)H);
        {
            const double atol_ = 1e-5 * maxabs(dtemp); /* the scale, once (the macro evaluates per element) */
            CHECK_ALL_CLOSE(g.data(), dtemp.data(), (long)H, 1e-4, atol_);
        }
    }
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_dout); dfree(d_out); dfree(d_lse); dfree(d_dq); dfree(d_dk); dfree(d_dv);
    dfree(d_dtemp);
    if (d_bias) dfree(d_bias);
    if (d_temp) dfree(d_temp);
    if (d_dbias) dfree(d_dbias);
}

/* Sizes: every ragged tile edge (T 1, 17, 33, 100), D from 1 to the maximum 128, heads 1..8,
   no bias / shared / per-head bias, sliding windows through -inf entries, per-head
   temperatures; one long case (T 768) kept to one head so the simulation stays quick. */
static void test_attention(void)
{
    NEED_GPU();
    attn_case(1, 1, 1, 8, 0, 0, 0, 11);
    attn_case(2, 3, 17, 16, 1, 1, 0, 12);
    attn_case(1, 2, 33, 64, 2, 1, 0, 13);
    attn_case(2, 2, 100, 32, 1, 0, 9, 14);
    attn_case(1, 8, 64, 5, 0, 1, 0, 15);
    attn_case(1, 2, 70, 128, 2, 0, 20, 16);
    attn_case(1, 1, 768, 16, 1, 1, 0, 17);
}

/* max |g - ref| / max |ref - init| over n: the error relative to the scale of what the call
   wrote (or, for the accumulating backward, added) */
static double rel_maxnorm(const float *g, const float *ref, const float *init, size_t n)
{
    double e = 0.0, sc = 0.0;
    size_t i;
    for (i = 0; i < n; i++) {
        e = fmax(e, fabs((double)g[i] - ref[i]));
        sc = fmax(sc, fabs((double)ref[i] - (init ? init[i] : 0.0f)));
    }
    return sc > 0.0 ? e / sc : e;
}

/* The scale of the temperature gradient's terms, per head: alpha_h / temp_h * sum over b and
   visible (i, j) of |ds_ij s_ij| (s = q_i . k_j, ds = p_ij (dout_i . v_j - dout_i . out_i)),
   from the CPU's probabilities. dtemp is a sum of these terms that largely cancels (each
   row's sum is a covariance under p), so with bf16 inputs its error relative to its own
   value is ill-conditioned (measured up to 0.33 for T 200 without a window, while the CPU
   run on the same bf16-rounded inputs agrees to 1.4e-3): like the GEMM's, its tolerance is
   relative to the sum of the magnitudes of what it adds. */
static std::vector<double> attn_dtemp_terms(const std::vector<float> &q, const std::vector<float> &k,
                                            const std::vector<float> &v, const std::vector<float> &dout,
                                            const std::vector<float> &out, const std::vector<float> &probs,
                                            const std::vector<float> &temp, int B, int H, int T, int D)
{
    std::vector<double> sc((size_t)H, 0.0);
    int b, h, i, j, d;
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++) {
            const size_t o = ((size_t)b * H + h) * T * D;
            const double alpha = 1.0 / (sqrt((double)D) * temp[h]);
            for (i = 0; i < T; i++) {
                double Di = 0.0;
                for (d = 0; d < D; d++) Di += (double)dout[o + (size_t)i * D + d] * out[o + (size_t)i * D + d];
                for (j = 0; j <= i; j++) {
                    const double p = probs[(((size_t)b * H + h) * T + i) * T + j];
                    double su = 0.0, dp = 0.0;
                    for (d = 0; d < D; d++) {
                        su += (double)q[o + (size_t)i * D + d] * k[o + (size_t)j * D + d];
                        dp += (double)dout[o + (size_t)i * D + d] * v[o + (size_t)j * D + d];
                    }
                    sc[h] += alpha / temp[h] * fabs(p * (dp - Di) * su);
                }
            }
        }
    return sc;
}

/* one case of tk_attention_*_cuda_ex against the CPU: math TK_MATH_*, Hkv kv heads. The CPU
   runs on K/V repeated per query head (kv head h / (H/Hkv)); its dk/dv are summed over each
   group on the host. fp32: the same tolerances as attn_case. tf32/bf16: out, dq, dk, dv
   and dbias within 2e-2 in the max-norm relative to the scale of what the call wrote or
   added (max |gpu - cpu| <= 2e-2 max |cpu - initial|), dtemp within 2e-2 of the sum of
   its terms' magnitudes per head (attn_dtemp_terms), and out and dq differ from the CPU by
   more than a floor (the inputs really were rounded). */
static void attn_case_ex(int B, int H, int Hkv, int T, int D, int bias_mode, int use_temp, int window, int math,
                         unsigned seed)
{
    const size_t n = (size_t)B * H * T * D, nkv = (size_t)B * Hkv * T * D, TT = (size_t)T * T;
    const size_t nb = bias_mode == 0 ? 0 : (bias_mode == 1 ? TT : (size_t)H * TT);
    const int G = H / Hkv;
    const char *mname = math == TK_MATH_FP32 ? "fp32" : (math == TK_MATH_TF32 ? "tf32" : "bf16");
    int i, j, h, b;
    size_t e;
    tk_attention_cuda_config cfg = tk_attention_cuda_config_default();
    cfg.math = math;
    cfg.kv_heads = Hkv;
    tt_seed(seed);
    std::vector<float> q = randn(n, 1.0), k = randn(nkv, 1.0), v = randn(nkv, 1.0), dout = randn(n, 1.0);
    std::vector<float> bias = randn(nb ? nb : 1, 0.7), temp(H);
    for (h = 0; h < H; h++) temp[h] = 0.6f + 0.3f * (float)h;
    if (window > 0 && nb)
        for (h = 0; h < (bias_mode == 2 ? H : 1); h++)
            for (i = 0; i < T; i++)
                for (j = 0; j < i - window + 1; j++) bias[(size_t)h * TT + (size_t)i * T + j] = -INFINITY;
    std::vector<float> kr(n), vr(n); /* K, V repeated per query head, for the CPU */
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (e = 0; e < (size_t)T * D; e++) {
                kr[((size_t)b * H + h) * T * D + e] = k[((size_t)b * Hkv + h / G) * T * D + e];
                vr[((size_t)b * H + h) * T * D + e] = v[((size_t)b * Hkv + h / G) * T * D + e];
            }
    std::vector<float> out(n), probs((size_t)B * H * TT), lse((size_t)B * H * T);
    std::vector<float> dq = randn(n, 1.0), dk = randn(nkv, 1.0), dv = randn(nkv, 1.0);
    std::vector<float> dbias = randn(nb ? nb : 1, 1.0), dtemp = randn(H, 1.0);
    const std::vector<float> dq0 = dq, dk0 = dk, dv0 = dv, dbias0 = dbias, dtemp0 = dtemp;
    std::vector<float> dkr(n, 0.0f), dvr(n, 0.0f);
    float *d_q = dput(q), *d_k = dput(k), *d_v = dput(v), *d_dout = dput(dout), *d_out = dput(out), *d_lse = dput(lse);
    float *d_bias = nb ? dput(bias) : NULL, *d_temp = use_temp ? dput(temp) : NULL;
    float *d_dq = dput(dq), *d_dk = dput(dk), *d_dv = dput(dv), *d_dbias = nb ? dput(dbias) : NULL, *d_dtemp = dput(dtemp);
    const float *hb = nb ? bias.data() : NULL, *ht = use_temp ? temp.data() : NULL;
    CHECK_INT_EQ(tk_attention_forward(out.data(), probs.data(), q.data(), kr.data(), vr.data(), hb, bias_mode == 2, ht, B, H, T, D), TK_OK);
    CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_out, d_lse, d_q, d_k, d_v, d_bias, bias_mode == 2, d_temp, B, H, T, D, &cfg, NULL), TK_OK);
    CHECK_INT_EQ(tk_attention_backward(dq.data(), dkr.data(), dvr.data(), nb ? dbias.data() : NULL, use_temp ? dtemp.data() : NULL,
                                       dout.data(), probs.data(), q.data(), kr.data(), vr.data(), bias_mode == 2, ht, B, H, T, D), TK_OK);
    for (b = 0; b < B; b++) /* the group's sum, in head order */
        for (h = 0; h < H; h++)
            for (e = 0; e < (size_t)T * D; e++) {
                dk[((size_t)b * Hkv + h / G) * T * D + e] += dkr[((size_t)b * H + h) * T * D + e];
                dv[((size_t)b * Hkv + h / G) * T * D + e] += dvr[((size_t)b * H + h) * T * D + e];
            }
    CHECK_INT_EQ(tk_attention_backward_cuda_ex(d_dq, d_dk, d_dv, d_dbias, use_temp ? d_dtemp : NULL, d_dout, d_out, d_lse, d_q, d_k,
                                               d_v, d_bias, bias_mode == 2, d_temp, B, H, T, D, &cfg, NULL), TK_OK);
    {
        std::vector<float> g_out = dget(d_out, n), g_dq = dget(d_dq, n), g_dk = dget(d_dk, nkv), g_dv = dget(d_dv, nkv);
        std::vector<float> g_db = nb ? dget(d_dbias, nb) : std::vector<float>(), g_dt = dget(d_dtemp, (size_t)H);
        double eo = rel_maxnorm(g_out.data(), out.data(), NULL, n), eq = rel_maxnorm(g_dq.data(), dq.data(), dq0.data(), n);
        double ek = rel_maxnorm(g_dk.data(), dk.data(), dk0.data(), nkv), ev = rel_maxnorm(g_dv.data(), dv.data(), dv0.data(), nkv);
        double eb = nb ? rel_maxnorm(g_db.data(), dbias.data(), dbias0.data(), nb) : 0.0;
        double et = use_temp ? rel_maxnorm(g_dt.data(), dtemp.data(), dtemp0.data(), (size_t)H) : 0.0, et_terms = 0.0;
        if (use_temp) { /* dtemp against the scale of its terms (see attn_dtemp_terms) */
            std::vector<double> sc = attn_dtemp_terms(q, kr, vr, dout, out, probs, temp, B, H, T, D);
            for (h = 0; h < H; h++) et_terms = fmax(et_terms, fabs((double)g_dt[h] - dtemp[h]) / sc[h]);
        }
        printf("    attn %s B%d H%d Hkv%d T%d D%d bias%d temp%d win%d: out %.2e dq %.2e dk %.2e dv %.2e dbias %.2e "
               "dtemp %.2e (of its terms %.2e)\n", mname, B, H, Hkv, T, D, bias_mode, use_temp, window, eo, eq, ek, ev, eb, et, et_terms);
        if (math == TK_MATH_FP32) {
            const double ao = 1e-6 * maxabs(out), aq = 1e-5 * maxabs(dq), ak = 1e-5 * maxabs(dk), av = 1e-5 * maxabs(dv);
            CHECK_ALL_CLOSE(g_out.data(), out.data(), (long)n, 1e-5, ao);
            CHECK_ALL_CLOSE(g_dq.data(), dq.data(), (long)n, 1e-4, aq);
            CHECK_ALL_CLOSE(g_dk.data(), dk.data(), (long)nkv, 1e-4, ak);
            CHECK_ALL_CLOSE(g_dv.data(), dv.data(), (long)nkv, 1e-4, av);
            if (nb) {
                const double ab = 1e-5 * maxabs(dbias);
                CHECK_ALL_CLOSE(g_db.data(), dbias.data(), (long)nb, 1e-4, ab);
            }
            if (use_temp) {
                const double at = 1e-5 * maxabs(dtemp);
                CHECK_ALL_CLOSE(g_dt.data(), dtemp.data(), (long)H, 1e-4, at);
            }
        } else {
            const double floor_ = math == TK_MATH_BF16 ? 1e-4 : 1e-5; /* fp32 path: ~4e-7 */
            CHECK(eo <= 2e-2);
            CHECK(eq <= 2e-2);
            CHECK(ek <= 2e-2);
            CHECK(ev <= 2e-2);
            CHECK(eb <= 2e-2);
            CHECK(et_terms <= 2e-2);
            if (T > 1) { /* rounding shows (T 1: out is v rounded, which it checks anyway) */
                CHECK(eo > floor_);
                CHECK(eq > floor_);
            }
        }
    }
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_dout); dfree(d_out); dfree(d_lse); dfree(d_dq); dfree(d_dk); dfree(d_dv);
    dfree(d_dtemp);
    if (d_bias) dfree(d_bias);
    if (d_temp) dfree(d_temp);
    if (d_dbias) dfree(d_dbias);
}

/* GQA on the fp32 path: groups of 2, 4 and 8 (one kv head), every bias mode, windows, D not
   a multiple of 16 */
static void test_attention_gqa(void)
{
    NEED_GPU();
    attn_case_ex(2, 4, 2, 33, 16, 1, 1, 0, TK_MATH_FP32, 21);
    attn_case_ex(1, 8, 2, 40, 8, 2, 1, 7, TK_MATH_FP32, 22);
    attn_case_ex(1, 4, 1, 17, 5, 0, 0, 0, TK_MATH_FP32, 23);
}

/* tensor-core math (WMMA): T 1, 17 (one ragged tile), 100 (two tiles, ragged), 128 (two
   full tiles), 200 (four, bf16 only), D 16..128, heads 1..8, GQA 1/2/4, no / shared /
   per-head bias, windows */
static void test_attention_tc(void)
{
    int mi;
    NEED_GPU();
    for (mi = 0; mi < 2; mi++) {
        const int math = mi ? TK_MATH_BF16 : TK_MATH_TF32;
        attn_case_ex(1, 1, 1, 1, 16, 0, 0, 0, math, 31);
        attn_case_ex(2, 4, 2, 17, 32, 1, 1, 0, math, 32);
        attn_case_ex(1, 2, 1, 128, 64, 2, 1, 20, math, 33);
        attn_case_ex(1, 8, 2, 100, 16, 1, 0, 9, math, 34);
        attn_case_ex(1, 1, 1, 70, 128, 2, 1, 0, math, 35);
    }
    attn_case_ex(1, 1, 1, 200, 32, 1, 1, 0, TK_MATH_BF16, 36); /* four tiles, the last ragged */
}

static void test_attention_bad_input(void)
{
    const int B = 1, H = 2, T = 8, D = 4;
    const size_t n = (size_t)B * H * T * D;
    NEED_GPU();
    tt_seed(18);
    std::vector<float> q = randn(n, 1.0), bias = randn((size_t)T * T, 1.0), temp(H, 1.0f), lse((size_t)B * H * T);
    float *d_q = dput(q), *d_o = dput(q), *d_lse = dput(lse), *d_bias, *d_temp;
    CHECK_INT_EQ(tk_attention_forward_cuda(NULL, d_lse, d_q, d_q, d_q, NULL, 0, NULL, B, H, T, D, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_attention_forward_cuda(d_o, d_lse, q.data(), d_q, d_q, NULL, 0, NULL, B, H, T, D, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_attention_forward_cuda(d_o, d_lse, d_q, d_q, d_q, NULL, 0, NULL, B, H, T, 129, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_attention_forward_cuda(d_o, d_lse, d_q, d_q, d_q, NULL, 0, NULL, B, 0, T, D, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_attention_forward_cuda(d_o, d_lse, d_q, d_q, d_q, bias.data(), 0, NULL, B, H, T, D, NULL), TK_EINVAL);
    temp[1] = -1.0f;
    d_temp = dput(temp);
    CHECK_INT_EQ(tk_attention_forward_cuda(d_o, d_lse, d_q, d_q, d_q, NULL, 0, d_temp, B, H, T, D, NULL), TK_EINVAL);
    /* a NaN bias entry on the visible part, then a row whose visible entries are all -inf */
    bias[3 * T + 2] = NAN;
    d_bias = dput(bias);
    CHECK_INT_EQ(tk_attention_forward_cuda(d_o, d_lse, d_q, d_q, d_q, d_bias, 0, NULL, B, H, T, D, NULL), TK_EINVAL);
    dfree(d_bias);
    bias[3 * T + 2] = 0.0f;
    for (int j = 0; j <= 5; j++) bias[5 * T + j] = -INFINITY;
    d_bias = dput(bias);
    CHECK_INT_EQ(tk_attention_forward_cuda(d_o, d_lse, d_q, d_q, d_q, d_bias, 0, NULL, B, H, T, D, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_attention_backward_cuda(d_o, d_o, d_o, d_o, NULL, d_q, d_q, d_lse, d_q, d_q, d_q, NULL, 0, NULL, B, H, T, D, NULL),
                 TK_EINVAL); /* dbias without a bias */
    {
        /* the tensor-core path flags a non-finite row too (a NaN bias entry) */
        tk_attention_cuda_config c = tk_attention_cuda_config_default();
        std::vector<float> q16 = randn((size_t)B * H * T * 16, 1.0), nb((size_t)T * T, 0.0f);
        float *d_q16 = dput(q16), *d_o16 = dput(q16), *d_nb;
        nb[6 * T + 1] = NAN;
        d_nb = dput(nb);
        c.math = TK_MATH_BF16;
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o16, d_lse, d_q16, d_q16, d_q16, NULL, 0, NULL, B, H, T, 16, &c, NULL), TK_OK);
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o16, d_lse, d_q16, d_q16, d_q16, d_nb, 0, NULL, B, H, T, 16, &c, NULL), TK_EINVAL);
        dfree(d_q16); dfree(d_o16); dfree(d_nb);
    }
    {
        /* deferred checks (cfg.status): no host wait, the same failures leave a nonzero
           status instead of an error; clean calls leave it 0 and write what the waiting
           entry writes, bit for bit */
        tk_attention_cuda_config c = tk_attention_cuda_config_default();
        std::vector<float> okb = randn((size_t)T * T, 1.0), tmp_ok(H, 0.8f), nanb = okb;
        std::vector<int> zero1(1, 0);
        float *d_okb = dput(okb), *d_tok = dput(tmp_ok), *d_o2 = dput(q), *d_l2 = dput(lse), *d_nanb;
        float *d_gk = dput(q), *d_gv = dput(q);
        int *d_st = NULL;
        CHECK_INT_EQ(tk_device_alloc((void **)&d_st, sizeof(int)), TK_OK);
        CHECK_INT_EQ(tk_copy(d_st, zero1.data(), sizeof(int)), TK_OK);
        c.status = d_st;
        CHECK_INT_EQ(tk_attention_forward_cuda(d_o, d_lse, d_q, d_q, d_q, d_okb, 0, d_tok, B, H, T, D, NULL), TK_OK);
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o2, d_l2, d_q, d_q, d_q, d_okb, 0, d_tok, B, H, T, D, &c, NULL), TK_OK);
        CHECK(dget(d_o2, n) == dget(d_o, n) && dget(d_l2, lse.size()) == dget(d_lse, lse.size()));
        int hs = -1;
        CHECK_INT_EQ(tk_copy(&hs, d_st, sizeof(int)), TK_OK);
        CHECK_INT_EQ(hs, 0);
        CHECK_INT_EQ(tk_attention_backward_cuda_ex(d_o2, d_gk, d_gv, NULL, NULL, d_q, d_o, d_lse, d_q, d_q, d_q, d_okb, 0,
                                                   d_tok, B, H, T, D, &c, NULL), TK_OK);
        CHECK_INT_EQ(tk_copy(&hs, d_st, sizeof(int)), TK_OK);
        CHECK_INT_EQ(hs, 0);
        /* a NaN bias entry: TK_OK, status set */
        nanb[3 * T + 2] = NAN;
        d_nanb = dput(nanb);
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o2, d_l2, d_q, d_q, d_q, d_nanb, 0, NULL, B, H, T, D, &c, NULL), TK_OK);
        CHECK_INT_EQ(tk_copy(&hs, d_st, sizeof(int)), TK_OK);
        CHECK(hs != 0);
        /* a temperature <= 0 (d_temp: temp[1] = -1), forward and backward alone */
        CHECK_INT_EQ(tk_copy(d_st, zero1.data(), sizeof(int)), TK_OK);
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o2, d_l2, d_q, d_q, d_q, NULL, 0, d_temp, B, H, T, D, &c, NULL), TK_OK);
        CHECK_INT_EQ(tk_copy(&hs, d_st, sizeof(int)), TK_OK);
        CHECK(hs != 0);
        CHECK_INT_EQ(tk_copy(d_st, zero1.data(), sizeof(int)), TK_OK);
        CHECK_INT_EQ(tk_attention_backward_cuda_ex(d_o2, d_gk, d_gv, NULL, NULL, d_q, d_o, d_lse, d_q, d_q, d_q, NULL, 0,
                                                   d_temp, B, H, T, D, &c, NULL), TK_OK);
        CHECK_INT_EQ(tk_copy(&hs, d_st, sizeof(int)), TK_OK);
        CHECK(hs != 0);
        /* the host's own checks still refuse at once; a host status pointer is refused */
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o2, d_l2, d_q, d_q, d_q, NULL, 0, NULL, B, H, T, 129, &c, NULL), TK_EINVAL);
        c.status = &hs;
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o2, d_l2, d_q, d_q, d_q, NULL, 0, NULL, B, H, T, D, &c, NULL), TK_EINVAL);
        dfree(d_okb); dfree(d_tok); dfree(d_o2); dfree(d_l2); dfree(d_nanb); dfree(d_gk); dfree(d_gv);
        tk_device_free(d_st);
    }
    dfree(d_q); dfree(d_o); dfree(d_lse); dfree(d_bias); dfree(d_temp);
}

/* One case of tk_attention_forward_stats_cuda against the CPU's tk_attention_forward_stats
   (K/V repeated per query head for GQA), then CEAS observables from each side's moments
   (ceas_attention_observables_from_moments on the host, _cuda on the device, beta_h =
   alpha_h = 1/(sqrt(D) temp_h)). The bias gets a ramp 0.05 (j - i) on top of its noise so
   the row max moves at most key tiles (the shifted sums are exercised), windows mask with
   -inf (those keys must not be counted). out and lse must be bit-identical to
   tk_attention_forward_cuda_ex's, and a second stats run must give the same bits.
   Tolerances: fp32, per field f of the stats (and of the row observables), |gpu - cpu| <=
   1e-5 (|cpu| + S_f), S_f = max over the call's rows of |cpu_f|: E_p[x] and mean x are the
   row max plus a shift, the variances differences of second moments of t = x - max, H is
   ln z - E[t]: their rounding scales with the logits' magnitude and spread, not with the
   field's own value, which can cancel to ~0 (a variance of a near-uniform row, a mean near
   0); S_f is that scale for the call. tf32 / bf16: max |gpu - cpu| <= 2e-2 S_f per field
   (the logits come from q, k rounded to the math type). The count of keys: exact. Heads'
   pooled observables: the same tolerances with S_f the field's max over heads. */
static double stats_field_err(const float *g, const float *ref, size_t R, int stride, int f, int fp32)
{
    double sc = 0.0, e = 0.0;
    size_t r;
    for (r = 0; r < R; r++) sc = fmax(sc, fabs((double)ref[r * stride + f]));
    for (r = 0; r < R; r++) {
        const double d = fabs((double)g[r * stride + f] - ref[r * stride + f]);
        if (d != d) return INFINITY;
        e = fmax(e, fp32 ? d / (fabs((double)ref[r * stride + f]) + sc) : (sc > 0.0 ? d / sc : d));
    }
    return e;
}

/* the float fields of R observables (H, n_eff, var_s, sigma_qk, mean_s, log_n) as (R, 6) */
static std::vector<float> obs_fields(const ceas_obs *o, size_t R)
{
    std::vector<float> f(R * 6);
    size_t r;
    for (r = 0; r < R; r++) {
        f[r * 6 + 0] = o[r].H; f[r * 6 + 1] = o[r].n_eff; f[r * 6 + 2] = o[r].var_s;
        f[r * 6 + 3] = o[r].sigma_qk; f[r * 6 + 4] = o[r].mean_s; f[r * 6 + 5] = o[r].log_n;
    }
    return f;
}

static void stats_case(int B, int H, int Hkv, int T, int D, int bias_mode, int use_temp, int window, int math,
                       unsigned seed)
{
    const size_t n = (size_t)B * H * T * D, nkv = (size_t)B * Hkv * T * D, TT = (size_t)T * T, R = (size_t)B * H * T;
    const size_t nb = bias_mode == 0 ? 0 : (bias_mode == 1 ? TT : (size_t)H * TT);
    const int G = H / Hkv, fp32 = math == TK_MATH_FP32;
    const char *mname = fp32 ? "fp32" : (math == TK_MATH_TF32 ? "tf32" : "bf16");
    const double tol = fp32 ? 1e-5 : 2e-2;
    int i, j, h, b, f;
    size_t e;
    tk_attention_cuda_config cfg = tk_attention_cuda_config_default();
    cfg.math = math;
    cfg.kv_heads = Hkv;
    tt_seed(seed);
    std::vector<float> q = randn(n, 1.0), k = randn(nkv, 1.0), v = randn(nkv, 1.0);
    std::vector<float> bias = randn(nb ? nb : 1, 0.7), temp(H), beta(H);
    for (h = 0; h < H; h++) {
        temp[h] = 0.6f + 0.3f * (float)h;
        beta[h] = (float)(1.0 / (sqrt((double)D) * (use_temp ? temp[h] : 1.0f)));
    }
    for (h = 0; h < (nb ? (bias_mode == 2 ? H : 1) : 0); h++)
        for (i = 0; i < T; i++)
            for (j = 0; j <= i; j++) {
                float *bij = &bias[(size_t)h * TT + (size_t)i * T + j];
                *bij = window > 0 && j < i - window + 1 ? -INFINITY : *bij + 0.05f * (float)(j - i);
            }
    std::vector<float> kr(n), vr(n);
    for (b = 0; b < B; b++)
        for (h = 0; h < H; h++)
            for (e = 0; e < (size_t)T * D; e++) {
                kr[((size_t)b * H + h) * T * D + e] = k[((size_t)b * Hkv + h / G) * T * D + e];
                vr[((size_t)b * H + h) * T * D + e] = v[((size_t)b * Hkv + h / G) * T * D + e];
            }
    std::vector<float> out(n), probs((size_t)B * H * TT), st(R * TK_ATTN_NSTATS), zn(n, 0.0f), zr(R, 0.0f);
    const float *hb = nb ? bias.data() : NULL, *ht = use_temp ? temp.data() : NULL;
    float *d_q = dput(q), *d_k = dput(k), *d_v = dput(v), *d_bias = nb ? dput(bias) : NULL, *d_temp = use_temp ? dput(temp) : NULL;
    float *d_out = dput(zn), *d_lse = dput(zr), *d_out2 = dput(zn), *d_lse2 = dput(zr);
    float *d_st = dput(std::vector<float>(R * TK_ATTN_NSTATS, NAN));
    CHECK_INT_EQ(tk_attention_forward_stats(NULL, out.data(), probs.data(), st.data(), q.data(), kr.data(), vr.data(), hb,
                                            bias_mode == 2, ht, B, H, T, D), TK_OK);
    CHECK_INT_EQ(tk_attention_forward_stats_cuda(d_out, d_lse, d_st, d_q, d_k, d_v, d_bias, bias_mode == 2, d_temp, B, H, T, D,
                                                 &cfg, NULL), TK_OK);
    CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_out2, d_lse2, d_q, d_k, d_v, d_bias, bias_mode == 2, d_temp, B, H, T, D, &cfg,
                                              NULL), TK_OK);
    {
        std::vector<float> g = dget(d_st, R * TK_ATTN_NSTATS);
        double err[TK_ATTN_NSTATS - 1], oerr[6], herr[6];
        int cnt_ok = 1;
        /* a second run gives the same bits (the simulation reorders the threads per launch) */
        CHECK_INT_EQ(tk_attention_forward_stats_cuda(d_out2, d_lse2, d_st, d_q, d_k, d_v, d_bias, bias_mode == 2, d_temp, B, H, T,
                                                     D, &cfg, NULL), TK_OK);
        CHECK(memcmp(dget(d_st, R * TK_ATTN_NSTATS).data(), g.data(), g.size() * sizeof(float)) == 0);
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_out2, d_lse2, d_q, d_k, d_v, d_bias, bias_mode == 2, d_temp, B, H, T, D, &cfg,
                                                  NULL), TK_OK);
        CHECK(memcmp(dget(d_out, n).data(), dget(d_out2, n).data(), n * sizeof(float)) == 0);
        CHECK(memcmp(dget(d_lse, R).data(), dget(d_lse2, R).data(), R * sizeof(float)) == 0);
        for (f = 0; f < TK_ATTN_NSTATS - 1; f++) {
            err[f] = stats_field_err(g.data(), st.data(), R, TK_ATTN_NSTATS, f, fp32);
            CHECK(err[f] <= tol);
        }
        for (e = 0; e < R; e++) cnt_ok &= g[e * TK_ATTN_NSTATS + 5] == st[e * TK_ATTN_NSTATS + 5];
        CHECK(cnt_ok);
        if (window > 0 && nb) /* the last row counted exactly its window */
            CHECK_INT_EQ((int)g[(R - 1) * TK_ATTN_NSTATS + 5], T < window ? T : window);
        /* end to end: CEAS observables from the moments, host chain vs device chain */
        std::vector<ceas_obs> rc(R), hc(H), hg(H);
        ceas_obs *d_rows = dput(std::vector<ceas_obs>(R));
        CHECK_INT_EQ(ceas_attention_observables_from_moments(st.data(), B, H, T, TK_ATTN_NSTATS, beta.data(), rc.data(),
                                                             hc.data(), NULL), CEAS_OK);
        CHECK_INT_EQ(ceas_attention_observables_from_moments_cuda(d_st, B, H, T, TK_ATTN_NSTATS, beta.data(), d_rows,
                                                                  hg.data(), NULL, NULL), CEAS_OK);
        {
            std::vector<ceas_obs> rg = dget(d_rows, R);
            std::vector<float> fg = obs_fields(rg.data(), R), fc = obs_fields(rc.data(), R);
            std::vector<float> hfg = obs_fields(hg.data(), (size_t)H), hfc = obs_fields(hc.data(), (size_t)H);
            for (f = 0; f < 6; f++) {
                oerr[f] = stats_field_err(fg.data(), fc.data(), R, 6, f, fp32);
                herr[f] = stats_field_err(hfg.data(), hfc.data(), (size_t)H, 6, f, fp32);
                CHECK(oerr[f] <= tol);
                CHECK(herr[f] <= tol);
            }
            for (e = 0; e < R; e++) cnt_ok &= rg[e].n == rc[e].n;
            for (h = 0; h < H; h++) cnt_ok &= hg[h].n == hc[h].n;
            CHECK(cnt_ok);
        }
        printf("    stats %s B%d H%d Hkv%d T%d D%d bias%d temp%d win%d: H %.1e Ep %.1e Varp %.1e mean %.1e var %.1e | "
               "obs rows max %.1e heads max %.1e\n", mname, B, H, Hkv, T, D, bias_mode, use_temp, window, err[0], err[1],
               err[2], err[3], err[4], fmax(fmax(fmax(oerr[0], oerr[1]), fmax(oerr[2], oerr[3])), oerr[4]),
               fmax(fmax(fmax(herr[0], herr[1]), fmax(herr[2], herr[3])), herr[4]));
        dfree(d_rows);
    }
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_out); dfree(d_lse); dfree(d_out2); dfree(d_lse2); dfree(d_st);
    if (d_bias) dfree(d_bias);
    if (d_temp) dfree(d_temp);
}

/* the forward's row moments: fp32 (T 45: a ragged 13-row tail; 70 with a window of 9; 1;
   130 over five key tiles), GQA 1/2/4, no / shared / per-head bias, with and without
   temperatures; tf32 and bf16 (T 100 and 70: two 64-tiles, ragged) */
static void test_attention_stats(void)
{
    NEED_GPU();
    stats_case(2, 4, 2, 45, 16, 1, 1, 0, TK_MATH_FP32, 51);
    stats_case(1, 2, 2, 70, 8, 2, 0, 9, TK_MATH_FP32, 52);
    stats_case(1, 3, 3, 33, 5, 0, 1, 0, TK_MATH_FP32, 53);
    stats_case(1, 1, 1, 1, 4, 1, 0, 0, TK_MATH_FP32, 54);
    stats_case(1, 4, 1, 130, 8, 1, 1, 40, TK_MATH_FP32, 55);
    stats_case(1, 4, 2, 100, 16, 1, 1, 0, TK_MATH_BF16, 56);
    stats_case(1, 2, 1, 70, 16, 2, 0, 20, TK_MATH_TF32, 57);
    stats_case(1, 2, 2, 65, 16, 0, 1, 0, TK_MATH_BF16, 58);
    { /* stats on the host: refused, nothing launched */
        std::vector<float> q = randn(64, 1.0), hst(6 * 8, 0.0f);
        float *d_q = dput(q), *d_o = dput(q), *d_l = dput(std::vector<float>(8));
        CHECK_INT_EQ(tk_attention_forward_stats_cuda(d_o, d_l, hst.data(), d_q, d_q, d_q, NULL, 0, NULL, 1, 2, 4, 8, NULL, NULL),
                     TK_EINVAL);
        dfree(d_q); dfree(d_o); dfree(d_l);
    }
}

/* the tensor-core backward twice from the same inputs into zeroed buffers: the same bits
   (the simulation runs the threads in a different random order each launch, so a race or
   an order-dependent reduction shows) */
static void test_attention_tc_deterministic(void)
{
    const int B = 2, H = 4, Hkv = 2, T = 40, D = 16;
    const size_t n = (size_t)B * H * T * D, nkv = (size_t)B * Hkv * T * D;
    int rep;
    NEED_GPU();
    tt_seed(41);
    tk_attention_cuda_config c = tk_attention_cuda_config_default();
    c.math = TK_MATH_BF16;
    c.kv_heads = Hkv;
    std::vector<float> q = randn(n, 1.0), k = randn(nkv, 1.0), v = randn(nkv, 1.0), dout = randn(n, 1.0);
    std::vector<float> bias = randn((size_t)T * T, 0.7), temp(H, 0.8f), zn(n, 0.0f), zkv(nkv, 0.0f), zb((size_t)T * T, 0.0f);
    std::vector<float> zh(H, 0.0f), lse((size_t)B * H * T);
    float *d_q = dput(q), *d_k = dput(k), *d_v = dput(v), *d_dout = dput(dout), *d_bias = dput(bias), *d_temp = dput(temp);
    float *d_out = dput(zn), *d_lse = dput(lse);
    std::vector<float> first[5];
    CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_out, d_lse, d_q, d_k, d_v, d_bias, 0, d_temp, B, H, T, D, &c, NULL), TK_OK);
    for (rep = 0; rep < 2; rep++) {
        float *d_dq = dput(zn), *d_dk = dput(zkv), *d_dv = dput(zkv), *d_db = dput(zb), *d_dt = dput(zh);
        CHECK_INT_EQ(tk_attention_backward_cuda_ex(d_dq, d_dk, d_dv, d_db, d_dt, d_dout, d_out, d_lse, d_q, d_k, d_v, d_bias, 0,
                                                   d_temp, B, H, T, D, &c, NULL), TK_OK);
        std::vector<float> got[5] = {dget(d_dq, n), dget(d_dk, nkv), dget(d_dv, nkv), dget(d_db, (size_t)T * T), dget(d_dt, H)};
        int u;
        for (u = 0; u < 5; u++) {
            if (rep == 0) first[u] = got[u];
            else CHECK(memcmp(first[u].data(), got[u].data(), got[u].size() * sizeof(float)) == 0);
        }
        dfree(d_dq); dfree(d_dk); dfree(d_dv); dfree(d_db); dfree(d_dt);
    }
    CHECK(maxabs(first[0]) > 0.0 && maxabs(first[3]) > 0.0 && maxabs(first[4]) > 0.0); /* something was written */
    dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_dout); dfree(d_bias); dfree(d_temp); dfree(d_out); dfree(d_lse);
}

/* bad configurations: TK_EINVAL and nothing launched (out, lse and the gradients keep
   their bits) */
static void test_attention_cfg_bad_input(void)
{
    const int B = 1, H = 4, T = 9, D = 24;
    const size_t n = (size_t)B * H * T * D;
    NEED_GPU();
    tt_seed(19);
    std::vector<float> q = randn(n, 1.0), lse = randn((size_t)B * H * T, 1.0), g = randn(n, 1.0);
    float *d_q = dput(q), *d_o = dput(g), *d_lse = dput(lse), *d_g = dput(g);
    tk_attention_cuda_config c = tk_attention_cuda_config_default();
    struct { int math, kv_heads, D; } bad[] = {
        {TK_MATH_FP32, 3, D},  /* H % kv_heads != 0 */
        {TK_MATH_FP32, -1, D}, /* kv_heads < 0 */
        {TK_MATH_FP32, 8, D},  /* kv_heads > H */
        {7, 0, D},             /* no such math */
        {-1, 0, D},
        {TK_MATH_BF16, 0, D},  /* D not a multiple of 16 */
        {TK_MATH_TF32, 2, 8},  /* D < 16 */
        {TK_MATH_BF16, 0, 144} /* D > 128 */
    };
    size_t u;
    CHECK_INT_EQ(c.math, TK_MATH_FP32);
    CHECK_INT_EQ(c.kv_heads, 0);
    for (u = 0; u < sizeof bad / sizeof bad[0]; u++) {
        c.math = bad[u].math;
        c.kv_heads = bad[u].kv_heads;
        CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o, d_lse, d_q, d_q, d_q, NULL, 0, NULL, B, H, T, bad[u].D, &c, NULL), TK_EINVAL);
        CHECK_INT_EQ(tk_attention_backward_cuda_ex(d_g, d_g, d_g, NULL, NULL, d_q, d_q, d_lse, d_q, d_q, d_q, NULL, 0, NULL, B, H, T,
                                                   bad[u].D, &c, NULL), TK_EINVAL);
    }
    {
        std::vector<float> o2 = dget(d_o, n), l2 = dget(d_lse, lse.size()), g2 = dget(d_g, n);
        CHECK(memcmp(o2.data(), g.data(), n * sizeof(float)) == 0);
        CHECK(memcmp(l2.data(), lse.data(), lse.size() * sizeof(float)) == 0);
        CHECK(memcmp(g2.data(), g.data(), n * sizeof(float)) == 0);
    }
    /* a NULL config is the default one */
    CHECK_INT_EQ(tk_attention_forward_cuda_ex(d_o, d_lse, d_q, d_q, d_q, NULL, 0, NULL, B, H, T, D, NULL, NULL), TK_OK);
    dfree(d_q); dfree(d_o); dfree(d_lse); dfree(d_g);
}

/* argument validation happens before any device work, so it runs without a GPU too */
static void test_cuda_bad_input(void)
{
    float x = 0.0f;
    CHECK_INT_EQ(tk_sgemm_cuda(0, 0, 0, 1, 1, 1.0f, &x, 1, &x, 1, 0.0f, &x, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_sgemm_cuda(0, 0, 1, 1, 1, 1.0f, NULL, 1, &x, 1, 0.0f, &x, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_matmul_forward_cuda(&x, &x, &x, NULL, 1, -1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_layernorm_forward_cuda(&x, &x, &x, &x, &x, NULL, 1, 1, NAN, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_gelu_forward_cuda(&x, &x, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_crossentropy_backward_cuda(&x, &x, NULL, 1, 1, 0.0f, 1.0f, NULL), TK_EINVAL);
}

/* Under nvcc / the simulation the plain ops with a same-signature _cuda twin route device
   buffers to it: the same bits as the _cuda call; device and host buffers mixed: TK_EINVAL */
static void test_plain_routing(void)
{
    const int N = 9, C = 24, OC = 7, B = 3, T = 3, V = 11;
    NEED_GPU();
    tt_seed(71);
    std::vector<float> x = randn((size_t)N * C, 1.0), W = randn((size_t)OC * C, 0.2), b = randn(OC, 1.0);
    std::vector<float> w = randn(C, 1.0), dout = randn((size_t)N * OC, 1.0), dln = randn((size_t)N * C, 1.0);
    std::vector<int> ids((size_t)B * T);
    for (int i = 0; i < B * T; i++) ids[(size_t)i] = (i * 5) % V;
    std::vector<float> wte = randn((size_t)V * C, 1.0);
    float *d_x = dput(x), *d_W = dput(W), *d_b = dput(b), *d_w = dput(w), *d_dout = dput(dout), *d_dln = dput(dln);
    float *d_wte = dput(wte);
    int *d_ids = dput(ids);
    std::vector<float> zo((size_t)N * OC), zc((size_t)N * C), zn(N), zw(C), zv((size_t)V * C);
    float *o1 = dput(zo), *o2 = dput(zo), *c1 = dput(zc), *c2 = dput(zc), *m1 = dput(zn), *m2 = dput(zn);
    float *r1 = dput(zn), *r2 = dput(zn), *w1 = dput(zw), *w2 = dput(zw), *v1 = dput(zv), *v2 = dput(zv);
#define SAME(a, bb, n) CHECK(memcmp(dget(a, n).data(), dget(bb, n).data(), (n) * sizeof(float)) == 0)
    CHECK_INT_EQ(tk_matmul_forward(o1, d_x, d_W, d_b, N, C, OC), TK_OK);
    CHECK_INT_EQ(tk_matmul_forward_cuda(o2, d_x, d_W, d_b, N, C, OC, NULL), TK_OK);
    SAME(o1, o2, zo.size());
    CHECK_INT_EQ(tk_matmul_backward(c1, NULL, NULL, d_dout, d_x, d_W, N, C, OC), TK_OK);
    CHECK_INT_EQ(tk_matmul_backward_cuda(c2, NULL, NULL, d_dout, d_x, d_W, N, C, OC, NULL), TK_OK);
    SAME(c1, c2, zc.size());
    CHECK_INT_EQ(tk_layernorm_forward(c1, m1, r1, d_x, d_w, NULL, N, C, 1e-5f), TK_OK);
    CHECK_INT_EQ(tk_layernorm_forward_cuda(c2, m2, r2, d_x, d_w, NULL, N, C, 1e-5f, NULL), TK_OK);
    SAME(c1, c2, zc.size());
    SAME(r1, r2, zn.size());
    CHECK_INT_EQ(tk_layernorm_backward(c1, w1, NULL, d_dln, d_x, d_w, m1, r1, N, C), TK_OK);
    CHECK_INT_EQ(tk_layernorm_backward_cuda(c2, w2, NULL, d_dln, d_x, d_w, m2, r2, N, C, NULL), TK_OK);
    SAME(c1, c2, zc.size());
    SAME(w1, w2, zw.size());
    CHECK_INT_EQ(tk_gelu_forward(c1, d_x, zc.size()), TK_OK);
    CHECK_INT_EQ(tk_gelu_forward_cuda(c2, d_x, zc.size(), NULL), TK_OK);
    SAME(c1, c2, zc.size());
    CHECK_INT_EQ(tk_gelu_backward(c1, d_x, d_dln, zc.size()), TK_OK);
    CHECK_INT_EQ(tk_gelu_backward_cuda(c2, d_x, d_dln, zc.size(), NULL), TK_OK);
    SAME(c1, c2, zc.size());
    CHECK_INT_EQ(tk_softmax_forward(c1, d_x, N, C), TK_OK);
    CHECK_INT_EQ(tk_softmax_forward_cuda(c2, d_x, N, C, NULL), TK_OK);
    SAME(c1, c2, zc.size());
    CHECK_INT_EQ(tk_embedding_forward(c1, d_ids, d_wte, NULL, B, T, C, V), TK_OK);
    CHECK_INT_EQ(tk_embedding_forward_cuda(c2, d_ids, d_wte, NULL, B, T, C, V, NULL), TK_OK);
    SAME(c1, c2, (size_t)B * T * C);
    CHECK_INT_EQ(tk_embedding_backward(v1, NULL, d_x, d_ids, B, T, C, V), TK_OK);
    CHECK_INT_EQ(tk_embedding_backward_cuda(v2, NULL, d_x, d_ids, B, T, C, V, NULL), TK_OK);
    SAME(v1, v2, zv.size());
    {
        tk_adamw_config ac = tk_adamw_config_default();
        float *p1 = dput(x), *p2 = dput(x), *am1 = dput(zc), *am2 = dput(zc), *av1 = dput(zc), *av2 = dput(zc);
        CHECK_INT_EQ(tk_adamw_update(p1, d_dln, am1, av1, zc.size(), &ac, 1), TK_OK);
        CHECK_INT_EQ(tk_adamw_update_cuda(p2, d_dln, am2, av2, zc.size(), &ac, 1, NULL), TK_OK);
        SAME(p1, p2, zc.size());
        SAME(av1, av2, zc.size());
        dfree(p1); dfree(p2); dfree(am1); dfree(am2); dfree(av1); dfree(av2);
    }
    {
        /* CE backward: probs from the softmax above (c1), targets in range */
        std::vector<int> tg(N);
        for (int i = 0; i < N; i++) tg[(size_t)i] = (i * 7) % C;
        int *d_tg = dput(tg);
        float *g1 = dput(zc), *g2 = dput(zc);
        CHECK_INT_EQ(tk_softmax_forward(c1, d_x, N, C), TK_OK);
        CHECK_INT_EQ(tk_crossentropy_backward(g1, c1, d_tg, N, C, 0.1f, 0.5f), TK_OK);
        CHECK_INT_EQ(tk_crossentropy_backward_cuda(g2, c1, d_tg, N, C, 0.1f, 0.5f, NULL), TK_OK);
        SAME(g1, g2, zc.size());
        dfree(d_tg); dfree(g1); dfree(g2);
    }
    /* a device output with a host input: refused, nothing launched */
    CHECK_INT_EQ(tk_matmul_forward(o1, x.data(), d_W, d_b, N, C, OC), TK_EINVAL);
    CHECK_INT_EQ(tk_gelu_forward(c1, x.data(), zc.size()), TK_EINVAL);
    CHECK_INT_EQ(tk_layernorm_forward(c1, m1, r1, d_x, w.data(), NULL, N, C, 1e-5f), TK_EINVAL);
    /* a host output with a device input: refused too (the CPU loops would read device
       memory); the host output is left as it was */
    {
        std::vector<float> ho((size_t)N * OC, 7.0f), hc(zc.size(), 7.0f);
        CHECK_INT_EQ(tk_matmul_forward(ho.data(), d_x, d_W, NULL, N, C, OC), TK_EINVAL);
        CHECK_INT_EQ(tk_gelu_forward(hc.data(), d_x, zc.size()), TK_EINVAL);
        CHECK_INT_EQ(tk_residual_forward(hc.data(), x.data(), d_x, zc.size()), TK_EINVAL);
        CHECK_INT_EQ(tk_layernorm_forward(hc.data(), NULL, NULL, x.data(), d_w, NULL, N, C, 1e-5f), TK_EINVAL);
        CHECK(ho[0] == 7.0f && hc[0] == 7.0f && hc[hc.size() - 1] == 7.0f);
    }
#undef SAME
    dfree(d_x); dfree(d_W); dfree(d_b); dfree(d_w); dfree(d_dout); dfree(d_dln); dfree(d_wte); dfree(d_ids);
    dfree(o1); dfree(o2); dfree(c1); dfree(c2); dfree(m1); dfree(m2); dfree(r1); dfree(r2);
    dfree(w1); dfree(w2); dfree(v1); dfree(v2);
}

/* ---- RMSNorm, residual, head layouts, gradient norm, device memory (routing included) */
/* worst error of g against ref, relative to the scale (max |ref - init|, what the call wrote
   or added): printed per case so the measured margins are on record */
static double g_worst_rms[4], g_worst_norm;
/* the n device floats at d equal ref (a host vector) exactly; the copy is made once (the
   CHECK_ALL_CLOSE macro evaluates its arguments per element) */
#define CHECK_DEV_EXACT(d, ref, n)                                             \
    do {                                                                       \
        const std::vector<float> dev_ = dget(d, n);                            \
        CHECK_ALL_CLOSE(dev_.data(), (ref).data(), (long)(n), 0.0, 0.0);       \
    } while (0)

static void rmsnorm_case(int N, int C, int use_w, int use_rstd, unsigned seed)
{
    const size_t nc = (size_t)N * C;
    tt_seed(seed);
    std::vector<float> x = randn(nc, 1.5), w = randn((size_t)C, 1.0), dout = randn(nc, 1.0);
    std::vector<float> out(nc), rstd((size_t)N), dx = randn(nc, 1.0), dw = randn((size_t)C, 1.0);
    const std::vector<float> dx0 = dx, dw0 = dw;
    const float *hw = use_w ? w.data() : NULL;
    float *d_x = dput(x), *d_w = dput(w), *d_dout = dput(dout), *d_out = dput(randn(nc, 1.0));
    float *d_rstd = dput(randn((size_t)N, 1.0)), *d_dx = dput(dx), *d_dw = dput(dw);
    CHECK_INT_EQ(tk_rmsnorm_forward(out.data(), rstd.data(), x.data(), hw, N, C, 1e-5f), TK_OK);
    CHECK_INT_EQ(tk_rmsnorm_forward_cuda(d_out, use_rstd ? d_rstd : NULL, d_x, use_w ? d_w : NULL, N, C, 1e-5f, NULL), TK_OK);
    std::vector<float> g = dget(d_out, nc);
    {
        const double atol_ = 1e-6 * maxabs(out);
        CHECK_ALL_CLOSE(g.data(), out.data(), (long)nc, 1e-5, atol_);
        g_worst_rms[0] = fmax(g_worst_rms[0], rel_maxnorm(g.data(), out.data(), NULL, nc));
    }
    if (use_rstd) {
        g = dget(d_rstd, (size_t)N);
        CHECK_ALL_CLOSE(g.data(), rstd.data(), (long)N, 1e-5, 0.0);
        g_worst_rms[1] = fmax(g_worst_rms[1], rel_maxnorm(g.data(), rstd.data(), NULL, (size_t)N));
    } else {
        dfree(d_rstd);
        d_rstd = dput(rstd); /* the backward needs the forward's rstd */
    }
    CHECK_INT_EQ(tk_rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), hw, rstd.data(), N, C), TK_OK);
    CHECK_INT_EQ(tk_rmsnorm_backward_cuda(d_dx, d_dw, d_dout, d_x, use_w ? d_w : NULL, d_rstd, N, C, NULL), TK_OK);
    g = dget(d_dx, nc);
    {
        /* what was added, dx - dx0, has terms r g w - k x that cancel: atol on its scale */
        std::vector<float> add(nc);
        for (size_t i = 0; i < nc; i++) add[i] = dx[i] - dx0[i];
        const double atol_ = 1e-6 * maxabs(add);
        CHECK_ALL_CLOSE(g.data(), dx.data(), (long)nc, 1e-5, atol_);
        g_worst_rms[2] = fmax(g_worst_rms[2], rel_maxnorm(g.data(), dx.data(), dx0.data(), nc));
    }
    g = dget(d_dw, (size_t)C);
    {
        /* dw: sums over N rows in another order: atol on the scale of what was added */
        std::vector<float> add((size_t)C);
        for (int c = 0; c < C; c++) add[(size_t)c] = dw[(size_t)c] - dw0[(size_t)c];
        const double atol_ = 1e-5 * maxabs(add);
        CHECK_ALL_CLOSE(g.data(), dw.data(), (long)C, 1e-5, atol_);
        g_worst_rms[3] = fmax(g_worst_rms[3], rel_maxnorm(g.data(), dw.data(), dw0.data(), (size_t)C));
    }
    /* dw NULL: only dinp accumulates again */
    CHECK_INT_EQ(tk_rmsnorm_backward(dx.data(), NULL, dout.data(), x.data(), hw, rstd.data(), N, C), TK_OK);
    CHECK_INT_EQ(tk_rmsnorm_backward_cuda(d_dx, NULL, d_dout, d_x, use_w ? d_w : NULL, d_rstd, N, C, NULL), TK_OK);
    g = dget(d_dx, nc);
    {
        std::vector<float> add(nc);
        for (size_t i = 0; i < nc; i++) add[i] = dx[i] - dx0[i];
        const double atol_ = 2e-6 * maxabs(add);
        CHECK_ALL_CLOSE(g.data(), dx.data(), (long)nc, 1e-5, atol_);
    }
    dfree(d_x); dfree(d_w); dfree(d_dout); dfree(d_out); dfree(d_rstd); dfree(d_dx); dfree(d_dw);
}

/* Ragged rows and columns (C not a multiple of 32, up to 1000), one row, a single dw chunk
   (N <= 128) and several (N 129, 300: the two-stage column sums), with and without w */
static void test_rmsnorm(void)
{
    NEED_GPU();
    rmsnorm_case(1, 1, 1, 1, 81);
    rmsnorm_case(3, 33, 1, 1, 82);
    rmsnorm_case(37, 300, 0, 1, 83);
    rmsnorm_case(129, 1000, 1, 0, 84);
    rmsnorm_case(300, 17, 1, 1, 85);
    rmsnorm_case(5, 768, 0, 0, 86);
    printf("    rmsnorm worst (relative to max |written|): out %.2e rstd %.2e dinp %.2e dw %.2e\n",
           g_worst_rms[0], g_worst_rms[1], g_worst_rms[2], g_worst_rms[3]);
}

/* the same single additions: exact */
static void test_residual(void)
{
    static const size_t ns[] = {1, 33, 10007};
    NEED_GPU();
    tt_seed(87);
    for (int s = 0; s < 3; s++) {
        const size_t n = ns[s];
        std::vector<float> a = randn(n, 1.0), b = randn(n, 1.0), dout = randn(n, 1.0), out(n);
        std::vector<float> da = randn(n, 1.0), db = randn(n, 1.0);
        float *d_a = dput(a), *d_b = dput(b), *d_dout = dput(dout), *d_out = dput(out), *d_da = dput(da), *d_db = dput(db);
        CHECK_INT_EQ(tk_residual_forward(out.data(), a.data(), b.data(), n), TK_OK);
        CHECK_INT_EQ(tk_residual_forward_cuda(d_out, d_a, d_b, n, NULL), TK_OK);
        CHECK_DEV_EXACT(d_out, out, n);
        CHECK_INT_EQ(tk_residual_backward(da.data(), db.data(), dout.data(), n), TK_OK);
        CHECK_INT_EQ(tk_residual_backward_cuda(d_da, d_db, d_dout, n, NULL), TK_OK);
        CHECK_INT_EQ(tk_residual_backward(da.data(), NULL, dout.data(), n), TK_OK);
        CHECK_INT_EQ(tk_residual_backward_cuda(d_da, NULL, d_dout, n, NULL), TK_OK);
        CHECK_INT_EQ(tk_residual_backward(NULL, db.data(), a.data(), n), TK_OK);
        CHECK_INT_EQ(tk_residual_backward_cuda(NULL, d_db, d_a, n, NULL), TK_OK);
        CHECK_INT_EQ(tk_residual_backward_cuda(NULL, NULL, d_a, n, NULL), TK_OK);
        CHECK_DEV_EXACT(d_da, da, n);
        CHECK_DEV_EXACT(d_db, db, n);
        dfree(d_a); dfree(d_b); dfree(d_dout); dfree(d_out); dfree(d_da); dfree(d_db);
    }
}

/* seeded dropout: the device's mask and out are the CPU's bits (n from 1 to 65537, ragged;
   several seeds; p 0, 0.1, 0.9), out aliasing inp too; the backward (through a nonzero
   dinp: += is checked) is bit-identical; the plain entries route device buffers */
static void test_dropout_seeded(void)
{
    static const size_t ns[] = {1, 1000, 12347, 65537};
    static const uint64_t seeds[] = {0u, 42u, 0xDEADBEEFCAFEF00DULL};
    static const float ps[] = {0.0f, 0.1f, 0.9f};
    long cases = 0, kept = 0, total = 0;
    NEED_GPU();
    tt_seed(91);
    for (int s = 0; s < 4; s++) {
        const size_t n = ns[s];
        std::vector<float> x = randn(n, 1.0), dout = randn(n, 1.0), dx0 = randn(n, 1.0);
        float *d_x = dput(x), *d_dout = dput(dout);
        for (int si = 0; si < 3; si++)
            for (int pi = 0; pi < 3; pi++) {
                const float p = ps[pi];
                std::vector<float> out(n, 5.0f), dx = dx0;
                std::vector<uint8_t> mask(n, 7);
                float *d_out = dput(out), *d_dx = dput(dx0), *d_y = dput(x);
                uint8_t *d_mask = dput(mask), *d_mask2 = dput(mask);
                CHECK_INT_EQ(tk_dropout_seeded_forward(out.data(), mask.data(), x.data(), n, p, seeds[si]), TK_OK);
                CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(d_out, d_mask, d_x, n, p, seeds[si], NULL), TK_OK);
                const std::vector<float> g = dget(d_out, n);
                const std::vector<uint8_t> gm = dget(d_mask, n);
                CHECK(memcmp(gm.data(), mask.data(), n) == 0);
                CHECK(memcmp(g.data(), out.data(), n * sizeof(float)) == 0);
                /* out aliasing inp on the device */
                CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(d_y, d_mask2, d_y, n, p, seeds[si], NULL), TK_OK);
                const std::vector<float> gy = dget(d_y, n);
                const std::vector<uint8_t> gm2 = dget(d_mask2, n);
                CHECK(memcmp(gy.data(), out.data(), n * sizeof(float)) == 0);
                CHECK(memcmp(gm2.data(), mask.data(), n) == 0);
                /* backward: dx += dout * mask / (1-p) */
                CHECK_INT_EQ(tk_dropout_backward(dx.data(), dout.data(), mask.data(), n, p), TK_OK);
                CHECK_INT_EQ(tk_dropout_backward_cuda(d_dx, d_dout, d_mask, n, p, NULL), TK_OK);
                const std::vector<float> gd = dget(d_dx, n);
                CHECK(memcmp(gd.data(), dx.data(), n * sizeof(float)) == 0);
                for (size_t i = 0; i < n; i++) kept += mask[i];
                total += (long)n;
                cases++;
                dfree(d_out); dfree(d_dx); dfree(d_y); dfree(d_mask); dfree(d_mask2);
            }
        dfree(d_x); dfree(d_dout);
    }
    printf("    seeded dropout: %ld cases bit-identical (forward, aliased forward, backward), "
           "%ld of %ld kept\n", cases, kept, total);
}

static void test_dropout_routing(void)
{
    const size_t n = 4099;
    const float p = 0.25f;
    NEED_GPU();
    tt_seed(92);
    std::vector<float> x = randn(n, 1.0), dout = randn(n, 1.0), dx = randn(n, 1.0), o(n, 0.0f);
    std::vector<uint8_t> m(n, 0);
    float *d_x = dput(x), *d_dout = dput(dout), *o1 = dput(o), *o2 = dput(o), *g1 = dput(dx), *g2 = dput(dx);
    uint8_t *m1 = dput(m), *m2 = dput(m);
    CHECK_INT_EQ(tk_dropout_seeded_forward(o1, m1, d_x, n, p, 77u), TK_OK);
    CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(o2, m2, d_x, n, p, 77u, NULL), TK_OK);
    {
        const std::vector<float> a = dget(o1, n), b = dget(o2, n);
        const std::vector<uint8_t> ma = dget(m1, n), mb = dget(m2, n);
        CHECK(memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
        CHECK(memcmp(ma.data(), mb.data(), n) == 0);
    }
    CHECK_INT_EQ(tk_dropout_backward(g1, d_dout, m1, n, p), TK_OK);
    CHECK_INT_EQ(tk_dropout_backward_cuda(g2, d_dout, m2, n, p, NULL), TK_OK);
    {
        const std::vector<float> a = dget(g1, n), b = dget(g2, n);
        CHECK(memcmp(a.data(), b.data(), n * sizeof(float)) == 0);
    }
    /* a device output (the routing decides on it) with a host input: TK_EINVAL, nothing
       written (a host output with device inputs would take the CPU path: not tested, it
       reads device memory on a GPU) */
    {
        const std::vector<float> o_before = dget(o1, n), g_before = dget(g1, n);
        const std::vector<uint8_t> m_before = dget(m1, n);
        std::vector<uint8_t> hm(n, 9);
        CHECK_INT_EQ(tk_dropout_seeded_forward(o1, m1, x.data(), n, p, 77u), TK_EINVAL);
        CHECK_INT_EQ(tk_dropout_seeded_forward(o1, hm.data(), d_x, n, p, 77u), TK_EINVAL);
        CHECK_INT_EQ(tk_dropout_backward(g1, dout.data(), m1, n, p), TK_EINVAL);
        CHECK_INT_EQ(tk_dropout_backward(g1, d_dout, hm.data(), n, p), TK_EINVAL);
        const std::vector<float> o_after = dget(o1, n), g_after = dget(g1, n);
        const std::vector<uint8_t> m_after = dget(m1, n);
        CHECK(memcmp(o_after.data(), o_before.data(), n * sizeof(float)) == 0);
        CHECK(memcmp(g_after.data(), g_before.data(), n * sizeof(float)) == 0);
        CHECK(memcmp(m_after.data(), m_before.data(), n) == 0);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) bad += hm[i] != 9;
        CHECK(bad == 0);
    }
    dfree(d_x); dfree(d_dout); dfree(o1); dfree(o2); dfree(g1); dfree(g2); dfree(m1); dfree(m2);
}

/* the dropout twins validate before any device work: runs without a GPU */
static void test_cuda_bad_input_dropout(void)
{
    float x = 0.0f;
    uint8_t m = 1;
    CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(NULL, &m, &x, 1, 0.1f, 1u, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(&x, NULL, &x, 1, 0.1f, 1u, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(&x, &m, NULL, 1, 0.1f, 1u, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(&x, &m, &x, 0, 0.1f, 1u, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(&x, &m, &x, 1, 1.0f, 1u, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(&x, &m, &x, 1, -0.5f, 1u, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_seeded_forward_cuda(&x, &m, &x, 1, NAN, 1u, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_backward_cuda(NULL, &x, &m, 1, 0.1f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_backward_cuda(&x, NULL, &m, 1, 0.1f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_backward_cuda(&x, &x, NULL, 1, 0.1f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_backward_cuda(&x, &x, &m, 0, 0.1f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_backward_cuda(&x, &x, &m, 1, INFINITY, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_dropout_backward_cuda(&x, &x, &m, 1, 1.0f, NULL), TK_EINVAL);
    CHECK(x == 0.0f && m == 1);
}

/* permutations and single additions: exact. D 1 and odd D, C below and above a block's
   256 threads (3C up to 2304), T ragged */
static void test_heads(void)
{
    static const int shapes[][4] = {{1, 1, 1, 1}, {2, 5, 3, 7}, {3, 17, 4, 33}, {2, 9, 12, 64}};
    NEED_GPU();
    tt_seed(88);
    for (int s = 0; s < 4; s++) {
        const int B = shapes[s][0], T = shapes[s][1], H = shapes[s][2], D = shapes[s][3];
        const size_t n = (size_t)B * T * H * D;
        std::vector<float> qkv = randn(3 * n, 1.0), q(n), k(n), v(n), dq = randn(n, 1.0), dk = randn(n, 1.0), dv = randn(n, 1.0);
        std::vector<float> dqkv = randn(3 * n, 1.0), merged(n), dinp = randn(n, 1.0);
        float *d_qkv = dput(qkv), *d_q = dput(q), *d_k = dput(k), *d_v = dput(v), *d_dq = dput(dq), *d_dk = dput(dk), *d_dv = dput(dv);
        float *d_dqkv = dput(dqkv), *d_merged = dput(merged), *d_dinp = dput(dinp);
        CHECK_INT_EQ(tk_split_heads_forward(q.data(), k.data(), v.data(), qkv.data(), B, T, H, D), TK_OK);
        CHECK_INT_EQ(tk_split_heads_forward_cuda(d_q, d_k, d_v, d_qkv, B, T, H, D, NULL), TK_OK);
        CHECK_DEV_EXACT(d_q, q, n);
        CHECK_DEV_EXACT(d_k, k, n);
        CHECK_DEV_EXACT(d_v, v, n);
        CHECK_INT_EQ(tk_split_heads_backward(dqkv.data(), dq.data(), dk.data(), dv.data(), B, T, H, D), TK_OK);
        CHECK_INT_EQ(tk_split_heads_backward_cuda(d_dqkv, d_dq, d_dk, d_dv, B, T, H, D, NULL), TK_OK);
        CHECK_DEV_EXACT(d_dqkv, dqkv, 3 * n);
        CHECK_INT_EQ(tk_merge_heads_forward(merged.data(), q.data(), B, T, H, D), TK_OK);
        CHECK_INT_EQ(tk_merge_heads_forward_cuda(d_merged, d_q, B, T, H, D, NULL), TK_OK);
        CHECK_DEV_EXACT(d_merged, merged, n);
        CHECK_INT_EQ(tk_merge_heads_backward(dinp.data(), dk.data(), B, T, H, D), TK_OK);
        CHECK_INT_EQ(tk_merge_heads_backward_cuda(d_dinp, d_dk, B, T, H, D, NULL), TK_OK);
        CHECK_DEV_EXACT(d_dinp, dinp, n);
        dfree(d_qkv); dfree(d_q); dfree(d_k); dfree(d_v); dfree(d_dq); dfree(d_dk); dfree(d_dv);
        dfree(d_dqkv); dfree(d_merged); dfree(d_dinp);
    }
}

/* Both sum the squares in double (other orders), then round the root to float: rtol 1e-6.
   n 1100007 exceeds the 1024 x 1024 elements of the capped grid's first stride (the norm
   only: the clip's 4096-block launches would cost the simulation seconds). */
static void test_grad_norm(void)
{
    static const size_t ns[] = {1, 1000, 70001, 1100007};
    NEED_GPU();
    tt_seed(89);
    for (int s = 0; s < 4; s++) {
        const size_t n = ns[s];
        std::vector<float> g = randn(n, 0.3);
        float *d_g = dput(g), ref = -1.0f, got = -1.0f, again = -2.0f, nout = -1.0f, nref = -1.0f;
        CHECK_INT_EQ(tk_grad_norm(g.data(), n, &ref), TK_OK);
        CHECK_INT_EQ(tk_grad_norm_cuda(d_g, n, &got, NULL), TK_OK);
        CHECK_CLOSE(got, ref, 1e-6, 0.0);
        g_worst_norm = fmax(g_worst_norm, fabs((double)got - ref) / ref);
        CHECK_INT_EQ(tk_grad_norm_cuda(d_g, n, &again, NULL), TK_OK); /* deterministic */
        CHECK(memcmp(&got, &again, sizeof got) == 0);
        if (n > 1000000) {
            dfree(d_g);
            continue;
        }
        /* clip below the norm: scaled on the device */
        CHECK_INT_EQ(tk_clip_grad_norm(g.data(), n, 0.5f * ref, &nref), TK_OK);
        CHECK_INT_EQ(tk_clip_grad_norm_cuda(d_g, n, 0.5f * ref, &nout, NULL), TK_OK);
        CHECK_CLOSE(nout, nref, 1e-6, 0.0);
        {
            std::vector<float> h = dget(d_g, n);
            CHECK_ALL_CLOSE(h.data(), g.data(), (long)n, 1e-6, 0.0);
            g = h; /* continue from the same values */
        }
        /* clip above the norm (and no norm_out): unchanged */
        CHECK_INT_EQ(tk_clip_grad_norm_cuda(d_g, n, 2.0f * ref, NULL, NULL), TK_OK);
        CHECK_DEV_EXACT(d_g, g, n);
        dfree(d_g);
    }
    printf("    grad norm worst relative error: %.2e (rtol 1e-6)\n", g_worst_norm);
    {
        /* a NaN: reported, g unchanged; a device pointer for the host norm: refused */
        std::vector<float> g = randn(100, 1.0);
        g[37] = NAN;
        float *d_g = dput(g), nout = 0.0f;
        CHECK_INT_EQ(tk_clip_grad_norm_cuda(d_g, 100, 1.0f, &nout, NULL), TK_OK);
        CHECK(nout != nout);
        std::vector<float> h = dget(d_g, 100);
        CHECK(memcmp(h.data(), g.data(), 100 * sizeof(float)) == 0);
        CHECK_INT_EQ(tk_grad_norm_cuda(d_g, 100, d_g, NULL), TK_EINVAL);
        CHECK_INT_EQ(tk_clip_grad_norm_cuda(d_g, 100, 1.0f, d_g, NULL), TK_EINVAL);
        dfree(d_g);
    }
}

/* the new twins' argument checks run before any device work (no GPU needed) */
static void test_cuda_bad_input_norms_heads(void)
{
    float x = 0.0f;
    CHECK_INT_EQ(tk_rmsnorm_forward_cuda(&x, NULL, &x, NULL, 1, 1, NAN, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rmsnorm_forward_cuda(&x, NULL, &x, NULL, 1, 0, 1e-5f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rmsnorm_forward_cuda(NULL, NULL, &x, NULL, 1, 1, 1e-5f, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rmsnorm_backward_cuda(&x, NULL, &x, &x, NULL, NULL, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rmsnorm_backward_cuda(&x, NULL, &x, &x, NULL, &x, -1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_residual_forward_cuda(&x, &x, &x, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_residual_forward_cuda(&x, NULL, &x, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_residual_backward_cuda(&x, &x, NULL, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_split_heads_forward_cuda(&x, &x, &x, &x, 1, 1, 1, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_split_heads_backward_cuda(&x, &x, NULL, &x, 1, 1, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_merge_heads_forward_cuda(&x, NULL, 1, 1, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_merge_heads_backward_cuda(&x, &x, 1, 0, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_grad_norm_cuda(&x, 1, NULL, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_grad_norm_cuda(&x, 0, &x, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_clip_grad_norm_cuda(&x, 1, 0.0f, NULL, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_clip_grad_norm_cuda(&x, 1, INFINITY, NULL, NULL), TK_EINVAL);
}

/* the plain ops route device buffers to these twins (same bits); mixed buffers: TK_EINVAL */
static void test_plain_routing_norms_heads(void)
{
    const int N = 13, C = 45, B = 2, T = 5, H = 3, D = 5;
    const size_t nc = (size_t)N * C, nh = (size_t)B * T * H * D;
    NEED_GPU();
    tt_seed(90);
    std::vector<float> x = randn(nc, 1.0), w = randn((size_t)C, 1.0), dout = randn(nc, 1.0), hrstd((size_t)N);
    std::vector<float> z(nc, 0.5f), zc((size_t)C, 0.25f), zn((size_t)N, 0.0f), qkv = randn(3 * nh, 1.0);
    float *d_x = dput(x), *d_w = dput(w), *d_dout = dput(dout);
    float *o1 = dput(z), *o2 = dput(z), *r1 = dput(zn), *r2 = dput(zn), *w1 = dput(zc), *w2 = dput(zc);
#define SAME(a, bb, n) CHECK(memcmp(dget(a, n).data(), dget(bb, n).data(), (n) * sizeof(float)) == 0)
    CHECK_INT_EQ(tk_rmsnorm_forward(o1, r1, d_x, d_w, N, C, 1e-5f), TK_OK);
    CHECK_INT_EQ(tk_rmsnorm_forward_cuda(o2, r2, d_x, d_w, N, C, 1e-5f, NULL), TK_OK);
    SAME(o1, o2, nc);
    SAME(r1, r2, (size_t)N);
    CHECK_INT_EQ(tk_rmsnorm_backward(o1, w1, d_dout, d_x, d_w, r1, N, C), TK_OK);
    CHECK_INT_EQ(tk_rmsnorm_backward_cuda(o2, w2, d_dout, d_x, d_w, r2, N, C, NULL), TK_OK);
    SAME(o1, o2, nc);
    SAME(w1, w2, (size_t)C);
    CHECK_INT_EQ(tk_residual_forward(o1, d_x, d_dout, nc), TK_OK);
    CHECK_INT_EQ(tk_residual_forward_cuda(o2, d_x, d_dout, nc, NULL), TK_OK);
    SAME(o1, o2, nc);
    CHECK_INT_EQ(tk_residual_backward(o1, NULL, d_x, nc), TK_OK);
    CHECK_INT_EQ(tk_residual_backward_cuda(o2, NULL, d_x, nc, NULL), TK_OK);
    SAME(o1, o2, nc);
    {
        float *d_qkv = dput(qkv);
        std::vector<float> zh(nh, 0.0f), zq(3 * nh, 1.0f);
        float *a1 = dput(zh), *b1 = dput(zh), *c1 = dput(zh), *a2 = dput(zh), *b2 = dput(zh), *c2 = dput(zh);
        float *g1 = dput(zq), *g2 = dput(zq), *m1 = dput(zh), *m2 = dput(zh);
        CHECK_INT_EQ(tk_split_heads_forward(a1, b1, c1, d_qkv, B, T, H, D), TK_OK);
        CHECK_INT_EQ(tk_split_heads_forward_cuda(a2, b2, c2, d_qkv, B, T, H, D, NULL), TK_OK);
        SAME(a1, a2, nh);
        SAME(b1, b2, nh);
        SAME(c1, c2, nh);
        CHECK_INT_EQ(tk_split_heads_backward(g1, a1, b1, c1, B, T, H, D), TK_OK);
        CHECK_INT_EQ(tk_split_heads_backward_cuda(g2, a2, b2, c2, B, T, H, D, NULL), TK_OK);
        SAME(g1, g2, 3 * nh);
        CHECK_INT_EQ(tk_merge_heads_forward(m1, a1, B, T, H, D), TK_OK);
        CHECK_INT_EQ(tk_merge_heads_forward_cuda(m2, a2, B, T, H, D, NULL), TK_OK);
        SAME(m1, m2, nh);
        CHECK_INT_EQ(tk_merge_heads_backward(a1, b1, B, T, H, D), TK_OK);
        CHECK_INT_EQ(tk_merge_heads_backward_cuda(a2, b2, B, T, H, D, NULL), TK_OK);
        SAME(a1, a2, nh);
        /* mixed */
        CHECK_INT_EQ(tk_split_heads_forward(a1, b1, c1, qkv.data(), B, T, H, D), TK_EINVAL);
        CHECK_INT_EQ(tk_split_heads_backward(g1, a1, zh.data(), c1, B, T, H, D), TK_EINVAL);
        CHECK_INT_EQ(tk_merge_heads_forward(m1, zh.data(), B, T, H, D), TK_EINVAL);
        CHECK_INT_EQ(tk_merge_heads_backward(a1, zh.data(), B, T, H, D), TK_EINVAL);
        dfree(d_qkv); dfree(a1); dfree(b1); dfree(c1); dfree(a2); dfree(b2); dfree(c2);
        dfree(g1); dfree(g2); dfree(m1); dfree(m2);
    }
    {
        float n1 = -1.0f, n2 = -2.0f, c1 = -1.0f, c2 = -2.0f;
        float *p1 = dput(x), *p2 = dput(x);
        CHECK_INT_EQ(tk_grad_norm(d_x, nc, &n1), TK_OK);
        CHECK_INT_EQ(tk_grad_norm_cuda(d_x, nc, &n2, NULL), TK_OK);
        CHECK(memcmp(&n1, &n2, sizeof n1) == 0);
        CHECK_INT_EQ(tk_clip_grad_norm(p1, nc, 0.5f * n1, &c1), TK_OK);
        CHECK_INT_EQ(tk_clip_grad_norm_cuda(p2, nc, 0.5f * n1, &c2, NULL), TK_OK);
        CHECK(memcmp(&c1, &c2, sizeof c1) == 0);
        SAME(p1, p2, nc);
        CHECK_INT_EQ(tk_grad_norm(d_x, nc, d_w), TK_EINVAL); /* the norm is a host float */
        dfree(p1); dfree(p2);
    }
    /* a device output with a host input (or the reverse for the backward): refused */
    CHECK_INT_EQ(tk_rmsnorm_forward(o1, r1, x.data(), d_w, N, C, 1e-5f), TK_EINVAL);
    CHECK_INT_EQ(tk_rmsnorm_forward(o1, hrstd.data(), d_x, d_w, N, C, 1e-5f), TK_EINVAL);
    CHECK_INT_EQ(tk_rmsnorm_backward(o1, w1, d_dout, d_x, w.data(), r1, N, C), TK_EINVAL);
    CHECK_INT_EQ(tk_residual_forward(o1, d_x, dout.data(), nc), TK_EINVAL);
    CHECK_INT_EQ(tk_residual_backward(z.data(), NULL, d_x, nc), TK_EINVAL);
#undef SAME
    dfree(d_x); dfree(d_w); dfree(d_dout); dfree(o1); dfree(o2); dfree(r1); dfree(r2); dfree(w1); dfree(w2);
}

/* makes a launch fail (more threads than a block may have): a pending error */
static __global__ void parity_noop_kernel(int *p) { (void)p; }

static void test_device_memory(void)
{
    const size_t n = 1001;
    int dummy = 0;
    void *p = &dummy;
    NEED_GPU();
    tt_seed(91);
    CHECK_INT_EQ(tk_device_alloc(NULL, 16), TK_EINVAL);
    CHECK_INT_EQ(tk_device_alloc(&p, 0), TK_EINVAL);
    CHECK(p == NULL);
    CHECK_INT_EQ(tk_device_alloc(&p, n * sizeof(float)), TK_OK);
    CHECK(p != NULL);
    float *d = (float *)p, *d2 = NULL;
    CHECK_INT_EQ(tk_device_alloc((void **)&d2, n * sizeof(float)), TK_OK);
    std::vector<float> h = randn(n, 1.0), back(n, 0.0f), hcopy(n, 0.0f);
    CHECK_INT_EQ(tk_is_device(d), 1);
    CHECK_INT_EQ(tk_is_device(d + 7), 1);
    CHECK_INT_EQ(tk_is_device(h.data()), 0);
    CHECK_INT_EQ(tk_is_device(NULL), 0);
    CHECK_INT_EQ(tk_copy(d, h.data(), n * sizeof(float)), TK_OK);      /* host -> device */
    CHECK_INT_EQ(tk_copy(d2, d, n * sizeof(float)), TK_OK);            /* device -> device */
    CHECK_INT_EQ(tk_copy(back.data(), d2, n * sizeof(float)), TK_OK);  /* device -> host */
    CHECK(memcmp(back.data(), h.data(), n * sizeof(float)) == 0);
    CHECK_INT_EQ(tk_copy(hcopy.data(), h.data(), n * sizeof(float)), TK_OK); /* host -> host */
    CHECK(memcmp(hcopy.data(), h.data(), n * sizeof(float)) == 0);
    CHECK_INT_EQ(tk_fill_zero(d2 + 1, (n - 2) * sizeof(float)), TK_OK); /* device, inside */
    CHECK_INT_EQ(tk_copy(back.data(), d2, n * sizeof(float)), TK_OK);
    CHECK(back[0] == h[0] && back[n - 1] == h[n - 1]);
    {
        int nz = 0;
        for (size_t i = 1; i + 1 < n; i++) nz += back[i] != 0.0f;
        CHECK_INT_EQ(nz, 0);
    }
    CHECK_INT_EQ(tk_fill_zero(hcopy.data(), n * sizeof(float)), TK_OK); /* host */
    CHECK(hcopy[0] == 0.0f && hcopy[n - 1] == 0.0f);
    CHECK_INT_EQ(tk_copy(NULL, d, 4), TK_EINVAL);
    CHECK_INT_EQ(tk_copy(d, NULL, 4), TK_EINVAL);
    CHECK_INT_EQ(tk_copy(NULL, NULL, 0), TK_OK);
    CHECK_INT_EQ(tk_fill_zero(NULL, 4), TK_EINVAL);
    CHECK_INT_EQ(tk_fill_zero(NULL, 0), TK_OK);
    /* the stream-ordered forms: host -> device and device -> device queued, zeroing
       queued, then one synchronising read; the same bytes as the synchronous ones */
    {
        std::vector<float> h2 = randn(n, 1.0), stage(h2);
#ifdef ATTNKIT_CUDA_SIM
        ak_sim_counts_reset();
#endif
        CHECK_INT_EQ(tk_copy_async(d, stage.data(), n * sizeof(float), NULL), TK_OK); /* host -> device */
        for (size_t i = 0; i < n; i++) stage[i] = -1.0f; /* pageable: staged, reusable at once */
        CHECK_INT_EQ(tk_copy_async(d2, d, n * sizeof(float), NULL), TK_OK);       /* device -> device */
        CHECK_INT_EQ(tk_fill_zero_async(d2 + 2, (n - 4) * sizeof(float), NULL), TK_OK);
        CHECK_INT_EQ(tk_copy_async(d2, d2, 0, NULL), TK_OK);
        CHECK_INT_EQ(tk_copy_async(NULL, NULL, 0, NULL), TK_OK);
        CHECK_INT_EQ(tk_copy_async(NULL, d, 4, NULL), TK_EINVAL);
        CHECK_INT_EQ(tk_copy_async(d, NULL, 4, NULL), TK_EINVAL);
        CHECK_INT_EQ(tk_fill_zero_async(NULL, 0, NULL), TK_OK);
        CHECK_INT_EQ(tk_fill_zero_async(NULL, 4, NULL), TK_EINVAL);
#ifdef ATTNKIT_CUDA_SIM
        {
            ak_sim_counts c = ak_sim_counts_get(); /* no host wait, no pointer query so far */
            CHECK(c.sync_calls == 0 && c.syncs == 0 && c.d2h == 0 && c.ptr_queries == 0 && c.allocs == 0);
        }
#endif
        CHECK_INT_EQ(tk_copy(back.data(), d2, n * sizeof(float)), TK_OK); /* the synchronising read */
        CHECK(back[0] == h2[0] && back[1] == h2[1] && back[n - 2] == h2[n - 2] && back[n - 1] == h2[n - 1]);
        {
            int nz = 0;
            for (size_t i = 2; i + 2 < n; i++) nz += back[i] != 0.0f;
            CHECK_INT_EQ(nz, 0);
        }
        CHECK_INT_EQ(tk_copy(back.data(), d, n * sizeof(float)), TK_OK);
        CHECK(memcmp(back.data(), h2.data(), n * sizeof(float)) == 0);
        /* tk_copy_to_host: the same bytes after the stream's queued work, one wait, no
           pointer query */
        {
            std::vector<float> b2(n, -3.0f);
            CHECK_INT_EQ(tk_copy_async(d2, d, n * sizeof(float), NULL), TK_OK);
#ifdef ATTNKIT_CUDA_SIM
            ak_sim_counts_reset();
#endif
            CHECK_INT_EQ(tk_copy_to_host(b2.data(), d2, n * sizeof(float), NULL), TK_OK);
#ifdef ATTNKIT_CUDA_SIM
            {
                ak_sim_counts c = ak_sim_counts_get();
                CHECK(c.d2h == 1 && c.syncs == 1 && c.ptr_queries == 0 && c.allocs == 0);
            }
#endif
            CHECK(memcmp(b2.data(), h2.data(), n * sizeof(float)) == 0);
            CHECK_INT_EQ(tk_copy_to_host(b2.data(), d2, 0, NULL), TK_OK);
            CHECK_INT_EQ(tk_copy_to_host(NULL, NULL, 0, NULL), TK_OK);
            CHECK_INT_EQ(tk_copy_to_host(NULL, d2, 4, NULL), TK_EINVAL);
            CHECK_INT_EQ(tk_copy_to_host(b2.data(), NULL, 4, NULL), TK_EINVAL);
        }
        /* a host destination for the memset is refused by the runtime */
        if (!getenv("PARITY_NO_PLANTED_ERRORS")) CHECK_INT_EQ(tk_fill_zero_async(hcopy.data(), 4, NULL), TK_ECUDA);
    }
    /* the ops' temporaries come from the cached scratch: after a first call, the same call
       allocates nothing; tk_cuda_release frees the cache, a later call grows it again */
    {
        float nrm = 0.0f, nrm2 = 0.0f;
        CHECK_INT_EQ(tk_grad_norm_cuda(d, n, &nrm, NULL), TK_OK);
#ifdef ATTNKIT_CUDA_SIM
        ak_sim_counts_reset();
#endif
        CHECK_INT_EQ(tk_grad_norm_cuda(d, n, &nrm2, NULL), TK_OK);
#ifdef ATTNKIT_CUDA_SIM
        CHECK(ak_sim_counts_get().allocs == 0);
#endif
        CHECK(nrm == nrm2 && nrm > 0.0f);
        CHECK_INT_EQ(tk_cuda_release(), TK_OK);
        CHECK_INT_EQ(tk_grad_norm_cuda(d, n, &nrm2, NULL), TK_OK);
        CHECK(nrm == nrm2);
    }
    CHECK_INT_EQ(tk_device_synchronize(), TK_OK);
    /* a failed launch (the simulation reports it on stderr) is returned once by
       tk_device_synchronize, then cleared */
    if (getenv("PARITY_NO_PLANTED_ERRORS")) { /* under compute-sanitizer (tools/gpu_run.sh): it reports the API error */
        printf("    planted failed launch skipped (PARITY_NO_PLANTED_ERRORS)\n");
    } else {
        PARITY_LAUNCH(parity_noop_kernel, 1, 2048, 0, (cudaStream_t)0, (int *)NULL);
        CHECK_INT_EQ(tk_device_synchronize(), TK_ECUDA);
        CHECK_INT_EQ(tk_device_synchronize(), TK_OK);
    }
    tk_device_free(d);
    tk_device_free(d2);
    tk_device_free(NULL);
}

/* ---- sigmoid, row ops, causal mean gate, row gather / combine: every op through its plain
   (routed) entry with device buffers against the same call on host buffers */
/* the device floats at d against the host vector ref (one copy), within rtol / atol; the
   worst error relative to the tolerance's scale goes to worst */
#define DEV_CLOSE(d, ref, rtol, atol, worst)                                                \
    do {                                                                                    \
        const std::vector<float> dev_ = dget(d, (ref).size());                              \
        CHECK_ALL_CLOSE(dev_.data(), (ref).data(), (long)(ref).size(), rtol, atol);         \
        (worst) = fmax((worst), worst_rel(dev_, (ref), (rtol), (atol)));                    \
    } while (0)

static void test_sigmoid_rows(void)
{
    static const size_t ns[] = {1, 31, 777, 10007};
    double wf = 0.0, wb = 0.0;
    NEED_GPU();
    tt_seed(101);
    for (int s = 0; s < 4; s++) {
        const size_t n = ns[s];
        std::vector<float> x = randn(n, 3.0), dy = randn(n, 1.0), y(n, 9.0f), dx = randn(n, 1.0);
        if (n > 4) {
            x[1] = 40.0f; /* saturated tails: the CPU's exp clamps at -87 / 88 */
            x[2] = -100.0f;
            x[3] = 0.0f;
        }
        float *d_x = dput(x), *d_y = dput(y), *d_dy = dput(dy), *d_dx = dput(dx), *d_al = dput(x);
        CHECK_INT_EQ(tk_sigmoid_forward(y.data(), x.data(), n), TK_OK);
        CHECK_INT_EQ(tk_sigmoid_forward(d_y, d_x, n), TK_OK);
        /* atol 1e-30: sigmoid(-100) is ~6e-39 on the CPU (its exp clamps), 0 on the device */
        DEV_CLOSE(d_y, y, 1e-6, 1e-30, wf);
        CHECK_INT_EQ(tk_sigmoid_forward(d_al, d_al, n), TK_OK); /* in place */
        DEV_CLOSE(d_al, y, 1e-6, 1e-30, wf);
        /* backward from the CPU's y on both sides, into a nonzero dx */
        float *d_yc = dput(y);
        CHECK_INT_EQ(tk_sigmoid_backward(dx.data(), y.data(), dy.data(), n), TK_OK);
        CHECK_INT_EQ(tk_sigmoid_backward(d_dx, d_yc, d_dy, n), TK_OK);
        DEV_CLOSE(d_dx, dx, 1e-6, 1e-7, wb);
        /* tk_scale (a host scalar): bit-identical (one product) */
        {
            std::vector<float> sc(n);
            CHECK_INT_EQ(tk_scale(sc.data(), x.data(), -0.37f, n), TK_OK);
            CHECK_INT_EQ(tk_scale(d_x, d_x, -0.37f, n), TK_OK); /* in place */
            CHECK(dget(d_x, n) == sc);
            CHECK_INT_EQ(tk_scale(d_x, d_x, (float)INFINITY, n), TK_EINVAL);
            CHECK_INT_EQ(tk_scale(d_x, x.data(), 2.0f, n), TK_EINVAL); /* mixed sides */
            /* tk_shift (a host scalar as a kernel argument): bit-identical (one addition) */
            CHECK_INT_EQ(tk_shift(sc.data(), sc.data(), 0.731f, n), TK_OK);
            CHECK_INT_EQ(tk_shift_cuda(d_x, d_x, 0.731f, n, NULL), TK_OK); /* in place */
            CHECK(dget(d_x, n) == sc);
            CHECK_INT_EQ(tk_shift(d_x, x.data(), 2.0f, n), TK_EINVAL); /* mixed sides */
        }
        dfree(d_x); dfree(d_y); dfree(d_dy); dfree(d_dx); dfree(d_al); dfree(d_yc);
    }
    printf("    sigmoid fwd %.2e bwd %.2e (of rtol 1e-6)\n", wf, wb);
}

/* the causal depthwise convolution: forward (write and accumulate) and backward through
   the plain entries with device buffers against host buffers: bit-identical (the same
   products and sums in the same order) */
static void test_causal_dwconv(void)
{
    static const int shapes[3][4] = {{1, 1, 1, 1}, {2, 9, 5, 3}, {3, 40, 33, 4}};
    NEED_GPU();
    tt_seed(107);
    for (int si = 0; si < 3; si++) {
        const int B = shapes[si][0], T = shapes[si][1], C = shapes[si][2], K = shapes[si][3];
        const size_t n = (size_t)B * T * C;
        std::vector<float> x = randn(n, 1.0), w = randn((size_t)K * C, 0.5), g = randn(n, 1.0);
        std::vector<float> y(n), y0 = randn(n, 1.0), dx = randn(n, 1.0), dw = randn((size_t)K * C, 1.0);
        float *d_x = dput(x), *d_w = dput(w), *d_g = dput(g), *d_y = dput(y0), *d_dx = dput(dx), *d_dw = dput(dw);
        y = y0;
        CHECK_INT_EQ(tk_causal_dwconv_forward(y.data(), x.data(), w.data(), B, T, C, K, 1), TK_OK);
        CHECK_INT_EQ(tk_causal_dwconv_forward(d_y, d_x, d_w, B, T, C, K, 1), TK_OK);
        CHECK(dget(d_y, n) == y);
        CHECK_INT_EQ(tk_causal_dwconv_forward(y.data(), x.data(), w.data(), B, T, C, K, 0), TK_OK);
        CHECK_INT_EQ(tk_causal_dwconv_forward(d_y, d_x, d_w, B, T, C, K, 0), TK_OK);
        CHECK(dget(d_y, n) == y);
        CHECK_INT_EQ(tk_causal_dwconv_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), B, T, C, K), TK_OK);
        CHECK_INT_EQ(tk_causal_dwconv_backward(d_dx, d_dw, d_g, d_x, d_w, B, T, C, K), TK_OK);
        CHECK(dget(d_dx, n) == dx);
        CHECK(dget(d_dw, (size_t)K * C) == dw);
        CHECK_INT_EQ(tk_causal_dwconv_forward(d_y, x.data(), d_w, B, T, C, K, 0), TK_EINVAL); /* mixed */
        CHECK_INT_EQ(tk_causal_dwconv_forward_cuda(d_y, d_x, d_w, B, T, C, 0, 0, NULL), TK_EINVAL);
        dfree(d_x); dfree(d_w); dfree(d_g); dfree(d_y); dfree(d_dx); dfree(d_dw);
    }
}

static void test_row_ops(void)
{
    static const int shapes[][2] = {{1, 1}, {1, 777}, {37, 1}, {33, 45}, {130, 777}};
    double ws = 0.0, wd = 0.0, wr = 0.0;
    NEED_GPU();
    tt_seed(102);
    for (int s = 0; s < 5; s++) {
        const int N = shapes[s][0], C = shapes[s][1];
        const size_t nc = (size_t)N * C;
        std::vector<float> x = randn(nc, 1.0), br = randn(nc, 1.0), sc = randn((size_t)N, 1.0);
        std::vector<float> out(nc, 5.0f), dot = randn((size_t)N, 1.0);
        float *d_x = dput(x), *d_br = dput(br), *d_s = dput(sc), *d_out = dput(out), *d_dot = dput(dot);
        float *d_al = dput(x);
        CHECK_INT_EQ(tk_rowscale(out.data(), x.data(), sc.data(), N, C), TK_OK);
        CHECK_INT_EQ(tk_rowscale(d_out, d_x, d_s, N, C), TK_OK);
        DEV_CLOSE(d_out, out, 1e-6, 0.0, ws);
        CHECK_INT_EQ(tk_rowscale(d_al, d_al, d_s, N, C), TK_OK); /* out aliasing x */
        DEV_CLOSE(d_al, out, 1e-6, 0.0, ws);
        /* rowdot accumulates into a random start, twice */
        for (int rep = 0; rep < 2; rep++) {
            CHECK_INT_EQ(tk_rowdot(dot.data(), x.data(), br.data(), N, C), TK_OK);
            CHECK_INT_EQ(tk_rowdot(d_dot, d_x, d_br, N, C), TK_OK);
        }
        DEV_CLOSE(d_dot, dot, 1e-5, 1e-6, wd);
        CHECK_INT_EQ(tk_residual_rows_forward(out.data(), x.data(), br.data(), sc.data(), N, C), TK_OK);
        CHECK_INT_EQ(tk_residual_rows_forward(d_out, d_x, d_br, d_s, N, C), TK_OK);
        DEV_CLOSE(d_out, out, 1e-6, 1e-7, wr);
        CHECK_INT_EQ(tk_copy(d_al, x.data(), nc * sizeof(float)), TK_OK);
        CHECK_INT_EQ(tk_residual_rows_forward(d_al, d_al, d_br, d_s, N, C), TK_OK); /* out aliasing x */
        DEV_CLOSE(d_al, out, 1e-6, 1e-7, wr);
        dfree(d_x); dfree(d_br); dfree(d_s); dfree(d_out); dfree(d_dot); dfree(d_al);
    }
    printf("    rowscale %.2e (of rtol 1e-6), rowdot %.2e (of rtol 1e-5), residual_rows %.2e (of rtol 1e-6)\n",
           ws, wd, wr);
}

static void test_causal_mean_gate(void)
{
    static const int shapes[][3] = {{1, 1, 1}, {2, 1, 3}, {1, 300, 1}, {2, 37, 3}, {3, 300, 12}, {2, 64, 256}};
    double wg = 0.0, wsg = 0.0, wdz = 0.0;
    NEED_GPU();
    tt_seed(103);
    for (int s = 0; s < 6; s++) {
        const int B = shapes[s][0], T = shapes[s][1], H = shapes[s][2];
        const size_t bt = (size_t)B * T, n = bt * H;
        std::vector<float> z = randn(n, 1.5), g(bt, 3.0f), sig(n, 3.0f), dg = randn(bt, 1.0), dz = randn(n, 1.0);
        float *d_z = dput(z), *d_g = dput(g), *d_sig = dput(sig), *d_dg = dput(dg), *d_dz = dput(dz);
        CHECK_INT_EQ(tk_causal_mean_gate_forward(g.data(), sig.data(), z.data(), B, T, H), TK_OK);
        CHECK_INT_EQ(tk_causal_mean_gate_forward(d_g, d_sig, d_z, B, T, H), TK_OK);
        DEV_CLOSE(d_sig, sig, 1e-6, 0.0, wsg);
        DEV_CLOSE(d_g, g, 1e-5, 0.0, wg);
        /* the backward from the CPU's sig on both sides, accumulating twice */
        float *d_sc = dput(sig);
        for (int rep = 0; rep < 2; rep++) {
            CHECK_INT_EQ(tk_causal_mean_gate_backward(dz.data(), dg.data(), sig.data(), B, T, H), TK_OK);
            CHECK_INT_EQ(tk_causal_mean_gate_backward(d_dz, d_dg, d_sc, B, T, H), TK_OK);
        }
        DEV_CLOSE(d_dz, dz, 1e-5, 1e-7, wdz);
        dfree(d_z); dfree(d_g); dfree(d_sig); dfree(d_dg); dfree(d_dz); dfree(d_sc);
    }
    printf("    causal mean gate: sig %.2e (of rtol 1e-6), g %.2e, dz %.2e (of rtol 1e-5)\n", wsg, wg, wdz);
}

/* idx (cnt) in [0, nsrc): distinct (a stride coprime to nsrc walks the rows; cnt <= nsrc)
   or random with repeats */
static std::vector<int> rows_idx(size_t cnt, int nsrc, int distinct)
{
    std::vector<int> idx(cnt);
    int stride = 1;
    if (distinct) {
        static const int primes[] = {7, 11, 13, 17, 19, 23};
        for (int p = 0; p < 6; p++)
            if (nsrc % primes[p] != 0) {
                stride = primes[p];
                break;
            }
    }
    for (size_t i = 0; i < cnt; i++)
        idx[i] = distinct ? (int)((i * (size_t)stride + 3) % (size_t)nsrc) : (int)(tt_uniform() * nsrc) % nsrc;
    return idx;
}

static void test_rows_gather_combine(void)
{
    /* nsrc, N, K, C (gather: n = N * K rows) */
    static const int shapes[][4] = {{1, 1, 1, 1}, {6, 3, 2, 1}, {17, 8, 2, 777}, {64, 32, 1, 33}, {40, 20, 2, 5}, {9, 3, 3, 64}};
    double wgat = 0.0, wf = 0.0, wds = 0.0, wdw = 0.0;
    NEED_GPU();
    tt_seed(104);
    for (int s = 0; s < 6; s++) {
        const int nsrc = shapes[s][0], N = shapes[s][1], K = shapes[s][2], C = shapes[s][3];
        const size_t nk = (size_t)N * K, nc = (size_t)N * C, ns = (size_t)nsrc * C;
        const std::vector<int> rep = rows_idx(nk, nsrc, 0), dis = rows_idx(nk, nsrc, 1);
        std::vector<float> src = randn(ns, 1.0), w = randn(nk, 1.0), dout = randn(nc, 1.0);
        std::vector<float> gat(nk * C, 4.0f), out0 = randn(nc, 1.0), dsrc0 = randn(ns, 1.0), dw0 = randn(nk, 1.0);
        int *d_rep = dput(rep), *d_dis = dput(dis);
        float *d_src = dput(src), *d_w = dput(w), *d_dout = dput(dout), *d_gat = dput(gat);
        /* gather (repeats are fine) */
        CHECK_INT_EQ(tk_rows_gather(gat.data(), src.data(), nsrc, rep.data(), (int)nk, C), TK_OK);
        CHECK_INT_EQ(tk_rows_gather(d_gat, d_src, nsrc, d_rep, (int)nk, C), TK_OK);
        DEV_CLOSE(d_gat, gat, 0.0, 0.0, wgat);
        /* combine forward: w or NULL, overwrite or accumulate, repeated idx */
        for (int wi = 0; wi < 2; wi++)
            for (int acc = 0; acc < 2; acc++) {
                std::vector<float> out = out0;
                float *d_out = dput(out0);
                const float *hw = wi ? w.data() : NULL, *dw_ = wi ? d_w : NULL;
                CHECK_INT_EQ(tk_rows_combine_forward(out.data(), src.data(), nsrc, rep.data(), hw, N, K, C, acc), TK_OK);
                CHECK_INT_EQ(tk_rows_combine_forward(d_out, d_src, nsrc, d_rep, dw_, N, K, C, acc), TK_OK);
                DEV_CLOSE(d_out, out, 1e-6, 1e-7, wf);
                dfree(d_out);
            }
        /* combine backward (distinct idx for dsrc), into random starts: both, dsrc alone
           (src NULL), dw alone (repeated idx: fine for dw) */
        for (int wi = 0; wi < 2; wi++) {
            std::vector<float> dsrc = dsrc0, dw = dw0, dw2 = dw0;
            float *d_dsrc = dput(dsrc0), *d_dw = dput(dw0), *d_dw2 = dput(dw0);
            const float *hw = wi ? w.data() : NULL, *dw_ = wi ? d_w : NULL;
            CHECK_INT_EQ(tk_rows_combine_backward(dsrc.data(), dw.data(), dout.data(), src.data(), nsrc, dis.data(), hw, N, K, C), TK_OK);
            CHECK_INT_EQ(tk_rows_combine_backward(d_dsrc, d_dw, d_dout, d_src, nsrc, d_dis, dw_, N, K, C), TK_OK);
            CHECK_INT_EQ(tk_rows_combine_backward(dsrc.data(), NULL, dout.data(), NULL, nsrc, dis.data(), hw, N, K, C), TK_OK);
            CHECK_INT_EQ(tk_rows_combine_backward(d_dsrc, NULL, d_dout, NULL, nsrc, d_dis, dw_, N, K, C), TK_OK);
            CHECK_INT_EQ(tk_rows_combine_backward(NULL, dw2.data(), dout.data(), src.data(), nsrc, rep.data(), hw, N, K, C), TK_OK);
            CHECK_INT_EQ(tk_rows_combine_backward(NULL, d_dw2, d_dout, d_src, nsrc, d_rep, dw_, N, K, C), TK_OK);
            DEV_CLOSE(d_dsrc, dsrc, 1e-6, 1e-7, wds);
            DEV_CLOSE(d_dw, dw, 1e-5, 1e-6, wdw);
            DEV_CLOSE(d_dw2, dw2, 1e-5, 1e-6, wdw);
            dfree(d_dsrc); dfree(d_dw); dfree(d_dw2);
        }
        dfree(d_rep); dfree(d_dis); dfree(d_src); dfree(d_w); dfree(d_dout); dfree(d_gat);
    }
    printf("    gather %.2e (exact), combine fwd %.2e, dsrc %.2e (of rtol 1e-6), dw %.2e (of rtol 1e-5)\n", wgat, wf,
           wds, wdw);
}

/* Out-of-range indices on the device (not checked on the host): tk_rows_gather writes a
   zero row, the combine skips the term (forward: nothing added; backward: no dsrc row, dw
   unchanged); the CPU refuses the same indices with TK_EINVAL */
static void test_rows_bad_index_device(void)
{
    const int nsrc = 5, N = 4, K = 2, C = 33;
    const size_t nk = (size_t)N * K, nc = (size_t)N * C, ns = (size_t)nsrc * C;
    NEED_GPU();
    tt_seed(105);
    std::vector<int> idx = {0, 4, -1, 2, 5, 1, 3, 2147483647};
    std::vector<float> src = randn(ns, 1.0), w = randn(nk, 1.0), dout = randn(nc, 1.0), gat(nk * C, 4.0f);
    std::vector<float> out0 = randn(nc, 1.0), dsrc0 = randn(ns, 1.0), dw0 = randn(nk, 1.0);
    int *d_idx = dput(idx);
    float *d_src = dput(src), *d_w = dput(w), *d_dout = dput(dout), *d_gat = dput(gat);
    /* the CPU: refused, nothing written */
    {
        std::vector<float> h = gat;
        CHECK_INT_EQ(tk_rows_gather(h.data(), src.data(), nsrc, idx.data(), (int)nk, C), TK_ERANGE);
        CHECK(memcmp(h.data(), gat.data(), h.size() * sizeof(float)) == 0);
    }
    /* the reference: a weight of 0 on index 0 for each bad entry (adds exactly nothing) */
    std::vector<int> okidx = idx;
    std::vector<float> w0 = w;
    for (size_t r = 0; r < nk; r++)
        if (idx[r] < 0 || idx[r] >= nsrc) {
            okidx[r] = 0;
            w0[r] = 0.0f;
        }
    {
        std::vector<float> want(nk * C, 0.0f);
        for (size_t r = 0; r < nk; r++)
            if (idx[r] >= 0 && idx[r] < nsrc) memcpy(&want[r * C], &src[(size_t)idx[r] * C], C * sizeof(float));
        CHECK_INT_EQ(tk_rows_gather(d_gat, d_src, nsrc, d_idx, (int)nk, C), TK_OK);
        const std::vector<float> g = dget(d_gat, want.size());
        CHECK(memcmp(g.data(), want.data(), want.size() * sizeof(float)) == 0);
    }
    for (int acc = 0; acc < 2; acc++) {
        std::vector<float> out = out0;
        float *d_out = dput(out0);
        CHECK_INT_EQ(tk_rows_combine_forward(out.data(), src.data(), nsrc, okidx.data(), w0.data(), N, K, C, acc), TK_OK);
        CHECK_INT_EQ(tk_rows_combine_forward(d_out, d_src, nsrc, d_idx, d_w, N, K, C, acc), TK_OK);
        const std::vector<float> g = dget(d_out, nc);
        CHECK_ALL_CLOSE(g.data(), out.data(), (long)nc, 1e-6, 1e-7);
        CHECK_INT_EQ(tk_rows_combine_forward(out.data(), src.data(), nsrc, idx.data(), w.data(), N, K, C, acc), TK_ERANGE);
        dfree(d_out);
    }
    {
        std::vector<float> dsrc = dsrc0, dw = dw0;
        float *d_dsrc = dput(dsrc0), *d_dw = dput(dw0);
        CHECK_INT_EQ(tk_rows_combine_backward(dsrc.data(), dw.data(), dout.data(), src.data(), nsrc, okidx.data(), w0.data(), N, K, C), TK_OK);
        for (size_t r = 0; r < nk; r++)
            if (idx[r] < 0 || idx[r] >= nsrc) dw[r] = dw0[r]; /* skipped on the device */
        CHECK_INT_EQ(tk_rows_combine_backward(d_dsrc, d_dw, d_dout, d_src, nsrc, d_idx, d_w, N, K, C), TK_OK);
        const std::vector<float> gs = dget(d_dsrc, ns), gw = dget(d_dw, nk);
        CHECK_ALL_CLOSE(gs.data(), dsrc.data(), (long)ns, 1e-6, 1e-7);
        CHECK_ALL_CLOSE(gw.data(), dw.data(), (long)nk, 1e-5, 1e-6);
        std::vector<float> h = dsrc0;
        CHECK_INT_EQ(tk_rows_combine_backward(h.data(), NULL, dout.data(), NULL, nsrc, idx.data(), w.data(), N, K, C), TK_ERANGE);
        CHECK(memcmp(h.data(), dsrc0.data(), ns * sizeof(float)) == 0);
        dfree(d_dsrc); dfree(d_dw);
    }
    dfree(d_idx); dfree(d_src); dfree(d_w); dfree(d_dout); dfree(d_gat);
}

/* device and host buffers mixed: TK_EINVAL before anything is read or written, in both
   directions (a device output with a host input; a host output with a device input) */
static void test_rows_mixed_sides(void)
{
    const int N = 3, C = 5, B = 1, T = 3, H = 5, nsrc = 4, K = 1;
    const size_t nc = (size_t)N * C;
    NEED_GPU();
    tt_seed(106);
    std::vector<float> x = randn(nc, 1.0), s = randn((size_t)N, 1.0), o(nc, 7.0f), on((size_t)N, 7.0f);
    std::vector<float> src = randn((size_t)nsrc * C, 1.0), dsrc((size_t)nsrc * C, 7.0f);
    std::vector<int> idx = {0, 3, 1};
    float *d_x = dput(x), *d_s = dput(s), *d_o = dput(o), *d_on = dput(on), *d_src = dput(src), *d_dsrc = dput(dsrc);
    int *d_idx = dput(idx);
    /* device output, one host input */
    CHECK_INT_EQ(tk_sigmoid_forward(d_o, x.data(), nc), TK_EINVAL);
    CHECK_INT_EQ(tk_sigmoid_backward(d_o, d_x, x.data(), nc), TK_EINVAL);
    CHECK_INT_EQ(tk_rowscale(d_o, d_x, s.data(), N, C), TK_EINVAL);
    CHECK_INT_EQ(tk_rowdot(d_on, x.data(), d_x, N, C), TK_EINVAL);
    CHECK_INT_EQ(tk_residual_rows_forward(d_o, d_x, d_x, s.data(), N, C), TK_EINVAL);
    CHECK_INT_EQ(tk_causal_mean_gate_forward(d_on, d_o, x.data(), B, T, H), TK_EINVAL);
    CHECK_INT_EQ(tk_causal_mean_gate_forward(d_on, o.data(), d_x, B, T, H), TK_EINVAL);
    CHECK_INT_EQ(tk_causal_mean_gate_backward(d_o, s.data(), d_x, B, T, H), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_gather(d_o, d_src, nsrc, idx.data(), N, C), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_forward(d_o, src.data(), nsrc, d_idx, NULL, N, K, C, 0), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_forward(d_o, d_src, nsrc, d_idx, s.data(), N, K, C, 1), TK_EINVAL);
    /* the backward decides on dout: a device dout with a host dsrc, dw, src or idx */
    CHECK_INT_EQ(tk_rows_combine_backward(dsrc.data(), NULL, d_x, NULL, nsrc, d_idx, NULL, N, K, C), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_backward(d_dsrc, on.data(), d_x, d_src, nsrc, d_idx, NULL, N, K, C), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_backward(NULL, d_on, d_x, src.data(), nsrc, d_idx, NULL, N, K, C), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_backward(d_dsrc, NULL, d_x, NULL, nsrc, idx.data(), NULL, N, K, C), TK_EINVAL);
    /* host output, one device input */
    CHECK_INT_EQ(tk_sigmoid_forward(o.data(), d_x, nc), TK_EINVAL);
    CHECK_INT_EQ(tk_rowdot(on.data(), x.data(), d_x, N, C), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_gather(o.data(), src.data(), nsrc, d_idx, N, C), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_backward(dsrc.data(), NULL, x.data(), NULL, nsrc, idx.data(), d_s, N, K, C), TK_EINVAL);
    {
        const std::vector<float> go = dget(d_o, nc), gon = dget(d_on, (size_t)N), gds = dget(d_dsrc, dsrc.size());
        size_t bad = 0;
        for (size_t i = 0; i < nc; i++) bad += go[i] != 7.0f || o[i] != 7.0f;
        for (size_t i = 0; i < (size_t)N; i++) bad += gon[i] != 7.0f || on[i] != 7.0f;
        for (size_t i = 0; i < dsrc.size(); i++) bad += gds[i] != 7.0f || dsrc[i] != 7.0f;
        CHECK(bad == 0);
    }
    dfree(d_x); dfree(d_s); dfree(d_o); dfree(d_on); dfree(d_src); dfree(d_dsrc); dfree(d_idx);
}

/* the twins validate before any device work: runs without a GPU */
static void test_cuda_bad_input_rows(void)
{
    float x[4] = {0, 0, 0, 0};
    int i = 0;
    CHECK_INT_EQ(tk_sigmoid_forward_cuda(NULL, x, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_sigmoid_forward_cuda(x, x, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_sigmoid_backward_cuda(x, x, NULL, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rowscale_cuda(x, x, NULL, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rowscale_cuda(x, x, x, 0, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rowdot_cuda(x, NULL, x, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rowdot_cuda(x, x, x, 1, -1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_residual_rows_forward_cuda(x, x, x, NULL, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_residual_rows_forward_cuda(x, x, x, x, 1, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_causal_mean_gate_forward_cuda(x, NULL, x, 1, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_causal_mean_gate_forward_cuda(x, x, x, 1, 1, 257, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_causal_mean_gate_backward_cuda(x, x, x, 1, 0, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_causal_mean_gate_backward_cuda(x, x, x, 1, 1, 300, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_gather_cuda(x, x, 1, NULL, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_gather_cuda(x, x, 0, &i, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_forward_cuda(x, x, 1, &i, NULL, 1, 1, 1, 2, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_forward_cuda(x, x, 1, &i, NULL, 1, 0, 1, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_forward_cuda(x, NULL, 1, &i, NULL, 1, 1, 1, 0, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_backward_cuda(NULL, NULL, x, x, 1, &i, NULL, 1, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_backward_cuda(NULL, x, x, NULL, 1, &i, NULL, 1, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_backward_cuda(x, NULL, NULL, NULL, 1, &i, NULL, 1, 1, 1, NULL), TK_EINVAL);
    CHECK_INT_EQ(tk_rows_combine_backward_cuda(x, NULL, x, NULL, 1, &i, NULL, 1, 1, -1, NULL), TK_EINVAL);
    CHECK(x[0] == 0.0f && x[3] == 0.0f);
}
#undef DEV_CLOSE

/* ------------------------------------------------------------ issue 38: float64 sweep */
/* The device attention (fp32, flash-style, lse) against tests/ref64.h's float64
   transcription in test_tensor.c's regimes (bias 0, +-1e4 mixed, +1e4 everywhere, -inf
   rows): 1e-4 forward, 2e-3 gradients relative to each tensor's max-norm, and where
   |bias| = 1e4 the condition-aware bound eps32 max_rows(|score| + |bias|) (a logit near
   1e4 cannot be held in fp32 closer than that: see test_tensor.c). */
static void test_attention_sweep_float64(void)
{
    r64_report rep;
    int reg, t;
    NEED_GPU();
    memset(&rep, 0, sizeof rep);
    for (reg = 0; reg < R64_AT_NREGIMES; reg++) {
        r64_at_case c;
        size_t n, TT, i;
        double e[6], cond = 0.0;
        static const char *nm[6] = {"out", "dq", "dk", "dv", "dbias", "dtemp"};
        r64_at_make(&c, reg);
        n = (size_t)c.B * c.H * c.T * c.D;
        TT = (size_t)c.T * c.T;
        for (i = 0; i < (size_t)c.B * c.H * c.T; i++)
            if (c.xabs[i] > cond) cond = c.xabs[i];
        cond *= R64_EPS32;
        {
            std::vector<float> hq(c.q, c.q + n), hk(c.k, c.k + n), hv(c.v, c.v + n), hdo(c.dout, c.dout + n);
            std::vector<float> hb(c.bias, c.bias + TT), ht(c.temp, c.temp + c.H), zn(n, 0.0f), zl((size_t)c.B * c.H * c.T, 0.0f);
            std::vector<float> zb(TT, 0.0f), zt(c.H, 0.0f);
            float *q = dput(hq), *k = dput(hk), *v = dput(hv), *dout = dput(hdo), *bias = dput(hb), *temp = dput(ht);
            float *out = dput(zn), *lse = dput(zl), *dq = dput(zn), *dk = dput(zn), *dv = dput(zn), *db = dput(zb), *dt = dput(zt);
            CHECK_INT_EQ(tk_attention_forward_cuda(out, lse, q, k, v, bias, 0, temp, c.B, c.H, c.T, c.D, NULL), TK_OK);
            CHECK_INT_EQ(tk_attention_backward_cuda(dq, dk, dv, db, dt, dout, out, lse, q, k, v, bias, 0, temp,
                                                    c.B, c.H, c.T, c.D, NULL), TK_OK);
            e[0] = r64_relerr_f(dget(out, n).data(), c.out, (long)n);
            e[1] = r64_relerr_f(dget(dq, n).data(), c.dq, (long)n);
            e[2] = r64_relerr_f(dget(dk, n).data(), c.dk, (long)n);
            e[3] = r64_relerr_f(dget(dv, n).data(), c.dv, (long)n);
            e[4] = r64_relerr_f(dget(db, TT).data(), c.dbias, (long)TT);
            e[5] = r64_relerr_f(dget(dt, (size_t)c.H).data(), c.dtemp, c.H);
            dfree(q); dfree(k); dfree(v); dfree(dout); dfree(bias); dfree(temp);
            dfree(out); dfree(lse); dfree(dq); dfree(dk); dfree(dv); dfree(db); dfree(dt);
        }
        for (t = 0; t < 6; t++) {
            double tol = t == 0 ? R64_TOL_FWD : R64_TOL_GRAD;
            if (cond > tol) tol = cond;
            r64_note(&rep, nm[t], c.name, e[t]);
            if (!(e[t] <= tol)) {
                fprintf(stderr, "  %s, %s: relative error %.3e (bound %.3e)\n", c.name, nm[t], e[t], tol);
                CHECK(e[t] <= tol);
            }
        }
        r64_at_free(&c);
    }
    r64_print(&rep, "tk_attention device vs float64");
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    g_gpu = tk_cuda_available();
    if (!g_gpu) printf("SKIP: no GPU\n");
    else parity_print_device();
    TEST_RUN(test_cuda_bad_input);
    TEST_RUN(test_sgemm_shapes);
    TEST_RUN(test_sgemm_math);
    TEST_RUN(test_matmul);
    TEST_RUN(test_embedding);
    TEST_RUN(test_layernorm);
    TEST_RUN(test_colsum_chunks);
    TEST_RUN(test_gelu);
    TEST_RUN(test_softmax_ce);
    TEST_RUN(test_adamw);
    TEST_RUN(test_cuda_bad_input_ops);
    TEST_RUN(test_relu2_silu);
    TEST_RUN(test_relu2_gated);
    TEST_RUN(test_rope);
    TEST_RUN(test_ce_inplace);
    TEST_RUN(test_ids_deferred);
    TEST_RUN(test_plain_routing_ops);
    TEST_RUN(test_attention);
    TEST_RUN(test_attention_gqa);
    TEST_RUN(test_attention_tc);
    TEST_RUN(test_attention_tc_deterministic);
    TEST_RUN(test_attention_stats);
    TEST_RUN(test_attention_bad_input);
    TEST_RUN(test_attention_cfg_bad_input);
    TEST_RUN(test_plain_routing);
    TEST_RUN(test_cuda_bad_input_norms_heads);
    TEST_RUN(test_rmsnorm);
    TEST_RUN(test_residual);
    TEST_RUN(test_heads);
    TEST_RUN(test_grad_norm);
    TEST_RUN(test_plain_routing_norms_heads);
    TEST_RUN(test_device_memory);
    TEST_RUN(test_cuda_bad_input_dropout);
    TEST_RUN(test_dropout_seeded);
    TEST_RUN(test_dropout_routing);
    TEST_RUN(test_cuda_bad_input_rows);
    TEST_RUN(test_sigmoid_rows);
    TEST_RUN(test_causal_dwconv);
    TEST_RUN(test_row_ops);
    TEST_RUN(test_causal_mean_gate);
    TEST_RUN(test_rows_gather_combine);
    TEST_RUN(test_rows_bad_index_device);
    TEST_RUN(test_rows_mixed_sides);
    TEST_RUN(test_attention_sweep_float64);
    CHECK_INT_EQ(tk_cuda_release(), TK_OK); /* the cuBLAS handle: nothing left for --leak-check */
    return TEST_END();
}
