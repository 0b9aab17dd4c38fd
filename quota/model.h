/* A GPU model of the catalog (quota/catalog.h builds the built-in one, the
 * configuration owns the models it uses: quota/config.h). Plain data: every
 * string and array is owned by whoever owns the model (gq_model_dispose). */
#ifndef GQ_MODEL_H
#define GQ_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct gq_mig_profile {
    char *name;     /* "1g.10gb": the resource is nvidia.com/mig-<name> */
    int slices;     /* compute slices (the <g> of <g>g.<mem>gb) */
    int64_t memory; /* bytes of GPU memory the profile holds */
} gq_mig_profile;

typedef struct gq_model {
    char *name;      /* catalog name, e.g. "a100-40gb" (lower case) */
    int64_t memory;  /* bytes of memory of one card */
    char **products; /* GFD nvidia.com/gpu.product values (exact strings) */
    size_t n_products;
    gq_mig_profile *mig; /* sorted by memory, then slices, ascending */
    size_t n_mig;
} gq_model;

#endif
