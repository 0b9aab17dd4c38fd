#include "common/htab.h"

#include <stdlib.h>
#include <string.h>

#include "common/hash.h"

/* The largest bucket count whose array size fits a size_t. */
#define MAX_BUCKETS (((size_t)-1 / sizeof(gq_hnode *) / 2) + 1)

static gq_hnode **alloc_buckets(const gq_htab *t, size_t n)
{
    return t->calloc_fn ? t->calloc_fn(n, sizeof(gq_hnode *)) : calloc(n, sizeof(gq_hnode *));
}

static size_t slot(const gq_htab *t, uint64_t hash)
{
    return (size_t)(hash & (uint64_t)(t->nbuckets - 1));
}

gq_code gq_htab_init(gq_htab *t, size_t nbuckets)
{
    *t = (gq_htab){0};
    if (nbuckets > MAX_BUCKETS)
        return GQ_ENOMEM;
    size_t n = 1;
    while (n < nbuckets)
        n <<= 1;
    if (!(t->buckets = alloc_buckets(t, n)))
        return GQ_ENOMEM;
    t->nbuckets = n;
    return GQ_OK;
}

void gq_htab_free(gq_htab *t)
{
    free(t->buckets);
    *t = (gq_htab){0};
}

/* Double the bucket array; on overflow or allocation failure keep the
 * current one (longer chains, still correct). */
static void grow(gq_htab *t)
{
    if (t->nbuckets >= MAX_BUCKETS)
        return;
    size_t nb = t->nbuckets * 2;
    gq_hnode **b = alloc_buckets(t, nb);
    if (!b)
        return;
    for (size_t i = 0; i < t->nbuckets; i++)
        for (gq_hnode *n = t->buckets[i], *next; n; n = next) {
            next = n->next;
            size_t j = (size_t)(n->hash & (uint64_t)(nb - 1));
            n->next = b[j];
            b[j] = n;
        }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = nb;
}

void gq_htab_insert(gq_htab *t, gq_hnode *node, uint64_t hash)
{
    gq_hnode **b = &t->buckets[slot(t, hash)];
    node->hash = hash;
    node->next = *b;
    *b = node;
    if (++t->count > t->nbuckets)
        grow(t);
}

/* The link that points at node; node must be in t. */
static gq_hnode **link_of(const gq_htab *t, const gq_hnode *node)
{
    gq_hnode **pp = &t->buckets[slot(t, node->hash)];
    while (*pp != node)
        pp = &(*pp)->next;
    return pp;
}

void gq_htab_remove(gq_htab *t, gq_hnode *node)
{
    *link_of(t, node) = node->next;
    node->next = NULL;
    t->count--;
}

void gq_htab_replace(gq_htab *t, gq_hnode *old, gq_hnode *node)
{
    gq_hnode **pp = link_of(t, old);
    node->hash = old->hash;
    node->next = old->next;
    *pp = node;
    old->next = NULL;
}

gq_hnode *gq_htab_first(const gq_htab *t, uint64_t hash)
{
    gq_hnode *n = t->nbuckets ? t->buckets[slot(t, hash)] : NULL;
    while (n && n->hash != hash)
        n = n->next;
    return n;
}

gq_hnode *gq_htab_next(const gq_hnode *node)
{
    gq_hnode *n = node->next;
    while (n && n->hash != node->hash)
        n = n->next;
    return n;
}

gq_hnode *gq_htab_find(const gq_htab *t, uint64_t hash,
                       int (*eq)(const gq_hnode *node, const void *key), const void *key)
{
    gq_hnode *n = gq_htab_first(t, hash);
    while (n && !eq(n, key))
        n = gq_htab_next(n);
    return n;
}

size_t gq_htab_bytes(const gq_htab *t)
{
    return t->nbuckets * sizeof(gq_hnode *);
}

/* The first node at or after bucket it->bucket, or NULL. */
static gq_hnode *scan(gq_htab_iter *it)
{
    while (it->bucket < it->t->nbuckets) {
        gq_hnode *n = it->t->buckets[it->bucket++];
        if (n)
            return n;
    }
    return NULL;
}

gq_hnode *gq_htab_iter_first(gq_htab_iter *it, const gq_htab *t)
{
    it->t = t;
    it->bucket = 0;
    it->next = scan(it);
    return gq_htab_iter_next(it);
}

gq_hnode *gq_htab_iter_next(gq_htab_iter *it)
{
    gq_hnode *cur = it->next;
    if (cur)
        it->next = cur->next ? cur->next : scan(it);
    return cur;
}

void *gq_htab_find_named(const gq_htab *t, size_t node_off, size_t name_off, const char *key)
{
    for (gq_hnode *n = gq_htab_first(t, gq_fnv1a(key)); n; n = gq_htab_next(n)) {
        char *entry = (char *)n - node_off;
        if (!strcmp(entry + name_off, key))
            return entry;
    }
    return NULL;
}

void *gq_htab_add_named(gq_htab *t, size_t size, size_t node_off, size_t name_off, const char *key,
                        size_t *bytes)
{
    size_t len = strlen(key);
    if (len > SIZE_MAX - size - 1)
        return NULL;
    char *entry = calloc(1, size + len + 1);
    if (!entry)
        return NULL;
    memcpy(entry + name_off, key, len + 1);
    gq_htab_insert(t, (gq_hnode *)(void *)(entry + node_off), gq_fnv1a(key));
    if (bytes)
        *bytes = size + len + 1;
    return entry;
}
