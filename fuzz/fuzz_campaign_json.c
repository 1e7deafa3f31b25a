/* libFuzzer target: the replay and campaign JSON readers. The input is
 * written as manifest.jsonl, results.json, selection.json, determinism.json
 * and campaign_status.json of one directory, then read by
 * plena_campaign_manifest_read, plena_campaign_status_read and
 * plena_campaign_gate_decision (empty set), plena_replay_json_read_file,
 * plena_replay_can_skip and, parsed, plena_campaign_apply_selection. */
#include "fuzz_util.h"

#include "campaign/campaign.h"
#include "replay/jsonw.h"
#include "replay/result.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"results.json", "selection.json", "determinism.json",
                                        "campaign_status.json", "manifest.jsonl"};
    const char *path = NULL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        path = fuzz_file(names[i], data, size);
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    struct plena_err err = {0};
    json_t *lines = NULL;
    size_t torn = 0;
    if (!plena_campaign_manifest_read(path, 0, &lines, &torn, &err)) json_decref(lines);
    struct plena_campaign_set set;
    memset(&set, 0, sizeof set);
    struct plena_campaign_status st;
    plena_err_clear(&err);
    plena_campaign_status_read(&set, dir, 3, &st, &err);
    const char *state = NULL;
    plena_err_clear(&err);
    plena_campaign_gate_decision(dir, "0123", 0, &state, &err);
    char p[600];
    snprintf(p, sizeof p, "%s/results.json", dir);
    json_t *v = NULL;
    plena_err_clear(&err);
    if (!plena_replay_json_read_file(p, &v, &err)) {
        plena_err_clear(&err);
        plena_campaign_apply_selection(&set, v, &err);
        json_decref(v);
    }
    plena_replay_can_skip(p, "0123");
    plena_campaign_set_free(&set);
    return 0;
}
