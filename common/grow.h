/* Growing an array by one element at a time: the one doubling rule every
 * layer's lists use. */
#ifndef GQ_GROW_H
#define GQ_GROW_H

#include <stddef.h>

/* Room for element n of the array arr, which holds *cap elements of size
 * elem and n of them in use (n <= *cap). While n < *cap, arr itself;
 * else arr moved to twice the capacity (first when it had none), *cap
 * updated. NULL when out of memory (or the size would overflow): arr and
 * *cap are then as they were and arr still the caller's to free. */
void *gq_grow(void *arr, size_t *cap, size_t n, size_t elem, size_t first);

#endif
