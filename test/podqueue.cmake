# Queueing core: the gate, pod groups, queue order and what can be admitted now.
gq_unit_test(test_podqueue unit/quota/test_podqueue.c)
# Preemption inside a quota: the victims (quota/preempt.h).
gq_unit_test(test_preempt unit/quota/test_preempt.c)
