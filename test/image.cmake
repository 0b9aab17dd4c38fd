# gpuquota's container image, built from Debian's packages (make image,
# scripts/build-image.sh), read by skopeo and run by runc with a read-only
# root as user 65532 (test/image_check.sh). Needs root for runc.
# The archive it leaves (image-check/gpuquota.tar) is the one e2e_real_node
# loads: the image is built once.
gq_output_test(image_runs_under_runc "image: ok"
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/image_check.sh ${CMAKE_BINARY_DIR}/image-check
  PROPERTIES TIMEOUT 600 FIXTURES_SETUP gq_image)

# The image running as pods on a real node: kubelet, kube-proxy, containerd,
# runc and CNI beside a control plane of its own, deploy/ applied as
# docs/install.md says (test/real_node.sh). Needs root and the control plane
# binaries (make k8s-bin); shares the e2e lock so that it never runs beside
# another control plane.
if(GQ_E2E)
  gq_output_test(e2e_real_node "all checks passed"
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/real_node.sh $<TARGET_FILE:gpuquota>
            ${CMAKE_BINARY_DIR}/real-node ${CMAKE_BINARY_DIR}/image-check/gpuquota.tar
    PROPERTIES TIMEOUT 900 RESOURCE_LOCK e2e FIXTURES_REQUIRED gq_image)
  gq_fail_lines(e2e_real_node)
endif()

# deploy/Dockerfile built as it is by buildah against base images made from
# Debian's packages (test/dockerfile_build.sh), so a broken Dockerfile fails
# make test. Needs root.
gq_output_test(dockerfile_build "dockerfile: ok"
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/dockerfile_build.sh ${CMAKE_BINARY_DIR}/dockerfile-build
  PROPERTIES TIMEOUT 900)
gq_fail_lines(dockerfile_build)
