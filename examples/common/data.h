/* data.h - WikiText-2 data pipeline for the examples: raw splits (plain or .xz, read
   with liblzma), the token-id protocol of ../shared/data/README.md, *.gpt2.u16 files,
   and batch loaders.

   Protocol (wt2_tokenize): split the raw text on '\n'; each row keeps its own '\n';
   drop rows that are empty or whitespace-only (Python str.isspace(): Unicode
   White_Space plus U+001C..U+001F); encode each kept row with GPT-2 BPE (bpe.h) and
   append <|endoftext|> (50256) after it. Files: little-endian uint16, no header.

   Splits: a directory may hold the full WikiText-2 raw set (wiki.{train,valid,test}.raw,
   plain or .xz) or, like ../shared/data, only valid + test (train could not be
   obtained). wt2_scan() says what is there; wt2_choose_splits() picks train/valid
   when train exists, else trains on valid and evaluates on test, with a message that
   says so.

   Loaders (wt2_loader): WT2_RANDOM draws B contiguous chunks of T+1 ids at uniform
   random starts (seeded, reproducible); WT2_SEQUENTIAL walks the split in
   non-overlapping chunks (stride T: chunk k is ids[kT .. kT+T]), the last batch may have
   fewer rows. T may change from one call to the next. Output: (B, T+1) int32 ids,
   row-major; inputs are columns 0..T-1, targets 1..T.

   Errors: the BPE_* codes of bpe.h, with a message in err where one is taken.
   License: MIT (see bpe.c). */
#ifndef ATTNKIT_DATA_H
#define ATTNKIT_DATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bpe.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { WT2_TRAIN = 0, WT2_VALID = 1, WT2_TEST = 2, WT2_NSPLITS = 3 };
enum { WT2_RANDOM = 0, WT2_SEQUENTIAL = 1 };
#define WT2_EOT 50256

const char *wt2_split_name(int split); /* "train", "valid", "test"; NULL if invalid */

/* Read a text file, plain or xz-compressed (detected by its magic bytes), at most
   max_bytes decompressed. *data is malloc'ed with a NUL after the *len bytes. */
int wt2_read_text(const char *path, size_t max_bytes, unsigned char **data, size_t *len,
                  char *err, size_t errlen);
/* Decompress an in-memory .xz buffer (for tests and fuzzing). */
int wt2_xz_decode(const unsigned char *in, size_t in_len, size_t max_bytes,
                  unsigned char **data, size_t *len, char *err, size_t errlen);

/* Apply the protocol to raw text; appends ids to out; *rows_kept may be NULL. */
int wt2_tokenize(bpe_tokenizer *tok, const unsigned char *text, size_t len, bpe_ids *out,
                 size_t *rows_kept);
/* 1 if the row (bytes) is empty or whitespace-only in the str.isspace() sense. */
int wt2_row_is_blank(const unsigned char *row, size_t len);

/* u16 token files. write: ids must be in [0, 65535]; written to path.tmp then renamed.
   load: vocab > 0 checks every id < vocab. */
int wt2_write_u16(const char *path, const int32_t *ids, size_t n, char *err, size_t errlen);
int wt2_load_u16(const char *path, int vocab, uint16_t **ids, size_t *n, char *err,
                 size_t errlen);

/* The data directory the programs use by default: $WT2_DIR if set, else the built-in
   ATTNKIT_DATA_DIR (bpe_default_data_dir()); when that is a relative path that does not
   exist from the current directory, the same path taken from the executable's directory
   or one of its parents where it exists (so build/wt2_train finds ../shared/data from any
   current directory). */
const char *wt2_default_data_dir(void);

/* mkdir -p: creates path and its missing parents (mode 0777 before the umask). 0 on
   success or when it exists already; -1 with errno set otherwise (ENAMETOOLONG for a
   path of 4096 bytes or more, ENOTDIR when a component is a file, EACCES, ...). The one
   copy the example programs share. */
int wt2_mkdirs(const char *path);

/* Every id < vocab? BPE_ERANGE naming source (a file name; may be NULL), the byte offset
   and the index of the first id that is not. */
int wt2_check_ids(const uint16_t *ids, size_t n, int vocab, const char *source, char *err,
                  size_t errlen);

/* What a data directory holds (a file that exists but cannot be read counts as there:
   loading it then fails with the reason, and wt2_describe marks it). */
typedef struct {
    int has_raw[WT2_NSPLITS], has_u16[WT2_NSPLITS];
    char raw_path[WT2_NSPLITS][1024]; /* wiki.<s>.raw or wiki.<s>.raw.xz */
    char u16_path[WT2_NSPLITS][1024]; /* wt2.<s>.gpt2.u16 */
} wt2_inventory;
int wt2_scan(const char *dir, wt2_inventory *inv); /* dir NULL: bpe_default_data_dir() */
/* One line per split to f: found/missing and from where. */
void wt2_describe(const wt2_inventory *inv, const char *dir, FILE *f);
/* train_split / eval_split for a training run; msg (may be NULL) gets a sentence that
   says which splits are used and why. BPE_EIO when not even two splits exist. */
int wt2_choose_splits(const wt2_inventory *inv, int *train_split, int *eval_split, char *msg,
                      size_t msglen);

/* Token ids of one split: from wt2.<s>.gpt2.u16 if present, else tokenised from the
   raw text (tok may be NULL: then loaded from <dir>/gpt2). */
typedef struct {
    uint16_t *ids;
    size_t n;
    int split;
    char source[1100];
} wt2_tokens;
int wt2_load_split(const char *dir, int split, bpe_tokenizer *tok, wt2_tokens *out, char *err,
                   size_t errlen);
void wt2_tokens_free(wt2_tokens *t);

/* Byte-level ids (a vocabulary of WT2_BYTE_VOCAB = 256; the small-vocabulary data of the
   CEAS 9k-parameter scale, issue 20): the protocol's rows (split on '\n', each with its
   own '\n'; empty or whitespace-only rows dropped, as wt2_tokenize), then every byte of
   every kept row as one id 0..255 (UTF-8 bytes, not characters; no end-of-text id: the
   '\n' ends a row). wt2_bytes_tokenize: *ids malloc'ed (NULL and 0 ids for text without a
   kept row). wt2_load_split_bytes: from <dir>/wiki.<s>.raw[.xz] (BPE_EIO if absent). */
#define WT2_BYTE_VOCAB 256
int wt2_bytes_tokenize(const unsigned char *text, size_t len, uint16_t **ids, size_t *n);
int wt2_load_split_bytes(const char *dir, int split, wt2_tokens *out, char *err, size_t errlen);

typedef struct {
    const uint16_t *ids;
    size_t n;
    int mode;
    uint64_t seed, rng;
    size_t pos;                     /* WT2_SEQUENTIAL: start of the next chunk */
    unsigned long long rows, tokens; /* served so far (tokens = targets, rows * T) */
} wt2_loader;
int wt2_loader_init(wt2_loader *L, const uint16_t *ids, size_t n, int mode, uint64_t seed);
/* out: (B, T+1). Returns the number of rows written (B for WT2_RANDOM; 0..B for
   WT2_SEQUENTIAL, 0 at the end of the pass) or a negative error (BPE_ERANGE when the
   split is shorter than T+1 ids). */
int wt2_loader_next(wt2_loader *L, int B, int T, int32_t *out);
void wt2_loader_reset(wt2_loader *L);
/* Sequential chunks of context T in n ids, and the fraction of the n-1 targets they
   cover (the rest is the tail shorter than T). */
size_t wt2_num_chunks(size_t n, int T);
double wt2_coverage(size_t n, int T);

/* SHA-256 (FIPS 180-4) of n bytes as 64 lowercase hex digits and a NUL in hex[65]. */
void wt2_sha256_hex(const void *data, size_t n, char hex[65]);
/* wt2_prepare --check: each file of ../shared/data/README.md's table (wiki.{test,valid}.raw.xz,
   wt2.{valid,test}.gpt2.u16, gpt2/encoder.json, gpt2/vocab.bpe) checked in dir against
   its size and sha256, one line each on f ("ok", "missing", "wrong size (N bytes, expected
   M)", "wrong checksum", "unreadable: why"); the train split (wiki.train.raw or .raw.xz)
   is optional: "absent (optional)", or checked by size and sha256 of the raw text when
   present plain (a present but wrong train split counts too). Returns the number of files that are not right (0: all ok). */
int wt2_check_files(const char *dir, FILE *f);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_DATA_H */
