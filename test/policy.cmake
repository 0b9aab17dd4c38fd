# Policy core, one program per subject (fixtures in unit/quota/policy_fixtures.h):
# quota evaluation, the CRD parsers, GPULimitRanges, reservation records, the typed
# status (decoder, encoder, operations), usage
# (recount, shared claims, the counting rule) and per-model limits.
gq_unit_test(test_policy_eval unit/quota/test_policy_eval.c)
gq_unit_test(test_crd_parse unit/quota/test_crd_parse.c)
gq_unit_test(test_limitrange unit/quota/test_limitrange.c)
gq_unit_test(test_reservations unit/quota/test_reservations.c)
gq_unit_test(test_status unit/quota/test_status.c)
gq_unit_test(test_usage unit/quota/test_usage.c)
gq_unit_test(test_lending unit/quota/test_lending.c)
gq_unit_test(test_policy_models unit/quota/test_policy_models.c)
gq_fuzz_target(crd fuzz/fuzz_crd.c)

# The CRDs are generated from one description; a hand edit of the YAML (or a
# generator change without regenerating) fails here.
# Always registered: without python3 (make deps installs it) it fails, it is
# never left out. Configuring does not need Python (deploy/Dockerfile builds
# the binary alone).
add_test(NAME crds_up_to_date COMMAND python3 ${CMAKE_SOURCE_DIR}/deploy/crds/generate.py --check)
