/* gq_copy_trunc: bounded copies that always terminate. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/strutil.h"

static void copy_trunc(void **state)
{
    (void)state;
    char buf[4];
    assert_false(gq_copy_trunc(buf, sizeof buf, "abc"));
    assert_string_equal(buf, "abc");
    assert_true(gq_copy_trunc(buf, sizeof buf, "abcd"));
    assert_string_equal(buf, "abc");
    assert_false(gq_copy_trunc(buf, sizeof buf, ""));
    assert_string_equal(buf, "");
    char one[1];
    assert_true(gq_copy_trunc(one, sizeof one, "x"));
    assert_string_equal(one, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(copy_trunc)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
