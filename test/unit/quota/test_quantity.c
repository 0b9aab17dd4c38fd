/* Quantity arithmetic, conversions and error reporting, table-driven. The
 * parse/format grammar itself is pinned by test/data/quantity.tsv. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "quota/quantity.h"

#define ROWS(a) (sizeof(a) / sizeof((a)[0]))

static gq_quantity parse_ok(const char *s)
{
    gq_quantity q;
    gq_err err;
    gq_err_clear(&err);
    if (gq_quantity_parse(s, strlen(s), &q, &err) != GQ_OK)
        fail_msg("parse \"%s\": %s", s, err.msg);
    return q;
}

static void assert_canonical(const gq_quantity *q, const char *want)
{
    char buf[GQ_QUANTITY_STR_MAX];
    gq_quantity_format(q, buf);
    assert_string_equal(buf, want);
}

static void cmp_orders_by_value(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b;
        int want;
    } rows[] = {
        {"0", "0", 0},
        {"0", "0Gi", 0},
        {"-0", "0", 0},
        {"100m", "50m", 1},
        {"50m", "100m", -1},
        {"10000T", "100Gi", 1},
        {"1", "1000m", 0},
        {"1k", "1e3", 0},
        {"1Ki", "1024", 0},
        {"1Gi", "1073741824", 0},
        {"1G", "1Gi", -1},
        {"-1", "1", -1},
        {"-2", "-1", -1},
        {"-1Gi", "-1G", -1},
        {"1n", "0", 1},
        {"-1n", "0", -1},
        {"1E", "999P", 1},
        {"1e21", "9223372036854775807", 1},
        {"9223372036854775807", "9223372036854775806", 1},
        {"-9223372036854775808", "-9223372036854775807", -1},
        {"900m", "9010m", -1},
        {"0.9", "0.89", 1},
        {"1e-9", "1n", 0},
        {"10E", "10000000000000000000", 0},
    };
    for (size_t i = 0; i < ROWS(rows); i++) {
        gq_quantity a = parse_ok(rows[i].a), b = parse_ok(rows[i].b);
        if (gq_quantity_cmp(&a, &b) != rows[i].want || gq_quantity_cmp(&b, &a) != -rows[i].want)
            fail_msg("cmp(%s, %s) != %d", rows[i].a, rows[i].b, rows[i].want);
    }
}

static void zero_and_sign(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        bool zero, negative;
    } rows[] = {
        {"0", true, false},   {"-0", true, false},   {"0Gi", true, false}, {"1n", false, false},
        {"-1n", false, true}, {"-1Gi", false, true}, {"5", false, false},
    };
    for (size_t i = 0; i < ROWS(rows); i++) {
        gq_quantity q = parse_ok(rows[i].in);
        assert_int_equal(gq_quantity_is_zero(&q), rows[i].zero);
        assert_int_equal(gq_quantity_is_negative(&q), rows[i].negative);
    }
}

static void add_sub_exact_or_erange(void **state)
{
    (void)state;
    static const struct {
        const char *a;
        char op;
        const char *b;
        gq_code rc;
        const char *want;
    } rows[] = {
        {"1Gi", '+', "512Mi", GQ_OK, "1536Mi"},
        {"1Gi", '-', "512Mi", GQ_OK, "512Mi"},
        {"1Gi", '-', "1Gi", GQ_OK, "0"},
        {"1Gi", '-', "2Gi", GQ_OK, "-1Gi"},
        {"100m", '+', "0", GQ_OK, "100m"},
        {"0", '+', "100m", GQ_OK, "100m"},
        {"0", '+', "1Gi", GQ_OK, "1Gi"}, /* zero takes the other's format */
        {"0", '-', "1Gi", GQ_OK, "-1Gi"},
        {"1Gi", '+', "0", GQ_OK, "1Gi"},
        {"500m", '+', "500m", GQ_OK, "1"},
        {"1", '+', "1n", GQ_OK, "1000000001n"},
        {"1k", '+', "1", GQ_OK, "1001"},
        {"1e3", '+', "1", GQ_OK, "1001"},
        {"1e3", '+', "1e3", GQ_OK, "2e3"},
        {"1G", '+', "1Gi", GQ_OK, "2073741824"},
        {"1Gi", '+', "1G", GQ_OK, "2073741824"}, /* binary, not a multiple of 1024 */
        {"1Gi", '+', "0.5", GQ_OK, "1073741824500m"},
        {"9223372036854775807", '+', "1", GQ_ERANGE, NULL},
        {"9223372036854775807", '+', "0", GQ_OK, "9223372036854775807"},
        {"-9223372036854775807", '-', "1", GQ_OK, "-9223372036854775808"},
        {"-9223372036854775808", '-', "1", GQ_ERANGE, NULL},
        {"-9223372036854775808", '+', "9223372036854775807", GQ_OK, "-1"},
        {"0", '-', "-9223372036854775808", GQ_ERANGE, NULL},
        {"7Ei", '+', "1Ei", GQ_ERANGE, NULL}, /* binary above int64 */
        {"7Ei", '+', "1023Pi", GQ_OK, "8191Pi"},
        {"9E", '+', "1E", GQ_OK, "10E"},     /* decimal: 1e19 is representable */
        {"1e21", '+', "1", GQ_ERANGE, NULL}, /* would need 22 digits */
        {"1e19", '-', "1", GQ_ERANGE, NULL}, /* 19 nines exceed int64 */
        {"1e19", '-', "800000000000000001", GQ_OK, "9199999999999999999"},
        {"1e20", '-', "1", GQ_ERANGE, NULL},
        {"1e30", '-', "1e30", GQ_OK, "0"},
        {"1e30", '+', "1n", GQ_ERANGE, NULL},
        {"1n", '+', "1e-9", GQ_OK, "2n"},
    };
    for (size_t i = 0; i < ROWS(rows); i++) {
        gq_quantity a = parse_ok(rows[i].a), b = parse_ok(rows[i].b);
        gq_quantity out = {42, 7, GQ_QFMT_DECIMAL_EXP};
        gq_code rc =
            rows[i].op == '+' ? gq_quantity_add(&a, &b, &out) : gq_quantity_sub(&a, &b, &out);
        if (rc != rows[i].rc)
            fail_msg("%s %c %s: rc %d, want %d", rows[i].a, rows[i].op, rows[i].b, rc, rows[i].rc);
        if (rc == GQ_OK) {
            char buf[GQ_QUANTITY_STR_MAX];
            gq_quantity_format(&out, buf);
            if (strcmp(buf, rows[i].want) != 0)
                fail_msg("%s %c %s = %s, want %s", rows[i].a, rows[i].op, rows[i].b, buf,
                         rows[i].want);
        } else {
            /* out-parameters are written only on success */
            assert_int_equal(out.mant, 42);
            assert_int_equal(out.exp10, 7);
        }
    }
}

static void scale_ceil_rounds_to_nano(void **state)
{
    (void)state;
    static const struct {
        const char *q;
        int64_t num, den;
        gq_code rc;
        const char *want;
    } rows[] = {
        {"40Gi", 1, 4, GQ_OK, "10Gi"},
        {"1Gi", 1, 3, GQ_OK, "357913941333333334n"},
        {"40Gi", 1, 3, GQ_ERANGE, NULL}, /* 14316557653.33..: 20 digits at 1n */
        {"1", 1, 3, GQ_OK, "333333334n"},
        {"500m", 1, 3, GQ_OK, "166666667n"},
        {"1", 2, 3, GQ_OK, "666666667n"},
        {"-1", 1, 3, GQ_OK, "-333333334n"}, /* away from zero */
        {"1", -1, 3, GQ_OK, "-333333334n"},
        {"3", 1, 3, GQ_OK, "1"},
        {"1Gi", 3, 2, GQ_OK, "1536Mi"},
        {"1Gi", 0, 7, GQ_OK, "0"},
        {"0", 5, 7, GQ_OK, "0"},
        {"1n", 1, 2, GQ_OK, "1n"},
        {"1n", 1, INT64_MAX, GQ_OK, "1n"},
        {"250m", 4, 1, GQ_OK, "1"},
        {"1k", 1, 1000, GQ_OK, "1"},
        {"9223372036854775807", 2, 1, GQ_ERANGE, NULL},
        {"9223372036854775807", 2, 2, GQ_OK, "9223372036854775807"},
        {"9223372036854775807", INT64_MAX, INT64_MAX, GQ_OK, "9223372036854775807"},
        {"4Ei", 2, 1, GQ_ERANGE, NULL},                 /* 8Ei: binary above int64 */
        {"9223372036854775807", 1, 3, GQ_ERANGE, NULL}, /* needs 28 digits at 1n */
        {"1", 1, 0, GQ_EINVAL, NULL},
        {"1", 1, -2, GQ_EINVAL, NULL},
    };
    for (size_t i = 0; i < ROWS(rows); i++) {
        gq_quantity q = parse_ok(rows[i].q);
        gq_quantity out = {42, 7, GQ_QFMT_DECIMAL_EXP};
        gq_code rc = gq_quantity_scale_ceil(&q, rows[i].num, rows[i].den, &out);
        if (rc != rows[i].rc)
            fail_msg("%s * %lld/%lld: rc %d, want %d", rows[i].q, (long long)rows[i].num,
                     (long long)rows[i].den, rc, rows[i].rc);
        if (rc == GQ_OK) {
            char buf[GQ_QUANTITY_STR_MAX];
            gq_quantity_format(&out, buf);
            if (strcmp(buf, rows[i].want) != 0)
                fail_msg("%s * %lld/%lld = %s, want %s", rows[i].q, (long long)rows[i].num,
                         (long long)rows[i].den, buf, rows[i].want);
            assert_int_equal(out.format, q.format);
        } else {
            assert_int_equal(out.mant, 42);
        }
    }
}

typedef struct conv_row {
    const char *q;
    gq_code rc;
    int64_t want;
} conv_row;

static void run_conv(const conv_row *rows, size_t n,
                     gq_code (*conv)(const gq_quantity *, int64_t *), const char *name)
{
    for (size_t i = 0; i < n; i++) {
        gq_quantity q = parse_ok(rows[i].q);
        int64_t out = -42;
        gq_code rc = conv(&q, &out);
        if (rc != rows[i].rc)
            fail_msg("%s(%s): rc %d, want %d", name, rows[i].q, rc, rows[i].rc);
        if (rc == GQ_OK && out != rows[i].want)
            fail_msg("%s(%s) = %lld, want %lld", name, rows[i].q, (long long)out,
                     (long long)rows[i].want);
        if (rc != GQ_OK)
            assert_int_equal(out, -42);
    }
}

static void to_int64_ceil_rounds_up(void **state)
{
    (void)state;
    static const conv_row rows[] = {
        {"0", GQ_OK, 0},
        {"1", GQ_OK, 1},
        {"1n", GQ_OK, 1},
        {"500m", GQ_OK, 1},
        {"1.5", GQ_OK, 2},
        {"2", GQ_OK, 2},
        {"-1.5", GQ_OK, -2},
        {"-1n", GQ_OK, -1},
        {"1Ki", GQ_OK, 1024},
        {"1.5Gi", GQ_OK, 1610612736},
        {"0.05Gi", GQ_OK, 53687092},
        {"20Gi", GQ_OK, 21474836480},
        {"1k", GQ_OK, 1000},
        {"1e18", GQ_OK, 1000000000000000000},
        {"9223372036854775807", GQ_OK, INT64_MAX},
        {"-9223372036854775808", GQ_OK, INT64_MIN},
        {"9223372036.854775807", GQ_OK, 9223372037},
        {"7Ei", GQ_OK, 8070450532247928832},
        {"10E", GQ_ERANGE, 0},
        {"9.3E", GQ_ERANGE, 0},
        {"1e21", GQ_ERANGE, 0},
        {"1e2147483647", GQ_ERANGE, 0},
    };
    run_conv(rows, ROWS(rows), gq_quantity_to_int64_ceil, "to_int64_ceil");
}

static void to_milli_ceil_rounds_up(void **state)
{
    (void)state;
    static const conv_row rows[] = {
        {"0", GQ_OK, 0},
        {"500m", GQ_OK, 500},
        {"0.25", GQ_OK, 250},
        {"1", GQ_OK, 1000},
        {"1n", GQ_OK, 1},
        {"1.0001", GQ_OK, 1001},
        {"999999n", GQ_OK, 1},
        {"1000001n", GQ_OK, 2},
        {"-0.0001", GQ_OK, -1},
        {"-1.5", GQ_OK, -1500},
        {"1Ki", GQ_OK, 1024000},
        {"1e3", GQ_OK, 1000000},
        {"9223372036854775807m", GQ_OK, INT64_MAX},
        {"9223372036854775807n", GQ_OK, 9223372036855},
        {"9223372036854775.807", GQ_OK, INT64_MAX},
        {"9223372036854775.81", GQ_ERANGE, 0},
        {"9223372036854776", GQ_ERANGE, 0},
        {"1Ei", GQ_ERANGE, 0},
        {"1E", GQ_ERANGE, 0},
    };
    run_conv(rows, ROWS(rows), gq_quantity_to_milli_ceil, "to_milli_ceil");
}

static void is_integer_detects_fractions(void **state)
{
    (void)state;
    static const struct {
        const char *q;
        bool want;
    } rows[] = {
        {"0", true},   {"1", true},     {"1000m", true}, {"1500m", false}, {"1n", false},
        {"-1", true},  {"-0.5", false}, {"1.5Gi", true}, {"0.5Ki", true},  {"0.05Gi", false},
        {"1e3", true}, {"1e-3", false}, {"1E", true},    {"1e21", true},   {"1000000000n", true},
    };
    for (size_t i = 0; i < ROWS(rows); i++) {
        gq_quantity q = parse_ok(rows[i].q);
        if (gq_quantity_is_integer(&q) != rows[i].want)
            fail_msg("is_integer(%s) != %d", rows[i].q, rows[i].want);
    }
}

static void from_int64_and_format_bytes(void **state)
{
    (void)state;
    static const struct {
        int64_t v;
        gq_qformat fmt;
        const char *want;
    } rows[] = {
        {0, GQ_QFMT_BINARY_SI, "0"},
        {1, GQ_QFMT_DECIMAL_SI, "1"},
        {1000, GQ_QFMT_DECIMAL_SI, "1k"},
        {1000, GQ_QFMT_BINARY_SI, "1k"}, /* below 1024: decimal SI */
        {1024, GQ_QFMT_BINARY_SI, "1Ki"},
        {1024, GQ_QFMT_DECIMAL_SI, "1024"},
        {1536, GQ_QFMT_BINARY_SI, "1536"},
        {1000, GQ_QFMT_DECIMAL_EXP, "1e3"},
        {1500, GQ_QFMT_DECIMAL_EXP, "1500"},
        {-2048, GQ_QFMT_BINARY_SI, "-2Ki"},
        {-1023, GQ_QFMT_BINARY_SI, "-1023"},
        {INT64_MAX, GQ_QFMT_BINARY_SI, "9223372036854775807"},
        {INT64_MIN, GQ_QFMT_BINARY_SI, "-8Ei"},
        {INT64_MIN, GQ_QFMT_DECIMAL_SI, "-9223372036854775808"},
    };
    for (size_t i = 0; i < ROWS(rows); i++) {
        gq_quantity q = gq_quantity_from_int64(rows[i].v, rows[i].fmt);
        assert_int_equal(q.format, rows[i].fmt);
        assert_canonical(&q, rows[i].want);
        int64_t back = 0;
        assert_int_equal(gq_quantity_to_int64_ceil(&q, &back), GQ_OK);
        assert_true(back == rows[i].v);
    }

    static const struct {
        int64_t bytes;
        const char *want;
    } bytes[] = {
        {0, "0"},
        {1, "1"},
        {1023, "1023"},
        {1024, "1Ki"},
        {1536, "1536"},
        {1536LL * 1024 * 1024, "1536Mi"},
        {20LL << 30, "20Gi"},
        {40LL << 30, "40Gi"},
        {(1LL << 30) + 1, "1073741825"},
        {1LL << 60, "1Ei"},
        {7LL << 60, "7Ei"},
        {INT64_MAX, "9223372036854775807"},
        {-(1LL << 20), "-1Mi"},
    };
    for (size_t i = 0; i < ROWS(bytes); i++) {
        char buf[GQ_QUANTITY_STR_MAX];
        gq_format_bytes(bytes[i].bytes, buf);
        assert_string_equal(buf, bytes[i].want);
    }
}

/* Quantities built by hand (fields are public) must still format sanely. */
static void format_hand_built(void **state)
{
    (void)state;
    static const struct {
        gq_quantity q;
        const char *want;
    } rows[] = {
        {{1, 30, GQ_QFMT_BINARY_SI}, "1e30"}, /* too big for binary: decimal SI */
        {{15, -1, GQ_QFMT_BINARY_SI}, "1500m"},
        {{1000, 0, GQ_QFMT_DECIMAL_SI}, "1k"},   /* not normalised */
        {{1, -12, GQ_QFMT_DECIMAL_SI}, "1e-12"}, /* below 1n: exponent form */
        {{1, 3, (gq_qformat)9}, "1e3"},          /* unknown format: exponent form */
        {{INT64_MIN, 2147483647, GQ_QFMT_DECIMAL_EXP}, "-92233720368547758080e2147483646"},
    };
    for (size_t i = 0; i < ROWS(rows); i++)
        assert_canonical(&rows[i].q, rows[i].want);
}

static void errors_quote_input_and_name_forms(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t len; /* 0: strlen */
        gq_code rc;
        const char *parts[3];
    } rows[] = {
        {"", 0, GQ_EINVAL, {"\"\"", "empty", "Ki Mi Gi Ti Pi Ei"}},
        {"+", 0, GQ_EINVAL, {"\"+\"", "no digits", "n u m k M G T P E"}},
        {".", 0, GQ_EINVAL, {"\".\"", "no digits", "e3"}},
        {"Gi", 0, GQ_EINVAL, {"\"Gi\"", "no digits", NULL}},
        {"1gi", 0, GQ_EINVAL, {"\"1gi\"", "unknown suffix \"gi\"", "case-sensitive"}},
        {"1K", 0, GQ_EINVAL, {"unknown suffix \"K\"", "Ki Mi Gi", NULL}},
        {"1.5.5", 0, GQ_EINVAL, {"\"1.5.5\"", "unexpected \".5\" after the number", NULL}},
        {"1 Gi", 0, GQ_EINVAL, {"\"1 Gi\"", "unexpected \" Gi\" after the number", NULL}},
        {"0x10", 0, GQ_EINVAL, {"\"0x10\"", "unknown suffix \"x10\"", NULL}},
        {"1e", 0, GQ_EINVAL, {"exponent has no digits", NULL, NULL}},
        {"1e+", 0, GQ_EINVAL, {"exponent has no digits", NULL, NULL}},
        {"1e3.5", 0, GQ_EINVAL, {"exponent is not an integer", NULL, NULL}},
        {"1\nGi", 0, GQ_EINVAL, {"\"1\\x0aGi\"", NULL, NULL}},
        {"1\"Gi\\", 0, GQ_EINVAL, {"\"1\\x22Gi\\x5c\"", NULL, NULL}},
        {"1\xc3\xa9", 0, GQ_EINVAL, {"\"1\\xc3\\xa9\"", NULL, NULL}},
        {"1\0Gi", 4, GQ_EINVAL, {"\"1\\x00Gi\"", NULL, NULL}},
        {"9223372036854775808",
         0,
         GQ_ERANGE,
         {"\"9223372036854775808\" is out of range",
          "more significant digits than a 64-bit integer holds", NULL}},
        {"8Ei", 0, GQ_ERANGE, {"\"8Ei\" is out of range", "signed 64-bit", NULL}},
        {"1e2147483648", 0, GQ_ERANGE, {"exponent does not fit 32 bits", NULL, NULL}},
        {"10e2147483647", 0, GQ_ERANGE, {"its exponent is too large", NULL, NULL}},
        {"1234567890123456789012345678901234567890123456789Gi",
         0,
         GQ_ERANGE,
         {"\"1234567890123456789012345678901234567890...\"", NULL, NULL}},
    };
    for (size_t i = 0; i < ROWS(rows); i++) {
        size_t len = rows[i].len ? rows[i].len : strlen(rows[i].in);
        gq_quantity out = {42, 7, GQ_QFMT_DECIMAL_EXP};
        gq_err err;
        gq_err_clear(&err);
        gq_code rc = gq_quantity_parse(rows[i].in, len, &out, &err);
        if (rc != rows[i].rc || err.code != rows[i].rc)
            fail_msg("row %zu: rc %d (err %d), want %d: %s", i, rc, err.code, rows[i].rc, err.msg);
        for (size_t p = 0; p < 3 && rows[i].parts[p]; p++)
            if (!strstr(err.msg, rows[i].parts[p]))
                fail_msg("row %zu: message lacks '%s': %s", i, rows[i].parts[p], err.msg);
        assert_int_equal(out.mant, 42); /* untouched */
        assert_int_equal(out.exp10, 7);
    }
}

static void parse_bounds_and_null(void **state)
{
    (void)state;
    gq_quantity q = {42, 7, GQ_QFMT_DECIMAL_EXP};
    gq_err err;
    static char big[5000];
    memset(big, '1', sizeof(big));
    assert_int_equal(gq_quantity_parse(big, sizeof(big), &q, &err), GQ_ELIMIT);
    assert_non_null(strstr(err.msg, "longer than 4096 bytes"));
    assert_int_equal(q.mant, 42);
    /* Long but within the cap: rejected as out of range, not undefined. */
    assert_int_equal(gq_quantity_parse(big, 4096, &q, &err), GQ_ERANGE);
    /* Many zeros are harmless. */
    memset(big, '0', 4000);
    big[4000] = '1';
    assert_int_equal(gq_quantity_parse(big, 4001, &q, &err), GQ_OK);
    assert_canonical(&q, "1");
    big[0] = '.';
    assert_int_equal(gq_quantity_parse(big, 4001, &q, &err), GQ_OK);
    assert_canonical(&q, "1n");
    assert_int_equal(gq_quantity_parse(NULL, 0, &q, NULL), GQ_EINVAL);
    /* Parsing stops at len: the rest of the buffer is not read. */
    assert_int_equal(gq_quantity_parse("15Gi", 2, &q, NULL), GQ_OK);
    assert_canonical(&q, "15");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cmp_orders_by_value),
        cmocka_unit_test(zero_and_sign),
        cmocka_unit_test(add_sub_exact_or_erange),
        cmocka_unit_test(scale_ceil_rounds_to_nano),
        cmocka_unit_test(to_int64_ceil_rounds_up),
        cmocka_unit_test(to_milli_ceil_rounds_up),
        cmocka_unit_test(is_integer_detects_fractions),
        cmocka_unit_test(from_int64_and_format_bytes),
        cmocka_unit_test(format_hand_built),
        cmocka_unit_test(errors_quote_input_and_name_forms),
        cmocka_unit_test(parse_bounds_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
