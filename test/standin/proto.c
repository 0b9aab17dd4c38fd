/* Decoder for the Kubernetes protobuf envelope, limited to the kinds kubectl
 * sends as protobuf from its typed commands (create namespace / configmap /
 * secret). Everything else is refused, as unknown formats are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

typedef struct pb {
    const unsigned char *p, *end;
} pb;

/* One field: number, wire type, and either a varint or a byte range. */
typedef struct pb_field {
    unsigned num, wt;
    uint64_t v;
    const unsigned char *data;
    size_t len;
} pb_field;

static int pb_varint(pb *b, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end)
            return -1;
        unsigned char c = *b->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Next field; 1 when one was read, 0 at the end, -1 on malformed input. */
static int pb_next(pb *b, pb_field *f)
{
    uint64_t key;
    if (b->p >= b->end)
        return 0;
    if (pb_varint(b, &key))
        return -1;
    f->num = (unsigned)(key >> 3);
    f->wt = (unsigned)(key & 7);
    f->data = NULL;
    f->len = 0;
    switch (f->wt) {
    case 0:
        return pb_varint(b, &f->v) ? -1 : 1;
    case 1:
    case 5: {
        size_t n = f->wt == 1 ? 8 : 4;
        if ((size_t)(b->end - b->p) < n)
            return -1;
        b->p += n;
        return 1;
    }
    case 2: {
        uint64_t n;
        if (pb_varint(b, &n) || n > (uint64_t)(b->end - b->p))
            return -1;
        f->data = b->p;
        f->len = (size_t)n;
        b->p += n;
        return 1;
    }
    default:
        return -1;
    }
}

static json_object *str_of(const pb_field *f)
{
    return json_object_new_string_len((const char *)f->data, (int)f->len);
}

static json_object *b64_of(const pb_field *f)
{
    char *t = si_b64_encode(f->data, f->len, 0);
    json_object *o = json_object_new_string(t ? t : "");
    free(t);
    return o;
}

/* A map<string, string|bytes> entry into obj. */
static int map_entry(json_object *obj, const pb_field *f, int bytes)
{
    pb b = {f->data, f->data + f->len};
    pb_field e;
    char key[SI_NAME_MAX * 2 + 1] = "";
    json_object *val = NULL;
    int r;
    while ((r = pb_next(&b, &e)) == 1) {
        if (e.num == 1 && e.wt == 2 && e.len < sizeof key) {
            memcpy(key, e.data, e.len);
            key[e.len] = '\0';
        } else if (e.num == 2 && e.wt == 2) {
            json_object_put(val);
            val = bytes ? b64_of(&e) : str_of(&e);
        }
    }
    if (r < 0) {
        json_object_put(val);
        return -1;
    }
    json_object_object_add(obj, key, val ? val : json_object_new_string(""));
    return 0;
}

static json_object *child(json_object *o, const char *k, json_type t)
{
    json_object *c = si_obj(o, k);
    if (!c) {
        c = t == json_type_array ? json_object_new_array() : json_object_new_object();
        json_object_object_add(o, k, c);
    }
    return c;
}

static int decode_meta(const pb_field *f, json_object *md)
{
    static const char *const strs[] = {NULL,       "name", "generateName",   "namespace",
                                       "selfLink", "uid",  "resourceVersion"};
    pb b = {f->data, f->data + f->len};
    pb_field e;
    int r;
    while ((r = pb_next(&b, &e)) == 1) {
        if (e.wt == 2 && e.num >= 1 && e.num <= 6) {
            if (e.len)
                json_object_object_add(md, strs[e.num], str_of(&e));
        } else if (e.wt == 2 && (e.num == 11 || e.num == 12)) {
            if (map_entry(child(md, e.num == 11 ? "labels" : "annotations", json_type_object), &e,
                          0))
                return -1;
        } else if (e.wt == 2 && e.num == 14) {
            json_object_array_add(child(md, "finalizers", json_type_array), str_of(&e));
        }
        /* timestamps, owner references, managed fields: the server owns or
         * ignores them on create */
    }
    return r;
}

typedef struct kind_map {
    const char *kind;
    const char *fields[6]; /* index = field number; "m:" map, "b:" bytes map, "s:" string,
                              "f:" spec.finalizers, "t:" bool */
} kind_map;

static const kind_map kinds[] = {
    {"Namespace", {NULL, "", "f:spec", NULL, NULL, NULL}},
    {"ConfigMap", {NULL, "", "m:data", "b:binaryData", "t:immutable", NULL}},
    {"Secret", {NULL, "", "b:data", "s:type", "m:stringData", "t:immutable"}},
};

json_object *proto_decode(const char *buf, size_t n, gq_err *err)
{
    if (n < 4 || memcmp(buf, "k8s\0", 4) != 0) {
        gq_err_set(err, GQ_EINVAL, "missing protobuf envelope");
        return NULL;
    }
    pb b = {(const unsigned char *)buf + 4, (const unsigned char *)buf + n};
    pb_field f, raw = {0};
    char api_version[128] = "", kind[128] = "";
    int r;
    while ((r = pb_next(&b, &f)) == 1) {
        if (f.num == 1 && f.wt == 2) {
            pb t = {f.data, f.data + f.len};
            pb_field g;
            while (pb_next(&t, &g) == 1)
                if (g.wt == 2 && (g.num == 1 || g.num == 2) && g.len < 128) {
                    char *dst = g.num == 1 ? api_version : kind;
                    memcpy(dst, g.data, g.len);
                    dst[g.len] = '\0';
                }
        } else if (f.num == 2 && f.wt == 2) {
            raw = f;
        }
    }
    const kind_map *km = NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (!strcmp(kind, kinds[i].kind))
            km = &kinds[i];
    if (r < 0 || !km) {
        gq_err_set(err, GQ_EUNSUPPORTED, "protobuf body of kind \"%s\" is not supported", kind);
        return NULL;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "apiVersion", json_object_new_string(api_version));
    json_object_object_add(o, "kind", json_object_new_string(kind));
    json_object *md = child(o, "metadata", json_type_object);
    /* No raw field: an empty object (kube decodes it the same way). Only a
     * field that was read has a data pointer to offset. */
    pb body = {raw.data, raw.data ? raw.data + raw.len : NULL};
    while ((r = pb_next(&body, &f)) == 1) {
        const char *spec = f.num < 6 ? km->fields[f.num] : NULL;
        if (!spec)
            continue;
        if (f.num == 1 && f.wt == 2) {
            r = decode_meta(&f, md);
        } else if (spec[0] == 'm' && f.wt == 2) {
            r = map_entry(child(o, spec + 2, json_type_object), &f, 0);
        } else if (spec[0] == 'b' && f.wt == 2) {
            r = map_entry(child(o, spec + 2, json_type_object), &f, 1);
        } else if (spec[0] == 's' && f.wt == 2) {
            json_object_object_add(o, spec + 2, str_of(&f));
        } else if (spec[0] == 't' && f.wt == 0) {
            json_object_object_add(o, spec + 2, json_object_new_boolean(f.v != 0));
        } else if (spec[0] == 'f' && f.wt == 2) {
            pb s = {f.data, f.data + f.len};
            pb_field g;
            while ((r = pb_next(&s, &g)) == 1)
                if (g.num == 1 && g.wt == 2)
                    json_object_array_add(
                        child(child(o, "spec", json_type_object), "finalizers", json_type_array),
                        str_of(&g));
        }
        if (r < 0)
            break;
    }
    if (r < 0) {
        json_object_put(o);
        gq_err_set(err, GQ_EINVAL, "malformed protobuf body");
        return NULL;
    }
    return o;
}
