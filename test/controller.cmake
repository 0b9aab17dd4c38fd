# Controller (controller/): records, store, reconcile and queue unit tests.
gq_unit_test(test_ctl test_ctl.c LIBS gq_controller)

# The running controller against the kube-apiserver stand-in (real binary,
# real kubectl); see test/controller/t_controller.sh.
add_test(NAME controller_standin
         COMMAND bash ${CMAKE_SOURCE_DIR}/test/controller/t_controller.sh)
set_tests_properties(controller_standin PROPERTIES
  ENVIRONMENT "STANDIN_BIN=$<TARGET_FILE:kube-standin>;DATA=${CMAKE_SOURCE_DIR}/test/data/standin;GQ_BIN=$<TARGET_FILE:gpuquota>;CRDS=${CMAKE_SOURCE_DIR}/deploy/crds"
  TIMEOUT 180)
