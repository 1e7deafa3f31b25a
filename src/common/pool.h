/* A fixed set of worker threads running one job at a time (common/pool.c):
 * the forward pass of trace route and the reference check of `plena moe`. */
#ifndef PLENA_COMMON_POOL_H
#define PLENA_COMMON_POOL_H

#include <stdint.h>

#include "common/err.h"

struct plena_pool;
/* fn(ctx, part, parts), part < parts: one thread's share of a job. A part
 * may run late or not at all (a worker that starts after the caller's own
 * part has finished skips the job), so fn takes its work dynamically (an
 * atomic counter in ctx) until none is left; part only selects per-thread
 * scratch. */
typedef void (*plena_pool_fn)(void *ctx, uint32_t part, uint32_t parts);
/* threads - 1 workers plus the caller; NULL when out of memory. Fewer
 * workers than asked when threads cannot be created (the results do not
 * depend on the count). */
struct plena_pool *plena_pool_new(uint32_t threads);
uint32_t plena_pool_size(const struct plena_pool *p);
/* Runs part 0 on the caller and the others on the workers that start in
 * time; returns when every part that started has returned. */
void plena_pool_run(struct plena_pool *p, plena_pool_fn fn, void *ctx);
void plena_pool_free(struct plena_pool *p);

/* One item of a plena_pool_for job: part < plena_pool_size(pool) names the
 * thread's scratch (each part runs on one thread at a time). 0 or a status. */
typedef int (*plena_pool_item_fn)(void *ctx, uint32_t item, uint32_t part, struct plena_err *err);
/* fn for every item < n, the threads of pool (NULL: the caller alone) taking
 * items in increasing order from one counter. A failure stops the taking of
 * new items; the status returned (and the error recorded in err) is that of
 * the lowest failing item -- every item below it was taken and finished, so
 * the choice does not depend on the threads' timing. PLENA_E_NOMEM when the
 * job's own bookkeeping cannot be allocated. */
int plena_pool_for(struct plena_pool *pool, uint32_t n, plena_pool_item_fn fn, void *ctx,
                   struct plena_err *err);
/* Tests only (process-wide, set while no job runs): with on, plena_pool_run
 * lets every worker run its part to the end before the caller runs its own,
 * so a job's work is done on the workers' parts, not all on part 0 as a
 * small job on an idle pool often is -- a test comparing thread counts then
 * really exercises the worker threads and their per-part scratch. */
void plena_pool_test_workers_first(int on);

#endif
