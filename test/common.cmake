# The common layer (common/): leaf modules every layer links.
gq_unit_test(test_strutil test_strutil.c)
gq_unit_test(test_common test_common.c)
gq_unit_test(test_htab test_htab.c)
