/* The controller's work queue (controller/workqueue.c) over a fake clock:
 * duplicates folded, backoff, and a blocking take. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "controller/ctl.h"

/* --- queue ------------------------------------------------------------------- */

static int64_t fake_ms;
static int64_t fake_clock(void *ud)
{
    (void)ud;
    return fake_ms;
}

static char *take(ctl_workqueue *q)
{
    char *k = NULL;
    gq_code rc = ctl_workqueue_get(q, 0, &k);
    if (rc == GQ_ETIMEOUT)
        return NULL;
    assert_int_equal(rc, GQ_OK);
    return k;
}

/* The next key is want: take it and be done with it. */
static void take_done(ctl_workqueue *q, const char *want)
{
    char *k = take(q);
    assert_non_null(k);
    assert_string_equal(k, want);
    ctl_workqueue_done(q, k);
    free(k);
}

static void test_queue_dedup(void **state)
{
    (void)state;
    ctl_workqueue *q;
    ctl_workqueue_opts o = {.now_ms = fake_clock};
    assert_int_equal(ctl_workqueue_new(&o, &q), GQ_OK);
    assert_int_equal(ctl_workqueue_add(q, "a"), GQ_OK);
    assert_int_equal(ctl_workqueue_add(q, "b"), GQ_OK);
    assert_int_equal(ctl_workqueue_add(q, "a"), GQ_OK);
    assert_int_equal(ctl_workqueue_len(q), 2);
    char *k = take(q);
    assert_string_equal(k, "a");
    /* Added while processing: not handed out twice, queued again on done. */
    assert_int_equal(ctl_workqueue_add(q, "a"), GQ_OK);
    char *k2 = take(q);
    assert_string_equal(k2, "b");
    assert_null(take(q));
    ctl_workqueue_done(q, "a");
    assert_int_equal(ctl_workqueue_len(q), 1);
    ctl_workqueue_done(q, "b");
    free(k2);
    free(k);
    k = take(q);
    assert_string_equal(k, "a");
    ctl_workqueue_done(q, "a");
    free(k);
    assert_int_equal(ctl_workqueue_len(q), 0);

    /* add_after: not ready before its time; an earlier time wins. */
    fake_ms = 1000;
    assert_int_equal(ctl_workqueue_add_after(q, "d", 500), GQ_OK);
    assert_int_equal(ctl_workqueue_add_after(q, "d", 200), GQ_OK);
    assert_int_equal(ctl_workqueue_delayed(q), 1);
    assert_null(take(q));
    fake_ms = 1199;
    assert_null(take(q));
    fake_ms = 1200;
    k = take(q);
    assert_string_equal(k, "d");
    ctl_workqueue_done(q, "d");
    free(k);
    assert_int_equal(ctl_workqueue_delayed(q), 0);
    /* A ready key asked for later as well runs now and again then: a run
     * now does not stand for one at that time (a pod's grace deadline,
     * asked for right after the pod's change made its quota ready). */
    assert_int_equal(ctl_workqueue_add(q, "e"), GQ_OK);
    assert_int_equal(ctl_workqueue_add_after(q, "e", 10000), GQ_OK);
    assert_int_equal(ctl_workqueue_delayed(q), 1);
    take_done(q, "e");
    assert_null(take(q));
    fake_ms = 11200;
    take_done(q, "e");
    assert_int_equal(ctl_workqueue_delayed(q), 0);
    /* Nor does an add while it waits cancel its time. */
    assert_int_equal(ctl_workqueue_add_after(q, "f", 500), GQ_OK);
    assert_int_equal(ctl_workqueue_add(q, "f"), GQ_OK);
    take_done(q, "f");
    assert_null(take(q));
    fake_ms = 11700;
    take_done(q, "f");

    ctl_workqueue_shutdown(q);
    assert_int_equal(ctl_workqueue_get(q, -1, &k), GQ_ENOTFOUND);
    assert_int_equal(ctl_workqueue_add(q, "x"), GQ_OK);
    assert_int_equal(ctl_workqueue_len(q), 0);
    ctl_workqueue_free(q);
}

static void test_queue_backoff(void **state)
{
    (void)state;
    ctl_workqueue *q;
    ctl_workqueue_opts o = {.now_ms = fake_clock, .backoff_min_ms = 100, .backoff_max_ms = 30000};
    assert_int_equal(ctl_workqueue_new(&o, &q), GQ_OK);
    static const long want[] = {100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000};
    fake_ms = 0;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        long d = -1;
        assert_int_equal(ctl_workqueue_add_rate_limited(q, "k", &d), GQ_OK);
        assert_int_equal(d, want[i]);
        assert_null(take(q));
        fake_ms += d;
        char *k = take(q);
        assert_non_null(k);
        assert_string_equal(k, "k");
        ctl_workqueue_done(q, "k");
        free(k);
    }
    assert_int_equal(ctl_workqueue_failures(q, "k"), 11);
    /* Other keys have their own count. */
    long d;
    assert_int_equal(ctl_workqueue_add_rate_limited(q, "other", &d), GQ_OK);
    assert_int_equal(d, 100);
    ctl_workqueue_forget(q, "k");
    assert_int_equal(ctl_workqueue_failures(q, "k"), 0);
    assert_int_equal(ctl_workqueue_add_rate_limited(q, "k", &d), GQ_OK);
    assert_int_equal(d, 100);
    ctl_workqueue_free(q);
}

/* A real wait: get blocks until the delay passes on the real clock. */
static void test_queue_blocking(void **state)
{
    (void)state;
    ctl_workqueue *q;
    assert_int_equal(ctl_workqueue_new(NULL, &q), GQ_OK);
    char *k = NULL;
    assert_int_equal(ctl_workqueue_get(q, 20, &k), GQ_ETIMEOUT);
    assert_int_equal(ctl_workqueue_add_after(q, "late", 50), GQ_OK);
    assert_int_equal(ctl_workqueue_get(q, 2000, &k), GQ_OK);
    assert_string_equal(k, "late");
    ctl_workqueue_done(q, "late");
    free(k);
    ctl_workqueue_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_dedup),
        cmocka_unit_test(test_queue_backoff),
        cmocka_unit_test(test_queue_blocking),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
