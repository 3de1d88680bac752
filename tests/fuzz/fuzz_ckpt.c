/* libFuzzer target: the safetensors reader of examples/common/ckpt.c (ckpt_open_mem).

   Every input must either be rejected (a negative code, a non-empty message, *out NULL)
   or load; a loaded file must then be self-consistent: every tensor has a known dtype,
   0..4 dimensions, a data pointer aligned for its dtype, ckpt_find finds it by name
   and ckpt_read_into copies exactly its bytes; and writing it back with ckpt_write_mem
   (when its names are ones the writer accepts) must give a file that loads to the same
   tensors and metadata, in checkpoint format 2 (both checksums). Seeds *_v2 are format-2
   files (header checksum), the others format 1 or foreign.
   Build and run: make fuzz FUZZ_SECONDS=N (clang -fsanitize=fuzzer,address,undefined),
   or make build/fuzz/fuzz_ckpt && build/fuzz/fuzz_ckpt tests/fuzz/seeds_fuzz_ckpt. */
#include "../../examples/common/ckpt.c"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static size_t fz_bytes(const ckpt_entry *e)
{
    size_t n = ckpt_dtype_size(e->dtype);
    int d;
    for (d = 0; d < e->ndim; d++) n *= (size_t)e->shape[d];
    return n;
}

static int fz_writer_name(const char *s)
{
    size_t n = strlen(s), i;
    if (n == 0 || n > 255 || strcmp(s, "__metadata__") == 0) return 0;
    for (i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    ckpt_file *f = (ckpt_file *)&size, *g = NULL;
    char err[256];
    int rc, i, n, nm, writable = 1;
    ckpt_entry *es;
    const char **mk, **mv;
    int nmw = 0;
    void *mem = NULL;
    size_t mlen = 0;
    err[0] = 0;
    rc = ckpt_open_mem(&f, data, size, err, sizeof err);
    if (rc != CKPT_OK) {
        if (f != NULL || rc >= 0 || err[0] == 0 || strlen(err) >= sizeof err) abort();
        return 0;
    }
    if (!f) abort();
    /* the format says which checksums were there (and so were checked) */
    if (ckpt_format(f) != (ckpt_meta(f, "attnkit.hcrc32") ? 2 : ckpt_meta(f, "attnkit.crc32") ? 1 : 0)) abort();
    n = ckpt_count(f);
    nm = ckpt_meta_count(f);
    es = (ckpt_entry *)calloc((size_t)(n ? n : 1), sizeof *es);
    mk = (const char **)calloc((size_t)(nm ? nm : 1), sizeof *mk);
    mv = (const char **)calloc((size_t)(nm ? nm : 1), sizeof *mv);
    if (!es || !mk || !mv) abort();
    for (i = 0; i < n; i++) {
        ckpt_entry e2;
        size_t nb, sz;
        unsigned char *buf;
        if (ckpt_entry_at(f, i, &es[i]) != CKPT_OK) abort();
        sz = ckpt_dtype_size(es[i].dtype);
        if (sz == 0 || es[i].ndim < 0 || es[i].ndim > 4 || !es[i].name || !es[i].name[0]) abort();
        nb = fz_bytes(&es[i]);
        if (nb && (!es[i].data || (uintptr_t)es[i].data % sz != 0)) abort();
        if (ckpt_find(f, es[i].name, &e2) != CKPT_OK || e2.data != es[i].data || strcmp(e2.name, es[i].name) != 0) abort();
        buf = (unsigned char *)malloc(nb ? nb : 1);
        if (!buf) abort();
        if (ckpt_read_into(f, es[i].name, es[i].dtype, es[i].ndim, es[i].shape, buf, err, sizeof err) != CKPT_OK) abort();
        if (nb && memcmp(buf, es[i].data, nb) != 0) abort();
        free(buf);
        if (!fz_writer_name(es[i].name)) writable = 0;
    }
    for (i = 0; i < nm; i++) {
        const char *k, *v;
        if (ckpt_meta_at(f, i, &k, &v) != CKPT_OK || !k || !v) abort();
        if (ckpt_meta(f, k) != v) abort(); /* keys are unique */
        if (strcmp(k, "attnkit.crc32") == 0 || strcmp(k, "attnkit.hcrc32") == 0) continue; /* the writer's own */
        mk[nmw] = k;
        mv[nmw] = v;
        nmw++;
    }
    if (writable) {
        if (ckpt_write_mem(&mem, &mlen, es, n, mk, mv, nmw, err, sizeof err) != CKPT_OK) abort();
        if (ckpt_open_mem(&g, mem, mlen, err, sizeof err) != CKPT_OK) abort();
        if (ckpt_count(g) != n || ckpt_format(g) != 2) abort();
        for (i = 0; i < n; i++) {
            ckpt_entry e2;
            int d;
            if (ckpt_entry_at(g, i, &e2) != CKPT_OK || strcmp(e2.name, es[i].name) != 0) abort();
            if (e2.dtype != es[i].dtype || e2.ndim != es[i].ndim) abort();
            for (d = 0; d < e2.ndim; d++)
                if (e2.shape[d] != es[i].shape[d]) abort();
            if (fz_bytes(&e2) && memcmp(e2.data, es[i].data, fz_bytes(&e2)) != 0) abort();
        }
        for (i = 0; i < nmw; i++) {
            const char *v = ckpt_meta(g, mk[i]);
            if (!v || strcmp(v, mv[i]) != 0) abort();
        }
        ckpt_close(g);
        free(mem);
    }
    free(es);
    free((void *)mk);
    free((void *)mv);
    ckpt_close(f);
    return 0;
}
