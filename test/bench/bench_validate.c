/* Figures for the validating webhook's charging path against the
 * kube-apiserver stand-in (not a test; DESIGN.md §7 asks for >= 1,000
 * admissions/s into one namespace with zero over-admission).
 *
 * R replicas (each its own API client, informer caches and validator, as R
 * webhook processes would have) are driven by T threads that decode an
 * AdmissionReview and decide it. Two runs: every admission into one
 * namespace (one GPUQuota), and admissions spread over 50 namespaces. Each
 * quota fits exactly half the pods sent to it; at the end every quota is
 * read back: allowed == hard, reservations == allowed, nothing beyond hard.
 *
 * A stand-in for the controller (--controller-ms, default 250; 0 = off)
 * folds reservations into status.used every so often, as the real one does
 * once it has counted the pods: without it status.reservations grows with
 * every admitted pod and each charge rewrites all of them.
 *
 * Usage: bench_validate [--standin PATH] [--pods N] [--replicas R]
 *                       [--threads T] [--latency-ms M] [--controller-ms C] */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crd.h"
#include "kube.h"
#include "kubestore.h"
#include "standin_proc.h"
#include "validate.h"
#include "yamljson.h"

#define MAX_REPLICAS 8
#define MAX_THREADS 256
#define MAX_NS 64

static kube_client *admin;
static gq_config *cfg;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int create(const char *path, const char *json)
{
    gq_err e;
    json_object *o = json_tokener_parse(json);
    gq_code rc = o ? kube_create(admin, path, o, NULL, NULL, &e) : GQ_EINVAL;
    json_object_put(o);
    if (rc && rc != GQ_EEXISTS) {
        fprintf(stderr, "create %s: %s\n", path, rc == GQ_EINVAL ? "bad JSON" : e.msg);
        return -1;
    }
    return 0;
}

static int apply_crds(void)
{
    static const char *const files[] = {"gpuquota.io_gpuquotas.yaml",
                                        "gpuquota.io_gputenantquotas.yaml",
                                        "gpuquota.io_gpulimitranges.yaml"};
    for (size_t i = 0; i < 3; i++) {
        char path[1024], *buf = NULL;
        snprintf(path, sizeof(path), "%s/deploy/crds/%s", GQ_SOURCE_DIR, files[i]);
        FILE *f = fopen(path, "rb");
        if (!f)
            return -1;
        buf = malloc(1 << 20);
        size_t n = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
        fclose(f);
        json_object **docs = NULL;
        size_t nd = 0;
        gq_err e;
        if (!buf || gq_yaml_load(buf, n, path, &docs, &nd, &e) || nd != 1) {
            free(buf);
            return -1;
        }
        free(buf);
        gq_code rc = kube_create(admin, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                 docs[0], NULL, NULL, &e);
        gq_yaml_docs_free(docs, nd);
        if (rc && rc != GQ_EEXISTS)
            return -1;
    }
    return 0;
}

typedef struct replica {
    kube_client *client;
    kube_api api;
    wh_kubestore *ks;
    wh_store store;
    wh_validator *v;
} replica;

typedef struct run {
    const char *prefix;
    int n_ns, pods;
    replica *reps;
    int n_reps;
    atomic_int next;
    atomic_int allowed[MAX_NS];
    atomic_int errors;
    double *lat; /* per admission, seconds */
} run;

typedef struct worker {
    run *r;
    int id;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    run *r = w->r;
    replica *rep = &r->reps[w->id % r->n_reps];
    char body[2048];
    for (;;) {
        int i = atomic_fetch_add(&r->next, 1);
        if (i >= r->pods)
            return NULL;
        int ns = i % r->n_ns;
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                 "\"request\":{\"uid\":\"%s-%d\",\"kind\":{\"group\":\"\",\"version\":\"v1\","
                 "\"kind\":\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":"
                 "\"pods\"},\"namespace\":\"%s-%02d\",\"operation\":\"CREATE\",\"userInfo\":"
                 "{\"username\":\"system:serviceaccount:kube-system:job-controller\"},"
                 "\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{"
                 "\"generateName\":\"train-\",\"namespace\":\"%s-%02d\",\"labels\":{\"app\":"
                 "\"train\"}},\"spec\":{\"restartPolicy\":\"Never\",\"containers\":[{\"name\":"
                 "\"trainer\",\"image\":\"registry.example/ml/train:1.4.2\",\"resources\":{"
                 "\"limits\":{\"cpu\":\"4\",\"memory\":\"16Gi\",\"gpuquota.io/gpu-memory\":"
                 "\"10Gi\"}}}]}}}}",
                 r->prefix, i, r->prefix, ns, r->prefix, ns);
        double t0 = now_s();
        wh_review_request req;
        wh_review_response resp;
        wh_validate_result res;
        gq_err e;
        if (wh_review_decode(body, strlen(body), &req, &e) ||
            wh_validate_review(rep->v, &req, &resp, &res, &e)) {
            if (atomic_fetch_add(&r->errors, 1) == 0)
                fprintf(stderr, "error: %s\n", e.msg);
            continue;
        }
        r->lat[i] = now_s() - t0;
        if (res.allowed)
            atomic_fetch_add(&r->allowed[ns], 1);
        else if (res.code != GQ_EDENIED && atomic_fetch_add(&r->errors, 1) == 0)
            fprintf(stderr, "error: %s\n", res.message);
        wh_review_response_dispose(&resp);
        wh_review_request_dispose(&req);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Pods charged to quota q of namespace ns: status.used gpu-pods (folded by
 * the controller stand-in) plus live reservations; -1 on error. */
static long charged(const char *ns)
{
    char path[256];
    json_object *o = NULL, *st;
    gq_err e;
    gq_amounts sum;
    snprintf(path, sizeof(path), WH_GQ_PATH "/namespaces/%s/gpuquotas/q", ns);
    if (kube_get(admin, path, NULL, &o, &e))
        return -1;
    long n = -1;
    if (json_object_object_get_ex(o, "status", &st) &&
        !gq_status_sum(st, (int64_t)time(NULL), &sum, &e))
        n = (long)sum.v[GQ_KEY_GPU_PODS];
    json_object_put(o);
    return n;
}

typedef struct folder {
    const char *prefix;
    int n_ns, period_ms;
    atomic_int stop;
    long folds, conflicts;
} folder;

/* What the controller does for pods it has counted: move their reservations
 * into status.used (here: all of them, since the bench creates no pods). */
static void *fold(void *arg)
{
    folder *f = arg;
    while (!atomic_load(&f->stop)) {
        struct timespec ts = {f->period_ms / 1000, (long)(f->period_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        for (int n = 0; n < f->n_ns; n++) {
            char path[256];
            json_object *o = NULL, *st;
            gq_err e;
            gq_amounts sum;
            snprintf(path, sizeof(path), WH_GQ_PATH "/namespaces/%s-%02d/gpuquotas/q", f->prefix,
                     n);
            if (kube_get(admin, path, NULL, &o, &e))
                continue;
            if (json_object_object_get_ex(o, "status", &st) &&
                !gq_status_sum(st, (int64_t)time(NULL), &sum, &e)) {
                json_object_object_add(st, "used", gq_amounts_to_json(&sum));
                json_object_object_del(st, "reservations");
                gq_code rc = kube_update_status(admin, path, o, NULL, NULL, &e);
                if (rc == GQ_ECONFLICT)
                    f->conflicts++;
                else if (!rc)
                    f->folds++;
            }
            json_object_put(o);
        }
    }
    return NULL;
}

static int do_run(const char *prefix, int n_ns, int pods, replica *reps, int n_reps, int threads,
                  int controller_ms)
{
    run r;
    memset(&r, 0, sizeof(r));
    r.prefix = prefix;
    r.n_ns = n_ns;
    r.pods = pods;
    r.reps = reps;
    r.n_reps = n_reps;
    r.lat = calloc((size_t)pods, sizeof(double));
    int per_ns = pods / n_ns, hard = per_ns / 2;
    char path[256], json[1024];
    for (int n = 0; n < n_ns; n++) {
        snprintf(
            json, sizeof(json),
            "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s-%02d\"}}",
            prefix, n);
        if (create("/api/v1/namespaces", json))
            return -1;
        snprintf(path, sizeof(path), WH_GQ_PATH "/namespaces/%s-%02d/gpuquotas", prefix, n);
        snprintf(json, sizeof(json),
                 "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":"
                 "{\"name\":\"q\",\"namespace\":\"%s-%02d\"},\"spec\":{\"hard\":{\"gpu-pods\":%d,"
                 "\"gpu-memory\":\"%dGi\"}}}",
                 prefix, n, hard, hard * 10);
        if (create(path, json))
            return -1;
    }
    /* Wait until every replica's cache holds the new quotas. */
    for (int rep = 0; rep < n_reps; rep++) {
        for (int tries = 0;; tries++) {
            json_object *arr = NULL;
            char ns[64];
            snprintf(ns, sizeof(ns), "%s-%02d", prefix, n_ns - 1);
            gq_err e;
            size_t have = 0;
            if (!reps[rep].store.list_quotas(reps[rep].store.ctx, ns, &arr, &e))
                have = json_object_array_length(arr);
            json_object_put(arr);
            if (have == 1)
                break;
            if (tries > 200)
                return -1;
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    wh_validate_stats before[MAX_REPLICAS];
    for (int rep = 0; rep < n_reps; rep++)
        wh_validate_get_stats(reps[rep].v, &before[rep]);
    pthread_t th[MAX_THREADS], fth;
    worker ws[MAX_THREADS];
    folder fo = {prefix, n_ns, controller_ms, 0, 0, 0};
    if (controller_ms)
        pthread_create(&fth, NULL, fold, &fo);
    double t0 = now_s();
    for (int t = 0; t < threads; t++) {
        ws[t] = (worker){&r, t};
        pthread_create(&th[t], NULL, work, &ws[t]);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    double secs = now_s() - t0;
    if (controller_ms) {
        atomic_store(&fo.stop, 1);
        pthread_join(fth, NULL);
    }
    qsort(r.lat, (size_t)pods, sizeof(double), cmp_double);
    uint64_t batches = 0, conflicts = 0;
    for (int rep = 0; rep < n_reps; rep++) {
        wh_validate_stats s;
        wh_validate_get_stats(reps[rep].v, &s);
        batches += s.batches - before[rep].batches;
        conflicts += s.conflicts - before[rep].conflicts;
    }
    long allowed = 0, over = 0, mismatched = 0;
    for (int n = 0; n < n_ns; n++) {
        char ns[64];
        snprintf(ns, sizeof(ns), "%s-%02d", prefix, n);
        int a = atomic_load(&r.allowed[n]);
        allowed += a;
        if (a > hard)
            over += a - hard;
        if (charged(ns) != a || a != hard)
            mismatched++;
    }
    printf("%-22s %6d pods  %3d ns  %8.0f admissions/s  p50 %6.2f ms  p99 %6.2f ms  "
           "allowed %ld (hard total %d)  over-admitted %ld  quotas off %ld  status writes %llu  "
           "409s %llu  errors %d  controller folds %ld\n",
           n_ns == 1 ? "one namespace" : "spread", pods, n_ns, pods / secs, r.lat[pods / 2] * 1000,
           r.lat[pods * 99 / 100] * 1000, allowed, hard * n_ns, over, mismatched,
           (unsigned long long)batches, (unsigned long long)conflicts, atomic_load(&r.errors),
           fo.folds);
    free(r.lat);
    return over || mismatched || atomic_load(&r.errors) ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *standin = "test/kube-standin";
    int pods = 4000, n_reps = 3, threads = 96, latency_ms = 0, controller_ms = 250;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--standin"))
            standin = argv[i + 1];
        else if (!strcmp(argv[i], "--pods"))
            pods = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--replicas"))
            n_reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--latency-ms"))
            latency_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--controller-ms"))
            controller_ms = atoi(argv[i + 1]);
    }
    if (pods < 100 || n_reps < 1 || n_reps > MAX_REPLICAS || threads < 1 || threads > MAX_THREADS ||
        latency_ms < 0 || controller_ms < 0) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    standin_proc s;
    gq_err e;
    int status = 1;
    replica reps[MAX_REPLICAS];
    memset(reps, 0, sizeof(reps));
    gq_err_clear(&e);
    if (standin_start(&s, standin, NULL, 0) != 0) {
        fprintf(stderr, "cannot start %s\n", standin);
        return 1;
    }
    kube_config kc = {.server = s.url, .namespace_ = "default"};
    if (gq_config_default(&cfg, &e) || kube_client_new(&kc, NULL, &admin, &e) || apply_crds()) {
        fprintf(stderr, "setup failed\n");
        goto out;
    }
    for (int i = 0; i < n_reps; i++) {
        replica *r = &reps[i];
        if (kube_client_new(&kc, NULL, &r->client, &e))
            goto out;
        kube_client_api(r->client, &r->api);
        if (wh_kubestore_new(&r->api, &r->ks, &e) || wh_kubestore_start(r->ks, &e))
            goto out;
        wh_kubestore_store(r->ks, &r->store);
        if (wh_validator_new(cfg, &r->store, NULL, &r->v, &e))
            goto out;
    }
    for (int i = 0; i < n_reps; i++)
        while (!wh_kubestore_synced(reps[i].ks)) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    if (latency_ms) {
        char f[64];
        snprintf(f, sizeof(f), "{\"latencyMs\":%d}", latency_ms);
        if (create("/standin/faults", f))
            goto out;
    }
    printf("bench_validate: %d replicas, %d threads, stand-in latency %d ms, controller every "
           "%d ms, pods of 10Gi\n",
           n_reps, threads, latency_ms, controller_ms);
    status = do_run("one", 1, pods, reps, n_reps, threads, controller_ms);
    status |= do_run("spread", 50, pods, reps, n_reps, threads, controller_ms);
out:
    if (status && e.msg[0])
        fprintf(stderr, "%s\n", e.msg);
    for (int i = 0; i < n_reps; i++) {
        wh_validator_free(reps[i].v);
        wh_kubestore_free(reps[i].ks);
        kube_client_free(reps[i].client);
    }
    kube_client_free(admin);
    gq_config_free(cfg);
    standin_stop(&s);
    return status;
}
