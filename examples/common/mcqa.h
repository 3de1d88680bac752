/* mcqa.h - multiple-choice scoring and paired statistics (seed 003 §4), the code shared by
   examples/mcqa.c (scores a wt2_train checkpoint on a task file), examples/mcqa_compare.c
   (paired comparison of two per-example logs) and examples/mcqa_gen.c (builds tasks from
   the WikiText-2 test split). Part of attnkit's examples/common; no main(), no globals.

   Task files: JSON lines, one item per line (blank lines are skipped):
       {"task":"sciq","id":"17","context":"Question: ...\nAnswer:",
        "choices":[" mitochondria"," ribosome"," nucleus"],"gold":0}
     context   string (aliases "query", "ctx"); may be empty (then <|endoftext|> is the
               prompt, as lm-eval-harness does)
     choices   array of 2..MCQA_MAX_CHOICES strings (alias "endings"). A choice that does not
               start with whitespace gets a leading space (lm-eval's target delimiter), so
               exports with and without the leading space score the same. As in
               lm-eval-harness, spaces at the end of the context are moved to the front of
               every choice before tokenising.
     gold      integer index into choices (aliases "label", "answer_index"; a string holding
               an integer is accepted)
     task      string, optional (default: the --task name given to the reader)
     id        string or integer, optional (default: the line number)
   Other fields are ignored. The lm-eval-harness "multiple_choice" tasks (SciQ, ARC,
   OpenBookQA, HellaSwag, ...) export exactly these three pieces per document (the rendered
   doc_to_text, the doc_to_choice list, the doc_to_target index); write them one object per
   line under these names.

   Scoring (seed 003 eq. 13): for each choice c, sum_i log p(c_i | x, c_<i) under teacher
   forcing, and its mean over |c| tokens. Predictions: argmax of the sum (primary; the
   seed's argmin of s_sum = -sum) and argmax of the mean (sensitivity); ties go to the
   lowest index (numpy's argmax). Truncation: the prompt is left-truncated to
   max_T + 1 - (longest choice of the item) tokens, so every choice of an item sees the same
   prompt and each forward is at most max_T tokens; the flag and the effective length are
   logged. The prompt hash (FNV-1a 64 of the scored token ids: kept prompt and every
   choice) identifies exactly what was scored: two logs are only compared where it matches.
   Choices whose inputs are identical (e.g. single-token choices) share one forward; every
   other choice runs alone (batch of 1) at the exact length of its sequence: no padding (the
   RPA/ERA priors depend on the length) and no batch-mates (a prior built from batch
   statistics would let one choice's tokens move another's score).

   Per-example log (one JSON object per line, written by mcqa_log_write):
     {"task":..,"id":..,"prompt_hash":"16 hex","n_prompt":kept,"n_prompt_full":before,
      "truncated":0|1,"gold":g,"choices":[{"n":tokens,"sum":lp,"mean":lp/n},..],
      "pred_sum":i,"pred_mean":j,"correct_sum":0|1,"correct_mean":0|1}
   Sums and means are printed with 17 significant digits, so the predictions and every
   accuracy recompute exactly from the log; mcqa_log_parse checks that they do.

   Statistics (seed 003 §4.3), A vs B on paired items: n01 = A right and B wrong, n10 = A
   wrong and B right; McNemar chi2 = (|n01 - n10| - 1)^2 / (n01 + n10) (eq. 14, as written,
   no clamp at 0; the same as statsmodels' mcnemar(exact=False, correction=True)) with its
   chi2(1) upper tail p; the exact two-sided binomial p = min(1, 2 P(X <= min(n01, n10))),
   X ~ Bin(n01 + n10, 1/2); odds ratio n01 / n10; a paired percentile bootstrap CI for
   Delta = acc_A - acc_B (items resampled with replacement, seeded); Holm-Bonferroni
   adjustment within a family.

   Errors: MCQA_OK 0 or a negative MCQA_E* code, with a one-line message in err (which may
   be NULL). License: MIT. */
#ifndef ATTNKIT_MCQA_H
#define ATTNKIT_MCQA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bpe.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { MCQA_OK = 0, MCQA_EINVAL = -1, MCQA_ENOMEM = -2, MCQA_EFORMAT = -3, MCQA_ERANGE = -4,
       MCQA_EMISMATCH = -5, MCQA_EIO = -6, MCQA_EMODEL = -7 };
#define MCQA_MAX_CHOICES 64
#define MCQA_MAX_LINE (64u << 20) /* longest JSON line accepted */

const char *mcqa_strerror(int code);

/* ---------------------------------------------------------------- JSON (small DOM) */
enum { MCQA_JNULL, MCQA_JBOOL, MCQA_JNUM, MCQA_JSTR, MCQA_JARR, MCQA_JOBJ };
typedef struct mcqa_json {
    int type;
    int b;                      /* JBOOL */
    double num;                 /* JNUM */
    int is_int;                 /* JNUM written without fraction or exponent */
    char *str;                  /* JSTR: UTF-8, NUL-terminated (may hold NULs: see len);
                                   JNUM: the number's text as written */
    size_t len;                 /* bytes of str */
    int n;                      /* JARR / JOBJ entries */
    char **keys;                /* JOBJ keys (NUL-terminated) */
    struct mcqa_json **items;   /* JARR / JOBJ values */
} mcqa_json;
/* Strict JSON (RFC 8259) of one value in s[0..n), surrounding whitespace allowed. Depth <= 64.
   err gets "byte K: what". */
int mcqa_json_parse(const char *s, size_t n, mcqa_json **out, char *err, size_t errlen);
void mcqa_json_free(mcqa_json *v);
const mcqa_json *mcqa_json_get(const mcqa_json *obj, const char *key); /* NULL if absent */
/* s as a JSON string literal (quotes, escapes) to f. */
void mcqa_json_write_str(FILE *f, const char *s);

/* ---------------------------------------------------------------- task items */
typedef struct mcqa_item {
    char *task, *id, *context;
    int n_choices;
    char **choices;
    int gold;
    long line;                  /* 1-based line of the file */
} mcqa_item;
/* Parse one task line. default_task may be NULL ("task"). err names the line:
   "<where>:<line>: ...". Blank line: MCQA_ERANGE (skip it). */
int mcqa_item_parse(const char *line, size_t len, long lineno, const char *where,
                    const char *default_task, mcqa_item *out, char *err, size_t errlen);
void mcqa_item_free(mcqa_item *it);

/* Read one line (without '\n'; a '\r' before it is dropped) into *buf (grown with realloc).
   Returns the length, -1 at EOF, MCQA_ERANGE when longer than MCQA_MAX_LINE,
   MCQA_ENOMEM, MCQA_EIO on a read error (ferror: an I/O error, a directory opened as a
   file): a read error is never taken for the end of the input. */
long mcqa_read_line(FILE *f, char **buf, size_t *cap);

/* Tokenised item: prompt and choices as GPT-2 ids (leading-space and trailing-space rules
   above applied). */
typedef struct mcqa_tokens {
    int n_prompt;
    int *prompt;
    int n_choices;
    int *n_choice;              /* (n_choices) */
    int **choice;               /* (n_choices) arrays */
} mcqa_tokens;
int mcqa_tokenize(bpe_tokenizer *tok, const mcqa_item *it, mcqa_tokens *out, char *err,
                  size_t errlen);
void mcqa_tokens_free(mcqa_tokens *t);

/* ---------------------------------------------------------------- scoring */
/* The model: run ids (B,T) and return a pointer to logits (B,T,V), valid until the next
   call (mcqa_score always asks for B = 1). Only the rows t >= first of each sequence are
   read: a model may leave the rows before it uncomputed (mcqa_score asks for the rows that
   predict the choice tokens only; the head is most of a small model's cost). Returns 0 on
   success, else an error (a message in err). */
typedef int (*mcqa_forward_fn)(void *user, const int *ids, int B, int T, int first, const float **logits,
                               int *V, char *err, size_t errlen);

typedef struct mcqa_result {
    int n_choices;
    double sum[MCQA_MAX_CHOICES];   /* sum of log-probs (<= 0) */
    double mean[MCQA_MAX_CHOICES];  /* sum / n */
    int n[MCQA_MAX_CHOICES];        /* tokens per choice */
    int pred_sum, pred_mean;
    int n_prompt, n_prompt_full, truncated;
    uint64_t hash;
    int forwards;                   /* forward calls made */
} mcqa_result;
/* Scores one tokenised item with a model of context max_T. MCQA_ERANGE (with a message)
   when a choice is longer than max_T tokens (no prompt token would remain); MCQA_EMODEL
   when the model fails or a choice's log-probability is not finite (NaN / Inf logits,
   e.g. non-finite weights): the message names the choice and the cause. */
int mcqa_score(mcqa_forward_fn fwd, void *user, int max_T, const mcqa_tokens *tk,
               mcqa_result *out, char *err, size_t errlen);
/* The hash of a prompt and its choices (what mcqa_score puts in out->hash). */
uint64_t mcqa_hash_tokens(const int *prompt, int n_prompt, const int *const *choice,
                          const int *n_choice, int n_choices);
/* log p(target) from one row of V logits: x[target] - logsumexp(x), in double. */
double mcqa_logprob(const float *x, int V, int target);
/* One log line (with '\n'). MCQA_ERANGE (nothing written) when a sum or mean is not
   finite: the log never holds "nan" or "inf". MCQA_EIO when the stream's error flag is set. */
int mcqa_log_write(FILE *f, const mcqa_item *it, const mcqa_result *r);

/* ---------------------------------------------------------------- logs */
typedef struct mcqa_record {
    char *task, *id;
    uint64_t hash;
    int gold, n_choices;
    int pred_sum, pred_mean, correct_sum, correct_mean;
    int truncated, n_prompt;
    long line;
} mcqa_record;
/* Parse one log line and check it (MCQA_EFORMAT naming the line otherwise): every sum is
   finite and <= 0 (a log-probability sum), every mean is sum / n (relative tolerance
   1e-9), the predictions and correctness follow from the scores. Blank line: MCQA_ERANGE. */
int mcqa_log_parse(const char *line, size_t len, long lineno, const char *where,
                   mcqa_record *out, char *err, size_t errlen);
void mcqa_record_free(mcqa_record *r);
/* A whole log file: *recs (free with mcqa_records_free). A read error (a directory, an
   unreadable file) is MCQA_EIO, a file without records MCQA_EFORMAT, both naming it. */
int mcqa_log_read(const char *path, mcqa_record **recs, long *n, char *err, size_t errlen);
void mcqa_records_free(mcqa_record *recs, long n);
/* Pair two logs item by item (task, id): pair[i] = index in b of a[i]. Refuses
   (MCQA_EMISMATCH, message naming the item and what differs) a duplicated item, an item
   present in only one log, a different number of choices, a different gold answer, or a
   prompt hash that differs. */
int mcqa_pair(const mcqa_record *a, long na, const mcqa_record *b, long nb, long *pair,
              char *err, size_t errlen);

/* ---------------------------------------------------------------- statistics */
/* Upper tail of chi2 with one degree of freedom: P(X >= x) = erfc(sqrt(x / 2)). */
double mcqa_chi2_1_sf(double x);
/* McNemar with continuity correction (eq. 14). n01 + n10 == 0: chi2 0, p 1. */
int mcqa_mcnemar(long n01, long n10, double *chi2, double *p);
/* Exact two-sided binomial (sign) test of n01 vs n10 at 1/2. */
double mcqa_binom_exact_p(long n01, long n10);
/* n01 / n10 (+inf when n10 == 0 < n01, NaN when both are 0). */
double mcqa_odds_ratio(long n01, long n10);
/* Holm-Bonferroni adjusted p-values: adj[i] for p[i], m values (step-down, monotone,
   capped at 1). p and adj may alias. */
int mcqa_holm(const double *p, int m, double *adj);
/* Paired bootstrap of Delta = mean(d), d[i] = correct_A - correct_B in {-1, 0, 1}: reps
   resamples of n items with replacement from a PCG32 stream seeded by seed; CI = the
   alpha/2 and 1 - alpha/2 quantiles (linear interpolation between order statistics,
   numpy's default). */
int mcqa_bootstrap_delta(const signed char *d, long n, int reps, uint64_t seed, double alpha,
                         double *lo, double *hi);

/* The same over S replicates of the same items (e.g. two models trained with S seeds, each
   pair scored on one task file): t[i] = the sum over replicates of correct_A - correct_B for
   item i (in -S..S). Items are resampled with replacement, each with all its replicates
   (a cluster bootstrap: the items are the sampling unit, so the correlation of one item's
   replicates is kept), Delta* = sum t / (n S). With S = 1 the draws, and so the CI, are
   exactly mcqa_bootstrap_delta's. */
int mcqa_bootstrap_cluster(const int *t, long n, int S, int reps, uint64_t seed, double alpha, double *lo,
                           double *hi);
/* Two-sided p of Student's t with df degrees of freedom, P(|T| >= |t|) =
   I_{df/(df+t^2)}(df/2, 1/2) (regularised incomplete beta, continued fraction). t = +-inf:
   0; t NaN or df < 1: NaN. */
double mcqa_t_p2(double t, int df);
/* Paired t test across S >= 2 replicates of Delta (one per training seed): the mean, the
   sample std (S - 1), t = mean / (sd / sqrt(S)) and its two-sided p with S - 1 degrees of
   freedom. sd 0: t = +-inf and p 0 when the mean is not 0, else t 0 and p 1. MCQA_EINVAL:
   S < 2, a NULL pointer or a non-finite delta. */
int mcqa_paired_t(const double *delta, int S, double *mean, double *sd, double *t, double *p);

/* ---------------------------------------------------------------- families */
/* Config text: one family per line, "NAME: task task ..."; '#' starts a comment; blank
   lines ignored. A task in two families is an error. */
typedef struct mcqa_families {
    int n;                  /* families */
    char **name;            /* (n) */
    int *n_tasks;           /* (n) */
    char ***tasks;          /* (n) arrays */
} mcqa_families;
int mcqa_families_parse(const char *text, size_t len, mcqa_families *out, char *err,
                        size_t errlen);
void mcqa_families_free(mcqa_families *f);
/* Index of the family holding task, -1 if none. */
int mcqa_family_of(const mcqa_families *f, const char *task);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_MCQA_H */
