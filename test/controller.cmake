# Controller (controller/): the store's pod records and the pure reconcile
# (sharing unit/controller/ctl_fixture.h), the work queue, and the admission
# bound read of the cluster's webhooks.
gq_unit_test(test_ctl_records unit/controller/test_ctl_records.c LIBS gq_controller)
gq_unit_test(test_ctl_reconcile unit/controller/test_ctl_reconcile.c LIBS gq_controller)
gq_unit_test(test_ctl_lending unit/controller/test_ctl_lending.c LIBS gq_controller)
gq_unit_test(test_ctl_workqueue unit/controller/test_ctl_workqueue.c LIBS gq_controller)
gq_unit_test(test_ctl_run unit/controller/test_ctl_run.c LIBS gq_controller)
# The queue admitter's charges: shared ResourceClaims once per quota.
gq_unit_test(test_ctl_ungate unit/controller/test_ctl_ungate.c LIBS gq_controller)
# The running controller over a fake kube_api (threads, no sockets; the fake
# is unit/controller/ctl_fake.h), and its admission pass with requests
# several at once (controller/fanout.h).
gq_unit_test(test_ctl_controller unit/controller/test_ctl_controller.c LIBS gq_controller)
gq_unit_test(test_ctl_ungate_pass unit/controller/test_ctl_ungate_pass.c LIBS gq_controller)
gq_unit_test(test_ctl_fanout unit/controller/test_ctl_fanout.c LIBS gq_controller)

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
  add_executable(bench_controller bench/bench_controller.c support/standin_proc.c)
  target_include_directories(bench_controller PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(bench_controller PRIVATE gq_kube Threads::Threads)
  set_target_properties(bench_controller PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/bench)
  # The admission pass's CPU with a deep queue and no room, over the fake
  # kube_api of the controller's tests: bench/bench_queue_pass [-q Q] [-n NS]
  add_executable(bench_queue_pass bench/queue_pass.c)
  target_include_directories(bench_queue_pass PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(bench_queue_pass PRIVATE gq_controller PkgConfig::CMOCKA Threads::Threads)
  set_target_properties(bench_queue_pass PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/bench)
endif()

# Pods and quotas as untrusted JSON through the record builder and reconcile.
gq_fuzz_target(ctl ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_ctl.c LIBS gq_controller)

# Command-line refusals (exit 2 with a message naming the flag); a kubeconfig
# that does not exist fails at start-up (exit 1).
function(gq_ctl_cli name status pattern)
  add_test(NAME controller_cli_${name}
           COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh ${status} 1 ${pattern}
                   ${GQ_BIN} controller ${ARGN})
endfunction()
gq_ctl_cli(resync_zero 2 "--resync: .0s. is not a duration between 1s and 24h" --resync 0s)
gq_ctl_cli(resync_unit 2 "--resync: .5d. is not a duration" --resync 5d)
gq_ctl_cli(resync_long 2 "--resync: .25h. is not a duration" --resync 25h)
gq_ctl_cli(workers_zero 2 "--workers" --workers 0)
gq_ctl_cli(ungate_inflight_zero 2 "--ungate-inflight" --ungate-inflight 0)
gq_ctl_cli(ungate_inflight_big 2 "--ungate-inflight" --ungate-inflight 65)
gq_ctl_cli(ungate_inflight_ok 1 "nonexistent" --ungate-inflight 64
           --kubeconfig /nonexistent/kubeconfig)
gq_ctl_cli(grace_short 2 "--reservation-grace: .500ms. is not a duration between 1s and 24h"
           --reservation-grace 500ms)
gq_ctl_cli(grace_ok 1 "nonexistent" --reservation-grace 40s --kubeconfig /nonexistent/kubeconfig)
gq_ctl_cli(extra_arg 2 "unexpected argument extra" extra)
gq_ctl_cli(no_kubeconfig 1 "nonexistent" --kubeconfig /nonexistent/kubeconfig
           --metrics-listen 127.0.0.1:0)
gq_ctl_cli(help 0 "--leader-elect" --help)
# Valid durations get past the flags (and then fail on the missing kubeconfig).
gq_ctl_cli(resync_ok_m 1 "nonexistent" --resync 5m --kubeconfig /nonexistent/kubeconfig)
gq_ctl_cli(resync_ok_bare 1 "nonexistent" --resync=300 --kubeconfig /nonexistent/kubeconfig)
gq_ctl_cli(resync_ok_ms 1 "nonexistent" --resync 1500ms --kubeconfig /nonexistent/kubeconfig)
