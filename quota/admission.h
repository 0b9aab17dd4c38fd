/* The decision on a pod CREATE (docs/architecture.md, "A pod CREATE
 * through /validate"): one pure function over what the caller read, that
 * /validate and the offline `gpuquota admit` (through it) call.
 *
 * It reads nothing itself. It says what it needs (gq_admission.need), the
 * caller reads that into the snapshot and calls again, until the decision
 * is made: a verdict, and for an allowed pod that quotas govern, the quotas
 * to charge in check order and the reservations to write in each. Asking
 * rather than being given everything keeps the reads a decision costs to
 * what it uses: a pod that asks for no GPU reads nothing, a pod that is
 * not queued never lists its group, and a read that fails denies only the
 * pods that needed it (fail closed).
 *
 *   gq_admission a;
 *   gq_admission_init(&a, &in);
 *   while (!(rc = gq_admission_decide(cfg, &a, &err)) && a.need)
 *       read what a.need names into a.snap (or gq_admission_deny on failure);
 *
 * Charging is the caller's: the webhook's group commit evaluates each
 * quota to charge again on a fresh read and writes the reservation. */
#ifndef GQ_ADMISSION_H
#define GQ_ADMISSION_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "common/gq_error.h"
#include "quota/config.h"
#include "quota/crd.h"
#include "quota/pod.h"

/* What a decision asks the caller to read (bits of gq_admission.need). */
typedef enum gq_admission_need {
    /* the namespace's GPULimitRanges: snap.limit_ranges (a JSON array) */
    GQ_NEED_LIMIT_RANGES = 1u << 0,
    /* the namespace's labels (snap.ns_labels, NULL when it has none), its
     * GPUQuotas (snap.quotas) and every GPUTenantQuota (snap.tenant_quotas),
     * JSON arrays, from caches: only their specs decide here */
    GQ_NEED_QUOTAS = 1u << 1,
    /* the pods of the pod's group (label gpuquota.io/pod-group =
     * need_group, in the namespace): snap.group_pods, a fresh list */
    GQ_NEED_GROUP_PODS = 1u << 2,
    /* a fresh read of quota need_fresh (an index into the quotas parsed
     * from the snapshot, gq_admission.set): snap.fresh[need_fresh], NULL
     * when it is gone, with snap.fresh_read[need_fresh] set */
    GQ_NEED_FRESH_QUOTA = 1u << 3,
} gq_admission_need;

/* How long a reservation lives unless a webhook is told otherwise. */
#define GQ_RESERVATION_TTL_DEFAULT 120 /* seconds */

/* What a decision is about. Borrowed: it must outlive the decision. */
typedef struct gq_admission_in {
    json_object *pod;        /* the pod as sent */
    const char *ns;          /* the review's namespace ("" when none) */
    const char *request_uid; /* the review's uid: the fallback reservation key */
    int64_t now;             /* Unix seconds */
    int64_t ttl;             /* seconds a reservation lives */
} gq_admission_in;

/* What the caller read. Every object is owned by the snapshot (given by
 * the caller, freed by gq_admission_dispose). */
typedef struct gq_admission_snapshot {
    unsigned read; /* GQ_NEED_* bits given (GQ_NEED_FRESH_QUOTA: see fresh_read) */
    json_object *limit_ranges;
    json_object *ns_labels, *quotas, *tenant_quotas;
    json_object *group_pods;
    json_object **fresh; /* n_set entries once the quotas are parsed */
    bool *fresh_read;
} gq_admission_snapshot;

/* The verdict: allowed, or the denial with its code (GQ_EDENIED for
 * policy, another code for a read that failed) and Kubernetes' wording. */
typedef struct gq_verdict {
    bool allowed;
    gq_code code;
    char message[GQ_ERR_MSG_MAX];
} gq_verdict;

typedef struct gq_admission {
    gq_admission_in in;
    gq_admission_snapshot snap;
    /* Asked of the caller: GQ_NEED_* bits; 0 when decided. */
    unsigned need;
    char need_group[GQ_POD_GROUP_NAME_MAX + 1];
    size_t need_fresh;
    gq_verdict verdict;
    /* The pod decoded under admission (its charge is the price; zero
     * until priced), and what was parsed from the snapshot. */
    gq_pod pod;
    gq_limit_range **lrs;
    size_t n_lrs;
    gq_quota **set; /* the namespace's GPUQuotas, then every GPUTenantQuota */
    size_t n_set;
    /* Allowed with quotas to charge (must_charge): which, in check order
     * (borrowed from set), and the reservations: the pod's own part (resv,
     * keyed by its uid; alt under the request uid when that differs, for
     * the group commit's rekeying) and one record per shared claim. */
    gq_quota **to_charge;
    size_t n_charge;
    bool must_charge;
    gq_reservation resv, alt, *claims;
    size_t n_claims;
    bool have_resv, have_alt;
    /* Progress between calls (private). */
    size_t choice;           /* the model choice being decided (gated pods) */
    bool decoded;            /* pod holds the choice's decode */
    json_object *choice_pod; /* the pod pinned to that choice (owned) */
    bool lrs_checked;        /* limit ranges passed for this choice */
    bool selected;           /* to_charge selected for this choice */
    size_t fresh_next;       /* next Deny quota whose room is checked */
    bool group_checked;
    bool done; /* decided: called again, GQ_EINVAL */
} gq_admission;

/* Start a decision on in (copied; what it points to is borrowed). */
void gq_admission_init(gq_admission *a, const gq_admission_in *in);
void gq_admission_dispose(gq_admission *a);

/* Decide as far as the snapshot allows. GQ_OK: either a.need names what to
 * read next, or the decision is made (need 0): a.verdict, and when allowed
 * with quotas to charge, must_charge with to_charge and the reservations.
 * GQ_ENOMEM (and GQ_EINVAL for a decision called again after it was made)
 * are the only errors: everything else the pod or the objects read get
 * wrong is a denial. */
gq_code gq_admission_decide(const gq_config *cfg, gq_admission *a, gq_err *err) GQ_WUR;

/* Whether quota q charges the shared claim uid already: a claim record of
 * it (live, or counted by the controller). */
bool gq_quota_charges_claim(const gq_quota *q, const char *uid);

/* What a pod adds to a quota: its own part (resv) plus each of the shared
 * claims claims[0..n_claims) that the quota does not charge yet, as
 * charged(ud, uid) tells (gq_claims_once; charged NULL: none is). fresh[k]
 * says which of claims those are. */
void gq_admission_charge_for(const gq_reservation *resv, const gq_reservation *claims,
                             size_t n_claims, bool (*charged)(void *ud, const char *uid), void *ud,
                             gq_amounts *out, bool fresh[GQ_POD_MAX_CLAIMS]);

/* The check of one quota to charge on a fresh read of it (fresh, parsed),
 * writing nothing: what the dry run and the offline verdict do where the
 * webhook charges. The decided pod (a, allowed with must_charge) adds its
 * own part and the shared claims fresh does not charge yet; now is Unix
 * seconds. GQ_OK with *counts when fresh counts the pod (it would hold a
 * reservation), GQ_EDENIED with Kubernetes' wording in err when the pod
 * would take it past hard; other codes (GQ_ENOMEM, a quota that cannot be
 * evaluated) with err saying why. */
gq_code gq_admission_check_fresh(const gq_admission *a, const gq_quota *fresh, int64_t now,
                                 bool *counts, gq_err *err) GQ_WUR;

/* Deny with a message (a read the caller could not make: fail closed);
 * the decision is made. */
void gq_admission_deny(gq_admission *a, gq_code code, const char *fmt, ...) GQ_PRINTF(3, 4);

/* Deny into a verdict (v's message formatted from fmt, and ap). */
void gq_verdict_deny(gq_verdict *v, gq_code code, const char *fmt, ...) GQ_PRINTF(3, 4);
void gq_verdict_vdeny(gq_verdict *v, gq_code code, const char *fmt, va_list ap) GQ_PRINTF(3, 0);

/* "ns/name" of a GPUQuota, "name" of a GPUTenantQuota, and their kinds. */
void gq_quota_label(const gq_quota *q, char *buf, size_t cap);
const char *gq_quota_kind_name(gq_quota_kind k);

#endif
