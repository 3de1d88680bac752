/* mcqa.c - multiple-choice scoring and paired statistics (see mcqa.h). License: MIT. */
#include "mcqa.h"
#include "errf.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *mcqa_strerror(int code)
{
    switch (code) {
    case MCQA_OK: return "ok";
    case MCQA_EINVAL: return "invalid argument";
    case MCQA_ENOMEM: return "out of memory";
    case MCQA_EFORMAT: return "malformed input";
    case MCQA_ERANGE: return "out of range";
    case MCQA_EMISMATCH: return "mismatch";
    case MCQA_EIO: return "I/O error";
    case MCQA_EMODEL: return "model error";
    default: return "unknown error";
    }
}

static char *mcqa__strndup(const char *s, size_t n)
{
    char *d = (char *)malloc(n + 1);
    if (!d) return NULL;
    if (n) memcpy(d, s, n);
    d[n] = 0;
    return d;
}

/* ================================================================ JSON */
typedef struct {
    const char *s;
    size_t n, i;
    char *err;
    size_t errlen;
    int depth;
} mcqa__jp;

static int mcqa__jfail(mcqa__jp *p, const char *what)
{
    return ex_errf(p->err, p->errlen, MCQA_EFORMAT, "byte %zu: %s", p->i + 1, what);
}

static void mcqa__jws(mcqa__jp *p)
{
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int mcqa__hex4(const char *s, unsigned *out)
{
    unsigned v = 0;
    int k;
    for (k = 0; k < 4; k++) {
        char c = s[k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static int mcqa__utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && s[1] < 0xA0) return 0;
        if (c == 0xED && s[1] >= 0xA0) return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && s[1] < 0x90) return 0;
        if (c == 0xF4 && s[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

static int mcqa__jstring(mcqa__jp *p, char **out, size_t *outlen)
{
    size_t cap = 16, w = 0;
    char *b;
    if (p->i >= p->n || p->s[p->i] != '"') return mcqa__jfail(p, "expected a string");
    p->i++;
    b = (char *)malloc(cap);
    if (!b) return ex_errf(p->err, p->errlen, MCQA_ENOMEM, "out of memory");
    for (;;) {
        unsigned char c;
        char tmp[4];
        int k = 0, t;
        if (p->i >= p->n) { free(b); return mcqa__jfail(p, "unterminated string"); }
        c = (unsigned char)p->s[p->i];
        if (c == '"') { p->i++; break; }
        if (c < 0x20) { free(b); return mcqa__jfail(p, "control character in a string"); }
        if (c == '\\') {
            char e;
            if (p->i + 1 >= p->n) { free(b); return mcqa__jfail(p, "unterminated escape"); }
            e = p->s[p->i + 1];
            p->i += 2;
            switch (e) {
            case '"': tmp[k++] = '"'; break;
            case '\\': tmp[k++] = '\\'; break;
            case '/': tmp[k++] = '/'; break;
            case 'b': tmp[k++] = '\b'; break;
            case 'f': tmp[k++] = '\f'; break;
            case 'n': tmp[k++] = '\n'; break;
            case 'r': tmp[k++] = '\r'; break;
            case 't': tmp[k++] = '\t'; break;
            case 'u': {
                unsigned u, lo;
                if (p->i + 4 > p->n || mcqa__hex4(p->s + p->i, &u)) { free(b); return mcqa__jfail(p, "bad \\u escape"); }
                p->i += 4;
                if (u >= 0xD800 && u <= 0xDBFF) {
                    if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' ||
                        mcqa__hex4(p->s + p->i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                        free(b);
                        return mcqa__jfail(p, "unpaired surrogate in \\u escape");
                    }
                    p->i += 6;
                    u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                } else if (u >= 0xDC00 && u <= 0xDFFF) {
                    free(b);
                    return mcqa__jfail(p, "unpaired surrogate in \\u escape");
                }
                if (u < 0x80) tmp[k++] = (char)u;
                else if (u < 0x800) { tmp[k++] = (char)(0xC0 | (u >> 6)); tmp[k++] = (char)(0x80 | (u & 63)); }
                else if (u < 0x10000) {
                    tmp[k++] = (char)(0xE0 | (u >> 12)); tmp[k++] = (char)(0x80 | ((u >> 6) & 63));
                    tmp[k++] = (char)(0x80 | (u & 63));
                } else {
                    tmp[k++] = (char)(0xF0 | (u >> 18)); tmp[k++] = (char)(0x80 | ((u >> 12) & 63));
                    tmp[k++] = (char)(0x80 | ((u >> 6) & 63)); tmp[k++] = (char)(0x80 | (u & 63));
                }
                break;
            }
            default: free(b); return mcqa__jfail(p, "unknown escape");
            }
        } else {
            t = mcqa__utf8_len((const unsigned char *)p->s + p->i, p->n - p->i);
            if (!t) { free(b); return mcqa__jfail(p, "invalid UTF-8 in a string"); }
            memcpy(tmp, p->s + p->i, (size_t)t);
            k = t;
            p->i += (size_t)t;
        }
        if (w + (size_t)k + 1 > cap) {
            char *nb;
            while (w + (size_t)k + 1 > cap) cap *= 2;
            nb = (char *)realloc(b, cap);
            if (!nb) { free(b); return ex_errf(p->err, p->errlen, MCQA_ENOMEM, "out of memory"); }
            b = nb;
        }
        memcpy(b + w, tmp, (size_t)k);
        w += (size_t)k;
    }
    b[w] = 0;
    *out = b;
    *outlen = w;
    return MCQA_OK;
}

static int mcqa__jvalue(mcqa__jp *p, mcqa_json **out);

static int mcqa__jpush(mcqa_json *v, char *key, mcqa_json *item)
{
    if ((v->n & (v->n - 1)) == 0) { /* grow at powers of two */
        size_t nc = v->n ? (size_t)v->n * 2 : 4;
        mcqa_json **ni = (mcqa_json **)realloc(v->items, nc * sizeof *ni);
        if (!ni) return MCQA_ENOMEM;
        v->items = ni;
        if (v->type == MCQA_JOBJ) {
            char **nk = (char **)realloc(v->keys, nc * sizeof *nk);
            if (!nk) return MCQA_ENOMEM;
            v->keys = nk;
        }
    }
    if (v->type == MCQA_JOBJ) v->keys[v->n] = key;
    v->items[v->n++] = item;
    return MCQA_OK;
}

static int mcqa__jvalue(mcqa__jp *p, mcqa_json **out)
{
    mcqa_json *v;
    int rc;
    *out = NULL;
    mcqa__jws(p);
    if (p->i >= p->n) return mcqa__jfail(p, "expected a value");
    v = (mcqa_json *)calloc(1, sizeof *v);
    if (!v) return ex_errf(p->err, p->errlen, MCQA_ENOMEM, "out of memory");
    switch (p->s[p->i]) {
    case '{':
    case '[': {
        int obj = p->s[p->i] == '{';
        char close = obj ? '}' : ']';
        v->type = obj ? MCQA_JOBJ : MCQA_JARR;
        if (++p->depth > 64) { free(v); return mcqa__jfail(p, "nesting deeper than 64"); }
        p->i++;
        mcqa__jws(p);
        if (p->i < p->n && p->s[p->i] == close) { p->i++; break; }
        for (;;) {
            char *key = NULL;
            size_t kl;
            mcqa_json *item;
            int j;
            mcqa__jws(p);
            if (obj) {
                rc = mcqa__jstring(p, &key, &kl);
                if (rc) { mcqa_json_free(v); return rc; }
                if (strlen(key) != kl) { free(key); mcqa_json_free(v); return mcqa__jfail(p, "NUL in an object key"); }
                for (j = 0; j < v->n; j++)
                    if (!strcmp(v->keys[j], key)) { free(key); mcqa_json_free(v); return mcqa__jfail(p, "duplicate key"); }
                mcqa__jws(p);
                if (p->i >= p->n || p->s[p->i] != ':') { free(key); mcqa_json_free(v); return mcqa__jfail(p, "expected ':'"); }
                p->i++;
            }
            rc = mcqa__jvalue(p, &item);
            if (rc) { free(key); mcqa_json_free(v); return rc; }
            if (mcqa__jpush(v, key, item)) {
                free(key);
                mcqa_json_free(item);
                mcqa_json_free(v);
                return ex_errf(p->err, p->errlen, MCQA_ENOMEM, "out of memory");
            }
            mcqa__jws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == close) { p->i++; break; }
            mcqa_json_free(v);
            return mcqa__jfail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
        p->depth--;
        break;
    }
    case '"':
        v->type = MCQA_JSTR;
        rc = mcqa__jstring(p, &v->str, &v->len);
        if (rc) { free(v); return rc; }
        break;
    case 't':
    case 'f':
    case 'n': {
        const char *w = p->s[p->i] == 't' ? "true" : p->s[p->i] == 'f' ? "false" : "null";
        size_t wl = strlen(w);
        if (p->n - p->i < wl || memcmp(p->s + p->i, w, wl)) { free(v); return mcqa__jfail(p, "invalid literal"); }
        p->i += wl;
        v->type = w[0] == 'n' ? MCQA_JNULL : MCQA_JBOOL;
        v->b = w[0] == 't';
        break;
    }
    default: {
        size_t st = p->i, k = p->i;
        char buf[128];
        int frac = 0;
        if (k < p->n && p->s[k] == '-') k++;
        if (k < p->n && p->s[k] == '0') k++;
        else if (k < p->n && p->s[k] >= '1' && p->s[k] <= '9')
            while (k < p->n && p->s[k] >= '0' && p->s[k] <= '9') k++;
        else { free(v); return mcqa__jfail(p, "invalid value"); }
        if (k < p->n && p->s[k] == '.') {
            frac = 1;
            k++;
            if (k >= p->n || p->s[k] < '0' || p->s[k] > '9') { free(v); return mcqa__jfail(p, "invalid number"); }
            while (k < p->n && p->s[k] >= '0' && p->s[k] <= '9') k++;
        }
        if (k < p->n && (p->s[k] == 'e' || p->s[k] == 'E')) {
            frac = 1;
            k++;
            if (k < p->n && (p->s[k] == '+' || p->s[k] == '-')) k++;
            if (k >= p->n || p->s[k] < '0' || p->s[k] > '9') { free(v); return mcqa__jfail(p, "invalid number"); }
            while (k < p->n && p->s[k] >= '0' && p->s[k] <= '9') k++;
        }
        if (k - st >= sizeof buf) { free(v); return mcqa__jfail(p, "number too long"); }
        memcpy(buf, p->s + st, k - st);
        buf[k - st] = 0;
        v->type = MCQA_JNUM;
        v->str = mcqa__strndup(buf, k - st);
        if (!v->str) { free(v); return ex_errf(p->err, p->errlen, MCQA_ENOMEM, "out of memory"); }
        v->len = k - st;
        v->num = strtod(buf, NULL);
        v->is_int = !frac;
        p->i = k;
        break;
    }
    }
    *out = v;
    return MCQA_OK;
}

int mcqa_json_parse(const char *s, size_t n, mcqa_json **out, char *err, size_t errlen)
{
    mcqa__jp p;
    int rc;
    if (!out) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_json_parse: NULL argument");
    *out = NULL;
    if (!s && n) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_json_parse: NULL argument");
    p.s = s ? s : "";
    p.n = n;
    p.i = 0;
    p.err = err;
    p.errlen = errlen;
    p.depth = 0;
    rc = mcqa__jvalue(&p, out);
    if (rc) return rc;
    mcqa__jws(&p);
    if (p.i != p.n) {
        mcqa_json_free(*out);
        *out = NULL;
        return mcqa__jfail(&p, "trailing characters after the value");
    }
    return MCQA_OK;
}

void mcqa_json_free(mcqa_json *v)
{
    int i;
    if (!v) return;
    for (i = 0; i < v->n; i++) {
        if (v->keys) free(v->keys[i]);
        mcqa_json_free(v->items[i]);
    }
    free(v->keys);
    free(v->items);
    free(v->str);
    free(v);
}

const mcqa_json *mcqa_json_get(const mcqa_json *obj, const char *key)
{
    int i;
    if (!obj || obj->type != MCQA_JOBJ || !key) return NULL;
    for (i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key)) return obj->items[i];
    return NULL;
}

static const mcqa_json *mcqa__get_any(const mcqa_json *o, const char *const *keys, const char **which)
{
    int k;
    for (k = 0; keys[k]; k++) {
        const mcqa_json *v = mcqa_json_get(o, keys[k]);
        if (v) { if (which) *which = keys[k]; return v; }
    }
    return NULL;
}

/* Integer from a JSON number (or a string holding one when allow_str). */
static int mcqa__as_int(const mcqa_json *v, int allow_str, long *out)
{
    if (v->type == MCQA_JNUM) {
        if (v->num != floor(v->num) || fabs(v->num) > 2e9) return -1;
        *out = (long)v->num;
        return 0;
    }
    if (allow_str && v->type == MCQA_JSTR && v->len > 0 && v->len < 12 && strlen(v->str) == v->len) {
        char *end;
        long x;
        errno = 0;
        x = strtol(v->str, &end, 10);
        if (errno || *end || end == v->str) return -1;
        *out = x;
        return 0;
    }
    return -1;
}

/* ================================================================ items */
long mcqa_read_line(FILE *f, char **buf, size_t *cap)
{
    size_t n = 0;
    int c;
    if (!f || !buf || !cap) return MCQA_EINVAL;
    for (;;) {
        c = getc(f);
        if (c == EOF) {
            /* a read error (EIO, a directory: EISDIR) is not the end of the input */
            if (ferror(f)) return MCQA_EIO;
            if (n == 0) return -1;
            break;
        }
        if (c == '\n') break;
        if (n + 2 > *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            char *nb;
            if (nc > MCQA_MAX_LINE + 2) nc = MCQA_MAX_LINE + 2;
            if (n + 2 > nc) return MCQA_ERANGE;
            nb = (char *)realloc(*buf, nc);
            if (!nb) return MCQA_ENOMEM;
            *buf = nb;
            *cap = nc;
        }
        (*buf)[n++] = (char)c;
    }
    if (!*buf) {
        *buf = (char *)malloc(2);
        if (!*buf) return MCQA_ENOMEM;
        *cap = 2;
    }
    if (n > 0 && (*buf)[n - 1] == '\r') n--;
    (*buf)[n] = 0;
    return (long)n;
}

static int mcqa__blank(const char *s, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

void mcqa_item_free(mcqa_item *it)
{
    int i;
    if (!it) return;
    free(it->task);
    free(it->id);
    free(it->context);
    if (it->choices)
        for (i = 0; i < it->n_choices; i++) free(it->choices[i]);
    free(it->choices);
    memset(it, 0, sizeof *it);
}

int mcqa_item_parse(const char *line, size_t len, long lineno, const char *where,
                    const char *default_task, mcqa_item *out, char *err, size_t errlen)
{
    static const char *const k_ctx[] = {"context", "query", "ctx", NULL};
    static const char *const k_ch[] = {"choices", "endings", NULL};
    static const char *const k_gold[] = {"gold", "label", "answer_index", NULL};
    mcqa_json *j = NULL;
    const mcqa_json *v;
    char jerr[256];
    const char *wh = where ? where : "input";
    long g;
    int i, rc;
    if (!out || (!line && len)) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_item_parse: NULL argument");
    memset(out, 0, sizeof *out);
    out->line = lineno;
    if (!line || mcqa__blank(line, len)) return MCQA_ERANGE;
    rc = mcqa_json_parse(line, len, &j, jerr, sizeof jerr);
    if (rc) return ex_errf(err, errlen, rc, "%s:%ld: not valid JSON: %s", wh, lineno, jerr);
    if (j->type != MCQA_JOBJ) { rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: expected a JSON object", wh, lineno); goto fail; }
    v = mcqa__get_any(j, k_ctx, NULL);
    if (!v || v->type != MCQA_JSTR) {
        rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: missing string field \"context\" (or \"query\", \"ctx\")", wh, lineno);
        goto fail;
    }
    if (strlen(v->str) != v->len) { rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: NUL character in the context", wh, lineno); goto fail; }
    out->context = mcqa__strndup(v->str, v->len);
    v = mcqa__get_any(j, k_ch, NULL);
    if (!v || v->type != MCQA_JARR) {
        rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: missing array field \"choices\" (or \"endings\")", wh, lineno);
        goto fail;
    }
    if (v->n < 2 || v->n > MCQA_MAX_CHOICES) {
        rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: %d choices (need 2..%d)", wh, lineno, v->n, MCQA_MAX_CHOICES);
        goto fail;
    }
    out->choices = (char **)calloc((size_t)v->n, sizeof(char *));
    if (!out->choices || !out->context) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); goto fail; }
    out->n_choices = v->n;
    for (i = 0; i < v->n; i++) {
        const mcqa_json *c = v->items[i];
        if (c->type != MCQA_JSTR || strlen(c->str) != c->len || c->len == 0) {
            rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: choice %d is not a non-empty string", wh, lineno, i);
            goto fail;
        }
        out->choices[i] = mcqa__strndup(c->str, c->len);
        if (!out->choices[i]) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); goto fail; }
    }
    v = mcqa__get_any(j, k_gold, NULL);
    if (!v || mcqa__as_int(v, 1, &g)) {
        rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: missing integer field \"gold\" (or \"label\", \"answer_index\")", wh, lineno);
        goto fail;
    }
    if (g < 0 || g >= out->n_choices) {
        rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: gold %ld is not a choice index (0..%d)", wh, lineno, g, out->n_choices - 1);
        goto fail;
    }
    out->gold = (int)g;
    v = mcqa_json_get(j, "task");
    if (v && (v->type != MCQA_JSTR || v->len == 0 || strlen(v->str) != v->len)) {
        rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: \"task\" must be a non-empty string", wh, lineno);
        goto fail;
    }
    out->task = v ? mcqa__strndup(v->str, v->len) : mcqa__strndup(default_task ? default_task : "task",
                                                                    strlen(default_task ? default_task : "task"));
    v = mcqa_json_get(j, "id");
    if (v && v->type == MCQA_JSTR && v->len > 0 && strlen(v->str) == v->len) out->id = mcqa__strndup(v->str, v->len);
    else if (v && v->type == MCQA_JNUM && v->is_int) {
        char b[64];
        snprintf(b, sizeof b, "%.0f", v->num);
        out->id = mcqa__strndup(b, strlen(b));
    } else if (v) {
        rc = ex_errf(err, errlen, MCQA_EFORMAT, "%s:%ld: \"id\" must be a non-empty string or an integer", wh, lineno);
        goto fail;
    } else {
        char b[32];
        snprintf(b, sizeof b, "%ld", lineno);
        out->id = mcqa__strndup(b, strlen(b));
    }
    if (!out->task || !out->id) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); goto fail; }
    mcqa_json_free(j);
    return MCQA_OK;
fail:
    mcqa_json_free(j);
    mcqa_item_free(out);
    out->line = lineno;
    return rc;
}

/* ================================================================ tokens */
void mcqa_tokens_free(mcqa_tokens *t)
{
    int i;
    if (!t) return;
    free(t->prompt);
    if (t->choice)
        for (i = 0; i < t->n_choices; i++) free(t->choice[i]);
    free(t->choice);
    free(t->n_choice);
    memset(t, 0, sizeof *t);
}

static int mcqa__ids_copy(const bpe_ids *ids, int **out, int *n)
{
    size_t i;
    if (ids->n > (size_t)INT_MAX / 2) return MCQA_ERANGE;
    *out = (int *)malloc((ids->n ? ids->n : 1) * sizeof(int));
    if (!*out) return MCQA_ENOMEM;
    for (i = 0; i < ids->n; i++) (*out)[i] = ids->data[i];
    *n = (int)ids->n;
    return MCQA_OK;
}

int mcqa_tokenize(bpe_tokenizer *tok, const mcqa_item *it, mcqa_tokens *out, char *err,
                  size_t errlen)
{
    size_t cl, trail = 0;
    bpe_ids ids = {0};
    char *buf = NULL;
    int i, rc = MCQA_OK;
    if (!tok || !it || !out || !it->context || it->n_choices < 1 || !it->choices)
        return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_tokenize: NULL argument");
    memset(out, 0, sizeof *out);
    cl = strlen(it->context);
    while (trail < cl && it->context[cl - 1 - trail] == ' ') trail++;
    if (bpe_encode(tok, it->context, cl - trail, &ids) != BPE_OK) { rc = MCQA_ENOMEM; goto fail; }
    if (ids.n == 0) {
        if (bpe_eot(tok) < 0) { rc = ex_errf(err, errlen, MCQA_EINVAL, "empty context and no <|endoftext|> token"); goto fail; }
        if (bpe_ids_push(&ids, bpe_eot(tok)) != BPE_OK) { rc = MCQA_ENOMEM; goto fail; }
    }
    if ((rc = mcqa__ids_copy(&ids, &out->prompt, &out->n_prompt)) != MCQA_OK) goto fail;
    out->n_choices = it->n_choices;
    out->choice = (int **)calloc((size_t)it->n_choices, sizeof(int *));
    out->n_choice = (int *)calloc((size_t)it->n_choices, sizeof(int));
    if (!out->choice || !out->n_choice) { rc = MCQA_ENOMEM; goto fail; }
    for (i = 0; i < it->n_choices; i++) {
        const char *c = it->choices[i];
        size_t n = strlen(c), w = 0;
        int lead = c[0] == ' ' || c[0] == '\t' || c[0] == '\n' || c[0] == '\r';
        char *nb = (char *)realloc(buf, trail + n + 2);
        if (!nb) { rc = MCQA_ENOMEM; goto fail; }
        buf = nb;
        memset(buf, ' ', trail);
        w = trail;
        if (!lead && trail == 0) buf[w++] = ' ';
        memcpy(buf + w, c, n);
        w += n;
        ids.n = 0;
        if (bpe_encode(tok, buf, w, &ids) != BPE_OK) { rc = MCQA_ENOMEM; goto fail; }
        if ((rc = mcqa__ids_copy(&ids, &out->choice[i], &out->n_choice[i])) != MCQA_OK) goto fail;
        if (out->n_choice[i] < 1) { rc = ex_errf(err, errlen, MCQA_EFORMAT, "choice %d has no tokens", i); goto fail; }
    }
    free(buf);
    bpe_ids_free(&ids);
    return MCQA_OK;
fail:
    free(buf);
    bpe_ids_free(&ids);
    mcqa_tokens_free(out);
    if (rc == MCQA_ENOMEM) ex_errf(err, errlen, rc, "out of memory while tokenising");
    return rc;
}

/* ================================================================ scoring */
static uint64_t mcqa__fnv(uint64_t h, const int *x, int n)
{
    int i, k;
    for (i = 0; i < n; i++) {
        uint32_t u = (uint32_t)x[i];
        for (k = 0; k < 4; k++) {
            h ^= (u >> (8 * k)) & 0xFFu;
            h *= 0x100000001B3ull;
        }
    }
    return h;
}

uint64_t mcqa_hash_tokens(const int *prompt, int n_prompt, const int *const *choice,
                          const int *n_choice, int n_choices)
{
    uint64_t h = 0xCBF29CE484222325ull;
    int i;
    h = mcqa__fnv(h, &n_prompt, 1);
    h = mcqa__fnv(h, prompt, n_prompt);
    h = mcqa__fnv(h, &n_choices, 1);
    for (i = 0; i < n_choices; i++) {
        h = mcqa__fnv(h, &n_choice[i], 1);
        h = mcqa__fnv(h, choice[i], n_choice[i]);
    }
    return h;
}

double mcqa_logprob(const float *x, int V, int target)
{
    float mx;
    double s = 0.0;
    int v;
    if (!x || V < 1 || target < 0 || target >= V) return NAN;
    mx = x[0];
    for (v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    for (v = 0; v < V; v++) s += exp((double)x[v] - (double)mx);
    return (double)x[target] - (double)mx - log(s);
}

int mcqa_score(mcqa_forward_fn fwd, void *user, int max_T, const mcqa_tokens *tk,
               mcqa_result *out, char *err, size_t errlen)
{
    int C, P, Lmax = 0, i, j, rc = MCQA_OK, start;
    int rep[MCQA_MAX_CHOICES];
    int *ids = NULL;
    if (!fwd || !tk || !out || max_T < 1 || !tk->prompt || !tk->choice || !tk->n_choice || tk->n_prompt < 1)
        return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_score: invalid argument");
    C = tk->n_choices;
    if (C < 1 || C > MCQA_MAX_CHOICES) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_score: %d choices", C);
    memset(out, 0, sizeof *out);
    for (i = 0; i < C; i++) {
        if (tk->n_choice[i] < 1 || !tk->choice[i]) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_score: empty choice %d", i);
        if (tk->n_choice[i] > Lmax) Lmax = tk->n_choice[i];
    }
    if (Lmax > max_T)
        return ex_errf(err, errlen, MCQA_ERANGE, "a choice has %d tokens, more than the model's context %d", Lmax, max_T);
    P = tk->n_prompt < max_T + 1 - Lmax ? tk->n_prompt : max_T + 1 - Lmax;
    start = tk->n_prompt - P;
    out->n_choices = C;
    out->n_prompt = P;
    out->n_prompt_full = tk->n_prompt;
    out->truncated = P < tk->n_prompt;
    out->hash = mcqa_hash_tokens(tk->prompt + start, P, (const int *const *)tk->choice, tk->n_choice, C);
    /* choices whose inputs (prompt + choice[0..n-2]) are identical share a forward */
    for (i = 0; i < C; i++) {
        rep[i] = i;
        for (j = 0; j < i; j++)
            if (rep[j] == j && tk->n_choice[j] == tk->n_choice[i] &&
                (tk->n_choice[i] == 1 ||
                 !memcmp(tk->choice[j], tk->choice[i], (size_t)(tk->n_choice[i] - 1) * sizeof(int)))) {
                rep[i] = j;
                break;
            }
    }
    ids = (int *)malloc((size_t)(P + Lmax) * sizeof(int));
    if (!ids) return ex_errf(err, errlen, MCQA_ENOMEM, "out of memory");
    /* one forward (B = 1, the exact length) per distinct input */
    memcpy(ids, tk->prompt + start, (size_t)P * sizeof(int));
    for (i = 0; i < C; i++) {
        int T = P + tk->n_choice[i] - 1, V = 0, c;
        const float *logits = NULL;
        if (rep[i] != i) continue;
        memcpy(ids + P, tk->choice[i], (size_t)(tk->n_choice[i] - 1) * sizeof(int));
        rc = fwd(user, ids, 1, T, P - 1, &logits, &V, err, errlen);
        out->forwards++;
        if (rc) { rc = MCQA_EMODEL; goto done; }
        if (!logits || V < 1) { rc = ex_errf(err, errlen, MCQA_EMODEL, "the model returned no logits"); goto done; }
        for (c = i; c < C; c++) {
            double s = 0.0;
            int k;
            if (rep[c] != i) continue;
            for (k = 0; k < tk->n_choice[c]; k++) {
                int tgt = tk->choice[c][k];
                if (tgt < 0 || tgt >= V) { rc = ex_errf(err, errlen, MCQA_ERANGE, "token %d outside the vocabulary (%d)", tgt, V); goto done; }
                s += mcqa_logprob(logits + (size_t)(P - 1 + k) * (size_t)V, V, tgt);
            }
            if (!isfinite(s)) {
                /* NaN / Inf logits: a score from them is no score, and "nan" is not JSON */
                rc = ex_errf(err, errlen, MCQA_EMODEL, "choice %d: its log-probability is not finite (%s): the model's "
                             "logits hold NaN or Inf (non-finite weights in the checkpoint?)", c, isnan(s) ? "NaN" : "Inf");
                goto done;
            }
            out->sum[c] = s;
            out->n[c] = tk->n_choice[c];
            out->mean[c] = s / tk->n_choice[c];
        }
    }
    out->pred_sum = out->pred_mean = 0;
    for (i = 1; i < C; i++) {
        if (out->sum[i] > out->sum[out->pred_sum]) out->pred_sum = i;
        if (out->mean[i] > out->mean[out->pred_mean]) out->pred_mean = i;
    }
done:
    free(ids);
    return rc;
}

void mcqa_json_write_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    for (; *p; p++) {
        if (*p == '"' || *p == '\\') { fputc('\\', f); fputc(*p, f); }
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

int mcqa_log_write(FILE *f, const mcqa_item *it, const mcqa_result *r)
{
    int i;
    if (!f || !it || !r || r->n_choices != it->n_choices || r->n_choices < 1 || r->n_choices > MCQA_MAX_CHOICES)
        return MCQA_EINVAL;
    for (i = 0; i < r->n_choices; i++) /* never "nan" / "inf" in the log (not JSON) */
        if (!isfinite(r->sum[i]) || !isfinite(r->mean[i])) return MCQA_ERANGE;
    fputs("{\"task\":", f);
    mcqa_json_write_str(f, it->task);
    fputs(",\"id\":", f);
    mcqa_json_write_str(f, it->id);
    fprintf(f, ",\"prompt_hash\":\"%016llx\",\"n_prompt\":%d,\"n_prompt_full\":%d,\"truncated\":%d,\"gold\":%d,\"choices\":[",
            (unsigned long long)r->hash, r->n_prompt, r->n_prompt_full, r->truncated, it->gold);
    for (i = 0; i < r->n_choices; i++)
        fprintf(f, "%s{\"n\":%d,\"sum\":%.17g,\"mean\":%.17g}", i ? "," : "", r->n[i], r->sum[i], r->mean[i]);
    fprintf(f, "],\"pred_sum\":%d,\"pred_mean\":%d,\"correct_sum\":%d,\"correct_mean\":%d}\n", r->pred_sum,
            r->pred_mean, r->pred_sum == it->gold, r->pred_mean == it->gold);
    return ferror(f) ? MCQA_EIO : MCQA_OK;
}

/* ================================================================ logs */
void mcqa_record_free(mcqa_record *r)
{
    if (!r) return;
    free(r->task);
    free(r->id);
    r->task = r->id = NULL;
}

static int mcqa__req_int(const mcqa_json *o, const char *key, long lo, long hi, long *out)
{
    const mcqa_json *v = mcqa_json_get(o, key);
    if (!v || mcqa__as_int(v, 0, out) || *out < lo || *out > hi) return -1;
    return 0;
}

int mcqa_log_parse(const char *line, size_t len, long lineno, const char *where,
                   mcqa_record *out, char *err, size_t errlen)
{
    mcqa_json *j = NULL;
    const mcqa_json *v, *ch;
    char jerr[256];
    const char *wh = where ? where : "log";
    long x, g, ps, pm, cs, cm, tr, np;
    int i, rc, bs = 0, bm = 0;
    double sum[MCQA_MAX_CHOICES], mean[MCQA_MAX_CHOICES];
    if (!out || (!line && len)) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_log_parse: NULL argument");
    memset(out, 0, sizeof *out);
    out->line = lineno;
    if (!line || mcqa__blank(line, len)) return MCQA_ERANGE;
    rc = mcqa_json_parse(line, len, &j, jerr, sizeof jerr);
    if (rc) return ex_errf(err, errlen, rc, "%s:%ld: not valid JSON: %s", wh, lineno, jerr);
    rc = MCQA_EFORMAT;
    if (j->type != MCQA_JOBJ) { ex_errf(err, errlen, rc, "%s:%ld: expected a JSON object", wh, lineno); goto fail; }
    v = mcqa_json_get(j, "task");
    if (!v || v->type != MCQA_JSTR || !v->len || strlen(v->str) != v->len) { ex_errf(err, errlen, rc, "%s:%ld: missing \"task\"", wh, lineno); goto fail; }
    out->task = mcqa__strndup(v->str, v->len);
    v = mcqa_json_get(j, "id");
    if (!v || v->type != MCQA_JSTR || !v->len || strlen(v->str) != v->len) { ex_errf(err, errlen, rc, "%s:%ld: missing \"id\"", wh, lineno); goto fail; }
    out->id = mcqa__strndup(v->str, v->len);
    if (!out->task || !out->id) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); goto fail; }
    v = mcqa_json_get(j, "prompt_hash");
    if (!v || v->type != MCQA_JSTR || v->len != 16 || strspn(v->str, "0123456789abcdef") != 16) {
        ex_errf(err, errlen, rc, "%s:%ld: missing or malformed \"prompt_hash\" (16 lower-case hex digits)", wh, lineno);
        goto fail;
    }
    out->hash = (uint64_t)strtoull(v->str, NULL, 16);
    ch = mcqa_json_get(j, "choices");
    if (!ch || ch->type != MCQA_JARR || ch->n < 2 || ch->n > MCQA_MAX_CHOICES) {
        ex_errf(err, errlen, rc, "%s:%ld: missing \"choices\" array of 2..%d scores", wh, lineno, MCQA_MAX_CHOICES);
        goto fail;
    }
    out->n_choices = ch->n;
    if (mcqa__req_int(j, "gold", 0, ch->n - 1, &g) || mcqa__req_int(j, "pred_sum", 0, ch->n - 1, &ps) ||
        mcqa__req_int(j, "pred_mean", 0, ch->n - 1, &pm) || mcqa__req_int(j, "correct_sum", 0, 1, &cs) ||
        mcqa__req_int(j, "correct_mean", 0, 1, &cm) || mcqa__req_int(j, "truncated", 0, 1, &tr) ||
        mcqa__req_int(j, "n_prompt", 1, INT_MAX, &np)) {
        ex_errf(err, errlen, rc, "%s:%ld: gold, pred_sum, pred_mean, correct_sum, correct_mean, truncated and n_prompt "
                                    "must be present and in range", wh, lineno);
        goto fail;
    }
    for (i = 0; i < ch->n; i++) {
        const mcqa_json *c = ch->items[i], *s = mcqa_json_get(c, "sum"), *m = mcqa_json_get(c, "mean");
        if (!s || !m || s->type != MCQA_JNUM || m->type != MCQA_JNUM || mcqa__req_int(c, "n", 1, INT_MAX, &x)) {
            ex_errf(err, errlen, rc, "%s:%ld: choice %d needs numbers n, sum and mean", wh, lineno, i);
            goto fail;
        }
        sum[i] = s->num;
        mean[i] = m->num;
        /* a log-probability sum is finite and <= 0, and the mean is sum / n (the writer
           prints both with 17 digits, so they round-trip; 1e-9 relative allows fewer) */
        if (!isfinite(sum[i]) || !isfinite(mean[i])) {
            ex_errf(err, errlen, rc, "%s:%ld: choice %d: sum or mean is not a finite number", wh, lineno, i);
            goto fail;
        }
        if (sum[i] > 0.0) {
            ex_errf(err, errlen, rc, "%s:%ld: choice %d: sum %.17g is positive, not a log-probability sum", wh, lineno,
                    i, sum[i]);
            goto fail;
        }
        if (!(fabs(mean[i] - sum[i] / (double)x) <= 1e-9 * (1.0 + fabs(sum[i] / (double)x)))) {
            ex_errf(err, errlen, rc, "%s:%ld: choice %d: mean %.17g is not sum / n = %.17g / %ld", wh, lineno, i,
                    mean[i], sum[i], x);
            goto fail;
        }
        if (sum[i] > sum[bs]) bs = i;
        if (mean[i] > mean[bm]) bm = i;
    }
    if (bs != ps || bm != pm || cs != (ps == g) || cm != (pm == g)) {
        ex_errf(err, errlen, rc, "%s:%ld: predictions or correctness do not follow from the logged scores "
                                    "(argmax sum %d, logged %ld; argmax mean %d, logged %ld)", wh, lineno, bs, ps, bm, pm);
        goto fail;
    }
    out->gold = (int)g;
    out->pred_sum = (int)ps;
    out->pred_mean = (int)pm;
    out->correct_sum = (int)cs;
    out->correct_mean = (int)cm;
    out->truncated = (int)tr;
    out->n_prompt = (int)np;
    mcqa_json_free(j);
    return MCQA_OK;
fail:
    mcqa_json_free(j);
    mcqa_record_free(out);
    return rc;
}

void mcqa_records_free(mcqa_record *recs, long n)
{
    long i;
    if (!recs) return;
    for (i = 0; i < n; i++) mcqa_record_free(&recs[i]);
    free(recs);
}

int mcqa_log_read(const char *path, mcqa_record **recs, long *n, char *err, size_t errlen)
{
    FILE *f;
    char *buf = NULL;
    size_t cap = 0;
    long len, lineno = 0, cnt = 0, rcap = 0;
    mcqa_record *r = NULL;
    int rc = MCQA_OK;
    if (!path || !recs || !n) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_log_read: NULL argument");
    *recs = NULL;
    *n = 0;
    f = fopen(path, "rb");
    if (!f) return ex_errf(err, errlen, MCQA_EIO, "cannot open %s: %s", path, strerror(errno));
    errno = 0;
    while ((len = mcqa_read_line(f, &buf, &cap)) != -1) {
        lineno++;
        if (len == MCQA_EIO) {
            rc = ex_errf(err, errlen, MCQA_EIO, "cannot read %s: %s", path, errno ? strerror(errno) : "read error");
            break;
        }
        if (len < 0) {
            rc = ex_errf(err, errlen, (int)len, "%s:%ld: %s", path, lineno,
                         len == MCQA_ERANGE ? "line too long" : "out of memory");
            break;
        }
        if (cnt == rcap) {
            long nc = rcap ? 2 * rcap : 256;
            mcqa_record *nr = (mcqa_record *)realloc(r, (size_t)nc * sizeof *nr);
            if (!nr) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); break; }
            r = nr;
            rcap = nc;
        }
        rc = mcqa_log_parse(buf, (size_t)len, lineno, path, &r[cnt], err, errlen);
        if (rc == MCQA_ERANGE) { rc = MCQA_OK; continue; }
        if (rc) break;
        cnt++;
    }
    if (!rc && ferror(f)) rc = ex_errf(err, errlen, MCQA_EIO, "error reading %s", path);
    fclose(f);
    free(buf);
    if (rc) { mcqa_records_free(r, cnt); return rc; }
    if (cnt == 0) { free(r); return ex_errf(err, errlen, MCQA_EFORMAT, "%s holds no records", path); }
    *recs = r;
    *n = cnt;
    return MCQA_OK;
}

/* Indices ordered by (task, id) (qsort over pointer + index pairs: no global state). */
typedef struct { const mcqa_record *r; long i; } mcqa__ref;
static int mcqa__cmp_ref(const void *x, const void *y)
{
    const mcqa_record *a = ((const mcqa__ref *)x)->r, *b = ((const mcqa__ref *)y)->r;
    int c = strcmp(a->task, b->task);
    return c ? c : strcmp(a->id, b->id);
}

/* Returns MCQA_ENOMEM, 0, or k > 0 when idx[k] duplicates idx[k-1]. */
static int mcqa__order(const mcqa_record *r, long n, long *idx)
{
    long i;
    mcqa__ref *v = (mcqa__ref *)malloc((size_t)n * sizeof *v);
    if (!v) return MCQA_ENOMEM;
    for (i = 0; i < n; i++) { v[i].r = &r[i]; v[i].i = i; }
    qsort(v, (size_t)n, sizeof *v, mcqa__cmp_ref);
    for (i = 0; i < n; i++) idx[i] = v[i].i;
    free(v);
    for (i = 1; i < n; i++)
        if (!strcmp(r[idx[i]].task, r[idx[i - 1]].task) && !strcmp(r[idx[i]].id, r[idx[i - 1]].id)) return (int)(i < INT_MAX ? i : INT_MAX);
    return 0;
}

int mcqa_pair(const mcqa_record *a, long na, const mcqa_record *b, long nb, long *pair,
              char *err, size_t errlen)
{
    long *ia, *ib, i, j = 0;
    int d, rc = MCQA_OK;
    if (!a || !b || !pair || na < 1 || nb < 1) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_pair: invalid argument");
    ia = (long *)malloc((size_t)na * sizeof *ia);
    ib = (long *)malloc((size_t)nb * sizeof *ib);
    if (!ia || !ib) { free(ia); free(ib); return ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); }
    d = mcqa__order(a, na, ia);
    if (d == MCQA_ENOMEM) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); goto done; }
    if (d > 0) {
        const mcqa_record *r = &a[ia[d]];
        rc = ex_errf(err, errlen, MCQA_EMISMATCH, "log A has item %s/%s twice (line %ld)", r->task, r->id, r->line);
        goto done;
    }
    d = mcqa__order(b, nb, ib);
    if (d == MCQA_ENOMEM) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); goto done; }
    if (d > 0) {
        const mcqa_record *r = &b[ib[d]];
        rc = ex_errf(err, errlen, MCQA_EMISMATCH, "log B has item %s/%s twice (line %ld)", r->task, r->id, r->line);
        goto done;
    }
    for (i = 0; i < na; i++) {
        const mcqa_record *x = &a[ia[i]], *y;
        int c = 1;
        while (j < nb) {
            y = &b[ib[j]];
            c = strcmp(y->task, x->task);
            if (!c) c = strcmp(y->id, x->id);
            if (c >= 0) break;
            rc = ex_errf(err, errlen, MCQA_EMISMATCH, "item %s/%s (log B line %ld) is not in log A: the logs "
                            "did not score the same items; refusing to compare", y->task, y->id, y->line);
            goto done;
        }
        if (j >= nb || c != 0) {
            rc = ex_errf(err, errlen, MCQA_EMISMATCH, "item %s/%s (log A line %ld) is not in log B: the logs "
                            "did not score the same items; refusing to compare", x->task, x->id, x->line);
            goto done;
        }
        y = &b[ib[j]];
        if (x->n_choices != y->n_choices) {
            rc = ex_errf(err, errlen, MCQA_EMISMATCH, "item %s/%s has %d choices in log A (line %ld) and %d in log B "
                            "(line %ld): the task files differ; refusing to compare", x->task, x->id, x->n_choices,
                            x->line, y->n_choices, y->line);
            goto done;
        }
        if (x->gold != y->gold) {
            rc = ex_errf(err, errlen, MCQA_EMISMATCH, "the gold answer of item %s/%s differs: %d in log A (line %ld), "
                            "%d in log B (line %ld)%s: the task files differ; refusing to compare", x->task, x->id,
                            x->gold, x->line, y->gold, y->line,
                            x->hash != y->hash ? " (and so does the prompt hash)" : " (the prompt hash is the same)");
            goto done;
        }
        if (x->hash != y->hash) {
            rc = ex_errf(err, errlen, MCQA_EMISMATCH, "prompt hash differs for item %s/%s (log A line %ld: %016llx, "
                            "log B line %ld: %016llx): the two runs did not score the same tokens (tokenizer, "
                            "truncation or task file differ); refusing to compare", x->task, x->id, x->line,
                            (unsigned long long)x->hash, y->line, (unsigned long long)y->hash);
            goto done;
        }
        pair[ia[i]] = ib[j];
        j++;
    }
    if (j < nb) {
        const mcqa_record *y = &b[ib[j]];
        rc = ex_errf(err, errlen, MCQA_EMISMATCH, "item %s/%s (log B line %ld) is not in log A: the logs did "
                        "not score the same items; refusing to compare", y->task, y->id, y->line);
    }
done:
    free(ia);
    free(ib);
    return rc;
}

/* ================================================================ statistics */
double mcqa_chi2_1_sf(double x)
{
    if (!(x >= 0.0)) return x < 0.0 ? 1.0 : NAN;
    return erfc(sqrt(0.5 * x));
}

int mcqa_mcnemar(long n01, long n10, double *chi2, double *p)
{
    double d, c;
    if (n01 < 0 || n10 < 0 || !chi2 || !p) return MCQA_EINVAL;
    if (n01 + n10 == 0) { *chi2 = 0.0; *p = 1.0; return MCQA_OK; }
    d = fabs((double)n01 - (double)n10) - 1.0;
    c = d * d / ((double)n01 + (double)n10);
    *chi2 = c;
    *p = mcqa_chi2_1_sf(c);
    return MCQA_OK;
}

double mcqa_binom_exact_p(long n01, long n10)
{
    long n, k, i;
    double t, s, lt;
    if (n01 < 0 || n10 < 0) return NAN;
    n = n01 + n10;
    if (n == 0) return 1.0;
    k = n01 < n10 ? n01 : n10;
    if (2 * k >= n) return 1.0;
    /* P(X <= k) = 2^-n sum_{i<=k} C(n,i); terms relative to the largest one (i = k), which
       is exp(lgamma(n+1) - lgamma(k+1) - lgamma(n-k+1) - n log 2) */
    s = 0.0;
    t = 1.0;
    for (i = k; i >= 0; i--) {
        s += t;
        t *= (double)i / (double)(n - i + 1); /* C(n,i-1) / C(n,i) */
        if (t < 1e-300) break;
    }
    lt = lgamma((double)n + 1.0) - lgamma((double)k + 1.0) - lgamma((double)(n - k) + 1.0) - (double)n * log(2.0);
    t = 2.0 * s * exp(lt);
    return t < 1.0 ? t : 1.0;
}

double mcqa_odds_ratio(long n01, long n10)
{
    if (n01 < 0 || n10 < 0 || (n01 == 0 && n10 == 0)) return NAN;
    if (n10 == 0) return INFINITY;
    return (double)n01 / (double)n10;
}

int mcqa_holm(const double *p, int m, double *adj)
{
    int *ord, i, j;
    double *tmp, run = 0.0;
    if (!p || !adj || m < 1) return MCQA_EINVAL;
    for (i = 0; i < m; i++)
        if (!(p[i] >= 0.0 && p[i] <= 1.0)) return MCQA_EINVAL;
    ord = (int *)malloc((size_t)m * sizeof *ord);
    tmp = (double *)malloc((size_t)m * sizeof *tmp);
    if (!ord || !tmp) { free(ord); free(tmp); return MCQA_ENOMEM; }
    for (i = 0; i < m; i++) ord[i] = i;
    for (i = 1; i < m; i++) { /* insertion sort by p, stable */
        int x = ord[i];
        for (j = i - 1; j >= 0 && p[ord[j]] > p[x]; j--) ord[j + 1] = ord[j];
        ord[j + 1] = x;
    }
    for (i = 0; i < m; i++) {
        double a = (double)(m - i) * p[ord[i]];
        if (a > 1.0) a = 1.0;
        if (a > run) run = a;
        tmp[ord[i]] = run;
    }
    memcpy(adj, tmp, (size_t)m * sizeof *adj);
    free(ord);
    free(tmp);
    return MCQA_OK;
}

/* PCG32 (XSH RR), stream fixed. */
static uint32_t mcqa__pcg(uint64_t *s)
{
    uint64_t old = *s;
    uint32_t x, r;
    *s = old * 6364136223846793005ull + 1442695040888963407ull;
    x = (uint32_t)(((old >> 18) ^ old) >> 27);
    r = (uint32_t)(old >> 59);
    return (x >> r) | (x << ((32u - r) & 31u));
}

/* Uniform in [0, n), n <= 2^32 (Lemire's multiply with rejection: unbiased). */
static uint32_t mcqa__below(uint64_t *s, uint32_t n)
{
    uint64_t m = (uint64_t)mcqa__pcg(s) * n;
    uint32_t l = (uint32_t)m;
    if (l < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (l < t) {
            m = (uint64_t)mcqa__pcg(s) * n;
            l = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

static int mcqa__cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double mcqa__quantile(const double *sorted, int n, double q)
{
    double h = q * (double)(n - 1);
    int lo = (int)floor(h);
    if (lo >= n - 1) return sorted[n - 1];
    return sorted[lo] + (h - (double)lo) * (sorted[lo + 1] - sorted[lo]);
}

int mcqa_bootstrap_delta(const signed char *d, long n, int reps, uint64_t seed, double alpha,
                         double *lo, double *hi)
{
    double *v;
    uint64_t s;
    int r;
    if (!d || n < 1 || n > 0xFFFFFFFFL || reps < 2 || !(alpha > 0.0 && alpha < 1.0) || !lo || !hi) return MCQA_EINVAL;
    v = (double *)malloc((size_t)reps * sizeof *v);
    if (!v) return MCQA_ENOMEM;
    s = seed * 0x9E3779B97F4A7C15ull + 0xDA3E39CB94B95BDBull;
    (void)mcqa__pcg(&s);
    for (r = 0; r < reps; r++) {
        long i, acc = 0;
        for (i = 0; i < n; i++) acc += d[mcqa__below(&s, (uint32_t)n)];
        v[r] = (double)acc / (double)n;
    }
    qsort(v, (size_t)reps, sizeof *v, mcqa__cmp_d);
    *lo = mcqa__quantile(v, reps, 0.5 * alpha);
    *hi = mcqa__quantile(v, reps, 1.0 - 0.5 * alpha);
    free(v);
    return MCQA_OK;
}

int mcqa_bootstrap_cluster(const int *t, long n, int S, int reps, uint64_t seed, double alpha, double *lo,
                           double *hi)
{
    double *v;
    uint64_t s;
    int r;
    long i;
    if (!t || n < 1 || n > 0xFFFFFFFFL || S < 1 || reps < 2 || !(alpha > 0.0 && alpha < 1.0) || !lo || !hi)
        return MCQA_EINVAL;
    for (i = 0; i < n; i++)
        if (t[i] < -S || t[i] > S) return MCQA_EINVAL;
    v = (double *)malloc((size_t)reps * sizeof *v);
    if (!v) return MCQA_ENOMEM;
    /* the stream and the order of draws of mcqa_bootstrap_delta: S = 1 gives its CI exactly */
    s = seed * 0x9E3779B97F4A7C15ull + 0xDA3E39CB94B95BDBull;
    (void)mcqa__pcg(&s);
    for (r = 0; r < reps; r++) {
        long long acc = 0;
        for (i = 0; i < n; i++) acc += t[mcqa__below(&s, (uint32_t)n)];
        v[r] = (double)acc / ((double)n * (double)S);
    }
    qsort(v, (size_t)reps, sizeof *v, mcqa__cmp_d);
    *lo = mcqa__quantile(v, reps, 0.5 * alpha);
    *hi = mcqa__quantile(v, reps, 1.0 - 0.5 * alpha);
    free(v);
    return MCQA_OK;
}

/* The regularised incomplete beta I_x(a, b) by its continued fraction (modified Lentz),
   with the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges slowly. */
static double mcqa__betacf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0), h;
    int m;
    if (fabs(d) < tiny) d = tiny;
    d = 1.0 / d;
    h = d;
    for (m = 1; m <= 1000; m++) {
        double m2 = 2.0 * m, aa, del;
        aa = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        h *= d * c;
        aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
        d = 1.0 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1.0 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        del = d * c;
        h *= del;
        if (fabs(del - 1.0) < 1e-15) break;
    }
    return h;
}

static double mcqa__betai(double a, double b, double x)
{
    double lf;
    if (x <= 0.0) return 0.0;
    if (x >= 1.0) return 1.0;
    lf = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1.0) / (a + b + 2.0)) return exp(lf) * mcqa__betacf(a, b, x) / a;
    return 1.0 - exp(lf) * mcqa__betacf(b, a, 1.0 - x) / b;
}

double mcqa_t_p2(double t, int df)
{
    if (isnan(t) || df < 1) return NAN;
    if (isinf(t)) return 0.0;
    return mcqa__betai(0.5 * df, 0.5, (double)df / ((double)df + t * t));
}

int mcqa_paired_t(const double *delta, int S, double *mean, double *sd, double *t, double *p)
{
    double m = 0.0, v = 0.0;
    int i;
    if (!delta || S < 2 || !mean || !sd || !t || !p) return MCQA_EINVAL;
    for (i = 0; i < S; i++) {
        if (!isfinite(delta[i])) return MCQA_EINVAL;
        m += delta[i];
    }
    m /= S;
    for (i = 0; i < S; i++) v += (delta[i] - m) * (delta[i] - m);
    v /= (S - 1);
    *mean = m;
    *sd = sqrt(v);
    if (*sd == 0.0) {
        *t = m == 0.0 ? 0.0 : (m > 0.0 ? INFINITY : -INFINITY);
        *p = m == 0.0 ? 1.0 : 0.0;
        return MCQA_OK;
    }
    *t = m / (*sd / sqrt((double)S));
    *p = mcqa_t_p2(*t, S - 1);
    return MCQA_OK;
}

/* ================================================================ families */
void mcqa_families_free(mcqa_families *f)
{
    int i, j;
    if (!f) return;
    for (i = 0; i < f->n; i++) {
        free(f->name[i]);
        for (j = 0; j < f->n_tasks[i]; j++) free(f->tasks[i][j]);
        free(f->tasks[i]);
    }
    free(f->name);
    free(f->n_tasks);
    free(f->tasks);
    memset(f, 0, sizeof *f);
}

int mcqa_family_of(const mcqa_families *f, const char *task)
{
    int i, j;
    if (!f || !task) return -1;
    for (i = 0; i < f->n; i++)
        for (j = 0; j < f->n_tasks[i]; j++)
            if (!strcmp(f->tasks[i][j], task)) return i;
    return -1;
}

static int mcqa__is_name(char c)
{
    return c && c != ' ' && c != '\t' && c != ':' && c != '#' && c != '\r' && c != '\n';
}

int mcqa_families_parse(const char *text, size_t len, mcqa_families *out, char *err,
                        size_t errlen)
{
    size_t pos = 0;
    long lineno = 0;
    int rc = MCQA_OK;
    if (!out || (!text && len)) return ex_errf(err, errlen, MCQA_EINVAL, "mcqa_families_parse: NULL argument");
    memset(out, 0, sizeof *out);
    while (pos < len) {
        size_t e = pos, k;
        const char *l;
        int fi, j;
        while (e < len && text[e] != '\n') e++;
        lineno++;
        l = text + pos;
        k = 0;
        while (pos + k < e && (l[k] == ' ' || l[k] == '\t' || l[k] == '\r')) k++;
        if (pos + k < e && l[k] != '#') {
            size_t ns = k;
            char **nn;
            int *nt;
            char ***ntk;
            while (pos + k < e && mcqa__is_name(l[k])) k++;
            if (k == ns || pos + k >= e || l[k] != ':') {
                rc = ex_errf(err, errlen, MCQA_EFORMAT, "families line %ld: expected \"NAME: task task ...\"", lineno);
                break;
            }
            nn = (char **)realloc(out->name, (size_t)(out->n + 1) * sizeof *nn);
            if (nn) out->name = nn;
            nt = (int *)realloc(out->n_tasks, (size_t)(out->n + 1) * sizeof *nt);
            if (nt) out->n_tasks = nt;
            ntk = (char ***)realloc(out->tasks, (size_t)(out->n + 1) * sizeof *ntk);
            if (ntk) out->tasks = ntk;
            if (!nn || !nt || !ntk) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); break; }
            fi = out->n;
            out->name[fi] = mcqa__strndup(l + ns, k - ns);
            out->n_tasks[fi] = 0;
            out->tasks[fi] = NULL;
            out->n++;
            if (!out->name[fi]) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); break; }
            for (k++;;) {
                size_t ts;
                char *name, **ta;
                int j;
                while (pos + k < e && (l[k] == ' ' || l[k] == '\t' || l[k] == '\r')) k++;
                if (pos + k >= e || l[k] == '#') break;
                ts = k;
                while (pos + k < e && mcqa__is_name(l[k])) k++;
                if (k == ts) { rc = ex_errf(err, errlen, MCQA_EFORMAT, "families line %ld: unexpected '%c'", lineno, l[k]); break; }
                name = mcqa__strndup(l + ts, k - ts);
                if (!name) { rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); break; }
                if ((j = mcqa_family_of(out, name)) >= 0) {
                    rc = ex_errf(err, errlen, MCQA_EFORMAT, "families line %ld: task %s is already in family %s", lineno, name, out->name[j]);
                    free(name);
                    break;
                }
                ta = (char **)realloc(out->tasks[fi], (size_t)(out->n_tasks[fi] + 1) * sizeof *ta);
                if (!ta) { free(name); rc = ex_errf(err, errlen, MCQA_ENOMEM, "out of memory"); break; }
                out->tasks[fi] = ta;
                ta[out->n_tasks[fi]++] = name;
            }
            if (rc) break;
            if (out->n_tasks[fi] == 0) { rc = ex_errf(err, errlen, MCQA_EFORMAT, "families line %ld: family %s has no tasks", lineno, out->name[fi]); break; }
            for (j = 0; j < fi; j++)
                if (!strcmp(out->name[j], out->name[fi])) { rc = ex_errf(err, errlen, MCQA_EFORMAT, "families line %ld: family %s declared twice", lineno, out->name[fi]); break; }
            if (rc) break;
        }
        pos = e + 1;
    }
    if (rc) mcqa_families_free(out);
    return rc;
}
