/* polar_dropin.c - polar.h dropped into a foreign trainer.

   A one-layer character model trained the way third-party C trainers are written
   (llm.c's train_gpt2.c style): one parameter block, one (B,T,3C) qkv buffer from a
   fused projection, its own OpenMP loops, plain AdamW. The only attnkit code is polar.h,
   and it takes the interleaved buffers as they are: q, k, v at qkv, qkv + C, qkv + 2C
   with token stride 3C (polar_layout_qkv), its direction output c written into a
   (B,T,C) buffer, gradients accumulated straight into the interleaved dqkv. No gather,
   no scatter, no per-head copies.

     model   x = wte[tok] + wpe[t]; qkv = x Wqkv^T + bqkv; (c, mag) = polar(q, k, v);
             h = x + c Wo^T + mag Wmu^T; logits = h Wout^T; loss = cross-entropy
     data    a short text built in, next-character prediction on random windows

   Build from the repository root (any C99 compiler, any OpenMP or none, -Ofast is fine):
     cc -std=c99 -Ofast -march=native -fopenmp -I. examples/dropin/polar_dropin.c -lm
   Run: ./a.out [steps]  prints the loss every 25 steps and, last, a line
     `dropin first_loss F last_loss L` (means of the first and last 10 steps). */
#define POLAR_IMPLEMENTATION
#include "polar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *text =
    "the cat sat on the mat and the dog sat on the log. a small cat saw a big dog and the "
    "big dog saw the small cat. the dog ran to the cat and the cat ran up the tree. then "
    "the cat sat in the tree and the dog sat on the ground. the sun was warm and the day "
    "was long, so the dog lay down by the tree and the cat came down to sit by the dog. "
    "now the cat and the dog sit on the mat, and the cat is on the mat and so is the dog.";

enum { B = 8, T = 32, C = 32, NH = 4, HD = C / NH };

/* parameters, one block (llm.c style); the polar per-head parameters are in it too */
typedef struct {
    float *wte, *wpe, *wqkv, *bqkv, *wo, *wmu, *wout;  /* (V,C) (T,C) (3C,C) (3C) (C,C) (C,NH) (V,C) */
    float *lg, *nb, *ns, *mb, *vn;                     /* polar: (NH) x 4, (NH,HD) */
} params;

static size_t carve(params *p, float *mem, int V)
{
    size_t n[12], off = 0;
    float **slot[12];
    int i;
    n[0] = (size_t)V * C; n[1] = (size_t)T * C; n[2] = 3 * C * C; n[3] = 3 * C;
    n[4] = C * C; n[5] = C * NH; n[6] = (size_t)V * C; n[7] = n[8] = n[9] = n[10] = NH;
    n[11] = NH * HD;
    slot[0] = &p->wte; slot[1] = &p->wpe; slot[2] = &p->wqkv; slot[3] = &p->bqkv;
    slot[4] = &p->wo; slot[5] = &p->wmu; slot[6] = &p->wout; slot[7] = &p->lg;
    slot[8] = &p->nb; slot[9] = &p->ns; slot[10] = &p->mb; slot[11] = &p->vn;
    for (i = 0; i < 12; i++) {
        if (mem) *slot[i] = mem + off;
        off += n[i];
    }
    return off;
}

/* out (N,O) = inp (N,I) W^T (O,I) + bias (O) */
static void matmul_fwd(float *out, const float *inp, const float *W, const float *bias, int N,
                       int I, int O)
{
    int n;
#pragma omp parallel for
    for (n = 0; n < N; n++) {
        int o, i;
        for (o = 0; o < O; o++) {
            float s = bias ? bias[o] : 0.0f;
            for (i = 0; i < I; i++) s += inp[(size_t)n * I + i] * W[(size_t)o * I + i];
            out[(size_t)n * O + o] = s;
        }
    }
}

/* dinp += dout W; dW += dout^T inp; dbias += sum dout */
static void matmul_bwd(float *dinp, float *dW, float *dbias, const float *dout,
                       const float *inp, const float *W, int N, int I, int O)
{
    int n, o;
#pragma omp parallel for
    for (n = 0; n < N; n++) {
        int i;
        for (o = 0; o < O; o++) {
            float g = dout[(size_t)n * O + o];
            for (i = 0; i < I; i++) dinp[(size_t)n * I + i] += g * W[(size_t)o * I + i];
        }
    }
#pragma omp parallel for
    for (o = 0; o < O; o++) {
        int i;
        for (n = 0; n < N; n++) {
            float g = dout[(size_t)n * O + o];
            for (i = 0; i < I; i++) dW[(size_t)o * I + i] += g * inp[(size_t)n * I + i];
            if (dbias) dbias[o] += g;
        }
    }
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 300, V = 0, step, i, map[256];
    int len = (int)strlen(text), *tok = (int *)malloc(sizeof(int) * (size_t)len);
    const int N = B * T;
    size_t np;
    float *mem, *grad, *m1, *m2, *x, *qkv, *cbuf, *mag, *stats, *h, *logits;
    float *dx, *dqkv, *dc, *dmag, *dh, *magt, *dmagt;
    double first = 0, last = 0;
    params p, g;
    polar_config cfg = polar_config_default();
    polar_layout lay = polar_layout_qkv(NH, T, HD);
    size_t wsb;
    void *ws;
    unsigned long long rng = 42;

    if (steps < 20) steps = 20;
    for (i = 0; i < 256; i++) map[i] = -1;
    for (i = 0; i < len; i++) {
        int ch = (unsigned char)text[i];
        if (map[ch] < 0) map[ch] = V++;
        tok[i] = map[ch];
    }
    np = carve(&p, NULL, V);
    mem = (float *)calloc(np * 4, sizeof(float));
    x = (float *)malloc(sizeof(float) * (size_t)N * (12 * C + V + 8 * NH));
    if (!tok || !mem || !x) return 1;
    grad = mem + np; m1 = grad + np; m2 = m1 + np;
    carve(&p, mem, V);
    carve(&g, grad, V);
    qkv = x + (size_t)N * C; cbuf = qkv + (size_t)N * 3 * C; h = cbuf + (size_t)N * C;
    dx = h + (size_t)N * C; dqkv = dx + (size_t)N * C; dc = dqkv + (size_t)N * 3 * C;
    dh = dc + (size_t)N * C; logits = dh + (size_t)N * C; mag = logits + (size_t)N * V;
    dmag = mag + (size_t)N * NH; magt = dmag + (size_t)N * NH; dmagt = magt + (size_t)N * NH;
    stats = dmagt + (size_t)N * NH;
    /* GPT-2-style init (normal 0.02, xorshift + Box-Muller), polar's own initial values
       with a lower null base for a drop-in (see polar.h, INITIALISATION) */
    for (i = 0; i < (int)(p.lg - p.wte); i++) {
        double u1, u2;
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        u1 = ((rng >> 11) + 1.0) / 9007199254740993.0;
        rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
        u2 = (rng >> 11) / 9007199254740992.0;
        p.wte[i] = (float)(0.02 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
    }
    memset(p.bqkv, 0, sizeof(float) * 3 * C);
    cfg.init_null_base = 0.0f;
    if (polar_params_init(&cfg, NH, HD, p.lg, p.nb, p.ns, p.mb, p.vn) != POLAR_OK) return 1;
    wsb = polar_workspace_size(&cfg, B, NH, NH, T, HD);
    ws = malloc(wsb);
    if (!ws) return 1;

    for (step = 0; step < steps; step++) {
        polar_params prm;
        polar_grads pg;
        polar_state st;
        double loss = 0;
        int b, t, n, rc;
        int inp[B * T], tgt[B * T];
        for (b = 0; b < B; b++) { /* a random window of the text */
            int s0;
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            s0 = (int)(rng % (unsigned long long)(len - T - 1));
            for (t = 0; t < T; t++) {
                inp[b * T + t] = tok[s0 + t];
                tgt[b * T + t] = tok[s0 + t + 1];
            }
        }
        prm.len_gain_raw = p.lg; prm.null_base = p.nb; prm.null_slope_raw = p.ns;
        prm.mag_beta_raw = p.mb; prm.v_null = p.vn;
        pg.len_gain_raw = g.lg; pg.null_base = g.nb; pg.null_slope_raw = g.ns;
        pg.mag_beta_raw = g.mb; pg.v_null = g.vn;
        st.stats = stats;
        st.probs = NULL;
        /* forward */
#pragma omp parallel for
        for (n = 0; n < N; n++) {
            int c;
            for (c = 0; c < C; c++)
                x[(size_t)n * C + c] = p.wte[(size_t)inp[n] * C + c] + p.wpe[(size_t)(n % T) * C + c];
        }
        matmul_fwd(qkv, x, p.wqkv, p.bqkv, N, C, 3 * C);
        rc = polar_forward_strided(&cfg, &lay, cbuf, mag, &st, qkv, qkv + C, qkv + 2 * C, &prm,
                                   B, NH, NH, T, HD, ws, wsb);
        if (rc != POLAR_OK) { fprintf(stderr, "polar: %s\n", polar_strerror(rc)); return 1; }
#pragma omp parallel for
        for (n = 0; n < N; n++) { /* mag (B,NH,T) -> (B,T,NH) */
            int hh;
            for (hh = 0; hh < NH; hh++)
                magt[(size_t)n * NH + hh] = mag[((size_t)(n / T) * NH + hh) * T + n % T];
        }
        matmul_fwd(h, cbuf, p.wo, NULL, N, C, C);
        {
            float *tmp = dh; /* dh is free until the backward */
            matmul_fwd(tmp, magt, p.wmu, NULL, N, NH, C);
            for (i = 0; i < N * C; i++) h[i] += x[i] + tmp[i];
        }
        matmul_fwd(logits, h, p.wout, NULL, N, C, V);
#pragma omp parallel for reduction(+ : loss)
        for (n = 0; n < N; n++) { /* softmax cross-entropy, logits become dlogits */
            float *lo = logits + (size_t)n * V, mx = lo[0], s = 0;
            int v;
            for (v = 1; v < V; v++) mx = lo[v] > mx ? lo[v] : mx;
            for (v = 0; v < V; v++) s += (lo[v] = expf(lo[v] - mx));
            loss += -log(lo[tgt[n]] / s);
            for (v = 0; v < V; v++) lo[v] = (lo[v] / s - (v == tgt[n])) / (float)N;
        }
        loss /= N;
        if (step < 10) first += loss / 10;
        if (step >= steps - 10) last += loss / 10;
        if (step % 25 == 0 || step == steps - 1) printf("step %4d loss %.4f\n", step, loss);

        /* backward: the gradients accumulate, so zero them first */
        memset(grad, 0, sizeof(float) * np);
        memset(dx, 0, sizeof(float) * (size_t)N * (C + 3 * C + C + C));
        memset(dmagt, 0, sizeof(float) * (size_t)N * NH);
        matmul_bwd(dh, g.wout, NULL, logits, h, p.wout, N, C, V);
        for (i = 0; i < N * C; i++) dx[i] = dh[i]; /* residual */
        matmul_bwd(dc, g.wo, NULL, dh, cbuf, p.wo, N, C, C);
        matmul_bwd(dmagt, g.wmu, NULL, dh, magt, p.wmu, N, NH, C);
#pragma omp parallel for
        for (n = 0; n < N; n++) {
            int hh;
            for (hh = 0; hh < NH; hh++)
                dmag[((size_t)(n / T) * NH + hh) * T + n % T] = dmagt[(size_t)n * NH + hh];
        }
        rc = polar_backward_strided(&cfg, &lay, dqkv, dqkv + C, dqkv + 2 * C, &pg, dc, dmag,
                                    cbuf, mag, &st, qkv, qkv + C, qkv + 2 * C, &prm, B, NH, NH,
                                    T, HD, ws, wsb);
        if (rc != POLAR_OK) { fprintf(stderr, "polar: %s\n", polar_strerror(rc)); return 1; }
        matmul_bwd(dx, g.wqkv, g.bqkv, dqkv, x, p.wqkv, N, C, 3 * C);
        for (n = 0; n < N; n++) {
            int c;
            for (c = 0; c < C; c++) {
                g.wte[(size_t)inp[n] * C + c] += dx[(size_t)n * C + c];
                g.wpe[(size_t)(n % T) * C + c] += dx[(size_t)n * C + c];
            }
        }
        /* AdamW (lr 3e-3, betas 0.9/0.95, weight decay 0 for brevity) */
        {
            const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f;
            const float c1 = 1.0f - powf(b1, (float)(step + 1)), c2 = 1.0f - powf(b2, (float)(step + 1));
            long j;
#pragma omp parallel for
            for (j = 0; j < (long)np; j++) {
                m1[j] = b1 * m1[j] + (1 - b1) * grad[j];
                m2[j] = b2 * m2[j] + (1 - b2) * grad[j] * grad[j];
                mem[j] -= lr * (m1[j] / c1) / (sqrtf(m2[j] / c2) + 1e-8f);
            }
        }
    }
    printf("dropin first_loss %.4f last_loss %.4f\n", first, last);
    free(ws);
    free(x);
    free(mem);
    free(tok);
    return 0;
}
