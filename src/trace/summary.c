/* The statistics of one trace document (`plena trace stats`): the document
 * is validated first, then the routing statistics are computed from its stored
 * expert_counts, which the validator has checked against the histogram of
 * topk_indices (V053). Nothing is printed. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "trace/trace.h"

void plena_trace_summary_free(struct plena_trace_summary *s)
{
    if (!s) return;
    plena_free(s->counts);
    s->counts = NULL;
    s->n = 0;
}

int plena_trace_summary_doc(const char *doc, size_t len, struct plena_trace_summary *s,
                            struct plena_trace_report *report)
{
    memset(s, 0, sizeof *s);
    int rc = plena_trace_validate_bytes(doc, len, NULL, report);
    if (rc) return rc == PLENA_E_NOMEM ? PLENA_E_NOMEM : PLENA_E_FAILED;
    json_t *root = json_loadb(doc, len, 0, NULL);
    if (!root) return PLENA_E_NOMEM;
    json_t *model = json_object_get(root, "model"), *routing = json_object_get(root, "routing");
    json_t *counts = json_object_get(routing, "expert_counts");
    s->n = json_array_size(counts);
    s->counts = plena_calloc(s->n + 1, sizeof *s->counts);
    if (!s->counts) {
        json_decref(root);
        s->n = 0;
        return PLENA_E_NOMEM;
    }
    for (size_t e = 0; e < s->n; e++)
        s->counts[e] = json_integer_value(json_array_get(counts, e));
    snprintf(s->trace_id, sizeof s->trace_id, "%s",
             json_string_value(json_object_get(root, "trace_id")));
    s->token_count =
        json_integer_value(json_object_get(json_object_get(root, "workload"), "token_count"));
    s->top_k = json_integer_value(json_object_get(model, "top_k"));
    json_decref(root);
    /* valid counts are >= 0 with a sum that fits: this cannot fail */
    if (plena_trace_stats_compute(s->counts, s->n, &s->stats, NULL)) return PLENA_E_FAILED;
    return 0;
}
