#include "webhook/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/gq_log.h"
#include "common/jsonutil.h"
#include "common/json_member.h"

struct wh_audit {
    pthread_mutex_t lock; /* the file: fd, size, rotation, failing */
    char *path;           /* NULL = stderr */
    int fd;
    int64_t size;     /* bytes in the current file */
    int64_t max_size; /* 0 = never rotate */
    int max_files;
    volatile sig_atomic_t reopen;
    atomic_uint_fast64_t records;
    atomic_uint_fast64_t errors;
    bool failing; /* inside a burst of errors: log once */

    /* The writer thread (wh_audit_start_writer) and its queue of whole
     * lines, each ending in '\n'. */
    bool async;
    pthread_t writer;
    pthread_mutex_t qlock;
    pthread_cond_t qdata;  /* lines queued, or stop */
    pthread_cond_t qspace; /* lines taken (space, flush progress) */
    char *q;
    size_t qlen, qcap, qn; /* bytes, capacity, lines */
    uint64_t queued, done; /* lines ever queued / written or failed */
    bool stop;
    bool idle;        /* the writer waits for a first line: wake it */
    unsigned flushes; /* callers waiting in wh_audit_flush: write at once */
};

/* How long the writer lets records gather after the first one: one write(2)
 * and one wake-up per window instead of per record. */
#define WH_AUDIT_BATCH_MS 5
/* Queued bytes that wake the writer before the window ends. */
#define WH_AUDIT_HIGH_WATER ((size_t)1 << 20)

static gq_code audit_open_file(wh_audit *a, gq_err *err)
{
    int fd = open(a->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    if (fd < 0)
        return gq_err_set(err, GQ_EIO, "audit log %s: %s", a->path, strerror(errno));
    struct stat st;
    a->size = fstat(fd, &st) == 0 ? (int64_t)st.st_size : 0;
    a->fd = fd;
    return GQ_OK;
}

gq_code wh_audit_open(const gq_audit_config *cfg, wh_audit **out, gq_err *err)
{
    wh_audit *a = calloc(1, sizeof(*a));
    if (!a)
        return gq_err_set(err, GQ_ENOMEM, "audit log: out of memory");
    pthread_mutex_init(&a->lock, NULL);
    pthread_mutex_init(&a->qlock, NULL);
    pthread_cond_init(&a->qdata, NULL);
    pthread_cond_init(&a->qspace, NULL);
    a->fd = STDERR_FILENO;
    a->max_size = cfg ? cfg->max_size : 0;
    a->max_files = cfg ? cfg->max_files : 0;
    if (cfg && cfg->path && !strcmp(cfg->path, WH_AUDIT_STDOUT)) {
        a->fd = STDOUT_FILENO; /* a stream: never rotated nor reopened */
    } else if (cfg && cfg->path && cfg->path[0]) {
        a->path = strdup(cfg->path);
        if (!a->path) {
            wh_audit_close(a);
            return gq_err_set(err, GQ_ENOMEM, "audit log: out of memory");
        }
        gq_code rc = audit_open_file(a, err);
        if (rc) {
            a->fd = -1;
            wh_audit_close(a);
            return rc;
        }
    }
    *out = a;
    return GQ_OK;
}

void wh_audit_close(wh_audit *a)
{
    if (!a)
        return;
    if (a->async) {
        /* The writer drains the queue before it ends. */
        pthread_mutex_lock(&a->qlock);
        a->stop = true;
        pthread_cond_signal(&a->qdata);
        pthread_mutex_unlock(&a->qlock);
        pthread_join(a->writer, NULL);
    }
    if (a->path && a->fd >= 0)
        close(a->fd);
    free(a->q);
    free(a->path);
    pthread_cond_destroy(&a->qspace);
    pthread_cond_destroy(&a->qdata);
    pthread_mutex_destroy(&a->qlock);
    pthread_mutex_destroy(&a->lock);
    free(a);
}

void wh_audit_request_reopen(wh_audit *a)
{
    if (a)
        a->reopen = 1;
}

uint64_t wh_audit_records(const wh_audit *a)
{
    return a ? atomic_load(&a->records) : 0;
}

uint64_t wh_audit_errors(const wh_audit *a)
{
    return a ? atomic_load(&a->errors) : 0;
}

/* Shift path.(N-1) -> path.N ... path -> path.1, then open a fresh path.
 * Called with the lock held. A failed rename is logged; writing goes on into
 * whatever file can be opened, so records keep flowing. */
static gq_code audit_rotate(wh_audit *a, gq_err *err)
{
    size_t plen = strlen(a->path);
    size_t cap = plen + 16;
    char *from = malloc(cap), *to = malloc(cap);
    gq_code rc = GQ_OK;
    if (!from || !to) {
        rc = gq_err_set(err, GQ_ENOMEM, "audit log: out of memory");
        goto out;
    }
    close(a->fd);
    a->fd = -1;
    if (a->max_files <= 0) {
        /* Keep no old files: start the file over. */
        if (unlink(a->path) != 0 && errno != ENOENT)
            GQ_WARN("audit log %s: unlink: %s", a->path, strerror(errno));
    } else {
        for (int i = a->max_files - 1; i >= 0; i--) {
            if (i == 0)
                snprintf(from, cap, "%s", a->path);
            else
                snprintf(from, cap, "%s.%d", a->path, i);
            snprintf(to, cap, "%s.%d", a->path, i + 1);
            if (rename(from, to) != 0 && errno != ENOENT)
                GQ_WARN("audit log: rename %s -> %s: %s", from, to, strerror(errno));
        }
    }
    rc = audit_open_file(a, err);
out:
    free(from);
    free(to);
    return rc;
}

static size_t count_lines(const char *buf, size_t len)
{
    size_t n = 0;
    for (const char *p = buf, *e = buf + len; (p = memchr(p, '\n', (size_t)(e - p))); p++)
        n++;
    return n;
}

/* Write buf[0..len) (whole lines) at the end of the file; rc and err say
 * why not. Returns the bytes written. Called with the lock held. */
static size_t write_all(wh_audit *a, const char *buf, size_t len, gq_code *rc, gq_err *err)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(a->fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            *rc = gq_err_set(err, GQ_EIO, "audit log %s: write: %s", a->path ? a->path : "stderr",
                             w < 0 ? strerror(errno) : "short write");
            break;
        }
        off += (size_t)w;
    }
    a->size += (int64_t)off;
    return off;
}

/* How much of the whole lines buf[0..len) fits before the size limit: at
 * least one line in an empty file, 0 when the file must rotate first. */
static size_t lines_that_fit(const wh_audit *a, const char *buf, size_t len)
{
    int64_t room = a->max_size - a->size;
    size_t fit = 0;
    for (const char *p = buf; p < buf + len;) {
        const char *nl = memchr(p, '\n', (size_t)(buf + len - p));
        size_t end = (size_t)(nl - buf) + 1;
        if ((int64_t)end > room && (fit || a->size > 0))
            break;
        fit = end;
        p = nl + 1;
    }
    return fit;
}

/* Of n records, written were written; the rest are errors when rc. The
 * first failure is logged, later ones only counted until a write succeeds.
 * Called with the lock held. */
static void count_outcome(wh_audit *a, size_t n, size_t written, gq_code rc, const gq_err *err)
{
    atomic_fetch_add(&a->records, written);
    if (rc) {
        atomic_fetch_add(&a->errors, n - written);
        if (!a->failing)
            GQ_ERROR("%s (further audit write errors are counted in "
                     "gpuquota_audit_write_errors_total until one succeeds)",
                     err->msg);
        a->failing = true;
    } else {
        if (a->failing)
            GQ_INFO("audit log writable again");
        a->failing = false;
    }
}

/* Append whole lines buf[0..len) holding n records: one write(2) for as
 * many lines as fit before the size limit, rotating between lines, so
 * concurrent readers never see half lines and rotation stays exact. Every
 * record is counted as written or as an error. */
static gq_code audit_emit(wh_audit *a, const char *buf, size_t len, size_t n)
{
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = GQ_OK;
    size_t written = 0; /* records */

    pthread_mutex_lock(&a->lock);
    if (a->path && (a->reopen || a->fd < 0)) {
        a->reopen = 0;
        if (a->fd >= 0)
            close(a->fd);
        a->fd = -1;
        rc = audit_open_file(a, &err);
        if (rc)
            goto out;
    }
    while (len) {
        size_t chunk = len;
        if (a->path && a->max_size > 0) {
            size_t fit = lines_that_fit(a, buf, len);
            if (!fit) {
                if ((rc = audit_rotate(a, &err)))
                    goto out;
                continue;
            }
            chunk = fit;
        }
        size_t off = write_all(a, buf, chunk, &rc, &err);
        size_t lines = off == chunk ? count_lines(buf, chunk) : count_lines(buf, off);
        written += lines;
        if (rc)
            goto out;
        buf += chunk;
        len -= chunk;
    }
out:
    count_outcome(a, n, written, rc, &err);
    pthread_mutex_unlock(&a->lock);
    return rc;
}

/* Queue one line (the writer thread appends it). Waits while the queue is
 * full: a writer that falls behind slows callers down, it never drops. */
static gq_code audit_enqueue(wh_audit *a, const char *line, size_t len)
{
    gq_code rc = GQ_OK;
    pthread_mutex_lock(&a->qlock);
    while (a->qlen && a->qlen + len + 1 > WH_AUDIT_QUEUE_MAX)
        pthread_cond_wait(&a->qspace, &a->qlock);
    if (a->qlen + len + 1 > a->qcap) {
        size_t cap = a->qcap ? a->qcap : 64 * 1024;
        while (cap < a->qlen + len + 1)
            cap *= 2;
        char *nq = realloc(a->q, cap);
        if (!nq) {
            rc = GQ_ENOMEM;
            goto out;
        }
        a->q = nq;
        a->qcap = cap;
    }
    memcpy(a->q + a->qlen, line, len);
    a->q[a->qlen + len] = '\n';
    a->qlen += len + 1;
    a->qn++;
    a->queued++;
    if (a->idle || a->qlen >= WH_AUDIT_HIGH_WATER)
        pthread_cond_signal(&a->qdata);
out:
    pthread_mutex_unlock(&a->qlock);
    if (rc) {
        atomic_fetch_add(&a->errors, 1);
        GQ_ERROR("audit log: out of memory queueing a record (counted in "
                 "gpuquota_audit_write_errors_total)");
    }
    return rc;
}

static void *audit_writer(void *arg)
{
    wh_audit *a = arg;
    char *spare = NULL;
    size_t spare_cap = 0;
    pthread_mutex_lock(&a->qlock);
    for (;;) {
        while (!a->qlen && !a->stop) {
            a->idle = true;
            pthread_cond_wait(&a->qdata, &a->qlock);
            a->idle = false;
        }
        if (!a->qlen)
            break; /* stopping, and everything is written */
        if (!a->stop && !a->flushes && a->qlen < WH_AUDIT_HIGH_WATER) {
            /* Let the window's records gather (producers do not signal). */
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += WH_AUDIT_BATCH_MS * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            while (!a->stop && !a->flushes && a->qlen < WH_AUDIT_HIGH_WATER &&
                   pthread_cond_timedwait(&a->qdata, &a->qlock, &until) == 0)
                ;
        }
        /* Take the whole queue; callers fill the other buffer meanwhile. */
        char *batch = a->q;
        size_t len = a->qlen, n = a->qn, batch_cap = a->qcap;
        a->q = spare;
        a->qcap = spare_cap;
        a->qlen = a->qn = 0;
        pthread_cond_broadcast(&a->qspace);
        pthread_mutex_unlock(&a->qlock);
        (void)audit_emit(a, batch, len, n); /* counted and logged inside */
        spare = batch;
        spare_cap = batch_cap;
        pthread_mutex_lock(&a->qlock);
        a->done += n;
        pthread_cond_broadcast(&a->qspace);
    }
    pthread_mutex_unlock(&a->qlock);
    free(spare);
    return NULL;
}

/* One record, synchronously or through the writer. */
static gq_code audit_append(wh_audit *a, const char *line, size_t len)
{
    if (a->async)
        return audit_enqueue(a, line, len);
    char stackbuf[4096];
    char *buf = len + 1 <= sizeof(stackbuf) ? stackbuf : malloc(len + 1);
    if (!buf) {
        atomic_fetch_add(&a->errors, 1);
        GQ_ERROR("audit log: out of memory (counted in gpuquota_audit_write_errors_total)");
        return GQ_ENOMEM;
    }
    memcpy(buf, line, len);
    buf[len] = '\n';
    gq_code rc = audit_emit(a, buf, len + 1, 1);
    if (buf != stackbuf)
        free(buf);
    return rc;
}

gq_code wh_audit_start_writer(wh_audit *a)
{
    if (!a || a->async)
        return GQ_OK;
    a->stop = false;
    if (pthread_create(&a->writer, NULL, audit_writer, a))
        return GQ_ENOMEM;
    a->async = true;
    return GQ_OK;
}

void wh_audit_flush(wh_audit *a)
{
    if (!a || !a->async)
        return;
    pthread_mutex_lock(&a->qlock);
    uint64_t target = a->queued;
    a->flushes++;
    pthread_cond_signal(&a->qdata);
    while (a->done < target)
        pthread_cond_wait(&a->qspace, &a->qlock);
    a->flushes--;
    pthread_mutex_unlock(&a->qlock);
}

gq_code wh_audit_write_line(wh_audit *a, const char *line, size_t len)
{
    if (!a)
        return GQ_OK;
    if (memchr(line, '\n', len))
        return GQ_EINVAL;
    return audit_append(a, line, len);
}

void wh_audit_record_init(wh_audit_record *rec, const wh_review_request *req, const char *webhook)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(rec, 0, sizeof(*rec));
    rec->time_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    rec->uid = req->uid;
    rec->webhook = webhook;
    rec->operation = wh_operation_name(req->operation);
    rec->namespace_ = req->namespace[0] ? req->namespace : NULL;
    /* DELETE carries the object in oldObject. */
    json_object *obj = req->object ? req->object : req->old_object;
    rec->name = req->name[0] ? req->name : gq_json_meta_string(obj, "name");
    if (!rec->name)
        rec->name = gq_json_meta_string(obj, "generateName");
    rec->user = req->username;
    rec->dry_run = req->dry_run;
}

gq_code wh_audit_write(wh_audit *a, const wh_audit_record *rec)
{
    if (!a)
        return GQ_OK;
    char *line = NULL;
    size_t len = 0;
    gq_code rc = gq_audit_record_format(rec, &line, &len);
    if (rc) {
        atomic_fetch_add(&a->errors, 1);
        GQ_ERROR("audit record for %s not written: %s", rec->uid ? rec->uid : "?", gq_strerror(rc));
        return rc;
    }
    rc = audit_append(a, line, len);
    free(line);
    return rc;
}
