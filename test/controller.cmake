# Controller (controller/): records, store, reconcile and queue unit tests.
gq_unit_test(test_ctl test_ctl.c LIBS gq_controller)
# The running controller over a fake kube_api (threads, no sockets).
gq_unit_test(test_ctl_controller test_ctl_controller.c LIBS gq_controller)

# The running controller against the kube-apiserver stand-in (real binary,
# real kubectl); see test/controller/t_controller.sh.
add_test(NAME controller_standin
         COMMAND bash ${CMAKE_SOURCE_DIR}/test/controller/t_controller.sh)
set_tests_properties(controller_standin PROPERTIES
  ENVIRONMENT "STANDIN_BIN=$<TARGET_FILE:kube-standin>;DATA=${CMAKE_SOURCE_DIR}/test/data/standin;GQ_BIN=$<TARGET_FILE:gpuquota>;CRDS=${CMAKE_SOURCE_DIR}/deploy/crds"
  TIMEOUT 180)

# Controller figures (initial sync, RSS per pod, event -> status latency):
# a program that prints numbers, never a ctest case. Run it from a Release
# build: bench/bench_controller test/kube-standin gpuquota deploy/crds
if(GQ_BENCH)
  add_executable(bench_controller bench/bench_controller.c standin_proc.c)
  target_include_directories(bench_controller PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(bench_controller PRIVATE gq_kube Threads::Threads)
  set_target_properties(bench_controller PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/bench)
endif()

# Pods and quotas as untrusted JSON through the record builder and reconcile.
gq_fuzz_target(ctl ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_ctl.c LIBS gq_controller)
