#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "webhook/audit.h"

static char *tmpdir_new(void)
{
    char tmpl[] = "/tmp/gq-audit-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void rm_rf(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A fresh folder (*dir, for rm_rf) and in it the log path (audit.log),
 * opened with the rotation given. */
static wh_audit *open_fresh(char **dir, char path[256], int64_t max_size, int max_files)
{
    *dir = tmpdir_new();
    snprintf(path, 256, "%s/audit.log", *dir);
    gq_audit_config cfg = {.path = path, .max_size = max_size, .max_files = max_files};
    wh_audit *a = NULL;
    gq_err err;
    if (wh_audit_open(&cfg, &a, &err))
        fail_msg("audit open: %s", err.msg);
    return a;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; s && *s; s++)
        n += *s == '\n';
    return n;
}

static wh_audit_record sample(const char *uid)
{
    wh_audit_record r = {
        .time_us = 1795000000123456LL,
        .uid = uid,
        .webhook = "mutate",
        .operation = "CREATE",
        .namespace_ = "ml-research",
        .name = "llm-finetune-0-",
        .user = "system:serviceaccount:kube-system:job-controller",
        .dry_run = false,
        .decision = "denied",
        .reason = "exceeded quota: team-a, requested: gpu-memory=16Gi",
        .latency_ms = 0.1234567,
    };
    return r;
}

static void format_has_every_field(void **state)
{
    (void)state;
    wh_audit_record r = sample("uid-1");
    json_object *charge = json_object_new_object();
    json_object_object_add(charge, "gpu-memory", json_object_new_string("16Gi"));
    r.charge = charge;
    char *line = NULL;
    size_t len = 0;
    assert_int_equal(gq_audit_record_format(&r, &line, &len), GQ_OK);
    json_object_put(charge);
    assert_int_equal(strlen(line), len);
    assert_null(strchr(line, '\n'));
    json_object *o = json_tokener_parse(line);
    assert_non_null(o);
    json_object *v;
    assert_true(json_object_object_get_ex(o, "time", &v));
    assert_string_equal(json_object_get_string(v), "2026-11-18T11:06:40.123456Z");
    assert_true(json_object_object_get_ex(o, "uid", &v));
    assert_string_equal(json_object_get_string(v), "uid-1");
    assert_true(json_object_object_get_ex(o, "decision", &v));
    assert_string_equal(json_object_get_string(v), "denied");
    assert_true(json_object_object_get_ex(o, "dryRun", &v));
    assert_false(json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(o, "charge", &v));
    assert_true(json_object_object_get_ex(o, "latencyMs", &v));
    /* Rounded down to whole microseconds. */
    assert_true(json_object_get_double(v) > 0.1229999 && json_object_get_double(v) < 0.1230001);
    assert_false(json_object_object_get_ex(o, "rewrite", &v));
    /* ...and printed as such, not as json-c's %.17g text. */
    assert_non_null(strstr(line, ",\"latencyMs\":0.123}"));
    json_object_put(o);
    free(line);
}

/* The fields every webhook fills from the review alike. */
static void record_init_from_review(void **state)
{
    (void)state;
    static const struct {
        const char *request; /* request members after uid */
        const char *ns, *name;
    } cases[] = {
        {"\"namespace\":\"ml\",\"name\":\"p\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{"
         "\"name\":\"other\"}}",
         "ml", "p"},
        {"\"namespace\":\"ml\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{\"name\":\"n\"}}",
         "ml", "n"},
        {"\"namespace\":\"ml\",\"operation\":\"CREATE\",\"object\":{\"metadata\":{"
         "\"generateName\":\"job-\"}}",
         "ml", "job-"},
        {"\"operation\":\"DELETE\",\"oldObject\":{\"metadata\":{\"name\":\"gone\"}}", NULL, "gone"},
        {"\"operation\":\"CONNECT\"", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[512];
        snprintf(
            body, sizeof(body),
            "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{"
            "\"uid\":\"u%zu\",\"kind\":{\"kind\":\"Pod\"},\"resource\":{\"resource\":\"pods\"},"
            "\"userInfo\":{\"username\":\"alice\"},\"dryRun\":true,%s}}",
            i, cases[i].request);
        wh_review_request rq;
        gq_err err;
        assert_int_equal(wh_review_decode(body, strlen(body), &rq, &err), GQ_OK);
        wh_audit_record rec;
        wh_audit_record_init(&rec, &rq, "mutate");
        assert_true(rec.time_us > 1700000000LL * 1000000);
        assert_string_equal(rec.uid, rq.uid);
        assert_string_equal(rec.webhook, "mutate");
        assert_string_equal(rec.operation, wh_operation_name(rq.operation));
        if (cases[i].ns)
            assert_string_equal(rec.namespace_, cases[i].ns);
        else
            assert_null(rec.namespace_);
        if (cases[i].name)
            assert_string_equal(rec.name, cases[i].name);
        else
            assert_null(rec.name);
        assert_string_equal(rec.user, "alice");
        assert_true(rec.dry_run);
        assert_null(rec.decision);
        assert_null(rec.request);
        wh_review_request_dispose(&rq);
    }
}

static void rotates_by_size_and_keeps_max_files(void **state)
{
    (void)state;
    char *dir, path[256];
    wh_audit *a = open_fresh(&dir, path, 1000, 2);
    for (int i = 0; i < 40; i++) {
        char uid[32];
        snprintf(uid, sizeof(uid), "uid-%d", i);
        wh_audit_record r = sample(uid);
        assert_int_equal(wh_audit_write(a, &r), GQ_OK);
    }
    assert_int_equal(wh_audit_records(a), 40);
    assert_int_equal(wh_audit_errors(a), 0);
    wh_audit_close(a);

    char p1[300], p2[300], p3[300];
    snprintf(p1, sizeof(p1), "%s.1", path);
    snprintf(p2, sizeof(p2), "%s.2", path);
    snprintf(p3, sizeof(p3), "%s.3", path);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size <= 1000);
    assert_int_equal(stat(p1, &st), 0);
    assert_int_equal(stat(p2, &st), 0);
    assert_int_not_equal(stat(p3, &st), 0);
    /* The newest record is in the live file, whole lines only. */
    char *live = slurp(path);
    assert_non_null(strstr(live, "\"uid\":\"uid-39\""));
    assert_true(live[strlen(live) - 1] == '\n');
    free(live);
    rm_rf(dir);
    free(dir);
}

/* A log moved away (logrotate) and a reopen requested: the records before
 * are in the moved file, those after in a new one at the path; written
 * directly or through the writer thread. */
static void reopens_after_rotation(bool writer)
{
    char *dir, path[256], moved[300];
    wh_audit *a = open_fresh(&dir, path, 0, 0);
    snprintf(moved, sizeof(moved), "%s/audit.log.old", dir);
    if (writer)
        assert_int_equal(wh_audit_start_writer(a), GQ_OK);
    wh_audit_record r = sample("before");
    assert_int_equal(wh_audit_write(a, &r), GQ_OK);
    wh_audit_flush(a);
    assert_int_equal(rename(path, moved), 0);
    wh_audit_request_reopen(a);
    r = sample("after");
    assert_int_equal(wh_audit_write(a, &r), GQ_OK);
    wh_audit_flush(a);
    char *old = slurp(moved), *cur = slurp(path);
    assert_int_equal(count_lines(old), 1);
    assert_non_null(strstr(old, "before"));
    assert_int_equal(count_lines(cur), 1);
    assert_non_null(strstr(cur, "after"));
    free(old);
    free(cur);
    wh_audit_close(a);
    rm_rf(dir);
    free(dir);
}

static void reopens_after_external_rotation(void **state)
{
    (void)state;
    reopens_after_rotation(false);
}

static void write_errors_are_counted_not_silent(void **state)
{
    (void)state;
    /* /dev/full accepts the open and fails every write with ENOSPC. */
    gq_audit_config cfg = {.path = "/dev/full", .max_size = 0, .max_files = 0};
    wh_audit *a = NULL;
    assert_int_equal(wh_audit_open(&cfg, &a, NULL), GQ_OK);
    wh_audit_record r = sample("lost");
    assert_int_equal(wh_audit_write(a, &r), GQ_EIO);
    assert_int_equal(wh_audit_write(a, &r), GQ_EIO);
    assert_int_equal(wh_audit_errors(a), 2);
    assert_int_equal(wh_audit_records(a), 0);
    wh_audit_close(a);
}

static void open_failure_is_reported(void **state)
{
    (void)state;
    gq_audit_config cfg = {.path = "/nonexistent-dir/x/audit.log"};
    wh_audit *a = NULL;
    gq_err err;
    gq_err_clear(&err);
    assert_int_equal(wh_audit_open(&cfg, &a, &err), GQ_EIO);
    assert_null(a);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x/audit.log"));
}

/* audit.path "-": each record one line on standard output, and no file is
 * made (path "-" is not opened as a file named "-"). */
static void writes_to_stdout(void **state)
{
    (void)state;
    char path[] = "/tmp/gq-audit-stdout-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    assert_true(saved >= 0);
    assert_true(dup2(fd, STDOUT_FILENO) >= 0);
    gq_audit_config cfg = {.path = WH_AUDIT_STDOUT, .max_size = 10, .max_files = 1};
    wh_audit *a = NULL;
    assert_int_equal(wh_audit_open(&cfg, &a, NULL), GQ_OK);
    wh_audit_record r1 = sample("to-stdout-1"), r2 = sample("to-stdout-2");
    assert_int_equal(wh_audit_write(a, &r1), GQ_OK);
    wh_audit_request_reopen(a); /* a stream is never reopened */
    assert_int_equal(wh_audit_write(a, &r2), GQ_OK);
    assert_int_equal(wh_audit_records(a), 2);
    wh_audit_close(a);
    assert_true(dup2(saved, STDOUT_FILENO) >= 0);
    close(saved);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    unlink(path);
    assert_true(n > 0);
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    assert_non_null(nl);
    assert_non_null(strstr(buf, "\"uid\":\"to-stdout-1\""));
    assert_true(strstr(buf, "\"uid\":\"to-stdout-1\"") < nl);
    assert_non_null(strstr(nl + 1, "\"uid\":\"to-stdout-2\""));
    assert_int_equal(buf[n - 1], '\n');
    assert_int_equal(access("-", F_OK), -1); /* not rotated into a file (max_size 10) */
}

static void line_with_newline_is_refused(void **state)
{
    (void)state;
    wh_audit *a = NULL;
    gq_audit_config cfg = {.path = "/dev/null"};
    assert_int_equal(wh_audit_open(&cfg, &a, NULL), GQ_OK);
    assert_int_equal(wh_audit_write_line(a, "{}\n{}", 5), GQ_EINVAL);
    assert_int_equal(wh_audit_write_line(a, "{}", 2), GQ_OK);
    wh_audit_close(a);
}

/* ---- the writer thread ---------------------------------------------------- */

typedef struct writer_arg {
    wh_audit *a;
    int id, n;
} writer_arg;

static void *write_many(void *p)
{
    writer_arg *w = p;
    for (int i = 0; i < w->n; i++) {
        char uid[32];
        snprintf(uid, sizeof(uid), "t%d-%d", w->id, i);
        wh_audit_record r = sample(uid);
        if (wh_audit_write(w->a, &r) != GQ_OK)
            abort();
    }
    return NULL;
}

/* Records from four threads at once, rotated by size: every one lands once,
 * as a whole line, in some file; none is a partial line. */
static void writer_thread_keeps_every_record(void **state)
{
    (void)state;
    char *dir, path[256];
    wh_audit *a = open_fresh(&dir, path, 20000, 50);
    assert_int_equal(wh_audit_start_writer(a), GQ_OK);
    assert_int_equal(wh_audit_start_writer(a), GQ_OK); /* once is enough */
    pthread_t t[4];
    writer_arg w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (writer_arg){a, i, 500};
        assert_int_equal(pthread_create(&t[i], NULL, write_many, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    wh_audit_flush(a);
    assert_int_equal(wh_audit_records(a), 2000);
    assert_int_equal(wh_audit_errors(a), 0);
    /* More after the flush: close writes them before it returns. */
    wh_audit_record r = sample("last");
    assert_int_equal(wh_audit_write(a, &r), GQ_OK);
    wh_audit_close(a);

    size_t lines = 0, files = 0;
    for (int k = 0; k <= 50; k++) {
        char f[300];
        if (k)
            snprintf(f, sizeof(f), "%s.%d", path, k);
        else
            snprintf(f, sizeof(f), "%s", path);
        struct stat st;
        if (stat(f, &st) != 0)
            continue;
        files++;
        assert_true(st.st_size <= 20000);
        char *text = slurp(f);
        assert_true(text[0] == '{' && text[strlen(text) - 1] == '\n');
        for (char *l = text, *nl; (nl = strchr(l, '\n')); l = nl + 1) {
            assert_true(*l == '{' && nl[-1] == '}');
            lines++;
        }
        free(text);
    }
    assert_int_equal(lines, 2001);
    assert_true(files > 10);
    rm_rf(dir);
    free(dir);
}

static void writer_thread_counts_errors_and_reopens(void **state)
{
    (void)state;
    gq_audit_config full = {.path = "/dev/full"};
    wh_audit *a = NULL;
    assert_int_equal(wh_audit_open(&full, &a, NULL), GQ_OK);
    assert_int_equal(wh_audit_start_writer(a), GQ_OK);
    wh_audit_record r = sample("lost");
    /* Queued: the caller cannot know yet; the counter does after a flush. */
    assert_int_equal(wh_audit_write(a, &r), GQ_OK);
    assert_int_equal(wh_audit_write(a, &r), GQ_OK);
    wh_audit_flush(a);
    assert_int_equal(wh_audit_errors(a), 2);
    assert_int_equal(wh_audit_records(a), 0);
    wh_audit_close(a);

    reopens_after_rotation(true);
    wh_audit_flush(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(format_has_every_field),
        cmocka_unit_test(record_init_from_review),
        cmocka_unit_test(rotates_by_size_and_keeps_max_files),
        cmocka_unit_test(reopens_after_external_rotation),
        cmocka_unit_test(write_errors_are_counted_not_silent),
        cmocka_unit_test(writer_thread_keeps_every_record),
        cmocka_unit_test(writer_thread_counts_errors_and_reopens),
        cmocka_unit_test(open_failure_is_reported),
        cmocka_unit_test(line_with_newline_is_refused),
        cmocka_unit_test(writes_to_stdout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
