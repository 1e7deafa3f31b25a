/* ckpt: local model checkpoints (docs/traces.md "Router traces from local
 * weights"): the safetensors reader (every header check of the file format,
 * the index file, BF16/F16/F32 to f32 exactly, the checkpoint fingerprint),
 * the tiny deterministic test checkpoint, the f32 forward pass of the
 * supported decoders and `plena trace route`'s routing rows.
 *
 * Weights are read through a read-only mmap of each file; nothing is
 * downloaded, no tokenizer is involved (inputs are token ids). */
#ifndef PLENA_CKPT_CKPT_H
#define PLENA_CKPT_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* ---- safetensors (docs/traces.md "safetensors reader") ---- */

/* The dtypes plena converts; any other dtype (valid safetensors or not) is
 * refused naming it. */
enum plena_st_dtype { PLENA_ST_BF16, PLENA_ST_F16, PLENA_ST_F32 };
#define PLENA_ST_MAX_DIMS   8
#define PLENA_ST_MAX_HEADER (100u * 1024u * 1024u) /* 100 MiB */

struct plena_st_tensor {
    char *name;
    enum plena_st_dtype dtype;
    uint32_t ndim;
    uint64_t shape[PLENA_ST_MAX_DIMS];
    uint64_t count;      /* elements */
    const uint8_t *data; /* into the file's bytes (the mmap) */
    uint64_t begin, end; /* data_offsets, relative to the data section */
    uint32_t file;       /* index into the checkpoint's files (0 for a lone header) */
};

/* One parsed header: tensors sorted by name. */
struct plena_st_header {
    uint64_t header_len; /* N */
    size_t n_tensors;
    struct plena_st_tensor *tensors;
};

/* Parses and checks the header of a complete safetensors file held in
 * bytes[0..len): the 8-byte little-endian length N <= 100 MiB, N bytes of JSON
 * (an object; tensor name -> {dtype, shape, data_offsets}, optional
 * __metadata__ of string values; duplicate names rejected), known dtypes,
 * shapes of non-negative integers, element count x dtype size == end - begin
 * without overflow, offsets inside the file, no two tensors overlapping.
 * `where` (the file name) prefixes every message. PLENA_E_INPUT on any
 * violation, PLENA_E_NOMEM. The fuzz target calls this. */
int plena_st_parse(const uint8_t *bytes, uint64_t len, const char *where, struct plena_st_header *h,
                   struct plena_err *err);
void plena_st_header_free(struct plena_st_header *h);
/* qsort/bsearch order of struct plena_st_tensor: by name (strcmp). */
int plena_st_tensor_cmp_name(const void *a, const void *b);
/* "BF16", "F16", "F32". */
const char *plena_st_dtype_name(enum plena_st_dtype d);
/* Element i of t as f32 (BF16 and F16 widen exactly; data little-endian). */
float plena_st_get(const struct plena_st_tensor *t, uint64_t i);
/* All t->count elements into out[] (exact conversion). */
void plena_st_to_f32(const struct plena_st_tensor *t, float *out);

/* ---- checkpoint directory ---- */

struct plena_ckpt_file {
    char *name; /* base name */
    uint64_t size;
    const uint8_t *map; /* mmap of the whole file */
    uint64_t header_len;
};

struct plena_ckpt {
    char *dir;
    char *config_text; /* config.json's bytes, NUL-terminated */
    size_t config_len;
    size_t n_files;
    struct plena_ckpt_file *files; /* in name order */
    size_t n_tensors;
    struct plena_st_tensor *tensors; /* sorted by name */
    char fingerprint[65];
};

/* Opens DIR: config.json, then model.safetensors.index.json's weight_map
 * (each tensor must be in the file it names) or every *.safetensors in name
 * order; a tensor present twice is an error. Files are mapped read-only. */
int plena_ckpt_open(const char *dir, struct plena_ckpt *c, struct plena_err *err);
void plena_ckpt_close(struct plena_ckpt *c);
/* The tensor of that name, or NULL. */
const struct plena_st_tensor *plena_ckpt_find(const struct plena_ckpt *c, const char *name);
/* *t = the tensor `name`, which must have exactly this shape. Missing or
 * wrong shape: PLENA_E_INPUT naming tensor, file and both shapes. */
int plena_ckpt_tensor(const struct plena_ckpt *c, const char *name, uint32_t ndim,
                      const uint64_t *shape, const struct plena_st_tensor **t,
                      struct plena_err *err);
/* The tensor `name` with exactly this shape, converted to f32 into a new
 * array (plena_free). Missing or wrong shape: PLENA_E_INPUT naming tensor,
 * file and both shapes. */
int plena_ckpt_load(const struct plena_ckpt *c, const char *name, uint32_t ndim,
                    const uint64_t *shape, float **out, struct plena_err *err);

/* The checkpoint fingerprint (docs/traces.md "Checkpoint fingerprint"):
 * SHA-256 over u64le(len(config)) config, then per file in name order
 * u64le(len(name)) name u64le(file size) u64le(N) header bytes. */
void plena_ckpt_fingerprint(const char *config, size_t config_len,
                            const struct plena_ckpt_file *files, size_t n_files, char out[65]);

#endif
