/* Lending in a cohort (docs/queueing.md, "Borrowing and reclaim"): what
 * each GPUQuota of a cohort borrows and what it lends right now, as
 * status.borrowed and status.lent report them, and the cohort's totals (its
 * GPUTenantQuota's status). Pure: the members and their usage are inputs.
 *
 * Per key k, for members m[0..n):
 *   borrowed_i = what m_i uses above its hard, for a member that may borrow
 *                (spec.borrowingLimit sets a key; others report nothing);
 *   lendable_i = its unused share (hard - used), at most its lendingLimit:
 *                what the queue planner lends (gq_queue_cohort_add);
 *   B = sum of borrowed_i, L = sum of lendable_i, T = min(B, L);
 *   lent_i     = T shared out pro rata of lendable_i, in whole units of g:
 *                one GPU or pod, and for gpu-memory 1Gi, or the largest
 *                amount that divides every borrowed_i and lendable_i when
 *                one of them is no whole number of GiB:
 *                floor(T/g * lendable_i / L) units each, then one unit more
 *                to each of the members with the largest remainders (ties to
 *                the earlier member) until the units add up to T/g.
 * So lent_i <= lendable_i and the lent add up to the borrowed (T = B),
 * unless borrowers hold more than the lenders leave unused (a reclaim under
 * way, or pods a Deny lender admitted into its own share): then each lender
 * lends all it leaves unused and the rest, B - L, is lent by nobody. A
 * cohort whose lendable total passes INT64_MAX (no real one) shares T out
 * in member order instead, each member at most its lendable. */
#ifndef GQ_LENDING_H
#define GQ_LENDING_H

#include <stddef.h>

#include "common/gq_error.h"
#include "quota/amounts.h"
#include "quota/crd.h"

/* A member of a cohort: a GPUQuota and what it uses. */
typedef struct gq_cohort_member {
    const gq_quota *q; /* hard, borrowingLimit, lendingLimit (borrowed) */
    gq_amounts used;   /* its recounted usage, status.used (unset keys: 0) */
} gq_cohort_member;

/* What one member (or the whole cohort) borrows and lends. */
typedef struct gq_cohort_share {
    bool borrows;        /* it may borrow: borrowed is reported */
    gq_amounts borrowed; /* keys of hard when borrows, else none set */
    gq_amounts lent;     /* keys of hard */
} gq_cohort_share;

/* Whether q may borrow: spec.borrowingLimit sets a key. */
bool gq_quota_may_borrow(const gq_quota *q);

/* out[0..n) = what each of m[0..n) borrows and lends, by the rule above;
 * *total (may be NULL) = their sums (a key set when some member's is;
 * saturating), borrows when some member does. m's order breaks ties:
 * callers give members sorted (by namespace, then name) so that every
 * reader agrees. GQ_ENOMEM. */
gq_code gq_cohort_lending(const gq_cohort_member *m, size_t n, gq_cohort_share *out,
                          gq_cohort_share *total, gq_err *err) GQ_WUR;

#endif
