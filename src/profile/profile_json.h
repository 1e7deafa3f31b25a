/* jansson-level helpers shared by the profile writer and the run-stats
 * writer (src/run/). Kept out of profile.h so its users need not include
 * jansson. */
#ifndef PLENA_PROFILE_PROFILE_JSON_H
#define PLENA_PROFILE_PROFILE_JSON_H

#include <jansson.h>

#include <stddef.h>

#include "common/err.h"
#include "common/fileio.h"
#include "timing/timing.h"

/* Renders `root` as plena's result JSON (2-space indent, insertion order,
 * reals "%.17g" with ".0" added when needed, trailing newline); text is
 * NUL-terminated, freed with plena_free. */
int plena_json_render(json_t *root, char **text, size_t *len, struct plena_err *err);
/* Renders and writes atomically. */
int plena_json_write(json_t *root, const char *path, struct plena_err *err);
/* One real in that form ("null" for non-finite values). */
void plena_json_format_real(double v, char *out, size_t n);

/* The overlap object of spec/timing-and-profile.md 7.3; NULL when out of memory. */
json_t *plena_profile_overlap_json(const struct plena_overlap_report *r);

#endif
