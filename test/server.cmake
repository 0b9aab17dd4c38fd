# webhook/: metrics exposition, the handler seam (no sockets) and the HTTPS
# server driven by real clients.
gq_unit_test(test_metrics test_metrics.c LIBS gq_webhook gq_kube)
gq_unit_test(test_server test_server.c LIBS gq_webhook gq_certs gq_kube)

# Integration: the real binary (and a harness with POST test routes on the
# same server library) on ephemeral ports, with fresh certificates, driven
# by curl and openssl s_client.
add_executable(server_harness server_harness.c)
target_link_libraries(server_harness PRIVATE gq_webhook gq_kube gq_core)
add_test(NAME server_integration
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/server_integration.sh $<TARGET_FILE:gpuquota>
                 $<TARGET_FILE:server_harness>)
set_tests_properties(server_integration PROPERTIES TIMEOUT 120)

# Benchmark baseline (scripts/bench.sh runs it; never a ctest case).
if(GQ_BENCH)
  add_executable(bench_baseline_server bench/baseline_server.c)
  target_link_libraries(bench_baseline_server PRIVATE PkgConfig::MHD PkgConfig::JSONC
                        Threads::Threads)
  set_target_properties(bench_baseline_server PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/bench)
  # The /mutate handler's per-request CPU cost, without sockets (profiling).
  add_executable(bench_mutate_micro bench/mutate_micro.c)
  target_link_libraries(bench_mutate_micro PRIVATE gq_webhook gq_kube gq_core)
  set_target_properties(bench_mutate_micro PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/bench)
endif()

# gpuquota webhook: certificate files that do not exist stop it at start.
gq_cli_test(webhook missing_certificate 1
            ARGS --tls-cert /nonexistent/tls.crt --tls-key /nonexistent/tls.key
            EXPECT "/nonexistent/tls.crt: No such file or directory")
