/* common/htab: the intrusive chained hash table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/hash.h"
#include "common/htab.h"

typedef struct item {
    int tag;
    gq_hnode node; /* not first: GQ_HTAB_ENTRY must subtract the offset */
    char key[32];
    int seen;
} item;

static item *of(gq_hnode *n)
{
    return n ? GQ_HTAB_ENTRY(n, item, node) : NULL;
}

static int key_eq(const gq_hnode *n, const void *key)
{
    return !strcmp(GQ_HTAB_ENTRY(n, const item, node)->key, key);
}

static item *find(const gq_htab *t, const char *key, uint64_t h)
{
    return of(gq_htab_find(t, h, key_eq, key));
}

/* Every node once, and how many. */
static size_t walk(const gq_htab *t)
{
    gq_htab_iter it;
    size_t n = 0;
    for (gq_hnode *x = gq_htab_iter_first(&it, t); x; x = gq_htab_iter_next(&it)) {
        of(x)->seen++;
        n++;
    }
    return n;
}

static void basic(void **state)
{
    (void)state;
    gq_htab t;
    assert_int_equal(gq_htab_init(&t, 3), GQ_OK);
    assert_int_equal(t.nbuckets, 4); /* rounded up to a power of two */
    assert_int_equal(t.count, 0);
    assert_null(find(&t, "a", gq_fnv1a("a")));
    assert_int_equal(walk(&t), 0);

    item a = {.key = "a"}, b = {.key = "b"}, b2 = {.key = "b"};
    gq_htab_insert(&t, &a.node, gq_fnv1a("a"));
    gq_htab_insert(&t, &b.node, gq_fnv1a("b"));
    assert_int_equal(t.count, 2);
    assert_ptr_equal(find(&t, "a", gq_fnv1a("a")), &a);
    assert_ptr_equal(find(&t, "b", gq_fnv1a("b")), &b);
    assert_null(find(&t, "c", gq_fnv1a("c")));
    assert_null(find(&t, "b", gq_fnv1a("a"))); /* the right key under another hash */

    /* Replace keeps the count and the hash. */
    gq_htab_replace(&t, &b.node, &b2.node);
    assert_int_equal(t.count, 2);
    assert_ptr_equal(find(&t, "b", gq_fnv1a("b")), &b2);
    assert_int_equal(b2.node.hash, gq_fnv1a("b"));

    gq_htab_remove(&t, &a.node);
    assert_int_equal(t.count, 1);
    assert_null(find(&t, "a", gq_fnv1a("a")));
    assert_ptr_equal(find(&t, "b", gq_fnv1a("b")), &b2);
    assert_int_equal(walk(&t), 1);
    assert_int_equal(b2.seen, 1);
    assert_int_equal(gq_htab_bytes(&t), t.nbuckets * sizeof(gq_hnode *));
    gq_htab_free(&t);
    assert_null(t.buckets);
    assert_int_equal(gq_htab_bytes(&t), 0);
    gq_htab_free(&t); /* twice is harmless */

    assert_int_equal(gq_htab_init(&t, 0), GQ_OK);
    assert_int_equal(t.nbuckets, 1);
    gq_htab_free(&t);
    assert_int_equal(gq_htab_init(&t, SIZE_MAX), GQ_ENOMEM); /* the size overflows */
    assert_int_equal(t.nbuckets, 0);
    assert_null(gq_htab_first(&t, 1));
    assert_int_equal(walk(&t), 0);
    gq_htab_free(&t);
}

/* Nodes with one hash: find tells them apart by key; first/next walks
 * exactly the nodes of that hash, including equal keys; removal from the
 * middle of a chain. */
static void collisions(void **state)
{
    (void)state;
    enum { N = 40 };
    gq_htab t;
    item v[N];
    assert_int_equal(gq_htab_init(&t, 8), GQ_OK);
    for (int i = 0; i < N; i++) {
        memset(&v[i], 0, sizeof v[i]);
        snprintf(v[i].key, sizeof v[i].key, "k%d", i % 10); /* each key four times */
        v[i].tag = i;
        /* Two hashes that share the low bits (one bucket at every size). */
        gq_htab_insert(&t, &v[i].node, i % 2 ? 42 : 42 + ((uint64_t)1 << 62));
    }
    assert_int_equal(t.count, N);
    assert_true(t.nbuckets >= N);
    size_t n = 0;
    for (gq_hnode *x = gq_htab_first(&t, 42); x; x = gq_htab_next(x)) {
        assert_int_equal(of(x)->tag % 2, 1);
        n++;
    }
    assert_int_equal(n, N / 2);
    assert_null(gq_htab_first(&t, 43));
    assert_int_equal(find(&t, "k3", 42)->tag % 10, 3);
    assert_null(find(&t, "k4", 42)); /* k4 only under the other hash */
    assert_int_equal(find(&t, "k4", 42 + ((uint64_t)1 << 62))->tag % 10, 4);
    gq_htab_remove(&t, &v[33].node);
    gq_htab_remove(&t, &v[1].node);
    gq_htab_remove(&t, &v[3].node);
    gq_htab_remove(&t, &v[13].node);
    assert_int_equal(find(&t, "k3", 42)->tag, 23); /* the one left */
    gq_htab_remove(&t, &v[23].node);
    assert_null(find(&t, "k3", 42));
    assert_int_equal(t.count, N - 5);
    n = 0;
    for (item *x = find(&t, "k5", 42); x; x = of(gq_htab_next(&x->node)))
        n += !strcmp(x->key, "k5");
    assert_int_equal(n, 4); /* every node of one key */
    assert_int_equal(walk(&t), N - 5);
    for (int i = 0; i < N; i++)
        assert_int_equal(v[i].seen, i % 10 == 3 || i == 1 ? 0 : 1);
    gq_htab_free(&t);
}

/* Removing the node the iteration is at, in every pattern: every node is
 * still visited once, the survivors stay findable. */
static void iterate_removing(void **state)
{
    (void)state;
    enum { N = 300 };
    item *v = calloc(N, sizeof(*v));
    assert_non_null(v);
    for (int mod = 1; mod <= 4; mod++) {
        gq_htab t;
        assert_int_equal(gq_htab_init(&t, 16), GQ_OK);
        for (int i = 0; i < N; i++) {
            memset(&v[i], 0, sizeof v[i]);
            snprintf(v[i].key, sizeof v[i].key, "ns/pod-%d", i);
            v[i].tag = i;
            gq_htab_insert(&t, &v[i].node, mod == 4 ? 7 : gq_fnv1a(v[i].key));
        }
        gq_htab_iter it;
        size_t visited = 0;
        for (gq_hnode *x = gq_htab_iter_first(&it, &t); x; x = gq_htab_iter_next(&it)) {
            item *e = of(x);
            e->seen++;
            visited++;
            if (e->tag % mod == 0) {
                gq_htab_remove(&t, x);
                memset(x, 0xa5, sizeof *x); /* a removed node is the caller's to reuse */
            }
        }
        assert_int_equal(visited, N);
        size_t left = 0;
        for (int i = 0; i < N; i++) {
            assert_int_equal(v[i].seen, 1);
            uint64_t h = mod == 4 ? 7 : gq_fnv1a(v[i].key);
            if (i % mod == 0) {
                assert_null(find(&t, v[i].key, h));
            } else {
                assert_ptr_equal(find(&t, v[i].key, h), &v[i]);
                left++;
            }
        }
        assert_int_equal(t.count, left);
        gq_htab_free(&t);
    }
    free(v);
}

/* Growth by doubling at load factor 1, across many sizes: after every
 * insert the bucket count is the least power of two (from the initial one)
 * holding count nodes, and every node is found. */
static void growth(void **state)
{
    (void)state;
    enum { N = 5000 };
    item *v = calloc(N, sizeof(*v));
    assert_non_null(v);
    gq_htab t;
    assert_int_equal(gq_htab_init(&t, 4), GQ_OK);
    for (int i = 0; i < N; i++) {
        snprintf(v[i].key, sizeof v[i].key, "default/q-%d", i);
        gq_htab_insert(&t, &v[i].node, gq_fnv1a(v[i].key));
        size_t want = 4;
        while (want < t.count)
            want *= 2;
        assert_int_equal(t.nbuckets, want);
        if (i % 97 == 0 || i == N - 1)
            for (int j = 0; j <= i; j++)
                assert_ptr_equal(find(&t, v[j].key, gq_fnv1a(v[j].key)), &v[j]);
    }
    assert_int_equal(walk(&t), N);
    /* Removal never shrinks. */
    for (int i = 0; i < N; i++)
        gq_htab_remove(&t, &v[i].node);
    assert_int_equal(t.count, 0);
    assert_int_equal(t.nbuckets, 8192);
    assert_int_equal(walk(&t), 0);
    gq_htab_free(&t);
    free(v);
}

static int allocs_left;
static void *failing_calloc(size_t n, size_t size)
{
    if (allocs_left <= 0)
        return NULL;
    allocs_left--;
    return calloc(n, size);
}

/* A growth that cannot allocate leaves the table as it was, usable; a later
 * one succeeds. */
static void grow_failure(void **state)
{
    (void)state;
    enum { N = 100 };
    item v[N];
    gq_htab t;
    assert_int_equal(gq_htab_init(&t, 2), GQ_OK);
    t.calloc_fn = failing_calloc;
    allocs_left = 0;
    for (int i = 0; i < N; i++) {
        memset(&v[i], 0, sizeof v[i]);
        snprintf(v[i].key, sizeof v[i].key, "k%d", i);
        gq_htab_insert(&t, &v[i].node, gq_fnv1a(v[i].key));
    }
    assert_int_equal(t.nbuckets, 2); /* load factor 50 */
    assert_int_equal(t.count, N);
    for (int i = 0; i < N; i++)
        assert_ptr_equal(find(&t, v[i].key, gq_fnv1a(v[i].key)), &v[i]);
    gq_htab_remove(&t, &v[50].node);
    assert_null(find(&t, "k50", gq_fnv1a("k50")));
    assert_int_equal(walk(&t), N - 1);

    allocs_left = 1; /* the next insert grows once, to 4 buckets */
    gq_htab_insert(&t, &v[50].node, gq_fnv1a("k50"));
    assert_int_equal(t.nbuckets, 4);
    assert_int_equal(allocs_left, 0);
    for (int i = 0; i < N; i++)
        assert_ptr_equal(find(&t, v[i].key, gq_fnv1a(v[i].key)), &v[i]);

    allocs_left = 100; /* and later ones catch up, one doubling per insert */
    gq_htab_remove(&t, &v[7].node);
    gq_htab_insert(&t, &v[7].node, gq_fnv1a("k7"));
    assert_int_equal(t.nbuckets, 8);
    gq_htab_free(&t);
}

/* Entries named by their flexible array member: added once, found by name,
 * zeroed, counted in bytes; the empty name is a name like any other. */
typedef struct named {
    int value;
    gq_hnode node;
    char name[];
} named;

static void named_entries(void **state)
{
    (void)state;
    gq_htab t;
    assert_int_equal(gq_htab_init(&t, 2), GQ_OK);
    const char *names[] = {"alpha", "beta", "", "a-longer-name-than-the-others"};
    named *made[4];
    for (size_t i = 0; i < 4; i++) {
        assert_null(GQ_HTAB_FIND_NAMED(&t, named, node, name, names[i]));
        size_t bytes = 0;
        made[i] = GQ_HTAB_ADD_NAMED(&t, named, node, name, names[i], &bytes);
        assert_non_null(made[i]);
        assert_int_equal(made[i]->value, 0);
        assert_string_equal(made[i]->name, names[i]);
        assert_int_equal(bytes, sizeof(named) + strlen(names[i]) + 1);
        made[i]->value = (int)i + 1;
    }
    assert_int_equal(t.count, 4);
    for (size_t i = 0; i < 4; i++)
        assert_ptr_equal(GQ_HTAB_FIND_NAMED(&t, named, node, name, names[i]), made[i]);
    assert_null(GQ_HTAB_FIND_NAMED(&t, named, node, name, "alph"));
    assert_non_null(GQ_HTAB_ADD_NAMED(&t, named, node, name, "gamma", NULL));
    gq_htab_iter it;
    for (gq_hnode *n = gq_htab_iter_first(&it, &t); n; n = gq_htab_iter_next(&it)) {
        gq_htab_remove(&t, n);
        free(GQ_HTAB_ENTRY(n, named, node));
    }
    gq_htab_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(basic),
        cmocka_unit_test(collisions),
        cmocka_unit_test(iterate_removing),
        cmocka_unit_test(growth),
        cmocka_unit_test(grow_failure),
        cmocka_unit_test(named_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
