/* What the running controller reads of the cluster (controller/ctl_run.c):
 * how long a refused create may still be stored, from the other validating
 * webhooks' timeouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/testjson.h"

#include "controller/ctl.h"

/* How long a refused create may still be stored: the longest timeout of
 * the other validating webhooks that see pod creates, plus 5 s. */
static void test_admission_bound(void **state)
{
    (void)state;
    json_object *none = J("[]");
    assert_int_equal(ctl_admission_bound_ms(none, "gpuquota"), 5000);
    json_object_put(none);
    json_object *cfgs =
        J("[{'metadata':{'name':'gpuquota'},'webhooks':[{'timeoutSeconds':30,'rules':[{'apiGroups':"
          "[''],'operations':['CREATE'],'resources':['pods']}]}]},"
          /* a policy engine on every resource, its default timeout */
          "{'metadata':{'name':'kyverno'},'webhooks':[{'rules':[{'apiGroups':['*'],'operations':"
          "['*'],'resources':['*/*']}]}]},"
          /* one on deployments only: never on the pod's path */
          "{'metadata':{'name':'deploys'},'webhooks':[{'timeoutSeconds':25,'rules':[{'apiGroups':"
          "['apps'],'operations':['CREATE'],'resources':['deployments']}]}]},"
          /* pods, but updates only */
          "{'metadata':{'name':'upd'},'webhooks':[{'timeoutSeconds':20,'rules':[{'apiGroups':[''],"
          "'operations':['UPDATE'],'resources':['pods']}]}]},"
          /* pod creates, 12 s */
          "{'metadata':{'name':'gk'},'webhooks':[{'timeoutSeconds':12,'rules':[{'apiGroups':[''],"
          "'operations':['CREATE','UPDATE'],'resources':['pods','services']}]}]}]");
    assert_int_equal(ctl_admission_bound_ms(cfgs, "gpuquota"), 17000);
    /* gpuquota's own entries have answered already; counted when not ours */
    assert_int_equal(ctl_admission_bound_ms(cfgs, "other"), 35000);
    json_object_put(cfgs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
