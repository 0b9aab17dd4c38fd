/* What only gpuquota may change on its records (quota/tamper.h): a table
 * of old and new objects and the verdict. JSON is written with single
 * quotes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "quota/tamper.h"

#define OBJ(meta, spec) "{'metadata':{'name':'p'" meta "},'spec':{" spec "}}"
#define GATED "'schedulingGates':[{'name':'gpuquota.io/quota'}]"
#define FINAL ",'finalizers':['gpuquota.io/charged-claim']"

typedef struct row {
    const char *old_obj, *new_obj; /* old NULL: a create */
    bool claim;
    const char *denied; /* a part of the message; NULL: allowed */
} row;

static void table(void **state)
{
    (void)state;
    static const row rows[] = {
        {OBJ("", ""), OBJ(",'labels':{'app':'x'}", ""), false, NULL},
        {OBJ("", ""), OBJ(",'labels':{'gpuquota.io/managed':'true'}", ""), false,
         "reserved to gpuquota (label gpuquota.io/managed)"},
        {OBJ(",'annotations':{'gpuquota.io/charged':'a'}", ""),
         OBJ(",'annotations':{'gpuquota.io/charged':'b'}", ""), false,
         "(annotation gpuquota.io/charged)"},
        {OBJ(",'annotations':{'gpuquota.io/charged':'a'}", ""), OBJ("", ""), false,
         "(annotation gpuquota.io/charged)"},
        {OBJ("", GATED), OBJ("", ""), false, "the scheduling gate gpuquota.io/quota is removed"},
        {OBJ("", ""), OBJ("", GATED), false, "the scheduling gate gpuquota.io/quota is added"},
        {OBJ("", GATED), OBJ(",'labels':{'app':'y'}", GATED), false, NULL},
        {NULL, OBJ("", ""), true, NULL},
        {NULL, OBJ(FINAL, ""), true, "the finalizer gpuquota.io/charged-claim is added"},
        {OBJ(FINAL, ""), OBJ("", ""), true, "the finalizer gpuquota.io/charged-claim is removed"},
        {OBJ(FINAL, ""), OBJ(FINAL ",'labels':{'gpuquota.io/x':'1'}", ""), true,
         "(label gpuquota.io/x)"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        json_object *o = r->old_obj ? J(r->old_obj) : NULL, *n = J(r->new_obj);
        gq_verdict v;
        memset(&v, 0x5a, sizeof(v));
        if (r->claim)
            gq_tamper_claim_write(o, n, &v);
        else
            gq_tamper_pod_update(o, n, &v);
        if (!r->denied) {
            if (!v.allowed)
                fail_msg("row %zu denied: %s", i, v.message);
            assert_int_equal(v.code, GQ_OK);
        } else {
            assert_false(v.allowed);
            assert_int_equal(v.code, GQ_EDENIED);
            if (!strstr(v.message, r->denied))
                fail_msg("row %zu: \"%s\" lacks \"%s\"", i, v.message, r->denied);
        }
        json_object_put(o);
        json_object_put(n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
