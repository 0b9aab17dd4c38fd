/* The recount in a cohort (controller/reconcile.c over quota/lending.h):
 * status.borrowed and status.lent of a borrower, of two and three lenders
 * (one at its fresh recount, the others as cached) and of their tenant;
 * of two tenants in a cohort of tenants (spec.cohort); the sums agree, and a status written is the
 * status computed again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl_fixture.h"

#define BORROWER "{'hard':{'gpu-memory':'16Gi'},'borrowingLimit':{'gpu-memory':'16Gi'}}"

/* A running pod of namespace ns charging mem. */
static gq_usage_pod running(const char *ns, int64_t mem)
{
    gq_usage_pod p;
    memset(&p, 0, sizeof(p));
    p.facts.namespace_ = ns;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        p.charge.set[k] = true;
    p.charge.v[GQ_KEY_GPU_MEMORY] = mem;
    p.charge.v[GQ_KEY_GPU_PODS] = 1;
    return p;
}

/* The cohort as the controller caches it: each member parsed with its status. */
typedef struct cohort {
    json_object *obj[4];
    gq_quota *q[4];
    gq_cohort_member m[4];
    size_t n;
} cohort;

static void add(cohort *c, const char *ns, const char *spec, const char *used)
{
    char status[128];
    gq_err err;
    snprintf(status, sizeof status, "{'used':{'gpu-memory':'%s'}}", used);
    c->obj[c->n] = quota_json(ns, "q", spec, status);
    assert_int_equal(gq_quota_parse(c->obj[c->n], &c->q[c->n], &err), GQ_OK);
    c->m[c->n] = (gq_cohort_member){.q = c->q[c->n], .used = c->q[c->n]->used};
    c->n++;
}

static void cohort_free(cohort *c)
{
    for (size_t i = 0; i < c->n; i++) {
        gq_quota_free(c->q[i]);
        json_object_put(c->obj[i]);
    }
}

/* Reconcile quota (member self of c, or a tenant) over pods; r filled. */
static void recount(json_object *quota, const cohort *c, size_t self, gq_usage_pod *pods, size_t n,
                    ctl_result *r)
{
    gq_err err;
    ctl_counted in = {pods, n, NULL, NULL, NOW, {c->m, c->n, self}};
    ctl_result_init(r);
    if (ctl_reconcile(quota, &in, r, &err))
        fail_msg("reconcile: %s", err.msg);
}

static const char *mem_of(const ctl_result *r, const char *member)
{
    json_object *m = NULL, *v = NULL;
    if (!json_object_object_get_ex(r->status, member, &m) ||
        !json_object_object_get_ex(m, "gpu-memory", &v))
        return NULL;
    return json_object_get_string(v);
}

/* Member self of c, a lender, recounted over pods: lends lent, borrows
 * nothing; its status written and computed again is the same bytes. */
static void lends(const cohort *c, size_t self, gq_usage_pod *pods, size_t n, const char *lent,
                  int64_t lent_gib)
{
    ctl_result r;
    recount(c->obj[self], c, self, pods, n, &r);
    assert_string_equal(mem_of(&r, "lent"), lent);
    assert_null(mem_of(&r, "borrowed")); /* it cannot borrow: not reported */
    assert_true(r.fig.has_lent && !r.fig.has_borrowed);
    assert_int_equal(r.fig.lent.v[GQ_KEY_GPU_MEMORY], lent_gib * GI);
    json_object_object_add(c->obj[self], "status", json_object_get(r.status));
    ctl_result_dispose(&r);
    recount(c->obj[self], c, self, pods, n, &r);
    assert_false(r.changed);
    ctl_result_dispose(&r);
}

/* A borrower, two lenders (one recounted fresh), their tenant. */
static void test_two_lenders(void **state)
{
    (void)state;
    cohort c = {0};
    add(&c, "a", BORROWER, "32Gi");
    add(&c, "b", "{'hard':{'gpu-memory':'16Gi'}}", "0");
    add(&c, "c", "{'hard':{'gpu-memory':'8Gi'}}", "0");
    ctl_result r;

    /* b's own pods now use 4Gi (its cached status still says 0): 12Gi and
     * 8Gi lendable, 16Gi borrowed: b 9.6 -> 10Gi, c 6.4 -> 6Gi. */
    gq_usage_pod pb[] = {running("b", 4 * GI)};
    lends(&c, 1, pb, 1, "10Gi", 10);
    recount(c.obj[1], &c, 1, pb, 1, &r);
    assert_string_equal(mem_of(&r, "used"), "4Gi");
    ctl_result_dispose(&r);

    /* The borrower: 16Gi borrowed, nothing lent. */
    gq_usage_pod pa[] = {running("a", 16 * GI), running("a", 16 * GI)};
    recount(c.obj[0], &c, 0, pa, 2, &r);
    assert_string_equal(mem_of(&r, "borrowed"), "16Gi");
    assert_string_equal(mem_of(&r, "lent"), "0");
    ctl_result_dispose(&r);

    /* The tenant: the members' sums, as cached (b at 0: 16 and 8 lendable,
     * 16 borrowed), lent = borrowed. */
    json_object *t = tenant_json("t", "{'namespaces':['a','b','c'],'hard':{'gpu-memory':'64Gi'}}");
    recount(t, &c, c.n, NULL, 0, &r);
    assert_string_equal(mem_of(&r, "borrowed"), "16Gi");
    assert_string_equal(mem_of(&r, "lent"), "16Gi");
    assert_true(r.fig.has_borrowed && r.fig.has_lent);
    ctl_result_dispose(&r);
    json_object_put(t);
    cohort_free(&c);
}

/* Three lenders, one with a lendingLimit; then no cohort: no member. */
static void test_three_lenders_and_none(void **state)
{
    (void)state;
    cohort c = {0};
    add(&c, "a", BORROWER, "28Gi");
    add(&c, "b", "{'hard':{'gpu-memory':'8Gi'},'lendingLimit':{'gpu-memory':'2Gi'}}", "0");
    add(&c, "c", "{'hard':{'gpu-memory':'8Gi'}}", "0");
    add(&c, "d", "{'hard':{'gpu-memory':'8Gi'}}", "0");
    /* 12Gi borrowed of 2 + 8 + 8 lendable: 1.33, 5.33, 5.33 GiB; the GiB
     * left goes to the largest remainder, all equal: to the first, b. */
    const char *want[] = {NULL, "2Gi", "5Gi", "5Gi"};
    for (size_t i = 1; i < c.n; i++) {
        ctl_result r;
        recount(c.obj[i], &c, i, NULL, 0, &r);
        assert_string_equal(mem_of(&r, "lent"), want[i]);
        ctl_result_dispose(&r);
    }
    /* Outside a cohort nothing is said of lending. */
    ctl_result r;
    gq_err err;
    ctl_result_init(&r);
    assert_int_equal(
        ctl_reconcile(c.obj[2], &(ctl_counted){NULL, 0, NULL, NULL, NOW, {0}}, &r, &err), GQ_OK);
    assert_null(mem_of(&r, "lent"));
    assert_false(r.fig.has_lent);
    ctl_result_dispose(&r);
    cohort_free(&c);
}

/* Tenant name of cohort pool over namespace name, with spec extra and
 * cached status.used used, parsed into c as a member. */
static void add_tenant(cohort *c, const char *name, const char *extra, const char *used)
{
    char spec[256], status[128];
    gq_err err;
    snprintf(spec, sizeof spec,
             "{'namespaces':['%s'],'hard':{'gpu-memory':'16Gi'},'cohort':'pool'%s}", name, extra);
    snprintf(status, sizeof status, "{'used':{'gpu-memory':'%s'}}", used);
    c->obj[c->n] = tenant_json(name, spec);
    json_object_object_add(c->obj[c->n], "status", J(status));
    assert_int_equal(gq_quota_parse(c->obj[c->n], &c->q[c->n], &err), GQ_OK);
    c->m[c->n] = (gq_cohort_member){.q = c->q[c->n], .used = c->q[c->n]->used};
    c->n++;
}

#define BUSY ",'borrowingLimit':{'gpu-memory':'16Gi'}"

/* Member 0 of c, tenant busy, as cached with status.used used. */
static void busy_cached(cohort *c, const char *used)
{
    size_t n = c->n;
    json_object_put(c->obj[0]);
    gq_quota_free(c->q[0]);
    c->n = 0;
    add_tenant(c, "busy", BUSY, used);
    c->n = n;
}

/* Two tenants of one cohort of tenants (spec.cohort): each reports its own
 * place there, not sums over GPUQuotas. busy borrows what it uses above its
 * hard; idle lends it, at most its lendingLimit; nothing once busy is back
 * within its hard. */
static void test_cohort_of_tenants(void **state)
{
    (void)state;
    cohort c = {0};
    add_tenant(&c, "busy", BUSY, "0");
    add_tenant(&c, "idle", ",'lendingLimit':{'gpu-memory':'12Gi'}", "0");
    ctl_result r;

    /* busy's own pods now use 24Gi (its cached status still says 0). */
    gq_usage_pod pb[] = {running("busy", 16 * GI), running("busy", 8 * GI)};
    recount(c.obj[0], &c, 0, pb, 2, &r);
    assert_string_equal(mem_of(&r, "used"), "24Gi");
    assert_string_equal(mem_of(&r, "borrowed"), "8Gi");
    assert_string_equal(mem_of(&r, "lent"), "0");
    assert_true(r.fig.has_borrowed && r.fig.has_lent);
    assert_int_equal(r.fig.borrowed.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    ctl_result_dispose(&r);

    /* idle, with busy's 24Gi cached: lends 8Gi, borrows nothing. */
    busy_cached(&c, "24Gi");
    lends(&c, 1, NULL, 0, "8Gi", 8);

    /* idle's own pods use 8Gi: it leaves 8Gi, all of it lent to busy. */
    gq_usage_pod pi[] = {running("idle", 8 * GI)};
    recount(c.obj[1], &c, 1, pi, 1, &r);
    assert_string_equal(mem_of(&r, "lent"), "8Gi");
    ctl_result_dispose(&r);
    /* ... at most its lendingLimit: 12Gi of the 16Gi it leaves. */
    busy_cached(&c, "32Gi");
    recount(c.obj[1], &c, 1, NULL, 0, &r);
    assert_string_equal(mem_of(&r, "lent"), "12Gi");
    ctl_result_dispose(&r);

    /* busy back within its hard: nothing borrowed, nothing lent. */
    gq_usage_pod pb2[] = {running("busy", 16 * GI)};
    recount(c.obj[0], &c, 0, pb2, 1, &r);
    assert_string_equal(mem_of(&r, "borrowed"), "0");
    assert_string_equal(mem_of(&r, "lent"), "0");
    ctl_result_dispose(&r);
    cohort_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_lenders),
        cmocka_unit_test(test_three_lenders_and_none),
        cmocka_unit_test(test_cohort_of_tenants),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
