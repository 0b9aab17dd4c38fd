# /mutate in service: the HTTP adapter driven without sockets.
gq_unit_test(test_mutate_http test_mutate_http.c admission_testutil.c LIBS gq_webhook gq_kube)
