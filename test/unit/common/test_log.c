#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/gq_log.h"
#include "common/json_escape.h"

static void escape_quotes_and_controls(void **state)
{
    (void)state;
    char buf[64];
    size_t len = 0;
    buf[0] = '\0';
    gq_json_escape_into(buf, sizeof(buf), &len, "a\"b\\c\nd\x01");
    assert_string_equal(buf, "a\\\"b\\\\c\\nd\\u0001");
    assert_int_equal(len, strlen(buf));
}

static void escape_truncates_without_overflow(void **state)
{
    (void)state;
    char buf[8];
    size_t len = 0;
    gq_json_escape_into(buf, sizeof(buf), &len, "\"\"\"\"\"\"\"\"");
    /* Each quote needs two bytes; three fit before the NUL. */
    assert_string_equal(buf, "\\\"\\\"\\\"");
    assert_int_equal(len, 6);
}

static void parse_level(void **state)
{
    (void)state;
    gq_log_level l;
    assert_int_equal(gq_log_parse_level("WARN", &l), GQ_OK);
    assert_int_equal(l, GQ_LOG_WARN);
    assert_int_equal(gq_log_parse_level("loud", &l), GQ_EINVAL);
    assert_int_equal(gq_log_parse_level(NULL, &l), GQ_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escape_quotes_and_controls),
        cmocka_unit_test(escape_truncates_without_overflow),
        cmocka_unit_test(parse_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
