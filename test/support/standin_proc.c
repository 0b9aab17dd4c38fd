#include "standin_proc.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int standin_start(standin_proc *s, const char *bin, const char *const *extra, int tls)
{
    const char *argv[32];
    int argc = 0, pfd[2];
    memset(s, 0, sizeof(*s));
    argv[argc++] = bin;
    argv[argc++] = "--port";
    argv[argc++] = "0";
    for (int i = 0; extra && extra[i] && argc < 31; i++)
        argv[argc++] = extra[i];
    argv[argc] = NULL;
    if (pipe(pfd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* Die with the test even when it aborts (ASan) before stopping us. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    s->pid = pid;
    char buf[512];
    size_t len = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = 10000 - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        struct pollfd p = {pfd[0], POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t n = read(pfd[0], buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        const char *m = strstr(buf, "listening on 127.0.0.1:");
        if (m && strchr(m, '\n')) {
            long port = strtol(m + strlen("listening on 127.0.0.1:"), NULL, 10);
            s->port = port > 0 && port < 65536 ? (int)port : -1;
            break;
        }
        if (len == sizeof(buf) - 1)
            break;
    }
    /* Keep the pipe open until stop: closing it could SIGPIPE a chatty child. */
    s->out_fd = pfd[0];
    if (s->port <= 0) {
        standin_stop(s);
        return -1;
    }
    snprintf(s->url, sizeof(s->url), "%s://127.0.0.1:%d", tls ? "https" : "http", s->port);
    return 0;
}

void standin_stop(standin_proc *s)
{
    if (s->out_fd > 0)
        close(s->out_fd);
    s->out_fd = 0;
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 300; i++) {
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
            s->pid = 0;
            return;
        }
        usleep(10000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}
