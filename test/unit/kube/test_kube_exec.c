/* kube/kube_exec.c: client-go credential plugins run for real. Each test
 * writes a plugin script into a fresh folder, points a kubeconfig's exec
 * user at it and checks what the plugin was given (KUBERNETES_EXEC_INFO,
 * args, env, stdin), what came back (token, certificate, expiry), how
 * often it ran, and client-go's message for every way it can fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kube/kube_exec.h"

static char dir[256];

/* A plugin script in the test folder; $D is that folder inside it. */
static void plugin(const char *name, const char *body)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\nD=%s\necho run >>\"$D/runs\"\n%s", dir, body);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

static char *slurp(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int runs(void)
{
    char *s = slurp("runs");
    int n = 0;
    for (char *p = s; (p = strstr(p, "run")); p += 3)
        n++;
    free(s);
    return n;
}

/* A kubeconfig whose user runs command with the given extra exec lines. */
static kube_config *config(const char *command, const char *exec_extra, const char *cluster_extra)
{
    char y[4096];
    snprintf(y, sizeof(y),
             "current-context: x\n"
             "clusters:\n- name: c\n  cluster:\n    server: https://10.1.2.3:6443\n%s"
             "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
             "users:\n- name: u\n  user:\n    exec:\n      command: %s\n%s",
             cluster_extra ? cluster_extra : "", command, exec_extra ? exec_extra : "");
    kube_config *c = NULL;
    gq_err e;
    gq_err_clear(&e);
    if (kube_config_parse(y, strlen(y), "mem", dir, NULL, &c, &e) != GQ_OK)
        fail_msg("kubeconfig: %s", e.msg);
    return c;
}

#define V1 "      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n"
#define V1BETA1 "      apiVersion: client.authentication.k8s.io/v1beta1\n"
#define CRED_V1 "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
#define TOKEN_OUT "cat <<'EOF'\n" CRED_V1 "\"status\":{\"token\":\"tok-1\"}}\nEOF\n"

static int never_terminal(int fd)
{
    (void)fd;
    return 0;
}

static int always_terminal(int fd)
{
    (void)fd;
    return 1;
}

static kube_exec_auth *auth_for(const kube_config *c, const kube_exec_opts *o)
{
    kube_exec_auth *a = NULL;
    gq_err e;
    kube_exec_opts dflt = {.is_terminal = never_terminal};
    if (kube_exec_auth_new(c, o ? o : &dflt, &a, &e) != GQ_OK)
        fail_msg("kube_exec_auth_new: %s", e.msg);
    return a;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/gq-exec-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* The request, the args, the env and stdin the plugin gets; the token. */
static void exec_token_v1(void **state)
{
    (void)state;
    plugin("p", "printf '%s' \"$KUBERNETES_EXEC_INFO\" >\"$D/info\"\n"
                "printf '%s|' \"$@\" >\"$D/args\"\n"
                "printf '%s|%s|%s' \"$REGION\" \"$EMPTY\" \"$HOME\" >\"$D/env\"\n"
                "readlink /proc/self/fd/0 >\"$D/stdin\"\n" TOKEN_OUT);
    kube_config *c =
        config("./p",
               V1 "      args: [eks, get-token, 'a b']\n"
                  "      env: [{name: REGION, value: eu-west-1}, {name: EMPTY, value: ''},"
                  " {name: HOME, value: /plugin-home}]\n",
               NULL);
    kube_exec_auth *a = auth_for(c, NULL);
    kube_exec_cred cr;
    gq_err e;
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
    assert_string_equal(cr.token, "tok-1");
    assert_null(cr.cert.data);
    assert_int_equal(cr.expires_us, 0);
    assert_int_equal(cr.gen, 1);
    char *info = slurp("info"), *args = slurp("args"), *env = slurp("env"), *in = slurp("stdin");
    assert_string_equal(info,
                        "{\"kind\":\"ExecCredential\",\"apiVersion\":"
                        "\"client.authentication.k8s.io/v1\",\"spec\":{\"interactive\":false}}");
    assert_string_equal(args, "eks|get-token|a b|");
    assert_string_equal(env, "eu-west-1||/plugin-home");
    assert_string_equal(in, "/dev/null\n");
    free(info);
    free(args);
    free(env);
    free(in);
    kube_exec_cred_dispose(&cr);
    kube_exec_auth_free(a);
    kube_config_free(c);
}

/* provideClusterInfo: spec.cluster as client-go fills it. */
static void exec_cluster_info(void **state)
{
    (void)state;
    plugin("p", "printf '%s' \"$KUBERNETES_EXEC_INFO\" >\"$D/info\"\n" TOKEN_OUT);
    kube_config *c = config("./p", V1 "      provideClusterInfo: true\n",
                            "    certificate-authority-data: QUJD\n"
                            "    insecure-skip-tls-verify: true\n"
                            "    tls-server-name: api.internal\n"
                            "    proxy-url: http://proxy:3128\n"
                            "    disable-compression: true\n"
                            "    extensions:\n"
                            "    - name: client.authentication.k8s.io/exec\n"
                            "      extension: {audience: sts, n: 2}\n");
    kube_exec_auth *a = auth_for(c, NULL);
    kube_exec_cred cr;
    gq_err e;
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
    char *info = slurp("info");
    assert_string_equal(info,
                        "{\"kind\":\"ExecCredential\",\"apiVersion\":"
                        "\"client.authentication.k8s.io/v1\",\"spec\":{\"cluster\":{"
                        "\"server\":\"https://10.1.2.3:6443\",\"tls-server-name\":\"api.internal\","
                        "\"insecure-skip-tls-verify\":true,\"certificate-authority-data\":\"QUJD\","
                        "\"proxy-url\":\"http://proxy:3128\",\"disable-compression\":true,"
                        "\"config\":{\"audience\":\"sts\",\"n\":2}},\"interactive\":false}}");
    free(info);
    kube_exec_cred_dispose(&cr);
    kube_exec_auth_free(a);
    kube_config_free(c);

    /* The CA from a file is read when the client is made. */
    c = config("./p", V1 "      provideClusterInfo: true\n",
               "    certificate-authority: ca-missing.crt\n");
    kube_exec_auth *b = NULL;
    assert_int_equal(kube_exec_auth_new(c, NULL, &b, &e), GQ_EIO);
    assert_non_null(strstr(e.msg, "failed to load CA bundle for execProvider: "));
    kube_config_free(c);
}

/* Cached until expirationTimestamp; an expired one runs the plugin again;
 * a 401 re-runs it once per credential. */
static void exec_cache_expiry_refresh(void **state)
{
    (void)state;
    plugin("p", "cat <<EOF\n" CRED_V1 "\"status\":{\"token\":\"tok-$(wc -l <\"$D/runs\")\","
                "\"expirationTimestamp\":\"$(date -u -d '+2 seconds' +%Y-%m-%dT%H:%M:%SZ)\"}}\n"
                "EOF\n");
    kube_config *c = config("./p", V1, NULL);
    kube_exec_auth *a = auth_for(c, NULL);
    kube_exec_cred cr;
    gq_err e;
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
    assert_string_equal(cr.token, "tok-1");
    assert_true(cr.expires_us > 0);
    kube_exec_cred_dispose(&cr);
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
    assert_string_equal(cr.token, "tok-1");
    assert_int_equal(runs(), 1);
    kube_exec_cred_dispose(&cr);
    sleep(3);
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
    assert_string_equal(cr.token, "tok-2");
    assert_int_equal(cr.gen, 2);
    assert_int_equal(runs(), 2);
    /* A 401 to run 2's token: run 3. A 401 to run 2's token seen later by
     * another request: already replaced, no run. */
    assert_int_equal(kube_exec_auth_refresh(a, 2, &e), GQ_OK);
    assert_int_equal(kube_exec_auth_refresh(a, 2, &e), GQ_OK);
    assert_int_equal(runs(), 3);
    kube_exec_cred_dispose(&cr);
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
    assert_string_equal(cr.token, "tok-3");
    kube_exec_cred_dispose(&cr);
    kube_exec_auth_free(a);
    kube_config_free(c);

    /* An expiry in the past: every request runs the plugin. */
    plugin("q", "cat <<'EOF'\n" CRED_V1
                "\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"2020-01-01T00:00:00Z\"}}\n"
                "EOF\n");
    c = config("./q", V1, NULL);
    a = auth_for(c, NULL);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
        kube_exec_cred_dispose(&cr);
    }
    assert_int_equal(runs(), 5);
    kube_exec_auth_free(a);
    kube_config_free(c);
}

/* A client certificate and key (with or without a token). */
static void exec_client_cert(void **state)
{
    (void)state;
    plugin("p", "cat <<'EOF'\n" CRED_V1 "\"status\":{\"clientCertificateData\":\"-----BEGIN "
                "CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n\",\"clientKeyData\":"
                "\"-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----\\n\"}}\nEOF\n");
    kube_config *c = config("./p", V1, NULL);
    kube_exec_auth *a = auth_for(c, NULL);
    kube_exec_cred cr;
    gq_err e;
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
    assert_null(cr.token);
    assert_string_equal((char *)cr.cert.data,
                        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    assert_int_equal(cr.cert.len, strlen((char *)cr.cert.data));
    assert_string_equal((char *)cr.key.data,
                        "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n");
    kube_exec_cred_dispose(&cr);
    kube_exec_auth_free(a);
    kube_config_free(c);
}

/* interactiveMode: Never, IfAvailable (v1beta1's default) and Always, with
 * and without a terminal on stdin. */
static void exec_interactive(void **state)
{
    (void)state;
    plugin("p", "printf '%s' \"$KUBERNETES_EXEC_INFO\" >\"$D/info\"\n"
                "cat <<'EOF'\n{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
                "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}\nEOF\n");
    static const struct {
        const char *mode;
        int (*term)(int);
        gq_code rc;
        const char *interactive;
    } cases[] = {
        {"", never_terminal, GQ_OK, "false"},
        {"", always_terminal, GQ_OK, "true"},
        {"      interactiveMode: Never\n", always_terminal, GQ_OK, "false"},
        {"      interactiveMode: Always\n", always_terminal, GQ_OK, "true"},
        {"      interactiveMode: Always\n", never_terminal, GQ_EUNSUPPORTED, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char extra[256], want[256];
        snprintf(extra, sizeof(extra), V1BETA1 "%s", cases[i].mode);
        kube_config *c = config("./p", extra, NULL);
        kube_exec_opts o = {.is_terminal = cases[i].term};
        kube_exec_auth *a = auth_for(c, &o);
        kube_exec_cred cr = {0};
        gq_err e;
        gq_err_clear(&e);
        unlink(strcat(strcpy(want, dir), "/info"));
        assert_int_equal(kube_exec_auth_get(a, &cr, &e), cases[i].rc);
        char *info = slurp("info");
        if (cases[i].interactive) {
            snprintf(want, sizeof(want),
                     "{\"kind\":\"ExecCredential\",\"apiVersion\":"
                     "\"client.authentication.k8s.io/v1beta1\",\"spec\":{\"interactive\":%s}}",
                     cases[i].interactive);
            assert_string_equal(info, want);
        } else {
            assert_string_equal(e.msg, "getting credentials: exec plugin cannot support "
                                       "interactive mode: standard input is not a terminal");
            assert_string_equal(info, ""); /* never started */
        }
        free(info);
        kube_exec_cred_dispose(&cr);
        kube_exec_auth_free(a);
        kube_config_free(c);
    }
}

/* Plugins that cannot run or fail, with client-go's messages. */
static void exec_run_failures(void **state)
{
    (void)state;
    plugin("exit3", "echo 'token expired, run aws sso login' >&2\nexit 3\n");
    plugin("killed", "kill -9 $$\n");
    plugin("slow", "exec sleep 5\n");
    plugin("lingers", TOKEN_OUT "exec >&-\nexec sleep 5\n");
    plugin("chatty", "head -c 100000 /dev/zero | tr '\\0' x\n");
    plugin("noexec", TOKEN_OUT);
    char path[512];
    snprintf(path, sizeof(path), "%s/noexec", dir);
    chmod(path, 0644);
    char m_exit3[600], m_killed[600], m_missing[600], m_noexec[600];
    snprintf(m_exit3, sizeof(m_exit3),
             "getting credentials: exec: executable %s/exit3 failed with exit code 3", dir);
    snprintf(m_killed, sizeof(m_killed),
             "getting credentials: exec: executable %s/killed failed with exit code -1", dir);
    snprintf(m_missing, sizeof(m_missing),
             "getting credentials: exec: fork/exec %s/absent: no such file or directory", dir);
    snprintf(m_noexec, sizeof(m_noexec),
             "getting credentials: exec: fork/exec %s/noexec: permission denied", dir);
    const struct {
        const char *cmd;
        gq_code rc;
        const char *msg;
    } cases[] = {
        {"./exit3", GQ_EIO, m_exit3},     {"./killed", GQ_EIO, m_killed},
        {"./absent", GQ_EIO, m_missing},  {"./noexec", GQ_EIO, m_noexec},
        {"./lingers", GQ_ETIMEOUT, NULL}, {"./chatty", GQ_ELIMIT, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kube_config *c = config(cases[i].cmd, V1, NULL);
        kube_exec_opts o = {.is_terminal = never_terminal, .timeout_ms = 500, .max_output = 4096};
        kube_exec_auth *a = auth_for(c, &o);
        kube_exec_cred cr = {0};
        gq_err e;
        gq_err_clear(&e);
        if (kube_exec_auth_get(a, &cr, &e) != cases[i].rc)
            fail_msg("%s: got %d \"%s\"", cases[i].cmd, e.code, e.msg);
        if (cases[i].msg)
            assert_string_equal(e.msg, cases[i].msg);
        kube_exec_auth_free(a);
        kube_config_free(c);
    }
    gq_err e;
    kube_config *c = config("./slow", V1, NULL);
    kube_exec_opts o = {.is_terminal = never_terminal, .timeout_ms = 500};
    kube_exec_auth *a = auth_for(c, &o);
    kube_exec_cred cr = {0};
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_ETIMEOUT);
    snprintf(m_exit3, sizeof(m_exit3),
             "getting credentials: exec: executable %s/slow did not finish within 500 ms", dir);
    assert_string_equal(e.msg, m_exit3);
    kube_exec_auth_free(a);
    kube_config_free(c);
}

/* Not on PATH: client-go's hint and the kubeconfig's installHint. */
static void exec_not_found(void **state)
{
    (void)state;
    kube_config *c = config("gq-no-such-plugin",
                            V1 "      installHint: |\n"
                               "        Install it with: brew install x\n",
                            NULL);
    kube_exec_auth *a = auth_for(c, NULL);
    kube_exec_cred cr = {0};
    gq_err e;
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_ENOTFOUND);
    assert_string_equal(e.msg,
                        "getting credentials: exec: executable gq-no-such-plugin not "
                        "found\n\nIt looks like you are trying to use a client-go credential "
                        "plugin that is not installed.\n\nTo learn more about this feature, "
                        "consult the documentation available at:\n      "
                        "https://kubernetes.io/docs/reference/access-authn-authz/"
                        "authentication/#client-go-credential-plugins\n\nInstall it with: "
                        "brew install x\n");
    kube_exec_auth_free(a);
    kube_config_free(c);

    /* Found on PATH (a name without '/'). */
    char path[600];
    plugin("gq-path-plugin", TOKEN_OUT);
    const char *old = getenv("PATH");
    char *saved = strdup(old ? old : "");
    snprintf(path, sizeof(path), "/nonexistent:%s:%s", dir, saved);
    setenv("PATH", path, 1);
    c = config("gq-path-plugin", V1, NULL);
    a = auth_for(c, NULL);
    assert_int_equal(kube_exec_auth_get(a, &cr, &e), GQ_OK);
    assert_string_equal(cr.token, "tok-1");
    kube_exec_cred_dispose(&cr);
    kube_exec_auth_free(a);
    kube_config_free(c);
    setenv("PATH", saved, 1);
    free(saved);
}

/* Standard output that is no usable ExecCredential. */
static void exec_bad_output(void **state)
{
    (void)state;
    static const struct {
        const char *out;
        const char *msg; /* after "getting credentials: " */
    } cases[] = {
        {"garbage", "decoding stdout: unexpected character"},
        {"[1]", "decoding stdout: not a JSON object"},
        {"{\"apiVersion\":\"client.authentication.k8s.io/v1\"}",
         "decoding stdout: Object 'Kind' is missing in "
         "'{\"apiVersion\":\"client.authentication.k8s.io/v1\"}\n'"},
        {"{\"kind\":\"ExecCredential\"}",
         "decoding stdout: Object 'apiVersion' is missing in '{\"kind\":\"ExecCredential\"}\n'"},
        {"{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
         "\"status\":{\"token\":\"t\"}}",
         "exec plugin is configured to use API version client.authentication.k8s.io/v1, plugin "
         "returned version client.authentication.k8s.io/v1beta1"},
        {"{\"kind\":\"Secret\",\"apiVersion\":\"v1\"}",
         "decoding stdout: no kind \"Secret\" is registered for version \"v1\""},
        {CRED_V1 "\"spec\":{}}", "exec plugin didn't return a status field"},
        {CRED_V1 "\"status\":{}}", "exec plugin didn't return a token or cert/key pair"},
        {CRED_V1 "\"status\":{\"clientCertificateData\":\"c\"}}",
         "exec plugin returned only certificate or key, not both"},
        {CRED_V1 "\"status\":{\"token\":5}}", "decoding stdout: status.token must be a string"},
        {CRED_V1 "\"status\":{\"token\":\"a\\r\\nX-Evil: 1\"}}",
         "exec plugin returned a token with characters a bearer token cannot hold"},
        {CRED_V1 "\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"tomorrow\"}}",
         "decoding stdout: status.expirationTimestamp: "},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[1024], want[1024];
        snprintf(body, sizeof(body), "cat <<'EOF'\n%s\nEOF\n", cases[i].out);
        plugin("p", body);
        kube_config *c = config("./p", V1, NULL);
        kube_exec_auth *a = auth_for(c, NULL);
        kube_exec_cred cr = {0};
        gq_err e;
        gq_err_clear(&e);
        snprintf(want, sizeof(want), "getting credentials: %s", cases[i].msg);
        if (kube_exec_auth_get(a, &cr, &e) != GQ_EINVAL || strncmp(e.msg, want, strlen(want)))
            fail_msg("case %zu: got %d \"%s\", want \"%s\"", i, e.code, e.msg, want);
        kube_exec_auth_free(a);
        kube_config_free(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(exec_token_v1, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_cluster_info, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_cache_expiry_refresh, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_client_cert, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_interactive, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_run_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(exec_bad_output, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
