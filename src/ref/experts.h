/* The references' expert loop on a thread pool (internal to ref/). */
#ifndef PLENA_REF_EXPERTS_H
#define PLENA_REF_EXPERTS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/pool.h"

/* One expert's work (a plena_pool_for item, item = the expert): part <
 * plena_pool_size(pool) names the thread's scratch (and the provider's
 * slot); each part runs on one thread at a time. */
typedef plena_pool_item_fn plena_ref_expert_job;

/* fn for every expert e < E that has pairs (start[e] < start[e + 1]; start
 * NULL: every e, as for the row groups of the shared expert), the
 * threads of pool (NULL: the caller alone) taking experts in increasing order.
 * A failure stops the taking of new experts; the error returned (and recorded
 * in err) is that of the lowest failing expert -- every expert below it was
 * taken and finished, so the choice does not depend on the threads' timing.
 * A set *stop (may be NULL) fails each expert taken after it was set with
 * PLENA_E_INTERRUPTED. */
int plena_ref_experts_run(struct plena_pool *pool, const size_t *start, uint32_t E,
                          plena_ref_expert_job fn, void *ctx, const volatile sig_atomic_t *stop,
                          struct plena_err *err);

#endif
