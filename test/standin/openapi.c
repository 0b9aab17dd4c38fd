/* Just enough OpenAPI for kubectl: an empty v2 document (kubectl downloads it
 * before validating) and v3 per-group-version documents whose PATCH
 * operations declare the fieldValidation parameter, so kubectl leaves schema
 * validation to the server instead of refusing to run. */
#include <stdio.h>
#include <string.h>

#include "standin.h"

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

static void add_patch_path(json_object *paths, const rtype *t)
{
    char p[700];
    if (*t->group)
        snprintf(p, sizeof p, "/apis/%s/%s/%s%s/{name}", t->group, t->version,
                 t->namespaced ? "namespaces/{namespace}/" : "", t->resource);
    else
        snprintf(p, sizeof p, "/api/%s/%s%s/{name}", t->version,
                 t->namespaced ? "namespaces/{namespace}/" : "", t->resource);
    json_object *gvk = json_object_new_object();
    json_object_object_add(gvk, "group", json_object_new_string(t->group));
    json_object_object_add(gvk, "version", json_object_new_string(t->version));
    json_object_object_add(gvk, "kind", json_object_new_string(t->kind));
    json_object *param = json_object_new_object();
    json_object_object_add(param, "name", json_object_new_string("fieldValidation"));
    json_object_object_add(param, "in", json_object_new_string("query"));
    json_object *schema = json_object_new_object();
    json_object_object_add(schema, "type", json_object_new_string("string"));
    json_object_object_add(param, "schema", schema);
    json_object *params = json_object_new_array();
    json_object_array_add(params, param);
    json_object *op = json_object_new_object();
    json_object_object_add(op, "x-kubernetes-group-version-kind", gvk);
    json_object_object_add(op, "parameters", params);
    json_object_object_add(op, "responses", json_object_new_object());
    json_object *item = json_object_new_object();
    json_object_object_add(item, "patch", op);
    json_object_object_add(paths, p, item);
}

typedef struct gv_walk {
    json_object *index; /* "apis/g/v" -> {} */
    const char *group, *version;
    json_object *paths;
} gv_walk;

static int crd_visit(void *ctx, const char *ns, const char *name, json_object *crd)
{
    gv_walk *w = ctx;
    const char *g = si_str(crd, "spec.group"), *plural = si_str(crd, "spec.names.plural");
    json_object *vs = si_obj(si_obj(crd, "spec"), "versions");
    if (!g || !plural || !vs || !json_object_is_type(vs, json_type_array))
        return 0;
    for (size_t i = 0; i < json_object_array_length(vs); i++) {
        const char *vn = si_str(json_object_array_get_idx(vs, i), "name");
        rtype t;
        if (!vn || rtype_lookup(g, vn, plural, &t))
            continue; /* not served */
        if (w->index) {
            char key[300];
            snprintf(key, sizeof key, "apis/%s/%s", g, vn);
            json_object_object_add(w->index, key, json_object_new_object());
        } else if (!strcmp(g, w->group) && !strcmp(vn, w->version)) {
            add_patch_path(w->paths, &t);
        }
        rtype_dispose(&t);
    }
    return 0;
}

static json_object *gv_doc(const char *group, const char *version)
{
    json_object *paths = json_object_new_object();
    size_t n;
    const rtype *b = rtype_builtins(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(b[i].group, group) && !strcmp(b[i].version, version))
            add_patch_path(paths, &b[i]);
    gv_walk w = {.group = group, .version = version, .paths = paths};
    st_each("apiextensions.k8s.io/customresourcedefinitions", NULL, crd_visit, &w);
    if (!json_object_object_length(paths)) {
        json_object_put(paths);
        return NULL;
    }
    json_object *doc = json_object_new_object();
    json_object_object_add(doc, "openapi", json_object_new_string("3.0.0"));
    json_object *info = json_object_new_object();
    json_object_object_add(info, "title", json_object_new_string("Kubernetes"));
    json_object_object_add(info, "version", json_object_new_string("v1.32.0"));
    json_object_object_add(doc, "info", info);
    json_object_object_add(doc, "paths", paths);
    return doc;
}

static void index_doc(sresp *rs)
{
    json_object *index = json_object_new_object();
    json_object_object_add(index, "api/v1", json_object_new_object());
    size_t n;
    const rtype *b = rtype_builtins(&n);
    for (size_t i = 0; i < n; i++) {
        if (!*b[i].group)
            continue;
        char key[300];
        snprintf(key, sizeof key, "apis/%s/%s", b[i].group, b[i].version);
        json_object_object_add(index, key, json_object_new_object());
    }
    gv_walk w = {.index = index};
    st_each("apiextensions.k8s.io/customresourcedefinitions", NULL, crd_visit, &w);
    /* The hash in each URL changes with the document, as kube-apiserver's does,
     * so clients that cache by URL see CRD changes. */
    json_object_object_foreach(index, key, val)
    {
        char g[200] = "", v[100] = "";
        if (!strcmp(key, "api/v1"))
            snprintf(v, sizeof v, "v1");
        else
            sscanf(key, "apis/%199[^/]/%99s", g, v);
        json_object *doc = gv_doc(g, v);
        char url[400];
        snprintf(url, sizeof url, "/openapi/v3/%s?hash=%08X", key,
                 doc ? fnv1a(si_to_json(doc)) : 0u);
        json_object_put(doc);
        json_object_object_add(val, "serverRelativeURL", json_object_new_string(url));
    }
    json_object *root = json_object_new_object();
    json_object_object_add(root, "paths", index);
    api_set_json(rs, 200, root);
    json_object_put(root);
}

int openapi_handle(const sreq *rq, sresp *rs)
{
    const char *p = rq->path;
    if (strncmp(p, "/openapi/", 9) != 0 || strcmp(rq->method, "GET") != 0)
        return 0;
    if (!strcmp(p, "/openapi/v2")) {
        const char *accept = rq->header ? rq->header(rq->ctx, "Accept") : NULL;
        if (accept && strstr(accept, "protobuf")) {
            /* An empty message is a valid (empty) openapi_v2.Document. */
            rs->code = 200;
            rs->content_type = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
            rs->body = strdup("");
        } else {
            json_object *o = json_tokener_parse(
                "{\"swagger\":\"2.0\",\"info\":{\"title\":\"Kubernetes\",\"version\":\"v1.32.0\"},"
                "\"paths\":{},\"definitions\":{}}");
            api_set_json(rs, 200, o);
            json_object_put(o);
        }
        return 1;
    }
    if (!strcmp(p, "/openapi/v3") || !strcmp(p, "/openapi/v3/")) {
        index_doc(rs);
        return 1;
    }
    char g[200] = "", v[100] = "";
    if (!strcmp(p, "/openapi/v3/api/v1"))
        snprintf(v, sizeof v, "v1");
    else if (sscanf(p, "/openapi/v3/apis/%199[^/]/%99[^/]", g, v) != 2)
        return 0;
    json_object *doc = gv_doc(g, v);
    if (!doc)
        return 0;
    api_set_json(rs, 200, doc);
    json_object_put(doc);
    return 1;
}
