/* An intrusive first-in first-out queue: the one queue of the project's
 * worker lists (the controller's ready keys, the validator's ready slots and
 * name checks).
 *
 * The caller embeds a gq_qnode in its own struct and gets the struct back
 * with GQ_FIFO_ENTRY; the queue never allocates. A node is on at most one
 * queue at a time. Not thread-safe: callers hold their own lock. */
#ifndef GQ_FIFO_H
#define GQ_FIFO_H

#include <stddef.h>

typedef struct gq_qnode {
    struct gq_qnode *next;
} gq_qnode;

/* Empty when head is NULL; zeroed memory is an empty queue. */
typedef struct gq_fifo {
    gq_qnode *head, *tail;
} gq_fifo;

/* The struct of type that holds node (member names its gq_qnode); NULL for
 * NULL. node is evaluated twice: pass a variable, not a call. */
#define GQ_FIFO_ENTRY(node, type, member)                                                          \
    ((node) ? (type *)(void *)((char *)(node)-offsetof(type, member)) : (type *)NULL)

/* Put n at the back of q. */
static inline void gq_fifo_push(gq_fifo *q, gq_qnode *n)
{
    n->next = NULL;
    if (q->tail)
        q->tail->next = n;
    else
        q->head = n;
    q->tail = n;
}

/* Take the front of q; NULL when q is empty. */
static inline gq_qnode *gq_fifo_pop(gq_fifo *q)
{
    gq_qnode *n = q->head;
    if (n && !(q->head = n->next))
        q->tail = NULL;
    return n;
}

#endif
