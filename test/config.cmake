# Configuration: embedded defaults, catalog, lookups.
gq_unit_test(test_config_catalog unit/quota/test_config_catalog.c)
gq_unit_test(test_config_parse unit/quota/test_config_parse.c)

# The CLI: `config default` output must pass `config check`; a bad file
# exits 2 with file:line on stderr; usage errors exit 2.
set(GQ_CONFIG_DATA ${GQ_TEST_DATA}/config)
gq_output_test(cli_config_default "^backend: aliyun\nmemoryUnit: 1Gi\n"
  COMMAND ${GQ_BIN} config default)
gq_sh_test(cli_config_default_checks_stdin
  "set -e; \"$0\" config default | \"$0\" config check -"
  "^<stdin>: ok\n$")
gq_sh_test(cli_config_default_checks_file
  "set -e; f=$(mktemp); trap 'rm -f \"$f\"' EXIT; \"$0\" config default >\"$f\"; \"$0\" config check \"$f\" | sed \"s|^$f|FILE|\""
  "^FILE: ok\n$")
gq_output_test(cli_config_check_good "^${GQ_CONFIG_DATA}/good/full.yaml: ok\n$"
  COMMAND ${GQ_BIN} config check ${GQ_CONFIG_DATA}/good/full.yaml)
# Exit status must be exactly 2 and stderr must carry file:line; stdout empty.
gq_sh_test(cli_config_check_bad
  "out=$(\"$0\" config check \"$1\" 2>/dev/null); rc=$?; err=$(\"$0\" config check \"$1\" 2>&1 >/dev/null); [ $rc -eq 2 ] && [ -z \"$out\" ] && echo \"rc=$rc $err\""
  "^rc=2 ${GQ_CONFIG_DATA}/bad/unknown-key.yaml:2: configuration: unknown key \"backends\"" ${GQ_CONFIG_DATA}/bad/unknown-key.yaml)
gq_sh_test(cli_config_check_missing_file
  "\"$0\" config check /nonexistent/gpuquota.yaml; echo \"rc=$?\""
  "^/nonexistent/gpuquota.yaml: No such file or directory\nrc=2\n$")
gq_sh_test(cli_config_usage
  "\"$0\" config 2>&1; echo \"rc=$?\"; \"$0\" config check 2>/dev/null; echo \"rc=$?\"; \"$0\" config bogus 2>/dev/null; echo \"rc=$?\""
  "^usage: gpuquota config default\n.*\nrc=2\nrc=2\nrc=2\n$")
gq_output_test(cli_config_help "^usage: gpuquota config default\n"
  COMMAND ${GQ_BIN} config --help)

gq_fuzz_target(config ${CMAKE_SOURCE_DIR}/test/fuzz/fuzz_config.c)
