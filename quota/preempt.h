/* Preemption inside a quota (docs/queueing.md, "Preemption"): which
 * admitted pods to evict so that a queued pod, or a whole queued pod group,
 * fits. Pure: the controller gives the queue planner's view of the quotas
 * (gq_queue_quota) and the admitted pods, and evicts what this returns.
 *
 * The rule, with Kueue's names (spec.preemption.withinQuota):
 * - only quotas the preemptor does not fit now ("blocking") matter; when one
 *   of them says Never, nothing is evicted;
 * - a candidate counts in at least one blocking quota and, for every
 *   blocking quota it counts in, has a lower priority than the preemptor
 *   (LowerPriority), or a lower one or an equal one and a later creation
 *   (LowerOrNewerEqualPriority); a group preemptor is every one of its
 *   members (a candidate is lower than its lowest member), whatever place
 *   its highest member gives it in the queue;
 * - a pod group is a candidate whole or not at all (every member a
 *   candidate); a pod the caller spares (a disruption budget refused its
 *   eviction) is none, nor is its group;
 * - a pod already leaving (evicted or deleted, it counts until it is gone)
 *   is no candidate (evicting it again would free nothing more), and the
 *   room pods leaving will free is the preemptor's (gq_queue_quota.leaving:
 *   what no held preemptor has taken of it already);
 * - candidates are taken lowest priority first, then most recently
 *   admitted, until the preemptor fits every quota it charges; then each
 *   taken back, last first, whose eviction is not needed for the fit (the
 *   set is minimal: no victim can be left out);
 * - when even every candidate would not make the preemptor fit (another
 *   quota would still block it), nothing is evicted.
 *
 * Reclaim (spec.preemption.reclaimWithinCohort, Kueue's names): a
 * preemptor within its own quota's nominal share may also evict pods that
 * borrowed from its cohort (GQ_ANN_BORROWING) - of lower priority
 * (LowerPriority) or any (Any) - when the quota that blocks it is its own
 * (its cohort lends what the borrowers hold) or a GPUTenantQuota. Such a
 * blocking quota is then no "Never" stop. Borrowers of the cohort are
 * evicted before anyone the quota's withinQuota allows, lowest priority
 * first, and only while the quota they borrowed through (the member of the
 * preemptor's cohort they count in) is still above hard on a key they
 * charge: a marked pod whose quota went back within its share (pods
 * admitted within it ended) borrows nothing. A group with a member marked
 * is a borrower, evicted whole (under LowerPriority when each member is
 * below the preemptor): members admitted within the share shield nobody.
 *
 * Shared ResourceClaims: pods that name one claim (and are not leaving)
 * are one candidate with each other and with their groups' members, the
 * union evicted whole or not at all, as a group: evicting one of them frees
 * nothing of the claim while another holds it. The candidate frees each of
 * its pods' own parts and each claim once per quota; it is a borrower when
 * any member is marked, and worth its highest member. */
#ifndef GQ_PREEMPT_H
#define GQ_PREEMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/gq_error.h"
#include "quota/crd.h"
#include "quota/podqueue.h"

/* An admitted pod that counts in some quotas. Strings are borrowed. */
typedef struct gq_preempt_pod {
    const char *uid;
    const char *group;    /* NULL: alone; else a key unique in the cluster ("ns/name") */
    int32_t priority;     /* spec.priority */
    int64_t created_us;   /* metadata.creationTimestamp */
    int64_t admitted_us;  /* when its charge began (ungated, or created when never queued) */
    gq_amounts charge;    /* what it counts */
    const char *model;    /* the model it counts against; NULL: every model a quota lists */
    const size_t *quotas; /* indices of the quotas it counts in */
    size_t n_quotas;
    bool spared;  /* may not be evicted (a disruption budget refused it) */
    bool leaving; /* being evicted or deleted: no candidate (its room is in the quotas' leaving) */
    /* Admitted on capacity its quota borrowed (GQ_ANN_BORROWING), from
     * cohort (NULL: it borrowed nothing): a candidate for reclaim. */
    bool borrowing;
    const gq_queue_cohort *cohort;
    /* The shared ResourceClaims it names directly (borrowed), each in
     * charge: a quota charges a claim once however many pods name it, and
     * frees it only when the last of them goes. */
    const gq_shared_claim *claims;
    size_t n_claims;
} gq_preempt_pod;

/* What to preempt for. Everything is borrowed. */
typedef struct gq_preempt_ask {
    /* the preemptor: a pod, or its group's queued members, each with its
     * priority and creation */
    const gq_queue_entry *members;
    size_t n_members;
    size_t option;                /* the model option it is tried on (0 without a choice) */
    const gq_queue_quota *quotas; /* the planner's quotas, in use (and leaving) as now */
    size_t nq;
    const gq_preempt_pod *pods; /* every admitted pod counting in those quotas */
    size_t n_pods;
    /* Reclaim: the preemptor's own GPUQuota's reclaimWithinCohort and
     * cohort, when the preemptor is within that quota's nominal share
     * (else GQ_RECLAIM_NEVER). */
    gq_reclaim_policy reclaim;
    const gq_queue_cohort *cohort;
} gq_preempt_ask;

/* The victims for ask: indices into ask->pods in eviction order
 * (victims has room for n_pods), *n_victims of them; 0 when the preemptor
 * fits already. GQ_ENOTFOUND (*n_victims 0) when no set of candidates
 * makes it fit, with the reason in err; GQ_ENOMEM; GQ_EINVAL for an index
 * >= nq. */
gq_code gq_preempt_plan(const gq_preempt_ask *ask, size_t *victims, size_t *n_victims,
                        gq_err *err) GQ_WUR;

/* Count in the leaving room of the quotas pq[from..nq) (gq_queue_quota_leaving)
 * what the pods leaving among pods[0..n) will free: each one's own part
 * (its charge less its shared claims), and each claim they name once per
 * quota, and only when no pod of pods that stays counts in that quota and
 * names it (the claim stays charged while one does). GQ_ENOMEM; GQ_EINVAL
 * for a quota index >= nq. */
gq_code gq_preempt_leaving(const gq_preempt_pod *pods, size_t n, gq_queue_quota *pq, size_t nq,
                           size_t from) GQ_WUR;

#endif
