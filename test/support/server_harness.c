/* A wh_server with test routes, for the integration script: the real server
 * library and TLS setup, plus POST handlers the gpuquota binary does not
 * have yet.
 *   POST /echo   echoes the JSON body
 *   POST /slow   sleeps for the number of milliseconds in the body, then 200
 * Usage: server_harness CERT KEY LISTEN. Logs "listening on HOST:PORT";
 * SIGTERM drains (10 s) and exits 0, like `gpuquota webhook`. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/gq_log.h"
#include "http/server.h"

static void echo(void *ctx, const wh_request *req, wh_response *resp)
{
    if (wh_response_set_body(resp, 200, "application/json", req->body, req->body_len))
        wh_response_error(resp, 500, "out of memory");
}

static void slow(void *ctx, const wh_request *req, wh_response *resp)
{
    long ms = strtol(req->body, NULL, 10);
    if (ms < 0 || ms > 60000)
        ms = 0;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    if (wh_response_set_body(resp, 200, "application/json", "{\"slept\":true}", 14))
        wh_response_error(resp, 500, "out of memory");
}

int main(int argc, char **argv)
{
    gq_err err;
    wh_server *srv = NULL;
    sigset_t sigs;
    int sig = 0;
    if (argc != 4) {
        fprintf(stderr, "usage: server_harness CERT KEY LISTEN\n");
        return 2;
    }
    gq_log_init();
    wh_server_options o = {.listen = argv[3], .cert_file = argv[1], .key_file = argv[2]};
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (wh_server_new(&o, &srv, &err) ||
        wh_server_add_handler(srv, "/echo", WH_ROUTE_POST_JSON, echo, NULL, &err) ||
        wh_server_add_handler(srv, "/slow", WH_ROUTE_POST_JSON, slow, NULL, &err) ||
        wh_server_start(srv, &err)) {
        fprintf(stderr, "server_harness: %s\n", err.msg);
        wh_server_free(srv);
        return 1;
    }
    GQ_INFO("listening on 127.0.0.1:%u", wh_server_port(srv));
    wh_server_set_ready(srv, true);
    while (sigwait(&sigs, &sig) != 0)
        ;
    unsigned left = wh_server_stop(srv, 10000);
    wh_server_free(srv);
    return left ? 1 : 0;
}
