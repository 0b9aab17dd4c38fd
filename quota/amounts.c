/* Amounts of the quota keys: parse, format, JSON. */
#include "quota/amounts.h"
#include "quota/field.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const qkey_names[GQ_KEY_COUNT] = {
    [GQ_KEY_GPU_MEMORY] = "gpu-memory",
    [GQ_KEY_GPU_PODS] = "gpu-pods",
    [GQ_KEY_GPUS] = "gpus",
};

#define ALL_KEYS ((1u << GQ_KEY_COUNT) - 1u)

const char *gq_qkey_name(gq_qkey k)
{
    if ((unsigned)k >= GQ_KEY_COUNT)
        return NULL;
    return qkey_names[k];
}

static int qkey_lookup(const char *name)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (strcmp(name, qkey_names[k]) == 0)
            return k;
    return -1;
}

void gq_amounts_clear(gq_amounts *a)
{
    memset(a, 0, sizeof(*a));
    a->fmt[GQ_KEY_GPU_MEMORY] = GQ_QFMT_BINARY_SI;
}

gq_code gq_amount_parse(json_object *val, const char *field, int64_t *out, gq_qformat *fmt,
                        gq_err *err)
{
    gq_quantity q;
    gq_code rc;
    char shown[72]; /* the value as written, for messages that name it */
    if (json_object_is_type(val, json_type_int)) {
        int64_t i = json_object_get_int64(val);
        q = gq_quantity_from_int64(i, GQ_QFMT_DECIMAL_SI);
        snprintf(shown, sizeof shown, "%" PRId64, i);
    } else if (json_object_is_type(val, json_type_string)) {
        const char *s = NULL;
        rc = gq_field_string(val, field, &s, err);
        if (rc)
            return rc;
        snprintf(shown, sizeof shown, "%.64s", s);
        rc = gq_quantity_parse(s, strlen(s), &q, err);
        if (rc) {
            gq_err_prefix(err, "%s", field);
            return rc;
        }
    } else {
        return gq_err_set(err, GQ_EINVAL, "%s: must be a quantity string or an integer, got %s",
                          field, gq_field_type_name(val));
    }
    if (gq_quantity_is_negative(&q))
        return gq_err_set(err, GQ_EINVAL,
                          "%s: invalid value \"%s\": must be greater than or equal to 0", field,
                          shown);
    if (!gq_quantity_is_integer(&q))
        return gq_err_set(err, GQ_EINVAL, "%s: invalid value \"%s\": must be a whole number", field,
                          shown);
    int64_t v;
    rc = gq_quantity_to_int64_ceil(&q, &v);
    if (rc)
        return gq_err_set(err, rc, "%s: value out of range", field);
    *out = v;
    *fmt = q.format;
    return GQ_OK;
}

/* "gpu-memory, gpu-pods, gpus": the keys of allowed, for a message. */
static void supported_keys(unsigned allowed, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int j = 0; j < GQ_KEY_COUNT; j++) {
        if (!(allowed & (1u << j)))
            continue;
        int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", qkey_names[j]);
        if (w < 0 || (size_t)w >= cap - len)
            return;
        len += (size_t)w;
    }
}

gq_code gq_amounts_parse_keys(json_object *obj, const char *field, unsigned allowed,
                              gq_amounts *out, gq_err *err)
{
    gq_code rc = gq_field_object(obj, field, err);
    if (rc)
        return rc;
    gq_amounts a;
    gq_amounts_clear(&a);
    json_object_object_foreach(obj, key, val)
    {
        char f[160];
        snprintf(f, sizeof(f), "%s.%.64s", field, key);
        int k = qkey_lookup(key);
        if (k < 0 || !(allowed & (1u << k))) {
            char sup[64];
            supported_keys(allowed, sup, sizeof sup);
            return gq_err_set(err, GQ_EINVAL, "%s: unsupported key; supported: %s", f, sup);
        }
        rc = gq_amount_parse(val, f, &a.v[k], &a.fmt[k], err);
        if (rc)
            return rc;
        a.set[k] = true;
    }
    *out = a;
    return GQ_OK;
}

gq_code gq_amounts_parse(json_object *obj, const char *field, gq_amounts *out, gq_err *err)
{
    return gq_amounts_parse_keys(obj, field ? field : "resources", ALL_KEYS, out, err);
}

void gq_amount_format(const gq_amounts *a, gq_qkey k, char buf[GQ_QUANTITY_STR_MAX])
{
    if ((unsigned)k >= GQ_KEY_COUNT) {
        buf[0] = '\0';
        return;
    }
    gq_quantity q = gq_quantity_from_int64(a->v[k], a->fmt[k]);
    gq_quantity_format(&q, buf);
}

json_object *gq_amounts_to_json(const gq_amounts *a)
{
    json_object *o = json_object_new_object();
    if (!o)
        return NULL;
    for (int k = 0; k < GQ_KEY_COUNT; k++) {
        if (!a->set[k])
            continue;
        char buf[GQ_QUANTITY_STR_MAX];
        gq_amount_format(a, (gq_qkey)k, buf);
        json_object *s = json_object_new_string(buf);
        if (!s || json_object_object_add(o, qkey_names[k], s)) {
            json_object_put(s);
            json_object_put(o);
            return NULL;
        }
    }
    return o;
}
