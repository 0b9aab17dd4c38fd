/* JSON merge patch (RFC 7386), JSON patch (RFC 6902) and an approximation of
 * Kubernetes strategic merge patch (see docs/standin.md). */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

static json_object *dup(json_object *o)
{
    json_object *c = NULL;
    if (json_object_deep_copy(o, &c, NULL) != 0)
        return NULL;
    return c;
}

/* Merge patch onto target in place (target is a private copy). */
static gq_code merge_into(json_object **target, json_object *patch, int strategic, int depth,
                          gq_err *err);

static const char *list_merge_key(const char *field)
{
    /* The patchMergeKey of the core/v1 lists gpuquota's users patch, and of
     * admissionregistration/v1 webhook configurations (kubectl apply sends a
     * changed webhook as a partial entry to be merged by name). */
    static const char *const by_name[] = {"containers",
                                          "initContainers",
                                          "ephemeralContainers",
                                          "env",
                                          "volumes",
                                          "volumeMounts",
                                          "volumeDevices",
                                          "imagePullSecrets",
                                          "resourceClaims",
                                          "readinessGates",
                                          "conditions",
                                          "envFrom",
                                          "webhooks",
                                          "matchConditions",
                                          NULL};
    if (!strcmp(field, "ports"))
        return "containerPort";
    if (!strcmp(field, "conditions"))
        return "type";
    if (!strcmp(field, "readinessGates"))
        return "conditionType";
    if (!strcmp(field, "hostAliases"))
        return "ip";
    if (!strcmp(field, "tolerations") || !strcmp(field, "envFrom"))
        return NULL; /* atomic lists */
    for (size_t i = 0; by_name[i]; i++)
        if (!strcmp(field, by_name[i]))
            return "name";
    return NULL;
}

static int primitive_set_list(const char *field)
{
    return !strcmp(field, "finalizers");
}

static json_object *find_by_key(json_object *arr, const char *key, json_object *val, size_t *idx)
{
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *e = json_object_array_get_idx(arr, i);
        json_object *k = si_obj(e, key);
        if (k && json_object_equal(k, val)) {
            *idx = i;
            return e;
        }
    }
    return NULL;
}

static gq_code merge_list(json_object *obj, const char *field, json_object *cur, json_object *plist,
                          int depth, gq_err *err)
{
    const char *mk = list_merge_key(field);
    if (primitive_set_list(field) && cur && json_object_is_type(cur, json_type_array)) {
        json_object *res = dup(cur);
        if (!res)
            return gq_err_oom(err);
        for (size_t i = 0; i < json_object_array_length(plist); i++) {
            json_object *v = json_object_array_get_idx(plist, i);
            int have = 0;
            for (size_t j = 0; j < json_object_array_length(res); j++)
                if (json_object_equal(v, json_object_array_get_idx(res, j)))
                    have = 1;
            if (!have)
                json_object_array_add(res, dup(v));
        }
        json_object_object_add(obj, field, res);
        return GQ_OK;
    }
    if (!mk || !cur || !json_object_is_type(cur, json_type_array)) {
        /* Not a keyed list (or nothing to merge into): replace, dropping directives. */
        json_object *res = json_object_new_array();
        for (size_t i = 0; res && i < json_object_array_length(plist); i++) {
            json_object *e = json_object_array_get_idx(plist, i);
            json_object *d = si_obj(e, "$patch");
            if (d && !strcmp(json_object_get_string(d), "delete"))
                continue;
            json_object *c = dup(e);
            if (c && json_object_is_type(c, json_type_object))
                json_object_object_del(c, "$patch");
            json_object_array_add(res, c);
        }
        if (!res)
            return gq_err_oom(err);
        json_object_object_add(obj, field, res);
        return GQ_OK;
    }
    json_object *res = dup(cur);
    if (!res)
        return gq_err_oom(err);
    for (size_t i = 0; i < json_object_array_length(plist); i++) {
        json_object *pe = json_object_array_get_idx(plist, i);
        json_object *kv = si_obj(pe, mk);
        if (!kv) {
            json_object_put(res);
            return gq_err_set(err, GQ_EINVAL, "map: %s does not contain declared merge key: %s",
                              si_to_json(pe), mk);
        }
        json_object *d = si_obj(pe, "$patch");
        size_t idx = 0;
        json_object *have = find_by_key(res, mk, kv, &idx);
        if (d && !strcmp(json_object_get_string(d), "delete")) {
            if (have)
                json_object_array_del_idx(res, idx, 1);
            continue;
        }
        if (have) {
            json_object *merged = dup(have);
            gq_code rc = merged ? merge_into(&merged, pe, 1, depth + 1, err) : gq_err_oom(err);
            if (rc) {
                json_object_put(merged);
                json_object_put(res);
                return rc;
            }
            json_object_array_put_idx(res, idx, merged);
        } else {
            json_object *c = dup(pe);
            if (c)
                json_object_object_del(c, "$patch");
            json_object_array_add(res, c);
        }
    }
    json_object_object_add(obj, field, res);
    return GQ_OK;
}

static gq_code merge_into(json_object **target, json_object *patch, int strategic, int depth,
                          gq_err *err)
{
    if (depth > SI_JSON_DEPTH)
        return gq_err_set(err, GQ_ELIMIT, "patch nested too deeply");
    if (!json_object_is_type(patch, json_type_object)) {
        json_object_put(*target);
        *target = dup(patch);
        return GQ_OK;
    }
    if (strategic) {
        json_object *d = si_obj(patch, "$patch");
        if (d && !strcmp(json_object_get_string(d), "replace")) {
            json_object_put(*target);
            *target = dup(patch);
            if (*target)
                json_object_object_del(*target, "$patch");
            return GQ_OK;
        }
    }
    if (!*target || !json_object_is_type(*target, json_type_object)) {
        json_object_put(*target);
        *target = json_object_new_object();
        if (!*target)
            return gq_err_oom(err);
    }
    json_object_object_foreach(patch, k, v)
    {
        if (strategic && (k[0] == '$')) {
            /* $setElementOrder/..., $retainKeys, $deleteFromPrimitiveList/...:
             * ordering and pruning hints this approximation ignores. */
            continue;
        }
        if (!v) {
            json_object_object_del(*target, k);
            continue;
        }
        json_object *cur = si_obj(*target, k);
        if (strategic && json_object_is_type(v, json_type_array)) {
            gq_code rc = merge_list(*target, k, cur, v, depth, err);
            if (rc)
                return rc;
            continue;
        }
        if (json_object_is_type(v, json_type_object)) {
            json_object *child = cur ? dup(cur) : NULL;
            gq_code rc = merge_into(&child, v, strategic, depth + 1, err);
            if (rc) {
                json_object_put(child);
                return rc;
            }
            json_object_object_add(*target, k, child);
        } else {
            json_object_object_add(*target, k, dup(v));
        }
    }
    return GQ_OK;
}

static gq_code do_merge(json_object *target, json_object *patch, int strategic, json_object **out,
                        gq_err *err)
{
    if (!json_object_is_type(patch, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "patch body must be a JSON object");
    json_object *res = dup(target);
    if (!res)
        return gq_err_oom(err);
    gq_code rc = merge_into(&res, patch, strategic, 0, err);
    if (rc) {
        json_object_put(res);
        return rc;
    }
    *out = res;
    return GQ_OK;
}

gq_code patch_merge(json_object *target, json_object *patch, json_object **out, gq_err *err)
{
    return do_merge(target, patch, 0, out, err);
}

gq_code patch_strategic(json_object *target, json_object *patch, json_object **out, gq_err *err)
{
    return do_merge(target, patch, 1, out, err);
}

/* ---- RFC 6902 ---- */

/* Decode one reference token (~1 -> '/', ~0 -> '~'); returns bytes consumed. */
static gq_code ptr_token(const char **p, char *tok, size_t n, gq_err *err)
{
    size_t len = 0;
    while (**p && **p != '/') {
        char c = **p;
        if (c == '~') {
            char e = (*p)[1];
            if (e == '0')
                c = '~';
            else if (e == '1')
                c = '/';
            else
                return gq_err_set(err, GQ_EINVAL, "invalid JSON pointer escape");
            (*p)++;
        }
        if (len + 1 >= n)
            return gq_err_set(err, GQ_ELIMIT, "JSON pointer token too long");
        tok[len++] = c;
        (*p)++;
    }
    tok[len] = '\0';
    return GQ_OK;
}

static int parse_index(const char *tok, size_t *idx)
{
    if (!*tok || (tok[0] == '0' && tok[1]))
        return -1;
    size_t v = 0;
    for (const char *c = tok; *c; c++) {
        if (*c < '0' || *c > '9' || v > 100000000)
            return -1;
        v = v * 10 + (size_t)(*c - '0');
    }
    *idx = v;
    return 0;
}

/* Resolve the parent of a pointer; *last gets the final token. */
static gq_code resolve_parent(json_object *root, const char *path, json_object **parent, char *last,
                              size_t n, gq_err *err)
{
    if (*path != '/')
        return gq_err_set(err, GQ_EINVAL, "JSON pointer must start with '/': %s", path);
    const char *p = path;
    json_object *cur = root;
    for (;;) {
        p++; /* skip '/' */
        gq_code rc = ptr_token(&p, last, n, err);
        if (rc)
            return rc;
        if (!*p) {
            *parent = cur;
            return GQ_OK;
        }
        json_object *next = NULL;
        if (json_object_is_type(cur, json_type_object)) {
            next = si_obj(cur, last);
        } else if (json_object_is_type(cur, json_type_array)) {
            size_t idx;
            if (!parse_index(last, &idx) && idx < json_object_array_length(cur))
                next = json_object_array_get_idx(cur, idx);
        }
        if (!next)
            return gq_err_set(err, GQ_EINVAL, "doc is missing path: \"%s\"", path);
        cur = next;
    }
}

static json_object *ptr_get(json_object *root, const char *path, gq_err *err)
{
    if (!*path)
        return root;
    json_object *parent;
    char last[512];
    if (resolve_parent(root, path, &parent, last, sizeof last, err))
        return NULL;
    if (json_object_is_type(parent, json_type_object))
        return si_obj(parent, last);
    size_t idx;
    if (json_object_is_type(parent, json_type_array) && !parse_index(last, &idx) &&
        idx < json_object_array_length(parent))
        return json_object_array_get_idx(parent, idx);
    return NULL;
}

static gq_code ptr_remove(json_object *root, const char *path, json_object **removed, gq_err *err)
{
    json_object *parent;
    char last[512];
    gq_code rc = resolve_parent(root, path, &parent, last, sizeof last, err);
    if (rc)
        return rc;
    if (json_object_is_type(parent, json_type_object)) {
        json_object *v = si_obj(parent, last);
        if (!si_obj(parent, last) && !json_object_object_get_ex(parent, last, NULL))
            return gq_err_set(err, GQ_EINVAL, "Unable to remove nonexistent key: %s: missing value",
                              last);
        if (removed)
            *removed = json_object_get(v);
        json_object_object_del(parent, last);
        return GQ_OK;
    }
    size_t idx;
    if (json_object_is_type(parent, json_type_array) && !parse_index(last, &idx) &&
        idx < json_object_array_length(parent)) {
        if (removed)
            *removed = json_object_get(json_object_array_get_idx(parent, idx));
        json_object_array_del_idx(parent, idx, 1);
        return GQ_OK;
    }
    return gq_err_set(err, GQ_EINVAL,
                      "remove operation does not apply: doc is missing path: \"%s\"", path);
}

/* json-c 0.16 has no insert: lift the tail out, append, put the tail back. */
static void array_insert(json_object *arr, size_t idx, json_object *val)
{
    size_t len = json_object_array_length(arr);
    json_object *tail = json_object_new_array_ext((int)(len - idx));
    for (size_t i = idx; tail && i < len; i++)
        json_object_array_add(tail, json_object_get(json_object_array_get_idx(arr, i)));
    if (len > idx)
        json_object_array_del_idx(arr, idx, len - idx);
    json_object_array_add(arr, val);
    for (size_t i = 0; tail && i < json_object_array_length(tail); i++)
        json_object_array_add(arr, json_object_get(json_object_array_get_idx(tail, i)));
    json_object_put(tail);
}

/* Insert val (owned) at path. */
static gq_code ptr_add(json_object **root, const char *path, json_object *val, gq_err *err)
{
    if (!*path) {
        json_object_put(*root);
        *root = val;
        return GQ_OK;
    }
    json_object *parent;
    char last[512];
    gq_code rc = resolve_parent(*root, path, &parent, last, sizeof last, err);
    if (rc) {
        json_object_put(val);
        return rc;
    }
    if (json_object_is_type(parent, json_type_object)) {
        json_object_object_add(parent, last, val);
        return GQ_OK;
    }
    if (json_object_is_type(parent, json_type_array)) {
        size_t len = json_object_array_length(parent), idx;
        if (!strcmp(last, "-")) {
            json_object_array_add(parent, val);
            return GQ_OK;
        }
        if (parse_index(last, &idx) || idx > len) {
            json_object_put(val);
            return gq_err_set(err, GQ_EINVAL,
                              "add operation does not apply: doc is missing path: \"%s\"", path);
        }
        array_insert(parent, idx, val);
        return GQ_OK;
    }
    json_object_put(val);
    return gq_err_set(err, GQ_EINVAL, "add operation does not apply: doc is missing path: \"%s\"",
                      path);
}

gq_code patch_json(json_object *target, json_object *ops, json_object **out, gq_err *err)
{
    if (!json_object_is_type(ops, json_type_array))
        return gq_err_set(err, GQ_EINVAL, "json patch must be a JSON array of operations");
    json_object *doc = dup(target);
    if (!doc)
        return gq_err_oom(err);
    gq_code rc = GQ_OK;
    for (size_t i = 0; i < json_object_array_length(ops); i++) {
        json_object *op = json_object_array_get_idx(ops, i);
        const char *name = si_str(op, "op");
        const char *path = si_str(op, "path");
        json_object *value = NULL;
        int has_value = json_object_is_type(op, json_type_object) &&
                        json_object_object_get_ex(op, "value", &value);
        if (!name) {
            rc = gq_err_set(err, GQ_EINVAL, "Unexpected kind: unknown");
            goto out;
        }
        if (!path) {
            rc = gq_err_set(err, GQ_EINVAL, "%s operation missing path", name);
            goto out;
        }
        if (!strcmp(name, "add") || !strcmp(name, "replace")) {
            if (!has_value) {
                rc = gq_err_set(err, GQ_EINVAL, "%s operation missing value", name);
                goto out;
            }
            if (!strcmp(name, "replace") && *path) {
                rc = ptr_remove(doc, path, NULL, err);
                if (rc) {
                    gq_err_set(err, GQ_EINVAL,
                               "replace operation does not apply: doc is missing key: %s", path);
                    goto out;
                }
                /* Replacing an array element must put it back at the same index. */
            }
            rc = ptr_add(&doc, path, dup(value), err);
        } else if (!strcmp(name, "remove")) {
            rc = ptr_remove(doc, path, NULL, err);
        } else if (!strcmp(name, "move") || !strcmp(name, "copy")) {
            const char *from = si_str(op, "from");
            if (!from) {
                rc = gq_err_set(err, GQ_EINVAL, "%s operation missing from", name);
                goto out;
            }
            json_object *v = NULL;
            if (!strcmp(name, "move")) {
                size_t fl = strlen(from);
                if (!strncmp(path, from, fl) && path[fl] == '/') {
                    rc = gq_err_set(err, GQ_EINVAL, "move operation cannot move into a child");
                    goto out;
                }
                rc = ptr_remove(doc, from, &v, err);
                if (rc)
                    goto out;
            } else {
                json_object *src = ptr_get(doc, from, err);
                if (!src) {
                    rc = gq_err_set(err, GQ_EINVAL,
                                    "copy operation does not apply: doc is missing from path: %s",
                                    from);
                    goto out;
                }
                v = dup(src);
            }
            rc = ptr_add(&doc, path, v, err);
        } else if (!strcmp(name, "test")) {
            json_object *have = ptr_get(doc, path, err);
            if (!has_value || !json_object_equal(have, value)) {
                rc = gq_err_set(err, GQ_EINVAL, "testing value %s failed: test failed", path);
                goto out;
            }
        } else {
            rc = gq_err_set(err, GQ_EINVAL, "Unexpected kind: %s", name);
        }
        if (rc)
            goto out;
    }
    *out = doc;
    doc = NULL;
out:
    json_object_put(doc);
    return rc;
}
