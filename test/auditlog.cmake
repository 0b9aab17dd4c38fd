# gpuquota audit: the reader (cli/auditlog), its fuzz target, and the
# subcommand over the sample logs in test/data/audit.
gq_unit_test(test_auditlog unit/cli/test_auditlog.c LIBS gq_cli)
# The schema: writer output read back, every field.
gq_unit_test(test_audit_record unit/quota/test_audit_record.c LIBS gq_cli)
gq_fuzz_target(auditlog ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_auditlog.c LIBS gq_cli)

set(GQ_AUDIT_DATA ${GQ_TEST_DATA}/audit)

# gq_cli_test(audit NAME STATUS ARGS arg... EXPECT regex...)
gq_cli_test(audit table 0 ARGS ${GQ_AUDIT_DATA}/gpuquota.log
  EXPECT "^TIME +WEBHOOK +OP +NAMESPACE +NAME +USER +DECISION +CHARGE/REASON$"
         "^2026-11-21T15:02:12Z  mutate    CREATE   team-a            train- +alice +allowed   gpu-memory=16Gi,gpus=0,gpu-pods=1$"
         "^2026-11-21T15:10:00Z  validate  CREATE   team-a            big +bob +denied    exceeded quota: team-a, requested: gpu-memory=24Gi"
         "  ml-b  +b-16 +carol +dry-run ")
gq_cli_test(audit table_events 0 ARGS ${GQ_AUDIT_DATA}/apiserver.log
  EXPECT "^2026-11-21T16:00:00Z  validate  CREATE   team-a            train-x7k2p +alice +allowed   gpu-memory=16Gi,gpus=0,gpu-pods=1$"
         "^2026-11-21T16:25:00Z  validate  UPDATE   team-a            train-1 +mallory +denied    changing gpuquota.io/"
         "^2026-11-21T16:15:00Z  validate  CREATE   ml-b              - +carol +error     Internal error occurred: failed calling webhook .*~$"
         "^gpuquota audit: 5 records read; skipped 0 malformed lines, 0 lines longer than 1048576 bytes, 2 lines that are not admission records$")
gq_cli_test(audit json 0 ARGS -o json --user bob ${GQ_AUDIT_DATA}/gpuquota.log ${GQ_AUDIT_DATA}/apiserver.log
  EXPECT "^\\{\"source\":\"gpuquota\",\"time\":\"2026-11-21T15:10:00.000001Z\",.*\"decision\":\"denied\",.*\"charge\":\\{\"gpu-memory\":\"24Gi\",\"gpu-pods\":\"1\",\"gpus\":\"0\"\\}\\}$"
         "^\\{\"source\":\"kube-apiserver\",\"time\":\"2026-11-21T16:05:00.000000Z\",\"uid\":\"a1d1-0002\",.*\"code\":403,")
gq_cli_test(audit summary 0 ARGS -o summary ${GQ_AUDIT_DATA}/gpuquota.log ${GQ_AUDIT_DATA}/apiserver.log
  EXPECT "^NAMESPACE +ADMITTED +DENIED +ERRORS +GPU-MEMORY +TOP DENY REASONS$"
         "^ml-b +3 +1 +1 +8Gi +container \"c\": nvidia.com/gpu \"1.5\" is not valid \\(1\\)$"
         "^team-a +3 +4 +0 +32Gi +changing gpuquota.io/ labels and annotations is reserved to gpuquota \\(label gpuquota.io/managed\\) \\(2\\); exceeded quota: team-a \\(2\\)$"
         "^TOTAL +6 +5 +1 +40Gi +")
gq_cli_test(audit denied_namespace 0 ARGS --denied --namespace team-a ${GQ_AUDIT_DATA}/gpuquota.log
  EXPECT "  big +bob +denied " "  train-1 +mallory +denied ")
gq_cli_test(audit since_rfc3339 0 ARGS --since 2026-11-21T15:35:00Z -o summary ${GQ_AUDIT_DATA}/gpuquota.log
  EXPECT "^ml-b +1 +0 +0 +8Gi +-$" "^team-a +0 +1 +0 +0 ")
gq_cli_test(audit since_duration 0 ARGS --since 1000000d -o summary ${GQ_AUDIT_DATA}/gpuquota.log
  EXPECT "^TOTAL +4 +3 +0 +24Gi ")
gq_cli_test(audit tenant 0 ARGS --tenant ml --state ${GQ_AUDIT_DATA}/state.yaml -o summary
                  ${GQ_AUDIT_DATA}/gpuquota.log
  EXPECT "^ml-b +2 +1 +0 +8Gi " "^TOTAL +2 +1 +0 +8Gi ")
gq_cli_test(audit rotated 0 ARGS -o summary ${GQ_AUDIT_DATA}/rotated/audit.log.1 ${GQ_AUDIT_DATA}/rotated/audit.log
  EXPECT "^TOTAL +4 +3 +0 +24Gi ")
gq_cli_test(audit malformed 0 ARGS -o json ${GQ_AUDIT_DATA}/malformed.log
  EXPECT "\"uid\":\"ok-1\""
         "^gpuquota audit: 1 records read; skipped 4 malformed lines, 0 lines longer than 1048576 bytes, 1 lines that are not admission records$")
gq_cli_test(audit missing_file 2 ARGS ${GQ_AUDIT_DATA}/nope.log ${GQ_AUDIT_DATA}/gpuquota.log
  EXPECT "^gpuquota audit: .*nope.log: No such file or directory$" "  big +bob +denied ")
gq_cli_test(audit bad_since 2 ARGS --since 2w EXPECT "^gpuquota audit: --since 2w: not a duration")
gq_cli_test(audit bad_output 2 ARGS -o yaml EXPECT "^usage: gpuquota audit")
gq_cli_test(audit bad_option 2 ARGS --frobnicate EXPECT "^usage: gpuquota audit")
gq_cli_test(audit tenant_needs_state 2 ARGS --tenant ml
  EXPECT "^gpuquota audit: --tenant needs --state FILE")
gq_cli_test(audit tenant_unknown 2 ARGS --tenant nope --state ${GQ_AUDIT_DATA}/state.yaml
  EXPECT "^gpuquota audit: --state: GPUTenantQuota nope is not in the --state files$")
gq_cli_test(audit help 0 ARGS --help EXPECT "^usage: gpuquota audit")

# Standard input (the default and "-"), a line over 1 MiB, binary garbage.
add_test(NAME audit_stdin_long_line
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/audit_stdin.sh ${GQ_BIN} ${GQ_AUDIT_DATA})
