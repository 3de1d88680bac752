/* mcqa - score a wt2_train checkpoint on multiple-choice tasks (seed 003 §4.1-4.2).

     build/mcqa --ckpt runs/wt2/ckpt.safetensors --tasks runs/mcqa/wt2_cloze.jsonl \
                --tasks runs/mcqa/wt2_order.jsonl --out runs/wt2/mcqa.jsonl
     build/mcqa --help

   Loads the checkpoint with the model configuration stored in it (any model variant
   wt2_train trains), picks the weights wt2_train's final evaluation uses (SWA if it averaged, else EMA
   if on, else raw; --weights overrides), and scores every item of every task file on the
   CPU: each choice by the sum of its token log-probabilities under teacher forcing
   (primary) and by their mean (sensitivity), with the prompt left-truncated to the model's
   context minus the longest choice. Task format, truncation rule and the per-example log:
   examples/common/mcqa.h. One JSON line per item goes to --out; accuracy per task (both
   rules) to stderr, and with --json one summary line to stdout.

   Before scoring it checks that it runs the model exactly as wt2_train evaluates it: the
   cross-entropy of the first test chunks through this program's forward must equal
   trn_evaluate's (same weights) within 1e-4 nats, else it stops (--no-check skips this).
   Scoring runs on the CPU (there is no GPU scoring path; checkpoints of GPU runs load here).

   Device and precision are this run's choices, not the checkpoint's: the checkpoint's
   "device" and "precision" settings are not used, so a checkpoint trained with --device
   cuda scores here (on the CPU, fp32) like any other.

   Nothing is lost and nothing invalid is written (issue 37). Every task file is read whole
   and every line parsed before the model is loaded; --out is opened only after every
   input is read and checked and the check has passed, as a temporary file
   (<out>.tmp.<pid>) renamed over --out when every item is scored, so a run that fails
   at any point leaves an earlier --out as it was. Refused: --out naming an input (the
   checkpoint or a task file, by path or as the same file); a task file that cannot be
   read (missing, a directory, no permission), holds no items or has a malformed line (the
   file and line are named); a task file given twice or an item (task, id) given twice;
   --threads outside 0..1024, --max-len outside 0..1048576, --max-items < 0, junk numbers;
   --device other than cpu; --weights ema|swa on a checkpoint without those weights (no
   silent fallback to raw); non-finite weights or scores (NaN / Inf: the message names
   the cause; the log never holds "nan").
   Exit status: 0 every item scored and written; 1 an input, the model, the check or a
   write failed (nothing written to --out); 2 a bad flag or value.

   Data: the GPT-2 tokenizer and the WikiText-2 test split (for the check) come from
   --data-dir, else $WT2_DIR, else the compiled-in directory (../shared/data).
   License: MIT. */
#define _POSIX_C_SOURCE 200809L
#include "common/ckpt.h"
#include "common/data.h"
#include "common/exio.h"
#include "common/mcqa.h"
#include "common/model.h"
#include "common/train.h"
#include "common/ckptcfg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef ATTNKIT_DATA_DIR
#define ATTNKIT_DATA_DIR "../shared/data"
#endif

#define MAX_FILES 64

typedef struct {
    mdl_model *m;
    mdl_opts o;
} fwd_ctx;

static int model_forward(void *user, const int *ids, int B, int T, int first, const float **logits, int *V,
                         char *err, size_t errlen)
{
    fwd_ctx *c = (fwd_ctx *)user;
    int rc;
    c->o.logits_from = first; /* the head on the rows mcqa_score reads only */
    rc = mdl_forward(c->m, ids, NULL, B, T, &c->o, NULL);
    if (rc != MDL_OK) {
        snprintf(err, errlen, "forward (B %d, T %d) failed: %s", B, T, mdl_last_error(c->m));
        return rc;
    }
    *logits = mdl_logits(c->m);
    *V = mdl_get_config(c->m)->vocab;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mcqa --ckpt PATH --tasks FILE [--tasks FILE ...] [options]\n\n"
            "Scores a wt2_train checkpoint on multiple-choice task files (JSON lines with\n"
            "context, choices, gold; see examples/common/mcqa.h) and writes one JSON line per\n"
            "item with both scoring rules.\n\n"
            "  --ckpt PATH        wt2_train checkpoint (ckpt.safetensors)\n"
            "  --tasks FILE       task file (repeatable); items without \"task\" take the file's\n"
            "                     base name (or --task)\n"
            "  --out PATH         per-example log (default: stdout unless --json)\n"
            "  --task NAME        default task name for items that have none\n"
            "  --weights W        auto|raw|ema|swa (default auto: what wt2_train's final eval uses);\n"
            "                     ema or swa on a checkpoint without them is refused\n"
            "  --max-len N        context for scoring, 0..1048576 (default 0: the model's maximum)\n"
            "  --max-items N      score at most N items per file (0: all)\n"
            "  --threads N        OpenMP threads, 0..1024 (0: default)\n"
            "  --device cpu       where this run scores: the CPU, in fp32 (the only path so far); the\n"
            "                     checkpoint's device and precision are not used, so a checkpoint\n"
            "                     trained with --device cuda scores here too\n"
            "  --data-dir DIR     GPT-2 tokenizer and WikiText-2 test split\n"
            "  --no-check         skip the check against trn_evaluate\n"
            "  --json             one summary line on stdout at the end\n"
            "  --help             this text\n\n"
            "Exit status: 0 scored every item; 1 an input, the model, the check or a write\n"
            "failed (--out is then left as it was); 2 a bad flag or value.\n");
}

typedef struct {
    char name[128];
    long n, right_sum, right_mean, truncated;
    double prompt_len;
} task_acc;

typedef struct {
    mcqa_item it;
    int file;               /* index into files[] */
} qitem;

static int cmp_qitem(const void *x, const void *y)
{
    const mcqa_item *a = &(*(const qitem *const *)x)->it, *b = &(*(const qitem *const *)y)->it;
    int c = strcmp(a->task, b->task);
    return c ? c : strcmp(a->id, b->id);
}

/* Every item of every task file, parsed and checked before anything is written: a file
   that cannot be read (a directory, no permission, a read error), a malformed line, a
   file without items and an item (task, id) given twice are errors naming the file. */
static int read_tasks(const char *const *files, int nfiles, const char *def_task, long max_items, qitem **out,
                      long *nout, char *err, size_t errlen)
{
    qitem *q = NULL;
    long n = 0, cap = 0, i;
    int fi, rc = 0;
    *out = NULL;
    *nout = 0;
    for (fi = 0; fi < nfiles && !rc; fi++) {
        char *buf = NULL, base[128];
        size_t len = 0, pos = 0;
        const char *bs = strrchr(files[fi], '/');
        long lineno = 0, done = 0;
        if (ex_read_file(files[fi], &buf, &len, 0, err, errlen)) {
            rc = -1;
            break;
        }
        snprintf(base, sizeof base, "%s", bs ? bs + 1 : files[fi]);
        base[strcspn(base, ".")] = 0;
        while (pos < len && !rc) {
            size_t e = pos, l;
            int k;
            while (e < len && buf[e] != '\n') e++;
            l = e - pos;
            if (l > 0 && buf[pos + l - 1] == '\r') l--;
            lineno++;
            if (l > MCQA_MAX_LINE) {
                rc = ex_errf(err, errlen, -1, "%s:%ld: line longer than %u bytes", files[fi], lineno, MCQA_MAX_LINE);
                break;
            }
            if (n == cap) {
                long nc = cap ? 2 * cap : 64;
                qitem *nq = (qitem *)realloc(q, (size_t)nc * sizeof *nq);
                if (!nq) { rc = ex_errf(err, errlen, -1, "out of memory reading %s", files[fi]); break; }
                q = nq;
                cap = nc;
            }
            k = mcqa_item_parse(buf + pos, l, lineno, files[fi], def_task ? def_task : base, &q[n].it, err, errlen);
            pos = e + 1;
            if (k == MCQA_ERANGE) continue; /* blank line */
            if (k != MCQA_OK) { rc = -1; break; }
            if (max_items && done >= max_items) { mcqa_item_free(&q[n].it); continue; } /* checked, not scored */
            q[n].file = fi;
            n++;
            done++;
        }
        free(buf);
        if (!rc && done == 0)
            rc = ex_errf(err, errlen, -1, "%s holds no items (an empty task file is an error: nothing would be scored)",
                         files[fi]);
    }
    if (!rc) {
        qitem **v = (qitem **)malloc((size_t)(n ? n : 1) * sizeof *v);
        if (!v) rc = ex_errf(err, errlen, -1, "out of memory");
        else {
            for (i = 0; i < n; i++) v[i] = &q[i];
            qsort(v, (size_t)n, sizeof *v, cmp_qitem);
            for (i = 1; i < n && !rc; i++)
                if (!cmp_qitem(&v[i - 1], &v[i]))
                    rc = ex_errf(err, errlen, -1, "item %s/%s is given twice (%s line %ld and %s line %ld): the log "
                                 "could not be paired by mcqa_compare", v[i]->it.task, v[i]->it.id, files[v[i - 1]->file],
                                 v[i - 1]->it.line, files[v[i]->file], v[i]->it.line);
            free(v);
        }
    }
    if (rc) {
        for (i = 0; i < n; i++) mcqa_item_free(&q[i].it);
        free(q);
        return -1;
    }
    *out = q;
    *nout = n;
    return 0;
}

int main(int argc, char **argv)
{
    const char *ckpt_path = NULL, *out_path = NULL, *def_task = NULL, *files[MAX_FILES], *env;
    const char *wname = "auto";
    int nfiles = 0, max_len = 0, threads = 0, check = 1, json = 0, i, rc = 1, used = 0, wsel;
    long long max_items = 0;
    char dir[1024], err[1024], path[1200];
    ckpt_file *ck = NULL;
    trn_config cfg;
    trn *t = NULL;
    bpe_tokenizer *tok = NULL;
    wt2_tokens test;
    fwd_ctx fc;
    FILE *out = NULL;
    ex_out eo;
    int out_open = 0;
    task_acc *acc = NULL;
    int nacc = 0, cacc = 0;
    qitem *items = NULL;
    long nitems = 0, q;
    double t0;
    long total = 0, forwards = 0;

    ex_wait_policy(argv); /* polite waiting threads on a shared machine (exio.h) */

    memset(&test, 0, sizeof test);
    memset(&eo, 0, sizeof eo);
    dir[0] = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--no-check")) { check = 0; continue; }
        else if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!v) { fprintf(stderr, "mcqa: unknown option or missing value: '%s' (see --help)\n", a); return 2; }
        if (!strcmp(a, "--ckpt")) ckpt_path = v;
        else if (!strcmp(a, "--tasks")) {
            if (nfiles == MAX_FILES) { fprintf(stderr, "mcqa: at most %d task files\n", MAX_FILES); return 2; }
            files[nfiles++] = v;
        } else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--task")) def_task = v;
        else if (!strcmp(a, "--weights")) wname = v;
        else if (!strcmp(a, "--max-len")) bad = ex_parse_int(v, 0, 1 << 20, &max_len);
        else if (!strcmp(a, "--max-items")) bad = ex_parse_ll(v, 0, 1000000000000LL, &max_items);
        else if (!strcmp(a, "--threads")) bad = ex_parse_int(v, 0, TRN_MAX_THREADS, &threads);
        else if (!strcmp(a, "--data-dir")) bad = strlen(v) >= sizeof dir - 32 ? -1 : (snprintf(dir, sizeof dir, "%s", v), 0);
        else if (!strcmp(a, "--device")) {
            if (strcmp(v, "cpu")) {
                fprintf(stderr, "mcqa: --device %s: this program scores on the CPU only (--device cpu); a checkpoint "
                                "trained on any device scores here\n", v);
                return 2;
            }
        } else { fprintf(stderr, "mcqa: unknown option '%s' (see --help)\n", a); return 2; }
        if (bad) {
            fprintf(stderr, "mcqa: bad value for %s: '%s' (%s)\n", a, v,
                    !strcmp(a, "--threads") ? "an integer 0..1024" : !strcmp(a, "--max-len") ? "an integer 0..1048576"
                    : !strcmp(a, "--max-items") ? "an integer >= 0" : "too long");
            return 2;
        }
        i++;
    }
    if (!ckpt_path || nfiles == 0) { usage(stderr); return 2; }
    if (!strcmp(wname, "auto")) wsel = -1;
    else if (!strcmp(wname, "raw")) wsel = TRN_W_RAW;
    else if (!strcmp(wname, "ema")) wsel = TRN_W_EMA;
    else if (!strcmp(wname, "swa")) wsel = TRN_W_SWA;
    else { fprintf(stderr, "mcqa: --weights must be auto, raw, ema or swa\n"); return 2; }
    /* the output never replaces an input (same path, or the same file by device + inode) */
    if (out_path) {
        const char *ins[MAX_FILES + 1];
        int nin = 0;
        ins[nin++] = ckpt_path;
        for (i = 0; i < nfiles; i++) ins[nin++] = files[i];
        for (i = 0; i < nin; i++)
            if (!strcmp(out_path, ins[i]) || ex_same_file(out_path, ins[i])) {
                fprintf(stderr, "mcqa: --out %s is the input %s; refusing to overwrite an input (nothing written)\n",
                        out_path, ins[i]);
                return 2;
            }
    }
    if (out_path) {
        struct stat st;
        if (stat(out_path, &st) == 0 && S_ISDIR(st.st_mode)) {
            fprintf(stderr, "mcqa: --out %s is a directory\n", out_path);
            return 2;
        }
    }
    for (i = 0; i < nfiles; i++) {
        int j;
        for (j = 0; j < i; j++)
            if (!strcmp(files[i], files[j]) || ex_same_file(files[i], files[j])) {
                fprintf(stderr, "mcqa: task file %s is given twice (as %s and %s)\n", files[i], files[j], files[i]);
                return 2;
            }
    }
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#endif
    if (!dir[0]) snprintf(dir, sizeof dir, "%s", (env = getenv("WT2_DIR")) && *env ? env : ATTNKIT_DATA_DIR);

    /* inputs: the task files (all of them, before the model), then the model */
    if (ex_check_input(ckpt_path, err, sizeof err)) { fprintf(stderr, "mcqa: --ckpt: %s\n", err); goto out; }
    if (read_tasks(files, nfiles, def_task, (long)max_items, &items, &nitems, err, sizeof err)) {
        fprintf(stderr, "mcqa: %s\n", err);
        goto out;
    }
    if (ckpt_open(&ck, ckpt_path, err, sizeof err) != CKPT_OK) { fprintf(stderr, "mcqa: %s\n", err); goto out; }
    if (ex_config_from_ckpt(ck, &cfg, "mcqa", err, sizeof err) != 0) { fprintf(stderr, "mcqa: %s: %s\n", ckpt_path, err); goto out; }
    snprintf(path, sizeof path, "%s/gpt2", dir);
    if (bpe_load_dir(&tok, path, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "mcqa: %s\n  (the GPT-2 vocabulary, %s/encoder.json and vocab.bpe: point --data-dir or WT2_DIR at "
                        "the data; README, section \"Data\", says where to get it)\n", err, path);
        goto out;
    }
    if (wt2_load_split(dir, WT2_TEST, tok, &test, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "mcqa: %s (the WikiText-2 test split is needed to build and check the model; README, section "
                        "\"Data\", says where to get it)\n", err);
        goto out;
    }
    /* the trainer only holds the weights here (scoring and the check use the test split,
       passed explicitly): it is built on the test split and loads with TRN_LOAD_EVAL_ONLY,
       which checks the run's own token counts instead of comparing them with these */
    if (trn_create(&t, &cfg, test.ids, test.n, test.ids, test.n, err, sizeof err) != TRN_OK ||
        trn_load_flags(t, ckpt_path, TRN_LOAD_EVAL_ONLY, err, sizeof err) != TRN_OK) {
        fprintf(stderr, "mcqa: %s\n(mcqa loads checkpoints written by the wt2_train of the same source tree)\n", err);
        goto out;
    }
    if (wsel < 0) wsel = trn_final_weights(t);
    fc.m = trn_model(t);
    fc.o = mdl_opts_default();
    fc.o.train = 0;
    if (cfg.warmin_steps > 0) {
        float s = 1.0f;
        if (guardian_warm_in(trn_steps_done(t), cfg.warmin_steps, &s) == GUARDIAN_OK) fc.o.prior_scale = s;
    }
    {
        /* the weights: trn_evaluate reports which ones it uses for this request (and restores
           the raw weights afterwards); copy those into the model */
        double ce_ref = 0;
        long long ntok = 0;
        int T = cfg.context;
        if (trn_evaluate(t, test.ids, test.n, T, wsel, check ? 2 : 1, &ce_ref, &ntok, &used) != TRN_OK) {
            fprintf(stderr, "mcqa: trn_evaluate failed on the test split\n");
            goto out;
        }
        if (used != wsel) {
            /* no silent fallback: the weights asked for are the weights scored, or nothing */
            fprintf(stderr, "mcqa: --weights %s: the checkpoint has no %s weights to score (the run did not keep them, "
                            "or had not averaged any yet; the trainer would fall back to %s weights); nothing scored "
                            "(use --weights auto or %s)\n", trn_weights_name(wsel), trn_weights_name(wsel),
                    trn_weights_name(used), trn_weights_name(used));
            goto out;
        }
        if (used != TRN_W_RAW) {
            int64_t sh[1];
            sh[0] = (int64_t)mdl_num_params(fc.m);
            if (ckpt_read_into(ck, used == TRN_W_SWA ? "optim.swa" : "optim.ema", CKPT_F32, 1, sh, mdl_params(fc.m),
                               err, sizeof err) != CKPT_OK) {
                fprintf(stderr, "mcqa: %s\n", err);
                goto out;
            }
        }
        {
            /* non-finite weights give non-finite scores: say so, whatever --no-check says */
            const float *w = mdl_params(fc.m);
            size_t n = mdl_num_params(fc.m), k, bad = 0, first = 0;
            for (k = 0; k < n; k++)
                if (!isfinite(w[k])) { if (!bad) first = k; bad++; }
            if (bad) {
                fprintf(stderr, "mcqa: the checkpoint's %s weights hold %zu non-finite values (NaN or Inf; the first at "
                                "parameter %zu of %zu): its scores would not be numbers; nothing scored\n",
                        trn_weights_name(used), bad, first, n);
                goto out;
            }
        }
        if (cfg.controller == TRN_CTRL_CEAS) {
            /* per-head temperatures from CEAS's beta, as the trainer's evaluation uses them */
            ckpt_entry e;
            ceas_state cs;
            ceas_config cc = ceas_config_default();
            const mdl_config *mc = mdl_get_config(fc.m);
            static float temps[MDL_MAX_LAYERS * 64];
            int L = mc->n_layers, H = mc->n_heads, D = mc->d_model / mc->n_heads, k;
            memset(&cs, 0, sizeof cs);
            if (L * H > MDL_MAX_LAYERS * 64 || ckpt_find(ck, "state.ceas", &e) != CKPT_OK || e.dtype != CKPT_U8 ||
                ceas_init(&cs, &cc, L, H, D) != CEAS_OK) {
                fprintf(stderr, "mcqa: the checkpoint has no usable CEAS state\n");
                goto out;
            }
            if (ceas_state_load(&cs, e.data, (size_t)e.shape[0]) != CEAS_OK) {
                ceas_free(&cs);
                fprintf(stderr, "mcqa: the checkpoint's CEAS state is corrupted\n");
                goto out;
            }
            for (k = 0; k < L * H; k++) temps[k] = ceas_beta_to_temp(cs.beta[k], D);
            ceas_free(&cs);
            fc.o.head_temp = temps;
        }
        if (check) {
            int32_t *chunk = (int32_t *)malloc((size_t)2 * (size_t)(T + 1) * sizeof(int32_t));
            int *inp = (int *)malloc((size_t)2 * (size_t)T * sizeof(int));
            wt2_loader L;
            double s = 0;
            int rows = 0, b, j, V = cfg.model.vocab;
            const float *lg;
            if (!chunk || !inp || wt2_loader_init(&L, test.ids, test.n, WT2_SEQUENTIAL, 0) != 0 ||
                (rows = wt2_loader_next(&L, 2, T, chunk)) < 1) {
                free(chunk);
                free(inp);
                fprintf(stderr, "mcqa: cannot read the test split for the check\n");
                goto out;
            }
            for (b = 0; b < rows; b++)
                for (j = 0; j < T; j++) inp[b * T + j] = chunk[b * (T + 1) + j];
            if (model_forward(&fc, inp, rows, T, 0, &lg, &V, err, sizeof err) != 0) {
                free(chunk);
                free(inp);
                fprintf(stderr, "mcqa: %s\n", err);
                goto out;
            }
            for (b = 0; b < rows; b++)
                for (j = 0; j < T; j++) s -= mcqa_logprob(lg + ((size_t)b * T + (size_t)j) * (size_t)V, V, chunk[b * (T + 1) + j + 1]);
            s /= (double)rows * T;
            free(chunk);
            free(inp);
            fprintf(stderr, "mcqa: check: test CE of the first %d chunks %.6f here, %.6f by trn_evaluate (%s weights)\n",
                    rows, s, ce_ref, trn_weights_name(used));
            if (!isfinite(s) || !isfinite(ce_ref)) {
                fprintf(stderr, "mcqa: the model's test cross-entropy is not finite (%g here, %g by trn_evaluate): its "
                                "outputs hold NaN or Inf, so no score would be a number; nothing scored\n", s, ce_ref);
                goto out;
            }
            if (!(fabs(s - ce_ref) <= 1e-4)) {
                fprintf(stderr, "mcqa: this program does not run the model as wt2_train evaluates it (controller %d); "
                                "refusing to score (use --no-check to override)\n", cfg.controller);
                goto out;
            }
        }
    }
    if (max_len == 0 || max_len > mdl_get_config(fc.m)->max_T) {
        if (max_len > mdl_get_config(fc.m)->max_T)
            fprintf(stderr, "mcqa: --max-len %d is longer than the model's context; using %d\n", max_len, mdl_get_config(fc.m)->max_T);
        max_len = mdl_get_config(fc.m)->max_T;
    }
    fprintf(stderr, "mcqa: %s: step %lld, %zu parameters, %s weights, scoring context %d\n", ckpt_path,
            trn_steps_done(t), mdl_num_params(fc.m), trn_weights_name(used), max_len);
    /* the output: opened only now (every input read and checked), as a temporary file
       renamed over --out at the end; any failure before leaves --out as it was */
    if (out_path) {
        if (ex_out_open(&eo, out_path, err, sizeof err)) { fprintf(stderr, "mcqa: %s\n", err); goto out; }
        out_open = 1;
        out = eo.f;
    } else if (!json) out = stdout;

    /* score */
    t0 = now_s();
    {
        /* progress: a redrawn line every 2 s on a terminal; in a log, a plain line every 10 s
           (no carriage returns in redirected output) */
        int ptty = isatty(fileno(stderr));
        const char *cr = ptty ? "\r" : "";
        double last = now_s(), every = ptty ? 2.0 : 10.0;
        long done = 0;
        for (q = 0; q < nitems; q++) {
            const mcqa_item *it = &items[q].it;
            mcqa_tokens tk;
            mcqa_result r;
            int a, k;
            if (q > 0 && items[q].file != items[q - 1].file) {
                fprintf(stderr, "%smcqa: %s: %ld items%s\n", cr, files[items[q - 1].file], done, ptty ? "                              " : "");
                done = 0;
            }
            if (mcqa_tokenize(tok, it, &tk, err, sizeof err) != MCQA_OK ||
                mcqa_score(model_forward, &fc, max_len, &tk, &r, err, sizeof err) != MCQA_OK) {
                fprintf(stderr, "mcqa: %s:%ld: %s\n", files[items[q].file], it->line, err);
                mcqa_tokens_free(&tk);
                goto out;
            }
            mcqa_tokens_free(&tk);
            if (out && (k = mcqa_log_write(out, it, &r)) != MCQA_OK) {
                fprintf(stderr, "mcqa: %s:%ld: cannot write the log: %s\n", files[items[q].file], it->line,
                        k == MCQA_ERANGE ? "a score is not finite" : strerror(errno));
                goto out;
            }
            for (a = 0; a < nacc; a++)
                if (!strcmp(acc[a].name, it->task)) break;
            if (a == nacc) {
                if (nacc == cacc) {
                    int nc = cacc ? 2 * cacc : 8;
                    task_acc *na = (task_acc *)realloc(acc, (size_t)nc * sizeof *na);
                    if (!na) { fprintf(stderr, "mcqa: out of memory\n"); goto out; }
                    acc = na;
                    cacc = nc;
                }
                memset(&acc[nacc], 0, sizeof acc[nacc]);
                snprintf(acc[nacc].name, sizeof acc[nacc].name, "%s", it->task);
                nacc++;
            }
            acc[a].n++;
            acc[a].right_sum += r.pred_sum == it->gold;
            acc[a].right_mean += r.pred_mean == it->gold;
            acc[a].truncated += r.truncated;
            acc[a].prompt_len += r.n_prompt;
            forwards += r.forwards;
            done++;
            total++;
            if (now_s() - last > every) {
                fprintf(stderr, "%smcqa: %s: %ld items (%.1f items/s)%s", cr, files[items[q].file], done,
                        (double)total / (now_s() - t0), ptty ? "" : "\n");
                last = now_s();
            }
        }
        if (nitems > 0)
            fprintf(stderr, "%smcqa: %s: %ld items%s\n", cr, files[items[nitems - 1].file], done, ptty ? "                              " : "");
    }
    if (out_open) {
        out = NULL;
        out_open = 0;
        if (ex_out_commit(&eo, err, sizeof err)) { fprintf(stderr, "mcqa: %s\n", err); goto out; }
    } else if (out == stdout && (fflush(stdout) != 0 || ferror(stdout))) {
        out = NULL;
        fprintf(stderr, "mcqa: error writing the log to stdout\n");
        goto out;
    }
    out = NULL;
    fprintf(stderr, "mcqa: %ld items, %ld forwards in %.1f s\n", total, forwards, now_s() - t0);
    fprintf(stderr, "%-20s %7s %9s %9s %9s %9s\n", "task", "items", "acc_sum", "acc_mean", "truncated", "prompt");
    for (i = 0; i < nacc; i++)
        fprintf(stderr, "%-20s %7ld %8.2f%% %8.2f%% %9ld %9.1f\n", acc[i].name, acc[i].n,
                100.0 * (double)acc[i].right_sum / (double)acc[i].n, 100.0 * (double)acc[i].right_mean / (double)acc[i].n,
                acc[i].truncated, acc[i].prompt_len / (double)acc[i].n);
    if (json) {
        printf("{\"ckpt\":");
        mcqa_json_write_str(stdout, ckpt_path);
        printf(",\"weights\":\"%s\",\"step\":%lld,\"max_len\":%d,\"tasks\":[", trn_weights_name(used),
               trn_steps_done(t), max_len);
        for (i = 0; i < nacc; i++) {
            printf("%s{\"task\":", i ? "," : "");
            mcqa_json_write_str(stdout, acc[i].name);
            printf(",\"n\":%ld,\"acc_sum\":%.6f,\"acc_mean\":%.6f,\"truncated\":%ld}", acc[i].n,
                   (double)acc[i].right_sum / (double)acc[i].n, (double)acc[i].right_mean / (double)acc[i].n,
                   acc[i].truncated);
        }
        printf("]}\n");
        if (fflush(stdout) != 0 || ferror(stdout)) { fprintf(stderr, "mcqa: error writing the summary to stdout\n"); goto out; }
    }
    rc = 0;
out:
    if (out_open) ex_out_discard(&eo);
    for (q = 0; q < nitems; q++) mcqa_item_free(&items[q].it);
    free(items);
    free(acc);
    trn_destroy(t);
    wt2_tokens_free(&test);
    bpe_free(tok);
    ckpt_close(ck);
    return rc;
}
