/* common/buf: the capped text buffer (cap reached exactly, one byte over,
 * printf over the cap, the sticky first error, finish after an error, the
 * zero cap, JSON strings, and a real allocation failure). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "common/buf.h"

static void cap_reached_exactly(void **state)
{
    (void)state;
    gq_buf b;
    gq_buf_init(&b, 8);
    assert_int_equal(gq_buf_puts(&b, "abcd"), GQ_OK);
    assert_int_equal(gq_buf_add(&b, "efgh", 4), GQ_OK);
    assert_int_equal(b.len, 8);
    assert_string_equal(b.data, "abcdefgh");
    assert_int_equal(gq_buf_add(&b, NULL, 0), GQ_OK); /* nothing still fits */
    char *text = NULL;
    size_t n = 0;
    assert_int_equal(gq_buf_finish(&b, &text, &n), GQ_OK);
    assert_int_equal(n, 8);
    assert_string_equal(text, "abcdefgh");
    free(text);
    assert_null(b.data); /* finish empties b, keeping the cap */
    assert_int_equal(b.len, 0);
    assert_int_equal(b.max, 8);
}

static void one_byte_over(void **state)
{
    (void)state;
    gq_buf b;
    gq_buf_init(&b, 8);
    assert_int_equal(gq_buf_puts(&b, "abcdefg"), GQ_OK);
    assert_int_equal(gq_buf_add(&b, "hi", 2), GQ_ELIMIT);
    /* The failing append added nothing; what came before is readable. */
    assert_int_equal(b.len, 7);
    assert_string_equal(b.data, "abcdefg");
    gq_buf_dispose(&b);

    gq_buf_init(&b, 8);
    assert_int_equal(gq_buf_puts(&b, "abcdefghi"), GQ_ELIMIT);
    assert_int_equal(b.len, 0);
    gq_buf_dispose(&b);
}

static void printf_over_cap(void **state)
{
    (void)state;
    gq_buf b;
    gq_buf_init(&b, 10);
    assert_int_equal(gq_buf_printf(&b, "%s=%d", "abc", 12345), GQ_OK); /* 9 bytes */
    assert_int_equal(gq_buf_printf(&b, "%d", 12), GQ_ELIMIT);
    assert_string_equal(b.data, "abc=12345");
    gq_buf_dispose(&b);

    /* Longer than any stack scratch: the exact text, of any length. */
    gq_buf_init(&b, 5000);
    assert_int_equal(gq_buf_printf(&b, "%4000d|", 7), GQ_OK);
    assert_int_equal(b.len, 4001);
    assert_int_equal(b.data[3999], '7');
    assert_int_equal(gq_buf_printf(&b, "%999d", 1), GQ_OK); /* exactly 5000 */
    assert_int_equal(gq_buf_printf(&b, "%s", "x"), GQ_ELIMIT);
    assert_int_equal(b.len, 5000);
    gq_buf_dispose(&b);
}

static void sticky_error(void **state)
{
    (void)state;
    gq_buf b;
    gq_buf_init(&b, 4);
    assert_int_equal(gq_buf_puts(&b, "abcde"), GQ_ELIMIT);
    /* Later appends that would fit do nothing and report the first error. */
    assert_int_equal(gq_buf_puts(&b, "a"), GQ_ELIMIT);
    assert_int_equal(gq_buf_printf(&b, "%d", 1), GQ_ELIMIT);
    assert_int_equal(gq_buf_json_string(&b, "a"), GQ_ELIMIT);
    assert_int_equal(gq_buf_add(&b, NULL, 0), GQ_ELIMIT);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.err, GQ_ELIMIT);
    assert_int_equal(gq_buf_fail(&b, GQ_ENOMEM), GQ_ELIMIT); /* the first stays */
    /* Emptying keeps the error; disposing starts over with the same cap. */
    gq_buf_reset(&b);
    assert_int_equal(gq_buf_puts(&b, "a"), GQ_ELIMIT);
    gq_buf_dispose(&b);
    assert_int_equal(gq_buf_puts(&b, "abcd"), GQ_OK);
    gq_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    assert_int_equal(gq_buf_puts(&b, "wxyz"), GQ_OK); /* in the same memory */
    assert_string_equal(b.data, "wxyz");
    gq_buf_dispose(&b);
}

static void finish_after_error(void **state)
{
    (void)state;
    gq_buf b;
    gq_buf_init(&b, 4);
    assert_int_equal(gq_buf_puts(&b, "ab"), GQ_OK);
    assert_int_equal(gq_buf_puts(&b, "cde"), GQ_ELIMIT);
    char *text = (char *)"untouched";
    size_t n = 99;
    assert_int_equal(gq_buf_finish(&b, &text, &n), GQ_ELIMIT);
    assert_string_equal(text, "untouched"); /* outputs written only on success */
    assert_int_equal(n, 99);
    /* b is empty again, error forgotten, cap kept (and nothing leaked). */
    assert_null(b.data);
    assert_int_equal(b.err, GQ_OK);
    assert_int_equal(gq_buf_puts(&b, "abcd"), GQ_OK);
    assert_int_equal(gq_buf_finish(&b, &text, NULL), GQ_OK);
    assert_string_equal(text, "abcd");
    free(text);
    /* A failure of the caller's own step is reported the same way. */
    assert_int_equal(gq_buf_fail(&b, GQ_ENOMEM), GQ_ENOMEM);
    assert_int_equal(gq_buf_puts(&b, "a"), GQ_ENOMEM);
    assert_int_equal(gq_buf_finish(&b, &text, NULL), GQ_ENOMEM);
}

/* Zero cap: the empty text only. A zeroed gq_buf is the same buffer. */
static void zero_cap(void **state)
{
    (void)state;
    gq_buf b = {0};
    assert_int_equal(gq_buf_add(&b, NULL, 0), GQ_OK);
    assert_int_equal(gq_buf_puts(&b, ""), GQ_OK);
    assert_int_equal(gq_buf_printf(&b, "%s", ""), GQ_OK);
    char *text = NULL;
    size_t n = 1;
    assert_int_equal(gq_buf_finish(&b, &text, &n), GQ_OK);
    assert_string_equal(text, "");
    assert_int_equal(n, 0);
    free(text);

    gq_buf_init(&b, 0);
    assert_int_equal(gq_buf_add(&b, "x", 1), GQ_ELIMIT);
    assert_int_equal(gq_buf_finish(&b, &text, &n), GQ_ELIMIT);
    gq_buf_dispose(NULL);
}

static void json_string(void **state)
{
    (void)state;
    const char *s = "a\r\x7f/\"\x01\xc3\xa9";
    json_object *o = json_object_new_string(s);
    const char *want =
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    gq_buf b;
    gq_buf_init(&b, strlen(want));
    assert_int_equal(gq_buf_json_string(&b, s), GQ_OK); /* exactly the cap */
    assert_string_equal(b.data, want);
    gq_buf_dispose(&b);
    /* One byte short: all of the string or none of it. */
    gq_buf_init(&b, strlen(want) + 1);
    assert_int_equal(gq_buf_puts(&b, "[,"), GQ_OK);
    assert_int_equal(gq_buf_json_string(&b, s), GQ_ELIMIT);
    assert_string_equal(b.data, "[,");
    gq_buf_dispose(&b);
    gq_buf_init(&b, 4);
    assert_int_equal(gq_buf_json_string(&b, NULL), GQ_OK);
    assert_string_equal(b.data, "null");
    gq_buf_dispose(&b);
    json_object_put(o);
}

/* A cap near SIZE_MAX cannot wrap the size arithmetic. */
static void huge_sizes(void **state)
{
    (void)state;
    gq_buf b;
    gq_buf_init(&b, 16);
    assert_int_equal(gq_buf_puts(&b, "ab"), GQ_OK);
    assert_int_equal(gq_buf_add(&b, "x", SIZE_MAX), GQ_ELIMIT);
    gq_buf_dispose(&b);
    gq_buf_init(&b, SIZE_MAX);
    assert_int_equal(gq_buf_puts(&b, "ab"), GQ_OK);
    assert_int_equal(gq_buf_add(&b, "x", SIZE_MAX - 2), GQ_ENOMEM);
    assert_int_equal(gq_buf_puts(&b, "c"), GQ_ENOMEM);
    assert_string_equal(b.data, "ab");
    gq_buf_dispose(&b);
}

#if defined(__SANITIZE_ADDRESS__)
#define GQ_HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GQ_HAVE_ASAN 1
#endif
#endif

/* A real allocation failure: a child whose address space is capped a little
 * above what it uses asks for 256 MiB. The sanitizers reserve terabytes of
 * address space, so under them this case is skipped. */
static void out_of_memory(void **state)
{
    (void)state;
#ifdef GQ_HAVE_ASAN
    skip();
#else
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gq_buf b;
        gq_buf_init(&b, (size_t)1 << 30);
        if (gq_buf_puts(&b, "start"))
            _exit(2);
        struct rlimit rl = {.rlim_cur = 0, .rlim_max = RLIM_INFINITY};
        long pages = 0, page = sysconf(_SC_PAGESIZE);
        FILE *f = fopen("/proc/self/statm", "r");
        if (!f || fscanf(f, "%ld", &pages) != 1)
            _exit(3);
        fclose(f);
        rl.rlim_cur = (rlim_t)(pages * page) + ((rlim_t)64 << 20);
        if (setrlimit(RLIMIT_AS, &rl))
            _exit(4);
        static char chunk[1 << 20];
        gq_code rc = GQ_OK;
        for (int i = 0; i < 256 && !rc; i++)
            rc = gq_buf_add(&b, chunk, sizeof(chunk));
        if (rc != GQ_ENOMEM || gq_buf_puts(&b, "x") != GQ_ENOMEM)
            _exit(5);
        char *text = NULL;
        if (gq_buf_finish(&b, &text, NULL) != GQ_ENOMEM || text)
            _exit(6);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cap_reached_exactly), cmocka_unit_test(one_byte_over),
        cmocka_unit_test(printf_over_cap),     cmocka_unit_test(sticky_error),
        cmocka_unit_test(finish_after_error),  cmocka_unit_test(zero_cap),
        cmocka_unit_test(json_string),         cmocka_unit_test(huge_sizes),
        cmocka_unit_test(out_of_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
