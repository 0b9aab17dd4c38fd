gq_unit_test(test_audit unit/webhook/test_audit.c LIBS gq_webhook gq_kube)
