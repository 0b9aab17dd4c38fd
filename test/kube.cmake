# Kubernetes client (kube/): unit tests, fuzz replays, integration against the
# kube-apiserver stand-in, and the list/watch benchmark.
# Without a network, one program per module: kubeconfig, the watch parser,
# kube_util (Status, codes, URLs, backoff, times), the cache and leader
# election over fakes.
gq_unit_test(test_kube_config unit/kube/test_kube_config.c LIBS gq_kube)
# Credential plugins run for real: scripts the test writes, every field and failure.
gq_unit_test(test_kube_exec unit/kube/test_kube_exec.c LIBS gq_kube)
gq_unit_test(test_kube_watch_parser unit/kube/test_kube_watch_parser.c LIBS gq_kube)
gq_unit_test(test_kube_util unit/kube/test_kube_util.c LIBS gq_kube)
gq_unit_test(test_kube_cache unit/kube/test_kube_cache.c LIBS gq_kube)
gq_unit_test(test_kube_leader unit/kube/test_kube_leader.c LIBS gq_kube)
gq_fuzz_target(watch ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_watch.c LIBS gq_kube)
gq_fuzz_target(kubeconfig ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_kubeconfig.c LIBS gq_kube)

# Integration against the kube-apiserver stand-in (built from this tree as
# test/kube-standin); the test reports "skipped" while it is not built.
gq_unit_test(test_kube_standin unit/kube/test_kube_standin.c support/standin_proc.c
             LIBS gq_kube ARGS ${CMAKE_BINARY_DIR}/test/kube-standin)
set_tests_properties(test_kube_standin PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# A kube-apiserver that goes silent (no FIN, no RST) is noticed by a watch
# within KUBE_DEAD_PEER_MS: run in a network namespace of its own, where the
# test drops the stand-in's packets with iptables.
add_executable(test_kube_dead_peer unit/kube/test_kube_dead_peer.c support/standin_proc.c)
target_include_directories(test_kube_dead_peer PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(test_kube_dead_peer PRIVATE gq_kube gq_core PkgConfig::CMOCKA)
add_test(NAME test_kube_dead_peer
         COMMAND unshare -n sh -c "ip link set lo up && exec \"$0\" \"$1\""
                 $<TARGET_FILE:test_kube_dead_peer> ${CMAKE_BINARY_DIR}/test/kube-standin)
set_tests_properties(test_kube_dead_peer PROPERTIES TIMEOUT 120)

# Benchmark: built by default, run by hand (it prints figures, asserts nothing).
if(GQ_BENCH)
  add_executable(bench_kube_list bench/bench_kube_list.c support/standin_proc.c)
  target_include_directories(bench_kube_list PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(bench_kube_list PRIVATE gq_kube gq_core)
endif()
