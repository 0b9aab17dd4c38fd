/* gq_config_parse over the files in test/data/config/{good,bad}, limits
 * that need generated input, and the gq_config_to_yaml round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "quota/config.h"

#define GI ((int64_t)1 << 30)
#define MI ((int64_t)1 << 20)

static char *read_data(const char *rel, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/config/%s", GQ_TEST_DATA, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = malloc(1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

/* Parse test/data/config/<rel>, naming it by its base name in messages. */
static gq_code parse_file(const char *rel, gq_config **out, gq_err *err)
{
    size_t len;
    char *buf = read_data(rel, &len);
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    gq_code rc = gq_config_parse(buf, len, base, out, err);
    free(buf);
    return rc;
}

static gq_config *parse_ok(const char *rel)
{
    gq_config *cfg = NULL;
    gq_err err = {0};
    if (parse_file(rel, &cfg, &err))
        fail_msg("%s: %s", rel, err.msg);
    return cfg;
}

/* ---- deep equality, for defaults and round trips ---------------------- */

static bool str_eq(const char *a, const char *b)
{
    return (!a || !*a) ? (!b || !*b) : (b && !strcmp(a, b));
}

static void assert_strv_equal(char *const *a, size_t na, char *const *b, size_t nb)
{
    assert_int_equal(na, nb);
    for (size_t i = 0; i < na; i++)
        assert_string_equal(a[i], b[i]);
}

static void assert_config_equal(const gq_config *a, const gq_config *b)
{
    assert_int_equal(a->backend, b->backend);
    assert_int_equal(a->memory_unit, b->memory_unit);
    assert_true(str_eq(a->scheduler_name, b->scheduler_name));
    assert_true(str_eq(a->default_model, b->default_model));
    assert_int_equal(a->require_quota, b->require_quota);
    assert_strv_equal(a->exempt_namespaces, a->n_exempt_namespaces, b->exempt_namespaces,
                      b->n_exempt_namespaces);
    assert_true(str_eq(a->audit.path, b->audit.path));
    assert_int_equal(a->audit.max_size, b->audit.max_size);
    assert_int_equal(a->audit.max_files, b->audit.max_files);
    assert_int_equal(a->n_models, b->n_models);
    for (size_t i = 0; i < a->n_models; i++) {
        const gq_model *x = &a->models[i], *y = &b->models[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->memory, y->memory);
        assert_strv_equal(x->products, x->n_products, y->products, y->n_products);
        assert_int_equal(x->n_mig, y->n_mig);
        for (size_t j = 0; j < x->n_mig; j++) {
            assert_string_equal(x->mig[j].name, y->mig[j].name);
            assert_int_equal(x->mig[j].slices, y->mig[j].slices);
            assert_int_equal(x->mig[j].memory, y->mig[j].memory);
        }
    }
}

/* ---- good files -------------------------------------------------------- */

static void empty_inputs_are_defaults(void **state)
{
    (void)state;
    static const char *const files[] = {"good/empty.yaml", "good/comments-only.yaml",
                                        "good/null-document.yaml"};
    gq_config *def = NULL;
    gq_err err = {0};
    assert_int_equal(gq_config_default(&def, &err), GQ_OK);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        gq_config *cfg = parse_ok(files[i]);
        assert_config_equal(cfg, def);
        gq_config_free(cfg);
    }
    /* a zero-length buffer with no backing string at all */
    gq_config *cfg = NULL;
    assert_int_equal(gq_config_parse("", 0, NULL, &cfg, &err), GQ_OK);
    assert_config_equal(cfg, def);
    gq_config_free(cfg);
    gq_config_free(def);
}

static void full_file(void **state)
{
    (void)state;
    gq_config *cfg = parse_ok("good/full.yaml");
    assert_int_equal(cfg->backend, GQ_BACKEND_HAMI);
    assert_int_equal(cfg->memory_unit, 512 * MI);
    assert_string_equal(cfg->scheduler_name, "hami-scheduler");
    /* defaultModel is matched case-insensitively and stored canonically */
    assert_string_equal(cfg->default_model, "a100-40gb");
    assert_string_equal(gq_config_default_model(cfg)->name, "a100-40gb");
    assert_true(cfg->require_quota);
    assert_int_equal(cfg->max_queued_pods, 5000);
    assert_int_equal(cfg->n_exempt_namespaces, 2);
    assert_string_equal(cfg->exempt_namespaces[1], "gpu-operator");
    assert_true(gq_config_is_exempt(cfg, "gpu-operator"));
    assert_string_equal(cfg->audit.path, "/var/log/gpuquota/audit.log");
    assert_int_equal(cfg->audit.max_size, 10 * MI);
    assert_int_equal(cfg->audit.max_files, 0);
    /* 11 built-ins, a100-40gb replaced in place, rtx-4090 appended */
    assert_int_equal(cfg->n_models, 12);
    const gq_model *a100 = gq_config_find_model(cfg, "a100-40gb");
    assert_ptr_equal(a100, &cfg->models[5]);
    assert_int_equal(a100->n_products, 1);
    assert_string_equal(a100->products[0], "NVIDIA-A100-SXM4-40GB");
    /* the PCIe product left with the replaced built-in */
    assert_null(gq_config_find_model(cfg, "NVIDIA-A100-PCIE-40GB"));
    /* MIG profiles come back sorted by memory, then slices */
    assert_int_equal(a100->n_mig, 3);
    assert_string_equal(a100->mig[0].name, "1g.5gb");
    assert_string_equal(a100->mig[1].name, "3g.20gb");
    assert_int_equal(a100->mig[1].slices, 3);
    assert_int_equal(a100->mig[1].memory, 20 * GI);
    assert_string_equal(a100->mig[2].name, "7g.40gb");
    const gq_model *rtx = gq_config_find_model(cfg, "NVIDIA-GeForce-RTX-4090");
    assert_ptr_equal(rtx, &cfg->models[11]);
    assert_string_equal(rtx->name, "rtx-4090");
    assert_int_equal(rtx->memory, 24 * GI);
    assert_int_equal(rtx->n_mig, 0);
    gq_config_free(cfg);
}

static void flow_file(void **state)
{
    (void)state;
    gq_config *cfg = parse_ok("good/flow.yaml");
    assert_int_equal(cfg->backend, GQ_BACKEND_MIG);
    assert_int_equal(cfg->memory_unit, GI);
    assert_null(cfg->scheduler_name);
    assert_null(cfg->default_model);
    assert_false(cfg->require_quota);
    assert_int_equal(cfg->n_exempt_namespaces, 0);
    assert_false(gq_config_is_exempt(cfg, "kube-system"));
    assert_null(cfg->audit.path);
    assert_int_equal(cfg->audit.max_size, 0);
    assert_int_equal(cfg->audit.max_files, 5); /* absent: default kept */
    assert_int_equal(cfg->n_models, 11);       /* models: [] adds nothing */
    gq_config_free(cfg);
}

static void quoted_file(void **state)
{
    (void)state;
    gq_config *cfg = parse_ok("good/quoted.yaml");
    assert_int_equal(cfg->backend, GQ_BACKEND_VOLCANO);
    assert_int_equal(cfg->memory_unit, 256 * MI);
    assert_string_equal(cfg->scheduler_name, "volcano");
    assert_int_equal(cfg->n_exempt_namespaces, 2);
    assert_string_equal(cfg->exempt_namespaces[1], "volcano-system");
    assert_string_equal(cfg->audit.path, "/var/log/gpu quota/audit #1.log");
    const gq_model *t4 = gq_config_find_model(cfg, "NVIDIA-T4");
    assert_non_null(t4);
    assert_string_equal(t4->name, "t4");
    assert_ptr_equal(gq_config_find_model(cfg, "Tesla-T4"), t4);
    assert_int_equal(cfg->n_models, 11);
    gq_config_free(cfg);
}

static void default_model_defined_in_file(void **state)
{
    (void)state;
    gq_config *cfg = parse_ok("good/default-from-file.yaml");
    const gq_model *m = gq_config_default_model(cfg);
    assert_non_null(m);
    assert_string_equal(m->name, "rtx-a6000");
    assert_int_equal(m->memory, 48 * GI);
    gq_config_free(cfg);
}

static void device_classes(void **state)
{
    (void)state;
    gq_config *cfg = NULL;
    gq_err err;
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    const gq_device_class *d = gq_config_find_device_class(cfg, "gpu.nvidia.com");
    assert_non_null(d);
    assert_null(d->model);
    assert_null(gq_config_find_device_class(cfg, "h100.example.com"));
    gq_config_free(cfg);
    cfg = parse_ok("good/device-classes.yaml");
    assert_int_equal(cfg->n_device_classes, 2);
    d = gq_config_find_device_class(cfg, "h100.example.com");
    assert_non_null(d);
    assert_string_equal(d->model, "site-gpu");
    assert_null(gq_config_find_device_class(cfg, "gpu.nvidia.com")->model);
    gq_config_free(cfg);
    /* gpuDrivers: NVIDIA's by default; a list replaces it. */
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    assert_true(gq_config_is_gpu_driver(cfg, "gpu.nvidia.com", 14));
    assert_false(gq_config_is_gpu_driver(cfg, "gpu.nvidia.co", 13));
    assert_false(gq_config_is_gpu_driver(cfg, "gpu.example.com", 15));
    gq_config_free(cfg);
    cfg = parse_ok("good/gpu-drivers.yaml");
    assert_int_equal(cfg->n_gpu_drivers, 2);
    assert_true(gq_config_is_gpu_driver(cfg, "gpu.example.com", 15));
    gq_config_free(cfg);
}

static void product_moves_to_new_model(void **state)
{
    (void)state;
    gq_config *cfg = parse_ok("good/product-moves.yaml");
    const gq_model *m = gq_config_find_model(cfg, "NVIDIA-A10");
    assert_non_null(m);
    assert_string_equal(m->name, "a10-custom");
    assert_int_equal(m->memory, 22 * GI);
    assert_int_equal(gq_config_find_model(cfg, "a10")->n_products, 0);
    gq_config_free(cfg);
}

/* ---- bad files --------------------------------------------------------- */

static const struct bad_case {
    const char *file;
    gq_code code;
    const char *prefix;   /* the message starts with this: "file:line: " */
    const char *fragment; /* and contains this */
} bad_cases[] = {
    {"unknown-key.yaml", GQ_EINVAL, "unknown-key.yaml:2: ",
     "unknown key \"backends\" (valid keys: backend, memoryUnit, schedulerName, defaultModel, "
     "requireQuota, exemptNamespaces, audit, models, deviceClasses, gpuDrivers, "
     "maxQueuedPods)"},
    {"device-class-unknown-model.yaml", GQ_EINVAL, "device-class-unknown-model.yaml:3: ",
     "deviceClasses[] \"gpu.nvidia.com\": model \"a100\" is not a model name"},
    {"device-class-twice.yaml", GQ_EINVAL, "device-class-twice.yaml:4: ",
     "deviceClasses[].name: \"gpu.nvidia.com\" is listed twice (first at line 2)"},
    {"gpu-driver-bad-name.yaml", GQ_EINVAL, "gpu-driver-bad-name.yaml:1: ",
     "gpuDrivers: \"GPU_Driver\" is not a DRA driver name (a lower-case DNS subdomain)"},
    {"gpu-driver-twice.yaml", GQ_EINVAL,
     "gpu-driver-twice.yaml:3: ", "gpuDrivers: \"gpu.nvidia.com\" is listed twice"},
    {"device-class-no-name.yaml", GQ_EINVAL,
     "device-class-no-name.yaml:2: ", "deviceClasses[]: missing required key \"name\""},
    {"device-class-bad-name.yaml", GQ_EINVAL, "device-class-bad-name.yaml:2: ",
     "deviceClasses[].name: \"GPU_Class\" is not a DeviceClass name"},
    {"unknown-audit-key.yaml", GQ_EINVAL, "unknown-audit-key.yaml:3: ",
     "audit: unknown key \"maxsize\" (valid keys: path, maxSize, maxFiles)"},
    {"unknown-model-key.yaml", GQ_EINVAL, "unknown-model-key.yaml:4: ",
     "unknown key \"product\" (valid keys: name, memory, products, migProfiles)"},
    {"audit-is-list.yaml", GQ_EINVAL,
     "audit-is-list.yaml:2: ", "audit: expected a mapping, got a list"},
    {"exempt-is-map.yaml", GQ_EINVAL,
     "exempt-is-map.yaml:2: ", "exemptNamespaces: expected a list, got a mapping"},
    {"backend-is-list.yaml", GQ_EINVAL,
     "backend-is-list.yaml:1: ", "backend: expected a string, got a list"},
    {"models-is-map.yaml", GQ_EINVAL,
     "models-is-map.yaml:1: ", "models: expected a list, got a mapping"},
    {"model-is-scalar.yaml", GQ_EINVAL,
     "model-is-scalar.yaml:2: ", "models[]: expected a mapping, got a scalar"},
    {"root-is-list.yaml", GQ_EINVAL,
     "root-is-list.yaml:2: ", "configuration: expected a mapping, got a list"},
    {"root-is-scalar.yaml", GQ_EINVAL,
     "root-is-scalar.yaml:1: ", "configuration: expected a mapping, got a scalar"},
    {"bad-quantity.yaml", GQ_EINVAL,
     "bad-quantity.yaml:1: ", "memoryUnit: invalid quantity \"1GB\""},
    {"unknown-backend.yaml", GQ_EINVAL, "unknown-backend.yaml:1: ",
     "backend: unknown backend \"nvidia\" (valid: aliyun, hami, volcano, mig, timeslicing)"},
    {"unknown-default-model.yaml", GQ_EINVAL, "unknown-default-model.yaml:1: ",
     "defaultModel: \"a100\" is not a model name (models: t4, v100-16gb,"},
    {"duplicate-model.yaml", GQ_EINVAL,
     "duplicate-model.yaml:6: ", "models[].name: \"x\" is defined twice (first at line 2)"},
    {"product-claimed-builtin.yaml", GQ_EINVAL,
     "product-claimed-builtin.yaml:4: ", "\"NVIDIA-A10\" is already claimed by model \"a10\""},
    {"product-claimed-twice.yaml", GQ_EINVAL,
     "product-claimed-twice.yaml:9: ", "\"Vendor-P\" is already claimed by model \"p\""},
    /* three clashes: the first in the file is reported, naming the first owner */
    {"product-claimed-first-clash.yaml", GQ_EINVAL,
     "product-claimed-first-clash.yaml:3: ", "\"Vendor-B\" is already claimed by model \"p\""},
    {"product-listed-twice.yaml", GQ_EINVAL,
     "product-listed-twice.yaml:4: ", "models[].products: \"Vendor-P\" is listed twice"},
    {"product-not-label.yaml", GQ_EINVAL,
     "product-not-label.yaml:4: ", "\"NVIDIA A10\" is not a valid label value"},
    {"memory-unit-zero.yaml", GQ_ERANGE,
     "memory-unit-zero.yaml:1: ", "memoryUnit: 0 must be greater than zero"},
    {"memory-unit-negative.yaml", GQ_ERANGE,
     "memory-unit-negative.yaml:1: ", "memoryUnit: -1Gi must be greater than zero"},
    {"memory-unit-fractional.yaml", GQ_EINVAL,
     "memory-unit-fractional.yaml:1: ", "memoryUnit: 1500m is not a whole number of bytes"},
    {"memory-unit-too-large.yaml", GQ_ERANGE,
     "memory-unit-too-large.yaml:1: ", "memoryUnit: quantity \"10Ei\" is out of range"},
    {"model-memory-fraction.yaml", GQ_EINVAL,
     "model-memory-fraction.yaml:5: ", "models[].memory: 100m is not a whole number of bytes"},
    {"max-size-negative.yaml", GQ_ERANGE,
     "max-size-negative.yaml:2: ", "audit.maxSize: -1Mi must be zero or more"},
    {"max-files-negative.yaml", GQ_ERANGE,
     "max-files-negative.yaml:2: ", "audit.maxFiles: -1 is out of range 0..1000"},
    {"max-files-fraction.yaml", GQ_EINVAL,
     "max-files-fraction.yaml:2: ", "audit.maxFiles: expected an integer, got \"1.5\""},
    {"two-documents.yaml", GQ_EINVAL, "two-documents.yaml:2: ", "a second YAML document"},
    {"anchor.yaml", GQ_EINVAL, "anchor.yaml:1: ", "anchors (&a) are not allowed"},
    {"alias.yaml", GQ_EINVAL, "alias.yaml:2: ", "aliases (*name) are not allowed"},
    {"tag.yaml", GQ_EINVAL, "tag.yaml:1: ", "tags (tag:yaml.org,2002:str) are not allowed"},
    {"too-deep.yaml", GQ_ELIMIT, "too-deep.yaml:4: ", "nested deeper than 8 levels"},
    {"syntax-error.yaml", GQ_EINVAL, "syntax-error.yaml:3: ",
     "did not find expected ',' or ']' while parsing a flow sequence at line 2"},
    {"duplicate-key.yaml", GQ_EINVAL,
     "duplicate-key.yaml:3: ", "configuration: duplicate key \"backend\""},
    {"require-quota-yes.yaml", GQ_EINVAL,
     "require-quota-yes.yaml:1: ", "requireQuota: expected true or false (unquoted), got \"yes\""},
    {"max-queued-zero.yaml", GQ_ERANGE, "max-queued-zero.yaml:1: ",
     "maxQueuedPods: 0 is out of range 1..1000000"},
    {"require-quota-quoted.yaml", GQ_EINVAL, "require-quota-quoted.yaml:1: ",
     "requireQuota: expected true or false (unquoted), got \"true\""},
    {"model-no-name.yaml", GQ_EINVAL,
     "model-no-name.yaml:2: ", "models[]: missing required key \"name\""},
    {"model-no-memory.yaml", GQ_EINVAL,
     "model-no-memory.yaml:2: ", "models[] \"x\": missing required key \"memory\""},
    {"model-name-upper.yaml", GQ_EINVAL,
     "model-name-upper.yaml:2: ", "\"A100-Custom\" is not a lower-case DNS label"},
    {"mig-bad-syntax.yaml", GQ_EINVAL,
     "mig-bad-syntax.yaml:4: ", "MIG profile \"1g5gb\" is not of the form <slices>g.<memory>gb"},
    {"mig-too-big.yaml", GQ_EINVAL,
     "mig-too-big.yaml:5: ", "\"7g.80gb\" holds more memory than the model's 40Gi"},
    {"mig-twice.yaml", GQ_EINVAL,
     "mig-twice.yaml:4: ", "models[].migProfiles: \"1g.5gb\" is listed twice"},
    {"exempt-bad-name.yaml", GQ_EINVAL,
     "exempt-bad-name.yaml:1: ", "exemptNamespaces: \"Kube_System\" is not a valid namespace name"},
    {"scheduler-bad-name.yaml", GQ_EINVAL, "scheduler-bad-name.yaml:1: ",
     "schedulerName: \"My Scheduler\" is not a valid scheduler name"},
    {"key-not-string.yaml", GQ_EINVAL,
     "key-not-string.yaml:1: ", "configuration: keys must be strings, got a list"},
    {"nul-in-string.yaml", GQ_EINVAL,
     "nul-in-string.yaml:1: ", "backend: contains a NUL character"},
};

static void bad_files(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *t = &bad_cases[i];
        char rel[128];
        gq_config *cfg = (gq_config *)(uintptr_t)1; /* must stay untouched */
        gq_err err = {0};
        snprintf(rel, sizeof(rel), "bad/%s", t->file);
        gq_code rc = parse_file(rel, &cfg, &err);
        if (rc != t->code)
            fail_msg("%s: code %d, want %d (%s)", t->file, rc, t->code, err.msg);
        assert_int_equal(err.code, t->code);
        assert_ptr_equal(cfg, (gq_config *)(uintptr_t)1);
        if (strncmp(err.msg, t->prefix, strlen(t->prefix)) || !strstr(err.msg, t->fragment))
            fail_msg("%s: message \"%s\", want prefix \"%s\" and \"%s\"", t->file, err.msg,
                     t->prefix, t->fragment);
    }
}

/* Every file under bad/ is in the table (so none silently goes untested). */
static void bad_table_is_complete(void **state)
{
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "ls '%s/config/bad' | wc -l", GQ_TEST_DATA);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = -1;
    assert_int_equal(fscanf(p, "%d", &n), 1);
    pclose(p);
    assert_int_equal((size_t)n, sizeof(bad_cases) / sizeof(bad_cases[0]));
}

/* ---- limits with generated input -------------------------------------- */

static void expect_error(const char *buf, size_t len, gq_code code, const char *prefix,
                         const char *fragment)
{
    gq_config *cfg = NULL;
    gq_err err = {0};
    gq_code rc = gq_config_parse(buf, len, "gen.yaml", &cfg, &err);
    if (rc != code)
        fail_msg("code %d, want %d (%s)", rc, code, err.msg);
    assert_null(cfg);
    if (strncmp(err.msg, prefix, strlen(prefix)) || !strstr(err.msg, fragment))
        fail_msg("message \"%s\", want prefix \"%s\" and \"%s\"", err.msg, prefix, fragment);
}

static void input_size_capped(void **state)
{
    (void)state;
    size_t len = ((size_t)1 << 20) + 1;
    char *buf = malloc(len);
    assert_non_null(buf);
    memset(buf, '#', len); /* one long comment: valid YAML except for its size */
    expect_error(buf, len, GQ_ELIMIT, "gen.yaml:1: ", "larger than 1048576 bytes");
    /* exactly 1 MiB is accepted */
    gq_config *cfg = NULL;
    gq_err err = {0};
    assert_int_equal(gq_config_parse(buf, len - 1, "gen.yaml", &cfg, &err), GQ_OK);
    gq_config_free(cfg);
    free(buf);
}

static void list_lengths_capped(void **state)
{
    (void)state;
    size_t cap = 64 * 1024, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    len += (size_t)snprintf(buf + len, cap - len, "models:\n");
    for (int i = 0; i < 257; i++)
        len += (size_t)snprintf(buf + len, cap - len, "  - {name: m%d, memory: 1Gi}\n", i);
    expect_error(buf, len, GQ_ELIMIT, "gen.yaml:2: ", "models: more than 256 entries");
    /* 256 models are fine */
    gq_config *cfg = NULL;
    gq_err err = {0};
    size_t last = (size_t)(strstr(buf, "  - {name: m256") - buf);
    assert_int_equal(gq_config_parse(buf, last, "gen.yaml", &cfg, &err), GQ_OK);
    assert_int_equal(cfg->n_models, 11 + 256);
    gq_config_free(cfg);

    len = (size_t)snprintf(buf, cap, "models:\n  - name: x\n    memory: 1Gi\n    products: [");
    for (int i = 0; i < 65; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%sP%d", i ? ", " : "", i);
    len += (size_t)snprintf(buf + len, cap - len, "]\n");
    expect_error(buf, len, GQ_ELIMIT, "gen.yaml:4: ", "models[].products: more than 64 entries");
    free(buf);
}

static void depth_cap_before_load(void **state)
{
    (void)state;
    /* 100k nested flow sequences: rejected by the event pass at depth 9,
     * long before a tree is built. */
    size_t n = 100000;
    char *buf = malloc(2 * n);
    assert_non_null(buf);
    memset(buf, '[', n);
    memset(buf + n, ']', n);
    expect_error(buf, 2 * n, GQ_ELIMIT, "gen.yaml:1: ", "nested deeper than 8 levels");
    free(buf);
}

static void null_filename(void **state)
{
    (void)state;
    gq_config *cfg = NULL;
    gq_err err = {0};
    assert_int_equal(gq_config_parse("backend: x\n", 11, NULL, &cfg, &err), GQ_EINVAL);
    assert_string_equal(err.msg, "<config>:1: backend: unknown backend \"x\" (valid: aliyun, "
                                 "hami, volcano, mig, timeslicing)");
}

/* ---- round trip -------------------------------------------------------- */

static void round_trip(const gq_config *cfg)
{
    char *yaml = NULL, *yaml2 = NULL;
    size_t len = 0, len2 = 0;
    gq_config *back = NULL;
    gq_err err = {0};
    assert_int_equal(gq_config_to_yaml(cfg, &yaml, &len, &err), GQ_OK);
    assert_int_equal(strlen(yaml), len);
    if (gq_config_parse(yaml, len, "rendered.yaml", &back, &err))
        fail_msg("%s\n--- rendered:\n%s", err.msg, yaml);
    assert_config_equal(cfg, back);
    /* rendering is a fixed point */
    assert_int_equal(gq_config_to_yaml(back, &yaml2, &len2, &err), GQ_OK);
    assert_int_equal(len, len2);
    assert_memory_equal(yaml, yaml2, len);
    free(yaml);
    free(yaml2);
    gq_config_free(back);
}

static void round_trip_files(void **state)
{
    (void)state;
    static const char *const files[] = {"good/empty.yaml",
                                        "good/full.yaml",
                                        "good/flow.yaml",
                                        "good/quoted.yaml",
                                        "good/default-from-file.yaml",
                                        "good/product-moves.yaml"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        gq_config *cfg = parse_ok(files[i]);
        round_trip(cfg);
        gq_config_free(cfg);
    }
}

/* Strings YAML could misread if written plain survive the trip. */
static void round_trip_awkward_strings(void **state)
{
    (void)state;
    static const char *const paths[] = {
        "true",       "No",     "null",        "~",     "123",        "1e3",         "0x1f",
        "-dash",      "a: b",   "a #b",        "it's",  "say \"hi\"", "back\\slash", "tab\tx",
        "line\nnext", "[flow]", "{map}",       "*star", "&amp",       "!bang",       "%pct",
        "@at",        "`tick`", "caf\xc3\xa9", " lead", "trail ",     "1g.5gb",      ".inf",
        "1_000",      "?q",     "|pipe",       ">gt",   "a,b",        "#hash",
    };
    gq_config *cfg = NULL;
    gq_err err = {0};
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        free(cfg->audit.path);
        cfg->audit.path = strdup(paths[i]);
        assert_non_null(cfg->audit.path);
        round_trip(cfg);
    }
    /* every backend, odd numbers, no models, no namespaces */
    for (int b = GQ_BACKEND_ALIYUN; b <= GQ_BACKEND_TIMESLICING; b++) {
        cfg->backend = (gq_backend)b;
        round_trip(cfg);
    }
    cfg->memory_unit = 1536 * MI;
    cfg->audit.max_size = 1;
    cfg->audit.max_files = 1000;
    for (size_t i = 0; i < cfg->n_exempt_namespaces; i++)
        free(cfg->exempt_namespaces[i]);
    cfg->n_exempt_namespaces = 0;
    round_trip(cfg);
    gq_config_free(cfg);
}

static void render_default(void **state)
{
    (void)state;
    gq_config *cfg = NULL;
    gq_err err = {0};
    char *yaml = NULL;
    size_t len = 0;
    assert_int_equal(gq_config_default(&cfg, &err), GQ_OK);
    assert_int_equal(gq_config_to_yaml(cfg, &yaml, &len, &err), GQ_OK);
    static const char head[] = "backend: aliyun\n"
                               "memoryUnit: 1Gi\n"
                               "schedulerName: \"\"\n"
                               "defaultModel: \"\"\n"
                               "requireQuota: false\n"
                               "maxQueuedPods: 1000\n"
                               "exemptNamespaces: [kube-system]\n"
                               "audit:\n"
                               "  path: \"\"\n"
                               "  maxSize: 100Mi\n"
                               "  maxFiles: 5\n"
                               "models:\n"
                               "  - name: t4\n"
                               "    memory: 16Gi\n"
                               "    products: [Tesla-T4]\n"
                               "    migProfiles: []\n";
    assert_true(len > sizeof(head));
    assert_memory_equal(yaml, head, sizeof(head) - 1);
    assert_non_null(strstr(yaml, "  - name: a100-40gb\n"
                                 "    memory: 40Gi\n"
                                 "    products: [NVIDIA-A100-SXM4-40GB, NVIDIA-A100-PCIE-40GB, "
                                 "A100-SXM4-40GB, A100-PCIE-40GB]\n"
                                 "    migProfiles: [1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, "
                                 "7g.40gb]\n"));
    free(yaml);
    cfg->backend = (gq_backend)42;
    yaml = (char *)(uintptr_t)1;
    assert_int_equal(gq_config_to_yaml(cfg, &yaml, &len, &err), GQ_EINVAL);
    assert_ptr_equal(yaml, (char *)(uintptr_t)1);
    gq_config_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_inputs_are_defaults),
        cmocka_unit_test(full_file),
        cmocka_unit_test(flow_file),
        cmocka_unit_test(quoted_file),
        cmocka_unit_test(default_model_defined_in_file),
        cmocka_unit_test(product_moves_to_new_model),
        cmocka_unit_test(device_classes),
        cmocka_unit_test(bad_files),
        cmocka_unit_test(bad_table_is_complete),
        cmocka_unit_test(input_size_capped),
        cmocka_unit_test(list_lengths_capped),
        cmocka_unit_test(depth_cap_before_load),
        cmocka_unit_test(null_filename),
        cmocka_unit_test(round_trip_files),
        cmocka_unit_test(round_trip_awkward_strings),
        cmocka_unit_test(render_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
