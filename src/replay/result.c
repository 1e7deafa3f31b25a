/* Gate decision, skip-existing and decided publication of results.json
 * (docs/replay.md "results.json", "Gates" and "Pipeline"). Reading a result never defaults
 * anything to "passed": only the JSON value true counts (upstream defect 4). */
#include "replay/result.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "gen/build.h"
#include "replay/jsonw.h"

const char plena_replay_measurement_note[] =
    "emulator estimate of an isolated MoE layer; absolute accuracy pending RTL validation";
const char plena_replay_routing_tax_scope[] =
    "stage-derived routing tax sums accumulator_init, gather, expert_weight_address, "
    "expert_route_weight and scatter_combine; it excludes the router GEMM and top-k";

void plena_replay_check_set(struct plena_replay_checks *c, const char *name, int passed,
                            const char *fmt, ...)
{
    struct plena_replay_check *k = NULL;
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->v[i].name, name)) k = &c->v[i];
    if (!k) {
        if (c->n >= PLENA_REPLAY_MAX_CHECKS) return;
        k = &c->v[c->n++];
    }
    snprintf(k->name, sizeof k->name, "%s", name);
    k->passed = passed ? 1 : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(k->detail, sizeof k->detail, fmt, ap);
    va_end(ap);
}

const struct plena_replay_check *plena_replay_check_find(const struct plena_replay_checks *c,
                                                         const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->v[i].name, name)) return &c->v[i];
    return NULL;
}

static void add_failed(struct plena_replay_gate *g, const char *name)
{
    for (size_t i = 0; i < g->n_failed; i++)
        if (!strcmp(g->failed[i], name)) return;
    if (g->n_failed < sizeof g->failed / sizeof g->failed[0])
        snprintf(g->failed[g->n_failed++], sizeof g->failed[0], "%s", name);
}

void plena_replay_gate_decide(const struct plena_replay_checks *c,
                              const struct plena_replay_gate_req *req, struct plena_replay_gate *g)
{
    static const char *const always[] = {"validate", "generate", "emulate", "routing_integrity",
                                         "functional"};
    memset(g, 0, sizeof *g);
    g->kind = req->kind;
    for (size_t i = 0; i < c->n; i++)
        if (!c->v[i].passed) add_failed(g, c->v[i].name);
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        if (!plena_replay_check_find(c, always[i])) add_failed(g, always[i]);
    if (req->profiling && !plena_replay_check_find(c, "profile_accounting"))
        add_failed(g, "profile_accounting");
    if (req->repeat && !plena_replay_check_find(c, "repeat")) add_failed(g, "repeat");
    g->passed = g->n_failed == 0;
}

const char *plena_replay_gate_kind_name(enum plena_replay_gate_kind k)
{
    return k == PLENA_GATE_ZERO_INPUT_SMOKE ? "zero_input_smoke" : "numerical";
}

json_t *plena_replay_checks_json(const struct plena_replay_checks *c)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < c->n; i++)
        json_array_append_new(a, json_pack("{s:s,s:b,s:s}", "name", c->v[i].name, "passed",
                                           c->v[i].passed, "detail", c->v[i].detail));
    return a;
}

json_t *plena_replay_gate_json(const struct plena_replay_checks *c,
                               const struct plena_replay_gate *g, const char *decided_at_utc)
{
    json_t *failed = json_array();
    for (size_t i = 0; failed && i < g->n_failed; i++)
        json_array_append_new(failed, json_string(g->failed[i]));
    return json_pack("{s:b,s:s,s:o,s:o,s:s}", "passed", g->passed, "kind",
                     plena_replay_gate_kind_name(g->kind), "checks", plena_replay_checks_json(c),
                     "failed", failed, "decided_at_utc", decided_at_utc ? decided_at_utc : "");
}

int plena_replay_can_skip(const char *results_path, const char *fingerprint)
{
    json_t *r = NULL;
    if (plena_replay_json_read_file(results_path, &r, NULL)) return 0;
    int ok = 0;
    json_t *sv = json_object_get(r, "schema_version");
    json_t *gate = json_object_get(r, "gate");
    json_t *inputs = json_object_get(r, "inputs");
    json_t *fp = json_is_object(inputs) ? json_object_get(inputs, "fingerprint") : NULL;
    if (json_is_integer(sv) && json_integer_value(sv) == PLENA_REPLAY_RESULT_SCHEMA &&
        json_is_object(gate) && json_is_true(json_object_get(gate, "passed")) &&
        json_is_string(fp) && fingerprint && !strcmp(json_string_value(fp), fingerprint))
        ok = 1;
    json_decref(r);
    return ok;
}

int plena_replay_result_remove(const char *build_dir, struct plena_err *err)
{
    char path[4096];
    if (plena_path_join(path, sizeof path, build_dir,
                        plena_build_file_name(PLENA_BUILD_FILE_RESULTS)))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, build_dir, "path too long");
    if (unlink(path) && errno != ENOENT)
        return PLENA_FAIL(err, PLENA_E_OUTPUT, path, "cannot delete old result: %s",
                          strerror(errno));
    return 0;
}

int plena_replay_result_publish(const char *build_dir, const json_t *result, struct plena_err *err)
{
    char path[4096];
    if (plena_path_join(path, sizeof path, build_dir,
                        plena_build_file_name(PLENA_BUILD_FILE_RESULTS)))
        return PLENA_FAIL(err, PLENA_E_OUTPUT, build_dir, "path too long");
    const json_t *gate = json_object_get(result, "gate");
    if (!json_is_object(gate) || !json_is_boolean(json_object_get(gate, "passed")))
        return PLENA_FAIL(err, PLENA_E_INTERNAL, path,
                          "refusing to publish a result without a decided gate.passed");
    return plena_replay_json_write_file(result, path, err);
}

void plena_replay_utc_now(char out[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
