/* Calls that wait on the API server, several at once: the admission pass
 * (ungate.c) reads its quotas, writes their charges, ungates pods and posts
 * Events through it. Private to controller/. */
#ifndef CTL_FANOUT_H
#define CTL_FANOUT_H

#include <stddef.h>

/* The most calls ctl_fanout keeps running at once. */
#define CTL_FANOUT_MAX 64u

/* Call fn(ud, i) once for every i in [0, n), at most width calls at a time
 * (width 0 is 1; above CTL_FANOUT_MAX, CTL_FANOUT_MAX). The calling thread
 * and up to width - 1 threads started for the call each take the lowest
 * index not taken yet, call fn with it, and take the next: indices are
 * taken in increasing order, but a call may be overtaken by later ones
 * while it runs. Returns once every call has returned. A thread that
 * cannot be started leaves its share to the others (with none, the
 * calling thread makes every call, in order). fn must be safe to run on
 * several threads at once. */
void ctl_fanout(size_t n, unsigned width, void (*fn)(void *ud, size_t i), void *ud);

#endif
