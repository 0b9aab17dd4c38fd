# The validating webhook: the /validate decision over the in-memory store
# (charging, conflicts, rollback, dry run, tamper, group commit under threads).
gq_unit_test(test_validate test_validate.c LIBS gq_webhook gq_kube)
