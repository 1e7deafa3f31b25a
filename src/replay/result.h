/* results.json model of a replay (docs/replay.md "results.json", "Gates" and "Pipeline"):
 * gate checks, the gate decision (a pure function: checks in, gate out), the
 * skip-existing predicate and the decided, atomic publication of a result.
 * It does not run anything: replay.c evaluates the checks and fills them in. */
#ifndef PLENA_REPLAY_RESULT_H
#define PLENA_REPLAY_RESULT_H

#include <jansson.h>

#include <stddef.h>

#include "common/err.h"

#define PLENA_REPLAY_RESULT_SCHEMA 1
#define PLENA_REPLAY_RESULT_KIND   "plena.replay"
#define PLENA_REPLAY_MAX_CHECKS    16

/* Constant strings of docs/replay.md "results.json" (one definition each). */
extern const char plena_replay_measurement_note[];
extern const char plena_replay_routing_tax_scope[];

struct plena_replay_check {
    char name[32];
    int passed;
    char detail[512];
};

struct plena_replay_checks {
    struct plena_replay_check v[PLENA_REPLAY_MAX_CHECKS];
    size_t n;
};

/* Appends or replaces (same name) a check; printf-style detail. */
void plena_replay_check_set(struct plena_replay_checks *c, const char *name, int passed,
                            const char *fmt, ...) __attribute__((format(printf, 4, 5)));
const struct plena_replay_check *plena_replay_check_find(const struct plena_replay_checks *c,
                                                         const char *name);

enum plena_replay_gate_kind { PLENA_GATE_NUMERICAL = 0, PLENA_GATE_ZERO_INPUT_SMOKE = 1 };

struct plena_replay_gate_req {
    int profiling; /* profile_accounting is required */
    int repeat;    /* repeat is required */
    enum plena_replay_gate_kind kind;
};

struct plena_replay_gate {
    int passed;
    enum plena_replay_gate_kind kind;
    char failed[PLENA_REPLAY_MAX_CHECKS + 8][32]; /* failed or missing required checks */
    size_t n_failed;
};

/* The decision: passes iff every required check (validate,
 * generate, emulate, routing_integrity, functional, + profile_accounting when
 * profiling, + repeat when requested) is present and passed, and every other
 * present check passed. A required check that was never evaluated is listed
 * in `failed` as failed. Pure: no I/O, no clock. */
void plena_replay_gate_decide(const struct plena_replay_checks *c,
                              const struct plena_replay_gate_req *req, struct plena_replay_gate *g);
const char *plena_replay_gate_kind_name(enum plena_replay_gate_kind k);
/* {passed, kind, checks, failed, decided_at_utc} */
json_t *plena_replay_gate_json(const struct plena_replay_checks *c,
                               const struct plena_replay_gate *g, const char *decided_at_utc);
/* [{name, passed, detail}] */
json_t *plena_replay_checks_json(const struct plena_replay_checks *c);

/* docs/replay.md "Pipeline": 1 iff `results_path` parses as JSON, schema_version is 1, gate.passed
 * is the JSON value true and inputs.fingerprint equals `fingerprint`; 0 in
 * every other case (no file, unreadable, torn, passed false/absent/non-boolean,
 * other fingerprint). */
int plena_replay_can_skip(const char *results_path, const char *fingerprint);

/* Deletes build_dir/results.json (absent is fine): before a new attempt. */
int plena_replay_result_remove(const char *build_dir, struct plena_err *err);
/* Writes build_dir/results.json atomically (pretty JSON). Call only after the
 * gate object is in `result`: publication comes after the decision. */
int plena_replay_result_publish(const char *build_dir, const json_t *result, struct plena_err *err);

/* Current UTC time "YYYY-MM-DDTHH:MM:SSZ" (volatile fields only). */
void plena_replay_utc_now(char out[32]);

#endif
