/* What kube-apiserver does to a pod before any webhook sees it: the scheme
 * defaults its decoder applies (k8s.io/kubernetes pkg/apis/core/v1
 * SetDefaults_Pod, SetDefaults_PodSpec), resource.Quantity's canonical form,
 * and the built-in mutating admission plugins that run before the webhooks
 * (ServiceAccount, Priority). Webhooks written against kube-apiserver depend
 * on that shape: requests copied from limits, "0.5" arriving as "500m". */
#include <string.h>

#include "quota/quantity.h"
#include "standin.h"

/* The decoder's refusal of a quantity, worded as kube-apiserver words it. */
#define QUANTITY_REGEXP "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

static json_object *child_object(json_object *o, const char *key)
{
    json_object *c = si_obj(o, key);
    return c && json_object_is_type(c, json_type_object) ? c : NULL;
}

static void set_default(json_object *o, const char *key, json_object *v)
{
    if (si_obj(o, key))
        json_object_put(v);
    else
        json_object_object_add(o, key, v);
}

/* Rewrite every value of a ResourceList in canonical form (a JSON number
 * is a quantity too: 1 becomes "1", 0.5 becomes "500m"). */
static gq_code canonical_list(json_object *list, gq_err *err)
{
    if (!list || !json_object_is_type(list, json_type_object))
        return GQ_OK;
    json_object_object_foreach(list, k, v)
    {
        const char *text = NULL;
        if (v &&
            (json_object_is_type(v, json_type_string) || json_object_is_type(v, json_type_int) ||
             json_object_is_type(v, json_type_double)))
            text = json_object_is_type(v, json_type_string)
                       ? json_object_get_string(v)
                       : json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        gq_quantity q;
        gq_err qe = {0};
        gq_code rc = text ? gq_quantity_parse(text, strlen(text), &q, &qe) : GQ_EINVAL;
        if (rc == GQ_EINVAL)
            return gq_err_set(err, GQ_EINVAL,
                              "Pod in version \"v1\" cannot be handled as a Pod: quantities must "
                              "match the regular expression " QUANTITY_REGEXP);
        if (rc) /* out of range: kube caps it; left as written (docs/quantity.md) */
            continue;
        char buf[GQ_QUANTITY_STR_MAX];
        gq_quantity_format(&q, buf);
        if (!json_object_is_type(v, json_type_string) || strcmp(buf, text) != 0)
            json_object_object_add(list, k, json_object_new_string(buf));
    }
    return GQ_OK;
}

/* One container: canonical quantities, then requests default to limits for
 * every resource the container limits without requesting it. */
static gq_code container_defaults(json_object *ctr, gq_err *err)
{
    json_object *res = child_object(ctr, "resources");
    if (!res)
        return GQ_OK;
    json_object *limits = child_object(res, "limits"), *requests = child_object(res, "requests");
    gq_code rc = canonical_list(limits, err);
    if (!rc)
        rc = canonical_list(requests, err);
    if (rc || !limits || !json_object_object_length(limits))
        return rc;
    if (!requests) {
        requests = json_object_new_object();
        json_object_object_add(res, "requests", requests);
    }
    json_object_object_foreach(limits, k, v)
    {
        if (!si_obj(requests, k))
            json_object_object_add(requests, k, json_object_get(v));
    }
    return GQ_OK;
}

gq_code pod_defaults(json_object *pod, gq_err *err)
{
    json_object *spec = child_object(pod, "spec");
    if (!spec)
        return GQ_OK;
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < sizeof lists / sizeof lists[0]; l++) {
        json_object *arr = si_obj(spec, lists[l]);
        for (size_t i = 0;
             arr && json_object_is_type(arr, json_type_array) && i < json_object_array_length(arr);
             i++) {
            gq_code rc = container_defaults(json_object_array_get_idx(arr, i), err);
            if (rc)
                return rc;
        }
    }
    gq_code rc = canonical_list(child_object(spec, "overhead"), err);
    if (!rc)
        rc = canonical_list(child_object(child_object(spec, "resources"), "limits"), err);
    if (!rc)
        rc = canonical_list(child_object(child_object(spec, "resources"), "requests"), err);
    if (rc)
        return rc;
    set_default(spec, "restartPolicy", json_object_new_string("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json_object_new_int64(30));
    set_default(spec, "dnsPolicy", json_object_new_string("ClusterFirst"));
    set_default(spec, "securityContext", json_object_new_object());
    set_default(spec, "schedulerName", json_object_new_string("default-scheduler"));
    set_default(spec, "enableServiceLinks", json_object_new_boolean(1));
    return GQ_OK;
}

void pod_admission_defaults(json_object *pod)
{
    json_object *spec = child_object(pod, "spec");
    if (!spec)
        return;
    set_default(spec, "serviceAccountName", json_object_new_string("default"));
    /* Priority: the built-in classes resolve to their values; no class means
     * the (absent) global default, priority 0. Other classes are not stored
     * in the stand-in and are left unresolved rather than refused. */
    const char *pc = si_str(spec, "priorityClassName");
    int64_t prio = 0;
    if (pc && !strcmp(pc, "system-node-critical"))
        prio = 2000001000;
    else if (pc && !strcmp(pc, "system-cluster-critical"))
        prio = 2000000000;
    else if (pc && *pc)
        return;
    json_object_object_add(spec, "priority", json_object_new_int64(prio));
    set_default(spec, "preemptionPolicy", json_object_new_string("PreemptLowerPriority"));
}
