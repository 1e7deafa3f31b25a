/* Replay-tier rules R001-R006 (docs/trace-schema.md "Rules"): would replay
 * lower this trace on this machine? R001/R002 are the model's shape rules
 * (plena_model_validate), R005 is the generator's own capacity check
 * (plena_gen_capacity_check) for the trace's layer and token count, R006
 * compares the trace's replay MLEN with the settings'. The rule table itself
 * (codes, paths, docs) stays with the validator in trace/rules.def. */
#ifndef PLENA_REPLAY_TIER_H
#define PLENA_REPLAY_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "gen/builder.h"
#include "trace/trace.h"

struct plena_replay_tier_opts {
    uint32_t settings_mlen; /* MLEN of the settings the replay would use */
    uint32_t mlen_override; /* --mlen; 0 = none */
};

/* Appends R001-R006 findings for one trace that already passed the V rules
 * (a trace with errors gets no R findings: no cascades). machine is the
 * replay's machine (NULL: plena_gen_machine_default() with the replay MLEN);
 * --mlen still overrides its mlen and vlen. Returns 0 when no R rule failed,
 * PLENA_E_FAILED otherwise, PLENA_E_NOMEM. */
int plena_replay_tier_check(const char *bytes, size_t len, const struct plena_replay_tier_opts *ro,
                            const struct plena_gen_machine *machine,
                            struct plena_trace_report *report);

/* The same for every valid line of a trace set, `s` being the set's V-rule
 * report over the same bytes (plena_trace_validate_set_bytes): R findings
 * carry their set line and clear s->valid. 0 or PLENA_E_NOMEM. */
int plena_replay_tier_check_set(const char *bytes, size_t len,
                                const struct plena_replay_tier_opts *ro,
                                const struct plena_gen_machine *machine,
                                struct plena_trace_set_report *s);

#endif
