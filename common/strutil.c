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

bool gq_is_dns_label_n(const char *s, size_t n)
{
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

bool gq_is_dns_label(const char *s)
{
    return s && gq_is_dns_label_n(s, strlen(s));
}
