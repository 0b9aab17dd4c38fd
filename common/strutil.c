#include "common/strutil.h"

#include <string.h>

bool gq_copy_trunc(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    bool cut = n >= cap;
    if (cut)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return cut;
}
