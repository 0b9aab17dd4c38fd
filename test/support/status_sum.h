/* Test helper: what a quota's status, as JSON, charges at now (status.used
 * plus the live reservations, quota/status.h), decoded as policy reads it:
 * a status that does not decode fails, it never passes for a smaller
 * usage. */
#ifndef GQ_TEST_STATUS_SUM_H
#define GQ_TEST_STATUS_SUM_H

#include "quota/status.h"

static inline gq_code status_sum(json_object *status, int64_t now, gq_amounts *out, gq_err *err)
{
    gq_quota_status st;
    gq_code rc = gq_quota_status_decode(status, GQ_STATUS_POLICY, &st, err);
    if (rc)
        return rc;
    rc = gq_quota_status_sum(&st, now, out, err);
    gq_quota_status_dispose(&st);
    return rc;
}

#endif
