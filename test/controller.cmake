# Controller (controller/): records, store, reconcile and queue unit tests.
gq_unit_test(test_ctl test_ctl.c LIBS gq_controller)
