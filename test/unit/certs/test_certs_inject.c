/* caBundle injection: the bundle read from a CA file (only CA certificates,
 * keys never copied), the in-place edit of a webhook configuration, and the
 * GET/PUT loop against a fake API (conflict retries, dry run, missing
 * objects, API errors). */
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

#include "certs/certs.h"
#include "certs/certs_inject.h"

/* ------------------------------------------------------------ the bundle */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *buf = calloc(1, 65536);
    size_t n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void write_text(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(a, f);
    if (b)
        fputs(b, f);
    fclose(f);
}

static void bundle_from_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/gq-test-inject-XXXXXX", p[128];
    assert_non_null(mkdtemp(dir));
    certs_options o = {
        .service = "wh", .ns = "ns", .out_dir = dir, .days = 10, .ca_days = 20, .now = time(NULL)};
    certs_result res;
    gq_err err;
    assert_int_equal(certs_generate(&o, &res, &err), GQ_OK);
    snprintf(p, sizeof(p), "%s/ca.crt", dir);
    char *ca = slurp(p);
    snprintf(p, sizeof(p), "%s/ca.key", dir);
    char *key = slurp(p);
    snprintf(p, sizeof(p), "%s/tls.crt", dir);
    char *leaf = slurp(p);

    char *pem = NULL;
    size_t len = 0;
    /* the CA file as written: the bundle is exactly its PEM */
    snprintf(p, sizeof(p), "%s/ca.crt", dir);
    assert_int_equal(certs_ca_bundle_pem(p, &pem, &len, &err), GQ_OK);
    assert_string_equal(pem, ca);
    assert_int_equal(len, strlen(ca));
    free(pem);

    /* key + certificate in one file: the key stays out of the bundle */
    snprintf(p, sizeof(p), "%s/mixed.pem", dir);
    write_text(p, key, ca);
    pem = NULL;
    assert_int_equal(certs_ca_bundle_pem(p, &pem, &len, &err), GQ_OK);
    assert_string_equal(pem, ca);
    free(pem);

    /* two CAs: both kept, in order */
    snprintf(p, sizeof(p), "%s/two.pem", dir);
    write_text(p, ca, ca);
    pem = NULL;
    assert_int_equal(certs_ca_bundle_pem(p, &pem, &len, &err), GQ_OK);
    assert_int_equal(len, 2 * strlen(ca));
    assert_memory_equal(pem + strlen(ca), ca, strlen(ca));
    free(pem);

    /* errors; *pem untouched */
    char *sentinel = (char *)"x";
    pem = sentinel;
    snprintf(p, sizeof(p), "%s/tls.crt", dir);
    assert_int_equal(certs_ca_bundle_pem(p, &pem, &len, &err), GQ_EINVAL);
    assert_non_null(strstr(err.msg, "is not a CA certificate"));
    snprintf(p, sizeof(p), "%s/chain.pem", dir); /* a CA followed by a leaf */
    write_text(p, ca, leaf);
    assert_int_equal(certs_ca_bundle_pem(p, &pem, &len, &err), GQ_EINVAL);
    assert_non_null(strstr(err.msg, "certificate 2 (CN=wh.ns.svc) is not a CA certificate"));
    snprintf(p, sizeof(p), "%s/ca.key", dir);
    assert_int_equal(certs_ca_bundle_pem(p, &pem, &len, &err), GQ_EINVAL);
    assert_non_null(strstr(err.msg, "no PEM certificate found"));
    snprintf(p, sizeof(p), "%s/none", dir);
    assert_int_equal(certs_ca_bundle_pem(p, &pem, &len, &err), GQ_EIO);
    assert_int_equal(certs_ca_bundle_pem(dir, &pem, &len, &err), GQ_EINVAL);
    assert_non_null(strstr(err.msg, "not a regular file"));
    snprintf(p, sizeof(p), "%s/big.pem", dir);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    assert_int_equal(fseek(f, CERTS_MAX_BUNDLE, SEEK_SET), 0);
    fputc('\n', f);
    fclose(f);
    assert_int_equal(certs_ca_bundle_pem(p, &pem, &len, &err), GQ_ELIMIT);
    assert_ptr_equal(pem, sentinel);

    const char *names[] = {"ca.crt",    "ca.key",  "tls.crt",   "tls.key",
                           "mixed.pem", "two.pem", "chain.pem", "big.pem"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    free(ca);
    free(key);
    free(leaf);
}

/* ------------------------------------------------------------- apply */

static void apply_cases(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        gq_code rc;
        size_t webhooks, changed;
        const char *out; /* the object afterwards */
    } cases[] = {
        {"{\"webhooks\":[{\"name\":\"a\",\"clientConfig\":{\"url\":\"https://x\"}},"
         "{\"name\":\"b\",\"clientConfig\":{\"caBundle\":\"T0xE\"}}]}",
         GQ_OK, 2, 2,
         "{\"webhooks\":[{\"name\":\"a\",\"clientConfig\":{\"url\":\"https://x\",\"caBundle\":"
         "\"TkVX\"}},{\"name\":\"b\",\"clientConfig\":{\"caBundle\":\"TkVX\"}}]}"},
        /* one already right: all counted, one changed */
        {"{\"webhooks\":[{\"clientConfig\":{\"caBundle\":\"TkVX\"}},{\"clientConfig\":{}}]}", GQ_OK,
         2, 1,
         "{\"webhooks\":[{\"clientConfig\":{\"caBundle\":\"TkVX\"}},{\"clientConfig\":{"
         "\"caBundle\":"
         "\"TkVX\"}}]}"},
        {"{\"webhooks\":[{\"clientConfig\":{\"caBundle\":\"TkVX\"}}]}", GQ_OK, 1, 0,
         "{\"webhooks\":[{\"clientConfig\":{\"caBundle\":\"TkVX\"}}]}"},
        /* clientConfig absent: created */
        {"{\"webhooks\":[{\"name\":\"a\"}]}", GQ_OK, 1, 1,
         "{\"webhooks\":[{\"name\":\"a\",\"clientConfig\":{\"caBundle\":\"TkVX\"}}]}"},
        /* a non-string caBundle is replaced */
        {"{\"webhooks\":[{\"clientConfig\":{\"caBundle\":null}}]}", GQ_OK, 1, 1,
         "{\"webhooks\":[{\"clientConfig\":{\"caBundle\":\"TkVX\"}}]}"},
        {"{\"metadata\":{}}", GQ_OK, 0, 0, "{\"metadata\":{}}"},
        {"{\"webhooks\":null}", GQ_OK, 0, 0, "{\"webhooks\":null}"},
        {"{\"webhooks\":[]}", GQ_OK, 0, 0, "{\"webhooks\":[]}"},
        /* malformed: nothing modified, even the well-formed first entry */
        {"{\"webhooks\":[{\"clientConfig\":{}},{\"clientConfig\":\"x\"}]}", GQ_EINVAL, 0, 0,
         "{\"webhooks\":[{\"clientConfig\":{}},{\"clientConfig\":\"x\"}]}"},
        {"{\"webhooks\":[{},7]}", GQ_EINVAL, 0, 0, "{\"webhooks\":[{},7]}"},
        {"{\"webhooks\":{}}", GQ_EINVAL, 0, 0, "{\"webhooks\":{}}"},
        {"[]", GQ_EINVAL, 0, 0, "[]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *o = json_tokener_parse(cases[i].in);
        assert_non_null(o);
        size_t w = 99, ch = 99;
        gq_code rc = certs_inject_apply(o, "TkVX", &w, &ch);
        if (rc != cases[i].rc)
            fail_msg("case %zu: rc %d", i, rc);
        if (rc == GQ_OK) {
            assert_int_equal(w, cases[i].webhooks);
            assert_int_equal(ch, cases[i].changed);
        } else {
            assert_int_equal(w, 99); /* out-params untouched */
            assert_int_equal(ch, 99);
        }
        assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                                  JSON_C_TO_STRING_NOSLASHESCAPE),
                            cases[i].out);
        json_object_put(o);
    }
}

static void names(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool ok;
    } cases[] = {
        {"gpuquota", true}, {"a", true},     {"a.b-c.d", true}, {"0x", true},    {"a-b", true},
        {"", false},        {"A", false},    {"-a", false},     {"a-", false},   {".a", false},
        {"a.", false},      {"a..b", false}, {"a.-b", false},   {"a-.b", false}, {"a_b", false},
        {"a/b", false},     {NULL, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (certs_inject_valid_name(cases[i].name) != cases[i].ok)
            fail_msg("name \"%s\": want %d", cases[i].name ? cases[i].name : "(null)", cases[i].ok);
    char long_name[256];
    memset(long_name, 'a', 253);
    long_name[253] = '\0';
    assert_true(certs_inject_valid_name(long_name));
    long_name[253] = 'a';
    long_name[254] = '\0';
    assert_false(certs_inject_valid_name(long_name));
}

/* ------------------------------------------------------------- fake API */

#define MPATH "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gq"

typedef struct fake {
    json_object *stored; /* the object at MPATH, NULL when absent */
    int rv;
    int gets, puts;
    int conflicts;    /* next N PUTs: a concurrent writer got there first */
    gq_code get_fail; /* non-zero: every GET fails with it */
    gq_code put_fail; /* non-zero: every PUT fails with it */
    char last_put_rv[16];
} fake;

static void set_rv(json_object *o, int rv)
{
    json_object *md;
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", rv);
    assert_true(json_object_object_get_ex(o, "metadata", &md));
    json_object_object_add(md, "resourceVersion", json_object_new_string(buf));
}

static const char *rv_of(json_object *o)
{
    json_object *md, *rv;
    if (!json_object_object_get_ex(o, "metadata", &md) ||
        !json_object_object_get_ex(md, "resourceVersion", &rv))
        return "";
    return json_object_get_string(rv);
}

static gq_code fake_get(void *ctx, const char *path, json_object **out, gq_err *err)
{
    fake *f = ctx;
    f->gets++;
    if (f->get_fail)
        return gq_err_set(err, f->get_fail, "injected");
    if (strcmp(path, MPATH) != 0 || !f->stored)
        return gq_err_set(err, GQ_ENOTFOUND, "not found");
    json_object *copy = NULL;
    assert_int_equal(json_object_deep_copy(f->stored, &copy, NULL), 0);
    *out = copy;
    return GQ_OK;
}

static gq_code fake_update(void *ctx, const char *path, json_object *body, json_object **out,
                           gq_err *err)
{
    fake *f = ctx;
    f->puts++;
    assert_null(out);
    assert_string_equal(path, MPATH);
    snprintf(f->last_put_rv, sizeof(f->last_put_rv), "%s", rv_of(body));
    if (f->put_fail)
        return gq_err_set(err, f->put_fail, "injected");
    if (f->conflicts > 0) {
        f->conflicts--;
        set_rv(f->stored, ++f->rv);
    }
    if (strcmp(rv_of(body), rv_of(f->stored)) != 0)
        return gq_err_set(err, GQ_ECONFLICT, "the object has been modified");
    json_object_put(f->stored);
    f->stored = NULL;
    assert_int_equal(json_object_deep_copy(body, &f->stored, NULL), 0);
    set_rv(f->stored, ++f->rv);
    return GQ_OK;
}

static void fake_init(fake *f, kube_api *api, const char *obj)
{
    memset(f, 0, sizeof(*f));
    f->rv = 10;
    if (obj) {
        f->stored = json_tokener_parse(obj);
        assert_non_null(f->stored);
        set_rv(f->stored, f->rv);
    }
    memset(api, 0, sizeof(*api));
    api->ctx = f;
    api->get = fake_get;
    api->update = fake_update;
}

static const char two_hooks[] = "{\"metadata\":{\"name\":\"gq\"},\"webhooks\":["
                                "{\"name\":\"a\",\"clientConfig\":{}},"
                                "{\"name\":\"b\",\"clientConfig\":{\"caBundle\":\"T0xE\"}}]}";

static int bundle_count(json_object *o, const char *want)
{
    json_object *list;
    int n = 0;
    assert_true(json_object_object_get_ex(o, "webhooks", &list));
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *cc, *b;
        if (json_object_object_get_ex(json_object_array_get_idx(list, i), "clientConfig", &cc) &&
            json_object_object_get_ex(cc, "caBundle", &b) &&
            !strcmp(json_object_get_string(b), want))
            n++;
    }
    return n;
}

/* Inject b64 into the fake's mutating configuration "gq". */
static gq_code inject(const kube_api *api, const char *b64, bool dry_run, certs_inject_result *r,
                      gq_err *err)
{
    return certs_inject_config(api, "mutatingwebhookconfigurations", "gq", b64, dry_run, r, err);
}

static void inject_updates_then_unchanged(void **state)
{
    (void)state;
    fake f;
    kube_api api;
    certs_inject_result r;
    gq_err err;
    fake_init(&f, &api, two_hooks);
    assert_int_equal(inject(&api, "TkVX", false, &r, &err), GQ_OK);
    assert_int_equal(r.state, CERTS_INJECT_UPDATED);
    assert_int_equal(r.webhooks, 2);
    assert_int_equal(r.changed, 2);
    assert_int_equal(r.conflicts, 0);
    assert_int_equal(f.gets, 1);
    assert_int_equal(f.puts, 1);
    assert_string_equal(f.last_put_rv, "10"); /* written at the version read */
    assert_int_equal(bundle_count(f.stored, "TkVX"), 2);
    assert_string_equal(rv_of(f.stored), "11");

    /* second run: nothing to write */
    assert_int_equal(inject(&api, "TkVX", false, &r, &err), GQ_OK);
    assert_int_equal(r.state, CERTS_INJECT_UNCHANGED);
    assert_int_equal(r.webhooks, 2);
    assert_int_equal(r.changed, 0);
    assert_int_equal(f.puts, 1);
    assert_string_equal(rv_of(f.stored), "11");
    json_object_put(f.stored);
}

static void inject_dry_run(void **state)
{
    (void)state;
    fake f;
    kube_api api;
    certs_inject_result r;
    gq_err err;
    fake_init(&f, &api, two_hooks);
    assert_int_equal(inject(&api, "T0xE", true, &r, &err), GQ_OK);
    assert_int_equal(r.state, CERTS_INJECT_WOULD_UPDATE);
    assert_int_equal(r.webhooks, 2);
    assert_int_equal(r.changed, 1);
    assert_int_equal(f.puts, 0);
    assert_int_equal(bundle_count(f.stored, "T0xE"), 1);
    json_object_put(f.stored);
}

static void inject_conflicts(void **state)
{
    (void)state;
    fake f;
    kube_api api;
    certs_inject_result r;
    gq_err err;
    /* two conflicts: re-read and retried, written at the third version */
    fake_init(&f, &api, two_hooks);
    f.conflicts = 2;
    assert_int_equal(inject(&api, "TkVX", false, &r, &err), GQ_OK);
    assert_int_equal(r.state, CERTS_INJECT_UPDATED);
    assert_int_equal(r.conflicts, 2);
    assert_int_equal(f.gets, 3);
    assert_int_equal(f.puts, 3);
    assert_string_equal(f.last_put_rv, "12");
    assert_int_equal(bundle_count(f.stored, "TkVX"), 2);
    json_object_put(f.stored);

    /* conflicts on every attempt: bounded, then GQ_ECONFLICT */
    fake_init(&f, &api, two_hooks);
    f.conflicts = 1000;
    r.state = (certs_inject_state)77;
    assert_int_equal(inject(&api, "TkVX", false, &r, &err), GQ_ECONFLICT);
    assert_int_equal(f.puts, CERTS_INJECT_MAX_ATTEMPTS);
    assert_int_equal(f.gets, CERTS_INJECT_MAX_ATTEMPTS);
    assert_int_equal((int)r.state, 77); /* untouched on failure */
    assert_int_equal(bundle_count(f.stored, "TkVX"), 0);
    json_object_put(f.stored);
}

static void inject_missing_and_errors(void **state)
{
    (void)state;
    fake f;
    kube_api api;
    certs_inject_result r;
    gq_err err;
    fake_init(&f, &api, NULL);
    assert_int_equal(inject(&api, "TkVX", false, &r, &err), GQ_OK);
    assert_int_equal(r.state, CERTS_INJECT_NOT_FOUND);
    assert_int_equal(r.webhooks, 0);
    assert_int_equal(f.puts, 0);

    /* deleted between GET and PUT */
    fake_init(&f, &api, two_hooks);
    f.put_fail = GQ_ENOTFOUND;
    assert_int_equal(inject(&api, "TkVX", false, &r, &err), GQ_OK);
    assert_int_equal(r.state, CERTS_INJECT_NOT_FOUND);
    json_object_put(f.stored);

    static const gq_code codes[] = {GQ_EUNAUTHORIZED, GQ_EHTTP, GQ_EIO};
    for (size_t i = 0; i < 3; i++) {
        fake_init(&f, &api, two_hooks);
        f.get_fail = codes[i];
        assert_int_equal(inject(&api, "TkVX", false, &r, &err), codes[i]);
        assert_int_equal(f.puts, 0);
        f.get_fail = GQ_OK;
        f.put_fail = codes[i];
        assert_int_equal(inject(&api, "TkVX", false, &r, &err), codes[i]);
        assert_int_equal(f.puts, 1);
        json_object_put(f.stored);
    }

    /* malformed stored object: no write */
    fake_init(&f, &api, "{\"metadata\":{},\"webhooks\":[1]}");
    assert_int_equal(inject(&api, "TkVX", false, &r, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "mutatingwebhookconfigurations/gq: malformed webhooks list");
    assert_int_equal(f.puts, 0);
    json_object_put(f.stored);

    /* bad arguments: no request at all */
    fake_init(&f, &api, NULL);
    assert_int_equal(certs_inject_config(&api, "pods", "gq", "TkVX", false, &r, &err), GQ_EINVAL);
    assert_int_equal(
        certs_inject_config(&api, "mutatingwebhookconfigurations", "Bad", "TkVX", false, &r, &err),
        GQ_EINVAL);
    assert_string_equal(err.msg, "invalid configuration name \"Bad\"");
    assert_int_equal(f.gets, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bundle_from_files),
        cmocka_unit_test(apply_cases),
        cmocka_unit_test(names),
        cmocka_unit_test(inject_updates_then_unchanged),
        cmocka_unit_test(inject_dry_run),
        cmocka_unit_test(inject_conflicts),
        cmocka_unit_test(inject_missing_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
