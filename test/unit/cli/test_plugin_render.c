/* kubectl gpuquota rendering: bars, the top report and table, YAML. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/plugin.h"
#include "common/yamljson.h"

#define GI (1024LL * 1024 * 1024)
/* 2026-11-25T12:00:00Z */
#define NOW 1795608000LL

static void bars(void **state)
{
    (void)state;
    static const struct {
        int64_t used, pending, hard;
        const char *want;
    } cases[] = {
        {16 * GI, 0, 20 * GI, "[################....]"},
        {0, 0, 20 * GI, "[....................]"},
        {10, 5, 20, "[##########=====.....]"},
        {20, 0, 20, "[####################]"},
        /* over hard: full, and marked */
        {18, 4, 20, "[##################=!]"},
        {30, 0, 20, "[###################!]"},
        /* any non-zero part shows */
        {1, 1, 1000, "[#=..................]"},
        /* an explicit 0 blocks: anything used is over it */
        {0, 0, 0, "[....................]"},
        {1, 0, 0, "[###################!]"},
        /* no overflow at the extremes */
        {INT64_MAX, INT64_MAX, INT64_MAX, "[###################!]"},
        {INT64_C(1) << 61, 0, INT64_C(1) << 62, "[##########..........]"},
        {-5, -5, 10, "[....................]"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char b[CLI_BAR_WIDTH + 3];
        cli_render_bar(cases[i].used, cases[i].pending, cases[i].hard, b);
        if (strcmp(b, cases[i].want))
            fail_msg("bar %zu: got %s, want %s", i, b, cases[i].want);
    }
}

static json_object *parse(const char *text)
{
    json_object *o = json_tokener_parse(text);
    assert_non_null(o);
    return o;
}

static const char *get_str(json_object *o, const char *path)
{
    /* dotted path with numeric indexes for arrays */
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *t = strtok_r(buf, ".", &save); t; t = strtok_r(NULL, ".", &save)) {
        if (json_object_is_type(o, json_type_array))
            o = json_object_array_get_idx(o, (size_t)atoi(t));
        else if (!json_object_object_get_ex(o, t, &o))
            return NULL;
    }
    return json_object_get_string(o);
}

#define QUOTA                                                                                      \
    "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\","                              \
    "\"metadata\":{\"name\":\"team\",\"namespace\":\"a\"},"                                        \
    "\"spec\":{\"hard\":{\"gpu-memory\":\"20Gi\",\"gpu-pods\":\"5\"}},"                            \
    "\"status\":{\"used\":{\"gpu-memory\":\"8Gi\",\"gpu-pods\":\"1\"},\"reservations\":["          \
    "{\"key\":\"u1\",\"namespace\":\"a\",\"pod\":\"p1\",\"gpu-memory\":\"4Gi\",\"gpus\":\"0\","    \
    "\"gpu-pods\":\"1\",\"expires\":\"2026-11-25T12:05:00Z\"},"                                    \
    "{\"key\":\"u2\",\"namespace\":\"a\",\"pod\":\"p2\",\"gpu-memory\":\"6Gi\",\"gpus\":\"0\","    \
    "\"gpu-pods\":\"1\",\"expires\":\"2026-11-25T11:00:00Z\"}]}}"

#define TENANT                                                                                     \
    "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","                        \
    "\"metadata\":{\"name\":\"ml\"},"                                                              \
    "\"spec\":{\"namespaces\":[\"a\",\"b\"],\"hard\":{\"gpu-memory\":\"64Gi\"},"                   \
    "\"models\":{\"a100-80gb\":{\"gpu-memory\":\"48Gi\"}}},"                                       \
    "\"status\":{\"used\":{\"gpu-memory\":\"40Gi\"},\"queued\":{\"gpu-memory\":\"8Gi\"},"          \
    "\"namespaces\":[{\"namespace\":\"a\",\"used\":{\"gpu-memory\":\"8Gi\"}},"                     \
    "{\"namespace\":\"b\",\"used\":{\"gpu-memory\":\"32Gi\"}}],"                                   \
    "\"usedByModel\":{\"a100-80gb\":{\"gpu-memory\":\"40Gi\"}}}}"

static void report_and_table(void **state)
{
    (void)state;
    /* tenant first in input: the report orders GPUQuotas first */
    json_object *objs[3] = {parse(TENANT), parse(QUOTA),
                            parse("{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\","
                                  "\"metadata\":{\"name\":\"bad\",\"namespace\":\"c\"},"
                                  "\"spec\":{\"hard\":{\"gpu-memory\":\"-1\"}}}")};
    json_object *r = NULL;
    gq_err err;
    assert_int_equal(cli_top_report(objs, 3, NOW, &r, &err), GQ_OK);
    assert_string_equal(get_str(r, "quotas.0.kind"), "GPUQuota");
    assert_string_equal(get_str(r, "quotas.0.resources.0.resource"), "gpu-memory");
    assert_string_equal(get_str(r, "quotas.0.resources.0.used"), "8Gi");
    /* only the live reservation is reserved; the expired one is not */
    assert_string_equal(get_str(r, "quotas.0.resources.0.reserved"), "4Gi");
    assert_string_equal(get_str(r, "quotas.0.resources.0.percent"), "60");
    assert_null(get_str(r, "quotas.0.resources.0.queued"));
    assert_string_equal(get_str(r, "quotas.0.resources.1.resource"), "gpu-pods");
    assert_string_equal(get_str(r, "quotas.0.resources.1.reserved"), "1");
    assert_string_equal(get_str(r, "quotas.1.kind"), "GPUTenantQuota");
    assert_string_equal(get_str(r, "quotas.1.resources.0.queued"), "8Gi");
    assert_string_equal(get_str(r, "quotas.1.resources.0.percent"), "75");
    assert_string_equal(get_str(r, "quotas.1.namespaces.1.namespace"), "b");
    assert_string_equal(get_str(r, "quotas.1.models.0.model"), "a100-80gb");
    assert_int_equal(
        json_object_array_length(json_object_object_get(
            json_object_array_get_idx(json_object_object_get(r, "quotas"), 1), "models")),
        1);
    assert_non_null(strstr(get_str(r, "errors.0"), "c/bad: spec.hard.gpu-memory"));

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cli_render_top_table(f, r);
    fclose(f);
    const char *want = "KIND      QUOTA                  RESOURCE           USED   RESERVED     "
                       "QUEUED       HARD  USAGE\n"
                       "namespace a/team                 gpu-memory          8Gi        4Gi        "
                       "  -       20Gi  [########====........]  60%\n"
                       "                                 gpu-pods              1          1        "
                       "  -          5  [####====............]  40%\n"
                       "tenant    ml                     gpu-memory         40Gi          0        "
                       "8Gi       64Gi  [############===.....]  75%\n"
                       "            namespace a: gpu-memory=8Gi\n"
                       "            namespace b: gpu-memory=32Gi\n"
                       "            model a100-80gb: used gpu-memory=40Gi, hard gpu-memory=48Gi\n"
                       "unreadable quota c/bad: ";
    if (strncmp(text, want, strlen(want)))
        fprintf(stderr, "table:\n%s", text);
    assert_memory_equal(text, want, strlen(want));
    free(text);

    json_object_put(r);
    for (int i = 0; i < 3; i++)
        json_object_put(objs[i]);

    /* nothing at all */
    assert_int_equal(cli_top_report(NULL, 0, NOW, &r, &err), GQ_OK);
    f = open_memstream(&text, &len);
    cli_render_top_table(f, r);
    fclose(f);
    assert_string_equal(text, "No GPU quotas found.\n");
    free(text);
    json_object_put(r);
}

/* A cohort: what each quota and the tenant borrow and lend, in the report
 * and as BORROWED and LENT columns ("-" where the status says nothing). */
static void lending_columns(void **state)
{
    (void)state;
    json_object *objs[3] = {
        parse("{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\","
              "\"metadata\":{\"name\":\"team\",\"namespace\":\"a\"},\"spec\":{\"hard\":{"
              "\"gpu-memory\":\"16Gi\",\"gpu-pods\":\"4\"},\"borrowingLimit\":{\"gpu-memory\":"
              "\"16Gi\"}},\"status\":{\"used\":{\"gpu-memory\":\"24Gi\",\"gpu-pods\":\"3\"},"
              "\"borrowed\":{\"gpu-memory\":\"8Gi\",\"gpu-pods\":\"0\"},\"lent\":{"
              "\"gpu-memory\":\"0\",\"gpu-pods\":\"0\"}}}"),
        parse("{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\","
              "\"metadata\":{\"name\":\"team\",\"namespace\":\"b\"},\"spec\":{\"hard\":{"
              "\"gpu-memory\":\"16Gi\"}},\"status\":{\"used\":{\"gpu-memory\":\"0\"},"
              "\"lent\":{\"gpu-memory\":\"8Gi\"}}}"),
        parse("{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","
              "\"metadata\":{\"name\":\"ml\"},\"spec\":{\"namespaces\":[\"a\",\"b\"],"
              "\"hard\":{\"gpu-memory\":\"32Gi\"}},\"status\":{\"used\":{\"gpu-memory\":"
              "\"24Gi\"},\"borrowed\":{\"gpu-memory\":\"8Gi\"},\"lent\":{\"gpu-memory\":"
              "\"8Gi\"}}}"),
    };
    json_object *r = NULL;
    gq_err err;
    assert_int_equal(cli_top_report(objs, 3, NOW, &r, &err), GQ_OK);
    static const char *const members[][2] = {
        {"quotas.0.resources.0.borrowed", "8Gi"},
        {"quotas.0.resources.0.lent", "0"},
        {"quotas.0.resources.0.borrowedValue", "8589934592"},
        {"quotas.1.resources.0.lent", "8Gi"},
        {"quotas.2.resources.0.borrowed", "8Gi"},
        {"quotas.2.resources.0.lentValue", "8589934592"},
    };
    for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++)
        assert_string_equal(get_str(r, members[i][0]), members[i][1]);
    assert_null(get_str(r, "quotas.1.resources.0.borrowed")); /* b cannot borrow */

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cli_render_top_table(f, r);
    fclose(f);
    const char *want =
        "KIND      QUOTA                  RESOURCE           USED   RESERVED     QUEUED       HARD"
        "   BORROWED       LENT  USAGE\n"
        "namespace a/team                 gpu-memory         24Gi          0          -       16Gi"
        "        8Gi          0  [###################!] 150%\n"
        "                                 gpu-pods              3          0          -          4"
        "          0          0  [###############.....]  75%\n"
        "namespace b/team                 gpu-memory            0          0          -       16Gi"
        "          -        8Gi  [....................]   0%\n"
        "tenant    ml                     gpu-memory         24Gi          0          -       32Gi"
        "        8Gi        8Gi  [###############.....]  75%\n";
    if (strcmp(text, want))
        fprintf(stderr, "table:\n%s", text);
    assert_string_equal(text, want);
    free(text);
    json_object_put(r);
    for (int i = 0; i < 3; i++)
        json_object_put(objs[i]);
}

/* Status fields of the wrong shape are left out, never trusted or crashed on. */
static void odd_status(void **state)
{
    (void)state;
    static const char *const statuses[] = {
        "{\"queued\":\"lots\",\"models\":{},\"namespaces\":7}",
        "{\"queued\":{\"gpu-memory\":\"-1\"},\"models\":[1,{\"model\":2},{\"model\":\"x\","
        "\"used\":[]}],\"namespaces\":[null,{\"namespace\":\"a\",\"used\":\"x\"}]}",
        "[]",
        "{\"used\":{\"gpu-memory\":\"9223372036854775807\"},\"queued\":{\"gpu-memory\":"
        "\"9223372036854775807\"}}",
    };
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","
                 "\"metadata\":{\"name\":\"t\"},\"spec\":{\"namespaces\":[\"a\"],"
                 "\"hard\":{\"gpu-memory\":\"8Gi\"}},\"status\":%s}",
                 statuses[i]);
        json_object *obj = parse(text), *r = NULL;
        gq_err err;
        assert_int_equal(cli_top_report(&obj, 1, NOW, &r, &err), GQ_OK);
        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        cli_render_top_table(f, r);
        cli_render_yaml(f, r);
        fclose(f);
        assert_true(len > 0);
        /* either reported or refused as unreadable, never half-read */
        assert_true(strstr(out, "tenant    t") || strstr(out, "unreadable quota t"));
        assert_null(strstr(out, "model x"));
        free(out);
        json_object_put(r);
        json_object_put(obj);
    }
}

static void yaml(void **state)
{
    (void)state;
    json_object *v = parse("{\"a\":\"plain\",\"b\":\"true\",\"c\":\"8\",\"d\":\"x: y\",\"e\":\"\","
                           "\"f\":[],\"g\":{},\"h\":[{\"k\":1,\"l\":[\"-x\",null]},2.5],"
                           "\"i\":{\"j\":{\"k\":false}},\"m\":\"line\\nbreak\"}");
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cli_render_yaml(f, v);
    fclose(f);
    assert_string_equal(text, "a: plain\n"
                              "b: \"true\"\n"
                              "c: \"8\"\n"
                              "d: \"x: y\"\n"
                              "e: \"\"\n"
                              "f: []\n"
                              "g: {}\n"
                              "h:\n"
                              "  - k: 1\n"
                              "    l:\n"
                              "      - \"-x\"\n"
                              "      - null\n"
                              "  - 2.5\n"
                              "i:\n"
                              "  j:\n"
                              "    k: false\n"
                              "m: \"line\\nbreak\"\n");
    /* and it reads back as the same document */
    json_object **docs = NULL;
    size_t n = 0;
    gq_err err;
    assert_int_equal(gq_yaml_load(text, len, "out.yaml", &docs, &n, &err), GQ_OK);
    assert_int_equal(n, 1);
    assert_true(json_object_equal(docs[0], v));
    gq_yaml_docs_free(docs, n);
    free(text);
    json_object_put(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bars),
        cmocka_unit_test(report_and_table),
        cmocka_unit_test(lending_columns),
        cmocka_unit_test(odd_status),
        cmocka_unit_test(yaml),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
