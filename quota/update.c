#include "quota/update.h"

#include <stdbool.h>
#include <string.h>

#include "common/json_member.h"
#include "common/jsonutil.h"
#include "quota/podcost.h"
#include "quota/quantity.h"
#include "quota/rewrite.h"

/* Whether quantity strings a and b are the same amount. */
static bool same_amount(json_object *a, json_object *b)
{
    gq_quantity qa, qb;
    if (!json_object_is_type(a, json_type_string) || !json_object_is_type(b, json_type_string))
        return json_object_equal(a, b);
    return gq_quantity_parse(json_object_get_string(a), (size_t)json_object_get_string_len(a), &qa,
                             NULL) == GQ_OK &&
           gq_quantity_parse(json_object_get_string(b), (size_t)json_object_get_string_len(b), &qb,
                             NULL) == GQ_OK &&
           gq_quantity_cmp(&qa, &qb) == 0;
}

/* Whether resource map now (limits or requests of the new container) is map
 * was (the stored one) but for gpuquota's rewrite: keys now has and was
 * lacks are the container's original request (orig, same amounts), keys
 * was has and now lacks are GPU resources gpuquota wrote, and every other
 * key is the same. */
static bool map_restorable(json_object *now, json_object *was, json_object *orig)
{
    if ((now && !json_object_is_type(now, json_type_object)) ||
        (was && !json_object_is_type(was, json_type_object)))
        return json_object_equal(now, was);
    if (!now || !was)
        return !now && !was; /* limits or requests appearing or going: not ours */
    json_object_object_foreach(now, k, v)
    {
        json_object *w = gq_json_member(was, k), *o = gq_json_member(orig, k);
        if (w ? !json_object_equal(v, w) : !(o && same_amount(v, o)))
            return false;
    }
    json_object_object_foreach(was, k2, v2)
    {
        (void)v2;
        if (!gq_json_member(now, k2) && !gq_is_gpu_resource(k2))
            return false;
    }
    return true;
}

/* Whether the resources of new container now are old container was's but
 * for gpuquota's rewrite, given the original request orig of the container
 * (NULL: none recorded). Equal resources are restorable trivially. */
static bool resources_restorable(json_object *now, json_object *was, json_object *orig)
{
    json_object *rn = gq_json_member(now, "resources"), *rw = gq_json_member(was, "resources");
    if (json_object_equal(rn, rw))
        return true;
    if (!orig || !json_object_is_type(rn, json_type_object) ||
        !json_object_is_type(rw, json_type_object))
        return false;
    static const char *const maps[] = {"limits", "requests"};
    for (size_t i = 0; i < 2; i++)
        if (!map_restorable(gq_json_member(rn, maps[i]), gq_json_member(rw, maps[i]), orig))
            return false;
    json_object_object_foreach(rn, k, v)
    {
        if (strcmp(k, "limits") && strcmp(k, "requests") &&
            !json_object_equal(v, gq_json_member(rw, k)))
            return false; /* claims, resize policy: not ours */
    }
    return true;
}

/* The containers (list, "containers" or "initContainers") of new_pod whose
 * resources differ from old_pod's only by gpuquota's rewrite: patch ops
 * putting the stored resources back into p. *ok false when some container
 * differs otherwise, or the lists do not line up. */
static gq_code restore_list(json_object *old_pod, json_object *new_pod, json_object *orig,
                            const char *list, gq_patch *p, bool *ok)
{
    json_object *a = gq_json_get_array(gq_json_member(new_pod, "spec"), list),
                *b = gq_json_get_array(gq_json_member(old_pod, "spec"), list);
    size_t n = a ? json_object_array_length(a) : 0;
    if (n != (b ? json_object_array_length(b) : 0) || n > GQ_POD_MAX_CONTAINERS) {
        *ok = false;
        return GQ_OK;
    }
    for (size_t i = 0; i < n && *ok; i++) {
        json_object *now = json_object_array_get_idx(a, i), *was = json_object_array_get_idx(b, i);
        const char *name = gq_json_get_string(now, "name");
        json_object *rn = gq_json_member(now, "resources"), *rw = gq_json_member(was, "resources");
        if (!name || !gq_json_get_string(was, "name") ||
            strcmp(name, gq_json_get_string(was, "name"))) {
            *ok = false;
            break;
        }
        if (json_object_equal(rn, rw))
            continue;
        if (!resources_restorable(now, was, gq_json_member(orig, name))) {
            *ok = false;
            break;
        }
        json_object *copy = NULL;
        if (json_object_deep_copy(rw, &copy, NULL))
            return GQ_ENOMEM;
        gq_jptr path;
        gq_jptr_init(&path);
        gq_jptr_push(&path, "spec");
        gq_jptr_push(&path, list);
        gq_jptr_push_index(&path, i);
        gq_jptr_push(&path, "resources");
        gq_code rc = rn ? gq_patch_replace(p, &path, copy) : gq_patch_add(p, &path, copy);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

/* The model list a pod came with, re-applied over the model gpuquota chose
 * from it: the stored choice back. */
static gq_code restore_model(json_object *old_pod, json_object *new_pod, gq_patch *p)
{
    json_object *an = gq_json_meta_object(new_pod, "annotations"),
                *ao = gq_json_meta_object(old_pod, "annotations");
    const char *now = gq_json_get_string(an, GQ_ANN_GPU_MODEL),
               *was = gq_json_get_string(ao, GQ_ANN_GPU_MODEL),
               *list = gq_json_get_string(ao, GQ_ANN_GPU_MODEL_CHOICES);
    if (!now || !was || !list || !strcmp(now, was) || strcmp(now, list))
        return GQ_OK;
    gq_jptr path;
    gq_jptr_init(&path);
    gq_jptr_push(&path, "metadata");
    gq_jptr_push(&path, "annotations");
    gq_jptr_push(&path, GQ_ANN_GPU_MODEL);
    json_object *v = json_object_new_string(was);
    return v ? gq_patch_replace(p, &path, v) : GQ_ENOMEM;
}

gq_code gq_update_restore(json_object *old_pod, json_object *new_pod, gq_patch **out, gq_err *err)
{
    gq_patch *p = NULL;
    json_object *orig = NULL;
    gq_code rc;
    bool ok = true;
    *out = NULL;
    if (!json_object_is_type(old_pod, json_type_object) ||
        !json_object_is_type(new_pod, json_type_object))
        return GQ_OK;
    if ((rc = gq_patch_new(&p)))
        goto out;
    /* What gpuquota recorded replacing: only its own record counts (it
     * cannot change after admission; the tamper check keeps it). */
    const char *text =
        gq_json_get_string(gq_json_meta_object(old_pod, "annotations"), GQ_ANN_ORIGINAL);
    if (text && gq_json_parse(text, strlen(text), 4, &orig, NULL) != GQ_OK)
        orig = NULL;
    if ((rc = restore_list(old_pod, new_pod, orig, "initContainers", p, &ok)) ||
        (ok && (rc = restore_list(old_pod, new_pod, orig, "containers", p, &ok))) ||
        (rc = restore_model(old_pod, new_pod, p)))
        goto out;
    if (!ok || !gq_patch_len(p))
        goto out; /* nothing of ours to undo, or more than ours changed */
    *out = p;
    p = NULL;
out:
    json_object_put(orig);
    gq_patch_free(p);
    if (rc == GQ_ENOMEM)
        gq_err_set(err, rc, "out of memory");
    return rc;
}
