# The binary starts and dispatches.
add_test(NAME cli_version COMMAND gpuquota version)
set_tests_properties(cli_version PROPERTIES PASS_REGULAR_EXPRESSION "^gpuquota [0-9]+\\.[0-9]+\\.[0-9]+")
add_test(NAME cli_unknown_command COMMAND gpuquota no-such-command)
set_tests_properties(cli_unknown_command PROPERTIES WILL_FAIL TRUE)

# The option parser every subcommand uses (cli/cli_args.h).
gq_unit_test(test_cli_args test_cli_args.c LIBS gq_cli)
