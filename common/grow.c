#include <stdint.h>
#include <stdlib.h>

#include "common/grow.h"

void *gq_grow(void *arr, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return arr;
    size_t ncap = *cap ? *cap * 2 : first;
    if (ncap < *cap || ncap > SIZE_MAX / elem)
        return NULL;
    void *grown = realloc(arr, ncap * elem);
    if (grown)
        *cap = ncap;
    return grown;
}
