/* Replay-tier rules R001-R006 (spec/traces-and-replay.md 2.3): would the
 * generator accept this trace's shape? The checks are the generator's own
 * (plena_gen_model_validate); this file only maps their verdict to a rule
 * code and path. Runs only on traces that passed every V rule. R005 is
 * gen's capacity check (plena_gen_capacity_check) for the trace's shape and
 * token count; its message is the generator's own. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "gen/model.h"
#include "gen/moe.h"
#include "trace/build.h"

static int add(struct plena_trace_report *r, const char *code, const char *path, const char *fmt,
               ...) __attribute__((format(printf, 4, 5)));
static int add(struct plena_trace_report *r, const char *code, const char *path, const char *fmt,
               ...)
{
    r->valid = 0;
    if (r->n_errors >= PLENA_TRACE_MAX_ERRORS_DEFAULT) {
        r->n_errors_truncated++;
        return 0;
    }
    if (plena_grow((void **)&r->errors, &r->cap_errors, r->n_errors + 1, sizeof *r->errors))
        return PLENA_E_NOMEM;
    struct plena_trace_finding *f = &r->errors[r->n_errors++];
    memset(f, 0, sizeof *f);
    snprintf(f->code, sizeof f->code, "%s", code);
    snprintf(f->path, sizeof f->path, "%s", path);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    return 0;
}

static uint32_t u32(const json_t *o, const char *k)
{
    return (uint32_t)json_integer_value(json_object_get(o, k));
}

int plena_trace_validate_replay(const char *bytes, size_t len,
                                const struct plena_trace_replay_options *ro,
                                struct plena_trace_report *report)
{
    return plena_trace_validate_replay_machine(bytes, len, ro, NULL, report);
}

int plena_trace_validate_replay_machine(const char *bytes, size_t len,
                                        const struct plena_trace_replay_options *ro,
                                        const struct plena_gen_machine *machine,
                                        struct plena_trace_report *report)
{
    if (report->n_errors || report->n_errors_truncated) return PLENA_E_FAILED; /* no cascades */
    json_t *root = json_loadb(bytes, len, 0, NULL);
    if (!root) return PLENA_E_NOMEM; /* it parsed in the V pass */
    const json_t *mo = json_object_get(root, "model"), *rp = json_object_get(root, "replay");
    uint32_t mlen = ro->mlen_override ? ro->mlen_override : ro->settings_mlen;
    int rc = 0;

    /* The generator's view of the trace's model (validated ranges). */
    struct plena_moe_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.name, sizeof m.name, "%s", json_string_value(json_object_get(mo, "name")));
    m.hidden = u32(mo, "hidden_size");
    m.moe_inter = u32(mo, "intermediate_size");
    m.num_experts = u32(mo, "num_experts");
    m.top_k = u32(mo, "top_k");
    m.n_shared = u32(mo, "shared_experts");
    m.shared_inter = u32(mo, "shared_intermediate_size");
    const json_t *gate = json_object_get(mo, "shared_gate");
    m.shared_gate =
        (json_is_string(gate) && !strcmp(json_string_value(gate), "sigmoid")) || json_is_true(gate)
            ? PLENA_SHARED_GATE_SIGMOID
            : PLENA_SHARED_GATE_NONE;
    const char *act = json_string_value(json_object_get(mo, "activation_policy"));
    m.activation = act && !strcmp(act, "gpt_oss_clamp_gated") ? PLENA_ACT_GPT_OSS_CLAMP_GATED
                                                              : PLENA_ACT_STANDARD_SWIGLU;
    m.routing = PLENA_ROUTING_FIXED; /* a replay feeds the trace's routing */
    m.rms_eps = 1e-6f;               /* not part of a trace; any positive value */

    struct plena_err e = {0};
    if (plena_gen_model_validate(&m, mlen, &e)) {
        /* R001 is the generator's first check; anything else it refuses is
         * the width precondition (R002). */
        if (mlen == 0 || m.hidden % mlen)
            rc = add(report, "R001", "model.hidden_size", "hidden_size %u: %s (replay MLEN %u%s)",
                     m.hidden, e.msg, mlen, ro->mlen_override ? ", from --mlen" : ", settings");
        else
            rc = add(report, "R002", "model.intermediate_size", "generator refuses the shape: %s",
                     e.msg);
    }
    /* R003: widths are zero-padded to MLEN (moe-lowering.md 0), so only the
     * ranges of 1.3 apply and the V rules already checked them. R004: the
     * generator lowers both activation policies at every shape. */
    /* R005: the generator's own capacity check for the replay's layer: the
     * trace's shape with fixed routing and its token count, the rest of the
     * layer from the preset named by model.name as replay does
     * (traces-and-replay.md 5 step 4), on the settings' machine. */
    if (!rc && report->valid) {
        struct plena_moe_model cm = m;
        const struct plena_moe_model *pre = plena_gen_preset_find(m.name);
        if (pre) {
            cm.rms_eps = pre->rms_eps;
            cm.expert_bias = pre->expert_bias;
            cm.zero_centred_norm = pre->zero_centred_norm;
        }
        if (!cm.n_shared) cm.shared_inter = 0;
        const char *pl = json_string_value(json_object_get(mo, "route_weight_placement"));
        cm.route_placement = pl && !strcmp(pl, "input") ? PLENA_ROUTE_INPUT : PLENA_ROUTE_OUTPUT;
        struct plena_gen_machine mach;
        if (machine)
            mach = *machine;
        else
            plena_gen_machine_default(&mach);
        if (!machine || ro->mlen_override) mach.mlen = mach.vlen = mlen;
        uint32_t T = u32(json_object_get(root, "workload"), "token_count");
        struct plena_err ce = {0};
        int crc = plena_gen_capacity_check(&cm, &mach, T, NULL, &ce);
        if (crc == PLENA_E_GENMEM)
            rc = PLENA_E_NOMEM;
        else if (crc)
            rc = add(report, "R005", "(document)", "the generator's capacity check fails: %s",
                     ce.msg);
    }
    uint32_t tmlen = u32(rp, "mlen");
    if (!rc && !ro->mlen_override && tmlen != ro->settings_mlen)
        rc = add(report, "R006", "replay.mlen",
                 "is %u, but the settings' MLEN is %u (VLEN = MLEN); pass --mlen to override",
                 tmlen, ro->settings_mlen);
    json_decref(root);
    if (rc) return rc;
    return report->valid ? 0 : PLENA_E_FAILED;
}
