/* The safetensors header parser and the exact dtype conversions
 * (docs/traces.md "safetensors reader"). The parser trusts nothing: it sees
 * the whole file as bytes, so the fuzz target (fuzz/fuzz_safetensors.c) and
 * the mmap reader go through the same checks. */
#include <jansson.h>

#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "common/alloc.h"
#include "num/num.h"

static const struct {
    const char *name;
    unsigned size;
} dtypes[] = {
    [PLENA_ST_BF16] = {"BF16", 2}, [PLENA_ST_F16] = {"F16", 2}, [PLENA_ST_F32] = {"F32", 4}};

const char *plena_st_dtype_name(enum plena_st_dtype d)
{
    return dtypes[d].name;
}

static int parse_dtype(const char *s, enum plena_st_dtype *d)
{
    for (unsigned i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (!strcmp(s, dtypes[i].name)) {
            *d = (enum plena_st_dtype)i;
            return 0;
        }
    return -1;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

void plena_st_header_free(struct plena_st_header *h)
{
    if (!h) return;
    for (size_t i = 0; i < h->n_tensors; i++)
        plena_free(h->tensors[i].name);
    plena_free(h->tensors);
    h->tensors = NULL;
    h->n_tensors = 0;
}

/* A non-negative JSON integer; -1 otherwise. */
static int get_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int parse_shape(const json_t *shape, struct plena_st_tensor *t, const char *where,
                       struct plena_err *err)
{
    if (!json_is_array(shape))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "tensor '%s': shape must be an array",
                          t->name);
    if (json_array_size(shape) > PLENA_ST_MAX_DIMS)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "tensor '%s': %zu dimensions (at most %d)",
                          t->name, json_array_size(shape), PLENA_ST_MAX_DIMS);
    t->ndim = (uint32_t)json_array_size(shape);
    t->count = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
        if (get_u64(json_array_get(shape, d), &t->shape[d]))
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "tensor '%s': shape[%u] must be a non-negative integer", t->name, d);
        if (t->shape[d] && t->count > UINT64_MAX / t->shape[d])
            return PLENA_FAIL(err, PLENA_E_INPUT, where,
                              "tensor '%s': element count overflows 64 bits", t->name);
        t->count *= t->shape[d];
    }
    return 0;
}

static int parse_tensor(const char *name, const json_t *v, uint64_t data_len, const char *where,
                        struct plena_st_tensor *t, struct plena_err *err)
{
    t->name = plena_strdup(name);
    if (!t->name) return PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    if (!json_is_object(v))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "tensor '%s': expected an object", name);
    const char *key;
    json_t *m;
    json_object_foreach((json_t *)v, key, m)
    {
        if (strcmp(key, "dtype") && strcmp(key, "shape") && strcmp(key, "data_offsets"))
            return PLENA_FAIL(err, PLENA_E_INPUT, where, "tensor '%s': unknown key '%s'", name,
                              key);
    }
    const json_t *dt = json_object_get(v, "dtype");
    if (!json_is_string(dt))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "tensor '%s': dtype must be a string", name);
    if (parse_dtype(json_string_value(dt), &t->dtype))
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "tensor '%s': unknown or unsupported dtype '%s' (expected BF16, F16 or "
                          "F32)",
                          name, json_string_value(dt));
    if (parse_shape(json_object_get(v, "shape"), t, where, err)) return err->code;
    const json_t *off = json_object_get(v, "data_offsets");
    if (!json_is_array(off) || json_array_size(off) != 2 ||
        get_u64(json_array_get(off, 0), &t->begin) || get_u64(json_array_get(off, 1), &t->end))
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "tensor '%s': data_offsets must be [begin, end] of non-negative integers",
                          name);
    if (t->begin > t->end)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "tensor '%s': data_offsets begin %llu > end %llu", name,
                          (unsigned long long)t->begin, (unsigned long long)t->end);
    unsigned size = dtypes[t->dtype].size;
    if (t->count > UINT64_MAX / size)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "tensor '%s': byte size overflows 64 bits",
                          name);
    if (t->count * size != t->end - t->begin)
        return PLENA_FAIL(
            err, PLENA_E_INPUT, where,
            "tensor '%s': %llu elements of %s need %llu bytes, data_offsets span %llu", name,
            (unsigned long long)t->count, dtypes[t->dtype].name,
            (unsigned long long)(t->count * size), (unsigned long long)(t->end - t->begin));
    if (t->end > data_len)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "tensor '%s': data_offsets end %llu is past the end of the data (%llu "
                          "bytes; file truncated?)",
                          name, (unsigned long long)t->end, (unsigned long long)data_len);
    return 0;
}

static int check_metadata(const json_t *v, const char *where, struct plena_err *err)
{
    if (!json_is_object(v))
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "__metadata__ must be an object");
    const char *key;
    json_t *m;
    json_object_foreach((json_t *)v, key, m)
    {
        if (!json_is_string(m))
            return PLENA_FAIL(err, PLENA_E_INPUT, where, "__metadata__.%s must be a string", key);
    }
    return 0;
}

static int by_begin(const void *a, const void *b)
{
    const struct plena_st_tensor *x = *(const struct plena_st_tensor *const *)a,
                                 *y = *(const struct plena_st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

int plena_st_tensor_cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct plena_st_tensor *)a)->name,
                  ((const struct plena_st_tensor *)b)->name);
}

static int check_overlap(struct plena_st_header *h, const char *where, struct plena_err *err)
{
    if (h->n_tensors < 2) return 0;
    struct plena_st_tensor **order = plena_calloc(h->n_tensors, sizeof *order);
    if (!order) return PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    for (size_t i = 0; i < h->n_tensors; i++)
        order[i] = &h->tensors[i];
    qsort(order, h->n_tensors, sizeof *order, by_begin);
    int rc = 0;
    for (size_t i = 1; i < h->n_tensors && !rc; i++)
        if (order[i]->begin < order[i - 1]->end)
            rc = PLENA_FAIL(err, PLENA_E_INPUT, where,
                            "tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                            order[i - 1]->name, (unsigned long long)order[i - 1]->begin,
                            (unsigned long long)order[i - 1]->end, order[i]->name,
                            (unsigned long long)order[i]->begin, (unsigned long long)order[i]->end);
    plena_free(order);
    return rc;
}

static int parse_object(const json_t *root, const uint8_t *data, uint64_t data_len,
                        const char *where, struct plena_st_header *h, struct plena_err *err)
{
    size_t n = json_object_size(root);
    h->tensors = plena_calloc(n ? n : 1, sizeof *h->tensors);
    if (!h->tensors) return PLENA_FAIL(err, PLENA_E_NOMEM, where, "out of memory");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v)
    {
        if (!strcmp(key, "__metadata__")) {
            if (check_metadata(v, where, err)) return err->code;
            continue;
        }
        struct plena_st_tensor *t = &h->tensors[h->n_tensors++];
        if (parse_tensor(key, v, data_len, where, t, err)) return err->code;
        t->data = data + t->begin;
    }
    qsort(h->tensors, h->n_tensors, sizeof *h->tensors, plena_st_tensor_cmp_name);
    return check_overlap(h, where, err);
}

int plena_st_parse(const uint8_t *bytes, uint64_t len, const char *where, struct plena_st_header *h,
                   struct plena_err *err)
{
    memset(h, 0, sizeof *h);
    if (len < 8)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "%llu bytes: too short for the 8-byte header length",
                          (unsigned long long)len);
    uint64_t n = le64(bytes);
    if (n > PLENA_ST_MAX_HEADER)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "header length %llu exceeds 100 MiB",
                          (unsigned long long)n);
    if (n > len - 8)
        return PLENA_FAIL(err, PLENA_E_INPUT, where,
                          "header length %llu but only %llu bytes follow (file truncated?)",
                          (unsigned long long)n, (unsigned long long)(len - 8));
    h->header_len = n;
    json_error_t je;
    json_t *root = json_loadb((const char *)bytes + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return PLENA_FAIL(err, PLENA_E_INPUT, where, "header JSON: %s (byte %d)", je.text,
                          je.position);
    int rc = json_is_object(root)
                 ? parse_object(root, bytes + 8 + n, len - 8 - n, where, h, err)
                 : PLENA_FAIL(err, PLENA_E_INPUT, where, "header JSON must be an object");
    json_decref(root);
    if (rc) plena_st_header_free(h);
    return rc;
}

float plena_st_get(const struct plena_st_tensor *t, uint64_t i)
{
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case PLENA_ST_BF16: return plena_num_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    case PLENA_ST_F16: return plena_num_fp16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
    case PLENA_ST_F32: break;
    }
    uint32_t b = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                 (uint32_t)p[4 * i + 3] << 24;
    return plena_num_f32_from_bits(b);
}

void plena_st_to_f32(const struct plena_st_tensor *t, float *out)
{
    for (uint64_t i = 0; i < t->count; i++)
        out[i] = plena_st_get(t, i);
}
