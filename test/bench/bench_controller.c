/* Controller figures against the kube-apiserver stand-in (DESIGN.md §7):
 *   - initial sync of N GPU pods in M namespaces (one GPUQuota each, plus
 *     tenants): time from exec until every pod is tracked and every quota's
 *     status shows its pods;
 *   - RSS per tracked pod: (RSS after sync - RSS of a controller over the
 *     same cluster without pods) / N;
 *   - event -> status latency under R pod creates + R pod deletes per second,
 *     seen by a client watching GPUQuotas.
 * A program that prints figures, never a test.
 *
 * usage: bench_controller STANDIN_BIN GPUQUOTA_BIN CRD_DIR [PODS [NAMESPACES [RATE [SECONDS]]]]
 * defaults: 100000 pods, 1000 namespaces, 100 creates/s + 100 deletes/s, 20 s. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"
#include "support/standin_proc.h"

static int g_pods = 100000, g_ns = 1000, g_rate = 100, g_secs = 20;
static kube_client *g_client;
static char g_kubeconfig[256];

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static void die(const char *what, const gq_err *err)
{
    fprintf(stderr, "bench_controller: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

static void create_json(const char *path, const char *json)
{
    gq_err err;
    json_object *o = json_tokener_parse(json);
    if (!o)
        die("bad JSON", NULL);
    gq_code rc = kube_create(g_client, path, o, NULL, NULL, &err);
    json_object_put(o);
    if (rc && rc != GQ_EEXISTS)
        die(path, &err);
}

/* A pod as a Job controller would create it, after the mutating webhook. */
static void pod_json(char *buf, size_t cap, int ns, const char *name)
{
    snprintf(buf, cap,
             "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
             "\"namespace\":\"team-%04d\",\"labels\":{\"app\":\"trainer\",\"job-name\":"
             "\"train-%s\",\"gpuquota.io/managed\":\"true\"},\"annotations\":{"
             "\"gpuquota.io/gpu-requests\":\"{\\\"trainer\\\":{\\\"gpus\\\":1,\\\"memory\\\":"
             "\\\"8Gi\\\"}}\"}},\"spec\":{\"priorityClassName\":\"batch\",\"restartPolicy\":"
             "\"Never\",\"containers\":[{\"name\":\"trainer\",\"image\":\"registry.example.com/"
             "ml/trainer:1.4.2\",\"command\":[\"python\",\"train.py\",\"--epochs\",\"10\"],"
             "\"env\":[{\"name\":\"NCCL_DEBUG\",\"value\":\"INFO\"}],\"resources\":{\"limits\":{"
             "\"cpu\":\"4\",\"memory\":\"16Gi\",\"aliyun.com/gpu-mem\":\"8\"},\"requests\":{"
             "\"cpu\":\"4\",\"memory\":\"16Gi\",\"aliyun.com/gpu-mem\":\"8\"}}}]},"
             "\"status\":{\"phase\":\"Running\"}}",
             name, ns, name);
}

typedef struct filler {
    int from, to; /* pod indexes */
} filler;

static void *fill(void *arg)
{
    filler *f = arg;
    char buf[4096], name[64], path[128];
    for (int i = f->from; i < f->to; i++) {
        int ns = i % g_ns;
        snprintf(name, sizeof name, "p-%07d", i);
        snprintf(path, sizeof path, "/api/v1/namespaces/team-%04d/pods", ns);
        pod_json(buf, sizeof buf, ns, name);
        create_json(path, buf);
    }
    return NULL;
}

static void create_pods(int n)
{
    enum { T = 8 };
    pthread_t th[T];
    filler f[T];
    for (int t = 0; t < T; t++) {
        f[t].from = (int)((long)n * t / T);
        f[t].to = (int)((long)n * (t + 1) / T);
        pthread_create(&th[t], NULL, fill, &f[t]);
    }
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
}

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* CPU seconds (user + system) a process has used: a figure that does not
 * depend on how busy the machine is. */
static double cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

typedef struct ctl_proc {
    pid_t pid;
    int port;
    char log[64];
} ctl_proc;

static void start_controller(const char *bin, ctl_proc *p)
{
    snprintf(p->log, sizeof p->log, "/tmp/bench_controller_%d.log", (int)getpid());
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(p->log, "w", stdout) || !freopen(p->log, "a", stderr))
            _exit(127);
        execl(bin, bin, "controller", "--kubeconfig", g_kubeconfig, "--metrics-listen",
              "127.0.0.1:0", "--workers", "2", (char *)NULL);
        _exit(127);
    }
    p->pid = pid;
    p->port = 0;
    for (int i = 0; i < 200 && !p->port; i++) {
        usleep(20000);
        FILE *f = fopen(p->log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            char *m = strstr(line, "metrics listening on port ");
            if (m)
                p->port = atoi(m + strlen("metrics listening on port "));
        }
        if (f)
            fclose(f);
    }
    if (!p->port)
        die("controller did not start", NULL);
}

static void stop_controller(ctl_proc *p)
{
    kill(p->pid, SIGTERM);
    waitpid(p->pid, NULL, 0);
    if (!getenv("BENCH_KEEP_LOG"))
        unlink(p->log);
}

/* One value of the controller's /metrics. */
static double metric(ctl_proc *p, const char *name)
{
    char cmd[256], line[512];
    double v = -1;
    snprintf(cmd, sizeof cmd, "curl -s http://127.0.0.1:%d/metrics", p->port);
    FILE *f = popen(cmd, "r");
    size_t n = strlen(name);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, name, n) && line[n] == ' ')
            v = atof(line + n + 1);
    if (f)
        pclose(f);
    return v;
}

/* Every quota's status shows used gpu-pods == want (checked by listing). */
static gq_code count_ok(void *ud, json_object *item, gq_err *err)
{
    json_object *st, *used, *v;
    int *bad = ud;
    if (!json_object_object_get_ex(item, "status", &st) ||
        !json_object_object_get_ex(st, "used", &used) ||
        !json_object_object_get_ex(used, "gpu-pods", &v) ||
        atoi(json_object_get_string(v)) != g_pods / g_ns)
        (*bad)++;
    return GQ_OK;
}

static gq_code count_item(void *ud, json_object *item, gq_err *err)
{
    (*(int *)ud)++;
    return GQ_OK;
}

static int quotas_behind(void)
{
    int bad = 0;
    gq_err err;
    if (kube_list(g_client, "/apis/gpuquota.io/v1alpha1/gpuquotas", NULL, count_ok, &bad, NULL,
                  &err))
        return -1;
    return bad;
}

/* --- latency -------------------------------------------------------------- */

typedef struct pending {
    atomic_llong t0;   /* 0: nothing pending */
    atomic_int expect; /* gpu-pods the status must show */
    int count;         /* pods in the namespace */
} pending;

static pending *g_pend;
static int64_t *g_lat;
static atomic_int g_nlat;
static atomic_int g_stop_watch;

static gq_code on_quota(void *ud, kube_event_type t, json_object *obj, gq_err *err)
{
    json_object *meta, *nsv, *st, *used, *v;
    if (t != KUBE_EVENT_MODIFIED || !json_object_object_get_ex(obj, "metadata", &meta) ||
        !json_object_object_get_ex(meta, "namespace", &nsv) ||
        !json_object_object_get_ex(obj, "status", &st) ||
        !json_object_object_get_ex(st, "used", &used) ||
        !json_object_object_get_ex(used, "gpu-pods", &v))
        return GQ_OK;
    int ns = atoi(json_object_get_string(nsv) + 5);
    if (ns < 0 || ns >= g_ns)
        return GQ_OK;
    pending *p = &g_pend[ns];
    long long t0 = atomic_load(&p->t0);
    if (t0 && atoi(json_object_get_string(v)) == atomic_load(&p->expect)) {
        int i = atomic_fetch_add(&g_nlat, 1);
        g_lat[i] = now_us() - t0;
        atomic_store(&p->t0, 0);
    }
    return GQ_OK;
}

static void *watcher(void *arg)
{
    const char *rv = arg;
    kube_watch_opts wo = {.resource_version = rv, .stop = &g_stop_watch};
    gq_err err;
    while (!atomic_load(&g_stop_watch))
        if (kube_watch(g_client, "/apis/gpuquota.io/v1alpha1/gpuquotas", &wo, on_quota, NULL, &err))
            fprintf(stderr, "watch: %s\n", err.msg);
    return NULL;
}

typedef struct driver {
    int deletes; /* 0: creates */
    int ops;
} driver;

static void *drive(void *arg)
{
    driver *d = arg;
    char buf[4096], name[64], path[160];
    int64_t start = now_us(), step = 1000000 / g_rate;
    for (int i = 0; i < d->ops; i++) {
        sleep_us(start + i * step - now_us());
        int ns = d->deletes ? (i + g_ns / 2) % g_ns : i % g_ns;
        pending *p = &g_pend[ns];
        if (atomic_load(&p->t0)) /* previous op here not seen yet: skip */
            continue;
        gq_err err;
        if (d->deletes) {
            snprintf(path, sizeof path, "/api/v1/namespaces/team-%04d/pods/p-%07d", ns,
                     ns + g_ns * (i / g_ns));
            atomic_store(&p->expect, p->count - 1);
            atomic_store(&p->t0, now_us());
            if (kube_delete(g_client, path, NULL, &err) == GQ_OK)
                p->count--;
            else
                atomic_store(&p->t0, 0);
        } else {
            snprintf(name, sizeof name, "lat-%07d", i);
            snprintf(path, sizeof path, "/api/v1/namespaces/team-%04d/pods", ns);
            pod_json(buf, sizeof buf, ns, name);
            json_object *o = json_tokener_parse(buf);
            atomic_store(&p->expect, p->count + 1);
            atomic_store(&p->t0, now_us());
            if (kube_create(g_client, path, o, NULL, NULL, &err) == GQ_OK)
                p->count++;
            else
                atomic_store(&p->t0, 0);
            json_object_put(o);
        }
    }
    return NULL;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr,
                "usage: bench_controller STANDIN_BIN GPUQUOTA_BIN CRD_DIR [PODS [NAMESPACES "
                "[RATE [SECONDS]]]]\n");
        return 2;
    }
    if (argc > 4)
        g_pods = atoi(argv[4]);
    if (argc > 5)
        g_ns = atoi(argv[5]);
    if (argc > 6)
        g_rate = atoi(argv[6]);
    if (argc > 7)
        g_secs = atoi(argv[7]);
    if (g_pods <= 0 || g_ns <= 0 || g_ns > 9999 || g_rate <= 0 || g_secs <= 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);

    standin_proc s;
    if (standin_start(&s, argv[1], NULL, 0))
        die("stand-in did not start", NULL);
    snprintf(g_kubeconfig, sizeof g_kubeconfig, "/tmp/bench_controller_%d.kubeconfig",
             (int)getpid());
    FILE *kc = fopen(g_kubeconfig, "w");
    if (!kc)
        die("kubeconfig", NULL);
    fprintf(kc,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster: {server: \"%s\"}\n"
            "contexts:\n- name: s\n  context: {cluster: s, user: u}\ncurrent-context: s\n"
            "users:\n- name: u\n  user: {token: t}\n",
            s.url);
    fclose(kc);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "KUBECONFIG=%s kubectl apply -f %s >/dev/null", g_kubeconfig,
             argv[3]);
    if (system(cmd) != 0)
        die("kubectl apply CRDs", NULL);

    kube_config *cfg;
    gq_err err;
    if (kube_config_load_file(g_kubeconfig, NULL, &cfg, &err) ||
        kube_client_new(cfg, NULL, &g_client, &err))
        die("client", &err);
    kube_config_free(cfg);

    char buf[2048], path[160];
    for (int i = 0; i < g_ns; i++) {
        snprintf(buf, sizeof buf,
                 "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":"
                 "\"team-%04d\",\"labels\":{\"tenant\":\"t%d\"}}}",
                 i, i % 10);
        create_json("/api/v1/namespaces", buf);
        snprintf(path, sizeof path, "/apis/gpuquota.io/v1alpha1/namespaces/team-%04d/gpuquotas", i);
        snprintf(buf, sizeof buf,
                 "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
                 "\"name\":\"gpu\",\"namespace\":\"team-%04d\"},\"spec\":{\"hard\":{\"gpu-"
                 "memory\":\"10Ti\",\"gpu-pods\":100000}}}",
                 i);
        create_json(path, buf);
    }
    for (int t = 0; t < 10; t++) {
        snprintf(buf, sizeof buf,
                 "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUTenantQuota\","
                 "\"metadata\":{\"name\":\"t%d\"},\"spec\":{\"namespaceSelector\":{\"matchLabels\":"
                 "{\"tenant\":\"t%d\"}},\"hard\":{\"gpu-memory\":\"100Ti\"}}}",
                 t, t);
        create_json("/apis/gpuquota.io/v1alpha1/gputenantquotas", buf);
    }

    /* Baseline: the same cluster without pods. */
    ctl_proc cp;
    start_controller(argv[2], &cp);
    while (metric(&cp, "gpuquota_controller_status_writes_total") < g_ns + 10)
        usleep(50000);
    usleep(500000);
    long rss0 = rss_kb(cp.pid);
    stop_controller(&cp);

    int64_t t0 = now_us();
    create_pods(g_pods);
    double fill_s = (double)(now_us() - t0) / 1e6;
    printf("created %d pods in %d namespaces in %.1f s (%.0f pods/s)\n", g_pods, g_ns, fill_s,
           g_pods / fill_s);

    /* Reference: what a bare paged list of every pod costs against this
     * stand-in (500 per page, the client default; the controller asks for
     * 2000). */
    int listed = 0;
    double scpu = cpu_s(s.pid);
    t0 = now_us();
    if (kube_list(g_client, "/api/v1/pods", NULL, count_item, &listed, NULL, &err))
        die("list pods", &err);
    printf("reference: a bare paged list of the %d pods takes %.2f s (stand-in CPU %.2f s)\n",
           listed, (double)(now_us() - t0) / 1e6, cpu_s(s.pid) - scpu);

    scpu = cpu_s(s.pid);
    t0 = now_us();
    start_controller(argv[2], &cp);
    while (metric(&cp, "gpuquota_controller_tracked_pods") < g_pods)
        usleep(20000);
    double synced_s = (double)(now_us() - t0) / 1e6;
    while (metric(&cp, "gpuquota_controller_queue_depth") != 0 || quotas_behind() != 0)
        usleep(20000);
    double all_s = (double)(now_us() - t0) / 1e6;
    double sync_cpu = cpu_s(cp.pid), sync_scpu = cpu_s(s.pid) - scpu;
    usleep(500000);
    long rss1 = rss_kb(cp.pid);
    printf("initial sync: caches hold all %d pods after %.2f s; every quota status correct "
           "after %.2f s (target <= 10 s); CPU: controller %.2f s, stand-in %.2f s\n",
           g_pods, synced_s, all_s, sync_cpu, sync_scpu);
    printf("RSS: %ld kB without pods, %ld kB with %d pods: %.0f bytes per tracked pod (target <= "
           "1536)\n",
           rss0, rss1, g_pods, (double)(rss1 - rss0) * 1024.0 / g_pods);

    /* Latency under R creates + R deletes per second. */
    g_pend = calloc((size_t)g_ns, sizeof(*g_pend));
    int ops = g_rate * g_secs;
    g_lat = calloc((size_t)ops * 2, sizeof(*g_lat));
    for (int i = 0; i < g_ns; i++)
        g_pend[i].count = g_pods / g_ns;
    json_object *list = NULL;
    if (kube_get(g_client, "/apis/gpuquota.io/v1alpha1/gpuquotas?limit=1", NULL, &list, &err))
        die("list", &err);
    json_object *meta, *rvo;
    json_object_object_get_ex(list, "metadata", &meta);
    json_object_object_get_ex(meta, "resourceVersion", &rvo);
    char *rv = strdup(json_object_get_string(rvo));
    json_object_put(list);
    pthread_t w, dc, dd;
    pthread_create(&w, NULL, watcher, rv);
    usleep(300000);
    driver cr = {0, ops}, de = {1, ops};
    pthread_create(&dc, NULL, drive, &cr);
    pthread_create(&dd, NULL, drive, &de);
    pthread_join(dc, NULL);
    pthread_join(dd, NULL);
    usleep(1000000);
    atomic_store(&g_stop_watch, 1);
    pthread_join(w, NULL);
    int n = atomic_load(&g_nlat);
    double lat_cpu = cpu_s(cp.pid) - sync_cpu;
    qsort(g_lat, (size_t)n, sizeof(*g_lat), cmp64);
    if (n)
        printf("event -> status latency over %d operations (%d creates/s + %d deletes/s for %d "
               "s): p50 %.1f ms, p99 %.1f ms, max %.1f ms (target p99 <= 200 ms)\n",
               n, g_rate, g_rate, g_secs, g_lat[n / 2] / 1000.0, g_lat[(n * 99) / 100] / 1000.0,
               g_lat[n - 1] / 1000.0);
    printf("controller CPU during the load: %.2f s over %d s (%.0f%% of one core); RSS at the "
           "end: %ld kB\n",
           lat_cpu, g_secs + 1, 100.0 * lat_cpu / (g_secs + 1), rss_kb(cp.pid));
    stop_controller(&cp);
    free(rv);
    free(g_lat);
    free(g_pend);
    kube_client_free(g_client);
    standin_stop(&s);
    unlink(g_kubeconfig);
    return 0;
}
