# Kubernetes client (kube/): unit tests, fuzz replays, integration against the
# kube-apiserver stand-in, and the list/watch benchmark.
gq_unit_test(test_kube test_kube.c LIBS gq_kube)
gq_fuzz_target(watch ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_watch.c LIBS gq_kube)
gq_fuzz_target(kubeconfig ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_kubeconfig.c LIBS gq_kube)
