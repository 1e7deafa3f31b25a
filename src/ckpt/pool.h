/* A fixed set of worker threads running one job at a time (ckpt/pool.c). */
#ifndef PLENA_CKPT_POOL_H
#define PLENA_CKPT_POOL_H

#include <stdint.h>

struct plena_pool;
/* fn(ctx, part, parts): the part-th of `parts` disjoint pieces of a job. */
typedef void (*plena_pool_fn)(void *ctx, uint32_t part, uint32_t parts);
/* threads - 1 workers plus the caller; NULL when out of memory. Fewer
 * workers than asked when threads cannot be created (the results do not
 * depend on the count). */
struct plena_pool *plena_pool_new(uint32_t threads);
uint32_t plena_pool_size(const struct plena_pool *p);
/* Runs every part (part 0 on the caller) and returns when all are done. */
void plena_pool_run(struct plena_pool *p, plena_pool_fn fn, void *ctx);
void plena_pool_free(struct plena_pool *p);

#endif
