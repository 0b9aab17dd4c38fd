/* /validate served asynchronously by a real server (plain HTTP on
 * loopback, 2 server threads) over a slow store (faultstore latency): many
 * concurrent reviews gather into batches larger than the thread count, a
 * charge still queued at its review's deadline is refused, a full queue
 * refuses at once, stopping the server answers every suspended
 * connection, and the read of a named pod's name is made off the threads
 * that serve requests. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/admission_testutil.h"
#include "support/faultstore.h"
#include "webhook/memstore.h"
#include "http/server.h"
#include "webhook/validate.h"

#define NS "team-a"
#define THREADS 2

typedef struct fx {
    gq_config *cfg;
    wh_memstore *ms;
    faultstore *fs;
    wh_store store;
    wh_validator *v;
    http_server *srv;
    unsigned port;
} fx;

static void start(fx *f, const wh_validate_opts *o)
{
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(wh_validator_new(f->cfg, &f->store, o, &f->v, &err), GQ_OK);
    http_server_options so = {
        .listen = "127.0.0.1:0", .threads = THREADS, .insecure_plain_http = true};
    assert_int_equal(http_server_new(&so, &f->srv, &err), GQ_OK);
    assert_int_equal(http_server_add_async_handler(f->srv, "/validate", HTTP_ROUTE_POST_JSON,
                                                   wh_validate_handle_async, f->v, &err),
                     GQ_OK);
    assert_int_equal(http_server_start(f->srv, &err), GQ_OK);
    f->port = http_server_port(f->srv);
}

static void quota(fx *f, const char *hard)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
             "\"name\":\"q\",\"namespace\":\"" NS "\"},\"spec\":{\"hard\":%s}}",
             hard);
    json_object *o = json_tokener_parse(buf);
    assert_non_null(o);
    assert_int_equal(wh_memstore_apply(f->ms, o, NULL), GQ_OK);
    json_object_put(o);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(gq_config_default(&f->cfg, NULL), GQ_OK);
    assert_int_equal(faultstore_over_memstore(&f->ms, &f->fs, &f->store), GQ_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    http_server_free(f->srv); /* first: its handler uses the validator */
    wh_validator_free(f->v);
    faultstore_free(f->fs);
    wh_memstore_free(f->ms);
    gq_config_free(f->cfg);
    free(f);
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One review posted on its own connection, and what came back. */
typedef struct call {
    fx *f;
    int i;
    const char *timeout; /* ?timeout= or NULL */
    bool cpu_only;       /* a pod asking for no GPU (nothing to charge) */
    int status;          /* 0: no answer */
    bool allowed;
    char message[512];
    double took;
} call;

static void parse_answer(call *c, const char *resp)
{
    sscanf(resp, "HTTP/1.1 %d", &c->status);
    const char *body = strstr(resp, "\r\n\r\n");
    json_object *o = body ? json_tokener_parse(body + 4) : NULL, *r = NULL, *v = NULL, *st = NULL;
    if (o && json_object_object_get_ex(o, "response", &r)) {
        c->allowed = json_object_object_get_ex(r, "allowed", &v) && json_object_get_boolean(v);
        if (json_object_object_get_ex(r, "status", &st) &&
            json_object_object_get_ex(st, "message", &v))
            snprintf(c->message, sizeof(c->message), "%s", json_object_get_string(v));
    } else if (o && json_object_object_get_ex(o, "message", &v)) {
        snprintf(c->message, sizeof(c->message), "%s", json_object_get_string(v));
    }
    json_object_put(o);
}

static void *post(void *arg)
{
    call *c = arg;
    char uid[32], pod[1024], head[256], resp[16384];
    snprintf(uid, sizeof(uid), "a-%d", c->i);
    snprintf(pod, sizeof(pod),
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p-%d\","
             "\"namespace\":\"" NS "\",\"uid\":\"%s\"},\"spec\":{\"containers\":[{\"name\":\"c\","
             "\"image\":\"x\",\"resources\":{\"limits\":{\"%s\":\"1Gi\"}}}]}}",
             c->i, uid, c->cpu_only ? "memory" : "gpuquota.io/gpu-memory");
    char *review = at_pod_create_review(uid, NS, pod);
    size_t len = strlen(review);
    int n = snprintf(head, sizeof(head),
                     "POST /validate%s%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     c->timeout ? "?timeout=" : "", c->timeout ? c->timeout : "", len);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->f->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    double t0 = now_s();
    size_t got = 0;
    if (fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
        write(fd, head, (size_t)n) == n && write(fd, review, len) == (ssize_t)len) {
        ssize_t r;
        while (got < sizeof(resp) - 1 && (r = read(fd, resp + got, sizeof(resp) - 1 - got)) > 0)
            got += (size_t)r;
    }
    resp[got] = '\0';
    c->took = now_s() - t0;
    if (fd >= 0)
        close(fd);
    free(review);
    parse_answer(c, resp);
    return NULL;
}

static void post_all(call *cs, size_t n)
{
    pthread_t *th = calloc(n, sizeof(*th));
    assert_non_null(th);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(pthread_create(&th[i], NULL, post, &cs[i]), 0);
    for (size_t i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    free(th);
}

static void wait_for_gets(fx *f, uint64_t n)
{
    faultstore_stats st;
    for (int i = 0; i < 1000; i++) {
        faultstore_get_stats(f->fs, &st);
        if (st.gets >= n)
            return;
        usleep(5000);
    }
    fail_msg("the store saw %llu reads, waited for %llu", (unsigned long long)st.gets,
             (unsigned long long)n);
}

/* 64 reviews at once against a store taking 20 ms a call, with 2 server
 * threads: a thread-bound group commit could gather at most 2. */
static void many_reviews_batch_past_the_threads(void **state)
{
    enum { N = 64, HARD = 40 };
    fx *f = *state;
    quota(f, "{\"gpu-memory\":\"40Gi\"}");
    faultstore_faults fl = {.latency_us = 20000};
    faultstore_set_faults(f->fs, &fl);
    start(f, NULL);
    static call cs[N];
    for (int i = 0; i < N; i++)
        cs[i] = (call){.f = f, .i = i};
    post_all(cs, N);
    int allowed = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(cs[i].status, 200);
        allowed += cs[i].allowed;
        if (!cs[i].allowed)
            assert_non_null(strstr(cs[i].message, "exceeded quota: q"));
    }
    assert_int_equal(allowed, HARD); /* never past hard, no spurious denial */
    wh_validate_stats vs;
    wh_validate_get_stats(f->v, &vs);
    faultstore_stats st;
    faultstore_get_stats(f->fs, &st);
    assert_int_equal(vs.charged, HARD);
    assert_true(vs.largest_batch > THREADS);
    assert_true(st.updates < N / 2); /* one write carries many charges */
}

/* A review whose charge waits behind a slow round is refused at its
 * deadline (4/5 of ?timeout=1s), not after the round. */
static void deadline_while_suspended(void **state)
{
    fx *f = *state;
    quota(f, "{\"gpu-memory\":\"40Gi\"}");
    faultstore_faults fl = {.latency_us = 1500000}; /* a round: 3 s */
    faultstore_set_faults(f->fs, &fl);
    start(f, NULL);
    call first = {.f = f, .i = 0}, late = {.f = f, .i = 1, .timeout = "1s"};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, post, &first), 0);
    wait_for_gets(f, 1); /* the first round is under way */
    post(&late);
    pthread_join(th, NULL);
    assert_int_equal(first.status, 200);
    assert_true(first.allowed);
    assert_int_equal(late.status, 200);
    assert_false(late.allowed);
    assert_non_null(strstr(late.message, "timeout"));
    assert_true(late.took < 2.0); /* answered at its deadline, before the round ended */
    wh_validate_stats vs;
    wh_validate_get_stats(f->v, &vs);
    assert_int_equal(vs.charged, 1);
}

/* With room for 2 waiting charges, 5 more reviews behind a running round:
 * 2 wait and are charged, 3 are refused at once. */
static void overload_refused_at_once(void **state)
{
    enum { N = 5 };
    fx *f = *state;
    quota(f, "{\"gpu-memory\":\"40Gi\"}");
    faultstore_faults fl = {.latency_us = 500000};
    faultstore_set_faults(f->fs, &fl);
    wh_validate_opts o = {.max_queued = 2};
    start(f, &o);
    call first = {.f = f, .i = 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, post, &first), 0);
    wait_for_gets(f, 1);
    static call cs[N];
    for (int i = 0; i < N; i++)
        cs[i] = (call){.f = f, .i = i + 1};
    post_all(cs, N);
    pthread_join(th, NULL);
    assert_true(first.allowed);
    int allowed = 0, overloaded = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(cs[i].status, 200);
        allowed += cs[i].allowed;
        if (!cs[i].allowed) {
            assert_non_null(strstr(cs[i].message, "overloaded"));
            assert_true(cs[i].took < 0.9); /* not after the round */
            overloaded++;
        }
    }
    assert_int_equal(allowed, 2);
    assert_int_equal(overloaded, 3);
}

/* Stopping with reviews suspended: a long enough drain lets them finish
 * with their real answers; a drain of 0 answers them 503 at once. Either
 * way every connection is answered (and nothing leaks under LSan). */
static void stop_answers_suspended(bool drain)
{
    enum { N = 8 };
    fx f0, *f = &f0;
    memset(f, 0, sizeof(*f));
    void *st = f;
    setup(&st);
    f = st;
    quota(f, "{\"gpu-memory\":\"40Gi\"}");
    faultstore_faults fl = {.latency_us = 400000};
    faultstore_set_faults(f->fs, &fl);
    start(f, NULL);
    static call cs[N];
    static pthread_t th[N];
    for (int i = 0; i < N; i++) {
        cs[i] = (call){.f = f, .i = i};
        assert_int_equal(pthread_create(&th[i], NULL, post, &cs[i]), 0);
    }
    wait_for_gets(f, 1);
    usleep(100000); /* the others are suspended behind the round */
    unsigned left = http_server_stop(f->srv, drain ? 10000 : 0);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    if (drain)
        assert_int_equal(left, 0);
    int answered = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        if (cs[i].status == 200 && cs[i].allowed)
            answered++;
        else if (cs[i].status == 503 && strstr(cs[i].message, "shutting down"))
            refused++;
        else
            fail_msg("review %d: status %d (%s)", i, cs[i].status, cs[i].message);
    }
    if (drain)
        assert_int_equal(answered, N);
    else
        assert_true(refused > 0);
    teardown(&st);
}

static void stop_drains_suspended(void **state)
{
    (void)state;
    stop_answers_suspended(true);
}

static void stop_without_drain_answers_503(void **state)
{
    (void)state;
    stop_answers_suspended(false);
}

/* A get_pod that holds every caller until released, counting them. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int entered;
    bool released;
} held = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false};

static gq_code held_get_pod(void *ctx, const char *ns, const char *name, json_object **out,
                            gq_err *err)
{
    (void)ctx, (void)ns, (void)name, (void)out;
    pthread_mutex_lock(&held.mu);
    held.entered++;
    pthread_cond_broadcast(&held.cv);
    while (!held.released)
        pthread_cond_wait(&held.cv, &held.mu);
    pthread_mutex_unlock(&held.mu);
    return gq_err_set(err, GQ_ENOTFOUND, "not found");
}

/* Named creates read their name before being charged. With that read held,
 * as many creates as there are chargers wait in it, and the 2 server
 * threads still answer: a pod with nothing to charge is decided at once.
 * Released, every create is charged. */
static void name_read_off_the_server_threads(void **state)
{
    enum { N = 2 * WH_CHARGERS_DEFAULT };
    fx *f = *state;
    quota(f, "{\"gpu-memory\":\"40Gi\"}");
    f->store.get_pod = held_get_pod;
    start(f, NULL);
    static call cs[N];
    static pthread_t th[N];
    for (int i = 0; i < N; i++) {
        cs[i] = (call){.f = f, .i = i};
        assert_int_equal(pthread_create(&th[i], NULL, post, &cs[i]), 0);
    }
    pthread_mutex_lock(&held.mu);
    while (held.entered < WH_CHARGERS_DEFAULT)
        pthread_cond_wait(&held.cv, &held.mu);
    pthread_mutex_unlock(&held.mu);
    call cpu = {.f = f, .i = N, .cpu_only = true};
    post(&cpu); /* the server threads are free */
    assert_int_equal(cpu.status, 200);
    assert_true(cpu.allowed);
    pthread_mutex_lock(&held.mu);
    assert_int_equal(held.entered, WH_CHARGERS_DEFAULT); /* the rest wait their turn */
    held.released = true;
    pthread_cond_broadcast(&held.cv);
    pthread_mutex_unlock(&held.mu);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(cs[i].status, 200);
        assert_true(cs[i].allowed);
    }
    assert_int_equal(held.entered, N);
    wh_validate_stats vs;
    wh_validate_get_stats(f->v, &vs);
    assert_int_equal(vs.charged, N);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(many_reviews_batch_past_the_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(deadline_while_suspended, setup, teardown),
        cmocka_unit_test_setup_teardown(overload_refused_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(name_read_off_the_server_threads, setup, teardown),
        cmocka_unit_test(stop_drains_suspended),
        cmocka_unit_test(stop_without_drain_answers_503),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
