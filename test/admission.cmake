# JSON Patch, the AdmissionReview codec and the GPU request rewrite.
gq_unit_test(test_jsonpatch unit/quota/test_jsonpatch.c)
gq_fuzz_target(jsonpatch ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_jsonpatch.c)
gq_unit_test(test_review unit/webhook/test_review.c support/admission_testutil.c LIBS gq_webhook)
gq_fuzz_target(review ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_review.c LIBS gq_webhook)
gq_unit_test(test_rewrite unit/quota/test_rewrite.c support/admission_testutil.c)
gq_unit_test(test_mutation unit/webhook/test_mutation.c support/admission_testutil.c LIBS gq_webhook)
# The pod CREATE decision over a snapshot (quota/admission.h).
gq_unit_test(test_admission unit/quota/test_admission.c)
# The in-memory snapshot and the offline verdict on it (quota/snapshot.h).
gq_unit_test(test_snapshot unit/quota/test_snapshot.c)
# What only gpuquota may change on its records (quota/tamper.h).
gq_unit_test(test_tamper unit/quota/test_tamper.c)
