/* A checkpoint directory: config.json, the safetensors files (through the
 * index file's weight_map or all *.safetensors in name order), read-only
 * maps, tensor look-up with shape checks, and the fingerprint. */
#include <jansson.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "common/sha256.h"

static void put_u64(struct plena_sha256 *s, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    plena_sha256_update(s, b, 8);
}

void plena_ckpt_fingerprint(const char *config, size_t config_len,
                            const struct plena_ckpt_file *files, size_t n_files, char out[65])
{
    struct plena_sha256 s;
    plena_sha256_init(&s);
    put_u64(&s, config_len);
    plena_sha256_update(&s, config, config_len);
    for (size_t i = 0; i < n_files; i++) {
        size_t nl = strlen(files[i].name);
        put_u64(&s, nl);
        plena_sha256_update(&s, files[i].name, nl);
        put_u64(&s, files[i].size);
        put_u64(&s, files[i].header_len);
        plena_sha256_update(&s, files[i].map + 8, files[i].header_len);
    }
    uint8_t d[32];
    plena_sha256_final(&s, d);
    plena_sha256_to_hex(d, out);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names in names[0..n) (owned by the caller), sorted, deduplicated. */
static size_t sort_unique(char **names, size_t n)
{
    qsort(names, n, sizeof *names, cmp_str);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && !strcmp(names[m - 1], names[i])) {
            plena_free(names[i]);
            continue;
        }
        names[m++] = names[i];
    }
    return m;
}

static int push_name(char ***v, size_t *n, size_t *cap, const char *s, struct plena_err *err)
{
    if (plena_grow((void **)v, cap, *n + 1, sizeof **v) || !((*v)[*n] = plena_strdup(s)))
        return PLENA_FAIL(err, PLENA_E_NOMEM, s, "out of memory");
    (*n)++;
    return 0;
}

static int list_dir(const char *dir, char ***names, size_t *n, struct plena_err *err)
{
    DIR *d = opendir(dir);
    if (!d) return PLENA_FAIL(err, PLENA_E_INPUT, dir, "cannot open the checkpoint directory");
    size_t cap = 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d)))
        if (ends_with(e->d_name, ".safetensors")) rc = push_name(names, n, &cap, e->d_name, err);
    closedir(d);
    if (!rc && !*n)
        rc = PLENA_FAIL(err, PLENA_E_INPUT, dir, "no *.safetensors file in the directory");
    if (!rc) *n = sort_unique(*names, *n);
    return rc;
}

/* weight_map of the index file: the file names, and the map for the
 * per-tensor check after loading. */
static int read_index(const char *path, json_t **map, char ***names, size_t *n,
                      struct plena_err *err)
{
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return PLENA_FAIL(err, PLENA_E_INPUT, path, "line %d column %d: %s", je.line, je.column,
                          je.text);
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm) || !json_object_size(wm)) {
        json_decref(root);
        return PLENA_FAIL(err, PLENA_E_INPUT, path, "weight_map must be a non-empty object");
    }
    size_t cap = 0;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(wm, key, v)
    {
        if (rc) break;
        if (!json_is_string(v) || strchr(json_string_value(v), '/'))
            rc = PLENA_FAIL(err, PLENA_E_INPUT, path,
                            "weight_map.%s must be a file name in the directory", key);
        else
            rc = push_name(names, n, &cap, json_string_value(v), err);
    }
    if (!rc) *n = sort_unique(*names, *n);
    *map = json_incref(wm);
    json_decref(root);
    return rc;
}

static int map_file(const char *dir, struct plena_ckpt_file *f, struct plena_err *err)
{
    char path[4096];
    if (plena_path_join(path, sizeof path, dir, f->name))
        return PLENA_FAIL(err, PLENA_E_INPUT, f->name, "path too long");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot open");
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode))
        rc = PLENA_FAIL(err, PLENA_E_INPUT, path, "not a regular file");
    else if (st.st_size == 0)
        rc = PLENA_FAIL(err, PLENA_E_INPUT, path, "empty file");
    if (!rc) {
        f->size = (uint64_t)st.st_size;
        void *m = mmap(NULL, (size_t)f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            rc = PLENA_FAIL(err, PLENA_E_INPUT, path, "cannot map the file");
        else
            f->map = m;
    }
    close(fd);
    return rc;
}

/* Moves the tensors of every file into c->tensors, sorted; a name twice is
 * an error; with an index, each tensor must be in the file weight_map names. */
static int gather(struct plena_ckpt *c, struct plena_st_header *hs, const json_t *wm,
                  struct plena_err *err)
{
    size_t total = 0;
    for (size_t i = 0; i < c->n_files; i++)
        total += hs[i].n_tensors;
    c->tensors = plena_calloc(total ? total : 1, sizeof *c->tensors);
    if (!c->tensors) return PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
    for (size_t i = 0; i < c->n_files; i++) {
        for (size_t j = 0; j < hs[i].n_tensors; j++) {
            struct plena_st_tensor *t = &c->tensors[c->n_tensors++];
            *t = hs[i].tensors[j];
            t->file = (uint32_t)i;
        }
        plena_free(hs[i].tensors);
        hs[i].tensors = NULL;
        hs[i].n_tensors = 0;
    }
    qsort(c->tensors, c->n_tensors, sizeof *c->tensors, plena_st_tensor_cmp_name);
    for (size_t i = 1; i < c->n_tensors; i++)
        if (!strcmp(c->tensors[i].name, c->tensors[i - 1].name))
            return PLENA_FAIL(err, PLENA_E_INPUT, c->dir, "tensor '%s' is in both %s and %s",
                              c->tensors[i].name, c->files[c->tensors[i - 1].file].name,
                              c->files[c->tensors[i].file].name);
    if (!wm) return 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)wm, key, v)
    {
        const struct plena_st_tensor *t = plena_ckpt_find(c, key);
        if (!t || strcmp(c->files[t->file].name, json_string_value(v)))
            return PLENA_FAIL(err, PLENA_E_INPUT, "model.safetensors.index.json",
                              "weight_map.%s names %s, but the tensor is %s%s", key,
                              json_string_value(v), t ? "in " : "not in any file",
                              t ? c->files[t->file].name : "");
    }
    return 0;
}

static int open_files(struct plena_ckpt *c, char **names, size_t n, const json_t *wm,
                      struct plena_err *err)
{
    c->files = plena_calloc(n, sizeof *c->files);
    struct plena_st_header *hs = plena_calloc(n, sizeof *hs);
    int rc = 0;
    if (!c->files || !hs) rc = PLENA_FAIL(err, PLENA_E_NOMEM, c->dir, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) {
        c->files[i].name = names[i];
        names[i] = NULL;
        c->n_files++;
        rc = map_file(c->dir, &c->files[i], err);
        if (!rc)
            rc = plena_st_parse(c->files[i].map, c->files[i].size, c->files[i].name, &hs[i], err);
        if (!rc) c->files[i].header_len = hs[i].header_len;
    }
    if (!rc) rc = gather(c, hs, wm, err);
    for (size_t i = 0; hs && i < n; i++)
        plena_st_header_free(&hs[i]);
    plena_free(hs);
    return rc;
}

int plena_ckpt_open(const char *dir, struct plena_ckpt *c, struct plena_err *err)
{
    memset(c, 0, sizeof *c);
    c->dir = plena_strdup(dir);
    if (!c->dir) return PLENA_FAIL(err, PLENA_E_NOMEM, dir, "out of memory");
    char path[4096];
    if (plena_path_join(path, sizeof path, dir, "config.json"))
        return PLENA_FAIL(err, PLENA_E_INPUT, dir, "path too long");
    if (plena_file_read_all(path, &c->config_text, &c->config_len, err)) return err->code;
    char **names = NULL;
    size_t n = 0;
    json_t *wm = NULL;
    int rc;
    if (plena_path_join(path, sizeof path, dir, "model.safetensors.index.json"))
        return PLENA_FAIL(err, PLENA_E_INPUT, dir, "path too long");
    if (!access(path, F_OK))
        rc = read_index(path, &wm, &names, &n, err);
    else
        rc = list_dir(dir, &names, &n, err);
    if (!rc) rc = open_files(c, names, n, wm, err);
    for (size_t i = 0; i < n; i++)
        plena_free(names[i]);
    plena_free(names);
    json_decref(wm);
    if (!rc)
        plena_ckpt_fingerprint(c->config_text, c->config_len, c->files, c->n_files, c->fingerprint);
    if (rc) plena_ckpt_close(c);
    return rc;
}

void plena_ckpt_close(struct plena_ckpt *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n_tensors; i++)
        plena_free(c->tensors[i].name);
    plena_free(c->tensors);
    for (size_t i = 0; i < c->n_files; i++) {
        if (c->files[i].map) munmap((void *)c->files[i].map, (size_t)c->files[i].size);
        plena_free(c->files[i].name);
    }
    plena_free(c->files);
    plena_free(c->config_text);
    plena_free(c->dir);
    memset(c, 0, sizeof *c);
}

const struct plena_st_tensor *plena_ckpt_find(const struct plena_ckpt *c, const char *name)
{
    struct plena_st_tensor key = {.name = (char *)name};
    return c->n_tensors
               ? bsearch(&key, c->tensors, c->n_tensors, sizeof key, plena_st_tensor_cmp_name)
               : NULL;
}

static void shape_text(char *buf, size_t n, uint32_t ndim, const uint64_t *shape)
{
    size_t at = 0;
    at += (size_t)snprintf(buf, n, "[");
    for (uint32_t d = 0; d < ndim && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%llu", d ? ", " : "",
                               (unsigned long long)shape[d]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

int plena_ckpt_tensor(const struct plena_ckpt *c, const char *name, uint32_t ndim,
                      const uint64_t *shape, const struct plena_st_tensor **out,
                      struct plena_err *err)
{
    const struct plena_st_tensor *t = *out = plena_ckpt_find(c, name);
    if (!t) return PLENA_FAIL(err, PLENA_E_INPUT, c->dir, "tensor '%s' is missing", name);
    int same = t->ndim == ndim;
    for (uint32_t d = 0; same && d < ndim; d++)
        same = t->shape[d] == shape[d];
    if (!same) {
        char want[128], got[128];
        shape_text(want, sizeof want, ndim, shape);
        shape_text(got, sizeof got, t->ndim, t->shape);
        return PLENA_FAIL(err, PLENA_E_INPUT, c->files[t->file].name,
                          "tensor '%s' has shape %s, config.json implies %s", name, got, want);
    }
    return 0;
}

int plena_ckpt_load(const struct plena_ckpt *c, const char *name, uint32_t ndim,
                    const uint64_t *shape, float **out, struct plena_err *err)
{
    *out = NULL;
    const struct plena_st_tensor *t;
    int rc = plena_ckpt_tensor(c, name, ndim, shape, &t, err);
    if (rc) return rc;
    *out = plena_calloc(t->count ? t->count : 1, sizeof **out);
    if (!*out) return PLENA_FAIL(err, PLENA_E_NOMEM, name, "out of memory");
    plena_st_to_f32(t, *out);
    return 0;
}
