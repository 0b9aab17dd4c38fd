/* caBundle injection: writes the CA that signed the webhook's serving
 * certificate into clientConfig.caBundle of every webhook entry of the
 * MutatingWebhookConfiguration / ValidatingWebhookConfiguration, so the
 * kube-apiserver trusts the webhook. Talks to the API through the kube_api
 * seam (no OpenSSL here; the bundle comes from certs_ca_bundle_pem). */
#ifndef CERTS_INJECT_H
#define CERTS_INJECT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/gq_error.h"
#include "kube/kube.h"

/* GET + PUT attempts per configuration before a run of 409s is an error. */
#define CERTS_INJECT_MAX_ATTEMPTS 5

typedef enum certs_inject_state {
    CERTS_INJECT_UPDATED = 0,
    CERTS_INJECT_UNCHANGED = 1,    /* every entry already carried the bundle: no write */
    CERTS_INJECT_WOULD_UPDATE = 2, /* dry run: a write would have happened */
    CERTS_INJECT_NOT_FOUND = 3,    /* the configuration does not exist */
} certs_inject_state;

typedef struct certs_inject_result {
    certs_inject_state state;
    size_t webhooks;    /* entries in the configuration */
    size_t changed;     /* entries whose caBundle differed (were or would be set) */
    unsigned conflicts; /* 409 Conflict answers that were retried */
} certs_inject_result;

/* Set clientConfig.caBundle to ca_bundle_b64 on every entry of obj's
 * "webhooks" array (creating clientConfig when absent). The object is only
 * modified when every entry is well-formed. *webhooks and *changed (both
 * required) count the entries and those whose caBundle differed. An absent
 * "webhooks" is an empty list. GQ_EINVAL when obj is not an object,
 * "webhooks" is not an array of objects, or a clientConfig is not an object. */
gq_code certs_inject_apply(json_object *obj, const char *ca_bundle_b64, size_t *webhooks,
                           size_t *changed) GQ_WUR;

/* True when name is a valid Kubernetes object name (DNS-1123 subdomain). */
bool certs_inject_valid_name(const char *name);

/* Inject into one configuration: resource is "mutatingwebhookconfigurations"
 * or "validatingwebhookconfigurations" (admissionregistration.k8s.io/v1).
 * GET, certs_inject_apply, and (unless nothing changed or dry_run) PUT with
 * the resourceVersion read; a 409 re-reads and retries, at most
 * CERTS_INJECT_MAX_ATTEMPTS attempts. A missing configuration is not an
 * error: res->state says CERTS_INJECT_NOT_FOUND. *res is written on success.
 * Errors: GQ_EINVAL (bad name or resource, malformed object), GQ_ECONFLICT
 * after the last attempt, or the API's code. */
gq_code certs_inject_config(const kube_api *api, const char *resource, const char *name,
                            const char *ca_bundle_b64, bool dry_run, certs_inject_result *res,
                            gq_err *err) GQ_WUR;

#endif
