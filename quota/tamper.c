#include "quota/tamper.h"

#include <stdbool.h>
#include <string.h>

#include "common/json_member.h"
#include "quota/claimcheck.h"
#include "quota/podqueue.h"

#define TAMPER_PREFIX "gpuquota.io/"
#define TAMPER_MSG "changing gpuquota.io/ labels and annotations is reserved to gpuquota"

static void allow(gq_verdict *v)
{
    v->allowed = true;
    v->code = GQ_OK;
    v->message[0] = '\0';
}

static bool prefixed(const char *key)
{
    return strncmp(key, TAMPER_PREFIX, sizeof(TAMPER_PREFIX) - 1) == 0;
}

/* The first gpuquota.io/ key of a (labels or annotations) that differs in b,
 * or NULL. Called both ways round to catch additions and removals. */
static const char *changed_key(json_object *a, json_object *b)
{
    if (!a)
        return NULL;
    json_object_object_foreach(a, key, val)
    {
        if (!prefixed(key))
            continue;
        json_object *other = NULL;
        if (!b || !json_object_object_get_ex(b, key, &other) || !json_object_equal(val, other))
            return key;
    }
    return NULL;
}

/* Denies a change from old to now of a gpuquota.io/ label or annotation. */
static void keys_changed(json_object *old, json_object *now, gq_verdict *v)
{
    static const char *const maps[] = {"labels", "annotations"};
    for (size_t i = 0; i < 2; i++) {
        json_object *n = gq_json_meta_object(now, maps[i]);
        json_object *o = gq_json_meta_object(old, maps[i]);
        const char *k = changed_key(n, o);
        if (!k)
            k = changed_key(o, n);
        if (k) {
            gq_verdict_deny(v, GQ_EDENIED, TAMPER_MSG " (%s %s)", i ? "annotation" : "label", k);
            return;
        }
    }
}

void gq_tamper_pod_update(json_object *old_pod, json_object *new_pod, gq_verdict *v)
{
    /* Only gpuquota's controller ungates: a pod without its charge, or whose
     * claims are not checked, must not reach the scheduler. Kubernetes
     * refuses to add gates after creation; adding ours is refused here as
     * well, whatever the API server does. */
    static const struct {
        const char *gate, *why;
    } gates[] = {
        {GQ_QUEUE_GATE, "the pod waits for quota (kubectl get gq,gtq shows the queue)"},
        {GQ_CLAIMS_GATE, "the pod waits until gpuquota has checked that its DRA claims are the "
                         "ones charged (kubectl describe pod shows why it waits)"},
    };
    allow(v);
    for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++) {
        bool had = gq_pod_named_gate_index(old_pod, gates[i].gate) >= 0,
             has = gq_pod_named_gate_index(new_pod, gates[i].gate) >= 0;
        if (had != has) {
            gq_verdict_deny(v, GQ_EDENIED, "the scheduling gate %s is %s by gpuquota only: %s",
                            gates[i].gate, had ? "removed" : "added", gates[i].why);
            return;
        }
    }
    keys_changed(old_pod, new_pod, v);
}

/* The gpuquota.io/ finalizer of a ResourceClaim (gq_claim_pins_patch). */
static bool has_claim_finalizer(json_object *claim)
{
    json_object *f = gq_json_get_array(gq_json_member(claim, "metadata"), "finalizers");
    size_t n = f ? json_object_array_length(f) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(f, i);
        if (json_object_is_type(e, json_type_string) &&
            !strcmp(json_object_get_string(e), GQ_CLAIM_FINALIZER))
            return true;
    }
    return false;
}

void gq_tamper_claim_write(json_object *old_claim, json_object *new_claim, gq_verdict *v)
{
    allow(v);
    bool had = has_claim_finalizer(old_claim), has = has_claim_finalizer(new_claim);
    if (had != has) {
        gq_verdict_deny(
            v, GQ_EDENIED,
            "the finalizer " GQ_CLAIM_FINALIZER " is %s by gpuquota only: it keeps the claim a "
            "pod was checked against from being deleted and made again until the pod is bound "
            "or gone",
            had ? "removed" : "added");
        return;
    }
    keys_changed(old_claim, new_claim, v);
}
