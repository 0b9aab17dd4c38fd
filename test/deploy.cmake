# The manifests under deploy/ render and carry a valid configuration.
gq_output_test(deploy_manifests "deploy: ok"
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/deploy_check.sh ${GQ_BIN})
