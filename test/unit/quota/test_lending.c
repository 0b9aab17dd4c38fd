/* Lending in a cohort (quota/lending.h): who lends what a borrower uses
 * above its hard, with one, two and three lenders, lendingLimit, several
 * keys, over-commitment, and the sums. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_fixtures.h"
#include "quota/lending.h"

#define MI (1024LL * 1024)

/* A GPUQuota with spec (JSON with ' for "), using mem bytes and gpus GPUs. */
static gq_cohort_member member(const char *name, const char *spec, int64_t mem, int64_t gpus)
{
    char text[512];
    snprintf(text, sizeof text, GQ("%s", "ns-%s", "%s", ""), name, name, spec);
    gq_cohort_member m = {.q = Q(text)};
    gq_amounts_clear(&m.used);
    m.used.v[GQ_KEY_GPU_MEMORY] = mem;
    m.used.v[GQ_KEY_GPUS] = gpus;
    return m;
}

static void dispose(gq_cohort_member *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gq_quota_free((gq_quota *)m[i].q);
}

static void lend(const gq_cohort_member *m, size_t n, gq_cohort_share *out, gq_cohort_share *total)
{
    gq_err err;
    assert_int_equal(gq_cohort_lending(m, n, out, total, &err), GQ_OK);
}

#define MEM GQ_KEY_GPU_MEMORY

/* One borrower, one lender: the lender lends exactly what is borrowed. */
static void test_one_lender(void **state)
{
    (void)state;
    gq_cohort_member m[] = {
        member("a", "'hard':{'gpu-memory':'16Gi'},'borrowingLimit':{'gpu-memory':'16Gi'}", 24 * GI,
               0),
        member("b", "'hard':{'gpu-memory':'16Gi'}", 4 * GI, 0),
    };
    gq_cohort_share out[2], total;
    lend(m, 2, out, &total);
    assert_true(out[0].borrows && !out[1].borrows);
    assert_int_equal(out[0].borrowed.v[MEM], 8 * GI);
    assert_int_equal(out[0].lent.v[MEM], 0);
    assert_true(out[0].lent.set[MEM] && !out[0].lent.set[GQ_KEY_GPUS]);
    assert_false(out[1].borrowed.set[MEM]); /* it cannot borrow: nothing reported */
    assert_int_equal(out[1].lent.v[MEM], 8 * GI);
    assert_true(total.borrows);
    assert_int_equal(total.borrowed.v[MEM], 8 * GI);
    assert_int_equal(total.lent.v[MEM], 8 * GI);
    dispose(m, 2);
}

/* Two and three lenders: pro rata of what each leaves unused, in whole
 * GiB, the largest remainders taking the units left; the sums agree. */
static void test_pro_rata(void **state)
{
    (void)state;
    gq_cohort_member m[] = {
        member("a", "'hard':{'gpu-memory':'16Gi'},'borrowingLimit':{'gpu-memory':'32Gi'}", 32 * GI,
               0),
        member("b", "'hard':{'gpu-memory':'16Gi'}", 0, 0),
        member("c", "'hard':{'gpu-memory':'8Gi'}", 0, 0),
    };
    gq_cohort_share out[4], total;
    /* 16Gi borrowed of 24Gi lendable: 10.67 and 5.33, in GiB 11 and 5. */
    lend(m, 3, out, &total);
    assert_int_equal(out[1].lent.v[MEM], 11 * GI);
    assert_int_equal(out[2].lent.v[MEM], 5 * GI);
    assert_int_equal(total.lent.v[MEM], total.borrowed.v[MEM]);
    assert_int_equal(total.lent.v[MEM], 16 * GI);
    dispose(m, 3);

    /* Three lenders of 8Gi each, 4Gi borrowed: 1.33 each, the unit left
     * goes to the first (equal remainders), always the same way. */
    gq_cohort_member t[] = {
        member("a", "'hard':{'gpu-memory':'8Gi'},'borrowingLimit':{'gpu-memory':'8Gi'}", 12 * GI,
               0),
        member("b", "'hard':{'gpu-memory':'8Gi'}", 0, 0),
        member("c", "'hard':{'gpu-memory':'8Gi'}", 0, 0),
        member("d", "'hard':{'gpu-memory':'8Gi'}", 0, 0),
    };
    lend(t, 4, out, &total);
    assert_int_equal(out[0].lent.v[MEM], 0);
    assert_int_equal(out[1].lent.v[MEM], 2 * GI);
    assert_int_equal(out[2].lent.v[MEM], 1 * GI);
    assert_int_equal(out[3].lent.v[MEM], 1 * GI);
    assert_int_equal(total.lent.v[MEM], 4 * GI);
    dispose(t, 4);
}

/* lendingLimit caps what a lender lends; amounts below a GiB are shared in
 * the largest unit dividing them all; gpus are shared as whole GPUs. */
static void test_limits_and_units(void **state)
{
    (void)state;
    gq_cohort_member m[] = {
        member("a",
               "'hard':{'gpu-memory':'16Gi','gpus':'2'},'borrowingLimit':{'gpu-memory':'16Gi',"
               "'gpus':'2'}",
               16 * GI + 768 * MI, 3),
        member("b", "'hard':{'gpu-memory':'16Gi','gpus':'2'},'lendingLimit':{'gpu-memory':'256Mi'}",
               0, 0),
        member("c", "'hard':{'gpu-memory':'16Gi','gpus':'2'}", 15 * GI, 1),
    };
    gq_cohort_share out[3], total;
    lend(m, 3, out, &total);
    /* 768Mi borrowed; b lends at most 256Mi, c its unused 1Gi: in units of
     * 256Mi, 3 of 5 lendable: b 0.6, c 2.4, the unit left to b. */
    assert_int_equal(out[0].borrowed.v[MEM], 768 * MI);
    assert_true(out[1].lent.v[MEM] <= 256 * MI);
    assert_int_equal(out[1].lent.v[MEM] + out[2].lent.v[MEM], 768 * MI);
    assert_int_equal(out[1].lent.v[MEM], 256 * MI);
    assert_int_equal(out[2].lent.v[MEM], 512 * MI);
    /* gpus: a borrows 1, b leaves 2 and c 1 unused: 0.67 and 0.33. */
    assert_int_equal(out[0].borrowed.v[GQ_KEY_GPUS], 1);
    assert_int_equal(out[1].lent.v[GQ_KEY_GPUS], 1);
    assert_int_equal(out[2].lent.v[GQ_KEY_GPUS], 0);
    assert_int_equal(total.borrowed.v[GQ_KEY_GPUS], 1);
    assert_int_equal(total.lent.v[GQ_KEY_GPUS], 1);
    dispose(m, 3);
}

/* Borrowers hold more than lenders leave unused (a lender took its share
 * back before the reclaim is done): each lends all it leaves unused, no
 * more; nothing is borrowed: nothing is lent. */
static void test_overcommitted_and_idle(void **state)
{
    (void)state;
    gq_cohort_member m[] = {
        member("a", "'hard':{'gpu-memory':'16Gi'},'borrowingLimit':{'gpu-memory':'16Gi'}", 32 * GI,
               0),
        member("b", "'hard':{'gpu-memory':'16Gi'}", 12 * GI, 0),
        member("c", "'hard':{'gpu-memory':'16Gi'},'borrowingLimit':{'gpu-memory':'8Gi'}", 10 * GI,
               0),
    };
    gq_cohort_share out[3], total;
    lend(m, 3, out, &total);
    assert_int_equal(out[1].lent.v[MEM], 4 * GI);
    assert_int_equal(out[2].lent.v[MEM], 6 * GI); /* a borrower within its share lends */
    assert_int_equal(out[2].borrowed.v[MEM], 0);
    assert_int_equal(total.borrowed.v[MEM], 16 * GI);
    assert_int_equal(total.lent.v[MEM], 10 * GI);
    dispose(m, 3);

    gq_cohort_member idle[] = {
        member("a", "'hard':{'gpu-memory':'16Gi'},'borrowingLimit':{'gpu-memory':'16Gi'}", 8 * GI,
               0),
        member("b", "'hard':{'gpu-memory':'16Gi'}", 0, 0),
    };
    lend(idle, 2, out, &total);
    assert_int_equal(out[0].lent.v[MEM], 0);
    assert_int_equal(out[1].lent.v[MEM], 0);
    assert_true(out[1].lent.set[MEM]);
    assert_int_equal(total.borrowed.v[MEM], 0);
    dispose(idle, 2);

    /* No members: nothing, and no total key set. */
    lend(NULL, 0, NULL, &total);
    assert_false(total.borrows || total.lent.set[MEM] || total.borrowed.set[MEM]);
}

/* Amounts near the top of int64: no overflow, sums still agree. */
static void test_huge(void **state)
{
    (void)state;
    gq_cohort_member m[] = {
        member("a", "'hard':{'gpus':'1'},'borrowingLimit':{'gpus':'9223372036854775000'}",
               INT64_MAX - 10, INT64_MAX),
        member("b", "'hard':{'gpus':'9223372036854775807'}", 0, 0),
        member("c", "'hard':{'gpus':'9223372036854775807'}", 0, 3),
    };
    gq_cohort_share out[3], total;
    lend(m, 3, out, &total);
    assert_int_equal(out[0].borrowed.v[GQ_KEY_GPUS], INT64_MAX - 1);
    /* L passes INT64_MAX: shared in member order. */
    assert_int_equal(out[1].lent.v[GQ_KEY_GPUS], INT64_MAX - 1);
    assert_int_equal(out[2].lent.v[GQ_KEY_GPUS], 0);
    assert_int_equal(total.lent.v[GQ_KEY_GPUS], INT64_MAX - 1);
    dispose(m, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_lender),
        cmocka_unit_test(test_pro_rata),
        cmocka_unit_test(test_limits_and_units),
        cmocka_unit_test(test_overcommitted_and_idle),
        cmocka_unit_test(test_huge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
