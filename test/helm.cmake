# The Helm chart (deploy/helm/gpuquota): lint, every values example, the same
# objects as the kustomize tree (test/helm/chart.sh); and install, upgrade and
# uninstall on a real control plane of its own (test/helm/install.sh), not
# the e2e suite's, so it runs beside it. helm is built by scripts/k8s-bin.sh.
add_test(NAME helm_chart COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/helm/chart.sh ${GQ_BIN})
set_tests_properties(helm_chart PROPERTIES PASS_REGULAR_EXPRESSION "helm chart: ok"
                     FAIL_REGULAR_EXPRESSION "^FAIL - " TIMEOUT 600)
if(GQ_E2E)
  add_test(NAME helm_install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/helm/install.sh
                                     ${CMAKE_BINARY_DIR}/helm-e2e ${GQ_BIN})
  set_tests_properties(helm_install PROPERTIES PASS_REGULAR_EXPRESSION "all checks passed"
                       FAIL_REGULAR_EXPRESSION "^FAIL - " TIMEOUT 1200)
  # cert-manager mode with cert-manager's controller and CA injector running
  # (test/helm/certmanager.sh; scripts/k8s-bin.sh builds them).
  add_test(NAME helm_certmanager COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/helm/certmanager.sh
                                         ${CMAKE_BINARY_DIR}/helm-cm-e2e ${GQ_BIN})
  set_tests_properties(helm_certmanager PROPERTIES PASS_REGULAR_EXPRESSION "all checks passed"
                       FAIL_REGULAR_EXPRESSION "^FAIL - " TIMEOUT 900)
endif()
