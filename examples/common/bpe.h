/* bpe.h - GPT-2 byte-level BPE tokenizer (encoder.json + vocab.bpe), exact to the id.

   Part of attnkit's examples/common (the code the example programs share; not a
   mechanism header). The papers train on WikiText-2 with the GPT-2 tokenizer
   (seed 000 section 7); this is a C implementation of that tokenizer:

     - encoder.json (token -> id, 50,257 entries for GPT-2) is parsed by a small strict
       JSON reader of our own (escapes, \uXXXX, surrogate pairs; malformed input is
       rejected with a message naming the byte offset);
     - vocab.bpe (`#version` line + one merge "A B" per line, rank = line order);
     - the byte <-> printable code point table of GPT-2 (token strings in both files are
       written in that alphabet; internally tokens are plain byte strings);
     - pre-tokenisation with the semantics of GPT-2's pattern
         's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
       hand-coded (no regex engine); \p{L}, \p{N} and \s come from a generated range
       table (unicode_tables.h, Unicode version in BPE_UNICODE_VERSION; \s is the
       Unicode White_Space property, as in the Python `regex` module and tiktoken);
     - BPE merges by rank exactly as GPT-2's encoder.py does (repeatedly take the
       lowest-rank adjacent pair and merge all of its occurrences left to right), with a
       hash table of (left id, right id) -> (rank, merged id) and a word cache (both
       open addressing; stb_ds holds the token map while loading). Words of 128 bytes or
       more use an O(n log n) heap version of the same loop.

   Text is bytes. Invalid UTF-8 is never rejected: each byte of an ill-formed sequence
   is a code point of class "other" for pre-tokenisation, and BPE works on the bytes,
   so decode(encode(x)) == x for every byte string x. No special tokens: the text
   "<|endoftext|>" is encoded as ordinary text; bpe_eot() gives the id to append.

   Usage:
       #include "examples/common/bpe.h"   (link examples/common/bpe.c and stb_ds)
       bpe_tokenizer *tok; char err[256]; bpe_ids ids = {0}; bpe_bytes txt = {0};
       if (bpe_load_dir(&tok, NULL, err, sizeof err) != BPE_OK) { puts(err); return 1; }
       bpe_encode(tok, "Hello world", 11, &ids);          // ids.data = {15496, 995}
       bpe_decode(tok, ids.data, ids.n, &txt);            // txt.data = "Hello world"
       bpe_ids_free(&ids); bpe_bytes_free(&txt); bpe_free(tok);

   Data directory: bpe_load_dir(NULL) reads <dir>/gpt2/{encoder.json,vocab.bpe} where
   <dir> is $WT2_DIR if set, else the compile-time ATTNKIT_DATA_DIR (default
   "../shared/data").

   Thread safety: bpe_encode updates the tokenizer's word cache: one tokenizer per
   thread (or a lock). bpe_decode and the queries are read-only.

   Errors: BPE_OK 0; BPE_EINVAL (NULL/invalid argument), BPE_ENOMEM, BPE_ERANGE (id out
   of range, file too large), BPE_EIO (cannot open/read), BPE_EFORMAT (malformed file).
   Loaders also write a one-line message into err (may be NULL).

   Version 0.1. License: MIT (see the end of bpe.c). */
#ifndef ATTNKIT_BPE_H
#define ATTNKIT_BPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    BPE_OK = 0,
    BPE_EINVAL = -1,
    BPE_ENOMEM = -2,
    BPE_ERANGE = -3,
    BPE_EIO = -4,
    BPE_EFORMAT = -5
};

typedef struct bpe_tokenizer bpe_tokenizer;

/* Growable outputs; zero-initialise ({0}) before first use. Functions APPEND to them. */
typedef struct { int32_t *data; size_t n, cap; } bpe_ids;
typedef struct { unsigned char *data; size_t n, cap; } bpe_bytes;

const char *bpe_strerror(int err);

/* Default data directory: $WT2_DIR, else ATTNKIT_DATA_DIR (compile-time), else
   "../shared/data". */
const char *bpe_default_data_dir(void);

/* Load from files. Limits: each file <= 256 MiB, vocabulary <= 2^24 tokens. */
int bpe_load(bpe_tokenizer **out, const char *encoder_json_path,
             const char *vocab_bpe_path, char *err, size_t errlen);
/* dir: folder holding encoder.json and vocab.bpe; NULL: bpe_default_data_dir()/gpt2. */
int bpe_load_dir(bpe_tokenizer **out, const char *dir, char *err, size_t errlen);
/* From memory (json: json_len bytes, merges: merges_len bytes; neither needs a NUL). */
int bpe_load_mem(bpe_tokenizer **out, const char *json, size_t json_len,
                 const char *merges, size_t merges_len, char *err, size_t errlen);
void bpe_free(bpe_tokenizer *tok);

int bpe_vocab_size(const bpe_tokenizer *tok);
int bpe_num_merges(const bpe_tokenizer *tok);
/* id of "<|endoftext|>", or -1 when the vocabulary has no such token. */
int bpe_eot(const bpe_tokenizer *tok);

/* Encode len bytes of text (any bytes; UTF-8 expected) and append the ids to out. */
int bpe_encode(bpe_tokenizer *tok, const void *text, size_t len, bpe_ids *out);
/* Append the bytes of ids[0..n) to out. BPE_ERANGE on an id outside [0, vocab). */
int bpe_decode(const bpe_tokenizer *tok, const int32_t *ids, size_t n, bpe_bytes *out);
/* Bytes of one token (not NUL-terminated) or NULL for an invalid id. */
const unsigned char *bpe_token_bytes(const bpe_tokenizer *tok, int32_t id, size_t *len);

/* Pre-tokeniser: end (exclusive) of the piece that starts at pos (pos < len), per the
   GPT-2 pattern. Exposed for tests. */
size_t bpe_next_piece(const unsigned char *text, size_t len, size_t pos);
/* Class of a code point: 0 other, 1 letter (L*), 2 number (N*), 3 White_Space. */
int bpe_codepoint_class(uint32_t cp);
/* Unicode version of the generated class table, e.g. "15.0.0". */
const char *bpe_unicode_version(void);

/* Pre-tokens longer than max_bytes (default BPE_MAX_PIECE_DEFAULT = 64 KiB) are merged
   in consecutive chunks of at most max_bytes (cut before a UTF-8 continuation byte), so
   one pathological "word" (megabytes without whitespace) costs bounded memory and
   O(n log max_bytes) time. Real text never has such pieces, so the ids are those of the
   reference tokenizer; for a longer piece they are those of its chunks. 0: no cap;
   values below 8 become 8. */
#define BPE_MAX_PIECE_DEFAULT ((size_t)65536)
void bpe_set_max_piece(bpe_tokenizer *tok, size_t max_bytes);

/* Word cache: entries are dropped when it holds more than max_bytes (default 64 MiB;
   0 disables the cache). Statistics for benchmarks. */
void bpe_set_cache_limit(bpe_tokenizer *tok, size_t max_bytes);
void bpe_cache_stats(const bpe_tokenizer *tok, size_t *hits, size_t *misses);

/* Growable buffers. */
int bpe_ids_push(bpe_ids *v, int32_t id);
void bpe_ids_free(bpe_ids *v);
int bpe_bytes_append(bpe_bytes *v, const void *data, size_t n);
void bpe_bytes_free(bpe_bytes *v);

/* Read a whole file (limit max_bytes) into a malloc'ed buffer (+1 NUL byte, not
   counted in *len). BPE_EIO / BPE_ERANGE / BPE_ENOMEM with a message in err. */
int bpe_read_file(const char *path, size_t max_bytes, unsigned char **data, size_t *len,
                  char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_BPE_H */
