/* kube/kube_leader.c: Lease election over a fake Lease store and a fake
 * clock that moves only when every elector sleeps; one leader and its
 * release, and the takeover after a Lease expires. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"

/* ---- leader election over a fake Lease store ---- */

typedef struct lease_store {
    pthread_mutex_t mu;
    json_object *lease;
    long rv;
    int creates, updates;
} lease_store;

typedef struct lease_client {
    lease_store *s;
    atomic_int down; /* every call fails as if the API server were unreachable */
    atomic_int started, stopped;
    atomic_int gets; /* GETs of the Lease answered */
} lease_client;

static const char *rv_of(json_object *o)
{
    json_object *m, *v;
    if (!json_object_object_get_ex(o, "metadata", &m) ||
        !json_object_object_get_ex(m, "resourceVersion", &v))
        return "";
    return json_object_get_string(v);
}

/* The stored Lease as the API server answers a write with it. */
static void answer(lease_store *s, gq_code rc, json_object **out)
{
    if (rc == GQ_OK && out && json_object_deep_copy(s->lease, out, NULL) != 0)
        *out = NULL;
}

static gq_code store_put(lease_store *s, json_object *body)
{
    json_object *copy = NULL, *m;
    if (json_object_deep_copy(body, &copy, NULL) != 0)
        return GQ_ENOMEM;
    char rv[32];
    snprintf(rv, sizeof(rv), "%ld", ++s->rv);
    json_object_object_get_ex(copy, "metadata", &m);
    json_object_object_add(m, "resourceVersion", json_object_new_string(rv));
    json_object_put(s->lease);
    s->lease = copy;
    return GQ_OK;
}

static gq_code lease_get(void *ctx, const char *path, json_object **out, gq_err *err)
{
    lease_client *lc = ctx;
    if (atomic_load(&lc->down))
        return gq_err_set(err, GQ_EIO, "down");
    assert_string_equal(path, "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases/ctl");
    pthread_mutex_lock(&lc->s->mu);
    gq_code rc = GQ_ENOTFOUND;
    if (lc->s->lease)
        rc = json_object_deep_copy(lc->s->lease, out, NULL) ? GQ_ENOMEM : GQ_OK;
    pthread_mutex_unlock(&lc->s->mu);
    atomic_fetch_add(&lc->gets, 1);
    return rc ? gq_err_set(err, rc, "get lease") : GQ_OK;
}

static gq_code lease_create(void *ctx, const char *path, json_object *body, json_object **out,
                            gq_err *err)
{
    lease_client *lc = ctx;
    if (atomic_load(&lc->down))
        return gq_err_set(err, GQ_EIO, "down");
    assert_string_equal(path, "/apis/coordination.k8s.io/v1/namespaces/gpu-system/leases");
    pthread_mutex_lock(&lc->s->mu);
    gq_code rc = lc->s->lease ? GQ_EEXISTS : store_put(lc->s, body);
    answer(lc->s, rc, out);
    lc->s->creates += !rc;
    pthread_mutex_unlock(&lc->s->mu);
    return rc ? gq_err_set(err, rc, "create lease") : GQ_OK;
}

static gq_code lease_update(void *ctx, const char *path, json_object *body, json_object **out,
                            gq_err *err)
{
    lease_client *lc = ctx;
    if (atomic_load(&lc->down))
        return gq_err_set(err, GQ_EIO, "down");
    pthread_mutex_lock(&lc->s->mu);
    gq_code rc = strcmp(rv_of(body), rv_of(lc->s->lease)) ? GQ_ECONFLICT : store_put(lc->s, body);
    answer(lc->s, rc, out);
    lc->s->updates += !rc;
    pthread_mutex_unlock(&lc->s->mu);
    return rc ? gq_err_set(err, rc, "update lease") : GQ_OK;
}

static void le_started(void *ud)
{
    atomic_fetch_add(&((lease_client *)ud)->started, 1);
}

static void le_stopped(void *ud)
{
    atomic_fetch_add(&((lease_client *)ud)->stopped, 1);
}

static const char *spec_field(lease_store *s, const char *k, char *buf, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    json_object *spec, *v;
    buf[0] = '\0';
    if (s->lease && json_object_object_get_ex(s->lease, "spec", &spec) &&
        json_object_object_get_ex(spec, k, &v))
        snprintf(buf, cap, "%s", json_object_get_string(v));
    pthread_mutex_unlock(&s->mu);
    return buf;
}

/* A clock the test drives: fake time moves only in fake_advance. Elector
 * threads wait in fake_sleep until fake time reaches their deadline, and
 * fake_advance returns once every thread that was due has run and gone back
 * to sleep, so whatever the electors do within a step is over when the test
 * looks: no real time passes between what is asserted. */
#define FAKE_SLEEPERS 4

typedef struct fake_clock {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t now_ms;
    int64_t deadline[FAKE_SLEEPERS]; /* of the threads in fake_sleep; 0: free */
    int threads;                     /* elector threads running */
} fake_clock;

static int64_t fake_mono_ms(void *ud)
{
    fake_clock *fc = ud;
    pthread_mutex_lock(&fc->mu);
    int64_t t = fc->now_ms;
    pthread_mutex_unlock(&fc->mu);
    return t;
}

static int64_t fake_wall_us(void *ud)
{
    return 1795791732000000LL + fake_mono_ms(ud) * 1000;
}

/* Real-time wait for the condition variable: a bound, never a signal. */
static void cv_wait_a_little(fake_clock *fc)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 5 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&fc->cv, &fc->mu, &ts);
}

static int fake_sleep(void *ud, long ms, const atomic_int *stop)
{
    fake_clock *fc = ud;
    pthread_mutex_lock(&fc->mu);
    int slot = 0;
    while (fc->deadline[slot])
        slot++;
    assert_true(slot < FAKE_SLEEPERS);
    int64_t until = fc->now_ms + (ms > 0 ? ms : 1);
    fc->deadline[slot] = until;
    pthread_cond_broadcast(&fc->cv);
    int stopped = 0;
    while (fc->now_ms < until && !(stopped = atomic_load(stop)))
        cv_wait_a_little(fc); /* stop() sets a flag without signalling */
    fc->deadline[slot] = 0;
    pthread_cond_broadcast(&fc->cv);
    pthread_mutex_unlock(&fc->mu);
    return stopped;
}

/* Wait (real time, 5 s at most) until every running thread sleeps with a
 * deadline still ahead. Call with fc->mu held. */
static void settle_locked(fake_clock *fc)
{
    for (int tries = 0; tries < 1000; tries++) {
        int ahead = 0;
        for (int i = 0; i < FAKE_SLEEPERS; i++)
            ahead += fc->deadline[i] > fc->now_ms;
        if (ahead == fc->threads)
            return;
        cv_wait_a_little(fc);
    }
    fail_msg("electors did not settle at fake time %lld", (long long)fc->now_ms);
}

/* One more (or one fewer) elector thread, once it has settled. */
static void fake_threads(fake_clock *fc, int delta)
{
    pthread_mutex_lock(&fc->mu);
    fc->threads += delta;
    settle_locked(fc);
    pthread_mutex_unlock(&fc->mu);
}

static void fake_advance(fake_clock *fc, long ms)
{
    pthread_mutex_lock(&fc->mu);
    fc->now_ms += ms;
    pthread_cond_broadcast(&fc->cv);
    settle_locked(fc);
    pthread_mutex_unlock(&fc->mu);
}

/* Advance in 10 ms steps until le's leadership is want, at most ms; the
 * fake milliseconds it took, or -1. At every step at most one of le[0..2)
 * leads. */
static long advance_until_leader(fake_clock *fc, kube_leader_elect *le[2], int which, int want,
                                 long ms)
{
    for (long t = 0; t <= ms; t += 10) {
        assert_true(kube_leader_elect_is_leader(le[0]) + kube_leader_elect_is_leader(le[1]) <= 1);
        if (kube_leader_elect_is_leader(le[which]) == want)
            return t;
        fake_advance(fc, 10);
    }
    return -1;
}

static void setup_electors(fake_clock *fc, lease_store *s, lease_client lc[2], kube_api api[2],
                           kube_leader_elect *le[2], long lease_ms, long renew_ms)
{
    static const char *ids[2] = {"ctl-a", "ctl-b"};
    static const kube_clock clock_ops = {fake_mono_ms, fake_wall_us, fake_sleep, NULL};
    static kube_clock clock;
    clock = clock_ops;
    clock.ud = fc;
    for (int i = 0; i < 2; i++) {
        lc[i].s = s;
        api[i] = (kube_api){
            .ctx = &lc[i], .get = lease_get, .create = lease_create, .update = lease_update};
        kube_leader_opts o = {.namespace_ = "gpu-system",
                              .name = "ctl",
                              .identity = ids[i],
                              .lease_ms = lease_ms,
                              .renew_deadline_ms = renew_ms,
                              .retry_ms = 50,
                              .on_started = le_started,
                              .on_stopped = le_stopped,
                              .ud = &lc[i],
                              .clock = &clock};
        gq_err e;
        assert_int_equal(kube_leader_elect_new(&api[i], &o, &le[i], &e), GQ_OK);
    }
    /* A first, so it is the leader at once; then B, which must stay a
     * follower. */
    gq_err e;
    assert_int_equal(kube_leader_elect_start(le[0], &e), GQ_OK);
    fake_threads(fc, 1);
    assert_int_equal(kube_leader_elect_is_leader(le[0]), 1);
    assert_int_equal(kube_leader_elect_start(le[1], &e), GQ_OK);
    fake_threads(fc, 1);
}

static void leader_one_leader_and_release(void **state)
{
    (void)state;
    lease_store s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    lease_client lc[2] = {{0}};
    kube_api api[2];
    kube_leader_elect *le[2];
    fake_clock fc = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    setup_electors(&fc, &s, lc, api, le, 5000, 3000);
    /* For 300 ms, exactly one leader at every step, renewing every 50 ms. */
    for (int i = 0; i < 30; i++) {
        assert_int_equal(kube_leader_elect_is_leader(le[0]) + kube_leader_elect_is_leader(le[1]),
                         1);
        fake_advance(&fc, 10);
    }
    assert_int_equal(kube_leader_elect_is_leader(le[0]), 1);
    assert_int_equal(atomic_load(&lc[0].started), 1);
    assert_int_equal(atomic_load(&lc[1].started), 0);
    assert_int_equal(s.creates, 1);
    assert_int_equal(s.updates, 6); /* at 50, 100, ... 300 ms */
    /* The leader read the Lease to create it and before its first renewal;
     * since then it renews from what its last write returned, unread. */
    assert_int_equal(atomic_load(&lc[0].gets), 2);
    /* Someone else writes the Lease (its holder unchanged): the next
     * renewal's write conflicts, the leader reads it, renews, and leads on. */
    pthread_mutex_lock(&s.mu);
    assert_int_equal(store_put(&s, s.lease), GQ_OK);
    pthread_mutex_unlock(&s.mu);
    fake_advance(&fc, 50);
    assert_int_equal(kube_leader_elect_is_leader(le[0]), 1);
    assert_int_equal(kube_leader_elect_is_leader(le[1]), 0);
    assert_int_equal(atomic_load(&lc[0].gets), 3);
    assert_int_equal(s.updates, 7);
    char buf[64];
    assert_string_equal(spec_field(&s, "holderIdentity", buf, sizeof(buf)), "ctl-a");
    assert_string_equal(spec_field(&s, "leaseDurationSeconds", buf, sizeof(buf)), "5");
    assert_string_equal(spec_field(&s, "leaseTransitions", buf, sizeof(buf)), "0");
    /* renewTime is the fake wall clock at the last renewal, as MicroTime. */
    assert_string_equal(spec_field(&s, "renewTime", buf, sizeof(buf)),
                        "2026-11-27T15:02:12.350000Z");
    int64_t us;
    assert_int_equal(kube_parse_time(buf, &us), GQ_OK);

    /* Release: the other replica takes over at its next retry (at most
     * 2.2 x 50 ms with jitter), long before the 5 s lease would expire. */
    kube_leader_elect_stop(le[0]);
    fake_threads(&fc, -1);
    assert_int_equal(kube_leader_elect_is_leader(le[0]), 0);
    assert_int_equal(atomic_load(&lc[0].stopped), 1);
    long took = advance_until_leader(&fc, le, 1, 1, 200);
    assert_true(took >= 0 && took <= 110);
    assert_int_equal(atomic_load(&lc[1].started), 1);
    assert_string_equal(spec_field(&s, "holderIdentity", buf, sizeof(buf)), "ctl-b");
    assert_string_equal(spec_field(&s, "leaseTransitions", buf, sizeof(buf)), "1");
    kube_leader_elect_stop(le[1]);
    fake_threads(&fc, -1);
    assert_string_equal(spec_field(&s, "holderIdentity", buf, sizeof(buf)), "");
    assert_string_equal(spec_field(&s, "leaseDurationSeconds", buf, sizeof(buf)), "1");
    assert_int_equal(atomic_load(&lc[1].stopped), 1);
    kube_leader_elect_free(le[0]);
    kube_leader_elect_free(le[1]);
    json_object_put(s.lease);
}

static void leader_takeover_after_expiry(void **state)
{
    (void)state;
    lease_store s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    lease_client lc[2] = {{0}};
    kube_api api[2];
    kube_leader_elect *le[2];
    fake_clock fc = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    setup_electors(&fc, &s, lc, api, le, 1000, 600);
    assert_int_equal(advance_until_leader(&fc, le, 1, 1, 200), -1); /* B stays a follower */
    /* A loses the API server: it steps down once its last renewal (at most
     * 50 ms ago) is 600 ms old; B takes over once the lease has not moved
     * for its 1 s, as B observed it (B looks every 50..110 ms). */
    atomic_store(&lc[0].down, 1);
    long down = advance_until_leader(&fc, le, 0, 0, 2000);
    assert_true(down >= 550 && down <= 650);
    assert_int_equal(atomic_load(&lc[0].stopped), 1);
    assert_int_equal(kube_leader_elect_is_leader(le[1]), 0);
    long over = advance_until_leader(&fc, le, 1, 1, 2000);
    assert_true(over >= 0);
    over += down;
    assert_true(over >= 900 && over <= 1170);
    /* A's API server comes back: A finds B renewing and stays a follower. */
    atomic_store(&lc[0].down, 0);
    assert_int_equal(advance_until_leader(&fc, le, 0, 1, 300), -1);
    assert_int_equal(kube_leader_elect_is_leader(le[1]), 1);
    char buf[64];
    assert_string_equal(spec_field(&s, "holderIdentity", buf, sizeof(buf)), "ctl-b");
    kube_leader_elect_stop(le[0]);
    kube_leader_elect_stop(le[1]);
    kube_leader_elect_free(le[0]);
    kube_leader_elect_free(le[1]);
    json_object_put(s.lease);

    kube_leader_opts bad = {.namespace_ = "ns", .name = "x"};
    gq_err e;
    assert_int_equal(kube_leader_elect_new(&api[0], &bad, &le[0], &e), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(leader_one_leader_and_release),
        cmocka_unit_test(leader_takeover_after_expiry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
