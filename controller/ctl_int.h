/* Private to controller/: pieces shared between its files. */
#ifndef CTL_INT_H
#define CTL_INT_H

#include "controller/ctl.h"
#include "quota/podqueue.h"

/* Parse quota (a GPUQuota or GPUTenantQuota object, borrowed) ignoring its
 * status: the status is ours to rewrite, so a corrupt one must never stop
 * the controller from repairing it. Caller owns *out (gq_quota_free). */
gq_code ctl_quota_parse_spec(json_object *quota, gq_quota **out, gq_err *err) GQ_WUR;

#endif
