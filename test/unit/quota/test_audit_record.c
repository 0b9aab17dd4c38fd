/* quota/audit_record: what the webhook writes, the reader reads back, field
 * by field, through the schema's own parser and through `gpuquota audit`'s
 * line reader (cli/auditlog). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quota/audit_record.h"
#include "cli/auditlog.h"
#include "common/jsonutil.h"

static json_object *tree(const char *text)
{
    json_object *o = NULL;
    assert_int_equal(gq_json_parse(text, strlen(text), GQ_JSON_DEFAULT_DEPTH, &o, NULL), GQ_OK);
    return o;
}

/* Every field set, with text that needs escaping. */
typedef struct sample {
    json_object *request, *rewrite, *charge, *quotas;
    gq_audit_record rec;
} sample;

static void sample_init(sample *s, const char *decision, bool dry_run)
{
    s->request = tree("{\"containers\":[{\"name\":\"c\",\"nvidia.com/gpu\":\"1\"}]}");
    s->rewrite = tree("[{\"op\":\"add\",\"path\":\"/metadata/labels/a~1b\",\"value\":\"x\"}]");
    s->charge = tree("{\"gpu-memory\":\"16Gi\",\"gpus\":\"1\",\"gpu-pods\":\"1\"}");
    s->quotas = tree("[{\"namespace\":\"team-a\",\"name\":\"q\"}]");
    s->rec = (gq_audit_record){
        .time_us = 1763737332123456, /* 2025-11-21T15:02:12.123456Z */
        .uid = "b8f4-\"quoted\"",
        .webhook = "validate",
        .operation = "CREATE",
        .namespace_ = "team-a",
        .name = "train-\u00e9\n",
        .user = "system:serviceaccount:ci:bot\\x",
        .dry_run = dry_run,
        .decision = decision,
        .reason = "exceeded quota: team-a, requested: gpu-memory=16Gi",
        .request = s->request,
        .rewrite = s->rewrite,
        .charge = s->charge,
        .quotas = s->quotas,
        .latency_ms = 1.164,
    };
}

static void sample_dispose(sample *s)
{
    json_object_put(s->request);
    json_object_put(s->rewrite);
    json_object_put(s->charge);
    json_object_put(s->quotas);
}

static char *format(const gq_audit_record *rec)
{
    char *line = NULL;
    size_t len = 0;
    assert_int_equal(gq_audit_record_format(rec, &line, &len), GQ_OK);
    assert_int_equal(strlen(line), len);
    assert_null(memchr(line, '\n', len));
    return line;
}

static void assert_amount(const gq_audit_entry *e, gq_qkey k, const char *want)
{
    char buf[GQ_QUANTITY_STR_MAX];
    gq_amount_format(&e->charge, k, buf);
    assert_string_equal(buf, want);
}

/* The fields both readers return. */
static void assert_common(const gq_audit_entry *e, const gq_audit_record *rec,
                          gq_audit_decision decision)
{
    assert_int_equal(e->source, GQ_AUDIT_SRC_GPUQUOTA);
    assert_string_equal(e->time, "2025-11-21T15:02:12.123456Z");
    assert_true(e->has_time);
    assert_int_equal(e->t, rec->time_us / 1000000);
    assert_string_equal(e->uid, rec->uid);
    assert_string_equal(e->webhook, rec->webhook);
    assert_string_equal(e->operation, rec->operation);
    assert_string_equal(e->namespace_, rec->namespace_);
    assert_string_equal(e->name, rec->name);
    assert_string_equal(e->user, rec->user);
    assert_int_equal(e->dry_run, rec->dry_run);
    assert_int_equal(e->decision, decision);
    assert_string_equal(gq_audit_decision_name(e->decision), rec->decision);
    assert_string_equal(e->reason, rec->reason);
    assert_int_equal(e->code, 0);
    assert_true(e->has_charge);
    assert_amount(e, GQ_KEY_GPU_MEMORY, "16Gi");
    assert_amount(e, GQ_KEY_GPUS, "1");
    assert_amount(e, GQ_KEY_GPU_PODS, "1");
}

static void test_round_trip_every_field(void **state)
{
    (void)state;
    static const struct {
        const char *decision;
        gq_audit_decision want;
        bool dry_run;
    } cases[] = {{"allowed", GQ_AUDIT_ALLOWED, false},
                 {"denied", GQ_AUDIT_DENIED, true},
                 {"error", GQ_AUDIT_ERROR, false}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sample s;
        sample_init(&s, cases[i].decision, cases[i].dry_run);
        char *line = format(&s.rec);

        /* The schema's parser: every field, trees included. */
        json_object *root = tree(line);
        gq_audit_entry e;
        memset(&e, 0, sizeof(e));
        gq_err err;
        gq_err_clear(&err);
        assert_int_equal(gq_audit_record_parse(root, &e, &err), GQ_OK);
        assert_common(&e, &s.rec, cases[i].want);
        assert_true(json_object_equal(e.request, s.request));
        assert_true(json_object_equal(e.rewrite, s.rewrite));
        assert_true(json_object_equal(e.quotas, s.quotas));
        assert_true(e.has_latency);
        assert_true(e.latency_ms == 1.164);
        json_object_put(root); /* the entry keeps its own references */
        assert_non_null(json_object_get_array(e.quotas));
        gq_audit_entry_dispose(&e);

        /* `gpuquota audit`'s line reader: the same record, bulky trees
         * skipped. */
        memset(&e, 0, sizeof(e));
        assert_int_equal(cli_audit_parse_line(line, strlen(line), &e, &err), GQ_OK);
        assert_common(&e, &s.rec, cases[i].want);
        assert_null(e.request);
        assert_null(e.rewrite);
        assert_null(e.quotas);
        gq_audit_entry_dispose(&e);
        free(line);
        sample_dispose(&s);
    }
}

/* Absent optional fields stay absent on the way back. */
static void test_round_trip_minimal(void **state)
{
    (void)state;
    gq_audit_record rec = {.time_us = 0, .webhook = "mutate", .decision = "allowed"};
    char *line = format(&rec);
    assert_string_equal(line, "{\"time\":\"1970-01-01T00:00:00.000000Z\",\"uid\":null,"
                              "\"webhook\":\"mutate\",\"operation\":null,\"namespace\":null,"
                              "\"name\":null,\"user\":null,\"dryRun\":false,"
                              "\"decision\":\"allowed\",\"latencyMs\":0.000}");
    json_object *root = tree(line);
    gq_audit_entry e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(gq_audit_record_parse(root, &e, NULL), GQ_OK);
    assert_true(e.has_time);
    assert_int_equal(e.t, 0);
    assert_null(e.uid);
    assert_null(e.operation);
    assert_null(e.namespace_);
    assert_null(e.name);
    assert_null(e.user);
    assert_null(e.reason);
    assert_false(e.has_charge);
    assert_null(e.request);
    assert_null(e.rewrite);
    assert_null(e.quotas);
    assert_true(e.has_latency);
    assert_true(e.latency_ms == 0);
    assert_int_equal(e.decision, GQ_AUDIT_ALLOWED);
    gq_audit_entry_dispose(&e);
    json_object_put(root);
    free(line);
}

/* Fields of the wrong type are named in the error. */
static void test_parse_wrong_types(void **state)
{
    (void)state;
    static const struct {
        const char *line, *msg;
    } cases[] = {
        {"{\"webhook\":\"mutate\",\"decision\":\"maybe\"}",
         "decision: not allowed, denied or error"},
        {"{\"webhook\":\"mutate\",\"decision\":\"allowed\",\"dryRun\":\"yes\"}",
         "dryRun: not a boolean"},
        {"{\"webhook\":\"mutate\",\"decision\":\"allowed\",\"latencyMs\":\"1\"}",
         "latencyMs: not a number"},
        {"{\"webhook\":\"mutate\",\"decision\":\"allowed\",\"uid\":7}", "uid: not a string"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *root = tree(cases[i].line);
        gq_audit_entry e;
        memset(&e, 0, sizeof(e));
        gq_err err;
        gq_err_clear(&err);
        assert_int_equal(gq_audit_record_parse(root, &e, &err), GQ_EINVAL);
        assert_string_equal(err.msg, cases[i].msg);
        gq_audit_entry_dispose(&e);
        json_object_put(root);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_field),
        cmocka_unit_test(test_round_trip_minimal),
        cmocka_unit_test(test_parse_wrong_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
