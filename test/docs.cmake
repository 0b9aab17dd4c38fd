# README.md and docs/ link only inside the repository, to files and headings
# that exist (test/docs_links.py).
add_test(NAME docs_links COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/docs_links.py
                                 ${CMAKE_SOURCE_DIR})
# docs/e2e.md has a row for every e2e test; a page missing one fails (the
# check is shown to fail on a copy of the page with a row taken out).
gq_output_test(docs_e2e_tests_listed "e2e.md lists every e2e test"
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/docs_tests_listed.py ${CMAKE_SOURCE_DIR})
add_test(NAME docs_e2e_tests_listed_catches
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 1 1 "no row for e2e_quota"
          sh -c "f=$(mktemp) && grep -v '^| .e2e_quota. ' \"$1/docs/e2e.md\" >\"$f\" && python3 \"$0\" \"$1\" \"$f\"; rc=$?; rm -f \"$f\"; exit $rc"
          ${CMAKE_CURRENT_SOURCE_DIR}/docs_tests_listed.py ${CMAKE_SOURCE_DIR})
# Every test that README.md, docs/, deploy/ and scripts/ name exists (a
# values file once cited a test that never existed); shown to fail on a
# tree that names two missing tests beside a real one.
gq_output_test(docs_tests_named "every test named exists"
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/docs_tests_named.py ${CMAKE_SOURCE_DIR}
          ${CMAKE_BINARY_DIR})
add_test(NAME docs_tests_named_catches
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 1 2
          "^deploy/values.yaml:1: no test named helm_drift$"
          "^docs/page.md:1: ctest -R no_such_test selects no test$"
          python3 ${CMAKE_CURRENT_SOURCE_DIR}/docs_tests_named.py
          ${GQ_TEST_DATA}/docs-named-bad ${CMAKE_BINARY_DIR})
# README.md's command list is every subcommand's usage as --help prints it
# (a flag added to a command, and not to the README, fails here);
# `test/readme_usage.py build/gpuquota . --write` rewrites the list.
gq_output_test(readme_usage "README lists every command as --help shows it"
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/readme_usage.py ${GQ_BIN} ${CMAKE_SOURCE_DIR})
