/* prior_viz - PNG heatmaps of the RPA and ERA attention priors B(T) (era.h) for
   several sequence lengths, so the bands the papers describe can be seen.

     make build/prior_viz
     build/prior_viz [--out DIR] [--T 64,256,1024] [--R 4] [--K 0] [--posmix 0.1]
                     [--causal] [--seed 1] [--noise 0.3] [--mu FILE --mu-R R]
                     [--era-R 32] [--era-nb 32] [--era-sigma 0.1] [--min-px 512]

   Writes DIR/rpa_T<T>.png and DIR/era_T<T>.png (default DIR: runs/prior_viz) and
   prints the statistics of every map. Each PNG is a heatmap of B(T) with a title (the
   mechanism, T and its parameters), axes "key position j" (columns) and "query position
   i" (rows, 0 at the top) with tick values, and a colour bar: blue negative, white 0,
   red positive, scaled to the largest |value| of the entries drawn, both ends labelled
   with that value; the masked future (j > i) is drawn grey (said under the map). The map
   is T*s pixels square for the smallest whole s with T*s >= --min-px (at most 8192
   pixels: a larger T is averaged down), the image adds margins for the labels.

   RPA memberships are random by default: each regime gets a random centre in [0,1]
   and width, mu[t] is the softmax of Gaussian bumps at t/T, plus i.i.d. logit noise
   (--noise); --mu FILE loads raw little-endian float32 memberships of shape (Tm,R)
   (--mu-R R; rows are resampled to every T by nearest position and renormalised).

   Every number is parsed whole and range-checked (--R and --mu-R 1..64, --K 0..4096,
   --era-R and --era-nb 1..4096, --min-px 1..8192, --T 1..16384 each, --seed 0..2^63-1,
   --posmix 0..1, --noise 0..100, --era-sigma > 0): junk, trailing characters and values
   out of range are refused. --mu must be a readable regular file (a directory is an error).
   Each PNG goes to a temporary file, every write is checked, and it is renamed into place
   only when complete.
   Exit status: 0 every map written; 1 an input could not be read or an output could not
   be written (the reason on stderr; no partial PNG is left); 2 bad options. */

#define _POSIX_C_SOURCE 200809L
#include "era.h"
#include "common/data.h"
#include "common/exio.h"
#include "common/plot.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static unsigned long long rng = 0x2545F4914F6CDD1DULL;
static double urand(void)
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (double)((rng * 0x2545F4914F6CDD1DULL) >> 11) * (1.0 / 9007199254740992.0);
}
static double nrand(void)
{
    double u1 = urand(), u2 = urand();
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* B(T) as a heatmap with title, axes and colour bar (examples/common/plot.c); m: (T,T),
   overwritten with NaN above the diagonal when mask (drawn grey). Written to a temporary
   file and renamed when complete. */
static int write_png(const char *path, float *m, int T, int min_px, int mask, const char *title, char *err,
                     size_t errlen)
{
    plot_heatmap h;
    int scale = 1, W, width, height, tw = 0, n = 0;
    long i, j;
    const char *c;
    while (T * scale < min_px) scale++;
    W = T * scale;
    if (W > 8192) W = 8192;
    width = W + 250 > 480 ? W + 250 : 480;
    height = W + 150 > 480 ? W + 150 : 480;
    for (c = title; *c; c++) { /* wide enough for the longest title line (12 px a glyph) */
        n = *c == '\n' ? 0 : n + 1;
        if (n > tw) tw = n;
    }
    if (width < tw * 12 + 16) width = tw * 12 + 16;
    if (mask)
        for (i = 0; i < T; i++)
            for (j = i + 1; j < T; j++) m[i * T + j] = NAN;
    memset(&h, 0, sizeof h);
    h.v = m;
    h.rows = h.cols = T;
    h.vmax = 0; /* the largest |value| drawn */
    h.cbar_label = "B(T)[i,j]: blue < 0 < red";
    h.note = mask ? "grey: masked future (j > i)" : NULL;
    if (plot_heatmap_png_err(path, width, height, title, "key position j", "query position i", &h, err, errlen) != PLOT_OK)
        return -1;
    return 0;
}

static void stats(const float *m, int T, const char *name, char *buf, size_t cap)
{
    double s = 0, s2 = 0, mn = 1e30, mx = -1e30, n = (double)T * T;
    long i;
    for (i = 0; i < (long)T * T; i++) {
        s += m[i]; s2 += (double)m[i] * m[i];
        if (m[i] < mn) mn = m[i];
        if (m[i] > mx) mx = m[i];
    }
    snprintf(buf, cap, "%-4s T=%-5d mean=%+.4f std=%.4f min=%+.3f max=%+.3f", name, T, s / n,
             sqrt(s2 / n - (s / n) * (s / n) > 0 ? s2 / n - (s / n) * (s / n) : 0), mn, mx);
}

static int parse_list(const char *s, int *out, int cap)
{
    int n = 0;
    if (!*s) return -1;
    while (*s) {
        if (n == cap) return -1;
        char *end;
        long v;
        if (*s < '0' || *s > '9') return -1; /* no sign, no space */
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || v <= 0 || v > 16384) return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: prior_viz [--out DIR] [--T 64,256,1024] [--R 4] [--K 0] [--posmix 0.1]\n"
            "                 [--causal] [--seed 1] [--noise 0.3] [--mu FILE --mu-R R]\n"
            "                 [--era-R 32] [--era-nb 32] [--era-sigma 0.1] [--min-px 512]\n"
            "Writes DIR/rpa_T<T>.png and DIR/era_T<T>.png (DIR default runs/prior_viz): heatmaps of\n"
            "the RPA and ERA priors B(T) with title, axes (key position j, query position i) and a\n"
            "colour bar (blue < 0 < red, grey: masked future j > i), and prints each map's statistics.\n");
}

int main(int argc, char **argv)
{
    const char *out = "runs/prior_viz", *mu_file = NULL;
    int Ts[16], nT = 3, R = 4, K = 0, causal = 0, mu_R = 0, era_R = 32, era_nb = 32, min_px = 512;
    int a, k, rc = 0;
    double posmix = 0.1, noise = 0.3, era_sigma = 0.1;
    float *loaded = NULL;
    long loaded_T = 0;
    double cen[64], wid[64];
    long long seed = -1; /* -1: not given */
    Ts[0] = 64; Ts[1] = 256; Ts[2] = 1024;
    for (a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(o, "--causal")) { causal = 1; continue; }
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage(stdout); return 0; }
        if (!v) { usage(stderr); return 2; }
        a++;
        if (!strcmp(o, "--out")) { out = v; continue; }
        if (!strcmp(o, "--mu")) { mu_file = v; continue; }
        if (!strcmp(o, "--T")) {
            nT = parse_list(v, Ts, 16);
            if (nT <= 0) {
                fprintf(stderr, "prior_viz: --T needs 1..16 lengths in 1..16384, comma-separated, not '%s'\n", v);
                return 2;
            }
            continue;
        }
        {
            long long ll;
            int bad = 0;
            if (!strcmp(o, "--R")) bad = ex_parse_int(v, 1, 64, &R);
            else if (!strcmp(o, "--K")) bad = ex_parse_int(v, 0, 4096, &K);
            else if (!strcmp(o, "--posmix")) bad = ex_parse_double(v, 0.0, 1.0, &posmix);
            else if (!strcmp(o, "--seed")) {
                bad = ex_parse_ll(v, 0, LLONG_MAX, &ll);
                if (!bad) {
                    rng = 0x9E3779B97F4A7C15ULL ^ (unsigned long long)ll;
                    seed = ll;
                }
            } else if (!strcmp(o, "--noise")) bad = ex_parse_double(v, 0.0, 100.0, &noise);
            else if (!strcmp(o, "--mu-R")) bad = ex_parse_int(v, 1, 64, &mu_R);
            else if (!strcmp(o, "--era-R")) bad = ex_parse_int(v, 1, 4096, &era_R);
            else if (!strcmp(o, "--era-nb")) bad = ex_parse_int(v, 1, 4096, &era_nb);
            else if (!strcmp(o, "--era-sigma")) bad = ex_parse_double(v, 1e-6, 1e6, &era_sigma);
            else if (!strcmp(o, "--min-px")) bad = ex_parse_int(v, 1, 8192, &min_px);
            else {
                fprintf(stderr, "prior_viz: unknown option '%s'\n", o);
                usage(stderr);
                return 2;
            }
            if (bad) {
                fprintf(stderr, "prior_viz: %s: '%s' is not a number in its range (see the top of prior_viz.c)\n", o, v);
                return 2;
            }
        }
    }
    if (mu_file) {
        char *buf = NULL, e[1200];
        size_t bytes = 0;
        if (mu_R <= 0 || mu_R > 64) { fprintf(stderr, "prior_viz: --mu needs --mu-R in 1..64\n"); return 2; }
        R = mu_R;
        if (ex_read_file(mu_file, &buf, &bytes, 0, e, sizeof e) != 0) {
            fprintf(stderr, "prior_viz: --mu: %s\n", e);
            return 1;
        }
        if (bytes == 0 || bytes % (sizeof(float) * (size_t)R) != 0) {
            fprintf(stderr, "prior_viz: %s: size %zu is not a positive multiple of 4*R = %d\n", mu_file, bytes, 4 * R);
            free(buf);
            return 1;
        }
        loaded_T = (long)(bytes / (sizeof(float) * (size_t)R));
        loaded = (float *)malloc(bytes);
        if (!loaded) {
            fprintf(stderr, "prior_viz: out of memory reading %s\n", mu_file);
            free(buf);
            return 1;
        }
        memcpy(loaded, buf, bytes);
        free(buf);
    }
    if (R <= 0 || R > 64 || era_R <= 0 || era_R > 4096 || era_nb <= 0 || min_px <= 0 || min_px > 8192) {
        usage(stderr);
        return 2;
    }
    if (wt2_mkdirs(out) != 0) {
        fprintf(stderr, "prior_viz: cannot create %s: %s\n", out, strerror(errno));
        free(loaded);
        return 1;
    }
    for (k = 0; k < R; k++) { cen[k] = urand(); wid[k] = 0.05 + 0.15 * urand(); }

    for (k = 0; k < nT && rc == 0; k++) {
        int T = Ts[k], t, r;
        char path[1200], perr[1400], title[400], st[200], memb[200];
        float *mu = (float *)malloc(sizeof(float) * (size_t)T * R);
        float *bias = (float *)malloc(sizeof(float) * (size_t)T * T);
        float *ecen = (float *)malloc(sizeof(float) * (size_t)era_R);
        era_rpa_config rcfg = era_rpa_config_default(R);
        era_rpa_params rp = era_rpa_params_default();
        era_rpa_state rs = era_rpa_state_init();
        era_era_config ecfg = era_era_config_default();
        era_era_params ep;
        era_era_state es = era_era_state_init();
        if (!mu || !bias || !ecen) { fprintf(stderr, "prior_viz: out of memory\n"); rc = 1; }
        /* memberships */
        for (t = 0; rc == 0 && t < T; t++) {
            double s = 0, v[64];
            if (loaded) {
                long src = (long)((double)t * loaded_T / T);
                for (r = 0; r < R; r++) {
                    double x = loaded[src * R + r];
                    v[r] = x == x && x > 0 ? x : 0.0;
                    s += v[r];
                }
                if (s <= 0) { for (r = 0; r < R; r++) v[r] = 1.0; s = R; }
            } else {
                double x = (t + 0.5) / T, mx = -1e300;
                for (r = 0; r < R; r++) {
                    double d = (x - cen[r]) / wid[r];
                    v[r] = -0.5 * d * d + noise * nrand();
                    if (v[r] > mx) mx = v[r];
                }
                for (r = 0; r < R; r++) { v[r] = exp(v[r] - mx); s += v[r]; }
            }
            for (r = 0; r < R; r++) mu[(size_t)t * R + r] = (float)(v[r] / s);
        }
        if (rc == 0) {
            rcfg.K = K;
            rcfg.posmix = (float)posmix;
            rcfg.zscore_causal = causal;
            rp.tau_att = 1.0f;
            rc = era_rpa_forward(&rcfg, &rp, mu, 1, T, bias, &rs, NULL);
            if (rc) fprintf(stderr, "prior_viz: RPA T=%d: %s\n", T, era_strerror(rc));
        }
        if (loaded) snprintf(memb, sizeof memb, "memberships from %.120s", mu_file);
        else if (seed >= 0) snprintf(memb, sizeof memb, "random memberships (seed %lld, noise %g)", seed, noise);
        else snprintf(memb, sizeof memb, "random memberships (default seed, noise %g)", noise);
        if (rc == 0) {
            snprintf(path, sizeof path, "%s/rpa_T%d.png", out, T);
            snprintf(title, sizeof title, "RPA prior B(T), T=%d: R=%d regimes, K=%d, posmix %g\n%s, %s z-score", T, R,
                     K > 0 ? K : R, posmix, memb, causal ? "causal (j <= i)" : "full-row");
            stats(bias, T, "RPA", st, sizeof st);
            if (write_png(path, bias, T, min_px, 1, title, perr, sizeof perr) != 0) { fprintf(stderr, "prior_viz: %s\n", perr); rc = 1; }
            else printf("%s -> %s\n", st, path);
            printf("     std before z-score %.4g, after %.4g, Sinkhorn marginal error %.3g\n",
                   rs.std_pre, rs.std_post, rs.marginal_err);
        }
        if (rc == 0) {
            ecfg.R = era_R;
            ecfg.nb = era_nb;
            ecfg.zscore_causal = causal;
            era_era_init_centers(era_R, ecen);
            ep = era_era_params_default(ecen);
            ep.sigma = (float)era_sigma;
            rc = era_era_forward(&ecfg, &ep, T, bias, &es, NULL);
            if (rc) fprintf(stderr, "prior_viz: ERA T=%d: %s\n", T, era_strerror(rc));
        }
        if (rc == 0) {
            snprintf(path, sizeof path, "%s/era_T%d.png", out, T);
            snprintf(title, sizeof title, "ERA prior B(T), T=%d: R=%d regimes, nb=%d blocks\nsigma %g, evenly spaced centres, %s z-score",
                     T, era_R, era_nb, era_sigma, causal ? "causal (j <= i)" : "full-row");
            stats(bias, T, "ERA", st, sizeof st);
            if (write_png(path, bias, T, min_px, 1, title, perr, sizeof perr) != 0) { fprintf(stderr, "prior_viz: %s\n", perr); rc = 1; }
            else printf("%s -> %s\n", st, path);
            printf("     row std before z-score %.4g, after %.4g, Sinkhorn marginal error %.3g\n",
                   es.std_pre, es.std_post, es.marginal_err);
        }
        era_rpa_state_free(&rs);
        era_era_state_free(&es);
        free(mu); free(bias); free(ecen);
    }
    free(loaded);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "prior_viz: cannot write the statistics to stdout: %s\n", strerror(errno));
        rc = 1;
    }
    return rc == 0 ? 0 : 1; /* an era.h error code is a failure too */
}
