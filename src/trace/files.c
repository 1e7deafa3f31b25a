/* Trace documents into files: one pretty <stable_id(trace_id)>.json per trace
 * in a directory, or one output rendered as a single pretty trace or a set in
 * canonical order. Used by `plena trace gen|import|split`. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fileio.h"
#include "trace/build.h"

/* The file name of a trace in a directory: stable_id(trace_id).json. */
static int doc_path(char *buf, size_t n, const char *dir, const char *trace_id)
{
    char name[160];
    snprintf(name, sizeof name, "%s", trace_id);
    plena_trace_stable_id(name);
    size_t l = strlen(name);
    snprintf(name + l, sizeof name - l, ".json");
    return plena_path_join(buf, n, dir, name);
}

int plena_trace_docs_write_dir(const struct plena_trace_docs *d, const char *dir, int no_clobber,
                               struct plena_err *err)
{
    if (plena_mkdir_p(dir, err)) return err->code;
    char path[4200];
    for (size_t i = 0; i < d->n && no_clobber; i++) {
        struct stat sb;
        if (doc_path(path, sizeof path, dir, d->v[i].trace_id))
            return PLENA_FAIL(err, PLENA_E_OUTPUT, "", "path too long in %s", dir);
        if (stat(path, &sb) == 0)
            return PLENA_FAIL(err, PLENA_E_OUTPUT, "", "%s exists; not overwritten (use --force)",
                              path);
    }
    struct plena_buf b;
    plena_buf_init(&b);
    int rc = 0;
    for (size_t i = 0; i < d->n && !rc; i++) {
        b.len = 0;
        if (doc_path(path, sizeof path, dir, d->v[i].trace_id))
            rc = PLENA_FAIL(err, PLENA_E_OUTPUT, "", "path too long in %s", dir);
        else if (plena_trace_json_write(&b, d->v[i].tree, 1))
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, "", "out of memory");
        else
            rc = plena_file_write_atomic(path, b.data, b.len, err);
    }
    plena_buf_free(&b);
    return rc;
}

int plena_trace_docs_render(struct plena_trace_docs *d, int as_set, struct plena_buf *b)
{
    if (d->n == 1 && !as_set) return plena_trace_json_write(b, d->v[0].tree, 1) ? -1 : 0;
    plena_trace_docs_sort(d);
    return plena_trace_docs_write_set(d, b) ? -1 : 0;
}
