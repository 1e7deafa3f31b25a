/* plena trace: validate (+ --replay tier), stats, gen, import, split, pack,
 * rules (docs/trace-schema.md, docs/replay.md "Replay tier", docs/cli.md
 * "trace"): one option table per subcommand; reads files (or `-`), calls the
 * trace module and prints text or --json; the highest exit code of all inputs
 * wins.
 * route and tiny-checkpoint are in cli/route_cli.c; build here (it shares
 * the trace writers), its work in ckpt/rows_build.c. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/route_cli.h"
#include "ckpt/route.h"
#include "common/version.h"
#include "gen/build.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "model/model.h"
#include "settings/settings.h"
#include "replay/tier.h"
#include "trace/build.h"
#include "trace/gen.h"
#include "trace/import.h"
#include "trace/trace.h"

static int read_input(const char *path, char **data, size_t *len, struct plena_err *err)
{
    return plena_file_read_input(path, data, len, err);
}

/* Prints v in the pretty form (docs/formats.md "Conventions") to stdout and drops the
 * reference. */
static void print_json(json_t *v)
{
    struct plena_buf b;
    plena_buf_init(&b);
    if (plena_trace_json_write(&b, v, 1) == 0) fwrite(b.data, 1, b.len, stdout);
    plena_buf_free(&b);
    json_decref(v);
}

/* ---- validate ---- */

static json_t *append_findings(json_t *a, const struct plena_trace_finding *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "code", json_string(f[i].code));
        json_object_set_new(o, "path", json_string(f[i].path));
        json_object_set_new(o, "message", json_string(f[i].message));
        json_object_set_new(o, "line", f[i].line ? json_integer(f[i].line) : json_null());
        json_array_append_new(a, o);
    }
    return a;
}

static void print_findings(const char *file, long line, const struct plena_trace_report *r)
{
    char where[4200];
    if (line)
        snprintf(where, sizeof where, "%s:%ld", file, line);
    else
        snprintf(where, sizeof where, "%s", file);
    for (size_t i = 0; i < r->n_errors; i++)
        printf("%s: error %s at %s: %s\n", where, r->errors[i].code, r->errors[i].path,
               r->errors[i].message);
    if (r->n_errors_truncated)
        printf("%s: %zu more errors not listed (--max-errors)\n", where, r->n_errors_truncated);
    for (size_t i = 0; i < r->n_warnings; i++)
        printf("%s: warning %s at %s: %s\n", where, r->warnings[i].code, r->warnings[i].path,
               r->warnings[i].message);
    if (r->n_warnings_truncated)
        printf("%s: %zu more warnings not listed\n", where, r->n_warnings_truncated);
}

struct validate_cli {
    struct plena_trace_validate_options opt;
    struct plena_replay_tier_opts ro;
    const char *settings_path;
    int as_json, force_set, replay;
    struct plena_opt_list files;
};

#define V struct validate_cli
static const struct plena_opt validate_rows[] = {
    PLENA_OPT_FLAG_ROW("--json", V, as_json, "print one JSON report instead of text"),
    PLENA_OPT_FLAG_ROW("--strict", V, opt.strict, "warnings are errors"),
    PLENA_OPT_FLAG_ROW("--set", V, force_set,
                       "treat every FILE as a trace set (one trace per line)"),
    PLENA_OPT_UINT_ROW("--max-errors", "N", V, opt.max_errors, 1, SIZE_MAX,
                       "errors listed per trace before the rest are only counted"),
    PLENA_OPT_UINT_ROW("--max-bytes", "B", V, opt.max_bytes, 1, SIZE_MAX,
                       "largest accepted document in bytes"),
    PLENA_OPT_FLAG_ROW("--replay", V, replay,
                       "also the replay-tier rules R001-R006 (R005 runs the generator's capacity "
                       "check against the settings' machine)"),
    PLENA_OPT_PATH_ROW(
        "--settings", "FILE", V, settings_path,
        "--replay: the settings whose machine (MLEN, SRAM and VRAM sizes) the replay would "
        "use",
        .def_text = "the built-in lookup"),
    PLENA_OPT_UINT_ROW("--mlen", "N", V, ro.mlen_override, 1, 4096,
                       "--replay: replay MLEN override (R006 then accepts any replay.mlen)",
                       .def_text = "the settings' MLEN"),
};
static const struct plena_opt_pos validate_pos[] = {
    {"FILE",
     "a trace (.json), a trace set (.jsonl, or any file with --set), or - for standard "
     "input",
     offsetof(V, files), 1, 0}};
#undef V

static void validate_init(void *p)
{
    struct validate_cli *c = p;
    c->opt.max_errors = PLENA_TRACE_MAX_ERRORS_DEFAULT;
    c->opt.max_bytes = PLENA_TRACE_MAX_BYTES_DEFAULT;
}

static const struct plena_cmd_spec validate_spec = {
    .name = "trace validate",
    .summary = "validate traces (.json) and trace sets (.jsonl)",
    .description = "Validates route traces against schema v2 (docs/trace-schema.md): one line per "
                   "finding, then one verdict line per FILE; `plena trace rules` lists every rule.",
    PLENA_CMD_POS(validate_pos),
    PLENA_CMD_ROWS(validate_rows),
    .init = validate_init,
    .opts_size = sizeof(struct validate_cli),
};

static int cmd_validate(void *opts, const struct plena_cli_args *a)
{
    struct validate_cli *c = opts;
    (void)a;
    const struct plena_trace_validate_options opt = c->opt;
    const char *settings_path = c->settings_path;
    const int as_json = c->as_json, force_set = c->force_set, replay = c->replay;
    struct plena_gen_machine mach;
    plena_gen_machine_default(&mach);
    if (replay) {
        /* the settings the replay would use (same lookup as plena replay):
         * R005 sizes against that machine's SRAM and VRAM */
        struct plena_settings st;
        struct plena_err serr = {0};
        if (plena_settings_load(settings_path, &st, &serr)) {
            return plena_cli_report("trace validate", &serr);
        }
        c->ro.settings_mlen = st.mlen;
        plena_gen_machine_from_settings(&st, &mach);
    }
    enum plena_status st = PLENA_OK;
    json_t *files = json_array();
    for (size_t i = 0; i < c->files.n; i++) {
        const char *path = c->files.v[i];
        char *data = NULL;
        size_t len = 0;
        struct plena_err err = {0};
        json_t *fo = json_object();
        json_object_set_new(fo, "path", json_string(path));
        /* --max-bytes bounds the read itself (an endless stdin or /dev/zero
         * stops at max + 1 bytes: V001); a set may hold many documents of that
         * size and is bounded by the larger of it and PLENA_FILE_MAX_BYTES */
        const int is_set = plena_trace_path_is_set(path, force_set);
        const size_t max = opt.max_bytes ? opt.max_bytes : PLENA_TRACE_MAX_BYTES_DEFAULT;
        int over = 0;
        if (plena_file_read_bounded(
                path, is_set && max < PLENA_FILE_MAX_BYTES ? PLENA_FILE_MAX_BYTES : max,
                is_set ? "a trace set" : "--max-bytes", &data, &len, is_set ? NULL : &over, &err)) {
            plena_cli_report("trace validate", &err);
            st = plena_status_worst(st, err.code);
            json_object_set_new(fo, "valid", json_false());
            json_object_set_new(fo, "unreadable", json_string(err.msg));
            json_array_append_new(files, fo);
            continue;
        }
        int valid;
        if (is_set) {
            struct plena_trace_set_report s = {0};
            int rc = plena_trace_validate_set_bytes(data, len, &opt, &s);
            if (replay && rc != PLENA_E_NOMEM &&
                plena_replay_tier_check_set(data, len, &c->ro, &mach, &s))
                rc = PLENA_E_NOMEM;
            if (rc == PLENA_E_NOMEM) {
                fprintf(stderr, "plena trace validate: %s: out of memory\n", path);
                st = plena_status_worst(st, PLENA_E_NOMEM);
            }
            valid = s.valid && rc != PLENA_E_NOMEM;
            json_t *errs = json_array(), *warns = json_array();
            size_t n_warn = 0, n_trunc = 0;
            for (size_t k = 0; k < s.n_entries; k++) {
                const struct plena_trace_report *r = &s.entries[k].report;
                if (!as_json) print_findings(path, s.entries[k].line, r);
                append_findings(errs, r->errors, r->n_errors);
                append_findings(warns, r->warnings, r->n_warnings);
                n_warn += r->n_warnings + r->n_warnings_truncated;
                n_trunc += r->n_errors_truncated;
            }
            if (!as_json)
                printf("%s: %s (set of %zu traces, %zu warnings)\n", path,
                       valid ? "valid" : "invalid", s.n_entries, n_warn);
            json_object_set_new(fo, "trace_id", json_null());
            json_object_set_new(fo, "trace_schema_version", json_null());
            json_object_set_new(fo, "n_traces", json_integer((json_int_t)s.n_entries));
            json_object_set_new(fo, "errors", errs);
            json_object_set_new(fo, "warnings", warns);
            json_object_set_new(fo, "errors_truncated", json_integer((json_int_t)n_trunc));
            plena_trace_set_report_free(&s);
        } else {
            struct plena_trace_report r;
            plena_trace_report_init(&r);
            int rc = plena_trace_validate_bytes(data, len, &opt, &r);
            if (replay && rc == 0 &&
                plena_replay_tier_check(data, len, &c->ro, &mach, &r) == PLENA_E_NOMEM)
                rc = PLENA_E_NOMEM;
            if (rc == PLENA_E_NOMEM) {
                fprintf(stderr, "plena trace validate: %s: out of memory\n", path);
                st = plena_status_worst(st, PLENA_E_NOMEM);
            }
            valid = r.valid && rc != PLENA_E_NOMEM;
            if (!as_json) {
                print_findings(path, 0, &r);
                if (valid)
                    printf("%s: valid (%s, schema v%d, %zu warnings)\n", path, r.trace_id,
                           r.schema_version, r.n_warnings + r.n_warnings_truncated);
            }
            json_object_set_new(fo, "trace_id",
                                r.trace_id[0] ? json_string(r.trace_id) : json_null());
            json_object_set_new(fo, "trace_schema_version",
                                r.schema_version ? json_integer(r.schema_version) : json_null());
            json_object_set_new(fo, "errors", append_findings(json_array(), r.errors, r.n_errors));
            json_object_set_new(fo, "warnings",
                                append_findings(json_array(), r.warnings, r.n_warnings));
            json_object_set_new(fo, "errors_truncated",
                                json_integer((json_int_t)r.n_errors_truncated));
            plena_trace_report_free(&r);
        }
        plena_free(data);
        json_object_set_new(fo, "valid", json_boolean(valid));
        json_array_append_new(files, fo);
        if (!valid) st = plena_status_worst(st, PLENA_E_FAILED);
    }
    if (as_json) {
        json_t *top = json_object();
        json_object_set_new(top, "schema_version", json_integer(1));
        int all_valid = 1;
        for (size_t k = 0; k < json_array_size(files); k++)
            all_valid &= json_is_true(json_object_get(json_array_get(files, k), "valid"));
        json_object_set_new(top, "valid", json_boolean(all_valid));
        json_object_set_new(top, "files", files);
        print_json(top);
    } else {
        json_decref(files);
    }
    return plena_status_exit_code(st);
}

/* ---- stats ---- */

static json_t *id_list(const int64_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)ids[i]));
    return a;
}

/* Validates one document and, when valid, prints or collects its statistics
 * (plena_trace_summary_doc). Returns PLENA_OK, PLENA_E_FAILED (invalid) or
 * PLENA_E_NOMEM. */
static enum plena_status stats_one(const char *path, long line, const char *doc, size_t len,
                                   int as_json, json_t *traces)
{
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    struct plena_trace_summary sm;
    int rc = plena_trace_summary_doc(doc, len, &sm, &r);
    if (rc && !r.valid) {
        char where[4200];
        snprintf(where, sizeof where, line ? "%s:%ld" : "%s", path, line);
        fprintf(stderr,
                "plena trace stats: %s: invalid trace (%zu errors; run `plena trace "
                "validate`)\n",
                where, plena_trace_report_error_total(&r));
        for (size_t i = 0; i < r.n_errors; i++)
            fprintf(stderr, "%s: error %s at %s: %s\n", where, r.errors[i].code, r.errors[i].path,
                    r.errors[i].message);
    }
    plena_trace_report_free(&r);
    const size_t n = sm.n;
    int64_t *ids = rc ? NULL : plena_calloc(n + 1, sizeof *ids);
    if (!rc && !ids) rc = PLENA_E_NOMEM;
    if (rc) {
        plena_trace_summary_free(&sm);
        return rc == PLENA_E_NOMEM ? PLENA_E_NOMEM : PLENA_E_FAILED;
    }
    const int64_t *counts = sm.counts;
    const struct plena_trace_stats st = sm.stats;
    const char *trace_id = sm.trace_id;
    const long long T = sm.token_count, K = sm.top_k;
    if (as_json) {
        json_t *o = json_object();
        json_object_set_new(o, "path", json_string(path));
        json_object_set_new(o, "line", line ? json_integer(line) : json_null());
        json_object_set_new(o, "trace_id", json_string(trace_id));
        json_object_set_new(o, "token_count", json_integer(T));
        json_object_set_new(o, "top_k", json_integer(K));
        json_object_set_new(o, "num_experts", json_integer((json_int_t)n));
        json_object_set_new(o, "total_slots", json_integer(st.total));
        json_object_set_new(o, "unique_experts", json_integer((json_int_t)st.n_active));
        json_object_set_new(o, "zero_experts", json_integer((json_int_t)st.n_zero));
        json_object_set_new(o, "tail_experts", json_integer((json_int_t)st.n_tail));
        json_object_set_new(o, "hot_experts_count", json_integer((json_int_t)st.n_hot));
        json_object_set_new(o, "max_count", json_integer(st.max_count));
        json_object_set_new(o, "duplicate_factor", json_real(st.duplicate_factor));
        json_object_set_new(o, "gini", json_real(st.gini));
        json_object_set_new(o, "max_mean_load_ratio", json_real(st.max_mean_ratio));
        json_object_set_new(o, "active_experts",
                            id_list(ids, plena_trace_active_experts(counts, n, ids)));
        json_object_set_new(o, "cold_experts",
                            id_list(ids, plena_trace_cold_experts(counts, n, ids)));
        json_object_set_new(o, "hot_experts",
                            id_list(ids, plena_trace_hot_experts(counts, n, ids)));
        json_array_append_new(traces, o);
    } else {
        char df[40], g[40], mm[40];
        plena_json_fmt_double(df, sizeof df, st.duplicate_factor);
        plena_json_fmt_double(g, sizeof g, st.gini);
        plena_json_fmt_double(mm, sizeof mm, st.max_mean_ratio);
        if (line)
            printf("%s:%ld: %s\n", path, line, trace_id);
        else
            printf("%s: %s\n", path, trace_id);
        printf("  tokens %lld, top_k %lld, experts %zu, slots %lld\n", T, K, n,
               (long long)st.total);
        printf("  unique experts %zu, zero experts %zu, tail experts (0 < count < 4) %zu, hot "
               "experts (count >= 16) %zu\n",
               st.n_active, st.n_zero, st.n_tail, st.n_hot);
        printf("  duplicate_factor %s, gini %s, max/mean load ratio %s\n", df, g, mm);
    }
    plena_free(ids);
    plena_trace_summary_free(&sm);
    return PLENA_OK;
}

struct stats_cli {
    int as_json, force_set;
    struct plena_opt_list files;
};

static const struct plena_opt stats_rows[] = {
    PLENA_OPT_FLAG_ROW("--json", struct stats_cli, as_json, "one JSON object instead of text"),
    PLENA_OPT_FLAG_ROW("--set", struct stats_cli, force_set, "treat every FILE as a trace set"),
};
static const struct plena_opt_pos stats_pos[] = {
    {"FILE", "a trace, a trace set (.jsonl or --set), or - for standard input",
     offsetof(struct stats_cli, files), 1, 0}};
static const struct plena_cmd_spec stats_spec = {
    .name = "trace stats",
    .summary = "counts, active/cold/hot experts, duplicate factor, gini",
    .description = "Prints per trace: tokens, top_k, experts, unique (active), zero, tail "
                   "(0 < count < 4) and hot (count >= 16) experts, duplicate factor, gini and "
                   "max/mean load ratio (formulas: docs/trace-schema.md \"Semantic rules "
                   "(validator only)\"). An invalid trace is reported, not counted.",
    PLENA_CMD_POS(stats_pos),
    PLENA_CMD_ROWS(stats_rows),
    .opts_size = sizeof(struct stats_cli),
};

static int cmd_stats(void *opts, const struct plena_cli_args *a)
{
    struct stats_cli *c = opts;
    (void)a;
    const int as_json = c->as_json, force_set = c->force_set;
    enum plena_status worst = PLENA_OK;
    json_t *traces = json_array();
    for (size_t i = 0; i < c->files.n; i++) {
        const char *path = c->files.v[i];
        char *data = NULL;
        size_t len = 0;
        struct plena_err err = {0};
        if (read_input(path, &data, &len, &err)) {
            plena_cli_report("trace stats", &err);
            worst = plena_status_worst(worst, err.code);
            continue;
        }
        if (plena_trace_path_is_set(path, force_set)) {
            struct plena_trace_lines it = {data, len, 0, 0};
            const char *text;
            size_t n;
            while (plena_trace_lines_next(&it, &text, &n))
                worst =
                    plena_status_worst(worst, stats_one(path, it.line, text, n, as_json, traces));
        } else {
            worst = plena_status_worst(worst, stats_one(path, 0, data, len, as_json, traces));
        }
        plena_free(data);
    }
    if (as_json) {
        json_t *top = json_object();
        json_object_set_new(top, "schema_version", json_integer(1));
        json_object_set_new(top, "traces", traces);
        print_json(top);
    } else {
        json_decref(traces);
    }
    return plena_status_exit_code(worst);
}

/* ---- shared by gen, import, split, pack ---- */

/* "0,2,5-7" -> 0 2 5 6 7 (each <= max, at most 65536 entries). */
static int parse_list(const char *s, uint32_t max, uint32_t **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9') goto bad;
        unsigned long a = strtoul(p, &end, 10), b = a;
        if (*end == '-') {
            const char *q = end + 1;
            if (*q < '0' || *q > '9') goto bad;
            b = strtoul(q, &end, 10);
        }
        if (a > max || b > max || b < a || *n + (b - a + 1) > 65536) goto bad;
        for (unsigned long v = a; v <= b; v++) {
            if (plena_grow((void **)out, &cap, *n + 1, sizeof **out)) goto bad;
            (*out)[(*n)++] = (uint32_t)v;
        }
        if (*end == ',' && end[1])
            end++;
        else if (*end)
            goto bad;
        p = end;
    }
    if (*n) return 0;
bad:
    plena_free(*out);
    *out = NULL;
    *n = 0;
    return -1;
}

static void now_utc(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --model (preset or model file) into *m and, when stamp (char[32]) is not
 * NULL, the --timestamp creation time into stamp and *created (gen and
 * import); a refused model is reported. */
static enum plena_status model_and_stamp(const char *cmd, const char *model,
                                         struct plena_moe_model *m, char *stamp,
                                         const char **created)
{
    if (stamp) {
        now_utc(stamp, 32);
        *created = stamp;
    }
    struct plena_err err = {0};
    if (!plena_model_resolve(model, m, &err)) return PLENA_OK;
    plena_cli_report(cmd, &err);
    return err.code;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static enum plena_status write_out(const char *cmd, const char *out_path, const struct plena_buf *b)
{
    struct plena_err err = {0};
    if (b->failed) {
        plena_cli_nomem(cmd);
        return PLENA_E_NOMEM;
    }
    if (out_path && strcmp(out_path, "-")) {
        if (plena_file_write_atomic(out_path, b->data, b->len, &err)) {
            plena_cli_report(cmd, &err);
            return err.code;
        }
    } else if (fwrite(b->data, 1, b->len, stdout) != b->len || fflush(stdout)) {
        fprintf(stderr, "plena %s: cannot write standard output\n", cmd);
        return PLENA_E_OUTPUT;
    }
    return PLENA_OK;
}

/* Writes docs: with out_dir one pretty file per trace (refusing existing
 * files unless force, when no_clobber); else one trace in pretty form unless
 * out_path ends in .jsonl, several as a set in canonical order. */
static enum plena_status write_docs(const char *cmd, struct plena_trace_docs *d,
                                    const char *out_path, const char *out_dir, int force,
                                    int no_clobber)
{
    struct plena_err err = {0};
    if (out_dir) {
        if (!plena_trace_docs_write_dir(d, out_dir, no_clobber && !force, &err)) return PLENA_OK;
        plena_cli_report(cmd, &err);
        return err.code;
    }
    struct plena_buf b;
    plena_buf_init(&b);
    if (plena_trace_docs_render(d, out_path && ends_with(out_path, ".jsonl"), &b)) b.failed = 1;
    enum plena_status code = write_out(cmd, out_path, &b);
    plena_buf_free(&b);
    return code;
}

/* ---- gen ---- */

/* CUSTOM rows of expert/layer lists ("0,2,5-7") into a uint32 array. */
struct u32_list {
    uint32_t *v;
    size_t n;
};

static int list_row(const char *v, uint32_t max, void *field)
{
    struct u32_list *l = field;
    return parse_list(v, max, &l->v, &l->n);
}

struct gen_cli {
    struct plena_trace_gen_opts o;
    const char *model, *out, *out_dir;
    uint32_t layer;
    struct u32_list layers, hot;
    uint64_t samples;
    int timestamp;
};

static int parse_dist(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row;
    struct gen_cli *c = base;
    struct plena_err err = {0};
    if (!plena_trace_gen_parse_dist(v, &c->o, &err)) return 0;
    snprintf(msg, n, "%s", err.msg);
    return -1;
}

static int parse_layers(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row, (void)msg, (void)n;
    return list_row(v, 65535, &((struct gen_cli *)base)->layers);
}

static int parse_hot_ids(const struct plena_opt *row, const char *v, void *base, char *msg,
                         size_t n)
{
    (void)row, (void)msg, (void)n;
    return list_row(v, 16382, &((struct gen_cli *)base)->hot);
}

static const struct plena_opt_enum gen_phases = {
    .names = (const char *const[]){"prefill", "decode", NULL}};
static const struct plena_opt_enum route_weights = {
    .names = (const char *const[]){"uniform", "random", NULL}};

#define G struct gen_cli
static const struct plena_opt gen_rows[] = {
    PLENA_OPT_STR_ROW("--model", "NAME|FILE", G, model, "preset name or HF-style config JSON",
                      .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_UINT_ROW("--tokens", "T", G, o.tokens, 1, 16777216, "tokens per trace",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_CUSTOM_ROW(
        "--dist", "D", G, o.dist, parse_dist, "balanced, round-robin, uniform, zipf:S or hot:N[:F]",
        "balanced | round-robin | uniform | zipf:S | hot:N[:F]", .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_UINT_ROW("--seed", "S", G, o.seed, 0, UINT64_MAX, "64-bit seed",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_UINT_ROW("--layer", "L", G, layer, 0, 65535, "model layer index",
                       .excludes = "--layers"),
    PLENA_OPT_CUSTOM_ROW(
        "--layers", "LIST", G, layers, parse_layers, "a list like 0,1,4-7 of 0..65535",
        "one trace per layer, e.g. 0,1,4-7 (instead of --layer)", .def_text = "--layer"),
    PLENA_OPT_UINT_ROW("--samples", "N", G, samples, 1, 1000000, "traces per layer, sample 0..N-1",
                       .def = "1"),
    PLENA_OPT_ENUM_ROW("--phase", "P", G, o.decode, &gen_phases, "phase of every trace"),
    PLENA_OPT_ENUM_ROW("--route-weights", "W", G, o.random_weights, &route_weights,
                       "route weights of every token (1/k or random), then through the model's "
                       "router: normalisation, routed scaling, groups, capacity"),
    PLENA_OPT_FLAG_ROW("--permute", G, o.permute,
                       "zipf: shuffle the rank order (derive(seed, 6, layer))"),
    PLENA_OPT_CUSTOM_ROW("--hot-ids", "LIST", G, hot, parse_hot_ids, "a list of expert ids",
                         "hot:N: these N experts are the hot set", .def_text = "a seeded shuffle"),
    PLENA_OPT_FLAG_ROW("--timestamp", G, timestamp,
                       "write created_at_utc (the output is then not reproducible)"),
    PLENA_OPT_UINT_ROW("--mlen", "M", G, o.mlen, 1, 4096, "replay.mlen"),
    PLENA_OPT_UINT_ROW("--blen", "B", G, o.blen, 1, 4096, "replay.blen"),
    PLENA_OPT_PATH_ROW("--out", "FILE", G, out, "write here (atomically)",
                       .def_text = "standard output", .excludes = "--out-dir"),
    PLENA_OPT_PATH_ROW("--out-dir", "D", G, out_dir, "one pretty <trace_id>.json per trace in D"),
};
#undef G

static void gen_init(void *p)
{
    plena_trace_gen_opts_default(&((struct gen_cli *)p)->o);
}

static void gen_fini(void *p)
{
    struct gen_cli *c = p;
    plena_free(c->layers.v);
    plena_free(c->hot.v);
    c->layers.v = c->hot.v = NULL;
}

static const struct plena_cmd_spec gen_spec = {
    .name = "trace gen",
    .summary = "synthetic routing traces",
    .description = "Generates synthetic routing traces. One trace is written in pretty form; "
                   "several as a trace set in canonical order (one canonical trace per line), "
                   "or with --out-dir one file each. Every trace is validated before it is "
                   "written.",
    PLENA_CMD_ROWS(gen_rows),
    .init = gen_init,
    .fini = gen_fini,
    .opts_size = sizeof(struct gen_cli),
};

static int cmd_gen(void *opts, const struct plena_cli_args *a)
{
    struct gen_cli *c = opts;
    int pcode;
    (void)a;
    pcode = 0;
    struct plena_trace_gen_opts o = c->o;
    uint32_t *layers = c->layers.v;
    size_t n_layers = c->layers.n;
    enum plena_status code = PLENA_OK;
    struct plena_err err = {0};
    if (c->hot.n && (o.dist != PLENA_TRACE_DIST_HOT || c->hot.n != o.hot_n)) {
        pcode = plena_cli_usage_error("trace gen", "--hot-ids needs --dist hot:N with N = %zu ids",
                                      c->hot.n);
        goto done;
    }
    o.hot_ids = c->hot.v;
    o.n_hot_ids = c->hot.n;
    char stamp[32];
    struct plena_moe_model m;
    code =
        model_and_stamp("trace gen", c->model, &m, c->timestamp ? stamp : NULL, &o.created_at_utc);
    if (code) goto done;
    o.model = &m;
    if (!n_layers) {
        layers = plena_malloc(sizeof *layers);
        if (!layers) {
            pcode = plena_cli_nomem("trace gen");
            goto done;
        }
        layers[0] = c->layer;
        n_layers = 1;
        c->layers.v = layers;
    }
    /* every trace is held until written: refuse what cannot fit first */
    if (plena_trace_gen_check_size((uint64_t)n_layers * c->samples, o.tokens, m.top_k, &err)) {
        plena_cli_report("trace gen", &err);
        code = err.code;
        goto done;
    }
    struct plena_trace_docs docs = {0};
    /* SIGINT/SIGTERM between traces: nothing is written (exit 5) */
    plena_cli_catch_stop_signals();
    for (size_t l = 0; l < n_layers && !code; l++)
        for (uint64_t s = 0; s < c->samples && !code; s++) {
            json_t *t;
            if (plena_cli_stop) {
                fprintf(stderr, "plena trace gen: interrupted (SIGINT/SIGTERM); nothing written\n");
                code = PLENA_E_INTERRUPTED;
                break;
            }
            o.layer = layers[l];
            o.sample = (uint32_t)s;
            if (plena_trace_gen_tree(&o, &t, &err)) {
                plena_cli_report("trace gen", &err);
                code = err.code;
            } else if (plena_trace_docs_add(&docs, t, "gen")) {
                code = PLENA_E_NOMEM;
                plena_cli_nomem("trace gen");
            }
        }
    if (!code) code = write_docs("trace gen", &docs, c->out, c->out_dir, 1, 0);
    plena_trace_docs_free(&docs);
done:
    return pcode ? pcode : plena_status_exit_code(code);
}

/* ---- import ---- */

struct import_cli {
    struct plena_trace_import_opts o;
    const char *model, *out, *out_dir, *file, *raw;
    int from, phase, dtype; /* -1: not given */
    struct u32_list map;
    uint32_t shape[3];
    int timestamp;
};

static const char *import_format_name(int v)
{
    return plena_trace_import_format_name((enum plena_trace_import_format)v);
}
static const struct plena_opt_enum import_formats = {.name = import_format_name};
static const struct plena_opt_enum import_phases = {
    .names = (const char *const[]){"prefill", "decode", "smoke", "unknown", NULL}};
static const struct plena_opt_enum raw_dtypes = {.names =
                                                     (const char *const[]){"int16", "int32", NULL}};

static int parse_layer_map(const struct plena_opt *row, const char *v, void *base, char *msg,
                           size_t n)
{
    (void)row, (void)msg, (void)n;
    return list_row(v, 65535, &((struct import_cli *)base)->map);
}

static int parse_shape(const struct plena_opt *row, const char *v, void *base, char *msg, size_t n)
{
    (void)row, (void)msg, (void)n;
    struct import_cli *c = base;
    uint32_t *sh = NULL;
    size_t n_sh = 0;
    int rc = strchr(v, '-') || parse_list(v, UINT32_MAX - 1, &sh, &n_sh) || n_sh != 3 ? -1 : 0;
    if (!rc) memcpy(c->shape, sh, sizeof c->shape);
    plena_free(sh);
    return rc;
}

#define I struct import_cli
static const struct plena_opt import_rows[] = {
    PLENA_OPT_ENUM_ROW(
        "--from", "F", I, from, &import_formats,
        "vllm (routed-experts JSON/JSONL), megatron (router-trace JSONL), csv (long form), "
        "jsonl (routing rows)",
        .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_STR_ROW("--model", "NAME|FILE", I, model,
                      "preset or HF-style config (these formats carry no shapes)",
                      .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_STR_ROW("--benchmark", "NAME", I, o.benchmark, "workload.benchmark",
                      .def_text = "the format's name"),
    PLENA_OPT_ENUM_ROW(
        "--phase", "P", I, phase, &import_phases,
        "megatron: the phase; vllm --raw: prefill or decode (which array the file holds)",
        .def_text = "megatron: unknown; vllm --raw: required"),
    PLENA_OPT_FLAG_ROW("--allow-uniform-weights", I, o.allow_uniform_weights,
                       "import a source without weights with 1/k each (weight_source "
                       "uniform_weights_timing_only)"),
    PLENA_OPT_CUSTOM_ROW("--layer-map", "LIST", I, map, parse_layer_map, "a list like 0,2,4",
                         "vllm: layer position -> model layer (e.g. 0,2,4)",
                         .def_text = "the identity"),
    PLENA_OPT_UINT_ROW("--layer-offset", "N", I, o.layer_offset, 0, 65535,
                       "megatron: added to each record's layer"),
    PLENA_OPT_FLAG_ROW("--merge-ranks", I, o.merge_ranks,
                       "megatron: one trace per (step, stage, block, layer), ranks concatenated"),
    PLENA_OPT_FLAG_ROW("--decode-aggregate", I, o.decode_aggregate,
                       "vllm: one decode trace of all generated tokens"),
    PLENA_OPT_PATH_ROW("--raw", "FILE", I, raw,
                       "vllm: a raw little-endian array instead of JSON (with --shape, --dtype "
                       "and --phase)"),
    PLENA_OPT_CUSTOM_ROW("--shape", "P,L,K", I, shape, parse_shape, "P,L,K",
                         "--raw: the array's shape", .def_text = "none"),
    PLENA_OPT_ENUM_ROW("--dtype", "T", I, dtype, &raw_dtypes, "--raw: the element type"),
    PLENA_OPT_FLAG_ROW("--keep-going", I, o.keep_going,
                       "skip bad records (listed on standard error), exit 1 at the end"),
    PLENA_OPT_UINT_ROW("--mlen", "M", I, o.mlen, 1, 4096, "replay.mlen"),
    PLENA_OPT_UINT_ROW("--blen", "B", I, o.blen, 1, 4096, "replay.blen"),
    PLENA_OPT_FLAG_ROW("--timestamp", I, timestamp, "write created_at_utc"),
    PLENA_OPT_PATH_ROW("--out", "FILE", I, out,
                       "write here (one trace pretty; several or .jsonl: a set)",
                       .def_text = "standard output", .excludes = "--out-dir"),
    PLENA_OPT_PATH_ROW("--out-dir", "D", I, out_dir, "one pretty <trace_id>.json per trace"),
};
static const struct plena_opt_pos import_pos[] = {
    {"FILE", "the capture (- for standard input); none with --raw", offsetof(I, file), 0, 1}};
#undef I

static void import_init(void *p)
{
    struct import_cli *c = p;
    plena_trace_import_opts_default(&c->o);
    c->from = c->phase = c->dtype = -1;
}

static void import_fini(void *p)
{
    struct import_cli *c = p;
    plena_free(c->map.v);
    c->map.v = NULL;
}

static const struct plena_cmd_spec import_spec = {
    .name = "trace import",
    .summary = "traces from vllm, megatron, csv or jsonl captures",
    .description = "Imports routing captures into route traces. Every trace is validated "
                   "(statistics recomputed) before anything is written.",
    PLENA_CMD_POS(import_pos),
    PLENA_CMD_ROWS(import_rows),
    .init = import_init,
    .fini = import_fini,
    .opts_size = sizeof(struct import_cli),
};

static int cmd_import(void *opts, const struct plena_cli_args *a)
{
    struct import_cli *c = opts;
    int pcode;
    struct plena_trace_import_opts o = c->o;
    const char *file = c->file;
    enum plena_status code = PLENA_OK;
    struct plena_err err = {0};
    pcode = 0;
    o.from = (enum plena_trace_import_format)c->from;
    if (c->phase >= 0) o.phase = import_phases.names[c->phase];
    const int raw_given =
        c->raw || plena_opts_given(&import_spec, a->r, "--shape") || c->dtype >= 0;
    if (raw_given) {
        if (o.from != PLENA_TRACE_IMPORT_VLLM || !c->raw ||
            !plena_opts_given(&import_spec, a->r, "--shape") || c->dtype < 0 || file) {
            pcode = plena_cli_usage_error("trace import", "--raw FILE --shape P,L,K --dtype "
                                                          "int16|int32 go together, with --from "
                                                          "vllm and no other FILE");
            goto done;
        }
        memcpy(o.raw_shape, c->shape, sizeof o.raw_shape);
        o.raw_elem_bytes = c->dtype == 0 ? 2 : 4;
        if (!o.phase || (strcmp(o.phase, "prefill") && strcmp(o.phase, "decode"))) {
            pcode = plena_cli_usage_error("trace import",
                                          "--raw needs --phase prefill or --phase decode (which "
                                          "array the file holds)");
            goto done;
        }
        o.raw = 1;
        file = c->raw;
    }
    if (!file) {
        pcode = plena_cli_usage_error("trace import", "missing FILE");
        goto done;
    }
    if ((c->map.n && o.from != PLENA_TRACE_IMPORT_VLLM) ||
        ((o.merge_ranks || o.layer_offset) && o.from != PLENA_TRACE_IMPORT_MEGATRON) ||
        (o.decode_aggregate && o.from != PLENA_TRACE_IMPORT_VLLM)) {
        pcode = plena_cli_usage_error("trace import", "--layer-map and --decode-aggregate apply "
                                                      "to vllm, --merge-ranks and --layer-offset "
                                                      "to megatron");
        goto done;
    }
    if (o.blen > o.mlen || o.mlen % o.blen) {
        pcode = plena_cli_usage_error("trace import", "--blen must divide --mlen");
        goto done;
    }
    o.layer_map = c->map.v;
    o.n_layer_map = c->map.n;
    char stamp[32];
    struct plena_moe_model m;
    code = model_and_stamp("trace import", c->model, &m, c->timestamp ? stamp : NULL,
                           &o.created_at_utc);
    if (code) goto done;
    o.model = &m;
    char *data = NULL;
    size_t len = 0;
    if (read_input(file, &data, &len, &err)) {
        plena_cli_report("trace import", &err);
        code = err.code;
        goto done;
    }
    struct plena_trace_docs docs = {0};
    struct plena_trace_import_log log = {0};
    plena_buf_init(&log.text);
    int rc = plena_trace_import(&o, file, data, len, &docs, &log, &err);
    plena_free(data);
    if (log.text.len) fwrite(log.text.data, 1, log.text.len, stderr);
    if (rc) {
        plena_cli_report("trace import", &err);
        code = err.code;
    } else if (docs.n == 0) {
        fprintf(stderr, "plena trace import: %s: no traces produced\n", file);
        code = log.n_skipped ? PLENA_E_FAILED : PLENA_E_INPUT;
    } else {
        code = write_docs("trace import", &docs, c->out, c->out_dir, 1, 0);
        if (log.n_skipped) {
            fprintf(stderr, "plena trace import: %zu bad records skipped (--keep-going)\n",
                    log.n_skipped);
            code = plena_status_worst(code, PLENA_E_FAILED);
        }
    }
    plena_buf_free(&log.text);
    plena_trace_docs_free(&docs);
done:
    return pcode ? pcode : plena_status_exit_code(code);
}

/* ---- split / pack ---- */

struct split_cli {
    const char *set, *out_dir;
    int force;
};

static const struct plena_opt split_rows[] = {
    PLENA_OPT_PATH_ROW("--out-dir", "D", struct split_cli, out_dir, "where D/<trace_id>.json go",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_FLAG_ROW("--force", struct split_cli, force, "overwrite existing files"),
};
static const struct plena_opt_pos split_pos[] = {{"SET",
                                                  "a trace set (.jsonl), or - for standard input",
                                                  offsetof(struct split_cli, set), 1, 1}};
static const struct plena_cmd_spec split_spec = {
    .name = "trace split",
    .summary = "one pretty <trace_id>.json per trace of a set",
    .description = "Writes every trace of the set as D/<trace_id>.json (pretty form); refuses to "
                   "overwrite an existing file unless --force. Every line is validated first; "
                   "nothing is written when one is invalid.",
    PLENA_CMD_POS(split_pos),
    PLENA_CMD_ROWS(split_rows),
    .opts_size = sizeof(struct split_cli),
};

static int cmd_split(void *opts, const struct plena_cli_args *a)
{
    struct split_cli *c = opts;
    (void)a;
    char *data = NULL;
    size_t len = 0;
    struct plena_err err = {0};
    if (read_input(c->set, &data, &len, &err)) return plena_cli_report("trace split", &err);
    struct plena_trace_docs docs = {0};
    enum plena_status code;
    if (plena_trace_docs_read(&docs, c->set, data, len, 1, NULL, &err)) {
        plena_cli_report("trace split", &err);
        code = err.code;
    } else {
        code = write_docs("trace split", &docs, NULL, c->out_dir, c->force, 1);
    }
    plena_free(data);
    plena_trace_docs_free(&docs);
    return plena_status_exit_code(code);
}

struct pack_cli {
    struct plena_opt_list files;
    const char *out;
    int force_set;
};

static const struct plena_opt pack_rows[] = {
    PLENA_OPT_PATH_ROW("--out", "SET", struct pack_cli, out,
                       "the trace set to write (- for standard output)",
                       .flags = PLENA_OPT_REQUIRED),
    PLENA_OPT_FLAG_ROW("--set", struct pack_cli, force_set, "treat every FILE as a trace set"),
};
static const struct plena_opt_pos pack_pos[] = {
    {"FILE", "traces (.json) or trace sets (.jsonl or --set); - for standard input",
     offsetof(struct pack_cli, files), 1, 0}};
static const struct plena_cmd_spec pack_spec = {
    .name = "trace pack",
    .summary = "traces -> one trace set in canonical order",
    .description = "Reads traces, validates each, and writes one trace set in canonical order "
                   "(docs/replay.md \"Campaigns\"). A trace_id given twice is an error (V100).",
    PLENA_CMD_POS(pack_pos),
    PLENA_CMD_ROWS(pack_rows),
    .opts_size = sizeof(struct pack_cli),
};

static int cmd_pack(void *opts, const struct plena_cli_args *a)
{
    struct pack_cli *c = opts;
    (void)a;
    struct plena_trace_docs docs = {0};
    enum plena_status code = PLENA_OK;
    for (size_t i = 0; i < c->files.n && !code; i++) {
        const char *a = c->files.v[i];
        char *data = NULL;
        size_t len = 0;
        struct plena_err err = {0};
        if (read_input(a, &data, &len, &err) ||
            plena_trace_docs_read(&docs, a, data, len, plena_trace_path_is_set(a, c->force_set),
                                  NULL, &err)) {
            plena_cli_report("trace pack", &err);
            code = err.code;
        }
        plena_free(data);
    }
    if (!code) {
        struct plena_buf b;
        plena_buf_init(&b);
        plena_trace_docs_sort(&docs);
        if (plena_trace_docs_write_set(&docs, &b)) b.failed = 1;
        code = write_out("trace pack", c->out, &b);
        plena_buf_free(&b);
    }
    plena_trace_docs_free(&docs);
    return plena_status_exit_code(code);
}

/* ---- rules ---- */

struct rules_cli {
    int unused;
};
static const struct plena_cmd_spec rules_spec = {
    .name = "trace rules",
    .summary = "list every validator rule and warning",
    .description = "Lists every rule of the validator (code, JSON path, rule), from the field "
                   "table src/trace/fields.def and src/trace/rules.def.",
    .opts_size = sizeof(struct rules_cli),
};

static int cmd_rules(void *opts, const struct plena_cli_args *a)
{
    (void)opts, (void)a;
    for (unsigned i = 0; i < plena_trace_rule_count(); i++) {
        const struct plena_trace_rule_info *r = plena_trace_rule_at(i);
        printf("%s  %-40s %s\n", r->code, r->path, r->rule);
    }
    return plena_status_exit_code(PLENA_OK);
}

/* ---- build (routing rows -> traces; the work is in ckpt/rows_build.c) ---- */

struct build_cli {
    struct plena_opt_list rows, sample_ids;
    const char *checkpoint, *model, *out, *out_dir;
    int64_t *layers;
    size_t n_layers;
    int phases;
    uint32_t mlen, blen;
    int allow_uniform;
};

static int parse_build_layers(const struct plena_opt *row, const char *v, void *base, char *msg,
                              size_t n)
{
    (void)row;
    struct build_cli *c = base;
    plena_free(c->layers);
    if (!plena_route_parse_layers(v, &c->layers, &c->n_layers)) return 0;
    snprintf(msg, n, "expected a LIST of layers like 0,2 or 0..3, found '%s'", v);
    return -1;
}

static const struct plena_opt_enum build_phases = {
    .names = (const char *const[]){"both", "prefill", "decode", NULL}};

#define B struct build_cli
static const struct plena_opt build_rows[] = {
    PLENA_OPT_PATH_ROW("--checkpoint", "DIR", B, checkpoint, "model fields from DIR/config.json",
                       .excludes = "--model"),
    PLENA_OPT_STR_ROW("--model", "NAME|FILE", B, model, "preset name or HF-style config JSON"),
    PLENA_OPT_PATH_ROW("--out", "SET", B, out, "one trace set (canonical order), atomically",
                       .def_text = "standard output", .excludes = "--out-dir"),
    PLENA_OPT_PATH_ROW("--out-dir", "D", B, out_dir, "one pretty <trace_id>.json per trace in D"),
    PLENA_OPT_CUSTOM_ROW("--layers", "LIST", B, layers, parse_build_layers,
                         "layers like 0,2 or 0..3", "only rows of these layers", .def_text = "all"),
    PLENA_OPT_ENUM_ROW("--phases", "P", B, phases, &build_phases, "only rows of these phases"),
    {.names = "--sample-ids",
     .kind = PLENA_OPT_LIST,
     .metavar = "ID...",
     PLENA_OPT_FIELD(B, sample_ids),
     .flags = PLENA_OPT_REPEAT | PLENA_OPT_GREEDY,
     .help = "only rows of these samples"},
    PLENA_OPT_UINT_ROW("--mlen", "M", B, mlen, 1, 4096, "replay.mlen", .def = "64"),
    PLENA_OPT_UINT_ROW("--blen", "B", B, blen, 1, 4096, "replay.blen", .def = "4"),
    PLENA_OPT_FLAG_ROW("--allow-uniform-weights", B, allow_uniform,
                       "rows without route_weights become uniform timing-only traces"),
};
#undef B
static const struct plena_opt_pos build_pos[] = {
    {"ROWS", "routing-row files of plena trace route (shards are merged by key)",
     offsetof(struct build_cli, rows), 1, 0}};

static void build_fini(void *p)
{
    struct build_cli *c = p;
    plena_free(c->layers);
    c->layers = NULL;
}

static const struct plena_cmd_spec build_spec = {
    .name = "trace build",
    .summary = "routing rows -> validated traces",
    .description = "Builds one validated route trace per routing row (plena trace route), the "
                   "model fields from the checkpoint's config.json (or --model) cross-checked "
                   "against every row. Rows of several shard files are merged by key; equal "
                   "keys must be identical rows.",
    PLENA_CMD_POS(build_pos),
    PLENA_CMD_ROWS(build_rows),
    .fini = build_fini,
    .opts_size = sizeof(struct build_cli),
};

static int cmd_build(void *opts, const struct plena_cli_args *a)
{
    (void)a;
    struct build_cli *c = opts;
    if (!c->checkpoint == !c->model)
        return plena_cli_usage_error("trace build", "give exactly one of --checkpoint and --model");
    char path[4200];
    if (c->checkpoint) snprintf(path, sizeof path, "%s/config.json", c->checkpoint);
    struct plena_moe_model m;
    enum plena_status code =
        model_and_stamp("trace build", c->checkpoint ? path : c->model, &m, NULL, NULL);
    if (code) return plena_status_exit_code(code);
    char by[64];
    snprintf(by, sizeof by, "plena trace build %s", plena_version());
    const int phase_mask[3] = {0, PLENA_ROUTE_PREFILL, PLENA_ROUTE_DECODE};
    struct plena_rows_build_opts o = {
        .rows = c->rows.v,
        .n_rows = c->rows.n,
        .layers = c->layers,
        .n_layers = c->n_layers,
        .phases = phase_mask[c->phases],
        .sample_ids = c->sample_ids.v,
        .n_sample_ids = c->sample_ids.n,
        .mlen = c->mlen,
        .blen = c->blen,
        .allow_uniform = c->allow_uniform,
        .created_by = by,
    };
    struct plena_trace_docs docs = {0};
    struct plena_err err = {0};
    if (plena_rows_build(&o, &m, &docs, &err)) {
        plena_trace_docs_free(&docs);
        return plena_cli_report("trace build", &err);
    }
    code = write_docs("trace build", &docs, c->out, c->out_dir, 1, 0);
    plena_trace_docs_free(&docs);
    return plena_status_exit_code(code);
}

static const struct plena_cli_sub trace_subs[] = {
    {"validate", cmd_validate, &validate_spec},
    {"stats", cmd_stats, &stats_spec},
    {"gen", cmd_gen, &gen_spec},
    {"import", cmd_import, &import_spec},
    {"split", cmd_split, &split_spec},
    {"pack", cmd_pack, &pack_spec},
    {"rules", cmd_rules, &rules_spec},
    {"route", plena_cli_trace_route, &plena_cli_trace_route_spec},
    {"tiny-checkpoint", plena_cli_trace_tiny, &plena_cli_trace_tiny_spec},
    {"build", cmd_build, &build_spec},
};

const struct plena_cli_cmd plena_cli_cmd_trace = {
    .subs = trace_subs,
    .n_subs = sizeof trace_subs / sizeof trace_subs[0],
};
