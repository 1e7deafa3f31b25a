/* plena trace: validate (+ --replay tier), stats, gen, import, split, pack
 * (spec/traces-and-replay.md 1.6, 1.10, 2.1-2.3, 3.2, 3.3). Reads files (or
 * `-`), calls the trace module and prints text or --json; picks exit codes
 * (0 valid, 1 invalid, 2 usage, 3 unreadable, 4 unwritable; highest wins).
 * route/build/tiny-checkpoint are not built yet and say so (exit 2). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"
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

static void usage(FILE *f)
{
    fprintf(f, "usage: plena trace <subcommand> [options]\n\n"
               "subcommands:\n"
               "  validate FILE...   validate traces (.json) and trace sets (.jsonl)\n"
               "  stats FILE...      counts, active/cold/hot experts, duplicate factor, gini\n"
               "  gen --model M ...  synthetic routing traces (--help for options)\n"
               "  import --from F .. traces from vllm, megatron, csv or jsonl captures\n"
               "  split SET --out-dir D   one pretty <trace_id>.json per trace of a set\n"
               "  pack FILE... --out SET  traces -> one trace set in canonical order\n"
               "  rules              list every validator rule and warning\n"
               "\n`plena trace <subcommand> --help` lists its options.\n");
}

static void validate_usage(FILE *f)
{
    fprintf(f, "usage: plena trace validate FILE... [options]\n\n"
               "  FILE             a trace (.json), a trace set (.jsonl, or any file with --set),\n"
               "                   or - for standard input\n"
               "  --json           print one JSON report instead of text\n"
               "  --strict         warnings are errors\n"
               "  --set            treat every FILE as a trace set (one trace per line)\n"
               "  --max-errors N   errors listed per trace before the rest are only counted "
               "(default 100)\n"
               "  --max-bytes B    largest accepted document in bytes (default 1073741824)\n"
               "  --replay         also the replay-tier rules R001-R006 (R005, the generator's\n"
               "                   capacity check, is not built yet)\n"
               "  --settings FILE  settings whose MLEN the replay tier uses (default: the\n"
               "                   built-in reference settings)\n"
               "  --mlen N         replay MLEN override (R006 then accepts any replay.mlen)\n"
               "  --help           this text\n\n"
               "exit: 0 all valid, 1 any invalid, 2 bad option, 3 unreadable file\n");
}

static void stats_usage(FILE *f)
{
    fprintf(f, "usage: plena trace stats FILE... [--json] [--set]\n\n"
               "  prints per trace: tokens, top_k, experts, unique (active), zero, tail (0 < count "
               "< 4)\n"
               "  and hot (count >= 16) experts, duplicate factor, gini, max/mean load ratio.\n"
               "  --json   one JSON object instead of text\n"
               "  --set    treat every FILE as a trace set\n"
               "  --help   this text\n\n"
               "exit: 0 success, 1 a trace is invalid, 2 bad option, 3 unreadable file\n");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    *out = 0;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v == 0) return -1;
    *out = (size_t)v;
    return 0;
}

static int is_set_path(const char *path, int force_set)
{
    size_t n = strlen(path);
    return force_set || (n >= 6 && !strcmp(path + n - 6, ".jsonl"));
}

static int read_input(const char *path, char **data, size_t *len, struct plena_err *err)
{
    if (strcmp(path, "-")) return plena_file_read_all(path, data, len, err);
    if (plena_cli_read_stdin(data, len))
        return PLENA_FAIL(err, PLENA_E_NOMEM, "-", "out of memory reading standard input");
    return 0;
}

/* Prints v in the pretty form (0.3) to stdout and drops the reference. */
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

/* The replay tier for every valid line of a set (entries are in line order). */
static int replay_set(const char *data, size_t len, const struct plena_replay_tier_opts *ro,
                      const struct plena_gen_machine *mach, struct plena_trace_set_report *s)
{
    struct plena_trace_lines it = {data, len, 0, 0};
    const char *text;
    size_t n, k = 0;
    while (k < s->n_entries && plena_trace_lines_next(&it, &text, &n)) {
        if (s->entries[k].line != it.line) continue;
        struct plena_trace_report *r = &s->entries[k].report;
        if (r->valid) {
            size_t before = r->n_errors;
            if (plena_replay_tier_check(text, n, ro, mach, r) == PLENA_E_NOMEM) return -1;
            for (size_t i = before; i < r->n_errors; i++)
                r->errors[i].line = it.line;
            if (!r->valid) s->valid = 0;
        }
        k++;
    }
    return 0;
}

static int cmd_validate(int argc, char **argv)
{
    struct plena_trace_validate_options opt = {0};
    struct plena_replay_tier_opts ro = {0};
    const char *settings_path = NULL;
    int as_json = 0, force_set = 0, n_files = 0, replay = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            validate_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--strict")) {
            opt.strict = 1;
        } else if (!strcmp(a, "--set")) {
            force_set = 1;
        } else if (!strcmp(a, "--replay")) {
            replay = 1;
        } else if (!strcmp(a, "--settings")) {
            if (i + 1 >= argc)
                return plena_cli_usage_error("trace validate", "--settings needs a FILE");
            settings_path = argv[++i];
        } else if (!strcmp(a, "--mlen")) {
            size_t v;
            if (i + 1 >= argc || parse_size(argv[i + 1], &v) || v > 4096)
                return plena_cli_usage_error("trace validate", "--mlen needs 1..4096");
            ro.mlen_override = (uint32_t)v;
            i++;
        } else if (!strcmp(a, "--max-errors") || !strcmp(a, "--max-bytes")) {
            size_t v;
            if (i + 1 >= argc || parse_size(argv[i + 1], &v))
                return plena_cli_usage_error("trace validate", "%s needs a positive integer", a);
            if (!strcmp(a, "--max-errors"))
                opt.max_errors = v;
            else
                opt.max_bytes = v;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return plena_cli_usage_error("trace validate", "unknown option '%s'", a);
        } else {
            n_files++;
        }
    }
    if (n_files == 0) return plena_cli_usage_error("trace validate", "no FILE given");
    struct plena_gen_machine mach;
    plena_gen_machine_default(&mach);
    if (replay) {
        /* the settings the replay would use (same lookup as plena replay):
         * R005 sizes against that machine's SRAM and VRAM */
        struct plena_settings st;
        struct plena_err serr = {0};
        if (plena_settings_load(settings_path, &st, &serr))
            return plena_cli_report("trace validate", &serr);
        ro.settings_mlen = st.mlen;
        plena_gen_machine_from_settings(&st, &mach);
    }
    int exit_code = 0;
    json_t *files = json_array();
    for (int i = 1; i < argc; i++) {
        const char *path = argv[i];
        if (!strcmp(path, "--max-errors") || !strcmp(path, "--max-bytes") ||
            !strcmp(path, "--settings") || !strcmp(path, "--mlen")) {
            i++;
            continue;
        }
        if (path[0] == '-' && path[1]) continue;
        char *data = NULL;
        size_t len = 0;
        struct plena_err err = {0};
        json_t *fo = json_object();
        json_object_set_new(fo, "path", json_string(path));
        if (read_input(path, &data, &len, &err)) {
            int code = plena_cli_report("trace validate", &err);
            if (code > exit_code) exit_code = code;
            json_object_set_new(fo, "valid", json_false());
            json_object_set_new(fo, "unreadable", json_string(err.msg));
            json_array_append_new(files, fo);
            continue;
        }
        int valid;
        if (is_set_path(path, force_set)) {
            struct plena_trace_set_report s = {0};
            int rc = plena_trace_validate_set_bytes(data, len, &opt, &s);
            if (replay && rc != PLENA_E_NOMEM && replay_set(data, len, &ro, &mach, &s))
                rc = PLENA_E_NOMEM;
            if (rc == PLENA_E_NOMEM) {
                fprintf(stderr, "plena trace validate: %s: out of memory\n", path);
                exit_code = 5;
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
                plena_replay_tier_check(data, len, &ro, &mach, &r) == PLENA_E_NOMEM)
                rc = PLENA_E_NOMEM;
            if (rc == PLENA_E_NOMEM) {
                fprintf(stderr, "plena trace validate: %s: out of memory\n", path);
                exit_code = 5;
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
        if (!valid && exit_code < 1) exit_code = 1;
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
    return exit_code;
}

/* ---- stats ---- */

static json_t *id_list(const int64_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_integer((json_int_t)ids[i]));
    return a;
}

/* Validates one document and, when valid, prints or collects its statistics.
 * Returns 0, 1 (invalid) or 5 (out of memory). */
static int stats_one(const char *path, long line, const char *doc, size_t len, int as_json,
                     json_t *traces)
{
    struct plena_trace_report r;
    plena_trace_report_init(&r);
    int rc = plena_trace_validate_bytes(doc, len, NULL, &r);
    if (rc) {
        char where[4200];
        snprintf(where, sizeof where, line ? "%s:%ld" : "%s", path, line);
        fprintf(stderr,
                "plena trace stats: %s: invalid trace (%zu errors; run `plena trace "
                "validate`)\n",
                where, plena_trace_report_error_total(&r));
        for (size_t i = 0; i < r.n_errors; i++)
            fprintf(stderr, "%s: error %s at %s: %s\n", where, r.errors[i].code, r.errors[i].path,
                    r.errors[i].message);
        plena_trace_report_free(&r);
        return rc == PLENA_E_NOMEM ? 5 : 1;
    }
    plena_trace_report_free(&r);
    /* Valid: expert_counts equals the histogram of topk_indices (V053). */
    json_t *root = json_loadb(doc, len, 0, NULL);
    json_t *model = json_object_get(root, "model"), *routing = json_object_get(root, "routing");
    json_t *counts_j = json_object_get(routing, "expert_counts");
    size_t n = json_array_size(counts_j);
    int64_t *counts = plena_calloc(n + 1, sizeof *counts), *ids = plena_calloc(n + 1, sizeof *ids);
    int code = 0;
    struct plena_trace_stats st;
    if (!root || !counts || !ids) {
        code = 5;
        goto out;
    }
    for (size_t e = 0; e < n; e++)
        counts[e] = json_integer_value(json_array_get(counts_j, e));
    if (plena_trace_stats_compute(counts, n, &st, NULL)) {
        code = 1;
        goto out;
    }
    const char *trace_id = json_string_value(json_object_get(root, "trace_id"));
    long long T =
        json_integer_value(json_object_get(json_object_get(root, "workload"), "token_count"));
    long long K = json_integer_value(json_object_get(model, "top_k"));
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
out:
    plena_free(counts);
    plena_free(ids);
    json_decref(root);
    return code;
}

static int cmd_stats(int argc, char **argv)
{
    int as_json = 0, force_set = 0, n_files = 0, exit_code = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            stats_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            as_json = 1;
        } else if (!strcmp(a, "--set")) {
            force_set = 1;
        } else if (a[0] == '-' && a[1]) {
            return plena_cli_usage_error("trace stats", "unknown option '%s'", a);
        } else {
            n_files++;
        }
    }
    if (n_files == 0) return plena_cli_usage_error("trace stats", "no FILE given");
    json_t *traces = json_array();
    for (int i = 1; i < argc; i++) {
        const char *path = argv[i];
        if (path[0] == '-' && path[1]) continue;
        char *data = NULL;
        size_t len = 0;
        struct plena_err err = {0};
        if (read_input(path, &data, &len, &err)) {
            int code = plena_cli_report("trace stats", &err);
            if (code > exit_code) exit_code = code;
            continue;
        }
        if (is_set_path(path, force_set)) {
            struct plena_trace_lines it = {data, len, 0, 0};
            const char *text;
            size_t n;
            while (plena_trace_lines_next(&it, &text, &n)) {
                int code = stats_one(path, it.line, text, n, as_json, traces);
                if (code > exit_code) exit_code = code;
            }
        } else {
            int code = stats_one(path, 0, data, len, as_json, traces);
            if (code > exit_code) exit_code = code;
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
    return exit_code;
}

/* ---- shared by gen, import, split, pack ---- */

static int parse_u64(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v > max) return -1;
    *out = v;
    return 0;
}

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
 * NULL, the --timestamp creation time into stamp and *created. 0 or the exit
 * code (gen and import). */
static int model_and_stamp(const char *cmd, const char *model, struct plena_moe_model *m,
                           char *stamp, const char **created)
{
    if (stamp) {
        now_utc(stamp, 32);
        *created = stamp;
    }
    struct plena_err err = {0};
    return plena_model_resolve(model, m, &err) ? plena_cli_report(cmd, &err) : 0;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int write_out(const char *cmd, const char *out_path, const struct plena_buf *b)
{
    struct plena_err err = {0};
    if (b->failed) {
        fprintf(stderr, "plena %s: out of memory\n", cmd);
        return 5;
    }
    if (out_path && strcmp(out_path, "-")) {
        if (plena_file_write_atomic(out_path, b->data, b->len, &err))
            return plena_cli_report(cmd, &err);
    } else if (fwrite(b->data, 1, b->len, stdout) != b->len || fflush(stdout)) {
        fprintf(stderr, "plena %s: cannot write standard output\n", cmd);
        return 4;
    }
    return 0;
}

/* The file name of a trace in a directory: stable_id(trace_id).json (1.8). */
static int doc_path(char *buf, size_t n, const char *dir, const char *trace_id)
{
    char name[160];
    snprintf(name, sizeof name, "%s", trace_id);
    plena_trace_stable_id(name);
    size_t l = strlen(name);
    snprintf(name + l, sizeof name - l, ".json");
    return plena_path_join(buf, n, dir, name);
}

/* Writes docs: with out_dir one pretty file per trace (refusing existing
 * files unless force, when no_clobber); else one trace in pretty form unless
 * out_path ends in .jsonl, several as a set in canonical order (1.10). */
static int write_docs(const char *cmd, struct plena_trace_docs *d, const char *out_path,
                      const char *out_dir, int force, int no_clobber)
{
    struct plena_err err = {0};
    struct plena_buf b;
    plena_buf_init(&b);
    int code = 0;
    if (out_dir) {
        if (plena_mkdir_p(out_dir, &err)) return plena_cli_report(cmd, &err);
        char path[4200];
        for (size_t i = 0; i < d->n && no_clobber && !force; i++) {
            struct stat sb;
            if (doc_path(path, sizeof path, out_dir, d->v[i].trace_id)) return 4;
            if (stat(path, &sb) == 0) {
                fprintf(stderr, "plena %s: %s exists; not overwritten (use --force)\n", cmd, path);
                return 4;
            }
        }
        for (size_t i = 0; i < d->n && !code; i++) {
            b.len = 0;
            if (doc_path(path, sizeof path, out_dir, d->v[i].trace_id)) {
                fprintf(stderr, "plena %s: path too long in %s\n", cmd, out_dir);
                code = 4;
            } else if (plena_trace_json_write(&b, d->v[i].tree, 1)) {
                code = 5;
            } else if (plena_file_write_atomic(path, b.data, b.len, &err)) {
                code = plena_cli_report(cmd, &err);
            }
        }
        plena_buf_free(&b);
        return code;
    }
    if (d->n == 1 && !(out_path && ends_with(out_path, ".jsonl"))) {
        if (plena_trace_json_write(&b, d->v[0].tree, 1)) b.failed = 1;
    } else {
        plena_trace_docs_sort(d);
        if (plena_trace_docs_write_set(d, &b)) b.failed = 1;
    }
    code = write_out(cmd, out_path, &b);
    plena_buf_free(&b);
    return code;
}

/* ---- gen ---- */

static void gen_usage(FILE *f)
{
    fprintf(f, "usage: plena trace gen --model NAME|FILE --tokens T --dist D --seed S [options]\n\n"
               "  --model NAME|FILE   preset name or HF-style config JSON (required)\n"
               "  --tokens T          tokens per trace (required)\n"
               "  --dist D            balanced | round-robin | uniform | zipf:S | hot:N[:F] "
               "(required)\n"
               "  --seed S            64-bit seed (required)\n"
               "  --layer L           model layer index (default 0)\n"
               "  --layers LIST       one trace per layer, e.g. 0,1,4-7 (instead of --layer)\n"
               "  --samples N         traces per layer, sample 0..N-1 (default 1)\n"
               "  --phase P           prefill (default) or decode\n"
               "  --route-weights W   uniform (default) or random\n"
               "  --permute           zipf: shuffle the rank order (derive(seed, 6, layer))\n"
               "  --hot-ids LIST      hot:N: these N experts are the hot set (no shuffle)\n"
               "  --timestamp         write created_at_utc (output is then not reproducible)\n"
               "  --mlen M            replay.mlen (default 64)\n"
               "  --blen B            replay.blen (default 4)\n"
               "  --out FILE          write here (atomically) instead of standard output\n"
               "  --out-dir D         one pretty <trace_id>.json per trace in D\n"
               "  --help              this text\n\n"
               "One trace is written in pretty form; several as a trace set in canonical order\n"
               "(one canonical trace per line), or with --out-dir one file each. Every trace is\n"
               "validated before it is written.\n"
               "exit: 0 written, 1 a generated trace did not validate, 2 usage, 3 model or shape "
               "refused, 4 output not writable\n");
}

static int cmd_gen(int argc, char **argv)
{
    struct plena_trace_gen_opts o;
    plena_trace_gen_opts_default(&o);
    const char *model = NULL, *out_path = NULL, *out_dir = NULL;
    int have_tokens = 0, have_dist = 0, have_seed = 0, timestamp = 0, code = 0;
    unsigned long long samples = 1, v = 0;
    uint32_t one_layer = 0, *layers = NULL, *hot = NULL;
    size_t n_layers = 0, n_hot = 0;
    struct plena_err err = {0};
    for (int i = 1; i < argc && !code; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            gen_usage(stdout);
            goto done;
        } else if (!strcmp(a, "--permute")) {
            o.permute = 1;
            continue;
        } else if (!strcmp(a, "--timestamp")) {
            timestamp = 1;
            continue;
        }
        if (!val) {
            code = plena_cli_usage_error("trace gen", "%s needs a value (or unknown option)", a);
            break;
        }
        i++;
        if (!strcmp(a, "--model")) {
            model = val;
        } else if (!strcmp(a, "--out")) {
            out_path = val;
        } else if (!strcmp(a, "--out-dir")) {
            out_dir = val;
        } else if (!strcmp(a, "--dist")) {
            if (plena_trace_gen_parse_dist(val, &o, &err))
                code = plena_cli_usage_error("trace gen", "%s", err.msg);
            have_dist = 1;
        } else if (!strcmp(a, "--tokens")) {
            if (parse_u64(val, 16777216, &v) || v == 0)
                code = plena_cli_usage_error("trace gen", "--tokens needs 1..16777216");
            o.tokens = (uint32_t)v;
            have_tokens = 1;
        } else if (!strcmp(a, "--seed")) {
            if (parse_u64(val, UINT64_MAX, &v))
                code = plena_cli_usage_error("trace gen", "--seed needs an unsigned integer");
            o.seed = v;
            have_seed = 1;
        } else if (!strcmp(a, "--layer")) {
            if (parse_u64(val, 65535, &v))
                code = plena_cli_usage_error("trace gen", "--layer needs 0..65535");
            one_layer = (uint32_t)v;
        } else if (!strcmp(a, "--layers")) {
            plena_free(layers);
            if (parse_list(val, 65535, &layers, &n_layers))
                code = plena_cli_usage_error("trace gen",
                                             "--layers needs a list like 0,1,4-7 of 0..65535");
        } else if (!strcmp(a, "--hot-ids")) {
            plena_free(hot);
            if (parse_list(val, 16382, &hot, &n_hot))
                code = plena_cli_usage_error("trace gen", "--hot-ids needs a list of expert ids");
        } else if (!strcmp(a, "--samples")) {
            if (parse_u64(val, 1000000, &samples) || samples == 0)
                code = plena_cli_usage_error("trace gen", "--samples needs 1..1000000");
        } else if (!strcmp(a, "--mlen") || !strcmp(a, "--blen")) {
            if (parse_u64(val, 4096, &v) || v == 0)
                code = plena_cli_usage_error("trace gen", "%s needs 1..4096", a);
            else if (!strcmp(a, "--mlen"))
                o.mlen = (uint32_t)v;
            else
                o.blen = (uint32_t)v;
        } else if (!strcmp(a, "--phase")) {
            if (strcmp(val, "prefill") && strcmp(val, "decode"))
                code = plena_cli_usage_error("trace gen", "--phase needs prefill or decode");
            o.decode = !strcmp(val, "decode");
        } else if (!strcmp(a, "--route-weights")) {
            if (strcmp(val, "uniform") && strcmp(val, "random"))
                code =
                    plena_cli_usage_error("trace gen", "--route-weights needs uniform or random");
            o.random_weights = !strcmp(val, "random");
        } else {
            code = plena_cli_usage_error("trace gen", "unknown option '%s'", a);
        }
    }
    if (code) goto done;
    if (!model || !have_tokens || !have_dist || !have_seed) {
        code =
            plena_cli_usage_error("trace gen", "--model, --tokens, --dist and --seed are required");
        goto done;
    }
    if (out_path && out_dir) {
        code = plena_cli_usage_error("trace gen", "--out and --out-dir exclude each other");
        goto done;
    }
    if (n_hot && (o.dist != PLENA_TRACE_DIST_HOT || n_hot != o.hot_n)) {
        code = plena_cli_usage_error("trace gen", "--hot-ids needs --dist hot:N with N = %zu ids",
                                     n_hot);
        goto done;
    }
    o.hot_ids = hot;
    o.n_hot_ids = n_hot;
    char stamp[32];
    struct plena_moe_model m;
    code = model_and_stamp("trace gen", model, &m, timestamp ? stamp : NULL, &o.created_at_utc);
    if (code) goto done;
    o.model = &m;
    if (!n_layers) {
        layers = plena_malloc(sizeof *layers);
        if (!layers) {
            code = 5;
            goto done;
        }
        layers[0] = one_layer;
        n_layers = 1;
    }
    struct plena_trace_docs docs = {0};
    for (size_t l = 0; l < n_layers && !code; l++)
        for (unsigned long long s = 0; s < samples && !code; s++) {
            json_t *t;
            o.layer = layers[l];
            o.sample = (uint32_t)s;
            if (plena_trace_gen_tree(&o, &t, &err))
                code = plena_cli_report("trace gen", &err);
            else if (plena_trace_docs_add(&docs, t, "gen"))
                code = 5;
        }
    if (!code) code = write_docs("trace gen", &docs, out_path, out_dir, 1, 0);
    plena_trace_docs_free(&docs);
done:
    plena_free(layers);
    plena_free(hot);
    return code;
}

/* ---- import ---- */

static void import_usage(FILE *f)
{
    fprintf(f,
            "usage: plena trace import --from vllm|megatron|csv|jsonl FILE --model M [options]\n\n"
            "  --from F                 vllm (routed-experts JSON/JSONL), megatron (router-trace\n"
            "                           JSONL), csv (long form), jsonl (routing rows)\n"
            "  --model NAME|FILE        preset or HF-style config (required: no shapes in "
            "these formats)\n"
            "  --benchmark NAME         workload.benchmark (default: the format's name)\n"
            "  --phase P                megatron: phase (default unknown); vllm --raw: prefill or "
            "decode (required)\n"
            "  --allow-uniform-weights  import a source without weights with 1/k each\n"
            "                           (weight_source uniform_weights_timing_only)\n"
            "  --layer-map LIST         vllm: layer position -> model layer (e.g. 0,2,4)\n"
            "  --layer-offset N         megatron: added to each record's layer\n"
            "  --merge-ranks            megatron: one trace per (step, stage, block, layer), "
            "ranks concatenated\n"
            "  --decode-aggregate       vllm: one decode trace of all generated tokens\n"
            "  --raw FILE --shape P,L,K --dtype int16|int32\n"
            "                           vllm: a raw little-endian array instead of JSON\n"
            "  --keep-going             skip bad records (listed on stderr), exit 1 at the end\n"
            "  --mlen M / --blen B      replay.mlen / replay.blen (default 64 / 4)\n"
            "  --timestamp              write created_at_utc\n"
            "  --out FILE               write here (one trace pretty; several or .jsonl: a set)\n"
            "  --out-dir D              one pretty <trace_id>.json per trace\n"
            "  --help                   this text\n\n"
            "Every trace is validated (statistics recomputed) before anything is written.\n"
            "exit: 0 written, 1 records skipped (--keep-going) or a built trace invalid, 2 "
            "usage,\n"
            "3 unreadable or inconsistent input, 4 output not writable\n");
}

static int cmd_import(int argc, char **argv)
{
    struct plena_trace_import_opts o;
    plena_trace_import_opts_default(&o);
    const char *model = NULL, *out_path = NULL, *out_dir = NULL, *file = NULL, *raw = NULL,
               *shape = NULL, *dtype = NULL;
    int from = -1, timestamp = 0, code = 0;
    uint32_t *map = NULL;
    size_t n_map = 0;
    unsigned long long v = 0;
    struct plena_err err = {0};
    static const char *const flags[] = {"--allow-uniform-weights", "--merge-ranks",
                                        "--decode-aggregate", "--keep-going", "--timestamp"};
    for (int i = 1; i < argc && !code; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            import_usage(stdout);
            goto done;
        }
        int is_flag = 0;
        for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
            if (!strcmp(a, flags[k])) is_flag = 1;
        if (is_flag) {
            if (!strcmp(a, "--allow-uniform-weights")) o.allow_uniform_weights = 1;
            if (!strcmp(a, "--merge-ranks")) o.merge_ranks = 1;
            if (!strcmp(a, "--decode-aggregate")) o.decode_aggregate = 1;
            if (!strcmp(a, "--keep-going")) o.keep_going = 1;
            if (!strcmp(a, "--timestamp")) timestamp = 1;
            continue;
        }
        if (a[0] != '-' || !a[1]) {
            if (file) {
                code = plena_cli_usage_error("trace import", "one input FILE only ('%s')", a);
                break;
            }
            file = a;
            continue;
        }
        if (!val) {
            code = plena_cli_usage_error("trace import", "%s needs a value (or unknown option)", a);
            break;
        }
        i++;
        if (!strcmp(a, "--from")) {
            if ((from = plena_trace_import_format_parse(val)) < 0)
                code = plena_cli_usage_error("trace import",
                                             "--from needs vllm, megatron, csv or jsonl");
        } else if (!strcmp(a, "--model")) {
            model = val;
        } else if (!strcmp(a, "--benchmark")) {
            o.benchmark = val;
        } else if (!strcmp(a, "--phase")) {
            if (strcmp(val, "prefill") && strcmp(val, "decode") && strcmp(val, "smoke") &&
                strcmp(val, "unknown"))
                code = plena_cli_usage_error("trace import",
                                             "--phase needs prefill, decode, smoke or unknown");
            o.phase = val;
        } else if (!strcmp(a, "--layer-map")) {
            plena_free(map);
            if (parse_list(val, 65535, &map, &n_map))
                code = plena_cli_usage_error("trace import", "--layer-map needs a list like 0,2,4");
        } else if (!strcmp(a, "--layer-offset")) {
            if (parse_u64(val, 65535, &v))
                code = plena_cli_usage_error("trace import", "--layer-offset needs 0..65535");
            o.layer_offset = (uint32_t)v;
        } else if (!strcmp(a, "--raw")) {
            raw = val;
        } else if (!strcmp(a, "--shape")) {
            shape = val;
        } else if (!strcmp(a, "--dtype")) {
            dtype = val;
        } else if (!strcmp(a, "--mlen") || !strcmp(a, "--blen")) {
            if (parse_u64(val, 4096, &v) || v == 0)
                code = plena_cli_usage_error("trace import", "%s needs 1..4096", a);
            else if (!strcmp(a, "--mlen"))
                o.mlen = (uint32_t)v;
            else
                o.blen = (uint32_t)v;
        } else if (!strcmp(a, "--out")) {
            out_path = val;
        } else if (!strcmp(a, "--out-dir")) {
            out_dir = val;
        } else {
            code = plena_cli_usage_error("trace import", "unknown option '%s'", a);
        }
    }
    if (code) goto done;
    if (from < 0 || !model) {
        code = plena_cli_usage_error("trace import", "--from and --model are required");
        goto done;
    }
    o.from = (enum plena_trace_import_format)from;
    if (out_path && out_dir) {
        code = plena_cli_usage_error("trace import", "--out and --out-dir exclude each other");
        goto done;
    }
    if (raw || shape || dtype) {
        uint32_t *sh = NULL;
        size_t n_sh = 0;
        if (from != PLENA_TRACE_IMPORT_VLLM || !raw || !shape || !dtype || file) {
            code = plena_cli_usage_error("trace import", "--raw FILE --shape P,L,K --dtype "
                                                         "int16|int32 go together, with --from "
                                                         "vllm and no other FILE");
            goto done;
        }
        if (strchr(shape, '-') || parse_list(shape, UINT32_MAX - 1, &sh, &n_sh) || n_sh != 3) {
            plena_free(sh);
            code = plena_cli_usage_error("trace import", "--shape needs P,L,K");
            goto done;
        }
        memcpy(o.raw_shape, sh, sizeof o.raw_shape);
        plena_free(sh);
        if (!strcmp(dtype, "int16"))
            o.raw_elem_bytes = 2;
        else if (!strcmp(dtype, "int32"))
            o.raw_elem_bytes = 4;
        else {
            code = plena_cli_usage_error("trace import", "--dtype needs int16 or int32");
            goto done;
        }
        if (!o.phase || (strcmp(o.phase, "prefill") && strcmp(o.phase, "decode"))) {
            code = plena_cli_usage_error("trace import",
                                         "--raw needs --phase prefill or --phase decode (which "
                                         "array the file holds)");
            goto done;
        }
        o.raw = 1;
        file = raw;
    }
    if (!file) {
        code = plena_cli_usage_error("trace import", "no input FILE given");
        goto done;
    }
    if ((n_map && from != PLENA_TRACE_IMPORT_VLLM) ||
        ((o.merge_ranks || o.layer_offset) && from != PLENA_TRACE_IMPORT_MEGATRON) ||
        (o.decode_aggregate && from != PLENA_TRACE_IMPORT_VLLM)) {
        code = plena_cli_usage_error("trace import", "--layer-map and --decode-aggregate apply "
                                                     "to vllm, --merge-ranks and --layer-offset "
                                                     "to megatron");
        goto done;
    }
    if (o.blen > o.mlen || o.mlen % o.blen) {
        code = plena_cli_usage_error("trace import", "--blen must divide --mlen");
        goto done;
    }
    o.layer_map = map;
    o.n_layer_map = n_map;
    char stamp[32];
    struct plena_moe_model m;
    code = model_and_stamp("trace import", model, &m, timestamp ? stamp : NULL, &o.created_at_utc);
    if (code) goto done;
    o.model = &m;
    char *data = NULL;
    size_t len = 0;
    if (read_input(file, &data, &len, &err)) {
        code = plena_cli_report("trace import", &err);
        goto done;
    }
    struct plena_trace_docs docs = {0};
    struct plena_trace_import_log log = {0};
    plena_buf_init(&log.text);
    int rc = plena_trace_import(&o, file, data, len, &docs, &log, &err);
    plena_free(data);
    if (log.text.len) fwrite(log.text.data, 1, log.text.len, stderr);
    if (rc) {
        code = plena_cli_report("trace import", &err);
    } else if (docs.n == 0) {
        fprintf(stderr, "plena trace import: %s: no traces produced\n", file);
        code = log.n_skipped ? 1 : 3;
    } else {
        code = write_docs("trace import", &docs, out_path, out_dir, 1, 0);
        if (log.n_skipped) {
            fprintf(stderr, "plena trace import: %zu bad records skipped (--keep-going)\n",
                    log.n_skipped);
            if (code < 1) code = 1;
        }
    }
    plena_buf_free(&log.text);
    plena_trace_docs_free(&docs);
done:
    plena_free(map);
    return code;
}

/* ---- split / pack (1.10) ---- */

static int cmd_split(int argc, char **argv)
{
    const char *set = NULL, *out_dir = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: plena trace split SET --out-dir D [--force]\n\n"
                   "  writes every trace of the set as D/<trace_id>.json (pretty form); refuses\n"
                   "  to overwrite an existing file unless --force. Every line is validated\n"
                   "  first; nothing is written when one is invalid.\n"
                   "exit: 0 written, 1 invalid trace, 2 usage, 3 unreadable, 4 not writable\n");
            return 0;
        } else if (!strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "--out-dir")) {
            if (i + 1 >= argc) return plena_cli_usage_error("trace split", "--out-dir needs D");
            out_dir = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return plena_cli_usage_error("trace split", "unknown option '%s'", a);
        } else if (set) {
            return plena_cli_usage_error("trace split", "one SET only");
        } else {
            set = a;
        }
    }
    if (!set || !out_dir)
        return plena_cli_usage_error("trace split", "SET and --out-dir are required");
    char *data = NULL;
    size_t len = 0;
    struct plena_err err = {0};
    if (read_input(set, &data, &len, &err)) return plena_cli_report("trace split", &err);
    struct plena_trace_docs docs = {0};
    int code = 0;
    if (plena_trace_docs_read(&docs, set, data, len, 1, NULL, &err))
        code = plena_cli_report("trace split", &err);
    else
        code = write_docs("trace split", &docs, NULL, out_dir, force, 1);
    plena_free(data);
    plena_trace_docs_free(&docs);
    return code;
}

static int cmd_pack(int argc, char **argv)
{
    const char *out = NULL;
    int n_files = 0, force_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: plena trace pack FILE... --out SET [--set]\n\n"
                   "  reads traces (.json; .jsonl or --set: trace sets), validates each, and\n"
                   "  writes one trace set in canonical order (1.10); - for standard output.\n"
                   "  A trace_id given twice is an error (V100).\n"
                   "exit: 0 written, 1 invalid trace, 2 usage, 3 unreadable, 4 not writable\n");
            return 0;
        } else if (!strcmp(a, "--out")) {
            if (i + 1 >= argc) return plena_cli_usage_error("trace pack", "--out needs SET");
            out = argv[++i];
        } else if (!strcmp(a, "--set")) {
            force_set = 1;
        } else if (a[0] == '-' && a[1]) {
            return plena_cli_usage_error("trace pack", "unknown option '%s'", a);
        } else {
            n_files++;
        }
    }
    if (!n_files || !out)
        return plena_cli_usage_error("trace pack", "FILE... and --out are required");
    struct plena_trace_docs docs = {0};
    int code = 0;
    for (int i = 1; i < argc && !code; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--out")) {
            i++;
            continue;
        }
        if (a[0] == '-' && a[1]) continue;
        char *data = NULL;
        size_t len = 0;
        struct plena_err err = {0};
        if (read_input(a, &data, &len, &err) ||
            plena_trace_docs_read(&docs, a, data, len, is_set_path(a, force_set), NULL, &err))
            code = plena_cli_report("trace pack", &err);
        plena_free(data);
    }
    if (!code) {
        struct plena_buf b;
        plena_buf_init(&b);
        plena_trace_docs_sort(&docs);
        if (plena_trace_docs_write_set(&docs, &b)) b.failed = 1;
        code = write_out("trace pack", out, &b);
        plena_buf_free(&b);
    }
    plena_trace_docs_free(&docs);
    return code;
}

static int cmd_rules(void)
{
    for (unsigned i = 0; i < plena_trace_rule_count(); i++) {
        const struct plena_trace_rule_info *r = plena_trace_rule_at(i);
        printf("%s  %-40s %s\n", r->code, r->path, r->rule);
    }
    return 0;
}

int plena_cmd_trace(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "--help") || !strcmp(sub, "-h") || !strcmp(sub, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(sub, "validate")) return cmd_validate(argc - 1, argv + 1);
    if (!strcmp(sub, "stats")) return cmd_stats(argc - 1, argv + 1);
    if (!strcmp(sub, "rules")) return cmd_rules();
    if (!strcmp(sub, "gen")) return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(sub, "import")) return cmd_import(argc - 1, argv + 1);
    if (!strcmp(sub, "split")) return cmd_split(argc - 1, argv + 1);
    if (!strcmp(sub, "pack")) return cmd_pack(argc - 1, argv + 1);
    static const char *const later[] = {"route", "build", "tiny-checkpoint"};
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
        if (!strcmp(sub, later[i])) {
            fprintf(stderr, "plena trace %s: not built in this version of plena\n", sub);
            return 2;
        }
    fprintf(stderr, "plena trace: unknown subcommand '%s'\n", sub);
    usage(stderr);
    return 2;
}
