/* Small string utilities shared by every layer. Pure: no allocation. */
#ifndef GQ_STRUTIL_H
#define GQ_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>

/* Copy src into dst[cap] (cap >= 1), cutting it to cap - 1 bytes; dst is
 * always NUL-terminated. Returns true when src had to be cut. */
bool gq_copy_trunc(char *dst, size_t cap, const char *src);

#endif
