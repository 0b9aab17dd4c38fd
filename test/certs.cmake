# certs/: generation verified with OpenSSL, reuse/rotation, inspection; and
# the CLI's exit codes for expiring certificates.
gq_unit_test(test_certs unit/certs/test_certs.c LIBS gq_certs PkgConfig::OPENSSL)
add_test(NAME certs_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/certs_cli.sh $<TARGET_FILE:gpuquota>)
# certs reconcile / delete refuse bad arguments before touching a cluster
# (their work against one: helm_install, e2e_real_node).
gq_cli_test(certs reconcile_needs_namespace 2 ARGS reconcile --work /tmp
            EXPECT "--namespace \\(a namespace name\\) and --work are required")
gq_cli_test(certs delete_refuses_bad_namespace 2 ARGS delete --namespace Bad/NS
            EXPECT "--namespace \\(a namespace name\\) is required")
