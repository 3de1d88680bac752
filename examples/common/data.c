/* data.c - WikiText-2 data pipeline. See data.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* stat, access, readlink */
#endif
#include "data.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <lzma.h>

#if _POSIX_C_SOURCE < 200112L
/* a translation unit that includes this file after asking for an older POSIX (e.g.
   199309L for clock_gettime) gets no readlink from unistd.h */
extern ssize_t readlink(const char *path, char *buf, size_t len);
#endif

static int wt2__err(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *wt2_split_name(int split)
{
    static const char *names[WT2_NSPLITS] = {"train", "valid", "test"};
    return (split >= 0 && split < WT2_NSPLITS) ? names[split] : NULL;
}

/* ------------------------------------------------------------------ reading */

int wt2_xz_decode(const unsigned char *in, size_t in_len, size_t max_bytes, unsigned char **data,
                  size_t *len, char *err, size_t errlen)
{
    lzma_stream strm = LZMA_STREAM_INIT;
    lzma_ret r;
    unsigned char *buf = NULL;
    size_t cap = 0;
    if (!data || !len || (!in && in_len)) return wt2__err(err, errlen, BPE_EINVAL, "xz: NULL argument");
    *data = NULL;
    *len = 0;
    r = lzma_stream_decoder(&strm, UINT64_MAX, LZMA_CONCATENATED);
    if (r != LZMA_OK) return wt2__err(err, errlen, BPE_ENOMEM, "xz: cannot start the decoder (%d)", (int)r);
    strm.next_in = in;
    strm.avail_in = in_len;
    for (;;) {
        if (strm.avail_out == 0) {
            size_t used = cap - strm.avail_out, nc = cap ? cap * 2 : (size_t)1 << 20;
            unsigned char *p;
            if (cap > max_bytes) {
                lzma_end(&strm);
                free(buf);
                return wt2__err(err, errlen, BPE_ERANGE, "xz: decompresses to more than %zu bytes", max_bytes);
            }
            if (nc > max_bytes + 1) nc = max_bytes + 1;
            if (nc <= cap) nc = cap + 1;
            p = (unsigned char *)realloc(buf, nc + 1);
            if (!p) {
                lzma_end(&strm);
                free(buf);
                return wt2__err(err, errlen, BPE_ENOMEM, "xz: out of memory");
            }
            buf = p;
            strm.next_out = buf + used;
            strm.avail_out = nc - used;
            cap = nc;
        }
        r = lzma_code(&strm, LZMA_FINISH);
        if (r == LZMA_STREAM_END) break;
        if (r != LZMA_OK) {
            const char *why = r == LZMA_FORMAT_ERROR ? "not an xz stream"
                              : r == LZMA_DATA_ERROR ? "corrupt data"
                              : r == LZMA_BUF_ERROR  ? "truncated input"
                              : r == LZMA_MEM_ERROR  ? "out of memory"
                              : r == LZMA_OPTIONS_ERROR ? "unsupported options"
                                                        : "decoder error";
            size_t at = (size_t)strm.total_in;
            lzma_end(&strm);
            free(buf);
            return wt2__err(err, errlen, r == LZMA_MEM_ERROR ? BPE_ENOMEM : BPE_EFORMAT,
                            "xz: %s (input byte %zu)", why, at);
        }
    }
    *len = cap - strm.avail_out;
    lzma_end(&strm);
    if (*len > max_bytes) {
        free(buf);
        return wt2__err(err, errlen, BPE_ERANGE, "xz: decompresses to more than %zu bytes", max_bytes);
    }
    if (!buf) {
        buf = (unsigned char *)malloc(1);
        if (!buf) return wt2__err(err, errlen, BPE_ENOMEM, "xz: out of memory");
    }
    buf[*len] = 0;
    *data = buf;
    return BPE_OK;
}

int wt2_read_text(const char *path, size_t max_bytes, unsigned char **data, size_t *len, char *err,
                  size_t errlen)
{
    unsigned char *raw;
    size_t n;
    int rc;
    static const unsigned char magic[6] = {0xFD, '7', 'z', 'X', 'Z', 0x00};
    if (!path || !data || !len) return wt2__err(err, errlen, BPE_EINVAL, "wt2_read_text: NULL argument");
    *data = NULL;
    *len = 0;
    /* compressed size is at most the raw size for our data; bound it the same */
    rc = bpe_read_file(path, max_bytes, &raw, &n, err, errlen);
    if (rc) return rc;
    if (n >= 6 && memcmp(raw, magic, 6) == 0) {
        char sub[512];
        rc = wt2_xz_decode(raw, n, max_bytes, data, len, sub, sizeof sub);
        free(raw);
        if (rc) return wt2__err(err, errlen, rc, "%s: %s", path, sub);
        return BPE_OK;
    }
    *data = raw;
    *len = n;
    return BPE_OK;
}

/* ------------------------------------------------------------------ protocol */

int wt2_row_is_blank(const unsigned char *s, size_t n)
{
    size_t p = 0;
    while (p < n) {
        uint32_t cp;
        unsigned c = s[p];
        int l;
        if (c < 0x80) {
            if (!(c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F))) return 0;
            p++;
            continue;
        }
        /* decode with the same strict rules as the tokenizer */
        if (c >= 0xC2 && c <= 0xDF && p + 1 < n && (s[p + 1] & 0xC0) == 0x80) {
            cp = ((uint32_t)(c & 0x1F) << 6) | (s[p + 1] & 0x3F);
            l = 2;
        } else if (c >= 0xE0 && c <= 0xEF && p + 2 < n && (s[p + 1] & 0xC0) == 0x80 &&
                   (s[p + 2] & 0xC0) == 0x80) {
            cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[p + 1] & 0x3F) << 6) | (s[p + 2] & 0x3F);
            if (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
            l = 3;
        } else {
            return 0; /* 4-byte sequences hold no whitespace; invalid bytes are not space */
        }
        if (bpe_codepoint_class(cp) != 3) return 0;
        p += (size_t)l;
    }
    return 1;
}

int wt2_tokenize(bpe_tokenizer *tok, const unsigned char *text, size_t len, bpe_ids *out,
                 size_t *rows_kept)
{
    size_t p = 0, kept = 0;
    int eot, rc;
    if (rows_kept) *rows_kept = 0;
    if (!tok || !out || (!text && len)) return BPE_EINVAL;
    eot = bpe_eot(tok);
    if (eot < 0) return BPE_EFORMAT; /* a vocabulary without <|endoftext|> */
    while (p < len) {
        const unsigned char *nl = (const unsigned char *)memchr(text + p, '\n', len - p);
        size_t e = nl ? (size_t)(nl - text) + 1 : len;
        if (!wt2_row_is_blank(text + p, e - p)) {
            if ((rc = bpe_encode(tok, text + p, e - p, out)) != BPE_OK) return rc;
            if ((rc = bpe_ids_push(out, eot)) != BPE_OK) return rc;
            kept++;
        }
        p = e;
    }
    if (rows_kept) *rows_kept = kept;
    return BPE_OK;
}

/* ------------------------------------------------------------------ u16 files */

int wt2_write_u16(const char *path, const int32_t *ids, size_t n, char *err, size_t errlen)
{
    char tmp[4096];
    FILE *f;
    size_t i;
    unsigned char buf[8192];
    size_t k = 0;
    if (!path || (!ids && n)) return wt2__err(err, errlen, BPE_EINVAL, "wt2_write_u16: NULL argument");
    for (i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] > 65535)
            return wt2__err(err, errlen, BPE_ERANGE, "wt2_write_u16: id %ld at %zu does not fit uint16",
                            (long)ids[i], i);
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return wt2__err(err, errlen, BPE_EINVAL, "wt2_write_u16: path too long");
    f = fopen(tmp, "wb");
    if (!f) return wt2__err(err, errlen, BPE_EIO, "cannot create %s: %s", tmp, strerror(errno));
    for (i = 0; i < n; i++) {
        buf[k++] = (unsigned char)(ids[i] & 0xFF);
        buf[k++] = (unsigned char)((ids[i] >> 8) & 0xFF);
        if (k == sizeof buf || i + 1 == n) {
            errno = 0;
            if (fwrite(buf, 1, k, f) != k) {
                int e = errno;
                fclose(f);
                remove(tmp);
                return wt2__err(err, errlen, BPE_EIO, "write error on %s: %s", tmp, e ? strerror(e) : "I/O error");
            }
            k = 0;
        }
    }
    /* every byte on disk before the rename: flushed, synced, closed, each checked */
    errno = 0;
    if (fflush(f) != 0 || ferror(f) || (fsync(fileno(f)) != 0 && errno != EINVAL && errno != EROFS)) {
        int e = errno;
        fclose(f);
        remove(tmp);
        return wt2__err(err, errlen, BPE_EIO, "write error on %s: %s", tmp, e ? strerror(e) : "I/O error");
    }
    if (fclose(f) != 0) {
        int e = errno;
        remove(tmp);
        return wt2__err(err, errlen, BPE_EIO, "write error on %s: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return wt2__err(err, errlen, BPE_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    return BPE_OK;
}

int wt2_load_u16(const char *path, int vocab, uint16_t **ids, size_t *n, char *err, size_t errlen)
{
    unsigned char *raw;
    size_t len, i;
    uint16_t *v;
    int rc;
    if (!path || !ids || !n) return wt2__err(err, errlen, BPE_EINVAL, "wt2_load_u16: NULL argument");
    *ids = NULL;
    *n = 0;
    rc = bpe_read_file(path, (size_t)1 << 31, &raw, &len, err, errlen);
    if (rc) return rc;
    if (len % 2)
        rc = wt2__err(err, errlen, BPE_EFORMAT, "%s: odd size (%zu bytes): not a uint16 token file", path, len);
    else if (len == 0)
        rc = wt2__err(err, errlen, BPE_EFORMAT, "%s: empty token file", path);
    if (rc) {
        free(raw);
        return rc;
    }
    v = (uint16_t *)malloc(len);
    if (!v) {
        free(raw);
        return wt2__err(err, errlen, BPE_ENOMEM, "%s: out of memory", path);
    }
    for (i = 0; i < len / 2; i++) {
        v[i] = (uint16_t)(raw[2 * i] | (raw[2 * i + 1] << 8));
        if (vocab > 0 && v[i] >= vocab) {
            rc = wt2__err(err, errlen, BPE_EFORMAT, "%s: id %u at byte offset %zu (token %zu) >= vocabulary size %d",
                          path, (unsigned)v[i], 2 * i, i, vocab);
            free(v);
            free(raw);
            return rc;
        }
    }
    free(raw);
    *ids = v;
    *n = len / 2;
    return BPE_OK;
}

int wt2_check_ids(const uint16_t *ids, size_t n, int vocab, const char *source, char *err, size_t errlen)
{
    size_t i;
    if ((!ids && n) || vocab < 1) return wt2__err(err, errlen, BPE_EINVAL, "wt2_check_ids: invalid argument");
    for (i = 0; i < n; i++)
        if ((int)ids[i] >= vocab)
            return wt2__err(err, errlen, BPE_ERANGE,
                            "%s: token id %u at byte offset %zu (token %zu) is outside the vocabulary of %d",
                            source ? source : "token ids", (unsigned)ids[i], 2 * i, i, vocab);
    return BPE_OK;
}

/* ------------------------------------------------------------------ directory */

static int wt2__is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *wt2_default_data_dir(void)
{
    static char found[4096];
    const char *d = bpe_default_data_dir(), *e = getenv("WT2_DIR");
    char exe[4096];
    ssize_t n;
    int up;
    if ((e && *e) || d[0] == '/' || wt2__is_dir(d)) return d;
    /* a relative built-in path (../shared/data) that is not there from the current
       directory: look for it beside the executable (build/x -> the repository root) */
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || (size_t)n >= sizeof exe - 1) return d;
    exe[n] = 0;
    for (up = 0; up < 4; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash || slash == exe) break;
        *slash = 0; /* exe is now a directory: the binary's, then its parents */
        if ((size_t)snprintf(found, sizeof found, "%s/%s", exe, d) < sizeof found && wt2__is_dir(found))
            return found;
    }
    return d;
}

/* A file is there when it exists (readable or not: an unreadable file is reported by
   the loader with its reason, never as missing). */
static int wt2__exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

static const char *wt2__unreadable(const char *path)
{
    return access(path, R_OK) == 0 ? "" : " (NOT READABLE: permission denied)";
}

int wt2_scan(const char *dir, wt2_inventory *inv)
{
    int s, found = 0;
    if (!inv) return BPE_EINVAL;
    memset(inv, 0, sizeof *inv);
    if (!dir) dir = bpe_default_data_dir();
    for (s = 0; s < WT2_NSPLITS; s++) {
        static const char *fmts[2] = {"%s/wiki.%s.raw", "%s/wiki.%s.raw.xz"};
        int k;
        for (k = 0; k < 2 && !inv->has_raw[s]; k++) {
            if ((size_t)snprintf(inv->raw_path[s], sizeof inv->raw_path[s], fmts[k], dir,
                                 wt2_split_name(s)) >= sizeof inv->raw_path[s])
                return BPE_EINVAL;
            inv->has_raw[s] = wt2__exists(inv->raw_path[s]);
        }
        if (!inv->has_raw[s]) inv->raw_path[s][0] = 0;
        if ((size_t)snprintf(inv->u16_path[s], sizeof inv->u16_path[s], "%s/wt2.%s.gpt2.u16", dir,
                             wt2_split_name(s)) >= sizeof inv->u16_path[s])
            return BPE_EINVAL;
        inv->has_u16[s] = wt2__exists(inv->u16_path[s]);
        if (!inv->has_u16[s]) inv->u16_path[s][0] = 0;
        found += inv->has_raw[s] || inv->has_u16[s];
    }
    return found;
}

void wt2_describe(const wt2_inventory *inv, const char *dir, FILE *f)
{
    int s;
    if (!inv || !f) return;
    if (!dir) dir = bpe_default_data_dir();
    fprintf(f, "WikiText-2 in %s:\n", dir);
    for (s = 0; s < WT2_NSPLITS; s++) {
        if (inv->has_raw[s] || inv->has_u16[s])
            fprintf(f, "  %-5s found:%s%s%s%s%s%s\n", wt2_split_name(s), inv->has_raw[s] ? " raw text " : "",
                    inv->has_raw[s] ? inv->raw_path[s] : "", inv->has_raw[s] ? wt2__unreadable(inv->raw_path[s]) : "",
                    inv->has_u16[s] ? " token ids " : "", inv->has_u16[s] ? inv->u16_path[s] : "",
                    inv->has_u16[s] ? wt2__unreadable(inv->u16_path[s]) : "");
        else
            fprintf(f, "  %-5s MISSING (neither wiki.%s.raw[.xz] nor wt2.%s.gpt2.u16)\n",
                    wt2_split_name(s), wt2_split_name(s), wt2_split_name(s));
    }
}

int wt2_choose_splits(const wt2_inventory *inv, int *train_split, int *eval_split, char *msg,
                      size_t msglen)
{
    int have[WT2_NSPLITS], s;
    if (!inv || !train_split || !eval_split) return BPE_EINVAL;
    for (s = 0; s < WT2_NSPLITS; s++) have[s] = inv->has_raw[s] || inv->has_u16[s];
    if (have[WT2_TRAIN] && (have[WT2_VALID] || have[WT2_TEST])) {
        *train_split = WT2_TRAIN;
        *eval_split = have[WT2_VALID] ? WT2_VALID : WT2_TEST;
        if (msg && msglen)
            snprintf(msg, msglen, "training on train, evaluating on %s (standard WikiText-2 splits)",
                     wt2_split_name(*eval_split));
        return BPE_OK;
    }
    if (have[WT2_VALID] && have[WT2_TEST]) {
        *train_split = WT2_VALID;
        *eval_split = WT2_TEST;
        if (msg && msglen)
            snprintf(msg, msglen,
                     "train split MISSING: training on VALIDATION and evaluating on TEST "
                     "(not the standard WikiText-2 protocol; numbers are not comparable to papers)");
        return BPE_OK;
    }
    if (msg && msglen)
        snprintf(msg, msglen, "need at least two WikiText-2 splits (train+valid/test or valid+test)");
    return BPE_EIO;
}

int wt2_bytes_tokenize(const unsigned char *text, size_t len, uint16_t **ids, size_t *n)
{
    size_t i = 0, k = 0;
    uint16_t *out;
    if (!ids || !n || (!text && len)) return BPE_EINVAL;
    *ids = NULL;
    *n = 0;
    out = (uint16_t *)malloc((len ? len : 1) * sizeof(uint16_t));
    if (!out) return BPE_ENOMEM;
    while (i < len) {
        size_t j = i, e;
        while (j < len && text[j] != '\n') j++;
        e = j < len ? j + 1 : j; /* the row with its own '\n' */
        if (!wt2_row_is_blank(text + i, e - i))
            for (; i < e; i++) out[k++] = text[i];
        i = e;
    }
    if (!k) {
        free(out);
        return BPE_OK;
    }
    *ids = out;
    *n = k;
    return BPE_OK;
}

int wt2_load_split_bytes(const char *dir, int split, wt2_tokens *out, char *err, size_t errlen)
{
    wt2_inventory inv;
    unsigned char *text = NULL;
    size_t len = 0;
    int rc;
    if (!out || split < 0 || split >= WT2_NSPLITS)
        return wt2__err(err, errlen, BPE_EINVAL, "wt2_load_split_bytes: invalid argument");
    memset(out, 0, sizeof *out);
    out->split = split;
    if (!dir) dir = bpe_default_data_dir();
    if (wt2_scan(dir, &inv) < 0) return wt2__err(err, errlen, BPE_EINVAL, "wt2_load_split_bytes: path too long");
    if (!inv.has_raw[split])
        return wt2__err(err, errlen, BPE_EIO, "WikiText-2 %s split: no wiki.%s.raw[.xz] in %s (byte-level ids need the raw text)",
                        wt2_split_name(split), wt2_split_name(split), dir);
    rc = wt2_read_text(inv.raw_path[split], (size_t)1 << 30, &text, &len, err, errlen);
    if (rc) return rc;
    rc = wt2_bytes_tokenize(text, len, &out->ids, &out->n);
    free(text);
    if (rc) return wt2__err(err, errlen, rc, "wt2_load_split_bytes: out of memory");
    snprintf(out->source, sizeof out->source, "%s (bytes)", inv.raw_path[split]);
    return BPE_OK;
}

int wt2_load_split(const char *dir, int split, bpe_tokenizer *tok, wt2_tokens *out, char *err,
                   size_t errlen)
{
    wt2_inventory inv;
    int rc;
    if (!out || split < 0 || split >= WT2_NSPLITS)
        return wt2__err(err, errlen, BPE_EINVAL, "wt2_load_split: invalid argument");
    memset(out, 0, sizeof *out);
    out->split = split;
    if (!dir) dir = bpe_default_data_dir();
    if (wt2_scan(dir, &inv) < 0) return wt2__err(err, errlen, BPE_EINVAL, "wt2_load_split: path too long");
    if (inv.has_u16[split]) {
        rc = wt2_load_u16(inv.u16_path[split], tok ? bpe_vocab_size(tok) : 65536, &out->ids, &out->n,
                          err, errlen);
        if (rc) return rc;
        snprintf(out->source, sizeof out->source, "%s", inv.u16_path[split]);
        return BPE_OK;
    }
    if (inv.has_raw[split]) {
        bpe_tokenizer *own = NULL;
        unsigned char *text = NULL;
        size_t len = 0, i;
        bpe_ids ids;
        memset(&ids, 0, sizeof ids);
        if (!tok) {
            char vd[1100];
            snprintf(vd, sizeof vd, "%s/gpt2", dir);
            if ((rc = bpe_load_dir(&own, vd, err, errlen)) != BPE_OK) return rc;
            tok = own;
        }
        rc = wt2_read_text(inv.raw_path[split], (size_t)1 << 30, &text, &len, err, errlen);
        if (rc == BPE_OK) {
            rc = wt2_tokenize(tok, text, len, &ids, NULL);
            if (rc) wt2__err(err, errlen, rc, "%s: tokenisation failed: %s", inv.raw_path[split], bpe_strerror(rc));
        }
        free(text);
        bpe_free(own);
        if (rc == BPE_OK) {
            out->ids = (uint16_t *)malloc((ids.n ? ids.n : 1) * sizeof(uint16_t));
            if (!out->ids) rc = wt2__err(err, errlen, BPE_ENOMEM, "wt2_load_split: out of memory");
            for (i = 0; rc == BPE_OK && i < ids.n; i++) {
                if (ids.data[i] < 0 || ids.data[i] > 65535) {
                    rc = wt2__err(err, errlen, BPE_ERANGE, "token id %d does not fit uint16", (int)ids.data[i]);
                    free(out->ids);
                    out->ids = NULL;
                    break;
                }
                out->ids[i] = (uint16_t)ids.data[i];
            }
            if (rc == BPE_OK) {
                out->n = ids.n;
                snprintf(out->source, sizeof out->source, "%s (tokenised)", inv.raw_path[split]);
            }
        }
        bpe_ids_free(&ids);
        return rc;
    }
    return wt2__err(err, errlen, BPE_EIO, "WikiText-2 %s split not found in %s (no wiki.%s.raw[.xz], no wt2.%s.gpt2.u16)",
                    wt2_split_name(split), dir, wt2_split_name(split), wt2_split_name(split));
}

void wt2_tokens_free(wt2_tokens *t)
{
    if (!t) return;
    free(t->ids);
    t->ids = NULL;
    t->n = 0;
}

/* ------------------------------------------------------------------ loaders */

static uint64_t wt2__splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* uniform in [0, range) without modulo bias */
static uint64_t wt2__uniform(uint64_t *s, uint64_t range)
{
    uint64_t lim = UINT64_MAX - (UINT64_MAX % range), x;
    do x = wt2__splitmix(s);
    while (x >= lim);
    return x % range;
}

int wt2_loader_init(wt2_loader *L, const uint16_t *ids, size_t n, int mode, uint64_t seed)
{
    if (!L || !ids || n == 0 || (mode != WT2_RANDOM && mode != WT2_SEQUENTIAL)) return BPE_EINVAL;
    memset(L, 0, sizeof *L);
    L->ids = ids;
    L->n = n;
    L->mode = mode;
    L->seed = seed;
    L->rng = seed;
    return BPE_OK;
}

void wt2_loader_reset(wt2_loader *L)
{
    if (!L) return;
    L->rng = L->seed;
    L->pos = 0;
    L->rows = L->tokens = 0;
}

size_t wt2_num_chunks(size_t n, int T)
{
    if (T <= 0 || n < (size_t)T + 1) return 0;
    return (n - 1) / (size_t)T;
}

double wt2_coverage(size_t n, int T)
{
    if (n < 2) return 0.0;
    return (double)wt2_num_chunks(n, T) * (double)T / (double)(n - 1);
}

int wt2_loader_next(wt2_loader *L, int B, int T, int32_t *out)
{
    int b, t;
    size_t W;
    if (!L || !out || B <= 0 || T <= 0 || !L->ids) return BPE_EINVAL;
    W = (size_t)T + 1;
    if (L->n < W) return BPE_ERANGE;
    for (b = 0; b < B; b++) {
        size_t start;
        if (L->mode == WT2_RANDOM) {
            start = (size_t)wt2__uniform(&L->rng, (uint64_t)(L->n - W + 1));
        } else {
            if (L->pos + W > L->n) break;
            start = L->pos;
            L->pos += (size_t)T;
        }
        for (t = 0; t < (int)W; t++) out[(size_t)b * W + (size_t)t] = (int32_t)L->ids[start + (size_t)t];
        L->rows++;
        L->tokens += (unsigned long long)T;
    }
    return b;
}

int wt2_mkdirs(const char *path)
{
    char buf[4096];
    size_t i, n;
    if (!path) {
        errno = EINVAL;
        return -1;
    }
    n = strlen(path);
    if (n == 0 || n >= sizeof buf) {
        errno = n ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (i = 1; i <= n; i++)
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            struct stat st;
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0) {
                if (errno != EEXIST) return -1;
                if (stat(buf, &st) != 0) return -1;
                if (!S_ISDIR(st.st_mode)) {
                    errno = ENOTDIR;
                    return -1;
                }
            }
            buf[i] = c;
        }
    return 0;
}

/* ------------------------------------------------------------------ sha256 */
typedef struct {
    uint32_t h[8];
    unsigned char buf[64];
    size_t nbuf;
    uint64_t bits;
} wt2__sha256;

static const uint32_t wt2__sha_k[64] = {
    0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u,
    0xd807aa98u, 0x12835b01u, 0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u,
    0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu, 0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau,
    0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u, 0x06ca6351u, 0x14292967u,
    0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
    0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u,
    0x19a4c116u, 0x1e376c08u, 0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u,
    0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u, 0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u};

#define WT2__ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void wt2__sha_block(wt2__sha256 *c, const unsigned char *p)
{
    uint32_t w[64], a, b, d, e, f, g, h, cc, t1, t2;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (i = 16; i < 64; i++) {
        uint32_t s0 = WT2__ROR(w[i - 15], 7) ^ WT2__ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = WT2__ROR(w[i - 2], 17) ^ WT2__ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = c->h[0]; b = c->h[1]; cc = c->h[2]; d = c->h[3]; e = c->h[4]; f = c->h[5]; g = c->h[6]; h = c->h[7];
    for (i = 0; i < 64; i++) {
        t1 = h + (WT2__ROR(e, 6) ^ WT2__ROR(e, 11) ^ WT2__ROR(e, 25)) + ((e & f) ^ (~e & g)) + wt2__sha_k[i] + w[i];
        t2 = (WT2__ROR(a, 2) ^ WT2__ROR(a, 13) ^ WT2__ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g; g = f; f = e; e = d + t1; d = cc; cc = b; b = a; a = t1 + t2;
    }
    c->h[0] += a; c->h[1] += b; c->h[2] += cc; c->h[3] += d; c->h[4] += e; c->h[5] += f; c->h[6] += g; c->h[7] += h;
}

static void wt2__sha_init(wt2__sha256 *c)
{
    static const uint32_t h0[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au,
                                   0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
    memcpy(c->h, h0, sizeof h0);
    c->nbuf = 0;
    c->bits = 0;
}

static void wt2__sha_update(wt2__sha256 *c, const unsigned char *p, size_t n)
{
    c->bits += (uint64_t)n * 8u;
    while (n) {
        size_t take = 64 - c->nbuf < n ? 64 - c->nbuf : n;
        memcpy(c->buf + c->nbuf, p, take);
        c->nbuf += take;
        p += take;
        n -= take;
        if (c->nbuf == 64) {
            wt2__sha_block(c, c->buf);
            c->nbuf = 0;
        }
    }
}

static void wt2__sha_final(wt2__sha256 *c, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char len[8];
    uint64_t bits = c->bits;
    int i;
    unsigned char one = 0x80, zero = 0;
    for (i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
    wt2__sha_update(c, &one, 1);
    while (c->nbuf != 56) wt2__sha_update(c, &zero, 1);
    wt2__sha_update(c, len, 8);
    for (i = 0; i < 32; i++) {
        unsigned v = (unsigned)(c->h[i / 4] >> (24 - 8 * (i % 4))) & 0xffu;
        hex[2 * i] = digits[v >> 4];
        hex[2 * i + 1] = digits[v & 15u];
    }
    hex[64] = 0;
}

void wt2_sha256_hex(const void *data, size_t n, char hex[65])
{
    wt2__sha256 c;
    wt2__sha_init(&c);
    wt2__sha_update(&c, (const unsigned char *)data, n);
    wt2__sha_final(&c, hex);
}

/* 0 with the size and sha256 of path, else -1 with errno (ENOENT: missing) */
static int wt2__sha256_file(const char *path, unsigned long long *size, char hex[65])
{
    unsigned char buf[65536];
    size_t got;
    wt2__sha256 c;
    FILE *f;
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return -1;
    }
    f = fopen(path, "rb");
    if (!f) return -1;
    wt2__sha_init(&c);
    *size = 0;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        wt2__sha_update(&c, buf, got);
        *size += got;
    }
    if (ferror(f)) {
        fclose(f);
        errno = EIO;
        return -1;
    }
    fclose(f);
    wt2__sha_final(&c, hex);
    return 0;
}

int wt2_check_files(const char *dir, FILE *f)
{
    /* ../shared/data/README.md's table (sizes and sha256 of the stored files) */
    static const struct {
        const char *name;
        unsigned long long size;
        const char *sha;
        int optional;
    } want[] = {
        {"wiki.test.raw.xz", 368188ull, "f3601aa28de83b78ce5e3eb1a746efdb27915aa146e0d0537fa929133584aede", 0},
        {"wiki.valid.raw.xz", 332136ull, "bd399ecce9244378711f645c3b5fee6026b5563185304a00fdd0652c608b08c5", 0},
        {"wt2.valid.gpt2.u16", 499500ull, "397ae25de9c593190ddc226fe15577337038a549046a90eaa785a1fc6fc7e979", 0},
        {"wt2.test.gpt2.u16", 572356ull, "2fee0a651f3ac3014d03d06f029bd3544edf7f6a4135cb9f3f3576c866d217d5", 0},
        {"gpt2/encoder.json", 1042301ull, "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783", 0},
        {"gpt2/vocab.bpe", 456318ull, "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5", 0},
        /* the published train split (not shipped; the raw text, not an .xz of it) */
        {"wiki.train.raw", 10940747ull, "6707892fa3788b5ab9ed78ab5ff37d9fe825f6011a2ad4fcd6a6d467f0e7da57", 1},
    };
    char path[4200], hex[65];
    int k, bad = 0;
    if (!dir) dir = wt2_default_data_dir();
    for (k = 0; k < (int)(sizeof want / sizeof want[0]); k++) {
        unsigned long long size = 0;
        snprintf(path, sizeof path, "%s/%s", dir, want[k].name);
        if (wt2__sha256_file(path, &size, hex) != 0) {
            int e = errno;
            if (want[k].optional && e == ENOENT) {
                char xz[4300];
                struct stat st;
                snprintf(xz, sizeof xz, "%s.xz", path);
                if (f) {
                    if (stat(xz, &st) == 0)
                        fprintf(f, "%-20s present as %s.xz (optional; its checksum is of the raw text: "
                                   "xz -dk it to check)\n", want[k].name, want[k].name);
                    else
                        fprintf(f, "%-20s absent (optional)\n", want[k].name);
                }
                continue;
            }
            if (f) {
                if (e == ENOENT) fprintf(f, "%-20s missing\n", want[k].name);
                else fprintf(f, "%-20s unreadable: %s\n", want[k].name, strerror(e));
            }
            bad++;
            continue;
        }
        if (size != want[k].size) {
            if (f) fprintf(f, "%-20s wrong size (%llu bytes, expected %llu)\n", want[k].name, size, want[k].size);
            bad++;
        } else if (strcmp(hex, want[k].sha)) {
            if (f) fprintf(f, "%-20s wrong checksum (sha256 %s, expected %s)\n", want[k].name, hex, want[k].sha);
            bad++;
        } else if (f) {
            fprintf(f, "%-20s ok (%llu bytes, sha256 %.16s...)%s\n", want[k].name, size, hex,
                    want[k].optional ? " (optional)" : "");
        }
    }
    return bad;
}
