/* Discovery documents: /version, /api, /apis, /api/v1, /apis/GROUP[/VERSION]. */
#include <stdio.h>
#include <string.h>

#include "standin.h"

static void set_str(json_object *o, const char *k, const char *v)
{
    json_object_object_add(o, k, json_object_new_string(v));
}

static json_object *str_array(const char *const *v, size_t max)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < max && v[i]; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    return a;
}

static json_object *resource_entry(const rtype *t, const char *name, const char *singular, int main)
{
    static const char *const all_verbs[] = {
        "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch", NULL};
    static const char *const sub_verbs[] = {"get", "patch", "update", NULL};
    json_object *r = json_object_new_object();
    set_str(r, "name", name);
    set_str(r, "singularName", singular);
    json_object_object_add(r, "namespaced", json_object_new_boolean(t->namespaced));
    set_str(r, "kind", t->kind);
    json_object_object_add(r, "verbs", str_array(main ? all_verbs : sub_verbs, 9));
    if (main) {
        if (t->short_names[0])
            json_object_object_add(r, "shortNames", str_array(t->short_names, 8));
        if (t->categories[0])
            json_object_object_add(r, "categories", str_array(t->categories, 4));
    }
    return r;
}

static void add_type(json_object *arr, const rtype *t)
{
    json_object_array_add(arr, resource_entry(t, t->resource, t->singular, 1));
    if (t->has_status) {
        char sub[200];
        snprintf(sub, sizeof sub, "%s/status", t->resource);
        json_object_array_add(arr, resource_entry(t, sub, "", 0));
    }
}

/* Visit the served versions of every stored CRD. */
typedef struct crd_walk {
    const char *group;   /* filter, or NULL */
    const char *version; /* filter, or NULL */
    json_object *out;    /* APIResource array or group map */
    int mode;            /* 0: resources of group/version, 1: groups */
} crd_walk;

static int crd_visit(void *ctx, const char *ns, const char *name, json_object *crd)
{
    crd_walk *w = ctx;
    const char *g = si_str(crd, "spec.group");
    json_object *vs = si_obj(si_obj(crd, "spec"), "versions");
    if (!g || !vs || !json_object_is_type(vs, json_type_array))
        return 0;
    if (w->group && strcmp(g, w->group))
        return 0;
    for (size_t i = 0; i < json_object_array_length(vs); i++) {
        json_object *v = json_object_array_get_idx(vs, i);
        const char *vn = si_str(v, "name");
        json_object *served = si_obj(v, "served");
        if (!vn || !served || !json_object_get_boolean(served))
            continue;
        if (w->mode == 1) {
            json_object *versions = si_obj(w->out, g);
            if (!versions) {
                versions = json_object_new_array();
                json_object_object_add(w->out, g, versions);
            }
            int have = 0;
            for (size_t j = 0; j < json_object_array_length(versions); j++)
                if (!strcmp(json_object_get_string(json_object_array_get_idx(versions, j)), vn))
                    have = 1;
            if (!have)
                json_object_array_add(versions, json_object_new_string(vn));
            continue;
        }
        if (w->version && strcmp(vn, w->version))
            continue;
        rtype t;
        if (rtype_lookup(g, vn,
                         si_str(crd, "spec.names.plural") ? si_str(crd, "spec.names.plural") : "",
                         &t) == 0) {
            add_type(w->out, &t);
            rtype_dispose(&t);
        }
    }
    return 0;
}

static json_object *group_entry(const char *g, json_object *versions)
{
    json_object *e = json_object_new_object();
    set_str(e, "name", g);
    json_object *vs = json_object_new_array();
    for (size_t i = 0; i < json_object_array_length(versions); i++) {
        const char *v = json_object_get_string(json_object_array_get_idx(versions, i));
        json_object *gv = json_object_new_object();
        char buf[300];
        snprintf(buf, sizeof buf, "%s/%s", g, v);
        set_str(gv, "groupVersion", buf);
        set_str(gv, "version", v);
        json_object_array_add(vs, gv);
    }
    json_object_object_add(e, "versions", vs);
    if (json_object_array_length(versions)) {
        json_object *pref = json_object_get(json_object_array_get_idx(si_obj(e, "versions"), 0));
        json_object_object_add(e, "preferredVersion", pref);
    }
    return e;
}

static json_object *all_groups(void)
{
    json_object *groups = json_object_new_object(); /* name -> [versions] in first-seen order */
    size_t n;
    const rtype *b = rtype_builtins(&n);
    for (size_t i = 0; i < n; i++) {
        if (!*b[i].group || si_obj(groups, b[i].group))
            continue;
        json_object *vs = json_object_new_array();
        json_object_array_add(vs, json_object_new_string(b[i].version));
        json_object_object_add(groups, b[i].group, vs);
    }
    crd_walk w = {.out = groups, .mode = 1};
    st_each("apiextensions.k8s.io/customresourcedefinitions", NULL, crd_visit, &w);
    return groups;
}

static void reply(sresp *rs, json_object *o)
{
    api_set_json(rs, 200, o);
    json_object_put(o);
}

static int resource_list(sresp *rs, const char *group, const char *version)
{
    json_object *res = json_object_new_array();
    size_t n;
    const rtype *b = rtype_builtins(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(b[i].group, group) && !strcmp(b[i].version, version))
            add_type(res, &b[i]);
    if (*group) {
        crd_walk w = {.group = group, .version = version, .out = res};
        st_each("apiextensions.k8s.io/customresourcedefinitions", NULL, crd_visit, &w);
    }
    if (!json_object_array_length(res) && !(!*group && !strcmp(version, "v1"))) {
        json_object_put(res);
        return 0;
    }
    json_object *o = json_object_new_object();
    set_str(o, "kind", "APIResourceList");
    set_str(o, "apiVersion", "v1");
    char gv[300];
    snprintf(gv, sizeof gv, "%s%s%s", group, *group ? "/" : "", version);
    set_str(o, "groupVersion", gv);
    json_object_object_add(o, "resources", res);
    reply(rs, o);
    return 1;
}

int disco_handle(const sreq *rq, sresp *rs)
{
    const char *p = rq->path;
    if (strcmp(rq->method, "GET") != 0)
        return 0;
    if (!strcmp(p, "/healthz") || !strcmp(p, "/readyz") || !strcmp(p, "/livez")) {
        rs->code = 200;
        rs->content_type = "text/plain; charset=utf-8";
        rs->body = strdup("ok");
        return 1;
    }
    if (!strcmp(p, "/version")) {
        json_object *o = json_object_new_object();
        set_str(o, "major", "1");
        set_str(o, "minor", "32");
        set_str(o, "gitVersion", "v1.32.0-standin");
        set_str(o, "gitCommit", "0000000000000000000000000000000000000000");
        set_str(o, "gitTreeState", "clean");
        set_str(o, "buildDate", "2024-12-11T00:00:00Z");
        set_str(o, "goVersion", "go1.23.3");
        set_str(o, "compiler", "gc");
        set_str(o, "platform", "linux/amd64");
        reply(rs, o);
        return 1;
    }
    if (!strcmp(p, "/api") || !strcmp(p, "/api/")) {
        json_object *o = json_object_new_object();
        set_str(o, "kind", "APIVersions");
        json_object *v = json_object_new_array();
        json_object_array_add(v, json_object_new_string("v1"));
        json_object_object_add(o, "versions", v);
        json_object *addr = json_object_new_array();
        json_object *a = json_object_new_object();
        set_str(a, "clientCIDR", "0.0.0.0/0");
        set_str(a, "serverAddress", "127.0.0.1:6443");
        json_object_array_add(addr, a);
        json_object_object_add(o, "serverAddressByClientCIDRs", addr);
        reply(rs, o);
        return 1;
    }
    if (!strcmp(p, "/api/v1") || !strcmp(p, "/api/v1/"))
        return resource_list(rs, "", "v1");
    if (!strcmp(p, "/apis") || !strcmp(p, "/apis/")) {
        json_object *groups = all_groups();
        json_object *o = json_object_new_object();
        set_str(o, "kind", "APIGroupList");
        set_str(o, "apiVersion", "v1");
        json_object *arr = json_object_new_array();
        json_object_object_foreach(groups, g, vs)
        {
            json_object_array_add(arr, group_entry(g, vs));
        }
        json_object_object_add(o, "groups", arr);
        json_object_put(groups);
        reply(rs, o);
        return 1;
    }
    if (!strncmp(p, "/apis/", 6)) {
        char g[200], v[100];
        const char *rest = p + 6;
        size_t gl = strcspn(rest, "/");
        if (gl == 0 || gl >= sizeof g)
            return 0;
        memcpy(g, rest, gl);
        g[gl] = '\0';
        rest += gl;
        if (!*rest || !strcmp(rest, "/")) {
            json_object *groups = all_groups();
            json_object *vs = si_obj(groups, g);
            int found = vs != NULL;
            if (found) {
                json_object *o = group_entry(g, vs);
                set_str(o, "kind", "APIGroup");
                set_str(o, "apiVersion", "v1");
                reply(rs, o);
            }
            json_object_put(groups);
            return found;
        }
        rest++;
        size_t vl = strcspn(rest, "/");
        if (vl == 0 || vl >= sizeof v || (rest[vl] && strcmp(rest + vl, "/")))
            return 0;
        memcpy(v, rest, vl);
        v[vl] = '\0';
        return resource_list(rs, g, v);
    }
    return 0;
}
