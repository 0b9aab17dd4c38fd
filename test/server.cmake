# webhook/: metrics exposition, the handler seam (no sockets) and the HTTPS
# server driven by real clients.
gq_unit_test(test_metrics unit/webhook/test_metrics.c LIBS gq_webhook gq_kube)
gq_unit_test(test_server unit/http/test_server.c LIBS gq_webhook gq_certs gq_kube)

# Integration: the real binary (and a harness with POST test routes on the
# same server library) on ephemeral ports, with fresh certificates, driven
# by curl and openssl s_client.
add_executable(server_harness support/server_harness.c)
target_link_libraries(server_harness PRIVATE gq_webhook gq_kube gq_core)
add_test(NAME server_integration
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/server_integration.sh $<TARGET_FILE:gpuquota>
                 $<TARGET_FILE:server_harness>)
set_tests_properties(server_integration PROPERTIES TIMEOUT 120)

# Abuse cases (memory of all bodies in flight, half-open and slow
# connections, one peer taking every connection) against the real binary.
add_test(NAME server_abuse COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/server_abuse.sh
                                   $<TARGET_FILE:gpuquota>)
# Alone: its thousand connections and 30 MB of TLS would slow the timed
# checks of tests running beside it.
set_tests_properties(server_abuse PROPERTIES TIMEOUT 240 RUN_SERIAL TRUE)

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

# gpuquota webhook: the abuse-limit and client-certificate flags are checked
# before anything starts.
gq_cli_test(webhook max_body_memory_below_one_body 2
            ARGS --tls-cert a --tls-key b --max-body-memory 1Mi
            EXPECT "^gpuquota webhook: --max-body-memory 1Mi: expected a size in bytes from 3145728")
gq_cli_test(webhook read_timeout_range 2 ARGS --tls-cert a --tls-key b --read-timeout 10m
            EXPECT "^gpuquota webhook: --read-timeout 10m: at most 5m$")
gq_cli_test(webhook per_ip_above_all 2
            ARGS --tls-cert a --tls-key b --max-connections 100 --max-connections-per-ip 200
            EXPECT "^gpuquota webhook: --max-connections-per-ip 200 exceeds --max-connections 100$")
gq_cli_test(webhook client_cn_without_ca 2 ARGS --tls-cert a --tls-key b --client-cn kube-apiserver
            EXPECT "^gpuquota webhook: --client-cn needs --client-ca$")
