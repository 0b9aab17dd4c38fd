#include "quota/record.h"

#include <stdio.h>
#include <string.h>

#include "common/json_escape.h"
#include "common/json_member.h"
#include "common/jsonutil.h"
#include "quota/policy.h"

static const char *const scope_names[] = {"NotTerminating", "Terminating"};

void gq_pod_record_make(const gq_pod_cost *cost, const char *model, bool terminating,
                        gq_pod_record *out)
{
    memset(out, 0, sizeof(*out));
    gq_charge_from_cost(cost, false, &out->charge);
    if (model && strlen(model) < sizeof(out->model))
        memcpy(out->model, model, strlen(model) + 1);
    out->terminating = terminating;
}

void gq_pod_record_format(const gq_pod_record *r, char buf[GQ_RECORD_MAX])
{
    char q[GQ_KEY_COUNT][GQ_QUANTITY_STR_MAX];
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        gq_amount_format(&r->charge, (gq_qkey)k, q[k]);
    size_t len = (size_t)snprintf(buf, GQ_RECORD_MAX,
                                  "{\"charge\":{\"gpu-memory\":\"%s\",\"gpu-pods\":\"%s\","
                                  "\"gpus\":\"%s\"}",
                                  q[GQ_KEY_GPU_MEMORY], q[GQ_KEY_GPU_PODS], q[GQ_KEY_GPUS]);
    if (r->model[0] && len < GQ_RECORD_MAX) {
        len += (size_t)snprintf(buf + len, GQ_RECORD_MAX - len, ",\"model\":\"");
        gq_json_escape_into(buf, GQ_RECORD_MAX, &len, r->model);
        len += (size_t)snprintf(buf + len, GQ_RECORD_MAX - len, "\"");
    }
    if (len < GQ_RECORD_MAX)
        snprintf(buf + len, GQ_RECORD_MAX - len, ",\"scope\":\"%s\"}",
                 scope_names[r->terminating ? 1 : 0]);
}

static gq_code parse_obj(json_object *o, gq_pod_record *out, gq_err *err)
{
    gq_pod_record r;
    gq_code rc;
    memset(&r, 0, sizeof(r));
    if (!json_object_is_type(o, json_type_object))
        return gq_err_set(err, GQ_EINVAL, "must be a JSON object");
    json_object *charge = gq_json_get_object(o, "charge");
    if (!charge)
        return gq_err_set(err, GQ_EINVAL, "charge: required, an object of quota keys");
    if ((rc = gq_amounts_parse(charge, "charge", &r.charge, err)))
        return rc;
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (!r.charge.set[k])
            return gq_err_set(err, GQ_EINVAL, "charge: every quota key is required");
    json_object *model = gq_json_member(o, "model");
    if (model) {
        if (!json_object_is_type(model, json_type_string))
            return gq_err_set(err, GQ_EINVAL, "model: must be a string");
        size_t n = (size_t)json_object_get_string_len(model);
        if (n >= sizeof(r.model))
            return gq_err_set(err, GQ_EINVAL, "model: longer than %zu bytes", sizeof(r.model) - 1);
        memcpy(r.model, json_object_get_string(model), n + 1);
    }
    const char *scope = gq_json_get_string(o, "scope");
    if (!scope)
        return gq_err_set(err, GQ_EINVAL, "scope: required, NotTerminating or Terminating");
    if (!strcmp(scope, scope_names[1]))
        r.terminating = true;
    else if (strcmp(scope, scope_names[0]))
        return gq_err_set(err, GQ_EINVAL,
                          "scope: \"%.32s\" is neither NotTerminating nor Terminating", scope);
    *out = r;
    return GQ_OK;
}

gq_code gq_pod_record_parse(const char *text, size_t len, gq_pod_record *out, gq_err *err)
{
    json_object *o = NULL;
    gq_code rc;
    if (len > GQ_RECORD_MAX)
        return gq_err_set(err, GQ_ELIMIT, "longer than %d bytes", GQ_RECORD_MAX);
    if ((rc = gq_json_parse(text, len, 4, &o, err)))
        return rc;
    rc = parse_obj(o, out, err);
    json_object_put(o);
    return rc;
}

/* The GQ_ANN_CHARGED line: three key=value items, each quota key once. */
static gq_code parse_legacy(const char *text, gq_pod_record *out, gq_err *err)
{
    json_object *o = json_object_new_object();
    gq_code rc = GQ_OK;
    gq_pod_record r;
    memset(&r, 0, sizeof(r));
    if (!o)
        return gq_err_oom(err);
    if (strlen(text) > GQ_RECORD_MAX) {
        rc = gq_err_set(err, GQ_ELIMIT, "longer than %d bytes", GQ_RECORD_MAX);
        goto out;
    }
    for (const char *p = text; *p && !rc;) {
        const char *end = strchr(p, ','), *eq = strchr(p, '=');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char key[16];
        if (!eq || eq >= p + len || (size_t)(eq - p) >= sizeof(key) || eq == p) {
            rc = gq_err_set(err, GQ_EINVAL, "\"%.*s\" is not KEY=QUANTITY", (int)len, p);
            break;
        }
        memcpy(key, p, (size_t)(eq - p));
        key[eq - p] = '\0';
        json_object *v = json_object_new_string_len(eq + 1, (int)(len - (size_t)(eq - p) - 1));
        if (json_object_object_get(o, key))
            rc = gq_err_set(err, GQ_EINVAL, "%s is given twice", key);
        else if (!v || json_object_object_add(o, key, v))
            rc = gq_err_oom(err);
        if (rc)
            json_object_put(v);
        p = end ? end + 1 : p + len;
    }
    if (!rc && !(rc = gq_amounts_parse(o, "charged", &r.charge, err))) {
        for (int k = 0; k < GQ_KEY_COUNT && !rc; k++)
            if (!r.charge.set[k])
                rc = gq_err_set(err, GQ_EINVAL, "every quota key is required");
    }
    if (!rc) {
        r.legacy = true;
        *out = r;
    }
out:
    json_object_put(o);
    return rc;
}

gq_code gq_pod_record_read(json_object *pod, gq_pod_record *out, gq_err *err)
{
    json_object *ann = gq_json_meta_object(pod, "annotations");
    json_object *v = gq_json_member(ann, GQ_ANN_ADMISSION);
    if (!v) {
        json_object *line = gq_json_member(ann, GQ_ANN_CHARGED);
        if (!line)
            return GQ_ENOTFOUND;
        gq_code rc = json_object_is_type(line, json_type_string)
                         ? parse_legacy(json_object_get_string(line), out, err)
                         : gq_err_set(err, GQ_EINVAL, "must be a string");
        if (rc)
            gq_err_prefix(err, "annotation " GQ_ANN_CHARGED);
        return rc;
    }
    gq_code rc = json_object_is_type(v, json_type_string)
                     ? gq_pod_record_parse(json_object_get_string(v),
                                           (size_t)json_object_get_string_len(v), out, err)
                     : gq_err_set(err, GQ_EINVAL, "must be a string");
    if (rc)
        gq_err_prefix(err, "annotation " GQ_ANN_ADMISSION);
    return rc;
}

gq_pod_trust gq_pod_stored_trust(json_object *pod)
{
    gq_pod_record r;
    return gq_pod_record_read(pod, &r, NULL) == GQ_OK ? GQ_TRUST_RECORDS : GQ_TRUST_SPEC;
}

bool gq_pod_record_equal(const gq_pod_record *a, const gq_pod_record *b)
{
    for (int k = 0; k < GQ_KEY_COUNT; k++)
        if (a->charge.set[k] != b->charge.set[k] || a->charge.v[k] != b->charge.v[k])
            return false;
    return a->terminating == b->terminating && a->legacy == b->legacy &&
           !strcmp(a->model, b->model);
}
