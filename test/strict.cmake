# The rules of test/cmake/strict.cmake catch what they guard against: a
# throwaway project plants a test that exits 1 but prints its pass line, a
# FAIL line on the second line, and both a FAIL line and the pass line;
# exactly those three must fail, and the honest one pass.
add_test(NAME strict_rules_catch_faults
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 8 4
          "tests passed, 3 tests failed out of 4"
          "planted_exit_1 \\(Failed\\)" "planted_fail_line \\(Failed\\)"
          "planted_fail_and_pass \\(Failed\\)"
          sh -c "rm -rf \"$1\" && cmake -S \"$0\" -B \"$1\" -DGQ_STRICT=\"$2\" >/dev/null && ctest --test-dir \"$1\""
          ${CMAKE_CURRENT_SOURCE_DIR}/ctest_meta ${CMAKE_BINARY_DIR}/test/ctest-meta
          ${CMAKE_CURRENT_SOURCE_DIR}/cmake/strict.cmake)
# The logs of the replicas the e2e and Helm tests start are scanned for
# sanitizer reports (test/sanitizer_reports.sh): a planted report is found,
# a clean log is not.
add_test(NAME sanitizer_reports_catch_planted
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/expect_exit.sh 1 2
          "^FAIL - sanitizer report in planted.log$" "detected memory leaks"
          sh -c "d=$(mktemp -d) && printf 'ok\\n==7==ERROR: LeakSanitizer: detected memory leaks\\n' >\"$d/planted.log\" && printf '{\"level\":\"info\"}\\n' >\"$d/clean.log\" && \"$0\" \"$d/clean.log\" \"$d/planted.log\"; rc=$?; rm -rf \"$d\"; exit $rc"
          ${CMAKE_CURRENT_SOURCE_DIR}/sanitizer_reports.sh)
add_test(NAME sanitizer_reports_pass_clean
  COMMAND sh -c "d=$(mktemp -d) && printf 'runtime errors: none\\n' >\"$d/a.log\" && \"$0\" \"$d/a.log\"; rc=$?; rm -rf \"$d\"; exit $rc"
          ${CMAKE_CURRENT_SOURCE_DIR}/sanitizer_reports.sh)
