/* The audit record schema (docs/audit.md): the one place that names the
 * fields of a line of gpuquota's audit log, writes a record and reads one
 * back. The webhook writes with gq_audit_record_format (webhook/audit.c);
 * `gpuquota audit` reads with gq_audit_record_parse (cli/auditlog.c). Pure:
 * the time is a field of the record, never read from a clock. */
#ifndef GQ_AUDIT_RECORD_H
#define GQ_AUDIT_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/crd.h"
#include "common/gq_error.h"

/* Field names, in the order a record is written. */
#define GQ_AUDIT_F_TIME "time"
#define GQ_AUDIT_F_UID "uid"
#define GQ_AUDIT_F_WEBHOOK "webhook"
#define GQ_AUDIT_F_OPERATION "operation"
#define GQ_AUDIT_F_NAMESPACE "namespace"
#define GQ_AUDIT_F_NAME "name"
#define GQ_AUDIT_F_USER "user"
#define GQ_AUDIT_F_DRY_RUN "dryRun"
#define GQ_AUDIT_F_DECISION "decision"
#define GQ_AUDIT_F_REASON "reason"
#define GQ_AUDIT_F_REQUEST "request"
#define GQ_AUDIT_F_REWRITE "rewrite"
#define GQ_AUDIT_F_CHARGE "charge"
#define GQ_AUDIT_F_QUOTAS "quotas"
#define GQ_AUDIT_F_LATENCY_MS "latencyMs"

typedef enum gq_audit_decision {
    GQ_AUDIT_ALLOWED = 0,
    GQ_AUDIT_DENIED = 1,
    GQ_AUDIT_ERROR = 2 /* the webhook could not decide (failure policy applied) */
} gq_audit_decision;

/* "allowed", "denied", "error": the words a record spells its decision in. */
const char *gq_audit_decision_name(gq_audit_decision d);

/* One decision as the webhook writes it. Strings are borrowed; NULL fields
 * are written as null or omitted as docs/audit.md says. */
typedef struct gq_audit_record {
    int64_t time_us;       /* wall clock, microseconds since the epoch */
    const char *uid;       /* AdmissionReview request.uid */
    const char *webhook;   /* "mutate" or "validate" */
    const char *operation; /* CREATE, UPDATE, ... */
    const char *namespace_;
    const char *name; /* metadata.name, or generateName when unnamed */
    const char *user; /* userInfo.username */
    bool dry_run;
    const char *decision; /* "allowed", "denied", "error" */
    const char *reason;   /* deny or error message; NULL when allowed */
    json_object *request; /* original GPU requests (borrowed), or NULL */
    json_object *rewrite; /* what was changed (borrowed), or NULL */
    json_object *charge;  /* {"gpu-memory":..,"gpus":..,"gpu-pods":..} (borrowed), or NULL */
    json_object *quotas;  /* quotas charged or exceeded (borrowed), or NULL */
    double latency_ms;
} gq_audit_record;

/* Serialise rec as one JSON object (no newline): the time as RFC 3339 with
 * microseconds, the latency rounded down to microseconds. Caller frees *out.
 * GQ_ENOMEM; GQ_ELIMIT past 32 MiB, more than one review can hold. */
gq_code gq_audit_record_format(const gq_audit_record *rec, char **out, size_t *out_len) GQ_WUR;

typedef enum gq_audit_source {
    GQ_AUDIT_SRC_GPUQUOTA = 0, /* a record of gpuquota's audit log */
    GQ_AUDIT_SRC_APISERVER = 1 /* an audit.k8s.io/v1 Event */
} gq_audit_source;

/* One decision read back, normalised. Every string is owned (NULL when
 * absent), every tree holds a reference (NULL when absent or not read);
 * dispose with gq_audit_entry_dispose. */
typedef struct gq_audit_entry {
    gq_audit_source source;
    char *time; /* RFC 3339 as written */
    int64_t t;  /* time in Unix seconds; valid when has_time */
    bool has_time;
    char *uid;       /* request uid, or the Event's auditID */
    char *webhook;   /* "mutate", "validate", ... */
    char *operation; /* CREATE, UPDATE, DELETE, CONNECT (Event verbs mapped) */
    char *namespace_;
    char *name;
    char *user;
    bool dry_run;
    gq_audit_decision decision;
    char *reason; /* deny or error message */
    int code;     /* Event responseStatus.code; 0 for gpuquota records */
    bool has_charge;
    gq_amounts charge;    /* what the pod costs, as the record says */
    json_object *request; /* gpuquota records only, when the reader kept them */
    json_object *rewrite;
    json_object *quotas;
    bool has_latency;
    double latency_ms;
} gq_audit_entry;

/* Free what e holds and zero it; NULL is accepted. */
void gq_audit_entry_dispose(gq_audit_entry *e);

/* Read a gpuquota record (root, borrowed: a JSON object) into e (zeroed by
 * the caller): every field of gq_audit_record_format. A missing decision
 * reads as allowed. GQ_EINVAL with the field's name when a field has the
 * wrong type or the decision is none of the three; GQ_ENOMEM. On error e may
 * hold part of the record: the caller disposes it either way. */
gq_code gq_audit_record_parse(json_object *root, gq_audit_entry *e, gq_err *err) GQ_WUR;

#endif
