/* niah.c - seed 002's induction needle-in-a-haystack experiment (see niah.h).
   License: MIT. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include "niah.h"
#include "errf.h"
#include "model.h"
#include "plot.h"
#include "sigreg.h"
#include "train.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double niah__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* uniform integer in [0, n), n >= 1 */
static int niah__below(tk_rng *rng, int n)
{
    return (int)(tk_rng_u32(rng) % (uint32_t)n);
}

/* ------------------------------------------------------------------ needles */

static int niah__encode(bpe_tokenizer *tok, const char *text, int32_t *out, int cap, int *n)
{
    bpe_ids ids = {0};
    int rc = bpe_encode(tok, text, strlen(text), &ids);
    if (rc != BPE_OK) {
        bpe_ids_free(&ids);
        return rc;
    }
    if ((int)ids.n > cap || ids.n == 0) {
        bpe_ids_free(&ids);
        return BPE_ERANGE;
    }
    memcpy(out, ids.data, sizeof(int32_t) * ids.n);
    *n = (int)ids.n;
    bpe_ids_free(&ids);
    return BPE_OK;
}

typedef struct { int32_t id; long count; } niah__cand;

static int niah__cand_cmp(const void *a, const void *b)
{
    const niah__cand *x = (const niah__cand *)a, *y = (const niah__cand *)b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* " Word": a space, one capital, at least two lower-case ASCII letters */
static int niah__is_key_bytes(const unsigned char *p, size_t n)
{
    size_t i;
    if (n < 4 || p[0] != ' ' || p[1] < 'A' || p[1] > 'Z') return 0;
    for (i = 2; i < n; i++)
        if (p[i] < 'a' || p[i] > 'z') return 0;
    return 1;
}

int niah_spec_build(niah_spec *s, bpe_tokenizer *tok, const uint16_t *text, size_t n, int nkeys,
                    char *err, size_t errlen)
{
    long *cnt = NULL;
    niah__cand *cand = NULL;
    int V, i, nc = 0, d, rc, got[2] = {0, 0};
    size_t j;
    if (!s) return ex_errf(err, errlen, NIAH_EINVAL, "niah_spec_build: s is NULL");
    memset(s, 0, sizeof *s);
    if (!tok || !text || n == 0 || nkeys < 1 || nkeys > 100000)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah_spec_build: need a tokenizer, text and 1 <= nkeys <= 1e5");
    V = bpe_vocab_size(tok);
    if (niah__encode(tok, " The access code for record", s->prefix, NIAH_MAX_PIECE, &s->nprefix) != BPE_OK ||
        niah__encode(tok, " is", s->is_tok, NIAH_MAX_PIECE, &s->nis) != BPE_OK ||
        niah__encode(tok, ".", s->dot, NIAH_MAX_PIECE, &s->ndot) != BPE_OK)
        return ex_errf(err, errlen, NIAH_EFAIL, "niah_spec_build: cannot encode the template");
    for (d = 0; d < 10; d++) {
        char buf[4] = {' ', (char)('0' + d), 0, 0};
        int nd = 0;
        if (niah__encode(tok, buf, s->digit + d, 1, &nd) != BPE_OK || nd != 1)
            return ex_errf(err, errlen, NIAH_EFAIL, "niah_spec_build: digit \"%s\" is not one token", buf);
    }
    cnt = (long *)calloc((size_t)V, sizeof(long));
    cand = (niah__cand *)malloc(sizeof(niah__cand) * (size_t)V);
    if (!cnt || !cand) {
        free(cnt);
        free(cand);
        return ex_errf(err, errlen, NIAH_ENOMEM, "niah_spec_build: out of memory");
    }
    for (j = 0; j < n; j++)
        if (text[j] < V) cnt[text[j]]++;
    for (i = 0; i < V; i++) {
        size_t bl = 0;
        const unsigned char *b;
        int k, tmpl = 0;
        if (!cnt[i]) continue;
        b = bpe_token_bytes(tok, i, &bl);
        if (!b || !niah__is_key_bytes(b, bl)) continue;
        for (k = 0; k < s->nprefix; k++) tmpl |= s->prefix[k] == i;
        for (k = 0; k < s->nis; k++) tmpl |= s->is_tok[k] == i;
        if (tmpl) continue;
        cand[nc].id = i;
        cand[nc].count = cnt[i];
        nc++;
    }
    free(cnt);
    qsort(cand, (size_t)nc, sizeof *cand, niah__cand_cmp);
    s->keys[0] = (int32_t *)malloc(sizeof(int32_t) * (size_t)nkeys);
    s->keys[1] = (int32_t *)malloc(sizeof(int32_t) * (size_t)nkeys);
    if (!s->keys[0] || !s->keys[1]) {
        free(cand);
        niah_spec_free(s);
        return ex_errf(err, errlen, NIAH_ENOMEM, "niah_spec_build: out of memory");
    }
    /* alternate train / eval over the candidates that re-encode as themselves */
    for (i = 0; i < nc && (got[0] < nkeys || got[1] < nkeys); i++) {
        size_t bl = 0;
        const unsigned char *b = bpe_token_bytes(tok, cand[i].id, &bl);
        char word[64];
        int32_t one[2];
        int nw = 0, side = (got[0] + got[1]) % 2;
        if (bl >= sizeof word) continue;
        memcpy(word, b, bl);
        word[bl] = 0;
        rc = niah__encode(tok, word, one, 2, &nw);
        if (rc != BPE_OK || nw != 1 || one[0] != cand[i].id) continue;
        if (got[side] >= nkeys) side = 1 - side;
        s->keys[side][got[side]++] = cand[i].id;
    }
    free(cand);
    if (got[0] < nkeys || got[1] < nkeys) {
        niah_spec_free(s);
        return ex_errf(err, errlen, NIAH_EINVAL,
                          "niah_spec_build: the text has %d usable capitalised single-token words, %d needed",
                          got[0] + got[1], 2 * nkeys);
    }
    s->nkeys[0] = s->nkeys[1] = nkeys;
    return NIAH_OK;
}

void niah_spec_free(niah_spec *s)
{
    if (!s) return;
    free(s->keys[0]);
    free(s->keys[1]);
    s->keys[0] = s->keys[1] = NULL;
    s->nkeys[0] = s->nkeys[1] = 0;
}

int niah_cue_len(const niah_spec *s) { return s ? s->nprefix + 1 + s->nis : 0; }
int niah_record_len(const niah_spec *s) { return s ? niah_cue_len(s) + NIAH_DIGITS + s->ndot : 0; }

static int niah__needle_ok(const niah_spec *s, const niah_needle *nd)
{
    int k;
    if (!s || !nd || nd->key < 0) return 0;
    for (k = 0; k < NIAH_DIGITS; k++)
        if (nd->digits[k] < 0 || nd->digits[k] > 9) return 0;
    return 1;
}

int niah_cue(const niah_spec *s, const niah_needle *nd, int32_t *out, int cap)
{
    int n = 0, k;
    if (!niah__needle_ok(s, nd) || !out || cap < niah_cue_len(s) + NIAH_DIGITS) return NIAH_EINVAL;
    for (k = 0; k < s->nprefix; k++) out[n++] = s->prefix[k];
    out[n++] = nd->key;
    for (k = 0; k < s->nis; k++) out[n++] = s->is_tok[k];
    for (k = 0; k < NIAH_DIGITS; k++) out[n++] = s->digit[nd->digits[k]];
    return n;
}

int niah_record(const niah_spec *s, const niah_needle *nd, int32_t *out, int cap)
{
    int n, k;
    if (!niah__needle_ok(s, nd) || !out || cap < niah_record_len(s)) return NIAH_EINVAL;
    n = niah_cue(s, nd, out, cap);
    for (k = 0; k < s->ndot; k++) out[n++] = s->dot[k];
    return n;
}

int niah_code_split(const int digits[NIAH_DIGITS])
{
    int k, sum = 0;
    for (k = 0; k < NIAH_DIGITS; k++) sum += digits[k];
    return sum % 2;
}

int niah_draw(const niah_spec *s, int split, tk_rng *rng, niah_needle *out)
{
    int k;
    if (!s || !rng || !out || (split != NIAH_TRAIN && split != NIAH_EVAL) || s->nkeys[split] < 1)
        return NIAH_EINVAL;
    out->key = s->keys[split][niah__below(rng, s->nkeys[split])];
    for (k = 0; k < NIAH_DIGITS; k++) out->digits[k] = niah__below(rng, 10);
    if (niah_code_split(out->digits) != split) /* flip the last digit's parity: 0<->1, ... 8<->9 */
        out->digits[NIAH_DIGITS - 1] ^= 1;
    return NIAH_OK;
}

int niah_spec_tokens(const niah_spec *s, int32_t *out, int cap)
{
    int n = 0, k, sp;
    if (!s || !out) return NIAH_EINVAL;
#define NIAH__PUT(x)                     \
    do {                                 \
        if (n >= cap) return NIAH_EINVAL; \
        out[n++] = (x);                  \
    } while (0)
    for (k = 0; k < s->nprefix; k++) NIAH__PUT(s->prefix[k]);
    for (k = 0; k < s->nis; k++) NIAH__PUT(s->is_tok[k]);
    for (k = 0; k < s->ndot; k++) NIAH__PUT(s->dot[k]);
    for (k = 0; k < 10; k++) NIAH__PUT(s->digit[k]);
    for (sp = 0; sp < 2; sp++)
        for (k = 0; k < s->nkeys[sp]; k++) NIAH__PUT(s->keys[sp][k]);
#undef NIAH__PUT
    return n;
}

/* ------------------------------------------------------------------ vocabulary */

int niah_vocab_build(niah_vocab *v, const uint16_t *text, size_t n, int n_src, int V,
                     const int32_t *must, int nmust, char *err, size_t errlen)
{
    niah__cand *cand = NULL;
    long *cnt = NULL;
    int i, nc = 0, next = 0;
    size_t j;
    if (!v) return ex_errf(err, errlen, NIAH_EINVAL, "niah_vocab_build: v is NULL");
    memset(v, 0, sizeof *v);
    if (!text || n == 0 || n_src < 2 || n_src > (1 << 24) || V < 2 || V > n_src + 1 || nmust < 0 ||
        (nmust > 0 && !must))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah_vocab_build: bad arguments (n_src %d, V %d, nmust %d)",
                          n_src, V, nmust);
    if (nmust > V - 1)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah_vocab_build: %d needle tokens do not fit in V %d", nmust, V);
    v->fwd = (int32_t *)malloc(sizeof(int32_t) * (size_t)n_src);
    v->back = (int32_t *)malloc(sizeof(int32_t) * (size_t)V);
    cnt = (long *)calloc((size_t)n_src, sizeof(long));
    cand = (niah__cand *)malloc(sizeof(niah__cand) * (size_t)n_src);
    v->top = (int32_t *)malloc(sizeof(int32_t) * 1024);
    if (!v->fwd || !v->back || !cnt || !cand || !v->top) {
        free(cnt);
        free(cand);
        niah_vocab_free(v);
        return ex_errf(err, errlen, NIAH_ENOMEM, "niah_vocab_build: out of memory");
    }
    for (i = 0; i < n_src; i++) v->fwd[i] = -1;
    for (i = 0; i < nmust; i++) {
        if (must[i] < 0 || must[i] >= n_src) {
            free(cnt);
            free(cand);
            niah_vocab_free(v);
            return ex_errf(err, errlen, NIAH_EINVAL, "niah_vocab_build: needle token %d outside [0, %d)", must[i], n_src);
        }
        if (v->fwd[must[i]] < 0) {
            v->fwd[must[i]] = next;
            v->back[next++] = must[i];
        }
    }
    for (j = 0; j < n; j++) {
        if (text[j] >= n_src) {
            free(cnt);
            free(cand);
            niah_vocab_free(v);
            return ex_errf(err, errlen, NIAH_EINVAL, "niah_vocab_build: token %u at %lu outside [0, %d)",
                              (unsigned)text[j], (unsigned long)j, n_src);
        }
        cnt[text[j]]++;
    }
    for (i = 0; i < n_src; i++)
        if (cnt[i]) {
            cand[nc].id = i;
            cand[nc].count = cnt[i];
            nc++;
        }
    free(cnt);
    qsort(cand, (size_t)nc, sizeof *cand, niah__cand_cmp);
    for (i = 0; i < nc; i++) {
        if (v->ntop < 1024) v->top[v->ntop++] = cand[i].id; /* GPT-2 ids for now */
        if (next < V - 1 && v->fwd[cand[i].id] < 0) {
            v->fwd[cand[i].id] = next;
            v->back[next++] = cand[i].id;
        }
    }
    free(cand);
    v->V = next + 1;
    v->unk = next;
    v->back[next] = -1;
    v->n_src = n_src;
    for (i = 0; i < n_src; i++)
        if (v->fwd[i] < 0) v->fwd[i] = v->unk;
    for (i = 0; i < v->ntop; i++) v->top[i] = v->fwd[v->top[i]];
    return NIAH_OK;
}

void niah_vocab_free(niah_vocab *v)
{
    if (!v) return;
    free(v->fwd);
    free(v->back);
    free(v->top);
    memset(v, 0, sizeof *v);
}

/* ------------------------------------------------------------------ sequences */

static int niah__hay(const niah_vocab *v, const niah_hay *h, int len, tk_rng *rng, int32_t *row)
{
    int i;
    if (h->mode == NIAH_HAY_TEXT) {
        size_t off;
        if (!h->ids || h->n <= (size_t)len) return NIAH_EINVAL;
        off = (size_t)(((uint64_t)tk_rng_u32(rng) << 32 | tk_rng_u32(rng)) % (uint64_t)(h->n - (size_t)len));
        for (i = 0; i < len; i++) row[i] = h->ids[off + (size_t)i] < (uint16_t)v->n_src ? v->fwd[h->ids[off + (size_t)i]] : v->unk;
    } else if (h->mode == NIAH_HAY_SYNTH) {
        if (v->ntop < 1) return NIAH_EINVAL;
        for (i = 0; i < len; i++) row[i] = v->top[niah__below(rng, v->ntop)];
    } else {
        return NIAH_EINVAL;
    }
    return NIAH_OK;
}

static void niah__put(const niah_vocab *v, int32_t *row, int pos, const int32_t *src, int n)
{
    int i;
    for (i = 0; i < n; i++) row[pos + i] = v->fwd[src[i]];
}

int niah_eval_row(const niah_spec *s, const niah_vocab *v, const niah_hay *h, int T, int rec_lo,
                  int rec_hi, tk_rng *rng, int32_t *row, niah_probe *pr)
{
    int32_t buf[4 * NIAH_MAX_PIECE + 16];
    int rl, cl, rc;
    if (!s || !v || !h || !rng || !row || !pr || rec_lo < 0 || rec_hi <= rec_lo) return NIAH_EINVAL;
    rl = niah_record_len(s);
    cl = niah_cue_len(s) + NIAH_DIGITS;
    if (T + 1 < rec_hi - 1 + rl + cl) return NIAH_EINVAL;
    rc = niah__hay(v, h, T + 1, rng, row);
    if (rc) return rc;
    rc = niah_draw(s, NIAH_EVAL, rng, &pr->nd);
    if (rc) return rc;
    pr->rec_pos = rec_lo + niah__below(rng, rec_hi - rec_lo);
    pr->cue_pos = T + 1 - cl;
    pr->ans = pr->cue_pos + niah_cue_len(s) - 1;
    niah__put(v, row, pr->rec_pos, buf, niah_record(s, &pr->nd, buf, (int)(sizeof buf / sizeof buf[0])));
    niah__put(v, row, pr->cue_pos, buf, niah_cue(s, &pr->nd, buf, (int)(sizeof buf / sizeof buf[0])));
    return NIAH_OK;
}

int niah_train_row(const niah_spec *s, const niah_vocab *v, const niah_hay *h, int T, int k,
                   tk_rng *rng, int32_t *row, niah_probe *pr)
{
    int32_t buf[4 * NIAH_MAX_PIECE + 16];
    int order[64];
    int rl, cl, half, rs, cs, i, rc;
    if (!s || !v || !h || !rng || !row || k < 0 || k > 64) return NIAH_EINVAL;
    rc = niah__hay(v, h, T + 1, rng, row);
    if (rc || k == 0) return rc;
    rl = niah_record_len(s);
    cl = niah_cue_len(s) + NIAH_DIGITS;
    half = (T + 1) / 2;
    rs = half / k;            /* record slot */
    cs = (T + 1 - half) / k;  /* cue slot */
    if (rs < rl || cs < cl) return NIAH_EINVAL;
    for (i = 0; i < k; i++) order[i] = i;
    for (i = k - 1; i > 0; i--) {
        int j = niah__below(rng, i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (i = 0; i < k; i++) {
        niah_probe p;
        int slot = order[i];
        rc = niah_draw(s, NIAH_TRAIN, rng, &p.nd);
        if (rc) return rc;
        p.rec_pos = i * rs + niah__below(rng, rs - rl + 1);
        p.cue_pos = half + slot * cs + niah__below(rng, cs - cl + 1);
        p.ans = p.cue_pos + niah_cue_len(s) - 1;
        niah__put(v, row, p.rec_pos, buf, niah_record(s, &p.nd, buf, (int)(sizeof buf / sizeof buf[0])));
        niah__put(v, row, p.cue_pos, buf, niah_cue(s, &p.nd, buf, (int)(sizeof buf / sizeof buf[0])));
        if (pr) pr[i] = p;
    }
    return NIAH_OK;
}

int niah_copy_row(const niah_vocab *v, const niah_hay *h, int T, int seg, tk_rng *rng, int32_t *row)
{
    int half, src, dst, i, rc;
    if (!v || !h || !rng || !row || seg < 1 || T < 2 * seg + 1) return NIAH_EINVAL;
    rc = niah__hay(v, h, T + 1, rng, row);
    if (rc) return rc;
    half = (T + 1) / 2;
    if (half < seg || T + 1 - half < seg) return NIAH_EINVAL;
    src = niah__below(rng, half - seg + 1);
    dst = half + niah__below(rng, T + 1 - half - seg + 1);
    for (i = 0; i < seg; i++) row[dst + i] = row[src + i];
    return NIAH_OK;
}

/* ------------------------------------------------------------------ scoring */

int niah_score(const float *logits, int V, const niah_vocab *v, const niah_spec *s,
               const niah_probe *pr, int correct[NIAH_DIGITS])
{
    int k, right = 0;
    if (!logits || !v || !s || !pr || !correct || V != v->V || pr->ans < 0) return NIAH_EINVAL;
    for (k = 0; k < NIAH_DIGITS; k++) {
        const float *x = logits + (size_t)(pr->ans + k) * (size_t)V;
        int j, best = 0;
        for (j = 1; j < V; j++)
            if (x[j] > x[best]) best = j;
        if (pr->nd.digits[k] < 0 || pr->nd.digits[k] > 9) return NIAH_EINVAL;
        correct[k] = best == v->fwd[s->digit[pr->nd.digits[k]]];
        right += correct[k];
    }
    return right;
}

void niah_wilson(long k, long n, double *lo, double *hi)
{
    const double z = 1.959963984540054;
    double p, den, c, h;
    if (n <= 0 || k < 0 || k > n) {
        if (lo) *lo = NAN;
        if (hi) *hi = NAN;
        return;
    }
    p = (double)k / (double)n;
    den = 1.0 + z * z / (double)n;
    c = (p + z * z / (2.0 * (double)n)) / den;
    h = z * sqrt(p * (1.0 - p) / (double)n + z * z / (4.0 * (double)n * (double)n)) / den;
    if (lo) *lo = c - h < 0.0 ? 0.0 : c - h;
    if (hi) *hi = c + h > 1.0 ? 1.0 : c + h;
}

/* ------------------------------------------------------------------ experiment */

static const char *const niah__arm_names[NIAH_NARMS] = {
    "softmax-rope", "softmax-nope", "polar", "softmax-rope+gdelta", "softmax-nope+gdelta", "polar+gdelta"};

const char *niah_arm_name(int i) { return i >= 0 && i < NIAH_NARMS ? niah__arm_names[i] : "?"; }

int niah_arm_from_name(const char *name)
{
    int i;
    if (!name) return -1;
    for (i = 0; i < NIAH_NARMS; i++)
        if (!strcmp(name, niah__arm_names[i])) return i;
    return -1;
}

niah_config niah_config_default(void)
{
    niah_config c;
    int i;
    memset(&c, 0, sizeof c);
    c.train_len = 64;
    c.nmult = 6;
    for (i = 0; i < 6; i++) c.mult[i] = 1 << i;
    c.steps = 3000;
    c.batch = 8;
    c.lr = 3e-3f;
    c.weight_decay = 0.01f;
    c.grad_clip = 1.0f;
    c.train_needles = 1;
    c.copy_frac = 0.0f;
    c.digit_weight = 20.0f;
    c.probes = 80;
    c.doc_windows = 8;
    c.eval_tokens = 4096;
    c.d_model = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.vocab = 2048;
    c.conv_k = 4;
    c.nkeys = 64;
    c.haystack = NIAH_HAY_TEXT;
    c.window = -1;
    c.distractor = 0;
    c.distractor_weight = 0.01f;
    for (i = 0; i < NIAH_NARMS; i++) c.arms[i] = 1;
    c.seed = 1;
    c.log_every = 500;
    c.lfm_k = 3;
    c.ffn = MDL_FFN_GELU;
    c.norm = MDL_NORM_LAYER;
    c.kv_heads = 0;
    c.qk_norm = 1;
    c.polar_gate = MDL_POLAR_GATE_HEAD;
    c.canon_k = 0;
    c.mem_qkv = MDL_MEMQKV_OWN;
    c.optimizer = NIAH_OPT_ADAMW;
    c.muon_momentum = 0.95f;
    c.muon_ns_steps = 5;
    c.sigreg = SGR_OFF;
    c.sigreg_alpha = SGR_ALPHA;
    c.lr_flat = 0.0;
    c.lr_floor = 0.1;
    return c;
}

int niah_config_preset(niah_config *c, const char *name)
{
    if (!c || !name) return NIAH_EINVAL;
    if (!strcmp(name, "default")) {
        niah_config d = niah_config_default();
        memcpy(c->preset, d.preset, sizeof c->preset);
        memcpy(c->layer_pattern, d.layer_pattern, sizeof c->layer_pattern);
        c->d_model = d.d_model;
        c->n_layers = d.n_layers;
        c->n_heads = d.n_heads;
        c->conv_k = d.conv_k;
        c->lfm_k = d.lfm_k;
        c->ffn = d.ffn;
        c->norm = d.norm;
        c->kv_heads = d.kv_heads;
        c->qk_norm = d.qk_norm;
        c->polar_gate = d.polar_gate;
        c->canon_k = d.canon_k;
        c->mem_qkv = d.mem_qkv;
        c->optimizer = d.optimizer;
        c->lr_flat = d.lr_flat;
        c->lr_floor = d.lr_floor;
        return NIAH_OK;
    }
    if (!strcmp(name, "atma")) {
        snprintf(c->preset, sizeof c->preset, "atma");
        snprintf(c->layer_pattern, sizeof c->layer_pattern, "ccAc");
        c->d_model = 64;
        c->n_layers = 8;
        c->n_heads = 4;
        c->conv_k = 0;
        c->lfm_k = 3;
        c->ffn = MDL_FFN_RELU2;
        c->norm = MDL_NORM_RMS;
        c->kv_heads = 1;
        c->qk_norm = 1;
        c->polar_gate = MDL_POLAR_GATE_CHANNEL;
        c->canon_k = 4;
        c->mem_qkv = MDL_MEMQKV_SHARED;
        c->optimizer = NIAH_OPT_MUON;
        c->lr_flat = 0.3;
        c->lr_floor = 0.0;
        return NIAH_OK;
    }
    return NIAH_EINVAL;
}

static int niah__validate(const niah_config *c, char *err, size_t errlen)
{
    int i, any = 0;
    if (!c) return ex_errf(err, errlen, NIAH_EINVAL, "niah: config is NULL");
    if (c->train_len < 32 || c->train_len > 65536)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: train_len must be in [32, 65536] (got %d)", c->train_len);
    if (c->nmult < 1 || c->nmult > NIAH_MAX_MULT)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: 1 to %d lengths (got %d)", NIAH_MAX_MULT, c->nmult);
    for (i = 0; i < c->nmult; i++)
        if (c->mult[i] < 1 || (long long)c->mult[i] * c->train_len > 65536)
            return ex_errf(err, errlen, NIAH_EINVAL, "niah: length multiple %d out of range (mult x train_len <= 65536)",
                              c->mult[i]);
    if (c->steps < 0 || c->batch < 1 || !(c->lr >= 0.0f) || !(c->lr < 1.0f) || !(c->weight_decay >= 0.0f) ||
        !(c->weight_decay < 1.0f) || !(c->grad_clip >= 0.0f) || !(c->grad_clip < 1e6f))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: steps >= 0, batch >= 1, lr in [0,1), weight decay in [0,1), "
                                                    "grad clip in [0, 1e6) needed");
    if (!(c->digit_weight >= 0.0f) || !(c->digit_weight <= 1e6f))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: digit_weight must be in [0, 1e6]");
    if (!(c->copy_frac >= 0.0f) || !(c->copy_frac <= 1.0f))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: copy_frac must be in [0, 1]");
    if (c->train_needles < 1 || c->train_needles > 64)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: train_needles must be in [1, 64] (got %d)", c->train_needles);
    if (c->probes < 1 || c->doc_windows < 0 || c->eval_tokens < 1)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: probes >= 1, doc_windows >= 0, eval_tokens >= 1 needed");
    if (c->d_model < 2 || c->n_layers < 1 || c->n_heads < 1 || c->d_model % c->n_heads || (c->d_model / c->n_heads) % 2)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: n_heads must divide d_model with an even head width");
    if (c->conv_k != 0 && (c->conv_k < 2 || c->conv_k > 16))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: conv_k must be 0 or in [2, 16] (got %d)", c->conv_k);
    if (c->vocab < 64 || c->vocab > 65536)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: vocab must be in [64, 65536] (got %d)", c->vocab);
    if (c->nkeys < 1 || c->nkeys > 4096)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: nkeys must be in [1, 4096] (got %d)", c->nkeys);
    if (c->haystack != NIAH_HAY_TEXT && c->haystack != NIAH_HAY_SYNTH)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: haystack must be text or synthetic");
    if (c->window == 0 || c->window < -1 || c->distractor < 0 || !(c->distractor_weight >= 0.0f) ||
        !(c->distractor_weight < 1e6f))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: window -1 or >= 1, distractor >= 0, weight finite >= 0");
    for (i = 0; i < NIAH_NARMS; i++) any |= c->arms[i] != 0;
    if (!any) return ex_errf(err, errlen, NIAH_EINVAL, "niah: no arm selected");
    if (c->preset[0] && strcmp(c->preset, "atma"))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: preset must be empty or atma");
    if (memchr(c->layer_pattern, 0, sizeof c->layer_pattern) == NULL)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: layer pattern longer than %d characters", MDL_MAX_LAYERS);
    for (i = 0; c->layer_pattern[i]; i++)
        if (c->layer_pattern[i] != 'A' && c->layer_pattern[i] != 'c')
            return ex_errf(err, errlen, NIAH_EINVAL, "niah: layer pattern '%s': only 'A' and 'c'", c->layer_pattern);
    if (c->ffn != MDL_FFN_GELU && c->ffn != MDL_FFN_RELU2)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: ffn must be gelu or relu2");
    if (c->norm != MDL_NORM_LAYER && c->norm != MDL_NORM_RMS)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: norm must be layernorm or rmsnorm");
    if (c->kv_heads < 0 || (c->kv_heads > 0 && c->n_heads % c->kv_heads))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: kv_heads must be 0 or divide the heads (%d)", c->n_heads);
    if ((c->qk_norm != 0 && c->qk_norm != 1) ||
        (c->polar_gate != MDL_POLAR_GATE_HEAD && c->polar_gate != MDL_POLAR_GATE_CHANNEL))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: qk_norm 0/1 and the polar gate head or channel");
    if (c->mem_qkv != MDL_MEMQKV_OWN && c->mem_qkv != MDL_MEMQKV_SHARED)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: mem_qkv must be own or shared");
    if (c->optimizer != NIAH_OPT_ADAMW && c->optimizer != NIAH_OPT_MUON)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: optimizer must be adamw or muon");
    if (!(c->muon_momentum >= 0.0f && c->muon_momentum < 1.0f) || c->muon_ns_steps < 1 || c->muon_ns_steps > 20)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: Muon momentum in [0, 1) and 1..20 Newton-Schulz steps");
    if (c->sigreg < SGR_OFF || c->sigreg > SGR_ZIPFIAN ||
        (c->sigreg != SGR_OFF && !(c->sigreg_alpha > 0.0f && c->sigreg_alpha < 1.0f)))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: sigreg mode off..zipfian and its weight in (0, 1)");
    if (!(c->lr_flat >= 0.0 && c->lr_flat <= 1.0) || !(c->lr_floor >= 0.0 && c->lr_floor <= 1.0))
        return ex_errf(err, errlen, NIAH_EINVAL, "niah: lr_flat and lr_floor must be in [0, 1]");
    return NIAH_OK;
}

int niah_config_check(const niah_config *c, char *err, size_t errlen)
{
    if (!c) return ex_errf(err, errlen, NIAH_EINVAL, "niah_config_check: NULL argument");
    return niah__validate(c, err, errlen);
}

static mdl_config niah__model_config(const niah_config *c, int arm, int V, int maxT)
{
    mdl_config m = mdl_config_default();
    int kind = arm % 3;
    m.vocab = V;
    m.d_model = c->d_model;
    m.n_layers = c->n_layers;
    m.n_heads = c->n_heads;
    m.max_T = maxT;
    m.d_ff_mult = 4;
    m.dropout = 0.0f;
    m.conv_k = c->conv_k;
    m.pos = kind == 0 ? MDL_POS_ROPE : MDL_POS_NONE;
    m.attn = kind == 2 ? MDL_ATTN_POLAR : MDL_ATTN_SOFTMAX;
    m.memory = arm >= 3 ? MDL_MEM_GDELTA : MDL_MEM_NONE;
    m.ffn = c->ffn;
    m.norm = c->norm;
    memcpy(m.layer_pattern, c->layer_pattern, sizeof m.layer_pattern);
    m.lfm_k = c->lfm_k;
    if (kind == 2) {
        m.polar.window = c->window;
        m.polar.distractor_keys = c->distractor;
        m.polar.distractor_weight = c->distractor_weight;
        m.polar_kv_heads = c->kv_heads;
        m.polar_qk_norm = c->qk_norm;
        m.polar_gate = c->polar_gate;
        m.polar_canon_k = c->canon_k;
        if (m.memory == MDL_MEM_GDELTA) m.mem_qkv = c->mem_qkv; /* polar+gdelta only */
    }
    return m;
}

/* what the results lines record of the model and recipe beyond the arm: runs whose
   descriptions differ are never averaged together (--aggregate) */
static const char *niah__model_desc(const niah_config *c, char *buf, size_t cap)
{
    static const char *const sg[] = {"off", "weak", "strong", "discrete", "zipfian"};
    snprintf(buf, cap,
             "d%d L%d H%d pattern=%s lfm%d conv%d ffn=%s norm=%s kv%d qknorm%d gate=%s canon%d opt=%s sigreg=%s@%g "
             "window%d distractor%d@%g steps%ld B%d T%d lr%g flat%g floor%g",
             c->d_model, c->n_layers, c->n_heads, c->layer_pattern[0] ? c->layer_pattern : "A", c->lfm_k, c->conv_k,
             c->ffn == MDL_FFN_RELU2 ? "relu2" : "gelu", c->norm == MDL_NORM_RMS ? "rms" : "layer", c->kv_heads,
             c->qk_norm, c->polar_gate == MDL_POLAR_GATE_CHANNEL ? "channel" : "head", c->canon_k,
             c->optimizer == NIAH_OPT_MUON ? "muon" : "adamw",
             c->sigreg >= SGR_OFF && c->sigreg <= SGR_ZIPFIAN ? sg[c->sigreg] : "?",
             c->sigreg ? (double)c->sigreg_alpha : 0.0, c->window, c->distractor,
             c->distractor ? (double)c->distractor_weight : 0.0, c->steps, c->batch, c->train_len, (double)c->lr,
             (double)c->lr_flat, (double)c->lr_floor);
    if (c->mem_qkv == MDL_MEMQKV_SHARED) { /* named only when shared: the earlier lines stay as they were */
        size_t n = strlen(buf);
        snprintf(buf + n, cap - n, " memqkv=shared");
    }
    return buf;
}

static void niah__json_num(char *buf, size_t cap, double v, int prec)
{
    if (v == v && v - v == 0.0)
        snprintf(buf, cap, "%.*f", prec, v);
    else
        snprintf(buf, cap, "null");
}

const char *niah_result_json(const niah_result *r, uint64_t seed, char *buf, size_t cap)
{
    char a[32], lo[32], hi[32], ce[32], ppl[32], tce[32], ts[32], es[32], mb[32];
    if (!buf || !cap) return buf;
    if (!r) {
        buf[0] = 0;
        return buf;
    }
    niah__json_num(a, sizeof a, r->acc, 4);
    niah__json_num(lo, sizeof lo, r->acc_lo, 4);
    niah__json_num(hi, sizeof hi, r->acc_hi, 4);
    niah__json_num(ce, sizeof ce, r->doc_ce, 4);
    niah__json_num(ppl, sizeof ppl, r->doc_ce == r->doc_ce ? exp(r->doc_ce) : NAN, 2);
    niah__json_num(tce, sizeof tce, r->train_ce, 4);
    niah__json_num(ts, sizeof ts, r->train_s, 1);
    niah__json_num(es, sizeof es, r->eval_s, 1);
    niah__json_num(mb, sizeof mb, r->act_mb, 1);
    snprintf(buf, cap,
             "{\"arm\": \"%s\", \"seed\": %llu, \"mult\": %d, \"T\": %d, \"acc\": %s, \"acc_lo\": %s, \"acc_hi\": %s, "
             "\"correct\": %ld, \"digits\": %ld, \"exact\": %ld, \"probes\": %ld, \"doc_ce\": %s, \"doc_ppl\": %s, "
             "\"doc_tokens\": %lld, \"train_ce\": %s, \"train_s\": %s, \"eval_s\": %s, \"act_mb\": %s, "
             "\"preset\": \"%s\", \"model\": \"%s\"}",
             niah_arm_name(r->arm), (unsigned long long)seed, r->mult, r->T, a, lo, hi, r->correct, r->digits,
             r->exact, r->probes, ce, ppl, r->doc_tokens, tce, ts, es, mb, r->preset, r->model);
    return buf;
}

void niah_print_table(FILE *f, const niah_result *res, int n)
{
    int i;
    if (!f || !res) return;
    fprintf(f, "| arm | x | T | needle acc (95%% CI) | exact | doc CE | doc PPL | train CE |\n");
    fprintf(f, "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n");
    for (i = 0; i < n; i++) {
        /* an undefined number (no document windows, no training steps) is "-", never "nan" */
        const niah_result *r = res + i;
        char ci[48], ce[24], ppl[24], tce[24];
        if (isfinite(r->acc_lo) && isfinite(r->acc_hi)) snprintf(ci, sizeof ci, "%.3f-%.3f", r->acc_lo, r->acc_hi);
        else snprintf(ci, sizeof ci, "-");
        if (isfinite(r->doc_ce)) {
            snprintf(ce, sizeof ce, "%.3f", r->doc_ce);
            snprintf(ppl, sizeof ppl, "%.1f", exp(r->doc_ce));
        } else {
            snprintf(ce, sizeof ce, "-");
            snprintf(ppl, sizeof ppl, "-");
        }
        if (isfinite(r->train_ce)) snprintf(tce, sizeof tce, "%.3f", r->train_ce);
        else snprintf(tce, sizeof tce, "-");
        fprintf(f, "| %s | %d | %d | %.3f (%s) | %ld/%ld | %s | %s | %s |\n", niah_arm_name(r->arm), r->mult, r->T,
                r->acc, ci, r->exact, r->probes, ce, ppl, tce);
    }
}

int niah_plot(const char *acc_png, const char *ce_png, const niah_result *res, int n, const char *title_suffix)
{
    /* every arm gets its own colour, dash pattern and hollow marker shape, so arms with identical results stay visible on top of each
       other; the legend goes where it covers no line, else outside the plot area */
    plot_series s[NIAH_NARMS];
    double x[NIAH_NARMS][NIAH_MAX_MULT], ya[NIAH_NARMS][NIAH_MAX_MULT], yc[NIAH_NARMS][NIAH_MAX_MULT];
    int cnt[NIAH_NARMS] = {0}, ns = 0, a, i, rc = PLOT_OK;
    char title[200];
    if (!res || n < 0) return NIAH_EINVAL;
    for (i = 0; i < n; i++) {
        a = res[i].arm;
        if (a < 0 || a >= NIAH_NARMS || cnt[a] >= NIAH_MAX_MULT) return NIAH_EINVAL;
        x[a][cnt[a]] = log2((double)res[i].mult); /* 0 = the training length, 5 = 32x */
        ya[a][cnt[a]] = res[i].acc;
        yc[a][cnt[a]] = res[i].doc_ce;
        cnt[a]++;
    }
    memset(s, 0, sizeof s);
    for (a = 0; a < NIAH_NARMS; a++)
        if (cnt[a]) {
            s[ns].label = niah_arm_name(a);
            s[ns].x = x[a];
            s[ns].y = ya[a];
            s[ns].n = cnt[a];
            /* an arm keeps its colour, dash and marker whichever arms are present */
            s[ns].color = a + 1;
            s[ns].dash = PLOT_DASH_SOLID + a % 6;     /* solid, dashed, dotted, dash-dot, long dash, dash-dot-dot */
            s[ns].marker = PLOT_MARK_CIRCLE + a % 6;  /* circle, square, triangle, diamond, x, + */
            ns++;
        }
    if (acc_png) {
        snprintf(title, sizeof title, "needle accuracy vs length%s", title_suffix ? title_suffix : "");
        rc = plot_lines_png(acc_png, 800, 500, title, "log2(length / training length)", "per-digit accuracy", s, ns, 0);
        if (rc != PLOT_OK) return NIAH_EFAIL;
    }
    if (ce_png) {
        for (i = 0; i < ns; i++) {
            a = s[i].color - 1;
            s[i].y = yc[a];
        }
        snprintf(title, sizeof title, "document CE vs length%s", title_suffix ? title_suffix : "");
        rc = plot_lines_png(ce_png, 800, 500, title, "log2(length / training length)", "document CE (nats)", s, ns, 0);
        if (rc != PLOT_OK) return NIAH_EFAIL;
    }
    return NIAH_OK;
}

/* cosine from lr to 0.1 lr after a linear warm-up over the first 5% of steps */
static float niah__lr(const niah_config *c, long step)
{
    long warm = c->steps / 20 > 1 ? c->steps / 20 : 1, flat;
    double p, lo = c->lr_floor;
    if (step < warm) return c->lr * (float)(step + 1) / (float)warm;
    /* lr_flat of the steps after the warm-up at the peak, then the cosine to lr_floor */
    flat = warm + (long)(c->lr_flat * (double)(c->steps - warm));
    if (step < flat) return c->lr;
    p = c->steps > flat ? (double)(step - flat) / (double)(c->steps - flat) : 1.0;
    return (float)(c->lr * (lo + (1.0 - lo) * 0.5 * (1.0 + cos(3.141592653589793 * p))));
}

typedef struct niah__ctx {
    const niah_config *c;
    niah_spec spec;
    niah_vocab voc;
    niah_hay train_hay, eval_hay;
    const uint16_t *eval_text;
    size_t n_eval;
} niah__ctx;

static int niah__train(niah__ctx *x, mdl_model *m, int arm, double *train_ce, FILE *log, char *err, size_t errlen)
{
    const niah_config *c = x->c;
    int B = c->batch, T = c->train_len, nt = mdl_num_tensors(m), i, b, rc = NIAH_OK;
    size_t np = mdl_num_params(m);
    float *am = (float *)calloc(np, sizeof(float)), *av = (float *)calloc(np, sizeof(float));
    int32_t *row = (int32_t *)malloc(sizeof(int32_t) * (size_t)(T + 1));
    int *in = (int *)malloc(sizeof(int) * (size_t)B * T), *tg = (int *)malloc(sizeof(int) * (size_t)B * T);
    float *wt = (float *)malloc(sizeof(float) * (size_t)B * T);
    niah_probe pr[64];
    long step, tail = c->steps / 10 > 1 ? c->steps / 10 : 1, ntail = 0;
    double sum_tail = 0.0;
    float *mw = NULL; /* Muon's work: the largest Muon matrix's trn_muon_step_floats */
    tk_rng rng;
    if (!am || !av || !row || !in || !tg || !wt) {
        rc = ex_errf(err, errlen, NIAH_ENOMEM, "niah: out of memory for training");
        goto done;
    }
    if (c->optimizer == NIAH_OPT_MUON) {
        size_t w = 0;
        for (i = 0; i < nt; i++) {
            const mdl_tensor *e = mdl_tensor_at(m, i);
            if (trn_muon_param(e) && trn_muon_step_floats(e) > w) w = trn_muon_step_floats(e);
        }
        if (w && !(mw = (float *)malloc(sizeof(float) * w))) {
            rc = ex_errf(err, errlen, NIAH_ENOMEM, "niah: out of memory for Muon's work (%zu floats)", w);
            goto done;
        }
    }
    tk_rng_seed(&rng, c->seed, 1000); /* the same batches for every arm */
    for (step = 0; step < c->steps; step++) {
        mdl_opts o = mdl_opts_default();
        mdl_stats st;
        tk_adamw_config ac = tk_adamw_config_default();
        float gn = 0.0f;
        for (b = 0; b < B; b++) {
            int np_row = 0, k, j;
            if (tk_rng_uniform(&rng) < c->copy_frac) {
                rc = niah_copy_row(&x->voc, &x->train_hay, T, T / 4, &rng, row);
            } else {
                rc = niah_train_row(&x->spec, &x->voc, &x->train_hay, T, c->train_needles, &rng, row, pr);
                np_row = c->train_needles;
            }
            if (rc) {
                rc = ex_errf(err, errlen, NIAH_EINVAL, "niah: cannot build a training row (length %d, %d needles)", T,
                                c->train_needles);
                goto done;
            }
            for (i = 0; i < T; i++) {
                in[(size_t)b * T + i] = row[i];
                tg[(size_t)b * T + i] = row[i + 1];
                wt[(size_t)b * T + i] = 1.0f;
            }
            /* the cue's digits (the only targets copying can predict) weigh digit_weight */
            for (k = 0; k < np_row; k++)
                for (j = 0; j < NIAH_DIGITS; j++) wt[(size_t)b * T + pr[k].ans + j] = c->digit_weight;
        }
        o.train = 1;
        o.target_weight = c->digit_weight != 1.0f ? wt : NULL;
        o.seed = c->seed * 1000003ULL + (uint64_t)step;
        if (c->sigreg != SGR_OFF &&
            mdl_sigreg_set(m, c->sigreg, c->sigreg_alpha, SGR_SKETCH, c->seed, (uint64_t)step) != MDL_OK) {
            rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: %s: sigreg: %s", niah_arm_name(arm), mdl_last_error(m));
            goto done;
        }
        mdl_zero_grad(m);
        if (mdl_forward(m, in, tg, B, T, &o, &st) != MDL_OK || mdl_backward(m) != MDL_OK) {
            rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: %s training step %ld: %s", niah_arm_name(arm), step,
                            mdl_last_error(m));
            goto done;
        }
        if (!(st.loss == st.loss) || st.loss - st.loss != 0.0) {
            rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: %s: non-finite loss at step %ld", niah_arm_name(arm), step);
            goto done;
        }
        if (c->grad_clip > 0.0f)
            tk_clip_grad_norm(mdl_grads(m), np, c->grad_clip, &gn);
        else
            tk_grad_norm(mdl_grads(m), np, &gn);
        if (!(gn == gn) || gn - gn != 0.0f) {
            rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: %s: non-finite gradient at step %ld", niah_arm_name(arm), step);
            goto done;
        }
        ac.lr = niah__lr(c, step);
        for (i = 0; i < nt; i++) {
            const mdl_tensor *e = mdl_tensor_at(m, i);
            if (mw && trn_muon_param(e)) { /* the momentum buffer is am's slice, as the trainer keeps it */
                if (trn_muon_step(mdl_ctx(m), e, mdl_params(m) + e->offset, mdl_grads(m) + e->offset, am + e->offset,
                                  ac.lr, c->weight_decay, c->muon_momentum, c->muon_ns_steps, mw) != TRN_OK) {
                    rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: %s: Muon step on %s failed at step %ld",
                                 niah_arm_name(arm), e->name, step);
                    goto done;
                }
                continue;
            }
            ac.weight_decay = e->decay ? c->weight_decay : 0.0f;
            tk_adamw_update(mdl_params(m) + e->offset, mdl_grads(m) + e->offset, am + e->offset, av + e->offset,
                            e->numel, &ac, step + 1);
        }
        if (step >= c->steps - tail) {
            sum_tail += st.ce;
            ntail++;
        }
        if (log && c->log_every > 0 && ((step + 1) % c->log_every == 0 || step + 1 == c->steps))
            fprintf(log, "  %s step %ld/%ld ce %.4f lr %.2e |g| %.3f\n", niah_arm_name(arm), step + 1, c->steps, st.ce,
                    (double)ac.lr, (double)gn);
    }
    *train_ce = ntail ? sum_tail / (double)ntail : NAN;
done:
    free(mw);
    free(am);
    free(av);
    free(row);
    free(in);
    free(tg);
    free(wt);
    return rc;
}

static int niah__eval(niah__ctx *x, mdl_model *m, int arm, int mult, niah_result *r, char *err, size_t errlen)
{
    const niah_config *c = x->c;
    int T = mult * c->train_len, V = x->voc.V, Bp, done = 0, b, i, rc = NIAH_OK;
    int rec_lo = 8, rec_hi = 8 + c->train_len / 4;
    int32_t *row = (int32_t *)malloc(sizeof(int32_t) * (size_t)(T + 1));
    niah_probe *pr;
    int *in, *tg;
    tk_rng rng;
    Bp = c->eval_tokens / T;
    if (Bp < 1) Bp = 1;
    if (Bp > c->probes) Bp = c->probes;
    pr = (niah_probe *)malloc(sizeof(niah_probe) * (size_t)Bp);
    in = (int *)malloc(sizeof(int) * (size_t)Bp * T);
    tg = (int *)malloc(sizeof(int) * (size_t)Bp * T);
    if (!row || !pr || !in || !tg) {
        rc = ex_errf(err, errlen, NIAH_ENOMEM, "niah: out of memory for evaluation at T %d", T);
        goto out;
    }
    /* the same probes for every arm: stream depends on the seed and the length only */
    tk_rng_seed(&rng, c->seed, 5000 + (uint64_t)mult);
    r->correct = r->digits = r->exact = r->probes = 0;
    while (done < c->probes) {
        int nb = c->probes - done < Bp ? c->probes - done : Bp;
        const float *lg;
        mdl_opts o = mdl_opts_default();
        for (b = 0; b < nb; b++) {
            rc = niah_eval_row(&x->spec, &x->voc, &x->eval_hay, T, rec_lo, rec_hi, &rng, row, pr + b);
            if (rc) {
                rc = ex_errf(err, errlen, NIAH_EINVAL, "niah: cannot build a probe of length %d", T);
                goto out;
            }
            for (i = 0; i < T; i++) in[(size_t)b * T + i] = row[i];
        }
        if (mdl_forward(m, in, NULL, nb, T, &o, NULL) != MDL_OK || !(lg = mdl_logits(m))) {
            rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: %s probe forward at T %d: %s", niah_arm_name(arm), T,
                            mdl_last_error(m));
            goto out;
        }
        for (b = 0; b < nb; b++) {
            int cor[NIAH_DIGITS], k = niah_score(lg + (size_t)b * T * V, V, &x->voc, &x->spec, pr + b, cor);
            if (k < 0) {
                rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: scoring failed");
                goto out;
            }
            r->correct += k;
            r->digits += NIAH_DIGITS;
            r->exact += k == NIAH_DIGITS;
            r->probes++;
        }
        done += nb;
    }
    r->acc = (double)r->correct / (double)r->digits;
    niah_wilson(r->correct, r->digits, &r->acc_lo, &r->acc_hi);
    /* document CE: doc_windows windows of T+1 tokens evenly spread over the evaluation text */
    {
        double ce = 0.0;
        long long ntok = 0;
        int w = 0, nw = c->doc_windows;
        size_t span = x->n_eval > (size_t)T + 1 ? x->n_eval - (size_t)T - 1 : 0;
        if (x->n_eval < (size_t)T + 1) nw = 0;
        while (w < nw) {
            int nb = nw - w < Bp ? nw - w : Bp;
            mdl_opts o = mdl_opts_default();
            mdl_stats st;
            for (b = 0; b < nb; b++) {
                size_t off = nw > 1 ? span * (size_t)(w + b) / (size_t)(nw - 1) : 0;
                for (i = 0; i < T; i++) {
                    in[(size_t)b * T + i] = x->voc.fwd[x->eval_text[off + (size_t)i]];
                    tg[(size_t)b * T + i] = x->voc.fwd[x->eval_text[off + (size_t)i + 1]];
                }
            }
            if (mdl_forward(m, in, tg, nb, T, &o, &st) != MDL_OK) {
                rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: %s document forward at T %d: %s", niah_arm_name(arm), T,
                                mdl_last_error(m));
                goto out;
            }
            ce += st.ce_sum;
            ntok += st.ntok;
            w += nb;
        }
        r->doc_ce = ntok ? ce / (double)ntok : NAN;
        r->doc_tokens = ntok;
    }
out:
    free(row);
    free(pr);
    free(in);
    free(tg);
    return rc;
}

int niah_run(const niah_config *c, bpe_tokenizer *tok, const uint16_t *train_text, size_t n_train,
             const uint16_t *eval_text, size_t n_eval, niah_result *res, int cap, int *nres,
             FILE *jsonl, FILE *log, char *err, size_t errlen)
{
    niah__ctx x;
    int32_t *must = NULL;
    int nmust, rc, arm, k, maxT = 0, nsel = 0;
    if (nres) *nres = 0;
    rc = niah__validate(c, err, errlen);
    if (rc) return rc;
    if (!tok || !train_text || !eval_text || !res || !nres)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah_run: NULL argument");
    for (arm = 0; arm < NIAH_NARMS; arm++) nsel += c->arms[arm] != 0;
    if (cap < nsel * c->nmult) return ex_errf(err, errlen, NIAH_EINVAL, "niah_run: result capacity too small");
    for (k = 0; k < c->nmult; k++) maxT = c->mult[k] * c->train_len > maxT ? c->mult[k] * c->train_len : maxT;
    if (n_train <= (size_t)c->train_len + 1)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah_run: training text (%lu tokens) shorter than a row",
                          (unsigned long)n_train);
    if (n_eval <= (size_t)maxT + 1)
        return ex_errf(err, errlen, NIAH_EINVAL, "niah_run: evaluation text (%lu tokens) shorter than the longest "
                                                    "probe (%d)", (unsigned long)n_eval, maxT + 1);
    memset(&x, 0, sizeof x);
    x.c = c;
    rc = niah_spec_build(&x.spec, tok, train_text, n_train, c->nkeys, err, errlen);
    if (rc) return rc;
    must = (int32_t *)malloc(sizeof(int32_t) * (size_t)(2 * c->nkeys + 64));
    if (!must) {
        niah_spec_free(&x.spec);
        return ex_errf(err, errlen, NIAH_ENOMEM, "niah_run: out of memory");
    }
    nmust = niah_spec_tokens(&x.spec, must, 2 * c->nkeys + 64);
    rc = nmust < 0 ? ex_errf(err, errlen, NIAH_EINVAL, "niah_run: template too long")
                   : niah_vocab_build(&x.voc, train_text, n_train, bpe_vocab_size(tok), c->vocab, must, nmust, err, errlen);
    free(must);
    if (rc) {
        niah_spec_free(&x.spec);
        return rc;
    }
    x.train_hay.mode = x.eval_hay.mode = c->haystack;
    x.train_hay.ids = train_text;
    x.train_hay.n = n_train;
    x.eval_hay.ids = eval_text;
    x.eval_hay.n = n_eval;
    x.eval_text = eval_text;
    x.n_eval = n_eval;
    {
        size_t j;
        for (j = 0; j < n_eval; j++)
            if (eval_text[j] >= (uint16_t)x.voc.n_src) {
                rc = ex_errf(err, errlen, NIAH_EINVAL, "niah_run: evaluation token %u at %lu outside the vocabulary",
                                (unsigned)eval_text[j], (unsigned long)j);
                goto fin;
            }
    }
    if (log)
        fprintf(log, "niah: vocabulary %d (UNK %d), record %d tokens, cue %d + %d digits, keys %d train / %d eval, "
                     "haystack %s, training length %d, lengths up to %d\n",
                x.voc.V, x.voc.unk, niah_record_len(&x.spec), niah_cue_len(&x.spec), NIAH_DIGITS, x.spec.nkeys[0],
                x.spec.nkeys[1], c->haystack == NIAH_HAY_TEXT ? "text" : "synthetic", c->train_len, maxT);
    for (arm = 0; arm < NIAH_NARMS && rc == NIAH_OK; arm++) {
        mdl_config mc;
        mdl_model *m = NULL;
        double t0, t1, tce = NAN;
        char merr[256];
        if (!c->arms[arm]) continue;
        mc = niah__model_config(c, arm, x.voc.V, maxT);
        if (mdl_create(&m, &mc, c->seed, merr, sizeof merr) != MDL_OK) {
            rc = ex_errf(err, errlen, NIAH_EFAIL, "niah: %s: %s", niah_arm_name(arm), merr);
            break;
        }
        if (log)
            fprintf(log, "niah: arm %s: %lu parameters, %ld steps of %d x %d\n", niah_arm_name(arm),
                    (unsigned long)mdl_num_params(m), c->steps, c->batch, c->train_len);
        t0 = niah__now();
        rc = niah__train(&x, m, arm, &tce, log, err, errlen);
        t1 = niah__now();
        for (k = 0; k < c->nmult && rc == NIAH_OK; k++) {
            niah_result *r = res + *nres;
            double e0 = niah__now();
            memset(r, 0, sizeof *r);
            r->arm = arm;
            snprintf(r->preset, sizeof r->preset, "%s", c->preset);
            niah__model_desc(c, r->model, sizeof r->model);
            r->mult = c->mult[k];
            r->T = c->mult[k] * c->train_len;
            r->train_ce = tce;
            r->train_s = t1 - t0;
            rc = niah__eval(&x, m, arm, c->mult[k], r, err, errlen);
            if (rc) break;
            r->eval_s = niah__now() - e0;
            r->act_mb = (double)mdl_activation_bytes(m) / 1048576.0;
            (*nres)++;
            if (jsonl) {
                char line[1024];
                fprintf(jsonl, "%s\n", niah_result_json(r, c->seed, line, sizeof line));
                fflush(jsonl);
            }
            if (log)
                fprintf(log, "niah: %s x%d (T %d): acc %.3f [%.3f, %.3f] exact %ld/%ld, doc CE %.4f (%.1f s, "
                             "activations %.1f MiB)\n",
                        niah_arm_name(arm), r->mult, r->T, r->acc, r->acc_lo, r->acc_hi, r->exact, r->probes, r->doc_ce,
                        r->eval_s, r->act_mb);
        }
        mdl_destroy(m);
    }
fin:
    niah_vocab_free(&x.voc);
    niah_spec_free(&x.spec);
    return rc;
}
