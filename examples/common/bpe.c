/* bpe.c - GPT-2 byte-level BPE tokenizer. See bpe.h for the documentation. */
#include "bpe.h"
#include "unicode_tables.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <stb_ds.h>
/* stb_ds takes the address of rvalue keys with typeof(), which gcc rejects under
   -std=c99; every key passed below is an lvalue, so plain & is enough. */
#undef STBDS_ADDRESSOF
#define STBDS_ADDRESSOF(typevar, value) &(value)

#ifndef ATTNKIT_DATA_DIR
#define ATTNKIT_DATA_DIR "../shared/data"
#endif

#define BPE__MAX_FILE ((size_t)256 << 20)
#define BPE__MAX_VOCAB (1 << 24)
#define BPE__NO_RANK INT32_MAX

/* merge table: open addressing on the pair key (left << 32 | right); empty: key ~0 */
typedef struct { uint64_t key; int32_t rank, id; } bpe__merge;
typedef struct { uint64_t h; uint32_t e; } bpe__slot; /* e: entry index + 1; 0 empty */
typedef struct { size_t boff, ioff; uint32_t blen, nids; } bpe__centry;

struct bpe_tokenizer {
    int n_vocab, n_merges, eot;
    int32_t byte_id[256];        /* id of each single-byte token */
    unsigned char *tok_bytes;    /* all token bytes, concatenated */
    size_t *tok_off;             /* (n_vocab + 1) offsets into tok_bytes */
    bpe__merge *merges;          /* nmslots slots (power of 2), at most half full */
    size_t nmslots;
    int mbits;
    /* word cache */
    bpe__slot *slots;            /* open addressing, hash(word) -> entry; cap a power of 2 */
    size_t nslots, nused;
    bpe__centry *centries;       /* stb_ds array */
    unsigned char *cbytes;       /* stb_ds array */
    int32_t *cids;               /* stb_ds array */
    size_t cache_limit, hits, misses;
    /* scratch for one word */
    int32_t *sym, *rk;
    size_t scratch_cap;
    size_t heap_min;             /* words of at least this many bytes use the heap path */
    size_t max_piece;            /* pieces longer than this are merged in chunks (0: no cap) */
};

/* ------------------------------------------------------------------ utilities */

const char *bpe_strerror(int err)
{
    switch (err) {
    case BPE_OK: return "ok";
    case BPE_EINVAL: return "invalid argument";
    case BPE_ENOMEM: return "out of memory";
    case BPE_ERANGE: return "value out of range";
    case BPE_EIO: return "I/O error";
    case BPE_EFORMAT: return "malformed file";
    default: return "unknown error";
    }
}

static int bpe__err(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *bpe_default_data_dir(void)
{
    const char *e = getenv("WT2_DIR");
    if (e && e[0]) return e;
    return ATTNKIT_DATA_DIR;
}

int bpe_ids_push(bpe_ids *v, int32_t id)
{
    if (!v) return BPE_EINVAL;
    if (v->n == v->cap) {
        size_t nc = v->cap ? v->cap * 2 : 256;
        int32_t *p = (int32_t *)realloc(v->data, nc * sizeof(int32_t));
        if (!p) return BPE_ENOMEM;
        v->data = p;
        v->cap = nc;
    }
    v->data[v->n++] = id;
    return BPE_OK;
}

static int bpe__ids_reserve(bpe_ids *v, size_t extra)
{
    if (v->cap - v->n < extra) {
        size_t nc = v->cap ? v->cap : 256;
        int32_t *p;
        while (nc - v->n < extra) {
            if (nc > ((size_t)-1) / 4 / sizeof(int32_t)) return BPE_ENOMEM;
            nc *= 2;
        }
        p = (int32_t *)realloc(v->data, nc * sizeof(int32_t));
        if (!p) return BPE_ENOMEM;
        v->data = p;
        v->cap = nc;
    }
    return BPE_OK;
}

void bpe_ids_free(bpe_ids *v)
{
    if (!v) return;
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

int bpe_bytes_append(bpe_bytes *v, const void *data, size_t n)
{
    if (!v || (!data && n)) return BPE_EINVAL;
    if (v->cap - v->n < n) {
        size_t nc = v->cap ? v->cap : 256;
        unsigned char *p;
        while (nc - v->n < n) {
            if (nc > ((size_t)-1) / 4) return BPE_ENOMEM;
            nc *= 2;
        }
        p = (unsigned char *)realloc(v->data, nc);
        if (!p) return BPE_ENOMEM;
        v->data = p;
        v->cap = nc;
    }
    if (n) memcpy(v->data + v->n, data, n);
    v->n += n;
    return BPE_OK;
}

void bpe_bytes_free(bpe_bytes *v)
{
    if (!v) return;
    free(v->data);
    v->data = NULL;
    v->n = v->cap = 0;
}

int bpe_read_file(const char *path, size_t max_bytes, unsigned char **data, size_t *len,
                  char *err, size_t errlen)
{
    FILE *f;
    unsigned char *buf = NULL;
    size_t n = 0, cap = 0;
    if (!path || !data || !len) return bpe__err(err, errlen, BPE_EINVAL, "bpe_read_file: NULL argument");
    *data = NULL;
    *len = 0;
    {   /* a directory opens (and reads as an error) on some systems: refused by name */
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            return bpe__err(err, errlen, BPE_EIO, "%s is a directory, not a file", path);
    }
    f = fopen(path, "rb");
    if (!f) return bpe__err(err, errlen, BPE_EIO, "cannot open %s: %s", path, strerror(errno));
    errno = 0;
    for (;;) {
        size_t got;
        if (cap - n < 65536) {
            size_t nc = cap ? cap * 2 : 1 << 20;
            unsigned char *p;
            if (nc > max_bytes + 65537) nc = max_bytes + 65537;
            if (nc <= cap) {
                free(buf);
                fclose(f);
                return bpe__err(err, errlen, BPE_ERANGE, "%s: larger than %zu bytes", path, max_bytes);
            }
            p = (unsigned char *)realloc(buf, nc);
            if (!p) {
                free(buf);
                fclose(f);
                return bpe__err(err, errlen, BPE_ENOMEM, "%s: out of memory", path);
            }
            buf = p;
            cap = nc;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n > max_bytes) {
            free(buf);
            fclose(f);
            return bpe__err(err, errlen, BPE_ERANGE, "%s: larger than %zu bytes", path, max_bytes);
        }
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        fclose(f);
        return bpe__err(err, errlen, BPE_EIO, "read error on %s: %s", path, e ? strerror(e) : "I/O error");
    }
    fclose(f);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return BPE_OK;
}

/* ------------------------------------------------------------------ Unicode */

int bpe_codepoint_class(uint32_t cp)
{
    int lo = 0, hi = BPE_UC_NRANGES - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < bpe_uc_ranges[mid].lo) hi = mid - 1;
        else if (cp > bpe_uc_ranges[mid].hi) lo = mid + 1;
        else return bpe_uc_ranges[mid].cls;
    }
    return BPE_UC_OTHER;
}

const char *bpe_unicode_version(void) { return BPE_UNICODE_VERSION; }

/* ASCII classes (the same answers as the generated table; checked by test_bpe). */
static const unsigned char bpe__ascii_cls[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 0, 0, /* \t \n \v \f \r */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* space */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, /* digits */
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};

/* Decode one UTF-8 code point at s[0..n) (n >= 1). Returns its length (1..4) and the
   code point in *cp; an ill-formed sequence gives length 1 and *cp = UINT32_MAX. */
static int bpe__utf8(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) {
        if (n >= 2 && (s[1] & 0xC0) == 0x80) {
            *cp = ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
            return 2;
        }
    } else if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = (c == 0xE0) ? 0xA0 : 0x80, hi = (c == 0xED) ? 0x9F : 0xBF;
        if (n >= 3 && s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80) {
            *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
            return 3;
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = (c == 0xF0) ? 0x90 : 0x80, hi = (c == 0xF4) ? 0x8F : 0xBF;
        if (n >= 4 && s[1] >= lo && s[1] <= hi && (s[2] & 0xC0) == 0x80 && (s[3] & 0xC0) == 0x80) {
            *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                  ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
            return 4;
        }
    }
    *cp = UINT32_MAX;
    return 1;
}

/* Class and length of the character at s[p] (p < n). */
static int bpe__cls_at(const unsigned char *s, size_t n, size_t p, int *len)
{
    uint32_t cp;
    if (s[p] < 0x80) {
        *len = 1;
        return bpe__ascii_cls[s[p]];
    }
    *len = bpe__utf8(s + p, n - p, &cp);
    if (cp == UINT32_MAX) return BPE_UC_OTHER;
    return bpe_codepoint_class(cp);
}

size_t bpe_next_piece(const unsigned char *s, size_t n, size_t p)
{
    int c0, c1, l0, l1, len;
    size_t q, last;
    if (!s || p >= n) return n;
    /* 's 't 're 've 'm 'll 'd (ASCII apostrophe, lower case, as in the pattern) */
    if (s[p] == '\'' && p + 1 < n) {
        unsigned char a = s[p + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return p + 2;
        if (p + 2 < n) {
            unsigned char b = s[p + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                return p + 3;
        }
    }
    c0 = bpe__cls_at(s, n, p, &l0);
    /* " ?X+" for X = letter, number, other: an optional U+0020 then a run of one class */
    if (s[p] == ' ' && p + 1 < n) {
        c1 = bpe__cls_at(s, n, p + 1, &l1);
        if (c1 != BPE_UC_SPACE) {
            q = p + 1 + (size_t)l1;
            while (q < n && bpe__cls_at(s, n, q, &len) == c1) q += (size_t)len;
            return q;
        }
    }
    if (c0 != BPE_UC_SPACE) {
        q = p + (size_t)l0;
        while (q < n && bpe__cls_at(s, n, q, &len) == c0) q += (size_t)len;
        return q;
    }
    /* whitespace run: "\s+(?!\S)" keeps all of it at the end of the text, else all but
       its last character (so that character can prefix the next word); "\s+" takes a
       single whitespace character followed by a non-space. */
    q = p + (size_t)l0;
    last = p;
    while (q < n) {
        c1 = bpe__cls_at(s, n, q, &len);
        if (c1 != BPE_UC_SPACE) break;
        last = q;
        q += (size_t)len;
    }
    if (q == n) return q;
    if (last > p) return last;
    return q;
}

/* ------------------------------------------------------------------ byte alphabet */

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the other 68 bytes to
   256, 257, ... in byte order. */
static void bpe__byte_alphabet(uint32_t cp_of_byte[256], int16_t byte_of_cp[324])
{
    int b, k = 0;
    for (b = 0; b < 324; b++) byte_of_cp[b] = -1;
    for (b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
        cp_of_byte[b] = printable ? (uint32_t)b : (uint32_t)(256 + k++);
        byte_of_cp[cp_of_byte[b]] = (int16_t)b;
    }
}

/* ------------------------------------------------------------------ JSON */

typedef struct {
    const unsigned char *s;
    size_t n, p;
    char *err;
    size_t errlen;
} bpe__json;

static void bpe__json_ws(bpe__json *j)
{
    while (j->p < j->n && (j->s[j->p] == ' ' || j->s[j->p] == '\t' || j->s[j->p] == '\n' ||
                           j->s[j->p] == '\r'))
        j->p++;
}

static int bpe__hex4(const unsigned char *s, uint32_t *v)
{
    int i;
    *v = 0;
    for (i = 0; i < 4; i++) {
        unsigned c = s[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        *v = (*v << 4) | d;
    }
    return 1;
}

/* Parse a JSON string at j->p (which is at '"'); append its code points to *cps
   (stb_ds array). */
static int bpe__json_string(bpe__json *j, uint32_t **cps)
{
    size_t start = j->p;
    if (j->p >= j->n || j->s[j->p] != '"')
        return bpe__err(j->err, j->errlen, BPE_EFORMAT, "encoder.json: expected '\"' at byte %zu", j->p);
    j->p++;
    for (;;) {
        unsigned c;
        uint32_t cp;
        if (j->p >= j->n)
            return bpe__err(j->err, j->errlen, BPE_EFORMAT,
                            "encoder.json: unterminated string starting at byte %zu", start);
        c = j->s[j->p];
        if (c == '"') {
            j->p++;
            return BPE_OK;
        }
        if (c < 0x20)
            return bpe__err(j->err, j->errlen, BPE_EFORMAT,
                            "encoder.json: control character 0x%02x in string at byte %zu", c, j->p);
        if (c == '\\') {
            unsigned e;
            if (j->p + 1 >= j->n)
                return bpe__err(j->err, j->errlen, BPE_EFORMAT, "encoder.json: truncated escape at byte %zu", j->p);
            e = j->s[j->p + 1];
            j->p += 2;
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = 8; break;
            case 'f': cp = 12; break;
            case 'n': cp = 10; break;
            case 'r': cp = 13; break;
            case 't': cp = 9; break;
            case 'u':
                if (j->n - j->p < 4 || !bpe__hex4(j->s + j->p, &cp))
                    return bpe__err(j->err, j->errlen, BPE_EFORMAT, "encoder.json: bad \\u escape at byte %zu", j->p - 2);
                j->p += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (j->n - j->p < 6 || j->s[j->p] != '\\' || j->s[j->p + 1] != 'u' ||
                        !bpe__hex4(j->s + j->p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                        return bpe__err(j->err, j->errlen, BPE_EFORMAT,
                                        "encoder.json: unpaired high surrogate \\u%04X at byte %zu",
                                        (unsigned)cp, j->p - 6);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    j->p += 6;
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return bpe__err(j->err, j->errlen, BPE_EFORMAT,
                                    "encoder.json: unpaired low surrogate \\u%04X at byte %zu",
                                    (unsigned)cp, j->p - 6);
                }
                break;
            default:
                return bpe__err(j->err, j->errlen, BPE_EFORMAT,
                                "encoder.json: invalid escape '\\%c' at byte %zu",
                                (e >= 0x20 && e < 0x7F) ? (int)e : '?', j->p - 2);
            }
        } else {
            int l = bpe__utf8(j->s + j->p, j->n - j->p, &cp);
            if (cp == UINT32_MAX)
                return bpe__err(j->err, j->errlen, BPE_EFORMAT, "encoder.json: invalid UTF-8 at byte %zu", j->p);
            j->p += (size_t)l;
        }
        arrput(*cps, cp);
    }
}

/* Encode code point cp (valid, not a surrogate) as UTF-8 into out (4 bytes). */
static int bpe__put_utf8(uint32_t cp, char *out)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ------------------------------------------------------------------ loading */

typedef struct { char *key; int value; } bpe__str_kv;

typedef struct {
    bpe__str_kv *map;     /* canonical UTF-8 of the token in the byte alphabet -> id */
    uint32_t *cps;        /* scratch */
    char *key;            /* scratch (stb_ds array) */
    unsigned char **tokb; /* per id: malloc'ed bytes */
    size_t *tokl;         /* per id: length */
    int32_t *ids_seen;    /* stb_ds array of ids in file order */
} bpe__loader;

static void bpe__loader_free(bpe__loader *L, int n)
{
    int i;
    shfree(L->map);
    arrfree(L->cps);
    arrfree(L->key);
    if (L->tokb)
        for (i = 0; i < n; i++) free(L->tokb[i]);
    free(L->tokb);
    free(L->tokl);
    arrfree(L->ids_seen);
}

/* Parse encoder.json into L (tokens by id) and tok->n_vocab. */
static int bpe__parse_encoder(bpe_tokenizer *tok, bpe__loader *L, const unsigned char *s,
                              size_t n, char *err, size_t errlen)
{
    bpe__json j;
    uint32_t cp_of_byte[256];
    int16_t byte_of_cp[324];
    int max_id = -1, count = 0, i, rc;
    (void)cp_of_byte;
    bpe__byte_alphabet(cp_of_byte, byte_of_cp);
    j.s = s;
    j.n = n;
    j.p = 0;
    j.err = err;
    j.errlen = errlen;
    /* a UTF-8 byte order mark is tolerated */
    if (n >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) j.p = 3;
    bpe__json_ws(&j);
    if (j.p >= n || s[j.p] != '{')
        return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: expected '{' at byte %zu", j.p);
    j.p++;
    bpe__json_ws(&j);
    if (j.p < n && s[j.p] == '}')
        return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: empty object (no tokens)");
    for (;;) {
        long long v = 0;
        size_t kstart, ndig = 0;
        bpe__json_ws(&j);
        kstart = j.p;
        arrsetlen(L->cps, 0);
        rc = bpe__json_string(&j, &L->cps);
        if (rc) return rc;
        if (arrlen(L->cps) == 0)
            return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: empty token at byte %zu", kstart);
        /* canonical UTF-8 key; every code point must be in the byte alphabet */
        arrsetlen(L->key, 0);
        for (i = 0; i < (int)arrlen(L->cps); i++) {
            char u[4];
            int l, t;
            uint32_t cp = L->cps[i];
            if (cp >= 324 || byte_of_cp[cp] < 0)
                return bpe__err(err, errlen, BPE_EFORMAT,
                                "encoder.json: token at byte %zu has code point U+%04X outside "
                                "the GPT-2 byte alphabet", kstart, (unsigned)cp);
            l = bpe__put_utf8(cp, u);
            for (t = 0; t < l; t++) arrput(L->key, u[t]);
        }
        arrput(L->key, 0);
        bpe__json_ws(&j);
        if (j.p >= n || s[j.p] != ':')
            return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: expected ':' at byte %zu", j.p);
        j.p++;
        bpe__json_ws(&j);
        if (j.p < n && s[j.p] == '-')
            return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: negative id at byte %zu", j.p);
        while (j.p < n && s[j.p] >= '0' && s[j.p] <= '9') {
            if (ndig == 1 && v == 0)
                return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: number with leading zero at byte %zu", j.p);
            v = v * 10 + (s[j.p] - '0');
            if (v >= BPE__MAX_VOCAB)
                return bpe__err(err, errlen, BPE_ERANGE, "encoder.json: id too large at byte %zu (limit %d)",
                                j.p, BPE__MAX_VOCAB - 1);
            j.p++;
            ndig++;
        }
        if (ndig == 0)
            return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: expected a non-negative integer id at byte %zu", j.p);
        if (j.p < n && (s[j.p] == '.' || s[j.p] == 'e' || s[j.p] == 'E'))
            return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: non-integer id at byte %zu", j.p);
        if (shgeti(L->map, L->key) >= 0)
            return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: duplicate token at byte %zu", kstart);
        shput(L->map, L->key, (int)v);
        arrput(L->ids_seen, (int32_t)v);
        if ((int)v > max_id) max_id = (int)v;
        count++;
        bpe__json_ws(&j);
        if (j.p < n && s[j.p] == ',') {
            j.p++;
            continue;
        }
        if (j.p < n && s[j.p] == '}') {
            j.p++;
            break;
        }
        return bpe__err(err, errlen, BPE_EFORMAT,
                        j.p < n ? "encoder.json: expected ',' or '}' at byte %zu"
                                : "encoder.json: truncated (no closing '}') at byte %zu", j.p);
    }
    bpe__json_ws(&j);
    if (j.p != n)
        return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: trailing data at byte %zu", j.p);
    if (max_id + 1 != count)
        return bpe__err(err, errlen, BPE_EFORMAT,
                        "encoder.json: ids are not dense: %d tokens but largest id %d", count, max_id);
    tok->n_vocab = count;
    L->tokb = (unsigned char **)calloc((size_t)count, sizeof(unsigned char *));
    L->tokl = (size_t *)calloc((size_t)count, sizeof(size_t));
    if (!L->tokb || !L->tokl) return bpe__err(err, errlen, BPE_ENOMEM, "encoder.json: out of memory");
    /* bytes of every token, by id (ids are unique: dense + count distinct keys... check) */
    for (i = 0; i < (int)shlen(L->map); i++) {
        const char *k = L->map[i].key;
        int id = L->map[i].value;
        size_t kl = strlen(k), p = 0, nb = 0;
        unsigned char *b;
        if (L->tokb[id])
            return bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: id %d is used twice", id);
        b = (unsigned char *)malloc(kl + 1);
        if (!b) return bpe__err(err, errlen, BPE_ENOMEM, "encoder.json: out of memory");
        while (p < kl) {
            uint32_t cp;
            int l = bpe__utf8((const unsigned char *)k + p, kl - p, &cp);
            b[nb++] = (unsigned char)byte_of_cp[cp];
            p += (size_t)l;
        }
        L->tokb[id] = b;
        L->tokl[id] = nb;
    }
    return BPE_OK;
}

/* Look up the token spelled by UTF-8 bytes s[0..n) in the byte alphabet; -1 if none. */
static int bpe__lookup(bpe__loader *L, const unsigned char *s, size_t n)
{
    ptrdiff_t i;
    /* keys are C strings: a NUL byte (never part of the byte alphabet) would truncate
       the key and match a shorter token (found by fuzz_json) */
    if (n == 0 || memchr(s, 0, n) != NULL) return -1;
    arrsetlen(L->key, 0);
    if (n) memcpy(arraddnptr(L->key, n), s, n);
    arrput(L->key, 0);
    i = shgeti(L->map, L->key);
    return i < 0 ? -1 : L->map[i].value;
}

/* The slot holding key, or the empty slot where it would go. */
static bpe__merge *bpe__merge_slot(const bpe_tokenizer *t, uint64_t key)
{
    size_t mask = t->nmslots - 1, k = (size_t)((key * 0x9E3779B97F4A7C15ULL) >> (64 - t->mbits));
    for (;; k = (k + 1) & mask) {
        bpe__merge *m = &t->merges[k];
        if (m->key == key || m->key == UINT64_MAX) return m;
    }
}

static int bpe__merges_grow(bpe_tokenizer *t)
{
    size_t old = t->nmslots, i;
    bpe__merge *om = t->merges, *nm;
    size_t nc = old ? old * 2 : 1024;
    nm = (bpe__merge *)malloc(nc * sizeof(bpe__merge));
    if (!nm) return BPE_ENOMEM;
    for (i = 0; i < nc; i++) nm[i].key = UINT64_MAX;
    t->merges = nm;
    t->nmslots = nc;
    t->mbits = 0;
    while (((size_t)1 << t->mbits) < nc) t->mbits++;
    for (i = 0; i < old; i++)
        if (om[i].key != UINT64_MAX) *bpe__merge_slot(t, om[i].key) = om[i];
    free(om);
    return BPE_OK;
}

static int bpe__parse_merges(bpe_tokenizer *tok, bpe__loader *L, const unsigned char *s,
                             size_t n, char *err, size_t errlen)
{
    size_t p = 0, line = 0;
    int rank = 0;
    unsigned char *cat = NULL; /* stb_ds */
    if (n >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) p = 3;
    while (p < n) {
        size_t e = p, ll, sp, k;
        int a, b, c;
        uint64_t key;
        line++;
        while (e < n && s[e] != '\n') e++;
        ll = e - p;
        if (ll > 0 && s[p + ll - 1] == '\r') ll--;
        if (line == 1 && ll >= 8 && memcmp(s + p, "#version", 8) == 0) {
            p = e + 1;
            continue;
        }
        if (ll == 0) {
            p = e + 1;
            continue;
        }
        /* exactly one space; both sides non-empty valid UTF-8 in the byte alphabet */
        sp = ll;
        for (k = 0; k < ll; k++) {
            if (s[p + k] == ' ') {
                if (sp != ll) {
                    sp = ll + 1;
                    break;
                }
                sp = k;
            }
        }
        if (sp == 0 || sp >= ll - 1 || sp > ll) {
            arrfree(cat);
            return bpe__err(err, errlen, BPE_EFORMAT,
                            "vocab.bpe line %zu: expected two tokens separated by one space", line);
        }
        a = bpe__lookup(L, s + p, sp);
        b = bpe__lookup(L, s + p + sp + 1, ll - sp - 1);
        if (a < 0 || b < 0) {
            arrfree(cat);
            return bpe__err(err, errlen, BPE_EFORMAT, "vocab.bpe line %zu: %s token not in encoder.json",
                            line, a < 0 ? "left" : "right");
        }
        arrsetlen(cat, 0);
        memcpy(arraddnptr(cat, sp), s + p, sp);
        memcpy(arraddnptr(cat, ll - sp - 1), s + p + sp + 1, ll - sp - 1);
        c = bpe__lookup(L, cat, (size_t)arrlen(cat));
        if (c < 0) {
            arrfree(cat);
            return bpe__err(err, errlen, BPE_EFORMAT, "vocab.bpe line %zu: merged token not in encoder.json", line);
        }
        key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
        if (tok->merges == NULL || (size_t)rank * 2 >= tok->nmslots) {
            if (bpe__merges_grow(tok) != BPE_OK) {
                arrfree(cat);
                return bpe__err(err, errlen, BPE_ENOMEM, "vocab.bpe: out of memory");
            }
        }
        {
            bpe__merge *m = bpe__merge_slot(tok, key);
            if (m->key == key) {
                arrfree(cat);
                return bpe__err(err, errlen, BPE_EFORMAT, "vocab.bpe line %zu: duplicate merge", line);
            }
            m->key = key;
            m->rank = rank;
            m->id = c;
        }
        if (rank == INT32_MAX - 1) {
            arrfree(cat);
            return bpe__err(err, errlen, BPE_ERANGE, "vocab.bpe: too many merges");
        }
        rank++;
        p = e + 1;
    }
    arrfree(cat);
    tok->n_merges = rank;
    return BPE_OK;
}

int bpe_load_mem(bpe_tokenizer **out, const char *json, size_t json_len, const char *merges,
                 size_t merges_len, char *err, size_t errlen)
{
    bpe_tokenizer *tok;
    bpe__loader L;
    int rc, i;
    size_t total = 0;
    if (err && errlen) err[0] = 0;
    if (!out) return bpe__err(err, errlen, BPE_EINVAL, "bpe_load: out is NULL");
    *out = NULL;
    if ((!json && json_len) || (!merges && merges_len))
        return bpe__err(err, errlen, BPE_EINVAL, "bpe_load: NULL buffer");
    if (!json) json = "";
    if (!merges) merges = "";
    tok = (bpe_tokenizer *)calloc(1, sizeof(bpe_tokenizer));
    if (!tok) return bpe__err(err, errlen, BPE_ENOMEM, "bpe_load: out of memory");
    tok->eot = -1;
    tok->cache_limit = (size_t)64 << 20;
    tok->heap_min = 128;
    tok->max_piece = BPE_MAX_PIECE_DEFAULT;
    memset(&L, 0, sizeof L);
    /* strdup mode, not sh_new_arena: the arena's char[8] trailing-array trick trips
       clang's -fsanitize=bounds */
    sh_new_strdup(L.map);
    rc = bpe__parse_encoder(tok, &L, (const unsigned char *)json, json_len, err, errlen);
    if (rc) goto fail;
    /* every single byte must be a token */
    for (i = 0; i < 256; i++) tok->byte_id[i] = -1;
    for (i = 0; i < tok->n_vocab; i++)
        if (L.tokl[i] == 1 && tok->byte_id[L.tokb[i][0]] < 0) tok->byte_id[L.tokb[i][0]] = i;
    for (i = 0; i < 256; i++)
        if (tok->byte_id[i] < 0) {
            rc = bpe__err(err, errlen, BPE_EFORMAT, "encoder.json: no token for byte 0x%02x", i);
            goto fail;
        }
    for (i = 0; i < tok->n_vocab; i++) total += L.tokl[i];
    tok->tok_bytes = (unsigned char *)malloc(total ? total : 1);
    tok->tok_off = (size_t *)malloc(((size_t)tok->n_vocab + 1) * sizeof(size_t));
    if (!tok->tok_bytes || !tok->tok_off) {
        rc = bpe__err(err, errlen, BPE_ENOMEM, "bpe_load: out of memory");
        goto fail;
    }
    total = 0;
    for (i = 0; i < tok->n_vocab; i++) {
        tok->tok_off[i] = total;
        memcpy(tok->tok_bytes + total, L.tokb[i], L.tokl[i]);
        total += L.tokl[i];
        if (L.tokl[i] == 13 && memcmp(L.tokb[i], "<|endoftext|>", 13) == 0) tok->eot = i;
    }
    tok->tok_off[tok->n_vocab] = total;
    rc = bpe__parse_merges(tok, &L, (const unsigned char *)merges, merges_len, err, errlen);
    if (rc) goto fail;
    bpe__loader_free(&L, tok->n_vocab);
    *out = tok;
    return BPE_OK;
fail:
    bpe__loader_free(&L, tok->n_vocab);
    bpe_free(tok);
    return rc;
}

int bpe_load(bpe_tokenizer **out, const char *encoder_json_path, const char *vocab_bpe_path,
             char *err, size_t errlen)
{
    unsigned char *js = NULL, *mg = NULL;
    size_t jl = 0, ml = 0;
    int rc;
    if (err && errlen) err[0] = 0;
    if (!out || !encoder_json_path || !vocab_bpe_path)
        return bpe__err(err, errlen, BPE_EINVAL, "bpe_load: NULL argument");
    *out = NULL;
    rc = bpe_read_file(encoder_json_path, BPE__MAX_FILE, &js, &jl, err, errlen);
    if (rc) return rc;
    rc = bpe_read_file(vocab_bpe_path, BPE__MAX_FILE, &mg, &ml, err, errlen);
    if (rc) {
        free(js);
        return rc;
    }
    /* A merges FILE must be whole: the first line is "#version ...", the last line ends
       with its newline, and there is one merge per token that is neither a byte nor
       <|endoftext|> (as in GPT-2: 50,257 = 256 + 50,000 + 1). An empty, cut or half-length
       file would otherwise load and give different ids silently. bpe_load_mem (small
       vocabularies built in memory) does not ask this. */
    {
        size_t p0 = ml >= 3 && mg[0] == 0xEF && mg[1] == 0xBB && mg[2] == 0xBF ? 3 : 0;
        if (ml - p0 < 8 || memcmp(mg + p0, "#version", 8) != 0)
            rc = bpe__err(err, errlen, BPE_EFORMAT, "%s: %s: not a GPT-2 merges file (no '#version' first line)",
                          vocab_bpe_path, ml == 0 ? "empty" : "incomplete");
        else if (mg[ml - 1] != '\n')
            rc = bpe__err(err, errlen, BPE_EFORMAT,
                          "%s: the last line has no newline: the file is truncated (%zu bytes)", vocab_bpe_path, ml);
        if (rc) {
            free(js);
            free(mg);
            return rc;
        }
    }
    rc = bpe_load_mem(out, (const char *)js, jl, (const char *)mg, ml, err, errlen);
    if (rc == BPE_OK) {
        int nv = bpe_vocab_size(*out), nm = bpe_num_merges(*out), want = nv - 256 - (bpe_eot(*out) >= 0);
        if (nm != want) {
            rc = bpe__err(err, errlen, BPE_EFORMAT,
                          "%s has %d merges, but the %d tokens of %s need %d (one per token that is not a byte or "
                          "<|endoftext|>): truncated or mismatched files", vocab_bpe_path, nm, nv, encoder_json_path,
                          want);
            bpe_free(*out);
            *out = NULL;
        }
    } else if (rc && err && errlen) {
        /* prefix the message with the directory of the file that failed */
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err);
        if (strncmp(tmp, "vocab.bpe", 9) == 0)
            bpe__err(err, errlen, rc, "%s: %s", vocab_bpe_path, tmp + (tmp[9] == ':' ? 11 : 10));
        else if (strncmp(tmp, "encoder.json", 12) == 0)
            bpe__err(err, errlen, rc, "%s: %s", encoder_json_path, tmp + (tmp[12] == ':' ? 14 : 13));
    }
    free(js);
    free(mg);
    return rc;
}

int bpe_load_dir(bpe_tokenizer **out, const char *dir, char *err, size_t errlen)
{
    char ej[4096], vb[4096];
    if (!dir) {
        const char *d = bpe_default_data_dir();
        if ((size_t)snprintf(ej, sizeof ej, "%s/gpt2/encoder.json", d) >= sizeof ej ||
            (size_t)snprintf(vb, sizeof vb, "%s/gpt2/vocab.bpe", d) >= sizeof vb)
            return bpe__err(err, errlen, BPE_EINVAL, "bpe_load_dir: path too long");
    } else if ((size_t)snprintf(ej, sizeof ej, "%s/encoder.json", dir) >= sizeof ej ||
               (size_t)snprintf(vb, sizeof vb, "%s/vocab.bpe", dir) >= sizeof vb) {
        return bpe__err(err, errlen, BPE_EINVAL, "bpe_load_dir: path too long");
    }
    return bpe_load(out, ej, vb, err, errlen);
}

static void bpe__cache_clear(bpe_tokenizer *t)
{
    if (t->slots) memset(t->slots, 0, t->nslots * sizeof(bpe__slot));
    t->nused = 0;
    arrsetlen(t->centries, 0);
    arrsetlen(t->cbytes, 0);
    arrsetlen(t->cids, 0);
}

void bpe_free(bpe_tokenizer *tok)
{
    if (!tok) return;
    free(tok->tok_bytes);
    free(tok->tok_off);
    free(tok->merges);
    free(tok->slots);
    arrfree(tok->centries);
    arrfree(tok->cbytes);
    arrfree(tok->cids);
    free(tok->sym);
    free(tok->rk);
    free(tok);
}

int bpe_vocab_size(const bpe_tokenizer *tok) { return tok ? tok->n_vocab : 0; }
int bpe_num_merges(const bpe_tokenizer *tok) { return tok ? tok->n_merges : 0; }
int bpe_eot(const bpe_tokenizer *tok) { return tok ? tok->eot : -1; }

void bpe_set_cache_limit(bpe_tokenizer *tok, size_t max_bytes)
{
    if (!tok) return;
    tok->cache_limit = max_bytes;
    bpe__cache_clear(tok);
}

void bpe_cache_stats(const bpe_tokenizer *tok, size_t *hits, size_t *misses)
{
    if (hits) *hits = tok ? tok->hits : 0;
    if (misses) *misses = tok ? tok->misses : 0;
}

/* ------------------------------------------------------------------ encode */

static int32_t bpe__rank(const bpe_tokenizer *t, int32_t a, int32_t b, int32_t *merged)
{
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    const bpe__merge *m;
    if (!t->merges) return BPE__NO_RANK;
    m = bpe__merge_slot(t, key);
    if (m->key != key) return BPE__NO_RANK;
    if (merged) *merged = m->id;
    return m->rank;
}

/* BPE of one word s[0..n) (n >= 1); the result is in t->sym[0..*m). Same merge order
   as GPT-2's encoder.py: take the lowest-rank adjacent pair (A, B), replace every
   occurrence of A B, scanning left to right, by the merged token; repeat. rk[i] caches
   the rank of pair (sym[i], sym[i+1]); only pairs next to a merge are looked up again. */
typedef struct { int32_t rank, pos; } bpe__hent;

static int bpe__hless(const bpe__hent *a, const bpe__hent *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void bpe__hpush(bpe__hent *h, size_t *n, int32_t rank, int32_t pos)
{
    size_t i = (*n)++;
    bpe__hent e;
    e.rank = rank;
    e.pos = pos;
    while (i > 0 && bpe__hless(&e, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = e;
}

static bpe__hent bpe__hpop(bpe__hent *h, size_t *n)
{
    bpe__hent top = h[0], last = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && bpe__hless(&h[c + 1], &h[c])) c++;
        if (!bpe__hless(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = last;
    return top;
}

/* The same merges as bpe__word's array passes, in O(n log n) for long words: symbols
   in a linked list, candidate pairs in a min-heap keyed by (rank, position). Each pass
   takes ALL heap entries of the lowest rank r (in position order) and merges those
   still valid, left to right; pairs created by the pass are pushed and wait for later
   passes (a new pair never has rank r: it contains the merged token, which is neither
   part of the pair). This is exactly encoder.py's "merge every occurrence" pass. */
static int bpe__word_heap(bpe_tokenizer *t, size_t n, size_t *m_out)
{
    int32_t *sym = t->sym, *nxt, *prv, *cand, N = (int32_t)n, i, p;
    bpe__hent *heap;
    size_t hn = 0, m = 0;
    char *mem = (char *)malloc(n * (3 * sizeof(int32_t) + 3 * sizeof(bpe__hent)));
    if (!mem) return BPE_ENOMEM;
    nxt = (int32_t *)mem;
    prv = nxt + n;
    cand = prv + n;
    heap = (bpe__hent *)(cand + n);
    for (i = 0; i < N; i++) {
        nxt[i] = i + 1;
        prv[i] = i - 1;
    }
    for (i = 0; i + 1 < N; i++) {
        int32_t r = bpe__rank(t, sym[i], sym[i + 1], NULL);
        if (r != BPE__NO_RANK) bpe__hpush(heap, &hn, r, i);
    }
    while (hn > 0) {
        int32_t r = heap[0].rank, nc = 0, k;
        while (hn > 0 && heap[0].rank == r) {
            bpe__hent e = bpe__hpop(heap, &hn);
            if (nc == 0 || cand[nc - 1] != e.pos) cand[nc++] = e.pos; /* drop exact repeats */
        }
        for (k = 0; k < nc; k++) {
            int32_t q, C = -1, rr;
            p = cand[k];
            if (sym[p] < 0 || (q = nxt[p]) >= N) continue;
            if (bpe__rank(t, sym[p], sym[q], &C) != r) continue; /* stale entry */
            sym[p] = C;
            sym[q] = -1;
            nxt[p] = nxt[q];
            if (nxt[q] < N) prv[nxt[q]] = p;
            if (prv[p] >= 0 && (rr = bpe__rank(t, sym[prv[p]], C, NULL)) != BPE__NO_RANK)
                bpe__hpush(heap, &hn, rr, prv[p]);
            if (nxt[p] < N && (rr = bpe__rank(t, C, sym[nxt[p]], NULL)) != BPE__NO_RANK)
                bpe__hpush(heap, &hn, rr, p);
        }
    }
    for (p = 0; p < N; p = nxt[p]) sym[m++] = sym[p]; /* node 0 is always alive */
    free(mem);
    *m_out = m;
    return BPE_OK;
}

static int bpe__word(bpe_tokenizer *t, const unsigned char *s, size_t n, size_t *m_out)
{
    int32_t *sym, *rk;
    size_t m = n, i;
    if (n > (size_t)INT32_MAX / 4) return BPE_ERANGE;
    if (n > t->scratch_cap) {
        size_t nc = n < 64 ? 64 : n;
        int32_t *a = (int32_t *)realloc(t->sym, nc * sizeof(int32_t));
        if (!a) return BPE_ENOMEM;
        t->sym = a;
        a = (int32_t *)realloc(t->rk, nc * sizeof(int32_t));
        if (!a) return BPE_ENOMEM;
        t->rk = a;
        t->scratch_cap = nc;
    }
    sym = t->sym;
    rk = t->rk;
    for (i = 0; i < n; i++) sym[i] = t->byte_id[s[i]];
    if (n >= 2 && n >= t->heap_min) return bpe__word_heap(t, n, m_out);
    for (i = 0; i + 1 < n; i++) rk[i] = bpe__rank(t, sym[i], sym[i + 1], NULL);
    while (m > 1) {
        int32_t best = BPE__NO_RANK, A, B, C = -1;
        size_t bi = 0, r, w;
        int prev_merged = 0;
        for (i = 0; i + 1 < m; i++)
            if (rk[i] < best) {
                best = rk[i];
                bi = i;
            }
        if (best == BPE__NO_RANK) break;
        A = sym[bi];
        B = sym[bi + 1];
        bpe__rank(t, A, B, &C);
        /* one left-to-right pass; w <= r, so in-place is safe. When writing sym[w] we
           also settle rk[w-1] (pair sym[w-1], sym[w]). */
        for (r = 0, w = 0; r < m; w++) {
            int merged = (r + 1 < m && sym[r] == A && sym[r + 1] == B);
            int32_t v = merged ? C : sym[r];
            if (w > 0) {
                if (merged || prev_merged) rk[w - 1] = bpe__rank(t, sym[w - 1], v, NULL);
                else rk[w - 1] = rk[r - 1]; /* unchanged neighbours: old pair (r-1, r) */
            }
            sym[w] = v;
            prev_merged = merged;
            r += merged ? 2 : 1;
        }
        m = w;
    }
    *m_out = m;
    return BPE_OK;
}

static uint64_t bpe__hash(const unsigned char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h ^ (uint64_t)n;
}

/* Double the slot table (or create it) and re-insert the live entries. */
static int bpe__cache_grow(bpe_tokenizer *t)
{
    size_t nc = t->nslots ? t->nslots * 2 : 4096, i, mask = nc - 1;
    bpe__slot *ns = (bpe__slot *)calloc(nc, sizeof(bpe__slot));
    if (!ns) return BPE_ENOMEM;
    for (i = 0; i < t->nslots; i++) {
        size_t k;
        if (t->slots[i].e == 0) continue;
        for (k = (size_t)t->slots[i].h & mask; ns[k].e != 0; k = (k + 1) & mask) {}
        ns[k] = t->slots[i];
    }
    free(t->slots);
    t->slots = ns;
    t->nslots = nc;
    return BPE_OK;
}

void bpe_set_max_piece(bpe_tokenizer *tok, size_t max_bytes)
{
    if (tok) tok->max_piece = max_bytes == 0 ? 0 : max_bytes < 8 ? 8 : max_bytes;
}

int bpe_encode(bpe_tokenizer *t, const void *text, size_t len, bpe_ids *out)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t p = 0, pend = 0;
    int rc;
    if (!t || !out || (!text && len)) return BPE_EINVAL;
    while (p < len) {
        size_t e, n, m;
        const unsigned char *w = s + p;
        uint64_t h;
        bpe__slot *slot;
        if (p >= pend) pend = bpe_next_piece(s, len, p);
        e = pend;
        if (t->max_piece && e - p > t->max_piece) {
            /* a pathological piece (megabytes without a space): merged in chunks of at
               most max_piece bytes, cut before a UTF-8 continuation byte, so the work and
               the scratch memory per chunk stay bounded */
            int back = 0;
            e = p + t->max_piece;
            while (back < 3 && (s[e] & 0xC0) == 0x80) {
                e--;
                back++;
            }
        }
        n = e - p;
        p = e;
        if (n == 1) {
            if ((rc = bpe_ids_push(out, t->byte_id[w[0]])) != BPE_OK) return rc;
            continue;
        }
        h = bpe__hash(w, n);
        slot = NULL;
        if (t->cache_limit && n <= 256) {
            size_t mask, k;
            if (t->nused * 2 >= t->nslots && (rc = bpe__cache_grow(t)) != BPE_OK) return rc;
            mask = t->nslots - 1;
            for (k = (size_t)h & mask;; k = (k + 1) & mask) {
                bpe__slot *sl = &t->slots[k];
                if (sl->e == 0) {
                    slot = sl; /* not cached: insert here below */
                    break;
                }
                if (sl->h == h) {
                    const bpe__centry *ce = &t->centries[sl->e - 1];
                    if (ce->blen == n && memcmp(t->cbytes + ce->boff, w, n) == 0) {
                        if ((rc = bpe__ids_reserve(out, ce->nids)) != BPE_OK) return rc;
                        memcpy(out->data + out->n, t->cids + ce->ioff, ce->nids * sizeof(int32_t));
                        out->n += ce->nids;
                        t->hits++;
                        break;
                    }
                }
            }
            if (!slot) continue; /* hit */
        }
        t->misses++;
        if ((rc = bpe__word(t, w, n, &m)) != BPE_OK) return rc;
        if ((rc = bpe__ids_reserve(out, m)) != BPE_OK) return rc;
        memcpy(out->data + out->n, t->sym, m * sizeof(int32_t));
        out->n += m;
        if (slot) {
            bpe__centry ce;
            if ((size_t)arrlen(t->cbytes) + (size_t)arrlen(t->cids) * 4 +
                    (size_t)arrlen(t->centries) * sizeof(bpe__centry) > t->cache_limit) {
                bpe__cache_clear(t); /* full: start again */
                slot = &t->slots[(size_t)h & (t->nslots - 1)];
            }
            ce.boff = (size_t)arrlen(t->cbytes);
            ce.ioff = (size_t)arrlen(t->cids);
            ce.blen = (uint32_t)n;
            ce.nids = (uint32_t)m;
            memcpy(arraddnptr(t->cbytes, n), w, n);
            memcpy(arraddnptr(t->cids, m), t->sym, m * sizeof(int32_t));
            arrput(t->centries, ce);
            slot->h = h;
            slot->e = (uint32_t)arrlen(t->centries);
            t->nused++;
        }
    }
    return BPE_OK;
}

/* ------------------------------------------------------------------ decode */

const unsigned char *bpe_token_bytes(const bpe_tokenizer *t, int32_t id, size_t *len)
{
    if (!t || id < 0 || id >= t->n_vocab) {
        if (len) *len = 0;
        return NULL;
    }
    if (len) *len = t->tok_off[id + 1] - t->tok_off[id];
    return t->tok_bytes + t->tok_off[id];
}

int bpe_decode(const bpe_tokenizer *t, const int32_t *ids, size_t n, bpe_bytes *out)
{
    size_t i;
    int rc;
    if (!t || !out || (!ids && n)) return BPE_EINVAL;
    for (i = 0; i < n; i++) {
        size_t l;
        const unsigned char *b = bpe_token_bytes(t, ids[i], &l);
        if (!b) return BPE_ERANGE;
        if ((rc = bpe_bytes_append(out, b, l)) != BPE_OK) return rc;
    }
    return BPE_OK;
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
