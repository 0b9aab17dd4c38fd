/* Small string utilities shared by every layer. Pure: no allocation. */
#ifndef GQ_STRUTIL_H
#define GQ_STRUTIL_H

#include <stdbool.h>
#include <stddef.h>

/* Copy src into dst[cap] (cap >= 1), cutting it to cap - 1 bytes; dst is
 * always NUL-terminated. Returns true when src had to be cut. */
bool gq_copy_trunc(char *dst, size_t cap, const char *src);

/* Whether s[0..n) is an RFC 1123 label, [a-z0-9]([-a-z0-9]*[a-z0-9])?, at
 * most 63 characters: a namespace's name, one label of a DNS name. */
bool gq_is_dns_label_n(const char *s, size_t n);
/* The same for a NUL-terminated s (false for NULL). */
bool gq_is_dns_label(const char *s);

#endif
