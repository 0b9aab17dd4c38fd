/* Incremental parser of a watch stream: one JSON event per line. Bytes are
 * buffered only up to the end of the current line, and that line is bounded,
 * so a hostile or broken server cannot make the client buffer without end. */
#include "kube/kube_int.h"

#include "common/jsonutil.h"

#include <stdlib.h>
#include <string.h>

struct kube_watch_parser {
    gq_buf line;
    kube_event_fn fn;
    void *ud;
    gq_code failed; /* sticky */
};

gq_code kube_watch_parser_new(size_t max_line, kube_event_fn fn, void *ud, kube_watch_parser **out)
{
    kube_watch_parser *p = calloc(1, sizeof(*p));
    if (!p)
        return GQ_ENOMEM;
    gq_buf_init(&p->line, max_line ? max_line : (size_t)16 << 20);
    p->fn = fn;
    p->ud = ud;
    *out = p;
    return GQ_OK;
}

void kube_watch_parser_free(kube_watch_parser *p)
{
    if (!p)
        return;
    gq_buf_dispose(&p->line);
    free(p);
}

static int parse_type(const char *s, kube_event_type *t)
{
    static const char *const names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    for (int i = 0; i < 5; i++) {
        if (!strcmp(s, names[i])) {
            *t = (kube_event_type)i;
            return 0;
        }
    }
    return -1;
}

static gq_code handle_line(kube_watch_parser *p, const char *s, size_t len, gq_err *err)
{
    gq_code rc = GQ_OK;
    json_object *ev = NULL, *jt, *obj;
    while (len && (s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == len)
        return GQ_OK; /* blank line (keep-alive) */
    /* No reader of a watch uses managedFields, which any user who may patch
     * an object can nest hundreds deep: pruned (checked, never built, at any
     * depth), so one such object cannot stop a watch (jsonutil.c). */
    static const char *const skip[] = {"object/metadata/managedFields"};
    rc = gq_json_parse_pruned(s + i, len - i, GQ_JSON_DEFAULT_DEPTH, skip, 1, &ev, err);
    if (rc) {
        gq_err_prefix(err, "watch event");
        return rc;
    }
    if (!ev || !json_object_is_type(ev, json_type_object)) {
        rc = gq_err_set(err, GQ_EINVAL, "watch event: not an object");
        goto out;
    }
    kube_event_type type;
    if (!json_object_object_get_ex(ev, "type", &jt) || !json_object_is_type(jt, json_type_string) ||
        parse_type(json_object_get_string(jt), &type)) {
        rc = gq_err_set(err, GQ_EINVAL, "watch event: missing or unknown \"type\"");
        goto out;
    }
    if (!json_object_object_get_ex(ev, "object", &obj) ||
        !json_object_is_type(obj, json_type_object)) {
        rc = gq_err_set(err, GQ_EINVAL, "watch event %s: missing \"object\"",
                        kube_event_type_name(type));
        goto out;
    }
    rc = p->fn(p->ud, type, obj, err);
out:
    json_object_put(ev);
    return rc;
}

gq_code kube_watch_parser_feed(kube_watch_parser *p, const char *data, size_t len, gq_err *err)
{
    if (p->failed)
        return gq_err_set(err, p->failed, "watch stream already failed");
    gq_code rc = GQ_OK;
    while (len) {
        const char *nl = memchr(data, '\n', len);
        size_t take = nl ? (size_t)(nl - data) : len;
        if (nl && p->line.len == 0) {
            /* The whole line is in this chunk: parse it in place. */
            if (take > p->line.max) {
                rc = gq_err_set(err, GQ_ELIMIT, "watch event longer than %zu bytes", p->line.max);
                goto out;
            }
            rc = handle_line(p, data, take, err);
        } else {
            rc = gq_buf_add(&p->line, data, take);
            if (rc) {
                if (rc == GQ_ELIMIT)
                    gq_err_set(err, rc, "watch event longer than %zu bytes", p->line.max);
                else
                    gq_err_set(err, rc, "out of memory");
                goto out;
            }
            if (nl) {
                rc = handle_line(p, p->line.data, p->line.len, err);
                gq_buf_reset(&p->line);
            }
        }
        if (rc)
            goto out;
        if (!nl)
            break;
        data += take + 1;
        len -= take + 1;
    }
out:
    if (rc)
        p->failed = rc;
    return rc;
}

gq_code kube_watch_parser_finish(kube_watch_parser *p, gq_err *err)
{
    if (p->failed)
        return gq_err_set(err, p->failed, "watch stream already failed");
    gq_code rc = GQ_OK;
    if (p->line.len) {
        rc = handle_line(p, p->line.data, p->line.len, err);
        gq_buf_reset(&p->line);
    }
    if (rc)
        p->failed = rc;
    return rc;
}
