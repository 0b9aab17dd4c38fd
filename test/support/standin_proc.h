/* Start and stop the kube-apiserver stand-in (test/kube-standin) from a test
 * or benchmark: it binds an ephemeral port and prints "listening on
 * 127.0.0.1:PORT", which is read back here. */
#ifndef STANDIN_PROC_H
#define STANDIN_PROC_H

#include <sys/types.h>

typedef struct standin_proc {
    pid_t pid;
    int out_fd; /* read end of the child's stdout */
    int port;
    char url[96]; /* "http://127.0.0.1:PORT" or https:// */
} standin_proc;

/* Run bin with "--port 0" plus extra (NULL-terminated, may be NULL).
 * Returns 0 when the port was read within 10 s, -1 otherwise (and the
 * child is gone). tls selects the https:// scheme in url. */
int standin_start(standin_proc *s, const char *bin, const char *const *extra, int tls);
/* SIGTERM, then SIGKILL after 3 s; reaps the child. Accepts a zeroed struct. */
void standin_stop(standin_proc *s);

#endif
