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
