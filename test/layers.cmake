# The layering rules of docs/architecture.md and the banned-call list, over
# the product's sources, and the tests' include rule over test/; and the
# checker itself over a tree that breaks each rule once (test/data/layers-bad),
# so a checker that finds nothing fails.
add_test(NAME check_layers COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.py
                                   ${CMAKE_SOURCE_DIR})
add_test(NAME check_layers_catches
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 1 13
                 "^quota/bad.c:2: <curl/curl.h>: libcurl belongs to kube/$"
                 "^quota/bad.c:3: time.h: quota/ is pure"
                 "^quota/bad.c:5: include \"policy.h\" by its layer"
                 "^quota/bad.c:6: quota/ may not include http/server.h"
                 "^quota/bad.c:13: strcpy\\(\\): no bound"
                 "^quota/bad.c:14: time\\(\\): quota/ is pure"
                 "^kube/bad.c:1: <microhttpd.h>: libmicrohttpd and GnuTLS belong to http/server.c$"
                 "^kube/bad.c:3: kube/ may not include controller/ctl.h"
                 "^webhook/other.c:1: <gnutls/gnutls.h>"
                 "^cli/bad.c:5: sprintf\\(\\): no bound"
                 "^cli/bad.h:2: gq_misnamed: a function of cli/ is named cli_...$"
                 "^test/unit/quota/test_bad.c:3: include \"testjson.h\": a test header is included by its path"
                 "^check_layers: 12 problem\\(s\\)$"
                 python3 ${CMAKE_CURRENT_SOURCE_DIR}/check_layers.py ${GQ_TEST_DATA}/layers-bad)

# The figures of docs/architecture.md's "Size of a function" (test/code_stats.py):
# function lengths, parameter counts and include cycles of the product, held
# to what they are now so that they only go down; and the script over a tree
# that breaks each bound once, so a counter that finds nothing fails.
add_test(NAME code_stats COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/code_stats.py
                                 ${CMAKE_SOURCE_DIR} --max over60=0,over100=0,params=0,cycles=0)
add_test(NAME code_stats_catches
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 1 5
                 "^code_stats: over60 is 1, above 0$"
                 "^code_stats: over100 is 1, above 0$"
                 "^code_stats: params is 1, above 0$"
                 "^code_stats: cycles is 1, above 0$"
                 "^include cycles: 1 quota/a<->quota/b$"
                 python3 ${CMAKE_CURRENT_SOURCE_DIR}/code_stats.py ${GQ_TEST_DATA}/code-stats-bad
                 --max over60=0,over100=0,params=0,cycles=0)
