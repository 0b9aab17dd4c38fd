# Policy core: CRD parsers, reservations, quota and GPULimitRange decisions.
gq_unit_test(test_policy test_policy.c)
gq_fuzz_target(crd fuzz/fuzz_crd.c)
