/* FNV-1a, the one string hash of the project's chained hash tables
 * (common/htab.h: the kube/ cache, the controller's store, queue and
 * per-quota state, the validator's quota slots). Not for
 * untrusted keys where collisions matter: object keys come from the API
 * server, which limits names to 253 bytes. */
#ifndef GQ_HASH_H
#define GQ_HASH_H

#include <stdint.h>

#define GQ_FNV1A_INIT 14695981039346656037ULL /* the FNV offset basis */

/* Continue hash h over the bytes of s (NULL: none). Start from GQ_FNV1A_INIT. */
uint64_t gq_fnv1a_add(uint64_t h, const char *s);

/* The hash of s. */
uint64_t gq_fnv1a(const char *s);

/* The hash of "NS/NAME" (ns NULL as ""), the key of a namespaced object. */
uint64_t gq_fnv1a_key(const char *ns, const char *name);

#endif
