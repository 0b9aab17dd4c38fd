/* The claims a pod runs on are the claims it was charged for
 * (quota/claimcheck.h, docs/models-and-dra.md "Claims checked before the
 * pod runs"): the controller's side. A pod held by GQ_CLAIMS_GATE has each
 * claim its record charged read live and compared with the record; each
 * that matches is pinned (a finalizer, so it cannot be deleted and made
 * again), and when all match the gate is lifted. A pin stays until every
 * pod it was made for is bound with the claim reserved for it (Kubernetes'
 * own finalizer then keeps the claim while the pod runs), done or gone. */
#include "controller/ctl_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/gq_log.h"
#include "common/json_member.h"
#include "quota/claimcheck.h"
#include "quota/podqueue.h"

#define RESOURCE_API "/apis/resource.k8s.io/v1"
#define PATH_MAX_LEN 700
/* Claims read per page when unpinning. */
#define UNPIN_PAGE 100u

/* DeviceClasses are read live, as the mutating webhook reads them. A read
 * that fails (not a 404) is remembered: the verdict is then not trusted
 * and the check is retried, never turned into a refusal. */
typedef struct class_reader {
    ctl_controller *c;
    bool failed;
} class_reader;

static gq_class_kind class_kind(void *ctx, const char *name)
{
    class_reader *cr = ctx;
    char path[PATH_MAX_LEN];
    json_object *dc = NULL;
    gq_err err;
    gq_err_clear(&err);
    if (snprintf(path, sizeof path, RESOURCE_API "/deviceclasses/%s", name) >= (int)sizeof path)
        return gq_device_class_kind(cr->c->o.cfg, NULL);
    gq_code rc = cr->c->o.api->get(cr->c->o.api->ctx, path, &dc, &err);
    if (rc && rc != GQ_ENOTFOUND) {
        cr->failed = true;
        GQ_DEBUG("claims: cannot read DeviceClass %s: %s", name, err.msg);
    }
    gq_class_kind k = gq_device_class_kind(cr->c->o.cfg, rc ? NULL : dc);
    json_object_put(dc);
    return k;
}

static bool claim_path(char *path, size_t cap, const char *ns, const char *name)
{
    int n = snprintf(path, cap, RESOURCE_API "/namespaces/%s/resourceclaims/%s", ns, name);
    return n > 0 && (size_t)n < cap;
}

/* Read claim ns/name: GQ_OK with *out NULL when it does not exist. */
static gq_code read_claim(ctl_controller *c, const char *ns, const char *name, json_object **out,
                          gq_err *err)
{
    char path[PATH_MAX_LEN];
    *out = NULL;
    if (!claim_path(path, sizeof path, ns, name))
        return GQ_OK; /* no such name can exist */
    gq_code rc = c->o.api->get(c->o.api->ctx, path, out, err);
    return rc == GQ_ENOTFOUND ? GQ_OK : rc;
}

/* Write pins to claim (as read; see gq_claim_pins_patch). GQ_ECONFLICT
 * when the claim changed since it was read. */
static gq_code write_pins(ctl_controller *c, const char *ns, json_object *claim, json_object *pins,
                          gq_err *err)
{
    char path[PATH_MAX_LEN];
    json_object *patch = NULL;
    const char *name = gq_json_meta_string(claim, "name");
    if (!name || !claim_path(path, sizeof path, ns, name))
        return gq_err_set(err, GQ_EINVAL, "claim without a usable name");
    gq_code rc = gq_claim_pins_patch(claim, pins, &patch, err);
    if (!rc)
        rc = c->o.api->patch_merge(c->o.api->ctx, path, patch, NULL, err);
    json_object_put(patch);
    return rc;
}

/* Pin claim for the pod (uid, name) unless it is already. false: too many
 * pods hold pins on it; wait. */
static gq_code pin(ctl_controller *c, const char *ns, json_object *claim, const char *uid,
                   const char *name, bool *full, gq_err *err)
{
    json_object *pins = gq_claim_pins(claim);
    gq_code rc = GQ_OK;
    *full = false;
    if (!pins)
        return gq_err_oom(err);
    if (!json_object_object_get_ex(pins, uid, NULL)) {
        if (json_object_object_length(pins) >= GQ_CLAIM_MAX_PINS) {
            *full = true;
        } else {
            json_object_object_add(pins, uid, json_object_new_string(name));
            if (!(rc = write_pins(c, ns, claim, pins, err)))
                atomic_fetch_add(&c->claims_pinned, 1);
        }
    }
    json_object_put(pins);
    return rc;
}

static void refuse(ctl_controller *c, json_object *pod, const char *ns, const char *name,
                   const char *why)
{
    char msg[1024];
    snprintf(msg, sizeof msg,
             "%s; the pod stays behind the scheduling gate " GQ_CLAIMS_GATE
             ": delete it and create it again to be charged for the claims it names now",
             why);
    atomic_fetch_add(&c->claims_refused, 1);
    GQ_WARN("pod %s/%s not released: %s", ns, name, why);
    ctl_post_event(c, pod, &(ctl_about){"v1", "Pod", ns, name}, "ClaimNotCharged", msg,
                   ctl_wall_now(c));
}

typedef enum check_outcome { CHECK_DONE, CHECK_WAIT, CHECK_RETRY } check_outcome;

/* Check and pin every claim of pod; CHECK_DONE when all match (or the pod
 * was refused: *refused). */
static check_outcome check_claims(ctl_controller *c, json_object *pod, const char *ns,
                                  const char *name, bool *refused, gq_err *err)
{
    gq_claim_use uses[GQ_POD_MAX_CLAIMS];
    size_t n = 0;
    const char *uid = gq_json_meta_string(pod, "uid");
    *refused = false;
    if (!uid)
        return CHECK_DONE;
    char why[768];
    gq_err e;
    gq_err_clear(&e);
    if (gq_pod_claim_uses(c->o.cfg, pod, uses, &n, &e))
        snprintf(why, sizeof why, "%s", e.msg);
    if (e.code || !gq_pod_claims_distinct(pod, why, sizeof why)) {
        refuse(c, pod, ns, name, why);
        *refused = true;
        return CHECK_DONE;
    }
    check_outcome out = CHECK_DONE;
    for (size_t i = 0; i < n && out != CHECK_RETRY; i++) {
        json_object *claim = NULL;
        class_reader cr = {c, false};
        gq_class_lookup classes = {&cr, class_kind};
        if (uses[i].claim[0] && read_claim(c, ns, uses[i].claim, &claim, err))
            return CHECK_RETRY;
        gq_claim_verdict v =
            gq_claim_verify(c->o.cfg, uid, &uses[i], claim, &classes, why, sizeof why);
        bool full = false;
        if (cr.failed) {
            out = CHECK_RETRY;
        } else if (v == GQ_CLAIM_REFUSED) {
            refuse(c, pod, ns, name, why);
            *refused = true;
            json_object_put(claim);
            return CHECK_DONE;
        } else if (v == GQ_CLAIM_WAIT) {
            out = CHECK_WAIT;
        } else if (claim && pin(c, ns, claim, uid, name, &full, err)) {
            out = CHECK_RETRY;
        } else if (full) {
            out = CHECK_WAIT;
        }
        json_object_put(claim);
    }
    return out;
}

int ctl_claims_check(ctl_controller *c, const char *ns, const char *name)
{
    char path[PATH_MAX_LEN], key[KEY_MAX];
    json_object *pod = NULL, *patch = NULL;
    gq_err err;
    gq_err_clear(&err);
    if (!ctl_make_key(key, 'c', ns, name) ||
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name) >= (int)sizeof path)
        return RES_INVALID;
    gq_code rc = c->o.api->get(c->o.api->ctx, path, &pod, &err);
    if (rc == GQ_ENOTFOUND)
        return RES_OK;
    int gate = rc ? -1 : gq_pod_named_gate_index(pod, GQ_CLAIMS_GATE);
    bool refused = false;
    check_outcome out = rc ? CHECK_RETRY : CHECK_DONE;
    if (!rc && gate >= 0)
        out = check_claims(c, pod, ns, name, &refused, &err);
    if (out == CHECK_DONE && gate >= 0 && !refused) {
        rc = gq_pod_ungate_patch(gq_json_meta_string(pod, "uid"), gate, GQ_CLAIMS_GATE, &patch,
                                 &err);
        if (!rc && c->o.api->patch_json)
            rc = c->o.api->patch_json(c->o.api->ctx, path, patch, NULL, &err);
        json_object_put(patch);
        if (rc && rc != GQ_ENOTFOUND)
            out = CHECK_RETRY; /* the gates moved, or the pod was replaced: read again */
        else
            GQ_DEBUG("pod %s/%s: its claims are the ones charged; released", ns, name);
    }
    json_object_put(pod);
    if (out == CHECK_DONE) {
        ctl_workqueue_forget(c->queue, key);
        return RES_OK;
    }
    if (out == CHECK_RETRY)
        GQ_DEBUG("claims of pod %s/%s: %s", ns, name, err.msg[0] ? err.msg : "retrying");
    ctl_backoff(c, key); /* a claim not made yet: its pod or the claim changes soon */
    return out == CHECK_RETRY ? RES_ERROR : RES_OK;
}

/* Whether the pin for pod (uid, name) of claim must stay: the pod exists
 * under that uid, is not done, and the claim is not yet reserved for it on
 * a node. A read that fails keeps it. */
static bool pin_needed(ctl_controller *c, const char *ns, json_object *claim, const char *uid,
                       const char *name)
{
    char path[PATH_MAX_LEN];
    json_object *pod = NULL;
    gq_err err;
    gq_err_clear(&err);
    if (snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s", ns, name) >= (int)sizeof path)
        return false;
    gq_code rc = c->o.api->get(c->o.api->ctx, path, &pod, &err);
    if (rc)
        return rc != GQ_ENOTFOUND;
    const char *puid = gq_json_meta_string(pod, "uid");
    const char *node = gq_json_get_string(gq_json_member(pod, "spec"), "nodeName");
    bool bound = node && node[0];
    bool needed = puid && !strcmp(puid, uid) && !gq_pod_is_terminal(pod) &&
                  !(gq_json_meta_string(pod, "deletionTimestamp") && !bound);
    json_object_put(pod);
    if (!needed || !bound)
        return needed;
    json_object *rf = gq_json_get_array(gq_json_member(claim, "status"), "reservedFor");
    size_t n = rf ? json_object_array_length(rf) : 0;
    for (size_t i = 0; i < n; i++) {
        const char *r = gq_json_get_string(json_object_array_get_idx(rf, i), "uid");
        if (r && !strcmp(r, uid))
            return false; /* reserved: Kubernetes protects it while the pod runs */
    }
    return true;
}

int ctl_claims_unpin(ctl_controller *c, const char *ns)
{
    char path[PATH_MAX_LEN], key[KEY_MAX];
    gq_err err;
    gq_err_clear(&err);
    if (!ctl_make_key(key, 'u', ns, "") ||
        (ns[0] ? snprintf(path, sizeof path, RESOURCE_API "/namespaces/%s/resourceclaims", ns)
               : snprintf(path, sizeof path, RESOURCE_API "/resourceclaims")) >= (int)sizeof path)
        return RES_INVALID;
    json_object *items = json_object_new_array();
    kube_list_opts lo = {.label_selector = GQ_CLAIM_PINNED_LABEL, .page_size = UNPIN_PAGE};
    gq_code rc = items ? c->o.api->list(c->o.api->ctx, path, &lo, ctl_keep_item, items, NULL, &err)
                       : gq_err_oom(&err);
    bool retry = rc != GQ_OK;
    size_t n = rc ? 0 : json_object_array_length(items);
    for (size_t i = 0; i < n; i++) {
        json_object *claim = json_object_array_get_idx(items, i);
        const char *cns = gq_json_meta_string(claim, "namespace");
        json_object *pins = gq_claim_pins(claim), *keep = json_object_new_object();
        if (!cns || !pins || !keep) {
            json_object_put(pins);
            json_object_put(keep);
            continue;
        }
        json_object_object_foreach(pins, uid, pod)
        {
            if (pin_needed(c, cns, claim, uid, json_object_get_string(pod)))
                json_object_object_add(keep, uid, json_object_get(pod));
        }
        bool finalized = false;
        json_object *f = gq_json_get_array(gq_json_member(claim, "metadata"), "finalizers");
        for (size_t k = 0; f && k < json_object_array_length(f); k++) {
            const char *fin = json_object_get_string(json_object_array_get_idx(f, k));
            finalized = finalized || (fin && !strcmp(fin, GQ_CLAIM_FINALIZER));
        }
        if (json_object_object_length(keep) != json_object_object_length(pins) ||
            (!json_object_object_length(keep) && finalized)) {
            gq_err e;
            gq_err_clear(&e);
            if (write_pins(c, cns, claim, keep, &e)) {
                GQ_DEBUG("claims: unpinning %s/%s: %s", cns, gq_json_meta_string(claim, "name"),
                         e.msg);
                retry = true;
            } else if (!json_object_object_length(keep)) {
                atomic_fetch_add(&c->claims_unpinned, 1);
            }
        }
        json_object_put(pins);
        json_object_put(keep);
    }
    json_object_put(items);
    if (!retry) {
        ctl_workqueue_forget(c->queue, key);
        return RES_OK;
    }
    GQ_DEBUG("claims: unpinning in %s: %s", ns[0] ? ns : "every namespace", err.msg);
    ctl_backoff(c, key);
    return RES_ERROR;
}
