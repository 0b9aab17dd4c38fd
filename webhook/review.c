#include "review.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "jsonutil.h"

#define WH_API_V1 "admission.k8s.io/v1"
#define WH_API_V1BETA1 "admission.k8s.io/v1beta1"

static const char *const wh_op_names[] = {
    [WH_OP_CREATE] = "CREATE",
    [WH_OP_UPDATE] = "UPDATE",
    [WH_OP_DELETE] = "DELETE",
    [WH_OP_CONNECT] = "CONNECT",
};

const char *wh_operation_name(wh_operation op)
{
    if ((unsigned)op >= sizeof(wh_op_names) / sizeof(wh_op_names[0]))
        return "";
    return wh_op_names[op];
}

/* ---- Decoding ---- */

/* Optional string member: "" when absent or null; GQ_EINVAL for another type. */
static gq_code get_str(json_object *obj, const char *key, const char *where, const char **out,
                       gq_err *err)
{
    json_object *v = NULL;
    if (!obj || !json_object_object_get_ex(obj, key, &v) || !v) {
        *out = "";
        return GQ_OK;
    }
    if (!json_object_is_type(v, json_type_string))
        return gq_err_set(err, GQ_EINVAL, "%s%s must be a string", where, key);
    *out = json_object_get_string(v);
    return GQ_OK;
}

/* Optional object member: NULL when absent or null. */
static gq_code get_obj(json_object *obj, const char *key, const char *where, json_object **out,
                       gq_err *err)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(obj, key, &v) || !v) {
        *out = NULL;
        return GQ_OK;
    }
    if (!json_object_is_type(v, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "%s%s must be an object", where, key);
    *out = v;
    return GQ_OK;
}

static gq_code decode_request(json_object *req, wh_review_request *r, gq_err *err)
{
    gq_code rc;
    json_object *kind = NULL, *res = NULL, *user = NULL, *v = NULL;
    const char *op = NULL;

    if ((rc = get_str(req, "uid", "request.", &r->uid, err)))
        return rc;
    if (!r->uid[0])
        return gq_err_set(err, GQ_EINVAL, "request.uid is missing or empty");
    if (strlen(r->uid) > WH_UID_MAX)
        return gq_err_set(err, GQ_EINVAL, "request.uid is longer than %d bytes", WH_UID_MAX);

    if ((rc = get_obj(req, "kind", "request.", &kind, err)) ||
        (rc = get_str(kind, "group", "request.kind.", &r->kind_group, err)) ||
        (rc = get_str(kind, "version", "request.kind.", &r->kind_version, err)) ||
        (rc = get_str(kind, "kind", "request.kind.", &r->kind, err)))
        return rc;
    if (!r->kind[0])
        return gq_err_set(err, GQ_EINVAL, "request.kind.kind is missing");
    if ((rc = get_obj(req, "resource", "request.", &res, err)) ||
        (rc = get_str(res, "group", "request.resource.", &r->resource_group, err)) ||
        (rc = get_str(res, "version", "request.resource.", &r->resource_version, err)) ||
        (rc = get_str(res, "resource", "request.resource.", &r->resource, err)))
        return rc;
    if (!r->resource[0])
        return gq_err_set(err, GQ_EINVAL, "request.resource.resource is missing");
    if ((rc = get_str(req, "subResource", "request.", &r->sub_resource, err)) ||
        (rc = get_str(req, "namespace", "request.", &r->namespace, err)) ||
        (rc = get_str(req, "name", "request.", &r->name, err)) ||
        (rc = get_str(req, "operation", "request.", &op, err)))
        return rc;
    size_t i;
    for (i = 0; i < sizeof(wh_op_names) / sizeof(wh_op_names[0]); i++)
        if (strcmp(op, wh_op_names[i]) == 0)
            break;
    if (i == sizeof(wh_op_names) / sizeof(wh_op_names[0]))
        return gq_err_set(err, GQ_EINVAL,
                          "request.operation \"%.32s\" is not CREATE, UPDATE, DELETE or CONNECT",
                          op);
    r->operation = (wh_operation)i;

    if ((rc = get_obj(req, "userInfo", "request.", &user, err)) ||
        (rc = get_str(user, "username", "request.userInfo.", &r->username, err)))
        return rc;
    if (user && json_object_object_get_ex(user, "groups", &v) && v) {
        if (!json_object_is_type(v, json_type_array))
            return gq_err_set(err, GQ_EINVAL, "request.userInfo.groups must be an array");
        size_t n = json_object_array_length(v);
        if (n) {
            r->groups = calloc(n, sizeof(*r->groups));
            if (!r->groups)
                return gq_err_set(err, GQ_ENOMEM, "out of memory");
        }
        for (size_t k = 0; k < n; k++) {
            json_object *g = json_object_array_get_idx(v, k);
            if (!json_object_is_type(g, json_type_string))
                return gq_err_set(err, GQ_EINVAL, "request.userInfo.groups[%zu] must be a string",
                                  k);
            r->groups[k] = json_object_get_string(g);
        }
        r->n_groups = n;
    }

    if ((rc = get_obj(req, "object", "request.", &r->object, err)) ||
        (rc = get_obj(req, "oldObject", "request.", &r->old_object, err)))
        return rc;
    if (json_object_object_get_ex(req, "dryRun", &v) && v) {
        if (!json_object_is_type(v, json_type_boolean))
            return gq_err_set(err, GQ_EINVAL, "request.dryRun must be a boolean");
        r->dry_run = json_object_get_boolean(v);
    }
    return GQ_OK;
}

gq_code wh_review_decode(const char *body, size_t len, wh_review_request *out, gq_err *err)
{
    gq_code rc;
    wh_review_request r;
    memset(&r, 0, sizeof(r));
    const char *api = NULL, *kind = NULL;
    json_object *req = NULL;

    rc = gq_json_parse(body, len, WH_REVIEW_MAX_DEPTH, &r.root, err);
    if (rc)
        return rc;
    if (!json_object_is_type(r.root, json_type_object)) {
        rc = gq_err_set(err, GQ_EINVAL, "an AdmissionReview must be a JSON object");
        goto out;
    }
    if ((rc = get_str(r.root, "apiVersion", "", &api, err)) ||
        (rc = get_str(r.root, "kind", "", &kind, err)))
        goto out;
    if (strcmp(api, WH_API_V1) == 0) {
        r.version = WH_REVIEW_V1;
    } else if (strcmp(api, WH_API_V1BETA1) == 0) {
        r.version = WH_REVIEW_V1BETA1;
    } else {
        rc = gq_err_set(err, GQ_EINVAL,
                        "apiVersion \"%.64s\" is not admission.k8s.io/v1 (or v1beta1)", api);
        goto out;
    }
    if (strcmp(kind, "AdmissionReview") != 0) {
        rc = gq_err_set(err, GQ_EINVAL, "kind \"%.64s\" is not AdmissionReview", kind);
        goto out;
    }
    if ((rc = get_obj(r.root, "request", "", &req, err)))
        goto out;
    if (!req) {
        rc = gq_err_set(err, GQ_EINVAL, "request is missing");
        goto out;
    }
    rc = decode_request(req, &r, err);
    if (rc)
        goto out;
    *out = r;
    return GQ_OK;
out:
    wh_review_request_dispose(&r);
    return rc;
}

void wh_review_request_dispose(wh_review_request *r)
{
    if (!r)
        return;
    free(r->groups);
    json_object_put(r->root);
    memset(r, 0, sizeof(*r));
}

/* ---- Text sanitising ---- */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. Rejects
 * overlong forms, surrogates and code points above U+10FFFF. */
static size_t utf8_seq_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

size_t wh_sanitize_text(const char *text, char *buf, size_t cap)
{
    size_t w = 0;
    if (!cap)
        return 0;
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    while (*s) {
        size_t n = utf8_seq_len(s);
        const char *piece = (const char *)s;
        char sub;
        if (n == 0) {
            sub = '?';
            piece = &sub;
            n = 1;
            s++;
        } else if (n == 1 && (*s < 0x20 || *s == 0x7f)) {
            sub = ' ';
            piece = &sub;
            s++;
        } else if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0) {
            /* C1 control characters (U+0080..U+009F). */
            sub = ' ';
            piece = &sub;
            s += 2;
            n = 1;
        } else {
            s += n;
        }
        if (w + n + 1 > cap)
            break;
        memcpy(buf + w, piece, n);
        w += n;
    }
    buf[w] = '\0';
    return w;
}

/* ---- Response building ---- */

gq_code wh_review_response_init(wh_review_response *r, wh_review_version version, const char *uid)
{
    wh_review_response t;
    memset(&t, 0, sizeof(t));
    t.version = version;
    t.allowed = true;
    t.uid = strdup(uid ? uid : "");
    if (!t.uid)
        return GQ_ENOMEM;
    *r = t;
    return GQ_OK;
}

void wh_review_response_dispose(wh_review_response *r)
{
    if (!r)
        return;
    free(r->uid);
    free(r->reason);
    free(r->message);
    free(r->patch);
    for (size_t i = 0; i < r->n_warnings; i++)
        free(r->warnings[i]);
    for (size_t i = 0; i < r->n_audit; i++) {
        free(r->audit_keys[i]);
        free(r->audit_values[i]);
    }
    memset(r, 0, sizeof(*r));
}

gq_code wh_review_response_deny(wh_review_response *r, int code, const char *reason,
                                const char *message)
{
    char buf[WH_MESSAGE_MAX + 1];
    wh_sanitize_text(message, buf, sizeof(buf));
    char *m = strdup(buf);
    char *rs = strdup(reason ? reason : "");
    if (!m || !rs) {
        free(m);
        free(rs);
        return GQ_ENOMEM;
    }
    free(r->message);
    free(r->reason);
    free(r->patch);
    r->message = m;
    r->reason = rs;
    r->patch = NULL;
    r->patch_len = 0;
    r->allowed = false;
    r->code = code;
    return GQ_OK;
}

gq_code wh_review_response_set_patch(wh_review_response *r, const char *json, size_t len)
{
    char *p = NULL;
    if (len > INT_MAX / 2)
        return GQ_ELIMIT; /* base64 must still fit json-c's int lengths */
    if (len && !(len == 2 && memcmp(json, "[]", 2) == 0)) {
        p = malloc(len + 1);
        if (!p)
            return GQ_ENOMEM;
        memcpy(p, json, len);
        p[len] = '\0';
    }
    free(r->patch);
    r->patch = p;
    r->patch_len = p ? len : 0;
    return GQ_OK;
}

gq_code wh_review_response_add_warning(wh_review_response *r, const char *text)
{
    char buf[WH_WARNING_MAX + 1];
    if (!wh_sanitize_text(text, buf, sizeof(buf)))
        return GQ_OK;
    if (r->n_warnings >= WH_WARNINGS_MAX) {
        r->dropped_warnings++;
        return GQ_OK;
    }
    char *w = strdup(buf);
    if (!w)
        return GQ_ENOMEM;
    r->warnings[r->n_warnings++] = w;
    return GQ_OK;
}

bool wh_audit_key_valid(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    if (n == 0 || n > WH_AUDIT_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!alnum && ((c != '-' && c != '_' && c != '.') || i == 0 || i == n - 1))
            return false;
    }
    return true;
}

gq_code wh_review_response_set_audit(wh_review_response *r, const char *key, const char *value)
{
    if (!wh_audit_key_valid(key))
        return GQ_EINVAL;
    if (!value)
        value = "";
    if (strlen(value) > WH_AUDIT_VALUE_MAX)
        return GQ_ELIMIT;
    size_t i;
    for (i = 0; i < r->n_audit; i++)
        if (strcmp(r->audit_keys[i], key) == 0)
            break;
    if (i == WH_AUDIT_MAX)
        return GQ_ELIMIT;
    char *v = strdup(value);
    if (!v)
        return GQ_ENOMEM;
    if (i < r->n_audit) {
        free(r->audit_values[i]);
        r->audit_values[i] = v;
        return GQ_OK;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return GQ_ENOMEM;
    }
    r->audit_keys[i] = k;
    r->audit_values[i] = v;
    r->n_audit++;
    return GQ_OK;
}

/* ---- Encoding ---- */

/* Add key: value (owned) to obj; GQ_ENOMEM when either failed. */
static gq_code put(json_object *obj, const char *key, json_object *value)
{
    if (!value)
        return GQ_ENOMEM;
    if (json_object_object_add(obj, key, value)) {
        json_object_put(value);
        return GQ_ENOMEM;
    }
    return GQ_OK;
}

static gq_code encode_warnings(const wh_review_response *r, json_object *resp)
{
    gq_code rc = GQ_OK;
    if (!r->n_warnings)
        return GQ_OK;
    json_object *arr = json_object_new_array();
    if ((rc = put(resp, "warnings", arr)))
        return rc;
    for (size_t i = 0; i < r->n_warnings; i++) {
        const char *text = r->warnings[i];
        char more[WH_WARNING_MAX + 1];
        if (r->dropped_warnings && i + 1 == r->n_warnings) {
            /* The last slot says what was left out instead of one more. */
            snprintf(more, sizeof(more), "%zu more warnings not shown", r->dropped_warnings + 1);
            text = more;
        }
        json_object *s = json_object_new_string(text);
        if (!s || json_object_array_add(arr, s)) {
            json_object_put(s);
            return GQ_ENOMEM;
        }
    }
    return GQ_OK;
}

gq_code wh_review_encode(const wh_review_response *r, char **out, size_t *out_len)
{
    gq_code rc = GQ_OK;
    char *b64 = NULL;
    json_object *root = json_object_new_object(), *resp = NULL, *status = NULL, *audit = NULL;
    if (!root)
        return GQ_ENOMEM;
    if ((rc = put(root, "apiVersion",
                  json_object_new_string(r->version == WH_REVIEW_V1BETA1 ? WH_API_V1BETA1
                                                                         : WH_API_V1))) ||
        (rc = put(root, "kind", json_object_new_string("AdmissionReview"))))
        goto out;
    resp = json_object_new_object();
    if ((rc = put(root, "response", resp)) ||
        (rc = put(resp, "uid", json_object_new_string(r->uid ? r->uid : ""))) ||
        (rc = put(resp, "allowed", json_object_new_boolean(r->allowed))))
        goto out;
    if (!r->allowed) {
        status = json_object_new_object();
        if ((rc = put(resp, "status", status)) ||
            (rc = put(status, "code", json_object_new_int(r->code))) ||
            (rc = put(status, "reason", json_object_new_string(r->reason ? r->reason : ""))) ||
            (rc = put(status, "message", json_object_new_string(r->message ? r->message : ""))))
            goto out;
    } else if (r->patch) {
        size_t n = 0;
        if ((rc = gq_base64_encode(r->patch, r->patch_len, &b64, &n)) ||
            (rc = put(resp, "patchType", json_object_new_string("JSONPatch"))) ||
            (rc = put(resp, "patch", json_object_new_string_len(b64, (int)n))))
            goto out;
    }
    if ((rc = encode_warnings(r, resp)))
        goto out;
    if (r->n_audit) {
        audit = json_object_new_object();
        if ((rc = put(resp, "auditAnnotations", audit)))
            goto out;
        for (size_t i = 0; i < r->n_audit; i++)
            if ((rc = put(audit, r->audit_keys[i], json_object_new_string(r->audit_values[i]))))
                goto out;
    }
    rc = gq_json_to_text(root, out, out_len);
out:
    free(b64);
    json_object_put(root);
    return rc;
}
