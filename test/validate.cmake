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

# Benchmark (prints figures, never a ctest case): charging throughput and
# latency against the stand-in, one namespace and 50, over-admission checked.
if(GQ_BENCH)
  add_executable(bench_validate bench/bench_validate.c standin_proc.c)
  target_include_directories(bench_validate PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_definitions(bench_validate PRIVATE GQ_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_link_libraries(bench_validate PRIVATE gq_webhook gq_kube gq_core PkgConfig::CURL
                        Threads::Threads)
endif()

# Fuzz: state documents into the in-memory store, then the decision over them.
gq_fuzz_target(validate_state ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_validate_state.c
               LIBS gq_webhook gq_kube)
