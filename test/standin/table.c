/* Server-side printing: meta.k8s.io/v1 Table for kubectl get. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "standin.h"

void table_age(long long s, char *buf, size_t n)
{
    /* apimachinery's duration.HumanDuration */
    if (s < -1) {
        snprintf(buf, n, "<invalid>");
        return;
    }
    if (s < 0)
        s = 0;
    if (s < 120) {
        snprintf(buf, n, "%llds", s);
        return;
    }
    long long m = s / 60, h = s / 3600;
    if (m < 10) {
        if (s % 60 == 0)
            snprintf(buf, n, "%lldm", m);
        else
            snprintf(buf, n, "%lldm%llds", m, s % 60);
    } else if (m < 180) {
        snprintf(buf, n, "%lldm", m);
    } else if (h < 8) {
        if (m % 60 == 0)
            snprintf(buf, n, "%lldh", h);
        else
            snprintf(buf, n, "%lldh%lldm", h, m % 60);
    } else if (h < 48) {
        snprintf(buf, n, "%lldh", h);
    } else if (h < 24 * 8) {
        if (h % 24 == 0)
            snprintf(buf, n, "%lldd", h / 24);
        else
            snprintf(buf, n, "%lldd%lldh", h / 24, h % 24);
    } else if (h < 24 * 365 * 2) {
        snprintf(buf, n, "%lldd", h / 24);
    } else if (h < 24 * 365 * 8) {
        long long dy = (h / 24) % 365;
        if (dy == 0)
            snprintf(buf, n, "%lldy", h / 24 / 365);
        else
            snprintf(buf, n, "%lldy%lldd", h / 24 / 365, dy);
    } else {
        snprintf(buf, n, "%lldy", h / 24 / 365);
    }
}

static json_object *age_cell(json_object *obj, const char *path_val)
{
    long long t = si_parse_rfc3339(path_val);
    if (t < 0)
        return NULL;
    char buf[32];
    table_age((long long)time(NULL) - t, buf, sizeof buf);
    return json_object_new_string(buf);
}

/* Evaluate the JSONPath subset CRD printer columns use: .a.b, .a['x-y'],
 * .a["x"], .a.x-y and .a[0]. Returns a borrowed value or NULL. */
static json_object *jsonpath(json_object *o, const char *path)
{
    const char *p = path;
    char key[256];
    if (*p == '{') /* tolerate {.a.b} */
        p++;
    while (o && *p && *p != '}') {
        size_t n = 0;
        if (*p == '.') {
            p++;
            while (*p && *p != '.' && *p != '[' && *p != '}' && n + 1 < sizeof key)
                key[n++] = *p++;
            key[n] = '\0';
            if (!n)
                return NULL;
            o = si_obj(o, key);
        } else if (*p == '[') {
            p++;
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                while (*p && *p != q && n + 1 < sizeof key)
                    key[n++] = *p++;
                key[n] = '\0';
                if (*p != q || p[1] != ']')
                    return NULL;
                p += 2;
                o = si_obj(o, key);
            } else {
                char *end;
                long idx = strtol(p, &end, 10);
                if (end == p || *end != ']' || !json_object_is_type(o, json_type_array))
                    return NULL;
                p = end + 1;
                if (idx < 0)
                    idx += (long)json_object_array_length(o);
                if (idx < 0 || (size_t)idx >= json_object_array_length(o))
                    return NULL;
                o = json_object_array_get_idx(o, (size_t)idx);
            }
        } else {
            return NULL;
        }
    }
    return o;
}

static json_object *coldef(const char *name, const char *type, const char *format, const char *desc,
                           int priority)
{
    json_object *c = json_object_new_object();
    json_object_object_add(c, "name", json_object_new_string(name));
    json_object_object_add(c, "type", json_object_new_string(type));
    json_object_object_add(c, "format", json_object_new_string(format ? format : ""));
    json_object_object_add(c, "description", json_object_new_string(desc ? desc : ""));
    json_object_object_add(c, "priority", json_object_new_int(priority));
    return c;
}

static const char name_desc[] =
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
static const char age_desc[] =
    "CreationTimestamp is a timestamp representing the server time when this object was created.";

static json_object *crd_columns(const rtype *t)
{
    json_object *cols = si_obj(t->crd_version, "additionalPrinterColumns");
    if (cols && json_object_is_type(cols, json_type_array) && json_object_array_length(cols))
        return cols;
    return NULL;
}

static json_object *columns(const rtype *t)
{
    json_object *defs = json_object_new_array();
    json_object_array_add(defs, coldef("Name", "string", "name", name_desc, 0));
    if (t->custom) {
        json_object *cols = crd_columns(t);
        if (!cols) {
            json_object_array_add(defs, coldef("Age", "date", "", age_desc, 0));
            return defs;
        }
        for (size_t i = 0; i < json_object_array_length(cols); i++) {
            json_object *c = json_object_array_get_idx(cols, i);
            json_object *pr = si_obj(c, "priority");
            json_object_array_add(defs, coldef(si_str(c, "name") ? si_str(c, "name") : "",
                                               si_str(c, "type") ? si_str(c, "type") : "string",
                                               si_str(c, "format"), si_str(c, "description"),
                                               pr ? json_object_get_int(pr) : 0));
        }
        return defs;
    }
    if (!strcmp(t->skey, "pods")) {
        json_object_array_add(
            defs, coldef("Ready", "string", "",
                         "The aggregate readiness state of this pod for accepting traffic.", 0));
        json_object_array_add(defs,
                              coldef("Status", "string", "",
                                     "The aggregate status of the containers in this pod.", 0));
        json_object_array_add(
            defs, coldef("Restarts", "string", "",
                         "The number of times the containers in this pod have been restarted and "
                         "when the last container in this pod has restarted.",
                         0));
        json_object_array_add(defs, coldef("Age", "string", "", age_desc, 0));
        json_object_array_add(defs, coldef("IP", "string", "",
                                           "IP address allocated to the pod. Routable at least "
                                           "within the cluster. Empty if not yet allocated.",
                                           1));
        json_object_array_add(
            defs, coldef("Node", "string", "",
                         "NodeName is a request to schedule this pod onto a specific node.", 1));
        return defs;
    }
    if (!strcmp(t->skey, "namespaces")) {
        json_object_array_add(defs,
                              coldef("Status", "string", "", "The status of the namespace", 0));
    }
    json_object_array_add(defs, coldef("Age", "string", "", age_desc, 0));
    return defs;
}

static json_object *value_cell(json_object *v, const char *type)
{
    if (!v || json_object_is_type(v, json_type_null))
        return NULL;
    if (!strcmp(type, "date") && json_object_is_type(v, json_type_string))
        return age_cell(NULL, json_object_get_string(v));
    if (!strcmp(type, "integer") && json_object_is_type(v, json_type_int))
        return json_object_new_int64(json_object_get_int64(v));
    if (!strcmp(type, "number") &&
        (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
        return json_object_new_double(json_object_get_double(v));
    if (!strcmp(type, "boolean") && json_object_is_type(v, json_type_boolean))
        return json_object_new_boolean(json_object_get_boolean(v));
    if (json_object_is_type(v, json_type_string))
        return json_object_new_string(json_object_get_string(v));
    if (!strcmp(type, "string"))
        return json_object_new_string(si_to_json(v));
    return NULL;
}

static void pod_cells(json_object *cells, json_object *obj)
{
    json_object *cs = si_obj(si_obj(obj, "status"), "containerStatuses");
    json_object *ctrs = si_obj(si_obj(obj, "spec"), "containers");
    size_t total =
        ctrs && json_object_is_type(ctrs, json_type_array) ? json_object_array_length(ctrs) : 0;
    size_t ready = 0;
    long long restarts = 0;
    for (size_t i = 0;
         cs && json_object_is_type(cs, json_type_array) && i < json_object_array_length(cs); i++) {
        json_object *c = json_object_array_get_idx(cs, i);
        json_object *r = si_obj(c, "ready");
        if (r && json_object_get_boolean(r))
            ready++;
        json_object *rc = si_obj(c, "restartCount");
        if (rc)
            restarts += json_object_get_int64(rc);
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%zu/%zu", ready, total);
    json_object_array_add(cells, json_object_new_string(buf));
    const char *phase = si_str(obj, "status.phase");
    const char *reason = si_str(obj, "status.reason");
    if (si_str(obj, "metadata.deletionTimestamp"))
        phase = "Terminating";
    else if (reason)
        phase = reason;
    json_object_array_add(cells, json_object_new_string(phase ? phase : "Unknown"));
    json_object_array_add(cells, json_object_new_int64(restarts));
}

static json_object *row_object(json_object *obj, const char *include)
{
    if (include && !strcmp(include, "None"))
        return NULL;
    if (include && !strcmp(include, "Object"))
        return json_object_get(obj);
    json_object *p = json_object_new_object();
    json_object_object_add(p, "kind", json_object_new_string("PartialObjectMetadata"));
    json_object_object_add(p, "apiVersion", json_object_new_string("meta.k8s.io/v1"));
    json_object *md = si_obj(obj, "metadata");
    json_object_object_add(p, "metadata", md ? json_object_get(md) : json_object_new_object());
    return p;
}

json_object *table_build(const rtype *t, json_object *items, const char *rv, const char *include,
                         int with_columns)
{
    json_object *tab = json_object_new_object();
    json_object_object_add(tab, "kind", json_object_new_string("Table"));
    json_object_object_add(tab, "apiVersion", json_object_new_string("meta.k8s.io/v1"));
    json_object *md = json_object_new_object();
    if (rv)
        json_object_object_add(md, "resourceVersion", json_object_new_string(rv));
    json_object_object_add(tab, "metadata", md);
    json_object *defs = columns(t);
    json_object *rows = json_object_new_array();
    json_object *crdcols = t->custom ? crd_columns(t) : NULL;
    for (size_t i = 0; i < json_object_array_length(items); i++) {
        json_object *obj = json_object_array_get_idx(items, i);
        json_object *cells = json_object_new_array();
        const char *name = si_str(obj, "metadata.name");
        json_object_array_add(cells, json_object_new_string(name ? name : ""));
        const char *created = si_str(obj, "metadata.creationTimestamp");
        if (t->custom && crdcols) {
            for (size_t c = 0; c < json_object_array_length(crdcols); c++) {
                json_object *col = json_object_array_get_idx(crdcols, c);
                const char *jp = si_str(col, "jsonPath");
                const char *type = si_str(col, "type");
                json_object_array_add(
                    cells, value_cell(jp ? jsonpath(obj, jp) : NULL, type ? type : "string"));
            }
        } else {
            if (!strcmp(t->skey, "pods"))
                pod_cells(cells, obj);
            if (!strcmp(t->skey, "namespaces")) {
                const char *ph = si_str(obj, "status.phase");
                json_object_array_add(cells, json_object_new_string(ph ? ph : ""));
            }
            json_object *age = created ? age_cell(obj, created) : NULL;
            json_object_array_add(cells, age ? age : json_object_new_string("<unknown>"));
            if (!strcmp(t->skey, "pods")) {
                const char *ip = si_str(obj, "status.podIP");
                const char *node = si_str(obj, "spec.nodeName");
                json_object_array_add(cells, json_object_new_string(ip ? ip : "<none>"));
                json_object_array_add(cells, json_object_new_string(node ? node : "<none>"));
            }
        }
        json_object *row = json_object_new_object();
        json_object_object_add(row, "cells", cells);
        json_object *ro = row_object(obj, include);
        if (ro)
            json_object_object_add(row, "object", ro);
        json_object_array_add(rows, row);
    }
    if (with_columns)
        json_object_object_add(tab, "columnDefinitions", defs);
    else
        json_object_put(defs);
    json_object_object_add(tab, "rows", rows);
    return tab;
}
