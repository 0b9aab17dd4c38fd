/* The typed quota status (quota/status.h): the decoder on every malformed
 * shape, in each mode; the encoder (stable bytes, decode(encode(x)) == x);
 * and each operation on the typed value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "policy_fixtures.h"
#include "quota/status.h"

/* A status as the controller writes it, with every member, in the
 * encoder's order and canonical form: decoding and encoding it again must
 * give these bytes. */
#define FULL_STATUS                                                                                \
    "{\"hard\":{\"gpu-memory\":\"64G\",\"gpus\":\"2\"},\"used\":{\"gpu-memory\":\"8Gi\","          \
    "\"gpus\":\"0\"},\"borrowed\":{\"gpu-memory\":\"0\"},\"lent\":{\"gpu-memory\":\"16Gi\","       \
    "\"gpus\":\"1\"},\"usedByModel\":{\"a100-80gb\":{\"gpu-memory\":\"8Gi\"},\"h100-80gb\":{}},"   \
    "\"namespaces\":[{\"namespace\":\"a\",\"used\":{\"gpu-memory\":\"8Gi\",\"gpus\":\"0\"}},"      \
    "{\"namespace\":\"b\",\"used\":{}}],\"queued\":{\"gpu-memory\":\"16Gi\"},\"queuedPods\":2,"    \
    "\"reservations\":[{\"key\":\"uid-1\",\"namespace\":\"a\",\"pod\":\"job-x-\",\"gpu-memory\":"  \
    "\"16Gi\",\"gpu-pods\":\"1\",\"gpus\":\"0\",\"expires\":\"2026-11-21T15:07:05Z\",\"model\":"   \
    "\"a100-80gb\",\"borrowing\":true,\"escrow\":\"admitted\",\"claims\":[\"c-1\"]},"              \
    "{\"key\":\"c-1\",\"namespace\":\"a\","                                                        \
    "\"pod\":\"pair\","                                                                            \
    "\"gpu-memory\":\"160Gi\",\"gpu-pods\":\"0\",\"gpus\":\"2\",\"expires\":"                      \
    "\"1970-01-01T00:00:00Z\",\"claim\":true,\"counted\":true}],\"observedGeneration\":3,"         \
    "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"observedGeneration\":3,"            \
    "\"lastTransitionTime\":\"2026-11-21T15:06:05Z\",\"reason\":\"Reconciled\",\"message\":"       \
    "\"usage recounted from "                                                                      \
    "pods\"},{\"type\":\"Exceeded\",\"status\":\"False\",\"message\":\"\"}]}"

static const char *text(json_object *o)
{
    return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
}

static gq_quota_status decode_ok(json_object *o, gq_status_mode mode)
{
    gq_quota_status st;
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = gq_quota_status_decode(o, mode, &st, &err);
    if (rc)
        fail_msg("decode failed: %s", err.msg);
    return st;
}

/* Encode st, compare with want, and check that decoding the result and
 * encoding again gives the same bytes. */
static void assert_encodes(const gq_quota_status *st, const char *want)
{
    json_object *o = gq_quota_status_encode(st);
    assert_non_null(o);
    assert_string_equal(text(o), want);
    gq_quota_status back = decode_ok(o, GQ_STATUS_CHARGE);
    json_object *again = gq_quota_status_encode(&back);
    assert_string_equal(text(again), want);
    json_object_put(again);
    gq_quota_status_dispose(&back);
    json_object_put(o);
}

/* A live want of a webhook's escrow, read from the JSON list itself. */
static void test_json_want(void **state)
{
    (void)state;
#define W(kind, exp)                                                                               \
    "{'key':'k','namespace':'a','pod':'p','gpu-memory':'0','gpus':'0','gpu-pods':'0','expires':"   \
    "'" exp "','escrow':'" kind "'}"
    static const struct {
        const char *list;
        bool want;
    } cases[] = {
        {"[" W("want", "2026-11-21T15:06:06Z") "]", true},
        {"[" W("hold", "2026-11-21T15:06:06Z") "," W("want", "2026-11-21T15:06:06Z") "]", true},
        {"[" W("want", "2026-11-21T15:06:05Z") "]", false}, /* expires at now */
        {"[" W("hold", "2026-11-21T15:07:05Z") "," W("admitted", "2026-11-21T15:07:05Z") "]",
         false},
        {"[{'escrow':'want','expires':'soon'},7,{'escrow':7}]", false},
        {"{}", false},
    };
#undef W
    assert_false(gq_reservations_json_live(NULL, GQ_ESCROW_WANT, NOW));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *o = J(cases[i].list);
        if (gq_reservations_json_live(o, GQ_ESCROW_WANT, NOW) != cases[i].want)
            fail_msg("case %zu", i);
        json_object_put(o);
    }
    json_object *o = J("["
                       "{'escrow':'hold','expires':'2026-11-21T15:06:06Z'}"
                       "]");
    assert_true(gq_reservations_json_live(o, GQ_ESCROW_HOLD, NOW));
    assert_false(gq_reservations_json_live(o, GQ_ESCROW_WANT, NOW));
    assert_false(gq_reservations_json_live(o, GQ_ESCROW_NONE, NOW));
    assert_false(gq_reservations_json_live(o, (gq_escrow_kind)9, NOW));
    json_object_put(o);
}

/* ------------------------------------------------------------------------ */
/* The decoder                                                                */

static void test_decode_full(void **state)
{
    (void)state;
    json_object *o = json_tokener_parse(FULL_STATUS);
    assert_non_null(o);
    gq_quota_status st = decode_ok(o, GQ_STATUS_CHARGE);
    assert_true(st.has_hard && st.has_used && st.has_used_by_model && st.has_namespaces &&
                st.has_queued && st.has_queued_pods && st.has_reservations &&
                st.has_observed_generation && st.has_conditions && st.has_borrowed && st.has_lent);
    assert_int_equal(st.used.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    /* What it borrows and what it lends are reported, each key as written. */
    assert_true(st.borrowed.set[GQ_KEY_GPU_MEMORY] && !st.borrowed.set[GQ_KEY_GPUS]);
    assert_int_equal(st.borrowed.v[GQ_KEY_GPU_MEMORY], 0);
    assert_int_equal(st.lent.v[GQ_KEY_GPU_MEMORY], 16 * GI);
    assert_int_equal(st.lent.v[GQ_KEY_GPUS], 1);
    assert_false(st.lent.set[GQ_KEY_GPU_PODS]);
    assert_false(st.used.set[GQ_KEY_GPU_PODS]);
    assert_int_equal(st.n_used_by_model, 2);
    assert_string_equal(st.used_by_model[0].name, "a100-80gb");
    assert_int_equal(gq_quota_status_model_used(&st, "a100-80gb")->v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_null(gq_quota_status_model_used(&st, "l4"));
    assert_int_equal(st.n_namespaces, 2);
    assert_string_equal(st.namespaces[1].name, "b");
    assert_int_equal(st.queued_pods, 2);
    assert_int_equal(st.n_reservations, 2);
    assert_int_equal(st.dropped, 0);
    const gq_reservation *r = gq_quota_status_find(&st, "uid-1");
    assert_non_null(r);
    assert_int_equal(r->expires, NOW + 60);
    assert_string_equal(r->model, "a100-80gb");
    assert_int_equal(r->n_claims, 1);
    assert_true(r->borrowing);
    assert_int_equal(r->escrow, GQ_ESCROW_ADMITTED);
    assert_int_equal(gq_quota_status_find(&st, "c-1")->escrow, GQ_ESCROW_NONE);
    assert_true(gq_quota_status_find(&st, "c-1")->counted);
    assert_false(gq_quota_status_find(&st, "c-1")->borrowing);
    assert_null(gq_quota_status_find(&st, "nope"));
    assert_int_equal(st.observed_generation, 3);
    assert_int_equal(st.n_conditions, 2);
    const gq_condition *c = gq_quota_status_condition(&st, "Ready");
    assert_int_equal(c->last_transition, NOW);
    assert_true(c->has_observed_generation);
    c = gq_quota_status_condition(&st, "Exceeded");
    assert_false(c->has_last_transition);
    assert_null(c->reason);
    assert_string_equal(c->message, "");
    assert_null(gq_quota_status_condition(&st, "Other"));
    /* The same bytes back: nothing gpuquota wrote changes on a round trip. */
    assert_encodes(&st, FULL_STATUS);
    gq_quota_status_dispose(&st);

    /* What policy reads: only the members admissions count. */
    st = decode_ok(o, GQ_STATUS_POLICY);
    assert_true(st.has_used && st.has_used_by_model && st.has_queued_pods && st.has_reservations);
    assert_false(st.has_hard || st.has_namespaces || st.has_queued || st.has_observed_generation ||
                 st.has_conditions || st.has_borrowed || st.has_lent);
    gq_quota_status_dispose(&st);
    gq_quota_status_dispose(&st); /* disposed twice: still empty */
    gq_quota_status_dispose(NULL);
    json_object_put(o);

    /* No status, an empty one. */
    st = decode_ok(NULL, GQ_STATUS_POLICY);
    assert_encodes(&st, "{}");
    gq_quota_status_dispose(&st);
}

/* A malformed status: the error each mode gives (GQ_OK: decoded), and for
 * the modes that go on, what is left. */
typedef struct bad_case {
    const char *status; /* JSON with ' for " */
    gq_code policy, charge;
    const char *msg;      /* prefix of the error of the first failing mode */
    size_t dropped;       /* reservations left out in GQ_STATUS_SALVAGE */
    const char *salvaged; /* the encoding of what GQ_STATUS_SALVAGE keeps */
} bad_case;

#define R1 "{'key':'k','namespace':'a','pod':'p','gpu-memory':'1Gi','gpus':'0','gpu-pods':'1'"
#define GOOD R1 ",'expires':'" LIVE "'}"
#define GOOD_TEXT                                                                                  \
    "{\"key\":\"k\",\"namespace\":\"a\",\"pod\":\"p\",\"gpu-memory\":\"1Gi\",\"gpu-pods\":\"1\","  \
    "\"gpus\":\"0\",\"expires\":\"2026-11-21T15:07:05Z\"}"

static const bad_case bad_counted[] = {
    /* status.used */
    {"{'used':'lots'}", GQ_EINVAL, GQ_EINVAL, "status.used: must be an object, got string", 0,
     "{}"},
    {"{'used':{'gpus':'x'}}", GQ_EINVAL, GQ_EINVAL, "status.used.gpus: invalid quantity", 0, "{}"},
    {"{'used':{'gpus':'-1'}}", GQ_EINVAL, GQ_EINVAL,
     "status.used.gpus: invalid value \"-1\": must be greater than or equal to 0", 0, "{}"},
    {"{'used':{'gpus':'0.5'}}", GQ_EINVAL, GQ_EINVAL,
     "status.used.gpus: invalid value \"0.5\": must be a whole number", 0, "{}"},
    {"{'used':{'cpu':'1'}}", GQ_EINVAL, GQ_EINVAL, "status.used.cpu: unsupported key", 0, "{}"},
    {"{'used':{'gpus':true}}", GQ_EINVAL, GQ_EINVAL,
     "status.used.gpus: must be a quantity string or an integer, got boolean", 0, "{}"},
    /* status.usedByModel */
    {"{'usedByModel':[]}", GQ_EINVAL, GQ_EINVAL, "status.usedByModel: must be an object, got array",
     0, "{}"},
    {"{'usedByModel':{'h100-80gb':{'gpus':'x'}}}", GQ_EINVAL, GQ_EINVAL,
     "status.usedByModel.h100-80gb.gpus: invalid quantity", 0, "{}"},
    {"{'usedByModel':{'':{}}}", GQ_EINVAL, GQ_EINVAL, "status.usedByModel: \"\" is not a model", 0,
     "{}"},
    {"{'usedByModel':{'a234567890123456789012345678901234567890123456789012345678901234':{}}}",
     GQ_EINVAL, GQ_EINVAL, "status.usedByModel: \"a2345", 0, "{}"},
    /* status.queuedPods */
    {"{'queuedPods':'2'}", GQ_EINVAL, GQ_EINVAL, "status.queuedPods: must be a non-negative", 0,
     "{}"},
    {"{'queuedPods':-1}", GQ_EINVAL, GQ_EINVAL, "status.queuedPods: must be a non-negative", 0,
     "{}"},
    /* status.reservations: the member */
    {"{'reservations':{}}", GQ_EINVAL, GQ_EINVAL,
     "status.reservations: must be an array, got object", 1, "{}"},
    {"{'reservations':7,'used':{'gpus':1}}", GQ_EINVAL, GQ_EINVAL,
     "status.reservations: must be an array, got int", 1, "{\"used\":{\"gpus\":\"1\"}}"},
    /* ... and its records: dropped (never pinning quota) unless policy reads them */
    {"{'reservations':[7," GOOD "]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0]: must be an object, got int", 1, "{\"reservations\":[" GOOD_TEXT "]}"},
    {"{'reservations':[" GOOD ",{'key':'corrupt'}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[1].namespace: must be a string, got null", 1,
     "{\"reservations\":[" GOOD_TEXT "]}"},
    {"{'reservations':[{'key':'','namespace':'a','pod':'p'}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].key: must not be empty", 1, "{\"reservations\":[]}"},
    {"{'reservations':[{'key':7}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].key: must be a string, got int", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 "}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].expires: must be a string, got null", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'tomorrow'}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].expires: invalid RFC 3339 time \"tomorrow\"", 1,
     "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':1795273625}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].expires: must be a string, got int", 1, "{\"reservations\":[]}"},
    {"{'reservations':[{'key':'k','namespace':'a','pod':'p','gpu-memory':'1Gi','gpu-pods':'1',"
     "'expires':'" LIVE "'}]}",
     GQ_EINVAL, GQ_OK, "status.reservations[0].gpus: required", 1, "{\"reservations\":[]}"},
    {"{'reservations':[{'key':'k','namespace':'a','pod':'p','gpu-memory':'lots','gpus':'0',"
     "'gpu-pods':'1','expires':'" LIVE "'}]}",
     GQ_EINVAL, GQ_OK, "status.reservations[0].gpu-memory: invalid quantity", 1,
     "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','model':''}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].model: must be a model name", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','claim':'yes'}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].claim: must be true or false", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','counted':true}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].counted: only a claim record is counted", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','borrowing':1}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].borrowing: must be true or false", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','escrow':'maybe'}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].escrow: must be hold, want or admitted", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','escrow':true}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].escrow: must be hold, want or admitted", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','claim':true,'escrow':'hold'}]}", GQ_EINVAL,
     GQ_OK, "status.reservations[0].escrow: a claim's record is no escrow", 1,
     "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','borrowing':true,'escrow':'hold'}]}", GQ_EINVAL,
     GQ_OK, "status.reservations[0].escrow: a hold names no claim and borrows nothing", 1,
     "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','claims':['c'],'escrow':'want'}]}", GQ_EINVAL,
     GQ_OK, "status.reservations[0].escrow: a want names no claim and borrows nothing", 1,
     "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','claims':'c'}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].claims: must be a list of at most 32", 1, "{\"reservations\":[]}"},
    {"{'reservations':[" R1 ",'expires':'" LIVE "','claims':['']}]}", GQ_EINVAL, GQ_OK,
     "status.reservations[0].claims[0]: must be a claim uid", 1, "{\"reservations\":[]}"},
};

/* Members that only report are left out when they do not decode, in every
 * mode; policy does not even read them. */
static const bad_case bad_report[] = {
    {"{'hard':{'gpus':'x'},'used':{'gpus':1}}", GQ_OK, GQ_OK, "", 0, "{\"used\":{\"gpus\":\"1\"}}"},
    {"{'queued':[],'observedGeneration':'3'}", GQ_OK, GQ_OK, "", 0, "{}"},
    {"{'borrowed':{'gpus':'-1'},'lent':'16Gi'}", GQ_OK, GQ_OK, "", 0, "{}"},
    {"{'borrowed':{'gpus':'1'},'lent':{'cpu':'1'}}", GQ_OK, GQ_OK, "", 0,
     "{\"borrowed\":{\"gpus\":\"1\"}}"},
    {"{'namespaces':{}}", GQ_OK, GQ_OK, "", 0, "{}"},
    {"{'namespaces':[7,{'namespace':''},{'namespace':'a','used':{'gpus':'x'}},{'namespace':'b'},"
     "{'used':{}}]}",
     GQ_OK, GQ_OK, "", 0, "{\"namespaces\":[{\"namespace\":\"b\",\"used\":{}}]}"},
    {"{'conditions':{}}", GQ_OK, GQ_OK, "", 0, "{}"},
    {"{'conditions':[7,{'status':'True'},{'type':'A'},{'type':'A','status':'Maybe'},"
     "{'type':'A','status':'True','lastTransitionTime':'yesterday'},"
     "{'type':'A','status':'True','observedGeneration':-1},"
     "{'type':'A','status':'True','reason':7},{'type':'','status':'True'},"
     "{'type':'Ready','status':'Unknown'}]}",
     GQ_OK, GQ_OK, "", 0, "{\"conditions\":[{\"type\":\"Ready\",\"status\":\"Unknown\"}]}"},
};

static void check_bad(const bad_case *c, size_t i)
{
    static const gq_status_mode modes[] = {GQ_STATUS_POLICY, GQ_STATUS_CHARGE};
    const gq_code want[] = {c->policy, c->charge};
    json_object *o = J(c->status);
    gq_quota_status st;
    gq_err err;
    for (size_t m = 0; m < 2; m++) {
        gq_err_clear(&err);
        gq_code rc = gq_quota_status_decode(o, modes[m], &st, &err);
        if (rc != want[m] || (rc && strncmp(err.msg, c->msg, strlen(c->msg))))
            fail_msg("case %zu mode %zu: rc %d \"%s\", want %d \"%s\"", i, m, rc, err.msg, want[m],
                     c->msg);
        if (!rc)
            gq_quota_status_dispose(&st);
    }
    st = decode_ok(o, GQ_STATUS_SALVAGE);
    json_object *back = gq_quota_status_encode(&st);
    if (st.dropped != c->dropped || strcmp(text(back), c->salvaged))
        fail_msg("case %zu: salvaged %zu %s, want %zu %s", i, st.dropped, text(back), c->dropped,
                 c->salvaged);
    json_object_put(back);
    gq_quota_status_dispose(&st);
    json_object_put(o);
}

static void test_decode_malformed(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_counted) / sizeof(bad_counted[0]); i++)
        check_bad(&bad_counted[i], i);
    for (size_t i = 0; i < sizeof(bad_report) / sizeof(bad_report[0]); i++)
        check_bad(&bad_report[i], 100 + i);

    /* A status that is no object: policy refuses it, a writer starts anew. */
    json_object *o = J("[]");
    gq_quota_status st;
    gq_err err;
    assert_int_equal(gq_quota_status_decode(o, GQ_STATUS_POLICY, &st, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "status: must be an object, got array");
    st = decode_ok(o, GQ_STATUS_CHARGE);
    assert_encodes(&st, "{}");
    json_object_put(o);
}

/* Every list is bounded: one item past the cap fails (counted members) or
 * is left out (the others). */
static void test_decode_oversized(void **state)
{
    (void)state;
    json_object *o = json_object_new_object(), *arr = json_object_new_array();
    for (int i = 0; i <= GQ_CRD_MAX_RESERVATIONS; i++)
        json_object_array_add(arr, json_object_new_object());
    json_object_object_add(o, "reservations", arr);
    gq_quota_status st;
    gq_err err;
    assert_int_equal(gq_quota_status_decode(o, GQ_STATUS_CHARGE, &st, &err), GQ_ELIMIT);
    assert_string_equal(err.msg, "status.reservations: more than 65536 items");
    st = decode_ok(o, GQ_STATUS_SALVAGE);
    assert_int_equal(st.dropped, GQ_CRD_MAX_RESERVATIONS + 1);
    assert_false(st.has_reservations);
    gq_quota_status_dispose(&st);
    json_object_put(o);

    o = json_object_new_object();
    json_object *bm = json_object_new_object();
    for (int i = 0; i <= GQ_CRD_MAX_QUOTA_MODELS; i++) {
        char name[16];
        snprintf(name, sizeof name, "m%d", i);
        json_object_object_add(bm, name, json_object_new_object());
    }
    json_object_object_add(o, "usedByModel", bm);
    assert_int_equal(gq_quota_status_decode(o, GQ_STATUS_POLICY, &st, &err), GQ_ELIMIT);
    assert_string_equal(err.msg, "status.usedByModel: more than 32 models");
    st = decode_ok(o, GQ_STATUS_SALVAGE);
    assert_false(st.has_used_by_model);
    gq_quota_status_dispose(&st);
    json_object_put(o);

    static const struct {
        const char *member;
        int cap;
    } lists[] = {{"namespaces", GQ_CRD_MAX_NAMESPACES}, {"conditions", GQ_STATUS_MAX_CONDITIONS}};
    for (size_t l = 0; l < 2; l++) {
        o = json_object_new_object();
        arr = json_object_new_array();
        for (int i = 0; i <= lists[l].cap; i++)
            json_object_array_add(arr, J("{'namespace':'a','type':'A','status':'True'}"));
        json_object_object_add(o, lists[l].member, arr);
        st = decode_ok(o, GQ_STATUS_CHARGE);
        assert_false(st.has_namespaces || st.has_conditions);
        gq_quota_status_dispose(&st);
        json_object_array_del_idx(arr, 0, 1); /* at the cap: kept */
        st = decode_ok(o, GQ_STATUS_CHARGE);
        assert_true(st.has_namespaces || st.has_conditions);
        assert_int_equal(st.n_namespaces + st.n_conditions, (size_t)lists[l].cap);
        gq_quota_status_dispose(&st);
        json_object_put(o);
    }

    /* A condition's message may be long, within the CRD's bound. */
    char *msg = malloc(GQ_STATUS_MAX_MESSAGE + 2);
    memset(msg, 'm', GQ_STATUS_MAX_MESSAGE + 1);
    msg[GQ_STATUS_MAX_MESSAGE + 1] = '\0';
    o = J("{'conditions':[{'type':'A','status':'True'}]}");
    json_object *c = json_object_array_get_idx(json_object_object_get(o, "conditions"), 0);
    json_object_object_add(c, "message", json_object_new_string(msg));
    st = decode_ok(o, GQ_STATUS_CHARGE);
    assert_int_equal(st.n_conditions, 0);
    gq_quota_status_dispose(&st);
    msg[GQ_STATUS_MAX_MESSAGE] = '\0';
    json_object_object_add(c, "message", json_object_new_string(msg));
    st = decode_ok(o, GQ_STATUS_CHARGE);
    assert_int_equal(strlen(st.conditions[0].message), GQ_STATUS_MAX_MESSAGE);
    gq_quota_status_dispose(&st);
    json_object_put(o);
    free(msg);
}

/* ------------------------------------------------------------------------ */
/* The encoder                                                                */

/* A value built by hand encodes to fixed bytes, and decodes back to the
 * same value (the same bytes again); an empty list stays a list. */
static void test_encode_round_trip(void **state)
{
    (void)state;
    gq_quota_status st;
    gq_quota_status_init(&st);
    gq_err err;
    assert_encodes(&st, "{}");
    st.has_used = st.has_queued_pods = st.has_reservations = true;
    st.used.v[GQ_KEY_GPUS] = 3;
    st.used.set[GQ_KEY_GPUS] = true;
    assert_encodes(&st, "{\"used\":{\"gpus\":\"3\"},\"queuedPods\":0,\"reservations\":[]}");

    gq_reservation r = {.key = "k", .namespace_ = "a", .pod = "p", .expires = NOW + 60};
    gq_charge_from_cost(&(gq_pod_cost){.gpu_memory = GI, .gpu_pods = 1}, false, &r.amounts);
    assert_int_equal(gq_quota_status_add_reservation(&st, &r, NULL, &err), GQ_OK);
    gq_condition c = {.type = "Ready",
                      .status = "False",
                      .has_last_transition = true,
                      .last_transition = NOW,
                      .reason = "InvalidSpec",
                      .message = "spec.hard: x"};
    assert_int_equal(gq_quota_status_set_conditions(&st, &c, 1, &err), GQ_OK);
    gq_named_usage ns = {.name = "a", .used = st.used};
    assert_int_equal(gq_quota_status_set_namespaces(&st, &ns, 1, &err), GQ_OK);
    assert_encodes(&st,
                   "{\"used\":{\"gpus\":\"3\"},\"namespaces\":[{\"namespace\":\"a\",\"used\":{"
                   "\"gpus\":\"3\"}}],\"queuedPods\":0,\"reservations\":[" GOOD_TEXT
                   "],\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\","
                   "\"lastTransitionTime\":\"2026-11-21T15:06:05Z\",\"reason\":\"InvalidSpec\","
                   "\"message\":\"spec.hard: x\"}]}");
    gq_quota_status_dispose(&st);
}

/* A claim record charged on borrowed capacity says so, counted or not,
 * in every mode, and keeps it through an encode. */
static void test_claim_record_borrowing(void **state)
{
    (void)state;
    static const char *const want =
        "{\"reservations\":[{\"key\":\"c-1\",\"namespace\":\"a\",\"pod\":\"pair\","
        "\"gpu-memory\":\"8Gi\",\"gpu-pods\":\"0\",\"gpus\":\"1\",\"expires\":"
        "\"1970-01-01T00:00:00Z\",\"claim\":true,\"counted\":true,\"borrowing\":true}]}";
    json_object *o = J("{'reservations':[{'key':'c-1','namespace':'a','pod':'pair','gpu-memory':"
                       "'8Gi','gpus':'1','gpu-pods':'0','expires':'1970-01-01T00:00:00Z',"
                       "'claim':true,'counted':true,'borrowing':true}]}");
    for (int mode = GQ_STATUS_POLICY; mode <= GQ_STATUS_SALVAGE; mode++) {
        gq_quota_status st = decode_ok(o, (gq_status_mode)mode);
        const gq_reservation *r = gq_quota_status_find(&st, "c-1");
        assert_non_null(r);
        assert_true(r->claim && r->counted && r->borrowing);
        assert_encodes(&st, want);
        gq_quota_status_dispose(&st);
    }
    json_object_put(o);
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                 */

static gq_reservation resv(const char *key, int64_t expires, int64_t mem)
{
    gq_reservation r = {.key = (char *)key, .namespace_ = "a", .pod = "p-", .expires = expires};
    gq_charge_from_cost(&(gq_pod_cost){.gpu_memory = mem, .gpu_pods = 1}, false, &r.amounts);
    return r;
}

/* "k1 k2 ...": the keys of st's reservations in order. */
static const char *keys(const gq_quota_status *st)
{
    static char buf[256];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < st->n_reservations; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", i ? " " : "",
                                st->reservations[i].key);
    return buf;
}

static void test_add_remove(void **state)
{
    (void)state;
    gq_quota_status st;
    gq_quota_status_init(&st);
    gq_err err;
    bool added = false;
    gq_reservation a = resv("a", NOW + 30, GI), b = resv("b", NOW + 30, GI);
    assert_int_equal(gq_quota_status_add_reservation(&st, &a, &added, &err), GQ_OK);
    assert_true(added);
    assert_true(st.has_reservations);
    /* Same key again (a retried admission): nothing changes, even with
     * other amounts. */
    gq_reservation again = resv("a", NOW + 999, 8 * GI);
    assert_int_equal(gq_quota_status_add_reservation(&st, &again, &added, &err), GQ_OK);
    assert_false(added);
    assert_int_equal(gq_quota_status_find(&st, "a")->expires, NOW + 30);
    for (int i = 0; i < 20; i++) { /* grows past its first room */
        char k[8];
        snprintf(k, sizeof k, "k%d", i);
        gq_reservation r = resv(k, NOW + 30, GI);
        assert_int_equal(gq_quota_status_add_reservation(&st, &r, &added, &err), GQ_OK);
    }
    assert_int_equal(gq_quota_status_add_reservation(&st, &b, &added, &err), GQ_OK);
    assert_int_equal(st.n_reservations, 22);
    /* The copy is the status's own. */
    a.key = "changed";
    assert_non_null(gq_quota_status_find(&st, "a"));

    /* A rollback removes what a charge added, by key, and only that; the
     * others keep their order. */
    assert_true(gq_quota_status_remove_reservation(&st, "k3"));
    assert_false(gq_quota_status_remove_reservation(&st, "k3"));
    assert_false(gq_quota_status_remove_reservation(&st, NULL));
    assert_int_equal(st.n_reservations, 21);
    assert_string_equal(st.reservations[3].key, "k2");
    assert_string_equal(st.reservations[4].key, "k4");
    assert_true(gq_quota_status_remove_reservation(&st, "b")); /* the last */
    assert_true(gq_quota_status_remove_reservation(&st, "a")); /* the first */
    assert_string_equal(st.reservations[0].key, "k0");
    gq_quota_status_dispose(&st);

    /* Removing the only one leaves an empty list, which stays written. */
    gq_quota_status_init(&st);
    assert_int_equal(gq_quota_status_add_reservation(&st, &b, NULL, &err), GQ_OK);
    assert_true(gq_quota_status_remove_reservation(&st, "b"));
    assert_encodes(&st, "{\"reservations\":[]}");
    gq_quota_status_dispose(&st);
}

/* The list is full at GQ_CRD_MAX_RESERVATIONS: one more is refused, one
 * already there is still no change. */
static void test_add_full(void **state)
{
    (void)state;
    gq_quota_status st;
    gq_quota_status_init(&st);
    st.reservations = calloc(GQ_CRD_MAX_RESERVATIONS, sizeof(*st.reservations));
    assert_non_null(st.reservations);
    st.cap_reservations = GQ_CRD_MAX_RESERVATIONS;
    for (size_t i = 0; i < GQ_CRD_MAX_RESERVATIONS; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%zu", i);
        gq_reservation r = resv(k, NOW + 30, GI);
        assert_int_equal(gq_reservation_copy(&r, &st.reservations[i], NULL), GQ_OK);
        st.n_reservations++;
    }
    gq_reservation r = resv("one-more", NOW + 30, GI), old = resv("k7", NOW, GI);
    bool added = true;
    gq_err err;
    assert_int_equal(gq_quota_status_add_reservation(&st, &r, &added, &err), GQ_ELIMIT);
    assert_string_equal(err.msg, "status.reservations: more than 65536 reservations");
    assert_int_equal(gq_quota_status_add_reservation(&st, &old, &added, &err), GQ_OK);
    assert_false(added);
    gq_quota_status_dispose(&st);
}

static void test_drop_keep_take(void **state)
{
    (void)state;
    json_object *o = J(
        "{'used':{'gpu-memory':'10Gi','gpus':2},'reservations':[" RES("a", "4Gi", EXPIRED) "," RES(
            "b", "6Gi",
            LIVE) ",{'key':'corrupt'}," RES("c", "1Gi",
                                            "2026-11-21T15:06:04Z") ",{'key':'claim','namespace':'"
                                                                    "a','pod':'pair',"
                                                                    "'gpu-memory':'2Gi','gpus':'1',"
                                                                    "'gpu-pods':'0','expires':"
                                                                    "'1970-01-01T00:00:00Z','claim'"
                                                                    ":true,'counted':true}]}");
    gq_quota_status st = decode_ok(o, GQ_STATUS_CHARGE);
    json_object_put(o);
    assert_int_equal(st.dropped, 1); /* the corrupt record */
    gq_amounts sum;
    gq_err err;
    /* used plus the live records, the counted claim (in used) not again */
    assert_int_equal(gq_quota_status_sum(&st, NOW, &sum, &err), GQ_OK);
    assert_int_equal(sum.v[GQ_KEY_GPU_MEMORY], 16 * GI);
    assert_int_equal(sum.v[GQ_KEY_GPUS], 2);
    assert_int_equal(sum.v[GQ_KEY_GPU_PODS], 1);
    assert_true(sum.set[GQ_KEY_GPU_PODS]);
    /* expired at now: a (expires == now) and c; the counted claim never */
    assert_int_equal(gq_quota_status_drop_expired(&st, NOW), 2);
    assert_string_equal(keys(&st), "b claim");
    assert_int_equal(gq_quota_status_drop_expired(&st, NOW), 0);
    bool keep[] = {false, true};
    assert_int_equal(gq_quota_status_keep(&st, keep), 1);
    assert_string_equal(keys(&st), "claim");

    gq_quota_status dst;
    gq_quota_status_init(&dst);
    gq_reservation x = resv("x", NOW + 1, GI);
    assert_int_equal(gq_quota_status_add_reservation(&dst, &x, NULL, &err), GQ_OK);
    gq_quota_status_take_reservations(&dst, &st);
    assert_string_equal(keys(&dst), "claim");
    assert_int_equal(st.n_reservations, 0);
    assert_false(st.has_reservations);
    /* st keeps the rest */
    assert_int_equal(st.used.v[GQ_KEY_GPUS], 2);
    gq_quota_status_dispose(&dst);
    gq_quota_status_dispose(&st);

    /* The sum overflows: refused, never wrapped. */
    gq_quota_status_init(&st);
    st.used.v[GQ_KEY_GPU_MEMORY] = INT64_MAX;
    st.used.set[GQ_KEY_GPU_MEMORY] = true;
    assert_int_equal(gq_quota_status_add_reservation(&st, &x, NULL, &err), GQ_OK);
    assert_int_equal(gq_quota_status_sum(&st, NOW, &sum, &err), GQ_ERANGE);
    assert_string_equal(err.msg, "status: gpu-memory overflows");
    gq_quota_status_dispose(&st);
}

/* What a sum counts: a pod's own record skipped, and per model those of
 * the model and of unpinned pods. */
static void test_sum_filter(void **state)
{
    (void)state;
    gq_reservation r[3] = {resv("own", NOW + 5, GI), resv("h", NOW + 5, 2 * GI),
                           resv("any", NOW + 5, 4 * GI)};
    r[1].model = "h100-80gb";
    gq_amounts base, out;
    gq_amounts_clear(&base);
    gq_err err;
    gq_live_filter f = {.now = NOW, .skip_key = "own", .model = "a100-80gb", .what = "q"};
    assert_int_equal(gq_reservations_sum(&base, r, 3, &f, &out, &err), GQ_OK);
    assert_int_equal(out.v[GQ_KEY_GPU_MEMORY], 4 * GI);
    f.model = "h100-80gb";
    assert_int_equal(gq_reservations_sum(&base, r, 3, &f, &out, &err), GQ_OK);
    assert_int_equal(out.v[GQ_KEY_GPU_MEMORY], 6 * GI);
    f.skip_key = NULL;
    f.model = NULL;
    f.now = NOW + 5; /* all lapsed */
    assert_int_equal(gq_reservations_sum(&base, r, 3, &f, &out, &err), GQ_OK);
    assert_int_equal(out.v[GQ_KEY_GPU_MEMORY], 0);
}

/* Conditions, models and namespaces are replaced by copies; the
 * conditions may be given from the status itself. */
static void test_setters(void **state)
{
    (void)state;
    json_object *o = json_tokener_parse(FULL_STATUS);
    gq_quota_status st = decode_ok(o, GQ_STATUS_CHARGE);
    json_object_put(o);
    gq_err err;
    gq_condition c[2] = {*gq_quota_status_condition(&st, "Exceeded"),
                         *gq_quota_status_condition(&st, "Ready")};
    assert_int_equal(gq_quota_status_set_conditions(&st, c, 2, &err), GQ_OK);
    assert_string_equal(st.conditions[0].type, "Exceeded");
    assert_string_equal(st.conditions[1].reason, "Reconciled");
    gq_condition many[GQ_STATUS_MAX_CONDITIONS + 1];
    for (size_t i = 0; i <= GQ_STATUS_MAX_CONDITIONS; i++)
        many[i] = c[0];
    assert_int_equal(gq_quota_status_set_conditions(&st, many, GQ_STATUS_MAX_CONDITIONS + 1, &err),
                     GQ_ELIMIT);
    assert_int_equal(st.n_conditions, 2); /* unchanged */

    gq_named_usage m = {.name = "l4"};
    gq_amounts_clear(&m.used);
    assert_int_equal(gq_quota_status_set_models(&st, &m, 1, &err), GQ_OK);
    assert_int_equal(st.n_used_by_model, 1);
    assert_non_null(gq_quota_status_model_used(&st, "l4"));
    assert_null(gq_quota_status_model_used(&st, "a100-80gb"));
    assert_int_equal(gq_quota_status_set_namespaces(&st, NULL, 0, &err), GQ_OK);
    assert_true(st.has_namespaces);
    json_object *back = gq_quota_status_encode(&st);
    assert_non_null(strstr(text(back), "\"namespaces\":[]"));
    assert_non_null(strstr(text(back), "\"usedByModel\":{\"l4\":{}}"));
    json_object_put(back);
    gq_quota_status_dispose(&st);
}

/* A quota takes its status fields from a typed status, copied. */
static void test_quota_set_status(void **state)
{
    (void)state;
    gq_quota *q = Q(GQ("q", "a", HARD64 ",'models':{'a100-80gb':{'gpus':1},'l4':{'gpus':1}}",
                       "'used':{'gpus':1}"));
    json_object *o = json_tokener_parse(FULL_STATUS);
    gq_quota_status st = decode_ok(o, GQ_STATUS_CHARGE);
    json_object_put(o);
    gq_err err;
    assert_int_equal(gq_quota_set_status(q, &st, &err), GQ_OK);
    gq_quota_status_dispose(&st);
    assert_int_equal(q->used.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_int_equal(q->queued_pods, 2);
    assert_int_equal(q->n_reservations, 2);
    assert_string_equal(q->reservations[0].claims[0], "c-1");
    assert_int_equal(gq_quota_model_limit(q, "a100-80gb")->used.v[GQ_KEY_GPU_MEMORY], 8 * GI);
    assert_false(gq_quota_model_limit(q, "l4")->used.set[GQ_KEY_GPU_MEMORY]);
    gq_amounts in_use;
    assert_int_equal(gq_quota_in_use(q, NOW, NULL, &in_use, &err), GQ_OK);
    assert_int_equal(in_use.v[GQ_KEY_GPU_MEMORY], 24 * GI);
    /* An empty status empties them. */
    gq_quota_status_init(&st);
    assert_int_equal(gq_quota_set_status(q, &st, &err), GQ_OK);
    assert_int_equal(q->n_reservations, 0);
    assert_int_equal(q->queued_pods, 0);
    assert_false(q->used.set[GQ_KEY_GPUS]);
    gq_quota_free(q);

    /* The spec alone: a corrupt status does not stop it. */
    o = J(GQ("q", "a", HARD64, "'used':'lots','reservations':7"));
    assert_int_equal(gq_quota_parse(o, &q, &err), GQ_EINVAL);
    assert_int_equal(gq_quota_parse_spec(o, &q, &err), GQ_OK);
    assert_int_equal(q->n_reservations, 0);
    assert_int_equal(q->hard.v[GQ_KEY_GPU_MEMORY], 64 * GI);
    gq_quota_free(q);
    json_object_put(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_full),       cmocka_unit_test(test_json_want),
        cmocka_unit_test(test_decode_malformed),  cmocka_unit_test(test_decode_oversized),
        cmocka_unit_test(test_encode_round_trip), cmocka_unit_test(test_claim_record_borrowing),
        cmocka_unit_test(test_add_remove),        cmocka_unit_test(test_add_full),
        cmocka_unit_test(test_drop_keep_take),    cmocka_unit_test(test_sum_filter),
        cmocka_unit_test(test_setters),           cmocka_unit_test(test_quota_set_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
