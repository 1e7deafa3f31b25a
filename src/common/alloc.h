/* All heap use in libplena goes through these wrappers so tests can make
 * allocation fail after N calls (Lua's Memcontrol / SQLite's FAULTSIM) and
 * exercise every out-of-memory path. plena_free accepts NULL. */
#ifndef PLENA_COMMON_ALLOC_H
#define PLENA_COMMON_ALLOC_H

#include <stddef.h>

void *plena_malloc(size_t n);
void *plena_calloc(size_t count, size_t size); /* overflow-checked */
void *plena_realloc(void *p, size_t n);
void plena_free(void *p);
char *plena_strdup(const char *s);

/* Test hook: after `n_ok` further successful allocations every allocation
 * fails, until plena_alloc_fail_reset(). n_ok < 0 disables the hook. */
void plena_alloc_fail_after(long n_ok);
void plena_alloc_fail_reset(void);

/* Growable array helper: ensures *cap >= need (elements of `elem` bytes),
 * growing geometrically. Returns 0 on success, -1 on overflow/out of memory
 * (the array is unchanged then). */
int plena_grow(void **array, size_t *cap, size_t need, size_t elem);

/* qsort that accepts an empty (possibly NULL) array: qsort(NULL, 0, ...) is
 * undefined behaviour (its base is declared non-null), and an empty growable
 * array is NULL. Every sort in libplena goes through it. */
void plena_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

#endif
