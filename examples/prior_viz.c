/* prior_viz - PNG heatmaps of the RPA and ERA attention priors B(T) (era.h) for
   several sequence lengths, so the bands the papers describe can be seen.

     make build/prior_viz
     build/prior_viz [--out DIR] [--T 64,256,1024] [--R 4] [--K 0] [--posmix 0.1]
                     [--causal] [--seed 1] [--noise 0.3] [--mu FILE --mu-R R]
                     [--era-R 32] [--era-nb 32] [--era-sigma 0.1] [--min-px 512]

   Writes DIR/rpa_T<T>.png and DIR/era_T<T>.png (default DIR: build/prior_viz) and
   prints the statistics of every map. Colours: blue negative, white 0, red positive,
   scaled to the largest |value| of each map; the masked future (j > i) is drawn grey.

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
#include <stb_image_write.h>
#include "common/data.h"
#include "common/exio.h"

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

/* diverging colour map into rgb; m: (T,T); grey above the diagonal when mask */
/* stb's PNG bytes into the temporary output (ex_out_commit checks the stream's error) */
static void png_sink(void *ctx, void *data, int size)
{
    FILE *f = (FILE *)ctx;
    if (size > 0) (void)fwrite(data, 1, (size_t)size, f);
}

static int write_png(const char *path, const float *m, int T, int min_px, int mask, char *err, size_t errlen)
{
    ex_out o;
    int scale = 1, W, x, y, rc;
    float vmax = 0.0f;
    unsigned char *img;
    long i;
    while (T * scale < min_px) scale++;
    W = T * scale;
    for (i = 0; i < (long)T * T; i++) /* scale to the entries that are drawn */
        if ((!mask || i % T <= i / T) && fabsf(m[i]) > vmax) vmax = fabsf(m[i]);
    if (vmax <= 0.0f) vmax = 1.0f;
    img = (unsigned char *)malloc((size_t)W * W * 3);
    if (!img) return ex_errf(err, errlen, -1, "out of memory for %s", path);
    for (y = 0; y < W; y++)
        for (x = 0; x < W; x++) {
            int i0 = y / scale, j0 = x / scale;
            unsigned char *px = img + ((size_t)y * W + x) * 3;
            float v = m[(size_t)i0 * T + j0] / vmax;
            if (mask && j0 > i0) { px[0] = px[1] = px[2] = 150; continue; }
            if (v > 1) v = 1;
            if (v < -1) v = -1;
            if (v >= 0) { /* white -> red */
                px[0] = 255; px[1] = (unsigned char)(255 * (1 - v)); px[2] = (unsigned char)(255 * (1 - v));
            } else {     /* white -> blue */
                px[0] = (unsigned char)(255 * (1 + v)); px[1] = (unsigned char)(255 * (1 + v)); px[2] = 255;
            }
        }
    if (ex_out_open(&o, path, err, errlen) != 0) {
        free(img);
        return -1;
    }
    rc = stbi_write_png_to_func(png_sink, o.f, W, W, 3, img, W * 3);
    free(img);
    if (!rc) {
        ex_out_discard(&o);
        return ex_errf(err, errlen, -1, "cannot encode %s (out of memory)", path);
    }
    return ex_out_commit(&o, err, errlen);
}

static void stats(const float *m, int T, const char *name, const char *path)
{
    double s = 0, s2 = 0, mn = 1e30, mx = -1e30, n = (double)T * T;
    long i;
    for (i = 0; i < (long)T * T; i++) {
        s += m[i]; s2 += (double)m[i] * m[i];
        if (m[i] < mn) mn = m[i];
        if (m[i] > mx) mx = m[i];
    }
    printf("%-4s T=%-5d mean=%+.4f std=%.4f min=%+.3f max=%+.3f -> %s\n", name, T, s / n,
           sqrt(s2 / n - (s / n) * (s / n) > 0 ? s2 / n - (s / n) * (s / n) : 0), mn, mx, path);
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

static void usage(void)
{
    fprintf(stderr,
            "usage: prior_viz [--out DIR] [--T 64,256,1024] [--R 4] [--K 0] [--posmix 0.1]\n"
            "                 [--causal] [--seed 1] [--noise 0.3] [--mu FILE --mu-R R]\n"
            "                 [--era-R 32] [--era-nb 32] [--era-sigma 0.1] [--min-px 512]\n");
}

int main(int argc, char **argv)
{
    const char *out = "build/prior_viz", *mu_file = NULL;
    int Ts[16], nT = 3, R = 4, K = 0, causal = 0, mu_R = 0, era_R = 32, era_nb = 32, min_px = 512;
    int a, k, rc = 0;
    double posmix = 0.1, noise = 0.3, era_sigma = 0.1;
    float *loaded = NULL;
    long loaded_T = 0;
    double cen[64], wid[64];
    Ts[0] = 64; Ts[1] = 256; Ts[2] = 1024;
    for (a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;
        if (!strcmp(o, "--causal")) { causal = 1; continue; }
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) { usage(); return 0; }
        if (!v) { usage(); return 2; }
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
                if (!bad) rng = 0x9E3779B97F4A7C15ULL ^ (unsigned long long)ll;
            } else if (!strcmp(o, "--noise")) bad = ex_parse_double(v, 0.0, 100.0, &noise);
            else if (!strcmp(o, "--mu-R")) bad = ex_parse_int(v, 1, 64, &mu_R);
            else if (!strcmp(o, "--era-R")) bad = ex_parse_int(v, 1, 4096, &era_R);
            else if (!strcmp(o, "--era-nb")) bad = ex_parse_int(v, 1, 4096, &era_nb);
            else if (!strcmp(o, "--era-sigma")) bad = ex_parse_double(v, 1e-6, 1e6, &era_sigma);
            else if (!strcmp(o, "--min-px")) bad = ex_parse_int(v, 1, 8192, &min_px);
            else {
                fprintf(stderr, "prior_viz: unknown option '%s'\n", o);
                usage();
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
        usage();
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
        char path[1200], perr[1400];
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
        if (rc == 0) {
            snprintf(path, sizeof path, "%s/rpa_T%d.png", out, T);
            if (write_png(path, bias, T, min_px, 1, perr, sizeof perr) != 0) { fprintf(stderr, "prior_viz: %s\n", perr); rc = 1; }
            else stats(bias, T, "RPA", path);
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
            if (write_png(path, bias, T, min_px, 1, perr, sizeof perr) != 0) { fprintf(stderr, "prior_viz: %s\n", perr); rc = 1; }
            else stats(bias, T, "ERA", path);
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
