/* kube — the Kubernetes REST client of gpuquota (libcurl, json-c, libyaml).
 *
 * Pieces, each usable alone:
 *   kube_config        kubeconfig / in-cluster configuration (plain struct)
 *   kube_client        thread-safe HTTP client with keep-alive connection reuse
 *   kube_api           the seam: a small function table over the verbs, so the
 *                      webhook, controller and tests can swap in a fake
 *   kube_watch_parser  pure incremental parser of a watch event stream
 *   kube_cache         informer-style list+watch cache of one resource
 *   kube_leader_elect  coordination.k8s.io/v1 Lease leader election
 *
 * Every function returning gq_code fills the caller's gq_err on failure (err
 * may be NULL). HTTP statuses map to codes: 401 GQ_EUNAUTHORIZED (after one
 * retry with a re-read token file or a re-run credential plugin), 404 GQ_ENOTFOUND, 409
 * GQ_ECONFLICT (GQ_EEXISTS when the reason is AlreadyExists), 410 GQ_EGONE, other non-2xx GQ_EHTTP;
 * transport failures GQ_EIO, GQ_ETIMEOUT or GQ_ETLS. The message of a
 * Kubernetes Status body is carried into err->msg.
 *
 * Paths are API paths such as "/api/v1/namespaces/ns/pods/name" or
 * "/apis/gpuquota.io/v1alpha1/gpuquotas"; the caller escapes path segments
 * (Kubernetes names never need it). */
#ifndef KUBE_H
#define KUBE_H

#include <json-c/json.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/gq_error.h"

/* ------------------------------------------------------------------------ */
/* Configuration                                                             */

typedef struct kube_blob {
    unsigned char *data; /* owned; NULL when absent */
    size_t len;
} kube_blob;

/* interactiveMode of an exec credential plugin. */
typedef enum kube_exec_mode {
    KUBE_EXEC_NEVER = 0,        /* "Never": stdin is not given to the plugin */
    KUBE_EXEC_IF_AVAILABLE = 1, /* "IfAvailable": given when it is a terminal */
    KUBE_EXEC_ALWAYS = 2,       /* "Always": a terminal is required */
} kube_exec_mode;

/* A client-go credential plugin (a kubeconfig user's "exec"), with what
 * provideClusterInfo passes on of the cluster entry. All strings owned. */
typedef struct kube_exec_config {
    char *api_version; /* client.authentication.k8s.io/v1 or /v1beta1 */
    char *command;     /* a PATH name, or a path (relative ones resolved
                          against the kubeconfig's folder) */
    char **args;       /* nargs arguments */
    size_t nargs;
    char **env; /* nenv "NAME=value" added to the environment */
    size_t nenv;
    char *install_hint; /* NULL when absent */
    kube_exec_mode interactive_mode;
    int provide_cluster_info;
    char *tls_server_name;     /* the cluster's tls-server-name, or NULL */
    char *proxy_url;           /* the cluster's proxy-url, or NULL */
    int disable_compression;   /* the cluster's disable-compression */
    char *cluster_config_json; /* the cluster's client.authentication.k8s.io/exec
                                  extension as JSON text, or NULL */
} kube_exec_config;

/* A resolved connection configuration. All strings owned, NULL when absent. */
typedef struct kube_config {
    char *server;           /* "https://host:port", no trailing slash */
    char *namespace_;       /* default namespace; never NULL ("default") */
    char *ca_file;          /* absolute or relative to the process cwd */
    kube_blob ca_data;      /* PEM bytes (certificate-authority-data) */
    char *cert_file;        /* client certificate PEM file */
    kube_blob cert_data;    /* client certificate PEM bytes */
    char *key_file;         /* client key PEM file */
    kube_blob key_data;     /* client key PEM bytes */
    char *token;            /* static bearer token */
    char *token_file;       /* bearer token re-read every minute and on 401 */
    kube_exec_config *exec; /* credential plugin, used only when the user has
                               no token, tokenFile or client certificate */
    int insecure_skip_tls_verify;
    char *source; /* kubeconfig file name, or "in-cluster" */
} kube_config;

/* Paths of the in-cluster service-account files; NULL members take the
 * standard /var/run/secrets/kubernetes.io/serviceaccount/ files. */
typedef struct kube_incluster_paths {
    const char *token_file;
    const char *ca_file;
    const char *namespace_file;
} kube_incluster_paths;

/* Parse a kubeconfig held in memory. name is used in "name:line: message"
 * errors; relative file paths resolve against base_dir (NULL: cwd); context
 * NULL selects current-context. On success *out is a new config
 * (kube_config_free). Errors: GQ_EINVAL (syntax, wrong types, missing or
 * unknown context/cluster/user, bad base64, an exec plugin client-go's
 * validation refuses), GQ_EUNSUPPORTED (auth-provider users), GQ_ENOMEM,
 * GQ_ELIMIT (input over 4 MiB). */
gq_code kube_config_parse(const char *buf, size_t len, const char *name, const char *base_dir,
                          const char *context, kube_config **out, gq_err *err) GQ_WUR;

/* Read and parse a kubeconfig file (see kube_config_parse); GQ_EIO when it
 * cannot be read. */
gq_code kube_config_load_file(const char *path, const char *context, kube_config **out,
                              gq_err *err) GQ_WUR;

/* In-cluster configuration from KUBERNETES_SERVICE_HOST / _PORT and the
 * service-account files (paths may be NULL). The token file is not read
 * here: the client reads it. GQ_ENOTFOUND when not running in a cluster. */
gq_code kube_config_load_incluster(const kube_incluster_paths *paths, kube_config **out,
                                   gq_err *err) GQ_WUR;

/* The usual resolution order: kubeconfig_flag, else the first file of
 * $KUBECONFIG (colon-separated lists are not merged: only the first file is
 * used), else in-cluster. context may be NULL. */
gq_code kube_config_load_default(const char *kubeconfig_flag, const char *context,
                                 kube_config **out, gq_err *err) GQ_WUR;

void kube_config_free(kube_config *cfg);

/* ------------------------------------------------------------------------ */
/* Pure helpers (exposed for tests and for the shells)                      */

/* Decoded Kubernetes metav1.Status. */
typedef struct kube_status {
    int code;          /* "code", 0 when absent */
    char reason[64];   /* "reason", "" when absent (truncated) */
    char message[384]; /* "message", "" when absent (truncated) */
} kube_status;

/* Decode a Status object from JSON text / from a parsed object. GQ_EINVAL
 * when it is not an object of kind Status. */
gq_code kube_status_decode(const char *body, size_t len, kube_status *out) GQ_WUR;
gq_code kube_status_from_json(json_object *obj, kube_status *out) GQ_WUR;

/* Map an HTTP status (and Status reason) to a gq_code as described above. */
gq_code kube_http_code(long http_status, const char *reason) GQ_WUR;

typedef struct kube_query {
    const char *key;
    const char *value; /* NULL or "" entries are skipped */
} kube_query;

/* server + path + "?k=v&..." with keys and values percent-escaped (RFC 3986
 * unreserved characters kept). *out is malloc'ed. */
gq_code kube_build_url(const char *server, const char *path, const kube_query *q, size_t nq,
                       char **out) GQ_WUR;

/* Exponential backoff with jitter: delays start at min_ms and double up to
 * max_ms; each delay is base + up to base/4 of jitter, and at the cap a value
 * in (max*3/4, max], so the result always lies in [min_ms, max_ms]. */
typedef struct kube_backoff {
    long min_ms; /* default 800 */
    long max_ms; /* default 30000 */
    unsigned attempt;
} kube_backoff;

void kube_backoff_init(kube_backoff *b, long min_ms, long max_ms);
/* Next delay; r01 in [0,1) is the jitter source (tests pass fixed values). */
long kube_backoff_next(kube_backoff *b, double r01);
void kube_backoff_reset(kube_backoff *b);

/* Format a UNIX time in microseconds as RFC 3339 with microseconds, e.g.
 * "2026-11-21T15:02:12.123456Z". buf needs 28 bytes. */
void kube_format_micro_time(int64_t unix_us, char buf[28]);
/* Parse an RFC 3339 time (fraction optional, "Z" or +hh:mm offset).
 * GQ_EINVAL when malformed. */
gq_code kube_parse_time(const char *s, int64_t *unix_us) GQ_WUR;

/* ------------------------------------------------------------------------ */
/* Watch stream parser                                                       */

/* The watch event types, in the order of kube_event_type_name's table. */
typedef enum kube_event_type {
    KUBE_EVENT_ADDED,
    KUBE_EVENT_MODIFIED,
    KUBE_EVENT_DELETED,
    KUBE_EVENT_BOOKMARK,
    KUBE_EVENT_ERROR,
} kube_event_type;

const char *kube_event_type_name(kube_event_type t);

/* Called once per event; obj is borrowed (json_object_get to keep it).
 * A non-OK return stops the parse/watch and is returned from it. */
typedef gq_code (*kube_event_fn)(void *ud, kube_event_type type, json_object *obj, gq_err *err);

typedef struct kube_watch_parser kube_watch_parser;

/* A parser of newline-delimited watch events {"type":..,"object":{..}}.
 * max_line bounds one event (0: 16 MiB); longer lines fail with GQ_ELIMIT. */
gq_code kube_watch_parser_new(size_t max_line, kube_event_fn fn, void *ud,
                              kube_watch_parser **out) GQ_WUR;
/* Feed any number of bytes; events are delivered as lines complete. After an
 * error the parser refuses further input with the same code. Errors:
 * GQ_EINVAL (malformed JSON, unknown type, missing object), GQ_ELIMIT, or the
 * callback's code. Blank lines are ignored. */
gq_code kube_watch_parser_feed(kube_watch_parser *p, const char *data, size_t len,
                               gq_err *err) GQ_WUR;
/* End of stream: a trailing event without newline is parsed; GQ_OK if none. */
gq_code kube_watch_parser_finish(kube_watch_parser *p, gq_err *err) GQ_WUR;
void kube_watch_parser_free(kube_watch_parser *p);

/* ------------------------------------------------------------------------ */
/* Client                                                                    */

typedef struct kube_client kube_client;

typedef struct kube_client_opts {
    long timeout_ms;         /* per request (not watch); 0: 30000 */
    long connect_timeout_ms; /* 0: 10000 */
    size_t max_body;         /* response body cap; 0: 64 MiB */
    unsigned pool_size;      /* idle connections kept; 0: 32 */
    long token_reread_ms;    /* token file re-read period; 0: 60000 */
    const char *user_agent;  /* NULL: "gpuquota" */
} kube_client_opts;

/* A connection to kube-apiserver that stops answering without closing (the
 * host gone, a network that drops packets: no FIN, no RST) is given up this
 * long after the last byte the peer acknowledged: TCP keepalive probes
 * start after KUBE_KEEPALIVE_IDLE_S of silence, every KUBE_KEEPALIVE_INTVL_S,
 * and TCP_USER_TIMEOUT ends the connection. A watch that carries no events
 * is kept alive by the probes alone (no request reaches kube-apiserver). */
#define KUBE_DEAD_PEER_MS 10000L
#define KUBE_KEEPALIVE_IDLE_S 4L
#define KUBE_KEEPALIVE_INTVL_S 2L

/* A client for cfg (copied; cfg may be freed afterwards). opts may be NULL.
 * Thread-safe: any number of threads may call the verbs at once; connections
 * are kept alive in a pool of curl handles that share DNS and TLS sessions. */
gq_code kube_client_new(const kube_config *cfg, const kube_client_opts *opts, kube_client **out,
                        gq_err *err) GQ_WUR;
void kube_client_free(kube_client *c);

/* Per-call options; NULL means defaults (no retries). */
typedef struct kube_call_opts {
    unsigned retries;    /* extra attempts after 5xx, 429 or transport errors */
    long retry_delay_ms; /* first delay between attempts (doubles); 0: 100 */
    long timeout_ms;     /* 0: the client's */
} kube_call_opts;

/* GET path; *out is the parsed response (caller json_object_put). */
gq_code kube_get(kube_client *c, const char *path, const kube_call_opts *o, json_object **out,
                 gq_err *err) GQ_WUR;
/* POST body to a collection path; *out (may be NULL) receives the created object. */
gq_code kube_create(kube_client *c, const char *path, json_object *body, const kube_call_opts *o,
                    json_object **out, gq_err *err) GQ_WUR;
/* PUT body to path. body carries metadata.resourceVersion for optimistic
 * concurrency; a stale one yields GQ_ECONFLICT. */
gq_code kube_update(kube_client *c, const char *path, json_object *body, const kube_call_opts *o,
                    json_object **out, gq_err *err) GQ_WUR;
/* PUT body to path + "/status" (the status subresource). */
gq_code kube_update_status(kube_client *c, const char *path, json_object *body,
                           const kube_call_opts *o, json_object **out, gq_err *err) GQ_WUR;
/* PATCH path with a JSON merge patch (RFC 7386). */
gq_code kube_patch_merge(kube_client *c, const char *path, json_object *patch,
                         const kube_call_opts *o, json_object **out, gq_err *err) GQ_WUR;
/* PATCH path with a JSON Patch (RFC 6902, an array of operations). A failed
 * "test" operation leaves the object unchanged and answers an error. */
gq_code kube_patch_json(kube_client *c, const char *path, json_object *patch,
                        const kube_call_opts *o, json_object **out, gq_err *err) GQ_WUR;
/* DELETE path. */
gq_code kube_delete(kube_client *c, const char *path, const kube_call_opts *o, gq_err *err) GQ_WUR;

typedef struct kube_list_opts {
    const char *label_selector;
    const char *field_selector;
    unsigned page_size;           /* "limit"; 0: 500 */
    const char *resource_version; /* NULL: most recent (quorum read) */
    const kube_call_opts *call;   /* per page */
    /* Subtrees of each item that fn never reads, as gq_json_parse_pruned
     * patterns relative to the item ("spec/containers/STAR/env", STAR being
     * "*"; at most 6 segments): checked, never built. metadata/managedFields
     * is always left out. */
    const char *const *prune;
    size_t n_prune;
} kube_list_opts;

/* Called once per item; item is borrowed. A non-OK return stops the list. */
typedef gq_code (*kube_item_fn)(void *ud, json_object *item, gq_err *err);

/* List path, following "continue" tokens page by page; each item goes to fn
 * as soon as it is parsed, so at most one item is a tree at a time (and two
 * pages' text: the next page is fetched while this one is parsed). On
 * success *rv_out (may be NULL) receives the list's resourceVersion
 * (malloc'ed). On failure fn may already have had some items, as when a
 * later page fails. A continue token that expired mid-list yields GQ_EGONE:
 * the caller relists. */
gq_code kube_list(kube_client *c, const char *path, const kube_list_opts *o, kube_item_fn fn,
                  void *ud, char **rv_out, gq_err *err) GQ_WUR;

typedef struct kube_watch_opts {
    const char *label_selector;
    const char *field_selector;
    const char *resource_version; /* start after this version */
    int allow_bookmarks;          /* allowWatchBookmarks=true */
    long timeout_seconds;         /* server-side timeoutSeconds; 0: none */
    size_t max_line;              /* per-event cap; 0: 16 MiB */
    const atomic_int *stop;       /* non-zero stops the watch within ~1 s */
    /* Optional: a descriptor that turns readable when *stop is set (an
     * eventfd, say); the watch then ends at once instead of at libcurl's
     * next progress tick, up to a second later. */
    const int *wake_fd;
    /* Optional: called once, on the calling thread with the ud given to the
     * watch, when the server has accepted the watch (HTTP 200 headers),
     * before any event. kube-apiserver registers the watcher before it
     * answers, so from then on every change after resource_version is on
     * its way (an ERROR event may still follow at once). */
    void (*on_open)(void *ud);
} kube_watch_opts;

/* Watch path (a collection). Events go to fn on the calling thread as they
 * arrive. Returns GQ_OK when the server ends the stream or *stop is set;
 * an in-stream ERROR event is handed to fn like any other. */
gq_code kube_watch(kube_client *c, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                   void *ud, gq_err *err) GQ_WUR;

/* The default namespace of the client's configuration (borrowed). */
const char *kube_client_namespace(const kube_client *c);

/* ------------------------------------------------------------------------ */
/* The seam                                                                  */

/* The verbs as a function table. kube_client_api fills one for a real
 * client; tests and fakes fill their own. ctx is the first argument of each. */
typedef struct kube_api {
    void *ctx;
    gq_code (*get)(void *ctx, const char *path, json_object **out, gq_err *err);
    gq_code (*create)(void *ctx, const char *path, json_object *body, json_object **out,
                      gq_err *err);
    gq_code (*update)(void *ctx, const char *path, json_object *body, json_object **out,
                      gq_err *err);
    gq_code (*update_status)(void *ctx, const char *path, json_object *body, json_object **out,
                             gq_err *err);
    gq_code (*patch_merge)(void *ctx, const char *path, json_object *patch, json_object **out,
                           gq_err *err);
    gq_code (*del)(void *ctx, const char *path, gq_err *err);
    gq_code (*list)(void *ctx, const char *path, const kube_list_opts *o, kube_item_fn fn, void *ud,
                    char **rv_out, gq_err *err);
    gq_code (*watch)(void *ctx, const char *path, const kube_watch_opts *o, kube_event_fn fn,
                     void *ud, gq_err *err);
    /* JSON Patch; NULL in seams that never patch pods. */
    gq_code (*patch_json)(void *ctx, const char *path, json_object *patch, json_object **out,
                          gq_err *err);
} kube_api;

/* A table calling c's verbs with default call options. */
void kube_client_api(kube_client *c, kube_api *out);

/* ------------------------------------------------------------------------ */
/* Informer-style cache                                                      */

typedef struct kube_cache kube_cache;

typedef struct kube_cache_opts {
    const char *path; /* collection, e.g. "/api/v1/pods" (required) */
    const char *label_selector;
    const char *field_selector;
    unsigned page_size;         /* 0: 500 */
    long watch_timeout_seconds; /* 0: 300, jittered up to 2x like client-go */
    long backoff_min_ms;        /* 0: 800 */
    long backoff_max_ms;        /* 0: 30000 */
    /* As kube_list_opts: what no transform reads of the objects listed. */
    const char *const *prune;
    size_t n_prune;
    /* Optional: turn an object into the record kept in the cache (returned
     * pointer owned by the cache, freed with free_record). NULL record with
     * GQ_OK skips the object. Without transform the record is the
     * json_object itself. */
    gq_code (*transform)(void *ud, json_object *obj, void **rec, gq_err *err);
    void (*free_record)(void *ud, void *rec);
    /* Optional callbacks, called on the cache thread without the cache lock
     * held, in event order. Records are borrowed for the call. */
    void (*on_add)(void *ud, const char *ns, const char *name, const void *rec);
    void (*on_update)(void *ud, const char *ns, const char *name, const void *old_rec,
                      const void *new_rec);
    void (*on_delete)(void *ud, const char *ns, const char *name, const void *rec);
    void *ud;
} kube_cache_opts;

/* A cache over api (borrowed, must outlive the cache). Not started. */
gq_code kube_cache_new(const kube_api *api, const kube_cache_opts *o, kube_cache **out,
                       gq_err *err) GQ_WUR;
/* Start the list+watch thread. */
gq_code kube_cache_start(kube_cache *c, gq_err *err) GQ_WUR;
/* Stop the thread (waits for it; an open watch ends within ~1 s). Idempotent. */
void kube_cache_stop(kube_cache *c);
void kube_cache_free(kube_cache *c);

/* True once the first list has been applied. It stays true while the watch
 * reconnects (only a relist after the server's history went back clears
 * it): the contents may then miss any change since the watch broke. */
int kube_cache_synced(kube_cache *c);
/* How long an accepted watch must stay open, when it has brought no event,
 * before the cache counts as fresh: an answer that is an error (410 Gone,
 * 504 Too large resource version) comes as an ERROR event right after the
 * HTTP 200. */
#define KUBE_CACHE_SETTLE_MS 250
/* True while the cache's watch is established after a successful list or
 * resume: the server accepted it (kube_watch_opts.on_open) and it has
 * delivered an event other than ERROR, or stayed open KUBE_CACHE_SETTLE_MS.
 * A fresh cache lags the server by the watch's delivery time only. False
 * before the first list, while (re)listing, from the moment a watch ends
 * (cut, timed out, failed) until the next one is established, through any
 * backoff, and once stopped. Lock-free; callable from any thread. */
int kube_cache_fresh(kube_cache *c);
/* Wait until synced; GQ_ETIMEOUT after timeout_ms. */
gq_code kube_cache_wait_synced(kube_cache *c, long timeout_ms) GQ_WUR;
size_t kube_cache_count(kube_cache *c);
/* The last resourceVersion seen (list or event) into buf; "" before sync. */
void kube_cache_resource_version(kube_cache *c, char *buf, size_t cap);
/* Call fn with the record of ns/name (ns "" for cluster-scoped) under the
 * read lock; GQ_ENOTFOUND if absent. fn must not call back into the cache. */
gq_code kube_cache_get(kube_cache *c, const char *ns, const char *name,
                       void (*fn)(void *ud, const void *rec), void *ud) GQ_WUR;
/* Call fn for every record under the read lock until it returns non-zero. */
void kube_cache_foreach(kube_cache *c,
                        int (*fn)(void *ud, const char *ns, const char *name, const void *rec),
                        void *ud);
/* Counters for metrics and tests. */
typedef struct kube_cache_stats {
    unsigned long lists;   /* list attempts (each paged list counts once) */
    unsigned long watches; /* watch requests started */
    unsigned long relists; /* relists because the watch could not resume (410 Gone, 504 Too
                              large resource version, history went back, repeated failures) */
    unsigned long resets;  /* of those (and of lists), the server's history went back: the
                              cache was marked not synced and relisted in full */
    /* Watches started since the last relist was decided (counted and reset
     * under one lock, so "relisted and watching again" is one read). */
    unsigned long watches_since_relist;
} kube_cache_stats;
void kube_cache_get_stats(kube_cache *c, kube_cache_stats *out);

/* ------------------------------------------------------------------------ */
/* Lease leader election                                                     */

typedef struct kube_leader_elect kube_leader_elect;

/* The clocks and the wait of a component that keeps time (leader
 * election): a seam so tests can drive time. A NULL table means the real
 * clocks; every member must be set otherwise. */
typedef struct kube_clock {
    int64_t (*mono_ms)(void *ud); /* monotonic milliseconds */
    int64_t (*wall_us)(void *ud); /* Unix microseconds */
    /* Wait ms, returning early (1) once *stop is nonzero; 0 after ms. */
    int (*sleep_ms)(void *ud, long ms, const atomic_int *stop);
    void *ud;
} kube_clock;

typedef struct kube_leader_opts {
    const char *namespace_; /* Lease namespace (required) */
    const char *name;       /* Lease name (required) */
    const char *identity;   /* holderIdentity (required, unique per replica) */
    long lease_ms;          /* 0: 15000 (leaseDurationSeconds, rounded up) */
    long renew_deadline_ms; /* 0: 10000 */
    long retry_ms;          /* 0: 2000 */
    /* Called on the election thread; keep them short. */
    void (*on_started)(void *ud);
    void (*on_stopped)(void *ud);
    void *ud;
    const kube_clock *clock; /* NULL: the real clocks (borrowed; outlives the elector) */
} kube_leader_opts;

/* An elector over api (borrowed). Options are copied. Not started. */
gq_code kube_leader_elect_new(const kube_api *api, const kube_leader_opts *o,
                              kube_leader_elect **out, gq_err *err) GQ_WUR;
gq_code kube_leader_elect_start(kube_leader_elect *le, gq_err *err) GQ_WUR;
/* Stop; if leading, release the Lease (holderIdentity cleared,
 * leaseDurationSeconds 1) so another replica takes over at once, then call
 * on_stopped. Idempotent. */
void kube_leader_elect_stop(kube_leader_elect *le);
void kube_leader_elect_free(kube_leader_elect *le);
int kube_leader_elect_is_leader(kube_leader_elect *le);

#endif
