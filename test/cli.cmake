# The binary starts and dispatches.
gq_output_test(cli_version "^gpuquota [0-9]+\\.[0-9]+\\.[0-9]+" COMMAND ${GQ_BIN} version)
add_test(NAME cli_unknown_command COMMAND gpuquota no-such-command)
set_tests_properties(cli_unknown_command PROPERTIES WILL_FAIL TRUE)

# The option parser every subcommand uses (cli/cli_args.h).
gq_unit_test(test_cli_args unit/cli/test_cli_args.c LIBS gq_cli)
