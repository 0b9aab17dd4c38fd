/* client-go credential plugins (a kubeconfig user's "exec"): the plugin run
 * as a child process, the ExecCredential it is given on KUBERNETES_EXEC_INFO
 * and the one it prints, and the credential cached until it expires. Private
 * to kube/ and its tests. */
#ifndef KUBE_EXEC_H
#define KUBE_EXEC_H

#include "kube/kube_int.h"

#define KUBE_EXEC_INFO_ENV "KUBERNETES_EXEC_INFO"

void kube_exec_config_free(kube_exec_config *x);
/* Deep copy; *out NULL when src is NULL. */
gq_code kube_exec_config_copy(const kube_exec_config *src, kube_exec_config **out) GQ_WUR;

typedef struct kube_exec_opts {
    long timeout_ms;            /* a plugin run; 0: 60 s (interactive: 10 min) */
    size_t max_output;          /* its standard output; 0: 1 MiB */
    int (*is_terminal)(int fd); /* NULL: isatty */
} kube_exec_opts;

/* A credential a plugin returned: a bearer token and/or a client
 * certificate and key (PEM). All owned. */
typedef struct kube_exec_cred {
    char *token;
    kube_blob cert, key;
    int64_t expires_us; /* Unix microseconds; 0: no expirationTimestamp */
    unsigned long gen;  /* which plugin run returned it (1, 2, ...) */
} kube_exec_cred;

void kube_exec_cred_dispose(kube_exec_cred *c);

typedef struct kube_exec_auth kube_exec_auth;

/* The plugin of cfg->exec for cfg's cluster; does not run it. With
 * provideClusterInfo the CA file is read here (GQ_EIO when it cannot be).
 * o may be NULL. */
gq_code kube_exec_auth_new(const kube_config *cfg, const kube_exec_opts *o, kube_exec_auth **out,
                           gq_err *err) GQ_WUR;
void kube_exec_auth_free(kube_exec_auth *a);

/* A copy of the cached credential, running the plugin first when there is
 * none or it has expired. Thread-safe. Errors carry client-go's text after
 * "getting credentials: ": GQ_ENOTFOUND (no such executable), GQ_EIO (it
 * could not start or exited non-zero), GQ_ETIMEOUT, GQ_ELIMIT (output over
 * the cap), GQ_EINVAL (output that is no usable ExecCredential),
 * GQ_EUNSUPPORTED (interactiveMode Always without a terminal). */
gq_code kube_exec_auth_get(kube_exec_auth *a, kube_exec_cred *out, gq_err *err) GQ_WUR;

/* After kube-apiserver answered 401 to the credential of run gen: run the
 * plugin again unless another caller already replaced that credential. */
gq_code kube_exec_auth_refresh(kube_exec_auth *a, unsigned long gen, gq_err *err) GQ_WUR;

#endif
