/* Request routing and the REST verbs with kube-apiserver's semantics. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"

#define SEG_MAX 8

typedef struct rctx {
    const sreq *rq;
    sresp *rs;
    rtype t;
    char ns[SI_NAME_MAX + 1];
    char name[SI_NAME_MAX + 1];
    const char *sub; /* "status" or NULL */
    int has_ns, has_name;
    int dry;
} rctx;

void sresp_dispose(sresp *r)
{
    if (!r)
        return;
    free(r->body);
    r->body = NULL;
    for (int i = 0; i < r->n_warnings; i++)
        free(r->warnings[i]);
    r->n_warnings = 0;
    if (r->watch) {
        watch_free(r->watch);
        r->watch = NULL;
    }
}

void api_set_json(sresp *rs, int code, json_object *obj)
{
    free(rs->body);
    rs->code = code;
    rs->content_type = "application/json";
    rs->body = strdup(si_to_json(obj));
    if (!rs->body) {
        rs->code = 500;
        rs->body = NULL;
    }
}

json_object *api_status_obj(int code, const char *reason, const char *msg, const char *name,
                            const char *group, const char *kind)
{
    json_object *st = json_object_new_object();
    json_object_object_add(st, "kind", json_object_new_string("Status"));
    json_object_object_add(st, "apiVersion", json_object_new_string("v1"));
    json_object_object_add(st, "metadata", json_object_new_object());
    json_object_object_add(st, "status", json_object_new_string("Failure"));
    json_object_object_add(st, "message", json_object_new_string(msg));
    if (reason && *reason)
        json_object_object_add(st, "reason", json_object_new_string(reason));
    if (name || group || kind) {
        json_object *d = json_object_new_object();
        if (name)
            json_object_object_add(d, "name", json_object_new_string(name));
        if (group && *group)
            json_object_object_add(d, "group", json_object_new_string(group));
        if (kind && *kind)
            json_object_object_add(d, "kind", json_object_new_string(kind));
        json_object_object_add(st, "details", d);
    }
    json_object_object_add(st, "code", json_object_new_int(code));
    return st;
}

void api_status(sresp *rs, int code, const char *reason, const char *msg, const char *name,
                const char *group, const char *kind)
{
    json_object *st = api_status_obj(code, reason, msg, name, group, kind);
    api_set_json(rs, code, st);
    json_object_put(st);
}

void api_status_details(sresp *rs, int code, const char *reason, const char *msg,
                        json_object *details)
{
    json_object *st = api_status_obj(code, reason, msg, NULL, NULL, NULL);
    if (details) {
        /* keep kube's field order: details before code */
        json_object_object_del(st, "code");
        json_object_object_add(st, "details", json_object_get(details));
        json_object_object_add(st, "code", json_object_new_int(code));
    }
    api_set_json(rs, code, st);
    json_object_put(st);
}

static void not_found_path(sresp *rs)
{
    api_status(rs, 404, "NotFound", "the server could not find the requested resource", NULL, NULL,
               "");
}

static void method_not_allowed(sresp *rs)
{
    api_status(rs, 405, "MethodNotAllowed",
               "the server does not allow this method on the requested resource", NULL, NULL, "");
}

static void bad_request(sresp *rs, const char *msg)
{
    api_status(rs, 400, "BadRequest", msg, NULL, NULL, NULL);
}

/* "pods \"x\" not found" style errors that name resource and object. */
static void obj_error(rctx *c, int code, const char *reason, const char *fmt_tail)
{
    char q[400], msg[1024];
    rtype_qualified(&c->t, q, sizeof q);
    snprintf(msg, sizeof msg, "%s \"%s\" %s", q, c->name, fmt_tail);
    api_status(c->rs, code, reason, msg, c->name, c->t.group, c->t.resource);
}

static void conflict(rctx *c, const char *name)
{
    char q[400], msg[1024];
    rtype_qualified(&c->t, q, sizeof q);
    snprintf(msg, sizeof msg,
             "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please "
             "apply your changes to the latest version and try again",
             q, name);
    api_status(c->rs, 409, "Conflict", msg, name, c->t.group, c->t.resource);
}

/* ---- 422 Invalid with field causes ---- */
typedef struct causes {
    json_object *arr;
    gq_buf text;
    int n;
} causes;

static void cause_add(causes *cs, const char *reason, const char *field, const char *fmt, ...)
    GQ_PRINTF(4, 5);
static void cause_add(causes *cs, const char *reason, const char *field, const char *fmt, ...)
{
    char detail[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    if (!cs->arr) {
        cs->arr = json_object_new_array();
        gq_buf_init(&cs->text, SI_TEXT_MAX);
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "reason", json_object_new_string(reason));
    json_object_object_add(o, "message", json_object_new_string(detail));
    json_object_object_add(o, "field", json_object_new_string(field));
    json_object_array_add(cs->arr, o);
    if (cs->n)
        gq_buf_puts(&cs->text, ", ");
    gq_buf_printf(&cs->text, "%s: %s", field, detail);
    cs->n++;
}

static void causes_dispose(causes *cs)
{
    json_object_put(cs->arr);
    gq_buf_dispose(&cs->text);
}

/* Reply 422 when causes were collected; returns 1 if it replied. */
static int invalid_reply(rctx *c, causes *cs, const char *kind, const char *name)
{
    if (!cs->n)
        return 0;
    char qk[400];
    if (*c->t.group)
        snprintf(qk, sizeof qk, "%s.%s", kind, c->t.group);
    else
        snprintf(qk, sizeof qk, "%s", kind);
    gq_buf msg;
    gq_buf_init(&msg, SI_TEXT_MAX);
    gq_buf_printf(&msg, "%s \"%s\" is invalid: ", qk, name);
    if (cs->n > 1)
        gq_buf_printf(&msg, "[%s]", cs->text.data);
    else
        gq_buf_puts(&msg, cs->text.data);
    char *m = si_buf_take(&msg);
    json_object *st = api_status_obj(422, "Invalid", m ? m : "invalid", name, c->t.group, kind);
    free(m);
    json_object_object_add(si_obj(st, "details"), "causes", json_object_get(cs->arr));
    api_set_json(c->rs, 422, st);
    json_object_put(st);
    return 1;
}

/* ---- names ---- */
static const char subdomain_msg[] =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
static const char label_msg[] =
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

static int is_alnum_lower(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

static int valid_label(const char *s, size_t n)
{
    if (!n || !is_alnum_lower(s[0]) || !is_alnum_lower(s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum_lower(s[i]) && s[i] != '-')
            return 0;
    return 1;
}

static int valid_subdomain(const char *s)
{
    const char *p = s;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!valid_label(p, n))
            return 0;
        if (!dot)
            return 1;
        p = dot + 1;
    }
}

static void check_name(causes *cs, const char *field, const char *name, int label)
{
    size_t n = strlen(name);
    size_t max = label ? 63 : 253;
    if (n > max)
        cause_add(cs, "FieldValueInvalid", field,
                  "Invalid value: \"%.300s\": must be no more than %zu characters", name, max);
    if (label ? !valid_label(name, n) : !valid_subdomain(name))
        cause_add(cs, "FieldValueInvalid", field, "Invalid value: \"%.300s\": %s", name,
                  label ? label_msg : subdomain_msg);
}

/* ---- helpers ---- */
static const char *q(rctx *c, const char *k)
{
    return c->rq->query ? c->rq->query(c->rq->ctx, k) : NULL;
}

static const char *hdr(rctx *c, const char *k)
{
    return c->rq->header ? c->rq->header(c->rq->ctx, k) : NULL;
}

static void api_version_of(const rtype *t, char *buf, size_t n)
{
    if (*t->group)
        snprintf(buf, n, "%s/%s", t->group, t->version);
    else
        snprintf(buf, n, "%s", t->version);
}

static json_object *dup(json_object *o)
{
    json_object *d = NULL;
    if (!o || json_object_deep_copy(o, &d, NULL) != 0)
        return NULL;
    return d;
}

static json_object *meta(json_object *o)
{
    json_object *md = si_obj(o, "metadata");
    if (!md || !json_object_is_type(md, json_type_object)) {
        md = json_object_new_object();
        json_object_object_add(o, "metadata", md);
    }
    return md;
}

static void set_str(json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, json_object_new_string(v));
}

static void set_rv(json_object *o, uint64_t rv)
{
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)rv);
    set_str(meta(o), "resourceVersion", b);
}

/* Copy of a stored object as the requested version presents it (CRs are
 * served in every version without conversion, like strategy None). */
static json_object *present(rctx *c, json_object *stored)
{
    json_object *o = dup(stored);
    if (o && c->t.custom) {
        char av[200];
        api_version_of(&c->t, av, sizeof av);
        set_str(o, "apiVersion", av);
    }
    return o;
}

static int wants_table(rctx *c)
{
    const char *a = hdr(c, "Accept");
    return a && strstr(a, "as=Table") && strstr(a, "g=meta.k8s.io");
}

static void reply_object(rctx *c, int code, json_object *obj)
{
    if (wants_table(c)) {
        json_object *items = json_object_new_array();
        json_object_array_add(items, json_object_get(obj));
        json_object *tab = table_build(&c->t, items, NULL, q(c, "includeObject"), 1);
        api_set_json(c->rs, code, tab);
        json_object_put(tab);
        json_object_put(items);
        return;
    }
    api_set_json(c->rs, code, obj);
}

static json_object *parse_body(rctx *c)
{
    gq_err err = {0};
    const char *ct = hdr(c, "Content-Type");
    if (ct && !strncmp(ct, "application/vnd.kubernetes.protobuf", 35)) {
        json_object *o = proto_decode(c->rq->body ? c->rq->body : "", c->rq->body_len, &err);
        if (!o)
            api_status(c->rs, 415, "UnsupportedMediaType", err.msg, NULL, NULL, NULL);
        return o;
    }
    if (ct && strncmp(ct, "application/json", 16) != 0 && strncmp(ct, "*/*", 3) != 0) {
        /* YAML and other bodies are refused the way kube-apiserver refuses
         * unknown formats. */
        api_status(c->rs, 415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types "
                   "include: application/json, application/vnd.kubernetes.protobuf",
                   NULL, NULL, NULL);
        return NULL;
    }
    if (!c->rq->body_len) {
        bad_request(c->rs, "the body of the request was empty");
        return NULL;
    }
    json_object *o = si_parse_json(c->rq->body, c->rq->body_len, &err);
    if (!o) {
        char msg[700];
        if (err.code == GQ_ELIMIT) {
            api_status(c->rs, 413, "RequestEntityTooLarge", "the request body was too large", NULL,
                       NULL, NULL);
            return NULL;
        }
        snprintf(msg, sizeof msg, "couldn't get version/kind; json parse error: %s", err.msg);
        bad_request(c->rs, msg);
        return NULL;
    }
    return o;
}

/* Check and default the body's apiVersion/kind against the URL's type. */
static int check_typemeta(rctx *c, json_object *body)
{
    char av[200];
    api_version_of(&c->t, av, sizeof av);
    if (!json_object_is_type(body, json_type_object)) {
        bad_request(c->rs, "couldn't get version/kind; json parse error: body is not an object");
        return -1;
    }
    json_object *jav = si_obj(body, "apiVersion"), *jk = si_obj(body, "kind");
    if ((jav && !json_object_is_type(jav, json_type_string)) ||
        (jk && !json_object_is_type(jk, json_type_string))) {
        bad_request(
            c->rs,
            "couldn't get version/kind; json parse error: apiVersion and kind must be strings");
        return -1;
    }
    const char *bav = jav ? json_object_get_string(jav) : "";
    const char *bk = jk ? json_object_get_string(jk) : "";
    char msg[1024];
    if (*bav && strcmp(bav, av) != 0) {
        snprintf(
            msg, sizeof msg,
            "the API version in the data (%.200s) does not match the expected API version (%s)",
            bav, av);
        bad_request(c->rs, msg);
        return -1;
    }
    if (*bk && strcmp(bk, c->t.kind) != 0) {
        const char *name = si_str(body, "metadata.name");
        if (c->t.custom) {
            causes cs = {0};
            cause_add(&cs, "FieldValueInvalid", "kind", "Invalid value: \"%.200s\": must be %s", bk,
                      c->t.kind);
            invalid_reply(c, &cs, bk, name ? name : "");
            causes_dispose(&cs);
        } else {
            snprintf(msg, sizeof msg,
                     "%.200s in version \"%s\" cannot be handled as a %s: no kind \"%.200s\" is "
                     "registered for version \"%s\"",
                     bk, c->t.version, c->t.kind, bk, av);
            bad_request(c->rs, msg);
        }
        return -1;
    }
    set_str(body, "apiVersion", av);
    set_str(body, "kind", c->t.kind);
    json_object *md = si_obj(body, "metadata");
    if (md && !json_object_is_type(md, json_type_object)) {
        bad_request(c->rs, "metadata must be an object");
        return -1;
    }
    return 0;
}

static int is_dry(rctx *c, json_object *opts)
{
    const char *d = q(c, "dryRun");
    if (d && *d) {
        if (strcmp(d, "All") != 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "Invalid dry run value: %.100s; supported values: [\"All\"]",
                     d);
            bad_request(c->rs, msg);
            return -1;
        }
        return 1;
    }
    json_object *arr = si_obj(opts, "dryRun");
    if (arr && json_object_is_type(arr, json_type_array) && json_object_array_length(arr))
        return 1;
    return 0;
}

static int namespace_exists(const char *ns)
{
    return st_get("namespaces", "", ns) != NULL;
}

static void ns_not_found(rctx *c, const char *ns)
{
    char msg[400];
    snprintf(msg, sizeof msg, "namespaces \"%s\" not found", ns);
    api_status(c->rs, 404, "NotFound", msg, ns, NULL, "namespaces");
}

/* metadata.generation bumps when anything outside metadata and status changes. */
static int spec_changed(json_object *a, json_object *b)
{
    json_object *x = dup(a), *y = dup(b);
    int changed = 1;
    if (x && y) {
        json_object_object_del(x, "metadata");
        json_object_object_del(x, "status");
        json_object_object_del(y, "metadata");
        json_object_object_del(y, "status");
        changed = !json_object_equal(x, y);
    }
    json_object_put(x);
    json_object_put(y);
    return changed;
}

/* Write-time conversions kube's strategies make: a Secret's stringData is
 * merged into data (base64) and never stored. */
static void normalize_type(rctx *c, json_object *obj)
{
    if (strcmp(c->t.skey, "secrets") != 0)
        return;
    json_object *sd = si_obj(obj, "stringData");
    if (!sd || !json_object_is_type(sd, json_type_object)) {
        json_object_object_del(obj, "stringData");
        return;
    }
    json_object *data = si_obj(obj, "data");
    if (!data || !json_object_is_type(data, json_type_object)) {
        data = json_object_new_object();
        json_object_object_add(obj, "data", data);
    }
    json_object_object_foreach(sd, k, v)
    {
        const char *str =
            v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        char *enc = si_b64_encode(str, strlen(str), 0);
        if (enc)
            json_object_object_add(data, k, json_object_new_string(enc));
        free(enc);
    }
    json_object_object_del(obj, "stringData");
}

/* Type-specific checks; collects causes. */
/* kube-apiserver refuses a CRD schema node that has both properties and
 * additionalProperties (apiextensions validation: "additionalProperties and
 * properties are mutual exclusive"); so does the stand-in, at the same path. */
static void schema_check(causes *cs, json_object *node, char *path, size_t n, size_t len, int depth)
{
    if (!node || !json_object_is_type(node, json_type_object) || depth > 64 || len >= n)
        return;
    json_object *props = si_obj(node, "properties"), *ap = si_obj(node, "additionalProperties");
    if (props && ap) {
        int w = snprintf(path + len, n - len, ".additionalProperties");
        if (w > 0 && (size_t)w < n - len)
            cause_add(cs, "FieldValueForbidden", path,
                      "Forbidden: additionalProperties and properties are mutual exclusive");
        path[len] = 0;
    }
    if (props && json_object_is_type(props, json_type_object)) {
        json_object_object_foreach(props, key, child)
        {
            int w = snprintf(path + len, n - len, ".properties[%s]", key);
            if (w > 0 && (size_t)w < n - len)
                schema_check(cs, child, path, n, len + (size_t)w, depth + 1);
            path[len] = 0;
        }
    }
    static const char *const subs[] = {"items", "additionalProperties"};
    for (size_t i = 0; i < 2; i++) {
        int w = snprintf(path + len, n - len, ".%s", subs[i]);
        if (w > 0 && (size_t)w < n - len)
            schema_check(cs, si_obj(node, subs[i]), path, n, len + (size_t)w, depth + 1);
        path[len] = 0;
    }
}

static void validate_type(rctx *c, json_object *obj, causes *cs)
{
    if (!strcmp(c->t.skey, "pods")) {
        json_object *ctrs = si_obj(si_obj(obj, "spec"), "containers");
        if (!ctrs || !json_object_is_type(ctrs, json_type_array) ||
            !json_object_array_length(ctrs)) {
            cause_add(cs, "FieldValueRequired", "spec.containers", "Required value");
            return;
        }
        for (size_t i = 0; i < json_object_array_length(ctrs); i++) {
            json_object *ct = json_object_array_get_idx(ctrs, i);
            char f[64];
            snprintf(f, sizeof f, "spec.containers[%zu].name", i);
            if (!si_str(ct, "name") || !*si_str(ct, "name"))
                cause_add(cs, "FieldValueRequired", f, "Required value");
            snprintf(f, sizeof f, "spec.containers[%zu].image", i);
            if (!si_str(ct, "image") || !*si_str(ct, "image"))
                cause_add(cs, "FieldValueRequired", f, "Required value");
        }
    } else if (!strcmp(c->t.skey, "apiextensions.k8s.io/customresourcedefinitions")) {
        const char *g = si_str(obj, "spec.group"), *plural = si_str(obj, "spec.names.plural");
        const char *kind = si_str(obj, "spec.names.kind"), *scope = si_str(obj, "spec.scope");
        const char *name = si_str(obj, "metadata.name");
        if (!g || !*g)
            cause_add(cs, "FieldValueRequired", "spec.group", "Required value");
        else if (!strchr(g, '.'))
            cause_add(cs, "FieldValueInvalid", "spec.group",
                      "Invalid value: \"%.200s\": should be a domain with at least one dot", g);
        if (!plural || !*plural)
            cause_add(cs, "FieldValueRequired", "spec.names.plural", "Required value");
        if (!kind || !*kind)
            cause_add(cs, "FieldValueRequired", "spec.names.kind", "Required value");
        if (!scope || (strcmp(scope, "Namespaced") && strcmp(scope, "Cluster")))
            cause_add(cs, "FieldValueNotSupported", "spec.scope",
                      "Unsupported value: \"%s\": supported values: \"Cluster\", \"Namespaced\"",
                      scope ? scope : "");
        json_object *vs = si_obj(si_obj(obj, "spec"), "versions");
        if (!vs || !json_object_is_type(vs, json_type_array) || !json_object_array_length(vs))
            cause_add(
                cs, "FieldValueInvalid", "spec.versions",
                "Invalid value: null: must have exactly one version marked as storage version");
        for (size_t i = 0;
             vs && json_object_is_type(vs, json_type_array) && i < json_object_array_length(vs);
             i++) {
            char path[2048];
            int w = snprintf(path, sizeof path, "spec.versions[%zu].schema.openAPIV3Schema", i);
            json_object *schema =
                si_obj(si_obj(json_object_array_get_idx(vs, i), "schema"), "openAPIV3Schema");
            if (w > 0 && (size_t)w < sizeof path)
                schema_check(cs, schema, path, sizeof path, (size_t)w, 0);
        }
        if (g && plural && name) {
            char want[600];
            snprintf(want, sizeof want, "%s.%s", plural, g);
            if (strcmp(want, name) != 0)
                cause_add(cs, "FieldValueInvalid", "metadata.name",
                          "Invalid value: \"%s\": must be spec.names.plural+\".\"+spec.group",
                          name);
        }
    }
}

/* Server-side defaults and status on create. */
static void prepare_create(rctx *c, json_object *obj)
{
    if (!strcmp(c->t.skey, "pods")) {
        json_object *st = json_object_new_object();
        set_str(st, "phase", "Pending");
        json_object_object_add(obj, "status", st);
    } else if (!strcmp(c->t.skey, "namespaces")) {
        json_object *md = meta(obj);
        json_object *labels = si_obj(md, "labels");
        if (!labels) {
            labels = json_object_new_object();
            json_object_object_add(md, "labels", labels);
        }
        set_str(labels, "kubernetes.io/metadata.name", si_str(md, "name"));
        json_object *spec = json_object_new_object();
        json_object *fin = json_object_new_array();
        json_object_array_add(fin, json_object_new_string("kubernetes"));
        json_object_object_add(spec, "finalizers", fin);
        json_object_object_add(obj, "spec", spec);
        json_object *st = json_object_new_object();
        set_str(st, "phase", "Active");
        json_object_object_add(obj, "status", st);
    } else if (!strcmp(c->t.skey, "apiextensions.k8s.io/customresourcedefinitions")) {
        /* Names are accepted and the CRD is established at once (no controller). */
        json_object *st = json_object_new_object();
        json_object *names = si_obj(si_obj(obj, "spec"), "names");
        json_object *an = dup(names);
        if (an && !si_obj(an, "singular") && si_str(names, "kind")) {
            char low[128];
            snprintf(low, sizeof low, "%s", si_str(names, "kind"));
            for (char *p = low; *p; p++)
                *p = (char)tolower((unsigned char)*p);
            set_str(an, "singular", low);
        }
        if (an && !si_obj(an, "listKind") && si_str(names, "kind")) {
            char lk[160];
            snprintf(lk, sizeof lk, "%sList", si_str(names, "kind"));
            set_str(an, "listKind", lk);
        }
        if (an) {
            json_object_object_add(si_obj(obj, "spec"), "names", dup(an));
            json_object_object_add(st, "acceptedNames", an);
        }
        json_object *conds = json_object_new_array();
        char now[40];
        si_now_rfc3339(now, sizeof now);
        const char *ct[][3] = {
            {"NamesAccepted", "NoConflicts", "no conflicts found"},
            {"Established", "InitialNamesAccepted", "the initial names have been accepted"}};
        for (int i = 0; i < 2; i++) {
            json_object *cd = json_object_new_object();
            set_str(cd, "type", ct[i][0]);
            set_str(cd, "status", "True");
            set_str(cd, "lastTransitionTime", now);
            set_str(cd, "reason", ct[i][1]);
            set_str(cd, "message", ct[i][2]);
            json_object_array_add(conds, cd);
        }
        json_object_object_add(st, "conditions", conds);
        json_object *stored = json_object_new_array();
        json_object *vs = si_obj(si_obj(obj, "spec"), "versions");
        for (size_t i = 0;
             vs && json_object_is_type(vs, json_type_array) && i < json_object_array_length(vs);
             i++) {
            json_object *v = json_object_array_get_idx(vs, i);
            json_object *sto = si_obj(v, "storage");
            if (sto && json_object_get_boolean(sto) && si_str(v, "name"))
                json_object_array_add(stored, json_object_new_string(si_str(v, "name")));
        }
        json_object_object_add(st, "storedVersions", stored);
        json_object_object_add(obj, "status", st);
    } else if (!strcmp(c->t.skey, "secrets")) {
        if (!si_str(obj, "type") || !*si_str(obj, "type"))
            set_str(obj, "type", "Opaque");
    } else if (c->t.custom && c->t.has_status) {
        json_object_object_del(obj, "status");
    }
}

static void remove_object(rctx *c, const char *skey, const char *ns, const char *name);

/* Deleting a namespace or CRD removes what lives in it (the namespace and
 * CRD controllers do this asynchronously in Kubernetes). */
typedef struct victim {
    char skey[260];
    char ns[SI_NAME_MAX + 1];
    char name[SI_NAME_MAX + 1];
} victim;
typedef struct victims {
    victim *v;
    size_t n, cap;
    const char *only_ns;
} victims;

static int collect_victim(void *ctx, const char *ns, const char *name, json_object *obj)
{
    victims *vs = ctx;
    if (vs->only_ns && strcmp(ns, vs->only_ns))
        return 0;
    if (vs->n == vs->cap) {
        size_t nc = vs->cap ? vs->cap * 2 : 32;
        victim *nv = realloc(vs->v, nc * sizeof *nv);
        if (!nv)
            return 1;
        vs->v = nv;
        vs->cap = nc;
    }
    victim *v = &vs->v[vs->n++];
    snprintf(v->skey, sizeof v->skey, "%s", "");
    snprintf(v->ns, sizeof v->ns, "%s", ns);
    snprintf(v->name, sizeof v->name, "%s", name);
    return 0;
}

static void purge(rctx *c, const char *skey, const char *ns)
{
    victims vs = {.only_ns = ns};
    st_each(skey, ns, collect_victim, &vs);
    for (size_t i = 0; i < vs.n; i++)
        remove_object(c, skey, vs.v[i].ns, vs.v[i].name);
    free(vs.v);
}

typedef struct crd_skeys {
    char (*k)[260];
    size_t n, cap;
} crd_skeys;

static int collect_crd(void *ctx, const char *ns, const char *name, json_object *crd)
{
    crd_skeys *s = ctx;
    const char *scope = si_str(crd, "spec.scope");
    if (scope && !strcmp(scope, "Cluster"))
        return 0;
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 8;
        char(*nk)[260] = realloc(s->k, nc * sizeof *nk);
        if (!nk)
            return 1;
        s->k = nk;
        s->cap = nc;
    }
    rtype_crd_skey(crd, s->k[s->n++], 260);
    return 0;
}

static void remove_object(rctx *c, const char *skey, const char *ns, const char *name)
{
    json_object *obj = st_get(skey, ns, name);
    if (!obj)
        return;
    if (!strcmp(skey, "namespaces")) {
        size_t nb;
        const rtype *b = rtype_builtins(&nb);
        for (size_t i = 0; i < nb; i++)
            if (b[i].namespaced)
                purge(c, b[i].skey, name);
        crd_skeys ck = {0};
        st_each("apiextensions.k8s.io/customresourcedefinitions", NULL, collect_crd, &ck);
        for (size_t i = 0; i < ck.n; i++)
            purge(c, ck.k[i], name);
        free(ck.k);
    } else if (!strcmp(skey, "apiextensions.k8s.io/customresourcedefinitions")) {
        char crkey[260];
        rtype_crd_skey(obj, crkey, sizeof crkey);
        purge(c, crkey, NULL);
    }
    st_del(skey, ns, name, st_next_rv());
}

/* ---- verbs ---- */

static void do_get(rctx *c)
{
    json_object *o = st_get(c->t.skey, c->t.namespaced ? c->ns : "", c->name);
    if (!o || (c->t.namespaced && !c->has_ns)) {
        obj_error(c, 404, "NotFound", "not found");
        return;
    }
    json_object *p = present(c, o);
    reply_object(c, 200, p);
    json_object_put(p);
}

typedef struct list_item {
    json_object *obj; /* borrowed from the store */
    const char *text; /* its JSON text without TypeMeta (st_page) */
    size_t len;
} list_item;

typedef struct list_ctx {
    selector *ls, *fs;
    list_item *items;
    size_t n, cap;
    int oom;
} list_ctx;

static int list_visit(void *ctx, json_object *obj, const char *text, size_t len)
{
    list_ctx *l = ctx;
    if (!sel_match_labels(l->ls, obj) || !sel_match_fields(l->fs, obj))
        return 0;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        list_item *ni = realloc(l->items, nc * sizeof *ni);
        if (!ni) {
            l->oom = 1;
            return 1;
        }
        l->items = ni;
        l->cap = nc;
    }
    l->items[l->n++] = (list_item){obj, text, len};
    return 1;
}

/* The page's items as a JSON array (table output): copies as presented. */
static json_object *list_items_json(rctx *c, const list_ctx *l, size_t n)
{
    json_object *items = json_object_new_array();
    for (size_t i = 0; items && i < n; i++) {
        json_object *p = present(c, l->items[i].obj);
        if (p && !c->t.custom) {
            /* typed lists carry no TypeMeta on their items */
            json_object_object_del(p, "kind");
            json_object_object_del(p, "apiVersion");
        }
        json_object_array_add(items, p);
    }
    return items;
}

/* Append item i as the list presents it: the stored text, and for custom
 * resources the requested apiVersion and the stored kind in front. */
static void list_item_text(rctx *c, const list_item *it, const char *av, gq_buf *b)
{
    if (!c->t.custom) {
        gq_buf_add(b, it->text, it->len);
        return;
    }
    gq_buf_puts(b, "{\"apiVersion\":");
    json_object *s = json_object_new_string(av);
    gq_buf_puts(b, s ? si_to_json(s) : "\"\"");
    json_object_put(s);
    json_object *kind = si_obj(it->obj, "kind");
    if (kind) {
        gq_buf_puts(b, ",\"kind\":");
        gq_buf_puts(b, si_to_json(kind));
    }
    /* it->text is "{...}": splice its members after ours. */
    if (it->len > 2)
        gq_buf_add(b, ",", 1);
    gq_buf_add(b, it->text + 1, it->len - 1);
}

static void do_list(rctx *c)
{
    gq_err err = {0};
    list_ctx l = {0};
    char *start = NULL;
    json_object *tok = NULL, *md = NULL;
    uint64_t list_rv = st_rv();
    if (sel_parse_labels(q(c, "labelSelector"), &l.ls, &err) ||
        sel_parse_fields(q(c, "fieldSelector"), &c->t, &l.fs, &err)) {
        bad_request(c->rs, err.msg);
        goto out;
    }
    const char *watch = q(c, "watch");
    if (watch && (!strcmp(watch, "true") || !strcmp(watch, "1"))) {
        g_faults.by_verb[VERB_WATCH]++;
        int table = wants_table(c);
        watch_start(c->rq, &c->t, c->t.namespaced && c->has_ns ? c->ns : NULL, &l.ls, &l.fs, table,
                    c->rs);
        goto out;
    }
    g_faults.by_verb[VERB_LIST]++;
    long long limit = 0;
    const char *ls = q(c, "limit");
    if (ls && *ls) {
        char *end;
        limit = strtoll(ls, &end, 10);
        if (*end || limit < 0)
            limit = 0;
    }
    const char *cont = q(c, "continue");
    if (cont && *cont) {
        char *raw = si_b64_decode(cont, NULL);
        gq_err e2 = {0};
        tok = raw ? si_parse_json(raw, strlen(raw), &e2) : NULL;
        free(raw);
        const char *st = si_str(tok, "start");
        json_object *jrv = si_obj(tok, "rv");
        if (!st || !jrv || !json_object_is_type(jrv, json_type_int)) {
            bad_request(c->rs, "continue key is not valid: incorrect encoded start resourceVersion "
                               "(version meta.k8s.io/v1)");
            goto out;
        }
        start = strdup(st);
        int64_t trv = json_object_get_int64(jrv);
        if (trv > 0 && (uint64_t)trv <= st_history_start()) {
            api_status(c->rs, 410, "Expired",
                       "The provided continue parameter is too old to display a consistent list "
                       "result. You can start a new list without the continue parameter, or use "
                       "the continue token in this response to retrieve the remainder of the "
                       "results. Continuing with the provided token results in an inconsistent "
                       "list - objects that were created, modified, or deleted between the time "
                       "the first chunk was returned and now may show up in the list.",
                       NULL, NULL, NULL);
            goto out;
        }
        if (trv > 0)
            list_rv = (uint64_t)trv;
    }
    /* The continue token's start is "ns/name" (ns empty when cluster-scoped). */
    char *after_ns = NULL, *after_name = NULL;
    if (start) {
        const char *slash = strchr(start, '/');
        after_ns = slash ? strndup(start, (size_t)(slash - start)) : strdup("");
        after_name = strdup(slash ? slash + 1 : start);
    }
    /* One past the page tells that more follow; the objects after it are
     * only counted (without selectors, by the store's index arithmetic),
     * so a page costs O(page), not O(collection). */
    int oom = 0;
    size_t want = limit > 0 ? (size_t)limit + 1 : SIZE_MAX;
    size_t total =
        st_page(c->t.skey, c->t.namespaced && c->has_ns ? c->ns : NULL,
                after_ns && after_ns[0] ? after_ns : NULL, after_name, want, list_visit, &l, &oom);
    free(after_ns);
    free(after_name);
    if (oom || l.oom) {
        api_status(c->rs, 500, "InternalError", "out of memory", NULL, NULL, NULL);
        goto out;
    }
    size_t kept = l.n;
    md = json_object_new_object();
    char rvs[32];
    snprintf(rvs, sizeof rvs, "%llu", (unsigned long long)list_rv);
    set_str(md, "resourceVersion", rvs);
    if (limit > 0 && (size_t)limit < kept) {
        json_object *last = l.items[limit - 1].obj;
        char k[2 * SI_NAME_MAX + 4];
        const char *lns = si_str(last, "metadata.namespace");
        snprintf(k, sizeof k, "%s/%s", c->t.namespaced && lns ? lns : "",
                 si_str(last, "metadata.name") ? si_str(last, "metadata.name") : "");
        json_object *t = json_object_new_object();
        set_str(t, "v", "meta.k8s.io/v1");
        json_object_object_add(t, "rv", json_object_new_int64((int64_t)list_rv));
        set_str(t, "start", k);
        const char *tj = si_to_json(t);
        char *enc = si_b64_encode(tj, strlen(tj), 1);
        json_object_put(t);
        if (enc)
            set_str(md, "continue", enc);
        free(enc);
        /* Without selectors every object counts; with them the count is
         * unknown, and kube-apiserver leaves it out too. */
        if (sel_empty(l.ls) && sel_empty(l.fs))
            json_object_object_add(md, "remainingItemCount",
                                   json_object_new_int64((int64_t)(total - (size_t)limit)));
        kept = (size_t)limit;
    }
    if (wants_table(c)) {
        json_object *items = list_items_json(c, &l, kept);
        json_object *tab = table_build(&c->t, items, rvs, q(c, "includeObject"), 1);
        json_object *tmd = si_obj(tab, "metadata");
        json_object *cv = si_obj(md, "continue"), *ric = si_obj(md, "remainingItemCount");
        if (cv)
            json_object_object_add(tmd, "continue", json_object_get(cv));
        if (ric)
            json_object_object_add(tmd, "remainingItemCount", json_object_get(ric));
        api_set_json(c->rs, 200, tab);
        json_object_put(tab);
        json_object_put(items);
        goto out;
    }
    /* The List is built as text in one buffer: the items' stored text
     * concatenated, nothing copied or re-serialised per object. */
    char av[200];
    api_version_of(&c->t, av, sizeof av);
    json_object *head = json_object_new_object();
    set_str(head, "kind", c->t.list_kind);
    set_str(head, "apiVersion", av);
    json_object_object_add(head, "metadata", json_object_get(md));
    const char *ht = si_to_json(head);
    gq_buf b;
    gq_buf_init(&b, SI_LIST_MAX);
    gq_buf_add(&b, ht, strlen(ht) - 1); /* without the closing brace */
    json_object_put(head);
    gq_buf_puts(&b, ",\"items\":[");
    for (size_t i = 0; i < kept; i++) {
        if (i)
            gq_buf_add(&b, ",", 1);
        list_item_text(c, &l.items[i], av, &b);
    }
    gq_buf_puts(&b, "]}");
    char *body = si_buf_take(&b);
    if (!body) {
        api_status(c->rs, 500, "InternalError", "out of memory", NULL, NULL, NULL);
        goto out;
    }
    free(c->rs->body);
    c->rs->code = 200;
    c->rs->body = body;
    c->rs->content_type = "application/json";
out:
    free(l.items);
    json_object_put(md);
    json_object_put(tok);
    free(start);
    sel_free(l.ls);
    sel_free(l.fs);
}

/* Persist obj (borrowed; its resourceVersion is set here) unless this is a
 * dry run, then reply with it. remove_after: the write released the last
 * finalizer of a deleting object, so it goes away right after. */
static void persist_reply(rctx *c, json_object *obj, int code, int remove_after)
{
    const char *ns = c->t.namespaced ? c->ns : "";
    if (!c->dry) {
        uint64_t rv = st_next_rv();
        set_rv(obj, rv);
        if (st_put(c->t.skey, ns, c->name, json_object_get(obj), rv)) {
            api_status(c->rs, 500, "InternalError", "out of memory", NULL, NULL, NULL);
            return;
        }
        if (remove_after)
            remove_object(c, c->t.skey, ns, c->name);
    }
    json_object *p = present(c, obj);
    reply_object(c, code, p);
    json_object_put(p);
}

/* Admission webhooks apply to pods (the only kind gpuquota's webhook
 * configurations select). Returns nonzero after replying with a denial. */
static int run_webhooks(rctx *c, const char *op, json_object **obj, json_object *old, int mutating)
{
    if (strcmp(c->t.skey, "pods") != 0 || c->sub)
        return 0;
    return admit_run(c->rq, op, &c->t, c->ns, obj, old, c->dry, mutating, c->rs);
}

/* Pod defaults as kube-apiserver's decoder applies them (creates and updates
 * of the main resource); nonzero after replying 400. */
static int pod_decode_defaults(rctx *c, json_object *obj)
{
    gq_err err = {0};
    if (strcmp(c->t.skey, "pods") != 0 || c->sub || !pod_defaults(obj, &err))
        return 0;
    bad_request(c->rs, err.msg);
    return 1;
}

/* A pod CREATE: decoder defaults, then the ServiceAccount and Priority
 * admission plugins, which run before webhooks. */
static int pod_create_defaults(rctx *c, json_object *obj)
{
    if (pod_decode_defaults(c, obj))
        return 1;
    if (!strcmp(c->t.skey, "pods") && !c->sub)
        pod_admission_defaults(obj);
    return 0;
}

/* Shared tail of create and create-on-update. Takes ownership of body. */
static void create_object(rctx *c, json_object *body)
{
    json_object *md = meta(body);
    const char *name = si_str(md, "name");
    char gen[SI_NAME_MAX + 8];
    causes cs = {0};
    if (c->t.namespaced) {
        const char *bns = si_str(md, "namespace");
        if (bns && *bns && strcmp(bns, c->ns) != 0) {
            bad_request(c->rs, "the namespace of the provided object does not match the namespace "
                               "sent on the request");
            goto out;
        }
        set_str(md, "namespace", c->ns);
    } else {
        json_object_object_del(md, "namespace");
    }
    /* The decoder's defaults, NamespaceLifecycle and the built-in mutating
     * plugins, then mutating webhooks, then the store's own naming,
     * uid, creationTimestamp and validation, then validating webhooks, as
     * in kube-apiserver. */
    if (pod_create_defaults(c, body))
        goto out;
    if (c->t.namespaced && !namespace_exists(c->ns)) {
        ns_not_found(c, c->ns);
        goto out;
    }
    if (run_webhooks(c, "CREATE", &body, NULL, 1))
        goto out;
    md = meta(body);
    name = si_str(md, "name");
    if ((!name || !*name) && si_str(md, "generateName") && *si_str(md, "generateName")) {
        char sfx[6];
        si_random_suffix(sfx);
        /* kube truncates the prefix so prefix+suffix fits a 63-character name */
        snprintf(gen, sizeof gen, "%.58s%s", si_str(md, "generateName"), sfx);
        set_str(md, "name", gen);
        name = si_str(md, "name");
    }
    if (!name || !*name) {
        cause_add(&cs, "FieldValueRequired", "metadata.name",
                  "Required value: name or generateName is required");
        invalid_reply(c, &cs, c->t.kind, "");
        goto out;
    }
    check_name(&cs, "metadata.name", name, !strcmp(c->t.skey, "namespaces"));
    normalize_type(c, body);
    validate_type(c, body, &cs);
    if (invalid_reply(c, &cs, c->t.kind, name))
        goto out;
    snprintf(c->name, sizeof c->name, "%s", name);
    if (st_get(c->t.skey, c->t.namespaced ? c->ns : "", name)) {
        obj_error(c, 409, "AlreadyExists", "already exists");
        goto out;
    }
    /* Fields the server owns. */
    char uid[40], now[40];
    si_uuid(uid, sizeof uid);
    si_now_rfc3339(now, sizeof now);
    set_str(md, "uid", uid);
    set_str(md, "creationTimestamp", now);
    json_object_object_del(md, "resourceVersion");
    json_object_object_del(md, "deletionTimestamp");
    json_object_object_del(md, "deletionGracePeriodSeconds");
    json_object_object_del(md, "selfLink");
    json_object_object_del(md, "managedFields");
    if (c->t.has_generation)
        json_object_object_add(md, "generation", json_object_new_int64(1));
    else
        json_object_object_del(md, "generation");
    prepare_create(c, body);
    if (run_webhooks(c, "CREATE", &body, NULL, 0))
        goto out;
    /* the store lock was released while webhooks ran */
    if (st_get(c->t.skey, c->t.namespaced ? c->ns : "", name)) {
        obj_error(c, 409, "AlreadyExists", "already exists");
        goto out;
    }
    persist_reply(c, body, 201, 0);
out:
    causes_dispose(&cs);
    json_object_put(body);
}

/* Parse a POST/PUT body, read dryRun and check apiVersion/kind; NULL after
 * replying with the error. */
static json_object *write_body(rctx *c)
{
    json_object *body = parse_body(c);
    if (!body)
        return NULL;
    c->dry = is_dry(c, NULL);
    if (c->dry < 0 || check_typemeta(c, body)) {
        json_object_put(body);
        return NULL;
    }
    return body;
}

static void do_create(rctx *c)
{
    g_faults.by_verb[VERB_CREATE]++;
    if (c->sub) {
        method_not_allowed(c->rs);
        return;
    }
    json_object *body = write_body(c);
    if (!body)
        return;
    create_object(c, body);
}

/* Apply an update of `next` (owned) over the stored `cur`: the common tail
 * of PUT and PATCH. */
static void update_object(rctx *c, json_object *cur, json_object *next, int from_patch)
{
    json_object *md = meta(next);
    json_object *omd = si_obj(cur, "metadata");
    causes cs = {0};
    const char *rv = si_str(md, "resourceVersion");
    const char *orv = si_str(omd, "resourceVersion");
    if (c->sub && !strcmp(c->sub, "status") && g_faults.conflict_status > 0) {
        g_faults.conflict_status--;
        g_faults.conflicts_injected++;
        conflict(c, c->name);
        goto out;
    }
    if (rv && *rv) {
        if (!orv || strcmp(rv, orv) != 0) {
            conflict(c, c->name);
            goto out;
        }
    } else if (c->t.custom && !from_patch) {
        cause_add(&cs, "FieldValueInvalid", "metadata.resourceVersion",
                  "Invalid value: 0x0: must be specified for an update");
        /* the generic store names the resource here, not the kind */
        invalid_reply(c, &cs, c->t.resource, c->name);
        goto out;
    }
    if (c->sub && !strcmp(c->sub, "status")) {
        /* A status write changes status only. */
        json_object *st = si_obj(next, "status");
        json_object *merged = dup(cur);
        if (st)
            json_object_object_add(merged, "status", json_object_get(st));
        else
            json_object_object_del(merged, "status");
        json_object_put(next);
        next = merged;
        md = meta(next);
        g_faults.status_writes++;
    } else {
        if (c->t.has_status) {
            json_object *ost = si_obj(cur, "status");
            if (ost)
                json_object_object_add(next, "status", json_object_get(ost));
            else
                json_object_object_del(next, "status");
        }
        /* Immutable metadata stays as stored. */
        static const char *const keep[] = {
            "uid",        "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
            "generation", "namespace"};
        for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
            json_object *v = si_obj(omd, keep[i]);
            if (v)
                json_object_object_add(md, keep[i], json_object_get(v));
            else
                json_object_object_del(md, keep[i]);
        }
        json_object_object_del(md, "managedFields");
        if (pod_decode_defaults(c, next))
            goto out;
        if (run_webhooks(c, "UPDATE", &next, cur, 1))
            goto out;
        md = meta(next);
        const char *name = si_str(md, "name");
        check_name(&cs, "metadata.name", name ? name : "", !strcmp(c->t.skey, "namespaces"));
        normalize_type(c, next);
        validate_type(c, next, &cs);
        if (invalid_reply(c, &cs, c->t.kind, c->name))
            goto out;
        if (c->t.has_generation && spec_changed(cur, next)) {
            json_object *g = si_obj(omd, "generation");
            json_object_object_add(md, "generation",
                                   json_object_new_int64((g ? json_object_get_int64(g) : 0) + 1));
        }
        if (run_webhooks(c, "UPDATE", &next, cur, 0))
            goto out;
        md = meta(next);
        /* the store lock was released while webhooks ran */
        if (st_get(c->t.skey, c->t.namespaced ? c->ns : "", c->name) != cur) {
            conflict(c, c->name);
            goto out;
        }
    }
    if (orv)
        set_str(md, "resourceVersion", orv);
    if (json_object_equal(next, cur)) {
        /* A no-op write is not persisted: same resourceVersion, no event. */
        json_object *p = present(c, cur);
        reply_object(c, 200, p);
        json_object_put(p);
        goto out;
    }
    json_object *fin = si_obj(md, "finalizers");
    int released = si_obj(md, "deletionTimestamp") && (!fin || !json_object_array_length(fin));
    persist_reply(c, next, 200, released);
out:
    causes_dispose(&cs);
    json_object_put(next);
}

static void do_update(rctx *c)
{
    g_faults.by_verb[VERB_UPDATE]++;
    json_object *body = write_body(c);
    if (!body)
        return;
    json_object *md = meta(body);
    const char *bname = si_str(md, "name");
    if (!bname || strcmp(bname, c->name) != 0) {
        char msg[700];
        snprintf(msg, sizeof msg,
                 "the name of the object (%.250s) does not match the name on the URL (%s)",
                 bname ? bname : "", c->name);
        bad_request(c->rs, msg);
        json_object_put(body);
        return;
    }
    if (c->t.namespaced) {
        const char *bns = si_str(md, "namespace");
        if (bns && *bns && strcmp(bns, c->ns) != 0) {
            bad_request(c->rs, "the namespace of the provided object does not match the namespace "
                               "sent on the request");
            json_object_put(body);
            return;
        }
    }
    json_object *cur = st_get(c->t.skey, c->t.namespaced ? c->ns : "", c->name);
    if (!cur) {
        if (c->t.create_on_update && !c->sub) {
            create_object(c, body);
            return;
        }
        obj_error(c, 404, "NotFound", "not found");
        json_object_put(body);
        return;
    }
    json_object_get(cur); /* keep it alive across the store replacing it */
    update_object(c, cur, body, 0);
    json_object_put(cur);
}

static void do_patch(rctx *c)
{
    g_faults.by_verb[VERB_PATCH]++;
    const char *ct = hdr(c, "Content-Type");
    char type[80] = "";
    if (ct) {
        size_t n = strcspn(ct, ";");
        snprintf(type, sizeof type, "%.*s", (int)(n < 79 ? n : 79), ct);
    }
    int kind = !strcmp(type, "application/merge-patch+json")             ? 1
               : !strcmp(type, "application/json-patch+json")            ? 2
               : !strcmp(type, "application/strategic-merge-patch+json") ? 3
                                                                         : 0;
    if (!kind || (kind == 3 && c->t.custom)) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "the body of the request was in an unknown format - accepted media types include: "
                 "application/json-patch+json, application/merge-patch+json%s",
                 c->t.custom ? "" : ", application/strategic-merge-patch+json");
        api_status(c->rs, 415, "UnsupportedMediaType", msg, NULL, NULL, NULL);
        return;
    }
    c->dry = is_dry(c, NULL);
    if (c->dry < 0)
        return;
    gq_err err = {0};
    json_object *p = si_parse_json(c->rq->body ? c->rq->body : "", c->rq->body_len, &err);
    if (!p) {
        char msg[700];
        snprintf(msg, sizeof msg, "error decoding patch: %s", err.msg);
        bad_request(c->rs, msg);
        return;
    }
    json_object *cur = st_get(c->t.skey, c->t.namespaced ? c->ns : "", c->name);
    if (!cur) {
        obj_error(c, 404, "NotFound", "not found");
        json_object_put(p);
        return;
    }
    json_object_get(cur);
    json_object *next = NULL;
    gq_code rc = kind == 1   ? patch_merge(cur, p, &next, &err)
                 : kind == 2 ? patch_json(cur, p, &next, &err)
                             : patch_strategic(cur, p, &next, &err);
    json_object_put(p);
    if (rc) {
        if (kind == 2)
            api_status(c->rs, 422, "Invalid", err.msg, NULL, NULL, NULL);
        else
            bad_request(c->rs, err.msg);
        json_object_put(cur);
        return;
    }
    if (!json_object_is_type(next, json_type_object) || check_typemeta(c, next)) {
        if (!c->rs->body)
            bad_request(c->rs, "patched object is not a JSON object");
        json_object_put(next);
        json_object_put(cur);
        return;
    }
    const char *nn = si_str(next, "metadata.name");
    if (!nn || strcmp(nn, c->name) != 0) {
        bad_request(c->rs, "metadata.name: Invalid value: the name of the object does not match "
                           "the name on the URL");
        json_object_put(next);
        json_object_put(cur);
        return;
    }
    update_object(c, cur, next, 1);
    json_object_put(cur);
}

static void success_status(rctx *c, json_object *obj)
{
    json_object *st = json_object_new_object();
    set_str(st, "kind", "Status");
    set_str(st, "apiVersion", "v1");
    json_object_object_add(st, "metadata", json_object_new_object());
    set_str(st, "status", "Success");
    json_object *d = json_object_new_object();
    set_str(d, "name", c->name);
    if (*c->t.group)
        set_str(d, "group", c->t.group);
    set_str(d, "kind", c->t.resource);
    const char *uid = si_str(obj, "metadata.uid");
    if (uid)
        set_str(d, "uid", uid);
    json_object_object_add(st, "details", d);
    api_set_json(c->rs, 200, st);
    json_object_put(st);
}

static void do_delete(rctx *c)
{
    g_faults.by_verb[VERB_DELETE]++;
    const char *ns = c->t.namespaced ? c->ns : "";
    json_object *opts = NULL;
    if (c->sub) {
        method_not_allowed(c->rs);
        return;
    }
    if (c->rq->body_len) {
        gq_err err = {0};
        opts = si_parse_json(c->rq->body, c->rq->body_len, &err);
        if (!opts || !json_object_is_type(opts, json_type_object)) {
            char msg[700];
            snprintf(msg, sizeof msg, "couldn't get version/kind; json parse error: %s",
                     opts ? "not an object" : err.msg);
            bad_request(c->rs, msg);
            goto out;
        }
    }
    c->dry = is_dry(c, opts);
    if (c->dry < 0)
        goto out;
    json_object *cur = st_get(c->t.skey, ns, c->name);
    if (!cur) {
        obj_error(c, 404, "NotFound", "not found");
        goto out;
    }
    if (!strcmp(c->t.skey, "namespaces") &&
        (!strcmp(c->name, "default") || !strcmp(c->name, "kube-system") ||
         !strcmp(c->name, "kube-public"))) {
        obj_error(c, 403, "Forbidden", "is forbidden: this namespace may not be deleted");
        goto out;
    }
    json_object *pre = si_obj(opts, "preconditions");
    const char *puid = si_str(pre, "uid"), *prv = si_str(pre, "resourceVersion");
    const char *ouid = si_str(cur, "metadata.uid"), *orv = si_str(cur, "metadata.resourceVersion");
    if ((puid && (!ouid || strcmp(puid, ouid))) || (prv && (!orv || strcmp(prv, orv)))) {
        char msg[900];
        if (puid && (!ouid || strcmp(puid, ouid)))
            snprintf(msg, sizeof msg,
                     "Precondition failed: UID in precondition: %.100s, UID in object meta: %s",
                     puid, ouid ? ouid : "");
        else
            snprintf(msg, sizeof msg,
                     "Precondition failed: ResourceVersion in precondition: %.100s, "
                     "ResourceVersion in object meta: %s",
                     prv, orv ? orv : "");
        api_status(c->rs, 409, "Conflict", msg, c->name, c->t.group, c->t.resource);
        goto out;
    }
    json_object *fin = si_obj(si_obj(cur, "metadata"), "finalizers");
    int returns_object = !strcmp(c->t.skey, "pods") || !strcmp(c->t.skey, "namespaces") ||
                         !strcmp(c->t.skey, "apiextensions.k8s.io/customresourcedefinitions");
    if (fin && json_object_is_type(fin, json_type_array) && json_object_array_length(fin)) {
        /* Finalizers hold the object: mark it and keep it. */
        if (si_str(cur, "metadata.deletionTimestamp") || c->dry) {
            json_object *p = present(c, cur);
            reply_object(c, 200, p);
            json_object_put(p);
            goto out;
        }
        json_object *next = dup(cur);
        char now[40];
        si_now_rfc3339(now, sizeof now);
        set_str(meta(next), "deletionTimestamp", now);
        json_object_object_add(meta(next), "deletionGracePeriodSeconds", json_object_new_int64(0));
        persist_reply(c, next, 200, 0);
        json_object_put(next);
        goto out;
    }
    json_object *p = present(c, cur);
    if (!c->dry)
        remove_object(c, c->t.skey, ns, c->name);
    if (returns_object) {
        if (!strcmp(c->t.skey, "namespaces")) {
            char now[40];
            si_now_rfc3339(now, sizeof now);
            set_str(meta(p), "deletionTimestamp", now);
            json_object *st = si_obj(p, "status");
            if (st)
                set_str(st, "phase", "Terminating");
        }
        reply_object(c, 200, p);
    } else {
        success_status(c, p);
    }
    json_object_put(p);
out:
    json_object_put(opts);
}

typedef struct names_ctx {
    selector *ls, *fs;
    char (*names)[2][SI_NAME_MAX + 1];
    size_t n, cap;
} names_ctx;

static int collect_names(void *ctx, const char *ns, const char *name, json_object *obj)
{
    names_ctx *nc = ctx;
    if (!sel_match_labels(nc->ls, obj) || !sel_match_fields(nc->fs, obj))
        return 0;
    if (nc->n == nc->cap) {
        size_t cap = nc->cap ? nc->cap * 2 : 16;
        void *nn = realloc(nc->names, cap * sizeof *nc->names);
        if (!nn)
            return 1;
        nc->names = nn;
        nc->cap = cap;
    }
    snprintf(nc->names[nc->n][0], SI_NAME_MAX + 1, "%s", ns);
    snprintf(nc->names[nc->n][1], SI_NAME_MAX + 1, "%s", name);
    nc->n++;
    return 0;
}

static void do_delete_collection(rctx *c)
{
    g_faults.by_verb[VERB_DELETE]++;
    gq_err err = {0};
    names_ctx nc = {0};
    if (sel_parse_labels(q(c, "labelSelector"), &nc.ls, &err) ||
        sel_parse_fields(q(c, "fieldSelector"), &c->t, &nc.fs, &err)) {
        bad_request(c->rs, err.msg);
        goto out;
    }
    c->dry = is_dry(c, NULL);
    if (c->dry < 0)
        goto out;
    st_each(c->t.skey, c->t.namespaced && c->has_ns ? c->ns : NULL, collect_names, &nc);
    json_object *items = json_object_new_array();
    for (size_t i = 0; i < nc.n; i++) {
        json_object *o = st_get(c->t.skey, nc.names[i][0], nc.names[i][1]);
        if (!o)
            continue;
        json_object_array_add(items, present(c, o));
        if (!c->dry)
            remove_object(c, c->t.skey, nc.names[i][0], nc.names[i][1]);
    }
    json_object *list = json_object_new_object();
    set_str(list, "kind", c->t.list_kind);
    char av[200], rvs[32];
    api_version_of(&c->t, av, sizeof av);
    set_str(list, "apiVersion", av);
    json_object *md = json_object_new_object();
    snprintf(rvs, sizeof rvs, "%llu", (unsigned long long)st_rv());
    set_str(md, "resourceVersion", rvs);
    json_object_object_add(list, "metadata", md);
    json_object_object_add(list, "items", items);
    api_set_json(c->rs, 200, list);
    json_object_put(list);
out:
    free(nc.names);
    sel_free(nc.ls);
    sel_free(nc.fs);
}

/* ---- routing ---- */

static int split(const char *path, char segs[SEG_MAX][SI_NAME_MAX + 1])
{
    int n = 0;
    const char *p = path;
    while (*p == '/')
        p++;
    while (*p) {
        if (n == SEG_MAX)
            return -1;
        size_t len = strcspn(p, "/");
        if (len > SI_NAME_MAX)
            return -1;
        memcpy(segs[n], p, len);
        segs[n][len] = '\0';
        n++;
        p += len;
        while (*p == '/')
            p++;
    }
    return n;
}

static void route_resource(const sreq *rq, sresp *rs, const char *group, const char *version,
                           char segs[][SI_NAME_MAX + 1], int n)
{
    rctx c = {.rq = rq, .rs = rs};
    const char *resource;
    /* segs: [namespaces/NS/]resource[/name[/sub]] */
    if (n >= 3 && !strcmp(segs[0], "namespaces") &&
        !(n == 3 && (!strcmp(segs[2], "status") || !strcmp(segs[2], "finalize")))) {
        c.has_ns = 1;
        snprintf(c.ns, sizeof c.ns, "%s", segs[1]);
        resource = segs[2];
        segs += 3;
        n -= 3;
    } else if (n >= 1) {
        resource = segs[0];
        segs += 1;
        n -= 1;
    } else {
        not_found_path(rs);
        return;
    }
    if (n > 2) {
        not_found_path(rs);
        return;
    }
    if (rtype_lookup(group, version, resource, &c.t)) {
        not_found_path(rs);
        return;
    }
    if (n >= 1) {
        c.has_name = 1;
        snprintf(c.name, sizeof c.name, "%s", segs[0]);
    }
    if (n == 2) {
        if (!strcmp(segs[1], "status") && c.t.has_status) {
            c.sub = "status";
        } else {
            not_found_path(rs);
            goto out;
        }
    }
    if (c.has_ns && !c.t.namespaced) {
        not_found_path(rs);
        goto out;
    }
    const char *m = rq->method;
    if (!c.has_name) {
        if (!strcmp(m, "GET"))
            do_list(&c);
        else if (!strcmp(m, "POST") && (c.has_ns || !c.t.namespaced))
            do_create(&c);
        else if (!strcmp(m, "DELETE") && (c.has_ns || !c.t.namespaced))
            do_delete_collection(&c);
        else
            method_not_allowed(rs);
        goto out;
    }
    if (c.t.namespaced && !c.has_ns) {
        not_found_path(rs);
        goto out;
    }
    if (!strcmp(m, "GET")) {
        g_faults.by_verb[VERB_GET]++;
        do_get(&c);
    } else if (!strcmp(m, "PUT")) {
        do_update(&c);
    } else if (!strcmp(m, "PATCH")) {
        do_patch(&c);
    } else if (!strcmp(m, "DELETE")) {
        do_delete(&c);
    } else {
        method_not_allowed(rs);
    }
out:
    rtype_dispose(&c.t);
}

void api_handle(const sreq *rq, sresp *rs)
{
    char segs[SEG_MAX][SI_NAME_MAX + 1];
    rs->code = 0;
    st_lock();
    long lat = g_faults.latency_ms;
    st_unlock();
    if (lat > 0) {
        struct timespec ts = {.tv_sec = lat / 1000, .tv_nsec = (lat % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    st_lock();
    if (faults_handle(rq, rs))
        goto out;
    if (faults_take_fail(rq->method, rq->path, rs))
        goto out;
    if (disco_handle(rq, rs) || openapi_handle(rq, rs))
        goto out;
    int n = split(rq->path, segs);
    if (n < 0) {
        not_found_path(rs);
        goto out;
    }
    if (n >= 2 && !strcmp(segs[0], "api") && !strcmp(segs[1], "v1")) {
        route_resource(rq, rs, "", "v1", segs + 2, n - 2);
    } else if (n >= 3 && !strcmp(segs[0], "apis")) {
        route_resource(rq, rs, segs[1], segs[2], segs + 3, n - 3);
    } else {
        not_found_path(rs);
    }
out:
    st_unlock();
}

void api_bootstrap(void)
{
    static const char *const names[] = {"default", "kube-system"};
    st_lock();
    for (size_t i = 0; i < 2; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}",
                 names[i]);
        sreq rq = {
            .method = "POST", .path = "/api/v1/namespaces", .body = body, .body_len = strlen(body)};
        sresp rs = {0};
        rctx c = {.rq = &rq, .rs = &rs};
        if (rtype_lookup("", "v1", "namespaces", &c.t) == 0)
            do_create(&c);
        sresp_dispose(&rs);
    }
    g_faults.by_verb[VERB_CREATE] = 0;
    st_unlock();
}
