/* mcqa_gen - build multiple-choice tasks from real text: the WikiText-2 test split.

     build/mcqa_gen                                    # runs/mcqa: 1000 items per task, seed 1
     build/mcqa_gen --cloze 2000 --order 500 --seed 7 --out-dir DIR
     build/mcqa_gen --entity 0 --next 0 --number 0 --heading 0   # wt2_cloze, wt2_order only

   No benchmark suite can be downloaded on the machines this project runs on, so these are
   the project's own tasks (they are not SciQ, ARC, ...; any lm-eval-harness export in the
   format of examples/common/mcqa.h can be scored the same way). Six tasks in two families:

   family wt2 (the first two; their items are unchanged since they were first generated)
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
   family wt2s (structured QA in the spirit of seed 003 section 4: facts, discourse and
   document structure; 4 choices each, chance 25%)
   wt2_entity entity cloze. A name is a maximal run of 2..4 capitalised words (ASCII
              letters, >= 2 each) that does not start its sentence (the word before it is not
              capitalised, so sentence-initial capitals never count), seen at least twice in
              the split. Context: as wt2_cloze, the sentence up to the name (at least 4 words
              into it) plus the previous sentence when both fit in 60 words. Choices: the name
              and three other names of as many words, sharing no word with it (ignoring
              case), drawn at random among the nearest in frequency rank within names of that
              length (+-20 ranks, widened when too few).
   wt2_next   next-sentence choice. Context: a sentence of 4..40 words (plus the previous one
              when both fit in 60 words). Choices: the true next sentence (4..25 words) and
              three sentences drawn at random from paragraphs of OTHER articles, with exactly
              its number of words (widened by +-1 word at a time when fewer than 3 distinct
              texts exist), so the sum rule is not decided by length.
   wt2_number number / date consistency. A whole number of 1..4 digits (no leading zero, not
              glued to "@,@", "@.@" or "@-@": "1 @,@ 000", "3 @.@ 5" and "1990 @-@ 91" never
              count) in a sentence of 4..40 words that has a previous sentence of <= 60 words.
              Context: the previous sentences of the paragraph, whole, back to 60 words.
              Choices: the sentence as written and with the number replaced by three distinct
              wrong values drawn uniformly from: a year (4 digits, 1000..2099) +-10 (kept >=
              1000); one digit: the other digits 0..9; otherwise the numbers of as many digits
              in [ceil(v/2), 2v]. The choices differ only in that number.
   wt2_heading heading -> paragraph matching. A section heading (" = = X = = " or deeper;
              article titles " = X = " are not used: their first sentence restates them)
              followed, after blank lines, by a paragraph whose first sentence has 4..40
              words. Context: the heading line and the blank lines after it, byte for byte
              (" = = X = = \n \n", what the models were trained on). Choices: that first
              sentence and the first sentences of three other such sections of the SAME
              article (so topic alone does not tell them apart), those nearest in length
              (ties in random order). Eligible: sections whose article has >= 3 others with a
              different first sentence; the split has 438, all used by default.

   Items are drawn uniformly at random (seeded) among all eligible positions, written in
   text order, with the gold index drawn at random. The wt2s tasks each draw from their own
   stream (the seed and the task), after wt2_cloze and wt2_order: adding them changed no
   byte of those two, and one task's count never changes another's items. With the
   defaults (--seed 1, 1000 each) the files hold 1000 items each, except wt2_heading: 438
   (every eligible section). The text keeps WikiText-2's spacing
   (" @-@ ", " , ", a leading space), which is what the models were trained on. Output:
   <out-dir>/<task>.jsonl for the six tasks (one item per line: task, id, context, choices,
   gold, src = "line N of wiki.test.raw", N the line of the answer's paragraph) and
   <out-dir>/families.txt for mcqa_compare, one line per family ("wt2: wt2_cloze
   wt2_order", "wt2s: wt2_entity wt2_next wt2_number wt2_heading"; Holm within each). A task
   asked for with a count of 0 (--cloze 0, --entity 0, ...) is not written and not listed
   in families.txt (a family with no task is not listed). mcqa_compare refuses a family
   whose tasks are not all in the logs: score every listed task file, or generate only
   the tasks you score.

   Every output is written to a temporary file and renamed into place when complete (an
   interrupted or failed run leaves the files of an earlier one as they were); an output
   that is the input text is refused. Refused: --seed and the counts (--cloze, --order,
   --entity, --next, --number, --heading) that are not integers in range (seed
   0..2^63-1, counts 0..100000000), every count 0; a task asked for that has no
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
    int art;            /* article index (count of " = Title = " lines before it, minus 1) */
    int head;           /* index into g_heads of the section heading right above it, or -1 */
    size_t off;         /* byte offset of its line in the text */
} paragraph;

/* A section heading (" = = X = = " or deeper) directly followed (blank lines aside) by a
   paragraph: the heading->paragraph task's unit. */
typedef struct {
    size_t off;         /* byte offset of the heading line */
    long para;          /* index of the paragraph that follows */
    int art;
} heading;
static heading *g_heads;
static long g_nheads;

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

/* ------------------------------------------------------------------ the wt2s family */
/* Each task of the second family draws from its own random stream (the seed and the task's
   number), so wt2_cloze / wt2_order (drawn first, from the seed's own stream) are exactly
   what they were before these tasks existed, and one task's count never moves another's
   items. */
static void seed_stream(unsigned long long seed, int task)
{
    g_rng = (seed * 0x2545F4914F6CDD1Dull + 0x1234567ull) ^ (0xD1B54A32D192ED03ull * (uint64_t)(task + 1));
}

static int is_cap_word(const char *w) { return is_word(w) && is_upper(w); }
static int sent_of(const paragraph *pg, int k)
{
    int s = 0;
    while (pg->sent[s + 1] <= k) s++;
    return s;
}
/* words of a and b (space-separated) share one, ignoring case */
static int share_word(const char *a, const char *b)
{
    char x[512], y[512], *p, *q, *sp, *sq;
    snprintf(x, sizeof x, "%s", a);
    for (p = x; p && *p; p = sp) {
        sp = strchr(p, ' ');
        if (sp) *sp++ = 0;
        snprintf(y, sizeof y, "%s", b);
        for (q = y; q && *q; q = sq) {
            sq = strchr(q, ' ');
            if (sq) *sq++ = 0;
            if (same_ci(p, q)) return 1;
        }
    }
    return 0;
}
/* context of a position k in sentence s: the sentence up to k, preceded by the previous
   sentence of the paragraph when the two fit in 60 words */
static void ctx_upto(char *ctx, size_t cap, const paragraph *pg, int s, int k)
{
    int a = pg->sent[s];
    if (s > 0 && k - pg->sent[s - 1] <= 60) a = pg->sent[s - 1];
    ctx[0] = 0;
    join(ctx, cap, pg->w, a, k);
}
static void put_item(FILE *f, const char *task, long id, const char *ctx, char ch[][4200], int nch, int gold,
                     long line)
{
    int c;
    fprintf(f, "{\"task\":\"%s\",\"id\":\"%s-%05ld\",\"context\":", task, task, id);
    mcqa_json_write_str(f, ctx);
    fprintf(f, ",\"choices\":[");
    for (c = 0; c < nch; c++) {
        if (c) fputc(',', f);
        mcqa_json_write_str(f, ch[c]);
    }
    fprintf(f, "],\"gold\":%d,\"src\":\"line %ld of wiki.test.raw\"}\n", gold, line);
}
/* gold answer text at a random index among 4, the 3 others in order */
static int place4(char ch[][4200], const char *gold_text, const char *const *dis)
{
    int gold = (int)rnd_below(4), c, j;
    for (c = 0, j = 0; c < 4; c++) snprintf(ch[c], sizeof ch[c], "%s", c == gold ? gold_text : dis[j++]);
    return gold;
}

/* wt2_entity: a capitalised name of 2..4 words masked; distractors are names of as many
   words, frequency-matched, sharing no word with it */
typedef struct { const char *key; int count; } name_ref;
static int cmp_name(const void *x, const void *y)
{
    const name_ref *a = (const name_ref *)x, *b = (const name_ref *)y;
    if (a->count != b->count) return b->count - a->count;
    return strcmp(a->key, b->key);
}
/* the name run starting at k of sentence [a, b): its length (0 when k does not start one) */
static int name_run(const paragraph *pg, int a, int b, int k)
{
    int e = k;
    if (k <= a || !is_cap_word(pg->w[k]) || is_cap_word(pg->w[k - 1])) return 0;
    while (e < b && is_cap_word(pg->w[e])) e++;
    return e - k;
}
static long gen_entity(const paragraph *par, long np, long n, FILE *f, long *nc)
{
    word_count *names = NULL;
    name_ref *cls[5] = {NULL, NULL, NULL, NULL, NULL};
    int ncls[5] = {0, 0, 0, 0, 0}, *rank = NULL;
    cand_t *cand = NULL;
    long ncand = 0, ccand = 0, p, i, written = -1;
    char key[512], ctx[8192], ch[4][4200];

    sh_new_arena(names);
    shdefault(names, 0);
    for (p = 0; p < np; p++) {
        const paragraph *pg = &par[p];
        int s, k, L;
        for (s = 0; s < pg->n_sent; s++)
            for (k = pg->sent[s] + 1; k < pg->sent[s + 1]; k++)
                if ((L = name_run(pg, pg->sent[s], pg->sent[s + 1], k)) >= 2 && L <= 4) {
                    key[0] = 0;
                    join(key, sizeof key, pg->w, k, k + L);
                    {
                        int cnt = shget(names, key + 1); /* read first: shput inserts before it evaluates the value */
                        shput(names, key + 1, cnt + 1);
                    }
                }
    }
    rank = (int *)malloc((size_t)(shlen(names) + 1) * sizeof *rank);
    for (i = 2; i <= 4; i++) cls[i] = (name_ref *)malloc((size_t)(shlen(names) + 1) * sizeof *cls[i]);
    if (!rank || !cls[2] || !cls[3] || !cls[4]) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto done; }
    for (i = 0; i < shlen(names); i++) {
        int L = 1;
        const char *q;
        rank[i] = -1;
        for (q = names[i].key; *q; q++) L += *q == ' ';
        if (names[i].value >= 2) {
            cls[L][ncls[L]].key = names[i].key;
            cls[L][ncls[L]++].count = names[i].value;
        }
    }
    for (i = 2; i <= 4; i++) {
        int j;
        if (ncls[i]) qsort(cls[i], (size_t)ncls[i], sizeof *cls[i], cmp_name);
        for (j = 0; j < ncls[i]; j++) rank[shgeti(names, cls[i][j].key)] = j;
    }
    for (p = 0; p < np; p++) {
        const paragraph *pg = &par[p];
        int s, k, L;
        for (s = 0; s < pg->n_sent; s++)
            for (k = pg->sent[s] + 4; k < pg->sent[s + 1]; k++)
                if ((L = name_run(pg, pg->sent[s], pg->sent[s + 1], k)) >= 2 && L <= 4) {
                    key[0] = 0;
                    join(key, sizeof key, pg->w, k, k + L);
                    if (shget(names, key + 1) < 2) continue;
                    if (push_cand(&cand, &ncand, &ccand, p, k)) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto done; }
                }
    }
    *nc = ncand;
    if (ncand == 0) {
        fprintf(stderr, "mcqa_gen: no eligible wt2_entity position (a name of 2..4 capitalised words seen twice, "
                        "not starting its sentence, >= 4 words into it); nothing written\n");
        goto done;
    }
    if (n > ncand) n = ncand;
    sample_sorted(cand, ncand, n);
    written = 0;
    for (i = 0; i < n && f; i++) {
        const paragraph *pg = &par[cand[i].p];
        int k = (int)cand[i].k, s = sent_of(pg, k), L = name_run(pg, pg->sent[s], pg->sent[s + 1], k), r, win, got = 0, j;
        const char *dis[3];
        key[0] = 0;
        join(key, sizeof key, pg->w, k, k + L);
        r = rank[shgeti(names, key + 1)];
        for (win = 20; got < 3 && win <= 2 * ncls[L]; win *= 2) {
            int lo = r - win < 0 ? 0 : r - win, hi = r + win >= ncls[L] ? ncls[L] - 1 : r + win, m = 0;
            int pool[4096];
            for (j = lo; j <= hi && m < 4096; j++)
                if (j != r && !share_word(cls[L][j].key, key + 1)) pool[m++] = j;
            if (m < 3) continue;
            for (j = 0; j < 3; j++) {
                int q = j + (int)rnd_below(m - j), t = pool[j];
                pool[j] = pool[q];
                pool[q] = t;
                dis[j] = cls[L][pool[j]].key;
            }
            got = 3;
        }
        if (got < 3) continue;
        {
            char d3[3][520];
            const char *dp[3];
            int gold;
            for (j = 0; j < 3; j++) { snprintf(d3[j], sizeof d3[j], " %s", dis[j]); dp[j] = d3[j]; }
            ctx_upto(ctx, sizeof ctx, pg, s, k);
            gold = place4(ch, key, dp);
            put_item(f, "wt2_entity", written++, ctx, ch, 4, gold, pg->line);
        }
    }
done:
    for (i = 2; i <= 4; i++) free(cls[i]);
    free(rank);
    free(cand);
    shfree(names);
    return written;
}

/* wt2_next: the true next sentence against three of the same length from other articles */
static long gen_next(const paragraph *par, long np, long n, FILE *f, long *nc)
{
    cand_t *cand = NULL, *all = NULL, *pool = NULL;
    long ncand = 0, ccand = 0, nall = 0, call = 0, p, i, written = -1;
    char ctx[8192], ch[4][4200], b[4][2048];

    for (p = 0; p < np; p++) {
        const paragraph *pg = &par[p];
        int s;
        for (s = 0; s < pg->n_sent; s++) {
            int l = pg->sent[s + 1] - pg->sent[s];
            if (l >= 4 && l <= 25 && push_cand(&all, &nall, &call, p, s)) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto done; }
            if (s + 1 < pg->n_sent && l >= 4 && l <= 40) {
                int l1 = pg->sent[s + 2] - pg->sent[s + 1];
                if (l1 >= 4 && l1 <= 25 && push_cand(&cand, &ncand, &ccand, p, s)) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto done; }
            }
        }
    }
    *nc = ncand;
    if (ncand == 0) {
        fprintf(stderr, "mcqa_gen: no eligible wt2_next sentence pair (4..40 then 4..25 words); nothing written\n");
        goto done;
    }
    pool = (cand_t *)malloc((size_t)(nall + 1) * sizeof *pool);
    if (!pool) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto done; }
    if (n > ncand) n = ncand;
    sample_sorted(cand, ncand, n);
    written = 0;
    for (i = 0; i < n && f; i++) {
        const paragraph *pg = &par[cand[i].p];
        int s = (int)cand[i].k, L = pg->sent[s + 2] - pg->sent[s + 1], w, got = 0, j;
        const char *dp[3];
        b[0][0] = 0;
        join(b[0], sizeof b[0], pg->w, pg->sent[s + 1], pg->sent[s + 2]);
        for (w = 0; got < 3 && w <= 21; w++) {
            long m = 0, t;
            for (j = 0; j < nall; j++) {
                const paragraph *q = &par[all[j].p];
                int l = q->sent[all[j].k + 1] - q->sent[all[j].k];
                if (q->art != pg->art && l >= L - w && l <= L + w) pool[m++] = all[j];
            }
            got = 0;
            for (t = 0; t < m && got < 3; t++) { /* partial Fisher-Yates; a repeated text is passed over */
                long u = t + rnd_below(m - t);
                cand_t tmp = pool[t];
                const paragraph *q;
                int dup = 0, e;
                pool[t] = pool[u];
                pool[u] = tmp;
                q = &par[pool[t].p];
                b[got + 1][0] = 0;
                join(b[got + 1], sizeof b[got + 1], q->w, q->sent[pool[t].k], q->sent[pool[t].k + 1]);
                for (e = 0; e <= got; e++) dup |= !strcmp(b[e], b[got + 1]);
                if (!dup) got++;
            }
        }
        if (got < 3) continue;
        for (j = 0; j < 3; j++) dp[j] = b[j + 1];
        ctx_upto(ctx, sizeof ctx, pg, s, pg->sent[s + 1]);
        j = place4(ch, b[0], dp);
        put_item(f, "wt2_next", written++, ctx, ch, 4, j, pg->line);
    }
done:
    free(pool);
    free(all);
    free(cand);
    return written;
}

/* wt2_number: a whole number in a sentence against the same sentence with wrong ones */
static int number_ok(const paragraph *pg, int k)
{
    const char *w = pg->w[k];
    size_t l = strlen(w), j;
    static const char *const glue[3] = {"@,@", "@.@", "@-@"};
    if (l < 1 || l > 4 || (l > 1 && w[0] == '0')) return 0;
    for (j = 0; j < l; j++)
        if (w[j] < '0' || w[j] > '9') return 0;
    for (j = 0; j < 3; j++)
        if ((k > 0 && !strcmp(pg->w[k - 1], glue[j])) || (k + 1 < pg->n && !strcmp(pg->w[k + 1], glue[j]))) return 0;
    return 1;
}
static long gen_number(const paragraph *par, long np, long n, FILE *f, long *nc)
{
    cand_t *cand = NULL;
    long ncand = 0, ccand = 0, p, i, written = -1;
    char ctx[8192], ch[4][4200], num[16];

    for (p = 0; p < np; p++) {
        const paragraph *pg = &par[p];
        int s, k;
        for (s = 1; s < pg->n_sent; s++) {
            int l = pg->sent[s + 1] - pg->sent[s];
            if (l < 4 || l > 40 || pg->sent[s] - pg->sent[s - 1] > 60) continue;
            for (k = pg->sent[s]; k < pg->sent[s + 1]; k++)
                if (number_ok(pg, k) && push_cand(&cand, &ncand, &ccand, p, k)) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto done; }
        }
    }
    *nc = ncand;
    if (ncand == 0) {
        fprintf(stderr, "mcqa_gen: no eligible wt2_number position (a whole number of 1..4 digits in a sentence of "
                        "4..40 words after one of <= 60); nothing written\n");
        goto done;
    }
    if (n > ncand) n = ncand;
    sample_sorted(cand, ncand, n);
    written = 0;
    for (i = 0; i < n && f; i++) {
        const paragraph *pg = &par[cand[i].p];
        int k = (int)cand[i].k, s = sent_of(pg, k), a = pg->sent[s - 1], c, j, gold;
        long v = atol(pg->w[k]), lo, hi, wrong[3] = {0, 0, 0};
        size_t nd = strlen(pg->w[k]);
        if (nd == 4 && v >= 1000 && v <= 2099) { lo = v - 10 < 1000 ? 1000 : v - 10; hi = v + 10; } /* a year */
        else if (nd == 1) { lo = 0; hi = 9; }
        else {
            long p10 = nd == 2 ? 10 : nd == 3 ? 100 : 1000;
            lo = (v + 1) / 2 < p10 ? p10 : (v + 1) / 2;
            hi = 2 * v > 10 * p10 - 1 ? 10 * p10 - 1 : 2 * v;
        }
        for (j = 0; j < 3;) { /* 3 distinct values of [lo, hi] other than v (the range holds >= 10) */
            long x = lo + rnd_below(hi - lo + 1);
            int dup = x == v;
            for (c = 0; c < j; c++) dup |= x == wrong[c];
            if (!dup) wrong[j++] = x;
        }
        /* context: the sentences before s in the paragraph, back to 60 words */
        while (a > 0) {
            int s0 = sent_of(pg, a - 1);
            if (pg->sent[s] - pg->sent[s0] > 60) break;
            a = pg->sent[s0];
        }
        ctx[0] = 0;
        join(ctx, sizeof ctx, pg->w, a, pg->sent[s]);
        gold = (int)rnd_below(4);
        for (c = 0, j = 0; c < 4; c++) {
            ch[c][0] = 0;
            join(ch[c], sizeof ch[c], pg->w, pg->sent[s], k);
            if (c == gold) snprintf(num, sizeof num, " %s", pg->w[k]);
            else snprintf(num, sizeof num, " %ld", wrong[j++]);
            if (strlen(ch[c]) + strlen(num) < sizeof ch[c]) strcat(ch[c], num);
            join(ch[c], sizeof ch[c], pg->w, k + 1, pg->sent[s + 1]);
        }
        put_item(f, "wt2_number", written++, ctx, ch, 4, gold, pg->line);
    }
done:
    free(cand);
    return written;
}

/* wt2_heading: a section heading, then which of four first sentences (of sections of the
   same article) follows it */
static int heading_ok(const paragraph *par, long h)
{
    const paragraph *pg = &par[g_heads[h].para];
    int l = pg->sent[1] - pg->sent[0];
    return l >= 4 && l <= 40;
}
static void first_sentence(char *buf, size_t cap, const paragraph *par, long h)
{
    const paragraph *pg = &par[g_heads[h].para];
    buf[0] = 0;
    join(buf, cap, pg->w, 0, pg->sent[1]);
}
static long gen_heading(const paragraph *par, const unsigned char *text, long n, FILE *f, long *nc)
{
    cand_t *cand = NULL;
    long ncand = 0, ccand = 0, h, i, written = -1, *ord = NULL, *alo = NULL, *ahi = NULL;
    unsigned long long *key = NULL;
    char ctx[8192], ch[4][4200], b[2048];

    ord = (long *)malloc((size_t)(g_nheads + 1) * sizeof *ord);
    key = (unsigned long long *)malloc((size_t)(g_nheads + 1) * sizeof *key);
    alo = (long *)malloc((size_t)(g_nheads + 1) * sizeof *alo);
    ahi = (long *)malloc((size_t)(g_nheads + 1) * sizeof *ahi);
    if (!ord || !key || !alo || !ahi) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto done; }
    for (h = 0; h < g_nheads;) { /* the headings of an article are consecutive: [alo, ahi) */
        long e = h, o;
        while (e < g_nheads && g_heads[e].art == g_heads[h].art) e++;
        for (o = h; o < e; o++) { alo[o] = h; ahi[o] = e; }
        h = e;
    }
    for (h = 0; h < g_nheads; h++) {
        long o, others = 0;
        char g[2048];
        if (!heading_ok(par, h)) continue;
        first_sentence(g, sizeof g, par, h);
        for (o = alo[h]; o < ahi[h] && others < 3; o++)
            if (o != h && heading_ok(par, o)) {
                first_sentence(b, sizeof b, par, o);
                others += strcmp(b, g) != 0;
            }
        if (others >= 3 && push_cand(&cand, &ncand, &ccand, h, 0)) { fprintf(stderr, "mcqa_gen: out of memory\n"); goto done; }
    }
    *nc = ncand;
    if (ncand == 0) {
        fprintf(stderr, "mcqa_gen: no eligible wt2_heading section (a \" = = heading = = \" line followed by a "
                        "paragraph whose first sentence has 4..40 words, in an article with 3 more); nothing written\n");
        goto done;
    }
    if (n > ncand) n = ncand;
    sample_sorted(cand, ncand, n);
    written = 0;
    for (i = 0; i < n && f; i++) {
        long hh = cand[i].p, m = 0, o, j;
        const paragraph *pg = &par[g_heads[hh].para];
        int L = pg->sent[1], got = 0, gold, c;
        size_t q, e = 0;
        /* the others of the article, nearest first sentence length first, ties in random order */
        for (o = alo[hh]; o < ahi[hh]; o++)
            if (o != hh && heading_ok(par, o)) {
                int l = par[g_heads[o].para].sent[1];
                ord[m] = o;
                key[m++] = ((unsigned long long)(l > L ? l - L : L - l) << 32) | (rnd() >> 32);
            }
        first_sentence(ch[0], sizeof ch[0], par, hh);
        for (j = 0; j < m && got < 3; j++) { /* the next smallest key (selection: a few passes) */
            long best = j, t;
            unsigned long long tk;
            int dup = 0;
            for (o = j + 1; o < m; o++)
                if (key[o] < key[best]) best = o;
            t = ord[j]; ord[j] = ord[best]; ord[best] = t;
            tk = key[j]; key[j] = key[best]; key[best] = tk;
            first_sentence(ch[got + 1], sizeof ch[got + 1], par, ord[j]);
            for (c = 0; c <= got; c++) dup |= !strcmp(ch[c], ch[got + 1]);
            if (!dup) got++;
        }
        if (got < 3) continue;
        /* context: the heading line and the blank lines after it, byte for byte */
        for (q = g_heads[hh].off; q < pg->off && e + 1 < sizeof ctx; q++) ctx[e++] = text[q] ? (char)text[q] : '\n';
        ctx[e] = 0;
        gold = (int)rnd_below(4);
        if (gold) {
            char t[4200];
            memcpy(t, ch[0], sizeof t);
            memcpy(ch[0], ch[gold], sizeof t);
            memcpy(ch[gold], t, sizeof t);
        }
        put_item(f, "wt2_heading", written++, ctx, ch, 4, gold, pg->line);
    }
done:
    free(ahi);
    free(alo);
    free(key);
    free(ord);
    free(cand);
    return written;
}

/* The outputs, each a temporary file until all are complete. */
enum { OUT_CLOZE, OUT_ORDER, OUT_ENTITY, OUT_NEXT, OUT_NUMBER, OUT_HEADING, OUT_FAM, N_OUT };

int main(int argc, char **argv)
{
    const char *out_dir = "runs/mcqa", *env; /* outputs under runs/, never beside the binaries in build/ */
    char dir[1024], err[512], path[1200], ctx[8192], ch[4][4200];
    long long n_cloze = 1000, n_order = 1000, n_new[4] = {1000, 1000, 1000, 1000}, seed_ll = 1;
    long i, np = 0, cp = 0;
    unsigned long long seed = 1;
    ex_out outs[N_OUT];
    int opened[N_OUT] = {0, 0, 0, 0, 0, 0, 0}, o;
    unsigned char *text = NULL;
    size_t len = 0, pos;
    wt2_inventory inv;
    word_count *counts = NULL;
    paragraph *par = NULL;
    cand_t *cand = NULL;
    long ncand = 0, ccand = 0, line = 0, p, written;
    int *rank_of = NULL, nvocab, rc = 1, art = -1;
    long pend = -1;
    size_t loff;
    FILE *f = NULL;

    memset(outs, 0, sizeof outs);
    dir[0] = 0;
    for (i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: mcqa_gen [--data-dir DIR] [--out-dir DIR] [--seed N] [--cloze N] [--order N]\n"
                   "                [--entity N] [--next N] [--number N] [--heading N]\n"
                   "Builds multiple-choice tasks from the WikiText-2 test split: family wt2 (wt2_cloze, wt2_order)\n"
                   "and family wt2s (wt2_entity, wt2_next, wt2_number, wt2_heading); a count of 0 skips a task\n"
                   "(see the top of examples/mcqa_gen.c). Defaults: --out-dir runs/mcqa, seed 1, 1000 items each\n"
                   "(at most the eligible positions: wt2_heading has 438).\n"
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
        } else if ((!strcmp(argv[i], "--entity") || !strcmp(argv[i], "--next") || !strcmp(argv[i], "--number") ||
                    !strcmp(argv[i], "--heading")) && more) {
            long long *dst = &n_new[argv[i][2] == 'e' ? 0 : argv[i][2] == 'h' ? 3 : argv[i][4] == 'x' ? 1 : 2];
            if (ex_parse_ll(argv[i + 1], 0, 100000000LL, dst)) {
                fprintf(stderr, "mcqa_gen: %s '%s': an integer 0..100000000\n", argv[i], argv[i + 1]);
                return 2;
            }
            i++;
        } else { fprintf(stderr, "mcqa_gen: unknown option or missing value '%s' (see --help)\n", argv[i]); return 2; }
    }
    if (n_cloze == 0 && n_order == 0 && n_new[0] == 0 && n_new[1] == 0 && n_new[2] == 0 && n_new[3] == 0) {
        fprintf(stderr, "mcqa_gen: every task count is 0: nothing to build\n");
        return 2;
    }
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
        loff = pos;
        pos = e + 1;
        while (*s == ' ') s++;
        if (!*s) continue;
        if (s[0] == '=' && s[1] == ' ') {
            if (s[2] != '=') art++; /* " = Title = ": a new article */
            pend = s[2] == '=' ? (long)loff : -1; /* a section heading waits for its paragraph */
            continue;
        }
        memset(&pg, 0, sizeof pg);
        pg.line = line;
        pg.art = art;
        pg.off = loff;
        pg.head = -1;
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
        if (pend >= 0) {
            heading *nh = (heading *)realloc(g_heads, (size_t)(g_nheads + 1) * sizeof *nh);
            if (!nh) { fprintf(stderr, "mcqa_gen: out of memory\n"); free(pg.w); free(pg.sent); goto out; }
            g_heads = nh;
            g_heads[g_nheads].off = (size_t)pend;
            g_heads[g_nheads].para = np;
            g_heads[g_nheads].art = art;
            pg.head = (int)g_nheads++;
            pend = -1;
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
        static const char *const names[N_OUT] = {"wt2_cloze.jsonl", "wt2_order.jsonl", "wt2_entity.jsonl", "wt2_next.jsonl",
                                                 "wt2_number.jsonl", "wt2_heading.jsonl", "families.txt"};
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

    /* ---- the wt2s family: each task from its own stream (seed_stream) */
    for (o = 0; o < 4; o++) {
        static const char *const tname[4] = {"wt2_entity", "wt2_next", "wt2_number", "wt2_heading"};
        long got, nc = 0;
        if (n_new[o] == 0) continue;
        seed_stream(seed, o);
        snprintf(path, sizeof path, "%s/%s.jsonl", out_dir, tname[o]);
        if (ex_out_open(&outs[OUT_ENTITY + o], path, err, sizeof err)) { fprintf(stderr, "mcqa_gen: %s\n", err); goto out; }
        opened[OUT_ENTITY + o] = 1;
        f = outs[OUT_ENTITY + o].f;
        got = o == 0 ? gen_entity(par, np, (long)n_new[o], f, &nc)
            : o == 1 ? gen_next(par, np, (long)n_new[o], f, &nc)
            : o == 2 ? gen_number(par, np, (long)n_new[o], f, &nc)
                     : gen_heading(par, text, (long)n_new[o], f, &nc);
        f = NULL;
        if (got < 0) goto out;
        if (got == 0) {
            fprintf(stderr, "mcqa_gen: %s: no item could be built (too few distractors); nothing written\n", tname[o]);
            goto out;
        }
        fprintf(stderr, "mcqa_gen: %s: %ld items (from %ld eligible positions)\n", path, got, nc);
    }

    snprintf(path, sizeof path, "%s/families.txt", out_dir);
    if (ex_out_open(&outs[OUT_FAM], path, err, sizeof err)) { fprintf(stderr, "mcqa_gen: %s\n", err); goto out; }
    opened[OUT_FAM] = 1;
    fprintf(outs[OUT_FAM].f, "# task families for mcqa_compare (Holm-Bonferroni within each line)\n");
    if (n_cloze > 0 || n_order > 0)
        fprintf(outs[OUT_FAM].f, "wt2:%s%s\n", n_cloze > 0 ? " wt2_cloze" : "", n_order > 0 ? " wt2_order" : "");
    if (n_new[0] > 0 || n_new[1] > 0 || n_new[2] > 0 || n_new[3] > 0)
        fprintf(outs[OUT_FAM].f, "wt2s:%s%s%s%s\n", n_new[0] > 0 ? " wt2_entity" : "", n_new[1] > 0 ? " wt2_next" : "",
                n_new[2] > 0 ? " wt2_number" : "", n_new[3] > 0 ? " wt2_heading" : "");
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
    free(g_heads);
    free(cand);
    free(rank_of);
    free(g_sorted);
    shfree(counts);
    free(text);
    return rc;
}
