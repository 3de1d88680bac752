/* mcqa_compare - paired comparison of two models' per-example logs (seed 003 §4.3).

     build/mcqa_compare A.jsonl B.jsonl --families runs/mcqa/families.txt \
                        --names recipe,baseline --json cmp.json --markdown

   A and B are logs written by build/mcqa for the same task files. Items are paired by
   (task, id); the comparison is refused when an item is missing from one log, given twice,
   or differs between them: its number of choices, its gold answer (each said as such) or
   its prompt hash (the two runs did not score the same tokens). Every log line is
   checked: each sum is a finite log-probability sum (<= 0), each mean is sum / n, the
   predictions and correctness follow from the scores.

   Per task and for both scoring rules (sum: primary; mean: sensitivity): accuracies of A
   and B, Delta = acc_A - acc_B in points, n01 (A right, B wrong), n10 (A wrong, B right),
   odds ratio n01/n10, McNemar chi2 with continuity correction and its chi2(1) p-value, the
   exact binomial p (the one to read when n01 + n10 is small, say < 25), a paired bootstrap
   95% CI of Delta (--bootstrap resamples, seeded by --seed and the task name), and the
   McNemar p-values Holm-adjusted within each family of the --families file ("NAME: task
   task ..." per line; a task in no family is a family of its own). Output: a table on
   stdout, optionally seed 003's Table 1 / Table 2 layout in Markdown (--markdown) and
   everything as JSON (--json PATH; undefined numbers, e.g. the odds ratio of 0 / 0, are
   null). Formulas: examples/common/mcqa.h.

   Pooled over training seeds (issue 45): --pair A2.jsonl B2.jsonl (repeatable, 64 pairs in
   all) adds more pairs of logs of the same two models, e.g. one per training seed, each
   pair scored on the same task files (every pair must hold the same items as the first:
   same (task, id), choices, gold and prompt hash). With S >= 2 pairs the rows are pooled:
   accuracies over all item x pair records; n01 and n10 summed over the pairs, with McNemar
   and the exact p on the sums (the "stacked" test: every item x seed pair counted as one
   observation, which ignores that one item's pairs are correlated and that training seeds
   vary, so it measures evaluation noise only); the CI of Delta from a cluster bootstrap
   that resamples items with all their pairs (mcqa_bootstrap_cluster); and the paired t test
   of the S per-pair Deltas (df S - 1: the training-run variance the seeds sample), Holm-
   adjusted within each family like the McNemar p. With one pair the output is exactly what
   it was before pooling existed.

   Refused: a log or --families file that cannot be read (missing, a directory, no
   permission) or holds nothing (no records, no families); a malformed line (named);
   --bootstrap outside 100..1000000; --seed that is not an integer 0..2^63-1; --alpha
   outside (0, 1); --json naming one of the inputs. The JSON file is written to a
   temporary file and renamed into place only when complete, so a failed run leaves an
   earlier one as it was. Exit status: 0 compared; 1 an input was refused or a write
   failed; 2 a bad flag or value.
   License: MIT. */
#define _POSIX_C_SOURCE 200809L
#include "common/exio.h"
#include "common/mcqa.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STRATA 64 /* --pair pairs (training seeds) */

typedef struct {
    const char *task;
    int family;             /* index into the family list below */
    long n, right_a, right_b, n01, n10, trunc_a, trunc_b;
    double acc_a, acc_b, delta, or_, or_h, chi2, p, p_exact, p_holm, lo, hi;
    /* S >= 2 strata: the per-stratum deltas and the paired t test across them */
    double delta_s[MAX_STRATA], sd, t, p_t, p_t_holm;
} row;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mcqa_compare A.jsonl B.jsonl [--pair A2.jsonl B2.jsonl ...] [options]\n\n"
            "  --pair A B         one more pair of logs of the same two models (e.g. another training\n"
            "                     seed; up to 64 pairs in all): the comparison is pooled over the pairs\n"
            "  --families FILE    task families for Holm-Bonferroni (\"NAME: task task ...\")\n"
            "  --names A,B        labels of the two models (default A,B)\n"
            "  --bootstrap N      bootstrap resamples, 100..1000000 (default 10000)\n"
            "  --seed S           bootstrap seed, an integer 0..2^63-1 (default 1)\n"
            "  --alpha X          significance level for the dagger marks and the CI, in (0, 1) (0.05)\n"
            "  --json PATH        write every number as JSON (not one of the inputs)\n"
            "  --markdown         also print seed 003's Table 1 and Table 2 layout in Markdown\n\n"
            "Exit status: 0 compared; 1 an input was refused (unreadable, empty, malformed, the\n"
            "logs do not pair, the pairs do not hold the same items) or a write failed; 2 a bad\n"
            "flag or value.\n");
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001B3ull;
    }
    return h;
}

static void fmt_or(char *b, size_t n, double v)
{
    if (isnan(v)) snprintf(b, n, "-");
    else if (isinf(v)) snprintf(b, n, "inf");
    else snprintf(b, n, "%.2f", v);
}

static void fmt_p(char *b, size_t n, double p)
{
    if (p < 1e-15) snprintf(b, n, "<1e-15");
    else if (p < 1e-3) snprintf(b, n, "%.1e", p);
    else snprintf(b, n, "%.4f", p);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.17g", v);
    else fputs("null", f);
}

static void fmt_ci(char *b, size_t n, double lo, double hi) { snprintf(b, n, "[%+6.2f, %+6.2f]", 100 * lo, 100 * hi); }

/* Holm within each family, of field p (an offset into row) into field adj. */
static int holm_rows(row *R, int ntask, int nfam, size_t off_p, size_t off_adj, const char *const *famname)
{
    int f, i;
    for (f = 0; f < nfam; f++) {
        double p[256], adj[256];
        int idx[256], m = 0;
        for (i = 0; i < ntask; i++)
            if (R[i].family == f) {
                if (m == 256) { fprintf(stderr, "mcqa_compare: more than 256 tasks in family %s\n", famname[f]); return 1; }
                idx[m] = i;
                p[m++] = *(const double *)((const char *)&R[i] + off_p);
            }
        if (m == 0) continue;
        if (mcqa_holm(p, m, adj) != MCQA_OK) { fprintf(stderr, "mcqa_compare: Holm failed\n"); return 1; }
        for (i = 0; i < m; i++) *(double *)((char *)&R[idx[i]] + off_adj) = adj[i];
    }
    return 0;
}

static void json_paths(FILE *js, const char *const *p, int S)
{
    int s;
    fputc('[', js);
    for (s = 0; s < S; s++) {
        if (s) fputc(',', js);
        mcqa_json_write_str(js, p[s]);
    }
    fputc(']', js);
}

int main(int argc, char **argv)
{
    const char *pa[MAX_STRATA], *pb[MAX_STRATA], *pos[2] = {NULL, NULL}, *xa[MAX_STRATA], *xb[MAX_STRATA];
    const char *fam_path = NULL, *json_path = NULL;
    char name_a[64] = "A", name_b[64] = "B", err[1024];
    int reps = 10000, md = 0, i, rc = 1, rule, ntask = 0, nfam = 0, S = 0, nx = 0, npos = 0, s;
    unsigned long long seed = 1;
    double alpha = 0.05;
    mcqa_record *A[MAX_STRATA], *B[MAX_STRATA];
    long na[MAX_STRATA], nb[MAX_STRATA], *pair[MAX_STRATA], *align[MAX_STRATA], k;
    mcqa_families fams;
    const char **tasks = NULL, **famname = NULL;
    int *taskfam = NULL, *dt = NULL;
    row *rows[2] = {NULL, NULL};
    FILE *js = NULL;
    ex_out jo;
    int jo_open = 0;
    long long seed_ll = 1;

    memset(&fams, 0, sizeof fams);
    for (s = 0; s < MAX_STRATA; s++) {
        A[s] = B[s] = NULL;
        na[s] = nb[s] = 0;
        pair[s] = align[s] = NULL;
    }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--families") && more) fam_path = argv[++i];
        else if (!strcmp(a, "--json") && more) json_path = argv[++i];
        else if (!strcmp(a, "--pair") && i + 2 < argc) {
            if (nx == MAX_STRATA - 1) { fprintf(stderr, "mcqa_compare: more than %d pairs of logs\n", MAX_STRATA); return 2; }
            xa[nx] = argv[++i];
            xb[nx++] = argv[++i];
        } else if (!strcmp(a, "--bootstrap") && more) {
            if (ex_parse_int(argv[++i], 100, 1000000, &reps)) {
                fprintf(stderr, "mcqa_compare: --bootstrap '%s': an integer 100..1000000\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--seed") && more) {
            if (ex_parse_ll(argv[++i], 0, 9223372036854775807LL, &seed_ll)) {
                fprintf(stderr, "mcqa_compare: --seed '%s': an integer 0..2^63-1\n", argv[i]);
                return 2;
            }
            seed = (unsigned long long)seed_ll;
        } else if (!strcmp(a, "--alpha") && more) {
            if (ex_parse_double(argv[++i], 0.0, 1.0, &alpha) || !(alpha > 0.0 && alpha < 1.0)) {
                fprintf(stderr, "mcqa_compare: --alpha '%s': a number strictly between 0 and 1\n", argv[i]);
                return 2;
            }
        }
        else if (!strcmp(a, "--markdown")) md = 1;
        else if (!strcmp(a, "--names") && more) {
            const char *c = strchr(argv[++i], ',');
            if (!c || c == argv[i] || !c[1]) { fprintf(stderr, "mcqa_compare: --names wants A,B\n"); return 2; }
            snprintf(name_a, sizeof name_a, "%.*s", (int)(c - argv[i]), argv[i]);
            snprintf(name_b, sizeof name_b, "%s", c + 1);
        } else if (a[0] == '-' && a[1]) { fprintf(stderr, "mcqa_compare: unknown option or missing value '%s'\n", a); return 2; }
        else if (npos < 2) pos[npos++] = a;
        else { fprintf(stderr, "mcqa_compare: more than two logs given (more pairs: --pair A B)\n"); return 2; }
    }
    if (npos != 2) { usage(stderr); return 2; }
    /* the strata: the positional pair, then the --pair pairs in their order */
    pa[S] = pos[0];
    pb[S++] = pos[1];
    for (i = 0; i < nx; i++) {
        pa[S] = xa[i];
        pb[S++] = xb[i];
    }
    memset(&jo, 0, sizeof jo);
    if (json_path) {
        struct stat st;
        for (s = 0; s < 2 * S + 1; s++) {
            const char *in = s < S ? pa[s] : s < 2 * S ? pb[s - S] : fam_path;
            if (in && (!strcmp(json_path, in) || ex_same_file(json_path, in))) {
                fprintf(stderr, "mcqa_compare: --json %s is the input %s; refusing to overwrite an input\n", json_path, in);
                return 2;
            }
        }
        if (stat(json_path, &st) == 0 && S_ISDIR(st.st_mode)) {
            fprintf(stderr, "mcqa_compare: --json %s is a directory\n", json_path);
            return 2;
        }
    }
    for (s = 0; s < S; s++)
        if (ex_check_input(pa[s], err, sizeof err) || ex_check_input(pb[s], err, sizeof err)) {
            fprintf(stderr, "mcqa_compare: %s\n", err);
            return 1;
        }
    if (fam_path && ex_check_input(fam_path, err, sizeof err)) {
        fprintf(stderr, "mcqa_compare: %s\n", err);
        return 1;
    }
    for (s = 0; s < S; s++) {
        if (mcqa_log_read(pa[s], &A[s], &na[s], err, sizeof err) != MCQA_OK ||
            mcqa_log_read(pb[s], &B[s], &nb[s], err, sizeof err) != MCQA_OK) {
            fprintf(stderr, "mcqa_compare: %s\n", err);
            goto out;
        }
        pair[s] = (long *)malloc((size_t)na[s] * sizeof *pair[s]);
        align[s] = (long *)malloc((size_t)na[0] * sizeof *align[s]);
        if (!pair[s] || !align[s]) { fprintf(stderr, "mcqa_compare: out of memory\n"); goto out; }
        if (mcqa_pair(A[s], na[s], B[s], nb[s], pair[s], err, sizeof err) != MCQA_OK) {
            fprintf(stderr, "mcqa_compare: %s and %s: %s\n", pa[s], pb[s], err);
            goto out;
        }
        /* every pair scores the same items as the first (the pooled statistics pair item i
           of every stratum): the same (task, id), choices, gold and prompt hash */
        if (mcqa_pair(A[0], na[0], A[s], na[s], align[s], err, sizeof err) != MCQA_OK) {
            fprintf(stderr, "mcqa_compare: %s and %s do not hold the same items: %s\n", pa[0], pa[s], err);
            goto out;
        }
    }
    dt = (int *)malloc((size_t)na[0] * sizeof *dt);
    if (!dt) { fprintf(stderr, "mcqa_compare: out of memory\n"); goto out; }
    if (fam_path) {
        /* read whole (a read error is an error, not an empty file), then parsed */
        char *txt = NULL;
        size_t len = 0;
        if (ex_read_file(fam_path, &txt, &len, (size_t)64 << 20, err, sizeof err)) {
            fprintf(stderr, "mcqa_compare: --families: %s\n", err);
            goto out;
        }
        if (mcqa_families_parse(txt, len, &fams, err, sizeof err) != MCQA_OK) {
            free(txt);
            fprintf(stderr, "mcqa_compare: %s: %s\n", fam_path, err);
            goto out;
        }
        free(txt);
        if (fams.n == 0) {
            fprintf(stderr, "mcqa_compare: %s declares no family (\"NAME: task task ...\" lines); give a families file "
                            "that declares them, or no --families\n", fam_path);
            goto out;
        }
    }
    /* the tasks: declared families first (in their order), then the others in log order */
    tasks = (const char **)malloc((size_t)na[0] * sizeof *tasks);
    taskfam = (int *)malloc((size_t)na[0] * sizeof *taskfam);
    famname = (const char **)malloc((size_t)(na[0] + fams.n + 1) * sizeof *famname);
    if (!tasks || !taskfam || !famname) { fprintf(stderr, "mcqa_compare: out of memory\n"); goto out; }
    for (i = 0; i < fams.n; i++) {
        int j;
        famname[nfam++] = fams.name[i];
        for (j = 0; j < fams.n_tasks[i]; j++) {
            for (k = 0; k < na[0]; k++)
                if (!strcmp(A[0][k].task, fams.tasks[i][j])) break;
            if (k == na[0]) {
                fprintf(stderr, "mcqa_compare: family %s declares task %s, which is not in the logs; a family must be "
                                "compared whole (Holm over fewer tasks than declared is not the pre-declared test)\n",
                        fams.name[i], fams.tasks[i][j]);
                goto out;
            }
            tasks[ntask] = fams.tasks[i][j];
            taskfam[ntask++] = i;
        }
    }
    for (k = 0; k < na[0]; k++) {
        int j;
        for (j = 0; j < ntask; j++)
            if (!strcmp(tasks[j], A[0][k].task)) break;
        if (j < ntask) continue;
        tasks[ntask] = A[0][k].task;
        famname[nfam] = A[0][k].task;
        taskfam[ntask++] = nfam++;
    }
    for (rule = 0; rule < 2; rule++) {
        rows[rule] = (row *)calloc((size_t)ntask, sizeof(row));
        if (!rows[rule]) { fprintf(stderr, "mcqa_compare: out of memory\n"); goto out; }
    }
    for (rule = 0; rule < 2; rule++) {
        for (i = 0; i < ntask; i++) {
            row *r = &rows[rule][i];
            long n = 0;
            r->task = tasks[i];
            r->family = taskfam[i];
            for (k = 0; k < na[0]; k++) {
                if (strcmp(A[0][k].task, r->task)) continue;
                dt[n] = 0;
                for (s = 0; s < S; s++) {
                    const mcqa_record *x = &A[s][align[s][k]], *y = &B[s][pair[s][align[s][k]]];
                    int ca = rule ? x->correct_mean : x->correct_sum, cb = rule ? y->correct_mean : y->correct_sum;
                    r->right_a += ca;
                    r->right_b += cb;
                    r->n01 += ca && !cb;
                    r->n10 += !ca && cb;
                    r->trunc_a += x->truncated;
                    r->trunc_b += y->truncated;
                    r->delta_s[s] += ca - cb;
                    dt[n] += ca - cb;
                }
                n++;
            }
            r->n = n;
            r->acc_a = (double)r->right_a / ((double)n * S);
            r->acc_b = (double)r->right_b / ((double)n * S);
            r->delta = r->acc_a - r->acc_b;
            r->or_ = mcqa_odds_ratio(r->n01, r->n10);
            r->or_h = ((double)r->n01 + 0.5) / ((double)r->n10 + 0.5);
            mcqa_mcnemar(r->n01, r->n10, &r->chi2, &r->p);
            r->p_exact = mcqa_binom_exact_p(r->n01, r->n10);
            if (mcqa_bootstrap_cluster(dt, n, S, reps, (uint64_t)seed ^ name_hash(r->task), alpha, &r->lo, &r->hi) !=
                MCQA_OK) {
                fprintf(stderr, "mcqa_compare: bootstrap failed\n");
                goto out;
            }
            for (s = 0; s < S; s++) r->delta_s[s] /= (double)n;
            r->sd = r->t = r->p_t = r->p_t_holm = NAN;
            if (S >= 2) {
                double mean;
                if (mcqa_paired_t(r->delta_s, S, &mean, &r->sd, &r->t, &r->p_t) != MCQA_OK) {
                    fprintf(stderr, "mcqa_compare: paired t test failed\n");
                    goto out;
                }
            }
        }
        if (holm_rows(rows[rule], ntask, nfam, offsetof(row, p), offsetof(row, p_holm), famname) ||
            (S >= 2 && holm_rows(rows[rule], ntask, nfam, offsetof(row, p_t), offsetof(row, p_t_holm), famname)))
            goto out;
    }
    /* table */
    if (S == 1)
        printf("A = %s (%s), B = %s (%s); %ld paired items; bootstrap %d resamples, seed %llu; %.0f%% CI\n", name_a, pa[0],
               name_b, pb[0], na[0], reps, seed, 100.0 * (1.0 - alpha));
    else
        printf("A = %s, B = %s; %d pairs of logs (strata, e.g. training seeds) of %ld paired items each, pooled:\n"
               "accuracies over all item x stratum pairs; n01 / n10 summed over the strata, McNemar and exact p on the\n"
               "sums (stacked: every item x stratum pair counted once); CI: bootstrap of items, each item with all its\n"
               "strata (%d resamples, seed %llu, %.0f%%); sd_s, p_t: the paired t test of the %d per-stratum deltas (df %d),\n"
               "p_t_holm its Holm adjustment within the family\n",
               name_a, name_b, S, na[0], reps, seed, 100.0 * (1.0 - alpha), S, S - 1);
    for (rule = 0; rule < 2; rule++) {
        printf("\n%s rule (%s)\n", rule ? "mean" : "sum", rule ? "length-normalised, sensitivity" : "primary");
        printf("%-10s %-14s %6s %7s %7s %7s %5s %5s %6s %7s %8s %8s %8s %17s", "family", "task", "n", "acc_A", "acc_B",
               "delta", "n01", "n10", "OR", "chi2", "p", "p_exact", "p_holm", "CI(delta)");
        if (S >= 2) printf(" %6s %8s %8s", "sd_s", "p_t", "p_t_holm");
        printf("\n");
        for (i = 0; i < ntask; i++) {
            const row *r = &rows[rule][i];
            char o[16], p1[16], p2[16], p3[16], ci[40];
            fmt_or(o, sizeof o, r->or_);
            fmt_p(p1, sizeof p1, r->p);
            fmt_p(p2, sizeof p2, r->p_exact);
            fmt_p(p3, sizeof p3, r->p_holm);
            fmt_ci(ci, sizeof ci, r->lo, r->hi);
            printf("%-10s %-14s %6ld %6.2f%% %6.2f%% %+7.2f %5ld %5ld %6s %7.3f %8s %8s %8s %s", famname[r->family], r->task,
                   r->n, 100 * r->acc_a, 100 * r->acc_b, 100 * r->delta, r->n01, r->n10, o, r->chi2, p1, p2, p3, ci);
            if (S >= 2) {
                fmt_p(p1, sizeof p1, r->p_t);
                fmt_p(p2, sizeof p2, r->p_t_holm);
                printf(" %6.2f %8s %8s", 100 * r->sd, p1, p2);
            }
            printf("%s\n", r->p_holm < alpha ? " *" : "");
        }
        if (S >= 2) {
            printf("per-stratum delta (pp, pairs in the order given):\n");
            for (i = 0; i < ntask; i++) {
                printf("  %-14s", rows[rule][i].task);
                for (s = 0; s < S; s++) printf(" %+6.2f", 100 * rows[rule][i].delta_s[s]);
                printf("\n");
            }
        }
    }
    if (md) {
        const row *R = rows[0];
        printf("\nTable 1 layout (sum rule): accuracy %%%s\n\n| Task | %s | %s | Δ (pp) |\n| --- | ---: | ---: | ---: |\n",
               S >= 2 ? " (pooled over the pairs)" : "", name_a, name_b);
        for (i = 0; i < ntask; i++)
            printf("| %s%s | %.1f | %.1f | %+.1f |\n", R[i].task, R[i].p_holm < alpha ? " †" : "", 100 * R[i].acc_a,
                   100 * R[i].acc_b, 100 * R[i].delta);
        printf("\nTable 2 layout (sum rule): paired McNemar, Holm within family\n\n"
               "| Task | Δ | OR | p_Holm | n01 / n10 | 95%% CI of Δ | p exact |%s\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |%s\n",
               S >= 2 ? " sd over strata | p_t | p_t Holm |" : "", S >= 2 ? " ---: | ---: | ---: |" : "");
        for (i = 0; i < ntask; i++) {
            char o[16], p3[16], p2[16];
            fmt_or(o, sizeof o, R[i].or_);
            fmt_p(p3, sizeof p3, R[i].p_holm);
            fmt_p(p2, sizeof p2, R[i].p_exact);
            printf("| %s%s | %+.1f | %s | %s | %ld / %ld | [%+.1f, %+.1f] | %s |", R[i].task, R[i].p_holm < alpha ? " †" : "",
                   100 * R[i].delta, o, p3, R[i].n01, R[i].n10, 100 * R[i].lo, 100 * R[i].hi, p2);
            if (S >= 2) {
                fmt_p(p3, sizeof p3, R[i].p_t);
                fmt_p(p2, sizeof p2, R[i].p_t_holm);
                printf(" %.1f | %s | %s |", 100 * R[i].sd, p3, p2);
            }
            printf("\n");
        }
    }
    if (json_path) {
        if (ex_out_open(&jo, json_path, err, sizeof err)) { fprintf(stderr, "mcqa_compare: %s\n", err); goto out; }
        jo_open = 1;
        js = jo.f;
        fprintf(js, "{\"a\":");
        mcqa_json_write_str(js, pa[0]);
        fprintf(js, ",\"b\":");
        mcqa_json_write_str(js, pb[0]);
        if (S >= 2) {
            fprintf(js, ",\"strata\":%d,\"a_strata\":", S);
            json_paths(js, pa, S);
            fprintf(js, ",\"b_strata\":");
            json_paths(js, pb, S);
        }
        fprintf(js, ",\"name_a\":");
        mcqa_json_write_str(js, name_a);
        fprintf(js, ",\"name_b\":");
        mcqa_json_write_str(js, name_b);
        fprintf(js, ",\"items\":%ld,\"bootstrap\":%d,\"seed\":%llu,\"alpha\":", na[0], reps, seed);
        json_num(js, alpha);
        fprintf(js, ",\"rules\":{");
        for (rule = 0; rule < 2; rule++) {
            fprintf(js, "%s\"%s\":[", rule ? "," : "", rule ? "mean" : "sum");
            for (i = 0; i < ntask; i++) {
                const row *r = &rows[rule][i];
                fprintf(js, "%s{\"task\":", i ? "," : "");
                mcqa_json_write_str(js, r->task);
                fprintf(js, ",\"family\":");
                mcqa_json_write_str(js, famname[r->family]);
                fprintf(js, ",\"n\":%ld,\"right_a\":%ld,\"right_b\":%ld,\"n01\":%ld,\"n10\":%ld,\"truncated_a\":%ld,"
                            "\"truncated_b\":%ld,\"acc_a\":", r->n, r->right_a, r->right_b, r->n01, r->n10, r->trunc_a, r->trunc_b);
                json_num(js, r->acc_a);
                fprintf(js, ",\"acc_b\":"); json_num(js, r->acc_b);
                fprintf(js, ",\"delta\":"); json_num(js, r->delta);
                fprintf(js, ",\"odds_ratio\":"); json_num(js, r->or_);
                fprintf(js, ",\"odds_ratio_haldane\":"); json_num(js, r->or_h);
                fprintf(js, ",\"chi2\":"); json_num(js, r->chi2);
                fprintf(js, ",\"p_mcnemar\":"); json_num(js, r->p);
                fprintf(js, ",\"p_exact\":"); json_num(js, r->p_exact);
                fprintf(js, ",\"p_holm\":"); json_num(js, r->p_holm);
                fprintf(js, ",\"ci_lo\":"); json_num(js, r->lo);
                fprintf(js, ",\"ci_hi\":"); json_num(js, r->hi);
                if (S >= 2) {
                    fprintf(js, ",\"delta_strata\":[");
                    for (s = 0; s < S; s++) {
                        if (s) fputc(',', js);
                        json_num(js, r->delta_s[s]);
                    }
                    fprintf(js, "],\"delta_sd\":"); json_num(js, r->sd);
                    fprintf(js, ",\"t\":"); json_num(js, r->t);
                    fprintf(js, ",\"p_t\":"); json_num(js, r->p_t);
                    fprintf(js, ",\"p_t_holm\":"); json_num(js, r->p_t_holm);
                }
                fprintf(js, "}");
            }
            fprintf(js, "]");
        }
        fprintf(js, "}}\n");
        js = NULL;
        jo_open = 0;
        if (ex_out_commit(&jo, err, sizeof err)) { fprintf(stderr, "mcqa_compare: %s\n", err); goto out; }
    }
    rc = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) { fprintf(stderr, "mcqa_compare: error writing to stdout\n"); rc = 1; }
out:
    if (jo_open) ex_out_discard(&jo);
    for (s = 0; s < MAX_STRATA; s++) {
        mcqa_records_free(A[s], na[s]);
        mcqa_records_free(B[s], nb[s]);
        free(pair[s]);
        free(align[s]);
    }
    mcqa_families_free(&fams);
    free(dt);
    free((void *)tasks);
    free(taskfam);
    free((void *)famname);
    free(rows[0]);
    free(rows[1]);
    return rc;
}
