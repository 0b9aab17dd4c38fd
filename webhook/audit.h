/* The audit log: one JSON line per admission decision (docs/audit.md).
 *
 * Records are appended to the configured file under O_APPEND (whole lines
 * per write(2)), rotated by size (path -> path.1 -> ... -> path.N), and the
 * file is reopened on request (SIGHUP, for external rotation). By default
 * each record is written by its caller; wh_audit_start_writer moves writing
 * to a thread so request handlers never wait on the disk. A record is never
 * lost silently: every failed write is counted and logged (once per burst);
 * a synchronous caller also learns of it from the return code. Thread-safe. */
#ifndef WH_AUDIT_H
#define WH_AUDIT_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/audit_record.h"
#include "quota/config.h"
#include "common/gq_error.h"
#include "webhook/review.h"

typedef struct wh_audit wh_audit;

/* audit.path that writes the records to standard output, one JSON line
 * each, where `kubectl logs` finds them beside the log (which goes to
 * standard error); the deployed default. */
#define WH_AUDIT_STDOUT "-"

/* Open the audit sink described by cfg: a file (rotated, reopened on
 * request), WH_AUDIT_STDOUT, or standard error (path "" or NULL).
 * Caller owns *out. GQ_EIO when the file cannot be opened. */
gq_code wh_audit_open(const gq_audit_config *cfg, wh_audit **out, gq_err *err) GQ_WUR;

/* Close the sink (after writing everything queued); NULL is accepted. */
void wh_audit_close(wh_audit *a);

/* Most bytes of records queued for the writer thread; callers wait beyond. */
#define WH_AUDIT_QUEUE_MAX ((size_t)8 << 20)

/* Move the writing off the callers' threads (the webhook's request
 * handlers): from now on wh_audit_write and wh_audit_write_line copy the
 * line into a queue and return at once (GQ_OK, or GQ_ENOMEM, counted);
 * a writer thread appends what is queued in batches (it lets records gather
 * for 5 ms after the first one, or until 1 MiB is queued), one write(2) per batch,
 * rotating and reopening exactly as before and counting every record as
 * written or failed (failures logged once per burst). Nothing is dropped:
 * beyond WH_AUDIT_QUEUE_MAX queued bytes callers wait for the writer.
 * wh_audit_close writes everything queued before it returns; a crash loses
 * what is queued, typically under a millisecond of records. GQ_ENOMEM when
 * the thread cannot start (the log stays synchronous). Call once, before
 * other threads write. */
gq_code wh_audit_start_writer(wh_audit *a) GQ_WUR;

/* Wait until every record queued before the call has been written (or
 * counted as failed). No-op for a synchronous log or NULL. */
void wh_audit_flush(wh_audit *a);

/* Ask for the file to be reopened before the next record (async-signal-safe:
 * it only sets a flag). */
void wh_audit_request_reopen(wh_audit *a);

/* One decision; the schema (field names, format) is quota/audit_record.h. */
typedef gq_audit_record wh_audit_record;

/* Start a record for a decision on req (borrowed; it must outlive rec):
 * time now, uid, webhook ("mutate"/"validate"), operation, namespace (NULL
 * when cluster-scoped), name (request.name, else the object's metadata.name,
 * else its generateName), user and dryRun. The caller sets the decision and
 * the rest. */
void wh_audit_record_init(wh_audit_record *rec, const wh_review_request *req, const char *webhook);

/* Format and append rec (or queue it, see wh_audit_start_writer). GQ_EIO
 * (counted and logged) when it could not be written in full. */
gq_code wh_audit_write(wh_audit *a, const wh_audit_record *rec) GQ_WUR;

/* Append a preformatted JSON line (no newline in line). */
gq_code wh_audit_write_line(wh_audit *a, const char *line, size_t len) GQ_WUR;

/* Counters for /metrics. */
uint64_t wh_audit_records(const wh_audit *a);
uint64_t wh_audit_errors(const wh_audit *a);

#endif
