# gpuquota's container image, built from Debian's packages (make image,
# scripts/build-image.sh), read by skopeo and run by runc with a read-only
# root as user 65532 (test/image_check.sh). Needs root for runc.
gq_output_test(image_runs_under_runc "image: ok"
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/image_check.sh ${CMAKE_BINARY_DIR}/image-check
  PROPERTIES TIMEOUT 600)
