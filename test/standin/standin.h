/* kube-standin — an in-memory stand-in for kube-apiserver used by integration
 * tests. Only the HTTP adapter (main.c) includes libmicrohttpd and only admit.c libcurl; everything
 * else works on sreq/sresp so a request can be handled without a socket.
 *
 * Locking: one global store lock (st_lock/st_unlock) guards the object store,
 * the event history, the fault state and the counters. Request handlers hold
 * it for the whole request except while a watch waits or a webhook is called. */
#ifndef STANDIN_H
#define STANDIN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "common/buf.h"
#include "common/gq_error.h"

#define SI_BODY_MAX (3u * 1024u * 1024u) /* kube-apiserver's request body limit */
#define SI_NAME_MAX 253
#define SI_SEL_MAX 4096   /* longest label/field selector accepted */
#define SI_JSON_DEPTH 100 /* nesting limit for request bodies */

/* ---- text buffers: common/buf.h's gq_buf, with these caps ---- */
/* A text built from one request (keys, selectors, messages, a body's
 * base64): base64 or backslash escaping at most doubles what it came from. */
#define SI_TEXT_MAX (2 * (size_t)SI_BODY_MAX)
/* A list response: the store's objects as JSON, all of them at worst. No
 * test's store comes near; past it the list fails with 500 InternalError. */
#define SI_LIST_MAX ((size_t)1 << 30)
/* Hand b's NUL-terminated text to the caller: NULL when an append failed
 * (past the cap, out of memory), b disposed either way. */
char *si_buf_take(gq_buf *b);

/* ---- resource types (types.c) ---- */
typedef struct rtype {
    char group[128];
    char version[64];
    char resource[128]; /* plural */
    char singular[128];
    char kind[128];
    char list_kind[160];
    char skey[260]; /* store key: "resource" for core, "group/resource" otherwise */
    int namespaced;
    int has_status;       /* has a status subresource */
    int create_on_update; /* PUT of a missing object creates it */
    int custom;           /* defined by a CRD */
    int has_generation;   /* maintain metadata.generation */
    const char *short_names[8];
    const char *categories[4];
    const char *field_labels[12]; /* beyond metadata.name / metadata.namespace */
    json_object *crd;             /* owned ref to the defining CRD (custom types) */
    json_object *crd_version;     /* borrowed from crd: the served version entry */
} rtype;

/* Resolve group/version/resource (group "" = core) to a type, copying into
 * *out. Custom types hold a CRD reference: release with rtype_dispose.
 * Returns 0 when found. Caller holds the store lock. */
int rtype_lookup(const char *group, const char *version, const char *resource, rtype *out);
/* Release a looked-up type's CRD reference (lock held); NULL is accepted. */
void rtype_dispose(rtype *t);
/* The built-in types (static table of *n entries). */
const rtype *rtype_builtins(size_t *n);
/* Store key of the CRs a CRD defines (group/plural) into buf. */
void rtype_crd_skey(json_object *crd, char *buf, size_t n);
/* The string a Status names for the resource: "pods" or "gpuquotas.gpuquota.io". */
void rtype_qualified(const rtype *t, char *buf, size_t n);

/* ---- store (store.c) ---- */
enum ev_type { EV_ADDED, EV_MODIFIED, EV_DELETED };
typedef struct st_event {
    uint64_t rv;
    int type;
    char *skey;
    char *ns;
    json_object *obj;  /* owned ref, never mutated */
    json_object *prev; /* MODIFIED: the state before (owned ref), else NULL */
} st_event;

/* Set up the store with room for `history` watch events; st_shutdown frees
 * everything (after the last request). */
void st_init(size_t history);
void st_shutdown(void);
void st_lock(void);
void st_unlock(void);
uint64_t st_rv(void);      /* current (latest) resourceVersion */
uint64_t st_next_rv(void); /* allocate the next resourceVersion */
/* Borrowed pointer to the stored object or NULL. */
json_object *st_get(const char *skey, const char *ns, const char *name);
/* Insert or replace; takes ownership of obj whose metadata.resourceVersion is
 * already set to rv. Emits ADDED or MODIFIED. */
gq_code st_put(const char *skey, const char *ns, const char *name, json_object *obj,
               uint64_t rv) GQ_WUR;
/* Remove; emits DELETED with a copy of the object carrying rv. */
void st_del(const char *skey, const char *ns, const char *name, uint64_t rv);
/* Visit stored objects of skey (ns NULL = all namespaces) in namespace/name
 * order, starting strictly after the composite key `after` (NULL = start).
 * Stop early when fn returns nonzero. */
typedef int (*st_visit_fn)(void *ctx, const char *ns, const char *name, json_object *obj);
void st_each(const char *skey, const char *ns, st_visit_fn fn, void *ctx);
/* st_each starting after the object after_ns/after_name (in store order; it
 * need not exist any more); after_name NULL starts at the beginning. */
void st_each_after(const char *skey, const char *ns, const char *after_ns, const char *after_name,
                   st_visit_fn fn, void *ctx);
/* A list page: visit objects of skey (ns NULL = all namespaces) after
 * after_ns/after_name like st_each_after, each with its JSON text without
 * kind and apiVersion (serialised once, kept until the object is replaced;
 * borrowed, valid while the lock is held). fn returns 1 when it took the
 * object; the visit stops once `want` were taken. Returns how many objects
 * follow the start in all (whether visited or not); *oom set on OOM. */
typedef int (*st_page_fn)(void *ctx, json_object *obj, const char *text, size_t len);
size_t st_page(const char *skey, const char *ns, const char *after_ns, const char *after_name,
               size_t want, st_page_fn fn, void *ctx, int *oom);
/* Event history: events with rv > since, in order; returns count copied
 * (refs are borrowed; caller holds the lock). *expired set when events after
 * `since` were already dropped. */
size_t st_events_since(uint64_t since, const st_event **out, size_t max, int *expired);
/* Wait up to ms for a new event (lock held on entry and exit). */
void st_wait(int ms);
/* Oldest resourceVersion a watch can still start from. */
uint64_t st_history_start(void);
/* Save the current state and revision (an etcd backup); 0, or -1 on OOM. */
int st_snapshot(void);
/* Go back to the saved state: objects, the revision counter (so
 * resourceVersions run again from there) and an empty event history, as
 * when etcd is restored from a backup; the epoch moves on so every open
 * watch ends, as kube-apiserver restarting would end it. 0, 1 without a
 * snapshot, -1 on OOM. */
int st_restore(void);
unsigned long st_epoch(void);
void st_broadcast(void);

/* ---- selectors (select.c) ---- */
typedef struct selector selector;
/* Parse a label selector; NULL/"" selects everything. On error fills err. */
gq_code sel_parse_labels(const char *s, selector **out, gq_err *err) GQ_WUR;
/* Parse a field selector restricted to the fields type t supports. */
gq_code sel_parse_fields(const char *s, const rtype *t, selector **out, gq_err *err) GQ_WUR;
int sel_match_labels(const selector *s, json_object *obj);
int sel_match_fields(const selector *s, json_object *obj);
int sel_empty(const selector *s);
void sel_free(selector *s);

/* ---- patches (patch.c) ---- */
/* Each returns a new object (owned) or an error; the target is not modified. */
gq_code patch_merge(json_object *target, json_object *patch, json_object **out, gq_err *err) GQ_WUR;
gq_code patch_json(json_object *target, json_object *ops, json_object **out, gq_err *err) GQ_WUR;
gq_code patch_strategic(json_object *target, json_object *patch, json_object **out,
                        gq_err *err) GQ_WUR;

/* ---- printing (table.c) ---- */
/* Build a meta.k8s.io/v1 Table for items (array, borrowed). include is
 * "None", "Object" or NULL/"Metadata" (PartialObjectMetadata). */
json_object *table_build(const rtype *t, json_object *items, const char *rv, const char *include,
                         int with_columns);
/* Human duration as kubectl/apimachinery prints ages ("5m3s"). */
void table_age(long long seconds, char *buf, size_t n);

/* ---- the HTTP-independent request handler (api.c) ---- */
typedef struct sreq {
    const char *method;
    const char *path;
    const char *body;
    size_t body_len;
    /* query parameter / header lookup (NULL when absent) */
    const char *(*query)(void *ctx, const char *key);
    const char *(*header)(void *ctx, const char *key);
    void *ctx;
} sreq;

typedef struct watch_state watch_state;

typedef struct sresp {
    int code;
    char *body; /* owned, NUL-terminated */
    const char *content_type;
    watch_state *watch; /* non-NULL: stream this instead of body */
    char *warnings[8];  /* owned Warning header texts */
    int n_warnings;
} sresp;

/* Free a response's body, warnings and any watch it still owns; NULL is accepted. */
void sresp_dispose(sresp *r);
/* Handle one request (lock NOT held on entry). */
void api_handle(const sreq *rq, sresp *rs);
/* Create the namespaces every cluster starts with (default, kube-system). */
void api_bootstrap(void);
/* Discovery (/version, /api, /apis...) and OpenAPI documents; 1 when handled.
 * Lock held. */
int disco_handle(const sreq *rq, sresp *rs);
int openapi_handle(const sreq *rq, sresp *rs);
/* Decode a protobuf-encoded Namespace, ConfigMap or Secret (the kinds kubectl's
 * typed commands send) into JSON (owned); NULL with err for anything else. */
json_object *proto_decode(const char *buf, size_t n, gq_err *err);
/* Fill rs with a Status error object. */
void api_status(sresp *rs, int code, const char *reason, const char *msg, const char *name,
                const char *group, const char *kind);
void api_set_json(sresp *rs, int code, json_object *obj);
/* A Failure Status object (owned by the caller); details when any of
 * name/group/kind is given ("" kind: empty details). */
/* Fill rs with a Failure Status carrying the given details (borrowed, may be NULL). */
void api_status_details(sresp *rs, int code, const char *reason, const char *msg,
                        json_object *details);
json_object *api_status_obj(int code, const char *reason, const char *msg, const char *name,
                            const char *group, const char *kind);

/* ---- faults and counters (faults.c); callers hold the store lock ---- */
typedef struct fault_state {
    long fail_count;
    int fail_code;
    char fail_method[16];
    char fail_prefix[256];
    long latency_ms;
    long cut_after;        /* 0 = off */
    unsigned long cut_gen; /* bumped each time cutWatchAfter is set */
    long watch_gone;
    long conflict_status;
    /* counters */
    unsigned long by_verb[8];
    long watches_open;
    unsigned long status_writes;
    unsigned long conflicts_injected;
    unsigned long faults_injected;
} fault_state;
extern fault_state g_faults;
enum {
    VERB_GET,
    VERB_LIST,
    VERB_WATCH,
    VERB_CREATE,
    VERB_UPDATE,
    VERB_PATCH,
    VERB_DELETE,
    VERB_OTHER
};
/* Handle /standin/... control requests; returns 1 when handled. */
int faults_handle(const sreq *rq, sresp *rs);
/* 1 and fills rs when a `fail` fault consumes this request. */
int faults_take_fail(const char *method, const char *path, sresp *rs);

/* ---- watch streaming (watch.c) ---- */
/* Start a watch for type t (copied, with its CRD ref taken over: t is left
 * empty) and the selectors (taken over, set to NULL); fills rs->watch or an
 * error Status. Caller holds the store lock. */
void watch_start(const sreq *rq, rtype *t, const char *ns, selector **lsel, selector **fsel,
                 int table, sresp *rs);
/* Socket to poll for client hang-up while waiting (-1: none). */
void watch_set_fd(watch_state *w, int fd);
extern atomic_int g_stopping; /* set once at shutdown */
/* Produce the next bytes of the stream into buf (blocking up to ~1 s);
 * returns bytes written, 0 to poll again, -1 at end of stream. Lock NOT held. */
long watch_read(watch_state *w, char *buf, size_t max);
void watch_free(watch_state *w);

/* ---- admission webhooks (admit.c) ---- */
/* Call the stored mutating (mutating=1) or validating webhook configurations
 * that match a write of *obj (old: the stored object for UPDATE, else NULL).
 * Caller holds the store lock; it is released while webhooks are called, so
 * the caller must re-check state it depends on. Mutations replace *obj.
 * Warnings go to rs. Returns 0 to proceed, else rs holds the error Status. */
int admit_run(const sreq *rq, const char *op, const rtype *t, const char *ns, json_object **obj,
              json_object *old, int dry_run, int mutating, sresp *rs);
void admit_set_service(const char *hostport);
/* Process-wide HTTP client setup; call before any thread starts / at exit. */
void admit_global_init(void);
void admit_global_cleanup(void);

/* ---- pod defaults (defaults.c) ---- */
/* The scheme defaults kube-apiserver's decoder applies to a pod, on create
 * and update, before admission: canonical quantities in resources and
 * overhead, requests defaulted to limits, restartPolicy, dnsPolicy,
 * terminationGracePeriodSeconds, securityContext, schedulerName,
 * enableServiceLinks. GQ_EINVAL (with kube's decoder message, a 400) for a
 * quantity that does not parse. */
gq_code pod_defaults(json_object *pod, gq_err *err) GQ_WUR;
/* The built-in mutating admission plugins that run before webhooks on a pod
 * CREATE: ServiceAccount (serviceAccountName) and Priority (priority and
 * preemptionPolicy when no class, or a built-in class, is named). */
void pod_admission_defaults(json_object *pod);

/* ---- small helpers (util.c) ---- */
void si_now_rfc3339(char *buf, size_t n);
long long si_parse_rfc3339(const char *s);            /* seconds since epoch, -1 on error */
void si_uuid(char *buf, size_t n);                    /* needs 37 bytes */
void si_random_suffix(char *buf);                     /* 5 chars + NUL */
const char *si_str(json_object *o, const char *path); /* dotted path lookup; NULL if absent */
json_object *si_obj(json_object *o, const char *key); /* borrowed child object, or NULL */
json_object *si_parse_json(const char *s, size_t n, gq_err *err);
const char *si_to_json(json_object *o);
/* Base64: standard padded, or (url) unpadded base64url. Owned result, NULL on OOM. */
char *si_b64_encode(const void *data, size_t n, int url);
/* Decode either alphabet, padding optional; NUL-terminated owned result
 * (its length in *out_len), NULL on invalid input. */
char *si_b64_decode(const char *s, size_t *out_len);

#endif
