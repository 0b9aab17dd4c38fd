#!/bin/sh
# run_strict.sh COMMAND [ARGS...]: run COMMAND as it is; when it exits
# non-zero, say so on a line of its own and exit with its status. ctest
# ignores the exit status of a test that has PASS_REGULAR_EXPRESSION, so
# gq_output_test (test/cmake/strict.cmake) fails on that line instead.
"$@"
rc=$?
[ "$rc" -eq 0 ] || echo "gq-test: exit status $rc"
exit "$rc"
