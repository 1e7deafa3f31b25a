/* Fixed routing from a route trace (`plena moe --routing FILE`): the file is
 * validated (schema v2, docs/trace-schema.md), its model must have the layer's shape
 * and its token count the layer's T, and then its topk_indices and
 * topk_weights become the [T][k] routing (pair order t*k+j) a fixed-routing
 * build stages. Nothing is printed: the report holds the findings. */
#include <jansson.h>
#include <stdio.h>

#include "common/alloc.h"
#include "common/fileio.h"
#include "trace/trace.h"

int plena_trace_read_fixed_routing(const char *path, const char *where,
                                   const struct plena_trace_routing_shape *want, uint32_t **ids,
                                   float **w, struct plena_trace_report *report,
                                   struct plena_err *err)
{
    *ids = NULL;
    *w = NULL;
    char *data = NULL;
    size_t len = 0;
    int rc = plena_file_read_all(path, &data, &len, err);
    if (rc) return rc;
    struct plena_trace_validate_options vo = {0, 0, 0};
    rc = plena_trace_validate_bytes(data, len, &vo, report);
    if (rc == PLENA_E_NOMEM) {
        plena_free(data);
        return PLENA_FAIL(err, PLENA_E_NOMEM, "", "out of memory");
    }
    if (rc) {
        plena_free(data);
        return PLENA_FAIL(err, PLENA_E_FAILED, where, "not a valid route trace");
    }
    json_error_t je;
    json_t *root = json_loadb(data, len, 0, &je);
    plena_free(data);
    if (!root) return PLENA_FAIL(err, PLENA_E_NOMEM, "", "out of memory");
    json_t *model = json_object_get(root, "model");
    json_t *routing = json_object_get(root, "routing");
    json_t *ti = json_object_get(routing, "topk_indices");
    json_t *tw = json_object_get(routing, "topk_weights");
    long long E = json_integer_value(json_object_get(model, "num_experts"));
    long long k = json_integer_value(json_object_get(model, "top_k"));
    long long H = json_integer_value(json_object_get(model, "hidden_size"));
    size_t nt = json_array_size(ti);
    if (E != want->experts || k != want->top_k || H != want->hidden || nt != want->tokens) {
        rc = PLENA_FAIL(err, PLENA_E_INPUT, where,
                        "trace shape (hidden_size %lld, num_experts %lld, top_k %lld, tokens %zu) "
                        "does not match the model %s with --tokens %u (hidden %u, experts %u, "
                        "top_k %u)",
                        H, E, k, nt, want->model_name, want->tokens, want->hidden, want->experts,
                        want->top_k);
        json_decref(root);
        return rc;
    }
    const size_t n = (size_t)want->tokens * want->top_k;
    *ids = plena_malloc(n * sizeof **ids);
    *w = plena_malloc(n * sizeof **w);
    if (!*ids || !*w) {
        json_decref(root);
        plena_free(*ids);
        plena_free(*w);
        *ids = NULL;
        *w = NULL;
        return PLENA_FAIL(err, PLENA_E_NOMEM, "", "out of memory");
    }
    for (size_t t = 0; t < nt; t++)
        for (uint32_t j = 0; j < want->top_k; j++) {
            (*ids)[t * want->top_k + j] =
                (uint32_t)json_integer_value(json_array_get(json_array_get(ti, t), j));
            (*w)[t * want->top_k + j] =
                (float)json_number_value(json_array_get(json_array_get(tw, t), j));
        }
    json_decref(root);
    return 0;
}
