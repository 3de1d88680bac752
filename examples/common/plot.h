/* plot.h - small PNG line plots for the example programs (loss curves and the like).

   Part of attnkit's examples/common (not a mechanism header). Renders an RGB image in
   memory - white background, a framed plot area with a light grid, "nice" ticks
   (1/2/5 x 10^k) with numeric labels on both axes, an optional log-scale y axis
   (decade ticks when the data spans at least a decade, else 1/2/5 ticks placed on the
   log scale), a centred title, axis labels (the y label written vertically), one
   line per series in distinct colours, and a legend box in the upper-right corner -
   and writes it with stb_image_write (Debian libstb-dev; one translation unit of the
   program must define STB_IMAGE_WRITE_IMPLEMENTATION: examples/common/stb_impl.c does).
   plot_lines_png writes "<path>.tmp.<pid>" and renames it over path, so a program that
   refreshes its plot while someone looks at it never shows a torn file; the PNG bytes go
   through stb's callback writer, every write, the flush, fsync and close are checked,
   and the rename happens only when all of them succeeded (a full disk is PLOT_EIO and
   leaves path as it was; plot_lines_png_err says what failed).
   Text uses a built-in 5x7 bitmap font of our own covering printable ASCII (other
   bytes are drawn as '?'); glyphs are doubled when the image is at least 480 pixels
   in both directions.

   Data: x/y ranges come from the finite points of all series (with logy, points with
   y <= 0 are skipped as well). A point that is NaN or infinite breaks its line: the
   segments on either side are drawn, not joined. An isolated finite point is drawn as
   a small square. Series are drawn in order (later ones on top).

   Usage:
       double step[3] = {0, 100, 200}, loss[3] = {10.8, 6.1, 5.2}, val[3] = {10.9, 6.4, 5.6};
       plot_series s[2] = {{"train loss", step, loss, 3}, {"val CE", step, val, 3}};
       if (plot_lines_png("loss.png", 800, 500, "WikiText-2", "step", "loss", s, 2, 0) != 0)
           fprintf(stderr, "cannot write loss.png\n");

   Errors: PLOT_OK 0; PLOT_EINVAL (NULL path, width or height < 64 or > 16384, ns < 0,
   a series with n < 0 or NULL x/y while n > 0), PLOT_ENOMEM, PLOT_EIO (PNG write
   failed). Version 0.1. License: MIT (see the end of plot.c). */
#ifndef ATTNKIT_PLOT_H
#define ATTNKIT_PLOT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PLOT_OK = 0, PLOT_EINVAL = -1, PLOT_ENOMEM = -2, PLOT_EIO = -3 };

typedef struct plot_series {
    const char *label; /* legend text; NULL: "series <i>" */
    const double *x, *y; /* (n,) each */
    int n;
} plot_series;

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

/* The colour series i is drawn in (distinct for the first 10, then golden-angle hues). */
void plot_series_color(int i, unsigned char rgb[3]);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_PLOT_H */
