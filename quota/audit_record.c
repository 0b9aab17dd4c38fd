#include "quota/audit_record.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json_member.h"
#include "common/buf.h"
#include "common/jsonutil.h"
#include "common/rfc3339.h"

/* One record's text at most. Everything in it comes from one
 * AdmissionReview, whose body the server caps at 3 MiB; escaping makes a
 * byte at most six (\u00XX), so 18 MiB plus the member names bounds any
 * record the webhook can be given, and 32 MiB never fails one. */
#define AUDIT_RECORD_MAX ((size_t)32 << 20)

const char *gq_audit_decision_name(gq_audit_decision d)
{
    return d == GQ_AUDIT_DENIED ? "denied" : d == GQ_AUDIT_ERROR ? "error" : "allowed";
}

/* ,"key":"value" (null for NULL); first is the opening brace. */
static void put_str(gq_buf *b, const char *key, const char *val)
{
    gq_buf_printf(b, ",\"%s\":", key);
    gq_buf_json_string(b, val);
}

/* ,"key":{...} of a borrowed tree, left out for NULL. */
static void put_json(gq_buf *b, const char *key, json_object *val)
{
    if (!val)
        return;
    gq_buf_printf(b, ",\"%s\":", key);
    gq_buf_puts(b, gq_json_compact(val));
}

gq_code gq_audit_record_format(const gq_audit_record *rec, char **out, size_t *out_len)
{
    char ts[GQ_RFC3339_MAX];
    gq_time_format_rfc3339_frac(rec->time_us, 6, ts);

    /* Written directly (one per decision); the embedded trees through
     * json-c, so the bytes are json-c's throughout. */
    gq_buf b;
    gq_buf_init(&b, AUDIT_RECORD_MAX);
    gq_buf_puts(&b, "{\"" GQ_AUDIT_F_TIME "\":");
    gq_buf_json_string(&b, ts);
    put_str(&b, GQ_AUDIT_F_UID, rec->uid);
    put_str(&b, GQ_AUDIT_F_WEBHOOK, rec->webhook);
    put_str(&b, GQ_AUDIT_F_OPERATION, rec->operation);
    put_str(&b, GQ_AUDIT_F_NAMESPACE, rec->namespace_);
    put_str(&b, GQ_AUDIT_F_NAME, rec->name);
    put_str(&b, GQ_AUDIT_F_USER, rec->user);
    gq_buf_printf(&b, ",\"%s\":%s", GQ_AUDIT_F_DRY_RUN, rec->dry_run ? "true" : "false");
    put_str(&b, GQ_AUDIT_F_DECISION, rec->decision);
    if (rec->reason)
        put_str(&b, GQ_AUDIT_F_REASON, rec->reason);
    put_json(&b, GQ_AUDIT_F_REQUEST, rec->request);
    put_json(&b, GQ_AUDIT_F_REWRITE, rec->rewrite);
    put_json(&b, GQ_AUDIT_F_CHARGE, rec->charge);
    put_json(&b, GQ_AUDIT_F_QUOTAS, rec->quotas);
    /* Round down to microseconds, and print exactly that (json-c's %.17g
     * would turn 1.164 into 1.1639999999999999). */
    double ms = rec->latency_ms >= 0 && rec->latency_ms < 1e12 ? rec->latency_ms : 0;
    int64_t lat_us = (int64_t)(ms * 1000.0);
    gq_buf_printf(&b, ",\"%s\":%" PRId64 ".%03d}", GQ_AUDIT_F_LATENCY_MS, lat_us / 1000,
                  (int)(lat_us % 1000));
    return gq_buf_finish(&b, out, out_len);
}

void gq_audit_entry_dispose(gq_audit_entry *e)
{
    if (!e)
        return;
    free(e->time);
    free(e->uid);
    free(e->webhook);
    free(e->operation);
    free(e->namespace_);
    free(e->name);
    free(e->user);
    free(e->reason);
    json_object_put(e->request);
    json_object_put(e->rewrite);
    json_object_put(e->quotas);
    memset(e, 0, sizeof(*e));
}

/* *out = a new reference to member key (NULL when absent or null). */
static void get_tree(json_object *obj, const char *key, json_object **out)
{
    json_object *v = NULL;
    *out = json_object_object_get_ex(obj, key, &v) && v ? json_object_get(v) : NULL;
}

gq_code gq_audit_record_parse(json_object *root, gq_audit_entry *e, gq_err *err)
{
    gq_code rc;
    char *decision = NULL;
    json_object *v = NULL;
    e->source = GQ_AUDIT_SRC_GPUQUOTA;
    if ((rc = gq_json_dup_string(root, GQ_AUDIT_F_TIME, &e->time, err)) ||
        (rc = gq_json_dup_string(root, GQ_AUDIT_F_UID, &e->uid, err)) ||
        (rc = gq_json_dup_string(root, GQ_AUDIT_F_WEBHOOK, &e->webhook, err)) ||
        (rc = gq_json_dup_string(root, GQ_AUDIT_F_OPERATION, &e->operation, err)) ||
        (rc = gq_json_dup_string(root, GQ_AUDIT_F_NAMESPACE, &e->namespace_, err)) ||
        (rc = gq_json_dup_string(root, GQ_AUDIT_F_NAME, &e->name, err)) ||
        (rc = gq_json_dup_string(root, GQ_AUDIT_F_USER, &e->user, err)) ||
        (rc = gq_json_dup_string(root, GQ_AUDIT_F_REASON, &e->reason, err)) ||
        (rc = gq_json_dup_string(root, GQ_AUDIT_F_DECISION, &decision, err)))
        goto out;
    if (!decision || !strcmp(decision, "allowed"))
        e->decision = GQ_AUDIT_ALLOWED;
    else if (!strcmp(decision, "denied"))
        e->decision = GQ_AUDIT_DENIED;
    else if (!strcmp(decision, "error"))
        e->decision = GQ_AUDIT_ERROR;
    else {
        rc = gq_err_set(err, GQ_EINVAL, GQ_AUDIT_F_DECISION ": not allowed, denied or error");
        goto out;
    }
    if (json_object_object_get_ex(root, GQ_AUDIT_F_DRY_RUN, &v) && v) {
        if (!json_object_is_type(v, json_type_boolean)) {
            rc = gq_err_set(err, GQ_EINVAL, GQ_AUDIT_F_DRY_RUN ": not a boolean");
            goto out;
        }
        e->dry_run = json_object_get_boolean(v);
    }
    if (json_object_object_get_ex(root, GQ_AUDIT_F_CHARGE, &v) && v) {
        if ((rc = gq_amounts_parse(v, GQ_AUDIT_F_CHARGE, &e->charge, err)))
            goto out;
        e->has_charge = true;
    }
    if (json_object_object_get_ex(root, GQ_AUDIT_F_LATENCY_MS, &v) && v) {
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) {
            rc = gq_err_set(err, GQ_EINVAL, GQ_AUDIT_F_LATENCY_MS ": not a number");
            goto out;
        }
        e->latency_ms = json_object_get_double(v);
        e->has_latency = true;
    }
    get_tree(root, GQ_AUDIT_F_REQUEST, &e->request);
    get_tree(root, GQ_AUDIT_F_REWRITE, &e->rewrite);
    get_tree(root, GQ_AUDIT_F_QUOTAS, &e->quotas);
    int64_t t;
    if (e->time && gq_time_parse_rfc3339(e->time, &t, NULL) == GQ_OK) {
        e->t = t;
        e->has_time = true;
    }
out:
    free(decision);
    return rc;
}
