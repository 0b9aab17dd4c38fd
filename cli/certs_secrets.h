/* The self-managed certificate step of the Helm chart as one command, in
 * gpuquota's own image (docs/install.md, "Self-managed certificates"). */
#ifndef CLI_CERTS_SECRETS_H
#define CLI_CERTS_SECRETS_H

#include <stdbool.h>
#include <time.h>

#include "common/gq_error.h"
#include "kube/kube.h"

typedef struct cli_certs_plan {
    const char *ns;          /* the release namespace: the Secrets and the Service */
    const char *service;     /* "gpuquota-webhook" */
    const char *live_bundle; /* base64 caBundle the live configurations trust; NULL: none */
    const char *work;        /* a writable folder (the Job's emptyDir) */
    int days, ca_days;       /* serving pair and (new) CA lifetimes */
    long renew_days;         /* renew when either expires within this many days */
    time_t now;
    /* Tell kube-apiserver the bundle in work/bundle.crt before the Secrets
     * change; NULL: not now (before the first install). */
    gq_code (*inject)(void *ud, const char *work, gq_err *err);
    void *inject_ud;
} cli_certs_plan;

/* From Secrets gpuquota-webhook-ca (ca.crt, ca.key, bundle.crt) and
 * gpuquota-webhook-tls (tls.crt, tls.key) as they are: keep the serving pair
 * when both it and the CA stay valid for renew_days, else generate it
 * (certs_generate keeps a CA that outlives it) and make the bundle the
 * current CA plus the CAs trusted so far that have not expired (the previous
 * bundle; with none, live_bundle);
 * inject; then write both Secrets (created, or replaced at the
 * resourceVersion read). *renewed says whether the pair was made anew. */
gq_code cli_certs_reconcile(const kube_api *api, const cli_certs_plan *p, bool *renewed,
                            gq_err *err) GQ_WUR;

/* Delete both Secrets (absent ones are fine): the chart's post-delete step. */
gq_code cli_certs_delete(const kube_api *api, const char *ns, gq_err *err) GQ_WUR;

#endif
