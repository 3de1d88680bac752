/* dropin_mixomp.c - the headers' threaded paths against a single-thread reference, for
   hosts that link OpenMP their own way.

   tests/dropin_check.sh builds this file twice: without OpenMP (the reference), and the
   way karpathy/llm.c's Makefile links it under clang, `clang -fopenmp ... -lgomp`: the
   parallel regions then run on LLVM's libomp while omp_get_thread_num() and friends
   resolve to GNU libgomp, which answers 0 on every thread. A header that indexed
   per-thread scratch by omp_get_thread_num() let its threads overwrite each other
   there (issue 22: polar forward 0.78 / 8.59 / -5.34 on three runs for 3.495).

     dropin_mixomp write FILE   compute everything, write the floats to FILE
     dropin_mixomp check FILE   compute everything, compare with FILE
     dropin_mixomp probe        say whether this binary runs a mixed runtime

   Every threaded entry point with per-thread scratch is run at sizes that cross its
   parallel thresholds: polar forward/backward/decode, gdelta forward/backward, era's
   RPA forward (legacy statistics pass, bias-less output pass) and backward, ceas
   observables, tensor.h's attention backward and tk_sgemm's threaded driver. */
#define TENSOR_IMPLEMENTATION
#define POLAR_IMPLEMENTATION
#define ERA_IMPLEMENTATION
#define GDELTA_IMPLEMENTATION
#define CEAS_IMPLEMENTATION
#include "attnkit_test.h"

#include "ceas.h"
#include "era.h"
#include "gdelta.h"
#include "polar.h"
#include "tensor.h"

#ifdef _OPENMP
#include <omp.h>
#include <pthread.h>
#endif

#define MAXF (1 << 22)
static float *outv; /* every result, in order */
static long nout;

static void put(const float *x, long n)
{
    long i;
    for (i = 0; i < n && nout < MAXF; i++) outv[nout++] = x[i];
}

static float *fvec(long n, double scale)
{
    float *x = (float *)malloc(sizeof(float) * (size_t)n);
    if (!x) { fprintf(stderr, "out of memory\n"); exit(2); }
    if (scale > 0) tt_fill_normal(x, n, scale);
    else memset(x, 0, sizeof(float) * (size_t)n);
    return x;
}

static int run_polar(void)
{
    enum { B = 2, H = 4, Hkv = 2, T = 200, D = 32, BS = 16 };
    const long nq = (long)B * H * T * D, nk = (long)B * Hkv * T * D;
    polar_config cfg = polar_config_default();
    float lg[H], nb[H], ns[H], mb[H], vn[H * D], glg[H] = {0}, gnb[H] = {0}, gns[H] = {0},
          gmb[H] = {0}, gvn[H * D] = {0};
    float *q = fvec(nq, 1.0), *k = fvec(nk, 1.0), *v = fvec(nk, 1.0), *c = fvec(nq, 0);
    float *mag = fvec((long)B * H * T, 0), *stats = fvec((long)B * H * T * POLAR_NSTAT, 0);
    float *dc = fvec(nq, 1.0), *dmag = fvec((long)B * H * T, 1.0);
    float *dq = fvec(nq, 0), *dk = fvec(nk, 0), *dv = fvec(nk, 0);
    polar_params prm;
    polar_grads gr;
    polar_state st;
    int rc, b, x, nblk = (T + BS - 1) / BS;
    int *table = (int *)malloc(sizeof(int) * B * nblk), lens[B];
    float *kc = fvec((long)B * nblk * Hkv * BS * D, 0), *vc = fvec((long)B * nblk * Hkv * BS * D, 0);
    float cq[B * H * D], cmag[B * H], dqd[B * H * D];
    cfg.block_q = 32;
    cfg.block_k = 32;
    polar_params_init(&cfg, H, D, lg, nb, ns, mb, vn);
    tt_fill_normal(vn, H * D, 0.3);
    prm.len_gain_raw = lg; prm.null_base = nb; prm.null_slope_raw = ns;
    prm.mag_beta_raw = mb; prm.v_null = vn;
    gr.len_gain_raw = glg; gr.null_base = gnb; gr.null_slope_raw = gns;
    gr.mag_beta_raw = gmb; gr.v_null = gvn;
    st.stats = stats; st.probs = NULL;
    rc = polar_forward(&cfg, c, mag, &st, q, k, v, &prm, B, H, Hkv, T, D, NULL);
    if (!rc) rc = polar_backward(&cfg, dq, dk, dv, &gr, dc, dmag, c, mag, &st, q, k, v, &prm,
                                 B, H, Hkv, T, D, NULL);
    put(c, nq); put(mag, (long)B * H * T); put(dq, nq); put(dk, nk); put(dv, nk);
    put(glg, H); put(gnb, H); put(gns, H); put(gmb, H); put(gvn, H * D);
    /* decode: the cache holds each sequence's keys in its own blocks */
    for (b = 0; b < B; b++) {
        lens[b] = T - 37 * b;
        for (x = 0; x < nblk; x++) {
            int blk = b * nblk + x, hk, s, d;
            table[b * nblk + x] = blk;
            for (hk = 0; hk < Hkv; hk++)
                for (s = 0; s < BS; s++) {
                    int t = x * BS + s;
                    for (d = 0; d < D; d++) {
                        size_t o = (((size_t)blk * Hkv + hk) * BS + s) * D + d;
                        size_t src = (((size_t)b * Hkv + hk) * T + (t < T ? t : 0)) * D + d;
                        kc[o] = k[src];
                        vc[o] = v[src];
                    }
                }
        }
    }
    tt_fill_normal(dqd, B * H * D, 1.0);
    if (!rc) rc = polar_decode(&cfg, cq, cmag, dqd, kc, vc, table, lens, &prm, B, H, Hkv, D,
                               BS, B * nblk, nblk);
    put(cq, B * H * D); put(cmag, B * H);
    free(q); free(k); free(v); free(c); free(mag); free(stats); free(dc); free(dmag);
    free(dq); free(dk); free(dv); free(table); free(kc); free(vc);
    if (rc) fprintf(stderr, "polar: %s\n", polar_strerror(rc));
    return rc;
}

static int run_gdelta(void)
{
    enum { B = 2, H = 3, T = 96, Dk = 16, Dv = 16 };
    const long nq = (long)B * H * T * Dk, nv = (long)B * H * T * Dv, ng = (long)B * H * T;
    gd_config cfg = gd_config_default();
    gd_saved sv = gd_saved_init();
    float *q = fvec(nq, 1.0), *k = fvec(nq, 1.0), *v = fvec(nv, 1.0), *g = fvec(ng, 0);
    float *be = fvec(ng, 0), *r = fvec(nv, 0), *dr = fvec(nv, 1.0);
    float *dq = fvec(nq, 0), *dk = fvec(nq, 0), *dv = fvec(nv, 0), *dg = fvec(ng, 0);
    float *db = fvec(ng, 0);
    int rc;
    tt_fill_uniform(g, ng, 0.6, 1.0);
    tt_fill_uniform(be, ng, 0.1, 0.9);
    rc = gd_forward(&cfg, r, NULL, q, k, v, g, be, NULL, B, H, T, Dk, Dv, &sv, NULL);
    if (!rc) rc = gd_backward(&cfg, &sv, dq, dk, dv, dg, db, NULL, dr, NULL, q, k, v, g, be,
                              NULL, B, H, T, Dk, Dv, NULL);
    put(r, nv); put(dq, nq); put(dk, nq); put(dv, nv); put(dg, ng); put(db, ng);
    gd_saved_free(&sv);
    free(q); free(k); free(v); free(g); free(be); free(r); free(dr); free(dq); free(dk);
    free(dv); free(dg); free(db);
    if (rc) fprintf(stderr, "gdelta: %s\n", gd_strerror(rc));
    return rc;
}

static int run_era(void)
{
    enum { B = 2, T = 96, R = 4 };
    float *mu = fvec((long)B * T * R, 0), *bias = fvec((long)T * T, 0);
    float *dbias = fvec((long)T * T, 1.0), *dmu = fvec((long)B * T * R, 0);
    era_rpa_params p = era_rpa_params_default();
    era_rpa_state st = era_rpa_state_init();
    era_rpa_grads g;
    int rc = ERA_OK, legacy, i, r;
    for (i = 0; i < B * T; i++) { /* softmax rows */
        double s = 0;
        for (r = 0; r < R; r++) s += (mu[i * R + r] = (float)exp(tt_normal()));
        for (r = 0; r < R; r++) mu[i * R + r] = (float)(mu[i * R + r] / s);
    }
    for (legacy = 0; legacy <= 1 && !rc; legacy++) {
        era_rpa_config cfg = era_rpa_config_default(R);
        float sc[4];
        cfg.legacy = legacy;
        memset(&g, 0, sizeof g);
        memset(dmu, 0, sizeof(float) * B * T * R);
        rc = era_rpa_forward(&cfg, &p, mu, B, T, bias, &st, NULL);
        if (!rc) put(bias, (long)T * T);
        /* without a bias buffer the output pass uses the per-chunk row buffers */
        if (!rc) rc = era_rpa_forward(&cfg, &p, mu, B, T, NULL, &st, NULL);
        sc[0] = st.std_post; sc[1] = (float)st.mean; sc[2] = (float)st.std; sc[3] = 0;
        put(sc, 4);
        if (!rc) rc = era_rpa_backward(&cfg, &p, &st, dbias, dmu, &g, NULL);
        sc[0] = g.dtau_att; sc[1] = g.dpos_beta; sc[2] = g.dkappa;
        put(sc, 3);
        put(dmu, (long)B * T * R);
    }
    era_rpa_state_free(&st);
    free(mu); free(bias); free(dbias); free(dmu);
    if (rc) fprintf(stderr, "era: %s\n", era_strerror(rc));
    return rc;
}

static int run_ceas_tensor(void)
{
    enum { B = 2, H = 8, T = 128, D = 16 };
    const long nl = (long)B * H * T * T, nq = (long)B * H * T * D;
    float *lg = fvec(nl, 2.0), *q = fvec(nq, 1.0), *k = fvec(nq, 1.0), *v = fvec(nq, 1.0);
    float *out = fvec(nq, 0), *probs = fvec(nl, 0), *dout = fvec(nq, 1.0);
    float *dq = fvec(nq, 0), *dk = fvec(nq, 0), *dv = fvec(nq, 0), *bias = fvec((long)T * T, 1.0);
    float *dbias = fvec((long)T * T, 0), dtemp[H] = {0}, temp[H];
    ceas_obs *rows = (ceas_obs *)malloc(sizeof(ceas_obs) * (size_t)B * H * T);
    long i;
    int rc, h;
    for (h = 0; h < H; h++) temp[h] = 0.8f + 0.1f * (float)h;
    rc = ceas_attention_observables(lg, B, H, T, 1, NULL, rows, NULL, NULL);
    for (i = 0; i < (long)B * H * T && !rc; i++) {
        float o[4];
        o[0] = rows[i].H; o[1] = rows[i].var_s; o[2] = rows[i].sigma_qk; o[3] = rows[i].mean_s;
        put(o, 4);
    }
    if (!rc) rc = tk_attention_forward(out, probs, q, k, v, bias, 0, temp, B, H, T, D);
    if (!rc) rc = tk_attention_backward(dq, dk, dv, dbias, dtemp, dout, probs, q, k, v, 0, temp,
                                        B, H, T, D);
    put(out, nq); put(dq, nq); put(dk, nq); put(dv, nq); put(dbias, (long)T * T); put(dtemp, H);
    free(lg); free(q); free(k); free(v); free(out); free(probs); free(dout); free(dq);
    free(dk); free(dv); free(bias); free(dbias); free(rows);
    if (rc) fprintf(stderr, "ceas/tensor: error %d\n", rc);
    return rc;
}

/* tk_sgemm's threaded driver (shared B blocks, items from a counter, private A
   buffers): several row, column and K blocks, a single row block split into panel
   groups, and beta = 1 across K blocks */
static int run_gemm(void)
{
    static const int sh[][5] = {{0, 1, 500, 3300, 700}, {1, 0, 40, 3500, 1100},
                                {0, 0, 300, 200, 1300}};
    int s, rc = 0;
    for (s = 0; s < 3 && !rc; s++) {
        const int tA = sh[s][0], tB = sh[s][1], M = sh[s][2], N = sh[s][3], K = sh[s][4];
        float *A = fvec((long)M * K, 1.0), *Bm = fvec((long)K * N, 1.0), *C = fvec((long)M * N, 1.0);
        rc = tk_sgemm(tA, tB, M, N, K, 0.5f, A, tA ? M : K, Bm, tB ? K : N, s == 2 ? 1.0f : 0.0f, C, N);
        put(C, (long)M * N);
        free(A); free(Bm); free(C);
    }
    if (rc) fprintf(stderr, "tk_sgemm: error %d\n", rc);
    return rc;
}

/* 1 if this binary's parallel regions run on more than one thread while
   omp_get_thread_num() answers the same id on all of them (a mixed runtime) */
static int probe_mixed(int *team, int *ids)
{
#ifdef _OPENMP
    pthread_t th[64];
    int tid[64], n = 0, i, j, dt = 0, di = 0;
#pragma omp parallel num_threads(4)
    {
        int me;
#pragma omp critical
        {
            me = n < 64 ? n++ : 63;
            th[me] = pthread_self();
            tid[me] = omp_get_thread_num();
        }
    }
    for (i = 0; i < n; i++) {
        int new_t = 1, new_i = 1;
        for (j = 0; j < i; j++) {
            if (pthread_equal(th[i], th[j])) new_t = 0;
            if (tid[i] == tid[j]) new_i = 0;
        }
        dt += new_t;
        di += new_i;
    }
    *team = dt;
    *ids = di;
    return dt > 1 && di == 1;
#else
    *team = 1;
    *ids = 1;
    return 0;
#endif
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int team, ids, mixed, rc = 0;
    TEST_INIT(argc, argv);
    mixed = probe_mixed(&team, &ids);
    fprintf(stderr, "threads in a 4-thread region: %d, distinct omp_get_thread_num(): %d%s\n",
            team, ids, mixed ? " (mixed OpenMP runtimes)" : "");
    if (!strcmp(mode, "probe")) return mixed ? 0 : 3;
    if (argc < 3 || (strcmp(mode, "write") && strcmp(mode, "check"))) {
        fprintf(stderr, "usage: %s write|check FILE | probe\n", argv[0]);
        return 2;
    }
    outv = (float *)malloc(sizeof(float) * MAXF);
    if (!outv) return 2;
    tt_seed(2207);
    rc |= run_polar();
    rc |= run_gdelta();
    rc |= run_era();
    rc |= run_ceas_tensor();
    rc |= run_gemm();
    if (rc) { fprintf(stderr, "a call failed\n"); return 1; }
    if (!strcmp(mode, "write")) {
        FILE *f = fopen(argv[2], "wb");
        if (!f || fwrite(outv, sizeof(float), (size_t)nout, f) != (size_t)nout || fclose(f)) {
            fprintf(stderr, "cannot write %s\n", argv[2]);
            return 2;
        }
        fprintf(stderr, "wrote %ld values\n", nout);
        return 0;
    } else {
        FILE *f = fopen(argv[2], "rb");
        float *ref = (float *)malloc(sizeof(float) * MAXF);
        long n = 0, i, same = 0;
        if (!f || !ref) { fprintf(stderr, "cannot read %s\n", argv[2]); return 2; }
        n = (long)fread(ref, sizeof(float), MAXF, f);
        fclose(f);
        CHECK_INT_EQ(n, nout);
        if (n == nout) {
            /* the same arithmetic in the same order: equal up to what -fopenmp changes
               in code generation (nothing, in practice: the count of equal bits is
               printed) */
            CHECK_ALL_CLOSE(outv, ref, n, 1e-5, 1e-6);
            for (i = 0; i < n; i++) same += !memcmp(outv + i, ref + i, sizeof(float));
            fprintf(stderr, "%ld of %ld values bit-identical to the single-thread reference\n",
                    same, n);
        }
        free(ref);
        tt__case = "threaded_vs_single_thread";
        if (tt__case_failed) tt__failed++;
        else tt__passed++;
        free(outv);
        return TEST_END();
    }
}
