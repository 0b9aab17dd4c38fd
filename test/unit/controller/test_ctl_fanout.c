/* Several calls at once (controller/fanout.h): every index called once, at
 * most width calls at a time, indices taken in increasing order, the
 * calling thread alone for one call or width 1. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "controller/fanout.h"

enum { N = 64 };

typedef struct calls {
    pthread_mutex_t mu;
    int count[N + 1];
    size_t order[N]; /* indices in the order the calls began */
    size_t n_begun;
    int in_flight, max_in_flight;
    long sleep_ms;
    pthread_t caller;
    bool other_thread; /* a call ran on a thread other than the caller */
} calls;

static void call(void *ud, size_t i)
{
    calls *c = ud;
    pthread_mutex_lock(&c->mu);
    c->count[i < N ? i : N]++;
    if (c->n_begun < N)
        c->order[c->n_begun++] = i;
    if (++c->in_flight > c->max_in_flight)
        c->max_in_flight = c->in_flight;
    if (!pthread_equal(pthread_self(), c->caller))
        c->other_thread = true;
    pthread_mutex_unlock(&c->mu);
    struct timespec ts = {0, c->sleep_ms * 1000000L};
    if (c->sleep_ms)
        nanosleep(&ts, NULL);
    pthread_mutex_lock(&c->mu);
    c->in_flight--;
    pthread_mutex_unlock(&c->mu);
}

static void calls_init(calls *c, long sleep_ms)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    c->sleep_ms = sleep_ms;
    c->caller = pthread_self();
}

/* Every index exactly once, nothing past n. */
static void assert_each_once(const calls *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(c->count[i], 1);
    for (size_t i = n; i <= N; i++)
        assert_int_equal(c->count[i], 0);
}

/* With width 4 and calls that wait, several run at once, never more than
 * four; each index is called once. */
static void test_width_bounds_calls(void **state)
{
    (void)state;
    calls c;
    calls_init(&c, 20);
    ctl_fanout(N, 4, call, &c);
    assert_each_once(&c, N);
    assert_int_equal(c.n_begun, N);
    assert_true(c.max_in_flight >= 2);
    assert_true(c.max_in_flight <= 4);
    assert_true(c.other_thread);
    assert_int_equal(c.in_flight, 0); /* every call returned before ctl_fanout did */
    pthread_mutex_destroy(&c.mu);
}

/* Width 1 (and 0, read as 1): the calling thread makes every call, in
 * order; one call never starts a thread. */
static void test_one_at_a_time_in_order(void **state)
{
    (void)state;
    static const unsigned widths[] = {1, 0};
    for (size_t w = 0; w < 2; w++) {
        calls c;
        calls_init(&c, 0);
        ctl_fanout(N, widths[w], call, &c);
        assert_each_once(&c, N);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(c.order[i], i);
        assert_int_equal(c.max_in_flight, 1);
        assert_false(c.other_thread);
        pthread_mutex_destroy(&c.mu);
    }
    calls c;
    calls_init(&c, 0);
    ctl_fanout(1, 8, call, &c);
    assert_each_once(&c, 1);
    assert_false(c.other_thread);
    pthread_mutex_destroy(&c.mu);
}

/* No index: no call. A width above CTL_FANOUT_MAX is held to it; more
 * threads than indices are never started. */
static void test_bounds(void **state)
{
    (void)state;
    calls c;
    calls_init(&c, 0);
    ctl_fanout(0, 8, call, &c);
    assert_each_once(&c, 0);
    pthread_mutex_destroy(&c.mu);

    calls_init(&c, 30);
    ctl_fanout(3, 1000, call, &c);
    assert_each_once(&c, 3);
    assert_true(c.max_in_flight <= 3);
    pthread_mutex_destroy(&c.mu);

    calls_init(&c, 5);
    ctl_fanout(N, CTL_FANOUT_MAX + 100, call, &c);
    assert_each_once(&c, N);
    assert_true(c.max_in_flight <= (int)CTL_FANOUT_MAX);
    pthread_mutex_destroy(&c.mu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_width_bounds_calls),
        cmocka_unit_test(test_one_at_a_time_in_order),
        cmocka_unit_test(test_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
