/* Run-level exports (docs/replay.md "Exports") from existing results.
 * Rows are sorted by (benchmark, sample_index, sample_id, phase, decode_step,
 * layer, trace_id); CSV headers are fixed tables, written also for zero rows
 * (upstream defect 31). A device-routed result (build dir TRACE_ID.device)
 * gets a device_minus_fixed routing-tax row after its stage_derived one,
 * against the fixed-route result of the same trace and options in the same
 * root (TRACE_ID), with null deltas when there is none. */
#include "replay/export.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "common/alloc.h"
#include "gen/build.h"
#include "common/fileio.h"
#include "profile/profile.h"
#include "replay/jsonw.h"
#include "replay/replay.h"
#include "replay/result.h"

const char *const plena_replay_summary_cols[] = {"trace_id",
                                                 "benchmark",
                                                 "model",
                                                 "sample_id",
                                                 "sample_index",
                                                 "category",
                                                 "layer",
                                                 "phase",
                                                 "decode_step",
                                                 "token_count",
                                                 "top_k",
                                                 "num_experts",
                                                 "pair_count",
                                                 "selected_expert_count",
                                                 "shared_experts",
                                                 "shared_intermediate_size",
                                                 "shared_gate",
                                                 "routing_source",
                                                 "weight_source",
                                                 "lowering",
                                                 "weights",
                                                 "input",
                                                 "routing_mode",
                                                 "issue_model",
                                                 "sim_latency_cycles",
                                                 "serial_latency_cycles",
                                                 "sim_latency_picos",
                                                 "hbm_bytes_read",
                                                 "hbm_bytes_written",
                                                 "instructions_executed",
                                                 "total_profiled_picos",
                                                 "shared_picos",
                                                 "routed_picos",
                                                 "shared_fraction",
                                                 "routing_tax_picos",
                                                 "routing_tax_cycles",
                                                 "routing_tax_fraction",
                                                 "logical_input_hidden_bf16_bytes",
                                                 "logical_routed_hidden_bf16_bytes",
                                                 "logical_route_weight_bf16_bytes",
                                                 "min_expert_weight_bytes",
                                                 "physical_read_matches_profile",
                                                 "physical_written_matches_profile",
                                                 "functional_kind",
                                                 "functional_numerical_pass",
                                                 "gate_passed",
                                                 "fingerprint",
                                                 "result_path"};
const size_t plena_replay_n_summary_cols =
    sizeof plena_replay_summary_cols / sizeof plena_replay_summary_cols[0];

const char *const plena_replay_stage_cols[] = {"trace_id",       "stage",
                                               "branch",         "instructions",
                                               "wall_picos",     "wall_cycles",
                                               "time_fraction",  "instruction_fraction",
                                               "hbm_bytes_read", "hbm_bytes_written",
                                               "matrix_cycles",  "vector_cycles",
                                               "scalar_cycles",  "dma_cycles",
                                               "other_cycles"};
const size_t plena_replay_n_stage_cols =
    sizeof plena_replay_stage_cols / sizeof plena_replay_stage_cols[0];

const char *const plena_replay_svr_cols[] = {"trace_id",
                                             "benchmark",
                                             "phase",
                                             "layer",
                                             "token_count",
                                             "shared_picos",
                                             "routed_picos",
                                             "excluded_picos",
                                             "combine_picos",
                                             "residual_picos",
                                             "other_picos",
                                             "total_profiled_picos",
                                             "shared_fraction",
                                             "routed_fraction",
                                             "shared_to_routed_ratio",
                                             "shared_cycles",
                                             "routed_cycles",
                                             "routed_lowering",
                                             "note"};
const size_t plena_replay_n_svr_cols =
    sizeof plena_replay_svr_cols / sizeof plena_replay_svr_cols[0];

const char *const plena_replay_tax_cols[] = {"trace_id",
                                             "method",
                                             "routing_tax_picos",
                                             "routing_tax_cycles",
                                             "routing_tax_fraction",
                                             "delta_cycles",
                                             "delta_hbm_bytes_read",
                                             "delta_hbm_bytes_written"};
const size_t plena_replay_n_tax_cols =
    sizeof plena_replay_tax_cols / sizeof plena_replay_tax_cols[0];

/* columns of a per-trace object that come from the summary row, not from it */
static int from_summary(const char *col)
{
    return !strcmp(col, "trace_id") || !strcmp(col, "benchmark") || !strcmp(col, "phase") ||
           !strcmp(col, "layer") || !strcmp(col, "token_count");
}

struct row {
    char dir[256];
    json_t *result;  /* owned */
    json_t *summary; /* borrowed from result; result_path filled in */
};

static int cmp_keys(const json_t *a, const json_t *b);

static int phase_rank(const char *p)
{
    static const char *const order[] = {"prefill", "decode", "smoke", "unknown"};
    for (int i = 0; i < 4; i++)
        if (p && !strcmp(p, order[i])) return i;
    return 4;
}

/* null < any number; numbers compared as doubles */
static int cmp_num(const json_t *a, const json_t *b)
{
    int na = !json_is_number(a), nb = !json_is_number(b);
    if (na || nb) return na == nb ? 0 : (na ? -1 : 1);
    double x = json_number_value(a), y = json_number_value(b);
    return x < y ? -1 : x > y;
}

static int cmp_str(const json_t *a, const json_t *b)
{
    const char *x = json_is_string(a) ? json_string_value(a) : "";
    const char *y = json_is_string(b) ? json_string_value(b) : "";
    return strcmp(x, y);
}

static int cmp_rows(const void *pa, const void *pb)
{
    const json_t *a = ((const struct row *)pa)->summary, *b = ((const struct row *)pb)->summary;
    const int c0 = cmp_keys(a, b);
    /* the same trace twice (fixed, then TRACE_ID.device): by build dir name */
    return c0 ? c0 : strcmp(((const struct row *)pa)->dir, ((const struct row *)pb)->dir);
}

static int cmp_keys(const json_t *a, const json_t *b)
{
    int c;
#define G(o, k) json_object_get(o, k)
    if ((c = cmp_str(G(a, "benchmark"), G(b, "benchmark")))) return c;
    if ((c = cmp_num(G(a, "sample_index"), G(b, "sample_index")))) return c;
    if ((c = cmp_str(G(a, "sample_id"), G(b, "sample_id")))) return c;
    int pa_ = phase_rank(json_string_value(G(a, "phase")));
    int pb_ = phase_rank(json_string_value(G(b, "phase")));
    if (pa_ != pb_) return pa_ < pb_ ? -1 : 1;
    if ((c = cmp_num(G(a, "decode_step"), G(b, "decode_step")))) return c;
    if ((c = cmp_num(G(a, "layer"), G(b, "layer")))) return c;
    return cmp_str(G(a, "trace_id"), G(b, "trace_id"));
#undef G
}

static int need(const json_t *obj, const char *key, const char *file, const char *where,
                struct plena_err *err)
{
    if (json_is_object(obj) && json_object_get(obj, key)) return 0;
    return PLENA_FAIL(err, PLENA_E_INPUT, file, "missing required field %s.%s", where, key);
}

static int check_result(const json_t *r, const char *file, struct plena_err *err)
{
    json_t *sv = json_object_get(r, "schema_version");
    if (!json_is_integer(sv) || json_integer_value(sv) != PLENA_REPLAY_RESULT_SCHEMA)
        return PLENA_FAIL(err, PLENA_E_INPUT, file, "unknown schema_version (expected 1)");
    const char *top[] = {"summary", "stages", "shared_vs_routed", "routing_tax", "gate"};
    for (size_t i = 0; i < 5; i++)
        if (need(r, top[i], file, "(result)", err)) return PLENA_E_INPUT;
    json_t *s = json_object_get(r, "summary");
    if (!json_is_object(s))
        return PLENA_FAIL(err, PLENA_E_INPUT, file, "summary: expected an object");
    for (size_t i = 0; i < plena_replay_n_summary_cols; i++)
        if (strcmp(plena_replay_summary_cols[i], "result_path") &&
            need(s, plena_replay_summary_cols[i], file, "summary", err))
            return PLENA_E_INPUT;
    if (!json_is_string(json_object_get(s, "trace_id")))
        return PLENA_FAIL(err, PLENA_E_INPUT, file, "summary.trace_id: expected a string");
    json_t *st = json_object_get(r, "stages");
    if (!json_is_array(st))
        return PLENA_FAIL(err, PLENA_E_INPUT, file, "stages: expected an array");
    for (size_t j = 0; j < json_array_size(st); j++) {
        char where[32];
        snprintf(where, sizeof where, "stages[%zu]", j);
        for (size_t i = 1; i < plena_replay_n_stage_cols; i++)
            if (need(json_array_get(st, j), plena_replay_stage_cols[i], file, where, err))
                return PLENA_E_INPUT;
    }
    json_t *svr = json_object_get(r, "shared_vs_routed");
    if (!json_is_null(svr))
        for (size_t i = 0; i < plena_replay_n_svr_cols; i++)
            if (!from_summary(plena_replay_svr_cols[i]) &&
                need(svr, plena_replay_svr_cols[i], file, "shared_vs_routed", err))
                return PLENA_E_INPUT;
    json_t *tax = json_object_get(r, "routing_tax");
    if (!json_is_null(tax)) {
        const char *k[] = {"method", "routing_tax_picos", "routing_tax_cycles",
                           "routing_tax_fraction"};
        for (size_t i = 0; i < 4; i++)
            if (need(tax, k[i], file, "routing_tax", err)) return PLENA_E_INPUT;
    }
    if (!json_is_object(json_object_get(r, "gate")))
        return PLENA_FAIL(err, PLENA_E_INPUT, file, "gate: expected an object");
    return 0;
}

/* ---- routing tax by difference ---- */

int plena_replay_device_dir_pair(const char *dir, char *fixed, size_t n)
{
    const size_t ls = strlen(PLENA_REPLAY_DEVICE_DIR_SUFFIX), ld = strlen(dir);
    if (ld <= ls || strcmp(dir + ld - ls, PLENA_REPLAY_DEVICE_DIR_SUFFIX) || ld - ls >= n) return 0;
    memcpy(fixed, dir, ld - ls);
    fixed[ld - ls] = 0;
    return 1;
}

static const char *routing_mode(const json_t *r)
{
    return json_string_value(json_object_get(json_object_get(r, "inputs"), "routing_mode"));
}

/* inputs without the keys that differ between the two runs of a pair */
static json_t *pair_inputs(const json_t *r)
{
    json_t *in = json_deep_copy(json_object_get(r, "inputs"));
    static const char *const drop[] = {"fingerprint", "routing_mode", "pruned_inputs"};
    for (size_t i = 0; in && i < sizeof drop / sizeof drop[0]; i++)
        json_object_del(in, drop[i]);
    return in;
}

int plena_replay_results_pair(const json_t *dev, const json_t *fixed)
{
    const char *md = routing_mode(dev), *mf = routing_mode(fixed);
    if (!md || !mf || strcmp(md, "device") || strcmp(mf, "fixed")) return 0;
    const json_t *sd = json_object_get(json_object_get(dev, "trace"), "trace_sha256"),
                 *sf = json_object_get(json_object_get(fixed, "trace"), "trace_sha256");
    if (!json_is_string(sd) || !json_equal((json_t *)sd, (json_t *)sf)) return 0;
    json_t *a = pair_inputs(dev), *b = pair_inputs(fixed);
    const int eq = a && b && json_equal(a, b);
    json_decref(a);
    json_decref(b);
    return eq;
}

static json_t *delta(const json_t *dev, const json_t *fixed, const char *key)
{
    const json_t *a = json_object_get(json_object_get(dev, "run"), key),
                 *b = fixed ? json_object_get(json_object_get(fixed, "run"), key) : NULL;
    if (!json_is_integer(a) || !json_is_integer(b)) return json_null();
    return json_integer(json_integer_value(a) - json_integer_value(b));
}

/* the device run's router_topk wall cycles (null when not profiled) */
static json_t *router_cycles(const json_t *dev)
{
    const json_t *st = json_object_get(dev, "stages");
    for (size_t i = 0; i < json_array_size(st); i++) {
        const json_t *row = json_array_get(st, i);
        const char *nm = json_string_value(json_object_get(row, "stage"));
        if (nm && !strcmp(nm, "router_topk")) {
            const json_t *v = json_object_get(row, "wall_cycles");
            return v ? json_incref((json_t *)v) : json_null();
        }
    }
    return json_null();
}

json_t *plena_replay_device_minus_fixed(const json_t *dev, const json_t *fixed)
{
    if (fixed && !plena_replay_results_pair(dev, fixed)) fixed = NULL;
    const json_t *tid = json_object_get(json_object_get(dev, "summary"), "trace_id");
    json_t *o = json_object();
    if (!o) return NULL;
    int bad = json_object_set_new(o, "trace_id", tid ? json_incref((json_t *)tid) : json_null());
    bad |= json_object_set_new(o, "method", json_string("device_minus_fixed"));
    bad |= json_object_set_new(o, "routing_tax_picos", json_null());
    bad |= json_object_set_new(o, "routing_tax_cycles", json_null());
    bad |= json_object_set_new(o, "routing_tax_fraction", json_null());
    bad |= json_object_set_new(o, "delta_cycles", delta(dev, fixed, "sim_latency_cycles"));
    bad |= json_object_set_new(o, "delta_hbm_bytes_read", delta(dev, fixed, "hbm_bytes_read"));
    bad |=
        json_object_set_new(o, "delta_hbm_bytes_written", delta(dev, fixed, "hbm_bytes_written"));
    bad |= json_object_set_new(o, "router_topk_cycles", router_cycles(dev));
    const json_t *ft =
        fixed ? json_object_get(json_object_get(fixed, "summary"), "trace_id") : NULL;
    bad |= json_object_set_new(o, "fixed_result", ft ? json_incref((json_t *)ft) : json_null());
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* the fixed-route partner among rows of the device-routed row at dir, or NULL */
static const json_t *fixed_partner(const struct row *rows, size_t n, const char *dir)
{
    char fx[256];
    if (!plena_replay_device_dir_pair(dir, fx, sizeof fx)) return NULL;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(rows[i].dir, fx)) return rows[i].result;
    return NULL;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int write_buf(const char *root, const char *name, const struct plena_buf *b,
                     struct plena_err *err)
{
    char path[4096];
    if (plena_path_join(path, sizeof path, root, name))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, root, "path too long");
    if (b->failed) return PLENA_FAIL(err, PLENA_E_NOMEM, path, "out of memory");
    return plena_file_write_atomic(path, b->data ? b->data : "", b->len, err);
}

/* writes one CSV row from `obj`, taking columns listed in from_summary from `s` */
static int csv_row(struct plena_csv *c, const char *const *cols, size_t n, const json_t *obj,
                   const json_t *s)
{
    for (size_t i = 0; i < n; i++) {
        const json_t *v = (from_summary(cols[i]) && s) ? json_object_get(s, cols[i])
                                                       : json_object_get(obj, cols[i]);
        if (plena_csv_cell_json(c, v)) return -1;
    }
    return plena_csv_end_row(c);
}

static int is_dir(const char *root, const char *name)
{
    char p[4096];
    struct stat st;
    if (plena_path_join(p, sizeof p, root, name)) return 0;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}

int plena_replay_export(const char *root, int passed_only,
                        struct plena_replay_export_counts *counts, struct plena_err *err)
{
    struct plena_replay_export_counts cnt = {0};
    DIR *d = opendir(root);
    if (!d) return PLENA_FAIL(err, PLENA_E_INPUT, root, "cannot open export root");
    char **names = NULL;
    size_t n_names = 0, cap_names = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !is_dir(root, de->d_name)) continue;
        if (plena_grow((void **)&names, &cap_names, n_names + 1, sizeof *names) ||
            !(names[n_names] = plena_strdup(de->d_name))) {
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, root, "out of memory");
            break;
        }
        n_names++;
    }
    closedir(d);
    if (names) qsort(names, n_names, sizeof *names, cmp_names);

    struct row *rows = plena_calloc(n_names ? n_names : 1, sizeof *rows);
    size_t n_rows = 0;
    json_t *skipped = json_array();
    if (!rows || !skipped) rc = rc ? rc : PLENA_FAIL(err, PLENA_E_NOMEM, root, "out of memory");
    for (size_t i = 0; !rc && i < n_names; i++) {
        char dir[4096], file[4200];
        if (plena_path_join(dir, sizeof dir, root, names[i]) ||
            plena_path_join(file, sizeof file, dir,
                            plena_build_file_name(PLENA_BUILD_FILE_RESULTS))) {
            rc = PLENA_FAIL(err, PLENA_E_INPUT, root, "path too long");
            break;
        }
        struct stat st;
        if (stat(file, &st)) {
            json_array_append_new(skipped, json_pack("{s:s,s:s}", "build_dir", names[i], "reason",
                                                     "no results.json"));
            cnt.skipped++;
            continue;
        }
        json_t *r;
        if ((rc = plena_replay_json_read_file(file, &r, err))) break;
        if ((rc = check_result(r, file, err))) {
            json_decref(r);
            break;
        }
        json_t *gate = json_object_get(r, "gate");
        int passed = json_is_true(json_object_get(gate, "passed"));
        int smoke = !strcmp(json_is_string(json_object_get(gate, "kind"))
                                ? json_string_value(json_object_get(gate, "kind"))
                                : "",
                            "zero_input_smoke");
        if (!passed)
            cnt.failed++;
        else if (smoke)
            cnt.passed_smoke++;
        else
            cnt.passed_numerical++;
        if (passed_only && !passed) {
            json_decref(r);
            continue;
        }
        struct row *rw = &rows[n_rows++];
        snprintf(rw->dir, sizeof rw->dir, "%s", names[i]);
        rw->result = r;
        rw->summary = json_object_get(r, "summary");
        char rel[300];
        snprintf(rel, sizeof rel, "%s/%s", names[i],
                 plena_build_file_name(PLENA_BUILD_FILE_RESULTS));
        json_object_set_new(rw->summary, "result_path", json_string(rel));
    }
    if (!rc && n_rows) qsort(rows, n_rows, sizeof *rows, cmp_rows);

    struct plena_csv sum, stg, svr, tax;
    plena_csv_init(&sum);
    plena_csv_init(&stg);
    plena_csv_init(&svr);
    plena_csv_init(&tax);
    json_t *runs = json_array(), *stages = json_array(), *svrs = json_array(),
           *taxes = json_array();
    if (!rc) {
        int bad = plena_csv_header(&sum, plena_replay_summary_cols, plena_replay_n_summary_cols) ||
                  plena_csv_header(&stg, plena_replay_stage_cols, plena_replay_n_stage_cols) ||
                  plena_csv_header(&svr, plena_replay_svr_cols, plena_replay_n_svr_cols) ||
                  plena_csv_header(&tax, plena_replay_tax_cols, plena_replay_n_tax_cols);
        for (size_t i = 0; !bad && i < n_rows; i++) {
            json_t *r = rows[i].result, *s = rows[i].summary;
            bad |= csv_row(&sum, plena_replay_summary_cols, plena_replay_n_summary_cols, s, s);
            json_array_append(runs, s);
            json_t *st = json_object_get(r, "stages");
            for (size_t j = 0; !bad && j < json_array_size(st); j++) {
                json_t *o = json_deep_copy(json_array_get(st, j));
                json_object_set(o, "trace_id", json_object_get(s, "trace_id"));
                bad |= csv_row(&stg, plena_replay_stage_cols, plena_replay_n_stage_cols, o, s);
                json_array_append_new(stages, o);
            }
            json_t *sv = json_object_get(r, "shared_vs_routed");
            if (json_is_object(sv)) {
                bad |= csv_row(&svr, plena_replay_svr_cols, plena_replay_n_svr_cols, sv, s);
                json_t *o = json_object();
                for (size_t j = 0; j < plena_replay_n_svr_cols; j++) {
                    const char *k = plena_replay_svr_cols[j];
                    json_object_set(o, k, json_object_get(from_summary(k) ? s : sv, k));
                }
                json_array_append_new(svrs, o);
            }
            json_t *tx = json_object_get(r, "routing_tax");
            if (json_is_object(tx)) {
                json_t *o = json_object();
                for (size_t j = 0; j < plena_replay_n_tax_cols; j++) {
                    const char *k = plena_replay_tax_cols[j];
                    json_t *v =
                        !strcmp(k, "trace_id") ? json_object_get(s, k) : json_object_get(tx, k);
                    json_object_set_new(o, k, v ? json_incref(v) : json_null());
                }
                bad |= csv_row(&tax, plena_replay_tax_cols, plena_replay_n_tax_cols, o, NULL);
                json_array_append_new(taxes, o);
            }
            const char *mode = routing_mode(r);
            if (mode && !strcmp(mode, "device")) {
                json_t *o =
                    plena_replay_device_minus_fixed(r, fixed_partner(rows, n_rows, rows[i].dir));
                bad |= !o || csv_row(&tax, plena_replay_tax_cols, plena_replay_n_tax_cols, o, NULL);
                if (o) json_array_append_new(taxes, o);
            }
        }
        if (bad) rc = PLENA_FAIL(err, PLENA_E_NOMEM, root, "out of memory building exports");
    }
    if (!rc) rc = write_buf(root, "summary.csv", &sum.buf, err);
    if (!rc) rc = write_buf(root, "stages.csv", &stg.buf, err);
    if (!rc) rc = write_buf(root, "shared_vs_routed.csv", &svr.buf, err);
    if (!rc) rc = write_buf(root, "routing_tax.csv", &tax.buf, err);
    if (!rc) {
        /* the note of the runs' lowering (one per replay: the first result's) */
        const char *svr_note =
            n_rows ? json_string_value(json_object_get(json_object_get(rows[0].result, "notes"),
                                                       "shared_vs_routed"))
                   : NULL;
        if (!svr_note) svr_note = plena_profile_shared_vs_routed_text(PLENA_LOWERING_UNSET);
        json_t *js = json_pack(
            "{s:i,s:s,s:s,s:{s:I,s:I,s:I,s:I},s:O,s:O,s:O,s:O,s:O}", "schema_version", 1,
            "measurement_note", plena_replay_measurement_note, "shared_vs_routed_note", svr_note,
            "counts", "passed_numerical", (json_int_t)cnt.passed_numerical, "passed_smoke",
            (json_int_t)cnt.passed_smoke, "failed", (json_int_t)cnt.failed, "skipped",
            (json_int_t)cnt.skipped, "runs", runs, "stages", stages, "shared_vs_routed", svrs,
            "routing_tax", taxes, "skipped", skipped);
        char path[4096];
        if (!js)
            rc = PLENA_FAIL(err, PLENA_E_NOMEM, root, "out of memory");
        else if (plena_path_join(path, sizeof path, root, "replay_summary.json"))
            rc = PLENA_FAIL(err, PLENA_E_OUTPUT, root, "path too long");
        else
            rc = plena_replay_json_write_file(js, path, err);
        json_decref(js);
    }
    cnt.exported = n_rows;
    if (counts) *counts = cnt;
    plena_csv_free(&sum);
    plena_csv_free(&stg);
    plena_csv_free(&svr);
    plena_csv_free(&tax);
    json_decref(runs);
    json_decref(stages);
    json_decref(svrs);
    json_decref(taxes);
    json_decref(skipped);
    for (size_t i = 0; rows && i < n_rows; i++)
        json_decref(rows[i].result);
    plena_free(rows);
    for (size_t i = 0; i < n_names; i++)
        plena_free(names[i]);
    plena_free(names);
    return rc;
}
