/* bpe - GPT-2 byte-level BPE tokenizer on the command line.

     build/bpe encode [--vocab-dir DIR] < text.txt     ids, space-separated, one line
     build/bpe decode [--vocab-dir DIR] < ids.txt      the bytes of the ids
     build/bpe info   [--vocab-dir DIR]                vocabulary summary
     build/bpe --help                                  usage on stdout, exit 0

   DIR holds encoder.json and vocab.bpe. Where the vocabulary is looked for, first found
   wins: --vocab-dir DIR (--vocab DIR is the old name), --data-dir D (D/gpt2),
   $ATTNKIT_VOCAB_DIR, $WT2_DIR/gpt2, else ATTNKIT_DATA_DIR/gpt2 (../shared/data/gpt2,
   from the current directory or else from the executable's: see wt2_default_data_dir in
   data.h) -- so a binary copied out of the tree needs the flag or the variable. Any bytes are accepted by encode
   (invalid UTF-8 is encoded byte-level); decode reads decimal ids separated by
   whitespace or commas (so "[15496, 995]" works too). */
#include "common/bpe.h"
#include "common/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bpe encode|decode|info [--vocab-dir DIR | --data-dir D]\n"
            "  encode: UTF-8 text on stdin -> ids on one line on stdout\n"
            "  decode: ids on stdin -> bytes on stdout\n"
            "  info:   vocabulary summary\n"
            "  --vocab-dir DIR  folder with encoder.json and vocab.bpe (--vocab DIR: the old name)\n"
            "  --data-dir D     the data directory: the vocabulary is D/gpt2\n"
            "  --help           this text\n"
            "Without a flag: $ATTNKIT_VOCAB_DIR, else $WT2_DIR/gpt2, else the built-in %s/gpt2\n"
            "(relative paths also tried from the executable's directory). README, section \"Data\",\n"
            "says where the files come from.\n",
            bpe_default_data_dir());
}

static int read_stdin(bpe_bytes *in)
{
    unsigned char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, stdin)) > 0)
        if (bpe_bytes_append(in, buf, got) != BPE_OK) return BPE_ENOMEM;
    return ferror(stdin) ? BPE_EIO : BPE_OK;
}

int main(int argc, char **argv)
{
    const char *mode, *dir = NULL, *ddir = NULL, *how = "the built-in default";
    bpe_tokenizer *tok;
    bpe_bytes in = {0}, outb = {0};
    bpe_ids ids = {0};
    char err[1024], vdir[4200];
    int rc, i;
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    mode = argv[1];
    for (i = 2; i < argc; i++) {
        if ((!strcmp(argv[i], "--vocab-dir") || !strcmp(argv[i], "--vocab") || !strcmp(argv[i], "-v")) && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--data-dir") && i + 1 < argc)
            ddir = argv[++i];
        else {
            fprintf(stderr, "bpe: unknown or incomplete option '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (strcmp(mode, "encode") && strcmp(mode, "decode") && strcmp(mode, "info")) {
        fprintf(stderr, "bpe: unknown mode '%s' (valid: encode, decode, info)\n", mode);
        usage(stderr);
        return 2;
    }
    if (dir) {
        how = "--vocab-dir";
    } else if (ddir) {
        snprintf(vdir, sizeof vdir, "%s/gpt2", ddir);
        dir = vdir;
        how = "--data-dir";
    } else if (getenv("ATTNKIT_VOCAB_DIR") && getenv("ATTNKIT_VOCAB_DIR")[0]) {
        dir = getenv("ATTNKIT_VOCAB_DIR");
        how = "$ATTNKIT_VOCAB_DIR";
    } else {
        /* $WT2_DIR, else the built-in data directory, found from the executable when it is relative */
        snprintf(vdir, sizeof vdir, "%s/gpt2", wt2_default_data_dir());
        dir = vdir;
        if (getenv("WT2_DIR") && getenv("WT2_DIR")[0]) how = "$WT2_DIR";
    }
    rc = bpe_load_dir(&tok, dir, err, sizeof err);
    if (rc != BPE_OK) {
        fprintf(stderr, "bpe: cannot load the GPT-2 vocabulary (encoder.json, vocab.bpe) from '%s' (%s): %s (%s)\n"
                        "  Point at it with --vocab-dir DIR or ATTNKIT_VOCAB_DIR=DIR (or --data-dir D / WT2_DIR=D for "
                        "D/gpt2); README, section \"Data\", says where the files come from.\n",
                dir, how, err, bpe_strerror(rc));
        return 1;
    }
    if (!strcmp(mode, "info")) {
        printf("vocab %d tokens, %d merges, <|endoftext|> id %d, Unicode tables %s\n",
               bpe_vocab_size(tok), bpe_num_merges(tok), bpe_eot(tok), bpe_unicode_version());
        bpe_free(tok);
        return 0;
    }
    if ((rc = read_stdin(&in)) != BPE_OK) {
        fprintf(stderr, "bpe: reading stdin: %s\n", bpe_strerror(rc));
        bpe_free(tok);
        return 1;
    }
    if (!strcmp(mode, "encode")) {
        size_t k;
        rc = bpe_encode(tok, in.data, in.n, &ids);
        if (rc != BPE_OK) {
            fprintf(stderr, "bpe: encode: %s\n", bpe_strerror(rc));
        } else {
            for (k = 0; k < ids.n; k++) printf(k ? " %d" : "%d", (int)ids.data[k]);
            printf("\n");
        }
    } else {
        size_t p = 0;
        rc = BPE_OK;
        while (p < in.n && rc == BPE_OK) {
            unsigned char c = in.data[p];
            if (c >= '0' && c <= '9') {
                long v = 0;
                while (p < in.n && in.data[p] >= '0' && in.data[p] <= '9') {
                    v = v * 10 + (in.data[p++] - '0');
                    if (v > 0x7fffffffL) v = 0x7fffffffL;
                }
                if (v >= bpe_vocab_size(tok)) {
                    fprintf(stderr, "bpe: decode: id %ld out of range [0, %d)\n", v, bpe_vocab_size(tok));
                    rc = BPE_ERANGE;
                } else {
                    rc = bpe_ids_push(&ids, (int32_t)v);
                }
            } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || c == '[' ||
                       c == ']') {
                p++;
            } else {
                fprintf(stderr, "bpe: decode: unexpected character '%c' at byte %zu (expected ids)\n",
                        (c >= 0x20 && c < 0x7f) ? c : '?', p);
                rc = BPE_EFORMAT;
            }
        }
        if (rc == BPE_OK) rc = bpe_decode(tok, ids.data, ids.n, &outb);
        if (rc == BPE_OK && outb.n) fwrite(outb.data, 1, outb.n, stdout);
    }
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == BPE_OK) {
        fprintf(stderr, "bpe: writing stdout failed: %s\n", errno ? strerror(errno) : "I/O error");
        rc = BPE_EIO;
    }
    bpe_bytes_free(&in);
    bpe_bytes_free(&outb);
    bpe_ids_free(&ids);
    bpe_free(tok);
    return rc == BPE_OK ? 0 : 1;
}
