/* `plena gates repeat|functional BUILD_DIR` as library calls (docs/replay.md
 * "Gates"). The options of the replay that wrote the
 * build directory are recovered from results.json and accepted only when
 * they reproduce its recorded fingerprint; the checks themselves are the
 * pipeline's own repeat and functional steps (a replay session). Nothing
 * here prints or chooses an exit code; results.json is never touched. */
#include "replay/gates.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "gen/build.h"
#include "common/fileio.h"
#include "replay/jsonw.h"

json_t *plena_replay_repeat_mismatched(const json_t *series, const char *const *expected,
                                       size_t n_expected)
{
    json_t *mism = json_array();
    if (!mism) return NULL;
    for (size_t k = 0; k < n_expected; k++) {
        const json_t *a = json_object_get(series, expected[k]);
        /* a missing or empty series fails: "every run produced every metric" */
        int ok = json_is_array(a) && json_array_size(a) > 0;
        for (size_t i = 0; ok && i < json_array_size(a); i++)
            if (json_is_null(json_array_get(a, i)) ||
                !json_equal(json_array_get(a, i), json_array_get(a, 0)))
                ok = 0;
        if (!ok) json_array_append_new(mism, json_string(expected[k]));
    }
    return mism;
}

void plena_replay_gate_format_line(const char *gate, const struct plena_replay_gate_report *r,
                                   char *buf, size_t n)
{
    if (r->passed)
        snprintf(buf, n, "PASS %s %s\n", gate, r->values);
    else
        snprintf(buf, n, "FAIL %s %s %s\n", gate, r->failed[0] ? r->failed : "unknown", r->values);
}

/* One image file into dst (exactly `bytes` long). */
static int read_exact(const char *dir, const char *name, void *dst, size_t bytes,
                      struct plena_err *err)
{
    char p[4200];
    if (plena_path_join(p, sizeof p, dir, name))
        return PLENA_FAIL(err, PLENA_E_INPUT, dir, "path too long");
    char *data = NULL;
    size_t len = 0;
    if (plena_file_read_all(p, &data, &len, NULL))
        return PLENA_FAIL(err, PLENA_E_INPUT, p,
                          "build input missing or unreadable (pruned? rerun plena replay)");
    int rc = 0;
    if (len != bytes)
        rc = PLENA_FAIL(err, PLENA_E_INPUT, p, "expected %zu bytes as the build stages, found %zu",
                        bytes, len);
    else
        memcpy(dst, data, bytes);
    plena_free(data);
    return rc;
}

int plena_replay_build_load_images(struct plena_moe_build *b, const char *dir,
                                   struct plena_err *err)
{
    /* little-endian images (gen/build.c); decode into the host arrays */
    size_t nb = (size_t)b->n_fp * 2 + (size_t)b->n_int * 4 + (size_t)b->n_vram * 2 + 8;
    uint8_t *buf = plena_malloc(nb);
    if (!buf) return PLENA_FAIL(err, PLENA_E_NOMEM, dir, "out of memory");
    int rc = read_exact(dir, "fp_sram.bin", buf, (size_t)b->n_fp * 2, err);
    for (uint32_t i = 0; !rc && i < b->n_fp; i++)
        b->fp16[i] = (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8);
    if (!rc) rc = read_exact(dir, "int_sram.bin", buf, (size_t)b->n_int * 4, err);
    for (uint32_t i = 0; !rc && i < b->n_int; i++)
        b->ints[i] = (uint32_t)buf[4 * i] | (uint32_t)buf[4 * i + 1] << 8 |
                     (uint32_t)buf[4 * i + 2] << 16 | (uint32_t)buf[4 * i + 3] << 24;
    if (!rc) rc = read_exact(dir, "vram_preload.bin", buf, (size_t)b->n_vram * 2, err);
    for (uint64_t i = 0; !rc && i < b->n_vram; i++)
        b->vram[i] = (uint16_t)(buf[2 * i] | buf[2 * i + 1] << 8);
    plena_free(buf);
    if (rc) return rc;
    /* hbm.bin: the staged regions are read back from the file at their
     * bases, so weights are decoded from the bytes the emulator loaded; a
     * lazy region stays in the file (the build reads it from there when its
     * bytes are needed, one matrix at a time: a large build's routed
     * experts are never all in memory) */
    char p[4200];
    if (plena_path_join(p, sizeof p, dir, "hbm.bin"))
        return PLENA_FAIL(err, PLENA_E_INPUT, dir, "path too long");
    FILE *f = fopen(p, "rb");
    if (!f)
        return PLENA_FAIL(err, PLENA_E_INPUT, p,
                          "build input missing or unreadable (pruned? rerun plena replay)");
    struct stat st;
    if (fstat(fileno(f), &st) || (uint64_t)st.st_size != b->hbm_size) {
        fclose(f);
        return PLENA_FAIL(err, PLENA_E_INPUT, p, "expected %llu bytes as the build stages",
                          (unsigned long long)b->hbm_size);
    }
    int lazy = 0;
    for (size_t i = 0; i < b->n_hbm && !rc; i++) {
        struct plena_hbm_region *r = &b->hbm[i];
        if (!r->bytes) {
            lazy = 1;
            continue;
        }
        if (fseeko(f, (off_t)r->base, SEEK_SET) || fread(r->bytes, 1, r->n, f) != r->n)
            rc = PLENA_FAIL(err, PLENA_E_INPUT, p, "cannot read the region at byte %llu",
                            (unsigned long long)r->base);
    }
    if (!rc && lazy) {
        /* this file replaces one an earlier call kept */
        int fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 0);
        char *path = fd >= 0 ? plena_strdup(p) : NULL;
        if (fd < 0) {
            rc =
                PLENA_FAIL(err, PLENA_E_INPUT, p, "cannot keep the file open: %s", strerror(errno));
        } else if (!path) {
            close(fd);
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, p, "out of memory");
        } else {
            if (b->image_path) {
                close(b->image_fd);
                plena_free(b->image_path);
            }
            b->image_fd = fd;
            b->image_path = path;
        }
    }
    fclose(f);
    return rc;
}

/* ---- reopening a build directory ---- */
struct opened {
    struct plena_replay_item item;
    json_t *results;
    struct plena_replay_opts o;
    char settings_buf[4096];
};

static void opened_free(struct opened *b)
{
    plena_replay_item_free(&b->item);
    json_decref(b->results);
}

/* trace.json + results.json -> the replay's item and options, accepted only
 * when they reproduce inputs.fingerprint (so settings, seeds and shape are
 * exactly those of the replay). */
static int open_build(const struct plena_replay_gate_opts *go, struct opened *b,
                      struct plena_err *err)
{
    memset(b, 0, sizeof *b);
    const char *dir = go->build_dir;
    struct stat st;
    if (!dir || stat(dir, &st) || !S_ISDIR(st.st_mode))
        return PLENA_FAIL(err, PLENA_E_INPUT, dir ? dir : "(none)", "no such build directory");
    char tp[4200], rp[4200], sp[4200];
    if (plena_path_join(tp, sizeof tp, dir, plena_build_file_name(PLENA_BUILD_FILE_TRACE)) ||
        plena_path_join(rp, sizeof rp, dir, plena_build_file_name(PLENA_BUILD_FILE_RESULTS)) ||
        plena_path_join(sp, sizeof sp, dir, plena_build_file_name(PLENA_BUILD_FILE_RUN_STATS)))
        return PLENA_FAIL(err, PLENA_E_INPUT, dir, "path too long");
    int rc = plena_replay_json_read_file(rp, &b->results, err);
    if (rc) return rc;
    const json_t *in = json_object_get(b->results, "inputs");
    const char *fp = json_string_value(json_object_get(in, "fingerprint"));
    if (!fp) return PLENA_FAIL(err, PLENA_E_INPUT, rp, "$.inputs.fingerprint: expected a string");
    struct plena_replay_opts *o = &b->o;
    plena_replay_opts_default(o);
    const char *lowering = json_string_value(json_object_get(in, "lowering"));
    const char *routing = json_string_value(json_object_get(in, "routing_mode"));
    if (plena_weights_mode_parse(json_string_value(json_object_get(in, "weights")), &o->weights) ||
        plena_input_mode_parse(json_string_value(json_object_get(in, "input")), &o->input) ||
        !lowering || !routing || strcmp(routing, "fixed"))
        return PLENA_FAIL(err, PLENA_E_INPUT, rp,
                          "$.inputs: weights, input, lowering or routing_mode (fixed) unreadable");
    o->lowering = strcmp(lowering, "expert-major") ? "pair-major" : "expert-major";
    o->weight_seed = (uint64_t)json_integer_value(json_object_get(in, "weight_seed"));
    o->input_seed = (uint64_t)json_integer_value(json_object_get(in, "input_seed"));
    o->profile = json_is_true(json_object_get(in, "profile"));
    o->overlap = json_is_true(json_object_get(in, "overlap"));
    o->repeat = (unsigned)json_integer_value(json_object_get(in, "repeat"));
    uint32_t mlen = (uint32_t)json_integer_value(json_object_get(in, "mlen"));
    uint32_t blen = (uint32_t)json_integer_value(json_object_get(in, "blen"));

    /* settings: as given, else the file the replay's run recorded */
    o->settings_path = go->settings_path;
    if (!o->settings_path) {
        json_t *rs = NULL;
        if (!plena_replay_json_read_file(sp, &rs, NULL)) {
            const char *cp = json_string_value(json_object_get(rs, "config_path"));
            if (cp && cp[0]) {
                snprintf(b->settings_buf, sizeof b->settings_buf, "%s", cp);
                o->settings_path = b->settings_buf;
            }
        }
        json_decref(rs);
    }
    char ssha[65];
    if ((rc = plena_replay_settings_sha256(o->settings_path, ssha, err))) return rc;

    char *bytes = NULL;
    size_t len = 0;
    if ((rc = plena_file_read_all(tp, &bytes, &len, err))) return rc;
    /* validate under the recorded shape (R006 holds for --mlen runs too) */
    o->mlen = mlen;
    o->blen = blen;
    struct plena_trace_report rep;
    plena_trace_report_init(&rep);
    rc = plena_replay_prepare(bytes, len, tp, o, ssha, &b->item, &rep, err);
    plena_trace_report_free(&rep);
    plena_free(bytes);
    if (rc == PLENA_E_FAILED)
        return PLENA_FAIL(err, PLENA_E_INPUT, tp, "trace.json no longer validates");
    if (rc) return rc;
    /* --mlen/--blen given or not: the fingerprint says which */
    for (int k = 0; k < 4; k++) {
        o->mlen = k & 1 ? mlen : 0;
        o->blen = k & 2 ? blen : 0;
        char hex[65];
        if ((rc = plena_replay_fingerprint(b->item.trace_sha256, o, ssha, hex, err))) return rc;
        if (!strcmp(hex, fp)) return 0;
    }
    return PLENA_FAIL(err, PLENA_E_INPUT, rp,
                      "$.inputs.fingerprint: trace.json with the recorded options and settings "
                      "'%s' does not reproduce it (pass the replay's --settings FILE)",
                      o->settings_path ? o->settings_path : "(built-in)");
}

static int remove_old(const char *dir, const char *name, char *path, size_t n,
                      struct plena_err *err)
{
    if (plena_path_join(path, n, dir, name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, dir, "path too long");
    /* the gate's rule: no file with the final name exists before this attempt decides */
    if (unlink(path) && access(path, F_OK) == 0)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot remove the old gate result");
    plena_replay_clean_tmp(dir);
    return 0;
}

/* The start of both gates: the build opened (open_build), the gate's old
 * result file removed and a session on the build directory. b and *s are
 * the caller's to free whatever the status. */
static int gate_open(const struct plena_replay_gate_opts *go, const char *file,
                     struct plena_replay_gate_report *r, struct opened *b,
                     struct plena_replay_session **s, struct plena_err *err)
{
    memset(r, 0, sizeof *r);
    *s = NULL;
    int rc = open_build(go, b, err);
    if (!rc) rc = remove_old(go->build_dir, file, r->result_path, sizeof r->result_path, err);
    b->o.stop = go->stop;
    if (!rc) rc = plena_replay_session_open(&b->item, &b->o, go->build_dir, s, err);
    if (!rc && go->after_open) go->after_open(go->hook_ctx);
    return rc;
}

/* A stop (SIGINT/SIGTERM) during the functional gate: its references end
 * early on it and the step records a failed comparison, which is no
 * verdict on the build: no gate file (nor for a comparison that ran to its
 * end once asked to stop). */
static int gate_stopped(const struct plena_replay_gate_opts *go, struct plena_err *err)
{
    return plena_err_if_stopped(go->stop, go->build_dir, err);
}

static void join_names(const json_t *arr, char *buf, size_t n)
{
    size_t off = 0;
    buf[0] = 0;
    for (size_t i = 0; i < json_array_size(arr) && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, "%s%s", i ? "," : "",
                                json_string_value(json_array_get(arr, i)));
}

int plena_replay_gate_repeat(const struct plena_replay_gate_opts *go,
                             struct plena_replay_gate_report *r, struct plena_err *err)
{
    memset(r, 0, sizeof *r);
    if (go->repeats < 2)
        return PLENA_FAIL(err, PLENA_E_USAGE, "--repeats", "expected N >= 2, found %u",
                          go->repeats);
    struct opened b;
    struct plena_replay_session *s;
    int rc = gate_open(go, PLENA_REPLAY_REPEAT_GATE_FILE, r, &b, &s, err);
    json_t *rep = NULL;
    /* a stop during the series ends it without a verdict (the session checks) */
    if (!rc) rc = plena_replay_session_repeat(s, go->repeats, &rep, err);
    if (!rc) {
        r->passed = json_is_true(json_object_get(rep, "passed"));
        json_t *mism = json_object_get(rep, "mismatched");
        join_names(mism, r->failed, sizeof r->failed);
        json_t *lat = json_array_get(
            json_object_get(json_object_get(rep, "series"), "sim_latency_cycles"), 0);
        snprintf(r->values, sizeof r->values, "repeats=%u series=%zu mismatched=%zu cycles=%lld",
                 go->repeats, json_object_size(json_object_get(rep, "series")),
                 json_array_size(mism), (long long)json_integer_value(lat));
        /* decided above; publish (the session wrote it too, unchecked) */
        rc = plena_replay_json_write_file(rep, r->result_path, err);
    }
    json_decref(rep);
    plena_replay_session_free(s);
    opened_free(&b);
    return rc;
}

int plena_replay_gate_functional(const struct plena_replay_gate_opts *go,
                                 struct plena_replay_gate_report *r, struct plena_err *err)
{
    struct opened b;
    struct plena_replay_session *s;
    int rc = gate_open(go, PLENA_REPLAY_FUNCTIONAL_GATE_FILE, r, &b, &s, err);
    json_t *fn = NULL;
    struct plena_replay_checks ck;
    memset(&ck, 0, sizeof ck);
    if (!rc) rc = plena_replay_session_functional(s, &fn, &ck, err);
    if (!rc) rc = gate_stopped(go, err);
    if (!rc) {
        const int smoke = b.o.weights == PLENA_WEIGHTS_ZERO || b.o.input == PLENA_INPUT_ZEROS;
        /* no comparison possible (no dump): a failed `functional` object, no fallback */
        if (!fn)
            fn = json_pack("{s:s,s:b,s:b}", "kind", smoke ? "zero_input_smoke" : "reference",
                           "numerical", 0, "passed", 0);
        /* the gate's checks: routing integrity, then the comparison's own
         * checks (bit_exact, finite, f64_bound, ...) or, without one, the
         * reason it could not be made */
        struct plena_replay_checks all;
        memset(&all, 0, sizeof all);
        const struct plena_replay_check *ri = plena_replay_check_find(&ck, "routing_integrity");
        const struct plena_replay_check *fc = plena_replay_check_find(&ck, "functional");
        plena_replay_check_set(&all, "routing_integrity", ri && ri->passed, "%s",
                               ri ? ri->detail : "not evaluated");
        json_t *sub = json_object_get(fn, "checks");
        if (json_array_size(sub))
            for (size_t i = 0; i < json_array_size(sub); i++) {
                json_t *c = json_array_get(sub, i);
                plena_replay_check_set(&all, json_string_value(json_object_get(c, "name")),
                                       json_is_true(json_object_get(c, "passed")), "%s",
                                       json_string_value(json_object_get(c, "detail")));
            }
        else
            plena_replay_check_set(&all, "functional", 0, "%s", fc ? fc->detail : "not evaluated");
        int passed = fc && fc->passed && json_is_true(json_object_get(fn, "passed"));
        size_t off = 0;
        for (size_t i = 0; i < all.n; i++) {
            passed &= all.v[i].passed;
            if (!all.v[i].passed && off < sizeof r->failed)
                off += (size_t)snprintf(r->failed + off, sizeof r->failed - off, "%s%s",
                                        off ? "," : "", all.v[i].name);
        }
        if (!passed && !r->failed[0]) snprintf(r->failed, sizeof r->failed, "functional");
        r->passed = passed;
        json_object_set_new(fn, "checks", plena_replay_checks_json(&all));
        json_object_set_new(fn, "passed", json_boolean(passed));
        if (!passed) json_object_set_new(fn, "numerical", json_false());
        char decided[32];
        plena_replay_utc_now(decided);
        json_object_set_new(fn, "decided_at_utc", json_string(decided));
        json_t *mm = json_object_get(fn, "mismatches");
        const char *kind = json_string_value(json_object_get(fn, "kind"));
        if (json_is_integer(mm))
            snprintf(r->values, sizeof r->values,
                     "kind=%s numerical=%s elements=%lld mismatches=%lld", kind,
                     json_is_true(json_object_get(fn, "numerical")) ? "true" : "false",
                     (long long)json_integer_value(json_object_get(fn, "elements")),
                     (long long)json_integer_value(mm));
        else /* no comparison was made (no dump): say why */
            snprintf(r->values, sizeof r->values, "kind=%s not compared: %s", kind,
                     fc ? fc->detail : "not evaluated");
        rc = plena_replay_json_write_file(fn, r->result_path, err);
    }
    json_decref(fn);
    plena_replay_session_free(s);
    opened_free(&b);
    return rc;
}
