/* Watch streams: line-delimited {"type":..,"object":..} events from the
 * store's history, with bookmarks, timeouts and the watch faults. */
#define _GNU_SOURCE 1 /* POLLRDHUP */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"

atomic_int g_stopping;

#define WATCH_BATCH 64

/* The events a watch has not sent yet. produce runs only once they are all
 * sent, and adds initial objects until past 64 KiB or one batch of events,
 * each an object no longer than a request. */
#define WATCH_OUT_MAX (65536 + WATCH_BATCH * SI_TEXT_MAX)

struct watch_state {
    rtype t;
    char ns[SI_NAME_MAX + 1];
    int all_ns;
    selector *ls, *fs;
    int table, table_header_sent;
    gq_buf out;
    size_t out_off;
    json_object *initial; /* synthetic ADDED objects still to send */
    size_t initial_idx;
    uint64_t last_rv;
    int bookmarks;
    double deadline, last_bookmark;
    unsigned long cut_gen;
    long cut_left;       /* events until the cut; -1: no cut */
    unsigned long epoch; /* the store's epoch at the start (a restore ends the stream) */
    int done;
    int fd;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void api_version_of(const rtype *t, char *buf, size_t n)
{
    if (*t->group)
        snprintf(buf, n, "%s/%s", t->group, t->version);
    else
        snprintf(buf, n, "%s", t->version);
}

static void emit(watch_state *w, const char *type, json_object *obj)
{
    json_object *shown = obj;
    json_object *tmp = NULL;
    if (w->t.custom && obj) {
        char av[300];
        api_version_of(&w->t, av, sizeof av);
        const char *have = si_str(obj, "apiVersion");
        if (!have || strcmp(have, av)) {
            if (json_object_deep_copy(obj, &tmp, NULL) == 0) {
                json_object_object_add(tmp, "apiVersion", json_object_new_string(av));
                shown = tmp;
            }
        }
    }
    if (w->table && strcmp(type, "ERROR") && strcmp(type, "BOOKMARK")) {
        json_object *items = json_object_new_array();
        json_object_array_add(items, json_object_get(shown));
        json_object *tab = table_build(&w->t, items, NULL, NULL, !w->table_header_sent);
        w->table_header_sent = 1;
        json_object_put(items);
        json_object_put(tmp);
        tmp = tab;
        shown = tab;
    }
    gq_buf_printf(&w->out, "{\"type\":\"%s\",\"object\":", type);
    gq_buf_puts(&w->out, si_to_json(shown));
    gq_buf_puts(&w->out, "}\n");
    json_object_put(tmp);
}

static void emit_status(watch_state *w, int code, const char *reason, const char *msg)
{
    json_object *st = api_status_obj(code, reason, msg, NULL, NULL, NULL);
    emit(w, "ERROR", st);
    json_object_put(st);
    w->done = 1;
}

/* kube-apiserver's answer to a watch from a resourceVersion it has not
 * reached (storage.NewTooLargeResourceVersionError through the cacher's
 * error watcher): an ERROR event, then the end of the stream. */
static void emit_too_large(watch_state *w, uint64_t since)
{
    char msg[200];
    snprintf(msg, sizeof msg, "Timeout: Too large resource version: %llu, current: %llu",
             (unsigned long long)since, (unsigned long long)st_rv());
    json_object *st = api_status_obj(504, "Timeout", msg, NULL, NULL, NULL);
    json_object *details = json_object_new_object(), *causes = json_object_new_array(),
                *cause = json_object_new_object();
    json_object_object_add(cause, "reason", json_object_new_string("ResourceVersionTooLarge"));
    json_object_object_add(cause, "message", json_object_new_string("Too large resource version"));
    json_object_array_add(causes, cause);
    json_object_object_add(details, "causes", causes);
    json_object_object_add(details, "retryAfterSeconds", json_object_new_int(1));
    json_object_object_add(st, "details", details);
    emit(w, "ERROR", st);
    json_object_put(st);
    w->done = 1;
}

static void emit_bookmark(watch_state *w)
{
    json_object *o = json_object_new_object();
    char av[300], rv[32];
    api_version_of(&w->t, av, sizeof av);
    json_object_object_add(o, "kind", json_object_new_string(w->t.kind));
    json_object_object_add(o, "apiVersion", json_object_new_string(av));
    json_object *md = json_object_new_object();
    snprintf(rv, sizeof rv, "%llu", (unsigned long long)w->last_rv);
    json_object_object_add(md, "resourceVersion", json_object_new_string(rv));
    json_object_object_add(o, "metadata", md);
    emit(w, "BOOKMARK", o);
    json_object_put(o);
}

static int matches(const watch_state *w, json_object *obj)
{
    return obj && sel_match_labels(w->ls, obj) && sel_match_fields(w->fs, obj);
}

static int initial_visit(void *ctx, const char *ns, const char *name, json_object *obj)
{
    watch_state *w = ctx;
    if (matches(w, obj))
        json_object_array_add(w->initial, json_object_get(obj));
    return 0;
}

static int parse_rv(const char *s, uint64_t *v)
{
    uint64_t r = 0;
    if (!s || !*s)
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || r > UINT64_MAX / 10 - 10)
            return -1;
        r = r * 10 + (uint64_t)(*p - '0');
    }
    *v = r;
    return 0;
}

void watch_set_fd(watch_state *w, int fd)
{
    if (w)
        w->fd = fd;
}

void watch_start(const sreq *rq, rtype *t, const char *ns, selector **lsel, selector **fsel,
                 int table, sresp *rs)
{
    const char *rvs = rq->query ? rq->query(rq->ctx, "resourceVersion") : NULL;
    const char *bm = rq->query ? rq->query(rq->ctx, "allowWatchBookmarks") : NULL;
    const char *to = rq->query ? rq->query(rq->ctx, "timeoutSeconds") : NULL;
    uint64_t since = 0;
    if (rvs && *rvs && strcmp(rvs, "0") && parse_rv(rvs, &since)) {
        char msg[300];
        snprintf(msg, sizeof msg, "invalid resource version: %.100s", rvs);
        api_status(rs, 400, "BadRequest", msg, NULL, NULL, NULL);
        return;
    }
    watch_state *w = calloc(1, sizeof *w);
    if (!w) {
        api_status(rs, 500, "InternalError", "out of memory", NULL, NULL, NULL);
        return;
    }
    gq_buf_init(&w->out, WATCH_OUT_MAX);
    w->t = *t;
    t->crd = NULL; /* the CRD reference moves into the watch */
    t->crd_version = NULL;
    w->all_ns = ns == NULL;
    snprintf(w->ns, sizeof w->ns, "%s", ns ? ns : "");
    w->ls = *lsel;
    w->fs = *fsel;
    *lsel = *fsel = NULL;
    w->table = table;
    w->fd = -1;
    w->bookmarks = bm && (!strcmp(bm, "true") || !strcmp(bm, "1"));
    long secs = 1800;
    if (to && *to) {
        char *end;
        long v = strtol(to, &end, 10);
        if (!*end && v > 0 && v < 86400)
            secs = v;
    }
    w->deadline = now_s() + (double)secs;
    w->last_bookmark = now_s();
    w->cut_gen = g_faults.cut_gen;
    w->cut_left = g_faults.cut_after > 0 ? g_faults.cut_after : -1;
    w->epoch = st_epoch();
    g_faults.watches_open++;
    rs->code = 200;
    rs->content_type = "application/json";
    rs->watch = w;
    if (g_faults.watch_gone > 0) {
        g_faults.watch_gone--;
        g_faults.faults_injected++;
        char msg[200];
        snprintf(msg, sizeof msg, "too old resource version: %llu (%llu)",
                 (unsigned long long)since, (unsigned long long)(st_history_start() + 1));
        emit_status(w, 410, "Expired", msg);
        return;
    }
    if (!rvs || !*rvs || !strcmp(rvs, "0")) {
        w->initial = json_object_new_array();
        st_each(w->t.skey, w->all_ns ? NULL : w->ns, initial_visit, w);
        w->last_rv = st_rv();
        return;
    }
    w->last_rv = since;
    if (since > st_rv()) {
        emit_too_large(w, since);
        return;
    }
    int expired = 0;
    const st_event *evs[1];
    st_events_since(since, evs, 0, &expired);
    if (expired) {
        char msg[200];
        snprintf(msg, sizeof msg, "too old resource version: %llu (%llu)",
                 (unsigned long long)since, (unsigned long long)(st_history_start() + 1));
        emit_status(w, 410, "Expired", msg);
    }
}

/* Count an event toward cutWatchAfter; returns 1 when the stream must end. */
static void count_event(watch_state *w)
{
    if (w->cut_left > 0 && --w->cut_left == 0)
        w->done = 1;
}

static void sync_cut(watch_state *w)
{
    if (w->cut_gen != g_faults.cut_gen) {
        w->cut_gen = g_faults.cut_gen;
        w->cut_left = g_faults.cut_after > 0 ? g_faults.cut_after : -1;
    }
}

/* Fill w->out with whatever is due; lock held. */
static void produce(watch_state *w)
{
    sync_cut(w);
    if (w->epoch != st_epoch()) {
        w->done = 1; /* the state was restored: the server "restarted" */
        return;
    }
    while (w->initial && w->initial_idx < json_object_array_length(w->initial) && !w->done) {
        emit(w, "ADDED", json_object_array_get_idx(w->initial, w->initial_idx++));
        count_event(w);
        if (w->out.len > 65536)
            return;
    }
    if (w->done)
        return;
    const st_event *evs[WATCH_BATCH];
    int expired = 0;
    size_t n = st_events_since(w->last_rv, evs, WATCH_BATCH, &expired);
    if (expired) {
        /* This watcher fell behind the history it was reading. */
        char msg[200];
        snprintf(msg, sizeof msg, "too old resource version: %llu (%llu)",
                 (unsigned long long)w->last_rv, (unsigned long long)(st_history_start() + 1));
        emit_status(w, 410, "Expired", msg);
        return;
    }
    for (size_t i = 0; i < n && !w->done; i++) {
        const st_event *e = evs[i];
        w->last_rv = e->rv;
        if (strcmp(e->skey, w->t.skey) || (!w->all_ns && strcmp(e->ns, w->ns)))
            continue;
        int now_m = matches(w, e->obj);
        if (e->type == EV_MODIFIED && (w->ls || w->fs)) {
            /* Objects entering or leaving the selection look like adds and deletes. */
            int was = matches(w, e->prev);
            if (now_m && !was)
                emit(w, "ADDED", e->obj);
            else if (!now_m && was)
                emit(w, "DELETED", e->obj);
            else if (now_m)
                emit(w, "MODIFIED", e->obj);
            else
                continue;
        } else if (now_m) {
            emit(w,
                 e->type == EV_ADDED      ? "ADDED"
                 : e->type == EV_MODIFIED ? "MODIFIED"
                                          : "DELETED",
                 e->obj);
        } else {
            continue;
        }
        count_event(w);
    }
}

static int client_gone(int fd)
{
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
        return 1;
    return 0;
}

long watch_read(watch_state *w, char *buf, size_t max)
{
    for (;;) {
        if (w->out_off < w->out.len) {
            size_t n = w->out.len - w->out_off;
            if (n > max)
                n = max;
            memcpy(buf, w->out.data + w->out_off, n);
            w->out_off += n;
            if (w->out_off == w->out.len) {
                gq_buf_reset(&w->out);
                w->out_off = 0;
            }
            return (long)n;
        }
        if (w->done || atomic_load(&g_stopping) || w->out.err)
            return -1;
        if (client_gone(w->fd))
            return -1;
        st_lock();
        produce(w);
        if (!w->out.len && !w->done) {
            double now = now_s();
            if (now >= w->deadline) {
                w->done = 1;
            } else if (w->bookmarks && now - w->last_bookmark >= 1.0) {
                /* Every event up to the current revision has been looked at. */
                const st_event *evs[1];
                int expired = 0;
                if (!st_events_since(w->last_rv, evs, 1, &expired) && !expired &&
                    w->last_rv < st_rv())
                    w->last_rv = st_rv();
                emit_bookmark(w);
                w->last_bookmark = now;
            } else {
                double wait = w->bookmarks ? 1.0 - (now - w->last_bookmark) : 1.0;
                if (wait > w->deadline - now)
                    wait = w->deadline - now;
                st_wait(wait < 0.01 ? 10 : (int)(wait * 1000));
                sync_cut(w);
            }
        }
        st_unlock();
    }
}

void watch_free(watch_state *w)
{
    if (!w)
        return;
    st_lock();
    g_faults.watches_open--;
    json_object_put(w->initial);
    rtype_dispose(&w->t);
    st_unlock();
    sel_free(w->ls);
    sel_free(w->fs);
    gq_buf_dispose(&w->out);
    free(w);
}
