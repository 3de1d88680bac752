/* libFuzzer target: BPE encode/decode, the pre-tokeniser, the WikiText-2 row protocol
   and the xz reader (examples/common/bpe.c, data.c).

   Uses the real GPT-2 vocabulary from $WT2_DIR/gpt2 or ATTNKIT_DATA_DIR/gpt2
   (../shared/data/gpt2 from the repository root); without it, a small built-in
   vocabulary (the 256 bytes, a few merges, <|endoftext|>). Checks per input:
     - decode(encode(x)) == x and every id is in range (x: any bytes, invalid UTF-8 too);
     - encoding with the word cache (small, so it is flushed often) and the default
       merge loop == without cache and with the heap merge loop for every word;
     - the pre-tokeniser's pieces tile the input and are non-empty;
     - wt2_tokenize(x) decodes to the non-blank rows of x, each followed by EOT;
     - bpe_decode of the input read as uint16 ids: OK or BPE_ERANGE, never a crash;
     - wt2_xz_decode of the input: an error or a buffer, never a crash. */
#define _POSIX_C_SOURCE 200809L /* data.c uses stat, access, readlink */
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "../../examples/common/bpe.c"
#include "../../examples/common/data.c"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static bpe_tokenizer *g_tok, *g_nocache;

static bpe_tokenizer *load_one(void)
{
    bpe_tokenizer *t = NULL;
    char err[512];
    if (bpe_load_dir(&t, NULL, err, sizeof err) == BPE_OK) return t;
    {
        /* fallback vocabulary: 256 byte tokens + "he", "ll", "hell", "hello", " w", EOT */
        static const char *extra[] = {"he", "ll", "hell", "hello", "\xc4\xa0w", "<|endoftext|>"};
        static const char merges[] = "#version: 0.2\nh e\nl l\nhe ll\nhell o\n\xc4\xa0 w\n";
        bpe_bytes js = {0};
        int b, k, id = 0;
        char item[64];
        uint32_t cp_of_byte[256];
        int16_t byte_of_cp[324];
        bpe__byte_alphabet(cp_of_byte, byte_of_cp);
        bpe_bytes_append(&js, "{", 1);
        for (b = 0; b < 256; b++) {
            int n = snprintf(item, sizeof item, "%s\"\\u%04X\": %d", b ? ", " : "", (unsigned)cp_of_byte[b], id++);
            bpe_bytes_append(&js, item, (size_t)n);
        }
        for (k = 0; k < 6; k++) {
            bpe_bytes_append(&js, ", \"", 3);
            bpe_bytes_append(&js, extra[k], strlen(extra[k]));
            b = snprintf(item, sizeof item, "\": %d", id++);
            bpe_bytes_append(&js, item, (size_t)b);
        }
        bpe_bytes_append(&js, "}", 1);
        if (bpe_load_mem(&t, (const char *)js.data, js.n, merges, sizeof merges - 1, err, sizeof err) != BPE_OK) {
            fprintf(stderr, "fuzz_bpe: fallback vocabulary failed: %s\n", err);
            abort();
        }
        bpe_bytes_free(&js);
        return t;
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    bpe_ids ids = {0}, ids2 = {0};
    bpe_bytes back = {0};
    size_t i, p;
    if (!g_tok) {
        g_tok = load_one();
        g_nocache = load_one();
        bpe_set_cache_limit(g_tok, 64 << 10);
        bpe_set_cache_limit(g_nocache, 0);
        g_nocache->heap_min = 2;
    }
    /* round trip + cache equivalence */
    if (bpe_encode(g_tok, data, size, &ids) != BPE_OK) abort();
    if (bpe_encode(g_nocache, data, size, &ids2) != BPE_OK) abort();
    if (ids.n != ids2.n || (ids.n && memcmp(ids.data, ids2.data, ids.n * sizeof(int32_t)) != 0)) abort();
    for (i = 0; i < ids.n; i++)
        if (ids.data[i] < 0 || ids.data[i] >= bpe_vocab_size(g_tok)) abort();
    if (bpe_decode(g_tok, ids.data, ids.n, &back) != BPE_OK) abort();
    if (back.n != size || (size && memcmp(back.data, data, size) != 0)) abort();
    /* pre-tokeniser pieces tile the input */
    for (p = 0; p < size;) {
        size_t e = bpe_next_piece(data, size, p);
        if (e <= p || e > size) abort();
        p = e;
    }
    /* WikiText-2 protocol: decode == non-blank rows, each followed by EOT */
    ids.n = 0;
    back.n = 0;
    if (bpe_eot(g_tok) >= 0) {
        size_t rows = 0, q = 0, r = 0;
        if (wt2_tokenize(g_tok, data, size, &ids, &rows) != BPE_OK) abort();
        for (i = 0; i < ids.n; i++) {
            if (ids.data[i] == bpe_eot(g_tok)) {
                /* the bytes since the last EOT must be the next non-blank row */
                while (q < size) {
                    const unsigned char *nl = (const unsigned char *)memchr(data + q, '\n', size - q);
                    size_t e = nl ? (size_t)(nl - data) + 1 : size;
                    size_t s0 = q;
                    q = e;
                    if (!wt2_row_is_blank(data + s0, e - s0)) {
                        if (back.n != e - s0 || memcmp(back.data, data + s0, e - s0) != 0) abort();
                        break;
                    }
                }
                back.n = 0;
                r++;
            } else if (bpe_decode(g_tok, ids.data + i, 1, &back) != BPE_OK) {
                abort();
            }
        }
        if (r != rows || back.n != 0) abort();
    }
    /* arbitrary ids */
    {
        int32_t tmp[64];
        size_t n = size / 2 < 64 ? size / 2 : 64;
        int rc, bad = 0;
        for (i = 0; i < n; i++) {
            tmp[i] = (int32_t)(data[2 * i] | (data[2 * i + 1] << 8));
            if (tmp[i] >= bpe_vocab_size(g_tok)) bad = 1;
        }
        back.n = 0;
        rc = bpe_decode(g_tok, tmp, n, &back);
        if (rc != (bad ? BPE_ERANGE : BPE_OK)) abort();
    }
    /* xz reader */
    {
        unsigned char *out = NULL;
        size_t olen = 0;
        char err[256];
        int rc = wt2_xz_decode(data, size, 1 << 20, &out, &olen, err, sizeof err);
        if (rc == BPE_OK && !out) abort();
        if (rc != BPE_OK && out) abort();
        free(out);
    }
    bpe_ids_free(&ids);
    bpe_ids_free(&ids2);
    bpe_bytes_free(&back);
    return 0;
}
