/* The audit log: one JSON line per admission decision (docs/audit.md).
 *
 * Records are appended to the configured file with one write(2) each under
 * O_APPEND, rotated by size (path -> path.1 -> ... -> path.N), and the file is
 * reopened on request (SIGHUP, for external rotation). A record is never lost
 * silently: every failed write is counted and logged (once per burst), and the
 * caller learns of it from the return code. Thread-safe. */
#ifndef WH_AUDIT_H
#define WH_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "config.h"
#include "gq_error.h"

typedef struct wh_audit wh_audit;

/* Open the audit sink described by cfg (path "" or NULL = stderr).
 * Caller owns *out. GQ_EIO when the file cannot be opened. */
gq_code wh_audit_open(const gq_audit_config *cfg, wh_audit **out, gq_err *err) GQ_WUR;

/* Close the sink; NULL is accepted. */
void wh_audit_close(wh_audit *a);

/* Ask for the file to be reopened before the next record (async-signal-safe:
 * it only sets a flag). */
void wh_audit_request_reopen(wh_audit *a);

/* One decision. Strings are borrowed; NULL fields are written as null or
 * omitted as docs/audit.md says. */
typedef struct wh_audit_record {
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
} wh_audit_record;

/* Serialise rec as one JSON object (no newline). Caller frees *out. */
gq_code wh_audit_format(const wh_audit_record *rec, char **out, size_t *out_len) GQ_WUR;

/* Format and append rec. GQ_EIO (counted and logged) when it could not be
 * written in full. */
gq_code wh_audit_write(wh_audit *a, const wh_audit_record *rec) GQ_WUR;

/* Append a preformatted JSON line (no newline in line). */
gq_code wh_audit_write_line(wh_audit *a, const char *line, size_t len) GQ_WUR;

/* Counters for /metrics. */
uint64_t wh_audit_records(const wh_audit *a);
uint64_t wh_audit_errors(const wh_audit *a);

#endif
