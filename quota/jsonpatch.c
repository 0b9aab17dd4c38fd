#include "quota/jsonpatch.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonutil.h"

/* ---- JSON Pointer building ---- */

void gq_jptr_init(gq_jptr *p)
{
    p->buf[0] = '\0';
    p->len = 0;
    p->overflow = false;
}

static void jptr_putc(gq_jptr *p, char c)
{
    if (p->len + 1 >= sizeof(p->buf)) {
        p->overflow = true;
        return;
    }
    p->buf[p->len++] = c;
    p->buf[p->len] = '\0';
}

void gq_jptr_push(gq_jptr *p, const char *seg)
{
    jptr_putc(p, '/');
    for (; seg && *seg; seg++) {
        if (*seg == '~') {
            jptr_putc(p, '~');
            jptr_putc(p, '0');
        } else if (*seg == '/') {
            jptr_putc(p, '~');
            jptr_putc(p, '1');
        } else {
            jptr_putc(p, *seg);
        }
    }
}

void gq_jptr_push_index(gq_jptr *p, size_t index)
{
    char num[24];
    snprintf(num, sizeof(num), "%zu", index);
    gq_jptr_push(p, num);
}

void gq_jptr_truncate(gq_jptr *p, size_t len)
{
    if (len >= p->len)
        return;
    p->len = len;
    p->buf[len] = '\0';
    p->overflow = false;
}

/* ---- Builder ---- */

struct gq_patch {
    json_object *ops; /* array of {"op","path"[,"value"]} */
};

gq_code gq_patch_new(gq_patch **out)
{
    gq_patch *p = calloc(1, sizeof(*p));
    if (!p)
        return GQ_ENOMEM;
    p->ops = json_object_new_array();
    if (!p->ops) {
        free(p);
        return GQ_ENOMEM;
    }
    *out = p;
    return GQ_OK;
}

void gq_patch_free(gq_patch *p)
{
    if (!p)
        return;
    json_object_put(p->ops);
    free(p);
}

static gq_code patch_append(gq_patch *p, const char *op, const gq_jptr *path, bool has_value,
                            json_object *value)
{
    gq_code rc = GQ_OK;
    json_object *o = NULL, *s = NULL;
    if (path->overflow || json_object_array_length(p->ops) >= GQ_PATCH_MAX_OPS) {
        rc = GQ_ELIMIT;
        goto out;
    }
    o = json_object_new_object();
    if (!o) {
        rc = GQ_ENOMEM;
        goto out;
    }
    if (!(s = json_object_new_string(op)) || json_object_object_add(o, "op", s)) {
        json_object_put(s);
        rc = GQ_ENOMEM;
        goto out;
    }
    if (!(s = json_object_new_string_len(path->buf, (int)path->len)) ||
        json_object_object_add(o, "path", s)) {
        json_object_put(s);
        rc = GQ_ENOMEM;
        goto out;
    }
    if (has_value) {
        if (json_object_object_add(o, "value", value)) {
            rc = GQ_ENOMEM;
            goto out;
        }
        value = NULL; /* owned by o now */
    }
    if (json_object_array_add(p->ops, o)) {
        rc = GQ_ENOMEM;
        goto out;
    }
    o = NULL;
out:
    json_object_put(o);
    json_object_put(value);
    return rc;
}

gq_code gq_patch_add(gq_patch *p, const gq_jptr *path, json_object *value)
{
    return patch_append(p, "add", path, true, value);
}

gq_code gq_patch_replace(gq_patch *p, const gq_jptr *path, json_object *value)
{
    return patch_append(p, "replace", path, true, value);
}

gq_code gq_patch_test(gq_patch *p, const gq_jptr *path, json_object *value)
{
    return patch_append(p, "test", path, true, value);
}

gq_code gq_patch_remove(gq_patch *p, const gq_jptr *path)
{
    return patch_append(p, "remove", path, false, NULL);
}

size_t gq_patch_len(const gq_patch *p)
{
    return p ? json_object_array_length(p->ops) : 0;
}

json_object *gq_patch_json(const gq_patch *p)
{
    return p->ops;
}

gq_code gq_patch_to_text(const gq_patch *p, char **out, size_t *out_len)
{
    return gq_json_to_text(p->ops, out, out_len);
}

/* ---- Equality (RFC 6902 §4.6) ---- */

static bool number_equal(json_object *a, json_object *b)
{
    json_type ta = json_object_get_type(a), tb = json_object_get_type(b);
    if (ta == json_type_int && tb == json_type_int) {
        /* json-c keeps values above INT64_MAX as uint64: compare both views
         * so neither clamp hides a difference. */
        return json_object_get_int64(a) == json_object_get_int64(b) &&
               json_object_get_uint64(a) == json_object_get_uint64(b);
    }
    if (ta == json_type_int) {
        json_object *t = a;
        a = b;
        b = t;
    }
    double d = json_object_get_double(a);
    if (json_object_get_type(b) == json_type_double)
        return d == json_object_get_double(b);
    /* double vs integer: equal only when the double is exactly that integer. */
    if (!isfinite(d) || d != floor(d))
        return false;
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0)
        return json_object_get_int64(b) == (int64_t)d &&
               json_object_get_uint64(b) == (d < 0 ? 0 : (uint64_t)d);
    if (d >= 0 && d < 18446744073709551616.0)
        return json_object_get_uint64(b) == (uint64_t)d && json_object_get_int64(b) == INT64_MAX;
    return false;
}

bool gq_json_equal(json_object *a, json_object *b)
{
    json_type ta = json_object_get_type(a), tb = json_object_get_type(b);
    bool na = ta == json_type_int || ta == json_type_double;
    bool nb = tb == json_type_int || tb == json_type_double;
    if (na && nb)
        return number_equal(a, b);
    if (ta != tb)
        return false;
    switch (ta) {
    case json_type_null:
        return true;
    case json_type_boolean:
        return json_object_get_boolean(a) == json_object_get_boolean(b);
    case json_type_string:
        return json_object_get_string_len(a) == json_object_get_string_len(b) &&
               memcmp(json_object_get_string(a), json_object_get_string(b),
                      (size_t)json_object_get_string_len(a)) == 0;
    case json_type_array: {
        size_t n = json_object_array_length(a);
        if (n != json_object_array_length(b))
            return false;
        for (size_t i = 0; i < n; i++)
            if (!gq_json_equal(json_object_array_get_idx(a, i), json_object_array_get_idx(b, i)))
                return false;
        return true;
    }
    case json_type_object: {
        if (json_object_object_length(a) != json_object_object_length(b))
            return false;
        json_object_object_foreach(a, k, va)
        {
            json_object *vb = NULL;
            if (!json_object_object_get_ex(b, k, &vb) || !gq_json_equal(va, vb))
                return false;
        }
        return true;
    }
    default:
        return false;
    }
}

/* ---- Applier ---- */

/* A parsed pointer: unescaped reference tokens, each NUL-terminated inside
 * one buffer. */
typedef struct jptr_parsed {
    char buf[GQ_JPTR_MAX];
    const char *seg[GQ_JPTR_MAX_SEGMENTS];
    size_t n;
} jptr_parsed;

static gq_code jptr_parse(json_object *str, jptr_parsed *out, const char *what, size_t opi,
                          gq_err *err)
{
    if (!json_object_is_type(str, json_type_string))
        return gq_err_set(err, GQ_EINVAL, "operation %zu: \"%s\" must be a string", opi, what);
    const char *s = json_object_get_string(str);
    size_t len = (size_t)json_object_get_string_len(str);
    if (len >= sizeof(out->buf))
        return gq_err_set(err, GQ_ELIMIT, "operation %zu: \"%s\" longer than %d bytes", opi, what,
                          GQ_JPTR_MAX - 1);
    if (memchr(s, '\0', len))
        return gq_err_set(err, GQ_EINVAL, "operation %zu: \"%s\" contains a NUL character", opi,
                          what);
    out->n = 0;
    if (len == 0)
        return GQ_OK;
    if (s[0] != '/')
        return gq_err_set(err, GQ_EINVAL, "operation %zu: %s \"%.64s\" must start with \"/\"", opi,
                          what, s);
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '/') {
            if (out->n == GQ_JPTR_MAX_SEGMENTS)
                return gq_err_set(err, GQ_ELIMIT, "operation %zu: %s has more than %d tokens", opi,
                                  what, GQ_JPTR_MAX_SEGMENTS);
            if (out->n)
                out->buf[w++] = '\0';
            out->seg[out->n++] = out->buf + w;
            continue;
        }
        if (c == '~') {
            char e = i + 1 < len ? s[i + 1] : '\0';
            if (e != '0' && e != '1')
                return gq_err_set(err, GQ_EINVAL,
                                  "operation %zu: %s \"%.64s\": \"~\" must be followed by 0 or 1",
                                  opi, what, s);
            c = e == '0' ? '~' : '/';
            i++;
        }
        out->buf[w++] = c;
    }
    out->buf[w] = '\0';
    return GQ_OK;
}

/* RFC 6901 §4 array index: "0" or digits without a leading zero. "-" is
 * reported as len (one past the end). Returns false for anything else. */
static bool parse_index(const char *tok, size_t len, size_t *out)
{
    if (strcmp(tok, "-") == 0) {
        *out = len;
        return true;
    }
    if (!tok[0] || (tok[0] == '0' && tok[1]))
        return false;
    size_t v = 0;
    for (const char *c = tok; *c; c++) {
        if (*c < '0' || *c > '9')
            return false;
        if (v > (SIZE_MAX - 9) / 10)
            return false;
        v = v * 10 + (size_t)(*c - '0');
    }
    *out = v;
    return true;
}

/* Walk to the container holding the last token of ptr (ptr->n >= 1). */
static gq_code walk_parent(json_object *root, const jptr_parsed *ptr, json_object **parent,
                           size_t opi, const char *path, gq_err *err)
{
    json_object *cur = root;
    for (size_t i = 0; i + 1 < ptr->n; i++) {
        json_object *next = NULL;
        if (json_object_is_type(cur, json_type_object)) {
            if (!json_object_object_get_ex(cur, ptr->seg[i], &next))
                goto missing;
        } else if (json_object_is_type(cur, json_type_array)) {
            size_t idx, len = json_object_array_length(cur);
            if (!parse_index(ptr->seg[i], len, &idx) || idx >= len)
                goto missing;
            next = json_object_array_get_idx(cur, idx);
        } else {
            goto missing;
        }
        cur = next;
    }
    if (!json_object_is_type(cur, json_type_object) && !json_object_is_type(cur, json_type_array))
        goto missing;
    *parent = cur;
    return GQ_OK;
missing:
    return gq_err_set(err, GQ_EINVAL, "operation %zu: path \"%.200s\": parent does not exist", opi,
                      path);
}

/* Locate an existing value: its container and (for arrays) index. */
typedef struct target {
    json_object *parent; /* NULL when the target is the root */
    const char *key;     /* object member name */
    size_t idx;          /* array index */
    json_object *value;  /* borrowed */
} target;

static gq_code find_existing(json_object *root, const jptr_parsed *ptr, target *t, size_t opi,
                             const char *path, gq_err *err)
{
    memset(t, 0, sizeof(*t));
    if (ptr->n == 0) {
        t->value = root;
        return GQ_OK;
    }
    gq_code rc = walk_parent(root, ptr, &t->parent, opi, path, err);
    if (rc)
        return rc;
    const char *last = ptr->seg[ptr->n - 1];
    if (json_object_is_type(t->parent, json_type_object)) {
        if (!json_object_object_get_ex(t->parent, last, &t->value))
            goto missing;
        t->key = last;
        return GQ_OK;
    }
    size_t len = json_object_array_length(t->parent);
    if (!parse_index(last, len, &t->idx) || t->idx >= len)
        goto missing;
    t->value = json_object_array_get_idx(t->parent, t->idx);
    return GQ_OK;
missing:
    return gq_err_set(err, GQ_EINVAL, "operation %zu: path \"%.200s\" does not exist", opi, path);
}

/* Insert v at idx of array a, shifting later elements up. json-c 0.16 has no
 * insert, so move references one slot at a time. Takes ownership of v. */
static gq_code array_insert(json_object *a, size_t idx, json_object *v)
{
    size_t len = json_object_array_length(a);
    if (json_object_array_add(a, NULL)) {
        json_object_put(v);
        return GQ_ENOMEM;
    }
    for (size_t k = len; k > idx; k--) {
        json_object *e = json_object_array_get_idx(a, k - 1);
        json_object_array_put_idx(a, k, json_object_get(e));
    }
    json_object_array_put_idx(a, idx, v);
    return GQ_OK;
}

/* RFC 6902 §4.1 add: v owned; *root may be replaced. */
static gq_code do_add(json_object **root, const jptr_parsed *ptr, json_object *v, size_t opi,
                      const char *path, gq_err *err)
{
    gq_code rc = GQ_OK;
    if (ptr->n == 0) {
        json_object_put(*root);
        *root = v;
        return GQ_OK;
    }
    json_object *parent = NULL;
    rc = walk_parent(*root, ptr, &parent, opi, path, err);
    if (rc)
        goto fail;
    const char *last = ptr->seg[ptr->n - 1];
    if (json_object_is_type(parent, json_type_object)) {
        if (json_object_object_add(parent, last, v))
            return GQ_ENOMEM;
        return GQ_OK;
    }
    size_t idx, len = json_object_array_length(parent);
    if (!parse_index(last, len, &idx) || idx > len) {
        rc = gq_err_set(err, GQ_EINVAL,
                        "operation %zu: path \"%.200s\": array index out of range (length %zu)",
                        opi, path, len);
        goto fail;
    }
    return array_insert(parent, idx, v);
fail:
    json_object_put(v);
    return rc;
}

static void remove_target(const target *t)
{
    if (json_object_is_type(t->parent, json_type_object))
        json_object_object_del(t->parent, t->key);
    else
        json_object_array_del_idx(t->parent, t->idx, 1);
}

/* A private copy of v (NULL stays NULL: JSON null). */
static gq_code copy_value(json_object *v, json_object **out)
{
    json_object *c = NULL;
    if (v && json_object_deep_copy(v, &c, NULL) != 0)
        return GQ_ENOMEM;
    *out = c;
    return GQ_OK;
}

/* True when pointer a is a proper prefix of b (token-wise). */
static bool is_proper_prefix(const jptr_parsed *a, const jptr_parsed *b)
{
    if (a->n >= b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->seg[i], b->seg[i]) != 0)
            return false;
    return true;
}

/* One operation of a patch: its members, borrowed from the patch, and its
 * pointers once parsed. */
typedef struct patch_op {
    size_t opi;
    const char *name, *path;
    json_object *jpath;
    json_object *value; /* add, replace, test (NULL: JSON null) */
    json_object *jfrom; /* move, copy */
    bool needs_from;
    jptr_parsed *ptr, *from;
} patch_op;

/* The members of operation op: an op this code knows, and what it needs. */
static gq_code op_read(json_object *op, patch_op *o, gq_err *err)
{
    size_t opi = o->opi;
    json_object *jop = NULL;
    if (!json_object_is_type(op, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "operation %zu is not an object", opi);
    if (!json_object_object_get_ex(op, "op", &jop) || !json_object_is_type(jop, json_type_string))
        return gq_err_set(err, GQ_EINVAL, "operation %zu: missing string member \"op\"", opi);
    if (!json_object_object_get_ex(op, "path", &o->jpath))
        return gq_err_set(err, GQ_EINVAL, "operation %zu: missing member \"path\"", opi);
    const char *name = o->name = json_object_get_string(jop);
    o->path = json_object_get_string(o->jpath);
    bool needs_value = !strcmp(name, "add") || !strcmp(name, "replace") || !strcmp(name, "test");
    o->needs_from = !strcmp(name, "move") || !strcmp(name, "copy");
    if (!needs_value && !o->needs_from && strcmp(name, "remove") != 0)
        return gq_err_set(err, GQ_EINVAL, "operation %zu: unknown op \"%.32s\"", opi, name);
    if (needs_value && !json_object_object_get_ex(op, "value", &o->value))
        return gq_err_set(err, GQ_EINVAL, "operation %zu: \"%s\" needs a \"value\"", opi, name);
    if (o->needs_from && !json_object_object_get_ex(op, "from", &o->jfrom))
        return gq_err_set(err, GQ_EINVAL, "operation %zu: \"%s\" needs a \"from\"", opi, name);
    return GQ_OK;
}

static gq_code op_add(json_object **root, const patch_op *o, gq_err *err)
{
    json_object *v = NULL;
    if (copy_value(o->value, &v))
        return gq_err_oom(err);
    return do_add(root, o->ptr, v, o->opi, o->path, err);
}

static gq_code op_remove(json_object **root, const patch_op *o, gq_err *err)
{
    target t;
    if (o->ptr->n == 0)
        return gq_err_set(err, GQ_EINVAL, "operation %zu: cannot remove the whole document",
                          o->opi);
    gq_code rc = find_existing(*root, o->ptr, &t, o->opi, o->path, err);
    if (rc)
        return rc;
    remove_target(&t);
    return GQ_OK;
}

static gq_code op_replace(json_object **root, const patch_op *o, gq_err *err)
{
    target t;
    json_object *v = NULL;
    gq_code rc = find_existing(*root, o->ptr, &t, o->opi, o->path, err);
    if (rc)
        return rc;
    if (copy_value(o->value, &v))
        return gq_err_oom(err);
    if (!t.parent) {
        json_object_put(*root);
        *root = v;
    } else if (t.key) {
        if (json_object_object_add(t.parent, t.key, v)) {
            json_object_put(v);
            return gq_err_oom(err);
        }
    } else {
        json_object_array_put_idx(t.parent, t.idx, v);
    }
    return GQ_OK;
}

static gq_code op_test(json_object **root, const patch_op *o, gq_err *err)
{
    target t;
    gq_code rc = find_existing(*root, o->ptr, &t, o->opi, o->path, err);
    if (rc)
        return rc;
    if (!gq_json_equal(t.value, o->value))
        return gq_err_set(err, GQ_EINVAL, "operation %zu: test failed at \"%.200s\"", o->opi,
                          o->path);
    return GQ_OK;
}

/* move (the value taken from "from") or copy (a copy of it) to "path". */
static gq_code op_move_copy(json_object **root, const patch_op *o, gq_err *err)
{
    target t;
    json_object *v = NULL;
    const char *fpath = json_object_get_string(o->jfrom);
    gq_code rc = find_existing(*root, o->from, &t, o->opi, fpath, err);
    if (rc)
        return rc;
    if (!strcmp(o->name, "move")) {
        if (is_proper_prefix(o->from, o->ptr))
            return gq_err_set(err, GQ_EINVAL,
                              "operation %zu: cannot move \"%.100s\" into its own child", o->opi,
                              fpath);
        if (!t.parent) /* moving the root onto itself: no change */
            return GQ_OK;
        v = json_object_get(t.value);
        remove_target(&t);
    } else if (copy_value(t.value, &v)) {
        return gq_err_oom(err);
    }
    return do_add(root, o->ptr, v, o->opi, o->path, err);
}

static gq_code apply_one(json_object **root, json_object *op, size_t opi, gq_err *err)
{
    patch_op o = {.opi = opi};
    gq_code rc = op_read(op, &o, err);
    if (rc)
        return rc;
    o.ptr = malloc(sizeof(*o.ptr));
    o.from = malloc(sizeof(*o.from));
    if (!o.ptr || !o.from) {
        rc = gq_err_oom(err);
        goto out;
    }
    rc = jptr_parse(o.jpath, o.ptr, "path", opi, err);
    if (!rc && o.needs_from)
        rc = jptr_parse(o.jfrom, o.from, "from", opi, err);
    if (rc)
        goto out;
    if (!strcmp(o.name, "add"))
        rc = op_add(root, &o, err);
    else if (!strcmp(o.name, "remove"))
        rc = op_remove(root, &o, err);
    else if (!strcmp(o.name, "replace"))
        rc = op_replace(root, &o, err);
    else if (!strcmp(o.name, "test"))
        rc = op_test(root, &o, err);
    else
        rc = op_move_copy(root, &o, err);
out:
    free(o.ptr);
    free(o.from);
    return rc;
}

gq_code gq_patch_apply(json_object *doc, json_object *patch, json_object **out, gq_err *err)
{
    gq_code rc = GQ_OK;
    json_object *work = NULL;
    if (!json_object_is_type(patch, json_type_array))
        return gq_err_set(err, GQ_EINVAL, "a JSON Patch must be a JSON array");
    size_t n = json_object_array_length(patch);
    if (n > GQ_PATCH_MAX_OPS)
        return gq_err_set(err, GQ_ELIMIT, "JSON Patch has %zu operations (at most %d)", n,
                          GQ_PATCH_MAX_OPS);
    rc = copy_value(doc, &work);
    if (rc)
        return gq_err_set(err, rc, "out of memory");
    for (size_t i = 0; i < n; i++) {
        rc = apply_one(&work, json_object_array_get_idx(patch, i), i, err);
        if (rc)
            goto out;
    }
    *out = work;
    work = NULL;
out:
    json_object_put(work);
    return rc;
}

gq_code gq_patch_apply_text(json_object *doc, const char *text, size_t len, json_object **out,
                            gq_err *err)
{
    json_object *patch = NULL;
    gq_code rc = gq_json_parse(text, len, GQ_JSON_DEFAULT_DEPTH, &patch, err);
    if (rc)
        return rc;
    rc = gq_patch_apply(doc, patch, out, err);
    json_object_put(patch);
    return rc;
}
