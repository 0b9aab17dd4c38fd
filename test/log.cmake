gq_unit_test(test_log test_log.c)
