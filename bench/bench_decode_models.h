/* bench_decode_models.h - what bench_decode.c (CPU) and bench_decode_cuda.cu (the GPU kit)
   share: the five architectures they time, the sample pools and their quantiles, the
   benches' xorshift stream, and the models (d 128, 4 layers, 4 heads, learned positions,
   LayerNorm, GELU; RPA with a fixed random table of running statistics, the same for the
   same context, so a twin model gets the same prior). Include after examples/common/model.c
   and bench_util.h; define BD_PROG (the program's name, for messages) and MAXCTX (the
   most contexts --contexts takes) first. Also shared: the twin check's row error, the
   peer's JSON lists, the flag parsers. License: MIT. */
#ifndef ATTNKIT_BENCH_DECODE_MODELS_H
#define ATTNKIT_BENCH_DECODE_MODELS_H

#if !defined(BD_PROG) || !defined(MAXCTX)
#error "define BD_PROG and MAXCTX before including bench_decode_models.h"
#endif

#define NARCH 5
#define SEED 1234

static int bd_vocab = 50257; /* the models' vocabulary (bench_decode_cuda: --vocab) */

typedef struct bd_arch {
    const char *name;
    int attn, prior, memory;
} bd_arch;
static const bd_arch ARCHS[NARCH] = {
    {"softmax", MDL_ATTN_SOFTMAX, MDL_PRIOR_NONE, MDL_MEM_NONE},
    {"softmax+RPA", MDL_ATTN_SOFTMAX, MDL_PRIOR_RPA, MDL_MEM_NONE},
    {"softmax+ERA", MDL_ATTN_SOFTMAX, MDL_PRIOR_ERA, MDL_MEM_NONE},
    {"polar", MDL_ATTN_POLAR, MDL_PRIOR_NONE, MDL_MEM_NONE},
    {"polar+gdelta", MDL_ATTN_POLAR, MDL_PRIOR_NONE, MDL_MEM_GDELTA},
};

/* pooled step times (seconds) of one (context, architecture) or of the peer */
typedef struct bd_samples {
    double *v;
    int n, cap;
} bd_samples;

static void samples_add(bd_samples *s, double x)
{
    if (s->n == s->cap) {
        int nc = s->cap ? 2 * s->cap : 64;
        double *nv = (double *)realloc(s->v, sizeof(double) * (size_t)nc);
        if (!nv) {
            fprintf(stderr, "%s: out of memory\n", BD_PROG);
            exit(1);
        }
        s->v = nv;
        s->cap = nc;
    }
    s->v[s->n++] = x;
}

/* nearest-rank quantile q in (0,1] of s (sorts a copy); nan when empty */
static double quantile(const bd_samples *s, double q)
{
    double *c, r;
    int k;
    if (s->n < 1) return nan("");
    c = (double *)xmalloc(sizeof(double) * (size_t)s->n);
    memcpy(c, s->v, sizeof(double) * (size_t)s->n);
    qsort(c, (size_t)s->n, sizeof *c, cmp_d);
    k = (int)ceil(q * s->n) - 1;
    if (k < 0) k = 0;
    if (k > s->n - 1) k = s->n - 1;
    r = c[k];
    free(c);
    return r;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}
static int rnd_tok(void) { return (int)(rnd32() % (uint32_t)bd_vocab); }
static double rnd_unit(void) { return (double)rnd32() / 4294967296.0; }

static mdl_config arch_config(const bd_arch *a, int ctx)
{
    mdl_config c = mdl_config_default();
    c.vocab = bd_vocab;
    c.d_model = 128;
    c.n_layers = 4;
    c.n_heads = 4;
    c.max_T = ctx;
    c.d_ff_mult = 4;
    c.pos = MDL_POS_LEARNED;
    c.norm = MDL_NORM_LAYER;
    c.ffn = MDL_FFN_GELU;
    c.dropout = 0.0f;
    c.attn = a->attn;
    c.prior = a->prior;
    c.memory = a->memory;
    return c;
}

/* A model of architecture a at context ctx on device dev; RPA gets bench_decode's running
   statistics (random, non-uniform; the same for the same ctx: a twin gets the same table).
   NULL (after a message) on failure. */
static mdl_model *make_model(const bd_arch *a, int ctx, int dev)
{
    mdl_config c = arch_config(a, ctx);
    mdl_model *m = NULL;
    char err[256];
    if (mdl_create_on(&m, &c, SEED, dev, err, sizeof err) != MDL_OK) {
        fprintf(stderr, "%s: mdl_create_on (%s, context %d, %s): %s\n", BD_PROG, a->name, ctx,
                dev == MDL_DEVICE_CUDA ? "cuda" : "cpu", err);
        return NULL;
    }
    if (a->prior == MDL_PRIOR_RPA) {
        size_t np = 0, k;
        const float *cur = mdl_prior_stats(m, &np);
        const int R = c.R;
        uint64_t keep = rng_state;
        float *ps;
        if (!cur || np != (size_t)c.n_layers * ctx * R + (size_t)ctx) {
            fprintf(stderr, "%s: unexpected RPA statistics size %zu\n", BD_PROG, np);
            mdl_destroy(m);
            return NULL;
        }
        ps = (float *)xmalloc(sizeof(float) * np);
        rng_state = 0xA5A5A5A5DEADBEEFull ^ (uint64_t)ctx; /* the same table for a twin */
        for (k = 0; k + (size_t)ctx < np; k += (size_t)R) {
            double z = 0.0;
            int r;
            for (r = 0; r < R; r++) z += ps[k + r] = (float)(0.05 + rnd_unit());
            for (r = 0; r < R; r++) ps[k + r] = (float)(ps[k + r] / z);
        }
        for (k = np - (size_t)ctx; k < np; k++) ps[k] = 5.0f;
        rng_state = keep;
        if (mdl_prior_stats_set(m, ps, np) != MDL_OK) {
            fprintf(stderr, "%s: mdl_prior_stats_set: %s\n", BD_PROG, mdl_last_error(m));
            free(ps);
            mdl_destroy(m);
            return NULL;
        }
        free(ps);
    }
    return m;
}

/* max |a - b| / max |b| over a row of n (inf for a non-finite difference) */
static double row_err(const float *a, const float *b, int n)
{
    double mx = 0.0, d = 0.0;
    int v;
    for (v = 0; v < n; v++) {
        double x = fabs((double)b[v]), e = fabs((double)a[v] - (double)b[v]);
        if (x > mx) mx = x;
        if (!(e <= d)) d = e == e ? e : INFINITY;
    }
    return d / (mx > 0.0 ? mx : 1.0);
}

/* the numbers of "key": [a, b, ...] (milliseconds) into s as seconds; count added */
static int json_list_ms(const char *line, const char *key, bd_samples *s)
{
    char pat[64];
    const char *p;
    int n = 0;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(line, pat);
    if (!p) return 0;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p++ != '[') return 0;
    for (;;) {
        char *end;
        double x;
        while (*p == ' ' || *p == ',') p++;
        if (*p == ']' || !*p) break;
        x = strtod(p, &end);
        if (end == p) break;
        samples_add(s, 1e-3 * x);
        n++;
        p = end;
    }
    return n;
}

/* a whole decimal int in [lo, hi], or exit 2 naming the flag */
static int parse_int(const char *flag, const char *s, int lo, int hi)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s wants an integer in [%d, %d] (got '%s')\n", BD_PROG, flag, lo, hi, s);
        exit(2);
    }
    return (int)v;
}

static int parse_contexts(const char *s, int *out)
{
    int n = 0;
    const char *p = s;
    char buf[32];
    for (;;) {
        size_t k = strcspn(p, ",");
        int c, j;
        if (k == 0 || k >= sizeof buf || n == MAXCTX) {
            fprintf(stderr, "%s: --contexts wants 1 to %d comma-separated integers (got '%s')\n", BD_PROG, MAXCTX,
                    s);
            exit(2);
        }
        memcpy(buf, p, k);
        buf[k] = '\0';
        c = parse_int("--contexts", buf, 16, 65536);
        for (j = 0; j < n; j++)
            if (out[j] == c) {
                fprintf(stderr, "%s: --contexts lists %d twice\n", BD_PROG, c);
                exit(2);
            }
        out[n++] = c;
        if (!p[k]) break;
        p += k + 1;
    }
    return n;
}

#endif /* ATTNKIT_BENCH_DECODE_MODELS_H */
