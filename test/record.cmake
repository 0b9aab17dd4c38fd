# The admission record and the pod that exists (quota/record.h, quota/pod.h):
# unit tests and the record parser's fuzz target.
gq_unit_test(test_record unit/quota/test_record.c)
gq_fuzz_target(record ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_record.c)
# Re-applies of a rewritten pod normalised back (quota/update.h).
gq_unit_test(test_update unit/quota/test_update.c)
