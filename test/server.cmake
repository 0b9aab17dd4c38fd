# webhook/: metrics exposition, the handler seam (no sockets) and the HTTPS
# server driven by real clients.
gq_unit_test(test_metrics test_metrics.c LIBS gq_webhook gq_kube)
