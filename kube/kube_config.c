/* kubeconfig and in-cluster configuration. kubeconfig files are parsed with
 * libyaml's document API so every error can cite file:line. */
#include "kube/kube_exec.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#define KUBECONFIG_MAX ((size_t)4 << 20)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount/"

void kube_config_free(kube_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->server);
    free(cfg->namespace_);
    free(cfg->ca_file);
    free(cfg->ca_data.data);
    free(cfg->cert_file);
    free(cfg->cert_data.data);
    free(cfg->key_file);
    free(cfg->key_data.data);
    free(cfg->token);
    free(cfg->token_file);
    kube_exec_config_free(cfg->exec);
    free(cfg->source);
    free(cfg);
}

static int dup_str(char **dst, const char *src)
{
    if (!src) {
        *dst = NULL;
        return 0;
    }
    *dst = strdup(src);
    return *dst ? 0 : -1;
}

static int dup_blob(kube_blob *dst, const kube_blob *src)
{
    dst->data = NULL;
    dst->len = 0;
    if (!src->data)
        return 0;
    dst->data = malloc(src->len ? src->len : 1);
    if (!dst->data)
        return -1;
    memcpy(dst->data, src->data, src->len);
    dst->len = src->len;
    return 0;
}

gq_code kube_config_copy(const kube_config *s, kube_config **out)
{
    kube_config *d = calloc(1, sizeof(*d));
    if (!d)
        return GQ_ENOMEM;
    if (dup_str(&d->server, s->server) || dup_str(&d->namespace_, s->namespace_) ||
        dup_str(&d->ca_file, s->ca_file) || dup_blob(&d->ca_data, &s->ca_data) ||
        dup_str(&d->cert_file, s->cert_file) || dup_blob(&d->cert_data, &s->cert_data) ||
        dup_str(&d->key_file, s->key_file) || dup_blob(&d->key_data, &s->key_data) ||
        dup_str(&d->token, s->token) || dup_str(&d->token_file, s->token_file) ||
        dup_str(&d->source, s->source) || kube_exec_config_copy(s->exec, &d->exec)) {
        kube_config_free(d);
        return GQ_ENOMEM;
    }
    d->insecure_skip_tls_verify = s->insecure_skip_tls_verify;
    *out = d;
    return GQ_OK;
}

/* ---- YAML document walking ---- */

typedef struct ydoc {
    yaml_document_t doc;
    const char *name;
    const char *base_dir;
    gq_err *err;
} ydoc;

static unsigned long line_of(const yaml_node_t *n)
{
    return (unsigned long)n->start_mark.line + 1;
}

GQ_PRINTF(4, 5)
static gq_code yerr(ydoc *y, gq_code code, const yaml_node_t *at, const char *fmt, ...)
{
    char msg[GQ_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return gq_err_set(y->err, code, "%s:%lu: %s", y->name, at ? line_of(at) : 1UL, msg);
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Value node (or, with want_key, the key node) of key in mapping m, or NULL. */
static yaml_node_t *map_find(ydoc *y, yaml_node_t *m, const char *key, int want_key)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(&y->doc, p->key);
        if (scalar(k) && !strcmp(scalar(k), key))
            return want_key ? k : yaml_document_get_node(&y->doc, p->value);
    }
    return NULL;
}

static yaml_node_t *map_get(ydoc *y, yaml_node_t *m, const char *key)
{
    return map_find(y, m, key, 0);
}

/* Errors about a value cite its key's line: block values start on the next. */
static yaml_node_t *key_node(ydoc *y, yaml_node_t *m, const char *key)
{
    return map_find(y, m, key, 1);
}

static int is_null(const yaml_node_t *n)
{
    const char *s = scalar(n);
    return s && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (!strcmp(s, "") || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") ||
            !strcmp(s, "NULL"));
}

/* Optional string field: *out NULL when absent or null. */
static gq_code get_str(ydoc *y, yaml_node_t *m, const char *key, const char **out)
{
    yaml_node_t *v = map_get(y, m, key);
    *out = NULL;
    if (!v || is_null(v))
        return GQ_OK;
    if (v->type != YAML_SCALAR_NODE)
        return yerr(y, GQ_EINVAL, key_node(y, m, key), "\"%s\" must be a string", key);
    *out = scalar(v);
    return GQ_OK;
}

static gq_code get_bool(ydoc *y, yaml_node_t *m, const char *key, int *out)
{
    yaml_node_t *v = map_get(y, m, key);
    *out = 0;
    if (!v || is_null(v))
        return GQ_OK;
    const char *s = scalar(v);
    if (s && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
            *out = 1;
            return GQ_OK;
        }
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
            return GQ_OK;
    }
    return yerr(y, GQ_EINVAL, key_node(y, m, key), "\"%s\" must be a boolean (true or false)", key);
}

/* Find the entry named name in the sequence root[list] and return its
 * root[list][i][inner] mapping. ref is the node to blame when not found. */
static gq_code find_named(ydoc *y, yaml_node_t *root, const char *list, const char *inner,
                          const char *name, const yaml_node_t *ref, yaml_node_t **out)
{
    yaml_node_t *seq = map_get(y, root, list);
    if (seq && !is_null(seq) && seq->type != YAML_SEQUENCE_NODE)
        return yerr(y, GQ_EINVAL, key_node(y, root, list), "\"%s\" must be a sequence", list);
    if (seq && seq->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = seq->data.sequence.items.start;
             it < seq->data.sequence.items.top; it++) {
            yaml_node_t *e = yaml_document_get_node(&y->doc, *it);
            if (!e || e->type != YAML_MAPPING_NODE)
                return yerr(y, GQ_EINVAL, e, "entries of \"%s\" must be mappings", list);
            const char *n;
            gq_code rc = get_str(y, e, "name", &n);
            if (rc)
                return rc;
            if (!n || strcmp(n, name) != 0)
                continue;
            yaml_node_t *v = map_get(y, e, inner);
            if (!v || is_null(v))
                return yerr(y, GQ_EINVAL, e, "%s \"%s\" has no \"%s\" mapping", inner, name, inner);
            if (v->type != YAML_MAPPING_NODE)
                return yerr(y, GQ_EINVAL, key_node(y, e, inner), "\"%s\" must be a mapping", inner);
            *out = v;
            return GQ_OK;
        }
    }
    return yerr(y, GQ_EINVAL, ref, "%s \"%s\" not found", inner, name);
}

static gq_code resolve_path(ydoc *y, const yaml_node_t *at, const char *p, char **out)
{
    if (!p[0])
        return yerr(y, GQ_EINVAL, at, "empty file path");
    size_t need;
    if (p[0] == '/' || !y->base_dir || !y->base_dir[0]) {
        *out = strdup(p);
    } else {
        need = strlen(y->base_dir) + strlen(p) + 2;
        *out = malloc(need);
        if (*out)
            snprintf(*out, need, "%s/%s", y->base_dir, p);
    }
    return *out ? GQ_OK : gq_err_oom(y->err);
}

/* file field -> resolved path; data field -> decoded bytes; both set is an
 * error like in client-go's validation. */
static gq_code file_or_data(ydoc *y, yaml_node_t *m, const char *fkey, const char *dkey,
                            char **file, kube_blob *data)
{
    const char *f, *d;
    gq_code rc = get_str(y, m, fkey, &f);
    if (!rc)
        rc = get_str(y, m, dkey, &d);
    if (rc)
        return rc;
    if (f && d)
        return yerr(y, GQ_EINVAL, key_node(y, m, dkey), "both \"%s\" and \"%s\" are set", fkey,
                    dkey);
    if (f)
        return resolve_path(y, map_get(y, m, fkey), f, file);
    if (d) {
        yaml_node_t *dn = map_get(y, m, dkey);
        rc = kube_base64_decode(d, dn->data.scalar.length, &data->data, &data->len);
        if (rc == GQ_ENOMEM)
            return gq_err_set(y->err, rc, "out of memory");
        if (rc || data->len == 0) {
            free(data->data);
            data->data = NULL;
            data->len = 0;
            return yerr(y, GQ_EINVAL, dn, "\"%s\" is not valid base64", dkey);
        }
    }
    return GQ_OK;
}

static gq_code set_str(ydoc *y, char **dst, const char *s)
{
    *dst = strdup(s);
    return *dst ? GQ_OK : gq_err_oom(y->err);
}

/* What a context names: its cluster, its user (NULL when it names none) and
 * its namespace. */
typedef struct {
    yaml_node_t *cluster, *user;
    const char *cluster_name, *user_name, *ns;
} ctx_refs;

/* The context asked for, or current-context; its cluster and user entries. */
static gq_code resolve_context(ydoc *y, yaml_node_t *root, const char *want_ctx, ctx_refs *r)
{
    gq_code rc;
    const char *ctx_name = want_ctx;
    const yaml_node_t *ctx_ref = key_node(y, root, "contexts");
    if (!ctx_name) {
        rc = get_str(y, root, "current-context", &ctx_name);
        if (rc)
            return rc;
        if (!ctx_name || !ctx_name[0])
            return yerr(y, GQ_EINVAL, root, "current-context is not set");
        ctx_ref = key_node(y, root, "current-context");
    }
    if (!ctx_ref)
        ctx_ref = root;
    yaml_node_t *ctx;
    rc = find_named(y, root, "contexts", "context", ctx_name, ctx_ref, &ctx);
    if (rc)
        return rc;
    rc = get_str(y, ctx, "cluster", &r->cluster_name);
    if (!rc)
        rc = get_str(y, ctx, "user", &r->user_name);
    if (!rc)
        rc = get_str(y, ctx, "namespace", &r->ns);
    if (rc)
        return rc;
    if (!r->cluster_name || !r->cluster_name[0])
        return yerr(y, GQ_EINVAL, ctx, "context \"%s\" names no cluster", ctx_name);
    rc = find_named(y, root, "clusters", "cluster", r->cluster_name, map_get(y, ctx, "cluster"),
                    &r->cluster);
    if (rc)
        return rc;
    if (r->user_name && r->user_name[0]) {
        rc = find_named(y, root, "users", "user", r->user_name, map_get(y, ctx, "user"), &r->user);
        if (rc)
            return rc;
    }
    return GQ_OK;
}

/* The cluster entry: server (trailing slashes dropped), namespace, TLS trust. */
static gq_code cluster_config(ydoc *y, const ctx_refs *r, kube_config *cfg)
{
    yaml_node_t *cluster = r->cluster;
    const char *server;
    gq_code rc = get_str(y, cluster, "server", &server);
    if (rc)
        return rc;
    if (!server || !server[0])
        return yerr(y, GQ_EINVAL, cluster, "cluster \"%s\" has no server", r->cluster_name);
    if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
        return yerr(y, GQ_EINVAL, map_get(y, cluster, "server"),
                    "server \"%s\" must start with https:// or http://", server);
    rc = set_str(y, &cfg->server, server);
    if (rc)
        return rc;
    size_t sl = strlen(cfg->server);
    while (sl > 8 && cfg->server[sl - 1] == '/')
        cfg->server[--sl] = '\0';
    rc = set_str(y, &cfg->namespace_, r->ns && r->ns[0] ? r->ns : "default");
    if (rc)
        return rc;
    rc = get_bool(y, cluster, "insecure-skip-tls-verify", &cfg->insecure_skip_tls_verify);
    if (!rc)
        rc = file_or_data(y, cluster, "certificate-authority", "certificate-authority-data",
                          &cfg->ca_file, &cfg->ca_data);
    return rc;
}

/* token wins over tokenFile, as in client-go. */
static gq_code user_token(ydoc *y, yaml_node_t *user, kube_config *cfg)
{
    const char *token, *token_file;
    gq_code rc = get_str(y, user, "token", &token);
    if (!rc)
        rc = get_str(y, user, "tokenFile", &token_file);
    if (rc)
        return rc;
    if (token && token[0])
        return set_str(y, &cfg->token, token);
    if (token_file)
        return resolve_path(y, map_get(y, user, "tokenFile"), token_file, &cfg->token_file);
    return GQ_OK;
}

/* ---- exec credential plugins (client-go's ExecConfig) ---- */

#define EXEC_EXTENSION "client.authentication.k8s.io/exec"

GQ_PRINTF(4, 5)
static gq_code exec_invalid(ydoc *y, const yaml_node_t *at, const char *user, const char *fmt, ...)
{
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return yerr(y, GQ_EINVAL, at, "%s must be specified for %s to use exec authentication plugin",
                what, user);
}

/* A plain scalar as YAML 1.1 reads it (null, boolean, integer), else a string. */
static json_object *scalar_json(const yaml_node_t *n)
{
    const char *s = scalar(n);
    if (is_null(n))
        return NULL;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
            return json_object_new_boolean(1);
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
            return json_object_new_boolean(0);
        char *end;
        long long v = strtoll(s, &end, 10);
        if (*s && !*end && (s[0] != '0' || !s[1]))
            return json_object_new_int64(v);
    }
    return json_object_new_string(s);
}

/* A YAML subtree as JSON (the cluster's exec extension); *ok 0 on failure. */
static json_object *yaml_json(ydoc *y, yaml_node_t *n, int depth, int *ok)
{
    json_object *o = NULL;
    if (!n || depth > 64) {
        *ok = 0;
        return NULL;
    }
    if (n->type == YAML_SCALAR_NODE) {
        o = scalar_json(n);
        if (!o && !is_null(n))
            *ok = 0;
        return o;
    }
    int seq = n->type == YAML_SEQUENCE_NODE;
    o = seq ? json_object_new_array() : json_object_new_object();
    if (!o) {
        *ok = 0;
        return NULL;
    }
    if (seq) {
        for (yaml_node_item_t *it = n->data.sequence.items.start;
             *ok && it < n->data.sequence.items.top; it++)
            if (json_object_array_add(
                    o, yaml_json(y, yaml_document_get_node(&y->doc, *it), depth + 1, ok)))
                *ok = 0;
        return o;
    }
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; *ok && p < n->data.mapping.pairs.top;
         p++) {
        const char *k = scalar(yaml_document_get_node(&y->doc, p->key));
        json_object *v = yaml_json(y, yaml_document_get_node(&y->doc, p->value), depth + 1, ok);
        if (!k || json_object_object_add(o, k, v)) {
            json_object_put(v);
            *ok = 0;
        }
    }
    return o;
}

/* The cluster's extensions entry named client.authentication.k8s.io/exec,
 * as JSON text (spec.cluster.config of the ExecCredential). */
static gq_code exec_extension(ydoc *y, yaml_node_t *cluster, char **out)
{
    yaml_node_t *seq = map_get(y, cluster, "extensions");
    if (!seq || is_null(seq))
        return GQ_OK;
    if (seq->type != YAML_SEQUENCE_NODE)
        return yerr(y, GQ_EINVAL, key_node(y, cluster, "extensions"),
                    "\"extensions\" must be a sequence");
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(&y->doc, *it);
        const char *name = NULL;
        gq_code rc = e && e->type == YAML_MAPPING_NODE ? get_str(y, e, "name", &name) : GQ_OK;
        if (rc)
            return rc;
        if (!name || strcmp(name, EXEC_EXTENSION) != 0)
            continue;
        int ok = 1;
        yaml_node_t *v = map_get(y, e, "extension");
        json_object *j = v && !is_null(v) ? yaml_json(y, v, 0, &ok) : NULL;
        if (ok && j)
            *out = strdup(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
                                                                JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(j);
        if (!ok)
            return yerr(y, GQ_EINVAL, v, "extension \"%s\" cannot be read as JSON", EXEC_EXTENSION);
        return !j || *out ? GQ_OK : gq_err_oom(y->err);
    }
    return GQ_OK;
}

/* args: a sequence of strings. */
static gq_code exec_args(ydoc *y, yaml_node_t *exec, kube_exec_config *x)
{
    yaml_node_t *seq = map_get(y, exec, "args");
    if (!seq || is_null(seq))
        return GQ_OK;
    if (seq->type != YAML_SEQUENCE_NODE)
        return yerr(y, GQ_EINVAL, key_node(y, exec, "args"), "\"args\" must be a sequence");
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n && !(x->args = calloc(n, sizeof(*x->args))))
        return gq_err_oom(y->err);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *a = yaml_document_get_node(&y->doc, seq->data.sequence.items.start[i]);
        if (!scalar(a))
            return yerr(y, GQ_EINVAL, a, "entries of \"args\" must be strings");
        if (set_str(y, &x->args[x->nargs], scalar(a)))
            return GQ_ENOMEM;
        x->nargs++;
    }
    return GQ_OK;
}

/* env: a sequence of {name, value}, kept as "name=value". */
static gq_code exec_env(ydoc *y, yaml_node_t *exec, const char *user, kube_exec_config *x)
{
    yaml_node_t *seq = map_get(y, exec, "env");
    if (!seq || is_null(seq))
        return GQ_OK;
    if (seq->type != YAML_SEQUENCE_NODE)
        return yerr(y, GQ_EINVAL, key_node(y, exec, "env"), "\"env\" must be a sequence");
    size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
    if (n && !(x->env = calloc(n, sizeof(*x->env))))
        return gq_err_oom(y->err);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = yaml_document_get_node(&y->doc, seq->data.sequence.items.start[i]);
        const char *name = NULL, *value = NULL;
        if (!e || e->type != YAML_MAPPING_NODE)
            return yerr(y, GQ_EINVAL, e, "entries of \"env\" must be mappings");
        gq_code rc = get_str(y, e, "name", &name);
        if (!rc)
            rc = get_str(y, e, "value", &value);
        if (rc)
            return rc;
        if (!name || !name[0])
            return exec_invalid(y, e, user, "env variable name");
        size_t need = strlen(name) + (value ? strlen(value) : 0) + 2;
        if (!(x->env[i] = malloc(need)))
            return gq_err_oom(y->err);
        snprintf(x->env[i], need, "%s=%s", name, value ? value : "");
        x->nenv++;
    }
    return GQ_OK;
}

/* apiVersion and interactiveMode, checked as client-go's defaulting and
 * validation do: v1beta1 defaults to IfAvailable, v1 must say. */
static gq_code exec_version_mode(ydoc *y, yaml_node_t *exec, const char *user, kube_exec_config *x)
{
    const char *ver, *mode;
    gq_code rc = get_str(y, exec, "apiVersion", &ver);
    if (!rc)
        rc = get_str(y, exec, "interactiveMode", &mode);
    if (rc)
        return rc;
    if (!ver || !ver[0])
        return exec_invalid(y, exec, user, "apiVersion");
    if (strcmp(ver, "client.authentication.k8s.io/v1") != 0 &&
        strcmp(ver, "client.authentication.k8s.io/v1beta1") != 0)
        return yerr(y, GQ_EINVAL, map_get(y, exec, "apiVersion"),
                    "exec plugin: invalid apiVersion \"%s\"", ver);
    if ((!mode || !mode[0]) && !strcmp(ver, "client.authentication.k8s.io/v1beta1"))
        mode = "IfAvailable";
    if (!mode || !mode[0])
        return exec_invalid(y, exec, user, "interactiveMode");
    if (!strcmp(mode, "Never"))
        x->interactive_mode = KUBE_EXEC_NEVER;
    else if (!strcmp(mode, "IfAvailable"))
        x->interactive_mode = KUBE_EXEC_IF_AVAILABLE;
    else if (!strcmp(mode, "Always"))
        x->interactive_mode = KUBE_EXEC_ALWAYS;
    else
        return yerr(y, GQ_EINVAL, map_get(y, exec, "interactiveMode"),
                    "invalid interactiveMode for %s: \"%s\"", user, mode);
    return set_str(y, &x->api_version, ver);
}

/* What provideClusterInfo passes on that the connection itself does not use. */
static gq_code exec_cluster(ydoc *y, yaml_node_t *cluster, kube_exec_config *x)
{
    const char *sni, *proxy;
    gq_code rc = get_str(y, cluster, "tls-server-name", &sni);
    if (!rc)
        rc = get_str(y, cluster, "proxy-url", &proxy);
    if (!rc)
        rc = get_bool(y, cluster, "disable-compression", &x->disable_compression);
    if (!rc && sni && sni[0])
        rc = set_str(y, &x->tls_server_name, sni);
    if (!rc && proxy && proxy[0])
        rc = set_str(y, &x->proxy_url, proxy);
    if (!rc)
        rc = exec_extension(y, cluster, &x->cluster_config_json);
    return rc;
}

/* A plugin path made absolute, as clientcmd resolves it against the
 * kubeconfig's absolute folder (so messages name the full path). */
static gq_code absolute(ydoc *y, char **p)
{
    char cwd[PATH_MAX];
    if ((*p)[0] == '/' || !getcwd(cwd, sizeof(cwd)))
        return GQ_OK;
    size_t need = strlen(cwd) + strlen(*p) + 2;
    char *a = malloc(need);
    if (!a)
        return gq_err_oom(y->err);
    snprintf(a, need, "%s/%s", cwd, *p);
    free(*p);
    *p = a;
    return GQ_OK;
}

static gq_code exec_fields(ydoc *y, yaml_node_t *exec, const ctx_refs *r, kube_exec_config *x)
{
    const char *cmd, *hint;
    gq_code rc = exec_version_mode(y, exec, r->user_name, x);
    if (!rc)
        rc = get_str(y, exec, "command", &cmd);
    if (!rc)
        rc = get_str(y, exec, "installHint", &hint);
    if (!rc)
        rc = get_bool(y, exec, "provideClusterInfo", &x->provide_cluster_info);
    if (rc)
        return rc;
    if (!cmd || !cmd[0])
        return exec_invalid(y, exec, r->user_name, "command");
    /* A command with a '/' is a path, relative to the kubeconfig's folder. */
    int is_path = strchr(cmd, '/') != NULL;
    while (is_path && cmd[0] == '.' && cmd[1] == '/') /* as filepath.Join cleans it */
        cmd += 2;
    rc = is_path ? resolve_path(y, map_get(y, exec, "command"), cmd, &x->command)
                 : set_str(y, &x->command, cmd);
    if (!rc && is_path)
        rc = absolute(y, &x->command);
    if (!rc && hint && hint[0])
        rc = set_str(y, &x->install_hint, hint);
    if (!rc)
        rc = exec_args(y, exec, x);
    if (!rc)
        rc = exec_env(y, exec, r->user_name, x);
    if (!rc)
        rc = exec_cluster(y, r->cluster, x);
    return rc;
}

/* auth-provider plugins: gcp and azure were removed from client-go, which
 * says so; the others (oidc and out-of-tree ones) are not built in here. */
static gq_code auth_provider(ydoc *y, yaml_node_t *user, const char *user_name)
{
    yaml_node_t *ap = map_get(y, user, "auth-provider");
    const yaml_node_t *at = key_node(y, user, "auth-provider");
    const char *name = NULL;
    gq_code rc;
    if (ap && ap->type == YAML_MAPPING_NODE && (rc = get_str(y, ap, "name", &name)))
        return rc;
    if (name && !strcmp(name, "gcp"))
        return yerr(y, GQ_EUNSUPPORTED, at,
                    "The gcp auth plugin has been removed.\nPlease use the "
                    "\"gke-gcloud-auth-plugin\" kubectl/client-go credential plugin instead.\nSee "
                    "https://cloud.google.com/blog/products/containers-kubernetes/"
                    "kubectl-auth-changes-in-gke for further details");
    if (name && !strcmp(name, "azure"))
        return yerr(y, GQ_EUNSUPPORTED, at,
                    "The azure auth plugin has been removed.\nPlease use the "
                    "https://github.com/Azure/kubelogin kubectl/client-go credential plugin "
                    "instead.\nSee https://kubernetes.io/docs/reference/access-authn-authz/"
                    "authentication/#client-go-credential-plugins for further details");
    return yerr(y, GQ_EUNSUPPORTED, at,
                "user \"%s\": auth-provider \"%s\" is not supported; use an exec credential "
                "plugin (client.authentication.k8s.io/v1), a token, tokenFile or client "
                "certificate",
                user_name, name ? name : "");
}

/* A user with no token, tokenFile or certificate: its exec plugin, else
 * the auth-provider error, else an anonymous client. */
static gq_code user_plugins(ydoc *y, const ctx_refs *r, kube_config *cfg)
{
    yaml_node_t *user = r->user;
    yaml_node_t *exec = map_get(y, user, "exec");
    yaml_node_t *ap = map_get(y, user, "auth-provider");
    int has_exec = exec && !is_null(exec), has_ap = ap && !is_null(ap);
    if (has_exec && has_ap)
        return yerr(y, GQ_EINVAL, key_node(y, user, "auth-provider"),
                    "authProvider cannot be provided in combination with an exec plugin for %s",
                    r->user_name);
    if (has_ap)
        return auth_provider(y, user, r->user_name);
    if (!has_exec)
        return GQ_OK;
    if (exec->type != YAML_MAPPING_NODE)
        return yerr(y, GQ_EINVAL, key_node(y, user, "exec"), "\"exec\" must be a mapping");
    if (!(cfg->exec = calloc(1, sizeof(*cfg->exec))))
        return gq_err_oom(y->err);
    return exec_fields(y, exec, r, cfg->exec);
}

/* The user entry: client certificate and key, token or tokenFile. */
static gq_code user_config(ydoc *y, const ctx_refs *r, kube_config *cfg)
{
    yaml_node_t *user = r->user;
    gq_code rc = file_or_data(y, user, "client-certificate", "client-certificate-data",
                              &cfg->cert_file, &cfg->cert_data);
    if (!rc)
        rc = file_or_data(y, user, "client-key", "client-key-data", &cfg->key_file, &cfg->key_data);
    if (rc)
        return rc;
    int has_cert = cfg->cert_file || cfg->cert_data.data;
    int has_key = cfg->key_file || cfg->key_data.data;
    if (has_cert != has_key)
        return yerr(y, GQ_EINVAL, user,
                    "user \"%s\": client certificate and key must be given together", r->user_name);
    rc = user_token(y, user, cfg);
    if (rc)
        return rc;
    if (!has_cert && !cfg->token && !cfg->token_file)
        return user_plugins(y, r, cfg);
    return GQ_OK;
}

static gq_code build_config(ydoc *y, const char *want_ctx, kube_config *cfg)
{
    yaml_node_t *root = yaml_document_get_root_node(&y->doc);
    if (!root || is_null(root))
        return yerr(y, GQ_EINVAL, root, "empty kubeconfig");
    if (root->type != YAML_MAPPING_NODE)
        return yerr(y, GQ_EINVAL, root, "kubeconfig must be a mapping");
    ctx_refs r = {0};
    gq_code rc = resolve_context(y, root, want_ctx, &r);
    if (!rc)
        rc = cluster_config(y, &r, cfg);
    if (rc || !r.user)
        return rc;
    return user_config(y, &r, cfg);
}

gq_code kube_config_parse(const char *buf, size_t len, const char *name, const char *base_dir,
                          const char *context, kube_config **out, gq_err *err)
{
    gq_code rc = GQ_OK;
    yaml_parser_t parser;
    ydoc y = {.name = name ? name : "kubeconfig", .base_dir = base_dir, .err = err};
    kube_config *cfg = NULL;
    int have_doc = 0;

    if (len > KUBECONFIG_MAX)
        return gq_err_set(err, GQ_ELIMIT, "%s: larger than %zu bytes", y.name, KUBECONFIG_MAX);
    if (!yaml_parser_initialize(&parser))
        return gq_err_oom(err);
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &y.doc)) {
        gq_code code = parser.error == YAML_MEMORY_ERROR ? GQ_ENOMEM : GQ_EINVAL;
        const char *problem = parser.problem ? parser.problem : "YAML syntax error";
        unsigned long line = (unsigned long)parser.problem_mark.line + 1;
        if (parser.context)
            rc = gq_err_set(err, code, "%s:%lu: %s (%s started at line %lu)", y.name, line, problem,
                            parser.context, (unsigned long)parser.context_mark.line + 1);
        else
            rc = gq_err_set(err, code, "%s:%lu: %s", y.name, line, problem);
        goto out;
    }
    have_doc = 1;
    cfg = calloc(1, sizeof(*cfg));
    if (!cfg) {
        rc = gq_err_oom(err);
        goto out;
    }
    rc = build_config(&y, context, cfg);
    if (rc)
        goto out;
    rc = set_str(&y, &cfg->source, y.name);
    if (rc)
        goto out;
    *out = cfg;
    cfg = NULL;
out:
    kube_config_free(cfg);
    if (have_doc)
        yaml_document_delete(&y.doc);
    yaml_parser_delete(&parser);
    return rc;
}

gq_code kube_config_load_file(const char *path, const char *context, kube_config **out, gq_err *err)
{
    char *buf = NULL, *dir = NULL;
    size_t len;
    gq_code rc = kube_read_file(path, KUBECONFIG_MAX, &buf, &len, err);
    if (rc)
        return rc;
    const char *slash = strrchr(path, '/');
    if (slash) {
        dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
        if (!dir) {
            rc = gq_err_oom(err);
            goto out;
        }
    }
    rc = kube_config_parse(buf, len, path, dir, context, out, err);
out:
    free(dir);
    free(buf);
    return rc;
}

gq_code kube_config_load_incluster(const kube_incluster_paths *paths, kube_config **out,
                                   gq_err *err)
{
    gq_code rc = GQ_OK;
    kube_config *cfg = NULL;
    char *ns = NULL;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *token_file = paths && paths->token_file ? paths->token_file : SA_DIR "token";
    const char *ca_file = paths && paths->ca_file ? paths->ca_file : SA_DIR "ca.crt";
    const char *ns_file =
        paths && paths->namespace_file ? paths->namespace_file : SA_DIR "namespace";
    if (!host || !host[0] || !port || !port[0])
        return gq_err_set(err, GQ_ENOTFOUND,
                          "not running in a cluster: KUBERNETES_SERVICE_HOST and "
                          "KUBERNETES_SERVICE_PORT are not set");
    if (access(token_file, R_OK) != 0)
        return gq_err_set(err, GQ_ENOTFOUND, "in-cluster token file %s is not readable",
                          token_file);
    cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return gq_err_oom(err);
    size_t need = strlen(host) + strlen(port) + 16;
    cfg->server = malloc(need);
    if (!cfg->server) {
        rc = gq_err_oom(err);
        goto out;
    }
    /* An IPv6 service host needs brackets in the URL. */
    snprintf(cfg->server, need, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
             port);
    size_t nslen = 0;
    if (kube_read_file(ns_file, 4096, &ns, &nslen, NULL) == GQ_OK) {
        while (nslen && (ns[nslen - 1] == '\n' || ns[nslen - 1] == '\r' || ns[nslen - 1] == ' '))
            ns[--nslen] = '\0';
    }
    cfg->namespace_ = strdup(ns && ns[0] ? ns : "default");
    cfg->token_file = strdup(token_file);
    cfg->ca_file = access(ca_file, R_OK) == 0 ? strdup(ca_file) : NULL;
    cfg->source = strdup("in-cluster");
    if (!cfg->namespace_ || !cfg->token_file || !cfg->source ||
        (!cfg->ca_file && access(ca_file, R_OK) == 0)) {
        rc = gq_err_oom(err);
        goto out;
    }
    *out = cfg;
    cfg = NULL;
out:
    free(ns);
    kube_config_free(cfg);
    return rc;
}

gq_code kube_config_load_default(const char *kubeconfig_flag, const char *context,
                                 kube_config **out, gq_err *err)
{
    if (kubeconfig_flag && kubeconfig_flag[0])
        return kube_config_load_file(kubeconfig_flag, context, out, err);
    const char *env = getenv("KUBECONFIG");
    if (env && env[0]) {
        /* Only the first file of a list is used; merging is not supported. */
        const char *colon = strchr(env, ':');
        char *first = colon ? strndup(env, (size_t)(colon - env)) : strdup(env);
        if (!first)
            return gq_err_oom(err);
        gq_code rc = kube_config_load_file(first, context, out, err);
        free(first);
        return rc;
    }
    gq_code rc = kube_config_load_incluster(NULL, out, err);
    if (rc != GQ_ENOTFOUND)
        return rc;
    const char *home = getenv("HOME");
    if (home && home[0]) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/.kube/config", home);
        if (access(path, R_OK) == 0)
            return kube_config_load_file(path, context, out, err);
    }
    return gq_err_set(err, GQ_ENOTFOUND,
                      "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, or run "
                      "in a cluster");
}
