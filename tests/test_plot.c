/* test_plot.c - PNG plots (examples/common/plot.c): a plot written to PNG reads back
   (stb_image) with the right size and exactly the pixels rendered in memory; every
   series' colour appears inside the plot area; NaN/Inf points are skipped without
   blowing up the ranges; log-y; degenerate and huge ranges; tick choice and labels; the
   bitmap font (every pair of glyphs differs, the easily confused ones clearly, the
   descenders sit below the baseline); identical series all stay visible (dash patterns,
   markers); the legend never covers a line (a free corner, else outside the plot area);
   notes and two-line titles; heatmaps with a colour bar (size, colours, masked cells,
   averaging down, PNG round trip, errors); refused arguments; write errors. */
#define _XOPEN_SOURCE 700
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#undef STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_IMPLEMENTATION
#include <stb_image.h>
#undef STB_IMAGE_IMPLEMENTATION
#include "../examples/common/plot.c"
#include "attnkit_test.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[256];

/* Pixels of colour c inside the rectangle [x0,x1] x [y0,y1]. */
static long count_color(const unsigned char *rgb, int w, int x0, int y0, int x1, int y1, const unsigned char c[3])
{
    long n = 0;
    int x, y;
    for (y = y0; y <= y1; y++)
        for (x = x0; x <= x1; x++)
            if (memcmp(rgb + ((size_t)y * (size_t)w + (size_t)x) * 3, c, 3) == 0) n++;
    return n;
}

static int count_temp_files(void)
{
    DIR *d = opendir(g_tmp);
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static void loss_curves(double *step, double *tr, double *va, int n)
{
    int i;
    for (i = 0; i < n; i++) {
        step[i] = 10.0 * i;
        tr[i] = 3.0 + 8.0 * exp(-i / 12.0) + 0.1 * sin(i * 1.7);
        va[i] = 3.4 + 7.5 * exp(-i / 14.0);
    }
}

static void test_png_roundtrip(void)
{
    enum { N = 80, W = 800, H = 500 };
    double step[N], tr[N], va[N];
    plot_series s[2];
    char path[300];
    unsigned char *mem = (unsigned char *)malloc((size_t)W * H * 3), *png;
    unsigned char c0[3], c1[3];
    int w = 0, h = 0, comp = 0;
    loss_curves(step, tr, va, N);
    memset(s, 0, sizeof s); /* automatic styles */
    s[0].label = "train loss";
    s[0].x = step;
    s[0].y = tr;
    s[0].n = N;
    s[1].label = "val CE";
    s[1].x = step;
    s[1].y = va;
    s[1].n = N;
    snprintf(path, sizeof path, "%s/loss.png", g_tmp);
    CHECK_INT_EQ(plot_lines_png(path, W, H, "WikiText-2 tiny", "step", "loss", s, 2, 0), PLOT_OK);
    CHECK_INT_EQ(plot_lines_rgb(mem, W, H, "WikiText-2 tiny", "step", "loss", s, 2, 0), PLOT_OK);
    CHECK_INT_EQ(count_temp_files(), 0); /* written to a temporary file, then renamed */
    png = stbi_load(path, &w, &h, &comp, 3);
    CHECK(png != NULL);
    if (!png) {
        free(mem);
        return;
    }
    CHECK_INT_EQ(w, W);
    CHECK_INT_EQ(h, H);
    CHECK_INT_EQ(comp, 3);
    CHECK(memcmp(png, mem, (size_t)W * H * 3) == 0); /* PNG is lossless: exactly what was drawn */
    plot_series_color(0, c0);
    plot_series_color(1, c1);
    CHECK(memcmp(c0, c1, 3) != 0);
    /* both colours in the middle of the image (the lines), far beyond the legend swatches */
    CHECK(count_color(png, W, W / 5, H / 10, W - 40, H - 60, c0) > 300);
    CHECK(count_color(png, W, W / 5, H / 10, W - 40, H - 60, c1) > 300);
    /* mostly white, some black text (title row at the top) */
    CHECK(count_color(png, W, 0, 0, W - 1, H - 1, plot__white) > (long)W * H / 2);
    CHECK(count_color(png, W, 0, 0, W - 1, 30, plot__black) > 50);
    /* the left column holds the vertical y label in black */
    CHECK(count_color(png, W, 0, 0, 25, H - 1, plot__black) > 20);
    stbi_image_free(png);
    free(mem);
}

static void test_nan_inf_and_ranges(void)
{
    enum { W = 200, H = 150 };
    double x[7] = {0, 1, 2, 3, 4, 5, 6};
    double y[7] = {1, 2, NAN, HUGE_VAL, 3, -HUGE_VAL, 2.5};
    double ybad[3] = {NAN, NAN, NAN};
    double big[2] = {-1e308, 1e308}, one[1] = {5};
    unsigned char *rgb = (unsigned char *)malloc((size_t)W * H * 3), c[3];
    plot_series s[3];
    memset(s, 0, sizeof s);
    s[0].x = x;
    s[0].y = y;
    s[0].n = 7;
    s[1].label = "all NaN";
    s[1].x = x;
    s[1].y = ybad;
    s[1].n = 3;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, "t", "x", "y", s, 2, 0), PLOT_OK);
    plot_series_color(0, c);
    CHECK(count_color(rgb, W, 0, 0, W - 1, H - 1, c) > 30);
    /* huge ranges, a single point, an empty series: no UB, still drawn */
    s[0].x = big;
    s[0].y = big;
    s[0].n = 2;
    s[1].x = one;
    s[1].y = one;
    s[1].n = 1;
    s[2].x = NULL;
    s[2].y = NULL;
    s[2].n = 0;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, NULL, NULL, NULL, s, 3, 0), PLOT_OK);
    CHECK(count_color(rgb, W, 0, 0, W - 1, H - 1, c) > 30);
    s[0].x = one;
    s[0].y = one;
    s[0].n = 1;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, NULL, NULL, NULL, s, 1, 0), PLOT_OK);
    CHECK(count_color(rgb, W, 0, 0, W - 1, H - 1, c) >= 9); /* the isolated point's square */
    /* no series at all, minimum size */
    CHECK_INT_EQ(plot_lines_rgb(rgb, 64, 64, "tiny", "x", "y", NULL, 0, 0), PLOT_OK);
    CHECK_INT_EQ(plot_lines_rgb(rgb, 64, 64, "tiny", "x", "y", s, 1, 1), PLOT_OK);
    free(rgb);
}

static void test_logy(void)
{
    enum { N = 50, W = 300, H = 200 };
    double x[N], y[N];
    unsigned char *rgb = (unsigned char *)malloc((size_t)W * H * 3), *lin = (unsigned char *)malloc((size_t)W * H * 3);
    unsigned char c[3];
    plot_series s;
    int i;
    for (i = 0; i < N; i++) {
        x[i] = i;
        y[i] = pow(10.0, 3.0 - i * 0.1); /* 1000 .. ~0.013 */
    }
    y[10] = 0;    /* skipped on a log axis */
    y[11] = -5.0; /* likewise */
    memset(&s, 0, sizeof s);
    s.label = "decay";
    s.x = x;
    s.y = y;
    s.n = N;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, "log", "x", "y", &s, 1, 1), PLOT_OK);
    CHECK_INT_EQ(plot_lines_rgb(lin, W, H, "log", "x", "y", &s, 1, 0), PLOT_OK);
    plot_series_color(0, c);
    CHECK(count_color(rgb, W, 0, 0, W - 1, H - 1, c) > 100);
    CHECK(memcmp(rgb, lin, (size_t)W * H * 3) != 0);
    free(rgb);
    free(lin);
}

static void test_many_series_colors(void)
{
    enum { NS = 12, W = 400, H = 300 };
    double x[2] = {0, 1}, y[NS][2];
    plot_series s[NS];
    unsigned char *rgb = (unsigned char *)malloc((size_t)W * H * 3), c[NS][3];
    int i, j, distinct = 1;
    memset(s, 0, sizeof s);
    for (i = 0; i < NS; i++) {
        y[i][0] = i;
        y[i][1] = i + 0.5;
        s[i].label = NULL;
        s[i].x = x;
        s[i].y = y[i];
        s[i].n = 2;
        plot_series_color(i, c[i]);
    }
    for (i = 0; i < NS; i++)
        for (j = 0; j < i; j++)
            if (memcmp(c[i], c[j], 3) == 0) distinct = 0;
    CHECK(distinct);
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, "many", NULL, NULL, s, NS, 0), PLOT_OK);
    for (i = 0; i < NS; i++) CHECK(count_color(rgb, W, 0, 0, W - 1, H - 1, c[i]) > 20);
    free(rgb);
}

static void test_ticks(void)
{
    plot__axis a;
    char buf[32];
    a.lo = 0;
    a.hi = 1000;
    plot__ticks(&a, 5, 0);
    CHECK_INT_EQ(a.n, 6);
    CHECK(strcmp(a.lab[0], "0") == 0 && strcmp(a.lab[1], "200") == 0 && strcmp(a.lab[5], "1000") == 0);
    a.lo = 2.93;
    a.hi = 3.41;
    plot__ticks(&a, 5, 0);
    CHECK(a.n >= 4 && a.n <= 6);
    CHECK(strcmp(a.lab[0], "3.0") == 0 || strcmp(a.lab[0], "2.95") == 0);
    CHECK(a.pos[0] >= 2.93 && a.pos[a.n - 1] <= 3.41);
    a.lo = -3.2;
    a.hi = 1.5; /* log10 units: 0.00063 .. 31.6 */
    plot__ticks(&a, 6, 1);
    CHECK_INT_EQ(a.n, 5); /* decades 1e-3 .. 1e1 */
    CHECK(strcmp(a.lab[0], "0.001") == 0 && strcmp(a.lab[4], "10") == 0);
    CHECK_NEAR(a.pos[1], -2.0, 1e-12);
    a.lo = -9.5;
    a.hi = 9.5; /* 19 decades: every m-th */
    plot__ticks(&a, 5, 1);
    CHECK(a.n >= 3 && a.n <= 7);
    a.lo = log10(3.0);
    a.hi = log10(9.0); /* less than a decade: 1/2/5 ticks on the log scale */
    plot__ticks(&a, 5, 1);
    CHECK(a.n >= 3);
    CHECK(strcmp(a.lab[0], "3") == 0 || strcmp(a.lab[0], "4") == 0);
    CHECK_NEAR(a.pos[0], log10(atof(a.lab[0])), 1e-12);
    plot__fmt(buf, sizeof buf, 0.05, 0.05);
    CHECK(strcmp(buf, "0.05") == 0);
    plot__fmt(buf, sizeof buf, 2e6, 1e6);
    CHECK(strcmp(buf, "2e+06") == 0);
    plot__fmt(buf, sizeof buf, -1.5, 0.5);
    CHECK(strcmp(buf, "-1.5") == 0);
}

static void test_font(void)
{
    int i, j, same = 0, empty = 0;
    unsigned char rgb[40 * 20 * 3];
    plot__img im;
    for (i = 1; i < 95; i++) {
        int ink = 0, r;
        for (r = 0; r < 7; r++) ink |= plot__font[i][r];
        if (!ink) empty++;
        for (j = 0; j < i; j++)
            if (memcmp(plot__font[i], plot__font[j], sizeof plot__font[0]) == 0) same++;
    }
    CHECK_INT_EQ(empty, 0);
    CHECK_INT_EQ(same, 0);
    /* "1.5e-3" at scale 1: ink within the expected box (6 glyphs x 6 px - 1) */
    memset(rgb, 255, sizeof rgb);
    im.rgb = rgb;
    im.w = 40;
    im.h = 20;
    plot__text(&im, 2, 3, "1.5e-3", 1, plot__black);
    CHECK(count_color(rgb, 40, 2, 3, 2 + 6 * 6 - 2, 3 + 6, plot__black) > 30);
    CHECK_INT_EQ(count_color(rgb, 40, 0, 0, 39, 19, plot__black), count_color(rgb, 40, 2, 3, 36, 9, plot__black));
    CHECK_INT_EQ(plot__text_w("abc", 2), 34);
}

/* Issue 40: letters a reader cannot mistake. Every pair of glyphs differs in at least 2
   pixels, the usual suspects (g/9, 1/l/I, 0/O, 5/S ...) in at least 4; the descenders of
   g j p q y , ; | reach below the baseline (rows 7-8) and nothing else does. */
static int glyph_dist(unsigned char a, unsigned char b)
{
    int r, d = 0;
    for (r = 0; r < 9; r++) {
        unsigned x = (unsigned)(plot__font[a - 32][r] ^ plot__font[b - 32][r]);
        while (x) {
            d += (int)(x & 1u);
            x >>= 1;
        }
    }
    return d;
}

static void test_font_unambiguous(void)
{
    static const char *const pairs[] = {"g9", "q9", "gq", "gy", "1l", "1I", "lI", "l|", "1|", "I|", "0O", "0o", "Oo",
                                        "0D", "5S", "2Z", "6b", "pP", "qa", "jy", "Il", "ij", "uv", "rn", ",;", ".,", "!|"};
    int i, j, close = 0;
    size_t k;
    for (i = 33; i < 127; i++)
        for (j = 32; j < i; j++)
            if (glyph_dist((unsigned char)i, (unsigned char)j) < 2) {
                close++;
                fprintf(stderr, "    glyphs '%c' and '%c' differ in %d pixels\n", i, j, glyph_dist((unsigned char)i, (unsigned char)j));
            }
    CHECK_INT_EQ(close, 0);
    for (k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        int d = glyph_dist((unsigned char)pairs[k][0], (unsigned char)pairs[k][1]);
        int need = pairs[k][0] == '.' ? 2 : 4; /* '.' and ',': the comma's tail */
        if (d < need) fprintf(stderr, "    '%c' and '%c' differ in only %d pixels\n", pairs[k][0], pairs[k][1], d);
        CHECK(d >= need);
    }
    for (i = 32; i < 127; i++) {
        int below = (plot__font[i - 32][7] | plot__font[i - 32][8]) != 0;
        CHECK_INT_EQ(below, strchr("gjpqy,;|", i) != NULL);
    }
    /* g starts below the top of 9: the bowl of a lower-case letter (rows 2..6) */
    CHECK(plot__font['g' - 32][0] == 0 && plot__font['g' - 32][1] == 0 && plot__font['9' - 32][0] != 0);
}

/* pixels of colour c inside the plot area but outside the legend box */
static long area_color(const unsigned char *rgb, int w, const plot__layout *L, const unsigned char c[3])
{
    long n = count_color(rgb, w, L->area.x0, L->area.y0, L->area.x1, L->area.y1, c);
    if (L->legend.x1 >= L->legend.x0 && !L->legend_outside)
        n -= count_color(rgb, w, L->legend.x0, L->legend.y0, L->legend.x1, L->legend.y1, c);
    return n;
}

/* Issue 40: series with identical values hid each other (the last one drawn covered the
   rest). With automatic styles every one of 6 identical series keeps visible pixels of
   its colour on the plot; sparse series get markers automatically. */
static void test_identical_series_visible(void)
{
    enum { NS = 6, W = 800, H = 500 };
    double x[3] = {0, 1, 2}, y[3] = {0.0, 0.05, 0.05};
    plot_series s[NS];
    plot__layout L;
    unsigned char *rgb = (unsigned char *)malloc((size_t)W * H * 3), *plain = (unsigned char *)malloc((size_t)W * H * 3);
    int i;
    memset(s, 0, sizeof s);
    for (i = 0; i < NS; i++) {
        s[i].x = x;
        s[i].y = y;
        s[i].n = 3;
    }
    CHECK_INT_EQ(plot__lines(rgb, W, H, "identical", "x", "y", s, NS, 0, &L), PLOT_OK);
    for (i = 0; i < NS; i++) {
        unsigned char c[3];
        long n;
        plot_series_color(i, c);
        n = area_color(rgb, W, &L, c);
        if (n < 20) fprintf(stderr, "    series %d: only %ld pixels of its colour visible\n", i, n);
        CHECK(n >= 20);
    }
    /* markers: the same sparse series drawn without them has fewer pixels of its colour */
    for (i = 0; i < NS; i++) s[i].marker = PLOT_MARK_NONE;
    CHECK_INT_EQ(plot_lines_rgb(plain, W, H, "identical", "x", "y", s, 1, 0), PLOT_OK);
    s[0].marker = PLOT_MARK_AUTO;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, "identical", "x", "y", s, 1, 0), PLOT_OK);
    {
        unsigned char c[3];
        plot_series_color(0, c);
        CHECK(count_color(rgb, W, 0, 0, W - 1, H - 1, c) > count_color(plain, W, 0, 0, W - 1, H - 1, c) + 30);
    }
    /* every marker shape and dash pattern draws something; out-of-range styles are refused */
    for (i = PLOT_MARK_NONE; i < PLOT_MARK_COUNT; i++) {
        unsigned char c[3];
        s[0].marker = i;
        s[0].dash = PLOT_DASH_SOLID + (i % (PLOT_DASH_NONE - PLOT_DASH_SOLID));
        CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, NULL, NULL, NULL, s, 1, 0), PLOT_OK);
        plot_series_color(0, c);
        CHECK(count_color(rgb, W, 0, 0, W - 1, H - 1, c) > 50);
    }
    s[0].dash = PLOT_DASH_NONE;
    s[0].marker = PLOT_MARK_NONE;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, NULL, NULL, NULL, s, 1, 0), PLOT_OK); /* nothing but the legend swatch */
    s[0].marker = PLOT_MARK_COUNT;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, NULL, NULL, NULL, s, 1, 0), PLOT_EINVAL);
    s[0].marker = 0;
    s[0].dash = -1;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, NULL, NULL, NULL, s, 1, 0), PLOT_EINVAL);
    s[0].dash = 0;
    s[0].color = -2;
    CHECK_INT_EQ(plot_lines_rgb(rgb, W, H, NULL, NULL, NULL, s, 1, 0), PLOT_EINVAL);
    free(rgb);
    free(plain);
}

/* no point along any segment of any series falls inside the legend box */
static int legend_clear(const plot_series *s, int ns, const plot__layout *L)
{
    int i, k, j, pw = L->area.x1 - L->area.x0 + 1, ph = L->area.y1 - L->area.y0 + 1;
    for (i = 0; i < ns; i++)
        for (k = 0; k + 1 < s[i].n; k++)
            for (j = 0; j <= 64; j++) {
                double x = s[i].x[k] + (s[i].x[k + 1] - s[i].x[k]) * j / 64.0;
                double y = s[i].y[k] + (s[i].y[k + 1] - s[i].y[k]) * j / 64.0;
                int px = L->area.x0 + (int)floor(plot__frac(x, L->xlo, L->xhi) * (pw - 1) + 0.5);
                int py = L->area.y0 + (int)floor((1.0 - plot__frac(y, L->ylo, L->yhi)) * (ph - 1) + 0.5);
                if (px >= L->legend.x0 - 2 && px <= L->legend.x1 + 2 && py >= L->legend.y0 - 2 && py <= L->legend.y1 + 2)
                    return 0;
            }
    return 1;
}

/* Issue 40: the legend covered a line. It goes to a corner it leaves every line clear of,
   the upper right first; when no corner is free, outside, right of the plot area. */
static void test_legend_placement(void)
{
    enum { N = 100, W = 800, H = 500 };
    double x[N], up[N], down[N], flat_hi[2] = {1, 1}, flat_lo[2] = {0, 0}, x2[2] = {0, 99};
    plot_series s[4];
    plot__layout L;
    unsigned char *rgb = (unsigned char *)malloc((size_t)W * H * 3);
    int i;
    for (i = 0; i < N; i++) {
        x[i] = i;
        up[i] = i / 99.0;
        down[i] = 1.0 - i / 99.0;
    }
    memset(s, 0, sizeof s);
    s[0].label = "rising";
    s[0].x = x;
    s[0].y = up;
    s[0].n = N;
    CHECK_INT_EQ(plot__lines(rgb, W, H, "one diagonal", "x", "y", s, 1, 0, &L), PLOT_OK);
    CHECK(L.legend.x1 > L.legend.x0);
    CHECK_INT_EQ(L.legend_outside, 0);
    CHECK(L.legend.x0 < (L.area.x0 + L.area.x1) / 2); /* the upper left is free, the upper right is not */
    CHECK(legend_clear(s, 1, &L));
    /* both diagonals and lines along the top and the bottom: no free corner */
    s[1].label = "falling";
    s[1].x = x;
    s[1].y = down;
    s[1].n = N;
    s[2].label = "top";
    s[2].x = x2;
    s[2].y = flat_hi;
    s[2].n = 2;
    s[3].label = "bottom";
    s[3].x = x2;
    s[3].y = flat_lo;
    s[3].n = 2;
    CHECK_INT_EQ(plot__lines(rgb, W, H, "everywhere", "x", "y", s, 4, 0, &L), PLOT_OK);
    CHECK_INT_EQ(L.legend_outside, 1);
    CHECK(L.legend.x0 > L.area.x1 && L.legend.x1 < W);
    CHECK(legend_clear(s, 4, &L));
    /* labels too long for the right side: below the plot area */
    s[0].label = "a label far too long to sit right of the plot area";
    CHECK_INT_EQ(plot__lines(rgb, W, H, "everywhere", "x", "y", s, 4, 0, &L), PLOT_OK);
    CHECK_INT_EQ(L.legend_outside, 2);
    CHECK(L.legend.y0 > L.area.y1 && L.legend.y1 < H && L.legend.x0 >= 0 && L.legend.x1 < W);
    CHECK(L.area.y1 - L.area.y0 > H / 3);
    CHECK(legend_clear(s, 4, &L));
    /* a loss curve: falls from the upper left, legend in the upper right */
    for (i = 0; i < N; i++) down[i] = 3.0 + 8.0 * exp(-i / 12.0);
    s[1].y = down;
    CHECK_INT_EQ(plot__lines(rgb, W, H, "loss", "step", "CE", s + 1, 1, 0, &L), PLOT_OK);
    CHECK_INT_EQ(L.legend_outside, 0);
    CHECK(L.legend.x0 > (L.area.x0 + L.area.x1) / 2 && L.legend.y0 < (L.area.y0 + L.area.y1) / 2);
    CHECK(legend_clear(s + 1, 1, &L));
    free(rgb);
}

/* A note beside the last point (loss.png's "test CE x.xx") and a second title line are drawn. */
static void test_note_and_title_lines(void)
{
    enum { W = 900, H = 540 };
    double x[3] = {0, 50, 100}, y[3] = {10, 6, 5}, fx = 100, fy = 5.2;
    plot_series s[2];
    plot__layout L;
    unsigned char *a = (unsigned char *)malloc((size_t)W * H * 3), *b = (unsigned char *)malloc((size_t)W * H * 3), c[3];
    memset(s, 0, sizeof s);
    s[0].label = "eval CE";
    s[0].x = x;
    s[0].y = y;
    s[0].n = 3;
    s[1].label = "test CE 5.20";
    s[1].x = &fx;
    s[1].y = &fy;
    s[1].n = 1;
    s[1].marker = PLOT_MARK_DOT;
    s[1].dash = PLOT_DASH_NONE;
    s[1].color = 4;
    CHECK_INT_EQ(plot__lines(a, W, H, "t", "x", "y", s, 2, 0, &L), PLOT_OK);
    s[1].note = "test CE 5.20";
    CHECK_INT_EQ(plot__lines(b, W, H, "t", "x", "y", s, 2, 0, &L), PLOT_OK);
    plot_series_color(3, c);
    CHECK(area_color(b, W, &L, c) > area_color(a, W, &L, c) + 60); /* the note, in the series' colour */
    CHECK(legend_clear(s, 2, &L));
    /* two title lines: ink in the second line's band too */
    CHECK_INT_EQ(plot__lines(a, W, H, "first line", "x", "y", s, 2, 0, &L), PLOT_OK);
    CHECK_INT_EQ(count_color(a, W, W / 3, 8 + 18 + 4, W / 2, 8 + 18 + 4 + 17, plot__black), 0);
    CHECK_INT_EQ(plot__lines(a, W, H, "first line\nsecond line", "x", "y", s, 2, 0, &L), PLOT_OK);
    CHECK(count_color(a, W, W / 3, 8 + 18 + 4, W / 2, 8 + 18 + 4 + 17, plot__black) > 40);
    CHECK(L.area.y0 > 8 + 2 * 22);
    free(a);
    free(b);
}

/* Issue 40: prior_viz's heatmaps had no axes or colour bar. A heatmap renders at the
   requested size with the map and a colour bar beside it (red at the top, blue at the
   bottom), masked cells grey, an 8x8 map enlarged by a whole factor, a 1000x1000 map
   averaged into a small image; the PNG holds exactly the pixels drawn. */
static void test_heatmap(void)
{
    enum { T = 8, W = 600, H = 520, B = 1000 };
    float m[T * T], *big = (float *)malloc(sizeof(float) * B * B);
    plot_heatmap h;
    plot__heat_layout L;
    unsigned char *rgb = (unsigned char *)malloc((size_t)W * H * 3), *png;
    static const unsigned char red[3] = {255, 0, 0}, blue[3] = {0, 0, 255};
    char path[300], err[400];
    int i, j, w = 0, hh = 0, comp = 0;
    for (i = 0; i < T; i++)
        for (j = 0; j < T; j++) m[i * T + j] = j > i ? NAN : (float)(i - j) - 3.5f;
    m[7 * T + 0] = 4.0f;
    m[7 * T + 1] = -4.0f;
    memset(&h, 0, sizeof h);
    h.v = m;
    h.rows = h.cols = T;
    h.cbar_label = "B[i,j]";
    h.note = "grey: masked";
    CHECK_INT_EQ(plot__heat(rgb, W, H, "RPA prior B(T), T=8\nsecond line", "key position j", "query position i", &h, &L), PLOT_OK);
    CHECK_NEAR(L.vmax, 4.0, 1e-12);
    CHECK_INT_EQ(L.sc, 2);
    CHECK_INT_EQ((L.map.x1 - L.map.x0 + 1) % T, 0); /* a whole number of pixels per cell */
    CHECK_INT_EQ(L.map.x1 - L.map.x0, L.map.y1 - L.map.y0);
    CHECK(L.map.x1 - L.map.x0 + 1 >= 8 * T);
    CHECK(L.map.x0 > 40 && L.map.y0 > 40 && L.map.y1 < H - 40); /* room for tick labels and titles */
    CHECK(L.cbar.x0 > L.map.x1 && L.cbar.x1 < W - 40 && L.cbar.y0 == L.map.y0 && L.cbar.y1 == L.map.y1);
    CHECK(count_color(rgb, W, L.map.x0, L.map.y0, L.map.x1, L.map.y1, plot__masked) > 20 * 64); /* 28 masked cells */
    CHECK(count_color(rgb, W, L.map.x0, L.map.y0, L.map.x1, L.map.y1, red) > 30);  /* the +4 cell */
    CHECK(count_color(rgb, W, L.map.x0, L.map.y0, L.map.x1, L.map.y1, blue) > 30); /* the -4 cell */
    CHECK(memcmp(rgb + ((size_t)L.cbar.y0 * W + (size_t)L.cbar.x0) * 3, red, 3) == 0);
    CHECK(memcmp(rgb + ((size_t)L.cbar.y1 * W + (size_t)L.cbar.x0) * 3, blue, 3) == 0);
    /* labels: black ink left of the map (row ticks), under it, right of the colour bar */
    CHECK(count_color(rgb, W, 0, L.map.y0, L.map.x0 - 3, L.map.y1, plot__black) > 100);
    CHECK(count_color(rgb, W, L.map.x0, L.map.y1 + 2, L.map.x1, H - 1, plot__black) > 100);
    CHECK(count_color(rgb, W, L.cbar.x1 + 2, L.map.y0, W - 1, L.map.y1, plot__black) > 100);
    /* a fixed range */
    h.vmax = 8.0;
    CHECK_INT_EQ(plot__heat(rgb, W, H, NULL, NULL, NULL, &h, &L), PLOT_OK);
    CHECK_NEAR(L.vmax, 8.0, 1e-12);
    CHECK_INT_EQ(count_color(rgb, W, L.map.x0, L.map.y0, L.map.x1, L.map.y1, red), 0); /* +4 is half way */
    /* larger than the image: averaged down, nothing out of bounds (ASan) */
    for (i = 0; i < B; i++)
        for (j = 0; j < B; j++) big[(size_t)i * B + j] = j > i ? NAN : (float)sin(i * 0.01) * (float)(j % 7);
    h.v = big;
    h.rows = h.cols = B;
    h.vmax = 0;
    CHECK_INT_EQ(plot__heat(rgb, 300, 200, "big", "j", "i", &h, &L), PLOT_OK);
    CHECK(L.map.x1 < 300 && L.map.y1 < 200 && L.map.x0 >= 0 && L.map.y0 >= 0);
    CHECK(count_color(rgb, 300, L.map.x0, L.map.y0, L.map.x1, L.map.y1, plot__masked) > 100);
    /* a non-square map, a single cell */
    h.v = m;
    h.rows = 2;
    h.cols = T;
    CHECK_INT_EQ(plot__heat(rgb, W, H, "2x8", "j", "i", &h, &L), PLOT_OK);
    CHECK_INT_EQ((L.map.x1 - L.map.x0 + 1) / T, (L.map.y1 - L.map.y0 + 1) / 2);
    h.rows = h.cols = 1;
    CHECK_INT_EQ(plot__heat(rgb, 64, 64, NULL, NULL, NULL, &h, &L), PLOT_OK);
    /* the PNG: exactly the pixels drawn, written through a temporary file */
    h.rows = h.cols = T;
    snprintf(path, sizeof path, "%s/heat.png", g_tmp);
    CHECK_INT_EQ(plot_heatmap_png_err(path, W, H, "t", "j", "i", &h, err, sizeof err), PLOT_OK);
    CHECK_INT_EQ(plot_heatmap_rgb(rgb, W, H, "t", "j", "i", &h), PLOT_OK);
    CHECK_INT_EQ(count_temp_files(), 0);
    png = stbi_load(path, &w, &hh, &comp, 3);
    CHECK(png != NULL);
    if (png) {
        CHECK(w == W && hh == H && memcmp(png, rgb, (size_t)W * H * 3) == 0);
        stbi_image_free(png);
    }
    /* refused: sizes, NULL values, no cells; a directory that does not exist */
    CHECK_INT_EQ(plot_heatmap_rgb(rgb, 63, H, NULL, NULL, NULL, &h), PLOT_EINVAL);
    CHECK_INT_EQ(plot_heatmap_rgb(NULL, W, H, NULL, NULL, NULL, &h), PLOT_EINVAL);
    CHECK_INT_EQ(plot_heatmap_rgb(rgb, W, H, NULL, NULL, NULL, NULL), PLOT_EINVAL);
    h.rows = 0;
    CHECK_INT_EQ(plot_heatmap_rgb(rgb, W, H, NULL, NULL, NULL, &h), PLOT_EINVAL);
    CHECK_INT_EQ(plot_heatmap_png_err(path, W, H, NULL, NULL, NULL, &h, err, sizeof err), PLOT_EINVAL);
    h.rows = T;
    h.v = NULL;
    CHECK_INT_EQ(plot_heatmap_png_err(path, W, H, NULL, NULL, NULL, &h, err, sizeof err), PLOT_EINVAL);
    h.v = m;
    snprintf(path, sizeof path, "%s/no/such/dir/heat.png", g_tmp);
    CHECK_INT_EQ(plot_heatmap_png_err(path, W, H, NULL, NULL, NULL, &h, err, sizeof err), PLOT_EIO);
    CHECK(strstr(err, "heat.png") != NULL);
    CHECK_INT_EQ(count_temp_files(), 0);
    free(big);
    free(rgb);
}

static void test_bad_args(void)
{
    double x[2] = {0, 1};
    plot_series s;
    unsigned char rgb[64 * 64 * 3];
    char path[300];
    memset(&s, 0, sizeof s);
    s.label = "a";
    s.x = x;
    s.y = x;
    s.n = 2;
    snprintf(path, sizeof path, "%s/ok.png", g_tmp);
    CHECK_INT_EQ(plot_lines_png(NULL, 100, 100, NULL, NULL, NULL, &s, 1, 0), PLOT_EINVAL);
    CHECK_INT_EQ(plot_lines_png("", 100, 100, NULL, NULL, NULL, &s, 1, 0), PLOT_EINVAL);
    CHECK_INT_EQ(plot_lines_png(path, 63, 100, NULL, NULL, NULL, &s, 1, 0), PLOT_EINVAL);
    CHECK_INT_EQ(plot_lines_png(path, 100, 10, NULL, NULL, NULL, &s, 1, 0), PLOT_EINVAL);
    CHECK_INT_EQ(plot_lines_png(path, 100000, 100, NULL, NULL, NULL, &s, 1, 0), PLOT_EINVAL);
    CHECK_INT_EQ(plot_lines_png(path, 100, 100, NULL, NULL, NULL, &s, -1, 0), PLOT_EINVAL);
    CHECK_INT_EQ(plot_lines_png(path, 100, 100, NULL, NULL, NULL, NULL, 1, 0), PLOT_EINVAL);
    s.n = -1;
    CHECK_INT_EQ(plot_lines_png(path, 100, 100, NULL, NULL, NULL, &s, 1, 0), PLOT_EINVAL);
    s.n = 2;
    s.y = NULL;
    CHECK_INT_EQ(plot_lines_png(path, 100, 100, NULL, NULL, NULL, &s, 1, 0), PLOT_EINVAL);
    s.y = x;
    CHECK_INT_EQ(plot_lines_rgb(NULL, 64, 64, NULL, NULL, NULL, &s, 1, 0), PLOT_EINVAL);
    CHECK(access(path, F_OK) != 0); /* nothing was written */
    snprintf(path, sizeof path, "%s/no/such/dir/x.png", g_tmp);
    CHECK_INT_EQ(plot_lines_png(path, 100, 100, NULL, NULL, NULL, &s, 1, 0), PLOT_EIO);
    snprintf(path, sizeof path, "%s", g_tmp); /* a directory: the rename fails */
    CHECK_INT_EQ(plot_lines_png(path, 100, 100, NULL, NULL, NULL, &s, 1, 0), PLOT_EIO);
    CHECK_INT_EQ(count_temp_files(), 0);
    CHECK_INT_EQ(plot_lines_rgb(rgb, 64, 64, NULL, NULL, NULL, &s, 1, 0), PLOT_OK);
}

/* Issue 37: no PNG without its bytes. A write that fails midway (a file-size limit, and
   as root a full 8 KiB tmpfs) is PLOT_EIO with the reason, the earlier file at path is
   left byte-identical and no temporary file remains (stb_image_write's own file writer
   ignored fwrite's errors: a 0-byte or cut PNG was renamed into place with PLOT_OK). */
static int full_case(const char *dir, const char *why_code)
{
    enum { N = 50 };
    double x[N], y[N];
    plot_series s;
    char path[600], err[600];
    static const char old[] = "the previous loss.png";
    unsigned char buf[64];
    FILE *f;
    int i, rc, n = 0;
    DIR *d;
    struct dirent *e;
    for (i = 0; i < N; i++) {
        x[i] = i;
        y[i] = 10.0 - 0.1 * i + 0.3 * sin(i * 1.7);
    }
    memset(&s, 0, sizeof s);
    s.label = "train CE";
    s.x = x;
    s.y = y;
    s.n = N;
    snprintf(path, sizeof path, "%s/loss.png", dir);
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return 0;
    CHECK(fwrite(old, 1, sizeof old, f) == sizeof old);
    CHECK(fclose(f) == 0);
    err[0] = 0;
    rc = plot_lines_png_err(path, 900, 540, "wt2_train: cross-entropy", "step", "CE", &s, 1, 0, err, sizeof err);
    CHECK_INT_EQ(rc, PLOT_EIO);
    if (!strstr(err, why_code) || !strstr(err, "loss.png")) {
        CHECK(strstr(err, why_code) != NULL);
        fprintf(stderr, "    message '%s' lacks '%s'\n", err, why_code);
    }
    f = fopen(path, "rb");
    CHECK(f != NULL);
    if (f) {
        CHECK(fread(buf, 1, sizeof buf, f) == sizeof old && memcmp(buf, old, sizeof old) == 0);
        fclose(f);
    }
    d = opendir(dir);
    while (d && (e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    CHECK_INT_EQ(n, 0);
    /* plot_lines_png reports the same failure as a code */
    CHECK_INT_EQ(plot_lines_png(path, 900, 540, "t", "x", "y", &s, 1, 0), PLOT_EIO);
    return 1;
}

static void test_write_errors(void)
{
    char dir[400], cmd[900];
    struct rlimit old, lim;
    void (*prev)(int);
    /* a file-size limit of 4 KiB: the PNG's writes fail with EFBIG (SIGXFSZ ignored) */
    snprintf(dir, sizeof dir, "%s/fsize", g_tmp);
    CHECK(mkdir(dir, 0755) == 0);
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = 4096;
    prev = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    full_case(dir, "too large");
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, prev);
    /* a full disk: an 8 KiB tmpfs (root only; unmounted after) */
    if (geteuid() != 0) TEST_SKIP("not root: no tmpfs for the full-disk case (the file-size case ran)");
    snprintf(dir, sizeof dir, "%s/tmpfs", g_tmp);
    CHECK(mkdir(dir, 0755) == 0);
    snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=8k tmpfs '%s' 2>/dev/null", dir);
    if (system(cmd) != 0) TEST_SKIP("mount -t tmpfs failed (no CAP_SYS_ADMIN?): the file-size case ran");
    full_case(dir, "No space left");
    snprintf(cmd, sizeof cmd, "umount '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    snprintf(g_tmp, sizeof g_tmp, "%s/attnkit_plot_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    TEST_RUN(test_png_roundtrip);
    TEST_RUN(test_nan_inf_and_ranges);
    TEST_RUN(test_logy);
    TEST_RUN(test_many_series_colors);
    TEST_RUN(test_ticks);
    TEST_RUN(test_font);
    TEST_RUN(test_font_unambiguous);
    TEST_RUN(test_identical_series_visible);
    TEST_RUN(test_legend_placement);
    TEST_RUN(test_note_and_title_lines);
    TEST_RUN(test_heatmap);
    TEST_RUN(test_bad_args);
    TEST_RUN(test_write_errors);
    {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "umount '%s/tmpfs' 2>/dev/null; rm -rf '%s'", g_tmp, g_tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    }
    return TEST_END();
}
