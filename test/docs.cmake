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
