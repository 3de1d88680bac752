/* ckpt.h - checkpoints in the safetensors format: a writer (atomic) and a fully
   validating reader, with no dependency beyond the C library and POSIX file calls.

   Part of attnkit's examples/common (code the example programs share; not a mechanism
   header). examples/wt2_train.c saves its weights, optimizer moments, RNG, data-loader
   and controller state with it; PyTorch reads the files with
   `safetensors.torch.load_file(path)`.

   File format (safetensors): an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON
       {"__metadata__":{"k":"v",...},
        "name":{"dtype":"F32","shape":[2,3],"data_offsets":[b,e]}, ...}
   padded with spaces, then the data section; [b, e) is relative to the data section.
   As in the reference implementation the tensors must tile the data section exactly:
   no overlaps, no holes, no trailing bytes.

   Writer layout. ckpt_write keeps the caller's order in the JSON header (that is the
   "file order" ckpt_entry_at reports back), pads the header with spaces so that the
   data section starts on an 8-byte boundary of the file, and lays the tensor bytes out
   with no gaps (the reference loader refuses gaps): first every 8-byte-dtype tensor
   (F64, I64), then the 4-byte ones (F32, I32), then U8, each group in the caller's
   order. So every tensor offset is a multiple of its element size and every F64/I64
   offset a multiple of 8. The metadata always holds "format":"pt" (unless the caller
   gives its own "format"), "attnkit.crc32": the CRC-32 (IEEE 802.3 / zlib, 8
   lower-case hex digits) of the whole data section, and "attnkit.hcrc32": the CRC-32 of
   the header's content (every other metadata pair, the data CRC included, and every
   tensor's name, dtype, shape and data_offsets, in file order, in the canonical encoding
   described at ckpt__hcrc_begin in ckpt.c), both of which ckpt_open checks: a renamed
   tensor, an edited metadata value or two swapped offsets fail like a flipped data byte.

   Checkpoint format versions (ckpt_format): 2 has both checksums (written since issue
   37); 1 has only attnkit.crc32 (older attnkit files: their header is not covered);
   0 has neither (a foreign safetensors file, e.g. PyTorch's). ckpt_open reads all three
   and checks what is there; a caller that must know the header is covered (wt2_train's
   --resume) asks ckpt_format and refuses below 2 unless told otherwise. The file
   goes to "<path>.tmp.<pid>", is fsync'ed, renamed over path, and the directory is
   fsync'ed; on any error the temporary file is removed and an existing file at path is
   left untouched.

   Reader. ckpt_open reads the whole file into memory and validates everything before
   returning: header length within the file (at most 100,000,000 bytes as in the
   reference), a strict JSON parser of our own (escapes including \uXXXX and surrogate
   pairs, UTF-8 checked, duplicate keys, trailing garbage and any nesting the format does
   not use are refused), each tensor with exactly dtype/shape/data_offsets, known dtype
   (F32 F64 I64 I32 U8; anything else is CKPT_EFORMAT naming the dtype), ndim <= 4,
   e - b == numel * element size with overflow checks, the exact tiling above, and the
   CRC when present. Names: 1..4096 bytes of UTF-8 without NUL; metadata keys and values
   are strings without NUL.
   Alignment: the data section is held in its own malloc'ed block, so a tensor whose
   offset is a multiple of its element size is naturally aligned in memory; a tensor of
   a foreign file whose offset is not (possible only for files not written by
   ckpt_write) is copied to an aligned private buffer at open, so the data pointers
   that ckpt_entry_at/ckpt_find hand out are always aligned for their dtype (U8 has no
   alignment need). ckpt_read_into copies with memcpy: dst needs no particular
   alignment.

   Data is host byte order, which must be little-endian (both functions refuse to run
   on a big-endian host with CKPT_EINVAL).

   Usage:
       float w[6] = {1, 2, 3, 4, 5, 6};
       ckpt_entry e = {"layer.w", CKPT_F32, 2, {2, 3, 0, 0}, w};
       const char *k[1] = {"step"}, *v[1] = {"100"};
       char err[256];
       ckpt_file *f;
       int64_t shape[2] = {2, 3};
       if (ckpt_write("model.safetensors", &e, 1, k, v, 1, err, sizeof err)) puts(err);
       if (ckpt_open(&f, "model.safetensors", err, sizeof err) == CKPT_OK) {
           ckpt_read_into(f, "layer.w", CKPT_F32, 2, shape, w, err, sizeof err);
           printf("step %s\n", ckpt_meta(f, "step"));
           ckpt_close(f);
       }

   Errors: CKPT_OK 0; CKPT_EINVAL (bad argument), CKPT_ENOMEM, CKPT_EIO (cannot open,
   read, write, fsync or rename), CKPT_EFORMAT (malformed or corrupted file),
   CKPT_ENOTFOUND (no such tensor), CKPT_EMISMATCH (dtype/shape differ from the
   expected ones). Functions that take err write a one-line message there (err may be
   NULL). Thread safety: an open ckpt_file is read-only and may be shared.

   Version 0.2 (checkpoint format 2). License: MIT (see the end of ckpt.c). */
#ifndef ATTNKIT_CKPT_H
#define ATTNKIT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    CKPT_OK = 0,
    CKPT_EINVAL = -1,
    CKPT_ENOMEM = -2,
    CKPT_EIO = -3,
    CKPT_EFORMAT = -4,
    CKPT_ENOTFOUND = -5,
    CKPT_EMISMATCH = -6
};
enum { CKPT_F32 = 0, CKPT_F64 = 1, CKPT_I64 = 2, CKPT_I32 = 3, CKPT_U8 = 4 };
#define CKPT_MAX_NDIM 4

typedef struct ckpt_entry {
    const char *name;  /* unique, 1..255 bytes, printable ASCII, not "__metadata__" */
    int dtype;         /* CKPT_* */
    int ndim;          /* 0..4 (0: scalar) */
    int64_t shape[4];  /* shape[0..ndim-1] >= 0 */
    const void *data;  /* numel * dtype size bytes, host little-endian (NULL if 0 bytes) */
} ckpt_entry;

const char *ckpt_strerror(int err);
/* "F32", "F64", "I64", "I32", "U8"; NULL for an unknown dtype. */
const char *ckpt_dtype_name(int dtype);
/* Bytes per element, 0 for an unknown dtype. */
size_t ckpt_dtype_size(int dtype);

/* Write a safetensors file atomically (see the top of this file). meta_keys/meta_vals:
   n_meta UTF-8 strings (no NUL), written JSON-escaped in "__metadata__"; keys unique,
   "attnkit.crc32" and "attnkit.hcrc32" reserved. */
int ckpt_write(const char *path, const ckpt_entry *entries, int n, const char *const *meta_keys,
               const char *const *meta_vals, int n_meta, char *err, size_t errlen);
/* The same bytes into a malloc'ed buffer (*out, *len; free with free()). */
int ckpt_write_mem(void **out, size_t *len, const ckpt_entry *entries, int n,
                   const char *const *meta_keys, const char *const *meta_vals, int n_meta,
                   char *err, size_t errlen);

typedef struct ckpt_file ckpt_file; /* opaque: the data in memory plus a parsed index */

/* Read and fully validate a file. On error *out is NULL. */
int ckpt_open(ckpt_file **out, const char *path, char *err, size_t errlen);
/* The same from a memory buffer (copied). */
int ckpt_open_mem(ckpt_file **out, const void *buf, size_t len, char *err, size_t errlen);
void ckpt_close(ckpt_file *f); /* NULL is a no-op */

int ckpt_count(const ckpt_file *f); /* number of tensors; 0 for NULL */
/* i-th tensor in file (JSON header) order; pointers stay valid until ckpt_close. */
int ckpt_entry_at(const ckpt_file *f, int i, ckpt_entry *e);
/* CKPT_ENOTFOUND if absent. */
int ckpt_find(const ckpt_file *f, const char *name, ckpt_entry *e);
/* Copy a tensor into dst after checking that dtype, ndim and shape equal the expected
   ones: CKPT_EMISMATCH with a message such as
   "blocks.0.attn.qkv.weight: shape (384,128) in file, (384,256) expected". */
int ckpt_read_into(const ckpt_file *f, const char *name, int dtype, int ndim,
                   const int64_t *shape, void *dst, char *err, size_t errlen);

/* The checkpoint format version of an open file: 2, 1 or 0 (see the top of this file). */
int ckpt_format(const ckpt_file *f);

/* Metadata value for key, or NULL. */
const char *ckpt_meta(const ckpt_file *f, const char *key);
int ckpt_meta_count(const ckpt_file *f);
/* i-th metadata pair in file order; CKPT_EINVAL if out of range. */
int ckpt_meta_at(const ckpt_file *f, int i, const char **key, const char **val);

#ifdef __cplusplus
}
#endif

#endif /* ATTNKIT_CKPT_H */
