/* gq_grow: room for one more element, doubling, and out of memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/grow.h"

static void grows_by_doubling(void **state)
{
    (void)state;
    int *v = NULL;
    size_t n = 0, cap = 0;
    for (int i = 0; i < 40; i++) {
        int *g = gq_grow(v, &cap, n, sizeof(*v), 4);
        assert_non_null(g);
        v = g;
        v[n++] = i;
        assert_true(n <= cap);
    }
    assert_int_equal(cap, 64); /* 4, 8, 16, 32, 64 */
    for (int i = 0; i < 40; i++)
        assert_int_equal(v[i], i);
    free(v);
}

static void room_left_is_the_same_array(void **state)
{
    (void)state;
    size_t cap = 8;
    int *v = malloc(cap * sizeof(*v));
    assert_non_null(v);
    assert_ptr_equal(gq_grow(v, &cap, 7, sizeof(*v), 4), v);
    assert_int_equal(cap, 8);
    free(v);
}

static void overflow_keeps_the_array(void **state)
{
    (void)state;
    size_t cap = SIZE_MAX / 8 + 1;
    char one;
    assert_null(gq_grow(&one, &cap, cap, 8, 4));
    assert_int_equal(cap, SIZE_MAX / 8 + 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(grows_by_doubling),
                                       cmocka_unit_test(room_left_is_the_same_array),
                                       cmocka_unit_test(overflow_keeps_the_array)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
