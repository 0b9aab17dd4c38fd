/* A kube-apiserver that stops answering without closing the connection (the
 * host gone, packets dropped: no FIN, no RST) is noticed by a watch within
 * KUBE_DEAD_PEER_MS (kube/kube.h) plus the probe interval, not after the
 * minutes TCP's defaults take: the cache stops being fresh, and is fresh
 * again once the network comes back.
 *
 * Run in a network namespace of its own with loopback up (test/kube.cmake
 * wraps it in `unshare -n`), where it drops the stand-in's packets with
 * iptables. Usage: test_kube_dead_peer STANDIN_BINARY. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube/kube.h"
#include "support/standin_proc.h"

static const char *standin_bin;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Drop (add) or stop dropping every packet to or from port. */
static void drop(int port, bool add)
{
    char cmd[256];
    for (int dir = 0; dir < 2; dir++) {
        snprintf(cmd, sizeof cmd, "iptables -%c INPUT -p tcp --%s %d -j DROP", add ? 'I' : 'D',
                 dir ? "sport" : "dport", port);
        if (system(cmd) != 0)
            fail_msg("%s failed", cmd);
    }
}

static bool wait_fresh(kube_cache *c, int want, double secs, double *took)
{
    double t0 = now_s();
    while (now_s() - t0 < secs) {
        if (kube_cache_fresh(c) == want) {
            *took = now_s() - t0;
            return true;
        }
        usleep(20000);
    }
    *took = now_s() - t0;
    return false;
}

static void silent_peer_noticed(void **state)
{
    (void)state;
    standin_proc s;
    assert_int_equal(standin_start(&s, standin_bin, NULL, 0), 0);
    kube_config cfg = {.server = s.url, .namespace_ = "default"};
    kube_client *cli = NULL;
    gq_err e;
    assert_int_equal(kube_client_new(&cfg, NULL, &cli, &e), GQ_OK);
    json_object *ns = json_tokener_parse("{\"metadata\":{\"name\":\"dead\"}}");
    assert_int_equal(kube_create(cli, "/api/v1/namespaces", ns, NULL, NULL, &e), GQ_OK);
    json_object_put(ns);
    kube_api api;
    kube_client_api(cli, &api);
    kube_cache_opts o = {
        .path = "/api/v1/namespaces/dead/pods", .backoff_min_ms = 50, .backoff_max_ms = 500};
    kube_cache *c = NULL;
    assert_int_equal(kube_cache_new(&api, &o, &c, &e), GQ_OK);
    assert_int_equal(kube_cache_start(c, &e), GQ_OK);
    double took;
    assert_true(wait_fresh(c, 1, 10, &took));
    sleep(1); /* an established, quiet watch */

    drop(s.port, true);
    bool noticed = wait_fresh(c, 0, 60, &took);
    print_message("silent peer noticed after %.1f s (bound %ld ms + a probe interval)\n", took,
                  KUBE_DEAD_PEER_MS);
    assert_true(noticed);
    /* by the keepalive probes and the user timeout, not at once */
    assert_true(took * 1000 >= KUBE_KEEPALIVE_IDLE_S * 1000);
    assert_true(took * 1000 <= KUBE_DEAD_PEER_MS + 2 * KUBE_KEEPALIVE_INTVL_S * 1000);

    drop(s.port, false);
    assert_true(wait_fresh(c, 1, 30, &took));
    print_message("fresh again %.1f s after the network came back\n", took);
    kube_cache_stop(c);
    kube_cache_free(c);
    kube_client_free(cli);
    standin_stop(&s);
}

int main(int argc, char **argv)
{
    if (argc < 2 || access(argv[1], X_OK) != 0) {
        fprintf(stderr, "usage: %s STANDIN_BINARY\n", argv[0]);
        return 1;
    }
    standin_bin = argv[1];
    const struct CMUnitTest tests[] = {cmocka_unit_test(silent_peer_noticed)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
