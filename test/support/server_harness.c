/* A http_server with test routes, for the integration script: the real server
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

static void echo(void *ctx, const http_request *req, http_response *resp)
{
    if (http_response_set_body(resp, 200, "application/json", req->body, req->body_len))
        http_response_error(resp, 500, "out of memory");
}

static void slow(void *ctx, const http_request *req, http_response *resp)
{
    long ms = strtol(req->body, NULL, 10);
    if (ms < 0 || ms > 60000)
        ms = 0;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    if (http_response_set_body(resp, 200, "application/json", "{\"slept\":true}", 14))
        http_response_error(resp, 500, "out of memory");
}

int main(int argc, char **argv)
{
    gq_err err;
    http_server *srv = NULL;
    sigset_t sigs;
    int sig = 0;
    if (argc != 4) {
        fprintf(stderr, "usage: server_harness CERT KEY LISTEN\n");
        return 2;
    }
    gq_log_init();
    http_server_options o = {.listen = argv[3], .cert_file = argv[1], .key_file = argv[2]};
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (http_server_new(&o, &srv, &err) ||
        http_server_add_handler(srv, "/echo", HTTP_ROUTE_POST_JSON, echo, NULL, &err) ||
        http_server_add_handler(srv, "/slow", HTTP_ROUTE_POST_JSON, slow, NULL, &err) ||
        http_server_start(srv, &err)) {
        fprintf(stderr, "server_harness: %s\n", err.msg);
        http_server_free(srv);
        return 1;
    }
    GQ_INFO("listening on 127.0.0.1:%u", http_server_port(srv));
    http_server_set_ready(srv, true);
    while (sigwait(&sigs, &sig) != 0)
        ;
    unsigned left = http_server_stop(srv, 10000);
    http_server_free(srv);
    return left ? 1 : 0;
}
