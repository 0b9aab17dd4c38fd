# certs/: generation verified with OpenSSL, reuse/rotation, inspection; and
# the CLI's exit codes for expiring certificates.
gq_unit_test(test_certs test_certs.c LIBS gq_certs PkgConfig::OPENSSL)
add_test(NAME certs_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/certs_cli.sh $<TARGET_FILE:gpuquota>)
