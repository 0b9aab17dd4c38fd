#include "common/heap.h"

#include <stdlib.h> /* defines __GLIBC__ on glibc */

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GQ_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GQ_UNDER_ASAN 1
#endif

void gq_heap_trim(void)
{
#if defined(__GLIBC__) && !defined(GQ_UNDER_ASAN)
    malloc_trim(0);
#endif
}

void gq_heap_limit_arenas(int n)
{
#if defined(__GLIBC__) && !defined(GQ_UNDER_ASAN)
    mallopt(M_ARENA_MAX, n);
#else
    (void)n;
#endif
}
