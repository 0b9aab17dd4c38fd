# The manifests under deploy/ render and carry a valid configuration.
add_test(NAME deploy_manifests COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/deploy_check.sh ${GQ_BIN})
set_tests_properties(deploy_manifests PROPERTIES PASS_REGULAR_EXPRESSION "deploy: ok")
