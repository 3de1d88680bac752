/* plot.c - PNG line plots. See plot.h. */
#if !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE)
#define _POSIX_C_SOURCE 200809L /* fdopen, fileno, fsync */
#endif
#include "plot.h"
#include "errf.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
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

/* 5x9 bitmap font (our own drawing), printable ASCII 32..126: 9 rows per glyph, top
   first, rows 0-6 above the baseline, rows 7-8 the descenders (g j p q y , ; and the
   bar |; a glyph written with 7 rows has none); bit 4 is the leftmost column. Told apart
   on purpose: g/q/9 (g and q descend, g with a hook), 1/l/I/| (1 flag and full foot, l a
   hooked foot, I full-width bars at both ends, | through the descender), 0/O (0 narrow
   and slashed), 5/S (5 flat-topped). tests/test_plot.c checks
   that every pair differs in at least 2 pixels and those pairs in more. */
static const unsigned char plot__font[95][9] = {
    {0x00,0x00,0x00,0x00,0x00,0x00,0x00} /*   */, {0x04,0x0e,0x0e,0x04,0x04,0x00,0x04} /* ! */, {0x0a,0x0a,0x00,0x00,0x00,0x00,0x00} /* " */,
    {0x0a,0x1f,0x0a,0x0a,0x1f,0x0a,0x00} /* # */, {0x04,0x0f,0x14,0x0e,0x05,0x1e,0x04} /* $ */, {0x19,0x1a,0x02,0x04,0x08,0x0b,0x13} /* % */,
    {0x0c,0x12,0x0c,0x08,0x15,0x12,0x0d} /* & */, {0x04,0x04,0x00,0x00,0x00,0x00,0x00} /* ' */, {0x02,0x04,0x08,0x08,0x08,0x04,0x02} /* ( */,
    {0x08,0x04,0x02,0x02,0x02,0x04,0x08} /* ) */, {0x00,0x04,0x15,0x0e,0x15,0x04,0x00} /* star */, {0x00,0x04,0x04,0x1f,0x04,0x04,0x00} /* + */,
    {0x00,0x00,0x00,0x00,0x00,0x0c,0x0c,0x04,0x08} /* , */, {0x00,0x00,0x00,0x0f,0x00,0x00,0x00} /* - */, {0x00,0x00,0x00,0x00,0x00,0x0c,0x0c} /* . */,
    {0x01,0x02,0x02,0x04,0x08,0x08,0x10} /* slash */, {0x06,0x09,0x0b,0x0d,0x09,0x09,0x06} /* 0 */, {0x04,0x0c,0x14,0x04,0x04,0x04,0x1f} /* 1 */,
    {0x0e,0x11,0x01,0x02,0x04,0x08,0x1f} /* 2 */, {0x1e,0x01,0x01,0x0e,0x01,0x01,0x1e} /* 3 */, {0x02,0x06,0x0a,0x12,0x1f,0x02,0x02} /* 4 */,
    {0x1f,0x10,0x1e,0x01,0x01,0x11,0x0e} /* 5 */, {0x06,0x08,0x10,0x1e,0x11,0x11,0x0e} /* 6 */, {0x1f,0x01,0x02,0x04,0x08,0x08,0x08} /* 7 */,
    {0x0e,0x11,0x11,0x0e,0x11,0x11,0x0e} /* 8 */, {0x0e,0x11,0x11,0x0f,0x01,0x02,0x0c} /* 9 */, {0x00,0x0c,0x0c,0x00,0x0c,0x0c,0x00} /* : */,
    {0x00,0x0c,0x0c,0x00,0x00,0x0c,0x0c,0x04,0x08} /* ; */, {0x02,0x04,0x08,0x10,0x08,0x04,0x02} /* < */, {0x00,0x00,0x1f,0x00,0x1f,0x00,0x00} /* = */,
    {0x08,0x04,0x02,0x01,0x02,0x04,0x08} /* > */, {0x0e,0x11,0x01,0x02,0x04,0x00,0x04} /* ? */, {0x0e,0x11,0x17,0x15,0x17,0x10,0x0e} /* @ */,
    {0x0e,0x11,0x11,0x1f,0x11,0x11,0x11} /* A */, {0x1e,0x11,0x11,0x1e,0x11,0x11,0x1e} /* B */, {0x0e,0x11,0x10,0x10,0x10,0x11,0x0e} /* C */,
    {0x1c,0x12,0x11,0x11,0x11,0x12,0x1c} /* D */, {0x1f,0x10,0x10,0x1e,0x10,0x10,0x1f} /* E */, {0x1f,0x10,0x10,0x1e,0x10,0x10,0x10} /* F */,
    {0x0e,0x11,0x10,0x17,0x11,0x11,0x0f} /* G */, {0x11,0x11,0x11,0x1f,0x11,0x11,0x11} /* H */, {0x1f,0x04,0x04,0x04,0x04,0x04,0x1f} /* I */,
    {0x07,0x02,0x02,0x02,0x02,0x12,0x0c} /* J */, {0x11,0x12,0x14,0x18,0x14,0x12,0x11} /* K */, {0x10,0x10,0x10,0x10,0x10,0x10,0x1f} /* L */,
    {0x11,0x1b,0x15,0x15,0x11,0x11,0x11} /* M */, {0x11,0x11,0x19,0x15,0x13,0x11,0x11} /* N */, {0x0e,0x11,0x11,0x11,0x11,0x11,0x0e} /* O */,
    {0x1e,0x11,0x11,0x1e,0x10,0x10,0x10} /* P */, {0x0e,0x11,0x11,0x11,0x15,0x12,0x0d} /* Q */, {0x1e,0x11,0x11,0x1e,0x14,0x12,0x11} /* R */,
    {0x0f,0x10,0x10,0x0e,0x01,0x01,0x1e} /* S */, {0x1f,0x04,0x04,0x04,0x04,0x04,0x04} /* T */, {0x11,0x11,0x11,0x11,0x11,0x11,0x0e} /* U */,
    {0x11,0x11,0x11,0x11,0x11,0x0a,0x04} /* V */, {0x11,0x11,0x11,0x15,0x15,0x15,0x0a} /* W */, {0x11,0x11,0x0a,0x04,0x0a,0x11,0x11} /* X */,
    {0x11,0x11,0x0a,0x04,0x04,0x04,0x04} /* Y */, {0x1f,0x01,0x02,0x04,0x08,0x10,0x1f} /* Z */, {0x0e,0x08,0x08,0x08,0x08,0x08,0x0e} /* [ */,
    {0x10,0x08,0x08,0x04,0x02,0x02,0x01} /* backslash */, {0x0e,0x02,0x02,0x02,0x02,0x02,0x0e} /* ] */, {0x04,0x0a,0x11,0x00,0x00,0x00,0x00} /* ^ */,
    {0x00,0x00,0x00,0x00,0x00,0x00,0x1f} /* _ */, {0x08,0x04,0x00,0x00,0x00,0x00,0x00} /* ` */, {0x00,0x00,0x0e,0x01,0x0f,0x11,0x0f} /* a */,
    {0x10,0x10,0x16,0x19,0x11,0x11,0x1e} /* b */, {0x00,0x00,0x0e,0x10,0x10,0x11,0x0e} /* c */, {0x01,0x01,0x0d,0x13,0x11,0x11,0x0f} /* d */,
    {0x00,0x00,0x0e,0x11,0x1f,0x10,0x0e} /* e */, {0x06,0x09,0x08,0x1c,0x08,0x08,0x08} /* f */, {0x00,0x00,0x0f,0x11,0x11,0x11,0x0f,0x01,0x1e} /* g */,
    {0x10,0x10,0x16,0x19,0x11,0x11,0x11} /* h */, {0x04,0x00,0x0c,0x04,0x04,0x04,0x0e} /* i */, {0x02,0x00,0x06,0x02,0x02,0x02,0x02,0x12,0x0c} /* j */,
    {0x10,0x10,0x12,0x14,0x18,0x14,0x12} /* k */, {0x0c,0x04,0x04,0x04,0x04,0x05,0x02} /* l */, {0x00,0x00,0x1a,0x15,0x15,0x11,0x11} /* m */,
    {0x00,0x00,0x16,0x19,0x11,0x11,0x11} /* n */, {0x00,0x00,0x0e,0x11,0x11,0x11,0x0e} /* o */, {0x00,0x00,0x1e,0x11,0x11,0x11,0x1e,0x10,0x10} /* p */,
    {0x00,0x00,0x0f,0x11,0x11,0x11,0x0f,0x01,0x01} /* q */, {0x00,0x00,0x16,0x18,0x10,0x10,0x10} /* r */, {0x00,0x00,0x0e,0x10,0x0e,0x01,0x1e} /* s */,
    {0x08,0x08,0x1c,0x08,0x08,0x09,0x06} /* t */, {0x00,0x00,0x11,0x11,0x11,0x13,0x0d} /* u */, {0x00,0x00,0x11,0x11,0x11,0x0a,0x04} /* v */,
    {0x00,0x00,0x11,0x11,0x15,0x15,0x0a} /* w */, {0x00,0x00,0x11,0x0a,0x04,0x0a,0x11} /* x */, {0x00,0x00,0x11,0x11,0x11,0x11,0x0f,0x01,0x0e} /* y */,
    {0x00,0x00,0x1f,0x02,0x04,0x08,0x1f} /* z */, {0x02,0x04,0x04,0x08,0x04,0x04,0x02} /* { */, {0x04,0x04,0x04,0x04,0x04,0x04,0x04,0x04,0x04} /* | */,
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
static const unsigned char plot__masked[3] = {150, 150, 150};

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
    for (r = 0; r < 9; r++)
        for (col = 0; col < 5; col++)
            if (g[r] & (0x10 >> col)) {
                if (!vertical)
                    plot__fill(im, x + col * sc, y + r * sc, x + col * sc + sc - 1, y + r * sc + sc - 1, c, NULL);
                else
                    plot__fill(im, x + r * sc, y - (col + 1) * sc + 1, x + r * sc + sc - 1, y - col * sc, c, NULL);
            }
}

#define PLOT__MAXTEXT 120

/* characters of s up to its first '\n' (at most PLOT__MAXTEXT) */
static int plot__text_len(const char *s)
{
    int n = 0;
    if (!s) return 0;
    while (s[n] && s[n] != '\n' && n < PLOT__MAXTEXT) n++;
    return n;
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

/* the lines of a title: at most 2 ('\n' separates them) */
static int plot__title_lines(const char *t, const char *line[2])
{
    const char *nl;
    line[0] = line[1] = NULL;
    if (!t || !*t) return 0;
    line[0] = t;
    nl = strchr(t, '\n');
    if (nl && nl[1]) {
        line[1] = nl + 1;
        return 2;
    }
    return 1;
}

/* dash patterns: on/off run lengths in units of the glyph scale */
static const int plot__pat[PLOT_DASH_COUNT][6] = {{0}, {0}, {8, 5}, {2, 3}, {8, 3, 2, 3}, {16, 6}, {8, 3, 2, 3, 2, 3}, {0}};

static int plot__dash_on(int dash, long phase, int sc)
{
    const int *p;
    long per, q;
    int k;
    if (dash <= PLOT_DASH_SOLID || dash >= PLOT_DASH_NONE) return 1;
    p = plot__pat[dash];
    per = (long)(p[0] + p[1] + p[2] + p[3] + p[4] + p[5]) * sc;
    q = phase % per;
    for (k = 0; k < 6; k++) {
        if (q < (long)p[k] * sc) return !(k & 1);
        q -= (long)p[k] * sc;
    }
    return 0;
}

/* A thick line (t x t squares along a Bresenham path), clipped; dash != SOLID draws the
   pattern, phase (pixels along the line so far) carries it across segments. */
static void plot__line_d(plot__img *im, int x0, int y0, int x1, int y1, int t, const unsigned char c[3],
                         const plot__rect *clip, int dash, int sc, long *phase)
{
    int dx = abs(x1 - x0), sx = x0 < x1 ? 1 : -1, dy = -abs(y1 - y0), sy = y0 < y1 ? 1 : -1, e = dx + dy;
    int lo = (t - 1) / 2, hi = t / 2;
    for (;;) {
        int e2 = 2 * e;
        if (!phase || plot__dash_on(dash, *phase, sc)) plot__fill(im, x0 - lo, y0 - lo, x0 + hi, y0 + hi, c, clip);
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
        if (phase) (*phase)++;
    }
}

static void plot__line(plot__img *im, int x0, int y0, int x1, int y1, int t, const unsigned char c[3], const plot__rect *clip)
{
    plot__line_d(im, x0, y0, x1, y1, t, c, clip, PLOT_DASH_SOLID, 1, NULL);
}

/* A marker of radius r centred at (x, y), outline thickness t. */
static void plot__marker(plot__img *im, int x, int y, int kind, int r, int t, const unsigned char c[3], const plot__rect *clip)
{
    int dx, dy;
    switch (kind) {
    case PLOT_MARK_CIRCLE:
        for (dy = -r - t; dy <= r + t; dy++)
            for (dx = -r - t; dx <= r + t; dx++) {
                double d = sqrt((double)dx * dx + (double)dy * dy);
                if (fabs(d - r) <= t * 0.5 + 0.25) plot__fill(im, x + dx, y + dy, x + dx, y + dy, c, clip);
            }
        break;
    case PLOT_MARK_SQUARE:
        r = r * 5 / 6;
        plot__fill(im, x - r, y - r, x + r, y - r + t - 1, c, clip);
        plot__fill(im, x - r, y + r - t + 1, x + r, y + r, c, clip);
        plot__fill(im, x - r, y - r, x - r + t - 1, y + r, c, clip);
        plot__fill(im, x + r - t + 1, y - r, x + r, y + r, c, clip);
        break;
    case PLOT_MARK_TRIANGLE:
        plot__line(im, x, y - r, x - r, y + r * 3 / 4, t, c, clip);
        plot__line(im, x - r, y + r * 3 / 4, x + r, y + r * 3 / 4, t, c, clip);
        plot__line(im, x + r, y + r * 3 / 4, x, y - r, t, c, clip);
        break;
    case PLOT_MARK_DIAMOND:
        plot__line(im, x, y - r, x + r, y, t, c, clip);
        plot__line(im, x + r, y, x, y + r, t, c, clip);
        plot__line(im, x, y + r, x - r, y, t, c, clip);
        plot__line(im, x - r, y, x, y - r, t, c, clip);
        break;
    case PLOT_MARK_CROSS:
        plot__line(im, x - r * 4 / 5, y - r * 4 / 5, x + r * 4 / 5, y + r * 4 / 5, t, c, clip);
        plot__line(im, x - r * 4 / 5, y + r * 4 / 5, x + r * 4 / 5, y - r * 4 / 5, t, c, clip);
        break;
    case PLOT_MARK_PLUS:
        plot__fill(im, x - r, y - (t - 1) / 2, x + r, y + t / 2, c, clip);
        plot__fill(im, x - (t - 1) / 2, y - r, x + t / 2, y + r, c, clip);
        break;
    case PLOT_MARK_DOT:
        for (dy = -r; dy <= r; dy++)
            for (dx = -r; dx <= r; dx++)
                if (dx * dx + dy * dy <= r * r) plot__fill(im, x + dx, y + dy, x + dx, y + dy, c, clip);
        break;
    default:
        break;
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
    for (i = 0; i < ns; i++) {
        if (s[i].n < 0 || (s[i].n > 0 && (!s[i].x || !s[i].y))) return PLOT_EINVAL;
        if (s[i].marker < 0 || s[i].marker >= PLOT_MARK_COUNT || s[i].dash < 0 || s[i].dash >= PLOT_DASH_COUNT ||
            s[i].color < 0)
            return PLOT_EINVAL;
    }
    return PLOT_OK;
}

static int plot__ok(double x, double y, int logy) { return isfinite(x) && isfinite(y) && (!logy || y > 0); }

/* Where things went (tests/test_plot.c checks the legend against the lines). */
typedef struct {
    plot__rect area;          /* the plot area */
    double xlo, xhi, ylo, yhi; /* its ranges (log10 units for a log axis) */
    plot__rect legend;        /* the legend box (x1 < x0 when there is none) */
    int legend_outside;       /* 1: right of the plot area, 2: below it */
    int sc;                   /* glyph scale */
} plot__layout;

static int plot__series_color_index(const plot_series *s, int i) { return s->color > 0 ? s->color - 1 : i; }

static int plot__series_dash(const plot_series *s, int i, int ns)
{
    if (s->dash != PLOT_DASH_AUTO) return s->dash;
    return ns == 1 ? PLOT_DASH_SOLID : PLOT_DASH_SOLID + i % (PLOT_DASH_NONE - PLOT_DASH_SOLID);
}

/* the marker a series is drawn with; pw: plot area width (AUTO markers on sparse series) */
static int plot__series_marker(const plot_series *s, int i, int pw, int logy)
{
    static const int cyc[6] = {PLOT_MARK_CIRCLE, PLOT_MARK_SQUARE, PLOT_MARK_TRIANGLE,
                               PLOT_MARK_DIAMOND, PLOT_MARK_CROSS, PLOT_MARK_PLUS};
    int k, nf = 0;
    if (s->marker != PLOT_MARK_AUTO) return s->marker;
    for (k = 0; k < s->n; k++) nf += plot__ok(s->x[k], s->y[k], logy);
    return (long)nf * 10 <= (long)pw ? cyc[i % 6] : PLOT_MARK_NONE;
}

static void plot__series_name(const plot_series *s, int i, char *buf, size_t cap)
{
    if (s->label) snprintf(buf, cap, "%.*s", plot__text_len(s->label), s->label);
    else snprintf(buf, cap, "series %d", i);
}

/* pixels in r that are neither background nor grid: what a legend there would cover */
static long plot__ink(const plot__img *im, plot__rect r)
{
    long n = 0;
    int x, y;
    if (r.x0 < 0) r.x0 = 0;
    if (r.y0 < 0) r.y0 = 0;
    if (r.x1 > im->w - 1) r.x1 = im->w - 1;
    if (r.y1 > im->h - 1) r.y1 = im->h - 1;
    for (y = r.y0; y <= r.y1; y++)
        for (x = r.x0; x <= r.x1; x++) {
            const unsigned char *p = im->rgb + ((size_t)y * (size_t)im->w + (size_t)x) * 3;
            if (memcmp(p, plot__white, 3) != 0 && memcmp(p, plot__grid, 3) != 0) n++;
        }
    return n;
}

/* One rendering. outside: 1 reserves room right of the plot area for the legend, 2 below
   it (a legend too wide for the right side). Returns 1 or 2 when the legend should go
   there and outside was 0 (the caller renders again), else 0. */
static int plot__render(plot__img *im, const char *title, const char *xlabel, const char *ylabel,
                        const plot_series *s, int ns, int logy, int outside, plot__layout *lay)
{
    plot__axis ax, ay;
    plot__rect area;
    const char *tl[2];
    int i, k, sc, ch, lh, cw, top, bottom, left, right, pw, ph, have = 0, maxw = 0, t, nt;
    int rows = 0, lw = 0, lhh = 0, sw, mr;
    double xlo = 0, xhi = 1, ylo = 0, yhi = 1;
    int width = im->w, height = im->h;
    plot__fill(im, 0, 0, width - 1, height - 1, plot__white, NULL);
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
    } else {
        double d = (xhi * 0.5 - xlo * 0.5) * 0.04; /* 2% each side: end markers stay whole */
        if (isfinite(xlo - d) && isfinite(xhi + d)) {
            xlo -= d;
            xhi += d;
        }
    }
    if (ylo == yhi) {
        double d = logy ? 0.5 : fabs(ylo) * 0.1;
        if (!(d > 0) || !isfinite(ylo - d) || !isfinite(yhi + d)) d = 0.5;
        ylo -= d;
        yhi += d;
    } else {
        double d = (yhi * 0.5 - ylo * 0.5) * 0.12; /* 6% of the span each side */
        if (isfinite(ylo - d) && isfinite(yhi + d)) {
            ylo -= d;
            yhi += d;
        }
    }
    /* layout */
    sc = (width >= 480 && height >= 480) ? 2 : 1;
    ch = 7 * sc;
    lh = 9 * sc;
    cw = 6 * sc;
    sw = 4 * cw;
    mr = 3 * sc + 1;
    nt = plot__title_lines(title, tl);
    top = 8 + nt * (lh + 4) + (nt ? 4 : 0);
    bottom = 6 + lh + 6 + (xlabel && *xlabel ? lh + 6 : 0) + 4;
    right = 4 * cw;
    if (top > height / 3) top = height / 3;
    if (bottom > height * 2 / 5) bottom = height * 2 / 5;
    ph = height - top - bottom;
    /* legend size */
    if (ns > 0) {
        char name[PLOT__MAXTEXT + 16];
        rows = ns;
        if (rows > (ph - 8) / (lh + 4)) rows = (ph - 8) / (lh + 4);
        if (rows < 0) rows = 0;
        for (i = 0; i < rows; i++) {
            plot__series_name(s + i, i, name, sizeof name);
            if (plot__text_w(name, sc) > lw) lw = plot__text_w(name, sc);
        }
        lw += sw + 3 * cw;
        lhh = rows * (lh + 4) + 6;
    }
    if (outside == 1 && rows > 0) right = lw + 12;
    if (outside == 2 && rows > 0) {
        bottom += lhh + 8;
        ph = height - top - bottom;
    }
    ay.lo = ylo;
    ay.hi = yhi;
    plot__ticks(&ay, ph / (ch * 4) < 2 ? 2 : (ph / (ch * 4) > 10 ? 10 : ph / (ch * 4)), logy);
    for (k = 0; k < ay.n; k++)
        if (plot__text_w(ay.lab[k], sc) > maxw) maxw = plot__text_w(ay.lab[k], sc);
    left = 6 + (ylabel && *ylabel ? lh + 8 : 0) + maxw + 8;
    if (left > width * 2 / 5) left = width * 2 / 5;
    if (!outside && right > width / 10) right = width / 10;
    pw = width - left - right;
    ax.lo = xlo;
    ax.hi = xhi;
    t = pw / (cw * 10);
    plot__ticks(&ax, t < 2 ? 2 : (t > 10 ? 10 : t), 0);
    area.x0 = left;
    area.y0 = top;
    area.x1 = left + pw - 1;
    area.y1 = top + ph - 1;
    if (lay) {
        lay->area = area;
        lay->xlo = xlo;
        lay->xhi = xhi;
        lay->ylo = ylo;
        lay->yhi = yhi;
        lay->legend.x0 = 0;
        lay->legend.x1 = -1;
        lay->legend.y0 = 0;
        lay->legend.y1 = -1;
        lay->legend_outside = outside;
        lay->sc = sc;
    }
    /* grid */
    for (k = 0; k < ax.n; k++) {
        int px = left + (int)floor(plot__frac(ax.pos[k], xlo, xhi) * (pw - 1) + 0.5);
        plot__fill(im, px, area.y0, px, area.y1, plot__grid, &area);
    }
    for (k = 0; k < ay.n; k++) {
        int py = top + (int)floor((1.0 - plot__frac(ay.pos[k], ylo, yhi)) * (ph - 1) + 0.5);
        plot__fill(im, area.x0, py, area.x1, py, plot__grid, &area);
    }
    /* series: lines, then markers, then notes */
    t = sc;
    for (i = 0; i < ns; i++) {
        unsigned char c[3];
        int prev = 0, px0 = 0, py0 = 0, run = 0, dash = plot__series_dash(s + i, i, ns);
        int mk = plot__series_marker(s + i, i, pw, logy), lastx = 0, lasty = 0, any = 0;
        long phase = 0;
        plot_series_color(plot__series_color_index(s + i, i), c);
        for (k = 0; k <= s[i].n; k++) {
            int ok = k < s[i].n && plot__ok(s[i].x[k], s[i].y[k], logy), px = 0, py = 0;
            if (ok) {
                double y = logy ? log10(s[i].y[k]) : s[i].y[k];
                px = left + (int)floor(plot__frac(s[i].x[k], xlo, xhi) * (pw - 1) + 0.5);
                py = top + (int)floor((1.0 - plot__frac(y, ylo, yhi)) * (ph - 1) + 0.5);
                if (prev && dash != PLOT_DASH_NONE) plot__line_d(im, px0, py0, px, py, t, c, &area, dash, sc, &phase);
                if (mk != PLOT_MARK_NONE) plot__marker(im, px, py, mk, mr, sc, c, &area);
                run++;
                lastx = px;
                lasty = py;
                any = 1;
            } else {
                if (run == 1 && mk == PLOT_MARK_NONE) /* an isolated point */
                    plot__fill(im, px0 - 1 - sc / 2, py0 - 1 - sc / 2, px0 + 1 + sc / 2, py0 + 1 + sc / 2, c, &area);
                run = 0;
            }
            prev = ok;
            px0 = px;
            py0 = py;
        }
        if (any && s[i].note && *s[i].note) {
            /* left of and above the last point, kept inside the plot area */
            int tw = plot__text_w(s[i].note, sc), nx = lastx - mr - 4 - tw, ny = lasty - mr - 4 - lh;
            if (nx < area.x0 + 3) nx = area.x0 + 3;
            if (ny < area.y0 + 3) ny = lasty + mr + 4;
            if (ny + lh > area.y1 - 2) ny = area.y1 - 2 - lh;
            plot__fill(im, nx - 2, ny - 2, nx + tw + 1, ny + lh + 1, plot__white, &area);
            plot__text(im, nx, ny, s[i].note, sc, c);
        }
    }
    /* legend: the first empty corner, else outside (another rendering), else the emptiest corner */
    if (rows > 0) {
        plot__rect r;
        char name[PLOT__MAXTEXT + 16];
        if (outside == 1) {
            r.x0 = area.x1 + 10;
            r.y0 = area.y0;
        } else if (outside == 2) {
            r.x0 = left + pw / 2 - lw / 2;
            if (r.x0 + lw > width - 2) r.x0 = width - 2 - lw;
            if (r.x0 < 2) r.x0 = 2;
            r.y0 = area.y1 + 8 + lh + 6 + (xlabel && *xlabel ? lh + 6 : 0);
        } else {
            plot__rect cand[4];
            long ink[4], best = -1;
            int b = 0;
            for (k = 0; k < 4; k++) {
                cand[k].x0 = (k == 0 || k == 2) ? area.x1 - 6 - lw : area.x0 + 6;
                cand[k].y0 = k < 2 ? area.y0 + 6 : area.y1 - 6 - lhh;
                cand[k].x1 = cand[k].x0 + lw;
                cand[k].y1 = cand[k].y0 + lhh;
                ink[k] = cand[k].x0 < area.x0 || cand[k].y0 < area.y0 ? -1 : plot__ink(im, cand[k]);
                if (ink[k] == 0) break;
            }
            if (k == 4) {
                /* no empty corner: outside, right or below, while the plot keeps half the image */
                if (lw + 12 <= width / 2) return 1;
                if (ph - lhh - 8 >= height / 2) return 2;
                for (k = 0; k < 4; k++)
                    if (ink[k] >= 0 && (best < 0 || ink[k] < best)) {
                        best = ink[k];
                        b = k;
                    }
                k = b;
            }
            r = cand[k];
        }
        r.x1 = r.x0 + lw;
        r.y1 = r.y0 + lhh;
        if (r.x0 >= 0 && r.x1 < width) {
            if (lay) lay->legend = r;
            plot__fill(im, r.x0, r.y0, r.x1, r.y1, plot__white, NULL);
            plot__fill(im, r.x0, r.y0, r.x1, r.y0, plot__frame, NULL);
            plot__fill(im, r.x0, r.y1, r.x1, r.y1, plot__frame, NULL);
            plot__fill(im, r.x0, r.y0, r.x0, r.y1, plot__frame, NULL);
            plot__fill(im, r.x1, r.y0, r.x1, r.y1, plot__frame, NULL);
            for (i = 0; i < rows; i++) {
                unsigned char c[3];
                int ry = r.y0 + 4 + i * (lh + 4), my = ry + ch / 2, dash = plot__series_dash(s + i, i, ns);
                int mk = plot__series_marker(s + i, i, pw, logy);
                long phase = 0;
                plot__rect inner;
                inner.x0 = r.x0 + 1;
                inner.y0 = r.y0 + 1;
                inner.x1 = r.x1 - 1;
                inner.y1 = r.y1 - 1;
                plot_series_color(plot__series_color_index(s + i, i), c);
                if (dash != PLOT_DASH_NONE)
                    plot__line_d(im, r.x0 + cw, my, r.x0 + cw + sw - 1, my, t, c, &inner, dash, sc, &phase);
                if (mk != PLOT_MARK_NONE) plot__marker(im, r.x0 + cw + sw / 2, my, mk, mr, sc, c, &inner);
                plot__series_name(s + i, i, name, sizeof name);
                plot__text(im, r.x0 + 2 * cw + sw, ry, name, sc, plot__black);
            }
        }
    }
    /* frame, ticks, labels */
    plot__fill(im, area.x0 - 1, area.y0 - 1, area.x1 + 1, area.y0 - 1, plot__frame, NULL);
    plot__fill(im, area.x0 - 1, area.y1 + 1, area.x1 + 1, area.y1 + 1, plot__frame, NULL);
    plot__fill(im, area.x0 - 1, area.y0 - 1, area.x0 - 1, area.y1 + 1, plot__frame, NULL);
    plot__fill(im, area.x1 + 1, area.y0 - 1, area.x1 + 1, area.y1 + 1, plot__frame, NULL);
    /* tick labels; one that would touch the previous label is left out (its tick stays) */
    {
        int last = -1000000;
        for (k = 0; k < ax.n; k++) {
            int px = left + (int)floor(plot__frac(ax.pos[k], xlo, xhi) * (pw - 1) + 0.5);
            int lx = px - plot__text_w(ax.lab[k], sc) / 2;
            plot__fill(im, px, area.y1 + 2, px, area.y1 + 5, plot__frame, NULL);
            if (lx < last + cw) continue;
            plot__text(im, lx, area.y1 + 8, ax.lab[k], sc, plot__black);
            last = lx + plot__text_w(ax.lab[k], sc);
        }
        last = 1000000;
        for (k = 0; k < ay.n; k++) {
            int py = top + (int)floor((1.0 - plot__frac(ay.pos[k], ylo, yhi)) * (ph - 1) + 0.5);
            plot__fill(im, area.x0 - 5, py, area.x0 - 2, py, plot__frame, NULL);
            if (py - ch / 2 + ch + 3 * sc > last) continue; /* labels go upwards */
            plot__text(im, area.x0 - 8 - plot__text_w(ay.lab[k], sc), py - ch / 2, ay.lab[k], sc, plot__black);
            last = py - ch / 2;
        }
    }
    for (k = 0; k < nt; k++)
        plot__text(im, left + pw / 2 - plot__text_w(tl[k], sc) / 2, 8 + k * (lh + 4), tl[k], sc, plot__black);
    if (xlabel && *xlabel)
        plot__text(im, left + pw / 2 - plot__text_w(xlabel, sc) / 2, area.y1 + 8 + lh + 6, xlabel, sc, plot__black);
    if (ylabel && *ylabel) plot__text_v(im, 6, top + ph / 2 + plot__text_w(ylabel, sc) / 2, ylabel, sc, plot__black);
    return 0;
}

static int plot__lines(unsigned char *rgb, int width, int height, const char *title, const char *xlabel,
                       const char *ylabel, const plot_series *s, int ns, int logy, plot__layout *lay)
{
    plot__img im;
    int rc = plot__check(width, height, s, ns);
    if (rc != PLOT_OK) return rc;
    if (!rgb) return PLOT_EINVAL;
    im.rgb = rgb;
    im.w = width;
    im.h = height;
    logy = logy ? 1 : 0;
    rc = plot__render(&im, title, xlabel, ylabel, s, ns, logy, 0, lay);
    if (rc) plot__render(&im, title, xlabel, ylabel, s, ns, logy, rc, lay);
    return PLOT_OK;
}

int plot_lines_rgb(unsigned char *rgb, int width, int height, const char *title, const char *xlabel,
                   const char *ylabel, const plot_series *s, int ns, int logy)
{
    return plot__lines(rgb, width, height, title, xlabel, ylabel, s, ns, logy, NULL);
}

/* ------------------------------------------------------------------ heatmap */

static void plot__diverging(double v, unsigned char px[3])
{
    if (v > 1) v = 1;
    if (v < -1) v = -1;
    if (v >= 0) { /* white -> red */
        px[0] = 255;
        px[1] = px[2] = (unsigned char)(255 * (1 - v) + 0.5);
    } else { /* white -> blue */
        px[0] = px[1] = (unsigned char)(255 * (1 + v) + 0.5);
        px[2] = 255;
    }
}

/* Map placement for a heatmap of rows x cols in an image; filled by plot__heat. */
typedef struct {
    plot__rect map, cbar;
    int sc;
    double vmax;
} plot__heat_layout;

static int plot__heat(unsigned char *rgb, int width, int height, const char *title, const char *xlabel,
                      const char *ylabel, const plot_heatmap *h, plot__heat_layout *lay)
{
    plot__img im;
    plot__axis ax, ay, ac;
    const char *tl[2];
    char lo_lab[32], hi_lab[32];
    int sc, ch, lh, cw, nt, top, bottom, left, right, aw, ah, mw, mh, mx, my, maxw = 0, cbw, cbx, k, x, y, t;
    double a = 0;
    long i, n;
    if (width < 64 || height < 64 || width > 16384 || height > 16384) return PLOT_EINVAL;
    if (!rgb || !h || !h->v || h->rows < 1 || h->cols < 1) return PLOT_EINVAL;
    im.rgb = rgb;
    im.w = width;
    im.h = height;
    plot__fill(&im, 0, 0, width - 1, height - 1, plot__white, NULL);
    n = (long)h->rows * h->cols;
    if (h->vmax > 0 && isfinite(h->vmax)) a = h->vmax;
    else
        for (i = 0; i < n; i++)
            if (isfinite(h->v[i]) && fabs((double)h->v[i]) > a) a = fabs((double)h->v[i]);
    if (!(a > 0)) a = 1;
    sc = (width >= 480 && height >= 480) ? 2 : 1;
    ch = 7 * sc;
    lh = 9 * sc;
    cw = 6 * sc;
    nt = plot__title_lines(title, tl);
    /* colour-bar ticks and end labels */
    snprintf(hi_lab, sizeof hi_lab, "%+.3g", a);
    snprintf(lo_lab, sizeof lo_lab, "%+.3g", -a);
    ac.lo = -a;
    ac.hi = a;
    plot__ticks(&ac, 4, 0);
    maxw = plot__text_w(hi_lab, sc) > plot__text_w(lo_lab, sc) ? plot__text_w(hi_lab, sc) : plot__text_w(lo_lab, sc);
    for (k = 0; k < ac.n; k++)
        if (plot__text_w(ac.lab[k], sc) > maxw) maxw = plot__text_w(ac.lab[k], sc);
    cbw = 3 * cw;
    top = 8 + nt * (lh + 4) + 6;
    bottom = 6 + lh + 6 + (xlabel && *xlabel ? lh + 6 : 0) + (h->note && *h->note ? lh + 6 : 0) + 4;
    {
        char buf[24];
        snprintf(buf, sizeof buf, "%d", h->rows - 1);
        left = 6 + (ylabel && *ylabel ? lh + 8 : 0) + plot__text_w(buf, sc) + 10;
    }
    right = 14 + cbw + 6 + maxw + 8 + (h->cbar_label && *h->cbar_label ? lh + 8 : 0);
    aw = width - left - right;
    ah = height - top - bottom;
    if (aw < 1) aw = 1;
    if (ah < 1) ah = 1;
    if (h->cols <= aw && h->rows <= ah) {
        int s1 = aw / h->cols, s2 = ah / h->rows;
        t = s1 < s2 ? s1 : s2;
        mw = h->cols * t;
        mh = h->rows * t;
    } else {
        double f1 = (double)aw / h->cols, f2 = (double)ah / h->rows, f = f1 < f2 ? f1 : f2;
        mw = (int)(h->cols * f);
        mh = (int)(h->rows * f);
        if (mw < 1) mw = 1;
        if (mh < 1) mh = 1;
    }
    mx = left + (aw - mw) / 2;
    my = top + (ah - mh) / 2;
    /* cells: each pixel the mean of the unmasked cells it covers (one cell when enlarged) */
    for (y = 0; y < mh; y++) {
        int r0 = (int)((long)y * h->rows / mh), r1 = (int)((long)(y + 1) * h->rows / mh);
        if (r1 <= r0) r1 = r0 + 1;
        for (x = 0; x < mw; x++) {
            int c0 = (int)((long)x * h->cols / mw), c1 = (int)((long)(x + 1) * h->cols / mw), r, c;
            double sum = 0;
            long cnt = 0;
            unsigned char *px = rgb + ((size_t)(my + y) * (size_t)width + (size_t)(mx + x)) * 3;
            if (c1 <= c0) c1 = c0 + 1;
            for (r = r0; r < r1; r++)
                for (c = c0; c < c1; c++) {
                    float v = h->v[(size_t)r * (size_t)h->cols + (size_t)c];
                    if (isfinite(v)) {
                        sum += v;
                        cnt++;
                    }
                }
            if (cnt) plot__diverging(sum / cnt / a, px);
            else memcpy(px, plot__masked, 3);
        }
    }
    /* frame */
    plot__fill(&im, mx - 1, my - 1, mx + mw, my - 1, plot__frame, NULL);
    plot__fill(&im, mx - 1, my + mh, mx + mw, my + mh, plot__frame, NULL);
    plot__fill(&im, mx - 1, my - 1, mx - 1, my + mh, plot__frame, NULL);
    plot__fill(&im, mx + mw, my - 1, mx + mw, my + mh, plot__frame, NULL);
    /* index ticks at cell centres */
    ax.lo = 0;
    ax.hi = h->cols - 1;
    t = mw / (cw * 8);
    if (h->cols > 1) plot__ticks(&ax, t < 2 ? 2 : (t > 8 ? 8 : t), 0);
    else {
        ax.n = 1;
        ax.pos[0] = 0;
        snprintf(ax.lab[0], sizeof ax.lab[0], "0");
    }
    ay.lo = 0;
    ay.hi = h->rows - 1;
    t = mh / (ch * 5);
    if (h->rows > 1) plot__ticks(&ay, t < 2 ? 2 : (t > 8 ? 8 : t), 0);
    else {
        ay.n = 1;
        ay.pos[0] = 0;
        snprintf(ay.lab[0], sizeof ay.lab[0], "0");
    }
    {
        int last = -1000000;
        for (k = 0; k < ax.n; k++) {
            int px = mx + (int)floor((ax.pos[k] + 0.5) * mw / h->cols), lx = px - plot__text_w(ax.lab[k], sc) / 2;
            plot__fill(&im, px, my + mh + 1, px, my + mh + 4, plot__frame, NULL);
            if (lx < last + cw) continue;
            plot__text(&im, lx, my + mh + 7, ax.lab[k], sc, plot__black);
            last = lx + plot__text_w(ax.lab[k], sc);
        }
        last = -1000000;
        for (k = 0; k < ay.n; k++) { /* downwards */
            int py = my + (int)floor((ay.pos[k] + 0.5) * mh / h->rows);
            plot__fill(&im, mx - 5, py, mx - 2, py, plot__frame, NULL);
            if (py - ch / 2 < last + 2 * sc) continue;
            plot__text(&im, mx - 8 - plot__text_w(ay.lab[k], sc), py - ch / 2, ay.lab[k], sc, plot__black);
            last = py - ch / 2 + ch;
        }
    }
    /* colour bar: +a at the top, -a at the bottom */
    cbx = mx + mw + 14;
    for (y = 0; y < mh; y++) {
        unsigned char c[3];
        plot__diverging(mh > 1 ? 1.0 - 2.0 * y / (mh - 1) : 0.0, c);
        plot__fill(&im, cbx, my + y, cbx + cbw - 1, my + y, c, NULL);
    }
    plot__fill(&im, cbx - 1, my - 1, cbx + cbw, my - 1, plot__frame, NULL);
    plot__fill(&im, cbx - 1, my + mh, cbx + cbw, my + mh, plot__frame, NULL);
    plot__fill(&im, cbx - 1, my - 1, cbx - 1, my + mh, plot__frame, NULL);
    plot__fill(&im, cbx + cbw, my - 1, cbx + cbw, my + mh, plot__frame, NULL);
    {
        int ytop = my, ybot = my + mh - 1;
        plot__fill(&im, cbx + cbw + 1, ytop, cbx + cbw + 4, ytop, plot__frame, NULL);
        plot__fill(&im, cbx + cbw + 1, ybot, cbx + cbw + 4, ybot, plot__frame, NULL);
        plot__text(&im, cbx + cbw + 7, ytop, hi_lab, sc, plot__black);
        plot__text(&im, cbx + cbw + 7, ybot - ch + 1, lo_lab, sc, plot__black);
        for (k = 0; k < ac.n; k++) {
            int py = my + (int)floor((1.0 - plot__frac(ac.pos[k], -a, a)) * (mh - 1) + 0.5);
            plot__fill(&im, cbx + cbw + 1, py, cbx + cbw + 4, py, plot__frame, NULL);
            if (py - ch / 2 < ytop + ch + 2 * sc || py + ch / 2 > ybot - ch - 2 * sc) continue;
            plot__text(&im, cbx + cbw + 7, py - ch / 2, ac.lab[k], sc, plot__black);
        }
        if (h->cbar_label && *h->cbar_label)
            plot__text_v(&im, cbx + cbw + 7 + maxw + 8, my + mh / 2 + plot__text_w(h->cbar_label, sc) / 2, h->cbar_label,
                         sc, plot__black);
    }
    for (k = 0; k < nt; k++) {
        int x0 = mx + mw / 2 - plot__text_w(tl[k], sc) / 2;
        if (x0 + plot__text_w(tl[k], sc) > width - 4) x0 = width - 4 - plot__text_w(tl[k], sc);
        if (x0 < 4) x0 = 4;
        plot__text(&im, x0, 8 + k * (lh + 4), tl[k], sc, plot__black);
    }
    y = my + mh + 7 + lh + 6;
    if (xlabel && *xlabel) {
        plot__text(&im, mx + mw / 2 - plot__text_w(xlabel, sc) / 2, y, xlabel, sc, plot__black);
        y += lh + 6;
    }
    if (h->note && *h->note) {
        int x0 = mx + mw / 2 - plot__text_w(h->note, sc) / 2;
        if (x0 < 4) x0 = 4;
        plot__text(&im, x0, y, h->note, sc, plot__black);
    }
    if (ylabel && *ylabel) {
        int yb = my + mh / 2 + plot__text_w(ylabel, sc) / 2;
        plot__text_v(&im, mx - left + 6, yb, ylabel, sc, plot__black); /* the left margin's outer edge */
    }
    if (lay) {
        lay->map.x0 = mx;
        lay->map.y0 = my;
        lay->map.x1 = mx + mw - 1;
        lay->map.y1 = my + mh - 1;
        lay->cbar.x0 = cbx;
        lay->cbar.y0 = my;
        lay->cbar.x1 = cbx + cbw - 1;
        lay->cbar.y1 = my + mh - 1;
        lay->sc = sc;
        lay->vmax = a;
    }
    return PLOT_OK;
}

int plot_heatmap_rgb(unsigned char *rgb, int width, int height, const char *title, const char *xlabel,
                     const char *ylabel, const plot_heatmap *h)
{
    return plot__heat(rgb, width, height, title, xlabel, ylabel, h, NULL);
}

/* ------------------------------------------------------------------ PNG files */

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


/* rgb (drawn) to path through "<path>.tmp.<pid>"; frees rgb */
static int plot__write_png(const char *path, int width, int height, unsigned char *rgb, char *err, size_t errlen)
{
    char *tmp = (char *)malloc(strlen(path) + 32);
    plot__sink k;
    int rc, e, fd;
    if (!tmp) {
        free(rgb);
        return ex_errf(err, errlen, PLOT_ENOMEM, "out of memory writing %s", path);
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
        rc = ex_errf(err, errlen, PLOT_EIO, "cannot create %s: %s", tmp, strerror(e));
        free(tmp);
        return rc;
    }
    k.err = 0;
    if (!stbi_write_png_to_func(plot__sink_write, &k, width, height, 3, rgb, width * 3)) {
        fclose(k.f);
        remove(tmp);
        free(rgb);
        free(tmp);
        return ex_errf(err, errlen, PLOT_ENOMEM, "cannot encode %s (out of memory)", path);
    }
    free(rgb);
    if (!k.err && fflush(k.f) != 0) k.err = errno ? errno : EIO;
    if (!k.err && ferror(k.f)) k.err = EIO;
    if (!k.err && fsync(fileno(k.f)) != 0 && errno != EINVAL && errno != EROFS) k.err = errno;
    if (fclose(k.f) != 0 && !k.err) k.err = errno ? errno : EIO;
    if (k.err) {
        remove(tmp);
        rc = ex_errf(err, errlen, PLOT_EIO, "cannot write %s: %s (left unchanged)", path, strerror(k.err));
        free(tmp);
        return rc;
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        remove(tmp);
        rc = ex_errf(err, errlen, PLOT_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
        free(tmp);
        return rc;
    }
    free(tmp);
    return PLOT_OK;
}

int plot_lines_png_err(const char *path, int width, int height, const char *title, const char *xlabel,
                       const char *ylabel, const plot_series *s, int ns, int logy, char *err, size_t errlen)
{
    unsigned char *rgb;
    int rc;
    if (err && errlen) err[0] = 0;
    if (!path || !*path) return ex_errf(err, errlen, PLOT_EINVAL, "plot: empty path");
    rc = plot__check(width, height, s, ns);
    if (rc != PLOT_OK) return ex_errf(err, errlen, rc, "plot: invalid size or series");
    rgb = (unsigned char *)malloc((size_t)width * (size_t)height * 3);
    if (!rgb) return ex_errf(err, errlen, PLOT_ENOMEM, "out of memory drawing %s", path);
    rc = plot_lines_rgb(rgb, width, height, title, xlabel, ylabel, s, ns, logy);
    if (rc != PLOT_OK) {
        free(rgb);
        return ex_errf(err, errlen, rc, "cannot draw %s", path);
    }
    return plot__write_png(path, width, height, rgb, err, errlen);
}

int plot_lines_png(const char *path, int width, int height, const char *title, const char *xlabel,
                   const char *ylabel, const plot_series *s, int ns, int logy)
{
    return plot_lines_png_err(path, width, height, title, xlabel, ylabel, s, ns, logy, NULL, 0);
}

int plot_heatmap_png_err(const char *path, int width, int height, const char *title, const char *xlabel,
                         const char *ylabel, const plot_heatmap *h, char *err, size_t errlen)
{
    unsigned char *rgb;
    int rc;
    if (err && errlen) err[0] = 0;
    if (!path || !*path) return ex_errf(err, errlen, PLOT_EINVAL, "plot: empty path");
    if (width < 64 || height < 64 || width > 16384 || height > 16384 || !h || !h->v || h->rows < 1 || h->cols < 1)
        return ex_errf(err, errlen, PLOT_EINVAL, "plot: invalid size or heatmap for %s", path);
    rgb = (unsigned char *)malloc((size_t)width * (size_t)height * 3);
    if (!rgb) return ex_errf(err, errlen, PLOT_ENOMEM, "out of memory drawing %s", path);
    rc = plot_heatmap_rgb(rgb, width, height, title, xlabel, ylabel, h);
    if (rc != PLOT_OK) {
        free(rgb);
        return ex_errf(err, errlen, rc, "cannot draw %s", path);
    }
    return plot__write_png(path, width, height, rgb, err, errlen);
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
