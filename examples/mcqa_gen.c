/* mcqa_gen - build multiple-choice tasks from real text: the WikiText-2 test split.

     build/mcqa_gen                                    # runs/mcqa: 1000 items per task, seed 1
     build/mcqa_gen --cloze 2000 --order 500 --seed 7 --out-dir DIR

   No benchmark suite can be downloaded on the machines this project runs on, so these are
   the project's own tasks (they are not SciQ, ARC, ...; any lm-eval-harness export in the
   format of examples/common/mcqa.h can be scored the same way). Two tasks, one family:

   wt2_cloze  next-word cloze with frequency-matched distractors. Context: the sentence up to
              a word (at least 4 words into it), preceded by the previous sentence of the
              paragraph when the two fit in 60 words. Choices: the true next word and three
              distractors drawn at random among the words of the same capitalisation whose
              frequency rank in the split is closest to it (within +-20 ranks, widened when
              too few), so the unigram frequency of a choice says nothing about the answer.
              Words: ASCII letters only, at least 2 letters, seen at least 3 times.
   wt2_order  sentence order. Context: one sentence of a paragraph. Choices: the next two
              sentences in their order and swapped (4 to 25 words each, different texts).
              Chance is 50%; both choices hold the same words, so the sum rule compares the
              probability of the two orders.

   Items are drawn uniformly at random (seeded) among all eligible positions, written in
   text order, with the gold index drawn at random. The text keeps WikiText-2's spacing
   (" @-@ ", " , ", a leading space), which is what the models were trained on. Output:
   <out-dir>/wt2_cloze.jsonl, <out-dir>/wt2_order.jsonl (one item per line: task, id,
   context, choices, gold, src = "line N of wiki.test.raw") and <out-dir>/families.txt
   ("wt2: wt2_cloze wt2_order") for mcqa_compare. A task asked for with --cloze 0 / --order 0
   is not written (and not listed in families.txt).

   Every output is written to a temporary file and renamed into place when complete (an
   interrupted or failed run leaves the files of an earlier one as they were); an output
   that is the input text is refused. Refused: --seed, --cloze, --order that are not
   integers in range (seed 0..2^63-1, counts 0..100000000); a task asked for that has no
   eligible position in the text (it would be an empty task file). Any paragraph length
   works (positions are (paragraph, sentence / word) pairs, not packed integers).
   Exit status: 0 written; 1 the text could not be read, a task has no eligible position
   or a write failed; 2 a bad flag or value.
   License: MIT. */
#define _POSIX_C_SOURCE 200809L
#include "common/data.h"
#include "common/exio.h"
#include "common/mcqa.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <stb_ds.h>

#ifndef ATTNKIT_DATA_DIR
#define ATTNKIT_DATA_DIR "../shared/data"
#endif

typedef struct { char *key; int value; } word_count;

typedef struct {
    char **w;           /* words of the paragraph (pointers into the text copy) */
    int n;
    int *sent;          /* sentence starts, n_sent + 1 entries (last = n) */
    int n_sent;
    long line;
} paragraph;

static uint64_t g_rng;
static uint64_t rnd(void)
{
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static long rnd_below(long n) { return (long)(rnd() % (uint64_t)n); } /* bias < 2^-40 for our n */

static int is_word(const char *s)
{
    size_t i, n = strlen(s);
    if (n < 2) return 0;
    for (i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))) return 0;
    return 1;
}
static int is_upper(const char *s) { return s[0] >= 'A' && s[0] <= 'Z'; }
static int same_ci(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a, y = *b;
        if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
        if (x != y) return 0;
    }
    return *a == *b;
}

/* words sorted by count (descending), then by text */
static word_count *g_sorted;
static int cmp_rank(const void *x, const void *y)
{
    const word_count *a = (const word_count *)x, *b = (const word_count *)y;
    if (a->value != b->value) return b->value - a->value;
    return strcmp(a->key, b->key);
}
/* a candidate position: paragraph p, word (cloze) or sentence (order) index k */
typedef struct { long p; long k; } cand_t;
static int cmp_cand(const void *x, const void *y)
{
    const cand_t *a = (const cand_t *)x, *b = (const cand_t *)y;
    if (a->p != b->p) return a->p < b->p ? -1 : 1;
    return a->k < b->k ? -1 : a->k > b->k;
}
static int push_cand(cand_t **c, long *n, long *cap, long p, long k)
{
    if (*n == *cap) {
        long nc = *cap ? 2 * *cap : 4096;
        cand_t *nn = (cand_t *)realloc(*c, (size_t)nc * sizeof *nn);
        if (!nn) return -1;
        *c = nn;
        *cap = nc;
    }
    (*c)[*n].p = p;
    (*c)[*n].k = k;
    (*n)++;
    return 0;
}

/* Text of words [a, b) joined by spaces, with a leading space, appended to buf. */
static void join(char *buf, size_t cap, char **w, int a, int b)
{
    size_t k = strlen(buf);
    int i;
    for (i = a; i < b && k + 2 < cap; i++) {
        size_t n = strlen(w[i]);
        if (k + 1 + n + 1 > cap) break;
        buf[k++] = ' ';
        memcpy(buf + k, w[i], n);
        k += n;
        buf[k] = 0;
    }
}

/* Draw k of the n values in idx (partial Fisher-Yates), then sort them. */
static void sample_sorted(cand_t *idx, long n, long k)
{
    long i;
    for (i = 0; i < k; i++) {
        long j = i + rnd_below(n - i);
        cand_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    if (k > 0) qsort(idx, (size_t)k, sizeof *idx, cmp_cand); /* never qsort(NULL, 0) */
}

/* The three outputs, each a temporary file until all are complete. */
enum { OUT_CLOZE, OUT_ORDER, OUT_FAM, N_OUT };

int main(int argc, char **argv)
{
    const char *out_dir = "runs/mcqa", *env; /* outputs under runs/, never beside the binaries in build/ */
    char dir[1024], err[512], path[1200], ctx[8192], ch[4][4200];
    long long n_cloze = 1000, n_order = 1000, seed_ll = 1;
    long i, np = 0, cp = 0;
    unsigned long long seed = 1;
    ex_out outs[N_OUT];
    int opened[N_OUT] = {0, 0, 0}, o;
    unsigned char *text = NULL;
    size_t len = 0, pos;
    wt2_inventory inv;
    word_count *counts = NULL;
    paragraph *par = NULL;
    cand_t *cand = NULL;
    long ncand = 0, ccand = 0, line = 0, p, written;
    int *rank_of = NULL, nvocab, rc = 1;
    FILE *f = NULL;

    memset(outs, 0, sizeof outs);
    dir[0] = 0;
    for (i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: mcqa_gen [--data-dir DIR] [--out-dir DIR] [--seed N] [--cloze N] [--order N]\n"
                   "Builds wt2_cloze and wt2_order multiple-choice tasks from the WikiText-2 test split\n"
                   "(see the top of examples/mcqa_gen.c). Defaults: --out-dir runs/mcqa, seed 1, 1000 items each.\n"
                   "Exit status: 0 written; 1 the text could not be read, a task has no eligible position or a\n"
                   "write failed (earlier files are left as they were); 2 a bad flag or value.\n");
            return 0;
        } else if (!strcmp(argv[i], "--data-dir") && more) snprintf(dir, sizeof dir, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--out-dir") && more) out_dir = argv[++i];
        else if (!strcmp(argv[i], "--seed") && more) {
            if (ex_parse_ll(argv[++i], 0, 9223372036854775807LL, &seed_ll)) {
                fprintf(stderr, "mcqa_gen: --seed '%s': an integer 0..2^63-1\n", argv[i]);
                return 2;
            }
            seed = (unsigned long long)seed_ll;
        } else if ((!strcmp(argv[i], "--cloze") || !strcmp(argv[i], "--order")) && more) {
            long long *dst = argv[i][2] == 'c' ? &n_cloze : &n_order;
            if (ex_parse_ll(argv[i + 1], 0, 100000000LL, dst)) {
                fprintf(stderr, "mcqa_gen: %s '%s': an integer 0..100000000\n", argv[i], argv[i + 1]);
                return 2;
            }
            i++;
        } else { fprintf(stderr, "mcqa_gen: unknown option or missing value '%s' (see --help)\n", argv[i]); return 2; }
    }
    if (n_cloze == 0 && n_order == 0) { fprintf(stderr, "mcqa_gen: --cloze 0 and --order 0: nothing to build\n"); return 2; }
    if (!dir[0]) snprintf(dir, sizeof dir, "%s", (env = getenv("WT2_DIR")) && *env ? env : ATTNKIT_DATA_DIR);
    g_rng = seed * 0x2545F4914F6CDD1Dull + 0x1234567ull;
    if (wt2_scan(dir, &inv) < 0 || !inv.has_raw[WT2_TEST]) {
        fprintf(stderr, "mcqa_gen: no WikiText-2 test split (wiki.test.raw[.xz]) in %s: point --data-dir or WT2_DIR at "
                        "the data; README, section \"Data\", says where to get it\n", dir);
        return 1;
    }
    if (wt2_read_text(inv.raw_path[WT2_TEST], (size_t)64 << 20, &text, &len, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "mcqa_gen: %s\n", err);
        return 1;
    }
    /* paragraphs: non-blank lines that are not " = heading = " lines; words split on ' ' */
    sh_new_arena(counts);
    shdefault(counts, 0);
    for (pos = 0; pos < len;) {
        size_t e = pos;
        char *s;
        paragraph pg;
        while (e < len && text[e] != '\n') e++;
        text[e] = 0;
        line++;
        s = (char *)text + pos;
        pos = e + 1;
        while (*s == ' ') s++;
        if (!*s || (s[0] == '=' && s[1] == ' ')) continue;
        memset(&pg, 0, sizeof pg);
        pg.line = line;
        {
            int cw = 0;
            char *q = s;
            while (*q) {
                while (*q == ' ') *q++ = 0;
                if (!*q) break;
                if (pg.n == cw) {
                    int nc = cw ? 2 * cw : 64;
                    char **nw = (char **)realloc(pg.w, (size_t)nc * sizeof *nw);
                    if (!nw) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto out; }
                    pg.w = nw;
                    cw = nc;
                }
                pg.w[pg.n++] = q;
                while (*q && *q != ' ') q++;
            }
        }
        if (pg.n == 0) { free(pg.w); continue; }
        pg.sent = (int *)malloc((size_t)(pg.n + 1) * sizeof(int));
        if (!pg.sent) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto out; }
        pg.sent[0] = 0;
        {
            int quotes = 0; /* a closing quote right after the full stop stays in the sentence */
            for (i = 0; i < pg.n; i++) {
                const char *w = pg.w[i];
                if (!strcmp(w, "\"")) quotes++;
                if ((!strcmp(w, ".") || !strcmp(w, "?") || !strcmp(w, "!")) && i + 1 < pg.n) {
                    long e = i + 1;
                    if ((quotes & 1) && !strcmp(pg.w[e], "\"") && e + 1 < pg.n) e++;
                    if (e < pg.n) pg.sent[++pg.n_sent] = (int)e;
                    quotes = 0;
                }
            }
        }
        for (i = 0; i < pg.n; i++) {
            const char *w = pg.w[i];
            if (is_word(w)) {
                int cnt = shget(counts, w);
                shput(counts, w, cnt + 1);
            }
        }
        pg.sent[++pg.n_sent] = pg.n;
        if (np == cp) {
            long nc = cp ? 2 * cp : 256;
            paragraph *npar = (paragraph *)realloc(par, (size_t)nc * sizeof *npar);
            if (!npar) { fprintf(stderr, "mcqa_gen: out of memory\n"); free(pg.w); free(pg.sent); goto out; }
            par = npar;
            cp = nc;
        }
        par[np++] = pg;
    }
    /* frequency ranks */
    nvocab = (int)shlen(counts);
    g_sorted = (word_count *)malloc((size_t)(nvocab ? nvocab : 1) * sizeof *g_sorted);
    if (!g_sorted) goto out;
    {
        int k = 0;
        for (i = 0; i < nvocab; i++)
            if (counts[i].value >= 3) g_sorted[k++] = counts[i];
        nvocab = k;
    }
    qsort(g_sorted, (size_t)nvocab, sizeof *g_sorted, cmp_rank);
    rank_of = (int *)malloc((size_t)(shlen(counts) ? shlen(counts) : 1) * sizeof(int));
    if (!rank_of) goto out;
    for (i = 0; i < shlen(counts); i++) rank_of[i] = -1;
    for (i = 0; i < nvocab; i++) rank_of[shgeti(counts, g_sorted[i].key)] = (int)i;
    fprintf(stderr, "mcqa_gen: %s: %ld paragraphs, %d words seen >= 3 times\n", inv.raw_path[WT2_TEST], np, nvocab);
    if (wt2_mkdirs(out_dir) != 0) { fprintf(stderr, "mcqa_gen: cannot create %s\n", out_dir); goto out; }

    /* the outputs never replace the input text */
    {
        static const char *const names[N_OUT] = {"wt2_cloze.jsonl", "wt2_order.jsonl", "families.txt"};
        for (o = 0; o < N_OUT; o++) {
            snprintf(path, sizeof path, "%s/%s", out_dir, names[o]);
            if (ex_same_file(path, inv.raw_path[WT2_TEST]) || !strcmp(path, inv.raw_path[WT2_TEST])) {
                fprintf(stderr, "mcqa_gen: %s is the input text; refusing to overwrite it\n", path);
                goto out;
            }
        }
    }

    /* ---- wt2_cloze: candidates are (paragraph, word) positions */
    for (p = 0; p < np && n_cloze > 0; p++) {
        const paragraph *pg = &par[p];
        int s;
        for (s = 0; s < pg->n_sent; s++) {
            int a = pg->sent[s], b = pg->sent[s + 1], k;
            for (k = a + 4; k < b; k++) {
                long id = shgeti(counts, pg->w[k]);
                if (!is_word(pg->w[k]) || id < 0 || rank_of[id] < 0) continue;
                if (push_cand(&cand, &ncand, &ccand, p, k)) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto out; }
            }
        }
    }
    if (n_cloze > 0 && ncand == 0) {
        fprintf(stderr, "mcqa_gen: %s: no eligible cloze position (a word seen >= 3 times, >= 4 words into its "
                        "sentence); nothing written\n", inv.raw_path[WT2_TEST]);
        goto out;
    }
    if (n_cloze > ncand) n_cloze = ncand;
    sample_sorted(cand, ncand, (long)n_cloze);
    snprintf(path, sizeof path, "%s/wt2_cloze.jsonl", out_dir);
    if (n_cloze > 0) {
        if (ex_out_open(&outs[OUT_CLOZE], path, err, sizeof err)) { fprintf(stderr, "mcqa_gen: %s\n", err); goto out; }
        opened[OUT_CLOZE] = 1;
    }
    f = outs[OUT_CLOZE].f;
    for (i = 0, written = 0; i < n_cloze; i++) {
        const paragraph *pg = &par[cand[i].p];
        int k = (int)cand[i].k, s = 0, a, r, win, got = 0, gold, c, j;
        const char *ans = pg->w[k];
        const char *dis[3];
        while (pg->sent[s + 1] <= k) s++;
        a = pg->sent[s];
        if (s > 0 && k - pg->sent[s - 1] <= 60) a = pg->sent[s - 1];
        ctx[0] = 0;
        join(ctx, sizeof ctx, pg->w, a, k);
        r = rank_of[shgeti(counts, ans)];
        for (win = 20; got < 3 && win <= nvocab; win *= 2) {
            int lo = r - win < 0 ? 0 : r - win, hi = r + win >= nvocab ? nvocab - 1 : r + win, m = 0;
            int pool[4096];
            for (j = lo; j <= hi && m < 4096; j++)
                if (j != r && is_upper(g_sorted[j].key) == is_upper(ans) && !same_ci(g_sorted[j].key, ans)) pool[m++] = j;
            if (m < 3) continue;
            for (j = 0; j < 3; j++) {
                int q = j + (int)rnd_below(m - j), t = pool[j];
                pool[j] = pool[q];
                pool[q] = t;
                dis[j] = g_sorted[pool[j]].key;
            }
            got = 3;
        }
        if (got < 3) continue;
        gold = (int)rnd_below(4);
        for (c = 0, j = 0; c < 4; c++) snprintf(ch[c], sizeof ch[c], " %s", c == gold ? ans : dis[j++]);
        fprintf(f, "{\"task\":\"wt2_cloze\",\"id\":\"wt2_cloze-%05ld\",\"context\":", i);
        mcqa_json_write_str(f, ctx);
        fprintf(f, ",\"choices\":[");
        for (c = 0; c < 4; c++) {
            if (c) fputc(',', f);
            mcqa_json_write_str(f, ch[c]);
        }
        fprintf(f, "],\"gold\":%d,\"src\":\"line %ld of wiki.test.raw\"}\n", gold, pg->line);
        written++;
    }
    f = NULL;
    if (n_cloze > 0 && written == 0) {
        fprintf(stderr, "mcqa_gen: %s: no cloze item could be built (too few distractor words); nothing written\n",
                inv.raw_path[WT2_TEST]);
        goto out;
    }
    if (n_cloze > 0) fprintf(stderr, "mcqa_gen: %s: %ld items (from %ld eligible positions)\n", path, written, ncand);

    /* ---- wt2_order: candidates are (paragraph, sentence s >= 1) with s, s+1 usable */
    ncand = 0;
    for (p = 0; p < np && n_order > 0; p++) {
        const paragraph *pg = &par[p];
        int s;
        for (s = 1; s + 1 < pg->n_sent; s++) {
            int l0 = pg->sent[s] - pg->sent[s - 1], l1 = pg->sent[s + 1] - pg->sent[s], l2 = pg->sent[s + 2] - pg->sent[s + 1];
            char b1[2048], b2[2048];
            if (l0 < 4 || l0 > 40 || l1 < 4 || l1 > 25 || l2 < 4 || l2 > 25) continue;
            b1[0] = b2[0] = 0;
            join(b1, sizeof b1, pg->w, pg->sent[s], pg->sent[s + 1]);
            join(b2, sizeof b2, pg->w, pg->sent[s + 1], pg->sent[s + 2]);
            if (!strcmp(b1, b2)) continue;
            if (push_cand(&cand, &ncand, &ccand, p, s)) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto out; }
        }
    }
    if (n_order > 0 && ncand == 0) {
        fprintf(stderr, "mcqa_gen: %s: no eligible sentence triple (4..40, 4..25 and 4..25 words) for wt2_order; "
                        "nothing written\n", inv.raw_path[WT2_TEST]);
        goto out;
    }
    if (n_order > ncand) n_order = ncand;
    sample_sorted(cand, ncand, (long)n_order);
    snprintf(path, sizeof path, "%s/wt2_order.jsonl", out_dir);
    if (n_order > 0) {
        if (ex_out_open(&outs[OUT_ORDER], path, err, sizeof err)) { fprintf(stderr, "mcqa_gen: %s\n", err); goto out; }
        opened[OUT_ORDER] = 1;
    }
    f = outs[OUT_ORDER].f;
    for (i = 0; i < n_order; i++) {
        const paragraph *pg = &par[cand[i].p];
        int s = (int)cand[i].k, gold = (int)rnd_below(2);
        char b1[2048], b2[2048];
        ctx[0] = b1[0] = b2[0] = 0;
        join(ctx, sizeof ctx, pg->w, pg->sent[s - 1], pg->sent[s]);
        join(b1, sizeof b1, pg->w, pg->sent[s], pg->sent[s + 1]);
        join(b2, sizeof b2, pg->w, pg->sent[s + 1], pg->sent[s + 2]);
        snprintf(ch[gold], sizeof ch[gold], "%s%s", b1, b2);
        snprintf(ch[1 - gold], sizeof ch[1 - gold], "%s%s", b2, b1);
        fprintf(f, "{\"task\":\"wt2_order\",\"id\":\"wt2_order-%05ld\",\"context\":", i);
        mcqa_json_write_str(f, ctx);
        fprintf(f, ",\"choices\":[");
        mcqa_json_write_str(f, ch[0]);
        fputc(',', f);
        mcqa_json_write_str(f, ch[1]);
        fprintf(f, "],\"gold\":%d,\"src\":\"line %ld of wiki.test.raw\"}\n", gold, pg->line);
    }
    f = NULL;
    if (n_order > 0) fprintf(stderr, "mcqa_gen: %s: %lld items (from %ld eligible sentence pairs)\n", path, n_order, ncand);

    snprintf(path, sizeof path, "%s/families.txt", out_dir);
    if (ex_out_open(&outs[OUT_FAM], path, err, sizeof err)) { fprintf(stderr, "mcqa_gen: %s\n", err); goto out; }
    opened[OUT_FAM] = 1;
    fprintf(outs[OUT_FAM].f, "# task families for mcqa_compare (Holm-Bonferroni within each line)\nwt2:%s%s\n",
            n_cloze > 0 ? " wt2_cloze" : "", n_order > 0 ? " wt2_order" : "");
    /* every file complete: rename them into place */
    for (o = 0; o < N_OUT; o++) {
        if (!opened[o]) continue;
        opened[o] = 0;
        if (ex_out_commit(&outs[o], err, sizeof err)) { fprintf(stderr, "mcqa_gen: %s\n", err); goto out; }
    }
    rc = 0;
out:
    for (o = 0; o < N_OUT; o++)
        if (opened[o]) ex_out_discard(&outs[o]);
    for (p = 0; p < np; p++) {
        free(par[p].w);
        free(par[p].sent);
    }
    free(par);
    free(cand);
    free(rank_of);
    free(g_sorted);
    shfree(counts);
    free(text);
    return rc;
}
