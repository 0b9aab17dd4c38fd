/* Several calls at once (fanout.h): threads started for one fan-out take
 * the next index from a shared counter until none is left. */
#include "controller/fanout.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct fan {
    size_t n;
    atomic_size_t next;
    void (*fn)(void *ud, size_t i);
    void *ud;
} fan;

static void *fan_main(void *arg)
{
    fan *f = arg;
    for (size_t i = atomic_fetch_add(&f->next, 1); i < f->n; i = atomic_fetch_add(&f->next, 1))
        f->fn(f->ud, i);
    return NULL;
}

void ctl_fanout(size_t n, unsigned width, void (*fn)(void *ud, size_t i), void *ud)
{
    fan f = {.n = n, .fn = fn, .ud = ud};
    atomic_init(&f.next, 0);
    pthread_t helper[CTL_FANOUT_MAX];
    size_t want = width > CTL_FANOUT_MAX ? CTL_FANOUT_MAX : width ? width : 1;
    if (want > n)
        want = n;
    size_t started = 0;
    while (started + 1 < want && pthread_create(&helper[started], NULL, fan_main, &f) == 0)
        started++;
    fan_main(&f);
    for (size_t k = 0; k < started; k++)
        pthread_join(helper[k], NULL);
}
