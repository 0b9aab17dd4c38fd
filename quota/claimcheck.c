#include "quota/claimcheck.h"

#include <stdio.h>
#include <string.h>

#include "common/json_member.h"
#include "common/jsonutil.h"
#include "quota/quantity.h"

/* The claim status.resourceClaimStatuses gives entry: *name NULL when the
 * entry is listed without one (no claim needed); false when not listed. */
static bool status_claim(json_object *pod, const char *entry, const char **name)
{
    json_object *sts = gq_json_get_array(gq_json_member(pod, "status"), "resourceClaimStatuses");
    size_t n = sts ? json_object_array_length(sts) : 0;
    for (size_t i = 0; i < n && i < GQ_POD_MAX_CLAIMS; i++) {
        json_object *s = json_object_array_get_idx(sts, i);
        const char *e = gq_json_get_string(s, "name");
        if (e && !strcmp(e, entry)) {
            *name = gq_json_get_string(s, "resourceClaimName");
            return true;
        }
    }
    return false;
}

static bool copy_name(char *dst, size_t cap, const char *src)
{
    size_t len = src ? strlen(src) : 0;
    if (!len || len >= cap)
        return false;
    memcpy(dst, src, len + 1);
    return true;
}

gq_code gq_pod_claim_uses(const gq_config *cfg, json_object *pod, gq_claim_use *out, size_t *n,
                          gq_err *err)
{
    *n = 0;
    const char *text = gq_json_get_string(gq_json_meta_object(pod, "annotations"), GQ_ANN_CLAIMS);
    json_object *claims = gq_json_get_array(gq_json_member(pod, "spec"), "resourceClaims");
    if (!text)
        return GQ_OK;
    json_object *recs = NULL;
    gq_err e;
    gq_code rc = gq_json_parse(text, strlen(text), 4, &recs, &e);
    if (rc || !json_object_is_type(recs, json_type_object)) {
        json_object_put(recs);
        return rc == GQ_ENOMEM
                   ? gq_err_set(err, rc, "out of memory")
                   : gq_err_set(err, GQ_EINVAL,
                                "annotation " GQ_ANN_CLAIMS " is not a record gpuquota wrote");
    }
    size_t len = claims ? json_object_array_length(claims) : 0;
    for (size_t i = 0; !rc && i < len && *n < GQ_POD_MAX_CLAIMS; i++) {
        json_object *c = json_object_array_get_idx(claims, i), *rec = NULL;
        const char *entry = gq_json_get_string(c, "name"),
                   *named = gq_json_get_string(c, "resourceClaimName"),
                   *tmpl = gq_json_get_string(c, "resourceClaimTemplateName");
        if (!entry || !json_object_object_get_ex(recs, entry, &rec))
            continue; /* not charged: refused at admission where a quota governs */
        gq_claim_use *u = &out[*n];
        bool shared = false;
        memset(u, 0, sizeof(*u));
        if (!copy_name(u->entry, sizeof u->entry, entry) ||
            !gq_claim_record_read(cfg, rec, &u->rec, &shared) || shared != (named && !tmpl)) {
            rc = gq_err_set(err, GQ_EINVAL,
                            "annotation " GQ_ANN_CLAIMS ": entry \"%.63s\" is not what gpuquota "
                            "writes for the claim the pod names",
                            entry);
            break;
        }
        const char *made = NULL;
        u->generated = !shared;
        if (shared)
            rc = copy_name(u->claim, sizeof u->claim, named)
                     ? GQ_OK
                     : gq_err_set(err, GQ_EINVAL, "claim \"%.63s\": invalid name", entry);
        else if (status_claim(pod, entry, &made))
            u->unneeded = !made || !copy_name(u->claim, sizeof u->claim, made);
        if (!rc)
            (*n)++;
    }
    json_object_put(recs);
    return rc;
}

bool gq_pod_claims_distinct(json_object *pod, char *why, size_t cap)
{
    json_object *claims = gq_json_get_array(gq_json_member(pod, "spec"), "resourceClaims");
    size_t n = claims ? json_object_array_length(claims) : 0;
    const char *entry[GQ_POD_MAX_CLAIMS], *used[GQ_POD_MAX_CLAIMS];
    size_t m = 0;
    for (size_t i = 0; i < n && m < GQ_POD_MAX_CLAIMS; i++) {
        json_object *c = json_object_array_get_idx(claims, i);
        const char *e = gq_json_get_string(c, "name"), *name = NULL;
        if (!e)
            continue;
        if (!gq_json_get_string(c, "resourceClaimTemplateName"))
            name = gq_json_get_string(c, "resourceClaimName");
        else if (!status_claim(pod, e, &name))
            name = NULL;
        if (!name)
            continue;
        for (size_t j = 0; j < m; j++) {
            if (strcmp(used[j], name))
                continue;
            snprintf(why, cap,
                     "spec.resourceClaims entries \"%.63s\" and \"%.63s\" use the same "
                     "ResourceClaim %.253s: Kubernetes cannot reserve a claim twice for one pod",
                     entry[j], e, name);
            return false;
        }
        entry[m] = e;
        used[m++] = name;
    }
    return true;
}

/* Whether claim's ownerReferences name the pod (uid) as its controller, as
 * the resourceclaim controller writes for a template's claim. */
static bool owned_by(json_object *claim, const char *pod_uid)
{
    json_object *refs = gq_json_get_array(gq_json_member(claim, "metadata"), "ownerReferences");
    size_t n = refs ? json_object_array_length(refs) : 0;
    for (size_t i = 0; i < n && i < 64; i++) {
        json_object *r = json_object_array_get_idx(refs, i);
        const char *uid = gq_json_get_string(r, "uid");
        json_object *ctl = gq_json_get_typed(r, "controller", json_type_boolean);
        if (uid && !strcmp(uid, pod_uid) && ctl && json_object_get_boolean(ctl))
            return true;
    }
    return false;
}

gq_claim_verdict gq_claim_verify(const gq_config *cfg, const char *pod_uid, const gq_claim_use *u,
                                 json_object *claim, const gq_class_lookup *classes, char *why,
                                 size_t cap)
{
    why[0] = '\0';
    if (u->unneeded)
        return GQ_CLAIM_MATCHES;
    if (!u->claim[0] || !claim)
        return GQ_CLAIM_WAIT;
    const char *uid = gq_json_meta_string(claim, "uid");
    if (gq_json_meta_string(claim, "deletionTimestamp")) {
        snprintf(why, cap, "ResourceClaim %s is being deleted", u->claim);
        return GQ_CLAIM_REFUSED;
    }
    if (!u->generated) {
        if (uid && !strcmp(uid, u->rec.uid))
            return GQ_CLAIM_MATCHES;
        snprintf(why, cap,
                 "ResourceClaim %s is not the claim gpuquota charged at admission (uid %.64s, "
                 "charged uid %.64s): it was deleted and made again",
                 u->claim, uid ? uid : "none", u->rec.uid);
        return GQ_CLAIM_REFUSED;
    }
    if (!owned_by(claim, pod_uid)) {
        snprintf(why, cap, "ResourceClaim %s is not the pod's own claim (no owner reference)",
                 u->claim);
        return GQ_CLAIM_REFUSED;
    }
    gq_claim_cost cc;
    gq_err e;
    char what[300];
    gq_err_clear(&e);
    snprintf(what, sizeof what, "ResourceClaim \"%s\"", u->claim);
    if (gq_claim_spec_cost(cfg, gq_json_member(claim, "spec"), classes, what, &cc, &e)) {
        snprintf(why, cap, "%s: gpuquota cannot price it (%s)", what, e.msg);
        return GQ_CLAIM_REFUSED;
    }
    bool model_ok = !u->rec.model || (cc.gpus == 0 || cc.model == u->rec.model);
    if (cc.gpus <= u->rec.gpus && cc.gpu_memory <= u->rec.memory && model_ok)
        return GQ_CLAIM_MATCHES;
    char mem[GQ_QUANTITY_STR_MAX], rmem[GQ_QUANTITY_STR_MAX];
    gq_format_bytes(cc.gpu_memory, mem);
    gq_format_bytes(u->rec.memory, rmem);
    snprintf(why, cap,
             "ResourceClaim %s asks %lld GPUs (%s, model %s) but gpuquota charged %lld (%s, "
             "model %s) at admission: its template was replaced after the pod was admitted",
             u->claim, (long long)cc.gpus, mem, cc.model ? cc.model->name : "unknown",
             (long long)u->rec.gpus, rmem, u->rec.model ? u->rec.model->name : "any");
    return GQ_CLAIM_REFUSED;
}

json_object *gq_claim_pins(json_object *claim)
{
    json_object *out = json_object_new_object();
    const char *text =
        gq_json_get_string(gq_json_meta_object(claim, "annotations"), GQ_CLAIM_PINNED_FOR);
    json_object *got = NULL;
    gq_err e;
    if (!out || !text || gq_json_parse(text, strlen(text), 2, &got, &e) ||
        !json_object_is_type(got, json_type_object)) {
        json_object_put(got);
        return out;
    }
    size_t n = 0;
    json_object_object_foreach(got, uid, name)
    {
        if (n++ >= GQ_CLAIM_MAX_PINS || !json_object_is_type(name, json_type_string))
            continue;
        json_object_object_add(out, uid, json_object_get(name));
    }
    json_object_put(got);
    return out;
}

/* claim's finalizers with GQ_CLAIM_FINALIZER present (want) or absent. */
static json_object *finalizers(json_object *claim, bool want)
{
    json_object *have = gq_json_get_array(gq_json_member(claim, "metadata"), "finalizers");
    json_object *out = json_object_new_array();
    size_t n = have ? json_object_array_length(have) : 0;
    for (size_t i = 0; out && i < n; i++) {
        json_object *f = json_object_array_get_idx(have, i);
        if (json_object_is_type(f, json_type_string) &&
            !strcmp(json_object_get_string(f), GQ_CLAIM_FINALIZER))
            continue;
        json_object_array_add(out, json_object_get(f));
    }
    if (out && want)
        json_object_array_add(out, json_object_new_string(GQ_CLAIM_FINALIZER));
    return out;
}

/* {key: value} (value NULL: JSON null, which a merge patch removes). */
static json_object *one(const char *key, json_object *value)
{
    json_object *o = json_object_new_object();
    if (o)
        json_object_object_add(o, key, value);
    else
        json_object_put(value);
    return o;
}

gq_code gq_claim_pins_patch(json_object *claim, json_object *pins, json_object **out, gq_err *err)
{
    const char *rv = gq_json_meta_string(claim, "resourceVersion");
    if (!rv || !rv[0])
        return gq_err_set(err, GQ_EINVAL, "the claim has no metadata.resourceVersion");
    bool pin = json_object_object_length(pins) > 0;
    json_object *meta = json_object_new_object(), *patch = one("metadata", meta);
    if (!patch)
        goto oom;
    json_object_object_add(meta, "resourceVersion", json_object_new_string(rv));
    json_object_object_add(meta, "finalizers", finalizers(claim, pin));
    json_object_object_add(meta, "labels",
                           one(GQ_CLAIM_PINNED_LABEL, pin ? json_object_new_string("true") : NULL));
    json_object_object_add(
        meta, "annotations",
        one(GQ_CLAIM_PINNED_FOR, pin ? json_object_new_string(gq_json_compact(pins)) : NULL));
    if (json_object_object_length(meta) != 4 || !gq_json_get_string(meta, "resourceVersion") ||
        !gq_json_member(meta, "finalizers") || !gq_json_member(meta, "labels") ||
        !gq_json_member(meta, "annotations"))
        goto oom;
    *out = patch;
    return GQ_OK;
oom:
    json_object_put(patch);
    return gq_err_oom(err);
}
