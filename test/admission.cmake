# JSON Patch, the AdmissionReview codec and the GPU request rewrite.
gq_unit_test(test_jsonpatch test_jsonpatch.c)
gq_fuzz_target(jsonpatch ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_jsonpatch.c)
