/* certs/: generation verified independently with OpenSSL (chain, SANs,
 * extensions, key types, file modes), CA reuse and rotation, inspection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "certs/certs.h"

#define NOW ((time_t)1790000000) /* 2026-09-21: pinned so expiry maths is exact */

typedef struct dir_fixture {
    char dir[64];
} dir_fixture;

static int setup(void **state)
{
    dir_fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/gq-test-certs-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    dir_fixture *f = *state;
    const char *names[] = {"ca.crt", "ca.key", "tls.crt", "tls.key"};
    char p[128];
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof(p), "%s/%s", f->dir, names[i]);
        unlink(p);
    }
    assert_int_equal(rmdir(f->dir), 0); /* no temporary files left behind */
    free(f);
    return 0;
}

static certs_options opts(const char *dir)
{
    static const char *const sans[] = {"localhost", "127.0.0.1", "::1", "*.example.com"};
    certs_options o = {.service = "gpuquota-webhook",
                       .ns = "gpuquota-system",
                       .out_dir = dir,
                       .days = 365,
                       .ca_days = 3650,
                       .extra_sans = sans,
                       .n_extra_sans = 4,
                       .now = NOW};
    return o;
}

static X509 *load_cert(const char *dir, const char *name)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    X509 *x = PEM_read_X509(fp, NULL, NULL, NULL);
    fclose(fp);
    assert_non_null(x);
    return x;
}

static EVP_PKEY *load_key(const char *dir, const char *name)
{
    char p[128];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    EVP_PKEY *k = PEM_read_PrivateKey(fp, NULL, NULL, NULL);
    fclose(fp);
    assert_non_null(k);
    return k;
}

static char *serial_hex(X509 *x)
{
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
    char *hex = BN_bn2hex(bn);
    BN_free(bn);
    return hex;
}

static void verify_chain(X509 *ca, X509 *leaf, time_t at, int want_err)
{
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    assert_int_equal(X509_STORE_add_cert(store, ca), 1);
    assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
    X509_STORE_CTX_set_time(ctx, 0, at);
    X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
    int ok = X509_verify_cert(ctx);
    assert_int_equal(X509_STORE_CTX_get_error(ctx), want_err);
    assert_int_equal(ok, want_err == X509_V_OK ? 1 : 0);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
}

static void generate_and_verify(void **state)
{
    dir_fixture *f = *state;
    gq_err err;
    certs_result res;
    certs_options o = opts(f->dir);
    assert_int_equal(certs_generate(&o, &res, &err), GQ_OK);
    assert_true(res.ca_created);
    assert_int_equal(res.not_after, NOW + 365 * 86400);

    X509 *ca = load_cert(f->dir, "ca.crt"), *leaf = load_cert(f->dir, "tls.crt");
    EVP_PKEY *ca_key = load_key(f->dir, "ca.key"), *key = load_key(f->dir, "tls.key");
    /* EC P-256 keys that match their certificates. */
    char group[32];
    size_t glen = 0;
    assert_int_equal(EVP_PKEY_get_utf8_string_param(key, "group", group, sizeof(group), &glen), 1);
    assert_string_equal(group, "prime256v1");
    assert_int_equal(X509_check_private_key(leaf, key), 1);
    assert_int_equal(X509_check_private_key(ca, ca_key), 1);
    /* Chain verifies for server auth now, not after expiry. */
    verify_chain(ca, leaf, NOW, X509_V_OK);
    verify_chain(ca, leaf, NOW + 366 * 86400, X509_V_ERR_CERT_HAS_EXPIRED);
    verify_chain(ca, leaf, NOW - 3600, X509_V_ERR_CERT_NOT_YET_VALID);
    /* CA: CA:TRUE, keyCertSign; leaf: not a CA, serverAuth, digitalSignature. */
    assert_true(X509_get_extension_flags(ca) & EXFLAG_CA);
    assert_true(X509_get_key_usage(ca) & KU_KEY_CERT_SIGN);
    assert_false(X509_get_extension_flags(leaf) & EXFLAG_CA);
    assert_true(X509_get_extended_key_usage(leaf) & XKU_SSL_SERVER);
    assert_true(X509_get_key_usage(leaf) & KU_DIGITAL_SIGNATURE);
    /* Host names and IPs the API server may dial. */
    static const char *const hosts[] = {
        "gpuquota-webhook",
        "gpuquota-webhook.gpuquota-system",
        "gpuquota-webhook.gpuquota-system.svc",
        "gpuquota-webhook.gpuquota-system.svc.cluster.local",
        "localhost",
        "a.example.com",
    };
    for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
        assert_int_equal(X509_check_host(leaf, hosts[i], 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(leaf, "other.gpuquota-system.svc", 0, 0, NULL), 0);
    assert_int_equal(X509_check_ip_asc(leaf, "127.0.0.1", 0), 1);
    assert_int_equal(X509_check_ip_asc(leaf, "::1", 0), 1);
    assert_int_equal(X509_check_ip_asc(leaf, "10.0.0.1", 0), 0);
    /* Random, positive, distinct serials. */
    char *s1 = serial_hex(ca), *s2 = serial_hex(leaf);
    assert_true(strlen(s1) >= 32);
    assert_true(s1[0] != '-');
    assert_string_not_equal(s1, s2);
    OPENSSL_free(s1);
    OPENSSL_free(s2);
    X509_free(ca);
    X509_free(leaf);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
}

static void reuse_and_rotate_keep_the_ca(void **state)
{
    dir_fixture *f = *state;
    gq_err err;
    certs_result res;
    certs_options o = opts(f->dir);
    /* Rotation needs a CA: it never silently changes the caBundle. */
    o.rotate = true;
    assert_int_equal(certs_generate(&o, &res, &err), GQ_ENOTFOUND);
    assert_non_null(strstr(err.msg, "never replaces the CA"));
    o.rotate = false;
    assert_int_equal(certs_generate(&o, &res, &err), GQ_OK);
    X509 *ca1 = load_cert(f->dir, "ca.crt"), *leaf1 = load_cert(f->dir, "tls.crt");

    o.now = NOW + 100 * 86400;
    assert_int_equal(certs_generate(&o, &res, &err), GQ_OK); /* plain generate reuses */
    assert_false(res.ca_created);
    o.rotate = true;
    assert_int_equal(certs_generate(&o, &res, &err), GQ_OK);
    assert_false(res.ca_created);
    X509 *ca2 = load_cert(f->dir, "ca.crt"), *leaf2 = load_cert(f->dir, "tls.crt");
    assert_int_equal(X509_cmp(ca1, ca2), 0);
    assert_int_not_equal(X509_cmp(leaf1, leaf2), 0);
    verify_chain(ca1, leaf2, o.now, X509_V_OK);

    /* A CA that would expire before the new serving certificate is not
     * reused: plain generate makes a new one, rotate refuses. */
    o.now = NOW + 3500 * 86400;
    assert_int_equal(certs_generate(&o, &res, &err), GQ_ENOTFOUND);
    assert_non_null(strstr(err.msg, "expires before"));
    o.rotate = false;
    assert_int_equal(certs_generate(&o, &res, &err), GQ_OK);
    assert_true(res.ca_created);
    X509 *ca3 = load_cert(f->dir, "ca.crt");
    assert_int_not_equal(X509_cmp(ca1, ca3), 0);
    X509_free(ca1);
    X509_free(ca2);
    X509_free(ca3);
    X509_free(leaf1);
    X509_free(leaf2);
}

static void rejects_bad_options(void **state)
{
    dir_fixture *f = *state;
    gq_err err;
    typedef struct bad_case {
        const char *service, *ns, *san;
        int days;
        gq_code rc;
    } bad_case;
    static const bad_case cases[] = {
        {"Webhook", "ns", NULL, 1, GQ_EINVAL},  {"9svc", "ns", NULL, 1, GQ_EINVAL},
        {"svc-", "ns", NULL, 1, GQ_EINVAL},     {NULL, "ns", NULL, 1, GQ_EINVAL},
        {"svc", "a_b", NULL, 1, GQ_EINVAL},     {"svc", NULL, NULL, 1, GQ_EINVAL},
        {"svc", "ns", "bad,san", 1, GQ_EINVAL}, {"svc", "ns", "UPPER.example", 1, GQ_EINVAL},
        {"svc", "ns", "", 1, GQ_EINVAL},        {"svc", "ns", NULL, 0, GQ_EINVAL},
        {"svc", "ns", NULL, 36501, GQ_EINVAL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *sans[1] = {cases[i].san};
        certs_options o = {.service = cases[i].service,
                           .ns = cases[i].ns,
                           .out_dir = f->dir,
                           .days = cases[i].days,
                           .ca_days = 10,
                           .extra_sans = sans,
                           .n_extra_sans = cases[i].san ? 1 : 0,
                           .now = NOW};
        print_message("case %zu\n", i);
        assert_int_equal(certs_generate(&o, NULL, &err), cases[i].rc);
    }
    certs_options o = opts("/nonexistent/dir");
    assert_int_equal(certs_generate(&o, NULL, &err), GQ_EIO);
}

static void inspect(void **state)
{
    dir_fixture *f = *state;
    gq_err err;
    char p[128];
    certs_info *list = NULL;
    size_t n = 0;
    certs_options o = opts(f->dir);
    assert_int_equal(certs_generate(&o, NULL, &err), GQ_OK);
    snprintf(p, sizeof(p), "%s/tls.crt", f->dir);
    assert_int_equal(certs_inspect_file(p, &list, &n, &err), GQ_OK);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].subject, "CN=gpuquota-webhook.gpuquota-system.svc");
    assert_string_equal(list[0].issuer, "CN=gpuquota-ca gpuquota-webhook.gpuquota-system");
    assert_string_equal(list[0].sans,
                        "DNS:gpuquota-webhook, DNS:gpuquota-webhook.gpuquota-system, "
                        "DNS:gpuquota-webhook.gpuquota-system.svc, "
                        "DNS:gpuquota-webhook.gpuquota-system.svc.cluster.local, DNS:localhost, "
                        "IP:127.0.0.1, IP:::1, DNS:*.example.com");
    assert_int_equal(list[0].not_before, NOW - 300);
    assert_int_equal(list[0].not_after, NOW + 365 * 86400);
    assert_false(list[0].is_ca);
    assert_int_equal(certs_days_left(&list[0], NOW), 365);
    assert_int_equal(certs_days_left(&list[0], NOW + 1), 364);
    assert_int_equal(certs_days_left(&list[0], NOW + 365 * 86400), 0);
    assert_int_equal(certs_days_left(&list[0], NOW + 365 * 86400 + 1), -1);
    free(list);

    /* A bundle: every certificate, in order. */
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cat %s/tls.crt %s/ca.crt > %s/ca.key", f->dir, f->dir, f->dir);
    assert_int_equal(system(cmd), 0);
    snprintf(p, sizeof(p), "%s/ca.key", f->dir);
    assert_int_equal(certs_inspect_file(p, &list, &n, &err), GQ_OK);
    assert_int_equal(n, 2);
    assert_false(list[0].is_ca);
    assert_true(list[1].is_ca);
    assert_string_equal(list[1].sans, "");
    free(list);

    snprintf(p, sizeof(p), "%s/tls.key", f->dir);
    assert_int_equal(certs_inspect_file(p, &list, &n, &err), GQ_EINVAL);
    assert_int_equal(certs_inspect_file("/nonexistent", &list, &n, &err), GQ_EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(generate_and_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(reuse_and_rotate_keep_the_ca, setup, teardown),
        cmocka_unit_test_setup_teardown(rejects_bad_options, setup, teardown),
        cmocka_unit_test_setup_teardown(inspect, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
