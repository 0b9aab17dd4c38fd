# The e2e suite: gpuquota against a real control plane (kube-apiserver, etcd,
# kube-controller-manager, kube-scheduler, kwok) built by scripts/k8s-bin.sh,
# installed from deploy/ and driven by real kubectl (test/e2e/).
#
# One environment serves every e2e test: the e2e_up fixture starts it, e2e_down
# removes it, and the tests share the RESOURCE_LOCK so that one that restarts
# a component never runs beside another. Each test works in namespaces of
# its own. GQ_E2E=OFF leaves the suite out (it needs Go 1.24+ to build the
# control plane); `make test` always runs it.
option(GQ_E2E "Run the e2e suite against a real control plane" ON)
# The churn test's checker (test/e2e/tools/held_watch.py) on a made-up
# watch stream: a gated pod counts nothing until its gate goes, then passes
# the limit (one OVER line); deleting, Succeeded and other namespaces' pods
# count nothing.
gq_output_test(e2e_tool_held_watch
  "^1 8 8\n2 8 8\n3 16 16\nOVER after MODIFIED a/p2: a=16>8\n4 8 8\n5 8 8\n6 8 8\n?$"
  COMMAND sh -c "python3 \"$0\" --limit a=8 --out - <\"$1\""
          ${CMAKE_SOURCE_DIR}/test/e2e/tools/held_watch.py ${GQ_TEST_DATA}/held-watch/stream.json)
# create_parallel's reader of kubectl's output (test/e2e/tools/kubectl_results.py)
# on a made-up one: a created pod, a refusal over two lines between warnings,
# another created pod, and a file kubectl named neither way (its .out holds
# the line that named no file).
gq_output_test(e2e_tool_kubectl_results
  "^a.yaml 0 a created\nb.yaml 1 Error from server \\(Forbidden\\): error when creating \"D/b.yaml\": admission webhook \"validate.gpuquota.io\" denied the request: exceeded quota: race, requested: gpu-memory=4Gi\nand a second line of the same message\nc.yaml 2 Unable to connect to the server: dial tcp 127.0.0.1:1: connect: connection refused\nd.yaml 0 d created\n$"
  COMMAND sh -c "d=$(mktemp -d) && trap 'rm -rf \"$d\"' EXIT && cd \"$d\" && mkdir D && sed s/DIR/D/ \"$1\" >out && python3 \"$0\" split --show out D/a.yaml D/b.yaml D/c.yaml D/d.yaml"
          ${CMAKE_SOURCE_DIR}/test/e2e/tools/kubectl_results.py ${GQ_TEST_DATA}/kubectl-results/out.txt)
if(GQ_E2E)
  set(GQ_E2E_DIR ${CMAKE_BINARY_DIR}/e2e)
  set(GQ_E2E_ENV "GQ_E2E_DIR=${GQ_E2E_DIR};GQ=$<TARGET_FILE:gpuquota>;ROOT=${CMAKE_SOURCE_DIR}")
  add_test(NAME e2e_up COMMAND ${CMAKE_SOURCE_DIR}/test/e2e/suite.sh up ${GQ_E2E_DIR}
                                $<TARGET_FILE:gpuquota>)
  add_test(NAME e2e_down COMMAND ${CMAKE_SOURCE_DIR}/test/e2e/suite.sh down ${GQ_E2E_DIR})
  set_tests_properties(e2e_up PROPERTIES FIXTURES_SETUP e2e RESOURCE_LOCK e2e TIMEOUT 3600)
  set_tests_properties(e2e_down PROPERTIES FIXTURES_CLEANUP e2e RESOURCE_LOCK e2e TIMEOUT 120)
  file(GLOB GQ_E2E_TESTS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/test/e2e/t_*.sh)
  list(SORT GQ_E2E_TESTS)
  foreach(t ${GQ_E2E_TESTS})
    get_filename_component(name ${t} NAME_WE)
    string(REGEX REPLACE "^t_" "e2e_" name ${name})
    add_test(NAME ${name} COMMAND bash ${t})
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED e2e RESOURCE_LOCK e2e
                         ENVIRONMENT "${GQ_E2E_ENV}" TIMEOUT 600)
    gq_fail_lines(${name})
  endforeach()
  # `make soak` runs the churn for ten minutes (GQ_E2E_CHURN_SECONDS=600).
  set_tests_properties(e2e_preempt_churn PROPERTIES TIMEOUT 1500)
endif()
