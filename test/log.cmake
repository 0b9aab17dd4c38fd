gq_unit_test(test_log unit/common/test_log.c)
