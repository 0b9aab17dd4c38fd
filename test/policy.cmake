# Policy core: CRD parsers, reservations, quota and GPULimitRange decisions.
gq_unit_test(test_policy unit/quota/test_policy.c)
gq_fuzz_target(crd fuzz/fuzz_crd.c)

# The CRDs are generated from one description; a hand edit of the YAML (or a
# generator change without regenerating) fails here.
# Always registered: without python3 (make deps installs it) it fails, it is
# never left out. Configuring does not need Python (deploy/Dockerfile builds
# the binary alone).
add_test(NAME crds_up_to_date COMMAND python3 ${CMAKE_SOURCE_DIR}/deploy/crds/generate.py --check)
