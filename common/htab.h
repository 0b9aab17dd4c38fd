/* An intrusive chained hash table: the one hash table of the project (the
 * kube/ informer cache, the controller's store and work queue, the
 * validator's quota slots).
 *
 * The caller embeds a gq_hnode in its own struct and hashes its own key
 * (common/hash.h); the table keeps the node's 64-bit hash, chains nodes of
 * one bucket through the node, and never allocates per node: it owns only
 * its bucket array. Nodes belong to the caller, who frees them (after
 * removing them, or after gq_htab_free).
 *
 * The bucket count is a power of two. An insert that brings the node count
 * above the bucket count doubles the array (load factor 1); if the doubled
 * size would overflow or cannot be allocated, the table keeps its array and
 * stays correct, only with longer chains.
 *
 * Lookup: gq_htab_find with an equality callback, or gq_htab_first /
 * gq_htab_next to walk the nodes that carry one hash (the caller compares
 * keys itself; several nodes may carry one key).
 *
 * Not thread-safe: callers hold their own lock, a write lock for insert,
 * remove and replace. */
#ifndef GQ_HTAB_H
#define GQ_HTAB_H

#include <stddef.h>
#include <stdint.h>

#include "common/gq_error.h"

typedef struct gq_hnode {
    struct gq_hnode *next; /* bucket chain */
    uint64_t hash;         /* set by gq_htab_insert */
} gq_hnode;

typedef struct gq_htab {
    gq_hnode **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;    /* nodes in the table */
    /* The allocator of bucket arrays, calloc's contract; NULL = calloc. A
     * test seam: set it after gq_htab_init to make growth fail. */
    void *(*calloc_fn)(size_t n, size_t size);
} gq_htab;

/* The struct of type that holds node (member names its gq_hnode). */
#define GQ_HTAB_ENTRY(node, type, member) ((type *)(void *)((char *)(node)-offsetof(type, member)))

/* An empty table of at least nbuckets buckets (rounded up to a power of
 * two; 0 counts as 1). GQ_ENOMEM when the array cannot be allocated or its
 * size overflows; t is then empty, and gq_htab_free is a no-op on it. */
gq_code gq_htab_init(gq_htab *t, size_t nbuckets);

/* Free the bucket array only (the nodes are the caller's); t becomes empty. */
void gq_htab_free(gq_htab *t);

/* Add node under hash; the node must not be in a table. May double the
 * bucket array (see above). The order of the nodes of one hash is
 * unspecified: a growth may reverse it. */
void gq_htab_insert(gq_htab *t, gq_hnode *node, uint64_t hash);

/* Unlink node, which must be in t. O(chain length). The node is then the
 * caller's again, its next pointer too (say, to list removed nodes). */
void gq_htab_remove(gq_htab *t, gq_hnode *node);

/* Put node in old's place (old must be in t; node takes old's hash, node
 * must not be in a table): an update that keeps the count and never grows. */
void gq_htab_replace(gq_htab *t, gq_hnode *old, gq_hnode *node);

/* The first node carrying hash, NULL if none. */
gq_hnode *gq_htab_first(const gq_htab *t, uint64_t hash);

/* The next node after node carrying node's hash, NULL if none. */
gq_hnode *gq_htab_next(const gq_hnode *node);

/* The first node carrying hash for which eq(node, key) is true, NULL if
 * none. */
gq_hnode *gq_htab_find(const gq_htab *t, uint64_t hash,
                       int (*eq)(const gq_hnode *node, const void *key), const void *key);

/* Entries named by a string: a struct that embeds a gq_hnode and ends with
 * its name as a flexible array member (char name[]), filed under
 * gq_fnv1a(name). The offsets say where the node and the name are. */

/* The entry named key, NULL if none. */
void *gq_htab_find_named(const gq_htab *t, size_t node_off, size_t name_off, const char *key);

/* A new zeroed entry of size bytes plus a copy of key at name_off,
 * inserted under key (which no entry may carry yet). NULL when it cannot
 * be allocated; *bytes (may be NULL) is set to what was allocated. */
void *gq_htab_add_named(gq_htab *t, size_t size, size_t node_off, size_t name_off, const char *key,
                        size_t *bytes);

#define GQ_HTAB_FIND_NAMED(t, type, node, name, key)                                               \
    ((type *)gq_htab_find_named((t), offsetof(type, node), offsetof(type, name), (key)))
#define GQ_HTAB_ADD_NAMED(t, type, node, name, key, bytes)                                         \
    ((type *)gq_htab_add_named((t), sizeof(type), offsetof(type, node), offsetof(type, name),      \
                               (key), (bytes)))

/* Bytes held by the bucket array (for memory accounting). */
size_t gq_htab_bytes(const gq_htab *t);

/* Iteration over every node, in no particular order:
 *
 *     gq_htab_iter it;
 *     for (gq_hnode *n = gq_htab_iter_first(&it, t); n; n = gq_htab_iter_next(&it))
 *
 * The loop may remove (and free) the node it is at, and no other; it must
 * not insert. */
typedef struct gq_htab_iter {
    const gq_htab *t;
    size_t bucket;  /* of the next node */
    gq_hnode *next; /* the node after the current one, read before it is returned */
} gq_htab_iter;

gq_hnode *gq_htab_iter_first(gq_htab_iter *it, const gq_htab *t);
gq_hnode *gq_htab_iter_next(gq_htab_iter *it);

#endif
