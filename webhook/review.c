#include "webhook/review.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "quota/podcost.h"
#include "common/heap.h"
#include "common/json_member.h"
#include "common/buf.h"
#include "common/jsonutil.h"

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

/* request.kind and request.resource: what is being admitted. */
static gq_code decode_kind(json_object *req, wh_review_request *r, gq_err *err)
{
    gq_code rc;
    json_object *kind = NULL, *res = NULL;
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
    return GQ_OK;
}

/* request.operation, one of wh_op_names. */
static gq_code decode_operation(json_object *req, wh_review_request *r, gq_err *err)
{
    const char *op = NULL;
    gq_code rc = get_str(req, "operation", "request.", &op, err);
    if (rc)
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
    return GQ_OK;
}

/* request.userInfo: who asks, and their groups. */
static gq_code decode_user(json_object *req, wh_review_request *r, gq_err *err)
{
    gq_code rc;
    json_object *user = NULL, *v = NULL;
    if ((rc = get_obj(req, "userInfo", "request.", &user, err)) ||
        (rc = get_str(user, "username", "request.userInfo.", &r->username, err)))
        return rc;
    if (!user || !json_object_object_get_ex(user, "groups", &v) || !v)
        return GQ_OK;
    if (!json_object_is_type(v, json_type_array))
        return gq_err_set(err, GQ_EINVAL, "request.userInfo.groups must be an array");
    size_t n = json_object_array_length(v);
    if (n) {
        r->groups = calloc(n, sizeof(*r->groups));
        if (!r->groups)
            return gq_err_oom(err);
    }
    for (size_t k = 0; k < n; k++) {
        json_object *g = json_object_array_get_idx(v, k);
        if (!json_object_is_type(g, json_type_string))
            return gq_err_set(err, GQ_EINVAL, "request.userInfo.groups[%zu] must be a string", k);
        r->groups[k] = json_object_get_string(g);
    }
    r->n_groups = n;
    return GQ_OK;
}

static gq_code decode_request(json_object *req, wh_review_request *r, gq_err *err)
{
    gq_code rc;
    json_object *v = NULL;

    if ((rc = get_str(req, "uid", "request.", &r->uid, err)))
        return rc;
    if (!r->uid[0])
        return gq_err_set(err, GQ_EINVAL, "request.uid is missing or empty");
    if (strlen(r->uid) > WH_UID_MAX)
        return gq_err_set(err, GQ_EINVAL, "request.uid is longer than %d bytes", WH_UID_MAX);
    if ((rc = decode_kind(req, r, err)) ||
        (rc = get_str(req, "subResource", "request.", &r->sub_resource, err)) ||
        (rc = get_str(req, "namespace", "request.", &r->namespace, err)) ||
        (rc = get_str(req, "name", "request.", &r->name, err)) ||
        (rc = decode_operation(req, r, err)) || (rc = decode_user(req, r, err)))
        return rc;
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
    json_object *root = NULL;
    gq_code rc = gq_json_parse(body, len, WH_REVIEW_MAX_DEPTH, &root, err);
    if (rc)
        return rc;
    return wh_review_decode_json(root, out, err);
}

/* What wh_review_decode_lean leaves out ("*" is object and oldObject, and
 * every container). Keep in step with what podcost, rewrite, policy and
 * /validate read (of pods and of ResourceClaims): metadata name,
 * generateName, namespace, labels, annotations, finalizers, ownerReferences, and of
 * managedFields only which keys of labels and annotations each manager set
 * (gq_pod_user_set: fieldsV1 f:metadata f:labels and f:annotations); spec
 * containers and init containers (name, resources, restartPolicy),
 * nodeSelector, affinity, schedulerName, overhead, priorityClassName,
 * activeDeadlineSeconds, resourceClaims; status. Every object left out is
 * a json-c object, hash table and key copies not built and not freed. */
#define WH_UNREAD_CONTAINER(list)                                                                  \
    "request/*/spec/" list "/*/env", "request/*/spec/" list "/*/envFrom",                          \
        "request/*/spec/" list "/*/volumeMounts", "request/*/spec/" list "/*/volumeDevices",       \
        "request/*/spec/" list "/*/ports", "request/*/spec/" list "/*/livenessProbe",              \
        "request/*/spec/" list "/*/readinessProbe", "request/*/spec/" list "/*/startupProbe",      \
        "request/*/spec/" list "/*/lifecycle", "request/*/spec/" list "/*/command",                \
        "request/*/spec/" list "/*/args", "request/*/spec/" list "/*/securityContext"
#define WH_UNREAD_MANAGED(what) "request/*/metadata/managedFields/*/" what
static const char *const wh_unread[] = {
    WH_UNREAD_MANAGED("fieldsV1/f:spec"),
    WH_UNREAD_MANAGED("fieldsV1/f:status"),
    WH_UNREAD_MANAGED("fieldsV1/f:metadata/f:finalizers"),
    WH_UNREAD_MANAGED("fieldsV1/f:metadata/f:ownerReferences"),
    WH_UNREAD_MANAGED("fieldsV1/f:metadata/f:generateName"),
    WH_UNREAD_MANAGED("manager"),
    WH_UNREAD_MANAGED("operation"),
    WH_UNREAD_MANAGED("apiVersion"),
    WH_UNREAD_MANAGED("time"),
    WH_UNREAD_MANAGED("fieldsType"),
    "request/*/spec/securityContext",
    "request/*/spec/volumes",
    "request/*/spec/tolerations",
    "request/*/spec/topologySpreadConstraints",
    "request/*/spec/ephemeralContainers",
    WH_UNREAD_CONTAINER("containers"),
    WH_UNREAD_CONTAINER("initContainers"),
    "request/userInfo/extra",
    "request/requestKind",
    "request/requestResource",
    "request/options",
};

/* A review whose trees held this much gives the heap back when it goes: a
 * burst of them would otherwise stay resident (gq_heap_trim costs about a
 * millisecond; a pod's review is a few tens of kB). */
#define WH_REVIEW_TRIM_AT ((size_t)1 << 20)

/* Whether map (an object, or anything else: false) has a key starting with
 * one of the n prefixes. */
static bool has_key_prefixed(json_object *map, const char *const *prefixes, size_t n)
{
    if (!map || !json_object_is_type(map, json_type_object))
        return false;
    json_object_object_foreach(map, key, val)
    {
        (void)val;
        for (size_t p = 0; p < n; p++)
            if (!strncmp(key, prefixes[p], strlen(prefixes[p])))
                return true;
    }
    return false;
}

/* Whether a decision may copy pod: it carries what makes gpuquota decide
 * it (the matchConditions of deploy/webhooks.yaml, widened): a resource of
 * a GPU backend in a container, a gpuquota.io/ label or annotation (a
 * choice of models, a record) or a KAI one, a DRA claim. A pod without any
 * is passed untouched, whatever its size. */
static bool gpu_marked(json_object *pod)
{
    static const char *const resources[] = {"nvidia.com/", "aliyun.com/", "volcano.sh/",
                                            "gpuquota.io/"};
    static const char *const keys[] = {"gpuquota.io/", GQ_ANN_KAI_FRACTION, GQ_ANN_KAI_MEMORY};
    if (!pod)
        return false;
    json_object *spec = gq_json_member(pod, "spec"),
                *claims = gq_json_member(spec, "resourceClaims");
    if (claims && json_object_is_type(claims, json_type_array) && json_object_array_length(claims))
        return true;
    if (has_key_prefixed(gq_json_meta_object(pod, "annotations"), keys, 3) ||
        has_key_prefixed(gq_json_meta_object(pod, "labels"), keys, 1))
        return true;
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        json_object *arr = gq_json_member(spec, lists[l]);
        size_t n =
            arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
        for (size_t i = 0; i < n; i++) {
            json_object *res = gq_json_member(json_object_array_get_idx(arr, i), "resources");
            if (has_key_prefixed(gq_json_member(res, "limits"), resources, 4) ||
                has_key_prefixed(gq_json_member(res, "requests"), resources, 4))
                return true;
        }
    }
    return false;
}

/* The copies of the object that the decision of a GPU pod may hold at once
 * (WH_REVIEW_TREES), taken from the budget beside its tree: GQ_ELIMIT when
 * they alone would pass the one review's cap, GQ_EBUSY when the budget has
 * no room for them now. */
static gq_code hold_copies(wh_review_request *r, const wh_review_limits *lim, gq_err *err)
{
    size_t tree = r->charged, copies = tree * (WH_REVIEW_TREES - 1);
    if (lim->max_tree && tree > lim->max_tree / WH_REVIEW_TREES)
        return gq_err_set(err, GQ_ELIMIT,
                          "the JSON decodes to more than %zu bytes of objects, too many to "
                          "decide a GPU pod with its copies",
                          lim->max_tree / WH_REVIEW_TREES);
    if (!gq_json_budget_take(lim->budget, copies))
        return gq_err_set(err, GQ_EBUSY,
                          "decoded requests in flight would hold more than %zu bytes; retry",
                          lim->budget->cap);
    r->charged += copies;
    return GQ_OK;
}

gq_code wh_review_decode_lean(const char *body, size_t len, wh_review_request *out, gq_err *err)
{
    wh_review_limits none = {NULL, 0};
    return wh_review_decode_within(body, len, &none, out, err);
}

gq_code wh_review_decode_within(const char *body, size_t len, const wh_review_limits *lim,
                                wh_review_request *out, gq_err *err)
{
    json_object *root = NULL;
    size_t charged = 0;
    gq_json_opts o = {.max_depth = WH_REVIEW_MAX_DEPTH,
                      .skip = wh_unread,
                      .n_skip = sizeof(wh_unread) / sizeof(wh_unread[0]),
                      .max_tree = lim->max_tree,
                      .budget = lim->budget};
    gq_code rc = gq_json_parse_with(body, len, &o, &root, &charged, err);
    if (rc == GQ_ELIMIT || rc == GQ_EBUSY)
        gq_heap_trim(); /* a large tree, or one among large trees, was freed */
    if (rc)
        return rc;
    if ((rc = wh_review_decode_json(root, out, err))) {
        gq_json_budget_return(lim->budget, charged);
        return rc;
    }
    out->budget = lim->budget;
    out->charged = charged;
    if (lim->budget && (gpu_marked(out->object) || gpu_marked(out->old_object)) &&
        (rc = hold_copies(out, lim, err))) {
        wh_review_request_dispose(out);
        return rc;
    }
    return GQ_OK;
}

/* The denial of a review too large to decide, from its text without the
 * objects (a few kB of tree at most). */
static gq_code deny_too_large(const char *body, size_t len, const char *msg, char **text,
                              size_t *text_len, gq_err *err)
{
    static const char *const objects[] = {"request/object", "request/oldObject"};
    json_object *root = NULL;
    size_t charged = 0;
    wh_review_request rq;
    wh_review_response rs;
    gq_json_opts o = {.max_depth = WH_REVIEW_MAX_DEPTH,
                      .skip = objects,
                      .n_skip = 2,
                      .max_tree = (size_t)256 * 1024};
    gq_code rc = gq_json_parse_with(body, len, &o, &root, &charged, err);
    if (rc || (rc = wh_review_decode_json(root, &rq, err)))
        return rc;
    char why[GQ_ERR_MSG_MAX + 96];
    snprintf(why, sizeof(why), "gpuquota cannot decide this %s: %s", rq.kind, msg);
    if (!(rc = wh_review_response_init(&rs, rq.version, rq.uid))) {
        if (!(rc = wh_review_response_deny(&rs, 403, "Forbidden", why)))
            rc = wh_review_encode(&rs, text, text_len);
        wh_review_response_dispose(&rs);
    }
    wh_review_request_dispose(&rq);
    return rc == GQ_ENOMEM ? gq_err_oom(err) : rc;
}

void wh_review_answer_undecoded(const http_request *req, gq_code rc, const gq_err *err,
                                http_response *resp)
{
    const char *msg = err->msg[0] ? err->msg : gq_strerror(rc);
    char *text = NULL;
    size_t len = 0;
    gq_err e2;
    gq_err_clear(&e2);
    if (rc == GQ_ELIMIT && !deny_too_large(req->body, req->body_len, msg, &text, &len, &e2)) {
        http_response_take_body(resp, 200, "application/json", text, len);
        return;
    }
    http_response_error(resp, rc == GQ_ENOMEM ? 500 : rc == GQ_EBUSY ? 503 : 400, "%s", msg);
    if (rc == GQ_EBUSY && http_response_add_header(resp, "Retry-After", "1"))
        return; /* cannot happen: the error reply has no headers yet */
}

gq_code wh_review_decode_json(json_object *root, wh_review_request *out, gq_err *err)
{
    gq_code rc;
    wh_review_request r;
    memset(&r, 0, sizeof(r));
    const char *api = NULL, *kind = NULL;
    json_object *req = NULL;

    r.root = root;
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

/* {"group":"","version":"v1",key:value} */
static json_object *core_v1(const char *key, const char *value)
{
    json_object *o = json_object_new_object();
    if (!o || put(o, "group", json_object_new_string("")) ||
        put(o, "version", json_object_new_string("v1")) ||
        put(o, key, json_object_new_string(value))) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

/* {".": {}, "f:KEY": {}, ...} for every key of map (an object). */
static json_object *owned_keys(json_object *map)
{
    json_object *o = json_object_new_object();
    if (!o || put(o, ".", json_object_new_object()))
        goto oom;
    json_object_object_foreach(map, key, val)
    {
        (void)val;
        size_t n = strlen(key) + 3;
        char *f = malloc(n);
        if (!f)
            goto oom;
        snprintf(f, n, "f:%s", key);
        gq_code rc = put(o, f, json_object_new_object());
        free(f);
        if (rc)
            goto oom;
    }
    return o;
oom:
    json_object_put(o);
    return NULL;
}

gq_code wh_pod_record_author(json_object *pod, const char *manager, gq_err *err)
{
    static const char *const maps[] = {"labels", "annotations"};
    json_object *meta = NULL, *fmeta = NULL, *entry = NULL, *list = NULL, *fields = NULL;
    if (!json_object_object_get_ex(pod, "metadata", &meta) ||
        !json_object_is_type(meta, json_type_object))
        return GQ_OK;
    if (!(fmeta = json_object_new_object()))
        goto oom;
    for (size_t i = 0; i < 2; i++) {
        json_object *map = NULL;
        char f[16];
        if (!json_object_object_get_ex(meta, maps[i], &map) ||
            !json_object_is_type(map, json_type_object))
            continue;
        snprintf(f, sizeof(f), "f:%s", maps[i]);
        if (put(fmeta, f, owned_keys(map)))
            goto oom;
    }
    if (!(fields = json_object_new_object()))
        goto oom;
    gq_code rc = put(fields, "f:metadata", fmeta);
    fmeta = NULL;
    if (rc)
        goto oom;
    if (!(entry = json_object_new_object()) ||
        put(entry, "manager", json_object_new_string(manager)) ||
        put(entry, "operation", json_object_new_string("Update")) ||
        put(entry, "apiVersion", json_object_new_string("v1")) ||
        put(entry, "fieldsType", json_object_new_string("FieldsV1")))
        goto oom;
    if (put(entry, "fieldsV1", fields)) {
        fields = NULL;
        goto oom;
    }
    fields = NULL;
    if (!(list = json_object_new_array()) || json_object_array_add(list, entry))
        goto oom;
    entry = NULL;
    if (put(meta, "managedFields", list)) {
        list = NULL;
        goto oom;
    }
    return GQ_OK;
oom:
    json_object_put(list);
    json_object_put(entry);
    json_object_put(fields);
    json_object_put(fmeta);
    return gq_err_oom(err);
}

static json_object *user_info(const char *username)
{
    json_object *user = json_object_new_object();
    if (!user || put(user, "username", json_object_new_string(username ? username : ""))) {
        json_object_put(user);
        return NULL;
    }
    return user;
}

static json_object *create_options(void)
{
    json_object *opts = json_object_new_object();
    if (!opts || put(opts, "apiVersion", json_object_new_string("meta.k8s.io/v1")) ||
        put(opts, "kind", json_object_new_string("CreateOptions"))) {
        json_object_put(opts);
        return NULL;
    }
    return opts;
}

/* The request of a pod CREATE review; NULL when out of memory. put takes
 * each member, so every object has one owner at each step. */
static json_object *create_request(json_object *pod, const char *ns, const char *name,
                                   const char *uid, const char *username)
{
    json_object *req = json_object_new_object();
    if (!req || put(req, "uid", json_object_new_string(uid)) ||
        put(req, "kind", core_v1("kind", "Pod")) ||
        put(req, "resource", core_v1("resource", "pods")) ||
        put(req, "requestKind", core_v1("kind", "Pod")) ||
        put(req, "requestResource", core_v1("resource", "pods")) ||
        put(req, "name", json_object_new_string(name)) ||
        put(req, "namespace", json_object_new_string(ns)) ||
        put(req, "operation", json_object_new_string("CREATE")) ||
        put(req, "userInfo", user_info(username)) || put(req, "object", json_object_get(pod)) ||
        json_object_object_add(req, "oldObject", NULL) ||
        put(req, "dryRun", json_object_new_boolean(0)) || put(req, "options", create_options())) {
        json_object_put(req);
        return NULL;
    }
    return req;
}

gq_code wh_review_for_pod_create(json_object *pod, const char *ns, const char *uid,
                                 const char *username, json_object **out, gq_err *err)
{
    json_object *meta = NULL, *v = NULL;
    const char *name = "";
    if (!json_object_is_type(pod, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "a Pod must be a JSON object");
    if (!uid || !uid[0])
        return gq_err_set(err, GQ_EINVAL, "request.uid must not be empty");
    json_object_object_get_ex(pod, "metadata", &meta);
    if ((!ns || !ns[0]) && json_object_object_get_ex(meta, "namespace", &v) &&
        json_object_is_type(v, json_type_string))
        ns = json_object_get_string(v);
    if (!ns || !ns[0])
        ns = "default";
    if (json_object_object_get_ex(meta, "name", &v) && json_object_is_type(v, json_type_string))
        name = json_object_get_string(v);

    json_object *root = json_object_new_object();
    if (!root || put(root, "apiVersion", json_object_new_string(WH_API_V1)) ||
        put(root, "kind", json_object_new_string("AdmissionReview")) ||
        put(root, "request", create_request(pod, ns, name, uid, username))) {
        json_object_put(root);
        return gq_err_oom(err);
    }
    *out = root;
    return GQ_OK;
}

void wh_review_request_dispose(wh_review_request *r)
{
    if (!r)
        return;
    free(r->groups);
    json_object_put(r->root);
    gq_json_budget_return(r->budget, r->charged);
    if (r->charged >= WH_REVIEW_TRIM_AT)
        gq_heap_trim();
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

static void encode_warnings(const wh_review_response *r, gq_buf *b)
{
    if (!r->n_warnings)
        return;
    gq_buf_puts(b, ",\"warnings\":[");
    for (size_t i = 0; i < r->n_warnings; i++) {
        const char *text = r->warnings[i];
        char more[WH_WARNING_MAX + 1];
        if (r->dropped_warnings && i + 1 == r->n_warnings) {
            /* The last slot says what was left out instead of one more. */
            snprintf(more, sizeof(more), "%zu more warnings not shown", r->dropped_warnings + 1);
            text = more;
        }
        if (i)
            gq_buf_add(b, ",", 1);
        gq_buf_json_string(b, text);
    }
    gq_buf_add(b, "]", 1);
}

gq_code wh_review_encode(const wh_review_response *r, char **out, size_t *out_len)
{
    /* Written directly, not through a json-c tree: this is every /mutate
     * answer. The bytes are the ones json-c would write (gq_buf). */
    gq_buf b;
    char *b64 = NULL;
    size_t n = 0;
    gq_buf_init(&b, WH_RESPONSE_MAX);
    gq_buf_puts(&b, r->version == WH_REVIEW_V1BETA1
                        ? "{\"apiVersion\":\"" WH_API_V1BETA1 "\",\"kind\":\"AdmissionReview\","
                        : "{\"apiVersion\":\"" WH_API_V1 "\",\"kind\":\"AdmissionReview\",");
    gq_buf_puts(&b, "\"response\":{\"uid\":");
    gq_buf_json_string(&b, r->uid ? r->uid : "");
    gq_buf_puts(&b, r->allowed ? ",\"allowed\":true" : ",\"allowed\":false");
    if (!r->allowed) {
        gq_buf_printf(&b, ",\"status\":{\"code\":%d,\"reason\":", r->code);
        gq_buf_json_string(&b, r->reason ? r->reason : "");
        gq_buf_puts(&b, ",\"message\":");
        gq_buf_json_string(&b, r->message ? r->message : "");
        gq_buf_add(&b, "}", 1);
    } else if (r->patch) {
        if (gq_base64_encode(r->patch, r->patch_len, &b64, &n)) {
            gq_buf_dispose(&b);
            return GQ_ENOMEM;
        }
        gq_buf_puts(&b, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
        gq_buf_add(&b, b64, n); /* base64 needs no escaping */
        gq_buf_add(&b, "\"", 1);
        free(b64);
    }
    encode_warnings(r, &b);
    if (r->n_audit) {
        gq_buf_puts(&b, ",\"auditAnnotations\":{");
        for (size_t i = 0; i < r->n_audit; i++) {
            if (i)
                gq_buf_add(&b, ",", 1);
            gq_buf_json_string(&b, r->audit_keys[i]);
            gq_buf_add(&b, ":", 1);
            gq_buf_json_string(&b, r->audit_values[i]);
        }
        gq_buf_add(&b, "}", 1);
    }
    gq_buf_add(&b, "}}", 2);
    return gq_buf_finish(&b, out, out_len);
}

static bool is_pod(const wh_review_request *req)
{
    return !req->kind_group[0] && !strcmp(req->kind, "Pod") && !strcmp(req->resource, "pods");
}

static bool is_claim(const wh_review_request *req)
{
    return !strcmp(req->resource_group, "resource.k8s.io") &&
           !strcmp(req->resource, "resourceclaims");
}

wh_review_target wh_review_target_of(const wh_review_request *req)
{
    /* pods/status writes keep the stored spec but may change labels and
     * annotations (the pod status strategy resets only spec and owner
     * references), so they are checked as updates. */
    if (is_pod(req) && req->operation == WH_OP_CREATE && !req->sub_resource[0])
        return WH_TARGET_POD_CREATE;
    if (is_pod(req) && req->operation == WH_OP_UPDATE &&
        (!req->sub_resource[0] || !strcmp(req->sub_resource, "status")))
        return WH_TARGET_POD_UPDATE;
    if (is_claim(req) && (req->operation == WH_OP_UPDATE || req->operation == WH_OP_CREATE) &&
        !req->sub_resource[0])
        return WH_TARGET_CLAIM_WRITE;
    return WH_TARGET_OTHER;
}
