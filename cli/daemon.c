#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/daemon.h"
#include "common/gq_log.h"

/* Signals are taken synchronously by the main thread: block them before any
 * other thread exists (caches, workers, server) so every one inherits the
 * mask. */
static void block_signals(sigset_t *sigs, bool hup)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    if (hup)
        sigaddset(sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
}

int cli_daemon_main(const cli_daemon *d, void *args, void *run, size_t run_size, int argc,
                    char **argv)
{
    gq_err err;
    sigset_t sigs;
    int exit_code;

    gq_log_init();
    gq_err_clear(&err);
    if ((exit_code = d->parse(argc, argv, args)) >= 0)
        return exit_code;
    memset(run, 0, run_size);
    block_signals(&sigs, d->hup);
    if (d->start(run, args, &err)) {
        GQ_ERROR("%s", err.msg[0] ? err.msg : "out of memory");
        exit_code = 1;
    } else {
        d->serve(run, args, &sigs);
        exit_code = CLI_EXIT_OK;
    }
    d->teardown(run);
    return exit_code;
}
