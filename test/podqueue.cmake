# Queueing core: the gate, pod groups, queue order and what can be admitted now.
gq_unit_test(test_podqueue unit/quota/test_podqueue.c)
# Preemption inside a quota: the victims (quota/preempt.h).
gq_unit_test(test_preempt unit/quota/test_preempt.c)
gq_unit_test(test_preempt_claims unit/quota/test_preempt_claims.c)
# Borrowing across tenants and fair sharing between borrowers.
gq_unit_test(test_fairshare unit/quota/test_fairshare.c)
if(GQ_BENCH)
  # The admission pass's decisions with a deep queue and preemption on.
  add_executable(bench_preempt_micro bench/preempt_micro.c)
  target_link_libraries(bench_preempt_micro PRIVATE gq_core)
  set_target_properties(bench_preempt_micro PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_CURRENT_BINARY_DIR})
endif()
