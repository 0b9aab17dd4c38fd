# Queueing core: the gate, pod groups, queue order and what can be admitted now.
gq_unit_test(test_podqueue unit/quota/test_podqueue.c)
