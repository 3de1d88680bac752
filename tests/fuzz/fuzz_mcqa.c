/* libFuzzer target: the parsers of examples/common/mcqa.c that read files from outside
   (issue 37): task lines (mcqa_item_parse), per-example log lines (mcqa_log_parse),
   families files (mcqa_families_parse), the JSON reader under them (mcqa_json_parse) and
   the line reader (mcqa_read_line).

   Every input goes to every parser. Each must either refuse it with a negative code and a
   message, or accept it, and then what it accepted must hold up:
     - JSON: every string value written back by mcqa_json_write_str parses to the same bytes;
     - a task item: 2..MCQA_MAX_CHOICES non-empty choices, gold in range, task and id set;
       written as a log line with finite scores (mcqa_log_write) it parses back
       (mcqa_log_parse) as the same task, id, gold and prediction;
     - a log record: predictions in range and correctness that follows from them;
     - families: every task in exactly one family, no family empty;
     - the line reader: the lines it returns, with their newlines, are the input.
   Build and run: make build/fuzz/fuzz_mcqa && build/fuzz/fuzz_mcqa -max_total_time=60
   (clang -fsanitize=fuzzer,address,undefined); seeds in tests/fuzz/seeds_fuzz_mcqa. */
#define _POSIX_C_SOURCE 200809L
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "../../examples/common/bpe.c"
#include "../../examples/common/mcqa.c"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static void refused(int rc, const char *err, size_t errlen)
{
    if (rc >= 0 || !err[0] || strlen(err) >= errlen) abort();
}

/* every string value of v, written and parsed back, is the same bytes */
static void json_strings_roundtrip(const mcqa_json *v, int depth)
{
    int i;
    if (depth > 80) abort(); /* the parser stops at 64 */
    if (v->type == MCQA_JSTR && strlen(v->str) == v->len) {
        char *buf = NULL, err[256];
        size_t n = 0;
        FILE *f = open_memstream(&buf, &n);
        mcqa_json *back = NULL;
        if (!f) return;
        mcqa_json_write_str(f, v->str);
        if (fclose(f) != 0) abort();
        if (mcqa_json_parse(buf, n, &back, err, sizeof err) != MCQA_OK || back->type != MCQA_JSTR ||
            back->len != v->len || memcmp(back->str, v->str, v->len) != 0)
            abort();
        mcqa_json_free(back);
        free(buf);
    }
    if (v->type == MCQA_JOBJ || v->type == MCQA_JARR)
        for (i = 0; i < v->n; i++) json_strings_roundtrip(v->items[i], depth + 1);
}

static void check_item(const char *s, size_t n)
{
    mcqa_item it;
    char err[512];
    int rc, i;
    err[0] = 0;
    rc = mcqa_item_parse(s, n, 3, "fuzz", "deftask", &it, err, sizeof err);
    if (rc == MCQA_ERANGE) return; /* blank */
    if (rc != MCQA_OK) {
        refused(rc, err, sizeof err);
        if (strncmp(err, "fuzz:3: ", 8) != 0) abort(); /* the message names the line */
        return;
    }
    if (it.n_choices < 2 || it.n_choices > MCQA_MAX_CHOICES || it.gold < 0 || it.gold >= it.n_choices || !it.task ||
        !it.task[0] || !it.id || !it.id[0] || !it.context)
        abort();
    for (i = 0; i < it.n_choices; i++)
        if (!it.choices[i] || !it.choices[i][0]) abort();
    {
        /* the log writer and reader agree on what was scored */
        mcqa_result r;
        mcqa_record rec;
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        memset(&r, 0, sizeof r);
        r.n_choices = it.n_choices;
        for (i = 0; i < it.n_choices; i++) {
            r.n[i] = 1 + i % 3;
            r.sum[i] = -0.25 * (double)((i * 7 + (int)n) % 11);
            r.mean[i] = r.sum[i] / r.n[i];
        }
        for (i = 1; i < it.n_choices; i++) {
            if (r.sum[i] > r.sum[r.pred_sum]) r.pred_sum = i;
            if (r.mean[i] > r.mean[r.pred_mean]) r.pred_mean = i;
        }
        r.n_prompt = r.n_prompt_full = 1;
        r.hash = 0x0123456789abcdefull ^ (uint64_t)n;
        if (!f) abort();
        if (mcqa_log_write(f, &it, &r) != MCQA_OK) abort();
        if (fclose(f) != 0 || len < 1 || buf[len - 1] != '\n') abort();
        err[0] = 0;
        if (mcqa_log_parse(buf, len - 1, 1, "log", &rec, err, sizeof err) != MCQA_OK) {
            fprintf(stderr, "written log line refused: %s\n", err);
            abort();
        }
        if (strcmp(rec.task, it.task) || strcmp(rec.id, it.id) || rec.gold != it.gold || rec.pred_sum != r.pred_sum ||
            rec.pred_mean != r.pred_mean || rec.n_choices != it.n_choices || rec.hash != r.hash)
            abort();
        mcqa_record_free(&rec);
        free(buf);
    }
    mcqa_item_free(&it);
}

static void check_log(const char *s, size_t n)
{
    mcqa_record rec;
    char err[512];
    int rc;
    err[0] = 0;
    rc = mcqa_log_parse(s, n, 9, "fuzz", &rec, err, sizeof err);
    if (rc == MCQA_ERANGE) return;
    if (rc != MCQA_OK) {
        refused(rc, err, sizeof err);
        return;
    }
    if (rec.n_choices < 2 || rec.n_choices > MCQA_MAX_CHOICES || rec.gold < 0 || rec.gold >= rec.n_choices ||
        rec.pred_sum < 0 || rec.pred_sum >= rec.n_choices || rec.pred_mean < 0 || rec.pred_mean >= rec.n_choices ||
        rec.correct_sum != (rec.pred_sum == rec.gold) || rec.correct_mean != (rec.pred_mean == rec.gold) ||
        rec.n_prompt < 1 || (rec.truncated != 0 && rec.truncated != 1) || !rec.task || !rec.id)
        abort();
    mcqa_record_free(&rec);
}

static void check_families(const char *s, size_t n)
{
    mcqa_families fam;
    char err[512];
    int rc, i, j;
    err[0] = 0;
    rc = mcqa_families_parse(s, n, &fam, err, sizeof err);
    if (rc != MCQA_OK) {
        refused(rc, err, sizeof err);
        if (fam.n != 0 || fam.name || fam.tasks || fam.n_tasks) abort(); /* nothing left allocated */
        return;
    }
    for (i = 0; i < fam.n; i++) {
        if (!fam.name[i] || !fam.name[i][0] || fam.n_tasks[i] < 1) abort();
        for (j = 0; j < i; j++)
            if (!strcmp(fam.name[i], fam.name[j])) abort();
        for (j = 0; j < fam.n_tasks[i]; j++)
            if (!fam.tasks[i][j][0] || mcqa_family_of(&fam, fam.tasks[i][j]) != i) abort();
    }
    mcqa_families_free(&fam);
}

static void check_lines(const unsigned char *data, size_t size)
{
    FILE *f;
    char *buf = NULL;
    size_t cap = 0, pos = 0;
    long len;
    if (size == 0) return;
    f = fmemopen((void *)data, size, "rb");
    if (!f) return;
    while ((len = mcqa_read_line(f, &buf, &cap)) >= 0) {
        /* the line is the input up to the next '\n' (a '\r' before it dropped) */
        size_t e = pos, l;
        while (e < size && data[e] != '\n') e++;
        l = e - pos;
        if (l > 0 && data[pos + l - 1] == '\r') l--;
        if ((size_t)len != l || memcmp(buf, data + pos, l) != 0 || buf[len] != 0) abort();
        pos = e + 1;
    }
    if (len != -1 || pos < size) abort(); /* no read error from memory, every byte seen */
    fclose(f);
    free(buf);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const char *s = (const char *)data;
    mcqa_json *j = NULL;
    char err[512];
    int rc;
    err[0] = 0;
    rc = mcqa_json_parse(size ? s : NULL, size, &j, err, sizeof err);
    if (rc != MCQA_OK) {
        refused(rc, err, sizeof err);
        if (j) abort();
    } else {
        json_strings_roundtrip(j, 0);
        mcqa_json_free(j);
    }
    check_item(size ? s : NULL, size);
    check_log(size ? s : NULL, size);
    check_families(size ? s : NULL, size);
    check_lines(data, size);
    return 0;
}
