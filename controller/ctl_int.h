/* Private to controller/: pieces shared between its files. */
#ifndef CTL_INT_H
#define CTL_INT_H

#include "controller/ctl.h"

/* Parse quota (a GPUQuota or GPUTenantQuota object, borrowed) ignoring its
 * status: the status is ours to rewrite, so a corrupt one must never stop
 * the controller from repairing it. Caller owns *out (gq_quota_free). */
gq_code ctl_quota_parse_spec(json_object *quota, gq_quota **out, gq_err *err) GQ_WUR;

/* ctl_reconcile with the spec already parsed (q from ctl_quota_parse_spec
 * of quota). */
gq_code ctl_reconcile_parsed(const gq_quota *q, json_object *quota, const gq_usage_pod *pods,
                             size_t n, ctl_seen_fn seen, void *seen_ud, int64_t now,
                             ctl_result *out, gq_err *err) GQ_WUR;

#endif
