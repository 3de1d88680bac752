/* libFuzzer target: the encoder.json / vocab.bpe loaders of examples/common/bpe.c.

   Input: <encoder.json bytes> [ "\0\0" <vocab.bpe bytes> ]. Every input must either be
   rejected with an error code and a message, or load; a loaded tokenizer must then
   round-trip arbitrary bytes (decode(encode(x)) == x, all ids in range), which holds
   for every well-formed vocabulary because the loader checks that all 256 bytes are
   tokens and that every merge result is the concatenation of its two parts.
   Build and run: make fuzz FUZZ_SECONDS=N (clang -fsanitize=fuzzer,address,undefined). */
#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>
#undef STB_DS_IMPLEMENTATION
#include "../../examples/common/bpe.c"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    size_t split = size, i;
    bpe_tokenizer *tok = NULL;
    char err[256];
    int rc;
    for (i = 0; i + 1 < size; i++)
        if (data[i] == 0 && data[i + 1] == 0) {
            split = i;
            break;
        }
    err[0] = 0;
    rc = bpe_load_mem(&tok, (const char *)data, split, split + 2 <= size ? (const char *)data + split + 2 : NULL,
                      split + 2 <= size ? size - split - 2 : 0, err, sizeof err);
    if (rc != BPE_OK) {
        /* rejected: a code, a message, nothing allocated */
        if (tok != NULL || rc >= 0 || err[0] == 0 || strlen(err) >= sizeof err) abort();
        return 0;
    }
    if (!tok || bpe_vocab_size(tok) < 256) abort();
    {
        static const char sample[] = "Hello world, it's 2024! \xff\xfe caf\xc3\xa9  \t\n x";
        const unsigned char *texts[2];
        size_t lens[2];
        int k;
        texts[0] = (const unsigned char *)sample;
        lens[0] = sizeof sample - 1;
        texts[1] = data;
        lens[1] = size;
        for (k = 0; k < 2; k++) {
            bpe_ids ids = {0};
            bpe_bytes back = {0};
            if (bpe_encode(tok, texts[k], lens[k], &ids) != BPE_OK) abort();
            for (i = 0; i < ids.n; i++)
                if (ids.data[i] < 0 || ids.data[i] >= bpe_vocab_size(tok)) abort();
            if (bpe_decode(tok, ids.data, ids.n, &back) != BPE_OK) abort();
            if (back.n != lens[k] || (lens[k] && memcmp(back.data, texts[k], lens[k]) != 0)) abort();
            bpe_ids_free(&ids);
            bpe_bytes_free(&back);
        }
    }
    bpe_free(tok);
    return 0;
}
