/* niah - seed 002's length-extrapolation experiment (Table 2, Figure 1) at CPU scale.

     build/niah                       the default grid: 6 arms {softmax + RoPE, softmax
                                      without positions, polar} x memory {off, gated-delta},
                                      trained at 64 tokens, evaluated at 1x .. 32x (64 ..
                                      2,048 tokens); about 11 CPU-minutes at --threads 1
     build/niah --preset atma         the same grid on seed 002's architecture (issue 43: LFM2
                                      gated convolutions + two attention layers, GQA, q/k norm,
                                      Canon layers, channel gate, squared ReLU, RMSNorm, Muon,
                                      the 70 % cooldown; niah.h niah_config_preset); every knob
                                      has its flag (--help), later flags override the preset
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

   Nothing is written before the flags, the configuration and the data are checked: a bad
   flag or configuration exits 2, missing data exits 1, and an earlier results.jsonl is
   untouched either way. results.jsonl is filled as a temporary file (results.jsonl.tmp.PID)
   and renamed into place when the grid is done, so a failed or interrupted run leaves the
   earlier one as it was. --aggregate reads each RUN/results.jsonl strictly (JSON, every
   number range-checked: null or 1e300 where a count belongs is an error naming the line),
   keys each value on the seed its line records and refuses a duplicate (the same line
   twice, the same run directory twice, two runs of one seed), refuses OUT equal to a run
   directory, and prints "-" for a number that is not defined (the spread over one seed, a
   CI without digits, a CE without document windows), never "nan".
   Exit status: 0 done; 1 the data, a results file or a write failed; 2 a bad flag, value
   or configuration.
   License: MIT. */
#define _POSIX_C_SOURCE 200809L
#include "common/data.h"
#include "common/exio.h"
#include "common/mcqa.h"
#include "common/niah.h"
#include "common/sigreg.h"

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
            "  --log-every N           training log interval [%d]\n"
            "the model and recipe around the arms (issue 43; --preset sets them, later flags override):\n"
            "  --preset default|atma   atma: seed 002's architecture at this scale: d 64, 8 layers ccAcccAc (LFM2\n"
            "                          gated convolutions + two attention layers), 4 heads of 16, polar with 1\n"
            "                          kv head, q/k norm, Canon 4, channel gate, memory on the attention's\n"
            "                          q/k/v, relu2, RMSNorm, conv 0, Muon,\n"
            "                          lr flat 0.3 then cosine to 0\n"
            "  --layer-pattern P       per-layer mixer, repeated: A attention, c LFM2 gated conv ['': all A]\n"
            "  --lfm-k K               gated convolution kernel [3]\n"
            "  --ffn gelu|relu2  --norm layernorm|rmsnorm\n"
            "  --kv-heads N  --qk-norm on|off  --polar-gate head|channel  --canon-k K   polar arms\n"
            "  --mem-qkv own|shared    polar+gdelta: the memory's own q/k/v or the attention's (seed 002's)\n"
            "  --optimizer adamw|muon  --muon-momentum X  --muon-ns-steps N\n"
            "  --sigreg off|weak|strong|discrete|zipfian  --sigreg-alpha X   seed 002's regulariser\n"
            "  --lr-flat F  --lr-floor F   peak held for F of the steps after warm-up; cosine end [0, 0.1]\n"
            "exit status: 0 done; 1 the data, a results file or a write failed; 2 a bad flag, value or\n"
            "configuration (nothing is written then)\n",
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

/* v among names (NULL-terminated): *out = the matching vals entry; -1 when none matches */
static int pick(const char *v, const char *const *names, const int *vals, int *out)
{
    int k;
    for (k = 0; names[k]; k++)
        if (!strcmp(v, names[k])) {
            *out = vals[k];
            return 0;
        }
    return -1;
}

static const char *const ffn_names[] = {"gelu", "relu2", NULL};
static const int ffn_vals[] = {MDL_FFN_GELU, MDL_FFN_RELU2};
static const char *const norm_names[] = {"layernorm", "rmsnorm", NULL};
static const int norm_vals[] = {MDL_NORM_LAYER, MDL_NORM_RMS};
static const char *const onoff_names[] = {"off", "on", NULL};
static const int onoff_vals[] = {0, 1};
static const char *const gate_names[] = {"head", "channel", NULL};
static const int gate_vals[] = {MDL_POLAR_GATE_HEAD, MDL_POLAR_GATE_CHANNEL};
static const char *const memqkv_names[] = {"own", "shared", NULL};
static const int memqkv_vals[] = {MDL_MEMQKV_OWN, MDL_MEMQKV_SHARED};
static const char *const opt_names[] = {"adamw", "muon", NULL};
static const int opt_vals[] = {NIAH_OPT_ADAMW, NIAH_OPT_MUON};
static const char *const sigreg_names[] = {"off", "weak", "strong", "discrete", "zipfian", NULL};
static const int sigreg_vals[] = {SGR_OFF, SGR_WEAK, SGR_STRONG, SGR_DISCRETE, SGR_ZIPFIAN};

/* ------------------------------------------------------------------ aggregation */

/* Each line of RUN/results.jsonl is one strict JSON object (mcqa.h's parser); every number
   is range-checked before it is used. A cell is (arm, length multiple); its values are
   keyed by the seed the line records, so the same line twice, the same run directory
   twice or two runs of one seed are refused, not counted as more seeds. */
#define AGG_MAX_SEEDS 64

typedef struct {
    int arm, mult, T, n;
    unsigned long long seed[AGG_MAX_SEEDS];
    const char *src[AGG_MAX_SEEDS];
    long src_line[AGG_MAX_SEEDS];
    double acc[AGG_MAX_SEEDS], ce[AGG_MAX_SEEDS], exact[AGG_MAX_SEEDS];
    double correct, digits;
    char model[400]; /* the lines' "preset" / "model" (absent before issue 43: "") */
} agg_cell;

/* an integer field in [lo, hi] (written as an integer: no fraction, no exponent) */
static int agg_int(const mcqa_json *o, const char *key, double lo, double hi, double *out)
{
    const mcqa_json *v = mcqa_json_get(o, key);
    if (!v || v->type != MCQA_JNUM || !v->is_int || !isfinite(v->num) || v->num < lo || v->num > hi) return -1;
    *out = v->num;
    return 0;
}

/* a number in [lo, hi]; null allowed (NaN) when nullable */
static int agg_num(const mcqa_json *o, const char *key, double lo, double hi, int nullable, double *out)
{
    const mcqa_json *v = mcqa_json_get(o, key);
    if (v && v->type == MCQA_JNULL && nullable) {
        *out = NAN;
        return 0;
    }
    if (!v || v->type != MCQA_JNUM || !isfinite(v->num) || v->num < lo || v->num > hi) return -1;
    *out = v->num;
    return 0;
}

static int agg_seed(const mcqa_json *o, unsigned long long *out)
{
    const mcqa_json *v = mcqa_json_get(o, "seed");
    char *e;
    if (!v || v->type != MCQA_JNUM || !v->is_int || !v->str || v->str[0] == '-') return -1;
    errno = 0;
    *out = strtoull(v->str, &e, 10);
    return errno || *e ? -1 : 0;
}

static void agg_fmt(char *b, size_t n, const char *fmt, double v)
{
    if (isfinite(v)) snprintf(b, n, fmt, v);
    else snprintf(b, n, "-");
}

static int aggregate(int argc, char **argv, int first)
{
    static agg_cell cells[MAX_RES];
    niah_result mean[MAX_RES];
    int nc = 0, r, i, j, nruns = argc - first - 1, one_seed = 0;
    const char *out = argv[first];
    char paths[16][1200], err[512];
    if (nruns < 1 || nruns > 16) {
        fprintf(stderr, "niah --aggregate OUT RUN_DIR... (1 to 16 run directories)\n");
        return 2;
    }
    memset(cells, 0, sizeof cells);
    for (r = 0; r < nruns; r++) {
        const char *rd = argv[first + 1 + r];
        if (strlen(rd) > 1100) {
            fprintf(stderr, "niah: run directory name too long\n");
            return 2;
        }
        snprintf(paths[r], sizeof paths[r], "%s/results.jsonl", rd);
        if (!strcmp(rd, out) || ex_same_file(rd, out)) {
            fprintf(stderr, "niah: --aggregate: OUT %s is the run directory %s; its plots would replace the run's own "
                            "(choose another OUT)\n", out, rd);
            return 2;
        }
        for (j = 0; j < r; j++)
            if (!strcmp(paths[j], paths[r]) || ex_same_file(paths[j], paths[r])) {
                fprintf(stderr, "niah: --aggregate: %s is given twice (as %s and %s): one run counts once\n",
                        paths[r], argv[first + 1 + j], rd);
                return 2;
            }
    }
    for (r = 0; r < nruns; r++) {
        char *buf = NULL;
        size_t len = 0, pos = 0;
        long lineno = 0, nlines = 0;
        if (ex_read_file(paths[r], &buf, &len, (size_t)64 << 20, err, sizeof err)) {
            fprintf(stderr, "niah: %s\n", err);
            return 1;
        }
        while (pos < len) {
            size_t e = pos;
            mcqa_json *o = NULL;
            char jerr[256];
            double mult, T, acc, ce, exact, probes, cor, dig;
            char model[400];
            unsigned long long seed;
            int arm;
            const mcqa_json *av;
            agg_cell *c = NULL;
            const char *bad = NULL;
            while (e < len && buf[e] != '\n') e++;
            lineno++;
            if (e == pos || (e == pos + 1 && buf[pos] == '\r')) {
                pos = e + 1;
                continue;
            }
            if (mcqa_json_parse(buf + pos, e - pos, &o, jerr, sizeof jerr) != MCQA_OK || o->type != MCQA_JOBJ) {
                fprintf(stderr, "niah: %s:%ld: not a JSON object%s%s\n", paths[r], lineno, o ? "" : ": ", o ? "" : jerr);
                mcqa_json_free(o);
                free(buf);
                return 1;
            }
            pos = e + 1;
            {
                const mcqa_json *pv = mcqa_json_get(o, "preset"), *mv = mcqa_json_get(o, "model");
                if ((pv && pv->type != MCQA_JSTR) || (mv && mv->type != MCQA_JSTR))
                    bad = "\"preset\" or \"model\" is not a string";
                else
                    snprintf(model, sizeof model, "%s%s%s", pv ? pv->str : "", pv && mv ? ": " : "", mv ? mv->str : "");
            }
            av = mcqa_json_get(o, "arm");
            arm = av && av->type == MCQA_JSTR ? niah_arm_from_name(av->str) : -1;
            if (bad) arm = 0; /* reported below */
            if (bad) ;
            else if (arm < 0) bad = "\"arm\" is not one of the arms";
            else if (agg_seed(o, &seed)) bad = "\"seed\" is not an integer 0..2^64-1";
            else if (agg_int(o, "mult", 1, 65536, &mult)) bad = "\"mult\" is not an integer 1..65536";
            else if (agg_int(o, "T", 1, 65536, &T)) bad = "\"T\" is not an integer 1..65536";
            else if (agg_num(o, "acc", 0, 1, 0, &acc)) bad = "\"acc\" is not a number in [0, 1]";
            else if (agg_num(o, "doc_ce", 0, 1e6, 1, &ce)) bad = "\"doc_ce\" is neither null nor a number in [0, 1e6]";
            else if (agg_int(o, "probes", 0, 1e12, &probes)) bad = "\"probes\" is not an integer 0..1e12";
            else if (agg_int(o, "exact", 0, probes, &exact)) bad = "\"exact\" is not an integer 0..probes";
            else if (agg_int(o, "digits", 0, 1e13, &dig)) bad = "\"digits\" is not an integer 0..1e13";
            else if (agg_int(o, "correct", 0, dig, &cor)) bad = "\"correct\" is not an integer 0..digits";
            else if (dig > 0 && fabs(acc - cor / dig) > 1e-3) bad = "\"acc\" is not correct / digits";
            mcqa_json_free(o);
            if (bad) {
                fprintf(stderr, "niah: %s:%ld: %s\n", paths[r], lineno, bad);
                free(buf);
                return 1;
            }
            nlines++;
            for (i = 0; i < nc; i++)
                if (cells[i].arm == arm && cells[i].mult == (int)mult) c = cells + i;
            if (!c) {
                if (nc >= MAX_RES) {
                    free(buf);
                    fprintf(stderr, "niah: %s:%ld: more than %d (arm, length) cells\n", paths[r], lineno, MAX_RES);
                    return 1;
                }
                c = cells + nc++;
                c->arm = arm;
                c->mult = (int)mult;
                c->T = (int)T;
                snprintf(c->model, sizeof c->model, "%s", model);
            }
            if (strcmp(c->model, model)) {
                fprintf(stderr, "niah: %s:%ld: %s x%d ran the model \"%s\" here and \"%s\" in %s:%ld: refusing to "
                                "average different models\n", paths[r], lineno, niah_arm_name(arm), c->mult, model,
                        c->model, c->src[0], c->src_line[0]);
                free(buf);
                return 1;
            }
            if (c->T != (int)T) {
                fprintf(stderr, "niah: %s:%ld: %s x%d has T %d here and %d in %s:%ld: the runs differ in training "
                                "length; refusing to average them\n", paths[r], lineno, niah_arm_name(arm), c->mult,
                        (int)T, c->T, c->src[0], c->src_line[0]);
                free(buf);
                return 1;
            }
            for (j = 0; j < c->n; j++)
                if (c->seed[j] == seed) {
                    fprintf(stderr, "niah: %s:%ld: %s x%d of seed %llu is already in %s:%ld: a seed counts once "
                                    "(the same line, run or seed given twice)\n", paths[r], lineno, niah_arm_name(arm),
                            c->mult, seed, c->src[j], c->src_line[j]);
                    free(buf);
                    return 1;
                }
            if (c->n == AGG_MAX_SEEDS) {
                fprintf(stderr, "niah: %s:%ld: more than %d seeds for %s x%d\n", paths[r], lineno, AGG_MAX_SEEDS,
                        niah_arm_name(arm), c->mult);
                free(buf);
                return 1;
            }
            c->seed[c->n] = seed;
            c->src[c->n] = paths[r];
            c->src_line[c->n] = lineno;
            c->acc[c->n] = acc;
            c->ce[c->n] = ce;
            c->exact[c->n] = probes > 0 ? exact / probes : NAN;
            c->n++;
            c->correct += cor;
            c->digits += dig;
        }
        free(buf);
        if (nlines == 0) {
            fprintf(stderr, "niah: %s holds no results\n", paths[r]);
            return 1;
        }
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
        /* a number that is not defined (one seed: no std; no digits: no CI; no CE) is "-" */
        agg_cell *c = cells + i;
        double ma = 0, sa = 0, mc = 0, sc = 0, me = 0, lo = NAN, hi = NAN, amin = 1e9, amax = -1e9;
        int nce = 0, nex = 0;
        char s_sa[24], s_ci[48], s_me[24], s_mc[24], s_sc[24];
        for (j = 0; j < c->n; j++) {
            ma += c->acc[j];
            if (isfinite(c->ce[j])) { mc += c->ce[j]; nce++; }
            if (isfinite(c->exact[j])) { me += c->exact[j]; nex++; }
            amin = c->acc[j] < amin ? c->acc[j] : amin;
            amax = c->acc[j] > amax ? c->acc[j] : amax;
        }
        ma /= c->n;
        mc = nce ? mc / nce : NAN;
        me = nex ? me / nex : NAN;
        for (j = 0; j < c->n; j++) {
            sa += (c->acc[j] - ma) * (c->acc[j] - ma);
            if (isfinite(c->ce[j])) sc += (c->ce[j] - mc) * (c->ce[j] - mc);
        }
        sa = c->n > 1 ? sqrt(sa / (c->n - 1)) : NAN;
        sc = nce > 1 ? sqrt(sc / (nce - 1)) : NAN;
        if (c->digits > 0) niah_wilson((long)c->correct, (long)c->digits, &lo, &hi);
        one_seed += c->n < 2;
        agg_fmt(s_sa, sizeof s_sa, "%.3f", sa);
        if (isfinite(lo) && isfinite(hi)) snprintf(s_ci, sizeof s_ci, "%.3f-%.3f", lo, hi);
        else snprintf(s_ci, sizeof s_ci, "-");
        agg_fmt(s_me, sizeof s_me, "%.3f", me);
        agg_fmt(s_mc, sizeof s_mc, "%.3f", mc);
        agg_fmt(s_sc, sizeof s_sc, "%.3f", sc);
        printf("| %s | %d | %d | %d | %.3f +- %s | %.3f / %.3f | %s | %s | %s +- %s |\n", niah_arm_name(c->arm), c->mult,
               c->T, c->n, ma, s_sa, amin, amax, s_ci, s_me, s_mc, s_sc);
        memset(mean + i, 0, sizeof mean[i]);
        mean[i].arm = c->arm;
        mean[i].mult = c->mult;
        mean[i].T = c->T;
        mean[i].acc = ma;
        mean[i].doc_ce = mc;
    }
    for (i = 0, j = 0; i < nc; i++)
        if (cells[i].model[0] && (i == 0 || cells[i].arm != cells[i - 1].arm))
            printf("%s%s: %s\n", j++ == 0 ? "\nmodels:\n" : "", niah_arm_name(cells[i].arm), cells[i].model);
    if (one_seed)
        printf("\nnote: %d of %d cells have one seed: no spread over seeds (\"-\"); give runs of more seeds for one\n",
               one_seed, nc);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "niah: error writing the table to stdout\n");
        return 1;
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
    ex_out jo;
    ex_wait_policy(argv); /* polite waiting threads on a shared machine (exio.h) */
    memset(&jo, 0, sizeof jo);
    memset(&tr, 0, sizeof tr);
    memset(&te, 0, sizeof te);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = 1;
        /* the preset first, wherever it stands: every other flag overrides it */
        if (!strcmp(argv[i], "--preset")) {
            if (i + 1 >= argc || niah_config_preset(&c, argv[i + 1]) != NIAH_OK) {
                fprintf(stderr, "niah: bad value for --preset: '%s' (default or atma)\n", i + 1 < argc ? argv[i + 1] : "");
                return 2;
            }
            i++;
        }
    }
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
        if (c.layer_pattern[0]) c.n_layers = (int)strlen(c.layer_pattern); /* one of each mixer */
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
        else if (!strcmp(a, "--preset")) bad = 0; /* applied above */
        else if (!strcmp(a, "--layer-pattern"))
            bad = strlen(v) > MDL_MAX_LAYERS ? -1 : (snprintf(c.layer_pattern, sizeof c.layer_pattern, "%s", v), 0);
        else if (!strcmp(a, "--lfm-k")) bad = parse_long(v, 1, 64, &n), c.lfm_k = (int)n;
        else if (!strcmp(a, "--kv-heads")) bad = parse_long(v, 0, 1024, &n), c.kv_heads = (int)n;
        else if (!strcmp(a, "--canon-k")) bad = parse_long(v, 0, 64, &n), c.canon_k = (int)n;
        else if (!strcmp(a, "--muon-momentum")) bad = parse_float(v, &f), c.muon_momentum = f;
        else if (!strcmp(a, "--muon-ns-steps")) bad = parse_long(v, 1, 20, &n), c.muon_ns_steps = (int)n;
        else if (!strcmp(a, "--sigreg-alpha")) bad = parse_float(v, &f), c.sigreg_alpha = f;
        else if (!strcmp(a, "--lr-flat")) bad = parse_float(v, &f), c.lr_flat = (double)f;
        else if (!strcmp(a, "--lr-floor")) bad = parse_float(v, &f), c.lr_floor = (double)f;
        else if (!strcmp(a, "--ffn")) bad = pick(v, ffn_names, ffn_vals, &c.ffn);
        else if (!strcmp(a, "--norm")) bad = pick(v, norm_names, norm_vals, &c.norm);
        else if (!strcmp(a, "--qk-norm")) bad = pick(v, onoff_names, onoff_vals, &c.qk_norm);
        else if (!strcmp(a, "--polar-gate")) bad = pick(v, gate_names, gate_vals, &c.polar_gate);
        else if (!strcmp(a, "--optimizer")) bad = pick(v, opt_names, opt_vals, &c.optimizer);
        else if (!strcmp(a, "--mem-qkv")) bad = pick(v, memqkv_names, memqkv_vals, &c.mem_qkv);
        else if (!strcmp(a, "--sigreg")) bad = pick(v, sigreg_names, sigreg_vals, &c.sigreg);
        else if (!strcmp(a, "--haystack")) {
            if (!strcmp(v, "text")) c.haystack = NIAH_HAY_TEXT;
            else if (!strcmp(v, "synthetic")) c.haystack = NIAH_HAY_SYNTH;
            else bad = -1;
        } else if (!strcmp(a, "--lengths")) {
            const char *p = v;
            c.nmult = 0;
            while (*p && !bad) {
                char *e;
                long m = *p >= '0' && *p <= '9' ? strtol(p, &e, 10) : (e = (char *)p, 0L); /* digits only */
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
    /* every check before any output: the configuration, the output directory, the data */
    if (niah_config_check(&c, err, sizeof err) != NIAH_OK) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    {
        struct stat st;
        if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "niah: --out-dir '%s' is not a directory\n", out);
            return 2;
        }
    }
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#endif
    if (!dir[0]) snprintf(dir, sizeof dir, "%s", (env = getenv("WT2_DIR")) && *env ? env : wt2_default_data_dir());
    snprintf(path, sizeof path, "%s/gpt2", dir);
    if (bpe_load_dir(&tok, path, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "niah: %s\n  (the GPT-2 vocabulary, %s/encoder.json and vocab.bpe: point --data-dir or WT2_DIR at "
                        "the data; README, section \"Data\", says where to get it)\n", err, path);
        goto done;
    }
    if (wt2_load_split(dir, WT2_VALID, tok, &tr, err, sizeof err) != BPE_OK ||
        wt2_load_split(dir, WT2_TEST, tok, &te, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "niah: %s (the WikiText-2 validation and test splits are needed; README, section \"Data\", "
                        "says where to get them)\n", err);
        goto done;
    }
    fprintf(stderr, "niah: training text %s (%lu tokens), evaluation text %s (%lu tokens)\n", tr.source,
            (unsigned long)tr.n, te.source, (unsigned long)te.n);
    /* results.jsonl: a temporary file (results.jsonl.tmp.PID, filled as the grid runs),
       renamed over results.jsonl only when the whole grid is done */
    if (wt2_mkdirs(out) != 0) {
        fprintf(stderr, "niah: cannot create the output directory '%s': %s\n", out, strerror(errno));
        goto done;
    }
    snprintf(path, sizeof path, "%s/results.jsonl", out);
    if (ex_out_open(&jo, path, err, sizeof err)) {
        fprintf(stderr, "niah: %s\n", err);
        goto done;
    }
    jl = jo.f;
    if (niah_run(&c, tok, tr.ids, tr.n, te.ids, te.n, res, MAX_RES, &nres, jl, stderr, err, sizeof err) != NIAH_OK) {
        fprintf(stderr, "niah: %s (%s left as it was)\n", err, path);
        goto done;
    }
    jl = NULL;
    if (ex_out_commit(&jo, err, sizeof err)) {
        fprintf(stderr, "niah: %s\n", err);
        goto done;
    }
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
    if (jl) ex_out_discard(&jo);
    wt2_tokens_free(&tr);
    wt2_tokens_free(&te);
    bpe_free(tok);
    return rc;
}
