/* The references' expert loop on a thread pool (ref/experts.h). */
#include "ref/experts.h"

#include <stdatomic.h>
#include <string.h>

#include "common/alloc.h"

struct part_err {
    int rc;
    uint32_t e;
    struct plena_err err;
};

struct experts_run {
    const size_t *start;
    uint32_t E;
    plena_ref_expert_job fn;
    void *ctx;
    atomic_uint next;
    atomic_int failed;
    struct part_err *pe; /* [parts] */
};

static void part_main(void *c, uint32_t part, uint32_t parts)
{
    (void)parts;
    struct experts_run *r = c;
    struct part_err *pe = &r->pe[part];
    while (!atomic_load(&r->failed)) {
        const uint32_t e = atomic_fetch_add(&r->next, 1);
        if (e >= r->E) break;
        if (r->start && r->start[e] == r->start[e + 1]) continue;
        struct plena_err er;
        plena_err_clear(&er);
        const int rc = r->fn(r->ctx, e, part, &er);
        if (!rc) continue;
        if (!pe->rc || e < pe->e) {
            pe->rc = rc;
            pe->e = e;
            pe->err = er;
        }
        atomic_store(&r->failed, 1);
    }
}

int plena_ref_experts_run(struct plena_pool *pool, const size_t *start, uint32_t E,
                          plena_ref_expert_job fn, void *ctx, struct plena_err *err)
{
    const uint32_t parts = plena_pool_size(pool);
    struct experts_run r = {start, E, fn, ctx, 0, 0, plena_calloc(parts, sizeof *r.pe)};
    if (!r.pe) return PLENA_FAIL(err, PLENA_E_NOMEM, "ref", "out of memory");
    plena_pool_run(pool, part_main, &r);
    const struct part_err *first = NULL;
    for (uint32_t q = 0; q < parts; q++)
        if (r.pe[q].rc && (!first || r.pe[q].e < first->e)) first = &r.pe[q];
    int rc = 0;
    if (first) {
        rc = first->rc;
        if (err && !plena_err_is_set(err)) *err = first->err;
    }
    plena_free(r.pe);
    return rc;
}
