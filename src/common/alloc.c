/* Allocation wrappers with a failure-injection hook (see alloc.h). The hook
 * state is process-global on purpose: it exists only for tests, which run
 * single-threaded. */
#include "common/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static long fail_budget = -1;

static int should_fail(void)
{
    if (fail_budget < 0) return 0;
    if (fail_budget == 0) return 1;
    fail_budget--;
    return 0;
}

void plena_alloc_fail_after(long n_ok)
{
    fail_budget = n_ok;
}

void plena_alloc_fail_reset(void)
{
    fail_budget = -1;
}

void *plena_malloc(size_t n)
{
    if (should_fail()) return NULL;
    return malloc(n ? n : 1);
}

void *plena_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) return NULL;
    if (should_fail()) return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *plena_realloc(void *p, size_t n)
{
    if (should_fail()) return NULL;
    return realloc(p, n ? n : 1);
}

void plena_free(void *p)
{
    free(p);
}

char *plena_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = plena_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int plena_grow(void **array, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2) return -1;
        ncap *= 2;
    }
    if (elem && ncap > SIZE_MAX / elem) return -1;
    void *p = plena_realloc(*array, ncap * elem);
    if (!p) return -1;
    *array = p;
    *cap = ncap;
    return 0;
}

void plena_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
    if (n > 1 && base) qsort(base, n, size, cmp);
}
