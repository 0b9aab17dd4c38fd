/* Embedded defaults, the built-in catalog and lookups. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "quota/catalog.h"
#include "quota/config.h"

#define GI ((int64_t)1 << 30)

static int setup_default(void **state)
{
    gq_err err = {0};
    gq_config *cfg = NULL;
    if (gq_config_default(&cfg, &err))
        return -1;
    *state = cfg;
    return 0;
}

static int teardown_config(void **state)
{
    gq_config_free(*state);
    return 0;
}

static void defaults(void **state)
{
    const gq_config *cfg = *state;
    assert_int_equal(cfg->backend, GQ_BACKEND_ALIYUN);
    assert_int_equal(cfg->memory_unit, GI);
    assert_null(cfg->scheduler_name);
    assert_null(cfg->default_model);
    assert_null(gq_config_default_model(cfg));
    assert_false(cfg->require_quota);
    assert_int_equal(cfg->n_exempt_namespaces, 1);
    assert_string_equal(cfg->exempt_namespaces[0], "kube-system");
    assert_null(cfg->audit.path);
    assert_int_equal(cfg->audit.max_size, 100 * ((int64_t)1 << 20));
    assert_int_equal(cfg->audit.max_files, 5);
    assert_int_equal(cfg->n_models, 11);
}

static const struct {
    const char *name;
    int64_t memory_gib;
    size_t n_mig;
} catalog_table[] = {
    {"t4", 16, 0},   {"v100-16gb", 16, 0}, {"v100-32gb", 32, 0}, {"a10", 24, 0},
    {"a30", 24, 3},  {"a100-40gb", 40, 6}, {"a100-80gb", 80, 6}, {"l4", 24, 0},
    {"l40s", 48, 0}, {"h100-80gb", 80, 6}, {"h200", 141, 6},
};

static void catalog_entries(void **state)
{
    const gq_config *cfg = *state;
    for (size_t i = 0; i < sizeof(catalog_table) / sizeof(catalog_table[0]); i++) {
        const gq_model *m = gq_config_find_model(cfg, catalog_table[i].name);
        assert_non_null(m);
        assert_string_equal(m->name, catalog_table[i].name);
        assert_int_equal(m->memory, catalog_table[i].memory_gib * GI);
        assert_true(m->n_products >= 1);
        assert_int_equal(m->n_mig, catalog_table[i].n_mig);
        for (size_t j = 1; j < m->n_mig; j++) {
            const gq_mig_profile *a = &m->mig[j - 1], *b = &m->mig[j];
            assert_true(a->memory < b->memory || (a->memory == b->memory && a->slices < b->slices));
        }
        if (m->n_mig) /* the whole-card profile is the largest */
            assert_int_equal(m->mig[m->n_mig - 1].memory, m->memory);
    }
}

/* No product string belongs to two catalog models, and each finds its own. */
static void catalog_products_unique(void **state)
{
    const gq_config *cfg = *state;
    for (size_t i = 0; i < cfg->n_models; i++)
        for (size_t j = 0; j < cfg->models[i].n_products; j++)
            assert_ptr_equal(gq_config_find_model(cfg, cfg->models[i].products[j]),
                             &cfg->models[i]);
    for (size_t i = 0; i < cfg->n_models; i++)
        for (size_t j = 0; j < cfg->models[i].n_products; j++)
            for (size_t k = 0; k < cfg->n_models; k++)
                for (size_t l = 0; l < cfg->models[k].n_products; l++)
                    if (i != k || j != l)
                        assert_string_not_equal(cfg->models[i].products[j],
                                                cfg->models[k].products[l]);
}

static const struct {
    const char *query;
    const char *model; /* NULL: no match */
} lookup_table[] = {
    /* catalog names, case-insensitive */
    {"a10", "a10"},
    {"A10", "a10"},
    {"A100-40GB", "a100-40gb"},
    {"H200", "h200"},
    /* the A10 vs A100 trap and partial names */
    {"a100", NULL},
    {"A100", NULL},
    {"a1", NULL},
    {"a10 ", NULL},
    {"a100-40", NULL},
    {"", NULL},
    /* GFD product strings, exact */
    {"Tesla-T4", "t4"},
    {"Tesla-V100-SXM2-16GB", "v100-16gb"},
    {"Tesla-V100-PCIE-16GB", "v100-16gb"},
    {"Tesla-V100-SXM2-32GB", "v100-32gb"},
    {"Tesla-V100-PCIE-32GB", "v100-32gb"},
    {"Tesla-V100S-PCIE-32GB", "v100-32gb"},
    {"NVIDIA-A10", "a10"},
    {"NVIDIA-A30", "a30"},
    {"NVIDIA-A100-SXM4-40GB", "a100-40gb"},
    {"NVIDIA-A100-PCIE-40GB", "a100-40gb"},
    {"NVIDIA-A100-SXM4-80GB", "a100-80gb"},
    {"NVIDIA-A100-80GB-PCIe", "a100-80gb"},
    {"NVIDIA-L4", "l4"},
    {"NVIDIA-L40S", "l40s"},
    {"NVIDIA-H100-80GB-HBM3", "h100-80gb"},
    {"NVIDIA-H100-PCIe", "h100-80gb"},
    {"NVIDIA-H200", "h200"},
    {"NVIDIA-H200-141GB-HBM3e", "h200"},
    /* product strings are case-sensitive and whole */
    {"nvidia-a10", NULL},
    {"NVIDIA-A100", NULL},
    {"NVIDIA-A10-", NULL},
    {"NVIDIA-L40", NULL},
    {"Tesla-T4 ", NULL},
    {"NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", NULL},
};

static void lookups(void **state)
{
    const gq_config *cfg = *state;
    for (size_t i = 0; i < sizeof(lookup_table) / sizeof(lookup_table[0]); i++) {
        const gq_model *m = gq_config_find_model(cfg, lookup_table[i].query);
        if (!lookup_table[i].model) {
            if (m)
                fail_msg("\"%s\" matched %s", lookup_table[i].query, m->name);
            continue;
        }
        if (!m)
            fail_msg("\"%s\" matched nothing", lookup_table[i].query);
        assert_string_equal(m->name, lookup_table[i].model);
    }
    assert_null(gq_config_find_model(cfg, NULL));
    assert_null(gq_config_find_model(NULL, "a10"));
}

static void mig_profiles_a100(void **state)
{
    const gq_model *m = gq_config_find_model(*state, "a100-40gb");
    static const struct {
        const char *name;
        int slices;
        int64_t gib;
    } want[] = {{"1g.5gb", 1, 5},   {"1g.10gb", 1, 10}, {"2g.10gb", 2, 10},
                {"3g.20gb", 3, 20}, {"4g.20gb", 4, 20}, {"7g.40gb", 7, 40}};
    assert_non_null(m);
    assert_int_equal(m->n_mig, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(m->mig[i].name, want[i].name);
        assert_int_equal(m->mig[i].slices, want[i].slices);
        assert_int_equal(m->mig[i].memory, want[i].gib * GI);
    }
}

static void exempt(void **state)
{
    const gq_config *cfg = *state;
    assert_true(gq_config_is_exempt(cfg, "kube-system"));
    assert_false(gq_config_is_exempt(cfg, "kube-systemx"));
    assert_false(gq_config_is_exempt(cfg, "kube"));
    assert_false(gq_config_is_exempt(cfg, "default"));
    assert_false(gq_config_is_exempt(cfg, NULL));
    assert_false(gq_config_is_exempt(NULL, "kube-system"));
}

static void backend_names(void **state)
{
    (void)state;
    static const struct {
        gq_backend b;
        const char *name;
    } t[] = {{GQ_BACKEND_ALIYUN, "aliyun"},
             {GQ_BACKEND_HAMI, "hami"},
             {GQ_BACKEND_VOLCANO, "volcano"},
             {GQ_BACKEND_MIG, "mig"},
             {GQ_BACKEND_TIMESLICING, "timeslicing"}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        gq_backend b = (gq_backend)99;
        assert_string_equal(gq_backend_name(t[i].b), t[i].name);
        assert_int_equal(gq_backend_parse(t[i].name, &b), GQ_OK);
        assert_int_equal(b, t[i].b);
    }
    gq_backend b = GQ_BACKEND_HAMI;
    assert_null(gq_backend_name((gq_backend)99));
    assert_null(gq_backend_name((gq_backend)-1));
    assert_int_equal(gq_backend_parse("Aliyun", &b), GQ_EINVAL);
    assert_int_equal(gq_backend_parse("", &b), GQ_EINVAL);
    assert_int_equal(gq_backend_parse(NULL, &b), GQ_EINVAL);
    assert_int_equal(b, GQ_BACKEND_HAMI); /* untouched on error */
}

static void mig_profile_parse(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int ok, slices;
        int64_t gib;
    } t[] = {
        {"1g.5gb", 1, 1, 5},    {"7g.141gb", 1, 7, 141}, {"8g.1024gb", 1, 8, 1024},
        {"0g.5gb", 0, 0, 0},    {"9g.5gb", 0, 0, 0},     {"1g.0gb", 0, 0, 0},
        {"1g.1025gb", 0, 0, 0}, {"01g.5gb", 0, 0, 0},    {"1g.05gb", 0, 0, 0},
        {"1g5gb", 0, 0, 0},     {"1g.5GB", 0, 0, 0},     {"1g.5gb+me", 0, 0, 0},
        {"g.5gb", 0, 0, 0},     {"1g.gb", 0, 0, 0},      {"", 0, 0, 0},
        {"-1g.5gb", 0, 0, 0},   {"12345g.5gb", 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        int slices = -1;
        int64_t mem = -1;
        gq_err err = {0};
        gq_code rc = gq_mig_profile_parse(t[i].s, &slices, &mem, &err);
        if (t[i].ok) {
            assert_int_equal(rc, GQ_OK);
            assert_int_equal(slices, t[i].slices);
            assert_int_equal(mem, t[i].gib * GI);
        } else {
            if (rc != GQ_EINVAL)
                fail_msg("\"%s\" accepted", t[i].s);
            assert_int_equal(slices, -1);
            assert_int_equal(mem, -1);
            assert_non_null(strstr(err.msg, "MIG profile"));
        }
    }
}

static void free_accepts_null(void **state)
{
    (void)state;
    gq_config_free(NULL);
    gq_model_dispose(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(defaults, setup_default, teardown_config),
        cmocka_unit_test_setup_teardown(catalog_entries, setup_default, teardown_config),
        cmocka_unit_test_setup_teardown(catalog_products_unique, setup_default, teardown_config),
        cmocka_unit_test_setup_teardown(lookups, setup_default, teardown_config),
        cmocka_unit_test_setup_teardown(mig_profiles_a100, setup_default, teardown_config),
        cmocka_unit_test_setup_teardown(exempt, setup_default, teardown_config),
        cmocka_unit_test(backend_names),
        cmocka_unit_test(mig_profile_parse),
        cmocka_unit_test(free_accepts_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
