/* ckpt.c - safetensors checkpoints: atomic writer and validating reader. See ckpt.h. */
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define CKPT__MAX_HEADER 100000000ull /* as the reference implementation */
#define CKPT__MAX_NAME 4096           /* reader; the writer allows 255 */
#define CKPT__CRC_KEY "attnkit.crc32"
#define CKPT__HCRC_KEY "attnkit.hcrc32" /* format 2: the header's checksum (see ckpt.h) */

static int ckpt__err(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *ckpt_strerror(int err)
{
    switch (err) {
    case CKPT_OK: return "ok";
    case CKPT_EINVAL: return "invalid argument";
    case CKPT_ENOMEM: return "out of memory";
    case CKPT_EIO: return "I/O error";
    case CKPT_EFORMAT: return "malformed or corrupted checkpoint";
    case CKPT_ENOTFOUND: return "tensor not found";
    case CKPT_EMISMATCH: return "dtype or shape mismatch";
    default: return "unknown error";
    }
}

const char *ckpt_dtype_name(int dtype)
{
    switch (dtype) {
    case CKPT_F32: return "F32";
    case CKPT_F64: return "F64";
    case CKPT_I64: return "I64";
    case CKPT_I32: return "I32";
    case CKPT_U8: return "U8";
    default: return NULL;
    }
}

size_t ckpt_dtype_size(int dtype)
{
    switch (dtype) {
    case CKPT_F32: case CKPT_I32: return 4;
    case CKPT_F64: case CKPT_I64: return 8;
    case CKPT_U8: return 1;
    default: return 0;
    }
}

static int ckpt__little_endian(void)
{
    const uint16_t x = 1;
    return *(const unsigned char *)&x == 1;
}

/* A printable, bounded copy of a name for messages (control bytes become '?'). */
static const char *ckpt__show(const char *s, char *buf, size_t cap)
{
    size_t i, n = 0;
    if (!s) return "(null)";
    for (i = 0; s[i] && n + 4 < cap; i++) buf[n++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (s[i]) {
        buf[n++] = '.';
        buf[n++] = '.';
        buf[n++] = '.';
    }
    buf[n] = 0;
    return buf;
}

static void ckpt__fmt_shape(char *out, size_t cap, int ndim, const int64_t *shape)
{
    size_t n = 0;
    int d;
    if (cap == 0) return;
    out[0] = 0;
    n += (size_t)snprintf(out + n, cap - n, "(");
    for (d = 0; d < ndim && n < cap; d++)
        n += (size_t)snprintf(out + n, cap - n, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (n < cap) snprintf(out + n, cap - n, ")");
}

/* ------------------------------------------------------------------ CRC-32 */

/* Slicing-by-8 tables: t[0] is the classic byte table (reflected polynomial
   0xEDB88320), t[k][b] = CRC of byte b followed by k zero bytes. */
static void ckpt__crc_table(uint32_t t[8][256])
{
    uint32_t i, c;
    int k;
    for (i = 0; i < 256; i++) {
        c = i;
        for (k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[0][i] = c;
    }
    for (i = 0; i < 256; i++)
        for (k = 1; k < 8; k++) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
}

/* crc: running value, start with 0 (pre/post inversion inside, as zlib's crc32). */
static uint32_t ckpt__crc_update(uint32_t t[8][256], uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        c = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^ t[4][lo >> 24] ^ t[3][hi & 0xffu] ^
            t[2][(hi >> 8) & 0xffu] ^ t[1][(hi >> 16) & 0xffu] ^ t[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = t[0][(c ^ *p++) & 0xffu] ^ (c >> 8);
    return ~c;
}

/* The header checksum (format 2): CRC-32 of a canonical encoding of everything the JSON
   header says, in file order: "attnkit-ckpt-header-2" NUL; per metadata pair except
   attnkit.hcrc32 itself: 'M' key NUL value NUL; per tensor: 'T' name NUL dtype-name NUL,
   ndim as one byte, each dimension, then the begin and end offsets, as 8-byte
   little-endian integers. Independent of JSON spelling (escapes, spaces, padding), so a
   reader checks what it parsed. */
static uint32_t ckpt__hcrc_begin(uint32_t t[8][256])
{
    static const char tag[] = "attnkit-ckpt-header-2";
    return ckpt__crc_update(t, 0, tag, sizeof tag); /* with its NUL */
}

static uint32_t ckpt__hcrc_meta(uint32_t t[8][256], uint32_t c, const char *k, const char *v)
{
    c = ckpt__crc_update(t, c, "M", 1);
    c = ckpt__crc_update(t, c, k, strlen(k) + 1);
    return ckpt__crc_update(t, c, v, strlen(v) + 1);
}

static uint32_t ckpt__hcrc_u64(uint32_t t[8][256], uint32_t c, uint64_t v)
{
    unsigned char b[8];
    int k;
    for (k = 0; k < 8; k++) b[k] = (unsigned char)((v >> (8 * k)) & 0xffu);
    return ckpt__crc_update(t, c, b, 8);
}

static uint32_t ckpt__hcrc_tensor(uint32_t t[8][256], uint32_t c, const char *name, int dtype, int ndim,
                                  const int64_t *shape, uint64_t b, uint64_t e)
{
    const char *dn = ckpt_dtype_name(dtype);
    unsigned char nd = (unsigned char)ndim;
    int d;
    c = ckpt__crc_update(t, c, "T", 1);
    c = ckpt__crc_update(t, c, name, strlen(name) + 1);
    c = ckpt__crc_update(t, c, dn ? dn : "?", strlen(dn ? dn : "?") + 1);
    c = ckpt__crc_update(t, c, &nd, 1);
    for (d = 0; d < ndim && d < CKPT_MAX_NDIM; d++) c = ckpt__hcrc_u64(t, c, (uint64_t)shape[d]);
    c = ckpt__hcrc_u64(t, c, b);
    return ckpt__hcrc_u64(t, c, e);
}

/* "%08lx" of a CRC back to its value: 0, or -1 when s is not 8 hex digits */
static int ckpt__parse_crc(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    int k;
    if (strlen(s) != 8) return -1;
    for (k = 0; k < 8; k++) {
        char ch = s[k];
        unsigned d;
        if (ch >= '0' && ch <= '9') d = (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f') d = (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F') d = (unsigned)(ch - 'A' + 10);
        else return -1;
        v = v * 16u + d;
    }
    *out = v;
    return 0;
}

/* ------------------------------------------------------------------ growable buffer */

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} ckpt__buf;

static void ckpt__put(ckpt__buf *b, const void *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        char *q;
        while (nc < b->n + n + 1) {
            if (nc > ((size_t)-1) / 2) {
                b->oom = 1;
                return;
            }
            nc *= 2;
        }
        q = (char *)realloc(b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void ckpt__puts(ckpt__buf *b, const char *s) { ckpt__put(b, s, strlen(s)); }

static void ckpt__putc(ckpt__buf *b, char c) { ckpt__put(b, &c, 1); }

/* JSON string literal; s is valid UTF-8 (checked by the caller). */
static void ckpt__put_json_str(ckpt__buf *b, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    ckpt__putc(b, '"');
    for (; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': ckpt__puts(b, "\\\""); break;
        case '\\': ckpt__puts(b, "\\\\"); break;
        case '\n': ckpt__puts(b, "\\n"); break;
        case '\r': ckpt__puts(b, "\\r"); break;
        case '\t': ckpt__puts(b, "\\t"); break;
        case '\b': ckpt__puts(b, "\\b"); break;
        case '\f': ckpt__puts(b, "\\f"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", (unsigned)*p);
                ckpt__puts(b, esc);
            } else {
                ckpt__putc(b, (char)*p);
            }
        }
    }
    ckpt__putc(b, '"');
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if ill-formed. */
static size_t ckpt__utf8_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (n >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned char lo = (c == 0xE0) ? 0xA0 : 0x80, hi = (c == 0xED) ? 0x9F : 0xBF;
        return (n >= 3 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned char lo = (c == 0xF0) ? 0x90 : 0x80, hi = (c == 0xF4) ? 0x8F : 0xBF;
        return (n >= 4 && p[1] >= lo && p[1] <= hi && (p[2] & 0xC0) == 0x80 && (p[3] & 0xC0) == 0x80) ? 4 : 0;
    }
    return 0;
}

static int ckpt__valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t k = ckpt__utf8_len(p + i, n - i);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* ------------------------------------------------------------------ writer */

/* Sort idx[0..n) by names[idx[i]] without a global (qsort has no context argument):
   a small merge sort. */
static void ckpt__sort_by_name(int *idx, int *tmp, int n, const char *const *names)
{
    int w, i;
    for (w = 1; w < n; w *= 2) {
        for (i = 0; i < n; i += 2 * w) {
            int lo = i, mid = i + w < n ? i + w : n, hi = i + 2 * w < n ? i + 2 * w : n;
            int a = lo, b = mid, k = lo;
            while (a < mid && b < hi) tmp[k++] = strcmp(names[idx[b]], names[idx[a]]) < 0 ? idx[b++] : idx[a++];
            while (a < mid) tmp[k++] = idx[a++];
            while (b < hi) tmp[k++] = idx[b++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

/* First duplicate in names[0..n) or -1; CKPT_ENOMEM as -2. */
static int ckpt__find_dup(const char *const *names, int n)
{
    int *idx, *tmp, i, dup = -1;
    if (n < 2) return -1;
    idx = (int *)malloc((size_t)n * sizeof *idx);
    tmp = (int *)malloc((size_t)n * sizeof *tmp);
    if (!idx || !tmp) {
        free(idx);
        free(tmp);
        return -2;
    }
    for (i = 0; i < n; i++) idx[i] = i;
    ckpt__sort_by_name(idx, tmp, n, names);
    for (i = 1; i < n && dup < 0; i++)
        if (strcmp(names[idx[i]], names[idx[i - 1]]) == 0) dup = idx[i];
    free(idx);
    free(tmp);
    return dup;
}

typedef struct {
    ckpt__buf hdr;    /* 8-byte length + padded JSON */
    int *order;       /* entries in data-section order */
    uint64_t *off;    /* per entry: begin offset */
    uint64_t *bytes;  /* per entry: byte count */
    uint64_t data_len;
} ckpt__plan;

static void ckpt__plan_free(ckpt__plan *p)
{
    free(p->hdr.p);
    free(p->order);
    free(p->off);
    free(p->bytes);
    memset(p, 0, sizeof *p);
}

static int ckpt__entry_bytes(const ckpt_entry *e, uint64_t *bytes)
{
    uint64_t numel = 1, sz = ckpt_dtype_size(e->dtype);
    int d, zero = 0;
    for (d = 0; d < e->ndim; d++) {
        if (e->shape[d] < 0) return 0;
        if (e->shape[d] == 0) zero = 1;
    }
    if (zero) {
        *bytes = 0;
        return 1;
    }
    for (d = 0; d < e->ndim; d++) {
        uint64_t s = (uint64_t)e->shape[d];
        if (numel > (uint64_t)INT64_MAX / s) return 0;
        numel *= s;
    }
    if (numel > (uint64_t)INT64_MAX / sz) return 0;
    *bytes = numel * sz;
    return 1;
}

static int ckpt__plan_make(ckpt__plan *p, const ckpt_entry *entries, int n, const char *const *mk,
                           const char *const *mv, int n_meta, char *err, size_t errlen)
{
    int i, g, k, has_format = 0, dup;
    char nb[80];
    const char **names = NULL;
    uint32_t table[8][256], crc = 0;
    uint64_t pos = 0;
    size_t hdr_len;
    static const size_t group_size[3] = {8, 4, 1};
    memset(p, 0, sizeof *p);
    if (!ckpt__little_endian()) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt: big-endian hosts are not supported");
    if (n < 0 || (n > 0 && !entries)) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: bad entries (n = %d)", n);
    if (n_meta < 0 || (n_meta > 0 && (!mk || !mv)))
        return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: bad metadata arrays (n_meta = %d)", n_meta);
    /* entries */
    p->order = (int *)malloc((size_t)(n ? n : 1) * sizeof *p->order);
    p->off = (uint64_t *)malloc((size_t)(n ? n : 1) * sizeof *p->off);
    p->bytes = (uint64_t *)malloc((size_t)(n ? n : 1) * sizeof *p->bytes);
    names = (const char **)malloc((size_t)(n ? n : 1) * sizeof *names);
    if (!p->order || !p->off || !p->bytes || !names) goto oom;
    for (i = 0; i < n; i++) {
        const ckpt_entry *e = &entries[i];
        size_t len;
        const char *c;
        if (!e->name) {
            free(names);
            return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: entry %d has a NULL name", i);
        }
        len = strlen(e->name);
        for (c = e->name; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e) break;
        if (len == 0 || len > 255 || *c || strcmp(e->name, "__metadata__") == 0) {
            free(names);
            return ckpt__err(err, errlen, CKPT_EINVAL,
                             "ckpt_write: entry %d: name '%s' must be 1..255 printable ASCII bytes and not __metadata__",
                             i, ckpt__show(e->name, nb, sizeof nb));
        }
        names[i] = e->name;
        if (!ckpt_dtype_name(e->dtype)) {
            free(names);
            return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: tensor '%s': unknown dtype %d", e->name, e->dtype);
        }
        if (e->ndim < 0 || e->ndim > CKPT_MAX_NDIM) {
            free(names);
            return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: tensor '%s': ndim %d not in 0..4", e->name, e->ndim);
        }
        if (!ckpt__entry_bytes(e, &p->bytes[i])) {
            char sh[128];
            ckpt__fmt_shape(sh, sizeof sh, e->ndim, e->shape);
            free(names);
            return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: tensor '%s': invalid shape %s", e->name, sh);
        }
        if (p->bytes[i] > 0 && !e->data) {
            free(names);
            return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: tensor '%s': NULL data", e->name);
        }
    }
    dup = ckpt__find_dup(names, n);
    free(names);
    names = NULL;
    if (dup == -2) goto oom;
    if (dup >= 0) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: duplicate tensor name '%s'", entries[dup].name);
    /* metadata */
    for (i = 0; i < n_meta; i++) {
        if (!mk[i] || !mv[i]) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: metadata pair %d is NULL", i);
        if (!ckpt__valid_utf8(mk[i]) || !ckpt__valid_utf8(mv[i]))
            return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: metadata pair %d ('%s') is not valid UTF-8", i,
                             ckpt__show(mk[i], nb, sizeof nb));
        if (strcmp(mk[i], CKPT__CRC_KEY) == 0 || strcmp(mk[i], CKPT__HCRC_KEY) == 0)
            return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: metadata key '%s' is reserved", mk[i]);
        if (strcmp(mk[i], "format") == 0) has_format = 1;
    }
    dup = ckpt__find_dup(mk, n_meta);
    if (dup == -2) goto oom;
    if (dup >= 0)
        return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: duplicate metadata key '%s'", ckpt__show(mk[dup], nb, sizeof nb));
    /* layout: 8-byte dtypes, then 4-byte, then 1-byte, no gaps; CRC in that order */
    ckpt__crc_table(table);
    k = 0;
    for (g = 0; g < 3; g++)
        for (i = 0; i < n; i++)
            if (ckpt_dtype_size(entries[i].dtype) == group_size[g]) {
                p->order[k++] = i;
                p->off[i] = pos;
                if (p->bytes[i] > (uint64_t)INT64_MAX - pos)
                    return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: total size overflows");
                pos += p->bytes[i];
                if (p->bytes[i] > (uint64_t)(size_t)-1)
                    return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: tensor '%s' too large", entries[i].name);
                crc = ckpt__crc_update(table, crc, entries[i].data, (size_t)p->bytes[i]);
            }
    p->data_len = pos;
    /* header */
    ckpt__put(&p->hdr, "\0\0\0\0\0\0\0\0", 8);
    ckpt__puts(&p->hdr, "{\"__metadata__\":{");
    {
        char c[32];
        snprintf(c, sizeof c, "\"%s\":\"%08lx\"", CKPT__CRC_KEY, (unsigned long)crc);
        ckpt__puts(&p->hdr, c);
    }
    if (!has_format) ckpt__puts(&p->hdr, ",\"format\":\"pt\"");
    for (i = 0; i < n_meta; i++) {
        ckpt__putc(&p->hdr, ',');
        ckpt__put_json_str(&p->hdr, mk[i]);
        ckpt__putc(&p->hdr, ':');
        ckpt__put_json_str(&p->hdr, mv[i]);
    }
    {
        /* the header checksum over what the header says, in the order it says it */
        char c[40], dc[12];
        uint32_t h = ckpt__hcrc_begin(table);
        snprintf(dc, sizeof dc, "%08lx", (unsigned long)crc);
        h = ckpt__hcrc_meta(table, h, CKPT__CRC_KEY, dc);
        if (!has_format) h = ckpt__hcrc_meta(table, h, "format", "pt");
        for (i = 0; i < n_meta; i++) h = ckpt__hcrc_meta(table, h, mk[i], mv[i]);
        for (i = 0; i < n; i++)
            h = ckpt__hcrc_tensor(table, h, entries[i].name, entries[i].dtype, entries[i].ndim, entries[i].shape,
                                  p->off[i], p->off[i] + p->bytes[i]);
        snprintf(c, sizeof c, ",\"%s\":\"%08lx\"", CKPT__HCRC_KEY, (unsigned long)h);
        ckpt__puts(&p->hdr, c);
    }
    ckpt__putc(&p->hdr, '}');
    for (i = 0; i < n; i++) {
        char num[64];
        int d;
        ckpt__putc(&p->hdr, ',');
        ckpt__put_json_str(&p->hdr, entries[i].name);
        ckpt__puts(&p->hdr, ":{\"dtype\":\"");
        ckpt__puts(&p->hdr, ckpt_dtype_name(entries[i].dtype));
        ckpt__puts(&p->hdr, "\",\"shape\":[");
        for (d = 0; d < entries[i].ndim; d++) {
            snprintf(num, sizeof num, d ? ",%lld" : "%lld", (long long)entries[i].shape[d]);
            ckpt__puts(&p->hdr, num);
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)p->off[i],
                 (unsigned long long)(p->off[i] + p->bytes[i]));
        ckpt__puts(&p->hdr, num);
    }
    ckpt__putc(&p->hdr, '}');
    while (p->hdr.n % 8 != 0) ckpt__putc(&p->hdr, ' ');
    if (p->hdr.oom) goto oom;
    hdr_len = p->hdr.n - 8;
    if ((uint64_t)hdr_len > CKPT__MAX_HEADER)
        return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: header of %zu bytes exceeds the format's limit", hdr_len);
    for (i = 0; i < 8; i++) p->hdr.p[i] = (char)(unsigned char)(((uint64_t)hdr_len >> (8 * i)) & 0xffu);
    return CKPT_OK;
oom:
    free(names);
    return ckpt__err(err, errlen, CKPT_ENOMEM, "ckpt_write: out of memory");
}

static int ckpt__write_all(int fd, const void *data, uint64_t n)
{
    const char *p = (const char *)data;
    while (n > 0) {
        size_t chunk = n > ((uint64_t)1 << 30) ? ((size_t)1 << 30) : (size_t)n;
        ssize_t w = write(fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        p += w;
        n -= (uint64_t)w;
    }
    return 0;
}

static void ckpt__fsync_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    size_t len;
    int fd;
    if (!slash) {
        dir = (char *)malloc(2);
        if (!dir) return;
        strcpy(dir, ".");
    } else {
        len = (size_t)(slash - path);
        if (len == 0) len = 1; /* "/file" */
        dir = (char *)malloc(len + 1);
        if (!dir) return;
        memcpy(dir, path, len);
        dir[len] = 0;
    }
    fd = open(dir, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd); /* best effort: not every file system allows it */
        close(fd);
    }
    free(dir);
}

int ckpt_write(const char *path, const ckpt_entry *entries, int n, const char *const *meta_keys,
               const char *const *meta_vals, int n_meta, char *err, size_t errlen)
{
    ckpt__plan p;
    char *tmp;
    int fd, rc, k, e;
    if (!path || !*path) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write: empty path");
    rc = ckpt__plan_make(&p, entries, n, meta_keys, meta_vals, n_meta, err, errlen);
    if (rc != CKPT_OK) {
        ckpt__plan_free(&p);
        return rc;
    }
    tmp = (char *)malloc(strlen(path) + 32);
    if (!tmp) {
        ckpt__plan_free(&p);
        return ckpt__err(err, errlen, CKPT_ENOMEM, "ckpt_write: out of memory");
    }
    sprintf(tmp, "%s.tmp.%ld", path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        e = errno;
        rc = ckpt__err(err, errlen, CKPT_EIO, "ckpt_write: cannot create '%s': %s", tmp, strerror(e));
        free(tmp);
        ckpt__plan_free(&p);
        return rc;
    }
    if (ckpt__write_all(fd, p.hdr.p, p.hdr.n) != 0) goto io;
    for (k = 0; k < n; k++) {
        int i = p.order[k];
        if (p.bytes[i] && ckpt__write_all(fd, entries[i].data, p.bytes[i]) != 0) goto io;
    }
    if (fsync(fd) != 0) goto io;
    rc = close(fd);
    fd = -1;
    if (rc != 0) goto io;
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        rc = ckpt__err(err, errlen, CKPT_EIO, "ckpt_write: cannot rename '%s' to '%s': %s", tmp, path, strerror(e));
        free(tmp);
        ckpt__plan_free(&p);
        return rc;
    }
    ckpt__fsync_dir(path);
    free(tmp);
    ckpt__plan_free(&p);
    return CKPT_OK;
io:
    e = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    rc = ckpt__err(err, errlen, CKPT_EIO, "ckpt_write: writing '%s' failed: %s (previous file left untouched)", tmp,
                   strerror(e));
    free(tmp);
    ckpt__plan_free(&p);
    return rc;
}

int ckpt_write_mem(void **out, size_t *len, const ckpt_entry *entries, int n, const char *const *meta_keys,
                   const char *const *meta_vals, int n_meta, char *err, size_t errlen)
{
    ckpt__plan p;
    unsigned char *buf;
    uint64_t total;
    int k, rc;
    if (!out || !len) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_write_mem: NULL output");
    *out = NULL;
    *len = 0;
    rc = ckpt__plan_make(&p, entries, n, meta_keys, meta_vals, n_meta, err, errlen);
    if (rc != CKPT_OK) {
        ckpt__plan_free(&p);
        return rc;
    }
    total = (uint64_t)p.hdr.n + p.data_len;
    if (total > (uint64_t)((size_t)-1) || total < p.data_len) {
        ckpt__plan_free(&p);
        return ckpt__err(err, errlen, CKPT_ENOMEM, "ckpt_write_mem: too large for memory");
    }
    buf = (unsigned char *)malloc((size_t)total);
    if (!buf) {
        ckpt__plan_free(&p);
        return ckpt__err(err, errlen, CKPT_ENOMEM, "ckpt_write_mem: out of memory");
    }
    memcpy(buf, p.hdr.p, p.hdr.n);
    for (k = 0; k < n; k++) {
        int i = p.order[k];
        if (p.bytes[i]) memcpy(buf + p.hdr.n + p.off[i], entries[i].data, (size_t)p.bytes[i]);
    }
    *out = buf;
    *len = (size_t)total;
    ckpt__plan_free(&p);
    return CKPT_OK;
}

/* ------------------------------------------------------------------ reader */

typedef struct {
    size_t name;                  /* offset in the string arena while parsing */
    const char *name_p;           /* after parsing */
    int dtype, ndim, have;        /* have: bit 0 dtype, 1 shape, 2 data_offsets */
    int64_t shape[CKPT_MAX_NDIM];
    uint64_t b, e;
    const unsigned char *ptr;
} ckpt__tensor;

struct ckpt_file {
    unsigned char *data; /* data section (own block, max-aligned) */
    size_t data_len;
    unsigned char *realigned; /* copies of tensors whose offsets are misaligned */
    char *strings;            /* every name, key and value, NUL-terminated */
    ckpt__tensor *t;
    int nt;
    int *by_name; /* tensor indices sorted by name */
    size_t *mk_off, *mv_off;
    const char **mk, **mv;
    int nm;
    int format; /* 2: both checksums, 1: data checksum only, 0: neither (foreign file) */
};

typedef struct {
    const unsigned char *s;
    size_t n, i;
    ckpt__buf *arena;
    char *err;
    size_t errlen;
} ckpt__json;

static void ckpt__ws(ckpt__json *j)
{
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' || j->s[j->i] == '\r')) j->i++;
}

static int ckpt__jerr(ckpt__json *j, const char *what)
{
    if (j->i >= j->n)
        return ckpt__err(j->err, j->errlen, CKPT_EFORMAT, "header JSON: %s, found the end of the header (byte %zu)",
                         what, j->i);
    return ckpt__err(j->err, j->errlen, CKPT_EFORMAT, "header JSON: %s at byte %zu", what, j->i);
}

static int ckpt__expect(ckpt__json *j, char c, const char *what)
{
    ckpt__ws(j);
    if (j->i >= j->n || j->s[j->i] != (unsigned char)c) return ckpt__jerr(j, what);
    j->i++;
    return CKPT_OK;
}

static int ckpt__hex4(const unsigned char *p, unsigned *v)
{
    int k;
    *v = 0;
    for (k = 0; k < 4; k++) {
        unsigned c = p[k], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        *v = *v * 16 + d;
    }
    return 1;
}

/* Parses a string at j->i (after whitespace) into the arena (NUL-terminated);
   *off is where it starts. */
static int ckpt__jstring(ckpt__json *j, size_t *off)
{
    *off = 0;
    ckpt__ws(j);
    if (j->i >= j->n || j->s[j->i] != '"') return ckpt__jerr(j, "expected a string");
    j->i++;
    *off = j->arena->n;
    for (;;) {
        unsigned char c;
        if (j->i >= j->n) return ckpt__jerr(j, "unterminated string");
        c = j->s[j->i];
        if (c == '"') {
            j->i++;
            break;
        }
        if (c < 0x20) return ckpt__jerr(j, "control character in a string");
        if (c == '\\') {
            unsigned char e;
            if (j->i + 1 >= j->n) {
                j->i = j->n;
                return ckpt__jerr(j, "unterminated escape");
            }
            e = j->s[j->i + 1];
            j->i += 2;
            switch (e) {
            case '"': ckpt__putc(j->arena, '"'); break;
            case '\\': ckpt__putc(j->arena, '\\'); break;
            case '/': ckpt__putc(j->arena, '/'); break;
            case 'b': ckpt__putc(j->arena, '\b'); break;
            case 'f': ckpt__putc(j->arena, '\f'); break;
            case 'n': ckpt__putc(j->arena, '\n'); break;
            case 'r': ckpt__putc(j->arena, '\r'); break;
            case 't': ckpt__putc(j->arena, '\t'); break;
            case 'u': {
                unsigned u, lo;
                unsigned long cp;
                char o[4];
                int nb;
                if (j->i + 4 > j->n || !ckpt__hex4(j->s + j->i, &u)) return ckpt__jerr(j, "bad \\u escape");
                j->i += 4;
                if (u >= 0xDC00 && u <= 0xDFFF) return ckpt__jerr(j, "unpaired low surrogate in \\u escape");
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (j->i + 6 > j->n || j->s[j->i] != '\\' || j->s[j->i + 1] != 'u' || !ckpt__hex4(j->s + j->i + 2, &lo) ||
                        lo < 0xDC00 || lo > 0xDFFF)
                        return ckpt__jerr(j, "unpaired high surrogate in \\u escape");
                    j->i += 6;
                    cp = 0x10000ul + (((unsigned long)u - 0xD800ul) << 10) + ((unsigned long)lo - 0xDC00ul);
                } else {
                    cp = u;
                }
                if (cp == 0) return ckpt__jerr(j, "\\u0000 (NUL) is not allowed in names, keys or values");
                if (cp < 0x80) {
                    o[0] = (char)cp;
                    nb = 1;
                } else if (cp < 0x800) {
                    o[0] = (char)(0xC0 | (cp >> 6));
                    o[1] = (char)(0x80 | (cp & 0x3F));
                    nb = 2;
                } else if (cp < 0x10000) {
                    o[0] = (char)(0xE0 | (cp >> 12));
                    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    o[2] = (char)(0x80 | (cp & 0x3F));
                    nb = 3;
                } else {
                    o[0] = (char)(0xF0 | (cp >> 18));
                    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
                    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    o[3] = (char)(0x80 | (cp & 0x3F));
                    nb = 4;
                }
                ckpt__put(j->arena, o, (size_t)nb);
                break;
            }
            default: j->i -= 2; return ckpt__jerr(j, "invalid escape in a string");
            }
            continue;
        }
        if (c < 0x80) {
            ckpt__putc(j->arena, (char)c);
            j->i++;
        } else {
            size_t k = ckpt__utf8_len(j->s + j->i, j->n - j->i);
            if (!k) return ckpt__jerr(j, "invalid UTF-8 in a string");
            ckpt__put(j->arena, j->s + j->i, k);
            j->i += k;
        }
    }
    ckpt__putc(j->arena, 0); /* the terminator is part of the arena's content */
    if (j->arena->oom) return ckpt__err(j->err, j->errlen, CKPT_ENOMEM, "ckpt: out of memory");
    return CKPT_OK;
}

/* A JSON number that must be a non-negative integer <= INT64_MAX. */
static int ckpt__juint(ckpt__json *j, uint64_t *v, const char *what)
{
    size_t start;
    uint64_t x = 0;
    ckpt__ws(j);
    start = j->i;
    if (j->i < j->n && j->s[j->i] == '-') return ckpt__jerr(j, what);
    while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9') {
        unsigned d = (unsigned)(j->s[j->i] - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10) return ckpt__jerr(j, "integer too large");
        x = x * 10 + d;
        j->i++;
    }
    if (j->i == start) return ckpt__jerr(j, what);
    if (j->s[start] == '0' && j->i - start > 1) {
        j->i = start;
        return ckpt__jerr(j, "number with a leading zero");
    }
    if (j->i < j->n && (j->s[j->i] == '.' || j->s[j->i] == 'e' || j->s[j->i] == 'E'))
        return ckpt__jerr(j, "expected an integer (no fraction or exponent)");
    *v = x;
    return CKPT_OK;
}

/* Is the next (non-space) byte c? Consumes it if so. */
static int ckpt__jpeek(ckpt__json *j, char c)
{
    ckpt__ws(j);
    if (j->i < j->n && j->s[j->i] == (unsigned char)c) {
        j->i++;
        return 1;
    }
    return 0;
}

/* After a member: ',' (returns 1: another member follows) or close (returns 0). */
static int ckpt__jnext(ckpt__json *j, char close, int *more)
{
    if (ckpt__jpeek(j, ',')) {
        *more = 1;
        return CKPT_OK;
    }
    if (ckpt__jpeek(j, close)) {
        *more = 0;
        return CKPT_OK;
    }
    return ckpt__jerr(j, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

static int ckpt__parse_tensor(ckpt__json *j, ckpt__tensor *t, const char *name_for_msg)
{
    int rc, more;
    char nb[80];
    const char *nm = ckpt__show(name_for_msg, nb, sizeof nb);
    if ((rc = ckpt__expect(j, '{', "expected '{' for a tensor description")) != CKPT_OK) return rc;
    if (ckpt__jpeek(j, '}')) return CKPT_OK; /* missing fields reported by the caller */
    do {
        size_t koff = 0, save = j->arena->n;
        const char *key;
        if ((rc = ckpt__jstring(j, &koff)) != CKPT_OK) return rc;
        if ((rc = ckpt__expect(j, ':', "expected ':'")) != CKPT_OK) return rc;
        key = j->arena->p + koff;
        if (strcmp(key, "dtype") == 0) {
            size_t voff = 0;
            const char *v;
            if (t->have & 1) return ckpt__err(j->err, j->errlen, CKPT_EFORMAT, "tensor '%s': duplicate key 'dtype'", nm);
            j->arena->n = save;
            if ((rc = ckpt__jstring(j, &voff)) != CKPT_OK) return rc;
            v = j->arena->p + voff;
            if (strcmp(v, "F32") == 0) t->dtype = CKPT_F32;
            else if (strcmp(v, "F64") == 0) t->dtype = CKPT_F64;
            else if (strcmp(v, "I64") == 0) t->dtype = CKPT_I64;
            else if (strcmp(v, "I32") == 0) t->dtype = CKPT_I32;
            else if (strcmp(v, "U8") == 0) t->dtype = CKPT_U8;
            else {
                char vb[48];
                return ckpt__err(j->err, j->errlen, CKPT_EFORMAT,
                                 "tensor '%s': unsupported dtype '%s' (supported: F32 F64 I64 I32 U8)", nm,
                                 ckpt__show(v, vb, sizeof vb));
            }
            t->have |= 1;
        } else if (strcmp(key, "shape") == 0) {
            if (t->have & 2) return ckpt__err(j->err, j->errlen, CKPT_EFORMAT, "tensor '%s': duplicate key 'shape'", nm);
            if ((rc = ckpt__expect(j, '[', "expected '[' for the shape")) != CKPT_OK) return rc;
            t->ndim = 0;
            if (!ckpt__jpeek(j, ']')) {
                do {
                    uint64_t v;
                    if (t->ndim >= CKPT_MAX_NDIM)
                        return ckpt__err(j->err, j->errlen, CKPT_EFORMAT,
                                         "tensor '%s': more than %d dimensions are not supported", nm, CKPT_MAX_NDIM);
                    if ((rc = ckpt__juint(j, &v, "expected a non-negative integer dimension")) != CKPT_OK) return rc;
                    t->shape[t->ndim++] = (int64_t)v;
                    if ((rc = ckpt__jnext(j, ']', &more)) != CKPT_OK) return rc;
                } while (more);
            }
            t->have |= 2;
        } else if (strcmp(key, "data_offsets") == 0) {
            if (t->have & 4)
                return ckpt__err(j->err, j->errlen, CKPT_EFORMAT, "tensor '%s': duplicate key 'data_offsets'", nm);
            if ((rc = ckpt__expect(j, '[', "expected '[' for data_offsets")) != CKPT_OK) return rc;
            if ((rc = ckpt__juint(j, &t->b, "expected a non-negative integer offset")) != CKPT_OK) return rc;
            if ((rc = ckpt__expect(j, ',', "data_offsets must have exactly two entries")) != CKPT_OK) return rc;
            if ((rc = ckpt__juint(j, &t->e, "expected a non-negative integer offset")) != CKPT_OK) return rc;
            if ((rc = ckpt__expect(j, ']', "data_offsets must have exactly two entries")) != CKPT_OK) return rc;
            t->have |= 4;
        } else {
            char kb[48];
            return ckpt__err(j->err, j->errlen, CKPT_EFORMAT, "tensor '%s': unknown key '%s'", nm,
                             ckpt__show(key, kb, sizeof kb));
        }
        j->arena->n = save;
        if ((rc = ckpt__jnext(j, '}', &more)) != CKPT_OK) return rc;
    } while (more);
    return CKPT_OK;
}

static void ckpt__free_partial(ckpt_file *f)
{
    if (!f) return;
    free(f->data);
    free(f->realigned);
    free(f->strings);
    free(f->t);
    free(f->by_name);
    free(f->mk_off);
    free(f->mv_off);
    free((void *)f->mk);
    free((void *)f->mv);
    free(f);
}

void ckpt_close(ckpt_file *f) { ckpt__free_partial(f); }

/* Parse the JSON header hdr[0..n) into f (whose data/data_len are set). */
static int ckpt__parse_header(ckpt_file *f, const unsigned char *hdr, size_t n, char *err, size_t errlen)
{
    ckpt__json j;
    ckpt__buf arena = {NULL, 0, 0, 0};
    int rc = CKPT_OK, more, have_meta = 0, capt = 0, capm = 0;
    j.s = hdr;
    j.n = n;
    j.i = 0;
    j.arena = &arena;
    j.err = err;
    j.errlen = errlen;
    ckpt__putc(&arena, 0); /* offset 0 stays the empty string */
    if (n == 0) {
        rc = ckpt__err(err, errlen, CKPT_EFORMAT, "header JSON is empty");
        goto done;
    }
    if ((rc = ckpt__expect(&j, '{', "expected '{' at the start of the header")) != CKPT_OK) goto done;
    if (!ckpt__jpeek(&j, '}')) {
        do {
            size_t koff = 0;
            if ((rc = ckpt__jstring(&j, &koff)) != CKPT_OK) goto done;
            if ((rc = ckpt__expect(&j, ':', "expected ':'")) != CKPT_OK) goto done;
            if (strcmp(arena.p + koff, "__metadata__") == 0) {
                if (have_meta) {
                    rc = ckpt__err(err, errlen, CKPT_EFORMAT, "header JSON: duplicate key '__metadata__'");
                    goto done;
                }
                have_meta = 1;
                if ((rc = ckpt__expect(&j, '{', "__metadata__ must be an object")) != CKPT_OK) goto done;
                if (!ckpt__jpeek(&j, '}')) {
                    do {
                        size_t mk = 0, mv = 0;
                        if ((rc = ckpt__jstring(&j, &mk)) != CKPT_OK) goto done;
                        if ((rc = ckpt__expect(&j, ':', "expected ':'")) != CKPT_OK) goto done;
                        ckpt__ws(&j);
                        if (j.i < j.n && j.s[j.i] != '"') {
                            rc = ckpt__jerr(&j, "__metadata__ values must be strings");
                            goto done;
                        }
                        if ((rc = ckpt__jstring(&j, &mv)) != CKPT_OK) goto done;
                        if (f->nm == capm) {
                            int nc = capm ? capm * 2 : 8;
                            size_t *a = (size_t *)realloc(f->mk_off, (size_t)nc * sizeof *a), *b;
                            if (!a) goto oom;
                            f->mk_off = a;
                            b = (size_t *)realloc(f->mv_off, (size_t)nc * sizeof *b);
                            if (!b) goto oom;
                            f->mv_off = b;
                            capm = nc;
                        }
                        f->mk_off[f->nm] = mk;
                        f->mv_off[f->nm] = mv;
                        f->nm++;
                        if ((rc = ckpt__jnext(&j, '}', &more)) != CKPT_OK) goto done;
                    } while (more);
                }
            } else {
                ckpt__tensor *t;
                size_t klen = strlen(arena.p + koff);
                if (klen == 0 || klen > CKPT__MAX_NAME) {
                    rc = ckpt__err(err, errlen, CKPT_EFORMAT, "tensor name of %zu bytes (must be 1..%d)", klen,
                                   CKPT__MAX_NAME);
                    goto done;
                }
                if (f->nt == capt) {
                    int nc = capt ? capt * 2 : 16;
                    ckpt__tensor *a;
                    if (capt > INT_MAX / 4) goto oom;
                    a = (ckpt__tensor *)realloc(f->t, (size_t)nc * sizeof *a);
                    if (!a) goto oom;
                    f->t = a;
                    capt = nc;
                }
                t = &f->t[f->nt++];
                memset(t, 0, sizeof *t);
                t->name = koff;
                if ((rc = ckpt__parse_tensor(&j, t, arena.p + koff)) != CKPT_OK) goto done;
            }
            if ((rc = ckpt__jnext(&j, '}', &more)) != CKPT_OK) goto done;
        } while (more);
    }
    ckpt__ws(&j);
    if (j.i != j.n) {
        rc = ckpt__jerr(&j, "trailing bytes after the header's JSON object");
        goto done;
    }
    if (arena.oom) goto oom;
    f->strings = arena.p;
    arena.p = NULL;
    goto done;
oom:
    rc = ckpt__err(err, errlen, CKPT_ENOMEM, "ckpt: out of memory");
done:
    free(arena.p);
    return rc;
}

/* Stable merge sort of tensor indices by (b, e). */
static void ckpt__sort_by_offset(int *idx, int *tmp, int n, const ckpt__tensor *t)
{
    int w, i;
    for (w = 1; w < n; w *= 2) {
        for (i = 0; i < n; i += 2 * w) {
            int lo = i, mid = i + w < n ? i + w : n, hi = i + 2 * w < n ? i + 2 * w : n;
            int a = lo, b = mid, k = lo;
            while (a < mid && b < hi) {
                const ckpt__tensor *x = &t[idx[a]], *y = &t[idx[b]];
                int ylt = y->b < x->b || (y->b == x->b && y->e < x->e);
                tmp[k++] = ylt ? idx[b++] : idx[a++];
            }
            while (a < mid) tmp[k++] = idx[a++];
            while (b < hi) tmp[k++] = idx[b++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

/* Everything after the JSON parse: names, sizes, tiling, CRC, alignment. */
static int ckpt__validate(ckpt_file *f, char *err, size_t errlen)
{
    int i, nt = f->nt, *tmp = NULL, *byoff = NULL, rc = CKPT_OK;
    const char **names = NULL;
    char nb[80], nb2[80];
    uint64_t pos;
    size_t realign_bytes = 0;
    /* pointers into the string arena */
    for (i = 0; i < nt; i++) f->t[i].name_p = f->strings + f->t[i].name;
    if (f->nm > 0) {
        f->mk = (const char **)malloc((size_t)f->nm * sizeof *f->mk);
        f->mv = (const char **)malloc((size_t)f->nm * sizeof *f->mv);
        if (!f->mk || !f->mv) goto oom;
        for (i = 0; i < f->nm; i++) {
            f->mk[i] = f->strings + f->mk_off[i];
            f->mv[i] = f->strings + f->mv_off[i];
        }
        i = ckpt__find_dup(f->mk, f->nm);
        if (i == -2) goto oom;
        if (i >= 0)
            return ckpt__err(err, errlen, CKPT_EFORMAT, "header JSON: duplicate metadata key '%s'",
                             ckpt__show(f->mk[i], nb, sizeof nb));
    }
    /* names: sorted index, duplicates */
    f->by_name = (int *)malloc((size_t)(nt ? nt : 1) * sizeof *f->by_name);
    tmp = (int *)malloc((size_t)(nt ? nt : 1) * sizeof *tmp);
    byoff = (int *)malloc((size_t)(nt ? nt : 1) * sizeof *byoff);
    names = (const char **)calloc((size_t)(nt ? nt : 1), sizeof *names);
    if (!f->by_name || !tmp || !byoff || !names) goto oom;
    for (i = 0; i < nt; i++) {
        f->by_name[i] = i;
        names[i] = f->t[i].name_p;
    }
    ckpt__sort_by_name(f->by_name, tmp, nt, names);
    for (i = 1; i < nt; i++)
        if (strcmp(names[f->by_name[i]], names[f->by_name[i - 1]]) == 0) {
            rc = ckpt__err(err, errlen, CKPT_EFORMAT, "header JSON: duplicate tensor name '%s'",
                           ckpt__show(names[f->by_name[i]], nb, sizeof nb));
            goto done;
        }
    /* per tensor: fields, sizes, range */
    for (i = 0; i < nt; i++) {
        ckpt__tensor *t = &f->t[i];
        ckpt_entry e;
        uint64_t bytes;
        const char *nm = ckpt__show(t->name_p, nb, sizeof nb);
        if (t->have != 7) {
            rc = ckpt__err(err, errlen, CKPT_EFORMAT, "tensor '%s': missing '%s'", nm,
                           !(t->have & 1) ? "dtype" : !(t->have & 2) ? "shape" : "data_offsets");
            goto done;
        }
        e.dtype = t->dtype;
        e.ndim = t->ndim;
        memcpy(e.shape, t->shape, sizeof e.shape);
        if (!ckpt__entry_bytes(&e, &bytes)) {
            char sh[128];
            ckpt__fmt_shape(sh, sizeof sh, t->ndim, t->shape);
            rc = ckpt__err(err, errlen, CKPT_EFORMAT, "tensor '%s': shape %s overflows (too many elements)", nm, sh);
            goto done;
        }
        if (t->e < t->b) {
            rc = ckpt__err(err, errlen, CKPT_EFORMAT, "tensor '%s': data_offsets [%llu,%llu] end before they begin", nm,
                           (unsigned long long)t->b, (unsigned long long)t->e);
            goto done;
        }
        if (t->e > (uint64_t)f->data_len) {
            rc = ckpt__err(err, errlen, CKPT_EFORMAT,
                           "tensor '%s': data_offsets [%llu,%llu] outside the data section (%zu bytes; file truncated?)",
                           nm, (unsigned long long)t->b, (unsigned long long)t->e, f->data_len);
            goto done;
        }
        if (t->e - t->b != bytes) {
            char sh[128];
            ckpt__fmt_shape(sh, sizeof sh, t->ndim, t->shape);
            rc = ckpt__err(err, errlen, CKPT_EFORMAT,
                           "tensor '%s': data_offsets [%llu,%llu] hold %llu bytes but %s %s needs %llu", nm,
                           (unsigned long long)t->b, (unsigned long long)t->e, (unsigned long long)(t->e - t->b),
                           ckpt_dtype_name(t->dtype), sh, (unsigned long long)bytes);
            goto done;
        }
    }
    /* tiling: sorted by offset, each begins where the previous ended */
    for (i = 0; i < nt; i++) byoff[i] = i;
    ckpt__sort_by_offset(byoff, tmp, nt, f->t);
    pos = 0;
    for (i = 0; i < nt; i++) {
        const ckpt__tensor *t = &f->t[byoff[i]];
        if (t->b < pos) {
            const ckpt__tensor *pt = &f->t[byoff[i - 1]];
            rc = ckpt__err(err, errlen, CKPT_EFORMAT, "tensors '%s' [%llu,%llu] and '%s' [%llu,%llu] overlap",
                           ckpt__show(pt->name_p, nb, sizeof nb), (unsigned long long)pt->b, (unsigned long long)pt->e,
                           ckpt__show(t->name_p, nb2, sizeof nb2), (unsigned long long)t->b, (unsigned long long)t->e);
            goto done;
        }
        if (t->b > pos) {
            rc = ckpt__err(err, errlen, CKPT_EFORMAT,
                           "data section bytes [%llu,%llu) belong to no tensor (holes are not allowed; next: '%s')",
                           (unsigned long long)pos, (unsigned long long)t->b, ckpt__show(t->name_p, nb, sizeof nb));
            goto done;
        }
        pos = t->e;
    }
    if (pos != (uint64_t)f->data_len) {
        rc = ckpt__err(err, errlen, CKPT_EFORMAT, "data section has %llu bytes after the last tensor (size %zu)",
                       (unsigned long long)((uint64_t)f->data_len - pos), f->data_len);
        goto done;
    }
    /* checksums: the header's (format 2) over what was parsed, then the data's */
    {
        const char *c = ckpt_meta(f, CKPT__CRC_KEY), *hc = ckpt_meta(f, CKPT__HCRC_KEY);
        uint32_t table[8][256], want = 0, got;
        if (c || hc) ckpt__crc_table(table);
        if (hc) {
            if (ckpt__parse_crc(hc, &want) != 0) {
                rc = ckpt__err(err, errlen, CKPT_EFORMAT, "metadata '%s' is not 8 hex digits", CKPT__HCRC_KEY);
                goto done;
            }
            if (!c) {
                rc = ckpt__err(err, errlen, CKPT_EFORMAT, "header has '%s' but no '%s' (edited header)", CKPT__HCRC_KEY,
                               CKPT__CRC_KEY);
                goto done;
            }
            got = ckpt__hcrc_begin(table);
            for (i = 0; i < f->nm; i++)
                if (strcmp(f->mk[i], CKPT__HCRC_KEY) != 0) got = ckpt__hcrc_meta(table, got, f->mk[i], f->mv[i]);
            for (i = 0; i < nt; i++) {
                const ckpt__tensor *t = &f->t[i];
                got = ckpt__hcrc_tensor(table, got, t->name_p, t->dtype, t->ndim, t->shape, t->b, t->e);
            }
            if (got != want) {
                rc = ckpt__err(err, errlen, CKPT_EFORMAT,
                               "header checksum mismatch: names, metadata or offsets were changed (hcrc32 %08lx in "
                               "the header, %08lx computed)",
                               (unsigned long)want, (unsigned long)got);
                goto done;
            }
        }
        if (c) {
            if (ckpt__parse_crc(c, &want) != 0) {
                rc = ckpt__err(err, errlen, CKPT_EFORMAT, "metadata '%s' is not 8 hex digits", CKPT__CRC_KEY);
                goto done;
            }
            got = ckpt__crc_update(table, 0, f->data, f->data_len);
            if (got != want) {
                rc = ckpt__err(err, errlen, CKPT_EFORMAT,
                               "checksum mismatch: file corrupted (crc32 %08lx in the header, %08lx computed)",
                               (unsigned long)want, (unsigned long)got);
                goto done;
            }
        }
        f->format = hc ? 2 : c ? 1 : 0;
    }
    /* data pointers; misaligned non-U8 tensors get an aligned copy */
    for (i = 0; i < nt; i++) {
        ckpt__tensor *t = &f->t[i];
        size_t sz = ckpt_dtype_size(t->dtype);
        if (t->b % sz != 0 && t->e > t->b) realign_bytes += ((size_t)(t->e - t->b) + 7u) & ~(size_t)7u;
    }
    if (realign_bytes) {
        f->realigned = (unsigned char *)malloc(realign_bytes);
        if (!f->realigned) goto oom;
    }
    realign_bytes = 0;
    for (i = 0; i < nt; i++) {
        ckpt__tensor *t = &f->t[i];
        size_t sz = ckpt_dtype_size(t->dtype), len = (size_t)(t->e - t->b);
        if (len == 0) {
            t->ptr = f->data; /* never read; aligned */
        } else if (t->b % sz != 0) {
            memcpy(f->realigned + realign_bytes, f->data + t->b, len);
            t->ptr = f->realigned + realign_bytes;
            realign_bytes += (len + 7u) & ~(size_t)7u;
        } else {
            t->ptr = f->data + t->b;
        }
    }
    goto done;
oom:
    rc = ckpt__err(err, errlen, CKPT_ENOMEM, "ckpt: out of memory");
done:
    free(tmp);
    free(byoff);
    free(names);
    return rc;
}

/* Takes ownership of nothing: copies header and data out of the caller's views. */
static int ckpt__open_parts(ckpt_file **out, const unsigned char *hdr, size_t hlen, unsigned char *data,
                            size_t dlen, char *err, size_t errlen)
{
    ckpt_file *f = (ckpt_file *)calloc(1, sizeof *f);
    int rc;
    if (!f) {
        free(data);
        return ckpt__err(err, errlen, CKPT_ENOMEM, "ckpt: out of memory");
    }
    f->data = data;
    f->data_len = dlen;
    rc = ckpt__parse_header(f, hdr, hlen, err, errlen);
    if (rc == CKPT_OK) rc = ckpt__validate(f, err, errlen);
    if (rc != CKPT_OK) {
        ckpt__free_partial(f);
        return rc;
    }
    *out = f;
    return CKPT_OK;
}

static uint64_t ckpt__le64(const unsigned char *p)
{
    uint64_t v = 0;
    int k;
    for (k = 7; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}

int ckpt_open_mem(ckpt_file **out, const void *buf, size_t len, char *err, size_t errlen)
{
    const unsigned char *p = (const unsigned char *)buf;
    uint64_t hlen;
    size_t dlen;
    unsigned char *data;
    if (!out) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_open_mem: NULL output");
    *out = NULL;
    if (!buf && len) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_open_mem: NULL buffer");
    if (!ckpt__little_endian()) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt: big-endian hosts are not supported");
    if (len < 8)
        return ckpt__err(err, errlen, CKPT_EFORMAT,
                         len == 0 ? "empty checkpoint (0 bytes)"
                                  : "truncated checkpoint: %zu bytes, shorter than the 8-byte header length",
                         len);
    hlen = ckpt__le64(p);
    if (hlen > CKPT__MAX_HEADER)
        return ckpt__err(err, errlen, CKPT_EFORMAT, "header length %llu exceeds the limit of %llu bytes (not a safetensors file?)",
                         (unsigned long long)hlen, (unsigned long long)CKPT__MAX_HEADER);
    if (hlen > (uint64_t)(len - 8))
        return ckpt__err(err, errlen, CKPT_EFORMAT,
                         "header length %llu exceeds the %zu bytes that follow it (truncated or not a safetensors file)",
                         (unsigned long long)hlen, len - 8);
    dlen = len - 8 - (size_t)hlen;
    data = (unsigned char *)malloc(dlen ? dlen : 1);
    if (!data) return ckpt__err(err, errlen, CKPT_ENOMEM, "ckpt: out of memory (%zu bytes)", dlen);
    if (dlen) memcpy(data, p + 8 + hlen, dlen);
    return ckpt__open_parts(out, p + 8, (size_t)hlen, data, dlen, err, errlen);
}

static int ckpt__read_all(int fd, void *dst, size_t n)
{
    char *p = (char *)dst;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = read(fd, p, chunk);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) {
            errno = 0; /* unexpected end of file */
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int ckpt_open(ckpt_file **out, const char *path, char *err, size_t errlen)
{
    int fd, rc, e;
    struct stat st;
    unsigned char lenb[8], *hdr = NULL, *data = NULL;
    uint64_t hlen, fsize;
    size_t dlen;
    if (!out) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_open: NULL output");
    *out = NULL;
    if (!path) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_open: NULL path");
    if (!ckpt__little_endian()) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt: big-endian hosts are not supported");
    /* O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; anything but
       a regular file is refused below, before a read */
    fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        e = errno;
        return ckpt__err(err, errlen, CKPT_EIO, "cannot open '%s': %s", path, strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        e = errno;
        close(fd);
        return ckpt__err(err, errlen, CKPT_EIO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ckpt__err(err, errlen, CKPT_EIO, "'%s' is not a regular file", path);
    }
    {   /* back to blocking reads for the regular file */
        int fl = fcntl(fd, F_GETFL);
        if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1) {
            e = errno;
            close(fd);
            return ckpt__err(err, errlen, CKPT_EIO, "cannot read '%s': %s", path, strerror(e));
        }
    }
    fsize = (uint64_t)st.st_size;
    if (fsize < 8) {
        close(fd);
        return ckpt__err(err, errlen, CKPT_EFORMAT,
                         fsize == 0 ? "'%s': empty file (0 bytes)"
                                    : "'%s': truncated: %llu bytes, shorter than the 8-byte header length",
                         path, (unsigned long long)fsize);
    }
    if (ckpt__read_all(fd, lenb, 8) != 0) goto rd;
    hlen = ckpt__le64(lenb);
    if (hlen > CKPT__MAX_HEADER) {
        close(fd);
        return ckpt__err(err, errlen, CKPT_EFORMAT,
                         "'%s': header length %llu exceeds the limit of %llu bytes (not a safetensors file?)", path,
                         (unsigned long long)hlen, (unsigned long long)CKPT__MAX_HEADER);
    }
    if (hlen > fsize - 8) {
        close(fd);
        return ckpt__err(err, errlen, CKPT_EFORMAT,
                         "'%s': header length %llu exceeds the %llu bytes that follow it (truncated or not a safetensors file)",
                         path, (unsigned long long)hlen, (unsigned long long)(fsize - 8));
    }
    if (fsize - 8 - hlen > (uint64_t)((size_t)-1) - 1) {
        close(fd);
        return ckpt__err(err, errlen, CKPT_ENOMEM, "'%s': too large for memory", path);
    }
    dlen = (size_t)(fsize - 8 - hlen);
    hdr = (unsigned char *)malloc((size_t)hlen + 1);
    data = (unsigned char *)malloc(dlen ? dlen : 1);
    if (!hdr || !data) {
        free(hdr);
        free(data);
        close(fd);
        return ckpt__err(err, errlen, CKPT_ENOMEM, "'%s': out of memory (%zu bytes)", path, dlen);
    }
    if (ckpt__read_all(fd, hdr, (size_t)hlen) != 0 || ckpt__read_all(fd, data, dlen) != 0) goto rd;
    close(fd);
    rc = ckpt__open_parts(out, hdr, (size_t)hlen, data, dlen, err, errlen);
    free(hdr);
    if (rc != CKPT_OK && err && errlen > 0) {
        /* prefix the path */
        size_t m = strlen(path) + strlen(err) + 8;
        char *msg = (char *)malloc(m);
        if (msg) {
            snprintf(msg, m, "'%s': %s", path, err);
            snprintf(err, errlen, "%s", msg);
            free(msg);
        }
    }
    return rc;
rd:
    e = errno;
    free(hdr);
    free(data);
    close(fd);
    return ckpt__err(err, errlen, CKPT_EIO, "'%s': read failed: %s", path,
                     e ? strerror(e) : "unexpected end of file (file changed while reading?)");
}

int ckpt_format(const ckpt_file *f) { return f ? f->format : 0; }

int ckpt_count(const ckpt_file *f) { return f ? f->nt : 0; }

static void ckpt__fill(const ckpt_file *f, int i, ckpt_entry *e)
{
    const ckpt__tensor *t = &f->t[i];
    int d;
    e->name = t->name_p;
    e->dtype = t->dtype;
    e->ndim = t->ndim;
    for (d = 0; d < CKPT_MAX_NDIM; d++) e->shape[d] = d < t->ndim ? t->shape[d] : 0;
    e->data = t->ptr;
}

int ckpt_entry_at(const ckpt_file *f, int i, ckpt_entry *e)
{
    if (!f || !e || i < 0 || i >= f->nt) return CKPT_EINVAL;
    ckpt__fill(f, i, e);
    return CKPT_OK;
}

static int ckpt__lookup(const ckpt_file *f, const char *name)
{
    int lo = 0, hi = f->nt - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->t[f->by_name[mid]].name_p, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int ckpt_find(const ckpt_file *f, const char *name, ckpt_entry *e)
{
    int i;
    if (!f || !name || !e) return CKPT_EINVAL;
    i = ckpt__lookup(f, name);
    if (i < 0) return CKPT_ENOTFOUND;
    ckpt__fill(f, i, e);
    return CKPT_OK;
}

int ckpt_read_into(const ckpt_file *f, const char *name, int dtype, int ndim, const int64_t *shape, void *dst,
                   char *err, size_t errlen)
{
    const ckpt__tensor *t;
    char nb[80];
    int i, d, same;
    if (!f || !name) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_read_into: NULL argument");
    if (!ckpt_dtype_name(dtype) || ndim < 0 || ndim > CKPT_MAX_NDIM || (ndim > 0 && !shape))
        return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_read_into: %s: bad expected dtype/ndim/shape",
                         ckpt__show(name, nb, sizeof nb));
    i = ckpt__lookup(f, name);
    if (i < 0)
        return ckpt__err(err, errlen, CKPT_ENOTFOUND, "%s: not found in the checkpoint", ckpt__show(name, nb, sizeof nb));
    t = &f->t[i];
    if (t->dtype != dtype)
        return ckpt__err(err, errlen, CKPT_EMISMATCH, "%s: dtype %s in file, %s expected", ckpt__show(name, nb, sizeof nb),
                         ckpt_dtype_name(t->dtype), ckpt_dtype_name(dtype));
    same = t->ndim == ndim;
    for (d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char a[128], b[128];
        ckpt__fmt_shape(a, sizeof a, t->ndim, t->shape);
        ckpt__fmt_shape(b, sizeof b, ndim, shape);
        return ckpt__err(err, errlen, CKPT_EMISMATCH, "%s: shape %s in file, %s expected", ckpt__show(name, nb, sizeof nb),
                         a, b);
    }
    if (t->e > t->b) {
        if (!dst) return ckpt__err(err, errlen, CKPT_EINVAL, "ckpt_read_into: %s: NULL destination", name);
        memcpy(dst, f->data + t->b, (size_t)(t->e - t->b));
    }
    return CKPT_OK;
}

const char *ckpt_meta(const ckpt_file *f, const char *key)
{
    int i;
    if (!f || !key) return NULL;
    for (i = 0; i < f->nm; i++)
        if (strcmp(f->mk[i], key) == 0) return f->mv[i];
    return NULL;
}

int ckpt_meta_count(const ckpt_file *f) { return f ? f->nm : 0; }

int ckpt_meta_at(const ckpt_file *f, int i, const char **key, const char **val)
{
    if (!f || i < 0 || i >= f->nm) return CKPT_EINVAL;
    if (key) *key = f->mk[i];
    if (val) *val = f->mv[i];
    return CKPT_OK;
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
