# Pod GPU cost: table over test/data/pods/*.json.
gq_unit_test(test_podcost unit/quota/test_podcost.c)
gq_fuzz_target(podcost ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_podcost.c)
gq_unit_test(test_dra unit/quota/test_dra.c)
gq_fuzz_target(dra ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_dra.c)
# The claims a pod runs on are the claims it was charged for (quota/claimcheck.h).
gq_unit_test(test_claimcheck unit/quota/test_claimcheck.c)
