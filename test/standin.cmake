# kube-standin: an in-memory kube-apiserver stand-in for integration tests.
file(GLOB STANDIN_SRCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/test/standin/*.c)
add_executable(kube-standin ${STANDIN_SRCS})
target_include_directories(kube-standin PRIVATE ${CMAKE_SOURCE_DIR}/test/standin)
target_link_libraries(kube-standin PRIVATE gq_core PkgConfig::MHD PkgConfig::JSONC PkgConfig::CURL
                      Threads::Threads)
