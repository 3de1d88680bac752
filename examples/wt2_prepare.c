/* wt2_prepare - tokenise the WikiText-2 raw splits into GPT-2 ids (*.gpt2.u16).

     build/wt2_prepare [--data-dir DIR] [--out-dir DIR] [--vocab-dir DIR]
     build/wt2_prepare --check [--data-dir DIR]   verify the data files (sizes, sha256)
     build/wt2_prepare --help                     usage on stdout, exit 0

   --check: each file of ../shared/data/README.md's table (wiki.{test,valid}.raw.xz,
   wt2.{valid,test}.gpt2.u16, gpt2/encoder.json, gpt2/vocab.bpe) against its size and
   sha256, one line each: ok / missing / wrong size / wrong checksum; the train split
   (wiki.train.raw) is optional ("absent (optional)"). Exit 0 only when every required
   file is right, else 1. The old flag names --data, --out and --vocab still work
   (deprecated).

   DIR (default $WT2_DIR, else ATTNKIT_DATA_DIR = ../shared/data) may hold the full
   WikiText-2 raw set (wiki.{train,valid,test}.raw, plain or .xz) or only some splits;
   the program says which it found and which are missing. The protocol is the one in
   ../shared/data/README.md (rows split on '\n' keeping the '\n', blank rows dropped,
   <|endoftext|> after each row). Output: <out-dir>/wt2.<split>.gpt2.u16 (default
   runs/wt2_tokens). When the data directory holds reference files wt2.<split>.gpt2.u16,
   each output is compared with them byte for byte; a difference exits with status 1.

   Refused: an --out that would replace a reference file it is compared with (--out equal
   to the data directory: exit 2, nothing written); an unreadable input (a directory given
   where a file is expected, a raw split or reference that cannot be read: exit 1); an
   empty split (exit 1, no 0-byte token file). Each token file is written to
   "<file>.tmp", checked (every write, fsync, close) and renamed into place.
   Exit status: 0 all found splits prepared (and equal to their references); 1 a read or
   write failed, a split is empty, or an output differs from its reference; 2 bad
   options. */
#define _POSIX_C_SOURCE 200809L
#include "common/bpe.h"
#include "common/data.h"
#include "common/exio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: wt2_prepare [--data-dir DIR] [--out-dir DIR] [--vocab-dir DIR]\n"
            "       wt2_prepare --check [--data-dir DIR]\n"
            "  --data-dir DIR   WikiText-2 directory (default $WT2_DIR, else %s)\n"
            "  --out-dir DIR    where wt2.<split>.gpt2.u16 go (default runs/wt2_tokens)\n"
            "  --vocab-dir DIR  encoder.json + vocab.bpe (default <data-dir>/gpt2)\n"
            "  --check          verify the data directory's files against their known sizes and\n"
            "                   sha256 (one line per file; exit 0 only when all required are right)\n"
            "  --help           this text\n"
            "  (--data, --out and --vocab: deprecated names of the same flags)\n"
            "README, section \"Data\", says which files are needed and where they come from.\n",
            wt2_default_data_dir());
}

int main(int argc, char **argv)
{
    const char *data = NULL, *outdir = "runs/wt2_tokens", *vocab = NULL;
    char err[1024], vdir[1100];
    wt2_inventory inv;
    bpe_tokenizer *tok;
    int i, s, nfound = 0, nprepared = 0, mismatches = 0, check = 0;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if ((!strcmp(a, "--data-dir") || !strcmp(a, "--data")) && i + 1 < argc) data = argv[++i];
        else if ((!strcmp(a, "--out-dir") || !strcmp(a, "--out")) && i + 1 < argc) outdir = argv[++i];
        else if ((!strcmp(a, "--vocab-dir") || !strcmp(a, "--vocab")) && i + 1 < argc) vocab = argv[++i];
        else if (!strcmp(a, "--check")) check = 1;
        else {
            fprintf(stderr, "wt2_prepare: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!data) data = wt2_default_data_dir();
    if (check) {
        int bad;
        printf("checking %s against ../shared/data/README.md's sizes and sha256:\n", data);
        bad = wt2_check_files(data, stdout);
        if (bad)
            printf("%d file(s) missing or wrong: see README, section \"Data\", for where to get them\n", bad);
        else
            printf("all required files are right\n");
        if (fflush(stdout) != 0 || ferror(stdout)) return 1;
        return bad ? 1 : 0;
    }
    if (!vocab) {
        snprintf(vdir, sizeof vdir, "%s/gpt2", data);
        vocab = vdir;
    }
    if (wt2_scan(data, &inv) < 0) {
        fprintf(stderr, "wt2_prepare: data path too long\n");
        return 1;
    }
    wt2_describe(&inv, data, stdout);
    for (s = 0; s < WT2_NSPLITS; s++) nfound += inv.has_raw[s];
    if (nfound == 0) {
        fprintf(stderr, "wt2_prepare: no raw split (wiki.{train,valid,test}.raw[.xz]) in %s: point --data-dir or "
                        "WT2_DIR at the data; README, section \"Data\", says which files and where to get them\n",
                data);
        return 1;
    }
    if (!inv.has_raw[WT2_TRAIN])
        printf("note: the train split is missing: only %s%s%s can be prepared; training runs will "
               "train on valid and evaluate on test\n",
               inv.has_raw[WT2_VALID] ? "valid" : "", inv.has_raw[WT2_VALID] && inv.has_raw[WT2_TEST] ? " and " : "",
               inv.has_raw[WT2_TEST] ? "test" : "");
    /* an output must never replace the reference it is compared with */
    for (s = 0; s < WT2_NSPLITS; s++) {
        char outp[4200];
        if (!inv.has_raw[s] || !inv.has_u16[s]) continue;
        snprintf(outp, sizeof outp, "%s/wt2.%s.gpt2.u16", outdir, wt2_split_name(s));
        if (ex_same_file(outp, inv.u16_path[s])) {
            fprintf(stderr, "wt2_prepare: --out-dir %s would replace the reference %s that the output is compared "
                            "with: choose another --out-dir (nothing was written)\n", outdir, inv.u16_path[s]);
            return 2;
        }
    }
    if (bpe_load_dir(&tok, vocab, err, sizeof err) != BPE_OK) {
        fprintf(stderr, "wt2_prepare: cannot load the GPT-2 vocabulary (encoder.json, vocab.bpe) from %s: %s\n"
                        "  give --vocab-dir DIR; README, section \"Data\", says where the files come from\n",
                vocab, err);
        return 1;
    }
    if (wt2_mkdirs(outdir) != 0) {
        fprintf(stderr, "wt2_prepare: cannot create %s: %s\n", outdir, strerror(errno));
        bpe_free(tok);
        return 1;
    }
    for (s = 0; s < WT2_NSPLITS; s++) {
        unsigned char *text = NULL;
        size_t len = 0, rows = 0;
        bpe_ids ids = {0};
        char outp[4200];
        clock_t t0;
        double sec;
        int rc;
        if (!inv.has_raw[s]) continue;
        t0 = clock();
        rc = wt2_read_text(inv.raw_path[s], (size_t)1 << 30, &text, &len, err, sizeof err);
        if (rc) {
            fprintf(stderr, "wt2_prepare: %s\n", err);
            bpe_free(tok);
            return 1;
        }
        rc = wt2_tokenize(tok, text, len, &ids, &rows);
        free(text);
        if (rc) {
            fprintf(stderr, "wt2_prepare: tokenising %s failed: %s\n", inv.raw_path[s], bpe_strerror(rc));
            bpe_ids_free(&ids);
            bpe_free(tok);
            return 1;
        }
        sec = (double)(clock() - t0) / CLOCKS_PER_SEC;
        if (ids.n == 0) {
            /* an empty (or all-blank) split would become a 0-byte token file that every
               loader refuses: say so here instead of reporting success */
            fprintf(stderr, "wt2_prepare: %s: no tokens (%zu bytes, no non-blank row): refusing to write an empty "
                            "token file\n", inv.raw_path[s], len);
            bpe_ids_free(&ids);
            bpe_free(tok);
            return 1;
        }
        snprintf(outp, sizeof outp, "%s/wt2.%s.gpt2.u16", outdir, wt2_split_name(s));
        rc = wt2_write_u16(outp, ids.data, ids.n, err, sizeof err);
        if (rc) {
            fprintf(stderr, "wt2_prepare: %s\n", err);
            bpe_ids_free(&ids);
            bpe_free(tok);
            return 1;
        }
        printf("%-5s %zu bytes, %zu rows kept, %zu ids (incl. one <|endoftext|> per row) -> %s (%.2f s)\n",
               wt2_split_name(s), len, rows, ids.n, outp, sec);
        printf("      sequential chunks: T=256 %zu (%.2f%% of targets), T=1024 %zu (%.2f%%)\n",
               wt2_num_chunks(ids.n, 256), 100.0 * wt2_coverage(ids.n, 256), wt2_num_chunks(ids.n, 1024),
               100.0 * wt2_coverage(ids.n, 1024));
        nprepared++;
        if (inv.has_u16[s]) {
            uint16_t *ref = NULL;
            size_t nref = 0, k;
            if (wt2_load_u16(inv.u16_path[s], 0, &ref, &nref, err, sizeof err) != BPE_OK) {
                /* a read error is an error: the comparison did not happen */
                fprintf(stderr, "wt2_prepare: cannot read the reference %s: %s\n", inv.u16_path[s], err);
                mismatches++;
            } else {
                for (k = 0; k < nref && k < ids.n && ref[k] == (uint16_t)ids.data[k]; k++) {}
                if (k == nref && k == ids.n) {
                    printf("      identical to the reference %s (%zu ids)\n", inv.u16_path[s], nref);
                } else {
                    printf("      DIFFERS from the reference %s: first difference at id %zu (%zu vs %zu ids)\n",
                           inv.u16_path[s], k, ids.n, nref);
                    mismatches++;
                }
                free(ref);
            }
        }
        bpe_ids_free(&ids);
    }
    bpe_free(tok);
    printf("prepared %d split(s) into %s%s\n", nprepared, outdir,
           mismatches ? "; MISMATCH with (or unreadable) reference ids" : "");
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "wt2_prepare: writing the report to stdout failed: %s\n", strerror(errno));
        return 1;
    }
    return mismatches ? 1 : 0;
}
