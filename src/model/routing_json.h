/* The `routing_stats` JSON object (docs/profile.md "routing_stats") of a
 * struct plena_routing_stats: the one rendering the profile JSON, replay
 * results and campaign reports share. Internal (jansson types). */
#ifndef PLENA_MODEL_ROUTING_JSON_H
#define PLENA_MODEL_ROUTING_JSON_H

#include <jansson.h>

#include "model/model.h"

/* New object, or json_null() when st is NULL or not valid; NULL on out of
 * memory. */
json_t *plena_routing_stats_json(const struct plena_routing_stats *st);

#endif
