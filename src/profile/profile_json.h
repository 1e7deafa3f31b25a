/* jansson-level helpers shared by the profile writer and the run-stats
 * writer (src/run/). Kept out of profile.h so its users need not include
 * jansson. The JSON text of both files is common/json.h's
 * PLENA_JSON_PROFILE_FORM. */
#ifndef PLENA_PROFILE_PROFILE_JSON_H
#define PLENA_PROFILE_PROFILE_JSON_H

#include <jansson.h>

#include <stddef.h>

#include "common/json.h"
#include "timing/timing.h"

/* The overlap object of docs/profile.md "Profile JSON"; NULL when out of memory. */
json_t *plena_profile_overlap_json(const struct plena_overlap_report *r);

#endif
