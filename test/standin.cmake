# kube-standin: an in-memory kube-apiserver stand-in for integration tests.
# Everything but the HTTP adapter is a library, so fuzz targets can drive the
# parsers without a socket.
file(GLOB STANDIN_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/test/standin/*.c)
list(REMOVE_ITEM STANDIN_SRCS ${CMAKE_SOURCE_DIR}/test/standin/main.c)
add_library(standin_core STATIC ${STANDIN_SRCS})
target_include_directories(standin_core PUBLIC ${CMAKE_SOURCE_DIR}/test/standin)
target_link_libraries(standin_core PUBLIC gq_core PkgConfig::JSONC PkgConfig::CURL Threads::Threads)
add_executable(kube-standin ${CMAKE_SOURCE_DIR}/test/standin/main.c)
target_link_libraries(kube-standin PRIVATE standin_core PkgConfig::MHD)
gq_fuzz_target(standin_parsers ${CMAKE_SOURCE_DIR}/test/fuzz/fuzz_standin_parsers.c
               LIBS standin_core)

# Shell tests: each starts its own stand-in on an ephemeral port.
foreach(t rest watch faults kubectl auth webhooks deploy)
  add_test(NAME standin_${t}
           COMMAND bash ${CMAKE_SOURCE_DIR}/test/standin/tests/t_${t}.sh)
  set_tests_properties(standin_${t} PROPERTIES
    ENVIRONMENT "STANDIN_BIN=$<TARGET_FILE:kube-standin>;DATA=${CMAKE_SOURCE_DIR}/test/data/standin;SRC=${CMAKE_SOURCE_DIR}"
    TIMEOUT 180)
endforeach()

gq_unit_test(test_standin_units standin/tests/test_standin_units.c LIBS standin_core)
