/* Private to controller/: pieces shared between its files. */
#ifndef CTL_INT_H
#define CTL_INT_H

#include "controller/ctl.h"
#include "quota/podqueue.h"

/* Parse quota (a GPUQuota or GPUTenantQuota object, borrowed) ignoring its
 * status: the status is ours to rewrite, so a corrupt one must never stop
 * the controller from repairing it. Caller owns *out (gq_quota_free). */
gq_code ctl_quota_parse_spec(json_object *quota, gq_quota **out, gq_err *err) GQ_WUR;

/* --- the queue admitter's charges (admit_charge.c) --- */

/* Whether q charges the shared ResourceClaim uid at now: a claim record of
 * its status, counted or live. */
bool ctl_quota_charges_claim(const gq_quota *q, const char *uid, int64_t now);

/* Whether q charges the shared ResourceClaim uid at now on borrowed
 * capacity: its claim record (counted or live) says "borrowing". Every pod
 * naming such a claim is a borrower (docs/queueing.md, "Borrowing and
 * reclaim"). */
bool ctl_quota_claim_borrowed(const gq_quota *q, const char *uid, int64_t now);

/* What the planner charges a queued pod: charge less its shared claims
 * claims[0..n_claims) that every quota it charges (qs[0..nq)) charges
 * already. A claim only some of them charge stays in: the planner has one
 * charge per pod, and more than its due only makes it wait, never passes
 * a limit. */
void ctl_plan_charge(const gq_amounts *charge, const gq_shared_claim *claims, size_t n_claims,
                     const gq_quota *const *qs, size_t nq, int64_t now, gq_amounts *out);

/* A queued pod the planner admitted, as charged. Strings borrowed. */
typedef struct ctl_admitted {
    const char *ns, *name, *uid;
    const char *model;             /* the model it is charged on; NULL: none */
    gq_amounts charge;             /* its whole charge, shared claims included */
    const gq_shared_claim *claims; /* the ResourceClaims it names directly */
    size_t n_claims;
    int64_t expires; /* of the records written (Unix seconds) */
    bool borrowing;  /* admitted on borrowed capacity: its reservation says so */
} ctl_admitted;

/* Charge p in quota q by adding to status (q's status, typed, the
 * caller's), as /validate charges an admission: p's reservation (keyed by
 * its uid) holds its own part, its charge less its shared claims, and
 * lists the claims' uids; each claim that q does not charge yet (a claim
 * record, counted or live at now, in q or added to status earlier in the
 * pass) gets a claim record of its own: gq_claims_once, so two admitted
 * pods naming one claim charge it once. When p borrows, each claim record
 * of status that q does not charge yet (added in this pass) says
 * "borrowing": the claim's charge is borrowed. Lapsed records are dropped
 * from status first. *added is set when a record was added (left alone
 * otherwise). GQ_ELIMIT when status.reservations is full. */
gq_code ctl_ungate_charge(gq_quota_status *status, const gq_quota *q, const ctl_admitted *p,
                          int64_t now, bool *added, gq_err *err) GQ_WUR;

#endif
