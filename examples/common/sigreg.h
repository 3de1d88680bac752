/* sigreg.h - the signature-stream regularisers of seed 002 (ATMA) Appendix A, Table 5:
   weak, strong, discrete and zipfian SIGReg, each a scalar loss of a set of N
   representation rows x (N, C) with its gradient. The examples' model (model.c,
   mdl_sigreg_set) applies one to every block's output and the trainer (train.c,
   --sigreg) adds it to the objective:
       L = (1 - a) L_LM + a L_reg,   L_reg = (1/L_blocks) sum_l R(x_l)
   (seed 002 eq. 29 without its lambda_dist L_dist term, see below).

   Sources. The paper's copy in /work/shared/seeds lacks Table 5's text; every choice here
   follows the authors' code, kreasof-ai/atma (read for understanding; nothing copied):
     - the signature stream (train/model.py, Block.forward and Model.forward): the residual
       stream after each block (x after attention and MLP residual adds), all B T tokens of
       the micro-batch as rows; the regulariser is computed per block and averaged over
       the blocks; L_reg enters the loss as (1 - a) ls + a reg (ablation/train.py), with
       a = sigr_alpha_on = 0.01 (ablation/config_schema.py) and sketch_dim = 64.
     - the four modes (train/reg.py; the arXiv source's appendix table states the same in
       words: paper/arxiv/appendix.tex, table "reg_modes"):
       weak     (Weak-SIGReg, Akbar 2026): when C > k, y = S x with S (k, C) i.i.d.
                N(0, 1/C) (else y = x, k = C); centre y over the rows; Cov = Yc^T Yc /
                (N - 1 + 1e-6); R = ||Cov - I||_F.
       strong   (LeJEPA's SIGReg, Balestriero & LeCun 2025): A (C, k) i.i.d. N(0,1) with
                each column divided by (its norm + 1e-6); p = x A; on the 17 knots
                t = linspace(-5, 5, 17) the empirical characteristic function of each
                column, cos and sin means over the rows, against the Gaussian's
                w(t) = exp(-t^2/2): err(s,t) = ((mean cos(t p) - w)^2 + mean sin(t p)^2) w;
                R = mean_s N trapz_t err (the Epps-Pulley statistic, times N as LeJEPA's).
       discrete normalise each row to the sphere of radius sqrt(C) (x / max(|x|, 1e-12)
                sqrt(C)), then weak.
       zipfian  sketch as weak (no sketch when C <= k), centre, u_i = y_i / max(|y_i|,
                1e-6); G = U^T U / (N - 1 + 1e-6); ang = ||G - diag G||_F; the row norms
                max(|y_i|, 1e-6) sorted descending, divided by (their sum + 1e-6), against
                the Zipf profile r^-1 / (sum_r r^-1 + 1e-6), r = 1..N: mag = ||. - .||_2;
                R = ang + mag (lam_ang = lam_mag = 1, zipf_s = 1).
       All four are well enough defined by the code to implement; the gradients below are
       derived by hand (autograd in the original): through the sort a permutation, through
       each clamp zero where it is active.
     - L_dist (eq. 29's lambda_dist L_dist): in the code the distractor's alignment loss
       (PolarAttention's align_loss: the softmax mass that random "distractor" keys steal,
       weight dist_align_loss_weight = 0.01 with the distractor on). It belongs to the
       distractor axis, not to SIGReg, and is not part of this file.
   Randomness. The code draws S or A afresh with torch.randn at every call. Here they are a
   pure function of (seed, key): a counter-based generator (splitmix64 of seed, key and the
   entry's index, Box-Muller), so a run is reproducible and resumes bit-exactly; the model
   makes key from the trainer's step, micro-batch and the block index.
   Scale note. atma's L_LM is the cross-entropy summed over the micro-batch's tokens
   (reduction="sum"), so its a = 0.01 weighs the regulariser against the sum; our trainer's
   L_LM is the mean over the tokens, so --sigreg-alpha a here weighs it a / (1 - a) against
   the mean. atma's balance at N tokens per micro-batch is a' with a'/(1 - a') =
   a / ((1 - a) N).

   Numerics: double accumulation on the host, single thread, fixed order (the model copies
   a device's rows to the host and the gradient back). Cost per call: O(N C k) for the
   sketch / projection (+ O(N k^2) for the covariance, O(N k 17) sin/cos for strong).

   API
     sgr_loss(mode, x, N, C, k, seed, key, &R, dx, gscale)
         x: (N, C) row-major float; k: sketch dimension (>= 1; atma: 64 = SGR_SKETCH);
         R <- the regulariser; dx (N, C) (may be NULL) <- gscale dR/dx (overwritten).
         N >= 2. Returns SGR_OK, SGR_EINVAL (bad arguments), SGR_ENOMEM.
     sgr_mode_name(mode), sgr_mode_parse(name) (-1 when unknown), sgr_strerror(err)
   Implementation: #define SGR_IMPLEMENTATION in one translation unit (model.c).
   License: MIT. */
#ifndef ATTNKIT_SIGREG_H
#define ATTNKIT_SIGREG_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum { SGR_OFF = 0, SGR_WEAK = 1, SGR_STRONG = 2, SGR_DISCRETE = 3, SGR_ZIPFIAN = 4 };
enum { SGR_OK = 0, SGR_EINVAL = -1, SGR_ENOMEM = -2 };
#define SGR_SKETCH 64      /* atma's sketch_dim */
#define SGR_ALPHA 0.01f    /* atma's sigr_alpha_on */
#define SGR_KNOTS 17       /* strong: t = linspace(-5, 5, 17) */

int sgr_loss(int mode, const float *x, int N, int C, int k, uint64_t seed, uint64_t key, double *R, float *dx,
             float gscale);
const char *sgr_mode_name(int mode);
int sgr_mode_parse(const char *name);
const char *sgr_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* ATTNKIT_SIGREG_H */

#ifdef SGR_IMPLEMENTATION
#ifndef SGR_IMPLEMENTATION_DONE
#define SGR_IMPLEMENTATION_DONE
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t sgr__mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* N(0,1) number i of the stream base (Box-Muller on two 53-bit uniforms) */
static double sgr__gauss(uint64_t base, uint64_t i)
{
    uint64_t a = sgr__mix(base ^ sgr__mix(2 * i)), b = sgr__mix(base ^ sgr__mix(2 * i + 1));
    double u1 = ((double)(a >> 11) + 1.0) * (1.0 / 9007199254740992.0); /* (0, 1] */
    double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586477 * u2);
}

const char *sgr_mode_name(int mode)
{
    static const char *const n[] = {"off", "weak", "strong", "discrete", "zipfian"};
    return mode >= 0 && mode <= SGR_ZIPFIAN ? n[mode] : "?";
}

int sgr_mode_parse(const char *name)
{
    int i;
    if (!name) return -1;
    for (i = 0; i <= SGR_ZIPFIAN; i++)
        if (!strcmp(name, sgr_mode_name(i))) return i;
    return -1;
}

const char *sgr_strerror(int err)
{
    switch (err) {
    case SGR_OK: return "ok";
    case SGR_EINVAL: return "invalid argument";
    case SGR_ENOMEM: return "out of memory";
    default: return "unknown error";
    }
}

/* y (N, kk) <- x (N, C) S^T, S (kk, C) = the stream's N(0, 1/C) entries */
static void sgr__sketch(const double *x, int N, int C, const double *S, int kk, double *y)
{
    int i, a, c;
    for (i = 0; i < N; i++)
        for (a = 0; a < kk; a++) {
            double s = 0.0;
            const double *xr = x + (size_t)i * C, *sr = S + (size_t)a * C;
            for (c = 0; c < C; c++) s += xr[c] * sr[c];
            y[(size_t)i * kk + a] = s;
        }
}

/* dx (N, C) <- dy (N, kk) S */
static void sgr__sketch_bwd(const double *dy, int N, int C, const double *S, int kk, double *dx)
{
    int i, a, c;
    for (i = 0; i < N; i++) {
        double *dr = dx + (size_t)i * C;
        for (c = 0; c < C; c++) dr[c] = 0.0;
        for (a = 0; a < kk; a++) {
            double g = dy[(size_t)i * kk + a];
            const double *sr = S + (size_t)a * C;
            for (c = 0; c < C; c++) dr[c] += g * sr[c];
        }
    }
}

/* centre the columns of y (N, kk) in place */
static void sgr__centre(double *y, int N, int kk)
{
    int i, a;
    for (a = 0; a < kk; a++) {
        double m = 0.0;
        for (i = 0; i < N; i++) m += y[(size_t)i * kk + a];
        m /= (double)N;
        for (i = 0; i < N; i++) y[(size_t)i * kk + a] -= m;
    }
}

/* weak's core on centred yc (N, kk): R = ||Yc^T Yc / den - I||_F; dy (may be NULL) <-
   dR/dy of the uncentred y (the centring's backward included); cov: (kk, kk) scratch */
static double sgr__cov_match(const double *yc, int N, int kk, double *dy, double *cov)
{
    const double den = (double)(N - 1) + 1e-6;
    double R = 0.0;
    int i, a, b;
    for (a = 0; a < kk; a++)
        for (b = a; b < kk; b++) {
            double s = 0.0;
            for (i = 0; i < N; i++) s += yc[(size_t)i * kk + a] * yc[(size_t)i * kk + b];
            s /= den;
            if (a == b) s -= 1.0;
            cov[(size_t)a * kk + b] = cov[(size_t)b * kk + a] = s;
        }
    for (a = 0; a < kk * kk; a++) R += cov[a] * cov[a];
    R = sqrt(R);
    if (!dy) return R;
    if (!(R > 0.0)) {
        memset(dy, 0, sizeof(double) * (size_t)N * kk);
        return R;
    }
    /* dYc = 2 Yc D / den, D = (Cov - I) / R (symmetric) */
    for (i = 0; i < N; i++)
        for (b = 0; b < kk; b++) {
            double s = 0.0;
            for (a = 0; a < kk; a++) s += yc[(size_t)i * kk + a] * cov[(size_t)a * kk + b];
            dy[(size_t)i * kk + b] = 2.0 * s / (den * R);
        }
    sgr__centre(dy, N, kk); /* the centring's backward: dy - mean over the rows */
    return R;
}

/* strong (LeJEPA): x (N, C), A (C, k) normalised columns */
static double sgr__strong(const double *x, int N, int C, int k, const double *A, double *p, double *dx)
{
    double t[SGR_KNOTS], w[SGR_KNOTS], tau[SGR_KNOTS], cm[SGR_KNOTS], sm[SGR_KNOTS];
    const double h = 10.0 / (double)(SGR_KNOTS - 1);
    double R = 0.0;
    int i, c, s, j;
    for (j = 0; j < SGR_KNOTS; j++) {
        t[j] = -5.0 + h * j;
        w[j] = exp(-0.5 * t[j] * t[j]);
        tau[j] = (j == 0 || j == SGR_KNOTS - 1) ? 0.5 * h : h;
    }
    /* p = x A (N, k) */
    for (i = 0; i < N; i++)
        for (s = 0; s < k; s++) {
            double v = 0.0;
            for (c = 0; c < C; c++) v += x[(size_t)i * C + c] * A[(size_t)c * k + s];
            p[(size_t)i * k + s] = v;
        }
    if (dx) memset(dx, 0, sizeof(double) * (size_t)N * C);
    for (s = 0; s < k; s++) {
        double ls = 0.0;
        for (j = 0; j < SGR_KNOTS; j++) {
            double a = 0.0, b = 0.0;
            for (i = 0; i < N; i++) {
                double arg = t[j] * p[(size_t)i * k + s];
                a += cos(arg);
                b += sin(arg);
            }
            cm[j] = a / N;
            sm[j] = b / N;
            ls += tau[j] * w[j] * ((cm[j] - w[j]) * (cm[j] - w[j]) + sm[j] * sm[j]);
        }
        R += ls * (double)N;
        if (dx) { /* dp_is = (2/k) sum_j tau w t (sm cos(t p) - (cm - w) sin(t p)); dx += dp A^T */
            for (i = 0; i < N; i++) {
                double g = 0.0, pi = p[(size_t)i * k + s];
                for (j = 0; j < SGR_KNOTS; j++) {
                    double arg = t[j] * pi;
                    g += tau[j] * w[j] * t[j] * (sm[j] * cos(arg) - (cm[j] - w[j]) * sin(arg));
                }
                g *= 2.0 / (double)k;
                for (c = 0; c < C; c++) dx[(size_t)i * C + c] += g * A[(size_t)c * k + s];
            }
        }
    }
    return R / (double)k;
}

typedef struct { double v; int i; } sgr__vi;
static int sgr__cmp_desc(const void *pa, const void *pb)
{
    const sgr__vi *a = (const sgr__vi *)pa, *b = (const sgr__vi *)pb;
    if (a->v > b->v) return -1;
    if (a->v < b->v) return 1;
    return (a->i > b->i) - (a->i < b->i);
}

/* zipfian on centred yc (N, kk); dy (may be NULL) <- dR/dy of the uncentred y */
static int sgr__zipf(const double *yc, int N, int kk, double *R, double *dy, double *G)
{
    const double den = (double)(N - 1) + 1e-6, eps = 1e-6;
    double *nr = (double *)malloc(sizeof(double) * (size_t)N * 3), *nc, *dn;
    sgr__vi *ord = (sgr__vi *)malloc(sizeof(sgr__vi) * (size_t)N);
    double ang = 0.0, mag = 0.0, ssum = 0.0, zsum = 0.0, dps = 0.0;
    int i, a, b, r;
    if (!nr || !ord) {
        free(nr);
        free(ord);
        return SGR_ENOMEM;
    }
    nc = nr + N;
    dn = nc + N;
    for (i = 0; i < N; i++) {
        double s = 0.0;
        for (a = 0; a < kk; a++) s += yc[(size_t)i * kk + a] * yc[(size_t)i * kk + a];
        nr[i] = sqrt(s);
        nc[i] = nr[i] > eps ? nr[i] : eps;
        dn[i] = 0.0;
    }
    /* angular: G = U^T U / den, off-diagonal Frobenius norm */
    for (a = 0; a < kk; a++)
        for (b = a; b < kk; b++) {
            double s = 0.0;
            if (a != b)
                for (i = 0; i < N; i++) s += yc[(size_t)i * kk + a] * yc[(size_t)i * kk + b] / (nc[i] * nc[i]);
            G[(size_t)a * kk + b] = G[(size_t)b * kk + a] = s / den;
            if (a != b) ang += 2.0 * (s / den) * (s / den);
        }
    ang = sqrt(ang);
    /* magnitudes against the Zipf profile */
    for (i = 0; i < N; i++) {
        ord[i].v = nc[i];
        ord[i].i = i;
        ssum += nc[i];
    }
    qsort(ord, (size_t)N, sizeof *ord, sgr__cmp_desc);
    ssum += eps;
    for (r = 0; r < N; r++) zsum += 1.0 / (double)(r + 1);
    zsum += eps;
    for (r = 0; r < N; r++) {
        double d = ord[r].v / ssum - (1.0 / (double)(r + 1)) / zsum;
        mag += d * d;
    }
    mag = sqrt(mag);
    *R = ang + mag;
    if (dy) {
        /* d mag / d s_r = dp_r / S - sum_q dp_q s_q / S^2, dp = (p - z) / mag */
        if (mag > 0.0) {
            for (r = 0; r < N; r++) {
                double dp = (ord[r].v / ssum - (1.0 / (double)(r + 1)) / zsum) / mag;
                dps += dp * ord[r].v;
            }
            for (r = 0; r < N; r++) {
                double dp = (ord[r].v / ssum - (1.0 / (double)(r + 1)) / zsum) / mag;
                dn[ord[r].i] += dp / ssum - dps / (ssum * ssum);
            }
        }
        for (i = 0; i < N; i++) {
            const double *yr = yc + (size_t)i * kk;
            double *dr = dy + (size_t)i * kk, udu = 0.0;
            /* dU_i = 2 U_i D / den, D = offdiag(G) / ang; U_i = y_i / nc_i */
            for (b = 0; b < kk; b++) {
                double s = 0.0;
                if (ang > 0.0)
                    for (a = 0; a < kk; a++)
                        if (a != b) s += yr[a] * G[(size_t)a * kk + b];
                dr[b] = ang > 0.0 ? 2.0 * s / (nc[i] * den * ang) : 0.0; /* dU_ib */
            }
            for (b = 0; b < kk; b++) udu += dr[b] * yr[b];
            /* dy = dU / nc + (dn + sum_b dU_b (-y_b / nc^2)) d nc / dy, d nc / dy = y / n (n > eps) */
            for (b = 0; b < kk; b++) {
                double g = dr[b] / nc[i];
                if (nr[i] > eps) g += (dn[i] - udu / (nc[i] * nc[i])) * yr[b] / nr[i];
                dr[b] = g;
            }
        }
        sgr__centre(dy, N, kk);
    }
    free(nr);
    free(ord);
    return SGR_OK;
}

int sgr_loss(int mode, const float *x, int N, int C, int k, uint64_t seed, uint64_t key, double *R, float *dx,
             float gscale)
{
    const uint64_t base = sgr__mix(seed ^ sgr__mix(key ^ 0x5349475265670000ull));
    const int sk = (mode == SGR_STRONG) ? 1 : C > k;
    const int kk = (mode == SGR_STRONG || C > k) ? k : C;
    size_t nx = (size_t)N * C, i;
    double *X = NULL, *S = NULL, *Y = NULL, *dY = NULL, *dX = NULL, *W = NULL, *nrm = NULL, r = 0.0;
    int rc = SGR_OK, a, c;
    if (!x || !R || N < 2 || C < 1 || k < 1 || mode < SGR_WEAK || mode > SGR_ZIPFIAN) return SGR_EINVAL;
    X = (double *)malloc(sizeof(double) * nx);
    S = sk ? (double *)malloc(sizeof(double) * (size_t)kk * C) : NULL;
    Y = (double *)malloc(sizeof(double) * (size_t)N * kk);
    W = (double *)malloc(sizeof(double) * (size_t)kk * kk);
    if (dx) {
        dY = (double *)malloc(sizeof(double) * (size_t)N * kk);
        dX = (double *)malloc(sizeof(double) * nx);
    }
    if (mode == SGR_DISCRETE) nrm = (double *)malloc(sizeof(double) * (size_t)N);
    if (!X || (sk && !S) || !Y || !W || (dx && (!dY || !dX)) || (mode == SGR_DISCRETE && !nrm)) {
        rc = SGR_ENOMEM;
        goto out;
    }
    for (i = 0; i < nx; i++) X[i] = (double)x[i];
    if (mode == SGR_DISCRETE) { /* rows to the sphere of radius sqrt(C) */
        int n;
        for (n = 0; n < N; n++) {
            double s = 0.0, f;
            for (c = 0; c < C; c++) s += X[(size_t)n * C + c] * X[(size_t)n * C + c];
            nrm[n] = sqrt(s);
            f = sqrt((double)C) / (nrm[n] > 1e-12 ? nrm[n] : 1e-12);
            for (c = 0; c < C; c++) X[(size_t)n * C + c] *= f;
        }
    }
    if (mode == SGR_STRONG) { /* A (C, k): N(0,1), columns / (norm + 1e-6) */
        for (i = 0; i < (size_t)C * k; i++) S[i] = sgr__gauss(base, i);
        for (a = 0; a < k; a++) {
            double s = 0.0;
            for (c = 0; c < C; c++) s += S[(size_t)c * k + a] * S[(size_t)c * k + a];
            s = sqrt(s) + 1e-6;
            for (c = 0; c < C; c++) S[(size_t)c * k + a] /= s;
        }
        r = sgr__strong(X, N, C, k, S, Y, dX);
    } else {
        if (sk) { /* S (kk, C): N(0, 1/C) */
            double f = 1.0 / sqrt((double)C);
            for (i = 0; i < (size_t)kk * C; i++) S[i] = sgr__gauss(base, i) * f;
            sgr__sketch(X, N, C, S, kk, Y);
        } else {
            memcpy(Y, X, sizeof(double) * nx);
        }
        sgr__centre(Y, N, kk);
        if (mode == SGR_ZIPFIAN) {
            rc = sgr__zipf(Y, N, kk, &r, dY, W);
            if (rc) goto out;
        } else {
            r = sgr__cov_match(Y, N, kk, dY, W);
        }
        if (dx) {
            if (sk) sgr__sketch_bwd(dY, N, C, S, kk, dX);
            else memcpy(dX, dY, sizeof(double) * nx);
        }
    }
    if (dx && mode == SGR_DISCRETE) { /* z = sqrt(C) x / |x|: dx = sqrt(C) (dz - u (u.dz)) / |x| */
        int n;
        for (n = 0; n < N; n++) {
            double *d = dX + (size_t)n * C, ud = 0.0, f;
            const double *z = X + (size_t)n * C; /* = sqrt(C) u */
            if (nrm[n] > 1e-12) {
                for (c = 0; c < C; c++) ud += z[c] * d[c];
                ud /= (double)C; /* u . dz with u = z / sqrt(C), times 1/sqrt(C) for u below */
                f = sqrt((double)C) / nrm[n];
                for (c = 0; c < C; c++) d[c] = f * (d[c] - z[c] * ud);
            } else {
                f = sqrt((double)C) / 1e-12;
                for (c = 0; c < C; c++) d[c] *= f;
            }
        }
    }
    *R = r;
    if (dx)
        for (i = 0; i < nx; i++) dx[i] = (float)((double)gscale * dX[i]);
out:
    free(X);
    free(S);
    free(Y);
    free(W);
    free(dY);
    free(dX);
    free(nrm);
    return rc;
}
#endif /* SGR_IMPLEMENTATION_DONE */
#endif /* SGR_IMPLEMENTATION */
