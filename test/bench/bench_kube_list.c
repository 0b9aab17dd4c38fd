/* Figures for the Kubernetes client against the stand-in (not a test):
 *   - list of N pods with pagination (page 500): seconds, items/s, and the
 *     client's peak RSS during the list (VmHWM, reset before the list);
 *   - watch throughput: events/s seen by one watcher while other threads
 *     create pods, and the replay rate of a watch started from an old
 *     resourceVersion.
 * Usage: bench_kube_list [--pods N] [--watch-pods M] [--standin PATH] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "kube/kube.h"
#include "support/standin_proc.h"

static kube_client *cli;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A kB figure from /proc/self/status ("VmHWM", "VmRSS"); -1 if unknown. */
static long proc_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f)) {
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    }
    if (f)
        fclose(f);
    return v;
}

/* Reset VmHWM to the current RSS (Linux >= 4.0). */
static void reset_hwm(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* CPU seconds used by this process (all threads): the client's own cost,
 * apart from the stand-in's, which runs in another process. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static json_object *make_pod(int i)
{
    char buf[2048];
    snprintf(
        buf, sizeof(buf),
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"train-%07d\","
        "\"namespace\":\"ns-%03d\",\"labels\":{\"app\":\"trainer\",\"gpuquota.io/managed\":"
        "\"true\",\"job-name\":\"job-%05d\"},\"annotations\":{\"gpuquota.io/charged\":"
        "\"gpu-memory=10Gi\"}},\"spec\":{\"schedulerName\":\"default-scheduler\","
        "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"main\",\"image\":"
        "\"registry.example/ml/train:1.4.2\",\"command\":[\"python\",\"train.py\"],"
        "\"resources\":{\"limits\":{\"cpu\":\"4\",\"memory\":\"16Gi\",\"aliyun.com/gpu-mem\":"
        "\"10\"},\"requests\":{\"cpu\":\"2\",\"memory\":\"8Gi\",\"aliyun.com/gpu-mem\":\"10\"}},"
        "\"env\":[{\"name\":\"EPOCHS\",\"value\":\"30\"}]}],\"nodeSelector\":"
        "{\"nvidia.com/gpu.present\":\"true\"}}}",
        i, i % 100, i / 4);
    return json_tokener_parse(buf);
}

typedef struct range {
    int from, to, failed;
} range;

static void *create_range(void *arg)
{
    range *r = arg;
    for (int i = r->from; i < r->to; i++) {
        char path[96];
        gq_err e;
        snprintf(path, sizeof(path), "/api/v1/namespaces/ns-%03d/pods", i % 100);
        json_object *p = make_pod(i);
        if (kube_create(cli, path, p, NULL, NULL, &e) != GQ_OK) {
            fprintf(stderr, "create %d: %s\n", i, e.msg);
            r->failed = 1;
            json_object_put(p);
            return NULL;
        }
        json_object_put(p);
    }
    return NULL;
}

static int create_pods(int from, int to, int threads)
{
    pthread_t th[8];
    range r[8];
    int per = (to - from + threads - 1) / threads, failed = 0;
    for (int t = 0; t < threads; t++) {
        r[t] = (range){from + t * per, from + (t + 1) * per > to ? to : from + (t + 1) * per, 0};
        pthread_create(&th[t], NULL, create_range, &r[t]);
    }
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        failed |= r[t].failed;
    }
    return failed ? -1 : 0;
}

static gq_code count_item(void *ud, json_object *item, gq_err *err)
{
    (*(long *)ud)++;
    return GQ_OK;
}

typedef struct watch_run {
    atomic_int stop;
    atomic_long events;
    long want;
    double t_last;
    const char *rv;
    gq_code rc;
} watch_run;

static gq_code on_event(void *ud, kube_event_type t, json_object *obj, gq_err *err)
{
    watch_run *w = ud;
    if (t == KUBE_EVENT_BOOKMARK)
        return GQ_OK;
    if (atomic_fetch_add(&w->events, 1) + 1 == w->want) {
        w->t_last = now_s();
        atomic_store(&w->stop, 1);
    }
    return GQ_OK;
}

static void *watch_main(void *arg)
{
    watch_run *w = arg;
    gq_err e;
    kube_watch_opts o = {.resource_version = w->rv, .stop = &w->stop};
    w->rc = kube_watch(cli, "/api/v1/pods", &o, on_event, w, &e);
    if (w->rc)
        fprintf(stderr, "watch: %s\n", e.msg);
    return NULL;
}

int main(int argc, char **argv)
{
    int pods = 100000, watch_pods = 20000, rc = 1;
    char standin[4096];
    snprintf(standin, sizeof(standin), "%s", argv[0]);
    char *slash = strrchr(standin, '/');
    snprintf(slash ? slash + 1 : standin,
             sizeof(standin) - (size_t)(slash ? slash + 1 - standin : 0), "kube-standin");
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--pods"))
            pods = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--watch-pods"))
            watch_pods = (int)strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--standin"))
            snprintf(standin, sizeof(standin), "%s", argv[i + 1]);
    }
    char hist[32];
    snprintf(hist, sizeof(hist), "%d", pods + watch_pods + 1000);
    const char *extra[] = {"--history", hist, NULL};
    standin_proc s;
    if (standin_start(&s, standin, extra, 0) != 0) {
        fprintf(stderr, "cannot start %s\n", standin);
        return 1;
    }
    kube_config cfg = {.server = s.url, .namespace_ = "default"};
    gq_err e;
    if (kube_client_new(&cfg, NULL, &cli, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        goto out;
    }
    for (int n = 0; n < 100; n++) {
        char buf[96];
        snprintf(buf, sizeof(buf), "{\"metadata\":{\"name\":\"ns-%03d\"}}", n);
        json_object *ns = json_tokener_parse(buf);
        gq_code c = kube_create(cli, "/api/v1/namespaces", ns, NULL, NULL, &e);
        json_object_put(ns);
        if (c && c != GQ_EEXISTS) {
            fprintf(stderr, "%s\n", e.msg);
            goto out;
        }
    }
    char *start_rv = NULL;
    long dummy = 0;
    if (kube_list(cli, "/api/v1/pods", NULL, count_item, &dummy, &start_rv, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        goto out;
    }

    double t0 = now_s();
    if (create_pods(0, pods, 4))
        goto out;
    double t_create = now_s() - t0;
    printf("create: %d pods in %.2f s (%.0f creates/s, 4 threads, one client)\n", pods, t_create,
           pods / t_create);

    long rss_before = proc_kb("VmRSS");
    reset_hwm();
    long items = 0;
    char *rv = NULL;
    kube_list_opts lo = {.page_size = 500};
    t0 = now_s();
    double c0 = cpu_s();
    if (kube_list(cli, "/api/v1/pods", &lo, count_item, &items, &rv, &e)) {
        fprintf(stderr, "list: %s\n", e.msg);
        goto out;
    }
    double t_list = now_s() - t0, c_list = cpu_s() - c0;
    long hwm = proc_kb("VmHWM");
    printf("list: %ld pods, page size 500, in %.2f s wall (%.0f items/s), client CPU %.2f s "
           "(%.0f items/s of client CPU); client RSS before %ld kB, peak during list %ld kB "
           "(+%ld kB)\n",
           items, t_list, items / t_list, c_list, items / c_list, rss_before, hwm,
           hwm - rss_before);

    /* Watch while creating. */
    watch_run w = {.want = watch_pods, .rv = rv};
    pthread_t wt;
    pthread_create(&wt, NULL, watch_main, &w);
    usleep(200000);
    t0 = now_s();
    if (create_pods(pods, pods + watch_pods, 2)) {
        atomic_store(&w.stop, 1);
        pthread_join(wt, NULL);
        goto out;
    }
    double t_created = now_s() - t0;
    for (int i = 0; i < 30000 && atomic_load(&w.events) < watch_pods; i++)
        usleep(1000);
    atomic_store(&w.stop, 1);
    pthread_join(wt, NULL);
    long got = atomic_load(&w.events);
    printf("watch while creating: %ld/%d events in %.2f s (%.0f events/s; creates took %.2f s)\n",
           got, watch_pods, (got == watch_pods ? w.t_last : now_s()) - t0,
           got / ((got == watch_pods ? w.t_last : now_s()) - t0), t_created);

    /* Replay: a watch from before all the creates streams the history. */
    long total = pods + watch_pods;
    watch_run r = {.want = total, .rv = start_rv};
    t0 = now_s();
    pthread_create(&wt, NULL, watch_main, &r);
    for (int i = 0; i < 120000 && atomic_load(&r.events) < total; i++)
        usleep(1000);
    atomic_store(&r.stop, 1);
    pthread_join(wt, NULL);
    got = atomic_load(&r.events);
    double t_replay = (got == total ? r.t_last : now_s()) - t0;
    printf("watch replay from an old resourceVersion: %ld/%ld events in %.2f s (%.0f events/s)\n",
           got, total, t_replay, got / t_replay);
    rc = 0;
    free(rv);
    free(start_rv);
out:
    kube_client_free(cli);
    standin_stop(&s);
    return rc;
}
