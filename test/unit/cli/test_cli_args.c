/* cli/cli_args: the option parser every subcommand uses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/cli_args.h"

typedef struct opts {
    const char *config, *uid;
    bool dry;
    cli_list state;
    const char *state_v[2];
    int out;
    long threads;
    long doubled;
} opts;

static gq_code twice(const char *name, const char *value, void *dst, gq_err *err)
{
    long v = 0;
    gq_code rc = cli_parse_long(name, value, 0, 100, &v, err);
    if (!rc)
        *(long *)dst = 2 * v;
    return rc;
}

/* Parse the NULL-terminated words (argv[0] "cmd" prepended); positional
 * arguments go to pos. */
static cli_parsed run(opts *o, const char **pos, size_t *n_pos, gq_err *err, ...)
{
    static const char *const outputs[] = {"text", "json", NULL};
    char *argv[16] = {"cmd"};
    int argc = 1;
    va_list ap;
    va_start(ap, err);
    for (char *w; (w = va_arg(ap, char *)) && argc < 16;)
        argv[argc++] = w;
    va_end(ap);
    memset(o, 0, sizeof(*o));
    o->state = (cli_list){o->state_v, 0, 2};
    const cli_opt table[] = {
        {.name = "--config", .kind = CLI_OPT_STRING, .dst = &o->config},
        {.name = "--uid", .kind = CLI_OPT_NONEMPTY, .dst = &o->uid},
        {.name = "--dry-run", .kind = CLI_OPT_FLAG, .dst = &o->dry},
        {.name = "--state", .kind = CLI_OPT_LIST, .dst = &o->state},
        {.name = "--output",
         .alias = "-o",
         .kind = CLI_OPT_CHOICE,
         .dst = &o->out,
         .choices = outputs},
        {.name = "--threads", .kind = CLI_OPT_LONG, .dst = &o->threads, .min = 1, .max = 8},
        {.name = "--double", .kind = CLI_OPT_FN, .dst = &o->doubled, .fn = twice},
        {.name = "--drain", .kind = CLI_OPT_LONG, .dst = &o->threads, .min = 0, .max = 9},
    };
    gq_err_clear(err);
    return cli_parse(argc, argv, table, sizeof(table) / sizeof(table[0]), pos, n_pos, err);
}

static void every_kind(void **state)
{
    (void)state;
    opts o;
    gq_err err;
    const char *pos[16];
    size_t n = 0;
    assert_int_equal(run(&o, pos, &n, &err, "a.yaml", "--config", "c.yaml", "--uid=u1", "--dry-run",
                         "--state", "s1", "-", "--state=s2", "-o", "json", "--threads", "4",
                         "--double", "21", NULL),
                     CLI_PARSED);
    assert_string_equal(o.config, "c.yaml");
    assert_string_equal(o.uid, "u1");
    assert_true(o.dry);
    assert_int_equal(o.state.n, 2);
    assert_string_equal(o.state.v[0], "s1");
    assert_string_equal(o.state.v[1], "s2");
    assert_int_equal(o.out, 1);
    assert_int_equal(o.threads, 4);
    assert_int_equal(o.doubled, 42);
    assert_int_equal(n, 2); /* options and arguments mixed; "-" is an argument */
    assert_string_equal(pos[0], "a.yaml");
    assert_string_equal(pos[1], "-");

    /* A unique prefix of a long name, as getopt_long allows; "--" ends options. */
    assert_int_equal(run(&o, pos, &n, &err, "--conf", "x", "--dry", "--", "--uid", NULL),
                     CLI_PARSED);
    assert_string_equal(o.config, "x");
    assert_true(o.dry);
    assert_int_equal(n, 1);
    assert_string_equal(pos[0], "--uid");

    assert_int_equal(run(&o, pos, &n, &err, "x", "-h", NULL), CLI_HELP);
    assert_int_equal(run(&o, pos, &n, &err, "--help", NULL), CLI_HELP);
}

static void errors_name_the_option(void **state)
{
    (void)state;
    static const struct {
        const char *words[4];
        const char *msg;
    } cases[] = {
        {{"--frobnicate"}, "unknown option --frobnicate"},
        {{"-x"}, "unknown option -x"},
        {{"--d", "1"}, "ambiguous option --d"}, /* --dry-run, --double, --drain */
        {{"--config"}, "--config needs a value"},
        {{"--uid", ""}, "--uid needs a value"},
        {{"--dry-run=yes"}, "--dry-run takes no value"},
        {{"-o", "yaml"}, "-o yaml: one of text, json"},
        {{"--threads", "9"}, "--threads 9: expected a whole number in 1..8"},
        {{"--double", "x"}, "--double x: expected a whole number in 0..100"},
        {{"--state", "a", "--state", "b"}, NULL}, /* two fit */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        opts o;
        gq_err err;
        const char *pos[16];
        size_t n = 0;
        const char *const *w = cases[i].words;
        cli_parsed r = run(&o, pos, &n, &err, w[0], w[1], w[2], w[3], NULL);
        if (!cases[i].msg) {
            assert_int_equal(r, CLI_PARSED);
            continue;
        }
        assert_int_equal(r, CLI_BAD);
        assert_string_equal(err.msg, cases[i].msg);
    }
    opts o;
    gq_err err;
    const char *pos[16];
    size_t n = 0;
    assert_int_equal(run(&o, pos, &n, &err, "--state", "a", "--state", "b", "--state", "c", NULL),
                     CLI_BAD);
    assert_string_equal(err.msg, "at most 2 --state");
    /* A subcommand without arguments refuses one. */
    assert_int_equal(run(&o, NULL, NULL, &err, "stray", NULL), CLI_BAD);
    assert_string_equal(err.msg, "unexpected argument stray");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind),
        cmocka_unit_test(errors_name_the_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
