/* Reading audit logs back (`gpuquota audit`, DESIGN.md §6): one line of
 * gpuquota's own audit log (docs/audit.md, read through the schema module
 * quota/audit_record.h) or of a kube-apiserver audit log (audit.k8s.io/v1
 * Event) into one normalised record, filters over records, and a
 * per-namespace summary. A feature of the CLI, not policy; still pure: lines
 * come from the caller, the current time is a parameter. Decisions are written down in
 * docs/audit.md
 * ("Reviewing"). */
#ifndef CLI_AUDITLOG_H
#define CLI_AUDITLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "quota/audit_record.h"
#include "quota/crd.h"
#include "common/gq_error.h"
#include "common/buf.h"
#include "common/jsonutil.h"

/* Longest line the reader accepts (callers skip and count longer ones). */
#define CLI_AUDIT_LINE_MAX ((size_t)1 << 20)

/* Parse one line (no newline; a trailing '\r' is allowed), also as `kubectl
 * logs --prefix [--timestamps]` prints a container's line: "[pod/NAME/C] "
 * and a timestamp before the JSON object are passed over. On GQ_OK *out
 * holds the record (caller disposes). GQ_ENOTFOUND: well-formed JSON that is
 * not a decision to review (another object, an Event that no gpuquota webhook
 * took part in, or an Event stage other than ResponseComplete/Panic).
 * GQ_EINVAL: not JSON, or a record with a field of the wrong type. GQ_ELIMIT:
 * longer than CLI_AUDIT_LINE_MAX. GQ_ENOMEM. *out is untouched on error. */
gq_code cli_audit_parse_line(const char *line, size_t len, gq_audit_entry *out, gq_err *err) GQ_WUR;

/* --since: a duration ("90m", "2h", "7d", "1h30m", "45s") before now, or an
 * RFC 3339 time. *out is the earliest Unix second that passes. GQ_EINVAL
 * with a message otherwise; GQ_ERANGE when it overflows. */
gq_code cli_audit_parse_since(const char *s, int64_t now, int64_t *out, gq_err *err) GQ_WUR;

/* What a record must match; NULL/false fields do not filter. All borrowed. */
typedef struct cli_audit_filter {
    bool has_since;
    int64_t since; /* records without a time never pass */
    const char *namespace_;
    const char *user;
    const char *webhook;
    bool denied_only;
    /* --tenant: the GPUTenantQuota, and the labels of namespaces known from
     * state (ns_names[i] has labels ns_labels[i], which may be NULL). */
    const gq_quota *tenant;
    const char *const *ns_names;
    json_object *const *ns_labels;
    size_t n_ns;
} cli_audit_filter;

bool cli_audit_matches(const gq_audit_entry *e, const cli_audit_filter *f);

/* The longest text cli_audit_entry_to_json writes: every string of the entry
 * comes from one line of at most CLI_AUDIT_LINE_MAX bytes, and escaping
 * makes a byte at most six (\u00XX); 4 KiB more holds the member names and
 * the charge. An entry the reader accepted always fits. */
#define CLI_AUDIT_JSON_MAX (6 * CLI_AUDIT_LINE_MAX + 4096)

/* Append e as one compact JSON object (no newline) to b (initialised with
 * CLI_AUDIT_JSON_MAX as its cap; errors are b's sticky one):
 * {"source","time","uid","webhook","operation","namespace","name","user",
 *  "dryRun","decision","reason","code","charge"}; "code" only for Events,
 * "charge" (canonical quantities) only when known. */
void cli_audit_entry_to_json(const gq_audit_entry *e, gq_buf *b);

/* "gpu-memory=20Gi,gpus=0,gpu-pods=1" (the keys the record gave) into buf
 * (cap bytes, cap >= 1); "" without a charge. */
void cli_audit_charge_text(const gq_audit_entry *e, char *buf, size_t cap);

/* Deny reasons are grouped by their text up to the first ", " outside
 * quotes and brackets (the quota, limit or container they name, without the
 * changing figures), at most CLI_AUDIT_REASON_KEY_MAX - 1 bytes. */
#define CLI_AUDIT_REASONS_MAX 64 /* distinct groups kept per namespace */
#define CLI_AUDIT_REASON_KEY_MAX 128

typedef struct cli_audit_reason {
    char text[CLI_AUDIT_REASON_KEY_MAX];
    uint64_t count;
} cli_audit_reason;

typedef struct cli_audit_ns_summary {
    char *namespace_; /* "" for records without a namespace */
    uint64_t admitted, denied, errors;
    int64_t charged_bytes; /* gpu-memory of admitted, charged validate decisions */
    bool charged_overflow;
    cli_audit_reason *reasons; /* sorted by count (desc), then text, after finish */
    size_t n_reasons;
    uint64_t other_reasons; /* denials beyond CLI_AUDIT_REASONS_MAX groups */
} cli_audit_ns_summary;

/* Caller-owned: zero it (or cli_audit_summary_init), add records, finish,
 * read ns[0..n_ns) (sorted by namespace) and total, dispose. */
typedef struct cli_audit_summary {
    cli_audit_ns_summary *ns;
    size_t n_ns, cap;
    cli_audit_ns_summary total; /* reasons of all namespaces together */
} cli_audit_summary;

void cli_audit_summary_init(cli_audit_summary *s);
void cli_audit_summary_dispose(cli_audit_summary *s);

/* Count e: admitted/denied/errors by decision; gpu-memory charged only for
 * allowed, non-dry-run decisions of the validate webhook (the one that
 * charges quota) that carry a charge. GQ_ENOMEM. */
gq_code cli_audit_summary_add(cli_audit_summary *s, const gq_audit_entry *e) GQ_WUR;

/* Sort namespaces and reasons for output. */
void cli_audit_summary_finish(cli_audit_summary *s);

#endif
