# kube-standin: an in-memory kube-apiserver stand-in for integration tests.
file(GLOB STANDIN_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/test/standin/*.c)
add_executable(kube-standin ${STANDIN_SRCS})
target_include_directories(kube-standin PRIVATE ${CMAKE_SOURCE_DIR}/test/standin)
target_link_libraries(kube-standin PRIVATE gq_core PkgConfig::MHD PkgConfig::JSONC PkgConfig::CURL
                      Threads::Threads)

# Shell tests: each starts its own stand-in on an ephemeral port.
foreach(t rest watch faults kubectl auth)
  add_test(NAME standin_${t}
           COMMAND bash ${CMAKE_SOURCE_DIR}/test/standin/tests/t_${t}.sh)
  set_tests_properties(standin_${t} PROPERTIES
    ENVIRONMENT "STANDIN_BIN=$<TARGET_FILE:kube-standin>;DATA=${CMAKE_SOURCE_DIR}/test/data/standin"
    TIMEOUT 180)
endforeach()
