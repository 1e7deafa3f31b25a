/* The references' expert loop on a thread pool (ref/experts.h): the
 * common loop (plena_pool_for) over the experts that have pairs. */
#include "ref/experts.h"

struct experts_run {
    const size_t *start;
    plena_ref_expert_job fn;
    void *ctx;
    const volatile sig_atomic_t *stop;
};

static int expert_item(void *c, uint32_t e, uint32_t part, struct plena_err *err)
{
    const struct experts_run *r = c;
    if (r->start && r->start[e] == r->start[e + 1]) return 0;
    int rc = plena_err_if_stopped(r->stop, "reference", err);
    return rc ? rc : r->fn(r->ctx, e, part, err);
}

int plena_ref_experts_run(struct plena_pool *pool, const size_t *start, uint32_t E,
                          plena_ref_expert_job fn, void *ctx, const volatile sig_atomic_t *stop,
                          struct plena_err *err)
{
    struct experts_run r = {start, fn, ctx, stop};
    return plena_pool_for(pool, E, expert_item, &r, err);
}
