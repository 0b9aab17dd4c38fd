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
 * With --gpuquota PATH the replicas are real `gpuquota webhook` processes
 * (fresh certificates, --kubeconfig to the stand-in) and every admission is
 * an HTTPS POST /validate over a keep-alive connection per thread; without
 * it they run in this process (the decision and the API traffic only).
 *
 * Usage: bench_validate [--standin PATH] [--gpuquota PATH] [--pods N] [--replicas R]
 *                       [--threads T] [--latency-ms M] [--controller-ms C] */
#include <curl/curl.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "quota/crd.h"
#include "kube/kube.h"
#include "webhook/kubestore.h"
#include "support/standin_proc.h"
#include "support/status_sum.h"
#include "webhook/validate.h"
#include "common/yamljson.h"

#define MAX_REPLICAS 8
#define MAX_THREADS 256
#define MAX_NS 64

static kube_client *admin;
static gq_config *cfg;
static char g_ca[512]; /* HTTPS mode: the CA file; "" in-process */

typedef struct sbuf {
    char *p;
    size_t n;
} sbuf;

static size_t sink(char *ptr, size_t sz, size_t nm, void *ud)
{
    sbuf *b = ud;
    size_t add = sz * nm;
    char *g = realloc(b->p, b->n + add + 1);
    if (!g)
        return 0;
    memcpy(g + b->n, ptr, add);
    b->n += add;
    g[b->n] = '\0';
    b->p = g;
    return add;
}

/* POST body to https://127.0.0.1:port/validate on h; *out is the response
 * body (caller frees). */
static int post(CURL *h, int port, const char *body, char **out)
{
    char url[64];
    sbuf b = {NULL, 0};
    long code = 0;
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/validate", port);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    if (curl_easy_perform(h) != CURLE_OK ||
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code != 200) {
        free(b.p);
        return -1;
    }
    *out = b.p;
    return 0;
}

static CURL *https_handle(struct curl_slist *hdr)
{
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    curl_easy_setopt(h, CURLOPT_CAINFO, g_ca);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    return h;
}

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
    pid_t pid; /* HTTPS mode: the webhook process */
    int port;  /* its port */
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
    struct curl_slist *hdr =
        g_ca[0] ? curl_slist_append(NULL, "Content-Type: application/json") : NULL;
    CURL *h = g_ca[0] ? https_handle(hdr) : NULL;
    for (;;) {
        int i = atomic_fetch_add(&r->next, 1);
        if (i >= r->pods) {
            curl_easy_cleanup(h);
            curl_slist_free_all(hdr);
            return NULL;
        }
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
        if (g_ca[0]) {
            char *out = NULL;
            if (!h || post(h, rep->port, body, &out)) {
                if (atomic_fetch_add(&r->errors, 1) == 0)
                    fprintf(stderr, "error: POST /validate failed\n");
                continue;
            }
            r->lat[i] = now_s() - t0;
            if (strstr(out, "\"allowed\":true"))
                atomic_fetch_add(&r->allowed[ns], 1);
            else if (!strstr(out, "exceeded quota") && atomic_fetch_add(&r->errors, 1) == 0)
                fprintf(stderr, "error: %s\n", out);
            free(out);
            continue;
        }
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
        !status_sum(st, (int64_t)time(NULL), &sum, &e))
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
                !status_sum(st, (int64_t)time(NULL), &sum, &e)) {
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
    for (int rep = 0; g_ca[0] && rep < n_reps; rep++) {
        struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
        CURL *h = https_handle(hdr);
        char body[1536];
        snprintf(body, sizeof(body),
                 "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
                 "\"request\":{\"uid\":\"probe\",\"kind\":{\"group\":\"\",\"version\":\"v1\","
                 "\"kind\":\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":"
                 "\"pods\"},\"namespace\":\"%s-%02d\",\"operation\":\"CREATE\",\"dryRun\":true,"
                 "\"userInfo\":{\"username\":\"u\"},\"object\":{\"apiVersion\":\"v1\",\"kind\":"
                 "\"Pod\",\"metadata\":{\"name\":\"probe\"},\"spec\":{\"containers\":[{\"name\":"
                 "\"c\",\"image\":\"x\",\"resources\":{\"limits\":{\"gpuquota.io/gpu-memory\":"
                 "\"1Gi\"}}}]}}}}",
                 prefix, n_ns - 1);
        int seen = 0;
        for (int tries = 0; !seen && tries < 300; tries++) {
            char *out = NULL;
            if (h && !post(h, reps[rep].port, body, &out))
                seen = strstr(out, "checked-quotas") != NULL;
            free(out);
            if (!seen) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        curl_easy_cleanup(h);
        curl_slist_free_all(hdr);
        if (!seen)
            return -1;
    }
    for (int rep = 0; !g_ca[0] && rep < n_reps; rep++) {
        for (int tries = 0;; tries++) {
            json_object *arr = NULL;
            char ns[64];
            snprintf(ns, sizeof(ns), "%s-%02d", prefix, n_ns - 1);
            gq_err e;
            size_t have = 0;
            if (!reps[rep].store.list(reps[rep].store.ctx, WH_LIST_QUOTAS, ns, &arr, &e))
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
    memset(before, 0, sizeof(before));
    for (int rep = 0; !g_ca[0] && rep < n_reps; rep++)
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
    for (int rep = 0; !g_ca[0] && rep < n_reps; rep++) {
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
    char writes[64] = "-", c409[64] = "-"; /* only known in process */
    if (!g_ca[0]) {
        snprintf(writes, sizeof(writes), "%llu", (unsigned long long)batches);
        snprintf(c409, sizeof(c409), "%llu", (unsigned long long)conflicts);
    }
    printf("%-14s %6d pods  %3d ns  %6.0f admissions/s  p50 %6.2f ms  p99 %7.2f ms  "
           "allowed %ld (hard total %d)  over-admitted %ld  quotas off %ld  status writes %s  "
           "409s %s  errors %d  controller folds %ld\n",
           n_ns == 1 ? "one namespace" : "spread", pods, n_ns, pods / secs, r.lat[pods / 2] * 1000,
           r.lat[pods * 99 / 100] * 1000, allowed, hard * n_ns, over, mismatched, writes, c409,
           atomic_load(&r.errors), fo.folds);
    free(r.lat);
    return over || mismatched || atomic_load(&r.errors) ? 1 : 0;
}

static char g_dir[64]; /* HTTPS mode: scratch directory */

/* Start `gpuquota webhook` against the stand-in at url; fills pid, port. */
static int start_webhook(const char *gq, const char *url, int idx, replica *r)
{
    char kc[128], log[128], cert[128], key[128];
    snprintf(kc, sizeof(kc), "%s/kubeconfig", g_dir);
    snprintf(log, sizeof(log), "%s/webhook%d.log", g_dir, idx);
    snprintf(cert, sizeof(cert), "%s/tls.crt", g_dir);
    snprintf(key, sizeof(key), "%s/tls.key", g_dir);
    if (idx == 0) {
        FILE *f = fopen(kc, "w");
        if (!f)
            return -1;
        fprintf(f,
                "apiVersion: v1\nkind: Config\nclusters: [{name: s, cluster: {server: \"%s\"}}]\n"
                "contexts: [{name: s, context: {cluster: s, user: u}}]\ncurrent-context: s\n"
                "users: [{name: u, user: {token: t}}]\n",
                url);
        fclose(f);
    }
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        execl(gq, gq, "webhook", "--tls-cert", cert, "--tls-key", key, "--listen", "127.0.0.1:0",
              "--threads", "16", "--kubeconfig", kc, (char *)NULL);
        _exit(127);
    }
    r->pid = pid;
    for (int tries = 0; tries < 200; tries++) {
        char line[512];
        FILE *f = fopen(log, "r");
        while (f && fgets(line, sizeof(line), f)) {
            const char *m = strstr(line, "listening on 127.0.0.1:");
            if (m) {
                r->port = atoi(m + strlen("listening on 127.0.0.1:"));
                break;
            }
        }
        if (f)
            fclose(f);
        if (r->port)
            return 0;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

int main(int argc, char **argv)
{
    const char *standin = "test/kube-standin", *gq = NULL;
    int pods = 4000, n_reps = 3, threads = 96, latency_ms = 0, controller_ms = 250;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--standin"))
            standin = argv[i + 1];
        else if (!strcmp(argv[i], "--gpuquota"))
            gq = argv[i + 1];
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
    if (gq) {
        char cmd[512];
        snprintf(g_dir, sizeof(g_dir), "/tmp/gq-bench-validate.XXXXXX");
        if (!mkdtemp(g_dir))
            goto out;
        snprintf(cmd, sizeof(cmd),
                 "'%s' certs generate --service wh --namespace gq --out '%s' --san 127.0.0.1 "
                 ">/dev/null",
                 gq, g_dir);
        snprintf(g_ca, sizeof(g_ca), "%s/ca.crt", g_dir);
        if (system(cmd) != 0)
            goto out;
        curl_global_init(CURL_GLOBAL_DEFAULT);
        for (int i = 0; i < n_reps; i++)
            if (start_webhook(gq, s.url, i, &reps[i])) {
                fprintf(stderr, "webhook %d did not start\n", i);
                goto out;
            }
    }
    for (int i = 0; !gq && i < n_reps; i++) {
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
    for (int i = 0; !gq && i < n_reps; i++)
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
    printf("bench_validate: %d %s replicas, %d threads, stand-in latency %d ms, controller every "
           "%d ms, pods of 10Gi\n",
           n_reps, gq ? "webhook-process (HTTPS)" : "in-process", threads, latency_ms,
           controller_ms);
    status = do_run("one", 1, pods, reps, n_reps, threads, controller_ms);
    status |= do_run("spread", 50, pods, reps, n_reps, threads, controller_ms);
out:
    if (status && e.msg[0])
        fprintf(stderr, "%s\n", e.msg);
    for (int i = 0; i < n_reps; i++) {
        if (reps[i].pid > 0) {
            kill(reps[i].pid, SIGTERM);
            waitpid(reps[i].pid, NULL, 0);
        }
        wh_validator_free(reps[i].v);
        wh_kubestore_free(reps[i].ks);
        kube_client_free(reps[i].client);
    }
    kube_client_free(admin);
    gq_config_free(cfg);
    standin_stop(&s);
    if (g_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", g_dir);
    }
    return status;
}
