/* plena trace: validate, stats and gen (spec/traces-and-replay.md 1.6, 1.10, 2.1, 3.2).
 * Reads files (or `-`), calls the trace module and prints text or --json;
 * picks exit codes (0 valid, 1 invalid, 2 usage, 3 unreadable; highest wins).
 * import/split/pack/route/build are not built yet and say so (exit 2). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/alloc.h"
#include "common/fileio.h"
#include "gen/model.h"
#include "trace/gen.h"
#include "trace/trace.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: plena trace <subcommand> [options]\n\n"
               "subcommands:\n"
               "  validate FILE...   validate traces (.json) and trace sets (.jsonl)\n"
               "  stats FILE...      counts, active/cold/hot experts, duplicate factor, gini\n"
               "  gen --model M ...  synthetic routing traces (--help for options)\n"
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
               "  --replay         replay-tier rules R001-R006 (not built in this version)\n"
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
    struct plena_buf b;
    plena_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0)
        plena_buf_append(&b, chunk, n);
    if (b.failed || plena_buf_append(&b, "", 1)) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "-", "out of memory reading standard input");
    }
    *data = b.data;
    *len = b.len - 1;
    return 0;
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

static int cmd_validate(int argc, char **argv)
{
    struct plena_trace_validate_options opt = {0};
    int as_json = 0, force_set = 0, n_files = 0;
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
            fprintf(stderr, "plena trace validate: --replay (rules R001-R006) is not built in "
                            "this version of plena\n");
            return 2;
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
    int exit_code = 0;
    json_t *files = json_array();
    for (int i = 1; i < argc; i++) {
        const char *path = argv[i];
        if (!strcmp(path, "--max-errors") || !strcmp(path, "--max-bytes")) {
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
        struct plena_buf b;
        plena_buf_init(&b);
        if (plena_trace_json_write(&b, top, 1) == 0) fwrite(b.data, 1, b.len, stdout);
        plena_buf_free(&b);
        json_decref(top);
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
        plena_trace_format_double(df, sizeof df, st.duplicate_factor);
        plena_trace_format_double(g, sizeof g, st.gini);
        plena_trace_format_double(mm, sizeof mm, st.max_mean_ratio);
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
            size_t pos = 0;
            long line = 0;
            while (pos < len) {
                const char *nl = memchr(data + pos, '\n', len - pos);
                size_t end = nl ? (size_t)(nl - data) : len;
                line++;
                size_t k = pos;
                while (k < end && (data[k] == ' ' || data[k] == '\t' || data[k] == '\r'))
                    k++;
                if (k < end) {
                    int code = stats_one(path, line, data + pos, end - pos, as_json, traces);
                    if (code > exit_code) exit_code = code;
                }
                pos = end + 1;
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
        struct plena_buf b;
        plena_buf_init(&b);
        if (plena_trace_json_write(&b, top, 1) == 0) fwrite(b.data, 1, b.len, stdout);
        plena_buf_free(&b);
        json_decref(top);
    } else {
        json_decref(traces);
    }
    return exit_code;
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
               "  --samples N         traces per layer, sample 0..N-1 (default 1)\n"
               "  --phase P           prefill (default) or decode\n"
               "  --route-weights W   uniform (default) or random\n"
               "  --permute           zipf: shuffle the rank order (derive(seed, 6, layer))\n"
               "  --mlen M            replay.mlen (default 64)\n"
               "  --blen B            replay.blen (default 4)\n"
               "  --out FILE          write here (atomically) instead of standard output\n"
               "  --help              this text\n\n"
               "One trace is written in pretty form; several (--samples > 1) as a trace set,\n"
               "one canonical trace per line. Every trace is validated before it is written.\n"
               "exit: 0 written, 1 a generated trace did not validate, 2 usage, 3 model or shape "
               "refused, 4 output not writable\n");
}

static int parse_u64(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    if (!s || !*s || *s == '-') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v > max) return -1;
    *out = v;
    return 0;
}

static int cmd_gen(int argc, char **argv)
{
    struct plena_trace_gen_opts o;
    plena_trace_gen_opts_default(&o);
    const char *model = NULL, *out_path = NULL;
    int have_tokens = 0, have_dist = 0, have_seed = 0;
    unsigned long long samples = 1, v;
    struct plena_err err = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            gen_usage(stdout);
            return 0;
        } else if (!strcmp(a, "--permute")) {
            o.permute = 1;
            continue;
        }
        if (!val)
            return plena_cli_usage_error("trace gen", "%s needs a value (or unknown option)", a);
        i++;
        if (!strcmp(a, "--model")) {
            model = val;
        } else if (!strcmp(a, "--out")) {
            out_path = val;
        } else if (!strcmp(a, "--dist")) {
            if (plena_trace_gen_parse_dist(val, &o, &err))
                return plena_cli_usage_error("trace gen", "%s", err.msg);
            have_dist = 1;
        } else if (!strcmp(a, "--tokens")) {
            if (parse_u64(val, 16777216, &v) || v == 0)
                return plena_cli_usage_error("trace gen", "--tokens needs 1..16777216");
            o.tokens = (uint32_t)v;
            have_tokens = 1;
        } else if (!strcmp(a, "--seed")) {
            if (parse_u64(val, UINT64_MAX, &v))
                return plena_cli_usage_error("trace gen", "--seed needs an unsigned integer");
            o.seed = v;
            have_seed = 1;
        } else if (!strcmp(a, "--layer")) {
            if (parse_u64(val, 65535, &v))
                return plena_cli_usage_error("trace gen", "--layer needs 0..65535");
            o.layer = (uint32_t)v;
        } else if (!strcmp(a, "--samples")) {
            if (parse_u64(val, 1000000, &samples) || samples == 0)
                return plena_cli_usage_error("trace gen", "--samples needs 1..1000000");
        } else if (!strcmp(a, "--mlen") || !strcmp(a, "--blen")) {
            if (parse_u64(val, 4096, &v) || v == 0)
                return plena_cli_usage_error("trace gen", "%s needs 1..4096", a);
            if (!strcmp(a, "--mlen"))
                o.mlen = (uint32_t)v;
            else
                o.blen = (uint32_t)v;
        } else if (!strcmp(a, "--phase")) {
            if (strcmp(val, "prefill") && strcmp(val, "decode"))
                return plena_cli_usage_error("trace gen", "--phase needs prefill or decode");
            o.decode = !strcmp(val, "decode");
        } else if (!strcmp(a, "--route-weights")) {
            if (strcmp(val, "uniform") && strcmp(val, "random"))
                return plena_cli_usage_error("trace gen",
                                             "--route-weights needs uniform or random");
            o.random_weights = !strcmp(val, "random");
        } else {
            return plena_cli_usage_error("trace gen", "unknown option '%s'", a);
        }
    }
    if (!model || !have_tokens || !have_dist || !have_seed)
        return plena_cli_usage_error("trace gen",
                                     "--model, --tokens, --dist and --seed are required");
    struct plena_moe_model m;
    if (plena_gen_model_resolve(model, &m, &err)) return plena_cli_report("trace gen", &err);
    o.model = &m;
    struct plena_buf all;
    plena_buf_init(&all);
    int code = 0;
    for (unsigned long long s = 0; s < samples && !code; s++) {
        struct plena_buf one;
        plena_buf_init(&one);
        o.sample = (uint32_t)s;
        if (plena_trace_gen(&o, &one, &err)) {
            code = plena_cli_report("trace gen", &err);
        } else if (samples == 1) {
            plena_buf_append(&all, one.data, one.len);
        } else {
            /* a set line: the canonical form (1.10) */
            json_t *t = json_loadb(one.data, one.len, 0, NULL);
            if (!t || plena_trace_json_write(&all, t, 0) || plena_buf_append(&all, "\n", 1))
                code = 5;
            json_decref(t);
        }
        plena_buf_free(&one);
    }
    if (!code && all.failed) code = 5;
    if (!code) {
        if (out_path) {
            if (plena_file_write_atomic(out_path, all.data, all.len, &err))
                code = plena_cli_report("trace gen", &err);
        } else if (fwrite(all.data, 1, all.len, stdout) != all.len || fflush(stdout)) {
            fprintf(stderr, "plena trace gen: cannot write standard output\n");
            code = 4;
        }
    }
    plena_buf_free(&all);
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
    static const char *const later[] = {"gen",   "import", "split",          "pack",
                                        "route", "build",  "tiny-checkpoint"};
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
        if (!strcmp(sub, later[i])) {
            fprintf(stderr, "plena trace %s: not built in this version of plena\n", sub);
            return 2;
        }
    fprintf(stderr, "plena trace: unknown subcommand '%s'\n", sub);
    usage(stderr);
    return 2;
}
