/* niah - seed 002's length-extrapolation experiment (Table 2, Figure 1) at CPU scale.

     build/niah                       the default grid: 6 arms {softmax + RoPE, softmax
                                      without positions, polar} x memory {off, gated-delta},
                                      trained at 64 tokens, evaluated at 1x .. 32x (64 ..
                                      2,048 tokens); about 11 CPU-minutes at --threads 1
     build/niah --quick               a tiny grid for the smoke test (seconds)
     build/niah --aggregate OUT RUN1 RUN2 ...   mean over seeds of RUNk/results.jsonl:
                                      markdown table to stdout, OUT/niah_acc.png, OUT/niah_ce.png
     build/niah --help

   Each arm (d 64, 2 layers, 4 heads, a width-4 causal convolution before every mixer,
   2,048-token compact vocabulary) trains 3,000 steps of 8 x 64 tokens on WikiText-2
   validation text with one induction needle in every row (its five cue digits weigh 20 in
   the loss, every other token 1), then is evaluated at each length on probes built
   from the test split (one needle near the start, its cue at the end; needles disjoint from
   training in keys and codes) and on test-split document windows (CE). Task, vocabulary,
   scoring: examples/common/niah.h. Output in --out-dir (default runs/niah): results.jsonl
   (one line per arm and length), niah_acc.png, niah_ce.png; the table on stdout.
   Evaluation at long lengths runs polar attention through polar.h's streaming path and the
   memory through gdelta.h's chunked path (activation memory O(T)); softmax arms use the
   blocked causal attention of tensor.h, which keeps its (H,T,T) probabilities.
   License: MIT. */
#define _POSIX_C_SOURCE 200809L
#include "common/data.h"
#include "common/niah.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define MAX_RES (NIAH_NARMS * NIAH_MAX_MULT)

static void usage(FILE *f, const niah_config *c)
{
    fprintf(f,
            "usage: niah [flags]          train + evaluate the grid\n"
            "       niah --aggregate OUT RUN_DIR...   mean over seeds (markdown table, plots in OUT)\n"
            "flags (defaults in brackets):\n"
            "  --quick                 tiny grid for smoke tests (2 lengths, few steps)\n"
            "  --seed N                [%llu]\n"
            "  --threads N             OpenMP threads [0: default]\n"
            "  --out-dir DIR           [runs/niah]\n"
            "  --data-dir DIR          WikiText-2 directory [$WT2_DIR or the built-in one]\n"
            "  --arms a,b,...          of softmax-rope, softmax-nope, polar, softmax-rope+gdelta,\n"
            "                          softmax-nope+gdelta, polar+gdelta [all]\n"
            "  --train-len L           training length [%d]\n"
            "  --lengths 1,2,...       evaluated multiples of L [1,2,4,8,16,32]\n"
            "  --steps N               optimizer steps per arm [%ld]\n"
            "  --batch B               rows per step [%d]\n"
            "  --lr X                  peak AdamW lr (5%% warm-up, cosine to 10%%) [%g]\n"
            "  --train-needles K       needles per training row [%d]\n"
            "  --copy-frac F           share of training rows that repeat a text segment [%g]\n"
            "  --digit-weight X        training loss weight of the cue digits (others 1) [%g]\n"
            "  --probes N              needle probes per length [%d]\n"
            "  --doc-windows N         document-CE windows per length [%d]\n"
            "  --eval-tokens N         tokens per evaluation forward [%d]\n"
            "  --d-model C --layers N --heads H   model [%d, %d, %d]\n"
            "  --conv K                causal convolution width before the mixers, all arms (0 off) [%d]\n"
            "  --vocab V               compact vocabulary size [%d]\n"
            "  --keys N                needle keys per split [%d]\n"
            "  --haystack text|synthetic   [text]\n"
            "  --window W              polar sliding window (-1 off) [%d]\n"
            "  --distractor R          polar distractor keys (0 off) [%d]\n"
            "  --distractor-weight X   [%g]\n"
            "  --log-every N           training log interval [%d]\n",
            (unsigned long long)c->seed, c->train_len, c->steps, c->batch, (double)c->lr, c->train_needles, (double)c->copy_frac, (double)c->digit_weight,
            c->probes, c->doc_windows, c->eval_tokens, c->d_model, c->n_layers, c->n_heads, c->conv_k, c->vocab, c->nkeys,
            c->window, c->distractor, (double)c->distractor_weight, c->log_every);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *e;
    long v;
    errno = 0;
    v = strtol(s, &e, 10);
    if (errno || e == s || *e || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_float(const char *s, float *out)
{
    char *e;
    double v;
    errno = 0;
    v = strtod(s, &e);
    if (errno || e == s || *e || !(v == v) || v - v != 0.0) return -1;
    *out = (float)v;
    return 0;
}

/* ------------------------------------------------------------------ aggregation */

static int json_num(const char *line, const char *key, double *out)
{
    char pat[64];
    const char *p;
    char *e;
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    p = strstr(line, pat);
    if (!p) return -1;
    p += strlen(pat);
    if (!strncmp(p, "null", 4)) {
        *out = NAN;
        return 0;
    }
    *out = strtod(p, &e);
    return e == p ? -1 : 0;
}

static int json_arm(const char *line)
{
    const char *p = strstr(line, "\"arm\": \"");
    char name[64];
    size_t n = 0;
    if (!p) return -1;
    p += 8;
    while (p[n] && p[n] != '"' && n + 1 < sizeof name) {
        name[n] = p[n];
        n++;
    }
    name[n] = 0;
    return niah_arm_from_name(name);
}

typedef struct {
    int arm, mult, T, n;
    double acc[16], ce[16], exact[16], correct, digits;
} agg_cell;

static int aggregate(int argc, char **argv, int first)
{
    agg_cell cells[MAX_RES];
    niah_result mean[MAX_RES];
    int nc = 0, r, i, j, nruns = argc - first - 1;
    const char *out = argv[first];
    char path[1200];
    if (nruns < 1 || nruns > 16) {
        fprintf(stderr, "niah --aggregate OUT RUN_DIR... (1 to 16 run directories)\n");
        return 2;
    }
    memset(cells, 0, sizeof cells);
    for (r = 0; r < nruns; r++) {
        FILE *f;
        char line[2048];
        snprintf(path, sizeof path, "%s/results.jsonl", argv[first + 1 + r]);
        f = fopen(path, "r");
        if (!f) {
            fprintf(stderr, "niah: cannot read %s: %s\n", path, strerror(errno));
            return 1;
        }
        while (fgets(line, sizeof line, f)) {
            double mult, T, acc, ce, exact, probes, cor, dig;
            int arm = json_arm(line);
            agg_cell *c = NULL;
            if (arm < 0 || json_num(line, "mult", &mult) || json_num(line, "T", &T) || json_num(line, "acc", &acc) ||
                json_num(line, "doc_ce", &ce) || json_num(line, "exact", &exact) || json_num(line, "probes", &probes) ||
                json_num(line, "correct", &cor) || json_num(line, "digits", &dig)) {
                fprintf(stderr, "niah: %s: malformed line\n", path);
                fclose(f);
                return 1;
            }
            for (i = 0; i < nc; i++)
                if (cells[i].arm == arm && cells[i].mult == (int)mult) c = cells + i;
            if (!c) {
                if (nc >= MAX_RES) {
                    fclose(f);
                    fprintf(stderr, "niah: too many cells\n");
                    return 1;
                }
                c = cells + nc++;
                c->arm = arm;
                c->mult = (int)mult;
                c->T = (int)T;
            }
            if (c->n < 16) {
                c->acc[c->n] = acc;
                c->ce[c->n] = ce;
                c->exact[c->n] = probes > 0 ? exact / probes : NAN;
                c->n++;
                c->correct += cor;
                c->digits += dig;
            }
        }
        fclose(f);
    }
    /* sort by arm, then length */
    for (i = 0; i < nc; i++)
        for (j = i + 1; j < nc; j++)
            if (cells[j].arm < cells[i].arm || (cells[j].arm == cells[i].arm && cells[j].mult < cells[i].mult)) {
                agg_cell t = cells[i];
                cells[i] = cells[j];
                cells[j] = t;
            }
    printf("| arm | x | T | seeds | needle acc mean +- std | min / max over seeds | pooled 95%% CI | exact-match mean | "
           "doc CE mean +- std |\n");
    printf("| --- | ---: | ---: | ---: | --- | --- | --- | ---: | --- |\n");
    for (i = 0; i < nc; i++) {
        agg_cell *c = cells + i;
        double ma = 0, sa = 0, mc = 0, sc = 0, me = 0, lo, hi, amin = 1e9, amax = -1e9;
        for (j = 0; j < c->n; j++) {
            ma += c->acc[j];
            mc += c->ce[j];
            me += c->exact[j];
            amin = c->acc[j] < amin ? c->acc[j] : amin;
            amax = c->acc[j] > amax ? c->acc[j] : amax;
        }
        ma /= c->n;
        mc /= c->n;
        me /= c->n;
        for (j = 0; j < c->n; j++) {
            sa += (c->acc[j] - ma) * (c->acc[j] - ma);
            sc += (c->ce[j] - mc) * (c->ce[j] - mc);
        }
        sa = c->n > 1 ? sqrt(sa / (c->n - 1)) : 0.0;
        sc = c->n > 1 ? sqrt(sc / (c->n - 1)) : 0.0;
        niah_wilson((long)c->correct, (long)c->digits, &lo, &hi);
        printf("| %s | %d | %d | %d | %.3f +- %.3f | %.3f / %.3f | %.3f-%.3f | %.3f | %.3f +- %.3f |\n",
               niah_arm_name(c->arm), c->mult, c->T, c->n, ma, sa, amin, amax, lo, hi, me, mc, sc);
        memset(mean + i, 0, sizeof mean[i]);
        mean[i].arm = c->arm;
        mean[i].mult = c->mult;
        mean[i].T = c->T;
        mean[i].acc = ma;
        mean[i].doc_ce = mc;
    }
    if (wt2_mkdirs(out) != 0) {
        fprintf(stderr, "niah: cannot create %s: %s\n", out, strerror(errno));
        return 1;
    }
    {
        char a[1200], c[1200], sfx[64];
        snprintf(a, sizeof a, "%s/niah_acc.png", out);
        snprintf(c, sizeof c, "%s/niah_ce.png", out);
        snprintf(sfx, sizeof sfx, " (mean of %d seeds)", nruns);
        if (niah_plot(a, c, mean, nc, sfx) != NIAH_OK) {
            fprintf(stderr, "niah: cannot write the plots in %s\n", out);
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    niah_config c = niah_config_default();
    niah_result res[MAX_RES];
    char dir[1024] = "", out[1024] = "runs/niah", err[512], path[1200];
    const char *env;
    int threads = 0, i, nres = 0, rc = 1, quick = 0;
    bpe_tokenizer *tok = NULL;
    wt2_tokens tr, te;
    FILE *jl = NULL;
    memset(&tr, 0, sizeof tr);
    memset(&te, 0, sizeof te);
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--quick")) quick = 1;
    if (quick) {
        /* seconds: 2 arms' worth of work for each of the 6 arms, 2 lengths */
        c.train_len = 48;
        c.nmult = 2;
        c.mult[0] = 1;
        c.mult[1] = 2;
        c.steps = 4;
        c.batch = 2;
        c.train_needles = 1;
        c.probes = 4;
        c.doc_windows = 2;
        c.d_model = 16;
        c.n_layers = 1;
        c.n_heads = 2;
        c.vocab = 512;
        c.nkeys = 8;
        c.log_every = 0;
    }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        float f = 0.0f;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, &c);
            return 0;
        }
        if (!strcmp(a, "--aggregate")) {
            if (i + 1 >= argc) {
                usage(stderr, &c);
                return 2;
            }
            return aggregate(argc, argv, i + 1);
        }
        if (!strcmp(a, "--quick")) continue;
        if (!v) {
            fprintf(stderr, "niah: unknown flag or missing value: %s\n", a);
            return 2;
        }
        if (!strcmp(a, "--seed")) bad = parse_long(v, 0, 2147483647L, &n), c.seed = (uint64_t)n;
        else if (!strcmp(a, "--threads")) bad = parse_long(v, 0, 1024, &n), threads = (int)n;
        else if (!strcmp(a, "--out-dir")) bad = strlen(v) >= sizeof out - 32 ? -1 : (snprintf(out, sizeof out, "%s", v), 0);
        else if (!strcmp(a, "--data-dir")) bad = strlen(v) >= sizeof dir - 32 ? -1 : (snprintf(dir, sizeof dir, "%s", v), 0);
        else if (!strcmp(a, "--train-len")) bad = parse_long(v, 32, 65536, &n), c.train_len = (int)n;
        else if (!strcmp(a, "--steps")) bad = parse_long(v, 0, 100000000L, &n), c.steps = n;
        else if (!strcmp(a, "--batch")) bad = parse_long(v, 1, 4096, &n), c.batch = (int)n;
        else if (!strcmp(a, "--lr")) bad = parse_float(v, &f), c.lr = f;
        else if (!strcmp(a, "--digit-weight")) bad = parse_float(v, &f), c.digit_weight = f;
        else if (!strcmp(a, "--copy-frac")) bad = parse_float(v, &f), c.copy_frac = f;
        else if (!strcmp(a, "--train-needles")) bad = parse_long(v, 1, 64, &n), c.train_needles = (int)n;
        else if (!strcmp(a, "--probes")) bad = parse_long(v, 1, 1000000L, &n), c.probes = (int)n;
        else if (!strcmp(a, "--doc-windows")) bad = parse_long(v, 0, 1000000L, &n), c.doc_windows = (int)n;
        else if (!strcmp(a, "--eval-tokens")) bad = parse_long(v, 1, 1L << 24, &n), c.eval_tokens = (int)n;
        else if (!strcmp(a, "--d-model")) bad = parse_long(v, 2, 65536, &n), c.d_model = (int)n;
        else if (!strcmp(a, "--layers")) bad = parse_long(v, 1, 64, &n), c.n_layers = (int)n;
        else if (!strcmp(a, "--heads")) bad = parse_long(v, 1, 1024, &n), c.n_heads = (int)n;
        else if (!strcmp(a, "--conv")) bad = parse_long(v, 0, 16, &n), c.conv_k = (int)n;
        else if (!strcmp(a, "--vocab")) bad = parse_long(v, 64, 65536, &n), c.vocab = (int)n;
        else if (!strcmp(a, "--keys")) bad = parse_long(v, 1, 4096, &n), c.nkeys = (int)n;
        else if (!strcmp(a, "--window")) bad = parse_long(v, -1, 1L << 24, &n), c.window = (int)n;
        else if (!strcmp(a, "--distractor")) bad = parse_long(v, 0, 4096, &n), c.distractor = (int)n;
        else if (!strcmp(a, "--distractor-weight")) bad = parse_float(v, &f), c.distractor_weight = f;
        else if (!strcmp(a, "--log-every")) bad = parse_long(v, 0, 100000000L, &n), c.log_every = (int)n;
        else if (!strcmp(a, "--haystack")) {
            if (!strcmp(v, "text")) c.haystack = NIAH_HAY_TEXT;
            else if (!strcmp(v, "synthetic")) c.haystack = NIAH_HAY_SYNTH;
            else bad = -1;
        } else if (!strcmp(a, "--lengths")) {
            const char *p = v;
            c.nmult = 0;
            while (*p && !bad) {
                char *e;
                long m = strtol(p, &e, 10);
                if (e == p || m < 1 || m > 65536 || c.nmult >= NIAH_MAX_MULT) bad = -1;
                else c.mult[c.nmult++] = (int)m;
                p = *e == ',' ? e + 1 : e;
                if (*e && *e != ',') bad = -1;
            }
            if (c.nmult == 0) bad = -1;
        } else if (!strcmp(a, "--arms")) {
            char buf[512], *tokp, *save = NULL;
            int k;
            for (k = 0; k < NIAH_NARMS; k++) c.arms[k] = 0;
            if (strlen(v) >= sizeof buf) bad = -1;
            else {
                snprintf(buf, sizeof buf, "%s", v);
                for (tokp = strtok_r(buf, ",", &save); tokp && !bad; tokp = strtok_r(NULL, ",", &save)) {
                    k = niah_arm_from_name(tokp);
                    if (k < 0) bad = -1;
                    else c.arms[k] = 1;
                }
            }
        } else {
            fprintf(stderr, "niah: unknown flag %s (--help lists them)\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "niah: bad value for %s: '%s'\n", a, v);
            return 2;
        }
        i++;
    }
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#endif
    if (!dir[0]) snprintf(dir, sizeof dir, "%s", (env = getenv("WT2_DIR")) && *env ? env : wt2_default_data_dir());
    if (wt2_mkdirs(out) != 0) {
        fprintf(stderr, "niah: cannot create the output directory '%s': %s\n", out, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/results.jsonl", out);
    jl = fopen(path, "w");
    if (!jl) {
        fprintf(stderr, "niah: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/gpt2", dir);
    if (bpe_load_dir(&tok, path, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "niah: %s\n", err);
        goto done;
    }
    if (wt2_load_split(dir, WT2_VALID, tok, &tr, err, sizeof err) != BPE_OK ||
        wt2_load_split(dir, WT2_TEST, tok, &te, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "niah: %s (the WikiText-2 validation and test splits are needed)\n", err);
        goto done;
    }
    fprintf(stderr, "niah: training text %s (%lu tokens), evaluation text %s (%lu tokens)\n", tr.source,
            (unsigned long)tr.n, te.source, (unsigned long)te.n);
    if (niah_run(&c, tok, tr.ids, tr.n, te.ids, te.n, res, MAX_RES, &nres, jl, stderr, err, sizeof err) != NIAH_OK) {
        fprintf(stderr, "niah: %s\n", err);
        goto done;
    }
    if (fclose(jl) != 0) {
        jl = NULL;
        fprintf(stderr, "niah: cannot finish %s/results.jsonl\n", out);
        goto done;
    }
    jl = NULL;
    niah_print_table(stdout, res, nres);
    {
        char a[1200], ce[1200];
        snprintf(a, sizeof a, "%s/niah_acc.png", out);
        snprintf(ce, sizeof ce, "%s/niah_ce.png", out);
        if (niah_plot(a, ce, res, nres, NULL) != NIAH_OK) {
            fprintf(stderr, "niah: cannot write the plots in %s\n", out);
            goto done;
        }
    }
    rc = 0;
done:
    if (jl) fclose(jl);
    wt2_tokens_free(&tr);
    wt2_tokens_free(&te);
    bpe_free(tok);
    return rc;
}
