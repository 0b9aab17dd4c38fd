/* Fault injection and counters: POST /standin/faults, /standin/reset,
 * GET /standin/stats. Callers hold the store lock. */
#include <stdio.h>
#include <string.h>

#include "standin.h"

fault_state g_faults;

static const char *reason_for(int code)
{
    switch (code) {
    case 400:
        return "BadRequest";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "NotFound";
    case 405:
        return "MethodNotAllowed";
    case 409:
        return "Conflict";
    case 410:
        return "Expired";
    case 422:
        return "Invalid";
    case 429:
        return "TooManyRequests";
    case 500:
        return "InternalError";
    case 503:
        return "ServiceUnavailable";
    case 504:
        return "Timeout";
    default:
        return "";
    }
}

static void reset(void)
{
    g_faults.fail_count = 0;
    g_faults.fail_code = 0;
    g_faults.fail_method[0] = '\0';
    g_faults.fail_prefix[0] = '\0';
    g_faults.latency_ms = 0;
    g_faults.cut_after = 0;
    g_faults.cut_gen++;
    g_faults.watch_gone = 0;
    g_faults.conflict_status = 0;
    st_broadcast();
}

static int get_long(json_object *o, const char *k, long lo, long hi, long *out)
{
    json_object *v = si_obj(o, k);
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_int))
        return -1;
    int64_t x = json_object_get_int64(v);
    if (x < lo || x > hi)
        return -1;
    *out = (long)x;
    return 1;
}

static void ok(sresp *rs)
{
    rs->code = 200;
    rs->content_type = "application/json";
    rs->body = strdup("{\"ok\":true}");
}

static void set_faults(const sreq *rq, sresp *rs)
{
    gq_err err = {0};
    json_object *o = si_parse_json(rq->body ? rq->body : "", rq->body_len, &err);
    long v;
    const char *bad = NULL;
    if (!o || !json_object_is_type(o, json_type_object)) {
        bad = "body must be a JSON object";
        goto out;
    }
    /* Validate everything before applying anything. */
    json_object *fail = si_obj(o, "fail");
    long count = 0, code = 0;
    if (fail) {
        if (!json_object_is_type(fail, json_type_object) ||
            get_long(fail, "count", 0, 1000000000, &count) != 1 ||
            get_long(fail, "code", 100, 599, &code) != 1) {
            bad = "fail needs integer count >= 0 and code 100..599";
            goto out;
        }
        const char *m = si_str(fail, "method"), *pp = si_str(fail, "pathPrefix");
        if ((si_obj(fail, "method") && !m) || (si_obj(fail, "pathPrefix") && !pp) ||
            (m && strlen(m) >= sizeof g_faults.fail_method) ||
            (pp && strlen(pp) >= sizeof g_faults.fail_prefix)) {
            bad = "fail.method and fail.pathPrefix must be short strings";
            goto out;
        }
    }
    static const char *const keys[] = {"latencyMs", "cutWatchAfter", "watchGone", "conflictStatus"};
    for (size_t i = 0; i < 4; i++)
        if (get_long(o, keys[i], 0, 1000000000, &v) < 0) {
            bad = "latencyMs, cutWatchAfter, watchGone and conflictStatus must be integers >= 0";
            goto out;
        }
    json_object_object_foreach(o, k, val)
    {
        (void)val;
        int known = !strcmp(k, "fail");
        for (size_t i = 0; i < 4; i++)
            known |= !strcmp(k, keys[i]);
        if (!known) {
            bad = "unknown fault";
            goto out;
        }
    }
    if (fail) {
        const char *m = si_str(fail, "method"), *pp = si_str(fail, "pathPrefix");
        g_faults.fail_count = count;
        g_faults.fail_code = (int)code;
        snprintf(g_faults.fail_method, sizeof g_faults.fail_method, "%s", m ? m : "");
        snprintf(g_faults.fail_prefix, sizeof g_faults.fail_prefix, "%s", pp ? pp : "");
    }
    if (get_long(o, "latencyMs", 0, 1000000000, &v) == 1)
        g_faults.latency_ms = v;
    if (get_long(o, "cutWatchAfter", 0, 1000000000, &v) == 1) {
        g_faults.cut_after = v;
        g_faults.cut_gen++;
        st_broadcast();
    }
    if (get_long(o, "watchGone", 0, 1000000000, &v) == 1)
        g_faults.watch_gone = v;
    if (get_long(o, "conflictStatus", 0, 1000000000, &v) == 1)
        g_faults.conflict_status = v;
out:
    json_object_put(o);
    if (bad)
        api_status(rs, 400, "BadRequest", bad, NULL, NULL, NULL);
    else
        ok(rs);
}

static void stats(sresp *rs)
{
    static const char *const verbs[] = {"get",    "list",  "watch",  "create",
                                        "update", "patch", "delete", "other"};
    json_object *o = json_object_new_object();
    json_object *bv = json_object_new_object();
    for (int i = 0; i < 8; i++)
        json_object_object_add(bv, verbs[i], json_object_new_int64((int64_t)g_faults.by_verb[i]));
    json_object_object_add(o, "requests", bv);
    json_object_object_add(o, "watchesOpen", json_object_new_int64(g_faults.watches_open));
    json_object_object_add(o, "statusWrites",
                           json_object_new_int64((int64_t)g_faults.status_writes));
    json_object_object_add(o, "conflictsInjected",
                           json_object_new_int64((int64_t)g_faults.conflicts_injected));
    json_object_object_add(o, "faultsInjected",
                           json_object_new_int64((int64_t)g_faults.faults_injected));
    char rv[32];
    snprintf(rv, sizeof rv, "%llu", (unsigned long long)st_rv());
    json_object_object_add(o, "resourceVersion", json_object_new_string(rv));
    api_set_json(rs, 200, o);
    json_object_put(o);
}

int faults_handle(const sreq *rq, sresp *rs)
{
    if (strncmp(rq->path, "/standin/", 9) != 0)
        return 0;
    const char *what = rq->path + 9;
    int post = !strcmp(rq->method, "POST");
    if (!strcmp(what, "faults") && post)
        set_faults(rq, rs);
    else if (!strcmp(what, "reset") && post) {
        reset();
        ok(rs);
    } else if (!strcmp(what, "stats") && !strcmp(rq->method, "GET"))
        stats(rs);
    else if (!strcmp(what, "snapshot") && post)
        st_snapshot() ? api_status(rs, 500, "InternalError", "out of memory", NULL, NULL, NULL)
                      : stats(rs);
    else if (!strcmp(what, "restore") && post) {
        int r = st_restore();
        if (r > 0)
            api_status(rs, 400, "BadRequest", "no snapshot taken (POST /standin/snapshot)", NULL,
                       NULL, NULL);
        else if (r < 0)
            api_status(rs, 500, "InternalError", "out of memory", NULL, NULL, NULL);
        else
            stats(rs);
    } else
        api_status(rs, 404, "NotFound", "the server could not find the requested resource", NULL,
                   NULL, "");
    return 1;
}

int faults_take_fail(const char *method, const char *path, sresp *rs)
{
    if (g_faults.fail_count <= 0)
        return 0;
    if (g_faults.fail_method[0] && strcmp(g_faults.fail_method, method) != 0)
        return 0;
    if (g_faults.fail_prefix[0] &&
        strncmp(path, g_faults.fail_prefix, strlen(g_faults.fail_prefix)) != 0)
        return 0;
    g_faults.fail_count--;
    g_faults.faults_injected++;
    char msg[64];
    snprintf(msg, sizeof msg, "injected fault (HTTP %d)", g_faults.fail_code);
    api_status(rs, g_faults.fail_code, reason_for(g_faults.fail_code), msg, NULL, NULL, NULL);
    return 1;
}
