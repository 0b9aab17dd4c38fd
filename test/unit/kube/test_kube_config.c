/* kube/kube_config.c without a network: kubeconfig files (tokens, client
 * certificates, from memory), the files refused with their messages, the
 * search order, and the in-cluster configuration. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube_int.h"

#define KC GQ_TEST_DATA "/kubeconfig/"

/* ---- kubeconfig ---- */

static void kubeconfig_good_token(void **state)
{
    (void)state;
    kube_config *c = NULL;
    gq_err e;
    assert_int_equal(kube_config_load_file(KC "good-token.yaml", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://10.0.0.1:6443");
    assert_string_equal(c->namespace_, "gpu-system");
    assert_string_equal(c->token, "abc.def-ghi");
    assert_null(c->token_file);
    assert_null(c->ca_file);
    const char pem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    assert_int_equal(c->ca_data.len, strlen(pem));
    assert_memory_equal(c->ca_data.data, pem, strlen(pem));
    assert_int_equal(c->insecure_skip_tls_verify, 0);
    assert_string_equal(c->source, KC "good-token.yaml");
    kube_config_free(c);

    /* An explicit context overrides current-context; tokenFile is relative
     * to the kubeconfig's directory; namespace defaults to "default". */
    assert_int_equal(kube_config_load_file(KC "good-token.yaml", "dev", &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://other.example:443");
    assert_string_equal(c->namespace_, "default");
    assert_null(c->token);
    assert_string_equal(c->token_file, KC "tokens/dev-token");
    kube_config_free(c);

    c = NULL;
    assert_int_equal(kube_config_load_file(KC "good-token.yaml", "nope", &c, &e), GQ_EINVAL);
    assert_string_equal(e.msg, KC "good-token.yaml:13: context \"nope\" not found");
    assert_null(c);
}

static void kubeconfig_good_files(void **state)
{
    (void)state;
    kube_config *c = NULL;
    gq_err e;
    assert_int_equal(kube_config_load_file(KC "good-files.yaml", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "http://127.0.0.1:8080");
    assert_string_equal(c->ca_file, KC "certs/ca.crt");
    assert_string_equal(c->cert_file, KC "certs/client.crt");
    assert_string_equal(c->key_file, "/abs/client.key");
    assert_null(c->cert_data.data);
    assert_null(c->token);
    kube_config_free(c);

    assert_int_equal(kube_config_load_file(KC "good-insecure.yaml", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://lab:6443");
    assert_int_equal(c->insecure_skip_tls_verify, 1);
    assert_null(c->token);
    assert_null(c->cert_file);
    kube_config_free(c);
}

static void kubeconfig_parse_from_memory(void **state)
{
    (void)state;
    const char y[] = "current-context: x\n"
                     "clusters: [{name: c, cluster: {server: 'https://s'}}]\n"
                     "contexts: [{name: x, context: {cluster: c, user: u, namespace: n1}}]\n"
                     "users: [{name: u, user: {client-certificate-data: QUJD, "
                     "client-key-data: REVG, token: t}}]\n";
    kube_config *c = NULL;
    gq_err e;
    assert_int_equal(kube_config_parse(y, strlen(y), "mem", "/base", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://s");
    assert_string_equal(c->namespace_, "n1");
    assert_int_equal(c->cert_data.len, 3);
    assert_memory_equal(c->cert_data.data, "ABC", 3);
    assert_int_equal(c->key_data.len, 3);
    assert_memory_equal(c->key_data.data, "DEF", 3);
    assert_string_equal(c->token, "t");
    kube_config_free(c);
}

static const struct {
    const char *file;
    gq_code code;
    const char *msg; /* after "<path>:" */
} bad_kubeconfigs[] = {
    {"bad-base64.yaml", GQ_EINVAL, "6: \"certificate-authority-data\" is not valid base64"},
    {"bad-both-ca.yaml", GQ_EINVAL,
     "7: both \"certificate-authority\" and \"certificate-authority-data\" are set"},
    {"bad-cert-without-key.yaml", GQ_EINVAL,
     "14: user \"u\": client certificate and key must be given together"},
    {"bad-cluster-not-found.yaml", GQ_EINVAL, "9: cluster \"missing\" not found"},
    {"bad-clusters-type.yaml", GQ_EINVAL, "6: \"clusters\" must be a sequence"},
    {"bad-context-not-found.yaml", GQ_EINVAL, "9: context \"b\" not found"},
    {"bad-empty.yaml", GQ_EINVAL, "1: empty kubeconfig"},
    {"bad-exec.yaml", GQ_EINVAL,
     "15: interactiveMode must be specified for eks to use exec authentication plugin"},
    {"bad-exec-no-command.yaml", GQ_EINVAL,
     "15: command must be specified for eks to use exec authentication plugin"},
    {"bad-exec-no-version.yaml", GQ_EINVAL,
     "15: apiVersion must be specified for eks to use exec authentication plugin"},
    {"bad-exec-version.yaml", GQ_EINVAL,
     "15: exec plugin: invalid apiVersion \"client.authentication.k8s.io/v1alpha1\""},
    {"bad-exec-mode.yaml", GQ_EINVAL, "17: invalid interactiveMode for eks: \"Sometimes\""},
    {"bad-exec-env.yaml", GQ_EINVAL,
     "19: env variable name must be specified for eks to use exec authentication plugin"},
    {"bad-exec-and-auth-provider.yaml", GQ_EINVAL,
     "18: authProvider cannot be provided in combination with an exec plugin for eks"},
    {"bad-auth-provider-gcp.yaml", GQ_EUNSUPPORTED,
     "14: The gcp auth plugin has been removed.\nPlease use the \"gke-gcloud-auth-plugin\" "
     "kubectl/client-go credential plugin instead.\nSee "
     "https://cloud.google.com/blog/products/containers-kubernetes/kubectl-auth-changes-in-gke "
     "for further details"},
    {"bad-auth-provider-azure.yaml", GQ_EUNSUPPORTED,
     "14: The azure auth plugin has been removed.\nPlease use the "
     "https://github.com/Azure/kubelogin kubectl/client-go credential plugin instead.\nSee "
     "https://kubernetes.io/docs/reference/access-authn-authz/authentication/"
     "#client-go-credential-plugins for further details"},
    {"bad-auth-provider-oidc.yaml", GQ_EUNSUPPORTED,
     "14: user \"eks\": auth-provider \"oidc\" is not supported; use an exec credential plugin "
     "(client.authentication.k8s.io/v1), a token, tokenFile or client certificate"},
    {"bad-insecure-type.yaml", GQ_EINVAL,
     "6: \"insecure-skip-tls-verify\" must be a boolean (true or false)"},
    {"bad-no-current-context.yaml", GQ_EINVAL, "1: current-context is not set"},
    {"bad-no-server.yaml", GQ_EINVAL, "5: cluster \"a\" has no server"},
    {"bad-root-type.yaml", GQ_EINVAL, "1: kubeconfig must be a mapping"},
    {"bad-server-scheme.yaml", GQ_EINVAL,
     "5: server \"10.0.0.1:6443\" must start with https:// or http://"},
    {"bad-syntax.yaml", GQ_EINVAL,
     "5: did not find expected ',' or '}' (while parsing a flow mapping started at line 4)"},
    {"bad-token-type.yaml", GQ_EINVAL, "14: \"token\" must be a string"},
    {"bad-user-not-found.yaml", GQ_EINVAL, "10: user \"nobody\" not found"},
};

/* Every field of an exec user, and what provideClusterInfo takes from its
 * cluster (the exec extension as JSON). */
static void kubeconfig_exec(void **state)
{
    (void)state;
    kube_config *c = NULL, *d = NULL;
    gq_err e;
    assert_int_equal(kube_config_load_file(KC "good-exec.yaml", NULL, &c, &e), GQ_OK);
    assert_null(c->token);
    assert_null(c->token_file);
    const kube_exec_config *x = c->exec;
    assert_non_null(x);
    assert_string_equal(x->api_version, "client.authentication.k8s.io/v1");
    assert_string_equal(x->command, "aws");
    assert_int_equal(x->nargs, 6);
    assert_string_equal(x->args[0], "--region");
    assert_string_equal(x->args[5], "prod");
    assert_int_equal(x->nenv, 2);
    assert_string_equal(x->env[0], "AWS_PROFILE=prod");
    assert_string_equal(x->env[1], "EMPTY=");
    assert_int_equal(x->interactive_mode, KUBE_EXEC_NEVER);
    assert_int_equal(x->provide_cluster_info, 1);
    assert_string_equal(x->install_hint, "Install the AWS CLI (https://aws.amazon.com/cli/).");
    assert_string_equal(x->tls_server_name, "api.eks.internal");
    assert_string_equal(x->proxy_url, "http://proxy.example:3128");
    assert_int_equal(x->disable_compression, 1);
    assert_string_equal(x->cluster_config_json,
                        "{\"audience\":\"sts.amazonaws.com\",\"retries\":3,\"verbose\":false,"
                        "\"scopes\":[\"a\",\"b\"],\"empty\":null}");
    /* A copy is deep. */
    assert_int_equal(kube_config_copy(c, &d), GQ_OK);
    kube_config_free(c);
    assert_string_equal(d->exec->args[2], "eks");
    assert_string_equal(d->exec->env[0], "AWS_PROFILE=prod");
    kube_config_free(d);

    /* v1beta1 defaults to IfAvailable; a command with a '/' is relative to
     * the kubeconfig's folder. */
    assert_int_equal(kube_config_load_file(KC "good-exec.yaml", "gke", &c, &e), GQ_OK);
    assert_string_equal(c->exec->api_version, "client.authentication.k8s.io/v1beta1");
    assert_int_equal(c->exec->interactive_mode, KUBE_EXEC_IF_AVAILABLE);
    assert_string_equal(c->exec->command, KC "bin/gke-gcloud-auth-plugin");
    assert_int_equal(c->exec->nargs, 0);
    assert_int_equal(c->exec->provide_cluster_info, 0);
    assert_null(c->exec->install_hint);
    kube_config_free(c);

    /* Relative to a relative kubeconfig folder: made absolute, as kubectl
     * names it. */
    const char z[] = "current-context: x\n"
                     "clusters: [{name: c, cluster: {server: 'https://s'}}]\n"
                     "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                     "users: [{name: u, user: {exec: {command: ./p, apiVersion: "
                     "client.authentication.k8s.io/v1beta1}}}]\n";
    char want[4200], cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    snprintf(want, sizeof(want), "%s/conf/p", cwd);
    assert_int_equal(kube_config_parse(z, strlen(z), "mem", "conf", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->exec->command, want);
    kube_config_free(c);

    /* A token next to an exec plugin wins, as in client-go. */
    const char y[] = "current-context: x\n"
                     "clusters: [{name: c, cluster: {server: 'https://s'}}]\n"
                     "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                     "users: [{name: u, user: {token: t, exec: {command: p}}}]\n";
    assert_int_equal(kube_config_parse(y, strlen(y), "mem", NULL, NULL, &c, &e), GQ_OK);
    assert_string_equal(c->token, "t");
    assert_null(c->exec);
    kube_config_free(c);
}

static void kubeconfig_bad_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_kubeconfigs) / sizeof(bad_kubeconfigs[0]); i++) {
        char path[512], want[1024];
        snprintf(path, sizeof(path), KC "%s", bad_kubeconfigs[i].file);
        snprintf(want, sizeof(want), "%s:%s", path, bad_kubeconfigs[i].msg);
        kube_config *c = NULL;
        gq_err e;
        gq_err_clear(&e);
        gq_code rc = kube_config_load_file(path, NULL, &c, &e);
        if (rc != bad_kubeconfigs[i].code || strcmp(e.msg, want) != 0)
            fail_msg("%s: got %d \"%s\", want %d \"%s\"", bad_kubeconfigs[i].file, rc, e.msg,
                     bad_kubeconfigs[i].code, want);
        assert_null(c);
    }
}

static void kubeconfig_missing_file_and_default_order(void **state)
{
    (void)state;
    kube_config *c = NULL;
    gq_err e;
    assert_int_equal(kube_config_load_file(KC "absent.yaml", NULL, &c, &e), GQ_EIO);
    assert_string_equal(e.msg, KC "absent.yaml: No such file or directory");

    /* $KUBECONFIG: only the first file of a list is used. */
    setenv("KUBECONFIG", KC "good-insecure.yaml:" KC "good-token.yaml", 1);
    assert_int_equal(kube_config_load_default(NULL, NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://lab:6443");
    kube_config_free(c);
    /* The flag wins over the environment. */
    assert_int_equal(kube_config_load_default(KC "good-files.yaml", NULL, &c, &e), GQ_OK);
    assert_string_equal(c->server, "http://127.0.0.1:8080");
    kube_config_free(c);
    unsetenv("KUBECONFIG");
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void incluster_config(void **state)
{
    (void)state;
    char dir[] = "/tmp/kube-sa-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char tok[256], ca[256], ns[256], want[512];
    snprintf(tok, sizeof(tok), "%s/token", dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(ns, sizeof(ns), "%s/namespace", dir);
    kube_incluster_paths p = {tok, ca, ns};
    kube_config *c = NULL;
    gq_err e;

    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(kube_config_load_incluster(&p, &c, &e), GQ_ENOTFOUND);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_int_equal(kube_config_load_incluster(&p, &c, &e), GQ_ENOTFOUND);
    snprintf(want, sizeof(want), "in-cluster token file %s is not readable", tok);
    assert_string_equal(e.msg, want);

    write_file(tok, "tok\n");
    assert_int_equal(kube_config_load_incluster(&p, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://[fd00::1]:443");
    assert_string_equal(c->namespace_, "default");
    assert_string_equal(c->token_file, tok);
    assert_null(c->ca_file);
    assert_string_equal(c->source, "in-cluster");
    kube_config_free(c);

    write_file(ca, "pem");
    write_file(ns, "gpu-system\n");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    assert_int_equal(kube_config_load_incluster(&p, &c, &e), GQ_OK);
    assert_string_equal(c->server, "https://10.96.0.1:443");
    assert_string_equal(c->namespace_, "gpu-system");
    assert_string_equal(c->ca_file, ca);
    kube_config_free(c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unlink(tok);
    unlink(ca);
    unlink(ns);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kubeconfig_good_token),
        cmocka_unit_test(kubeconfig_good_files),
        cmocka_unit_test(kubeconfig_parse_from_memory),
        cmocka_unit_test(kubeconfig_exec),
        cmocka_unit_test(kubeconfig_bad_files),
        cmocka_unit_test(kubeconfig_missing_file_and_default_order),
        cmocka_unit_test(incluster_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
