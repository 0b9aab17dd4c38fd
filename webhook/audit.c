#include "audit.h"

#include <errno.h>
#include <fcntl.h>
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

#include "gq_log.h"

struct wh_audit {
    pthread_mutex_t lock;
    char *path; /* NULL = stderr */
    int fd;
    int64_t size;     /* bytes in the current file */
    int64_t max_size; /* 0 = never rotate */
    int max_files;
    volatile sig_atomic_t reopen;
    atomic_uint_fast64_t records;
    atomic_uint_fast64_t errors;
    bool failing; /* inside a burst of errors: log once */
};

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
    a->fd = STDERR_FILENO;
    a->max_size = cfg ? cfg->max_size : 0;
    a->max_files = cfg ? cfg->max_files : 0;
    if (cfg && cfg->path && cfg->path[0]) {
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
    if (a->path && a->fd >= 0)
        close(a->fd);
    free(a->path);
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

static gq_code audit_append(wh_audit *a, const char *line, size_t len)
{
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = GQ_OK;

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
    if (a->path && a->max_size > 0 && a->size > 0 && a->size + (int64_t)len + 1 > a->max_size) {
        rc = audit_rotate(a, &err);
        if (rc)
            goto out;
    }
    /* One write per record, newline included, so concurrent writers and
     * readers never see half lines. */
    size_t total = len + 1;
    char stackbuf[4096];
    char *buf = total <= sizeof(stackbuf) ? stackbuf : malloc(total);
    if (!buf) {
        rc = gq_err_set(&err, GQ_ENOMEM, "audit log: out of memory");
        goto out;
    }
    memcpy(buf, line, len);
    buf[len] = '\n';
    size_t off = 0;
    while (off < total) {
        ssize_t w = write(a->fd, buf + off, total - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = gq_err_set(&err, GQ_EIO, "audit log %s: write: %s", a->path ? a->path : "stderr",
                            w < 0 ? strerror(errno) : "short write");
            break;
        }
        off += (size_t)w;
    }
    if (buf != stackbuf)
        free(buf);
    a->size += (int64_t)off;
out:
    if (rc) {
        atomic_fetch_add(&a->errors, 1);
        if (!a->failing)
            GQ_ERROR("%s (further audit write errors are counted in "
                     "gpuquota_audit_write_errors_total until one succeeds)",
                     err.msg);
        a->failing = true;
    } else {
        atomic_fetch_add(&a->records, 1);
        if (a->failing)
            GQ_INFO("audit log writable again");
        a->failing = false;
    }
    pthread_mutex_unlock(&a->lock);
    return rc;
}

gq_code wh_audit_write_line(wh_audit *a, const char *line, size_t len)
{
    if (!a)
        return GQ_OK;
    if (memchr(line, '\n', len))
        return GQ_EINVAL;
    return audit_append(a, line, len);
}

static int add_str(json_object *o, const char *key, const char *val)
{
    json_object *v = val ? json_object_new_string(val) : NULL;
    if (val && !v)
        return -1;
    return json_object_object_add(o, key, v);
}

static int add_borrowed(json_object *o, const char *key, json_object *val)
{
    if (!val)
        return 0;
    return json_object_object_add(o, key, json_object_get(val));
}

gq_code wh_audit_format(const wh_audit_record *rec, char **out, size_t *out_len)
{
    char ts[40];
    time_t secs = (time_t)(rec->time_us / 1000000);
    long us = (long)(rec->time_us % 1000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);

    json_object *o = json_object_new_object();
    if (!o)
        return GQ_ENOMEM;
    int bad = 0;
    bad |= add_str(o, "time", ts);
    bad |= add_str(o, "uid", rec->uid);
    bad |= add_str(o, "webhook", rec->webhook);
    bad |= add_str(o, "operation", rec->operation);
    bad |= add_str(o, "namespace", rec->namespace_);
    bad |= add_str(o, "name", rec->name);
    bad |= add_str(o, "user", rec->user);
    bad |= json_object_object_add(o, "dryRun", json_object_new_boolean(rec->dry_run));
    bad |= add_str(o, "decision", rec->decision);
    if (rec->reason)
        bad |= add_str(o, "reason", rec->reason);
    bad |= add_borrowed(o, "request", rec->request);
    bad |= add_borrowed(o, "rewrite", rec->rewrite);
    bad |= add_borrowed(o, "charge", rec->charge);
    bad |= add_borrowed(o, "quotas", rec->quotas);
    /* Round to microseconds so the text stays short and stable. */
    bad |= json_object_object_add(
        o, "latencyMs",
        json_object_new_double((double)(int64_t)(rec->latency_ms * 1000.0) / 1000.0));
    if (bad) {
        json_object_put(o);
        return GQ_ENOMEM;
    }
    size_t len = 0;
    const char *s = json_object_to_json_string_length(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
    char *copy = s ? malloc(len + 1) : NULL;
    if (!copy) {
        json_object_put(o);
        return GQ_ENOMEM;
    }
    memcpy(copy, s, len + 1);
    json_object_put(o);
    *out = copy;
    *out_len = len;
    return GQ_OK;
}

gq_code wh_audit_write(wh_audit *a, const wh_audit_record *rec)
{
    if (!a)
        return GQ_OK;
    char *line = NULL;
    size_t len = 0;
    gq_code rc = wh_audit_format(rec, &line, &len);
    if (rc) {
        atomic_fetch_add(&a->errors, 1);
        GQ_ERROR("audit record for %s not written: %s", rec->uid ? rec->uid : "?", gq_strerror(rc));
        return rc;
    }
    rc = audit_append(a, line, len);
    free(line);
    return rc;
}
