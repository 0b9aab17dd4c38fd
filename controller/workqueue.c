/* Work queue with client-go's semantics: a key is waiting at most once; a
 * key added while a worker processes it is queued again when the worker is
 * done (never processed by two workers at once); a key asked for later
 * comes back then whatever happens to it meanwhile (the earliest time asked
 * wins); failed keys come back after a per-key exponential backoff until
 * forgotten. */
#include "controller/ctl.h"
#include "common/json_member.h"
#include "common/fifo.h"
#include "common/hash.h"
#include "common/htab.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Initial buckets of the key table, which doubles past one key a bucket. */
#define Q_BUCKETS 4096

typedef struct qitem {
    gq_hnode node;  /* in the queue's table, by key */
    gq_qnode ready; /* on the queue's ready FIFO */
    unsigned failures;
    bool queued;     /* in the ready FIFO */
    bool processing; /* handed to a worker */
    bool dirty;      /* added while processing: queue again on done */
    bool delayed;    /* waiting for due */
    int64_t due;     /* ms, when delayed */
    char key[];
} qitem;

struct ctl_workqueue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ctl_workqueue_opts o;
    gq_htab items; /* qitem by key */
    gq_fifo ready; /* qitems to hand out, oldest first */
    size_t n_ready, n_delayed;
    bool shutdown;
};

static int64_t mono_ms(void *ud)
{
    (void)ud;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_ms(ctl_workqueue *q)
{
    return q->o.now_ms(q->o.clock_ud);
}

gq_code ctl_workqueue_new(const ctl_workqueue_opts *opts, ctl_workqueue **out)
{
    ctl_workqueue *q = calloc(1, sizeof(*q));
    if (!q)
        return GQ_ENOMEM;
    if (opts)
        q->o = *opts;
    if (q->o.backoff_min_ms <= 0)
        q->o.backoff_min_ms = 100;
    if (q->o.backoff_max_ms <= 0)
        q->o.backoff_max_ms = 30000;
    if (q->o.backoff_max_ms < q->o.backoff_min_ms)
        q->o.backoff_max_ms = q->o.backoff_min_ms;
    if (!q->o.now_ms)
        q->o.now_ms = mono_ms;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int e = pthread_cond_init(&q->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (e || pthread_mutex_init(&q->mu, NULL)) {
        if (!e)
            pthread_cond_destroy(&q->cv);
        free(q);
        return GQ_ENOMEM;
    }
    if (gq_htab_init(&q->items, Q_BUCKETS)) {
        ctl_workqueue_free(q);
        return GQ_ENOMEM;
    }
    *out = q;
    return GQ_OK;
}

void ctl_workqueue_free(ctl_workqueue *q)
{
    if (!q)
        return;
    gq_htab_iter i;
    for (gq_hnode *n = gq_htab_iter_first(&i, &q->items); n; n = gq_htab_iter_next(&i))
        free(GQ_HTAB_ENTRY(n, qitem, node));
    gq_htab_free(&q->items);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

static qitem *find(ctl_workqueue *q, const char *key)
{
    return GQ_HTAB_FIND_NAMED(&q->items, qitem, node, key, key);
}

static qitem *find_or_new(ctl_workqueue *q, const char *key)
{
    qitem *it = find(q, key);
    return it ? it : GQ_HTAB_ADD_NAMED(&q->items, qitem, node, key, key, NULL);
}

/* Forget items that carry no state any more. */
static void maybe_gc(ctl_workqueue *q, qitem *it)
{
    if (it->queued || it->processing || it->delayed || it->failures)
        return;
    gq_htab_remove(&q->items, &it->node);
    free(it);
}

/* Ready now (a pending delayed add stays: it asks for a run at or after
 * its time, which a run now does not give). */
static void push_ready(ctl_workqueue *q, qitem *it)
{
    if (it->processing) {
        it->dirty = true;
        return;
    }
    if (it->queued)
        return;
    it->queued = true;
    gq_fifo_push(&q->ready, &it->ready);
    q->n_ready++;
    pthread_cond_signal(&q->cv);
}

gq_code ctl_workqueue_add(ctl_workqueue *q, const char *key)
{
    pthread_mutex_lock(&q->mu);
    qitem *it = q->shutdown ? NULL : find_or_new(q, key);
    if (it)
        push_ready(q, it);
    bool down = q->shutdown;
    pthread_mutex_unlock(&q->mu);
    return it || down ? GQ_OK : GQ_ENOMEM;
}

gq_code ctl_workqueue_add_after(ctl_workqueue *q, const char *key, long delay_ms)
{
    if (delay_ms <= 0)
        return ctl_workqueue_add(q, key);
    pthread_mutex_lock(&q->mu);
    qitem *it = q->shutdown ? NULL : find_or_new(q, key);
    bool down = q->shutdown;
    if (it) {
        int64_t due = now_ms(q) + delay_ms;
        if (!it->delayed) {
            it->delayed = true;
            it->due = due;
            q->n_delayed++;
            pthread_cond_broadcast(&q->cv); /* a waiter may need to wake earlier */
        } else if (due < it->due) {
            it->due = due;
            pthread_cond_broadcast(&q->cv);
        }
    }
    pthread_mutex_unlock(&q->mu);
    return it || down ? GQ_OK : GQ_ENOMEM;
}

gq_code ctl_workqueue_add_rate_limited(ctl_workqueue *q, const char *key, long *delay_ms)
{
    long d;
    pthread_mutex_lock(&q->mu);
    qitem *it = q->shutdown ? NULL : find_or_new(q, key);
    if (!it) {
        bool down = q->shutdown;
        pthread_mutex_unlock(&q->mu);
        return down ? GQ_OK : GQ_ENOMEM;
    }
    d = q->o.backoff_min_ms;
    for (unsigned i = 0; i < it->failures && d < q->o.backoff_max_ms; i++)
        d *= 2;
    if (d > q->o.backoff_max_ms)
        d = q->o.backoff_max_ms;
    if (it->failures < 64)
        it->failures++;
    pthread_mutex_unlock(&q->mu);
    if (delay_ms)
        *delay_ms = d;
    return ctl_workqueue_add_after(q, key, d);
}

void ctl_workqueue_forget(ctl_workqueue *q, const char *key)
{
    pthread_mutex_lock(&q->mu);
    qitem *it = find(q, key);
    if (it) {
        it->failures = 0;
        maybe_gc(q, it);
    }
    pthread_mutex_unlock(&q->mu);
}

unsigned ctl_workqueue_failures(ctl_workqueue *q, const char *key)
{
    pthread_mutex_lock(&q->mu);
    qitem *it = find(q, key);
    unsigned f = it ? it->failures : 0;
    pthread_mutex_unlock(&q->mu);
    return f;
}

/* Move due delayed items to the ready FIFO; return the earliest remaining
 * due time, or INT64_MAX. Lock held. */
static int64_t promote_due(ctl_workqueue *q)
{
    int64_t next = INT64_MAX;
    if (!q->n_delayed)
        return next;
    int64_t now = now_ms(q);
    gq_htab_iter i;
    for (gq_hnode *n = gq_htab_iter_first(&i, &q->items); n; n = gq_htab_iter_next(&i)) {
        qitem *it = GQ_HTAB_ENTRY(n, qitem, node);
        if (!it->delayed)
            continue;
        if (it->due <= now) {
            it->delayed = false;
            q->n_delayed--;
            push_ready(q, it);
        } else if (it->due < next)
            next = it->due;
    }
    return next;
}

gq_code ctl_workqueue_get(ctl_workqueue *q, long wait_ms, char **key)
{
    gq_code rc = GQ_OK;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t deadline =
        wait_ms < 0 ? INT64_MAX : (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + wait_ms;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        int64_t next_due = promote_due(q);
        if (q->shutdown) {
            rc = GQ_ENOTFOUND;
            break;
        }
        if (q->ready.head) {
            qitem *it = GQ_FIFO_ENTRY(q->ready.head, qitem, ready);
            char *k = strdup(it->key);
            if (!k) {
                rc = GQ_ENOMEM;
                break;
            }
            gq_fifo_pop(&q->ready);
            q->n_ready--;
            it->queued = false;
            it->processing = true;
            *key = k;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t mono = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        if (mono >= deadline) {
            rc = GQ_ETIMEOUT;
            break;
        }
        /* Wake at the deadline or when the next delayed item is due (its due
         * time is on the queue's clock; converted as a delay from now). */
        int64_t wake = deadline;
        if (next_due != INT64_MAX) {
            int64_t in = next_due - now_ms(q);
            if (in < 0)
                in = 0;
            if (mono + in < wake)
                wake = mono + in;
        }
        if (wake - mono > 1000)
            wake = mono + 1000; /* re-check now and then: clocks may differ */
        struct timespec w = {.tv_sec = wake / 1000, .tv_nsec = (wake % 1000) * 1000000};
        int e = pthread_cond_timedwait(&q->cv, &q->mu, &w);
        (void)e;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void ctl_workqueue_done(ctl_workqueue *q, const char *key)
{
    pthread_mutex_lock(&q->mu);
    qitem *it = find(q, key);
    if (it && it->processing) {
        it->processing = false;
        if (it->dirty) {
            it->dirty = false;
            push_ready(q, it);
        } else {
            maybe_gc(q, it);
        }
    }
    pthread_mutex_unlock(&q->mu);
}

/* One of q's counts, read under its lock. */
static size_t locked_count(ctl_workqueue *q, const size_t *count)
{
    pthread_mutex_lock(&q->mu);
    size_t n = *count;
    pthread_mutex_unlock(&q->mu);
    return n;
}

size_t ctl_workqueue_len(ctl_workqueue *q)
{
    return locked_count(q, &q->n_ready);
}

size_t ctl_workqueue_delayed(ctl_workqueue *q)
{
    return locked_count(q, &q->n_delayed);
}

void ctl_workqueue_shutdown(ctl_workqueue *q)
{
    pthread_mutex_lock(&q->mu);
    q->shutdown = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}
