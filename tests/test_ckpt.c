/* test_ckpt.c - safetensors checkpoints (examples/common/ckpt.c): round trip of every
   dtype and ndim 0..4, metadata escaping and UTF-8, the writer's layout (8-byte header
   padding, gap-free natural alignment), atomic writes (failures at validation, at create,
   midway through the data, at rename: the previous file stays byte-identical and no
   temporary file is left), every refused input with its code and message (all prefixes
   of a small file, every flipped data byte, header length, JSON errors, duplicates,
   overlapping/holed/out-of-range offsets, unknown dtype, size disagreement, overflow),
   misaligned foreign files, ckpt_read_into mismatch messages, and an independent
   python3 reader (json + struct + zlib) that checks the files the way the reference
   safetensors loader does. */
#define _XOPEN_SOURCE 700
#include "../examples/common/ckpt.c"
#include "attnkit_test.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>

static char g_tmp[256];

static void tmp_path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", g_tmp, name); }

static int write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (n && fwrite(data, 1, n, f) != n) {
        fclose(f);
        return 0;
    }
    return fclose(f) == 0;
}

static unsigned char *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long sz;
    *n = 0;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = (unsigned char *)malloc((size_t)sz + 1);
    if (buf && sz > 0 && fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) *n = (size_t)sz;
    return buf;
}

/* Number of directory entries of g_tmp whose name contains ".tmp." */
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

/* A safetensors file from a JSON header and data bytes (header not padded). */
static unsigned char *make_raw(const char *json, const void *data, size_t dlen, size_t *n)
{
    size_t h = strlen(json), k;
    unsigned char *b = (unsigned char *)malloc(8 + h + dlen + 1);
    for (k = 0; k < 8; k++) b[k] = (unsigned char)(((uint64_t)h >> (8 * k)) & 0xff);
    memcpy(b + 8, json, h);
    if (dlen) memcpy(b + 8 + h, data, dlen);
    *n = 8 + h + dlen;
    return b;
}

/* Opens a raw file from memory; expects code; the message must contain want (if not NULL). */
static void expect_refused(const char *json, const void *data, size_t dlen, int code, const char *want)
{
    size_t n;
    unsigned char *b = make_raw(json, data, dlen, &n);
    ckpt_file *f = (ckpt_file *)&n; /* must be reset to NULL */
    char err[512];
    int rc;
    err[0] = 0;
    rc = ckpt_open_mem(&f, b, n, err, sizeof err);
    CHECK_INT_EQ(rc, code);
    CHECK(f == NULL);
    CHECK(err[0] != 0);
    if (want && !strstr(err, want)) {
        CHECK(strstr(err, want) != NULL);
        fprintf(stderr, "    header %s\n    message '%s' lacks '%s'\n", json, err, want);
    }
    ckpt_close(f == (ckpt_file *)&n ? NULL : f);
    free(b);
}

/* ---- the test tensors: every dtype x ndim 0..4, plus a zero-size one */

#define NT 26
static float g_f32[5][120];
static double g_f64[5][120];
static int64_t g_i64[5][120];
static int32_t g_i32[5][120];
static unsigned char g_u8[5][120];
static char g_names[NT][64];
static ckpt_entry g_e[NT];

static void make_entries(void)
{
    static const int64_t shapes[5][4] = {{0, 0, 0, 0}, {7, 0, 0, 0}, {3, 5, 0, 0}, {2, 3, 5, 0}, {2, 3, 1, 4}};
    static const char *dn[5] = {"f32", "f64", "i64", "i32", "u8"};
    int dt, nd, i, k = 0;
    tt_seed(11);
    for (nd = 0; nd < 5; nd++)
        for (i = 0; i < 120; i++) {
            g_f32[nd][i] = (float)tt_normal();
            g_f64[nd][i] = tt_normal() * 1e10;
            g_i64[nd][i] = (int64_t)(tt_uniform() * 9.0e18) - (int64_t)4.5e18;
            g_i32[nd][i] = (int32_t)(tt_uniform() * 4.0e9 - 2.0e9);
            g_u8[nd][i] = (unsigned char)(tt_uniform() * 256);
        }
    /* interleave dtypes so the writer's grouping by alignment is exercised */
    for (nd = 0; nd < 5; nd++)
        for (dt = 0; dt < 5; dt++) {
            ckpt_entry *e = &g_e[k];
            int dtype = dt == 0 ? CKPT_U8 : dt == 1 ? CKPT_F32 : dt == 2 ? CKPT_F64 : dt == 3 ? CKPT_I32 : CKPT_I64;
            snprintf(g_names[k], sizeof g_names[k], "blk.%d.%s", nd, dn[dtype]);
            e->name = g_names[k];
            e->dtype = dtype;
            e->ndim = nd;
            memcpy(e->shape, shapes[nd], sizeof e->shape);
            e->data = dtype == CKPT_F32 ? (const void *)g_f32[nd]
                    : dtype == CKPT_F64 ? (const void *)g_f64[nd]
                    : dtype == CKPT_I64 ? (const void *)g_i64[nd]
                    : dtype == CKPT_I32 ? (const void *)g_i32[nd]
                                        : (const void *)g_u8[nd];
            k++;
        }
    /* a zero-size tensor with NULL data */
    snprintf(g_names[k], sizeof g_names[k], "empty \"quoted\\name\"");
    g_e[k].name = g_names[k];
    g_e[k].dtype = CKPT_F32;
    g_e[k].ndim = 2;
    g_e[k].shape[0] = 4;
    g_e[k].shape[1] = 0;
    g_e[k].shape[2] = g_e[k].shape[3] = 0;
    g_e[k].data = NULL;
}

static size_t entry_bytes(const ckpt_entry *e)
{
    size_t n = ckpt_dtype_size(e->dtype);
    int d;
    for (d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    return n;
}

static const char *g_mk[4] = {"step", "quote\"back\\slash/\n\t\x01", "caf\xc3\xa9 \xe2\x9c\x93", "emoji"};
static const char *g_mv[4] = {"1200", "line1\nline2\r\t\"x\"\\ \x1f end", "\xce\xbb=0.5 \xe4\xb8\xad", "\xf0\x9d\x84\x9e clef"};

static void test_roundtrip(void)
{
    char path[300], err[512];
    ckpt_file *f = NULL;
    int i, d;
    unsigned char *file, *mem = NULL;
    size_t flen, mlen = 0, total = 0;
    uint64_t hlen;
    make_entries();
    tmp_path(path, sizeof path, "rt.safetensors");
    CHECK_INT_EQ(ckpt_write(path, g_e, NT, g_mk, g_mv, 4, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(count_temp_files(), 0);
    /* the file and ckpt_write_mem agree byte for byte */
    file = read_file(path, &flen);
    CHECK(file != NULL);
    CHECK_INT_EQ(ckpt_write_mem((void **)&mem, &mlen, g_e, NT, g_mk, g_mv, 4, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(mlen, flen);
    CHECK(file && mem && mlen == flen && memcmp(file, mem, flen) == 0);
    /* layout: header padded to 8 with spaces, data = sum of sizes, no gaps */
    for (i = 0; i < NT; i++) total += entry_bytes(&g_e[i]);
    hlen = file ? ckpt__le64(file) : 0;
    CHECK_INT_EQ(hlen % 8, 0);
    CHECK_INT_EQ(flen, 8 + hlen + total);
    CHECK(file && file[8] == '{' && (file[8 + hlen - 1] == '}' || file[8 + hlen - 1] == ' '));
    CHECK_INT_EQ(ckpt_open(&f, path, err, sizeof err), CKPT_OK);
    if (!f) {
        fprintf(stderr, "    open: %s\n", err);
        free(file);
        free(mem);
        return;
    }
    CHECK_INT_EQ(ckpt_count(f), NT);
    for (i = 0; i < NT; i++) {
        ckpt_entry e, e2;
        size_t nb = entry_bytes(&g_e[i]), sz = ckpt_dtype_size(g_e[i].dtype);
        unsigned char buf[1024];
        CHECK_INT_EQ(ckpt_entry_at(f, i, &e), CKPT_OK);
        CHECK(strcmp(e.name, g_e[i].name) == 0); /* file order == the order given */
        CHECK_INT_EQ(e.dtype, g_e[i].dtype);
        CHECK_INT_EQ(e.ndim, g_e[i].ndim);
        for (d = 0; d < e.ndim; d++) CHECK_INT_EQ(e.shape[d], g_e[i].shape[d]);
        if (nb) {
            CHECK(memcmp(e.data, g_e[i].data, nb) == 0);
            CHECK_INT_EQ((uintptr_t)e.data % sz, 0);
            if (sz == 8) CHECK_INT_EQ((uintptr_t)e.data % 8, 0);
        }
        CHECK_INT_EQ(ckpt_find(f, g_e[i].name, &e2), CKPT_OK);
        CHECK(e2.data == e.data && e2.name == e.name);
        memset(buf, 0xAB, sizeof buf);
        CHECK_INT_EQ(ckpt_read_into(f, g_e[i].name, g_e[i].dtype, g_e[i].ndim, g_e[i].shape, buf, err, sizeof err),
                     CKPT_OK);
        if (nb) CHECK(memcmp(buf, g_e[i].data, nb) == 0);
        CHECK_INT_EQ(buf[nb], 0xAB); /* nothing written past the tensor */
    }
    {
        ckpt_entry e;
        CHECK_INT_EQ(ckpt_entry_at(f, NT, &e), CKPT_EINVAL);
        CHECK_INT_EQ(ckpt_entry_at(f, -1, &e), CKPT_EINVAL);
        CHECK_INT_EQ(ckpt_find(f, "blk.9.f32", &e), CKPT_ENOTFOUND);
    }
    /* metadata: user pairs verbatim, plus format and the two CRCs */
    for (i = 0; i < 4; i++) {
        const char *v = ckpt_meta(f, g_mk[i]);
        CHECK(v != NULL && strcmp(v, g_mv[i]) == 0);
    }
    CHECK(ckpt_meta(f, "format") && strcmp(ckpt_meta(f, "format"), "pt") == 0);
    CHECK(ckpt_meta(f, "attnkit.crc32") && strlen(ckpt_meta(f, "attnkit.crc32")) == 8);
    CHECK(ckpt_meta(f, "attnkit.hcrc32") && strlen(ckpt_meta(f, "attnkit.hcrc32")) == 8);
    CHECK(ckpt_meta(f, "missing") == NULL);
    CHECK_INT_EQ(ckpt_meta_count(f), 7);
    ckpt_close(f);
    free(file);
    free(mem);
    /* an empty checkpoint (no tensors, no user metadata) */
    CHECK_INT_EQ(ckpt_write(path, NULL, 0, NULL, NULL, 0, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(ckpt_open(&f, path, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(ckpt_count(f), 0);
    ckpt_close(f);
}

static void test_crc32_reference(void)
{
    static uint32_t t[8][256];
    unsigned char buf[100];
    uint32_t c1 = 0xffffffffu;
    int i, k;
    ckpt__crc_table(t);
    CHECK_INT_EQ(ckpt__crc_update(t, 0, "123456789", 9), 0xCBF43926u); /* the standard check value */
    CHECK_INT_EQ(ckpt__crc_update(t, ckpt__crc_update(t, 0, "1234", 4), "56789", 5), 0xCBF43926u);
    CHECK_INT_EQ(ckpt__crc_update(t, 0, "", 0), 0u);
    /* the 8-byte slices agree with a plain bitwise CRC at every length and offset */
    for (i = 0; i < 100; i++) buf[i] = (unsigned char)(i * 37 + 11);
    for (i = 0; i < 100; i++) {
        c1 ^= buf[i];
        for (k = 0; k < 8; k++) c1 = (c1 & 1u) ? 0xEDB88320u ^ (c1 >> 1) : c1 >> 1;
        CHECK_INT_EQ(ckpt__crc_update(t, 0, buf, (size_t)i + 1), ~c1);
        CHECK_INT_EQ(ckpt__crc_update(t, ckpt__crc_update(t, 0, buf, (size_t)i / 3), buf + i / 3, (size_t)i + 1 - (size_t)i / 3), ~c1);
    }
}

static void test_format_override_and_layout(void)
{
    /* the caller's "format" replaces ours; offsets are multiples of the element size */
    float a[3] = {1, 2, 3};
    double b[2] = {4, 5};
    unsigned char c[3] = {6, 7, 8};
    ckpt_entry e[3];
    const char *k[1] = {"format"}, *v[1] = {"np"};
    void *mem = NULL;
    size_t len = 0;
    char err[256];
    ckpt_file *f = NULL;
    memset(e, 0, sizeof e);
    e[0].name = "c";
    e[0].dtype = CKPT_U8;
    e[0].ndim = 1;
    e[0].shape[0] = 3;
    e[0].data = c;
    e[1].name = "a";
    e[1].dtype = CKPT_F32;
    e[1].ndim = 1;
    e[1].shape[0] = 3;
    e[1].data = a;
    e[2].name = "b";
    e[2].dtype = CKPT_F64;
    e[2].ndim = 1;
    e[2].shape[0] = 2;
    e[2].data = b;
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 3, k, v, 1, err, sizeof err), CKPT_OK);
    CHECK(mem && strstr((const char *)mem + 8, "\"b\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}"));
    CHECK(mem && strstr((const char *)mem + 8, "\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[16,28]}"));
    CHECK(mem && strstr((const char *)mem + 8, "\"c\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[28,31]}"));
    CHECK(mem && strstr((const char *)mem + 8, "\"pt\"") == NULL);
    CHECK_INT_EQ(ckpt_open_mem(&f, mem, len, err, sizeof err), CKPT_OK);
    CHECK(ckpt_meta(f, "format") && strcmp(ckpt_meta(f, "format"), "np") == 0);
    CHECK_INT_EQ(ckpt_meta_count(f), 3); /* format, attnkit.crc32, attnkit.hcrc32 */
    CHECK_INT_EQ(ckpt_format(f), 2);
    ckpt_close(f);
    free(mem);
}

static int files_equal(const char *path, const unsigned char *ref, size_t n)
{
    size_t m;
    unsigned char *b = read_file(path, &m);
    int eq = b && m == n && memcmp(b, ref, n) == 0;
    free(b);
    return eq;
}

static void test_atomic_write(void)
{
    char path[300], bad[300], err[512];
    float small[4] = {1, 2, 3, 4};
    static float big[65536];
    ckpt_entry e;
    unsigned char *ref;
    size_t rn;
    struct rlimit old, lim;
    int rc;
    memset(&e, 0, sizeof e);
    e.name = "w";
    e.dtype = CKPT_F32;
    e.ndim = 1;
    e.shape[0] = 4;
    e.data = small;
    tmp_path(path, sizeof path, "atomic.safetensors");
    CHECK_INT_EQ(ckpt_write(path, &e, 1, NULL, NULL, 0, err, sizeof err), CKPT_OK);
    ref = read_file(path, &rn);
    CHECK(ref != NULL);
    /* 1. NULL data: refused before anything is created */
    e.data = NULL;
    err[0] = 0;
    CHECK_INT_EQ(ckpt_write(path, &e, 1, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
    CHECK(strstr(err, "NULL data") != NULL);
    CHECK(files_equal(path, ref, rn));
    CHECK_INT_EQ(count_temp_files(), 0);
    e.data = small;
    /* 2. a directory that does not exist */
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.safetensors", g_tmp);
    err[0] = 0;
    CHECK_INT_EQ(ckpt_write(bad, &e, 1, NULL, NULL, 0, err, sizeof err), CKPT_EIO);
    CHECK(strstr(err, "cannot create") != NULL);
    CHECK(files_equal(path, ref, rn));
    CHECK_INT_EQ(count_temp_files(), 0);
    /* 3. failing midway through the data: a file-size limit below the checkpoint's size */
    e.shape[0] = 65536;
    e.data = big;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, SIG_IGN);
    lim = old;
    lim.rlim_cur = 100000; /* the checkpoint is 262 KB */
    if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
        err[0] = 0;
        rc = ckpt_write(path, &e, 1, NULL, NULL, 0, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &old);
        CHECK_INT_EQ(rc, CKPT_EIO);
        CHECK(strstr(err, "untouched") != NULL);
        CHECK(files_equal(path, ref, rn));
        CHECK_INT_EQ(count_temp_files(), 0);
    } else {
        fprintf(stderr, "    (setrlimit unavailable: midway case not run)\n");
    }
    signal(SIGXFSZ, SIG_DFL);
    /* 4. rename fails: the target is a non-empty directory */
    snprintf(bad, sizeof bad, "%s/adir", g_tmp);
    CHECK(mkdir(bad, 0755) == 0);
    {
        char inner[320];
        snprintf(inner, sizeof inner, "%s/keep", bad);
        CHECK(write_file(inner, "x", 1));
        err[0] = 0;
        CHECK_INT_EQ(ckpt_write(bad, &e, 1, NULL, NULL, 0, err, sizeof err), CKPT_EIO);
        CHECK(strstr(err, "rename") != NULL);
        CHECK_INT_EQ(count_temp_files(), 0);
        remove(inner);
        rmdir(bad);
    }
    /* 5. a successful overwrite replaces it */
    CHECK_INT_EQ(ckpt_write(path, &e, 1, NULL, NULL, 0, err, sizeof err), CKPT_OK);
    CHECK(!files_equal(path, ref, rn));
    CHECK_INT_EQ(count_temp_files(), 0);
    free(ref);
}

/* A small valid file: two tensors and metadata (about 200 bytes). */
static unsigned char *small_valid(size_t *n)
{
    static const float w[6] = {1, -2, 3.5f, 4, 5, 6};
    static const int64_t s[1] = {42};
    ckpt_entry e[2];
    const char *k[1] = {"step"}, *v[1] = {"3"};
    void *mem = NULL;
    char err[256];
    memset(e, 0, sizeof e);
    e[0].name = "w";
    e[0].dtype = CKPT_F32;
    e[0].ndim = 2;
    e[0].shape[0] = 2;
    e[0].shape[1] = 3;
    e[0].data = w;
    e[1].name = "step";
    e[1].dtype = CKPT_I64;
    e[1].ndim = 0;
    e[1].data = s;
    *n = 0;
    CHECK_INT_EQ(ckpt_write_mem(&mem, n, e, 2, k, v, 1, err, sizeof err), CKPT_OK);
    return (unsigned char *)mem;
}

static void test_truncated_every_prefix(void)
{
    size_t n, len;
    unsigned char *b = small_valid(&n), *ext;
    char path[300], err[512];
    ckpt_file *f = NULL;
    int bad_code = 0, bad_msg = 0, file_bad = 0;
    tmp_path(path, sizeof path, "trunc.safetensors");
    CHECK(b != NULL && n > 40);
    if (!b) return;
    CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_OK);
    ckpt_close(f);
    for (len = 0; len < n; len++) {
        int rc;
        err[0] = 0;
        f = NULL;
        rc = ckpt_open_mem(&f, b, len, err, sizeof err);
        if (rc != CKPT_EFORMAT || f) bad_code++;
        if (!err[0]) bad_msg++;
        /* the same through a file */
        CHECK(write_file(path, b, len));
        err[0] = 0;
        rc = ckpt_open(&f, path, err, sizeof err);
        if (rc != CKPT_EFORMAT || f || !strstr(err, "trunc.safetensors")) file_bad++;
    }
    CHECK_INT_EQ(bad_code, 0);
    CHECK_INT_EQ(bad_msg, 0);
    CHECK_INT_EQ(file_bad, 0);
    /* specific messages */
    ckpt_open_mem(&f, b, 0, err, sizeof err);
    CHECK(strstr(err, "empty") != NULL);
    ckpt_open_mem(&f, b, 5, err, sizeof err);
    CHECK(strstr(err, "truncated") != NULL);
    ckpt_open_mem(&f, b, 20, err, sizeof err);
    CHECK(strstr(err, "header length") != NULL);
    ckpt_open_mem(&f, b, n - 1, err, sizeof err);
    CHECK(strstr(err, "outside the data section") != NULL);
    /* one extra byte at the end */
    ext = (unsigned char *)malloc(n + 1);
    memcpy(ext, b, n);
    ext[n] = 0;
    CHECK_INT_EQ(ckpt_open_mem(&f, ext, n + 1, err, sizeof err), CKPT_EFORMAT);
    CHECK(strstr(err, "after the last tensor") != NULL);
    free(ext);
    free(b);
    /* missing file, directory */
    tmp_path(path, sizeof path, "nope.safetensors");
    CHECK_INT_EQ(ckpt_open(&f, path, err, sizeof err), CKPT_EIO);
    CHECK(strstr(err, "nope.safetensors") != NULL);
    CHECK_INT_EQ(ckpt_open(&f, g_tmp, err, sizeof err), CKPT_EIO);
    /* a FIFO with no writer: refused at once (a blocking open would wait forever; the
       alarm turns a hang into a failed run) */
    tmp_path(path, sizeof path, "fifo.safetensors");
    if (mkfifo(path, 0600) == 0) {
        alarm(20);
        CHECK_INT_EQ(ckpt_open(&f, path, err, sizeof err), CKPT_EIO);
        alarm(0);
        CHECK(f == NULL && strstr(err, "not a regular file") != NULL);
        unlink(path);
    }
}

static void test_flipped_data_byte(void)
{
    size_t n, i, h, fails = 0;
    unsigned char *b = small_valid(&n);
    ckpt_file *f = NULL;
    char err[512];
    if (!b) return;
    h = 8 + (size_t)ckpt__le64(b);
    CHECK(h < n);
    for (i = h; i < n; i++) {
        int bit;
        for (bit = 0; bit < 8; bit += 3) {
            b[i] ^= (unsigned char)(1u << bit);
            err[0] = 0;
            if (ckpt_open_mem(&f, b, n, err, sizeof err) != CKPT_EFORMAT || f ||
                strncmp(err, "checksum mismatch: file corrupted", 33) != 0)
                fails++;
            b[i] ^= (unsigned char)(1u << bit);
        }
    }
    CHECK_INT_EQ(fails, 0);
    CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_OK);
    ckpt_close(f);
    free(b);
}

/* Issue 37: the header is checksummed too (format 2). Two same-sized tensors "wa" and
   "wb"; each edit keeps the header's length and leaves the data section (and its CRC)
   as it was, so only the header checksum can catch it: a renamed tensor, an edited
   metadata value, the two tensors' offsets swapped, a dtype changed to one of the same
   size. With attnkit.hcrc32 blanked out (a format-1 file) the same edits pass, which
   is what ckpt_format = 1 tells a caller. */
static unsigned char *two_same_sized(size_t *n)
{
    static const float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {-1, -2, -3, -4, -5, -6};
    ckpt_entry e[2];
    const char *k[1] = {"step"}, *v[1] = {"3"};
    void *mem = NULL;
    char err[256];
    memset(e, 0, sizeof e);
    e[0].name = "wa";
    e[0].dtype = CKPT_F32;
    e[0].ndim = 1;
    e[0].shape[0] = 6;
    e[0].data = a;
    e[1].name = "wb";
    e[1].dtype = CKPT_F32;
    e[1].ndim = 1;
    e[1].shape[0] = 6;
    e[1].data = b;
    *n = 0;
    CHECK_INT_EQ(ckpt_write_mem(&mem, n, e, 2, k, v, 1, err, sizeof err), CKPT_OK);
    return (unsigned char *)mem;
}

/* replace the first `from` in the header (same length) */
static int hdr_edit(unsigned char *b, size_t n, const char *from, const char *to)
{
    size_t h = 8 + (size_t)ckpt__le64(b), lf = strlen(from), i;
    if (lf != strlen(to) || h > n) return 0;
    for (i = 8; i + lf <= h; i++)
        if (memcmp(b + i, from, lf) == 0) {
            memcpy(b + i, to, lf);
            return 1;
        }
    return 0;
}

/* swap the strings x and y (x before y) in the header: the length is unchanged */
static int hdr_swap(unsigned char *b, size_t n, const char *x, const char *y)
{
    size_t h = 8 + (size_t)ckpt__le64(b), lx = strlen(x), ly = strlen(y), i, px = 0, py = 0;
    unsigned char *tmp;
    for (i = 8; i + lx <= h && !px; i++) if (memcmp(b + i, x, lx) == 0) px = i;
    for (i = px + lx; px && i + ly <= h && !py; i++) if (memcmp(b + i, y, ly) == 0) py = i;
    if (!px || !py || h > n) return 0;
    tmp = (unsigned char *)malloc(h);
    if (!tmp) return 0;
    memcpy(tmp, b, px);
    memcpy(tmp + px, y, ly);
    memcpy(tmp + px + ly, b + px + lx, py - px - lx);
    memcpy(tmp + py - lx + ly, x, lx);
    memcpy(tmp + py + ly, b + py + ly, h - py - ly);
    memcpy(b, tmp, h);
    free(tmp);
    return 1;
}

static int blank_hcrc(unsigned char *b, size_t n)
{
    size_t h = 8 + (size_t)ckpt__le64(b), i;
    const char *key = ",\"attnkit.hcrc32\":\"";
    size_t lk = strlen(key);
    for (i = 8; i + lk + 9 <= h && i + lk + 9 <= n; i++)
        if (memcmp(b + i, key, lk) == 0) {
            memset(b + i, ' ', lk + 9);
            return 1;
        }
    return 0;
}

static void test_header_tampering(void)
{
    static const char *what[4] = {"renamed tensor", "edited metadata", "swapped offsets", "changed dtype"};
    int c, v1;
    char err[512];
    ckpt_file *f = NULL;
    size_t n;
    unsigned char *ref = two_same_sized(&n);
    if (!ref) return;
    CHECK_INT_EQ(ckpt_open_mem(&f, ref, n, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(ckpt_format(f), 2);
    ckpt_close(f);
    for (v1 = 0; v1 < 2; v1++)
        for (c = 0; c < 4; c++) {
            unsigned char *b = (unsigned char *)malloc(n);
            int edited = 0, rc;
            float got[6];
            int64_t sh[1] = {6};
            memcpy(b, ref, n);
            if (v1) CHECK(blank_hcrc(b, n));
            switch (c) {
            case 0: edited = hdr_edit(b, n, "\"wa\":", "\"wz\":"); break;
            case 1: edited = hdr_edit(b, n, "\"step\":\"3\"", "\"step\":\"7\""); break;
            case 2: edited = hdr_swap(b, n, "[0,24]", "[24,48]"); break;
            case 3: edited = hdr_edit(b, n, "\"F32\"", "\"I32\""); break;
            }
            CHECK(edited);
            err[0] = 0;
            f = NULL;
            rc = ckpt_open_mem(&f, b, n, err, sizeof err);
            if (!v1) {
                if (rc != CKPT_EFORMAT || f || !strstr(err, "header checksum mismatch")) {
                    CHECK(rc == CKPT_EFORMAT && !f && strstr(err, "header checksum mismatch"));
                    fprintf(stderr, "    %s: rc %d '%s'\n", what[c], rc, err);
                }
            } else {
                /* format 1 (no header checksum): the edit goes through, and says so */
                CHECK_INT_EQ(rc, CKPT_OK);
                CHECK_INT_EQ(ckpt_format(f), 1);
                if (c == 2 && f) { /* the swap is real: "wa" now reads b's bytes */
                    CHECK_INT_EQ(ckpt_read_into(f, "wa", CKPT_F32, 1, sh, got, err, sizeof err), CKPT_OK);
                    CHECK(got[0] == -1.0f);
                }
            }
            ckpt_close(f);
            free(b);
        }
    /* a header checksum without the data checksum is an edited header */
    {
        unsigned char *b = (unsigned char *)malloc(n);
        memcpy(b, ref, n);
        CHECK(hdr_edit(b, n, "\"attnkit.crc32\"", "\"attnkit.crc3x\""));
        CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_EFORMAT);
        CHECK(strstr(err, "crc32") != NULL);
        free(b);
    }
    /* a foreign file (neither checksum) is format 0 */
    {
        static const char *js = "{\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}";
        size_t m;
        unsigned char *raw = make_raw(js, "ab", 2, &m);
        CHECK_INT_EQ(ckpt_open_mem(&f, raw, m, err, sizeof err), CKPT_OK);
        CHECK_INT_EQ(ckpt_format(f), 0);
        ckpt_close(f);
        free(raw);
    }
    free(ref);
}

static void test_header_length(void)
{
    size_t n;
    unsigned char *b = small_valid(&n);
    ckpt_file *f = NULL;
    char err[512];
    uint64_t big = (uint64_t)n; /* beyond the file by a few bytes */
    int k;
    if (!b) return;
    for (k = 0; k < 8; k++) b[k] = (unsigned char)((big >> (8 * k)) & 0xff);
    CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_EFORMAT);
    CHECK(strstr(err, "exceeds") != NULL);
    for (k = 0; k < 8; k++) b[k] = 0xff;
    CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_EFORMAT);
    CHECK(strstr(err, "limit") != NULL);
    free(b);
}

static void test_bad_json(void)
{
    static const unsigned char four[4] = {0, 0, 128, 63};
    static const char *const bad[] = {
        "",
        "   ",
        "{",
        "[]",
        "\"x\"",
        "{\"a\":}",
        "{\"a\" {}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":F32,\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}",
        "{\"a\":[1]}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":{\"k\":1}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":{\"k\":{\"x\":\"y\"}}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":[\"k\"]}",
        "{\"a\x01\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\u12\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\ud834\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\udd1e\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\\u0000\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\xc3\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\xed\xa0\x80\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}\"b\":{}}",
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":{\"k\":\"unterminated}}",
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) expect_refused(bad[i], four, 4, CKPT_EFORMAT, NULL);
    /* messages that name the problem */
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", four, 4, CKPT_EFORMAT,
                   "trailing");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[[1]],\"data_offsets\":[0,4]}}", four, 4, CKPT_EFORMAT,
                   "expected a non-negative integer");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":{\"k\":{}}}", four,
                   4, CKPT_EFORMAT, "must be strings");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":1}}", four, 4, CKPT_EFORMAT,
                   "unknown key 'extra'");
    expect_refused("{\"a\\u0000\":{}}", four, 4, CKPT_EFORMAT, "NUL");
    expect_refused("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", four, 4, CKPT_EFORMAT, "missing 'dtype'");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", four, 4, CKPT_EFORMAT, "missing 'shape'");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", four, 4, CKPT_EFORMAT, "missing 'data_offsets'");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", four, 4,
                   CKPT_EFORMAT, "duplicate key 'dtype'");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", four, 4, CKPT_EFORMAT,
                   "more than 4 dimensions");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"__metadata__\":{\"attnkit.crc32\":\"xyz\"}}",
                   four, 4, CKPT_EFORMAT, "8 hex digits");
}

static void test_accepted_edge_cases(void)
{
    static const unsigned char four[4] = {0, 0, 128, 63}; /* 1.0f */
    size_t n;
    unsigned char *b;
    ckpt_file *f = NULL;
    ckpt_entry e;
    char err[512];
    /* whitespace around tokens, escapes in the name, metadata without CRC, no padding */
    b = make_raw(" \t\r\n{ \"__metadata__\" : { \"k\\u00e9\" : \"\\ud834\\udd1e\\/\" } ,\n"
                 " \"a\\u00e9\\\"b\" : { \"data_offsets\" : [ 0 , 4 ] , \"shape\" : [ ] , \"dtype\" : \"F32\" } }  \n",
                 four, 4, &n);
    CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_OK);
    if (f) {
        CHECK_INT_EQ(ckpt_find(f, "a\xc3\xa9\"b", &e), CKPT_OK);
        CHECK_INT_EQ(e.ndim, 0);
        CHECK(e.data && *(const float *)e.data == 1.0f);
        CHECK(ckpt_meta(f, "k\xc3\xa9") && strcmp(ckpt_meta(f, "k\xc3\xa9"), "\xf0\x9d\x84\x9e/") == 0);
    }
    ckpt_close(f);
    free(b);
    /* an empty header object and no data */
    b = make_raw("{}", NULL, 0, &n);
    CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(ckpt_count(f), 0);
    ckpt_close(f);
    free(b);
    /* zero-size tensors anywhere, empty tensor-object fields in any order */
    b = make_raw("{\"z\":{\"dtype\":\"I64\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
                 "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                 "\"y\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}",
                 four, 4, &n);
    CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(ckpt_count(f), 3);
    ckpt_close(f);
    free(b);
}

static void test_offsets_and_sizes(void)
{
    unsigned char d[16];
    memset(d, 0, sizeof d);
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                   d, 8, CKPT_EFORMAT, "duplicate tensor name 'a'");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   d, 12, CKPT_EFORMAT, "overlap");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                   d, 12, CKPT_EFORMAT, "holes");
    expect_refused("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", d, 8, CKPT_EFORMAT, "holes");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 4, CKPT_EFORMAT,
                   "outside the data section");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[18446744073709551615,4]}}", d, 4,
                   CKPT_EFORMAT, "too large");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", d, 8, CKPT_EFORMAT,
                   "end before they begin");
    expect_refused("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", d, 4, CKPT_EFORMAT,
                   "unsupported dtype 'BF16'");
    expect_refused("{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", d, 4, CKPT_EFORMAT, "'F16'");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d, 8, CKPT_EFORMAT,
                   "hold 8 bytes but F32 (3) needs 12");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", d, 8,
                   CKPT_EFORMAT, "overflows");
    expect_refused("{\"a\":{\"dtype\":\"F64\",\"shape\":[9223372036854775807],\"data_offsets\":[0,8]}}", d, 8,
                   CKPT_EFORMAT, "overflows");
    expect_refused("{\"a\":{\"dtype\":\"U8\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}", d, 8,
                   CKPT_EFORMAT, "too large");
}

static void test_unaligned_foreign_file(void)
{
    /* U8 at [0,1), F32 at [1,5), F64 at [5,13): valid safetensors, misaligned offsets */
    unsigned char d[13];
    float x = 2.5f, y;
    double z = -7.25, w;
    size_t n;
    unsigned char *b;
    ckpt_file *f = NULL;
    ckpt_entry e;
    char err[256];
    int64_t s1[1] = {1};
    d[0] = 9;
    memcpy(d + 1, &x, 4);
    memcpy(d + 5, &z, 8);
    b = make_raw("{\"u\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                 "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[1,5]},"
                 "\"g\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[5,13]}}",
                 d, 13, &n);
    CHECK_INT_EQ(ckpt_open_mem(&f, b, n, err, sizeof err), CKPT_OK);
    if (f) {
        CHECK_INT_EQ(ckpt_find(f, "f", &e), CKPT_OK);
        CHECK_INT_EQ((uintptr_t)e.data % 4, 0);
        CHECK(*(const float *)e.data == 2.5f);
        CHECK_INT_EQ(ckpt_find(f, "g", &e), CKPT_OK);
        CHECK_INT_EQ((uintptr_t)e.data % 8, 0);
        CHECK(*(const double *)e.data == -7.25);
        CHECK_INT_EQ(ckpt_read_into(f, "f", CKPT_F32, 1, s1, &y, err, sizeof err), CKPT_OK);
        CHECK(y == 2.5f);
        CHECK_INT_EQ(ckpt_read_into(f, "g", CKPT_F64, 1, s1, &w, err, sizeof err), CKPT_OK);
        CHECK(w == -7.25);
        CHECK_INT_EQ(ckpt_find(f, "u", &e), CKPT_OK);
        CHECK(*(const unsigned char *)e.data == 9);
    }
    ckpt_close(f);
    free(b);
}

static void test_read_into_mismatch(void)
{
    static float w[384 * 128];
    ckpt_entry e[2];
    int64_t sc = 7;
    void *mem = NULL;
    size_t len;
    ckpt_file *f = NULL;
    char err[512];
    int64_t want[2] = {384, 256}, ok[2] = {384, 128}, flat[1] = {384 * 128};
    memset(e, 0, sizeof e);
    e[0].name = "blocks.0.attn.qkv.weight";
    e[0].dtype = CKPT_F32;
    e[0].ndim = 2;
    e[0].shape[0] = 384;
    e[0].shape[1] = 128;
    e[0].data = w;
    e[1].name = "step";
    e[1].dtype = CKPT_I64;
    e[1].ndim = 0;
    e[1].data = &sc;
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 2, NULL, NULL, 0, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(ckpt_open_mem(&f, mem, len, err, sizeof err), CKPT_OK);
    free(mem);
    if (!f) return;
    CHECK_INT_EQ(ckpt_read_into(f, "blocks.0.attn.qkv.weight", CKPT_F32, 2, want, w, err, sizeof err), CKPT_EMISMATCH);
    CHECK(strcmp(err, "blocks.0.attn.qkv.weight: shape (384,128) in file, (384,256) expected") == 0);
    CHECK_INT_EQ(ckpt_read_into(f, "blocks.0.attn.qkv.weight", CKPT_F32, 1, flat, w, err, sizeof err), CKPT_EMISMATCH);
    CHECK(strcmp(err, "blocks.0.attn.qkv.weight: shape (384,128) in file, (49152) expected") == 0);
    CHECK_INT_EQ(ckpt_read_into(f, "blocks.0.attn.qkv.weight", CKPT_F64, 2, ok, w, err, sizeof err), CKPT_EMISMATCH);
    CHECK(strcmp(err, "blocks.0.attn.qkv.weight: dtype F32 in file, F64 expected") == 0);
    CHECK_INT_EQ(ckpt_read_into(f, "step", CKPT_I64, 1, flat, &sc, err, sizeof err), CKPT_EMISMATCH);
    CHECK(strcmp(err, "step: shape () in file, (49152) expected") == 0);
    CHECK_INT_EQ(ckpt_read_into(f, "blocks.1.attn.qkv.weight", CKPT_F32, 2, ok, w, err, sizeof err), CKPT_ENOTFOUND);
    CHECK(strstr(err, "blocks.1.attn.qkv.weight") && strstr(err, "not found"));
    CHECK_INT_EQ(ckpt_read_into(f, "step", 9, 0, NULL, &sc, err, sizeof err), CKPT_EINVAL);
    CHECK_INT_EQ(ckpt_read_into(f, "step", CKPT_I64, 5, ok, &sc, err, sizeof err), CKPT_EINVAL);
    CHECK_INT_EQ(ckpt_read_into(f, "blocks.0.attn.qkv.weight", CKPT_F32, 2, ok, NULL, err, sizeof err), CKPT_EINVAL);
    sc = 0;
    CHECK_INT_EQ(ckpt_read_into(f, "step", CKPT_I64, 0, NULL, &sc, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(sc, 7);
    ckpt_close(f);
}

static void test_writer_refuses(void)
{
    float x[2] = {1, 2};
    ckpt_entry e[2];
    char err[512], longname[300];
    const char *k2[2] = {"a", "a"}, *v2[2] = {"1", "2"};
    const char *kc[1] = {"attnkit.crc32"}, *vc[1] = {"00000000"};
    const char *ku[1] = {"bad\xff"}, *kn[1] = {NULL};
    void *mem = NULL;
    size_t len;
    int i;
    struct {
        const char *name;
        int dtype, ndim;
        int64_t s0, s1;
        const char *want;
    } cases[] = {
        {"", CKPT_F32, 1, 2, 0, "name"},
        {"__metadata__", CKPT_F32, 1, 2, 0, "__metadata__"},
        {"caf\xc3\xa9", CKPT_F32, 1, 2, 0, "printable ASCII"},
        {"a\nb", CKPT_F32, 1, 2, 0, "printable ASCII"},
        {"a", 7, 1, 2, 0, "unknown dtype"},
        {"a", CKPT_F32, 5, 2, 0, "ndim"},
        {"a", CKPT_F32, -1, 2, 0, "ndim"},
        {"a", CKPT_F32, 1, -2, 0, "invalid shape"},
        {"a", CKPT_F32, 2, (int64_t)1 << 40, (int64_t)1 << 40, "invalid shape"},
    };
    memset(e, 0, sizeof e);
    for (i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
        e[0].name = cases[i].name;
        e[0].dtype = cases[i].dtype;
        e[0].ndim = cases[i].ndim;
        e[0].shape[0] = cases[i].s0;
        e[0].shape[1] = cases[i].s1;
        e[0].data = x;
        err[0] = 0;
        CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 1, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
        CHECK(mem == NULL);
        if (!strstr(err, cases[i].want)) {
            CHECK(strstr(err, cases[i].want) != NULL);
            fprintf(stderr, "    case %d: '%s'\n", i, err);
        }
    }
    memset(longname, 'n', 256);
    longname[256] = 0;
    e[0].name = longname;
    e[0].dtype = CKPT_F32;
    e[0].ndim = 1;
    e[0].shape[0] = 2;
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 1, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
    longname[255] = 0; /* 255 bytes is allowed */
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 1, NULL, NULL, 0, err, sizeof err), CKPT_OK);
    free(mem);
    mem = NULL;
    e[0].name = NULL;
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 1, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
    e[0].name = "same";
    e[1] = e[0];
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 2, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
    CHECK(strstr(err, "duplicate tensor name 'same'") != NULL);
    e[1].name = "other";
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 2, k2, v2, 2, err, sizeof err), CKPT_EINVAL);
    CHECK(strstr(err, "duplicate metadata key 'a'") != NULL);
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 2, kc, vc, 1, err, sizeof err), CKPT_EINVAL);
    CHECK(strstr(err, "reserved") != NULL);
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 2, ku, v2, 1, err, sizeof err), CKPT_EINVAL);
    CHECK(strstr(err, "UTF-8") != NULL);
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 2, kn, v2, 1, err, sizeof err), CKPT_EINVAL);
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, 2, NULL, NULL, 1, err, sizeof err), CKPT_EINVAL);
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, NULL, 2, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
    CHECK_INT_EQ(ckpt_write_mem(&mem, &len, e, -1, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
    CHECK_INT_EQ(ckpt_write_mem(NULL, &len, e, 2, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
    CHECK_INT_EQ(ckpt_write(NULL, e, 2, NULL, NULL, 0, err, sizeof err), CKPT_EINVAL);
    CHECK_INT_EQ(ckpt_write("", e, 2, NULL, NULL, 0, NULL, 0), CKPT_EINVAL); /* err may be NULL */
    CHECK(mem == NULL);
    /* reader API misuse */
    {
        ckpt_file *f = NULL;
        ckpt_entry en;
        CHECK_INT_EQ(ckpt_open(NULL, "x", err, sizeof err), CKPT_EINVAL);
        CHECK_INT_EQ(ckpt_open(&f, NULL, err, sizeof err), CKPT_EINVAL);
        CHECK_INT_EQ(ckpt_open_mem(&f, NULL, 5, err, sizeof err), CKPT_EINVAL);
        CHECK_INT_EQ(ckpt_count(NULL), 0);
        CHECK_INT_EQ(ckpt_entry_at(NULL, 0, &en), CKPT_EINVAL);
        CHECK_INT_EQ(ckpt_find(NULL, "a", &en), CKPT_EINVAL);
        CHECK(ckpt_meta(NULL, "a") == NULL);
        ckpt_close(NULL);
    }
    CHECK(strcmp(ckpt_strerror(CKPT_EMISMATCH), "dtype or shape mismatch") == 0);
    CHECK(strcmp(ckpt_strerror(12345), "unknown error") == 0);
    CHECK(ckpt_dtype_name(99) == NULL);
    CHECK_INT_EQ(ckpt_dtype_size(CKPT_I64), 8);
}

/* An independent reader in python3 (json + struct + zlib only) that validates the file
   the way the reference safetensors loader does and prints a summary. */
static const char *g_py =
    "import json, struct, sys, zlib\n"
    "b = open(sys.argv[1], 'rb').read()\n"
    "n = struct.unpack('<Q', b[:8])[0]\n"
    "assert n % 8 == 0 and 8 + n <= len(b)\n"
    "h = json.loads(b[8:8 + n].decode('utf-8'))\n"
    "data = b[8 + n:]\n"
    "meta = h.pop('__metadata__', {})\n"
    "assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items())\n"
    "assert meta['format'] == 'pt'\n"
    "assert int(meta['attnkit.crc32'], 16) == zlib.crc32(data)\n"
    "size = {'F32': 4, 'F64': 8, 'I64': 8, 'I32': 4, 'U8': 1}\n"
    "fmt = {'F32': 'f', 'F64': 'd', 'I64': 'q', 'I32': 'i', 'U8': 'B'}\n"
    "pos = 0\n"
    "for name, t in sorted(h.items(), key=lambda kv: tuple(kv[1]['data_offsets'])):\n"
    "    s, e = t['data_offsets']\n"
    "    assert s == pos, (name, s, pos)\n"
    "    numel = 1\n"
    "    for d in t['shape']: numel *= d\n"
    "    assert e - s == numel * size[t['dtype']]\n"
    "    assert s % size[t['dtype']] == 0\n"
    "    pos = e\n"
    "assert pos == len(data)\n"
    "print('meta', meta['step'], meta['caf\\u00e9 \\u2713'])\n"
    "for name, t in h.items():\n"
    "    s, e = t['data_offsets']\n"
    "    v = struct.unpack('<%d%s' % ((e - s) // size[t['dtype']], fmt[t['dtype']]), data[s:e])\n"
    "    f = (lambda x: '%.17g' % x) if t['dtype'] in ('F32', 'F64') else (lambda x: '%d' % x)\n"
    "    print(name, t['dtype'], ','.join(str(d) for d in t['shape']), f(v[0]) if v else '-', f(v[-1]) if v else '-')\n";

static void fmt_value(char *out, size_t cap, const ckpt_entry *e, size_t idx)
{
    switch (e->dtype) {
    case CKPT_F32: snprintf(out, cap, "%.17g", (double)((const float *)e->data)[idx]); break;
    case CKPT_F64: snprintf(out, cap, "%.17g", ((const double *)e->data)[idx]); break;
    case CKPT_I64: snprintf(out, cap, "%lld", (long long)((const int64_t *)e->data)[idx]); break;
    case CKPT_I32: snprintf(out, cap, "%d", (int)((const int32_t *)e->data)[idx]); break;
    default: snprintf(out, cap, "%d", (int)((const unsigned char *)e->data)[idx]); break;
    }
}

static void test_python_reader(void)
{
    char path[300], script[300], cmd[800], err[512], line[1024];
    FILE *p;
    int lines = 0, bad = 0, saw_meta = 0;
    if (system("command -v python3 > /dev/null 2>&1") != 0) TEST_SKIP("python3 not found");
    make_entries();
    tmp_path(path, sizeof path, "py.safetensors");
    tmp_path(script, sizeof script, "read_st.py");
    CHECK(write_file(script, g_py, strlen(g_py)));
    /* the python reader needs names it can print on one line: skip the quoted one */
    CHECK_INT_EQ(ckpt_write(path, g_e, NT - 1, g_mk, g_mv, 4, err, sizeof err), CKPT_OK);
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' 2>&1", script, path);
    p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        if (strncmp(line, "meta ", 5) == 0) {
            char want[128];
            snprintf(want, sizeof want, "meta %s %s", g_mv[0], g_mv[2]);
            if (strcmp(line, want) != 0) {
                bad++;
                fprintf(stderr, "    python: '%s' vs '%s'\n", line, want);
            }
            saw_meta = 1;
            continue;
        }
        if (lines < NT - 1) {
            const ckpt_entry *e = &g_e[lines];
            char want[512], shape[128], v0[64], v1[64];
            size_t numel = entry_bytes(e) / ckpt_dtype_size(e->dtype), k = 0;
            int d;
            shape[0] = 0;
            for (d = 0; d < e->ndim; d++) k += (size_t)snprintf(shape + k, sizeof shape - k, d ? ",%lld" : "%lld", (long long)e->shape[d]);
            fmt_value(v0, sizeof v0, e, 0);
            fmt_value(v1, sizeof v1, e, numel - 1);
            snprintf(want, sizeof want, "%s %s %s %s %s", e->name, ckpt_dtype_name(e->dtype), shape, v0, v1);
            if (strcmp(line, want) != 0) {
                bad++;
                fprintf(stderr, "    python: '%s'\n    want:   '%s'\n", line, want);
            }
        } else {
            fprintf(stderr, "    python: '%s'\n", line);
            bad++;
        }
        lines++;
    }
    CHECK_INT_EQ(pclose(p), 0);
    CHECK(saw_meta);
    CHECK_INT_EQ(lines, NT - 1);
    CHECK_INT_EQ(bad, 0);
}

/* The reference implementation, when python3 has the safetensors package (and numpy):
   it loads our file (same Rust validation as safetensors.torch.load_file), and we load
   a file it wrote. Skipped where the package is absent (it is not a dependency). */
static const char *g_py_ref =
    "import sys\n"
    "import numpy as np\n"
    "from safetensors import safe_open\n"
    "from safetensors.numpy import load_file, save_file\n"
    "t = load_file(sys.argv[1])\n"
    "with safe_open(sys.argv[1], 'np') as f: meta = f.metadata()\n"
    "print(len(t), meta['step'], t['blk.2.f32'].shape, '%.17g' % float(t['blk.2.f32'][1, 4]), int(t['blk.0.i64']))\n"
    "save_file({'a.w': np.arange(6, dtype=np.float32).reshape(2, 3), 'n': np.array(5, dtype=np.int64),\n"
    "           'u': np.arange(3, dtype=np.uint8), 'd': np.array([1.5, 2.5]), 'j': np.array([3, -4], dtype=np.int32)},\n"
    "          sys.argv[2], metadata={'k': 'v'})\n";

static void test_reference_safetensors(void)
{
    char path[300], theirs[300], script[300], cmd[1000], err[512], line[512] = "", want[512];
    FILE *p;
    ckpt_file *f = NULL;
    float a[6];
    int64_t n = 0, s23[2] = {2, 3};
    int32_t j[2] = {0, 0};
    int64_t s2[1] = {2};
    if (system("python3 -c 'import safetensors.numpy, numpy' > /dev/null 2>&1") != 0)
        TEST_SKIP("python3 has no safetensors/numpy package (optional reference check)");
    make_entries();
    tmp_path(path, sizeof path, "ref.safetensors");
    tmp_path(theirs, sizeof theirs, "theirs.safetensors");
    tmp_path(script, sizeof script, "ref.py");
    CHECK(write_file(script, g_py_ref, strlen(g_py_ref)));
    CHECK_INT_EQ(ckpt_write(path, g_e, NT, g_mk, g_mv, 4, err, sizeof err), CKPT_OK);
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '%s' 2>&1", script, path, theirs);
    p = popen(cmd, "r");
    CHECK(p != NULL);
    if (!p) return;
    if (!fgets(line, sizeof line, p)) line[0] = 0;
    while (fgetc(p) != EOF) {
    }
    CHECK_INT_EQ(pclose(p), 0);
    line[strcspn(line, "\n")] = 0;
    snprintf(want, sizeof want, "%d %s (3, 5) %.17g %lld", NT, g_mv[0], (double)g_f32[2][9], (long long)g_i64[0][0]);
    if (strcmp(line, want) != 0) {
        CHECK(strcmp(line, want) == 0);
        fprintf(stderr, "    reference: '%s'\n    want:      '%s'\n", line, want);
    }
    CHECK_INT_EQ(ckpt_open(&f, theirs, err, sizeof err), CKPT_OK);
    if (!f) {
        fprintf(stderr, "    %s\n", err);
        return;
    }
    CHECK_INT_EQ(ckpt_count(f), 5);
    CHECK_INT_EQ(ckpt_read_into(f, "a.w", CKPT_F32, 2, s23, a, err, sizeof err), CKPT_OK);
    CHECK(a[0] == 0.0f && a[5] == 5.0f);
    CHECK_INT_EQ(ckpt_read_into(f, "n", CKPT_I64, 0, NULL, &n, err, sizeof err), CKPT_OK);
    CHECK_INT_EQ(n, 5);
    CHECK_INT_EQ(ckpt_read_into(f, "j", CKPT_I32, 1, s2, j, err, sizeof err), CKPT_OK);
    CHECK(j[0] == 3 && j[1] == -4);
    CHECK(ckpt_meta(f, "k") && strcmp(ckpt_meta(f, "k"), "v") == 0);
    ckpt_close(f);
}

int main(int argc, char **argv)
{
    TEST_INIT(argc, argv);
    snprintf(g_tmp, sizeof g_tmp, "%s/attnkit_ckpt_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_tmp)) {
        perror("mkdtemp");
        return 1;
    }
    TEST_RUN(test_crc32_reference);
    TEST_RUN(test_roundtrip);
    TEST_RUN(test_format_override_and_layout);
    TEST_RUN(test_atomic_write);
    TEST_RUN(test_truncated_every_prefix);
    TEST_RUN(test_flipped_data_byte);
    TEST_RUN(test_header_tampering);
    TEST_RUN(test_header_length);
    TEST_RUN(test_bad_json);
    TEST_RUN(test_accepted_edge_cases);
    TEST_RUN(test_offsets_and_sizes);
    TEST_RUN(test_unaligned_foreign_file);
    TEST_RUN(test_read_into_mismatch);
    TEST_RUN(test_writer_refuses);
    TEST_RUN(test_python_reader);
    TEST_RUN(test_reference_safetensors);
    {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
    }
    return TEST_END();
}
