/* `gpuquota certs reconcile` and `gpuquota certs delete`: the Helm chart's
 * self-managed certificate step, run in gpuquota's own image (no shell, no
 * kubectl) by the hook Jobs and the renewal CronJob (docs/install.md). */
#include "cli/certs_secrets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "certs/certs.h"
#include "common/json_member.h"
#include "common/base64.h"

#define SECRET_CA "gpuquota-webhook-ca"
#define SECRET_TLS "gpuquota-webhook-tls"
#define PATH_CAP 4096
#define SECRET_MAX (1024 * 1024) /* a Secret's data is at most 1 MiB */

static bool file_path(char *out, const char *dir, const char *name)
{
    return (size_t)snprintf(out, PATH_CAP, "%s/%s", dir, name) < PATH_CAP;
}

static gq_code write_file(const char *dir, const char *name, const void *data, size_t len,
                          gq_err *err)
{
    char path[PATH_CAP];
    if (!file_path(path, dir, name))
        return gq_err_set(err, GQ_EINVAL, "%s: path too long", dir);
    FILE *f = fopen(path, "w");
    if (!f || chmod(path, 0600) != 0 || fwrite(data, 1, len, f) != len) {
        int e = errno;
        if (f)
            fclose(f);
        return gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(e));
    }
    return fclose(f) ? gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno)) : GQ_OK;
}

static gq_code read_file(const char *dir, const char *name, char **out, size_t *len, gq_err *err)
{
    char path[PATH_CAP];
    struct stat st;
    if (!file_path(path, dir, name))
        return gq_err_set(err, GQ_EINVAL, "%s: path too long", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return gq_err_set(err, GQ_EIO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    gq_code rc = GQ_OK;
    if (fstat(fileno(f), &st) || st.st_size > SECRET_MAX)
        rc = gq_err_set(err, GQ_ELIMIT, "%s: unreadable or larger than 1 MiB", path);
    else if (!(buf = malloc((size_t)st.st_size + 1)))
        rc = gq_err_oom(err);
    else if (fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        rc = gq_err_set(err, GQ_EIO, "%s: short read", path);
    fclose(f);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[st.st_size] = '\0';
    *out = buf;
    *len = (size_t)st.st_size;
    return GQ_OK;
}

static bool nonempty(const char *dir, const char *name)
{
    char path[PATH_CAP];
    struct stat st;
    return file_path(path, dir, name) && !stat(path, &st) && st.st_size > 0;
}

/* Write the keys of Secret ns/name present in its data into dir (the
 * files the Secret volume would show). A missing Secret writes nothing. */
static gq_code secret_to_files(const kube_api *api, const char *ns, const char *name,
                               const char *dir, const char *const *keys, size_t n, gq_err *err)
{
    char path[600];
    json_object *s = NULL;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/secrets/%s", ns, name);
    gq_code rc = api->get(api->ctx, path, &s, err);
    if (rc == GQ_ENOTFOUND)
        return GQ_OK;
    json_object *data = gq_json_get_object(s, "data");
    for (size_t i = 0; !rc && i < n; i++) {
        const char *b64 = gq_json_get_string(data, keys[i]);
        unsigned char *raw = NULL;
        size_t len = 0;
        if (!b64)
            continue;
        if (gq_base64_decode(b64, strlen(b64), &raw, &len))
            rc = gq_err_set(err, GQ_EINVAL, "Secret %s: %s is not base64", name, keys[i]);
        else
            rc = write_file(dir, keys[i], raw, len, err);
        free(raw);
    }
    json_object_put(s);
    return rc;
}

/* Whether every certificate of dir/name is valid now and for days more. */
static bool valid_for(const char *dir, const char *name, long days, time_t now)
{
    char path[PATH_CAP];
    certs_info *v = NULL;
    size_t n = 0;
    gq_err e;
    if (!file_path(path, dir, name) || certs_inspect_file(path, &v, &n, &e))
        return false;
    bool ok = n > 0;
    for (size_t i = 0; i < n; i++)
        ok = ok && v[i].not_before <= now && difftime(v[i].not_after, now) >= (double)days * 86400;
    free(v);
    return ok;
}

/* The caBundle the live webhook configurations trust (base64, as helm's
 * lookup read it when it rendered the Job) into dir/file: an install made
 * by hand, taken over, keeps trusting its CA until the new pair is served.
 * Nothing when there is none. */
static gq_code live_bundle(const char *b64, const char *dir, const char *file, gq_err *err)
{
    unsigned char *raw = NULL;
    size_t len = 0;
    gq_code rc = GQ_OK;
    if (!b64 || !b64[0])
        return GQ_OK;
    if (gq_base64_decode(b64, strlen(b64), &raw, &len))
        rc = gq_err_set(err, GQ_EINVAL, "--live-bundle is not base64");
    else
        rc = write_file(dir, file, raw, len, err);
    free(raw);
    return rc;
}

/* Append dir/from to dir/to (which may not exist yet). */
static gq_code append_file(const char *dir, const char *from, const char *to, gq_err *err)
{
    char *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    gq_err ignore;
    if (read_file(dir, from, &a, &la, &ignore))
        return GQ_OK;
    (void)read_file(dir, to, &b, &lb, &ignore);
    char *joined = malloc(la + lb + 2);
    gq_code rc = GQ_OK;
    if (!joined) {
        rc = gq_err_oom(err);
    } else {
        memcpy(joined, b ? b : "", lb);
        joined[lb] = '\n';
        memcpy(joined + lb + 1, a, la);
        rc = write_file(dir, to, joined, lb + 1 + la, err);
    }
    free(joined);
    free(a);
    free(b);
    return rc;
}

/* A Secret gpuquota writes: its name, type and the files it holds. */
typedef struct secret_spec {
    const char *name, *type;
    const char *const *keys; /* file names in the work directory, and data keys */
    size_t n;
} secret_spec;

/* Secret ns/s->name of s->type, labelled as gpuquota's certificate machinery,
 * with an empty data object; NULL when out of memory. */
static json_object *secret_object(const char *ns, const secret_spec *s)
{
    json_object *body = json_object_new_object(), *meta = json_object_new_object(),
                *labels = json_object_new_object(), *data = json_object_new_object();
    if (!body || !meta || !labels || !data) {
        json_object_put(meta), json_object_put(labels), json_object_put(data);
        json_object_put(body);
        return NULL;
    }
    json_object_object_add(labels, "app.kubernetes.io/name", json_object_new_string("gpuquota"));
    json_object_object_add(labels, "app.kubernetes.io/component", json_object_new_string("certs"));
    json_object_object_add(meta, "name", json_object_new_string(s->name));
    json_object_object_add(meta, "namespace", json_object_new_string(ns));
    json_object_object_add(meta, "labels", labels);
    json_object_object_add(body, "apiVersion", json_object_new_string("v1"));
    json_object_object_add(body, "kind", json_object_new_string("Secret"));
    json_object_object_add(body, "metadata", meta);
    json_object_object_add(body, "type", json_object_new_string(s->type));
    json_object_object_add(body, "data", data);
    return body;
}

/* data {key: base64 of dir/key} for the secret's keys. */
static gq_code add_secret_data(json_object *data, const char *dir, const secret_spec *s,
                               gq_err *err)
{
    gq_code rc = GQ_OK;
    for (size_t i = 0; !rc && i < s->n; i++) {
        char *raw = NULL, *b64 = NULL;
        size_t len = 0, blen = 0;
        if (!(rc = read_file(dir, s->keys[i], &raw, &len, err)) &&
            gq_base64_encode(raw, len, &b64, &blen))
            rc = gq_err_oom(err);
        if (!rc)
            json_object_object_add(data, s->keys[i], json_object_new_string(b64));
        free(raw);
        free(b64);
    }
    return rc;
}

/* Secret ns/s->name with data {key: dir/key} for its keys: created, or
 * replaced at the resourceVersion read (a conflict reads again). */
static gq_code put_secret(const kube_api *api, const char *ns, const secret_spec *s,
                          const char *dir, gq_err *err)
{
    char path[700], coll[600];
    snprintf(coll, sizeof coll, "/api/v1/namespaces/%.253s/secrets", ns);
    snprintf(path, sizeof path, "%s/%.63s", coll, s->name);
    json_object *body = secret_object(ns, s);
    if (!body)
        return gq_err_oom(err);
    json_object *meta = gq_json_member(body, "metadata");
    gq_code rc = add_secret_data(gq_json_member(body, "data"), dir, s, err);
    for (int attempt = 0; !rc && attempt < 5; attempt++) {
        json_object *cur = NULL;
        gq_code g = api->get(api->ctx, path, &cur, err);
        if (g == GQ_ENOTFOUND) {
            json_object_object_del(meta, "resourceVersion");
            rc = api->create(api->ctx, coll, body, NULL, err);
        } else if (!g) {
            const char *rv = gq_json_meta_string(cur, "resourceVersion");
            json_object_object_add(meta, "resourceVersion", json_object_new_string(rv ? rv : ""));
            rc = api->update(api->ctx, path, body, NULL, err);
        } else {
            rc = g;
        }
        json_object_put(cur);
        if (rc != GQ_ECONFLICT && rc != GQ_EEXISTS)
            break;
        rc = GQ_OK; /* someone wrote it meanwhile: read again */
        if (attempt == 4)
            rc = gq_err_set(err, GQ_ECONFLICT, "Secret %s keeps changing", s->name);
    }
    json_object_put(body);
    return rc;
}

gq_code cli_certs_reconcile(const kube_api *api, const cli_certs_plan *p, bool *renewed,
                            gq_err *err)
{
    static const char *const ca_keys[] = {"ca.crt", "ca.key", "bundle.crt"};
    static const char *const tls_keys[] = {"tls.crt", "tls.key"};
    static const char *const tls_out[] = {"tls.crt", "tls.key", "ca.crt"};
    gq_code rc;
    *renewed = false;
    if ((rc = secret_to_files(api, p->ns, SECRET_CA, p->work, ca_keys, 3, err)) ||
        (rc = secret_to_files(api, p->ns, SECRET_TLS, p->work, tls_keys, 2, err)))
        return rc;
    bool keep = nonempty(p->work, "tls.crt") && nonempty(p->work, "tls.key") &&
                nonempty(p->work, "ca.key") && nonempty(p->work, "bundle.crt") &&
                valid_for(p->work, "tls.crt", p->renew_days, p->now) &&
                valid_for(p->work, "ca.crt", p->renew_days, p->now);
    if (!keep) {
        /* The CA trusted so far stays in the bundle with the new one: the
         * previous bundle, else (an install made by hand being taken over)
         * what the live configuration trusts; and the CA read now. */
        if (nonempty(p->work, "bundle.crt")) {
            if ((rc = append_file(p->work, "bundle.crt", "previous.crt", err)))
                return rc;
        } else if ((rc = live_bundle(p->live_bundle, p->work, "previous.crt", err))) {
            return rc;
        }
        if ((rc = append_file(p->work, "ca.crt", "previous.crt", err)))
            return rc;
        certs_options o = {.service = p->service,
                           .ns = p->ns,
                           .out_dir = p->work,
                           .days = p->days,
                           .ca_days = p->ca_days,
                           .now = p->now};
        certs_result res;
        char prev[PATH_CAP];
        if ((rc = certs_generate(&o, &res, err)) || !file_path(prev, p->work, "previous.crt") ||
            (rc = certs_bundle_merge(p->work, prev, p->now, err)))
            return rc;
        *renewed = true;
    }
    if (p->inject && (rc = p->inject(p->inject_ud, p->work, err)))
        return rc;
    static const secret_spec ca_secret = {SECRET_CA, "Opaque", ca_keys, 3};
    static const secret_spec tls_secret = {SECRET_TLS, "kubernetes.io/tls", tls_out, 3};
    if ((rc = put_secret(api, p->ns, &ca_secret, p->work, err)) ||
        (rc = put_secret(api, p->ns, &tls_secret, p->work, err)))
        return rc;
    return GQ_OK;
}

gq_code cli_certs_delete(const kube_api *api, const char *ns, gq_err *err)
{
    static const char *const names[] = {SECRET_CA, SECRET_TLS};
    for (size_t i = 0; i < 2; i++) {
        char path[600];
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/secrets/%s", ns, names[i]);
        gq_code rc = api->del(api->ctx, path, err);
        if (rc && rc != GQ_ENOTFOUND)
            return rc;
    }
    return GQ_OK;
}
