# The common layer (common/): leaf modules every layer links.
gq_unit_test(test_strutil unit/common/test_strutil.c)
gq_unit_test(test_common unit/common/test_common.c)
gq_unit_test(test_buf unit/common/test_buf.c)
gq_unit_test(test_htab unit/common/test_htab.c)
gq_unit_test(test_grow unit/common/test_grow.c)
gq_unit_test(test_fifo unit/common/test_fifo.c)
