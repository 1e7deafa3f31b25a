/* routing_stats as JSON (routing_json.h). Key order is the order of
 * docs/profile.md "routing_stats"; counts are integers, ratios reals. */
#include "model/routing_json.h"

#include "isa/program.h"

static int put(json_t *o, const char *k, json_t *v)
{
    return v ? json_object_set_new(o, k, v) : -1;
}

json_t *plena_routing_stats_json(const struct plena_routing_stats *st)
{
    if (!st || !st->valid) return json_null();
    json_t *o = json_object(), *tpe = json_object();
    int bad = !o || !tpe;
    if (!bad) {
        bad |= put(tpe, "min", json_real(st->tpe_min));
        bad |= put(tpe, "max", json_real(st->tpe_max));
        bad |= put(tpe, "mean", json_real(st->tpe_mean));
        bad |= put(tpe, "cv", json_real(st->tpe_cv));
        bad |= put(tpe, "gini", json_real(st->tpe_gini));
        bad |= put(o, "lowering",
                   json_string(plena_lowering_marker((enum plena_lowering)st->lowering)));
        bad |= put(o, "active_experts", json_integer(st->active_experts));
        bad |= put(o, "tokens_per_expert", tpe);
        tpe = NULL; /* owned by o now */
        bad |= put(o, "padding_rows", json_integer((json_int_t)st->padding_rows));
        bad |= put(o, "routed_rows_issued", json_integer((json_int_t)st->routed_rows_issued));
        bad |= put(o, "routed_rows_useful", json_integer((json_int_t)st->routed_rows_useful));
        bad |= put(o, "row_utilisation", json_real(st->row_utilisation));
        bad |= put(o, "shared_row_utilisation",
                   st->shared_row_utilisation < 0 ? json_null()
                                                  : json_real(st->shared_row_utilisation));
        bad |= put(o, "weight_bytes_fetched", json_integer((json_int_t)st->weight_bytes_fetched));
        bad |= put(o, "weight_bytes_ideal", json_integer((json_int_t)st->weight_bytes_ideal));
    }
    json_decref(tpe);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
