/* One webhook replica's escrow of one GPUQuota's free room
 * (docs/validating-webhook.md, "Escrow").
 *
 * A round of the group commit that charges a pod may also take a hold: a
 * record in the quota's status (gq_reservation, escrow GQ_ESCROW_HOLD,
 * keyed by the replica's hold key) of part of the room still free, written
 * in the same resourceVersion-checked update as the charge. Later pods the
 * replica admits against that quota are charged against the hold in memory,
 * with no write: everybody counts the hold in full (it is a live
 * reservation), so the sum of what is admitted never exceeds spec.hard.
 * The next round on the quota (the hold ran short, went idle, was wanted by
 * another replica, or nears its expiry) writes the pods admitted on it as
 * reservations of their own (GQ_ESCROW_ADMITTED) and takes the hold out, in
 * one update. A replica that dies leaves its hold to expire: its pods are
 * charged by it until then, so the hold lives at least half the
 * reservation TTL past every admission on it.
 *
 * The ledger is owned by the slot of its quota: the thread that runs the
 * slot's rounds changes it, and admissions change it under the validator's
 * lock while no round runs. Pure: no clocks (times are parameters), no
 * I/O. */
#ifndef WH_ESCROW_H
#define WH_ESCROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/gq_error.h"
#include "quota/amounts.h"
#include "quota/crd.h"
#include "quota/status.h"

/* Most pods' worth one hold covers. */
#define WH_ESCROW_PODS_MAX 256
/* A hold is taken only when it covers at least this many pods. */
#define WH_ESCROW_PODS_MIN 2
/* How long a want asks holders to give back (seconds). */
#define WH_ESCROW_WANT_TTL_S 5

typedef struct wh_escrow {
    bool held;                    /* our hold is in the status as last written */
    gq_amounts amount;            /* its amounts */
    bool limited[GQ_KEY_COUNT];   /* the keys the quota limited when it was taken */
    int64_t expires;              /* its expiry, Unix seconds */
    int64_t generation;           /* the quota's metadata.generation it was taken on */
    char uid[GQ_CRD_UID_MAX + 1]; /* and its metadata.uid (a quota made anew is another) */
    gq_reservation *local;        /* pods admitted on it, not written yet (owned copies) */
    size_t n_local, cap_local;
    double last_use; /* monotonic seconds: the hold was taken or last admitted on */
    bool give_back;  /* give it back at the next round (idle, wanted, stopping) */
} wh_escrow;

/* The identity of one replica's records: "escrow-" and "want-" followed by
 * a nonce of its process (a restarted replica never takes an old hold for
 * its own: it cannot know what was admitted on it), and the name its
 * records give as pod (the replica's host name). */
typedef struct wh_escrow_id {
    char hold_key[48];
    char want_key[48];
    char holder[64];
} wh_escrow_id;

/* A fresh identity: nonce from the system's random source. GQ_EIO when it
 * cannot be read. */
gq_code wh_escrow_id_new(wh_escrow_id *id, gq_err *err) GQ_WUR;

/* Release what e holds in memory (not its hold in the status). */
void wh_escrow_dispose(wh_escrow *e);

/* When an admission on a hold happens: wall clock (Unix s), the
 * reservation TTL (s), monotonic clock (s). */
typedef struct wh_escrow_clock {
    int64_t now, ttl_s;
    double mono;
} wh_escrow_clock;

/* Admit a pod charging `charge` with reservation resv against e's hold,
 * without a write: true (resv copied into e->local) when the hold is ours,
 * not being given back, taken on q's current generation of the same object
 * (uid), usable at t->now
 * (at least half the reservation TTL before its expiry), resv's key is not
 * on it yet, and what was admitted on it plus charge fits its amount on
 * every key it limits. False: the pod goes through a round (also when the
 * copy could not be allocated). */
bool wh_escrow_admit(wh_escrow *e, const gq_quota *q, const gq_reservation *resv,
                     const gq_amounts *charge, const wh_escrow_clock *t);

/* Take the reservation keyed key off e's ledger (a rollback of a pod
 * admitted on the hold); true when it was there. */
bool wh_escrow_release(wh_escrow *e, const char *key);

/* At the start of a round on st: our hold (id->hold_key) comes out, and
 * every pod admitted on it goes in as a GQ_ESCROW_ADMITTED reservation
 * (unless its key is there). *changed is set when st changed. GQ_ELIMIT or
 * GQ_ENOMEM leave st as it was. */
gq_code wh_escrow_flush(const wh_escrow *e, const wh_escrow_id *id, gq_quota_status *st,
                        bool *changed, gq_err *err) GQ_WUR;

/* The hold to take on q after a round: `pods` (at most
 * WH_ESCROW_PODS_MAX) times unit, the charge of the pod that asked, cut to
 * a quarter of the room left, and to what leaves half of hard free, on
 * every key the quota or one of its models limits (in_use: the quota's
 * usage with the round's charges; mview: each model's, parallel to
 * q->models), in whole units. False when that covers fewer than
 * WH_ESCROW_PODS_MIN pods (no hold); else *out (every key set) and
 * limited[] (the keys limited). */
bool wh_escrow_size(const gq_quota *q, const gq_amounts *in_use, const gq_model_limit *mview,
                    const gq_amounts *unit, unsigned pods, gq_amounts *out,
                    bool limited[GQ_KEY_COUNT]);

/* How st stands to the escrows of other replicas (not id's). */
typedef struct wh_escrow_others {
    bool holds;      /* a live hold of another replica */
    bool admitted;   /* a pod admitted on a hold, written after the controller last counted */
    bool want;       /* a live want of another replica */
    int64_t my_want; /* expiry of our live want, 0: none */
    /* What those holds, and those admitted records, charge in all (per
     * key, saturating): the most that settling them can free. */
    int64_t held[GQ_KEY_COUNT], unsettled[GQ_KEY_COUNT];
} wh_escrow_others;

void wh_escrow_others_of(const gq_quota_status *st, const wh_escrow_id *id, int64_t now,
                         wh_escrow_others *out);

/* The record of a hold (amounts, expires) or of a want (zero amounts) of id
 * in namespace ns, ready for gq_quota_status_add_reservation (strings
 * borrowed from id and ns: never dispose it). */
gq_reservation wh_escrow_record(const wh_escrow_id *id, gq_escrow_kind kind, const char *ns,
                                const gq_amounts *amount, int64_t expires);

#endif
