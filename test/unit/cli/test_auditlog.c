/* cli/auditlog: both kinds of audit line, filters, summary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/auditlog.h"
#include "common/yamljson.h"

/* Line n (1-based) of test/data/audit/FILE, without its newline. */
static char *data_line(const char *file, int n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/audit/%s", GQ_TEST_DATA, file);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len = -1;
    for (int i = 0; i < n; i++)
        len = getline(&line, &cap, f);
    fclose(f);
    assert_true(len > 0);
    if (line[len - 1] == '\n')
        line[len - 1] = '\0';
    return line;
}

static void parse_ok(const char *file, int n, gq_audit_entry *e)
{
    char *line = data_line(file, n);
    gq_err err;
    gq_err_clear(&err);
    gq_code rc = cli_audit_parse_line(line, strlen(line), e, &err);
    if (rc)
        print_error("%s:%d: %s\n", file, n, err.msg);
    assert_int_equal(rc, GQ_OK);
    free(line);
}

typedef struct want {
    const char *file;
    int line;
    gq_audit_source source;
    const char *time, *uid, *webhook, *op, *ns, *name, *user;
    bool dry_run;
    gq_audit_decision decision;
    int code;
    const char *charge; /* "" for none */
    const char *reason;
    int64_t t;
} want;

static const want records[] = {
    {"gpuquota.log", 1, GQ_AUDIT_SRC_GPUQUOTA, "2026-11-21T15:02:12.123456Z",
     "b8f4c3a2-5d1e-4f6a-9c7b-2e8d0a1f3c64", "mutate", "CREATE", "team-a", "train-", "alice", false,
     GQ_AUDIT_ALLOWED, 0, "gpu-memory=16Gi,gpus=0,gpu-pods=1", NULL, 1795273332},
    {"gpuquota.log", 3, GQ_AUDIT_SRC_GPUQUOTA, "2026-11-21T15:10:00.000001Z",
     "c0ffee00-0000-4000-8000-000000000002", "validate", "CREATE", "team-a", "big", "bob", false,
     GQ_AUDIT_DENIED, 0, "gpu-memory=24Gi,gpus=0,gpu-pods=1",
     "exceeded quota: team-a, requested: gpu-memory=24Gi, used: gpu-memory=48Gi, limited: "
     "gpu-memory=64Gi",
     1795273800},
    {"gpuquota.log", 4, GQ_AUDIT_SRC_GPUQUOTA, "2026-11-21T15:20:00.000000Z",
     "c0ffee00-0000-4000-8000-000000000003", "validate", "CREATE", "ml-b", "b-16", "carol", true,
     GQ_AUDIT_ALLOWED, 0, "gpu-memory=16Gi,gpus=0,gpu-pods=1", NULL, 1795274400},
    {"gpuquota.log", 5, GQ_AUDIT_SRC_GPUQUOTA, "2026-11-21T15:30:00.000000Z",
     "c0ffee00-0000-4000-8000-000000000004", "mutate", "CREATE", "ml-b", "odd", "carol", false,
     GQ_AUDIT_DENIED, 0, "",
     "container \"c\": nvidia.com/gpu \"1.5\" is not valid, use a whole number", 1795275000},
    {"apiserver.log", 2, GQ_AUDIT_SRC_APISERVER, "2026-11-21T16:00:00.000000Z", "a1d1-0001",
     "validate", "CREATE", "team-a", "train-x7k2p", "alice", false, GQ_AUDIT_ALLOWED, 201,
     "gpu-memory=16Gi,gpus=0,gpu-pods=1", NULL, 1795276800},
    {"apiserver.log", 3, GQ_AUDIT_SRC_APISERVER, "2026-11-21T16:05:00.000000Z", "a1d1-0002",
     "validate", "CREATE", "team-a", "big", "bob", false, GQ_AUDIT_DENIED, 403,
     "gpu-memory=24Gi,gpus=0,gpu-pods=1",
     "exceeded quota: team-a, requested: gpu-memory=24Gi, used: gpu-memory=56Gi, limited: "
     "gpu-memory=64Gi",
     1795277100},
    {"apiserver.log", 4, GQ_AUDIT_SRC_APISERVER, "2026-11-21T16:10:00.000000Z", "a1d1-0003",
     "validate", "CREATE", "ml-b", "b-16", "carol", true, GQ_AUDIT_ALLOWED, 201,
     "gpu-memory=16Gi,gpus=0,gpu-pods=1", NULL, 1795277400},
    {"apiserver.log", 5, GQ_AUDIT_SRC_APISERVER, "2026-11-21T16:15:00.000000Z", "a1d1-0004",
     "validate", "CREATE", "ml-b", NULL, "carol", false, GQ_AUDIT_ERROR, 500, "",
     "Internal error occurred: failed calling webhook \"validate.gpuquota.io\": failed to call "
     "webhook: Post \"https://gpuquota-webhook.gpuquota-system.svc:443/validate?timeout=10s\": "
     "context deadline exceeded",
     1795277700},
    {"apiserver.log", 7, GQ_AUDIT_SRC_APISERVER, "2026-11-21T16:25:00.000000Z", "a1d1-0006",
     "validate", "UPDATE", "team-a", "train-1", "mallory", false, GQ_AUDIT_DENIED, 403, "",
     "changing gpuquota.io/ labels and annotations is reserved to gpuquota (label "
     "gpuquota.io/managed)",
     1795278300},
};

static void assert_str_or_null(const char *got, const char *want_s)
{
    if (!want_s)
        assert_null(got);
    else
        assert_string_equal(got, want_s);
}

static void test_parse_records(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(records) / sizeof(records[0]); i++) {
        const want *w = &records[i];
        gq_audit_entry e;
        parse_ok(w->file, w->line, &e);
        assert_int_equal(e.source, w->source);
        assert_str_or_null(e.time, w->time);
        assert_str_or_null(e.uid, w->uid);
        assert_str_or_null(e.webhook, w->webhook);
        assert_str_or_null(e.operation, w->op);
        assert_str_or_null(e.namespace_, w->ns);
        assert_str_or_null(e.name, w->name);
        assert_str_or_null(e.user, w->user);
        assert_int_equal(e.dry_run, w->dry_run);
        assert_int_equal(e.decision, w->decision);
        assert_int_equal(e.code, w->code);
        assert_str_or_null(e.reason, w->reason);
        assert_true(e.has_time);
        assert_int_equal(e.t, w->t);
        char charge[128];
        cli_audit_charge_text(&e, charge, sizeof(charge));
        assert_string_equal(charge, w->charge);
        gq_audit_entry_dispose(&e);
    }
}

typedef struct bad_line {
    const char *text;
    gq_code code;
} bad_line;

static void test_parse_errors(void **state)
{
    (void)state;
    static const bad_line bad[] = {
        {"not json at all", GQ_EINVAL},
        {"{\"truncated\":", GQ_EINVAL},
        {"", GQ_EINVAL},
        {"[1,2]", GQ_ENOTFOUND},
        {"null", GQ_ENOTFOUND},
        {"{\"level\":\"info\",\"msg\":\"listening\"}", GQ_ENOTFOUND},
        {"{\"webhook\":\"validate\",\"decision\":\"maybe\"}", GQ_EINVAL},
        {"{\"webhook\":\"validate\",\"decision\":\"allowed\",\"dryRun\":\"yes\"}", GQ_EINVAL},
        {"{\"webhook\":\"validate\",\"decision\":\"allowed\",\"user\":7}", GQ_EINVAL},
        {"{\"webhook\":\"validate\",\"decision\":\"allowed\",\"charge\":{\"cpu\":\"1\"}}",
         GQ_EINVAL},
        {"{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"stage\":\"RequestReceived\"}",
         GQ_ENOTFOUND},
        {"{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"stage\":\"ResponseComplete\","
         "\"annotations\":{\"authorization.k8s.io/decision\":\"allow\"}}",
         GQ_ENOTFOUND},
        /* Another webhook's denial is not ours. */
        {"{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"responseStatus\":{\"code\":403,"
         "\"message\":\"admission webhook \\\"x.example.com\\\" denied the request: no\"}}",
         GQ_ENOTFOUND},
        {"{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"annotations\":[]}", GQ_EINVAL},
        {"{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/"
         "v1\",\"responseStatus\":{\"code\":\"403\"},"
         "\"annotations\":{\"validate.gpuquota.io/decision\":\"denied\"}}",
         GQ_EINVAL},
        {"{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"user\":{\"username\":1},"
         "\"annotations\":{\"validate.gpuquota.io/decision\":\"denied\"}}",
         GQ_EINVAL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gq_audit_entry e;
        memset(&e, 0xa5, sizeof(e));
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = cli_audit_parse_line(bad[i].text, strlen(bad[i].text), &e, &err);
        if (rc != bad[i].code)
            print_error("case %zu: got %d\n", i, rc);
        assert_int_equal(rc, bad[i].code);
        assert_int_equal(err.code, bad[i].code);
        assert_true(err.msg[0] != '\0');
        assert_int_equal(e.code, (int)0xa5a5a5a5); /* untouched */
    }
    /* A line over the cap is refused before parsing. */
    gq_audit_entry e;
    gq_err err;
    assert_int_equal(cli_audit_parse_line("{}", CLI_AUDIT_LINE_MAX + 1, &e, &err), GQ_ELIMIT);
}

static void test_parse_mutation_annotation_and_crlf(void **state)
{
    (void)state;
    /* Only the generic mutation annotation names our webhook; "\r\n" line. */
    const char *line =
        "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"stage\":\"ResponseComplete\","
        "\"auditID\":\"x\",\"verb\":\"deletecollection\",\"annotations\":{\"mutation.webhook."
        "admission.k8s.io/round_1_index_2\":\"{\\\"configuration\\\":\\\"gpuquota\\\","
        "\\\"webhook\\\":\\\"mutate.gpuquota.io\\\",\\\"mutated\\\":false}\"},"
        "\"responseStatus\":{\"code\":200}}\r";
    gq_audit_entry e;
    gq_err err;
    assert_int_equal(cli_audit_parse_line(line, strlen(line), &e, &err), GQ_OK);
    assert_string_equal(e.webhook, "mutate");
    assert_string_equal(e.operation, "DELETE");
    assert_int_equal(e.decision, GQ_AUDIT_ALLOWED);
    assert_false(e.has_time);
    assert_false(e.has_charge);
    gq_audit_entry_dispose(&e);
}

/* `kubectl logs --prefix [--timestamps]` of the webhook pods: the prefix and
 * the time are passed over; a log line beside the records is no record; a
 * prefix before something that is not JSON leaves the line as it is. */
static void test_parse_kubectl_logs(void **state)
{
    (void)state;
    static const char *const lines[] = {
        "[pod/gpuquota-webhook-7c9f/webhook] {\"webhook\":\"validate\",\"decision\":\"denied\","
        "\"uid\":\"u1\",\"reason\":\"exceeded quota\"}",
        "[pod/gpuquota-webhook-7c9f/webhook] 2026-11-28T10:00:00.123456789Z {\"webhook\":"
        "\"mutate\",\"decision\":\"allowed\",\"uid\":\"u2\"}",
        "2026-11-28T10:00:00Z {\"webhook\":\"mutate\",\"decision\":\"allowed\",\"uid\":\"u3\"}",
    };
    static const char *const uids[] = {"u1", "u2", "u3"};
    for (size_t i = 0; i < 3; i++) {
        gq_audit_entry e;
        gq_err err;
        assert_int_equal(cli_audit_parse_line(lines[i], strlen(lines[i]), &e, &err), GQ_OK);
        assert_string_equal(e.uid, uids[i]);
        gq_audit_entry_dispose(&e);
    }
    static const char *const not_records[] = {
        "[pod/gpuquota-webhook-7c9f/webhook] {\"level\":\"info\",\"msg\":\"listening\"}",
    };
    gq_audit_entry e;
    gq_err err;
    assert_int_equal(cli_audit_parse_line(not_records[0], strlen(not_records[0]), &e, &err),
                     GQ_ENOTFOUND);
    static const char *const bad[] = {"[pod/x/y] not json", "[pod with space] {}", "[unclosed {}"};
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(cli_audit_parse_line(bad[i], strlen(bad[i]), &e, &err), GQ_EINVAL);
}

typedef struct since_case {
    const char *text;
    gq_code code;
    int64_t want;
} since_case;

static void test_since(void **state)
{
    (void)state;
    const int64_t now = 1795276800; /* 2026-11-21T16:00:00Z */
    static const since_case cases[] = {
        {"90m", GQ_OK, 1795276800 - 5400},
        {"2h", GQ_OK, 1795276800 - 7200},
        {"7d", GQ_OK, 1795276800 - 604800},
        {"1h30m", GQ_OK, 1795276800 - 5400},
        {"45s", GQ_OK, 1795276800 - 45},
        {"2026-11-21T15:00:00Z", GQ_OK, 1795273200},
        {"2026-11-21T17:00:00+02:00", GQ_OK, 1795273200},
        {"", GQ_EINVAL, 0},
        {"90", GQ_EINVAL, 0},
        {"m", GQ_EINVAL, 0},
        {"2w", GQ_EINVAL, 0},
        {"-5m", GQ_EINVAL, 0},
        {"2026-13-01T00:00:00Z", GQ_EINVAL, 0},
        {"99999999999999999999d", GQ_ERANGE, 0},
        {"999999999999999d", GQ_ERANGE, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t out = -1;
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = cli_audit_parse_since(cases[i].text, now, &out, &err);
        if (rc != cases[i].code)
            print_error("case %s: got %d\n", cases[i].text, rc);
        assert_int_equal(rc, cases[i].code);
        if (rc == GQ_OK) {
            assert_int_equal(out, cases[i].want);
        } else {
            assert_int_equal(out, -1);
            assert_true(err.msg[0] != '\0');
        }
    }
}

typedef struct filter_case {
    const char *name;
    cli_audit_filter f;
    const char *want; /* line numbers of gpuquota.log that match, e.g. "1,2" */
} filter_case;

static void test_filters(void **state)
{
    (void)state;
    /* The tenant of state.yaml: ml-b is labelled team=ml, team-a is not. */
    char path[512];
    snprintf(path, sizeof(path), "%s/audit/state.yaml", GQ_TEST_DATA);
    FILE *sf = fopen(path, "rb");
    assert_non_null(sf);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof(buf), sf);
    fclose(sf);
    json_object **docs = NULL;
    size_t n_docs = 0;
    assert_int_equal(gq_yaml_load(buf, n, "state.yaml", &docs, &n_docs, NULL), GQ_OK);
    assert_int_equal(n_docs, 3);
    gq_quota *tenant = NULL;
    assert_int_equal(gq_quota_parse(docs[2], &tenant, NULL), GQ_OK);
    json_object *meta = NULL, *labels = NULL;
    assert_true(json_object_object_get_ex(docs[0], "metadata", &meta));
    assert_true(json_object_object_get_ex(meta, "labels", &labels));
    const char *ns_names[] = {"ml-b", "team-a"};
    json_object *ns_labels[] = {labels, NULL};

    filter_case cases[] = {
        {"none", {0}, "1,2,3,4,5,6,7"},
        {"namespace", {.namespace_ = "ml-b"}, "4,5,6"},
        {"user", {.user = "bob"}, "3"},
        {"webhook", {.webhook = "mutate"}, "1,5"},
        {"denied", {.denied_only = true}, "3,5,7"},
        {"since", {.has_since = true, .since = 1795274400}, "4,5,6,7"},
        {"since+denied", {.has_since = true, .since = 1795274400, .denied_only = true}, "5,7"},
        {"tenant",
         {.tenant = tenant, .ns_names = ns_names, .ns_labels = ns_labels, .n_ns = 2},
         "4,5,6"},
        {"tenant, no state for ns", {.tenant = tenant}, ""},
        {"nobody", {.user = "zed"}, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char got[64] = "";
        size_t len = 0;
        for (int l = 1; l <= 7; l++) {
            gq_audit_entry e;
            parse_ok("gpuquota.log", l, &e);
            if (cli_audit_matches(&e, &cases[i].f))
                len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%d", len ? "," : "", l);
            gq_audit_entry_dispose(&e);
        }
        if (strcmp(got, cases[i].want))
            print_error("filter %s: got %s\n", cases[i].name, got);
        assert_string_equal(got, cases[i].want);
    }
    gq_quota_free(tenant);
    gq_yaml_docs_free(docs, n_docs);
}

static void test_json(void **state)
{
    (void)state;
    static const struct {
        const char *file;
        int line;
        const char *json;
    } cases[] = {
        {"gpuquota.log", 3,
         "{\"source\":\"gpuquota\",\"time\":\"2026-11-21T15:10:00.000001Z\",\"uid\":\"c0ffee00-"
         "0000-4000-8000-000000000002\",\"webhook\":\"validate\",\"operation\":\"CREATE\","
         "\"namespace\":\"team-a\",\"name\":\"big\",\"user\":\"bob\",\"dryRun\":false,"
         "\"decision\":\"denied\",\"reason\":\"exceeded quota: team-a, requested: "
         "gpu-memory=24Gi, used: gpu-memory=48Gi, limited: gpu-memory=64Gi\",\"charge\":{"
         "\"gpu-memory\":\"24Gi\",\"gpu-pods\":\"1\",\"gpus\":\"0\"}}"},
        {"apiserver.log", 5,
         "{\"source\":\"kube-apiserver\",\"time\":\"2026-11-21T16:15:00.000000Z\",\"uid\":"
         "\"a1d1-0004\",\"webhook\":\"validate\",\"operation\":\"CREATE\",\"namespace\":\"ml-b\","
         "\"name\":null,\"user\":\"carol\",\"dryRun\":false,\"decision\":\"error\",\"reason\":"
         "\"Internal error occurred: failed calling webhook \\\"validate.gpuquota.io\\\": failed "
         "to call webhook: Post \\\"https://gpuquota-webhook.gpuquota-system.svc:443/"
         "validate?timeout=10s\\\": context deadline exceeded\",\"code\":500}"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gq_audit_entry e;
        parse_ok(cases[i].file, cases[i].line, &e);
        gq_buf b;
        gq_buf_init(&b, CLI_AUDIT_JSON_MAX);
        cli_audit_entry_to_json(&e, &b);
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(gq_buf_finish(&b, &text, &len), GQ_OK);
        assert_string_equal(text, cases[i].json);
        free(text);
        gq_audit_entry_dispose(&e);
    }
}

static void test_summary(void **state)
{
    (void)state;
    cli_audit_summary s;
    cli_audit_summary_init(&s);
    for (int l = 1; l <= 7; l++) {
        gq_audit_entry e;
        parse_ok("gpuquota.log", l, &e);
        assert_int_equal(cli_audit_summary_add(&s, &e), GQ_OK);
        gq_audit_entry_dispose(&e);
    }
    for (int l = 2; l <= 5; l++) { /* the Events, the error among them */
        gq_audit_entry e;
        parse_ok("apiserver.log", l, &e);
        assert_int_equal(cli_audit_summary_add(&s, &e), GQ_OK);
        gq_audit_entry_dispose(&e);
    }
    cli_audit_summary_finish(&s);
    assert_int_equal(s.n_ns, 2);
    const cli_audit_ns_summary *ml = &s.ns[0], *ta = &s.ns[1];
    assert_string_equal(ml->namespace_, "ml-b");
    assert_int_equal(ml->admitted, 3); /* dry run 15:20, b-8, Event dry run */
    assert_int_equal(ml->denied, 1);
    assert_int_equal(ml->errors, 1);
    assert_int_equal(ml->charged_bytes, 8LL << 30); /* dry runs are never charged */
    assert_int_equal(ml->n_reasons, 1);
    assert_string_equal(ml->reasons[0].text,
                        "container \"c\": nvidia.com/gpu \"1.5\" is not valid");

    assert_string_equal(ta->namespace_, "team-a");
    assert_int_equal(ta->admitted, 3); /* mutate + validate of train-, the Event */
    assert_int_equal(ta->denied, 3);
    assert_int_equal(ta->errors, 0);
    assert_int_equal(ta->charged_bytes, 32LL << 30); /* validate record + Event; not mutate */
    assert_int_equal(ta->n_reasons, 2);
    assert_string_equal(ta->reasons[0].text, "exceeded quota: team-a");
    assert_int_equal(ta->reasons[0].count, 2);
    assert_string_equal(ta->reasons[1].text,
                        "changing gpuquota.io/ labels and annotations is reserved to gpuquota "
                        "(label gpuquota.io/managed)");
    assert_int_equal(ta->reasons[1].count, 1);

    assert_int_equal(s.total.admitted, 6);
    assert_int_equal(s.total.denied, 4);
    assert_int_equal(s.total.errors, 1);
    assert_int_equal(s.total.charged_bytes, 40LL << 30);
    assert_int_equal(s.total.n_reasons, 3);
    assert_string_equal(s.total.reasons[0].text, "exceeded quota: team-a");
    cli_audit_summary_dispose(&s);
    cli_audit_summary_dispose(NULL);
    gq_audit_entry_dispose(NULL);
}

static void test_summary_reason_cap(void **state)
{
    (void)state;
    cli_audit_summary s;
    cli_audit_summary_init(&s);
    char reason[32];
    for (int i = 0; i < CLI_AUDIT_REASONS_MAX + 3; i++) {
        gq_audit_entry e = {0};
        snprintf(reason, sizeof(reason), "reason %03d, detail", i);
        e.reason = reason;
        e.decision = GQ_AUDIT_DENIED;
        assert_int_equal(cli_audit_summary_add(&s, &e), GQ_OK);
    }
    cli_audit_summary_finish(&s);
    assert_int_equal(s.n_ns, 1);
    assert_string_equal(s.ns[0].namespace_, "");
    assert_int_equal(s.ns[0].n_reasons, CLI_AUDIT_REASONS_MAX);
    assert_int_equal(s.ns[0].other_reasons, 3);
    assert_string_equal(s.ns[0].reasons[0].text, "reason 000");
    cli_audit_summary_dispose(&s);
}

static void test_summary_reason_groups(void **state)
{
    (void)state;
    static const struct {
        const char *reason, *group;
    } cases[] = {
        {"exceeded tenant quota: ml, requested: gpu-memory=24Gi", "exceeded tenant quota: ml"},
        {"must be in (0, 1] (for example \"0.5\"); ask for whole GPUs, please",
         "must be in (0, 1] (for example \"0.5\"); ask for whole GPUs"},
        {"value \"a, b\" is bad, really", "value \"a, b\" is bad"},
        {"[a, b]", "[a, b]"},
        {"unbalanced ) here, cut", "unbalanced ) here"},
        {"no comma at all", "no comma at all"},
        {NULL, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cli_audit_summary s;
        cli_audit_summary_init(&s);
        gq_audit_entry e = {0};
        e.reason = (char *)cases[i].reason;
        e.decision = GQ_AUDIT_DENIED;
        assert_int_equal(cli_audit_summary_add(&s, &e), GQ_OK);
        assert_int_equal(s.ns[0].n_reasons, 1);
        assert_string_equal(s.ns[0].reasons[0].text, cases[i].group);
        cli_audit_summary_dispose(&s);
    }
    /* A long reason is cut to the group size. */
    char longr[300];
    memset(longr, 'x', sizeof(longr) - 1);
    longr[sizeof(longr) - 1] = '\0';
    cli_audit_summary s;
    cli_audit_summary_init(&s);
    gq_audit_entry e = {0};
    e.reason = longr;
    e.decision = GQ_AUDIT_DENIED;
    assert_int_equal(cli_audit_summary_add(&s, &e), GQ_OK);
    assert_int_equal(strlen(s.ns[0].reasons[0].text), CLI_AUDIT_REASON_KEY_MAX - 1);
    cli_audit_summary_dispose(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_records),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_mutation_annotation_and_crlf),
        cmocka_unit_test(test_parse_kubectl_logs),
        cmocka_unit_test(test_since),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_summary),
        cmocka_unit_test(test_summary_reason_cap),
        cmocka_unit_test(test_summary_reason_groups),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
