# The Helm chart (deploy/helm/gpuquota): lint, every values example, the same
# objects as the kustomize tree (test/helm/chart.sh); and install, upgrade and
# uninstall on a real control plane of its own (test/helm/install.sh), not
# the e2e suite's, so it runs beside it. helm is built by scripts/k8s-bin.sh.
gq_output_test(helm_chart "helm chart: ok" COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/helm/chart.sh ${GQ_BIN}
  PROPERTIES TIMEOUT 600)
if(GQ_E2E)
  gq_output_test(helm_install "all checks passed"
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/helm/install.sh ${CMAKE_BINARY_DIR}/helm-e2e ${GQ_BIN}
    PROPERTIES TIMEOUT 1200)
  # cert-manager mode with cert-manager's controller and CA injector running
  # (test/helm/certmanager.sh; scripts/k8s-bin.sh builds them).
  gq_output_test(helm_certmanager "all checks passed"
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/helm/certmanager.sh ${CMAKE_BINARY_DIR}/helm-cm-e2e ${GQ_BIN}
    PROPERTIES TIMEOUT 900)
endif()
