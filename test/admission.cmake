# JSON Patch, the AdmissionReview codec and the GPU request rewrite.
gq_unit_test(test_jsonpatch test_jsonpatch.c)
gq_fuzz_target(jsonpatch ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_jsonpatch.c)
gq_unit_test(test_review test_review.c admission_testutil.c LIBS gq_webhook)
gq_fuzz_target(review ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_review.c LIBS gq_webhook)
gq_unit_test(test_rewrite test_rewrite.c admission_testutil.c)
gq_unit_test(test_mutation test_mutation.c admission_testutil.c LIBS gq_webhook)
