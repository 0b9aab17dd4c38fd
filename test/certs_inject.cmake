# `gpuquota certs inject`: the bundle, the object edit and the GET/PUT loop
# over a fake API; then the command end to end against the stand-in with
# kubectl (read back, idempotence, injected 409, missing objects, bad CAs).
gq_unit_test(test_certs_inject unit/certs/test_certs_inject.c LIBS gq_certs gq_kube)
gq_standin_script(certs_inject 120)
