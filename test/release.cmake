# make release (scripts/release.sh) into a folder of the build tree: every
# artifact there, SHA256SUMS verified, the krew manifest installed from the
# release's archives as krew does, the packaged Helm chart shown and rendered
# at the release version, a second release byte-for-byte the same
# (test/krew/release.sh). The image is left out here: image_runs_under_runc
# builds and runs it; release_image makes the whole release, the image
# included (needs root and Debian's mirror, as that test does).
gq_output_test(release_artifacts "release: ok"
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/krew/release.sh ${CMAKE_BINARY_DIR}/release-test
  PROPERTIES TIMEOUT 600)
gq_output_test(release_image "release: ok"
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/krew/release.sh ${CMAKE_BINARY_DIR}/release-image-test --image
  PROPERTIES TIMEOUT 900)
