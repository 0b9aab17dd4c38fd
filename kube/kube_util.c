/* Pure and near-pure helpers: buffers, base64, URLs, Status decoding,
 * backoff, RFC 3339 times. */
#include "kube/kube_int.h"
#include "quota/crd.h"

#include "common/base64.h"
#include "common/jsonutil.h"
#include "common/rfc3339.h"
#include "common/strutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

gq_code kube_read_file(const char *path, size_t max, char **out, size_t *len, gq_err *err)
{
    gq_code rc = GQ_OK;
    gq_buf b;
    gq_buf_init(&b, max);
    FILE *f = fopen(path, "rb");
    if (!f)
        return gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno));
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        rc = gq_buf_add(&b, chunk, n);
        if (rc) {
            gq_err_set(err, rc, "%s: %s", path,
                       rc == GQ_ELIMIT ? "file larger than the limit" : "out of memory");
            goto out;
        }
    }
    if (ferror(f)) {
        rc = gq_err_set(err, GQ_EIO, "%s: read error", path);
        goto out;
    }
    rc = gq_buf_finish(&b, out, len);
    if (rc)
        gq_err_set(err, rc, "out of memory");
out:
    fclose(f);
    gq_buf_dispose(&b);
    return rc;
}

gq_code kube_base64_decode(const char *s, size_t len, unsigned char **out, size_t *outlen)
{
    /* Like Go's decoder behind kubeconfig -data fields, skip CR and LF. */
    char *clean = malloc(len + 1);
    if (!clean)
        return GQ_ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] != '\r' && s[i] != '\n')
            clean[n++] = s[i];
    gq_code rc = gq_base64_decode(clean, n, out, outlen);
    free(clean);
    return rc;
}

int64_t kube_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t kube_wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int kube_sleep_ms(long ms, const atomic_int *stop)
{
    int64_t end = kube_mono_ms() + ms;
    for (;;) {
        if (stop && atomic_load(stop))
            return 1;
        int64_t left = end - kube_mono_ms();
        if (left <= 0)
            return 0;
        if (left > 50)
            left = 50; /* poll the stop flag */
        struct timespec ts = {0, (long)left * 1000000L};
        nanosleep(&ts, NULL);
    }
}

gq_code kube_status_from_json(json_object *obj, kube_status *out)
{
    json_object *v;
    if (!obj || !json_object_is_type(obj, json_type_object))
        return GQ_EINVAL;
    if (!json_object_object_get_ex(obj, "kind", &v) || !json_object_is_type(v, json_type_string) ||
        strcmp(json_object_get_string(v), "Status") != 0)
        return GQ_EINVAL;
    kube_status st;
    memset(&st, 0, sizeof(st));
    if (json_object_object_get_ex(obj, "code", &v) && json_object_is_type(v, json_type_int)) {
        int64_t c = json_object_get_int64(v);
        st.code = c >= 0 && c <= 999 ? (int)c : 0;
    }
    if (json_object_object_get_ex(obj, "reason", &v) && json_object_is_type(v, json_type_string))
        gq_copy_trunc(st.reason, sizeof(st.reason), json_object_get_string(v));
    if (json_object_object_get_ex(obj, "message", &v) && json_object_is_type(v, json_type_string))
        gq_copy_trunc(st.message, sizeof(st.message), json_object_get_string(v));
    *out = st;
    return GQ_OK;
}

gq_code kube_status_decode(const char *body, size_t len, kube_status *out)
{
    json_object *obj = NULL;
    if (!body || gq_json_parse(body, len, GQ_JSON_DEFAULT_DEPTH, &obj, NULL) != GQ_OK)
        return GQ_EINVAL;
    gq_code rc = kube_status_from_json(obj, out);
    json_object_put(obj);
    return rc;
}

gq_code kube_http_code(long http_status, const char *reason)
{
    if (http_status >= 200 && http_status < 300)
        return GQ_OK;
    switch (http_status) {
    case 401:
        return GQ_EUNAUTHORIZED;
    case 404:
        return GQ_ENOTFOUND;
    case 409:
        return reason && !strcmp(reason, "AlreadyExists") ? GQ_EEXISTS : GQ_ECONFLICT;
    case 410:
        return GQ_EGONE;
    default:
        return GQ_EHTTP;
    }
}

static int unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

static gq_code append_escaped(gq_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
        gq_code rc = unreserved(*p) ? gq_buf_add(b, p, 1) : gq_buf_add(b, e, 3);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

gq_code kube_build_url(const char *server, const char *path, const kube_query *q, size_t nq,
                       char **out)
{
    gq_code rc;
    gq_buf b;
    gq_buf_init(&b, 1 << 20);
    rc = gq_buf_puts(&b, server);
    if (rc)
        goto out;
    rc = gq_buf_puts(&b, path);
    if (rc)
        goto out;
    int first = strchr(path, '?') == NULL;
    for (size_t i = 0; i < nq; i++) {
        if (!q[i].value || !q[i].value[0])
            continue;
        rc = gq_buf_add(&b, first ? "?" : "&", 1);
        if (!rc)
            rc = append_escaped(&b, q[i].key);
        if (!rc)
            rc = gq_buf_add(&b, "=", 1);
        if (!rc)
            rc = append_escaped(&b, q[i].value);
        if (rc)
            goto out;
        first = 0;
    }
    rc = gq_buf_finish(&b, out, NULL);
out:
    gq_buf_dispose(&b);
    return rc;
}

void kube_backoff_init(kube_backoff *b, long min_ms, long max_ms)
{
    b->min_ms = min_ms > 0 ? min_ms : 800;
    b->max_ms = max_ms > 0 ? max_ms : 30000;
    if (b->max_ms < b->min_ms)
        b->max_ms = b->min_ms;
    b->attempt = 0;
}

long kube_backoff_next(kube_backoff *b, double r01)
{
    if (r01 < 0 || r01 >= 1)
        r01 = 0;
    long base = b->min_ms;
    for (unsigned i = 0; i < b->attempt && base < b->max_ms; i++)
        base = base > b->max_ms / 2 ? b->max_ms : base * 2;
    if (b->attempt < 64)
        b->attempt++;
    long d = base + (long)(r01 * (double)(base / 4));
    if (d > b->max_ms) /* at the cap keep jitter below it, so replicas spread */
        d = b->max_ms - (long)(r01 * (double)(b->max_ms / 4));
    if (d < b->min_ms)
        d = b->min_ms;
    return d;
}

void kube_backoff_reset(kube_backoff *b)
{
    b->attempt = 0;
}

void kube_format_micro_time(int64_t unix_us, char buf[28])
{
    char tmp[GQ_RFC3339_MAX];
    gq_time_format_rfc3339_frac(unix_us, 6, tmp);
    memcpy(buf, tmp, 27);
    buf[27] = '\0';
}

gq_code kube_parse_time(const char *s, int64_t *unix_us)
{
    /* One RFC 3339 parser for the project: the core's. */
    return s ? gq_time_parse_rfc3339_us(s, unix_us, NULL) : GQ_EINVAL;
}

const char *kube_event_type_name(kube_event_type t)
{
    static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    return (unsigned)t < 5 ? names[t] : "UNKNOWN";
}
