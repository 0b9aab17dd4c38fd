/* client-go credential plugins, as client-go's plugin/pkg/client/auth/exec
 * runs them: fork/exec (no shell) with the ExecCredential request on
 * KUBERNETES_EXEC_INFO, stderr passed through, stdin only in interactive
 * mode, stdout decoded as an ExecCredential whose token and/or client
 * certificate are cached until expirationTimestamp. Output and run time are
 * bounded. Error texts are client-go's, so they read as kubectl's do. */
#define _GNU_SOURCE
#include "kube/kube_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/rfc3339.h"

extern char **environ;

#define EXEC_TIMEOUT_MS 60000L
#define EXEC_INTERACTIVE_TIMEOUT_MS 600000L
#define EXEC_MAX_OUTPUT ((size_t)1 << 20)

static const char install_help[] =
    "\n\nIt looks like you are trying to use a client-go credential plugin that is not "
    "installed.\n\nTo learn more about this feature, consult the documentation available at:\n"
    "      https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
    "#client-go-credential-plugins";

/* ---- configuration ---- */

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

void kube_exec_config_free(kube_exec_config *x)
{
    if (!x)
        return;
    free(x->api_version);
    free(x->command);
    free_list(x->args, x->nargs);
    free_list(x->env, x->nenv);
    free(x->install_hint);
    free(x->tls_server_name);
    free(x->proxy_url);
    free(x->cluster_config_json);
    free(x);
}

static int copy_str(char **dst, const char *src)
{
    *dst = src ? strdup(src) : NULL;
    return src && !*dst;
}

static int copy_list(char ***dst, const char *const *src, size_t n)
{
    *dst = NULL;
    if (!n)
        return 0;
    *dst = calloc(n, sizeof(**dst));
    if (!*dst)
        return 1;
    for (size_t i = 0; i < n; i++)
        if (copy_str(&(*dst)[i], src[i]))
            return 1;
    return 0;
}

gq_code kube_exec_config_copy(const kube_exec_config *s, kube_exec_config **out)
{
    *out = NULL;
    if (!s)
        return GQ_OK;
    kube_exec_config *d = calloc(1, sizeof(*d));
    if (!d)
        return GQ_ENOMEM;
    d->nargs = s->nargs;
    d->nenv = s->nenv;
    d->interactive_mode = s->interactive_mode;
    d->provide_cluster_info = s->provide_cluster_info;
    d->disable_compression = s->disable_compression;
    if (copy_str(&d->api_version, s->api_version) || copy_str(&d->command, s->command) ||
        copy_list(&d->args, (const char *const *)s->args, s->nargs) ||
        copy_list(&d->env, (const char *const *)s->env, s->nenv) ||
        copy_str(&d->install_hint, s->install_hint) ||
        copy_str(&d->tls_server_name, s->tls_server_name) ||
        copy_str(&d->proxy_url, s->proxy_url) ||
        copy_str(&d->cluster_config_json, s->cluster_config_json)) {
        kube_exec_config_free(d);
        return GQ_ENOMEM;
    }
    *out = d;
    return GQ_OK;
}

void kube_exec_cred_dispose(kube_exec_cred *c)
{
    if (!c)
        return;
    free(c->token);
    free(c->cert.data);
    free(c->key.data);
    memset(c, 0, sizeof(*c));
}

static gq_code cred_copy(const kube_exec_cred *s, kube_exec_cred *d)
{
    memset(d, 0, sizeof(*d));
    d->expires_us = s->expires_us;
    d->gen = s->gen;
    if (copy_str(&d->token, s->token))
        return GQ_ENOMEM;
    const kube_blob *sb[2] = {&s->cert, &s->key};
    kube_blob *db[2] = {&d->cert, &d->key};
    for (int i = 0; i < 2; i++) {
        if (!sb[i]->data)
            continue;
        db[i]->data = malloc(sb[i]->len + 1);
        if (!db[i]->data) {
            kube_exec_cred_dispose(d);
            return GQ_ENOMEM;
        }
        memcpy(db[i]->data, sb[i]->data, sb[i]->len + 1);
        db[i]->len = sb[i]->len;
    }
    return GQ_OK;
}

/* ---- the authenticator ---- */

struct kube_exec_auth {
    kube_exec_config *x;
    char *cluster_json; /* spec.cluster (provideClusterInfo), or NULL */
    kube_exec_opts o;
    pthread_mutex_t mu;
    kube_exec_cred cached; /* gen 0: none yet */
    unsigned long runs;
};

static int add_str(json_object *o, const char *k, const char *v)
{
    json_object *s = json_object_new_string(v);
    return !s || json_object_object_add(o, k, s) != 0;
}

static int add_bool(json_object *o, const char *k, int v)
{
    json_object *b = json_object_new_boolean(v);
    return !b || json_object_object_add(o, k, b) != 0;
}

/* Standard padded base64, as Go encodes a []byte in JSON. */
static char *base64(const unsigned char *p, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = t[v >> 18 & 63];
        *o++ = t[v >> 12 & 63];
        *o++ = i + 1 < n ? t[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? t[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* The members of spec.cluster, in client-go's order, empty ones left out. */
static int cluster_fill(json_object *c, const kube_config *cfg, const unsigned char *ca,
                        size_t ca_len)
{
    const kube_exec_config *x = cfg->exec;
    if (add_str(c, "server", cfg->server) ||
        (x->tls_server_name && add_str(c, "tls-server-name", x->tls_server_name)) ||
        (cfg->insecure_skip_tls_verify && add_bool(c, "insecure-skip-tls-verify", 1)))
        return 1;
    if (ca && ca_len) {
        char *b = base64(ca, ca_len);
        int bad = !b || add_str(c, "certificate-authority-data", b);
        free(b);
        if (bad)
            return 1;
    }
    if ((x->proxy_url && add_str(c, "proxy-url", x->proxy_url)) ||
        (x->disable_compression && add_bool(c, "disable-compression", 1)))
        return 1;
    if (x->cluster_config_json) {
        json_object *conf = json_tokener_parse(x->cluster_config_json);
        if (!conf || json_object_object_add(c, "config", conf) != 0) {
            json_object_put(conf);
            return 1;
        }
    }
    return 0;
}

/* spec.cluster as client-go's ConfigToExecCluster fills it, as JSON text. */
static gq_code cluster_info(const kube_config *cfg, char **out, gq_err *err)
{
    const unsigned char *ca = cfg->ca_data.data;
    size_t ca_len = cfg->ca_data.len;
    char *file_ca = NULL;
    if (!ca && cfg->ca_file) {
        gq_err e;
        gq_err_clear(&e);
        if (kube_read_file(cfg->ca_file, (size_t)4 << 20, &file_ca, &ca_len, &e))
            return gq_err_set(err, e.code == GQ_ENOMEM ? GQ_ENOMEM : GQ_EIO,
                              "failed to load CA bundle for execProvider: %s", e.msg);
        ca = (const unsigned char *)file_ca;
    }
    json_object *c = json_object_new_object();
    int bad = !c || cluster_fill(c, cfg, ca, ca_len);
    free(file_ca);
    if (!bad)
        bad = !(*out = strdup(json_object_to_json_string_ext(
                    c, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)));
    json_object_put(c);
    return bad ? gq_err_oom(err) : GQ_OK;
}

gq_code kube_exec_auth_new(const kube_config *cfg, const kube_exec_opts *o, kube_exec_auth **out,
                           gq_err *err)
{
    if (!cfg->exec || !cfg->exec->command || !cfg->exec->api_version)
        return gq_err_set(err, GQ_EINVAL, "exec plugin: no command or apiVersion");
    kube_exec_auth *a = calloc(1, sizeof(*a));
    if (!a)
        return gq_err_oom(err);
    pthread_mutex_init(&a->mu, NULL);
    if (o)
        a->o = *o;
    if (a->o.max_output == 0)
        a->o.max_output = EXEC_MAX_OUTPUT;
    if (!a->o.is_terminal)
        a->o.is_terminal = isatty;
    gq_code rc = kube_exec_config_copy(cfg->exec, &a->x);
    if (rc) {
        rc = gq_err_oom(err);
        goto out;
    }
    if (a->x->provide_cluster_info && (rc = cluster_info(cfg, &a->cluster_json, err)))
        goto out;
    *out = a;
    a = NULL;
out:
    kube_exec_auth_free(a);
    return rc;
}

void kube_exec_auth_free(kube_exec_auth *a)
{
    if (!a)
        return;
    kube_exec_config_free(a->x);
    free(a->cluster_json);
    kube_exec_cred_dispose(&a->cached);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* ---- running the plugin ---- */

/* client-go's isInteractive: whether the plugin gets the terminal. */
static gq_code interactive(const kube_exec_auth *a, int *out, gq_err *err)
{
    switch (a->x->interactive_mode) {
    case KUBE_EXEC_NEVER:
        *out = 0;
        return GQ_OK;
    case KUBE_EXEC_IF_AVAILABLE:
        *out = a->o.is_terminal(STDIN_FILENO) == 1;
        return GQ_OK;
    case KUBE_EXEC_ALWAYS:
        if (a->o.is_terminal(STDIN_FILENO) != 1)
            return gq_err_set(err, GQ_EUNSUPPORTED,
                              "getting credentials: exec plugin cannot support interactive mode: "
                              "standard input is not a terminal");
        *out = 1;
        return GQ_OK;
    }
    return gq_err_set(err, GQ_EINVAL,
                      "getting credentials: exec plugin cannot support "
                      "interactive mode: unknown interactiveMode");
}

/* KUBERNETES_EXEC_INFO=<the ExecCredential request>. */
static char *exec_info(const kube_exec_auth *a, int inter)
{
    gq_buf b;
    gq_buf_init(&b, (size_t)16 << 20);
    json_object *v = json_object_new_string(a->x->api_version);
    int bad = !v ||
              gq_buf_puts(&b, KUBE_EXEC_INFO_ENV "={\"kind\":\"ExecCredential\","
                                                 "\"apiVersion\":") ||
              gq_buf_puts(&b, json_object_to_json_string_ext(
                                  v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)) ||
              gq_buf_puts(&b, ",\"spec\":{") ||
              (a->cluster_json && (gq_buf_puts(&b, "\"cluster\":") ||
                                   gq_buf_puts(&b, a->cluster_json) || gq_buf_puts(&b, ","))) ||
              gq_buf_puts(&b, inter ? "\"interactive\":true}}" : "\"interactive\":false}}");
    json_object_put(v);
    char *text = NULL;
    if (bad) {
        gq_buf_dispose(&b);
        return NULL;
    }
    return gq_buf_finish(&b, &text, NULL) ? NULL : text;
}

static int same_name(const char *a, const char *b)
{
    size_t n = strcspn(a, "=");
    return strncmp(a, b, n) == 0 && b[n] == '=';
}

/* Whether a later entry of v[0..n) or info sets the same variable as v[i]
 * (as in Go, the last setting of a name wins). */
static int overridden(char *const *v, size_t n, size_t i, const char *info)
{
    for (size_t j = i + 1; j < n; j++)
        if (same_name(v[j], v[i]))
            return 1;
    return same_name(info, v[i]);
}

/* The process environment, then the plugin's env, then the request;
 * borrowed strings in a new array. */
static char **plugin_env(const kube_exec_auth *a, char *info)
{
    size_t ne = 0, n = 0;
    while (environ && environ[ne])
        ne++;
    size_t total = ne + a->x->nenv;
    char **all = calloc(total + 1, sizeof(*all)), **out = calloc(total + 2, sizeof(*out));
    if (!all || !out) {
        free(all);
        free(out);
        return NULL;
    }
    memcpy(all, environ, ne * sizeof(*all));
    if (a->x->nenv)
        memcpy(all + ne, a->x->env, a->x->nenv * sizeof(*all));
    for (size_t i = 0; i < total; i++)
        if (!overridden(all, total, i, info))
            out[n++] = all[i];
    out[n++] = info;
    out[n] = NULL;
    free(all);
    return out;
}

static int executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) &&
           access(path, X_OK) == 0;
}

/* Go's exec.LookPath: a name without '/' is searched on PATH; NULL with
 * *oom 0 when not found. */
static char *look_path(const char *cmd, int *oom)
{
    *oom = 0;
    if (strchr(cmd, '/')) {
        char *d = strdup(cmd);
        *oom = !d;
        return d;
    }
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t dl = colon ? (size_t)(colon - p) : strlen(p);
        size_t need = (dl ? dl : 1) + strlen(cmd) + 2;
        char *full = malloc(need);
        if (!full) {
            *oom = 1;
            return NULL;
        }
        snprintf(full, need, "%.*s/%s", dl ? (int)dl : 1, dl ? p : ".", cmd);
        if (executable(full))
            return full;
        free(full);
        p = colon ? colon + 1 : NULL;
    }
    return NULL;
}

/* A started plugin: its pid and the read end of its stdout. */
typedef struct child {
    pid_t pid;
    int out_fd;
} child;

/* posix_spawn (no shell) with stdout into a pipe, stderr shared, stdin
 * the terminal in interactive mode and /dev/null otherwise. */
static gq_code spawn(const kube_exec_auth *a, const char *path, int inter, char **envp, child *ch,
                     gq_err *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return gq_err_set(err, GQ_EIO, "getting credentials: exec: pipe: %s", strerror(errno));
    char **argv = calloc(a->x->nargs + 2, sizeof(*argv));
    posix_spawn_file_actions_t fa;
    int e = argv ? posix_spawn_file_actions_init(&fa) : ENOMEM;
    if (e) {
        free(argv);
        close(p[0]);
        close(p[1]);
        return gq_err_oom(err);
    }
    argv[0] = a->x->command;
    for (size_t i = 0; i < a->x->nargs; i++)
        argv[i + 1] = a->x->args[i];
    /* What exec would say, known before the fork (not every posix_spawn
     * reports a failed exec: some only see the child exit 127). */
    e = access(path, X_OK) != 0 ? errno : 0;
    if (!e)
        e = posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    if (!e && !inter)
        e = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (!e)
        e = posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
    if (!e)
        e = posix_spawn(&ch->pid, path, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(argv);
    close(p[1]);
    if (e) {
        close(p[0]);
        char m[128];
        snprintf(m, sizeof(m), "%s", strerror(e));
        m[0] = (char)(m[0] >= 'A' && m[0] <= 'Z' ? m[0] - 'A' + 'a' : m[0]);
        return gq_err_set(err, GQ_EIO, "getting credentials: exec: fork/exec %s: %s", path, m);
    }
    ch->out_fd = p[0];
    return GQ_OK;
}

static gq_code timed_out(const kube_exec_auth *a, long timeout_ms, gq_err *err)
{
    return gq_err_set(err, GQ_ETIMEOUT,
                      "getting credentials: exec: executable %s did not finish within %ld %s",
                      a->x->command, timeout_ms % 1000 ? timeout_ms : timeout_ms / 1000,
                      timeout_ms % 1000 ? "ms" : "s");
}

/* Read the child's stdout to EOF before the deadline, within the cap. */
static gq_code read_output(const kube_exec_auth *a, const child *ch, int64_t deadline, gq_buf *out,
                           gq_err *err)
{
    char chunk[4096];
    for (;;) {
        int64_t left = deadline - kube_mono_ms();
        struct pollfd pfd = {.fd = ch->out_fd, .events = POLLIN};
        int r = left > 0 ? poll(&pfd, 1, (int)(left > 1000 ? 1000 : left)) : 0;
        if ((r < 0 && errno == EINTR) || (r == 0 && left > 0))
            continue;
        if (r == 0)
            return GQ_ETIMEOUT;
        ssize_t n = read(ch->out_fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return GQ_OK; /* EOF (or an error: the exit status tells) */
        if (gq_buf_add(out, chunk, (size_t)n))
            return gq_err_set(err, GQ_ELIMIT,
                              "getting credentials: exec: executable %s wrote more than %zu "
                              "bytes to standard output",
                              a->x->command, out->max);
    }
}

/* Wait for the child until the deadline (a plugin that closed its stdout
 * may still run); kill it when kill_it is set or the deadline passes.
 * GQ_ETIMEOUT when it had to be killed for the deadline. */
static gq_code reap(const child *ch, int kill_it, int64_t deadline, int *st)
{
    gq_code rc = GQ_OK;
    pid_t r = 0;
    close(ch->out_fd);
    if (kill_it)
        kill(ch->pid, SIGKILL);
    while (!kill_it && kube_mono_ms() < deadline) {
        r = waitpid(ch->pid, st, WNOHANG);
        if (r > 0 || (r < 0 && errno != EINTR))
            break;
        r = 0;
        usleep(5000);
    }
    if (!kill_it && r == 0) {
        kill(ch->pid, SIGKILL);
        rc = GQ_ETIMEOUT;
    }
    while (r <= 0 && (r = waitpid(ch->pid, st, 0)) < 0 && errno == EINTR)
        ;
    return rc;
}

/* Run the plugin once: its standard output in *out (caller disposes). */
static gq_code run_plugin(const kube_exec_auth *a, int inter, gq_buf *out, gq_err *err)
{
    int oom;
    char *path = look_path(a->x->command, &oom);
    if (!path && oom)
        return gq_err_oom(err);
    if (!path)
        return gq_err_set(err, GQ_ENOTFOUND,
                          "getting credentials: exec: executable %s not found%s%s%s", a->x->command,
                          install_help, a->x->install_hint ? "\n\n" : "",
                          a->x->install_hint ? a->x->install_hint : "");
    char *info = exec_info(a, inter);
    char **envp = info ? plugin_env(a, info) : NULL;
    gq_code rc = envp ? GQ_OK : gq_err_oom(err);
    child ch = {-1, -1};
    if (!rc)
        rc = spawn(a, path, inter, envp, &ch, err);
    free(envp);
    free(info);
    free(path);
    if (rc)
        return rc;
    long timeout = a->o.timeout_ms > 0 ? a->o.timeout_ms
                   : inter             ? EXEC_INTERACTIVE_TIMEOUT_MS
                                       : EXEC_TIMEOUT_MS;
    int64_t deadline = kube_mono_ms() + timeout;
    int st = 0;
    gq_buf_init(out, a->o.max_output);
    rc = read_output(a, &ch, deadline, out, err);
    gq_code waited = reap(&ch, rc != GQ_OK, deadline, &st);
    if (rc == GQ_ETIMEOUT || waited == GQ_ETIMEOUT)
        rc = timed_out(a, timeout, err);
    else if (rc == GQ_OK && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        rc = gq_err_set(err, GQ_EIO,
                        "getting credentials: exec: executable %s failed with exit code %d",
                        a->x->command, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    if (rc)
        gq_buf_dispose(out);
    return rc;
}

/* ---- the ExecCredential the plugin printed ---- */

GQ_PRINTF(2, 3)
static gq_code bad_output(gq_err *err, const char *fmt, ...)
{
    char m[GQ_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof(m), fmt, ap);
    va_end(ap);
    return gq_err_set(err, GQ_EINVAL, "getting credentials: %s", m);
}

/* status.<k>: "" when absent or null, a string, or an error. */
static gq_code status_str(json_object *st, const char *k, const char **out, gq_err *err)
{
    json_object *v = NULL;
    *out = "";
    if (!json_object_object_get_ex(st, k, &v) || !v)
        return GQ_OK;
    if (!json_object_is_type(v, json_type_string))
        return bad_output(err, "decoding stdout: status.%s must be a string", k);
    *out = json_object_get_string(v);
    return GQ_OK;
}

/* apiVersion and kind: client-go's decoder and its version check. */
static gq_code check_type(const kube_exec_auth *a, json_object *doc, const char *text, gq_err *err)
{
    json_object *k = NULL, *v = NULL;
    json_object_object_get_ex(doc, "kind", &k);
    json_object_object_get_ex(doc, "apiVersion", &v);
    const char *kind = json_object_is_type(k, json_type_string) ? json_object_get_string(k) : "";
    const char *ver = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    if (!kind[0])
        return bad_output(err, "decoding stdout: Object 'Kind' is missing in '%.200s'", text);
    if (!ver[0])
        return bad_output(err, "decoding stdout: Object 'apiVersion' is missing in '%.200s'", text);
    if (strcmp(ver, "client.authentication.k8s.io/v1") != 0 &&
        strcmp(ver, "client.authentication.k8s.io/v1beta1") != 0)
        return bad_output(err, "decoding stdout: no kind \"%s\" is registered for version \"%s\"",
                          kind, ver);
    if (strcmp(kind, "ExecCredential") != 0)
        return bad_output(err, "decoding stdout: no kind \"%s\" is registered for version \"%s\"",
                          kind, ver);
    if (strcmp(ver, a->x->api_version) != 0)
        return bad_output(err,
                          "exec plugin is configured to use API version %s, plugin returned "
                          "version %s",
                          a->x->api_version, ver);
    return GQ_OK;
}

static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return 0;
    return 1;
}

static gq_code take_blob(kube_blob *b, const char *s)
{
    b->len = strlen(s);
    b->data = (unsigned char *)strdup(s);
    return b->data ? GQ_OK : GQ_ENOMEM;
}

/* status: token, clientCertificateData / clientKeyData, expirationTimestamp. */
static gq_code take_status(json_object *st, kube_exec_cred *c, gq_err *err)
{
    const char *tok, *cert, *key, *exp;
    gq_code rc = status_str(st, "token", &tok, err);
    if (!rc)
        rc = status_str(st, "clientCertificateData", &cert, err);
    if (!rc)
        rc = status_str(st, "clientKeyData", &key, err);
    if (!rc)
        rc = status_str(st, "expirationTimestamp", &exp, err);
    if (rc)
        return rc;
    if (!tok[0] && !cert[0] && !key[0])
        return bad_output(err, "exec plugin didn't return a token or cert/key pair");
    if (!cert[0] != !key[0])
        return bad_output(err, "exec plugin returned only certificate or key, not both");
    if (!printable(tok))
        return bad_output(err, "exec plugin returned a token with characters a bearer token "
                               "cannot hold");
    if (exp[0]) {
        gq_err e;
        if (gq_time_parse_rfc3339_us(exp, &c->expires_us, &e))
            return bad_output(err, "decoding stdout: status.expirationTimestamp: %s", e.msg);
    }
    if ((tok[0] && !(c->token = strdup(tok))) || (cert[0] && take_blob(&c->cert, cert)) ||
        (key[0] && take_blob(&c->key, key)))
        return gq_err_oom(err);
    return GQ_OK;
}

static gq_code decode_output(const kube_exec_auth *a, const gq_buf *out, kube_exec_cred *c,
                             gq_err *err)
{
    enum json_tokener_error je = json_tokener_success;
    json_object *doc = json_tokener_parse_verbose(out->data ? out->data : "", &je);
    gq_code rc = GQ_OK;
    if (!doc || !json_object_is_type(doc, json_type_object)) {
        rc = bad_output(err, "decoding stdout: %s",
                        doc ? "not a JSON object" : json_tokener_error_desc(je));
        goto out;
    }
    if ((rc = check_type(a, doc, out->data, err)))
        goto out;
    json_object *st = NULL;
    if (!json_object_object_get_ex(doc, "status", &st) || !st) {
        rc = bad_output(err, "exec plugin didn't return a status field");
        goto out;
    }
    if (!json_object_is_type(st, json_type_object)) {
        rc = bad_output(err, "decoding stdout: status must be an object");
        goto out;
    }
    rc = take_status(st, c, err);
out:
    json_object_put(doc);
    return rc;
}

/* ---- the cache ---- */

static gq_code refresh_locked(kube_exec_auth *a, gq_err *err)
{
    int inter = 0;
    gq_buf out;
    kube_exec_cred c;
    memset(&c, 0, sizeof(c));
    gq_code rc = interactive(a, &inter, err);
    if (!rc)
        rc = run_plugin(a, inter, &out, err);
    if (rc)
        return rc;
    rc = decode_output(a, &out, &c, err);
    gq_buf_dispose(&out);
    if (rc) {
        kube_exec_cred_dispose(&c);
        return rc;
    }
    c.gen = ++a->runs;
    kube_exec_cred_dispose(&a->cached);
    a->cached = c;
    return GQ_OK;
}

static int expired(const kube_exec_cred *c)
{
    return c->expires_us && kube_wall_us() > c->expires_us;
}

gq_code kube_exec_auth_get(kube_exec_auth *a, kube_exec_cred *out, gq_err *err)
{
    gq_code rc = GQ_OK;
    pthread_mutex_lock(&a->mu);
    if (!a->cached.gen || expired(&a->cached))
        rc = refresh_locked(a, err);
    if (!rc && cred_copy(&a->cached, out))
        rc = gq_err_oom(err);
    pthread_mutex_unlock(&a->mu);
    return rc;
}

gq_code kube_exec_auth_refresh(kube_exec_auth *a, unsigned long gen, gq_err *err)
{
    gq_code rc = GQ_OK;
    pthread_mutex_lock(&a->mu);
    if (a->cached.gen == gen)
        rc = refresh_locked(a, err);
    pthread_mutex_unlock(&a->mu);
    return rc;
}
