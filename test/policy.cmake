# Policy core: CRD parsers, reservations, quota and GPULimitRange decisions.
gq_unit_test(test_policy test_policy.c)
gq_fuzz_target(crd fuzz/fuzz_crd.c)

# The CRDs are generated from one description; a hand edit of the YAML (or a
# generator change without regenerating) fails here.
# Python 3 is required (make deps installs it): the check is never left out.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
add_test(NAME crds_up_to_date
         COMMAND Python3::Interpreter ${CMAKE_SOURCE_DIR}/deploy/crds/generate.py --check)
