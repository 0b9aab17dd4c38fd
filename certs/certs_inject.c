#include "certs/certs_inject.h"

#include <stdio.h>
#include <string.h>

/* Both passes walk the same entries; the first only checks, so a malformed
 * entry late in the list leaves the object untouched. */
gq_code certs_inject_apply(json_object *obj, const char *ca_bundle_b64, size_t *webhooks,
                           size_t *changed)
{
    json_object *list = NULL;
    size_t n, diff = 0;
    if (!json_object_is_type(obj, json_type_object) || !ca_bundle_b64)
        return GQ_EINVAL;
    if (json_object_object_get_ex(obj, "webhooks", &list) && list &&
        !json_object_is_type(list, json_type_array))
        return GQ_EINVAL;
    n = list ? json_object_array_length(list) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *wh = json_object_array_get_idx(list, i), *cc = NULL, *cur = NULL;
        if (!json_object_is_type(wh, json_type_object))
            return GQ_EINVAL;
        if (json_object_object_get_ex(wh, "clientConfig", &cc) &&
            !json_object_is_type(cc, json_type_object))
            return GQ_EINVAL;
        if (!cc || !json_object_object_get_ex(cc, "caBundle", &cur) ||
            !json_object_is_type(cur, json_type_string) ||
            strcmp(json_object_get_string(cur), ca_bundle_b64) != 0)
            diff++;
    }
    for (size_t i = 0; i < n && diff; i++) {
        json_object *wh = json_object_array_get_idx(list, i), *cc = NULL;
        if (!json_object_object_get_ex(wh, "clientConfig", &cc) || !cc) {
            cc = json_object_new_object();
            if (!cc || json_object_object_add(wh, "clientConfig", cc)) {
                json_object_put(cc);
                return GQ_ENOMEM;
            }
        }
        json_object *s = json_object_new_string(ca_bundle_b64);
        if (!s || json_object_object_add(cc, "caBundle", s)) {
            json_object_put(s);
            return GQ_ENOMEM;
        }
    }
    *webhooks = n;
    *changed = diff;
    return GQ_OK;
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*, at most 253. */
bool certs_inject_valid_name(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > 253)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i], prev = i ? name[i - 1] : '.';
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        bool prev_alnum = (prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9');
        if (c == '.' && !prev_alnum)
            return false; /* a label ends alphanumeric */
        if (c == '-' && prev == '.')
            return false; /* a label starts alphanumeric */
        if (!alnum && c != '.' && c != '-')
            return false;
    }
    char last = name[len - 1];
    return (last >= 'a' && last <= 'z') || (last >= '0' && last <= '9');
}

/* The API path of a webhook configuration, once resource and name are
 * known to be ones we may write. */
static gq_code config_path(const char *resource, const char *name, char *path, size_t cap,
                           gq_err *err)
{
    if (!resource || (strcmp(resource, "mutatingwebhookconfigurations") != 0 &&
                      strcmp(resource, "validatingwebhookconfigurations") != 0))
        return gq_err_set(err, GQ_EINVAL, "unknown webhook configuration resource");
    if (!certs_inject_valid_name(name))
        return gq_err_set(err, GQ_EINVAL, "invalid configuration name \"%s\"", name ? name : "");
    snprintf(path, cap, "/apis/admissionregistration.k8s.io/v1/%s/%s", resource, name);
    return GQ_OK;
}

gq_code certs_inject_config(const kube_api *api, const char *resource, const char *name,
                            const char *ca_bundle_b64, bool dry_run, certs_inject_result *res,
                            gq_err *err)
{
    certs_inject_result r = {0};
    json_object *obj = NULL;
    char path[512];
    gq_code rc = config_path(resource, name, path, sizeof(path), err);
    if (rc)
        return rc;
    for (unsigned attempt = 1;; attempt++) {
        json_object_put(obj);
        obj = NULL;
        rc = api->get(api->ctx, path, &obj, err);
        if (rc == GQ_ENOTFOUND)
            goto not_found;
        if (rc)
            goto out;
        rc = certs_inject_apply(obj, ca_bundle_b64, &r.webhooks, &r.changed);
        if (rc) {
            gq_err_set(err, rc, "%s/%s: %s", resource, name,
                       rc == GQ_ENOMEM ? "out of memory" : "malformed webhooks list");
            goto out;
        }
        if (r.changed == 0) {
            r.state = CERTS_INJECT_UNCHANGED;
            break;
        }
        if (dry_run) {
            r.state = CERTS_INJECT_WOULD_UPDATE;
            break;
        }
        /* obj still carries the resourceVersion it was read at, so a
         * concurrent writer makes this a 409 rather than a lost update. */
        rc = api->update(api->ctx, path, obj, NULL, err);
        if (rc == GQ_ECONFLICT && attempt < CERTS_INJECT_MAX_ATTEMPTS) {
            r.conflicts++;
            continue;
        }
        if (rc == GQ_ENOTFOUND)
            goto not_found; /* deleted between the read and the write */
        if (rc)
            goto out;
        r.state = CERTS_INJECT_UPDATED;
        break;
    }
    goto done;
not_found:
    rc = GQ_OK;
    r.state = CERTS_INJECT_NOT_FOUND;
    r.webhooks = r.changed = 0;
done:
    *res = r;
out:
    json_object_put(obj);
    return rc;
}
