# How a test's outcome is read, in one place (included by test/CMakeLists.txt
# and by the throwaway project test/ctest_meta that proves it):
#   - a line starting "FAIL - " anywhere in the output fails a test (ctest
#     matches its regular expressions against the whole output, so "^" alone
#     would only look at the first line);
#   - a test judged by its output (PASS_REGULAR_EXPRESSION) must also exit 0:
#     ctest ignores the exit status of such a test, so run_strict.sh prints
#     "gq-test: exit status N" when it is not 0, and that line fails it.
set(GQ_RUN_STRICT ${CMAKE_CURRENT_LIST_DIR}/../run_strict.sh)
set(GQ_FAIL_LINES "^FAIL - ;\nFAIL - ;gq-test: exit status [0-9]+")

# gq_output_props(NAME REGEX [prop value...]): a test added with
# ${GQ_RUN_STRICT} before its command passes when the command exits 0, its
# output matches REGEX and holds no FAIL line.
function(gq_output_props name regex)
  set_tests_properties(${name} PROPERTIES PASS_REGULAR_EXPRESSION "${regex}"
                       FAIL_REGULAR_EXPRESSION "${GQ_FAIL_LINES}" ${ARGN})
endfunction()

# gq_output_test(NAME REGEX COMMAND cmd [args...] [PROPERTIES prop value...]):
# the same, adding the test. The arguments pass through a CMake list: none
# may hold a ';' (gq_sh_test adds its script itself for that reason).
function(gq_output_test name regex)
  cmake_parse_arguments(T "" "" "COMMAND;PROPERTIES" ${ARGN})
  add_test(NAME ${name} COMMAND ${GQ_RUN_STRICT} ${T_COMMAND})
  gq_output_props(${name} "${regex}" ${T_PROPERTIES})
endfunction()

# gq_fail_lines(NAME...): tests judged by their exit status, also failed by
# a FAIL line (a check that printed FAIL and forgot to exit non-zero).
function(gq_fail_lines)
  set_tests_properties(${ARGN} PROPERTIES FAIL_REGULAR_EXPRESSION "${GQ_FAIL_LINES}")
endfunction()
