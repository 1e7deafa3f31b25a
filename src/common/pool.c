/* Worker threads of trace route's forward pass (docs/traces.md "--threads")
 * and of the reference check (docs/replay.md "--threads"): one job at a
 * time, whose pieces (panels of outputs, experts, attention heads) the
 * threads take dynamically; every output element is computed by exactly
 * the same instructions whatever thread takes it, so rows are
 * byte-identical for every N. A worker that has not started by the time
 * the caller finished the whole job skips it (on a busy machine the caller
 * never waits for a thread the scheduler has not run yet). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "common/pool.h"
#include "common/alloc.h"

struct plena_pool {
    uint32_t n; /* worker threads besides the caller */
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;      /* job generation */
    uint32_t active;   /* workers inside the current job */
    uint32_t finished; /* workers that ran the current job's part (workers-first) */
    int closed;        /* the caller is done: workers not yet in skip it */
    int quit;
    plena_pool_fn fn;
    void *ctx;
    uint32_t parts;
};

struct worker {
    struct plena_pool *p;
    uint32_t index;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct plena_pool *p = w->p;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->gen == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) break;
        seen = p->gen;
        if (p->closed) continue;
        plena_pool_fn fn = p->fn;
        void *ctx = p->ctx;
        uint32_t parts = p->parts;
        p->active++;
        pthread_mutex_unlock(&p->mu);
        fn(ctx, w->index + 1, parts);
        pthread_mutex_lock(&p->mu);
        p->finished++;
        if (--p->active == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    plena_free(w);
    return NULL;
}

struct plena_pool *plena_pool_new(uint32_t threads)
{
    struct plena_pool *p = plena_calloc(1, sizeof *p);
    if (!p) return NULL;
    if (pthread_mutex_init(&p->mu, NULL)) {
        plena_free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->go, NULL)) {
        pthread_mutex_destroy(&p->mu);
        plena_free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->done, NULL)) {
        pthread_cond_destroy(&p->go);
        pthread_mutex_destroy(&p->mu);
        plena_free(p);
        return NULL;
    }
    uint32_t want = threads > 1 ? threads - 1 : 0;
    p->tid = plena_calloc(want ? want : 1, sizeof *p->tid);
    if (!p->tid) {
        plena_pool_free(p);
        return NULL;
    }
    for (uint32_t i = 0; i < want; i++) {
        struct worker *w = plena_malloc(sizeof *w);
        if (!w) break;
        w->p = p, w->index = i;
        if (pthread_create(&p->tid[i], NULL, worker_main, w)) {
            plena_free(w);
            break;
        }
        p->n++;
    }
    return p;
}

uint32_t plena_pool_size(const struct plena_pool *p)
{
    return p ? p->n + 1 : 1;
}

static int workers_first; /* plena_pool_test_workers_first */

void plena_pool_test_workers_first(int on)
{
    workers_first = on;
}

void plena_pool_run(struct plena_pool *p, plena_pool_fn fn, void *ctx)
{
    if (!p || !p->n) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn, p->ctx = ctx, p->parts = p->n + 1;
    p->closed = 0;
    p->finished = 0;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    if (workers_first)
        while (p->finished < p->n)
            pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    fn(ctx, 0, p->n + 1);
    pthread_mutex_lock(&p->mu);
    p->closed = 1;
    while (p->active)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

void plena_pool_free(struct plena_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < p->n; i++)
        pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    plena_free(p->tid);
    plena_free(p);
}

/* ---- plena_pool_for ---- */

struct item_err {
    int rc;
    uint32_t item;
    struct plena_err err;
};

struct pool_for {
    uint32_t n;
    plena_pool_item_fn fn;
    void *ctx;
    atomic_uint next;
    atomic_int failed;
    struct item_err *pe; /* [parts]: each part's lowest failure */
};

static void pool_for_part(void *c, uint32_t part, uint32_t parts)
{
    (void)parts;
    struct pool_for *r = c;
    struct item_err *pe = &r->pe[part];
    while (!atomic_load(&r->failed)) {
        const uint32_t i = atomic_fetch_add(&r->next, 1);
        if (i >= r->n) break;
        struct plena_err er;
        plena_err_clear(&er);
        const int rc = r->fn(r->ctx, i, part, &er);
        if (!rc) continue;
        if (!pe->rc || i < pe->item) {
            pe->rc = rc;
            pe->item = i;
            pe->err = er;
        }
        atomic_store(&r->failed, 1);
    }
}

int plena_pool_for(struct plena_pool *pool, uint32_t n, plena_pool_item_fn fn, void *ctx,
                   struct plena_err *err)
{
    const uint32_t parts = plena_pool_size(pool);
    /* small pools (the usual --threads) keep the failures on the stack: no
     * allocation (and no failure of its own) per job */
    struct item_err small[4];
    memset(small, 0, sizeof small);
    struct pool_for r = {n, fn, ctx, 0, 0, parts <= 4 ? small : plena_calloc(parts, sizeof *r.pe)};
    if (!r.pe) return PLENA_FAIL(err, PLENA_E_NOMEM, "threads", "out of memory");
    plena_pool_run(pool, pool_for_part, &r);
    const struct item_err *first = NULL;
    for (uint32_t q = 0; q < parts; q++)
        if (r.pe[q].rc && (!first || r.pe[q].item < first->item)) first = &r.pe[q];
    int rc = 0;
    if (first) {
        rc = first->rc;
        if (err && !plena_err_is_set(err)) *err = first->err;
    }
    if (r.pe != small) plena_free(r.pe);
    return rc;
}
