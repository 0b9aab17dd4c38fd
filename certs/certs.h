/* Development and self-managed certificates for the webhook (OpenSSL 3).
 * Only this module includes OpenSSL headers.
 *
 * A directory holds ca.crt, ca.key (the CA whose certificate becomes the
 * webhooks' caBundle) and tls.crt, tls.key (the serving pair, the names a
 * kubernetes.io/tls Secret uses). Keys are EC P-256, written mode 0600;
 * every file is replaced atomically (temporary file + rename), so a server
 * watching the directory never reads half a file. */
#ifndef CERTS_H
#define CERTS_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "common/gq_error.h"

#define CERTS_MAX_SANS 32

typedef struct certs_options {
    const char *service;           /* Service name, e.g. "gpuquota-webhook" */
    const char *ns;                /* its namespace */
    const char *out_dir;           /* existing directory */
    int days;                      /* serving certificate lifetime; > 0 */
    int ca_days;                   /* CA lifetime when a new CA is made; > 0 */
    const char *const *extra_sans; /* extra DNS names or IP addresses */
    size_t n_extra_sans;
    bool rotate; /* renew the serving pair only; requires a usable CA */
    time_t now;  /* the current time (a parameter so tests can pin it) */
} certs_options;

typedef struct certs_result {
    bool ca_created;  /* false when an existing CA was reused */
    time_t not_after; /* of the serving certificate */
} certs_result;

/* Write (or reuse) the CA and write a fresh serving certificate signed by it
 * with SANs S, S.NS, S.NS.svc, S.NS.svc.cluster.local and the extras (IP
 * literals become IP SANs). An existing CA in out_dir is reused when it
 * parses, its key matches, it is a CA and it stays valid for the serving
 * certificate's lifetime; otherwise a new one is made — unless rotate is
 * set, which fails (GQ_ENOTFOUND) rather than change the caBundle.
 * GQ_EINVAL for bad options (names that are not DNS labels, too many SANs),
 * GQ_EIO for file errors, GQ_ETLS for OpenSSL failures. */
gq_code certs_generate(const certs_options *opts, certs_result *result, gq_err *err) GQ_WUR;

typedef struct certs_info {
    char subject[256];
    char issuer[256];
    char sans[1024]; /* "DNS:a, DNS:b, IP:127.0.0.1" */
    time_t not_before;
    time_t not_after;
    bool is_ca;
} certs_info;

/* Every certificate in a PEM file, in file order. Caller frees *out with
 * free(). GQ_EIO when unreadable, GQ_EINVAL when it holds no certificate. */
gq_code certs_inspect_file(const char *path, certs_info **out, size_t *n, gq_err *err) GQ_WUR;

/* Largest CA file certs_ca_bundle_pem accepts. */
#define CERTS_MAX_BUNDLE (1024 * 1024)

/* The certificates of the PEM file at path, re-encoded as PEM, for a
 * webhook's clientConfig.caBundle. Only CERTIFICATE blocks are kept, so a
 * file that also holds a private key never leaks it into the bundle. Every
 * certificate must be a CA (basicConstraints CA:TRUE). On success *pem
 * (free()) holds *len bytes plus a NUL. GQ_EIO when unreadable, GQ_ELIMIT
 * over CERTS_MAX_BUNDLE, GQ_EINVAL when it holds no certificate or one that
 * is not a CA, GQ_ENOMEM/GQ_ETLS for OpenSSL failures. */
gq_code certs_ca_bundle_pem(const char *path, char **pem, size_t *len, gq_err *err) GQ_WUR;

/* The caBundle after a renewal (self-managed certificates): dir/ca.crt
 * first, then every CA certificate of prev_path (absent or empty: none)
 * that has not expired at now and is not already in, in order, written
 * atomically to dir/bundle.crt. Pods still serving a pair of a previous CA
 * (kubelet updates Secret volumes within a minute or so) stay trusted until
 * that CA expires. GQ_EIO for file errors, GQ_EINVAL when dir/ca.crt holds
 * no CA, GQ_ETLS for OpenSSL failures. */
gq_code certs_bundle_merge(const char *dir, const char *prev_path, time_t now, gq_err *err) GQ_WUR;

/* Whole days from now until not_after, rounded down; negative once expired. */
long certs_days_left(const certs_info *info, time_t now);

#endif
