/* AdmissionReview (admission.k8s.io/v1) codec: request decoding and response
 * encoding exactly as kube-apiserver checks them. No sockets: the HTTP layer
 * hands over a body it has already capped (3 MiB) and writes back the text
 * wh_review_encode produces.
 *
 * Versions: kube-apiserver sends the first version of the webhook
 * configuration's admissionReviewVersions that it understands, and requires
 * the response in that same version. Our configurations list only v1, but a
 * v1beta1 review (an older or hand-written configuration) has the same shape,
 * so both are accepted and the response echoes the request's apiVersion. */
#ifndef WH_REVIEW_H
#define WH_REVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "common/gq_error.h"
#include "common/jsonutil.h"
#include "http/server.h"

#define WH_REVIEW_MAX_DEPTH 64  /* JSON nesting accepted in a request body */
#define WH_UID_MAX 128          /* bytes of request.uid */
#define WH_WARNING_MAX 120      /* bytes of one warning */
#define WH_WARNINGS_MAX 32      /* warnings in one response */
#define WH_MESSAGE_MAX 1024     /* bytes of a deny message */
#define WH_AUDIT_KEY_MAX 63     /* bytes of an auditAnnotations key */
#define WH_AUDIT_VALUE_MAX 4096 /* bytes of an auditAnnotations value */
#define WH_AUDIT_MAX 32         /* auditAnnotations in one response */
/* Bytes of one encoded response. Every member but the patch is capped above
 * (escaped, the uid, message, warnings and auditAnnotations come to under
 * 1 MiB); the patch rewrites an object the server took in at most 3 MiB, and
 * base64 makes it 4/3 as long. 32 MiB holds a patch as long as two whole
 * such objects, far more than a rewrite of GPU requests ever writes. */
#define WH_RESPONSE_MAX ((size_t)32 << 20)

typedef enum wh_review_version {
    WH_REVIEW_V1 = 0,      /* admission.k8s.io/v1 */
    WH_REVIEW_V1BETA1 = 1, /* admission.k8s.io/v1beta1 */
} wh_review_version;

typedef enum wh_operation {
    WH_OP_CREATE = 0,
    WH_OP_UPDATE,
    WH_OP_DELETE,
    WH_OP_CONNECT,
} wh_operation;

/* "CREATE", "UPDATE", ...; "" for an unknown value. */
const char *wh_operation_name(wh_operation op);

/* A decoded request. Every pointer is borrowed from root, which the struct
 * owns: valid until wh_review_request_dispose. Absent optional strings are
 * "" (never NULL); absent or null objects are NULL. */
typedef struct wh_review_request {
    json_object *root; /* the whole AdmissionReview */
    wh_review_version version;
    const char *uid;                                          /* non-empty */
    const char *kind_group, *kind_version, *kind;             /* request.kind */
    const char *resource_group, *resource_version, *resource; /* request.resource */
    const char *sub_resource;
    const char *namespace;
    const char *name;
    wh_operation operation;
    const char *username;
    const char **groups; /* userInfo.groups, n_groups entries (array owned here) */
    size_t n_groups;
    json_object *object;     /* request.object, NULL when absent or null */
    json_object *old_object; /* request.oldObject, NULL when absent or null */
    bool dry_run;
    gq_json_budget *budget; /* what the tree holds of it (charged), given back at dispose */
    size_t charged;
} wh_review_request;

/* What a review asks the validating decision about. */
typedef enum wh_review_target {
    WH_TARGET_OTHER = 0,   /* nothing gpuquota validates */
    WH_TARGET_POD_CREATE,  /* a pod CREATE (no subresource): priced and charged */
    WH_TARGET_POD_UPDATE,  /* a pod UPDATE or pods/status write: gpuquota's records */
    WH_TARGET_CLAIM_WRITE, /* a ResourceClaim CREATE or UPDATE: gpuquota's pins */
} wh_review_target;

/* The target of req (quota/tamper.h, quota/admission.h decide them). */
wh_review_target wh_review_target_of(const wh_review_request *req);

/* Decode an AdmissionReview request body body[0..len). Requires apiVersion
 * admission.k8s.io/v1 (or v1beta1), kind AdmissionReview, a request object
 * with a non-empty string uid, kind.kind, resource.resource and a known
 * operation; every optional field present must have its documented type.
 * On success *out is filled (caller disposes); on error *out is untouched and
 * err names the field: GQ_EINVAL (the HTTP layer answers 400), GQ_ELIMIT for
 * nesting deeper than WH_REVIEW_MAX_DEPTH, GQ_ENOMEM. */
gq_code wh_review_decode(const char *body, size_t len, wh_review_request *out, gq_err *err) GQ_WUR;

/* wh_review_decode for the admission webhooks: the subtrees of
 * request.object and request.oldObject that no admission decision reads
 * (of metadata.managedFields the spec and status fields; spec.volumes, tolerations,
 * topologySpreadConstraints, ephemeralContainers; of every container and
 * init container env, envFrom, volumeMounts, volumeDevices, ports, probes,
 * lifecycle, command, args, securityContext) and request.userInfo.extra and
 * request.options are checked like the rest of the body but not built: they
 * are most of a pod's JSON objects. The decision on a lean request is the
 * decision on the full one (the tests and the review fuzz target prove the
 * answers identical); only what prints the object (`gpuquota admit`) needs
 * wh_review_decode. Same errors as wh_review_decode. */
gq_code wh_review_decode_lean(const char *body, size_t len, wh_review_request *out,
                              gq_err *err) GQ_WUR;

/* The memory all decoded reviews in flight may hold together, by default
 * (gpuquota webhook --max-decoded-memory). */
#define WH_DECODED_MEMORY_DEFAULT ((size_t)32 * 1024 * 1024)

/* The trees the decision of a GPU pod may hold at once: the decoded one and
 * its copies (a model choice's, the pod priced on a model, the pod
 * defaulted or given its claims). A review of a pod that may be copied is
 * charged this many times its tree; one review's tree with its copies is
 * at most half the budget (wh_review_limits.max_tree). */
#define WH_REVIEW_TREES 4

/* What the decoded reviews of a server may hold in memory: the trees of the
 * requests in flight, with their copies (WH_REVIEW_TREES), share budget
 * (NULL: none), one holds at most max_tree bytes (0: no cap). */
typedef struct wh_review_limits {
    gq_json_budget *budget;
    size_t max_tree;
} wh_review_limits;

/* wh_review_decode_lean within lim: GQ_ELIMIT for a review whose tree would
 * pass lim->max_tree (the HTTP layer answers 400), GQ_EBUSY when the budget
 * has no room for it now (503, Retry-After), else as wh_review_decode. The
 * request holds its share of the budget until wh_review_request_dispose. */
gq_code wh_review_decode_within(const char *body, size_t len, const wh_review_limits *lim,
                                wh_review_request *out, gq_err *err) GQ_WUR;

/* The answer to a review body that wh_review_decode_within refused (rc, err):
 * one past a cap (GQ_ELIMIT) is still answered as a review when it is one
 * without its objects: denied (403) with the reason, for the user to read;
 * else 500 for GQ_ENOMEM, 503 with Retry-After: 1 for GQ_EBUSY (a limit
 * shared with the requests in flight), 400 for the rest. */
void wh_review_answer_undecoded(const http_request *req, gq_code rc, const gq_err *err,
                                http_response *resp);

/* Same checks on a review already parsed: root (ownership taken in every
 * case, also on error) becomes out->root on success. For callers that build
 * or load the tree themselves (`gpuquota admit`). */
gq_code wh_review_decode_json(json_object *root, wh_review_request *out, gq_err *err) GQ_WUR;

/* The AdmissionReview (v1) kube-apiserver would send for creating pod
 * (borrowed; referenced, not copied, by *out): a pod CREATE in namespace ns
 * (NULL or "": the pod's metadata.namespace, else "default", as kubectl
 * does), request.name from metadata.name ("" for generateName pods, as the
 * API server sends them), the given uid and username, dryRun false and
 * CreateOptions. Caller owns *out. GQ_EINVAL when pod is not an object or
 * uid is empty, GQ_ENOMEM. */
gq_code wh_review_for_pod_create(json_object *pod, const char *ns, const char *uid,
                                 const char *username, json_object **out, gq_err *err) GQ_WUR;

/* Record in pod's metadata.managedFields (pod is changed) what kube-apiserver
 * records for the author of a CREATE before mutating admission runs: one
 * entry for manager owning every label and annotation the pod has (the
 * metadata part: gpuquota reads no other, gq_pod_user_set), in place of any
 * entries the pod came with (a CREATE gives its author every field it sets).
 * A pod without metadata is left alone. For `gpuquota admit`, so that a pod
 * given as a file is judged as kube-apiserver would send it. GQ_ENOMEM. */
gq_code wh_pod_record_author(json_object *pod, const char *manager, gq_err *err) GQ_WUR;

/* Release what decode allocated. NULL and a zeroed struct are accepted. */
void wh_review_request_dispose(wh_review_request *r);

/* A response under construction. Caller-owned; every string in it is a
 * private copy. Start with wh_review_response_init, end with _dispose. */
typedef struct wh_review_response {
    wh_review_version version;
    char *uid;
    bool allowed;
    int code;      /* status.code when denied (e.g. 403) */
    char *reason;  /* status.reason when denied ("Forbidden") */
    char *message; /* status.message when denied, sanitised */
    char *patch;   /* JSON Patch text (not yet base64), NULL for none */
    size_t patch_len;
    char *warnings[WH_WARNINGS_MAX];
    size_t n_warnings;
    size_t dropped_warnings; /* warnings beyond WH_WARNINGS_MAX, not sent */
    char *audit_keys[WH_AUDIT_MAX];
    char *audit_values[WH_AUDIT_MAX];
    size_t n_audit;
} wh_review_response;

/* An allowed response with no patch for request uid in the given version. */
gq_code wh_review_response_init(wh_review_response *r, wh_review_version version,
                                const char *uid) GQ_WUR;
void wh_review_response_dispose(wh_review_response *r);

/* Turn the response into a denial: allowed false, status {code, reason,
 * message}. message is sanitised (control characters become spaces, invalid
 * UTF-8 becomes "?") and cut at WH_MESSAGE_MAX bytes on a character boundary.
 * Any patch is dropped: a denied request is never mutated. */
gq_code wh_review_response_deny(wh_review_response *r, int code, const char *reason,
                                const char *message) GQ_WUR;

/* Attach a JSON Patch (text, copied); an empty patch ("[]" or len 0) clears
 * it, so an unchanged object carries no patchType either. */
gq_code wh_review_response_set_patch(wh_review_response *r, const char *json, size_t len) GQ_WUR;

/* Append a warning, sanitised like a deny message and cut at WH_WARNING_MAX
 * bytes. Empty warnings are skipped; beyond WH_WARNINGS_MAX they are counted
 * in dropped_warnings (the last slot then says how many were left out). */
gq_code wh_review_response_add_warning(wh_review_response *r, const char *text) GQ_WUR;

/* Set an auditAnnotation. kube-apiserver prefixes the key with the webhook
 * name and a "/", so the key must be the name part of a qualified name:
 * 1..63 characters [A-Za-z0-9._-], starting and ending alphanumeric (no "/").
 * GQ_EINVAL for a bad key, GQ_ELIMIT for a value over WH_AUDIT_VALUE_MAX or
 * too many annotations. Setting a key again replaces its value. */
gq_code wh_review_response_set_audit(wh_review_response *r, const char *key,
                                     const char *value) GQ_WUR;

/* True when key is acceptable to wh_review_response_set_audit. */
bool wh_audit_key_valid(const char *key);

/* Sanitise text for a user-facing message into buf (cap bytes incl. NUL):
 * control characters -> space, invalid UTF-8 -> "?", cut on a character
 * boundary. Returns the length written. */
size_t wh_sanitize_text(const char *text, char *buf, size_t cap);

/* Serialise the response as an AdmissionReview: apiVersion and kind, then
 * response {uid, allowed, status (denied only), patchType "JSONPatch" and
 * patch in base64 (only with a patch), warnings, auditAnnotations (only when
 * any)}. Caller frees *out with free(); *out_len excludes the NUL.
 * GQ_ENOMEM; GQ_ELIMIT past WH_RESPONSE_MAX. */
gq_code wh_review_encode(const wh_review_response *r, char **out, size_t *out_len) GQ_WUR;

#endif
