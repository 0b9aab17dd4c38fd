/* Admission webhooks, called the way kube-apiserver calls them: mutating
 * configurations then validating ones, AdmissionReview v1 over HTTPS (or
 * HTTP for url clients), JSONPatch responses, failurePolicy, timeouts,
 * namespace/object selectors and reinvocation (see docs/standin.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "standin.h"

#define HOOKS_MAX 32
#define HOOK_RESPONSE_MAX (3u * 1024u * 1024u)

static const char *g_service;

void admit_set_service(const char *hostport)
{
    g_service = hostport;
}

void admit_global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void admit_global_cleanup(void)
{
    curl_global_cleanup();
}

typedef struct hook {
    json_object *wh; /* private deep copy of one webhook entry */
    int called;
} hook;

typedef struct hook_set {
    hook h[HOOKS_MAX];
    size_t n;
    const char *op;
    const char *ns;
    json_object *ns_labels; /* borrowed (lock held while collecting) */
    int overflow;
} hook_set;

/* metav1.LabelSelector -> the string syntax, so one matcher serves both. */
static int label_selector_matches(json_object *ls, json_object *labels_holder)
{
    if (!ls || !json_object_is_type(ls, json_type_object))
        return 1;
    gq_buf b;
    gq_buf_init(&b, SI_TEXT_MAX);
    json_object *ml = si_obj(ls, "matchLabels");
    if (ml && json_object_is_type(ml, json_type_object)) {
        json_object_object_foreach(ml, k, v)
        {
            const char *val = json_object_get_string(v);
            gq_buf_printf(&b, "%s%s=%s", b.len ? "," : "", k, val ? val : "");
        }
    }
    json_object *me = si_obj(ls, "matchExpressions");
    for (size_t i = 0;
         me && json_object_is_type(me, json_type_array) && i < json_object_array_length(me); i++) {
        json_object *e = json_object_array_get_idx(me, i);
        const char *key = si_str(e, "key"), *op = si_str(e, "operator");
        json_object *vals = si_obj(e, "values");
        if (!key || !op)
            continue;
        if (b.len)
            gq_buf_puts(&b, ",");
        if (!strcmp(op, "Exists")) {
            gq_buf_puts(&b, key);
        } else if (!strcmp(op, "DoesNotExist")) {
            gq_buf_printf(&b, "!%s", key);
        } else {
            gq_buf_printf(&b, "%s %s (", key, !strcmp(op, "NotIn") ? "notin" : "in");
            for (size_t j = 0; vals && json_object_is_type(vals, json_type_array) &&
                               j < json_object_array_length(vals);
                 j++) {
                const char *val = json_object_get_string(json_object_array_get_idx(vals, j));
                gq_buf_printf(&b, "%s%s", j ? "," : "", val ? val : "");
            }
            gq_buf_puts(&b, ")");
        }
    }
    char *s = si_buf_take(&b);
    selector *sel = NULL;
    gq_err err = {0};
    int match = 0;
    if (s && !sel_parse_labels(s, &sel, &err))
        match = sel_match_labels(sel, labels_holder);
    sel_free(sel);
    free(s);
    return match;
}

static int list_has(json_object *arr, const char *a, const char *b)
{
    for (size_t i = 0;
         arr && json_object_is_type(arr, json_type_array) && i < json_object_array_length(arr);
         i++) {
        const char *v = json_object_get_string(json_object_array_get_idx(arr, i));
        if (v && (!strcmp(v, a) || (b && !strcmp(v, b))))
            return 1;
    }
    return 0;
}

static int rules_match(json_object *wh, const char *op)
{
    json_object *rules = si_obj(wh, "rules");
    for (size_t i = 0; rules && json_object_is_type(rules, json_type_array) &&
                       i < json_object_array_length(rules);
         i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        const char *scope = si_str(r, "scope");
        if (list_has(si_obj(r, "operations"), op, "*") &&
            list_has(si_obj(r, "apiGroups"), "", "*") &&
            list_has(si_obj(r, "apiVersions"), "v1", "*") &&
            list_has(si_obj(r, "resources"), "pods", "*") &&
            (!scope || !strcmp(scope, "*") || !strcmp(scope, "Namespaced")))
            return 1;
    }
    return 0;
}

static int collect(void *ctx, const char *ns, const char *name, json_object *cfg)
{
    hook_set *hs = ctx;
    json_object *whs = si_obj(cfg, "webhooks");
    for (size_t i = 0;
         whs && json_object_is_type(whs, json_type_array) && i < json_object_array_length(whs);
         i++) {
        json_object *wh = json_object_array_get_idx(whs, i);
        if (!rules_match(wh, hs->op))
            continue;
        json_object *nsh = json_object_new_object();
        json_object *md = json_object_new_object();
        json_object_object_add(nsh, "metadata", md);
        if (hs->ns_labels)
            json_object_object_add(md, "labels", json_object_get(hs->ns_labels));
        int ns_ok = label_selector_matches(si_obj(wh, "namespaceSelector"), nsh);
        json_object_put(nsh);
        if (!ns_ok)
            continue;
        if (hs->n == HOOKS_MAX) {
            hs->overflow = 1;
            return 1;
        }
        json_object *copy = NULL;
        if (json_object_deep_copy(wh, &copy, NULL) == 0)
            hs->h[hs->n++].wh = copy;
    }
    return 0;
}

typedef struct body_buf {
    gq_buf b;
    int too_big;
} body_buf;

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud)
{
    body_buf *bb = ud;
    size_t n = size * nmemb;
    gq_code rc = gq_buf_add(&bb->b, p, n);
    if (rc) {
        bb->too_big = rc == GQ_ELIMIT;
        return 0;
    }
    return n;
}

/* POST the review to one webhook; fills *resp (owned) or err. */
static gq_code call_hook(json_object *wh, const char *review, json_object **resp, gq_err *err)
{
    json_object *cc = si_obj(wh, "clientConfig");
    const char *url = si_str(cc, "url");
    json_object *svc = si_obj(cc, "service");
    json_object *tos = si_obj(wh, "timeoutSeconds");
    long timeout = tos ? (long)json_object_get_int64(tos) : 10;
    if (timeout < 1 || timeout > 30)
        timeout = 10;
    char target[1024], connect_to[600];
    struct curl_slist *hdrs = NULL, *conn = NULL;
    char *ca = NULL;
    size_t ca_len = 0;
    gq_code rc = GQ_OK;
    body_buf bb = {0};
    gq_buf_init(&bb.b, HOOK_RESPONSE_MAX);
    CURL *h = curl_easy_init();
    if (!h)
        return gq_err_oom(err);
    if (url) {
        snprintf(target, sizeof target, "%s%stimeout=%lds", url, strchr(url, '?') ? "&" : "?",
                 timeout);
    } else if (svc) {
        const char *name = si_str(svc, "name"), *sns = si_str(svc, "namespace");
        const char *path = si_str(svc, "path");
        json_object *port = si_obj(svc, "port");
        long p = port ? (long)json_object_get_int64(port) : 443;
        if (!name || !sns) {
            rc = gq_err_set(err, GQ_EINVAL, "service reference needs name and namespace");
            goto out;
        }
        snprintf(target, sizeof target, "https://%s.%s.svc:%ld%s?timeout=%lds", name, sns, p,
                 path ? path : "", timeout);
        if (!g_service) {
            rc = gq_err_set(err, GQ_EIO, "service \"%s/%s\" has no endpoints (run with --service)",
                            sns, name);
            goto out;
        }
        /* resolve svc.ns.svc to the test server; SNI and Host stay svc.ns.svc */
        snprintf(connect_to, sizeof connect_to, "%s.%s.svc:%ld:%s", name, sns, p, g_service);
        conn = curl_slist_append(NULL, connect_to);
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, conn);
    } else {
        rc = gq_err_set(err, GQ_EINVAL, "webhook has neither clientConfig.url nor service");
        goto out;
    }
    const char *cab = si_str(cc, "caBundle");
    if (cab && *cab) {
        ca = si_b64_decode(cab, &ca_len);
        if (!ca) {
            rc = gq_err_set(err, GQ_ETLS, "caBundle is not valid base64");
            goto out;
        }
        struct curl_blob blob = {.data = ca, .len = ca_len, .flags = CURL_BLOB_NOCOPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    }
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Accept: application/json, */*");
    curl_easy_setopt(h, CURLOPT_URL, target);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, review);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, timeout);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &bb);
    CURLcode cr = curl_easy_perform(h);
    if (cr != CURLE_OK) {
        rc = gq_err_set(err, cr == CURLE_OPERATION_TIMEDOUT ? GQ_ETIMEOUT : GQ_EIO,
                        "failed to call webhook: Post \"%s\": %s", target,
                        bb.too_big ? "response too large" : curl_easy_strerror(cr));
        goto out;
    }
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (code != 200) {
        rc = gq_err_set(err, GQ_EHTTP,
                        "failed to call webhook: the server responded with status %ld", code);
        goto out;
    }
    json_object *r = si_parse_json(bb.b.data ? bb.b.data : "", bb.b.len, err);
    if (!r) {
        rc = gq_err_set(err, GQ_EINVAL, "received invalid webhook response: %s", err->msg);
        goto out;
    }
    *resp = r;
out:
    gq_buf_dispose(&bb.b);
    curl_slist_free_all(hdrs);
    curl_slist_free_all(conn);
    curl_easy_cleanup(h);
    free(ca);
    return rc;
}

static void add_warning(sresp *rs, const char *w)
{
    if (rs->n_warnings >= (int)(sizeof rs->warnings / sizeof rs->warnings[0]))
        return;
    gq_buf b;
    gq_buf_init(&b, SI_TEXT_MAX);
    gq_buf_puts(&b, "299 - \"");
    for (const char *p = w; *p && b.len < 1024; p++) {
        /* header-safe: no control characters, escape quotes */
        if ((unsigned char)*p < 0x20)
            continue;
        if (*p == '"' || *p == '\\')
            gq_buf_add(&b, "\\", 1);
        gq_buf_add(&b, p, 1);
    }
    gq_buf_puts(&b, "\"");
    char *s = si_buf_take(&b);
    if (s)
        rs->warnings[rs->n_warnings++] = s;
}

static json_object *gvk(const char *g, const char *v, const char *k, const char *key)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "group", json_object_new_string(g));
    json_object_object_add(o, "version", json_object_new_string(v));
    json_object_object_add(o, key, json_object_new_string(k));
    return o;
}

static char *review_json(const sreq *rq, const char *op, const rtype *t, const char *ns,
                         json_object *obj, json_object *old, int dry, char *uid_out)
{
    json_object *req = json_object_new_object();
    si_uuid(uid_out, 40);
    json_object_object_add(req, "uid", json_object_new_string(uid_out));
    json_object_object_add(req, "kind", gvk(t->group, t->version, t->kind, "kind"));
    json_object_object_add(req, "resource", gvk(t->group, t->version, t->resource, "resource"));
    json_object_object_add(req, "requestKind", gvk(t->group, t->version, t->kind, "kind"));
    json_object_object_add(req, "requestResource",
                           gvk(t->group, t->version, t->resource, "resource"));
    const char *name = si_str(obj, "metadata.name");
    if (name && *name)
        json_object_object_add(req, "name", json_object_new_string(name));
    json_object_object_add(req, "namespace", json_object_new_string(ns));
    json_object_object_add(req, "operation", json_object_new_string(op));
    json_object *ui = json_object_new_object();
    const char *user = rq->header ? rq->header(rq->ctx, "X-Standin-User") : NULL;
    json_object_object_add(ui, "username",
                           json_object_new_string(user && *user ? user : "kubernetes-admin"));
    json_object *groups = json_object_new_array();
    if (!user || !*user)
        json_object_array_add(groups, json_object_new_string("kubeadm:cluster-admins"));
    json_object_array_add(groups, json_object_new_string("system:authenticated"));
    json_object_object_add(ui, "groups", groups);
    json_object_object_add(req, "userInfo", ui);
    json_object_object_add(req, "object", json_object_get(obj));
    json_object_object_add(req, "oldObject", old ? json_object_get(old) : NULL);
    json_object_object_add(req, "dryRun", json_object_new_boolean(dry));
    json_object *opts = json_object_new_object();
    json_object_object_add(
        opts, "kind",
        json_object_new_string(!strcmp(op, "CREATE") ? "CreateOptions" : "UpdateOptions"));
    json_object_object_add(opts, "apiVersion", json_object_new_string("meta.k8s.io/v1"));
    json_object_object_add(req, "options", opts);
    json_object *rev = json_object_new_object();
    json_object_object_add(rev, "kind", json_object_new_string("AdmissionReview"));
    json_object_object_add(rev, "apiVersion", json_object_new_string("admission.k8s.io/v1"));
    json_object_object_add(rev, "request", req);
    char *s = strdup(si_to_json(rev));
    json_object_put(rev);
    return s;
}

/* The Status kube-apiserver returns for a webhook that denied. */
static void denial(sresp *rs, const char *name, json_object *result)
{
    json_object *st = NULL;
    if (!result || json_object_deep_copy(result, &st, NULL) != 0 ||
        !json_object_is_type(st, json_type_object)) {
        json_object_put(st);
        st = json_object_new_object();
    }
    json_object *codej = si_obj(st, "code");
    int code = codej ? json_object_get_int(codej) : 0;
    if (code < 400)
        code = 403;
    const char *msg = si_str(st, "message"), *reason = si_str(st, "reason");
    char full[2048];
    if (msg && *msg)
        snprintf(full, sizeof full, "admission webhook \"%s\" denied the request: %s", name, msg);
    else if (reason && *reason)
        snprintf(full, sizeof full, "admission webhook \"%s\" denied the request: %s", name,
                 reason);
    else
        snprintf(full, sizeof full,
                 "admission webhook \"%s\" denied the request without explanation", name);
    api_status_details(rs, code, reason && *reason ? reason : NULL, full, si_obj(st, "details"));
    json_object_put(st);
}

/* One webhook call and its effect on *work. Returns 0 to go on, 1 denied
 * (rs filled), and sets *changed when a patch altered the object. */
static int invoke(const sreq *rq, const char *op, const rtype *t, const char *ns, hook *hk,
                  json_object **work, json_object *old, int dry, int mutating, int *changed,
                  sresp *rs)
{
    /* objectSelector sees the object as earlier webhooks left it (or the old one) */
    json_object *osel = si_obj(hk->wh, "objectSelector");
    if (!label_selector_matches(osel, *work) && !(old && label_selector_matches(osel, old)))
        return 0;
    const char *name = si_str(hk->wh, "name") ? si_str(hk->wh, "name") : "";
    const char *fp = si_str(hk->wh, "failurePolicy");
    int ignore = fp && !strcmp(fp, "Ignore");
    char uid[40];
    gq_err err = {0};
    json_object *resp = NULL;
    hk->called = 1;
    char *review = review_json(rq, op, t, ns, *work, old, dry, uid);
    gq_code rc = review ? call_hook(hk->wh, review, &resp, &err) : gq_err_oom(&err);
    free(review);
    json_object *r = si_obj(resp, "response");
    if (!rc && (!r || !si_str(r, "uid") || strcmp(si_str(r, "uid"), uid) != 0)) {
        rc = gq_err_set(&err, GQ_EINVAL, "expected response.uid=\"%s\", got \"%s\"", uid,
                        si_str(r, "uid") ? si_str(r, "uid") : "");
    }
    json_object *patched = NULL;
    if (!rc) {
        json_object *w = si_obj(r, "warnings");
        for (size_t i = 0;
             w && json_object_is_type(w, json_type_array) && i < json_object_array_length(w); i++) {
            const char *text = json_object_get_string(json_object_array_get_idx(w, i));
            if (text)
                add_warning(rs, text);
        }
        json_object *allowed = si_obj(r, "allowed");
        if (!allowed || !json_object_get_boolean(allowed)) {
            denial(rs, name, si_obj(r, "status"));
            json_object_put(resp);
            return 1;
        }
        const char *patch = si_str(r, "patch");
        if (patch && mutating) {
            size_t n = 0;
            char *raw = si_b64_decode(patch, &n);
            json_object *ops = raw ? si_parse_json(raw, n, &err) : NULL;
            free(raw);
            if (!ops)
                rc = gq_err_set(&err, GQ_EINVAL, "JSON patch is not valid JSON");
            else
                rc = patch_json(*work, ops, &patched, &err);
            json_object_put(ops);
            /* kube-apiserver decodes the patched object, defaults included */
            if (!rc && !strcmp(t->skey, "pods"))
                rc = pod_defaults(patched, &err);
        } else if (patch) {
            rc = gq_err_set(&err, GQ_EINVAL, "validating webhook may not return a patch");
        }
    }
    json_object_put(resp);
    if (rc) {
        json_object_put(patched);
        if (ignore)
            return 0;
        char msg[GQ_ERR_MSG_MAX + 200];
        snprintf(msg, sizeof msg, "Internal error occurred: failed calling webhook \"%s\": %s",
                 name, err.msg);
        json_object *details = json_object_new_object();
        json_object *causes = json_object_new_array();
        json_object *cause = json_object_new_object();
        char cmsg[GQ_ERR_MSG_MAX + 200];
        snprintf(cmsg, sizeof cmsg, "failed calling webhook \"%s\": %s", name, err.msg);
        json_object_object_add(cause, "message", json_object_new_string(cmsg));
        json_object_array_add(causes, cause);
        json_object_object_add(details, "causes", causes);
        api_status_details(rs, 500, "InternalError", msg, details);
        json_object_put(details);
        return 1;
    }
    if (patched) {
        if (!json_object_equal(patched, *work))
            *changed = 1;
        json_object_put(*work);
        *work = patched;
    }
    return 0;
}

int admit_run(const sreq *rq, const char *op, const rtype *t, const char *ns, json_object **obj,
              json_object *old, int dry_run, int mutating, sresp *rs)
{
    hook_set hs = {.op = op, .ns = ns};
    json_object *nsobj = st_get("namespaces", "", ns);
    hs.ns_labels = si_obj(si_obj(nsobj, "metadata"), "labels");
    /* st_each visits configurations in name order, as kube-apiserver sorts them */
    st_each(mutating ? "admissionregistration.k8s.io/mutatingwebhookconfigurations"
                     : "admissionregistration.k8s.io/validatingwebhookconfigurations",
            NULL, collect, &hs);
    if (hs.n == 0)
        return 0;
    int denied = 0;
    for (size_t i = 0; i < hs.n && dry_run; i++) {
        json_object *osel = si_obj(hs.h[i].wh, "objectSelector");
        if (!label_selector_matches(osel, *obj) && !(old && label_selector_matches(osel, old)))
            continue;
        const char *se = si_str(hs.h[i].wh, "sideEffects");
        if (!se || (strcmp(se, "None") && strcmp(se, "NoneOnDryRun"))) {
            char msg[400];
            snprintf(msg, sizeof msg, "admission webhook \"%s\" does not support dry run",
                     si_str(hs.h[i].wh, "name") ? si_str(hs.h[i].wh, "name") : "");
            api_status(rs, 400, "BadRequest", msg, NULL, NULL, NULL);
            denied = 1;
            goto out;
        }
    }
    /* Work on private copies: the lock is released during the calls. */
    json_object *work = NULL, *oldc = NULL;
    json_object_deep_copy(*obj, &work, NULL);
    if (old)
        json_object_deep_copy(old, &oldc, NULL);
    st_unlock();
    int changed_after[HOOKS_MAX] = {0};
    for (size_t i = 0; i < hs.n && !denied && work; i++) {
        int changed = 0;
        denied = invoke(rq, op, t, ns, &hs.h[i], &work, oldc, dry_run, mutating, &changed, rs);
        if (changed)
            for (size_t j = 0; j < i; j++)
                changed_after[j] = 1;
    }
    /* reinvocationPolicy IfNeeded: once more if a later webhook changed the object */
    for (size_t i = 0; mutating && i < hs.n && !denied && work; i++) {
        const char *rp = si_str(hs.h[i].wh, "reinvocationPolicy");
        int changed = 0;
        if (rp && !strcmp(rp, "IfNeeded") && changed_after[i])
            denied = invoke(rq, op, t, ns, &hs.h[i], &work, oldc, dry_run, mutating, &changed, rs);
    }
    st_lock();
    json_object_put(oldc);
    if (!work && !denied) {
        api_status(rs, 500, "InternalError", "out of memory", NULL, NULL, NULL);
        denied = 1;
    }
    if (!denied && mutating) {
        json_object_put(*obj);
        *obj = work;
        work = NULL;
    }
    json_object_put(work);
out:
    for (size_t i = 0; i < hs.n; i++)
        json_object_put(hs.h[i].wh);
    return denied;
}
