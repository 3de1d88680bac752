/* plot.h - small PNG plots for the example programs: line plots (loss curves and the like)
   and diverging heatmaps with a colour bar (attention priors).

   Part of attnkit's examples/common (not a mechanism header). Renders an RGB image in
   memory and writes it with stb_image_write (Debian libstb-dev; one translation unit of
   the program must define STB_IMAGE_WRITE_IMPLEMENTATION: examples/common/stb_impl.c does).
   Every writer goes to "<path>.tmp.<pid>" and renames it over path, so a program that
   refreshes its plot while someone looks at it never shows a torn file; the PNG bytes go
   through stb's callback writer, every write, the flush, fsync and close are checked,
   and the rename happens only when all of them succeeded (a full disk is PLOT_EIO and
   leaves path as it was; the *_err variants say what failed).

   Line plots: white background, a framed plot area with a light grid, "nice" ticks
   (1/2/5 x 10^k) with numeric labels on both axes, an optional log-scale y axis (decade
   ticks when the data spans at least a decade, else 1/2/5 ticks placed on the log
   scale), a centred title (a '\n' starts a second line), axis labels (the y label
   written vertically), and a legend. Each series has a colour, a dash pattern and a
   marker shape; left at 0 (AUTO) they differ from series to series, so series that lie
   on top of each other stay visible (later ones are drawn on top: a dashed line over a
   solid one shows both colours, hollow markers of different shapes show through each
   other). Markers are drawn automatically on sparse series (at least 10 pixels of plot
   width per point). The legend goes into the first corner of the plot area (upper right,
   upper left, lower right, lower left) where it covers no line, marker or note; when
   every corner would cover one it goes outside: right of the plot area, or below it when
   it is too wide for that (more than half the image).
   Heatmaps: a (rows, cols) matrix drawn blue (negative) - white (0) - red (positive),
   NaN cells grey (masked), the row index growing downwards; column and row ticks at the
   cell centres, a colour bar with its value range (both ends labelled with their values),
   a title, axis labels and an optional note line. A map larger than its area is
   averaged down (each pixel the mean of the unmasked cells it covers).
   Text uses a built-in 5x9 bitmap font of our own covering printable ASCII (7 rows above
   the baseline, 2 for the descenders of g j p q y , ; |; other bytes are drawn as '?');
   glyphs are doubled when the image is at least 480 pixels in both directions.

   Data: x/y ranges come from the finite points of all series (with logy, points with
   y <= 0 are skipped as well). A point that is NaN or infinite breaks its line: the
   segments on either side are drawn, not joined. An isolated finite point of a series
   without markers is drawn as a small square.

   Usage:
       double step[3] = {0, 100, 200}, loss[3] = {10.8, 6.1, 5.2}, val[3] = {10.9, 6.4, 5.6};
       plot_series s[2];
       memset(s, 0, sizeof s); (every style field 0: automatic)
       s[0].label = "train CE"; s[0].x = step; s[0].y = loss; s[0].n = 3;
       s[1].label = "val CE"; s[1].x = step; s[1].y = val; s[1].n = 3; s[1].marker = PLOT_MARK_CIRCLE;
       if (plot_lines_png("loss.png", 800, 500, "WikiText-2", "step", "loss", s, 2, 0) != 0)
           fprintf(stderr, "cannot write loss.png\n");

   Errors: PLOT_OK 0; PLOT_EINVAL (NULL path, width or height < 64 or > 16384, ns < 0,
   a series with n < 0 or NULL x/y while n > 0, a style out of range, a heatmap with NULL
   values or rows/cols < 1), PLOT_ENOMEM, PLOT_EIO (PNG write failed). Version 0.2.
   License: MIT (see the end of plot.c). */
#ifndef ATTNKIT_PLOT_H
#define ATTNKIT_PLOT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PLOT_OK = 0, PLOT_EINVAL = -1, PLOT_ENOMEM = -2, PLOT_EIO = -3 };

/* marker shapes (hollow except DOT) */
enum { PLOT_MARK_AUTO = 0, PLOT_MARK_NONE, PLOT_MARK_CIRCLE, PLOT_MARK_SQUARE, PLOT_MARK_TRIANGLE,
       PLOT_MARK_DIAMOND, PLOT_MARK_CROSS, PLOT_MARK_PLUS, PLOT_MARK_DOT, PLOT_MARK_COUNT };
/* line patterns; NONE: markers only */
enum { PLOT_DASH_AUTO = 0, PLOT_DASH_SOLID, PLOT_DASH_DASHED, PLOT_DASH_DOTTED, PLOT_DASH_DASHDOT,
       PLOT_DASH_LONGDASH, PLOT_DASH_DASHDOTDOT, PLOT_DASH_NONE, PLOT_DASH_COUNT };

typedef struct plot_series {
    const char *label; /* legend text; NULL: "series <i>" */
    const double *x, *y; /* (n,) each */
    int n;
    /* style: zero-initialise the struct for the automatic choices */
    int marker;       /* PLOT_MARK_*; AUTO: a shape per series index on sparse series, else none */
    int dash;         /* PLOT_DASH_*; AUTO: solid when ns == 1, else the 6 patterns SOLID..DASHDOTDOT by index */
    int color;        /* 0: plot_series_color(i); k > 0: plot_series_color(k - 1) */
    const char *note; /* text written beside the series' last finite point (e.g. "test CE 5.43"); NULL none */
} plot_series;

typedef struct plot_heatmap {
    const float *v;         /* (rows, cols) row-major; NaN: masked cell, drawn grey */
    int rows, cols;
    double vmax;            /* > 0: colours span [-vmax, vmax]; else the largest |v| of the unmasked cells */
    const char *cbar_label; /* colour-bar caption, written vertically right of it; NULL none */
    const char *note;       /* one line under the x label (e.g. what grey means); NULL none */
} plot_heatmap;

/* Line plot of ns series to a PNG file; width, height in 64..16384. title, xlabel,
   ylabel may be NULL. logy != 0: logarithmic y axis. Returns PLOT_OK or a negative
   PLOT_* code. */
int plot_lines_png(const char *path, int width, int height, const char *title, const char *xlabel,
                   const char *ylabel, const plot_series *s, int ns, int logy);

/* plot_lines_png with a one-line message in err (errlen bytes; err may be NULL) naming
   the file and the reason, e.g. "cannot write runs/wt2/loss.png: No space left on
   device (left unchanged)". */
int plot_lines_png_err(const char *path, int width, int height, const char *title, const char *xlabel,
                       const char *ylabel, const plot_series *s, int ns, int logy, char *err, size_t errlen);

/* The same drawing into rgb (width * height * 3 bytes, row-major, caller-owned). */
int plot_lines_rgb(unsigned char *rgb, int width, int height, const char *title, const char *xlabel,
                   const char *ylabel, const plot_series *s, int ns, int logy);

/* Heatmap h to a PNG file (width, height in 64..16384; title may hold one '\n'), with a
   message in err like plot_lines_png_err. */
int plot_heatmap_png_err(const char *path, int width, int height, const char *title, const char *xlabel,
                         const char *ylabel, const plot_heatmap *h, char *err, size_t errlen);

/* The same drawing into rgb (width * height * 3 bytes). */
int plot_heatmap_rgb(unsigned char *rgb, int width, int height, const char *title, const char *xlabel,
                     const char *ylabel, const plot_heatmap *h);

/* The colour series i is drawn in (distinct for the first 10, then golden-angle hues). */
void plot_series_color(int i, unsigned char rgb[3]);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_PLOT_H */
