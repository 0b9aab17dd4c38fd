# The krew manifest of kubectl gpuquota (deploy/krew/gpuquota.yaml): what krew
# requires of it, and krew's install from a local archive made by
# scripts/release-archive.sh, without network (test/krew/check.py).
gq_output_test(krew_manifest "krew manifest: ok"
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/krew/check.py ${PROJECT_SOURCE_DIR}/deploy/krew/gpuquota.yaml
          ${GQ_BIN} ${CMAKE_BINARY_DIR}/krew-test
  PROPERTIES TIMEOUT 60)
