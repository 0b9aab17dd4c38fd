/* The built-in GPU model catalog and the model helpers the configuration
 * code shares (internal to quota/; callers outside use config.h).
 *
 * Memory figures are the nominal card sizes the product names advertise
 * (a100-40gb = 40Gi), not what NVML reports as usable after ECC and driver
 * reservations: quota is an administrative unit, and the nominal size is the
 * one operators and users both know. */
#ifndef GQ_CATALOG_H
#define GQ_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "quota/model.h"
#include "common/gq_error.h"

#define GQ_GIB ((int64_t)1 << 30)

/* Deep copy of the built-in catalog: *out is an array of *n_out models,
 * each with its products and MIG profiles (sorted). Caller disposes each
 * model with gq_model_dispose and frees the array. */
gq_code gq_catalog_models(gq_model **out, size_t *n_out, gq_err *err) GQ_WUR;

/* Parse a MIG profile name "<slices>g.<mem>gb" (slices 1..8, mem 1..1024
 * GiB, no leading zeros, nothing else). On success writes slices and memory
 * in bytes; GQ_EINVAL with a message otherwise. */
gq_code gq_mig_profile_parse(const char *name, int *slices, int64_t *memory, gq_err *err) GQ_WUR;

/* Sort profiles by memory, then slices (then name, so the order is total). */
void gq_mig_sort(gq_mig_profile *mig, size_t n);

/* Deep copy of src into *dst (caller-owned struct). */
gq_code gq_model_copy(const gq_model *src, gq_model *dst, gq_err *err) GQ_WUR;

/* Free what a model owns and zero it; NULL is accepted. */
void gq_model_dispose(gq_model *m);

#endif
