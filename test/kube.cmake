# Kubernetes client (kube/): unit tests, fuzz replays, integration against the
# kube-apiserver stand-in, and the list/watch benchmark.
gq_unit_test(test_kube test_kube.c LIBS gq_kube)
gq_fuzz_target(watch ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_watch.c LIBS gq_kube)
gq_fuzz_target(kubeconfig ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_kubeconfig.c LIBS gq_kube)

# Integration against the kube-apiserver stand-in (built from this tree as
# test/kube-standin); the test reports "skipped" while it is not built.
gq_unit_test(test_kube_standin test_kube_standin.c standin_proc.c LIBS gq_kube
             ARGS ${CMAKE_BINARY_DIR}/test/kube-standin)
set_tests_properties(test_kube_standin PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# Benchmark: built by default, run by hand (it prints figures, asserts nothing).
if(GQ_BENCH)
  add_executable(bench_kube_list bench/bench_kube_list.c standin_proc.c)
  target_include_directories(bench_kube_list PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(bench_kube_list PRIVATE gq_kube gq_core)
endif()
