# The validating webhook: the /validate decision over the in-memory store
# (charging, conflicts, rollback, dry run, tamper, group commit under threads).
gq_unit_test(test_validate test_validate.c LIBS gq_webhook gq_kube)

# End to end against the kube-apiserver stand-in: kubectl-created pods
# through real webhook processes, then three replicas under 200 concurrent
# reviews with injected conflicts and latency.
add_test(NAME validate_integration
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_integration.sh $<TARGET_FILE:gpuquota>
                 $<TARGET_FILE:kube-standin>)
set_tests_properties(validate_integration PROPERTIES TIMEOUT 300)
