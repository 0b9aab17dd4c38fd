#include "common/hash.h"

#define FNV1A_PRIME 1099511628211ULL

uint64_t gq_fnv1a_add(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
        h = (h ^ *p) * FNV1A_PRIME;
    return h;
}

uint64_t gq_fnv1a(const char *s)
{
    return gq_fnv1a_add(GQ_FNV1A_INIT, s);
}

uint64_t gq_fnv1a_key(const char *ns, const char *name)
{
    return gq_fnv1a_add(gq_fnv1a_add(gq_fnv1a_add(GQ_FNV1A_INIT, ns), "/"), name);
}
