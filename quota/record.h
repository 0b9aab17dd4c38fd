/* The admission record: what a pod was charged when it was admitted, and
 * the facts that decide which quotas count it — fixed at admission and kept
 * on the pod where no tenant can change it (docs/design.md, "The charge is
 * fixed at admission").
 *
 * The mutating webhook writes it as pod annotation gpuquota.io/admission
 * (gq_pod_record_format); the validating webhook refuses a CREATE whose
 * record is not exactly what it computes itself for the pod as stored, and
 * any later change of a gpuquota.io/ key by anyone but gpuquota; the
 * controller's ungate rewrites it when it pins the model it chose. So the
 * recount reads a record it can believe (gq_pod_record_read) and never
 * prices a live pod again from fields a tenant may still edit: annotations,
 * managedFields, activeDeadlineSeconds.
 *
 * The text is compact JSON, the charge a ResourceList as in a quota status:
 *   {"charge":{"gpu-memory":"20Gi","gpu-pods":"1","gpus":"0"},
 *    "model":"a100-80gb","scope":"NotTerminating"}
 * "model" is absent for a pod pinned to no model (charged against every
 * model a quota limits). Unknown members are ignored, so a later version
 * may add some. */
#ifndef GQ_RECORD_H
#define GQ_RECORD_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "quota/crd.h"
#include "quota/podcost.h"
#include "common/gq_error.h"

#define GQ_ANN_ADMISSION "gpuquota.io/admission"
/* The charge as a line for people ("gpu-memory=20Gi,gpus=0,gpu-pods=1"),
 * written beside the record. Versions before the record wrote only this
 * line: the recount reads it as the charge of pods they admitted (legacy). */
#define GQ_ANN_CHARGED "gpuquota.io/charged"
/* Longest record text gpuquota writes or reads (the longest real one is
 * about 150 bytes). */
#define GQ_RECORD_MAX 512
/* Longest model name a record carries, with its terminator (a DNS label). */
#define GQ_RECORD_MODEL_MAX 64

/* A pod's admission record (plain struct: nothing to dispose). */
typedef struct gq_pod_record {
    gq_amounts charge;               /* gpu-memory, gpus, gpu-pods; all three set */
    char model[GQ_RECORD_MODEL_MAX]; /* catalog name of the pinned model; "" for none */
    bool terminating;                /* counted in Terminating scopes, not NotTerminating */
    /* Read from the GQ_ANN_CHARGED line of a pod an older gpuquota admitted:
     * only the charge was recorded; model and terminating are unknown (the
     * caller takes them from the pod as before). */
    bool legacy;
} gq_pod_record;

/* The record of a pod priced as cost (borrowed), pinned to model (a catalog
 * name, NULL or "" for none), in the Terminating scope when terminating.
 * The charge is the pod's own as a live pod (gq_charge_from_cost). A model
 * name longer than the record holds is recorded as none: charged against
 * every model, more and never less. */
void gq_pod_record_make(const gq_pod_cost *cost, const char *model, bool terminating,
                        gq_pod_record *out);

/* The record's text into buf (GQ_RECORD_MAX bytes, NUL-terminated). */
void gq_pod_record_format(const gq_pod_record *r, char buf[GQ_RECORD_MAX]);

/* Parse text[0..len). GQ_ELIMIT above GQ_RECORD_MAX bytes; GQ_EINVAL for
 * text that is not a record (not a JSON object; "charge" missing, missing a
 * quota key or not a ResourceList of them; "scope" missing or unknown; a
 * model name that is not a string or too long). *out is written only on
 * success. */
gq_code gq_pod_record_parse(const char *text, size_t len, gq_pod_record *out, gq_err *err) GQ_WUR;

/* The record annotation of pod (borrowed), parsed; without one, the
 * GQ_ANN_CHARGED line an older version wrote, as a legacy record.
 * GQ_ENOTFOUND when the pod carries neither; otherwise as
 * gq_pod_record_parse (GQ_EINVAL for a line that is not
 * "gpu-memory=Q,gpus=N,gpu-pods=N"), err naming the annotation. */
gq_code gq_pod_record_read(json_object *pod, gq_pod_record *out, gq_err *err) GQ_WUR;

/* How far to believe a pod that exists (the recount, the queue's pricing
 * and pins): GQ_TRUST_RECORDS when it carries an admission record that
 * parses, else GQ_TRUST_SPEC (quota/podcost.h). Never GQ_TRUST_REQUEST: a
 * pod under admission is the webhooks' to price. */
gq_pod_trust gq_pod_stored_trust(json_object *pod);

/* Whether a and b record the same charge, model and scope. */
bool gq_pod_record_equal(const gq_pod_record *a, const gq_pod_record *b);

#endif
