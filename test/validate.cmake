# The validating webhook: the /validate decision over the in-memory store
# (charging, conflicts, rollback, dry run, tamper, group commit under threads).
gq_unit_test(test_validate unit/webhook/test_validate.c support/admission_testutil.c
             support/faultstore.c LIBS gq_webhook gq_kube)
# The same fixture (unit/webhook/validate_fixture.h): DRA claims, shared claims
# and a claim's pins; the HTTP handler, audit records, metrics and options; the
# queue cap and pod-group sizes.
gq_unit_test(test_validate_claims unit/webhook/test_validate_claims.c support/admission_testutil.c
             support/faultstore.c LIBS gq_webhook gq_kube)
gq_unit_test(test_validate_http unit/webhook/test_validate_http.c support/admission_testutil.c
             support/faultstore.c LIBS gq_webhook gq_kube)
gq_unit_test(test_validate_queue unit/webhook/test_validate_queue.c support/admission_testutil.c
             support/faultstore.c LIBS gq_webhook gq_kube)

# /validate as an asynchronous handler of a real server over a slow store:
# batches larger than the server's threads, a deadline while suspended, a
# full queue, and stopping with connections suspended.
gq_unit_test(test_validate_async unit/webhook/test_validate_async.c support/admission_testutil.c support/faultstore.c
             LIBS gq_webhook gq_kube)

# The store over the API server: what comes from the informer caches and what
# is read live (stale caches, scopes without quotas), failed live reads, and
# concurrent live reads sharing one request; through a fake kube_api.
gq_unit_test(test_kubestore unit/webhook/test_kubestore.c LIBS gq_webhook gq_kube)

# End to end against the kube-apiserver stand-in: kubectl-created pods
# through real webhook processes, then three replicas under 200 concurrent
# reviews with injected conflicts and latency.
gq_standin_script(validate_integration 300)

# Reservations end to end: stand-in, webhook and controller; charges keyed by
# the stored pod's uid, counted once, and phantoms (pods refused after the
# charge, reviews posted to /validate) dropped after the grace period.
gq_standin_script(reservations_integration 180)

# The API server loses its history (the stand-in restores a snapshot) under a
# running webhook and controller: both relist, a quota created afterwards is
# enforced and pods running afterwards are counted.
gq_standin_script(history_integration 180)

# A quota or limit range created while the webhook's watch of it is cut and
# its reconnects fail is enforced at once (read live); a failing live read
# denies GPU pods.
gq_standin_script(stale_integration 180)

# Benchmark (prints figures, never a ctest case): charging throughput and
# latency against the stand-in, one namespace and 50, over-admission checked.
if(GQ_BENCH)
  add_executable(bench_validate bench/bench_validate.c support/standin_proc.c)
  target_include_directories(bench_validate PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_definitions(bench_validate PRIVATE GQ_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  target_link_libraries(bench_validate PRIVATE gq_webhook gq_kube gq_core PkgConfig::CURL
                        Threads::Threads)
endif()

# Fuzz: state documents into the in-memory store, then the decision over them.
gq_fuzz_target(validate_state ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_validate_state.c
               LIBS gq_webhook gq_kube)

# gpuquota webhook: the /validate flags are checked before anything starts.
add_test(NAME webhook_bad_reservation_ttl
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2 1
                 "^gpuquota webhook: --reservation-ttl 2x: expected a duration such as 90s, 2m or 1h$"
                 ${GQ_BIN} webhook --tls-cert a --tls-key b --reservation-ttl 2x)
add_test(NAME webhook_reservation_ttl_range
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2 1
                 "^gpuquota webhook: --reservation-ttl 25h: must be between 1s and 24h$"
                 ${GQ_BIN} webhook --tls-cert a --tls-key b --reservation-ttl 25h)
add_test(NAME webhook_too_many_trusted_users
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2 1
                 "^gpuquota webhook: at most 16 --trusted-user$"
                 ${GQ_BIN} webhook --tls-cert a --tls-key b --trusted-user 1 --trusted-user 2
                 --trusted-user 3 --trusted-user 4 --trusted-user 5 --trusted-user 6
                 --trusted-user 7 --trusted-user 8 --trusted-user 9 --trusted-user 10
                 --trusted-user 11 --trusted-user 12 --trusted-user 13 --trusted-user 14
                 --trusted-user 15 --trusted-user 16 --trusted-user 17)
add_test(NAME webhook_max_batch_range
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 2 1
                 "^gpuquota webhook: --max-batch 0: expected a whole number in 1..4096$"
                 ${GQ_BIN} webhook --tls-cert a --tls-key b --max-batch 0)

# Escrow: holds taken in a charge's write, pods admitted on them with no
# write, given back; three replicas never past hard nor short of it, denials
# waiting for other replicas' holds and for unsettled records.
gq_unit_test(test_validate_escrow unit/webhook/test_validate_escrow.c support/admission_testutil.c
             support/faultstore.c LIBS gq_webhook gq_kube)
