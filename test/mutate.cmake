# /mutate in service: the HTTP adapter driven without sockets.
gq_unit_test(test_mutate_http unit/webhook/test_mutate_http.c support/admission_testutil.c
             LIBS gq_webhook gq_kube)

# Integration: the real binary over TLS, every backend and input form,
# reinvocation, exact shapes, abuse, certificate swap under load, draining
# and the audit log.
add_test(NAME mutate_integration
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mutate_integration.sh $<TARGET_FILE:gpuquota>
                 ${GQ_TEST_DATA} ${CMAKE_SOURCE_DIR}/deploy/examples/pods
                 ${CMAKE_CURRENT_SOURCE_DIR}/bench/wrk.lua)
set_tests_properties(mutate_integration PROPERTIES TIMEOUT 600)

# The shared JSON parser (strict, pruning) that /mutate decodes reviews with.
gq_unit_test(test_jsonutil unit/common/test_jsonutil.c)
gq_fuzz_target(json ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_json.c)
