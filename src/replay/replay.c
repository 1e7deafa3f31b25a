/* Replay pipeline of docs/replay.md "Pipeline" for one trace: validate,
 * identify (trace_sha256, fingerprint), build directory, generate, run,
 * reference + functional gate, repeat gate, decide, publish results.json.
 * The gate is decided before anything with the final result name exists
 * (docs/replay.md "Gates"); an old result is deleted before a new attempt. It does not
 * fork or print: the CLI runs the pool. */
#include "replay/replay.h"
#include "gen/build.h"
#include "timeline/timeline.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "common/sha256.h"
#include "model/model.h"
#include "isa/stages.h"
#include "profile/profile.h"
#include "replay/export.h"
#include "replay/jsonw.h"
#include "replay/result.h"
#include "settings/settings.h"
#include "replay/tier.h"
#include "trace/build.h"

#ifndef PLENA_VERSION
#define PLENA_VERSION "0.0.0"
#endif

void plena_replay_opts_default(struct plena_replay_opts *o)
{
    memset(o, 0, sizeof *o);
    o->lowering = plena_lowering_option(PLENA_LOWERING_DEFAULT);
    o->weights = PLENA_WEIGHTS_RANDOM;
    o->weight_seed = 1;
    o->input = PLENA_INPUT_RANDOM;
    o->input_seed = 42;
    o->profile = 1;
    o->timeline_detail = PLENA_TIMELINE_DETAIL_DEFAULT;
}

void plena_replay_item_free(struct plena_replay_item *it)
{
    if (!it) return;
    json_decref(it->trace);
    it->trace = NULL;
}

int plena_replay_settings_sha256(const char *settings_path, char hex[65], struct plena_err *err)
{
    struct plena_settings s;
    int rc = plena_settings_load(settings_path, &s, err);
    if (rc) return rc;
    struct plena_buf b;
    plena_buf_init(&b);
    if (plena_settings_to_toml(&s, &b) || b.failed) {
        plena_buf_free(&b);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "settings", "out of memory");
    }
    plena_sha256_hex(b.data ? b.data : "", b.len, hex);
    plena_buf_free(&b);
    return 0;
}

json_t *plena_replay_fingerprint_object(const char *trace_sha256, const struct plena_replay_opts *o,
                                        const char *settings_sha256)
{
    json_t *f = json_pack(
        "{s:s,s:s,s:I,s:s,s:I,s:s,s:b,s:b,s:I,s:I,s:I,s:s,s:s}", "lowering", o->lowering, "weights",
        plena_weights_mode_name(o->weights), "weight_seed", (json_int_t)o->weight_seed, "input",
        plena_input_mode_name(o->input), "input_seed", (json_int_t)o->input_seed, "routing_mode",
        o->routing_device ? "device" : "fixed", "profile", o->profile, "overlap", o->overlap,
        "repeat", (json_int_t)o->repeat, "mlen", (json_int_t)o->mlen, "blen", (json_int_t)o->blen,
        "settings_sha256", settings_sha256, "plena_version", PLENA_VERSION);
    if (f && trace_sha256) json_object_set_new(f, "trace_sha256", json_string(trace_sha256));
    return f;
}

int plena_replay_fingerprint(const char *trace_sha256, const struct plena_replay_opts *o,
                             const char *settings_sha256, char hex[65], struct plena_err *err)
{
    json_t *f = plena_replay_fingerprint_object(trace_sha256, o, settings_sha256);
    if (!f) return PLENA_FAIL(err, PLENA_E_NOMEM, "", "out of memory");
    int rc = plena_replay_json_sha256(f, 0, hex, err);
    json_decref(f);
    return rc;
}

static json_int_t geti(const json_t *o, const char *a, const char *b)
{
    const json_t *x = json_object_get(json_object_get(o, a), b);
    return json_is_integer(x) ? json_integer_value(x) : 0;
}

/* stable_id (docs/trace-schema.md "Fields"): bytes outside [A-Za-z0-9_-] become
 * '_', at most 128 bytes */
static void stable_id(const char *in, char out[129])
{
    size_t i = 0;
    for (; in[i] && i < 128; i++) {
        char c = in[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-';
        out[i] = ok ? c : '_';
    }
    out[i] = 0;
}

int plena_replay_prepare(const char *bytes, size_t len, const char *source_path,
                         const struct plena_replay_opts *o, const char *settings_sha256,
                         struct plena_replay_item *it, struct plena_trace_report *report,
                         struct plena_err *err)
{
    memset(it, 0, sizeof *it);
    snprintf(it->source_path, sizeof it->source_path, "%s", source_path ? source_path : "-");
    struct plena_trace_validate_options vo = {0, 0, 0};
    int rc = plena_trace_validate_bytes(bytes, len, &vo, report);
    if (rc == PLENA_E_NOMEM) return PLENA_FAIL(err, PLENA_E_NOMEM, source_path, "out of memory");
    if (!report->valid) return PLENA_E_FAILED;
    json_error_t je;
    it->trace = json_loadb(bytes, len, JSON_REJECT_DUPLICATES, &je);
    if (!it->trace) /* the validator accepted it, so this is out of memory */
        return PLENA_FAIL(err, PLENA_E_NOMEM, source_path, "cannot parse: %s", je.text);
    it->schema_version = report->schema_version;
    snprintf(it->trace_id, sizeof it->trace_id, "%s", report->trace_id);
    stable_id(it->trace_id, it->dir_name);
    if (o->routing_device)
        strcat(it->dir_name, PLENA_REPLAY_DEVICE_DIR_SUFFIX); /* <= 128 + 7 bytes + NUL */

    /* replay tier (docs/replay.md "Replay tier"): the trace module's R rules, which call the
     * generator's own shape checks */
    struct plena_settings s;
    if ((rc = plena_settings_load(o->settings_path, &s, err))) return rc;
    struct plena_replay_tier_opts ro = {s.mlen, o->mlen};
    /* R005 sizes against the machine this replay will run on */
    struct plena_gen_machine mach;
    plena_gen_machine_from_settings(&s, &mach);
    rc = plena_replay_tier_check(bytes, len, &ro, &mach, report);
    if (rc == PLENA_E_NOMEM) return PLENA_FAIL(err, PLENA_E_NOMEM, source_path, "out of memory");
    if (!report->valid) return PLENA_E_FAILED;
    json_int_t mlen = o->mlen ? (json_int_t)o->mlen : geti(it->trace, "replay", "mlen");

    if ((rc = plena_replay_json_sha256(it->trace, 1, it->trace_sha256, err))) return rc;
    struct plena_replay_opts eff = *o;
    if (!eff.mlen) eff.mlen = (uint32_t)mlen;
    if (!eff.blen) eff.blen = (uint32_t)geti(it->trace, "replay", "blen");
    return plena_replay_fingerprint(it->trace_sha256, &eff, settings_sha256, it->fingerprint, err);
}

void plena_replay_clean_tmp(const char *dir)
{
    /* only the temporaries of dead processes: a concurrent replay into the
     * same directory keeps its own (deleting them failed its renames) */
    plena_file_clean_stale_tmp(dir);
}
