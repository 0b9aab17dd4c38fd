/* Per-request CPU cost of /mutate without sockets or TLS, single-threaded:
 * the handler (decode, decide, encode, audit record to a file) against the
 * work of the baselines (a json-c parse of the body and its release), on
 * the benchmark's review bodies. Prints microseconds per request; run it
 * under `valgrind --tool=callgrind` for instruction counts.
 * usage: bench_mutate_micro [-n ITERATIONS] [--no-baseline] [--audit FILE] REVIEW.json... */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "webhook/audit.h"
#include "quota/config.h"
#include "webhook/metrics.h"
#include "webhook/mutate_http.h"
#include "http/server.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 20);
    *len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    if (buf)
        buf[*len] = '\0';
    return buf;
}

int main(int argc, char **argv)
{
    long iters = 20000;
    bool baseline = true;
    const char *audit_path = "/dev/null";
    int first = 1;
    while (first < argc && argv[first][0] == '-') {
        if (!strcmp(argv[first], "-n") && first + 1 < argc)
            iters = strtol(argv[++first], NULL, 10);
        else if (!strcmp(argv[first], "--no-baseline"))
            baseline = false;
        else if (!strcmp(argv[first], "--audit") && first + 1 < argc)
            audit_path = argv[++first];
        else
            break;
        first++;
    }
    if (first >= argc || iters <= 0) {
        fprintf(stderr, "usage: bench_mutate_micro [-n N] [--no-baseline] [--audit FILE] "
                        "REVIEW.json...\n");
        return 2;
    }
    size_t n = (size_t)(argc - first);
    char **bodies = calloc(n, sizeof(*bodies));
    size_t *lens = calloc(n, sizeof(*lens));
    for (size_t i = 0; i < n; i++)
        if (!(bodies[i] = slurp(argv[first + (int)i], &lens[i]))) {
            fprintf(stderr, "cannot read %s\n", argv[first + (int)i]);
            return 2;
        }

    gq_config *cfg = NULL;
    http_metrics *registry = NULL;
    wh_metrics *m = NULL;
    wh_audit *audit = NULL;
    gq_err err;
    gq_audit_config ac = {.path = (char *)audit_path};
    if (gq_config_default(&cfg, &err) || http_metrics_new("bench", &registry) ||
        wh_metrics_new(registry, &m) || wh_audit_open(&ac, &audit, &err)) {
        fprintf(stderr, "setup failed: %s\n", err.msg);
        return 1;
    }
    wh_mutate_ctx mc = {.cfg = cfg, .audit = audit, .metrics = m};

    /* The baselines' per-request work: parse with json-c, release. */
    double t0 = now_s();
    for (long k = 0; baseline && k < iters; k++) {
        size_t i = (size_t)k % n;
        json_tokener *tok = json_tokener_new();
        json_object *o = json_tokener_parse_ex(tok, bodies[i], (int)lens[i]);
        json_object_put(o);
        json_tokener_free(tok);
    }
    double parse_us = (now_s() - t0) / (double)iters * 1e6;

    int bad = 0;
    t0 = now_s();
    for (long k = 0; k < iters; k++) {
        size_t i = (size_t)k % n;
        http_request req = {.method = "POST",
                            .path = "/mutate",
                            .content_type = "application/json",
                            .body = bodies[i],
                            .body_len = lens[i],
                            .remote_addr = ""};
        http_response resp;
        http_response_init(&resp);
        wh_mutate_handle(&mc, &req, &resp);
        bad += resp.status != 200;
        http_response_dispose(&resp);
    }
    double mutate_us = (now_s() - t0) / (double)iters * 1e6;

    printf("json-c parse + free (baseline b's work): %8.2f us/request\n", parse_us);
    printf("/mutate handler (decode..audit):         %8.2f us/request  (%.2fx)\n", mutate_us,
           mutate_us / parse_us);
    printf("%ld requests over %zu bodies, %d not 200, %ju audit records\n", iters, n, bad,
           (uintmax_t)wh_audit_records(audit));
    wh_audit_close(audit);
    wh_metrics_free(m);
    http_metrics_free(registry);
    gq_config_free(cfg);
    for (size_t i = 0; i < n; i++)
        free(bodies[i]);
    free(bodies);
    free(lens);
    return bad != 0;
}
