/* The life of a long-running subcommand (gpuquota webhook, gpuquota
 * controller): parse the command line, take the stop signals, start, serve
 * until told to stop, free what was started. Each subcommand says only what
 * its steps are. */
#ifndef CLI_DAEMON_H
#define CLI_DAEMON_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/gq_error.h"

/* A subcommand's steps; args is its command line once parsed, run what it
 * starts (zeroed before start). */
typedef struct cli_daemon {
    bool hup; /* SIGHUP is taken too (and so never kills the process) */
    /* argv into args: -1 to go on, else the exit status (usage, --help). */
    int (*parse)(int argc, char **argv, void *args);
    /* Set up and start serving; what it made is freed by teardown, even when
     * it fails. The stop signals are already blocked in every thread. */
    gq_code (*start)(void *run, const void *args, gq_err *err);
    /* Serve until SIGTERM or SIGINT (taken from sigs), then stop serving. */
    void (*serve)(void *run, const void *args, const sigset_t *sigs);
    void (*teardown)(void *run);
} cli_daemon;

/* Run d's steps in order over args and run (run_size bytes) and return the
 * exit status: parse's, else 1 when start fails (its error logged), else 0
 * once stopped. */
int cli_daemon_main(const cli_daemon *d, void *args, void *run, size_t run_size, int argc,
                    char **argv);

#endif
