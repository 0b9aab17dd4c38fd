/* CPU of the controller's admission pass with a deep queue and no room, over
 * the fake kube_api of the controller's tests (test/unit/controller/
 * ctl_fake.h: no sockets, answers at once): Q pods queued over N
 * namespaces, each with a Queue GPUQuota of 1Gi held by one running pod, so
 * every pass plans the whole queue and admits nobody. After the controller
 * has settled, P passes are asked one after another; printed: the mean
 * thread CPU of a pass (gpuquota_queue_pass_cpu_seconds) and the quota
 * GETs and status writes they made. Figures only: nothing is asserted.
 * What a pass costs against a real API server adds the requests' own
 * costs (a GET there is a round trip and a JSON parse, here a copy).
 * usage: bench_queue_pass [-q QUEUED] [-n NAMESPACES] [-i PASSES] */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit/controller/ctl_fake.h"

#include "common/gq_log.h"
#include "controller/ctl_run.h"

/* One pod of namespace bq-NS, named NAME, 1Gi: gated when queued. */
static void add_pod(json_object *pods, int ns, const char *name, int seq, bool queued)
{
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"bq-%03d\",\"uid\":\"u-%s-%03d\","
             "\"resourceVersion\":\"1\",\"creationTimestamp\":\"2026-11-21T%02d:%02d:%02dZ\","
             "\"annotations\":{}},\"spec\":{%s\"containers\":[{\"name\":\"c\",\"resources\":{"
             "\"limits\":{\"gpuquota.io/gpu-memory\":\"1Gi\"}}}]}}",
             name, ns, name, ns, seq / 3600 % 24, seq / 60 % 60, seq % 60,
             queued ? "\"schedulingGates\":[{\"name\":\"gpuquota.io/quota\"}]," : "");
    json_object_array_add(pods, json_tokener_parse(buf));
}

static void world(fake *f, int queued, int nns)
{
    fake_setup(f, "[]", "[]", "[]", "[]");
    char buf[1024];
    for (int n = 0; n < nns; n++) {
        snprintf(buf, sizeof buf,
                 "{\"apiVersion\":\"gpuquota.io/v1alpha1\",\"kind\":\"GPUQuota\",\"metadata\":{"
                 "\"name\":\"q\",\"namespace\":\"bq-%03d\",\"uid\":\"u-q-%03d\",\"generation\":1,"
                 "\"resourceVersion\":\"1\"},\"spec\":{\"hard\":{\"gpu-memory\":\"1Gi\"},"
                 "\"whenExceeded\":\"Queue\"}}",
                 n, n);
        json_object_array_add(f->quotas, json_tokener_parse(buf));
        snprintf(buf, sizeof buf, "{\"metadata\":{\"name\":\"bq-%03d\",\"resourceVersion\":\"1\"}}",
                 n);
        json_object_array_add(f->nss, json_tokener_parse(buf));
        add_pod(f->pods, n, "filler", 0, false);
    }
    for (int i = 0; i < queued; i++) {
        char name[32];
        snprintf(name, sizeof name, "p%05d", i);
        add_pod(f->pods, i % nns, name, i + 1, true);
    }
}

/* "COUNT SUM" of the pass CPU histogram. */
static void pass_cpu(double *count, double *sum)
{
    char *text = NULL;
    size_t len = 0;
    *count = *sum = 0;
    if (http_metrics_render(registry, &text, &len))
        return;
    const char *c = strstr(text, "\ngpuquota_queue_pass_cpu_seconds_count ");
    const char *s = strstr(text, "\ngpuquota_queue_pass_cpu_seconds_sum ");
    if (c)
        *count = strtod(strchr(c + 1, ' ') + 1, NULL);
    if (s)
        *sum = strtod(strchr(s + 1, ' ') + 1, NULL);
    free(text);
}

/* Wait until the pass count stays put for 300 ms. */
static void settle_passes(void)
{
    double last = -1, count, sum;
    for (int i = 0; i < 600; i++) {
        pass_cpu(&count, &sum);
        if (count == last)
            return;
        last = count;
        fake_sleep_ms(300);
    }
}

int main(int argc, char **argv)
{
    int queued = 10000, nns = 100, passes = 20, opt;
    while ((opt = getopt(argc, argv, "q:n:i:")) != -1) {
        long v = strtol(optarg, NULL, 10);
        if (v <= 0 || v > 1000000)
            return fprintf(stderr, "bad -%c\n", opt), 2;
        if (opt == 'q')
            queued = (int)v;
        else if (opt == 'n')
            nns = v > 999 ? 999 : (int)v;
        else if (opt == 'i')
            passes = (int)v;
        else
            return fprintf(stderr, "usage: %s [-q QUEUED] [-n NAMESPACES] [-i PASSES]\n", argv[0]),
                   2;
    }
    if (http_metrics_new("bench", &registry))
        return 1;
    gq_log_set_level(GQ_LOG_ERROR);
    fake f;
    world(&f, queued, nns);
    gq_config *cfg = NULL;
    gq_err err;
    if (gq_config_default(&cfg, &err))
        return 1;
    kube_api api = fake_api(&f);
    ctl_controller_opts o = {
        .api = &api, .cfg = cfg, .now = fixed_now, .identity = "bench", .metrics = registry};
    ctl_controller *c = NULL;
    if (ctl_controller_new(&o, &c, &err) || ctl_controller_start(c, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    while (!ctl_controller_synced(c))
        fake_sleep_ms(50);
    settle_passes();
    double c0, s0, c1, s1;
    pthread_mutex_lock(&f.mu);
    int gets0 = f.status_gets, writes0 = f.writes;
    pthread_mutex_unlock(&f.mu);
    pass_cpu(&c0, &s0);
    for (int i = 0; i < passes; i++) {
        double before = 0, now = 0, sum;
        pass_cpu(&before, &sum);
        ctl_ungate_kick(c);
        for (int w = 0; w < 6000 && now <= before; w++) {
            fake_sleep_ms(5);
            pass_cpu(&now, &sum);
        }
    }
    pass_cpu(&c1, &s1);
    pthread_mutex_lock(&f.mu);
    int gets = f.status_gets - gets0, writes = f.writes - writes0, patches = f.patches;
    pthread_mutex_unlock(&f.mu);
    double n = c1 - c0;
    printf("## %d queued in %d namespaces, no room: %.0f passes, %.2f ms of pass CPU each; "
           "%.1f quota GETs and %.1f status writes per pass; %d ungates\n",
           queued, nns, n, n > 0 ? (s1 - s0) * 1000 / n : 0, n > 0 ? gets / n : 0,
           n > 0 ? writes / n : 0, patches);
    ctl_controller_stop(c);
    ctl_controller_free(c);
    gq_config_free(cfg);
    fake_dispose(&f);
    http_metrics_free(registry);
    return 0;
}
