/* Replay-tier rules R001-R006 (tier.h): the checks are the model's and the
 * generator's own; this file only maps their verdict to a rule code and path.
 * The layer R005 sizes is the one replay lowers (plena_model_from_trace). */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "gen/moe.h"
#include "model/model.h"
#include "model/trace_model.h"
#include "replay/tier.h"

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

int plena_replay_tier_check(const char *bytes, size_t len, const struct plena_replay_tier_opts *ro,
                            const struct plena_gen_machine *machine,
                            struct plena_trace_report *report)
{
    if (report->n_errors || report->n_errors_truncated) return PLENA_E_FAILED; /* no cascades */
    json_t *root = json_loadb(bytes, len, 0, NULL);
    if (!root) return PLENA_E_NOMEM; /* it parsed in the V pass */
    const json_t *mo = json_object_get(root, "model"), *rp = json_object_get(root, "replay");
    uint32_t mlen = ro->mlen_override ? ro->mlen_override : ro->settings_mlen;
    int rc = 0;

    /* The layer replay would lower (validated ranges). */
    struct plena_moe_model m;
    struct plena_err e = {0};
    if (plena_model_from_trace(mo, "model", &m, &e)) {
        json_decref(root);
        return PLENA_E_FAILED; /* the V rules guarantee the members */
    }
    plena_err_clear(&e);
    if (plena_model_validate(&m, mlen, &e)) {
        /* R001 is the generator's first check; anything else it refuses is
         * the width precondition (R002). */
        if (mlen == 0 || m.hidden % mlen)
            rc = add(report, "R001", "model.hidden_size", "hidden_size %u: %s (replay MLEN %u%s)",
                     m.hidden, e.msg, mlen, ro->mlen_override ? ", from --mlen" : ", settings");
        else
            rc = add(report, "R002", "model.intermediate_size", "generator refuses the shape: %s",
                     e.msg);
    }
    /* R003: widths are zero-padded to MLEN (docs/lowering.md "Memory ABI"), so only the
     * ranges of docs/trace-schema.md "Fields" apply and the V rules already checked them. R004: the
     * generator lowers both activation policies at every shape. */
    /* R005: the generator's own capacity check for the replay's layer and
     * token count on the settings' machine. */
    if (!rc && report->valid) {
        struct plena_gen_machine mach;
        if (machine)
            mach = *machine;
        else
            plena_gen_machine_default(&mach);
        if (!machine || ro->mlen_override) mach.mlen = mach.vlen = mlen;
        uint32_t T = u32(json_object_get(root, "workload"), "token_count");
        struct plena_err ce = {0};
        int crc = plena_gen_capacity_check(&m, &mach, T, NULL, &ce);
        if (crc == PLENA_E_NOMEM)
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

int plena_replay_tier_check_set(const char *bytes, size_t len,
                                const struct plena_replay_tier_opts *ro,
                                const struct plena_gen_machine *machine,
                                struct plena_trace_set_report *s)
{
    struct plena_trace_lines it = {bytes, len, 0, 0};
    const char *text;
    size_t n, k = 0;
    /* entries are in line order, one per non-blank line */
    while (k < s->n_entries && plena_trace_lines_next(&it, &text, &n)) {
        if (s->entries[k].line != it.line) continue;
        struct plena_trace_report *r = &s->entries[k].report;
        if (r->valid) {
            size_t before = r->n_errors;
            if (plena_replay_tier_check(text, n, ro, machine, r) == PLENA_E_NOMEM)
                return PLENA_E_NOMEM;
            for (size_t i = before; i < r->n_errors; i++)
                r->errors[i].line = it.line;
            if (!r->valid) s->valid = 0;
        }
        k++;
    }
    return 0;
}
