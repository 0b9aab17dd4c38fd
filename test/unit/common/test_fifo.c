/* gq_fifo: first in, first out, through the caller's own structs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/fifo.h"

typedef struct item {
    int value;
    gq_qnode node;
} item;

static int pop_value(gq_fifo *q)
{
    gq_qnode *n = gq_fifo_pop(q);
    item *it = GQ_FIFO_ENTRY(n, item, node);
    return it ? it->value : -1;
}

static void first_in_first_out(void **state)
{
    (void)state;
    gq_fifo q = {0};
    item a = {.value = 1}, b = {.value = 2}, c = {.value = 3};
    assert_int_equal(pop_value(&q), -1);
    gq_fifo_push(&q, &a.node);
    gq_fifo_push(&q, &b.node);
    assert_int_equal(pop_value(&q), 1);
    gq_fifo_push(&q, &c.node);
    assert_int_equal(pop_value(&q), 2);
    assert_int_equal(pop_value(&q), 3);
    assert_null(q.head);
    assert_null(q.tail);
    assert_int_equal(pop_value(&q), -1);
}

static void emptied_queue_takes_again(void **state)
{
    (void)state;
    gq_fifo q = {0};
    item a = {.value = 7};
    gq_fifo_push(&q, &a.node);
    assert_int_equal(pop_value(&q), 7);
    gq_fifo_push(&q, &a.node); /* a node may go back once taken */
    assert_ptr_equal(q.head, &a.node);
    assert_ptr_equal(q.tail, &a.node);
    assert_int_equal(pop_value(&q), 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(first_in_first_out),
                                       cmocka_unit_test(emptied_queue_takes_again)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
