/* test_plot.c - PNG line plots (examples/common/plot.c): a plot written to PNG reads back
   (stb_image) with the right size and exactly the pixels rendered in memory; every
   series' colour appears inside the plot area; NaN/Inf points are skipped without
   blowing up the ranges; log-y; degenerate and huge ranges; tick choice and labels; the
   bitmap font; refused arguments. */
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
            if (memcmp(plot__font[i], plot__font[j], 7) == 0) same++;
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

static void test_bad_args(void)
{
    double x[2] = {0, 1};
    plot_series s;
    unsigned char rgb[64 * 64 * 3];
    char path[300];
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
    TEST_RUN(test_bad_args);
    TEST_RUN(test_write_errors);
    {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "umount '%s/tmpfs' 2>/dev/null; rm -rf '%s'", g_tmp, g_tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    }
    return TEST_END();
}
