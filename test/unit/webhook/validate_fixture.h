/* What the tests of the /validate decision share: a validator over the
 * in-memory store behind a faultstore, at a fixed NOW, with setup/teardown
 * for cmocka; objects applied to the store; AdmissionReviews built, decoded
 * and decided; the reservations a stored quota holds. Include after
 * <cmocka.h>. */
#ifndef GQ_TEST_VALIDATE_FIXTURE_H
#define GQ_TEST_VALIDATE_FIXTURE_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/admission_testutil.h"
#include "support/faultstore.h"
#include "quota/record.h"
#include "webhook/memstore.h"
#include "webhook/validate.h"

#define NOW 1800000000
#define NS_A "team-a"
#define USER "alice"

static inline int64_t fixed_now(void *ud)
{
    (void)ud;
    return NOW;
}

typedef struct fx {
    gq_config *cfg;
    wh_memstore *ms;
    faultstore *fs; /* over ms */
    wh_store store; /* fs's table */
    wh_validator *v;
} fx;

static inline void fx_validator(fx *f, const wh_validate_opts *o)
{
    wh_validate_opts d;
    memset(&d, 0, sizeof(d));
    if (!o)
        o = &d;
    wh_validate_opts opts = *o;
    if (!opts.now)
        opts.now = fixed_now;
    wh_validator_free(f->v);
    f->v = NULL;
    assert_int_equal(wh_validator_new(f->cfg, &f->store, &opts, &f->v, NULL), GQ_OK);
}

static inline int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    assert_int_equal(gq_config_default(&f->cfg, NULL), GQ_OK);
    assert_int_equal(faultstore_over_memstore(&f->ms, &f->fs, &f->store), GQ_OK);
    fx_validator(f, NULL);
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    fx *f = *state;
    wh_validator_free(f->v);
    faultstore_free(f->fs);
    wh_memstore_free(f->ms);
    gq_config_free(f->cfg);
    free(f);
    return 0;
}

static inline void apply(fx *f, const char *json)
{
    json_object *o = json_tokener_parse(json);
    assert_non_null(o);
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = wh_memstore_apply(f->ms, o, &err);
    if (rc)
        fail_msg("apply: %s", err.msg);
    json_object_put(o);
}

/* A GPUQuota in ns with hard (a JSON object body) and optional status. */
static inline void quota(fx *f, const char *ns, const char *name, const char *hard,
                         const char *extra)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\","
             "\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\"},\"spec\":{\"hard\":%s%s}%s}",
             name, ns, hard, extra && extra[0] == ',' ? extra : "",
             extra && extra[0] == '#' ? extra + 1 : "");
    apply(f, buf);
}

static inline void namespace_(fx *f, const char *name, const char *labels)
{
    char buf[512];
    snprintf(buf, sizeof(buf),
             "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\","
             "\"labels\":%s}}",
             name, labels);
    apply(f, buf);
}

/* Pod JSON with one container asking for gpuquota.io/gpu-memory mem (or no
 * GPU when mem is NULL); extra_meta / extra_spec are appended verbatim. */
static inline void pod_json(char *buf, size_t cap, const char *ns, const char *mem,
                            const char *extra_meta, const char *extra_spec)
{
    char res[128] = "{}";
    if (mem)
        snprintf(res, sizeof(res), "{\"limits\":{\"gpuquota.io/gpu-memory\":\"%s\"}}", mem);
    snprintf(buf, cap,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":\"train-\","
             "\"namespace\":\"%s\"%s},\"spec\":{\"containers\":[{\"name\":\"trainer\","
             "\"image\":\"x\",\"resources\":%s}]%s}}",
             ns, extra_meta ? extra_meta : "", res, extra_spec ? extra_spec : "");
}

typedef struct rv_opts {
    const char *op;
    const char *user;
    const char *old;
    bool dry_run;
    const char *sub; /* subResource, NULL for none */
    bool claim;      /* a resource.k8s.io/v1 ResourceClaim, not a pod */
} rv_opts;

/* Decode an AdmissionReview for pod (JSON text) and decide it. */
static inline wh_validate_result decide_ex(fx *f, const char *uid, const char *ns, const char *pod,
                                           const rv_opts *o, wh_review_response *resp_out)
{
    rv_opts d = {"CREATE", USER, NULL, false, NULL, false};
    if (!o)
        o = &d;
    size_t body_max = 4096 + strlen(pod) + (o->old ? strlen(o->old) : 0);
    char *body = malloc(body_max);
    assert_non_null(body);
    snprintf(body, body_max,
             "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
             "\"uid\":\"%s\",\"kind\":{\"group\":\"%s\",\"version\":\"v1\",\"kind\":\"%s\"},"
             "\"resource\":{\"group\":\"%s\",\"version\":\"v1\",\"resource\":\"%s\"},"
             "\"namespace\":\"%s\",\"operation\":\"%s\",\"userInfo\":{\"username\":\"%s\"},"
             "\"object\":%s,\"oldObject\":%s,\"dryRun\":%s%s%s%s}}",
             uid, o->claim ? "resource.k8s.io" : "", o->claim ? "ResourceClaim" : "Pod",
             o->claim ? "resource.k8s.io" : "", o->claim ? "resourceclaims" : "pods", ns, o->op,
             o->user ? o->user : USER, pod, o->old ? o->old : "null", o->dry_run ? "true" : "false",
             o->sub ? ",\"subResource\":\"" : "", o->sub ? o->sub : "", o->sub ? "\"" : "");
    wh_review_request req;
    wh_review_response resp;
    wh_validate_result r;
    gq_err err;
    gq_err_clear(&err);
    if (wh_review_decode(body, strlen(body), &req, &err))
        fail_msg("decode: %s", err.msg);
    assert_int_equal(wh_validate_review(f->v, &req, &resp, &r, &err), GQ_OK);
    assert_int_equal(resp.allowed, r.allowed);
    if (!r.allowed) {
        bool exists = r.code == GQ_EEXISTS;
        assert_int_equal(resp.code, exists ? 409 : 403);
        assert_string_equal(resp.reason, exists ? "AlreadyExists" : "Forbidden");
        assert_string_equal(resp.message, r.message);
    }
    if (resp_out)
        *resp_out = resp;
    else
        wh_review_response_dispose(&resp);
    wh_review_request_dispose(&req);
    free(body);
    return r;
}

static inline wh_validate_result decide(fx *f, const char *uid, const char *ns, const char *mem)
{
    char pod[2048];
    pod_json(pod, sizeof(pod), ns, mem, NULL, NULL);
    return decide_ex(f, uid, ns, pod, NULL, NULL);
}

/* ---- many reviews at once --------------------------------------------------- */

typedef struct fx_worker {
    fx on; /* f with the validator this review goes to */
    int i;
    const char *mem;
    bool allowed;
} fx_worker;

static inline void *fx_work(void *arg)
{
    fx_worker *w = arg;
    char uid[32];
    snprintf(uid, sizeof(uid), "c-%d", w->i);
    wh_validate_result r = decide(&w->on, uid, NS_A, w->mem);
    w->allowed = r.allowed;
    if (!r.allowed && strncmp(r.message, "exceeded quota: q,", 18))
        fprintf(stderr, "unexpected denial: %s\n", r.message);
    return NULL;
}

/* Decide n (at most 256) reviews of a pod asking mem in NS_A at once,
 * review i (uid "c-i") on vs[i % n_vs], while the store injects faults;
 * returns how many were allowed. Denials other than quota q's are
 * printed. */
static inline int decide_concurrently(fx *f, wh_validator *const *vs, size_t n_vs, int n,
                                      const char *mem, const faultstore_faults *faults)
{
    static fx_worker ws[256];
    static pthread_t th[256];
    assert_true(n <= 256);
    faultstore_set_faults(f->fs, faults);
    for (int i = 0; i < n; i++) {
        ws[i] = (fx_worker){*f, i, mem, false};
        ws[i].on.v = vs[(size_t)i % n_vs];
        assert_int_equal(pthread_create(&th[i], NULL, fx_work, &ws[i]), 0);
    }
    int allowed = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        allowed += ws[i].allowed;
    }
    faultstore_set_faults(f->fs, NULL);
    return allowed;
}

/* Reservations of a stored quota, as an array borrowed from *holder. */
static inline size_t n_reservations(fx *f, const char *kind, const char *ns, const char *name)
{
    json_object *o = NULL, *st, *arr;
    assert_int_equal(wh_memstore_get(f->ms, kind, ns, name, &o, NULL), GQ_OK);
    size_t n = 0;
    if (json_object_object_get_ex(o, "status", &st) &&
        json_object_object_get_ex(st, "reservations", &arr))
        n = json_object_array_length(arr);
    json_object_put(o);
    return n;
}

static inline json_object *reservation(fx *f, const char *ns, const char *name, size_t i)
{
    json_object *o = NULL, *st, *arr;
    assert_int_equal(wh_memstore_get(f->ms, "GPUQuota", ns, name, &o, NULL), GQ_OK);
    assert_true(json_object_object_get_ex(o, "status", &st));
    assert_true(json_object_object_get_ex(st, "reservations", &arr));
    json_object *r = json_object_get(json_object_array_get_idx(arr, i));
    json_object_put(o);
    return r;
}

static inline const char *sget(json_object *o, const char *k)
{
    json_object *v;
    assert_true(json_object_object_get_ex(o, k, &v));
    return json_object_get_string(v);
}

#endif
