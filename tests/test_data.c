/* test_data.c - WikiText-2 pipeline (examples/common/data.c): the token-id protocol
   against the reference files of ../shared/data (all ids of both splits), raw/xz
   reading, u16 files, split inventory, batch loaders, malformed/truncated/missing
   files. Cases that need ../shared/data (ATTNKIT_DATA_DIR or $WT2_DIR) skip without it. */
#define _POSIX_C_SOURCE 200809L
/* the examples' code (stb_impl, bpe, data) is linked, built once per configuration (the
   Makefile's TEST_OBJS_test_data) */
#include "../examples/common/data.h"
#include "attnkit_test.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <errno.h>
#include <lzma.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* GPT-2's bytes_to_unicode, written here from its definition (bpe.c keeps its own copy
   private; tests/test_bpe.c checks that one): printable bytes map to themselves, the
   other 68 to 256, 257, ... in byte order. */
static void gpt2_byte_alphabet(uint32_t cp_of_byte[256])
{
    int b, k = 0;
    for (b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        cp_of_byte[b] = printable ? (uint32_t)b : (uint32_t)(256 + k++);
    }
}

static bpe_tokenizer *g_tok; /* GPT-2, NULL when the data directory is absent */
static char g_skip[1200];
static char g_tmp[256];      /* scratch directory */

static void tmp_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", g_tmp, name);
}

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

static void xz_encode(const unsigned char *in, size_t n, bpe_bytes *out)
{
    size_t cap = n + n / 2 + 4096, pos = 0;
    out->n = 0;
    bpe_bytes_append(out, in, 0);
    out->data = (unsigned char *)realloc(out->data, cap);
    out->cap = cap;
    CHECK_INT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, in, n, out->data, &pos, cap), LZMA_OK);
    out->n = pos;
}

/* ---- protocol against the reference files */

static void check_split(const char *split)
{
    char raw[1200], ref[1200], err[1024];
    unsigned char *text = NULL;
    size_t len = 0, rows = 0, i, nref = 0;
    uint16_t *refids = NULL;
    bpe_ids ids = {0};
    size_t first_diff;
    if (!g_tok) TEST_SKIP(g_skip);
    snprintf(raw, sizeof raw, "%s/wiki.%s.raw.xz", bpe_default_data_dir(), split);
    snprintf(ref, sizeof ref, "%s/wt2.%s.gpt2.u16", bpe_default_data_dir(), split);
    if (wt2_read_text(raw, (size_t)1 << 30, &text, &len, err, sizeof err) != BPE_OK) TEST_SKIP(err);
    CHECK_INT_EQ(wt2_load_u16(ref, 50257, &refids, &nref, err, sizeof err), BPE_OK);
    CHECK_INT_EQ(wt2_tokenize(g_tok, text, len, &ids, &rows), BPE_OK);
    /* every id of the split, not a prefix */
    CHECK_INT_EQ(ids.n, nref);
    for (first_diff = 0; first_diff < ids.n && first_diff < nref; first_diff++)
        if (ids.data[first_diff] != refids[first_diff]) break;
    CHECK_INT_EQ(first_diff, nref);
    if (first_diff < nref && first_diff < ids.n)
        fprintf(stderr, "    %s: first difference at id %zu: %d vs %d\n", split, first_diff,
                (int)ids.data[first_diff], (int)refids[first_diff]);
    if (!strcmp(split, "valid")) {
        CHECK_INT_EQ(len, 1146846);
        CHECK_INT_EQ(rows, 2461);
        CHECK_INT_EQ(nref, 249750);
    } else {
        static const int head[12] = {796, 5199, 347, 2852, 353, 796, 220, 198, 50256, 5199, 347, 2852};
        CHECK_INT_EQ(len, 1290590);
        CHECK_INT_EQ(rows, 2891);
        CHECK_INT_EQ(nref, 286178);
        for (i = 0; i < 12 && i < ids.n; i++) CHECK_INT_EQ(ids.data[i], head[i]);
    }
    /* decode(ids without EOT) == the non-blank rows */
    {
        bpe_bytes back = {0}, want = {0};
        size_t p = 0;
        for (i = 0; i < ids.n; i++)
            if (ids.data[i] != WT2_EOT) bpe_decode(g_tok, ids.data + i, 1, &back);
        while (p < len) {
            const unsigned char *nl = (const unsigned char *)memchr(text + p, '\n', len - p);
            size_t e = nl ? (size_t)(nl - text) + 1 : len;
            if (!wt2_row_is_blank(text + p, e - p)) bpe_bytes_append(&want, text + p, e - p);
            p = e;
        }
        CHECK(back.n == want.n && memcmp(back.data, want.data, want.n) == 0);
        bpe_bytes_free(&back);
        bpe_bytes_free(&want);
    }
    free(text);
    free(refids);
    bpe_ids_free(&ids);
}

static void test_reference_valid(void) { check_split("valid"); }
static void test_reference_test(void) { check_split("test"); }

static void test_protocol_rows(void)
{
    /* blank rows (str.isspace): " \n", "\n", "\t \n", "\x1c\n", NBSP, ideographic space;
       kept: ZWSP (not a space), invalid UTF-8, a last row without '\n' */
    static const char text[] = " = A = \n \n\n Hello world\n\t \n\x1c\n\xc2\xa0\n\xe3\x80\x80\n"
                               "\xe2\x80\x8b\n\xff\n last";
    static const char *kept[] = {" = A = \n", " Hello world\n", "\xe2\x80\x8b\n", "\xff\n", " last"};
    const char *extra[] = {"<|endoftext|>"};
    bpe_bytes js = {0};
    bpe_tokenizer *t = NULL;
    bpe_ids ids = {0};
    bpe_bytes row = {0};
    size_t rows = 0, i, k = 0;
    char err[256];
    int b, n;
    /* a byte-level vocabulary with EOT at id 256 */
    {
        uint32_t cp[256];
        char item[64];
        gpt2_byte_alphabet(cp);
        bpe_bytes_append(&js, "{", 1);
        for (b = 0; b < 256; b++) {
            n = snprintf(item, sizeof item, "%s\"\\u%04x\": %d", b ? ", " : "", (unsigned)cp[b], b);
            bpe_bytes_append(&js, item, (size_t)n);
        }
        n = snprintf(item, sizeof item, ", \"%s\": 256}", extra[0]);
        bpe_bytes_append(&js, item, (size_t)n);
    }
    CHECK_INT_EQ(bpe_load_mem(&t, (const char *)js.data, js.n, "", 0, err, sizeof err), BPE_OK);
    bpe_bytes_free(&js);
    if (!t) return;
    CHECK_INT_EQ(bpe_eot(t), 256);
    CHECK_INT_EQ(wt2_tokenize(t, (const unsigned char *)text, sizeof text - 1, &ids, &rows), BPE_OK);
    CHECK_INT_EQ(rows, 5);
    for (i = 0; i < ids.n; i++) {
        if (ids.data[i] == 256) {
            CHECK(k < 5 && row.n == strlen(kept[k]) && memcmp(row.data, kept[k], row.n) == 0);
            k++;
            row.n = 0;
        } else {
            bpe_decode(t, ids.data + i, 1, &row);
        }
    }
    CHECK_INT_EQ(k, 5);
    CHECK_INT_EQ(row.n, 0);
    CHECK(wt2_row_is_blank((const unsigned char *)"", 0));
    CHECK(wt2_row_is_blank((const unsigned char *)"\xc2\x85\r\n", 4));
    CHECK(!wt2_row_is_blank((const unsigned char *)"\xef\xbb\xbf\n", 4)); /* BOM is not space */
    CHECK(!wt2_row_is_blank((const unsigned char *)"\xc2", 1));
    CHECK(!wt2_row_is_blank((const unsigned char *)"\xe0\x80\xa0", 3)); /* overlong space */
    /* a vocabulary without <|endoftext|> cannot run the protocol */
    {
        bpe_tokenizer *noeot = NULL;
        bpe_ids x = {0};
        uint32_t cp[256];
        char item[64];
        gpt2_byte_alphabet(cp);
        bpe_bytes_append(&js, "{", 1);
        for (b = 0; b < 256; b++) {
            n = snprintf(item, sizeof item, "%s\"\\u%04x\": %d", b ? ", " : "", (unsigned)cp[b], b);
            bpe_bytes_append(&js, item, (size_t)n);
        }
        bpe_bytes_append(&js, "}", 1);
        CHECK_INT_EQ(bpe_load_mem(&noeot, (const char *)js.data, js.n, "", 0, err, sizeof err), BPE_OK);
        CHECK_INT_EQ(wt2_tokenize(noeot, (const unsigned char *)"a\n", 2, &x, NULL), BPE_EFORMAT);
        CHECK_INT_EQ(wt2_tokenize(NULL, (const unsigned char *)"a\n", 2, &x, NULL), BPE_EINVAL);
        bpe_free(noeot);
        bpe_bytes_free(&js);
        bpe_ids_free(&x);
    }
    bpe_ids_free(&ids);
    bpe_bytes_free(&row);
    bpe_free(t);
}

static void test_xz_and_text_files(void)
{
    static const char text[] = " = Title = \n \n Some text .\n";
    bpe_bytes xz = {0};
    unsigned char *out = NULL;
    size_t olen = 0, i;
    char err[1024], p[512];
    xz_encode((const unsigned char *)text, sizeof text - 1, &xz);
    CHECK_INT_EQ(wt2_xz_decode(xz.data, xz.n, 1 << 20, &out, &olen, err, sizeof err), BPE_OK);
    CHECK(olen == sizeof text - 1 && out && memcmp(out, text, olen) == 0 && out[olen] == 0);
    free(out);
    /* limit */
    CHECK_INT_EQ(wt2_xz_decode(xz.data, xz.n, 10, &out, &olen, err, sizeof err), BPE_ERANGE);
    CHECK(out == NULL && strstr(err, "more than 10 bytes"));
    /* every truncation fails cleanly */
    for (i = 0; i < xz.n; i++) {
        int rc = wt2_xz_decode(xz.data, i, 1 << 20, &out, &olen, err, sizeof err);
        CHECK(rc == BPE_EFORMAT && out == NULL && err[0] == 'x');
    }
    /* corrupted bytes: never a crash; a corrupted payload is caught by the CRC */
    for (i = 0; i < xz.n; i++) {
        int rc;
        xz.data[i] ^= 0x55;
        rc = wt2_xz_decode(xz.data, xz.n, 1 << 20, &out, &olen, err, sizeof err);
        CHECK(rc == BPE_EFORMAT || (rc == BPE_OK && olen == sizeof text - 1));
        if (rc == BPE_OK) CHECK(memcmp(out, text, olen) == 0);
        free(out);
        out = NULL;
        xz.data[i] ^= 0x55;
    }
    CHECK_INT_EQ(wt2_xz_decode((const unsigned char *)"hello", 5, 100, &out, &olen, err, sizeof err), BPE_EFORMAT);
    CHECK_INT_EQ(wt2_xz_decode(NULL, 5, 100, &out, &olen, err, sizeof err), BPE_EINVAL);
    /* wt2_read_text: plain, xz (detected by magic, not by name), missing, corrupt */
    tmp_path(p, sizeof p, "plain.raw");
    CHECK(write_file(p, text, sizeof text - 1));
    CHECK_INT_EQ(wt2_read_text(p, 1 << 20, &out, &olen, err, sizeof err), BPE_OK);
    CHECK(olen == sizeof text - 1 && memcmp(out, text, olen) == 0);
    free(out);
    tmp_path(p, sizeof p, "compressed.bin");
    CHECK(write_file(p, xz.data, xz.n));
    CHECK_INT_EQ(wt2_read_text(p, 1 << 20, &out, &olen, err, sizeof err), BPE_OK);
    CHECK(olen == sizeof text - 1 && memcmp(out, text, olen) == 0);
    free(out);
    tmp_path(p, sizeof p, "truncated.xz");
    CHECK(write_file(p, xz.data, xz.n - 5));
    CHECK_INT_EQ(wt2_read_text(p, 1 << 20, &out, &olen, err, sizeof err), BPE_EFORMAT);
    CHECK(strstr(err, "truncated.xz: xz:") != NULL);
    tmp_path(p, sizeof p, "missing.raw");
    CHECK_INT_EQ(wt2_read_text(p, 1 << 20, &out, &olen, err, sizeof err), BPE_EIO);
    CHECK(strstr(err, "missing.raw") != NULL && out == NULL);
    bpe_bytes_free(&xz);
}

static void test_u16_files(void)
{
    int32_t ids[5] = {0, 1, 50256, 65535, 300};
    int32_t bad[2] = {1, 65536};
    uint16_t *back = NULL;
    size_t n = 0, i;
    char err[1024], p[512];
    tmp_path(p, sizeof p, "t.u16");
    CHECK_INT_EQ(wt2_write_u16(p, ids, 5, err, sizeof err), BPE_OK);
    CHECK_INT_EQ(wt2_load_u16(p, 0, &back, &n, err, sizeof err), BPE_OK);
    CHECK_INT_EQ(n, 5);
    for (i = 0; i < n && back; i++) CHECK_INT_EQ(back[i], ids[i]);
    free(back);
    {   /* little-endian on disk */
        unsigned char *raw = NULL;
        size_t l = 0;
        CHECK_INT_EQ(bpe_read_file(p, 100, &raw, &l, err, sizeof err), BPE_OK);
        CHECK(l == 10 && raw[4] == 0x50 && raw[5] == 0xC4 && raw[6] == 0xFF && raw[7] == 0xFF);
        free(raw);
    }
    CHECK_INT_EQ(wt2_load_u16(p, 50257, &back, &n, err, sizeof err), BPE_EFORMAT); /* 65535 >= vocab */
    CHECK(back == NULL && strstr(err, "65535 at byte offset 6 (token 3)"));
    {   /* the same check on ids in memory, against a model's vocabulary */
        uint16_t v[4] = {0, 99, 100, 5};
        CHECK_INT_EQ(wt2_check_ids(v, 2, 100, "a.u16", err, sizeof err), BPE_OK);
        CHECK_INT_EQ(wt2_check_ids(v, 4, 100, "a.u16", err, sizeof err), BPE_ERANGE);
        CHECK(strstr(err, "a.u16: token id 100 at byte offset 4 (token 2)") != NULL);
        CHECK_INT_EQ(wt2_check_ids(v, 4, 101, NULL, err, sizeof err), BPE_OK);
        CHECK_INT_EQ(wt2_check_ids(v, 4, 0, NULL, err, sizeof err), BPE_EINVAL);
        CHECK_INT_EQ(wt2_check_ids(NULL, 4, 10, NULL, err, sizeof err), BPE_EINVAL);
    }
    CHECK_INT_EQ(wt2_write_u16(p, bad, 2, err, sizeof err), BPE_ERANGE);
    CHECK_INT_EQ(wt2_load_u16(p, 0, &back, &n, err, sizeof err), BPE_OK); /* old file intact */
    CHECK_INT_EQ(n, 5);
    free(back);
    tmp_path(p, sizeof p, "odd.u16");
    CHECK(write_file(p, "abc", 3));
    CHECK_INT_EQ(wt2_load_u16(p, 0, &back, &n, err, sizeof err), BPE_EFORMAT);
    CHECK(strstr(err, "odd size") != NULL);
    tmp_path(p, sizeof p, "empty.u16");
    CHECK(write_file(p, "", 0));
    CHECK_INT_EQ(wt2_load_u16(p, 0, &back, &n, err, sizeof err), BPE_EFORMAT);
    tmp_path(p, sizeof p, "none.u16");
    CHECK_INT_EQ(wt2_load_u16(p, 0, &back, &n, err, sizeof err), BPE_EIO);
    tmp_path(p, sizeof p, "no/such/dir/x.u16");
    CHECK_INT_EQ(wt2_write_u16(p, ids, 5, err, sizeof err), BPE_EIO);
    CHECK_INT_EQ(wt2_write_u16(NULL, ids, 5, err, sizeof err), BPE_EINVAL);
}

/* Issue 37: a read error is an error, a write error says why. A directory given as a
   token file is refused by name (bpe_read_file); a token file that cannot be written in
   full (a 4 KiB file-size limit, SIGXFSZ ignored) is BPE_EIO with the reason, the file
   at path keeps its old content and no temporary is left. */
static void test_io_errors(void)
{
    enum { N = 6000 };
    static int32_t ids[N];
    int32_t small[3] = {7, 8, 9};
    uint16_t *back = NULL;
    size_t n = 0, i;
    char err[1024], p[512], d[512];
    struct rlimit old, lim;
    void (*prev)(int);
    for (i = 0; i < N; i++) ids[i] = (int32_t)(i % 50000);
    tmp_path(d, sizeof d, "adir.u16");
    CHECK(mkdir(d, 0755) == 0);
    err[0] = 0;
    CHECK_INT_EQ(wt2_load_u16(d, 0, &back, &n, err, sizeof err), BPE_EIO);
    CHECK(back == NULL && strstr(err, "is a directory") != NULL);
    tmp_path(p, sizeof p, "fsize.u16");
    CHECK_INT_EQ(wt2_write_u16(p, small, 3, err, sizeof err), BPE_OK);
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim = old;
    lim.rlim_cur = 4096;
    prev = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    err[0] = 0;
    CHECK_INT_EQ(wt2_write_u16(p, ids, N, err, sizeof err), BPE_EIO);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, prev);
    if (!strstr(err, "File too large")) {
        CHECK(strstr(err, "File too large") != NULL);
        fprintf(stderr, "    message '%s'\n", err);
    }
    CHECK_INT_EQ(wt2_load_u16(p, 0, &back, &n, err, sizeof err), BPE_OK);
    CHECK(n == 3 && back && back[2] == 9);
    free(back);
    {
        char t[600];
        snprintf(t, sizeof t, "%s.tmp", p);
        CHECK(access(t, F_OK) != 0);
    }
}

static void test_inventory(void)
{
    static const char text[] = " = T = \n x y\n";
    wt2_inventory inv;
    char d[300], p[600], msg[256], err[1024];
    int tr, ev, rc;
    wt2_tokens tk;
    bpe_bytes xz = {0};
    /* empty directory: nothing */
    snprintf(d, sizeof d, "%s/wt2dir", g_tmp);
    CHECK_INT_EQ(mkdir(d, 0777), 0);
    CHECK_INT_EQ(wt2_scan(d, &inv), 0);
    CHECK_INT_EQ(wt2_choose_splits(&inv, &tr, &ev, msg, sizeof msg), BPE_EIO);
    CHECK_INT_EQ(wt2_load_split(d, WT2_VALID, NULL, &tk, err, sizeof err), BPE_EIO);
    CHECK(strstr(err, "valid split not found") != NULL);
    /* valid (plain) + test (xz): the partial set of ../shared/data */
    snprintf(p, sizeof p, "%s/wiki.valid.raw", d);
    CHECK(write_file(p, text, sizeof text - 1));
    xz_encode((const unsigned char *)text, sizeof text - 1, &xz);
    snprintf(p, sizeof p, "%s/wiki.test.raw.xz", d);
    CHECK(write_file(p, xz.data, xz.n));
    CHECK_INT_EQ(wt2_scan(d, &inv), 2);
    CHECK(!inv.has_raw[WT2_TRAIN] && inv.has_raw[WT2_VALID] && inv.has_raw[WT2_TEST]);
    CHECK(strstr(inv.raw_path[WT2_TEST], "wiki.test.raw.xz") != NULL);
    CHECK_INT_EQ(wt2_choose_splits(&inv, &tr, &ev, msg, sizeof msg), BPE_OK);
    CHECK(tr == WT2_VALID && ev == WT2_TEST);
    CHECK(strstr(msg, "train split MISSING") != NULL);
    /* tokenise from raw (needs the GPT-2 vocabulary) */
    if (g_tok) {
        rc = wt2_load_split(d, WT2_TEST, g_tok, &tk, err, sizeof err);
        CHECK_INT_EQ(rc, BPE_OK);
        CHECK(strstr(tk.source, "(tokenised)") != NULL);
        CHECK(tk.n > 4 && tk.ids[tk.n - 1] == WT2_EOT && tk.ids[0] == 796);
        wt2_tokens_free(&tk);
    }
    /* a u16 file takes precedence; a corrupt one is an error, not a fallback */
    snprintf(p, sizeof p, "%s/wt2.valid.gpt2.u16", d);
    CHECK(write_file(p, "\x01\x00\x02", 3));
    CHECK_INT_EQ(wt2_load_split(d, WT2_VALID, NULL, &tk, err, sizeof err), BPE_EFORMAT);
    CHECK(write_file(p, "\x01\x00\x02\x00", 4));
    CHECK_INT_EQ(wt2_load_split(d, WT2_VALID, NULL, &tk, err, sizeof err), BPE_OK);
    CHECK(tk.n == 2 && tk.ids[0] == 1 && tk.ids[1] == 2);
    wt2_tokens_free(&tk);
    /* with train: the standard splits */
    snprintf(p, sizeof p, "%s/wiki.train.raw", d);
    CHECK(write_file(p, text, sizeof text - 1));
    CHECK_INT_EQ(wt2_scan(d, &inv), 3);
    CHECK_INT_EQ(wt2_choose_splits(&inv, &tr, &ev, msg, sizeof msg), BPE_OK);
    CHECK(tr == WT2_TRAIN && ev == WT2_VALID);
    CHECK(strstr(msg, "standard") != NULL);
    CHECK_INT_EQ(wt2_load_split(d, 7, NULL, &tk, err, sizeof err), BPE_EINVAL);
    CHECK(wt2_split_name(3) == NULL && strcmp(wt2_split_name(WT2_TEST), "test") == 0);
    bpe_bytes_free(&xz);
}

/* wt2_mkdirs: nested creation, an existing path, a file in the way, bad input */
static void test_mkdirs(void)
{
    char p[400], q[400], *big;
    struct stat st;
    FILE *f;
    snprintf(p, sizeof p, "%s/mk/a/b/c", g_tmp);
    CHECK_INT_EQ(wt2_mkdirs(p), 0);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK_INT_EQ(wt2_mkdirs(p), 0); /* exists: fine */
    snprintf(q, sizeof q, "%s/mk/a/", g_tmp); /* trailing slash */
    CHECK_INT_EQ(wt2_mkdirs(q), 0);
    snprintf(q, sizeof q, "%s/mk/file", g_tmp);
    f = fopen(q, "w");
    CHECK(f != NULL);
    if (f) fclose(f);
    CHECK_INT_EQ(wt2_mkdirs(q), -1); /* a file, not a directory */
    CHECK_INT_EQ(errno, ENOTDIR);
    snprintf(q, sizeof q, "%s/mk/file/sub", g_tmp);
    CHECK_INT_EQ(wt2_mkdirs(q), -1);
    CHECK_INT_EQ(wt2_mkdirs(NULL), -1);
    CHECK_INT_EQ(wt2_mkdirs(""), -1);
    big = (char *)malloc(5000);
    if (big) {
        memset(big, 'x', 4999);
        big[4999] = '\0';
        CHECK_INT_EQ(wt2_mkdirs(big), -1);
        CHECK_INT_EQ(errno, ENAMETOOLONG);
        free(big);
    }
}

static void test_loader_sequential(void)
{
    uint16_t ids[103];
    int32_t out[4 * 11];
    wt2_loader L;
    int i, b, t, got, total = 0;
    for (i = 0; i < 103; i++) ids[i] = (uint16_t)(1000 + i);
    CHECK_INT_EQ(wt2_loader_init(&L, ids, 103, WT2_SEQUENTIAL, 0), BPE_OK);
    /* T = 10: chunks start at 0, 10, ..., 90 ((103-1)/10 = 10 chunks), batches of 4 */
    CHECK_INT_EQ(wt2_num_chunks(103, 10), 10);
    CHECK_CLOSE(wt2_coverage(103, 10), 100.0 / 102.0, 1e-12, 0);
    for (;;) {
        got = wt2_loader_next(&L, 4, 10, out);
        CHECK(got >= 0 && got <= 4);
        if (got <= 0) break;
        for (b = 0; b < got; b++)
            for (t = 0; t <= 10; t++) CHECK_INT_EQ(out[b * 11 + t], 1000 + (total + b) * 10 + t);
        total += got;
    }
    CHECK_INT_EQ(total, 10);
    CHECK_INT_EQ(L.tokens, 100);
    CHECK_INT_EQ(wt2_loader_next(&L, 4, 10, out), 0); /* stays at the end */
    /* reset, and a context that changes between batches (stride = that batch's T) */
    wt2_loader_reset(&L);
    CHECK_INT_EQ(wt2_loader_next(&L, 2, 5, out), 2);  /* starts 0, 5 */
    CHECK_INT_EQ(out[0], 1000);
    CHECK_INT_EQ(out[6], 1005);
    CHECK_INT_EQ(wt2_loader_next(&L, 1, 20, out), 1); /* starts 10 */
    CHECK_INT_EQ(out[0], 1010);
    CHECK_INT_EQ(out[20], 1030);
    /* the last chunk ends exactly at the last id */
    CHECK_INT_EQ(wt2_loader_init(&L, ids, 21, WT2_SEQUENTIAL, 0), BPE_OK);
    CHECK_INT_EQ(wt2_loader_next(&L, 4, 10, out), 2);
    CHECK_INT_EQ(out[21], 1020);
    CHECK_INT_EQ(wt2_num_chunks(21, 10), 2);
    CHECK_CLOSE(wt2_coverage(21, 10), 1.0, 1e-12, 0);
    CHECK_INT_EQ(wt2_num_chunks(10, 10), 0);
    CHECK_INT_EQ(wt2_num_chunks(10, 0), 0);
}

static void test_loader_random(void)
{
    enum { N = 50, T = 8, B = 16 };
    uint16_t ids[N];
    int32_t o1[B * (T + 1)], o2[B * (T + 1)], o3[B * (T + 1)];
    int seen_first = 0, seen_last = 0, counts[N] = {0};
    wt2_loader a, b, c;
    int i, it, r, t;
    for (i = 0; i < N; i++) ids[i] = (uint16_t)i;
    CHECK_INT_EQ(wt2_loader_init(&a, ids, N, WT2_RANDOM, 42), BPE_OK);
    CHECK_INT_EQ(wt2_loader_init(&b, ids, N, WT2_RANDOM, 42), BPE_OK);
    CHECK_INT_EQ(wt2_loader_init(&c, ids, N, WT2_RANDOM, 43), BPE_OK);
    for (it = 0; it < 200; it++) {
        CHECK_INT_EQ(wt2_loader_next(&a, B, T, o1), B);
        CHECK_INT_EQ(wt2_loader_next(&b, B, T, o2), B);
        CHECK_INT_EQ(wt2_loader_next(&c, B, T, o3), B);
        CHECK(memcmp(o1, o2, sizeof o1) == 0);      /* same seed, same batches */
        if (it == 0) CHECK(memcmp(o1, o3, sizeof o1) != 0);
        for (r = 0; r < B; r++) {
            int s = o1[r * (T + 1)];
            CHECK(s >= 0 && s <= N - T - 1);
            for (t = 0; t <= T; t++) CHECK_INT_EQ(o1[r * (T + 1) + t], s + t); /* contiguous */
            if (s == 0) seen_first = 1;
            if (s == N - T - 1) seen_last = 1;
            counts[s]++;
        }
    }
    CHECK(seen_first && seen_last);
    /* 3200 draws over 42 starts: each about 76; a crude uniformity bound */
    for (i = 0; i <= N - T - 1; i++) CHECK(counts[i] > 30 && counts[i] < 140);
    /* reset replays the stream */
    wt2_loader_reset(&b);
    wt2_loader_reset(&a);
    CHECK_INT_EQ(wt2_loader_next(&a, B, T, o1), B);
    CHECK_INT_EQ(wt2_loader_next(&b, B, T, o2), B);
    CHECK(memcmp(o1, o2, sizeof o1) == 0);
    /* another context length on the same loader */
    CHECK_INT_EQ(wt2_loader_next(&a, 2, N - 1, o1), 2);
    CHECK(o1[0] == 0 && o1[N - 1] == N - 1);
    CHECK_INT_EQ(wt2_loader_next(&a, 1, N, o1), BPE_ERANGE); /* needs N+1 ids */
    /* errors */
    CHECK_INT_EQ(wt2_loader_next(&a, 0, T, o1), BPE_EINVAL);
    CHECK_INT_EQ(wt2_loader_next(&a, B, 0, o1), BPE_EINVAL);
    CHECK_INT_EQ(wt2_loader_next(&a, B, T, NULL), BPE_EINVAL);
    CHECK_INT_EQ(wt2_loader_next(NULL, B, T, o1), BPE_EINVAL);
    CHECK_INT_EQ(wt2_loader_init(&a, NULL, N, WT2_RANDOM, 1), BPE_EINVAL);
    CHECK_INT_EQ(wt2_loader_init(&a, ids, 0, WT2_RANDOM, 1), BPE_EINVAL);
    CHECK_INT_EQ(wt2_loader_init(&a, ids, N, 5, 1), BPE_EINVAL);
}

static void test_real_splits(void)
{
    wt2_inventory inv;
    wt2_tokens tk;
    wt2_loader L;
    char err[1024], msg[256];
    int tr, ev, got;
    int32_t *out;
    if (!g_tok) TEST_SKIP(g_skip);
    CHECK_INT_EQ(wt2_scan(NULL, &inv), 2);
    CHECK(inv.has_raw[WT2_VALID] && inv.has_raw[WT2_TEST] && inv.has_u16[WT2_VALID] && inv.has_u16[WT2_TEST]);
    CHECK(!inv.has_raw[WT2_TRAIN] && !inv.has_u16[WT2_TRAIN]);
    CHECK_INT_EQ(wt2_choose_splits(&inv, &tr, &ev, msg, sizeof msg), BPE_OK);
    CHECK(tr == WT2_VALID && ev == WT2_TEST);
    CHECK_INT_EQ(wt2_load_split(NULL, WT2_TEST, g_tok, &tk, err, sizeof err), BPE_OK);
    CHECK_INT_EQ(tk.n, 286178);
    CHECK(strstr(tk.source, "wt2.test.gpt2.u16") != NULL);
    CHECK_INT_EQ(wt2_num_chunks(tk.n, 1024), 279);
    CHECK_CLOSE(wt2_coverage(tk.n, 1024), 279.0 * 1024.0 / 286177.0, 1e-12, 0);
    out = (int32_t *)malloc(sizeof(int32_t) * 8 * 1025);
    CHECK_INT_EQ(wt2_loader_init(&L, tk.ids, tk.n, WT2_SEQUENTIAL, 0), BPE_OK);
    got = wt2_loader_next(&L, 8, 1024, out);
    CHECK_INT_EQ(got, 8);
    CHECK_INT_EQ(out[0], 796);
    CHECK_INT_EQ(out[1025], tk.ids[1024]);
    free(out);
    wt2_tokens_free(&tk);
}

/* SHA-256: FIPS 180-4's vectors (empty, "abc", the 448-bit two-block message, one
   million 'a' fed at once: padding that crosses a block boundary), and wt2_check_files
   on a directory with one right file, one of the right size with a byte flipped, one
   cut short, the rest missing and the optional train split absent */
static void test_sha256_and_check(void)
{
    char hex[65], d[300], p[600], line[4096];
    char *big;
    FILE *f;
    int bad;
    wt2_sha256_hex("", 0, hex);
    CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    wt2_sha256_hex("abc", 3, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    wt2_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
    big = (char *)malloc(1000000);
    CHECK(big != NULL);
    if (!big) return;
    memset(big, 'a', 1000000);
    wt2_sha256_hex(big, 1000000, hex);
    CHECK(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
    free(big);
    /* a directory with wrong and missing files: counted, one line each */
    snprintf(d, sizeof d, "%s/checkdir", g_tmp);
    CHECK_INT_EQ(mkdir(d, 0777), 0);
    snprintf(p, sizeof p, "%s/wt2.test.gpt2.u16", d);
    CHECK(write_file(p, "abc", 3)); /* wrong size */
    snprintf(p, sizeof p, "%s/report.txt", g_tmp);
    f = fopen(p, "w+");
    CHECK(f != NULL);
    if (!f) return;
    bad = wt2_check_files(d, f);
    CHECK_INT_EQ(bad, 6);
    rewind(f);
    {
        size_t n = fread(line, 1, sizeof line - 1, f);
        line[n] = 0;
    }
    fclose(f);
    CHECK(strstr(line, "wt2.test.gpt2.u16    wrong size (3 bytes, expected 572356)") != NULL);
    CHECK(strstr(line, "gpt2/vocab.bpe       missing") != NULL);
    CHECK(strstr(line, "wiki.train.raw       absent (optional)") != NULL);
    /* the real data (when present): all right; then a copy of one file with a byte flipped */
    if (g_skip[0]) return;
    CHECK_INT_EQ(wt2_check_files(NULL, NULL), 0);
    {
        uint16_t *ids = NULL;
        size_t n = 0;
        char src[4200], err[512];
        snprintf(src, sizeof src, "%s/wt2.valid.gpt2.u16", wt2_default_data_dir());
        CHECK_INT_EQ(wt2_load_u16(src, 0, &ids, &n, err, sizeof err), BPE_OK);
        if (!ids) return;
        ids[100] ^= 1; /* same size, one bit */
        snprintf(p, sizeof p, "%s/wt2.valid.gpt2.u16", d);
        f = fopen(p, "wb");
        CHECK(f != NULL);
        if (f) {
            CHECK(fwrite(ids, 2, n, f) == n);
            fclose(f);
        }
        free(ids);
        snprintf(p, sizeof p, "%s/report.txt", g_tmp);
        f = fopen(p, "w+");
        if (!f) return;
        CHECK_INT_EQ(wt2_check_files(d, f), 6);
        rewind(f);
        {
            size_t k = fread(line, 1, sizeof line - 1, f);
            line[k] = 0;
        }
        fclose(f);
        CHECK(strstr(line, "wt2.valid.gpt2.u16   wrong checksum") != NULL);
    }
}

int main(int argc, char **argv)
{
    char err[1024];
    TEST_INIT(argc, argv);
    snprintf(g_tmp, sizeof g_tmp, "/tmp/attnkit_test_data_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    if (bpe_load_dir(&g_tok, NULL, err, sizeof err) != BPE_OK) {
        snprintf(g_skip, sizeof g_skip, "WikiText-2/GPT-2 data not available (%s); set WT2_DIR", err);
        g_tok = NULL;
    }
    TEST_RUN(test_reference_valid);
    TEST_RUN(test_reference_test);
    TEST_RUN(test_protocol_rows);
    TEST_RUN(test_xz_and_text_files);
    TEST_RUN(test_u16_files);
    TEST_RUN(test_io_errors);
    TEST_RUN(test_inventory);
    TEST_RUN(test_mkdirs);
    TEST_RUN(test_loader_sequential);
    TEST_RUN(test_loader_random);
    TEST_RUN(test_real_splits);
    TEST_RUN(test_sha256_and_check);
    bpe_free(g_tok);
    {   /* clean up the scratch directory (flat files plus wt2dir/) */
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", g_tmp);
    }
    return TEST_END();
}
