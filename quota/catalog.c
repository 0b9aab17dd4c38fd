#include <stdlib.h>
#include <string.h>

#include "quota/catalog.h"

#define MAX_PRODUCTS 12
#define MAX_MIG 8

/* One built-in model. Product strings are what GPU Feature Discovery puts in
 * nvidia.com/gpu.product: the NVML device name with spaces turned into '-'.
 * Drivers before R470 named Ampere parts without the "NVIDIA " prefix, so
 * both spellings are listed. */
struct catalog_entry {
    const char *name;
    int64_t memory_gib;
    const char *products[MAX_PRODUCTS];
    const char *mig[MAX_MIG];
};

static const struct catalog_entry catalog[] = {
    {"t4", 16, {"Tesla-T4"}, {NULL}},
    {"v100-16gb",
     16,
     {"Tesla-V100-SXM2-16GB", "Tesla-V100-PCIE-16GB", "Tesla-V100-FHHL-16GB",
      "Tesla-V100-DGXS-16GB"},
     {NULL}},
    {"v100-32gb",
     32,
     {"Tesla-V100-SXM2-32GB", "Tesla-V100-PCIE-32GB", "Tesla-V100S-PCIE-32GB",
      "Tesla-V100-DGXS-32GB", "Tesla-V100-SXM3-32GB"},
     {NULL}},
    {"a10", 24, {"NVIDIA-A10"}, {NULL}},
    {"a30", 24, {"NVIDIA-A30"}, {"1g.6gb", "2g.12gb", "4g.24gb"}},
    {"a100-40gb",
     40,
     {"NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB", "A100-SXM4-40GB", "A100-PCIE-40GB"},
     {"1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}},
    {"a100-80gb",
     80,
     {"NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe", "A100-SXM4-80GB", "A100-80GB-PCIe"},
     {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
    {"l4", 24, {"NVIDIA-L4"}, {NULL}},
    {"l40s", 48, {"NVIDIA-L40S"}, {NULL}},
    {"h100-80gb",
     80,
     {"NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-PCIe"},
     {"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}},
    {"h200",
     141,
     {"NVIDIA-H200", "NVIDIA-H200-141GB-HBM3e", "NVIDIA-H200-NVL"},
     {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}},
};

#define N_CATALOG (sizeof(catalog) / sizeof(catalog[0]))

/* Unsigned decimal without sign or leading zeros, at most 4 digits; returns
 * the number of characters consumed, 0 when there is no valid number. */
static size_t parse_small_uint(const char *s, int *out)
{
    size_t i = 0;
    int v = 0;
    while (s[i] >= '0' && s[i] <= '9') {
        if (i == 4 || (i == 1 && s[0] == '0'))
            return 0;
        v = v * 10 + (s[i] - '0');
        i++;
    }
    if (i)
        *out = v;
    return i;
}

gq_code gq_mig_profile_parse(const char *name, int *slices, int64_t *memory, gq_err *err)
{
    int g = 0, mem = 0;
    const char *p = name;
    size_t n = parse_small_uint(p, &g);
    if (!n || p[n] != 'g' || p[n + 1] != '.')
        goto bad;
    p += n + 2;
    n = parse_small_uint(p, &mem);
    if (!n || strcmp(p + n, "gb") != 0)
        goto bad;
    if (g < 1 || g > 8)
        return gq_err_set(err, GQ_EINVAL, "MIG profile \"%.64s\": slices must be 1..8", name);
    if (mem < 1 || mem > 1024)
        return gq_err_set(err, GQ_EINVAL, "MIG profile \"%.64s\": memory must be 1..1024 GiB",
                          name);
    *slices = g;
    *memory = (int64_t)mem * GQ_GIB;
    return GQ_OK;
bad:
    return gq_err_set(
        err, GQ_EINVAL,
        "MIG profile \"%.64s\" is not of the form <slices>g.<memory>gb (e.g. 1g.10gb)", name);
}

static int mig_cmp(const void *a, const void *b)
{
    const gq_mig_profile *x = a, *y = b;
    if (x->memory != y->memory)
        return x->memory < y->memory ? -1 : 1;
    if (x->slices != y->slices)
        return x->slices < y->slices ? -1 : 1;
    return strcmp(x->name, y->name);
}

void gq_mig_sort(gq_mig_profile *mig, size_t n)
{
    if (n > 1)
        qsort(mig, n, sizeof(*mig), mig_cmp);
}

void gq_model_dispose(gq_model *m)
{
    if (!m)
        return;
    free(m->name);
    for (size_t i = 0; i < m->n_products; i++)
        free(m->products[i]);
    free(m->products);
    for (size_t i = 0; i < m->n_mig; i++)
        free(m->mig[i].name);
    free(m->mig);
    memset(m, 0, sizeof(*m));
}

/* What a model is copied from: a name, the card's memory, its GFD product
 * strings and its MIG profiles, either parsed already (mig) or as their
 * names (mig_names, parsed here). */
typedef struct model_source {
    const char *name;
    int64_t memory;
    const char *const *products;
    size_t n_products;
    const gq_mig_profile *mig;
    const char *const *mig_names;
    size_t n_mig;
} model_source;

/* Fill dst (zeroed by the caller) from src; on failure dst holds what was
 * built so far, for gq_model_dispose. */
static gq_code model_fill(gq_model *dst, const model_source *src, gq_err *err)
{
    const char *name = src->name;
    const char *const *products = src->products, *const *mig_names = src->mig_names;
    size_t n_products = src->n_products, n_mig = src->n_mig;
    const gq_mig_profile *mig = src->mig;
    int64_t memory = src->memory;
    dst->memory = memory;
    if (!(dst->name = strdup(name)))
        goto oom;
    if (n_products && !(dst->products = calloc(n_products, sizeof(*dst->products))))
        goto oom;
    for (size_t i = 0; i < n_products; i++) {
        if (!(dst->products[i] = strdup(products[i])))
            goto oom;
        dst->n_products++;
    }
    if (n_mig && !(dst->mig = calloc(n_mig, sizeof(*dst->mig))))
        goto oom;
    for (size_t i = 0; i < n_mig; i++) {
        gq_mig_profile *p = &dst->mig[i];
        if (mig) {
            p->slices = mig[i].slices;
            p->memory = mig[i].memory;
        } else {
            gq_code rc = gq_mig_profile_parse(mig_names[i], &p->slices, &p->memory, err);
            if (rc)
                return rc;
        }
        if (!(p->name = strdup(mig ? mig[i].name : mig_names[i])))
            goto oom;
        dst->n_mig++;
    }
    gq_mig_sort(dst->mig, dst->n_mig);
    return GQ_OK;
oom:
    return gq_err_set(err, GQ_ENOMEM, "out of memory copying model %s", name);
}

gq_code gq_model_copy(const gq_model *src, gq_model *dst, gq_err *err)
{
    gq_model m = {0};
    model_source from = {.name = src->name,
                         .memory = src->memory,
                         .products = (const char *const *)src->products,
                         .n_products = src->n_products,
                         .mig = src->mig,
                         .n_mig = src->n_mig};
    gq_code rc = model_fill(&m, &from, err);
    if (rc) {
        gq_model_dispose(&m);
        return rc;
    }
    *dst = m;
    return GQ_OK;
}

static size_t count_strings(const char *const *v, size_t max)
{
    size_t n = 0;
    while (n < max && v[n])
        n++;
    return n;
}

gq_code gq_catalog_models(gq_model **out, size_t *n_out, gq_err *err)
{
    gq_code rc = GQ_OK;
    size_t n = 0;
    gq_model *models = calloc(N_CATALOG, sizeof(*models));
    if (!models)
        return gq_err_set(err, GQ_ENOMEM, "out of memory copying the model catalog");
    for (; n < N_CATALOG; n++) {
        const struct catalog_entry *e = &catalog[n];
        model_source from = {.name = e->name,
                             .memory = e->memory_gib * GQ_GIB,
                             .products = e->products,
                             .n_products = count_strings(e->products, MAX_PRODUCTS),
                             .mig_names = e->mig,
                             .n_mig = count_strings(e->mig, MAX_MIG)};
        rc = model_fill(&models[n], &from, err);
        if (rc) {
            n++; /* the partly built entry is disposed too */
            goto out;
        }
    }
    *out = models;
    *n_out = n;
    models = NULL;
out:
    if (models) {
        for (size_t i = 0; i < n; i++)
            gq_model_dispose(&models[i]);
        free(models);
    }
    return rc;
}
