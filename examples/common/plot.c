/* plot.c - PNG line plots. See plot.h. */
#if !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE)
#define _POSIX_C_SOURCE 200809L /* fdopen, fileno, fsync */
#endif
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Declarations only (the implementation comes from one TU of the program, e.g.
   examples/common/stb_impl.c). The guard lets a test that #includes stb_impl.c and
   then this file (one TU) avoid compiling the implementation twice. */
#ifndef INCLUDE_STB_IMAGE_WRITE_H
#include <stb_image_write.h>
#endif

/* 5x7 bitmap font (our own drawing), printable ASCII 32..126: 7 rows per glyph, top
   first; bit 4 is the leftmost column. */
static const unsigned char plot__font[95][7] = {
    {0x00,0x00,0x00,0x00,0x00,0x00,0x00} /*   */, {0x04,0x04,0x04,0x04,0x04,0x00,0x04} /* ! */, {0x0a,0x0a,0x00,0x00,0x00,0x00,0x00} /* " */,
    {0x0a,0x1f,0x0a,0x0a,0x1f,0x0a,0x00} /* # */, {0x04,0x0f,0x14,0x0e,0x05,0x1e,0x04} /* $ */, {0x19,0x1a,0x02,0x04,0x08,0x0b,0x13} /* % */,
    {0x0c,0x12,0x0c,0x08,0x15,0x12,0x0d} /* & */, {0x04,0x04,0x00,0x00,0x00,0x00,0x00} /* ' */, {0x02,0x04,0x08,0x08,0x08,0x04,0x02} /* ( */,
    {0x08,0x04,0x02,0x02,0x02,0x04,0x08} /* ) */, {0x00,0x04,0x15,0x0e,0x15,0x04,0x00} /* star */, {0x00,0x04,0x04,0x1f,0x04,0x04,0x00} /* + */,
    {0x00,0x00,0x00,0x00,0x06,0x04,0x08} /* , */, {0x00,0x00,0x00,0x0f,0x00,0x00,0x00} /* - */, {0x00,0x00,0x00,0x00,0x00,0x0c,0x0c} /* . */,
    {0x01,0x02,0x02,0x04,0x08,0x08,0x10} /* slash */, {0x0e,0x11,0x13,0x15,0x19,0x11,0x0e} /* 0 */, {0x04,0x0c,0x04,0x04,0x04,0x04,0x0e} /* 1 */,
    {0x0e,0x11,0x01,0x02,0x04,0x08,0x1f} /* 2 */, {0x1e,0x01,0x01,0x0e,0x01,0x01,0x1e} /* 3 */, {0x02,0x06,0x0a,0x12,0x1f,0x02,0x02} /* 4 */,
    {0x1f,0x10,0x1e,0x01,0x01,0x11,0x0e} /* 5 */, {0x06,0x08,0x10,0x1e,0x11,0x11,0x0e} /* 6 */, {0x1f,0x01,0x02,0x04,0x08,0x08,0x08} /* 7 */,
    {0x0e,0x11,0x11,0x0e,0x11,0x11,0x0e} /* 8 */, {0x0e,0x11,0x11,0x0f,0x01,0x02,0x0c} /* 9 */, {0x00,0x0c,0x0c,0x00,0x0c,0x0c,0x00} /* : */,
    {0x00,0x0c,0x0c,0x00,0x0c,0x04,0x08} /* ; */, {0x02,0x04,0x08,0x10,0x08,0x04,0x02} /* < */, {0x00,0x00,0x1f,0x00,0x1f,0x00,0x00} /* = */,
    {0x08,0x04,0x02,0x01,0x02,0x04,0x08} /* > */, {0x0e,0x11,0x01,0x02,0x04,0x00,0x04} /* ? */, {0x0e,0x11,0x17,0x15,0x17,0x10,0x0e} /* @ */,
    {0x0e,0x11,0x11,0x1f,0x11,0x11,0x11} /* A */, {0x1e,0x11,0x11,0x1e,0x11,0x11,0x1e} /* B */, {0x0e,0x11,0x10,0x10,0x10,0x11,0x0e} /* C */,
    {0x1c,0x12,0x11,0x11,0x11,0x12,0x1c} /* D */, {0x1f,0x10,0x10,0x1e,0x10,0x10,0x1f} /* E */, {0x1f,0x10,0x10,0x1e,0x10,0x10,0x10} /* F */,
    {0x0e,0x11,0x10,0x17,0x11,0x11,0x0f} /* G */, {0x11,0x11,0x11,0x1f,0x11,0x11,0x11} /* H */, {0x0e,0x04,0x04,0x04,0x04,0x04,0x0e} /* I */,
    {0x07,0x02,0x02,0x02,0x02,0x12,0x0c} /* J */, {0x11,0x12,0x14,0x18,0x14,0x12,0x11} /* K */, {0x10,0x10,0x10,0x10,0x10,0x10,0x1f} /* L */,
    {0x11,0x1b,0x15,0x15,0x11,0x11,0x11} /* M */, {0x11,0x11,0x19,0x15,0x13,0x11,0x11} /* N */, {0x0e,0x11,0x11,0x11,0x11,0x11,0x0e} /* O */,
    {0x1e,0x11,0x11,0x1e,0x10,0x10,0x10} /* P */, {0x0e,0x11,0x11,0x11,0x15,0x12,0x0d} /* Q */, {0x1e,0x11,0x11,0x1e,0x14,0x12,0x11} /* R */,
    {0x0f,0x10,0x10,0x0e,0x01,0x01,0x1e} /* S */, {0x1f,0x04,0x04,0x04,0x04,0x04,0x04} /* T */, {0x11,0x11,0x11,0x11,0x11,0x11,0x0e} /* U */,
    {0x11,0x11,0x11,0x11,0x11,0x0a,0x04} /* V */, {0x11,0x11,0x11,0x15,0x15,0x15,0x0a} /* W */, {0x11,0x11,0x0a,0x04,0x0a,0x11,0x11} /* X */,
    {0x11,0x11,0x0a,0x04,0x04,0x04,0x04} /* Y */, {0x1f,0x01,0x02,0x04,0x08,0x10,0x1f} /* Z */, {0x0e,0x08,0x08,0x08,0x08,0x08,0x0e} /* [ */,
    {0x10,0x08,0x08,0x04,0x02,0x02,0x01} /* backslash */, {0x0e,0x02,0x02,0x02,0x02,0x02,0x0e} /* ] */, {0x04,0x0a,0x11,0x00,0x00,0x00,0x00} /* ^ */,
    {0x00,0x00,0x00,0x00,0x00,0x00,0x1f} /* _ */, {0x08,0x04,0x00,0x00,0x00,0x00,0x00} /* ` */, {0x00,0x00,0x0e,0x01,0x0f,0x11,0x0f} /* a */,
    {0x10,0x10,0x16,0x19,0x11,0x11,0x1e} /* b */, {0x00,0x00,0x0e,0x10,0x10,0x11,0x0e} /* c */, {0x01,0x01,0x0d,0x13,0x11,0x11,0x0f} /* d */,
    {0x00,0x00,0x0e,0x11,0x1f,0x10,0x0e} /* e */, {0x06,0x09,0x08,0x1c,0x08,0x08,0x08} /* f */, {0x00,0x0f,0x11,0x11,0x0f,0x01,0x0e} /* g */,
    {0x10,0x10,0x16,0x19,0x11,0x11,0x11} /* h */, {0x04,0x00,0x0c,0x04,0x04,0x04,0x0e} /* i */, {0x02,0x00,0x06,0x02,0x02,0x12,0x0c} /* j */,
    {0x10,0x10,0x12,0x14,0x18,0x14,0x12} /* k */, {0x0c,0x04,0x04,0x04,0x04,0x04,0x0e} /* l */, {0x00,0x00,0x1a,0x15,0x15,0x11,0x11} /* m */,
    {0x00,0x00,0x16,0x19,0x11,0x11,0x11} /* n */, {0x00,0x00,0x0e,0x11,0x11,0x11,0x0e} /* o */, {0x00,0x00,0x1e,0x11,0x1e,0x10,0x10} /* p */,
    {0x00,0x00,0x0d,0x13,0x0f,0x01,0x01} /* q */, {0x00,0x00,0x16,0x19,0x10,0x10,0x10} /* r */, {0x00,0x00,0x0e,0x10,0x0e,0x01,0x1e} /* s */,
    {0x08,0x08,0x1c,0x08,0x08,0x09,0x06} /* t */, {0x00,0x00,0x11,0x11,0x11,0x13,0x0d} /* u */, {0x00,0x00,0x11,0x11,0x11,0x0a,0x04} /* v */,
    {0x00,0x00,0x11,0x11,0x15,0x15,0x0a} /* w */, {0x00,0x00,0x11,0x0a,0x04,0x0a,0x11} /* x */, {0x00,0x00,0x11,0x11,0x0f,0x01,0x0e} /* y */,
    {0x00,0x00,0x1f,0x02,0x04,0x08,0x1f} /* z */, {0x02,0x04,0x04,0x08,0x04,0x04,0x02} /* { */, {0x04,0x04,0x04,0x04,0x04,0x04,0x04} /* | */,
    {0x08,0x04,0x04,0x02,0x04,0x04,0x08} /* } */, {0x00,0x00,0x08,0x15,0x02,0x00,0x00} /* ~ */,
};

typedef struct {
    unsigned char *rgb;
    int w, h;
} plot__img;

typedef struct {
    int x0, y0, x1, y1; /* inclusive clip rectangle */
} plot__rect;

static const unsigned char plot__black[3] = {0, 0, 0};
static const unsigned char plot__grid[3] = {228, 228, 228};
static const unsigned char plot__frame[3] = {60, 60, 60};
static const unsigned char plot__white[3] = {255, 255, 255};

void plot_series_color(int i, unsigned char rgb[3])
{
    static const unsigned char pal[10][3] = {{31, 100, 200}, {232, 110, 20}, {40, 150, 50}, {200, 30, 45},
                                             {130, 80, 190}, {120, 80, 60}, {220, 90, 170}, {0, 170, 190},
                                             {165, 165, 20}, {100, 100, 100}};
    if (!rgb) return;
    if (i < 0) i = 0;
    if (i < 10) {
        memcpy(rgb, pal[i], 3);
    } else {
        /* golden-angle hue, fixed saturation/value */
        double hue = fmod((double)i * 137.50776405, 360.0) / 60.0, f, v = 0.8, s = 0.75;
        int k = (int)hue, j;
        double p = v * (1 - s), q, t, c[3];
        f = hue - k;
        q = v * (1 - s * f);
        t = v * (1 - s * (1 - f));
        switch (k % 6) {
        case 0: c[0] = v; c[1] = t; c[2] = p; break;
        case 1: c[0] = q; c[1] = v; c[2] = p; break;
        case 2: c[0] = p; c[1] = v; c[2] = t; break;
        case 3: c[0] = p; c[1] = q; c[2] = v; break;
        case 4: c[0] = t; c[1] = p; c[2] = v; break;
        default: c[0] = v; c[1] = p; c[2] = q; break;
        }
        for (j = 0; j < 3; j++) rgb[j] = (unsigned char)(c[j] * 255.0 + 0.5);
    }
}

static void plot__fill(plot__img *im, int x0, int y0, int x1, int y1, const unsigned char c[3], const plot__rect *clip)
{
    int x, y;
    int cx0 = 0, cy0 = 0, cx1 = im->w - 1, cy1 = im->h - 1;
    if (clip) {
        if (clip->x0 > cx0) cx0 = clip->x0;
        if (clip->y0 > cy0) cy0 = clip->y0;
        if (clip->x1 < cx1) cx1 = clip->x1;
        if (clip->y1 < cy1) cy1 = clip->y1;
    }
    if (x0 < cx0) x0 = cx0;
    if (y0 < cy0) y0 = cy0;
    if (x1 > cx1) x1 = cx1;
    if (y1 > cy1) y1 = cy1;
    for (y = y0; y <= y1; y++)
        for (x = x0; x <= x1; x++) memcpy(im->rgb + ((size_t)y * (size_t)im->w + (size_t)x) * 3, c, 3);
}

/* One glyph with its top-left at (x, y); vertical != 0: rotated a quarter turn
   counter-clockwise, (x, y) then being its bottom-left. */
static void plot__glyph(plot__img *im, int x, int y, unsigned char ch, int sc, const unsigned char c[3], int vertical)
{
    const unsigned char *g = plot__font[(ch >= 32 && ch < 127) ? ch - 32 : '?' - 32];
    int r, col;
    for (r = 0; r < 7; r++)
        for (col = 0; col < 5; col++)
            if (g[r] & (0x10 >> col)) {
                if (!vertical)
                    plot__fill(im, x + col * sc, y + r * sc, x + col * sc + sc - 1, y + r * sc + sc - 1, c, NULL);
                else
                    plot__fill(im, x + r * sc, y - (col + 1) * sc + 1, x + r * sc + sc - 1, y - col * sc, c, NULL);
            }
}

#define PLOT__MAXTEXT 60

static int plot__text_len(const char *s)
{
    int n = s ? (int)strlen(s) : 0;
    return n > PLOT__MAXTEXT ? PLOT__MAXTEXT : n;
}

static int plot__text_w(const char *s, int sc)
{
    int n = plot__text_len(s);
    return n ? n * 6 * sc - sc : 0;
}

static void plot__text(plot__img *im, int x, int y, const char *s, int sc, const unsigned char c[3])
{
    int i, n = plot__text_len(s);
    for (i = 0; i < n; i++) plot__glyph(im, x + i * 6 * sc, y, (unsigned char)s[i], sc, c, 0);
}

/* Reads bottom to top, starting at (x, ybottom). */
static void plot__text_v(plot__img *im, int x, int ybottom, const char *s, int sc, const unsigned char c[3])
{
    int i, n = plot__text_len(s);
    for (i = 0; i < n; i++) plot__glyph(im, x, ybottom - i * 6 * sc, (unsigned char)s[i], sc, c, 1);
}

/* A thick line (t x t squares along a Bresenham path), clipped. */
static void plot__line(plot__img *im, int x0, int y0, int x1, int y1, int t, const unsigned char c[3], const plot__rect *clip)
{
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1, e = dx + dy;
    int lo = (t - 1) / 2, hi = t / 2;
    for (;;) {
        int e2 = 2 * e;
        plot__fill(im, x0 - lo, y0 - lo, x0 + hi, y0 + hi, c, clip);
        if (e2 >= dy) {
            if (x0 == x1) break;
            e += dy;
            x0 += sx;
        }
        if (e2 <= dx) {
            if (y0 == y1) break;
            e += dx;
            y0 += sy;
        }
    }
}

/* ------------------------------------------------------------------ axes */

#define PLOT__MAXTICKS 64

typedef struct {
    double lo, hi;               /* axis range in plotted units (log10 for a log axis) */
    int n;                       /* ticks */
    double pos[PLOT__MAXTICKS];  /* in plotted units */
    char lab[PLOT__MAXTICKS][24];
} plot__axis;

static double plot__nice(double span, int target)
{
    double raw = span / (target > 0 ? target : 1), e, f, nf;
    if (!(raw > 0) || !isfinite(raw)) return 0;
    e = floor(log10(raw));
    f = raw / pow(10.0, e);
    nf = f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10;
    return nf * pow(10.0, e);
}

static void plot__fmt(char *buf, size_t cap, double v, double step)
{
    double a = fabs(v);
    if (v == 0) {
        snprintf(buf, cap, "0");
    } else if (a >= 1e6 || a < 1e-4) {
        snprintf(buf, cap, "%.3g", v);
    } else {
        int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
        if (dec > 8) dec = 8;
        if (dec < 0) dec = 0;
        snprintf(buf, cap, "%.*f", dec, v);
    }
}

/* Linear ticks of [lo, hi] (real units) at multiples of a nice step; pos = f(v). */
static void plot__lin_ticks(plot__axis *ax, double lo, double hi, int target, int logpos)
{
    double step = plot__nice(hi - lo, target), k0, k1, k;
    ax->n = 0;
    if (!(step > 0)) return;
    k0 = ceil(lo / step - 1e-9);
    k1 = floor(hi / step + 1e-9);
    if (!(k1 - k0 < PLOT__MAXTICKS)) return;
    for (k = k0; k <= k1 && ax->n < PLOT__MAXTICKS; k += 1) {
        double v = k * step;
        if (fabs(v) < step * 1e-9) v = 0;
        if (logpos) {
            if (!(v > 0)) continue;
            ax->pos[ax->n] = log10(v);
        } else {
            ax->pos[ax->n] = v;
        }
        plot__fmt(ax->lab[ax->n], sizeof ax->lab[0], v, step);
        ax->n++;
    }
}

static void plot__ticks(plot__axis *ax, int target, int logy)
{
    if (!logy) {
        plot__lin_ticks(ax, ax->lo, ax->hi, target, 0);
    } else if (ax->hi - ax->lo >= 1.0) {
        /* whole decades, every m-th */
        double k0 = ceil(ax->lo - 1e-9), k1 = floor(ax->hi + 1e-9), m = 1, k;
        while ((k1 - k0) / m + 1 > (target > 2 ? target : 2) + 1) m += 1;
        ax->n = 0;
        for (k = k0; k <= k1 && ax->n < PLOT__MAXTICKS; k += m) {
            double v = pow(10.0, k);
            ax->pos[ax->n] = k;
            plot__fmt(ax->lab[ax->n], sizeof ax->lab[0], v, v);
            ax->n++;
        }
    } else {
        plot__lin_ticks(ax, pow(10.0, ax->lo), pow(10.0, ax->hi), target, 1);
    }
}

/* (v - lo) / (hi - lo), safe for huge ranges. */
static double plot__frac(double v, double lo, double hi)
{
    double t = (v * 0.5 - lo * 0.5) / (hi * 0.5 - lo * 0.5);
    if (!(t > -1.0)) t = -1.0;
    if (t > 2.0) t = 2.0;
    return t;
}

static int plot__check(int width, int height, const plot_series *s, int ns)
{
    int i;
    if (width < 64 || height < 64 || width > 16384 || height > 16384) return PLOT_EINVAL;
    if (ns < 0 || (ns > 0 && !s)) return PLOT_EINVAL;
    for (i = 0; i < ns; i++)
        if (s[i].n < 0 || (s[i].n > 0 && (!s[i].x || !s[i].y))) return PLOT_EINVAL;
    return PLOT_OK;
}

static int plot__ok(double x, double y, int logy) { return isfinite(x) && isfinite(y) && (!logy || y > 0); }

int plot_lines_rgb(unsigned char *rgb, int width, int height, const char *title, const char *xlabel,
                   const char *ylabel, const plot_series *s, int ns, int logy)
{
    plot__img im;
    plot__axis ax, ay;
    plot__rect area;
    int i, k, sc, ch, cw, top, bottom, left, right, pw, ph, have = 0, maxw = 0, t;
    double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    int rc = plot__check(width, height, s, ns);
    if (rc != PLOT_OK) return rc;
    if (!rgb) return PLOT_EINVAL;
    logy = logy ? 1 : 0;
    im.rgb = rgb;
    im.w = width;
    im.h = height;
    plot__fill(&im, 0, 0, width - 1, height - 1, plot__white, NULL);
    /* data ranges */
    for (i = 0; i < ns; i++)
        for (k = 0; k < s[i].n; k++) {
            double x = s[i].x[k], y = s[i].y[k];
            if (!plot__ok(x, y, logy)) continue;
            if (logy) y = log10(y);
            if (!have) {
                xlo = xhi = x;
                ylo = yhi = y;
                have = 1;
            } else {
                if (x < xlo) xlo = x;
                if (x > xhi) xhi = x;
                if (y < ylo) ylo = y;
                if (y > yhi) yhi = y;
            }
        }
    if (xlo == xhi) {
        double d = fabs(xlo) * 0.05;
        if (!(d > 0) || !isfinite(xlo - d) || !isfinite(xhi + d)) d = 0.5;
        xlo -= d;
        xhi += d;
    }
    if (ylo == yhi) {
        double d = logy ? 0.5 : fabs(ylo) * 0.1;
        if (!(d > 0) || !isfinite(ylo - d) || !isfinite(yhi + d)) d = 0.5;
        ylo -= d;
        yhi += d;
    } else {
        double d = (yhi * 0.5 - ylo * 0.5) * 0.08; /* 4% of the span each side */
        if (isfinite(ylo - d) && isfinite(yhi + d)) {
            ylo -= d;
            yhi += d;
        }
    }
    /* layout */
    sc = (width >= 480 && height >= 480) ? 2 : 1;
    ch = 7 * sc;
    cw = 6 * sc;
    top = 8 + (title && *title ? ch + 8 : 0);
    bottom = 6 + ch + 6 + (xlabel && *xlabel ? ch + 6 : 0) + 4;
    right = 4 * cw;
    if (top > height / 4) top = height / 4;
    if (bottom > height * 2 / 5) bottom = height * 2 / 5;
    ph = height - top - bottom;
    ay.lo = ylo;
    ay.hi = yhi;
    plot__ticks(&ay, ph / (ch * 4) < 2 ? 2 : (ph / (ch * 4) > 10 ? 10 : ph / (ch * 4)), logy);
    for (k = 0; k < ay.n; k++)
        if (plot__text_w(ay.lab[k], sc) > maxw) maxw = plot__text_w(ay.lab[k], sc);
    left = 6 + (ylabel && *ylabel ? ch + 8 : 0) + maxw + 8;
    if (left > width * 2 / 5) left = width * 2 / 5;
    if (right > width / 10) right = width / 10;
    pw = width - left - right;
    ax.lo = xlo;
    ax.hi = xhi;
    t = pw / (cw * 10);
    plot__ticks(&ax, t < 2 ? 2 : (t > 10 ? 10 : t), 0);
    area.x0 = left;
    area.y0 = top;
    area.x1 = left + pw - 1;
    area.y1 = top + ph - 1;
    /* grid */
    for (k = 0; k < ax.n; k++) {
        int px = left + (int)floor(plot__frac(ax.pos[k], xlo, xhi) * (pw - 1) + 0.5);
        plot__fill(&im, px, area.y0, px, area.y1, plot__grid, &area);
    }
    for (k = 0; k < ay.n; k++) {
        int py = top + (int)floor((1.0 - plot__frac(ay.pos[k], ylo, yhi)) * (ph - 1) + 0.5);
        plot__fill(&im, area.x0, py, area.x1, py, plot__grid, &area);
    }
    /* series */
    t = sc;
    for (i = 0; i < ns; i++) {
        unsigned char c[3];
        int prev = 0, px0 = 0, py0 = 0, run = 0;
        plot_series_color(i, c);
        for (k = 0; k <= s[i].n; k++) {
            int ok = k < s[i].n && plot__ok(s[i].x[k], s[i].y[k], logy), px = 0, py = 0;
            if (ok) {
                double y = logy ? log10(s[i].y[k]) : s[i].y[k];
                px = left + (int)floor(plot__frac(s[i].x[k], xlo, xhi) * (pw - 1) + 0.5);
                py = top + (int)floor((1.0 - plot__frac(y, ylo, yhi)) * (ph - 1) + 0.5);
                if (prev) plot__line(&im, px0, py0, px, py, t, c, &area);
                run++;
            } else {
                if (run == 1) /* an isolated point */
                    plot__fill(&im, px0 - 1 - sc / 2, py0 - 1 - sc / 2, px0 + 1 + sc / 2, py0 + 1 + sc / 2, c, &area);
                run = 0;
            }
            prev = ok;
            px0 = px;
            py0 = py;
        }
    }
    /* frame, ticks, labels */
    plot__fill(&im, area.x0 - 1, area.y0 - 1, area.x1 + 1, area.y0 - 1, plot__frame, NULL);
    plot__fill(&im, area.x0 - 1, area.y1 + 1, area.x1 + 1, area.y1 + 1, plot__frame, NULL);
    plot__fill(&im, area.x0 - 1, area.y0 - 1, area.x0 - 1, area.y1 + 1, plot__frame, NULL);
    plot__fill(&im, area.x1 + 1, area.y0 - 1, area.x1 + 1, area.y1 + 1, plot__frame, NULL);
    /* tick labels; one that would touch the previous label is left out (its tick stays) */
    {
        int last = -1000000;
        for (k = 0; k < ax.n; k++) {
            int px = left + (int)floor(plot__frac(ax.pos[k], xlo, xhi) * (pw - 1) + 0.5);
            int lx = px - plot__text_w(ax.lab[k], sc) / 2;
            plot__fill(&im, px, area.y1 + 2, px, area.y1 + 5, plot__frame, NULL);
            if (lx < last + cw) continue;
            plot__text(&im, lx, area.y1 + 8, ax.lab[k], sc, plot__black);
            last = lx + plot__text_w(ax.lab[k], sc);
        }
        last = 1000000;
        for (k = 0; k < ay.n; k++) {
            int py = top + (int)floor((1.0 - plot__frac(ay.pos[k], ylo, yhi)) * (ph - 1) + 0.5);
            plot__fill(&im, area.x0 - 5, py, area.x0 - 2, py, plot__frame, NULL);
            if (py - ch / 2 + ch + 3 * sc > last) continue; /* labels go upwards */
            plot__text(&im, area.x0 - 8 - plot__text_w(ay.lab[k], sc), py - ch / 2, ay.lab[k], sc, plot__black);
            last = py - ch / 2;
        }
    }
    if (title && *title) plot__text(&im, left + pw / 2 - plot__text_w(title, sc) / 2, 8, title, sc, plot__black);
    if (xlabel && *xlabel)
        plot__text(&im, left + pw / 2 - plot__text_w(xlabel, sc) / 2, area.y1 + 8 + ch + 6, xlabel, sc, plot__black);
    if (ylabel && *ylabel) plot__text_v(&im, 6, top + ph / 2 + plot__text_w(ylabel, sc) / 2, ylabel, sc, plot__black);
    /* legend */
    if (ns > 0) {
        int rows = ns, lw = 0, lh, lx, ly, sw = 4 * cw;
        char name[32];
        if (rows > (ph - 8) / (ch + 4)) rows = (ph - 8) / (ch + 4);
        for (i = 0; i < rows; i++) {
            int w;
            if (s[i].label) w = plot__text_w(s[i].label, sc);
            else {
                snprintf(name, sizeof name, "series %d", i);
                w = plot__text_w(name, sc);
            }
            if (w > lw) lw = w;
        }
        lw += sw + 3 * cw;
        lh = rows * (ch + 4) + 6;
        lx = area.x1 - 6 - lw;
        ly = area.y0 + 6;
        if (rows > 0 && lx > area.x0) {
            plot__fill(&im, lx, ly, lx + lw, ly + lh, plot__white, NULL);
            plot__fill(&im, lx, ly, lx + lw, ly, plot__frame, NULL);
            plot__fill(&im, lx, ly + lh, lx + lw, ly + lh, plot__frame, NULL);
            plot__fill(&im, lx, ly, lx, ly + lh, plot__frame, NULL);
            plot__fill(&im, lx + lw, ly, lx + lw, ly + lh, plot__frame, NULL);
            for (i = 0; i < rows; i++) {
                unsigned char c[3];
                int ry = ly + 4 + i * (ch + 4);
                plot_series_color(i, c);
                plot__fill(&im, lx + cw, ry + ch / 2 - sc, lx + cw + sw - 1, ry + ch / 2 + sc, c, NULL);
                if (s[i].label) plot__text(&im, lx + 2 * cw + sw, ry, s[i].label, sc, plot__black);
                else {
                    snprintf(name, sizeof name, "series %d", i);
                    plot__text(&im, lx + 2 * cw + sw, ry, name, sc, plot__black);
                }
            }
        }
    }
    return PLOT_OK;
}

/* stb's PNG bytes into a FILE, remembering the first failed write (stb ignores them) */
typedef struct {
    FILE *f;
    int err; /* errno of the first failed fwrite, or EIO */
} plot__sink;

static void plot__sink_write(void *ctx, void *data, int size)
{
    plot__sink *k = (plot__sink *)ctx;
    if (k->err || size <= 0) return;
    errno = 0;
    if (fwrite(data, 1, (size_t)size, k->f) != (size_t)size) k->err = errno ? errno : EIO;
}

static int plot__err(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int plot_lines_png_err(const char *path, int width, int height, const char *title, const char *xlabel,
                       const char *ylabel, const plot_series *s, int ns, int logy, char *err, size_t errlen)
{
    unsigned char *rgb;
    char *tmp = NULL;
    plot__sink k;
    int rc, e, fd;
    if (err && errlen) err[0] = 0;
    if (!path || !*path) return plot__err(err, errlen, PLOT_EINVAL, "plot: empty path");
    rc = plot__check(width, height, s, ns);
    if (rc != PLOT_OK) return plot__err(err, errlen, rc, "plot: invalid size or series");
    rgb = (unsigned char *)malloc((size_t)width * (size_t)height * 3);
    tmp = (char *)malloc(strlen(path) + 32);
    if (!rgb || !tmp) {
        free(rgb);
        free(tmp);
        return plot__err(err, errlen, PLOT_ENOMEM, "out of memory drawing %s", path);
    }
    rc = plot_lines_rgb(rgb, width, height, title, xlabel, ylabel, s, ns, logy);
    if (rc != PLOT_OK) {
        free(rgb);
        free(tmp);
        return plot__err(err, errlen, rc, "cannot draw %s", path);
    }
    /* to "<path>.tmp.<pid>", then renamed only when every byte was written, flushed,
       synced and closed: a reader never sees a half-written or empty PNG */
    sprintf(tmp, "%s.tmp.%ld", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    k.f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!k.f) {
        e = errno;
        if (fd >= 0) close(fd);
        remove(tmp);
        free(rgb);
        rc = plot__err(err, errlen, PLOT_EIO, "cannot create %s: %s", tmp, strerror(e));
        free(tmp);
        return rc;
    }
    k.err = 0;
    if (!stbi_write_png_to_func(plot__sink_write, &k, width, height, 3, rgb, width * 3)) {
        fclose(k.f);
        remove(tmp);
        free(rgb);
        free(tmp);
        return plot__err(err, errlen, PLOT_ENOMEM, "cannot encode %s (out of memory)", path);
    }
    free(rgb);
    if (!k.err && fflush(k.f) != 0) k.err = errno ? errno : EIO;
    if (!k.err && ferror(k.f)) k.err = EIO;
    if (!k.err && fsync(fileno(k.f)) != 0 && errno != EINVAL && errno != EROFS) k.err = errno;
    if (fclose(k.f) != 0 && !k.err) k.err = errno ? errno : EIO;
    if (k.err) {
        remove(tmp);
        rc = plot__err(err, errlen, PLOT_EIO, "cannot write %s: %s (left unchanged)", path, strerror(k.err));
        free(tmp);
        return rc;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        remove(tmp);
        rc = plot__err(err, errlen, PLOT_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
        free(tmp);
        return rc;
    }
    free(tmp);
    return PLOT_OK;
}

int plot_lines_png(const char *path, int width, int height, const char *title, const char *xlabel,
                   const char *ylabel, const plot_series *s, int ns, int logy)
{
    return plot_lines_png_err(path, width, height, title, xlabel, ylabel, s, ns, logy, NULL, 0);
}

/*
MIT License

Copyright (c) 2026 attnkit contributors

Permission is hereby granted, free of charge, to any person obtaining a copy of this
software and associated documentation files (the "Software"), to deal in the Software
without restriction, including without limitation the rights to use, copy, modify, merge,
publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR
PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
DEALINGS IN THE SOFTWARE.
*/
