/* niah.h - seed 002's length-extrapolation experiment (examples/niah.c): the induction
   needle-in-a-haystack task, a compact vocabulary, the per-digit scorer, and the driver
   that trains one model per arm at a short length and evaluates it at 1x .. 32x that
   length (needle accuracy and document CE).

   TASK (seed 002 §4, "induction needle"): a record
       " The access code for record KEY is D1 D2 D3 D4 D5."
   is planted in a haystack and the cue " The access code for record KEY is" is repeated
   after a gap; the model must continue it with the five digits. Every piece is tokenised
   by the GPT-2 BPE exactly as the model sees it: the template pieces come from
   bpe_encode, KEY is one GPT-2 token " Word" (a capitalised word of the training text
   that encodes to itself as a single token), each digit " d" is one token. Scoring:
   for each of the five digits, the argmax of the logits at the position before it (the
   true preceding digits in context: teacher forcing, so one forward per probe) against
   the digit; accuracy = correct digits / (5 x probes).
   Train/eval disjointness: the key pool (2 x nkeys capitalised words, the most frequent
   first) alternates train (even rank) / eval (odd rank); codes with an even digit sum
   are training codes, odd sums are evaluation codes. So no evaluation needle (key or
   code) is ever seen in training.
   Placement: training rows hold `train_needles` records in the first half of the row and
   their cues (shuffled) in the second half, at random offsets; evaluation probes hold one
   record starting at a random offset in [8, 8 + L/4) (L the training length) and the cue
   ends the sequence, so the gap grows with the evaluated length.
   Haystack: NIAH_HAY_TEXT (default): contiguous WikiText-2 tokens (training rows from the
   training text, probes from the evaluation text); NIAH_HAY_SYNTH: i.i.d. tokens drawn
   uniformly from the 1,024 most frequent tokens of the training text.

   VOCABULARY: the model's vocabulary is compact (cost: the head and its softmax scale
   with V): the V - 1 - (needle tokens not among them) most frequent GPT-2 tokens of the
   training text, plus every needle token (template, digits, keys), plus one UNK id that
   every other token maps to. Ties break by the lower GPT-2 id. CE on this vocabulary is
   not comparable with a 50,257-token model's CE (UNK is one class).

   ERRORS: NIAH_OK 0, NIAH_EINVAL (bad argument, with a message), NIAH_ENOMEM, NIAH_EFAIL
   (a model / tokenizer / file call failed, with its message). License: MIT. */
#ifndef ATTNKIT_NIAH_H
#define ATTNKIT_NIAH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bpe.h"
#include "model.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { NIAH_OK = 0, NIAH_EINVAL = -1, NIAH_ENOMEM = -2, NIAH_EFAIL = -3 };
enum { NIAH_TRAIN = 0, NIAH_EVAL = 1 };
enum { NIAH_HAY_TEXT = 0, NIAH_HAY_SYNTH = 1 };
enum { NIAH_OPT_ADAMW = 0, NIAH_OPT_MUON = 1 };
#define NIAH_DIGITS 5
#define NIAH_MAX_PIECE 16
#define NIAH_MAX_MULT 16
#define NIAH_NARMS 6

/* ------------------------------------------------------------ needles */
typedef struct niah_spec {
    int32_t prefix[NIAH_MAX_PIECE]; /* " The access code for record" (GPT-2 ids) */
    int nprefix;
    int32_t is_tok[NIAH_MAX_PIECE]; /* " is" */
    int nis;
    int32_t dot[NIAH_MAX_PIECE];    /* "." */
    int ndot;
    int32_t digit[10];              /* " 0" .. " 9" (one token each) */
    int32_t *keys[2];               /* [NIAH_TRAIN], [NIAH_EVAL]: single-token keys */
    int nkeys[2];
} niah_spec;

typedef struct niah_needle {
    int32_t key;                    /* GPT-2 id */
    int digits[NIAH_DIGITS];        /* 0..9 */
} niah_needle;

/* Build the template from the tokenizer and the key pool from text (GPT-2 ids, n):
   2 * nkeys capitalised single-token words, most frequent first (ties: lower id), then
   alternately train / eval. NIAH_EINVAL when the text has fewer such words. */
int niah_spec_build(niah_spec *s, bpe_tokenizer *tok, const uint16_t *text, size_t n, int nkeys,
                    char *err, size_t errlen);
void niah_spec_free(niah_spec *s);
/* Record tokens (GPT-2 ids) into out (cap entries): prefix, key, " is", 5 digits, ".".
   Returns the count or NIAH_EINVAL. */
int niah_record(const niah_spec *s, const niah_needle *nd, int32_t *out, int cap);
/* Cue tokens (prefix, key, " is"), then the 5 digits: returns the count (cue + 5). */
int niah_cue(const niah_spec *s, const niah_needle *nd, int32_t *out, int cap);
int niah_record_len(const niah_spec *s);
int niah_cue_len(const niah_spec *s); /* without the digits */
/* 0: an even digit sum (training codes), 1: odd (evaluation codes). */
int niah_code_split(const int digits[NIAH_DIGITS]);
/* A needle of split NIAH_TRAIN / NIAH_EVAL: key from that split's pool, code of that
   split's parity (the fifth digit fixes the parity). */
int niah_draw(const niah_spec *s, int split, tk_rng *rng, niah_needle *out);

/* ------------------------------------------------------------ vocabulary */
typedef struct niah_vocab {
    int V;           /* compact size, UNK included */
    int unk;         /* compact id of UNK (V - 1) */
    int n_src;       /* source vocabulary (50257) */
    int32_t *fwd;    /* (n_src) GPT-2 id -> compact id */
    int32_t *back;   /* (V) compact id -> GPT-2 id (-1 for UNK) */
    int32_t *top;    /* (ntop) compact ids of the most frequent tokens (synthetic haystack) */
    int ntop;
} niah_vocab;
int niah_vocab_build(niah_vocab *v, const uint16_t *text, size_t n, int n_src, int V,
                     const int32_t *must, int nmust, char *err, size_t errlen);
void niah_vocab_free(niah_vocab *v);
/* The must-keep tokens of a spec (template, digits, keys) into out (cap); returns count. */
int niah_spec_tokens(const niah_spec *s, int32_t *out, int cap);

/* ------------------------------------------------------------ sequences */
/* Where a probe's answer sits: inputs index ans (the input whose logits predict digit 1;
   digit k is predicted at ans + k), record and cue starts (indices into the T+1 row). */
typedef struct niah_probe {
    niah_needle nd;
    int rec_pos, cue_pos, ans;
} niah_probe;

typedef struct niah_hay {
    int mode;                /* NIAH_HAY_TEXT / NIAH_HAY_SYNTH */
    const uint16_t *ids;     /* GPT-2 ids (text mode) */
    size_t n;
} niah_hay;

/* One evaluation row of T+1 compact ids: haystack, one record starting in
   [rec_lo, rec_hi), the cue + digits ending the row. T >= record + cue + 5 + rec_hi. */
int niah_eval_row(const niah_spec *s, const niah_vocab *v, const niah_hay *h, int T, int rec_lo,
                  int rec_hi, tk_rng *rng, int32_t *row, niah_probe *pr);
/* One training row of T+1 compact ids with k needles (records in the first half, cues
   shuffled in the second half); pr (k entries) may be NULL. */
int niah_train_row(const niah_spec *s, const niah_vocab *v, const niah_hay *h, int T, int k,
                   tk_rng *rng, int32_t *row, niah_probe *pr);

/* A copy row (plain induction practice, no needle): haystack with a segment of seg
   tokens from the first half repeated at a random place in the second half. */
int niah_copy_row(const niah_vocab *v, const niah_hay *h, int T, int seg, tk_rng *rng, int32_t *row);

/* ------------------------------------------------------------ scoring */
/* Digits right for a probe from logits (rows of V floats; row r = inputs index r of the
   probe's row): correct[k] = argmax(logits[ans + k]) == compact id of digit k (ties: the
   lower id). Returns the number right (0..5) or NIAH_EINVAL. */
int niah_score(const float *logits, int V, const niah_vocab *v, const niah_spec *s,
               const niah_probe *pr, int correct[NIAH_DIGITS]);
/* Wilson 95% interval for k successes in n trials (n > 0). */
void niah_wilson(long k, long n, double *lo, double *hi);

/* ------------------------------------------------------------ experiment */
typedef struct niah_config {
    int train_len;           /* L, 128 */
    int nmult, mult[NIAH_MAX_MULT]; /* evaluated lengths are mult[i] * L: 1,2,4,8,16,32 */
    long steps;              /* optimizer steps per arm */
    int batch;               /* rows per step */
    float lr;                /* peak AdamW lr (warm-up 5% of steps, cosine to 10%) */
    float weight_decay, grad_clip;
    int train_needles;       /* needles per training row */
    float copy_frac;         /* share of training rows that are copy rows (niah_copy_row) */
    float digit_weight;      /* loss weight of the cue digits in training rows (others 1) */
    int probes;              /* probes per length */
    int doc_windows;         /* document-CE windows per length */
    int eval_tokens;         /* tokens per evaluation forward (batching of short probes) */
    int d_model, n_layers, n_heads, vocab;
    int conv_k;              /* causal convolution width before every mixer (0 off), all arms */
    int nkeys;               /* keys per split */
    int haystack;            /* NIAH_HAY_* */
    int window;              /* polar sliding window (-1: none) */
    int distractor;          /* polar distractor keys (0: off) */
    float distractor_weight;
    int arms[NIAH_NARMS];    /* 1: run arm i (niah_arm_name) */
    uint64_t seed;
    int log_every;           /* training log lines to the log stream (0: none) */
    /* The model and recipe around the arms' attention (issue 43 item 8; the defaults are the
       original grid's model; niah_config_preset(..., "atma") sets seed 002's). Every arm
       gets them; what an arm varies is its attention ('A' layers) and memory. */
    char preset[16];         /* "" or "atma": recorded in results.jsonl */
    char layer_pattern[MDL_MAX_LAYERS + 1]; /* per-layer mixer, repeated: 'A' the arm's
                                attention, 'c' LFM2's gated short convolution; "" all 'A' */
    int lfm_k;               /* the gated convolution's kernel (3) */
    int ffn;                 /* MDL_FFN_GELU or MDL_FFN_RELU2 (d_ff 4 C either way) */
    int norm;                /* MDL_NORM_LAYER or MDL_NORM_RMS */
    int kv_heads;            /* polar arms: key/value heads (GQA), 0 = n_heads */
    int qk_norm;             /* polar arms: RMSNorm of q and k per head (1) */
    int polar_gate;          /* polar arms: MDL_POLAR_GATE_HEAD or _CHANNEL (+ output biases) */
    int canon_k;             /* polar arms: Canon layers' kernel on q, k, v (0 off) */
    int mem_qkv;             /* polar+gdelta: MDL_MEMQKV_OWN (the memory's own projections) or
                                MDL_MEMQKV_SHARED (the attention's q, k, v: seed 002's form) */
    int optimizer;           /* NIAH_OPT_ADAMW or NIAH_OPT_MUON (train.h's Muon on the
                                blocks' matrices, AdamW on the rest, one lr and wd) */
    float muon_momentum;     /* 0.95 */
    int muon_ns_steps;       /* 5 */
    int sigreg;              /* sigreg.h's SGR_* mode (0 off) */
    float sigreg_alpha;      /* its weight a in (1 - a) L_LM + a L_reg (0.01) */
    double lr_flat;          /* share of the steps after the warm-up held at the peak lr (0) */
    double lr_floor;         /* the cosine's end as a share of the peak (0.1) */
} niah_config;

niah_config niah_config_default(void);
/* A named preset over c's current values (call it first, flags after): "default" (the
   original grid: niah_config_default's model) or "atma" (seed 002's architecture at the
   original grid's scale, d 64: 8 layers "ccAc" repeated = six LFM2 gated-convolution layers
   and two attention layers at l % 4 == 2 as the authors' code places them (4 layers give
   one attention layer, and then no arm learned the copy task in 3,000 steps:
   docs/RESULTS.md), 4 heads of width 16
   (the paper's d_k 128 needs d >= 512 with 4 heads; 4 heads is the fewest that keeps GQA
   1:4 with a whole key/value head; --d-model 128 gives width 32 at ~3x the cost), polar
   arms with 1 key/value head (GQA H/4), q/k RMSNorm, Canon layers of kernel 4 and the
   per-channel output gate with biases, the memory on the attention's own q, k, v
   (mem_qkv shared), squared-ReLU FFN 4x, RMSNorm, no stand-in
   convolution (conv 0: the LFM2 layers and Canon give local order), Muon, and seed
   002's cosine with a 70 % cooldown (lr_flat 0.3, lr_floor 0) after the 5 % warm-up.
   Softmax arms run the same hybrid with softmax in the 'A' layer (no GQA, Canon or q/k
   norm: the model has them for polar attention only). NIAH_OK or NIAH_EINVAL. */
int niah_config_preset(niah_config *c, const char *name);
/* The checks niah_run makes on a configuration (ranges, lengths, arms), without running:
   NIAH_OK or NIAH_EINVAL with the reason. A program calls it before it opens any output. */
int niah_config_check(const niah_config *c, char *err, size_t errlen);
/* "softmax-rope", "softmax-nope", "polar", then the same with "+gdelta" (i = 3..5). */
const char *niah_arm_name(int i);
int niah_arm_from_name(const char *name); /* -1 if unknown */

typedef struct niah_result {
    int arm, mult, T;
    long correct, digits;    /* per-digit */
    long exact, probes;      /* all five digits right */
    double acc, acc_lo, acc_hi;
    double doc_ce;           /* mean CE over doc_tokens targets (NaN if none) */
    long long doc_tokens;
    double train_ce;         /* mean training CE of the last 10% of steps */
    double train_s, eval_s;  /* seconds */
    double act_mb;           /* model activation memory after this length's evaluation (MiB):
                                O(T) for polar / gated-delta, O(T^2) for softmax */
    char preset[16];         /* the configuration's preset ("" none) */
    char model[384];         /* the model and recipe beyond the arm (niah_run fills it): runs
                                whose descriptions differ are not averaged together */
} niah_result;

/* Train and evaluate every selected arm. train_text / eval_text: GPT-2 ids; tok: the
   tokenizer (template). Results go to res (cap >= arms x nmult; *nres gets the count),
   one JSON line per result to jsonl (may be NULL), progress to log (may be NULL). */
int niah_run(const niah_config *c, bpe_tokenizer *tok, const uint16_t *train_text, size_t n_train,
             const uint16_t *eval_text, size_t n_eval, niah_result *res, int cap, int *nres,
             FILE *jsonl, FILE *log, char *err, size_t errlen);
/* The results table (markdown) to f; an undefined number (a NaN CE, an empty CI) is "-". */
void niah_print_table(FILE *f, const niah_result *res, int n);
/* One JSON line of a result (no newline) into buf; returns buf. */
const char *niah_result_json(const niah_result *r, uint64_t seed, char *buf, size_t cap);
/* Plots: accuracy vs length and CE vs length, one line per arm (x = log2 mult). */
int niah_plot(const char *acc_png, const char *ce_png, const niah_result *res, int n,
              const char *title_suffix);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_NIAH_H */
