/* Volatile keys, hashing and JSON files, CSV and JSONL append of
 * docs/formats.md "Conventions", docs/replay.md "Identity". See jsonw.h. The JSON text itself comes
 * from the common writer (common/json.h); non-finite reals are refused (-1)
 * rather than written: the spec says they are an error earlier. */
#include "replay/jsonw.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/sha256.h"

/* The one table (docs/replay.md "Volatile keys" plus the run-stats list of docs/formats.md
 * "Run-stats JSON"). */
const char *const plena_replay_volatile_keys[] = {
    "build_dir",
    "command",
    "config_path",
    "cwd",
    "settings_path",
    "source_path",
    "result_path",
    "log_path",
    "stats_path",
    "profile_path",
    "created_at_utc",
    "started_at_utc",
    "ended_at_utc",
    "decided_at_utc",
    "updated_at_utc",
    "host_seconds",
    "host_wall_seconds",
    "worker",
    "worker_pid",
    "rank",
    "run_id",
    "hostname",
    "host_wall_time_seconds",
    "stage_profile_path",
    "threads",
};
const size_t plena_replay_n_volatile_keys =
    sizeof plena_replay_volatile_keys / sizeof plena_replay_volatile_keys[0];

int plena_replay_is_volatile_key(const char *key)
{
    for (size_t i = 0; i < plena_replay_n_volatile_keys; i++)
        if (!strcmp(key, plena_replay_volatile_keys[i])) return 1;
    return 0;
}

void plena_replay_strip_volatile(json_t *v)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            plena_replay_strip_volatile(json_array_get(v, i));
    } else if (json_is_object(v)) {
        const char *key;
        json_t *val;
        void *tmp;
        json_object_foreach_safe(v, tmp, key, val)
        {
            if (plena_replay_is_volatile_key(key))
                json_object_del(v, key);
            else
                plena_replay_strip_volatile(val);
        }
    }
}

int plena_replay_json_sha256(const json_t *v, int strip_volatile, char hex[65],
                             struct plena_err *err)
{
    json_t *copy = NULL;
    if (strip_volatile) {
        copy = json_deep_copy(v);
        if (!copy) return PLENA_FAIL(err, PLENA_E_NOMEM, "", "out of memory copying JSON");
        plena_replay_strip_volatile(copy);
        v = copy;
    }
    struct plena_buf b;
    plena_buf_init(&b);
    int rc = plena_replay_json_canonical(&b, v);
    if (!rc) plena_sha256_hex(b.data ? b.data : "", b.len, hex);
    plena_buf_free(&b);
    json_decref(copy);
    if (rc)
        return PLENA_FAIL(err, PLENA_E_INTERNAL, "",
                          "JSON not serialisable (non-finite number or out of memory)");
    return 0;
}

int plena_replay_json_write_file(const json_t *v, const char *path, struct plena_err *err)
{
    char *text;
    size_t len;
    /* replay reports every rendering failure as one internal error on the path */
    if (plena_json_render(v, PLENA_JSON_PRETTY | PLENA_JSON_SHALLOW, &text, &len, NULL))
        return PLENA_FAIL(err, PLENA_E_INTERNAL, path,
                          "JSON not serialisable (non-finite number or out of memory)");
    int rc = plena_file_write_atomic(path, text, len, err);
    plena_free(text);
    return rc;
}

int plena_replay_json_read_file(const char *path, json_t **out, struct plena_err *err)
{
    *out = NULL;
    char *data;
    size_t len;
    int rc = plena_file_read_all(path, &data, &len, err);
    if (rc) return rc;
    json_error_t je;
    json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    plena_free(data);
    if (!root)
        return PLENA_FAIL(err, PLENA_E_INPUT, path, "invalid JSON at line %d column %d: %s",
                          je.line, je.column, je.text);
    *out = root;
    return 0;
}

/* ---- CSV ---- */
void plena_csv_init(struct plena_csv *c)
{
    plena_buf_init(&c->buf);
    c->n_cols = 0;
    c->col = 0;
}

void plena_csv_free(struct plena_csv *c)
{
    plena_buf_free(&c->buf);
}

static int csv_raw(struct plena_csv *c, const char *s, size_t len, int may_quote)
{
    if (c->col && plena_buf_append(&c->buf, ",", 1)) return -1;
    c->col++;
    int quote = 0;
    for (size_t i = 0; may_quote && i < len; i++)
        if (s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r') quote = 1;
    if (!quote) return plena_buf_append(&c->buf, s, len);
    if (plena_buf_append(&c->buf, "\"", 1)) return -1;
    for (size_t i = 0; i < len; i++) {
        /* RFC 4180: a quote inside a quoted field is doubled */
        if (s[i] == '"' && plena_buf_append(&c->buf, "\"", 1)) return -1;
        if (plena_buf_append(&c->buf, s + i, 1)) return -1;
    }
    return plena_buf_append(&c->buf, "\"", 1);
}

int plena_csv_header(struct plena_csv *c, const char *const *cols, size_t n_cols)
{
    c->n_cols = n_cols;
    c->col = 0;
    for (size_t i = 0; i < n_cols; i++)
        if (csv_raw(c, cols[i], strlen(cols[i]), 1)) return -1;
    return plena_csv_end_row(c);
}

int plena_csv_cell_str(struct plena_csv *c, const char *s)
{
    if (!s) return csv_raw(c, "", 0, 0);
    return csv_raw(c, s, strlen(s), 1);
}

int plena_csv_cell_json(struct plena_csv *c, const json_t *v)
{
    if (!v || json_is_null(v)) return csv_raw(c, "", 0, 0);
    if (json_is_string(v)) return csv_raw(c, json_string_value(v), json_string_length(v), 1);
    struct plena_buf t;
    plena_buf_init(&t);
    int rc = plena_replay_json_canonical(&t, v);
    if (!rc) rc = csv_raw(c, t.data ? t.data : "", t.len, 1);
    plena_buf_free(&t);
    return rc;
}

int plena_csv_end_row(struct plena_csv *c)
{
    if (c->col != c->n_cols) return -1;
    c->col = 0;
    if (plena_buf_append(&c->buf, "\n", 1)) return -1;
    return c->buf.failed ? -1 : 0;
}

/* ---- JSONL ---- */
int plena_jsonl_open(const char *path, int *fd_out, size_t *torn_bytes, struct plena_err *err)
{
    *fd_out = -1;
    if (torn_bytes) *torn_bytes = 0;
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st)) {
        close(fd);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot stat: %s", strerror(errno));
    }
    /* find the last '\n' by scanning backwards in blocks */
    off_t end = st.st_size, keep = 0;
    char blk[4096];
    for (off_t pos = end; pos > 0 && !keep;) {
        off_t start = pos > (off_t)sizeof blk ? pos - (off_t)sizeof blk : 0;
        ssize_t n = pread(fd, blk, (size_t)(pos - start), start);
        if (n != pos - start) {
            close(fd);
            return PLENA_FAIL(err, PLENA_E_INPUT, path, "read error");
        }
        for (ssize_t i = n - 1; i >= 0; i--)
            if (blk[i] == '\n') {
                keep = start + i + 1;
                break;
            }
        pos = start;
    }
    if (keep < end) {
        if (ftruncate(fd, keep)) {
            close(fd);
            return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot truncate torn tail: %s",
                              strerror(errno));
        }
        (void)fsync(fd);
        if (torn_bytes) *torn_bytes = (size_t)(end - keep);
    }
    if (lseek(fd, 0, SEEK_END) < 0) {
        close(fd);
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot seek: %s", strerror(errno));
    }
    *fd_out = fd;
    return 0;
}

int plena_jsonl_append(int fd, const json_t *rec, const char *path, struct plena_err *err)
{
    struct plena_buf b;
    plena_buf_init(&b);
    if (plena_replay_json_canonical(&b, rec) || plena_buf_append(&b, "\n", 1)) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_INTERNAL, path, "record not serialisable");
    }
    ssize_t w = write(fd, b.data, b.len); /* one write of the complete line */
    int ok = w == (ssize_t)b.len;
    int e = errno;
    if (w >= 0 && !ok) {
        /* a short write (full disk) sets no errno: the rest's write reports
         * why (ENOSPC); the torn tail is cut by the next plena_jsonl_open */
        ssize_t w2 = write(fd, b.data + w, b.len - (size_t)w);
        ok = w2 == (ssize_t)(b.len - (size_t)w);
        e = w2 < 0 ? errno : ENOSPC;
    }
    plena_buf_free(&b);
    if (!ok) return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "append failed: %s", strerror(e));
    if (fsync(fd))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "fsync failed: %s", strerror(errno));
    return 0;
}
